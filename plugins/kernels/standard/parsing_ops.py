"""``tf.train.Example`` parsing: ``tf.parse_example``, ``parse_single_example``,
``parse_single_sequence_example`` (also under ``tf.io``), the feature configurations
``FixedLenFeature``, ``VarLenFeature``, ``FixedLenSequenceFeature``, ``SparseFeature``,
``parse_sequence_example`` (a batch of SequenceExamples) and ``decode_json_example``.

Ops (TF 1.15's): ParseExample, ParseSingleExample, ParseSingleSequenceExample,
ParseSequenceExample, DecodeJSONExample. ParseExample/ParseSingleExample read the
requested features of a batch straight from the wire format (:mod:`.example_decoder`,
vectorised numpy), or with the protobuf runtime (:mod:`flowrt.proto.example_pb2`) for a
small batch or one holding anything unusual, and fill numpy arrays from the per-feature
columns; the SequenceExample ops parse with protobuf. A missing required
feature, a wrong number of values or a wrong type is an ``InvalidArgumentError`` with
TF's message (naming the example and the feature key).
"""
from __future__ import annotations

import collections
from itertools import chain
from operator import attrgetter
from typing import Any, Sequence

import numpy as np
from google.protobuf import json_format

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.graph import Tensor, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.proto import example_pb2
from flowrt.framework.sparse_tensor import SparseTensor
from flowrt.tensor_shape import TensorShape, as_shape, unknown_shape

from ._common import invalid, ks, unchanged_shape
from .example_decoder import KIND_CODE, NONE, Column, decode_columns, proto_columns
from .sparse_ops import sparse_merge

__all__ = ["FixedLenFeature", "VarLenFeature", "FixedLenSequenceFeature", "SparseFeature",
           "parse_example", "parse_single_example", "parse_single_sequence_example",
           "parse_sequence_example",
           "decode_json_example"]

_TYPES = "{float, int64, string}"
#: the Feature oneof field holding each dtype's values, and TF's name of the dtype
_KIND = {_dt.float32: "float_list", _dt.int64: "int64_list", _dt.string: "bytes_list"}
_KIND_NAME = {"float_list": "float", "int64_list": "int64", "bytes_list": "string"}
#: a kind code of :mod:`.example_decoder` -> the Feature oneof field
_KIND_OF = {c: k for k, c in KIND_CODE.items() if k is not None}
#: the smallest batch decoded from the wire format (a smaller one: protobuf is quicker)
_FAST_MIN = 8


# =======================================================================================
# feature configurations
# =======================================================================================
class VarLenFeature(collections.namedtuple("VarLenFeature", ["dtype"])):
    """A variable-length feature, parsed to a ``SparseTensor``."""

    __slots__ = ()


class FixedLenFeature(collections.namedtuple("FixedLenFeature",
                                             ["shape", "dtype", "default_value"])):
    """A fixed-length feature of ``shape``, parsed to a dense tensor; without a
    ``default_value`` it is required."""

    __slots__ = ()

    def __new__(cls, shape: Any, dtype: Any, default_value: Any = None) -> FixedLenFeature:
        return super().__new__(cls, shape, dtype, default_value)


class FixedLenSequenceFeature(collections.namedtuple(
        "FixedLenSequenceFeature", ["shape", "dtype", "allow_missing", "default_value"])):
    """A sequence of values each of ``shape``, parsed to a dense tensor of
    ``[steps] + shape`` (padded with ``default_value`` across a batch)."""

    __slots__ = ()

    def __new__(cls, shape: Any, dtype: Any, allow_missing: bool = False,
                default_value: Any = None) -> FixedLenSequenceFeature:
        return super().__new__(cls, shape, dtype, allow_missing, default_value)


class SparseFeature(collections.namedtuple(
        "SparseFeature", ["index_key", "value_key", "dtype", "size", "already_sorted"])):
    """A sparse feature built from an index feature (or several) and a value feature,
    parsed to a ``SparseTensor`` of dense shape ``[batch, size]``."""

    __slots__ = ()

    def __new__(cls, index_key: Any, value_key: str, dtype: Any, size: Any,
                already_sorted: bool = False) -> SparseFeature:
        return super().__new__(cls, index_key, value_key, dtype, size, already_sorted)


# =======================================================================================
# ops
# =======================================================================================
def _dense_out_shape(batch: list[int | None], shape: Any) -> TensorShape:
    s = as_shape(shape)
    return TensorShape(batch + (s.as_list() if s.ndims is not None else []))


def _parse_example_shape(op: Any) -> list[TensorShape]:
    ns = op.get_attr("Nsparse")
    d = op.inputs[0].shape
    if d.ndims is not None and d.ndims != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {d.ndims} for '{op.name}' "
                         f"(op: '{op.type}') with input shapes: {d}.")
    batch = [d.as_list()[0] if d.ndims == 1 else None]
    return ([TensorShape([None, 2])] * ns + [TensorShape([None])] * ns
            + [TensorShape([2])] * ns
            + [_dense_out_shape(batch, s) for s in op.get_attr("dense_shapes")])


def _parse_single_shape(op: Any) -> list[TensorShape]:
    ns = op.get_attr("num_sparse")
    return ([TensorShape([None, 1])] * ns + [TensorShape([None])] * ns
            + [TensorShape([1])] * ns
            + [_dense_out_shape([], s) for s in op.get_attr("dense_shapes")])


def _parse_sequence_shape(op: Any) -> list[TensorShape]:
    nc, nf = op.get_attr("Ncontext_sparse"), op.get_attr("Nfeature_list_sparse")
    return ([TensorShape([None, 1])] * nc + [TensorShape([None])] * nc
            + [TensorShape([1])] * nc
            + [_dense_out_shape([], s) for s in op.get_attr("context_dense_shapes")]
            + [TensorShape([None, 2])] * nf + [TensorShape([None])] * nf
            + [TensorShape([2])] * nf
            + [_dense_out_shape([None], s)
               for s in op.get_attr("feature_list_dense_shapes")])


def _parse_sequence_batch_shape(op: Any) -> list[TensorShape]:
    nc, nf = op.get_attr("Ncontext_sparse"), op.get_attr("Nfeature_list_sparse")
    nfd = op.get_attr("Nfeature_list_dense")
    d = op.inputs[0].shape
    if d.ndims is not None and d.ndims != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {d.ndims} for '{op.name}' "
                         f"(op: '{op.type}') with input shapes: {d}.")
    batch = [d.as_list()[0] if d.ndims == 1 else None]
    return ([TensorShape([None, 2])] * nc + [TensorShape([None])] * nc
            + [TensorShape([2])] * nc
            + [_dense_out_shape(batch, s) for s in op.get_attr("context_dense_shapes")]
            + [TensorShape([None, 3])] * nf + [TensorShape([None])] * nf
            + [TensorShape([3])] * nf
            + [_dense_out_shape(batch + [None], s)
               for s in op.get_attr("feature_list_dense_shapes")]
            + [TensorShape(batch)] * nfd)


ks.op(OpDef("ParseExample",
            inputs=["serialized: string", "names: string", "sparse_keys: Nsparse * string",
                    "dense_keys: Ndense * string", "dense_defaults: Tdense"],
            outputs=["sparse_indices: Nsparse * int64", "sparse_values: sparse_types",
                     "sparse_shapes: Nsparse * int64", "dense_values: Tdense"],
            attrs=["Nsparse: int >= 0", "Ndense: int >= 0",
                   f"sparse_types: list({_TYPES}) >= 0",
                   f"Tdense: list({_TYPES}) >= 0", "dense_shapes: list(shape) >= 0"],
            shape_fn=_parse_example_shape,
            doc="Parses a batch of serialized Example protos into tensors."),
      OpDef("ParseSingleExample",
            inputs=["serialized: string", "dense_defaults: Tdense"],
            outputs=["sparse_indices: num_sparse * int64", "sparse_values: sparse_types",
                     "sparse_shapes: num_sparse * int64", "dense_values: Tdense"],
            attrs=["num_sparse: int >= 0", "sparse_keys: list(string) >= 0",
                   "dense_keys: list(string) >= 0",
                   f"sparse_types: list({_TYPES}) >= 0",
                   f"Tdense: list({_TYPES}) >= 0", "dense_shapes: list(shape) >= 0"],
            shape_fn=_parse_single_shape,
            doc="Parses one serialized Example proto into tensors."),
      OpDef("ParseSingleSequenceExample",
            inputs=["serialized: string", "feature_list_dense_missing_assumed_empty: string",
                    "context_sparse_keys: Ncontext_sparse * string",
                    "context_dense_keys: Ncontext_dense * string",
                    "feature_list_sparse_keys: Nfeature_list_sparse * string",
                    "feature_list_dense_keys: Nfeature_list_dense * string",
                    "context_dense_defaults: Tcontext_dense", "debug_name: string"],
            outputs=["context_sparse_indices: Ncontext_sparse * int64",
                     "context_sparse_values: context_sparse_types",
                     "context_sparse_shapes: Ncontext_sparse * int64",
                     "context_dense_values: Tcontext_dense",
                     "feature_list_sparse_indices: Nfeature_list_sparse * int64",
                     "feature_list_sparse_values: feature_list_sparse_types",
                     "feature_list_sparse_shapes: Nfeature_list_sparse * int64",
                     "feature_list_dense_values: feature_list_dense_types"],
            attrs=["Ncontext_sparse: int >= 0 = 0", "Ncontext_dense: int >= 0 = 0",
                   "Nfeature_list_sparse: int >= 0 = 0",
                   "Nfeature_list_dense: int >= 0 = 0",
                   f"context_sparse_types: list({_TYPES}) >= 0 = []",
                   f"Tcontext_dense: list({_TYPES}) >= 0 = []",
                   f"feature_list_dense_types: list({_TYPES}) >= 0 = []",
                   "context_dense_shapes: list(shape) >= 0 = []",
                   f"feature_list_sparse_types: list({_TYPES}) >= 0 = []",
                   "feature_list_dense_shapes: list(shape) >= 0 = []"],
            shape_fn=_parse_sequence_shape,
            doc="Parses one serialized SequenceExample proto into tensors."),
      OpDef("ParseSequenceExample",
            inputs=["serialized: string", "debug_name: string",
                    "context_dense_defaults: Tcontext_dense"],
            outputs=["context_sparse_indices: Ncontext_sparse * int64",
                     "context_sparse_values: context_sparse_types",
                     "context_sparse_shapes: Ncontext_sparse * int64",
                     "context_dense_values: Tcontext_dense",
                     "feature_list_sparse_indices: Nfeature_list_sparse * int64",
                     "feature_list_sparse_values: feature_list_sparse_types",
                     "feature_list_sparse_shapes: Nfeature_list_sparse * int64",
                     "feature_list_dense_values: feature_list_dense_types",
                     "feature_list_dense_lengths: Nfeature_list_dense * int64"],
            attrs=["feature_list_dense_missing_assumed_empty: list(string) >= 0",
                   "context_sparse_keys: list(string) >= 0",
                   "context_dense_keys: list(string) >= 0",
                   "feature_list_sparse_keys: list(string) >= 0",
                   "feature_list_dense_keys: list(string) >= 0",
                   "Ncontext_sparse: int >= 0 = 0", "Ncontext_dense: int >= 0 = 0",
                   "Nfeature_list_sparse: int >= 0 = 0",
                   "Nfeature_list_dense: int >= 0 = 0",
                   f"context_sparse_types: list({_TYPES}) >= 0 = []",
                   f"Tcontext_dense: list({_TYPES}) >= 0 = []",
                   f"feature_list_dense_types: list({_TYPES}) >= 0 = []",
                   "context_dense_shapes: list(shape) >= 0 = []",
                   f"feature_list_sparse_types: list({_TYPES}) >= 0 = []",
                   "feature_list_dense_shapes: list(shape) >= 0 = []"],
            shape_fn=_parse_sequence_batch_shape,
            doc="Parses a batch of serialized SequenceExample protos into tensors."),
      OpDef("DecodeJSONExample", inputs=["json_examples: string"],
            outputs=["binary_examples: string"], shape_fn=unchanged_shape,
            doc="Converts Example protos in JSON to binary protos."))
ks.not_differentiable("ParseExample", "ParseSingleExample", "ParseSingleSequenceExample",
                      "ParseSequenceExample", "DecodeJSONExample")


# =======================================================================================
# kernels
# =======================================================================================
def _str(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _fmt_shape(dims: Sequence[int | None]) -> str:
    return "[" + ",".join("?" if d is None or d < 0 else str(int(d)) for d in dims) + "]"


def _dims(shape: Any) -> list[int | None]:
    s = as_shape(shape)
    return [None if d is None or d < 0 else int(d) for d in s.as_list()]


def _np_dtype(dt: _dt.DType) -> Any:
    return object if dt is _dt.string else dt.np


def _values(feature: Any, kind: str) -> Any:
    return getattr(feature, kind).value


class _Dense:
    """How one dense output is filled: its key, dtype, shape and default."""

    def __init__(self, key: str, dtype: _dt.DType, shape: Any, default: Any):
        self.key = key
        self.dtype = dtype
        self.kind = _KIND[dtype]
        self.dims = _dims(shape)
        self.variable = bool(self.dims) and self.dims[0] is None
        self.row = int(np.prod(self.dims[1:] if self.variable else self.dims, dtype=np.int64))
        default = np.asarray(default, dtype=_np_dtype(dtype))
        self.required = default.size == 0
        self.default = default.reshape(-1)
        self.shape_text = _fmt_shape(self.dims)


_FEATURES = attrgetter("features.feature")


def _name(names: list[str], i: int) -> str:
    return names[i] if names else "<unknown>"


def _parse_protos(serialized: np.ndarray, cls: Any) -> list[Any]:
    """Each element of ``serialized`` parsed as a ``cls`` proto (TF's message for one that
    does not parse)."""
    items = serialized.reshape(-1).tolist()
    try:
        return list(map(cls.FromString, items))
    except Exception:  # noqa: BLE001 -- find the element that does not parse
        pass
    out = []
    for s in items:
        try:
            out.append(cls.FromString(s.encode() if isinstance(s, str) else s))
        except Exception:  # noqa: BLE001 -- any protobuf decode error is bad input
            raise invalid(f"Could not parse example input, value: '{_str(s)}'") from None
    return out


def _fill_dense(col: Column, n: int, d: _Dense, names: list[str], single: bool
                ) -> np.ndarray:
    """The dense output for ``d`` from its column over a batch of ``n`` examples (or
    one): the values as they are when every example has the expected count, else each
    example with another count looked at alone, for its default or TF's error."""
    row, lens = d.row, col.lens
    if d.variable:
        if row:
            bad = np.flatnonzero((lens == 0) | (lens % row != 0))
            for i, got in zip(bad.tolist(), col.kinds_at(bad).tolist()):
                if got != NONE:
                    _dense_error(d, _KIND_OF[got], int(lens[i]), names, i, single)
        return _stack_variable(col, d, single)
    shape = ([] if single else [n]) + d.dims
    bad = np.flatnonzero(lens != row)
    if not len(bad):
        return col.values.reshape(shape)
    for i, got in zip(bad.tolist(), col.kinds_at(bad).tolist()):
        if got != NONE:
            _dense_error(d, _KIND_OF[got], int(lens[i]), names, i, single)
        elif d.required:
            pre = "" if single else f"Name: {_name(names, i)}, "
            raise invalid(f"{pre}Feature: {d.key} (data type: {_KIND_NAME[d.kind]}) is "
                          "required but could not be found.")
    out = np.empty((n, row), dtype=_np_dtype(d.dtype))
    out[lens == row] = col.values.reshape(-1, row)
    out[bad] = d.default
    return out.reshape(shape)


def _dense_error(d: _Dense, got: str, n: int, names: list[str], i: int,
                 single: bool) -> None:
    """Raise TF's error for feature values of the wrong kind or count (returns for a
    variable-length feature of the right kind with no values)."""
    want = _KIND_NAME[d.kind]
    where = (("" if single else f"Name: {_name(names, i)}, ") + f"Key: {d.key}"
             + ("" if single else f", Index: {i}") + ".  ")
    if got != d.kind:
        raise invalid(where + f"Data types don't match. Data type: {_KIND_NAME[got]} "
                      f"but expected type: {want}")
    if d.variable:
        if n == 0:
            return
        raise invalid(where + f"Number of {want} values is not a multiple of stride "
                      f"length. Saw {n} values but output shape is: {d.shape_text}")
    raise invalid(where + f"Number of {want} values != expected.  Values size: {n} but "
                  f"output shape: {d.shape_text}")


def _stack_variable(col: Column, d: _Dense, single: bool) -> np.ndarray:
    """Rows of values of a variable-length dense feature, padded to the longest."""
    lens, b = col.lens, len(col.lens)
    steps = int((lens // d.row).max()) if d.row and b else 0
    pad = d.default[0] if d.default.size else (b"" if d.dtype is _dt.string else 0)
    out = np.full((b, steps * d.row), pad, dtype=_np_dtype(d.dtype))
    if d.row and len(col.values):
        at = np.arange(len(col.values), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens,
                                                                    lens)
        out[np.repeat(np.arange(b), lens), at] = col.values
    return out.reshape(([] if single else [b]) + [steps] + d.dims[1:])


def _fill_sparse(col: Column, key: str, dtype: _dt.DType, names: list[str],
                 single: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indices, values, dense_shape) of a VarLenFeature from its column over a batch
    (one example: indices ``[N, 1]``)."""
    kind = _KIND[dtype]
    empty = np.flatnonzero(col.lens == 0)
    got = col.kinds_at(empty)
    wrong = np.flatnonzero((got != NONE) & (got != KIND_CODE[kind]))
    if len(wrong):
        i = int(empty[wrong[0]])
        pre = "" if single else f"Name: {_name(names, i)}, "
        idx = "" if single else f", Index: {i}"
        raise invalid(f"{pre}Key: {key}{idx}.  Data types don't match. Expected "
                      f"type: {_KIND_NAME[kind]}, Actual type: "
                      f"{_KIND_NAME[_KIND_OF[int(got[wrong[0]])]]}")
    return _sparse_arrays(col.lens, col.values, dtype, single)


def _sparse_arrays(lens: Any, flat: Any, dtype: _dt.DType, single: bool
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SparseTensor components for rows of ``lens`` values (``flat`` in row order)."""
    n = np.asarray(lens, dtype=np.int64)
    total = int(n.sum())
    values = (flat if isinstance(flat, np.ndarray) else
              np.array(flat, dtype=_np_dtype(dtype))).reshape(total)
    row = np.repeat(np.arange(len(n), dtype=np.int64), n)
    starts = np.cumsum(n) - n
    col = np.arange(total, dtype=np.int64) - np.repeat(starts, n)
    width = int(n.max()) if len(n) else 0
    if single:
        return col.reshape(total, 1), values, np.array([width], dtype=np.int64)
    return (np.stack([row, col], axis=1).reshape(total, 2), values,
            np.array([len(n), width], dtype=np.int64))


def _columns(ser: np.ndarray, specs: list[tuple[str, int]]) -> list[Column]:
    """The columns of ``specs`` over the serialized Examples ``ser``: decoded from the
    wire format for a batch of :data:`_FAST_MIN` or more, else (or when the batch holds
    anything unusual) parsed with protobuf."""
    items = ser.reshape(-1).tolist()
    cols = decode_columns(items, specs) if len(items) >= _FAST_MIN else None
    if cols is None:
        cols = proto_columns(list(map(_FEATURES, _parse_protos(ser, example_pb2.Example))),
                             specs)
    return cols


def _outputs(values: list[Any]) -> Any:
    """A kernel's result: the one value of a node with one output, else the list."""
    return values[0] if len(values) == 1 else values


def _keys(arrays: Sequence[Any]) -> list[str]:
    return [_str(np.asarray(k).item()) for k in arrays]


def _batch_inputs(serialized: Any, names: Any, what: str) -> tuple[np.ndarray, list[str]]:
    """A batched parse's serialized vector and its example names (``what``: the input's
    name in TF's messages), checked as TF's kernels check them."""
    ser = np.asarray(serialized)
    if ser.ndim != 1:
        raise invalid(f"Expected serialized to be a vector, got shape: {list(ser.shape)}")
    nm = [_str(v) for v in np.asarray(names).reshape(-1).tolist()]
    if nm and len(nm) != ser.size:
        raise invalid(f"Expected len({what}) == len(serialized), but got: {len(nm)} vs. "
                      f"{ser.size}")
    return ser, nm


@ks.kernel("ParseExample", device_type="CPU")
def _parse_example_kernel(ctx: Any) -> Any:
    ns, nd = ctx.attrs["Nsparse"], ctx.attrs["Ndense"]
    stypes = [_dt.as_dtype(t) for t in ctx.attrs["sparse_types"]]
    dtypes = [_dt.as_dtype(t) for t in ctx.attrs["Tdense"]]
    shapes = ctx.attrs["dense_shapes"]

    def compute(serialized: Any, names: Any, *rest: Any) -> Any:
        ser, nm = _batch_inputs(serialized, names, "names")
        skeys, dkeys, defaults = _keys(rest[:ns]), _keys(rest[ns:ns + nd]), rest[ns + nd:]
        cols = _columns(ser, [(k, KIND_CODE[_KIND[t]]) for k, t in
                              chain(zip(skeys, stypes), zip(dkeys, dtypes))])
        n = ser.size
        sparse = [_fill_sparse(c, k, t, nm, False) for c, k, t in zip(cols, skeys, stypes)]
        dense = [_fill_dense(c, n, _Dense(k, t, s, dv), nm, False)
                 for c, k, t, s, dv in zip(cols[ns:], dkeys, dtypes, shapes, defaults)]
        return _outputs([s[0] for s in sparse] + [s[1] for s in sparse]
                        + [s[2] for s in sparse] + dense)

    return compute


@ks.kernel("ParseSingleExample", device_type="CPU")
def _parse_single_example_kernel(ctx: Any) -> Any:
    skeys = [_str(k) for k in ctx.attrs["sparse_keys"]]
    dkeys = [_str(k) for k in ctx.attrs["dense_keys"]]
    stypes = [_dt.as_dtype(t) for t in ctx.attrs["sparse_types"]]
    dtypes = [_dt.as_dtype(t) for t in ctx.attrs["Tdense"]]
    shapes = ctx.attrs["dense_shapes"]
    specs = [(k, KIND_CODE[_KIND[t]]) for k, t in chain(zip(skeys, stypes),
                                                         zip(dkeys, dtypes))]

    def compute(serialized: Any, *defaults: Any) -> Any:
        ser = np.asarray(serialized)
        if ser.ndim != 0:
            raise invalid(f"Expected serialized to be a scalar, got shape: "
                          f"{list(ser.shape)}")
        cols = _columns(ser, specs)
        sparse = [_fill_sparse(c, k, t, [], True) for c, k, t in zip(cols, skeys, stypes)]
        dense = [_fill_dense(c, 1, _Dense(k, t, s, dv), [], True)
                 for c, k, t, s, dv in zip(cols[len(skeys):], dkeys, dtypes, shapes,
                                           defaults)]
        return _outputs([s[0] for s in sparse] + [s[1] for s in sparse]
                        + [s[2] for s in sparse] + dense)

    return compute


def _sequence_dense(flists: Any, key: str, dtype: _dt.DType, shape: Any,
                    may_miss: bool, name: str) -> np.ndarray:
    """``[steps] + shape`` values of one FixedLenSequenceFeature of a SequenceExample."""
    dims = _dims(shape)
    row = int(np.prod(dims, dtype=np.int64))
    kind, want = _KIND[dtype], _KIND_NAME[_KIND[dtype]]
    if key not in flists:
        if not may_miss:
            raise invalid(f"Name: {name}, Feature list '{key}' is required but could not be "
                          "found.  Did you mean to include it in "
                          "feature_list_dense_missing_assumed_empty or "
                          "feature_list_dense_defaults?")
        return np.zeros([0] + dims, dtype=_np_dtype(dtype))
    steps = flists[key].feature
    out = np.empty((len(steps), row), dtype=_np_dtype(dtype))
    for t, f in enumerate(steps):
        got = f.WhichOneof("kind")
        if got != kind:
            raise invalid(f"Name: {name}, Feature list: {key}, Index: {t}.  Data types "
                          f"don't match. Expected type: {want}")
        vals = _values(f, kind)
        if len(vals) != row:
            raise invalid(f"Name: {name}, Key: {key}, Index: {t}.  Number of {want} values "
                          f"!= expected.  values size: {len(vals)} but output shape: "
                          f"{_fmt_shape(dims)}")
        out[t] = vals
    return out.reshape([len(steps)] + dims)


def _sequence_sparse(flists: Any, key: str, dtype: _dt.DType, name: str
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A VarLenFeature over the steps of a feature list: indices ``[N, 2]`` (step,
    position), dense shape ``[steps, longest]``."""
    kind = _KIND[dtype]
    lens: list[int] = []
    flat: list[Any] = []
    if key in flists:
        for t, f in enumerate(flists[key].feature):
            got = f.WhichOneof("kind")
            if got is None:
                lens.append(0)
                continue
            if got != kind:
                raise invalid(f"Name: {name}, Feature list: {key}, Index: {t}.  Data types "
                              f"don't match. Expected type: {_KIND_NAME[kind]}")
            vals = _values(f, kind)
            lens.append(len(vals))
            flat.extend(vals)
    return _sparse_arrays(lens, flat, dtype, False)


@ks.kernel("ParseSingleSequenceExample", device_type="CPU")
def _parse_sequence_kernel(ctx: Any) -> Any:
    a = ctx.attrs
    ncs, ncd = a["Ncontext_sparse"], a["Ncontext_dense"]
    nfs, nfd = a["Nfeature_list_sparse"], a["Nfeature_list_dense"]
    cst = [_dt.as_dtype(t) for t in a["context_sparse_types"]]
    cdt = [_dt.as_dtype(t) for t in a["Tcontext_dense"]]
    fst = [_dt.as_dtype(t) for t in a["feature_list_sparse_types"]]
    fdt = [_dt.as_dtype(t) for t in a["feature_list_dense_types"]]

    def compute(serialized: Any, missing_ok: Any, *rest: Any) -> Any:
        ser = np.asarray(serialized)
        if ser.ndim != 0:
            raise invalid(f"Expected serialized to be a scalar, got shape: "
                          f"{list(ser.shape)}")
        keys = _keys(rest[:ncs + ncd + nfs + nfd])
        cs_keys, keys = keys[:ncs], keys[ncs:]
        cd_keys, keys = keys[:ncd], keys[ncd:]
        fs_keys, fd_keys = keys[:nfs], keys[nfs:]
        defaults = rest[ncs + ncd + nfs + nfd:-1]
        name = _str(np.asarray(rest[-1]).item()) or "<unknown>"
        may_miss = {_str(k) for k in np.asarray(missing_ok).reshape(-1).tolist()}
        ex = _parse_protos(ser, example_pb2.SequenceExample)[0]
        cols = proto_columns([ex.context.feature],
                             [(k, KIND_CODE[_KIND[t]]) for k, t in
                              chain(zip(cs_keys, cst), zip(cd_keys, cdt))])
        csp = [_fill_sparse(c, k, t, [name], True) for c, k, t in zip(cols, cs_keys, cst)]
        cde = [_fill_dense(c, 1, _Dense(k, t, s, dv), [name], True)
               for c, k, t, s, dv in zip(cols[ncs:], cd_keys, cdt, a["context_dense_shapes"],
                                         defaults)]
        flists = ex.feature_lists.feature_list
        fsp = [_sequence_sparse(flists, k, t, name) for k, t in zip(fs_keys, fst)]
        fde = [_sequence_dense(flists, k, t, s, k in may_miss, name)
               for k, t, s in zip(fd_keys, fdt, a["feature_list_dense_shapes"])]
        return _outputs([s[0] for s in csp] + [s[1] for s in csp] + [s[2] for s in csp]
                        + cde + [s[0] for s in fsp] + [s[1] for s in fsp]
                        + [s[2] for s in fsp] + fde)

    return compute


def _batch_sequence_dense(parts: list[np.ndarray], dtype: _dt.DType, shape: Any
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Per-example ``[steps] + shape`` values stacked to ``[batch, longest] + shape``,
    padded with zeros (``b''`` for strings), and the number of steps of each."""
    lengths = np.array([len(p) for p in parts], dtype=np.int64)
    steps = int(lengths.max()) if len(parts) else 0
    pad = b"" if dtype is _dt.string else 0
    out = np.full([len(parts), steps] + _dims(shape), pad, dtype=_np_dtype(dtype))
    for b, p in enumerate(parts):
        out[b, :len(p)] = p
    return out, lengths


def _batch_sequence_sparse(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
                           dtype: _dt.DType) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-example ``[steps, longest]`` SparseTensors of a VarLenFeature feature list
    as one of dense shape ``[batch, most steps, longest]``."""
    ind = [np.concatenate([np.full((len(i), 1), b, dtype=np.int64), i], axis=1)
           for b, (i, _, _) in enumerate(parts)]
    shape = np.array([len(parts)] + [max((int(s[k]) for _, _, s in parts), default=0)
                                      for k in range(2)], dtype=np.int64)
    values = (np.concatenate([v for _, v, _ in parts]) if parts
              else np.zeros(0, dtype=_np_dtype(dtype)))
    return (np.concatenate(ind).reshape(-1, 3) if ind else np.zeros((0, 3), np.int64),
            values.astype(_np_dtype(dtype)), shape)


@ks.kernel("ParseSequenceExample", device_type="CPU")
def _parse_sequence_batch_kernel(ctx: Any) -> Any:
    """ParseSequenceExample: each SequenceExample parsed with protobuf; the context as
    ParseExample fills it, each feature list as ParseSingleSequenceExample does, then
    stacked over the batch (dense lists padded, their lengths counted)."""
    a = ctx.attrs
    cs_keys, cd_keys = _keys(a["context_sparse_keys"]), _keys(a["context_dense_keys"])
    fs_keys, fd_keys = _keys(a["feature_list_sparse_keys"]), _keys(a["feature_list_dense_keys"])
    may_miss = set(_keys(a["feature_list_dense_missing_assumed_empty"]))
    cst = [_dt.as_dtype(t) for t in a["context_sparse_types"]]
    cdt = [_dt.as_dtype(t) for t in a["Tcontext_dense"]]
    fst = [_dt.as_dtype(t) for t in a["feature_list_sparse_types"]]
    fdt = [_dt.as_dtype(t) for t in a["feature_list_dense_types"]]
    fshapes = a["feature_list_dense_shapes"]
    specs = [(k, KIND_CODE[_KIND[t]]) for k, t in chain(zip(cs_keys, cst), zip(cd_keys, cdt))]

    def compute(serialized: Any, debug_name: Any, *defaults: Any) -> Any:
        ser, nm = _batch_inputs(serialized, debug_name, "debug_name")
        names = [_name(nm, i) for i in range(ser.size)]
        exs = _parse_protos(ser, example_pb2.SequenceExample)
        n = len(exs)
        cols = proto_columns([ex.context.feature for ex in exs], specs)
        csp = [_fill_sparse(c, k, t, nm, False) for c, k, t in zip(cols, cs_keys, cst)]
        cde = [_fill_dense(c, n, _Dense(k, t, s, dv), nm, False)
               for c, k, t, s, dv in zip(cols[len(cs_keys):], cd_keys, cdt,
                                         a["context_dense_shapes"], defaults)]
        fsp = [_batch_sequence_sparse([_sequence_sparse(ex.feature_lists.feature_list, k, t,
                                                        names[i])
                                       for i, ex in enumerate(exs)], t)
               for k, t in zip(fs_keys, fst)]
        fde = [_batch_sequence_dense([_sequence_dense(ex.feature_lists.feature_list, k, t, s,
                                                      k in may_miss, names[i])
                                      for i, ex in enumerate(exs)], t, s)
               for k, t, s in zip(fd_keys, fdt, fshapes)]
        return _outputs([s[0] for s in csp] + [s[1] for s in csp] + [s[2] for s in csp]
                        + cde + [s[0] for s in fsp] + [s[1] for s in fsp]
                        + [s[2] for s in fsp] + [d[0] for d in fde] + [d[1] for d in fde])

    return compute


@ks.kernel("DecodeJSONExample", device_type="CPU")
def _decode_json_kernel(ctx: Any) -> Any:
    def compute(json_examples: Any) -> Any:
        arr = np.asarray(json_examples)
        out = np.empty(arr.shape, dtype=object)
        for i, s in enumerate(arr.reshape(-1).tolist()):
            try:
                msg = json_format.Parse(_str(s), example_pb2.Example())
            except json_format.ParseError as e:
                raise invalid(f"Error while parsing JSON: {e}") from None
            out.reshape(-1)[i] = msg.SerializeToString()
        return out

    return compute


# =======================================================================================
# Python API
# =======================================================================================
class _Params:
    """The raw op arguments a features dict stands for (TF's ``_ParseOpParams``)."""

    def __init__(self, features: dict[str, Any], allowed: tuple[type, ...]):
        if not features:
            raise ValueError("Missing: features was %s." % features)
        self.sparse_keys: list[str] = []
        self.sparse_types: list[_dt.DType] = []
        self.dense_keys: list[str] = []
        self.dense_types: list[_dt.DType] = []
        self.dense_shapes: list[TensorShape] = []
        self.dense_defaults: list[Any] = []
        for key in sorted(features):
            f = features[key]
            if not isinstance(f, allowed):
                raise ValueError(f"Unsupported {type(f).__name__} {f}.")
            if isinstance(f, VarLenFeature):
                self._add_sparse(key, f.dtype)
            elif isinstance(f, SparseFeature):
                for k in ([f.index_key] if isinstance(f.index_key, str) else f.index_key):
                    self._add_sparse(k, _dt.int64)
                self._add_sparse(f.value_key, f.dtype)
            elif isinstance(f, FixedLenFeature):
                if f.shape is None:
                    raise ValueError(f"Missing shape for feature {key}.")
                self._add_dense(key, f.dtype, as_shape(f.shape), f.default_value, False)
            else:
                if not f.allow_missing and allowed != _SEQUENCE:
                    raise ValueError("Unsupported: FixedLenSequenceFeature requires "
                                     "allow_missing to be True.")
                if f.shape is None:
                    raise ValueError(f"Missing shape for feature {key}.")
                self._add_dense(key, f.dtype, as_shape(f.shape), f.default_value, True)

    def _add_sparse(self, key: str, dtype: Any) -> None:
        dtype = _check_dtype(dtype, key)
        if key in self.sparse_keys:
            old = self.sparse_types[self.sparse_keys.index(key)]
            if old is not dtype:
                raise ValueError(f"Conflicting type {old} vs {dtype} for feature {key}.")
            return
        self.sparse_keys.append(key)
        self.sparse_types.append(dtype)

    def _add_dense(self, key: str, dtype: Any, shape: TensorShape, default: Any,
                   sequence: bool) -> None:
        dtype = _check_dtype(dtype, key)
        self.dense_keys.append(key)
        self.dense_types.append(dtype)
        self.dense_shapes.append(TensorShape([None]).concatenate(shape) if sequence
                                 else shape)
        self.dense_defaults.append((default, sequence))

    def default_tensors(self) -> list[Tensor]:
        """Each dense feature's default as the op takes it: empty when required, the
        padding scalar for a sequence feature, else the value in the feature's shape."""
        out = []
        for key, dt, shape, (dv, seq) in zip(self.dense_keys, self.dense_types,
                                            self.dense_shapes, self.dense_defaults):
            with name_scope("key_" + "".join(c if c.isalnum() or c in "-_." else "_"
                                             for c in key)):
                if dv is None:
                    out.append(apply_op("Const", value=np.zeros(
                        [0], dtype=_np_dtype(dt)), dtype=dt, name="Const"))
                    continue
                v = np.asarray(dv, dtype=_np_dtype(dt))
                if seq:
                    if v.size != 1:
                        raise ValueError(f"Default value for feature {key} of a sequence "
                                         "feature must be a scalar (the padding value)")
                    v = v.reshape(())
                else:
                    v = v.reshape(shape.as_list())
                out.append(convert_to_tensor(v, dtype=dt))
        return out


def _check_dtype(dtype: Any, key: str) -> _dt.DType:
    dt = _dt.as_dtype(dtype)
    if dt not in _KIND:
        raise TypeError(f"Value passed to parameter 'dense_defaults' has DataType "
                        f"{dt.name} not in list of allowed values: float32, int64, string")
    return dt


_EXAMPLE = (VarLenFeature, SparseFeature, FixedLenFeature, FixedLenSequenceFeature)
_SEQUENCE = (VarLenFeature, FixedLenSequenceFeature)


def _sparse_features(features: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """``out`` with each SparseFeature built from its index and value features (through
    ``tf.sparse_merge``, as TF) and the features only they asked for removed."""
    done = dict(out)
    for key in sorted(features):
        f = features[key]
        if isinstance(f, SparseFeature):
            ids = ([out[f.index_key]] if isinstance(f.index_key, str)
                   else [out[k] for k in f.index_key])
            size = f.size if not isinstance(f.index_key, str) else [f.size]
            done[key] = _merge(ids, out[f.value_key], size, f.already_sorted)
    return {k: v for k, v in done.items() if k in features}


def _merge(ids: list[SparseTensor], values: SparseTensor, size: Any,
           already_sorted: bool) -> SparseTensor:
    """TF's ``sparse_merge_impl``: rows of ``values`` indexed by the ids' values."""
    if len(ids) == 1:
        return sparse_merge(ids[0], values, size[0], already_sorted=already_sorted)
    return sparse_merge(ids, values, size, already_sorted=already_sorted)


def _unpack(outs: Any, n_sparse: int) -> tuple[list, list, list, list]:
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    flat: list[Any] = []
    for o in outs:
        flat.extend(o if isinstance(o, list) else [o])
    return (flat[:n_sparse], flat[n_sparse:2 * n_sparse], flat[2 * n_sparse:3 * n_sparse],
            flat[3 * n_sparse:])


@ks.api("io.parse_example", "parse_example")
def parse_example(serialized: Any, features: dict[str, Any], name: str | None = None,
                  example_names: Any = None) -> dict[str, Any]:
    """Parse a batch of serialized ``Example`` protos (a 1-D string tensor) into a dict
    of dense tensors (``FixedLenFeature``: ``[batch] + shape``;
    ``FixedLenSequenceFeature``: ``[batch, steps] + shape``) and ``SparseTensor``s
    (``VarLenFeature``, ``SparseFeature``)."""
    p = _Params(features, _EXAMPLE)
    with name_scope(name, "ParseExample"):
        ser = convert_to_tensor(serialized, dtype=_dt.string, name="serialized")
        names = convert_to_tensor([] if example_names is None else example_names,
                                  dtype=_dt.string, name="names")
        defaults = p.default_tensors()
        outs = apply_op("ParseExample", serialized=ser, names=names,
                        sparse_keys=[convert_to_tensor(k, dtype=_dt.string)
                                     for k in p.sparse_keys],
                        dense_keys=[convert_to_tensor(k, dtype=_dt.string)
                                    for k in p.dense_keys],
                        dense_defaults=defaults, sparse_types=p.sparse_types,
                        dense_shapes=p.dense_shapes, name="ParseExample")
    ind, val, shp, dense = _unpack(outs, len(p.sparse_keys))
    out: dict[str, Any] = {k: SparseTensor(i, v, s)
                           for k, i, v, s in zip(p.sparse_keys, ind, val, shp)}
    out.update(zip(p.dense_keys, dense))
    return _sparse_features(features, out)


@ks.api("io.parse_single_example", "parse_single_example")
def parse_single_example(serialized: Any, features: dict[str, Any], name: str | None = None,
                         example_names: Any = None) -> dict[str, Any]:
    """Parse one serialized ``Example`` (a string scalar): as :func:`parse_example`
    without the batch dimension (a ``VarLenFeature`` has indices ``[N, 1]``)."""
    p = _Params(features, _EXAMPLE)
    with name_scope(name, "ParseSingleExample"):
        ser = convert_to_tensor(serialized, dtype=_dt.string, name="serialized")
        if ser.shape.ndims not in (None, 0):
            raise ValueError(f"Input serialized must be a scalar, got shape {ser.shape}")
        defaults = p.default_tensors()
        outs = apply_op("ParseSingleExample", serialized=ser, dense_defaults=defaults,
                        num_sparse=len(p.sparse_keys), sparse_keys=p.sparse_keys,
                        dense_keys=p.dense_keys, sparse_types=p.sparse_types,
                        dense_shapes=p.dense_shapes, name="ParseSingleExample")
    ind, val, shp, dense = _unpack(outs, len(p.sparse_keys))
    out: dict[str, Any] = {k: SparseTensor(i, v, s)
                           for k, i, v, s in zip(p.sparse_keys, ind, val, shp)}
    out.update(zip(p.dense_keys, dense))
    return _sparse_features(features, out)


@ks.api("io.parse_single_sequence_example", "parse_single_sequence_example")
def parse_single_sequence_example(serialized: Any, context_features: dict | None = None,
                                  sequence_features: dict | None = None,
                                  example_name: Any = None, name: str | None = None
                                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Parse one serialized ``SequenceExample``: ``(context, sequences)`` dicts, the
    context as :func:`parse_single_example`, each ``FixedLenSequenceFeature`` of the
    feature lists as ``[steps] + shape``, each ``VarLenFeature`` as a ``SparseTensor``
    of dense shape ``[steps, longest]``."""
    if not (context_features or sequence_features):
        raise ValueError("Missing features.")
    ctx = _Params(context_features, (VarLenFeature, FixedLenFeature)) \
        if context_features else _Params({"_": VarLenFeature(_dt.int64)}, _EXAMPLE)
    if not context_features:
        ctx.sparse_keys, ctx.sparse_types = [], []
    seq = _Params(sequence_features, _SEQUENCE) if sequence_features else None
    fs_keys = seq.sparse_keys if seq else []
    fd_keys = seq.dense_keys if seq else []
    fd_shapes = [TensorShape(s.as_list()[1:]) for s in seq.dense_shapes] if seq else []
    missing_ok = [k for k in fd_keys if sequence_features[k].allow_missing]
    for k in fd_keys:
        if sequence_features[k].default_value is not None:
            raise ValueError(f"FixedLenSequenceFeature {k}: default_value is not "
                             "supported by parse_single_sequence_example")
    with name_scope(name, "ParseSingleSequenceExample"):
        ser = convert_to_tensor(serialized, dtype=_dt.string, name="serialized")
        strs = lambda ks_: [convert_to_tensor(k, dtype=_dt.string) for k in ks_]  # noqa: E731
        outs = apply_op(
            "ParseSingleSequenceExample", serialized=ser,
            feature_list_dense_missing_assumed_empty=convert_to_tensor(
                missing_ok, dtype=_dt.string) if missing_ok else
            apply_op("Const", value=np.zeros([0], dtype=object), dtype=_dt.string),
            context_sparse_keys=strs(ctx.sparse_keys),
            context_dense_keys=strs(ctx.dense_keys),
            feature_list_sparse_keys=strs(fs_keys), feature_list_dense_keys=strs(fd_keys),
            context_dense_defaults=ctx.default_tensors(),
            debug_name=convert_to_tensor("" if example_name is None else example_name,
                                         dtype=_dt.string),
            context_sparse_types=ctx.sparse_types,
            feature_list_dense_types=seq.dense_types if seq else [],
            context_dense_shapes=ctx.dense_shapes,
            feature_list_sparse_types=seq.sparse_types if seq else [],
            feature_list_dense_shapes=fd_shapes, name="ParseSingleSequenceExample")
    flat: list[Any] = []
    for o in (outs if isinstance(outs, (list, tuple)) else [outs]):
        flat.extend(o if isinstance(o, list) else [o])
    nc, ncd, nf = len(ctx.sparse_keys), len(ctx.dense_keys), len(fs_keys)
    c_ind, flat = flat[:nc], flat[nc:]
    c_val, flat = flat[:nc], flat[nc:]
    c_shp, flat = flat[:nc], flat[nc:]
    c_den, flat = flat[:ncd], flat[ncd:]
    f_ind, flat = flat[:nf], flat[nf:]
    f_val, flat = flat[:nf], flat[nf:]
    f_shp, f_den = flat[:nf], flat[nf:]
    context = {k: SparseTensor(i, v, s)
               for k, i, v, s in zip(ctx.sparse_keys, c_ind, c_val, c_shp)}
    context.update(zip(ctx.dense_keys, c_den))
    sequences = {k: SparseTensor(i, v, s) for k, i, v, s in zip(fs_keys, f_ind, f_val, f_shp)}
    sequences.update(zip(fd_keys, f_den))
    return context, sequences


@ks.api("io.parse_sequence_example", "parse_sequence_example")
def parse_sequence_example(serialized: Any, context_features: dict | None = None,
                           sequence_features: dict | None = None, example_names: Any = None,
                           name: str | None = None
                           ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Parse a batch of serialized ``SequenceExample`` protos (a 1-D string tensor):
    ``(context, feature_lists, lengths)`` dicts. The context as :func:`parse_example`;
    each ``FixedLenSequenceFeature`` of the feature lists as ``[batch, steps] + shape``,
    padded with zeros (``b''``) to the longest list of the batch, its number of steps per
    example in ``lengths``; each ``VarLenFeature`` as a ``SparseTensor`` with indices
    ``[batch, step, position]``."""
    if not (context_features or sequence_features):
        raise ValueError("Missing features.")
    ctx = _Params(context_features, (VarLenFeature, FixedLenFeature)) \
        if context_features else None
    seq = _Params(sequence_features, _SEQUENCE) if sequence_features else None
    fd_keys = seq.dense_keys if seq else []
    for k in fd_keys:
        if sequence_features[k].default_value is not None:
            raise ValueError(f"Value feature_list_dense_defaults[{k}] must be None")
    missing_ok = [k for k in fd_keys if sequence_features[k].allow_missing]
    lists = lambda p, attr: getattr(p, attr) if p else []  # noqa: E731
    with name_scope(name, "ParseSequenceExample", [serialized]):
        ser = convert_to_tensor(serialized, dtype=_dt.string, name="serialized")
        names = convert_to_tensor([] if example_names is None else example_names,
                                  dtype=_dt.string, name="debug_name")
        outs = apply_op(
            "ParseSequenceExample", serialized=ser, debug_name=names,
            context_dense_defaults=ctx.default_tensors() if ctx else [],
            feature_list_dense_missing_assumed_empty=missing_ok,
            context_sparse_keys=lists(ctx, "sparse_keys"),
            context_dense_keys=lists(ctx, "dense_keys"),
            feature_list_sparse_keys=lists(seq, "sparse_keys"), feature_list_dense_keys=fd_keys,
            Ncontext_sparse=len(lists(ctx, "sparse_keys")),
            Nfeature_list_sparse=len(lists(seq, "sparse_keys")),
            Nfeature_list_dense=len(fd_keys),
            context_sparse_types=lists(ctx, "sparse_types"),
            feature_list_dense_types=lists(seq, "dense_types"),
            context_dense_shapes=lists(ctx, "dense_shapes"),
            feature_list_sparse_types=lists(seq, "sparse_types"),
            feature_list_dense_shapes=[TensorShape(s.as_list()[1:])
                                       for s in lists(seq, "dense_shapes")],
            name="ParseSequenceExample")
    flat: list[Any] = []
    for o in (outs if isinstance(outs, (list, tuple)) else [outs]):
        flat.extend(o if isinstance(o, list) else [o])
    out: list[dict[str, Any]] = []
    for keys_s, keys_d in ((lists(ctx, "sparse_keys"), lists(ctx, "dense_keys")),
                           (lists(seq, "sparse_keys"), fd_keys)):
        ns = len(keys_s)
        parts = [flat[i * ns:(i + 1) * ns] for i in range(3)]
        flat = flat[3 * ns:]
        d: dict[str, Any] = {k: SparseTensor(i, v, s) for k, i, v, s in zip(keys_s, *parts)}
        d.update(zip(keys_d, flat[:len(keys_d)]))
        flat = flat[len(keys_d):]
        out.append(d)
    return out[0], out[1], dict(zip(fd_keys, flat))


@ks.api("io.decode_json_example", "decode_json_example")
def decode_json_example(json_examples: Any, name: str | None = None) -> Tensor:
    """``Example`` protos written as JSON (protobuf's JSON mapping) to binary protos, in
    a string tensor of the same shape."""
    return apply_op("DecodeJSONExample", name=name, json_examples=json_examples)


for _cls in (FixedLenFeature, VarLenFeature, FixedLenSequenceFeature, SparseFeature):
    ks.export(_cls.__name__, _cls)
    ks.export("io." + _cls.__name__, _cls)
