"""Conditionals: dead tensors, tf.cond, tf.case (loops: test_while_loop.py)."""
from __future__ import annotations

import collections

import numpy as np
import pytest

import flowrt as tf
from flowrt import errors
from flowrt.graph import apply_op


def test_cond_picks_the_branch_and_keeps_structure():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [3])
        p = tf.placeholder(tf.bool, [])
        Pair = collections.namedtuple("Pair", "a b")
        out = tf.cond(p, lambda: Pair(x * 2.0, {"s": tf.reduce_sum(x)}),
                      lambda: Pair(x - 1.0, {"s": tf.constant(-1.0)}))
        single = tf.cond(p, lambda: [x], lambda: [x + 1.0])
    with tf.Session(graph=g) as s:
        r = s.run(out, {x: [1, 2, 3], p: True})
        assert isinstance(r, Pair)
        np.testing.assert_allclose(r.a, [2, 4, 6])
        assert r.b["s"] == 6.0
        r = s.run(out, {x: [1, 2, 3], p: False})
        np.testing.assert_allclose(r.a, [0, 1, 2])
        assert r.b["s"] == -1.0
        np.testing.assert_allclose(s.run(single, {x: [1, 2, 3], p: False}), [2, 3, 4])
    assert out.a.shape.as_list() == [3] and out.a.op.type == "Merge"


def test_only_the_taken_branch_runs_side_effects_and_asserts():
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder(tf.bool, [])
        v = tf.Variable(0.0, name="v")

        def bump():
            with tf.control_dependencies([tf.assign_add(v, 1.0)]):
                return tf.constant(1.0)

        def fail():
            with tf.control_dependencies([tf.Assert(tf.constant(False), ["never"])]):
                return tf.constant(2.0)

        y = tf.cond(p, bump, fail)
    with tf.Session(graph=g) as s:
        s.run(v.initializer)
        for _ in range(3):
            assert s.run(y, {p: True}) == 1.0
        assert s.run(v) == 3.0
        with pytest.raises(errors.InvalidArgumentError, match="assertion failed"):
            s.run(y, {p: False})
        assert s.run(v) == 3.0  # the untaken bump did not run


def test_nested_cond_and_case():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [])
        y = tf.cond(x > 0.0, lambda: tf.cond(x > 10.0, lambda: x * 100.0, lambda: x * 10.0),
                    lambda: -x)
        z = tf.case([(x > 5.0, lambda: tf.constant(1)), (x > 2.0, lambda: tf.constant(2))],
                    default=lambda: tf.constant(3))
        ex = tf.case([(x > 1.0, lambda: tf.constant(1)), (x > 2.0, lambda: tf.constant(2))],
                     default=lambda: tf.constant(3), exclusive=True)
    with tf.Session(graph=g) as s:
        assert [s.run(y, {x: v}) for v in (20.0, 2.0, -3.0)] == [2000.0, 20.0, 3.0]
        assert [s.run(z, {x: v}) for v in (6.0, 3.0, 0.0)] == [1, 2, 3]
        assert s.run(ex, {x: 1.5}) == 1
        with pytest.raises(errors.InvalidArgumentError, match="exclusive"):
            s.run(ex, {x: 3.0})


def test_fetching_the_untaken_side_is_an_error():
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder(tf.bool, [])
        x = tf.constant(4.0)
        f, t = apply_op("Switch", data=x, pred=p)
        y = t * 2.0
    with tf.Session(graph=g) as s:
        assert s.run(y, {p: True}) == 8.0
        with pytest.raises(errors.InvalidArgumentError, match="does not have value"):
            s.run(y, {p: False})


def test_gradient_through_cond_matches_each_branch():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [])
        p = tf.placeholder(tf.bool, [])
        y = tf.cond(p, lambda: x * x * x, lambda: tf.sin(x))
        dy, = tf.gradients(y, x)
    with tf.Session(graph=g) as s:
        assert s.run(dy, {x: 2.0, p: True}) == pytest.approx(12.0)
        assert s.run(dy, {x: 2.0, p: False}) == pytest.approx(np.cos(2.0))


def test_cond_across_devices():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [])
        p = tf.placeholder(tf.bool, [])
        with tf.device("/cpu:0"):
            a = x + 1.0
        with tf.device("/cpu:1"):
            y = tf.cond(p, lambda: a * 10.0, lambda: a - 10.0)
        with tf.device("/cpu:0"):
            z = y + 0.5
    with tf.Session(graph=g, config=tf.ConfigProto(device_count={"CPU": 2},
                                                    operation_timeout_in_ms=5000)) as s:
        assert s.run(z, {x: 1.0, p: True}) == 20.5
        assert s.run(z, {x: 1.0, p: False}) == -7.5


def test_cond_argument_errors():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0)
        with pytest.raises(TypeError, match="callable"):
            tf.cond(True, x, lambda: x)
        with pytest.raises(ValueError, match="same type"):
            tf.cond(tf.constant(True), lambda: tf.constant(1), lambda: tf.constant(1.0))
        with pytest.raises(ValueError, match="same number"):
            tf.cond(tf.constant(True), lambda: [x, x], lambda: [x])
