"""tf.SparseTensor and tf.sparse (plugins/kernels/standard/sparse_ops.py,
core/framework/sparse_tensor.py): the session's feed/fetch protocol, every sparse op
against a dense numpy reference, errors, static shapes and numeric gradients."""
from __future__ import annotations

import collections

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flowrt as tf
from flowrt import errors


def run(fetches, feed=None):
    with tf.Session() as s:
        return s.run(fetches, feed)


@pytest.fixture(autouse=True)
def _graph():
    with tf.Graph().as_default():
        yield


def dense_of(v) -> np.ndarray:
    """The dense array of a SparseTensorValue (numpy reference)."""
    out = np.zeros(tuple(v.dense_shape), dtype=v.values.dtype)
    for i, x in zip(v.indices, v.values):
        out[tuple(i)] = x
    return out


@st.composite
def sparse_arrays(draw, max_rank=3, dtype=np.float64):
    """A random sparse tensor: (sorted unique indices, values, shape, dense)."""
    rank = draw(st.integers(1, max_rank))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    mask = np.array(draw(st.lists(st.booleans(), min_size=int(np.prod(shape)),
                                  max_size=int(np.prod(shape))))).reshape(shape)
    idx = np.argwhere(mask).astype(np.int64)
    vals = np.array(draw(st.lists(st.integers(-9, 9).filter(lambda x: x != 0),
                                  min_size=len(idx), max_size=len(idx))), dtype=dtype)
    dense = np.zeros(shape, dtype)
    dense[mask] = vals
    return idx.reshape(-1, rank), vals, np.array(shape, np.int64), dense


SP = dict(indices=[[0, 0], [1, 2]], values=[1.0, 2.0], dense_shape=[3, 4])


# =======================================================================================
# SparseTensor, feeds and fetches
# =======================================================================================
def test_sparse_tensor_properties():
    sp = tf.SparseTensor(**SP)
    assert sp.dtype == tf.float32 and sp.indices.dtype == tf.int64
    assert sp.dense_shape.dtype == tf.int64
    assert sp.shape.as_list() == [3, 4] and sp.get_shape().as_list() == [3, 4]
    assert sp.op is sp.values.op and sp.graph is tf.get_default_graph()
    assert sp.indices.name == "SparseTensor/indices:0"
    assert "SparseTensor(indices=" in repr(sp)
    v = run(sp)
    assert isinstance(v, tf.SparseTensorValue)
    assert v._fields == ("indices", "values", "dense_shape")
    np.testing.assert_array_equal(v.indices, [[0, 0], [1, 2]])
    assert v.values.dtype == np.float32 and v.dense_shape.tolist() == [3, 4]
    with tf.Session():
        v2 = sp.eval()
    assert v2.values.tolist() == [1.0, 2.0]


def test_sparse_tensor_static_checks():
    with pytest.raises(ValueError):
        tf.SparseTensor([0, 1], [1.0, 2.0], [3])
    with pytest.raises(ValueError):
        tf.SparseTensor([[0], [1]], [1.0, 2.0, 3.0], [3])
    with pytest.raises(ValueError):
        tf.SparseTensor([[0, 1]], [1.0], [3])
    sp = tf.SparseTensor(tf.placeholder(tf.int64, [None, 2]), tf.placeholder(tf.float32),
                         tf.placeholder(tf.int64, [2]))
    assert sp.shape.as_list() == [None, None]
    sp.set_shape([None, 5])
    assert sp.shape.as_list() == [None, 5]
    with pytest.raises(ValueError):
        sp.set_shape([2, 4])
    with pytest.raises(TypeError):
        tf.SparseTensor.from_value([1, 2])
    assert tf.SparseTensor.from_value(tf.SparseTensorValue(**SP)).shape.as_list() == [3, 4]


def test_fetch_nested_structures():
    sp = tf.SparseTensor(**SP)
    Pair = collections.namedtuple("Pair", ["a", "b"])
    out = run({"s": [sp, (sp.values, sp)], "p": Pair(sp, tf.constant(1))})
    assert isinstance(out["s"][0], tf.SparseTensorValue)
    assert isinstance(out["s"][1][1], tf.SparseTensorValue)
    assert isinstance(out["p"], Pair) and out["p"].b == 1
    np.testing.assert_array_equal(out["s"][1][0], [1.0, 2.0])


def test_sparse_placeholder_feeds():
    x = tf.sparse_placeholder(tf.float32)
    assert x.shape.ndims is None
    y = tf.sparse.reduce_sum(x)
    ind = np.array([[3, 2, 0], [4, 5, 1]], np.int64)
    val = np.array([1.0, 2.0], np.float32)
    shp = np.array([7, 9, 2], np.int64)
    with tf.Session() as s:
        assert s.run(y, {x: tf.SparseTensorValue(ind, val, shp)}) == 3.0
        assert s.run(y, {x: (ind, val, shp)}) == 3.0
        back = s.run(x, {x: (ind, val, shp)})
        assert isinstance(back, tf.SparseTensorValue)
        np.testing.assert_array_equal(back.indices, ind)
        assert s.make_callable(y, [x])((ind, val, shp)) == 3.0
        with pytest.raises(TypeError):
            s.run(y, {x: np.ones(3)})
        with pytest.raises(errors.InvalidArgumentError):
            s.run(y)


def test_sparse_placeholder_shapes_and_names():
    p = tf.sparse.placeholder(tf.float32, shape=[None, 3], name="p")
    assert p.shape.as_list() == [None, 3]
    assert p.indices.name == "p/indices:0" and p.values.name == "p/values:0"
    assert p.dense_shape.op.type == "PlaceholderWithDefault"
    v = run(p, {p: ([[0, 1]], [5.0], [2, 3])})
    assert v.dense_shape.tolist() == [2, 3]
    # the given shape is the default of the fed dense shape
    v = run(p, {p.indices: [[0, 1]], p.values: [5.0]})
    assert v.dense_shape.tolist() == [-1, 3]
    q = tf.sparse_placeholder(tf.int32, shape=[2, 2])
    assert q.shape.as_list() == [2, 2]


def test_feed_sparse_tensor_of_placeholders():
    i = tf.placeholder(tf.int64)
    v = tf.placeholder(tf.float32)
    s = tf.placeholder(tf.int64)
    sp = tf.SparseTensor(i, v, s)
    d = tf.sparse.to_dense(sp)
    out = run(d, {sp: tf.SparseTensorValue([[1]], [4.0], [3])})
    np.testing.assert_array_equal(out, [0.0, 4.0, 0.0])


# =======================================================================================
# to_dense / sparse_to_dense
# =======================================================================================
@settings(max_examples=12, deadline=None)
@given(sparse_arrays())
def test_to_dense_matches_reference(data):
    idx, vals, shape, dense = data
    with tf.Graph().as_default():
        out = run(tf.sparse.to_dense(tf.SparseTensor(idx, vals, shape), default_value=0.0))
    np.testing.assert_array_equal(out, dense)


def test_sparse_to_dense_forms():
    out = run([tf.sparse_to_dense(2, [4], 7), tf.sparse_to_dense([0, 3], [5], [1, 2], -1),
               tf.sparse_to_dense([[0, 1], [2, 0]], [3, 2], 1.5),
               tf.sparse.to_dense(tf.SparseTensor(**SP), default_value=9.0)])
    np.testing.assert_array_equal(out[0], [0, 0, 7, 0])
    np.testing.assert_array_equal(out[1], [1, -1, -1, 2, -1])
    np.testing.assert_array_equal(out[2], [[0, 1.5], [0, 0], [1.5, 0]])
    assert out[3][2, 3] == 9.0 and out[3][1, 2] == 2.0
    assert tf.sparse_to_dense([[0, 1]], [3, 2], 1.0).shape.as_list() == [3, 2]


@pytest.mark.parametrize("indices,msg", [
    ([[1, 0], [0, 0]], r"indices\[1\] = \[0,0\] is out of order"),
    ([[0, 0], [0, 0]], r"indices\[1\] = \[0,0\] is repeated"),
    ([[0, 0], [5, 0]], r"indices\[1\] = \[5,0\] is out of bounds: need 0 <= index < \[3,4\]"),
])
def test_to_dense_validation(indices, msg):
    d = tf.sparse.to_dense(tf.SparseTensor(indices, [1.0, 2.0], [3, 4]))
    with pytest.raises(errors.InvalidArgumentError, match=msg):
        run(d)
    # without validation, unordered indices are fine
    ok = tf.sparse.to_dense(tf.SparseTensor([[1, 0], [0, 0]], [1.0, 2.0], [3, 4]),
                            validate_indices=False)
    assert run(ok)[0, 0] == 2.0


def test_sparse_to_dense_bad_shapes():
    with pytest.raises(errors.InvalidArgumentError, match="sparse_values has incorrect shape"):
        run(tf.sparse_to_dense([[0, 0], [1, 1]], [2, 2], [1.0, 2.0, 3.0]))
    with pytest.raises(errors.InvalidArgumentError, match="output_shape has incorrect"):
        run(tf.sparse_to_dense([[0, 0]], tf.placeholder_with_default([2, 2, 2], [None]), 1.0))


def test_from_dense():
    v = run(tf.sparse.from_dense(np.array([[0, 3], [4, 0]], np.int32)))
    np.testing.assert_array_equal(v.indices, [[0, 1], [1, 0]])
    np.testing.assert_array_equal(v.values, [3, 4])
    assert v.dense_shape.tolist() == [2, 2]


# =======================================================================================
# reorder, add, maximum/minimum
# =======================================================================================
@settings(max_examples=12, deadline=None)
@given(sparse_arrays(), st.randoms(use_true_random=False))
def test_reorder_sorts(data, rnd):
    idx, vals, shape, dense = data
    perm = list(range(len(idx)))
    rnd.shuffle(perm)
    with tf.Graph().as_default():
        v = run(tf.sparse.reorder(tf.SparseTensor(idx[perm].reshape(-1, len(shape)),
                                                  vals[perm], shape)))
    np.testing.assert_array_equal(v.indices, idx)
    np.testing.assert_array_equal(v.values, vals)


@settings(max_examples=12, deadline=None)
@given(st.data())
def test_add_maximum_minimum_match_dense(data):
    a = data.draw(sparse_arrays(max_rank=2))
    shape = tuple(a[2])
    b_mask = np.array(data.draw(st.lists(st.booleans(), min_size=int(np.prod(shape)),
                                         max_size=int(np.prod(shape))))).reshape(shape)
    b_idx = np.argwhere(b_mask).astype(np.int64).reshape(-1, len(shape))
    b_vals = np.arange(1.0, len(b_idx) + 1.0)
    b_dense = np.zeros(shape)
    b_dense[b_mask] = b_vals
    with tf.Graph().as_default():
        sa = tf.SparseTensor(a[0], a[1], a[2])
        sb = tf.SparseTensor(b_idx, b_vals, a[2])
        s, mx, mn, sd = run([tf.sparse.add(sa, sb), tf.sparse.maximum(sa, sb),
                             tf.sparse.minimum(sa, sb), tf.sparse.add(sa, b_dense)])
    np.testing.assert_allclose(dense_of(s), a[3] + b_dense)
    np.testing.assert_allclose(dense_of(mx), np.maximum(a[3], b_dense))
    np.testing.assert_allclose(dense_of(mn), np.minimum(a[3], b_dense))
    np.testing.assert_allclose(sd, a[3] + b_dense)
    # outputs are in row-major order
    for v in (s, mx, mn):
        assert [tuple(r) for r in v.indices] == sorted(tuple(r) for r in v.indices)


def test_add_threshold_and_errors():
    a = tf.SparseTensor([[0], [1], [2]], [1.0, 2.0, 0.5], [4])
    b = tf.SparseTensor([[1], [2], [3]], [-1.5, -0.25, 0.1], [4])
    v = run(tf.sparse.add(a, b, threshold=0.3))
    # sums below the threshold are dropped; unmatched entries are kept
    np.testing.assert_array_equal(v.indices.ravel(), [0, 1, 3])
    np.testing.assert_allclose(v.values, [1.0, 0.5, 0.1])
    v = run(tf.sparse_add(a, b, thresh=0.3))
    assert v.indices.ravel().tolist() == [0, 1, 3]
    with pytest.raises(TypeError, match="At least one input should be SparseTensor"):
        tf.sparse.add(tf.constant([1.0]), tf.constant([2.0]))
    c = tf.SparseTensor([[1]], [1.0], tf.placeholder_with_default(np.int64([5]), [1]))
    with pytest.raises(errors.InvalidArgumentError, match="shapes do not match"):
        run(tf.sparse.add(a, c))


# =======================================================================================
# reductions
# =======================================================================================
@settings(max_examples=12, deadline=None)
@given(st.data())
def test_reduce_sum_max_match_reference(data):
    idx, vals, shape, dense = data.draw(sparse_arrays())
    rank = len(shape)
    axes = data.draw(st.lists(st.integers(-rank, rank - 1), max_size=rank, unique_by=lambda
                              a: a % rank))
    keep = data.draw(st.booleans())
    present = np.zeros(tuple(shape), bool)
    present[tuple(idx.T)] = True
    ax = tuple(sorted(a % rank for a in axes))
    with tf.Graph().as_default():
        sp = tf.SparseTensor(idx, vals, shape)
        s, m, ss, ms = run([tf.sparse.reduce_sum(sp, axes, keepdims=keep),
                            tf.sparse.reduce_max(sp, axes, keepdims=keep),
                            tf.sparse.reduce_sum_sparse(sp, axes, keepdims=keep),
                            tf.sparse_reduce_max_sparse(sp, axes, keep_dims=keep)])
    want_s = dense.sum(axis=ax, keepdims=keep)
    masked = np.where(present, dense, -np.inf)
    want_m = masked.max(axis=ax, keepdims=keep) if ax else masked
    want_m = np.where(np.isinf(want_m), 0, want_m)
    np.testing.assert_allclose(s, want_s)
    np.testing.assert_allclose(m, want_m)
    np.testing.assert_allclose(dense_of(ss), want_s)
    np.testing.assert_allclose(dense_of(ms), want_m)


def test_reduce_defaults_and_static_shapes():
    sp = tf.SparseTensor([[0, 0, 1], [1, 2, 0]], [-1.0, -2.0], [2, 3, 2])
    r = tf.sparse.reduce_sum(sp, 1)
    assert r.shape.as_list() == [2, 2]
    assert tf.sparse_reduce_sum(sp, [0, 2], keep_dims=True).shape.as_list() == [1, 3, 1]
    allsum, allmax, r1 = run([tf.sparse.reduce_sum(sp), tf.sparse.reduce_max(sp), r])
    # max is over the entries present: negative values stay negative
    assert allsum == -3.0 and allmax == -1.0
    np.testing.assert_array_equal(r1, [[0, -1], [-2, 0]])
    with pytest.raises(errors.InvalidArgumentError, match="Invalid reduction dimension 3"):
        run(tf.sparse.reduce_sum(sp, 3))


# =======================================================================================
# matmul
# =======================================================================================
@settings(max_examples=12, deadline=None)
@given(st.data())
def test_sparse_dense_matmul(data):
    m, k, n = (data.draw(st.integers(1, 4)) for _ in range(3))
    adj_a, adj_b = data.draw(st.booleans()), data.draw(st.booleans())
    a_shape = (k, m) if adj_a else (m, k)
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=m * k, max_size=m * k)))
    a = np.where(mask.reshape(a_shape), np.arange(1.0, m * k + 1).reshape(a_shape), 0.0)
    b = np.arange(k * n, dtype=np.float64).reshape((n, k) if adj_b else (k, n)) - 3
    with tf.Graph().as_default():
        sp = tf.SparseTensor(np.argwhere(a).astype(np.int64).reshape(-1, 2), a[a != 0],
                             a_shape)
        out = run(tf.sparse.sparse_dense_matmul(sp, b, adjoint_a=adj_a, adjoint_b=adj_b))
    want = (a.T if adj_a else a) @ (b.T if adj_b else b)
    np.testing.assert_allclose(out, want)


def test_matmul_shapes_and_errors():
    sp = tf.SparseTensor([[0, 1]], [2.0], [3, 4])
    assert tf.sparse_tensor_dense_matmul(sp, tf.ones([4, 5])).shape.as_list() == [3, 5]
    assert tf.sparse.matmul(sp, tf.ones([5, 4]), adjoint_b=True).shape.as_list() == [3, 5]
    with pytest.raises(ValueError):
        tf.sparse.matmul(sp, tf.ones([3, 5]))
    bad = tf.SparseTensor([[0, 7]], [2.0], [3, 4])
    with pytest.raises(errors.InvalidArgumentError, match=r"k \(7\) from index\[0,1\] out of"):
        run(tf.sparse.matmul(bad, tf.ones([4, 2])))
    # a dense a times a sparse b
    out = run(tf.sparse.matmul(tf.ones([2, 3]), tf.SparseTensor([[1, 0]], [5.0], [3, 2])))
    np.testing.assert_array_equal(out, [[5.0, 0.0], [5.0, 0.0]])


# =======================================================================================
# concat, reshape, slice, split, transpose, fill_empty_rows, retain, reset_shape ...
# =======================================================================================
def test_concat():
    a = tf.SparseTensor([[0, 2], [1, 0], [1, 1]], ["a", "b", "c"], [2, 3])
    b = tf.SparseTensor([[0, 1], [0, 2]], ["d", "e"], [2, 4])
    c = tf.sparse.concat(1, [a, b])
    assert c.shape.as_list() == [2, 7]
    v = run(c)
    assert v.indices.tolist() == [[0, 2], [0, 4], [0, 5], [1, 0], [1, 1]]
    assert v.values.tolist() == [b"a", b"d", b"e", b"b", b"c"]
    d = tf.SparseTensor([[0, 0]], ["x"], [3, 1])
    v = run(tf.sparse_concat(1, [a, d], expand_nonconcat_dim=True))
    assert v.dense_shape.tolist() == [3, 4]
    assert v.indices.tolist() == [[0, 2], [0, 3], [1, 0], [1, 1]]
    with pytest.raises(errors.InvalidArgumentError, match="Input shapes must match"):
        run(tf.sparse.concat(0, [a, b]))
    assert tf.sparse.concat(0, [a]) is a


def test_reshape():
    sp = tf.SparseTensor([[0, 1], [1, 2]], [1, 2], [2, 3])
    r = tf.sparse.reshape(sp, [3, -1])
    assert r.shape.as_list() == [3, 2]
    v = run(r)
    np.testing.assert_array_equal(dense_of(v), np.array([[0, 1, 0], [0, 0, 2]]).reshape(3, 2))
    with pytest.raises(ValueError, match="Cannot reshape a tensor with 6 elements"):
        tf.sparse.reshape(sp, [4, 2])
    p = tf.placeholder(tf.int64, [2])
    with pytest.raises(errors.InvalidArgumentError, match="requested shape has 8"):
        run(tf.sparse_reshape(sp, p), {p: [4, 2]})
    with pytest.raises(errors.InvalidArgumentError, match="only one output dimension"):
        run(tf.sparse_reshape(sp, p), {p: [-1, -1]})


def test_slice_split_transpose():
    sp = tf.SparseTensor([[0, 0], [0, 3], [1, 1], [2, 4]], [1, 2, 3, 4], [3, 5])
    v = run(tf.sparse.slice(sp, [0, 1], [2, 10]))
    assert v.indices.tolist() == [[0, 2], [1, 0]] and v.dense_shape.tolist() == [2, 4]
    parts = run(tf.sparse.split(sp_input=sp, num_split=2, axis=1))
    assert [p.dense_shape.tolist() for p in parts] == [[3, 3], [3, 2]]
    assert parts[1].indices.tolist() == [[0, 0], [2, 1]]
    with pytest.raises(ValueError, match="Keyword arguments are required"):
        tf.sparse.split(sp, 2, 1)
    t = tf.sparse.transpose(sp)
    assert t.shape.as_list() == [5, 3]
    np.testing.assert_array_equal(dense_of(run(t)), dense_of(run(sp)).T)
    with pytest.raises(errors.InvalidArgumentError, match="num_split should be between"):
        run(tf.sparse_split(sp_input=sp, num_split=9, axis=0))


def test_fill_empty_rows_retain_reset_shape():
    sp = tf.SparseTensor([[1, 0], [1, 2], [3, 1]], [5.0, 6.0, 7.0], [5, 3])
    filled, empty = tf.sparse.fill_empty_rows(sp, -1.0)
    f, e = run([filled, empty])
    assert f.indices.tolist() == [[0, 0], [1, 0], [1, 2], [2, 0], [3, 1], [4, 0]]
    assert f.values.tolist() == [-1.0, 5.0, 6.0, -1.0, 7.0, -1.0]
    assert e.tolist() == [True, False, True, False, True]
    r = run(tf.sparse.retain(sp, [True, False, True]))
    assert r.indices.tolist() == [[1, 0], [3, 1]]
    assert run(tf.sparse.reset_shape(sp)).dense_shape.tolist() == [4, 3]
    assert run(tf.sparse_reset_shape(sp, [6, 4])).dense_shape.tolist() == [6, 4]
    with pytest.raises(ValueError, match="new_shape should have dimension sizes"):
        tf.sparse.reset_shape(sp, [2, 2])


def test_softmax_expand_eye_merge_indicator():
    sp = tf.SparseTensor([[0, 0], [0, 2], [1, 1]], [1.0, 2.0, 3.0], [2, 3])
    v = run(tf.sparse.softmax(sp))
    e = np.exp([1.0, 2.0])
    np.testing.assert_allclose(v.values, [e[0] / e.sum(), e[1] / e.sum(), 1.0], rtol=1e-6)
    ex = tf.sparse.expand_dims(sp, 1)
    assert run(ex).dense_shape.tolist() == [2, 1, 3]
    eye = run(tf.sparse.eye(2, 3, dtype=tf.int32))
    np.testing.assert_array_equal(dense_of(eye), np.eye(2, 3))
    ids = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], tf.constant([3, 1, 2], tf.int64), [2, 2])
    vals = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], [0.5, 0.25, 1.0], [2, 2])
    m = run(tf.sparse.merge(ids, vals, 4))
    assert m.indices.tolist() == [[0, 1], [0, 3], [1, 2]]
    assert m.values.tolist() == [0.25, 0.5, 1.0]
    ind = run(tf.sparse.to_indicator(ids, 4))
    np.testing.assert_array_equal(ind, [[False, True, False, True], [False, False, True, False]])


def test_sparse_dense_operators():
    sp = tf.SparseTensor([[0, 0], [1, 2]], [2.0, 6.0], [2, 3])
    m, d, t = run([sp * tf.constant([1.0, 2.0, 3.0]), sp / 2.0, sp.__div__(2.0)])
    assert m.values.tolist() == [2.0, 18.0] and d.values.tolist() == [1.0, 3.0]
    assert t.values.tolist() == [1.0, 3.0]
    with pytest.raises(errors.InvalidArgumentError, match="broadcasts dense to sparse only"):
        run(sp * tf.ones([4]))


def test_convert_to_tensor_or_sparse_tensor():
    v = tf.SparseTensorValue([[0]], [1.0], [2])
    assert isinstance(tf.convert_to_tensor_or_sparse_tensor(v), tf.SparseTensor)
    assert isinstance(tf.convert_to_tensor_or_sparse_tensor([1.0]), tf.Tensor)
    with pytest.raises(RuntimeError, match="Sparse dtype"):
        tf.convert_to_tensor_or_sparse_tensor(tf.SparseTensor(**SP), dtype=tf.int32)


# =======================================================================================
# gradients
# =======================================================================================
def grad_error(x_shape, build, x0, extra=None):
    x = tf.placeholder(tf.float64, x_shape)
    y, y_shape = build(x)
    with tf.Session():
        return tf.test.compute_gradient_error(x, list(x_shape), y, y_shape, x_init_value=x0,
                                              extra_feed_dict=extra)


IND = [[0, 0], [0, 2], [1, 1], [2, 0]]
V0 = np.array([0.3, -1.2, 0.7, 2.0])


@pytest.mark.parametrize("name,build", [
    ("to_dense", lambda v: (tf.sparse.to_dense(tf.SparseTensor(IND, v, [3, 3])), [3, 3])),
    ("reduce_sum", lambda v: (tf.sparse.reduce_sum(tf.SparseTensor(IND, v, [3, 3]), 1), [3])),
    ("reduce_sum_all", lambda v: (tf.sparse.reduce_sum(tf.SparseTensor(IND, v, [3, 3])), [])),
    ("softmax", lambda v: (tf.sparse.softmax(tf.SparseTensor(IND, v, [3, 3])).values, [4])),
    ("matmul", lambda v: (tf.sparse.matmul(tf.SparseTensor(IND, v, [3, 3]),
                                           tf.constant(np.arange(6.0).reshape(3, 2))), [3, 2])),
    ("matmul_adj", lambda v: (tf.sparse.matmul(tf.SparseTensor(IND, v, [3, 3]),
                                               tf.constant(np.arange(6.0).reshape(2, 3)),
                                               adjoint_a=True, adjoint_b=True), [3, 2])),
    ("add", lambda v: (tf.sparse.add(tf.SparseTensor(IND, v, [3, 3]), tf.SparseTensor(
        [[0, 0], [2, 2]], tf.constant([1.0, 2.0], tf.float64), [3, 3])).values, [5])),
    ("add_dense", lambda v: (tf.sparse.add(tf.SparseTensor(IND, v, [3, 3]),
                                           tf.ones([3, 3], tf.float64)), [3, 3])),
    ("reorder", lambda v: (tf.sparse.reorder(tf.SparseTensor(IND[::-1], v, [3, 3])).values,
                           [4])),
    ("slice", lambda v: (tf.sparse.slice(tf.SparseTensor(IND, v, [3, 3]), [0, 1],
                                         [3, 2]).values, [2])),
    ("fill_empty", lambda v: (tf.sparse.fill_empty_rows(tf.SparseTensor(IND, v, [4, 3]),
                                                        tf.constant(0.0, tf.float64))[0].values,
                              [5])),
    ("mul_dense", lambda v: ((tf.SparseTensor(IND, v, [3, 3]) *
                              tf.constant([1.0, 2.0, 3.0], tf.float64)).values, [4])),
    ("sparse_to_dense", lambda v: (tf.sparse_to_dense(IND, [3, 3], v), [3, 3])),
])
def test_gradients_wrt_values(name, build):
    assert grad_error([4], build, V0) < 1e-6


def test_gradients_wrt_dense_operands():
    sp_vals = tf.constant(V0)
    err = grad_error([3, 2], lambda b: (tf.sparse.matmul(tf.SparseTensor(IND, sp_vals, [3, 3]),
                                                         b), [3, 2]),
                     np.arange(6.0).reshape(3, 2))
    assert err < 1e-6
    err = grad_error([3], lambda y: ((tf.SparseTensor(IND, sp_vals, [3, 3]) / y).values, [4]),
                     np.array([1.5, 2.0, 3.0]))
    assert err < 1e-4
    err = grad_error([], lambda d: (tf.sparse_to_dense(IND, [3, 3], sp_vals, d), [3, 3]),
                     np.array(0.5))
    assert err < 1e-6


# =======================================================================================
# serialization, sparse_matmul
# =======================================================================================
def test_serialize_round_trip():
    sp = tf.SparseTensor([[0, 0], [1, 2], [1, 3]], [1.0, 2.0, 3.0], [3, 4])
    one, many = tf.serialize_sparse(sp), tf.io.serialize_many_sparse(sp)
    assert one.shape.as_list() == [3] and many.shape.as_list() == [None, 3]
    d = tf.deserialize_many_sparse(many, tf.float32, rank=2)
    assert d.indices.shape.as_list() == [None, 2]
    o, m, v = run([one, many, d])
    assert o.shape == (3,) and m.shape == (3, 3) and all(isinstance(b, bytes) for b in o)
    np.testing.assert_array_equal(dense_of(v), dense_of(run(sp)))
    # two serialized tensors of different shapes: the batch takes the largest
    pair = tf.stack([tf.serialize_sparse(tf.SparseTensor([[1]], [5], [2])),
                     tf.serialize_sparse(tf.SparseTensor([[3]], [6], [4]))])
    v = run(tf.io.deserialize_many_sparse(pair, tf.int32))
    assert v.indices.tolist() == [[0, 1], [1, 3]] and v.dense_shape.tolist() == [2, 4]
    with pytest.raises(errors.InvalidArgumentError, match="Requested SparseTensor of type"):
        run(tf.deserialize_many_sparse(many, tf.int64))
    with pytest.raises(errors.InvalidArgumentError, match="Could not parse"):
        run(tf.deserialize_many_sparse([["x", "y", "z"]], tf.int64))


def test_sparse_matmul():
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    b = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    out = run(tf.sparse_matmul(a, b, transpose_b=True, b_is_sparse=True))
    np.testing.assert_allclose(out, a @ b.T)
    x = tf.placeholder(tf.float32, [2, 3])
    with tf.Session():
        err = tf.test.compute_gradient_error(
            x, [2, 3], tf.sparse_matmul(x, tf.constant(b), transpose_b=True), [2, 4],
            x_init_value=a)
    assert err < 1e-2
