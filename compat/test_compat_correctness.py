"""Programs from issue 14 (bugs real TF1 programs hit), run under TF and flowrt."""
from __future__ import annotations

import numpy as np

from compat_harness import run_custom


def test_while_loop_body_with_matmul() -> None:
    def fn(tf):
        w = tf.constant([[1.0, 1.0], [0.0, 1.0]])
        i, x = tf.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, tf.matmul(x, w)),
                             [tf.constant(0), tf.constant([[2.0, 1.0]])])
        with tf.Session() as s:
            got_i, got_x = s.run([i, x])
        return int(got_i), got_x.tolist()

    run_custom(fn)


def test_gradient_of_a_reduction_over_a_fed_scalar() -> None:
    def fn(tf):
        x = tf.placeholder(tf.float32)
        g = tf.gradients(tf.reduce_sum(x * x), x)[0]
        with tf.Session() as s:
            return float(s.run(g, {x: 3.0}))

    run_custom(fn)


def test_integer_division_by_zero_with_an_empty_result() -> None:
    def fn(tf):
        z = tf.zeros([0], tf.int32)
        with tf.Session() as s:
            return [s.run(op(z, tf.constant(0))).tolist()
                    for op in (tf.floormod, tf.floordiv, tf.truncatediv, tf.truncatemod)]

    run_custom(fn)


def test_a_fetched_feed_is_the_fed_value() -> None:
    def fn(tf):
        q = tf.placeholder(tf.string)
        p = tf.placeholder(tf.float32)
        fed = np.arange(3, dtype=np.float32)
        with tf.Session() as s:
            a = s.run(q, {q: ["a", b"b"]})
            b = s.run(q, {q: "c"})
            c = s.run(p, {p: 3})
            return ([type(v).__name__ for v in a], a.tolist(), type(b).__name__, b.shape,
                    type(c).__name__, str(c.dtype), s.run(p, {p: fed}) is fed)

    run_custom(fn)


def test_a_feed_key_of_another_graph() -> None:
    def fn(tf):
        other = tf.Graph()
        with other.as_default():
            p = tf.placeholder(tf.float32)
        with tf.Session() as s:
            s.run(tf.constant(1.0), {p: 1.0})

    run_custom(fn)


def test_hasattr_compat() -> None:
    def fn(tf):
        return hasattr(tf, "compat"), hasattr(tf, "no_such_name_anywhere")

    run_custom(fn)
