"""Host convolutions as GEMMs over window rows (plugins/kernels/standard/nn_conv_rows.py).

Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter take the row path on numpy when a
window row is at least ``MIN_ROW_DEPTH`` values deep. These tests check it against a
direct float64 reference (the forward pass) and the adjoint identities that define the
two gradients, over strides, dilations, paddings (SAME, VALID, EXPLICIT larger than the
window), both data formats and half precision; and that the per-thread patch buffers keep
their zero padding, stay within their budget and are not shared between threads.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt.plugins.kernels.standard import nn_conv_rows as rows


def ref_conv(x, w, strides, dil, pads):
    """NHWC float64 convolution, ``pads`` ((top, bottom), (left, right))."""
    (pt, pb), (pl, pr) = pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    kh, kw, _, f = w.shape
    sh, sw = strides
    dh, dw = dil
    oh = (xp.shape[1] - (kh - 1) * dh - 1) // sh + 1
    ow = (xp.shape[2] - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((x.shape[0], max(oh, 0), max(ow, 0), f))
    if oh <= 0 or ow <= 0:
        return out
    for i in range(kh):
        for j in range(kw):
            win = xp[:, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw]
            out += win @ w[i, j].astype(np.float64)
    return out


def same_pads(size, k, s, d):
    k_eff = (k - 1) * d + 1
    out = -(-size // s)
    total = max((out - 1) * s + k_eff - size, 0)
    return total // 2, total - total // 2


def run_three(x, w, dy_seed, strides, dil, padding, fmt="NHWC", dtype=np.float64):
    """Conv2D, its input gradient and its filter gradient through flowrt, plus the
    output gradient used: all NHWC float64."""
    n, h, wd, c = x.shape
    s4 = [1, *strides, 1] if fmt == "NHWC" else [1, 1, *strides]
    d4 = [1, *dil, 1] if fmt == "NHWC" else [1, 1, *dil]
    to = (lambda a: a) if fmt == "NHWC" else (lambda a: a.transpose(0, 3, 1, 2))
    back = (lambda a: a) if fmt == "NHWC" else (lambda a: a.transpose(0, 2, 3, 1))
    with tf.Graph().as_default():
        xt = tf.constant(to(x).astype(dtype))
        wt = tf.constant(w.astype(dtype))
        y = tf.nn.conv2d(xt, wt, s4, padding, data_format=fmt, dilations=d4)
        with tf.Session() as s:
            yv = back(s.run(y))
        dy = np.random.default_rng(dy_seed).standard_normal(yv.shape)
        in_sizes = list(to(x).shape)
        dyt = tf.constant(to(dy).astype(dtype))
        gx = tf.nn.conv2d_backprop_input(in_sizes, wt, dyt, s4, padding, data_format=fmt,
                                         dilations=d4)
        gw = tf.nn.conv2d_backprop_filter(xt, list(w.shape), dyt, s4, padding,
                                          data_format=fmt, dilations=d4)
        with tf.Session() as s:
            gxv, gwv = s.run([gx, gw])
    return (yv.astype(np.float64), back(gxv).astype(np.float64), gwv.astype(np.float64),
            dy)


def explicit_arg(pads, fmt):
    (pt, pb), (pl, pr) = pads
    if fmt == "NHWC":
        return [[0, 0], [pt, pb], [pl, pr], [0, 0]]
    return [[0, 0], [0, 0], [pt, pb], [pl, pr]]


@pytest.fixture
def counted(monkeypatch):
    """Counts the calls that take the row path."""
    calls = {"forward": 0, "filter_grad": 0, "taps_forward": 0, "taps_filter_grad": 0}
    for name in calls:
        real = getattr(rows, name)

        def spy(*a, _real=real, _name=name, **k):
            calls[_name] += 1
            return _real(*a, **k)
        monkeypatch.setattr(rows, name, spy)
    return calls


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3), h=st.integers(1, 9), wd=st.integers(1, 9),
       c=st.sampled_from([1, 3, 8, 11, 16]), f=st.integers(1, 5),
       kh=st.integers(1, 4), kw=st.integers(2, 4), sh=st.integers(1, 3), sw=st.integers(1, 3),
       dh=st.integers(1, 2), dw=st.integers(1, 2),
       padding=st.sampled_from(["SAME", "VALID", "EXPLICIT"]),
       fmt=st.sampled_from(["NHWC", "NCHW"]), data=st.data())
def test_row_path_matches_reference_and_adjoints(n, h, wd, c, f, kh, kw, sh, sw, dh, dw,
                                                 padding, fmt, data):
    if sh > 1 and dh > 1 or sw > 1 and dw > 1:  # TF: strides or dilations, not both
        dh = dw = 1
    if padding == "EXPLICIT":
        big = (kh - 1) * dh + 3  # may exceed the window: the input gradient falls back
        pads = ((data.draw(st.integers(0, big)), data.draw(st.integers(0, 2))),
                (data.draw(st.integers(0, 2)), data.draw(st.integers(0, big))))
        pad_arg = explicit_arg(pads, fmt)
    elif padding == "SAME":
        pads = (same_pads(h, kh, sh, dh), same_pads(wd, kw, sw, dw))
        pad_arg = "SAME"
    else:
        pads, pad_arg = ((0, 0), (0, 0)), "VALID"
    oh = (h + sum(pads[0]) - (kh - 1) * dh - 1) // sh + 1
    ow = (wd + sum(pads[1]) - (kw - 1) * dw - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        return
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    x = rng.standard_normal((n, h, wd, c))
    w = rng.standard_normal((kh, kw, c, f))
    y, gx, gw, dy = run_three(x, w, rng.integers(1 << 16), (sh, sw), (dh, dw), pad_arg, fmt)
    want = ref_conv(x, w, (sh, sw), (dh, dw), pads)
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-10)
    # <conv(x, w), dy> = <x, dL/dx> = <w, dL/dw>
    inner = float(np.sum(want * dy))
    assert np.isclose(float(np.sum(x * gx)), inner, rtol=1e-9, atol=1e-9)
    assert np.isclose(float(np.sum(w * gw)), inner, rtol=1e-9, atol=1e-9)
    # and each gradient entry: the derivative of the inner product along a unit vector
    i = tuple(int(rng.integers(s)) for s in x.shape)
    e = np.zeros_like(x)
    e[i] = 1.0
    assert np.isclose(gx[i], np.sum(ref_conv(e, w, (sh, sw), (dh, dw), pads) * dy),
                      rtol=1e-9, atol=1e-9)
    j = tuple(int(rng.integers(s)) for s in w.shape)
    e = np.zeros_like(w)
    e[j] = 1.0
    assert np.isclose(gw[j], np.sum(ref_conv(x, e, (sh, sw), (dh, dw), pads) * dy),
                      rtol=1e-9, atol=1e-9)


def test_the_three_kernels_take_the_row_path(counted):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 7, 6, 16))
    w = rng.standard_normal((3, 3, 16, 12))
    y, gx, gw, dy = run_three(x, w, 1, (1, 1), (1, 1), "SAME", dtype=np.float32)
    # forward, and the input gradient as a forward convolution of dy (rows of 3 x 12
    # values); the filter gradient
    assert counted == {"forward": 2, "filter_grad": 1, "taps_forward": 0,
                       "taps_filter_grad": 0}
    want = ref_conv(x, w, (1, 1), (1, 1), ((1, 1), (1, 1)))
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


def test_shallow_inputs_take_the_taps_and_the_rest_im2col(counted, monkeypatch):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 8, 8, 1))  # the MNIST CNN's first layer: one channel
    w = rng.standard_normal((5, 5, 1, 4))
    y, gx, gw, dy = run_three(x, w, 2, (1, 1), (1, 1), "SAME")
    # (the input gradient: rows of 5 x 4 values, too thin for the row path)
    assert counted == {"forward": 0, "filter_grad": 0, "taps_forward": 1,
                       "taps_filter_grad": 1}
    want = ref_conv(x, w, (1, 1), (1, 1), ((2, 2), (2, 2)))
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-10)
    assert np.isclose(np.sum(w * gw), np.sum(want * dy), rtol=1e-10)
    # 8 channels in rows of 3: neither path
    x = rng.standard_normal((2, 6, 6, 8))
    w = rng.standard_normal((3, 3, 8, 2))
    y, _, _, _ = run_three(x, w, 3, (1, 1), (1, 1), "VALID")
    assert counted["taps_forward"] == 1 and counted["forward"] == 0
    np.testing.assert_allclose(y, ref_conv(x, w, (1, 1), (1, 1), ((0, 0), (0, 0))),
                               rtol=1e-10, atol=1e-10)
    monkeypatch.setattr(rows, "ENABLED", False)  # FLOWRT_CONV_ROWS=0
    for c in (1, 16):
        x = rng.standard_normal((2, 6, 6, c))
        w = rng.standard_normal((3, 3, c, 12))
        y, _, _, _ = run_three(x, w, 3, (1, 1), (1, 1), "VALID")
        np.testing.assert_allclose(y, ref_conv(x, w, (1, 1), (1, 1), ((0, 0), (0, 0))),
                                   rtol=1e-10, atol=1e-10)
    assert counted == {"forward": 0, "filter_grad": 0, "taps_forward": 1,
                       "taps_filter_grad": 1}


def test_half_precision_computes_in_float32():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 6, 5, 16)).astype(np.float16).astype(np.float64)
    w = (rng.standard_normal((3, 2, 16, 3)) * 0.25).astype(np.float16).astype(np.float64)
    with tf.Graph().as_default():
        y = tf.nn.conv2d(tf.constant(x.astype(np.float16)), tf.constant(w.astype(np.float16)),
                         [1, 1, 1, 1], "SAME")
        assert y.dtype == tf.float16
        with tf.Session() as s:
            got = s.run(y)
    assert got.dtype == np.float16
    want = ref_conv(x, w, (1, 1), (1, 1), ((1, 1), (0, 1)))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-2)


def test_buffers_keep_their_padding_zero_across_steps():
    """A step with large values, then steps with other values and other geometries on
    the same thread: every result is the reference's (nothing of an earlier step shows
    through the padding of a reused buffer)."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((5, 5, 16, 4))
    with tf.Graph().as_default():
        xp = tf.placeholder(tf.float64, [None, None, None, 16])
        y_same = tf.nn.conv2d(xp, tf.constant(w), [1, 1, 1, 1], "SAME")
        y_strided = tf.nn.conv2d(xp, tf.constant(w), [1, 2, 3, 1], "SAME")
        with tf.Session(config=tf.ConfigProto(intra_op_parallelism_threads=1,
                                              inter_op_parallelism_threads=1)) as s:
            for shape, scale in (((3, 9, 8, 16), 1e6), ((3, 9, 8, 16), 1.0),
                                 ((2, 9, 8, 16), 1.0), ((3, 9, 8, 16), -1.0)):
                x = rng.standard_normal(shape) * scale
                got, got_s = s.run([y_same, y_strided], {xp: x})
                np.testing.assert_allclose(
                    got, ref_conv(x, w, (1, 1), (1, 1), ((2, 2), (2, 2))),
                    rtol=1e-9, atol=1e-9 * abs(scale))
                np.testing.assert_allclose(
                    got_s, ref_conv(x, w, (2, 3), (1, 1), (same_pads(9, 5, 2, 1),
                                                           same_pads(8, 5, 3, 1))),
                    rtol=1e-9, atol=1e-9 * abs(scale))


def test_buffers_are_per_thread_and_within_their_budget(monkeypatch):
    monkeypatch.setattr(rows, "BUFFER_BYTES", 200_000)
    geo_args = [(9, 9, 16, 3, 3, 9, 9, 1, 1), (12, 7, 16, 3, 3, 12, 7, 1, 1),
                (20, 20, 16, 5, 5, 20, 20, 2, 2)]  # the last one is over the budget alone
    seen: dict[int, list] = {}

    def work(k: int) -> None:
        rng = np.random.default_rng(k)
        for args in geo_args:
            geo = rows.RowGeometry(*args)
            x = rng.standard_normal((2, args[0], args[1], 16))
            pat = rows._patches(x, geo)
            assert pat.shape == (1, geo.hq, 2 * geo.ow, geo.kw * 16)
            cache = rows._local.buffers
            assert sum(b.nbytes for b in cache.values()) <= rows.BUFFER_BYTES
        seen[k] = list(rows._local.buffers.values())  # (held: ids stay unique)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen[0] and seen[1]
    assert not any(a is b or np.shares_memory(a, b) for a in seen[0] for b in seen[1])


def test_geometry_maps_padding_strides_and_dilations():
    # output columns whose window column falls in the padding are left out of the copy
    geo = rows.RowGeometry(h=5, w=6, c=16, kh=3, kw=3, oh=3, ow=2, pt=1, pl=1, sh=2, sw=3)
    assert geo.cols == [(1, 2, 2), (0, 2, 0), (0, 2, 1)]
    # and output rows likewise (window row 0 of output row 0 is the padding row)
    assert geo.trows == [(1, 3, 1), (0, 3, 0), (0, 2, 1)]
    # rows stored by phase: even padded rows (input rows 1, 3) then odd ones (0, 2, 4)
    assert geo.hq == 4 and geo.rows == [(1, 1, 2), (0, 0, 3)]
    assert rows.input_grad_geometry(5, 5, 8, 3, 3, 5, 5, 1, 1, 1, 1, 4).pt == 1
    assert rows.input_grad_geometry(5, 5, 8, 3, 3, 7, 7, 3, 0, 1, 1, 4) is None
