"""nn_ops of the standard kernel set: activations, softmax and cross entropies, BiasAdd,
L2Loss, Conv2D, MaxPool/AvgPool, and the composite ``tf.nn`` functions built on them
(``moments``, ``l2_normalize``, ``dropout``, ``sigmoid_cross_entropy_with_logits`` ...).

Op types, input/attr names and attr type lists follow TensorFlow's ``nn_ops.cc``; the
Python functions follow TF 1.15's ``nn_ops.py``/``nn_impl.py`` signatures.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.graph import Tensor, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, as_shape, unknown_shape

from ._common import broadcast_static, constant_value, ks, unchanged_shape
from ._common import PARALLEL_ELEMENTS, row_parts
from . import nn_conv_rows as _rows
from .nn_conv_rows import batch_parts

_FLOAT_T = "T: {half, bfloat16, float, double}"
_REAL_T = ("half, bfloat16, float, double, int8, int16, int32, int64, uint8, uint16, "
           "uint32, uint64")


# ---------------------------------------------------------------------------------------
# shared helpers
# ---------------------------------------------------------------------------------------
def _fmt_dims(s: TensorShape) -> str:
    d = s.as_tuple()
    if d is None:
        return "?"
    return "[" + ",".join("?" if x is None else str(x) for x in d) + "]"


def _shape_error(op: Any, msg: str) -> ValueError:
    shapes = ", ".join(_fmt_dims(t.shape) for t in op.inputs)
    return ValueError(f"{msg} for '{op.name}' (op: '{op.type}') with input shapes: {shapes}.")


def _with_rank(op: Any, s: TensorShape, rank: int) -> tuple[int | None, ...]:
    d = s.as_tuple()
    if d is None:
        return (None,) * rank
    if len(d) != rank:
        raise _shape_error(op, f"Shape must be rank {rank} but is rank {len(d)}")
    return d


def _with_rank_at_least(op: Any, s: TensorShape, rank: int) -> tuple[int | None, ...] | None:
    d = s.as_tuple()
    if d is not None and len(d) < rank:
        raise _shape_error(op, f"Shape must be at least rank {rank} but is rank {len(d)}")
    return d


def _merge_dim(op: Any, a: int | None, b: int | None) -> int | None:
    if a is not None and b is not None and a != b:
        raise _shape_error(op, f"Dimensions must be equal, but are {a} and {b}")
    return a if a is not None else b


def _windowed_size(in_size: int, k_eff: int, stride: int, padding: str,
                   pad_lo: int = 0, pad_hi: int = 0) -> tuple[int, int, int]:
    """TF's GetWindowedOutputSizeVerbose: (output size, pad before, pad after).

    :raises ValueError: when the output size would be negative.
    """
    if stride <= 0:
        raise ValueError(f"Stride must be > 0, but got {stride}")
    if padding == "SAME":
        out = (in_size + stride - 1) // stride
        needed = max(0, (out - 1) * stride + k_eff - in_size)
        lo = needed // 2
        return out, lo, needed - lo
    if padding == "VALID":
        pad_lo = pad_hi = 0
    num = in_size + pad_lo + pad_hi - k_eff + stride
    out = int(num / stride)  # C++ truncation toward zero
    if out < 0:
        raise ValueError(f"Computed output size would be negative: {out} [input_size: "
                         f"{in_size}, effective_filter_size: {k_eff}, stride: {stride}]")
    return out, pad_lo, pad_hi


def _static_windowed_size(op: Any, in_size: int, k_eff: int, stride: int, padding: str,
                          pad_lo: int = 0, pad_hi: int = 0) -> int:
    """Output size for shape inference; as TF's, a window larger than the (padded) input
    is a build-time error ("Negative dimension size ...")."""
    if padding != "SAME":
        padded = in_size + (pad_lo + pad_hi if padding == "EXPLICIT" else 0)
        if padded < k_eff:
            raise _shape_error(op, f"Negative dimension size caused by subtracting {k_eff} "
                                   f"from {padded}")
    try:
        return _windowed_size(in_size, k_eff, stride, padding, pad_lo, pad_hi)[0]
    except ValueError as e:
        raise _shape_error(op, str(e)) from None


def _float_compute_dtype(dt: _dt.DType) -> Any:
    """The numpy dtype a kernel computes in: float32 for half/bfloat16."""
    if dt in (_dt.float16, _dt.bfloat16):
        return np.float32
    return dt.np


def _out_np(ctx: Any, i: int = 0) -> Any:
    return ctx.output_dtypes[i].np


def _shape_of(x: Tensor) -> Any:
    """``array_ops.shape`` with TF's optimisation: a Const when the shape is static."""
    s = x.shape
    if s.is_fully_defined():
        return convert_to_tensor(np.array(s.as_list(), dtype=np.int32), name="Shape")
    return apply_op("Shape", input=x, out_type=_dt.int32)


def _api_alias(fn: Any, *names: str) -> None:
    """Export ``fn`` under the names no other module of the kernel set has taken yet
    (aliases such as ``math.softplus`` that a sibling module may also provide)."""
    for n in names:
        if n not in ks.api_names:
            ks.api(n)(fn)


def _deprecated_lookup(new_name: str, new_value: Any, old_name: str, old_value: Any) -> Any:
    if old_value is not None:
        if new_value is not None:
            raise ValueError(f"Cannot specify both '{old_name}' and '{new_name}'")
        return old_value
    return new_value


# ---------------------------------------------------------------------------------------
# activations
# ---------------------------------------------------------------------------------------
ks.op(
    OpDef("Relu", inputs=["features: T"], outputs=["activations: T"],
          attrs=[f"T: {{{_REAL_T}, qint8}}"], shape_fn=unchanged_shape,
          doc="max(features, 0)."),
    OpDef("Relu6", inputs=["features: T"], outputs=["activations: T"],
          attrs=[f"T: {{{_REAL_T}}}"], shape_fn=unchanged_shape,
          doc="min(max(features, 0), 6)."),
    OpDef("LeakyRelu", inputs=["features: T"], outputs=["activations: T"],
          attrs=["alpha: float = 0.2", "T: {half, bfloat16, float, double} = DT_FLOAT"],
          shape_fn=unchanged_shape, doc="features if > 0 else alpha * features."),
    OpDef("Elu", inputs=["features: T"], outputs=["activations: T"], attrs=[_FLOAT_T],
          shape_fn=unchanged_shape, doc="exp(features) - 1 if < 0, features otherwise."),
    OpDef("Selu", inputs=["features: T"], outputs=["activations: T"], attrs=[_FLOAT_T],
          shape_fn=unchanged_shape, doc="Scaled exponential linear unit."),
    OpDef("Softplus", inputs=["features: T"], outputs=["activations: T"], attrs=[_FLOAT_T],
          shape_fn=unchanged_shape, doc="log(exp(features) + 1)."),
    OpDef("Softsign", inputs=["features: T"], outputs=["activations: T"], attrs=[_FLOAT_T],
          shape_fn=unchanged_shape, doc="features / (abs(features) + 1)."),
)

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@ks.kernel("Relu")
def _relu_kernel(ctx: Any) -> Any:
    xp = ctx.xp

    def relu(x: Any) -> Any:
        if xp is np and x.size >= PARALLEL_ELEMENTS and x.ndim:
            out = np.empty(x.shape, x.dtype)
            if row_parts(ctx, x.shape[0], x.size,
                         lambda lo, hi: np.maximum(x[lo:hi], 0, out=out[lo:hi])) is not None:
                return out
        return xp.maximum(x, 0)

    return relu


@ks.kernel("Relu6")
def _relu6_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    return lambda x: xp.minimum(xp.maximum(x, 0), 6)


@ks.kernel("LeakyRelu")
def _leaky_relu_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    alpha = float(np.float32(ctx.attrs.get("alpha", 0.2)))  # a float attr, as in TF
    # (the product keeps x's dtype: numpy would widen bfloat16 times a float to float32)
    return lambda x: xp.where(x > 0, x, (x * alpha).astype(x.dtype, copy=False))


@ks.kernel("Elu")
def _elu_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    return lambda x: xp.where(x < 0, xp.expm1(x), x)


@ks.kernel("Selu")
def _selu_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    sa = _SELU_SCALE * _SELU_ALPHA
    return lambda x: xp.where(x < 0, sa * xp.expm1(x), _SELU_SCALE * x).astype(
        x.dtype, copy=False)


#: machine epsilon by dtype name, for TF's softplus thresholds (numpy's finfo does not
#: know bfloat16)
_EPS_BITS = {"bfloat16": 7, "float16": 10, "float32": 23, "float64": 52}


@ks.kernel("Softplus")
def _softplus_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    dt = ctx.output_dtypes[0]
    # TF's functor: x above -t, exp(x) below t, log(exp(x) + 1) between, with
    # t = log(epsilon) + 2 of the dtype (about -13.9 for float32); the cut-offs show in
    # bfloat16 (log_sigmoid(-3) is -3.0 there)
    t = float(np.log(2.0 ** -_EPS_BITS.get(dt.name, 52)) + 2.0)

    def compute(x: Any) -> Any:
        ex = xp.exp(x)
        mid = xp.log(ex + xp.asarray(1, dtype=x.dtype))
        return xp.where(x > -t, x, xp.where(x < t, ex, mid)).astype(x.dtype, copy=False)

    return compute


@ks.kernel("Softsign")
def _softsign_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    return lambda x: x / (xp.abs(x) + 1)


@ks.api("nn.relu")
def relu(features: Any, name: str | None = None) -> Tensor:
    """Rectified linear: ``max(features, 0)`` (``tf.nn.relu``)."""
    return apply_op("Relu", name=name, features=features)


@ks.api("nn.relu6")
def relu6(features: Any, name: str | None = None) -> Tensor:
    """``min(max(features, 0), 6)`` (``tf.nn.relu6``)."""
    with name_scope(name, "Relu6", [features]) as scope:
        features = convert_to_tensor(features, name="features")
        return apply_op("Relu6", name=scope, features=features)


@ks.api("nn.leaky_relu")
def leaky_relu(features: Any, alpha: float = 0.2, name: str | None = None) -> Tensor:
    """Leaky ReLU (``tf.nn.leaky_relu``); integer features are cast to float32 first."""
    with name_scope(name, "LeakyRelu", [features, alpha]) as scope:
        features = convert_to_tensor(features, name="features")
        if features.dtype.is_integer:
            features = apply_op("Cast", x=features, DstT=_dt.float32)
        if isinstance(alpha, np.ndarray):
            alpha = alpha.item()
        return apply_op("LeakyRelu", name=scope, features=features, alpha=alpha)


@ks.api("nn.elu")
def elu(features: Any, name: str | None = None) -> Tensor:
    """Exponential linear unit (``tf.nn.elu``)."""
    return apply_op("Elu", name=name, features=features)


@ks.api("nn.selu")
def selu(features: Any, name: str | None = None) -> Tensor:
    """Scaled exponential linear unit (``tf.nn.selu``)."""
    return apply_op("Selu", name=name, features=features)


@ks.api("nn.softplus")
def softplus(features: Any, name: str | None = None) -> Tensor:
    """``log(exp(features) + 1)`` (``tf.nn.softplus``, ``tf.math.softplus``)."""
    return apply_op("Softplus", name=name, features=features)


@ks.api("nn.softsign")
def softsign(features: Any, name: str | None = None) -> Tensor:
    """``features / (abs(features) + 1)`` (``tf.nn.softsign``, ``tf.math.softsign``)."""
    return apply_op("Softsign", name=name, features=features)


@ks.api("nn.crelu")
def crelu(features: Any, name: str | None = None, axis: int = -1) -> Tensor:
    """Concatenated ReLU: ``relu(concat([x, -x], axis))`` (``tf.nn.crelu``)."""
    with name_scope(name, "CRelu", [features]) as scope:
        features = convert_to_tensor(features, name="features")
        neg = apply_op("Neg", x=features)
        c = apply_op("ConcatV2", name=scope, values=[features, neg], axis=axis)
        return apply_op("Relu", features=c)  # "CRelu/Relu", as TF names it


_api_alias(softplus, "math.softplus")
_api_alias(softsign, "math.softsign")


# ---------------------------------------------------------------------------------------
# softmax, log_softmax
# ---------------------------------------------------------------------------------------
def _rank_at_least_1_shape(op: Any) -> list[TensorShape]:
    _with_rank_at_least(op, op.inputs[0].shape, 1)
    return [op.inputs[0].shape]


ks.op(
    OpDef("Softmax", inputs=["logits: T"], outputs=["softmax: T"], attrs=[_FLOAT_T],
          shape_fn=_rank_at_least_1_shape, doc="Softmax over the last dimension."),
    OpDef("LogSoftmax", inputs=["logits: T"], outputs=["logsoftmax: T"], attrs=[_FLOAT_T],
          shape_fn=_rank_at_least_1_shape, doc="Log-softmax over the last dimension."),
)


def _softmax_factory(ctx: Any, log: bool) -> Any:
    xp = ctx.xp
    out_dt = _out_np(ctx)
    cdt = _float_compute_dtype(ctx.output_dtypes[0])

    def compute(x: Any) -> Any:
        if x.ndim < 1:
            raise errors.InvalidArgumentError(
                None, None, f"logits must have >= 1 dimension, got {list(x.shape)}")
        if x.size == 0:
            return xp.empty(x.shape, dtype=out_dt)
        xc = x.astype(cdt, copy=False)
        shifted = xc - xp.max(xc, axis=-1, keepdims=True)
        e = xp.exp(shifted)
        s = xp.sum(e, axis=-1, keepdims=True)
        r = shifted - xp.log(s) if log else e / s
        return r.astype(out_dt, copy=False)

    return compute


@ks.kernel("Softmax")
def _softmax_kernel(ctx: Any) -> Any:
    return _softmax_factory(ctx, log=False)


@ks.kernel("LogSoftmax")
def _log_softmax_kernel(ctx: Any) -> Any:
    return _softmax_factory(ctx, log=True)


def _static_axis(axis: Any) -> Any:
    if isinstance(axis, Tensor):
        v = constant_value(axis)
        return None if v is None else int(v)
    return int(axis)


def _swap_perm(ndims: int, a: int) -> list[int]:
    perm = list(range(ndims))
    perm[a], perm[-1] = perm[-1], perm[a]
    return perm


def _softmax_api(op_type: str, logits: Any, axis: Any, name: str | None) -> Tensor:
    logits = convert_to_tensor(logits)
    if axis is None:
        axis = -1
    shape = logits.shape
    nd = shape.ndims
    ax = _static_axis(axis)
    if ax == -1 or (nd is not None and ax == nd - 1):
        return apply_op(op_type, name=name, logits=logits)
    if nd is None or ax is None:
        raise ValueError(f"{op_type} over axis {axis!r} needs a statically known rank and "
                         f"axis; got logits of shape {shape}")
    if not -nd <= ax < nd:
        raise errors.InvalidArgumentError(
            None, None, f"Dimension ({ax}) must be in the range [{-nd}, {nd}) where {nd} is "
                        "the number of dimensions in the input.")
    perm = _swap_perm(nd, ax % nd)
    # named as TF's array_ops.transpose names them ("transpose", "transpose_1")
    t = apply_op("Transpose", name="transpose", x=logits, perm=np.array(perm, dtype=np.int32))
    out = apply_op(op_type, logits=t)
    out = apply_op("Transpose", name=name or "transpose", x=out,
                   perm=np.array(perm, dtype=np.int32))
    out.set_shape(shape)
    return out


@ks.api("nn.softmax")
def softmax(logits: Any, axis: Any = None, name: str | None = None,
            dim: Any = None) -> Tensor:
    """Softmax over ``axis`` (default: the last) (``tf.nn.softmax``)."""
    axis = _deprecated_lookup("axis", axis, "dim", dim)
    return _softmax_api("Softmax", logits, axis, name)


@ks.api("nn.log_softmax")
def log_softmax(logits: Any, axis: Any = None, name: str | None = None,
                dim: Any = None) -> Tensor:
    """Log-softmax over ``axis`` (default: the last) (``tf.nn.log_softmax``)."""
    axis = _deprecated_lookup("axis", axis, "dim", dim)
    return _softmax_api("LogSoftmax", logits, axis, name)


_api_alias(softmax, "math.softmax")
_api_alias(log_softmax, "math.log_softmax")


# ---------------------------------------------------------------------------------------
# BiasAdd, L2Loss
# ---------------------------------------------------------------------------------------
def _bias_add_shape(op: Any) -> list[TensorShape]:
    fmt = op.node_attrs.get("data_format", "NHWC")
    nchw = fmt == "NCHW"
    d = _with_rank_at_least(op, op.inputs[0].shape, 3 if nchw else 2)
    b = _with_rank(op, op.inputs[1].shape, 1)
    if d is None:
        return [unknown_shape()]
    ch = 1 if nchw else len(d) - 1
    merged = _merge_dim(op, d[ch], b[0])
    out = list(d)
    out[ch] = merged
    return [TensorShape(out)]


ks.op(
    OpDef("BiasAdd", inputs=["value: T", "bias: T"], outputs=["output: T"],
          attrs=["T: numbertype", "data_format: {'NHWC', 'NCHW'} = 'NHWC'"],
          shape_fn=_bias_add_shape, doc="Adds a 1-D bias along the channel dimension."),
    OpDef("L2Loss", inputs=["t: T"], outputs=["output: T"], attrs=[_FLOAT_T],
          shape_fn=lambda op: [TensorShape([])], doc="sum(t ** 2) / 2."),
)


@ks.kernel("BiasAdd")
def _bias_add_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    nchw = ctx.attrs.get("data_format", "NHWC") == "NCHW"

    def compute(x: Any, b: Any) -> Any:
        if x.ndim < 2:
            raise errors.InvalidArgumentError(
                None, None, f"Input tensor must be at least 2D: {list(x.shape)}")
        if b.ndim != 1:
            raise errors.InvalidArgumentError(
                None, None, f"Biases must be 1D: {list(b.shape)}")
        ch = 1 if nchw else x.ndim - 1
        if b.shape[0] != x.shape[ch]:
            raise errors.InvalidArgumentError(
                None, None, f"Must provide as many biases as the channel dimension of the "
                            f"input tensor: {list(b.shape)} vs. {list(x.shape)}")
        if nchw:
            b = b.reshape((-1,) + (1,) * (x.ndim - 2))
        if xp is np and x.size >= PARALLEL_ELEMENTS:
            out = np.empty(x.shape, np.result_type(x, b))
            if row_parts(ctx, x.shape[0], x.size,
                         lambda lo, hi: np.add(x[lo:hi], b, out=out[lo:hi])) is not None:
                return out
        return xp.add(x, b)

    return compute


@ks.kernel("L2Loss")
def _l2_loss_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    out_dt = _out_np(ctx)
    cdt = _float_compute_dtype(ctx.output_dtypes[0])

    def compute(t: Any) -> Any:
        tc = t.astype(cdt, copy=False)
        return xp.asarray(xp.sum(tc * tc) / 2).astype(out_dt)

    return compute


@ks.api("nn.bias_add")
def bias_add(value: Any, bias: Any, data_format: str | None = None,
             name: str | None = None) -> Tensor:
    """Adds a 1-D ``bias`` along the channel dimension of ``value`` (``tf.nn.bias_add``).

    :raises ValueError: when ``bias`` is not 1-D or does not match the channel dimension.
    """
    with name_scope(name, "BiasAdd", [value, bias]) as scope:
        if data_format is not None:
            if data_format.startswith("NC"):
                data_format = "NCHW"
            elif data_format.startswith("N") and data_format.endswith("C"):
                data_format = "NHWC"
            else:
                raise ValueError("data_format must be of the form `N...C` or `NC...`")
        value = convert_to_tensor(value, name="input")
        bias = convert_to_tensor(bias, dtype=value.dtype.base_dtype, name="bias")
        return apply_op("BiasAdd", name=scope, value=value, bias=bias,
                        data_format=data_format)


@ks.api("nn.l2_loss")
def l2_loss(t: Any, name: str | None = None) -> Tensor:
    """``sum(t ** 2) / 2`` (``tf.nn.l2_loss``)."""
    return apply_op("L2Loss", name=name, t=t)


@ks.api("nn.xw_plus_b")
def xw_plus_b(x: Any, weights: Any, biases: Any, name: str | None = None) -> Tensor:
    """``matmul(x, weights) + biases`` (``tf.nn.xw_plus_b``)."""
    with name_scope(name, "xw_plus_b", [x, weights, biases]) as scope:
        x = convert_to_tensor(x, name="x")
        weights = convert_to_tensor(weights, name="weights")
        biases = convert_to_tensor(biases, name="biases")
        mm = apply_op("MatMul", a=x, b=weights)
        return bias_add(mm, biases, name=scope)


@ks.api("nn.relu_layer")
def relu_layer(x: Any, weights: Any, biases: Any, name: str | None = None) -> Tensor:
    """``relu(matmul(x, weights) + biases)`` (``tf.nn.relu_layer``)."""
    with name_scope(name, "relu_layer", [x, weights, biases]) as scope:
        x = convert_to_tensor(x, name="x")
        weights = convert_to_tensor(weights, name="weights")
        biases = convert_to_tensor(biases, name="biases")
        xw = bias_add(apply_op("MatMul", a=x, b=weights), biases)
        return apply_op("Relu", name=scope, features=xw)


# ---------------------------------------------------------------------------------------
# composites from nn_impl.py: l2_normalize, moments, batch_normalization
# ---------------------------------------------------------------------------------------
def _axis_arg(axis: Any) -> Any:
    if isinstance(axis, Tensor):
        return axis
    if axis is None:
        return None
    return np.array(axis, dtype=np.int32)


def _reduction_indices(x: Tensor, axis: Any) -> Any:
    """TF's ``_ReductionDims``: every axis when ``axis`` is None."""
    if axis is not None:
        return _axis_arg(axis)
    nd = x.shape.ndims
    if nd is not None:
        return np.arange(nd, dtype=np.int32)
    return apply_op("Range", start=np.int32(0), limit=apply_op("Rank", input=x),
                    delta=np.int32(1))


@ks.api("nn.l2_normalize")
def l2_normalize(x: Any, axis: Any = None, epsilon: float = 1e-12, name: str | None = None,
                 dim: Any = None) -> Tensor:
    """``x / sqrt(max(sum(x**2, axis), epsilon))`` (``tf.nn.l2_normalize``)."""
    axis = _deprecated_lookup("axis", axis, "dim", dim)
    with name_scope(name, "l2_normalize", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        sq = apply_op("Square", x=x)
        square_sum = apply_op("Sum", input=sq, reduction_indices=_reduction_indices(x, axis),
                              keep_dims=True)
        eps = convert_to_tensor(epsilon, dtype=square_sum.dtype.base_dtype)
        x_inv_norm = apply_op("Rsqrt", x=apply_op("Maximum", x=square_sum, y=eps))
        return apply_op("Mul", name=scope, x=x, y=x_inv_norm)


_api_alias(l2_normalize, "math.l2_normalize", "linalg.l2_normalize")


@ks.api("nn.moments")
def moments(x: Any, axes: Any, shift: Any = None, name: str | None = None,
            keep_dims: Any = None, keepdims: Any = None) -> tuple[Tensor, Tensor]:
    """Mean and variance of ``x`` over ``axes`` (``tf.nn.moments``); float16 inputs are
    reduced in float32 and the results cast back. ``shift`` is ignored, as in TF."""
    keep_dims = _deprecated_lookup("keepdims", keepdims, "keep_dims", keep_dims)
    if keep_dims is None:
        keep_dims = False
    with name_scope(name, "moments", [x, axes]):
        x = convert_to_tensor(x)
        half = x.dtype.base_dtype is _dt.float16
        y = apply_op("Cast", x=x, DstT=_dt.float32) if half else x
        ax = _axis_arg(axes)
        mean = apply_op("Mean", name="mean", input=y, reduction_indices=ax, keep_dims=True)
        sg = apply_op("StopGradient", input=mean)
        sqd = apply_op("SquaredDifference", x=y, y=sg)
        variance = apply_op("Mean", name="variance", input=sqd, reduction_indices=ax,
                            keep_dims=True)
        if not keep_dims:
            sq_axes = [int(a) for a in np.atleast_1d(constant_value(ax) if isinstance(
                ax, Tensor) else ax)] if ax is not None else []
            mean = apply_op("Squeeze", input=mean, squeeze_dims=sq_axes)
            variance = apply_op("Squeeze", input=variance, squeeze_dims=sq_axes)
        if half:
            return (apply_op("Cast", x=mean, DstT=_dt.float16),
                    apply_op("Cast", x=variance, DstT=_dt.float16))
        return mean, variance


def _is_graph(v: Any) -> bool:
    return isinstance(v, Tensor)


def _arith(op_type: str, name: str, a: Any, b: Any) -> Any:
    """``a <op> b`` as TF's operator overloads build it: Python arithmetic when neither
    side is a tensor, else an ``op_type`` node named ``name`` (made unique)."""
    if not _is_graph(a) and not _is_graph(b):
        return {"Add": lambda: a + b, "Mul": lambda: a * b, "Sub": lambda: a - b}[op_type]()
    return apply_op(op_type, name=name, x=a, y=b)


@ks.api("nn.batch_normalization")
def batch_normalization(x: Any, mean: Any, variance: Any, offset: Any, scale: Any,
                        variance_epsilon: float, name: str | None = None) -> Tensor:
    """``scale * (x - mean) / sqrt(variance + eps) + offset`` (``tf.nn.batch_normalization``),
    built as TF's expression ``x * inv + (offset - mean * inv)`` with
    ``inv = rsqrt(variance + eps) * scale`` (node names add, Rsqrt, mul, mul_1, sub, add_1)."""
    with name_scope(name, "batchnorm", [x, mean, variance, scale, offset]):
        x = convert_to_tensor(x)
        if isinstance(variance, np.ndarray):
            variance = convert_to_tensor(variance)
        inv = apply_op("Rsqrt", x=_arith("Add", "add", variance, variance_epsilon))
        if scale is not None:
            inv = _arith("Mul", "mul", inv, scale)
        xdt = x.dtype.base_dtype
        inv_x = inv if inv.dtype.base_dtype is xdt else apply_op("Cast", x=inv, DstT=xdt)
        x_inv = apply_op("Mul", name="mul", x=x, y=inv_x)
        if offset is not None:
            shift = _arith("Sub", "sub", offset, _arith("Mul", "mul", mean, inv))
        else:
            neg = apply_op("Neg", x=mean) if _is_graph(mean) else -mean
            shift = _arith("Mul", "mul", neg, inv)
        if _is_graph(shift) and shift.dtype.base_dtype is not xdt:
            shift = apply_op("Cast", x=shift, DstT=xdt)
        return apply_op("Add", name="add", x=x_inv, y=shift)


# ---------------------------------------------------------------------------------------
# cross entropies
# ---------------------------------------------------------------------------------------
def _xent_shape(op: Any) -> list[TensorShape]:
    f, lab = op.inputs[0].shape, op.inputs[1].shape
    f2 = f if f.ndims is not None else TensorShape([None, None])
    if f2.ndims == 2 and f2.is_compatible_with(lab):
        merged = f2.merge_with(lab)
        return [TensorShape([merged.as_tuple()[0]]), merged]
    b = broadcast_static(f, lab, op)
    if b.ndims is None:
        raise _shape_error(op, "Shape must be broadcasted with rank 2, but is rank is unknown")
    if b.ndims != 2:
        raise _shape_error(op, f"Shape must be broadcasted with rank 2, but is rank {b.ndims}")
    return [TensorShape([b.as_tuple()[0]]), b]


def _sparse_xent_shape(op: Any) -> list[TensorShape]:
    f = _with_rank(op, op.inputs[0].shape, 2)
    lab = _with_rank(op, op.inputs[1].shape, 1)
    b = _merge_dim(op, f[0], lab[0])
    return [TensorShape([b]), TensorShape([b, f[1]])]


ks.op(
    OpDef("SoftmaxCrossEntropyWithLogits", inputs=["features: T", "labels: T"],
          outputs=["loss: T", "backprop: T"], attrs=[_FLOAT_T], shape_fn=_xent_shape,
          doc="Softmax cross entropy and its gradient, per row of a batch."),
    OpDef("SparseSoftmaxCrossEntropyWithLogits", inputs=["features: T", "labels: Tlabels"],
          outputs=["loss: T", "backprop: T"],
          attrs=[_FLOAT_T, "Tlabels: {int32, int64} = DT_INT64"], shape_fn=_sparse_xent_shape,
          doc="Softmax cross entropy with integer class labels."),
)


@ks.kernel("SoftmaxCrossEntropyWithLogits")
def _xent_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    out_dt = _out_np(ctx)
    cdt = _float_compute_dtype(ctx.output_dtypes[0])

    def compute(features: Any, labels: Any) -> Any:
        if features.shape != labels.shape:
            try:
                features, labels = xp.broadcast_arrays(features, labels)
            except ValueError:
                raise errors.InvalidArgumentError(
                    None, None, "logits and labels must be broadcastable: logits_size="
                                f"{list(features.shape)} labels_size={list(labels.shape)}")
        if features.ndim != 2:
            raise errors.InvalidArgumentError(
                None, None, "logits and labels must be either 2-dimensional, or broadcasted "
                            f"to be 2-dimensional: logits_size={list(features.shape)}")
        f = features.astype(cdt, copy=False)
        lab = labels.astype(cdt, copy=False)
        if f.shape[1] == 0:
            return (xp.zeros(f.shape[0], dtype=out_dt), xp.empty(f.shape, dtype=out_dt))
        shifted = f - xp.max(f, axis=1, keepdims=True)
        lse = xp.log(xp.sum(xp.exp(shifted), axis=1, keepdims=True))
        loss = xp.sum(lab * (lse - shifted), axis=1)
        backprop = xp.exp(shifted - lse) - lab
        return loss.astype(out_dt, copy=False), backprop.astype(out_dt, copy=False)

    return compute


@ks.kernel("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_xent_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    out_dt = _out_np(ctx)
    cdt = _float_compute_dtype(ctx.output_dtypes[0])

    def compute(features: Any, labels: Any) -> Any:
        if features.ndim != 2:
            raise errors.InvalidArgumentError(
                None, None, f"logits must be 2-D, but got shape {list(features.shape)}")
        if labels.ndim != 1:
            raise errors.InvalidArgumentError(
                None, None, f"labels must be 1-D, but got shape {list(labels.shape)}")
        n, c = features.shape
        if labels.shape[0] != n:
            raise errors.InvalidArgumentError(
                None, None, "logits and labels must have the same first dimension, got "
                            f"logits shape {list(features.shape)} and labels shape "
                            f"{list(labels.shape)}")
        if n > 0 and c == 0:
            raise errors.InvalidArgumentError(
                None, None, "Must have at least one class, but got logits shape "
                            f"{list(features.shape)}")
        if n == 0:
            return xp.zeros((0,), dtype=out_dt), xp.zeros(features.shape, dtype=out_dt)
        lo, hi = int(xp.min(labels)), int(xp.max(labels))
        if lo < 0 or hi >= c:
            bad = lo if lo < 0 else hi
            vals = " ".join(str(int(v)) for v in np.asarray(ctx.device.to_host(labels)))
            raise errors.InvalidArgumentError(
                None, None, f"Received a label value of {bad} which is outside the valid "
                            f"range of [0, {c}).  Label values: {vals}")
        f = features.astype(cdt, copy=False)
        shifted = f - xp.max(f, axis=1, keepdims=True)
        lse = xp.log(xp.sum(xp.exp(shifted), axis=1))
        rows = xp.arange(n)
        loss = lse - shifted[rows, labels]
        backprop = xp.exp(shifted - lse[:, None])
        backprop[rows, labels] -= 1
        return loss.astype(out_dt, copy=False), backprop.astype(out_dt, copy=False)

    return compute


def _ensure_xent_args(name: str, sentinel: Any, labels: Any, logits: Any) -> None:
    if sentinel is not None:
        raise ValueError(f"Only call `{name}` with named arguments (labels=..., logits=..., "
                         "...)")
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")


def _reshape(x: Tensor, shape: Any) -> Tensor:
    return apply_op("Reshape", tensor=x, shape=shape)


def _rank_minus_1_vec(x: Tensor) -> Tensor:
    r = apply_op("Rank", input=x)
    return _reshape(apply_op("Sub", x=r, y=np.int32(1)), np.array([1], dtype=np.int32))


def _flatten_outer_dims(x: Tensor) -> Tensor:
    """Reshape to 2-D, keeping the last dimension (TF's ``_flatten_outer_dims``)."""
    d = x.shape.as_tuple()
    if d is not None and d and d[-1] is not None:
        target: Any = np.array([-1, d[-1]], dtype=np.int32)
    else:
        shp = apply_op("Shape", input=x, out_type=_dt.int32)
        begin = np.array([len(d) - 1], dtype=np.int32) if d is not None else _rank_minus_1_vec(x)
        last = apply_op("Slice", input=shp, begin=begin, size=np.array([1], dtype=np.int32))
        target = apply_op("ConcatV2", values=[np.array([-1], dtype=np.int32), last],
                          axis=np.int32(0))
    out = _reshape(x, target)
    if d is not None and d and all(v is not None for v in d[:-1]):
        out.set_shape([int(np.prod(d[:-1], dtype=np.int64)), d[-1]])
    return out


def _outer_shape(x: Tensor) -> Any:
    """The shape of ``x`` without its last dimension, static if possible."""
    d = x.shape.as_tuple()
    if d is not None and all(v is not None for v in d[:-1]):
        return np.array(d[:-1], dtype=np.int32)
    shp = apply_op("Shape", input=x, out_type=_dt.int32)
    size = np.array([len(d) - 1], dtype=np.int32) if d is not None else _rank_minus_1_vec(x)
    return apply_op("Slice", input=shp, begin=np.array([0], dtype=np.int32), size=size)


def _move_dim_to_end(x: Tensor, axis: int) -> Tensor:
    nd = x.shape.ndims
    if nd is None:
        raise ValueError(f"softmax cross entropy over axis {axis} needs a known rank; got "
                         f"shape {x.shape}")
    a = axis % nd
    perm = [i for i in range(nd) if i != a] + [a]
    return apply_op("Transpose", x=x, perm=np.array(perm, dtype=np.int32))


@ks.api("nn.softmax_cross_entropy_with_logits_v2")
def softmax_cross_entropy_with_logits_v2(labels: Any, logits: Any, axis: Any = None,
                                         name: str | None = None, dim: Any = None) -> Tensor:
    """Softmax cross entropy between ``logits`` and the distributions ``labels`` along
    ``axis`` (``tf.nn.softmax_cross_entropy_with_logits_v2``); returns the per-example
    loss, shaped as ``logits`` without ``axis``."""
    axis = _deprecated_lookup("axis", axis, "dim", dim)
    if axis is None:
        axis = -1
    axis = _static_axis(axis)
    with name_scope(name, "softmax_cross_entropy_with_logits", [logits, labels]) as scope:
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, name="labels")
        ldt = logits.dtype.base_dtype
        to32 = ldt in (_dt.float16, _dt.bfloat16)
        precise = apply_op("Cast", x=logits, DstT=_dt.float32) if to32 else logits
        pdt = precise.dtype.base_dtype
        if labels.dtype.base_dtype is not pdt:
            labels = apply_op("Cast", x=labels, DstT=pdt)
        shape = logits.shape
        nd = shape.ndims
        if axis != -1 and not (nd is not None and axis == nd - 1):
            precise = _move_dim_to_end(precise, axis)
            labels = _move_dim_to_end(labels, axis)
        # As TF: flatten to 2-D, name the op after the scope, reshape the loss back (so
        # the result is e.g. "softmax_cross_entropy_with_logits/Reshape_2:0", as in TF).
        flat_logits = _flatten_outer_dims(precise)
        flat_labels = _flatten_outer_dims(labels)
        cost, _ = apply_op("SoftmaxCrossEntropyWithLogits", name=scope,
                           features=flat_logits, labels=flat_labels)
        cost = _reshape(cost, _outer_shape(precise))
        if nd is not None:
            dims = list(shape.as_tuple())
            del dims[axis]
            cost.set_shape(dims)
        if to32:
            return apply_op("Cast", x=cost, DstT=ldt)
        return cost


@ks.api("nn.softmax_cross_entropy_with_logits")
def softmax_cross_entropy_with_logits(_sentinel: Any = None, labels: Any = None,
                                      logits: Any = None, dim: int = -1,
                                      name: str | None = None) -> Tensor:
    """Softmax cross entropy (``tf.nn.softmax_cross_entropy_with_logits``, TF1): as the
    v2 function with a StopGradient on ``labels``."""
    _ensure_xent_args("softmax_cross_entropy_with_logits", _sentinel, labels, logits)
    with name_scope(name, "softmax_cross_entropy_with_logits_sg", [logits, labels]) as scope:
        labels = apply_op("StopGradient", name="labels_stop_gradient", input=labels)
    return softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits, axis=dim,
                                                name=scope)


@ks.api("nn.sparse_softmax_cross_entropy_with_logits")
def sparse_softmax_cross_entropy_with_logits(_sentinel: Any = None, labels: Any = None,
                                             logits: Any = None,
                                             name: str | None = None) -> Tensor:
    """Softmax cross entropy with integer class ``labels`` (one fewer dimension than
    ``logits``) (``tf.nn.sparse_softmax_cross_entropy_with_logits``).

    :raises ValueError: on static rank or shape mismatch between labels and logits.
    """
    _ensure_xent_args("sparse_softmax_cross_entropy_with_logits", _sentinel, labels, logits)
    with name_scope(name, "SparseSoftmaxCrossEntropyWithLogits", [labels, logits]):
        labels = convert_to_tensor(labels)
        logits = convert_to_tensor(logits)
        half = logits.dtype.base_dtype is _dt.float16
        precise = apply_op("Cast", x=logits, DstT=_dt.float32) if half else logits
        lshape = labels.shape
        fshape = logits.shape
        fully = lshape.is_fully_defined() and fshape.ndims is not None and \
            fshape[:-1].is_fully_defined()
        if fshape.ndims is not None and fshape.ndims == 0:
            raise ValueError(f"Logits cannot be scalars - received shape {fshape}.")
        if fshape.ndims is not None and lshape.ndims is not None and \
                lshape.ndims != fshape.ndims - 1:
            raise ValueError(f"Rank mismatch: Rank of labels (received {lshape.ndims}) should "
                             f"equal rank of logits minus 1 (received {fshape.ndims}).")
        if fully and lshape != fshape[:-1]:
            raise ValueError(f"Shape mismatch: The shape of labels (received {lshape}) should "
                             "equal the shape of logits except for the last dimension "
                             f"(received {fshape}).")
        if fshape.ndims == 2:
            cost, _ = apply_op("SparseSoftmaxCrossEntropyWithLogits",
                               name=name, features=precise, labels=labels)
            return apply_op("Cast", x=cost, DstT=_dt.float16) if half else cost
        flat_logits = _flatten_outer_dims(precise)
        flat_labels = _reshape(labels, np.array([-1], dtype=np.int32))
        cost, _ = apply_op("SparseSoftmaxCrossEntropyWithLogits",
                           name=name, features=flat_logits,
                           labels=flat_labels)
        lsd = lshape.as_tuple()
        target = np.array(lsd, dtype=np.int32) if lshape.is_fully_defined() else \
            apply_op("Shape", input=labels, out_type=_dt.int32)
        cost = _reshape(cost, target)
        cost.set_shape(lshape)
        return apply_op("Cast", x=cost, DstT=_dt.float16) if half else cost


@ks.api("nn.sigmoid_cross_entropy_with_logits")
def sigmoid_cross_entropy_with_logits(_sentinel: Any = None, labels: Any = None,
                                      logits: Any = None, name: str | None = None) -> Tensor:
    """Element-wise logistic loss, computed stably as
    ``max(x, 0) - x * z + log(1 + exp(-abs(x)))`` (``tf.nn.sigmoid_cross_entropy_with_logits``).

    :raises ValueError: when labels and logits have incompatible shapes.
    """
    _ensure_xent_args("sigmoid_cross_entropy_with_logits", _sentinel, labels, logits)
    with name_scope(name, "logistic_loss", [logits, labels]) as scope:
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, name="labels")
        try:
            labels.shape.merge_with(logits.shape)
        except ValueError:
            raise ValueError(f"logits and labels must have the same shape ({logits.shape} vs "
                             f"{labels.shape})") from None
        zeros = apply_op("ZerosLike", x=logits)
        cond = apply_op("GreaterEqual", x=logits, y=zeros)
        relu_logits = apply_op("Select", condition=cond, t=logits, e=zeros)
        neg_abs = apply_op("Select", condition=cond, t=apply_op("Neg", x=logits), e=logits)
        a = apply_op("Sub", x=relu_logits, y=apply_op("Mul", x=logits, y=labels))
        b = apply_op("Log1p", x=apply_op("Exp", x=neg_abs))
        return apply_op("Add", name=scope, x=a, y=b)


@ks.api("nn.weighted_cross_entropy_with_logits")
def weighted_cross_entropy_with_logits(labels: Any = None, logits: Any = None,
                                       pos_weight: Any = None, name: str | None = None,
                                       targets: Any = None) -> Tensor:
    """Logistic loss with positive examples weighted by ``pos_weight``
    (``tf.nn.weighted_cross_entropy_with_logits``; ``targets`` is TF 1.x's older name
    of ``labels``)."""
    if labels is not None and targets is not None:
        raise ValueError("Cannot specify both 'labels' and 'targets'")
    targets = labels if labels is not None else targets
    if targets is None or logits is None or pos_weight is None:
        raise ValueError("weighted_cross_entropy_with_logits needs labels (or targets), "
                         "logits and pos_weight")
    with name_scope(name, "logistic_loss", [logits, targets]) as scope:
        logits = convert_to_tensor(logits, name="logits")
        targets = convert_to_tensor(targets, name="targets")
        try:
            targets.shape.merge_with(logits.shape)
        except ValueError:
            raise ValueError(f"logits and targets must have the same shape ({logits.shape} vs "
                             f"{targets.shape})") from None
        dt = logits.dtype.base_dtype
        one = convert_to_tensor(1.0, dtype=dt)
        pw = convert_to_tensor(pos_weight, dtype=dt)
        log_weight = apply_op("Add", x=one, y=apply_op("Mul", x=apply_op("Sub", x=pw, y=one),
                                                       y=targets))
        t1 = apply_op("Mul", x=apply_op("Sub", x=one, y=targets), y=logits)
        soft = apply_op("Add", x=apply_op("Log1p", x=apply_op("Exp", x=apply_op(
            "Neg", x=apply_op("Abs", x=logits)))),
            y=apply_op("Relu", features=apply_op("Neg", x=logits)))
        return apply_op("Add", name=scope, x=t1, y=apply_op("Mul", x=log_weight, y=soft))


# ---------------------------------------------------------------------------------------
# dropout
# ---------------------------------------------------------------------------------------
def _noise_shape(x: Tensor, noise_shape: Any) -> Any:
    if noise_shape is None:
        return _shape_of(x)
    if isinstance(noise_shape, Tensor):
        return noise_shape
    try:
        ns = as_shape(noise_shape)
    except (TypeError, ValueError):
        return noise_shape
    xd = x.shape.as_tuple()
    nd = ns.as_tuple()
    if xd is not None and nd is not None and len(xd) == len(nd):
        return [xv if nv is None and xv is not None else nv for xv, nv in zip(xd, nd)]
    return noise_shape


@ks.api("nn.dropout")
def dropout(x: Any, keep_prob: Any = None, noise_shape: Any = None, seed: int | None = None,
            name: str | None = None, rate: Any = None) -> Tensor:
    """Keeps each element with probability ``keep_prob`` (or ``1 - rate``) and scales kept
    elements by ``1 / keep_prob`` (``tf.nn.dropout``, TF1 signature).

    :raises ValueError: without keep_prob/rate, for non-float ``x`` or a rate outside [0, 1).
    """
    if keep_prob is not None:
        if rate is not None:
            raise ValueError("Cannot specify both 'keep_prob' and 'rate'")
        if isinstance(keep_prob, Tensor):
            rate = apply_op("Sub", x=convert_to_tensor(1.0, dtype=keep_prob.dtype.base_dtype),
                            y=keep_prob)
        else:
            try:
                rate = 1.0 - keep_prob
            except TypeError:
                raise ValueError(f"keep_prob must be a floating point number or Tensor (got "
                                 f"{keep_prob!r})") from None
    if rate is None:
        raise ValueError("You must provide a rate to dropout.")
    with name_scope(name, "dropout", [x]):
        x = convert_to_tensor(x, name="x")
        xdt = x.dtype.base_dtype
        if not xdt.is_floating:
            raise ValueError("x has to be a floating point tensor since it's going to be "
                             f"scaled. Got a {xdt.name} tensor instead.")
        if isinstance(rate, numbers.Real) and not isinstance(rate, bool):
            if not (0 <= rate < 1):
                raise ValueError("rate must be a scalar tensor or a float in the range [0, 1), "
                                 f"got {rate:g}")
            if rate == 0:
                return x
        rate_t = convert_to_tensor(rate, dtype=xdt, name="rate")
        rate_t.shape.assert_is_compatible_with(TensorShape([]))
        cv = constant_value(rate_t)
        if cv is not None and np.ndim(cv) == 0 and float(cv) == 0:
            return x
        from .random_ops import random_uniform

        random_tensor = random_uniform(_noise_shape(x, noise_shape), seed=seed, dtype=xdt)
        # node names as TF's operator overloads give them (dropout/sub, dropout/mul_1 ...)
        keep = apply_op("Sub", name="sub", x=convert_to_tensor(1, dtype=xdt), y=rate_t)
        scale = apply_op("RealDiv", name="truediv", x=convert_to_tensor(1, dtype=xdt), y=keep)
        keep_mask = apply_op("GreaterEqual", x=random_tensor, y=rate_t)
        scaled = apply_op("Mul", name="mul", x=x, y=scale)
        ret = apply_op("Mul", name="mul", x=scaled, y=apply_op("Cast", x=keep_mask, DstT=xdt))
        ret.set_shape(x.shape)
        return ret


# ---------------------------------------------------------------------------------------
# Conv2D
# ---------------------------------------------------------------------------------------
def _nhwc_index(fmt: str) -> tuple[int, int, int, int]:
    """(batch, height, width, channel) axis indices for a 4-D data format."""
    return (0, 2, 3, 1) if fmt.startswith("NC") else (0, 1, 2, 3)


def _explicit_pads(op_or_attrs: Any, fmt: str) -> tuple[tuple[int, int], tuple[int, int]]:
    attrs = op_or_attrs if isinstance(op_or_attrs, dict) else op_or_attrs.node_attrs
    p = list(attrs.get("explicit_paddings") or [])
    _, hi, wi, _ = _nhwc_index(fmt)
    return (p[2 * hi], p[2 * hi + 1]), (p[2 * wi], p[2 * wi + 1])


def _check_conv_attrs(attrs: dict[str, Any], op_type: str) -> None:
    strides = list(attrs.get("strides") or [])
    if len(strides) != 4:
        raise ValueError(f"{op_type} requires the stride attribute to contain 4 values, but "
                         f"got: {len(strides)}")
    dil = list(attrs.get("dilations") or [1, 1, 1, 1])
    if len(dil) != 4:
        raise ValueError(f"{op_type} requires the dilation attribute to contain 4 values, but "
                         f"got: {len(dil)}")
    if any(s <= 0 for s in strides) or any(d <= 0 for d in dil):
        raise ValueError(f"{op_type}: strides and dilations must be positive, got strides "
                         f"{strides} and dilations {dil}")
    padding = attrs.get("padding")
    p = list(attrs.get("explicit_paddings") or [])
    if padding == "EXPLICIT":
        if len(p) != 8:
            raise ValueError(f"explicit_paddings attribute must contain 8 values, but got: "
                             f"{len(p)}")
        if any(v < 0 for v in p):
            raise ValueError(f"All elements of explicit_paddings must be nonnegative, got {p}")
        bi, _, _, ci = _nhwc_index(attrs.get("data_format", "NHWC"))
        if p[2 * bi] or p[2 * bi + 1] or p[2 * ci] or p[2 * ci + 1]:
            raise ValueError("Nonzero explicit padding in the batch or depth dimensions is "
                             "not supported")
    elif p:
        raise ValueError("explicit_paddings attribute must be empty if the padding attribute "
                         "is not EXPLICIT")


def _conv2d_shape(op: Any) -> list[TensorShape]:
    attrs = op.node_attrs
    _check_conv_attrs(attrs, op.type)
    fmt = attrs.get("data_format", "NHWC")
    bi, hi, wi, ci = _nhwc_index(fmt)
    ind = _with_rank(op, op.inputs[0].shape, 4)
    fd = _with_rank(op, op.inputs[1].shape, 4)
    kh, kw, fin, fout = fd
    _merge_dim(op, ind[ci], fin)
    strides = attrs["strides"]
    dil = list(attrs.get("dilations") or [1, 1, 1, 1])
    padding = attrs["padding"]
    (pt, pb), (pl, pr) = _explicit_pads(attrs, fmt) if padding == "EXPLICIT" else ((0, 0),
                                                                                   (0, 0))

    def out_dim(n: int | None, k: int | None, s: int, d: int, lo: int, hi_: int) -> int | None:
        if n is None or k is None:
            return None
        return _static_windowed_size(op, n, (k - 1) * d + 1, s, padding, lo, hi_)

    oh = out_dim(ind[hi], kh, strides[hi], dil[hi], pt, pb)
    ow = out_dim(ind[wi], kw, strides[wi], dil[wi], pl, pr)
    out: list[int | None] = [None] * 4
    out[bi], out[hi], out[wi], out[ci] = ind[bi], oh, ow, fout
    return [TensorShape(out)]


ks.op(OpDef(
    "Conv2D", inputs=["input: T", "filter: T"], outputs=["output: T"],
    attrs=["T: {half, bfloat16, float, double, int32}", "strides: list(int)",
           "use_cudnn_on_gpu: bool = true", "padding: {'SAME', 'VALID', 'EXPLICIT'}",
           "explicit_paddings: list(int) = []", "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
           "dilations: list(int) = [1, 1, 1, 1]"],
    shape_fn=_conv2d_shape, doc="2-D convolution of a 4-D input with a 4-D filter."))


def window_patches(xp: Any, x: Any, out_sp: Sequence[int], k_sp: Sequence[int],
                   strides: Sequence[int], dilations: Sequence[int]) -> Any:
    """The patches of padded channels-last ``x`` [N, *spatial, C] under a window of
    ``k_sp``: a contiguous ``[N, *out_sp, *k_sp, C]`` array, so reshaping it to
    ``(N * prod(out_sp), prod(k_sp) * C)`` gives the left operand of the convolution's
    GEMM (im2col).

    One strided view copied once: with dilation 1 each (window row, output position)
    reads ``k * C`` neighbouring values, which measured 2-3x faster than stacking the
    ``prod(k_sp)`` shifted slices (the copy is the memory-bound half of a convolution)."""
    st = x.strides
    sp_st = st[1:-1]
    shape = (x.shape[0], *out_sp, *k_sp, x.shape[-1])
    strides_b = (st[0], *[a * s for a, s in zip(sp_st, strides)],
                 *[a * d for a, d in zip(sp_st, dilations)], st[-1])
    return xp.ascontiguousarray(xp.lib.stride_tricks.as_strided(x, shape, strides_b))


@ks.kernel("Conv2D", expensive=True)
def _conv2d_kernel(ctx: Any) -> Any:
    return _conv2d_factory(ctx, "Conv2D")


def _conv2d_factory(ctx: Any, op_type: str,
                    epilogue: Callable[[Any, Sequence[Any]], None] | None = None) -> Any:
    """Conv2D's compute function. ``epilogue(block, extra)``, when given, is applied in
    place to each ``[rows, F]`` block of the output right after its product (still in
    cache), with the kernel's inputs after the filter as ``extra`` (``_FusedConv2D``'s
    bias); the output's dtype is then the compute dtype."""
    xp = ctx.xp
    attrs = ctx.attrs
    _check_conv_attrs(attrs, op_type)
    fmt = attrs.get("data_format", "NHWC")
    nchw = fmt == "NCHW"
    bi, hi, wi, ci = _nhwc_index(fmt)
    strides = list(attrs["strides"])
    dil = list(attrs.get("dilations") or [1, 1, 1, 1])
    if strides[bi] != 1 or strides[ci] != 1:
        raise errors.InvalidArgumentError(
            None, None, "Current implementation does not yet support strides in the batch "
                        "and depth dimensions.")
    if dil[bi] != 1 or dil[ci] != 1:
        raise errors.InvalidArgumentError(
            None, None, "Current implementation does not yet support dilations in the batch "
                        "and depth dimensions.")
    sh, sw = strides[hi], strides[wi]
    dh, dw = dil[hi], dil[wi]
    padding = attrs["padding"]
    explicit = _explicit_pads(attrs, fmt) if padding == "EXPLICIT" else ((0, 0), (0, 0))
    out_dt = _out_np(ctx)
    cdt = _float_compute_dtype(ctx.output_dtypes[0])

    def compute(x: Any, w: Any, *extra: Any) -> Any:
        if x.ndim != 4:
            raise errors.InvalidArgumentError(
                None, None, f"input must be 4-dimensional{list(x.shape)}")
        if w.ndim != 4:
            raise errors.InvalidArgumentError(
                None, None, f"filter must be 4-dimensional: {list(w.shape)}")
        ep = None if epilogue is None else (lambda block: epilogue(block, extra))
        if nchw:
            x = xp.transpose(x, (0, 2, 3, 1))
        n, h, wd, c = x.shape
        kh, kw, fc, fo = w.shape
        if c != fc:
            raise errors.InvalidArgumentError(
                None, None, f"input and filter must have the same depth: {c} vs {fc}")
        try:
            oh, pt, pb = _windowed_size(h, (kh - 1) * dh + 1, sh, padding, *explicit[0])
            ow, pl, pr = _windowed_size(wd, (kw - 1) * dw + 1, sw, padding, *explicit[1])
        except ValueError as e:
            raise errors.InvalidArgumentError(None, None, str(e)) from None
        rows = _rows.geometry(h, wd, c, kh, kw, oh, ow, pt, pl, sh, sw, dh, dw)
        if oh == 0 or ow == 0 or n == 0 or fo == 0:
            out = xp.zeros((n, oh, ow, fo), dtype=out_dt)
            if ep is not None:
                ep(out.reshape(-1, fo))
        elif _rows.usable(xp, rows):
            out = _rows.forward(ctx, x.astype(cdt, copy=False), w.astype(cdt, copy=False),
                                rows, out_dt, ep)
        elif _rows.usable_taps(xp, rows):
            out = _rows.taps_forward(ctx, x.astype(cdt, copy=False),
                                     w.astype(cdt, copy=False), rows, out_dt, ep)
        else:
            xc = x.astype(cdt, copy=False)
            if pt or pb or pl or pr:
                xc = xp.pad(xc, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
            k = kh * kw * c
            wk = w.astype(cdt, copy=False).reshape(k, fo)
            out = xp.empty((n, oh, ow, fo), dtype=wk.dtype)

            def part(lo: int, hi: int) -> None:
                patches = window_patches(xp, xc[lo:hi], (oh, ow), (kh, kw), (sh, sw),
                                         (dh, dw))
                block = out[lo:hi].reshape(-1, fo)
                xp.matmul(patches.reshape(-1, k), wk, out=block)
                if ep is not None:
                    ep(block)

            batch_parts(ctx, n, oh * ow * k * xc.itemsize, part)
            out = out.astype(out_dt, copy=False)
        if nchw:
            out = xp.transpose(out, (0, 3, 1, 2))
        return out

    return compute


# TF's remapper op: a Conv2D with its BiasAdd and activation (the graph pass
# ``conv_bias_activation_fusion`` makes it on the CPU); the same results, bit for bit
ks.op(OpDef(
    "_FusedConv2D", inputs=["input: T", "filter: T", "args: num_args * T"],
    outputs=["output: T"],
    attrs=["T: {half, float, double}", "num_args: int >= 0", "strides: list(int)",
           "padding: {'SAME', 'VALID', 'EXPLICIT'}", "explicit_paddings: list(int) = []",
           "data_format: {'NHWC', 'NCHW'} = 'NHWC'", "dilations: list(int) = [1, 1, 1, 1]",
           "use_cudnn_on_gpu: bool = true", "fused_ops: list(string) = []",
           "epsilon: float = 0.0001", "leakyrelu_alpha: float = 0.2"],
    shape_fn=_conv2d_shape,
    doc="Conv2D followed by the ops of fused_ops (BiasAdd, then optionally Relu or Relu6)."))

#: the ``fused_ops`` lists ``_FusedConv2D`` runs here
FUSED_CONV_OPS = (("BiasAdd",), ("BiasAdd", "Relu"), ("BiasAdd", "Relu6"))


@ks.kernel("_FusedConv2D", expensive=True)
def _fused_conv2d_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    attrs = ctx.attrs
    fused = tuple(f.decode() if isinstance(f, bytes) else str(f)
                  for f in attrs.get("fused_ops") or ())
    if fused not in FUSED_CONV_OPS or attrs.get("num_args", 1) != 1 or \
            attrs.get("data_format", "NHWC") != "NHWC":
        raise errors.UnimplementedError(
            None, None, f"_FusedConv2D: fused_ops {list(fused)} with "
            f"{attrs.get('num_args')} argument(s) in {attrs.get('data_format', 'NHWC')} is "
            f"not supported on {ctx.device.name}; supported: BiasAdd, optionally followed "
            f"by Relu or Relu6, in NHWC")
    act = fused[1] if len(fused) > 1 else None

    def epilogue(block: Any, extra: Sequence[Any]) -> None:
        # BiasAdd's and the activation's own operations, in place
        xp.add(block, extra[0], out=block)
        if act is not None:
            xp.maximum(block, 0, out=block)
            if act == "Relu6":
                xp.minimum(block, 6, out=block)

    conv = _conv2d_factory(ctx, "_FusedConv2D", epilogue)

    def compute(x: Any, w: Any, b: Any) -> Any:
        if b.ndim != 1:
            raise errors.InvalidArgumentError(
                None, None, f"Biases must be 1D: {list(b.shape)}")
        if w.ndim == 4 and b.shape[0] != w.shape[3]:
            raise errors.InvalidArgumentError(
                None, None, f"Must provide as many biases as the channel dimension of the "
                            f"input tensor: {list(b.shape)} vs. {w.shape[3]} channels")
        return conv(x, w, b)

    return compute


def _convert_padding(padding: Any) -> tuple[str, list[int]]:
    """TF's ``convert_padding``: a list of 4 [before, after] pairs means EXPLICIT."""
    explicit: list[int] = []
    if padding == "EXPLICIT":
        raise ValueError('"EXPLICIT" is not a valid value for the padding parameter. To use '
                         "explicit padding, the padding parameter must be a list.")
    if isinstance(padding, (list, tuple)):
        for i, dp in enumerate(padding):
            if not isinstance(dp, (list, tuple)):
                raise ValueError("When padding is a list, each element of padding must be a "
                                 f"list/tuple of size 2. Element with index {i} of padding is "
                                 "not a list/tuple")
            if len(dp) != 2:
                raise ValueError("When padding is a list, each element of padding must be a "
                                 f"list/tuple of size 2. Element with index {i} of padding has "
                                 f"size {len(dp)}")
            explicit.extend(int(v) for v in dp)
        if len(padding) != 4:
            raise ValueError("When padding is a list, it must be of size 4. Got padding of "
                             f"size: {len(padding)}")
        padding = "EXPLICIT"
    if isinstance(padding, bytes):
        padding = padding.decode()
    return padding, explicit


def _get_sequence(value: Any, n: int, channel_index: int, name: str) -> list[int]:
    """TF's ``_get_sequence``: expand an int or length-n list to the 4-D attr form."""
    if value is None:
        return [1] * (n + 2)
    if isinstance(value, (int, np.integer)):
        value = [int(value)]
    elif not isinstance(value, (list, tuple)):
        value = list(value)
    value = [int(v) for v in value]
    if len(value) == n + 2:
        return value
    if len(value) == 1:
        value = value * n
    elif len(value) != n:
        raise ValueError(f"{name} should be of length 1, {n} or {n + 2} but was {len(value)}")
    return [1, 1] + value if channel_index == 1 else [1] + value + [1]


def _strides_list(strides: Any) -> Any:
    if isinstance(strides, (int, np.integer)):
        return [1, int(strides), int(strides), 1]
    return strides


@ks.api("nn.conv2d")
def conv2d(input: Any, filter: Any = None, strides: Any = None, padding: Any = None,
           use_cudnn_on_gpu: bool = True, data_format: str = "NHWC",
           dilations: Any = (1, 1, 1, 1), name: str | None = None,
           filters: Any = None) -> Tensor:
    """2-D convolution (``tf.nn.conv2d``, TF1 signature). ``padding`` is "SAME", "VALID"
    or a list of four [before, after] pairs (explicit padding)."""
    filter = _deprecated_lookup("filters", filters, "filter", filter)
    padding, explicit = _convert_padding(padding)
    return apply_op("Conv2D", name=name, input=input, filter=filter,
                    strides=_strides_list(strides), padding=padding,
                    use_cudnn_on_gpu=use_cudnn_on_gpu, explicit_paddings=explicit,
                    data_format=data_format, dilations=list(dilations))


# ---------------------------------------------------------------------------------------
# MaxPool, AvgPool
# ---------------------------------------------------------------------------------------
def _pool_shape(op: Any) -> list[TensorShape]:
    attrs = op.node_attrs
    fmt = attrs.get("data_format", "NHWC")
    if fmt == "NCHW_VECT_C":
        return [unknown_shape()]
    ksize, strides = list(attrs["ksize"]), list(attrs["strides"])
    if len(ksize) != 4 or len(strides) != 4:
        raise _shape_error(op, f"{op.type} requires the ksize and stride attributes to "
                               f"contain 4 values, but got: {len(ksize)} and {len(strides)}")
    if any(v <= 0 for v in ksize + strides):
        raise _shape_error(op, f"{op.type}: ksize and strides must be positive")
    d = _with_rank(op, op.inputs[0].shape, 4)
    # as TF's MaxPoolShape / AvgPoolShape: the batch dimension is kept; only MaxPool
    # pools over depth
    bi, hi, wi, ci = _nhwc_index(fmt)
    pooled = (hi, wi, ci) if op.type == "MaxPool" else (hi, wi)
    out: list[int | None] = []
    for i in range(4):
        if d[i] is None or i not in pooled:
            out.append(d[i])
            continue
        out.append(_static_windowed_size(op, d[i], ksize[i], strides[i], attrs["padding"]))
    return [TensorShape(out)]


ks.op(
    OpDef("MaxPool", inputs=["input: T"], outputs=["output: T"],
          attrs=["T: {half, bfloat16, float, double, int32, int64, uint8, int16, int8, "
                 "uint16, qint8} = DT_FLOAT", "ksize: list(int) >= 4",
                 "strides: list(int) >= 4", "padding: {'SAME', 'VALID'}",
                 "data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'"],
          shape_fn=_pool_shape, doc="Max pooling."),
    OpDef("AvgPool", inputs=["value: T"], outputs=["output: T"],
          attrs=["ksize: list(int) >= 4", "strides: list(int) >= 4",
                 "padding: {'SAME', 'VALID'}", "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
                 _FLOAT_T],
          shape_fn=_pool_shape, doc="Average pooling (SAME: over the valid elements only)."),
)


def _pool_factory(ctx: Any, mode: str) -> Any:
    xp = ctx.xp
    attrs = ctx.attrs
    fmt = attrs.get("data_format", "NHWC")
    op_name = "MaxPool" if mode == "max" else "AvgPool"
    if fmt not in ("NHWC", "NCHW"):
        raise errors.UnimplementedError(None, None,
                                        f"{op_name} does not support data_format {fmt}")
    ksize, strides = list(attrs["ksize"]), list(attrs["strides"])
    if len(ksize) != 4 or len(strides) != 4:
        raise errors.InvalidArgumentError(
            None, None, "Sliding window ksize and strides fields must specify 4 dimensions")
    bi, hi, wi, ci = _nhwc_index(fmt)
    if ksize[bi] != 1 or strides[bi] != 1:
        raise errors.UnimplementedError(
            None, None, "Pooling is not yet supported on the batch dimension.")
    if mode == "avg" and (ksize[ci] != 1 or strides[ci] != 1):
        raise errors.UnimplementedError(
            None, None, "Non-spatial pooling is not yet supported. Volunteers? :)")
    # window over (H, W, C) in NHWC order
    ks3 = (ksize[hi], ksize[wi], ksize[ci])
    st3 = (strides[hi], strides[wi], strides[ci])
    padding = attrs["padding"]
    nchw = fmt == "NCHW"
    dt = ctx.output_dtypes[0]
    out_dt = dt.np
    if mode == "max":
        fill = -np.inf if dt.is_floating else np.iinfo(out_dt).min
        cdt = out_dt
    else:
        fill = 0
        cdt = _float_compute_dtype(dt)

    def compute(x: Any) -> Any:
        if x.ndim != 4:
            raise errors.InvalidArgumentError(
                None, None, f"input must be 4-dimensional{list(x.shape)}")
        if nchw:
            x = xp.transpose(x, (0, 2, 3, 1))
        dims = x.shape[1:]
        geo = []
        for n_, k_, s_ in zip(dims, ks3, st3):
            try:
                geo.append(_windowed_size(n_, k_, s_, padding))
            except ValueError as e:
                raise errors.InvalidArgumentError(None, None, str(e)) from None
        outs = [g[0] for g in geo]
        if 0 in outs or x.shape[0] == 0:
            out = xp.zeros((x.shape[0],) + tuple(outs), dtype=out_dt)
        else:
            xc = x.astype(cdt, copy=False)
            pads = [(g[1], g[2]) for g in geo]
            if any(p != (0, 0) for p in pads):
                xc = xp.pad(xc, [(0, 0)] + pads, constant_values=fill)
            ext = [(o - 1) * s + 1 for o, s in zip(outs, st3)]

            def pooled(lo: int, hi: int, out: Any = None) -> Any:
                """The windows' maxima (or sums) of the images [lo, hi), into ``out``
                when given. The first two windows combine into the result directly (no
                copy of the first one first): the same operations in the same order."""
                xs = xc[lo:hi]
                wins = [xs[:, i:i + ext[0]:st3[0], j:j + ext[1]:st3[1], k:k + ext[2]:st3[2]]
                        for i in range(ks3[0]) for j in range(ks3[1])
                        for k in range(ks3[2])]
                combine = xp.maximum if mode == "max" else xp.add
                if mode == "max" and len(wins) > 1:
                    acc = combine(wins[0], wins[1], out=out)
                    rest = wins[2:]
                else:
                    if out is None:
                        acc = wins[0].astype(cdt, copy=True)
                    else:
                        acc = out
                        acc[...] = wins[0]
                    rest = wins[1:]
                for win in rest:
                    combine(acc, win, out=acc)
                return acc

            # a large input in batch ranges on the intra-op threads, into one result
            acc = None
            if xp is np and xc.size >= PARALLEL_ELEMENTS:
                acc = np.empty((xc.shape[0], *outs), dtype=cdt)
                if row_parts(ctx, xc.shape[0], xc.size,
                             lambda lo, hi: pooled(lo, hi, acc[lo:hi])) is None:
                    acc = None
            if acc is None:
                acc = pooled(0, xc.shape[0])
            if mode == "avg":
                counts = None
                for ax, ((o, lo, _), n_, k_, s_) in enumerate(zip(geo, dims, ks3, st3)):
                    start = np.arange(o) * s_ - lo
                    cnt = np.minimum(start + k_, n_) - np.maximum(start, 0)
                    shape = [1, 1, 1]
                    shape[ax] = o
                    cnt = cnt.reshape(shape)
                    counts = cnt if counts is None else counts * cnt
                acc = acc / xp.asarray(counts.astype(cdt))
            out = acc.astype(out_dt, copy=False)
        if nchw:
            out = xp.transpose(out, (0, 3, 1, 2))
        return out

    return compute


@ks.kernel("MaxPool", expensive=True)
def _max_pool_kernel(ctx: Any) -> Any:
    return _pool_factory(ctx, "max")


@ks.kernel("AvgPool", expensive=True)
def _avg_pool_kernel(ctx: Any) -> Any:
    return _pool_factory(ctx, "avg")


def _pool_api(op_type: str, value: Any, ksize: Any, strides: Any, padding: Any,
              data_format: str | None, name: str | None, input_key: str) -> Tensor:
    with name_scope(name, op_type, [value]) as scope:
        if data_format is None:
            data_format = "NHWC"
        channel_index = 1 if data_format.startswith("NC") else 3
        ksize = _get_sequence(ksize, 2, channel_index, "ksize")
        strides = _get_sequence(strides, 2, channel_index, "strides")
        if any(v == 0 for v in ksize):
            raise ValueError("ksize cannot be zero.")
        if isinstance(padding, bytes):
            padding = padding.decode()
        return apply_op(op_type, name=scope, ksize=ksize, strides=strides, padding=padding,
                        data_format=data_format, **{input_key: value})


@ks.api("nn.max_pool")
def max_pool(value: Any, ksize: Any, strides: Any, padding: str, data_format: str = "NHWC",
             name: str | None = None, input: Any = None) -> Tensor:
    """Max pooling (``tf.nn.max_pool``, TF1 signature)."""
    value = _deprecated_lookup("input", input, "value", value)
    return _pool_api("MaxPool", value, ksize, strides, padding, data_format, name, "input")


@ks.api("nn.avg_pool")
def avg_pool(value: Any, ksize: Any, strides: Any, padding: str, data_format: str = "NHWC",
             name: str | None = None, input: Any = None) -> Tensor:
    """Average pooling (``tf.nn.avg_pool``, TF1 signature); with SAME padding each output
    averages only the valid input elements."""
    value = _deprecated_lookup("input", input, "value", value)
    return _pool_api("AvgPool", value, ksize, strides, padding, data_format, name, "value")


@ks.api("nn.max_pool2d")
def max_pool2d(input: Any, ksize: Any, strides: Any, padding: str, data_format: str = "NHWC",
               name: str | None = None) -> Tensor:
    """Max pooling of a 4-D input (``tf.nn.max_pool2d``; its name scope is "MaxPool2d",
    as in TF)."""
    with name_scope(name, "MaxPool2d", [input]) as scope:
        return _pool_api("MaxPool", input, ksize, strides, padding, data_format, scope,
                         "input")


@ks.api("nn.avg_pool2d")
def avg_pool2d(input: Any, ksize: Any, strides: Any, padding: str, data_format: str = "NHWC",
               name: str | None = None) -> Tensor:
    """Average pooling of a 4-D input (``tf.nn.avg_pool2d``)."""
    return _pool_api("AvgPool", input, ksize, strides, padding, data_format, name, "value")


__all__: Sequence[str] = [
    "relu", "relu6", "leaky_relu", "elu", "selu", "softplus", "softsign", "crelu", "softmax",
    "log_softmax", "bias_add", "l2_loss", "xw_plus_b", "relu_layer", "l2_normalize",
    "moments", "batch_normalization", "softmax_cross_entropy_with_logits",
    "softmax_cross_entropy_with_logits_v2", "sparse_softmax_cross_entropy_with_logits",
    "sigmoid_cross_entropy_with_logits", "weighted_cross_entropy_with_logits", "dropout",
    "conv2d", "max_pool", "avg_pool", "max_pool2d", "avg_pool2d",
]
