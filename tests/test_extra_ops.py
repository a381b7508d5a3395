"""Tests of plugins/kernels/standard/extra_ops.py: clipping, embedding lookup, top-k and
sort, ref-variable scatter ops, CountUpTo, CheckNumerics, EnsureShape, small composites."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flowrt as tf


def run(build, feed=None, init=False):
    g = tf.Graph()
    with g.as_default():
        out = build()
        ini = tf.global_variables_initializer() if init else None
    with tf.Session(graph=g) as s:
        if ini is not None:
            s.run(ini)
        return s.run(out, feed(out) if callable(feed) else feed)


def grad_err(build_x_y, x_val):
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(x_val)
        y = build_x_y(x)
        with tf.Session(graph=g):
            return tf.test.compute_gradient_error(x, list(x_val.shape), y, y.shape.as_list(),
                                                  x_init_value=x_val)


# ---------------------------------------------------------------- clipping
def test_clip_by_norm_values_and_axes():
    a = np.array([[3., 4.], [0.3, 0.4]], np.float32)
    out = run(lambda: [tf.clip_by_norm(a, 1.0), tf.clip_by_norm(a, 1.0, axes=[1]),
                       tf.clip_by_norm(np.zeros((2,), np.float32), 1.0)])
    n = np.sqrt((a * a).sum())
    np.testing.assert_allclose(out[0], a / n, rtol=1e-6)
    np.testing.assert_allclose(out[1], [[0.6, 0.8], [0.3, 0.4]], rtol=1e-6)
    np.testing.assert_array_equal(out[2], [0., 0.])
    assert out[0].dtype == np.float32


def test_global_norm_and_clip_by_global_norm():
    a = np.array([3., 4.], np.float64)
    b = np.array([[12.]], np.float64)

    def build():
        lst, n = tf.clip_by_global_norm([a, None, b], 6.5)
        assert lst[1] is None and n.dtype == tf.float64
        assert lst[2].shape.as_list() == [1, 1]
        return [lst[0], lst[2], n, tf.global_norm([a, None, b])]
    c0, c2, n, gn = run(build)
    assert n == pytest.approx(13.0) and gn == pytest.approx(13.0)
    np.testing.assert_allclose(c0, a * 0.5)
    np.testing.assert_allclose(c2, b * 0.5)
    # below the limit: unchanged; use_norm given
    out = run(lambda: tf.clip_by_global_norm([a], 100.0)[0][0])
    np.testing.assert_allclose(out, a)
    out = run(lambda: tf.clip_by_global_norm([a], 1.0, use_norm=tf.constant(10., tf.float64)))
    np.testing.assert_allclose(out[0][0], a * 0.1)
    # infinite norm -> nan values
    out = run(lambda: tf.clip_by_global_norm([np.array([np.inf, 1.])], 1.0)[0][0])
    assert np.isnan(out).all()
    with pytest.raises(TypeError):
        tf.clip_by_global_norm(tf.constant([1.]), 1.0)


def test_clip_by_average_norm():
    a = np.array([3., 4.], np.float32)
    out = run(lambda: tf.clip_by_average_norm(a, 1.0))
    np.testing.assert_allclose(out, a * 2.0 / 5.0, rtol=1e-6)


def test_clip_by_norm_gradient():
    x = np.array([[0.5, -1.2], [0.7, 2.0]], np.float64)
    assert grad_err(lambda t: tf.clip_by_norm(t, 1.0), x) < 1e-6


# ---------------------------------------------------------------- embedding lookup
def test_embedding_lookup_single_and_max_norm():
    p = np.arange(20, dtype=np.float32).reshape(10, 2)
    ids = np.array([[1, 2], [9, 0]], np.int64)
    out = run(lambda: tf.nn.embedding_lookup(p, ids))
    np.testing.assert_array_equal(out, p[ids])
    out = run(lambda: tf.nn.embedding_lookup(p, [3], max_norm=1.0))
    np.testing.assert_allclose(out, p[[3]] / np.linalg.norm(p[3]), rtol=1e-6)


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_embedding_lookup_partitioned(strategy):
    full = np.arange(14, dtype=np.float32).reshape(7, 2)
    if strategy == "mod":
        parts = [full[i::3] for i in range(3)]
    else:  # 7 rows over 3 shards: 3, 2, 2
        parts = [full[0:3], full[3:5], full[5:7]]
    ids = np.array([[0, 6], [3, 4], [5, 1]], np.int32)
    g = tf.Graph()
    with g.as_default():
        ph = tf.placeholder(tf.int32, [None, 2])
        out = tf.nn.embedding_lookup([tf.constant(q) for q in parts], ph,
                                     partition_strategy=strategy)
        assert out.shape.as_list() == [None, 2, 2]
    with tf.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(out, {ph: ids}), full[ids])
    with pytest.raises(ValueError):
        tf.nn.embedding_lookup([full], [0], partition_strategy="bad")


def test_embedding_lookup_gradient_and_variable():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.ones((4, 3), np.float32))
        y = tf.nn.embedding_lookup(v, [1, 1, 3])
        dv = tf.gradients(tf.reduce_sum(y), v)[0]
        init = tf.global_variables_initializer()
    with tf.Session(graph=g) as s:
        s.run(init)
        np.testing.assert_array_equal(s.run(dv), [[0] * 3, [2] * 3, [0] * 3, [1] * 3])


# ---------------------------------------------------------------- top_k / sort
def test_top_k_values_ties_dtypes():
    a = np.array([[1, 3, 3, 0, 2], [5, 5, -1, 7, 0]], np.int32)
    v, i = run(lambda: tf.nn.top_k(a, 3))
    res = run(lambda: tf.nn.top_k(a, 1))
    np.testing.assert_array_equal(res.indices, [[1], [3]])
    np.testing.assert_array_equal(res.values, [[3], [7]])
    np.testing.assert_array_equal(v, [[3, 3, 2], [7, 5, 5]])
    np.testing.assert_array_equal(i, [[1, 2, 4], [3, 0, 1]])
    assert v.dtype == np.int32 and i.dtype == np.int32
    for dt in (np.uint8, np.int64, np.float16, np.float64):
        v, i = run(lambda: tf.math.top_k((a + 1).astype(dt), k=2))
        assert v.dtype == dt
        np.testing.assert_array_equal(i, [[1, 2], [3, 0]])
    v, i = run(lambda: tf.nn.top_k(np.array([2., 1.], np.float32), 0))
    assert v.shape == (0,) and i.shape == (0,)


def test_top_k_shapes_and_errors():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 4, 6])
        k = tf.placeholder(tf.int32, [])
        v, i = tf.nn.top_k(x, 2)
        assert v.shape.as_list() == [None, 4, 2] and i.shape.as_list() == [None, 4, 2]
        v2, _ = tf.nn.top_k(x, k)
        assert v2.shape.as_list() == [None, 4, None]
        with pytest.raises(ValueError):
            tf.nn.top_k(x, 7)
        with pytest.raises(ValueError):
            tf.nn.top_k(tf.constant(1.0), 1)
        with pytest.raises(TypeError):
            tf.nn.top_k(tf.constant([True]), 1)
    with tf.Session(graph=g) as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="at least k"):
            s.run(v2, {x: np.zeros((1, 4, 6), np.float32), k: 9})
        with pytest.raises(tf.errors.InvalidArgumentError, match="k >= 0"):
            s.run(v2, {x: np.zeros((1, 4, 6), np.float32), k: -1})


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 8), st.data())
def test_top_k_property(rows, cols, data):
    a = np.array(data.draw(st.lists(st.integers(-3, 3), min_size=rows * cols,
                                    max_size=rows * cols)), np.float32).reshape(rows, cols)
    k = data.draw(st.integers(0, cols))
    v, i = run(lambda: tf.nn.top_k(a, k))
    order = np.argsort(-a, axis=-1, kind="stable")[:, :k]
    np.testing.assert_array_equal(i, order)
    np.testing.assert_array_equal(v, np.take_along_axis(a, order, -1))


def test_top_k_gradient():
    x = np.array([[0.1, 0.9, 0.4, -0.3], [1.5, -2.0, 0.7, 0.2]], np.float64)
    assert grad_err(lambda t: tf.nn.top_k(t, 2)[0], x) < 1e-6
    g = tf.Graph()
    with g.as_default():
        xc = tf.constant(x)
        d = tf.gradients(tf.nn.top_k(xc, 2)[0], xc)[0]
    with tf.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(d), [[0, 1, 1, 0], [1, 0, 1, 0]])


def test_in_top_k():
    p = np.array([[0.1, 0.5, 0.5, 0.2], [0.3, 0.2, 0.1, 0.0], [np.nan, 1, 2, 3],
                  [0.1, 0.2, 0.3, 0.4]], np.float32)
    t = np.array([2, 0, 3, 7], np.int32)
    out = run(lambda: [tf.nn.in_top_k(p, t, 1), tf.nn.in_top_k(p, t.astype(np.int64), 2)])
    np.testing.assert_array_equal(out[0], [True, True, False, False])
    np.testing.assert_array_equal(out[1], [True, True, False, False])
    assert out[0].dtype == np.bool_
    # ties count as in the top: 0.5 and 0.5 both in top 1
    out = run(lambda: tf.nn.in_top_k(p[:1], [1], 1))
    np.testing.assert_array_equal(out, [True])
    g = tf.Graph()
    with g.as_default():
        pp = tf.placeholder(tf.float32, [None, 4])
        assert tf.nn.in_top_k(pp, [1, 2], 1).shape.as_list() == [2]
        with pytest.raises(ValueError):
            tf.nn.in_top_k(tf.constant([1.0]), [0], 1)


@pytest.mark.parametrize("direction", ["ASCENDING", "DESCENDING"])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_sort_argsort(direction, axis):
    rng = np.random.RandomState(0)
    a = rng.randint(-3, 3, size=(3, 4, 5)).astype(np.float32)
    s, i = run(lambda: [tf.sort(a, axis=axis, direction=direction),
                        tf.argsort(a, axis=axis, direction=direction)])
    key = a if direction == "ASCENDING" else -a
    want = np.argsort(key, axis=axis, kind="stable")
    np.testing.assert_array_equal(i, want)
    assert i.dtype == np.int32 and s.dtype == np.float32
    np.testing.assert_array_equal(s, np.take_along_axis(a, want, axis))
    with pytest.raises(ValueError):
        tf.sort(a, direction="UP")


def test_sort_int_and_static_shape():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.int32, [None, 3])
        y = tf.sort(x)
        assert y.shape.as_list() == [None, 3]
    with tf.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(y, {x: [[3, 1, 2]]}), [[1, 2, 3]])


# ---------------------------------------------------------------- scatter on refs
def _scatter(fn, init, *args, **kw):
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(init)
        op = fn(v, *args, **kw)
        ini = tf.global_variables_initializer()
    with tf.Session(graph=g) as s:
        s.run(ini)
        out = s.run(op)
        return out, s.run(v), op


def test_scatter_ops_values():
    base = np.array([[1., 2.], [3., 4.], [5., 6.]], np.float32)
    upd = np.array([[10., 10.], [2., 2.]], np.float32)
    idx = np.array([2, 0], np.int32)
    cases = {tf.scatter_update: lambda b: _set(b, idx, upd),
             tf.scatter_add: lambda b: _at(np.add, b, idx, upd),
             tf.scatter_sub: lambda b: _at(np.subtract, b, idx, upd),
             tf.scatter_mul: lambda b: _at(np.multiply, b, idx, upd),
             tf.scatter_div: lambda b: _at(np.divide, b, idx, upd)}
    for fn, ref in cases.items():
        out, after, op = _scatter(fn, base, idx, upd)
        np.testing.assert_allclose(out, ref(base))
        np.testing.assert_allclose(after, ref(base))
        assert op.dtype.is_ref_dtype and op.dtype.base_dtype == tf.float32
        assert op.shape.as_list() == [3, 2]


def _set(b, i, u):
    b = b.copy()
    b[i] = u
    return b


def _at(f, b, i, u):
    b = b.copy()
    f.at(b, i, u)
    return b


def test_scatter_duplicates_scalar_and_int_div():
    out, _, _ = _scatter(tf.scatter_add, np.zeros(3, np.int64), [1, 1, 2], np.int64(5))
    np.testing.assert_array_equal(out, [0, 10, 5])
    out, _, _ = _scatter(tf.scatter_div, np.array([7, -7, 9], np.int32), [0, 1], [2, 2])
    np.testing.assert_array_equal(out, [3, -3, 9])


def test_scatter_errors():
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"indices\[1\] = 5 is not in"):
        _scatter(tf.scatter_update, np.zeros(3, np.float32), [0, 5], [1., 2.])
    with pytest.raises(tf.errors.InvalidArgumentError, match="not in"):
        _scatter(tf.scatter_add, np.zeros(3, np.float32), [-1], [1.])
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.zeros((3, 2), np.float32))
        with pytest.raises(ValueError):
            tf.scatter_update(v, [0, 1], np.zeros((2, 3), np.float32))
        with pytest.raises(TypeError):
            tf.scatter_add(v, [0], tf.zeros((1, 2), tf.float64))


def test_scatter_nd_ops():
    base = np.zeros((2, 3), np.float32)
    idx = [[0, 1], [0, 1], [1, 2]]
    out, after, _ = _scatter(tf.scatter_nd_add, base, idx, [1., 2., 3.])
    np.testing.assert_array_equal(out, [[0, 3, 0], [0, 0, 3]])
    out, _, _ = _scatter(tf.scatter_nd_update, base, [[1]], [[7., 8., 9.]])
    np.testing.assert_array_equal(out, [[0, 0, 0], [7, 8, 9]])
    with pytest.raises(tf.errors.InvalidArgumentError, match="does not index"):
        _scatter(tf.scatter_nd_update, base, [[2, 0]], [1.])
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(base)
        with pytest.raises(ValueError):
            tf.scatter_nd_add(v, [[0, 1]], [1., 2.])


def test_count_up_to():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.int64(1))
        c = tf.count_up_to(v, 3)
        assert c.dtype == tf.int64 and c.shape.as_list() == []
        ini = tf.global_variables_initializer()
        with pytest.raises(ValueError):
            tf.count_up_to(tf.Variable([1, 2]), 3)
    with tf.Session(graph=g) as s:
        s.run(ini)
        assert s.run(c) == 1 and s.run(c) == 2
        with pytest.raises(tf.errors.OutOfRangeError, match="Reached limit of 3"):
            s.run(c)
        assert s.run(v) == 3


# ---------------------------------------------------------------- numerics / shapes / misc
def test_check_numerics():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None])
        y = tf.debugging.check_numerics(x, "msg")
        z = tf.check_numerics(x * 2.0, "other")
        assert y.shape.as_list() == [None]
        with pytest.raises(TypeError):
            tf.check_numerics(tf.constant([1]), "int")
    with tf.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(y, {x: [1., 2.]}), [1., 2.])
        with pytest.raises(tf.errors.InvalidArgumentError, match="msg : Tensor had NaN values"):
            s.run(y, {x: [np.nan]})
        with pytest.raises(tf.errors.InvalidArgumentError, match="other : Tensor had Inf values"):
            s.run(z, {x: [np.inf]})
        with pytest.raises(tf.errors.InvalidArgumentError, match="Inf and NaN"):
            s.run(y, {x: [np.inf, np.nan]})
    x = np.array([0.5, -1.5], np.float64)
    assert grad_err(lambda t: tf.check_numerics(t * t, "m"), x) < 1e-6


def test_ensure_shape():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        y = tf.ensure_shape(x, [2, None])
        assert y.shape.as_list() == [2, 3]
        with pytest.raises(ValueError):
            tf.ensure_shape(x, [2, 4])
        dx = tf.gradients(tf.reduce_sum(y * y), x)[0]
    with tf.Session(graph=g) as s:
        a = np.ones((2, 3), np.float32)
        np.testing.assert_array_equal(s.run(dx, {x: a}), 2 * a)
        with pytest.raises(tf.errors.InvalidArgumentError, match="not compatible"):
            s.run(y, {x: np.ones((4, 3), np.float32)})


def test_swish_reciprocal_trace_reverse():
    a = np.array([-2., 0., 1.5], np.float64)
    out = run(lambda: [tf.nn.swish(a), tf.math.reciprocal_no_nan(a),
                       tf.linalg.trace(np.arange(18.).reshape(2, 3, 3)),
                       tf.trace(np.arange(4, dtype=np.int32).reshape(2, 2))])
    np.testing.assert_allclose(out[0], a / (1 + np.exp(-a)))
    np.testing.assert_allclose(out[1], [-0.5, 0., 1 / 1.5])
    np.testing.assert_array_equal(out[2], [12., 39.])
    assert out[3] == 3 and out[3].dtype == np.int32
    assert grad_err(lambda t: tf.nn.swish(t), a) < 1e-6
    m = np.arange(9.).reshape(3, 3)
    assert grad_err(lambda t: tf.linalg.trace(t), m) < 1e-6


def _np_reverse_sequence(x, lens, seq, batch):
    out = x.copy()
    for b, n in enumerate(lens):
        src = [slice(None)] * x.ndim
        src[batch] = b
        src[seq] = slice(0, n)
        dst = list(src)
        out[tuple(dst)] = np.flip(x[tuple(src)], axis=seq - (1 if batch < seq else 0))
    return out


@pytest.mark.parametrize("seq,batch", [(1, 0), (0, 1), (2, 0), (1, 2)])
def test_reverse_sequence(seq, batch):
    x = np.arange(2 * 3 * 4).reshape(2, 3, 4).astype(np.int32)
    # batch dim sizes: 2 (axis 0), 3 (axis 1), 4 (axis 2)
    lens = np.array([0, 1, 3, 2][:x.shape[batch]], np.int64)
    lens = np.minimum(lens, x.shape[seq])
    out = run(lambda: tf.reverse_sequence(x, lens, seq_axis=seq, batch_axis=batch))
    np.testing.assert_array_equal(out, _np_reverse_sequence(x, lens, seq, batch))
    assert out.dtype == np.int32


def test_reverse_sequence_errors_shape_grad():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 5])
        y = tf.reverse_sequence(x, tf.constant([1, 6], tf.int32), seq_dim=1)
        assert y.shape.as_list() == [2, 5]
        with pytest.raises(ValueError):
            tf.reverse_sequence(x, [1], seq_axis=0, batch_axis=0)
    with tf.Session(graph=g) as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"seq_lens\(1\) > input"):
            s.run(y, {x: np.zeros((2, 5), np.float32)})
    a = np.arange(10.).reshape(2, 5)
    assert grad_err(lambda t: tf.reverse_sequence(t, [3, 5], seq_axis=1) * t, a) < 1e-6


# ---------------------------------------------------------------- IndexedSlices, partitioned
def _slices(values, indices, dense_shape):
    return tf.IndexedSlices(tf.constant(values), tf.constant(indices), tf.constant(dense_shape))


def test_clip_by_norm_indexed_slices():
    vals = np.array([[3.0, 4.0], [0.0, 0.0]], np.float32)
    g = tf.Graph()
    with g.as_default():
        t = _slices(vals, np.array([2, 0], np.int64), np.array([4, 2], np.int64))
        c = tf.clip_by_norm(t, 2.5)
        assert isinstance(c, tf.IndexedSlices)
        assert c.indices is t.indices and c.dense_shape is t.dense_shape
    with tf.Session(graph=g) as s:
        np.testing.assert_allclose(s.run(c.values), vals / 2, rtol=1e-6)


def test_global_norm_and_clip_indexed_slices():
    vals = np.array([[3.0, 0.0], [3.0, 0.0]], np.float32)  # duplicate index: rows not summed
    dense = np.array([4.0], np.float32)
    g = tf.Graph()
    with g.as_default():
        t = _slices(vals, np.array([1, 1], np.int64), np.array([3, 2], np.int64))
        n = tf.global_norm([t, tf.constant(dense), None])
        clipped, norm = tf.clip_by_global_norm([t, tf.constant(dense), None], 2.0)
        assert isinstance(clipped[0], tf.IndexedSlices) and clipped[2] is None
        assert clipped[0].indices is t.indices
    with tf.Session(graph=g) as s:
        want = np.sqrt(9 + 9 + 16)
        np.testing.assert_allclose(s.run(n), want, rtol=1e-6)
        cv, cd, nv = s.run([clipped[0].values, clipped[1], norm])
        np.testing.assert_allclose(nv, want, rtol=1e-6)
        np.testing.assert_allclose(cv, vals * 2 / want, rtol=1e-6)
        np.testing.assert_allclose(cd, dense * 2 / want, rtol=1e-6)


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_embedding_lookup_partitioned_variable(parts):
    full = np.arange(14, dtype=np.float32).reshape(7, 2)
    ids = np.array([[0, 6], [3, 4], [5, 1]], np.int32)
    g = tf.Graph()
    with g.as_default():
        emb = tf.get_variable("emb", [7, 2], initializer=tf.zeros_initializer(),
                              partitioner=tf.fixed_size_partitioner(parts))
        out = tf.nn.embedding_lookup(emb, ids, partition_strategy="div")
        assign = emb.assign(tf.constant(full))
        dparts = tf.gradients(tf.reduce_sum(out), list(emb))
        init = tf.global_variables_initializer()
    with tf.Session(graph=g) as s:
        s.run(init)
        s.run(assign)
        np.testing.assert_array_equal(s.run(out), full[ids])
        counts = np.bincount(ids.ravel(), minlength=7)
        dense = [np.asarray(x) for x in s.run(dparts)]
        np.testing.assert_array_equal(np.concatenate(dense)[:, 0], counts)
