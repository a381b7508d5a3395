"""tf.signal / tf.spectral programs: the FFT ops, their gradients and errors, and the
signal composites (frame, windows, stft, dct, mel filters, MFCCs) under TensorFlow and
flowrt.

The FFT ops are compared on everything (names, op types, dtypes, shapes, values). The
composites are built from other ops than TF's (``frame`` is a gather, ``dct`` a matmul),
so their outputs are compared on kind, dtype, static shape and values only.
"""
from __future__ import annotations

import numpy as np
import pytest

from compat_harness import Run, run_both

RNG = np.random.RandomState(3)
C = (RNG.randn(2, 4, 6) + 1j * RNG.randn(2, 4, 6))
R = RNG.randn(2, 4, 6)
SIG = RNG.randn(2, 30).astype(np.float32)
SHAPES_ONLY = ("kind", "dtype", "shape")


def _progs(d: dict) -> list:
    return [pytest.param(v, id=k) for k, v in sorted(d.items())]


OPS = {
    "fft": lambda tf: tf.fft(tf.constant(C, tf.complex64)),
    "ifft": lambda tf: tf.ifft(tf.constant(C)),
    "fft2d": lambda tf: tf.signal.fft2d(tf.constant(C, tf.complex64)),
    "ifft2d": lambda tf: tf.spectral.ifft2d(tf.constant(C)),
    "fft3d": lambda tf: tf.fft3d(tf.constant(C)),
    "ifft3d": lambda tf: tf.ifft3d(tf.constant(C, tf.complex64)),
    "rfft": lambda tf: tf.signal.rfft(tf.constant(R, tf.float32)),
    "rfft_len_crop": lambda tf: tf.signal.rfft(tf.constant(R, tf.float32), [4]),
    "rfft_len_pad": lambda tf: tf.spectral.rfft(tf.constant(R, tf.float32), [9]),
    "irfft": lambda tf: tf.signal.irfft(tf.constant(C, tf.complex64)),
    "irfft_len": lambda tf: tf.signal.irfft(tf.constant(C, tf.complex64), [7]),
    "rfft2d": lambda tf: tf.signal.rfft2d(tf.constant(R, tf.float32), [3, 8]),
    "irfft2d": lambda tf: tf.signal.irfft2d(tf.constant(C, tf.complex64), [4, 10]),
    "rfft3d": lambda tf: tf.signal.rfft3d(tf.constant(R, tf.float32)),
    "irfft3d": lambda tf: tf.signal.irfft3d(tf.constant(C, tf.complex64), [2, 4, 5]),
    "rfft_named": lambda tf: tf.signal.rfft(tf.constant(R, tf.float32), name="spec"),
    "fft_placeholder": lambda tf: (lambda p: Run(tf.fft(p), {p: C}))(
        tf.placeholder(tf.complex64, [None, 4, 6])),
    "rfft_placeholder": lambda tf: (lambda p: Run(tf.signal.rfft(p), {p: R}))(
        tf.placeholder(tf.float32, [None, 4, None])),
}


@pytest.mark.parametrize("prog", _progs(OPS))
def test_fft_ops(prog):
    run_both(prog, rtol=1e-4, atol=1e-4)


def _grad(op, x, dtype, *args):
    def program(tf):
        p = tf.constant(x, dtype)
        y = op(tf)(p, *args)
        w = tf.constant(np.linspace(0.5, 1.5, int(np.prod(y.shape.as_list()))).reshape(
            y.shape.as_list()).astype(y.dtype.as_numpy_dtype))
        return tf.gradients(tf.reduce_sum(tf.abs(y * w) ** 2) if y.dtype.is_complex
                            else tf.reduce_sum(y * w), p)[0]
    return program


GRADS = {
    "fft": _grad(lambda tf: tf.fft, C, "complex128"),
    "ifft2d": _grad(lambda tf: tf.ifft2d, C, "complex128"),
    "fft3d": _grad(lambda tf: tf.fft3d, C, "complex128"),
    "rfft": _grad(lambda tf: tf.signal.rfft, R, "float32"),
    "rfft2d": _grad(lambda tf: tf.signal.rfft2d, R, "float32"),
    "irfft": _grad(lambda tf: tf.signal.irfft, C, "complex64"),
    "irfft2d": _grad(lambda tf: tf.signal.irfft2d, C, "complex64"),
}


@pytest.mark.parametrize("prog", _progs(GRADS))
def test_fft_gradients(prog):
    run_both(prog, rtol=1e-3, atol=1e-3, static_keys=SHAPES_ONLY)


ERRORS = {
    "fft_rank0": lambda tf: tf.fft(tf.constant(1 + 1j, tf.complex64)),
    "fft2d_rank1": lambda tf: tf.fft2d(tf.constant([1j, 2j], tf.complex64)),
    "rfft_short": lambda tf: (lambda p: Run(tf.signal.rfft(p, [8]), {p: R}))(
        tf.placeholder(tf.float32)),
    "irfft_short": lambda tf: (lambda p: Run(tf.signal.irfft(p, [16]), {p: C}))(
        tf.placeholder(tf.complex64)),
    "rfft_len_rank": lambda tf: tf.signal.rfft(tf.constant(R, tf.float32), [[4]]),
}


@pytest.mark.parametrize("prog", _progs(ERRORS))
def test_fft_errors(prog):
    run_both(prog)


COMPOSITES = {
    "frame": lambda tf: tf.signal.frame(tf.constant(SIG), 5, 3),
    "frame_pad_end": lambda tf: tf.signal.frame(tf.constant(SIG), 7, 4, pad_end=True,
                                                pad_value=2.0),
    "frame_axis0": lambda tf: tf.signal.frame(tf.constant(SIG.T), 4, 2, axis=0),
    "frame_unknown": lambda tf: (lambda p: Run(tf.signal.frame(p, 6, 5, pad_end=True),
                                               {p: SIG}))(tf.placeholder(tf.float32,
                                                                         [2, None])),
    "overlap_and_add": lambda tf: tf.signal.overlap_and_add(
        tf.constant(SIG.reshape(2, 5, 6)), 4),
    "hann": lambda tf: tf.signal.hann_window(10),
    "hann_symmetric": lambda tf: tf.signal.hann_window(9, periodic=False),
    "hann_one": lambda tf: tf.signal.hann_window(1),
    "hamming_f64": lambda tf: tf.signal.hamming_window(8, dtype=tf.float64),
    "stft": lambda tf: tf.signal.stft(tf.constant(SIG), 8, 4),
    "stft_fft_len": lambda tf: tf.signal.stft(tf.constant(SIG), 8, 3, fft_length=16,
                                              pad_end=True),
    "stft_hamming": lambda tf: tf.signal.stft(tf.constant(SIG), 6, 2,
                                              window_fn=tf.signal.hamming_window),
    "inverse_stft": lambda tf: tf.signal.inverse_stft(
        tf.signal.stft(tf.constant(SIG), 8, 4), 8, 4,
        window_fn=tf.signal.inverse_stft_window_fn(4)),
    "inverse_stft_plain": lambda tf: tf.signal.inverse_stft(
        tf.signal.stft(tf.constant(SIG), 6, 3), 6, 3),
    "fftshift": lambda tf: tf.signal.fftshift(tf.constant(SIG)),
    "fftshift_axis": lambda tf: tf.signal.fftshift(tf.constant(SIG), axes=1),
    "ifftshift": lambda tf: tf.signal.ifftshift(tf.constant(R), axes=[0, 2]),
    "dct2": lambda tf: tf.signal.dct(tf.constant(SIG)),
    "dct2_ortho": lambda tf: tf.signal.dct(tf.constant(SIG), norm="ortho"),
    "dct1": lambda tf: tf.signal.dct(tf.constant(SIG), type=1),
    "dct3": lambda tf: tf.signal.dct(tf.constant(SIG), type=3),
    "dct3_ortho": lambda tf: tf.spectral.dct(tf.constant(SIG), type=3, norm="ortho"),
    "idct2": lambda tf: tf.signal.idct(tf.constant(SIG)),
    "idct_ortho": lambda tf: tf.spectral.idct(tf.constant(SIG), norm="ortho"),
    "dct_n": lambda tf: tf.signal.dct(tf.constant(SIG), n=12),
    "mel": lambda tf: tf.signal.linear_to_mel_weight_matrix(),
    "mel_args": lambda tf: tf.signal.linear_to_mel_weight_matrix(
        num_mel_bins=10, num_spectrogram_bins=33, sample_rate=16000,
        lower_edge_hertz=20.0, upper_edge_hertz=7000.0),
    "mfccs": lambda tf: tf.signal.mfccs_from_log_mel_spectrograms(tf.constant(SIG)),
}


@pytest.mark.parametrize("prog", _progs(COMPOSITES))
def test_signal_composites(prog):
    run_both(prog, rtol=2e-4, atol=2e-4, static_keys=SHAPES_ONLY)


COMPOSITE_GRADS = {
    "frame": lambda tf: (lambda x: tf.gradients(
        tf.reduce_sum(tf.signal.frame(x, 5, 3) ** 2), x))(tf.constant(SIG)),
    "overlap_and_add": lambda tf: (lambda x: tf.gradients(
        tf.reduce_sum(tf.signal.overlap_and_add(x, 2) ** 2), x))(
        tf.constant(SIG.reshape(2, 5, 6))),
    "stft": lambda tf: (lambda x: tf.gradients(
        tf.reduce_sum(tf.abs(tf.signal.stft(x, 8, 4))), x))(tf.constant(SIG)),
    "dct": lambda tf: (lambda x: tf.gradients(
        tf.reduce_sum(tf.signal.dct(x) ** 2), x))(tf.constant(SIG)),
}


@pytest.mark.parametrize("prog", _progs(COMPOSITE_GRADS))
def test_composite_gradients(prog):
    run_both(prog, rtol=1e-3, atol=1e-3, static_keys=SHAPES_ONLY)


COMPOSITE_ERRORS = {
    "dct_type4": lambda tf: tf.signal.dct(tf.constant(SIG), type=5),
    "dct1_ortho": lambda tf: tf.signal.dct(tf.constant(SIG), type=1, norm="ortho"),
    "dct_axis": lambda tf: tf.signal.dct(tf.constant(SIG), axis=0),
    "mel_bins": lambda tf: tf.signal.linear_to_mel_weight_matrix(num_mel_bins=0),
    "mel_edges": lambda tf: tf.signal.linear_to_mel_weight_matrix(
        lower_edge_hertz=500.0, upper_edge_hertz=100.0),
    "mel_nyquist": lambda tf: tf.signal.linear_to_mel_weight_matrix(
        sample_rate=4000, upper_edge_hertz=3000.0),
    "hann_int": lambda tf: tf.signal.hann_window(4, dtype=tf.int32),
    "overlap_rank1": lambda tf: tf.signal.overlap_and_add(tf.constant([1.0, 2.0]), 1),
}


@pytest.mark.parametrize("prog", _progs(COMPOSITE_ERRORS))
def test_composite_errors(prog):
    run_both(prog, static_keys=SHAPES_ONLY)
