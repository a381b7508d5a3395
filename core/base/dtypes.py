"""TensorFlow's dtype set (``tf.float32`` ...), with reference variants and numpy mapping.

A :class:`DType` is interned: ``as_dtype`` always returns the same object for the same
type, so dtypes compare by identity in hot paths.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "DType", "as_dtype", "float16", "half", "bfloat16", "float32", "float64", "double",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool",
    "string", "complex64", "complex128", "qint8", "quint8", "qint16", "quint16", "qint32",
    "resource", "variant", "float32_ref", "float64_ref", "int32_ref", "int64_ref",
    "bool_ref", "string_ref", "QUANTIZED_DTYPES", "TF_VALUE_DTYPES",
]

try:  # optional: real bfloat16 storage when ml_dtypes happens to be installed
    import ml_dtypes as _ml_dtypes  # type: ignore

    _BF16_NP: Any = np.dtype(_ml_dtypes.bfloat16)
except Exception:  # pragma: no cover - depends on the environment
    _BF16_NP = None

_REF_OFFSET = 100


def _bfloat16_limit(sign: int) -> Any:
    """bfloat16's largest (sign 1) or smallest (-1) value: a bfloat16 scalar when
    ml_dtypes provides the type (as TF returns), else the same value as a float."""
    try:
        import ml_dtypes  # (optional: numpy's bfloat16 comes from it when installed)
    except ImportError:
        return sign * 3.38953139e38
    info = ml_dtypes.finfo(ml_dtypes.bfloat16)
    return info.max if sign > 0 else info.min


class DType:
    """A tensor element type, as ``tf.DType``."""

    __slots__ = ("_enum", "_name", "_np")

    def __init__(self, enum: int, name: str, np_dtype: Any):
        self._enum = enum
        self._name = name
        self._np = np_dtype

    # -- identity ---------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def as_datatype_enum(self) -> int:
        return self._enum

    @property
    def _is_ref_dtype(self) -> bool:
        return self._enum > _REF_OFFSET

    @property
    def is_ref_dtype(self) -> bool:
        return self._enum > _REF_OFFSET

    @property
    def _as_ref(self) -> "DType":
        return self if self._is_ref_dtype else _BY_ENUM[self._enum + _REF_OFFSET]

    @property
    def base_dtype(self) -> "DType":
        return _BY_ENUM[self._enum - _REF_OFFSET] if self._is_ref_dtype else self

    @property
    def real_dtype(self) -> "DType":
        """float32/float64 for complex64/complex128, else the dtype itself."""
        b = self.base_dtype
        if b is complex64:
            return float32
        if b is complex128:
            return float64
        return self

    # -- numpy -------------------------------------------------------------------------
    @property
    def as_numpy_dtype(self) -> Any:
        b = self.base_dtype
        if b._np is None:
            raise TypeError(f"dtype {b.name} has no numpy equivalent in this environment")
        return b._np.type

    @property
    def np(self) -> np.dtype:
        """The numpy dtype object (object dtype for string/resource/variant)."""
        b = self.base_dtype
        if b._np is None:
            raise TypeError(f"dtype {b.name} has no numpy equivalent in this environment")
        return b._np

    # -- classification ----------------------------------------------------------------
    @property
    def is_floating(self) -> bool:
        return self.base_dtype in _FLOATS

    @property
    def is_integer(self) -> bool:
        return self.base_dtype in _INTS

    @property
    def is_unsigned(self) -> bool:
        """True for uint8..uint64 (TF: ``min == 0``; quantized types are not)."""
        return self.base_dtype in (uint8, uint16, uint32, uint64)

    @property
    def is_complex(self) -> bool:
        return self.base_dtype in (complex64, complex128)

    @property
    def is_bool(self) -> bool:
        return self.base_dtype is bool

    @property
    def is_quantized(self) -> bool:
        return self.base_dtype in QUANTIZED_DTYPES

    @property
    def is_numpy_compatible(self) -> bool:
        return self.base_dtype not in (resource, variant) and self.base_dtype._np is not None

    @property
    def size(self) -> int:
        """Bytes per element (numpy's itemsize; 1 for resource and variant)."""
        b = self.base_dtype
        if b in (resource, variant):
            return 1
        return b.np.itemsize

    @property
    def min(self) -> Any:
        """The smallest value (TypeError for bool, string, complex and quantized)."""
        b = self.base_dtype
        if b.is_floating:
            return np.finfo(b.np).min if b is not bfloat16 else _bfloat16_limit(-1)
        if b.is_integer:
            return np.iinfo(b.np).min
        raise TypeError(f"Cannot find minimum value of {self}.")

    @property
    def max(self) -> Any:
        """The largest value (TypeError for bool, string, complex and quantized)."""
        b = self.base_dtype
        if b.is_floating:
            return np.finfo(b.np).max if b is not bfloat16 else _bfloat16_limit(1)
        if b.is_integer:
            return np.iinfo(b.np).max
        raise TypeError(f"Cannot find maximum value of {self}.")

    def limits(self, clip_negative: bool = True) -> tuple[Any, Any]:
        """The intensity range of image data of this dtype (TF's ``DType.limits``):
        (-1, 1) for floats, the full range for integers; ``clip_negative`` makes the
        lower limit 0."""
        b = self.base_dtype
        if b is bool:
            lo, hi = False, True
        elif b.is_floating:
            lo, hi = -1, 1
        elif b.is_integer and not b.is_quantized:
            lo, hi = int(np.iinfo(b.np).min), int(np.iinfo(b.np).max)
        else:
            raise TypeError(f"limits are not defined for {self}")
        if clip_negative:
            lo = 0
        return lo, hi

    def is_compatible_with(self, other: Any) -> bool:
        other = as_dtype(other)
        return self._enum in (other._enum, other.base_dtype._enum)

    def __repr__(self) -> str:
        return f"tf.{self._name}"

    def __str__(self) -> str:
        return f"<dtype: '{self._name}'>"

    def __eq__(self, other: Any) -> bool:
        if other is None:
            return False
        if isinstance(other, DType):
            return self is other
        try:
            return self is as_dtype(other)
        except TypeError:
            return False

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return self._enum

    def __reduce__(self):
        return as_dtype, (self._name,)


_BY_ENUM: dict[int, DType] = {}
_BY_NAME: dict[str, DType] = {}


def _make(enum: int, name: str, np_dtype: Any) -> DType:
    d = DType(enum, name, None if np_dtype is None else np.dtype(np_dtype))
    r = DType(enum + _REF_OFFSET, name + "_ref", d._np)
    _BY_ENUM[enum] = d
    _BY_ENUM[enum + _REF_OFFSET] = r
    _BY_NAME[name] = d
    _BY_NAME[name + "_ref"] = r
    return d


float32 = _make(1, "float32", np.float32)
float64 = _make(2, "float64", np.float64)
int32 = _make(3, "int32", np.int32)
uint8 = _make(4, "uint8", np.uint8)
int16 = _make(5, "int16", np.int16)
int8 = _make(6, "int8", np.int8)
string = _make(7, "string", object)
complex64 = _make(8, "complex64", np.complex64)
int64 = _make(9, "int64", np.int64)
bool = _make(10, "bool", np.bool_)  # noqa: A001 - TF's public name
qint8 = _make(11, "qint8", np.int8)
quint8 = _make(12, "quint8", np.uint8)
qint32 = _make(13, "qint32", np.int32)
bfloat16 = _make(14, "bfloat16", _BF16_NP)
qint16 = _make(15, "qint16", np.int16)
quint16 = _make(16, "quint16", np.uint16)
uint16 = _make(17, "uint16", np.uint16)
complex128 = _make(18, "complex128", np.complex128)
float16 = _make(19, "float16", np.float16)
resource = _make(20, "resource", object)
variant = _make(21, "variant", object)
uint32 = _make(22, "uint32", np.uint32)
uint64 = _make(23, "uint64", np.uint64)
half = float16
double = float64

float32_ref = float32._as_ref
float64_ref = float64._as_ref
int32_ref = int32._as_ref
int64_ref = int64._as_ref
bool_ref = bool._as_ref
string_ref = string._as_ref

_FLOATS = frozenset({float16, bfloat16, float32, float64})
_INTS = frozenset({int8, int16, int32, int64, uint8, uint16, uint32, uint64})
QUANTIZED_DTYPES = frozenset({qint8, quint8, qint16, quint16, qint32})
#: Every value dtype (not ref, resource or variant), the set kernels are tested over.
TF_VALUE_DTYPES = (float16, float32, float64, int8, int16, int32, int64, uint8, uint16,
                   uint32, uint64, complex64, complex128, bool, string)

_ALIASES = {"float": float32, "double": float64, "half": float16, "float_ref": float32_ref,
            "double_ref": float64_ref, "half_ref": float16._as_ref, "int": int32,
            "long": int64, "complex": complex128, "str": string, "bytes": string}

_NP_TO_DTYPE: dict[Any, DType] = {
    np.dtype(np.float32): float32, np.dtype(np.float64): float64,
    np.dtype(np.float16): float16, np.dtype(np.int8): int8, np.dtype(np.int16): int16,
    np.dtype(np.int32): int32, np.dtype(np.int64): int64, np.dtype(np.uint8): uint8,
    np.dtype(np.uint16): uint16, np.dtype(np.uint32): uint32, np.dtype(np.uint64): uint64,
    np.dtype(np.complex64): complex64, np.dtype(np.complex128): complex128,
    np.dtype(np.bool_): bool, np.dtype(object): string,
}
if _BF16_NP is not None:  # pragma: no cover
    _NP_TO_DTYPE[_BF16_NP] = bfloat16

import builtins as _b  # noqa: E402

_PY_TO_DTYPE: dict[Any, DType] = {_b.float: float32, _b.int: int32, _b.bool: bool,
                                  _b.complex: complex128, _b.str: string, _b.bytes: string}


def as_dtype(type_value: Any) -> DType:
    """Convert a DType, enum number, name, numpy dtype or Python type to a :class:`DType`.

    :raises TypeError: if ``type_value`` names no TF dtype.
    """
    if isinstance(type_value, DType):
        return type_value
    if type_value is None:  # numpy would read None as float64
        raise TypeError("Cannot convert value None to a TensorFlow DType.")
    if isinstance(type_value, _b.int) and not isinstance(type_value, _b.bool):
        d = _BY_ENUM.get(type_value)
        if d is not None:
            return d
    elif isinstance(type_value, _b.str):
        d = _BY_NAME.get(type_value) or _ALIASES.get(type_value)
        if d is not None:
            return d
    else:
        d = _PY_TO_DTYPE.get(type_value) if isinstance(type_value, type) and not issubclass(
            type_value, np.generic) else None
        if d is not None:
            return d
        try:
            nd = np.dtype(type_value)
        except TypeError:
            nd = None
        if nd is not None:
            if nd.kind in ("U", "S"):
                return string
            d = _NP_TO_DTYPE.get(nd)
            if d is not None:
                return d
    raise TypeError(f"Cannot convert value {type_value!r} to a TensorFlow DType.")
