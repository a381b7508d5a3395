"""Tests of the nn ops: activations, softmax, cross entropies, BiasAdd, L2Loss, Conv2D,
pooling and the composite tf.nn functions, against numpy reference implementations."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import flowrt as tf
from flowrt import errors

RNG = np.random.default_rng(1234)


def run(build, feed=None):
    """Build with ``build()`` in a fresh graph and run what it returns."""
    g = tf.Graph()
    with g.as_default():
        out = build()
    with tf.Session(graph=g) as s:
        if callable(feed):
            feed = feed()
        return s.run(out, feed)


def eval1(fn, *arrays, **kw):
    """Run ``fn`` on placeholders fed with ``arrays``; returns (value, static shape)."""
    g = tf.Graph()
    with g.as_default():
        phs = [tf.placeholder(tf.as_dtype(a.dtype), a.shape) for a in arrays]
        out = fn(*phs, **kw)
    with tf.Session(graph=g) as s:
        return s.run(out, dict(zip(phs, arrays))), out


# ---------------------------------------------------------------------------------------
# numpy references
# ---------------------------------------------------------------------------------------
def np_softmax(x, axis=-1):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x, axis=-1):
    x = x.astype(np.float64)
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def same_pads(n, k, s):
    out = -(-n // s)
    need = max(0, (out - 1) * s + k - n)
    return out, need // 2, need - need // 2


def ref_conv2d(x, w, strides, padding, dilations=(1, 1)):
    """Plain-loop NHWC convolution (TF semantics, SAME puts the extra pad at the end)."""
    n, h, wd, c = x.shape
    kh, kw, _, co = w.shape
    sh, sw = strides
    dh, dw = dilations
    ekh, ekw = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    if padding == "SAME":
        oh, pt, _ = same_pads(h, ekh, sh)
        ow, pl, _ = same_pads(wd, ekw, sw)
    elif padding == "VALID":
        oh, ow, pt, pl = (h - ekh) // sh + 1, (wd - ekw) // sw + 1, 0, 0
    else:  # explicit ((pt, pb), (pl, pr))
        (pt, pb), (pl, pr) = padding
        oh, ow = (h + pt + pb - ekh) // sh + 1, (wd + pl + pr - ekw) // sw + 1
    out = np.zeros((n, oh, ow, co), np.float64)
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                for di in range(kh):
                    for dj in range(kw):
                        r, q = i * sh + di * dh - pt, j * sw + dj * dw - pl
                        if 0 <= r < h and 0 <= q < wd:
                            out[b, i, j] += x[b, r, q].astype(np.float64) @ w[di, dj]
    return out


def ref_pool(x, k, s, padding, mode):
    n, h, wd, c = x.shape
    if padding == "SAME":
        oh, pt, _ = same_pads(h, k[0], s[0])
        ow, pl, _ = same_pads(wd, k[1], s[1])
    else:
        oh, ow, pt, pl = (h - k[0]) // s[0] + 1, (wd - k[1]) // s[1] + 1, 0, 0
    out = np.zeros((n, oh, ow, c), np.float64)
    for i in range(oh):
        for j in range(ow):
            r0, q0 = i * s[0] - pt, j * s[1] - pl
            win = x[:, max(r0, 0):min(r0 + k[0], h), max(q0, 0):min(q0 + k[1], wd), :]
            win = win.astype(np.float64)
            out[:, i, j] = win.max(axis=(1, 2)) if mode == "max" else win.mean(axis=(1, 2))
    return out


# ---------------------------------------------------------------------------------------
# activations
# ---------------------------------------------------------------------------------------
SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
ACTS = {
    "relu": ("relu", lambda x: np.maximum(x, 0)),
    "relu6": ("relu6", lambda x: np.minimum(np.maximum(x, 0), 6)),
    "elu": ("elu", lambda x: np.where(x < 0, np.expm1(np.minimum(x, 0)), x)),
    "selu": ("selu", lambda x: SELU_S * np.where(x < 0, SELU_A * np.expm1(np.minimum(x, 0)),
                                                 x)),
    "softplus": ("softplus", lambda x: np.logaddexp(0, x)),
    "softsign": ("softsign", lambda x: x / (1 + np.abs(x))),
    "leaky_relu": ("leaky_relu", lambda x: np.where(x > 0, x, 0.2 * x)),
}


@pytest.mark.parametrize("name", sorted(ACTS))
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_activation_values_and_dtype(name, dtype):
    api, ref = ACTS[name]
    x = np.array([[-50.0, -3.5, -1.0, -0.25, 0.0], [0.25, 1.0, 5.0, 7.5, 60.0]], dtype)
    got, t = eval1(getattr(tf.nn, api), x)
    assert got.dtype == dtype
    assert t.dtype == tf.as_dtype(dtype)
    assert t.shape.as_list() == [2, 5]
    tol = 2e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(got.astype(np.float64), ref(x.astype(np.float64)),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.float64])
def test_relu_relu6_integer_types(dtype):
    x = np.array([0, 1, 3, 6, 7, 100], dtype)
    if np.issubdtype(dtype, np.signedinteger) or dtype == np.float64:
        x = np.concatenate([np.array([-5, -1], dtype), x])
    (r, r6), _ = eval1(lambda p: [tf.nn.relu(p), tf.nn.relu6(p)], x)
    assert r.dtype == dtype and r6.dtype == dtype
    np.testing.assert_array_equal(r, np.maximum(x, 0))
    np.testing.assert_array_equal(r6, np.clip(x, 0, 6))


def test_activation_static_shape_unknown_dims():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        for f in (tf.nn.relu, tf.nn.relu6, tf.nn.elu, tf.nn.selu, tf.nn.softplus,
                  tf.nn.softsign, tf.nn.leaky_relu, tf.nn.softmax, tf.nn.log_softmax):
            assert f(x).shape.as_list() == [None, 3]
        assert tf.nn.relu(tf.placeholder(tf.float32)).shape.ndims is None


def test_activation_type_errors():
    with tf.Graph().as_default():
        with pytest.raises(TypeError):
            tf.nn.elu(tf.constant([1, 2]))
        with pytest.raises(TypeError):
            tf.nn.softplus(tf.constant([1, 2]))
        with pytest.raises(TypeError):
            tf.nn.relu(tf.constant([True]))
        with pytest.raises(TypeError):
            tf.nn.softmax(tf.constant([1, 2]))


def test_leaky_relu_alpha_and_int_input():
    x = np.array([-4.0, -1.0, 0.0, 2.0], np.float32)
    got, t = eval1(lambda p: tf.nn.leaky_relu(p, alpha=0.5), x)
    np.testing.assert_allclose(got, [-2.0, -0.5, 0.0, 2.0])
    assert t.op.get_attr("alpha") == 0.5
    got = run(lambda: tf.nn.leaky_relu(tf.constant([-4, 2])))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [-0.8, 2.0], rtol=1e-6)


def test_crelu():
    x = np.array([[-1.0, 2.0]], np.float32)
    got, t = eval1(tf.nn.crelu, x)
    np.testing.assert_array_equal(got, [[0.0, 2.0, 1.0, 0.0]])
    assert t.shape.as_list() == [1, 4]


finite_floats = st.floats(-1e4, 1e4, allow_nan=False, width=32)


@settings(max_examples=30, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                  elements=finite_floats),
       st.sampled_from(sorted(ACTS)))
def test_activation_property(x, name):
    api, ref = ACTS[name]
    got, _ = eval1(getattr(tf.nn, api), x)
    assert got.shape == x.shape and got.dtype == np.float32
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------
# softmax / log_softmax
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_softmax_log_softmax_values(dtype):
    x = RNG.normal(size=(4, 6)).astype(dtype)
    (sm, lsm), _ = eval1(lambda p: [tf.nn.softmax(p), tf.nn.log_softmax(p)], x)
    assert sm.dtype == dtype and lsm.dtype == dtype
    tol = 2e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(sm, np_softmax(x), rtol=tol, atol=tol)
    np.testing.assert_allclose(lsm, np_log_softmax(x), rtol=tol, atol=tol)


def test_softmax_axis_and_dim():
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    (a0, a1, d1, l0), t = eval1(lambda p: [tf.nn.softmax(p, axis=0), tf.nn.softmax(p, 1),
                                           tf.nn.softmax(p, dim=1),
                                           tf.nn.log_softmax(p, axis=-3)], x)
    np.testing.assert_allclose(a0, np_softmax(x, 0), rtol=1e-5)
    np.testing.assert_allclose(a1, np_softmax(x, 1), rtol=1e-5)
    np.testing.assert_allclose(d1, np_softmax(x, 1), rtol=1e-5)
    np.testing.assert_allclose(l0, np_log_softmax(x, 0), rtol=1e-5, atol=1e-6)
    assert [o.shape.as_list() for o in t] == [[2, 3, 4]] * 4
    with tf.Graph().as_default():
        with pytest.raises(errors.InvalidArgumentError, match="must be in the range"):
            tf.nn.softmax(tf.constant(x), axis=3)
        with pytest.raises(ValueError):
            tf.nn.softmax(tf.placeholder(tf.float32, [2, 2]), axis=0, dim=0)


def test_softmax_rank0_is_build_error():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="rank"):
            tf.nn.softmax(tf.constant(1.0))


def test_softmax_empty_and_infinite():
    x = np.zeros((0, 3), np.float32)
    got, _ = eval1(tf.nn.softmax, x)
    assert got.shape == (0, 3)
    x = np.array([[-np.inf, 0.0, 0.0]], np.float32)
    got, _ = eval1(tf.nn.softmax, x)
    np.testing.assert_allclose(got, [[0.0, 0.5, 0.5]])


@settings(max_examples=30, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6),
                  elements=st.floats(-3e4, 3e4, allow_nan=False, width=32)))
def test_softmax_property_huge_logits_stay_finite(x):
    (sm, lsm), _ = eval1(lambda p: [tf.nn.softmax(p), tf.nn.log_softmax(p)], x)
    assert np.all(np.isfinite(sm)) and np.all(np.isfinite(lsm))
    np.testing.assert_allclose(sm.sum(axis=-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(sm, np_softmax(x), atol=1e-6)
    np.testing.assert_allclose(lsm, np_log_softmax(x), rtol=1e-5, atol=1e-3)


# ---------------------------------------------------------------------------------------
# BiasAdd, L2Loss, xw_plus_b, relu_layer
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.complex64])
def test_bias_add_nhwc(dtype):
    x = (RNG.normal(size=(2, 3, 4)) * 10).astype(dtype)
    b = (RNG.normal(size=(4,)) * 10).astype(dtype)
    got, t = eval1(tf.nn.bias_add, x, b)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, x + b, rtol=1e-6)
    assert t.shape.as_list() == [2, 3, 4]


def test_bias_add_nchw():
    x = RNG.normal(size=(2, 3, 4, 5)).astype(np.float32)
    b = RNG.normal(size=(3,)).astype(np.float32)
    got, t = eval1(lambda p, q: tf.nn.bias_add(p, q, data_format="NCHW"), x, b)
    np.testing.assert_allclose(got, x + b[None, :, None, None], rtol=1e-6)
    assert t.op.get_attr("data_format") == b"NCHW"
    assert t.shape.as_list() == [2, 3, 4, 5]


def test_bias_add_build_errors():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        with pytest.raises(ValueError, match="Dimensions must be equal"):
            tf.nn.bias_add(x, tf.constant([1.0, 2.0]))
        with pytest.raises(ValueError, match="rank 1"):
            tf.nn.bias_add(x, tf.constant([[1.0, 2.0, 3.0]]))
        with pytest.raises(ValueError, match="at least rank 2"):
            tf.nn.bias_add(tf.constant([1.0, 2.0, 3.0]), tf.constant([1.0, 2.0, 3.0]))
        with pytest.raises(ValueError, match="data_format"):
            tf.nn.bias_add(x, tf.constant([1.0, 2.0, 3.0]), data_format="HWC")
        with pytest.raises(ValueError, match="requested dtype float32"):
            tf.nn.bias_add(x, tf.constant([1, 2, 3]))  # as TF: convert_to_tensor's error
        y = tf.nn.bias_add(tf.placeholder(tf.float32, [None, None]),
                           tf.placeholder(tf.float32, [5]))
        assert y.shape.as_list() == [None, 5]


def test_bias_add_runtime_mismatch():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32)
        b = tf.placeholder(tf.float32)
        y = tf.nn.bias_add(x, b)
    with tf.Session(graph=g) as s:
        with pytest.raises(errors.InvalidArgumentError, match="biases"):
            s.run(y, {x: np.ones((2, 3), np.float32), b: np.ones(2, np.float32)})


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_l2_loss(dtype):
    x = RNG.normal(size=(3, 4)).astype(dtype)
    got, t = eval1(tf.nn.l2_loss, x)
    assert got.dtype == dtype and np.shape(got) == ()
    assert t.shape.as_list() == []
    np.testing.assert_allclose(got, (x.astype(np.float64) ** 2).sum() / 2, rtol=2e-3)


def test_xw_plus_b_and_relu_layer():
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    w = RNG.normal(size=(4, 5)).astype(np.float32)
    b = RNG.normal(size=(5,)).astype(np.float32)
    (a, r), t = eval1(lambda p, q, c: [tf.nn.xw_plus_b(p, q, c), tf.nn.relu_layer(p, q, c)],
                      x, w, b)
    np.testing.assert_allclose(a, x @ w + b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r, np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-5)
    assert t[0].op.type == "BiasAdd" and t[1].op.type == "Relu"
    assert t[0].shape.as_list() == [3, 5]


# ---------------------------------------------------------------------------------------
# l2_normalize, moments, batch_normalization
# ---------------------------------------------------------------------------------------
def test_l2_normalize():
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    (a, b, c), t = eval1(lambda p: [tf.nn.l2_normalize(p, axis=1), tf.nn.l2_normalize(p, 0),
                                    tf.nn.l2_normalize(p)], x)
    np.testing.assert_allclose(a, x / np.linalg.norm(x, axis=1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(b, x / np.linalg.norm(x, axis=0, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(c, x / np.linalg.norm(x), rtol=1e-5)
    z, _ = eval1(lambda p: tf.nn.l2_normalize(p, axis=0), np.zeros(3, np.float32))
    np.testing.assert_array_equal(z, 0.0)
    assert t[0].shape.as_list() == [3, 4]


@pytest.mark.parametrize("keep", [False, True])
def test_moments(keep):
    x = RNG.normal(3.0, 2.0, size=(5, 4, 3)).astype(np.float32)
    (m, v), t = eval1(lambda p: tf.nn.moments(p, axes=[0, 1], keep_dims=keep), x)
    np.testing.assert_allclose(m, x.mean(axis=(0, 1), keepdims=keep), rtol=1e-5)
    np.testing.assert_allclose(v, x.var(axis=(0, 1), keepdims=keep), rtol=1e-4)
    assert t[0].shape.as_list() == ([1, 1, 3] if keep else [3])
    assert t[0].dtype == tf.float32


def test_moments_float16_computes_in_float32():
    x = (RNG.normal(size=(64,)) * 100 + 1000).astype(np.float16)
    (m, v), t = eval1(lambda p: tf.nn.moments(p, axes=[0]), x)
    assert m.dtype == np.float16 and v.dtype == np.float16
    assert t[0].dtype == tf.float16
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(float(m), x64.mean(), rtol=1e-3)
    np.testing.assert_allclose(float(v), x64.var(), rtol=1e-2)


def test_batch_normalization():
    x = RNG.normal(size=(4, 3)).astype(np.float32)
    mean, var = x.mean(0), x.var(0)
    off, sc = np.float32([1, 2, 3]), np.float32([2, 2, 0.5])
    got = run(lambda: tf.nn.batch_normalization(tf.constant(x), tf.constant(mean),
                                                tf.constant(var), tf.constant(off),
                                                tf.constant(sc), 1e-3))
    np.testing.assert_allclose(got, sc * (x - mean) / np.sqrt(var + 1e-3) + off, rtol=1e-5,
                               atol=1e-5)


# ---------------------------------------------------------------------------------------
# cross entropies
# ---------------------------------------------------------------------------------------
def np_xent(labels, logits, axis=-1):
    return -(labels * np_log_softmax(logits, axis)).sum(axis=axis)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_softmax_xent_v2(dtype):
    logits = RNG.normal(size=(4, 5)).astype(dtype)
    labels = np_softmax(RNG.normal(size=(4, 5))).astype(dtype)
    got, t = eval1(lambda a, b: tf.nn.softmax_cross_entropy_with_logits_v2(labels=a, logits=b),
                   labels, logits)
    assert got.dtype == dtype and t.shape.as_list() == [4]
    tol = 5e-3 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got, np_xent(labels, logits), rtol=tol, atol=tol)


def test_softmax_xent_raw_op_outputs():
    logits = RNG.normal(size=(3, 4)).astype(np.float32)
    labels = np.eye(4, dtype=np.float32)[[0, 3, 1]]
    g = tf.Graph()
    with g.as_default():
        from flowrt.graph import apply_op

        loss, backprop = apply_op("SoftmaxCrossEntropyWithLogits",
                                  features=tf.constant(logits), labels=tf.constant(labels))
        assert loss.shape.as_list() == [3] and backprop.shape.as_list() == [3, 4]
    with tf.Session(graph=g) as s:
        lv, bv = s.run([loss, backprop])
    np.testing.assert_allclose(lv, np_xent(labels, logits), rtol=1e-5)
    np.testing.assert_allclose(bv, np_softmax(logits) - labels, rtol=1e-5, atol=1e-6)


def test_softmax_xent_raw_op_shapes_and_broadcast():
    from flowrt.graph import apply_op
    logits = RNG.normal(size=(3, 4)).astype(np.float32)
    labels = np.float32([[0.25, 0.25, 0.5, 0.0]])  # broadcast over the batch (TF 1.15)
    g = tf.Graph()
    with g.as_default():
        loss, bp = apply_op("SoftmaxCrossEntropyWithLogits", features=tf.placeholder(
            tf.float32), labels=tf.placeholder(tf.float32, [None, 4]))
        assert loss.shape.as_list() == [None] and bp.shape.as_list() == [None, 4]
        with pytest.raises(ValueError, match="rank 2"):
            apply_op("SoftmaxCrossEntropyWithLogits", features=tf.placeholder(tf.float32, [3]),
                     labels=tf.placeholder(tf.float32, [3]))
        bl, bb = apply_op("SoftmaxCrossEntropyWithLogits", features=tf.constant(logits),
                          labels=tf.constant(labels))
        assert bl.shape.as_list() == [3] and bb.shape.as_list() == [3, 4]
    with tf.Session(graph=g) as s:
        lv, bv = s.run([bl, bb])
    full = np.broadcast_to(labels, (3, 4))
    np.testing.assert_allclose(lv, np_xent(full, logits), rtol=1e-5)
    np.testing.assert_allclose(bv, np_softmax(logits) - full, atol=1e-6)


def test_softmax_xent_axis_and_rank3():
    logits = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    labels = np_softmax(RNG.normal(size=(2, 3, 4)), axis=1).astype(np.float32)
    (a, b, v1), t = eval1(lambda p, q: [
        tf.nn.softmax_cross_entropy_with_logits_v2(labels=p, logits=q, axis=1),
        tf.nn.softmax_cross_entropy_with_logits_v2(labels=p, logits=q),
        tf.nn.softmax_cross_entropy_with_logits(labels=p, logits=q, dim=1)], labels, logits)
    np.testing.assert_allclose(a, np_xent(labels, logits, 1), rtol=1e-5)
    np.testing.assert_allclose(b, np_xent(labels, logits, -1), rtol=1e-5)
    np.testing.assert_allclose(v1, np_xent(labels, logits, 1), rtol=1e-5)
    assert t[0].shape.as_list() == [2, 4] and t[1].shape.as_list() == [2, 3]


@pytest.mark.parametrize("shape", [[None, None, None], None])
def test_softmax_xent_dynamic_shapes(shape):
    logits = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    labels = np_softmax(RNG.normal(size=(2, 3, 4))).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        pl = tf.placeholder(tf.float32, shape)
        pz = tf.placeholder(tf.float32, shape)
        loss = tf.nn.softmax_cross_entropy_with_logits_v2(labels=pz, logits=pl)
        assert loss.shape.as_list() == [None, None] if shape else loss.shape.ndims is None
        sl = tf.placeholder(tf.int64, None if shape is None else [None, None])
        sparse = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=sl, logits=pl)
    with tf.Session(graph=g) as s:
        ids = np.array([[0, 1, 3], [2, 2, 0]], np.int64)
        got, sp = s.run([loss, sparse], {pl: logits, pz: labels, sl: ids})
    np.testing.assert_allclose(got, np_xent(labels, logits), rtol=1e-5)
    want = -np.take_along_axis(np_log_softmax(logits), ids[..., None], -1)[..., 0]
    np.testing.assert_allclose(sp, want, rtol=1e-5)


def test_softmax_xent_v1_arguments():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="named arguments"):
            tf.nn.softmax_cross_entropy_with_logits(tf.constant([[1.0]]), tf.constant([[1.0]]))
        with pytest.raises(ValueError, match="Both labels and logits"):
            tf.nn.softmax_cross_entropy_with_logits(labels=tf.constant([[1.0]]))
        with pytest.raises(ValueError):
            tf.nn.softmax_cross_entropy_with_logits_v2(labels=tf.constant([[1.0, 0.0]]),
                                                       logits=tf.constant([[1.0, 0, 0]]))


@pytest.mark.parametrize("ltype", [np.int32, np.int64])
def test_sparse_softmax_xent(ltype):
    logits = RNG.normal(size=(4, 5)).astype(np.float32)
    labels = np.array([0, 4, 2, 2], ltype)
    got, t = eval1(lambda a, b: tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=a, logits=b), labels, logits)
    want = -np_log_softmax(logits)[np.arange(4), labels]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert got.dtype == np.float32 and t.shape.as_list() == [4]
    assert t.op.get_attr("Tlabels") == tf.as_dtype(ltype)


def test_sparse_softmax_xent_rank3_and_float16():
    logits = RNG.normal(size=(2, 3, 5)).astype(np.float16)
    labels = np.array([[0, 1, 4], [3, 3, 2]], np.int32)
    got, t = eval1(lambda a, b: tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=a, logits=b), labels, logits)
    lsm = np_log_softmax(logits.astype(np.float32))
    want = -np.take_along_axis(lsm, labels[..., None], axis=-1)[..., 0]
    assert got.dtype == np.float16 and t.shape.as_list() == [2, 3]
    np.testing.assert_allclose(got, want, rtol=3e-3, atol=3e-3)


def test_sparse_softmax_xent_bad_label_runtime_error():
    g = tf.Graph()
    with g.as_default():
        lab = tf.placeholder(tf.int32, [None])
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=lab, logits=tf.constant(np.zeros((2, 5), np.float32)))
    with tf.Session(graph=g) as s:
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"Received a label value of 7 which is outside the valid "
                                 r"range of \[0, 5\)"):
            s.run(loss, {lab: np.array([1, 7], np.int32)})
        with pytest.raises(errors.InvalidArgumentError, match="label value of -1"):
            s.run(loss, {lab: np.array([-1, 0], np.int32)})
        np.testing.assert_allclose(s.run(loss, {lab: np.array([1, 4], np.int32)}),
                                   [np.log(5)] * 2, rtol=1e-6)


def test_sparse_softmax_xent_build_errors():
    with tf.Graph().as_default():
        logits = tf.placeholder(tf.float32, [2, 5])
        with pytest.raises(ValueError, match="Rank mismatch"):
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.constant([[1, 2]]),
                                                           logits=logits)
        with pytest.raises(ValueError, match="Shape mismatch|Dimensions must be equal"):
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.constant([1, 2, 3]),
                                                           logits=logits)
        with pytest.raises(TypeError):
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.constant([1.0, 2.0]),
                                                           logits=logits)


def np_sigmoid_xent(z, x):
    return np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))


def test_sigmoid_xent_values_and_errors():
    x = np.array([[-100.0, -2.0, 0.0, 3.0, 100.0]], np.float32)
    z = np.array([[0.0, 1.0, 0.5, 0.0, 1.0]], np.float32)
    got, t = eval1(lambda a, b: tf.nn.sigmoid_cross_entropy_with_logits(labels=a, logits=b),
                   z, x)
    # a GPU differs by a few ulps and flushes float32 subnormals (3.8e-44 here) to zero
    np.testing.assert_allclose(got, np_sigmoid_xent(z, x), rtol=1e-5,
                               atol=float(np.finfo(np.float32).tiny))
    assert np.all(np.isfinite(got)) and t.shape.as_list() == [1, 5]
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="same shape"):
            tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.constant([1.0, 0.0]),
                                                    logits=tf.constant([1.0, 2.0, 3.0]))
        with pytest.raises(ValueError, match="named arguments"):
            tf.nn.sigmoid_cross_entropy_with_logits(tf.constant([1.0]), tf.constant([1.0]))


def test_weighted_cross_entropy():
    x = np.array([-3.0, 0.5, 4.0], np.float32)
    z = np.array([1.0, 0.0, 1.0], np.float32)
    got = run(lambda: tf.nn.weighted_cross_entropy_with_logits(tf.constant(z), tf.constant(x),
                                                               2.0))
    sig = 1 / (1 + np.exp(-x.astype(np.float64)))
    want = -(2.0 * z * np.log(sig) + (1 - z) * np.log(1 - sig))
    np.testing.assert_allclose(got, want, rtol=1e-5)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6),
       st.floats(1.0, 1e4), st.sampled_from([np.float32, np.float64]), st.integers(0, 2**31))
def test_cross_entropy_property_huge_logits(batch, classes, scale, dtype, seed):
    r = np.random.default_rng(seed)
    logits = (r.normal(size=(batch, classes)) * scale).astype(dtype)
    labels = r.integers(0, classes, size=batch).astype(np.int64)
    onehot = np.eye(classes, dtype=dtype)[labels]
    zs = r.uniform(size=(batch, classes)).astype(dtype)
    (dense, sparse, sig), _ = eval1(lambda a, b, c, d: [
        tf.nn.softmax_cross_entropy_with_logits_v2(labels=a, logits=b),
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=c, logits=b),
        tf.nn.sigmoid_cross_entropy_with_logits(labels=d, logits=b)],
        onehot, logits, labels, zs)
    for v in (dense, sparse, sig):
        assert np.all(np.isfinite(v)) and v.dtype == dtype
    want = np_xent(onehot, logits)
    np.testing.assert_allclose(dense, want, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(sparse, want, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(sig, np_sigmoid_xent(zs.astype(np.float64),
                                                    logits.astype(np.float64)),
                               rtol=1e-4, atol=1e-3)
    assert np.all(dense >= -1e-5)


# ---------------------------------------------------------------------------------------
# dropout
# ---------------------------------------------------------------------------------------
def test_dropout_keep_prob_semantics():
    x = np.ones((200, 50), np.float32) * 3.0
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(3)
        y = tf.nn.dropout(tf.constant(x), keep_prob=0.25)
        assert y.shape.as_list() == [200, 50] and y.dtype == tf.float32
    with tf.Session(graph=g) as s:
        a, b = s.run(y), s.run(y)
    assert set(np.unique(a)) <= {0.0, 12.0}
    assert abs((a != 0).mean() - 0.25) < 0.02
    assert not np.array_equal(a, b)
    with tf.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(y), a)  # same graph seed: same sequence


def test_dropout_rate_noise_shape_and_errors():
    x = np.ones((100, 8), np.float32)
    got = run(lambda: tf.nn.dropout(tf.constant(x), rate=0.5, noise_shape=[100, 1], seed=2))
    assert set(np.unique(got)) <= {0.0, 2.0}
    assert np.all(got == got[:, :1])  # whole rows kept or dropped
    with tf.Graph().as_default():
        c = tf.constant(x)
        assert tf.nn.dropout(c, rate=0.0) is c
        with pytest.raises(ValueError, match="floating point"):
            tf.nn.dropout(tf.constant([1, 2]), 0.5)
        with pytest.raises(ValueError, match="range"):
            tf.nn.dropout(c, rate=1.0)
        with pytest.raises(ValueError, match="rate"):
            tf.nn.dropout(c)


def test_dropout_keep_prob_tensor():
    g = tf.Graph()
    with g.as_default():
        kp = tf.placeholder(tf.float32, [])
        y = tf.nn.dropout(tf.constant(np.ones((1000,), np.float32)), keep_prob=kp, seed=5)
    with tf.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(y, {kp: 1.0}), 1.0)
        v = s.run(y, {kp: 0.5})
        assert set(np.unique(v)) <= {0.0, 2.0}


# ---------------------------------------------------------------------------------------
# Conv2D
# ---------------------------------------------------------------------------------------
CONV_CASES = [
    # (in shape NHWC, filter shape, strides, padding, dilations)
    ((2, 7, 6, 3), (3, 3, 3, 4), (1, 1), "SAME", (1, 1)),
    ((2, 7, 6, 3), (3, 3, 3, 4), (2, 2), "SAME", (1, 1)),
    ((2, 7, 6, 3), (3, 2, 3, 4), (1, 1), "VALID", (1, 1)),
    ((2, 7, 6, 3), (3, 3, 3, 4), (2, 2), "VALID", (1, 1)),
    ((1, 8, 8, 2), (2, 2, 2, 3), (2, 1), "SAME", (1, 1)),
    ((1, 6, 6, 2), (4, 4, 2, 1), (3, 3), "SAME", (1, 1)),
    ((1, 9, 9, 2), (3, 3, 2, 2), (1, 1), "SAME", (2, 2)),
    ((1, 9, 9, 2), (3, 3, 2, 2), (1, 1), "VALID", (2, 3)),
]


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_vs_reference(case, fmt):
    ishape, fshape, (sh, sw), padding, (dh, dw) = case
    x = RNG.normal(size=ishape).astype(np.float32)
    w = RNG.normal(size=fshape).astype(np.float32)
    want = ref_conv2d(x, w, (sh, sw), padding, (dh, dw))
    if fmt == "NCHW":
        xin, strides, dil = x.transpose(0, 3, 1, 2), [1, 1, sh, sw], [1, 1, dh, dw]
    else:
        xin, strides, dil = x, [1, sh, sw, 1], [1, dh, dw, 1]
    got, t = eval1(lambda p, q: tf.nn.conv2d(p, q, strides, padding, data_format=fmt,
                                             dilations=dil), xin, w)
    if fmt == "NCHW":
        got = got.transpose(0, 2, 3, 1)
    assert got.dtype == np.float32
    assert list(got.shape) == list(want.shape)
    static = t.shape.as_list()
    assert static == ([want.shape[0], want.shape[3], want.shape[1], want.shape[2]]
                      if fmt == "NCHW" else list(want.shape))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-10), (np.float16, 3e-2),
                                       (np.int32, 0)])
def test_conv2d_dtypes(dtype, tol):
    x = (RNG.normal(size=(2, 5, 5, 2)) * 3).astype(dtype)
    w = (RNG.normal(size=(3, 3, 2, 3)) * 3).astype(dtype)
    got, t = eval1(lambda p, q: tf.nn.conv2d(p, q, [1, 1, 1, 1], "SAME"), x, w)
    assert got.dtype == dtype and t.dtype == tf.as_dtype(dtype)
    want = ref_conv2d(x.astype(np.float64), w.astype(np.float64), (1, 1), "SAME")
    if dtype == np.int32:
        np.testing.assert_array_equal(got, want.astype(np.int32))
    else:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10)


def test_conv2d_explicit_padding():
    x = RNG.normal(size=(1, 5, 4, 2)).astype(np.float32)
    w = RNG.normal(size=(3, 3, 2, 2)).astype(np.float32)
    pads = [[0, 0], [2, 1], [0, 3], [0, 0]]
    got, t = eval1(lambda p, q: tf.nn.conv2d(p, q, [1, 2, 1, 1], pads), x, w)
    want = ref_conv2d(x, w, (2, 1), ((2, 1), (0, 3)))
    assert t.op.get_attr("padding") == b"EXPLICIT"
    assert t.op.get_attr("explicit_paddings") == [0, 0, 2, 1, 0, 3, 0, 0]
    assert t.shape.as_list() == list(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_conv2d_static_shapes_and_build_errors():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 32, None, 16])
        w = tf.placeholder(tf.float32, [3, 3, 16, 8])
        y = tf.nn.conv2d(x, w, [1, 2, 2, 1], "SAME")
        assert y.shape.as_list() == [None, 16, None, 8]
        y = tf.nn.conv2d(x, filters=w, strides=[1, 1, 1, 1], padding="VALID")
        assert y.shape.as_list() == [None, 30, None, 8]
        assert y.op.type == "Conv2D" and y.op.get_attr("strides") == [1, 1, 1, 1]
        with pytest.raises(ValueError, match="Dimensions must be equal"):
            tf.nn.conv2d(x, tf.placeholder(tf.float32, [3, 3, 4, 8]), [1, 1, 1, 1], "SAME")
        with pytest.raises(ValueError, match="rank 4"):
            tf.nn.conv2d(tf.placeholder(tf.float32, [32, 32, 16]), w, [1, 1, 1, 1], "SAME")
        with pytest.raises(ValueError, match="4 values"):
            tf.nn.conv2d(x, w, [1, 1, 1], "SAME")
        with pytest.raises(ValueError, match="Negative dimension size"):
            tf.nn.conv2d(tf.placeholder(tf.float32, [1, 2, 2, 16]), w, [1, 1, 1, 1], "VALID")
        with pytest.raises(ValueError, match="EXPLICIT"):
            tf.nn.conv2d(x, w, [1, 1, 1, 1], "EXPLICIT")
        with pytest.raises(ValueError):
            tf.nn.conv2d(x, w, [1, 1, 1, 1], "FULL")
        with pytest.raises(TypeError):
            tf.nn.conv2d(tf.placeholder(tf.int64, [1, 4, 4, 16]),
                         tf.placeholder(tf.int64, [3, 3, 16, 8]), [1, 1, 1, 1], "SAME")


def test_conv2d_runtime_errors():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32)
        w = tf.placeholder(tf.float32)
        y = tf.nn.conv2d(x, w, [1, 1, 1, 1], "SAME")
        z = tf.nn.conv2d(tf.placeholder(tf.float32, [1, 4, 4, 1]),
                         tf.placeholder(tf.float32, [1, 1, 1, 1]), [2, 1, 1, 1], "SAME")
    with tf.Session(graph=g) as s:
        with pytest.raises(errors.InvalidArgumentError, match="same depth"):
            s.run(y, {x: np.ones((1, 4, 4, 3), np.float32), w: np.ones((2, 2, 2, 1), np.float32)})
        with pytest.raises(errors.InvalidArgumentError, match="4-dimensional"):
            s.run(y, {x: np.ones((4, 4, 3), np.float32), w: np.ones((2, 2, 3, 1), np.float32)})
        with pytest.raises(errors.InvalidArgumentError, match="batch and depth"):
            s.run(z, {z.op.inputs[0]: np.ones((1, 4, 4, 1), np.float32),
                      z.op.inputs[1]: np.ones((1, 1, 1, 1), np.float32)})


def test_conv2d_speed():
    import time
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [8, 32, 32, 16])
        w = tf.placeholder(tf.float32, [3, 3, 16, 32])
        y = tf.nn.conv2d(x, w, [1, 1, 1, 1], "SAME")
    feed = {x: RNG.normal(size=(8, 32, 32, 16)).astype(np.float32),
            w: RNG.normal(size=(3, 3, 16, 32)).astype(np.float32)}
    with tf.Session(graph=g) as s:
        s.run(y, feed)
        t0 = time.perf_counter()
        for _ in range(5):
            s.run(y, feed)
        assert (time.perf_counter() - t0) / 5 < 0.05  # a few ms; generous for slow CI


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 2), st.integers(1, 7), st.integers(1, 7), st.integers(1, 3),
       st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3),
       st.sampled_from(["SAME", "VALID"]), st.integers(0, 2**31))
def test_conv2d_property(n, h, w, c, kh, kw, sh, sw, padding, seed):
    if padding == "VALID" and (kh > h or kw > w):
        return
    r = np.random.default_rng(seed)
    x = r.normal(size=(n, h, w, c))
    f = r.normal(size=(kh, kw, c, 2))
    got, t = eval1(lambda p, q: tf.nn.conv2d(p, q, [1, sh, sw, 1], padding), x, f)
    want = ref_conv2d(x, f, (sh, sw), padding)
    assert t.shape.as_list() == list(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------------------------------
# MaxPool, AvgPool
# ---------------------------------------------------------------------------------------
POOL_CASES = [
    ((2, 7, 6, 3), (2, 2), (2, 2), "VALID"),
    ((2, 7, 6, 3), (2, 2), (2, 2), "SAME"),
    ((2, 7, 6, 3), (3, 3), (1, 1), "SAME"),
    ((2, 7, 6, 3), (3, 3), (2, 2), "SAME"),
    ((1, 5, 5, 2), (3, 2), (1, 2), "VALID"),
    ((1, 4, 4, 1), (4, 4), (3, 3), "SAME"),
]


@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", POOL_CASES)
def test_pool_vs_reference(case, fmt, mode):
    ishape, k, s, padding = case
    x = RNG.normal(size=ishape).astype(np.float32)
    want = ref_pool(x, k, s, padding, mode)
    fn = tf.nn.max_pool if mode == "max" else tf.nn.avg_pool
    if fmt == "NCHW":
        xin, ks_, ss = x.transpose(0, 3, 1, 2), [1, 1, *k], [1, 1, *s]
    else:
        xin, ks_, ss = x, [1, *k, 1], [1, *s, 1]
    got, t = eval1(lambda p: fn(p, ks_, ss, padding, data_format=fmt), xin)
    if fmt == "NCHW":
        got = got.transpose(0, 2, 3, 1)
        assert t.shape.as_list() == [want.shape[i] for i in (0, 3, 1, 2)]
    else:
        assert t.shape.as_list() == list(want.shape)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_avg_pool_same_divides_by_valid_count():
    x = np.ones((1, 3, 3, 1), np.float32)
    x[0, 0, 0, 0] = 10.0
    got, _ = eval1(lambda p: tf.nn.avg_pool(p, [1, 3, 3, 1], [1, 1, 1, 1], "SAME"), x)
    # the corner window covers 4 valid elements: (10 + 1 + 1 + 1) / 4
    assert got[0, 0, 0, 0] == pytest.approx(13.0 / 4)
    assert got[0, 2, 2, 0] == pytest.approx(1.0)
    assert got[0, 1, 1, 0] == pytest.approx(18.0 / 9)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.int8, np.uint8])
def test_max_pool_dtypes(dtype):
    x = (RNG.normal(size=(1, 5, 5, 2)) * 20).astype(dtype)
    got, t = eval1(lambda p: tf.nn.max_pool(p, 2, 2, "SAME"), x)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, ref_pool(x, (2, 2), (2, 2), "SAME", "max").astype(dtype))


def test_pool_api_forms_and_errors():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 9, 9, 4])
        assert tf.nn.max_pool(x, 3, 2, "VALID").shape.as_list() == [None, 4, 4, 4]
        assert tf.nn.max_pool(x, [3, 3], [2, 2], "SAME").shape.as_list() == [None, 5, 5, 4]
        y = tf.nn.avg_pool(value=x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
        assert y.shape.as_list() == [None, 5, 5, 4] and y.op.type == "AvgPool"
        assert tf.nn.max_pool2d(x, 2, 2, "SAME").shape.as_list() == [None, 5, 5, 4]
        assert tf.nn.avg_pool2d(x, 2, 1, "VALID").shape.as_list() == [None, 8, 8, 4]
        with pytest.raises(ValueError, match="ksize"):
            tf.nn.max_pool(x, [2, 2, 2], 2, "SAME")
        with pytest.raises(ValueError, match="zero"):
            tf.nn.max_pool(x, 0, 2, "SAME")
        with pytest.raises(ValueError, match="rank 4"):
            tf.nn.max_pool(tf.placeholder(tf.float32, [9, 9, 4]), 2, 2, "SAME")
        with pytest.raises(TypeError):
            tf.nn.avg_pool(tf.placeholder(tf.int32, [1, 4, 4, 1]), 2, 2, "SAME")


def test_max_pool_depthwise_and_batch_pool_error():
    x = RNG.normal(size=(1, 2, 2, 6)).astype(np.float32)
    got, t = eval1(lambda p: tf.nn.max_pool(p, [1, 1, 1, 3], [1, 1, 1, 3], "VALID"), x)
    np.testing.assert_allclose(got, x.reshape(1, 2, 2, 2, 3).max(axis=-1))
    assert t.shape.as_list() == [1, 2, 2, 2]
    g = tf.Graph()
    with g.as_default():
        y = tf.nn.max_pool(tf.constant(x), [2, 1, 1, 1], [1, 1, 1, 1], "SAME")
    with tf.Session(graph=g) as s:
        with pytest.raises(errors.UnimplementedError, match="batch dimension"):
            s.run(y)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8), st.integers(1, 3), st.integers(1, 3),
       st.integers(1, 3), st.integers(1, 3), st.sampled_from(["SAME", "VALID"]),
       st.sampled_from(["max", "avg"]), st.integers(0, 2**31))
def test_pool_property(h, w, kh, kw, sh, sw, padding, mode, seed):
    if padding == "VALID" and (kh > h or kw > w):
        return
    x = np.random.default_rng(seed).normal(size=(2, h, w, 2))
    fn = tf.nn.max_pool if mode == "max" else tf.nn.avg_pool
    got, t = eval1(lambda p: fn(p, [1, kh, kw, 1], [1, sh, sw, 1], padding), x)
    want = ref_pool(x, (kh, kw), (sh, sw), padding, mode)
    assert t.shape.as_list() == list(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_api_exports():
    assert tf.math.softplus is tf.nn.softplus or callable(tf.math.softplus)
    assert tf.nn.softmax_cross_entropy_with_logits_v2 is not None
    assert callable(tf.nn.l2_normalize) and callable(tf.math.l2_normalize)
