"""training_ops of the standard kernel set: the Apply* ops optimizers update variables with.

Each op takes the variable and its slot variables as references (``Ref(T)``), the
hyper-parameters as scalars and the gradient, computes TF's update formula (the order of
operations of TF's CPU functors) and stores new read-only arrays in the references; its
output is the variable's reference. Every reference is locked (in a fixed global order,
so concurrent updates cannot deadlock) while it is read and written, with or without
``use_locking``: an update replaces the whole array, so unlocked racing updates would
lose one another where TF's in-place element-wise updates lose next to nothing.

======================  ==================================================================
ApplyGradientDescent    var -= alpha * delta
ApplyMomentum           accum = accum * momentum + grad; var -= lr * accum
                        (nesterov: var -= grad * lr + accum * momentum * lr)
ApplyAdam               lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
                        m += (grad - m) * (1 - beta1); v += (grad^2 - v) * (1 - beta2)
                        var -= m * lr_t / (sqrt(v) + epsilon)
                        (nesterov: (grad * (1 - beta1) + beta1 * m) in place of m)
ApplyAdagrad            accum += grad^2 (if update_slots); var -= grad * lr / sqrt(accum)
ApplyRMSProp            ms += (grad^2 - ms) * (1 - rho)
                        mom = mom * momentum + grad * lr / sqrt(ms + epsilon); var -= mom
ApplyCenteredRMSProp    as RMSProp with mg += (grad - mg) * (1 - rho) and
                        sqrt(ms - mg^2 + epsilon) as the denominator
ApplyAdadelta           accum = rho * accum + (1 - rho) * grad^2
                        update = sqrt(accum_update + eps) / sqrt(accum + eps) * grad
                        accum_update = rho * accum_update + (1 - rho) * update^2
                        var -= update * lr
======================  ==================================================================
"""
from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.graph import Tensor, apply_op
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape

from ._common import ks
from .state_ops import _frozen

__all__ = ["apply_gradient_descent", "apply_momentum", "apply_adam", "apply_adagrad",
           "apply_rms_prop", "apply_centered_rms_prop", "apply_adadelta"]

_T_ATTR = "T: numbertype"


# ---------------------------------------------------------------------------------------
# op definitions and shape functions
# ---------------------------------------------------------------------------------------
def _fmt(s: TensorShape) -> str:
    d = s.as_tuple()
    if d is None:
        return "?"
    return "[" + ",".join("?" if x is None else str(x) for x in d) + "]"


def _merge_error(a: TensorShape, b: TensorShape) -> str:
    da, db = a.as_tuple(), b.as_tuple()
    if da is not None and db is not None and len(da) != len(db):
        return f"Shapes must be equal rank, but are {len(da)} and {len(db)}"
    for i, (x, y) in enumerate(zip(da or (), db or ())):
        if x is not None and y is not None and x != y:
            return (f"Dimension {i} in both shapes must be equal, but are {x} and {y}. "
                    f"Shapes are {_fmt(a)} and {_fmt(b)}.")
    return f"Shapes {_fmt(a)} and {_fmt(b)} are incompatible"


def _apply_shape_fn(order: Sequence[str], scalars: Sequence[str]) -> Callable[[Any], Any]:
    """Shape function: slot refs and the gradient have the variable's shape, the
    hyper-parameters are scalars; the output has the merged shape (TF's
    ``HandleGradAndLrShapes`` and friends)."""
    scalar_pos = [i for i, nm in enumerate(order) if nm in scalars]
    same_pos = [i for i, nm in enumerate(order) if nm not in scalars and i > 0]

    def shape_fn(op: Any) -> list[TensorShape]:
        shapes = [t.shape for t in op.inputs]

        def where() -> str:
            return (f" for '{op.name}' (op: '{op.type}') with input shapes: "
                    f"{', '.join(_fmt(s) for s in shapes)}.")

        for i in scalar_pos:
            r = shapes[i].ndims
            if r is not None and r != 0:
                raise ValueError(f"Shape must be rank 0 but is rank {r}{where()}")
        merged = shapes[0]
        for i in same_pos:
            if not merged.is_compatible_with(shapes[i]):
                raise ValueError(_merge_error(merged, shapes[i]) + where())
            merged = merged.merge_with(shapes[i])
        return [merged]

    return shape_fn


def _def(name: str, order: Sequence[str], refs: Sequence[str], scalars: Sequence[str],
         extra_attrs: Sequence[str] = (), doc: str = "") -> None:
    specs = [f"{nm}: Ref(T)" if nm in refs else f"{nm}: T" for nm in order]
    ks.op(OpDef(name, inputs=specs, outputs=["out: Ref(T)"],
                attrs=[_T_ATTR, "use_locking: bool = false", *extra_attrs],
                shape_fn=_apply_shape_fn(order, scalars), doc=doc))


_def("ApplyGradientDescent", ["var", "alpha", "delta"], ["var"], ["alpha"],
     doc="var -= alpha * delta.")
_def("ApplyMomentum", ["var", "accum", "lr", "grad", "momentum"], ["var", "accum"],
     ["lr", "momentum"], extra_attrs=["use_nesterov: bool = false"],
     doc="The momentum update.")
_def("ApplyAdam", ["var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2",
                   "epsilon", "grad"], ["var", "m", "v"],
     ["beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"],
     extra_attrs=["use_nesterov: bool = false"], doc="The Adam update.")
_def("ApplyAdagrad", ["var", "accum", "lr", "grad"], ["var", "accum"], ["lr"],
     extra_attrs=["update_slots: bool = true"], doc="The Adagrad update.")
_def("ApplyRMSProp", ["var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"],
     ["var", "ms", "mom"], ["lr", "rho", "momentum", "epsilon"], doc="The RMSProp update.")
_def("ApplyCenteredRMSProp", ["var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon",
                              "grad"], ["var", "mg", "ms", "mom"],
     ["lr", "rho", "momentum", "epsilon"], doc="The centered RMSProp update.")
_def("ApplyAdadelta", ["var", "accum", "accum_update", "lr", "rho", "epsilon", "grad"],
     ["var", "accum", "accum_update"], ["lr", "rho", "epsilon"], doc="The Adadelta update.")


# ---------------------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------------------
_KERNEL_TYPES = frozenset({_dt.float16, _dt.bfloat16, _dt.float32, _dt.float64,
                           _dt.complex64, _dt.complex128})


#: references to a variable's value while :func:`_make_apply`'s ``run`` checks it: the
#: variable's ``value``, the list of values read, and ``sys.getrefcount``'s argument
_SOLE_REFS = 3


def _sole_holder(refs: Sequence[Any], vals: list, npdt: Any, args: Sequence[Any]) -> bool:
    """Whether the values ``vals`` of the variables ``refs`` may be written in place:
    each is a contiguous numpy array of the kernel's dtype that owns its memory and that
    nobody but its variable holds (no fetched result, view, reader or other input
    refers to it: each of those is a reference), and the other inputs are of that dtype
    too (no casting in the arithmetic). Sets ``writing`` on each variable first, so a
    reader arriving after the check waits for the update (see ``VarRef``); the caller
    clears it."""
    for r in refs:
        r.writing = True
    for i in range(len(vals)):
        a = vals[i]
        if type(a) is not np.ndarray or a.dtype != npdt or not a.flags.owndata or \
                not a.flags.c_contiguous:
            return False
        del a
        if sys.getrefcount(vals[i]) != _SOLE_REFS:
            return False
    return all(getattr(x, "dtype", npdt) == npdt for x in args)


def _make_apply(ctx: Any, names: Sequence[str], n_refs: int, scalars: Sequence[int],
                update: Callable[..., tuple[Any, ...]],
                in_place: Callable[..., None] | None = None) -> Callable[..., Any]:
    """A compute function: read the ``n_refs`` references, check shapes, call
    ``update(*ref_values, *other_inputs) -> new ref values`` and store them.

    ``in_place(*ref_values, *other_inputs)``, when given, computes the same update into
    the values themselves (the same operations in the same order, so the same bits); it
    is used on the CPU when the variables are the values' only holders (see
    :func:`_sole_holder`), as TF's kernels update a variable's buffer: no new arrays, and
    about a third less memory traffic (the 3136x1024 dense kernel's Adam update: 18 ->
    13 ms on one thread)."""
    dt = ctx.output_dtypes[0]
    if dt not in _KERNEL_TYPES:
        raise errors.InvalidArgumentError(
            None, None, f"No OpKernel was registered to support Op '{ctx.op_type}' used by "
            f"node {ctx.node_name} with these attrs: [T=DT_{dt.name.upper()}, use_locking="
            f"{str(ctx.attrs.get('use_locking', False)).lower()}]")
    xp = ctx.xp
    npdt = np.dtype(dt.np) if xp is np else None
    freeze = _frozen if xp is np else (lambda a: a)
    if xp is not np or npdt.kind != "f" or npdt.itemsize < 4:
        in_place = None  # (float16 and bfloat16 keep the general path)
    scalar_idx = tuple(scalars)
    grad_i = next(i for i in range(n_refs, len(names)) if i not in scalar_idx)
    slot_names = names[1:n_refs]

    def check(vals: Sequence[Any], args: Sequence[Any]) -> None:
        shape = vals[0].shape
        for nm, val in zip(slot_names, vals[1:]):
            if val.shape != shape:
                raise errors.InvalidArgumentError(
                    None, None, f"var and {nm} do not have the same shape"
                    f"{list(shape)} {list(val.shape)}")
        for i in scalar_idx:
            if np.ndim(args[i - n_refs]) != 0:
                raise errors.InvalidArgumentError(
                    None, None, f"{names[i]} is not a scalar: "
                    f"{list(np.shape(args[i - n_refs]))}")
        g = args[grad_i - n_refs]
        if np.shape(g) != shape:
            raise errors.InvalidArgumentError(
                None, None, f"var and {names[grad_i]} do not have the same shape"
                f"{list(shape)} {list(np.shape(g))}")

    def store(refs: Sequence[Any], new: Sequence[Any]) -> None:
        for r, v in zip(refs, new):
            if npdt is not None and v.dtype != npdt:
                v = v.astype(npdt)
            r.value = freeze(v)

    def run(refs: Sequence[Any], args: Sequence[Any]) -> Any:
        vals = [r.read() for r in refs]
        check(vals, args)
        if in_place is not None:
            try:
                if _sole_holder(refs, vals, npdt, args):
                    for a in vals:
                        a.flags.writeable = True
                    try:
                        in_place(*vals, *args)
                    finally:
                        for a in vals:
                            a.flags.writeable = False
                    return refs[0]
            finally:
                for r in refs:
                    r.writing = False
        store(refs, update(*vals, *args))
        return refs[0]

    def compute(*inputs: Any) -> Any:
        # locked whatever use_locking says (see state_ops): a whole-array replacement
        # racing another would drop that other update entirely
        refs = inputs[:n_refs]
        with locked(refs):
            return run(refs, inputs[n_refs:])
    return compute


def update_rows(vals: Sequence[Any], indices: Any, grad: Any,
                fn: Callable[[list[Any], Any], Sequence[Any]]) -> None:
    """A sparse update in place: the rows ``indices`` of the arrays ``vals`` (a variable
    and its slots) become ``fn(rows, grad_rows)``; distinct indices in one go, repeated
    ones in order, each seeing the update before it (as TF's kernels loop)."""
    if np.unique(indices).size == indices.size:
        for v, n in zip(vals, fn([v[indices] for v in vals], grad)):
            v[indices] = n
        return
    for k, idx in enumerate(indices):
        for v, n in zip(vals, fn([v[idx] for v in vals], grad[k])):
            v[idx] = n


@contextlib.contextmanager
def locked(refs: Sequence[Any]) -> Iterator[None]:
    """Hold the locks of the variables ``refs`` (each once, in one global order, so
    two updates of overlapping variables never deadlock)."""
    locks = [r.lock for r in sorted({id(r): r for r in refs}.values(), key=id)]
    for lk in locks:
        lk.acquire()
    try:
        yield
    finally:
        for lk in reversed(locks):
            lk.release()


def _one(ctx: Any) -> Any:
    return np.dtype(ctx.output_dtypes[0].np).type(1) if ctx.xp is np else 1


#: a dense update of a variable this large (elements) is split over the CPU's intra-op
#: threads (a 3136x1024 dense kernel's Adam update: 13 MB per array, about a dozen passes)
_SPLIT_SIZE = 1 << 20
#: elements per range of a split update: a range's temporaries (a dozen arrays of 256 KB)
#: stay in cache, so only the inputs and results go through memory (measured 1.6x
#: faster than eight ranges of a 3136x1024 kernel on one thread)
_SPLIT_RANGE = 1 << 16


def _split_update(ctx: Any, pmap: Callable[..., list], fn: Callable[..., tuple],
                  arrays: Sequence[Any], scalars: Sequence[Any], n_out: int,
                  into: bool = False) -> tuple:
    """``fn(*arrays, *scalars)`` computed over contiguous ranges of the flattened arrays,
    side by side on the device's intra-op threads, into ``n_out`` new arrays (``into``:
    ``fn`` writes its results into the ranges it is given as ``out=``, saving a copy)."""
    xp = ctx.xp
    size = arrays[0].size
    flat = [xp.ascontiguousarray(a).reshape(-1) for a in arrays]
    # the results in their final shape, owning their memory (a variable keeps an array
    # that owns its memory as it is, and copies a view), written through flat views
    results = [xp.empty(arrays[0].shape, dtype=arrays[0].dtype) for _ in range(n_out)]
    outs = [r.reshape(-1) for r in results]

    def part(lo: int, hi: int) -> None:
        ins = [a[lo:hi] for a in flat]
        if into:
            fn(*ins, *scalars, out=[o[lo:hi] for o in outs])
            return
        for o, r in zip(outs, fn(*ins, *scalars)):
            o[lo:hi] = r

    _ranges(pmap, size, part)
    return tuple(results)


def _ranges(pmap: Callable[..., list] | None, size: int,
            part: Callable[[int, int], None]) -> None:
    """``part(lo, hi)`` over the :data:`_SPLIT_RANGE` ranges of ``[0, size)`` side by
    side on the intra-op threads (``pmap``); one call over everything without ``pmap``
    or for fewer than :data:`_SPLIT_SIZE` elements."""
    if pmap is None or size < _SPLIT_SIZE:
        part(0, size)
        return
    step = _SPLIT_RANGE
    pmap(lambda i: part(i * step, min(size, (i + 1) * step)), -(-size // step))


def _in_ranges(pmap: Callable[..., list] | None, fn: Callable[..., None],
               arrays: Sequence[Any], scalars: Sequence[Any], n_tmp: int) -> None:
    """``fn(*arrays, *scalars, *temporaries)`` over contiguous ranges of the flattened
    ``arrays`` (updated in place), with ``n_tmp`` scratch arrays of each range's size;
    side by side on the CPU's intra-op threads (``pmap``) for a large variable (see
    :func:`_split_update`)."""
    flat = [a.reshape(-1) for a in arrays]
    _ranges(pmap, flat[0].size, lambda lo, hi: fn(
        *[a[lo:hi] for a in flat], *scalars,
        *[np.empty(hi - lo, flat[0].dtype) for _ in range(n_tmp)]))


@ks.kernel("ApplyGradientDescent")
def _gd_kernel(ctx: Any) -> Any:
    def update(var: Any, alpha: Any, delta: Any) -> tuple[Any]:
        return (var - delta * alpha,)

    def in_place(var: Any, alpha: Any, delta: Any) -> None:
        var -= delta * alpha

    return _make_apply(ctx, ["var", "alpha", "delta"], 1, [1], update, in_place)


@ks.kernel("ApplyMomentum")
def _momentum_kernel(ctx: Any) -> Any:
    if ctx.attrs.get("use_nesterov", False):
        def update(var: Any, accum: Any, lr: Any, grad: Any, momentum: Any) -> tuple:
            accum = accum * momentum + grad
            return var - (grad * lr + accum * momentum * lr), accum
    else:
        def update(var: Any, accum: Any, lr: Any, grad: Any, momentum: Any) -> tuple:
            accum = accum * momentum + grad
            return var - accum * lr, accum

    def in_place(var: Any, accum: Any, lr: Any, grad: Any, momentum: Any) -> None:
        accum *= momentum
        accum += grad
        if nesterov:
            var -= grad * lr + accum * momentum * lr
        else:
            var -= accum * lr

    nesterov = bool(ctx.attrs.get("use_nesterov", False))
    return _make_apply(ctx, ["var", "accum", "lr", "grad", "momentum"], 2, [2, 4], update,
                       in_place)


@ks.kernel("ApplyAdam")
def _adam_kernel(ctx: Any) -> Any:
    sqrt = ctx.xp.sqrt
    one = _one(ctx)
    nesterov = bool(ctx.attrs.get("use_nesterov", False))

    xp = ctx.xp

    def adam(var: Any, m: Any, v: Any, grad: Any, alpha: Any, b1: Any, b2: Any, eps: Any,
             outs: Sequence[Any], t: Any, step: Any) -> None:
        # TF's expressions in TF's order, into ``outs`` (the new var, m and v: the old
        # arrays themselves for an update in place), ``t`` and ``step`` scratch arrays
        # (``step`` may be the new var's memory when that is not ``var``)
        var_o, m_o, v_o = outs
        xp.subtract(grad, m, out=t)
        t *= one - b1
        xp.add(m, t, out=m_o)
        xp.multiply(grad, grad, out=t)
        t -= v
        t *= one - b2
        xp.add(v, t, out=v_o)
        if nesterov:
            xp.multiply(grad, one - b1, out=step)
            xp.multiply(m_o, b1, out=t)
            step += t
            step *= alpha
        else:
            xp.multiply(m_o, alpha, out=step)
        xp.sqrt(v_o, out=t)
        t += eps
        step /= t
        xp.subtract(var, step, out=var_o)

    def step_of(var: Any, m: Any, v: Any, grad: Any, alpha: Any, b1: Any, b2: Any,
                eps: Any, out: Sequence[Any] | None = None) -> tuple:
        # into ``out`` when given, else into four new arrays instead of eleven (a fresh
        # large array costs its page faults); the step is computed in the new var
        if out is None:
            out = (xp.empty_like(var), xp.empty_like(m), xp.empty_like(v))
        adam(var, m, v, grad, alpha, b1, b2, eps, out, xp.empty_like(v), out[0])
        return tuple(out)

    def update(var: Any, m: Any, v: Any, b1p: Any, b2p: Any, lr: Any, b1: Any, b2: Any,
               eps: Any, grad: Any) -> tuple:
        alpha = lr * sqrt(one - b2p) / (one - b1p)
        if var.size < _SPLIT_SIZE or pmap is None:
            return step_of(var, m, v, grad, alpha, b1, b2, eps)
        return _split_update(ctx, pmap, step_of, (var, m, v, grad), (alpha, b1, b2, eps), 3,
                             into=True)

    def step_in_place(var: Any, m: Any, v: Any, grad: Any, alpha: Any, b1: Any, b2: Any,
                      eps: Any, t: Any, step: Any) -> None:
        adam(var, m, v, grad, alpha, b1, b2, eps, (var, m, v), t, step)

    def in_place(var: Any, m: Any, v: Any, b1p: Any, b2p: Any, lr: Any, b1: Any, b2: Any,
                 eps: Any, grad: Any) -> None:
        alpha = lr * sqrt(one - b2p) / (one - b1p)
        _in_ranges(pmap, step_in_place, (var, m, v, np.ascontiguousarray(grad)),
                   (alpha, b1, b2, eps), 2)

    pmap = getattr(ctx.device, "parallel_map", None) if ctx.xp is np else None
    return _make_apply(ctx, ["var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1",
                             "beta2", "epsilon", "grad"], 3, range(3, 9), update, in_place)


@ks.kernel("ApplyAdagrad")
def _adagrad_kernel(ctx: Any) -> Any:
    sqrt = ctx.xp.sqrt
    one = _one(ctx)
    update_slots = bool(ctx.attrs.get("update_slots", True))

    def update(var: Any, accum: Any, lr: Any, grad: Any) -> tuple:
        if update_slots:
            accum = accum + grad * grad
        return var - grad * lr * (one / sqrt(accum)), accum

    return _make_apply(ctx, ["var", "accum", "lr", "grad"], 2, [2], update)


@ks.kernel("ApplyRMSProp")
def _rmsprop_kernel(ctx: Any) -> Any:
    sqrt = ctx.xp.sqrt
    one = _one(ctx)

    def update(var: Any, ms: Any, mom: Any, lr: Any, rho: Any, momentum: Any, eps: Any,
               grad: Any) -> tuple:
        ms = ms + (grad * grad - ms) * (one - rho)
        mom = mom * momentum + (grad * lr) / sqrt(ms + eps)
        return var - mom, ms, mom

    return _make_apply(ctx, ["var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"],
                       3, [3, 4, 5, 6], update)


@ks.kernel("ApplyCenteredRMSProp")
def _centered_rmsprop_kernel(ctx: Any) -> Any:
    sqrt = ctx.xp.sqrt
    one = _one(ctx)

    def update(var: Any, mg: Any, ms: Any, mom: Any, lr: Any, rho: Any, momentum: Any,
               eps: Any, grad: Any) -> tuple:
        one_minus_rho = one - rho
        ms = ms + (grad * grad - ms) * one_minus_rho
        mg = mg + (grad - mg) * one_minus_rho
        denom = (ms - mg * mg) + eps
        mom = mom * momentum + (grad * lr) / sqrt(denom)
        return var - mom, mg, ms, mom

    return _make_apply(ctx, ["var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon",
                             "grad"], 4, [4, 5, 6, 7], update)


@ks.kernel("ApplyAdadelta")
def _adadelta_kernel(ctx: Any) -> Any:
    sqrt = ctx.xp.sqrt
    one = _one(ctx)

    def update(var: Any, accum: Any, accum_update: Any, lr: Any, rho: Any, eps: Any,
               grad: Any) -> tuple:
        accum = accum * rho + grad * grad * (one - rho)
        upd = sqrt(accum_update + eps) * (one / sqrt(accum + eps)) * grad
        accum_update = accum_update * rho + upd * upd * (one - rho)
        return var - upd * lr, accum, accum_update

    return _make_apply(ctx, ["var", "accum", "accum_update", "lr", "rho", "epsilon", "grad"],
                       3, [3, 4, 5], update)


ks.not_differentiable("ApplyGradientDescent", "ApplyMomentum", "ApplyAdam", "ApplyAdagrad",
                      "ApplyRMSProp", "ApplyCenteredRMSProp", "ApplyAdadelta")


# ---------------------------------------------------------------------------------------
# Python wrappers (TF's gen_training_ops signatures)
# ---------------------------------------------------------------------------------------
def _ref(v: Any) -> Any:
    if hasattr(v, "_ref") and not isinstance(v, Tensor):
        return v._ref()
    return v


def apply_gradient_descent(var: Any, alpha: Any, delta: Any, use_locking: bool = False,
                           name: str | None = None) -> Tensor:
    """``var -= alpha * delta``; returns ``var``'s reference."""
    return apply_op("ApplyGradientDescent", name=name, var=_ref(var), alpha=alpha,
                    delta=delta, use_locking=use_locking)


def apply_momentum(var: Any, accum: Any, lr: Any, grad: Any, momentum: Any,
                   use_locking: bool = False, use_nesterov: bool = False,
                   name: str | None = None) -> Tensor:
    """The momentum update of ``var`` and ``accum``."""
    return apply_op("ApplyMomentum", name=name, var=_ref(var), accum=_ref(accum), lr=lr,
                    grad=grad, momentum=momentum, use_locking=use_locking,
                    use_nesterov=use_nesterov)


def apply_adam(var: Any, m: Any, v: Any, beta1_power: Any, beta2_power: Any, lr: Any,
               beta1: Any, beta2: Any, epsilon: Any, grad: Any, use_locking: bool = False,
               use_nesterov: bool = False, name: str | None = None) -> Tensor:
    """The Adam update of ``var``, ``m`` and ``v``."""
    return apply_op("ApplyAdam", name=name, var=_ref(var), m=_ref(m), v=_ref(v),
                    beta1_power=beta1_power, beta2_power=beta2_power, lr=lr, beta1=beta1,
                    beta2=beta2, epsilon=epsilon, grad=grad, use_locking=use_locking,
                    use_nesterov=use_nesterov)


def apply_adagrad(var: Any, accum: Any, lr: Any, grad: Any, use_locking: bool = False,
                  update_slots: bool = True, name: str | None = None) -> Tensor:
    """The Adagrad update of ``var`` and ``accum``."""
    return apply_op("ApplyAdagrad", name=name, var=_ref(var), accum=_ref(accum), lr=lr,
                    grad=grad, use_locking=use_locking, update_slots=update_slots)


def apply_rms_prop(var: Any, ms: Any, mom: Any, lr: Any, rho: Any, momentum: Any,
                   epsilon: Any, grad: Any, use_locking: bool = False,
                   name: str | None = None) -> Tensor:
    """The RMSProp update of ``var``, ``ms`` and ``mom``."""
    return apply_op("ApplyRMSProp", name=name, var=_ref(var), ms=_ref(ms), mom=_ref(mom),
                    lr=lr, rho=rho, momentum=momentum, epsilon=epsilon, grad=grad,
                    use_locking=use_locking)


def apply_centered_rms_prop(var: Any, mg: Any, ms: Any, mom: Any, lr: Any, rho: Any,
                            momentum: Any, epsilon: Any, grad: Any,
                            use_locking: bool = False, name: str | None = None) -> Tensor:
    """The centered RMSProp update of ``var``, ``mg``, ``ms`` and ``mom``."""
    return apply_op("ApplyCenteredRMSProp", name=name, var=_ref(var), mg=_ref(mg),
                    ms=_ref(ms), mom=_ref(mom), lr=lr, rho=rho, momentum=momentum,
                    epsilon=epsilon, grad=grad, use_locking=use_locking)


def apply_adadelta(var: Any, accum: Any, accum_update: Any, lr: Any, rho: Any, epsilon: Any,
                   grad: Any, use_locking: bool = False, name: str | None = None) -> Tensor:
    """The Adadelta update of ``var``, ``accum`` and ``accum_update``."""
    return apply_op("ApplyAdadelta", name=name, var=_ref(var), accum=_ref(accum),
                    accum_update=_ref(accum_update), lr=lr, rho=rho, epsilon=epsilon,
                    grad=grad, use_locking=use_locking)
