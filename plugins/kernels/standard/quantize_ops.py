"""Quantization ops of TF 1.15: fake quantization (``FakeQuantWithMinMaxArgs``,
``...Vars``, ``...VarsPerChannel`` and their gradient ops, with TF's straight-through
gradients registered), ``QuantizeV2``, ``Dequantize`` (modes MIN_COMBINED, MIN_FIRST,
SCALED) and ``QuantizedConcat``, exported under ``tf.quantization.*`` and the top level.

Arithmetic follows TF's CPU kernels step by step in float32 (the nudged ranges of fake
quantization, the rounding of each mode), so results match TF's bit for bit. Quantized
dtypes (qint8, quint8, qint16, quint16, qint32) hold their integer values in numpy
arrays of the matching integer type.
"""
from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from flowrt import dtypes as _dt
from flowrt.graph import Tensor, apply_op, convert_to_tensor
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import constant_value, ks
from .image_common import host, invalid, shape_error, to_device

__all__ = ["fake_quant_with_min_max_args", "fake_quant_with_min_max_args_gradient",
           "fake_quant_with_min_max_vars", "fake_quant_with_min_max_vars_gradient",
           "fake_quant_with_min_max_vars_per_channel",
           "fake_quant_with_min_max_vars_per_channel_gradient", "quantize", "quantize_v2",
           "dequantize", "quantized_concat"]

_F32 = np.float32
_QTYPES = "{qint8, quint8, qint32, qint16, quint16}"
_FQ_ATTRS = ["num_bits: int = 8", "narrow_range: bool = false"]


def _rank(op: Any, i: int, r: int) -> None:
    n = op.inputs[i].shape.ndims
    if n is not None and n != r:
        raise shape_error(op, f"Shape must be rank {r} but is rank {n}")


def _merged(op: Any, i: int, j: int) -> TensorShape:
    a, b = op.inputs[i].shape, op.inputs[j].shape
    if not a.is_compatible_with(b):
        raise shape_error(op, f"Dimensions must be equal, but shapes are {a} and {b}")
    return a.merge_with(b)


# =======================================================================================
# fake quantization
# =======================================================================================
def _nudge(mn: Any, mx: Any, num_bits: int, narrow: bool) -> tuple[Any, Any, Any]:
    """TF's Nudge: the range moved so that 0.0 is exactly representable; elementwise
    over arrays of mins and maxes. Returns (nudged_min, nudged_max, scale), float32."""
    qmin = _F32(1 if narrow else 0)
    qmax = _F32((1 << num_bits) - 1)
    mn = np.asarray(mn, _F32)
    mx = np.asarray(mx, _F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = ((mx - mn) / (qmax - qmin)).astype(_F32)
        zp_from_min = (qmin - mn / scale).astype(_F32)
        rounded = _round_away(zp_from_min)
        zp = np.where(zp_from_min < qmin, qmin, np.where(zp_from_min > qmax, qmax, rounded))
        zp = np.nan_to_num(zp).astype(np.int64).astype(_F32)
        return ((qmin - zp) * scale).astype(_F32), ((qmax - zp) * scale).astype(_F32), scale


def _fake_quant(x: np.ndarray, nmin: Any, nmax: Any, scale: Any, inv: bool) -> np.ndarray:
    """floor((clamp(x) - nudged_min) / scale + 0.5) * scale + nudged_min, in float32
    (``inv``: multiply by 1/scale, as the Args kernel does)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        shifted = (np.minimum(np.maximum(x, nmin), nmax) - nmin).astype(_F32)
        q = shifted * (_F32(1.0) / scale).astype(_F32) if inv else shifted / scale
        return (np.floor(q.astype(_F32) + _F32(0.5)) * scale + nmin).astype(_F32)


def _check_bits(num_bits: int) -> None:
    if not 2 <= num_bits <= 16:
        raise invalid(f"num_bits must be between 2 and 16, inclusive")


def _fq_unchanged(op: Any) -> list[TensorShape]:
    return [op.inputs[0].shape]


def _fq_args_grad_shape(op: Any) -> list[TensorShape]:
    return [_merged(op, 0, 1)]


def _fq_vars_shape(op: Any) -> list[TensorShape]:
    _rank(op, 1, 0)
    _rank(op, 2, 0)
    return [op.inputs[0].shape]


def _fq_vars_grad_shape(op: Any) -> list[TensorShape]:
    _rank(op, 2, 0)
    _rank(op, 3, 0)
    return [_merged(op, 0, 1), TensorShape([]), TensorShape([])]


def _per_channel_depth(op: Any, x: int, lo: int) -> int | None:
    s = op.inputs[x].shape
    if s.ndims is not None and not 1 <= s.ndims <= 4:
        raise shape_error(op, f"Shape must be at least rank 1 and at most rank 4 but is "
                              f"rank {s.ndims}")
    d = s.as_list()[-1] if s.ndims else None
    for i in (lo, lo + 1):
        t = op.inputs[i].shape
        if t.ndims is not None and t.ndims != 1:
            raise shape_error(op, f"Shape must be rank 1 but is rank {t.ndims}")
        e = t.as_list()[0] if t.ndims else None
        if d is not None and e is not None and d != e:
            raise shape_error(op, f"Dimensions must be equal, but are {d} and {e}")
        d = d if d is not None else e
    return d


def _fq_pc_shape(op: Any) -> list[TensorShape]:
    _per_channel_depth(op, 0, 1)
    return [op.inputs[0].shape]


def _fq_pc_grad_shape(op: Any) -> list[TensorShape]:
    d = _per_channel_depth(op, 1, 2)
    return [_merged(op, 0, 1), TensorShape([d]), TensorShape([d])]


ks.op(
    OpDef("FakeQuantWithMinMaxArgs", inputs=["inputs: float"], outputs=["outputs: float"],
          attrs=["min: float = -6", "max: float = 6"] + _FQ_ATTRS, shape_fn=_fq_unchanged,
          doc="Fake-quantizes inputs to num_bits over the nudged [min, max]."),
    OpDef("FakeQuantWithMinMaxArgsGradient", inputs=["gradients: float", "inputs: float"],
          outputs=["backprops: float"],
          attrs=["min: float = -6", "max: float = 6"] + _FQ_ATTRS,
          shape_fn=_fq_args_grad_shape,
          doc="Gradients where inputs lie in the nudged range, 0 elsewhere."),
    OpDef("FakeQuantWithMinMaxVars", inputs=["inputs: float", "min: float", "max: float"],
          outputs=["outputs: float"], attrs=_FQ_ATTRS, shape_fn=_fq_vars_shape,
          doc="Fake-quantizes inputs over the nudged range of the scalar min and max."),
    OpDef("FakeQuantWithMinMaxVarsGradient",
          inputs=["gradients: float", "inputs: float", "min: float", "max: float"],
          outputs=["backprops_wrt_input: float", "backprop_wrt_min: float",
                   "backprop_wrt_max: float"],
          attrs=_FQ_ATTRS, shape_fn=_fq_vars_grad_shape,
          doc="Straight-through gradients of FakeQuantWithMinMaxVars."),
    OpDef("FakeQuantWithMinMaxVarsPerChannel",
          inputs=["inputs: float", "min: float", "max: float"], outputs=["outputs: float"],
          attrs=_FQ_ATTRS, shape_fn=_fq_pc_shape,
          doc="Fake-quantizes each channel (last dimension) over its own range."),
    OpDef("FakeQuantWithMinMaxVarsPerChannelGradient",
          inputs=["gradients: float", "inputs: float", "min: float", "max: float"],
          outputs=["backprops_wrt_input: float", "backprop_wrt_min: float",
                   "backprop_wrt_max: float"],
          attrs=_FQ_ATTRS, shape_fn=_fq_pc_grad_shape,
          doc="Straight-through gradients of FakeQuantWithMinMaxVarsPerChannel."),
)


def _fq_attrs(ctx: Any) -> tuple[int, bool]:
    bits = int(ctx.attrs.get("num_bits", 8))
    _check_bits(bits)
    return bits, bool(ctx.attrs.get("narrow_range", False))


def _args_range(ctx: Any) -> tuple[float, float]:
    mn, mx = float(ctx.attrs.get("min", -6.0)), float(ctx.attrs.get("max", 6.0))
    if not mn < mx:
        raise invalid(f"min has to be smaller than max, was: {mn:g} >= {mx:g}")
    return mn, mx


@ks.kernel("FakeQuantWithMinMaxArgs")
def _fq_args_kernel(ctx: Any) -> Any:
    bits, narrow = _fq_attrs(ctx)
    nmin, nmax, scale = _nudge(*_args_range(ctx), bits, narrow)

    def compute(x: Any) -> Any:
        return to_device(ctx, _fake_quant(host(ctx, x), nmin, nmax, scale, True))

    return compute


def _inside(x: np.ndarray, nmin: Any, nmax: Any) -> np.ndarray:
    return (x >= nmin) & (x <= nmax)


@ks.kernel("FakeQuantWithMinMaxArgsGradient")
def _fq_args_grad_kernel(ctx: Any) -> Any:
    bits, narrow = _fq_attrs(ctx)
    nmin, nmax, _ = _nudge(*_args_range(ctx), bits, narrow)

    def compute(g: Any, x: Any) -> Any:
        g, x = host(ctx, g), host(ctx, x)
        if g.shape != x.shape:
            raise invalid(f"gradients and inputs must be the same size: {list(g.shape)} "
                          f"vs {list(x.shape)}")
        return to_device(ctx, np.where(_inside(x, nmin, nmax), g, _F32(0)).astype(_F32))

    return compute


def _scalar(a: Any, what: str) -> np.float32:
    a = np.asarray(a)
    if a.ndim != 0:
        raise invalid(f"`{what}` must be rank 0 but is rank {a.ndim}")
    return _F32(a)


@ks.kernel("FakeQuantWithMinMaxVars")
def _fq_vars_kernel(ctx: Any) -> Any:
    bits, narrow = _fq_attrs(ctx)

    def compute(x: Any, mn: Any, mx: Any) -> Any:
        nmin, nmax, scale = _nudge(_scalar(host(ctx, mn), "min"),
                                   _scalar(host(ctx, mx), "max"), bits, narrow)
        return to_device(ctx, _fake_quant(host(ctx, x), nmin, nmax, scale, False))

    return compute


@ks.kernel("FakeQuantWithMinMaxVarsGradient")
def _fq_vars_grad_kernel(ctx: Any) -> Any:
    bits, narrow = _fq_attrs(ctx)

    def compute(g: Any, x: Any, mn: Any, mx: Any) -> Any:
        g, x = host(ctx, g), host(ctx, x)
        if g.shape != x.shape:
            raise invalid(f"gradients and inputs must be the same size: {list(g.shape)} "
                          f"vs {list(x.shape)}")
        nmin, nmax, _ = _nudge(_scalar(host(ctx, mn), "min"),
                               _scalar(host(ctx, mx), "max"), bits, narrow)
        zero = _F32(0)
        gx = np.where(_inside(x, nmin, nmax), g, zero).astype(_F32)
        gmin = np.where(x < nmin, g, zero).sum(dtype=_F32)
        gmax = np.where(x > nmax, g, zero).sum(dtype=_F32)
        return (to_device(ctx, gx), to_device(ctx, np.asarray(gmin, _F32)),
                to_device(ctx, np.asarray(gmax, _F32)))

    return compute


def _channel_range(ctx: Any, x: np.ndarray, mn: Any, mx: Any, bits: int,
                   narrow: bool) -> tuple[Any, Any, Any]:
    mn, mx = host(ctx, mn), host(ctx, mx)
    if not 1 <= x.ndim <= 4:
        raise invalid(f"Only inputs of dimensions 1, 2 or 4 supported, inputs size: "
                      f"{x.ndim}")
    d = x.shape[-1]
    for nm, a in (("min", mn), ("max", mx)):
        if a.shape != (d,):
            got = a.shape[0] if a.ndim else list(a.shape)
            raise invalid(f"{nm} has incorrect size, expected {d} was {got}")
    return _nudge(mn, mx, bits, narrow)


@ks.kernel("FakeQuantWithMinMaxVarsPerChannel")
def _fq_pc_kernel(ctx: Any) -> Any:
    bits, narrow = _fq_attrs(ctx)

    def compute(x: Any, mn: Any, mx: Any) -> Any:
        x = host(ctx, x)
        nmin, nmax, scale = _channel_range(ctx, x, mn, mx, bits, narrow)
        return to_device(ctx, _fake_quant(x, nmin, nmax, scale, False))

    return compute


@ks.kernel("FakeQuantWithMinMaxVarsPerChannelGradient")
def _fq_pc_grad_kernel(ctx: Any) -> Any:
    bits, narrow = _fq_attrs(ctx)

    def compute(g: Any, x: Any, mn: Any, mx: Any) -> Any:
        g, x = host(ctx, g), host(ctx, x)
        if g.shape != x.shape:
            raise invalid(f"gradients and inputs must be the same size: {list(g.shape)} "
                          f"vs {list(x.shape)}")
        nmin, nmax, _ = _channel_range(ctx, x, mn, mx, bits, narrow)
        zero = _F32(0)
        axes = tuple(range(x.ndim - 1))
        gx = np.where(_inside(x, nmin, nmax), g, zero).astype(_F32)
        gmin = np.where(x < nmin, g, zero).sum(axis=axes, dtype=_F32)
        gmax = np.where(x > nmax, g, zero).sum(axis=axes, dtype=_F32)
        return to_device(ctx, gx), to_device(ctx, gmin), to_device(ctx, gmax)

    return compute


def _fq_opts(op: Any) -> dict[str, Any]:
    return {"num_bits": op.node_attrs.get("num_bits", 8),
            "narrow_range": op.node_attrs.get("narrow_range", False)}


@ks.gradient("FakeQuantWithMinMaxArgs")
def _fq_args_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("FakeQuantWithMinMaxArgsGradient", gradients=grad, inputs=op.inputs[0],
                     min=op.node_attrs.get("min", -6.0), max=op.node_attrs.get("max", 6.0),
                     **_fq_opts(op))]


@ks.gradient("FakeQuantWithMinMaxVars")
def _fq_vars_grad(op: Any, grad: Tensor) -> list[Any]:
    return list(apply_op("FakeQuantWithMinMaxVarsGradient", gradients=grad,
                         inputs=op.inputs[0], min=op.inputs[1], max=op.inputs[2],
                         **_fq_opts(op)))


@ks.gradient("FakeQuantWithMinMaxVarsPerChannel")
def _fq_pc_grad(op: Any, grad: Tensor) -> list[Any]:
    return list(apply_op("FakeQuantWithMinMaxVarsPerChannelGradient", gradients=grad,
                         inputs=op.inputs[0], min=op.inputs[1], max=op.inputs[2],
                         **_fq_opts(op)))


ks.not_differentiable("FakeQuantWithMinMaxArgsGradient", "FakeQuantWithMinMaxVarsGradient",
                      "FakeQuantWithMinMaxVarsPerChannelGradient")

FakeQuantWithMinMaxVarsGradient = namedtuple(
    "FakeQuantWithMinMaxVarsGradient",
    ["backprops_wrt_input", "backprop_wrt_min", "backprop_wrt_max"])
FakeQuantWithMinMaxVarsPerChannelGradient = namedtuple(
    "FakeQuantWithMinMaxVarsPerChannelGradient",
    ["backprops_wrt_input", "backprop_wrt_min", "backprop_wrt_max"])


def _f32(x: Any, name: str) -> Tensor:
    return convert_to_tensor(x, dtype=_dt.float32, name=name)


@ks.api("fake_quant_with_min_max_args", "quantization.fake_quant_with_min_max_args")
def fake_quant_with_min_max_args(inputs: Any, min: float = -6, max: float = 6,
                                 num_bits: int = 8, narrow_range: bool = False,
                                 name: str | None = None) -> Tensor:
    """Fake-quantizes float32 ``inputs`` to ``num_bits`` over ``[min, max]`` nudged so
    that 0.0 is exact: values are clamped to the nudged range and rounded to its steps.
    ``narrow_range`` uses steps 1..2^bits-1."""
    return apply_op("FakeQuantWithMinMaxArgs", name=name, inputs=inputs, min=float(min),
                    max=float(max), num_bits=num_bits, narrow_range=narrow_range)


@ks.api("fake_quant_with_min_max_args_gradient",
        "quantization.fake_quant_with_min_max_args_gradient")
def fake_quant_with_min_max_args_gradient(gradients: Any, inputs: Any, min: float = -6,
                                          max: float = 6, num_bits: int = 8,
                                          narrow_range: bool = False,
                                          name: str | None = None) -> Tensor:
    """``gradients`` where ``inputs`` lie inside the nudged range, 0 elsewhere."""
    return apply_op("FakeQuantWithMinMaxArgsGradient", name=name, gradients=gradients,
                    inputs=inputs, min=float(min), max=float(max), num_bits=num_bits,
                    narrow_range=narrow_range)


@ks.api("fake_quant_with_min_max_vars", "quantization.fake_quant_with_min_max_vars")
def fake_quant_with_min_max_vars(inputs: Any, min: Any, max: Any, num_bits: int = 8,
                                 narrow_range: bool = False,
                                 name: str | None = None) -> Tensor:
    """Fake quantization over the range given by the float32 scalar tensors ``min`` and
    ``max`` (typically variables trained through the registered gradient)."""
    return apply_op("FakeQuantWithMinMaxVars", name=name, inputs=inputs, min=min, max=max,
                    num_bits=num_bits, narrow_range=narrow_range)


@ks.api("fake_quant_with_min_max_vars_gradient",
        "quantization.fake_quant_with_min_max_vars_gradient")
def fake_quant_with_min_max_vars_gradient(gradients: Any, inputs: Any, min: Any, max: Any,
                                          num_bits: int = 8, narrow_range: bool = False,
                                          name: str | None = None) -> Any:
    """The straight-through gradients: ``(backprops_wrt_input, backprop_wrt_min,
    backprop_wrt_max)``; min and max get the summed gradients of the inputs below and
    above the nudged range."""
    return FakeQuantWithMinMaxVarsGradient(*apply_op(
        "FakeQuantWithMinMaxVarsGradient", name=name, gradients=gradients, inputs=inputs,
        min=min, max=max, num_bits=num_bits, narrow_range=narrow_range))


@ks.api("fake_quant_with_min_max_vars_per_channel",
        "quantization.fake_quant_with_min_max_vars_per_channel")
def fake_quant_with_min_max_vars_per_channel(inputs: Any, min: Any, max: Any,
                                             num_bits: int = 8, narrow_range: bool = False,
                                             name: str | None = None) -> Tensor:
    """Fake quantization of each channel (the last dimension of a rank 1-4 input) over
    its own range: ``min`` and ``max`` are 1-D with one entry per channel."""
    return apply_op("FakeQuantWithMinMaxVarsPerChannel", name=name, inputs=inputs, min=min,
                    max=max, num_bits=num_bits, narrow_range=narrow_range)


@ks.api("fake_quant_with_min_max_vars_per_channel_gradient",
        "quantization.fake_quant_with_min_max_vars_per_channel_gradient")
def fake_quant_with_min_max_vars_per_channel_gradient(
        gradients: Any, inputs: Any, min: Any, max: Any, num_bits: int = 8,
        narrow_range: bool = False, name: str | None = None) -> Any:
    """Per-channel straight-through gradients: ``(backprops_wrt_input, backprop_wrt_min,
    backprop_wrt_max)``, the last two 1-D (summed over all but the last dimension)."""
    return FakeQuantWithMinMaxVarsPerChannelGradient(*apply_op(
        "FakeQuantWithMinMaxVarsPerChannelGradient", name=name, gradients=gradients,
        inputs=inputs, min=min, max=max, num_bits=num_bits, narrow_range=narrow_range))


# =======================================================================================
# QuantizeV2, Dequantize
# =======================================================================================
def _quantize_shape(op: Any) -> list[TensorShape]:
    _rank(op, 1, 0)
    _rank(op, 2, 0)
    return [op.inputs[0].shape, TensorShape([]), TensorShape([])]


def _dequantize_shape(op: Any) -> list[TensorShape]:
    _rank(op, 1, 0)
    _rank(op, 2, 0)
    return [op.inputs[0].shape]


_MODE = "mode: {'MIN_COMBINED', 'MIN_FIRST', 'SCALED'} = 'MIN_COMBINED'"
ks.op(
    OpDef("QuantizeV2", inputs=["input: float", "min_range: float", "max_range: float"],
          outputs=["output: T", "output_min: float", "output_max: float"],
          attrs=[f"T: {_QTYPES}", _MODE,
                 "round_mode: {'HALF_AWAY_FROM_ZERO', 'HALF_TO_EVEN'} = "
                 "'HALF_AWAY_FROM_ZERO'"],
          shape_fn=_quantize_shape,
          doc="Quantizes float input to T over [min_range, max_range]."),
    OpDef("Dequantize", inputs=["input: T", "min_range: float", "max_range: float"],
          outputs=["output: float"], attrs=[f"T: {_QTYPES}", _MODE],
          shape_fn=_dequantize_shape, doc="Converts quantized input back to float."),
)


def _limits(dt: _dt.DType) -> tuple[int, int]:
    info = np.iinfo(dt.np)
    return int(info.min), int(info.max)


def _round_away(x: Any) -> Any:
    """std::round / Eigen's round: halves away from zero (exact for large values, where
    adding 0.5 would round)."""
    x = np.asarray(x)
    t = np.trunc(x)
    return (t + np.sign(x) * (np.abs(x - t) >= 0.5)).astype(x.dtype)


def _mode(ctx: Any) -> str:
    m = ctx.attrs.get("mode", "MIN_COMBINED")
    return m.decode() if isinstance(m, bytes) else m


def _min_first_quantize(x: np.ndarray, mn: np.float32, mx: np.float32,
                        dt: _dt.DType) -> np.ndarray:
    """TF's FloatTensorToQuantizedInPlaceUsingEigen (the MIN_FIRST mode)."""
    lo, hi = _limits(dt)
    steps = float(1 << (8 * np.dtype(dt.np).itemsize))
    scale = _F32(0.0 if mx == mn else (steps - 1.0) / (float(mx) - float(mn)))
    min_scaled = _F32(_round_away(np.asarray(mn * scale, _F32)))
    q = _round_away((x * scale).astype(_F32)) - (min_scaled - _F32(lo))
    q = np.minimum(np.maximum(q, max(_F32(lo), _F32(-2.147483648e+09))),
                   min(_F32(hi), _F32(2.147483520e+09)))
    return q.astype(np.int32).astype(dt.np)


@ks.kernel("QuantizeV2")
def _quantize_kernel(ctx: Any) -> Any:
    dt = ctx.output_dtypes[0]
    mode = _mode(ctx)
    rmode = ctx.attrs.get("round_mode", "HALF_AWAY_FROM_ZERO")
    rmode = rmode.decode() if isinstance(rmode, bytes) else rmode
    if rmode == "HALF_TO_EVEN" and mode != "SCALED":
        raise invalid(f"Round mode 'HALF_TO_EVEN' only supported for mode 'SCALED', but "
                      f"mode is '{mode}'.")
    lo, hi = _limits(dt)
    signed = lo < 0

    def compute(x: Any, mn: Any, mx: Any) -> Any:
        x = host(ctx, x).astype(_F32, copy=False)
        mn_a, mx_a = host(ctx, mn), host(ctx, mx)
        for nm, a in (("min_range", mn_a), ("max_range", mx_a)):
            if a.size != 1:
                raise invalid(f"{nm} must contain a single float element, but it "
                              f"contains {a.size} elements")
        in_min, in_max = _F32(mn_a.reshape(())), _F32(mx_a.reshape(()))
        if in_max < in_min:
            raise invalid("input_max_range must be larger than input_min_range.")
        min_r = min(_F32(0), in_min)
        eps = _F32(max(_F32(1), max(abs(in_min), abs(in_max))) / _F32(100))
        max_r = max(_F32(0), max(in_max, _F32(min_r + eps)))
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            if mode == "MIN_COMBINED":
                sf = _F32((float(hi) - float(lo)) / float(max_r - min_r))
                c = (np.minimum(np.maximum(x, min_r), max_r) - min_r).astype(_F32) * sf
                if signed:
                    half = _F32((float(hi) - float(lo) + 1) / 2.0)
                    out = _round_away((c - half).astype(_F32))
                else:
                    out = np.floor((c + _F32(0.5)).astype(_F32))
                out = out.astype(np.int64).astype(dt.np)
            elif mode == "MIN_FIRST":
                out = _min_first_quantize(x, min_r, max_r, dt)
            else:
                big = _F32(np.finfo(np.float32).max)
                flo, fhi = _F32(lo), _F32(hi)  # C++ int / float: float arithmetic
                s_min = _F32(flo / min_r) if flo * min_r > 0 else big
                s_max = _F32(fhi / max_r) if fhi * max_r > 0 else big
                sf = min(s_min, s_max)
                min_r, max_r = _F32(flo / sf), _F32(fhi / sf)
                c = (np.minimum(np.maximum(x, min_r), max_r) * sf).astype(_F32)
                r = np.rint(c) if rmode == "HALF_TO_EVEN" else _round_away(c)
                out = r.astype(np.int64).astype(dt.np)
        return (to_device(ctx, out), to_device(ctx, np.asarray(min_r, _F32)),
                to_device(ctx, np.asarray(max_r, _F32)))

    return compute


def _min_first_dequantize(q: np.ndarray, mn: np.float32, mx: np.float32,
                          dt: _dt.DType) -> np.ndarray:
    """TF's QuantizedTensorToFloatInPlaceUsingEigen (the MIN_FIRST mode)."""
    lo, _ = _limits(dt)
    steps = float(1 << (8 * np.dtype(dt.np).itemsize))
    scale = _F32((float(mx) - float(mn)) / (steps - 1.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        rounded = mn if mx == mn else _F32(_round_away(np.asarray(mn / scale, _F32)) * scale)
    return ((q.astype(_F32) - _F32(lo)) * scale + rounded).astype(_F32)


@ks.kernel("Dequantize")
def _dequantize_kernel(ctx: Any) -> Any:
    dt = ctx.input_dtypes[0]
    mode = _mode(ctx)
    lo, hi = _limits(dt)

    def compute(q: Any, mn: Any, mx: Any) -> Any:
        q = host(ctx, q)
        mn_a, mx_a = host(ctx, mn), host(ctx, mx)
        for nm, a in (("min_range", mn_a), ("max_range", mx_a)):
            if a.size != 1:
                raise invalid(f"{nm} must contain a single float element, but it "
                              f"contains {a.size} elements")
        mn_f, mx_f = _F32(mn_a.reshape(())), _F32(mx_a.reshape(()))
        qi = q.astype(np.int64).astype(_F32)
        with np.errstate(invalid="ignore", divide="ignore"):
            if mode == "MIN_COMBINED":
                sf = _F32((mx_f - mn_f) / (_F32(hi) - _F32(lo)))
                half = _F32((float(hi) - float(lo) + 1) / 2.0) if lo < 0 else _F32(0)
                out = ((qi + half) * sf + mn_f).astype(_F32)
            elif mode == "MIN_FIRST":
                out = _min_first_dequantize(q, mn_f, mx_f, dt)
            else:
                sf = _F32(mx_f / _F32(hi)) if lo == 0 else \
                    max(_F32(mn_f / _F32(lo)), _F32(mx_f / _F32(hi)))
                out = (qi * sf).astype(_F32)
        return to_device(ctx, out)

    return compute


QuantizeV2 = namedtuple("QuantizeV2", ["output", "output_min", "output_max"])
QuantizedConcat = namedtuple("QuantizedConcat", ["output", "output_min", "output_max"])


@ks.api("quantization.quantize", "quantize")
def quantize(input: Any, min_range: Any, max_range: Any, T: Any, mode: str = "MIN_COMBINED",
             round_mode: str = "HALF_AWAY_FROM_ZERO", name: str | None = None) -> Any:
    """Quantizes float ``input`` to the quantized dtype ``T`` over ``[min_range,
    max_range]``: ``(output, output_min, output_max)``, the last two the range actually
    used (widened to hold 0 and at least 1% of the largest magnitude).

    Modes: MIN_COMBINED scales the range onto T's range; MIN_FIRST rounds the scaled
    minimum first (no bias on repeated round trips); SCALED scales symmetrically about 0
    (``round_mode`` HALF_TO_EVEN only with SCALED)."""
    return QuantizeV2(*apply_op("QuantizeV2", name=name, input=input,
                                min_range=_f32(min_range, "min_range"),
                                max_range=_f32(max_range, "max_range"), T=_dt.as_dtype(T),
                                mode=mode, round_mode=round_mode))


@ks.api("quantize_v2")
def quantize_v2(input: Any, min_range: Any, max_range: Any, T: Any,
                mode: str = "MIN_COMBINED", name: str | None = None,
                round_mode: str = "HALF_AWAY_FROM_ZERO") -> Any:
    """``tf.quantize_v2``: :func:`quantize` with ``name`` before ``round_mode`` (TF's
    deprecated spelling)."""
    return quantize(input, min_range, max_range, T, mode=mode, round_mode=round_mode,
                    name=name)


@ks.api("quantization.dequantize", "dequantize")
def dequantize(input: Any, min_range: Any, max_range: Any, mode: str = "MIN_COMBINED",
               name: str | None = None) -> Tensor:
    """float32 values of the quantized ``input`` whose range is ``[min_range,
    max_range]``, inverting :func:`quantize` of the same ``mode``."""
    return apply_op("Dequantize", name=name, input=input,
                    min_range=_f32(min_range, "min_range"),
                    max_range=_f32(max_range, "max_range"), mode=mode)


# =======================================================================================
# QuantizedConcat
# =======================================================================================
def _quantized_concat_shape(op: Any) -> list[TensorShape]:
    _rank(op, 0, 0)
    n = (len(op.inputs) - 1) // 3
    vals = op.inputs[1:1 + n]
    for i in range(1 + n, 1 + 3 * n):
        _rank(op, i, 0)
    dim = constant_value(op.inputs[0])
    shapes = [v.shape for v in vals]
    rank = next((s.ndims for s in shapes if s.ndims is not None), None)
    if rank is None:
        return [unknown_shape(), TensorShape([]), TensorShape([])]
    if dim is None:
        return [unknown_shape(rank), TensorShape([]), TensorShape([])]
    d = int(dim)
    if not -rank <= d < rank:
        raise shape_error(op, f"Expected concat_dim in [{-rank}, {rank}), but got {d}")
    d %= rank
    out: list[int | None] = [None] * rank
    total: int | None = 0
    for s in shapes:
        if s.ndims is None:
            total = None
            continue
        if s.ndims != rank:
            raise shape_error(op, f"Shape must be rank {rank} but is rank {s.ndims}")
        dims = s.as_list()
        for i, v in enumerate(dims):
            if i == d:
                total = None if total is None or v is None else total + v
            elif v is not None:
                if out[i] is not None and out[i] != v:
                    raise shape_error(op, f"Dimension {i} in both shapes must be equal, "
                                          f"but are {out[i]} and {v}")
                out[i] = v
    out[d] = total
    return [TensorShape(out), TensorShape([]), TensorShape([])]


ks.op(OpDef("QuantizedConcat",
            inputs=["concat_dim: int32", "values: N * T", "input_mins: N * float",
                    "input_maxes: N * float"],
            outputs=["output: T", "output_min: float", "output_max: float"],
            attrs=["N: int >= 2", "T: type"], shape_fn=_quantized_concat_shape,
            doc="Concatenates quantized tensors, requantized into one common range."))
ks.not_differentiable("QuantizeV2", "Dequantize", "QuantizedConcat")


def _requantize(q: np.ndarray, in_min: Any, in_max: Any, out_min: Any, out_max: Any,
                dt: _dt.DType) -> np.ndarray:
    """TF's RequantizeCopier: dequantize (MIN_FIRST) from the input's range, quantize
    (MIN_FIRST) into the output's."""
    f = _min_first_dequantize(q, _F32(in_min), _F32(in_max), dt)
    return _min_first_quantize(f, _F32(out_min), _F32(out_max), dt)


@ks.kernel("QuantizedConcat")
def _quantized_concat_kernel(ctx: Any) -> Any:
    dt = ctx.output_dtypes[0]
    if dt not in (_dt.quint8, _dt.qint32):  # TF registers these two only
        raise invalid(f"No OpKernel was registered to support Op 'QuantizedConcat' used "
                      f"by node {ctx.node_name} with T={dt.name} (quint8 and qint32 only)")
    signed = dt.is_quantized and _limits(dt)[0] < 0

    def compute(axis: Any, *rest: Any) -> Any:
        n = len(rest) // 3
        vals = [host(ctx, v) for v in rest[:n]]
        mins = [_F32(np.asarray(host(ctx, m)).reshape(-1)[0]) for m in rest[n:2 * n]]
        maxs = [_F32(np.asarray(host(ctx, m)).reshape(-1)[0]) for m in rest[2 * n:]]
        ax = int(np.asarray(host(ctx, axis)))
        rank = vals[0].ndim
        if not -rank <= ax < rank:
            raise invalid(f"Concat dim is out of range: {ax} vs. {rank}")
        ax %= rank
        for i, v in enumerate(vals[1:], 1):
            if v.ndim != rank or v.shape[:ax] + v.shape[ax + 1:] != \
                    vals[0].shape[:ax] + vals[0].shape[ax + 1:]:
                raise invalid(f"ConcatOp : Dimensions of inputs should match: shape[0] = "
                              f"{list(vals[0].shape)} vs. shape[{i}] = {list(v.shape)}")
        omin = min(_F32(0), min(mins))
        omax = max(maxs)
        if signed:
            big = max(abs(omin), abs(omax))
            omin, omax = -big, big
        parts = [v if (mn == omin and mx == omax) else
                 _requantize(v, mn, mx, omin, omax, dt)
                 for v, mn, mx in zip(vals, mins, maxs)]
        out = np.concatenate(parts, axis=ax)
        return (to_device(ctx, out), to_device(ctx, np.asarray(omin, _F32)),
                to_device(ctx, np.asarray(omax, _F32)))

    return compute


@ks.api("quantization.quantized_concat", "quantized_concat")
def quantized_concat(concat_dim: Any, values: Any, input_mins: Any, input_maxes: Any,
                     name: str | None = None) -> Any:
    """Concatenates quantized ``values`` along ``concat_dim``: ``(output, output_min,
    output_max)``. Inputs whose range differs from the combined one (which holds 0, and
    is symmetric for signed types) are requantized into it."""
    values = list(values)
    if len(values) < 2:
        raise ValueError(f"QuantizedConcat needs at least 2 values, got {len(values)}")
    return QuantizedConcat(*apply_op(
        "QuantizedConcat", name=name, concat_dim=concat_dim, values=values,
        input_mins=[_f32(m, "input_mins") for m in input_mins],
        input_maxes=[_f32(m, "input_maxes") for m in input_maxes]))
