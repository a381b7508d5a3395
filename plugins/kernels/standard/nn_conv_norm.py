"""Normalisation ops of ``tf.nn``: fused batch norm (``FusedBatchNorm``, ``V2``, ``V3``
and their gradient ops), local response normalisation (``LRN``, ``LRNGrad``), and the
TF 1.15 composites ``batch_norm_with_global_normalization``, ``sufficient_statistics``,
``normalize_moments``, ``weighted_moments``, plus ``silu``, ``compute_average_loss`` and
``scale_regularization_loss`` (one replica: flowrt has no distribution strategies).

Fused batch norm in training mode normalises with the biased batch variance and returns
the Bessel-corrected one as ``batch_variance``, as TF's kernels do; its reserve spaces
hold the batch mean and the biased variance, which the gradient op reads.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.graph import Tensor, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import ks
from ._common import invalid as _invalid, fmt_dims as _fmt
from .nn_ops import _api_alias, _deprecated_lookup, _merge_dim, _shape_error, _with_rank
from .nn_ops import batch_normalization

__all__ = ["fused_batch_norm", "batch_norm_with_global_normalization", "lrn",
           "sufficient_statistics", "normalize_moments", "weighted_moments",
           "compute_average_loss", "scale_regularization_loss"]


# =======================================================================================
# FusedBatchNorm, V2, V3
# =======================================================================================
def _bn_channel_axis(fmt: str, rank: int) -> int:
    return 1 if fmt.startswith("NC") else rank - 1


def _fbn_shape(version: int) -> Callable[[Any], list[TensorShape]]:
    """Shape function of FusedBatchNorm (``version`` 1, 2 or 3)."""
    def shape_fn(op: Any) -> list[TensorShape]:
        a = op.node_attrs
        fmt = a.get("data_format", "NHWC")
        rank = 5 if fmt in ("NDHWC", "NCDHW") else 4
        x = _with_rank(op, op.inputs[0].shape, rank)
        ci = _bn_channel_axis(fmt, rank)
        c = x[ci]
        training = a.get("is_training", True)
        n_vec = 3 if training else 5
        for t in op.inputs[1:n_vec]:
            c = _merge_dim(op, c, _with_rank(op, t.shape, 1)[0])
        if training:
            for t in op.inputs[3:5]:
                _with_rank(op, t.shape, 1)
        y = list(x)
        y[ci] = c
        outs = [TensorShape(y)] + [TensorShape([c])] * 4
        if version == 3:
            outs.append(unknown_shape())
        return outs

    return shape_fn


def _fbn_grad_shape(version: int) -> Callable[[Any], list[TensorShape]]:
    def shape_fn(op: Any) -> list[TensorShape]:
        a = op.node_attrs
        fmt = a.get("data_format", "NHWC")
        rank = 5 if fmt in ("NDHWC", "NCDHW") else 4
        dy = _with_rank(op, op.inputs[0].shape, rank)
        x = _with_rank(op, op.inputs[1].shape, rank)
        merged = [_merge_dim(op, p, q) for p, q in zip(dy, x)]
        ci = _bn_channel_axis(fmt, rank)
        c = merged[ci]
        for t in op.inputs[2:5]:
            c = _merge_dim(op, c, _with_rank(op, t.shape, 1)[0])
        merged[ci] = c
        return [TensorShape(merged), TensorShape([c]), TensorShape([c]), TensorShape([0]),
                TensorShape([0])]

    return shape_fn


_FBN_FMT = "data_format: {'NHWC', 'NCHW', 'NDHWC', 'NCDHW'} = 'NHWC'"
_FBN_COMMON = ["epsilon: float = 0.0001", "exponential_avg_factor: float = 1",
               _FBN_FMT, "is_training: bool = true"]
_FBN_GRAD_COMMON = ["epsilon: float = 0.0001", _FBN_FMT, "is_training: bool = true"]
_BN_OUTS = ["y: T", "batch_mean: U", "batch_variance: U", "reserve_space_1: U",
            "reserve_space_2: U"]
_BN_GRAD_OUTS = ["x_backprop: T", "scale_backprop: U", "offset_backprop: U",
                 "reserve_space_3: U", "reserve_space_4: U"]

ks.op(
    OpDef("FusedBatchNorm", inputs=["x: T", "scale: T", "offset: T", "mean: T",
                                    "variance: T"],
          outputs=[o.replace(": U", ": T") for o in _BN_OUTS],
          attrs=["T: {float}"] + _FBN_COMMON, shape_fn=_fbn_shape(1),
          doc="Batch normalisation with batch statistics (training) or given ones."),
    OpDef("FusedBatchNormV2", inputs=["x: T", "scale: U", "offset: U", "mean: U",
                                      "variance: U"], outputs=_BN_OUTS,
          attrs=["T: {half, bfloat16, float}", "U: {float}"] + _FBN_COMMON,
          shape_fn=_fbn_shape(2), doc="FusedBatchNorm with float statistics."),
    OpDef("FusedBatchNormV3", inputs=["x: T", "scale: U", "offset: U", "mean: U",
                                      "variance: U"],
          outputs=_BN_OUTS + ["reserve_space_3: U"],
          attrs=["T: {half, bfloat16, float}", "U: {bfloat16, float}"] + _FBN_COMMON,
          shape_fn=_fbn_shape(3), doc="FusedBatchNormV2 with a third reserve space."),
    OpDef("FusedBatchNormGrad", inputs=["y_backprop: T", "x: T", "scale: T",
                                        "reserve_space_1: T", "reserve_space_2: T"],
          outputs=[o.replace(": U", ": T") for o in _BN_GRAD_OUTS],
          attrs=["T: {float}"] + _FBN_GRAD_COMMON, shape_fn=_fbn_grad_shape(1),
          doc="The gradient of FusedBatchNorm."),
    OpDef("FusedBatchNormGradV2", inputs=["y_backprop: T", "x: T", "scale: float",
                                          "reserve_space_1: U", "reserve_space_2: U"],
          outputs=_BN_GRAD_OUTS,
          attrs=["T: {half, bfloat16, float}", "U: {float}"] + _FBN_GRAD_COMMON,
          shape_fn=_fbn_grad_shape(2), doc="The gradient of FusedBatchNormV2."),
    OpDef("FusedBatchNormGradV3", inputs=["y_backprop: T", "x: T", "scale: float",
                                          "reserve_space_1: U", "reserve_space_2: U",
                                          "reserve_space_3: U"],
          outputs=["x_backprop: T", "scale_backprop: U", "offset_backprop: U",
                   "reserve_space_4: U", "reserve_space_5: U"],
          attrs=["T: {half, bfloat16, float}", "U: {float}"] + _FBN_GRAD_COMMON,
          shape_fn=_fbn_grad_shape(3), doc="The gradient of FusedBatchNormV3."),
)


class _BNLayout:
    """Channels-last view of a batch norm's data: moves the channel axis last and back."""

    def __init__(self, attrs: dict[str, Any], op_type: str):
        self.fmt = attrs.get("data_format", "NHWC")
        self.rank = 5 if self.fmt in ("NDHWC", "NCDHW") else 4
        self.cf = self.fmt.startswith("NC")
        self.op_type = op_type

    def check(self, what: str, a: Any) -> None:
        if a.ndim != self.rank:
            raise _invalid(f"{self.op_type}: {what} must be {self.rank}-dimensional"
                           f"{_fmt(a.shape)}")

    def to_last(self, xp: Any, a: Any) -> Any:
        return xp.transpose(a, (0,) + tuple(range(2, a.ndim)) + (1,)) if self.cf else a

    def from_last(self, xp: Any, a: Any) -> Any:
        return xp.transpose(a, (0, a.ndim - 1) + tuple(range(1, a.ndim - 1))) \
            if self.cf else a


def _vec(op_type: str, what: str, v: Any, c: int) -> None:
    if v.ndim != 1 or v.shape[0] != c:
        raise _invalid(f"{op_type}: {what} must have the shape [{c}] (the channel "
                       f"dimension), got {_fmt(v.shape)}")


def _fbn_kernel(version: int) -> Callable[[Any], Callable]:
    """Kernel factory of FusedBatchNorm / V2 / V3 (training and inference)."""
    op_type = {1: "FusedBatchNorm", 2: "FusedBatchNormV2", 3: "FusedBatchNormV3"}[version]

    def factory(ctx: Any) -> Callable:
        xp = ctx.xp
        lay = _BNLayout(ctx.attrs, op_type)
        eps = float(ctx.attrs.get("epsilon", 1e-4))
        factor = float(ctx.attrs.get("exponential_avg_factor", 1.0))
        training = bool(ctx.attrs.get("is_training", True))
        y_dt = ctx.output_dtypes[0].np
        u_dt = ctx.output_dtypes[1].np

        def fused_batch_norm(x: Any, scale: Any, offset: Any, mean: Any, var: Any) -> Any:
            lay.check("input", x)
            xl = lay.to_last(xp, x).astype(np.float32 if x.dtype != np.float64 else
                                           np.float64, copy=False)
            c = xl.shape[-1]
            _vec(op_type, "scale", scale, c)
            _vec(op_type, "offset", offset, c)
            axes = tuple(range(xl.ndim - 1))
            n = int(np.prod(xl.shape[:-1]))
            if training:
                if n == 0:
                    bm = xp.full((c,), np.nan, xl.dtype)
                    bv = xp.full((c,), np.nan, xl.dtype)
                else:
                    bm = xl.mean(axis=axes)
                    bv = xp.square(xl - bm).mean(axis=axes)
                corrected = bv * (n / (n - 1) if n > 1 else 1.0)
                out_mean, out_var = bm, corrected
                if factor != 1.0:
                    _vec(op_type, "mean", mean, c)
                    _vec(op_type, "variance", var, c)
                    out_mean = (1 - factor) * mean + factor * bm
                    out_var = (1 - factor) * var + factor * corrected
                use_m, use_v = bm, bv
            else:
                _vec(op_type, "mean", mean, c)
                _vec(op_type, "variance", var, c)
                use_m, use_v = mean.astype(xl.dtype), var.astype(xl.dtype)
                out_mean, out_var = mean, var
            inv = 1.0 / xp.sqrt(use_v + eps)
            y = (xl - use_m) * (inv * scale.astype(xl.dtype)) + offset.astype(xl.dtype)
            y = lay.from_last(xp, y).astype(y_dt, copy=False)
            outs = [y, xp.asarray(out_mean).astype(u_dt), xp.asarray(out_var).astype(u_dt),
                    xp.asarray(use_m).astype(u_dt), xp.asarray(use_v).astype(u_dt)]
            if version == 3:
                outs.append(xp.zeros((0,), u_dt))
            return tuple(outs)

        return fused_batch_norm

    return factory


ks.kernel("FusedBatchNorm")(_fbn_kernel(1))
ks.kernel("FusedBatchNormV2")(_fbn_kernel(2))
ks.kernel("FusedBatchNormV3")(_fbn_kernel(3))


def _fbn_grad_kernel(version: int) -> Callable[[Any], Callable]:
    """Kernel factory of FusedBatchNormGrad / V2 / V3."""
    op_type = {1: "FusedBatchNormGrad", 2: "FusedBatchNormGradV2",
               3: "FusedBatchNormGradV3"}[version]

    def factory(ctx: Any) -> Callable:
        xp = ctx.xp
        lay = _BNLayout(ctx.attrs, op_type)
        eps = float(ctx.attrs.get("epsilon", 1e-4))
        training = bool(ctx.attrs.get("is_training", True))
        x_dt = ctx.output_dtypes[0].np
        u_dt = ctx.output_dtypes[1].np

        def fused_batch_norm_grad(dy: Any, x: Any, scale: Any, m: Any, v: Any,
                                  *unused: Any) -> Any:
            lay.check("y_backprop", dy)
            lay.check("x", x)
            if dy.shape != x.shape:
                raise _invalid(f"{op_type}: x and y_backprop must have same shape, but x "
                               f"has shape {_fmt(x.shape)} and y_backprop has shape "
                               f"{_fmt(dy.shape)}")
            cdt = np.float64 if x.dtype == np.float64 else np.float32
            xl = lay.to_last(xp, x).astype(cdt, copy=False)
            g = lay.to_last(xp, dy).astype(cdt, copy=False)
            c = xl.shape[-1]
            for what, a in (("scale", scale), ("reserve_space_1", m),
                            ("reserve_space_2", v)):
                _vec(op_type, what, a, c)
            axes = tuple(range(xl.ndim - 1))
            inv = 1.0 / xp.sqrt(v.astype(cdt) + eps)
            xhat = (xl - m.astype(cdt)) * inv
            doffset = g.sum(axis=axes)
            dscale = (g * xhat).sum(axis=axes)
            sc = scale.astype(cdt)
            n = int(np.prod(xl.shape[:-1]))
            if training and n > 0:
                dx = sc * inv * (g - doffset / n - xhat * (dscale / n))
            else:
                dx = g * (sc * inv)
            dx = lay.from_last(xp, dx).astype(x_dt, copy=False)
            return (dx, dscale.astype(u_dt), doffset.astype(u_dt), xp.zeros((0,), u_dt),
                    xp.zeros((0,), u_dt))

        return fused_batch_norm_grad

    return factory


ks.kernel("FusedBatchNormGrad")(_fbn_grad_kernel(1))
ks.kernel("FusedBatchNormGradV2")(_fbn_grad_kernel(2))
ks.kernel("FusedBatchNormGradV3")(_fbn_grad_kernel(3))


def _fbn_grad(version: int) -> Callable[..., list[Any]]:
    """The gradient function of FusedBatchNorm / V2 / V3 (TF's _BaseFusedBatchNormGrad)."""
    grad_op = {1: "FusedBatchNormGrad", 2: "FusedBatchNormGradV2",
               3: "FusedBatchNormGradV3"}[version]

    def grad_fn(op: Any, *grads: Any) -> list[Any]:
        x, scale = op.inputs[0], op.inputs[1]
        dy = grads[0]
        a = op.node_attrs
        eps = a.get("epsilon", 1e-4)
        fmt = a.get("data_format", "NHWC")
        training = a.get("is_training", True)
        if training:
            kw: dict[str, Any] = {"reserve_space_1": op.outputs[3],
                                  "reserve_space_2": op.outputs[4]}
            if version == 3:
                kw["reserve_space_3"] = op.outputs[5]
            dx, dscale, doffset, _, _ = apply_op(grad_op, y_backprop=dy, x=x, scale=scale,
                                                 epsilon=eps, data_format=fmt,
                                                 is_training=True, **kw)
        else:
            # as TF: the inference gradient is computed channels-last
            perm_in = {"NCHW": [0, 2, 3, 1], "NCDHW": [0, 2, 3, 4, 1]}.get(fmt)
            perm_out = {"NCHW": [0, 3, 1, 2], "NCDHW": [0, 4, 1, 2, 3]}.get(fmt)
            if perm_in is not None:
                x = apply_op("Transpose", x=x, perm=np.array(perm_in, np.int32))
                dy = apply_op("Transpose", x=dy, perm=np.array(perm_in, np.int32))
            target = "NHWC" if fmt in ("NCHW", "NHWC") else "NDHWC"
            kw = {"reserve_space_1": op.inputs[3], "reserve_space_2": op.inputs[4]}
            if version == 3:
                kw["reserve_space_3"] = op.outputs[5]
            dx, dscale, doffset, _, _ = apply_op(grad_op, y_backprop=dy, x=x, scale=scale,
                                                 epsilon=eps, data_format=target,
                                                 is_training=False, **kw)
            if perm_out is not None:
                dx = apply_op("Transpose", x=dx, perm=np.array(perm_out, np.int32))
        return [dx, dscale, doffset, None, None]

    return grad_fn


ks.gradient("FusedBatchNorm")(_fbn_grad(1))
ks.gradient("FusedBatchNormV2")(_fbn_grad(2))
ks.gradient("FusedBatchNormV3")(_fbn_grad(3))


@ks.api("nn.fused_batch_norm")
def fused_batch_norm(x: Any, scale: Any, offset: Any, mean: Any = None, variance: Any = None,
                     epsilon: float = 0.001, data_format: str = "NHWC",
                     is_training: bool = True, name: str | None = None
                     ) -> tuple[Tensor, Tensor, Tensor]:
    """Batch normalisation of a 4-D (or 5-D) input in one op (``tf.nn.fused_batch_norm``,
    TF 1.15): returns ``(y, batch_mean, batch_variance)``; in training the variance
    returned is the unbiased one. ``epsilon`` is raised to at least 1.001e-5, as TF 1.15
    does (a cuDNN requirement).

    :raises ValueError: when ``is_training`` is False and mean or variance is missing.
    """
    x = convert_to_tensor(x, name="input")
    scale = convert_to_tensor(scale, name="scale")
    offset = convert_to_tensor(offset, name="offset")
    if (not is_training) and (mean is None or variance is None):
        raise ValueError("Both 'mean' and 'variance' must be a 1D tensor when is_training "
                         "is False.")
    if mean is None:
        mean = convert_to_tensor(np.zeros([0], np.float32), name="Const")
    if variance is None:
        variance = convert_to_tensor(np.zeros([0], np.float32), name="Const")
    epsilon = max(float(epsilon), 1.001e-5)
    y, bm, bv, _, _, _ = apply_op("FusedBatchNormV3", name=name, x=x, scale=scale,
                                  offset=offset, mean=mean, variance=variance,
                                  epsilon=epsilon, data_format=data_format,
                                  is_training=is_training)
    return y, bm, bv


@ks.api("nn.batch_norm_with_global_normalization")
def batch_norm_with_global_normalization(t: Any = None, m: Any = None, v: Any = None,
                                         beta: Any = None, gamma: Any = None,
                                         variance_epsilon: float | None = None,
                                         scale_after_normalization: bool | None = None,
                                         name: str | None = None, input: Any = None,
                                         mean: Any = None, variance: Any = None) -> Tensor:
    """Batch normalisation with given statistics
    (``tf.nn.batch_norm_with_global_normalization``, TF1): ``batch_normalization`` with
    ``gamma`` applied only when ``scale_after_normalization``."""
    t = _deprecated_lookup("input", input, "t", t)
    m = _deprecated_lookup("mean", mean, "m", m)
    v = _deprecated_lookup("variance", variance, "v", v)
    return batch_normalization(t, m, v, beta, gamma if scale_after_normalization else None,
                               variance_epsilon, name)


# =======================================================================================
# moments helpers
# =======================================================================================
def _reduce_sum(x: Any, axes: Any, keep: bool, name: str) -> Tensor:
    return apply_op("Sum", name=name, input=x, reduction_indices=np.array(axes, np.int32),
                    keep_dims=keep)


@ks.api("nn.sufficient_statistics")
def sufficient_statistics(x: Any, axes: Any, shift: Any = None, keep_dims: Any = None,
                          name: str | None = None, keepdims: Any = None
                          ) -> tuple[Tensor, Tensor, Tensor, Any]:
    """Count, (shifted) sum and (shifted) sum of squares of ``x`` over ``axes``
    (``tf.nn.sufficient_statistics``): ``(count, mean_ss, variance_ss, shift)``."""
    axes = list(set(axes))
    keep_dims = _deprecated_lookup("keepdims", keepdims, "keep_dims", keep_dims)
    if keep_dims is None:
        keep_dims = False
    with name_scope(name, "sufficient_statistics", [x, shift]):
        x = convert_to_tensor(x, name="x")
        d = x.shape.as_tuple()
        if d is not None and all(d[a] is not None for a in axes):
            count = 1
            for a in axes:
                count *= d[a]
            counts = convert_to_tensor(np.array(count, x.dtype.base_dtype.np), name="Const")
        else:
            shp = apply_op("Cast", x=apply_op("Shape", input=x, out_type=_dt.int32),
                           DstT=x.dtype.base_dtype)
            rank = apply_op("Rank", input=x)
            pos = [a if a >= 0 else apply_op("AddV2", x=np.int32(a), y=rank) for a in axes]
            idx = np.array(pos, np.int32) if all(isinstance(p, int) for p in pos) else \
                apply_op("Pack", values=[convert_to_tensor(p, dtype=_dt.int32) for p in pos],
                         axis=0)
            dims = apply_op("GatherV2", params=shp, indices=idx, axis=np.int32(0))
            counts = apply_op("Prod", name="count", input=dims,
                              reduction_indices=np.array([0], np.int32), keep_dims=False)
        if shift is not None:
            shift = convert_to_tensor(shift, name="shift")
            m_ss = apply_op("Sub", x=x, y=shift)
            v_ss = apply_op("SquaredDifference", x=x, y=shift)
        else:
            m_ss = x
            v_ss = apply_op("Square", x=x)
        m_ss = _reduce_sum(m_ss, axes, keep_dims, "mean_ss")
        v_ss = _reduce_sum(v_ss, axes, keep_dims, "var_ss")
    return counts, m_ss, v_ss, shift


@ks.api("nn.normalize_moments")
def normalize_moments(counts: Any, mean_ss: Any, variance_ss: Any, shift: Any,
                      name: str | None = None) -> tuple[Tensor, Tensor]:
    """Mean and variance from sufficient statistics (``tf.nn.normalize_moments``)."""
    with name_scope(name, "normalize", [counts, mean_ss, variance_ss, shift]):
        divisor = apply_op("Reciprocal", name="divisor", x=counts)
        if shift is not None:
            shifted_mean = apply_op("Mul", name="shifted_mean", x=mean_ss, y=divisor)
            mean = apply_op("Add", name="mean", x=shifted_mean, y=shift)
        else:
            shifted_mean = apply_op("Mul", name="mean", x=mean_ss, y=divisor)
            mean = shifted_mean
        variance = apply_op("Sub", name="variance",
                            x=apply_op("Mul", x=variance_ss, y=divisor),
                            y=apply_op("Square", x=shifted_mean))
    return mean, variance


@ks.api("nn.weighted_moments")
def weighted_moments(x: Any, axes: Any, frequency_weights: Any, name: str | None = None,
                     keep_dims: Any = None, keepdims: Any = None) -> tuple[Tensor, Tensor]:
    """Frequency-weighted mean and variance of ``x`` over ``axes``
    (``tf.nn.weighted_moments``); float16 is computed in float32."""
    keep_dims = _deprecated_lookup("keepdims", keepdims, "keep_dims", keep_dims)
    if keep_dims is None:
        keep_dims = False
    with name_scope(name, "weighted_moments", [x, frequency_weights, axes]):
        x = convert_to_tensor(x, name="x")
        w = convert_to_tensor(frequency_weights, name="frequency_weights")
        half = x.dtype.base_dtype is _dt.float16
        if half:
            x = apply_op("Cast", x=x, DstT=_dt.float32)
        if w.dtype.base_dtype is not x.dtype.base_dtype:
            w = apply_op("Cast", x=w, DstT=x.dtype.base_dtype)
        ax = np.array(axes, np.int32)
        wsum = apply_op("Sum", name="weighted_input_sum", input=apply_op("Mul", x=w, y=x),
                        reduction_indices=ax, keep_dims=True)
        bw = apply_op("Add", x=w, y=apply_op("ZerosLike", x=x))
        sum_w = apply_op("Sum", name="sum_of_weights", input=bw, reduction_indices=ax,
                         keep_dims=True)
        mean = apply_op("DivNoNan", name="div_no_nan", x=wsum, y=sum_w)
        dist = apply_op("Sum", name="weighted_distsq", input=apply_op(
            "Mul", x=w, y=apply_op("SquaredDifference", x=x, y=mean)),
            reduction_indices=ax, keep_dims=True)
        var = apply_op("DivNoNan", name="div_no_nan", x=dist, y=sum_w)
        if not keep_dims:
            sq = [int(a) for a in np.atleast_1d(ax)]
            mean = apply_op("Squeeze", input=mean, squeeze_dims=sq)
            var = apply_op("Squeeze", input=var, squeeze_dims=sq)
        if half:
            mean = apply_op("Cast", x=mean, DstT=_dt.float16)
            var = apply_op("Cast", x=var, DstT=_dt.float16)
        return mean, var


# =======================================================================================
# LRN
# =======================================================================================
_LRN_ATTRS = ["depth_radius: int = 5", "bias: float = 1", "alpha: float = 1",
              "beta: float = 0.5", "T: {half, bfloat16, float} = DT_FLOAT"]


def _lrn_shape(op: Any) -> list[TensorShape]:
    _with_rank(op, op.inputs[0].shape, 4)
    return [op.inputs[0].shape if op.inputs[0].shape.ndims is not None
            else unknown_shape(4)]


def _lrn_grad_shape(op: Any) -> list[TensorShape]:
    s = TensorShape([None] * 4)
    for t in op.inputs:
        _with_rank(op, t.shape, 4)
        try:
            s = s.merge_with(t.shape)
        except ValueError:
            raise _shape_error(op, "Incompatible shapes") from None
    return [s]


ks.op(
    OpDef("LRN", inputs=["input: T"], outputs=["output: T"], attrs=_LRN_ATTRS,
          shape_fn=_lrn_shape,
          doc="Local response normalisation across the last dimension."),
    OpDef("LRNGrad", inputs=["input_grads: T", "input_image: T", "output_image: T"],
          outputs=["output: T"], attrs=_LRN_ATTRS, shape_fn=_lrn_grad_shape,
          doc="The gradient of LRN."),
)


def _window_sum(xp: Any, a: Any, r: int) -> Any:
    """Sum of ``a`` over ``[d - r, d + r]`` along the last axis (clipped)."""
    d = a.shape[-1]
    cs = xp.cumsum(xp.pad(a, [(0, 0)] * (a.ndim - 1) + [(r + 1, r)]), axis=-1)
    return cs[..., 2 * r + 1:2 * r + 1 + d] - cs[..., :d]


class _LRNAttrs:
    def __init__(self, ctx: Any):
        a = ctx.attrs
        self.r = int(a.get("depth_radius", 5))
        self.bias = float(a.get("bias", 1.0))
        self.alpha = float(a.get("alpha", 1.0))
        self.beta = float(a.get("beta", 0.5))
        if self.r < 0:
            raise _invalid(f"{ctx.op_type}: depth_radius = {self.r} must be non-negative")


@ks.kernel("LRN")
def _lrn_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    p = _LRNAttrs(ctx)
    out_dt = ctx.output_dtypes[0].np

    def lrn(x: Any) -> Any:
        if x.ndim != 4:
            raise _invalid(f"LRN: input must be 4-dimensional, got {_fmt(x.shape)}")
        xc = x.astype(np.float32, copy=False)
        norm = p.bias + p.alpha * _window_sum(xp, xc * xc, p.r)
        return (xc * norm ** (-p.beta)).astype(out_dt, copy=False)

    return lrn


@ks.kernel("LRNGrad")
def _lrn_grad_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    p = _LRNAttrs(ctx)
    out_dt = ctx.output_dtypes[0].np

    def lrn_grad(g: Any, x: Any, y: Any) -> Any:
        if not (g.ndim == x.ndim == y.ndim == 4) or not (g.shape == x.shape == y.shape):
            raise _invalid("LRNGrad: input_grads, input_image, and out_image should have the "
                           f"same shape, got {_fmt(g.shape)}, {_fmt(x.shape)} and "
                           f"{_fmt(y.shape)}")
        gc, xc = g.astype(np.float32), x.astype(np.float32)
        norm = p.bias + p.alpha * _window_sum(xp, xc * xc, p.r)
        t = gc * xc * norm ** (-p.beta - 1)
        dx = gc * norm ** (-p.beta) - 2 * p.alpha * p.beta * xc * _window_sum(xp, t, p.r)
        return dx.astype(out_dt, copy=False)

    return lrn_grad


@ks.gradient("LRN")
def _lrn_grad(op: Any, grad: Tensor) -> list[Any]:
    a = op.node_attrs
    return [apply_op("LRNGrad", input_grads=grad, input_image=op.inputs[0],
                     output_image=op.outputs[0], depth_radius=a.get("depth_radius", 5),
                     bias=a.get("bias", 1.0), alpha=a.get("alpha", 1.0),
                     beta=a.get("beta", 0.5))]


@ks.api("nn.local_response_normalization", "nn.lrn")
def lrn(input: Any, depth_radius: int = 5, bias: float = 1, alpha: float = 1,
        beta: float = 0.5, name: str | None = None) -> Tensor:
    """Local response normalisation over the last dimension of a 4-D input
    (``tf.nn.lrn``): ``input / (bias + alpha * sum(input[d-r:d+r+1] ** 2)) ** beta``."""
    return apply_op("LRN", name=name, input=input, depth_radius=depth_radius,
                    bias=float(bias), alpha=float(alpha), beta=float(beta))


# =======================================================================================
# silu, compute_average_loss, scale_regularization_loss
# =======================================================================================
def _silu(features: Any, beta: float = 1.0) -> Tensor:
    """``features * sigmoid(beta * features)`` (``tf.nn.silu``; ``tf.nn.swish`` with
    ``beta == 1``)."""
    swish = ks.api_names.get("nn.swish")
    if swish is not None and isinstance(beta, (int, float)) and beta == 1.0:
        return swish(features)
    with name_scope(None, "silu", [features]):
        features = convert_to_tensor(features, name="features")
        b = convert_to_tensor(beta, dtype=features.dtype.base_dtype, name="beta")
        return apply_op("Mul", x=features,
                        y=apply_op("Sigmoid", x=apply_op("Mul", x=b, y=features)))


_api_alias(_silu, "nn.silu")


@ks.api("nn.compute_average_loss")
def compute_average_loss(per_example_loss: Any, sample_weight: Any = None,
                         global_batch_size: Any = None) -> Tensor:
    """Sum of the (weighted) per-example losses divided by the global batch size
    (``tf.nn.compute_average_loss``); flowrt runs one replica, so the default global
    batch size is the first dimension of ``per_example_loss``.

    :raises ValueError: for a scalar ``per_example_loss`` or a bad static batch size.
    """
    per_example_loss = convert_to_tensor(per_example_loss)
    dt = per_example_loss.dtype.base_dtype
    if per_example_loss.shape.ndims == 0:
        raise ValueError("Invalid value passed for `per_example_loss`. Expected a tensor "
                         "with at least rank 1.")
    loss = per_example_loss
    if sample_weight is not None:
        w = convert_to_tensor(sample_weight)
        loss = apply_op("Cast", x=loss, DstT=_dt.float32)
        w = apply_op("Cast", x=w, DstT=_dt.float32)
        lr, wr = loss.shape.ndims, w.shape.ndims
        if lr is not None and wr is not None:
            if wr == lr + 1 and w.shape.as_tuple()[-1] == 1:
                w = apply_op("Squeeze", input=w, squeeze_dims=[-1])
            elif wr == lr - 1 and wr > 0:
                w = apply_op("ExpandDims", input=w, dim=np.int32(-1))
        loss = apply_op("Mul", x=loss, y=w)
        loss = apply_op("Cast", x=loss, DstT=dt)
    if global_batch_size is None:
        shp = apply_op("Shape", input=loss, out_type=_dt.int32)
        global_batch_size = apply_op("StridedSlice", input=shp, begin=np.array([0], np.int32),
                                     end=np.array([1], np.int32),
                                     strides=np.array([1], np.int32), shrink_axis_mask=1)
    else:
        gb = global_batch_size
        if not isinstance(gb, Tensor):
            if np.ndim(gb) != 0:
                raise ValueError("global_batch_size must be scalar.")
            if not np.issubdtype(np.asarray(gb).dtype, np.integer):
                raise TypeError("global_batch_size must be an integer.")
            if int(gb) < 0:
                raise errors.InvalidArgumentError(None, None,
                                                  "global_batch_size must be non-negative.")
    total = apply_op("Sum", input=loss, reduction_indices=np.arange(
        loss.shape.ndims, dtype=np.int32) if loss.shape.ndims is not None else apply_op(
        "Range", start=np.int32(0), limit=apply_op("Rank", input=loss), delta=np.int32(1)),
        keep_dims=False)
    gbt = apply_op("Cast", x=convert_to_tensor(global_batch_size), DstT=dt)
    return apply_op("DivNoNan", x=total, y=gbt)


@ks.api("nn.scale_regularization_loss")
def scale_regularization_loss(regularization_loss: Any) -> Tensor:
    """The summed regularisation loss divided by the number of replicas (one, in
    flowrt) (``tf.nn.scale_regularization_loss``)."""
    loss = convert_to_tensor(regularization_loss)
    nd = loss.shape.ndims
    axes = np.arange(nd, dtype=np.int32) if nd is not None else apply_op(
        "Range", start=np.int32(0), limit=apply_op("Rank", input=loss), delta=np.int32(1))
    total = apply_op("Sum", input=loss, reduction_indices=axes, keep_dims=False)
    return apply_op("RealDiv", x=total, y=convert_to_tensor(1, dtype=total.dtype.base_dtype))
