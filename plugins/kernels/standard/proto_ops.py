"""``tf.io.decode_proto`` and ``tf.io.encode_proto``: fields of serialized protocol
buffers to and from tensors (TF 1.15's ops DecodeProtoV2 and EncodeProto).

A message type is looked up by its full name in protobuf's default descriptor pool
(``descriptor_source='local://'``: ``tf.train.Example``, flowrt's own messages, any
message whose module the program has imported; TF's ``tensorflow.X`` names resolve to
flowrt's ``flowrt.X`` messages, which are wire-compatible), in a ``FileDescriptorSet``
given inline (``'bytes://<serialized set>'``) or in a file holding one (any other
value, read with gfile).

Both ops work through the protobuf runtime on a *shadow* of the message type: a proto2
message with the same field names and numbers in which every field is repeated,
submessage and string fields are ``bytes`` and enum fields ``int32``, and repeated
scalars keep the original's packing. Parsing with it gives each requested field's
values as they appear on the wire (a submessage or a map entry as its raw bytes, in
wire order; a singular field seen twice gives both, of which TF keeps the last), and
serialising it writes what TF's encoder writes: fields in number order, each value of
a singular field tagged, repeated scalars packed where the original packs them.
"""
from __future__ import annotations

import collections
from typing import Any, Sequence

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format
from google.protobuf.descriptor import FieldDescriptor as _FD

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.framework import gfile
from flowrt.graph import Tensor, apply_op, convert_to_tensor
from flowrt.op_registry import OpDef
from flowrt.plugin.file_policy import check_path
from flowrt.proto import example_pb2  # noqa: F401 -- registers tf.train.Example & co.
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import invalid, ks

__all__ = ["decode_proto", "encode_proto"]

#: the numpy type of each protobuf field type's values on the wire
_WIRE_NP: dict[int, Any] = {
    _FD.TYPE_DOUBLE: np.float64, _FD.TYPE_FLOAT: np.float32,
    _FD.TYPE_INT64: np.int64, _FD.TYPE_SINT64: np.int64, _FD.TYPE_SFIXED64: np.int64,
    _FD.TYPE_UINT64: np.uint64, _FD.TYPE_FIXED64: np.uint64,
    _FD.TYPE_INT32: np.int32, _FD.TYPE_SINT32: np.int32, _FD.TYPE_SFIXED32: np.int32,
    _FD.TYPE_ENUM: np.int32, _FD.TYPE_UINT32: np.uint32, _FD.TYPE_FIXED32: np.uint32,
    _FD.TYPE_BOOL: np.bool_, _FD.TYPE_STRING: object, _FD.TYPE_BYTES: object,
    _FD.TYPE_MESSAGE: object, _FD.TYPE_GROUP: object}
#: the dtypes a field type converts to (TF's IsCompatibleType; int64 for the unsigned
#: 64-bit types as TF 1.15 had it)
_COMPATIBLE: dict[int, tuple[_dt.DType, ...]] = {
    _FD.TYPE_DOUBLE: (_dt.float64,), _FD.TYPE_FLOAT: (_dt.float32, _dt.float64),
    _FD.TYPE_INT64: (_dt.int64,), _FD.TYPE_SINT64: (_dt.int64,),
    _FD.TYPE_SFIXED64: (_dt.int64,),
    _FD.TYPE_UINT64: (_dt.uint64, _dt.int64), _FD.TYPE_FIXED64: (_dt.uint64, _dt.int64),
    _FD.TYPE_INT32: (_dt.int32, _dt.int64), _FD.TYPE_SINT32: (_dt.int32, _dt.int64),
    _FD.TYPE_SFIXED32: (_dt.int32, _dt.int64), _FD.TYPE_ENUM: (_dt.int32,),
    _FD.TYPE_UINT32: (_dt.uint32, _dt.uint64, _dt.int64),
    _FD.TYPE_FIXED32: (_dt.uint32, _dt.uint64, _dt.int64),
    _FD.TYPE_BOOL: (_dt.bool,), _FD.TYPE_STRING: (_dt.string,),
    _FD.TYPE_BYTES: (_dt.string,), _FD.TYPE_MESSAGE: (_dt.string,),
    _FD.TYPE_GROUP: (_dt.string,)}
#: TF's FieldDescriptor::TypeName of each field type (its error messages)
_TYPE_NAME = {getattr(_FD, n): n[5:].lower() for n in dir(_FD) if n.startswith("TYPE_")}
#: a field's type in the shadow message: the same, but for these
_SHADOW_TYPE = {_FD.TYPE_MESSAGE: _FD.TYPE_BYTES, _FD.TYPE_STRING: _FD.TYPE_BYTES,
                _FD.TYPE_ENUM: _FD.TYPE_INT32}


def _str(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


# =======================================================================================
# descriptors
# =======================================================================================
def _pool_from_set(data: bytes, where: str) -> Any:
    """A descriptor pool holding the files of the serialized FileDescriptorSet ``data``
    (added dependencies first, whatever their order in the set)."""
    fds = descriptor_pb2.FileDescriptorSet()
    try:
        fds.ParseFromString(data)
    except Exception:  # noqa: BLE001 -- any decode error: the source is not a set
        raise invalid(f"Source does not represent serialized file descriptor set proto: "
                      f"{where}") from None
    pool = descriptor_pool.DescriptorPool()
    left, added = list(fds.file), set()
    while left:
        ready = [f for f in left if set(f.dependency) <= added] or left[:1]
        for f in ready:
            try:
                pool.Add(f)
            except Exception as e:  # noqa: BLE001 -- a bad or incomplete set
                raise invalid(f"Unable to load descriptor {f.name} from {where}: {e}") \
                    from None
            added.add(f.name)
            left.remove(f)
    return pool


def _message_descriptor(message_type: str, source: str | bytes) -> Any:
    """The descriptor of ``message_type`` in the pool ``source`` names."""
    raw = source if isinstance(source, bytes) else source.encode("utf-8")
    source = _str(source)
    if source in ("", "local://"):
        pool = descriptor_pool.Default()
    elif raw.startswith(b"bytes://"):
        pool = _pool_from_set(raw[len(b"bytes://"):], "bytes://")
    else:
        try:
            data = gfile.read_file_to_string(source, binary_mode=True)
        except errors.OpError as e:  # as TF: the source is then not a descriptor set
            raise invalid(f"Source does not represent serialized file descriptor set "
                          f"proto: cannot read {source} ({e.message})") from None
        pool = _pool_from_set(data, source)
    names = [message_type]
    if source in ("", "local://") and message_type.startswith("tensorflow."):
        names.append("flowrt." + message_type[len("tensorflow."):])
    for n in names:
        try:
            return pool.FindMessageTypeByName(n)
        except KeyError:
            continue
    raise invalid(f"No descriptor found for message type {message_type}")


def _checked_source(ctx: Any, attrs: Any) -> str | bytes:
    """The node's ``descriptor_source``; a file name is checked against the worker's
    file roots first."""
    source = attrs.get("descriptor_source", "local://")
    raw = source if isinstance(source, bytes) else source.encode("utf-8")
    if raw not in (b"", b"local://") and not raw.startswith(b"bytes://"):
        check_path(ctx, _str(source))
    return source


class _Schema:
    """The requested fields of a message type and the shadow message that reads and
    writes them (see the module docstring)."""

    def __init__(self, message_type: str, source: str | bytes, field_names: Sequence[str]):
        desc = _message_descriptor(message_type, source)
        self.message_type = message_type
        self.original = message_factory.GetMessageClass(desc)
        self.fields = []
        for name in field_names:
            fd = desc.fields_by_name.get(name)
            if fd is None:
                raise invalid(f"Unknown field: {name} in message type {message_type}")
            if fd.type == _FD.TYPE_GROUP:
                raise errors.UnimplementedError(
                    None, None, f"Group field {fd.full_name} is not supported")
            self.fields.append(fd)
        self.shadow = _shadow_class(desc)

    def parse(self, data: bytes, binary: bool, sanitize: bool) -> Any:
        """``data`` (binary or text format) as a shadow message; DataLossError if it
        does not parse."""
        try:
            if not binary:
                text = data.decode("utf-8") if isinstance(data, bytes) else data
                data = text_format.Parse(text, self.original()).SerializeToString()
            elif sanitize:
                data = self.original.FromString(data).SerializeToString()
            return self.shadow.FromString(data)
        except Exception:  # noqa: BLE001 -- any parse error is corrupt input
            what = "binary" if binary else "text"
            raise errors.DataLossError(
                None, None, f"Unable to parse {what} protobuf of message type "
                            f"{self.message_type}") from None


def _shadow_class(desc: Any) -> type:
    """The shadow message class of ``desc`` (every field but groups, repeated)."""
    fdp = descriptor_pb2.FileDescriptorProto(
        name=f"flowrt_shadow/{desc.full_name}.proto", package="flowrt_shadow",
        syntax="proto2")
    msg = fdp.message_type.add(name="Shadow")
    for fd in desc.fields:
        if fd.type == _FD.TYPE_GROUP:
            continue
        f = msg.field.add(name=fd.name, number=fd.number, type=_SHADOW_TYPE.get(fd.type, fd.type),
                          label=_FD.LABEL_REPEATED)
        if _repeated(fd) and getattr(fd, "is_packed", False):
            f.options.packed = True
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("flowrt_shadow.Shadow"))


def _repeated(fd: Any) -> bool:
    """Whether ``fd`` is a repeated field (``label`` is gone from protobuf 6's
    descriptors; ``is_repeated`` is new)."""
    rep = getattr(fd, "is_repeated", None)
    return bool(rep) if rep is not None else fd.label == _FD.LABEL_REPEATED


def _default(fd: Any, dtype: _dt.DType) -> Any:
    """What TF pads a field's output with: its default (zero, ``b''`` for a repeated or
    message field) as ``dtype``."""
    v = None if _repeated(fd) else fd.default_value
    if dtype is _dt.string:
        return v.encode("utf-8") if isinstance(v, str) else (v or b"")
    return np.array(v or 0, dtype=_WIRE_NP[fd.type]).astype(dtype.np)


# =======================================================================================
# ops
# =======================================================================================
def _decode_shape(op: Any) -> list[TensorShape]:
    s = op.inputs[0].shape
    n = len(op.get_attr("field_names"))
    if s.ndims is None:
        return [unknown_shape() for _ in op.outputs]
    return ([s.concatenate([n])]
            + [s.concatenate([None]) for _ in op.get_attr("output_types")])


def _encode_shape(op: Any) -> list[TensorShape]:
    for v in op.inputs[1:]:
        if v.shape.ndims is not None and v.shape.ndims < 2:
            raise ValueError(f"Shape must be at least rank 2 but is rank {v.shape.ndims} "
                             f"for '{op.name}' (op: '{op.type}')")
    s = op.inputs[0].shape
    if s.ndims is None:
        return [unknown_shape()]
    if s.ndims < 1:
        raise ValueError(f"Shape must be at least rank 1 but is rank 0 for '{op.name}' "
                         f"(op: '{op.type}')")
    return [TensorShape(s.as_list()[:-1])]


ks.op(OpDef("DecodeProtoV2", inputs=["bytes: string"],
            outputs=["sizes: int32", "values: output_types"],
            attrs=["message_type: string", "field_names: list(string)",
                   "output_types: list(type) >= 0", "descriptor_source: string = 'local://'",
                   "message_format: string = 'binary'", "sanitize: bool = false"],
            shape_fn=_decode_shape,
            doc="Extracts fields of serialized protocol buffer messages into tensors."),
      OpDef("EncodeProto", inputs=["sizes: int32", "values: Tinput_types"],
            outputs=["bytes: string"],
            attrs=["field_names: list(string)", "message_type: string",
                   "descriptor_source: string = 'local://'", "Tinput_types: list(type)"],
            shape_fn=_encode_shape,
            doc="Serializes protocol buffer messages from tensors of their fields."))
ks.not_differentiable("DecodeProtoV2", "EncodeProto")


def _fmt(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _field_values(msg: Any, fd: Any) -> list[Any]:
    """A field's values in a shadow message: all of a repeated field's, the last one
    (TF keeps the last) of a singular field seen on the wire."""
    vals = getattr(msg, fd.name)
    if _repeated(fd):
        return list(vals)
    return list(vals[-1:])


@ks.kernel("DecodeProtoV2", device_type="CPU")
def _decode_proto_kernel(ctx: Any) -> Any:
    """DecodeProtoV2: the schema and checks once per node (TF's kernel constructor),
    then per run every message parsed into its shadow and each field padded to the
    batch's most values (at least one) with its default."""
    a = ctx.attrs
    names = [_str(n) for n in a["field_names"]]
    types = [_dt.as_dtype(t) for t in a["output_types"]]
    if len(names) != len(types):
        raise invalid("field_names and output_types attributes must have the same length")
    schema = _Schema(_str(a["message_type"]), _checked_source(ctx, a), names)
    for fd, dt in zip(schema.fields, types):
        if dt.base_dtype not in _COMPATIBLE[fd.type]:
            raise invalid(f"Unexpected output type for {fd.full_name}: {fd.cpp_type} to "
                          f"{dt.as_datatype_enum}")
    fmt = _str(a.get("message_format", "binary"))
    if fmt not in ("binary", "text"):
        raise invalid("format must be one of binary or text")
    sanitize = bool(a.get("sanitize", False))
    defaults = [_default(fd, dt) for fd, dt in zip(schema.fields, types)]

    def compute(data: Any) -> Any:
        """``[sizes, *values]`` of the messages in ``data``."""
        arr = np.asarray(data)
        if arr.size < 1:
            raise invalid("Bufs argument must contain at least one value")
        msgs = [schema.parse(b if isinstance(b, bytes) else _str(b).encode("utf-8"),
                             fmt == "binary", sanitize)
                for b in arr.reshape(-1).tolist()]
        sizes = np.zeros((len(msgs), len(names)), dtype=np.int32)
        outs = []
        for j, (fd, dt, dv) in enumerate(zip(schema.fields, types, defaults)):
            vals = [_field_values(m, fd) for m in msgs]
            sizes[:, j] = [len(v) for v in vals]
            width = max(1, int(sizes[:, j].max()))
            out = np.empty((len(msgs), width), dtype=object if dt is _dt.string else dt.np)
            out[...] = dv
            for i, v in enumerate(vals):
                if v:
                    out[i, :len(v)] = (v if dt is _dt.string else
                                       np.array(v, dtype=_WIRE_NP[fd.type]).astype(dt.np))
            outs.append(out.reshape(arr.shape + (width,)))
        return [sizes.reshape(arr.shape + (len(names),)), *outs]

    return compute


@ks.kernel("EncodeProto", device_type="CPU")
def _encode_proto_kernel(ctx: Any) -> Any:
    """EncodeProto: TF's shape and size checks, then each message built as a shadow
    message (fields in number order) and serialized."""
    a = ctx.attrs
    names = [_str(n) for n in a["field_names"]]
    schema = _Schema(_str(a["message_type"]), _checked_source(ctx, a), names)
    types = [_dt.as_dtype(t) for t in a["Tinput_types"]]
    order = sorted(range(len(names)), key=lambda i: schema.fields[i].number)

    def compute(sizes: Any, *values: Any) -> Any:
        """The serialized messages, of shape ``values[i].shape[:-1]``."""
        if len(values) != len(names):
            raise invalid("Length of inputs list must match field_names")
        prefix: tuple[int, ...] | None = None
        for name, fd, dt, v in zip(names, schema.fields, types, values):
            if dt.base_dtype not in _COMPATIBLE[fd.type]:
                raise invalid(f"Incompatible type for field {name}.  Saw dtype: {dt.name} "
                              f"but field type is: {_TYPE_NAME[fd.type]}")
            v = np.asarray(v)
            if v.ndim < 2:
                raise invalid(f"Invalid shape for field {name}.  Saw shape {_fmt(v.shape)} "
                              "but it should be at least a matrix.")
            if prefix is None:
                prefix = v.shape[:-1]
            elif v.shape[:-1] != prefix:
                raise invalid("Values must match up to the last dimension")
        prefix = prefix if prefix is not None else ()
        sz = np.asarray(sizes)
        if sz.shape != prefix + (len(names),):
            raise invalid(f"sizes should be batch_size + [len(field_names)].  Saw: "
                          f"{_fmt(sz.shape)} but expected: {_fmt(prefix + (len(names),))}")
        n = int(np.prod(prefix, dtype=np.int64))
        sz = sz.reshape(n, len(names))
        flat = [np.asarray(v).reshape(n, np.shape(v)[-1]) for v in values]
        for j, v in enumerate(flat):
            over = np.flatnonzero(sz[:, j] > v.shape[1])
            if len(over):
                i = int(over[0])
                raise invalid(f"Size to write must not be larger than value tensor; but "
                              f"saw: {sz[i, j]} > {v.shape[1]} at message {i} field {j}")
        out = np.empty(n, dtype=object)
        for i in range(n):
            msg = schema.shadow()
            for j in order:
                k = int(sz[i, j])
                if k > 0:
                    getattr(msg, names[j]).extend(_wire_values(flat[j][i, :k],
                                                               schema.fields[j]))
            out[i] = msg.SerializeToString()
        return out.reshape(prefix)

    return compute


def _wire_values(v: np.ndarray, fd: Any) -> list[Any]:
    """Tensor values as the shadow field ``fd`` takes them (integers wrapped to the
    field's width as TF's static_cast does)."""
    np_type = _WIRE_NP[fd.type]
    if np_type is object:
        return [x if isinstance(x, bytes) else _str(x).encode("utf-8") for x in v.tolist()]
    return v.astype(np_type).tolist()


# =======================================================================================
# Python API
# =======================================================================================
DecodeProtoV2 = collections.namedtuple("DecodeProtoV2", ["sizes", "values"])


def _string_list(v: Any, arg: str, op: str) -> list[str]:
    if not isinstance(v, (list, tuple)):
        raise TypeError(f"Expected list for '{arg}' argument to '{op}' Op, not {v!r}.")
    return [_str(x) for x in v]


def _attr_text(source: str | bytes) -> str | bytes:
    """A ``descriptor_source`` as the string attr a graph holds: text as str, a binary
    ``bytes://`` set as bytes (string attrs keep bytes that are not UTF-8)."""
    if isinstance(source, bytes):
        try:
            return source.decode("utf-8")
        except UnicodeDecodeError:
            return source
    return source


@ks.api("io.decode_proto")
def decode_proto(bytes: Any, message_type: str, field_names: Sequence[str],  # noqa: A002
                 output_types: Sequence[Any], descriptor_source: str = "local://",
                 message_format: str = "binary", sanitize: bool = False,
                 name: str | None = None) -> DecodeProtoV2:
    """Extract ``field_names`` of the serialized ``message_type`` protos in ``bytes``:
    ``(sizes, values)``, ``sizes`` int32 ``bytes.shape + [len(field_names)]`` (how many
    values each field has in each message) and one tensor per field of
    ``bytes.shape + [max(1, most values)]``, padded with the field's default.
    Submessages come out as their serialized bytes, enums as int32."""
    field_names = _string_list(field_names, "field_names", "decode_proto_v2")
    descriptor_source = _attr_text(descriptor_source)
    if not isinstance(output_types, (list, tuple)):
        raise TypeError(f"Expected list for 'output_types' argument to 'decode_proto_v2' "
                        f"Op, not {output_types!r}.")
    outs = apply_op("DecodeProtoV2", name=name,
                    bytes=convert_to_tensor(bytes, dtype=_dt.string),
                    message_type=message_type, field_names=field_names,
                    output_types=[_dt.as_dtype(t) for t in output_types],
                    descriptor_source=descriptor_source, message_format=message_format,
                    sanitize=sanitize)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    flat = [outs[0]] + [t for o in outs[1:] for t in (o if isinstance(o, list) else [o])]
    return DecodeProtoV2(flat[0], flat[1:])


@ks.api("io.encode_proto")
def encode_proto(sizes: Any, values: Sequence[Any], field_names: Sequence[str],
                 message_type: str, descriptor_source: str = "local://",
                 name: str | None = None) -> Tensor:
    """Serialize ``message_type`` protos from tensors of their fields: ``values[i]`` of
    shape ``batch + [n]`` holds field ``field_names[i]``, of which the message at each
    batch position gets the first ``sizes[..., i]`` values. Returns a string tensor of
    shape ``batch``."""
    field_names = _string_list(field_names, "field_names", "encode_proto")
    descriptor_source = _attr_text(descriptor_source)
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"Expected list for 'values' argument to 'encode_proto' Op, not "
                        f"{values!r}.")
    return apply_op("EncodeProto", name=name, sizes=convert_to_tensor(sizes, dtype=_dt.int32),
                    values=[convert_to_tensor(v) for v in values], field_names=field_names,
                    message_type=message_type, descriptor_source=descriptor_source)
