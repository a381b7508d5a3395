"""tf.map_fn, tf.foldl, tf.foldr, tf.scan: values vs numpy, nesting, gradients, errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flowrt as tf


def run(fetches, feed=None):
    with tf.Session() as s:
        return s.run(fetches, feed)


@pytest.fixture(autouse=True)
def _graph():
    with tf.Graph().as_default():
        yield


def test_map_fn_values_and_shape():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    y = tf.map_fn(lambda r: r * r + 1., tf.constant(x))
    assert y.shape.as_list() == [3, 2]
    np.testing.assert_allclose(run(y), x * x + 1)


def test_map_fn_nested_and_dtype():
    a = tf.constant([1, 2, 3])
    b = tf.constant([.5, 1.5, 2.5])
    s, p = tf.map_fn(lambda t: (tf.cast(t[0], tf.float32) + t[1], t[0] * 2), (a, b),
                     dtype=(tf.float32, tf.int32))
    sv, pv = run([s, p])
    np.testing.assert_allclose(sv, [1.5, 3.5, 5.5])
    np.testing.assert_array_equal(pv, [2, 4, 6])
    d = tf.map_fn(lambda t: {"x": t["x"] * 3}, {"x": b})
    np.testing.assert_allclose(run(d["x"]), [1.5, 4.5, 7.5])


def test_map_fn_unknown_length():
    x = tf.placeholder(tf.float32, [None])
    y = tf.map_fn(lambda v: v * 2., x)
    np.testing.assert_allclose(run(y, {x: np.array([1., 2., 5.])}), [2., 4., 10.])


def test_map_fn_gradient():
    x = tf.constant([1., 2., 3.])
    w = tf.constant(2.)
    y = tf.map_fn(lambda v: w * v * v, x)
    gx, gw = tf.gradients(tf.reduce_sum(y), [x, w])
    gxv, gwv = run([gx, gw])
    np.testing.assert_allclose(gxv, 4. * np.array([1., 2., 3.]))
    np.testing.assert_allclose(gwv, 14.)


def test_map_fn_errors():
    with pytest.raises(TypeError, match="fn must be callable"):
        tf.map_fn(3, tf.constant([1.]))
    with pytest.raises(ValueError, match="1\\+ dimensional"):
        tf.map_fn(lambda v: v, tf.constant(1.))
    with pytest.raises(ValueError, match="same nested structure"):
        tf.map_fn(lambda v: (v, v), tf.constant([1., 2.]))


def test_foldl_foldr_values():
    x = tf.constant([1., 2., 3., 4.])
    l0 = tf.foldl(lambda a, v: a * 2. + v, x)
    l1 = tf.foldl(lambda a, v: a - v, x, initializer=tf.constant(10.))
    r0 = tf.foldr(lambda a, v: a * 2. + v, x)
    r1 = tf.foldr(lambda a, v: a * 2. + v, x, initializer=tf.constant(0.))
    assert run([l0, l1, r0, r1]) == [26., 0., 4 * 8 + 3 * 4 + 2 * 2 + 1., 49.]


def test_fold_nested_initializer():
    x = tf.constant([1., 2., 3.])
    s, p = tf.foldl(lambda a, v: (a[0] + v, a[1] * v), x,
                    initializer=(tf.constant(0.), tf.constant(1.)))
    assert run([s, p]) == [6., 6.]


def test_fold_gradients():
    x = tf.constant([1., 2., 3., 4.])
    l0 = tf.foldl(lambda a, v: a * 2. + v, x)
    r0 = tf.foldr(lambda a, v: a * v, x, initializer=tf.constant(1.))
    gl, gr = run([tf.gradients(l0, x)[0], tf.gradients(r0, x)[0]])
    np.testing.assert_allclose(gl, [8., 4., 2., 1.])
    np.testing.assert_allclose(gr, [24., 12., 8., 6.])


def test_scan_values():
    x = np.array([1., 2., 3., 4.], np.float32)
    a = tf.scan(lambda acc, v: acc + v, tf.constant(x))
    b = tf.scan(lambda acc, v: acc + v, tf.constant(x), reverse=True)
    c = tf.scan(lambda acc, v: acc * v, tf.constant(x), initializer=tf.constant(2.))
    av, bv, cv = run([a, b, c])
    np.testing.assert_allclose(av, np.cumsum(x))
    np.testing.assert_allclose(bv, np.cumsum(x[::-1])[::-1])
    np.testing.assert_allclose(cv, 2 * np.cumprod(x))
    assert a.shape.as_list() == [4]


def test_scan_nested():
    x = tf.constant([1., 2., 3.])
    s, p = tf.scan(lambda a, v: (a[0] + v, a[1] * v), x,
                   initializer=(tf.constant(0.), tf.constant(1.)))
    sv, pv = run([s, p])
    np.testing.assert_allclose(sv, [1., 3., 6.])
    np.testing.assert_allclose(pv, [1., 2., 6.])
    # without an initializer the accumulator has the structure of elems
    m0, m1 = tf.scan(lambda a, v: (a[0] + v[0], a[1] * v[1]), (x, x))
    np.testing.assert_allclose(run(m0), [1., 3., 6.])
    np.testing.assert_allclose(run(m1), [1., 2., 6.])


def test_scan_gradient_vs_numeric():
    x0 = np.array([.5, -1., 2., 1.5], np.float32)
    x = tf.placeholder(tf.float32, [4])
    y = tf.reduce_sum(tf.scan(lambda a, v: a * v + v, x) * tf.constant([1., 2., 3., 4.]))
    g = tf.gradients(y, x)[0]
    with tf.Session() as s:
        gv = s.run(g, {x: x0})
        eps = 1e-2
        num = np.array([(s.run(y, {x: x0 + eps * e}) - s.run(y, {x: x0 - eps * e})) /
                        (2 * eps) for e in np.eye(4, dtype=np.float32)])
    np.testing.assert_allclose(gv, num, rtol=1e-2, atol=1e-2)


def test_scan_structure_error():
    with pytest.raises(ValueError, match="same nested structure"):
        tf.scan(lambda a, v: (a, v), tf.constant([1., 2.]))


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(-50, 50), min_size=1, max_size=7))
def test_int_programs_match_numpy(values):
    with tf.Graph().as_default():
        x = tf.constant(np.array(values, np.int32))
        m, f, s, r = run([tf.map_fn(lambda v: v * 2 - 1, x),
                          tf.foldl(lambda a, v: a + v, x),
                          tf.scan(lambda a, v: tf.maximum(a, v), x),
                          tf.foldr(lambda a, v: a - v, x, initializer=tf.constant(0))])
    v = np.array(values)
    np.testing.assert_array_equal(m, v * 2 - 1)
    assert f == v.sum() and r == -v.sum()
    np.testing.assert_array_equal(s, np.maximum.accumulate(v))
