"""RNN programs: ``tf.nn.rnn_cell`` cells and wrappers, ``dynamic_rnn`` and friends.

Each program builds a network under TF and flowrt, gives every variable the same seeded
value by variable name, and compares the variable names and shapes (so TF checkpoints
line up), the outputs and final states, and their gradients. Error programs compare the
exception classes.

Known, deliberate difference: TF 1.15 unpacks a cell's state without checking it, so a
``BasicLSTMCell`` given one tensor instead of an ``LSTMStateTuple`` fails with a
``TypeError`` (iterating a graph tensor); flowrt checks the state's structure first and
raises a ``ValueError`` naming the cell (what the issue asks for). That case is checked
on flowrt alone.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from compat_harness import flowrt_module, run_custom


def seeded(name: str, shape: list, dtype) -> np.ndarray:
    """A value for the variable ``name``: the same in both implementations."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return rng.uniform(-0.6, 0.6, shape).astype(dtype)


def _flat(x):
    if isinstance(x, dict):
        return [v for k in sorted(x) for v in _flat(x[k])]
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in _flat(item)]
    return [x]


def rnn_program(build, grads: bool = False, train_steps: int = 0, names: bool = False):
    """``build(tf) -> (fetches, feeds)``; returns what to compare: variable names and
    shapes, fetched values with their static shapes and dtypes, and optionally the
    gradients of their sum with respect to every trainable variable, or the losses of
    a few GradientDescent steps (the first fetch is the loss); with ``names`` the
    fetched tensors' names too."""
    def fn(tf):
        fetches, feeds = build(tf)
        flat = _flat(fetches)
        info = [(t.dtype.name, t.shape.as_list() if t.shape.ndims is not None else None)
                + ((t.name,) if names else ()) for t in flat]
        variables = [(v.name, v.shape.as_list()) for v in tf.global_variables()]
        extra = []
        if grads:
            total = tf.add_n([tf.reduce_sum(t) for t in flat])
            extra = tf.gradients(total, tf.trainable_variables())
        train = tf.train.GradientDescentOptimizer(0.3).minimize(flat[0]) \
            if train_steps else None
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for v in tf.global_variables():
                v.load(seeded(v.op.name, v.shape.as_list(),
                              v.dtype.base_dtype.as_numpy_dtype), sess)
            values = sess.run(flat + extra, feeds)
            losses = []
            for _ in range(train_steps):
                sess.run(train, feeds)
                losses.append(sess.run(flat[0], feeds))
        return {"variables": variables, "info": info, "values": values, "losses": losses}
    return fn


def check(build, rtol=2e-5, atol=2e-6, **kw):
    return run_custom(rnn_program(build, **kw), rtol=rtol, atol=atol)


X = np.random.default_rng(3).standard_normal((3, 5, 4)).astype(np.float32)
SEQ = np.array([5, 2, 0], np.int32)


def _x(tf, shape=(3, 5, 4), dtype=None):
    p = tf.placeholder(dtype or tf.float32, [None if d is None else d for d in shape])
    return p


# -- dynamic_rnn over each cell ----------------------------------------------------------
CELLS = {
    "basic_rnn": lambda tf: tf.nn.rnn_cell.BasicRNNCell(6),
    "basic_rnn_relu": lambda tf: tf.nn.rnn_cell.BasicRNNCell(6, activation=tf.nn.relu),
    "gru": lambda tf: tf.nn.rnn_cell.GRUCell(6),
    "basic_lstm": lambda tf: tf.nn.rnn_cell.BasicLSTMCell(6),
    "basic_lstm_fb": lambda tf: tf.nn.rnn_cell.BasicLSTMCell(6, forget_bias=0.3),
    "basic_lstm_concat": lambda tf: tf.nn.rnn_cell.BasicLSTMCell(6, state_is_tuple=False),
    "lstm": lambda tf: tf.nn.rnn_cell.LSTMCell(6),
    "lstm_peep_clip": lambda tf: tf.nn.rnn_cell.LSTMCell(6, use_peepholes=True,
                                                         cell_clip=0.2),
    "lstm_proj": lambda tf: tf.nn.rnn_cell.LSTMCell(6, num_proj=3, proj_clip=0.1),
    "lstm_all_concat": lambda tf: tf.nn.rnn_cell.LSTMCell(
        6, use_peepholes=True, num_proj=3, state_is_tuple=False, forget_bias=0.5),
    "lstm_shards": lambda tf: tf.nn.rnn_cell.LSTMCell(6, num_proj=3, num_unit_shards=2,
                                                      num_proj_shards=3),
    "multi": lambda tf: tf.nn.rnn_cell.MultiRNNCell(
        [tf.nn.rnn_cell.BasicLSTMCell(5), tf.nn.rnn_cell.GRUCell(4),
         tf.nn.rnn_cell.BasicRNNCell(3)]),
    "multi_concat": lambda tf: tf.nn.rnn_cell.MultiRNNCell(
        [tf.nn.rnn_cell.GRUCell(4), tf.nn.rnn_cell.BasicRNNCell(3)], state_is_tuple=False),
    "wrappers": lambda tf: tf.nn.rnn_cell.MultiRNNCell([
        tf.nn.rnn_cell.DropoutWrapper(tf.nn.rnn_cell.BasicLSTMCell(4)),
        tf.nn.rnn_cell.ResidualWrapper(tf.nn.rnn_cell.GRUCell(4)),
        tf.nn.rnn_cell.DeviceWrapper(tf.nn.rnn_cell.GRUCell(4), "/cpu:0")]),
}


@pytest.mark.parametrize("seq", [False, True], ids=["full", "seq_len"])
@pytest.mark.parametrize("cell", sorted(CELLS))
def test_dynamic_rnn(cell, seq):
    def build(tf):
        x = _x(tf)
        out, state = tf.nn.dynamic_rnn(CELLS[cell](tf), x, dtype=tf.float32,
                                       sequence_length=SEQ if seq else None)
        return (out, state), {x: X}

    check(build, names=True)


@pytest.mark.parametrize("cell", ["basic_lstm", "gru", "lstm_proj", "multi"])
def test_dynamic_rnn_gradients(cell):
    def build(tf):
        x = _x(tf)
        out, state = tf.nn.dynamic_rnn(CELLS[cell](tf), x, dtype=tf.float32,
                                       sequence_length=[5, 3, 1])
        return (out, state), {x: X}

    check(build, grads=True, rtol=1e-4, atol=1e-5)


def test_dynamic_rnn_time_major_initial_state_and_unknown_shapes():
    def build(tf):
        x = tf.placeholder(tf.float32, [None, None, 4])
        h0 = tf.placeholder(tf.float32, [None, 6])
        cell = tf.nn.rnn_cell.GRUCell(6)
        out, state = tf.nn.dynamic_rnn(cell, x, initial_state=h0, time_major=True,
                                       scope="my_rnn")
        return (out, state), {x: X.transpose(1, 0, 2), h0: np.ones((5, 6), np.float32)}

    check(build)


def test_dynamic_rnn_float64_and_parallel_iterations():
    def build(tf):
        x = tf.constant(X.astype(np.float64))
        out, state = tf.nn.dynamic_rnn(tf.nn.rnn_cell.BasicLSTMCell(3), x, dtype=tf.float64,
                                       parallel_iterations=1, swap_memory=True)
        return (out, state), None

    check(build, rtol=1e-10, atol=1e-12)


def test_training_steps():
    def build(tf):
        x = _x(tf)
        y = tf.constant(np.arange(15).reshape(3, 5) % 3)
        cell = tf.nn.rnn_cell.MultiRNNCell([tf.nn.rnn_cell.BasicLSTMCell(5)
                                            for _ in range(2)])
        out, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        logits = tf.tensordot(out, tf.get_variable("softmax_w", [5, 3]), 1)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=logits))
        return [loss], {x: X}

    r = check(build, train_steps=3, rtol=1e-4, atol=1e-5)
    assert r["losses"][-1] < r["values"][0]


# -- the other RNN functions ---------------------------------------------------------------
@pytest.mark.parametrize("seq", [False, True], ids=["full", "seq_len"])
def test_bidirectional_dynamic_rnn(seq):
    def build(tf):
        x = _x(tf)
        outs, states = tf.nn.bidirectional_dynamic_rnn(
            tf.nn.rnn_cell.BasicLSTMCell(4), tf.nn.rnn_cell.GRUCell(3), x,
            sequence_length=SEQ if seq else None, dtype=tf.float32)
        return (outs, states), {x: X}

    check(build)


@pytest.mark.parametrize("seq", [False, True], ids=["full", "seq_len"])
def test_static_rnn_and_static_bidirectional(seq):
    def build(tf):
        x = _x(tf)
        steps = tf.unstack(x, axis=1)
        lengths = SEQ if seq else None
        outs, state = tf.nn.static_rnn(tf.nn.rnn_cell.BasicLSTMCell(4), steps,
                                       dtype=tf.float32, sequence_length=lengths)
        bouts, sf, sb = tf.nn.static_bidirectional_rnn(
            tf.nn.rnn_cell.GRUCell(3), tf.nn.rnn_cell.GRUCell(3), steps, dtype=tf.float32,
            sequence_length=lengths)
        return (outs, state, bouts, sf, sb), {x: X}

    check(build)


def test_raw_rnn():
    def build(tf):
        x = tf.constant(X.transpose(1, 0, 2))
        cell = tf.nn.rnn_cell.BasicLSTMCell(4)
        ta = tf.TensorArray(tf.float32, size=5).unstack(x)
        lengths = tf.constant([5, 3, 1])

        def loop_fn(time, cell_output, cell_state, loop_state):
            if cell_output is None:
                cell_state = cell.zero_state(3, tf.float32)
            finished = time >= lengths
            nxt = tf.cond(tf.reduce_all(finished), lambda: tf.zeros([3, 4]),
                          lambda: ta.read(tf.minimum(time, 4)))
            return finished, nxt, cell_state, cell_output, None

        emit, final, _ = tf.nn.raw_rnn(cell, loop_fn)
        return (emit.stack(), final), None

    check(build)


def test_static_state_saving_rnn():
    class Saver:
        def __init__(self, tf):
            self.tf, self.vars = tf, {}

        def state(self, name):
            tf = self.tf
            v = self.vars[name] = tf.get_variable(name, [3, 4],
                                                  initializer=tf.ones_initializer())
            return tf.identity(v)

        def save_state(self, name, value):
            return self.tf.assign(self.vars[name], value)

    def build(tf):
        x = _x(tf)
        outs, state = tf.nn.static_state_saving_rnn(
            tf.nn.rnn_cell.BasicLSTMCell(4), tf.unstack(x, axis=1), Saver(tf),
            ("c", "h"), sequence_length=SEQ)
        return (outs, state), {x: X}

    check(build)


# -- cells called directly, names, sizes -----------------------------------------------------
def test_variable_names_of_cells_called_directly():
    def fn(tf):
        x = tf.zeros([2, 3])
        a, b = tf.nn.rnn_cell.BasicRNNCell(4), tf.nn.rnn_cell.BasicRNNCell(4)
        s = a.zero_state(2, tf.float32)
        a(x, s)
        a(x, s)
        b(x, s)
        with tf.variable_scope("outer"):
            tf.nn.rnn_cell.GRUCell(2, name="named")(x, tf.zeros([2, 2]))
            tf.nn.rnn_cell.LSTMCell(2)(x, tf.nn.rnn_cell.LSTMStateTuple(tf.zeros([2, 2]),
                                                                       tf.zeros([2, 2])),
                                       scope="explicit")
        return [(v.name, v.shape.as_list()) for v in tf.global_variables()]

    run_custom(fn)


def test_sizes_and_zero_states():
    def fn(tf):
        r = tf.nn.rnn_cell
        cells = [r.BasicRNNCell(3), r.GRUCell(3), r.BasicLSTMCell(3),
                 r.BasicLSTMCell(3, state_is_tuple=False), r.LSTMCell(3, num_proj=2),
                 r.MultiRNNCell([r.GRUCell(2), r.LSTMCell(3, num_proj=1)]),
                 r.DropoutWrapper(r.GRUCell(2)), r.ResidualWrapper(r.GRUCell(2))]
        out = []
        for c in cells:
            z = _flat(c.zero_state(4, tf.float64))
            out.append((repr(c.state_size) if not isinstance(c.state_size, int)
                        else c.state_size, c.output_size,
                        [(t.dtype.name, t.shape.as_list()) for t in z]))
        return out

    run_custom(fn)


# -- errors ----------------------------------------------------------------------------------
ERRORS = {
    "cell_input_rank3": lambda tf: tf.nn.rnn_cell.GRUCell(2)(tf.zeros([2, 3, 1]),
                                                            tf.zeros([2, 2])),
    "cell_state_width": lambda tf: tf.nn.rnn_cell.GRUCell(2)(tf.zeros([2, 3]),
                                                            tf.zeros([2, 5])),
    "lstm_state_width": lambda tf: tf.nn.rnn_cell.LSTMCell(2)(
        tf.zeros([2, 3]), tf.nn.rnn_cell.LSTMStateTuple(tf.zeros([2, 2]), tf.zeros([2, 3]))),
    "cell_int_inputs": lambda tf: tf.nn.rnn_cell.GRUCell(2)(tf.zeros([2, 3], tf.int32),
                                                           tf.zeros([2, 2], tf.int32)),
    "dynamic_rank2": lambda tf: tf.nn.dynamic_rnn(tf.nn.rnn_cell.GRUCell(2),
                                                  tf.zeros([2, 3]), dtype=tf.float32),
    "dynamic_no_dtype": lambda tf: tf.nn.dynamic_rnn(tf.nn.rnn_cell.GRUCell(2),
                                                     tf.zeros([2, 3, 1])),
    "dynamic_unknown_depth": lambda tf: tf.nn.dynamic_rnn(
        tf.nn.rnn_cell.GRUCell(2), tf.placeholder(tf.float32, [2, 3, None]),
        dtype=tf.float32),
    "dynamic_seq_rank2": lambda tf: tf.nn.dynamic_rnn(
        tf.nn.rnn_cell.GRUCell(2), tf.zeros([2, 3, 1]), dtype=tf.float32,
        sequence_length=[[1, 2]]),
    "dynamic_not_a_cell": lambda tf: tf.nn.dynamic_rnn(object(), tf.zeros([2, 3, 1]),
                                                       dtype=tf.float32),
    "static_not_a_list": lambda tf: tf.nn.static_rnn(tf.nn.rnn_cell.GRUCell(2),
                                                     tf.zeros([2, 1]), dtype=tf.float32),
    "static_empty": lambda tf: tf.nn.static_rnn(tf.nn.rnn_cell.GRUCell(2), [],
                                                dtype=tf.float32),
    "static_no_dtype": lambda tf: tf.nn.static_rnn(tf.nn.rnn_cell.GRUCell(2),
                                                   [tf.zeros([2, 1])]),
    "multi_empty": lambda tf: tf.nn.rnn_cell.MultiRNNCell([]),
    "multi_tuple_flag": lambda tf: tf.nn.rnn_cell.MultiRNNCell(
        [tf.nn.rnn_cell.BasicLSTMCell(2)], state_is_tuple=False),
    "dropout_keep_range": lambda tf: tf.nn.rnn_cell.DropoutWrapper(
        tf.nn.rnn_cell.GRUCell(2), output_keep_prob=1.5),
    "dropout_variational_dtype": lambda tf: tf.nn.rnn_cell.DropoutWrapper(
        tf.nn.rnn_cell.GRUCell(2), variational_recurrent=True),
    "reuse_without_reuse": lambda tf: [tf.nn.dynamic_rnn(tf.nn.rnn_cell.GRUCell(2),
                                                         tf.zeros([2, 3, 1]),
                                                         dtype=tf.float32)
                                       for _ in range(2)],
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_build_errors(name):
    def fn(tf):
        try:
            ERRORS[name](tf)
        except Exception as e:  # noqa: BLE001 - the class is what is compared
            return type(e).__name__
        return "no error"

    assert run_custom(fn) != "no error"


def test_sequence_length_of_the_wrong_batch_size():
    def fn(tf):
        seq = tf.placeholder(tf.int32, [None])
        out, _ = tf.nn.dynamic_rnn(tf.nn.rnn_cell.GRUCell(2), tf.zeros([2, 3, 1]),
                                   dtype=tf.float32, sequence_length=seq)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            try:
                sess.run(out, {seq: [1, 2, 3]})
            except Exception as e:  # noqa: BLE001
                return type(e).__name__
        return "no error"

    assert run_custom(fn) == "InvalidArgumentError"


def test_flowrt_names_the_cell_for_a_state_of_the_wrong_structure():
    """TF 1.15 raises TypeError here (it iterates the tensor); flowrt checks first."""
    tf = flowrt_module()
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="BasicLSTMCell"):
            tf.nn.rnn_cell.BasicLSTMCell(2)(tf.zeros([2, 3]), tf.zeros([2, 2]))
