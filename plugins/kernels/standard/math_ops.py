"""math_ops of the standard kernel set: element-wise math, comparisons, casts,
reductions, scans and matrix products (TF 1.15's ``math_ops.cc`` and ``math_ops.py``).

Kernels follow TensorFlow's CPU semantics where numpy's differ: no dtype promotion,
floor division of floats is ``floor(x / y)``, integer division or modulo by zero raises
InvalidArgumentError, integer powers reject negative exponents, reductions keep the
input dtype (the mean of ints truncates), casts truncate toward zero and take the real
part of complex values.
"""
from __future__ import annotations

import builtins
import math
import string as _string
from typing import Any, Callable, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt.errors import InvalidArgumentError, UnimplementedError
from flowrt.graph import Tensor, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import broadcast_shape, broadcast_static, constant_value, host_reader, ks
from ._common import GEMV_SUM_MIN, column_sums, unchanged_shape

_range = builtins.range  # ``range`` stays the builtin; TF names shadow abs/round/pow

# -- type lists (TF's REGISTER_OP lists, as of the newest TF; a superset of 1.15's) ----
_FLOAT = "bfloat16, half, float, double"
_CPLX = "complex64, complex128"
_SINT = "int8, int16, int32, int64"
_UINT = "uint8, uint16, uint32, uint64"
_INT = f"{_SINT}, {_UINT}"
_REAL_NUM = f"{_FLOAT}, {_INT}"
_NUM = f"{_REAL_NUM}, {_CPLX}"
_QUANT = "qint8, quint8, qint32, qint16, quint16"
_REDUCE_NUM = f"{_NUM}, {_QUANT}"
_REDUCE_REAL = f"{_REAL_NUM}, {_QUANT}"


def _t(types: str) -> str:
    return "T: {" + types + "}"


def _fmt_shape(shape: Any) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _shapes_text(op: Any) -> str:
    parts = []
    for t in op.inputs:
        d = t.shape.as_tuple()
        parts.append("?" if d is None else _fmt_shape(d))
    return ", ".join(parts)


def _where(op: Any) -> str:
    return f" for '{op.name}' (op: '{op.type}') with input shapes: {_shapes_text(op)}."


def _all_static(ctx: Any) -> bool:
    return all(s.is_fully_defined() for s in ctx.input_shapes)


def _guard_broadcast(ctx: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` itself when static shapes prove the inputs broadcast; otherwise a wrapper
    turning numpy's broadcast ValueError into TF's InvalidArgumentError."""
    if _all_static(ctx):
        return fn

    def guarded(*args: Any) -> Any:
        try:
            return fn(*args)
        except ValueError:
            shapes = " vs. ".join(_fmt_shape(np.shape(a)) for a in args)
            raise InvalidArgumentError(None, None, f"Incompatible shapes: {shapes}") from None

    return guarded


def _no_kernel(ctx: Any) -> Exception:
    dt = ctx.attrs.get("T")
    name = dt.name if isinstance(dt, _dt.DType) else str(dt)
    return InvalidArgumentError(None, None, f"No OpKernel was registered to support Op "
                                            f"'{ctx.op_type}' with these attrs: T={name}")


# =======================================================================================
# Special functions (numpy has no erf/lgamma/digamma; scipy is not a dependency)
# =======================================================================================
def _safe_lgamma(v: float) -> float:
    try:
        return math.lgamma(v)
    except (ValueError, OverflowError):  # poles at 0, -1, -2 ...
        return math.inf


_erf_obj = np.frompyfunc(math.erf, 1, 1)
_erfc_obj = np.frompyfunc(math.erfc, 1, 1)
_lgamma_obj = np.frompyfunc(_safe_lgamma, 1, 1)


def _np_digamma(x: Any) -> np.ndarray:
    """Psi(x) in float64: reflection below 1/2, recurrence up to 10, asymptotic series."""
    x = np.asarray(x, dtype=np.float64)
    refl = x < 0.5
    z = np.where(refl, 1.0 - x, x)
    acc = np.zeros_like(z)
    for _ in _range(10):
        small = z < 10.0
        acc = acc - np.where(small, 1.0 / np.where(small, z, 1.0), 0.0)
        z = np.where(small, z + 1.0, z)
    w = 1.0 / (z * z)
    series = w * (1 / 12 - w * (1 / 120 - w * (1 / 252 - w * (1 / 240 - w * (
        1 / 132 - w * (691 / 32760 - w / 12))))))
    psi = np.log(z) - 0.5 / z - series + acc
    frac = x - np.round(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        psi = np.where(refl, psi - np.pi / np.tan(np.pi * frac), psi)
    return np.where((x <= 0) & (frac == 0), np.nan, psi)


def _special(ctx: Any, name: str) -> Callable[[Any], Any]:
    xp, dt = ctx.xp, ctx.output_dtypes[0].np
    if xp is not np:
        try:
            import cupyx.scipy.special as sp  # type: ignore

            fn = getattr(sp, "gammaln" if name == "lgamma" else name)
            return lambda x: fn(x).astype(dt, copy=False)
        except ImportError:  # pragma: no cover - only with an odd CuPy install
            raise UnimplementedError(None, None, f"{ctx.op_type} needs cupyx.scipy.special")
    if name == "digamma":
        return lambda x: np.asarray(_np_digamma(x), dtype=dt)
    obj = {"erf": _erf_obj, "erfc": _erfc_obj, "lgamma": _lgamma_obj}[name]
    return lambda x: np.asarray(obj(x), dtype=dt)


# =======================================================================================
# Unary element-wise ops
# =======================================================================================
_UNARY_COMPLEX = f"{_FLOAT}, {_CPLX}"
_UNARY_TYPES = {
    "Abs": f"{_FLOAT}, {_SINT}",
    "Neg": f"{_FLOAT}, {_SINT}, {_CPLX}",
    "Sign": f"{_FLOAT}, {_SINT}, {_CPLX}",
    "Reciprocal": f"{_FLOAT}, {_SINT}, {_CPLX}",
    "Inv": f"{_FLOAT}, {_SINT}, {_CPLX}",
    "Square": f"{_FLOAT}, {_SINT}, {_UINT}, {_CPLX}",
    "Round": f"{_FLOAT}, {_SINT}, {_CPLX}",
    "Floor": _FLOAT, "Ceil": _FLOAT, "Rint": _FLOAT,
    "Erf": _FLOAT, "Erfc": _FLOAT, "Lgamma": _FLOAT, "Digamma": _FLOAT,
}
_UFUNC_OPS = {  # op -> numpy/cupy ufunc name
    "Abs": "abs", "Neg": "negative", "Square": "square", "Sqrt": "sqrt", "Exp": "exp",
    "Expm1": "expm1", "Log": "log", "Log1p": "log1p", "Sin": "sin", "Cos": "cos",
    "Tan": "tan", "Asin": "arcsin", "Acos": "arccos", "Atan": "arctan", "Sinh": "sinh",
    "Cosh": "cosh", "Tanh": "tanh", "Asinh": "arcsinh", "Acosh": "arccosh",
    "Atanh": "arctanh", "Floor": "floor", "Ceil": "ceil", "Rint": "rint",
}
_UNARY_OPS = ["Abs", "Neg", "Sign", "Reciprocal", "Inv", "Square", "Sqrt", "Rsqrt", "Exp",
              "Expm1", "Log", "Log1p", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh",
              "Cosh", "Tanh", "Asinh", "Acosh", "Atanh", "Sigmoid", "Floor", "Ceil",
              "Round", "Rint", "Erf", "Erfc", "Lgamma", "Digamma"]
for _op in _UNARY_OPS:
    ks.op(OpDef(_op, inputs=["x: T"], outputs=["y: T"],
                attrs=[_t(_UNARY_TYPES.get(_op, _UNARY_COMPLEX))], shape_fn=unchanged_shape))

for _op in ("IsNan", "IsInf", "IsFinite"):
    ks.op(OpDef(_op, inputs=["x: T"], outputs=["y: bool"], attrs=[_t(_FLOAT)],
                shape_fn=unchanged_shape))
for _op in ("Real", "Imag", "Angle"):
    ks.op(OpDef(_op, inputs=["input: T"], outputs=["output: Tout"],
                attrs=["T: {complex64, complex128} = DT_COMPLEX64",
                       "Tout: {float, double} = DT_FLOAT"], shape_fn=unchanged_shape))
ks.op(
    OpDef("ComplexAbs", inputs=["x: T"], outputs=["y: Tout"],
          attrs=["T: {complex64, complex128} = DT_COMPLEX64",
                 "Tout: {float, double} = DT_FLOAT"], shape_fn=unchanged_shape),
    OpDef("Conj", inputs=["input: T"], outputs=["output: T"],
          attrs=["T: {complex64, complex128, variant} = DT_COMPLEX64"],
          shape_fn=unchanged_shape),
    OpDef("LogicalNot", inputs=["x: bool"], outputs=["y: bool"], shape_fn=unchanged_shape),
    OpDef("Invert", inputs=["x: T"], outputs=["y: T"], attrs=[_t(_INT)],
          shape_fn=unchanged_shape),
)


def _ufunc_factory(ufunc_name: str) -> Callable[[Any], Any]:
    def factory(ctx: Any) -> Any:
        return getattr(ctx.xp, ufunc_name)

    return factory


for _op, _fn in _UFUNC_OPS.items():
    ks.kernel(_op)(_ufunc_factory(_fn))
for _op, _fn in (("IsNan", "isnan"), ("IsInf", "isinf"), ("IsFinite", "isfinite"),
                 ("LogicalNot", "logical_not"), ("Invert", "invert"), ("Sign", "sign")):
    ks.kernel(_op)(_ufunc_factory(_fn))


@ks.kernel("Reciprocal", "Inv")
def _reciprocal_kernel(ctx: Any) -> Any:
    xp, dt = ctx.xp, ctx.output_dtypes[0]
    if not dt.is_integer:
        return xp.reciprocal
    npdt = dt.np

    def int_reciprocal(x: Any) -> Any:
        if not x.all():
            raise InvalidArgumentError(None, None, "Integer division by zero")
        # C integer division 1 / x: 1 for x == 1, -1 for x == -1, 0 otherwise
        return ((x == 1).astype(npdt) - (x == -1).astype(npdt)).astype(npdt, copy=False)

    return int_reciprocal


@ks.kernel("Rsqrt")
def _rsqrt_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    sqrt, recip = xp.sqrt, xp.reciprocal
    if ctx.output_dtypes[0].is_complex:
        # Eigen's complex rsqrt is the scalar 1 / sqrt(x): inf+NaNj at 0, where numpy's
        # reciprocal gives NaN+NaNj
        one, divide = xp.ones((), ctx.output_dtypes[0].np), xp.true_divide

        def complex_rsqrt(x: Any) -> Any:
            with np.errstate(all="ignore"):
                return divide(one, sqrt(x))

        return complex_rsqrt
    return lambda x: recip(sqrt(x))


@ks.kernel("Sigmoid")
def _sigmoid_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    if ctx.output_dtypes[0].is_complex:
        return lambda x: 1 / (1 + xp.exp(-x))
    exp, absolute, where = xp.exp, xp.abs, xp.where

    def sigmoid(x: Any) -> Any:
        e = exp(-absolute(x))  # never overflows
        r = 1 / (1 + e)
        return where(x >= 0, r, e * r)

    return sigmoid


@ks.kernel("Round")
def _round_kernel(ctx: Any) -> Any:
    dt = ctx.output_dtypes[0]
    if dt.is_integer:
        return lambda x: x
    return ctx.xp.round if dt.is_complex else ctx.xp.rint  # both round half to even


@ks.kernel("Erf")
def _erf_kernel(ctx: Any) -> Any:
    return _special(ctx, "erf")


@ks.kernel("Erfc")
def _erfc_kernel(ctx: Any) -> Any:
    return _special(ctx, "erfc")


@ks.kernel("Lgamma")
def _lgamma_kernel(ctx: Any) -> Any:
    return _special(ctx, "lgamma")


@ks.kernel("Digamma")
def _digamma_kernel(ctx: Any) -> Any:
    return _special(ctx, "digamma")


def _tout_kernel(fn_name: str) -> Callable[[Any], Any]:
    def factory(ctx: Any) -> Any:
        fn = getattr(ctx.xp, fn_name)
        out = ctx.output_dtypes[0]
        if ctx.input_dtypes[0].real_dtype is out:
            return fn
        npdt = out.np
        if np.dtype(npdt).itemsize == 8:  # complex64 -> float64: computed in double
            return lambda x: fn(x.astype(np.complex128))
        return lambda x: fn(x).astype(npdt)

    return factory


ks.kernel("Real")(_tout_kernel("real"))
ks.kernel("Imag")(_tout_kernel("imag"))
ks.kernel("Angle")(_tout_kernel("angle"))
ks.kernel("ComplexAbs")(_tout_kernel("abs"))


@ks.kernel("Conj")
def _conj_kernel(ctx: Any) -> Any:
    if ctx.input_dtypes[0] is _dt.variant:
        return lambda x: x
    return ctx.xp.conj


# -- unary API ---------------------------------------------------------------------------
def _unary_api(op_type: str, names: Sequence[str], doc: str) -> Callable[..., Tensor]:
    def fn(x: Any, name: str | None = None) -> Tensor:
        return apply_op(op_type, name=name, x=x)

    fn.__name__ = fn.__qualname__ = names[0].rsplit(".", 1)[-1]
    fn.__doc__ = doc
    ks.api(*names)(fn)
    return fn


_UNARY_API = [
    ("Neg", ("negative", "math.negative"), "Numerical negative, element-wise (``-x``)."),
    ("Reciprocal", ("reciprocal", "math.reciprocal"), "``1 / x`` element-wise."),
    ("Square", ("square", "math.square"), "``x * x`` element-wise."),
    ("Sqrt", ("sqrt", "math.sqrt"), "Square root, element-wise."),
    ("Rsqrt", ("rsqrt", "math.rsqrt"), "``1 / sqrt(x)`` element-wise."),
    ("Exp", ("exp", "math.exp"), "``e ** x`` element-wise."),
    ("Expm1", ("expm1", "math.expm1"), "``exp(x) - 1`` element-wise."),
    ("Log", ("log", "math.log"), "Natural logarithm, element-wise."),
    ("Log1p", ("log1p", "math.log1p"), "``log(1 + x)`` element-wise."),
    ("Sin", ("sin", "math.sin"), "Sine, element-wise."),
    ("Cos", ("cos", "math.cos"), "Cosine, element-wise."),
    ("Tan", ("tan", "math.tan"), "Tangent, element-wise."),
    ("Asin", ("asin", "math.asin"), "Inverse sine, element-wise."),
    ("Acos", ("acos", "math.acos"), "Inverse cosine, element-wise."),
    ("Atan", ("atan", "math.atan"), "Inverse tangent, element-wise."),
    ("Sinh", ("sinh", "math.sinh"), "Hyperbolic sine, element-wise."),
    ("Cosh", ("cosh", "math.cosh"), "Hyperbolic cosine, element-wise."),
    ("Asinh", ("asinh", "math.asinh"), "Inverse hyperbolic sine, element-wise."),
    ("Acosh", ("acosh", "math.acosh"), "Inverse hyperbolic cosine, element-wise."),
    ("Atanh", ("atanh", "math.atanh"), "Inverse hyperbolic tangent, element-wise."),
    ("Floor", ("floor", "math.floor"), "Largest integer not greater than x, element-wise."),
    ("Ceil", ("ceil", "math.ceil"), "Smallest integer not less than x, element-wise."),
    ("Rint", ("rint", "math.rint"), "Nearest integer (half to even), element-wise."),
    ("IsNan", ("is_nan", "math.is_nan"), "True where x is NaN."),
    ("IsInf", ("is_inf", "math.is_inf"), "True where x is +-inf."),
    ("IsFinite", ("is_finite", "math.is_finite"), "True where x is finite."),
    ("Erf", ("erf", "math.erf"), "Gauss error function, element-wise."),
    ("Erfc", ("erfc", "math.erfc"), "Complementary error function, element-wise."),
    ("Lgamma", ("lgamma", "math.lgamma"), "``log|Gamma(x)|`` element-wise."),
    ("Digamma", ("digamma", "math.digamma"), "Psi, the derivative of lgamma."),
    ("LogicalNot", ("logical_not", "math.logical_not"), "Boolean NOT, element-wise."),
    ("Invert", ("bitwise.invert",), "Bitwise NOT of integers, element-wise."),
]
for _op, _names, _doc in _UNARY_API:
    _unary_api(_op, _names, _doc)


@ks.api("abs", "math.abs")
def abs(x: Any, name: str | None = None) -> Tensor:  # noqa: A001 - TF's public name
    """Absolute value; for complex ``x`` the real-typed magnitude (ComplexAbs)."""
    with name_scope(name, "Abs", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        if x.dtype.is_complex:
            return apply_op("ComplexAbs", name=scope, x=x, Tout=x.dtype.real_dtype)
        return apply_op("Abs", name=scope, x=x)


@ks.api("sign", "math.sign")
def sign(x: Any, name: str | None = None) -> Tensor:
    """-1, 0 or 1 by the sign of x; ``x / |x|`` for complex x."""
    with name_scope(name, "Sign", [x]) as scope:
        return apply_op("Sign", name=scope, x=x)


@ks.api("round", "math.round")
def round(x: Any, name: str | None = None) -> Tensor:  # noqa: A001 - TF's public name
    """Round half to even, element-wise; integer tensors are returned unchanged."""
    x = convert_to_tensor(x, name="x")
    if x.dtype.is_integer:
        return x
    return apply_op("Round", name=name, x=x)


@ks.api("sigmoid", "math.sigmoid", "nn.sigmoid")
def sigmoid(x: Any, name: str | None = None) -> Tensor:
    """``1 / (1 + exp(-x))`` element-wise."""
    with name_scope(name, "Sigmoid", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        return apply_op("Sigmoid", name=scope, x=x)


@ks.api("tanh", "math.tanh", "nn.tanh")
def tanh(x: Any, name: str | None = None) -> Tensor:
    """Hyperbolic tangent, element-wise."""
    with name_scope(name, "Tanh", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        return apply_op("Tanh", name=scope, x=x)


@ks.api("log_sigmoid", "math.log_sigmoid")
def log_sigmoid(x: Any, name: str | None = None) -> Tensor:
    """``log(sigmoid(x))`` computed stably as ``-softplus(-x)``."""
    with name_scope(name, "LogSigmoid", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        return apply_op("Neg", name=scope, x=apply_op("Softplus", features=apply_op(
            "Neg", x=x)))


def _zeros_like(x: Tensor) -> Tensor:
    from flowrt.graph import api_function

    return api_function("zeros_like")(x)  # a Const for static shapes, as TF builds it


@ks.api("real", "math.real")
def real(input: Any, name: str | None = None) -> Tensor:  # noqa: A002 - TF's signature
    """The real part of a complex tensor; other tensors are returned unchanged."""
    with name_scope(name, "Real", [input]) as scope:
        input = convert_to_tensor(input, name="input")
        if input.dtype.is_complex:
            return apply_op("Real", name=scope, input=input, Tout=input.dtype.real_dtype)
        return input


@ks.api("imag", "math.imag")
def imag(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The imaginary part of a complex tensor; zeros for real tensors."""
    with name_scope(name, "Imag", [input]) as scope:
        input = convert_to_tensor(input, name="input")
        if input.dtype.is_complex:
            return apply_op("Imag", name=scope, input=input, Tout=input.dtype.real_dtype)
        return _zeros_like(input)


@ks.api("angle", "math.angle")
def angle(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The argument of a complex tensor; zeros for real tensors (as TF 1.15)."""
    with name_scope(name, "Angle", [input]) as scope:
        input = convert_to_tensor(input, name="input")
        if input.dtype.is_complex:
            return apply_op("Angle", name=scope, input=input, Tout=input.dtype.real_dtype)
        return _zeros_like(input)


@ks.api("conj", "math.conj")
def conj(x: Any, name: str | None = None) -> Tensor:
    """Complex conjugate; real and integer tensors are returned unchanged."""
    if isinstance(x, Tensor) and (x.dtype.is_floating or x.dtype.is_integer):
        return x
    with name_scope(name, "Conj", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        if x.dtype.is_complex or x.dtype.base_dtype is _dt.variant:
            return apply_op("Conj", name=scope, input=x)
        if x.dtype.is_floating or x.dtype.is_integer:
            return x
        raise TypeError(f"Expected numeric or variant tensor, got dtype {x.dtype!r}")


# =======================================================================================
# Binary element-wise ops
# =======================================================================================
def _binary(name: str, types: str, out: str = "z: T", inputs: Sequence[str] = ("x: T", "y: T"),
            extra_attrs: Sequence[str] = (), shape_fn: Any = broadcast_shape) -> None:
    ks.op(OpDef(name, inputs=list(inputs), outputs=[out], attrs=[_t(types), *extra_attrs],
                shape_fn=shape_fn))


_DIV_TYPES = f"{_FLOAT}, {_INT}, {_CPLX}"
_binary("Add", f"{_FLOAT}, uint8, uint16, uint32, uint64, {_SINT}, {_CPLX}, string")
_binary("AddV2", f"{_FLOAT}, {_INT}, {_CPLX}")
_binary("Sub", f"{_FLOAT}, {_INT}, {_CPLX}")
_binary("Mul", f"{_FLOAT}, {_INT}, {_CPLX}")
for _op in ("Div", "RealDiv", "TruncateDiv", "FloorDiv"):
    _binary(_op, _DIV_TYPES)
_binary("FloorMod", f"{_INT}, {_FLOAT}")
_binary("TruncateMod", f"int32, int64, {_FLOAT}")
_binary("Mod", f"int32, int64, {_FLOAT}")
_binary("Pow", f"{_FLOAT}, {_SINT}, {_CPLX}")
_binary("Maximum", _REAL_NUM)
_binary("Minimum", _REAL_NUM)
_binary("SquaredDifference", f"{_FLOAT}, int32, int64, {_CPLX}")
_binary("Atan2", _FLOAT, inputs=("y: T", "x: T"))
for _op in ("DivNoNan", "MulNoNan", "Xdivy", "Xlogy"):
    _binary(_op, f"{_FLOAT}, {_CPLX}")
for _op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor", "LeftShift", "RightShift"):
    _binary(_op, _INT)
ks.op(OpDef("Complex", inputs=["real: T", "imag: T"], outputs=["out: Tout"],
            attrs=["T: {float, double} = DT_FLOAT",
                   "Tout: {complex64, complex128} = DT_COMPLEX64"],
            shape_fn=broadcast_shape))


def _plain_binary(ufunc_name: str) -> Callable[[Any], Any]:
    def factory(ctx: Any) -> Any:
        return _guard_broadcast(ctx, getattr(ctx.xp, ufunc_name))

    return factory


for _op, _fn in (("AddV2", "add"), ("Sub", "subtract"), ("Mul", "multiply"),
                 ("Maximum", "maximum"), ("Minimum", "minimum"), ("Atan2", "arctan2"),
                 ("BitwiseAnd", "bitwise_and"), ("BitwiseOr", "bitwise_or"),
                 ("BitwiseXor", "bitwise_xor")):
    ks.kernel(_op)(_plain_binary(_fn))


@ks.kernel("Add")
def _add_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    add = xp.add
    if ctx.input_dtypes[0] is not _dt.string:
        return _guard_broadcast(ctx, add)

    def concat(x: Any, y: Any) -> Any:  # keep strings as object arrays of bytes
        return add(np.asarray(x, dtype=object), np.asarray(y, dtype=object))

    return _guard_broadcast(ctx, concat)


def _check_divisor(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``fn`` with TF's integer division-by-zero error. As in TF, only divisors that
    are actually used count: when the broadcast result is empty (a zero divisor beside
    an empty dividend, as in the gradient of a reduction over a scalar) nothing is
    divided. In a non-empty broadcast result every divisor element is used."""
    def checked(x: Any, y: Any) -> Any:
        if not y.all():
            # (an incompatible pair raises ValueError here: the broadcast guard names it)
            if math.prod(np.broadcast_shapes(np.shape(x), np.shape(y))) != 0:
                raise InvalidArgumentError(None, None, "Integer division by zero")
        return fn(x, y)

    return checked


def _int_truncdiv(xp: Any, dtype: _dt.DType) -> Callable[[Any, Any], Any]:
    if dtype.is_unsigned:
        return xp.floor_divide
    fmod, floordiv = xp.fmod, xp.floor_divide
    # x - fmod(x, y) is an exact multiple of y, so floor division of it truncates.
    return lambda x, y: floordiv(x - fmod(x, y), y)


def _complex_divide(xp: Any) -> Callable[[Any, Any], Any]:
    """``x / y`` for complex arrays as TF's CPU kernels (Eigen's ``pdiv`` of complex
    packets): ``y`` is scaled by ``max(|re y|, |im y|)`` before the textbook formula, so
    any ``x / 0`` is NaN+NaNj (numpy's Smith division gives +-inf+NaNj) while tiny and
    huge divisors neither underflow nor overflow."""
    absolute, maximum, errstate = xp.abs, xp.maximum, np.errstate

    def divide(x: Any, y: Any) -> Any:
        x, y = xp.asarray(x), xp.asarray(y)
        with errstate(all="ignore"):
            yr, yi = y.real, y.imag
            m = maximum(absolute(yr), absolute(yi))
            sr, si = yr / m, yi / m
            den = sr * sr + si * si
            xr, xi = x.real, x.imag
            re = (xr * sr + xi * si) / den / m
            im = (xi * sr - xr * si) / den / m
        out = xp.empty(np.broadcast_shapes(x.shape, y.shape), dtype=xp.result_type(x, y))
        out.real, out.imag = re, im
        return out

    return divide


@ks.kernel("Div", "RealDiv")
def _div_kernel(ctx: Any) -> Any:
    xp, dt = ctx.xp, ctx.output_dtypes[0]
    if dt.is_integer:
        return _guard_broadcast(ctx, _check_divisor(_int_truncdiv(xp, dt)))
    if dt.is_complex:
        return _guard_broadcast(ctx, _complex_divide(xp))
    return _guard_broadcast(ctx, xp.true_divide)


@ks.kernel("TruncateDiv")
def _truncatediv_kernel(ctx: Any) -> Any:
    xp, dt = ctx.xp, ctx.output_dtypes[0]
    if dt.is_integer:
        return _guard_broadcast(ctx, _check_divisor(_int_truncdiv(xp, dt)))
    if dt.is_complex:
        raise _no_kernel(ctx)
    trunc, div = xp.trunc, xp.true_divide
    return _guard_broadcast(ctx, lambda x, y: trunc(div(x, y)))


@ks.kernel("FloorDiv")
def _floordiv_kernel(ctx: Any) -> Any:
    xp, dt = ctx.xp, ctx.output_dtypes[0]
    if dt.is_integer:
        return _guard_broadcast(ctx, _check_divisor(xp.floor_divide))
    if dt.is_complex:
        raise _no_kernel(ctx)
    floor, div = xp.floor, xp.true_divide
    return _guard_broadcast(ctx, lambda x, y: floor(div(x, y)))


@ks.kernel("FloorMod")
def _floormod_kernel(ctx: Any) -> Any:
    xp, dt = ctx.xp, ctx.output_dtypes[0]
    if dt.is_integer:
        return _guard_broadcast(ctx, _check_divisor(xp.remainder))
    return _guard_broadcast(ctx, xp.remainder)  # sign of the divisor, as TF's floor_fmod


@ks.kernel("TruncateMod", "Mod")
def _truncatemod_kernel(ctx: Any) -> Any:
    xp, dt = ctx.xp, ctx.output_dtypes[0]
    if dt.is_integer:
        return _guard_broadcast(ctx, _check_divisor(xp.fmod))
    return _guard_broadcast(ctx, xp.fmod)  # sign of the dividend, as C's fmod


@ks.kernel("Pow")
def _pow_kernel(ctx: Any) -> Any:
    xp, dt = ctx.xp, ctx.output_dtypes[0]
    power = xp.power
    if dt.is_integer and not dt.is_unsigned:
        def int_pow(x: Any, y: Any) -> Any:
            if (y < 0).any():
                raise InvalidArgumentError(
                    None, None, "Integers to negative integer powers are not allowed")
            return power(x, y)

        return _guard_broadcast(ctx, int_pow)
    return _guard_broadcast(ctx, power)


@ks.kernel("SquaredDifference")
def _squared_difference_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    sub = xp.subtract
    if ctx.output_dtypes[0].is_complex:
        conj = xp.conj

        def sqdiff_c(x: Any, y: Any) -> Any:
            d = sub(x, y)
            return d * conj(d)

        return _guard_broadcast(ctx, sqdiff_c)

    def sqdiff(x: Any, y: Any) -> Any:
        d = sub(x, y)
        return d * d

    return _guard_broadcast(ctx, sqdiff)


def _masked_kernel(kind: str) -> Callable[[Any], Any]:
    def factory(ctx: Any) -> Any:
        xp, npdt = ctx.xp, ctx.output_dtypes[0].np
        where, zero = xp.where, xp.zeros((), npdt)
        if kind == "div_no_nan":
            def fn(x: Any, y: Any) -> Any:
                return where(y == 0, zero, x / y)
        elif kind == "mul_no_nan":
            def fn(x: Any, y: Any) -> Any:
                return where(y == 0, zero, x * y)
        elif kind == "xdivy":
            div = _complex_divide(xp) if ctx.output_dtypes[0].is_complex else xp.true_divide

            def fn(x: Any, y: Any) -> Any:
                return where(x == 0, zero, div(x, y))
        else:
            log = xp.log

            def fn(x: Any, y: Any) -> Any:
                return where(x == 0, zero, x * log(y))

        def typed(x: Any, y: Any) -> Any:
            return fn(x, y).astype(npdt, copy=False)

        return _guard_broadcast(ctx, typed)

    return factory


ks.kernel("DivNoNan")(_masked_kernel("div_no_nan"))
ks.kernel("MulNoNan")(_masked_kernel("mul_no_nan"))
ks.kernel("Xdivy")(_masked_kernel("xdivy"))
ks.kernel("Xlogy")(_masked_kernel("xlogy"))


def _shift_kernel(ufunc_name: str) -> Callable[[Any], Any]:
    def factory(ctx: Any) -> Any:
        xp, dt = ctx.xp, ctx.output_dtypes[0]
        shift, clip = getattr(xp, ufunc_name), xp.clip
        top = dt.np.itemsize * 8 - 1
        npdt = dt.np

        # TF clamps the shift amount to [0, bits - 1] instead of leaving it undefined.
        def fn(x: Any, y: Any) -> Any:
            return shift(x, clip(y, 0, top).astype(npdt, copy=False))

        return _guard_broadcast(ctx, fn)

    return factory


ks.kernel("LeftShift")(_shift_kernel("left_shift"))
ks.kernel("RightShift")(_shift_kernel("right_shift"))


@ks.kernel("Complex")
def _complex_kernel(ctx: Any) -> Any:
    xp, npdt = ctx.xp, ctx.output_dtypes[0].np

    def make_complex(re: Any, im: Any) -> Any:
        re, im = xp.broadcast_arrays(re, im)
        out = xp.empty(re.shape, npdt)
        out.real = re
        out.imag = im
        return out

    return _guard_broadcast(ctx, make_complex)


# -- comparisons and logic -----------------------------------------------------------------
def _equality_shape(op: Any) -> list[TensorShape]:
    if op.node_attrs.get("incompatible_shape_error", True):
        return broadcast_shape(op)
    try:
        return broadcast_shape(op)
    except ValueError:
        return [unknown_shape()]


_CMP_TYPES = _REAL_NUM
for _op in ("Equal", "NotEqual"):
    ks.op(OpDef(_op, inputs=["x: T", "y: T"], outputs=["z: bool"],
                attrs=["T: type", "incompatible_shape_error: bool = true"],
                shape_fn=_equality_shape))
for _op in ("Less", "LessEqual", "Greater", "GreaterEqual"):
    _binary(_op, _CMP_TYPES, out="z: bool")
for _op in ("LogicalAnd", "LogicalOr"):
    ks.op(OpDef(_op, inputs=["x: bool", "y: bool"], outputs=["z: bool"],
                shape_fn=broadcast_shape))
for _op, _fn in (("Less", "less"), ("LessEqual", "less_equal"), ("Greater", "greater"),
                 ("GreaterEqual", "greater_equal"), ("LogicalAnd", "logical_and"),
                 ("LogicalOr", "logical_or")):
    ks.kernel(_op)(_plain_binary(_fn))


def _equality_kernel(ufunc_name: str, mismatch: bool) -> Callable[[Any], Any]:
    def factory(ctx: Any) -> Any:
        xp = ctx.xp
        fn = getattr(xp, ufunc_name)
        if ctx.input_dtypes[0] is _dt.string:
            base = fn

            def fn(x: Any, y: Any) -> Any:  # object arrays: make sure the result is bool
                return xp.asarray(base(x, y), dtype=bool)
        if ctx.attrs.get("incompatible_shape_error", True):
            return _guard_broadcast(ctx, fn)
        answer = np.bool_(mismatch)

        def lenient(x: Any, y: Any) -> Any:
            try:
                return fn(x, y)
            except ValueError:  # shapes do not broadcast: one scalar answer
                return answer

        return lenient

    return factory


ks.kernel("Equal")(_equality_kernel("equal", False))
ks.kernel("NotEqual")(_equality_kernel("not_equal", True))


# -- binary API ------------------------------------------------------------------------------
def _binary_api(op_type: str, names: Sequence[str], doc: str,
                default_name: str | None = None) -> Callable[..., Tensor]:
    def fn(x: Any, y: Any, name: str | None = None) -> Tensor:
        return apply_op(op_type, name=name if name is not None else default_name, x=x, y=y)

    fn.__name__ = fn.__qualname__ = names[0].rsplit(".", 1)[-1]
    fn.__doc__ = doc
    ks.api(*names)(fn)
    return fn


_BINARY_API = [
    ("Sub", ("subtract", "math.subtract"), "``x - y`` element-wise with broadcasting."),
    ("Mul", ("multiply", "math.multiply"), "``x * y`` element-wise with broadcasting."),
    ("RealDiv", ("realdiv", "math.realdiv"), "``x / y`` for real types (RealDiv)."),
    ("FloorDiv", ("floor_div",), "Floor division (the FloorDiv op)."),
    ("FloorMod", ("floormod", "mod", "math.floormod", "math.mod"),
     "Remainder of floor division; the result has the sign of the divisor."),
    ("TruncateDiv", ("truncatediv", "math.truncatediv"),
     "Division rounding toward zero (C semantics)."),
    ("TruncateMod", ("truncatemod", "math.truncatemod"),
     "Remainder of truncating division; the result has the sign of the dividend."),
    ("Maximum", ("maximum", "math.maximum"), "Element-wise maximum with broadcasting."),
    ("Minimum", ("minimum", "math.minimum"), "Element-wise minimum with broadcasting."),
    ("SquaredDifference", ("squared_difference", "math.squared_difference"),
     "``(x - y) * conj(x - y)`` element-wise."),
    ("Xdivy", ("math.xdivy",), "0 where x == 0, else x / y."),
    ("Xlogy", ("math.xlogy",), "0 where x == 0, else x * log(y)."),
    ("Equal", ("equal", "math.equal"), "Truth value of ``x == y`` element-wise."),
    ("NotEqual", ("not_equal", "math.not_equal"), "Truth value of ``x != y`` element-wise."),
    ("Less", ("less", "math.less"), "Truth value of ``x < y`` element-wise."),
    ("LessEqual", ("less_equal", "math.less_equal"), "Truth value of ``x <= y`` element-wise."),
    ("Greater", ("greater", "math.greater"), "Truth value of ``x > y`` element-wise."),
    ("GreaterEqual", ("greater_equal", "math.greater_equal"),
     "Truth value of ``x >= y`` element-wise."),
    ("LogicalAnd", ("logical_and", "math.logical_and"), "Boolean AND, element-wise."),
    ("LogicalOr", ("logical_or", "math.logical_or"), "Boolean OR, element-wise."),
    ("BitwiseAnd", ("bitwise.bitwise_and",), "Bitwise AND of integers."),
    ("BitwiseOr", ("bitwise.bitwise_or",), "Bitwise OR of integers."),
    ("BitwiseXor", ("bitwise.bitwise_xor",), "Bitwise XOR of integers."),
    ("LeftShift", ("bitwise.left_shift",), "``x << y`` (shift clamped to the bit width)."),
    ("RightShift", ("bitwise.right_shift",),
     "``x >> y``, arithmetic for signed types (shift clamped to the bit width)."),
]
for _op, _names, _doc in _BINARY_API:
    _binary_api(_op, _names, _doc)


@ks.api("add", "math.add")
def add(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x + y`` element-wise with broadcasting; strings concatenate (TF's Add op)."""
    return apply_op("Add", name=name, x=x, y=y)


@ks.api("_add_dispatch")
def _add_dispatch(x: Any, y: Any, name: str | None = None) -> Tensor:
    """What ``x + y`` builds: Add for strings, AddV2 otherwise (TF 1.15's dispatch)."""
    for v in (x, y):
        if isinstance(v, Tensor):
            if v.dtype.base_dtype is _dt.string:
                return apply_op("Add", name=name, x=x, y=y)
            break
    return apply_op("AddV2", name=name, x=x, y=y)


@ks.api("floordiv", "math.floordiv")
def floordiv(x: Any, y: Any, name: str | None = None) -> Tensor:
    """Floor division ``x // y``: rounds toward -inf, also for floats (``floor(x / y)``)."""
    with name_scope(name, "floordiv", [x, y]) as scope:
        return apply_op("FloorDiv", name=scope, x=x, y=y)


@ks.api("pow", "math.pow")
def pow(x: Any, y: Any, name: str | None = None) -> Tensor:  # noqa: A001 - TF's public name
    """``x ** y`` element-wise; integer tensors reject negative exponents at run time."""
    with name_scope(name, "Pow", [x]) as scope:
        return apply_op("Pow", name=scope, x=x, y=y)


@ks.api("atan2", "math.atan2")
def atan2(y: Any, x: Any, name: str | None = None) -> Tensor:
    """Element-wise arctangent of ``y / x`` respecting the quadrant."""
    return apply_op("Atan2", name=name, y=y, x=x)


@ks.api("div_no_nan", "math.div_no_nan", "math.divide_no_nan")
def div_no_nan(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x / y``, but 0 wherever ``y`` is 0."""
    with name_scope(name, "div_no_nan", [x, y]) as scope:
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, name="y", dtype=x.dtype.base_dtype)
        return apply_op("DivNoNan", name=scope, x=x, y=y)


@ks.api("math.multiply_no_nan")
def multiply_no_nan(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x * y``, but 0 wherever ``y`` is 0 (even if ``x`` is inf or NaN)."""
    with name_scope(name, "multiply_no_nan", [x, y]) as scope:
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, name="y", dtype=x.dtype.base_dtype)
        return apply_op("MulNoNan", name=scope, x=x, y=y)


@ks.api("logical_xor", "math.logical_xor")
def logical_xor(x: Any, y: Any, name: str = "LogicalXor") -> Tensor:
    """Boolean XOR, built as ``(x | y) & ~(x & y)`` as TF does."""
    return apply_op("LogicalAnd", name=name, x=apply_op("LogicalOr", x=x, y=y),
                    y=apply_op("LogicalNot", x=apply_op("LogicalAnd", x=x, y=y)))


@ks.api("complex")
def complex(real: Any, imag: Any, name: str | None = None) -> Tensor:  # noqa: A001
    """``real + imag * 1j``: float32 parts give complex64, float64 parts complex128."""
    real = convert_to_tensor(real, name="real")
    imag = convert_to_tensor(imag, name="imag")
    with name_scope(name, "Complex", [real, imag]) as scope:
        types = (real.dtype.base_dtype, imag.dtype.base_dtype)
        if types == (_dt.float64, _dt.float64):
            tout = _dt.complex128
        elif types == (_dt.float32, _dt.float32):
            tout = _dt.complex64
        else:
            raise TypeError(f"real and imag have incorrect types: {real.dtype.name} "
                            f"{imag.dtype.name}")
        return apply_op("Complex", name=scope, real=real, imag=imag, Tout=tout)


@ks.api("scalar_mul", "math.scalar_mul")
def scalar_mul(scalar: Any, x: Any, name: str | None = None) -> Tensor:
    """Multiply a tensor by a scalar (ValueError if ``scalar`` is not 0-d)."""
    if not isinstance(x, Tensor):
        x = convert_to_tensor(x)
    scalar = convert_to_tensor(scalar, dtype=x.dtype.base_dtype, name="scalar")
    if scalar.shape.ndims != 0:
        raise ValueError(f"Only scalar multiply works, got shape {scalar.shape}")
    return apply_op("Mul", name=name, x=scalar, y=x)  # TF: gen_math_ops.mul(scalar, x, name)


# -- division family: Python-level dtype rules ----------------------------------------------
_TRUEDIV_TABLE: dict[_dt.DType, _dt.DType | None] = {
    _dt.uint8: _dt.float32, _dt.int8: _dt.float32, _dt.uint16: _dt.float32,
    _dt.int16: _dt.float32, _dt.int32: _dt.float64, _dt.int64: _dt.float64,
    _dt.uint32: _dt.float64, _dt.uint64: _dt.float64,
    _dt.bfloat16: None, _dt.float16: None, _dt.float32: None, _dt.float64: None,
    _dt.complex64: None, _dt.complex128: None,
}


def _truediv_impl(x: Any, y: Any, name: str | None) -> Tensor:
    with name_scope(name, "truediv", [x, y]) as scope:
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, dtype_hint=x.dtype.base_dtype, name="y")
        xd, yd = x.dtype.base_dtype, y.dtype.base_dtype
        if xd is not yd:
            raise TypeError(f"x and y must have the same dtype, got {xd!r} != {yd!r}")
        if xd not in _TRUEDIV_TABLE:
            raise TypeError(f"Invalid dtype {xd!r} in __truediv__")
        target = _TRUEDIV_TABLE[xd]
        if target is not None:
            x = cast(x, target)
            y = cast(y, target)
        return apply_op("RealDiv", name=scope, x=x, y=y)


@ks.api("truediv", "math.truediv")
def truediv(x: Any, y: Any, name: str | None = None) -> Tensor:
    """Python 3 division: integers are cast to float first (8/16-bit ints to float32,
    32/64-bit ints to float64), then RealDiv."""
    return _truediv_impl(x, y, name)


@ks.api("divide", "math.divide")
def divide(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x / y`` with Python 3 semantics (as ``truediv``)."""
    if not isinstance(x, Tensor) and isinstance(y, Tensor):
        x = convert_to_tensor(x, dtype_hint=y.dtype.base_dtype, name="x")
    return _truediv_impl(x, y, name)


@ks.api("div", "math.div")
def div(x: Any, y: Any, name: str | None = None) -> Tensor:
    """Python 2 division (TF1 ``tf.div``): floor division for integers, real division
    for floats and complex."""
    with name_scope(name, "div", [x, y]) as scope:
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, name="y", dtype=x.dtype.base_dtype)
        if x.dtype.is_floating or x.dtype.is_complex:
            return apply_op("RealDiv", name=scope, x=x, y=y)
        return apply_op("FloorDiv", name=scope, x=x, y=y)


# =======================================================================================
# Cast
# =======================================================================================
ks.op(OpDef("Cast", inputs=["x: SrcT"], outputs=["y: DstT"],
            attrs=["SrcT: type", "DstT: type", "Truncate: bool = false"],
            shape_fn=unchanged_shape))


@ks.kernel("Cast")
def _cast_kernel(ctx: Any) -> Any:
    src, dst = ctx.input_dtypes[0], ctx.output_dtypes[0]
    if src is dst:
        return lambda x: x
    unsupported = (_dt.string, _dt.resource, _dt.variant)
    if src in unsupported or dst in unsupported or src.is_quantized or dst.is_quantized:
        raise UnimplementedError(None, None, f"Cast {src.name} to {dst.name} is not supported")
    npdt = dst.np
    if src.is_complex and not dst.is_complex:
        if dst is _dt.bool:
            return lambda x: x.real != 0
        return lambda x: x.real.astype(npdt)
    if dst is _dt.bool:
        return lambda x: x != 0
    return lambda x: x.astype(npdt)


@ks.api("cast")
def cast(x: Any, dtype: Any, name: str | None = None) -> Tensor:
    """Cast to ``dtype``: floats truncate toward zero into ints, complex casts to real
    keep the real part, numbers cast to bool as ``x != 0``. A tensor that already has
    ``dtype`` is returned as is."""
    base = _dt.as_dtype(dtype).base_dtype
    if isinstance(x, Tensor) and x.dtype is base:
        return x
    with name_scope(name, "Cast", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        if x.dtype.base_dtype is not base:
            x = apply_op("Cast", name=scope, x=x, DstT=base)
        return x


def _cast_alias(api_name: str, dtype: _dt.DType, default: str) -> None:
    def fn(x: Any, name: str = default) -> Tensor:
        return cast(x, dtype, name=name)

    fn.__name__ = fn.__qualname__ = api_name
    fn.__doc__ = f"Cast to {dtype.name} (deprecated TF1 alias of ``tf.cast``)."
    ks.api(api_name)(fn)


_cast_alias("to_float", _dt.float32, "ToFloat")
_cast_alias("to_double", _dt.float64, "ToDouble")
_cast_alias("to_int32", _dt.int32, "ToInt32")
_cast_alias("to_int64", _dt.int64, "ToInt64")
_cast_alias("to_bfloat16", _dt.bfloat16, "ToBFloat16")
_cast_alias("to_complex64", _dt.complex64, "ToComplex64")
_cast_alias("to_complex128", _dt.complex128, "ToComplex128")


@ks.api("saturate_cast")
def saturate_cast(value: Any, dtype: Any, name: str | None = None) -> Tensor:
    """Cast, clamping values to the range of ``dtype`` first."""
    with name_scope(name, "saturate_cast", [value]) as scope:
        value = convert_to_tensor(value, name="value")
        dtype = _dt.as_dtype(dtype).base_dtype
        if value.dtype.is_complex:
            if dtype.is_complex:
                return cast(value, dtype, name=scope)
            value = real(value)
        src = value.dtype.base_dtype
        lo, hi = dtype.real_dtype.min, dtype.real_dtype.max
        if src.min < lo:
            value = apply_op("Maximum", x=value,
                             y=convert_to_tensor(np.asarray(lo).astype(src.np), name="min"))
        if src.max > hi:
            value = apply_op("Minimum", x=value,
                             y=convert_to_tensor(np.asarray(hi).astype(src.np), name="max"))
        return cast(value, dtype, name=scope)


# =======================================================================================
# AddN, ClipByValue
# =======================================================================================
def _addn_shape(op: Any) -> list[TensorShape]:
    cur = op.inputs[-1].shape
    for i in _range(len(op.inputs) - 2, -1, -1):
        try:
            cur = op.inputs[i].shape.merge_with(cur)
        except ValueError:
            raise ValueError(f"Shapes must be equal rank / compatible, but are "
                             f"{op.inputs[i].shape} and {cur}. From merging shape {i} with "
                             f"other shapes.{_where(op)}") from None
    return [cur]


ks.op(OpDef("AddN", inputs=["inputs: N * T"], outputs=["sum: T"],
            attrs=["N: int >= 1", _t(f"{_NUM}, {_QUANT}, variant")], shape_fn=_addn_shape))


@ks.kernel("AddN")
def _addn_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    add = xp.add

    def mismatch(xs: Any) -> InvalidArgumentError:
        shape = np.shape(xs[0])
        i = next(i for i, x in enumerate(xs) if np.shape(x) != shape)
        return InvalidArgumentError(
            None, None, f"Inputs to operation AddN of type AddN must have the same "
                        f"size and shape.  Input 0: {_fmt_shape(shape)} != input {i}: "
                        f"{_fmt_shape(np.shape(xs[i]))}")

    def add_n(*xs: Any) -> Any:
        if len(xs) > 4:
            # one stacked reduction instead of N-1 dispatches (N=200: ~5x faster)
            try:
                st = xp.stack(xs)
            except ValueError:
                raise mismatch(xs) from None
            return st.sum(axis=0, dtype=st.dtype)
        first = xs[0]
        shape = np.shape(first)
        out = first
        for x in xs[1:]:
            if np.shape(x) != shape:
                raise mismatch(xs)
            out = add(out, x)
        return out

    return add_n


@ks.api("add_n", "math.add_n")
def add_n(inputs: Any, name: str | None = None) -> Tensor:
    """Sum of a list of tensors of one dtype and shape (a single input is returned
    as is, or through Identity when ``name`` is given)."""
    if not inputs or not isinstance(inputs, (list, tuple)):
        raise ValueError("inputs must be a list of at least one Tensor/IndexedSlices "
                         "with the same dtype and shape")
    ts = [convert_to_tensor(v) for v in inputs]
    if len(ts) == 1:
        if name:
            return apply_op("Identity", name=name, input=ts[0])
        return ts[0]
    return apply_op("AddN", name=name, inputs=ts)


ks.op(OpDef("ClipByValue", inputs=["t: T", "clip_value_min: T", "clip_value_max: T"],
            outputs=["output: T"], attrs=[_t(_REDUCE_NUM)], shape_fn=unchanged_shape))


@ks.kernel("ClipByValue")
def _clip_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    maximum, minimum = xp.maximum, xp.minimum

    def clip(t: Any, lo: Any, hi: Any) -> Any:
        for what, v in (("clip_value_min", lo), ("clip_value_max", hi)):
            if np.ndim(v) and np.shape(v) != np.shape(t):
                raise InvalidArgumentError(
                    None, None, f"{what} and t must have the same shape, or {what} must be "
                                f"a scalar: {_fmt_shape(np.shape(v))} vs. "
                                f"{_fmt_shape(np.shape(t))}")
        return minimum(maximum(t, lo), hi)

    return clip


@ks.api("clip_by_value")
def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any,
                  name: str | None = None) -> Tensor:
    """Clip values to ``[clip_value_min, clip_value_max]`` (Minimum then Maximum, as
    TF 1.15); a ValueError if the bounds would broadcast ``t`` to a larger shape."""
    with name_scope(name, "clip_by_value", [t, clip_value_min, clip_value_max]) as scope:
        values = convert_to_tensor(t, name="t")
        t_min = apply_op("Minimum", x=values, y=clip_value_max)
        values.shape.merge_with(t_min.shape)
        t_max = apply_op("Maximum", name=scope, x=t_min, y=clip_value_min)
        values.shape.merge_with(t_max.shape)
    return t_max


# =======================================================================================
# Reductions
# =======================================================================================
def _reduced_static(op: Any, axes_input: int = 1) -> list[TensorShape]:
    inp = op.inputs[0].shape
    keep = op.node_attrs.get("keep_dims", False)
    idx = op.inputs[axes_input]
    if idx.shape.ndims is not None and idx.shape.ndims > 1:
        raise ValueError(f"Shape must be at most rank 1 but is rank {idx.shape.ndims}"
                         f"{_where(op)}")
    axes = constant_value(idx)
    if axes is None or inp.ndims is None:
        if keep and inp.ndims is not None:
            return [TensorShape([None] * inp.ndims)]
        return [unknown_shape()]
    rank = inp.ndims
    dims = list(inp.as_tuple())
    chosen = set()
    for v in np.asarray(axes).reshape(-1).tolist():
        v = int(v)
        if v < -rank or v >= rank:
            raise ValueError(f"Invalid reduction dimension {v} for input with {rank} "
                             f"dimensions.{_where(op)}")
        chosen.add(v % rank)
    if keep:
        return [TensorShape([1 if i in chosen else d for i, d in enumerate(dims)])]
    return [TensorShape([d for i, d in enumerate(dims) if i not in chosen])]


def _norm_axes(axes: Any, ndim: int) -> tuple[int, ...]:
    flat = np.asarray(axes).reshape(-1).tolist()
    out: list[int] = []
    for v in flat:
        v = int(v)
        if v < -ndim or v >= ndim:
            raise InvalidArgumentError(None, None, f"Invalid reduction dimension ({v} for "
                                                   f"input with {ndim} dimension(s)")
        v = v % ndim
        if v in out:
            raise InvalidArgumentError(None, None, f"Invalid reduction arguments: Axes "
                                                   f"contains duplicate dimension: {v}")
        out.append(v)
    return tuple(out)


def _static_axes(ctx: Any, index: int = 1) -> tuple[int, ...] | None:
    """The normalised reduction axes when they are a constant and the rank is static."""
    rank = ctx.input_shapes[0].ndims
    if rank is None:
        return None
    if ctx.op is None:  # a worker of another process has the node, not the graph op
        return None
    value = constant_value(ctx.op.inputs[index])
    if value is None:
        return None
    try:
        return _norm_axes(value, rank)
    except InvalidArgumentError:
        return None  # reported at run time, as TF does


def _out_shape(shape: tuple[int, ...], axes: tuple[int, ...], keep: bool) -> tuple[int, ...]:
    if keep:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


_REDUCTIONS = {"Sum": _REDUCE_NUM, "Mean": _REDUCE_NUM, "Prod": _REDUCE_NUM,
               "Max": _REDUCE_REAL, "Min": _REDUCE_REAL, "EuclideanNorm": _REDUCE_NUM}
for _op, _types in _REDUCTIONS.items():
    ks.op(OpDef(_op, inputs=["input: T", "reduction_indices: Tidx"], outputs=["output: T"],
                attrs=["keep_dims: bool = false", _t(_types),
                       "Tidx: {int32, int64} = DT_INT32"], shape_fn=_reduced_static))
for _op in ("All", "Any"):
    ks.op(OpDef(_op, inputs=["input: bool", "reduction_indices: Tidx"], outputs=["output: bool"],
                attrs=["keep_dims: bool = false", "Tidx: {int32, int64} = DT_INT32"],
                shape_fn=_reduced_static))


def _reducer(ctx: Any) -> Callable[[Any, tuple[int, ...], bool], Any]:
    """``reduce(x, axes, keepdims)`` for the node's op and dtype."""
    xp, op = ctx.xp, ctx.op_type
    dt = ctx.output_dtypes[0]
    npdt = dt.np
    acc = np.float32 if dt is _dt.float16 else npdt  # accumulate half in float
    if op == "Sum":
        xsum = xp.sum
        plain = lambda x, ax, kd: xsum(x, axis=ax, keepdims=kd, dtype=acc).astype(  # noqa: E731
            npdt, copy=False)
        if xp is not np or npdt.kind != "f" or npdt.itemsize < 4:
            return plain
        ones: dict[int, Any] = {}

        def leading_sum(x: Any, ax: tuple[int, ...], kd: bool) -> Any:
            # over leading axes (a bias's gradient of ``x + b``) of a large contiguous
            # float array: one matrix-vector product (``column_sums``)
            k = len(ax)
            if not (0 < k < x.ndim and x.size >= GEMV_SUM_MIN and x.dtype == npdt
                    and sorted(ax) == list(range(k)) and x.flags.c_contiguous):
                return plain(x, ax, kd)
            rows = 1
            for d in x.shape[:k]:
                rows *= d
            r = column_sums(ctx, x.reshape(rows, -1), ones)
            return r.reshape(((1,) * k if kd else ()) + x.shape[k:])

        return leading_sum
    if op == "Prod":
        xprod = xp.prod
        return lambda x, ax, kd: xprod(x, axis=ax, keepdims=kd, dtype=acc).astype(npdt,
                                                                                   copy=False)
    if op == "Mean":
        if dt.is_integer:
            wide = np.uint64 if dt.is_unsigned else np.int64
            xsum, where = xp.sum, xp.where

            def int_mean(x: Any, ax: tuple[int, ...], kd: bool) -> Any:
                n = 1
                for a in ax:
                    n *= x.shape[a]
                s = xsum(x, axis=ax, keepdims=kd, dtype=wide)
                if n == 0:
                    return xp.zeros(np.shape(s), npdt)
                if dt.is_unsigned:
                    return (s // n).astype(npdt)
                return where(s < 0, -((-s) // n), s // n).astype(npdt)  # truncates

            return int_mean
        xmean = xp.mean

        def mean(x: Any, ax: tuple[int, ...], kd: bool) -> Any:
            if x.size == 0:  # numpy would warn; TF gives NaN
                return xp.full(_out_shape(x.shape, ax, kd), np.nan, dtype=npdt)
            return xmean(x, axis=ax, keepdims=kd, dtype=acc).astype(npdt, copy=False)

        return mean
    if op == "EuclideanNorm":
        xsum, sqrt = xp.sum, xp.sqrt
        if dt.is_complex:
            conj = xp.conj
            return lambda x, ax, kd: sqrt(xsum(x * conj(x), axis=ax, keepdims=kd))
        if dt.is_integer:
            # TF's EuclideanNormReducer sums the squares in T (wrapping as C++ does), then
            # takes sqrt of that sum as a double and truncates it back to T
            def int_norm(x: Any, ax: tuple[int, ...], kd: bool) -> Any:
                s = xsum(x * x, axis=ax, keepdims=kd, dtype=npdt)
                with np.errstate(invalid="ignore"):  # sqrt of a wrapped negative sum
                    r = sqrt(s.astype(np.float64))
                    return xp.where(xp.isnan(r), 0, r).astype(npdt)

            return int_norm

        def norm(x: Any, ax: tuple[int, ...], kd: bool) -> Any:
            xw = x.astype(acc, copy=False)
            return sqrt(xsum(xw * xw, axis=ax, keepdims=kd)).astype(npdt, copy=False)

        return norm
    if op in ("Max", "Min"):
        fn = xp.max if op == "Max" else xp.min
        if dt.is_floating:
            init = -np.inf if op == "Max" else np.inf
        else:
            info = np.iinfo(npdt)
            init = info.min if op == "Max" else info.max

        def extreme(x: Any, ax: tuple[int, ...], kd: bool) -> Any:
            if x.size == 0:
                return xp.full(_out_shape(x.shape, ax, kd), init, dtype=npdt)
            return fn(x, axis=ax, keepdims=kd)

        return extreme
    fn = xp.all if op == "All" else xp.any
    return lambda x, ax, kd: fn(x, axis=ax, keepdims=kd)


@ks.kernel("Sum", "Mean", "Prod", "Max", "Min", "All", "Any", "EuclideanNorm",
           host_memory=("reduction_indices",))
def _reduction_kernel(ctx: Any) -> Any:
    reduce = _reducer(ctx)
    keep = bool(ctx.attrs.get("keep_dims", False))
    fixed = _static_axes(ctx)
    if fixed is not None:
        return lambda x, axes: reduce(x, fixed, keep)
    return lambda x, axes: reduce(x, _norm_axes(axes, np.ndim(x)), keep)


def _lookup(new_name: str, new: Any, old_name: str, old: Any) -> Any:
    if old is not None:
        if new is not None:
            raise ValueError(f"Cannot specify both '{new_name}' and '{old_name}'")
        return old
    return new


def _reduction_dims(x: Tensor, axis: Any) -> Any:
    if axis is not None:
        if isinstance(axis, (list, tuple)) and not axis:
            return convert_to_tensor(np.zeros(0, np.int32))  # TF's Tidx default, not float
        return axis
    rank = x.shape.ndims
    if rank is not None:
        return convert_to_tensor(np.arange(rank, dtype=np.int32))
    return apply_op("Range", start=0, limit=apply_op("Rank", input=x), delta=1)


def _may_reduce_to_scalar(keepdims: bool, axis: Any, output: Tensor) -> Tensor:
    if not output.shape.is_fully_defined() and not keepdims and axis is None:
        output.set_shape(())
    return output


def _reduce(op_type: str, input_tensor: Any, axis: Any, keepdims: Any, name: str | None,
            reduction_indices: Any, keep_dims: Any) -> Tensor:
    axis = _lookup("axis", axis, "reduction_indices", reduction_indices)
    keepdims = _lookup("keepdims", keepdims, "keep_dims", keep_dims)
    keepdims = bool(keepdims) if keepdims is not None else False
    if not isinstance(input_tensor, Tensor):
        input_tensor = convert_to_tensor(input_tensor)
    out = apply_op(op_type, name=name, input=input_tensor,
                   reduction_indices=_reduction_dims(input_tensor, axis), keep_dims=keepdims)
    return _may_reduce_to_scalar(keepdims, axis, out)


def _reduction_api(op_type: str, names: Sequence[str], doc: str) -> Callable[..., Tensor]:
    def fn(input_tensor: Any, axis: Any = None, keepdims: Any = None, name: str | None = None,
           reduction_indices: Any = None, keep_dims: Any = None) -> Tensor:
        return _reduce(op_type, input_tensor, axis, keepdims, name, reduction_indices,
                       keep_dims)

    fn.__name__ = fn.__qualname__ = names[0]
    fn.__doc__ = doc
    ks.api(*names)(fn)
    return fn


reduce_sum = _reduction_api(
    "Sum", ("reduce_sum", "math.reduce_sum"),
    "Sum over ``axis`` (all axes if None), keeping the input dtype.")
reduce_mean = _reduction_api(
    "Mean", ("reduce_mean", "math.reduce_mean"),
    "Mean over ``axis``; integer inputs give the truncated integer mean.")
reduce_prod = _reduction_api("Prod", ("reduce_prod", "math.reduce_prod"),
                             "Product over ``axis``.")
reduce_max = _reduction_api(
    "Max", ("reduce_max", "math.reduce_max"),
    "Maximum over ``axis`` (the dtype's lowest value for empty inputs).")
reduce_min = _reduction_api(
    "Min", ("reduce_min", "math.reduce_min"),
    "Minimum over ``axis`` (the dtype's highest value for empty inputs).")
reduce_euclidean_norm = _reduction_api(
    "EuclideanNorm", ("math.reduce_euclidean_norm",),
    "``sqrt(sum(|x|**2))`` over ``axis`` (integers: the truncated root).")
reduce_all = _reduction_api("All", ("reduce_all", "math.reduce_all"),
                            "Logical AND over ``axis``.")
reduce_any = _reduction_api("Any", ("reduce_any", "math.reduce_any"),
                            "Logical OR over ``axis``.")


@ks.api("reduce_logsumexp", "math.reduce_logsumexp")
def reduce_logsumexp(input_tensor: Any, axis: Any = None, keepdims: Any = None,
                     name: str | None = None, reduction_indices: Any = None,
                     keep_dims: Any = None) -> Tensor:
    """``log(sum(exp(x)))`` over ``axis``, computed stably by subtracting the maximum."""
    axis = _lookup("axis", axis, "reduction_indices", reduction_indices)
    keepdims = _lookup("keepdims", keepdims, "keep_dims", keep_dims)
    keepdims = bool(keepdims) if keepdims is not None else False
    input_tensor = convert_to_tensor(input_tensor)
    with name_scope(name, "ReduceLogSumExp", [input_tensor]) as scope:
        raw_max = reduce_max(input_tensor, axis=axis, keepdims=True)
        my_max = apply_op("StopGradient", input=apply_op(
            "Select", condition=apply_op("IsFinite", x=raw_max), t=raw_max,
            e=_zeros_like(raw_max)))
        result = apply_op("Log", x=reduce_sum(
            apply_op("Exp", x=apply_op("Sub", x=input_tensor, y=my_max)), axis=axis,
            keepdims=keepdims))
        if not keepdims:
            my_max = apply_op("Reshape", tensor=my_max,
                              shape=apply_op("Shape", input=result, out_type=_dt.int32))
        result = apply_op("Add", name=scope, x=result, y=my_max)
        return _may_reduce_to_scalar(keepdims, axis, result)


@ks.api("math.reduce_variance")
def reduce_variance(input_tensor: Any, axis: Any = None, keepdims: bool = False,
                    name: str | None = None) -> Tensor:
    """Variance over ``axis`` (mean of squared deviations; real for complex input)."""
    with name_scope(name or "reduce_variance", None, [input_tensor]):
        means = reduce_mean(input_tensor, axis=axis, keepdims=True)
        dev = abs(apply_op("Sub", x=input_tensor, y=means))
        return reduce_mean(apply_op("Square", x=dev), axis=axis,
                           keepdims=keepdims)


@ks.api("math.reduce_std")
def reduce_std(input_tensor: Any, axis: Any = None, keepdims: bool = False,
               name: str | None = None) -> Tensor:
    """Standard deviation over ``axis``."""
    with name_scope(name or "reduce_std", None, [input_tensor]):
        return apply_op("Sqrt", x=reduce_variance(input_tensor, axis=axis, keepdims=keepdims))


@ks.api("count_nonzero", "math.count_nonzero")
def count_nonzero(input_tensor: Any = None, axis: Any = None, keepdims: Any = None,
                  dtype: Any = _dt.int64, name: str | None = None,
                  reduction_indices: Any = None, keep_dims: Any = None,
                  input: Any = None) -> Tensor:  # noqa: A002
    """Number of non-zero (non-empty for strings) elements over ``axis``."""
    input_tensor = _lookup("input", input, "input_tensor", input_tensor)
    keepdims = _lookup("keepdims", keepdims, "keep_dims", keep_dims)
    axis = _lookup("axis", axis, "reduction_indices", reduction_indices)
    keepdims = bool(keepdims) if keepdims is not None else False
    with name_scope(name, "count_nonzero", [input_tensor]):
        x = convert_to_tensor(input_tensor, name="input")
        zero_value = b"" if x.dtype.base_dtype is _dt.string else np.zeros((), x.dtype.np)
        zero = convert_to_tensor(zero_value, dtype=x.dtype.base_dtype, name="zeros")
        nonzero = cast(apply_op("NotEqual", x=x, y=zero), _dt.int64)
        return cast(reduce_sum(nonzero, axis=axis, keepdims=keepdims),
                    dtype=dtype)


# -- ArgMax / ArgMin ---------------------------------------------------------------------------
def _arg_shape(op: Any) -> list[TensorShape]:
    inp = op.inputs[0].shape
    dim_t = op.inputs[1]
    if dim_t.shape.ndims is not None and dim_t.shape.ndims > 1:
        raise ValueError(f"Shape must be at most rank 1 but is rank {dim_t.shape.ndims}"
                         f"{_where(op)}")
    if inp.ndims is None:
        return [unknown_shape()]
    rank = inp.ndims
    if rank <= 1:
        return [TensorShape([])]
    value = constant_value(dim_t)
    if value is None:
        return [TensorShape([None] * (rank - 1))]
    d = int(np.asarray(value).reshape(-1)[0])
    if d < -rank or d >= rank:
        raise ValueError(f"Dimension ({d}) must be in the range [{-rank}, {rank}), where "
                         f"{rank} is the number of dimensions in the input.{_where(op)}")
    d %= rank
    dims = inp.as_tuple()
    return [TensorShape(dims[:d] + dims[d + 1:])]


_ARG_TYPES = f"{_REDUCE_REAL}, bool"
ks.op(
    OpDef("ArgMax", inputs=["input: T", "dimension: Tidx"], outputs=["output: output_type"],
          attrs=[_t(_ARG_TYPES), "Tidx: {int16, int32, int64} = DT_INT32",
                 "output_type: {int16, uint16, int32, int64} = DT_INT64"],
          shape_fn=_arg_shape),
    OpDef("ArgMin", inputs=["input: T", "dimension: Tidx"], outputs=["output: output_type"],
          attrs=[_t(_ARG_TYPES), "Tidx: {int32, int64} = DT_INT32",
                 "output_type: {int32, int64} = DT_INT64"],
          shape_fn=_arg_shape),
)


@ks.kernel("ArgMax", "ArgMin", host_memory=("dimension",))
def _arg_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    fn = xp.argmax if ctx.op_type == "ArgMax" else xp.argmin
    npdt = ctx.output_dtypes[0].np

    read = host_reader(ctx)

    def arg(x: Any, dim: Any) -> Any:
        rank = np.ndim(x)
        dim = read(dim)
        d = int(dim.reshape(-1)[0]) if dim.size else 0
        if d < -rank or d >= rank:
            raise InvalidArgumentError(None, None, f"Expected dimension in the range "
                                                   f"[{-rank}, {rank}), but got {d}")
        d %= rank
        if x.shape[d] == 0:
            raise InvalidArgumentError(None, None, f"Reduction axis {d} is empty in shape "
                                                   f"{_fmt_shape(x.shape)}")
        return fn(x, axis=d).astype(npdt, copy=False)

    return arg


def _arg_api(op_type: str, names: Sequence[str]) -> Callable[..., Tensor]:
    def fn(input: Any, axis: Any = None, name: str | None = None,  # noqa: A002
           dimension: Any = None, output_type: Any = _dt.int64) -> Tensor:
        axis = _lookup("axis", axis, "dimension", dimension)
        if axis is None:
            axis = 0
        return apply_op(op_type, name=name, input=input, dimension=axis,
                        output_type=_dt.as_dtype(output_type))

    fn.__name__ = fn.__qualname__ = names[0]
    fn.__doc__ = (f"Index of the {'largest' if op_type == 'ArgMax' else 'smallest'} value "
                  "along ``axis`` (default 0), as ``output_type`` (int64).")
    ks.api(*names)(fn)
    return fn


argmax = _arg_api("ArgMax", ("argmax", "math.argmax"))
argmin = _arg_api("ArgMin", ("argmin", "math.argmin"))


# -- Cumsum / Cumprod ------------------------------------------------------------------------
for _op in ("Cumsum", "Cumprod"):
    ks.op(OpDef(_op, inputs=["x: T", "axis: Tidx"], outputs=["out: T"],
                attrs=["exclusive: bool = false", "reverse: bool = false", _t(_REDUCE_NUM),
                       "Tidx: {int32, int64} = DT_INT32"], shape_fn=unchanged_shape))


@ks.kernel("Cumsum", "Cumprod", host_memory=("axis",))
def _scan_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    is_sum = ctx.op_type == "Cumsum"
    scan = xp.cumsum if is_sum else xp.cumprod
    exclusive = bool(ctx.attrs.get("exclusive", False))
    reverse = bool(ctx.attrs.get("reverse", False))
    npdt = ctx.output_dtypes[0].np
    identity = 0 if is_sum else 1

    read = host_reader(ctx)

    def cum(x: Any, axis: Any) -> Any:
        rank = np.ndim(x)
        a = int(read(axis).reshape(-1)[0])
        if a < -rank or a >= rank:
            raise InvalidArgumentError(None, None, f"ScanOp: Expected scan axis in the range "
                                                   f"[{-rank}, {rank}), but got {a}")
        a %= rank
        if reverse:
            x = xp.flip(x, a)
        out = scan(x, axis=a, dtype=npdt)
        if exclusive:
            head = [slice(None)] * rank
            head[a] = slice(0, 1)
            body = [slice(None)] * rank
            body[a] = slice(0, -1)
            first = xp.full(out[tuple(head)].shape, identity, dtype=npdt)
            out = xp.concatenate([first, out[tuple(body)]], axis=a)
        if reverse:
            out = xp.flip(out, a)
        return out

    return cum


def _scan_api(op_type: str, names: Sequence[str], doc: str) -> Callable[..., Tensor]:
    def fn(x: Any, axis: Any = 0, exclusive: bool = False, reverse: bool = False,
           name: str | None = None) -> Tensor:
        with name_scope(name, op_type, [x]) as scope:
            x = convert_to_tensor(x, name="x")
            return apply_op(op_type, name=scope, x=x, axis=axis, exclusive=exclusive,
                            reverse=reverse)

    fn.__name__ = fn.__qualname__ = names[0]
    fn.__doc__ = doc
    ks.api(*names)(fn)
    return fn


cumsum = _scan_api("Cumsum", ("cumsum", "math.cumsum"),
                   "Cumulative sum along ``axis`` (``exclusive``/``reverse`` as TF).")
cumprod = _scan_api("Cumprod", ("cumprod", "math.cumprod"),
                    "Cumulative product along ``axis`` (``exclusive``/``reverse`` as TF).")


# =======================================================================================
# Matrix products
# =======================================================================================
def _matmul_shape(op: Any) -> list[TensorShape]:
    a, b = op.inputs[0].shape, op.inputs[1].shape
    for s in (a, b):
        if s.ndims is not None and s.ndims != 2:
            raise ValueError(f"Shape must be rank 2 but is rank {s.ndims}{_where(op)}")
    ta = op.node_attrs.get("transpose_a", False)
    tb = op.node_attrs.get("transpose_b", False)
    da = a.as_tuple() or (None, None)
    db = b.as_tuple() or (None, None)
    rows, inner_a = (da[1], da[0]) if ta else (da[0], da[1])
    inner_b, cols = (db[1], db[0]) if tb else (db[0], db[1])
    if inner_a is not None and inner_b is not None and inner_a != inner_b:
        raise ValueError(f"Dimensions must be equal, but are {inner_a} and {inner_b}"
                         f"{_where(op)}")
    return [TensorShape([rows, cols])]


def _batch_matmul_shape(op: Any) -> list[TensorShape]:
    a, b = op.inputs[0].shape, op.inputs[1].shape
    for s in (a, b):
        if s.ndims is not None and s.ndims < 2:
            raise ValueError(f"Shape must be at least rank 2 but is rank {s.ndims}"
                             f"{_where(op)}")
    if a.ndims is None or b.ndims is None:
        return [unknown_shape()]
    adj_x = op.node_attrs.get("adj_x", False)
    adj_y = op.node_attrs.get("adj_y", False)
    da, db = a.as_tuple(), b.as_tuple()
    rows, inner_a = (da[-1], da[-2]) if adj_x else (da[-2], da[-1])
    inner_b, cols = (db[-1], db[-2]) if adj_y else (db[-2], db[-1])
    if inner_a is not None and inner_b is not None and inner_a != inner_b:
        raise ValueError(f"Dimensions must be equal, but are {inner_a} and {inner_b}"
                         f"{_where(op)}")
    try:
        batch = broadcast_static(TensorShape(da[:-2]), TensorShape(db[:-2]))
    except ValueError:
        raise ValueError(f"Incompatible batch dimensions{_where(op)}") from None
    return [TensorShape(list(batch.as_tuple()) + [rows, cols])]


_MATMUL_TYPES = f"{_FLOAT}, int32, int64, {_UINT}, {_CPLX}"
_BMM_TYPES = f"{_FLOAT}, int16, int32, int64, {_UINT}, {_CPLX}"
ks.op(
    OpDef("MatMul", inputs=["a: T", "b: T"], outputs=["product: T"],
          attrs=["transpose_a: bool = false", "transpose_b: bool = false",
                 _t(_MATMUL_TYPES)], shape_fn=_matmul_shape),
    OpDef("BatchMatMulV2", inputs=["x: T", "y: T"], outputs=["output: T"],
          attrs=[_t(_BMM_TYPES), "adj_x: bool = false", "adj_y: bool = false"],
          shape_fn=_batch_matmul_shape),
    OpDef("BatchMatMul", inputs=["x: T", "y: T"], outputs=["output: T"],
          attrs=[_t(_BMM_TYPES), "adj_x: bool = false", "adj_y: bool = false"],
          shape_fn=_batch_matmul_shape),
)


def _guard_matmul(ctx: Any, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    if _all_static(ctx):
        return fn

    def guarded(a: Any, b: Any) -> Any:
        try:
            return fn(a, b)
        except ValueError:
            raise InvalidArgumentError(
                None, None, f"Matrix size-incompatible: In[0]: {_fmt_shape(np.shape(a))}, "
                            f"In[1]: {_fmt_shape(np.shape(b))}") from None

    return guarded


@ks.kernel("MatMul", expensive=True)
def _matmul_kernel(ctx: Any) -> Any:
    matmul = ctx.xp.matmul
    ta = bool(ctx.attrs.get("transpose_a", False))
    tb = bool(ctx.attrs.get("transpose_b", False))
    if ta and tb:
        fn = lambda a, b: matmul(a.T, b.T)  # noqa: E731
    elif ta:
        fn = lambda a, b: matmul(a.T, b)  # noqa: E731
    elif tb:
        fn = lambda a, b: matmul(a, b.T)  # noqa: E731
    else:
        fn = matmul

    def into(a: Any, b: Any, out: Any) -> Any:
        return matmul(a.T if ta else a, b.T if tb else b, out=out)

    fn = _guard_matmul(ctx, small_gemm_single_threaded(ctx, fn, 0 if ta else 1,
                                                       0 if tb else 1, into))
    if ctx.output_dtypes[0].name == "bfloat16":
        out_np = np.dtype(ctx.output_dtypes[0].np)
        # numpy multiplies bfloat16 matrices in float32 and returns float32
        inner = fn
        fn = lambda a, b: inner(a, b).astype(out_np, copy=False)  # noqa: E731
    return fn


#: GEMMs with fewer multiply-adds than this run with BLAS on one thread (on devices
#: that offer it: ``Device.single_threaded_blas``); see plugins/devices/cpu.py, which
#: names the same bound. 2^25 (33.5M): an MLP's 64x784x256 product (12.8M) stays on one
#: thread. On an idle 2-core machine BLAS's two threads made that step no faster (2.38
#: against 2.38 ms), but with one core busy in another process they made it 10x slower
#: (30 against 3.3 ms): BLAS's threads wait for each other at every product, and one
#: the OS holds back stalls them all. Products this small are not worth that risk.
SMALL_GEMM_FLOPS = 1 << 25
#: whether a large product on a device with ``parallel_map`` (the CPU) keeps off BLAS's
#: own threads unless it is square enough (:data:`BLAS_THREADS_MIN_SIDE`): split over
#: the intra-op threads (BLAS on one thread in each) when every side is at least
#: :data:`SPLIT_MIN_SIDE`, else run on one thread. BLAS's threads
#: busy-wait for about 0.1 s after every threaded call, taking a core from whatever the
#: step runs next: the tf.layers MNIST CNN step spent 265-295 ms of CPU with them against
#: 190 ms without, and took 140-165 ms against 118-122 ms (2 cores, TF 100-105 ms).
SPLIT_LARGE_GEMMS = True
#: the dtypes a split product writes straight into its result (numpy's product of two
#: of them has their dtype)
_INTO_DTYPES = frozenset(np.dtype(t) for t in ("float32", "float64", "complex64",
                                                 "complex128"))
#: parts a split product is cut into, per intra-op thread
SPLIT_PARTS_PER_THREAD = 1
#: a large product is split only when all of m, k and n are at least this; otherwise it
#: runs with BLAS on one thread (the MNIST CNN's dense layer, 64 x 3136 x 1024, ran 20 %
#: faster split along its 1024 columns than on one thread)
SPLIT_MIN_SIDE = 32
#: ... and one with every side at least this is left to BLAS's own threads: they share
#: the packed operands, so on a product this square they beat a split (four chained
#: 512x512 products: 9-10 ms against 12 ms split, TF 9.5 ms), and there the next
#: kernel is usually another such product that takes the waiting threads
BLAS_THREADS_MIN_SIDE = 256


def small_gemm_single_threaded(ctx: Any, fn: Callable[[Any, Any], Any], k_axis: int = 1,
                               n_axis: int = 1,
                               fn_into: Callable[[Any, Any, Any], Any] | None = None
                               ) -> Callable[[Any, Any], Any]:
    """``fn(a, b)`` (a 2-D product contracting ``a``'s axis ``k_axis``, its result's
    columns along ``b``'s axis ``n_axis``) threaded the way the device wants: a small
    product runs with BLAS on one thread (the device's ``single_threaded_blas``); with
    :data:`SPLIT_LARGE_GEMMS`, a large one, on a device with ``parallel_map`` (the CPU),
    is split over the intra-op threads, BLAS on one thread in each, rather than left to
    BLAS's own threads (which busy-wait between calls). ``fn`` itself elsewhere.
    ``fn_into(a, b, out)``, when given, writes the product into ``out``: a split product
    then goes straight into its result rather than through a concatenation (a 12.8 MB
    copy for the CNN's dense-layer filter gradient)."""
    wrap = getattr(ctx.device, "single_threaded_blas", None)
    if wrap is None:
        return fn
    single = wrap(fn)
    if single is fn:
        return fn
    pmap = getattr(ctx.device, "parallel_map", None)
    threads = int(ctx.device.parallelism()) if pmap is not None else 1
    xp = ctx.xp
    m_axis = 1 - k_axis

    def split(a: Any, b: Any) -> Any:
        # along the result's longer side, so that each thread packs only its share of
        # the operand on that side (BLAS copies an operand into panels on every call)
        m, n = a.shape[m_axis], b.shape[n_axis]
        parts = SPLIT_PARTS_PER_THREAD * threads
        if n > m:
            step = -(-n // parts)
            count, axis = -(-n // step), 1
            a_of = lambda i: a  # noqa: E731
            b_of = (lambda i: b[:, i * step:(i + 1) * step]) if n_axis == 1 else \
                (lambda i: b[i * step:(i + 1) * step])
        else:
            step = -(-m // parts)
            count, axis = -(-m // step), 0
            a_of = (lambda i: a[i * step:(i + 1) * step]) if m_axis == 0 else \
                (lambda i: a[:, i * step:(i + 1) * step])
            b_of = lambda i: b  # noqa: E731
        if fn_into is None or a.dtype != b.dtype or a.dtype not in _INTO_DTYPES:
            return xp.concatenate(pmap(lambda i: fn(a_of(i), b_of(i)), count), axis=axis)
        out = xp.empty((m, n), dtype=a.dtype)

        def into(i: int) -> None:
            block = slice(i * step, (i + 1) * step)
            fn_into(a_of(i), b_of(i), out[:, block] if axis else out[block])
        pmap(into, count)
        return out

    adapt = getattr(ctx.device, "adapt_threads", None) or (lambda: None)

    def call(a: Any, b: Any) -> Any:
        k = a.shape[k_axis]
        flops = a.size * (b.size // k) if k else 0
        if flops < SMALL_GEMM_FLOPS:
            return single(a, b)
        adapt()
        if not SPLIT_LARGE_GEMMS or a.ndim != 2 or b.ndim != 2:
            return fn(a, b)
        m, n = a.shape[m_axis], b.shape[n_axis]
        if threads > 1 and min(m, k, n) >= SPLIT_MIN_SIDE:
            if min(m, k, n) >= BLAS_THREADS_MIN_SIDE:
                return fn(a, b)
            return split(a, b)
        # bound by memory (a thin side): a second thread gains little, and the other
        # cores are better left to the step's other kernels
        return single(a, b)

    return call


@ks.kernel("BatchMatMulV2", "BatchMatMul", expensive=True)
def _batch_matmul_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    matmul, swap = xp.matmul, xp.swapaxes
    cplx = ctx.output_dtypes[0].is_complex
    conj = xp.conj

    def adjoint(m: Any) -> Any:
        m = swap(m, -1, -2)
        return conj(m) if cplx else m

    adj_x = bool(ctx.attrs.get("adj_x", False))
    adj_y = bool(ctx.attrs.get("adj_y", False))
    if not adj_x and not adj_y:
        return _guard_matmul(ctx, matmul)
    fx = adjoint if adj_x else (lambda m: m)
    fy = adjoint if adj_y else (lambda m: m)
    return _guard_matmul(ctx, lambda a, b: matmul(fx(a), fy(b)))


@ks.api("matmul", "linalg.matmul")
def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False,
           adjoint_a: bool = False, adjoint_b: bool = False, a_is_sparse: bool = False,
           b_is_sparse: bool = False, name: str | None = None) -> Tensor:
    """Matrix product ``a @ b``: MatMul for rank-2 inputs, BatchMatMulV2 (broadcasting
    batch dimensions) otherwise. As in TF 1.15, a sparsity hint on float32/bfloat16
    inputs, or bfloat16 mixed with another dtype, takes the ``SparseMatMul`` op (its
    float32 result cast back when both inputs are bfloat16)."""
    with name_scope(name, "MatMul", [a, b]) as scope:
        if transpose_a and adjoint_a:
            raise ValueError("Only one of transpose_a and adjoint_a can be True.")
        if transpose_b and adjoint_b:
            raise ValueError("Only one of transpose_b and adjoint_b can be True.")
        a = convert_to_tensor(a, name="a")
        b = convert_to_tensor(b, name="b")
        ra, rb = a.shape.ndims, b.shape.ndims
        if not (a_is_sparse or b_is_sparse) and (ra is None or ra > 2 or rb is None or
                                                 rb > 2):
            if transpose_a:
                a = conj(a)
                adjoint_a = True
            if transpose_b:
                b = conj(b)
                adjoint_b = True
            return apply_op("BatchMatMulV2", name=scope, x=a, y=b, adj_x=adjoint_a,
                            adj_y=adjoint_b)
        if adjoint_a:
            a = conj(a)
            transpose_a = True
        if adjoint_b:
            b = conj(b)
            transpose_b = True
        an, bn = a.dtype.base_dtype.name, b.dtype.base_dtype.name
        use_sparse = (a_is_sparse or b_is_sparse) and {an, bn} <= {"float32", "bfloat16"}
        if "bfloat16" in (an, bn) and an != bn:
            use_sparse = True  # (MatMul takes one dtype)
        if use_sparse:
            ret = apply_op("SparseMatMul", name=scope, a=a, b=b, transpose_a=transpose_a,
                           transpose_b=transpose_b, a_is_sparse=a_is_sparse,
                           b_is_sparse=b_is_sparse)
            if an == bn == "bfloat16":
                ret = apply_op("Cast", x=ret, DstT=a.dtype.base_dtype, name="Cast")
            return ret
        return apply_op("MatMul", name=scope, a=a, b=b, transpose_a=transpose_a,
                        transpose_b=transpose_b)


# -- Einsum ------------------------------------------------------------------------------------
def _parse_equation(equation: str, n_inputs: int) -> tuple[list[str], str]:
    """Input and output subscripts, with ``...`` written as ``.``; implicit output as numpy."""
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, out = eq.split("->", 1)
        explicit = True
    else:
        lhs, out, explicit = eq, "", False
    ins = lhs.split(",")
    if len(ins) != n_inputs:
        raise ValueError(f"Expected {len(ins)} inputs but got {n_inputs} for equation "
                         f"{equation!r}")
    allowed = set(_string.ascii_letters)
    norm: list[str] = []
    for s in ins + [out]:
        if s.count("...") > 1 or s.replace("...", "").count(".") or \
                any(c not in allowed for c in s.replace("...", "")):
            raise ValueError(f"Invalid Einsum equation {equation!r}")
        norm.append(s.replace("...", "."))
    ins_n, out_n = norm[:-1], norm[-1]
    if not explicit:
        counts: dict[str, int] = {}
        for s in ins_n:
            for c in s:
                if c != ".":
                    counts[c] = counts.get(c, 0) + 1
        ell = "." if any("." in s for s in ins_n) else ""
        out_n = ell + "".join(sorted(c for c, k in counts.items() if k == 1))
    else:
        present = set("".join(ins_n))
        for c in out_n:
            if c != "." and c not in present:
                raise ValueError(f"Output subscript {c!r} does not appear in the inputs of "
                                 f"equation {equation!r}")
    return ins_n, out_n


def _einsum_shape(op: Any) -> list[TensorShape]:
    ins, out = _parse_equation(op.node_attrs["equation"], len(op.inputs))
    labels: dict[str, int | None] = {}
    ell = TensorShape([])
    for subs, t in zip(ins, op.inputs):
        dims = t.shape.as_tuple()
        if dims is None:
            if "." in subs:
                return [unknown_shape()]
            continue
        named = len(subs.replace(".", ""))
        if ("." not in subs and len(dims) != named) or len(dims) < named:
            raise ValueError(f"Input with shape {_fmt_shape(dims)} has rank {len(dims)} but "
                             f"the subscripts {subs!r} need rank {named}{_where(op)}")
        if "." in subs:
            k = subs.index(".")
            n_ell = len(dims) - named
            ell = broadcast_static(ell, TensorShape(dims[k:k + n_ell]), op)
            dims = dims[:k] + (None,) + dims[k + n_ell:]
        for c, d in zip(subs, dims):
            if c == ".":
                continue
            prev = labels.get(c)
            if d is not None and prev is not None and d != prev and d != 1 and prev != 1:
                raise ValueError(f"Dimensions of label {c!r} must agree, but are {prev} and "
                                 f"{d}{_where(op)}")
            if prev is None or prev == 1:
                labels[c] = d if d is not None else prev
    result: list[int | None] = []
    for c in out:
        if c == ".":
            result.extend(ell.as_tuple())
        else:
            result.append(labels.get(c))
    return [TensorShape(result)]


ks.op(OpDef("Einsum", inputs=["inputs: N * T"], outputs=["output: T"],
            attrs=["equation: string", "N: int >= 1", "T: type"], shape_fn=_einsum_shape))


@ks.kernel("Einsum", expensive=True)
def _einsum_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    npdt = ctx.output_dtypes[0].np
    eq = ctx.attrs["equation"].replace(" ", "")
    einsum = xp.einsum
    if len(ctx.input_shapes) == 1:
        return lambda x: xp.asarray(einsum(eq, x)).astype(npdt, copy=False)
    paths: dict[tuple[Any, ...], Any] = {}

    def multi(*xs: Any) -> Any:
        key = tuple(np.shape(x) for x in xs)
        path = paths.get(key)
        if path is None:
            path = paths[key] = np.einsum_path(eq, *xs, optimize="greedy")[0] \
                if xp is np else True
        try:
            out = einsum(eq, *xs, optimize=path)
        except ValueError as e:
            raise InvalidArgumentError(None, None, f"Einsum {eq!r}: {e}") from None
        return xp.asarray(out).astype(npdt, copy=False)

    return multi


@ks.api("einsum", "linalg.einsum")
def einsum(equation: str, *inputs: Any, **kwargs: Any) -> Tensor:
    """Einstein summation (one ``Einsum`` node), e.g. ``einsum('ij,jk->ik', a, b)``."""
    name = kwargs.pop("name", None)
    if kwargs:
        raise TypeError(f"invalid keyword arguments for this function: "
                        f"{', '.join(sorted(kwargs))}. Expected: name")
    if not inputs:
        raise ValueError("einsum needs at least one input tensor")
    # TF 1.15 built the contraction from transposes, reshapes and matmuls inside an
    # "einsum" scope (TF 2.x: one Einsum op in that scope); flowrt emits the one op there
    with name_scope(name, "einsum", list(inputs)):
        return apply_op("Einsum", inputs=list(inputs), equation=equation)


# -- tensordot -----------------------------------------------------------------------------
def _tensordot_axes(a: Tensor, axes: Any) -> tuple[list[int], list[int]]:
    rank = a.shape.ndims
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        axes = int(axes)
        if axes < 0:
            raise ValueError("'axes' must be at least 0.")
        if rank is None:
            raise ValueError("tensordot with an integer 'axes' needs inputs of known rank")
        if axes > rank:
            raise ValueError(f"'axes' must not be larger than the number of dimensions of "
                             f"tensor {a}.")
        return list(_range(rank - axes, rank)), list(_range(axes))
    if isinstance(axes, Tensor):
        value = constant_value(axes)
        if value is None:
            raise ValueError("tensordot needs 'axes' known at graph-construction time")
        axes = value.tolist()
    if isinstance(axes, np.ndarray):
        axes = axes.tolist()
    if isinstance(axes, (list, tuple)):
        if len(axes) != 2:
            raise ValueError("'axes' must be an integer or have length 2.")
        a_axes, b_axes = axes
        if isinstance(a_axes, (int, np.integer)) and isinstance(b_axes, (int, np.integer)):
            a_axes, b_axes = [a_axes], [b_axes]
        a_axes, b_axes = [int(i) for i in a_axes], [int(i) for i in b_axes]
        if len(a_axes) != len(b_axes):
            raise ValueError(f"Different number of contraction axes 'a' and 'b', "
                             f"{len(a_axes)} != {len(b_axes)}.")
        return a_axes, b_axes
    raise TypeError(f"'axes' must be an int or a pair of axis lists, got {axes!r}")


def _tensordot_reshape(a: Tensor, axes: list[int],
                       flipped: bool = False) -> tuple[Tensor, Any, list[int | None]]:
    dims = a.shape.as_tuple()
    if dims is None:
        raise ValueError("tensordot needs inputs of known rank")
    rank = len(dims)
    axes = [i if i >= 0 else i + rank for i in axes]
    free = [i for i in _range(rank) if i not in axes]
    free_dims = [dims[i] for i in free]
    perm = axes + free if flipped else free + axes
    if a.shape.is_fully_defined():
        prod_free = int(np.prod([dims[i] for i in free], dtype=np.int64))
        prod_axes = int(np.prod([dims[i] for i in axes], dtype=np.int64))
        new_shape: Any = [prod_axes, prod_free] if flipped else [prod_free, prod_axes]
        t = a
        if perm != list(_range(rank)):
            t = apply_op("Transpose", x=a, perm=np.asarray(perm, dtype=np.int32))
        if list(t.shape.as_tuple() or ()) != new_shape:
            t = apply_op("Reshape", tensor=t, shape=np.asarray(new_shape, dtype=np.int32))
        return t, free_dims, free_dims
    shape_a = apply_op("Shape", input=a, out_type=_dt.int32)
    free_t = convert_to_tensor(np.asarray(free, dtype=np.int32), name="free")
    axes_t = convert_to_tensor(np.asarray(axes, dtype=np.int32), name="axes")
    free_dims_t = apply_op("GatherV2", params=shape_a, indices=free_t, axis=0)
    axes_dims_t = apply_op("GatherV2", params=shape_a, indices=axes_t, axis=0)
    prod_free_t = reduce_prod(free_dims_t)
    prod_axes_t = reduce_prod(axes_dims_t)
    if flipped:
        perm_t = apply_op("ConcatV2", values=[axes_t, free_t], axis=0)
        new_shape = apply_op("Pack", values=[prod_axes_t, prod_free_t], axis=0)
    else:
        perm_t = apply_op("ConcatV2", values=[free_t, axes_t], axis=0)
        new_shape = apply_op("Pack", values=[prod_free_t, prod_axes_t], axis=0)
    t = apply_op("Reshape", tensor=apply_op("Transpose", x=a, perm=perm_t), shape=new_shape)
    return t, free_dims_t, free_dims


@ks.api("tensordot", "linalg.tensordot")
def tensordot(a: Any, b: Any, axes: Any, name: str | None = None) -> Tensor:
    """Tensor contraction of ``a`` and ``b`` over ``axes`` (an int N: the last N axes of
    ``a`` with the first N of ``b``; or a pair of axis lists), built from Transpose,
    Reshape and MatMul as TF does. Inputs must have a known rank."""
    with name_scope(name, "Tensordot", [a, b]) as scope:
        a = convert_to_tensor(a, name="a")
        b = convert_to_tensor(b, name="b")
        a_axes, b_axes = _tensordot_axes(a, axes)
        a_r, a_free, a_free_static = _tensordot_reshape(a, a_axes)
        b_r, b_free, b_free_static = _tensordot_reshape(b, b_axes, True)
        product = matmul(a_r, b_r)
        if isinstance(a_free, list) and isinstance(b_free, list) and \
                all(d is not None for d in a_free + b_free):
            return apply_op("Reshape", name=scope, tensor=product,
                            shape=np.asarray(a_free + b_free, dtype=np.int32))
        if isinstance(a_free, list):
            a_free = convert_to_tensor(np.asarray(a_free, dtype=np.int32))
        if isinstance(b_free, list):
            b_free = convert_to_tensor(np.asarray(b_free, dtype=np.int32))
        out = apply_op("Reshape", name=scope, tensor=product,
                       shape=apply_op("ConcatV2", values=[a_free, b_free], axis=0))
        out.set_shape(a_free_static + b_free_static)
        return out


# -- dtypes TensorFlow's CPU kernels refuse ----------------------------------------------
# The op definitions (from current TF) admit these dtypes, but TF registers no CPU kernel
# for them, so a step that uses one fails when it runs. flowrt refuses the same way
# rather than computing something TF never would.
_INTS = (_dt.int8, _dt.int16, _dt.int32, _dt.int64, _dt.uint8, _dt.uint16, _dt.uint32,
         _dt.uint64)
_NO_TF_CPU_KERNEL: dict[str, tuple[_dt.DType, ...]] = {
    "RealDiv": _INTS,
    "Reciprocal": _INTS, "Inv": _INTS,
    "Round": (_dt.complex64, _dt.complex128),
    "Rint": (_dt.float16, _dt.bfloat16),
    "TruncateMod": (_dt.float16, _dt.bfloat16),
    "Lgamma": (_dt.bfloat16,), "Digamma": (_dt.bfloat16,),
}


def _refusing(op: str, factory: Callable[[Any], Any]) -> Callable[[Any], Any]:
    bad = _NO_TF_CPU_KERNEL[op]

    def checked(ctx: Any) -> Any:
        dt = ctx.input_dtypes[0] if ctx.input_dtypes else None
        if dt in bad and ctx.device.device_type == "CPU":
            raise InvalidArgumentError(
                None, None, f"No OpKernel was registered to support Op '{op}' with these "
                f"attrs: [T={dt.name}] on device CPU (TensorFlow has none either)")
        return factory(ctx)

    return checked


for _k in ks.kernels:
    if _k.op in _NO_TF_CPU_KERNEL and _k.device_type in ("*", "CPU"):
        _k.factory = _refusing(_k.op, _k.factory)
