"""The master and worker services over any message transport.

A message transport (:class:`~flowrt.transport.MessageTransport`) moves a method name, a
header and raw buffers. This module owns what is inside them (docs/wire.md):

- the header is a serialised :class:`Envelope` whose ``body`` is the method's protobuf
  message (``core/proto/service.proto``) and whose ``tensors`` describe the raw buffers:
  numeric tensors travel as their own little-endian bytes, sent and received without a
  copy where the transport allows; strings travel as a ``TensorProto``. Nothing is ever
  pickled;
- :class:`ServiceHandler` decodes requests and calls the local
  :class:`~flowrt.master.Master` and :class:`~flowrt.worker.Worker`; every failure goes
  back as a ``Status`` with TensorFlow's error code, so a bad request never takes the
  server down;
- :class:`MasterClient` and :class:`WorkerClient` are the remote counterparts of those
  objects, with the same methods, so the master and the session need not know whether a
  worker is in this process or another.
"""
from __future__ import annotations

import functools
import os
import threading
import time
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from ..base import dtypes as _dt
from ..base import errors
from . import shm as _shm
from . import security as _security
from ..base import threads as _threads
from ..base.device_spec import DeviceSpec
from ..engine.executor import DEAD, NodeStat
from ..plugin.device import host_array
from ..plugin.services import RunGraphRequest, RunGraphResponse, WorkerStatus
from ..proto import service_pb2 as pb
from ..base.tensor_codec import make_tensor_proto
from ..base.tensor_codec import make_ndarray
from .ir_wire import ir_from_graph_def
from ..engine.partition import Partition
from ..engine.ir import ARG_OP
from .ir_wire import ir_to_graph_def

__all__ = ["ServiceHandler", "MasterClient", "WorkerClient", "RemoteDevice",
           "encode_tensor", "decode_tensor", "pack", "unpack", "unpack_from_peer",
           "status_error", "call_timeout", "request_context",
           "METHODS"]

#: every method the services answer
METHODS = (
    "Master/CreateSession", "Master/ExtendSession", "Master/MakeCallable",
    "Master/RunCallable", "Master/ReleaseCallable", "Master/PartitionGraphs",
    "Master/Placement", "Master/CloseSession", "Master/ListDevices", "Master/Reset",
    "Master/Shutdown",
    "Worker/GetStatus", "Worker/RegisterGraph", "Worker/DeregisterGraph",
    "Worker/RunGraph", "Worker/RecvTensor", "Worker/RecvTensors", "Worker/AbortStep",
    "Worker/CleanupSession", "Worker/Reset", "Worker/Shutdown",
)


#: the most feeds one step may have (a bound on indices that arrive from the network)
_MAX_FEEDS = 1 << 20


# -- tensors --------------------------------------------------------------------------
def encode_tensor(value: Any, metas: Any, buffers: list[Any],
                  segments: list[str] | None = None) -> None:
    """Append ``value`` (an array, a numpy scalar or the DEAD marker) to an envelope's
    tensor list, its data to ``buffers`` (no copy for contiguous numeric arrays).

    With ``segments`` (a list: the peer shares this machine's memory), data of at least
    :data:`flowrt.shm.MIN_BYTES` goes into a shared-memory segment instead, whose name
    is appended to ``segments``."""
    m = metas.add()
    if value is DEAD:
        m.is_dead = True
        m.buffer = -1
        return
    if isinstance(value, np.ndarray):
        arr = value
    else:
        try:  # a device's array through its type's to_host (else DLPack, numpy)
            arr = host_array(value)
        except errors.InternalError:  # a Python object (a queue's handle): refused below
            arr = np.asarray(value, dtype=object)
    if arr.dtype.kind == "O" and not all(isinstance(x, (bytes, str))
                                         for x in arr.reshape(-1)):
        bad = next(x for x in arr.reshape(-1) if not isinstance(x, (bytes, str)))
        raise errors.InvalidArgumentError(
            None, None, f"a {type(bad).__name__} value cannot be sent to another task: "
            "only numeric, bool and string tensors travel (place the ops that use a "
            "queue or other resource on the task that holds it)")
    if arr.dtype.kind in "OSU":

        m.proto.CopyFrom(make_tensor_proto(arr))
        m.dtype = m.proto.dtype
        m.shape.extend(arr.shape)
        m.buffer = -1
        return
    if arr.dtype.byteorder == ">":  # (before the lookup: TF's dtypes are little-endian)
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    enum = _ENUM_OF.get(arr.dtype)
    if enum is None:
        enum = _ENUM_OF[arr.dtype] = _dt.as_dtype(arr.dtype).as_datatype_enum
    m.dtype = enum
    m.shape.extend(arr.shape)
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    if segments is not None and arr.nbytes >= _shm.MIN_BYTES:
        name = _shm.write(arr.reshape(-1).view(np.uint8))
        if name is not None:
            m.shm = name
            m.buffer = -1
            segments.append(name)
            return
    m.buffer = len(buffers)
    buffers.append(arr.reshape(-1).view(np.uint8) if arr.size else b"")


def decode_tensor(meta: Any, buffers: Sequence[Any], same_host: bool = False) -> Any:
    """The array an envelope's ``meta`` describes (read-only when it is a view of a
    received buffer or segment), or DEAD. A shared-memory segment is only read when
    ``same_host`` (the message carried this machine's token)."""
    if meta.is_dead:
        return DEAD
    shape = tuple(meta.shape)
    if any(d < 0 for d in shape):
        raise errors.InvalidArgumentError(None, None, f"tensor with negative shape {shape}")
    if meta.buffer < 0 and not meta.shm:

        if not meta.HasField("proto"):
            raise errors.InvalidArgumentError(None, None, "tensor has neither a buffer "
                                              "nor a TensorProto")
        return make_ndarray(meta.proto)
    np_dtype = _wire_dtype(meta.dtype)
    n = 1
    for d in shape:
        n *= d
    if meta.shm:
        if not same_host:
            raise errors.InvalidArgumentError(None, None, "a tensor in shared memory from "
                                              "a peer on another host (or one that did "
                                              "not say which)")
        arr = _shm.open_segment(meta.shm, n * np_dtype.itemsize).view(np_dtype)
    else:
        if meta.buffer >= len(buffers):
            raise errors.InvalidArgumentError(None, None, f"tensor refers to buffer "
                                              f"{meta.buffer}; the message has "
                                              f"{len(buffers)}")
        buf = buffers[meta.buffer]
        nbytes = memoryview(buf).nbytes
        if nbytes != n * np_dtype.itemsize:
            raise errors.InvalidArgumentError(
                None, None, f"tensor of shape {list(shape)} and dtype "
                f"{_dt.as_dtype(meta.dtype).name} needs "
                f"{n * np_dtype.itemsize} bytes, the buffer has {nbytes}")
        arr = np.frombuffer(buf, dtype=np_dtype) if n else np.empty(0, np_dtype)
    arr = arr.reshape(shape)
    if not arr.dtype.isnative:  # a big-endian host
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


_ENUM_OF: dict[np.dtype, int] = {}  # numpy dtype -> DataType enum (encode)
_WIRE_DTYPES: dict[int, np.dtype] = {}  # DataType enum -> little-endian numpy dtype


def _wire_dtype(enum: int) -> np.dtype:
    d = _WIRE_DTYPES.get(enum)
    if d is not None:
        return d
    try:
        dt = _dt.as_dtype(enum)
        d = np.dtype(dt.as_numpy_dtype).newbyteorder("<")
    except (TypeError, ValueError, KeyError) as e:
        raise errors.InvalidArgumentError(None, None, f"bad tensor dtype {enum}: "
                                          f"{e}") from None
    if len(_WIRE_DTYPES) < 256:
        _WIRE_DTYPES[enum] = d
    return d


# -- the envelope, encoded and decoded by hand ---------------------------------------
# An envelope is a few length-delimited fields (docs/wire.md); a step sends the same
# few tensor shapes again and again. So the envelope is written and read here directly,
# and a numeric tensor's TensorMeta is encoded (and decoded) once per (dtype, shape,
# buffer index) and cached. The bytes are the protobuf encoding of the message: any
# protobuf library reads them, and anything a protobuf library writes is read here.
# Metas of other kinds (dead, strings, shared memory) go through the protobuf classes.

_VARINTS = [bytes([i]) for i in range(128)]
_CACHE_LIMIT = 4096  # entries each cache holds before it starts afresh
_META_OUT: dict[tuple[int, tuple[int, ...], int], bytes] = {}  # -> envelope field
_META_IN: dict[bytes, tuple[np.dtype, tuple[int, ...], int, int]] = {}  # -> decoding
_FAST_ENUM: dict[np.dtype, int] = {}  # native numeric dtypes -> DataType enum
_HOST_FIELD: list[Any] = [None, b"", b""]  # token, its field, its UTF-8 bytes


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _VARINTS[n]
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    b = data[pos]
    if b < 0x80:
        return b, pos + 1
    value, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = data[pos]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + 1
        shift += 7
        if shift > 63:
            raise ValueError("a varint longer than 10 bytes")


def _field(tag: bytes, data: bytes) -> bytes:
    return tag + _varint(len(data)) + data


def _fast_enum(dt: np.dtype) -> int | None:
    enum = _FAST_ENUM.get(dt)
    if enum is None and dt.kind in "biufc" and dt.isnative and dt.byteorder != ">" \
            and np.little_endian:
        try:
            enum = _dt.as_dtype(dt).as_datatype_enum
        except (TypeError, ValueError, KeyError):
            return None
        _FAST_ENUM[dt] = enum
    return enum


def _tensor_field(value: Any, buffers: list[Any], segments: list[str] | None) -> bytes:
    """The envelope field (tag, length, TensorMeta) for ``value``, its data appended to
    ``buffers``: :func:`encode_tensor`, faster for the numeric arrays of every step."""
    if type(value) is np.ndarray:
        arr = value
    elif isinstance(value, np.generic):
        arr = np.asarray(value)
    else:
        arr = None
    enum = None if arr is None else _fast_enum(arr.dtype)
    if enum is None or not arr.flags.c_contiguous or \
            (segments is not None and arr.nbytes >= _shm.MIN_BYTES):
        scratch = pb.Envelope()
        encode_tensor(value, scratch.tensors, buffers, segments)
        return _field(b"\x1a", scratch.tensors[0].SerializeToString())
    idx = len(buffers)
    buffers.append(arr.reshape(-1).view(np.uint8) if arr.size else b"")
    key = (enum, arr.shape, idx)
    entry = _META_OUT.get(key)
    if entry is None:
        meta = b"\x08" + _varint(enum)
        if arr.shape:
            meta += _field(b"\x12", b"".join(_varint(d) for d in arr.shape))
        if idx:
            meta += b"\x18" + _varint(idx)
        entry = _field(b"\x1a", meta)
        if len(_META_OUT) >= _CACHE_LIMIT:
            _META_OUT.clear()
        _META_OUT[key] = entry
    return entry


def _host_field() -> bytes:
    """The envelope's ``host`` field: this machine's shared-memory token (none when
    the fast path is off)."""
    token = _shm.host_token()
    cached = _HOST_FIELD
    if cached[0] != token:
        raw = (token or "").encode()
        cached[:] = [token, _field(b"\x22", raw) if raw else b"", raw]
    return cached[1]


_POSITIONS: dict[tuple[int, ...], bytes] = {}  # RunGraphResponse.fetch_position
_KEYS: dict[str, bytes] = {}  # RunGraphResponse.pushed_key (rendezvous keys)
_BODIES: dict[tuple[Any, ...], bytes] = {}  # request bodies but for their step id


def _cached(cache: dict[Any, bytes], key: Any, make: Callable[[], bytes]) -> bytes:
    got = cache.get(key)
    if got is None:
        got = make()
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[key] = got
    return got


def _positions_field(positions: Sequence[int]) -> bytes:
    key = tuple(positions)
    return _cached(_POSITIONS, key, lambda: _field(b"\x0a", b"".join(
        _varint(p) for p in key)) if key else b"")


def _key_field(key: str) -> bytes:
    return _cached(_KEYS, key, lambda: _field(b"\x22", key.encode("utf-8")))


def pack(body: Any = None, tensors: Sequence[Any] = (),
         status: errors.OpError | None = None, *, host: bool = False,
         segments: list[str] | None = None, token: bytes | None = None
         ) -> tuple[bytes, list[Any]]:
    """An envelope (header bytes and buffers) for ``body`` and ``tensors``.

    ``body`` is a protobuf message or its serialised bytes; ``host``: say this
    machine's shared-memory token (:func:`flowrt.shm.host_token`); ``segments``: send
    large tensors through shared memory (the peer is on this machine), collecting the
    segment names there (see :mod:`flowrt.shm`); ``token``: the cluster token a
    request carries (:mod:`flowrt.distributed.security`)."""
    parts: list[bytes] = []
    if status is not None:
        st = pb.Status(code=status.error_code, message=status.message)
        parts.append(_field(b"\x0a", st.SerializeToString()))
    if body is not None:
        parts.append(_field(b"\x12", body if type(body) is bytes
                            else body.SerializeToString()))
    buffers: list[Any] = []
    for t in tensors:
        parts.append(_tensor_field(t, buffers, segments))
    if host:
        parts.append(_host_field())
    if token:
        parts.append(_field(b"\x2a", token))
    return b"".join(parts), buffers


def unpack(header: bytes, buffers: Sequence[Any], body_cls: Any) -> tuple[Any, list[Any]]:
    """Decode an envelope: ``(body message, tensors)``; a non-OK status is raised as the
    matching OpError."""
    body, tensors, _ = unpack_from_peer(header, buffers, body_cls)
    return body, tensors


def _parse_envelope(data: bytes
                    ) -> tuple[bytes | None, bytes, list[bytes], bytes, bytes]:
    """``(status, body, tensor metas, host, token)`` of an envelope, as raw field
    bytes; unknown fields are skipped. Raises ValueError or IndexError when malformed."""
    status, body, host, token = None, b"", b"", b""
    metas: list[bytes] = []
    pos, end = 0, len(data)
    while pos < end:
        tag = data[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = _read_varint(data, pos)
        wire = tag & 7
        if wire == 2:
            n, pos = _read_varint(data, pos)
            stop = pos + n
            if stop > end:
                raise ValueError(f"a field of {n} bytes runs past the end ({end} bytes)")
            field = tag >> 3
            if field == 3:
                metas.append(data[pos:stop])
            elif field == 2:
                body = data[pos:stop]
            elif field == 4:
                host = data[pos:stop]
            elif field == 1:
                status = data[pos:stop]
            elif field == 5:
                token = data[pos:stop]
            pos = stop
        elif wire == 0:
            pos = _read_varint(data, pos)[1]
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"wire type {wire} at byte {pos}")
    if pos != end:
        raise ValueError(f"the last field runs past the end ({end} bytes)")
    return status, body, metas, host, token


def _decode_meta(raw: bytes, buffers: Sequence[Any], same: bool) -> Any:
    """:func:`decode_tensor` for one envelope field ``raw``; the decoding of a plain
    numeric tensor is cached by its bytes."""
    spec = _META_IN.get(raw)
    if spec is None:
        try:
            meta = pb.TensorMeta.FromString(raw)
        except Exception as e:  # noqa: BLE001 - protobuf raises its own DecodeError
            raise errors.InvalidArgumentError(None, None, f"malformed tensor in the "
                                              f"message header: {e}") from None
        if meta.is_dead or meta.buffer < 0 or meta.shm or meta.HasField("proto"):
            return decode_tensor(meta, buffers, same)
        shape = tuple(meta.shape)
        if any(d < 0 for d in shape):
            raise errors.InvalidArgumentError(None, None, f"tensor with negative shape "
                                              f"{shape}")
        np_dtype = _wire_dtype(meta.dtype)
        n = 1
        for d in shape:
            n *= d
        if not np_dtype.isnative:
            return decode_tensor(meta, buffers, same)
        spec = (np_dtype, shape, meta.buffer, n * np_dtype.itemsize)
        if len(_META_IN) >= _CACHE_LIMIT:
            _META_IN.clear()
        _META_IN[raw] = spec
    np_dtype, shape, idx, nbytes = spec
    if idx >= len(buffers):
        raise errors.InvalidArgumentError(None, None, f"tensor refers to buffer {idx}; the "
                                          f"message has {len(buffers)}")
    buf = buffers[idx]
    got = buf.nbytes if type(buf) is memoryview else memoryview(buf).nbytes
    if got != nbytes:
        raise errors.InvalidArgumentError(
            None, None, f"tensor of shape {list(shape)} and dtype "
            f"{_dt.as_dtype(np_dtype).name} needs {nbytes} bytes, the buffer has {got}")
    if not nbytes:
        return np.empty(shape, np_dtype)
    return np.frombuffer(buf, np_dtype).reshape(shape)


def unpack_from_peer(header: bytes, buffers: Sequence[Any], body_cls: Any,
                     gate: Callable[[bytes], None] | None = None
                     ) -> tuple[Any, list[Any], bool]:
    """:func:`unpack`, plus whether the sender shares this machine's memory (its
    envelope carried this machine's token and the fast path is on here). ``gate`` is
    called with the envelope's cluster token (empty: none) before anything else is
    decoded, and may raise to refuse the message."""
    try:
        status, raw_body, metas, host, token = _parse_envelope(
            header if type(header) is bytes else bytes(header))
    except (ValueError, IndexError) as e:
        raise errors.InvalidArgumentError(None, None, f"malformed message header: "
                                          f"{e}") from None
    if gate is not None:
        gate(token)
    same = False
    if host:
        _host_field()
        same = host == _HOST_FIELD[2] and _shm.enabled()
    if status is not None:
        try:
            st = pb.Status.FromString(status)
        except Exception as e:  # noqa: BLE001 - protobuf raises its own DecodeError
            raise errors.InvalidArgumentError(None, None, f"malformed message header: "
                                              f"{e}") from None
        if st.code:
            raise status_error(st)
    try:
        body = body_cls.FromString(raw_body)
    except Exception as e:  # noqa: BLE001
        raise errors.InvalidArgumentError(None, None, f"malformed {body_cls.__name__}: "
                                          f"{e}") from None
    return body, [_decode_meta(m, buffers, same) for m in metas], same


def call_timeout(seconds: float, budget: float | None = None) -> float:
    """The channel timeout of a call its caller bounds by ``seconds``: a little more
    (5% of ``budget``, the whole bound, by default ``seconds``; 0.1 s to 2 s), so
    that a peer that enforces the same bound has time to say why it failed, and a peer
    that does not answer (a hung process) fails the call with DeadlineExceededError
    within 10% of a bound of 1 s or more."""
    b = seconds if budget is None else budget
    return max(seconds, 0.0) + min(2.0, max(0.1, 0.05 * b))


def status_error(status: Any) -> errors.OpError:
    """The OpError a ``Status`` message stands for."""
    cls = errors.exception_type_from_error_code(int(status.code))
    return cls(None, None, status.message)


def _stats_to_proto(stats: Sequence[NodeStat], out: Any) -> None:
    for s in stats:
        out.add(node_name=s.node_name, op=s.op, device=s.device, start=s.start, end=s.end,
                thread_id=s.thread_id & 0x7fffffffffffffff, label=s.label or "")


def _stats_from_proto(stats: Any, offset: float) -> list[NodeStat]:
    return [NodeStat(s.node_name, s.op, s.device, s.start + offset, s.end + offset,
                     s.thread_id, s.label) for s in stats]


def _endpoint(name: str) -> tuple[str, int]:
    node, _, idx = name.rpartition(":")
    if not node:
        return name, 0
    try:
        return node, int(idx)
    except ValueError:
        return name, 0


# -- server side ----------------------------------------------------------------------
_REQUEST = threading.local()  # the peer and cancel event of the request being taken


def request_context(peer: str | None = None, cancel: threading.Event | None = None,
                    may_call: bool = False) -> None:
    """For transports: the request this thread hands a :class:`ServiceHandler` next
    (``__call__`` or ``dispatch``) comes from ``peer`` (its address without the port:
    the pending-request cap per peer counts by it), and ``cancel`` is set once its
    caller went away (a receive waiting for it then ends). ``may_call``: ``dispatch``
    may answer a request at once that makes a call of its own to another task (a
    master step run inline, see :meth:`ServiceHandler.dispatch`); say it only when a
    wait in that call cannot stall the server (the zmq server hands its lead to
    another thread when the call's reply is late)."""
    _REQUEST.peer, _REQUEST.cancel, _REQUEST.may_call = peer, cancel, may_call


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, "") or default)
    except ValueError:
        return default


class _Admission:
    """Counts the requests a server runs on threads that may block, in total and per
    peer; refuses one beyond either cap with ResourceExhaustedError."""

    def __init__(self, total: int, per_peer: int):
        self.total, self.per_peer = total, per_peer
        self._lock = threading.Lock()
        self._n = 0
        self._by_peer: dict[str | None, int] = {}

    def admit(self, method: str, peer: str | None) -> None:
        with self._lock:
            k = self._by_peer.get(peer, 0)
            if self._n >= self.total or (peer is not None and k >= self.per_peer):
                which = (f"{self._n} pending requests (the cap is {self.total})"
                         if self._n >= self.total else
                         f"{k} pending requests from {peer} (the cap per peer is "
                         f"{self.per_peer})")
                raise errors.ResourceExhaustedError(None, None, f"{method} refused: the "
                                                    f"server already runs {which}")
            self._n += 1
            self._by_peer[peer] = k + 1

    def release(self, peer: str | None) -> None:
        with self._lock:
            self._n -= 1
            k = self._by_peer.get(peer, 1) - 1
            if k > 0:
                self._by_peer[peer] = k
            else:
                self._by_peer.pop(peer, None)


class ServiceHandler:
    """Answers every method of :data:`METHODS` for one task's master and worker.

    :param master: the task's :class:`~flowrt.master.Master` (None: worker only)
    :param worker: the task's :class:`~flowrt.worker.Worker`
    :param on_shutdown: called (once, on another thread) when a Shutdown request
        arrives
    :param security: a :class:`~flowrt.distributed.security.SecurityConfig`: every
        request must carry its cluster token (and shutdowns and resets its admin token,
        if it has one) or is refused before it is decoded. Transports read it as the
        handler's ``security`` attribute for their own part (TLS, CURVE)
    """

    def __init__(self, master: Any, worker: Any,
                 on_shutdown: Callable[[str], None] | None = None,
                 security: Any = None):
        """Build the table of methods, and which of them :meth:`dispatch` answers at
        once."""
        self.master, self.worker = master, worker
        self.on_shutdown = on_shutdown
        self.security = security
        #: whether requests must carry a token
        self._gated = security is not None and (security.token is not None or
                                                security.admin_token is not None)
        self._table: dict[str, tuple[Any, Callable[[Any, list[Any]], Any]]] = {
            "Master/CreateSession": (pb.CreateSessionRequest, self._create_session),
            "Master/ExtendSession": (pb.ExtendSessionRequest, self._extend_session),
            "Master/MakeCallable": (pb.MakeCallableRequest, self._make_callable),
            "Master/RunCallable": (pb.RunCallableRequest, self._run_callable),
            "Master/ReleaseCallable": (pb.CallableRequest, self._release_callable),
            "Master/PartitionGraphs": (pb.CallableRequest, self._partition_graphs),
            "Master/Placement": (pb.CallableRequest, self._placement),
            "Master/CloseSession": (pb.CloseSessionRequest, self._close_session),
            "Master/ListDevices": (pb.Empty, self._list_devices),
            "Master/Reset": (pb.ResetRequest, self._master_reset),
            "Master/Shutdown": (pb.ShutdownRequest, self._master_shutdown),
            "Worker/GetStatus": (pb.Empty, self._get_status),
            "Worker/RegisterGraph": (pb.RegisterGraphRequest, self._register_graph),
            "Worker/DeregisterGraph": (pb.DeregisterGraphRequest, self._deregister_graph),
            "Worker/RunGraph": (pb.RunGraphRequest, self._run_graph),
            "Worker/RecvTensor": (pb.RecvTensorRequest, self._recv_tensor),
            "Worker/RecvTensors": (pb.RecvTensorsRequest, self._recv_tensors),
            "Worker/AbortStep": (pb.AbortStepRequest, self._abort_step),
            "Worker/CleanupSession": (pb.CleanupSessionRequest, self._cleanup_session),
            "Worker/Reset": (pb.ResetRequest, self._worker_reset),
            "Worker/Shutdown": (pb.ShutdownRequest, self._worker_shutdown),
        }
        # dispatch(): methods answered at once, and those tried at once (None: wait)
        self._instant = frozenset({"Worker/GetStatus", "Worker/AbortStep",
                                   "Worker/DeregisterGraph"})
        self._now: dict[str, Callable[[Any, list[Any]], Any]] = {
            "Worker/RunGraph": self._run_graph_now,
            "Worker/RecvTensors": self._recv_tensors_now,
            "Master/RunCallable": self._run_callable_now,
        }
        # what a request answered at once that took long says (see quick_limit_s)
        self._took_long: dict[str, Callable[[Any], None]] = {
            "Worker/RunGraph": lambda req: self.worker.not_quick(req.graph_handle),
            "Master/RunCallable": self._callable_took_long,
        }

    #: requests a server runs at once on threads that may block (beyond: refused with
    #: ResourceExhaustedError), in all and per peer address (``FLOWRT_MAX_PENDING``,
    #: ``FLOWRT_MAX_PENDING_PER_PEER`` in the server's environment)
    max_pending = _env_int("FLOWRT_MAX_PENDING", 1024)
    max_pending_per_peer = _env_int("FLOWRT_MAX_PENDING_PER_PEER", 256)

    @functools.cached_property
    def _admission(self) -> _Admission:
        return _Admission(self.max_pending, self.max_pending_per_peer)

    def __call__(self, method: str, header: bytes, buffers: list[Any]
                 ) -> tuple[bytes, Sequence[Any]]:
        try:
            entry = self._entry(method)
            req, tensors, same = unpack_from_peer(header, buffers, entry[0],
                                                  self._gate(method))
            if method in self._instant:
                return self._answer(method, entry[1], req, tensors, same)
            peer = getattr(_REQUEST, "peer", None)
            self._admission.admit(method, peer)
        except errors.OpError as e:
            return pack(status=e)
        return self._admitted(peer, method, entry[1], req, tensors, same)

    def _admitted(self, peer: str | None, method: str, *args: Any
                  ) -> tuple[bytes, Sequence[Any]]:
        """:meth:`_answer` of an admitted request, which then leaves the count."""
        try:
            return self._answer(method, *args)
        finally:
            self._admission.release(peer)

    def _gate(self, method: str) -> Callable[[bytes], None] | None:
        """The token check of a request for ``method`` (None: no check)."""
        if not self._gated:
            return None
        w = self.worker
        where = f"/job:{getattr(w, 'job', '?')}/task:{getattr(w, 'task', '?')}"
        return functools.partial(self.security.check, method, where=where)

    def dispatch(self, method: str, header: bytes, buffers: list[Any]
                 ) -> tuple[bytes, Sequence[Any]] | Callable[[], tuple[bytes, Sequence[Any]]]:
        """Answer now what needs no waiting, else say how to answer on a thread that
        may block: returns the reply ``(header, buffers)``, or a zero-argument callable
        that computes it.

        Answered at once: status, aborts, deregistrations, a RunGraph whose graph runs
        straight through without waiting (:meth:`Worker.runs_without_blocking`), and
        RecvTensors whose tensors were already sent, and, where the transport said
        ``may_call`` (:func:`request_context`), a RunCallable whose step runs inline
        (:meth:`_run_callable_now`). Other master calls wait (they may call other tasks
        for long), as does anything that would block."""
        try:
            entry = self._entry(method)
            req, tensors, same = unpack_from_peer(header, buffers, entry[0],
                                                  self._gate(method))
        except errors.OpError as e:
            return pack(status=e)
        fn = entry[1]
        now = self._now.get(method)
        if now is not None:
            t0 = time.perf_counter()
            try:
                out = now(req, tensors)
                if out is not None:
                    return self._reply(out, same)
            except errors.OpError as e:
                return pack(status=e)
            except Exception as e:  # noqa: BLE001 - every failure becomes a reply
                return pack(status=errors.InternalError(
                    None, None, f"{method}: {type(e).__name__}: {e}"))
            finally:
                if time.perf_counter() - t0 > self.quick_limit_s:
                    slow = self._took_long.get(method)
                    if slow is not None:
                        slow(req)
        elif method in self._instant:
            return self._answer(method, fn, req, tensors, same)
        peer = getattr(_REQUEST, "peer", None)
        try:
            self._admission.admit(method, peer)
        except errors.OpError as e:
            return pack(status=e)
        return functools.partial(self._admitted, peer, method, fn, req, tensors, same)

    def _entry(self, method: str) -> tuple[Any, Callable[[Any, list[Any]], Any]]:
        entry = self._table.get(method)
        if entry is None:
            raise errors.UnimplementedError(None, None, f"unknown method {method!r}")
        if method.startswith("Master/") and self.master is None:
            raise errors.UnimplementedError(None, None, "this task serves no master")
        return entry

    def _answer(self, method: str, fn: Callable[[Any, list[Any]], Any], req: Any,
                tensors: list[Any], same: bool = False) -> tuple[bytes, Sequence[Any]]:
        try:
            # a handler always replies, even while the process exits (its caller may be
            # this process's main thread): see flowrt.threads.park_if_exiting
            with _threads.serving:
                return self._reply(fn(req, tensors), same)
        except errors.OpError as e:
            return pack(status=e)
        except Exception as e:  # noqa: BLE001 - every failure becomes a reply
            return pack(status=errors.InternalError(
                None, None, f"{method}: {type(e).__name__}: {e}"))

    @staticmethod
    def _reply(out: Any, same: bool) -> tuple[bytes, Sequence[Any]]:
        """The reply to a handler's result (a message, or a message and tensors); to a
        peer on this machine, large tensors go through shared memory."""
        body, tensors = out if isinstance(out, tuple) else (out, ())
        if same:
            return pack(body, tensors, host=True, segments=[])
        return pack(body, tensors)

    # -- master ---------------------------------------------------------------------
    def _create_session(self, req: Any, _t: list[Any]) -> Any:
        config = req.config if req.HasField("config") else None
        h = self.master.create_session_from_graph_def(req.graph_def, config,
                                                      req.graph_version)
        return pb.CreateSessionResponse(session_handle=h)

    def _extend_session(self, req: Any, _t: list[Any]) -> Any:
        self.master.extend_session(req.session_handle, req.graph_def, req.graph_version)
        return pb.ExtendSessionResponse()

    def _make_callable(self, req: Any, _t: list[Any]) -> Any:
        ms = self.master.session(req.session_handle)
        ms.check_graph_version(req.graph_version)
        cid = ms.make_callable(list(req.feed), list(req.fetch), list(req.target))
        return pb.MakeCallableResponse(handle=cid)

    def _run_callable(self, req: Any, tensors: list[Any]) -> Any:
        ms = self.master.session(req.session_handle)
        ms.check_graph_version(req.graph_version)
        values, stats = ms.run_callable(req.handle, tensors, req.trace, req.timeout_in_ms)
        if not req.trace:
            return b"", values  # an empty RunCallableResponse: the clock is for traces
        resp = pb.RunCallableResponse()
        if stats:
            _stats_to_proto(stats, resp.stats)
        resp.clock_offset = time.perf_counter()
        return resp, values

    def _run_callable_now(self, req: Any, tensors: list[Any]) -> Any:
        """RunCallable on the thread that took the request in, when the master says
        its step runs inline (:meth:`MasterSession.runs_inline`); else None (a handler
        thread runs it). The step's one network wait, its inline RunGraph call, lets
        a transport hand its server's lead to another thread if it lasts."""
        if self.master is None or not getattr(_REQUEST, "may_call", False):
            return None
        ms = self.master.session(req.session_handle)
        if not ms.runs_inline(req.handle):
            return None
        with _threads.serving:  # it replies even while the process exits
            return self._run_callable(req, tensors)

    def _callable_took_long(self, req: Any) -> None:
        try:
            self.master.session(req.session_handle).not_quick(req.handle)
        except errors.OpError:
            pass  # the session is gone: nothing to remember

    def _release_callable(self, req: Any, _t: list[Any]) -> Any:
        self.master.session(req.session_handle).release_callable(req.handle)
        return pb.Empty()

    def _partition_graphs(self, req: Any, _t: list[Any]) -> Any:
        gds = self.master.session(req.session_handle).partition_graphs(req.handle)
        resp = pb.PartitionGraphsResponse()
        resp.partition_graph.extend(gds)
        return resp

    def _placement(self, req: Any, _t: list[Any]) -> Any:
        pl = self.master.session(req.session_handle).placement_of(req.handle)
        resp = pb.PlacementResponse()
        resp.placement.update(pl)
        return resp

    def _close_session(self, req: Any, _t: list[Any]) -> Any:
        self.master.close_session(req.session_handle)
        return pb.Empty()

    def _list_devices(self, _r: Any, _t: list[Any]) -> Any:
        resp = pb.ListDevicesResponse()
        for name, typ, mem, inc in self.master.list_devices():
            resp.device.add(name=name, device_type=typ, memory_limit=mem, incarnation=inc)
        return resp

    def _master_reset(self, req: Any, _t: list[Any]) -> Any:
        self.master.reset(list(req.container) or None)
        return pb.Empty()

    def _master_shutdown(self, req: Any, _t: list[Any]) -> Any:
        self.master.shutdown_cluster(req.reason)
        self._shutdown(req.reason)
        return pb.Empty()

    # -- worker ---------------------------------------------------------------------
    def _get_status(self, _r: Any, _t: list[Any]) -> Any:
        w = self.worker
        resp = pb.GetStatusResponse(incarnation=w.incarnation, job=w.job, task=w.task)
        for d in w.devices:
            resp.device.add(name=d.name, device_type=d.device_type,
                            memory_limit=d.memory_limit, incarnation=d.incarnation)
        return resp

    def _register_graph(self, req: Any, _t: list[Any]) -> Any:
        """Rebuild each partition's ``GraphIR`` from its ``GraphDef``, check the fetch
        positions (they come from the network) and register them on the worker."""

        w = self.worker
        parts = []
        for pd in req.partition:
            dev = w.device(pd.device)
            ir = ir_from_graph_def(pd.graph_def, w.runtime)
            p = Partition(dev, ir)
            p.fetches = [_endpoint(f) for f in pd.fetch]
            p.fetch_positions = [int(x) for x in pd.fetch_position]
            if len(p.fetches) != len(p.fetch_positions):
                raise errors.InvalidArgumentError(None, None, "partition of "
                                                  f"{pd.device}: fetch lists differ")
            ir.fetches = list(p.fetches)
            ir.targets = list(pd.target)
            ir.feeds = list(zip(pd.feed, pd.feed_arg))
            parts.append(p)
        if not parts:
            raise errors.InvalidArgumentError(None, None, "RegisterGraph with no partition")
        positions = [q for p in parts for q in p.fetch_positions]
        if not 0 <= req.n_fetches <= _MAX_FEEDS or \
                any(not 0 <= q < req.n_fetches for q in positions):
            raise errors.InvalidArgumentError(
                None, None, f"RegisterGraph: {req.n_fetches} fetches, positions "
                f"{sorted(positions)[:5]}...: out of range")
        h = w.register_partitions(req.session_handle, parts, int(req.n_fetches),
                                  int(req.inter_op_threads), list(req.pull_together))
        return pb.RegisterGraphResponse(graph_handle=h)

    def _deregister_graph(self, req: Any, _t: list[Any]) -> Any:
        self.worker.deregister_graph(req.graph_handle)
        return pb.Empty()

    def _run_graph(self, req: Any, tensors: list[Any]) -> Any:
        """Check the request's indices (they come from the network), run the graph
        on the worker, and reply with its fetches and the tensors it pushes."""
        w = self.worker
        na = len(req.arg_index)
        if na + len(req.pushed_key) != len(tensors):
            raise errors.InvalidArgumentError(None, None, "RunGraph: arg_index and "
                                              "pushed_key do not match the tensors")
        if req.pushed_key and not req.pushed_job:
            raise errors.InvalidArgumentError(None, None, "RunGraph: pushed tensors "
                                              "without the task that sent them")
        pushed_in = list(zip(req.pushed_key, tensors[na:]))
        tensors = tensors[:na]
        n = max(req.arg_index) + 1 if len(req.arg_index) else 0
        if n > _MAX_FEEDS:  # an index from the network sizes a list: bound it
            raise errors.InvalidArgumentError(None, None, f"RunGraph: arg index {n - 1} "
                                              f"is out of range (at most {_MAX_FEEDS} "
                                              "feeds)")
        args: list[Any] = [None] * n
        for i, t in zip(req.arg_index, tensors):
            if i < 0:
                raise errors.InvalidArgumentError(None, None, f"bad arg index {i}")
            args[i] = t
        timeout = req.timeout_in_ms / 1000.0 if req.timeout_in_ms > 0 else None
        request = RunGraphRequest(req.graph_handle, req.step_id, args, req.trace, timeout)
        if req.push_job:
            request.push_to = (req.push_job, int(req.push_task))
        if req.pushed_job:
            request.pushed_in = pushed_in
            request.pushed_in_from = (req.pushed_job, int(req.pushed_task))
        got = w.run_graph(request)
        out = got.outputs
        positions = w.fetch_positions(req.graph_handle)
        values = [out[p] for p in positions]
        if not req.trace:  # the same reply every step but for the pushed tensors
            parts = [_positions_field(positions)]
            for k, v in got.pushed:
                parts.append(_key_field(k))
                values.append(v)
            return b"".join(parts), values
        resp = pb.RunGraphResponse()
        resp.fetch_position.extend(positions)
        if got.stats:
            _stats_to_proto(got.stats, resp.stats)
        resp.clock = time.perf_counter()
        resp.pushed_key.extend(k for k, _ in got.pushed)
        return resp, values + [v for _, v in got.pushed]

    #: a graph (or a callable's step) whose step, answered at once, took longer than
    #: this many seconds (twice: once may be a pause of the process) is run on a
    #: handler thread from then on (its server's I/O thread answers nothing else
    #: meanwhile, health checks included)
    quick_limit_s = 0.02

    def _run_graph_now(self, req: Any, tensors: list[Any]) -> Any:
        if self.worker.runs_without_blocking(req.graph_handle, req.step_id,
                                             req.pushed_key):
            return self._run_graph(req, tensors)
        return None

    def _recv_tensors_now(self, req: Any, _t: list[Any]) -> Any:
        got = self.worker.try_recv_tensors(req.step_id, list(req.key), req.wait_all)
        if got is None:
            return None
        return pb.RecvTensorsResponse(index=[i for i, _ in got]), [v for _, v in got]

    def _recv_tensor(self, req: Any, _t: list[Any]) -> Any:
        timeout = req.timeout_in_ms / 1000.0 if req.timeout_in_ms > 0 else None
        value = self.worker.recv_tensor(req.step_id, req.key, timeout,
                                        **self._cancel_kw())
        return pb.RecvTensorResponse(), [value]

    @staticmethod
    def _cancel_kw() -> dict[str, Any]:
        """``cancel=`` the event of the request this thread runs, if its transport
        gave one (:func:`request_context`)."""
        ev = getattr(_REQUEST, "cancel", None)
        return {} if ev is None else {"cancel": ev}

    def _recv_tensors(self, req: Any, _t: list[Any]) -> Any:
        timeout = req.timeout_in_ms / 1000.0 if req.timeout_in_ms > 0 else None
        got = self.worker.recv_tensors(req.step_id, list(req.key), timeout, req.wait_all,
                                       **self._cancel_kw())
        return pb.RecvTensorsResponse(index=[i for i, _ in got]), [v for _, v in got]

    def _abort_step(self, req: Any, _t: list[Any]) -> Any:
        err = status_error(req.status) if req.status.code else errors.AbortedError(
            None, None, f"step {req.step_id} was aborted")
        self.worker.abort_step(req.step_id, err)
        return pb.Empty()

    def _cleanup_session(self, req: Any, _t: list[Any]) -> Any:
        self.worker.cleanup_session(req.session_handle)
        return pb.Empty()

    def _worker_reset(self, req: Any, _t: list[Any]) -> Any:
        self.worker.reset(list(req.container) or None)
        return pb.Empty()

    def _worker_shutdown(self, req: Any, _t: list[Any]) -> Any:
        self._shutdown(req.reason)
        return pb.Empty()

    def _shutdown(self, reason: str) -> None:
        cb = self.on_shutdown or getattr(self.worker, "shutdown", None)
        if cb is not None:
            # reply first: the server stops once this call has returned
            t = threading.Timer(0.05, cb, args=(reason,))
            t.daemon = True
            t.start()


# -- client side ----------------------------------------------------------------------
class _Client:
    def __init__(self, transport: Any, address: str, security: Any = "default"):
        self.transport = transport
        self.address = address
        #: the :class:`~flowrt.distributed.security.SecurityConfig` of the calls
        #: (``"default"``: :func:`flowrt.distributed.security.default`)
        self.security = _security.default() if security == "default" else security
        self._channel: Any = None
        self._lock = threading.Lock()
        self._shm = _shm.enabled()  # say this machine's token in requests
        self._same_host = False  # the server said the same token: send segments

    @property
    def target(self) -> str:
        """``scheme://address`` of the peer."""
        return f"{self.transport.scheme}://{self.address}"

    def _ch(self) -> Any:
        ch = self._channel
        if ch is None:
            with self._lock:
                if self._channel is None:
                    self._channel = self._connect()
                ch = self._channel
        return ch

    @property
    def cancellable(self) -> bool:
        """Whether calls can be cancelled while they wait (the channel's
        :attr:`~flowrt.transport.Channel.cancellable`)."""
        return bool(getattr(self._ch(), "cancellable", False))

    def call(self, method: str, body: Any, resp_cls: Any, tensors: Sequence[Any] = (),
             timeout: float | None = None, cancel: threading.Event | None = None
             ) -> tuple[Any, list[Any]]:
        """One call: the reply's ``(message, tensors)``; an error reply is raised.
        Large tensors go through shared memory once the server was seen to be on this
        machine (:mod:`flowrt.shm`); when the call fails, those segments are retired."""
        segments: list[str] | None = [] if self._same_host and tensors else None
        sec = self.security
        header, buffers = pack(body, tensors, host=self._shm, segments=segments,
                               token=None if sec is None else sec.token_for(method))
        ch = self._ch()
        try:
            if cancel is not None:
                rh, rb = ch.call(method, header, buffers, timeout, cancel=cancel)
            else:
                rh, rb = ch.call(method, header, buffers, timeout)
            body, values, same = unpack_from_peer(rh, rb, resp_cls)
        except BaseException:
            if segments:  # the server may never map them: they are not reused
                _shm.discard(segments)
            raise
        if same and not self._same_host:
            self._same_host = True
        return body, values

    def _connect(self) -> Any:
        """A channel to the peer, with the TLS or CURVE credentials of
        :attr:`security` where it has any."""
        sec = self.security
        if sec is None or not (sec.tls or sec.curve):
            return self.transport.connect(self.address)
        try:
            return self.transport.connect(self.address, security=sec)
        except TypeError as e:
            if "security" not in str(e):
                raise
            raise errors.UnimplementedError(
                None, None, f"transport {self.transport.scheme!r} cannot connect to "
                f"{self.address} with TLS or CURVE credentials (its connect() takes no "
                "security=)") from None

    def close(self) -> None:
        """Close the channel (a later call opens a new one)."""
        ch, self._channel = self._channel, None
        if ch is not None:
            ch.close()


class RemoteDevice:
    """A device of another task, as the master sees it for placement."""

    __slots__ = ("name", "device_type", "index", "job", "task", "memory_limit",
                 "incarnation", "owner")

    def __init__(self, name: str, device_type: str, memory_limit: int, incarnation: int,
                 owner: Any = None):
        sp = DeviceSpec.from_string(name)
        self.name, self.device_type = name, device_type
        self.index = sp.device_index or 0
        self.job, self.task = sp.job, sp.task
        self.memory_limit, self.incarnation = memory_limit, incarnation
        self.owner = owner

    def __repr__(self) -> str:
        return f"<RemoteDevice {self.name}>"


class WorkerClient(_Client):
    """The worker service of another task: implements
    :class:`~flowrt.plugin.services.WorkerService` over a message transport."""

    def __init__(self, transport: Any, address: str, security: Any = "default"):
        super().__init__(transport, address, security)
        self._devices: list[RemoteDevice] | None = None
        self.incarnation = 0
        self.job = ""
        self.task = -1
        self._args: dict[str, list[int]] = {}
        self._positions: dict[str, list[int]] = {}

    def __repr__(self) -> str:
        return f"<WorkerClient {self.target}>"

    def get_status(self, timeout: float | None = None) -> WorkerStatus:
        """Ask the worker for its devices and incarnation (refreshes :attr:`devices`)."""
        resp, _ = self.call("Worker/GetStatus", pb.Empty(), pb.GetStatusResponse,
                            timeout=timeout)
        new = [(d.name, d.device_type, d.memory_limit, d.incarnation) for d in resp.device]
        old = self._devices
        # keep the device objects while they are the same: placement maps devices to
        # workers by identity, and health checks call this from another thread
        if old is None or [(d.name, d.device_type, d.memory_limit, d.incarnation)
                           for d in old] != new:
            self._devices = [RemoteDevice(*d, owner=self) for d in new]
        self.incarnation, self.job, self.task = resp.incarnation, resp.job, resp.task
        return WorkerStatus(list(self._devices), resp.incarnation, resp.job, resp.task)

    @property
    def devices(self) -> list[RemoteDevice]:
        """The task's devices (asked for on first use)."""
        if self._devices is None:
            self.get_status()
        return self._devices  # type: ignore[return-value]

    def register_graph(self, session_handle: str, ir: Any, fetches: Sequence[Any],
                       inter_op_threads: int = 0, pull_together: Sequence[str] = ()) -> str:
        """Register one partition: :meth:`register_partitions` of a single one."""

        dev = next(iter(ir.nodes.values())).assigned_device if ir.nodes else None
        p = Partition(next((d for d in self.devices if d.name == dev), self.devices[0]), ir)
        p.fetches = list(fetches)
        p.fetch_positions = list(range(len(fetches)))
        return self.register_partitions(session_handle, [p], len(fetches), inter_op_threads,
                                        pull_together)

    def register_partitions(self, session_handle: str, parts: Sequence[Any],
                            n_fetches: int, inter_op_threads: int = 0,
                            pull_together: Sequence[str] = ()) -> str:
        """``Worker/RegisterGraph``: send each partition as a ``GraphDef``; remembers
        which feeds and fetch positions the graph has (:meth:`run_graph` sends and
        expects only those)."""

        req = pb.RegisterGraphRequest(session_handle=session_handle, n_fetches=n_fetches,
                                      inter_op_threads=inter_op_threads,
                                      pull_together=list(pull_together))
        args: set[int] = set()
        positions: list[int] = []
        for p in parts:
            pd = req.partition.add(device=p.device.name)
            pd.graph_def.CopyFrom(ir_to_graph_def(p.ir, p.device.name))
            pd.fetch.extend(f"{n}:{i}" for n, i in p.fetches)
            pd.fetch_position.extend(p.fetch_positions)
            pd.target.extend(p.ir.targets)
            for f, a in p.ir.feeds:
                pd.feed.append(f)
                pd.feed_arg.append(a)
            positions.extend(p.fetch_positions)
            for n in p.ir.nodes.values():
                if n.type == ARG_OP:
                    args.add(int(n.node_attrs["index"]))
        resp, _ = self.call("Worker/RegisterGraph", req, pb.RegisterGraphResponse)
        h = resp.graph_handle
        self._args[h] = sorted(args)
        self._positions[h] = positions
        return h

    def fetch_positions(self, graph_handle: str) -> list[int]:
        """The step-wide fetch positions of a graph registered through this client."""
        return self._positions.get(graph_handle, [])

    def deregister_graph(self, graph_handle: str) -> None:
        """``Worker/DeregisterGraph`` (a worker gone or restarted is ignored)."""
        self._args.pop(graph_handle, None)
        self._positions.pop(graph_handle, None)
        try:
            self.call("Worker/DeregisterGraph",
                      pb.DeregisterGraphRequest(graph_handle=graph_handle), pb.Empty,
                      timeout=5.0)
        except errors.OpError:
            pass  # the worker is gone or restarted: nothing to release there

    def run_graph(self, request: RunGraphRequest) -> RunGraphResponse:
        """``Worker/RunGraph`` (:meth:`WorkerService.run_graph
        <flowrt.plugin.services.WorkerService.run_graph>`): the request's feeds this
        graph takes and its ``pushed_in`` tensors travel as buffers; the reply brings
        this task's fetches and, with ``push_to``, every tensor the step sent to that
        task. ``cancel`` (only if :attr:`cancellable`) stops the wait for the reply
        once set. ``rendezvous`` is for in-process calls and is not used;
        ``pushed_from`` cannot be honoured (tensors reach a remote worker's receives
        only with the call, as ``pushed_in``): it must be empty."""
        if request.pushed_from:
            raise errors.InvalidArgumentError(
                None, None, f"RunGraph on {self.target}: tensors pushed from "
                f"{sorted(request.pushed_from)} can only reach a remote worker with the "
                "call (pushed_in)")
        graph_handle, args, timeout = request.graph_handle, request.args, request.timeout
        idx = self._args.get(graph_handle, ())
        tensors = [args[i] for i in idx]
        keys: tuple[str, ...] = ()
        if request.pushed_in_from is not None:
            keys = tuple(k for k, _ in request.pushed_in)
            tensors.extend(v for _, v in request.pushed_in)
        ms = int(timeout * 1000) if timeout else 0
        # the request is the same every step but for its step id (fixed64, field 2)
        head = _cached(_BODIES, (graph_handle, request.trace, ms, request.push_to,
                                 request.pushed_in_from, keys, self.address),
                       lambda: self._run_graph_request(request, idx, ms, keys))
        req = head + b"\x11" + (request.step_id & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")
        t0 = time.perf_counter()
        resp, values = self.call("Worker/RunGraph", req, pb.RunGraphResponse,
                                 tensors, cancel=request.cancel)
        nf = len(resp.fetch_position)
        if len(values) != nf + len(resp.pushed_key):
            raise errors.InternalError(None, None, f"RunGraph on {self.target}: got "
                                       f"{len(values)} tensors for {nf} fetches and "
                                       f"{len(resp.pushed_key)} pushed tensors")
        n = max(resp.fetch_position) + 1 if nf else 0
        out: list[Any] = [None] * n
        for p, v in zip(resp.fetch_position, values):
            out[p] = v
        stats = None
        if request.trace:
            stats = []
            if len(resp.stats):
                t1 = time.perf_counter()
                stats = _stats_from_proto(resp.stats, (t0 + t1) / 2 - resp.clock)
        return RunGraphResponse(out, list(zip(resp.pushed_key, values[nf:])), stats)

    @staticmethod
    def _run_graph_request(request: RunGraphRequest, idx: Sequence[int], ms: int,
                           keys: Sequence[str]) -> bytes:
        """A serialised ``RunGraphRequest`` for ``request`` without its step id."""
        req = pb.RunGraphRequest(graph_handle=request.graph_handle, trace=request.trace,
                                 timeout_in_ms=ms)
        req.arg_index.extend(idx)
        if request.push_to is not None:
            req.push_job, req.push_task = request.push_to
        if request.pushed_in_from is not None:
            req.pushed_job, req.pushed_task = request.pushed_in_from
            req.pushed_key.extend(keys)
        return req.SerializeToString()

    def recv_tensor(self, step_id: int, key: str, timeout: float | None = None,
                    cancel: threading.Event | None = None) -> Any:
        """``Worker/RecvTensor``: the tensor the task sent under ``key`` in the step
        (``cancel`` ends the wait where the channel is cancellable)."""
        req = pb.RecvTensorRequest(step_id=step_id, key=key,
                                   timeout_in_ms=int(timeout * 1000) if timeout else 0)
        _, values = self.call("Worker/RecvTensor", req, pb.RecvTensorResponse,
                              timeout=None if timeout is None else timeout + 5.0,
                              cancel=cancel)
        if len(values) != 1:
            raise errors.InternalError(None, None, f"RecvTensor {key}: got {len(values)} "
                                       "tensors")
        return values[0]

    def recv_tensors(self, step_id: int, keys: Sequence[str],
                     timeout: float | None = None, wait_all: bool = False,
                     cancel: threading.Event | None = None) -> list[tuple[int, Any]]:
        """Pull several tensors of a step in one call: ``[(index in keys, value)]`` for
        every key sent by the time the first one was (at least one; all of them with
        ``wait_all``); ask again for the others. ``cancel`` as for
        :meth:`recv_tensor`."""
        req = pb.RecvTensorsRequest(step_id=step_id, key=list(keys), wait_all=wait_all,
                                    timeout_in_ms=int(timeout * 1000) if timeout else 0)
        resp, values = self.call("Worker/RecvTensors", req, pb.RecvTensorsResponse,
                                 timeout=None if timeout is None else timeout + 5.0,
                                 cancel=cancel)
        if len(values) != len(resp.index) or not values or \
                any(not 0 <= i < len(keys) for i in resp.index):
            raise errors.InternalError(None, None, f"RecvTensors on {self.target}: a bad "
                                       f"reply ({len(values)} tensors, indices "
                                       f"{list(resp.index)[:8]} for {len(keys)} keys)")
        return list(zip(resp.index, values))

    def abort_step(self, step_id: int, error: BaseException) -> None:
        """``Worker/AbortStep`` (best effort: an unreachable worker is ignored)."""
        st = pb.Status(code=getattr(error, "error_code", errors.ABORTED),
                       message=getattr(error, "message", str(error)))
        try:
            self.call("Worker/AbortStep", pb.AbortStepRequest(step_id=step_id, status=st),
                      pb.Empty, timeout=5.0)
        except errors.OpError:
            pass

    def abort_steps(self, session_handle: str, error: BaseException) -> int:
        """Nothing to do here: remote steps are aborted one by one; returns 0."""
        return 0  # remote steps are aborted one by one (abort_step)

    def cleanup_session(self, session_handle: str) -> None:
        """``Worker/CleanupSession`` (an unreachable worker is ignored)."""
        try:
            self.call("Worker/CleanupSession",
                      pb.CleanupSessionRequest(session_handle=session_handle), pb.Empty,
                      timeout=5.0)
        except (errors.UnavailableError, errors.DeadlineExceededError):
            pass

    def reset(self, containers: Sequence[str] | None = None) -> None:
        """``Worker/Reset``: clear resource containers (all if None)."""
        self.call("Worker/Reset", pb.ResetRequest(container=list(containers or ())),
                  pb.Empty)

    def shutdown(self, reason: str = "") -> None:
        """``Worker/Shutdown``: the task's server stops."""
        self.call("Worker/Shutdown", pb.ShutdownRequest(reason=reason), pb.Empty,
                  timeout=5.0)


class MasterClient(_Client):
    """The master service of another process: implements
    :class:`~flowrt.plugin.services.MasterService` (sessions are
    :class:`RemoteMasterSession` objects, each a
    :class:`~flowrt.plugin.services.SessionService`)."""

    def __repr__(self) -> str:
        return f"<MasterClient {self.target}>"

    def create_session(self, graph: Any, config: Any = None,
                       connect_timeout: float | None = None) -> str:
        """Create a session on ``graph``; waits up to ``connect_timeout`` seconds (else
        the config's ``operation_timeout_in_ms``, else 30 s) for the master to answer."""
        req = pb.CreateSessionRequest(graph_version=graph.version)
        req.graph_def.CopyFrom(graph.as_graph_def())
        if config is not None:
            req.config.CopyFrom(config)
        if connect_timeout is None:
            ms = config.operation_timeout_in_ms if config is not None else 0
            connect_timeout = ms / 1000.0 if ms > 0 else 30.0
        deadline = time.monotonic() + connect_timeout
        delay = 0.05
        while True:
            try:
                # the master waits up to the same deadline for the cluster's tasks and
                # then says which one it could not reach: a little slack lets it say so
                # (a hung master: DeadlineExceededError at the deadline and the slack)
                resp, _ = self.call("Master/CreateSession", req, pb.CreateSessionResponse,
                                    timeout=call_timeout(deadline - time.monotonic(),
                                                         connect_timeout))
                break
            except errors.UnavailableError as e:
                if time.monotonic() + delay >= deadline:
                    raise errors.UnavailableError(
                        None, None, f"could not reach the master at {self.target} within "
                        f"{connect_timeout:g} s: {e.message}") from None
                time.sleep(delay)
                delay = min(1.0, delay * 2)
        h = resp.session_handle
        s = self._sessions[h] = RemoteMasterSession(self, h, graph, graph.version)
        ms = config.operation_timeout_in_ms if config is not None else 0
        s.op_timeout = ms / 1000.0 if ms > 0 else None
        return h

    @property
    def _sessions(self) -> dict[str, "RemoteMasterSession"]:
        s = self.__dict__.get("_sess")
        if s is None:
            s = self.__dict__["_sess"] = {}
        return s

    def session(self, handle: str) -> "RemoteMasterSession":
        """A session this client created (``AbortedError`` if it is not one)."""
        s = self._sessions.get(handle)
        if s is None:
            raise errors.AbortedError(None, None, f"Session {handle} is not found")
        return s

    def close_session(self, handle: str) -> None:
        """``Master/CloseSession`` (a master that is gone took the session along; one
        that does not answer within the session's ``operation_timeout_in_ms``, or 10 s,
        is given up on)."""
        s = self._sessions.pop(handle, None)
        op = s.op_timeout if s is not None else None
        try:
            self.call("Master/CloseSession", pb.CloseSessionRequest(session_handle=handle),
                      pb.Empty, timeout=10.0 if op is None else call_timeout(min(op, 10.0)))
        except (errors.UnavailableError, errors.DeadlineExceededError):
            pass  # the master is gone: so is the session

    def list_devices(self) -> list[tuple[str, str, int, int]]:
        """``Master/ListDevices``: ``[(name, type, memory limit, incarnation)]``."""
        resp, _ = self.call("Master/ListDevices", pb.Empty(), pb.ListDevicesResponse)
        return [(d.name, d.device_type, d.memory_limit, d.incarnation) for d in resp.device]

    def reset(self, containers: Sequence[str] | None = None) -> None:
        """``Master/Reset``: close every session, clear containers on every task."""
        self.call("Master/Reset", pb.ResetRequest(container=list(containers or ())),
                  pb.Empty)

    def shutdown(self, reason: str = "") -> None:
        """Stop every task of the master's cluster (their ``Server.join()`` returns)."""
        self.call("Master/Shutdown", pb.ShutdownRequest(reason=reason), pb.Empty,
                  timeout=30.0)


#: every live session on a remote master (for :func:`_close_running_sessions_at_exit`)
_REMOTE_SESSIONS: "weakref.WeakSet[RemoteMasterSession]" = weakref.WeakSet()


@_threads.at_exit
def _close_running_sessions_at_exit(deadline: float) -> None:
    """The process is exiting: close every remote session with a step still running.
    Its master then cancels those steps on every task; left alone, a step blocked
    there (a dequeue on a ps) would outlive this process and take the next element
    anyone enqueues. Bounded by ``deadline``."""
    for s in list(_REMOTE_SESSIONS):
        left = deadline - time.monotonic()
        if left <= 0:
            return
        if s.running:
            try:
                s.client.call("Master/CloseSession",
                              pb.CloseSessionRequest(session_handle=s.handle), pb.Empty,
                              timeout=left)
            except errors.OpError:
                pass  # the master is gone or slow: nothing more to do at exit


class RemoteMasterSession:
    """A session on a remote master; sends the graph again when it has grown."""

    def __init__(self, client: MasterClient, handle: str, graph: Any, version: int):
        self.client, self.handle, self.graph = client, handle, graph
        self._sent = version
        self._lock = threading.Lock()
        #: how many steps are running (the exit hook closes the session if any)
        self.running = 0
        self._running_lock = threading.Lock()  # not _lock: _sync holds it over a call
        #: seconds each call may take (``ConfigProto.operation_timeout_in_ms``); None:
        #: unbounded
        self.op_timeout: float | None = None
        _REMOTE_SESSIONS.add(self)

    def _timeout(self, seconds: float | None = None) -> float | None:
        """The channel timeout of a call bounded by ``seconds`` (else the session's
        operation timeout): see :func:`call_timeout`."""
        t = seconds if seconds is not None else self.op_timeout
        return None if t is None else call_timeout(t)

    def _sync(self, timeout: float | None = None) -> int:
        v = self.graph.version
        if v != self._sent:
            with self._lock:
                v = self.graph.version
                if v != self._sent:
                    req = pb.ExtendSessionRequest(session_handle=self.handle,
                                                  graph_version=v)
                    req.graph_def.CopyFrom(self.graph.as_graph_def())
                    self.client.call("Master/ExtendSession", req, pb.ExtendSessionResponse,
                                     timeout=timeout)
                    self._sent = v
        return v

    def make_callable(self, feeds: Sequence[str], fetches: Sequence[str],
                      targets: Sequence[str]) -> int:
        """``Master/MakeCallable`` (the graph is sent again first if it grew)."""
        timeout = self._timeout()
        v = self._sync(timeout)
        resp, _ = self.client.call("Master/MakeCallable", pb.MakeCallableRequest(
            session_handle=self.handle, feed=list(feeds), fetch=list(fetches),
            target=list(targets), graph_version=v), pb.MakeCallableResponse,
            timeout=timeout)
        return int(resp.handle)

    def run_callable(self, cid: int, args: Sequence[Any], trace: bool = False,
                     timeout_ms: int = 0) -> tuple[list[Any], list[NodeStat] | None]:
        """``Master/RunCallable``: the step's fetched values and, traced, its node
        stats on this process's clock."""
        # at exit (only daemon threads run then) a new step could block on another task
        # after the exit hook closed the sessions: it is never started
        _threads.park_if_exiting()
        # the step's deadline (else the session's operation timeout) bounds the wait
        # here too, so a master that hangs (a stopped process) cannot hold the caller
        t0 = time.monotonic()
        timeout = self._timeout(timeout_ms / 1000.0 if timeout_ms and timeout_ms > 0
                                else None)
        v = self._sync(timeout)
        if timeout is not None:
            timeout = max(0.0, timeout - (time.monotonic() - t0))
        req = _cached(_BODIES, (self.client.address, self.handle, cid, trace, timeout_ms, v),
                      lambda: pb.RunCallableRequest(
                          session_handle=self.handle, handle=cid, trace=trace,
                          timeout_in_ms=timeout_ms or 0, graph_version=v).SerializeToString())
        t0 = time.perf_counter()
        with self._running_lock:
            self.running += 1
        try:
            resp, values = self.client.call("Master/RunCallable", req,
                                            pb.RunCallableResponse, args, timeout=timeout)
        except BaseException:
            # cancelled because the process is exiting: this daemon thread waits to be
            # stopped rather than raise (and print) an error nobody can handle
            _threads.park_if_exiting()
            raise
        finally:
            with self._running_lock:
                self.running -= 1
        stats = None
        if trace:
            t1 = time.perf_counter()
            stats = _stats_from_proto(resp.stats, (t0 + t1) / 2 - resp.clock_offset)
        return values, stats

    def release_callable(self, cid: int) -> None:
        """``Master/ReleaseCallable`` (best effort)."""
        try:
            self.client.call("Master/ReleaseCallable",
                             pb.CallableRequest(session_handle=self.handle, handle=cid),
                             pb.Empty, timeout=self._timeout(min(self.op_timeout or 10.0,
                                                                 10.0)))
        except errors.OpError:
            pass

    def partition_graphs(self, cid: int) -> list[Any]:
        """``Master/PartitionGraphs``: the ``GraphDef`` of each partition."""
        resp, _ = self.client.call("Master/PartitionGraphs", pb.CallableRequest(
            session_handle=self.handle, handle=cid), pb.PartitionGraphsResponse,
            timeout=self._timeout())
        return list(resp.partition_graph)

    def placement_of(self, cid: int) -> dict[str, str]:
        """``Master/Placement``: the device of every node of the step."""
        resp, _ = self.client.call("Master/Placement", pb.CallableRequest(
            session_handle=self.handle, handle=cid), pb.PlacementResponse,
            timeout=self._timeout())
        return dict(resp.placement)

