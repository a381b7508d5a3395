"""Pooling beyond MaxPool/AvgPool: 3-D pooling, max pooling with argmax, morphological
dilation/erosion, fractional pooling, and the 1-D, 3-D, v2 and N-d ``tf.nn`` pooling
functions (TF 1.15 composites over MaxPool/AvgPool/MaxPool3D/AvgPool3D).

Ops with TF's names and signatures: ``MaxPool3D``, ``AvgPool3D``, ``MaxPool3DGrad``,
``MaxPool3DGradGrad``, ``AvgPool3DGrad``, ``MaxPoolWithArgmax``,
``MaxPoolGradWithArgmax``, ``MaxPoolGradGradWithArgmax``, ``Dilation2D`` (+ its two
backprop ops), ``FractionalMaxPool`` / ``FractionalAvgPool`` (+ their grads). Windows
cover spatial dimensions only; kernels are channels-last and vectorised over window
offsets (one strided view per offset).
"""
from __future__ import annotations

import collections
from typing import Any, Callable, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.graph import Tensor, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import ks
from ._common import invalid as _invalid, host_ints as _ilist, fmt_dims as _fmt
from ._common import host_reader
from .nn_grad import register_pool_gradients
from .array_ops import _shape_value
from .nn_conv_ops import im2col, window_keys
from .nn_ops import (_float_compute_dtype, _get_sequence, _shape_error,
                     _static_windowed_size, _windowed_size, _with_rank, max_pool2d)
from .nn_ops import avg_pool as _avg_pool2d_v1
from .nn_ops import max_pool as _max_pool2d_v1

__all__ = ["max_pool1d", "avg_pool1d", "max_pool3d", "avg_pool3d", "max_pool_v2",
           "avg_pool_v2", "pool", "max_pool_with_argmax", "dilation2d", "erosion2d",
           "fractional_max_pool", "fractional_avg_pool"]


# =======================================================================================
# the N-d pooling core (channels-last, windows over spatial dimensions)
# =======================================================================================
class PoolSpec:
    """The attrs of one pooling node: spatial ksize, strides, padding, layout."""

    def __init__(self, attrs: dict[str, Any], op_type: str, nsp: int, default_fmt: str):
        self.op_type, self.nsp = op_type, nsp
        fmt = attrs.get("data_format", default_fmt) or default_fmt
        self.cf = fmt.startswith("NC")
        ksize, strides = list(attrs["ksize"]), list(attrs["strides"])
        if len(ksize) != nsp + 2 or len(strides) != nsp + 2:
            raise _invalid(f"{op_type}: Sliding window ksize and strides fields must specify "
                           f"{nsp + 2} dimensions")
        if any(v <= 0 for v in ksize + strides):
            raise _invalid(f"{op_type}: ksize and strides must be positive")
        ci = 1 if self.cf else nsp + 1
        if ksize[0] != 1 or strides[0] != 1:
            raise errors.UnimplementedError(
                None, None, f"{op_type}: Pooling is not yet supported on the batch dimension.")
        if ksize[ci] != 1 or strides[ci] != 1:
            raise errors.UnimplementedError(
                None, None, f"{op_type}: Pooling is not yet supported on the depth dimension.")
        sp = range(2, nsp + 2) if self.cf else range(1, nsp + 1)
        self.ks = [ksize[i] for i in sp]
        self.st = [strides[i] for i in sp]
        self.padding = attrs["padding"]

    def to_last(self, xp: Any, a: Any) -> Any:
        return xp.transpose(a, (0,) + tuple(range(2, a.ndim)) + (1,)) if self.cf else a

    def from_last(self, xp: Any, a: Any) -> Any:
        return xp.transpose(a, (0, a.ndim - 1) + tuple(range(1, a.ndim - 1))) \
            if self.cf else a

    def sizes_last(self, s: list[int]) -> list[int]:
        return [s[0]] + s[2:] + [s[1]] if self.cf else s

    def geometry(self, in_sp: Sequence[int]) -> list[tuple[int, int, int]]:
        out = []
        for n, k, s in zip(in_sp, self.ks, self.st):
            try:
                out.append(_windowed_size(n, k, s, self.padding))
            except ValueError as e:
                raise _invalid(f"{self.op_type}: {e}") from None
        return out

    def out_shape(self, in_shape: Sequence[int], geo: list[tuple[int, int, int]]
                  ) -> list[int]:
        return [in_shape[0]] + [g[0] for g in geo] + [in_shape[-1]]

    def keys(self, geo: list[tuple[int, int, int]]) -> list[tuple[slice, ...]]:
        ks_ = window_keys(self.ks, [g[0] for g in geo], self.st, [1] * self.nsp)
        return [(slice(None),) + k + (slice(None),) for k in ks_]

    def padded(self, xp: Any, a: Any, geo: list[tuple[int, int, int]], fill: Any) -> Any:
        pads = [(0, 0)] + [(lo, hi) for _, lo, hi in geo] + [(0, 0)]
        if any(p != (0, 0) for p in pads):
            return xp.pad(a, pads, constant_values=fill)
        return a

    def crop(self, a: Any, in_shape: Sequence[int], geo: list[tuple[int, int, int]]) -> Any:
        return a[(slice(None),) + tuple(slice(lo, lo + n) for n, (_, lo, _) in
                                        zip(in_shape[1:-1], geo)) + (slice(None),)]

    def counts(self, xp: Any, in_shape: Sequence[int], geo: list[tuple[int, int, int]],
               cdt: Any) -> Any:
        """The number of valid input elements under each output's window."""
        cnt = None
        for ax, ((o, lo, _), n, k, s) in enumerate(zip(geo, in_shape[1:-1], self.ks,
                                                        self.st)):
            start = np.arange(o) * s - lo
            c = np.minimum(start + k, n) - np.maximum(start, 0)
            shape = [1] * (self.nsp + 2)
            shape[1 + ax] = o
            c = c.reshape(shape)
            cnt = c if cnt is None else cnt * c
        return xp.asarray(cnt.astype(cdt))


def _lowest(dt: _dt.DType) -> Any:
    return -np.inf if dt.is_floating else np.iinfo(dt.np).min


def pool_forward(xp: Any, spec: PoolSpec, x: Any, mode: str, dt: _dt.DType) -> Any:
    """Max or average pooling of channels-last ``x``."""
    geo = spec.geometry(x.shape[1:-1])
    out_shape = spec.out_shape(x.shape, geo)
    cdt = dt.np if mode == "max" else _float_compute_dtype(dt)
    if 0 in out_shape:
        return xp.zeros(out_shape, dtype=dt.np)
    fill = _lowest(dt) if mode == "max" else 0
    xpd = spec.padded(xp, x.astype(cdt, copy=False), geo, fill)
    acc = None
    for key in spec.keys(geo):
        win = xpd[key]
        if acc is None:
            acc = win.copy()
        elif mode == "max":
            xp.maximum(acc, win, out=acc)
        else:
            xp.add(acc, win, out=acc)
    if mode == "avg":
        acc = acc / spec.counts(xp, x.shape, geo, cdt)
    return acc.astype(dt.np, copy=False)


def _first_max_mask_iter(xp: Any, spec: PoolSpec, x: Any, y: Any,
                         geo: list[tuple[int, int, int]]) -> Any:
    """Yields (key, mask) per window offset: mask marks the outputs whose first maximum
    (row-major in the window) sits at that offset."""
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    xpd = spec.padded(xp, x, geo, fill)
    found = xp.zeros(y.shape, dtype=bool)
    for key in spec.keys(geo):
        hit = (xpd[key] == y) & ~found
        found |= hit
        yield key, hit


# =======================================================================================
# MaxPool3D, AvgPool3D and their gradients
# =======================================================================================
def _pool_nd_shape(nsp: int, default_fmt: str) -> Callable[[Any], list[TensorShape]]:
    """Shape function of N-d pooling: spatial dims windowed, batch and depth kept, as TF's."""
    def shape_fn(op: Any) -> list[TensorShape]:
        a = op.node_attrs
        ksize, strides = list(a["ksize"]), list(a["strides"])
        if len(ksize) != nsp + 2 or len(strides) != nsp + 2:
            raise _shape_error(op, f"{op.type} requires the ksize and stride attributes to "
                                   f"contain {nsp + 2} values, but got: {len(ksize)} and "
                                   f"{len(strides)}")
        if any(v <= 0 for v in ksize + strides):
            raise _shape_error(op, f"{op.type}: ksize and strides must be positive")
        d = _with_rank(op, op.inputs[0].shape, nsp + 2)
        fmt = a.get("data_format", default_fmt) or default_fmt
        sp = range(2, nsp + 2) if fmt.startswith("NC") else range(1, nsp + 1)
        # as TF's shape functions: batch and depth are kept
        out = [None if d[i] is None else d[i] if i not in sp else
               _static_windowed_size(op, d[i], ksize[i], strides[i], a["padding"])
               for i in range(nsp + 2)]
        return [TensorShape(out)]

    return shape_fn


def _like(index: int, rank: int) -> Callable[[Any], list[TensorShape]]:
    def shape_fn(op: Any) -> list[TensorShape]:
        _with_rank(op, op.inputs[index].shape, rank)
        s = op.inputs[index].shape
        return [s if s.ndims is not None else unknown_shape(rank)]

    return shape_fn


def _sizes_shape(index: int, rank: int) -> Callable[[Any], list[TensorShape]]:
    def shape_fn(op: Any) -> list[TensorShape]:
        s = _shape_value(op.inputs[index], op)
        if s.ndims is not None and s.ndims != rank:
            raise _shape_error(op, f"Shape must be rank {rank} but is rank {s.ndims}")
        return [s if s.ndims is not None else unknown_shape(rank)]

    return shape_fn


_P3 = ["ksize: list(int) >= 5", "strides: list(int) >= 5", "padding: {'SAME', 'VALID'}",
       "data_format: {'NDHWC', 'NCDHW'} = 'NDHWC'"]

ks.op(
    OpDef("MaxPool3D", inputs=["input: T"], outputs=["output: T"],
          attrs=_P3 + ["T: {half, bfloat16, float}"], shape_fn=_pool_nd_shape(3, "NDHWC"),
          doc="3-D max pooling."),
    OpDef("AvgPool3D", inputs=["input: T"], outputs=["output: T"],
          attrs=_P3 + ["T: {half, bfloat16, float, double}"],
          shape_fn=_pool_nd_shape(3, "NDHWC"),
          doc="3-D average pooling (SAME: over the valid elements only)."),
    OpDef("MaxPool3DGrad", inputs=["orig_input: TInput", "orig_output: TInput", "grad: T"],
          outputs=["output: T"],
          attrs=_P3 + ["T: {half, bfloat16, float} = DT_FLOAT",
                       "TInput: {half, bfloat16, float} = DT_FLOAT"],
          shape_fn=_like(0, 5), doc="The gradient of MaxPool3D."),
    OpDef("MaxPool3DGradGrad", inputs=["orig_input: T", "orig_output: T", "grad: T"],
          outputs=["output: T"], attrs=_P3 + ["T: {half, bfloat16, float}"],
          shape_fn=_like(1, 5), doc="The gradient of MaxPool3DGrad."),
    OpDef("AvgPool3DGrad", inputs=["orig_input_shape: int32", "grad: T"],
          outputs=["output: T"], attrs=_P3 + ["T: {half, bfloat16, float, double}"],
          shape_fn=_sizes_shape(0, 5), doc="The gradient of AvgPool3D."),
)


def _no_double(op_type: str, dt: _dt.DType) -> None:
    """TF registers the 3-D average pooling kernels for half and float only (its OpDef
    allows double, its CPU kernels do not)."""
    if dt == _dt.float64:
        raise _invalid(f"No OpKernel was registered to support Op '{op_type}' with these "
                       "attrs: T=DT_DOUBLE (registered: T in [DT_HALF, DT_BFLOAT16, "
                       "DT_FLOAT])")


@ks.kernel("MaxPool3D", expensive=True)
def _max_pool3d_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    spec = PoolSpec(ctx.attrs, "MaxPool3D", 3, "NDHWC")
    dt = ctx.output_dtypes[0]

    def max_pool3d(x: Any) -> Any:
        if x.ndim != 5:
            raise _invalid(f"MaxPool3D: tensor_in must be 5-dimensional: {_fmt(x.shape)}")
        return spec.from_last(xp, pool_forward(xp, spec, spec.to_last(xp, x), "max", dt))

    return max_pool3d


@ks.kernel("AvgPool3D", expensive=True)
def _avg_pool3d_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    spec = PoolSpec(ctx.attrs, "AvgPool3D", 3, "NDHWC")
    dt = ctx.output_dtypes[0]
    _no_double("AvgPool3D", dt)

    def avg_pool3d(x: Any) -> Any:
        if x.ndim != 5:
            raise _invalid(f"AvgPool3D: tensor_in must be 5-dimensional: {_fmt(x.shape)}")
        return spec.from_last(xp, pool_forward(xp, spec, spec.to_last(xp, x), "avg", dt))

    return avg_pool3d


def _check_out(spec: PoolSpec, what: str, a: Any, want: list[int]) -> None:
    if list(a.shape) != want:
        raise _invalid(f"{spec.op_type}: Expected {what} shape {_fmt(want)} (channels "
                       f"last), got {_fmt(a.shape)}")


@ks.kernel("MaxPool3DGrad", expensive=True)
def _max_pool3d_grad_kernel(ctx: Any) -> Callable:
    """MaxPool3DGrad: each output gradient to the first maximum of its window."""
    xp = ctx.xp
    spec = PoolSpec(ctx.attrs, "MaxPool3DGrad", 3, "NDHWC")
    out_dt = ctx.output_dtypes[0].np
    cdt = _float_compute_dtype(ctx.output_dtypes[0])

    def max_pool3d_grad(x: Any, y: Any, dy: Any) -> Any:
        for what, a in (("orig_input", x), ("orig_output", y), ("grad", dy)):
            if a.ndim != 5:
                raise _invalid(f"MaxPool3DGrad: {what} must be 5-dimensional")
        x, y, dy = spec.to_last(xp, x), spec.to_last(xp, y), spec.to_last(xp, dy)
        geo = spec.geometry(x.shape[1:-1])
        want = spec.out_shape(x.shape, geo)
        _check_out(spec, "orig_output", y, want)
        _check_out(spec, "grad", dy, want)
        if x.size == 0 or dy.size == 0:
            return spec.from_last(xp, xp.zeros(x.shape, dtype=out_dt))
        acc = xp.zeros([x.shape[0]] + [n + lo + hi for n, (_, lo, hi) in
                                       zip(x.shape[1:-1], geo)] + [x.shape[-1]], dtype=cdt)
        d = dy.astype(cdt, copy=False)
        zero = xp.zeros((), dtype=cdt)
        for key, hit in _first_max_mask_iter(xp, spec, x, y, geo):
            acc[key] += xp.where(hit, d, zero)
        return spec.from_last(xp, spec.crop(acc, x.shape, geo).astype(out_dt, copy=False))

    return max_pool3d_grad


@ks.kernel("MaxPool3DGradGrad", expensive=True)
def _max_pool3d_grad_grad_kernel(ctx: Any) -> Callable:
    """MaxPool3DGradGrad: the incoming gradient picked at each window's first maximum."""
    xp = ctx.xp
    spec = PoolSpec(ctx.attrs, "MaxPool3DGradGrad", 3, "NDHWC")
    out_dt = ctx.output_dtypes[0].np

    def max_pool3d_grad_grad(x: Any, y: Any, g: Any) -> Any:
        x, y, g = spec.to_last(xp, x), spec.to_last(xp, y), spec.to_last(xp, g)
        geo = spec.geometry(x.shape[1:-1])
        _check_out(spec, "orig_output", y, spec.out_shape(x.shape, geo))
        if list(g.shape) != list(x.shape):
            raise _invalid("MaxPool3DGradGrad: grad must have the shape of orig_input")
        out = xp.zeros(y.shape, dtype=out_dt)
        if out.size == 0:
            return spec.from_last(xp, out)
        gp = spec.padded(xp, g, geo, 0)
        for key, hit in _first_max_mask_iter(xp, spec, x, y, geo):
            out = xp.where(hit, gp[key], out)
        return spec.from_last(xp, out.astype(out_dt, copy=False))

    return max_pool3d_grad_grad


@ks.kernel("AvgPool3DGrad", expensive=True, host_memory=("orig_input_shape",))
def _avg_pool3d_grad_kernel(ctx: Any) -> Callable:
    """AvgPool3DGrad: each output gradient spread over the valid elements of its window."""
    xp = ctx.xp
    spec = PoolSpec(ctx.attrs, "AvgPool3DGrad", 3, "NDHWC")
    _no_double("AvgPool3DGrad", ctx.output_dtypes[0])
    out_dt = ctx.output_dtypes[0].np
    cdt = _float_compute_dtype(ctx.output_dtypes[0])
    host = host_reader(ctx)

    def avg_pool3d_grad(shape: Any, dy: Any) -> Any:
        shape = host(shape)
        if np.ndim(shape) != 1 or np.size(shape) != 5:
            raise _invalid("AvgPool3DGrad: orig_input_shape must be 1-dimensional and 5 "
                           "elements")
        s = spec.sizes_last(_ilist(shape, np.asarray))
        dy = spec.to_last(xp, dy)
        geo = spec.geometry(s[1:-1])
        _check_out(spec, "grad", dy, spec.out_shape(s, geo))
        if dy.size == 0 or int(np.prod(s)) == 0:
            return spec.from_last(xp, xp.zeros(s, dtype=out_dt))
        g = dy.astype(cdt, copy=False) / spec.counts(xp, s, geo, cdt)
        acc = xp.zeros([s[0]] + [n + lo + hi for n, (_, lo, hi) in zip(s[1:-1], geo)] +
                       [s[-1]], dtype=cdt)
        for key in spec.keys(geo):
            acc[key] += g
        return spec.from_last(xp, spec.crop(acc, s, geo).astype(out_dt, copy=False))

    return avg_pool3d_grad


register_pool_gradients({"max": "MaxPool3D", "max_grad": "MaxPool3DGrad",
                         "max_grad_grad": "MaxPool3DGradGrad", "avg": "AvgPool3D",
                         "avg_grad": "AvgPool3DGrad"}, "NDHWC", "input")


# =======================================================================================
# MaxPoolWithArgmax
# =======================================================================================
def _argmax_shape(op: Any) -> list[TensorShape]:
    s = _pool_nd_shape(2, "NHWC")(op)[0]
    return [s, s]


_ARGMAX_ATTRS = ["ksize: list(int) >= 4", "strides: list(int) >= 4",
                 "padding: {'SAME', 'VALID'}", "include_batch_in_index: bool = false"]
_REALT = ("T: {half, bfloat16, float, double, int8, int16, int32, int64, uint8, uint16, "
          "uint32, uint64}")

ks.op(
    OpDef("MaxPoolWithArgmax", inputs=["input: T"], outputs=["output: T", "argmax: Targmax"],
          attrs=_ARGMAX_ATTRS + ["Targmax: {int32, int64} = DT_INT64", _REALT],
          shape_fn=_argmax_shape,
          doc="Max pooling that also returns the flattened index of each maximum."),
    OpDef("MaxPoolGradWithArgmax", inputs=["input: T", "grad: T", "argmax: Targmax"],
          outputs=["output: T"], attrs=_ARGMAX_ATTRS + ["Targmax: {int32, int64}", _REALT],
          shape_fn=_like(0, 4), doc="The gradient of MaxPoolWithArgmax."),
    OpDef("MaxPoolGradGradWithArgmax", inputs=["input: T", "grad: T", "argmax: Targmax"],
          outputs=["output: T"], attrs=_ARGMAX_ATTRS + ["Targmax: {int32, int64}", _REALT],
          shape_fn=_like(2, 4), doc="The gradient of MaxPoolGradWithArgmax."),
)


@ks.kernel("MaxPoolWithArgmax", expensive=True)
def _max_pool_with_argmax_kernel(ctx: Any) -> Callable:
    """MaxPoolWithArgmax: the first maximum (row-major) and TF's flattened index of it."""
    xp = ctx.xp
    spec = PoolSpec(ctx.attrs, "MaxPoolWithArgmax", 2, "NHWC")
    dt = ctx.output_dtypes[0]
    arg_dt = ctx.output_dtypes[1].np
    with_batch = bool(ctx.attrs.get("include_batch_in_index", False))

    def max_pool_with_argmax(x: Any) -> Any:
        if x.ndim != 4:
            raise _invalid(f"MaxPoolWithArgmax: tensor_in must be 4-dimensional: "
                           f"{_fmt(x.shape)}")
        n, h, w, c = x.shape
        geo = spec.geometry((h, w))
        out_shape = spec.out_shape(x.shape, geo)
        if 0 in out_shape:
            return xp.zeros(out_shape, dt.np), xp.zeros(out_shape, arg_dt)
        xpd = spec.padded(xp, x, geo, _lowest(dt))
        (oh, pt, _), (ow, pl, _) = geo
        best = arg = None
        rows = xp.arange(oh).reshape(1, oh, 1, 1) * spec.st[0] - pt
        cols = xp.arange(ow).reshape(1, 1, ow, 1) * spec.st[1] - pl
        ch = xp.arange(c).reshape(1, 1, 1, c)
        base = xp.arange(n).reshape(n, 1, 1, 1) * (h * w * c) if with_batch else 0
        offsets = [(i, j) for i in range(spec.ks[0]) for j in range(spec.ks[1])]
        for (i, j), key in zip(offsets, spec.keys(geo)):
            win = xpd[key]
            r, q = rows + i, cols + j
            valid = (r >= 0) & (r < h) & (q >= 0) & (q < w)
            idx = (r * w + q) * c + ch + base
            if best is None:
                best = xp.where(valid, win, _lowest(dt)).astype(dt.np)
                arg = xp.broadcast_to(xp.where(valid, idx, -1), best.shape).copy()
                continue
            take = valid & ((win > best) | (arg < 0))
            best = xp.where(take, win, best)
            arg = xp.where(take, idx, arg)
        return best.astype(dt.np, copy=False), arg.astype(arg_dt)

    return max_pool_with_argmax


def _flat_index(xp: Any, arg: Any, n: int, per_image: int, with_batch: bool) -> Any:
    a = arg.astype(np.int64)
    if not with_batch:
        a = a + xp.arange(n, dtype=np.int64).reshape((n,) + (1,) * (a.ndim - 1)) * per_image
    return a


@ks.kernel("MaxPoolGradWithArgmax", expensive=True)
def _max_pool_grad_with_argmax_kernel(ctx: Any) -> Callable:
    """MaxPoolGradWithArgmax: gradients scatter-added at the argmax positions."""
    xp = ctx.xp
    out_dt = ctx.output_dtypes[0].np
    with_batch = bool(ctx.attrs.get("include_batch_in_index", False))

    def max_pool_grad_with_argmax(x: Any, grad: Any, arg: Any) -> Any:
        if grad.shape != arg.shape:
            raise _invalid(f"MaxPoolGradWithArgmax: grad and argmax must have the same "
                           f"shape: {_fmt(grad.shape)} vs {_fmt(arg.shape)}")
        n = x.shape[0]
        size = int(np.prod(x.shape))
        flat = _flat_index(xp, arg, n, size // max(n, 1), with_batch).reshape(-1)
        if flat.size and (int(flat.min()) < 0 or int(flat.max()) >= size):
            raise _invalid("MaxPoolGradWithArgmax: Invalid argmax index: out of the input's "
                           "range")
        acc = xp.bincount(flat, weights=grad.reshape(-1).astype(np.float64),
                          minlength=size) if flat.size else xp.zeros(size)
        return acc.reshape(x.shape).astype(out_dt)

    return max_pool_grad_with_argmax


@ks.kernel("MaxPoolGradGradWithArgmax", expensive=True)
def _max_pool_grad_grad_with_argmax_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    with_batch = bool(ctx.attrs.get("include_batch_in_index", False))

    def max_pool_grad_grad_with_argmax(x: Any, grad: Any, arg: Any) -> Any:
        if grad.shape != x.shape:
            raise _invalid("MaxPoolGradGradWithArgmax: grad must have the input's shape")
        n = x.shape[0]
        size = int(np.prod(x.shape))
        flat = _flat_index(xp, arg, n, size // max(n, 1), with_batch)
        if flat.size and (int(flat.min()) < 0 or int(flat.max()) >= size):
            raise _invalid("MaxPoolGradGradWithArgmax: Invalid argmax index")
        return grad.reshape(-1)[flat]

    return max_pool_grad_grad_with_argmax


def _argmax_attrs(op: Any) -> dict[str, Any]:
    a = op.node_attrs
    return {"ksize": list(a["ksize"]), "strides": list(a["strides"]),
            "padding": a["padding"],
            "include_batch_in_index": a.get("include_batch_in_index", False)}


@ks.gradient("MaxPoolWithArgmax")
def _max_pool_with_argmax_grad(op: Any, grad: Tensor, unused: Any) -> list[Any]:
    return [apply_op("MaxPoolGradWithArgmax", input=op.inputs[0], grad=grad,
                     argmax=op.outputs[1], **_argmax_attrs(op))]


@ks.gradient("MaxPoolGradWithArgmax")
def _max_pool_grad_with_argmax_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("ZerosLike", x=op.inputs[0]),
            apply_op("MaxPoolGradGradWithArgmax", input=op.inputs[0], grad=grad,
                     argmax=op.inputs[2], **_argmax_attrs(op)), None]


@ks.gradient("MaxPoolGradGradWithArgmax")
def _max_pool_grad_grad_with_argmax_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("ZerosLike", x=op.inputs[0]),
            apply_op("MaxPoolGradWithArgmax", input=op.inputs[0], grad=grad,
                     argmax=op.inputs[2], **_argmax_attrs(op)), None]


# =======================================================================================
# pooling API
# =======================================================================================
def _1d(data_format: str | None) -> tuple[str, int, int]:
    if data_format is None:
        data_format = "NWC"
    ci = 1 if data_format.startswith("NC") else 2
    return ("NHWC" if data_format == "NWC" else "NCHW"), (1 if data_format == "NWC" else 2), ci


def _pool1d(op_type: str, scope_name: str, input: Any, ksize: Any, strides: Any,
            padding: str, data_format: str | None, name: str | None, key: str) -> Tensor:
    with name_scope(name, scope_name, [input]) as scope:
        fmt, dim, ci = _1d(data_format)
        ksize = [1] + _get_sequence(ksize, 1, ci, "ksize")
        strides = [1] + _get_sequence(strides, 1, ci, "strides")
        x = apply_op("ExpandDims", input=input, dim=np.int32(dim))
        r = apply_op(op_type, name=scope, ksize=ksize, strides=strides, padding=padding,
                     data_format=fmt, **{key: x})
        return apply_op("Squeeze", input=r, squeeze_dims=[dim])


@ks.api("nn.max_pool1d")
def max_pool1d(input: Any, ksize: Any, strides: Any, padding: str, data_format: str = "NWC",
               name: str | None = None) -> Tensor:
    """1-D max pooling (``tf.nn.max_pool1d``): ExpandDims + MaxPool + Squeeze."""
    return _pool1d("MaxPool", "MaxPool1d", input, ksize, strides, padding, data_format, name,
                   "input")


@ks.api("nn.avg_pool1d")
def avg_pool1d(input: Any, ksize: Any, strides: Any, padding: str, data_format: str = "NWC",
               name: str | None = None) -> Tensor:
    """1-D average pooling (``tf.nn.avg_pool1d``): ExpandDims + AvgPool + Squeeze."""
    return _pool1d("AvgPool", "AvgPool1D", input, ksize, strides, padding, data_format, name,
                   "value")


def _pool3d(op_type: str, input: Any, ksize: Any, strides: Any, padding: str,
            data_format: str | None, name: str | None) -> Tensor:
    with name_scope(name, op_type, [input]) as scope:
        if data_format is None:
            data_format = "NDHWC"
        ci = 1 if data_format.startswith("NC") else 4
        return apply_op(op_type, name=scope, input=input,
                        ksize=_get_sequence(ksize, 3, ci, "ksize"),
                        strides=_get_sequence(strides, 3, ci, "strides"), padding=padding,
                        data_format=data_format)


@ks.api("nn.max_pool3d")
def max_pool3d(input: Any, ksize: Any, strides: Any, padding: str,
               data_format: str = "NDHWC", name: str | None = None) -> Tensor:
    """3-D max pooling (``tf.nn.max_pool3d``)."""
    return _pool3d("MaxPool3D", input, ksize, strides, padding, data_format, name)


@ks.api("nn.avg_pool3d")
def avg_pool3d(input: Any, ksize: Any, strides: Any, padding: str,
               data_format: str = "NDHWC", name: str | None = None) -> Tensor:
    """3-D average pooling (``tf.nn.avg_pool3d``)."""
    return _pool3d("AvgPool3D", input, ksize, strides, padding, data_format, name)


def _pool_rank(input: Any, data_format: str | None) -> int:
    r = input.shape.ndims if isinstance(input, Tensor) else np.ndim(input)
    if r is not None:
        n = r - 2
    elif data_format is not None:
        n = len(data_format) - 2
    else:
        raise ValueError("The input must have a rank or a data format must be given.")
    if not 1 <= n <= 3:
        raise ValueError(f"Input tensor must be of rank 3, 4 or 5 but was {n + 2}.")
    return n


@ks.api("nn.max_pool_v2")
def max_pool_v2(input: Any, ksize: Any, strides: Any, padding: str,
                data_format: str | None = None, name: str | None = None) -> Tensor:
    """Max pooling of a 3-D, 4-D or 5-D input (``tf.nn.max_pool_v2``, TF2's
    ``tf.nn.max_pool``)."""
    input = convert_to_tensor(input) if not isinstance(input, Tensor) else input
    n = _pool_rank(input, data_format)
    ci = n + 1 if data_format is None else (1 if data_format.startswith("NC") else n + 1)
    ksize = _get_sequence(ksize, n, ci, "ksize")
    strides = _get_sequence(strides, n, ci, "strides")
    if n == 1:
        return max_pool1d(input, ksize, strides, padding, data_format or "NWC", name)
    if n == 2:
        return max_pool2d(input, ksize, strides, padding, data_format or "NHWC", name)
    return apply_op("MaxPool3D", name=name, input=input, ksize=ksize, strides=strides,
                    padding=padding, data_format=data_format or "NDHWC")


@ks.api("nn.avg_pool_v2")
def avg_pool_v2(input: Any, ksize: Any, strides: Any, padding: str,
                data_format: str | None = None, name: str | None = None) -> Tensor:
    """Average pooling of a 3-D, 4-D or 5-D input (``tf.nn.avg_pool_v2``, TF2's
    ``tf.nn.avg_pool``)."""
    input = convert_to_tensor(input) if not isinstance(input, Tensor) else input
    n = _pool_rank(input, data_format)
    ci = n + 1 if data_format is None else (1 if data_format.startswith("NC") else n + 1)
    ksize = _get_sequence(ksize, n, ci, "ksize")
    strides = _get_sequence(strides, n, ci, "strides")
    if n == 1:
        return avg_pool1d(input, ksize, strides, padding, data_format or "NWC", name)
    op_type = "AvgPool" if n == 2 else "AvgPool3D"
    key = "value" if n == 2 else "input"
    return apply_op(op_type, name=name, ksize=ksize, strides=strides, padding=padding,
                    data_format=data_format or ("NHWC" if n == 2 else "NDHWC"),
                    **{key: input})


@ks.api("nn.pool")
def pool(input: Any, window_shape: Sequence[int], pooling_type: str, padding: str,
         dilation_rate: Any = None, strides: Any = None, name: str | None = None,
         data_format: str | None = None, dilations: Any = None) -> Tensor:
    """N-d max or average pooling with optional dilation (``tf.nn.pool``, TF1
    signature): max_pool / avg_pool / max_pool3d / avg_pool3d, through space-to-batch
    when dilated, as TF builds it.

    :raises ValueError: for a bad window rank or pooling type, SAME padding with
        dilation, strides larger than the window, or strides with dilation.
    """
    from .nn_conv_ops import with_space_to_batch
    from .nn_ops import _deprecated_lookup

    dilation_rate = _deprecated_lookup("dilations", dilations, "dilation_rate",
                                       dilation_rate)
    with name_scope(name, f"{pooling_type.lower()}_pool", [input]) as scope:
        input = convert_to_tensor(input, name="input")
        nsp = len(window_shape)
        if not 1 <= nsp <= 3:
            raise ValueError(f"It is required that 1 <= num_spatial_dims <= 3, got {nsp}.")
        r = input.shape.ndims
        if r is not None and r != nsp + 2:
            raise ValueError(f"Shape {input.shape} must have rank {nsp + 2}")
        dil = np.array([1] * nsp if dilation_rate is None else list(dilation_rate), np.int32)
        st = np.array([1] * nsp if strides is None else list(strides), np.int32)
        if len(dil) != nsp:
            raise ValueError(f"len(dilation_rate)={len(dil)} but should be {nsp}")
        if np.any(dil < 1):
            raise ValueError("all values of dilation_rate must be positive")
        if len(st) != nsp:
            raise ValueError(f"len(strides)={len(st)} but should be {nsp}")
        if np.any(st < 1):
            raise ValueError("all values of strides must be positive")
        if np.any(st > 1) and np.any(dil > 1):
            raise ValueError("strides > 1 not supported in conjunction with dilation_rate "
                             "> 1")
        if padding == "SAME" and np.any(dil > 1):
            raise ValueError("pooling with SAME padding is not implemented for "
                             "dilation_rate > 1")
        if np.any(st > np.array(window_shape)):
            raise ValueError("strides > window_shape not supported due to inconsistency "
                             "between CPU and GPU implementations")
        if pooling_type not in ("MAX", "AVG"):
            raise ValueError(f"{nsp}-D {pooling_type} pooling is not supported.")
        cf = data_format is not None and data_format.startswith("NC")
        win = ([1, 1] + list(window_shape)) if cf else ([1] + list(window_shape) + [1])
        stv = ([1, 1] + [int(v) for v in st]) if cf else ([1] + [int(v) for v in st] + [1])
        spatial = list(range(2, nsp + 2)) if cf else list(range(1, nsp + 1))
        fmt_kw: dict[str, Any]
        if nsp == 1:
            if data_format is None or data_format == "NWC":
                fmt_kw = {"data_format": "NHWC"}
            elif data_format == "NCW":
                fmt_kw = {"data_format": "NCHW"}
            else:
                raise ValueError("data_format must be either \"NWC\" or \"NCW\".")
            win, stv = [1] + win, [1] + stv
        else:
            fmt_kw = {"data_format": data_format} if data_format is not None else {}

        def op(conv: Any, _: Any, pad: Any) -> Tensor:
            if nsp == 1:
                conv = apply_op("ExpandDims", input=conv, dim=np.int32(spatial[0]))
            if nsp == 3:
                fn = max_pool3d if pooling_type == "MAX" else avg_pool3d
            else:
                fn = _max_pool2d_v1 if pooling_type == "MAX" else _avg_pool2d_v1
            result = fn(conv, win, stv, pad, name=scope, **fmt_kw)
            if nsp == 1:
                result = apply_op("Squeeze", input=result, squeeze_dims=[spatial[0]])
            return result

        return with_space_to_batch(input, dil, padding, op, filter_shape=list(window_shape),
                                   spatial_dims=spatial)


#: the result of ``max_pool_with_argmax``, as TF's generated op wrapper returns it
_MaxPoolWithArgmax = collections.namedtuple("MaxPoolWithArgmax", ["output", "argmax"])


@ks.api("nn.max_pool_with_argmax")
def max_pool_with_argmax(input: Any, ksize: Any, strides: Any, padding: str,
                         data_format: str = "NHWC", Targmax: Any = None,
                         name: str | None = None, output_dtype: Any = None,
                         include_batch_in_index: bool = False) -> Any:
    """Max pooling and the flattened index of each maximum
    (``tf.nn.max_pool_with_argmax``, TF1 signature): ``(y * width + x) * channels + c``,
    plus ``b * height * width * channels`` with ``include_batch_in_index``.

    :raises ValueError: for a data format other than NHWC.
    """
    from .nn_ops import _deprecated_lookup

    if data_format != "NHWC":
        raise ValueError("Data formats other than 'NHWC' are not yet supported")
    Targmax = _deprecated_lookup("output_dtype", output_dtype, "Targmax", Targmax)
    if Targmax is None:
        Targmax = _dt.int64
    out, arg = apply_op("MaxPoolWithArgmax", name=name, input=input, ksize=list(ksize),
                        strides=list(strides), padding=padding,
                        Targmax=_dt.as_dtype(Targmax),
                        include_batch_in_index=include_batch_in_index)
    return _MaxPoolWithArgmax(out, arg)


# =======================================================================================
# Dilation2D (morphological), erosion2d
# =======================================================================================
def _dilation_shape(op: Any) -> list[TensorShape]:
    a = op.node_attrs
    strides, rates = list(a["strides"]), list(a["rates"])
    if len(strides) != 4 or len(rates) != 4:
        raise _shape_error(op, "Dilation2D requires the strides and rates attributes to "
                               "contain 4 values")
    d = _with_rank(op, op.inputs[0].shape, 4)
    f = _with_rank(op, op.inputs[1].shape, 3)
    if d[3] is not None and f[2] is not None and d[3] != f[2]:
        raise _shape_error(op, f"Dimensions must be equal, but are {d[3]} and {f[2]}")
    out: list[int | None] = [d[0], None, None, d[3] if d[3] is not None else f[2]]
    for i in (1, 2):
        if d[i] is not None and f[i - 1] is not None:
            out[i] = _static_windowed_size(op, d[i], (f[i - 1] - 1) * rates[i] + 1,
                                           strides[i], a["padding"])
    return [TensorShape(out)]


_DIL_ATTRS = ["T: {half, bfloat16, float, double, int8, int16, int32, int64, uint8, uint16, "
              "uint32, uint64}", "strides: list(int) >= 4", "rates: list(int) >= 4",
              "padding: {'SAME', 'VALID'}"]
ks.op(
    OpDef("Dilation2D", inputs=["input: T", "filter: T"], outputs=["output: T"],
          attrs=_DIL_ATTRS, shape_fn=_dilation_shape,
          doc="Grayscale morphological dilation: max over the window of input + filter."),
    OpDef("Dilation2DBackpropInput", inputs=["input: T", "filter: T", "out_backprop: T"],
          outputs=["in_backprop: T"], attrs=_DIL_ATTRS, shape_fn=_like(0, 4),
          doc="The gradient of Dilation2D with respect to its input."),
    OpDef("Dilation2DBackpropFilter", inputs=["input: T", "filter: T", "out_backprop: T"],
          outputs=["filter_backprop: T"], attrs=_DIL_ATTRS, shape_fn=_like(1, 3),
          doc="The gradient of Dilation2D with respect to its filter."),
)


class _DilationSpec:
    def __init__(self, attrs: dict[str, Any], op_type: str):
        strides, rates = list(attrs["strides"]), list(attrs["rates"])
        if len(strides) != 4 or len(rates) != 4:
            raise _invalid(f"{op_type}: Sliding window strides and rates fields must specify "
                           "4 dimensions")
        if strides[0] != 1 or strides[3] != 1 or rates[0] != 1 or rates[3] != 1:
            raise _invalid(f"{op_type}: Current implementation does not yet support strides "
                           "or rates in the batch and depth dimensions.")
        self.st, self.rt = strides[1:3], rates[1:3]
        self.padding = attrs["padding"]
        self.op_type = op_type

    def patches(self, xp: Any, x: Any, w: Any) -> tuple[Any, list[tuple[int, int, int]]]:
        """(input + filter) patches [N, oh, ow, K, C] (padding: lowest value)."""
        if x.ndim != 4 or w.ndim != 3:
            raise _invalid(f"{self.op_type}: input must be 4-D and filter 3-D, got "
                           f"{_fmt(x.shape)} and {_fmt(w.shape)}")
        if x.shape[3] != w.shape[2]:
            raise _invalid(f"{self.op_type}: input and filter must have the same depth: "
                           f"{x.shape[3]} vs {w.shape[2]}")
        geo = []
        for n, k, s, r in zip(x.shape[1:3], w.shape[:2], self.st, self.rt):
            try:
                geo.append(_windowed_size(n, (k - 1) * r + 1, s, self.padding))
            except ValueError as e:
                raise _invalid(f"{self.op_type}: {e}") from None
        low = _lowest(_dt.as_dtype(x.dtype))
        p = im2col(xp, x, geo, w.shape[:2], self.st, self.rt, fill=low)
        k = w.shape[0] * w.shape[1]
        return p + w.reshape(k, w.shape[2]).astype(x.dtype), geo


@ks.kernel("Dilation2D", expensive=True)
def _dilation2d_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    spec = _DilationSpec(ctx.attrs, "Dilation2D")

    def dilation2d(x: Any, w: Any) -> Any:
        p, geo = spec.patches(xp, x, w)
        if p.size == 0:
            return xp.zeros([x.shape[0], geo[0][0], geo[1][0], x.shape[3]], x.dtype)
        return p.max(axis=-2)

    return dilation2d


def _dilation_backprop(ctx: Any, wrt_input: bool) -> Callable:
    """Kernel of Dilation2DBackpropInput / Filter: gradients to each window's first maximum."""
    xp = ctx.xp
    op_type = "Dilation2DBackpropInput" if wrt_input else "Dilation2DBackpropFilter"
    spec = _DilationSpec(ctx.attrs, op_type)

    def backprop(x: Any, w: Any, dy: Any) -> Any:
        p, geo = spec.patches(xp, x, w)
        n, c = x.shape[0], x.shape[3]
        want = [n, geo[0][0], geo[1][0], c]
        if list(dy.shape) != want:
            raise _invalid(f"{op_type}: out_backprop has shape {_fmt(dy.shape)}, expected "
                           f"{_fmt(want)}")
        kh, kw = w.shape[:2]
        k = kh * kw
        if p.size == 0 or k == 0:
            return xp.zeros(x.shape if wrt_input else w.shape, dtype=x.dtype)
        arg = xp.argmax(p, axis=-2)  # first maximum, as TF's kernel
        onehot = (arg[..., None, :] == xp.arange(k).reshape(k, 1)).astype(dy.dtype)
        cols = onehot * dy[..., None, :]  # [N, oh, ow, K, C]
        if not wrt_input:
            return cols.sum(axis=(0, 1, 2)).reshape(kh, kw, c)
        from .nn_conv_ops import col2im

        return col2im(xp, cols, list(x.shape), geo, [kh, kw], spec.st, spec.rt)

    return backprop


ks.kernel("Dilation2DBackpropInput", expensive=True)(
    lambda ctx: _dilation_backprop(ctx, True))
ks.kernel("Dilation2DBackpropFilter", expensive=True)(
    lambda ctx: _dilation_backprop(ctx, False))


@ks.gradient("Dilation2D")
def _dilation2d_grad(op: Any, grad: Tensor) -> list[Any]:
    a = op.node_attrs
    kw = {"strides": list(a["strides"]), "rates": list(a["rates"]), "padding": a["padding"]}
    x, w = op.inputs
    return [apply_op("Dilation2DBackpropInput", input=x, filter=w, out_backprop=grad, **kw),
            apply_op("Dilation2DBackpropFilter", input=x, filter=w, out_backprop=grad, **kw)]


@ks.api("nn.dilation2d")
def dilation2d(input: Any, filter: Any = None, strides: Any = None, rates: Any = None,
               padding: str | None = None, name: str | None = None, filters: Any = None,
               dilations: Any = None) -> Tensor:
    """Grayscale morphological dilation (``tf.nn.dilation2d``, TF1 signature)."""
    from .nn_ops import _deprecated_lookup

    filter = _deprecated_lookup("filters", filters, "filter", filter)
    rates = _deprecated_lookup("dilations", dilations, "rates", rates)
    return apply_op("Dilation2D", name=name, input=input, filter=filter,
                    strides=list(strides), rates=list(rates), padding=padding)


@ks.api("nn.erosion2d")
def erosion2d(value: Any, kernel: Any, strides: Any, rates: Any, padding: str,
              name: str | None = None) -> Tensor:
    """Grayscale morphological erosion (``tf.nn.erosion2d``): by duality,
    ``-dilation2d(-value, reverse(kernel))``, as TF builds it."""
    with name_scope(name, "erosion2d", [value, kernel]) as scope:
        neg = apply_op("Neg", x=value)
        rev = apply_op("ReverseV2", tensor=kernel, axis=np.array([0, 1], np.int32))
        d = apply_op("Dilation2D", name=scope, input=neg, filter=rev, strides=list(strides),
                     rates=list(rates), padding=padding)
        return apply_op("Neg", x=d)


from . import nn_conv_fractional  # noqa: E402,F401
