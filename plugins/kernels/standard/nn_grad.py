"""Gradients of the nn ops (TF's ``nn_grad.py``), and the backprop ops they emit.

The gradient ops carry TF's names and signatures so GraphDefs stay interchangeable:
``ReluGrad``, ``Relu6Grad``, ``LeakyReluGrad``, ``EluGrad``, ``SeluGrad``,
``SoftplusGrad``, ``SoftsignGrad``, ``BiasAddGrad``, ``Conv2DBackpropInput``,
``Conv2DBackpropFilter``, ``MaxPoolGrad``, ``MaxPoolGradGrad`` and ``AvgPoolGrad``.
Their kernels compute in NHWC (NCHW is transposed in and out) and in float32 for
half/bfloat16, like the forward kernels. ``MaxPoolGrad`` routes each output gradient to
the first maximum of its window in row-major order, as TF's CPU kernel does.

Also registered here: the gradient of ``Print`` (passes through to its first input) and
the random ops and ``Assert`` as not differentiable.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.graph import Tensor, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import constant_value, ks
from ._common import invalid as _invalid, host_ints as _ilist, fmt_dims as _fmt
from ._common import host_reader
from ._common import GEMV_SUM_MIN, PARALLEL_ELEMENTS, column_sums, row_parts, sum_parts
from .array_grad import shape_tensor, sum_to_shape
from .array_ops import _convert, _shape_value, _static_value
from . import nn_conv_rows as _rows
from .nn_conv_rows import batch_parts
from .nn_ops import window_patches
from .nn_ops import (_SELU_ALPHA, _SELU_SCALE, _check_conv_attrs, _convert_padding,
                     _deprecated_lookup, _explicit_pads, _float_compute_dtype, _get_sequence,
                     _nhwc_index, _shape_error, _strides_list, _windowed_size, _with_rank,
                     _with_rank_at_least)

__all__ = ["conv2d_backprop_input", "conv2d_backprop_filter", "conv2d_transpose"]

_FLOAT_T = "T: {half, bfloat16, float, double}"
_REAL_T = ("half, bfloat16, float, double, int8, int16, int32, int64, uint8, uint16, "
           "uint32, uint64")


# =======================================================================================
# activation gradient ops
# =======================================================================================
def _merge_inputs_shape(op: Any) -> list[TensorShape]:
    """TF's MergeBothInputsShapeFn: both inputs have the output's shape."""
    a, b = op.inputs[0].shape, op.inputs[1].shape
    try:
        return [a.merge_with(b)]
    except ValueError:
        raise _shape_error(op, "Incompatible shapes") from None


ks.op(
    OpDef("ReluGrad", inputs=["gradients: T", "features: T"], outputs=["backprops: T"],
          attrs=[f"T: {{{_REAL_T}}}"], shape_fn=_merge_inputs_shape,
          doc="gradients * (features > 0)."),
    OpDef("Relu6Grad", inputs=["gradients: T", "features: T"], outputs=["backprops: T"],
          attrs=[f"T: {{{_REAL_T}}}"], shape_fn=_merge_inputs_shape,
          doc="gradients * (0 < features < 6)."),
    OpDef("LeakyReluGrad", inputs=["gradients: T", "features: T"], outputs=["backprops: T"],
          attrs=["alpha: float = 0.2", "T: {half, bfloat16, float, double} = DT_FLOAT"],
          shape_fn=_merge_inputs_shape,
          doc="gradients where features > 0, else alpha * gradients."),
    OpDef("EluGrad", inputs=["gradients: T", "outputs: T"], outputs=["backprops: T"],
          attrs=[_FLOAT_T], shape_fn=_merge_inputs_shape,
          doc="The Elu gradient from Elu's outputs."),
    OpDef("SeluGrad", inputs=["gradients: T", "outputs: T"], outputs=["backprops: T"],
          attrs=[_FLOAT_T], shape_fn=_merge_inputs_shape,
          doc="The Selu gradient from Selu's outputs."),
    OpDef("SoftplusGrad", inputs=["gradients: T", "features: T"], outputs=["backprops: T"],
          attrs=[_FLOAT_T], shape_fn=_merge_inputs_shape,
          doc="gradients / (1 + exp(-features))."),
    OpDef("SoftsignGrad", inputs=["gradients: T", "features: T"], outputs=["backprops: T"],
          attrs=[_FLOAT_T], shape_fn=_merge_inputs_shape,
          doc="gradients / (1 + abs(features)) ** 2."),
)


def _check_same(g: Any, f: Any) -> None:
    if np.shape(g) != np.shape(f):
        raise _invalid(f"gradients and features must be the same shape: "
                       f"{_fmt(np.shape(g))} vs. {_fmt(np.shape(f))}")


def _activation_grad_kernel(fn: Callable[..., Any],
                            fn_into: Callable[..., Any] | None = None
                            ) -> Callable[[Any], Callable]:
    """A kernel factory for ``backprops = fn(xp, gradients, features, zero)``, computed
    in float32 for half/bfloat16, with TF's same-shape check. ``fn_into(xp, g, f, zero,
    out)``, when given, writes the same into ``out`` (used for row ranges of a large
    input, saving a temporary and a copy)."""

    def factory(ctx: Any) -> Callable:
        xp = ctx.xp
        out = ctx.output_dtypes[0].np
        cdt = _float_compute_dtype(ctx.output_dtypes[0])
        zero = xp.zeros((), cdt)
        cast = np.dtype(cdt) != np.dtype(out)

        def compute(g: Any, f: Any) -> Any:
            _check_same(g, f)
            if cast:
                g, f = g.astype(cdt), f.astype(cdt)
            elif xp is np and g.size >= PARALLEL_ELEMENTS and g.ndim:
                res = np.empty(g.shape, out)

                def part(lo: int, hi: int) -> None:
                    if fn_into is not None:
                        fn_into(xp, g[lo:hi], f[lo:hi], zero, res[lo:hi])
                    else:
                        res[lo:hi] = fn(xp, g[lo:hi], f[lo:hi], zero)
                if row_parts(ctx, g.shape[0], g.size, part) is not None:
                    return res
            return xp.asarray(fn(xp, g, f, zero)).astype(out, copy=False)

        return compute

    return factory


# TF's ReluGrad/Relu6Grad multiply by the mask (``gradients * (features > 0)``), so a
# NaN or infinite gradient stays NaN where the unit is off; a multiply is also 5x faster
# than numpy's ``where``
ks.kernel("ReluGrad")(_activation_grad_kernel(
    lambda xp, g, f, z: g * (f > 0),
    lambda xp, g, f, z, out: xp.multiply(g, f > 0, out=out)))
ks.kernel("Relu6Grad")(_activation_grad_kernel(
    lambda xp, g, f, z: g * ((f > 0) & (f < 6))))
ks.kernel("EluGrad")(_activation_grad_kernel(
    lambda xp, g, y, z: xp.where(y < 0, g * (y + 1), g)))
ks.kernel("SeluGrad")(_activation_grad_kernel(
    lambda xp, g, y, z: xp.where(y < 0, g * (y + _SELU_SCALE * _SELU_ALPHA),
                                 g * _SELU_SCALE)))
ks.kernel("SoftplusGrad")(_activation_grad_kernel(
    lambda xp, g, f, z: g / (1 + xp.exp(-f))))
ks.kernel("SoftsignGrad")(_activation_grad_kernel(
    lambda xp, g, f, z: g / xp.square(1 + xp.abs(f))))


@ks.kernel("LeakyReluGrad")
def _leaky_relu_grad_kernel(ctx: Any) -> Callable:
    alpha = float(np.float32(ctx.attrs.get("alpha", 0.2)))  # a float attr, as in TF
    return _activation_grad_kernel(lambda xp, g, f, z: xp.where(f > 0, g, g * alpha))(ctx)


# =======================================================================================
# activation gradients
# =======================================================================================
@ks.gradient("Relu")
def _relu_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("ReluGrad", gradients=grad, features=op.outputs[0])]


@ks.gradient("Relu6")
def _relu6_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("Relu6Grad", gradients=grad, features=op.outputs[0])]


@ks.gradient("LeakyRelu")
def _leaky_relu_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("LeakyReluGrad", gradients=grad, features=op.inputs[0],
                     alpha=op.node_attrs.get("alpha", 0.2))]


@ks.gradient("Elu")
def _elu_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("EluGrad", gradients=grad, outputs=op.outputs[0])]


@ks.gradient("Selu")
def _selu_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("SeluGrad", gradients=grad, outputs=op.outputs[0])]


@ks.gradient("Softplus")
def _softplus_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("SoftplusGrad", gradients=grad, features=op.inputs[0])]


@ks.gradient("Softsign")
def _softsign_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("SoftsignGrad", gradients=grad, features=op.inputs[0])]


# second derivatives, as TF's nn_grad.py
@ks.gradient("ReluGrad")
def _relu_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    x = op.inputs[1]
    return [apply_op("ReluGrad", gradients=grad, features=x), apply_op("ZerosLike", x=x)]


@ks.gradient("Relu6Grad")
def _relu6_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    x = op.inputs[1]
    return [apply_op("Relu6Grad", gradients=grad, features=x), apply_op("ZerosLike", x=x)]


@ks.gradient("LeakyReluGrad")
def _leaky_relu_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    x = op.inputs[1]
    return [apply_op("LeakyReluGrad", gradients=grad, features=x,
                     alpha=op.node_attrs.get("alpha", 0.2)), apply_op("ZerosLike", x=x)]


def _where_negative(y: Tensor, value: Tensor) -> Tensor:
    zeros = apply_op("ZerosLike", x=y)
    return apply_op("Select", condition=apply_op("Less", x=y, y=zeros), t=value, e=zeros)


@ks.gradient("EluGrad")
def _elu_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    y = op.inputs[1]
    return [apply_op("EluGrad", gradients=grad, outputs=y),
            _where_negative(y, apply_op("Mul", x=grad, y=op.inputs[0]))]


@ks.gradient("SeluGrad")
def _selu_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    y = op.inputs[1]
    return [apply_op("SeluGrad", gradients=grad, outputs=y),
            _where_negative(y, apply_op("Mul", x=grad, y=op.inputs[0]))]


@ks.gradient("SoftplusGrad")
def _softplus_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    dy, x = op.inputs
    ddy = apply_op("SoftplusGrad", gradients=grad, features=x)
    dt = x.dtype.base_dtype
    denom = apply_op("AddV2", x=apply_op("AddV2", x=apply_op("Exp", x=apply_op("Neg", x=x)),
                                         y=convert_to_tensor(2.0, dtype=dt)),
                     y=apply_op("Exp", x=x))
    d2x = apply_op("RealDiv", x=apply_op("Mul", x=grad, y=dy), y=denom)
    return [ddy, d2x]


@ks.gradient("SoftsignGrad")
def _softsign_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    # backprops = dy / (1 + |x|)^2: d/d(dy) = 1 / (1 + |x|)^2,
    # d/dx = -2 dy sign(x) / (1 + |x|)^3
    dy, x = op.inputs
    dt = x.dtype.base_dtype
    one_abs = apply_op("AddV2", x=convert_to_tensor(1.0, dtype=dt), y=apply_op("Abs", x=x))
    ddy = apply_op("SoftsignGrad", gradients=grad, features=x)
    num = apply_op("Mul", x=apply_op("Mul", x=grad, y=dy), y=apply_op("Sign", x=x))
    num = apply_op("Mul", x=num, y=convert_to_tensor(-2.0, dtype=dt))
    d2x = apply_op("RealDiv", x=num, y=apply_op("Pow", x=one_abs,
                                                y=convert_to_tensor(3.0, dtype=dt)))
    return [ddy, d2x]


# =======================================================================================
# softmax, log_softmax, cross entropies, L2Loss
# =======================================================================================
def _sum_last(t: Tensor) -> Tensor:
    return apply_op("Sum", input=t, reduction_indices=np.int32(-1), keep_dims=True)


@ks.gradient("Softmax")
def _softmax_grad(op: Any, grad: Tensor) -> list[Any]:
    sm = op.outputs[0]
    s = _sum_last(apply_op("Mul", x=grad, y=sm))
    return [apply_op("Mul", x=apply_op("Sub", x=grad, y=s), y=sm)]


@ks.gradient("LogSoftmax")
def _log_softmax_grad(op: Any, grad: Tensor) -> list[Any]:
    sm = apply_op("Exp", x=op.outputs[0])
    return [apply_op("Sub", x=grad, y=apply_op("Mul", x=_sum_last(grad), y=sm))]


def _broadcast_mul(vec: Tensor, mat: Tensor) -> Tensor:
    return apply_op("Mul", x=apply_op("ExpandDims", input=vec, dim=np.int32(-1)), y=mat)


def _is_zeros(t: Any) -> bool:
    """TF's ``_is_zeros_tensor``: the zeros tf.gradients fills in for an output that got
    no gradient (a ZerosLike, or a zero constant when the shape is static)."""
    if t is None:
        return True
    if not isinstance(t, Tensor):
        return False
    if t.op.type == "ZerosLike":
        return True
    if t.op.type == "Const":
        v = constant_value(t)
        return v is not None and not np.any(v)
    return False


def _xent_logits_grad(op: Any, grad_loss: Tensor, grad_grad: Any) -> Tensor:
    grad = _broadcast_mul(grad_loss, op.outputs[1])
    if not _is_zeros(grad_grad):
        logits = op.inputs[0]
        sm = apply_op("Softmax", logits=logits)
        inner = _sum_last(apply_op("Mul", x=grad_grad, y=sm))
        grad = apply_op("AddV2", x=grad, y=apply_op("Mul", x=apply_op("Sub", x=grad_grad,
                                                                       y=inner), y=sm))
    return grad


def _fit(grad: Tensor, t: Tensor) -> Tensor:
    """``grad`` summed to ``t``'s shape when the op broadcast ``t`` (the static shapes
    are incompatible, e.g. [1, n] labels against [b, n] logits)."""
    if grad.shape.is_compatible_with(t.shape):
        return grad
    return sum_to_shape(grad, t)


@ks.gradient("SoftmaxCrossEntropyWithLogits")
def _softmax_xent_grad(op: Any, grad_loss: Tensor, grad_grad: Any) -> list[Any]:
    features, labels = op.inputs
    gf = _xent_logits_grad(op, grad_loss, grad_grad)
    neg_log_sm = apply_op("Neg", x=apply_op("LogSoftmax", logits=features))
    gl = _broadcast_mul(grad_loss, neg_log_sm)
    return [_fit(gf, features), _fit(gl, labels)]


@ks.gradient("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_softmax_xent_grad(op: Any, grad_loss: Tensor, grad_grad: Any) -> list[Any]:
    return [_xent_logits_grad(op, grad_loss, grad_grad), None]


@ks.gradient("L2Loss")
def _l2_loss_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("Mul", x=op.inputs[0], y=grad)]


# =======================================================================================
# BiasAdd
# =======================================================================================
def _bias_add_grad_shape(op: Any) -> list[TensorShape]:
    fmt = op.node_attrs.get("data_format", "NHWC")
    d = _with_rank_at_least(op, op.inputs[0].shape, 2)
    if d is None:
        return [unknown_shape(1)]
    return [TensorShape([d[1] if fmt == "NCHW" else d[-1]])]


ks.op(OpDef("BiasAddGrad", inputs=["out_backprop: T"], outputs=["output: T"],
            attrs=["T: numbertype", "data_format: {'NHWC', 'NCHW'} = 'NHWC'"],
            shape_fn=_bias_add_grad_shape,
            doc="The gradient of BiasAdd's bias: out_backprop summed over all but the "
                "channel dimension."))


@ks.kernel("BiasAddGrad")
def _bias_add_grad_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    nchw = ctx.attrs.get("data_format", "NHWC") == "NCHW"
    dt = ctx.output_dtypes[0]
    out = dt.np
    cdt = _float_compute_dtype(dt) if dt.is_floating else out

    ones: dict[int, Any] = {}
    gemv = xp is np and not nchw and np.dtype(cdt).kind == "f" and np.dtype(cdt) == out

    def bias_add_grad(g: Any) -> Any:
        if g.ndim < 2:
            raise _invalid(f"Input tensor must be at least 2D: {_fmt(g.shape)}")
        ch = 1 if nchw else g.ndim - 1
        if gemv and g.dtype == out and g.size >= GEMV_SUM_MIN and g.flags.c_contiguous:
            # the column sums of the [rows, channels] matrix: one matrix-vector product
            return column_sums(ctx, g.reshape(-1, g.shape[-1]), ones)
        axes = tuple(i for i in range(g.ndim) if i != ch)
        parts = row_parts(ctx, g.shape[0], g.size,
                          lambda lo, hi: xp.sum(g[lo:hi], axis=axes, dtype=cdt))
        if parts is not None:
            return sum_parts(parts).astype(out, copy=False)
        return xp.sum(g, axis=axes, dtype=cdt).astype(out, copy=False)

    return bias_add_grad


@ks.gradient("BiasAdd")
def _bias_add_grad(op: Any, grad: Tensor) -> list[Any]:
    return [grad, apply_op("BiasAddGrad", out_backprop=grad,
                           data_format=op.node_attrs.get("data_format", "NHWC"))]


@ks.gradient("BiasAddGrad")
def _bias_add_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    x = op.inputs[0]
    nchw = op.node_attrs.get("data_format", "NHWC") == "NCHW"
    r = x.shape.ndims
    if r is not None:
        exp = [1] * r
        exp[1 if nchw else r - 1] = -1
        shaped = apply_op("Reshape", tensor=grad, shape=np.array(exp, np.int32))
    else:
        rank = apply_op("Rank", input=x)
        ones = apply_op("Fill", dims=apply_op("ExpandDims", input=apply_op(
            "Sub", x=rank, y=np.int32(2 if nchw else 1)), dim=np.int32(0)), value=np.int32(1))
        parts = [np.array([1, -1], np.int32), ones] if nchw else [ones, np.array([-1], np.int32)]
        exp_t = apply_op("ConcatV2", values=parts, axis=np.int32(0))
        shaped = apply_op("Reshape", tensor=grad, shape=exp_t)
    return [apply_op("BroadcastTo", input=shaped, shape=shape_tensor(x))]


# =======================================================================================
# Conv2D backprop ops
# =======================================================================================
_CONV_ATTRS = ["strides: list(int)", "use_cudnn_on_gpu: bool = true",
               "padding: {'SAME', 'VALID', 'EXPLICIT'}", "explicit_paddings: list(int) = []",
               "data_format: {'NHWC', 'NCHW'} = 'NHWC'", "dilations: list(int) = [1, 1, 1, 1]"]


def _sizes_shape(index: int) -> Callable[[Any], list[TensorShape]]:
    def shape_fn(op: Any) -> list[TensorShape]:
        _check_conv_attrs(op.node_attrs, op.type)
        s = _shape_value(op.inputs[index], op)
        if s.ndims is not None and s.ndims != 4:
            raise _shape_error(op, f"Shape must be rank 4 but is rank {s.ndims}")
        return [s if s.ndims is not None else unknown_shape(4)]

    return shape_fn


ks.op(OpDef("Conv2DBackpropInput", inputs=["input_sizes: int32", "filter: T",
                                           "out_backprop: T"],
            outputs=["output: T"], attrs=["T: {half, bfloat16, float, double, int32}"]
            + _CONV_ATTRS, shape_fn=_sizes_shape(0),
            doc="The gradient of Conv2D with respect to its input."),
      OpDef("Conv2DBackpropFilter", inputs=["input: T", "filter_sizes: int32",
                                            "out_backprop: T"],
            outputs=["output: T"], attrs=[_FLOAT_T] + _CONV_ATTRS, shape_fn=_sizes_shape(1),
            doc="The gradient of Conv2D with respect to its filter."))


class _ConvGeometry:
    """Attr parsing shared by the Conv2D backprop kernels (done once per node)."""

    def __init__(self, ctx: Any):
        attrs = ctx.attrs
        try:
            _check_conv_attrs(attrs, ctx.op_type)
        except ValueError as e:
            raise _invalid(str(e)) from None
        fmt = attrs.get("data_format", "NHWC")
        self.nchw = fmt == "NCHW"
        bi, hi, wi, ci = _nhwc_index(fmt)
        strides = list(attrs["strides"])
        dil = list(attrs.get("dilations") or [1, 1, 1, 1])
        if strides[bi] != 1 or strides[ci] != 1:
            raise _invalid("Current implementation does not yet support strides in the batch "
                           "and depth dimensions.")
        if dil[bi] != 1 or dil[ci] != 1:
            raise _invalid("Current implementation does not yet support dilations in the "
                           "batch and depth dimensions.")
        self.sh, self.sw = strides[hi], strides[wi]
        self.dh, self.dw = dil[hi], dil[wi]
        self.padding = attrs["padding"]
        self.explicit = _explicit_pads(attrs, fmt) if self.padding == "EXPLICIT" \
            else ((0, 0), (0, 0))
        self.op_type = ctx.op_type

    def to_nhwc(self, xp: Any, a: Any) -> Any:
        return xp.transpose(a, (0, 2, 3, 1)) if self.nchw else a

    def from_nhwc(self, xp: Any, a: Any) -> Any:
        return xp.transpose(a, (0, 3, 1, 2)) if self.nchw else a

    def sizes_nhwc(self, sizes: list[int]) -> list[int]:
        return [sizes[0], sizes[2], sizes[3], sizes[1]] if self.nchw else sizes

    def output_geometry(self, h: int, w: int, kh: int, kw: int
                        ) -> tuple[int, int, int, int, int, int]:
        try:
            oh, pt, pb = _windowed_size(h, (kh - 1) * self.dh + 1, self.sh, self.padding,
                                        *self.explicit[0])
            ow, pl, pr = _windowed_size(w, (kw - 1) * self.dw + 1, self.sw, self.padding,
                                        *self.explicit[1])
        except ValueError as e:
            raise _invalid(f"{self.op_type}: {e}") from None
        return oh, ow, pt, pb, pl, pr

    def check_out_backprop(self, dy_shape: tuple[int, ...], want: tuple[int, ...]) -> None:
        if tuple(dy_shape) != tuple(want):
            raise _invalid(f"{self.op_type}: Size of out_backprop doesn't match computed: "
                           f"actual = {_fmt(dy_shape)}, computed = {_fmt(want)} (NHWC)")

    def windows(self, kh: int, kw: int, oh: int, ow: int) -> list[tuple[slice, slice]]:
        he, we = (oh - 1) * self.sh + 1, (ow - 1) * self.sw + 1
        return [(slice(i * self.dh, i * self.dh + he, self.sh),
                 slice(j * self.dw, j * self.dw + we, self.sw))
                for i in range(kh) for j in range(kw)]


def _sizes_arg(sizes: Any, name: str, op_type: str,
               to_host: Callable[[Any], np.ndarray]) -> list[int]:
    sizes = to_host(sizes)
    if np.ndim(sizes) != 1 or np.size(sizes) != 4:
        raise _invalid(f"{op_type}: {name} input must be 1-dim with 4 elements, not "
                       f"{_fmt(np.shape(sizes))}")
    s = _ilist(sizes, np.asarray)
    if any(v < 0 for v in s):
        raise _invalid(f"{op_type}: {name} must be non-negative, got {_fmt(s)}")
    return s


@ks.kernel("Conv2DBackpropInput", expensive=True, host_memory=("input_sizes",))
def _conv2d_backprop_input_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    geo = _ConvGeometry(ctx)
    out_dt = ctx.output_dtypes[0].np
    cdt = _float_compute_dtype(ctx.output_dtypes[0])
    host = host_reader(ctx)

    def conv2d_backprop_input(input_sizes: Any, w: Any, dy: Any) -> Any:
        n, h, wd, c = geo.sizes_nhwc(_sizes_arg(input_sizes, "input_sizes", geo.op_type,
                                                host))
        if w.ndim != 4:
            raise _invalid(f"{geo.op_type}: filter must be 4-dimensional: {_fmt(w.shape)}")
        if dy.ndim != 4:
            raise _invalid(f"{geo.op_type}: out_backprop must be 4-dimensional: "
                           f"{_fmt(dy.shape)}")
        kh, kw, fc, fo = w.shape
        if fc != c:
            raise _invalid(f"{geo.op_type}: input and filter must have the same depth: "
                           f"{c} vs {fc}")
        dy = geo.to_nhwc(xp, dy)
        oh, ow, pt, pb, pl, pr = geo.output_geometry(h, wd, kh, kw)
        geo.check_out_backprop(dy.shape, (n, oh, ow, fo))
        if n * h * wd * c == 0 or dy.size == 0 or kh * kw == 0:
            return geo.from_nhwc(xp, xp.zeros((n, h, wd, c), dtype=out_dt))
        if geo.sh == 1 and geo.sw == 1:
            # stride 1: the forward convolution of dy with the flipped filter
            rows = _rows.input_grad_geometry(h, wd, c, kh, kw, oh, ow, pt, pl, geo.dh,
                                             geo.dw, fo)
            if rows is not None and _rows.usable(xp, rows):
                wf = _rows.flipped_filter(w.astype(cdt, copy=False))
                dx = _rows.forward(ctx, dy.astype(cdt, copy=False), wf, rows, out_dt)
                return geo.from_nhwc(xp, dx)
        # one GEMM per window offset (a batched matmul), each giving that offset's
        # contribution as a contiguous (n, oh, ow, c) block: adding those into the padded
        # input gradient reads contiguously (col2im over a (n, oh, ow, kh*kw, c) result
        # read with a stride of kh*kw*c, measured 1.5x slower)
        wt = w.astype(cdt, copy=False).reshape(kh * kw, c, fo).transpose(0, 2, 1)
        dyc = dy.astype(cdt, copy=False)
        dxp = xp.zeros((n, h + pt + pb, wd + pl + pr, c), dtype=wt.dtype)
        wins = geo.windows(kh, kw, oh, ow)

        def part(lo: int, hi: int) -> None:
            cols = xp.matmul(dyc[lo:hi].reshape(1, -1, fo), wt)
            dst = dxp[lo:hi]
            for idx, (si, sj) in enumerate(wins):
                dst[:, si, sj, :] += cols[idx].reshape(hi - lo, oh, ow, c)

        batch_parts(ctx, n, oh * ow * kh * kw * c * wt.itemsize, part)
        dx = dxp[:, pt:pt + h, pl:pl + wd, :].astype(out_dt, copy=False)
        return geo.from_nhwc(xp, dx)

    return conv2d_backprop_input


@ks.kernel("Conv2DBackpropFilter", expensive=True, host_memory=("filter_sizes",))
def _conv2d_backprop_filter_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    geo = _ConvGeometry(ctx)
    out_dt = ctx.output_dtypes[0].np
    cdt = _float_compute_dtype(ctx.output_dtypes[0])
    host = host_reader(ctx)

    def conv2d_backprop_filter(x: Any, filter_sizes: Any, dy: Any) -> Any:
        kh, kw, fc, fo = _sizes_arg(filter_sizes, "filter_sizes", geo.op_type, host)
        if x.ndim != 4:
            raise _invalid(f"{geo.op_type}: input must be 4-dimensional: {_fmt(x.shape)}")
        if dy.ndim != 4:
            raise _invalid(f"{geo.op_type}: out_backprop must be 4-dimensional: "
                           f"{_fmt(dy.shape)}")
        x, dy = geo.to_nhwc(xp, x), geo.to_nhwc(xp, dy)
        n, h, wd, c = x.shape
        if fc != c:
            raise _invalid(f"{geo.op_type}: input and filter must have the same depth: "
                           f"{c} vs {fc}")
        oh, ow, pt, pb, pl, pr = geo.output_geometry(h, wd, kh, kw)
        geo.check_out_backprop(dy.shape, (n, oh, ow, fo))
        if dy.size == 0 or x.size == 0 or kh * kw * fc * fo == 0:
            return xp.zeros((kh, kw, fc, fo), dtype=out_dt)
        rows = _rows.geometry(h, wd, c, kh, kw, oh, ow, pt, pl, geo.sh, geo.sw, geo.dh,
                              geo.dw)
        grad = _rows.filter_grad if _rows.usable(xp, rows) else \
            _rows.taps_filter_grad if _rows.usable_taps(xp, rows) else None
        if grad is not None:
            dw = grad(ctx, x.astype(cdt, copy=False), dy.astype(cdt, copy=False), rows)
            return dw.astype(out_dt, copy=False)
        xc = x.astype(cdt, copy=False)
        if pt or pb or pl or pr:
            xc = xp.pad(xc, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
        k = kh * kw * c
        dyc = dy.astype(cdt, copy=False)

        def part(lo: int, hi: int) -> Any:
            patches = window_patches(xp, xc[lo:hi], (oh, ow), (kh, kw), (geo.sh, geo.sw),
                                     (geo.dh, geo.dw))
            return xp.matmul(patches.reshape(-1, k).T, dyc[lo:hi].reshape(-1, fo))

        dw = sum_parts(batch_parts(ctx, n, oh * ow * k * xc.itemsize, part))
        return dw.reshape(kh, kw, c, fo).astype(out_dt, copy=False)

    return conv2d_backprop_filter


def _conv_attrs(op: Any) -> dict[str, Any]:
    a = op.node_attrs
    return {"strides": list(a["strides"]), "padding": a["padding"],
            "explicit_paddings": list(a.get("explicit_paddings") or []),
            "use_cudnn_on_gpu": a.get("use_cudnn_on_gpu", True),
            "data_format": a.get("data_format", "NHWC"),
            "dilations": list(a.get("dilations") or [1, 1, 1, 1])}


@ks.gradient("Conv2D")
def _conv2d_grad(op: Any, grad: Tensor) -> list[Any]:
    x, w = op.inputs
    attrs = _conv_attrs(op)
    return [apply_op("Conv2DBackpropInput", input_sizes=shape_tensor(x), filter=w,
                     out_backprop=grad, **attrs),
            apply_op("Conv2DBackpropFilter", input=x, filter_sizes=shape_tensor(w),
                     out_backprop=grad, **attrs)]


@ks.gradient("Conv2DBackpropInput")
def _conv2d_backprop_input_grad(op: Any, grad: Tensor) -> list[Any]:
    _, w, dy = op.inputs
    attrs = _conv_attrs(op)
    return [None,
            apply_op("Conv2DBackpropFilter", input=grad, filter_sizes=shape_tensor(w),
                     out_backprop=dy, **attrs),
            apply_op("Conv2D", input=grad, filter=w, **attrs)]


@ks.gradient("Conv2DBackpropFilter")
def _conv2d_backprop_filter_grad(op: Any, grad: Tensor) -> list[Any]:
    x, _, dy = op.inputs
    attrs = _conv_attrs(op)
    return [apply_op("Conv2DBackpropInput", input_sizes=shape_tensor(x), filter=grad,
                     out_backprop=dy, **attrs),
            None,
            apply_op("Conv2D", input=x, filter=grad, **attrs)]


def _conv_api_attrs(strides: Any, padding: Any, use_cudnn_on_gpu: bool, data_format: str,
                    dilations: Any) -> dict[str, Any]:
    padding, explicit = _convert_padding(padding)
    return {"strides": _strides_list(strides), "padding": padding,
            "explicit_paddings": explicit, "use_cudnn_on_gpu": use_cudnn_on_gpu,
            "data_format": data_format,
            "dilations": list(dilations) if dilations is not None else [1, 1, 1, 1]}


def conv2d_backprop_input(input_sizes: Any, filter: Any = None, out_backprop: Any = None,
                          strides: Any = None, padding: Any = None,
                          use_cudnn_on_gpu: bool = True, data_format: str = "NHWC",
                          dilations: Any = (1, 1, 1, 1), name: str | None = None,
                          filters: Any = None) -> Tensor:
    """The gradient of ``conv2d`` with respect to its input, of shape ``input_sizes``
    (``tf.nn.conv2d_backprop_input``)."""
    filter = _deprecated_lookup("filters", filters, "filter", filter)
    return apply_op("Conv2DBackpropInput", name=name, input_sizes=input_sizes, filter=filter,
                    out_backprop=out_backprop,
                    **_conv_api_attrs(strides, padding, use_cudnn_on_gpu, data_format,
                                      dilations))


def conv2d_backprop_filter(input: Any, filter_sizes: Any, out_backprop: Any, strides: Any,
                           padding: Any, use_cudnn_on_gpu: bool = True,
                           data_format: str = "NHWC", dilations: Any = (1, 1, 1, 1),
                           name: str | None = None) -> Tensor:
    """The gradient of ``conv2d`` with respect to its filter, of shape ``filter_sizes``
    (``tf.nn.conv2d_backprop_filter``)."""
    return apply_op("Conv2DBackpropFilter", name=name, input=input, filter_sizes=filter_sizes,
                    out_backprop=out_backprop,
                    **_conv_api_attrs(strides, padding, use_cudnn_on_gpu, data_format,
                                      dilations))


def conv2d_transpose(value: Any = None, filter: Any = None, output_shape: Any = None,
                     strides: Any = None, padding: str = "SAME", data_format: str = "NHWC",
                     name: str | None = None, input: Any = None, filters: Any = None,
                     dilations: Any = None) -> Tensor:
    """The transpose of ``conv2d`` (``tf.nn.conv2d_transpose``, TF1 signature): the
    gradient of a convolution producing ``value`` with respect to its input of shape
    ``output_shape``.

    :raises ValueError: when the channels of ``value``, ``filter`` and ``output_shape``
        disagree statically, or the data format is unknown.
    """
    value = _deprecated_lookup("input", input, "value", value)
    filter = _deprecated_lookup("filters", filters, "filter", filter)
    with name_scope(name, "conv2d_transpose", [value, filter, output_shape]) as scope:
        value = convert_to_tensor(value, name="value")
        filter = convert_to_tensor(filter, name="filter")
        if data_format not in ("NCHW", "NHWC"):
            raise ValueError("data_format has to be either NCHW or NHWC.")
        axis = 3 if data_format == "NHWC" else 1
        vd, fd = value.shape.as_tuple(), filter.shape.as_tuple()
        if vd is not None and fd is not None and len(vd) == 4 and len(fd) == 4 and \
                vd[axis] is not None and fd[3] is not None and vd[axis] != fd[3]:
            raise ValueError(f"input channels does not match filter's input channels, "
                             f"{vd[axis]} != {fd[3]}")
        out_shape = _convert(output_shape, dtype=_dt.int32, name="output_shape")
        if out_shape.shape.as_tuple() not in (None, (4,), (None,)):
            raise ValueError(f"output_shape must have shape (4,), got {out_shape.shape}")
        ov = _static_vector(out_shape)
        if ov is not None and fd is not None and len(fd) == 4 and fd[2] is not None and \
                int(ov[axis]) != fd[2]:
            raise ValueError(f"output_shape does not match filter's output channels, "
                             f"{int(ov[axis])} != {fd[2]}")
        return apply_op("Conv2DBackpropInput", name=scope, input_sizes=out_shape,
                        filter=filter, out_backprop=value,
                        **_conv_api_attrs(_get_sequence(strides, 2, axis, "strides"), padding,
                                          True, data_format,
                                          _get_sequence(dilations, 2, axis, "dilations")))


def _static_vector(t: Tensor) -> Any:
    v = _static_value(t)
    return None if v is None else np.asarray(v).reshape(-1)


for _name, _fn in (("nn.conv2d_backprop_input", conv2d_backprop_input),
                   ("nn.conv2d_backprop_filter", conv2d_backprop_filter),
                   ("nn.conv2d_transpose", conv2d_transpose)):
    if _name not in ks.api_names:
        ks.api(_name)(_fn)


# =======================================================================================
# pooling gradient ops
# =======================================================================================
_POOL_ATTRS = ["ksize: list(int) >= 4", "strides: list(int) >= 4", "padding: {'SAME', 'VALID'}",
               "data_format: {'NHWC', 'NCHW'} = 'NHWC'"]


def _input_shape(index: int) -> Callable[[Any], list[TensorShape]]:
    def shape_fn(op: Any) -> list[TensorShape]:
        _with_rank(op, op.inputs[index].shape, 4)
        s = op.inputs[index].shape
        return [s if s.ndims is not None else unknown_shape(4)]

    return shape_fn


def _avg_pool_grad_shape(op: Any) -> list[TensorShape]:
    s = _shape_value(op.inputs[0], op)
    if s.ndims is not None and s.ndims != 4:
        raise _shape_error(op, f"Shape must be rank 4 but is rank {s.ndims}")
    return [s if s.ndims is not None else unknown_shape(4)]


ks.op(
    OpDef("MaxPoolGrad", inputs=["orig_input: T", "orig_output: T", "grad: T"],
          outputs=["output: T"], attrs=_POOL_ATTRS + [f"T: {{{_REAL_T}}} = DT_FLOAT"],
          shape_fn=_input_shape(0),
          doc="The gradient of MaxPool: each output gradient goes to its window's max."),
    OpDef("MaxPoolGradGrad", inputs=["orig_input: T", "orig_output: T", "grad: T"],
          outputs=["output: T"], attrs=_POOL_ATTRS + [f"T: {{{_REAL_T}}}"],
          shape_fn=_input_shape(1),
          doc="The gradient of MaxPoolGrad: grad picked at each window's max."),
    OpDef("AvgPoolGrad", inputs=["orig_input_shape: int32", "grad: T"], outputs=["output: T"],
          attrs=_POOL_ATTRS + [_FLOAT_T], shape_fn=_avg_pool_grad_shape,
          doc="The gradient of AvgPool: each output gradient spread evenly over the valid "
              "elements of its window."),
)


class _PoolGeometry:
    """Attr parsing shared by the pooling gradient kernels: windows over (H, W, C) of
    NHWC data, as the forward pooling kernels use."""

    def __init__(self, ctx: Any, avg: bool):
        attrs = ctx.attrs
        fmt = attrs.get("data_format", "NHWC")
        self.op_type = ctx.op_type
        ksize, strides = list(attrs["ksize"]), list(attrs["strides"])
        if len(ksize) != 4 or len(strides) != 4:
            raise _invalid("Sliding window ksize and strides fields must specify 4 "
                           "dimensions")
        if any(v <= 0 for v in ksize + strides):
            raise _invalid(f"{self.op_type}: ksize and strides must be positive")
        bi, hi, wi, ci = _nhwc_index(fmt)
        if ksize[bi] != 1 or strides[bi] != 1:
            raise errors.UnimplementedError(
                None, None, "Pooling is not yet supported on the batch dimension.")
        if avg and (ksize[ci] != 1 or strides[ci] != 1):
            raise errors.UnimplementedError(
                None, None, "Non-spatial pooling is not yet supported. Volunteers? :)")
        self.ks3 = (ksize[hi], ksize[wi], ksize[ci])
        self.st3 = (strides[hi], strides[wi], strides[ci])
        self.padding = attrs["padding"]
        self.nchw = fmt == "NCHW"

    def to_nhwc(self, xp: Any, a: Any) -> Any:
        return xp.transpose(a, (0, 2, 3, 1)) if self.nchw else a

    def from_nhwc(self, xp: Any, a: Any) -> Any:
        return xp.transpose(a, (0, 3, 1, 2)) if self.nchw else a

    def geometry(self, dims: tuple[int, ...]) -> list[tuple[int, int, int]]:
        """(output size, pad before, pad after) for H, W, C."""
        out = []
        for n_, k_, s_ in zip(dims, self.ks3, self.st3):
            try:
                out.append(_windowed_size(n_, k_, s_, self.padding))
            except ValueError as e:
                raise _invalid(str(e)) from None
        return out

    def windows(self, geo: list[tuple[int, int, int]]) -> list[tuple[slice, ...]]:
        """Index tuples of the strided views, one per window offset, in row-major order."""
        ext = [(o - 1) * s + 1 for (o, _, _), s in zip(geo, self.st3)]
        return [(slice(None), slice(i, i + ext[0], self.st3[0]),
                 slice(j, j + ext[1], self.st3[1]), slice(k, k + ext[2], self.st3[2]))
                for i in range(self.ks3[0]) for j in range(self.ks3[1])
                for k in range(self.ks3[2])]

    @staticmethod
    def padded_shape(n: int, geo: list[tuple[int, int, int]],
                     dims: tuple[int, ...]) -> tuple[int, ...]:
        return (n,) + tuple(d + lo + hi for d, (_, lo, hi) in zip(dims, geo))

    @staticmethod
    def crop(geo: list[tuple[int, int, int]], dims: tuple[int, ...]) -> tuple[slice, ...]:
        return (slice(None),) + tuple(slice(lo, lo + d) for d, (_, lo, _) in zip(dims, geo))


def _max_positions(xp: Any, pg: _PoolGeometry, x: Any, geo: list[tuple[int, int, int]]
                   ) -> tuple[Any, list[tuple[slice, ...]]]:
    """The window offset of each output's maximum (-1 for none), TF CPU's choice: the
    first valid element of the window is taken, then any strictly greater one, scanning
    the window in row-major order (ties keep the first; NaNs are skipped)."""
    dims = x.shape[1:]
    xp_pad = pg.padded_shape(x.shape[0], geo, dims)
    pads = [(0, 0)] + [(lo, hi) for _, lo, hi in geo]
    if any(p != (0, 0) for p in pads):
        xpd = xp.pad(x, pads)
        valid = xp.pad(xp.ones((1,) + tuple(dims), dtype=bool), pads)
    else:
        xpd, valid = x, None
    assert xpd.shape == xp_pad
    outs = (x.shape[0],) + tuple(g[0] for g in geo)
    best = xp.zeros(outs, dtype=x.dtype)
    arg = xp.full(outs, -1, dtype=np.int64)
    wins = pg.windows(geo)
    for o, key in enumerate(wins):
        win = xpd[key]
        take = (arg < 0) | (win > best)
        if valid is not None:
            take &= valid[(slice(0, 1),) + key[1:]]
        best = xp.where(take, win, best)
        arg = xp.where(take, o, arg)
    return arg, wins


def _tiled(pg: _PoolGeometry, geo: list[tuple[int, int, int]]) -> bool:
    """Whether the pooling windows tile the input: no padding, no pooling over channels
    and strides equal to the window (the usual 2x2/2 max pool), so every input element
    lies in at most one window."""
    return (pg.ks3[2] == 1 and pg.st3[2] == 1 and pg.st3[:2] == pg.ks3[:2]
            and all(lo == 0 and hi == 0 for _, lo, hi in geo))


def _max_pool_grad_tiled(ctx: Any, pg: _PoolGeometry, x: Any, dy: Any, out_dt: Any) -> Any:
    """MaxPoolGrad when the windows tile the input (see :func:`_tiled`): the input is
    viewed as ``(n, oh, kh, ow, kw, c)`` and each window offset is one vectorised pass,
    with arithmetic instead of masked assignment (numpy's ``where``/masked ``copyto``
    cost 5-10x a plain ufunc pass). The same choice as :func:`_max_positions`: the first
    maximum in row-major window order. Returns None when a window starts with NaN (the
    general path handles that case exactly)."""
    xp = ctx.xp
    n, h, w, c = x.shape
    kh, kw = pg.ks3[0], pg.ks3[1]
    oh, ow = dy.shape[1], dy.shape[2]
    xw = x[:, :oh * kh, :ow * kw, :].reshape(n, oh, kh, ow, kw, c)
    if x.dtype.kind in "fc" and bool(xp.isnan(xw[:, :, 0, :, 0, :]).any()):
        return None
    dx6 = xp.empty((n, oh, kh, ow, kw, c), dtype=out_dt)

    def part(lo: int, hi: int) -> None:
        xs = xw[lo:hi]
        best = xs[:, :, 0, :, 0, :].copy()
        arg = xp.zeros(best.shape, dtype=np.int8)
        for o in range(1, kh * kw):
            win = xs[:, :, o // kw, :, o % kw, :]
            take = win > best          # strictly greater: ties keep the earlier offset
            arg += take * (o - arg).astype(np.int8, copy=False)
            xp.fmax(best, win, out=best)    # fmax skips NaNs, as the comparison does
        for o in range(kh * kw):
            xp.multiply(dy[lo:hi], arg == o, out=dx6[lo:hi, :, o // kw, :, o % kw, :])

    batch_parts(ctx, n, x[0].size * x.itemsize * 4, part)
    dx = dx6.reshape(n, oh * kh, ow * kw, c)
    if (oh * kh, ow * kw) != (h, w):    # rows/columns no window reaches get nothing
        full = xp.zeros(x.shape, dtype=out_dt)
        full[:, :oh * kh, :ow * kw, :] = dx
        dx = full
    return dx


@ks.kernel("MaxPoolGrad", expensive=True)
def _max_pool_grad_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    pg = _PoolGeometry(ctx, avg=False)
    out_dt = ctx.output_dtypes[0].np

    def max_pool_grad(x: Any, y: Any, dy: Any) -> Any:
        for what, a in (("orig_input", x), ("orig_output", y), ("grad", dy)):
            if a.ndim != 4:
                raise _invalid(f"{what} must be 4-dimensional: {_fmt(a.shape)}")
        x, y, dy = pg.to_nhwc(xp, x), pg.to_nhwc(xp, y), pg.to_nhwc(xp, dy)
        geo = pg.geometry(x.shape[1:])
        outs = (x.shape[0],) + tuple(g[0] for g in geo)
        if tuple(dy.shape) != outs or tuple(y.shape) != outs:
            raise _invalid(f"Expected orig_output and grad shape {_fmt(outs)} (NHWC), got "
                           f"{_fmt(y.shape)} and {_fmt(dy.shape)}")
        if x.size == 0 or dy.size == 0:
            return pg.from_nhwc(xp, xp.zeros(x.shape, dtype=out_dt))
        if _tiled(pg, geo):
            dx = _max_pool_grad_tiled(ctx, pg, x, dy, out_dt)
            if dx is not None:
                return pg.from_nhwc(xp, dx)
        arg, wins = _max_positions(xp, pg, x, geo)
        dxp = xp.zeros(pg.padded_shape(x.shape[0], geo, x.shape[1:]), dtype=out_dt)
        zero = xp.zeros((), dtype=out_dt)
        for o, key in enumerate(wins):
            dxp[key] += xp.where(arg == o, dy, zero)
        return pg.from_nhwc(xp, dxp[pg.crop(geo, x.shape[1:])])

    return max_pool_grad


@ks.kernel("MaxPoolGradGrad", expensive=True)
def _max_pool_grad_grad_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    pg = _PoolGeometry(ctx, avg=False)
    out_dt = ctx.output_dtypes[0].np

    def max_pool_grad_grad(x: Any, y: Any, g: Any) -> Any:
        for what, a in (("orig_input", x), ("orig_output", y), ("grad", g)):
            if a.ndim != 4:
                raise _invalid(f"{what} must be 4-dimensional: {_fmt(a.shape)}")
        x, y, g = pg.to_nhwc(xp, x), pg.to_nhwc(xp, y), pg.to_nhwc(xp, g)
        if g.shape != x.shape:
            raise _invalid(f"grad must have the shape of orig_input: {_fmt(g.shape)} vs "
                           f"{_fmt(x.shape)}")
        geo = pg.geometry(x.shape[1:])
        outs = (x.shape[0],) + tuple(gg[0] for gg in geo)
        if tuple(y.shape) != outs:
            raise _invalid(f"Expected orig_output shape {_fmt(outs)} (NHWC), got "
                           f"{_fmt(y.shape)}")
        out = xp.zeros(outs, dtype=out_dt)
        if x.size == 0 or out.size == 0:
            return pg.from_nhwc(xp, out)
        arg, wins = _max_positions(xp, pg, x, geo)
        pads = [(0, 0)] + [(lo, hi) for _, lo, hi in geo]
        gp = xp.pad(g, pads) if any(p != (0, 0) for p in pads) else g
        for o, key in enumerate(wins):
            out = xp.where(arg == o, gp[key], out)
        return pg.from_nhwc(xp, out.astype(out_dt, copy=False))

    return max_pool_grad_grad


@ks.kernel("AvgPoolGrad", expensive=True, host_memory=("orig_input_shape",))
def _avg_pool_grad_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    pg = _PoolGeometry(ctx, avg=True)
    out_dt = ctx.output_dtypes[0].np
    cdt = _float_compute_dtype(ctx.output_dtypes[0])
    host = host_reader(ctx)

    def avg_pool_grad(orig_shape: Any, dy: Any) -> Any:
        orig_shape = host(orig_shape)
        if np.ndim(orig_shape) != 1 or np.size(orig_shape) != 4:
            raise _invalid(f"orig_input_shape must be 1-dimensional and 4 elements, got "
                           f"{_fmt(np.shape(orig_shape))}")
        if dy.ndim != 4:
            raise _invalid(f"grad must be 4-dimensional: {_fmt(dy.shape)}")
        s = _ilist(orig_shape, np.asarray)
        shape = (s[0], s[2], s[3], s[1]) if pg.nchw else tuple(s)
        dy = pg.to_nhwc(xp, dy)
        dims = shape[1:]
        geo = pg.geometry(dims)
        outs = (shape[0],) + tuple(g[0] for g in geo)
        if tuple(dy.shape) != outs:
            raise _invalid(f"Expected grad shape {_fmt(outs)} (NHWC), got {_fmt(dy.shape)}")
        if dy.size == 0 or int(np.prod(shape)) == 0:
            return pg.from_nhwc(xp, xp.zeros(shape, dtype=out_dt))
        counts = None
        for ax, ((o, lo, _), n_, k_, s_) in enumerate(zip(geo, dims, pg.ks3, pg.st3)):
            start = np.arange(o) * s_ - lo
            cnt = np.minimum(start + k_, n_) - np.maximum(start, 0)
            cshape = [1, 1, 1]
            cshape[ax] = o
            cnt = cnt.reshape(cshape)
            counts = cnt if counts is None else counts * cnt
        g = dy.astype(cdt, copy=False) / xp.asarray(counts.astype(cdt))
        dxp = xp.zeros(pg.padded_shape(shape[0], geo, dims), dtype=cdt)
        for key in pg.windows(geo):
            dxp[key] += g
        return pg.from_nhwc(xp, dxp[pg.crop(geo, dims)].astype(out_dt, copy=False))

    return avg_pool_grad


def register_pool_gradients(ops: dict[str, str], default_format: str,
                            avg_input: str) -> None:
    """The gradients of a pooling family, 2-D or 3-D: ``ops`` names its ``max``,
    ``max_grad``, ``max_grad_grad``, ``avg`` and ``avg_grad`` ops; ``avg_input`` is the
    name of the average pool's input (``value`` for AvgPool, ``input`` for AvgPool3D).
    MaxPoolGrad and MaxPoolGradGrad are each other's gradients (their first two inputs
    get zeros), AvgPoolGrad's is an AvgPool of the incoming gradient."""

    def attrs(op: Any) -> dict[str, Any]:
        a = op.node_attrs
        return {"ksize": list(a["ksize"]), "strides": list(a["strides"]),
                "padding": a["padding"], "data_format": a.get("data_format", default_format)}

    def max_grad(op: Any, grad: Tensor) -> list[Any]:
        return [apply_op(ops["max_grad"], orig_input=op.inputs[0], orig_output=op.outputs[0],
                         grad=grad, **attrs(op))]

    def swapped(target: str) -> Callable[[Any, Tensor], list[Any]]:
        def grad_fn(op: Any, grad: Tensor) -> list[Any]:
            x, y, _ = op.inputs
            return [apply_op("ZerosLike", x=x), apply_op("ZerosLike", x=y),
                    apply_op(target, orig_input=x, orig_output=y, grad=grad, **attrs(op))]
        return grad_fn

    def avg_grad(op: Any, grad: Tensor) -> list[Any]:
        return [apply_op(ops["avg_grad"], orig_input_shape=shape_tensor(op.inputs[0]),
                         grad=grad, **attrs(op))]

    def avg_grad_grad(op: Any, grad: Tensor) -> list[Any]:
        return [None, apply_op(ops["avg"], **{avg_input: grad}, **attrs(op))]

    ks.gradient(ops["max"])(max_grad)
    ks.gradient(ops["max_grad"])(swapped(ops["max_grad_grad"]))
    ks.gradient(ops["max_grad_grad"])(swapped(ops["max_grad"]))
    ks.gradient(ops["avg"])(avg_grad)
    ks.gradient(ops["avg_grad"])(avg_grad_grad)


register_pool_gradients({"max": "MaxPool", "max_grad": "MaxPoolGrad",
                         "max_grad_grad": "MaxPoolGradGrad", "avg": "AvgPool",
                         "avg_grad": "AvgPoolGrad"}, "NHWC", "value")


# =======================================================================================
# logging and random ops
# =======================================================================================
@ks.gradient("Print")
def _print_grad(op: Any, *grads: Tensor) -> list[Any]:
    return list(grads) + [None] * (len(op.inputs) - 1)


ks.not_differentiable("Assert", "PrintV2", "RandomUniform", "RandomStandardNormal",
                      "TruncatedNormal", "RandomUniformInt", "RandomShuffle", "Multinomial",
                      "RandomGamma")
