"""Gradients of the nn ops (plugins/kernels/standard/nn_grad.py): numerical checks in
float64 of every nn op with a gradient (conv and pooling over paddings, strides,
dilations and data formats), second derivatives, the backprop ops' values, shapes and
errors, and an end-to-end check of a two-layer softmax classifier."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flowrt as tf
from flowrt import errors
from flowrt.graph import apply_op

RNG = np.random.default_rng(7)
TOL = 1e-6


def away_from(v, points, margin=0.05):
    """``v`` with entries near any of ``points`` (kinks) pushed ``margin`` away."""
    v = np.array(v, dtype=np.float64)
    for p in points:
        near = np.abs(v - p) < margin
        v[near] = p + np.where(v[near] >= p, margin, -margin)
    return v


def distinct(shape, scale=0.1):
    """Values at least ``scale`` apart (no ties in max pooling windows)."""
    n = int(np.prod(shape))
    return (RNG.permutation(n).astype(np.float64) * scale - n * scale / 2).reshape(shape)


def grad_errors(build, values, feed_shapes=None):
    g = tf.Graph()
    with g.as_default():
        feed_shapes = feed_shapes or [v.shape for v in values]
        xs = [tf.placeholder(tf.float64, s) for s in feed_shapes]
        y = build(*xs)
        with tf.Session() as s:
            y_shape = s.run(tf.shape(y), dict(zip(xs, values)))
            out = []
            for i, (x, v) in enumerate(zip(xs, values)):
                extra = {xx: vv for j, (xx, vv) in enumerate(zip(xs, values)) if j != i}
                out.append(tf.test.compute_gradient_error(
                    x, list(v.shape), y, list(y_shape), x_init_value=v,
                    extra_feed_dict=extra))
    return out


def check(build, *values, feed_shapes=None, tol=TOL):
    values = [np.asarray(v, dtype=np.float64) for v in values]
    errs = grad_errors(build, values, feed_shapes)
    assert max(errs) < tol, errs


def normal(*shape):
    return RNG.standard_normal(shape)


# ---------------------------------------------------------------------------------------
# activations, first and second derivatives
# ---------------------------------------------------------------------------------------
ACTIVATIONS = {
    "relu": (tf.nn.relu, [0.0]),
    "relu6": (tf.nn.relu6, [0.0, 6.0]),
    "leaky_relu": (lambda x: tf.nn.leaky_relu(x, alpha=0.3), [0.0]),
    "elu": (tf.nn.elu, [0.0]),
    "selu": (tf.nn.selu, [0.0]),
    "softplus": (tf.nn.softplus, []),
    "softsign": (tf.nn.softsign, [0.0]),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_gradient(name):
    fn, kinks = ACTIVATIONS[name]
    r = np.random.default_rng(100 + sorted(ACTIVATIONS).index(name))
    x = away_from(r.standard_normal((3, 4)) * 3, kinks)
    check(fn, x)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_second_derivative(name):
    fn, kinks = ACTIVATIONS[name]
    r = np.random.default_rng(sorted(ACTIVATIONS).index(name))
    x = away_from(r.standard_normal((2, 3)) * 3, kinks)
    dy = r.standard_normal((2, 3))

    def first(x, dy):  # the gradient op, differentiated in both of its inputs
        return tf.gradients(fn(x), x, grad_ys=dy)[0]

    check(first, x, dy, tol=1e-5)


@pytest.mark.parametrize("op,out", [("ReluGrad", [0, 2, 3, 0]), ("Relu6Grad", [0, 2, 0, 0]),
                                    ("LeakyReluGrad", [0.2, 2, 3, 0.8]),
                                    ("SoftsignGrad", [1 / 4, 2 / 9, 3 / 49, 4])])
def test_activation_grad_op_values(op, out):
    g = tf.Graph()
    with g.as_default():
        grads = tf.constant([1.0, 2.0, 3.0, 4.0])
        feats = tf.constant([-1.0, 2.0, 6.0, 0.0])
        y = apply_op(op, gradients=grads, features=feats)
        assert y.shape.as_list() == [4] and y.dtype == tf.float32
        with tf.Session() as s:
            np.testing.assert_allclose(s.run(y), out, rtol=1e-6)


def test_activation_grad_ops_dtypes_and_errors():
    g = tf.Graph()
    with g.as_default():
        r = apply_op("ReluGrad", gradients=tf.constant([3, 4], tf.int8),
                     features=tf.constant([1, -1], tf.int8))
        e = apply_op("EluGrad", gradients=tf.constant([1.0, 1.0], tf.float16),
                     outputs=tf.constant([-0.5, 2.0], tf.float16))
        with pytest.raises(ValueError):
            apply_op("ReluGrad", gradients=tf.constant([1.0]), features=tf.constant([1.0, 2.0]))
        with pytest.raises(TypeError):
            apply_op("EluGrad", gradients=tf.constant([1]), outputs=tf.constant([1]))
        p = tf.placeholder(tf.float32, None)
        bad = apply_op("SoftplusGrad", gradients=p, features=tf.constant([1.0, 2.0]))
        with tf.Session() as s:
            rv, ev = s.run([r, e])
            with pytest.raises(errors.InvalidArgumentError, match="same shape"):
                s.run(bad, {p: [1.0, 2.0, 3.0]})
    np.testing.assert_array_equal(rv, [3, 0])
    assert rv.dtype == np.int8
    np.testing.assert_allclose(ev, [0.5, 1.0])
    assert ev.dtype == np.float16


# ---------------------------------------------------------------------------------------
# softmax, cross entropies, BiasAdd, L2Loss
# ---------------------------------------------------------------------------------------
def test_softmax_and_log_softmax():
    check(tf.nn.softmax, normal(3, 4))
    check(tf.nn.log_softmax, normal(2, 3, 4))
    check(lambda x: tf.nn.softmax(x, axis=0), normal(3, 2))


def test_softmax_cross_entropy_both_inputs():
    logits = normal(3, 4)
    labels = np.abs(normal(3, 4))
    labels /= labels.sum(1, keepdims=True)
    check(lambda lo, la: tf.nn.softmax_cross_entropy_with_logits_v2(labels=la, logits=lo),
          logits, labels)


def test_softmax_cross_entropy_second_derivative():
    logits = normal(2, 3)
    labels = np.array([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])

    def first(lo):
        loss = tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=lo)
        return tf.gradients(loss * tf.constant([1.0, 2.0], tf.float64), lo)[0]

    check(first, logits)


def test_softmax_cross_entropy_uses_backprop_output_gradient():
    """A gradient reaching the op's second output (backprop) flows to the logits."""
    logits = normal(2, 3)
    labels = np.array([[0.2, 0.3, 0.5], [0.0, 1.0, 0.0]])

    def build(lo):
        loss, backprop = apply_op("SoftmaxCrossEntropyWithLogits", features=lo,
                                  labels=tf.constant(labels))
        return tf.reduce_sum(loss) + tf.reduce_sum(backprop * backprop)

    check(build, logits)


def test_softmax_cross_entropy_broadcast_labels():
    logits = normal(3, 4)

    def build(lo, la):
        loss, _ = apply_op("SoftmaxCrossEntropyWithLogits", features=lo, labels=la)
        return loss

    labels = np.abs(normal(1, 4))
    check(build, logits, labels / labels.sum())


def test_sparse_softmax_cross_entropy():
    labels = np.array([2, 0, 3])
    check(lambda lo: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=lo),
          normal(3, 4))

    def first(lo):
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=lo)
        return tf.gradients(loss, lo)[0]

    check(first, normal(3, 4))


def test_sparse_softmax_cross_entropy_labels_get_none():
    g = tf.Graph()
    with g.as_default():
        lo = tf.constant(np.zeros((2, 3), np.float32))
        la = tf.constant([0, 1])
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=la, logits=lo)
        assert tf.gradients(loss, la) == [None]
        with tf.Session() as s:
            np.testing.assert_allclose(s.run(tf.gradients(loss, lo)[0]),
                                       [[-2 / 3, 1 / 3, 1 / 3], [1 / 3, -2 / 3, 1 / 3]],
                                       rtol=1e-6)


@pytest.mark.parametrize("fmt,shape", [("NHWC", (2, 3)), ("NHWC", (2, 2, 3)),
                                       ("NCHW", (2, 3, 2, 2)), ("NCHW", (2, 3, 2))])
def test_bias_add(fmt, shape):
    c = shape[1] if fmt == "NCHW" else shape[-1]
    check(lambda x, b: tf.nn.bias_add(x, b, data_format=fmt), normal(*shape), normal(c))


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_bias_add_grad_op_and_its_gradient(fmt):
    dy = normal(2, 3, 4)
    axes = (0, 2) if fmt == "NCHW" else (0, 1)
    g = tf.Graph()
    with g.as_default():
        out = apply_op("BiasAddGrad", out_backprop=tf.constant(dy), data_format=fmt)
        assert out.shape.as_list() == [3 if fmt == "NCHW" else 4]
        ints = apply_op("BiasAddGrad", out_backprop=tf.constant(np.ones((5, 2), np.int8) * 30))
        with tf.Session() as s:
            got, gi = s.run([out, ints])
    np.testing.assert_allclose(got, dy.sum(axes))
    assert gi.dtype == np.int8
    np.testing.assert_array_equal(gi, [-106, -106])  # 150 wraps in int8, as in TF
    check(lambda d: apply_op("BiasAddGrad", out_backprop=d, data_format=fmt), dy)
    check(lambda d: apply_op("BiasAddGrad", out_backprop=d, data_format=fmt), dy,
          feed_shapes=[None])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(64, 28, 28, 32), (300, 1024), (4, 4096, 1)])
def test_large_nhwc_bias_add_grad_is_a_column_sum(dtype, shape):
    # the product-with-ones path: sums against float64 within float32 rounding, NaN and
    # infinities only in their own channels, a non-contiguous input, and the NCHW layout
    # of the same values (numpy's sum) agrees
    rng = np.random.default_rng(5)
    dy = rng.standard_normal(shape).astype(dtype)
    dy.reshape(-1, shape[-1])[7, 0] = np.nan
    if shape[-1] > 2:
        dy.reshape(-1, shape[-1])[3, 2] = np.inf
    want = dy.astype(np.float64).reshape(-1, shape[-1]).sum(0)
    g = tf.Graph()
    with g.as_default():
        t = tf.constant(dy)
        outs = [apply_op("BiasAddGrad", out_backprop=t),
                apply_op("BiasAddGrad", out_backprop=tf.transpose(tf.transpose(t)[::1])),
                apply_op("BiasAddGrad", out_backprop=tf.transpose(
                    t, [0, len(shape) - 1] + list(range(1, len(shape) - 1))),
                    data_format="NCHW") if len(shape) == 4 else tf.constant(want, dtype)]
        with tf.Session() as s:
            got = s.run(outs)
    for r in got:
        assert r.dtype == dtype and r.shape == (shape[-1],)
        np.testing.assert_allclose(r, want, rtol=1e-5 if dtype == np.float32 else 1e-12,
                                   atol=1e-2 if dtype == np.float32 else 1e-9)
        assert np.isnan(r[0]) and (shape[-1] <= 2 or r[2] == np.inf)


def test_l2_loss():
    check(tf.nn.l2_loss, normal(3, 2))


# ---------------------------------------------------------------------------------------
# Conv2D and its backprop ops
# ---------------------------------------------------------------------------------------
CONV_CASES = [
    # (padding, stride, dilation, data_format)
    ("SAME", 1, 1, "NHWC"), ("VALID", 1, 1, "NHWC"), ("SAME", 2, 1, "NHWC"),
    ("VALID", 2, 1, "NCHW"), ("SAME", 1, 2, "NCHW"), ("VALID", 1, 2, "NHWC"),
    ("SAME", 3, 1, "NCHW"), ([[0, 0], [1, 0], [0, 2], [0, 0]], 2, 1, "NHWC"),
    ([[0, 0], [0, 0], [2, 1], [1, 0]], 1, 1, "NCHW"),
]


def _conv_args(stride, dilation, fmt):
    if fmt == "NHWC":
        return [1, stride, stride, 1], [1, dilation, dilation, 1]
    return [1, 1, stride, stride], [1, 1, dilation, dilation]


@pytest.mark.parametrize("padding,stride,dilation,fmt", CONV_CASES)
def test_conv2d_gradients(padding, stride, dilation, fmt):
    strides, dil = _conv_args(stride, dilation, fmt)
    x = normal(2, 5, 6, 2) if fmt == "NHWC" else normal(2, 2, 5, 6)
    w = normal(3, 2, 2, 3)
    check(lambda x, w: tf.nn.conv2d(x, w, strides, padding, data_format=fmt, dilations=dil),
          x, w)


def test_conv2d_gradient_unknown_batch():
    check(lambda x, w: tf.nn.conv2d(x, w, [1, 2, 1, 1], "SAME"), normal(2, 4, 3, 1),
          normal(2, 2, 1, 2), feed_shapes=[[None, 4, 3, 1], [2, 2, 1, 2]])


@pytest.mark.parametrize("padding,stride,fmt", [("SAME", 2, "NHWC"), ("VALID", 1, "NCHW")])
def test_conv2d_backprop_ops_gradients(padding, stride, fmt):
    """Second derivatives: the backprop ops' own gradients."""
    strides, _ = _conv_args(stride, 1, fmt)
    xshape = [2, 4, 5, 2] if fmt == "NHWC" else [2, 2, 4, 5]
    x, w = normal(*xshape), normal(2, 3, 2, 3)
    g = tf.Graph()
    with g.as_default():
        yshape = tf.nn.conv2d(tf.zeros(xshape, tf.float64), tf.zeros([2, 3, 2, 3], tf.float64),
                              strides, padding, data_format=fmt).shape.as_list()
    dy = normal(*yshape)
    check(lambda w, dy: tf.nn.conv2d_backprop_input(xshape, w, dy, strides, padding,
                                                    data_format=fmt), w, dy)
    check(lambda x, dy: tf.nn.conv2d_backprop_filter(x, [2, 3, 2, 3], dy, strides, padding,
                                                     data_format=fmt), x, dy)


def np_conv_nhwc(x, w, stride, pads):
    (pt, pb), (pl, pr) = pads
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    n, h, wd, _ = xp.shape
    kh, kw, _, o = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, oh, ow, o))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
            out[:, i, j, :] = np.tensordot(patch, w, axes=([1, 2, 3], [0, 1, 2]))
    return out


def test_conv2d_backprop_values_are_adjoints():
    """<conv(x, w), dy> == <x, backprop_input(dy)> == <w, backprop_filter(dy)>."""
    x, w = normal(2, 5, 5, 3), normal(3, 3, 3, 2)
    y = np_conv_nhwc(x, w, 2, ((1, 1), (1, 1)))  # SAME for 5 with k=3, s=2
    dy = normal(*y.shape)
    g = tf.Graph()
    with g.as_default():
        yt = tf.nn.conv2d(x, w, [1, 2, 2, 1], "SAME")
        bi = tf.nn.conv2d_backprop_input([2, 5, 5, 3], w, dy, [1, 2, 2, 1], "SAME")
        bf = tf.nn.conv2d_backprop_filter(x, [3, 3, 3, 2], dy, [1, 2, 2, 1], "SAME")
        assert bi.shape.as_list() == [2, 5, 5, 3] and bf.shape.as_list() == [3, 3, 3, 2]
        assert bi.op.type == "Conv2DBackpropInput" and bf.op.type == "Conv2DBackpropFilter"
        with tf.Session() as s:
            yv, biv, bfv = s.run([yt, bi, bf])
    np.testing.assert_allclose(yv, y, atol=1e-10)
    inner = np.sum(y * dy)
    assert np.sum(x * biv) == pytest.approx(inner)
    assert np.sum(w * bfv) == pytest.approx(inner)


def test_conv2d_transpose_api():
    x = normal(1, 3, 3, 2)  # the "value": gradient-shaped input
    w = normal(3, 3, 4, 2)
    g = tf.Graph()
    with g.as_default():
        out = tf.nn.conv2d_transpose(x, w, [1, 6, 6, 4], [1, 2, 2, 1], padding="SAME")
        assert out.shape.as_list() == [1, 6, 6, 4]
        ref = tf.nn.conv2d_backprop_input([1, 6, 6, 4], w, x, [1, 2, 2, 1], "SAME")
        with pytest.raises(ValueError, match="input channels"):
            tf.nn.conv2d_transpose(x, normal(3, 3, 4, 5), [1, 6, 6, 4], [1, 2, 2, 1])
        with pytest.raises(ValueError, match="output channels"):
            tf.nn.conv2d_transpose(x, w, [1, 6, 6, 3], [1, 2, 2, 1])
        with tf.Session() as s:
            a, b = s.run([out, ref])
    np.testing.assert_allclose(a, b)
    assert a.dtype == np.float64


def test_conv2d_backprop_errors():
    g = tf.Graph()
    with g.as_default():
        dy = tf.placeholder(tf.float32, None)
        bi = tf.nn.conv2d_backprop_input([1, 4, 4, 1], np.ones((2, 2, 1, 1), np.float32), dy,
                                         [1, 1, 1, 1], "VALID")
        bf = tf.nn.conv2d_backprop_filter(np.ones((1, 4, 4, 2), np.float32), [2, 2, 1, 1], dy,
                                          [1, 1, 1, 1], "VALID")
        with tf.Session() as s:
            with pytest.raises(errors.InvalidArgumentError, match="out_backprop doesn't match"):
                s.run(bi, {dy: np.ones((1, 4, 4, 1))})
            with pytest.raises(errors.InvalidArgumentError, match="same depth"):
                s.run(bf, {dy: np.ones((1, 3, 3, 1))})
        with pytest.raises(ValueError, match="rank 4"):
            tf.nn.conv2d_backprop_input([1, 4, 4], np.ones((2, 2, 1, 1), np.float32),
                                        np.ones((1, 3, 3, 1), np.float32), [1, 1, 1, 1],
                                        "VALID")


# ---------------------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------------------
POOL_CASES = [
    # (padding, ksize, stride, data_format)
    ("VALID", 2, 2, "NHWC"), ("SAME", 2, 2, "NCHW"), ("SAME", 3, 2, "NHWC"),
    ("VALID", 3, 1, "NCHW"), ("SAME", 3, 1, "NHWC"), ("VALID", 2, 1, "NHWC"),
]


def _pool_args(k, s, fmt):
    if fmt == "NHWC":
        return [1, k, k, 1], [1, s, s, 1], [2, 5, 4, 2]
    return [1, 1, k, k], [1, 1, s, s], [2, 2, 5, 4]


@pytest.mark.parametrize("padding,k,s,fmt", POOL_CASES)
def test_max_pool_gradient(padding, k, s, fmt):
    ks, ss, shape = _pool_args(k, s, fmt)
    check(lambda x: tf.nn.max_pool(x, ks, ss, padding, data_format=fmt), distinct(shape))


@pytest.mark.parametrize("padding,k,s,fmt", POOL_CASES)
def test_avg_pool_gradient(padding, k, s, fmt):
    ks, ss, shape = _pool_args(k, s, fmt)
    check(lambda x: tf.nn.avg_pool(x, ks, ss, padding, data_format=fmt), normal(*shape))


@pytest.mark.parametrize("padding,k,s,fmt", POOL_CASES[1:3])
def test_pool_second_derivatives(padding, k, s, fmt):
    ks, ss, _ = _pool_args(k, s, fmt)
    shape = [1, 4, 3, 2] if fmt == "NHWC" else [1, 2, 4, 3]
    x = distinct(shape)

    def max_first(x):
        y = tf.nn.max_pool(x, ks, ss, padding, data_format=fmt)
        return tf.gradients(y * y, x)[0]  # MaxPoolGrad, differentiated: MaxPoolGradGrad

    def max_second(x):
        return tf.gradients(tf.reduce_sum(max_first(x) * x), x)[0]  # MaxPoolGradGrad's grad

    check(max_first, x)
    check(max_second, x)
    g = tf.Graph()
    with g.as_default():
        yshape = tf.nn.avg_pool(tf.zeros(shape, tf.float64), ks, ss, padding,
                                data_format=fmt).shape.as_list()
    check(lambda dy: apply_op("AvgPoolGrad", orig_input_shape=shape, grad=dy, ksize=ks,
                              strides=ss, padding=padding, data_format=fmt), normal(*yshape))


def test_max_pool_grad_ties_go_to_first_max():
    """Equal maxima: the first in row-major window order gets the gradient (TF CPU)."""
    x = np.array([[1.0, 3.0, 3.0, 0.0],
                  [3.0, 2.0, 1.0, 3.0],
                  [0.0, 0.0, 5.0, 5.0]]).reshape(1, 3, 4, 1)
    g = tf.Graph()
    with g.as_default():
        xt = tf.constant(x)
        y = tf.nn.max_pool(xt, [1, 2, 2, 1], [1, 1, 1, 1], "VALID")
        dy = np.arange(1.0, 7.0).reshape(1, 2, 3, 1)
        gx = tf.gradients(y, xt, grad_ys=dy)[0]
        assert gx.op.type == "MaxPoolGrad" and gx.shape.as_list() == [1, 3, 4, 1]
        with tf.Session() as s:
            got = s.run(gx).reshape(3, 4)
    # windows (row-major): [1,3/3,2] -> (0,1); [3,3/2,1] -> (0,1); [3,0/1,3] -> (0,2);
    # [3,2/0,0] -> (1,0); [2,1/0,5] -> (2,2); [1,3/5,5] -> (2,2)
    want = np.array([[0, 3, 3, 0], [4, 0, 0, 0], [0, 0, 11, 0]], np.float64)
    np.testing.assert_array_equal(got, want)


def test_max_pool_grad_int_and_half():
    for dt in (np.int32, np.float16):
        x = np.array([[1, 4], [2, 3]], dt).reshape(1, 2, 2, 1)
        g = tf.Graph()
        with g.as_default():
            y = apply_op("MaxPoolGrad", orig_input=tf.constant(x),
                         orig_output=tf.constant(np.array([[[[4]]]], dt)),
                         grad=tf.constant(np.array([[[[7]]]], dt)), ksize=[1, 2, 2, 1],
                         strides=[1, 2, 2, 1], padding="VALID")
            with tf.Session() as s:
                got = s.run(y)
        assert got.dtype == dt
        np.testing.assert_array_equal(got.reshape(2, 2), [[0, 7], [0, 0]])


def test_avg_pool_grad_same_counts_only_valid_elements():
    g = tf.Graph()
    with g.as_default():
        y = apply_op("AvgPoolGrad", orig_input_shape=[1, 3, 1, 1],
                     grad=np.ones((1, 2, 1, 1), np.float32), ksize=[1, 2, 1, 1],
                     strides=[1, 2, 1, 1], padding="SAME")
        assert y.shape.as_list() == [1, 3, 1, 1]
        with tf.Session() as s:
            got = s.run(y)
    # windows [0, 1] (2 valid) and [2] (1 valid; the pad is not counted)
    np.testing.assert_allclose(got.reshape(-1), [0.5, 0.5, 1.0])


def test_pool_grad_errors():
    g = tf.Graph()
    with g.as_default():
        dy = tf.placeholder(tf.float32, None)
        mg = apply_op("MaxPoolGrad", orig_input=np.ones((1, 4, 4, 1), np.float32),
                      orig_output=np.ones((1, 2, 2, 1), np.float32), grad=dy,
                      ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
        ag = apply_op("AvgPoolGrad", orig_input_shape=[1, 4, 4, 1], grad=dy,
                      ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
        with tf.Session() as s:
            for t in (mg, ag):
                with pytest.raises(errors.InvalidArgumentError, match="shape"):
                    s.run(t, {dy: np.ones((1, 3, 3, 1))})


# ---------------------------------------------------------------------------------------
# Print, Assert, random ops
# ---------------------------------------------------------------------------------------
def test_print_passes_gradient_to_first_input():
    check(lambda x: tf.Print(x, [x, tf.constant(3)], "dbg") * 3.0, normal(2, 2))


def test_random_ops_and_assert_not_differentiable():
    from flowrt.plugins.kernels.standard import ks

    for op in ("RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomShuffle",
               "Multinomial", "RandomGamma", "Assert"):
        assert op in ks.gradients and ks.gradients[op] is None, op
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
        assert tf.gradients(tf.random_shuffle(x), x) == [None]
        assert tf.gradients(tf.random_gamma([3], x), x) == [None]


# ---------------------------------------------------------------------------------------
# end to end: a two-layer softmax classifier
# ---------------------------------------------------------------------------------------
def test_two_layer_net_weight_gradients_match_numerical():
    r = np.random.default_rng(8)  # no hidden pre-activation within 0.09 of ReLU's kink
    x = r.standard_normal((5, 4))
    w1, b1 = r.standard_normal((4, 6)) * 0.5, r.standard_normal(6) * 0.1
    w2, b2 = r.standard_normal((6, 3)) * 0.5, r.standard_normal(3) * 0.1
    assert np.abs(x @ w1 + b1).min() > 0.05
    labels = np.eye(3)[[0, 2, 1, 1, 0]]

    def loss_of(w1, b1, w2, b2):
        h = tf.nn.relu(tf.nn.bias_add(tf.matmul(tf.constant(x), w1), b1))
        logits = tf.matmul(h, w2) + b2
        xent = tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)
        return tf.reduce_mean(xent) + 0.01 * tf.nn.l2_loss(w1)

    check(loss_of, w1, b1, w2, b2)


def test_two_layer_net_sgd_reduces_loss():
    xs = normal(32, 4)
    ys = (xs[:, 0] + xs[:, 1] > 0).astype(np.int64)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 4])
        y = tf.placeholder(tf.int64, [None])
        w1 = tf.Variable(RNG.standard_normal((4, 8)).astype(np.float32) * 0.5)
        w2 = tf.Variable(RNG.standard_normal((8, 2)).astype(np.float32) * 0.5)
        h = tf.nn.relu(tf.matmul(x, w1))
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=tf.matmul(h, w2)))
        g1, g2 = tf.gradients(loss, [w1, w2])
        step = tf.group(tf.assign_sub(w1, 0.5 * g1), tf.assign_sub(w2, 0.5 * g2))
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            first = s.run(loss, {x: xs, y: ys})
            for _ in range(30):
                s.run(step, {x: xs, y: ys})
            last = s.run(loss, {x: xs, y: ys})
    assert last < 0.5 * first


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool_grad_goes_to_the_first_maximum_of_each_window(fmt, dtype):
    """2x2 windows at stride 2, with many ties: each window's gradient goes to its first
    maximum in row-major order (TF CPU's choice), in both data formats."""
    rng = np.random.default_rng(3)
    x = rng.integers(0, 3, (2, 4, 6, 3)).astype(dtype)  # many ties
    dy = rng.standard_normal((2, 2, 3, 3)).astype(dtype)
    if fmt == "NCHW":
        x, dy = x.transpose(0, 3, 1, 2), dy.transpose(0, 3, 1, 2)
    ks = [1, 1, 2, 2] if fmt == "NCHW" else [1, 2, 2, 1]
    with tf.Graph().as_default():
        xt = tf.constant(x)
        yt = tf.nn.max_pool(xt, ks, ks, "VALID", data_format=fmt)
        grad = tf.gradients(yt, xt, grad_ys=tf.constant(dy))[0]
        with tf.Session() as s:
            got = s.run(grad)
    xn = x.transpose(0, 2, 3, 1) if fmt == "NCHW" else x
    dn = dy.transpose(0, 2, 3, 1) if fmt == "NCHW" else dy
    want = np.zeros_like(xn)
    for b in range(2):
        for i in range(2):
            for j in range(3):
                for ch in range(3):
                    win = xn[b, 2 * i:2 * i + 2, 2 * j:2 * j + 2, ch].reshape(-1)
                    k = int(np.argmax(win))  # first maximum, row-major
                    want[b, 2 * i + k // 2, 2 * j + k % 2, ch] += dn[b, i, j, ch]
    if fmt == "NCHW":
        want = want.transpose(0, 3, 1, 2)
    np.testing.assert_array_equal(got, want)


def _max_pool_grad_reference(x: np.ndarray, dy: np.ndarray, kh: int, kw: int) -> np.ndarray:
    """TF CPU's MaxPoolGrad for VALID windows at stride = window (NHWC): a window's
    gradient goes to its first element, or to any later one strictly greater than the
    best so far, scanning row-major (so a NaN is never chosen after the first)."""
    dx = np.zeros_like(x)
    n, oh, ow, c = dy.shape
    for b, i, j, ch in np.ndindex(n, oh, ow, c):
        win = x[b, i * kh:(i + 1) * kh, j * kw:(j + 1) * kw, ch].reshape(-1)
        best, k = win[0], 0
        for o in range(1, win.size):
            if win[o] > best:
                best, k = win[o], o
        dx[b, i * kh + k // kw, j * kw + k % kw, ch] += dy[b, i, j, ch]
    return dx


@settings(max_examples=40, deadline=None)
@given(kh=st.integers(1, 3), kw=st.integers(1, 3), extra_h=st.integers(0, 2),
       extra_w=st.integers(0, 2), nans=st.sampled_from(["none", "later", "first"]),
       dtype=st.sampled_from([np.float32, np.float16, np.float64]),
       seed=st.integers(0, 2 ** 16))
def test_max_pool_grad_tiled_windows_match_tf_rule(kh, kw, extra_h, extra_w, nans, dtype,
                                                   seed):
    """Windows that tile the input (stride = window, VALID) take a vectorised path: it
    must give TF's routing exactly, with ties, NaNs (a window starting with NaN keeps
    it; a later NaN is skipped) and rows/columns no window reaches (zero gradient)."""
    rng = np.random.default_rng(seed)
    oh, ow = 2, 3
    extra_h, extra_w = extra_h % kh, extra_w % kw  # fewer than a window: unreached
    x = rng.integers(0, 3, (2, oh * kh + extra_h, ow * kw + extra_w, 2)).astype(dtype)
    if nans != "none":
        flat = x.reshape(-1)
        flat[rng.choice(flat.size, 4, replace=False)] = np.nan
        if nans == "first":
            x[0, 0, 0, 0] = np.nan
    dy = rng.standard_normal((2, oh, ow, 2)).astype(dtype)
    with tf.Graph().as_default():
        g = apply_op("MaxPoolGrad", orig_input=tf.constant(x),
                     orig_output=tf.constant(np.zeros_like(dy)), grad=tf.constant(dy),
                     ksize=[1, kh, kw, 1], strides=[1, kh, kw, 1], padding="VALID")
        with tf.Session() as s:
            got = s.run(g)
    np.testing.assert_array_equal(got, _max_pool_grad_reference(x, dy, kh, kw))


@pytest.mark.parametrize("op_type", ["ReluGrad", "Relu6Grad"])
def test_relu_grad_multiplies_by_the_mask_like_tf(op_type):
    """TF computes ``gradients * (features > 0)``: a NaN or infinite gradient where the
    unit is off gives NaN (0 * NaN), not 0; a finite one gives 0 there."""
    g = np.array([np.nan, np.inf, 1.0, np.nan, 3.0], np.float32)
    f = np.array([-1.0, -1.0, -1.0, 2.0, 2.0], np.float32)
    with tf.Graph().as_default():
        out = apply_op(op_type, gradients=tf.constant(g), features=tf.constant(f))
        with tf.Session() as s:
            got = s.run(out)
    np.testing.assert_array_equal(got, np.array([np.nan, np.nan, 0.0, np.nan, 3.0],
                                                np.float32))
