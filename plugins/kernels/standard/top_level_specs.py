"""The type specs TF 1.15 has at the top level: ``tf.TypeSpec``, ``tf.TensorSpec``,
``tf.SparseTensorSpec``, ``tf.IndexedSlicesSpec``, ``tf.TensorArraySpec`` and
``tf.type_spec_from_value``.

A spec describes a value without holding one: its dtype and static shape (and, for
composite values, those of its parts). Specs compare by value and hash, check whether a
value or another spec fits (``is_compatible_with``), and find the most specific spec two
specs share. ``tf.RaggedTensorSpec`` is left out: flowrt has no RaggedTensor.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from flowrt import dtypes as _dt
from flowrt.framework.indexed_slices import IndexedSlices
from flowrt.framework.sparse_tensor import SparseTensor, SparseTensorValue
from flowrt.graph import Tensor, convert_to_tensor
from flowrt.tensor_shape import TensorShape, as_shape

from ._common import constant_value, ks
from .tensor_array_ops import TensorArray

__all__ = ["TypeSpec", "TensorSpec", "SparseTensorSpec", "IndexedSlicesSpec",
           "TensorArraySpec", "type_spec_from_value"]


def _shape_key(s: TensorShape) -> Any:
    return None if s.ndims is None else tuple(s.as_list())


def _common_shape(a: TensorShape, b: TensorShape) -> TensorShape:
    """The most specific shape both ``a`` and ``b`` are compatible with."""
    if a.ndims is None or b.ndims is None or a.ndims != b.ndims:
        return TensorShape(None)
    return TensorShape([x if x == y else None for x, y in zip(a.as_list(), b.as_list())])


class TypeSpec:
    """The base of every spec (``tf.TypeSpec``): a value's type without the value.

    Subclasses list their parts in ``_serialize()``; equality, hashing and ``repr`` are
    built from it."""

    __slots__ = ()

    @property
    def value_type(self) -> type:
        """The Python type of values this spec describes."""
        raise NotImplementedError("need value_type")

    def _serialize(self) -> tuple[Any, ...]:
        raise NotImplementedError("need _serialize")

    def _key(self) -> tuple[Any, ...]:
        return tuple(_shape_key(p) if isinstance(p, TensorShape) else p
                     for p in self._serialize())

    def is_compatible_with(self, spec_or_value: Any) -> bool:
        """Whether ``spec_or_value`` (a spec, or a value whose spec is taken) has the
        same kind and dtypes and shapes compatible with this spec's."""
        other = spec_or_value if isinstance(spec_or_value, TypeSpec) else \
            type_spec_from_value(spec_or_value)
        if type(self) is not type(other):
            return False
        for a, b in zip(self._serialize(), other._serialize()):
            if isinstance(a, TensorShape):
                if not a.is_compatible_with(b):
                    return False
            elif a != b:
                return False
        return True

    def most_specific_compatible_type(self, other: "TypeSpec") -> "TypeSpec":
        """The most specific spec compatible with both; ValueError when the kinds or
        dtypes differ."""
        if type(self) is not type(other):
            raise ValueError(f"No TypeSpec is compatible with both {self} and {other}")
        parts = []
        for a, b in zip(self._serialize(), other._serialize()):
            if isinstance(a, TensorShape):
                parts.append(_common_shape(a, b))
            elif a != b:
                raise ValueError(f"No TypeSpec is compatible with both {self} and {other}")
            else:
                parts.append(a)
        return type(self)(*parts)

    def __eq__(self, other: Any) -> bool:
        return type(self) is type(other) and self._key() == other._key()

    def __ne__(self, other: Any) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    def __repr__(self) -> str:
        """TF's form: the parts in order (``SparseTensorSpec(TensorShape(...),
        tf.float32)``)."""
        parts = [f"tf.{v.name}" if isinstance(v, _dt.DType) else repr(v)
                 for v in self._serialize()]
        return f"{type(self).__name__}({', '.join(parts)})"


class TensorSpec(TypeSpec):
    """The spec of a ``tf.Tensor``: ``shape``, ``dtype`` and an optional ``name``::

        spec = tf.TensorSpec([None, 3], tf.float32)
        spec.is_compatible_with(tf.zeros([2, 3]))  # True
    """

    __slots__ = ("_shape", "_dtype", "_name")

    def __init__(self, shape: Any, dtype: Any = _dt.float32, name: str | None = None):
        self._shape = as_shape(shape)
        self._dtype = _dt.as_dtype(dtype)
        self._name = name

    @classmethod
    def from_spec(cls, spec: Any, name: str | None = None) -> "TensorSpec":
        """A TensorSpec with the shape and dtype of ``spec`` (its name unless ``name``)."""
        return cls(spec.shape, spec.dtype, name or getattr(spec, "name", None))

    @classmethod
    def from_tensor(cls, tensor: Any, name: str | None = None) -> "TensorSpec":
        """The spec of ``tensor``, named after its op unless ``name`` is given."""
        if isinstance(tensor, Tensor):
            return cls(tensor.shape, tensor.dtype, name or tensor.op.name)
        raise ValueError(f"`tensor` should be a tf.Tensor, but got type {type(tensor)}.")

    @property
    def shape(self) -> TensorShape:
        return self._shape

    @property
    def dtype(self) -> _dt.DType:
        return self._dtype

    @property
    def name(self) -> str | None:
        return self._name

    @property
    def value_type(self) -> type:
        return Tensor

    def is_compatible_with(self, spec_or_tensor: Any) -> bool:
        """Same dtype and a compatible shape (a Python or numpy value is converted)."""
        if isinstance(spec_or_tensor, TypeSpec) and not isinstance(spec_or_tensor,
                                                                    TensorSpec):
            return False
        other = spec_or_tensor
        if not isinstance(other, (TensorSpec, Tensor)):
            other = convert_to_tensor(other) if not isinstance(other, np.ndarray) else \
                TensorSpec(other.shape, _dt.as_dtype(other.dtype))
        return (self._dtype.is_compatible_with(other.dtype)
                and self._shape.is_compatible_with(other.shape))

    def most_specific_compatible_type(self, other: "TypeSpec") -> "TensorSpec":
        if type(self) is not type(other) or self._dtype != other.dtype:
            raise ValueError(f"No TypeSpec is compatible with both {self} and {other}")
        name = self._name if self._name == other.name else None
        return TensorSpec(_common_shape(self._shape, other.shape), self._dtype, name)

    def _serialize(self) -> tuple[Any, ...]:
        return (self._shape, self._dtype, self._name)

    def __repr__(self) -> str:
        return f"TensorSpec(shape={self._shape}, dtype=tf.{self._dtype.name}, " \
               f"name={self._name!r})"


class SparseTensorSpec(TypeSpec):
    """The spec of a ``tf.SparseTensor``: its dense ``shape`` and value ``dtype``."""

    __slots__ = ("_shape", "_dtype")

    def __init__(self, shape: Any = None, dtype: Any = _dt.float32):
        self._shape = as_shape(shape)
        self._dtype = _dt.as_dtype(dtype)

    @classmethod
    def from_value(cls, value: Any) -> "SparseTensorSpec":
        """The spec of a SparseTensor or SparseTensorValue."""
        if isinstance(value, SparseTensor):
            return cls(value.shape, value.dtype)
        if isinstance(value, SparseTensorValue):
            return cls(np.asarray(value.dense_shape).tolist(),
                       _dt.as_dtype(np.asarray(value.values).dtype))
        raise TypeError(f"Expected SparseTensor or SparseTensorValue, got {value!r}")

    @property
    def shape(self) -> TensorShape:
        return self._shape

    @property
    def dtype(self) -> _dt.DType:
        return self._dtype

    @property
    def value_type(self) -> type:
        return SparseTensor

    def _serialize(self) -> tuple[Any, ...]:
        return (self._shape, self._dtype)



class IndexedSlicesSpec(TypeSpec):
    """The spec of a ``tf.IndexedSlices``: the dense ``shape``, the values' ``dtype``,
    the indices' dtype, the dense_shape's dtype (None: no dense_shape) and the indices'
    shape."""

    __slots__ = ("_shape", "_values_dtype", "_indices_dtype", "_dense_shape_dtype",
                 "_indices_shape")

    def __init__(self, shape: Any = None, dtype: Any = _dt.float32,
                 indices_dtype: Any = _dt.int64, dense_shape_dtype: Any = None,
                 indices_shape: Any = None):
        self._shape = as_shape(shape)
        self._values_dtype = _dt.as_dtype(dtype)
        self._indices_dtype = _dt.as_dtype(indices_dtype)
        self._dense_shape_dtype = None if dense_shape_dtype is None else \
            _dt.as_dtype(dense_shape_dtype)
        indices_shape = as_shape(indices_shape).with_rank(1)
        self._indices_shape = indices_shape

    @property
    def shape(self) -> TensorShape:
        return self._shape

    @property
    def dtype(self) -> _dt.DType:
        return self._values_dtype

    @property
    def value_type(self) -> type:
        return IndexedSlices

    def _serialize(self) -> tuple[Any, ...]:
        return (self._shape, self._values_dtype, self._indices_dtype,
                self._dense_shape_dtype, self._indices_shape)



class TensorArraySpec(TypeSpec):
    """The spec of a ``tf.TensorArray``: ``element_shape``, ``dtype``, ``dynamic_size``
    and ``infer_shape``."""

    __slots__ = ("_element_shape", "_dtype", "_dynamic_size", "_infer_shape")

    def __init__(self, element_shape: Any = None, dtype: Any = _dt.float32,
                 dynamic_size: bool = False, infer_shape: bool = True):
        self._element_shape = as_shape(element_shape)
        self._dtype = _dt.as_dtype(dtype)
        self._dynamic_size = dynamic_size
        self._infer_shape = infer_shape

    @staticmethod
    def from_value(value: Any) -> "TensorArraySpec":
        """The spec of a TensorArray."""
        if not isinstance(value, TensorArray):
            raise ValueError(f"Expected value to be a TensorArray, but saw: "
                             f"{type(value)}")
        return TensorArraySpec(value.element_shape, value.dtype, value.dynamic_size,
                               getattr(value, "_infer_shape", True))

    @property
    def value_type(self) -> type:
        return TensorArray

    def _serialize(self) -> tuple[Any, ...]:
        return (self._element_shape, self._dtype, self._dynamic_size, self._infer_shape)



def type_spec_from_value(value: Any) -> TypeSpec:
    """The spec of ``value``: a TensorSpec for a tensor (or anything convertible to one,
    such as a numpy array or a nested list of numbers), a SparseTensorSpec,
    IndexedSlicesSpec or TensorArraySpec for those; TypeError otherwise."""
    if isinstance(value, Tensor):
        return TensorSpec(value.shape, value.dtype)
    if isinstance(value, (SparseTensor, SparseTensorValue)):
        return SparseTensorSpec.from_value(value)
    if isinstance(value, IndexedSlices):
        ds = value.dense_shape
        return IndexedSlicesSpec(value.values.shape if ds is None else
                                 _static_dense_shape(ds, value.values.shape),
                                 value.dtype, value.indices.dtype,
                                 None if ds is None else ds.dtype, value.indices.shape)
    if isinstance(value, TensorArray):
        return TensorArraySpec.from_value(value)
    if isinstance(value, np.ndarray):
        return TensorSpec(value.shape, _dt.as_dtype(value.dtype))
    try:
        t = convert_to_tensor(value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"Could not build a TypeSpec for {value!r} with type "
                        f"{type(value).__name__}") from e
    return TensorSpec(t.shape, t.dtype)


def _static_dense_shape(ds: Any, values_shape: TensorShape) -> TensorShape:
    v = constant_value(ds)
    if v is not None:
        return TensorShape([int(x) for x in np.asarray(v).reshape(-1)])
    if values_shape.ndims is not None:
        return TensorShape([None]).concatenate(values_shape[1:])
    return TensorShape(None)


for _n, _c in (("TypeSpec", TypeSpec), ("TensorSpec", TensorSpec),
               ("SparseTensorSpec", SparseTensorSpec),
               ("IndexedSlicesSpec", IndexedSlicesSpec),
               ("TensorArraySpec", TensorArraySpec)):
    ks.export(_n, _c)
ks.api("type_spec_from_value")(type_spec_from_value)
