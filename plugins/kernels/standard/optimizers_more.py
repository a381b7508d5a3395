"""More TF1 optimizers (FTRL, proximal gradient descent, proximal Adagrad, Adagrad dual
averaging), their ``Apply*``/``SparseApply*`` ops, and the cosine learning-rate decays,
with TF 1.15's ``python/training`` semantics and ``core/kernels/training_ops.cc``
arithmetic (the order of TF's CPU functors, in the variable's dtype).

==============================  ==========================================================
ApplyProximalGradientDescent    prox = var - delta * alpha
                                var = sign(prox) * max(|prox| - alpha * l1, 0)
                                / (1 + l2 * alpha)   (prox / (1 + l2 * alpha) when l1 <= 0)
ApplyProximalAdagrad            accum += grad^2; lr_t = lr / sqrt(accum); as above with
                                lr_t for alpha
ApplyFtrl / ApplyFtrlV2         g = grad (+ 2 * l2_shrinkage * var for V2)
                                new = accum + grad^2
                                linear += g - (new^-p - accum^-p) / lr * var
                                var = (l1 * sign(linear) - linear) / (new^-p / lr + 2 l2)
                                where |linear| > l1, else 0; accum = new
ApplyAdagradDA                  g_acc += grad; gg_acc += grad^2
                                var = -lr * sign(g_acc) * max(|g_acc| - T * l1, 0)
                                / (l2 * T * lr + sqrt(gg_acc))   (T: the global step)
==============================  ==========================================================

The sparse forms update only the rows named by ``indices`` (row by row, in order, where
an index repeats), with TF's two code paths: rows of one element take TF's scalar path
(some of its sums in double precision), longer rows its row-wise tensor path.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.framework.indexed_slices import IndexedSlices
from flowrt.graph import (Tensor, api_function, apply_op, colocate_with, convert_to_tensor,
                          name_scope)
from flowrt.op_registry import OpDef

from ._common import ks
from .optimizers import Optimizer, _cast, _sparse_shape_fn, piecewise_constant
from .state_ops import _frozen
from .training_ops import (_KERNEL_TYPES, _apply_shape_fn, _make_apply, _ref, locked,
                           update_rows)

__all__ = ["FtrlOptimizer", "ProximalGradientDescentOptimizer", "ProximalAdagradOptimizer",
           "AdagradDAOptimizer", "cosine_decay", "cosine_decay_restarts",
           "linear_cosine_decay", "noisy_linear_cosine_decay", "apply_ftrl", "apply_ftrl_v2",
           "apply_proximal_gradient_descent", "apply_proximal_adagrad", "apply_adagrad_da",
           "sparse_apply_ftrl", "sparse_apply_ftrl_v2",
           "sparse_apply_proximal_gradient_descent", "sparse_apply_proximal_adagrad",
           "sparse_apply_adagrad_da"]

_FTRL_ATTR = "multiply_linear_by_lr: bool = false"

#: each op's inputs in TF's order, how many are references, and the non-T inputs
_DENSE = {
    "ApplyProximalGradientDescent": (["var", "alpha", "l1", "l2", "delta"], 1),
    "ApplyProximalAdagrad": (["var", "accum", "lr", "l1", "l2", "grad"], 2),
    "ApplyFtrl": (["var", "accum", "linear", "grad", "lr", "l1", "l2", "lr_power"], 3),
    "ApplyFtrlV2": (["var", "accum", "linear", "grad", "lr", "l1", "l2", "l2_shrinkage",
                     "lr_power"], 3),
    "ApplyAdagradDA": (["var", "gradient_accumulator", "gradient_squared_accumulator", "grad",
                        "lr", "l1", "l2", "global_step"], 3),
}
_SPARSE = {
    "SparseApplyProximalGradientDescent": (["var", "alpha", "l1", "l2", "grad", "indices"], 1),
    "SparseApplyProximalAdagrad": (["var", "accum", "lr", "l1", "l2", "grad", "indices"], 2),
    "SparseApplyFtrl": (["var", "accum", "linear", "grad", "indices", "lr", "l1", "l2",
                         "lr_power"], 3),
    "SparseApplyFtrlV2": (["var", "accum", "linear", "grad", "indices", "lr", "l1", "l2",
                           "l2_shrinkage", "lr_power"], 3),
    "SparseApplyAdagradDA": (["var", "gradient_accumulator", "gradient_squared_accumulator",
                              "grad", "indices", "lr", "l1", "l2", "global_step"], 3),
}


def _spec(nm: str, i: int, n_refs: int) -> str:
    if i < n_refs:
        return f"{nm}: Ref(T)"
    return {"global_step": "global_step: int64", "indices": "indices: Tindices"}.get(
        nm, f"{nm}: T")


def _scalars(order: Sequence[str], n_refs: int) -> list[int]:
    return [i for i, nm in enumerate(order)
            if i >= n_refs and nm not in ("grad", "delta", "indices")]


for _name, (_order, _n) in _DENSE.items():
    ks.op(OpDef(_name, inputs=[_spec(nm, i, _n) for i, nm in enumerate(_order)],
                outputs=["out: Ref(T)"],
                attrs=["T: numbertype", "use_locking: bool = false",
                       *([_FTRL_ATTR] if "Ftrl" in _name else [])],
                shape_fn=_apply_shape_fn(_order, [_order[i] for i in _scalars(_order, _n)]),
                doc=f"The {_name[len('Apply'):]} update."))
for _name, (_order, _n) in _SPARSE.items():
    ks.op(OpDef(_name, inputs=[_spec(nm, i, _n) for i, nm in enumerate(_order)],
                outputs=["out: Ref(T)"],
                attrs=["T: numbertype", "Tindices: {int32, int64}", "use_locking: bool = false",
                       *([_FTRL_ATTR] if "Ftrl" in _name else [])],
                shape_fn=_sparse_shape_fn(_n, _scalars(_order, _n), _order.index("grad"),
                                          _order.index("indices")),
                doc=f"The sparse form of {_name[len('Sparse'):]}: only rows at indices "
                    "change."))
ks.not_differentiable(*_DENSE, *_SPARSE)


# ---------------------------------------------------------------------------------------
# the update formulas (shared by the dense kernels and the sparse row-wise path)
# ---------------------------------------------------------------------------------------
def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _fobos(prox: Any, lr_t: Any, l1: Any, l2: Any, one: Any) -> Any:
    """TF's proximal (Fobos) step from ``prox = var - lr_t * grad``."""
    if l1 > 0:
        return (np.sign(prox) * np.maximum(np.abs(prox) - lr_t * l1, 0)
                / (one + l2 * lr_t))
    return prox / (one + l2 * lr_t)


def _ftrl(var: Any, accum: Any, linear: Any, grad: Any, g_shr: Any, lr: Any, l1: Any,
          l2: Any, lr_power: Any, by_lr: bool, dense: bool) -> tuple:
    """TF's FTRL step: ``(new var, new accum, new linear)``; ``dense`` selects the dense
    functor's shrinkage (``select(|linear| > l1, ...)``) over the sparse kernel's
    (``clip(linear, -l1, l1) - linear``); ``by_lr`` is ``multiply_linear_by_lr``."""
    two = var.dtype.type(2)
    new_accum = accum + grad * grad
    if lr_power == -0.5:
        new_p, old_p = np.sqrt(new_accum), np.sqrt(accum)
    else:
        new_p, old_p = new_accum ** -lr_power, accum ** -lr_power
    if by_lr:
        linear = linear + (g_shr * lr - (new_p - old_p) * var)
        l1_eff = l1 * lr
        y = new_p + two * l2 * lr
    else:
        linear = linear + (g_shr - (new_p - old_p) / lr * var)
        l1_eff = l1
        y = new_p / lr + two * l2
    if dense:
        new_var = np.where(np.abs(linear) > l1_eff, (l1_eff * np.sign(linear) - linear) / y,
                           var.dtype.type(0))
    else:
        new_var = (np.minimum(np.maximum(linear, -l1_eff), l1_eff) - linear) / y
    return new_var.astype(var.dtype, copy=False), new_accum, linear


def _check_ftrl(lr: Any, l1: Any, l2: Any, shrink: Any, lr_power: Any) -> None:
    """TF's ApplyFtrl argument checks (positive lr, non-negative l1/l2/shrinkage,
    non-positive lr_power)."""
    if not lr > 0:
        raise _invalid("lr is not a positive scalar: []")
    if not l1 >= 0:
        raise _invalid("l1 regularization strength is not a non-negative scalar: []")
    if not l2 >= 0:
        raise _invalid("l2 regularization strength is not a non-negative scalar: []")
    if shrink is not None and not shrink >= 0:
        raise _invalid("l2 shrinkage regularization strength is not a non-negative "
                       "scalar: []")
    if not lr_power <= 0:
        raise _invalid("lr_power is not a non-positive scalar: []")


# ---------------------------------------------------------------------------------------
# dense kernels
# ---------------------------------------------------------------------------------------
@ks.kernel("ApplyProximalGradientDescent", device_type="CPU")
def _pgd_kernel(ctx: Any) -> Any:
    def update(var: Any, alpha: Any, l1: Any, l2: Any, delta: Any) -> tuple:
        return (_fobos(var - delta * alpha, alpha, l1, l2, var.dtype.type(1)),)

    return _make_apply(ctx, _DENSE[ctx.op_type][0], 1, [1, 2, 3], update)


@ks.kernel("ApplyProximalAdagrad", device_type="CPU")
def _proximal_adagrad_kernel(ctx: Any) -> Any:
    def update(var: Any, accum: Any, lr: Any, l1: Any, l2: Any, grad: Any) -> tuple:
        one = var.dtype.type(1)
        accum = accum + grad * grad
        lr_t = lr * (one / np.sqrt(accum))
        return _fobos(var - grad * lr_t, lr_t, l1, l2, one), accum

    return _make_apply(ctx, _DENSE[ctx.op_type][0], 2, [2, 3, 4], update)


@ks.kernel("ApplyFtrl", "ApplyFtrlV2", device_type="CPU")
def _ftrl_kernel(ctx: Any) -> Any:
    v2 = ctx.op_type == "ApplyFtrlV2"
    by_lr = bool(ctx.attrs.get("multiply_linear_by_lr", False))

    def update(var: Any, accum: Any, linear: Any, grad: Any, lr: Any, l1: Any, l2: Any,
               *rest: Any) -> tuple:
        shrink, lr_power = rest if v2 else (None, rest[0])
        _check_ftrl(lr, l1, l2, shrink, lr_power)
        g = grad + var.dtype.type(2) * shrink * var if v2 else grad
        return _ftrl(var, accum, linear, grad, g, lr, l1, l2, lr_power, by_lr, True)

    order = _DENSE[ctx.op_type][0]
    return _make_apply(ctx, order, 3, range(4, len(order)), update)


def _adagrad_da_step(var: Any, g_acc: Any, gg_acc: Any, lr: Any, l1: Any, l2: Any,
                     step: Any) -> Any:
    """TF's dense AdagradDA formula (the step as float, as TF's functor casts it)."""
    t = var.dtype.type(np.float32(step))
    gs_lr = t * lr
    denom = l2 * gs_lr + np.sqrt(gg_acc)
    if l1 > 0:
        return lr * var.dtype.type(-1) * np.sign(g_acc) * np.maximum(
            np.abs(g_acc) - t * l1, 0) / denom
    return lr * g_acc * var.dtype.type(-1) / denom


@ks.kernel("ApplyAdagradDA", device_type="CPU")
def _adagrad_da_kernel(ctx: Any) -> Any:
    def update(var: Any, g_acc: Any, gg_acc: Any, grad: Any, lr: Any, l1: Any, l2: Any,
               step: Any) -> tuple:
        g_acc = g_acc + grad
        gg_acc = gg_acc + grad * grad
        new = _adagrad_da_step(var, g_acc, gg_acc, lr, l1, l2, step)
        return new.astype(var.dtype, copy=False), g_acc, gg_acc

    return _make_apply(ctx, _DENSE[ctx.op_type][0], 3, [4, 5, 6, 7], update)


# ---------------------------------------------------------------------------------------
# sparse kernels
# ---------------------------------------------------------------------------------------
def _make_sparse(ctx: Any, rows: Callable[..., tuple]) -> Callable[..., Any]:
    """The compute function of a SparseApply kernel: check the inputs as TF does, then
    ``rows(slot_rows, scalars, grad_rows, scalar_path) -> new slot rows`` for the named
    rows (all at once when the indices are unique, else one by one in order), holding
    every reference's lock.

    :raises errors.InvalidArgumentError: for mismatched shapes, non-scalar
        hyper-parameters or an index out of range
    """
    dt = ctx.output_dtypes[0]
    if dt not in _KERNEL_TYPES or ctx.xp is not np or dt.is_complex:
        raise _invalid(f"No OpKernel was registered to support Op '{ctx.op_type}' used by "
                       f"node {ctx.node_name} with these attrs: [T=DT_{dt.name.upper()}]")
    order, n_refs = _SPARSE[ctx.op_type]
    scalar_pos = _scalars(order, n_refs)
    grad_pos, ind_pos = order.index("grad"), order.index("indices")
    npdt = np.dtype(dt.np)

    def run(refs: Sequence[Any], inputs: Sequence[Any]) -> Any:
        vals = [np.array(r.read(), dtype=npdt) for r in refs]
        shape = vals[0].shape
        for nm, v in zip(order[1:n_refs], vals[1:]):
            if v.shape != shape:
                raise _invalid(f"var and {nm} do not have the same shape{list(shape)} "
                               f"{list(v.shape)}")
        if len(shape) < 1:
            raise _invalid("var must be at least 1 dimensional")
        for i in scalar_pos:
            if np.ndim(inputs[i]) != 0:
                raise _invalid(f"{order[i]} is not a scalar: {list(np.shape(inputs[i]))}")
        grad, indices = np.asarray(inputs[grad_pos]), np.asarray(inputs[ind_pos])
        if indices.ndim != 1:
            raise _invalid("indices must be one-dimensional")
        for d in range(1, len(shape)):
            if grad.ndim <= d or grad.shape[d] != shape[d]:
                raise _invalid(f"var and grad must match in dimension {d}")
        if grad.ndim != len(shape) or grad.shape[0] != indices.shape[0]:
            raise _invalid("grad must be the same size as indices in the first dimension.")
        bad = np.nonzero((indices < 0) | (indices >= shape[0]))[0]
        if bad.size:
            raise _invalid(f"Index {int(indices[bad[0]])} at offset {int(bad[0])} in "
                           "indices is out of range")
        if indices.size == 0:
            return refs[0]
        scalars = [inputs[i] if order[i] == "global_step" else npdt.type(inputs[i])
                   for i in scalar_pos]
        scalar_path = int(np.prod(shape[1:], dtype=np.int64)) == 1
        grad = grad.astype(npdt, copy=False)
        update_rows(vals, indices, grad, lambda r, g: rows(r, scalars, g, scalar_path))
        for r, v in zip(refs, vals):
            r.value = _frozen(v)
        return refs[0]

    def compute(*inputs: Any) -> Any:
        refs = inputs[:n_refs]
        with locked(refs):
            return run(refs, inputs)

    return compute


def _fobos_scalar(prox: Any, lr_t: Any, l1: Any, l2: Any) -> Any:
    """TF's scalar Fobos path: the division by ``1.0 + l2 * lr`` is in double."""
    num = np.sign(prox) * np.maximum(np.abs(prox) - lr_t * l1, 0) if l1 > 0 else prox
    return (num.astype(np.float64) / (1.0 + np.float64(l2 * lr_t))).astype(prox.dtype)


@ks.kernel("SparseApplyProximalGradientDescent", device_type="CPU")
def _sparse_pgd_kernel(ctx: Any) -> Any:
    def rows(vals: list, sc: list, grad: Any, scalar_path: bool) -> tuple:
        (var,), (lr, l1, l2) = vals, sc
        prox = var - grad * lr
        if scalar_path:
            return (_fobos_scalar(prox, lr, l1, l2),)
        return (_fobos(prox, lr, l1, l2, var.dtype.type(1)),)

    return _make_sparse(ctx, rows)


@ks.kernel("SparseApplyProximalAdagrad", device_type="CPU")
def _sparse_proximal_adagrad_kernel(ctx: Any) -> Any:
    def rows(vals: list, sc: list, grad: Any, scalar_path: bool) -> tuple:
        (var, accum), (lr, l1, l2) = vals, sc
        accum = accum + grad * grad
        if scalar_path:
            lr_t = lr / np.sqrt(accum)
            return _fobos_scalar(var - lr_t * grad, lr_t, l1, l2), accum
        lr_t = lr * (var.dtype.type(1) / np.sqrt(accum))
        return _fobos(var - grad * lr_t, lr_t, l1, l2, var.dtype.type(1)), accum

    return _make_sparse(ctx, rows)


@ks.kernel("SparseApplyFtrl", "SparseApplyFtrlV2", device_type="CPU")
def _sparse_ftrl_kernel(ctx: Any) -> Any:
    v2 = ctx.op_type == "SparseApplyFtrlV2"
    by_lr = bool(ctx.attrs.get("multiply_linear_by_lr", False))

    def rows(vals: list, sc: list, grad: Any, scalar_path: bool) -> tuple:
        var, accum, linear = vals
        lr, l1, l2 = sc[:3]
        shrink, lr_power = sc[3:] if v2 else (None, sc[3])
        g = grad + var.dtype.type(2) * shrink * var if v2 else grad
        var, accum, linear = _ftrl(var, accum, linear, grad, g, lr, l1, l2, lr_power, by_lr,
                                   False)
        return var, accum, linear

    return _make_sparse(ctx, rows)


@ks.kernel("SparseApplyAdagradDA", device_type="CPU")
def _sparse_adagrad_da_kernel(ctx: Any) -> Any:
    def rows(vals: list, sc: list, grad: Any, scalar_path: bool) -> tuple:
        (var, g_acc, gg_acc), (lr, l1, l2, step) = vals, sc
        dt = var.dtype.type
        if scalar_path:  # TF's scalar path computes in double
            g64 = grad.astype(np.float64)
            g_acc = (g_acc.astype(np.float64) + g64).astype(var.dtype)
            gg_acc = (gg_acc.astype(np.float64) + g64 * g64).astype(var.dtype)
            step, lr64 = int(step), np.float64(lr)
            ga, da = g_acc.astype(np.float64), gg_acc.astype(np.float64)
            gs_l2_lr = step * np.float64(l2) * lr64
            if l1 > 0:
                new = (np.sign(-ga) * lr64 * np.maximum(np.abs(ga) - step * np.float64(l1), 0)
                       / (gs_l2_lr + np.sqrt(da)))
            else:
                new = (-ga * lr64) / (gs_l2_lr + np.sqrt(da))
            return new.astype(var.dtype), g_acc, gg_acc
        g_acc = g_acc + grad
        gg_acc = gg_acc + grad * grad
        t = dt(int(step))
        gs_lr = dt(np.float64(t * lr))
        denom = l2 + np.sqrt(gg_acc) / gs_lr
        if l1 > 0:
            new = dt(-1) * np.sign(g_acc) * np.maximum(np.abs(g_acc) / t - l1, 0) / denom
        else:
            new = dt(-1) * (g_acc / t) / denom
        return new.astype(var.dtype, copy=False), g_acc, gg_acc

    return _make_sparse(ctx, rows)


# ---------------------------------------------------------------------------------------
# Python wrappers (TF's gen_training_ops signatures)
# ---------------------------------------------------------------------------------------
def apply_proximal_gradient_descent(var: Any, alpha: Any, l1: Any, l2: Any, delta: Any,
                                    use_locking: bool = False,
                                    name: str | None = None) -> Tensor:
    """The proximal gradient descent (Fobos) update of ``var``."""
    return apply_op("ApplyProximalGradientDescent", name=name, var=_ref(var), alpha=alpha,
                    l1=l1, l2=l2, delta=delta, use_locking=use_locking)


def apply_proximal_adagrad(var: Any, accum: Any, lr: Any, l1: Any, l2: Any, grad: Any,
                           use_locking: bool = False, name: str | None = None) -> Tensor:
    """The proximal Adagrad update of ``var`` and ``accum``."""
    return apply_op("ApplyProximalAdagrad", name=name, var=_ref(var), accum=_ref(accum),
                    lr=lr, l1=l1, l2=l2, grad=grad, use_locking=use_locking)


def apply_ftrl(var: Any, accum: Any, linear: Any, grad: Any, lr: Any, l1: Any, l2: Any,
               lr_power: Any, use_locking: bool = False, multiply_linear_by_lr: bool = False,
               name: str | None = None) -> Tensor:
    """The FTRL-proximal update of ``var``, ``accum`` and ``linear``."""
    return apply_op("ApplyFtrl", name=name, var=_ref(var), accum=_ref(accum),
                    linear=_ref(linear), grad=grad, lr=lr, l1=l1, l2=l2, lr_power=lr_power,
                    use_locking=use_locking, multiply_linear_by_lr=multiply_linear_by_lr)


def apply_ftrl_v2(var: Any, accum: Any, linear: Any, grad: Any, lr: Any, l1: Any, l2: Any,
                  l2_shrinkage: Any, lr_power: Any, use_locking: bool = False,
                  multiply_linear_by_lr: bool = False, name: str | None = None) -> Tensor:
    """The FTRL-proximal update with L2 shrinkage."""
    return apply_op("ApplyFtrlV2", name=name, var=_ref(var), accum=_ref(accum),
                    linear=_ref(linear), grad=grad, lr=lr, l1=l1, l2=l2,
                    l2_shrinkage=l2_shrinkage, lr_power=lr_power, use_locking=use_locking,
                    multiply_linear_by_lr=multiply_linear_by_lr)


def apply_adagrad_da(var: Any, gradient_accumulator: Any, gradient_squared_accumulator: Any,
                     grad: Any, lr: Any, l1: Any, l2: Any, global_step: Any,
                     use_locking: bool = False, name: str | None = None) -> Tensor:
    """The Adagrad dual-averaging update of ``var`` and its two accumulators."""
    return apply_op("ApplyAdagradDA", name=name, var=_ref(var),
                    gradient_accumulator=_ref(gradient_accumulator),
                    gradient_squared_accumulator=_ref(gradient_squared_accumulator),
                    grad=grad, lr=lr, l1=l1, l2=l2, global_step=global_step,
                    use_locking=use_locking)


def sparse_apply_proximal_gradient_descent(var: Any, alpha: Any, l1: Any, l2: Any, grad: Any,
                                           indices: Any, use_locking: bool = False,
                                           name: str | None = None) -> Tensor:
    """The proximal gradient descent update of the rows ``indices`` of ``var``."""
    return apply_op("SparseApplyProximalGradientDescent", name=name, var=_ref(var),
                    alpha=alpha, l1=l1, l2=l2, grad=grad, indices=indices,
                    use_locking=use_locking)


def sparse_apply_proximal_adagrad(var: Any, accum: Any, lr: Any, l1: Any, l2: Any, grad: Any,
                                  indices: Any, use_locking: bool = False,
                                  name: str | None = None) -> Tensor:
    """The proximal Adagrad update of the rows ``indices``."""
    return apply_op("SparseApplyProximalAdagrad", name=name, var=_ref(var), accum=_ref(accum),
                    lr=lr, l1=l1, l2=l2, grad=grad, indices=indices, use_locking=use_locking)


def sparse_apply_ftrl(var: Any, accum: Any, linear: Any, grad: Any, indices: Any, lr: Any,
                      l1: Any, l2: Any, lr_power: Any, use_locking: bool = False,
                      multiply_linear_by_lr: bool = False, name: str | None = None) -> Tensor:
    """The FTRL-proximal update of the rows ``indices``."""
    return apply_op("SparseApplyFtrl", name=name, var=_ref(var), accum=_ref(accum),
                    linear=_ref(linear), grad=grad, indices=indices, lr=lr, l1=l1, l2=l2,
                    lr_power=lr_power, use_locking=use_locking,
                    multiply_linear_by_lr=multiply_linear_by_lr)


def sparse_apply_ftrl_v2(var: Any, accum: Any, linear: Any, grad: Any, indices: Any, lr: Any,
                         l1: Any, l2: Any, l2_shrinkage: Any, lr_power: Any,
                         use_locking: bool = False, multiply_linear_by_lr: bool = False,
                         name: str | None = None) -> Tensor:
    """The FTRL-proximal update with L2 shrinkage of the rows ``indices``."""
    return apply_op("SparseApplyFtrlV2", name=name, var=_ref(var), accum=_ref(accum),
                    linear=_ref(linear), grad=grad, indices=indices, lr=lr, l1=l1, l2=l2,
                    l2_shrinkage=l2_shrinkage, lr_power=lr_power, use_locking=use_locking,
                    multiply_linear_by_lr=multiply_linear_by_lr)


def sparse_apply_adagrad_da(var: Any, gradient_accumulator: Any,
                            gradient_squared_accumulator: Any, grad: Any, indices: Any,
                            lr: Any, l1: Any, l2: Any, global_step: Any,
                            use_locking: bool = False, name: str | None = None) -> Tensor:
    """The Adagrad dual-averaging update of the rows ``indices``."""
    return apply_op("SparseApplyAdagradDA", name=name, var=_ref(var),
                    gradient_accumulator=_ref(gradient_accumulator),
                    gradient_squared_accumulator=_ref(gradient_squared_accumulator),
                    grad=grad, indices=indices, lr=lr, l1=l1, l2=l2, global_step=global_step,
                    use_locking=use_locking)


# ---------------------------------------------------------------------------------------
# optimizers
# ---------------------------------------------------------------------------------------
def _non_negative(value: Any, what: str) -> None:
    if value < 0.0:
        raise ValueError(f"{what} {value:f} needs to be positive or zero")


class FtrlOptimizer(Optimizer):
    """FTRL-proximal (McMahan et al., 2013) (``tf.train.FtrlOptimizer``); slots
    ``"accum"`` (starting at ``initial_accumulator_value``, named after ``accum_name``
    or the optimizer) and ``"linear"`` (zeros, named after ``linear_name`` or the
    optimizer, made unique: ``<var>/Ftrl_1``). With ``l2_shrinkage_regularization_strength``
    > 0 the updates are ``ApplyFtrlV2``.

    :raises ValueError: for a negative ``initial_accumulator_value``, l1, l2 or shrinkage
        strength, or a positive ``learning_rate_power``
    """

    def __init__(self, learning_rate: Any, learning_rate_power: float = -0.5,
                 initial_accumulator_value: float = 0.1,
                 l1_regularization_strength: float = 0.0,
                 l2_regularization_strength: float = 0.0, use_locking: bool = False,
                 name: str = "Ftrl", accum_name: str | None = None,
                 linear_name: str | None = None,
                 l2_shrinkage_regularization_strength: float = 0.0,
                 beta: float | None = None):
        super().__init__(use_locking, name)
        if initial_accumulator_value < 0.0:
            raise ValueError(f"initial_accumulator_value {initial_accumulator_value:f} "
                             "needs to be positive or zero")
        if learning_rate_power > 0.0:
            raise ValueError(f"learning_rate_power {learning_rate_power:f} needs to be "
                             "negative or zero")
        _non_negative(l1_regularization_strength, "l1_regularization_strength")
        _non_negative(l2_regularization_strength, "l2_regularization_strength")
        _non_negative(l2_shrinkage_regularization_strength,
                      "l2_shrinkage_regularization_strength")
        self._learning_rate = learning_rate
        self._learning_rate_power = learning_rate_power
        self._initial_accumulator_value = initial_accumulator_value
        self._l1 = l1_regularization_strength
        self._l2 = l2_regularization_strength
        self._shrinkage = l2_shrinkage_regularization_strength
        self._beta = 0.0 if beta is None else beta
        self._accum_name = accum_name
        self._linear_name = linear_name

    def _create_slots(self, var_list: list[Any]) -> None:
        for v in var_list:
            dtype = v.dtype.base_dtype
            init = api_function("constant_initializer")(self._initial_accumulator_value,
                                                        dtype=dtype)
            self._get_or_make_slot_with_initializer(v, init, v.get_shape(), dtype, "accum",
                                                    self._accum_name or self._name)
            self._zeros_slot(v, "linear", self._linear_name or self._name)

    def _prepare(self) -> None:
        c = self._call_if_callable
        lr = c(self._learning_rate)
        self._lr_t = convert_to_tensor(lr, name="learning_rate")
        self._l1_t = convert_to_tensor(c(self._l1), name="l1_regularization_strength")
        if self._beta:
            adjusted = self._l2 + self._beta / (2.0 * api_function("maximum")(lr, 1e-36))
        else:
            adjusted = self._l2
        self._l2_t = convert_to_tensor(adjusted, name="adjusted_l2_regularization_strength")
        self._shrinkage_t = convert_to_tensor(c(self._shrinkage),
                                              name="l2_shrinkage_regularization_strength")
        self._lr_power_t = convert_to_tensor(c(self._learning_rate_power),
                                             name="learning_rate_power")

    def _args(self, var: Any) -> tuple:
        return tuple(_cast(t, var) for t in (self._lr_t, self._l1_t, self._l2_t))

    def _apply_dense(self, grad: Tensor, var: Any) -> Any:
        accum, linear = self.get_slot(var, "accum"), self.get_slot(var, "linear")
        if self._shrinkage <= 0.0:
            return apply_ftrl(var, accum, linear, grad, *self._args(var),
                              _cast(self._lr_power_t, var), use_locking=self._use_locking)
        return apply_ftrl_v2(var, accum, linear, grad, *self._args(var),
                             _cast(self._shrinkage_t, var), _cast(self._lr_power_t, var),
                             use_locking=self._use_locking)

    def _apply_sparse(self, grad: IndexedSlices, var: Any) -> Any:
        accum, linear = self.get_slot(var, "accum"), self.get_slot(var, "linear")
        if self._shrinkage <= 0.0:
            return sparse_apply_ftrl(var, accum, linear, grad.values, grad.indices,
                                     *self._args(var), _cast(self._lr_power_t, var),
                                     use_locking=self._use_locking)
        return sparse_apply_ftrl_v2(var, accum, linear, grad.values, grad.indices,
                                    *self._args(var), _cast(self._shrinkage_t, var),
                                    _cast(self._lr_power_t, var),
                                    use_locking=self._use_locking)


class ProximalGradientDescentOptimizer(Optimizer):
    """Proximal gradient descent (Fobos) (``tf.train.ProximalGradientDescentOptimizer``);
    no slots."""

    def __init__(self, learning_rate: Any, l1_regularization_strength: float = 0.0,
                 l2_regularization_strength: float = 0.0, use_locking: bool = False,
                 name: str = "ProximalGradientDescent"):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._l1 = l1_regularization_strength
        self._l2 = l2_regularization_strength

    def _prepare(self) -> None:
        c = self._call_if_callable
        self._lr_t = convert_to_tensor(c(self._learning_rate), name="learning_rate")
        self._l1_t = convert_to_tensor(c(self._l1), name="l1_regularization_strength")
        self._l2_t = convert_to_tensor(c(self._l2), name="l2_regularization_strength")

    def _apply_dense(self, grad: Tensor, var: Any) -> Any:
        return apply_proximal_gradient_descent(var, self._lr_t, self._l1_t, self._l2_t, grad,
                                               use_locking=self._use_locking).op

    def _apply_sparse(self, grad: IndexedSlices, var: Any) -> Any:
        return sparse_apply_proximal_gradient_descent(
            var, self._lr_t, self._l1_t, self._l2_t, grad.values, grad.indices,
            use_locking=self._use_locking).op


def _constant_slot_value(v: Any, value: float) -> Tensor:
    with colocate_with(v):
        return api_function("constant")(value, shape=v.get_shape(), dtype=v.dtype.base_dtype)


class ProximalAdagradOptimizer(Optimizer):
    """Proximal Adagrad (``tf.train.ProximalAdagradOptimizer``); slot ``"accumulator"``
    starting at ``initial_accumulator_value``.

    :raises ValueError: for a non-positive ``initial_accumulator_value``
    """

    def __init__(self, learning_rate: Any, initial_accumulator_value: float = 0.1,
                 l1_regularization_strength: float = 0.0,
                 l2_regularization_strength: float = 0.0, use_locking: bool = False,
                 name: str = "ProximalAdagrad"):
        if initial_accumulator_value <= 0.0:
            raise ValueError("initial_accumulator_value must be positive: "
                             f"{initial_accumulator_value}")
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_accumulator_value = initial_accumulator_value
        self._l1 = l1_regularization_strength
        self._l2 = l2_regularization_strength

    def _create_slots(self, var_list: list[Any]) -> None:
        for v in var_list:
            self._get_or_make_slot(v, _constant_slot_value(v, self._initial_accumulator_value),
                                   "accumulator", self._name)

    _prepare = ProximalGradientDescentOptimizer._prepare

    def _apply_dense(self, grad: Tensor, var: Any) -> Any:
        return apply_proximal_adagrad(var, self.get_slot(var, "accumulator"), self._lr_t,
                                      self._l1_t, self._l2_t, grad,
                                      use_locking=self._use_locking)

    def _apply_sparse(self, grad: IndexedSlices, var: Any) -> Any:
        return sparse_apply_proximal_adagrad(var, self.get_slot(var, "accumulator"),
                                             self._lr_t, self._l1_t, self._l2_t, grad.values,
                                             grad.indices, use_locking=self._use_locking)


class AdagradDAOptimizer(Optimizer):
    """Adagrad dual averaging (``tf.train.AdagradDAOptimizer``); slots
    ``"gradient_accumulator"`` (zeros, ``<var>/AdagradDA``) and
    ``"gradient_squared_accumulator"`` (``<var>/AdagradDA_1``). The updates use
    ``global_step + 1`` as read before the step.

    :raises ValueError: for a non-positive
        ``initial_gradient_squared_accumulator_value``
    """

    def __init__(self, learning_rate: Any, global_step: Any,
                 initial_gradient_squared_accumulator_value: float = 0.1,
                 l1_regularization_strength: float = 0.0,
                 l2_regularization_strength: float = 0.0, use_locking: bool = False,
                 name: str = "AdagradDA"):
        if initial_gradient_squared_accumulator_value <= 0.0:
            raise ValueError("initial_gradient_squared_accumulator_value must be positive: "
                             f"{initial_gradient_squared_accumulator_value}")
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_gg = initial_gradient_squared_accumulator_value
        self._l1 = l1_regularization_strength
        self._l2 = l2_regularization_strength
        self._global_step = global_step
        self._global_step_on_worker: Any = None

    def _create_slots(self, var_list: list[Any]) -> None:
        for v in var_list:
            g_val = _constant_slot_value(v, 0.0)
            gg_val = _constant_slot_value(v, self._initial_gg)
            self._get_or_make_slot(v, g_val, "gradient_accumulator", self._name)
            self._get_or_make_slot(v, gg_val, "gradient_squared_accumulator", self._name)

    def _prepare(self) -> None:
        self._lr_t = convert_to_tensor(self._call_if_callable(self._learning_rate),
                                       name="learning_rate")
        with colocate_with(self._lr_t):
            self._global_step_on_worker = api_function("identity")(self._global_step) + 1

    def _inputs(self, var: Any) -> tuple:
        step = api_function("identity")(self._global_step_on_worker)
        if step.dtype.base_dtype is not _dt.int64:
            step = api_function("cast")(step, _dt.int64)
        return (_cast(self._lr_t, var), _cast(self._l1, var), _cast(self._l2, var), step)

    def _apply_dense(self, grad: Tensor, var: Any) -> Any:
        return apply_adagrad_da(var, self.get_slot(var, "gradient_accumulator"),
                                self.get_slot(var, "gradient_squared_accumulator"), grad,
                                *self._inputs(var), use_locking=self._use_locking)

    def _apply_sparse(self, grad: IndexedSlices, var: Any) -> Any:
        return sparse_apply_adagrad_da(var, self.get_slot(var, "gradient_accumulator"),
                                       self.get_slot(var, "gradient_squared_accumulator"),
                                       grad.values, grad.indices, *self._inputs(var),
                                       use_locking=self._use_locking)


# ---------------------------------------------------------------------------------------
# cosine learning-rate decays (TF 1.15's learning_rate_decay_v2 formulas)
# ---------------------------------------------------------------------------------------
def _prep(learning_rate: Any, global_step: Any, what: str) -> tuple[Tensor, Any, Tensor]:
    if global_step is None:
        raise ValueError(f"{what} requires global_step")
    lr = convert_to_tensor(learning_rate, name="initial_learning_rate")
    return lr, lr.dtype, api_function("cast")(global_step, lr.dtype)


def _cos_pi(x: Any, dtype: Any) -> Tensor:
    return api_function("cos")(api_function("constant")(math.pi, dtype=dtype) * x)


def cosine_decay(learning_rate: Any, global_step: Any, decay_steps: Any, alpha: float = 0.0,
                 name: str | None = None) -> Tensor:
    """``lr * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps))
    + alpha)`` (Loshchilov & Hutter's SGDR without restarts).

    :raises ValueError: without ``global_step``
    """
    with name_scope(name, "CosineDecay", [learning_rate, global_step]):
        lr, dtype, step = _prep(learning_rate, global_step, "cosine decay")
        steps = api_function("cast")(decay_steps, dtype)
        step = api_function("minimum")(step, steps)
        cosine = 0.5 * (1.0 + _cos_pi(step / steps, dtype))
        decayed = (1 - alpha) * cosine + alpha
        return api_function("multiply")(lr, decayed)


def cosine_decay_restarts(learning_rate: Any, global_step: Any, first_decay_steps: Any,
                          t_mul: float = 2.0, m_mul: float = 1.0, alpha: float = 0.0,
                          name: str | None = None) -> Tensor:
    """Cosine decay with warm restarts (SGDR): each period ``t_mul`` times longer than the
    last, restarting at ``m_mul`` times the last period's initial rate.

    :raises ValueError: without ``global_step``
    """
    with name_scope(name, "SGDRDecay", [learning_rate, global_step]) as scope:
        lr, dtype, step = _prep(learning_rate, global_step, "cosine decay restarts")
        cast, floor, log = api_function("cast"), api_function("floor"), api_function("log")
        first = cast(first_decay_steps, dtype)
        alpha_t, t_mul_t, m_mul_t = cast(alpha, dtype), cast(t_mul, dtype), cast(m_mul, dtype)
        fraction = step / first

        def geometric() -> tuple:
            i = floor(log(1.0 - fraction * (1.0 - t_mul_t)) / log(t_mul_t))
            sum_r = (1.0 - t_mul_t ** i) / (1.0 - t_mul_t)
            return i, (fraction - sum_r) / t_mul_t ** i

        def linear() -> tuple:
            i = floor(fraction)
            return i, fraction - i

        i_restart, fraction = api_function("cond")(
            api_function("equal")(t_mul_t, 1.0), linear, geometric)
        cosine = 0.5 * m_mul_t ** i_restart * (1.0 + _cos_pi(fraction, dtype))
        decayed = (1 - alpha_t) * cosine + alpha_t
        return api_function("multiply")(lr, decayed, name=scope)


def _linear_cosine(learning_rate: Any, global_step: Any, decay_steps: Any,
                   num_periods: float, alpha: float, beta: float, noise: Any,
                   what: str, scope: str) -> Tensor:
    lr, dtype, step = _prep(learning_rate, global_step, what)
    cast = api_function("cast")
    steps = cast(decay_steps, dtype)
    step = api_function("minimum")(step, steps)
    linear = (steps - step) / steps
    if noise is not None:
        linear = linear + noise(step, dtype, linear)
    fraction = 2.0 * cast(num_periods, dtype) * (step / steps)
    cosine = 0.5 * (1.0 + _cos_pi(fraction, dtype))
    decayed = (cast(alpha, dtype) + linear) * cosine + cast(beta, dtype)
    return api_function("multiply")(lr, decayed, name=scope)


def linear_cosine_decay(learning_rate: Any, global_step: Any, decay_steps: Any,
                        num_periods: float = 0.5, alpha: float = 0.0, beta: float = 0.001,
                        name: str | None = None) -> Tensor:
    """``lr * ((alpha + linear) * cosine + beta)`` with ``linear = (decay_steps - step) /
    decay_steps`` and ``cosine = 0.5 * (1 + cos(pi * 2 * num_periods * step /
    decay_steps))``, the step clipped to ``decay_steps``.

    :raises ValueError: without ``global_step``
    """
    with name_scope(name, "LinearCosineDecay", [learning_rate, global_step]) as scope:
        return _linear_cosine(learning_rate, global_step, decay_steps, num_periods, alpha,
                              beta, None, "linear cosine decay", scope)


def noisy_linear_cosine_decay(learning_rate: Any, global_step: Any, decay_steps: Any,
                              initial_variance: float = 1.0, variance_decay: float = 0.55,
                              num_periods: float = 0.5, alpha: float = 0.0,
                              beta: float = 0.001, name: str | None = None) -> Tensor:
    """:func:`linear_cosine_decay` with Gaussian noise of variance
    ``initial_variance / (1 + step) ^ variance_decay`` added to the linear term.

    :raises ValueError: without ``global_step``
    """
    def noise(step: Tensor, dtype: Any, like: Tensor) -> Tensor:
        cast = api_function("cast")
        variance = cast(initial_variance, dtype) / api_function("pow")(
            1.0 + step, cast(variance_decay, dtype))
        return api_function("random_normal")(like.get_shape().as_list(),
                                             stddev=api_function("sqrt")(variance), dtype=dtype)

    with name_scope(name, "NoisyLinearCosineDecay", [learning_rate, global_step]) as scope:
        return _linear_cosine(learning_rate, global_step, decay_steps, num_periods, alpha,
                              beta, noise, "noisy linear cosine decay", scope)


for _api, _obj in (
        ("train.FtrlOptimizer", FtrlOptimizer),
        ("train.ProximalGradientDescentOptimizer", ProximalGradientDescentOptimizer),
        ("train.ProximalAdagradOptimizer", ProximalAdagradOptimizer),
        ("train.AdagradDAOptimizer", AdagradDAOptimizer),
        ("train.cosine_decay", cosine_decay),
        ("train.cosine_decay_restarts", cosine_decay_restarts),
        ("train.linear_cosine_decay", linear_cosine_decay),
        ("train.noisy_linear_cosine_decay", noisy_linear_cosine_decay),
        ("train.piecewise_constant_decay", piecewise_constant)):
    if _api not in ks.api_names:
        ks.export(_api, _obj)
