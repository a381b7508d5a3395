"""``tf.IndexedSlices``: a sparse set of rows of a larger dense tensor.

The gradient of ``tf.gather`` (params side) is an IndexedSlices, as in TF 1.15: ``values``
holds the gathered rows' gradients, ``indices`` their row numbers in the dense tensor,
``dense_shape`` the dense tensor's shape. Optimizers apply such a gradient as a sparse
update; anything that wants a Tensor gets the dense sum of the rows
(``tf.convert_to_tensor`` densifies with ``UnsortedSegmentSum``, duplicate rows summed).
A session fetch of an IndexedSlices gives an :class:`IndexedSlicesValue`.
"""
from __future__ import annotations

import collections
import warnings
from typing import Any

import numpy as np

from ..base import dtypes as _dt
from ..base.tensor_shape import TensorShape, unknown_shape
from .graph import Tensor, api_function, convert_to_tensor, register_tensor_conversion_function

__all__ = ["IndexedSlices", "IndexedSlicesValue", "convert_to_tensor_or_indexed_slices",
           "as_indexed_slices", "as_indexed_slices_list", "densify"]

#: TF warns when densifying an IndexedSlices of at least this many elements
LARGE_SPARSE_NUM_ELEMENTS = 100000000


class IndexedSlicesValue(collections.namedtuple("IndexedSlicesValue",
                                                ["values", "indices", "dense_shape"])):
    """The fetched value of an :class:`IndexedSlices` (numpy ``values``, ``indices``,
    ``dense_shape``), as ``tf.IndexedSlicesValue``.

    ``np.asarray(value)`` gives the dense array (rows of duplicate indices summed), a
    flowrt convenience TF does not have.
    """

    __slots__ = ()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        values = np.asarray(self.values)
        if self.dense_shape is None:
            raise ValueError("An IndexedSlicesValue without dense_shape has no dense form")
        out = np.zeros(tuple(int(d) for d in np.asarray(self.dense_shape)), dtype=values.dtype)
        np.add.at(out, np.asarray(self.indices).astype(np.int64), values)
        return out if dtype is None else out.astype(dtype)


class IndexedSlices:
    """A sparse representation of a set of tensor slices at given indices
    (``tf.IndexedSlices``): the dense tensor has ``dense[indices[i], ...] = values[i, ...]``
    (duplicate indices add up).

    :param values: a Tensor of shape ``[D0, D1, ..., Dn]``
    :param indices: a 1-D integer Tensor of shape ``[D0]``
    :param dense_shape: a 1-D integer Tensor, the dense tensor's shape (may be None)
    """

    def __init__(self, values: Tensor, indices: Tensor, dense_shape: Tensor | None = None):
        self._values = values
        self._indices = indices
        self._dense_shape = dense_shape

    @property
    def values(self) -> Tensor:
        """The rows: a Tensor of shape ``[D0, D1, ..., Dn]``."""
        return self._values

    @property
    def indices(self) -> Tensor:
        """A 1-D Tensor of the rows' indices in the dense tensor."""
        return self._indices

    @property
    def dense_shape(self) -> Tensor | None:
        """A 1-D Tensor holding the dense tensor's shape (or None)."""
        return self._dense_shape

    @property
    def name(self) -> str:
        return self._values.name

    @property
    def device(self) -> str:
        return self._values.device

    @property
    def op(self) -> Any:
        """The Operation producing ``values``."""
        return self._values.op

    @property
    def dtype(self) -> _dt.DType:
        return self._values.dtype

    @property
    def graph(self) -> Any:
        return self._values.graph

    @property
    def shape(self) -> TensorShape:
        """The static shape of the dense tensor, as far as it is known (TF 2.x's
        property; like TF, there is no ``get_shape``)."""
        if self._dense_shape is None:
            return unknown_shape()
        known = _static_dense_shape(self._dense_shape)
        if known is not None:
            return known
        vals = self._values.shape
        n = self._dense_shape.shape.as_tuple()
        if n and n[0] is not None:
            if vals.ndims is not None and vals.ndims == n[0]:
                return TensorShape([None]).concatenate(vals[1:])
            return TensorShape([None] * n[0])
        return unknown_shape()

    def consumers(self) -> list[Any]:
        """The ops consuming any of the three component tensors."""
        out: list[Any] = []
        for t in self._components():
            for c in t.consumers():
                if c not in out:
                    out.append(c)
        return out

    def _components(self) -> list[Tensor]:
        parts = [self._values, self._indices]
        if self._dense_shape is not None:
            parts.append(self._dense_shape)
        return parts

    # the session's fetch protocol: fetched as its tensors and rebuilt
    def _fetch_components(self) -> list[Tensor]:
        return self._components()

    def _from_fetched(self, values: list[Any]) -> IndexedSlicesValue:
        return IndexedSlicesValue(values[0], values[1],
                                  values[2] if len(values) > 2 else None)

    def __str__(self) -> str:
        shape = f", dense_shape={self._dense_shape}" if self._dense_shape is not None else ""
        return f"IndexedSlices(indices={self._indices}, values={self._values}{shape})"

    def __repr__(self) -> str:
        return (f"<tf.IndexedSlices '{self.name}' dense_shape={self.shape} "
                f"dtype={self.dtype.name}>")

    def __neg__(self) -> "IndexedSlices":
        return IndexedSlices(-self._values, self._indices, self._dense_shape)


def _static_dense_shape(dense_shape: Tensor) -> TensorShape | None:
    """The shape a ``dense_shape`` tensor holds, when it is a constant or the ``Shape``
    (possibly cast) of a tensor whose static shape is known."""
    op = dense_shape.op
    while op.type in ("Cast", "Identity") and op.inputs:
        op = op.inputs[0].op
    if op.type == "Const":
        return TensorShape([int(d) for d in np.asarray(op.node_attrs["value"]).reshape(-1)])
    if op.type == "Shape":
        return op.inputs[0].shape
    return None


def densify(value: IndexedSlices, dtype: Any = None, name: str | None = None,
            as_ref: bool = False) -> Tensor:
    """The dense tensor of ``value`` (``tf.convert_to_tensor`` of an IndexedSlices): an
    ``UnsortedSegmentSum`` of the rows into ``dense_shape[0]`` segments.

    :raises ValueError: for an incompatible ``dtype`` or a missing ``dense_shape``
    """
    del as_ref
    if dtype is not None and not _dt.as_dtype(dtype).is_compatible_with(value.dtype):
        raise ValueError(f"Tensor conversion requested dtype {_dt.as_dtype(dtype).name} for "
                         f"IndexedSlices with dtype {value.dtype.name}: {value}")
    if value.dense_shape is None:
        raise ValueError("Tensor conversion requested for IndexedSlices without "
                         f"dense_shape: {value}")
    static = _static_dense_shape(value.dense_shape)
    if static is not None and static.is_fully_defined():
        n = static.num_elements()
        if n is not None and n >= LARGE_SPARSE_NUM_ELEMENTS:
            warnings.warn(f"Converting sparse IndexedSlices to a dense Tensor with {n} "
                          "elements. This may consume a large amount of memory.",
                          stacklevel=3)
    elif value.dense_shape.op.type != "VariableShape":
        warnings.warn(f"Converting sparse IndexedSlices to a dense Tensor of unknown shape. "
                      "This may consume a large amount of memory.", stacklevel=3)
    with value.graph.as_default():
        return api_function("math.unsorted_segment_sum")(
            value.values, value.indices, value.dense_shape[0], name=name)


register_tensor_conversion_function(IndexedSlices, densify)


def convert_to_tensor_or_indexed_slices(value: Any, dtype: Any = None,
                                        name: str | None = None) -> Any:
    """``value`` unchanged if it is an IndexedSlices (or another composite tensor with
    its own fetch protocol, such as a SparseTensor), else ``convert_to_tensor(value)``.

    :raises ValueError: when ``dtype`` differs from the IndexedSlices' dtype
    """
    if isinstance(value, IndexedSlices) or (
            hasattr(value, "_fetch_components") and not isinstance(value, Tensor)
            and not hasattr(value, "_as_graph_element")):
        if dtype is not None and not _dt.as_dtype(dtype).is_compatible_with(value.dtype):
            raise ValueError(f"Tensor conversion requested dtype {_dt.as_dtype(dtype).name} "
                             f"for Tensor with dtype {value.dtype.name}: {value!r}")
        return value
    return convert_to_tensor(value, dtype=dtype, name=name)


def as_indexed_slices(x: Any, optimize: bool = True) -> IndexedSlices:
    """``x`` as an IndexedSlices: a dense tensor becomes all its rows.

    :raises TypeError: for anything but a Tensor or IndexedSlices
    """
    if isinstance(x, IndexedSlices):
        return x
    if not isinstance(x, Tensor):
        raise TypeError(f"Not a Tensor or IndexedSlices: {type(x)}")
    with x.graph.as_default():
        shape = api_function("shape")(x)
        return IndexedSlices(x, api_function("range")(0, shape[0]), shape)


def as_indexed_slices_list(inputs: Any, optimize: bool = True) -> list[IndexedSlices]:
    """Every element as an IndexedSlices, their indices all int64 if any is (TF's
    ``_as_indexed_slices_list``).

    :raises TypeError: if ``inputs`` is not a list or tuple
    """
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"Expected a list or tuple, not {type(inputs)}")
    outputs = [as_indexed_slices(i, optimize=optimize) for i in inputs]
    with_int32 = [o for o in outputs if o.indices.dtype.base_dtype is _dt.int32]
    if not with_int32 or len(with_int32) == len(outputs):
        return outputs
    cast = api_function("cast")
    return [IndexedSlices(o.values, cast(o.indices, _dt.int64), o.dense_shape)
            if o.indices.dtype.base_dtype is _dt.int32 else o for o in outputs]
