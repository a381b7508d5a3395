"""tf.linalg programs: solvers, decompositions, matrix functions and composites, their
errors and their gradients, under TensorFlow and flowrt.

Decompositions whose factors are unique only up to signs (QR, SVD, eigenvectors) are
compared through sign-independent quantities; Python composites that TF 2.x builds from
other ops than TF 1.15 (``expm``) are compared on values, dtypes and shapes only.
"""
from __future__ import annotations

import numpy as np
import pytest

from compat_harness import STATIC_KEYS, Run, run_both

RNG = np.random.RandomState(42)
A = (RNG.randn(2, 3, 3) + 4 * np.eye(3)).astype(np.float64)
B = RNG.randn(2, 3, 2)
SPD = A @ np.swapaxes(A, -1, -2) + 3 * np.eye(3)
RECT = RNG.randn(5, 3)
SHAPES_ONLY = ("kind", "dtype", "shape")


def _progs(d: dict) -> list:
    return [pytest.param(v, id=k) for k, v in sorted(d.items())]


VALUES = {
    "inv": lambda tf: tf.linalg.inv(tf.constant(A)),
    "inv_adjoint_f32": lambda tf: tf.linalg.inv(tf.constant(A, tf.float32), adjoint=True),
    "matrix_inverse": lambda tf: tf.matrix_inverse(tf.constant(A)),
    "inv_complex": lambda tf: tf.linalg.inv(tf.constant(A + 1j * A[::-1])),
    "det": lambda tf: tf.linalg.det(tf.constant(A)),
    "matrix_determinant": lambda tf: tf.matrix_determinant(tf.constant(A, tf.float32)),
    "slogdet": lambda tf: tf.linalg.slogdet(tf.constant(A)),
    "logdet": lambda tf: tf.linalg.logdet(tf.constant(SPD)),
    "cholesky": lambda tf: tf.linalg.cholesky(tf.constant(SPD)),
    "cholesky_top": lambda tf: tf.cholesky(tf.constant(SPD, tf.float32)),
    "cholesky_solve": lambda tf: tf.linalg.cholesky_solve(
        tf.linalg.cholesky(tf.constant(SPD)), tf.constant(B)),
    "solve": lambda tf: tf.linalg.solve(tf.constant(A), tf.constant(B)),
    "solve_adjoint": lambda tf: tf.matrix_solve(tf.constant(A), tf.constant(B), adjoint=True),
    "triangular_lower": lambda tf: tf.linalg.triangular_solve(tf.constant(A), tf.constant(B)),
    "triangular_upper_adj": lambda tf: tf.matrix_triangular_solve(
        tf.constant(A), tf.constant(B), lower=False, adjoint=True),
    "lstsq_over": lambda tf: tf.linalg.lstsq(tf.constant(RECT), tf.constant(RECT[:, :2])),
    "lstsq_under": lambda tf: tf.matrix_solve_ls(tf.constant(RECT.T), tf.constant(B[0])),
    "lstsq_l2": lambda tf: tf.linalg.lstsq(tf.constant(RECT), tf.constant(RECT[:, :2]),
                                           l2_regularizer=0.5),
    "lstsq_slow": lambda tf: tf.linalg.lstsq(tf.constant(RECT), tf.constant(RECT[:, :2]),
                                             fast=False),
    "svd_values": lambda tf: tf.linalg.svd(tf.constant(RECT), compute_uv=False),
    "svd_top": lambda tf: tf.svd(tf.constant(A, tf.float32), compute_uv=False),
    "eigvalsh": lambda tf: tf.linalg.eigvalsh(tf.constant(SPD)),
    "self_adjoint_eigvals": lambda tf: tf.self_adjoint_eigvals(tf.constant(SPD, tf.float32)),
    "norm_default": lambda tf: tf.norm(tf.constant(B)),
    "norm_axis": lambda tf: tf.linalg.norm(tf.constant(B), axis=1, keepdims=True),
    "norm_l1": lambda tf: tf.norm(tf.constant(B), ord=1, axis=-1),
    "norm_inf": lambda tf: tf.norm(tf.constant(B), ord=np.inf, axis=0),
    "norm_p3": lambda tf: tf.norm(tf.constant(B), ord=3, axis=2),
    "norm_fro": lambda tf: tf.norm(tf.constant(B), ord="fro", axis=[1, 2]),
    "norm_mat1": lambda tf: tf.norm(tf.constant(B), ord=1, axis=(1, 2)),
    "norm_matinf": lambda tf: tf.norm(tf.constant(B), ord=np.inf, axis=(-2, -1)),
    "norm_complex": lambda tf: tf.norm(tf.constant(A + 1j)),
    "normalize": lambda tf: tf.linalg.normalize(tf.constant(B), axis=1),
    "matvec": lambda tf: tf.linalg.matvec(tf.constant(A), tf.constant(B[..., 0])),
    "cross": lambda tf: tf.linalg.cross(tf.constant(A), tf.constant(SPD)),
    "cross_top_int": lambda tf: tf.cross(tf.constant([[1, 2, 3]]), tf.constant([[4, 5, 7]])),
    "matrix_rank": lambda tf: tf.linalg.matrix_rank(tf.constant(RECT @ RECT.T)),
    "pinv": lambda tf: tf.linalg.pinv(tf.constant(RECT)),
    "sqrtm": lambda tf: tf.linalg.sqrtm(tf.constant(SPD)),
    "matrix_square_root": lambda tf: tf.matrix_square_root(tf.constant(SPD, tf.float32)),
    "logm": lambda tf: tf.linalg.logm(tf.constant(SPD.astype(np.complex128))),
    "lu": lambda tf: tf.linalg.lu(tf.constant(A)),
    "lu_int64": lambda tf: tf.linalg.lu(tf.constant(A, tf.float32), output_idx_type=tf.int64),
    "tridiagonal_solve": lambda tf: tf.linalg.tridiagonal_solve(
        tf.constant(A + [[0.0], [5.0], [0.0]]), tf.constant(B)),
    "tridiagonal_matmul": lambda tf: tf.linalg.tridiagonal_matmul(
        tf.constant(A), tf.constant(B)),
}


# float32 programs: LAPACK (numpy) and Eigen round differently
F32 = {"inv_adjoint_f32", "matrix_determinant", "cholesky_top", "svd_top",
       "self_adjoint_eigvals", "matrix_square_root", "lu_int64"}
# TF 1.15's tf.linalg.triangular_solve was the raw op; TF 2.x wraps it in a name scope
RAW_IN_TF115 = {"triangular_lower", "triangular_upper_adj"}


@pytest.mark.parametrize("name", sorted(VALUES))
def test_values(name):
    keys = SHAPES_ONLY + ("op_type",) if name in RAW_IN_TF115 else STATIC_KEYS
    run_both(VALUES[name], rtol=1e-4 if name in F32 else 1e-8,
             atol=1e-5 if name in F32 else 1e-9, static_keys=keys)


# composites that TF builds differently (or that cannot be compared factor by factor)
SHAPE_AND_VALUE = {
    "expm": lambda tf: tf.linalg.expm(tf.constant(0.3 * A)),
    "expm_large": lambda tf: tf.linalg.expm(tf.constant(2.0 * A[0])),
    "lu_reconstruct": lambda tf: tf.linalg.lu_reconstruct(*tf.linalg.lu(tf.constant(A))),
    "lu_matrix_inverse": lambda tf: tf.linalg.lu_matrix_inverse(*tf.linalg.lu(tf.constant(A))),
    "lu_solve": lambda tf: tf.linalg.lu_solve(*tf.linalg.lu(tf.constant(A)), tf.constant(B)),
    "qr_invariants": lambda tf: _qr_invariants(tf, False),
    "qr_full_invariants": lambda tf: _qr_invariants(tf, True),
    "svd_invariants": lambda tf: _svd_invariants(tf, False),
    "svd_full_invariants": lambda tf: _svd_invariants(tf, True),
    "eigh_invariants": lambda tf: _eigh_invariants(tf),
    "norm_2": lambda tf: tf.norm(tf.constant(B), ord=2, axis=(0, 2)),
    "tridiag_sequence": lambda tf: tf.linalg.tridiagonal_solve(
        [tf.constant(B[0, :2, 0]), tf.constant([5.0, 6.0, 7.0], tf.float64),
         tf.constant(B[1, 1:, 1])], tf.constant(B[0]), diagonals_format="sequence"),
    "tridiag_matrix": lambda tf: tf.linalg.tridiagonal_solve(
        tf.constant(A), tf.constant(B), diagonals_format="matrix"),
}


def _qr_invariants(tf, full):
    q, r = tf.linalg.qr(tf.constant(RECT.T), full_matrices=full)
    return [tf.abs(r), tf.matmul(q, r), tf.shape(q)]


def _svd_invariants(tf, full):
    s, u, v = tf.linalg.svd(tf.constant(RECT), full_matrices=full)
    k = 3
    recon = tf.matmul(u[:, :k] * s, v[:, :k], adjoint_b=True)
    return [s, recon, tf.shape(u), tf.shape(v)]


def _eigh_invariants(tf):
    e, v = tf.linalg.eigh(tf.constant(SPD))
    return [e, tf.matmul(v * e[:, None, :], v, adjoint_b=True)]


@pytest.mark.parametrize("name", sorted(SHAPE_AND_VALUE))
def test_values_not_names(name):
    # TF's matrix 2-norm permutes axes with map_fn and so loses the static shape that
    # flowrt keeps ([3] where TF says [None]); compare its values only
    keys = ("kind", "dtype") if name == "norm_2" else SHAPES_ONLY
    run_both(SHAPE_AND_VALUE[name], rtol=1e-8, atol=1e-9, static_keys=keys)


def test_static_shapes_with_unknown_dims():
    def program(tf):
        x = tf.placeholder(tf.float64, [None, 3, 3])
        r = tf.placeholder(tf.float64, [None, 4])
        outs = [tf.linalg.inv(x), tf.linalg.det(x), tf.linalg.slogdet(x),
                tf.linalg.cholesky(x), tf.linalg.solve(x, tf.ones([2, 3, 1], tf.float64)),
                tf.linalg.qr(r), tf.linalg.qr(r, full_matrices=True),
                tf.linalg.svd(r), tf.linalg.svd(r, full_matrices=True),
                tf.linalg.eigh(x), tf.linalg.eigvalsh(x), tf.linalg.lu(x),
                tf.linalg.svd(r, compute_uv=False)]
        return Run(outs, {x: A, r: RECT[:4].T})

    run_both(program, rtol=1e-8, atol=1e-9, values=False)


ERRORS = {
    "non_square_inv": lambda tf: tf.linalg.inv(tf.zeros([2, 3])),
    "non_square_det": lambda tf: tf.linalg.det(tf.zeros([4, 2, 3])),
    "non_square_cholesky": lambda tf: tf.cholesky(tf.zeros([2, 3])),
    "non_square_eigh": lambda tf: tf.linalg.eigh(tf.zeros([2, 3])),
    "rank1_inv": lambda tf: tf.linalg.inv(tf.zeros([3])),
    "solve_rows": lambda tf: tf.linalg.solve(tf.zeros([3, 3]), tf.zeros([2, 1])),
    "cross_dim": lambda tf: tf.cross(tf.zeros([2]), tf.zeros([2])),
    "singular_inv": lambda tf: tf.linalg.inv(tf.constant([[1.0, 2.0], [2.0, 4.0]])),
    "singular_solve": lambda tf: tf.linalg.solve(tf.constant([[1.0, 2.0], [2.0, 4.0]]),
                                                 tf.ones([2, 1])),
    "not_pd_cholesky": lambda tf: tf.cholesky(tf.constant([[1.0, 2.0], [2.0, 1.0]])),
    "singular_lu": lambda tf: tf.linalg.lu(tf.constant([[1.0, 2.0], [2.0, 4.0]])),
    "norm_bad_axis": lambda tf: tf.norm(tf.ones([2, 2]), axis=(0, 0)),
    "norm_bad_ord": lambda tf: tf.norm(tf.ones([2, 2]), ord=-1),
    "norm_bad_matrix_ord": lambda tf: tf.norm(tf.ones([2, 2]), ord=3, axis=(0, 1)),
    "singular_det": lambda tf: tf.linalg.det(tf.constant([[1.0, 2.0], [2.0, 4.0]])),
    "singular_triangular": lambda tf: tf.linalg.triangular_solve(
        tf.constant([[0.0, 0.0], [2.0, 1.0]]), tf.ones([2, 1])),
}


# TF 2.x's CPU Cholesky returns NaNs for a matrix that is not positive definite
NOT_PD_TF115 = dict(was=None, error_class="InvalidArgumentError", error_phase="run#0",
                    reason="TF 1.15's Cholesky kernel raised 'Cholesky decomposition was not "
                           "successful. The input might not be valid.'")


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors(name):
    keys = SHAPES_ONLY if name == "singular_triangular" else STATIC_KEYS  # see RAW_IN_TF115
    run_both(ERRORS[name], tf115=NOT_PD_TF115 if name == "not_pd_cholesky" else None,
             static_keys=keys)


def _grads(build, *values):
    def program(tf):
        xs = [tf.constant(v) for v in values]
        y = build(tf, *xs)
        return tf.gradients(y, xs)

    return program


GRADS = {
    "inv": _grads(lambda tf, a: tf.linalg.inv(a), A),
    "det": _grads(lambda tf, a: tf.linalg.det(a), A),
    "slogdet": _grads(lambda tf, a: tf.linalg.slogdet(a)[1], A),
    "logdet": _grads(lambda tf, a: tf.linalg.logdet(a), SPD),
    "cholesky": _grads(lambda tf, a: tf.cholesky(a), SPD),
    "solve": _grads(lambda tf, a, b: tf.linalg.solve(a, b), A, B),
    "solve_adjoint": _grads(lambda tf, a, b: tf.linalg.solve(a, b, adjoint=True), A, B),
    "triangular": _grads(lambda tf, a, b: tf.linalg.triangular_solve(a, b), A, B),
    "triangular_upper_adj": _grads(lambda tf, a, b: tf.linalg.triangular_solve(
        a, b, lower=False, adjoint=True), A, B),
    "lstsq": _grads(lambda tf, a, b: tf.linalg.lstsq(a, b), RECT, RECT[:, :2]),
    "lstsq_under": _grads(lambda tf, a, b: tf.linalg.lstsq(a, b), RECT.T, B[0]),
    "qr_r": _grads(lambda tf, a: tf.abs(tf.linalg.qr(a)[1]), RECT),
    "svd_s": _grads(lambda tf, a: tf.linalg.svd(a, compute_uv=False), RECT),
    "svd_uv": _grads(lambda tf, a: _svd_sign_free(tf, a), RECT),
    "svd_uv_wide": _grads(lambda tf, a: _svd_sign_free(tf, a), RECT.T),
    "eigh": _grads(lambda tf, a: _eigh_sign_free(tf, a), SPD),
    "eigvalsh": _grads(lambda tf, a: tf.linalg.eigvalsh(a), SPD),
    "expm": _grads(lambda tf, a: tf.linalg.expm(a), 0.3 * A),
    "sqrtm": _grads(lambda tf, a: tf.linalg.sqrtm(a), SPD),
    "cross": _grads(lambda tf, a, b: tf.cross(a, b), A, SPD),
    "norm": _grads(lambda tf, a: tf.norm(a, ord=1, axis=(1, 2)), A),
    "norm_2": _grads(lambda tf, a: tf.norm(a, ord=2, axis=(1, 2)), A),
    "tridiagonal_solve": _grads(lambda tf, d, b: tf.linalg.tridiagonal_solve(d, b),
                                A + [[0.0], [5.0], [0.0]], B),
    "tridiagonal_matmul": _grads(lambda tf, d, b: tf.linalg.tridiagonal_matmul(d, b), A, B),
    "pinv": _grads(lambda tf, a: tf.linalg.pinv(a), RECT),
}


def _svd_sign_free(tf, a):
    s, u, v = tf.linalg.svd(a)
    w = tf.range(1.0, 4.0, dtype=tf.float64)
    return tf.matmul(u * w, v, adjoint_b=True)


def _eigh_sign_free(tf, a):
    e, v = tf.linalg.eigh(a)
    return tf.matmul(v * tf.constant([1.0, 2.0, 3.0], tf.float64), v, adjoint_b=True)


@pytest.mark.parametrize("program", _progs(GRADS))
def test_gradients(program):
    run_both(program, rtol=1e-6, atol=1e-8, static_keys=SHAPES_ONLY)


# -- LinearOperator family: the same operator's methods under both implementations ---------
def _lo(make):
    def program(tf):
        op = make(tf)
        x = tf.constant(np.linspace(-1, 1, 2 * 3).reshape(3, 2), op.dtype)
        return [op.to_dense(), op.matmul(x), op.matmul(x, adjoint=True), op.solve(x),
                op.determinant(), op.log_abs_determinant(), op.trace(), op.diag_part(),
                op.matvec(x[:, 0])]

    return program


OPERATORS = {
    "full": lambda tf: tf.linalg.LinearOperatorFullMatrix(A[0]),
    "diag": lambda tf: tf.linalg.LinearOperatorDiag(tf.constant([1.0, -2.0, 3.0])),
    "identity": lambda tf: tf.linalg.LinearOperatorIdentity(3, dtype=tf.float64),
    "scaled_identity": lambda tf: tf.linalg.LinearOperatorScaledIdentity(3, 2.5),
    "lower_triangular": lambda tf: tf.linalg.LinearOperatorLowerTriangular(A[1]),
    "composition": lambda tf: tf.linalg.LinearOperatorComposition(
        [tf.linalg.LinearOperatorFullMatrix(A[0]), tf.linalg.LinearOperatorFullMatrix(A[1])]),
    "inversion": lambda tf: tf.linalg.LinearOperatorInversion(
        tf.linalg.LinearOperatorFullMatrix(A[0])),
    "adjoint": lambda tf: tf.linalg.LinearOperatorAdjoint(
        tf.linalg.LinearOperatorFullMatrix(A[0])),
    "householder": lambda tf: tf.linalg.LinearOperatorHouseholder(
        tf.constant([1.0, 2.0, 2.0], tf.float64)),
    "toeplitz": lambda tf: tf.linalg.LinearOperatorToeplitz(
        tf.constant([4.0, 1.0, 2.0]), tf.constant([4.0, 3.0, 5.0])),
    "tridiag": lambda tf: tf.linalg.LinearOperatorTridiag(tf.constant(A[0] + [[0], [5], [0]])),
    "low_rank_update": lambda tf: tf.linalg.LinearOperatorLowRankUpdate(
        tf.linalg.LinearOperatorDiag(tf.constant([1.0, 2.0, 3.0], tf.float64)),
        tf.constant([[1.0], [0.0], [2.0]], tf.float64)),
    "permutation": lambda tf: tf.linalg.LinearOperatorPermutation(
        tf.constant([1, 2, 0]), dtype=tf.float64),
}


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_linear_operators(name):
    # the operators are Python composites built from other ops than TF's: values only
    run_both(_lo(OPERATORS[name]), rtol=1e-5, atol=1e-6, static_keys=("kind", "dtype"))
