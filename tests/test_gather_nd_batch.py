"""tf.gather_nd with ``batch_dims`` (TF 1.15's BatchGatherND composite): values against a
numpy reference over random shapes, static shapes, graph structure, errors and gradients."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flowrt as tf


def np_batch_gather_nd(params, indices, batch_dims):
    """Reference: for every batch position, numpy gather_nd of its slice."""
    bshape = params.shape[:batch_dims]
    out = []
    for b in np.ndindex(*bshape) if bshape else [()]:
        p, idx = params[b], indices[b]
        r = idx.shape[-1]
        flat = idx.reshape(-1, r)
        rows = [p[tuple(i)] for i in flat]
        out.append(np.array(rows).reshape(idx.shape[:-1] + p.shape[r:]))
    return np.array(out).reshape(bshape + out[0].shape)


def run(build):
    with tf.Graph().as_default():
        out = build()
        with tf.Session() as s:
            return s.run(out)


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_values_match_numpy(data):
    batch_dims = data.draw(st.integers(1, 2))
    bshape = data.draw(st.lists(st.integers(1, 3), min_size=batch_dims, max_size=batch_dims))
    inner = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    r = data.draw(st.integers(1, len(inner)))
    n_idx = data.draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))
    params = np.arange(np.prod(bshape + inner), dtype=np.float32).reshape(bshape + inner)
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    idx = np.stack([rng.integers(0, inner[k], size=bshape + n_idx) for k in range(r)], -1)
    idx = idx.astype(data.draw(st.sampled_from([np.int32, np.int64])))
    got = run(lambda: tf.gather_nd(params, idx, batch_dims=batch_dims))
    want = np_batch_gather_nd(params, idx, batch_dims)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.float32


def test_example_and_static_shapes():
    x = np.arange(24).reshape(2, 3, 4).astype(np.float32)
    with tf.Graph().as_default():
        r = tf.gather_nd(tf.constant(x), [[1], [2]], batch_dims=1)
        assert r.name == "BatchGatherND/Reshape_3:0" and r.op.type == "Reshape"
        assert r.shape.as_list() == [2, 4]
        p = tf.placeholder(tf.float32, [None, 3, 4])
        i = tf.placeholder(tf.int64, [None, 2, 2])
        r2 = tf.gather_nd(p, i, batch_dims=1, name="g")
        assert r2.shape.as_list() == [None, 2]
        assert r2.name.startswith("g/")
        with tf.Session() as s:
            np.testing.assert_array_equal(s.run(r), [x[0, 1], x[1, 2]])
            got = s.run(r2, {p: x, i: [[[0, 1], [2, 3]], [[1, 1], [0, 0]]]})
            np.testing.assert_array_equal(got, [[1, 11], [17, 12]])


def test_batch_dims_zero_and_tensor_batch_dims_are_plain_gather_nd():
    with tf.Graph().as_default():
        a = tf.gather_nd(tf.ones([2, 2]), [[0, 1]], batch_dims=0)
        b = tf.gather_nd(tf.ones([2, 2]), [[0, 1]], batch_dims=tf.constant(0))
        assert a.op.type == b.op.type == "GatherNd"
        c = tf.gather_nd(tf.ones([2, 2]), [[1], [0]], batch_dims=tf.constant(1))
        assert c.op.type == "Reshape"


def test_strings():
    got = run(lambda: tf.gather_nd([["a", "b"], ["c", "d"]], [[1], [0]], batch_dims=1))
    assert got.tolist() == [b"b", b"c"]


@pytest.mark.parametrize("bd, cls, msg", [
    (-1, ValueError, "does not allow negative batch_dims"),
    (2, ValueError, "must be less than rank(indices) = 2"),
    (1.5, TypeError, "batch_dims must be an int"),
])
def test_build_errors(bd, cls, msg):
    with tf.Graph().as_default():
        with pytest.raises(cls, match=msg.replace("(", r"\(").replace(")", r"\)")):
            tf.gather_nd(tf.ones([2, 3, 4]), [[1], [0]], batch_dims=bd)


def test_batch_dims_not_below_params_rank():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=r"must be less than rank\(params\) = 1"):
            tf.gather_nd(tf.ones([2]), [[[0]], [[0]]], batch_dims=1)


def test_out_of_range_index_is_run_time_error():
    with tf.Graph().as_default():
        r = tf.gather_nd(tf.ones([2, 3]), [[5], [0]], batch_dims=1)
        with tf.Session() as s:
            with pytest.raises(tf.errors.InvalidArgumentError, match="does not index"):
                s.run(r)


def test_gradient():
    rng = np.random.default_rng(3)
    pv = rng.standard_normal((2, 3, 4))
    idx = np.array([[[0, 1], [2, 3], [0, 1]], [[1, 0], [1, 0], [2, 2]]])
    with tf.Graph().as_default():
        p = tf.constant(pv)
        y = tf.gather_nd(p, idx, batch_dims=1)
        with tf.Session():
            err = tf.test.compute_gradient_error(p, [2, 3, 4], y, [2, 3], x_init_value=pv)
        g = tf.gradients(tf.reduce_sum(y * 2.0), p)[0]
        with tf.Session() as s:
            gv = s.run(g)
    assert err < 1e-8
    want = np.zeros_like(pv)
    for b in range(2):
        for k in range(3):
            want[b, idx[b, k, 0], idx[b, k, 1]] += 2.0
    np.testing.assert_allclose(gv, want)
