"""``tf.SparseTensor`` and ``tf.SparseTensorValue``.

A :class:`SparseTensor` is three dense tensors of one graph: ``indices`` (int64
``[N, rank]``), ``values`` (``[N]``) and ``dense_shape`` (int64 ``[rank]``). It is fed and
fetched through the session's component protocol: ``sess.run(sp)`` runs its three
tensors and returns a :class:`SparseTensorValue`; a feed key that is a SparseTensor
(``tf.sparse_placeholder``) takes a SparseTensorValue or an ``(indices, values,
dense_shape)`` tuple. The ops on sparse tensors (``tf.sparse.*``) come from kernel sets.
"""
from __future__ import annotations

import collections
from typing import Any, Callable

import numpy as np

from ..base import dtypes as _dt
from ..base.tensor_shape import TensorShape, as_shape, unknown_shape
from .graph import Graph, Operation, Tensor, convert_to_tensor, name_scope
from .session import _default_session_for

__all__ = ["SparseTensor", "SparseTensorValue", "is_sparse",
           "convert_to_tensor_or_sparse_tensor", "constant_value_as_shape"]

#: The value of a fetched :class:`SparseTensor` (TF's namedtuple).
SparseTensorValue = collections.namedtuple("SparseTensorValue",
                                           ["indices", "values", "dense_shape"])


def _const_value(t: Tensor) -> np.ndarray | None:
    """The value of ``t`` when the graph fixes it: a ``Const``, or an ``Identity`` or
    ``Cast`` of one (the cases a sparse tensor's ``dense_shape`` takes)."""
    op = t.op
    if op.type == "Const":
        return np.asarray(op.node_attrs["value"])
    if op.type in ("Identity", "StopGradient", "Cast") and op.inputs:
        v = _const_value(op.inputs[0])
        return None if v is None else v.astype(t.dtype.base_dtype.np)
    return None


def constant_value_as_shape(t: Tensor) -> TensorShape:
    """The static shape a 1-D shape tensor ``t`` describes, as TF's
    ``tensor_util.constant_value_as_shape``: its entries where they are constants
    (``-1`` is unknown), else a shape of unknown dims of ``t``'s length."""
    v = _const_value(t)
    if v is not None and v.ndim == 1:
        return TensorShape([int(d) if d >= 0 else None for d in v.tolist()])
    op = t.op
    if op.type == "Pack" and op.inputs:
        dims = []
        for x in op.inputs:
            c = _const_value(x)
            dims.append(int(c) if c is not None and c.ndim == 0 and int(c) >= 0 else None)
        return TensorShape(dims)
    if op.type == "Shape" and op.inputs:
        return op.inputs[0].shape
    if op.type == "ConcatV2" and op.inputs:
        out = TensorShape([])
        for x in op.inputs[:-1]:
            part = constant_value_as_shape(x)
            if part.ndims is None:
                return unknown_shape(_length(t))
            out = out.concatenate(part)
        return out
    if op.type == "StridedSlice" and _simple_slice(op):
        whole = constant_value_as_shape(op.inputs[0])
        if whole.ndims is not None:
            b, e, s = (int(_const_value(x)[0]) for x in op.inputs[1:4])
            b = None if op.node_attrs.get("begin_mask", 0) & 1 else b
            e = None if op.node_attrs.get("end_mask", 0) & 1 else e
            return TensorShape(whole.as_list()[b:e:s])
    return unknown_shape(_length(t))


def _length(t: Tensor) -> int | None:
    return t.shape.as_list()[0] if t.shape.ndims == 1 else None


def _simple_slice(op: Operation) -> bool:
    """A 1-D StridedSlice with constant bounds and no ellipsis, new or shrunk axes."""
    if any(op.node_attrs.get(m, 0) for m in ("ellipsis_mask", "new_axis_mask",
                                             "shrink_axis_mask")):
        return False
    vals = [_const_value(x) for x in op.inputs[1:4]]
    return all(v is not None and v.shape == (1,) for v in vals)


class SparseTensor:
    """A sparse tensor as three dense tensors (``tf.SparseTensor``)::

        sp = tf.SparseTensor(indices=[[0, 0], [1, 2]], values=[1, 2], dense_shape=[3, 4])

    stands for ``[[1, 0, 0, 0], [0, 0, 2, 0], [0, 0, 0, 0]]``. Indices should be in
    row-major order (``tf.sparse.reorder`` sorts them); most ops assume it.
    """

    @classmethod
    def from_value(cls, sparse_tensor_value: Any) -> "SparseTensor":
        """A SparseTensor of the components of a SparseTensor or SparseTensorValue."""
        if not is_sparse(sparse_tensor_value):
            raise TypeError(f"Neither a SparseTensor nor SparseTensorValue: "
                            f"{sparse_tensor_value}.")
        return SparseTensor(indices=sparse_tensor_value.indices,
                            values=sparse_tensor_value.values,
                            dense_shape=sparse_tensor_value.dense_shape)

    def __init__(self, indices: Any, values: Any, dense_shape: Any):
        """Convert the three components to tensors (in a ``SparseTensor`` name scope).

        :raises ValueError: when ``indices`` is not 2-D, ``values`` or ``dense_shape``
            not 1-D, or their static sizes disagree
        """
        with name_scope(None, "SparseTensor", [indices, values, dense_shape]):
            indices = convert_to_tensor(indices, name="indices", dtype=_dt.int64)
            values = convert_to_tensor(values, name="values")
            dense_shape = convert_to_tensor(dense_shape, name="dense_shape", dtype=_dt.int64)
        self._indices = indices
        self._values = values
        self._dense_shape = dense_shape
        self._dense_shape_default = constant_value_as_shape(dense_shape)
        ishape = indices.shape.with_rank(2)
        vshape = values.shape.with_rank(1)
        dshape = dense_shape.shape.with_rank(1)
        ishape.dims[0].assert_is_compatible_with(vshape.dims[0])
        ishape.dims[1].assert_is_compatible_with(dshape.dims[0])

    @property
    def indices(self) -> Tensor:
        """int64 ``[N, rank]``: the positions of the values."""
        return self._indices

    @property
    def values(self) -> Tensor:
        """``[N]``: the values."""
        return self._values

    @property
    def dense_shape(self) -> Tensor:
        """int64 ``[rank]``: the shape of the dense tensor."""
        return self._dense_shape

    @property
    def op(self) -> Operation:
        """The operation producing ``values``."""
        return self._values.op

    @property
    def dtype(self) -> _dt.DType:
        return self._values.dtype

    @property
    def graph(self) -> Graph:
        return self._indices.graph

    @property
    def shape(self) -> TensorShape:
        """The static shape of the dense tensor."""
        return self._dense_shape_default

    def get_shape(self) -> TensorShape:
        return self._dense_shape_default

    def set_shape(self, shape: Any) -> None:
        """Merge ``shape`` into the static shape; ValueError if incompatible."""
        self._dense_shape_default = self._dense_shape_default.merge_with(as_shape(shape))

    def with_values(self, new_values: Any) -> "SparseTensor":
        """The same indices and dense shape with other values."""
        return SparseTensor(self._indices, new_values, self._dense_shape)

    def eval(self, feed_dict: Any = None, session: Any = None) -> SparseTensorValue:
        """Run the three components in ``session`` (default: the default session)."""

        return _default_session_for(self.graph, session).run(self, feed_dict)

    # -- the session's component protocol ----------------------------------------------
    def _fetch_components(self) -> list[Tensor]:
        return [self._indices, self._values, self._dense_shape]

    def _from_fetched(self, values: list[Any]) -> SparseTensorValue:
        return SparseTensorValue(*values)

    def _feed_components(self) -> list[Tensor]:
        return [self._indices, self._values, self._dense_shape]

    def _split_feed(self, value: Any) -> list[Any]:
        """A fed value as its three components: a SparseTensorValue (or anything with
        ``indices``, ``values`` and ``dense_shape``) or a 3-tuple."""
        if all(hasattr(value, a) for a in ("indices", "values", "dense_shape")) and \
                not isinstance(value, (Tensor, SparseTensor)):
            return [value.indices, value.values, value.dense_shape]
        if isinstance(value, (tuple, list)) and len(value) == 3:
            return list(value)
        raise TypeError(f"The value fed to a SparseTensor must be a SparseTensorValue or an "
                        f"(indices, values, dense_shape) tuple, got {type(value).__name__}: "
                        f"{value!r}")

    @staticmethod
    def _override_operator(operator: str, func: Callable[..., Any]) -> None:
        """Set a Python operator of SparseTensor (``__mul__`` ...), as kernel sets do."""
        if not (operator.startswith("__") and operator.endswith("__")):
            raise ValueError(f"Overriding {operator} is disallowed")
        setattr(SparseTensor, operator, func)

    def __repr__(self) -> str:
        return (f"SparseTensor(indices={self._indices}, values={self._values}, "
                f"dense_shape={self._dense_shape})")

    __str__ = __repr__


def is_sparse(x: Any) -> bool:
    """Whether ``x`` is a SparseTensor or a SparseTensorValue."""
    return isinstance(x, (SparseTensor, SparseTensorValue))


def convert_to_tensor_or_sparse_tensor(value: Any, dtype: Any = None,
                                       name: str | None = None) -> Any:
    """``value`` as a SparseTensor (from a SparseTensorValue) or a Tensor.

    :raises RuntimeError: if a sparse ``value``'s dtype is not ``dtype``
    """
    if dtype is not None:
        dtype = _dt.as_dtype(dtype)
    if isinstance(value, SparseTensorValue):
        value = SparseTensor.from_value(value)
    if isinstance(value, SparseTensor):
        if dtype is not None and not dtype.is_compatible_with(value.dtype):
            raise RuntimeError(f"Sparse dtype: requested = {dtype}, actual = {value.dtype}")
        return value
    return convert_to_tensor(value, dtype=dtype, name=name)
