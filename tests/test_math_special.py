"""tf.math special functions and extras (no scipy): values against hand references and
identities, dtypes, errors, and gradients against central differences."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors

SETTINGS = settings(max_examples=25, deadline=None)


def run(fetches, feeds=None):
    with tf.Session() as sess:
        return sess.run(fetches, feeds)


def ev(fn, *values):
    with tf.Graph().as_default():
        return run(fn(*[tf.constant(np.asarray(v)) for v in values]))


def grad_err(build, values, delta=1e-5):
    values = [np.asarray(v, dtype=np.float64) for v in values]
    with tf.Graph().as_default():
        xs = [tf.constant(v) for v in values]
        y = build(*xs)
        with tf.Session() as sess:
            shape = list(sess.run(y).shape)
            return tf.test.compute_gradient_error(xs, [list(v.shape) for v in values], y,
                                                  shape, x_init_value=values, delta=delta)


# -- references from the standard library ------------------------------------------------
def igamma_ref(a, x):
    """P(a, x) by the trapezoid-free integer-a closed form (a = 1, 2, 3 ...)."""
    return 1 - math.exp(-x) * sum(x ** k / math.factorial(k) for k in range(int(a)))


def bessel_ref(x, order):
    """I_order(x) by its power series, term by term."""
    term = 1.0 if order == 0 else x / 2
    total = term
    for k in range(1, 400):
        term *= (x / 2) ** 2 / (k * (k + order))
        total += term
    return total


@SETTINGS
@given(a=st.integers(1, 20), x=st.floats(0.0, 40.0))
def test_igamma_integer_a(a, x):
    p, q = ev(lambda u, v: (tf.math.igamma(u, v), tf.math.igammac(u, v)), float(a), x)
    np.testing.assert_allclose(p, igamma_ref(a, x), atol=1e-12)
    np.testing.assert_allclose(p + q, 1.0, atol=1e-12)


def test_igamma_half_integer_and_edges():
    x = np.array([0.1, 1.0, 5.0, 30.0])
    p = ev(tf.igamma, np.full(4, 0.5), x)
    np.testing.assert_allclose(p, [math.erf(math.sqrt(v)) for v in x], rtol=1e-12)
    out = ev(tf.igamma, np.array([0.0, -1.0, 1.0, 1.0]), np.array([1.0, 1.0, -1.0, np.inf]))
    assert np.isnan(out[:3]).all() and out[3] == 1.0
    assert ev(tf.igamma, np.float32([2.0]), np.float32([1.0])).dtype == np.float32


@SETTINGS
@given(a=st.floats(0.2, 20), b=st.floats(0.2, 20), x=st.floats(0.0, 1.0))
def test_betainc_symmetry(a, b, x):
    i1, i2 = ev(lambda u, v, w: (tf.math.betainc(u, v, w), tf.math.betainc(v, u, 1 - w)),
                a, b, x)
    np.testing.assert_allclose(i1 + i2, 1.0, atol=1e-10)


def test_betainc_values():
    # I_x(1, b) = 1 - (1 - x)^b and I_x(a, 1) = x^a
    x = np.array([0.1, 0.5, 0.9])
    np.testing.assert_allclose(ev(tf.betainc, 1.0, 3.0, x), 1 - (1 - x) ** 3, rtol=1e-12)
    np.testing.assert_allclose(ev(tf.betainc, np.full(3, 2.5), np.ones(3), x), x ** 2.5,
                               rtol=1e-12)
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="inconsistent"):
            tf.betainc(tf.ones([2]), tf.ones([3]), 0.5)


@pytest.mark.parametrize("x", [0.0, 1e-3, 0.5, 3.0, 12.0, 29.9, 30.1, 45.0, 200.0])
def test_bessel(x):
    xs = np.array([x, -x])
    i0e, i1e, i0, i1 = ev(lambda t: (tf.math.bessel_i0e(t), tf.math.bessel_i1e(t),
                                     tf.math.bessel_i0(t), tf.math.special.bessel_i1(t)), xs)
    r0, r1 = bessel_ref(x, 0), bessel_ref(x, 1)
    np.testing.assert_allclose(i0e, [r0 * math.exp(-x)] * 2, rtol=1e-13)
    np.testing.assert_allclose(i1e, [r1 * math.exp(-x), -r1 * math.exp(-x)], rtol=1e-13,
                               atol=1e-300)
    np.testing.assert_allclose(i0, [r0] * 2, rtol=1e-13)
    np.testing.assert_allclose(i1, [r1, -r1], rtol=1e-13, atol=1e-300)


@SETTINGS
@given(y=st.floats(-0.999999, 0.999999))
def test_erfinv_ndtri(y):
    x = ev(tf.math.erfinv, y)
    np.testing.assert_allclose(math.erf(x), y, rtol=1e-14, atol=1e-16)
    p = (y + 1) / 2
    if 0 < p < 1:
        z = ev(tf.math.ndtri, p)
        np.testing.assert_allclose(0.5 * math.erfc(-z / math.sqrt(2)), p, rtol=1e-13)
        c = ev(tf.math.erfcinv, 1 - y)
        np.testing.assert_allclose(math.erfc(c), 1 - y, rtol=1e-12)


def test_erfinv_edges_and_small():
    out = ev(tf.math.erfinv, np.array([-1.0, 1.0, 2.0, 0.0, 1e-12]))
    assert out[0] == -np.inf and out[1] == np.inf and np.isnan(out[2]) and out[3] == 0
    np.testing.assert_allclose(out[4], 1e-12 * math.sqrt(math.pi) / 2, rtol=1e-14)
    assert ev(tf.math.ndtri, np.float32([0.5])).dtype == np.float32


def test_xlog1py_nextafter_lbeta_polyval():
    x = np.array([0.0, 2.0, 3.0])
    y = np.array([-1.0, 0.5, 2.0])
    np.testing.assert_allclose(ev(tf.math.xlog1py, x, y), [0.0, 2 * np.log1p(0.5),
                                                           3 * np.log1p(2.0)])
    out = ev(tf.math.nextafter, np.float32([1.0, 1.0]), np.float32([2.0, 0.0]))
    np.testing.assert_array_equal(out, np.nextafter(np.float32([1, 1]), np.float32([2, 0])))
    v = np.array([[1.5, 2.5, 0.5], [3.0, 1.0, 2.0]])
    ref = [sum(math.lgamma(t) for t in r) - math.lgamma(sum(r)) for r in v]
    np.testing.assert_allclose(ev(tf.lbeta, v), ref, rtol=1e-12)
    with tf.Graph().as_default():
        p = tf.math.polyval([1.0, -2.0, 3.0], tf.constant([0.0, 2.0]))
        assert p.op.name.startswith("polyval")
        np.testing.assert_allclose(run(p), [3.0, 3.0])
        np.testing.assert_allclose(run(tf.math.polyval([], tf.constant([1.0]))), [0.0])
        with pytest.raises(ValueError, match="list"):
            tf.math.polyval((1.0,), 1.0)


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_logsumexp(exclusive, reverse):
    x = np.random.RandomState(0).randn(3, 4) * 50
    out = ev(lambda t: tf.math.cumulative_logsumexp(t, axis=1, exclusive=exclusive,
                                                    reverse=reverse), x)
    with np.errstate(divide="ignore"):
        ref = np.log(tf_cumsum_exp(x, exclusive, reverse))
    np.testing.assert_allclose(out, ref, rtol=1e-12)

    def finite(t):  # an exclusive scan starts with log(0) = -inf: leave that entry out
        y = tf.math.cumulative_logsumexp(t, axis=1, exclusive=exclusive, reverse=reverse)
        if not exclusive:
            return y
        return y[:, :-1] if reverse else y[:, 1:]
    assert grad_err(finite, [x / 50]) < 1e-6


def tf_cumsum_exp(x, exclusive, reverse):
    m = x.max()
    e = np.exp(x - m)
    if reverse:
        e = e[:, ::-1]
    c = np.cumsum(e, axis=1)
    if exclusive:
        c = np.concatenate([np.zeros((3, 1)), c[:, :-1]], axis=1)
    if reverse:
        c = c[:, ::-1]
    return c * np.exp(m)


def test_bincount_histograms():
    arr = np.array([[1, 1, 4], [0, 1, 4]], np.int32)
    out = ev(tf.math.bincount, arr)
    np.testing.assert_array_equal(out, np.bincount(arr.ravel()))
    assert out.dtype == np.int32
    with tf.Graph().as_default():
        a = tf.constant(arr)
        res = run([tf.bincount(a, minlength=8), tf.bincount(a, maxlength=2),
                   tf.bincount(a, weights=tf.ones([2, 3], tf.float64)),
                   tf.bincount(tf.zeros([0], tf.int32)), tf.bincount(a, dtype=tf.float32)])
    assert res[0].shape == (8,) and res[1].tolist() == [1, 3]
    np.testing.assert_array_equal(res[2], np.bincount(arr.ravel()).astype(float))
    assert res[3].shape == (0,) and res[4].dtype == np.float32
    with tf.Graph().as_default():
        with pytest.raises(errors.InvalidArgumentError, match="non-negative"):
            run(tf.bincount(tf.constant([-1, 2])))
    v = np.float32([-1.0, 0.0, 1.5, 2.0, 5.0, 7.0])
    hist, bins = ev(lambda t: (tf.histogram_fixed_width(t, [0.0, 5.0], nbins=5),
                               tf.histogram_fixed_width_bins(t, [0.0, 5.0], nbins=5)), v)
    np.testing.assert_array_equal(hist, [2, 1, 1, 0, 2])
    np.testing.assert_array_equal(bins, [0, 0, 1, 2, 4, 4])
    with tf.Graph().as_default():
        with pytest.raises(errors.InvalidArgumentError, match="value_range"):
            run(tf.histogram_fixed_width(tf.constant([1.0]), [2.0, 1.0]))


def test_accumulate_n_arg_ops_monotonic_zero_fraction_confusion():
    with tf.Graph().as_default():
        a = tf.constant([[1.0, 2.0], [3.0, 4.0]])
        acc = tf.math.accumulate_n([a, a, a])
        assert acc.op.type == "AccumulateNV2" and acc.shape.as_list() == [2, 2]
        assert tf.accumulate_n([a]) is a
        with pytest.raises(ValueError):
            tf.accumulate_n([])
        g = tf.gradients(acc, a)[0]
        res = run([acc, g, tf.arg_max(a, 1), tf.arg_min(a, 0),
                   tf.math.is_non_decreasing([1, 1, 2]), tf.is_strictly_increasing([1, 1, 2]),
                   tf.is_strictly_increasing([3]), tf.math.zero_fraction([0.0, 1.0, 0.0, 2.0]),
                   tf.nn.zero_fraction(tf.zeros([3])),
                   tf.math.confusion_matrix([0, 1, 2, 1], [0, 2, 2, 1])])
    np.testing.assert_array_equal(res[0], 3 * np.array([[1, 2], [3, 4]]))
    np.testing.assert_array_equal(res[1], 3 * np.ones((2, 2)))
    assert res[2].tolist() == [1, 1] and res[2].dtype == np.int64 and res[3].tolist() == [0, 0]
    assert res[4] and not res[5] and res[6]
    assert res[7] == np.float32(0.5) and res[7].dtype == np.float32 and res[8] == 1.0
    np.testing.assert_array_equal(res[9], [[1, 0, 0], [0, 1, 1], [0, 0, 1]])


def test_gradients():
    a = np.array([0.7, 2.0, 5.0])
    x = np.array([0.4, 2.5, 6.0])
    assert grad_err(tf.math.igamma, [a, x]) < 1e-6
    assert grad_err(tf.math.igammac, [a, x]) < 1e-6
    assert grad_err(lambda t: tf.math.betainc(tf.constant(2.0, tf.float64),
                                              tf.constant(3.0, tf.float64), t),
                    [np.array([0.2, 0.6])]) < 1e-7
    v = np.array([-3.0, -0.5, 0.3, 2.0, 35.0])
    for fn in (tf.math.bessel_i0e, tf.math.bessel_i1e, tf.math.bessel_i0, tf.math.bessel_i1):
        assert grad_err(fn, [v[:4]]) < 1e-6, fn
    assert grad_err(tf.math.erfinv, [np.array([-0.9, 0.1, 0.5])]) < 1e-6
    assert grad_err(tf.math.ndtri, [np.array([0.05, 0.5, 0.9])]) < 1e-6
    assert grad_err(tf.math.xlog1py, [np.array([0.5, 2.0]), np.array([0.3, 1.5])]) < 1e-7
    assert grad_err(tf.math.lbeta, [np.array([[1.5, 2.5], [0.7, 3.0]])]) < 1e-7
    assert grad_err(lambda t: tf.math.polyval([np.float64(1), t, np.float64(3)], np.float64(2)),
                    [np.array(0.5)]) < 1e-8
    with tf.Graph().as_default():
        t = tf.constant([1.0])
        assert tf.gradients(tf.math.nextafter(t, 2.0), t) == [None]
        b = tf.constant([0.5])
        ga, gb, gx = tf.gradients(tf.betainc(t, b, 0.3), [t, b])+[None]
        assert ga is None and gb is None
