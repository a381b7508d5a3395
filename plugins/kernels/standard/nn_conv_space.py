"""Space <-> batch and space <-> depth rearrangements (TF's ``array_ops`` space ops).

Ops with TF's names and signatures: ``SpaceToBatchND``, ``BatchToSpaceND``,
``SpaceToBatch``, ``BatchToSpace``, ``SpaceToDepth``, ``DepthToSpace``; their gradients
are each other. The API functions follow TF 1.15: ``tf.space_to_batch`` and
``tf.batch_to_space`` build the ND ops with a two-element block shape, as TF 1.15's
Python did; ``required_space_to_batch_paddings`` and ``with_space_to_batch`` (the
dilated-convolution helper in ``nn_ops.py``) are composites.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.graph import Tensor, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import host_reader, ks
from ._common import invalid as _invalid
from .array_ops import _static_value
from .nn_ops import _shape_error, _with_rank, _with_rank_at_least

__all__ = ["space_to_batch_nd", "batch_to_space_nd", "space_to_batch", "batch_to_space",
           "space_to_depth", "depth_to_space", "required_space_to_batch_paddings"]


def _host_ints(a: Any, to_host: Callable[[Any], np.ndarray]) -> np.ndarray:
    """An int input as a host int64 array, brought over by ``to_host`` (the kernel's
    ``host_reader``)."""
    return to_host(a).astype(np.int64)


# =======================================================================================
# SpaceToBatchND / BatchToSpaceND
# =======================================================================================
def _nd_shape(to_batch: bool) -> Callable[[Any], list[TensorShape]]:
    """Shape function of SpaceToBatchND (``to_batch``) and BatchToSpaceND."""

    def shape_fn(op: Any) -> list[TensorShape]:
        x, block, pads = op.inputs
        bd = _with_rank(op, block.shape, 1)
        _with_rank(op, pads.shape, 2)
        m = bd[0]
        d = x.shape.as_tuple()
        if m is not None:
            _with_rank_at_least(op, x.shape, m + 1)
        if d is None or m is None:
            return [unknown_shape()]
        bv, pv = _static_value(block), _static_value(pads)
        out: list[int | None] = [None] * len(d)
        out[m + 1:] = d[m + 1:]
        if bv is None:
            return [TensorShape(out)]
        bv = np.asarray(bv).reshape(-1).astype(np.int64)
        if np.any(bv < 1):
            raise _shape_error(op, f"block_shape must be positive, got {bv.tolist()}")
        prod = int(np.prod(bv))
        if to_batch:
            out[0] = None if d[0] is None else d[0] * prod
        elif d[0] is not None:
            if d[0] % prod:
                raise _shape_error(op, f"batch is not divisible by product of block_shape: "
                                       f"{d[0]} vs {prod}")
            out[0] = d[0] // prod
        if pv is None:
            return [TensorShape(out)]
        pv = np.asarray(pv).reshape(m, 2).astype(np.int64)
        if np.any(pv < 0):
            raise _shape_error(op, f"{'paddings' if to_batch else 'crops'} must be "
                                   f"non-negative, got {pv.tolist()}")
        for i in range(m):
            s = d[i + 1]
            if s is None:
                continue
            if to_batch:
                padded = s + int(pv[i, 0]) + int(pv[i, 1])
                if padded % int(bv[i]):
                    raise _shape_error(op, f"padded_shape[{i}]={padded} is not divisible "
                                           f"by block_shape[{i}]={int(bv[i])}")
                out[i + 1] = padded // int(bv[i])
            else:
                full = s * int(bv[i])
                cropped = full - int(pv[i, 0]) - int(pv[i, 1])
                if cropped < 0:
                    raise _shape_error(op, f"crops must be non-negative and not exceed the "
                                           f"block-expanded size: {full} - "
                                           f"{pv[i].tolist()}")
                out[i + 1] = cropped
        return [TensorShape(out)]

    return shape_fn


ks.op(
    OpDef("SpaceToBatchND", inputs=["input: T", "block_shape: Tblock_shape",
                                    "paddings: Tpaddings"], outputs=["output: T"],
          attrs=["T: type", "Tblock_shape: {int32, int64} = DT_INT32",
                 "Tpaddings: {int32, int64} = DT_INT32"], shape_fn=_nd_shape(True),
          doc="Zero-pads the spatial dimensions and moves blocks of them into the batch."),
    OpDef("BatchToSpaceND", inputs=["input: T", "block_shape: Tblock_shape",
                                    "crops: Tcrops"], outputs=["output: T"],
          attrs=["T: type", "Tblock_shape: {int32, int64} = DT_INT32",
                 "Tcrops: {int32, int64} = DT_INT32"], shape_fn=_nd_shape(False),
          doc="The inverse of SpaceToBatchND: batch blocks back into space, then cropped."),
)


def _check_block(op_type: str, x: Any, block: Any, pads: Any, what: str,
                 to_host: Callable[[Any], np.ndarray]
                 ) -> tuple[list[int], list[tuple[int, int]]]:
    b = _host_ints(block, to_host)
    p = _host_ints(pads, to_host)
    if b.ndim != 1:
        raise _invalid(f"{op_type}: block_shape must be 1-D, not {list(b.shape)}")
    m = b.shape[0]
    if p.shape != (m, 2):
        raise _invalid(f"{op_type}: {what} should have shape [{m}, 2] instead of "
                       f"{list(p.shape)}")
    if x.ndim < m + 1:
        raise _invalid(f"{op_type}: input rank should be >= {m + 1} instead of {x.ndim}")
    if np.any(b < 1):
        raise _invalid(f"{op_type}: All values in block_shape must be positive, got "
                       f"{b.tolist()}")
    if np.any(p < 0):
        raise _invalid(f"{op_type}: All values in {what} must be non-negative, got "
                       f"{p.tolist()}")
    return [int(v) for v in b], [(int(lo), int(hi)) for lo, hi in p]


def space_to_batch_array(xp: Any, x: Any, block: list[int], pads: list[tuple[int, int]],
                         op_type: str = "SpaceToBatchND") -> Any:
    """SpaceToBatchND of an array (also used by the dilated-convolution kernels)."""
    m = len(block)
    rest = list(x.shape[m + 1:])
    padded = [x.shape[i + 1] + lo + hi for i, (lo, hi) in enumerate(pads)]
    for i in range(m):
        if padded[i] % block[i]:
            raise _invalid(f"{op_type}: padded_shape[{i}]={padded[i]} is not divisible by "
                           f"block_shape[{i}]={block[i]}")
    if any(lo or hi for lo, hi in pads):
        x = xp.pad(x, [(0, 0)] + list(pads) + [(0, 0)] * len(rest))
    n = x.shape[0]
    shp = [n]
    for i in range(m):
        shp += [padded[i] // block[i], block[i]]
    y = x.reshape(shp + rest)
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + \
        list(range(1 + 2 * m, 1 + 2 * m + len(rest)))
    y = xp.transpose(y, perm)
    return xp.ascontiguousarray(y).reshape(
        [n * int(np.prod(block))] + [padded[i] // block[i] for i in range(m)] + rest)


def batch_to_space_array(xp: Any, x: Any, block: list[int], crops: list[tuple[int, int]],
                         op_type: str = "BatchToSpaceND") -> Any:
    """BatchToSpaceND of an array."""
    m = len(block)
    prod = int(np.prod(block))
    if x.shape[0] % prod:
        raise _invalid(f"{op_type}: Input batch dimension ({x.shape[0]}) is not divisible "
                       f"by product of block sizes ({prod})")
    n = x.shape[0] // prod
    sp = list(x.shape[1:m + 1])
    rest = list(x.shape[m + 1:])
    for i in range(m):
        if crops[i][0] + crops[i][1] > sp[i] * block[i]:
            raise _invalid(f"{op_type}: crops must be non-negative and not exceed the "
                           f"block-expanded size in dimension {i + 1}: {crops[i]} vs "
                           f"{sp[i] * block[i]}")
    y = x.reshape(list(block) + [n] + sp + rest)
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += list(range(2 * m + 1, 2 * m + 1 + len(rest)))
    y = xp.ascontiguousarray(xp.transpose(y, perm)).reshape(
        [n] + [sp[i] * block[i] for i in range(m)] + rest)
    key = (slice(None),) + tuple(slice(lo, sp[i] * block[i] - hi)
                                 for i, (lo, hi) in enumerate(crops))
    return y[key]


@ks.kernel("SpaceToBatchND", host_memory=("block_shape", "paddings"))
def _space_to_batch_nd_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    host = host_reader(ctx)

    def space_to_batch_nd(x: Any, block: Any, pads: Any) -> Any:
        b, p = _check_block("SpaceToBatchND", x, block, pads, "paddings", host)
        return space_to_batch_array(xp, x, b, p)

    return space_to_batch_nd


@ks.kernel("BatchToSpaceND", host_memory=("block_shape", "crops"))
def _batch_to_space_nd_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    host = host_reader(ctx)

    def batch_to_space_nd(x: Any, block: Any, crops: Any) -> Any:
        b, c = _check_block("BatchToSpaceND", x, block, crops, "crops", host)
        return batch_to_space_array(xp, x, b, c)

    return batch_to_space_nd


@ks.gradient("SpaceToBatchND")
def _space_to_batch_nd_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("BatchToSpaceND", input=grad, block_shape=op.inputs[1],
                     crops=op.inputs[2]), None, None]


@ks.gradient("BatchToSpaceND")
def _batch_to_space_nd_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("SpaceToBatchND", input=grad, block_shape=op.inputs[1],
                     paddings=op.inputs[2]), None, None]


# =======================================================================================
# SpaceToBatch / BatchToSpace (4-D, square blocks): kept for GraphDef compatibility
# =======================================================================================
def _square_shape(to_batch: bool) -> Callable[[Any], list[TensorShape]]:
    """Shape function of SpaceToBatch (``to_batch``) and BatchToSpace."""
    def shape_fn(op: Any) -> list[TensorShape]:
        x, pads = op.inputs
        bs = int(op.node_attrs["block_size"])
        d = _with_rank(op, x.shape, 4)
        pv = _static_value(pads)
        _with_rank(op, pads.shape, 2)
        out = [None, None, None, d[3]]
        if to_batch:
            out[0] = None if d[0] is None else d[0] * bs * bs
        elif d[0] is not None:
            if d[0] % (bs * bs):
                raise _shape_error(op, f"batch is not divisible by block_size squared: "
                                       f"{d[0]} vs {bs * bs}")
            out[0] = d[0] // (bs * bs)
        if pv is not None:
            pv = np.asarray(pv).reshape(2, 2)
            for i in range(2):
                s = d[1 + i]
                if s is None:
                    continue
                if to_batch:
                    padded = s + int(pv[i].sum())
                    if padded % bs:
                        raise _shape_error(op, f"padded_shape[{i}]={padded} is not "
                                               f"divisible by block_size={bs}")
                    out[1 + i] = padded // bs
                else:
                    out[1 + i] = s * bs - int(pv[i].sum())
        return [TensorShape(out)]

    return shape_fn


ks.op(
    OpDef("SpaceToBatch", inputs=["input: T", "paddings: Tpaddings"], outputs=["output: T"],
          attrs=["T: type", "Tpaddings: {int32, int64} = DT_INT32", "block_size: int >= 2"],
          shape_fn=_square_shape(True), doc="SpaceToBatchND of a 4-D input, square blocks."),
    OpDef("BatchToSpace", inputs=["input: T", "crops: Tidx"], outputs=["output: T"],
          attrs=["T: type", "block_size: int >= 2", "Tidx: {int32, int64} = DT_INT32"],
          shape_fn=_square_shape(False), doc="BatchToSpaceND of a 4-D input, square blocks."),
)


@ks.kernel("SpaceToBatch", host_memory=("paddings",))
def _space_to_batch_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    bs = int(ctx.attrs["block_size"])
    host = host_reader(ctx)

    def space_to_batch(x: Any, pads: Any) -> Any:
        if x.ndim != 4:
            raise _invalid(f"SpaceToBatch: input rank should be 4 instead of {x.ndim}")
        b, p = _check_block("SpaceToBatch", x, np.array([bs, bs]), pads, "paddings", host)
        return space_to_batch_array(xp, x, b, p, "SpaceToBatch")

    return space_to_batch


@ks.kernel("BatchToSpace", host_memory=("crops",))
def _batch_to_space_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    bs = int(ctx.attrs["block_size"])
    host = host_reader(ctx)

    def batch_to_space(x: Any, crops: Any) -> Any:
        if x.ndim != 4:
            raise _invalid(f"BatchToSpace: input rank should be 4 instead of {x.ndim}")
        b, c = _check_block("BatchToSpace", x, np.array([bs, bs]), crops, "crops", host)
        return batch_to_space_array(xp, x, b, c, "BatchToSpace")

    return batch_to_space


@ks.gradient("SpaceToBatch")
def _space_to_batch_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("BatchToSpace", input=grad, crops=op.inputs[1],
                     block_size=op.node_attrs["block_size"]), None]


@ks.gradient("BatchToSpace")
def _batch_to_space_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("SpaceToBatch", input=grad, paddings=op.inputs[1],
                     block_size=op.node_attrs["block_size"]), None]


# =======================================================================================
# SpaceToDepth / DepthToSpace
# =======================================================================================
def _depth_shape(to_depth: bool) -> Callable[[Any], list[TensorShape]]:
    """Shape function of SpaceToDepth (``to_depth``) and DepthToSpace."""
    def shape_fn(op: Any) -> list[TensorShape]:
        fmt = op.node_attrs.get("data_format", "NHWC")
        bs = int(op.node_attrs["block_size"])
        if fmt == "NCHW_VECT_C":
            return [unknown_shape()]
        d = _with_rank(op, op.inputs[0].shape, 4)
        n, h, w, c = (d[0], d[2], d[3], d[1]) if fmt == "NCHW" else d
        if to_depth:
            for v in (h, w):
                if v is not None and v % bs:
                    raise _shape_error(op, f"Dimension size must be evenly divisible by "
                                           f"{bs} but is {v}")
            h = None if h is None else h // bs
            w = None if w is None else w // bs
            c = None if c is None else c * bs * bs
        else:
            if c is not None and c % (bs * bs):
                raise _shape_error(op, f"Dimension size must be evenly divisible by "
                                       f"{bs * bs} but is {c}")
            h = None if h is None else h * bs
            w = None if w is None else w * bs
            c = None if c is None else c // (bs * bs)
        return [TensorShape([n, c, h, w] if fmt == "NCHW" else [n, h, w, c])]

    return shape_fn


_DEPTH_ATTRS = ["T: type", "block_size: int >= 2",
                "data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'"]
ks.op(
    OpDef("SpaceToDepth", inputs=["input: T"], outputs=["output: T"], attrs=_DEPTH_ATTRS,
          shape_fn=_depth_shape(True),
          doc="Moves block_size x block_size spatial blocks into the depth dimension."),
    OpDef("DepthToSpace", inputs=["input: T"], outputs=["output: T"], attrs=_DEPTH_ATTRS,
          shape_fn=_depth_shape(False),
          doc="Moves depth into block_size x block_size spatial blocks."),
)


def _depth_kernel(to_depth: bool) -> Callable[[Any], Callable]:
    """Kernel factory of SpaceToDepth (``to_depth``) and DepthToSpace."""
    op_type = "SpaceToDepth" if to_depth else "DepthToSpace"

    def factory(ctx: Any) -> Callable:
        xp = ctx.xp
        bs = int(ctx.attrs["block_size"])
        fmt = ctx.attrs.get("data_format", "NHWC")
        if fmt not in ("NHWC", "NCHW"):
            raise errors.UnimplementedError(None, None,
                                            f"{op_type} does not support data_format {fmt}")
        nchw = fmt == "NCHW"

        def compute(x: Any) -> Any:
            if x.ndim != 4:
                raise _invalid(f"{op_type}: input rank should be 4 instead of {x.ndim}")
            if nchw:
                x = xp.transpose(x, (0, 2, 3, 1))
            n, h, w, c = x.shape
            if to_depth:
                if h % bs or w % bs:
                    raise _invalid(f"{op_type}: Image width {w} and height {h} should be "
                                   f"divisible by block_size: {bs}")
                y = x.reshape(n, h // bs, bs, w // bs, bs, c).transpose(0, 1, 3, 2, 4, 5)
                y = xp.ascontiguousarray(y).reshape(n, h // bs, w // bs, bs * bs * c)
            else:
                if c % (bs * bs):
                    raise _invalid(f"{op_type}: Input depth dimension {c} should be "
                                   f"divisible by: {bs * bs}")
                y = x.reshape(n, h, w, bs, bs, c // (bs * bs)).transpose(0, 1, 3, 2, 4, 5)
                y = xp.ascontiguousarray(y).reshape(n, h * bs, w * bs, c // (bs * bs))
            return xp.transpose(y, (0, 3, 1, 2)) if nchw else y

        return compute

    return factory


ks.kernel("SpaceToDepth")(_depth_kernel(True))
ks.kernel("DepthToSpace")(_depth_kernel(False))


def _depth_attrs(op: Any) -> dict[str, Any]:
    return {"block_size": op.node_attrs["block_size"],
            "data_format": op.node_attrs.get("data_format", "NHWC")}


@ks.gradient("SpaceToDepth")
def _space_to_depth_grad(op: Any, grad: Tensor) -> list[Any]:
    if op.node_attrs.get("data_format") == "NCHW_VECT_C":
        raise ValueError("Cannot compute SpaceToDepth gradient with NCHW_VECT_C.")
    return [apply_op("DepthToSpace", input=grad, **_depth_attrs(op))]


@ks.gradient("DepthToSpace")
def _depth_to_space_grad(op: Any, grad: Tensor) -> list[Any]:
    if op.node_attrs.get("data_format") == "NCHW_VECT_C":
        raise ValueError("Cannot compute DepthToSpace gradient with NCHW_VECT_C.")
    return [apply_op("SpaceToDepth", input=grad, **_depth_attrs(op))]


# =======================================================================================
# API
# =======================================================================================
@ks.api("space_to_batch_nd", "manip.space_to_batch_nd")
def space_to_batch_nd(input: Any, block_shape: Any, paddings: Any,
                      name: str | None = None) -> Tensor:
    """Pads the spatial dimensions and moves blocks of them into the batch
    (``tf.space_to_batch_nd``)."""
    return apply_op("SpaceToBatchND", name=name, input=input, block_shape=block_shape,
                    paddings=paddings)


@ks.api("batch_to_space_nd", "manip.batch_to_space_nd")
def batch_to_space_nd(input: Any, block_shape: Any, crops: Any,
                      name: str | None = None) -> Tensor:
    """The inverse of ``space_to_batch_nd`` (``tf.batch_to_space_nd``)."""
    return apply_op("BatchToSpaceND", name=name, input=input, block_shape=block_shape,
                    crops=crops)


def _with_rank_4(t: Tensor) -> Tensor:
    try:
        t.set_shape(t.shape.merge_with(TensorShape([None] * 4)) if t.shape.ndims is None
                    else t.shape.with_rank(4))
    except ValueError:
        raise ValueError(f"Shape {t.shape} must have rank 4") from None
    return t


def _block_size_lookup(block_size: Any, block_shape: Any) -> Any:
    if block_shape is not None:
        if block_size is not None:
            raise ValueError("Cannot specify both 'block_shape' and 'block_size'")
        return block_shape
    return block_size


@ks.api("space_to_batch", "nn.space_to_batch")
def space_to_batch(input: Any, paddings: Any, block_size: Any = None,
                   name: str | None = None, block_shape: Any = None) -> Tensor:
    """SpaceToBatchND of a 4-D input with a square ``block_size`` (``tf.space_to_batch``,
    TF 1.15 signature)."""
    block_size = _block_size_lookup(block_size, block_shape)
    result = space_to_batch_nd(input, paddings=paddings,
                               block_shape=np.array([block_size, block_size], np.int64),
                               name=name)
    return _with_rank_4(result)


@ks.api("batch_to_space")
def batch_to_space(input: Any, crops: Any, block_size: Any = None, name: str | None = None,
                   block_shape: Any = None) -> Tensor:
    """BatchToSpaceND of a 4-D input with a square ``block_size`` (``tf.batch_to_space``,
    TF 1.15 signature)."""
    block_size = _block_size_lookup(block_size, block_shape)
    result = batch_to_space_nd(input, crops=crops,
                               block_shape=np.array([block_size, block_size], np.int64),
                               name=name)
    return _with_rank_4(result)


@ks.api("space_to_depth", "nn.space_to_depth")
def space_to_depth(input: Any, block_size: int, name: str | None = None,
                   data_format: str = "NHWC") -> Tensor:
    """Moves spatial blocks into depth (``tf.space_to_depth``)."""
    return apply_op("SpaceToDepth", name=name, input=input, block_size=block_size,
                    data_format=data_format)


@ks.api("depth_to_space", "nn.depth_to_space")
def depth_to_space(input: Any, block_size: int, name: str | None = None,
                   data_format: str = "NHWC") -> Tensor:
    """Moves depth into spatial blocks (``tf.depth_to_space``)."""
    return apply_op("DepthToSpace", name=name, input=input, block_size=block_size,
                    data_format=data_format)


def _stack(rows: Sequence[Any], name: str) -> Any:
    """A [m, 2] int32 value: a numpy array when every entry is known, else a Pack."""
    if all(not isinstance(v, Tensor) for row in rows for v in row):
        return np.array([[int(v) for v in row] for row in rows], np.int32).reshape(-1, 2)
    packed = [apply_op("Pack", values=[convert_to_tensor(v, dtype=_dt.int32) for v in row],
                       axis=0) for row in rows]
    return apply_op("Pack", name=name, values=packed, axis=0)


@ks.api("required_space_to_batch_paddings")
def required_space_to_batch_paddings(input_shape: Any, block_shape: Any,
                                     base_paddings: Any = None,
                                     name: str | None = None) -> tuple[Any, Any]:
    """Paddings and crops that make ``input_shape`` (plus ``base_paddings``) divisible by
    ``block_shape`` (``tf.required_space_to_batch_paddings``).

    :raises ValueError: when ``block_shape`` is not a fully defined 1-D shape.
    """
    with name_scope(name, "required_space_to_batch_paddings", [input_shape, block_shape]):
        input_shape = convert_to_tensor(input_shape, dtype=_dt.int32, name="input_shape")
        block_shape = convert_to_tensor(block_shape, dtype=_dt.int32, name="block_shape")
        bsd = block_shape.shape.as_tuple()
        if bsd is None or len(bsd) != 1 or bsd[0] is None:
            raise ValueError(f"Shape {block_shape.shape} must be fully defined with rank 1")
        m = bsd[0]
        if m == 0:
            z = np.zeros([0, 2], np.int32)
            return convert_to_tensor(z), convert_to_tensor(z)
        if not input_shape.shape.is_compatible_with(TensorShape([m])):
            raise ValueError(f"Shapes {input_shape.shape} and ({m},) are incompatible")
        if base_paddings is not None:
            base_paddings = convert_to_tensor(base_paddings, dtype=_dt.int32,
                                              name="base_paddings")
            if not base_paddings.shape.is_compatible_with(TensorShape([m, 2])):
                raise ValueError(f"Shapes {base_paddings.shape} and ({m}, 2) are "
                                 "incompatible")
            cb = _static_value(base_paddings)
        else:
            cb = np.zeros([m, 2], np.int32)
            base_paddings = convert_to_tensor(cb)
        cbs, cis = _static_value(block_shape), _static_value(input_shape)
        if cbs is not None and cis is not None and cb is not None:
            bs_v, is_v, bp = (np.asarray(cbs).astype(np.int32), np.asarray(cis).astype(
                np.int32), np.asarray(cb).astype(np.int32).reshape(m, 2))
            pad_start, orig_end = bp[:, 0], bp[:, 1]
            full = is_v + pad_start + orig_end
            extra = (bs_v - full % bs_v) % bs_v
            pad_end = orig_end + extra
            rows_p = [[pad_start[i], pad_end[i]] for i in range(m)]
            rows_c = [[0, extra[i]] for i in range(m)]
        else:
            def part(t: Tensor, i: int, j: int | None = None) -> Tensor:
                begin = [i] if j is None else [i, j]
                size = [1] if j is None else [1, 1]
                s = apply_op("Slice", input=t, begin=np.array(begin, np.int32),
                             size=np.array(size, np.int32))
                return apply_op("Reshape", tensor=s, shape=np.array([], np.int32))

            rows_p, rows_c = [], []
            for i in range(m):
                ps, pe = part(base_paddings, i, 0), part(base_paddings, i, 1)
                b = part(block_shape, i)
                full = apply_op("AddV2", x=apply_op("AddV2", x=part(input_shape, i), y=ps),
                                y=pe)
                extra = apply_op("FloorMod", x=apply_op("Sub", x=b, y=apply_op(
                    "FloorMod", x=full, y=b)), y=b)
                rows_p.append([ps, apply_op("AddV2", x=pe, y=extra)])
                rows_c.append([np.int32(0), extra])
        paddings = _stack(rows_p, "paddings")
        crops = _stack(rows_c, "crops")
        if not isinstance(paddings, Tensor):
            paddings = convert_to_tensor(paddings, name="paddings")
            crops = convert_to_tensor(crops, name="crops")
        return paddings, crops

