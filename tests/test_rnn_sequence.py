"""dynamic_rnn of BasicLSTMCell (alone or in a MultiRNNCell) as one FusedLSTMSequence op:
the same variables, outputs, final states and gradients as the step-by-step while loop
(a DropoutWrapper keeping everything forces the loop), with sequence_length, time_major
and initial states; the op's own gradient against numeric differences; bad input."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf


def _model(fused: bool, layers: int, x: np.ndarray, lengths, time_major: bool,
           init: bool, seed: int = 0):
    """Build dynamic_rnn over ``x`` and return (variable names, outputs, final state,
    gradients of a loss w.r.t. the variables, the input and the initial state)."""
    rng = np.random.default_rng(seed)
    n = 5
    with tf.Graph().as_default():
        xt = tf.constant(x)
        cells = [tf.nn.rnn_cell.BasicLSTMCell(n, forget_bias=0.7) for _ in range(layers)]
        if not fused:
            cells = [tf.nn.rnn_cell.DropoutWrapper(c, output_keep_prob=1.0) for c in cells]
        cell = cells[0] if layers == 1 else tf.nn.rnn_cell.MultiRNNCell(cells)
        batch = x.shape[1] if time_major else x.shape[0]
        state = None
        if init:
            one = lambda: tf.nn.rnn_cell.LSTMStateTuple(  # noqa: E731
                tf.constant(rng.standard_normal((batch, n))),
                tf.constant(rng.standard_normal((batch, n))))
            state = one() if layers == 1 else tuple(one() for _ in range(layers))
        out, final = tf.nn.dynamic_rnn(cell, xt, sequence_length=lengths,
                                       initial_state=state, dtype=tf.float64,
                                       time_major=time_major)
        types = {op.type for op in tf.get_default_graph().get_operations()}
        assert ("FusedLSTMSequence" in types) == fused
        variables = tf.trainable_variables()
        flat_final = tf.nest.flatten(final) if hasattr(tf, "nest") else \
            [t for s in (final if layers > 1 else (final,)) for t in s]
        loss = tf.reduce_sum(out * out) + sum(tf.reduce_sum(s * (k + 1.0))
                                              for k, s in enumerate(flat_final))
        wrt = variables + [xt] + ([t for s in (state if layers > 1 else (state,))
                                   for t in s] if init else [])
        grads = tf.gradients(loss, wrt)
        with tf.Session() as sess:
            for v in variables:  # the same values in both builds
                sess.run(v.assign(rng.standard_normal(v.shape.as_list()) * 0.4))
            o, f, g = sess.run([out, flat_final, grads])
        return [v.name for v in variables], o, f, g


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("lengths", [None, [7, 3, 0, 1]])
@pytest.mark.parametrize("time_major,init", [(False, False), (True, True)])
def test_fused_sequence_matches_the_loop(layers, lengths, time_major, init):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, 4, 3) if time_major else (4, 7, 3))
    seq = None if lengths is None else np.array(lengths, np.int32)
    names_f, out_f, fin_f, g_f = _model(True, layers, x, seq, time_major, init)
    names_l, out_l, fin_l, g_l = _model(False, layers, x, seq, time_major, init)
    assert names_f == names_l
    if layers == 2:
        assert names_f[0] == "rnn/multi_rnn_cell/cell_0/basic_lstm_cell/kernel:0"
    np.testing.assert_allclose(out_f, out_l, rtol=1e-10, atol=1e-12)
    for a, b in zip(fin_f, fin_l):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    for a, b in zip(g_f, g_l):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
    if lengths is not None:  # past its length an entry's outputs are zero
        o = out_f if time_major else out_f.transpose(1, 0, 2)
        assert not o[3:, 1].any() and not o[:, 2].any() and o[:3, 1].all()


@settings(max_examples=12, deadline=None)
@given(t=st.integers(1, 5), b=st.integers(1, 3), d=st.integers(1, 4), n=st.integers(1, 4),
       seed=st.integers(0, 10_000), with_lengths=st.booleans())
def test_sequence_op_gradient_is_numeric(t, b, d, n, seed, with_lengths):
    rng = np.random.default_rng(seed)
    shapes = [(t, b, d), (b, n), (b, n), (d + n, 4 * n), (4 * n,)]
    vals = [rng.standard_normal(s) * 0.5 for s in shapes]
    lengths = rng.integers(0, t + 2, b).astype(np.int32) if with_lengths else None
    with tf.Graph().as_default():
        ins = [tf.constant(v) for v in vals]
        y, c, h = tf._fused_lstm_sequence(*ins, sequence_length=lengths, forget_bias=0.3)
        loss = tf.reduce_sum(y * y) + tf.reduce_sum(c * 1.5) + tf.reduce_sum(h)
        with tf.Session():
            err = tf.test.compute_gradient_error(ins, shapes, loss, [], delta=1e-6)
    assert err < 1e-6


def test_sequence_op_errors():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, None, 3])
        z = tf.zeros([2, 4])
        y, _, _ = tf._fused_lstm_sequence(x, z, z, tf.zeros([7, 16]), tf.zeros([16]),
                                          sequence_length=tf.constant([1, 2, 3]))
        with tf.Session() as s:
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match="FusedLSTMSequence.*sequence_length must be a vector "
                                     "of length 2"):
                s.run(y, {x: np.zeros((4, 2, 3), np.float32)})
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match="FusedLSTMSequence.*shapes do not match"):
                s.run(y, {x: np.zeros((4, 3, 3), np.float32)})
        with pytest.raises(ValueError, match="x must be \\[time, batch, depth\\]"):
            tf._fused_lstm_sequence(tf.zeros([2, 3]), z, z, tf.zeros([7, 16]),
                                    tf.zeros([16]))


def test_float32_training_step_learns():
    """A 2-layer LSTM trained with SGD through the fused op: the loss goes down."""
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((8, 6, 4)).astype(np.float32)
    ys = xs.sum(axis=(1, 2)).reshape(-1, 1).astype(np.float32) * 0.1
    with tf.Graph().as_default():
        tf.set_random_seed(0)
        x = tf.placeholder(tf.float32, [None, 6, 4])
        cell = tf.nn.rnn_cell.MultiRNNCell([tf.nn.rnn_cell.BasicLSTMCell(8)
                                            for _ in range(2)])
        out, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        pred = tf.layers.dense(out[:, -1], 1)
        loss = tf.reduce_mean(tf.square(pred - ys))
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            first = s.run(loss, {x: xs})
            for _ in range(60):
                s.run(train, {x: xs})
            last = s.run(loss, {x: xs})
    assert last < 0.5 * first
