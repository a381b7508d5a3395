"""tensor_scatter_update/add/sub, scatter_max/min/nd_sub, roll and bitcast: values
against numpy, gradients, static shapes and TF's errors."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf


def _run(fetches, feed=None):
    with tf.Session() as s:
        return s.run(fetches, feed)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=6),
       st.sampled_from(["update", "add", "sub"]))
def test_tensor_scatter_matches_numpy(rows, kind):
    base = np.arange(15, dtype=np.float64).reshape(5, 3)
    idx = np.array(rows, np.int32).reshape(-1, 1)
    upd = np.random.default_rng(len(rows)).standard_normal((len(rows), 3))
    fn = {"update": tf.tensor_scatter_update, "add": tf.tensor_scatter_add,
          "sub": tf.tensor_scatter_sub}[kind]
    with tf.Graph().as_default():
        out = fn(tf.constant(base), tf.constant(idx), tf.constant(upd))
        assert out.shape.as_list() == [5, 3]
        got = _run(out)
    want = base.copy()
    if kind == "update":
        for r, u in zip(rows, upd):
            want[r] = u
    else:
        (np.add if kind == "add" else np.subtract).at(want, np.array(rows), upd)
    np.testing.assert_allclose(got, want)


def test_tensor_scatter_aliases_and_errors():
    assert tf.tensor_scatter_nd_update is tf.tensor_scatter_update
    assert tf.tensor_scatter_nd_add is tf.tensor_scatter_add
    with tf.Graph().as_default():
        out = tf.tensor_scatter_update(tf.zeros([3]), [[5]], [1.0])
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"indices\[0\] = \[5\] does not index into param shape"):
            _run(out)


@pytest.mark.parametrize("kind", ["update", "add", "sub"])
def test_tensor_scatter_gradients(kind):
    fn = {"update": tf.tensor_scatter_update, "add": tf.tensor_scatter_add,
          "sub": tf.tensor_scatter_sub}[kind]
    with tf.Graph().as_default():
        t = tf.constant(np.arange(8.0).reshape(4, 2))
        u = tf.constant(np.ones((2, 2)) * 0.5)
        y = fn(t, [[1], [3]], u)
        with tf.Session():
            err = tf.test.compute_gradient_error([t, u], [[4, 2], [2, 2]], y, [4, 2])
    assert err < 1e-6


def test_ref_scatter_max_min_nd_sub():
    with tf.Graph().as_default():
        v = tf.Variable(np.array([1.0, 5.0, 3.0], np.float32))
        w = tf.Variable(np.zeros((2, 2), np.float32))
        mx = tf.scatter_max(v, [0, 2, 0], [4.0, 1.0, 2.0])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            np.testing.assert_array_equal(s.run(mx), [4.0, 5.0, 3.0])
            np.testing.assert_array_equal(s.run(tf.scatter_min(v, [1], [-2.0])),
                                          [4.0, -2.0, 3.0])
            np.testing.assert_array_equal(
                s.run(tf.scatter_nd_sub(w, [[0, 1], [0, 1]], [1.0, 2.0])), [[0, -3], [0, 0]])
            with pytest.raises(tf.errors.InvalidArgumentError, match="is not in"):
                s.run(tf.scatter_max(v, [7], [1.0]))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(-7, 7), min_size=1, max_size=3), st.data())
def test_roll_matches_numpy(shifts, data):
    x = np.arange(24).reshape(2, 3, 4)
    axes = [data.draw(st.integers(-3, 2)) for _ in shifts]
    with tf.Graph().as_default():
        got = _run(tf.roll(x, shifts, axes))
    np.testing.assert_array_equal(got, np.roll(x, shifts, axes))


def test_roll_gradient_and_errors():
    with tf.Graph().as_default():
        x = tf.constant(np.arange(6.0).reshape(2, 3))
        y = tf.roll(x, 1, 1) * tf.constant(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
        with tf.Session():
            assert tf.test.compute_gradient_error(x, [2, 3], y, [2, 3]) < 1e-6
        with pytest.raises(tf.errors.InvalidArgumentError, match="same size"):
            _run(tf.roll(x, [1, 2], [0]))
        with pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
            _run(tf.roll(x, 1, 5))


def test_bitcast_sizes_and_errors():
    with tf.Graph().as_default():
        a = tf.bitcast(tf.constant(np.array([1.0, -2.0], np.float32)), tf.int32)
        b = tf.bitcast(tf.constant(np.array([1, 2], np.int32)), tf.uint8)
        c = tf.bitcast(tf.constant(np.zeros((3, 2), np.int32)), tf.int64)
        assert b.shape.as_list() == [2, 4] and c.shape.as_list() == [3]
        va, vb, vc = _run([a, b, c])
    np.testing.assert_array_equal(va, np.array([1.0, -2.0], np.float32).view(np.int32))
    np.testing.assert_array_equal(vb, np.array([1, 2], np.int32).view(np.uint8).reshape(2, 4))
    assert vc.dtype == np.int64 and vc.shape == (3,)
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="last dimension must be 2"):
            tf.bitcast(tf.constant(np.zeros((3, 3), np.int32)), tf.int64)
