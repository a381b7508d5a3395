"""tf.nn convolutions beyond conv2d: 1-D/3-D, transposed, depthwise, separable, atrous
and N-d ``convolution`` (with dilation through space-to-batch, as TF does).

Ops with TF's names and signatures: ``Conv3D``, ``Conv3DBackpropInput(V2)``,
``Conv3DBackpropFilter(V2)``, ``DepthwiseConv2dNative`` and its two backprop ops. Their
kernels share one channels-last N-d core (im2col + matmul, or einsum for depthwise),
written against ``ctx.xp``; channels-first formats are transposed in and out, half and
bfloat16 compute in float32. The Python functions are TF 1.15's composites (``conv1d`` is
ExpandDims + Conv2D + Squeeze, ``separable_conv2d`` is depthwise + pointwise ...).

The sibling modules ``nn_conv_space`` (space/batch/depth rearrangements),
``nn_conv_pool`` (1-D/3-D/N-d pooling, argmax, fractional, dilation2d) and
``nn_conv_norm`` (fused batch norm, LRN, moments helpers) are imported from here, so the
plugin's ``__init__`` needs only this module.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt.graph import Tensor, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import ks
from ._common import invalid as _invalid, host_ints as _ilist, fmt_dims as _fmt
from ._common import host_reader
from .array_grad import shape_tensor
from .array_ops import _convert, _shape_value, _static_value
from .nn_ops import window_patches
from .nn_ops import (_convert_padding, _deprecated_lookup, _float_compute_dtype,
                     _get_sequence, _merge_dim, _shape_error, _static_windowed_size,
                     _windowed_size, _with_rank, conv2d)

__all__ = ["conv1d", "conv1d_transpose", "conv3d", "conv3d_transpose", "conv_transpose",
           "convolution", "atrous_conv2d", "atrous_conv2d_transpose", "depthwise_conv2d",
           "depthwise_conv2d_native", "depthwise_conv2d_native_backprop_input",
           "depthwise_conv2d_native_backprop_filter", "separable_conv2d",
           "with_space_to_batch", "conv3d_backprop_filter_v2"]


# =======================================================================================
# the channels-last N-d core shared by the conv kernels (and the pooling module)
# =======================================================================================
class ConvSpec:
    """The attrs of one N-d convolution node: spatial strides, dilations, padding, and
    whether the data is channels-first. Attr errors raise InvalidArgumentError."""

    def __init__(self, attrs: dict[str, Any], op_type: str, nsp: int,
                 default_format: str):
        self.op_type, self.nsp = op_type, nsp
        fmt = attrs.get("data_format", default_format) or default_format
        self.cf = fmt.startswith("NC")
        strides = list(attrs["strides"])
        dil = list(attrs.get("dilations") or [1] * (nsp + 2))
        for what, v in (("stride", strides), ("dilation", dil)):
            if len(v) != nsp + 2:
                raise _invalid(f"{op_type}: Sliding window {what}s field must specify "
                               f"{nsp + 2} dimensions")
            if any(e <= 0 for e in v):
                raise _invalid(f"{op_type}: {what}s must be positive, got {v}")
        ci = 1 if self.cf else nsp + 1
        if strides[0] != 1 or strides[ci] != 1:
            raise _invalid(f"{op_type}: Current implementation does not yet support strides "
                           "in the batch and depth dimensions.")
        if dil[0] != 1 or dil[ci] != 1:
            raise _invalid(f"{op_type}: Current implementation does not yet support "
                           "dilations in the batch and depth dimensions.")
        sp = range(2, nsp + 2) if self.cf else range(1, nsp + 1)
        if op_type.startswith("Depthwise") and strides[sp[0]] != strides[sp[1]]:
            raise _invalid(f"{op_type}: Current implementation only supports equal length "
                           "strides in the row and column dimensions.")
        self.strides = [strides[i] for i in sp]
        self.dil = [dil[i] for i in sp]
        self.padding = attrs["padding"]
        self.explicit: list[tuple[int, int]] = [(0, 0)] * nsp
        if self.padding == "EXPLICIT":
            p = list(attrs.get("explicit_paddings") or [])
            if len(p) != 2 * (nsp + 2) or any(v < 0 for v in p):
                raise _invalid(f"{op_type}: explicit_paddings must hold {2 * (nsp + 2)} "
                               f"non-negative values, got {p}")
            self.explicit = [(p[2 * i], p[2 * i + 1]) for i in sp]

    def to_last(self, xp: Any, a: Any) -> Any:
        return xp.transpose(a, (0,) + tuple(range(2, a.ndim)) + (1,)) if self.cf else a

    def from_last(self, xp: Any, a: Any) -> Any:
        return xp.transpose(a, (0, a.ndim - 1) + tuple(range(1, a.ndim - 1))) \
            if self.cf else a

    def sizes_last(self, s: list[int]) -> list[int]:
        return [s[0]] + s[2:] + [s[1]] if self.cf else s

    def geometry(self, in_sp: Sequence[int], k_sp: Sequence[int]
                 ) -> list[tuple[int, int, int]]:
        """(output size, pad before, pad after) per spatial dimension."""
        out = []
        for n, k, s, d, (lo, hi) in zip(in_sp, k_sp, self.strides, self.dil, self.explicit):
            try:
                out.append(_windowed_size(n, (k - 1) * d + 1, s, self.padding, lo, hi))
            except ValueError as e:
                raise _invalid(f"{self.op_type}: {e}") from None
        return out


def window_keys(k_sp: Sequence[int], o_sp: Sequence[int], strides: Sequence[int],
                dil: Sequence[int]) -> list[tuple[slice, ...]]:
    """For each kernel offset (row-major), the strided slices of the padded input that
    the offset touches across all outputs."""
    return [tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                  for o, d, n, s in zip(off, dil, o_sp, strides))
            for off in itertools.product(*[range(k) for k in k_sp])]


def im2col(xp: Any, x: Any, geo: list[tuple[int, int, int]], k_sp: Sequence[int],
           strides: Sequence[int], dil: Sequence[int], fill: Any = 0) -> Any:
    """[N, *spatial, C] -> patches [N, *out, K, C] (K = prod(k_sp), row-major)."""
    pads = [(lo, hi) for _, lo, hi in geo]
    if any(p != (0, 0) for p in pads):
        x = xp.pad(x, [(0, 0)] + pads + [(0, 0)], constant_values=fill)
    o_sp = [g[0] for g in geo]
    p = window_patches(xp, x, o_sp, k_sp, strides, dil)
    return p.reshape(p.shape[:1 + len(o_sp)] + (-1, p.shape[-1]))


def col2im(xp: Any, cols: Any, in_shape: Sequence[int], geo: list[tuple[int, int, int]],
           k_sp: Sequence[int], strides: Sequence[int], dil: Sequence[int]) -> Any:
    """The adjoint of :func:`im2col`: patches [N, *out, K, C] summed into [N, *in, C]."""
    n, c = in_shape[0], in_shape[-1]
    in_sp = list(in_shape[1:-1])
    padded = [s + lo + hi for s, (_, lo, hi) in zip(in_sp, geo)]
    acc = xp.zeros([n] + padded + [c], dtype=cols.dtype)
    keys = window_keys(k_sp, [g[0] for g in geo], strides, dil)
    for idx, k in enumerate(keys):
        acc[(slice(None),) + k + (slice(None),)] += cols[..., idx, :]
    crop = tuple(slice(lo, lo + s) for s, (_, lo, _) in zip(in_sp, geo))
    return acc[(slice(None),) + crop + (slice(None),)]


def conv_forward(xp: Any, spec: ConvSpec, x: Any, w: Any, cdt: Any, depthwise: bool) -> Any:
    """Channels-last convolution of ``x`` [N, *sp, C] with ``w`` [*k, C, O|M]."""
    nsp = spec.nsp
    k_sp = list(w.shape[:nsp])
    c, o_ch = w.shape[nsp], w.shape[nsp + 1]
    if x.shape[-1] != c:
        raise _invalid(f"{spec.op_type}: input and filter must have the same depth: "
                       f"{x.shape[-1]} vs {c}")
    geo = spec.geometry(x.shape[1:-1], k_sp)
    o_sp = [g[0] for g in geo]
    out_c = c * o_ch if depthwise else o_ch
    n = x.shape[0]
    if n == 0 or out_c == 0 or 0 in o_sp:
        return xp.zeros([n] + o_sp + [out_c], dtype=cdt)
    if c == 0 or 0 in k_sp:
        return xp.zeros([n] + o_sp + [out_c], dtype=cdt)
    patches = im2col(xp, x.astype(cdt, copy=False), geo, k_sp, spec.strides, spec.dil)
    kk = int(np.prod(k_sp))
    wc = w.astype(cdt, copy=False)
    if depthwise:
        p = patches.reshape(-1, kk, c)
        out = xp.einsum("pkc,kcm->pcm", p, wc.reshape(kk, c, o_ch))
    else:
        out = xp.matmul(patches.reshape(-1, kk * c), wc.reshape(kk * c, o_ch))
    return out.reshape([n] + o_sp + [out_c])


def conv_backprop_input(xp: Any, spec: ConvSpec, in_shape: list[int], w: Any, dy: Any,
                        cdt: Any, depthwise: bool) -> Any:
    """The gradient of :func:`conv_forward` with respect to its (channels-last) input."""
    nsp = spec.nsp
    k_sp = list(w.shape[:nsp])
    c, o_ch = w.shape[nsp], w.shape[nsp + 1]
    if in_shape[-1] != c:
        raise _invalid(f"{spec.op_type}: input and filter must have the same depth: "
                       f"{in_shape[-1]} vs {c}")
    geo = spec.geometry(in_shape[1:-1], k_sp)
    want = [in_shape[0]] + [g[0] for g in geo] + [c * o_ch if depthwise else o_ch]
    if list(dy.shape) != want:
        raise _invalid(f"{spec.op_type}: Size of out_backprop doesn't match computed: "
                       f"actual = {_fmt(dy.shape)}, computed = {_fmt(want)}")
    if dy.size == 0 or int(np.prod(in_shape)) == 0 or 0 in k_sp:
        return xp.zeros(in_shape, dtype=cdt)
    kk = int(np.prod(k_sp))
    wc = w.astype(cdt, copy=False)
    d = dy.astype(cdt, copy=False)
    if depthwise:
        cols = xp.einsum("pcm,kcm->pkc", d.reshape(-1, c, o_ch), wc.reshape(kk, c, o_ch))
    else:
        cols = xp.matmul(d.reshape(-1, o_ch), wc.reshape(kk * c, o_ch).T)
    cols = cols.reshape(list(dy.shape[:-1]) + [kk, c])
    return col2im(xp, cols, in_shape, geo, k_sp, spec.strides, spec.dil)


def conv_backprop_filter(xp: Any, spec: ConvSpec, x: Any, f_shape: list[int], dy: Any,
                         cdt: Any, depthwise: bool) -> Any:
    """The gradient of :func:`conv_forward` with respect to its filter."""
    nsp = spec.nsp
    k_sp = list(f_shape[:nsp])
    c, o_ch = f_shape[nsp], f_shape[nsp + 1]
    if x.shape[-1] != c:
        raise _invalid(f"{spec.op_type}: input and filter must have the same depth: "
                       f"{x.shape[-1]} vs {c}")
    geo = spec.geometry(x.shape[1:-1], k_sp)
    want = [x.shape[0]] + [g[0] for g in geo] + [c * o_ch if depthwise else o_ch]
    if list(dy.shape) != want:
        raise _invalid(f"{spec.op_type}: Size of out_backprop doesn't match computed: "
                       f"actual = {_fmt(dy.shape)}, computed = {_fmt(want)}")
    if dy.size == 0 or x.size == 0 or int(np.prod(f_shape)) == 0:
        return xp.zeros(f_shape, dtype=cdt)
    kk = int(np.prod(k_sp))
    patches = im2col(xp, x.astype(cdt, copy=False), geo, k_sp, spec.strides, spec.dil)
    d = dy.astype(cdt, copy=False)
    if depthwise:
        dw = xp.einsum("pkc,pcm->kcm", patches.reshape(-1, kk, c), d.reshape(-1, c, o_ch))
    else:
        dw = xp.matmul(patches.reshape(-1, kk * c).T, d.reshape(-1, o_ch))
    return dw.reshape(f_shape)


# =======================================================================================
# shape functions
# =======================================================================================
def _spatial_index(fmt: str, nsp: int) -> tuple[int, list[int]]:
    """(channel axis, spatial axes) of an (nsp + 2)-D data format."""
    if fmt.startswith("NC"):
        return 1, list(range(2, nsp + 2))
    return nsp + 1, list(range(1, nsp + 1))


def _check_attr_lists(op: Any, nsp: int) -> tuple[list[int], list[int]]:
    a = op.node_attrs
    strides = list(a["strides"])
    dil = list(a.get("dilations") or [1] * (nsp + 2))
    if len(strides) != nsp + 2:
        raise _shape_error(op, f"{op.type} requires the stride attribute to contain "
                               f"{nsp + 2} values, but got: {len(strides)}")
    if len(dil) != nsp + 2:
        raise _shape_error(op, f"{op.type} requires the dilation attribute to contain "
                               f"{nsp + 2} values, but got: {len(dil)}")
    if any(v <= 0 for v in strides + dil):
        raise _shape_error(op, f"{op.type}: strides and dilations must be positive")
    return strides, dil


def _conv_nd_shape(nsp: int, depthwise: bool, default_format: str
                   ) -> Callable[[Any], list[TensorShape]]:
    """Shape function of an N-d convolution (depthwise: out channels = in * multiplier)."""
    def shape_fn(op: Any) -> list[TensorShape]:
        strides, dil = _check_attr_lists(op, nsp)
        a = op.node_attrs
        fmt = a.get("data_format", default_format) or default_format
        ci, sp = _spatial_index(fmt, nsp)
        ind = _with_rank(op, op.inputs[0].shape, nsp + 2)
        fd = _with_rank(op, op.inputs[1].shape, nsp + 2)
        c = _merge_dim(op, ind[ci], fd[nsp])
        padding = a["padding"]
        p = list(a.get("explicit_paddings") or [])
        out: list[int | None] = [None] * (nsp + 2)
        out[0] = ind[0]
        for j, ax in enumerate(sp):
            n, k = ind[ax], fd[j]
            if n is None or k is None:
                continue
            lo, hi = (p[2 * ax], p[2 * ax + 1]) if padding == "EXPLICIT" and p else (0, 0)
            out[ax] = _static_windowed_size(op, n, (k - 1) * dil[ax] + 1, strides[ax],
                                            padding, lo, hi)
        if depthwise:
            m = fd[nsp + 1]
            out[ci] = None if c is None or m is None else c * m
        else:
            out[ci] = fd[nsp + 1]
        return [TensorShape(out)]

    return shape_fn


def _sizes_shape(index: int, rank: int) -> Callable[[Any], list[TensorShape]]:
    """Output shape from a 1-D sizes input (the backprop ops)."""

    def shape_fn(op: Any) -> list[TensorShape]:
        s = _shape_value(op.inputs[index], op)
        if s.ndims is not None and s.ndims != rank:
            raise _shape_error(op, f"Shape must be rank {rank} but is rank {s.ndims}")
        return [s if s.ndims is not None else unknown_shape(rank)]

    return shape_fn


def _like_input(index: int, rank: int) -> Callable[[Any], list[TensorShape]]:
    def shape_fn(op: Any) -> list[TensorShape]:
        _with_rank(op, op.inputs[index].shape, rank)
        s = op.inputs[index].shape
        return [s if s.ndims is not None else unknown_shape(rank)]

    return shape_fn


# =======================================================================================
# Conv3D and its backprop ops
# =======================================================================================
_CONV3D_ATTRS = ["strides: list(int) >= 5", "padding: {'SAME', 'VALID'}",
                 "data_format: {'NDHWC', 'NCDHW'} = 'NDHWC'",
                 "dilations: list(int) = [1, 1, 1, 1, 1]"]
_F3 = "T: {half, bfloat16, float, double}"

ks.op(
    OpDef("Conv3D", inputs=["input: T", "filter: T"], outputs=["output: T"],
          attrs=[_F3] + _CONV3D_ATTRS, shape_fn=_conv_nd_shape(3, False, "NDHWC"),
          doc="3-D convolution of a 5-D input with a 5-D filter."),
    OpDef("Conv3DBackpropInput", inputs=["input: T", "filter: T", "out_backprop: T"],
          outputs=["output: T"], attrs=["T: {half, float, double}"] + _CONV3D_ATTRS,
          shape_fn=_like_input(0, 5),
          doc="Deprecated form of Conv3DBackpropInputV2 taking the input tensor."),
    OpDef("Conv3DBackpropFilter", inputs=["input: T", "filter: T", "out_backprop: T"],
          outputs=["output: T"], attrs=["T: {half, float, double}"] + _CONV3D_ATTRS,
          shape_fn=_like_input(1, 5),
          doc="Deprecated form of Conv3DBackpropFilterV2 taking the filter tensor."),
    OpDef("Conv3DBackpropInputV2", inputs=["input_sizes: Tshape", "filter: T",
                                           "out_backprop: T"],
          outputs=["output: T"], attrs=[_F3] + _CONV3D_ATTRS +
          ["Tshape: {int32, int64} = DT_INT32"], shape_fn=_sizes_shape(0, 5),
          doc="The gradient of Conv3D with respect to its input."),
    OpDef("Conv3DBackpropFilterV2", inputs=["input: T", "filter_sizes: int32",
                                            "out_backprop: T"],
          outputs=["output: T"], attrs=[_F3] + _CONV3D_ATTRS, shape_fn=_sizes_shape(1, 5),
          doc="The gradient of Conv3D with respect to its filter."),
)


def _check_rank(op_type: str, what: str, a: Any, rank: int) -> None:
    if a.ndim != rank:
        raise _invalid(f"{op_type}: {what} must be {rank}-dimensional: {_fmt(a.shape)}")


def _sizes(op_type: str, what: str, sizes: Any, rank: int,
           to_host: Callable[[Any], np.ndarray]) -> list[int]:
    sizes = to_host(sizes)
    if np.ndim(sizes) != 1 or np.size(sizes) != rank:
        raise _invalid(f"{op_type}: {what} must be 1-dim with {rank} elements, not "
                       f"{_fmt(np.shape(sizes))}")
    s = _ilist(sizes, np.asarray)
    if any(v < 0 for v in s):
        raise _invalid(f"{op_type}: {what} must be non-negative, got {_fmt(s)}")
    return s


def _conv_kernels(op_type: str, nsp: int, default_format: str, depthwise: bool,
                  kind: str) -> None:
    """Register the kernel of one conv op: ``kind`` is "fwd", "input" (sizes),
    "input_v1" (the input tensor), "filter" (sizes) or "filter_v1" (filter tensor)."""
    rank = nsp + 2
    host = {"input": ("input_sizes",), "filter": ("filter_sizes",)}.get(kind, ())

    @ks.kernel(op_type, expensive=True, host_memory=host)
    def factory(ctx: Any) -> Callable:
        xp = ctx.xp
        spec = ConvSpec(ctx.attrs, op_type, nsp, default_format)
        out_dt = ctx.output_dtypes[0].np
        cdt = _float_compute_dtype(ctx.output_dtypes[0])
        host = host_reader(ctx)

        def fwd(x: Any, w: Any) -> Any:
            _check_rank(op_type, "input", x, rank)
            _check_rank(op_type, "filter", w, rank)
            out = conv_forward(xp, spec, spec.to_last(xp, x), w, cdt, depthwise)
            return spec.from_last(xp, out.astype(out_dt, copy=False))

        def bp_input(sizes: Any, w: Any, dy: Any) -> Any:
            if kind == "input_v1":
                _check_rank(op_type, "input", sizes, rank)
                s = list(sizes.shape)
            else:
                s = _sizes(op_type, "input_sizes", sizes, rank, host)
            _check_rank(op_type, "filter", w, rank)
            _check_rank(op_type, "out_backprop", dy, rank)
            dx = conv_backprop_input(xp, spec, spec.sizes_last(s), w, spec.to_last(xp, dy),
                                     cdt, depthwise)
            return spec.from_last(xp, dx.astype(out_dt, copy=False))

        def bp_filter(x: Any, sizes: Any, dy: Any) -> Any:
            if kind == "filter_v1":
                _check_rank(op_type, "filter", sizes, rank)
                s = list(sizes.shape)
            else:
                s = _sizes(op_type, "filter_sizes", sizes, rank, host)
            _check_rank(op_type, "input", x, rank)
            _check_rank(op_type, "out_backprop", dy, rank)
            dw = conv_backprop_filter(xp, spec, spec.to_last(xp, x), s,
                                      spec.to_last(xp, dy), cdt, depthwise)
            return dw.astype(out_dt, copy=False)

        return {"fwd": fwd, "input": bp_input, "input_v1": bp_input, "filter": bp_filter,
                "filter_v1": bp_filter}[kind]

    factory.__name__ = f"_{op_type}_kernel"


_conv_kernels("Conv3D", 3, "NDHWC", False, "fwd")
_conv_kernels("Conv3DBackpropInput", 3, "NDHWC", False, "input_v1")
_conv_kernels("Conv3DBackpropFilter", 3, "NDHWC", False, "filter_v1")
_conv_kernels("Conv3DBackpropInputV2", 3, "NDHWC", False, "input")
_conv_kernels("Conv3DBackpropFilterV2", 3, "NDHWC", False, "filter")


def _attrs_of(op: Any, *names: str) -> dict[str, Any]:
    a = op.node_attrs
    out = {}
    for n in names:
        if n in a:
            v = a[n]
            out[n] = list(v) if isinstance(v, (list, tuple)) else v
    return out


_C3 = ("strides", "padding", "data_format", "dilations")


@ks.gradient("Conv3D")
def _conv3d_grad(op: Any, grad: Tensor) -> list[Any]:
    x, w = op.inputs
    a = _attrs_of(op, *_C3)
    return [apply_op("Conv3DBackpropInputV2", input_sizes=shape_tensor(x), filter=w,
                     out_backprop=grad, **a),
            apply_op("Conv3DBackpropFilterV2", input=x, filter_sizes=shape_tensor(w),
                     out_backprop=grad, **a)]


@ks.gradient("Conv3DBackpropInputV2")
def _conv3d_backprop_input_grad(op: Any, grad: Tensor) -> list[Any]:
    _, w, dy = op.inputs
    a = _attrs_of(op, *_C3)
    return [None,
            apply_op("Conv3DBackpropFilterV2", input=grad, filter_sizes=shape_tensor(w),
                     out_backprop=dy, **a),
            apply_op("Conv3D", input=grad, filter=w, **a)]


@ks.gradient("Conv3DBackpropFilterV2")
def _conv3d_backprop_filter_grad(op: Any, grad: Tensor) -> list[Any]:
    x, _, dy = op.inputs
    a = _attrs_of(op, *_C3)
    return [apply_op("Conv3DBackpropInputV2", input_sizes=shape_tensor(x), filter=grad,
                     out_backprop=dy, **a),
            None,
            apply_op("Conv3D", input=x, filter=grad, **a)]


# =======================================================================================
# DepthwiseConv2dNative and its backprop ops
# =======================================================================================
_DW_ATTRS = [_F3, "strides: list(int)", "padding: {'SAME', 'VALID', 'EXPLICIT'}",
             "explicit_paddings: list(int) = []", "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
             "dilations: list(int) = [1, 1, 1, 1]"]

ks.op(
    OpDef("DepthwiseConv2dNative", inputs=["input: T", "filter: T"], outputs=["output: T"],
          attrs=_DW_ATTRS, shape_fn=_conv_nd_shape(2, True, "NHWC"),
          doc="Depthwise 2-D convolution: each input channel convolved with its own "
              "channel_multiplier filters."),
    OpDef("DepthwiseConv2dNativeBackpropInput",
          inputs=["input_sizes: int32", "filter: T", "out_backprop: T"],
          outputs=["output: T"], attrs=_DW_ATTRS, shape_fn=_sizes_shape(0, 4),
          doc="The gradient of DepthwiseConv2dNative with respect to its input."),
    OpDef("DepthwiseConv2dNativeBackpropFilter",
          inputs=["input: T", "filter_sizes: int32", "out_backprop: T"],
          outputs=["output: T"], attrs=_DW_ATTRS, shape_fn=_sizes_shape(1, 4),
          doc="The gradient of DepthwiseConv2dNative with respect to its filter."),
)

_conv_kernels("DepthwiseConv2dNative", 2, "NHWC", True, "fwd")
_conv_kernels("DepthwiseConv2dNativeBackpropInput", 2, "NHWC", True, "input")
_conv_kernels("DepthwiseConv2dNativeBackpropFilter", 2, "NHWC", True, "filter")

_DW = ("strides", "padding", "explicit_paddings", "data_format", "dilations")


@ks.gradient("DepthwiseConv2dNative")
def _depthwise_grad(op: Any, grad: Tensor) -> list[Any]:
    x, w = op.inputs
    a = _attrs_of(op, *_DW)
    return [apply_op("DepthwiseConv2dNativeBackpropInput", input_sizes=shape_tensor(x),
                     filter=w, out_backprop=grad, **a),
            apply_op("DepthwiseConv2dNativeBackpropFilter", input=x,
                     filter_sizes=shape_tensor(w), out_backprop=grad, **a)]


@ks.gradient("DepthwiseConv2dNativeBackpropInput")
def _depthwise_backprop_input_grad(op: Any, grad: Tensor) -> list[Any]:
    _, w, dy = op.inputs
    a = _attrs_of(op, *_DW)
    return [None,
            apply_op("DepthwiseConv2dNativeBackpropFilter", input=grad,
                     filter_sizes=shape_tensor(w), out_backprop=dy, **a),
            apply_op("DepthwiseConv2dNative", input=grad, filter=w, **a)]


@ks.gradient("DepthwiseConv2dNativeBackpropFilter")
def _depthwise_backprop_filter_grad(op: Any, grad: Tensor) -> list[Any]:
    x, _, dy = op.inputs
    a = _attrs_of(op, *_DW)
    return [apply_op("DepthwiseConv2dNativeBackpropInput", input_sizes=shape_tensor(x),
                     filter=grad, out_backprop=dy, **a),
            None,
            apply_op("DepthwiseConv2dNative", input=x, filter=grad, **a)]


# =======================================================================================
# API: conv1d, conv3d and the transposes
# =======================================================================================
def _expand_dims(x: Any, axis: int, name: str = "ExpandDims") -> Tensor:
    return apply_op("ExpandDims", name=name, input=x, dim=np.int32(axis))


def _squeeze(x: Tensor, axes: list[int]) -> Tensor:
    return apply_op("Squeeze", input=x, squeeze_dims=axes)


def _1d_format(data_format: str | None) -> tuple[str, int, int]:
    """(2-D format, spatial dim to expand, channel index) of a 1-D data format."""
    if data_format is None or data_format in ("NHWC", "NWC"):
        return "NHWC", 1, 2
    if data_format in ("NCHW", "NCW"):
        return "NCHW", 2, 1
    raise ValueError('data_format must be "NWC" or "NCW".')


@ks.api("nn.conv1d")
def conv1d(value: Any = None, filters: Any = None, stride: Any = None, padding: Any = None,
           use_cudnn_on_gpu: bool | None = None, data_format: str | None = None,
           name: str | None = None, input: Any = None, dilations: Any = None) -> Tensor:
    """1-D convolution (``tf.nn.conv1d``, TF1 signature): ExpandDims + Conv2D + Squeeze,
    as TF builds it."""
    value = _deprecated_lookup("input", input, "value", value)
    with name_scope(name, "conv1d", [value, filters]) as scope:
        fmt, sdim, ci = _1d_format(data_format)
        strides = [1] + _get_sequence(stride, 1, ci, "stride")
        dil = [1] + _get_sequence(dilations, 1, ci, "dilations")
        value = _expand_dims(value, sdim)
        filters = _expand_dims(filters, 0, "ExpandDims_1")
        result = apply_op("Conv2D", name=scope, input=value, filter=filters, strides=strides,
                          padding=padding,
                          use_cudnn_on_gpu=True if use_cudnn_on_gpu is None
                          else use_cudnn_on_gpu, data_format=fmt, dilations=dil)
        return _squeeze(result, [sdim])


def _insert_one(output_shape: Any, at: int) -> Any:
    """``concat([output_shape[:at], [1], output_shape[at:]], 0)`` as TF builds it."""
    if isinstance(output_shape, Tensor):
        head = apply_op("StridedSlice", input=output_shape, begin=np.array([0], np.int32),
                        end=np.array([at], np.int32), strides=np.array([1], np.int32))
        tail = apply_op("StridedSlice", input=output_shape, begin=np.array([at], np.int32),
                        end=np.array([0], np.int32), strides=np.array([1], np.int32),
                        end_mask=1)
        parts = [head, np.array([1], np.int32), tail]
    else:
        lst = list(output_shape)
        parts = [_convert(lst[:at]), _convert([1]), _convert(lst[at:])]
    return apply_op("ConcatV2", values=parts, axis=np.int32(0))


@ks.api("nn.conv1d_transpose")
def conv1d_transpose(input: Any, filters: Any, output_shape: Any, strides: Any,
                     padding: str = "SAME", data_format: str = "NWC", dilations: Any = None,
                     name: str | None = None) -> Tensor:
    """The transpose of ``conv1d`` (``tf.nn.conv1d_transpose``): Conv2DBackpropInput on
    inputs expanded to 2-D."""
    with name_scope(name, "conv1d_transpose", [input, filters, output_shape]) as scope:
        if data_format is None or data_format == "NWC":
            fmt, sdim, ci = "NHWC", 1, 2
        elif data_format == "NCW":
            fmt, sdim, ci = "NCHW", 2, 1
        else:
            raise ValueError('data_format must be "NWC" or "NCW".')
        st = [1] + _get_sequence(strides, 1, ci, "stride")
        dil = [1] + _get_sequence(dilations, 1, ci, "dilations")
        input = _expand_dims(input, sdim)
        filters = _expand_dims(filters, 0, "ExpandDims_1")
        sizes = _insert_one(output_shape, sdim)
        result = apply_op("Conv2DBackpropInput", name=scope, input_sizes=sizes,
                          filter=filters, out_backprop=input, strides=st, padding=padding,
                          data_format=fmt, dilations=dil)
        return _squeeze(result, [sdim])


@ks.api("nn.conv3d")
def conv3d(input: Any, filter: Any = None, strides: Any = None, padding: Any = None,
           data_format: str = "NDHWC", dilations: Any = (1, 1, 1, 1, 1),
           name: str | None = None, filters: Any = None) -> Tensor:
    """3-D convolution (``tf.nn.conv3d``, TF1 signature)."""
    filter = _deprecated_lookup("filters", filters, "filter", filter)
    return apply_op("Conv3D", name=name, input=input, filter=filter, strides=list(strides),
                    padding=padding, data_format=data_format,
                    dilations=list(dilations) if dilations is not None else [1] * 5)


@ks.api("nn.conv3d_transpose")
def conv3d_transpose(value: Any = None, filter: Any = None, output_shape: Any = None,
                     strides: Any = None, padding: str = "SAME", data_format: str = "NDHWC",
                     name: str | None = None, input: Any = None, filters: Any = None,
                     dilations: Any = None) -> Tensor:
    """The transpose of ``conv3d`` (``tf.nn.conv3d_transpose``, TF1 signature):
    Conv3DBackpropInputV2 producing ``output_shape``.

    :raises ValueError: when the channels of ``value``, ``filter`` and ``output_shape``
        disagree statically.
    """
    filter = _deprecated_lookup("filters", filters, "filter", filter)
    value = _deprecated_lookup("input", input, "value", value)
    with name_scope(name, "conv3d_transpose", [value, filter, output_shape]) as scope:
        value = convert_to_tensor(value, name="value")
        filter = convert_to_tensor(filter, name="filter")
        if data_format is None:
            data_format = "NDHWC"
        axis = 1 if data_format.startswith("NC") else 4
        vd, fd = value.shape.as_tuple(), filter.shape.as_tuple()
        if vd is not None and fd is not None and len(vd) == 5 and len(fd) == 5 and \
                vd[axis] is not None and fd[4] is not None and vd[axis] != fd[4]:
            raise ValueError(f"input channels does not match filter's input channels, "
                             f"{vd[axis]} != {fd[4]}")
        out_shape = _convert(output_shape, dtype=_dt.int32, name="output_shape")
        if out_shape.shape.as_tuple() not in (None, (5,), (None,)):
            raise ValueError(f"output_shape must have shape (5,), got {out_shape.shape}")
        ov = _static_value(out_shape)
        if ov is not None and fd is not None and len(fd) == 5 and fd[3] is not None and \
                int(np.asarray(ov).reshape(-1)[axis]) != fd[3]:
            raise ValueError(f"output_shape does not match filter's output channels, "
                             f"{int(np.asarray(ov).reshape(-1)[axis])} != {fd[3]}")
        return apply_op("Conv3DBackpropInputV2", name=scope, input_sizes=out_shape,
                        filter=filter, out_backprop=value,
                        strides=_get_sequence(strides, 3, axis, "strides"), padding=padding,
                        data_format=data_format,
                        dilations=_get_sequence(dilations, 3, axis, "dilations"))


@ks.api("nn.conv_transpose")
def conv_transpose(input: Any, filters: Any, output_shape: Any, strides: Any,
                   padding: str = "SAME", data_format: str | None = None,
                   dilations: Any = None, name: str | None = None) -> Tensor:
    """The transpose of ``convolution`` for 1-3 spatial dimensions, chosen by the length
    of ``output_shape`` (``tf.nn.conv_transpose``)."""
    from .nn_grad import conv2d_transpose

    with name_scope(name, "conv_transpose", [input, filters, output_shape]) as scope:
        if isinstance(output_shape, Tensor):
            n0 = output_shape.shape.as_tuple()
            if n0 is None or n0[0] is None:
                raise ValueError("output_shape must have a static length")
            n = n0[0] - 2
        else:
            n = len(output_shape) - 2
        if not 1 <= n <= 3:
            raise ValueError(f"output_shape must be of length 3, 4 or 5 but was {n + 2}.")
        if n == 1:
            return conv1d_transpose(input, filters, output_shape, strides, padding=padding,
                                    data_format=data_format or "NWC", dilations=dilations,
                                    name=scope)
        if n == 2:
            return conv2d_transpose(input, filters, output_shape, strides, padding=padding,
                                    data_format=data_format or "NHWC", dilations=dilations,
                                    name=scope)
        return conv3d_transpose(input, filters, output_shape, strides, padding=padding,
                                data_format=data_format or "NDHWC", dilations=dilations,
                                name=scope)


@ks.api("nn.conv3d_backprop_filter_v2", "nn.conv3d_backprop_filter")
def conv3d_backprop_filter_v2(input: Any, filter_sizes: Any, out_backprop: Any,
                              strides: Any, padding: str, data_format: str = "NDHWC",
                              dilations: Any = (1, 1, 1, 1, 1),
                              name: str | None = None) -> Tensor:
    """The gradient of ``conv3d`` with respect to its filter
    (``tf.nn.conv3d_backprop_filter_v2``)."""
    return apply_op("Conv3DBackpropFilterV2", name=name, input=input,
                    filter_sizes=filter_sizes, out_backprop=out_backprop,
                    strides=list(strides), padding=padding, data_format=data_format,
                    dilations=list(dilations))


# =======================================================================================
# API: depthwise, separable
# =======================================================================================
@ks.api("nn.depthwise_conv2d_native")
def depthwise_conv2d_native(input: Any, filter: Any, strides: Any, padding: Any,
                            data_format: str = "NHWC", dilations: Any = (1, 1, 1, 1),
                            name: str | None = None) -> Tensor:
    """Depthwise 2-D convolution op (``tf.nn.depthwise_conv2d_native``)."""
    padding, explicit = _convert_padding(padding)
    return apply_op("DepthwiseConv2dNative", name=name, input=input, filter=filter,
                    strides=list(strides), padding=padding, explicit_paddings=explicit,
                    data_format=data_format or "NHWC", dilations=list(dilations))


@ks.api("nn.depthwise_conv2d_native_backprop_input", "nn.depthwise_conv2d_backprop_input")
def depthwise_conv2d_native_backprop_input(input_sizes: Any, filter: Any, out_backprop: Any,
                                           strides: Any, padding: Any,
                                           data_format: str = "NHWC",
                                           dilations: Any = (1, 1, 1, 1),
                                           name: str | None = None) -> Tensor:
    """The gradient of ``depthwise_conv2d_native`` with respect to its input."""
    padding, explicit = _convert_padding(padding)
    return apply_op("DepthwiseConv2dNativeBackpropInput", name=name,
                    input_sizes=input_sizes, filter=filter, out_backprop=out_backprop,
                    strides=list(strides), padding=padding, explicit_paddings=explicit,
                    data_format=data_format, dilations=list(dilations))


@ks.api("nn.depthwise_conv2d_native_backprop_filter", "nn.depthwise_conv2d_backprop_filter")
def depthwise_conv2d_native_backprop_filter(input: Any, filter_sizes: Any, out_backprop: Any,
                                            strides: Any, padding: Any,
                                            data_format: str = "NHWC",
                                            dilations: Any = (1, 1, 1, 1),
                                            name: str | None = None) -> Tensor:
    """The gradient of ``depthwise_conv2d_native`` with respect to its filter."""
    padding, explicit = _convert_padding(padding)
    return apply_op("DepthwiseConv2dNativeBackpropFilter", name=name, input=input,
                    filter_sizes=filter_sizes, out_backprop=out_backprop,
                    strides=list(strides), padding=padding, explicit_paddings=explicit,
                    data_format=data_format, dilations=list(dilations))


@ks.api("nn.depthwise_conv2d")
def depthwise_conv2d(input: Any, filter: Any, strides: Any, padding: Any, rate: Any = None,
                     name: str | None = None, data_format: str | None = None,
                     dilations: Any = None) -> Tensor:
    """Depthwise 2-D convolution with an optional dilation ``rate``
    (``tf.nn.depthwise_conv2d``, TF1 signature): DepthwiseConv2dNative, wrapped in
    SpaceToBatchND / BatchToSpaceND when dilated, as TF builds it."""
    rate = _deprecated_lookup("dilations", dilations, "rate", rate)
    with name_scope(name, "depthwise", [input, filter]) as scope:
        input = convert_to_tensor(input, name="tensor_in")
        filter = convert_to_tensor(filter, name="filter_in")
        if rate is None:
            rate = [1, 1]

        def op(inp: Any, _: Any, pad: Any) -> Tensor:
            return depthwise_conv2d_native(inp, filter, strides, pad,
                                           data_format=data_format or "NHWC", name=scope)

        return with_space_to_batch(input, rate, padding, op,
                                   filter_shape=shape_tensor(filter),
                                   data_format=data_format)


@ks.api("nn.separable_conv2d")
def separable_conv2d(input: Any, depthwise_filter: Any, pointwise_filter: Any, strides: Any,
                     padding: Any, rate: Any = None, name: str | None = None,
                     data_format: str | None = None, dilations: Any = None) -> Tensor:
    """Depthwise convolution followed by a 1x1 pointwise convolution
    (``tf.nn.separable_conv2d``, TF1 signature).

    :raises ValueError: when ``pointwise_filter`` is not [1, 1, in, out].
    """
    rate = _deprecated_lookup("dilations", dilations, "rate", rate)
    with name_scope(name, "separable_conv2d",
                    [input, depthwise_filter, pointwise_filter]) as scope:
        input = convert_to_tensor(input, name="tensor_in")
        depthwise_filter = convert_to_tensor(depthwise_filter, name="depthwise_filter")
        pointwise_filter = convert_to_tensor(pointwise_filter, name="pointwise_filter")
        pd = pointwise_filter.shape.as_tuple()
        if pd is not None:
            if len(pd) != 4:
                raise ValueError(f"Shape {pointwise_filter.shape} must have rank 4")
            for d in pd[:2]:
                if d is not None and d != 1:
                    raise ValueError(f"Dimensions {d} and 1 are not compatible")
        if rate is None:
            rate = [1, 1]

        def op(inp: Any, _: Any, pad: Any) -> Tensor:
            return depthwise_conv2d_native(inp, depthwise_filter, strides, pad,
                                           data_format=data_format or "NHWC",
                                           name="depthwise")

        depthwise = with_space_to_batch(input, rate, padding, op,
                                        filter_shape=shape_tensor(depthwise_filter),
                                        data_format=data_format)
        return conv2d(depthwise, pointwise_filter, [1, 1, 1, 1], padding="VALID",
                      data_format=data_format or "NHWC", name=scope)


# =======================================================================================
# API: with_space_to_batch, convolution, atrous
# =======================================================================================
def _adjust(orig: Any, fill: int, spatial_dims: list[int]) -> Any:
    """TF's ``_with_space_to_batch_adjust``: rows of ``orig`` (one per spatial dim) with
    ``fill`` rows inserted for the non-spatial dims between 1 and the last spatial one."""
    const = orig if not isinstance(orig, Tensor) else _static_value(orig)
    if isinstance(orig, Tensor) and const is None:
        fill_dims = orig.shape.as_list()[1:]
        parts: list[Any] = []
        prev, i = 0, 0
        while i < len(spatial_dims):
            start = i
            if spatial_dims[i] > 1:
                parts.append(np.full([spatial_dims[i] - 1 - prev] + fill_dims, fill,
                                     np.int32))
            while i + 1 < len(spatial_dims) and spatial_dims[i + 1] == spatial_dims[i] + 1:
                i += 1
            parts.append(apply_op("StridedSlice", input=orig,
                                  begin=np.array([start], np.int32),
                                  end=np.array([i + 1], np.int32),
                                  strides=np.array([1], np.int32)))
            prev = spatial_dims[i]
            i += 1
        if len(parts) == 1:
            return parts[0]
        return apply_op("ConcatV2", values=parts, axis=np.int32(0))
    const = np.asarray(const)
    fill_dims = list(const.shape[1:])
    parts, prev, i = [], 0, 0
    while i < len(spatial_dims):
        start = i
        if spatial_dims[i] > 1:
            parts.append(np.full([spatial_dims[i] - 1 - prev] + fill_dims, fill, const.dtype))
        while i + 1 < len(spatial_dims) and spatial_dims[i + 1] == spatial_dims[i] + 1:
            i += 1
        parts.append(const[start:i + 1])
        prev = spatial_dims[i]
        i += 1
    return np.concatenate(parts)


def _space_to_batch_wrap(input: Tensor, dilation_rate: Any, padding: Any,
                         build_op: Callable[[int, Any], Callable[[Any, Any], Tensor]],
                         filter_shape: Any = None, spatial_dims: Any = None,
                         data_format: str | None = None, num_batch_dims: int = 1
                         ) -> Callable[[Any, Any], Tensor]:
    """TF's ``_WithSpaceToBatch``: a callable ``(input, filter)`` that runs the op built
    by ``build_op(num_spatial_dims, padding)`` on the space-to-batch transformed input
    (or directly, when every rate is 1)."""
    from .nn_conv_space import required_space_to_batch_paddings

    rate_t = dilation_rate if isinstance(dilation_rate, Tensor) else None
    rate = _static_value(dilation_rate) if rate_t is not None else np.asarray(
        dilation_rate, dtype=np.int32)
    if rate is None:
        raise ValueError("flowrt: with_space_to_batch needs a dilation_rate known at graph "
                         "construction")
    rate = np.asarray(rate).astype(np.int32)
    if rate.ndim != 1:
        raise ValueError(f"rate must be 1-D, got shape {list(rate.shape)}")
    nsp = rate.shape[0]
    first = num_batch_dims + 1 if data_format is not None and data_format.startswith("NC") \
        else num_batch_dims
    if spatial_dims is None:
        spatial_dims = range(first, nsp + first)
    orig = list(spatial_dims)
    spatial = sorted(set(int(x) for x in orig))
    if spatial != orig or any(x < 1 for x in spatial):
        raise ValueError("spatial_dims must be a monotonically increasing sequence of "
                         "positive integers")
    expected = spatial[-1] if data_format is not None and data_format.startswith("NC") \
        else spatial[-1] + 1
    r = input.shape.ndims
    if r is not None and r < expected:
        raise ValueError(f"input.shape.rank must be at least {expected}, got {r}")
    if np.any(rate < 1):
        raise ValueError(f"dilation_rate must be positive, got {rate.tolist()}")
    if np.all(rate == 1):
        return build_op(nsp, padding)
    padding, explicit = _convert_padding(padding)
    if padding == "SAME":
        if filter_shape is None:
            raise ValueError("filter_shape must be specified for SAME padding")
        fs = _static_value(filter_shape) if isinstance(filter_shape, Tensor) else \
            np.asarray(TensorShape(filter_shape).as_list() if not isinstance(
                filter_shape, np.ndarray) else filter_shape)
        if fs is None or any(v is None for v in np.asarray(fs, dtype=object).reshape(-1)):
            raise ValueError("flowrt: SAME padding with dilation needs a filter shape known "
                             "at graph construction")
        fs = np.asarray(fs).astype(np.int32)[:nsp]
        extra = (fs - 1) * rate
        base = np.stack([extra // 2, extra - extra // 2], axis=1).astype(np.int32)
    elif padding == "VALID":
        base = np.zeros([nsp, 2], np.int32)
    elif padding == "EXPLICIT":
        b = np.array(explicit, np.int32).reshape(nsp + 2, 2)
        base = b[2:] if data_format is not None and data_format.startswith("NC") else b[1:-1]
    else:
        raise ValueError(f"Invalid padding method {padding!r}")
    op = build_op(nsp, "VALID")

    def call(inp: Any, filt: Any) -> Tensor:
        ishape = inp.shape.as_tuple() if isinstance(inp, Tensor) else None
        sp_shape: Any = None
        if ishape is not None:
            sp_shape = [ishape[i] for i in spatial]
        if sp_shape is None or None in sp_shape:
            shp = apply_op("Shape", input=inp, out_type=_dt.int32)
            sp_shape = apply_op("Pack", values=[apply_op(
                "StridedSlice", input=shp, begin=np.array([i], np.int32),
                end=np.array([i + 1], np.int32), strides=np.array([1], np.int32),
                shrink_axis_mask=1) for i in spatial], axis=0)
        paddings, crops = required_space_to_batch_paddings(sp_shape, rate, base)
        block = _adjust(rate, 1, spatial)
        paddings = _adjust(paddings, 0, spatial)
        crops = _adjust(crops, 0, spatial)
        converted = apply_op("SpaceToBatchND", input=inp, block_shape=block,
                             paddings=paddings)
        result = op(converted, filt)
        out = apply_op("BatchToSpaceND", input=result, block_shape=block, crops=crops)
        if data_format is not None and data_format.startswith("NC") and filt is not None:
            od = out.shape.as_tuple()
            if od is not None and od[1] is None:
                fl = filt.shape.as_tuple()
                if fl is not None:
                    out.set_shape([od[0], fl[-1]] + list(od[2:]))
        return out

    return call


@ks.api("nn.with_space_to_batch")
def with_space_to_batch(input: Any, dilation_rate: Any, padding: Any,
                        op: Callable[[Any, int, Any], Tensor], filter_shape: Any = None,
                        spatial_dims: Any = None, data_format: str | None = None) -> Tensor:
    """Runs ``op(converted_input, num_spatial_dims, padding)`` on the space-to-batch
    transformed ``input`` so that a dilated operation becomes a plain one
    (``tf.nn.with_space_to_batch``). ``dilation_rate`` must be known at graph
    construction in flowrt."""
    input = convert_to_tensor(input, name="input")

    def build_op(nsp: int, pad: Any) -> Callable[[Any, Any], Tensor]:
        return lambda inp, _: op(inp, nsp, pad)

    return _space_to_batch_wrap(input, dilation_rate, padding, build_op,
                                filter_shape=filter_shape, spatial_dims=spatial_dims,
                                data_format=data_format)(input, None)


def _non_atrous_op(nsp: int, strides: list[int], padding: Any, data_format: str | None,
                   name: str) -> Callable[[Any, Any], Tensor]:
    """TF's ``_NonAtrousConvolution``: conv1d / Conv2D / Conv3D with ``strides`` over the
    spatial dimensions."""
    if nsp == 1:
        return lambda inp, f: conv1d(value=inp, filters=f, stride=strides[0],
                                     padding=padding, data_format=data_format, name=name)
    if nsp == 2:
        if data_format is None or data_format == "NHWC":
            fmt, st = "NHWC", [1] + list(strides) + [1]
        elif data_format == "NCHW":
            fmt, st = "NCHW", [1, 1] + list(strides)
        else:
            raise ValueError("data_format must be \"NHWC\" or \"NCHW\".")
        return lambda inp, f: conv2d(inp, f, st, padding, data_format=fmt, name=name)
    if data_format is None or data_format == "NDHWC":
        fmt, st = "NDHWC", [1] + list(strides) + [1]
    elif data_format == "NCDHW":
        fmt, st = "NCDHW", [1, 1] + list(strides)
    else:
        raise ValueError("data_format must be \"NDHWC\" or \"NCDHW\". Have: "
                         f"{data_format}")
    return lambda inp, f: conv3d(inp, f, st, padding, data_format=fmt, name=name)


@ks.api("nn.convolution")
def convolution(input: Any, filter: Any, padding: Any, strides: Any = None,
                dilation_rate: Any = None, name: str | None = None,
                data_format: str | None = None, filters: Any = None,
                dilations: Any = None) -> Tensor:
    """N-d convolution (N = 1, 2, 3) with strides and dilation (``tf.nn.convolution``,
    TF1 signature). Undilated, it is conv1d / Conv2D / Conv3D named after the scope;
    dilated, the convolution runs on SpaceToBatchND'd input, as in TF.

    :raises ValueError: for ranks other than 3-5, mismatched lengths, strides > 1 with
        dilation > 1, or channels that do not match.
    """
    filter = _deprecated_lookup("filters", filters, "filter", filter)
    dilation_rate = _deprecated_lookup("dilations", dilations, "dilation_rate",
                                       dilation_rate)
    with name_scope(name, "convolution", [input, filter]) as scope:
        input = convert_to_tensor(input, name="input")
        filter = convert_to_tensor(filter, name="filter")
        ir, fr = input.shape.ndims, filter.shape.ndims
        if ir is not None:
            n = ir - 2
        elif fr is not None:
            n = fr - 2
        else:
            raise ValueError("rank of input or filter must be known")
        if not 1 <= n <= 3:
            raise ValueError(f"Input tensor must be of rank 3, 4 or 5 but was {n + 2}.")
        if fr is not None and ir is not None and fr != ir:
            raise ValueError(f"Shapes {filter.shape} and {input.shape} must have the same "
                             "rank")
        ci = n + 1 if data_format is None or not data_format.startswith("NC") else 1
        st = _get_sequence(strides, n, ci, "strides")
        dil = _get_sequence(dilation_rate, n, ci, "dilations")
        if all(d == 1 for d in dil):
            sp_st = st[2:] if ci == 1 else st[1:-1]
            return _non_atrous_op(n, sp_st, padding, data_format, scope)(input, filter)
        sp_st = np.array(st[2:] if ci == 1 else st[1:-1], np.int32)
        sp_dil = np.array(dil[2:] if ci == 1 else dil[1:-1], np.int32)
        if np.any(sp_st > 1) and np.any(sp_dil > 1):
            raise ValueError("strides > 1 not supported in conjunction with "
                             "dilation_rate > 1")
        idim = input.shape.as_tuple()
        fdim = filter.shape.as_tuple()
        if idim is not None and fdim is not None:
            ch = idim[1 if ci == 1 else n + 1]
            if ch is not None and fdim[n] is not None and ch % fdim[n]:
                raise ValueError(f"number of input channels ({ch}) is not divisible by "
                                 f"corresponding dimension of filter, {fdim[n]}")
        spatial = list(range(2, n + 2)) if ci == 1 else list(range(1, n + 1))

        def build(nsp: int, pad: Any) -> Callable[[Any, Any], Tensor]:
            return _non_atrous_op(nsp, list(sp_st), pad, data_format, scope)

        fshape = filter.shape if filter.shape.is_fully_defined() else shape_tensor(filter)
        return _space_to_batch_wrap(input, sp_dil, padding, build,
                                    filter_shape=fshape if isinstance(fshape, Tensor)
                                    else fshape.as_list(),
                                    spatial_dims=spatial, data_format=data_format)(input,
                                                                                   filter)


@ks.api("nn.atrous_conv2d")
def atrous_conv2d(value: Any, filters: Any, rate: Any, padding: Any,
                  name: str | None = None) -> Tensor:
    """Dilated 2-D convolution (``tf.nn.atrous_conv2d``): ``convolution`` with
    ``dilation_rate = [rate, rate]``."""
    return convolution(input=value, filter=filters, padding=padding,
                       dilation_rate=np.broadcast_to(rate, (2,)), name=name)


@ks.api("nn.atrous_conv2d_transpose")
def atrous_conv2d_transpose(value: Any, filters: Any, output_shape: Any, rate: int,
                            padding: str, name: str | None = None) -> Tensor:
    """The transpose of ``atrous_conv2d`` (``tf.nn.atrous_conv2d_transpose``), built as
    TF builds it: SpaceToBatch, Conv2DBackpropInput, BatchToSpace. flowrt needs
    ``output_shape`` known at graph construction when ``rate > 1``.

    :raises ValueError: on mismatched channels, ``rate < 1`` or a bad padding.
    """
    from .nn_conv_space import batch_to_space, space_to_batch
    from .nn_grad import conv2d_transpose

    with name_scope(name, "atrous_conv2d_transpose", [value, filters, output_shape]):
        value = convert_to_tensor(value, name="value")
        filters = convert_to_tensor(filters, name="filters")
        vd, fd = value.shape.as_tuple(), filters.shape.as_tuple()
        if vd is not None and fd is not None and vd[3] is not None and fd[3] is not None \
                and vd[3] != fd[3]:
            raise ValueError(f"value's input channels does not match filters' input "
                             f"channels, {vd[3]} != {fd[3]}")
        if rate < 1:
            raise ValueError(f"rate {rate} cannot be less than one")
        if rate == 1:
            return conv2d_transpose(value, filters, output_shape, strides=[1, 1, 1, 1],
                                    padding=padding, data_format="NHWC")
        os_t = convert_to_tensor(output_shape, name="output_shape")
        if not os_t.shape.is_compatible_with(TensorShape([4])):
            raise ValueError(f"output_shape must have shape (4,), got {os_t.shape}")
        osv = _static_value(os_t)
        if osv is None:
            raise ValueError("flowrt: atrous_conv2d_transpose with rate > 1 needs an "
                             "output_shape known at graph construction")
        osv = [int(v) for v in np.asarray(osv).reshape(-1)]
        if fd is not None and fd[2] is not None and osv[3] != fd[2]:
            raise ValueError(f"output_shape does not match filter's output channels, "
                             f"{osv[3]} != {fd[2]}")
        if padding == "SAME":
            if fd is None or fd[0] is None or fd[1] is None:
                raise ValueError("flowrt: atrous_conv2d_transpose needs a static filter "
                                 "shape for SAME padding")
            fh, fw = fd[0] + (fd[0] - 1) * (rate - 1), fd[1] + (fd[1] - 1) * (rate - 1)
            pt, pl = (fh - 1) // 2, (fw - 1) // 2
            pb, pr = fh - 1 - pt, fw - 1 - pl
        elif padding == "VALID":
            pt = pb = pl = pr = 0
        else:
            raise ValueError("padding must be either VALID or SAME: " + str(padding))
        in_h, in_w = osv[1] + pt + pb, osv[2] + pl + pr
        eb, er = (rate - in_h % rate) % rate, (rate - in_w % rate) % rate
        value = space_to_batch(input=value, paddings=[[0, eb], [0, er]], block_size=rate)
        sizes = [rate * rate * osv[0], (in_h + eb) // rate, (in_w + er) // rate, osv[3]]
        value = apply_op("Conv2DBackpropInput", input_sizes=np.array(sizes, np.int32),
                         filter=filters, out_backprop=value, strides=[1, 1, 1, 1],
                         padding="VALID", data_format="NHWC")
        return batch_to_space(input=value, crops=[[pt, pb + eb], [pl, pr + er]],
                              block_size=rate)


# the sibling modules of this area (see the module docstring)
from . import nn_conv_space  # noqa: E402,F401
from . import nn_conv_pool  # noqa: E402,F401
from . import nn_conv_norm  # noqa: E402,F401
