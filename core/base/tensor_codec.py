"""Python values <-> TensorFlow's protobuf messages: ``TensorProto`` and ``AttrValue``.

The lowest layer's codec, shared by the client's GraphDef I/O (``framework.graph_def``),
the wire (``distributed.rpc``, ``distributed.ir_wire``) and partitioning (Send/Recv attrs).
Tensors are laid out exactly as TensorFlow 1.15 writes them, so protos move between flowrt
and TensorFlow in both directions.

- :func:`make_tensor_proto` / :func:`make_ndarray`: arrays <-> ``TensorProto``
- :func:`attr_value_of` / :func:`python_attr_of`: attr values <-> ``AttrValue``
- :func:`check_attr_constraints`: an attr value against its op definition's constraints
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

import numpy as np

from . import dtypes as _dt
from ..proto import attr_value_pb2, graph_def_pb2, node_def_pb2, tensor_pb2
from ..proto import tensor_shape_pb2
from .tensor_shape import Dimension, TensorShape, as_shape

__all__ = [
    "make_tensor_proto", "make_ndarray", "attr_value_of", "python_attr_of",
    "fill_tensor_proto", "fill_attr_value", "check_attr_constraints", "dtype_of_array",
    "GRAPH_DEF_VERSION", "GRAPH_DEF_VERSION_MIN_CONSUMER", "GRAPH_DEF_VERSION_MIN_PRODUCER",
    "VAL_FIELD", "INTERNAL_ATTR_KINDS", "text_of_bytes", "numpy_value_for",
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
VAL_FIELD: dict[_dt.DType, str] = {
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


def dtype_of_array(arr: np.ndarray) -> _dt.DType:
    return _dt.string if arr.dtype == object else _dt.as_dtype(arr.dtype)


def _little_endian(arr: np.ndarray) -> np.ndarray:
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and np.little_endian is False):
        return arr.astype(arr.dtype.newbyteorder("<"))
    return arr


def _append_values(proto: TensorProto, dtype: _dt.DType, flat: np.ndarray) -> None:
    """Write ``flat`` into the typed repeated field TensorFlow uses for ``dtype``."""
    field = VAL_FIELD.get(dtype)
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
    fill_tensor_proto(proto, values, dtype, shape, verify_shape, allow_broadcast)
    return proto


def fill_tensor_proto(proto: TensorProto, values: Any, dtype: Any = None, shape: Any = None,
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
    proto_dtype = want if want is not None else dtype_of_array(arr)
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
    if dtype in (_dt.resource, _dt.variant) or dtype not in VAL_FIELD:
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

    field = getattr(tensor, VAL_FIELD[dtype])
    if VAL_FIELD[dtype] == "half_val":
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
INTERNAL_ATTR_KINDS = {"_class": "list(string)", "_output_shapes": "list(shape)"}


def _infer_kind(value: Any) -> str:
    """The ``AttrValue`` kind (``"int"``, ``"list(float)"``, ...) that ``value`` is written as.

    An empty list is ``list(int)``; a list mixing ints and floats is ``list(float)``.

    :raises TypeError: for a type with no ``AttrValue`` form, or a list that mixes kinds
        or nests lists
    """
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
        fill_tensor_proto(target, value)


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
    """Append ``value`` to the ``AttrValue.ListValue`` ``lst`` as an element of ``kind``.

    :raises TypeError: if ``value`` does not fit ``kind``
    :raises ValueError: for an unknown kind
    """
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
    fill_attr_value(av, value, kind)
    return av


def fill_attr_value(av: AttrValue, value: Any, kind: str | None) -> None:
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


def text_of_bytes(b: bytes) -> Any:
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
        return text_of_bytes(v)
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




def check_attr_constraints(adef: Any, value: Any, where: str) -> None:
    """Check ``value`` against the constraints of attr def ``adef`` (TF's op-def validation).

    Checks the allowed types or strings and the minimum of an int or of a list's length.

    :param where: names the node or op in the error message
    :raises ValueError: if ``value`` breaks a constraint
    """
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


# ---------------------------------------------------------------------------------------
# Python values -> ndarrays, with TensorFlow's inference and checks
# ---------------------------------------------------------------------------------------
_INTEGRAL = (int, np.integer)
_REAL = (int, float, np.integer, np.floating)
_COMPLEX = (int, float, complex, np.number)
_TEXT = (str, bytes, np.str_, np.bytes_)


def _leaves(value: Any) -> Iterator[Any]:
    """The non-list leaves of nested lists/tuples (TF's ``nest.flatten`` for values)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(reversed(v))
        else:
            yield v


def _leaf_ok(dtype: _dt.DType) -> Callable[[Any], bool]:
    """TF's ``_AssertCompatible`` element test for Python values of ``dtype``."""
    if dtype is _dt.bool:
        return lambda v: isinstance(v, bool)
    if dtype is _dt.string:
        return lambda v: isinstance(v, _TEXT)
    if dtype.is_complex:
        return lambda v: isinstance(v, _COMPLEX) and not _is_graph_tensor(v)
    if dtype.is_floating:
        return lambda v: isinstance(v, _REAL) and not isinstance(v, np.complexfloating)
    if dtype.is_integer or dtype.is_quantized:
        return lambda v: isinstance(v, _INTEGRAL) or isinstance(v, Dimension)
    return lambda v: not _is_graph_tensor(v)


def _is_graph_tensor(v: Any) -> bool:
    """A ``tf.Tensor`` (of the framework layer, which this one cannot import)."""
    return any(c.__name__ == "Tensor" for c in type(v).__mro__)


def _as_bytes_array(value: Any, original: Any) -> np.ndarray:
    """An object array of ``bytes`` (TF string tensors) from strings/bytes."""
    try:
        arr = np.asarray(value, dtype=object)
    except ValueError as e:
        raise ValueError(f"Argument must be a dense tensor: {original!r} - {e}") from None
    flat = arr.reshape(-1)
    out = np.empty(flat.shape, dtype=object)
    for i, v in enumerate(flat):
        if isinstance(v, (bytes, np.bytes_)):
            out[i] = bytes(v)
        elif isinstance(v, (str, np.str_)):
            out[i] = str(v).encode()
        else:
            raise TypeError(f"Failed to convert object of type {type(original)} to Tensor. "
                            f"Contents: {original!r}. Consider casting elements to a "
                            "supported type.")
    return out.reshape(arr.shape)


def _dense_array(value: Any, npd: Any) -> np.ndarray:
    try:
        return np.array(value, dtype=npd)
    except NotImplementedError:  # a symbolic Tensor inside a list
        raise TypeError("List of Tensors when single Tensor expected") from None
    except OverflowError as e:
        if npd is None:
            raise ValueError(f"Can't convert Python int to the default dtype: {e}") from None
        try:  # TF wraps out-of-range Python ints to the dtype, as C casts do
            return np.array(value, dtype=np.int64 if np.dtype(npd).kind == "i" else
                            np.uint64).astype(npd)
        except OverflowError:
            raise ValueError(f"Can't convert Python int to {np.dtype(npd).name}: {e}") \
                from None
    except ValueError as e:
        raise ValueError(f"Argument must be a dense tensor: {value!r} - {e}") from None


def numpy_value_for(value: Any, dtype: _dt.DType | None = None) -> np.ndarray:
    """Convert a Python/numpy value to an ndarray of ``dtype`` with TF's rules
    (``make_tensor_proto``).

    numpy values are cast to ``dtype``; Python values must match it element by element
    (a Python float is never an integer, a Python int never a bool: TypeError). Without
    a dtype, numpy values keep theirs, Python floats become float32 and Python ints
    int32 (int64 when they do not fit); strings become object arrays of ``bytes``.

    :raises TypeError: an element does not match ``dtype``, or the value is no tensor
        value at all
    :raises ValueError: ``None``, or ragged nested lists
    """
    if value is None:
        raise ValueError("None values not supported.")
    if dtype is not None:
        dtype = dtype.base_dtype
    if _is_graph_tensor(value):
        raise TypeError("List of Tensors when single Tensor expected" if dtype is None else
                        f"Expected {dtype.name}, got {value!r} of type 'Tensor' instead.")
    if not isinstance(value, (np.ndarray, np.generic)) and \
            (hasattr(value, "__array__") or hasattr(value, "__array_interface__")):
        value = np.asarray(value)
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        if arr.dtype.kind in ("U", "S", "O"):
            if dtype is None or dtype is _dt.string:
                return _as_bytes_array(arr, value)
            raise TypeError(f"Expected {dtype.name}, got {value!r} of type "
                            f"'{type(value).__name__}' instead.")
        if dtype is None:
            _dt.as_dtype(arr.dtype)  # TypeError for dtypes TF does not have
            return arr
        if dtype is _dt.string:
            raise TypeError(f"Expected string, got {value!r} of type "
                            f"'{type(value).__name__}' instead.")
        npd = dtype.np
        return arr if arr.dtype == npd else arr.astype(npd)
    if dtype is not None:
        ok = _leaf_ok(dtype)
        for leaf in _leaves(value):
            if not ok(leaf):
                raise TypeError(f"Expected {dtype.name}, got {leaf!r} of type "
                                f"'{type(leaf).__name__}' instead.")
        if dtype is _dt.string:
            return _as_bytes_array(value, value)
        return _dense_array(value, dtype.np)
    if isinstance(value, (str, bytes)):
        return _as_bytes_array(value, value)
    arr = _dense_array(value, None)
    k = arr.dtype.kind
    if k == "O" and isinstance(value, (list, tuple)):
        ints = _dimensions_to_ints(value)
        if ints is not None:  # lists holding known Dimensions (``x.shape[1]``)
            return numpy_value_for(ints)
    if k in ("U", "S", "O"):
        return _as_bytes_array(value, value)
    if arr.dtype == np.float64:
        return arr.astype(np.float32)
    if arr.dtype == np.int64:
        small = arr.astype(np.int32)
        return small if np.array_equal(small, arr) else arr
    _dt.as_dtype(arr.dtype)
    return arr


def _dimensions_to_ints(value: Any) -> Any:
    """``value`` with known Dimensions replaced by ints; None if it holds no Dimension
    or an unknown one."""
    found = False

    def walk(v: Any) -> Any:
        nonlocal found
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        if isinstance(v, Dimension):
            if v.value is None:
                raise ValueError
            found = True
            return v.value
        return v

    try:
        out = walk(value)
    except ValueError:
        return None
    return out if found else None
