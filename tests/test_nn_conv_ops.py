"""Tests of helper D's tf.nn area (plugins/kernels/standard/nn_conv_*.py): 1-D/3-D,
depthwise, separable, dilated and transposed convolutions, 3-D/N-d pooling, argmax
pooling, dilation/erosion, fused batch norm, LRN, the moments helpers and the
space/batch/depth ops -- values against straightforward numpy loop references
(hypothesis over small shapes, strides, dilations, paddings and formats), numeric
gradient checks, static shapes and error classes."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors

RNG = np.random.default_rng(4321)


def run(build, feed=None):
    g = tf.Graph()
    with g.as_default():
        out = build()
        with tf.Session(graph=g) as s:
            return s.run(out, feed)


def rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------------------------------
# numpy loop references (channels-last)
# ---------------------------------------------------------------------------------------
def geometry(n, k, s, d, padding):
    ke = (k - 1) * d + 1
    if padding == "SAME":
        o = -(-n // s)
        total = max((o - 1) * s + ke - n, 0)
        return o, total // 2
    return max(-(-(n - ke + 1) // s), 0), 0


def ref_conv(x, w, strides, dil, padding, depthwise=False):
    nsp = x.ndim - 2
    geo = [geometry(n, k, s, d, padding) for n, k, s, d in
           zip(x.shape[1:-1], w.shape[:nsp], strides, dil)]
    c, m = w.shape[nsp], w.shape[nsp + 1]
    oc = c * m if depthwise else m
    out = np.zeros((x.shape[0],) + tuple(o for o, _ in geo) + (oc,))
    for b in range(x.shape[0]):
        for opos in np.ndindex(*[o for o, _ in geo]):
            acc = np.zeros(oc)
            for koff in np.ndindex(*w.shape[:nsp]):
                ipos = [op * s + ko * d - lo for op, ko, s, d, (_, lo) in
                        zip(opos, koff, strides, dil, geo)]
                if any(p < 0 or p >= n for p, n in zip(ipos, x.shape[1:-1])):
                    continue
                v = x[(b,) + tuple(ipos)]
                if depthwise:
                    acc += (v[:, None] * w[koff]).reshape(-1)
                else:
                    acc += v @ w[koff]
            out[(b,) + opos] = acc
    return out


def ref_pool(x, ks, st_, padding, mode):
    nsp = x.ndim - 2
    geo = [geometry(n, k, s, 1, padding) for n, k, s in zip(x.shape[1:-1], ks, st_)]
    out = np.zeros((x.shape[0],) + tuple(o for o, _ in geo) + (x.shape[-1],))
    for b in range(x.shape[0]):
        for opos in np.ndindex(*[o for o, _ in geo]):
            vals = []
            for koff in np.ndindex(*ks):
                ipos = [op * s + ko - lo for op, ko, s, (_, lo) in zip(opos, koff, st_, geo)]
                if all(0 <= p < n for p, n in zip(ipos, x.shape[1:-1])):
                    vals.append(x[(b,) + tuple(ipos)])
            vals = np.array(vals)
            out[(b,) + opos] = vals.max(0) if mode == "max" else vals.mean(0)
    return out


# ---------------------------------------------------------------------------------------
# convolutions: values
# ---------------------------------------------------------------------------------------
@settings(max_examples=10, deadline=None)
@given(st.integers(1, 2), st.integers(1, 5), st.integers(1, 4), st.integers(1, 4),
       st.integers(1, 3), st.integers(1, 3), st.integers(1, 2), st.sampled_from(["SAME",
                                                                                 "VALID"]),
       st.booleans(), st.data())
def test_conv3d_matches_reference(n, d, h, w, kd, kh, cin, padding, cf, data):
    kd, kh = min(kd, d), min(kh, h)
    strides = [data.draw(st.integers(1, 2)) for _ in range(3)]
    x = rand(n, d, h, w, cin)
    f = rand(kd, kh, 1, cin, 2)
    want = ref_conv(x, f, strides, [1, 1, 1], padding)
    if cf:
        got = run(lambda: tf.transpose(tf.nn.conv3d(
            tf.constant(x.transpose(0, 4, 1, 2, 3)), f, [1, 1] + strides, padding,
            data_format="NCDHW"), [0, 2, 3, 4, 1]))
    else:
        got = run(lambda: tf.nn.conv3d(x, f, [1] + strides + [1], padding))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_conv3d_dilated_and_float32():
    x, f = rand(1, 6, 5, 4, 2), rand(2, 2, 2, 2, 3)
    got = run(lambda: tf.nn.conv3d(x, f, [1] * 5, "SAME", dilations=[1, 2, 1, 2, 1]))
    np.testing.assert_allclose(got, ref_conv(x, f, [1, 1, 1], [2, 1, 2], "SAME"), atol=1e-10)
    y = run(lambda: tf.nn.conv3d(x.astype(np.float32), f.astype(np.float32), [1] * 5,
                                 "VALID"))
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ref_conv(x, f, [1] * 3, [1] * 3, "VALID"), rtol=1e-4,
                               atol=1e-4)


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 2), st.integers(2, 8), st.integers(1, 3), st.integers(1, 2),
       st.integers(1, 2), st.sampled_from(["SAME", "VALID"]), st.booleans())
def test_conv1d_matches_reference(n, w, k, stride, dil, padding, cf):
    if stride > 1:
        dil = 1
    k = min(k, w)
    if (k - 1) * dil + 1 > w:
        dil = 1
    x, f = rand(n, w, 2), rand(k, 2, 3)
    want = ref_conv(x, f, [stride], [dil], padding)
    if cf:
        got = run(lambda: tf.transpose(tf.nn.conv1d(np.transpose(x, (0, 2, 1)), f, stride,
                                                    padding, data_format="NCW",
                                                    dilations=dil), [0, 2, 1]))
    else:
        got = run(lambda: tf.nn.conv1d(x, f, stride, padding, dilations=dil))
    np.testing.assert_allclose(got, want, atol=1e-10)


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 2), st.integers(2, 7), st.integers(2, 7), st.integers(1, 3),
       st.integers(1, 2), st.integers(1, 3), st.sampled_from(["SAME", "VALID"]),
       st.integers(1, 2), st.booleans())
def test_depthwise_matches_reference(n, h, w, k, c, m, padding, stride, cf):
    k = min(k, h, w)
    x, f = rand(n, h, w, c), rand(k, k, c, m)
    want = ref_conv(x, f, [stride, stride], [1, 1], padding, depthwise=True)
    if cf:
        got = run(lambda: tf.transpose(tf.nn.depthwise_conv2d_native(
            np.transpose(x, (0, 3, 1, 2)), f, [1, 1, stride, stride], padding,
            data_format="NCHW"), [0, 2, 3, 1]))
    else:
        got = run(lambda: tf.nn.depthwise_conv2d(x, f, [1, stride, stride, 1], padding))
    np.testing.assert_allclose(got, want, atol=1e-10)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("rate", [[2, 2], [1, 3], [3, 2]])
def test_dilated_convolutions(padding, rate):
    x = rand(2, 9, 8, 3)
    w, dw, pw = rand(3, 2, 3, 4), rand(2, 3, 3, 2), rand(1, 1, 6, 5)
    got = run(lambda: [tf.nn.convolution(x, w, padding, dilation_rate=rate),
                       tf.nn.depthwise_conv2d(x, dw, [1, 1, 1, 1], padding, rate=rate),
                       tf.nn.separable_conv2d(x, dw, pw, [1, 1, 1, 1], padding, rate=rate)])
    np.testing.assert_allclose(got[0], ref_conv(x, w, [1, 1], rate, padding), atol=1e-10)
    depth = ref_conv(x, dw, [1, 1], rate, padding, depthwise=True)
    np.testing.assert_allclose(got[1], depth, atol=1e-10)
    np.testing.assert_allclose(got[2], ref_conv(depth, pw, [1, 1], [1, 1], "VALID"),
                               atol=1e-10)


def test_atrous_conv2d_and_convolution_nd():
    x, w = rand(1, 7, 7, 2), rand(3, 3, 2, 2)
    got = run(lambda: tf.nn.atrous_conv2d(x, w, 2, "SAME"))
    np.testing.assert_allclose(got, ref_conv(x, w, [1, 1], [2, 2], "SAME"), atol=1e-10)
    x1, w1 = rand(2, 9, 2), rand(3, 2, 3)
    got = run(lambda: tf.nn.convolution(x1, w1, "VALID", dilation_rate=[2]))
    np.testing.assert_allclose(got, ref_conv(x1, w1, [1], [2], "VALID"), atol=1e-10)
    x3, w3 = rand(1, 5, 6, 4, 2), rand(2, 2, 2, 2, 3)
    got = run(lambda: tf.nn.convolution(x3, w3, "SAME", strides=[2, 1, 2]))
    np.testing.assert_allclose(got, ref_conv(x3, w3, [2, 1, 2], [1, 1, 1], "SAME"),
                               atol=1e-10)


def _transpose_ref(dy, w, out_shape, strides, padding):
    """conv transpose = the adjoint of conv: <conv(x), dy> = <x, convT(dy)>."""
    x = np.zeros(out_shape)
    dx = np.zeros(out_shape)
    for idx in np.ndindex(*out_shape):
        x[idx] = 1
        dx[idx] = np.sum(ref_conv(x, w, strides, [1] * len(strides), padding) * dy)
        x[idx] = 0
    return dx


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_transposed_convolutions(padding):
    w3 = rand(2, 2, 1, 2, 3)
    out3 = [1, 4, 3, 2, 2]
    dy3_shape = ref_conv(np.zeros(out3), w3, [2, 1, 1], [1] * 3, padding).shape
    dy3 = rand(*dy3_shape)
    got = run(lambda: tf.nn.conv3d_transpose(dy3, w3, out3, [1, 2, 1, 1, 1], padding))
    np.testing.assert_allclose(got, _transpose_ref(dy3, w3, out3, [2, 1, 1], padding),
                               atol=1e-10)
    w1 = rand(3, 2, 3)
    out1 = [2, 7, 2]
    dy1 = rand(*ref_conv(np.zeros(out1), w1, [2], [1], padding).shape)
    got = run(lambda: [tf.nn.conv1d_transpose(dy1, w1, out1, 2, padding),
                       tf.nn.conv_transpose(dy1, w1, out1, 2, padding)])
    want = _transpose_ref(dy1, w1, out1, [2], padding)
    np.testing.assert_allclose(got[0], want, atol=1e-10)
    np.testing.assert_allclose(got[1], want, atol=1e-10)


def test_atrous_conv2d_transpose_is_adjoint():
    w = rand(3, 3, 2, 3)
    out = [1, 6, 5, 2]
    dy = rand(1, 6, 5, 3)
    got = run(lambda: tf.nn.atrous_conv2d_transpose(dy, w, out, 2, "SAME"))
    x = np.zeros(out)
    for idx in np.ndindex(*out):
        x[idx] = 1
        assert np.isclose(got[idx], np.sum(ref_conv(x, w, [1, 1], [2, 2], "SAME") * dy))
        x[idx] = 0


def test_backprop_ops_match_gradients():
    x, w = rand(1, 4, 5, 3, 2), rand(2, 2, 2, 2, 3)
    dy = rand(*ref_conv(x, w, [1, 2, 1], [1] * 3, "SAME").shape)
    got = run(lambda: tf.nn.conv3d_backprop_filter_v2(x, [2, 2, 2, 2, 3], dy,
                                                      [1, 1, 2, 1, 1], "SAME"))
    want = np.zeros_like(w)
    for idx in np.ndindex(*w.shape):
        e = np.zeros_like(w)
        e[idx] = 1
        want[idx] = np.sum(ref_conv(x, e, [1, 2, 1], [1] * 3, "SAME") * dy)
    np.testing.assert_allclose(got, want, atol=1e-10)
    xd, wd = rand(1, 5, 4, 2), rand(2, 2, 2, 2)
    dyd = rand(1, 5, 4, 4)
    gi, gf = run(lambda: [
        tf.nn.depthwise_conv2d_native_backprop_input([1, 5, 4, 2], wd, dyd, [1, 1, 1, 1],
                                                     "SAME"),
        tf.nn.depthwise_conv2d_native_backprop_filter(xd, [2, 2, 2, 2], dyd, [1, 1, 1, 1],
                                                      "SAME")])
    np.testing.assert_allclose(gi, _depthwise_adjoint_input(dyd, wd, xd.shape), atol=1e-10)
    want_f = np.zeros_like(wd)
    for idx in np.ndindex(*wd.shape):
        e = np.zeros_like(wd)
        e[idx] = 1
        want_f[idx] = np.sum(ref_conv(xd, e, [1, 1], [1, 1], "SAME", True) * dyd)
    np.testing.assert_allclose(gf, want_f, atol=1e-10)


def _depthwise_adjoint_input(dy, w, shape):
    out = np.zeros(shape)
    x = np.zeros(shape)
    for idx in np.ndindex(*shape):
        x[idx] = 1
        out[idx] = np.sum(ref_conv(x, w, [1, 1], [1, 1], "SAME", True) * dy)
        x[idx] = 0
    return out


# ---------------------------------------------------------------------------------------
# convolutions: graph structure, shapes and errors
# ---------------------------------------------------------------------------------------
def test_composite_structure_and_names():
    with tf.Graph().as_default():
        x2 = tf.placeholder(tf.float32, [None, 8, 8, 3])
        y = tf.nn.conv1d(tf.placeholder(tf.float32, [2, 7, 3]), tf.ones([3, 3, 4]), 1, "SAME")
        assert y.name == "conv1d/Squeeze:0" and y.shape.as_list() == [2, 7, 4]
        assert tf.get_default_graph().get_operation_by_name("conv1d").type == "Conv2D"
        d = tf.nn.depthwise_conv2d(x2, tf.ones([3, 3, 3, 2]), [1, 1, 1, 1], "SAME",
                                   rate=[2, 2])
        assert d.op.type == "BatchToSpaceND" and d.shape.as_list() == [None, 8, 8, 6]
        s = tf.nn.separable_conv2d(x2, tf.ones([3, 3, 3, 2]), tf.ones([1, 1, 6, 5]),
                                   [1, 1, 1, 1], "VALID")
        assert s.name == "separable_conv2d:0" and s.shape.as_list() == [None, 6, 6, 5]
        assert tf.get_default_graph().get_operation_by_name(
            "separable_conv2d/depthwise").type == "DepthwiseConv2dNative"
        c3 = tf.nn.conv3d(tf.placeholder(tf.float32, [None, 5, None, 4, 3]),
                          tf.ones([2, 2, 2, 3, 7]), [1, 2, 1, 1, 1], "VALID")
        assert c3.shape.as_list() == [None, 2, None, 3, 7]
        t3 = tf.nn.conv3d_transpose(tf.ones([1, 2, 2, 2, 7]), tf.ones([2, 2, 2, 3, 7]),
                                    [1, 4, 4, 4, 3], [1, 2, 2, 2, 1])
        assert t3.op.type == "Conv3DBackpropInputV2" and t3.shape.as_list() == [1, 4, 4, 4, 3]
        cv = tf.nn.convolution(x2, tf.ones([3, 3, 3, 4]), "SAME")
        assert cv.name == "convolution:0"


@pytest.mark.parametrize("build, exc", [
    (lambda: tf.nn.conv3d(tf.ones([1, 4, 4, 4, 2]), tf.ones([2, 2, 2, 3, 1]), [1] * 5,
                          "SAME"), ValueError),
    (lambda: tf.nn.conv3d(tf.ones([1, 4, 4, 2]), tf.ones([2, 2, 2, 2, 1]), [1] * 5,
                          "SAME"), ValueError),
    (lambda: tf.nn.conv3d(tf.ones([1, 4, 4, 4, 2]), tf.ones([2, 2, 2, 2, 1]), [1] * 4,
                          "SAME"), ValueError),
    (lambda: tf.nn.conv3d(tf.ones([1, 2, 4, 4, 2]), tf.ones([3, 2, 2, 2, 1]), [1] * 5,
                          "VALID"), ValueError),
    (lambda: tf.nn.depthwise_conv2d(tf.ones([1, 4, 4, 2]), tf.ones([2, 2, 3, 1]),
                                    [1, 1, 1, 1], "SAME"), ValueError),
    (lambda: tf.nn.separable_conv2d(tf.ones([1, 4, 4, 2]), tf.ones([2, 2, 2, 1]),
                                    tf.ones([2, 1, 2, 3]), [1, 1, 1, 1], "SAME"), ValueError),
    (lambda: tf.nn.convolution(tf.ones([2, 3]), tf.ones([2, 3]), "SAME"), ValueError),
    (lambda: tf.nn.convolution(tf.ones([1, 5, 5, 1]), tf.ones([2, 2, 1, 1]), "SAME",
                               strides=[2, 2], dilation_rate=[2, 2]), ValueError),
    (lambda: tf.nn.conv1d(tf.ones([1, 5, 1]), tf.ones([2, 1, 1]), 1, "SAME",
                          data_format="NCHWX"), ValueError),
    (lambda: tf.nn.conv_transpose(tf.ones([1, 5, 1]), tf.ones([2, 1, 1]), [1, 2], 1),
     ValueError),
])
def test_build_errors(build, exc):
    with tf.Graph().as_default():
        with pytest.raises(exc):
            build()


def test_runtime_errors_name_the_node():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, None)
        y = tf.nn.conv3d(x, tf.ones([2, 2, 2, 3, 1]), [1] * 5, "SAME", name="myconv")
        with tf.Session() as s:
            with pytest.raises(errors.InvalidArgumentError, match="myconv"):
                s.run(y, {x: np.ones([1, 3, 3, 3, 2], np.float32)})
            with pytest.raises(errors.InvalidArgumentError):
                s.run(y, {x: np.ones([1, 3, 3, 3], np.float32)})
        dw = tf.nn.depthwise_conv2d_native(tf.ones([1, 4, 4, 1]), tf.ones([2, 2, 1, 1]),
                                           [1, 2, 1, 1], "SAME")
        bad = tf.nn.conv3d_backprop_filter_v2(tf.ones([1, 3, 3, 3, 1]), [2, 2, 2, 1, 1],
                                              tf.ones([1, 9, 3, 3, 1]), [1] * 5, "SAME")
        with tf.Session() as s:
            with pytest.raises(errors.InvalidArgumentError, match="equal length strides"):
                s.run(dw)
            with pytest.raises(errors.InvalidArgumentError, match="out_backprop"):
                s.run(bad)


# ---------------------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------------------
@settings(max_examples=10, deadline=None)
@given(st.integers(1, 2), st.integers(1, 5), st.integers(1, 5), st.integers(1, 4),
       st.sampled_from(["SAME", "VALID"]), st.sampled_from(["max", "avg"]), st.booleans(),
       st.data())
def test_pool3d_matches_reference(n, d, h, w, padding, mode, cf, data):
    ks = [data.draw(st.integers(1, m)) for m in (d, h, w)]
    strides = [data.draw(st.integers(1, 2)) for _ in range(3)]
    x = RNG.permutation(n * d * h * w * 2).reshape(n, d, h, w, 2).astype(np.float32)
    fn = tf.nn.max_pool3d if mode == "max" else tf.nn.avg_pool3d
    want = ref_pool(x, ks, strides, padding, mode)
    if cf:
        got = run(lambda: tf.transpose(fn(x.transpose(0, 4, 1, 2, 3), ks, strides, padding,
                                          data_format="NCDHW"), [0, 2, 3, 4, 1]))
    else:
        got = run(lambda: fn(x, ks, strides, padding))
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_pool1d_v2_and_generic(padding):
    x1 = rand(2, 7, 3)
    x2 = rand(2, 5, 6, 2)
    got = run(lambda: [tf.nn.max_pool1d(x1, 2, 2, padding), tf.nn.avg_pool1d(x1, 3, 1, padding),
                       tf.nn.max_pool_v2(x1, 2, 1, padding), tf.nn.avg_pool_v2(x2, 2, 2,
                                                                               padding),
                       tf.nn.pool(x2, [2, 3], "MAX", padding, strides=[1, 2]),
                       tf.nn.pool(x1, [2], "AVG", padding)])
    np.testing.assert_allclose(got[0], ref_pool(x1, [2], [2], padding, "max"))
    np.testing.assert_allclose(got[1], ref_pool(x1, [3], [1], padding, "avg"))
    np.testing.assert_allclose(got[2], ref_pool(x1, [2], [1], padding, "max"))
    np.testing.assert_allclose(got[3], ref_pool(x2, [2, 2], [2, 2], padding, "avg"))
    np.testing.assert_allclose(got[4], ref_pool(x2, [2, 3], [1, 2], padding, "max"))
    np.testing.assert_allclose(got[5], ref_pool(x1, [2], [1], padding, "avg"))


def test_dilated_pool():
    x = rand(1, 7, 6, 2)
    got = run(lambda: tf.nn.pool(x, [2, 2], "MAX", "VALID", dilation_rate=[2, 3]))
    want = np.zeros((1, 5, 3, 2))
    for i, j in np.ndindex(5, 3):
        want[0, i, j] = x[0, [i, i + 2]][:, [j, j + 3]].reshape(-1, 2).max(0)
    np.testing.assert_allclose(got, want)
    with tf.Graph().as_default():
        with pytest.raises(ValueError):
            tf.nn.pool(tf.ones([1, 4, 4, 1]), [2, 2], "MAX", "SAME", dilation_rate=[2, 2])
        with pytest.raises(ValueError):
            tf.nn.pool(tf.ones([1, 4, 4, 1]), [2, 2], "MAX", "VALID", strides=[3, 3])


@pytest.mark.parametrize("include_batch", [False, True])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_max_pool_with_argmax(include_batch, padding):
    n, h, w, c = 2, 5, 4, 3
    x = RNG.permutation(n * h * w * c).reshape(n, h, w, c).astype(np.float32)
    out, arg = run(lambda: tf.nn.max_pool_with_argmax(
        x, [1, 2, 2, 1], [1, 2, 1, 1], padding, include_batch_in_index=include_batch))
    np.testing.assert_allclose(out, ref_pool(x, [2, 2], [2, 1], padding, "max"))
    assert arg.dtype == np.int64
    flat = x.reshape(-1) if include_batch else x.reshape(n, -1)
    for b in range(n):
        src = flat if include_batch else flat[b]
        np.testing.assert_array_equal(src[arg[b]], out[b])
    for b, i, j, k in np.ndindex(*arg.shape):
        idx = arg[b, i, j, k] - (b * h * w * c if include_batch else 0)
        assert idx % c == k


def test_dilation_and_erosion():
    x, f = rand(2, 6, 5, 2), rand(2, 3, 2)
    got = run(lambda: [tf.nn.dilation2d(x, f, [1, 1, 2, 1], [1, 2, 1, 1], "SAME"),
                       tf.nn.erosion2d(x, f, [1, 1, 1, 1], [1, 1, 1, 1], "VALID")])

    def morph(x, f, s, r, padding, sign):
        geo = [geometry(n, k, st_, rr, padding) for n, k, st_, rr in
               zip(x.shape[1:3], f.shape[:2], s, r)]
        out = np.full((x.shape[0], geo[0][0], geo[1][0], x.shape[3]), -np.inf * sign)
        for b, i, j in np.ndindex(x.shape[0], geo[0][0], geo[1][0]):
            for di, dj in np.ndindex(*f.shape[:2]):
                y0 = i * s[0] + di * r[0] - geo[0][1]
                x0 = j * s[1] + dj * r[1] - geo[1][1]
                if 0 <= y0 < x.shape[1] and 0 <= x0 < x.shape[2]:
                    v = x[b, y0, x0] + sign * f[di, dj]
                    out[b, i, j] = np.maximum(out[b, i, j], v) if sign > 0 else \
                        np.minimum(out[b, i, j], x[b, y0, x0] - f[f.shape[0] - 1 - di,
                                                                  f.shape[1] - 1 - dj])
        return out

    np.testing.assert_allclose(got[0], morph(x, f, [1, 2], [2, 1], "SAME", 1))
    np.testing.assert_allclose(got[1], morph(x, f, [1, 1], [1, 1], "VALID", -1))


def test_pool_shapes_and_errors():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 5, None, 4, 3])
        assert tf.nn.max_pool3d(x, 2, 2, "SAME").shape.as_list() == [None, 3, None, 2, 3]
        assert tf.nn.avg_pool3d(x, [1, 1, 2, 2, 1], 1, "VALID").shape.as_list() == \
            [None, 5, None, 3, 3]
        with pytest.raises(ValueError):
            tf.nn.max_pool3d(tf.ones([1, 2, 2, 2, 1]), 3, 1, "VALID")
        with pytest.raises(ValueError):
            tf.nn.max_pool3d(tf.ones([1, 2, 2, 1]), 1, 1, "VALID")
        with pytest.raises(ValueError):
            tf.nn.max_pool_with_argmax(tf.ones([1, 2, 2, 1]), [1, 1, 1, 1], [1, 1, 1, 1],
                                       "SAME", data_format="NCHW")
        bad = tf.nn.avg_pool3d(tf.ones([1, 2, 2, 2, 2]), [1, 1, 1, 1, 2], [1, 1, 1, 1, 2],
                               "VALID")
        with tf.Session() as s:
            with pytest.raises(errors.UnimplementedError):
                s.run(bad)


# ---------------------------------------------------------------------------------------
# normalisation
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW", "NDHWC"])
@pytest.mark.parametrize("training", [True, False])
def test_fused_batch_norm(fmt, training):
    shape = {"NHWC": (3, 4, 5, 2), "NCHW": (3, 2, 4, 5), "NDHWC": (2, 3, 4, 2, 2)}[fmt]
    x = rand(*shape, dtype=np.float32)
    scale, offset = np.array([1.5, 0.5], np.float32), np.array([0.1, -0.3], np.float32)
    mean, var = np.array([0.2, -0.1], np.float32), np.array([0.8, 1.3], np.float32)
    axes = tuple(i for i in range(len(shape)) if i != (1 if fmt == "NCHW" else len(shape) - 1))
    bshape = [1] * len(shape)
    bshape[1 if fmt == "NCHW" else -1] = 2
    if training:
        y, m, v = run(lambda: tf.nn.fused_batch_norm(x, scale, offset, data_format=fmt))
        bm, bv = x.mean(axes), x.var(axes)
        n = x.size // 2
        np.testing.assert_allclose(m, bm, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(v, bv * n / (n - 1), rtol=1e-4)
    else:
        y, m, v = run(lambda: tf.nn.fused_batch_norm(x, scale, offset, mean, var,
                                                     data_format=fmt, is_training=False))
        bm, bv = mean, var
        np.testing.assert_array_equal(m, mean)
        np.testing.assert_array_equal(v, var)
    want = (x - bm.reshape(bshape)) / np.sqrt(bv.reshape(bshape) + 0.001) * \
        scale.reshape(bshape) + offset.reshape(bshape)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


def test_fused_batch_norm_errors_and_shapes():
    with tf.Graph().as_default():
        y, m, v = tf.nn.fused_batch_norm(tf.placeholder(tf.float32, [None, 4, 4, 3]),
                                         tf.ones([3]), tf.zeros([3]))
        assert y.shape.as_list() == [None, 4, 4, 3] and m.shape.as_list() == [3]
        assert y.op.type == "FusedBatchNormV3"
        with pytest.raises(ValueError):
            tf.nn.fused_batch_norm(tf.ones([2, 2, 2, 3]), tf.ones([3]), tf.zeros([3]),
                                   is_training=False)
        with pytest.raises(ValueError):
            tf.nn.fused_batch_norm(tf.ones([2, 2, 3]), tf.ones([3]), tf.zeros([3]))
        with pytest.raises(ValueError):
            tf.nn.fused_batch_norm(tf.ones([2, 2, 2, 3]), tf.ones([2]), tf.zeros([3]))
        with pytest.raises(TypeError):
            tf.nn.fused_batch_norm(tf.ones([2, 2, 2, 3], tf.float64), tf.ones([3]),
                                   tf.zeros([3]))


def test_lrn_matches_reference():
    x = rand(2, 3, 2, 7, dtype=np.float32)
    r, bias, alpha, beta = 2, 1.5, 0.3, 0.75
    got = run(lambda: tf.nn.local_response_normalization(x, r, bias, alpha, beta))
    want = np.zeros_like(x)
    for d in range(7):
        sq = np.sum(x[..., max(0, d - r):d + r + 1] ** 2, axis=-1)
        want[..., d] = x[..., d] / (bias + alpha * sq) ** beta
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_moment_helpers():
    x = rand(3, 4, 5)
    w = np.abs(rand(3, 4, 1))
    got = run(lambda: [tf.nn.sufficient_statistics(x, [0, 1])[:3],
                       tf.nn.normalize_moments(*tf.nn.sufficient_statistics(
                           x, [0, 1], shift=tf.constant(0.5, tf.float64))),
                       tf.nn.weighted_moments(x, [0, 1], w),
                       tf.nn.batch_norm_with_global_normalization(
                           x, x.mean((0, 1)), x.var((0, 1)), np.ones(5), 2 * np.ones(5),
                           0.01, True)])
    (cnt, mss, vss), (mean, var), (wm, wv), bn = got
    assert cnt == 12
    np.testing.assert_allclose(mss, x.sum((0, 1)))
    np.testing.assert_allclose(vss, (x ** 2).sum((0, 1)))
    np.testing.assert_allclose(mean, x.mean((0, 1)))
    np.testing.assert_allclose(var, x.var((0, 1)), atol=1e-12)
    ww = np.broadcast_to(w, x.shape)
    m = (ww * x).sum((0, 1)) / ww.sum((0, 1))
    np.testing.assert_allclose(wm, m)
    np.testing.assert_allclose(wv, (ww * (x - m) ** 2).sum((0, 1)) / ww.sum((0, 1)))
    np.testing.assert_allclose(bn, 2 * (x - x.mean((0, 1))) / np.sqrt(x.var((0, 1)) + 0.01)
                               + 1)


def test_misc_composites():
    got = run(lambda: [tf.nn.silu(np.array([-1.0, 2.0])),
                       tf.nn.compute_average_loss(np.array([1.0, 2.0, 6.0])),
                       tf.nn.compute_average_loss(np.array([1.0, 2.0]), global_batch_size=4,
                                                  sample_weight=np.array([2.0, 1.0])),
                       tf.nn.scale_regularization_loss(np.array([1.0, 2.0]))])
    np.testing.assert_allclose(got[0], [-1 / (1 + np.e), 2 / (1 + np.exp(-2))])
    assert got[1] == 3.0 and got[2] == 1.0 and got[3] == 3.0


# ---------------------------------------------------------------------------------------
# space ops
# ---------------------------------------------------------------------------------------
def ref_s2b(x, block, pads):
    m = len(block)
    xp = np.pad(x, [(0, 0)] + list(pads) + [(0, 0)] * (x.ndim - 1 - m))
    n = x.shape[0]
    out_sp = [xp.shape[1 + i] // block[i] for i in range(m)]
    out = np.zeros([n * int(np.prod(block))] + out_sp + list(x.shape[m + 1:]), x.dtype)
    for boff in np.ndindex(*block):
        bidx = int(np.ravel_multi_index(boff, block)) if m else 0
        for b in range(n):
            for pos in np.ndindex(*out_sp):
                src = tuple(p * bl + o for p, bl, o in zip(pos, block, boff))
                out[(bidx * n + b,) + pos] = xp[(b,) + src]
    return out


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 2), st.lists(st.integers(1, 3), min_size=1, max_size=2),
       st.integers(0, 2), st.data())
def test_space_to_batch_nd_roundtrip(n, block, rest, data):
    sp = [data.draw(st.integers(1, 4)) for _ in block]
    pads = [(data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in block]
    pads = [(lo, hi + (b - (s + lo + hi) % b) % b) for (lo, hi), s, b in zip(pads, sp, block)]
    x = rand(n, *sp, *([2] * rest))
    y, back = run(lambda: (lambda t: [t, tf.batch_to_space_nd(t, block, pads)])(
        tf.space_to_batch_nd(x, block, pads)))
    np.testing.assert_array_equal(y, ref_s2b(x, block, pads))
    np.testing.assert_array_equal(back, x)


def test_space_depth_ops():
    x = np.arange(2 * 4 * 6 * 3).reshape(2, 4, 6, 3).astype(np.int32)
    y, z, s2b, b2s = run(lambda: [tf.space_to_depth(x, 2), tf.depth_to_space(
        tf.space_to_depth(x, 2), 2), tf.space_to_batch(x, [[0, 0], [1, 1]], 2),
        tf.batch_to_space(tf.space_to_batch(x, [[0, 0], [1, 1]], 2), [[0, 0], [1, 1]], 2)])
    want = np.zeros((2, 2, 3, 12), np.int32)
    for b, i, j, bi, bj, c in np.ndindex(2, 2, 3, 2, 2, 3):
        want[b, i, j, (bi * 2 + bj) * 3 + c] = x[b, 2 * i + bi, 2 * j + bj, c]
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(z, x)
    np.testing.assert_array_equal(s2b, ref_s2b(x, [2, 2], [(0, 0), (1, 1)]))
    np.testing.assert_array_equal(b2s, x)
    p, c = run(lambda: tf.required_space_to_batch_paddings([5, 7], [2, 3], [[1, 1], [0, 2]]))
    np.testing.assert_array_equal(p, [[1, 2], [0, 2]])
    np.testing.assert_array_equal(c, [[0, 1], [0, 0]])
    with tf.Graph().as_default():
        with pytest.raises(ValueError):
            tf.space_to_depth(tf.ones([1, 3, 4, 1]), 2)
        with pytest.raises(ValueError):
            tf.depth_to_space(tf.ones([1, 3, 4, 3]), 2)
        with pytest.raises(ValueError):
            tf.space_to_batch_nd(tf.ones([1, 3, 4, 1]), [2, 2], [[0, 0], [0, 0]])
        b = tf.placeholder(tf.int32, [2])
        t = tf.space_to_batch_nd(tf.ones([1, 3, 4, 1]), b, [[0, 0], [0, 0]])
        with tf.Session() as s:
            with pytest.raises(errors.InvalidArgumentError):
                s.run(t, {b: [2, 2]})


# ---------------------------------------------------------------------------------------
# gradients (numeric checks)
# ---------------------------------------------------------------------------------------
def grad_error(build, values, dtype=tf.float64):
    g = tf.Graph()
    with g.as_default():
        xs = [tf.placeholder(dtype, v.shape) for v in values]
        y = build(*xs)
        with tf.Session():
            shape = y.shape.as_list()
            errs = []
            for i, (x, v) in enumerate(zip(xs, values)):
                extra = {xx: vv for j, (xx, vv) in enumerate(zip(xs, values)) if j != i}
                errs.append(tf.test.compute_gradient_error(x, list(v.shape), y, shape,
                                                           x_init_value=v,
                                                           extra_feed_dict=extra))
    return max(errs)


def distinct(*shape, dtype=np.float64):
    n = int(np.prod(shape))
    return (RNG.permutation(n) * 0.37 - n * 0.15).reshape(shape).astype(dtype)


GRADS64 = {
    "conv3d": (lambda x, w: tf.nn.conv3d(x, w, [1, 2, 1, 1, 1], "SAME"),
               [(1, 3, 4, 3, 2), (2, 2, 1, 2, 2)]),
    "conv3d_ncdhw_dilated": (lambda x, w: tf.nn.conv3d(x, w, [1] * 5, "VALID",
                                                       data_format="NCDHW",
                                                       dilations=[1, 1, 2, 1, 1]),
                             [(1, 2, 3, 4, 3), (2, 2, 2, 2, 2)]),
    "conv3d_transpose": (lambda x, w: tf.nn.conv3d_transpose(
        x, w, [1, 4, 3, 2, 2], [1, 2, 1, 1, 1], "SAME"), [(1, 2, 3, 2, 3), (2, 2, 1, 2, 3)]),
    "conv1d": (lambda x, w: tf.nn.conv1d(x, w, 2, "SAME"), [(2, 5, 2), (3, 2, 2)]),
    "conv1d_transpose": (lambda x, w: tf.nn.conv1d_transpose(x, w, [2, 6, 2], 2, "SAME"),
                         [(2, 3, 3), (3, 2, 3)]),
    "depthwise": (lambda x, w: tf.nn.depthwise_conv2d(x, w, [1, 2, 2, 1], "SAME"),
                  [(1, 5, 4, 2), (2, 3, 2, 2)]),
    "depthwise_rate": (lambda x, w: tf.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "VALID",
                                                           rate=[2, 1]),
                       [(1, 5, 4, 2), (2, 2, 2, 1)]),
    "separable": (lambda x, d, p: tf.nn.separable_conv2d(x, d, p, [1, 1, 1, 1], "SAME"),
                  [(1, 4, 3, 2), (2, 2, 2, 2), (1, 1, 4, 3)]),
    "atrous": (lambda x, w: tf.nn.atrous_conv2d(x, w, 2, "SAME"), [(1, 5, 5, 1),
                                                                    (2, 2, 1, 2)]),
    "space_to_batch_nd": (lambda x: tf.space_to_batch_nd(x, [2, 3], [[1, 1], [0, 2]]),
                          [(2, 2, 4, 2)]),
    "batch_to_space_nd": (lambda x: tf.batch_to_space_nd(x, [2, 1], [[1, 0], [0, 0]]),
                          [(4, 2, 3, 1)]),
    "space_to_depth": (lambda x: tf.space_to_depth(x, 2), [(1, 4, 2, 2)]),
    "depth_to_space": (lambda x: tf.depth_to_space(x, 2), [(1, 2, 1, 8)]),
}


@pytest.mark.parametrize("name", sorted(GRADS64))
def test_gradients_float64(name):
    build, shapes = GRADS64[name]
    assert grad_error(build, [rand(*s) for s in shapes]) < 1e-6


def test_gradients_of_pooling_and_morphology():
    x3 = distinct(1, 3, 4, 3, 2)
    assert grad_error(lambda x: tf.nn.avg_pool3d(x, 2, 1, "SAME"), [x3.astype(np.float32)],
                      tf.float32) < 1e-2
    assert grad_error(lambda x: tf.nn.max_pool3d(x, 2, [1, 1, 2, 1, 1], "SAME"),
                      [x3.astype(np.float32)], tf.float32) < 1e-2
    x2 = distinct(2, 4, 5, 2)
    assert grad_error(lambda x: tf.nn.max_pool_with_argmax(
        x, [1, 2, 2, 1], [1, 1, 2, 1], "SAME").output, [x2]) < 1e-6
    assert grad_error(lambda x, w: tf.nn.dilation2d(x, w, [1, 1, 1, 1], [1, 2, 1, 1],
                                                    "SAME"),
                      [x2, distinct(2, 2, 2) * 0.01]) < 1e-6
    assert grad_error(lambda x, w: tf.nn.erosion2d(x, w, [1, 1, 1, 1], [1, 1, 1, 1],
                                                   "VALID"),
                      [x2, distinct(2, 2, 2) * 0.01]) < 1e-6


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_gradients_of_fused_batch_norm(training, fmt):
    shape = (2, 3, 3, 2) if fmt == "NHWC" else (2, 2, 3, 3)
    vals = [rand(*shape, dtype=np.float32), np.array([1.2, 0.7], np.float32),
            np.array([0.1, -0.2], np.float32)]

    def build(x, s, o):
        if training:
            return tf.nn.fused_batch_norm(x, s, o, data_format=fmt)[0]
        return tf.nn.fused_batch_norm(x, s, o, tf.constant([0.1, 0.3]),
                                      tf.constant([1.5, 0.8]), is_training=False,
                                      data_format=fmt)[0]

    assert grad_error(build, vals, tf.float32) < 2e-2


def test_gradient_of_lrn():
    x = rand(1, 2, 2, 5, dtype=np.float32)
    assert grad_error(lambda t: tf.nn.lrn(t, 2, 1.5, 0.5, 0.7), [x], tf.float32) < 1e-2


def test_second_order_conv3d():
    x, w = rand(1, 3, 3, 3, 1), rand(2, 2, 2, 1, 2)

    def build(a):
        y = tf.nn.conv3d(a, tf.constant(w), [1] * 5, "SAME")
        return tf.gradients(tf.reduce_sum(tf.square(y)), a)[0]

    assert grad_error(build, [x]) < 1e-6


def test_combinations_are_exercised():
    # a cheap sanity check of the reference helpers themselves
    assert geometry(5, 3, 2, 1, "SAME") == (3, 1)
    assert geometry(5, 3, 2, 2, "VALID") == (1, 0)
    assert list(itertools.product([1], [2])) == [(1, 2)]


@pytest.mark.parametrize("overlapping", [False, True])
@pytest.mark.parametrize("pseudo_random", [False, True])
def test_fractional_pooling(overlapping, pseudo_random):
    x = distinct(2, 7, 9, 2)
    with tf.Graph().as_default():
        xt = tf.constant(x)
        mx = tf.nn.fractional_max_pool(xt, [1.0, 1.5, 1.7, 1.0], pseudo_random, overlapping,
                                       deterministic=True, seed=5)
        av = tf.nn.fractional_avg_pool(xt, [1.0, 1.5, 1.7, 1.0], pseudo_random, overlapping,
                                       seed=5, seed2=1)
        assert mx.output.shape.as_list() == [2, 4, 5, 2]
        g = tf.gradients(tf.reduce_sum(mx.output) + tf.reduce_sum(av.output), xt)[0]
        with tf.Session() as s:
            (o, rs, cs), (a, rs2, cs2), gv = s.run([mx, av, g])
    extra = 1 if overlapping else 0
    for out, rows, cols, red in ((o, rs, cs, np.max), (a, rs2, cs2, np.mean)):
        assert rows[0] == 0 and rows[-1] == 7 and cols[-1] == 9
        assert set(np.diff(rows)) <= {1, 2} and set(np.diff(cols)) <= {1, 2}
        for i, j in np.ndindex(4, 5):
            win = x[:, rows[i]:rows[i + 1] + extra, cols[j]:cols[j + 1] + extra]
            np.testing.assert_allclose(out[:, i, j], red(win, axis=(1, 2)))
    np.testing.assert_allclose(gv.sum(), 2 * o.size)
    with tf.Graph().as_default():
        with pytest.raises(ValueError):
            tf.nn.fractional_max_pool(tf.ones([2, 3]), [1.0, 1.5, 1.5, 1.0])
        bad = tf.nn.fractional_max_pool(tf.ones([1, 3, 3, 1]), [1.0, 4.0, 1.5, 1.0])
        with tf.Session() as s:
            with pytest.raises(errors.InvalidArgumentError):
                s.run(bad)


# ---------------------------------------------------------------------------------------
# GPU: every kernel of this area against the CPU (skipped without a GPU)
# ---------------------------------------------------------------------------------------
def _gpus():
    try:
        from flowrt.plugins.devices import cuda as cuda_dev
        return cuda_dev.gpu_device_type().discover(None, "localhost", 0)
    except Exception:  # noqa: BLE001 -- no CUDA plugin usable: skip
        return []


GPU_CASES = {
    "conv3d": lambda x5, x4, x3: tf.nn.conv3d(x5, tf.ones([2, 2, 2, 3, 4]) * 0.1,
                                              [1, 1, 2, 1, 1], "SAME"),
    "conv3d_transpose": lambda x5, x4, x3: tf.nn.conv3d_transpose(
        x5, tf.ones([2, 2, 2, 2, 3]) * 0.1, [2, 8, 12, 8, 2], [1, 2, 2, 2, 1]),
    "conv1d": lambda x5, x4, x3: tf.nn.conv1d(x3, tf.ones([3, 3, 2]) * 0.1, 2, "SAME"),
    "depthwise": lambda x5, x4, x3: tf.nn.depthwise_conv2d(x4, tf.ones([3, 3, 3, 2]) * 0.1,
                                                           [1, 1, 1, 1], "SAME", rate=[2, 2]),
    "separable": lambda x5, x4, x3: tf.nn.separable_conv2d(
        x4, tf.ones([2, 2, 3, 2]) * 0.1, tf.ones([1, 1, 6, 4]) * 0.1, [1, 2, 2, 1], "SAME"),
    "pool3d": lambda x5, x4, x3: tf.nn.max_pool3d(x5, 2, 2, "SAME") +
    tf.nn.avg_pool3d(x5, 2, 2, "SAME"),
    "argmax": lambda x5, x4, x3: tf.cast(tf.nn.max_pool_with_argmax(
        x4, [1, 2, 2, 1], [1, 2, 2, 1], "SAME").argmax, tf.float32),
    "dilation": lambda x5, x4, x3: tf.nn.dilation2d(x4, tf.ones([2, 2, 3]) * 0.1,
                                                    [1, 1, 1, 1], [1, 2, 2, 1], "SAME"),
    "fused_bn": lambda x5, x4, x3: tf.nn.fused_batch_norm(x4, tf.ones([3]), tf.zeros([3]))[0],
    "lrn": lambda x5, x4, x3: tf.nn.lrn(x4, 1),
    "space": lambda x5, x4, x3: tf.depth_to_space(tf.space_to_depth(x4, 2), 2) +
    tf.batch_to_space(tf.space_to_batch(x4, [[0, 0], [0, 0]], 2), [[0, 0], [0, 0]], 2),
}


#: the ops of this area that have GPU kernels once listed in plugins/kernels/cuda.py
GPU_AREA_OPS = """Conv3D Conv3DBackpropInput Conv3DBackpropFilter Conv3DBackpropInputV2
Conv3DBackpropFilterV2 DepthwiseConv2dNative DepthwiseConv2dNativeBackpropInput
DepthwiseConv2dNativeBackpropFilter MaxPool3D AvgPool3D MaxPool3DGrad MaxPool3DGradGrad
AvgPool3DGrad MaxPoolWithArgmax MaxPoolGradWithArgmax MaxPoolGradGradWithArgmax Dilation2D
Dilation2DBackpropInput Dilation2DBackpropFilter FusedBatchNorm FusedBatchNormV2
FusedBatchNormV3 FusedBatchNormGrad FusedBatchNormGradV2 FusedBatchNormGradV3 LRN LRNGrad
SpaceToBatchND BatchToSpaceND SpaceToBatch BatchToSpace SpaceToDepth DepthToSpace""".split()


@pytest.mark.parametrize("name", sorted(GPU_CASES))
def test_gpu_matches_cpu(name):
    if not _gpus():
        pytest.skip("no GPU here")
    from flowrt.plugins.kernels import cuda as cuda_k
    if not set(GPU_AREA_OPS) <= set(cuda_k.GPU_OPS):
        pytest.skip("this area's ops are not in the cuda plugin's GPU_OPS yet")
    r = np.random.default_rng(3)
    vals = {"x5": r.standard_normal((2, 4, 6, 4, 3)).astype(np.float32),
            "x4": r.standard_normal((2, 8, 6, 3)).astype(np.float32),
            "x3": r.standard_normal((2, 9, 3)).astype(np.float32)}

    def go(device):
        g = tf.Graph()
        with g.as_default():
            phs = {k: tf.placeholder(tf.float32, v.shape, name=k) for k, v in vals.items()}
            with tf.device(device):
                y = GPU_CASES[name](**phs)
                grads = [gr for gr in tf.gradients(tf.reduce_sum(y * y), list(phs.values()))
                         if gr is not None] if name != "argmax" else []
            with tf.Session(graph=g, config=tf.ConfigProto(allow_soft_placement=False)) as s:
                return s.run([y] + grads, {phs[k]: v for k, v in vals.items()})

    for a, b in zip(go("/device:GPU:0"), go("/device:CPU:0")):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4)
