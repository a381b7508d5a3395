"""The API of the ops every graph needs (``tf.constant``, ``tf.placeholder``,
``tf.identity``, ``tf.no_op``) and ``PlaceholderWithDefault``.

The ops ``Const``, ``Placeholder``, ``Identity``, ``NoOp``, ``_Send`` and ``_Recv``
themselves, with their kernels, are the core's essential kernel set
(``flowrt.engine.essential``), registered by every runtime and never blocked; this
module only builds graph nodes of them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from flowrt import dtypes as _dt
from flowrt.graph import Tensor, apply_op, convert_to_tensor, get_default_graph, numpy_value_for
from flowrt.op_registry import OpDef
from flowrt.resources import VarRef
from flowrt.tensor_shape import TensorShape, as_shape, unknown_shape

from ._common import ks


def _pwd_shape(op: Any) -> list[TensorShape]:
    s = op.node_attrs.get("shape")
    declared = unknown_shape() if s is None else as_shape(s)
    if not declared.is_compatible_with(op.inputs[0].shape):
        raise ValueError(f"PlaceholderWithDefault '{op.name}': the default value's shape "
                         f"{op.inputs[0].shape} is incompatible with shape {declared}")
    return [declared]


ks.op(
    OpDef("PlaceholderWithDefault", inputs=["input: dtype"], outputs=["output: dtype"],
          attrs=["dtype: type", "shape: shape"], shape_fn=_pwd_shape,
          doc="Passes its input through unless fed."),
)


@ks.kernel("PlaceholderWithDefault")
def _placeholder_with_default_kernel(ctx: Any) -> Any:
    def identity(x: Any) -> Any:
        return x

    return identity


@ks.api("constant")
def constant(value: Any, dtype: Any = None, shape: Any = None, name: str = "Const",
             verify_shape: bool = False) -> Tensor:
    """A constant tensor (``tf.constant``, TF1 semantics).

    With ``shape``, a scalar is broadcast and a shorter list is padded with its last
    element (TF1); too many elements is a TypeError.
    """
    want = None if dtype is None else _dt.as_dtype(dtype)
    if isinstance(value, Tensor):
        raise TypeError(f"tf.constant takes a Python or numpy value, not a Tensor: {value!r}")
    arr = numpy_value_for(value, want)
    if want is None:
        want = _dt.as_dtype(arr.dtype) if arr.dtype != object else _dt.string
    if shape is not None:
        shp = as_shape(shape)
        if not shp.is_fully_defined():
            raise ValueError(f"tf.constant shape must be fully defined, got {shp}")
        target = tuple(shp.as_list())
        n = int(np.prod(target, dtype=np.int64))
        if verify_shape and arr.shape != target:
            raise TypeError(f"Expected Tensor's shape: {target}, got {arr.shape}.")
        if arr.size == n:
            arr = arr.reshape(target)
        elif arr.size == 1:
            arr = np.full(target, arr.reshape(-1)[0], dtype=arr.dtype)
        elif arr.size < n:
            flat = arr.reshape(-1)
            if flat.size == 0:
                raise ValueError("tf.constant: cannot fill a shape from an empty value")
            arr = np.concatenate([flat, np.repeat(flat[-1:], n - flat.size)]).reshape(target)
        else:
            raise ValueError(f"Too many elements provided. Needed at most {n}, but received "
                             f"{arr.size}")
    g = get_default_graph()
    op = g.create_op("Const", [], [want], name=name or "Const",
                     attrs={"value": arr, "dtype": want})
    return op.outputs[0]


@ks.api("placeholder")
def placeholder(dtype: Any, shape: Any = None, name: str | None = None) -> Tensor:
    """A tensor that must be fed (``tf.placeholder``)."""
    return apply_op("Placeholder", name=name, dtype=_dt.as_dtype(dtype),
                    shape=unknown_shape() if shape is None else as_shape(shape))


@ks.api("placeholder_with_default")
def placeholder_with_default(input: Any, shape: Any, name: str | None = None) -> Tensor:
    """Passes ``input`` through unless the output is fed (``tf.placeholder_with_default``)."""
    t = convert_to_tensor(input)
    return apply_op("PlaceholderWithDefault", name=name, input=t, shape=as_shape(shape))


@ks.api("identity")
def identity(input: Any, name: str | None = None) -> Tensor:
    """Returns a tensor with the same value as ``input`` (``tf.identity``)."""
    if hasattr(input, "_as_graph_element") and not isinstance(input, Tensor):
        input = input.value() if hasattr(input, "value") else input._as_graph_element()
    return apply_op("Identity", name=name, input=input)


@ks.api("no_op")
def no_op(name: str | None = None) -> Any:
    """An op that does nothing (``tf.no_op``)."""
    return apply_op("NoOp", name=name)


ks.export("newaxis", None)
_ = VarRef  # re-exported for kernels that need the reference type

