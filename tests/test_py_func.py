"""tf.py_func, tf.numpy_function and tf.py_function in graph mode: values, Tout as a
list or a single dtype, statefulness, strings, the host device, TF's error classes for
exceptions and wrong results, and gradients (None for PyFunc, overrides)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors


@pytest.fixture
def g():
    graph = tf.Graph()
    with graph.as_default():
        yield graph


@settings(max_examples=15, deadline=None)
@given(st.lists(st.floats(-100, 100, width=32), min_size=1, max_size=6))
def test_py_func_values(xs):
    with tf.Graph().as_default():
        x = tf.constant(np.array(xs, np.float32))
        y = tf.py_func(lambda a: np.sort(a)[::-1].copy(), [x], tf.float32)
        with tf.Session() as sess:
            np.testing.assert_array_equal(sess.run(y), np.sort(np.float32(xs))[::-1])


def test_tout_single_list_and_empty(g):
    x = tf.constant([1, 2], tf.int32)
    single = tf.py_func(lambda a: a * 2, [x], tf.int32)
    listed = tf.py_func(lambda a: [a + 1, (a * 0.5).astype(np.float64)], [x],
                        [tf.int32, tf.float64])
    calls = []
    none = tf.py_func(lambda a: calls.append(int(a.sum())), [x], [])
    assert isinstance(single, tf.Tensor) and single.op.type == "PyFunc"
    assert isinstance(listed, list) and [t.dtype for t in listed] == [tf.int32, tf.float64]
    assert isinstance(none, tf.Operation)
    assert single.shape.ndims is None  # unknown, as in TF
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(single), [2, 4])
        a, b = sess.run(listed)
        np.testing.assert_array_equal(a, [2, 3])
        np.testing.assert_array_equal(b, [0.5, 1.0])
        sess.run(none)
        sess.run(none)
    assert calls == [3, 3]  # stateful: runs every time


def test_stateless_numpy_function_and_names(g):
    x = tf.constant(3.0)
    y = tf.py_func(lambda a: a + np.float32(1), [x], tf.float32, stateful=False, name="inc")
    z = tf.numpy_function(lambda a: a * np.float32(2), [x], tf.float32)
    assert y.op.type == "PyFuncStateless" and y.op.name == "inc"
    assert z.op.type == "PyFunc"
    assert y.op.get_attr("token").startswith(b"pyfunc_")
    with tf.Session() as sess:
        assert sess.run([y, z]) == [4.0, 6.0]


def test_strings_and_scalars(g):
    s = tf.constant(["ab", "c"])
    out = tf.py_func(lambda a: np.array([x.upper() for x in a]), [s], tf.string)
    text = tf.py_func(lambda: "héllo", [], tf.string)
    n = tf.py_func(lambda a: np.int64(a.size), [s], tf.int64)
    with tf.Session() as sess:
        assert list(sess.run(out)) == [b"AB", b"C"]
        assert sess.run(text) == "héllo".encode()
        assert sess.run(n) == 2


def test_py_function_gets_numpy_values(g):
    x = tf.constant([1.0, 2.0])
    kinds = []

    def f(a):
        kinds.append(type(a.numpy()))
        return a.numpy() * 3  # float32 array: converted to Tout as tf.convert_to_tensor
    y = tf.py_function(f, [x], tf.float32)
    two = tf.py_function(lambda a: (a, 1.5), [x], [tf.float32, tf.float32])
    assert y.op.type == "EagerPyFunc"
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(y), [3, 6])
        a, b = sess.run(two)
    assert kinds == [np.ndarray] and b == np.float32(1.5)


def test_runs_on_the_host(g):
    with tf.device("/cpu:0"):
        y = tf.py_func(lambda: np.float32(1), [], tf.float32)
    with tf.Session() as sess:
        assert sess.run(y) == 1.0


@pytest.mark.parametrize("exc,cls", [(ValueError, errors.InvalidArgumentError),
                                     (TypeError, errors.InvalidArgumentError),
                                     (StopIteration, errors.OutOfRangeError),
                                     (NotImplementedError, errors.UnimplementedError),
                                     (MemoryError, errors.ResourceExhaustedError),
                                     (KeyError, errors.UnknownError),
                                     (RuntimeError, errors.UnknownError)])
def test_exceptions_become_op_errors(g, exc, cls):
    def f(a):
        raise exc("inside")

    y = tf.py_func(f, [tf.constant(1.0)], tf.float32, name="failing")
    with tf.Session() as sess:
        with pytest.raises(cls, match="inside") as info:
            sess.run(y)
    assert "failing" in str(info.value)


def test_op_error_keeps_its_class(g):
    def f():
        raise errors.NotFoundError(None, None, "no such thing")

    y = tf.py_function(f, [], tf.float32)
    with tf.Session() as sess:
        with pytest.raises(errors.NotFoundError, match="no such thing"):
            sess.run(y)


def test_wrong_results(g):
    x = tf.constant([1.0, 2.0])
    wrong_type = tf.py_func(lambda a: a.astype(np.float64), [x], tf.float32)
    wrong_count = tf.py_func(lambda a: [a, a], [x], [tf.float32])
    py_float = tf.py_func(lambda a: 1.0, [x], tf.float32)
    bad_convert = tf.py_function(lambda a: "text", [x], tf.float32)
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError,
                           match="0-th value returned by pyfunc_\\d+ is double, but expects "
                                 "float"):
            sess.run(wrong_type)
        with pytest.raises(errors.InvalidArgumentError,
                           match="returns 2 values, but expects to see 1 values"):
            sess.run(wrong_count)
        with pytest.raises(errors.InvalidArgumentError, match="is double, but expects float"):
            sess.run(py_float)
        with pytest.raises(errors.InvalidArgumentError):
            sess.run(bad_convert)
    with pytest.raises(ValueError, match="Expected func to be callable"):
        tf.py_func(3, [x], tf.float32)


def test_gradients(g):
    x = tf.constant([1.0, 2.0])
    y = tf.py_func(lambda a: a * a, [x], tf.float32)
    assert tf.gradients(y, x) == [None]  # PyFunc is not differentiable, as in TF

    @tf.RegisterGradient("TestPyFuncSquareGrad")
    def _grad(op, dy):
        return [dy * 2.0 * op.inputs[0]]

    with g.gradient_override_map({"PyFunc": "TestPyFuncSquareGrad"}):
        y2 = tf.py_func(lambda a: a * a, [x], tf.float32)
    y2.set_shape(x.shape)

    @tf.custom_gradient
    def square(a):
        return tf.py_func(lambda v: v * v, [a], tf.float32), lambda dy: dy * 2.0 * a

    y3 = square(x)
    eager = tf.py_function(lambda a: a * a, [x], tf.float32)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(tf.gradients(y2, x)[0]), [2, 4])
        np.testing.assert_array_equal(sess.run(tf.gradients(y3, x)[0]), [2, 4])
    with pytest.raises(LookupError, match="EagerPyFunc"):
        tf.gradients(eager, x)


def test_functions_released_with_the_graph():
    import gc

    from flowrt.plugins.kernels.standard.functional_ops import _py_funcs

    graph = tf.Graph()
    with graph.as_default():
        y = tf.py_func(lambda: np.float32(0), [], tf.float32)
    token = y.op.get_attr("token").decode()
    assert _py_funcs.get(token) is not None
    del graph, y
    gc.collect()
    assert _py_funcs.get(token) is None
