"""tf.IndexedSlices: the class, the gather gradient that produces it, its aggregation and
densification, fetching it, the sparse optimizer updates (checked against numpy
implementations of TF 1.15's formulas), tf.UnconnectedGradients and
tf.AggregationMethod."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors

RNG = np.random.default_rng(11)


@pytest.fixture
def g():
    graph = tf.Graph()
    with graph.as_default():
        yield graph


def dense_of(values, indices, shape):
    out = np.zeros(shape, dtype=np.asarray(values).dtype)
    np.add.at(out, np.asarray(indices), values)
    return out


# -- the class ------------------------------------------------------------------------
def test_properties(g):
    v = tf.constant(np.ones((2, 3), np.float32), name="vals")
    i = tf.constant([0, 2], name="idx")
    d = tf.constant([4, 3], name="shape")
    s = tf.IndexedSlices(v, i, d)
    assert s.values is v and s.indices is i and s.dense_shape is d
    assert s.dtype == tf.float32 and s.name == "vals:0" and s.op is v.op
    assert s.graph is g and s.device == v.device
    assert s.shape.as_list() == [4, 3]
    assert "IndexedSlices(indices=" in str(s)
    n = -s
    assert isinstance(n, tf.IndexedSlices) and n.indices is i and n.dense_shape is d
    assert tf.IndexedSlices(v, i).dense_shape is None
    assert tf.IndexedSlices(v, i).shape.ndims is None
    with tf.Session() as sess:
        got = sess.run(s)
        neg = sess.run(n)
    assert isinstance(got, tf.IndexedSlicesValue)
    assert got._fields == ("values", "indices", "dense_shape")
    np.testing.assert_array_equal(got.indices, [0, 2])
    np.testing.assert_array_equal(got.dense_shape, [4, 3])
    np.testing.assert_array_equal(neg.values, -np.ones((2, 3)))
    np.testing.assert_array_equal(np.asarray(got), dense_of(np.ones((2, 3)), [0, 2], (4, 3)))


def test_convert_to_tensor_densifies(g):
    s = tf.IndexedSlices(tf.constant([[1., 2.], [3., 4.], [5., 6.]]),
                         tf.constant([2, 0, 2]), tf.constant([4, 2]))
    d = tf.convert_to_tensor(s)
    assert isinstance(d, tf.Tensor) and d.op.type == "UnsortedSegmentSum"
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(d), [[3, 4], [0, 0], [6, 8], [0, 0]])
        np.testing.assert_array_equal(sess.run(s.values * 2.0 + tf.zeros([3, 2])),
                                      [[2, 4], [6, 8], [10, 12]])
        np.testing.assert_array_equal(sess.run(tf.reduce_sum(s)), 21.0)  # via conversion
    with pytest.raises(ValueError, match="dtype"):
        tf.convert_to_tensor(s, dtype=tf.int32)
    with pytest.raises(ValueError, match="without dense_shape"):
        tf.convert_to_tensor(tf.IndexedSlices(s.values, s.indices))


def test_densify_of_unknown_shape_warns(g):
    p = tf.placeholder(tf.float32, [None, 2])
    s = tf.IndexedSlices(p, tf.constant([0]), tf.shape(p))
    with pytest.warns(UserWarning, match="unknown shape"):
        tf.convert_to_tensor(s)


def test_convert_to_tensor_or_indexed_slices(g):
    s = tf.IndexedSlices(tf.constant([[1.]]), tf.constant([0]), tf.constant([1, 1]))
    assert tf.convert_to_tensor_or_indexed_slices(s) is s
    t = tf.convert_to_tensor_or_indexed_slices([1, 2])
    assert isinstance(t, tf.Tensor) and t.dtype == tf.int32
    with pytest.raises(ValueError, match="dtype"):
        tf.convert_to_tensor_or_indexed_slices(s, dtype=tf.int64)


# -- gradients --------------------------------------------------------------------------
@settings(max_examples=20, deadline=None)
@given(rows=st.integers(1, 5), cols=st.integers(1, 3),
       idx=st.lists(st.integers(0, 4), min_size=1, max_size=6), use_v1=st.booleans())
def test_gather_gradient_is_indexed_slices(rows, cols, idx, use_v1):
    idx = [i % rows for i in idx]
    with tf.Graph().as_default():
        p = tf.placeholder(tf.float32, [rows, cols])
        if use_v1:
            from flowrt.graph import apply_op
            y = apply_op("Gather", params=p, indices=tf.constant(idx))
        else:
            y = tf.gather(p, idx)
        w = RNG.normal(size=(len(idx), cols)).astype(np.float32)
        grad = tf.gradients(y * w, p)[0]
        assert isinstance(grad, tf.IndexedSlices)
        assert grad.dense_shape.dtype == tf.int32 and grad.shape.as_list() == [rows, cols]
        with tf.Session() as sess:
            got = sess.run(grad, {p: np.zeros((rows, cols), np.float32)})
    np.testing.assert_array_equal(got.indices, idx)
    np.testing.assert_allclose(got.values, w, rtol=1e-6)
    np.testing.assert_array_equal(got.dense_shape, [rows, cols])
    np.testing.assert_allclose(np.asarray(got), dense_of(w, idx, (rows, cols)), rtol=1e-6)


def test_gather_gradient_multi_dim_indices_and_unknown_shapes(g):
    p = tf.placeholder(tf.float32, [None, 2])
    i = tf.placeholder(tf.int32, None)
    y = tf.gather(p, i)
    grad = tf.gradients(tf.reduce_sum(y * 3.0), p)[0]
    assert isinstance(grad, tf.IndexedSlices)
    with tf.Session() as sess:
        got = sess.run(grad, {p: np.ones((3, 2)), i: [[0, 2], [2, 2]]})
    np.testing.assert_array_equal(got.indices, [0, 2, 2, 2])
    np.testing.assert_array_equal(got.values.shape, (4, 2))
    np.testing.assert_array_equal(np.asarray(got), [[3, 3], [0, 0], [9, 9]])


def test_gather_other_axes_are_dense(g):
    p = tf.placeholder(tf.float32, [2, 3])
    grad = tf.gradients(tf.gather(p, [2, 0], axis=1), p)[0]
    assert isinstance(grad, tf.Tensor)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(grad, {p: np.ones((2, 3))}),
                                      [[1, 0, 1], [1, 0, 1]])


def test_numeric_gradient_of_gather(g):
    x = tf.placeholder(tf.float64, [4, 2])
    y = tf.gather(x, [3, 1, 3]) ** 2
    value = RNG.normal(size=(4, 2))
    with tf.Session():
        err = tf.test.compute_gradient_error(x, [4, 2], y, [3, 2], x_init_value=value)
    assert err < 1e-6


def test_variable_and_embedding_lookup_gradients(g):
    init = np.arange(12, dtype=np.float32).reshape(4, 3)
    v = tf.Variable(init)
    parts = [tf.Variable(init[:2]), tf.Variable(init[2:])]
    e1 = tf.nn.embedding_lookup(v, [[0, 2], [2, 3]])
    e2 = tf.nn.embedding_lookup(parts, [0, 3, 1], partition_strategy="div")
    g1 = tf.gradients(tf.reduce_sum(e1), v)[0]
    g2 = tf.gradients(tf.reduce_sum(e2 * 2.0), parts)
    assert isinstance(g1, tf.IndexedSlices)
    assert all(isinstance(x, tf.IndexedSlices) for x in g2)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(np.asarray(sess.run(g1)),
                                      [[1] * 3, [0] * 3, [2] * 3, [1] * 3])
        a, b = sess.run(g2)
    np.testing.assert_array_equal(np.asarray(a), [[2] * 3, [2] * 3])
    np.testing.assert_array_equal(np.asarray(b), [[0] * 3, [2] * 3])


def test_aggregation_mixing_dense_and_slices_concatenates(g):
    p = tf.placeholder(tf.float32, [3, 2])
    y = tf.reduce_sum(tf.gather(p, [0, 0])) + tf.reduce_sum(p * 3.0)
    grad = tf.gradients(y, p)[0]
    assert isinstance(grad, tf.IndexedSlices)  # TF: all rows of the dense one + the slices
    with tf.Session() as sess:
        got = sess.run(grad, {p: np.ones((3, 2))})
    np.testing.assert_array_equal(got.indices, [0, 0, 0, 1, 2])
    np.testing.assert_array_equal(np.asarray(got), [[5, 5], [3, 3], [3, 3]])


def test_aggregation_int64_indices(g):
    p = tf.placeholder(tf.float32, [3])
    y = tf.reduce_sum(tf.gather(p, tf.constant([1], tf.int64))) + \
        tf.reduce_sum(tf.gather(p, tf.constant([1, 2], tf.int32)))
    grad = tf.gradients(y, p)[0]
    assert grad.indices.dtype == tf.int64
    with tf.Session() as sess:
        np.testing.assert_array_equal(np.asarray(sess.run(grad, {p: np.ones(3)})), [0, 2, 1])


def test_slices_densify_through_other_ops(g):
    p = tf.placeholder(tf.float32, [3, 2])
    q = tf.identity(p) * 2.0
    y = tf.gather(q, [1])
    grad = tf.gradients(y, p)[0]
    assert isinstance(grad, tf.Tensor)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(grad, {p: np.ones((3, 2))}),
                                      [[0, 0], [2, 2], [0, 0]])


def test_gradient_inside_while_loop_is_dense(g):
    p = tf.placeholder(tf.float32, [3])

    def body(i, acc):
        return i + 1, acc + tf.gather(p, [i])

    _, acc = tf.while_loop(lambda i, a: i < 3, body, [0, tf.zeros([1])])
    grad = tf.gradients(acc, p)[0]
    with tf.Session() as sess:
        np.testing.assert_array_equal(np.asarray(sess.run(grad, {p: np.ones(3)})), [1, 1, 1])


def test_clip_and_norm_accept_slices(g):
    s = tf.IndexedSlices(tf.constant([[3., 4.]]), tf.constant([1]), tf.constant([2, 2]))
    clipped, norm = tf.clip_by_global_norm([s, tf.constant([0.])], 1.0)
    by_norm = tf.clip_by_norm(s, 1.0)
    with tf.Session() as sess:
        c, n, b = sess.run([clipped[0], norm, by_norm])
    np.testing.assert_allclose(n, 5.0)
    np.testing.assert_allclose(np.asarray(c), [[0, 0], [0.6, 0.8]], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(b), [[0, 0], [0.6, 0.8]], rtol=1e-6)


# -- UnconnectedGradients / AggregationMethod / gate_gradients ------------------------------
def test_unconnected_gradients(g):
    x = tf.placeholder(tf.float32, [2])
    z = tf.placeholder(tf.float32, [3])
    y = x * 2.0
    assert tf.gradients(y, z)[0] is None
    assert tf.gradients(y, z, unconnected_gradients=tf.UnconnectedGradients.NONE)[0] is None
    zero = tf.gradients(y, z, unconnected_gradients=tf.UnconnectedGradients.ZERO)[0]
    zero2 = tf.gradients(y, z, unconnected_gradients="zero")[0]
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(zero, {z: np.ones(3)}), [0, 0, 0])
        np.testing.assert_array_equal(sess.run(zero2, {z: np.ones(3)}), [0, 0, 0])
    assert tf.UnconnectedGradients.ZERO.value == "zero"
    with pytest.raises(ValueError, match="Unknown value for unconnected_gradients"):
        tf.gradients(y, z, unconnected_gradients="zeros")


@pytest.mark.parametrize("method", [tf.AggregationMethod.ADD_N, tf.AggregationMethod.DEFAULT,
                                    tf.AggregationMethod.EXPERIMENTAL_TREE,
                                    tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N])
def test_aggregation_methods(g, method):
    x = tf.placeholder(tf.float32, [2])
    y = x * 2.0 + x * 3.0 + tf.sin(x)
    grad = tf.gradients(y, x, aggregation_method=method, gate_gradients=True)[0]
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(grad, {x: [0.0, 1.0]}),
                                   5.0 + np.cos([0.0, 1.0]), rtol=1e-6)


def test_bad_aggregation_method(g):
    x = tf.placeholder(tf.float32, [2])
    assert (tf.AggregationMethod.ADD_N, tf.AggregationMethod.EXPERIMENTAL_TREE,
            tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N) == (0, 1, 2)
    with pytest.raises(ValueError, match="Invalid aggregation_method"):
        tf.gradients(x * 2.0, x, aggregation_method=7)


# -- sparse optimizer updates ---------------------------------------------------------------
def _np_dedup(values, indices):
    uniq, pos = np.unique(indices, return_inverse=True)
    order = [list(indices).index(u) for u in uniq]  # tf.unique keeps first-seen order
    uniq = np.asarray(indices)[sorted(order)]
    summed = np.stack([values[np.asarray(indices) == u].sum(0) for u in uniq])
    return summed, uniq


def _reference(name, var, slots, grad, idx, step):
    """One sparse step of ``name`` on numpy copies (TF 1.15 formulas)."""
    g, i = _np_dedup(grad, idx)
    if name == "sgd":
        var[i] -= 0.1 * g
    elif name == "momentum":
        acc = slots["momentum"]
        acc[i] = acc[i] * 0.9 + g
        var[i] -= 0.1 * acc[i]
    elif name == "adagrad":
        acc = slots["accumulator"]
        acc[i] += g * g
        var[i] -= 0.1 * g / np.sqrt(acc[i])
    elif name == "rmsprop":
        ms, mom = slots["rms"], slots["momentum"]
        ms[i] = ms[i] * 0.9 + g * g * 0.1
        mom[i] = mom[i] * 0.5 + 0.1 * g / np.sqrt(ms[i] + 1e-10)
        var[i] -= mom[i]
    elif name == "adadelta":
        acc, upd_acc = slots["accum"], slots["accum_update"]
        acc[i] = acc[i] * 0.95 + g * g * 0.05
        upd = np.sqrt(upd_acc[i] + 1e-8) / np.sqrt(acc[i] + 1e-8) * g
        upd_acc[i] = upd_acc[i] * 0.95 + upd * upd * 0.05
        var[i] -= upd * 1.0
    elif name == "adam":  # float32 hyper-parameters and beta powers, as TF keeps them
        m, v = slots["m"], slots["v"]
        f = lambda x: float(np.float32(x))  # noqa: E731
        b1, b2 = f(0.9), f(0.999)
        p1, p2 = np.float32(0.9), np.float32(0.999)
        for _ in range(step - 1):  # the beta powers are float32 variables
            p1, p2 = p1 * np.float32(0.9), p2 * np.float32(0.999)
        p1, p2 = float(p1), float(p2)
        lr = f(0.1) * np.sqrt(1 - p2) / (1 - p1)
        m *= b1
        m[i] += g * (1 - b1)
        v *= b2
        v[i] += g * g * (1 - b2)
        var -= lr * m / (np.sqrt(v) + f(1e-8))


OPTIMIZERS = {
    "sgd": (lambda: tf.train.GradientDescentOptimizer(0.1), {}),
    "momentum": (lambda: tf.train.MomentumOptimizer(0.1, 0.9), {"momentum": 0.0}),
    "adagrad": (lambda: tf.train.AdagradOptimizer(0.1), {"accumulator": 0.1}),
    "rmsprop": (lambda: tf.train.RMSPropOptimizer(0.1, momentum=0.5), {"rms": 1.0,
                                                                        "momentum": 0.0}),
    "adadelta": (lambda: tf.train.AdadeltaOptimizer(1.0), {"accum": 0.0, "accum_update": 0.0}),
    "adam": (lambda: tf.train.AdamOptimizer(0.1), {"m": 0.0, "v": 0.0}),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_sparse_optimizer_steps(g, name):
    make, slot_init = OPTIMIZERS[name]
    rng = np.random.default_rng(5)  # fixed data: the test does not depend on test order
    init = rng.normal(size=(5, 2))
    v = tf.Variable(init)
    idx = [3, 0, 3]
    w = rng.normal(size=(3, 2))
    loss = tf.reduce_sum(tf.gather(v, idx) * w + tf.gather(v, idx) ** 2)
    opt = make()
    train = opt.minimize(loss)
    var = init.copy()
    slots = {k: np.full_like(init, x) for k, x in slot_init.items()}
    tol = 1e-6
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step in range(1, 4):
            grad = w + 2 * var[idx]
            _reference(name, var, slots, grad, idx, step)
            sess.run(train)
            # (the hyper-parameters, and Adam's beta powers, are float32 as in TF)
            np.testing.assert_allclose(sess.run(v), var, rtol=tol, atol=1e-7)
        for k, want in slots.items():
            np.testing.assert_allclose(sess.run(opt.get_slot(v, k)), want, rtol=tol)
    if name != "adam":  # TF1's sparse Adam decays every row
        assert np.array_equal(var[[1, 2, 4]], init[[1, 2, 4]])


def test_sparse_ops_in_graph(g):
    v = tf.Variable(np.ones((3, 2), np.float32))
    loss = tf.reduce_sum(tf.gather(v, [1]))
    for opt, op_type in ((tf.train.MomentumOptimizer(0.1, 0.9), "SparseApplyMomentum"),
                         (tf.train.AdagradOptimizer(0.1), "SparseApplyAdagrad"),
                         (tf.train.RMSPropOptimizer(0.1), "SparseApplyRMSProp"),
                         (tf.train.RMSPropOptimizer(0.1, centered=True, name="C"),
                          "SparseApplyCenteredRMSProp"),
                         (tf.train.AdadeltaOptimizer(0.1), "SparseApplyAdadelta"),
                         (tf.train.GradientDescentOptimizer(0.1), "ScatterSub")):
        opt.minimize(loss)
        assert any(o.type == op_type for o in g.get_operations()), op_type


def test_apply_gradients_with_slices_and_errors(g):
    v = tf.Variable(np.zeros((3, 2), np.float32))
    s = tf.IndexedSlices(tf.constant([[1., 1.], [2., 2.]]), tf.constant([2, 2]),
                         tf.constant([3, 2]))
    train = tf.train.GradientDescentOptimizer(1.0).apply_gradients([(s, v)])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        np.testing.assert_array_equal(sess.run(v), [[0, 0], [0, 0], [-3, -3]])
    c = tf.Variable(np.zeros((3, 2), np.float32), constraint=lambda t: t)
    with pytest.raises(RuntimeError, match="constraint function on a sparse variable"):
        tf.train.GradientDescentOptimizer(1.0).apply_gradients([(s, c)])
    with pytest.raises(TypeError, match="Gradient must be"):
        tf.train.GradientDescentOptimizer(1.0).apply_gradients([(object(), v)])


def test_sparse_kernel_errors(g):
    from flowrt.plugins.kernels.standard.optimizers import sparse_apply_adagrad

    v = tf.Variable(np.ones((3, 2), np.float32))
    a = tf.Variable(np.ones((3, 2), np.float32))
    bad = sparse_apply_adagrad(v, a, 0.1, tf.ones([1, 2]), tf.constant([5]))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(errors.InvalidArgumentError, match="Index 5 at offset 0"):
            sess.run(bad)
    with pytest.raises(ValueError, match="rank 1"):
        sparse_apply_adagrad(v, a, 0.1, tf.ones([1, 2]), tf.constant([[0]]))


def test_gate_graph_with_slices(g):
    v = tf.Variable(np.ones((3, 2), np.float32))
    opt = tf.train.GradientDescentOptimizer(0.5)
    gv = opt.compute_gradients(tf.reduce_sum(tf.gather(v, [0])),
                               gate_gradients=opt.GATE_GRAPH)
    assert isinstance(gv[0][0], tf.IndexedSlices)
    train = opt.apply_gradients(gv)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        np.testing.assert_array_equal(sess.run(v), [[0.5, 0.5], [1, 1], [1, 1]])


def test_variable_scatter_methods(g):
    v = tf.Variable(np.zeros((3,), np.float32))
    s = tf.IndexedSlices(tf.constant([1., 2.]), tf.constant([0, 0]))
    add = v.scatter_add(s)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(add), [3, 0, 0])
        np.testing.assert_array_equal(sess.run(v.scatter_sub(s)), [0, 0, 0])
        sess.run(v.scatter_update(tf.IndexedSlices(tf.constant([7.]), tf.constant([2]))))
        np.testing.assert_array_equal(sess.run(v), [0, 0, 7])
    with pytest.raises(TypeError, match="not IndexedSlices"):
        v.scatter_add(tf.constant([1.]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tf.IndexedSlices(tf.constant([1.]), tf.constant([0]), tf.constant([3]))
