"""Segment reductions (sorted, unsorted, sparse) against numpy references: values for
every reduction, empty segments, dtypes, error classes and messages, and gradients."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors

SETTINGS = settings(max_examples=25, deadline=None)
RNG = np.random.RandomState(1)

_NP = {"sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max, "min": np.min}


def run(fetches, feeds=None):
    with tf.Session() as sess:
        return sess.run(fetches, feeds)


def reference(kind, data, ids, n, sorted_=True):
    out = []
    for i in range(n):
        rows = data[ids == i]
        if len(rows):
            out.append(_NP[kind](rows, axis=0))
        elif kind == "prod":
            out.append(np.ones(data.shape[1:], data.dtype))
        elif kind in ("max", "min") and not sorted_:
            info = np.iinfo(data.dtype) if data.dtype.kind in "iu" else np.finfo(data.dtype)
            fill = info.min if kind == "max" else info.max
            out.append(np.full(data.shape[1:], fill, data.dtype))
        else:
            out.append(np.zeros(data.shape[1:], data.dtype))
    return np.array(out, dtype=data.dtype).reshape((n,) + data.shape[1:])


@SETTINGS
@given(ids=st.lists(st.integers(0, 4), min_size=1, max_size=8),
       kind=st.sampled_from(["sum", "mean", "prod", "max", "min"]),
       dtype=st.sampled_from([np.float32, np.float64, np.int32]), seed=st.integers(0, 999))
def test_sorted_segments(ids, kind, dtype, seed):
    ids = np.sort(np.array(ids, np.int32))
    data = (np.random.RandomState(seed).randn(len(ids), 2) * 3).astype(dtype)
    fn = getattr(tf.math, f"segment_{kind}")
    with tf.Graph().as_default():
        t = fn(data, ids)
        assert t.shape.as_list() == [None, 2]
        out = run(t)
    ref = reference(kind, data, ids, ids[-1] + 1)
    assert out.dtype == dtype
    if kind == "mean" and dtype == np.int32:  # integer means truncate
        ref = reference("sum", data, ids, ids[-1] + 1) / np.maximum(np.bincount(ids), 1)[:, None]
        ref = np.trunc(ref).astype(dtype)
    np.testing.assert_allclose(out, ref, rtol=1e-5)


@SETTINGS
@given(ids=st.lists(st.integers(-1, 4), min_size=1, max_size=8),
       kind=st.sampled_from(["sum", "mean", "prod", "max", "min", "sqrt_n"]),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 999))
def test_unsorted_segments(ids, kind, dtype, seed):
    ids = np.array(ids, np.int64)
    data = np.random.RandomState(seed).randn(len(ids), 3).astype(dtype)
    n = 6
    out = run(getattr(tf.math, f"unsorted_segment_{kind}")(data, ids, n))
    keep = ids >= 0
    if kind == "sqrt_n":
        counts = np.bincount(ids[keep], minlength=n)
        ref = reference("sum", data[keep], ids[keep], n) / np.sqrt(np.maximum(counts, 1))[:, None]
    else:
        ref = reference(kind, data[keep], ids[keep], n, sorted_=False)
    assert out.dtype == dtype and out.shape == (n, 3)
    np.testing.assert_allclose(out, ref, rtol=1e-5)


def test_unsorted_multi_dim_ids_and_int_extremes():
    data = np.arange(12, dtype=np.int32).reshape(2, 3, 2)
    ids = np.array([[0, 2, 0], [2, 2, 0]])
    out = run(tf.unsorted_segment_max(data, ids, 4))
    assert out.shape == (4, 2)
    np.testing.assert_array_equal(out[0], [10, 11])
    np.testing.assert_array_equal(out[1], [np.iinfo(np.int32).min] * 2)
    np.testing.assert_array_equal(run(tf.unsorted_segment_min(data, ids, 4))[3],
                                  [np.iinfo(np.int32).max] * 2)
    np.testing.assert_array_equal(run(tf.math.unsorted_segment_prod(data, ids, 3))[1], [1, 1])


@pytest.mark.parametrize("kind", ["sum", "mean", "sqrt_n"])
def test_sparse_segments(kind):
    data = RNG.randn(5, 2)
    indices = np.array([0, 3, 3, 1])
    ids = np.array([0, 0, 2, 2])
    fn = getattr(tf, f"sparse_segment_{kind}")
    out, out_n, out_sparse_ns = run([fn(data, indices, ids), fn(data, indices, ids,
                                                               num_segments=5),
                                    getattr(tf.sparse, f"segment_{kind}")(data, indices, ids)])
    rows = data[indices]
    ref = reference("sum", rows, ids, 3)
    counts = np.bincount(ids, minlength=3)[:, None]
    if kind == "mean":
        ref = ref / np.maximum(counts, 1)
    elif kind == "sqrt_n":
        ref = ref / np.sqrt(np.maximum(counts, 1))
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    np.testing.assert_allclose(out_sparse_ns, ref, rtol=1e-12)
    assert out_n.shape == (5, 2)
    np.testing.assert_allclose(out_n[:3], ref, rtol=1e-12)
    np.testing.assert_array_equal(out_n[3:], 0)


def test_errors():
    with tf.Graph().as_default():
        d = tf.placeholder(tf.float32)
        i = tf.placeholder(tf.int32)
        s = tf.segment_sum(d, i)
        with tf.Session() as sess:
            with pytest.raises(errors.InvalidArgumentError, match="not increasing") as info:
                sess.run(s, {d: np.ones(3), i: [0, 2, 1]})
            assert s.op.name in str(info.value)
            with pytest.raises(errors.InvalidArgumentError, match=">= 0"):
                sess.run(s, {d: np.ones(2), i: [-1, 0]})
            with pytest.raises(errors.InvalidArgumentError, match="same size"):
                sess.run(s, {d: np.ones(3), i: [0, 1]})
            u = tf.unsorted_segment_max(d, i, 2)
            with pytest.raises(errors.InvalidArgumentError, match="out of range"):
                sess.run(u, {d: np.ones(2), i: [0, 2]})
            sp = tf.sparse_segment_sum(d, i, [0, 0])
            with pytest.raises(errors.InvalidArgumentError, match="out of range"):
                sess.run(sp, {d: np.ones((2, 1)), i: [0, 5]})
        with pytest.raises(ValueError, match="rank 1"):
            tf.segment_sum(tf.ones([2, 2]), tf.zeros([2, 2], tf.int32))
        with pytest.raises(TypeError):
            tf.segment_max(tf.ones([2], tf.complex64), [0, 1])


def grad_err(build, value):
    value = np.asarray(value, dtype=np.float64)
    with tf.Graph().as_default():
        x = tf.constant(value)
        y = build(x)
        with tf.Session() as sess:
            shape = list(sess.run(y).shape)
            return tf.test.compute_gradient_error(x, list(value.shape), y, shape,
                                                  x_init_value=value)


@pytest.mark.parametrize("kind", ["sum", "mean", "prod", "max", "min"])
def test_sorted_grads(kind):
    data = RNG.randn(5, 2)
    ids = [0, 0, 1, 3, 3]
    assert grad_err(lambda x: getattr(tf.math, f"segment_{kind}")(x, ids), data) < 1e-6


@pytest.mark.parametrize("kind", ["sum", "mean", "prod", "max", "min", "sqrt_n"])
def test_unsorted_grads(kind):
    data = RNG.randn(3, 2, 2)
    ids = [[0, 2], [-1, 1], [3, 2]]  # no empty segment: max/min of one would be -inf/inf
    fn = getattr(tf.math, f"unsorted_segment_{kind}")
    assert grad_err(lambda x: fn(x, ids, 4), data) < 1e-6


def test_prod_grad_with_zeros():
    data = np.array([[0.0, 2.0], [3.0, 0.0], [0.0, 5.0]])
    with tf.Graph().as_default():
        x = tf.constant(data)
        g = run(tf.gradients(tf.segment_prod(x, [0, 0, 1]), x)[0])
        gu = run(tf.gradients(tf.unsorted_segment_prod(x, [0, 0, 0], 1), x)[0])
    np.testing.assert_allclose(g, [[3.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    np.testing.assert_allclose(gu, [[0.0, 0.0], [0.0, 10.0], [0.0, 0.0]])  # 2 zeros, 1 zero


@pytest.mark.parametrize("kind", ["sum", "mean", "sqrt_n"])
def test_sparse_grads(kind):
    data = RNG.randn(4, 2)
    fn = getattr(tf, f"sparse_segment_{kind}")
    assert grad_err(lambda x: fn(x, [0, 3, 3, 1], [0, 0, 2, 2]), data) < 1e-6
    assert grad_err(lambda x: fn(x, [0, 3, 1], [0, 1, 1], num_segments=4), data) < 1e-6
