"""Quantization ops of plugins/kernels/standard/quantize_ops.py: fake quantization
(values against a float64 reference of TF 1.15's nudged-range rule, hypothesis over
ranges, bit widths and narrow ranges; the straight-through gradients through
``tf.gradients`` and the numeric checker), QuantizeV2 / Dequantize in every mode and
QuantizedConcat against numbers TensorFlow computed, shapes, dtypes and errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import flowrt as tf
from flowrt import errors


def run(build, feeds=None):
    g = tf.Graph()
    with g.as_default():
        out = build()
        with tf.Session() as s:
            return s.run(out, feeds)


def static(build):
    g = tf.Graph()
    with g.as_default():
        return build()


def fake_quant_ref(x, mn, mx, bits=8, narrow=False):
    """TF's fake quantization in float64: the range nudged so 0.0 is a step."""
    qmin, qmax = (1 if narrow else 0), (1 << bits) - 1
    scale = (mx - mn) / (qmax - qmin)
    zp = qmin - mn / scale
    zp = qmin if zp < qmin else qmax if zp > qmax else np.floor(zp + 0.5)
    nmin, nmax = (qmin - zp) * scale, (qmax - zp) * scale
    c = np.clip(np.asarray(x, np.float64), nmin, nmax)
    return np.floor((c - nmin) / scale + 0.5) * scale + nmin, nmin, nmax


# Outputs of TensorFlow (tf.quantize then tf.dequantize of the outputs, range [-4, 5])
X = np.array([-7.3, -4.0, -1.26, -0.5, 0.0, 0.37, 1.5, 2.5, 4.99, 6.2], np.float32)
QUANTIZE_TF = {  # (T, mode): (output, output_min, output_max, dequantized)
    ('qint16', 'MIN_COMBINED'): (
        [-32768, -32768, -12816, -7282, -3641, -947, 7281, 14563, 32694, 32767],
        -4.0, 5.0,
        [-4.0, -4.0, -1.25997, -0.49998, 5e-05, 0.37002, 1.49998, 2.50002, 4.98998,
         5.0]),
    ('qint16', 'MIN_FIRST'): (
        [-32768, -32768, -12816, -7282, -3641, -947, 7282, 14563, 32695, 32767],
        -4.0, 5.0,
        [-4.00005, -4.00005, -1.26001, -0.50002, 0.0, 0.36997, 1.50007, 2.49998,
         4.99007, 4.99995]),
    ('qint16', 'SCALED'): (
        [-32768, -26214, -8257, -3277, 0, 2425, 9830, 16384, 32701, 32767],
        -5.0001526, 5.0,
        [-5.00015, -4.00006, -1.25996, -0.50005, 0.0, 0.37004, 1.49998, 2.50008,
         4.98993, 5.0]),
    ('qint8', 'MIN_COMBINED'): (
        [-128, -128, -50, -29, -15, -4, 28, 56, 127, 127],
        -4.0, 5.0,
        [-4.0, -4.0, -1.24706, -0.50588, -0.01176, 0.37647, 1.50588, 2.49412, 5.0,
         5.0]),
    ('qint8', 'MIN_FIRST'): (
        [-128, -128, -51, -29, -15, -5, 28, 56, 126, 127],
        -4.0, 5.0,
        [-3.98824, -3.98824, -1.27059, -0.49412, 0.0, 0.35294, 1.51765, 2.50588,
         4.97647, 5.01176]),
    ('qint8', 'SCALED'): (
        [-128, -102, -32, -13, 0, 9, 38, 64, 127, 127],
        -5.03937, 5.0,
        [-5.03937, -4.01575, -1.25984, -0.51181, 0.0, 0.35433, 1.49606, 2.51968, 5.0,
         5.0]),
    ('quint8', 'MIN_COMBINED'): (
        [0, 0, 78, 99, 113, 124, 156, 184, 255, 255],
        -4.0, 5.0,
        [-4.0, -4.0, -1.24706, -0.50588, -0.01176, 0.37647, 1.50588, 2.49412, 5.0,
         5.0]),
    ('quint8', 'MIN_FIRST'): (
        [0, 0, 77, 99, 113, 123, 156, 184, 254, 255],
        -4.0, 5.0,
        [-3.98824, -3.98824, -1.27059, -0.49412, 0.0, 0.35294, 1.51765, 2.50588,
         4.97647, 5.01176]),
    ('quint8', 'SCALED'): (
        [0, 0, 0, 0, 0, 19, 77, 128, 254, 255],
        0.0, 5.0,
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.37255, 1.5098, 2.5098, 4.98039, 5.0]),
}


# ---------------------------------------------------------------------------------------
# fake quantization
# ---------------------------------------------------------------------------------------
ranges = st.tuples(st.floats(-10, 0), st.floats(0.01, 10)).filter(lambda r: r[0] < r[1])


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float32, st.integers(1, 12), elements=st.floats(-12, 12, width=32)),
       ranges, st.integers(2, 16), st.booleans(), st.sampled_from(["args", "vars"]))
# a 16-bit case whose value lies 0.1% of a step from a boundary (once failed in CI)
@example(np.array([-1.1955407], np.float32), (-8.851501489565631, 3.285396323898753), 16,
         False, "args")
def test_fake_quant_matches_reference(x, rng, bits, narrow, kind):
    mn, mx = (float(np.float32(v)) for v in rng)
    if kind == "args":
        got = run(lambda: tf.fake_quant_with_min_max_args(x, mn, mx, bits, narrow))
    else:
        got = run(lambda: tf.fake_quant_with_min_max_vars(x, tf.constant(mn), tf.constant(mx),
                                                          bits, narrow))
    want, nmin, nmax = fake_quant_ref(x, mn, mx, bits, narrow)
    step = (mx - mn) / ((1 << bits) - 1 - narrow)
    assert got.dtype == np.float32 and got.shape == x.shape
    # float32 arithmetic may round a value near a step boundary the other way: the
    # kernel's (x - nudged_min) / scale carries a float32 error of a few ulps of the
    # operands, which is a sizeable fraction of a step at 16 bits
    frac = np.abs(np.abs((np.clip(x, nmin, nmax) - nmin) / step % 1) - 0.5)
    band = np.maximum(1e-3, 4 * np.finfo(np.float32).eps *
                      (np.abs(x) + abs(nmin) + abs(nmax)) / step)
    assert np.all(np.abs(got - want) <= 1e-5 * max(1.0, abs(mn), abs(mx)) +
                  1.01 * step * (frac < band))


def test_fake_quant_per_channel_and_tf_values():
    x = X[:8].reshape(2, 4)
    mn = np.array([-4.0, -1.0, -0.5, 0.0], np.float32)
    mx = np.array([5.0, 1.0, 3.0, 6.0], np.float32)
    got = run(lambda: tf.quantization.fake_quant_with_min_max_vars_per_channel(x, mn, mx))
    for c in range(4):
        np.testing.assert_allclose(got[:, c], fake_quant_ref(x[:, c], mn[c], mx[c])[0],
                                   atol=1e-6)
    np.testing.assert_allclose(
        run(lambda: tf.fake_quant_with_min_max_args(X, -3.3, 5.1, num_bits=4)),
        [-3.36, -3.36, -1.12, -0.56, 0.0, 0.56, 1.68, 2.24, 5.04, 5.04], atol=1e-6)
    assert static(lambda: tf.fake_quant_with_min_max_vars_per_channel(
        tf.zeros([2, 3, 3, 4]), mn, mx)).shape.as_list() == [2, 3, 3, 4]


def test_fake_quant_gradient_ops():
    g = np.linspace(1, 2, X.size).astype(np.float32)
    _, nmin, nmax = fake_quant_ref(X, -3.3, 5.1)
    inside = (X >= nmin) & (X <= nmax)
    np.testing.assert_allclose(
        run(lambda: tf.fake_quant_with_min_max_args_gradient(g, X, -3.3, 5.1)),
        np.where(inside, g, 0))
    r = run(lambda: tf.fake_quant_with_min_max_vars_gradient(g, X, -3.3, 5.1))
    assert r._fields == ("backprops_wrt_input", "backprop_wrt_min", "backprop_wrt_max")
    np.testing.assert_allclose(r.backprops_wrt_input, np.where(inside, g, 0))
    np.testing.assert_allclose(r.backprop_wrt_min, g[X < nmin].sum(), rtol=1e-6)
    np.testing.assert_allclose(r.backprop_wrt_max, g[X > nmax].sum(), rtol=1e-6)
    x2, g2 = X[:8].reshape(2, 4), g[:8].reshape(2, 4)
    mn = np.array([-4.0, -1.0, -0.5, 0.0], np.float32)
    mx = np.array([5.0, 1.0, 3.0, 6.0], np.float32)
    pc = run(lambda: tf.fake_quant_with_min_max_vars_per_channel_gradient(g2, x2, mn, mx))
    assert pc.backprop_wrt_min.shape == (4,) and pc.backprop_wrt_max.shape == (4,)
    for c in range(4):
        _, lo, hi = fake_quant_ref(x2[:, c], mn[c], mx[c])
        np.testing.assert_allclose(pc.backprop_wrt_min[c], g2[:, c][x2[:, c] < lo].sum())
        np.testing.assert_allclose(pc.backprop_wrt_max[c], g2[:, c][x2[:, c] > hi].sum())


def test_gradients_flow_straight_through():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(X)
        mn, mx = tf.Variable(-3.3), tf.Variable(5.1)
        y = tf.fake_quant_with_min_max_vars(x, mn, mx)
        dx, dmn, dmx = tf.gradients(tf.reduce_sum(y * 3.0), [x, mn, mx])
        da = tf.gradients(tf.reduce_sum(tf.fake_quant_with_min_max_args(x, -2., 2.)), x)[0]
        xp = tf.constant(X[:8].reshape(2, 4))
        pmn, pmx = tf.constant([-1.0] * 4), tf.constant([1.0] * 4)
        dpc = tf.gradients(tf.reduce_sum(tf.fake_quant_with_min_max_vars_per_channel(
            xp, pmn, pmx)), [xp, pmn, pmx])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            dx, dmn, dmx, da, dpc = s.run([dx, dmn, dmx, da, dpc])
    _, nmin, nmax = fake_quant_ref(X, -3.3, 5.1)
    np.testing.assert_allclose(dx, np.where((X >= nmin) & (X <= nmax), 3.0, 0.0))
    assert dmn == 3.0 * (X < nmin).sum() and dmx == 3.0 * (X > nmax).sum()
    _, lo, hi = fake_quant_ref(X, -2.0, 2.0)
    np.testing.assert_allclose(da, ((X >= lo) & (X <= hi)).astype(np.float32))
    assert dpc[1].shape == (4,) and dpc[0].shape == (2, 4)


def test_numeric_gradient_inside_the_range():
    # between steps the op is flat, so the numeric derivative is 0 almost everywhere;
    # the checker agrees with the straight-through gradient only where both are 0:
    # outside the range
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [4])
        y = tf.fake_quant_with_min_max_args(x, -1.0, 1.0)
        with tf.Session():
            th, nu = tf.test.compute_gradient(
                x, [4], y, [4], x_init_value=np.array([-3, -2, 2, 3], np.float32), delta=1e-2)
    np.testing.assert_allclose(th, nu, atol=1e-6)


def test_fake_quant_errors():
    with pytest.raises(errors.InvalidArgumentError, match="min has to be smaller than max"):
        run(lambda: tf.fake_quant_with_min_max_args(X, 3.0, 1.0))
    with pytest.raises(errors.InvalidArgumentError, match="between 2 and 16"):
        run(lambda: tf.fake_quant_with_min_max_args(X, num_bits=1))
    with pytest.raises(ValueError, match="rank 0"):
        static(lambda: tf.fake_quant_with_min_max_vars(X, [0.0, 1.0], 1.0))
    with pytest.raises(ValueError, match="at most rank 4"):
        static(lambda: tf.fake_quant_with_min_max_vars_per_channel(
            tf.zeros([1, 1, 1, 1, 2]), [0.0, 0.0], [1.0, 1.0]))
    with pytest.raises(ValueError, match="Dimensions must be equal"):
        static(lambda: tf.fake_quant_with_min_max_vars_per_channel(
            tf.zeros([2, 3]), [0.0, 0.0], [1.0, 1.0]))
    with pytest.raises(errors.InvalidArgumentError, match="incorrect size"):
        run(lambda: tf.fake_quant_with_min_max_vars_per_channel(
            tf.placeholder_with_default(np.zeros([2, 3], np.float32), None),
            tf.placeholder_with_default(np.zeros([2], np.float32), None), [1.0, 1.0]))


# ---------------------------------------------------------------------------------------
# quantize / dequantize / quantized_concat
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", sorted(QUANTIZE_TF))
def test_quantize_and_dequantize_match_tensorflow(key):
    T, mode = key
    q, mn, mx, deq = QUANTIZE_TF[key]
    dt = getattr(tf, T)

    def build():
        r = tf.quantize(X, -4.0, 5.0, dt, mode=mode)
        return list(r) + [tf.dequantize(r.output, r.output_min, r.output_max, mode=mode)]

    out, omin, omax, d = run(build)
    np.testing.assert_array_equal(out, q)
    assert out.dtype == dt.np and omin == np.float32(mn) and omax == np.float32(mx)
    np.testing.assert_allclose(d, deq, atol=2e-5)
    assert d.dtype == np.float32


def test_quantize_api_forms_and_static_shapes():
    r = static(lambda: tf.quantization.quantize(tf.zeros([2, 3]), 0.0, 1.0, tf.quint8))
    assert r._fields == ("output", "output_min", "output_max")
    assert r.output.dtype == tf.quint8 and r.output.shape.as_list() == [2, 3]
    assert r.output_min.shape.ndims == 0 and r.output.op.type == "QuantizeV2"
    v2 = run(lambda: tf.quantize_v2(X, -4.0, 5.0, tf.quint8, "MIN_COMBINED", None))
    np.testing.assert_array_equal(v2[0], QUANTIZE_TF[("quint8", "MIN_COMBINED")][0])
    d = static(lambda: tf.dequantize(tf.zeros([4], tf.quint8), 0.0, 1.0))
    assert d.dtype == tf.float32 and d.shape.as_list() == [4]
    even = run(lambda: tf.quantize(np.array([0.5, 1.5, 2.5, -0.5, -1.5], np.float32), -127.,
                                   127., tf.qint8, mode="SCALED", round_mode="HALF_TO_EVEN"))
    np.testing.assert_array_equal(even.output, [0, 2, 2, 0, -2])
    # the range is widened to hold 0.0 and at least 1% of the largest magnitude
    assert tuple(run(lambda: list(tf.quantize(X, 1.0, 3.0, tf.quint8)))[1:]) == (0.0, 3.0)
    assert run(lambda: list(tf.quantize(X, 0.0, 0.0, tf.quint8)))[2] == np.float32(0.01)


def test_quantize_errors():
    with pytest.raises(errors.InvalidArgumentError, match="only supported for mode 'SCALED'"):
        run(lambda: tf.quantize(X, -1.0, 1.0, tf.qint8, round_mode="HALF_TO_EVEN"))
    with pytest.raises(errors.InvalidArgumentError, match="larger than input_min_range"):
        run(lambda: tf.quantize(X, 1.0, -1.0, tf.qint8))
    with pytest.raises(ValueError, match="rank 0"):
        static(lambda: tf.quantize(X, [0.0, 1.0], 1.0, tf.qint8))
    with pytest.raises((TypeError, ValueError)):
        static(lambda: tf.quantize(X, 0.0, 1.0, tf.float32))
    with pytest.raises((TypeError, ValueError)):
        static(lambda: tf.quantize(X, 0.0, 1.0, tf.qint8, mode="BOGUS"))


def test_quantized_concat():
    def build(dt=tf.quint8):
        a = tf.quantize(X[:4].reshape(2, 2), -4.0, 5.0, dt)
        b = tf.quantize(X[4:8].reshape(2, 2), -1.0, 8.0, dt)
        return tf.quantized_concat(0, [a.output, b.output], [a.output_min, b.output_min],
                                   [a.output_max, b.output_max])
    r = static(build)
    assert r.output.shape.as_list() == [4, 2] and r.output.dtype == tf.quint8
    out, mn, mx = run(build)
    np.testing.assert_array_equal(out, [[0, 0], [59, 74], [85, 93], [117, 138]])
    assert (mn, mx) == (-4.0, 8.0)
    same = run(lambda: tf.quantization.quantized_concat(
        1, [tf.constant(np.array([[1, 2]], np.uint8), tf.quint8)] * 2, [0.0, 0.0], [1.0, 1.0]))
    np.testing.assert_array_equal(same.output, [[1, 2, 1, 2]])
    with pytest.raises(errors.InvalidArgumentError, match="quint8 and qint32"):
        run(lambda: build(tf.qint8))
    with pytest.raises(ValueError, match="at least 2"):
        static(lambda: tf.quantized_concat(0, [tf.zeros([1], tf.quint8)], [0.0], [1.0]))
