"""Gradients of the array ops (TF's ``array_grad.py``), and the ops they need.

Gradient functions follow TensorFlow 1.15's formulas. As in TF, the gradient of an axis-0
gather (``Gather``, ``GatherV2`` with axis 0) with respect to its params is an
``IndexedSlices`` (the incoming gradient's rows at the gathered indices); other gathers'
gradients are dense, an ``UnsortedSegmentSum`` of the incoming gradient into a tensor of
the params' shape. This module adds the ops those gradients emit, with
TF's names and signatures so GraphDefs stay interchangeable: ``UnsortedSegmentSum``
(also exported as ``tf.math.unsorted_segment_sum``), ``StridedSliceGrad`` and
``MirrorPadGrad``.

Shapes a gradient needs are emitted as constants when they are statically known and as
``Shape``/``Size`` nodes otherwise, so gradients work for partially known shapes too.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt.framework.indexed_slices import IndexedSlices
from flowrt.graph import Tensor, apply_op, colocate_with, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import constant_value, host_reader, ks
from .array_ops import (_SliceSpecError, _dims, _full, _int_list, _int_scalar, _invalid,
                        _numpy_key, _shape_str, _shape_value, _slice_debug, _static_value,
                        _strided_slice_spec, _with_rank, _with_rank_at_least, _zero_of)

__all__ = ["unsorted_segment_sum"]

_I32 = _dt.int32


# =======================================================================================
# helpers shared with nn_grad
# =======================================================================================
def _const(value: Any, dtype: _dt.DType = _I32) -> Tensor:
    return convert_to_tensor(np.asarray(value, dtype=dtype.np), dtype=dtype)


def static_shape(t: Tensor) -> list[int] | None:
    """``t``'s shape as a list of ints when fully known, else None."""
    s = t.shape
    return s.as_list() if s.is_fully_defined() else None


def shape_tensor(t: Tensor, out_type: _dt.DType = _I32) -> Tensor:
    """``tf.shape(t)``: a Const when the static shape is fully defined."""
    d = static_shape(t)
    if d is not None:
        return _const(d, out_type)
    return apply_op("Shape", input=t, out_type=out_type)


def _rank_tensor(t: Tensor) -> Tensor:
    r = t.shape.ndims
    return _const(r) if r is not None else apply_op("Rank", input=t)


def _size_tensor(t: Tensor, out_type: _dt.DType = _I32) -> Tensor:
    n = t.shape.num_elements()
    return _const(n, out_type) if n is not None else apply_op("Size", input=t,
                                                              out_type=out_type)


def _cast(t: Tensor, dtype: _dt.DType) -> Tensor:
    return t if t.dtype.base_dtype is dtype else apply_op("Cast", x=t, DstT=dtype)


def _reshape(t: Tensor, shape: Any) -> Tensor:
    if isinstance(shape, (list, tuple)):
        shape = _const(list(shape))
    return apply_op("Reshape", tensor=t, shape=shape)


def _zeros_like(t: Tensor) -> Tensor:
    return apply_op("ZerosLike", x=t)


def _reduce_sum(t: Tensor, axes: Any, keep_dims: bool = False) -> Tensor:
    if isinstance(axes, (list, tuple, int)):
        axes = _const(axes)
    return apply_op("Sum", input=t, reduction_indices=axes, keep_dims=keep_dims)


def _concat(values: Sequence[Any], axis: int = 0) -> Tensor:
    return apply_op("ConcatV2", values=list(values), axis=np.int32(axis))


def _expand_scalar(t: Tensor) -> Tensor:
    """A scalar tensor as a 1-element vector."""
    return apply_op("ExpandDims", input=t, dim=np.int32(0))


def sum_to_shape(grad: Tensor, x: Tensor) -> Tensor:
    """Sum ``grad`` (of a shape ``x`` broadcasts to) down to ``x``'s shape.

    Static shapes give a Sum over constant axes; otherwise BroadcastGradientArgs gives
    them, as in TF (without that op: where ``x``'s shape, left-padded with ones to
    ``grad``'s rank, is 1)."""
    gd, xd = static_shape(grad), static_shape(x)
    if gd is not None and xd is not None:
        if gd == xd:
            return grad
        lead = len(gd) - len(xd)
        axes = list(range(lead)) + [lead + i for i, d in enumerate(xd)
                                    if d == 1 and gd[lead + i] != 1]
        out = _reduce_sum(grad, axes, keep_dims=True) if axes else grad
        return _reshape(out, xd)
    x_shape = shape_tensor(x)
    if "BroadcastGradientArgs" in ks.ops:  # TF's graph
        _, rx = apply_op("BroadcastGradientArgs", s0=shape_tensor(grad), s1=x_shape)
        out = apply_op("Sum", input=grad, reduction_indices=rx, keep_dims=True)
        return apply_op("Reshape", tensor=out, shape=x_shape)
    gr = _rank_tensor(grad)
    xr = _size_tensor(x_shape)
    ones = apply_op("Fill", dims=_expand_scalar(apply_op("Sub", x=gr, y=xr)),
                    value=np.int32(1))
    padded = _concat([ones, x_shape])
    axes = _reshape(apply_op("Where", input=apply_op("Equal", x=padded, y=np.int32(1))), [-1])
    out = apply_op("Sum", input=grad, reduction_indices=axes, keep_dims=True)
    return apply_op("Reshape", tensor=out, shape=x_shape)


def _gradient(*ops: str) -> Callable:
    return ks.gradient(*ops)


# =======================================================================================
# new ops: UnsortedSegmentSum, StridedSliceGrad, MirrorPadGrad
# =======================================================================================
def _unsorted_segment_shape(op: Any) -> list[TensorShape]:
    data = _dims(op.inputs[0])
    ids = _dims(op.inputs[1])
    _with_rank(_dims(op.inputs[2]), 0, op)
    n = _static_value(op.inputs[2])
    nseg = None if n is None else int(n)
    if data is None or ids is None:
        return [unknown_shape()]
    _with_rank_at_least(data, len(ids), op)
    for i, (a, b) in enumerate(zip(data, ids)):
        if a is not None and b is not None and a != b:
            raise ValueError(f"Dimensions must be equal, but are {a} and {b} for "
                             f"'{op.name}' (op: '{op.type}')")
    return [TensorShape((nseg,) + tuple(data[len(ids):]))]


if "UnsortedSegmentSum" not in ks.ops:  # another module of the set may declare it too
    ks.op(OpDef("UnsortedSegmentSum",
                inputs=["data: T", "segment_ids: Tindices", "num_segments: Tnumsegments"],
                outputs=["output: T"],
                attrs=["T: numbertype", "Tindices: {int32, int64}",
                       "Tnumsegments: {int32, int64} = DT_INT32"],
                shape_fn=_unsorted_segment_shape,
                doc="Sums the slices of data with equal segment ids (negative ids dropped)."))

    @ks.kernel("UnsortedSegmentSum", host_memory=("num_segments",))
    def _unsorted_segment_sum_kernel(ctx: Any) -> Callable:
        xp = ctx.xp
        dt = ctx.output_dtypes[0]
        host = host_reader(ctx)

        def unsorted_segment_sum(data: Any, ids: Any, num: Any) -> Any:
            ids = xp.asarray(ids)
            num = host(num)
            ds, ish = np.shape(data), np.shape(ids)
            if ds[:len(ish)] != ish:
                raise _invalid(f"data.shape = {_shape_str(ds)} does not start with "
                               f"segment_ids.shape = {_shape_str(ish)}")
            if np.ndim(num) != 0:
                raise _invalid(f"num_segments should be a scalar, not shape "
                               f"{_shape_str(np.shape(num))}")
            n = _int_scalar(num, np.asarray)
            if n < 0:
                raise _invalid(f"num_segments must be non-negative, got {n}")
            inner = ds[len(ish):]
            out = xp.zeros((n,) + inner, dtype=dt.np)
            flat = ids.reshape(-1)
            if flat.size == 0:
                return out
            bad = flat >= n
            if bool(bad.any()):
                i = int(xp.flatnonzero(bad)[0])
                raise _invalid(f"segment_ids{_slice_debug(ish, i)} = {int(flat[i])} is out of "
                               f"range [0, {n})")
            vals = xp.asarray(data).reshape((flat.size,) + inner)
            keep = flat >= 0
            if not bool(keep.all()):
                flat, vals = flat[keep], vals[keep]
            xp.add.at(out, flat, vals)
            return out

        return unsorted_segment_sum


def unsorted_segment_sum(data: Any, segment_ids: Any, num_segments: Any,
                         name: str | None = None) -> Tensor:
    """Sums of the slices of ``data`` by segment id: ``output[i] = sum(data[j...] for
    segment_ids[j...] == i)``; rows with negative ids are dropped
    (``tf.math.unsorted_segment_sum``)."""
    with name_scope(name, "UnsortedSegmentSum", [data, segment_ids, num_segments]) as scope:
        data = convert_to_tensor(data, name="data")
        segment_ids = convert_to_tensor(segment_ids, name="segment_ids")
        num_segments = convert_to_tensor(num_segments, name="num_segments")
        return apply_op("UnsortedSegmentSum", name=scope, data=data, segment_ids=segment_ids,
                        num_segments=num_segments)


for _n in ("math.unsorted_segment_sum", "unsorted_segment_sum"):
    if _n not in ks.api_names:
        ks.api(_n)(unsorted_segment_sum)


def _strided_slice_grad_shape(op: Any) -> list[TensorShape]:
    return [_shape_value(op.inputs[0], op)]


def _mirror_pad_grad_shape(op: Any) -> list[TensorShape]:
    d = _dims(op.inputs[0])
    pads = _static_value(op.inputs[1])
    if pads is None:
        return [unknown_shape() if d is None else unknown_shape(len(d))]
    pads = pads.reshape(-1, 2) if pads.size else np.zeros((0, 2), np.int64)
    d = _with_rank(d, pads.shape[0], op)
    out: list[int | None] = []
    for x, (a, b) in zip(d, pads.tolist()):
        if x is None:
            out.append(None)
            continue
        if a < 0 or b < 0 or x - a - b < 0:
            raise ValueError(f"Paddings must be non-negative and no larger than the input "
                             f"for '{op.name}' (op: '{op.type}')")
        out.append(x - a - b)
    return [TensorShape(out)]


ks.op(OpDef("StridedSliceGrad",
            inputs=["shape: Index", "begin: Index", "end: Index", "strides: Index", "dy: T"],
            outputs=["output: T"],
            attrs=["T: type", "Index: {int32, int64}", "begin_mask: int = 0",
                   "end_mask: int = 0", "ellipsis_mask: int = 0", "new_axis_mask: int = 0",
                   "shrink_axis_mask: int = 0"],
            shape_fn=_strided_slice_grad_shape,
            doc="The gradient of StridedSlice: dy placed into zeros of the input's shape."),
      OpDef("MirrorPadGrad", inputs=["input: T", "paddings: Tpaddings"], outputs=["output: T"],
            attrs=["T: type", "Tpaddings: {int32, int64} = DT_INT32",
                   "mode: {'REFLECT', 'SYMMETRIC'}"],
            shape_fn=_mirror_pad_grad_shape,
            doc="The gradient of MirrorPad: the mirrored parts folded back onto the input."))


@ks.kernel("StridedSliceGrad", host_memory=("shape", "begin", "end", "strides"))
def _strided_slice_grad_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    dt = ctx.output_dtypes[0]
    a = ctx.attrs
    masks = (a.get("begin_mask", 0), a.get("end_mask", 0), a.get("ellipsis_mask", 0),
             a.get("new_axis_mask", 0), a.get("shrink_axis_mask", 0))
    host = host_reader(ctx)

    def strided_slice_grad(shape: Any, begin: Any, end: Any, strides: Any, dy: Any) -> Any:
        shape, begin, end, strides = host(shape), host(begin), host(end), host(strides)
        if np.ndim(shape) != 1:
            raise _invalid(f"shape must be 1-D, got {_shape_str(np.shape(shape))}")
        s = _int_list(shape, np.asarray)
        if any(v < 0 for v in s):
            raise _invalid(f"shape must be non-negative, got {_shape_str(s)}")
        if not (np.ndim(begin) == np.ndim(end) == np.ndim(strides) == 1
                and np.size(begin) == np.size(end) == np.size(strides)):
            raise _invalid(f"Expected begin, end, and strides to be 1D equal size tensors, but "
                           f"got shapes {_shape_str(np.shape(begin))}, "
                           f"{_shape_str(np.shape(end))}, and "
                           f"{_shape_str(np.shape(strides))} instead.")
        try:
            dense, gather = _strided_slice_spec(tuple(s), _int_list(begin, np.asarray),
                                                _int_list(end, np.asarray),
                                                _int_list(strides, np.asarray), *masks)
        except _SliceSpecError as ex:
            raise _invalid(str(ex)) from None
        out = _full(xp, s, _zero_of(dt), dt)
        key = _numpy_key(dense, gather)
        want = out[key].shape
        if tuple(np.shape(dy)) != tuple(want):
            raise _invalid(f"shape of dy was {_shape_str(np.shape(dy))} instead of "
                           f"{_shape_str(want)}")
        out[key] = dy
        return out

    return strided_slice_grad


@ks.kernel("MirrorPadGrad", host_memory=("paddings",))
def _mirror_pad_grad_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    dt = ctx.output_dtypes[0]
    symmetric = ctx.attrs["mode"] == "SYMMETRIC"
    off = 0 if symmetric else 1
    host = host_reader(ctx)

    def mirror_pad_grad(g: Any, paddings: Any) -> Any:
        shape = np.shape(g)
        paddings = host(paddings)
        if np.shape(paddings) != (len(shape), 2):
            raise _invalid(f"paddings must be a matrix with 2 columns and a row per input "
                           f"dimension: {_shape_str(np.shape(paddings))} vs input rank "
                           f"{len(shape)}")
        flat = _int_list(paddings, np.asarray)
        out = g
        for ax, n_pad in enumerate(shape):
            lo, hi = flat[2 * ax], flat[2 * ax + 1]
            if lo == 0 and hi == 0:
                continue
            n = n_pad - lo - hi
            if lo < 0 or hi < 0 or n < 0 or lo > n - off or hi > n - off:
                raise _invalid(f"paddings must be non-negative and less than the output "
                               f"dimension size ({'<=' if symmetric else '<'}): {lo}, {hi} "
                               f"for padded size {n_pad}")

            def cut(a: int, b: int | None, step: int = 1) -> tuple[Any, ...]:
                return (slice(None),) * ax + (slice(a, b, step),)

            res = out[cut(lo, lo + n)].copy()
            if lo:
                # padded position p < lo mirrors original index lo - p - 1 + off
                res[cut(off, off + lo)] += xp.flip(out[cut(0, lo)], axis=ax)
            if hi:
                # padded position lo + n + q mirrors original index n - 1 - q - off
                res[cut(n - hi - off, n - off)] += xp.flip(out[cut(lo + n, lo + n + hi)],
                                                           axis=ax)
            out = res
        if out is g:
            return g
        return out.astype(dt.np, copy=False)

    return mirror_pad_grad


# =======================================================================================
# identity-like
# =======================================================================================
@_gradient("Identity", "PlaceholderWithDefault")
def _identity_grad(op: Any, grad: Tensor) -> list[Any]:
    return [grad]


@_gradient("IdentityN")
def _identity_n_grad(op: Any, *grads: Tensor) -> list[Any]:
    return list(grads)


@_gradient("PreventGradient")
def _prevent_gradient_grad(op: Any, grad: Tensor) -> list[Any]:
    raise LookupError(f"Gradient explicitly disabled. Reason: "
                      f"{op.node_attrs.get('message', '')}")


ks.not_differentiable(
    "StopGradient", "ZerosLike", "OnesLike", "Shape", "ShapeN", "Size", "Rank", "Range",
    "LinSpace", "OneHot", "Where", "Unique", "UniqueWithCounts", "ListDiff", "InvertPermutation",
    "BroadcastArgs", "UnravelIndex", "LowerBound", "UpperBound", "Const")


# =======================================================================================
# reshaping
# =======================================================================================
def _reshape_to_input(op: Any, grad: Tensor) -> Tensor:
    x = op.inputs[0]
    d = x.shape.as_tuple()
    if d is not None and not x.shape.is_fully_defined():
        unknown = [i for i, v in enumerate(d) if v is None]
        if len(unknown) == 1 and 0 not in d:
            return _reshape(grad, [-1 if v is None else v for v in d])
    return apply_op("Reshape", tensor=grad, shape=shape_tensor(x))


@_gradient("Reshape")
def _reshape_grad(op: Any, grad: Tensor) -> list[Any]:
    return [_reshape_to_input(op, grad), None]


@_gradient("ExpandDims")
def _expand_dims_grad(op: Any, grad: Tensor) -> list[Any]:
    return [_reshape_to_input(op, grad), None]


@_gradient("Squeeze")
def _squeeze_grad(op: Any, grad: Tensor) -> list[Any]:
    return [_reshape_to_input(op, grad)]


def _inverse_perm(perm: Tensor) -> Any:
    p = constant_value(perm)
    if p is not None:
        return _const(np.argsort(np.asarray(p).reshape(-1)), perm.dtype.base_dtype)
    return apply_op("InvertPermutation", x=perm)


@_gradient("Transpose")
def _transpose_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("Transpose", x=grad, perm=_inverse_perm(op.inputs[1])), None]


@_gradient("ConjugateTranspose")
def _conjugate_transpose_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("ConjugateTranspose", x=grad, perm=_inverse_perm(op.inputs[1])), None]


@_gradient("ReverseV2")
def _reverse_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("ReverseV2", tensor=grad, axis=op.inputs[1]), None]


# =======================================================================================
# joining and splitting
# =======================================================================================
@_gradient("Pack")
def _pack_grad(op: Any, grad: Tensor) -> list[Any]:
    n = len(op.inputs)
    out = apply_op("Unpack", value=grad, num=n, axis=op.node_attrs.get("axis", 0))
    return list(out) if isinstance(out, (list, tuple)) else [out]


@_gradient("Unpack")
def _unpack_grad(op: Any, *grads: Tensor) -> list[Any]:
    return [apply_op("Pack", values=list(grads), axis=op.node_attrs.get("axis", 0))]


@_gradient("Split")
def _split_grad(op: Any, *grads: Tensor) -> list[Any]:
    return [None, apply_op("ConcatV2", values=list(grads), axis=op.inputs[0])]


@_gradient("SplitV")
def _splitv_grad(op: Any, *grads: Tensor) -> list[Any]:
    return [apply_op("ConcatV2", values=list(grads), axis=op.inputs[2]), None, None]


@_gradient("ConcatV2")
def _concat_grad(op: Any, grad: Tensor) -> list[Any]:
    values = list(op.inputs[:-1])
    if len(values) == 1:
        return [grad, None]
    axis_t = op.inputs[-1]
    axis_v = constant_value(axis_t)
    rank = next((v.shape.ndims for v in values if v.shape.ndims is not None), None)
    if axis_v is not None and rank is not None:
        ax = int(axis_v) % rank
        sizes = [v.shape.as_tuple()[ax] if v.shape.ndims is not None else None
                 for v in values]
        if all(s is not None for s in sizes):
            splits: Any = _const(sizes)
        else:
            splits = apply_op("Pack", values=[
                _const(s) if s is not None else
                apply_op("StridedSlice", input=shape_tensor(v), begin=_const([ax]),
                         end=_const([ax + 1]), strides=_const([1]), shrink_axis_mask=1)
                for s, v in zip(sizes, values)], axis=0)
        axis: Any = np.int32(ax)
    else:
        axis = apply_op("FloorMod", x=_cast(axis_t, _I32), y=_rank_tensor(values[0]))
        splits = apply_op("Pack", values=[
            apply_op("GatherV2", params=shape_tensor(v), indices=axis, axis=np.int32(0))
            for v in values], axis=0)
    parts = apply_op("SplitV", value=grad, size_splits=splits, split_dim=axis,
                     num_split=len(values))
    parts = list(parts) if isinstance(parts, (list, tuple)) else [parts]
    for p, v in zip(parts, values):
        p.set_shape(v.shape)
    return parts + [None]


@_gradient("Tile")
def _tile_grad(op: Any, grad: Tensor) -> list[Any]:
    x, mult = op.inputs
    xd = static_shape(x)
    mv = constant_value(mult)
    if xd is not None and mv is not None:
        m = [int(v) for v in np.asarray(mv).reshape(-1)]
        split = [v for pair in zip(m, xd) for v in pair]
        out = _reduce_sum(_reshape(grad, split), list(range(0, len(split), 2)))
    else:
        mdt = mult.dtype.base_dtype
        in_shape = shape_tensor(x, mdt)
        stacked = apply_op("Pack", values=[mult, in_shape], axis=0)
        split_t = _reshape(apply_op("Transpose", x=stacked, perm=_const([1, 0])), [-1])
        axes = apply_op("Range", start=_const(0, mdt), limit=_size_tensor(split_t, mdt),
                        delta=_const(2, mdt))
        out = apply_op("Sum", input=apply_op("Reshape", tensor=grad, shape=split_t),
                       reduction_indices=axes)
    out.set_shape(x.shape)
    return [out, None]


@_gradient("BroadcastTo")
def _broadcast_to_grad(op: Any, grad: Tensor) -> list[Any]:
    return [sum_to_shape(grad, op.inputs[0]), None]


# =======================================================================================
# padding and slicing
# =======================================================================================
@_gradient("Pad", "PadV2")
def _pad_grad(op: Any, grad: Tensor) -> list[Any]:
    x, pads = op.inputs[0], op.inputs[1]
    pv = constant_value(pads)
    xd = static_shape(x)
    pdt = pads.dtype.base_dtype
    if pv is not None and xd is not None:
        begin: Any = _const(np.asarray(pv).reshape(-1, 2)[:, 0], pdt)
        size: Any = _const(xd, pdt)
    else:
        col = apply_op("Slice", input=pads, begin=_const([0, 0], pdt),
                       size=apply_op("Pack", values=[_cast(_rank_tensor(x), pdt),
                                                     _const(1, pdt)], axis=0))
        begin = _reshape(col, [-1])
        size = shape_tensor(x, pdt)
    out = apply_op("Slice", input=grad, begin=begin, size=size)
    return [out, None] + ([None] if len(op.inputs) == 3 else [])


@_gradient("MirrorPad")
def _mirror_pad_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("MirrorPadGrad", input=grad, paddings=op.inputs[1],
                     mode=op.node_attrs["mode"]), None]


@_gradient("MirrorPadGrad")
def _mirror_pad_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("MirrorPad", input=grad, paddings=op.inputs[1],
                     mode=op.node_attrs["mode"]), None]


@_gradient("Slice")
def _slice_grad(op: Any, grad: Tensor) -> list[Any]:
    x, begin = op.inputs[0], op.inputs[1]
    idt = begin.dtype.base_dtype
    bv = constant_value(begin)
    xd, yd = static_shape(x), static_shape(op.outputs[0])
    if bv is not None and xd is not None and yd is not None:
        b = [int(v) for v in np.asarray(bv).reshape(-1)]
        pads: Any = _const([[bi, xi - yi - bi] for bi, xi, yi in zip(b, xd, yd)], idt)
    else:
        rank = _rank_tensor(x)
        col_shape = apply_op("Pack", values=[rank, _const(1)], axis=0)
        before = apply_op("Reshape", tensor=begin, shape=col_shape)
        after_v = apply_op("Sub", x=apply_op("Sub", x=shape_tensor(x, idt),
                                             y=shape_tensor(op.outputs[0], idt)), y=begin)
        after = apply_op("Reshape", tensor=after_v, shape=col_shape)
        pads = apply_op("ConcatV2", values=[before, after], axis=np.int32(1))
    return [apply_op("Pad", input=grad, paddings=pads), None, None]


def _strided_slice_attrs(op: Any) -> dict[str, int]:
    a = op.node_attrs
    return {k: a.get(k, 0) for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                      "new_axis_mask", "shrink_axis_mask")}


@_gradient("StridedSlice")
def _strided_slice_grad(op: Any, grad: Tensor) -> list[Any]:
    x, begin, end, strides = op.inputs
    out = apply_op("StridedSliceGrad", shape=shape_tensor(x, begin.dtype.base_dtype),
                   begin=begin, end=end, strides=strides, dy=grad, **_strided_slice_attrs(op))
    return [out, None, None, None]


@_gradient("StridedSliceGrad")
def _strided_slice_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    _, begin, end, strides, _ = op.inputs
    out = apply_op("StridedSlice", input=grad, begin=begin, end=end, strides=strides,
                   **_strided_slice_attrs(op))
    return [None, None, None, None, out]


# =======================================================================================
# gathering and scattering
# =======================================================================================
def _prod(vals: Sequence[Any]) -> Any:
    """Product of a list of ints and scalar int32 tensors (an int when all are ints)."""
    ints = [v for v in vals if not isinstance(v, Tensor)]
    p: Any = int(np.prod(ints, dtype=np.int64)) if ints else 1
    for v in vals:
        if isinstance(v, Tensor):
            p = v if (not isinstance(p, Tensor) and p == 1) else apply_op("Mul", x=p, y=v)
    return p


def _dims_list(t: Tensor) -> list[Any]:
    """``t``'s dims as ints where known and scalar int32 tensors where not (needs the rank)."""
    d = t.shape.as_tuple()
    assert d is not None
    if all(v is not None for v in d):
        return list(d)
    s = apply_op("Shape", input=t, out_type=_I32)
    return [v if v is not None else
            apply_op("StridedSlice", input=s, begin=_const([i]), end=_const([i + 1]),
                     strides=_const([1]), shrink_axis_mask=1)
            for i, v in enumerate(d)]


def _shape_arg(dims: Sequence[Any]) -> Any:
    if all(not isinstance(v, Tensor) for v in dims):
        return _const([int(v) for v in dims])
    return apply_op("Pack", values=[v if isinstance(v, Tensor) else _const(v) for v in dims],
                    axis=0)


def _gather_grad_dense(params: Tensor, indices: Tensor, grad: Tensor, axis: int,
                       batch_dims: int) -> Tensor:
    """Dense gradient of ``gather(params, indices, axis, batch_dims)``.

    The gradient, shaped ``B + P[bd:axis] + I[bd:] + P[axis+1:]``, is viewed as
    ``[nb, mid, ni, inner]``, transposed to ``[nb * ni, mid, inner]`` and summed by
    (batch-offset) index into ``[nb * P[axis], mid, inner]``, then put back."""
    pd = _dims_list(params)
    id_ = _dims_list(indices)
    nb = _prod(pd[:batch_dims])
    mid = _prod(pd[batch_dims:axis])
    inner = _prod(pd[axis + 1:])
    ni = _prod(id_[batch_dims:])
    n_ax = pd[axis]
    ids = indices
    if batch_dims:
        ids = _reshape_any(ids, [nb, ni])
        idt = ids.dtype.base_dtype
        offs = apply_op("Range", start=_const(0, idt), limit=_cast_int(nb, idt),
                        delta=_const(1, idt))
        offs = apply_op("Mul", x=_reshape(offs, [-1, 1]), y=_cast_int(n_ax, idt))
        ids = apply_op("AddV2", x=ids, y=offs)
    ids = _reshape(ids, [-1])
    if batch_dims == 0 and axis == 0:
        values = _reshape_any(grad, [ni, inner])
        summed = apply_op("UnsortedSegmentSum", data=values, segment_ids=ids,
                          num_segments=_cast_int(n_ax, _I32))
    else:
        values = _reshape_any(grad, [nb, mid, ni, inner])
        values = apply_op("Transpose", x=values, perm=_const([0, 2, 1, 3]))
        values = _reshape_any(values, [_prod([nb, ni]), mid, inner])
        summed = apply_op("UnsortedSegmentSum", data=values, segment_ids=ids,
                          num_segments=_cast_int(_prod([nb, n_ax]), _I32))
        summed = _reshape_any(summed, [nb, n_ax, mid, inner])
        summed = apply_op("Transpose", x=summed, perm=_const([0, 2, 1, 3]))
    out = _reshape_any(summed, pd)
    out.set_shape(params.shape)
    return out


def _reshape_any(t: Tensor, dims: Sequence[Any]) -> Tensor:
    return apply_op("Reshape", tensor=t, shape=_shape_arg(dims))


def _cast_int(v: Any, dtype: _dt.DType) -> Tensor:
    return _cast(v, dtype) if isinstance(v, Tensor) else _const(v, dtype)


def _gather_grad_slices(params: Tensor, indices: Tensor, grad: Tensor) -> IndexedSlices:
    """The axis-0 gather gradient as TF 1.15 builds it: an IndexedSlices of the
    incoming gradient's rows (reshaped to ``[size(indices)] + params.shape[1:]``) at the
    flattened indices, with the params' (int32) shape as its dense shape."""
    with colocate_with(params):
        pshape = shape_tensor(params)
    size_t = _expand_scalar(_size_tensor(indices))
    pd = static_shape(params)
    n = indices.shape.num_elements()
    if pd is not None and n is not None:
        values_shape: Any = _const([n] + pd[1:])
    else:
        tail = apply_op("StridedSlice", input=pshape, begin=_const([1]), end=_const([0]),
                        strides=_const([1]), end_mask=1)
        values_shape = _concat([size_t, tail])
    values = apply_op("Reshape", tensor=grad, shape=values_shape)
    ids = apply_op("Reshape", tensor=indices,
                   shape=_const([n]) if n is not None else size_t)
    return IndexedSlices(values, ids, pshape)


@_gradient("Gather")
def _gather_grad(op: Any, grad: Tensor) -> list[Any]:
    params, indices = op.inputs
    return [_gather_grad_slices(params, indices, grad), None]


@_gradient("GatherV2")
def _gather_v2_grad(op: Any, grad: Tensor) -> list[Any]:
    params, indices, axis_t = op.inputs
    bd = int(op.node_attrs.get("batch_dims", 0))
    av = constant_value(axis_t)
    pr, ir = params.shape.ndims, indices.shape.ndims
    if bd < 0:
        if ir is None:
            raise ValueError("Currently, it is unsupported to take the gradient of tf.gather "
                             "when batch_dims < 0 and the rank of the indices is unknown.")
        bd += ir
    if av is not None and int(av) == 0 and bd == 0:
        return [_gather_grad_slices(params, indices, grad), None, None]
    if av is None or pr is None or ir is None:
        raise ValueError(f"The gradient of GatherV2 '{op.name}' needs a statically known "
                         "axis and statically known ranks of params and indices.")
    axis = int(av) % pr
    return [_gather_grad_dense(params, indices, grad, axis, bd), None, None]


@_gradient("GatherNd")
def _gather_nd_grad(op: Any, grad: Tensor) -> list[Any]:
    params, indices = op.inputs
    shape = shape_tensor(params, indices.dtype.base_dtype)
    return [apply_op("ScatterNd", indices=indices, updates=grad, shape=shape), None]


@_gradient("ScatterNd")
def _scatter_nd_grad(op: Any, grad: Tensor) -> list[Any]:
    return [None, apply_op("GatherNd", params=grad, indices=op.inputs[0]), None]


@_gradient("UnsortedSegmentSum")
def _unsorted_segment_sum_grad(op: Any, grad: Tensor) -> list[Any]:
    """Gathers the gradient by segment id; rows with negative ids get zeros."""
    ids = op.inputs[1]
    idt = ids.dtype.base_dtype
    zero = _const(0, idt)
    clipped = apply_op("Maximum", x=ids, y=zero)
    gathered = apply_op("GatherV2", params=grad, indices=clipped, axis=np.int32(0))
    keep = apply_op("GreaterEqual", x=ids, y=zero)
    # broadcast the mask over the trailing dimensions of the gathered rows
    ir, gr = ids.shape.ndims, gathered.shape.ndims
    if ir is not None and gr is not None:
        if gr > ir:
            keep = _reshape_any(keep, _dims_list(ids) + [1] * (gr - ir))
    else:
        ones = apply_op("Fill", dims=_expand_scalar(apply_op(
            "Sub", x=_rank_tensor(gathered), y=_rank_tensor(ids))), value=np.int32(1))
        keep = apply_op("Reshape", tensor=keep, shape=_concat([shape_tensor(ids), ones]))
    dt = grad.dtype.base_dtype
    zero = convert_to_tensor(np.zeros((), dt.np), dtype=dt)
    return [apply_op("SelectV2", condition=keep, t=gathered, e=zero), None, None]


@_gradient("DynamicPartition")
def _dynamic_partition_grad(op: Any, *grads: Tensor) -> list[Any]:
    data, parts = op.inputs
    n = int(op.node_attrs["num_partitions"])
    pshape = shape_tensor(parts)
    count = apply_op("Prod", input=pshape, reduction_indices=_const([0]))
    orig = apply_op("Reshape", tensor=apply_op("Range", start=_const(0), limit=count,
                                               delta=_const(1)), shape=pshape)
    split = apply_op("DynamicPartition", data=orig, partitions=parts, num_partitions=n)
    split = list(split) if isinstance(split, (list, tuple)) else [split]
    stitched = apply_op("DynamicStitch", indices=split, data=list(grads))
    out = apply_op("Reshape", tensor=stitched, shape=shape_tensor(data))
    out.set_shape(data.shape)
    return [out, None]


@_gradient("DynamicStitch")
def _dynamic_stitch_grad(op: Any, grad: Tensor) -> list[Any]:
    n = len(op.inputs) // 2
    vals = [apply_op("GatherV2", params=grad, indices=op.inputs[i], axis=np.int32(0))
            for i in range(n)]
    return [None] * n + vals


# =======================================================================================
# filling, selecting
# =======================================================================================
@_gradient("Fill")
def _fill_grad(op: Any, grad: Tensor) -> list[Any]:
    r = grad.shape.ndims
    axes: Any = _const(list(range(r))) if r is not None else apply_op(
        "Range", start=_const(0), limit=apply_op("Rank", input=grad), delta=_const(1))
    return [None, apply_op("Sum", input=grad, reduction_indices=axes)]


@_gradient("Select")
def _select_grad(op: Any, grad: Tensor) -> list[Any]:
    c = op.inputs[0]
    zeros = _zeros_like(op.inputs[1])
    return [None, apply_op("Select", condition=c, t=grad, e=zeros),
            apply_op("Select", condition=c, t=zeros, e=grad)]


@_gradient("SelectV2")
def _select_v2_grad(op: Any, grad: Tensor) -> list[Any]:
    c, x, y = op.inputs
    zero = convert_to_tensor(np.zeros((), grad.dtype.base_dtype.np), dtype=grad.dtype.base_dtype)
    gx = apply_op("SelectV2", condition=c, t=grad, e=zero)
    gy = apply_op("SelectV2", condition=c, t=zero, e=grad)
    return [None, sum_to_shape(gx, x), sum_to_shape(gy, y)]


# =======================================================================================
# diagonals
# =======================================================================================
@_gradient("Diag")
def _diag_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("DiagPart", input=grad)]


@_gradient("DiagPart")
def _diag_part_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("Diag", diagonal=grad)]


@_gradient("MatrixDiag")
def _matrix_diag_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("MatrixDiagPart", input=grad)]


@_gradient("MatrixDiagPart")
def _matrix_diag_part_grad(op: Any, grad: Tensor) -> list[Any]:
    d = op.inputs[0].shape.as_tuple()
    if d is not None and d[-2] is not None and d[-2] == d[-1]:
        return [apply_op("MatrixDiag", diagonal=grad)]
    return [apply_op("MatrixSetDiag", input=_zeros_like(op.inputs[0]), diagonal=grad)]


@_gradient("MatrixSetDiag")
def _matrix_set_diag_grad(op: Any, grad: Tensor) -> list[Any]:
    zeros = _zeros_like(op.inputs[1])
    return [apply_op("MatrixSetDiag", input=grad, diagonal=zeros),
            apply_op("MatrixDiagPart", input=grad)]


@_gradient("MatrixBandPart")
def _matrix_band_part_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("MatrixBandPart", input=grad, num_lower=op.inputs[1],
                     num_upper=op.inputs[2]), None, None]
