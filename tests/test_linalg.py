"""tf.linalg: decompositions, solvers, matrix functions and composites against numpy
references, static shapes, error classes, and gradients against central differences."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors

SETTINGS = settings(max_examples=20, deadline=None)


def run(fetches, feeds=None):
    with tf.Session() as sess:
        return sess.run(fetches, feeds)


def build_run(fn, *values):
    """``fn(*constants)`` run in a fresh graph."""
    with tf.Graph().as_default():
        out = fn(*[tf.constant(v) for v in values])
        return run(out)


def grad_err(build, values, delta=1e-4):
    """The largest gradient error of ``build(*inputs)`` over all inputs (float64)."""
    values = [np.asarray(v, dtype=np.float64) for v in values]
    with tf.Graph().as_default():
        xs = [tf.constant(v) for v in values]
        y = build(*xs)
        with tf.Session():
            y_shape = list(run(y).shape)
            return tf.test.compute_gradient_error(
                xs, [list(v.shape) for v in values], y, y_shape,
                x_init_value=values, delta=delta)


def well_conditioned(rng, shape):
    n = shape[-1]
    return rng.randn(*shape) + 2 * n * np.eye(n) * rng.choice([-1, 1])


def spd(rng, shape):
    a = rng.randn(*shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


RNG = np.random.RandomState(0)


@pytest.fixture(autouse=True)
def _fresh_rng():
    """Each test draws the same values from ``RNG`` whatever ran before it in its worker
    (the order changes with how pytest-xdist hands out tests: a pinv gradient check once
    drew an ill-conditioned matrix and missed its tolerance)."""
    RNG.seed(0)


# =======================================================================================
# values against numpy
# =======================================================================================
@SETTINGS
@given(batch=st.lists(st.integers(1, 3), max_size=2), n=st.integers(1, 4),
       seed=st.integers(0, 2 ** 16), dtype=st.sampled_from([np.float32, np.float64]))
def test_inv_det_solve_match_numpy(batch, n, seed, dtype):
    rng = np.random.RandomState(seed)
    a = well_conditioned(rng, tuple(batch) + (n, n)).astype(dtype)
    b = rng.randn(*(tuple(batch) + (n, 2))).astype(dtype)
    inv, det, (sign, logabs), x, xa = build_run(
        lambda a_, b_: (tf.linalg.inv(a_), tf.linalg.det(a_), tf.linalg.slogdet(a_),
                        tf.linalg.solve(a_, b_), tf.matrix_solve(a_, b_, adjoint=True)), a, b)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    assert inv.dtype == dtype and inv.shape == a.shape
    np.testing.assert_allclose(inv, np.linalg.inv(a), rtol=tol, atol=tol)
    np.testing.assert_allclose(det, np.linalg.det(a), rtol=tol)
    s_ref, l_ref = np.linalg.slogdet(a)
    np.testing.assert_allclose(sign, s_ref)
    np.testing.assert_allclose(logabs, l_ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=tol, atol=tol)
    np.testing.assert_allclose(xa, np.linalg.solve(np.swapaxes(a, -1, -2), b), rtol=tol,
                               atol=tol)


def test_inverse_adjoint_complex_and_half():
    a = well_conditioned(RNG, (3, 3)) + 1j * RNG.randn(3, 3)
    out = build_run(lambda x: tf.linalg.inv(x, adjoint=True), a)
    np.testing.assert_allclose(out, np.linalg.inv(a.conj().T), rtol=1e-10)
    h = well_conditioned(RNG, (2, 2)).astype(np.float16)
    out = build_run(tf.matrix_inverse, h)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, np.linalg.inv(h.astype(np.float32)), rtol=1e-2)


def test_cholesky_reads_lower_triangle_and_logdet():
    a = spd(RNG, (2, 4, 4))
    messy = a + np.triu(RNG.randn(4, 4), 1)  # the upper triangle is ignored
    chol, ld = build_run(lambda x, y: (tf.linalg.cholesky(x), tf.linalg.logdet(y)), messy, a)
    np.testing.assert_allclose(chol, np.linalg.cholesky(a), rtol=1e-10)
    np.testing.assert_allclose(ld, np.linalg.slogdet(a)[1], rtol=1e-10)
    b = RNG.randn(2, 4, 3)
    x = build_run(lambda c, r: tf.linalg.cholesky_solve(c, r), np.linalg.cholesky(a), b)
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-9)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("adjoint", [True, False])
def test_triangular_solve(lower, adjoint):
    a = RNG.randn(2, 3, 3) + 4 * np.eye(3)
    b = RNG.randn(3, 2)  # batch dimensions broadcast
    tri = np.tril(a) if lower else np.triu(a)
    if adjoint:
        tri = np.swapaxes(tri, -1, -2)
    out = build_run(lambda x, y: tf.linalg.triangular_solve(x, y, lower=lower,
                                                            adjoint=adjoint), a, b)
    assert out.shape == (2, 3, 2)
    np.testing.assert_allclose(out, np.linalg.solve(tri, np.broadcast_to(b, (2, 3, 2))),
                               rtol=1e-10)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5)])
def test_lstsq(shape):
    a = RNG.randn(*shape)
    b = RNG.randn(shape[0], 2)
    fast, slow, reg = build_run(
        lambda x, y: (tf.linalg.lstsq(x, y), tf.linalg.lstsq(x, y, fast=False),
                      tf.matrix_solve_ls(x, y, l2_regularizer=0.5)), a, b)
    ref = np.linalg.lstsq(a, b, rcond=None)[0]
    np.testing.assert_allclose(fast, ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(slow, ref, rtol=1e-8, atol=1e-10)
    if shape[0] >= shape[1]:
        ref_reg = np.linalg.solve(a.T @ a + 0.5 * np.eye(shape[1]), a.T @ b)
    else:
        ref_reg = a.T @ np.linalg.solve(a @ a.T + 0.5 * np.eye(shape[0]), b)
    np.testing.assert_allclose(reg, ref_reg, rtol=1e-8)


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 3, 3)])
@pytest.mark.parametrize("full", [False, True])
def test_qr(shape, full):
    a = RNG.randn(*shape)
    with tf.Graph().as_default():
        q, r = tf.linalg.qr(tf.constant(a), full_matrices=full)
        m, n = shape[-2:]
        k = m if full else min(m, n)
        assert q.shape.as_list() == list(shape[:-2]) + [m, k]
        assert r.shape.as_list() == list(shape[:-2]) + [k, n]
        res = run(tf.linalg.qr(tf.constant(a), full_matrices=full))
    assert type(res).__name__ == "Qr"
    qv, rv = res
    np.testing.assert_allclose(qv @ rv, a, atol=1e-12)
    np.testing.assert_allclose(np.swapaxes(qv, -1, -2) @ qv, np.broadcast_to(
        np.eye(k), qv.shape[:-2] + (k, k)), atol=1e-12)
    np.testing.assert_allclose(rv, np.triu(rv), atol=0)


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 3, 3)])
@pytest.mark.parametrize("full", [False, True])
def test_svd(shape, full):
    a = RNG.randn(*shape)
    with tf.Graph().as_default():
        s, u, v = tf.linalg.svd(tf.constant(a), full_matrices=full)
        s_only = tf.svd(tf.constant(a), compute_uv=False)
        m, n = shape[-2:]
        p = min(m, n)
        assert s.shape.as_list() == list(shape[:-2]) + [p]
        assert u.shape.as_list() == list(shape[:-2]) + [m, m if full else p]
        assert v.shape.as_list() == list(shape[:-2]) + [n, n if full else p]
        sv, uv, vv, so = run([s, u, v, s_only])
    np.testing.assert_allclose(sv, np.linalg.svd(a, compute_uv=False), rtol=1e-12)
    np.testing.assert_allclose(so, sv, rtol=1e-12)
    recon = uv[..., :, :p] * sv[..., None, :] @ np.swapaxes(vv[..., :, :p], -1, -2)
    np.testing.assert_allclose(recon, a, atol=1e-12)


def test_eigh_eigvalsh():
    a = RNG.randn(2, 4, 4)
    sym = a + np.swapaxes(a, -1, -2)
    e, v = build_run(tf.linalg.eigh, np.tril(sym) + np.triu(RNG.randn(4, 4), 1))
    ev = build_run(tf.self_adjoint_eigvals, sym)
    np.testing.assert_allclose(e, np.linalg.eigvalsh(sym), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ev, e, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sym @ v, v * e[..., None, :], atol=1e-10)


def test_rank_pinv_norms():
    a = RNG.randn(4, 2) @ RNG.randn(2, 3)  # rank 2
    rank, pinv = build_run(lambda x: (tf.linalg.matrix_rank(x), tf.linalg.pinv(x)), a)
    assert rank == 2 and rank.dtype == np.int32
    np.testing.assert_allclose(pinv, np.linalg.pinv(a), atol=1e-10)
    x = RNG.randn(3, 4, 5)
    cases = [
        (dict(), np.linalg.norm(x.ravel())),
        (dict(axis=1), np.linalg.norm(x, axis=1)),
        (dict(ord=1, axis=-1), np.linalg.norm(x, ord=1, axis=-1)),
        (dict(ord=np.inf, axis=0), np.linalg.norm(x, ord=np.inf, axis=0)),
        (dict(ord=3, axis=2), np.sum(np.abs(x) ** 3, axis=2) ** (1 / 3)),
        (dict(ord="fro", axis=(1, 2)), np.linalg.norm(x, ord="fro", axis=(1, 2))),
        (dict(ord=1, axis=(1, 2)), np.linalg.norm(x, ord=1, axis=(1, 2))),
        (dict(ord=np.inf, axis=(1, 2)), np.linalg.norm(x, ord=np.inf, axis=(1, 2))),
        (dict(ord=2, axis=(0, 2)), np.linalg.norm(x, ord=2, axis=(0, 2))),
        (dict(ord=2, axis=(1, 2), keepdims=True),
         np.linalg.norm(x, ord=2, axis=(1, 2), keepdims=True)),
    ]
    for kwargs, ref in cases:
        out = build_run(lambda t: tf.norm(t, **kwargs), x)
        np.testing.assert_allclose(out, ref, rtol=1e-10, err_msg=str(kwargs))
    normed, n = build_run(lambda t: tf.linalg.normalize(t, axis=-1), x)
    np.testing.assert_allclose(n, np.linalg.norm(x, axis=-1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(normed, x / n, rtol=1e-12)


def test_norm_bad_arguments():
    with tf.Graph().as_default():
        x = tf.ones([2, 2])
        with pytest.raises(ValueError, match="'axis' must be"):
            tf.norm(x, axis=(0, 0))
        with pytest.raises(ValueError, match="matrix norm"):
            tf.norm(x, ord=3, axis=(0, 1))
        with pytest.raises(ValueError, match="vector norm"):
            tf.norm(x, ord=-1)


def test_matvec_cross():
    a, b = RNG.randn(2, 3, 4), RNG.randn(2, 4)
    out = build_run(tf.linalg.matvec, a, b)
    np.testing.assert_allclose(out, np.einsum("bij,bj->bi", a, b), rtol=1e-12)
    u, v = RNG.randn(5, 3), RNG.randn(5, 3)
    np.testing.assert_allclose(build_run(tf.cross, u, v), np.cross(u, v), rtol=1e-12)
    iu = np.array([[1, 2, 3]], np.int32)
    assert build_run(tf.linalg.cross, iu, iu[:, ::-1]).dtype == np.int32


def test_matrix_functions():
    a = 0.5 * RNG.randn(2, 3, 3)
    sym = a + np.swapaxes(a, -1, -2)
    w, v = np.linalg.eigh(sym)
    ref = (v * np.exp(w)[..., None, :]) @ np.swapaxes(v, -1, -2)
    np.testing.assert_allclose(build_run(tf.linalg.expm, sym), ref, rtol=1e-10)
    big = 3 * RNG.randn(4, 4)  # a norm large enough for scaling and squaring
    e = build_run(tf.linalg.expm, big)
    np.testing.assert_allclose(e @ build_run(tf.linalg.expm, -big), np.eye(4), atol=1e-8)
    wb, vb = np.linalg.eig(big)
    ref = ((vb * np.exp(wb)) @ np.linalg.inv(vb)).real
    np.testing.assert_allclose(e, ref, rtol=1e-8)
    pd = spd(RNG, (2, 3, 3))
    root = build_run(tf.linalg.sqrtm, pd)
    np.testing.assert_allclose(root @ root, pd, rtol=1e-9)
    nondiag = np.array([[4.0, 1.0], [0.0, 4.0]])  # a Jordan block: not diagonalisable
    root = build_run(tf.matrix_square_root, nondiag)
    np.testing.assert_allclose(root @ root, nondiag, atol=1e-10)
    c = pd.astype(np.complex128)
    log = build_run(tf.linalg.logm, c)
    np.testing.assert_allclose(build_run(tf.linalg.expm, log), c, rtol=1e-9)


def test_lu_family():
    a = RNG.randn(2, 4, 4)
    with tf.Graph().as_default():
        res = tf.linalg.lu(tf.constant(a))
        assert type(res).__name__ == "Lu" and res.p.dtype == tf.int32
        lu, p = run(res)
        rec, inv, sol = run([tf.linalg.lu_reconstruct(lu, p), tf.linalg.lu_matrix_inverse(lu, p),
                             tf.linalg.lu_solve(lu, p, tf.constant(np.ones((2, 4, 1))))])
    low = np.tril(lu, -1) + np.eye(4)
    up = np.triu(lu)
    np.testing.assert_allclose(np.take_along_axis(a, p[..., None], -2), low @ up, atol=1e-12)
    assert np.all(np.abs(np.tril(lu, -1)) <= 1 + 1e-12)  # partial pivoting
    np.testing.assert_allclose(rec, a, atol=1e-12)
    np.testing.assert_allclose(inv, np.linalg.inv(a), atol=1e-10)
    np.testing.assert_allclose(sol, np.linalg.solve(a, np.ones((2, 4, 1))), atol=1e-10)


def _dense(sup, main, sub):
    m = main.shape[-1]
    out = np.zeros(main.shape[:-1] + (m, m))
    i = np.arange(m)
    out[..., i, i] = main
    out[..., i[:-1], i[1:]] = sup[..., :-1]
    out[..., i[1:], i[:-1]] = sub[..., 1:]
    return out


def test_tridiagonal_solve_and_matmul():
    m = 5
    diags = RNG.randn(2, 3, m)
    diags[:, 1] += 5
    dense = _dense(diags[:, 0], diags[:, 1], diags[:, 2])
    rhs = RNG.randn(2, m, 2)
    seq = [diags[:, 0, :-1], diags[:, 1], diags[:, 2, 1:]]
    with tf.Graph().as_default():
        outs = run([
            tf.linalg.tridiagonal_solve(diags, rhs),
            tf.linalg.tridiagonal_solve(seq, rhs, diagonals_format="sequence"),
            tf.linalg.tridiagonal_solve(dense, rhs, diagonals_format="matrix"),
            tf.linalg.tridiagonal_solve(diags, rhs[..., 0]),
            tf.linalg.tridiagonal_solve(diags, np.swapaxes(rhs, -1, -2), transpose_rhs=True),
            tf.linalg.tridiagonal_matmul(diags, rhs),
            tf.linalg.tridiagonal_matmul(dense, rhs, diagonals_format="matrix"),
        ])
    ref = np.linalg.solve(dense, rhs)
    for o in outs[:3] + outs[4:5]:
        np.testing.assert_allclose(o, ref, rtol=1e-10)
    np.testing.assert_allclose(outs[3], ref[..., 0], rtol=1e-10)
    np.testing.assert_allclose(outs[5], dense @ rhs, rtol=1e-12)
    np.testing.assert_allclose(outs[6], dense @ rhs, rtol=1e-12)


# =======================================================================================
# static shapes and errors
# =======================================================================================
def test_shapes_and_names():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3, 3])
        assert tf.linalg.inv(x).shape.as_list() == [None, 3, 3]
        assert tf.linalg.det(x).shape.as_list() == [None]
        assert tf.linalg.inv(x).op.type == "MatrixInverse"
        assert tf.linalg.inv(x).name == "MatrixInverse_2:0"
        e = tf.linalg.eigvalsh(x)
        assert e.shape.as_list() == [None, 3]
        s, u, v = tf.linalg.svd(tf.placeholder(tf.float64, [2, 5, 3]))
        assert v.shape.as_list() == [2, 3, 3] and u.shape.as_list() == [2, 5, 3]
        assert tf.linalg.lu(x).lu.shape.as_list() == [None, 3, 3]


def test_non_square_is_value_error():
    with tf.Graph().as_default():
        for fn in (tf.linalg.inv, tf.linalg.det, tf.cholesky, tf.linalg.eigh,
                   tf.linalg.slogdet, tf.linalg.expm, tf.linalg.lu):
            with pytest.raises(ValueError, match="Dimensions must be equal, but are 2 and 3"):
                fn(tf.zeros([2, 3]))
        with pytest.raises(ValueError, match="at least rank 2"):
            tf.linalg.inv(tf.zeros([3]))
        with pytest.raises(ValueError, match="Dimensions must be equal"):
            tf.linalg.solve(tf.zeros([3, 3]), tf.zeros([2, 1]))
        with pytest.raises(ValueError):
            tf.cross(tf.zeros([2]), tf.zeros([2]))


def test_runtime_errors_name_the_op():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64)
        cases = [(tf.linalg.inv(x, name="my_inv"), "not invertible"),
                 (tf.linalg.cholesky(x, name="my_chol"), "Cholesky decomposition was not"),
                 (tf.linalg.solve(x, tf.ones([2, 1], tf.float64), name="my_solve"),
                  "not invertible"),
                 (tf.linalg.lu(x, name="my_lu").lu, "not invertible")]
        with tf.Session() as sess:
            for t, msg in cases:
                with pytest.raises(errors.InvalidArgumentError, match=msg) as info:
                    sess.run(t, {x: [[1.0, 2.0], [2.0, 4.0]]})
                assert t.op.name in str(info.value)
            with pytest.raises(errors.InvalidArgumentError, match="square"):
                sess.run(cases[0][0], {x: np.ones((2, 3))})


# =======================================================================================
# gradients
# =======================================================================================
def _spd_of(x):
    return tf.matmul(x, x, transpose_b=True) + 3.0 * tf.eye(3, dtype=tf.float64)


def test_grad_inverse_det_logdet():
    a = well_conditioned(RNG, (2, 3, 3))
    assert grad_err(tf.linalg.inv, [a]) < 1e-6
    assert grad_err(lambda x: tf.linalg.inv(x, adjoint=True), [a]) < 1e-6
    assert grad_err(tf.linalg.det, [a]) < 1e-5
    assert grad_err(lambda x: tf.linalg.slogdet(x).log_abs_determinant, [a]) < 1e-6
    x = RNG.randn(3, 3)
    assert grad_err(lambda t: tf.linalg.logdet(_spd_of(t)), [x]) < 1e-6


def test_grad_cholesky_solve_triangular():
    x = RNG.randn(3, 3)
    assert grad_err(lambda t: tf.cholesky(_spd_of(t)), [x]) < 1e-6
    a = well_conditioned(RNG, (3, 3))
    b = RNG.randn(3, 2)
    assert grad_err(tf.linalg.solve, [a, b]) < 1e-6
    assert grad_err(lambda m, r: tf.linalg.solve(m, r, adjoint=True), [a, b]) < 1e-6
    t = np.tril(RNG.randn(2, 3, 3)) + 3 * np.eye(3)
    for lower in (True, False):
        for adjoint in (True, False):
            err = grad_err(lambda m, r: tf.linalg.triangular_solve(
                m, r, lower=lower, adjoint=adjoint), [t if lower else np.swapaxes(t, 1, 2),
                                                      b])
            assert err < 1e-6, (lower, adjoint)
    assert grad_err(lambda c, r: tf.linalg.cholesky_solve(c, r),
                    [np.linalg.cholesky(spd(RNG, (3, 3))), b]) < 1e-6


@pytest.mark.parametrize("shape", [(5, 3), (3, 5)])
def test_grad_lstsq(shape):
    a, b = RNG.randn(*shape), RNG.randn(shape[0], 2)
    assert grad_err(tf.linalg.lstsq, [a, b]) < 1e-6
    assert grad_err(lambda m, r: tf.linalg.lstsq(m, r, l2_regularizer=0.3), [a, b]) < 1e-6


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (3, 4)])
def test_grad_qr(shape):
    a = RNG.randn(*shape)
    assert grad_err(lambda x: tf.linalg.qr(x).q, [a]) < 1e-6
    assert grad_err(lambda x: tf.linalg.qr(x).r, [a]) < 1e-6


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (3, 4)])
def test_grad_svd(shape):
    a = RNG.randn(*shape)
    assert grad_err(lambda x: tf.linalg.svd(x, compute_uv=False), [a]) < 1e-6

    def sign_invariant(x):
        s, u, v = tf.linalg.svd(x)
        return tf.matmul(u * tf.expand_dims(tf.range(1.0, 1.0 + tf.cast(tf.shape(s)[-1],
                                                                       tf.float64)), 0),
                         v, adjoint_b=True) + tf.reduce_sum(s)
    assert grad_err(sign_invariant, [a]) < 1e-6


def test_grad_eigh():
    a = RNG.randn(4, 4)
    sym = a + a.T

    def projector(x):
        e, v = tf.linalg.eigh(x)
        return tf.matmul(v * tf.constant([1.0, 2.0, 3.0, 4.0], tf.float64), v, adjoint_b=True)
    assert grad_err(projector, [sym]) < 1e-6
    assert grad_err(tf.linalg.eigvalsh, [sym]) < 1e-6


def test_grad_matrix_functions_and_misc():
    a = 0.5 * RNG.randn(3, 3)
    assert grad_err(tf.linalg.expm, [a]) < 1e-6
    assert grad_err(tf.linalg.sqrtm, [spd(RNG, (3, 3))]) < 1e-6
    u, v = RNG.randn(2, 3), RNG.randn(2, 3)
    assert grad_err(tf.cross, [u, v]) < 1e-8
    x = RNG.randn(3, 4)
    for kw in (dict(), dict(ord=1, axis=1), dict(ord=np.inf, axis=0), dict(ord=3, axis=1),
               dict(ord=2, axis=(0, 1)), dict(ord="fro", axis=(0, 1))):
        assert grad_err(lambda t: tf.norm(t, **kw), [x]) < 1e-6, kw
    diags = RNG.randn(3, 4)
    diags[1] += 5
    rhs = RNG.randn(4, 2)
    assert grad_err(tf.linalg.tridiagonal_solve, [diags, rhs]) < 1e-6
    assert grad_err(tf.linalg.tridiagonal_matmul, [diags, rhs]) < 1e-8
    assert grad_err(lambda m, r: tf.linalg.pinv(m) @ r, [RNG.randn(3, 2), RNG.randn(3, 1)]) \
        < 1e-6
    lu, p = build_run(tf.linalg.lu, well_conditioned(RNG, (3, 3)))
    assert grad_err(lambda r: tf.linalg.lu_solve(lu, p, r), [RNG.randn(3, 2)]) < 1e-8


# =======================================================================================
# LinearOperator family
# =======================================================================================
def _operators():
    a = (RNG.randn(3, 3) + 3 * np.eye(3)).astype(np.float32)
    lo = tf.linalg
    diag = lo.LinearOperatorDiag([1.0, 2.0, 3.0])
    full = lo.LinearOperatorFullMatrix(a)
    small = lo.LinearOperatorFullMatrix([[1.0, 2.0], [3.0, 4.0]])
    ops = {
        "full": (full, a),
        "diag": (diag, np.diag([1.0, 2.0, 3.0])),
        "identity": (lo.LinearOperatorIdentity(3), np.eye(3)),
        "scaled": (lo.LinearOperatorScaledIdentity(3, 2.0), 2 * np.eye(3)),
        "tril": (lo.LinearOperatorLowerTriangular(a), np.tril(a)),
        "householder": (lo.LinearOperatorHouseholder([1.0, 2.0, 2.0]),
                        np.eye(3) - 2 * np.outer([1, 2, 2], [1, 2, 2]) / 9),
        "permutation": (lo.LinearOperatorPermutation([1, 2, 0]), np.eye(3)[[1, 2, 0]]),
        "toeplitz": (lo.LinearOperatorToeplitz([4.0, 1.0, 2.0], [4.0, 3.0, 5.0]),
                     [[4, 3, 5], [1, 4, 3], [2, 1, 4]]),
        "tridiag": (lo.LinearOperatorTridiag(np.float32([[1, 2, 0], [5, 6, 7], [0, 1, 2]])),
                    [[5, 1, 0], [1, 6, 2], [0, 2, 7]]),
        "composition": (lo.LinearOperatorComposition([full, diag]), a @ np.diag([1, 2, 3])),
        "inversion": (full.inverse(), np.linalg.inv(a)),
        "adjoint": (full.adjoint(), a.T),
        "low_rank": (lo.LinearOperatorLowRankUpdate(diag, [[1.0], [0.0], [2.0]]),
                     np.diag([1.0, 2, 3]) + np.outer([1, 0, 2], [1, 0, 2])),
        "kronecker": (lo.LinearOperatorKronecker([diag, small]),
                      np.kron(np.diag([1.0, 2, 3]), [[1, 2], [3, 4]])),
        "block_diag": (lo.LinearOperatorBlockDiag([diag, small]),
                       np.block([[np.diag([1.0, 2, 3]), np.zeros((3, 2))],
                                 [np.zeros((2, 3)), np.array([[1.0, 2], [3, 4]])]])),
    }
    return ops


def test_linear_operators():
    with tf.Graph().as_default():
        ops = _operators()
        with tf.Session() as sess:
            for name, (op, ref) in ops.items():
                ref = np.asarray(ref, np.float64)
                n = ref.shape[-1]
                x = np.linspace(-1, 1, 2 * n).reshape(n, 2).astype(np.float32)
                assert op.shape.as_list() == list(ref.shape), name
                out = sess.run([op.to_dense(), op.matmul(x), op.matmul(x, adjoint=True),
                                op.solve(x), op.solve(x, adjoint=True), op.matvec(x[:, 0]),
                                op.determinant(), op.log_abs_determinant(), op.trace(),
                                op.diag_part()])
                want = [ref, ref @ x, ref.T @ x, np.linalg.solve(ref, x),
                        np.linalg.solve(ref.T, x), ref @ x[:, 0], np.linalg.det(ref),
                        np.log(abs(np.linalg.det(ref))), np.trace(ref), np.diag(ref)]
                for i, (o, w) in enumerate(zip(out, want)):
                    np.testing.assert_allclose(o, w, rtol=2e-4, atol=2e-5,
                                               err_msg=f"{name} #{i}")
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="non-singular"):
            tf.linalg.LinearOperatorFullMatrix(np.eye(2), is_positive_definite=True,
                                               is_non_singular=False)
        with pytest.raises(TypeError, match="same dtype"):
            tf.linalg.LinearOperatorComposition([
                tf.linalg.LinearOperatorDiag([1.0]),
                tf.linalg.LinearOperatorDiag(np.float64([1.0]))])
