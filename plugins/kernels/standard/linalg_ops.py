"""tf.linalg: decompositions, solvers and matrix functions, with gradients.

The ops keep TF 1.15's names, signatures and output orders (``Svd`` gives ``s, u, v``;
``Qr``, ``LogMatrixDeterminant`` and ``Lu`` give named tuples) and batch over leading
dimensions. Kernels use the device's ``xp.linalg`` where it has the routine and numpy
(on the host) where it does not (LU, the matrix exponential, logarithm and square root).
Gradients follow TF's ``linalg_grad.py`` formulas; Python composites (``cholesky_solve``,
``logdet``, ``pinv``, ``norm``, ``lstsq`` with ``fast=True`` ...) are differentiated through
their parts, as in TF.
"""
from __future__ import annotations

import collections
from typing import Any, Callable

import numpy as np

from flowrt import dtypes as _dt
from flowrt.device import host_array
from flowrt.graph import Tensor, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import ks
from ._common import invalid as _invalid

_LA_TYPES = "T: {double, float, half, complex64, complex128}"


def _tf() -> Any:
    import flowrt
    return flowrt


def _fmt(d: Any) -> str:
    return "[" + ",".join("?" if x is None else str(x) for x in d) + "]"


def _where(op: Any) -> str:
    shapes = ", ".join("?" if t.shape.ndims is None else _fmt(t.shape.as_tuple())
                       for t in op.inputs)
    return f" for '{op.name}' (op: '{op.type}') with input shapes: {shapes}."


def _merge(a: int | None, b: int | None, op: Any) -> int | None:
    if a is not None and b is not None and a != b:
        raise ValueError(f"Dimensions must be equal, but are {a} and {b}{_where(op)}")
    return a if a is not None else b


def _rank_at_least(t: Tensor, n: int, op: Any) -> tuple | None:
    d = t.shape.as_tuple()
    if d is not None and len(d) < n:
        raise ValueError(f"Shape must be at least rank {n} but is rank {len(d)}{_where(op)}")
    return d


def _merge_batch(a: tuple, b: tuple, op: Any) -> tuple:
    if len(a) != len(b):
        raise ValueError(f"Shape must be rank {len(a) + 2} but is rank {len(b) + 2}"
                         f"{_where(op)}")
    return tuple(_merge(x, y, op) for x, y in zip(a, b))


def _broadcast_batch(a: tuple, b: tuple, op: Any) -> tuple:
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(pa, pb):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x is None or y is None:
            out.append(x if y is None else y)
        else:
            out.append(_merge(x, y, op))
    return tuple(out)


def _square(op: Any, i: int = 0) -> tuple | None:
    """The static dims of input ``i``, checked to be a batch of square matrices."""
    d = _rank_at_least(op.inputs[i], 2, op)
    if d is None:
        return None
    n = _merge(d[-2], d[-1], op)
    return d[:-2] + (n, n)


def _square_shape(op: Any) -> list[TensorShape]:
    d = _square(op)
    return [unknown_shape() if d is None else TensorShape(d)]


def _batch_scalar_shape(op: Any) -> list[TensorShape]:
    d = _square(op)
    s = unknown_shape() if d is None else TensorShape(d[:-2])
    return [s] * len(op.outputs)


# =======================================================================================
# kernel helpers
# =======================================================================================
def _host(xp: Any, a: Any) -> np.ndarray:
    """``a`` in host memory: as it is on the CPU, else through the ``to_host`` of the
    device type holding it (the device-array contract)."""
    return a if xp is np else host_array(a)


def _work_dtype(dt: Any) -> Any:
    """numpy's linalg has no half: compute half in float32."""
    return np.float32 if np.dtype(dt) == np.float16 else np.dtype(dt)


def _check_square(a: Any, what: str = "Input matrix must be square.") -> None:
    if np.ndim(a) < 2:
        raise _invalid(f"Input tensor 0 must have rank >= 2, got {np.ndim(a)}")
    if a.shape[-1] != a.shape[-2]:
        raise _invalid(what)


def _adj(xp: Any, a: Any) -> Any:
    return xp.conj(xp.swapaxes(a, -1, -2))


def _solve_or_raise(xp: Any, a: Any, b: Any, msg: str) -> Any:
    if a.shape[-1] == 0:
        return xp.zeros(b.shape, dtype=b.dtype)
    try:
        out = xp.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise _invalid(msg) from None
    if xp is not np and not bool(xp.isfinite(out).all()) and bool(xp.isfinite(a).all()):
        raise _invalid(msg)  # CuPy does not raise for a singular matrix
    return out


def _tril_solve(xp: Any, a: Any, b: Any, lower: bool, unit: bool = False) -> Any:
    """Solves ``tri(a) x = b`` by substitution (batched); zero pivots give inf/nan as
    LAPACK's trsm does."""
    n = a.shape[-1]
    x = xp.array(xp.broadcast_to(b, np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
                                 + b.shape[-2:]), dtype=np.result_type(a.dtype, b.dtype))
    a = xp.broadcast_to(a, x.shape[:-2] + a.shape[-2:])
    order = range(n) if lower else range(n - 1, -1, -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in order:
            if lower:
                acc = x[..., i, :] - xp.einsum("...j,...jk->...k", a[..., i, :i], x[..., :i, :])
            else:
                acc = x[..., i, :] - xp.einsum("...j,...jk->...k", a[..., i, i + 1:],
                                               x[..., i + 1:, :])
            x[..., i, :] = acc if unit else acc / a[..., i, i:i + 1]
    return x


# =======================================================================================
# MatrixInverse, MatrixDeterminant, LogMatrixDeterminant
# =======================================================================================
ks.op(
    OpDef("MatrixInverse", inputs=["input: T"], outputs=["output: T"],
          attrs=[_LA_TYPES, "adjoint: bool = false"], shape_fn=_square_shape,
          doc="The inverse (or the inverse of the adjoint) of batched square matrices."),
    OpDef("MatrixDeterminant", inputs=["input: T"], outputs=["output: T"],
          attrs=[_LA_TYPES], shape_fn=_batch_scalar_shape,
          doc="Determinants of batched square matrices."),
    OpDef("LogMatrixDeterminant", inputs=["input: T"],
          outputs=["sign: T", "log_abs_determinant: T"], attrs=[_LA_TYPES],
          shape_fn=_batch_scalar_shape,
          doc="Sign and log of the absolute value of the determinant."),
)


@ks.kernel("MatrixInverse", expensive=True)
def _matrix_inverse_kernel(ctx: Any) -> Callable:
    xp, adjoint = ctx.xp, bool(ctx.attrs.get("adjoint", False))
    dt = ctx.output_dtypes[0].np

    def matrix_inverse(a: Any) -> Any:
        _check_square(a)
        w = a.astype(_work_dtype(dt), copy=False)
        if adjoint:
            w = _adj(xp, w)
        eye = xp.broadcast_to(xp.eye(w.shape[-1], dtype=w.dtype), w.shape)
        return _solve_or_raise(xp, w, eye, "Input is not invertible.").astype(dt, copy=False)

    return matrix_inverse


@ks.kernel("MatrixDeterminant", expensive=True)
def _matrix_determinant_kernel(ctx: Any) -> Callable:
    xp, dt = ctx.xp, ctx.output_dtypes[0].np

    def matrix_determinant(a: Any) -> Any:
        _check_square(a)
        if a.shape[-1] == 0:
            return xp.ones(a.shape[:-2], dtype=dt)
        return xp.asarray(xp.linalg.det(a.astype(_work_dtype(dt), copy=False))).astype(dt)

    return matrix_determinant


@ks.kernel("LogMatrixDeterminant", expensive=True)
def _log_matrix_determinant_kernel(ctx: Any) -> Callable:
    xp, dt = ctx.xp, ctx.output_dtypes[0].np

    def log_matrix_determinant(a: Any) -> Any:
        _check_square(a)
        if a.shape[-1] == 0:
            return xp.ones(a.shape[:-2], dtype=dt), xp.zeros(a.shape[:-2], dtype=dt)
        sign, logabs = xp.linalg.slogdet(a.astype(_work_dtype(dt), copy=False))
        return xp.asarray(sign).astype(dt), xp.asarray(logabs).astype(dt)

    return log_matrix_determinant


LogMatrixDeterminant = collections.namedtuple("LogMatrixDeterminant",
                                              ["sign", "log_abs_determinant"])


@ks.api("linalg.inv", "matrix_inverse")
def matrix_inverse(input: Any, adjoint: bool = False,  # noqa: A002
                   name: str | None = None) -> Tensor:
    """The inverse of each square matrix of ``input`` (of its adjoint if ``adjoint``);
    InvalidArgumentError "Input is not invertible." for a singular matrix."""
    return apply_op("MatrixInverse", name=name, input=input, adjoint=adjoint)


@ks.api("linalg.det", "matrix_determinant")
def matrix_determinant(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The determinant of each square matrix of ``input`` (shape ``input.shape[:-2]``)."""
    return apply_op("MatrixDeterminant", name=name, input=input)


@ks.api("linalg.slogdet")
def log_matrix_determinant(input: Any, name: str | None = None) -> Any:  # noqa: A002
    """``(sign, log_abs_determinant)`` of each square matrix: ``det = sign * exp(log)``."""
    return LogMatrixDeterminant(*apply_op("LogMatrixDeterminant", name=name, input=input))


@ks.api("linalg.logdet")
def logdet(matrix: Any, name: str | None = None) -> Tensor:
    """``log(det(matrix))`` of Hermitian positive definite matrices, through their
    Cholesky factor: ``2 * sum(log(real(diag(chol))))``."""
    tf = _tf()
    with name_scope(name, "logdet", [matrix]):
        chol = cholesky(matrix)
        return 2.0 * tf.reduce_sum(
            tf.log(tf.cast(tf.real(tf.matrix_diag_part(chol)), chol.dtype)), axis=[-1])


@ks.gradient("MatrixInverse")
def _matrix_inverse_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    ainv = op.outputs[0]
    if op.get_attr("adjoint"):  # TF's formula ignores the attr; this is the true gradient
        return [-tf.matmul(ainv, tf.matmul(grad, ainv, adjoint_a=True))]
    return [-tf.matmul(ainv, tf.matmul(grad, ainv, adjoint_b=True), adjoint_a=True)]


def _det_multipliers(op: Any, scale: Tensor, c: Tensor) -> Tensor:
    tf = _tf()
    a_adj_inv = matrix_inverse(op.inputs[0], adjoint=True)
    shape = tf.concat([tf.shape(c), [1, 1]], 0)
    return tf.reshape(scale, shape) * a_adj_inv


@ks.gradient("MatrixDeterminant")
def _matrix_determinant_grad(op: Any, grad: Tensor) -> list[Any]:
    c = op.outputs[0]
    return [_det_multipliers(op, grad * c, c)]


@ks.gradient("LogMatrixDeterminant")
def _log_matrix_determinant_grad(op: Any, _: Tensor, grad_b: Tensor) -> list[Any]:
    return [_det_multipliers(op, grad_b, op.outputs[1])]


# =======================================================================================
# Cholesky, MatrixSolve, MatrixTriangularSolve, MatrixSolveLs
# =======================================================================================
def _solve_shape(op: Any) -> list[TensorShape]:
    m = _square(op, 0)
    r = _rank_at_least(op.inputs[1], 2, op)
    if m is None or r is None:
        if m is not None:
            return [TensorShape(m[:-2] + (None, None))]
        return [unknown_shape() if r is None else TensorShape(r[:-2] + (None, r[-1]))]
    batch = _merge_batch(m[:-2], r[:-2], op)
    n = _merge(m[-1], r[-2], op)
    return [TensorShape(batch + (n, r[-1]))]


def _triangular_solve_shape(op: Any) -> list[TensorShape]:
    m = _square(op, 0)
    r = _rank_at_least(op.inputs[1], 2, op)
    if m is None or r is None:
        return [unknown_shape()]
    batch = _broadcast_batch(m[:-2], r[:-2], op)
    n = _merge(m[-1], r[-2], op)
    return [TensorShape(batch + (n, r[-1]))]


def _solve_ls_shape(op: Any) -> list[TensorShape]:
    m = _rank_at_least(op.inputs[0], 2, op)
    r = _rank_at_least(op.inputs[1], 2, op)
    ld = op.inputs[2].shape.ndims
    if ld is not None and ld != 0:
        raise ValueError(f"Shape must be rank 0 but is rank {ld}{_where(op)}")
    if m is None or r is None:
        return [unknown_shape()]
    batch = _merge_batch(m[:-2], r[:-2], op)
    _merge(m[-2], r[-2], op)
    return [TensorShape(batch + (m[-1], r[-1]))]


ks.op(
    OpDef("Cholesky", inputs=["input: T"], outputs=["output: T"], attrs=[_LA_TYPES],
          shape_fn=_square_shape,
          doc="Lower Cholesky factors of Hermitian positive definite matrices."),
    OpDef("MatrixSolve", inputs=["matrix: T", "rhs: T"], outputs=["output: T"],
          attrs=[_LA_TYPES, "adjoint: bool = false"], shape_fn=_solve_shape,
          doc="Solves matrix @ output = rhs (or adjoint(matrix) @ output = rhs)."),
    OpDef("MatrixTriangularSolve", inputs=["matrix: T", "rhs: T"], outputs=["output: T"],
          attrs=[_LA_TYPES, "lower: bool = true", "adjoint: bool = false"],
          shape_fn=_triangular_solve_shape,
          doc="Solves triangular systems (batch dimensions broadcast)."),
    OpDef("MatrixSolveLs", inputs=["matrix: T", "rhs: T", "l2_regularizer: double"],
          outputs=["output: T"], attrs=[_LA_TYPES, "fast: bool = true"],
          shape_fn=_solve_ls_shape, doc="Regularised linear least squares."),
)


@ks.kernel("Cholesky", expensive=True)
def _cholesky_kernel(ctx: Any) -> Callable:
    xp, dt = ctx.xp, ctx.output_dtypes[0].np
    msg = "Cholesky decomposition was not successful. The input might not be valid."

    def cholesky_kernel(a: Any) -> Any:
        _check_square(a)
        if a.shape[-1] == 0:
            return xp.zeros(a.shape, dtype=dt)
        w = a.astype(_work_dtype(dt), copy=False)
        low = xp.tril(w)  # only the lower triangle is read, as in TF
        herm = low + _adj(xp, xp.tril(w, -1))
        try:
            out = xp.linalg.cholesky(herm)
        except np.linalg.LinAlgError:
            raise _invalid(msg) from None
        if not bool(xp.isfinite(out).all()) and bool(xp.isfinite(herm).all()):
            raise _invalid(msg)
        return out.astype(dt, copy=False)

    return cholesky_kernel


def _check_rhs(a: Any, b: Any) -> None:
    """``b`` is a matrix (batch) with as many rows as square ``a`` has columns."""
    if np.ndim(b) < 2 or b.shape[-2] != a.shape[-1]:
        raise _invalid(f"Input matrix and right-hand side must have the same number of "
                       f"rows: {np.shape(a)} vs. {np.shape(b)}")


@ks.kernel("MatrixSolve", expensive=True)
def _matrix_solve_kernel(ctx: Any) -> Callable:
    xp, dt = ctx.xp, ctx.output_dtypes[0].np
    adjoint = bool(ctx.attrs.get("adjoint", False))

    def matrix_solve(a: Any, b: Any) -> Any:
        _check_square(a)
        _check_rhs(a, b)
        if a.shape[:-2] != b.shape[:-2]:
            raise _invalid(f"All input tensors must have the same outer dimensions: "
                           f"{np.shape(a)} vs. {np.shape(b)}")
        w = a.astype(_work_dtype(dt), copy=False)
        if adjoint:
            w = _adj(xp, w)
        out = _solve_or_raise(xp, w, b.astype(w.dtype, copy=False),
                              "Input matrix is not invertible.")
        return out.astype(dt, copy=False)

    return matrix_solve


@ks.kernel("MatrixTriangularSolve", expensive=True)
def _matrix_triangular_solve_kernel(ctx: Any) -> Callable:
    xp, dt = ctx.xp, ctx.output_dtypes[0].np
    lower = bool(ctx.attrs.get("lower", True))
    adjoint = bool(ctx.attrs.get("adjoint", False))

    def matrix_triangular_solve(a: Any, b: Any) -> Any:
        _check_square(a)
        _check_rhs(a, b)
        try:
            np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise _invalid(f"Incompatible batch shapes: {np.shape(a)} vs. "
                           f"{np.shape(b)}") from None
        w = a.astype(_work_dtype(dt), copy=False)
        tri = xp.tril(w) if lower else xp.triu(w)
        if adjoint:
            tri = _adj(xp, tri)
        out = _tril_solve(xp, tri, b.astype(w.dtype, copy=False), lower != adjoint)
        return out.astype(dt, copy=False)

    return matrix_triangular_solve


@ks.kernel("MatrixSolveLs", expensive=True)
def _matrix_solve_ls_kernel(ctx: Any) -> Callable:
    xp, dt = ctx.xp, ctx.output_dtypes[0].np
    fast = bool(ctx.attrs.get("fast", True))
    rank_msg = ("Input matrix was rank deficient or ill-conditioned. Try setting fast=False "
                "or provide a larger l2_regularizer > 0.")

    def matrix_solve_ls(a: Any, b: Any, l2: Any) -> Any:
        if np.ndim(a) < 2 or np.ndim(b) < 2 or a.shape[-2] != b.shape[-2]:
            raise _invalid(f"Input matrix and right-hand side must have the same number of "
                           f"rows: {np.shape(a)} vs. {np.shape(b)}")
        lam = float(l2)
        if lam < 0:
            raise _invalid("l2_regularizer must be >= 0.")
        w = _host(xp, a).astype(_work_dtype(dt), copy=False)
        rhs = _host(xp, b).astype(w.dtype, copy=False)
        m, n = w.shape[-2:]
        if m == 0 or n == 0:
            return xp.zeros(w.shape[:-2] + (n, rhs.shape[-1]), dtype=dt)
        if not fast:
            wb = w.reshape((-1, m, n))
            rb = rhs.reshape((-1, m, rhs.shape[-1]))
            out = np.stack([np.linalg.lstsq(x, y, rcond=None)[0] for x, y in zip(wb, rb)])
            return xp.asarray(out.reshape(w.shape[:-2] + (n, rhs.shape[-1])).astype(dt))
        wh = np.conj(np.swapaxes(w, -1, -2))
        try:
            if m >= n:
                gram = wh @ w + lam * np.eye(n, dtype=w.dtype)
                chol = np.linalg.cholesky(gram)
                out = np.linalg.solve(gram, wh @ rhs)
            else:
                gram = w @ wh + lam * np.eye(m, dtype=w.dtype)
                chol = np.linalg.cholesky(gram)
                out = wh @ np.linalg.solve(gram, rhs)
        except np.linalg.LinAlgError:
            raise _invalid(rank_msg) from None
        del chol
        return xp.asarray(out.astype(dt, copy=False))

    return matrix_solve_ls


@ks.api("linalg.cholesky", "cholesky")
def cholesky(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The lower Cholesky factor ``L`` (``input = L @ adjoint(L)``) of each Hermitian
    positive definite matrix; only the lower triangle of ``input`` is read."""
    return apply_op("Cholesky", name=name, input=input)


@ks.api("linalg.solve", "matrix_solve")
def matrix_solve(matrix: Any, rhs: Any, adjoint: bool = False,
                 name: str | None = None) -> Tensor:
    """Solves ``matrix @ x = rhs`` (``adjoint(matrix) @ x = rhs`` if ``adjoint``)."""
    return apply_op("MatrixSolve", name=name, matrix=matrix, rhs=rhs, adjoint=adjoint)


@ks.api("linalg.triangular_solve", "matrix_triangular_solve")
def matrix_triangular_solve(matrix: Any, rhs: Any, lower: bool = True, adjoint: bool = False,
                            name: str | None = None) -> Tensor:
    """Solves ``matrix @ x = rhs`` for lower (or upper) triangular ``matrix``; the other
    triangle is ignored."""
    return apply_op("MatrixTriangularSolve", name=name, matrix=matrix, rhs=rhs, lower=lower,
                    adjoint=adjoint)


@ks.api("linalg.cholesky_solve", "cholesky_solve")
def cholesky_solve(chol: Any, rhs: Any, name: str | None = None) -> Tensor:
    """Solves ``A @ x = rhs`` given the Cholesky factor ``chol`` of ``A``."""
    with name_scope(name, "cholesky_solve", [chol, rhs]):
        y = matrix_triangular_solve(chol, rhs, adjoint=False, lower=True)
        return matrix_triangular_solve(chol, y, adjoint=True, lower=True)


def _regularized_gramian_cholesky(matrix: Tensor, l2_regularizer: Any,
                                  first_kind: bool) -> Tensor:
    tf = _tf()
    gramian = tf.matmul(matrix, matrix, adjoint_a=first_kind, adjoint_b=not first_kind)
    if isinstance(l2_regularizer, Tensor) or l2_regularizer != 0:
        shape = tf.shape(matrix)
        small = shape[-1] if first_kind else shape[-2]
        identity = tf.eye(small, batch_shape=shape[:-2], dtype=matrix.dtype)
        gramian += tf.cast(l2_regularizer, matrix.dtype) * identity
    return cholesky(gramian)


@ks.api("linalg.lstsq", "matrix_solve_ls")
def matrix_solve_ls(matrix: Any, rhs: Any, l2_regularizer: Any = 0.0, fast: bool = True,
                    name: str | None = None) -> Tensor:
    """Least-squares solutions of ``matrix @ x = rhs`` (minimising
    ``||matrix @ x - rhs||^2 + l2_regularizer * ||x||^2``).

    ``fast=True`` solves the normal equations through a Cholesky factorisation, built
    from differentiable ops as TF does; ``fast=False`` runs the ``MatrixSolveLs`` kernel
    (a minimum-norm least-squares solve, without a gradient).
    """
    tf = _tf()
    matrix = convert_to_tensor(matrix, name="matrix")
    if matrix.dtype == _dt.complex128 and not isinstance(l2_regularizer, Tensor) and \
            l2_regularizer != 0:
        raise ValueError("matrix_solve_ls is currently disabled for complex128 and "
                         "l2_regularizer != 0 due to poor accuracy.")
    if not fast:
        return apply_op("MatrixSolveLs", name=name, matrix=matrix, rhs=rhs,
                        l2_regularizer=tf.cast(l2_regularizer, _dt.float64), fast=False)
    with name_scope(name, "matrix_solve_ls", [matrix, rhs, l2_regularizer]):
        rhs = convert_to_tensor(rhs, name="rhs", dtype=matrix.dtype)
        ms = matrix.shape.as_tuple()

        def over() -> Tensor:
            chol = _regularized_gramian_cholesky(matrix, l2_regularizer, True)
            return cholesky_solve(chol, tf.matmul(matrix, rhs, adjoint_a=True))

        def under() -> Tensor:
            chol = _regularized_gramian_cholesky(matrix, l2_regularizer, False)
            return tf.matmul(matrix, cholesky_solve(chol, rhs), adjoint_a=True)

        if ms is not None and ms[-2] is not None and ms[-1] is not None:
            return over() if ms[-2] >= ms[-1] else under()
        shape = tf.shape(matrix)
        return tf.cond(shape[-2] >= shape[-1], over, under)


@ks.gradient("Cholesky")
def _cholesky_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    l_ = op.outputs[0]
    shape = tf.shape(l_)
    l_inverse = matrix_triangular_solve(
        l_, tf.eye(shape[-1], batch_shape=shape[:-2], dtype=l_.dtype))
    middle = tf.matmul(l_, grad, adjoint_a=True)
    middle = tf.matrix_set_diag(middle, 0.5 * tf.matrix_diag_part(middle))
    middle = tf.matrix_band_part(middle, -1, 0)
    grad_a = tf.matmul(tf.matmul(l_inverse, middle, adjoint_a=True), l_inverse)
    grad_a += tf.linalg.adjoint(grad_a)
    return [grad_a * 0.5]


@ks.gradient("MatrixSolve")
def _matrix_solve_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    a, c = op.inputs[0], op.outputs[0]
    adjoint_a = bool(op.get_attr("adjoint"))
    grad_b = matrix_solve(a, grad, adjoint=not adjoint_a)
    if adjoint_a:
        grad_a = -tf.matmul(c, grad_b, adjoint_b=True)
    else:
        grad_a = -tf.matmul(grad_b, c, adjoint_b=True)
    return [grad_a, grad_b]


def _unbroadcast_batch(grad_a: Tensor, grad_b: Tensor, a: Tensor, b: Tensor) -> list[Any]:
    tf = _tf()
    if a.shape.is_fully_defined() and b.shape.is_fully_defined() and \
            a.shape.as_tuple()[:-2] == b.shape.as_tuple()[:-2]:
        return [grad_a, grad_b]
    sa, sb = tf.shape(a), tf.shape(b)
    ra, rb = apply_op("BroadcastGradientArgs", s0=sa[:-2], s1=sb[:-2])
    return [tf.reshape(tf.reduce_sum(grad_a, axis=ra), sa),
            tf.reshape(tf.reduce_sum(grad_b, axis=rb), sb)]


@ks.gradient("MatrixTriangularSolve")
def _matrix_triangular_solve_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    a, b = op.inputs
    c = op.outputs[0]
    adjoint_a, lower_a = bool(op.get_attr("adjoint")), bool(op.get_attr("lower"))
    grad_b = matrix_triangular_solve(a, grad, lower=lower_a, adjoint=not adjoint_a)
    if adjoint_a:
        grad_a = -tf.matmul(c, grad_b, adjoint_b=True)
    else:
        grad_a = -tf.matmul(grad_b, c, adjoint_b=True)
    grad_a = tf.matrix_band_part(grad_a, -1, 0) if lower_a else \
        tf.matrix_band_part(grad_a, 0, -1)
    return _unbroadcast_batch(grad_a, grad_b, a, b)


@ks.gradient("MatrixSolveLs")
def _matrix_solve_ls_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    if not bool(op.get_attr("fast")):
        raise ValueError("Gradient not defined for fast=False")
    a, b = op.inputs[0], op.inputs[1]
    lam = tf.cast(op.inputs[2], a.dtype.base_dtype)

    def over() -> list[Any]:
        x = op.outputs[0]
        chol = _regularized_gramian_cholesky(a, lam, True)
        z = cholesky_solve(chol, grad)
        xzt = tf.matmul(x, z, adjoint_b=True)
        zx_sym = xzt + tf.matrix_transpose(xzt)
        return [-tf.matmul(a, zx_sym) + tf.matmul(b, z, adjoint_b=True), tf.matmul(a, z)]

    def under() -> list[Any]:
        chol = _regularized_gramian_cholesky(a, lam, False)
        grad_b = cholesky_solve(chol, tf.matmul(a, grad))
        tmp = cholesky_solve(chol, b)
        a1 = -tf.matmul(grad_b, tf.matmul(tmp, a, adjoint_a=True))
        a2 = tf.matmul(tmp, grad - tf.matmul(a, grad_b, adjoint_a=True), adjoint_b=True)
        return [a1 + a2, grad_b]

    d = a.shape.as_tuple()
    if d is not None and d[-2] is not None and d[-1] is not None:
        ga, gb = over() if d[-2] >= d[-1] else under()
    else:
        shape = tf.shape(a)
        ga, gb = tf.cond(shape[-2] >= shape[-1], over, under)
    return [ga, gb, None]


# =======================================================================================
# Qr, Svd, SelfAdjointEigV2
# =======================================================================================
def _qr_shape(op: Any) -> list[TensorShape]:
    d = _rank_at_least(op.inputs[0], 2, op)
    if d is None:
        return [unknown_shape(), unknown_shape()]
    m, n = d[-2:]
    if op.get_attr("full_matrices"):
        return [TensorShape(d[:-2] + (m, m)), TensorShape(d[:-2] + (m, n))]
    p = None if m is None or n is None else min(m, n)
    return [TensorShape(d[:-2] + (m, p)), TensorShape(d[:-2] + (p, n))]


def _svd_shape(op: Any) -> list[TensorShape]:
    d = _rank_at_least(op.inputs[0], 2, op)
    if d is None:
        return [unknown_shape()] * 3
    m, n = d[-2:]
    p = None if m is None or n is None else min(m, n)
    s = TensorShape(d[:-2] + (p,))
    if not op.get_attr("compute_uv"):
        return [s, TensorShape([0]), TensorShape([0])]
    if op.get_attr("full_matrices"):
        return [s, TensorShape(d[:-2] + (m, m)), TensorShape(d[:-2] + (n, n))]
    return [s, TensorShape(d[:-2] + (m, p)), TensorShape(d[:-2] + (n, p))]


def _eig_shape(op: Any) -> list[TensorShape]:
    d = _square(op)
    if d is None:
        return [unknown_shape(), unknown_shape()]
    v = TensorShape(d) if op.get_attr("compute_v") else TensorShape([0])
    return [TensorShape(d[:-1]), v]


ks.op(
    OpDef("Qr", inputs=["input: T"], outputs=["q: T", "r: T"],
          attrs=[_LA_TYPES, "full_matrices: bool = false"], shape_fn=_qr_shape,
          doc="QR decompositions of batched matrices."),
    OpDef("Svd", inputs=["input: T"], outputs=["s: T", "u: T", "v: T"],
          attrs=[_LA_TYPES, "compute_uv: bool = true", "full_matrices: bool = false"],
          shape_fn=_svd_shape, doc="Singular value decompositions (s, u, v)."),
    OpDef("SelfAdjointEigV2", inputs=["input: T"], outputs=["e: T", "v: T"],
          attrs=[_LA_TYPES, "compute_v: bool = true"], shape_fn=_eig_shape,
          doc="Eigen decompositions of Hermitian matrices (lower triangle read)."),
)


@ks.kernel("Qr", expensive=True)
def _qr_kernel(ctx: Any) -> Callable:
    xp, dt = ctx.xp, ctx.output_dtypes[0].np
    mode = "complete" if ctx.attrs.get("full_matrices", False) else "reduced"

    def qr(a: Any) -> Any:
        if np.ndim(a) < 2:
            raise _invalid(f"Input tensor 0 must have rank >= 2, got {np.ndim(a)}")
        w = a.astype(_work_dtype(dt), copy=False)
        m, n = w.shape[-2:]
        if m == 0 or n == 0:
            k = m if mode == "complete" else min(m, n)
            q = xp.broadcast_to(xp.eye(m, k, dtype=dt), w.shape[:-2] + (m, k)).copy()
            return q, xp.zeros(w.shape[:-2] + (k, n), dtype=dt)
        q, r = xp.linalg.qr(w, mode=mode)
        return q.astype(dt, copy=False), r.astype(dt, copy=False)

    return qr


@ks.kernel("Svd", expensive=True)
def _svd_kernel(ctx: Any) -> Callable:
    xp, dt = ctx.xp, ctx.output_dtypes[0].np
    compute_uv = bool(ctx.attrs.get("compute_uv", True))
    full = bool(ctx.attrs.get("full_matrices", False))

    def svd(a: Any) -> Any:
        if np.ndim(a) < 2:
            raise _invalid(f"Input tensor 0 must have rank >= 2, got {np.ndim(a)}")
        w = a.astype(_work_dtype(dt), copy=False)
        m, n = w.shape[-2:]
        p = min(m, n)
        if not compute_uv:
            s = xp.linalg.svd(w, compute_uv=False) if p else xp.zeros(w.shape[:-2] + (0,))
            empty = xp.zeros((0,), dtype=dt)
            return xp.asarray(s).astype(dt), empty, empty.copy()
        if p == 0:
            ku, kv = (m, n) if full else (0, 0)
            u = xp.broadcast_to(xp.eye(m, ku, dtype=dt), w.shape[:-2] + (m, ku)).copy()
            v = xp.broadcast_to(xp.eye(n, kv, dtype=dt), w.shape[:-2] + (n, kv)).copy()
            return xp.zeros(w.shape[:-2] + (0,), dtype=dt), u, v
        u, s, vh = xp.linalg.svd(w, full_matrices=full)
        return (xp.asarray(s).astype(dt), u.astype(dt, copy=False),
                _adj(xp, vh).astype(dt, copy=False))

    return svd


@ks.kernel("SelfAdjointEigV2", expensive=True)
def _self_adjoint_eig_kernel(ctx: Any) -> Callable:
    xp, dt = ctx.xp, ctx.output_dtypes[0].np
    compute_v = bool(ctx.attrs.get("compute_v", True))

    def self_adjoint_eig(a: Any) -> Any:
        _check_square(a)
        w = a.astype(_work_dtype(dt), copy=False)
        if w.shape[-1] == 0:
            return xp.zeros(w.shape[:-1], dtype=dt), xp.zeros(
                w.shape if compute_v else (0,), dtype=dt)
        if compute_v:
            e, v = xp.linalg.eigh(w, UPLO="L")
            return xp.asarray(e).astype(dt), v.astype(dt, copy=False)
        e = xp.linalg.eigvalsh(w, UPLO="L")
        return xp.asarray(e).astype(dt), xp.zeros((0,), dtype=dt)

    return self_adjoint_eig


Qr = collections.namedtuple("Qr", ["q", "r"])


@ks.api("linalg.qr", "qr")
def qr(input: Any, full_matrices: bool = False, name: str | None = None) -> Any:  # noqa: A002
    """``(q, r)`` with ``input = q @ r``, ``q`` orthonormal columns and ``r`` upper
    triangular (``[..., M, K], [..., K, N]``, ``K = M`` if ``full_matrices`` else
    ``min(M, N)``)."""
    return Qr(*apply_op("Qr", name=name, input=input, full_matrices=full_matrices))


@ks.api("linalg.svd", "svd")
def svd(tensor: Any, full_matrices: bool = False, compute_uv: bool = True,
        name: str | None = None) -> Any:
    """Singular values ``s`` (descending) and, if ``compute_uv``, the singular vectors:
    returns ``(s, u, v)`` with ``tensor = u @ diag(s) @ adjoint(v)`` (note the order and
    that ``v``, not ``adjoint(v)``, is returned), else ``s`` alone."""
    s, u, v = apply_op("Svd", name=name, input=tensor, compute_uv=compute_uv,
                       full_matrices=full_matrices)
    return (s, u, v) if compute_uv else s


@ks.api("linalg.eigh", "self_adjoint_eig")
def self_adjoint_eig(tensor: Any, name: str | None = None) -> tuple[Tensor, Tensor]:
    """Eigenvalues (ascending) and eigenvectors (columns) of Hermitian matrices; only
    the lower triangle is read."""
    e, v = apply_op("SelfAdjointEigV2", name=name, input=tensor, compute_v=True)
    return e, v


@ks.api("linalg.eigvalsh", "self_adjoint_eigvals")
def self_adjoint_eigvals(tensor: Any, name: str | None = None) -> Tensor:
    """Eigenvalues (ascending) of Hermitian matrices."""
    e, _ = apply_op("SelfAdjointEigV2", name=name, input=tensor, compute_v=False)
    return e


def _safe_reciprocal(x: Tensor, epsilon: float = 1e-20) -> Tensor:
    tf = _tf()
    return x * tf.math.reciprocal(x * x + epsilon)


@ks.gradient("Qr")
def _qr_grad(op: Any, dq: Tensor, dr: Tensor) -> list[Any]:
    """TF's QR gradient: real inputs of static shape, not deep with full_matrices."""
    tf = _tf()
    q, r = op.outputs
    if q.dtype.is_complex:
        raise NotImplementedError(f"QrGrad not implemented for dtype: {q.dtype}")
    rd, qd = r.shape.as_tuple(), q.shape.as_tuple()
    if rd is None or rd[-2] is None or rd[-1] is None or qd is None or qd[-2] is None:
        raise NotImplementedError("QrGrad not implemented with dynamic shapes.")
    if rd[-2] > rd[-1] and qd[-2] == qd[-1]:
        raise NotImplementedError("QrGrad not implemented when nrows > ncols and "
                                  "full_matrices is true.")

    def tri_solve(x: Tensor, r_: Tensor) -> Tensor:
        return tf.linalg.adjoint(matrix_triangular_solve(
            r_, tf.linalg.adjoint(x), lower=False, adjoint=False))

    def square_and_deep(q_: Tensor, r_: Tensor, dq_: Tensor, dr_: Tensor) -> Tensor:
        qdq = tf.matmul(q_, dq_, adjoint_a=True)
        qdq_ = qdq - tf.linalg.adjoint(qdq)
        rdr = tf.matmul(r_, dr_, adjoint_b=True)
        rdr_ = rdr - tf.linalg.adjoint(rdr)
        tril = tf.matrix_band_part(qdq_ + rdr_, -1, 0)
        grad_a = tf.matmul(q_, dr_ + tri_solve(tril, r_))
        grad_b = tri_solve(dq_ - tf.matmul(q_, qdq), r_)
        return grad_a + grad_b

    num_rows, num_cols = qd[-2], rd[-1]
    if num_rows >= num_cols:
        return [square_and_deep(q, r, dq, dr)]
    a = op.inputs[0]
    y = a[..., :, num_rows:]
    u = r[..., :, :num_rows]
    dv = dr[..., :, num_rows:]
    du = dr[..., :, :num_rows]
    dy = tf.matmul(q, dv)
    dx = square_and_deep(q, u, dq + tf.matmul(y, dv, adjoint_b=True), du)
    return [tf.concat([dx, dy], axis=-1)]


@ks.gradient("SelfAdjointEigV2")
def _self_adjoint_eig_grad(op: Any, grad_e: Tensor, grad_v: Tensor) -> list[Any]:
    tf = _tf()
    e = op.outputs[0]
    if op.get_attr("compute_v"):
        v = op.outputs[1]
        f = tf.matrix_set_diag(
            _safe_reciprocal(tf.expand_dims(e, -2) - tf.expand_dims(e, -1)), tf.zeros_like(e))
        grad_a = tf.matmul(v, tf.matmul(
            tf.matrix_diag(grad_e) + f * tf.matmul(v, grad_v, adjoint_a=True), v,
            adjoint_b=True))
    else:
        _, v = self_adjoint_eig(op.inputs[0])
        grad_a = tf.matmul(v, tf.matmul(tf.matrix_diag(grad_e), v, adjoint_b=True))
    # the op reads only the lower triangle: symmetrise and keep that triangle
    grad_a = tf.matrix_band_part(grad_a + tf.linalg.adjoint(grad_a), -1, 0)
    return [tf.matrix_set_diag(grad_a, 0.5 * tf.matrix_diag_part(grad_a))]


@ks.gradient("Svd")
def _svd_grad(op: Any, grad_s: Tensor, grad_u: Tensor, grad_v: Tensor) -> list[Any]:
    """TF's SVD gradient (Giles; Townsend for thin SVDs; the complex term of Wan)."""
    tf = _tf()
    a = op.inputs[0]
    grad_s = tf.cast(grad_s, a.dtype)
    grad_s_mat = tf.matrix_diag(grad_s)
    if not op.get_attr("compute_uv"):
        _, u, v = svd(a, compute_uv=True)
        return [tf.matmul(u, tf.matmul(grad_s_mat, v, adjoint_b=True))]
    full = bool(op.get_attr("full_matrices"))
    d = a.shape.as_tuple()
    if d is None or d[-2] is None or d[-1] is None:
        raise NotImplementedError("SVD gradient has not been implemented for input with "
                                  "unknown inner matrix shape.")
    m, n = d[-2], d[-1]
    s, u, v = op.outputs
    s = tf.cast(s, a.dtype)
    use_adjoint = m > n
    if use_adjoint:
        m, n, u, v, grad_u, grad_v = n, m, v, u, grad_v, grad_u
    if full and abs(m - n) > 1:
        raise NotImplementedError("svd gradient is not implemented for abs(m - n) > 1 when "
                                  "full_matrices is True")
    s_mat = tf.matrix_diag(s)
    s2 = tf.square(s)
    f = tf.matrix_set_diag(
        _safe_reciprocal(tf.expand_dims(s2, -2) - tf.expand_dims(s2, -1)), tf.zeros_like(s))
    s_inv_mat = tf.matrix_diag(_safe_reciprocal(s))
    v1 = v[..., :, :m]
    grad_v1 = grad_v[..., :, :m]
    u_gu = tf.matmul(u, grad_u, adjoint_a=True)
    v_gv = tf.matmul(v1, grad_v1, adjoint_a=True)
    f_u, f_v = f * u_gu, f * v_gv
    term1_nouv = (grad_s_mat + tf.matmul(f_u + tf.linalg.adjoint(f_u), s_mat)
                  + tf.matmul(s_mat, f_v + tf.linalg.adjoint(f_v)))
    grad_a = tf.matmul(u, tf.matmul(term1_nouv, v1, adjoint_b=True))
    if m != n:
        gv1t = tf.linalg.adjoint(grad_v1)
        term2_nous = gv1t - tf.matmul(tf.matmul(gv1t, v1), v1, adjoint_b=True)
        if full:
            v2, grad_v2 = v[..., :, m:n], grad_v[..., :, m:n]
            term2_nous -= tf.matmul(tf.matmul(v1, grad_v2, adjoint_a=True), v2,
                                    adjoint_b=True)
        grad_a += tf.matmul(tf.matmul(u, s_inv_mat), term2_nous)
    if a.dtype.is_complex:
        eye = tf.linalg.eye(m, batch_shape=tf.shape(s)[:-1], dtype=a.dtype)
        l_ = eye * v_gv
        term3_nouv = tf.matmul(s_inv_mat, tf.linalg.adjoint(l_) - l_)
        grad_a += 0.5 * tf.matmul(u, tf.matmul(term3_nouv, v1, adjoint_b=True))
    if use_adjoint:
        grad_a = tf.linalg.adjoint(grad_a)
    return [grad_a]


# =======================================================================================
# matrix functions: MatrixExponential, MatrixLogarithm, MatrixSquareRoot
# =======================================================================================
ks.op(
    OpDef("MatrixExponential", inputs=["input: T"], outputs=["output: T"],
          attrs=[_LA_TYPES], shape_fn=_square_shape, doc="Matrix exponentials."),
    OpDef("MatrixLogarithm", inputs=["input: T"], outputs=["output: T"],
          attrs=["T: {complex64, complex128}"], shape_fn=_square_shape,
          doc="Principal matrix logarithms."),
    OpDef("MatrixSquareRoot", inputs=["input: T"], outputs=["output: T"],
          attrs=[_LA_TYPES], shape_fn=_square_shape, doc="Principal matrix square roots."),
)

_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
           129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
           40840800., 960960., 16380., 182., 1.)


def np_expm(a: np.ndarray) -> np.ndarray:
    """Batched matrix exponential: scaling and squaring with a degree-13 Pade
    approximant (Higham 2005), in float64 / complex128."""
    a = np.asarray(a)
    work = np.complex128 if a.dtype.kind == "c" else np.float64
    x = a.astype(work)
    n = x.shape[-1]
    if n == 0:
        return x
    norm1 = np.abs(x).sum(axis=-2).max(axis=-1) if x.size else np.zeros(x.shape[:-2])
    with np.errstate(divide="ignore"):
        s = np.maximum(0, np.ceil(np.log2(np.maximum(norm1, 1e-300) / 5.371920351148152)))
    s = np.where(np.isfinite(s), s, 0).astype(np.int64)
    x = x / (2.0 ** s)[..., None, None]
    eye = np.broadcast_to(np.eye(n, dtype=work), x.shape)
    b = _PADE13
    x2 = x @ x
    x4 = x2 @ x2
    x6 = x4 @ x2
    u = x @ (x6 @ (b[13] * x6 + b[11] * x4 + b[9] * x2) + b[7] * x6 + b[5] * x4
             + b[3] * x2 + b[1] * eye)
    v = x6 @ (b[12] * x6 + b[10] * x4 + b[8] * x2) + b[6] * x6 + b[4] * x4 + b[2] * x2 \
        + b[0] * eye
    r = np.linalg.solve(v - u, v + u)
    for k in range(int(s.max()) if s.size else 0):
        sq = r @ r
        r = np.where((s > k)[..., None, None], sq, r)
    return r


def _eig_function(a: np.ndarray, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``V fn(D) V^-1`` for diagonalisable matrices (complex128)."""
    w, v = np.linalg.eig(a.astype(np.complex128))
    return (v * fn(w)[..., None, :]) @ np.linalg.inv(v)


def np_sqrtm(a: np.ndarray) -> np.ndarray:
    """Principal square roots: Denman-Beavers iteration (product form, determinant
    scaling), which also converges for matrices that are not diagonalisable."""
    a = np.asarray(a)
    work = np.complex128 if a.dtype.kind == "c" else np.float64
    x = a.astype(work)
    n = x.shape[-1]
    if n == 0:
        return x
    if not np.all(np.isfinite(x)):
        return np.full(x.shape, np.nan, dtype=work)
    eye = np.broadcast_to(np.eye(n, dtype=work), x.shape)
    m, y = x.copy(), x.copy()
    for _ in range(100):
        try:
            det = np.abs(np.linalg.det(m))
            g = np.where(det > 0, det ** (-1.0 / (2 * n)), 1.0)[..., None, None]
            minv = np.linalg.inv(m)
        except np.linalg.LinAlgError:
            return _eig_function(x, np.sqrt).astype(work) if work == np.complex128 else \
                _eig_function(x, np.sqrt).real
        y = g * y @ (eye + minv / (g * g)) / 2
        m = (eye + (g * g * m + minv / (g * g)) / 2) / 2
        if np.max(np.abs(m - eye)) < 1e-14:
            break
    return y


def np_logm(a: np.ndarray) -> np.ndarray:
    """Principal matrix logarithms of diagonalisable matrices (complex128)."""
    a = np.asarray(a, dtype=np.complex128)
    if a.shape[-1] == 0:
        return a
    return _eig_function(a, np.log)


def _matrix_function_kernel(fn: Callable[[np.ndarray], np.ndarray]) -> Callable:
    def factory(ctx: Any) -> Callable:
        xp, dt = ctx.xp, ctx.output_dtypes[0].np

        def matrix_function(a: Any) -> Any:
            _check_square(a)
            with np.errstate(all="ignore"):
                try:
                    out = fn(_host(xp, a))
                except np.linalg.LinAlgError:
                    out = np.full(a.shape, np.nan)
            if np.dtype(dt).kind != "c" and np.iscomplexobj(out):
                out = out.real
            return xp.asarray(out.astype(dt, copy=False))

        return matrix_function

    return factory


ks.kernel("MatrixExponential", expensive=True)(_matrix_function_kernel(np_expm))
ks.kernel("MatrixLogarithm", expensive=True)(_matrix_function_kernel(np_logm))
ks.kernel("MatrixSquareRoot", expensive=True)(_matrix_function_kernel(np_sqrtm))
ks.not_differentiable("MatrixLogarithm")


@ks.api("linalg.expm")
def matrix_exponential(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """``exp(input)`` of each square matrix (scaling and squaring, Pade 13)."""
    with name_scope(name, "matrix_exponential", [input]) as scope:
        return apply_op("MatrixExponential", name=scope, input=input)


@ks.api("linalg.logm")
def matrix_logarithm(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The principal logarithm of each square complex matrix (no gradient, as in TF)."""
    return apply_op("MatrixLogarithm", name=name, input=input)


@ks.api("linalg.sqrtm", "matrix_square_root")
def matrix_square_root(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The principal square root of each square matrix."""
    return apply_op("MatrixSquareRoot", name=name, input=input)


@ks.gradient("MatrixExponential")
def _matrix_exponential_grad(op: Any, grad: Tensor) -> list[Any]:
    """The adjoint Frechet derivative: the top-right block of
    ``expm([[A^H, G], [0, A^H]])``."""
    tf = _tf()
    a_h = tf.linalg.adjoint(op.inputs[0])
    top = tf.concat([a_h, grad], axis=-1)
    bottom = tf.concat([tf.zeros_like(a_h), a_h], axis=-1)
    big = apply_op("MatrixExponential", input=tf.concat([top, bottom], axis=-2))
    n = tf.shape(a_h)[-1]
    return [big[..., :n, n:]]


def _kronecker(b1: Tensor, b2: Tensor) -> Tensor:
    tf = _tf()
    s1, s2 = tf.shape(b1), tf.shape(b2)
    batch = s1[:-2]
    o1, o2 = s1[-1], s2[-1]
    r1 = tf.reshape(b1, tf.concat([batch, [o1, 1, o1, 1]], 0))
    r2 = tf.reshape(b2, tf.concat([batch, [1, o2, 1, o2]], 0))
    return tf.reshape(r1 * r2, tf.concat([batch, [o1 * o2, o1 * o2]], 0))


@ks.gradient("MatrixSquareRoot")
def _matrix_square_root_grad(op: Any, grad: Tensor) -> list[Any]:
    """Solves the Sylvester equation ``R dR + dR R = dA`` through Kronecker products."""
    tf = _tf()
    sqrtm = op.outputs[0]
    shape = tf.shape(sqrtm)
    order = shape[-1]
    eye_batch = tf.linalg.eye(order, batch_shape=shape[:-2], dtype=sqrtm.dtype)
    ksum = _kronecker(eye_batch, tf.matrix_transpose(sqrtm)) + _kronecker(sqrtm, eye_batch)
    vec_da = tf.reshape(tf.matrix_transpose(grad), tf.concat([shape[:-2], [order * order, 1]],
                                                                0))
    vec = matrix_solve(ksum, vec_da)
    return [tf.matrix_transpose(tf.reshape(vec, shape))]


# =======================================================================================
# Lu and its composites
# =======================================================================================
def _lu_shape(op: Any) -> list[TensorShape]:
    d = _square(op)
    if d is None:
        return [unknown_shape(), unknown_shape()]
    return [TensorShape(d), TensorShape(d[:-1])]


ks.op(OpDef("Lu", inputs=["input: T"], outputs=["lu: T", "p: output_idx_type"],
            attrs=[_LA_TYPES, "output_idx_type: {int32, int64} = DT_INT32"],
            shape_fn=_lu_shape, doc="LU decompositions with partial pivoting."))


def np_lu(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Batched LU with partial pivoting: ``(lu, perm)`` with ``a[..., perm, :] = L @ U``
    (``L`` unit lower, packed with ``U`` in ``lu``)."""
    lu = np.array(a, copy=True)
    n = lu.shape[-1]
    batch = lu.shape[:-2]
    lu = lu.reshape((-1, n, n))
    perm = np.broadcast_to(np.arange(n), (lu.shape[0], n)).copy()
    rows = np.arange(lu.shape[0])
    singular = np.zeros(lu.shape[0], dtype=bool)
    for k in range(n):
        piv = k + np.argmax(np.abs(lu[:, k:, k]), axis=1)
        row_k = lu[rows, k, :].copy()
        lu[rows, k, :] = lu[rows, piv, :]
        lu[rows, piv, :] = row_k
        p_k = perm[rows, k].copy()
        perm[rows, k] = perm[rows, piv]
        perm[rows, piv] = p_k
        pivot = lu[:, k, k]
        zero = pivot == 0
        singular |= zero
        with np.errstate(divide="ignore", invalid="ignore"):
            lu[:, k + 1:, k] = np.where(zero[:, None], 0, lu[:, k + 1:, k] / np.where(
                zero, 1, pivot)[:, None])
        lu[:, k + 1:, k + 1:] -= lu[:, k + 1:, k:k + 1] * lu[:, k:k + 1, k + 1:]
    if singular.any():
        raise np.linalg.LinAlgError("singular")
    return lu.reshape(batch + (n, n)), perm.reshape(batch + (n,))


@ks.kernel("Lu", expensive=True)
def _lu_kernel(ctx: Any) -> Callable:
    xp, dt = ctx.xp, ctx.output_dtypes[0].np
    it = ctx.output_dtypes[1].np

    def lu(a: Any) -> Any:
        _check_square(a, "Input matrix must be square.")
        w = _host(xp, a).astype(_work_dtype(dt), copy=False)
        try:
            packed, perm = np_lu(w)
        except np.linalg.LinAlgError:
            raise _invalid("Input is not invertible.") from None
        return xp.asarray(packed.astype(dt)), xp.asarray(perm.astype(it))

    return lu


Lu = collections.namedtuple("Lu", ["lu", "p"])


@ks.api("linalg.lu")
def lu(input: Any, output_idx_type: Any = _dt.int32, name: str | None = None) -> Any:  # noqa: A002
    """``(lu, p)``: the packed LU factors (unit lower ``L`` below the diagonal, ``U`` on
    and above it) and the row permutation, ``input[..., p, :] = L @ U``."""
    return Lu(*apply_op("Lu", name=name, input=input,
                        output_idx_type=_dt.as_dtype(output_idx_type)))


def _permute_rows(x: Tensor, perm: Tensor, inverse: bool = False) -> Tensor:
    """``x[..., perm, :]`` (or the rows put back where ``perm`` took them) for batched
    ``perm``, as a product with a one-hot permutation matrix."""
    tf = _tf()
    p = tf.one_hot(perm, tf.shape(x)[-2], dtype=x.dtype)
    return tf.matmul(p, x, adjoint_a=inverse) if not x.dtype.is_complex or not inverse \
        else tf.matmul(tf.matrix_transpose(p), x)


@ks.api("linalg.lu_reconstruct")
def lu_reconstruct(lower_upper: Any, perm: Any, validate_args: bool = False,
                   name: str | None = None) -> Tensor:
    """The matrix whose ``lu`` is ``(lower_upper, perm)``."""
    tf = _tf()
    with name_scope(name or "lu_reconstruct"):
        lower_upper = convert_to_tensor(lower_upper, name="lower_upper")
        perm = convert_to_tensor(perm, name="perm")
        shape = tf.shape(lower_upper)
        lower = tf.matrix_set_diag(tf.matrix_band_part(lower_upper, -1, 0),
                                   tf.ones(shape[:-1], dtype=lower_upper.dtype))
        upper = tf.matrix_band_part(lower_upper, 0, -1)
        return _permute_rows(tf.matmul(lower, upper), perm, inverse=True)


@ks.api("linalg.lu_solve")
def lu_solve(lower_upper: Any, perm: Any, rhs: Any, validate_args: bool = False,
             name: str | None = None) -> Tensor:
    """Solves ``A @ x = rhs`` given ``lu(A) = (lower_upper, perm)``."""
    tf = _tf()
    with name_scope(name or "lu_solve"):
        lower_upper = convert_to_tensor(lower_upper, name="lower_upper")
        perm = convert_to_tensor(perm, name="perm")
        rhs = convert_to_tensor(rhs, name="rhs", dtype=lower_upper.dtype)
        permuted = _permute_rows(rhs, perm)
        shape = tf.shape(lower_upper)
        lower = tf.matrix_set_diag(tf.matrix_band_part(lower_upper, -1, 0),
                                   tf.ones(shape[:-1], dtype=lower_upper.dtype))
        y = matrix_triangular_solve(lower, permuted, lower=True, adjoint=False)
        return matrix_triangular_solve(lower_upper, y, lower=False, adjoint=False)


@ks.api("linalg.lu_matrix_inverse")
def lu_matrix_inverse(lower_upper: Any, perm: Any, validate_args: bool = False,
                      name: str | None = None) -> Tensor:
    """The inverse of the matrix whose ``lu`` is ``(lower_upper, perm)``."""
    tf = _tf()
    with name_scope(name or "lu_matrix_inverse"):
        lower_upper = convert_to_tensor(lower_upper, name="lower_upper")
        shape = tf.shape(lower_upper)
        eye = tf.linalg.eye(shape[-1], batch_shape=shape[:-2], dtype=lower_upper.dtype)
        return lu_solve(lower_upper, perm, eye)


# =======================================================================================
# Cross, tridiagonal ops
# =======================================================================================
def _cross_shape(op: Any) -> list[TensorShape]:
    a, b = op.inputs[0].shape.as_tuple(), op.inputs[1].shape.as_tuple()
    if a is not None and b is not None:
        if len(a) != len(b):
            raise ValueError(f"Shapes must be equal rank, but are {len(a)} and {len(b)}"
                             f"{_where(op)}")
        a = tuple(_merge(x, y, op) for x, y in zip(a, b))
    d = a if a is not None else b
    if d is None:
        return [unknown_shape()]
    if len(d) < 1:
        raise ValueError(f"Shape must be at least rank 1 but is rank 0{_where(op)}")
    if d[-1] is not None and d[-1] != 3:
        raise ValueError(f"Dimension must be 3 but is {d[-1]}{_where(op)}")
    return [TensorShape(d)]


ks.op(OpDef("Cross", inputs=["a: T", "b: T"], outputs=["product: T"],
            attrs=["T: realnumbertype"], shape_fn=_cross_shape,
            doc="Pairwise cross products of 3-vectors."))


@ks.kernel("Cross")
def _cross_kernel(ctx: Any) -> Callable:
    xp = ctx.xp

    def cross(a: Any, b: Any) -> Any:
        if a.shape != b.shape:
            raise _invalid(f"a and b must be the same shape: {list(a.shape)} vs "
                           f"{list(b.shape)}")
        if a.ndim < 1 or a.shape[-1] != 3:
            raise _invalid(f"Last dimension of a must be 3, but got shape: {list(a.shape)}")
        return xp.cross(a, b).astype(a.dtype, copy=False)

    return cross


@ks.gradient("Cross")
def _cross_grad(op: Any, grad: Tensor) -> list[Any]:
    u, v = op.inputs
    return [cross(v, grad), cross(grad, u)]


@ks.api("linalg.cross", "cross")
def cross(a: Any, b: Any, name: str | None = None) -> Tensor:
    """Cross products of the 3-vectors along the last dimension of ``a`` and ``b``."""
    return apply_op("Cross", name=name, a=a, b=b)


def _tridiag_solve_shape(op: Any) -> list[TensorShape]:
    d = _rank_at_least(op.inputs[0], 2, op)
    r = _rank_at_least(op.inputs[1], 2, op)
    if d is not None and d[-2] is not None and d[-2] != 3:
        raise ValueError(f"Dimension must be 3 but is {d[-2]}{_where(op)}")
    if r is None:
        return [unknown_shape()]
    if d is not None:
        _merge(d[-1], r[-2], op)
    return [TensorShape(r)]


def _tridiag_matmul_shape(op: Any) -> list[TensorShape]:
    r = _rank_at_least(op.inputs[3], 2, op)
    for t in op.inputs[:3]:
        d = _rank_at_least(t, 2, op)
        if d is not None and d[-2] is not None and d[-2] != 1:
            raise ValueError(f"Dimension must be 1 but is {d[-2]}{_where(op)}")
        if d is not None and r is not None:
            _merge(d[-1], r[-2], op)
    return [unknown_shape() if r is None else TensorShape(r)]


_TRIDIAG_TYPES = "T: {double, float, complex64, complex128}"
ks.op(
    OpDef("TridiagonalSolve", inputs=["diagonals: T", "rhs: T"], outputs=["output: T"],
          attrs=[_TRIDIAG_TYPES, "partial_pivoting: bool = true"],
          shape_fn=_tridiag_solve_shape,
          doc="Solves tridiagonal systems (diagonals in the compact [..., 3, M] form)."),
    OpDef("TridiagonalMatMul",
          inputs=["superdiag: T", "maindiag: T", "subdiag: T", "rhs: T"],
          outputs=["output: T"], attrs=[_TRIDIAG_TYPES], shape_fn=_tridiag_matmul_shape,
          doc="Products of tridiagonal matrices with dense matrices."),
)


def _dense_tridiag(xp: Any, sup: Any, main: Any, sub: Any) -> Any:
    m = main.shape[-1]
    out = xp.zeros(main.shape[:-1] + (m, m), dtype=main.dtype)
    i = np.arange(m)
    out[..., i, i] = main
    if m > 1:
        out[..., i[:-1], i[1:]] = sup[..., :-1]
        out[..., i[1:], i[:-1]] = sub[..., 1:]
    return out


@ks.kernel("TridiagonalSolve", expensive=True)
def _tridiagonal_solve_kernel(ctx: Any) -> Callable:
    xp = ctx.xp

    def tridiagonal_solve(diags: Any, rhs: Any) -> Any:
        if diags.ndim < 2 or diags.shape[-2] != 3:
            raise _invalid(f"Expected 3 diagonals, got shape {list(diags.shape)}")
        if rhs.ndim < 2 or rhs.shape[-2] != diags.shape[-1] or \
                rhs.shape[:-2] != diags.shape[:-2]:
            raise _invalid(f"Incompatible shapes of diagonals and rhs: "
                           f"{list(diags.shape)} vs. {list(rhs.shape)}")
        dense = _dense_tridiag(xp, diags[..., 0, :], diags[..., 1, :], diags[..., 2, :])
        return _solve_or_raise(xp, dense, rhs, "The matrix is not invertible.").astype(
            rhs.dtype, copy=False)

    return tridiagonal_solve


@ks.kernel("TridiagonalMatMul")
def _tridiagonal_matmul_kernel(ctx: Any) -> Callable:
    xp = ctx.xp

    def tridiagonal_matmul(sup: Any, main: Any, sub: Any, rhs: Any) -> Any:
        m = rhs.shape[-2]
        for d in (sup, main, sub):
            if d.ndim < 2 or d.shape[-2] != 1 or d.shape[-1] != m:
                raise _invalid(f"Expected diagonals of shape [..., 1, {m}], got "
                               f"{list(d.shape)}")
        sp, mn, sb = sup[..., 0, :, None], main[..., 0, :, None], sub[..., 0, :, None]
        out = mn * rhs
        if m > 1:
            out[..., :-1, :] += sp[..., :-1, :] * rhs[..., 1:, :]
            out[..., 1:, :] += sb[..., 1:, :] * rhs[..., :-1, :]
        return out

    return tridiagonal_matmul


def _shift(x: Tensor, left: bool) -> Tensor:
    """``x`` shifted along its next-to-last dimension, zero-filled."""
    tf = _tf()
    rank = tf.rank(x)
    zeros = tf.zeros(tf.stack([rank - 2, 2]), dtype=_dt.int32)
    pad = tf.concat([zeros, tf.constant([[0, 1], [0, 0]] if left else [[1, 0], [0, 0]])], 0)
    return tf.pad(x[..., 1:, :] if left else x[..., :-1, :], pad)


@ks.gradient("TridiagonalMatMul")
def _tridiagonal_matmul_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    sup_c, main_c, sub_c = (tf.matrix_transpose(t, conjugate=True) for t in op.inputs[:3])
    rhs_c = tf.conj(op.inputs[3])
    sup_g = tf.reduce_sum(_shift(rhs_c, True) * grad, axis=-1)
    main_g = tf.reduce_sum(rhs_c * grad, axis=-1)
    sub_g = tf.reduce_sum(_shift(rhs_c, False) * grad, axis=-1)
    rhs_g = _shift(sup_c * grad, False) + main_c * grad + _shift(sub_c * grad, True)
    return [tf.expand_dims(sup_g, -2), tf.expand_dims(main_g, -2), tf.expand_dims(sub_g, -2),
            rhs_g]


@ks.gradient("TridiagonalSolve")
def _tridiagonal_solve_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    diags = op.inputs[0]
    x = op.outputs[0]
    diag = diags[..., 1, :]
    zeros = tf.zeros_like(diags[..., 0, :1])
    sup_t = tf.concat([diags[..., 2, 1:], zeros], axis=-1)
    sub_t = tf.concat([zeros, diags[..., 0, :-1]], axis=-1)
    diags_t = tf.stack([sup_t, diag, sub_t], axis=-2)
    grad_rhs = apply_op("TridiagonalSolve", diagonals=diags_t, rhs=grad,
                        partial_pivoting=op.get_attr("partial_pivoting"))
    # the three diagonals of grad_rhs @ x^T, in compact form
    zrow = tf.zeros_like(x[..., :1, :])
    main = tf.reduce_sum(grad_rhs * x, axis=-1)
    sup = tf.reduce_sum(grad_rhs * tf.concat([x[..., 1:, :], zrow], axis=-2), axis=-1)
    sub = tf.reduce_sum(grad_rhs * tf.concat([zrow, x[..., :-1, :]], axis=-2), axis=-1)
    return [-tf.stack([sup, main, sub], axis=-2), grad_rhs]


def _to_compact(tf: Any, diagonals: Any, diagonals_format: str) -> Tensor:
    """Diagonals in the compact ``[..., 3, M]`` form from TF's three formats."""
    if diagonals_format == "compact":
        return convert_to_tensor(diagonals, name="diagonals")
    if diagonals_format == "sequence":
        if not isinstance(diagonals, (list, tuple)) or len(diagonals) != 3:
            raise ValueError("Expected diagonals to be a sequence of length 3.")
        sup, main, sub = (convert_to_tensor(d) for d in diagonals)
        zeros = tf.zeros_like(main[..., :1])
        ms = main.shape.as_tuple()
        m = None if ms is None else ms[-1]
        if m is not None and sup.shape.as_tuple() is not None and \
                sup.shape.as_tuple()[-1] == m - 1:
            sup = tf.concat([sup, zeros], -1)
        if m is not None and sub.shape.as_tuple() is not None and \
                sub.shape.as_tuple()[-1] == m - 1:
            sub = tf.concat([zeros, sub], -1)
        return tf.stack([sup, main, sub], axis=-2)
    if diagonals_format == "matrix":
        mat = convert_to_tensor(diagonals, name="diagonals")
        main = tf.matrix_diag_part(mat)
        zeros = tf.zeros_like(main[..., :1])
        sup = tf.concat([tf.matrix_diag_part(mat[..., :-1, 1:]), zeros], -1)
        sub = tf.concat([zeros, tf.matrix_diag_part(mat[..., 1:, :-1])], -1)
        return tf.stack([sup, main, sub], axis=-2)
    raise ValueError(f"Unrecognized diagonals_format: {diagonals_format}")


@ks.api("linalg.tridiagonal_solve")
def tridiagonal_solve(diagonals: Any, rhs: Any, diagonals_format: str = "compact",
                      transpose_rhs: bool = False, conjugate_rhs: bool = False,
                      name: str | None = None, partial_pivoting: bool = True) -> Tensor:
    """Solves tridiagonal systems; ``diagonals`` is ``'compact'`` (``[..., 3, M]``:
    superdiagonal, diagonal, subdiagonal), ``'sequence'`` or ``'matrix'``; ``rhs`` is
    ``[..., M]`` or ``[..., M, K]`` (``[..., K, M]`` with ``transpose_rhs``). Like TF, no
    name scope: the op itself takes ``name``."""
    tf = _tf()
    diags = _to_compact(tf, diagonals, diagonals_format)
    rhs = convert_to_tensor(rhs, name="rhs", dtype=diags.dtype)
    if rhs.shape.ndims is not None and diags.shape.ndims is not None and \
            rhs.shape.ndims == diags.shape.ndims - 1:
        if transpose_rhs:
            raise ValueError("transpose_rhs=True requires rhs of rank >= 2.")
        if conjugate_rhs:
            rhs = tf.conj(rhs)
        out = apply_op("TridiagonalSolve", name=name, diagonals=diags,
                       rhs=tf.expand_dims(rhs, -1), partial_pivoting=partial_pivoting)
        return tf.squeeze(out, -1)
    if transpose_rhs:
        rhs = tf.matrix_transpose(rhs, conjugate=conjugate_rhs)
    elif conjugate_rhs:
        rhs = tf.conj(rhs)
    return apply_op("TridiagonalSolve", name=name, diagonals=diags, rhs=rhs,
                    partial_pivoting=partial_pivoting)


@ks.api("linalg.tridiagonal_matmul")
def tridiagonal_matmul(diagonals: Any, rhs: Any, diagonals_format: str = "compact",
                       name: str | None = None) -> Tensor:
    """``tridiagonal(diagonals) @ rhs`` (formats as :func:`tridiagonal_solve`)."""
    tf = _tf()
    diags = _to_compact(tf, diagonals, diagonals_format)
    rhs = convert_to_tensor(rhs, name="rhs", dtype=diags.dtype)
    sup, main, sub = (tf.expand_dims(diags[..., i, :], -2) for i in range(3))
    return apply_op("TridiagonalMatMul", name=name, superdiag=sup, maindiag=main,
                    subdiag=sub, rhs=rhs)


# =======================================================================================
# composites: matvec, norm, normalize, matrix_rank, pinv
# =======================================================================================
@ks.api("linalg.matvec")
def matvec(a: Any, b: Any, transpose_a: bool = False, adjoint_a: bool = False,
           a_is_sparse: bool = False, b_is_sparse: bool = False,
           name: str | None = None) -> Tensor:
    """Matrix-vector products ``a @ b`` over batches (``b`` is ``[..., K]``)."""
    tf = _tf()
    with name_scope(name, "MatVec", [a, b]):
        a = convert_to_tensor(a, name="a")
        b = convert_to_tensor(b, name="b")
        out = tf.matmul(a, tf.expand_dims(b, -1), transpose_a=transpose_a,
                        adjoint_a=adjoint_a, a_is_sparse=a_is_sparse, b_is_sparse=b_is_sparse)
        return tf.squeeze(out, -1)


_MATRIX_ORDS = ["euclidean", "fro", 1, 2, np.inf]


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


@ks.api("norm", "linalg.norm")
def norm(tensor: Any, ord: Any = "euclidean", axis: Any = None,  # noqa: A002
         keepdims: Any = None, name: str | None = None, keep_dims: Any = None) -> Tensor:
    """Vector norms (``axis`` None or an int) or matrix norms (``axis`` a pair) of
    ``tensor``, as TF 1.15's ``tf.norm``.

    Vector ``ord``: ``'euclidean'``, 1, 2, ``np.inf`` or any ``p > 0``; matrix ``ord``:
    ``'euclidean'``/``'fro'``, 1, 2 (largest singular value) or ``np.inf``. The
    Euclidean norm is ``sqrt(sum(x * conj(x)))`` and so keeps a complex dtype, as TF's.
    """
    tf = _tf()
    if keepdims is not None and keep_dims is not None:
        raise ValueError("Cannot specify both 'keepdims' and 'keep_dims'")
    keepdims = bool(keep_dims if keepdims is None else keepdims)
    is_matrix = isinstance(axis, (tuple, list)) and len(axis) == 2
    if is_matrix:
        axis = tuple(axis)
        if not _is_int(axis[0]) or not _is_int(axis[1]) or axis[0] == axis[1]:
            raise ValueError(f"'axis' must be None, an integer, or a tuple of 2 unique "
                             f"integers, got {axis}")
        if ord not in _MATRIX_ORDS:
            raise ValueError(f"'ord' must be a supported matrix norm in {_MATRIX_ORDS}, "
                             f"got {ord}")
    else:
        if not (_is_int(axis) or axis is None):
            raise ValueError(f"'axis' must be None, an integer, or a tuple of 2 unique "
                             f"integers, got {axis}")
        if ord not in ("euclidean", 1, 2, np.inf) and \
                (isinstance(ord, str) or not np.isreal(ord) or ord <= 0):
            raise ValueError(f"'ord' must be a supported vector norm, got {ord}")
        if axis is not None:
            axis = (axis,)
    with name_scope(name, "norm", [tensor]):
        tensor = convert_to_tensor(tensor)
        if ord in ("fro", "euclidean", 2, 2.0):
            if is_matrix and ord in (2, 2.0):
                rank = tensor.shape.ndims
                if rank is None:
                    raise ValueError("The matrix 2-norm needs a tensor of known rank.")
                pos = [a % rank for a in axis]
                perm_before = [i for i in range(rank) if i not in pos] + pos
                perm_after = [perm_before.index(i) for i in range(rank)]
                permed = tf.transpose(tensor, perm=perm_before)
                s = svd(permed, compute_uv=False)
                m2 = tf.expand_dims(tf.reduce_max(tf.abs(s), axis=-1, keepdims=True), -1)
                result = tf.transpose(m2, perm=perm_after)
            else:
                result = tf.sqrt(tf.reduce_sum(tensor * tf.conj(tensor), axis,
                                               keepdims=True))
        else:
            result = tf.abs(tensor)
            if ord == 1:
                result = tf.reduce_sum(result, None if axis is None else axis[0],
                                       keepdims=True)
                if is_matrix:
                    result = tf.reduce_max(result, axis[-1], keepdims=True)
            elif ord == np.inf:
                if is_matrix:
                    result = tf.reduce_sum(result, axis[1], keepdims=True)
                result = tf.reduce_max(result, None if axis is None else axis[0],
                                       keepdims=True)
            else:
                result = tf.pow(tf.reduce_sum(tf.pow(result, ord), axis, keepdims=True),
                                1.0 / ord)
        if not keepdims:
            result = tf.squeeze(result, axis)
        return result


@ks.api("linalg.normalize")
def normalize(tensor: Any, ord: Any = "euclidean", axis: Any = None,  # noqa: A002
              name: str | None = None) -> tuple[Tensor, Tensor]:
    """``(tensor / norm, norm)`` with the norm of :func:`norm` kept in its dimensions."""
    tf = _tf()
    with name_scope(name, "normalize", [tensor]):
        tensor = convert_to_tensor(tensor)
        n = norm(tensor, ord, axis, keepdims=True)
        n = tf.cast(n, tensor.dtype)
        return tensor / n, n


@ks.api("linalg.matrix_rank")
def matrix_rank(a: Any, tol: Any = None, validate_args: bool = False,
                name: str | None = None) -> Tensor:
    """The number of singular values above ``tol`` (default
    ``eps * max(M, N) * max(s)``), as int32."""
    tf = _tf()
    with name_scope(name or "matrix_rank"):
        a = convert_to_tensor(a, name="a")
        s = svd(a, compute_uv=False)
        if tol is None:
            d = a.shape.as_tuple()
            if d is not None and d[-2] is not None and d[-1] is not None:
                big: Any = float(max(d[-2], d[-1]))
            else:
                big = tf.cast(tf.reduce_max(tf.shape(a)[-2:]), s.dtype)
            eps = float(np.finfo(a.dtype.real_dtype.np).eps)
            tol = big * eps * tf.reduce_max(s, axis=-1, keepdims=True)
        else:
            tol = tf.expand_dims(convert_to_tensor(tol, dtype=s.dtype, name="tol"), -1)
        return tf.reduce_sum(tf.cast(s > tol, _dt.int32), axis=-1)


@ks.api("linalg.pinv")
def pinv(a: Any, rcond: Any = None, validate_args: bool = False,
         name: str | None = None) -> Tensor:
    """The Moore-Penrose pseudo-inverse through the SVD; singular values at most
    ``rcond * max(s)`` (default ``rcond = 10 * max(M, N) * eps``) count as zero."""
    tf = _tf()
    with name_scope(name or "pinv"):
        a = convert_to_tensor(a, name="a")
        if not a.dtype.is_floating and not a.dtype.is_complex:
            raise TypeError(f"Input `a` must have float or complex dtype (saw {a.dtype}).")
        dtype = a.dtype.real_dtype
        if rcond is None:
            d = a.shape.as_tuple()
            if d is not None and d[-2] is not None and d[-1] is not None:
                rcond = 10.0 * max(d[-2], d[-1]) * float(np.finfo(dtype.np).eps)
            else:
                rcond = 10.0 * tf.cast(tf.reduce_max(tf.shape(a)[-2:]), dtype) * \
                    float(np.finfo(dtype.np).eps)
        rcond = convert_to_tensor(rcond, dtype=dtype, name="rcond")
        s, u, v = svd(a, full_matrices=False, compute_uv=True)
        cutoff = rcond * tf.reduce_max(tf.real(s) if s.dtype.is_complex else s, axis=-1)
        s_real = tf.real(s) if s.dtype.is_complex else s
        s_safe = tf.where_v2(s_real > tf.expand_dims(cutoff, -1), s_real,
                             np.inf * tf.ones_like(s_real))
        return tf.matmul(v / tf.cast(tf.expand_dims(s_safe, -2), a.dtype), u,
                         adjoint_b=True)


# =======================================================================================
# LinearOperator family (Python composites, as TF's tf.linalg.LinearOperator*)
# =======================================================================================
class LinearOperator:
    """A (batch of) linear operator(s) ``A`` of shape ``batch_shape + [M, N]``, defined by
    its dense matrix (:meth:`_dense`); subclasses override the methods they can do
    better (a diagonal's solve, an identity's matmul ...). The ``is_*`` hints are kept
    as given and used where TF uses them (``cholesky`` for self-adjoint positive definite
    operators)."""

    def __init__(self, dtype: Any, graph_parents: Any = None, is_non_singular: Any = None,
                 is_self_adjoint: Any = None, is_positive_definite: Any = None,
                 is_square: Any = None, name: str | None = None) -> None:
        if is_positive_definite and is_non_singular is False:
            raise ValueError("A positive definite matrix is always non-singular.")
        if is_positive_definite:
            is_non_singular = True
        if is_non_singular and is_square is False:
            raise ValueError("A non-singular matrix is always square.")
        if is_non_singular:
            is_square = True
        if is_self_adjoint and is_square is False:
            raise ValueError("A self-adjoint matrix is always square.")
        if is_self_adjoint:
            is_square = True
        self._dtype = _dt.as_dtype(dtype) if dtype is not None else None
        self._graph_parents = list(graph_parents or [])
        self._is_non_singular = is_non_singular
        self._is_self_adjoint = is_self_adjoint
        self._is_positive_definite = is_positive_definite
        self._is_square_hint = is_square
        self._name = name or type(self).__name__

    # -- facts ------------------------------------------------------------------------
    @property
    def dtype(self) -> Any:
        return self._dtype

    @property
    def name(self) -> str:
        return self._name

    @property
    def graph_parents(self) -> list:
        return self._graph_parents

    @property
    def is_non_singular(self) -> Any:
        return self._is_non_singular

    @property
    def is_self_adjoint(self) -> Any:
        return self._is_self_adjoint

    @property
    def is_positive_definite(self) -> Any:
        return self._is_positive_definite

    @property
    def is_square(self) -> Any:
        if self._is_square_hint is not None:
            return self._is_square_hint
        m, n = self.shape.as_tuple()[-2:] if self.shape.ndims else (None, None)
        return None if m is None or n is None else m == n

    @property
    def shape(self) -> TensorShape:
        return self._shape()

    def _shape(self) -> TensorShape:
        return self._dense().shape

    @property
    def batch_shape(self) -> TensorShape:
        d = self.shape.as_tuple()
        return unknown_shape() if d is None else TensorShape(d[:-2])

    @property
    def tensor_rank(self) -> int | None:
        return self.shape.ndims

    @property
    def domain_dimension(self) -> Any:
        d = self.shape.as_tuple()
        return None if d is None else d[-1]

    @property
    def range_dimension(self) -> Any:
        d = self.shape.as_tuple()
        return None if d is None else d[-2]

    def shape_tensor(self, name: str = "shape_tensor") -> Tensor:
        tf = _tf()
        with name_scope(self._name):
            if self.shape.is_fully_defined():
                return tf.constant(self.shape.as_list(), dtype=_dt.int32, name=name)
            return tf.shape(self._dense(), name=name)

    def batch_shape_tensor(self, name: str = "batch_shape_tensor") -> Tensor:
        return self.shape_tensor()[:-2]

    def tensor_rank_tensor(self, name: str = "tensor_rank_tensor") -> Tensor:
        return _tf().size(self.shape_tensor(), name=name)

    def domain_dimension_tensor(self, name: str = "domain_dimension_tensor") -> Tensor:
        return self.shape_tensor()[-1]

    def range_dimension_tensor(self, name: str = "range_dimension_tensor") -> Tensor:
        return self.shape_tensor()[-2]

    # -- dense fallbacks ----------------------------------------------------------------
    def _dense(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} needs _dense")

    def to_dense(self, name: str = "to_dense") -> Tensor:
        with name_scope(self._name):
            with name_scope(name):
                return self._dense()

    def _matmul(self, x: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        return _tf().matmul(self._dense(), x, adjoint_a=adjoint, adjoint_b=adjoint_arg)

    def matmul(self, x: Any, adjoint: bool = False, adjoint_arg: bool = False,
               name: str = "matmul") -> Any:
        """``A @ x`` (``A^H`` with ``adjoint``, ``x^H`` with ``adjoint_arg``); another
        LinearOperator gives their composition."""
        if isinstance(x, LinearOperator):
            left = self.adjoint() if adjoint else self
            right = x.adjoint() if adjoint_arg else x
            return LinearOperatorComposition([left, right])
        with name_scope(self._name):
            with name_scope(name):
                x = convert_to_tensor(x, name="x", dtype=self.dtype)
                return self._matmul(x, adjoint, adjoint_arg)

    def matvec(self, x: Any, adjoint: bool = False, name: str = "matvec") -> Tensor:
        tf = _tf()
        with name_scope(self._name):
            with name_scope(name):
                x = convert_to_tensor(x, name="x", dtype=self.dtype)
                return tf.squeeze(self._matmul(tf.expand_dims(x, -1), adjoint, False), -1)

    def _solve(self, rhs: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        tf = _tf()
        if adjoint_arg:
            rhs = tf.linalg.adjoint(rhs)
        if self._is_self_adjoint and self._is_positive_definite:
            return cholesky_solve(cholesky(self._dense()), rhs)
        return matrix_solve(self._dense(), rhs, adjoint=adjoint)

    def solve(self, rhs: Any, adjoint: bool = False, adjoint_arg: bool = False,
              name: str = "solve") -> Any:
        """``x`` with ``A @ x = rhs``."""
        if self.is_non_singular is False:
            raise NotImplementedError("Exact solve not implemented for an operator that "
                                      "is expected to be singular.")
        if self.is_square is False:
            raise NotImplementedError("Exact solve not implemented for an operator that "
                                      "is expected to not be square.")
        if isinstance(rhs, LinearOperator):
            left = self.adjoint() if adjoint else self
            right = rhs.adjoint() if adjoint_arg else rhs
            return LinearOperatorComposition([left.inverse(), right])
        with name_scope(self._name):
            with name_scope(name):
                rhs = convert_to_tensor(rhs, name="rhs", dtype=self.dtype)
                return self._solve(rhs, adjoint, adjoint_arg)

    def solvevec(self, rhs: Any, adjoint: bool = False, name: str = "solve") -> Tensor:
        tf = _tf()
        with name_scope(self._name):
            with name_scope(name):
                rhs = convert_to_tensor(rhs, name="rhs", dtype=self.dtype)
                return tf.squeeze(self._solve(tf.expand_dims(rhs, -1), adjoint, False), -1)

    def _determinant(self) -> Tensor:
        if self._is_self_adjoint and self._is_positive_definite:
            return _tf().exp(self._log_abs_determinant())
        return matrix_determinant(self._dense())

    def determinant(self, name: str = "det") -> Tensor:
        if self.is_square is False:
            raise NotImplementedError("Determinant not implemented for an operator that "
                                      "is expected to not be square.")
        with name_scope(self._name):
            with name_scope(name):
                return self._determinant()

    def _log_abs_determinant(self) -> Tensor:
        tf = _tf()
        if self._is_self_adjoint and self._is_positive_definite:
            diag = tf.matrix_diag_part(cholesky(self._dense()))
            return 2.0 * tf.reduce_sum(tf.log(tf.abs(diag)), axis=[-1])
        return tf.abs(log_matrix_determinant(self._dense())[1]) if self.dtype.is_complex \
            else log_matrix_determinant(self._dense())[1]

    def log_abs_determinant(self, name: str = "log_abs_det") -> Tensor:
        if self.is_square is False:
            raise NotImplementedError("Determinant not implemented for an operator that "
                                      "is expected to not be square.")
        with name_scope(self._name):
            with name_scope(name):
                return self._log_abs_determinant()

    def _diag_part(self) -> Tensor:
        return _tf().matrix_diag_part(self._dense())

    def diag_part(self, name: str = "diag_part") -> Tensor:
        with name_scope(self._name):
            with name_scope(name):
                return self._diag_part()

    def trace(self, name: str = "trace") -> Tensor:
        with name_scope(self._name):
            with name_scope(name):
                return _tf().reduce_sum(self._diag_part(), axis=-1)

    def add_to_tensor(self, x: Any, name: str = "add_to_tensor") -> Tensor:
        with name_scope(self._name):
            with name_scope(name):
                return self._dense() + convert_to_tensor(x, name="x", dtype=self.dtype)

    def adjoint(self, name: str = "adjoint") -> LinearOperator:
        if self.is_self_adjoint is True:
            return self
        return LinearOperatorAdjoint(self)

    H = property(lambda self: self.adjoint())

    def inverse(self, name: str = "inverse") -> LinearOperator:
        if self.is_square is False:
            raise ValueError("Cannot take the Inverse: This operator represents a non "
                             "square matrix.")
        if self.is_non_singular is False:
            raise ValueError("Cannot take the Inverse: This operator represents a singular "
                             "matrix.")
        return LinearOperatorInversion(self)

    def cholesky(self, name: str = "cholesky") -> LinearOperator:
        if not (self._is_positive_definite and self._is_self_adjoint):
            raise ValueError("Cholesky decomposition is only supported for positive definite "
                             "and self-adjoint operators.")
        return LinearOperatorLowerTriangular(cholesky(self._dense()),
                                             is_non_singular=True, is_square=True)

    def eigvals(self, name: str = "eigvals") -> Tensor:
        if not self._is_self_adjoint:
            raise NotImplementedError("Only self-adjoint matrices are supported.")
        return self_adjoint_eigvals(self._dense())

    def cond(self, name: str = "cond") -> Tensor:
        tf = _tf()
        s = svd(self._dense(), compute_uv=False)
        return tf.reduce_max(s, axis=-1) / tf.reduce_min(s, axis=-1)

    def assert_non_singular(self, name: str = "assert_non_singular") -> Any:
        tf = _tf()
        s = svd(self._dense(), compute_uv=False)
        return tf.assert_positive(tf.reduce_min(tf.abs(s), axis=-1),
                                  message="Singular operator:  Found zero singular value.")

    def assert_positive_definite(self, name: str = "assert_positive_definite") -> Any:
        return _tf().identity(cholesky(self._dense())).op

    def assert_self_adjoint(self, name: str = "assert_self_adjoint") -> Any:
        tf = _tf()
        dense = self._dense()
        return tf.assert_equal(dense, tf.linalg.adjoint(dense),
                               message="Matrix was not equal to its adjoint.")


def _as_op_tensor(x: Any, name: str, dtype: Any = None) -> Tensor:
    return convert_to_tensor(x, name=name, dtype=dtype)


class LinearOperatorFullMatrix(LinearOperator):
    """``A`` given by a dense ``[..., M, N]`` matrix."""

    def __init__(self, matrix: Any, is_non_singular: Any = None, is_self_adjoint: Any = None,
                 is_positive_definite: Any = None, is_square: Any = None,
                 name: str = "LinearOperatorFullMatrix") -> None:
        with name_scope(name):
            self._matrix = _as_op_tensor(matrix, "matrix")
        super().__init__(self._matrix.dtype, [self._matrix], is_non_singular, is_self_adjoint,
                         is_positive_definite, is_square, name)

    def _dense(self) -> Tensor:
        return self._matrix


class LinearOperatorDiag(LinearOperator):
    """``A = diag(d)`` for a ``[..., N]`` diagonal ``d``."""

    def __init__(self, diag: Any, is_non_singular: Any = None, is_self_adjoint: Any = None,
                 is_positive_definite: Any = None, is_square: Any = True,
                 name: str = "LinearOperatorDiag") -> None:
        with name_scope(name):
            self._diag = _as_op_tensor(diag, "diag")
        if not self._diag.dtype.is_complex:
            if is_self_adjoint is False:
                raise ValueError("A real diagonal operator is always self adjoint.")
            is_self_adjoint = True
        if is_square is False:
            raise ValueError("Only square diagonal operators currently supported.")
        super().__init__(self._diag.dtype, [self._diag], is_non_singular, is_self_adjoint,
                         is_positive_definite, True, name)

    @property
    def diag(self) -> Tensor:
        return self._diag

    def _shape(self) -> TensorShape:
        d = self._diag.shape.as_tuple()
        return unknown_shape() if d is None else TensorShape(d + d[-1:])

    def _dense(self) -> Tensor:
        return _tf().matrix_diag(self._diag)

    def _matmul(self, x: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        tf = _tf()
        d = tf.conj(self._diag) if adjoint else self._diag
        x = tf.linalg.adjoint(x) if adjoint_arg else x
        return tf.expand_dims(d, -1) * x

    def _solve(self, rhs: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        tf = _tf()
        d = tf.conj(self._diag) if adjoint else self._diag
        rhs = tf.linalg.adjoint(rhs) if adjoint_arg else rhs
        return rhs / tf.expand_dims(d, -1)

    def _determinant(self) -> Tensor:
        return _tf().reduce_prod(self._diag, axis=[-1])

    def _log_abs_determinant(self) -> Tensor:
        tf = _tf()
        out = tf.reduce_sum(tf.log(tf.abs(self._diag)), axis=[-1])
        return tf.cast(out, self.dtype) if self.dtype.is_complex else out

    def _diag_part(self) -> Tensor:
        return self._diag

    def add_to_tensor(self, x: Any, name: str = "add_to_tensor") -> Tensor:
        tf = _tf()
        with name_scope(self._name):
            with name_scope(name):
                x = convert_to_tensor(x, name="x", dtype=self.dtype)
                return tf.matrix_set_diag(x, tf.matrix_diag_part(x) + self._diag)


class LinearOperatorScaledIdentity(LinearOperator):
    """``A = multiplier * I`` of ``num_rows`` rows (``multiplier`` may be batched)."""

    def __init__(self, num_rows: Any, multiplier: Any, is_non_singular: Any = None,
                 is_self_adjoint: Any = None, is_positive_definite: Any = None,
                 is_square: Any = True, assert_proper_shapes: bool = False,
                 name: str = "LinearOperatorScaledIdentity") -> None:
        with name_scope(name):
            self._multiplier = _as_op_tensor(multiplier, "multiplier")
            self._num_rows = num_rows
        super().__init__(self._multiplier.dtype, [self._multiplier], is_non_singular,
                         is_self_adjoint, is_positive_definite, True, name)

    @property
    def multiplier(self) -> Tensor:
        return self._multiplier

    def _n(self) -> Any:
        v = self._num_rows
        return int(v) if isinstance(v, (int, np.integer)) else v

    def _shape(self) -> TensorShape:
        n = self._n()
        n = n if isinstance(n, int) else None
        m = self._multiplier.shape.as_tuple()
        return unknown_shape() if m is None else TensorShape(m + (n, n))

    def _dense(self) -> Tensor:
        tf = _tf()
        eye = tf.eye(self._n(), dtype=self.dtype)
        return tf.expand_dims(tf.expand_dims(self._multiplier, -1), -1) * eye

    def _scale(self, adjoint: bool) -> Tensor:
        tf = _tf()
        m = tf.conj(self._multiplier) if adjoint else self._multiplier
        return tf.expand_dims(tf.expand_dims(m, -1), -1)

    def _matmul(self, x: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        x = _tf().linalg.adjoint(x) if adjoint_arg else x
        return self._scale(adjoint) * x

    def _solve(self, rhs: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        rhs = _tf().linalg.adjoint(rhs) if adjoint_arg else rhs
        return rhs / self._scale(adjoint)

    def _determinant(self) -> Tensor:
        tf = _tf()
        return self._multiplier ** tf.cast(self._n(), self.dtype)

    def _log_abs_determinant(self) -> Tensor:
        tf = _tf()
        out = tf.cast(self._n(), self.dtype.real_dtype) * tf.log(tf.abs(self._multiplier))
        return tf.cast(out, self.dtype) if self.dtype.is_complex else out

    def _diag_part(self) -> Tensor:
        tf = _tf()
        return tf.expand_dims(self._multiplier, -1) * tf.ones([self._n()], dtype=self.dtype)


class LinearOperatorIdentity(LinearOperatorScaledIdentity):
    """The identity ``I`` of ``num_rows`` rows (optionally batched)."""

    def __init__(self, num_rows: Any, batch_shape: Any = None, dtype: Any = None,
                 is_non_singular: Any = True, is_self_adjoint: Any = True,
                 is_positive_definite: Any = True, is_square: Any = True,
                 assert_proper_shapes: bool = False,
                 name: str = "LinearOperatorIdentity") -> None:
        tf = _tf()
        dtype = _dt.as_dtype(dtype or _dt.float32)
        if not is_self_adjoint or not is_positive_definite or not is_non_singular:
            raise ValueError("An identity operator is always non-singular, self-adjoint "
                             "and positive definite.")
        shape = [] if batch_shape is None else list(batch_shape)
        with name_scope(name):
            ones = tf.ones(shape, dtype=dtype)
        super().__init__(num_rows, ones, True, True, True, True, assert_proper_shapes, name)
        self._graph_parents = []

    def _matmul(self, x: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        tf = _tf()
        x = tf.linalg.adjoint(x) if adjoint_arg else x
        return x if not self._multiplier.shape.ndims else self._scale(adjoint) * x


class LinearOperatorZeros(LinearOperator):
    """The ``num_rows x num_columns`` zero matrix (optionally batched)."""

    def __init__(self, num_rows: Any, num_columns: Any = None, batch_shape: Any = None,
                 dtype: Any = None, is_non_singular: Any = False, is_self_adjoint: Any = True,
                 is_positive_definite: Any = False, is_square: Any = True,
                 assert_proper_shapes: bool = False, name: str = "LinearOperatorZeros") -> None:
        if is_non_singular:
            raise ValueError("A zero operator is always singular.")
        if is_positive_definite:
            raise ValueError("A zero operator is always not positive-definite.")
        num_columns = num_rows if num_columns is None else num_columns
        self._rows, self._cols = num_rows, num_columns
        self._batch = [] if batch_shape is None else list(batch_shape)
        super().__init__(dtype or _dt.float32, [], False, is_self_adjoint, False,
                         num_rows == num_columns if is_square is None else is_square, name)

    def _shape(self) -> TensorShape:
        return TensorShape(self._batch + [self._rows, self._cols])

    def _dense(self) -> Tensor:
        return _tf().zeros(self._batch + [self._rows, self._cols], dtype=self.dtype)

    def _matmul(self, x: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        return _tf().matmul(self._dense(), x, adjoint_a=adjoint, adjoint_b=adjoint_arg)


class LinearOperatorLowerTriangular(LinearOperator):
    """``A = tril(matrix)``: only the lower triangle of ``tril`` is used."""

    def __init__(self, tril: Any, is_non_singular: Any = None, is_self_adjoint: Any = None,
                 is_positive_definite: Any = None, is_square: Any = None,
                 name: str = "LinearOperatorLowerTriangular") -> None:
        if is_square is False:
            raise ValueError("Only square lower triangular operators supported at this time.")
        with name_scope(name):
            self._tril = _tf().matrix_band_part(_as_op_tensor(tril, "tril"), -1, 0)
        super().__init__(self._tril.dtype, [self._tril], is_non_singular, is_self_adjoint,
                         is_positive_definite, True, name)

    def _dense(self) -> Tensor:
        return self._tril

    def _solve(self, rhs: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        rhs = _tf().linalg.adjoint(rhs) if adjoint_arg else rhs
        return matrix_triangular_solve(self._tril, rhs, lower=True, adjoint=adjoint)

    def _determinant(self) -> Tensor:
        return _tf().reduce_prod(self._diag_part(), axis=[-1])

    def _log_abs_determinant(self) -> Tensor:
        tf = _tf()
        out = tf.reduce_sum(tf.log(tf.abs(self._diag_part())), axis=[-1])
        return tf.cast(out, self.dtype) if self.dtype.is_complex else out


class LinearOperatorAdjoint(LinearOperator):
    """``A^H`` of another operator."""

    def __init__(self, operator: LinearOperator, is_non_singular: Any = None,
                 is_self_adjoint: Any = None, is_positive_definite: Any = None,
                 is_square: Any = None, name: str | None = None) -> None:
        self.operator = operator
        super().__init__(operator.dtype, operator.graph_parents,
                         operator.is_non_singular if is_non_singular is None
                         else is_non_singular,
                         operator.is_self_adjoint if is_self_adjoint is None
                         else is_self_adjoint,
                         operator.is_positive_definite if is_positive_definite is None
                         else is_positive_definite,
                         operator.is_square if is_square is None else is_square,
                         name or operator.name + "_adjoint")

    def _shape(self) -> TensorShape:
        d = self.operator.shape.as_tuple()
        return unknown_shape() if d is None else TensorShape(d[:-2] + (d[-1], d[-2]))

    def _dense(self) -> Tensor:
        return _tf().linalg.adjoint(self.operator._dense())

    def _matmul(self, x: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        return self.operator._matmul(x, not adjoint, adjoint_arg)

    def _solve(self, rhs: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        return self.operator._solve(rhs, not adjoint, adjoint_arg)

    def _determinant(self) -> Tensor:
        return _tf().conj(self.operator._determinant())

    def _log_abs_determinant(self) -> Tensor:
        return self.operator._log_abs_determinant()


class LinearOperatorInversion(LinearOperator):
    """``A^-1`` of another (square, non-singular) operator."""

    def __init__(self, operator: LinearOperator, is_non_singular: Any = None,
                 is_self_adjoint: Any = None, is_positive_definite: Any = None,
                 is_square: Any = None, name: str | None = None) -> None:
        if operator.is_non_singular is False or is_non_singular is False:
            raise ValueError("operator and LinearOperatorInversion must be non-singular.")
        if operator.is_square is False or is_square is False:
            raise ValueError("operator and LinearOperatorInversion must be square.")
        self.operator = operator
        super().__init__(operator.dtype, operator.graph_parents, True,
                         operator.is_self_adjoint if is_self_adjoint is None
                         else is_self_adjoint,
                         operator.is_positive_definite if is_positive_definite is None
                         else is_positive_definite, True, name or operator.name + "_inv")

    def _shape(self) -> TensorShape:
        return self.operator.shape

    def _dense(self) -> Tensor:
        return matrix_inverse(self.operator._dense())

    def _matmul(self, x: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        return self.operator._solve(x, adjoint, adjoint_arg)

    def _solve(self, rhs: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        return self.operator._matmul(rhs, adjoint, adjoint_arg)

    def _determinant(self) -> Tensor:
        return 1.0 / self.operator._determinant()

    def _log_abs_determinant(self) -> Tensor:
        return -self.operator._log_abs_determinant()


class LinearOperatorComposition(LinearOperator):
    """``A1 @ A2 @ ... @ An`` of a list of operators."""

    def __init__(self, operators: Any, is_non_singular: Any = None,
                 is_self_adjoint: Any = None, is_positive_definite: Any = None,
                 is_square: Any = None, name: str | None = None) -> None:
        operators = list(operators)
        if not operators:
            raise ValueError(f"Expected a non-empty list of operators. Found: {operators}")
        if any(o.dtype != operators[0].dtype for o in operators):
            raise TypeError("Expected all operators to have the same dtype.")
        self.operators = operators
        if all(o.is_non_singular for o in operators) and is_non_singular is None:
            is_non_singular = True
        parents = [p for o in operators for p in o.graph_parents]
        super().__init__(operators[0].dtype, parents, is_non_singular, is_self_adjoint,
                         is_positive_definite, is_square,
                         name or "_o_".join(o.name for o in operators))

    def _shape(self) -> TensorShape:
        first, last = self.operators[0].shape.as_tuple(), self.operators[-1].shape.as_tuple()
        if first is None or last is None:
            return unknown_shape()
        batch: tuple = ()
        for o in self.operators:
            d = o.shape.as_tuple()
            batch = _broadcast_batch(batch, d[:-2], None) if d is not None else batch
        return TensorShape(batch + (first[-2], last[-1]))

    def _dense(self) -> Tensor:
        tf = _tf()
        out = self.operators[-1]._dense()
        for o in reversed(self.operators[:-1]):
            out = tf.matmul(o._dense(), out)
        return out

    def _matmul(self, x: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        ops = self.operators if adjoint else list(reversed(self.operators))
        out = ops[0]._matmul(x, adjoint, adjoint_arg)
        for o in ops[1:]:
            out = o._matmul(out, adjoint, False)
        return out

    def _solve(self, rhs: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        ops = list(reversed(self.operators)) if adjoint else self.operators
        out = ops[0]._solve(rhs, adjoint, adjoint_arg)
        for o in ops[1:]:
            out = o._solve(out, adjoint, False)
        return out

    def _determinant(self) -> Tensor:
        out = self.operators[0]._determinant()
        for o in self.operators[1:]:
            out = out * o._determinant()
        return out

    def _log_abs_determinant(self) -> Tensor:
        out = self.operators[0]._log_abs_determinant()
        for o in self.operators[1:]:
            out = out + o._log_abs_determinant()
        return out


class LinearOperatorKronecker(LinearOperator):
    """The Kronecker product ``A1 x A2 x ... x An`` of a list of operators."""

    def __init__(self, operators: Any, is_non_singular: Any = None,
                 is_self_adjoint: Any = None, is_positive_definite: Any = None,
                 is_square: Any = None, name: str | None = None) -> None:
        operators = list(operators)
        if not operators:
            raise ValueError(f"Expected a list of >=1 operators. Found: {operators}")
        self.operators = operators
        parents = [p for o in operators for p in o.graph_parents]
        super().__init__(operators[0].dtype, parents, is_non_singular, is_self_adjoint,
                         is_positive_definite, is_square,
                         name or "_x_".join(o.name for o in operators))

    def _dense(self) -> Tensor:
        tf = _tf()
        out = self.operators[0]._dense()
        for o in self.operators[1:]:
            b = o._dense()
            sa, sb = tf.shape(out), tf.shape(b)
            prod = tf.expand_dims(tf.expand_dims(out, -1), -3) * \
                tf.expand_dims(tf.expand_dims(b, -2), -4)
            out = tf.reshape(prod, tf.concat([tf.shape(prod)[:-4],
                                              [sa[-2] * sb[-2], sa[-1] * sb[-1]]], 0))
        return out

    def _determinant(self) -> Tensor:
        tf = _tf()
        total = 1
        out = None
        for o in self.operators:
            total *= o.domain_dimension
        for o in self.operators:
            d = o._determinant() ** tf.cast(total // o.domain_dimension, self.dtype)
            out = d if out is None else out * d
        return out


class LinearOperatorBlockDiag(LinearOperator):
    """The block-diagonal operator ``diag(A1, ..., An)`` of square operators."""

    def __init__(self, operators: Any, is_non_singular: Any = None,
                 is_self_adjoint: Any = None, is_positive_definite: Any = None,
                 is_square: Any = True, name: str | None = None) -> None:
        operators = list(operators)
        if not operators:
            raise ValueError(f"Expected a non-empty list of operators. Found: {operators}")
        if is_square is False:
            raise ValueError("Only square operators supported.")
        self.operators = operators
        parents = [p for o in operators for p in o.graph_parents]
        super().__init__(operators[0].dtype, parents, is_non_singular, is_self_adjoint,
                         is_positive_definite, True,
                         name or "_ds_".join(o.name for o in operators))

    def _dense(self) -> Tensor:
        tf = _tf()
        dims = [o.domain_dimension for o in self.operators]
        total = sum(dims)
        rows = []
        start = 0
        for o, n in zip(self.operators, dims):
            d = o._dense()
            pad = [[0, 0]] * (d.shape.ndims - 2) + [[0, 0], [start, total - start - n]]
            rows.append(tf.pad(d, pad))
            start += n
        return tf.concat(rows, axis=-2)

    def _determinant(self) -> Tensor:
        out = self.operators[0]._determinant()
        for o in self.operators[1:]:
            out = out * o._determinant()
        return out


class LinearOperatorHouseholder(LinearOperator):
    """The reflection ``I - 2 v v^H / (v^H v)`` about ``reflection_axis`` ``v``."""

    def __init__(self, reflection_axis: Any, is_non_singular: Any = None,
                 is_self_adjoint: Any = None, is_positive_definite: Any = None,
                 is_square: Any = None, name: str = "LinearOperatorHouseholder") -> None:
        with name_scope(name):
            self._axis = _as_op_tensor(reflection_axis, "reflection_axis")
        super().__init__(self._axis.dtype, [self._axis], True, True, False, True, name)

    @property
    def reflection_axis(self) -> Tensor:
        return self._axis

    def _dense(self) -> Tensor:
        tf = _tf()
        v = self._axis
        n = tf.shape(v)[-1]
        outer = tf.expand_dims(v, -1) * tf.expand_dims(tf.conj(v), -2)
        norm2 = tf.reduce_sum(v * tf.conj(v), axis=-1)
        return tf.eye(n, dtype=self.dtype) - 2.0 * outer / tf.expand_dims(
            tf.expand_dims(norm2, -1), -1)

    def _determinant(self) -> Tensor:
        tf = _tf()
        return -tf.ones(tf.shape(self._axis)[:-1], dtype=self.dtype)


class LinearOperatorPermutation(LinearOperator):
    """The permutation ``(A x)_i = x_{perm_i}``."""

    def __init__(self, perm: Any, dtype: Any = _dt.float32, is_non_singular: Any = None,
                 is_self_adjoint: Any = None, is_positive_definite: Any = None,
                 is_square: Any = None, name: str = "LinearOperatorPermutation") -> None:
        with name_scope(name):
            self._perm = _as_op_tensor(perm, "perm")
        super().__init__(dtype, [self._perm], True, is_self_adjoint, is_positive_definite,
                         True, name)

    @property
    def perm(self) -> Tensor:
        return self._perm

    def _dense(self) -> Tensor:
        tf = _tf()
        return tf.one_hot(self._perm, tf.shape(self._perm)[-1], dtype=self.dtype)


class LinearOperatorToeplitz(LinearOperator):
    """The Toeplitz matrix with first column ``col`` and first row ``row``."""

    def __init__(self, col: Any, row: Any, is_non_singular: Any = None,
                 is_self_adjoint: Any = None, is_positive_definite: Any = None,
                 is_square: Any = None, name: str = "LinearOperatorToeplitz") -> None:
        with name_scope(name):
            self._col = _as_op_tensor(col, "col")
            self._row = _as_op_tensor(row, "row", self._col.dtype)
        super().__init__(self._col.dtype, [self._col, self._row], is_non_singular,
                         is_self_adjoint, is_positive_definite, True, name)

    @property
    def col(self) -> Tensor:
        return self._col

    @property
    def row(self) -> Tensor:
        return self._row

    def _dense(self) -> Tensor:
        tf = _tf()
        n = self._col.shape.as_tuple()[-1]
        # entry (i, j) is col[i - j] below the diagonal and row[j - i] above it
        vec = tf.concat([tf.reverse(self._row[..., 1:], [-1]), self._col], axis=-1)
        idx = np.array([[n - 1 + i - j for j in range(n)] for i in range(n)], np.int32)
        return tf.gather(vec, idx, axis=-1) if vec.shape.ndims == 1 else \
            tf.gather(vec, idx, axis=vec.shape.ndims - 1)


class LinearOperatorTridiag(LinearOperator):
    """A tridiagonal operator from its diagonals (TF's three formats)."""

    def __init__(self, diagonals: Any, diagonals_format: str = "compact",
                 is_non_singular: Any = None, is_self_adjoint: Any = None,
                 is_positive_definite: Any = None, is_square: Any = None,
                 name: str = "LinearOperatorTridiag") -> None:
        with name_scope(name):
            self._compact = _to_compact(_tf(), diagonals, diagonals_format)
        self._diagonals = diagonals
        self._format = diagonals_format
        super().__init__(self._compact.dtype, [self._compact], is_non_singular,
                         is_self_adjoint, is_positive_definite, True, name)

    @property
    def diagonals(self) -> Any:
        return self._diagonals

    @property
    def diagonals_format(self) -> str:
        return self._format

    def _dense(self) -> Tensor:
        tf = _tf()
        c = self._compact
        n = tf.shape(c)[-1]
        eye = tf.eye(n, dtype=self.dtype)
        return tridiagonal_matmul(c, eye)

    def _matmul(self, x: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        tf = _tf()
        if adjoint:
            return super()._matmul(x, adjoint, adjoint_arg)
        x = tf.linalg.adjoint(x) if adjoint_arg else x
        return tridiagonal_matmul(self._compact, x)

    def _solve(self, rhs: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        if adjoint:
            return super()._solve(rhs, adjoint, adjoint_arg)
        return tridiagonal_solve(self._compact, rhs, transpose_rhs=adjoint_arg,
                                 conjugate_rhs=adjoint_arg)


class LinearOperatorLowRankUpdate(LinearOperator):
    """``A = L + U D V^H`` for a base operator ``L``, ``U`` and optional ``diag_update``
    ``D`` and ``V`` (default ``U``)."""

    def __init__(self, base_operator: LinearOperator, u: Any, diag_update: Any = None,
                 v: Any = None, is_diag_update_positive: Any = None,
                 is_non_singular: Any = None, is_self_adjoint: Any = None,
                 is_positive_definite: Any = None, is_square: Any = None,
                 name: str = "LinearOperatorLowRankUpdate") -> None:
        with name_scope(name):
            self.base_operator = base_operator
            self.u = _as_op_tensor(u, "u", base_operator.dtype)
            self.v = self.u if v is None else _as_op_tensor(v, "v", base_operator.dtype)
            self.diag_update = None if diag_update is None else _as_op_tensor(
                diag_update, "diag_update", base_operator.dtype)
        super().__init__(base_operator.dtype, base_operator.graph_parents + [self.u],
                         is_non_singular, is_self_adjoint, is_positive_definite, is_square,
                         name)

    def _dense(self) -> Tensor:
        tf = _tf()
        u = self.u if self.diag_update is None else \
            self.u * tf.expand_dims(self.diag_update, -2)
        return self.base_operator._dense() + tf.matmul(u, self.v, adjoint_b=True)


def _to_complex(x: Tensor) -> Tensor:
    """``x`` as complex: complex128 for float64, complex64 for other real dtypes."""
    if x.dtype.is_complex:
        return x
    return _tf().cast(x, _dt.complex128 if x.dtype.base_dtype is _dt.float64 else _dt.complex64)


_CIRCULANT_SPECTRUM_DTYPES = (_dt.float16, _dt.float32, _dt.float64, _dt.complex64, _dt.complex128)


class _BaseLinearOperatorCirculant(LinearOperator):
    """A [[nested] block] circulant operator given by its spectrum (TF 1.15's
    ``_BaseLinearOperatorCirculant``): with ``F`` the ``block_depth``-dimensional DFT,
    ``A x = F^H diag(spectrum) F x``. The spectrum has shape ``batch_shape + block_shape``;
    the operator is ``N x N`` with ``N = prod(block_shape)``. Products and solves run
    through ``tf.signal`` FFTs; results are cast to ``input_output_dtype`` (a complex
    result cast to a real dtype keeps its real part, as TF's Cast)."""

    def __init__(self, spectrum: Any, block_depth: int, input_output_dtype: Any = _dt.complex64,
                 is_non_singular: Any = None, is_self_adjoint: Any = None,
                 is_positive_definite: Any = None, is_square: Any = True,
                 name: str = "LinearOperatorCirculant") -> None:
        io_dtype = _dt.as_dtype(input_output_dtype).base_dtype
        self._block_depth = block_depth
        tf = _tf()
        with name_scope(name):
            spec = convert_to_tensor(spectrum, name="spectrum")
            if spec.dtype.base_dtype not in _CIRCULANT_SPECTRUM_DTYPES:
                raise TypeError(f"Argument spectrum must have dtype in "
                                f"{list(_CIRCULANT_SPECTRUM_DTYPES)}. Found: {spec.dtype}")
            if spec.shape.ndims is not None and spec.shape.ndims < block_depth:
                raise ValueError(f"Argument spectrum must have at least {block_depth} "
                                 f"dimensions.  Found: {spec}")
            self._spectrum = spec
            if not spec.dtype.is_complex:
                if is_self_adjoint is False:
                    raise ValueError("A real spectrum always corresponds to a self-adjoint "
                                     "operator.")
                is_self_adjoint = True
            if is_square is False:
                raise ValueError("A [[nested] block] circulant operator is always square.")
            self._block_shape_tensor = tf.shape(spec)[-block_depth:]
            self._spectrum_complex = _to_complex(spec)
            self._abs_spectrum = tf.abs(spec)
            self._conj_spectrum = tf.conj(self._spectrum_complex)
        super().__init__(io_dtype, [spec], is_non_singular, is_self_adjoint,
                         is_positive_definite, True, name)

    # -- facts --------------------------------------------------------------------------
    @property
    def spectrum(self) -> Tensor:
        return self._spectrum

    @property
    def block_depth(self) -> int:
        return self._block_depth

    @property
    def block_shape(self) -> TensorShape:
        d = self._spectrum.shape.as_tuple()
        return unknown_shape(self._block_depth) if d is None else \
            TensorShape(d[-self._block_depth:])

    def block_shape_tensor(self) -> Tensor:
        """The block shape (the spectrum's last ``block_depth`` dimensions) as a tensor."""
        return self._block_shape_tensor

    def _shape(self) -> TensorShape:
        d = self._spectrum.shape.as_tuple()
        if d is None:
            return unknown_shape()
        block = d[-self._block_depth:]
        n = None if any(b is None for b in block) else int(np.prod(block, dtype=np.int64))
        return TensorShape(d[:-self._block_depth] + (n, n))

    def _block_axes(self) -> list[int]:
        return [-(i + 1) for i in range(self._block_depth)]

    # -- FFT helpers --------------------------------------------------------------------
    def _fft(self, x: Tensor, inverse: bool = False) -> Tensor:
        sig = _tf().signal
        fns = {1: (sig.fft, sig.ifft), 2: (sig.fft2d, sig.ifft2d), 3: (sig.fft3d, sig.ifft3d)}
        return fns[self._block_depth][1 if inverse else 0](x)

    def _apply_spectrum(self, x: Tensor, spectrum: Tensor, divide: bool) -> Tensor:
        """``F^H diag(spectrum)^{+-1} F x`` for a batch matrix ``x`` (columns are the
        vectors): the columns become blocks, are transformed, scaled and transformed
        back."""
        tf = _tf()
        x = tf.cast(x, spectrum.dtype)
        rows = tf.linalg.matrix_transpose(x)  # [..., R, N]: one row per column of x
        lead = tf.shape(rows)[:-1]
        blocks = tf.reshape(rows, tf.concat([lead, self._block_shape_tensor], 0))
        spec = tf.expand_dims(spectrum, -(self._block_depth + 1))  # broadcast over R
        fx = self._fft(blocks)
        y = self._fft(fx / spec if divide else spec * fx, inverse=True)
        flat = tf.reshape(y, tf.concat([tf.shape(y)[:-self._block_depth], [-1]], 0))
        return tf.cast(tf.linalg.matrix_transpose(flat), self.dtype)

    def _matmul(self, x: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        x = _tf().linalg.adjoint(x) if adjoint_arg else x
        spectrum = self._conj_spectrum if adjoint else self._spectrum_complex
        return self._apply_spectrum(x, spectrum, divide=False)

    def _solve(self, rhs: Tensor, adjoint: bool, adjoint_arg: bool) -> Tensor:
        rhs = _tf().linalg.adjoint(rhs) if adjoint_arg else rhs
        spectrum = self._conj_spectrum if adjoint else self._spectrum_complex
        return self._apply_spectrum(rhs, spectrum, divide=True)

    def _dense(self) -> Tensor:
        tf = _tf()
        shape = self.shape
        if shape.is_fully_defined():
            n, batch = shape.as_list()[-1], shape.as_list()[:-2]
        else:
            n = tf.reduce_prod(self._block_shape_tensor)
            batch = tf.shape(self._spectrum)[:-self._block_depth]
        eye = tf.eye(n, batch_shape=batch, dtype=self.dtype)
        return self._matmul(eye, False, False)

    def _determinant(self) -> Tensor:
        tf = _tf()
        return tf.cast(tf.reduce_prod(self._spectrum, axis=self._block_axes()), self.dtype)

    def _log_abs_determinant(self) -> Tensor:
        tf = _tf()
        lad = tf.reduce_sum(tf.log(self._abs_spectrum), axis=self._block_axes())
        return tf.cast(lad, self.dtype)

    def _trace_value(self) -> Tensor:
        # every diagonal entry is the mean of the spectrum, so the trace is its sum
        tf = _tf()
        axes = self._block_axes()
        re = tf.reduce_sum(tf.real(self._spectrum), axis=axes)
        if not self.dtype.is_complex:
            return tf.cast(re, self.dtype)
        im = tf.zeros_like(re) if self.is_self_adjoint else \
            tf.reduce_sum(tf.imag(self._spectrum), axis=axes)
        return tf.cast(tf.complex(re, im), self.dtype)

    def trace(self, name: str = "trace") -> Tensor:
        with name_scope(self._name):
            with name_scope(name):
                return self._trace_value()

    def _diag_part(self) -> Tensor:
        tf = _tf()
        shape = self.shape
        if shape.is_fully_defined():
            diag_shape, size = shape.as_list()[:-1], shape.as_list()[-1]
        else:
            st = tf.shape(self._dense())
            diag_shape, size = st[:-1], st[-1]
        value = self._trace_value() / tf.cast(size, self.dtype)
        return tf.expand_dims(value, -1) * tf.ones(diag_shape, dtype=self.dtype)

    def convolution_kernel(self, name: str = "convolution_kernel") -> Tensor:
        """The kernel whose ``block_depth``-dimensional DFT is the spectrum."""
        with name_scope(self._name):
            with name_scope(name):
                return _tf().cast(self._fft(self._spectrum_complex, inverse=True),
                                  self.dtype)

    # -- checks -------------------------------------------------------------------------
    def assert_hermitian_spectrum(self, name: str = "assert_hermitian_spectrum") -> Any:
        """An op asserting the spectrum is Hermitian (the operator is real)."""
        tf = _tf()
        eps = float(np.finfo(self.dtype.real_dtype.np).eps)
        with name_scope(self._name):
            with name_scope(name):
                # as TF 1.15: eps times the int32 dimension tensor, which raises TypeError
                # (a float cannot be converted to int32) before any check is built
                max_err = eps * self.domain_dimension_tensor()
                imag = tf.imag(self.convolution_kernel())
                return tf.assert_less(tf.abs(imag), max_err,
                                      message="Spectrum was not Hermitian")

    def assert_non_singular(self, name: str = "assert_non_singular") -> Any:
        tf = _tf()
        with name_scope(self._name):
            with name_scope(name):
                return tf.assert_positive(
                    tf.reduce_min(self._abs_spectrum),
                    message="Singular operator:  Spectrum contained zero values.")

    def assert_positive_definite(self, name: str = "assert_positive_definite") -> Any:
        tf = _tf()
        with name_scope(self._name):
            with name_scope(name):
                return tf.assert_positive(
                    tf.real(self._spectrum),
                    message="Not positive definite:  Real part of spectrum was not all "
                            "positive.")

    def assert_self_adjoint(self, name: str = "assert_self_adjoint") -> Any:
        tf = _tf()
        with name_scope(self._name):
            with name_scope(name):
                im = tf.imag(self._spectrum_complex)
                return tf.assert_equal(
                    im, tf.zeros_like(im),
                    message="Not self-adjoint:  The spectrum contained non-zero imaginary "
                            "part.")


class LinearOperatorCirculant(_BaseLinearOperatorCirculant):
    """A circulant operator from its spectrum (``tf.linalg.LinearOperatorCirculant``):
    ``A x = ifft(spectrum * fft(x))``; a real spectrum gives a self-adjoint operator."""

    def __init__(self, spectrum: Any, input_output_dtype: Any = _dt.complex64,
                 is_non_singular: Any = None, is_self_adjoint: Any = None,
                 is_positive_definite: Any = None, is_square: Any = True,
                 name: str = "LinearOperatorCirculant") -> None:
        super().__init__(spectrum, 1, input_output_dtype, is_non_singular, is_self_adjoint,
                         is_positive_definite, is_square, name)


class LinearOperatorCirculant2D(_BaseLinearOperatorCirculant):
    """A block circulant operator with circulant blocks, from its 2-D spectrum
    (``tf.linalg.LinearOperatorCirculant2D``), applied with ``fft2d``."""

    def __init__(self, spectrum: Any, input_output_dtype: Any = _dt.complex64,
                 is_non_singular: Any = None, is_self_adjoint: Any = None,
                 is_positive_definite: Any = None, is_square: Any = True,
                 name: str = "LinearOperatorCirculant2D") -> None:
        super().__init__(spectrum, 2, input_output_dtype, is_non_singular, is_self_adjoint,
                         is_positive_definite, is_square, name)


class LinearOperatorCirculant3D(_BaseLinearOperatorCirculant):
    """A doubly nested block circulant operator from its 3-D spectrum
    (``tf.linalg.LinearOperatorCirculant3D``), applied with ``fft3d``."""

    def __init__(self, spectrum: Any, input_output_dtype: Any = _dt.complex64,
                 is_non_singular: Any = None, is_self_adjoint: Any = None,
                 is_positive_definite: Any = None, is_square: Any = True,
                 name: str = "LinearOperatorCirculant3D") -> None:
        super().__init__(spectrum, 3, input_output_dtype, is_non_singular, is_self_adjoint,
                         is_positive_definite, is_square, name)


for _cls in (LinearOperator, LinearOperatorFullMatrix, LinearOperatorDiag,
             LinearOperatorIdentity, LinearOperatorScaledIdentity, LinearOperatorZeros,
             LinearOperatorLowerTriangular, LinearOperatorAdjoint, LinearOperatorInversion,
             LinearOperatorComposition, LinearOperatorKronecker, LinearOperatorBlockDiag,
             LinearOperatorHouseholder, LinearOperatorPermutation, LinearOperatorToeplitz,
             LinearOperatorTridiag, LinearOperatorLowRankUpdate, LinearOperatorCirculant,
             LinearOperatorCirculant2D, LinearOperatorCirculant3D):
    ks.export(f"linalg.{_cls.__name__}", _cls)
