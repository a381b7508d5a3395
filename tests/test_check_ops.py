"""tf.debugging checks of plugins/kernels/standard/check_ops.py: static errors (TypeError,
ValueError with TF's messages) when the facts are known at build time, Assert ops that
raise InvalidArgumentError at run time otherwise."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors


def test_assert_integer_and_type():
    with tf.Graph().as_default():
        assert tf.assert_integer(tf.constant([1, 2])).type == "NoOp"
        with pytest.raises(TypeError, match='Expected "x" to be integer type.  Found: '
                                            "Const_1:0 of dtype <dtype: 'float32'>"):
            tf.debugging.assert_integer(tf.constant(1.0))
        assert tf.assert_type(tf.constant(1.0), tf.float32).name.endswith(
            "statically_determined_correct_type")
        with pytest.raises(TypeError, match="must be of type <dtype: 'int64'>"):
            tf.debugging.assert_type(tf.constant([1]), tf.int64, message="msg")


def test_assert_scalar():
    with tf.Graph().as_default():
        c = tf.constant(3.0)
        assert tf.assert_scalar(c) is c
        with pytest.raises(ValueError, match=r"Expected scalar shape for .*, saw shape: "
                                             r"\(2,\)\."):
            tf.debugging.assert_scalar(tf.constant([1, 2]))
        with pytest.raises(ValueError, match="Expected scalar"):
            tf.assert_scalar(tf.placeholder(tf.float32))


def test_assert_same_float_dtype():
    with tf.Graph().as_default():
        a, b = tf.constant(1.0), tf.constant(1.0, tf.float64)
        assert tf.assert_same_float_dtype([a, None, a]) == tf.float32
        assert tf.assert_same_float_dtype(None, tf.float64) == tf.float64
        assert tf.debugging.assert_same_float_dtype() == tf.float32
        with pytest.raises(ValueError, match="must be of the same type"):
            tf.assert_same_float_dtype([a, b])
        with pytest.raises(ValueError, match="Expected floating point type"):
            tf.assert_same_float_dtype([tf.constant(1)])


def test_assert_proper_iterable():
    for bad in ["ab", b"ab", np.zeros(2)]:
        with pytest.raises(TypeError, match='"proper" iterable'):
            tf.assert_proper_iterable(bad)
    with pytest.raises(TypeError, match="to be iterable"):
        tf.debugging.assert_proper_iterable(3)
    tf.assert_proper_iterable([1, 2])
    tf.assert_proper_iterable(x for x in "a")


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 4), st.integers(0, 4))
def test_assert_rank_at_least_static_and_dynamic(actual, want):
    x = np.zeros((1,) * actual)
    with tf.Graph().as_default():
        if actual >= want:
            assert tf.assert_rank_at_least(tf.constant(x), want).type == "NoOp"
        else:
            with pytest.raises(ValueError, match=f"must have rank at least {want}.  "
                                                 f"Received rank {actual}"):
                tf.assert_rank_at_least(tf.constant(x), want)
        p = tf.placeholder(tf.float32)
        check = tf.debugging.assert_rank_at_least(p, want)
        with tf.Session() as s:
            if actual >= want:
                s.run(check, {p: x})
            else:
                with pytest.raises(errors.InvalidArgumentError, match="must have rank at least"):
                    s.run(check, {p: x})


def test_assert_rank_in():
    with tf.Graph().as_default():
        tf.assert_rank_in(tf.constant([1]), [0, 1])
        with pytest.raises(ValueError, match=r"must have rank in \(0, 2\).  Received rank 1"):
            tf.assert_rank_in(tf.constant([1]), [0, 2])
        with pytest.raises(TypeError, match="int32"):
            tf.assert_rank_in(tf.constant([1]), [tf.constant(1, tf.int64)])
        p = tf.placeholder(tf.float32)
        r = tf.placeholder(tf.int32)
        check = tf.debugging.assert_rank_in(p, [1, r])
        with tf.Session() as s:
            s.run(check, {p: [1.0], r: 3})
            s.run(check, {p: np.zeros((1, 1, 1)), r: 3})
            with pytest.raises(errors.InvalidArgumentError, match="must have rank in"):
                s.run(check, {p: 1.0, r: 3})
            with pytest.raises(errors.InvalidArgumentError, match="Rank must be a scalar"):
                s.run(check, {p: [1.0], r: [3]})


def test_assert_near():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64)
        loose = tf.assert_near(x, [1.0, 2.0], rtol=0.0, atol=0.1)
        tight = tf.debugging.assert_near(x, [1.0, 2.0])
        with tf.Session() as s:
            s.run(loose, {x: [1.05, 2.0]})
            s.run(tight, {x: [1.0, 2.0]})
            with pytest.raises(errors.InvalidArgumentError,
                               match="x and y not equal to tolerance"):
                s.run(tight, {x: [1.0 + 1e-9, 2.0]})


def test_assert_shapes():
    with tf.Graph().as_default():
        x, y = tf.zeros([2, 3]), tf.zeros([2, 4])
        tf.debugging.assert_shapes([(x, ("N", 3)), (y, ("N", None)), (tf.constant(1.0), ())])
        tf.debugging.assert_shapes({x: (..., 3), y: ("*", "N", 4)})
        with pytest.raises(ValueError, match="must have size 3.  Received size 2"):
            tf.debugging.assert_shapes([(x, ("N", "Q")), (y, ("Q", 4))])
        with pytest.raises(ValueError, match="must have rank"):
            tf.debugging.assert_shapes([(x, ("N",))])
        p = tf.placeholder(tf.float32, [None, None])
        check = tf.debugging.assert_shapes([(p, ("N", "N"))])
        with tf.Session() as s:
            s.run(check, {p: np.zeros((3, 3))})
            with pytest.raises(errors.InvalidArgumentError, match="must have size"):
                s.run(check, {p: np.zeros((2, 3))})


def test_debugging_aliases():
    assert tf.debugging.is_finite is tf.math.is_finite
    assert tf.debugging.is_nan is tf.is_nan and tf.debugging.is_inf is tf.is_inf
