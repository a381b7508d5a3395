"""Variable ops (TF1 reference variables): VariableV2, Assign, AssignAdd, AssignSub.

Every read-modify-write of a reference (AssignAdd/Sub here, the scatter ops, the Apply*
ops of training_ops) holds the reference's lock, with or without ``use_locking``: values
are replaced whole rather than updated in place, so unlocked concurrent updates would
lose whole updates where TF's in-place ones lose next to nothing. ``use_locking`` is
accepted and kept on the node for TF compatibility.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from flowrt import errors
from flowrt.graph import Tensor, apply_op
from flowrt.op_registry import OpDef
from flowrt.resources import VarRef
from flowrt.tensor_shape import TensorShape, as_shape, unknown_shape

from ._common import broadcast_static, ks


def _var_shape(op: Any) -> list[TensorShape]:
    s = op.node_attrs.get("shape")
    return [unknown_shape() if s is None else as_shape(s)]


def _assign_shape(op: Any) -> list[TensorShape]:
    ref, value = op.inputs[0].shape, op.inputs[1].shape
    if op.node_attrs.get("validate_shape", True):
        if not ref.is_compatible_with(value):
            raise ValueError(f"Dimension mismatch in '{op.name}' (op: 'Assign'): the "
                             f"variable has shape {ref} and the value has shape {value}.")
        return [ref.merge_with(value)]
    return [value]


def _update_shape(op: Any) -> list[TensorShape]:
    ref, value = op.inputs[0].shape, op.inputs[1].shape
    if not ref.is_compatible_with(value):
        raise ValueError(f"Shapes must be equal rank, but are {ref} and {value} for "
                         f"'{op.name}' (op: '{op.type}')")
    return [ref]


ks.op(
    OpDef("VariableV2", outputs=["ref: Ref(dtype)"],
          attrs=["shape: shape", "dtype: type", "container: string = ''",
                 "shared_name: string = ''"],
          shape_fn=_var_shape, is_stateful=True, doc="A persistent mutable tensor."),
    OpDef("Assign", inputs=["ref: Ref(T)", "value: T"], outputs=["output_ref: Ref(T)"],
          attrs=["T: type", "validate_shape: bool = true", "use_locking: bool = true"],
          shape_fn=_assign_shape, allows_uninitialized_input=True,
          doc="ref = value."),
    OpDef("AssignAdd", inputs=["ref: Ref(T)", "value: T"], outputs=["output_ref: Ref(T)"],
          attrs=["T: numbertype", "use_locking: bool = false"], shape_fn=_update_shape,
          doc="ref += value."),
    OpDef("AssignSub", inputs=["ref: Ref(T)", "value: T"], outputs=["output_ref: Ref(T)"],
          attrs=["T: numbertype", "use_locking: bool = false"], shape_fn=_update_shape,
          doc="ref -= value."),
    OpDef("IsVariableInitialized", inputs=["ref: Ref(dtype)"], outputs=["is_initialized: bool"],
          attrs=["dtype: type"], shape_fn=lambda op: [TensorShape([])],
          allows_uninitialized_input=True, doc="Whether ref has been assigned."),
)


def _frozen(value: Any) -> Any:
    """A value safe to keep in a variable: never aliasing memory a caller may mutate."""
    if isinstance(value, np.ndarray):
        if not value.flags.owndata or not value.flags.writeable:
            value = value.copy()
        value.flags.writeable = False
    elif isinstance(value, np.generic):
        value = np.asarray(value).copy()
        value.flags.writeable = False
    return value


@ks.kernel("VariableV2")
def _variable_kernel(ctx: Any) -> Any:
    rm = ctx.device.resource_mgr
    container = ctx.attrs.get("container") or ""
    name = ctx.attrs.get("shared_name") or ctx.node_name
    dtype = ctx.attrs["dtype"]
    shape = ctx.attrs.get("shape")

    def make() -> VarRef:
        return VarRef(name, dtype, shape)

    def compute() -> VarRef:
        return rm.lookup_or_create(container, name, make)

    return compute


@ks.kernel("Assign")
def _assign_kernel(ctx: Any) -> Any:
    validate = ctx.attrs.get("validate_shape", True)
    np_dtype = ctx.output_dtypes[0].np if ctx.output_dtypes[0].is_numpy_compatible else None
    freeze = _frozen if ctx.xp is np else (lambda v: v)

    def assign(ref: VarRef, value: Any) -> VarRef:
        old = ref.value
        if validate and old is not None and old.shape != np.shape(value):
            raise errors.InvalidArgumentError(
                None, None, f"Assign requires shapes of both tensors to match. lhs shape= "
                f"{list(old.shape)} rhs shape= {list(np.shape(value))}")
        if np_dtype is not None and getattr(value, "dtype", np_dtype) != np_dtype:
            value = ctx.xp.asarray(value, dtype=np_dtype)
        ref.value = freeze(value)
        return ref

    return assign


def _update_kernel(sign: int) -> Any:
    def factory(ctx: Any) -> Any:
        xp = ctx.xp
        op = xp.add if sign > 0 else xp.subtract
        freeze = _frozen if xp is np else (lambda v: v)

        def update(ref: VarRef, value: Any) -> VarRef:
            # Always under the reference's lock, whatever use_locking says. TF's unlocked
            # update races element by element on one buffer and loses next to nothing;
            # here an update replaces the whole array, so two unlocked updates racing
            # would lose one of them entirely (asynchronous training would silently drop
            # whole gradient steps).
            with ref.lock:
                cur = ref.read()
                new = op(cur, value)
                if new.shape != cur.shape:
                    raise _shape_error(ctx, cur, value)
                ref.value = freeze(new)
            return ref

        return update

    return factory


def _shape_error(ctx: Any, cur: Any, value: Any) -> errors.OpError:
    return errors.InvalidArgumentError(
        None, None, f"Must have the same shape: the variable has shape {list(cur.shape)} "
        f"and the update has shape {list(np.shape(value))}")


ks.kernel("AssignAdd")(_update_kernel(+1))
ks.kernel("AssignSub")(_update_kernel(-1))


@ks.kernel("IsVariableInitialized")
def _is_init_kernel(ctx: Any) -> Any:
    def is_init(ref: VarRef) -> Any:
        return np.bool_(ref.value is not None)

    return is_init


def _ref_of(ref: Any) -> Any:
    if hasattr(ref, "_ref") and not isinstance(ref, Tensor):
        return ref._ref()
    return ref


@ks.api("assign")
def assign(ref: Any, value: Any, validate_shape: bool | None = None,
           use_locking: bool | None = None, name: str | None = None) -> Tensor:
    """``ref = value`` (``tf.assign``); returns ``ref`` after the assignment."""
    r = _ref_of(ref)
    kw: dict[str, Any] = {}
    if validate_shape is not None:
        kw["validate_shape"] = validate_shape
    if use_locking is not None:
        kw["use_locking"] = use_locking
    return apply_op("Assign", name=name, ref=r, value=value, **kw)


@ks.api("assign_add")
def assign_add(ref: Any, value: Any, use_locking: bool | None = None,
               name: str | None = None) -> Tensor:
    """``ref += value`` (``tf.assign_add``)."""
    return apply_op("AssignAdd", name=name, ref=_ref_of(ref), value=value,
                    use_locking=bool(use_locking))


@ks.api("assign_sub")
def assign_sub(ref: Any, value: Any, use_locking: bool | None = None,
               name: str | None = None) -> Tensor:
    """``ref -= value`` (``tf.assign_sub``)."""
    return apply_op("AssignSub", name=name, ref=_ref_of(ref), value=value,
                    use_locking=bool(use_locking))
