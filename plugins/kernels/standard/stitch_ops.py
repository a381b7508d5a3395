"""Ops TensorFlow-written graphs often hold that the rest of the set does not define.

- ``ParallelDynamicStitch``: ``DynamicStitch`` whose duplicate indices may be resolved in
  any order (TF's ``embedding_lookup`` over a partitioned variable writes it); flowrt
  resolves them as ``DynamicStitch`` does (the last write wins), which TF allows.
- ``ConcatOffset``: the offsets of each input in a concatenation (``ConcatV2``'s gradient
  in TF-written graphs).
- ``ControlTrigger``: a control anchor (TF's while-loop gradients write it); it runs as a
  ``NoOp``.

They have no ``tf.*`` function of their own in TF 1.15 (only ``tf.raw_ops``): they arrive
in imported graphs.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowrt import errors
from flowrt.graph import Tensor, apply_op
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape

from ._common import ks
from .array_ops import _dynamic_stitch_kernel, _dynamic_stitch_shape


def _concat_offset_shape(op: Any) -> list[TensorShape]:
    return [op.inputs[1].shape] * len(op.outputs)


ks.op(
    OpDef("ParallelDynamicStitch", inputs=["indices: N * int32", "data: N * T"],
          outputs=["merged: T"], attrs=["N: int >= 1", "T: type"],
          shape_fn=_dynamic_stitch_shape,
          doc="Interleaves data by indices; duplicate indices may resolve in any order."),
    OpDef("ConcatOffset", inputs=["concat_dim: int32", "shape: N * shape_type"],
          outputs=["offset: N * shape_type"],
          attrs=["N: int >= 2", "shape_type: {int32, int64} = DT_INT32"],
          shape_fn=_concat_offset_shape,
          doc="The offset of each input of a concatenation along concat_dim."),
    OpDef("ControlTrigger", doc="Does nothing; a control anchor of TF's loop gradients."),
)

ks.kernel("ParallelDynamicStitch")(_dynamic_stitch_kernel)


@ks.kernel("ConcatOffset")
def _concat_offset_kernel(ctx: Any) -> Callable:
    n = len(ctx.output_dtypes)
    np_dtype = ctx.output_dtypes[0].as_numpy_dtype

    def concat_offset(concat_dim: Any, *shapes: Any) -> Any:
        shapes = [np.asarray(s) for s in shapes]
        if np.ndim(concat_dim) != 0:
            raise errors.InvalidArgumentError(
                None, None, f"Concat dim tensor should be a scalar integer, but got shape "
                f"{list(np.shape(concat_dim))}")
        s0 = shapes[0]
        if s0.ndim != 1:
            raise errors.InvalidArgumentError(
                None, None, f"input 0 should be a 1-D tensor, but got shape "
                f"{list(s0.shape)}")
        rank = s0.shape[0]
        axis = int(concat_dim)
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis < max(rank, 1):
            raise errors.InvalidArgumentError(
                None, None, f"Concat dim is out of range: {int(concat_dim)} vs. {rank}")
        out, offset = [], 0
        for i, s in enumerate(shapes):
            if s.shape != s0.shape:
                raise errors.InvalidArgumentError(
                    None, None, f"input {i} should contain {rank} elements, but got "
                    f"{s.shape[0] if s.ndim == 1 else list(s.shape)}")
            for j in range(rank):
                if j != axis and s[j] != s0[j]:
                    raise errors.InvalidArgumentError(
                        None, None, f"All dimensions except {axis} must match. Input {i} "
                        f"has shape [{' '.join(str(int(x)) for x in s)}] and doesn't match "
                        f"input 0 with shape [{' '.join(str(int(x)) for x in s0)}].")
            o = np.zeros(rank, np_dtype)
            if rank:
                o[axis] = offset
                offset += int(s[axis])
            out.append(o)
        return tuple(out) if n > 1 else out[0]

    return concat_offset


@ks.kernel("ControlTrigger", all_devices=True)
def _control_trigger_kernel(ctx: Any) -> Callable:
    def control_trigger() -> None:
        return None

    return control_trigger


ks.not_differentiable("ConcatOffset", "ControlTrigger")


@ks.gradient("ParallelDynamicStitch")
def _parallel_dynamic_stitch_grad(op: Any, grad: Tensor) -> list[Any]:
    n = len(op.inputs) // 2
    vals = [apply_op("GatherV2", params=grad, indices=op.inputs[i], axis=np.int32(0))
            for i in range(n)]
    return [None] * n + vals
