"""Conversion between flowrt graphs and TensorFlow's protobuf messages.

The in-memory graph keeps attrs as Python values (:class:`~flowrt.dtypes.DType`,
``int``, ``float``, ``bool``, ``str``, :class:`~flowrt.tensor_shape.TensorShape`,
``numpy.ndarray`` and lists of those); on the wire they are ``AttrValue`` messages, and
tensors are ``TensorProto`` messages laid out exactly as TensorFlow 1.15 writes them, so
GraphDefs move between flowrt and TensorFlow in both directions.

- :func:`make_tensor_proto` / :func:`make_ndarray`: arrays <-> ``TensorProto``
- :func:`attr_value_of` / :func:`python_attr_of`: attr values <-> ``AttrValue``
- :func:`node_def_of` / :func:`graph_to_graph_def`: operations and graphs -> protos
- :func:`import_graph_def`: a ``GraphDef`` -> operations in the default graph
"""
from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from . import dtypes as _dt
from .proto import attr_value_pb2, graph_def_pb2, node_def_pb2, tensor_pb2
from .proto import tensor_shape_pb2
from .tensor_shape import TensorShape, as_shape

if TYPE_CHECKING:  # pragma: no cover
    from .graph import Graph, Operation, Tensor

__all__ = [
    "make_tensor_proto", "make_ndarray", "attr_value_of", "python_attr_of", "node_def_of",
    "graph_to_graph_def", "import_graph_def", "GRAPH_DEF_VERSION",
    "GRAPH_DEF_VERSION_MIN_CONSUMER", "GRAPH_DEF_VERSION_MIN_PRODUCER",
]

#: The GraphDef version TensorFlow 1.15 writes (``versions.producer``). Versions have
#: been date based since 2019-05-09 (version 30); the r1.15 release carries 134.
GRAPH_DEF_VERSION = 134
#: Oldest consumer version able to read what we write, and oldest producer we read.
GRAPH_DEF_VERSION_MIN_CONSUMER = 0
GRAPH_DEF_VERSION_MIN_PRODUCER = 0

TensorProto = tensor_pb2.TensorProto
AttrValue = attr_value_pb2.AttrValue
NameAttrList = attr_value_pb2.NameAttrList
TensorShapeProto = tensor_shape_pb2.TensorShapeProto
NodeDef = node_def_pb2.NodeDef
GraphDef = graph_def_pb2.GraphDef

# Dtypes whose multi-element tensors TensorFlow writes as raw bytes in tensor_content.
_CONTENT_DTYPES = frozenset({
    _dt.float16, _dt.float32, _dt.float64, _dt.int32, _dt.uint8, _dt.int16, _dt.int8,
    _dt.int64, _dt.qint8, _dt.quint8, _dt.qint16, _dt.quint16, _dt.qint32, _dt.uint32,
    _dt.uint64,
})
# The typed repeated field holding each dtype's values (when not in tensor_content).
_VAL_FIELD: dict[_dt.DType, str] = {
    _dt.float16: "half_val", _dt.bfloat16: "half_val", _dt.float32: "float_val",
    _dt.float64: "double_val", _dt.int32: "int_val", _dt.int16: "int_val",
    _dt.int8: "int_val", _dt.uint8: "int_val", _dt.uint16: "int_val",
    _dt.qint8: "int_val", _dt.quint8: "int_val", _dt.qint16: "int_val",
    _dt.quint16: "int_val", _dt.qint32: "int_val", _dt.int64: "int64_val",
    _dt.uint32: "uint32_val", _dt.uint64: "uint64_val", _dt.complex64: "scomplex_val",
    _dt.complex128: "dcomplex_val", _dt.bool: "bool_val", _dt.string: "string_val",
}
_MAX_CONTENT_BYTES = 1 << 31


# ---------------------------------------------------------------------------------------
# TensorProto <-> ndarray
# ---------------------------------------------------------------------------------------
def _shape_list(shape: Any) -> list[int]:
    """A fully known shape as a list of ints (TypeError/ValueError otherwise)."""
    if isinstance(shape, TensorShapeProto):
        shape = TensorShape(shape)
    if isinstance(shape, TensorShape):
        dims = shape.as_tuple()
        if dims is None or any(d is None for d in dims):
            raise ValueError(f"make_tensor_proto needs a fully defined shape, got {shape}")
        return [int(d) for d in dims]
    if isinstance(shape, (int, np.integer)):
        shape = [shape]
    out = []
    for d in shape:
        if d is None:
            raise ValueError(f"make_tensor_proto needs a fully defined shape, got {shape!r}")
        v = int(d)
        if v < 0:
            raise ValueError(f"Dimension {v} must be >= 0 in shape {shape!r}")
        out.append(v)
    return out


def _strings_array(values: Any) -> np.ndarray:
    """An object array of bytes (str encoded as UTF-8); TypeError for non-strings."""
    arr = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) \
        else values.astype(object)
    out = np.empty(arr.shape, dtype=object)
    flat_in, flat_out = arr.reshape(-1), out.reshape(-1)
    for i, v in enumerate(flat_in):
        if isinstance(v, bytes):
            flat_out[i] = v
        elif isinstance(v, str):
            flat_out[i] = v.encode("utf-8")
        else:
            raise TypeError(f"Expected string, got {v!r} of type '{type(v).__name__}' "
                            "instead.")
    return out


def _array_of(values: Any, dtype: _dt.DType | None, shape: list[int] | None) -> np.ndarray:
    """``values`` as an ndarray, with TensorFlow's inference and checks."""
    from .graph import numpy_value_for

    if isinstance(values, (np.ndarray, np.generic)):
        arr = np.asarray(values)
        if arr.dtype.byteorder not in ("=", "|"):
            arr = arr.astype(arr.dtype.newbyteorder("="))
        if dtype is _dt.string or (dtype is None and arr.dtype.kind in "USO"):
            return _strings_array(arr)
        if dtype is None:
            _dt.as_dtype(arr.dtype)  # TypeError for dtypes TensorFlow has no name for
            return arr
        if arr.dtype.kind in "USO":
            raise TypeError(f"Expected {dtype.name}, got an array of dtype {arr.dtype} "
                            "instead.")
        return arr.astype(dtype.np, copy=False)
    if shape is not None and int(np.prod(shape, dtype=np.int64)) == 0:
        np_dtype = (dtype or _dt.float32).np
        return np.empty(shape, dtype=np_dtype)
    if dtype is _dt.string:
        return _strings_array(values)
    if dtype is _dt.uint64:
        # Python ints above 2**63 would go through float64 and lose precision.
        obj = np.asarray(values, dtype=object)
        flat = obj.reshape(-1)
        if obj.dtype == object and all(
                isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                and 0 <= v < 2 ** 64 for v in flat):
            return np.array(flat.tolist(), dtype=np.uint64).reshape(obj.shape)
    arr = numpy_value_for(values, dtype)
    if arr.dtype == object:
        arr = _strings_array(arr)
    return arr


def _dtype_of_array(arr: np.ndarray) -> _dt.DType:
    return _dt.string if arr.dtype == object else _dt.as_dtype(arr.dtype)


def _little_endian(arr: np.ndarray) -> np.ndarray:
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and np.little_endian is False):
        return arr.astype(arr.dtype.newbyteorder("<"))
    return arr


def _append_values(proto: TensorProto, dtype: _dt.DType, flat: np.ndarray) -> None:
    """Write ``flat`` into the typed repeated field TensorFlow uses for ``dtype``."""
    field = _VAL_FIELD.get(dtype)
    if field is None:
        raise TypeError(f"Element type not supported in TensorProto: {dtype.name}")
    target = getattr(proto, field)
    if dtype is _dt.string:
        target.extend(flat.tolist())
    elif field == "half_val":
        target.extend(flat.view(np.uint16).astype(np.int32).tolist())
    elif dtype.is_complex:
        parts = np.empty(flat.size * 2, dtype=dtype.real_dtype.np)
        parts[0::2], parts[1::2] = flat.real, flat.imag
        target.extend(parts.tolist())
    else:
        target.extend(flat.tolist())


def make_tensor_proto(values: Any, dtype: Any = None, shape: Any = None,
                      verify_shape: bool = False, allow_broadcast: bool = False) -> TensorProto:
    """A ``TensorProto`` holding ``values`` (``tf.make_tensor_proto``).

    Python values are converted as ``tf.constant`` does (floats become float32, ints
    int32 when they fit); numpy arrays keep their dtype unless ``dtype`` is given.
    Multi-element numeric tensors are stored as raw little-endian bytes in
    ``tensor_content``; scalars, strings, bools and complex values use the typed
    ``*_val`` fields. With ``shape``, a single value (or, as in TF1, a shorter list) is
    stored once and fills the shape when read back.

    :param values: a Python scalar or nested list, a numpy array, or a TensorProto
        (returned unchanged)
    :param dtype: the element type (anything :func:`~flowrt.dtypes.as_dtype` accepts)
    :param shape: the tensor's shape; defaults to the shape of ``values``
    :param verify_shape: require ``values`` to have exactly ``shape``
    :param allow_broadcast: allow only a scalar or one-element ``values`` to fill
        ``shape`` (TF2's ``tf.constant`` rule) instead of TF1's padding
    :raises TypeError: values not representable in ``dtype``, or a shape mismatch under
        ``verify_shape``/``allow_broadcast``
    :raises ValueError: ``None`` values, ragged lists, more values than ``shape`` holds
    """
    if isinstance(values, TensorProto):
        return values
    proto = TensorProto()
    _fill_tensor_proto(proto, values, dtype, shape, verify_shape, allow_broadcast)
    return proto


def _fill_tensor_proto(proto: TensorProto, values: Any, dtype: Any = None, shape: Any = None,
                       verify_shape: bool = False, allow_broadcast: bool = False) -> None:
    """:func:`make_tensor_proto` writing into an existing (empty) message, so tensors
    inside NodeDefs are built in place rather than copied."""
    if values is None:
        raise ValueError("None values not supported.")
    want = None if dtype is None else _dt.as_dtype(dtype).base_dtype
    if want is not None and want in (_dt.resource, _dt.variant):
        raise TypeError(f"make_tensor_proto does not support dtype {want.name}")
    shape_l = None if shape is None else _shape_list(shape)
    arr = _array_of(values, want, shape_l)
    proto_dtype = want if want is not None else _dtype_of_array(arr)
    if want is not None and want is not _dt.string and arr.dtype != want.np:
        raise TypeError(f"Incompatible types: {want.name} vs. {arr.dtype}. Value is {values!r}")

    if shape_l is None:
        shape_l = list(arr.shape)
        same_size = True
        shape_size = arr.size
    else:
        shape_size = int(np.prod(shape_l, dtype=np.int64))
        same_size = shape_size == arr.size
        if allow_broadcast:
            if arr.shape not in ((1,), ()) and arr.size != shape_size:
                raise TypeError(f"Expected Tensor's shape: {tuple(shape_l)}, got {arr.shape}.")
        else:
            if verify_shape and arr.shape != tuple(shape_l):
                raise TypeError(f"Expected Tensor's shape: {tuple(shape_l)}, got {arr.shape}.")
            if arr.size > shape_size:
                raise ValueError(f"Too many elements provided. Needed at most {shape_size}, "
                                 f"but received {arr.size}")

    proto.dtype = proto_dtype.as_datatype_enum
    proto.tensor_shape.SetInParent()  # TF writes an empty shape message for scalars
    for d in shape_l:
        proto.tensor_shape.dim.add(size=d)
    if same_size and proto_dtype in _CONTENT_DTYPES and shape_size > 1:
        if arr.nbytes >= _MAX_CONTENT_BYTES:
            raise ValueError("Cannot create a tensor proto whose content is larger than 2GB.")
        proto.tensor_content = np.ascontiguousarray(_little_endian(arr)).tobytes()
        return
    _append_values(proto, proto_dtype, np.ascontiguousarray(arr).reshape(-1))


def _decode_string_list(content: bytes, n: int) -> list[bytes]:
    """Strings as C++ ``Tensor::AsProtoTensorContent`` packs them: n varint32 lengths,
    then the bytes of each string back to back."""
    lengths = []
    pos = 0
    for _ in range(n):
        value, shift = 0, 0
        while True:
            if pos >= len(content):
                raise ValueError("Malformed string tensor_content: truncated length prefix")
            b = content[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        lengths.append(value)
    out = []
    for ln in lengths:
        if pos + ln > len(content):
            raise ValueError("Malformed string tensor_content: data shorter than its lengths")
        out.append(bytes(content[pos:pos + ln]))
        pos += ln
    if pos != len(content):
        raise ValueError("Malformed string tensor_content: trailing bytes")
    return out


def make_ndarray(tensor: TensorProto) -> np.ndarray:
    """The numpy array held by a ``TensorProto`` (``tf.make_ndarray``).

    Reads every encoding TensorFlow writes: raw ``tensor_content`` (little-endian), or
    the typed fields (``float_val``, ``int_val``, ``half_val`` bit patterns,
    ``scomplex_val``/``dcomplex_val`` as (real, imaginary) pairs, ``bool_val``,
    ``string_val`` ...), where fewer values than the shape needs are padded by repeating
    the last one and no values at all mean zeros. Strings come back as an object array of
    ``bytes``. The result is a fresh, writable array.

    :raises TypeError: for dtypes a TensorProto cannot carry here (resource, variant,
        invalid)
    :raises ValueError: for malformed protos (unknown shape, wrong content size, more
        values than the shape holds)
    """
    if not isinstance(tensor, TensorProto):
        if hasattr(tensor, "SerializeToString") and \
                getattr(getattr(tensor, "DESCRIPTOR", None), "name", None) == "TensorProto":
            tensor = TensorProto.FromString(tensor.SerializeToString())
        else:
            raise TypeError(f"make_ndarray expects a TensorProto, got {type(tensor).__name__}")
    if tensor.tensor_shape.unknown_rank:
        raise ValueError("Cannot make an array from a TensorProto of unknown rank")
    shape = [d.size for d in tensor.tensor_shape.dim]
    if any(s < 0 for s in shape):
        raise ValueError(f"Cannot make an array from a TensorProto with unknown dims {shape}")
    n = int(np.prod(shape, dtype=np.int64))
    try:
        dtype = _dt.as_dtype(tensor.dtype).base_dtype
    except TypeError:
        raise TypeError(f"Unsupported tensor type: {tensor.dtype}") from None
    if dtype in (_dt.resource, _dt.variant) or dtype not in _VAL_FIELD:
        raise TypeError(f"Unsupported tensor type: {dtype.name}")

    if dtype is _dt.string:
        if tensor.tensor_content:
            vals = _decode_string_list(tensor.tensor_content, n)
        else:
            vals = list(tensor.string_val)
            if len(vals) > n:
                raise ValueError(f"TensorProto has {len(vals)} strings for shape {shape}")
            if len(vals) < n:
                vals.extend([vals[-1] if vals else b""] * (n - len(vals)))
        out = np.empty(n, dtype=object)
        out[:] = vals
        return out.reshape(shape)

    np_dtype = dtype.np
    if tensor.tensor_content:
        content = tensor.tensor_content
        if len(content) != n * np_dtype.itemsize:
            raise ValueError(f"TensorProto tensor_content has {len(content)} bytes; shape "
                             f"{shape} of {dtype.name} needs {n * np_dtype.itemsize}")
        arr = np.frombuffer(content, dtype=np_dtype.newbyteorder("<"))
        return arr.astype(np_dtype).reshape(shape)  # astype copies: writable, native order

    field = getattr(tensor, _VAL_FIELD[dtype])
    if _VAL_FIELD[dtype] == "half_val":
        values = np.array(field, dtype=np.int64).astype(np.uint16).view(np_dtype)
    elif dtype.is_complex:
        parts = np.array(field, dtype=dtype.real_dtype.np)
        if parts.size % 2:
            raise ValueError(f"TensorProto of {dtype.name} has an odd number of "
                             f"(real, imaginary) values: {parts.size}")
        values = np.empty(parts.size // 2, dtype=np_dtype)
        values.real = parts[0::2]  # assigned apart: 0+inf*j must not become nan+inf*j
        values.imag = parts[1::2]
    elif np_dtype.kind in "iu" and np_dtype.itemsize < 8:
        values = np.array(field, dtype=np.int64).astype(np_dtype)
    else:
        values = np.array(field, dtype=np_dtype)
    if values.size == 0:
        return np.zeros(shape, dtype=np_dtype)
    if values.size > n:
        raise ValueError(f"TensorProto has {values.size} values for shape {shape}")
    if values.size < n:
        values = np.concatenate([values, np.repeat(values[-1:], n - values.size)])
    return values.reshape(shape)


# ---------------------------------------------------------------------------------------
# AttrValue <-> Python values
# ---------------------------------------------------------------------------------------
_SCALAR_FIELD = {"type": "type", "int": "i", "float": "f", "bool": "b", "string": "s",
                 "shape": "shape", "tensor": "tensor", "func": "func"}
_FIELD_KIND = {v: k for k, v in _SCALAR_FIELD.items()}
#: Kinds of the attrs TensorFlow itself adds to nodes (no OpDef declares them).
_MERGE_OPS = frozenset({"Merge", "RefMerge"})
_NEXT_ITERATION_OPS = frozenset({"NextIteration", "RefNextIteration"})
_INTERNAL_ATTR_KINDS = {"_class": "list(string)", "_output_shapes": "list(shape)"}


def _infer_kind(value: Any) -> str:
    if isinstance(value, _dt.DType):
        return "type"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    if isinstance(value, (str, bytes)):
        return "string"
    if isinstance(value, (TensorShape, TensorShapeProto)):
        return "shape"
    if isinstance(value, (np.ndarray, TensorProto)):
        return "tensor"
    if isinstance(value, NameAttrList):
        return "func"
    if isinstance(value, (list, tuple)):
        kinds = {_infer_kind(v) for v in value}
        if not kinds:
            return "list(int)"  # an empty list is written the same for every kind
        if kinds == {"int", "float"}:
            return "list(float)"
        if len(kinds) > 1:
            raise TypeError(f"Cannot make an AttrValue from a list mixing "
                            f"{', '.join(sorted(kinds))}: {value!r}")
        k = kinds.pop()
        if k.startswith("list("):
            raise TypeError(f"Cannot make an AttrValue from a nested list: {value!r}")
        return f"list({k})"
    raise TypeError(f"Cannot make an AttrValue from {type(value).__name__}: {value!r}")


def _shape_proto(value: Any) -> TensorShapeProto:
    if isinstance(value, TensorShapeProto):
        return value
    return (TensorShape(None) if value is None else as_shape(value)).as_proto()


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"Expected a string, got {value!r} of type '{type(value).__name__}'")


def _set_tensor(target: TensorProto, value: Any) -> None:
    if isinstance(value, TensorProto):
        target.CopyFrom(value)
    else:
        _fill_tensor_proto(target, value)


def _func(value: Any) -> NameAttrList:
    if isinstance(value, NameAttrList):
        return value
    if isinstance(value, str):
        return NameAttrList(name=value)
    raise TypeError(f"Expected a function (NameAttrList or name), got {value!r}")


def _check_number(value: Any, kind: str) -> Any:
    if kind == "int":
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"Expected an int, got {value!r} of type '{type(value).__name__}'")
        return int(value)
    if isinstance(value, (bool, np.bool_)) or \
            not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"Expected a float, got {value!r} of type '{type(value).__name__}'")
    return float(value)


def _set_scalar(av: AttrValue, kind: str, value: Any) -> None:
    if kind == "type":
        av.type = _dt.as_dtype(value).as_datatype_enum
    elif kind in ("int", "float"):
        setattr(av, _SCALAR_FIELD[kind], _check_number(value, kind))
    elif kind == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"Expected a bool, got {value!r} of type '{type(value).__name__}'")
        av.b = bool(value)
    elif kind == "string":
        av.s = _as_bytes(value)
    elif kind == "shape":
        av.shape.CopyFrom(_shape_proto(value))
    elif kind == "tensor":
        _set_tensor(av.tensor, value)
    elif kind == "func":
        av.func.CopyFrom(_func(value))
    else:
        raise ValueError(f"Unknown attr kind {kind!r}")


def _add_to_list(lst: Any, kind: str, value: Any) -> None:
    if kind == "type":
        lst.type.append(_dt.as_dtype(value).as_datatype_enum)
    elif kind == "int":
        lst.i.append(_check_number(value, "int"))
    elif kind == "float":
        lst.f.append(_check_number(value, "float"))
    elif kind == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"Expected a bool, got {value!r} of type '{type(value).__name__}'")
        lst.b.append(bool(value))
    elif kind == "string":
        lst.s.append(_as_bytes(value))
    elif kind == "shape":
        lst.shape.add().CopyFrom(_shape_proto(value))
    elif kind == "tensor":
        _set_tensor(lst.tensor.add(), value)
    elif kind == "func":
        lst.func.add().CopyFrom(_func(value))
    else:
        raise ValueError(f"Unknown attr kind 'list({kind})'")


def attr_value_of(value: Any, kind: str | None = None) -> AttrValue:
    """The ``AttrValue`` message for a Python attr value.

    :param value: a :class:`~flowrt.dtypes.DType`, int, float, bool, str/bytes,
        :class:`~flowrt.tensor_shape.TensorShape` (or list of dims, or None for an unknown
        shape when ``kind`` is ``"shape"``), numpy array, ``NameAttrList``, or a list of
        one of those; an ``AttrValue`` is copied
    :param kind: the attr's kind from its OpDef (``"type"``, ``"list(int)"`` ...); None
        infers it from the Python type
    :raises TypeError: when the value does not fit the kind
    """
    av = AttrValue()
    _fill_attr_value(av, value, kind)
    return av


def _fill_attr_value(av: AttrValue, value: Any, kind: str | None) -> None:
    if isinstance(value, AttrValue):
        av.CopyFrom(value)
        return
    if kind is None:
        kind = _infer_kind(value)
    if kind.startswith("list("):
        inner = kind[5:-1]
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise TypeError(f"Expected a list for a {kind} attr, got {value!r}")
        av.list.SetInParent()
        for v in value:
            _add_to_list(av.list, inner, v)
        return
    _set_scalar(av, kind, value)


def _text(b: bytes) -> Any:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b  # arbitrary bytes stay bytes


def _list_kind(lst: Any) -> str | None:
    present = [f.name for f, _ in lst.ListFields()]
    if not present:
        return None
    kinds = [_FIELD_KIND[f] for f in present]
    if len(kinds) > 1:
        raise ValueError(f"AttrValue list mixes several kinds: {', '.join(kinds)}")
    return kinds[0]


def _from_field(kind: str, v: Any) -> Any:
    if kind == "type":
        return _dt.as_dtype(int(v))
    if kind == "string":
        return _text(v)
    if kind == "shape":
        return TensorShape(v)
    if kind == "tensor":
        return make_ndarray(v)
    if kind == "func":
        out = NameAttrList()
        out.CopyFrom(v)
        return out
    if kind == "int":
        return int(v)
    if kind == "float":
        return float(v)
    return bool(v)


def python_attr_of(attr_value: AttrValue, kind: str | None = None) -> Any:
    """The Python value of an ``AttrValue`` (the inverse of :func:`attr_value_of`).

    Types become :class:`~flowrt.dtypes.DType`, strings ``str`` (bytes that are not
    UTF-8 stay ``bytes``), shapes :class:`~flowrt.tensor_shape.TensorShape`, tensors
    numpy arrays, lists Python lists.

    :param kind: the expected kind from the OpDef; None accepts whatever is set
    :raises ValueError: when the AttrValue holds a different kind than ``kind``
    """
    which = attr_value.WhichOneof("value")
    if kind is not None and kind.startswith("list("):
        inner = kind[5:-1]
        if which is None:
            return []
        if which != "list":
            raise ValueError(f"AttrValue had value with type '{_FIELD_KIND.get(which, which)}'"
                             f" when '{kind}' expected")
        got = _list_kind(attr_value.list)
        if got is None:
            return []
        if got != inner:
            raise ValueError(f"AttrValue had value with type 'list({got})' when '{kind}' "
                             "expected")
        return [_from_field(inner, v) for v in getattr(attr_value.list, _SCALAR_FIELD[inner])]
    if kind is not None:
        want = _SCALAR_FIELD.get(kind)
        if want is None:
            raise ValueError(f"Unknown attr kind {kind!r}")
        if which != want:
            got = "nothing" if which is None else (
                "list" if which == "list" else _FIELD_KIND.get(which, which))
            raise ValueError(f"AttrValue had value with type '{got}' when '{kind}' expected")
        return _from_field(kind, getattr(attr_value, want))
    if which is None:
        return None
    if which == "list":
        got = _list_kind(attr_value.list)
        if got is None:
            return []
        return [_from_field(got, v) for v in getattr(attr_value.list, _SCALAR_FIELD[got])]
    if which == "placeholder":
        return attr_value.placeholder
    return _from_field(_FIELD_KIND[which], getattr(attr_value, which))


# ---------------------------------------------------------------------------------------
# Operation / Graph -> NodeDef / GraphDef
# ---------------------------------------------------------------------------------------
def _attr_kind(op_def: Any, name: str) -> str | None:
    if op_def is not None:
        adef = op_def.attrs.get(name)
        if adef is not None:
            return adef.kind
    return _INTERNAL_ATTR_KINDS.get(name)


def _is_broadcast(arr: np.ndarray) -> bool:
    """One value viewed as a bigger shape (``np.broadcast_to``), as imported from a
    TensorProto that stores a single value for its whole shape."""
    return arr.size > 1 and all(s == 0 for s in arr.strides)


def _fill_tensor_attr(target: TensorProto, value: np.ndarray, dtype: _dt.DType | None) -> None:
    if _is_broadcast(value):
        # Keep TensorFlow's compact form: one value plus the shape.
        _fill_tensor_proto(target, value.reshape(-1)[:1].reshape(()), dtype=dtype,
                           shape=list(value.shape))
    else:
        _fill_tensor_proto(target, value, dtype=dtype)


def _tensor_attr_array(tp: TensorProto) -> np.ndarray:
    """make_ndarray, but a single value filling a bigger shape stays one value viewed
    as that shape (read-only), so writing the node back gives the same compact proto."""
    arr = make_ndarray(tp)
    if not tp.tensor_content and arr.size > 1:
        field = _VAL_FIELD.get(_dt.as_dtype(tp.dtype).base_dtype)
        per_value = 2 if field in ("scomplex_val", "dcomplex_val") else 1
        if field is not None and len(getattr(tp, field)) == per_value:
            arr = np.broadcast_to(arr.reshape(-1)[:1].reshape(()), arr.shape)
    return arr


def _fill_node_attr(av: AttrValue, op: "Operation", name: str, value: Any) -> None:
    kind = _attr_kind(op.op_def, name)
    try:
        if kind == "tensor" and isinstance(value, np.ndarray):
            # A Const's dtype attr tells quantized types from the plain integer types
            # that store them.
            dt = op.node_attrs.get("dtype")
            if not (isinstance(dt, _dt.DType) and dt.base_dtype is not _dt.string and
                    value.dtype != object and dt.base_dtype.np == value.dtype):
                dt = None
            _fill_tensor_attr(av.tensor, value, None if dt is None else dt.base_dtype)
        else:
            _fill_attr_value(av, value, kind)
    except (TypeError, ValueError) as e:
        raise type(e)(f"Node '{op.name}' (op '{op.type}'): cannot serialize attr "
                      f"'{name}' = {value!r}: {e}") from None


def _fill_node_def(op: "Operation", nd: NodeDef) -> None:
    nd.name = op.name
    nd.op = op.type
    nd.input.extend([t._as_node_def_input() for t in op.inputs])
    nd.input.extend(["^" + c.name for c in op.control_inputs])
    if op.device:
        nd.device = op.device
    for name, value in op.node_attrs.items():
        _fill_node_attr(nd.attr[name], op, name, value)


def node_def_of(op: "Operation") -> NodeDef:
    """The ``NodeDef`` of an operation: name, op type, inputs (``"a"`` for output 0,
    ``"a:1"``, then ``"^c"`` for each control input), device and every attr."""
    nd = NodeDef()
    _fill_node_def(op, nd)
    return nd


def graph_to_graph_def(graph: "Graph", add_shapes: bool = False) -> GraphDef:
    """The ``GraphDef`` of a graph: nodes in creation order, ``versions.producer`` set as
    TensorFlow 1.15 sets it.

    :param add_shapes: add an ``_output_shapes`` attr (one static shape per output) to
        every node that has outputs, as ``Graph.as_graph_def(add_shapes=True)`` does
    """
    gd = GraphDef()
    gd.versions.producer = GRAPH_DEF_VERSION
    with graph._lock:
        ops = graph.get_operations()
        for op in ops:
            nd = gd.node.add()
            _fill_node_def(op, nd)
            if add_shapes and op.outputs:
                shapes = nd.attr["_output_shapes"]
                shapes.Clear()
                lst = shapes.list
                for t in op.outputs:
                    lst.shape.add().CopyFrom(t.shape.as_proto())
    return gd


# ---------------------------------------------------------------------------------------
# import_graph_def
# ---------------------------------------------------------------------------------------
def _parse_tensor_name(name: str) -> tuple[str, int]:
    parts = name.split(":")
    if len(parts) == 1:
        return parts[0], 0
    if len(parts) == 2:
        try:
            idx = int(parts[1])
        except ValueError:
            idx = -1
        if idx >= 0 and parts[0]:
            return parts[0], idx
    raise ValueError(f"Cannot convert {name!r} to a tensor name: expected 'op_name' or "
                     "'op_name:output_index'")


def _as_str(x: Any, what: str) -> str:
    if isinstance(x, bytes):
        return x.decode("utf-8")
    if isinstance(x, str):
        return x
    raise TypeError(f"{what} must be strings, got {x!r}")


def _as_graph_def_message(graph_def: Any) -> GraphDef:
    if isinstance(graph_def, GraphDef):
        return graph_def
    # A GraphDef from another protobuf module (TensorFlow's own): same wire format.
    desc = getattr(graph_def, "DESCRIPTOR", None)
    if getattr(desc, "name", None) == "GraphDef" and hasattr(graph_def, "SerializeToString"):
        return GraphDef.FromString(graph_def.SerializeToString())
    raise TypeError("graph_def must be a GraphDef proto.")


def _remove_producer_default_attrs(producer_op_list: Any, graph_def: GraphDef,
                                   op_defs: Mapping[str, Any]) -> None:
    """Drop attrs our OpDefs do not know when they hold the producer's default value,
    so graphs from a newer producer import (TF's ``producer_op_list``)."""
    from .proto import attr_value_pb2 as _av

    producer = {o.name: o for o in producer_op_list.op}
    for node in graph_def.node:
        pdef = producer.get(node.op)
        ours = op_defs.get(node.op)
        if pdef is None or ours is None:
            continue
        for key in list(node.attr):
            if key in ours.attrs:
                continue
            for a in pdef.attr:
                if a.name == key and a.HasField("default_value"):
                    default = _av.AttrValue.FromString(a.default_value.SerializeToString())
                    if node.attr[key] == default:
                        del node.attr[key]
                    break


def _check_attr_constraints(adef: Any, value: Any, where: str) -> None:
    if adef.kind == "type" and adef.allowed is not None and value not in adef.allowed:
        raise ValueError(f"{where}: value for attr '{adef.name}' of {value.name} is not in "
                         f"the list of allowed values: "
                         f"{', '.join(d.name for d in adef.allowed)}")
    if adef.kind == "list(type)" and adef.allowed is not None:
        for v in value:
            if v not in adef.allowed:
                raise ValueError(f"{where}: value for attr '{adef.name}' of {v.name} is not "
                                 f"in the list of allowed values: "
                                 f"{', '.join(d.name for d in adef.allowed)}")
    if adef.kind == "string" and adef.allowed is not None and value not in adef.allowed:
        raise ValueError(f"{where}: value for attr '{adef.name}' of {value!r} is not in the "
                         f"list of allowed values: {', '.join(repr(a) for a in adef.allowed)}")
    if adef.minimum is not None:
        if adef.kind == "int" and value < adef.minimum:
            raise ValueError(f"{where}: value for attr '{adef.name}' of {value} must be at "
                             f"least minimum {adef.minimum}")
        if adef.kind.startswith("list(") and len(value) < adef.minimum:
            raise ValueError(f"{where}: length {len(value)} for attr '{adef.name}' must be at "
                             f"least minimum {adef.minimum}")


def _is_default_like(av: Any) -> bool:
    """An AttrValue holding a zero value (false, 0, empty string or list)."""
    which = av.WhichOneof("value")
    if which is None:
        return True
    if which == "list":
        lv = av.list
        return not any(len(getattr(lv, f)) for f in ("s", "i", "f", "b", "type", "shape",
                                                     "tensor", "func"))
    if which in ("s", "i", "f", "b"):
        return not getattr(av, which)
    return False


def _node_attrs(node: NodeDef, op_def: Any, where: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for key in node.attr:
        av = node.attr[key]
        adef = op_def.attrs.get(key)
        if adef is None:
            if not key.startswith("_") and _is_default_like(av):
                # An attr a newer TF added with its default value (MatMul's grad_a,
                # MaxPool's explicit_paddings ...): dropping it keeps the meaning.
                continue
            if not key.startswith("_"):
                raise ValueError(f"{where}: NodeDef mentions attr '{key}' not in the op "
                                 f"definition of '{op_def.name}' (attrs: "
                                 f"{', '.join(sorted(op_def.attrs)) or 'none'})")
            kind = _INTERNAL_ATTR_KINDS.get(key)
            try:
                attrs[key] = python_attr_of(av, kind)
            except (TypeError, ValueError):
                attrs[key] = python_attr_of(av)
            continue
        try:
            if adef.kind == "tensor" and av.WhichOneof("value") == "tensor":
                value = _tensor_attr_array(av.tensor)
            else:
                value = python_attr_of(av, adef.kind)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{where}: attr '{key}': {e}") from None
        _check_attr_constraints(adef, value, where)
        attrs[key] = value
    for key, adef in op_def.attrs.items():
        if key in attrs:
            continue
        if not adef.has_default:
            raise ValueError(f"{where}: NodeDef is missing attr '{key}', which the op "
                             f"definition of '{op_def.name}' requires (no default)")
        d = adef.default
        attrs[key] = list(d) if isinstance(d, list) else d
    return attrs


def _expected_inputs(op_def: Any, attrs: Mapping[str, Any]) -> list[tuple[_dt.DType, bool]]:
    """(dtype, is_ref) for every input the node must have, from its attrs."""
    out: list[tuple[_dt.DType, bool]] = []
    for arg in op_def.inputs:
        if arg.type_list_attr is not None:
            types = [_dt.as_dtype(t) for t in attrs[arg.type_list_attr]]
        else:
            t = arg.dtype if arg.dtype is not None else _dt.as_dtype(attrs[arg.type_attr])
            n = int(attrs[arg.number_attr]) if arg.number_attr is not None else 1
            types = [t] * n
        out.extend((t, arg.is_ref) for t in types)
    return out


def _find_cycle(remaining: set[str], preds: Mapping[str, list[str]]) -> list[str]:
    """A cycle among ``remaining`` nodes (each has a remaining predecessor)."""
    start = min(remaining)
    path: list[str] = []
    seen: dict[str, int] = {}
    cur = start
    while cur not in seen:
        seen[cur] = len(path)
        path.append(cur)
        cur = next(p for p in preds[cur] if p in remaining)
    return path[seen[cur]:] + [cur]


def _rollback(graph: "Graph", created: Sequence["Operation"]) -> None:
    """Remove ops added by a failed import so the graph is left as it was."""
    for op in reversed(created):
        for t in op.inputs:
            if op in t._consumers:
                t._consumers.remove(op)
        for c in op.control_inputs:
            if op in c._control_outputs:
                c._control_outputs.remove(op)
        if graph._nodes and graph._nodes[-1] is op:
            graph._nodes.pop()
        elif op in graph._nodes:
            graph._nodes.remove(op)
        graph._nodes_by_name.pop(op.name, None)
        graph._names_in_use.pop(op.name.lower(), None)
    if created:
        graph._version_bump()


def import_graph_def(graph_def: Any, input_map: Mapping[str, Any] | None = None,
                     return_elements: Sequence[str] | None = None, name: str | None = None,
                     op_dict: Any = None, producer_op_list: Any = None) -> Any:
    """Import a ``GraphDef`` into the default graph (``tf.import_graph_def``).

    Nodes are created under the name scope ``name`` (default ``"import"``, made unique;
    ``""`` imports without a prefix), in a topological order whatever their order in the
    GraphDef, with the op definitions of the graph's runtime: missing attrs get their
    defaults, shape functions run, devices are kept (inside enclosing device scopes).

    :param graph_def: a ``GraphDef`` message
    :param input_map: ``{"name:i" (or "name" for output 0): Tensor}`` replacing tensors of
        the imported graph by existing ones (dtypes must match); ``"^name"`` keys remap
        control inputs to an existing op
    :param return_elements: op names (``"name"``) and tensor names (``"name:0"``) in the
        imported graph to return, in order
    :param name: the prefix of imported node names
    :param op_dict: ignored (deprecated in TensorFlow)
    :param producer_op_list: an ``OpList`` of the producer's op definitions; attrs we do
        not know are dropped where they hold the producer's default
    :returns: the list of requested Operations/Tensors, or None without
        ``return_elements``
    :raises TypeError: for arguments of the wrong type
    :raises ValueError: for an invalid GraphDef (naming the node): unknown op types or
        attrs, missing inputs, a cycle, dtype mismatches, and for ``input_map`` keys not
        found in the GraphDef
    """
    from .graph import Operation, Tensor, convert_to_tensor, get_default_graph

    del op_dict  # deprecated, as in TensorFlow
    graph_def = _as_graph_def_message(graph_def)
    if input_map is None:
        input_map = {}
    elif not isinstance(input_map, Mapping):
        raise TypeError(f"input_map must be a dictionary mapping strings to Tensor objects, "
                        f"got {type(input_map).__name__}")
    imap: dict[str, Any] = {}
    for k, v in input_map.items():
        imap[_as_str(k, "input_map keys")] = v
    if return_elements is not None:
        if isinstance(return_elements, (str, bytes)):
            raise TypeError("return_elements must be a list of strings.")
        return_elements = [_as_str(x, "return_elements") for x in return_elements]

    graph = get_default_graph()
    graph._check_not_finalized()
    runtime = graph._runtime

    v = graph_def.versions
    if v.min_consumer > GRAPH_DEF_VERSION:
        raise ValueError(f"GraphDef min consumer version {v.min_consumer} is above this "
                         f"runtime's GraphDef version {GRAPH_DEF_VERSION}")
    if GRAPH_DEF_VERSION in list(v.bad_consumers):
        raise ValueError(f"GraphDef disallows consumer version {GRAPH_DEF_VERSION}")

    if producer_op_list is not None:
        copy = GraphDef()
        copy.CopyFrom(graph_def)
        _remove_producer_default_attrs(producer_op_list, copy, runtime.op_defs)
        graph_def = copy

    with graph._lock:
        # -- the prefix, and input_map values as tensors --------------------------------
        scope_name = "import" if name is None else name
        mapped: dict[tuple[str, int], Tensor] = {}
        mapped_ctrl: dict[str, Operation] = {}
        plain = {k: val for k, val in imap.items() if not k.startswith("^")}
        needs_conversion = any(not isinstance(val, Tensor) for val in plain.values())
        if scope_name:
            with graph.as_default(), graph.name_scope(scope_name) as scope:
                prefix = scope[:-1]
                if needs_conversion:
                    with graph.name_scope("_inputs"):
                        plain = {k: convert_to_tensor(val) for k, val in plain.items()}
        else:
            prefix = ""
            if needs_conversion:
                raise ValueError("tf.import_graph_def() requires a non-empty `name` if "
                                 "`input_map` contains non-Tensor values. Try calling "
                                 "tf.convert_to_tensor() on `input_map` values before "
                                 "calling tf.import_graph_def().")
        for k, val in plain.items():
            if val.graph is not graph:
                raise ValueError(f"input_map value for '{k}' ({val.name}) is not in the "
                                 "default graph")
            mapped[_parse_tensor_name(k)] = val
        for k, val in imap.items():
            if not k.startswith("^"):
                continue
            op = val.op if isinstance(val, Tensor) else val
            if not isinstance(op, Operation):
                raise TypeError(f"input_map value for control input '{k}' must be an "
                                f"Operation or Tensor, got {val!r}")
            if op.graph is not graph:
                raise ValueError(f"input_map value for '{k}' ({op.name}) is not in the "
                                 "default graph")
            mapped_ctrl[k[1:]] = op

        # -- parse nodes and their inputs -----------------------------------------------
        nodes: dict[str, NodeDef] = {}
        index: dict[str, int] = {}
        for i, node in enumerate(graph_def.node):
            if not node.name:
                raise ValueError(f"Node {i} (op '{node.op}') of the GraphDef has no name")
            if node.name in nodes:
                raise ValueError(f"Node '{node.name}' is not unique in the GraphDef")
            nodes[node.name] = node
            index[node.name] = i
        used_keys: set[tuple[str, int]] = set()
        used_ctrl: set[str] = set()
        # per node: data inputs as ("mapped", Tensor) or ("node", src, idx); control
        # inputs as ("mapped", Operation) or ("node", src)
        data_in: dict[str, list[tuple[Any, ...]]] = {}
        ctrl_in: dict[str, list[tuple[Any, ...]]] = {}
        preds: dict[str, list[str]] = {}
        for node in graph_def.node:
            where = f"Node '{node.name}' (op '{node.op}')"
            d_list: list[tuple[Any, ...]] = []
            c_list: list[tuple[Any, ...]] = []
            p: list[str] = []
            for inp in node.input:
                if inp.startswith("^"):
                    src = inp[1:]
                    if src in mapped_ctrl:
                        used_ctrl.add(src)
                        c_list.append(("mapped", mapped_ctrl[src]))
                    elif src in nodes:
                        c_list.append(("node", src))
                        p.append(src)
                    else:
                        raise ValueError(f"{where} has control input '{inp}', but node "
                                         f"'{src}' does not exist in the GraphDef")
                    continue
                if c_list:
                    raise ValueError(f"{where}: control inputs must come after regular "
                                     f"inputs, but '{inp}' follows one")
                try:
                    key = _parse_tensor_name(inp)
                except ValueError as e:
                    raise ValueError(f"{where}: bad input {inp!r}: {e}") from None
                if key in mapped:
                    used_keys.add(key)
                    d_list.append(("mapped", mapped[key]))
                elif key[0] in nodes:
                    d_list.append(("node", key[0], key[1]))
                    p.append(key[0])
                else:
                    raise ValueError(f"{where} has input '{inp}', but node '{key[0]}' does "
                                     "not exist in the GraphDef (and the input is not in "
                                     "input_map)")
            data_in[node.name] = d_list
            ctrl_in[node.name] = c_list
            preds[node.name] = p

        # -- topological order (GraphDef order among ready nodes) -----------------------
        # A while loop's back edge (NextIteration -> Merge) is no ordering constraint:
        # the Merge is created with a forward input in that slot, and the edge is set
        # once every op exists (as TF's importer does).
        back: dict[str, list[tuple[int, str, int]]] = {}
        for node in graph_def.node:
            if node.op not in _MERGE_OPS:
                continue
            d_list = data_in[node.name]
            slots = [(i, src[1], src[2]) for i, src in enumerate(d_list)
                     if src[0] == "node" and nodes[src[1]].op in _NEXT_ITERATION_OPS]
            if slots and len(slots) < len(d_list):
                back[node.name] = slots
                p = preds[node.name]
                for _, src_name, _ in slots:
                    p.remove(src_name)
        pending = {n: len(set(p)) for n, p in preds.items()}
        succs: dict[str, list[str]] = {n: [] for n in nodes}
        for n, p in preds.items():
            for src in set(p):
                succs[src].append(n)
        ready = [index[n] for n, c in pending.items() if c == 0]
        heapq.heapify(ready)
        order: list[NodeDef] = []
        while ready:
            node = graph_def.node[heapq.heappop(ready)]
            order.append(node)
            for s in succs[node.name]:
                pending[s] -= 1
                if pending[s] == 0:
                    heapq.heappush(ready, index[s])
        if len(order) != len(nodes):
            remaining = {n for n, c in pending.items() if c > 0}
            cycle = _find_cycle(remaining, preds)
            raise ValueError(f"GraphDef contains a cycle, so node '{cycle[0]}' can never "
                             f"run: {' -> '.join(cycle)} (each node is an input of the next)")

        # -- final names: prefixed, made unique against the graph -----------------------
        def taken(n: str) -> bool:
            return n in graph._nodes_by_name or n.lower() in graph._names_in_use

        final: dict[str, str] = {}
        chosen: set[str] = set()
        wanted = {(f"{prefix}/{n}" if prefix else n) for n in nodes}
        for node in graph_def.node:
            base = f"{prefix}/{node.name}" if prefix else node.name
            cand, count = base, 0
            while taken(cand) or cand in chosen or (count > 0 and cand in wanted):
                count += 1
                cand = f"{base}_{count}"
            final[node.name] = cand
            chosen.add(cand)

        def rename_loc(s: str) -> str:
            if not s.startswith("loc:@"):
                return s
            target = s[5:]
            if target in final:
                return "loc:@" + final[target]
            return "loc:@" + (f"{prefix}/{target}" if prefix else target)

        # -- create the ops -------------------------------------------------------------
        created_by_name: dict[str, Operation] = {}
        created: list[Operation] = []
        try:
            for node in order:
                where = f"Node '{node.name}' (op '{node.op}')"
                try:
                    op_def = runtime.op_def(node.op)
                except ValueError as e:
                    raise ValueError(f"{where}: {e}") from None
                attrs = _node_attrs(node, op_def, where)
                if "_class" in attrs and isinstance(attrs["_class"], list):
                    attrs["_class"] = [rename_loc(_text(x) if isinstance(x, bytes) else x)
                                       for x in attrs["_class"]]
                try:
                    expected = _expected_inputs(op_def, attrs)
                except (KeyError, TypeError, ValueError) as e:
                    raise ValueError(f"{where}: cannot work out its input types: {e}") from None
                if len(expected) != len(data_in[node.name]):
                    raise ValueError(
                        f"{where} has {len(data_in[node.name])} inputs, but its op definition "
                        f"expects {len(expected)} ({', '.join(t.name for t, _ in expected)})")
                if node.op == "Const" and isinstance(attrs.get("value"), np.ndarray) and \
                        isinstance(attrs.get("dtype"), _dt.DType):
                    v_dt = _dtype_of_array(attrs["value"])
                    if v_dt.np != attrs["dtype"].np:
                        raise ValueError(f"{where}: its value is {v_dt.name} but its dtype "
                                         f"attr is {attrs['dtype'].name}")
                inputs: list[Tensor] = []
                d_list = data_in[node.name]
                later = {i for i, _, _ in back.get(node.name, ())}
                if later:  # back edges: a forward input stands in until every op exists
                    fwd = next(src for i, src in enumerate(d_list) if i not in later)
                    d_list = [fwd if i in later else src for i, src in enumerate(d_list)]
                for i, (src, (want, is_ref)) in enumerate(zip(d_list, expected)):
                    if src[0] == "mapped":
                        t = src[1]
                    else:
                        src_op = created_by_name[src[1]]
                        if src[2] >= len(src_op.outputs):
                            raise ValueError(
                                f"{where}: input {i} refers to output {src[2]} of node "
                                f"'{src[1]}', which has {len(src_op.outputs)} outputs")
                        t = src_op.outputs[src[2]]
                    if t.dtype.base_dtype is not want.base_dtype or \
                            (is_ref and not t.dtype.is_ref_dtype):
                        shown = want._as_ref.name if is_ref else want.name
                        raise ValueError(f"Input {i} of node '{final[node.name]}' was passed "
                                         f"{t.dtype.name} from {t.name} incompatible with "
                                         f"expected {shown}.")
                    inputs.append(t)
                try:
                    with graph.control_dependencies(None):
                        op = graph.create_op(node.op, inputs, dtypes=None,
                                             name=final[node.name] + "/", attrs=attrs,
                                             op_def=op_def, compute_device=False)
                except (ValueError, TypeError, KeyError, IndexError) as e:
                    # create_op may have added the node before its shape function failed
                    bad = graph._nodes_by_name.get(final[node.name])
                    if bad is not None and bad not in created:
                        created.append(bad)
                    raise ValueError(f"{where}: {e}") from None
                created.append(op)
                created_by_name[node.name] = op
                for c in ctrl_in[node.name]:
                    op._add_control_input(c[1] if c[0] == "mapped" else created_by_name[c[1]])

            # -- loop back edges, now that their NextIteration ops exist --------------
            for mname, slots in back.items():
                mop = created_by_name[mname]
                for i, src, k in slots:
                    nxt = created_by_name[src]
                    if k >= len(nxt.outputs):
                        raise ValueError(f"Node '{mname}' (op '{mop.type}'): input {i} "
                                         f"refers to output {k} of node '{src}', which has "
                                         f"{len(nxt.outputs)} outputs")
                    t = nxt.outputs[k]
                    want = mop.inputs[i].dtype
                    if t.dtype.base_dtype is not want.base_dtype:
                        raise ValueError(f"Input {i} of node '{final[mname]}' was passed "
                                         f"{t.dtype.name} from {t.name} incompatible with "
                                         f"expected {want.base_dtype.name}.")
                    mop._update_input(i, t)

            # -- devices: the node's own inside enclosing scopes; colocated ops follow --
            coloc: list[tuple[Operation, list[str]]] = []
            for node in order:
                op = created_by_name[node.name]
                groups = [g[5:] for g in op.node_attrs.get("_class", []) or []
                          if isinstance(g, str) and g.startswith("loc:@") and g[5:] != op.name]
                if groups:
                    coloc.append((op, groups))
                    continue
                try:
                    if node.device:
                        with graph.device(node.device):
                            graph._apply_device_functions(op)
                    else:
                        graph._apply_device_functions(op)
                except ValueError as e:
                    raise ValueError(f"Node '{node.name}' (op '{node.op}'): bad device "
                                     f"{node.device!r}: {e}") from None
            for op, groups in coloc:
                device = ""
                for g in groups:
                    other = graph._nodes_by_name.get(g)
                    if other is None:
                        raise ValueError(f"Specified colocation to an op that does not exist "
                                         f"during import: {g} in {op.name}")
                    if other.device:
                        device = other.device
                        break
                if device:
                    op._set_device(device)

            # -- input_map keys that matched nothing ------------------------------------
            unused = []
            for key, val in imap.items():
                if key.startswith("^"):
                    if key[1:] not in used_ctrl and key[1:] not in nodes:
                        unused.append(key)
                    continue
                src, idx = _parse_tensor_name(key)
                if (src, idx) in used_keys:
                    continue
                if src not in created_by_name or idx >= len(created_by_name[src].outputs):
                    unused.append(key)
            if unused:
                raise ValueError("Attempted to map inputs that were not found in graph_def: "
                                 f"[{', '.join(unused)}]")

            # -- return elements --------------------------------------------------------
            if return_elements is None:
                return None
            results: list[Any] = []
            for r in return_elements:
                if ":" in r:
                    src, idx = _parse_tensor_name(r)
                    if (src, idx) in mapped:
                        results.append(mapped[(src, idx)])
                        continue
                    op = created_by_name.get(src)
                    if op is None or idx >= len(op.outputs):
                        raise ValueError(f"Requested return tensor '{r}' not found in graph "
                                         "def")
                    results.append(op.outputs[idx])
                else:
                    op = created_by_name.get(r)
                    if op is None:
                        raise ValueError(f"Requested return node '{r}' not found in graph def")
                    results.append(op)
            return results
        except BaseException:
            _rollback(graph, created)
            raise
