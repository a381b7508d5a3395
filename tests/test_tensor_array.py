"""tf.TensorArray: values, errors like TF's, use in while_loop, gradients."""
from __future__ import annotations

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


def test_write_read_stack_size():
    ta = tf.TensorArray(tf.float32, 3, clear_after_read=False)
    ta = ta.write(0, [1., 2.]).write(1, [3., 4.]).write(2, [5., 6.])
    r, s, n = ta.read(1), ta.stack(), ta.size()
    assert r.shape.as_list() == [2] and s.shape.as_list() == [None, 2]
    rv, sv, nv = run([r, s, n])
    np.testing.assert_array_equal(rv, [3., 4.])
    np.testing.assert_array_equal(sv, [[1., 2.], [3., 4.], [5., 6.]])
    assert nv == 3


def test_unstack_gather_scatter():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    g = tf.TensorArray(tf.float32, 4).unstack(x).gather([3, 1])
    sc = tf.TensorArray(tf.float32, 3).scatter([2, 0, 1], x[:3]).stack()
    gv, sv = run([g, sc])
    np.testing.assert_array_equal(gv, x[[3, 1]])
    np.testing.assert_array_equal(sv, x[[1, 2, 0]])


def test_concat_split():
    ta = tf.TensorArray(tf.float32, 2, infer_shape=False).write(0, [1., 2.]).write(1, [3.])
    sp = tf.TensorArray(tf.float32, 2, infer_shape=False).split([1., 2., 3.], [1, 2])
    c, r1 = run([ta.concat(), sp.read(1)])
    np.testing.assert_array_equal(c, [1., 2., 3.])
    np.testing.assert_array_equal(r1, [2., 3.])


def test_dynamic_size_grows_and_fills_zeros():
    ta = tf.TensorArray(tf.float32, 0, dynamic_size=True).write(3, 1.)
    v, n = run([ta.stack(), ta.size()])
    np.testing.assert_array_equal(v, [0., 0., 0., 1.])
    assert n == 4


def test_unwritten_element_reads_zeros_once_shape_known():
    v = run(tf.TensorArray(tf.float32, 3).write(0, [1., 2.]).stack())
    np.testing.assert_array_equal(v, [[1., 2.], [0., 0.], [0., 0.]])


def test_empty_stack_with_element_shape():
    v = run(tf.TensorArray(tf.float32, 0, element_shape=[2]).stack())
    assert v.shape == (0, 2)


def test_identity_and_close():
    ta = tf.TensorArray(tf.float32, 1, clear_after_read=False).write(0, 5.).identity()
    assert run(ta.read(0)) == 5.
    run(ta.close())


@pytest.mark.parametrize("build, cls, msg", [
    (lambda: tf.TensorArray(tf.float32, 3).read(1), errors.InvalidArgumentError,
     "Could not read from TensorArray index 1"),
    (lambda: (lambda t: [t.read(0), t.read(0)])(tf.TensorArray(tf.float32, 3)
                                                .write(0, 1.)),
     errors.InvalidArgumentError, "because it was cleared after a previous read"),
    (lambda: tf.TensorArray(tf.float32, 3).write(0, 1.).write(0, 2.).read(0),
     errors.InvalidArgumentError, "because it has already been written to"),
    (lambda: tf.TensorArray(tf.float32, 3).write(5, 1.).read(0),
     errors.InvalidArgumentError, "Tried to write to index 5 but array is not resizeable"),
    (lambda: tf.TensorArray(tf.float32, 3).write(0, 1.).read(5),
     errors.InvalidArgumentError, "Tried to read from index 5 but array size is: 3"),
    (lambda: tf.TensorArray(tf.float32, 0).stack(), errors.UnimplementedError,
     "TensorArray has size zero"),
    (lambda: tf.TensorArray(tf.float32, 2, infer_shape=False).write(0, [1., 2.])
     .write(1, [1., 2., 3.]).stack(), errors.InvalidArgumentError,
     "TensorArray has inconsistent shapes.  Index 0 has shape: [2] but index 1 has "
     "shape: [3]"),
    (lambda: tf.TensorArray(tf.float32, 2).write(0, tf.constant(1)).stack(),
     errors.InvalidArgumentError, "TensorArray dtype is float but Op is trying to write "
     "dtype int32"),
    (lambda: tf.TensorArray(tf.float32, 2).unstack([1., 2., 3.]).stack(),
     errors.InvalidArgumentError, "Max scatter index must be < array size (2 vs. 2)"),
    (lambda: tf.TensorArray(tf.float32, 2).split([1., 2., 3.], [1, 1]).read(1),
     errors.InvalidArgumentError, "Expected sum of lengths to be equal to values.shape[0]"),
])
def test_runtime_errors(build, cls, msg):
    with pytest.raises(cls) as ei:
        run(build())
    assert msg in str(ei.value)


def test_dynamic_shape_mismatch_is_runtime_error():
    x = tf.placeholder_with_default([1., 2., 3.], [None])
    out = tf.TensorArray(tf.float32, 2).write(0, [1., 2.]).write(1, x).stack()
    with pytest.raises(errors.InvalidArgumentError, match="value shape is \\[3\\] which is "
                       "incompatible with the TensorArray's inferred element shape"):
        run(out)


def test_static_shape_mismatch_is_value_error():
    with pytest.raises(ValueError, match="Inconsistent shapes"):
        tf.TensorArray(tf.float32, 2).write(0, [1., 2.]).write(1, [1., 2., 3.])


def test_constructor_errors():
    with pytest.raises(ValueError, match="Size must be provided"):
        tf.TensorArray(tf.float32)
    ta = tf.TensorArray(tf.float32, 1)
    with pytest.raises(ValueError, match="flow must be provided"):
        tf.TensorArray(tf.float32, handle=ta.handle)


def test_while_loop_writes():
    n = 5

    def body(i, ta):
        return i + 1, ta.write(i, tf.cast(i, tf.float32) ** 2)

    _, ta = tf.while_loop(lambda i, ta: i < n, body, [0, tf.TensorArray(tf.float32, n)])
    assert isinstance(ta, tf.TensorArray)
    np.testing.assert_array_equal(run(ta.stack()), np.arange(n, dtype=np.float32) ** 2)


def test_while_loop_single_tensor_array_and_dynamic_size():
    ta = tf.TensorArray(tf.int32, 0, dynamic_size=True)
    out = tf.while_loop(lambda t: t.size() < 4, lambda t: t.write(t.size(), t.size()), ta)
    np.testing.assert_array_equal(run(out.stack()), [0, 1, 2, 3])


def test_gradients_through_while_loop():
    x = tf.constant([1., 2., 3., 4.])
    w = tf.constant(3.)
    ta_in = tf.TensorArray(tf.float32, 4).unstack(x)

    def body(i, ta):
        v = ta_in.read(i)
        return i + 1, ta.write(i, v * v * w)

    _, ta = tf.while_loop(lambda i, ta: i < 4, body, [0, tf.TensorArray(tf.float32, 4)])
    y = tf.reduce_sum(ta.stack() * tf.constant([1., 2., 3., 4.]))
    gx, gw = tf.gradients(y, [x, w])
    gxv, gwv = run([gx, gw])
    xv = np.array([1., 2., 3., 4.])
    np.testing.assert_allclose(gxv, 2 * xv * 3 * np.arange(1, 5))
    np.testing.assert_allclose(gwv, np.sum(xv ** 2 * np.arange(1, 5)))


def test_gradients_of_ops_outside_loops():
    x = tf.constant(np.arange(6, dtype=np.float32).reshape(3, 2))
    ta = tf.TensorArray(tf.float32, 3).unstack(x)
    g_gather = tf.gradients(tf.reduce_sum(ta.gather([0, 2]) * 2.), x)[0]
    ta2 = tf.TensorArray(tf.float32, 3, clear_after_read=False).scatter([2, 0, 1], x)
    y = ta2.read(0) * 3. + ta2.read(2)
    g_read = tf.gradients(y, x)[0]
    xs = tf.constant([1., 2., 3.])
    ta3 = tf.TensorArray(tf.float32, 2, infer_shape=False).split(xs, [1, 2])
    g_split = tf.gradients(tf.reduce_sum(ta3.concat() * xs), xs)[0]
    a, b, c = run([g_gather, g_read, g_split])
    np.testing.assert_array_equal(a, [[2., 2.], [0., 0.], [2., 2.]])
    np.testing.assert_array_equal(b, [[1., 1.], [3., 3.], [0., 0.]])  # ta[0]=x1, ta[2]=x0
    np.testing.assert_allclose(c, [2., 4., 6.])


@settings(max_examples=15, deadline=None)
@given(st.lists(st.floats(-10, 10, width=32), min_size=1, max_size=6),
       st.randoms(use_true_random=False))
def test_scatter_gather_roundtrip(values, rnd):
    with tf.Graph().as_default():
        x = np.array(values, np.float32)
        perm = list(range(len(x)))
        rnd.shuffle(perm)
        ta = tf.TensorArray(tf.float32, len(x)).scatter(perm, x)
        out = run(ta.gather(list(range(len(x)))))
        expect = np.empty_like(x)
        expect[perm] = x
        np.testing.assert_array_equal(out, expect)
