"""tf.linalg.LinearOperatorCirculant / Circulant2D / Circulant3D: dense matrices, products,
solves, determinants, traces and hints against numpy circulant matrices; gradients with
the numeric checker."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flowrt as tf

RNG = np.random.default_rng(11)


def dense_of(spectrum, depth):
    """The numpy matrix of the [[nested] block] circulant operator of ``spectrum``: column
    j is F^H diag(spectrum) F e_j over the block shape."""
    block = spectrum.shape[-depth:]
    n = int(np.prod(block))
    axes = tuple(range(-depth, 0))
    batch = spectrum.shape[:-depth]
    out = np.zeros(batch + (n, n), complex)
    for j in range(n):
        e = np.zeros(n)
        e[j] = 1
        col = np.fft.ifftn(spectrum * np.fft.fftn(e.reshape(block), axes=axes), axes=axes)
        out[..., :, j] = col.reshape(batch + (n,))
    return out


CLASSES = {1: "LinearOperatorCirculant", 2: "LinearOperatorCirculant2D",
           3: "LinearOperatorCirculant3D"}


def make(spectrum, depth, **kw):
    return getattr(tf.linalg, CLASSES[depth])(spectrum, **kw)


def run(fetches):
    with tf.Session() as s:
        return s.run(fetches)


@settings(max_examples=12, deadline=None)
@given(depth=st.integers(1, 3), batch=st.lists(st.integers(1, 2), max_size=1),
       data=st.data())
def test_against_numpy(depth, batch, data):
    block = data.draw(st.lists(st.integers(1, 3), min_size=depth, max_size=depth))
    shape = tuple(batch + block)
    spec = RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape) + 3.0
    a = dense_of(spec, depth)
    n = a.shape[-1]
    x = RNG.standard_normal(tuple(batch) + (n, 2)) + 1j * RNG.standard_normal(
        tuple(batch) + (n, 2))
    with tf.Graph().as_default():
        op = make(tf.constant(spec), depth, input_output_dtype=tf.complex128)
        assert op.shape.as_list() == list(batch) + [n, n]
        assert op.batch_shape.as_list() == list(batch) and op.block_depth == depth
        assert op.block_shape.as_list() == block
        out = run([op.to_dense(), op.matmul(x), op.matmul(x, adjoint=True), op.solve(x),
                   op.solve(x, adjoint=True), op.determinant(), op.log_abs_determinant(),
                   op.trace(), op.diag_part(), op.matvec(x[..., 0])])
    ah = np.conj(np.swapaxes(a, -1, -2))
    want = [a, a @ x, ah @ x, np.linalg.solve(a, x), np.linalg.solve(ah, x),
            np.linalg.det(a), np.log(np.abs(np.linalg.det(a))), np.trace(a, axis1=-2, axis2=-1),
            np.diagonal(a, axis1=-2, axis2=-1), (a @ x)[..., 0]]
    for g, w in zip(out, want):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9)
        assert g.dtype == np.complex128


def test_real_spectrum_hints_and_real_dtype():
    k = RNG.standard_normal(6)
    spec = np.fft.fft(k)  # Hermitian spectrum: a real operator
    with tf.Graph().as_default():
        real_spec = make(np.abs(spec), 1)
        assert real_spec.is_self_adjoint is True and real_spec.is_square is True
        assert real_spec.dtype == tf.complex64  # TF's default input_output_dtype
        op = make(tf.constant(spec, tf.complex64), 1, input_output_dtype=tf.float32)
        assert op.is_self_adjoint is None and op.dtype == tf.float32
        d, kernel = run([op.to_dense(), op.convolution_kernel()])
        # TF 1.15 multiplies eps by the int32 domain dimension here: always a TypeError
        with pytest.raises(TypeError):
            op.assert_hermitian_spectrum()
    assert d.dtype == np.float32
    np.testing.assert_allclose(d, dense_of(spec, 1).real, atol=1e-5)
    np.testing.assert_allclose(kernel, k, atol=1e-5)


def test_hint_and_argument_errors():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="real spectrum always corresponds"):
            make([1.0, 2.0], 1, is_self_adjoint=False)
        with pytest.raises(ValueError, match="always square"):
            make([1.0, 2.0], 1, is_square=False)
        with pytest.raises(ValueError, match="at least 2 dimensions"):
            make([1.0, 2.0], 2)
        with pytest.raises(TypeError, match="spectrum must have dtype in"):
            make([1, 2], 1)


def test_asserts_run_time():
    with tf.Graph().as_default():
        good = make(tf.constant([2.0, 1.0, 3.0]), 1, input_output_dtype=tf.float32)
        # fed spectra: with constants the checks already fail at graph construction
        pb = tf.placeholder(tf.float32, [3])
        pc = tf.placeholder(tf.complex64, [2])
        bad = make(pb, 1, input_output_dtype=tf.float32)
        notsa = make(pc, 1)
        feed = {pb: [2.0, 0.0, -3.0], pc: [1 + 1j, 2j]}
        with tf.Session() as s:
            s.run([good.assert_non_singular(), good.assert_positive_definite(),
                   good.assert_self_adjoint()])
            for check in (bad.assert_non_singular(), bad.assert_positive_definite(),
                          notsa.assert_self_adjoint()):
                with pytest.raises(tf.errors.InvalidArgumentError):
                    s.run(check, feed)


def test_unknown_batch_shape():
    spec = RNG.standard_normal((3, 4)) + 2.0
    with tf.Graph().as_default():
        p = tf.placeholder(tf.float64, [None, 4])
        op = make(p, 1, input_output_dtype=tf.float64)
        assert op.shape.as_list() == [None, 4, 4]
        with tf.Session() as s:
            d = s.run(op.to_dense(), {p: spec})
    np.testing.assert_allclose(d, dense_of(spec, 1).real, atol=1e-12)


@pytest.mark.parametrize("depth, shape", [(1, (4,)), (2, (2, 3))])
def test_gradients(depth, shape):
    spec = RNG.uniform(1.0, 2.0, shape)
    n = int(np.prod(shape))
    xv = RNG.standard_normal((n, 2))
    with tf.Graph().as_default():
        s_t = tf.constant(spec)
        x_t = tf.constant(xv)
        op = make(s_t, depth, input_output_dtype=tf.float64)
        y = op.matmul(x_t)
        z = op.solve(x_t)
        with tf.Session():
            errs = [tf.test.compute_gradient_error(x_t, [n, 2], y, [n, 2], x_init_value=xv),
                    tf.test.compute_gradient_error(s_t, list(shape), y, [n, 2],
                                                   x_init_value=spec),
                    tf.test.compute_gradient_error(s_t, list(shape), z, [n, 2],
                                                   x_init_value=spec)]
    # matmul is linear in x and in the spectrum (exact up to rounding); solve divides by the
    # spectrum, so central differences carry an O(h^2) truncation error
    assert errs[0] < 1e-10 and errs[1] < 1e-10 and errs[2] < 1e-5, errs
