"""FFT ops and tf.signal (plugins/kernels/standard/spectral_ops.py): values against
numpy's FFTs and hand-written references, static shapes, dtypes, errors, and numeric
gradients of every FFT op and of the differentiable composites."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import flowrt as tf
from flowrt import errors
from flowrt.graph import apply_op

RNG = np.random.default_rng(11)


def cplx(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


COMPLEX_OPS = [("fft", np.fft.fftn, 1), ("ifft", np.fft.ifftn, 1), ("fft2d", np.fft.fftn, 2),
               ("ifft2d", np.fft.ifftn, 2), ("fft3d", np.fft.fftn, 3),
               ("ifft3d", np.fft.ifftn, 3)]


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(COMPLEX_OPS), st.sampled_from([np.complex64, np.complex128]),
       hnp.array_shapes(min_dims=3, max_dims=4, min_side=1, max_side=5))
def test_complex_ffts_match_numpy(op, dtype, shape):
    name, ref, rank = op
    x = (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)
    with tf.Graph().as_default():
        y = getattr(tf.signal, name)(tf.constant(x))
        assert y.dtype == tf.as_dtype(dtype) and y.shape.as_list() == list(shape)
        assert y.op.type == name.upper()
        with tf.Session() as s:
            v = s.run(y)
    assert v.dtype == dtype
    tol = 1e-4 if dtype == np.complex64 else 1e-10
    np.testing.assert_allclose(v, ref(x, axes=tuple(range(-rank, 0))), rtol=tol, atol=tol)


@settings(max_examples=15, deadline=None)
@given(st.sampled_from([1, 2, 3]), hnp.array_shapes(min_dims=3, max_dims=3, min_side=1,
                                                   max_side=6),
       st.lists(st.integers(1, 8), min_size=3, max_size=3))
def test_real_ffts_match_numpy(rank, shape, lengths):
    x = RNG.standard_normal(shape).astype(np.float32)
    n = lengths[-rank:]
    fwd = {1: tf.signal.rfft, 2: tf.signal.rfft2d, 3: tf.signal.rfft3d}[rank]
    inv = {1: tf.signal.irfft, 2: tf.signal.irfft2d, 3: tf.signal.irfft3d}[rank]
    axes = tuple(range(-rank, 0))
    with tf.Graph().as_default():
        y = fwd(tf.constant(x), n)
        z = inv(y, n)
        assert y.dtype == tf.complex64 and z.dtype == tf.float32
        assert y.shape.as_list() == list(shape[:-rank]) + n[:-1] + [n[-1] // 2 + 1]
        assert z.shape.as_list() == list(shape[:-rank]) + n
        with tf.Session() as s:
            yv, zv = s.run([y, z])
    want = np.fft.rfftn(x.astype(np.float64), s=n, axes=axes)
    np.testing.assert_allclose(yv, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(zv, np.fft.irfftn(want, s=n, axes=axes), rtol=1e-4, atol=1e-4)


def test_rfft_float64_gives_complex128_and_default_lengths():
    x = RNG.standard_normal((2, 6))
    with tf.Graph().as_default():
        y = tf.spectral.rfft(tf.constant(x))
        z = tf.signal.irfft(y)
        assert y.op.type == "RFFT" and y.name == "rfft:0"
        assert (y.dtype, z.dtype) == (tf.complex128, tf.float64)
        assert z.shape.as_list() == [2, 6]
        with tf.Session() as s:
            yv, zv = s.run([y, z])
    np.testing.assert_allclose(yv, np.fft.rfft(x))
    np.testing.assert_allclose(zv, x)


def test_unknown_shapes_and_top_level_names():
    x = cplx(2, 3, 4).astype(np.complex64)
    with tf.Graph().as_default():
        p = tf.placeholder(tf.complex64, [None, 3, None])
        r = tf.placeholder(tf.float32)
        y = tf.fft2d(p)
        ry = tf.signal.rfft(r)
        assert y.shape.as_list() == [None, 3, None] and ry.shape.ndims is None
        with tf.Session() as s:
            yv, rv = s.run([y, ry], {p: x, r: x.real})
    np.testing.assert_allclose(yv, np.fft.fft2(x), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(rv, np.fft.rfft(x.real), rtol=1e-4, atol=1e-4)
    assert tf.fft is tf.spectral.fft is tf.signal.fft
    assert tf.ifft3d is tf.signal.ifft3d


def test_errors():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="at least rank 1"):
            tf.fft(tf.constant(1j, tf.complex64))
        with pytest.raises(ValueError, match="at least rank 2"):
            tf.signal.fft2d(tf.constant([1j], tf.complex64))
        with pytest.raises(ValueError, match="rank 1"):
            tf.signal.rfft(tf.constant([1.0, 2.0]), [[2]])
        p = tf.placeholder(tf.float32)
        c = tf.placeholder(tf.complex64)
        short = apply_op("RFFT", input=p, fft_length=np.int32([8]))
        ishort = apply_op("IRFFT", input=c, fft_length=np.int32([16]))
        low = tf.signal.fft(c)
        with tf.Session() as s:
            with pytest.raises(errors.InvalidArgumentError,
                               match="must have length of at least 8 but got: 4"):
                s.run(short, {p: np.zeros((2, 4))})
            with pytest.raises(errors.InvalidArgumentError,
                               match="must have length of at least 9 but got: 5"):
                s.run(ishort, {c: np.zeros((2, 5))})
            with pytest.raises(errors.InvalidArgumentError, match="rank of at least 1"):
                s.run(low, {c: 1j})
            assert s.run(short, {p: np.zeros((0, 0))}).shape == (0, 5)


def grad_error(build, x, dtype):
    with tf.Graph().as_default():
        p = tf.placeholder(dtype, x.shape)
        y = build(p)
        with tf.Session():
            return tf.test.compute_gradient_error(p, list(x.shape), y, y.shape.as_list(),
                                                  x_init_value=x)


@pytest.mark.parametrize("name", [n for n, _, _ in COMPLEX_OPS])
def test_complex_fft_gradients(name):
    assert grad_error(getattr(tf.signal, name), cplx(2, 3, 4), tf.complex128) < 1e-8


@pytest.mark.parametrize("name,lengths", [("rfft", None), ("rfft", [3]), ("rfft", [9]),
                                          ("rfft2d", None), ("rfft2d", [2, 7]),
                                          ("rfft3d", [2, 3, 5])])
def test_rfft_gradients(name, lengths):
    x = RNG.standard_normal((2, 3, 6))
    assert grad_error(lambda p: getattr(tf.signal, name)(p, lengths), x, tf.float64) < 1e-8


@pytest.mark.parametrize("name,lengths", [("irfft", None), ("irfft", [5]), ("irfft", [3]),
                                          ("irfft2d", None), ("irfft2d", [2, 9]),
                                          ("irfft3d", [2, 3, 10])])
def test_irfft_gradients(name, lengths):
    x = cplx(2, 3, 6)
    assert grad_error(lambda p: getattr(tf.signal, name)(p, lengths), x, tf.complex128) < 1e-8


# ---------------------------------------------------------------------------------------
# tf.signal composites
# ---------------------------------------------------------------------------------------
def np_frame(x, length, step, pad_end=False, pad_value=0.0):
    n = x.shape[-1]
    if pad_end:
        nf = -(-n // step)
        x = np.concatenate([x, np.full(x.shape[:-1] + (max(0, length + step * (nf - 1) - n),),
                                       pad_value, x.dtype)], -1)
    else:
        nf = max(0, 1 + (n - length) // step)
    return np.stack([x[..., i * step:i * step + length] for i in range(nf)], -2)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 12), st.integers(1, 5), st.integers(1, 4), st.booleans())
def test_frame_matches_reference(n, length, step, pad_end):
    x = RNG.standard_normal((2, n)).astype(np.float32)
    with tf.Graph().as_default():
        f = tf.signal.frame(x, length, step, pad_end=pad_end, pad_value=5.0)
        with tf.Session() as s:
            v = s.run(f)
    want = np_frame(x, length, step, pad_end, 5.0) if (pad_end or n >= length) else \
        np.zeros((2, 0, length), np.float32)
    assert f.shape.as_list() == list(want.shape)
    np.testing.assert_array_equal(v, want)


def test_frame_axis_and_unknown_length():
    x = RNG.standard_normal((7, 3)).astype(np.float32)
    with tf.Graph().as_default():
        f = tf.signal.frame(x, 3, 2, axis=0)
        p = tf.placeholder(tf.float32, [3, None])
        g = tf.signal.frame(p, 3, 2, pad_end=True)
        assert f.shape.as_list() == [3, 3, 3] and g.shape.as_list() == [3, None, 3]
        with tf.Session() as s:
            fv, gv = s.run([f, g], {p: x.T})
    np.testing.assert_array_equal(fv, np.moveaxis(np_frame(x.T, 3, 2), [0, 1, 2], [2, 0, 1]))
    np.testing.assert_array_equal(gv, np_frame(x.T, 3, 2, pad_end=True))


def np_overlap_add(frames, step):
    nf, fl = frames.shape[-2:]
    out = np.zeros(frames.shape[:-2] + ((nf - 1) * step + fl,), frames.dtype)
    for i in range(nf):
        out[..., i * step:i * step + fl] += frames[..., i, :]
    return out


def test_overlap_and_add_and_its_gradient():
    x = RNG.standard_normal((2, 4, 5))
    with tf.Graph().as_default():
        y = tf.signal.overlap_and_add(tf.constant(x), 3)
        assert y.shape.as_list() == [2, 14]
        with tf.Session() as s:
            np.testing.assert_allclose(s.run(y), np_overlap_add(x, 3))
    assert grad_error(lambda p: tf.signal.overlap_and_add(p, 2), x, tf.float64) < 1e-8
    with tf.Graph().as_default(), pytest.raises(ValueError, match="at least rank 2"):
        tf.signal.overlap_and_add(tf.constant([1.0]), 1)


def test_windows():
    n = np.arange(8)
    with tf.Graph().as_default():
        h, hs, m, one = (tf.signal.hann_window(8), tf.signal.hann_window(8, periodic=False),
                         tf.signal.hamming_window(8, dtype=tf.float64),
                         tf.signal.hann_window(1))
        with tf.Session() as s:
            hv, hsv, mv, ov = s.run([h, hs, m, one])
        with pytest.raises(ValueError, match="floating point"):
            tf.signal.hann_window(4, dtype=tf.int32)
    np.testing.assert_allclose(hv, 0.5 - 0.5 * np.cos(2 * np.pi * n / 8), atol=1e-6)
    np.testing.assert_allclose(hsv, np.hanning(8), atol=1e-6)
    np.testing.assert_allclose(mv, 0.54 - 0.46 * np.cos(2 * np.pi * n / 8))
    assert mv.dtype == np.float64 and ov.tolist() == [1.0]


def test_stft_and_inverse_stft_round_trip():
    x = RNG.standard_normal((2, 40)).astype(np.float32)
    with tf.Graph().as_default():
        st_ = tf.signal.stft(x, 8, 2)
        back = tf.signal.inverse_stft(st_, 8, 2,
                                      window_fn=tf.signal.inverse_stft_window_fn(2))
        assert st_.shape.as_list() == [2, 17, 5] and st_.dtype == tf.complex64
        with tf.Session() as s:
            sv, bv = s.run([st_, back])
    win = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(8) / 8)
    want = np.fft.rfft(np_frame(x.astype(np.float64), 8, 2) * win, 8)
    np.testing.assert_allclose(sv, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(bv[:, 8:-8], x[:, 8:-8], rtol=1e-4, atol=1e-4)


def test_fftshift():
    x = RNG.standard_normal((3, 4, 5))
    with tf.Graph().as_default():
        a, b, c = (tf.signal.fftshift(x), tf.signal.ifftshift(x, axes=[0, -1]),
                   tf.signal.fftshift(x, axes=1))
        with tf.Session() as s:
            av, bv, cv = s.run([a, b, c])
    np.testing.assert_array_equal(av, np.fft.fftshift(x))
    np.testing.assert_array_equal(bv, np.fft.ifftshift(x, axes=[0, -1]))
    np.testing.assert_array_equal(cv, np.fft.fftshift(x, axes=1))


def np_dct(x, t, norm=None):
    n = x.shape[-1]
    k = np.arange(n)[:, None]
    i = np.arange(n)[None, :]
    if t == 2:
        y = 2 * (x[..., None, :] * np.cos(np.pi * k * (2 * i + 1) / (2 * n))).sum(-1)
        if norm == "ortho":
            y[..., 0] *= np.sqrt(1 / (4 * n))
            y[..., 1:] *= np.sqrt(1 / (2 * n))
        return y
    if t == 3:
        xx = x.copy()
        if norm == "ortho":
            xx[..., 0] = x[..., 0] / np.sqrt(n)
            xx[..., 1:] = x[..., 1:] * np.sqrt(2 / n)
            c = np.cos(np.pi * i * (2 * k + 1) / (2 * n))
            return xx[..., :1] + (xx[..., None, 1:] * c[:, 1:]).sum(-1)
        c = np.cos(np.pi * i * (2 * k + 1) / (2 * n))
        return x[..., :1] + 2 * (x[..., None, 1:] * c[:, 1:]).sum(-1)
    c = np.cos(np.pi * k * i / (n - 1))
    return (x[..., :1] + (-1.0) ** np.arange(n) * x[..., -1:]
            + 2 * (x[..., None, 1:-1] * c[:, 1:-1]).sum(-1))


@pytest.mark.parametrize("t,norm", [(1, None), (2, None), (2, "ortho"), (3, None),
                                    (3, "ortho")])
def test_dct_matches_reference(t, norm):
    x = RNG.standard_normal((3, 7))
    with tf.Graph().as_default():
        y = tf.signal.dct(tf.constant(x), type=t, norm=norm)
        inv = tf.signal.idct(y, type=t, norm=norm)
        with tf.Session() as s:
            yv, iv = s.run([y, inv])
    np.testing.assert_allclose(yv, np_dct(x, t, norm), atol=1e-10)
    scale = 1.0 if norm == "ortho" else (2 * (7 - 1) if t == 1 else 2 * 7)
    np.testing.assert_allclose(iv / scale, x, atol=1e-10)
    assert grad_error(lambda p: tf.signal.dct(p, type=t, norm=norm), x, tf.float64) < 1e-8


def test_dct_errors_and_n():
    with tf.Graph().as_default():
        x = tf.constant(RNG.standard_normal((2, 5)), tf.float32)
        for kw, err in [(dict(type=4), ValueError), (dict(type=1, norm="ortho"), ValueError),
                        (dict(axis=0), NotImplementedError), (dict(n=0), ValueError)]:
            with pytest.raises(err):
                tf.signal.dct(x, **kw)
        assert tf.signal.dct(x, n=8).shape.as_list() == [2, 8]
        assert tf.signal.dct(x, n=3).shape.as_list() == [2, 3]


def test_mel_matrix_and_mfccs():
    with tf.Graph().as_default():
        m = tf.signal.linear_to_mel_weight_matrix(10, 33, 16000, 20.0, 7000.0)
        x = tf.constant(RNG.standard_normal((4, 10)), tf.float32)
        mf = tf.signal.mfccs_from_log_mel_spectrograms(x)
        with tf.Session() as s:
            mv, mfv, xv = s.run([m, mf, x])
        for kw in [dict(num_mel_bins=0), dict(lower_edge_hertz=-1.0),
                   dict(lower_edge_hertz=500.0, upper_edge_hertz=100.0),
                   dict(sample_rate=4000, upper_edge_hertz=3000.0), dict(dtype=tf.int32)]:
            with pytest.raises(ValueError):
                tf.signal.linear_to_mel_weight_matrix(**kw)
    assert mv.shape == (33, 10) and mv.dtype == np.float32
    assert (mv[0] == 0).all() and (mv >= 0).all() and mv.max() <= 1.0
    np.testing.assert_allclose(mfv, np_dct(xv.astype(np.float64), 2) / np.sqrt(20), atol=1e-4)
