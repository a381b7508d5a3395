"""Top-level file and TensorProto ops of TF 1.15: ``read_file``, ``write_file``,
``matching_files`` (also under ``tf.io``), ``serialize_tensor`` and ``parse_tensor``.

Ops: ReadFile, WriteFile, MatchingFiles, SerializeTensor, ParseTensor. File names are
host strings; errors name the file and use TF's classes (NotFoundError,
PermissionDeniedError, FailedPreconditionError for a directory). Paths are checked
against the worker's file roots first (a server's ``file_roots``); MatchingFiles lists
only the matches inside them.
"""
from __future__ import annotations

import base64
import glob as _glob
import os
import tempfile
from typing import Any

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.base.tensor_codec import make_ndarray
from flowrt.graph import Tensor, apply_op
from flowrt.op_registry import OpDef
from flowrt.plugin.file_policy import check_path, check_pattern, inside_roots
from flowrt.proto import tensor_pb2
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import ks, scalar_shape
from .image_common import host, invalid, to_device
from .top_level_ops import _decode, _rank_at_most, _type_name

__all__ = ["read_file", "write_file", "matching_files", "serialize_tensor", "parse_tensor",
           "tensor_proto_bytes"]


# =======================================================================================
# read_file, write_file, matching_files
# =======================================================================================
def _scalar_string(a: Any, what: str) -> str:
    arr = np.asarray(a)
    if arr.ndim != 0:
        raise invalid(f"Input {what} tensor must be scalar, but had shape: {list(arr.shape)}")
    return _decode(arr.item())


def _os_error(e: OSError, path: str) -> errors.OpError:
    """The TF error class for an OS error on ``path``, naming the file."""
    why = e.strerror or str(e)
    if isinstance(e, FileNotFoundError):
        return errors.NotFoundError(None, None, f"{path}; {why}")
    if isinstance(e, PermissionError):
        return errors.PermissionDeniedError(None, None, f"{path}; {why}")
    if isinstance(e, IsADirectoryError):
        return errors.FailedPreconditionError(None, None, f"{path}; {why}")
    return errors.UnknownError(None, None, f"{path}; {why}")


def _read_file_shape(op: Any) -> list[TensorShape]:
    _rank_at_most(op, 0, 0)
    return [TensorShape([])]


def _write_file_shape(op: Any) -> list[TensorShape]:
    _rank_at_most(op, 0, 0)
    _rank_at_most(op, 1, 0)
    return []


def _matching_files_shape(op: Any) -> list[TensorShape]:
    _rank_at_most(op, 0, 1)
    return [TensorShape([None])]


ks.op(OpDef("ReadFile", inputs=["filename: string"], outputs=["contents: string"],
            shape_fn=_read_file_shape, doc="The whole contents of a file."),
      OpDef("WriteFile", inputs=["filename: string", "contents: string"], outputs=[],
            shape_fn=_write_file_shape, is_stateful=True,
            doc="Writes contents to a file (atomically), creating its directory."),
      OpDef("MatchingFiles", inputs=["pattern: string"], outputs=["filenames: string"],
            shape_fn=_matching_files_shape,
            doc="The sorted file names matching a glob pattern (or patterns)."))
ks.not_differentiable("ReadFile", "WriteFile", "MatchingFiles")


@ks.kernel("ReadFile", host_memory=("filename", "contents"))
def _read_file_kernel(ctx: Any) -> Any:
    def compute(filename: Any) -> Any:
        path = check_path(ctx, _scalar_string(filename, "filename"))
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise _os_error(e, path) from None
        out = np.empty((), dtype=object)
        out[()] = data
        return out

    return compute


def _write_atomically(path: str, data: bytes) -> None:
    """``data`` to ``path`` through a temporary file in the same directory and a
    rename, so a reader never sees a partial file."""
    d = os.path.dirname(path) or "."
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp_" + os.path.basename(path), dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


@ks.kernel("WriteFile", host_memory=("filename", "contents"))
def _write_file_kernel(ctx: Any) -> Any:
    def compute(filename: Any, contents: Any) -> Any:
        path = check_path(ctx, _scalar_string(filename, "filename"), write=True)
        arr = np.asarray(contents)
        if arr.ndim != 0:
            raise invalid(f"Contents tensor must be scalar, but had shape: "
                          f"{list(arr.shape)}")
        data = arr.item()
        data = data.encode() if isinstance(data, str) else bytes(data)
        if os.path.isdir(path):
            raise errors.FailedPreconditionError(None, None, f"{path}; Is a directory")
        try:
            _write_atomically(path, data)
        except OSError as e:
            raise _os_error(e, path) from None

    return compute


@ks.kernel("MatchingFiles", host_memory=("pattern", "filenames"))
def _matching_files_kernel(ctx: Any) -> Any:
    def compute(pattern: Any) -> Any:
        arr = np.asarray(pattern)
        if arr.ndim > 1:
            raise invalid(f"Input pattern tensor must be scalar or vector, but had shape: "
                          f"{list(arr.shape)}")
        names: list[str] = []
        for p in arr.reshape(-1).tolist():
            pattern = check_pattern(ctx, _decode(p))
            names += inside_roots(ctx, _glob.glob(pattern, include_hidden=True))
        names.sort()
        return np.array([n.encode() for n in names], dtype=object).reshape(len(names))

    return compute


@ks.api("read_file", "io.read_file")
def read_file(filename: Any, name: str | None = None) -> Tensor:
    """The contents of the file ``filename`` (a string scalar) as a string scalar;
    NotFoundError / PermissionDeniedError name the file."""
    return apply_op("ReadFile", name=name, filename=filename)


@ks.api("write_file", "io.write_file")
def write_file(filename: Any, contents: Any, name: str | None = None) -> Any:
    """An op writing ``contents`` to ``filename``, creating its directory; the file is
    written to a temporary name and renamed, so it appears whole."""
    return apply_op("WriteFile", name=name, filename=filename, contents=contents)


@ks.api("matching_files", "io.matching_files")
def matching_files(pattern: Any, name: str | None = None) -> Tensor:
    """The sorted names of the files matching the glob ``pattern`` (a string or a 1-D
    string tensor of patterns); ``*`` does not cross ``/``."""
    return apply_op("MatchingFiles", name=name, pattern=pattern)


# =======================================================================================
# serialize_tensor / parse_tensor
# =======================================================================================
ks.op(OpDef("SerializeTensor", inputs=["tensor: T"], outputs=["serialized: string"],
            attrs=["T: type"], shape_fn=scalar_shape,
            doc="A tensor as a serialized TensorProto."),
      OpDef("ParseTensor", inputs=["serialized: string"], outputs=["output: out_type"],
            attrs=["out_type: type"], shape_fn=lambda op: [unknown_shape()],
            doc="A tensor from a serialized TensorProto."))
ks.not_differentiable("SerializeTensor", "ParseTensor")


def tensor_proto_bytes(value: np.ndarray, dtype: _dt.DType) -> bytes:
    """``value`` as TF's SerializeTensor writes it: dtype, shape, and the raw
    little-endian bytes in ``tensor_content`` (strings in ``string_val``)."""
    proto = tensor_pb2.TensorProto()
    proto.dtype = dtype.as_datatype_enum
    proto.tensor_shape.SetInParent()
    for d in value.shape:
        proto.tensor_shape.dim.add().size = int(d)
    if dtype is _dt.string:
        proto.string_val.extend(v.encode() if isinstance(v, str) else bytes(v)
                                for v in value.reshape(-1).tolist())
    elif value.size:
        arr = np.ascontiguousarray(value, dtype=np.dtype(dtype.np).newbyteorder("<"))
        proto.tensor_content = arr.tobytes()
    return proto.SerializeToString()


@ks.kernel("SerializeTensor", host_memory=("serialized",))
def _serialize_tensor_kernel(ctx: Any) -> Any:
    dt = ctx.input_dtypes[0]

    def compute(tensor: Any) -> Any:
        out = np.empty((), dtype=object)
        out[()] = tensor_proto_bytes(host(ctx, tensor), dt)
        return out

    return compute


@ks.kernel("ParseTensor", host_memory=("serialized",))
def _parse_tensor_kernel(ctx: Any) -> Any:
    want = ctx.output_dtypes[0]

    def compute(serialized: Any) -> Any:
        arr = np.asarray(serialized)
        if arr.ndim != 0:
            raise invalid(f"Expected `serialized` to be a scalar, got shape: "
                          f"{list(arr.shape)}")
        data = arr.item()
        data = data.encode() if isinstance(data, str) else data
        proto = tensor_pb2.TensorProto()
        try:
            proto.ParseFromString(data)
            value = make_ndarray(proto)
            got = _dt.as_dtype(proto.dtype)
        except Exception:  # noqa: BLE001 -- any malformed proto is bad input
            b64 = base64.b64encode(bytes(data)).decode()
            raise invalid(f"Could not parse `serialized` as TensorProto, base64: {b64}") \
                from None
        if got.base_dtype is not want:
            raise invalid(f"Type mismatch between parsed tensor ({_type_name(got)}) and "
                          f"dtype ({_type_name(want)})")
        return value if want is _dt.string else to_device(ctx, value)

    return compute


@ks.api("serialize_tensor", "io.serialize_tensor")
def serialize_tensor(tensor: Any, name: str | None = None) -> Tensor:
    """``tensor`` as a serialized ``TensorProto`` (a string scalar)."""
    return apply_op("SerializeTensor", name=name, tensor=tensor)


@ks.api("parse_tensor", "io.parse_tensor")
def parse_tensor(serialized: Any, out_type: Any, name: str | None = None) -> Tensor:
    """The tensor of ``out_type`` held by the serialized ``TensorProto``; a different
    dtype is an InvalidArgumentError."""
    return apply_op("ParseTensor", name=name, serialized=serialized,
                    out_type=_dt.as_dtype(out_type))
