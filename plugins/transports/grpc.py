"""The gRPC message transport (``grpc://host:port``).

A :class:`GrpcTransport` moves the core's framed messages over grpcio with generic
handlers, so no generated stubs are involved and any method name works: the core's
method ``"Worker/RunGraph"`` is the gRPC path ``/flowrt.Worker/RunGraph``.

Framing
-------
A message ``(header, buffers)`` is one flat byte string, all integers little-endian::

    offset 0   u8  magic 0xF7     u8 version 1     u8 kind     u8 zero
    offset 4   u32 nbuf           (number of buffers)
    offset 8   u64 header_len
    offset 16  u64 len[nbuf]      (each buffer's length)
    then header, buffer 0, buffer 1, ... in order; each part that is not empty
               starts at the next multiple of 16 (zero padding before it), empty
               parts take no space, and nothing follows the last part

The padding keeps every buffer 16-byte aligned relative to the frame, so the receiver
can view tensors in place. ``kind`` is 0 for a message and 1 for a *pending reply*
(its header is a token, see below). The receiver checks that the lengths add up to the
frame size exactly; anything else is refused as malformed.

Calls
-----
- A request whose frame fits in ``chunk_bytes`` is one unary call to
  ``/flowrt.<method>``; its reply comes back in the unary response when it fits in
  ``chunk_bytes`` too. A larger reply is parked on the server and the response is a
  *pending reply* frame carrying a one-time token; the client at once fetches it with a
  server-streaming call to ``/flowrt-transport/FetchReply`` (the token as request), in
  chunks. Unary calls are the cheapest grpcio offers for the tiny messages that make up
  most traffic, and chunked streams are the fastest way to move large ones.
- A larger request is a bidirectional stream to ``/flowrt-chunked.<method>``: the frame
  is cut into pieces of ``chunk_bytes`` bytes (the last one shorter) and the reply
  streams back the same way.
- A frame larger than ``max_message_bytes`` is refused (RESOURCE_EXHAUSTED) as soon as
  its prefix is read, before any of it is handed to the handler. Malformed frames and
  handler crashes end the call with INTERNAL and the server's reason.

gRPC status codes become :mod:`flowrt.errors` classes: UNAVAILABLE (and calls cut off by
a closing channel) -> UnavailableError naming the address, DEADLINE_EXCEEDED ->
DeadlineExceededError, RESOURCE_EXHAUSTED -> ResourceExhaustedError, UNIMPLEMENTED ->
UnimplementedError, UNKNOWN -> UnknownError, anything else -> InternalError.

Servers run every handler on its own thread (idle threads are reused and retire after a
while), so any number of handlers may block at once. HTTP/2 keepalive pings notice a
silent dead peer within about 15 seconds; a peer process that dies closes its sockets
and fails calls at once.
"""
from __future__ import annotations

import itertools
import secrets
import struct
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Sequence

import grpc
import grpc.experimental  # noqa: F401  (makes grpc.experimental.ChannelOptions available)
import numpy as np

from flowrt import errors
from flowrt.distributed.message_transport import MessageTransport
from flowrt.threads import DaemonPool
from flowrt.transport import Channel, Handler, ServerHandle, split_host_port

__all__ = ["GrpcTransport", "GrpcChannel", "GrpcServer", "encode_frame", "decode_frame"]

_MAGIC, _VERSION = 0xF7, 1
KIND_MESSAGE, KIND_PENDING = 0, 1
_PREFIX = struct.Struct("<BBBxIQ")
_ALIGN = 16
_ZEROS = bytes(_ALIGN)

_UNARY_PREFIX = "/flowrt."
_CHUNKED_PREFIX = "/flowrt-chunked."
_FETCH_PATH = "/flowrt-transport/FetchReply"

#: seconds a parked large reply waits for its fetch before it is dropped
PENDING_TTL = 60.0
#: seconds an idle server thread waits for work before it exits
IDLE_THREAD_S = 30.0
#: distinct method paths whose gRPC handlers a server keeps cached
_HANDLER_CACHE = 1024
_CANCEL_SLICE_S = 0.1  # how often a cancellable call looks at its cancel event


class FrameError(Exception):
    """A frame that cannot be decoded; ``too_big`` when it is over the size limit."""

    def __init__(self, message: str, too_big: bool = False):
        super().__init__(message)
        self.too_big = too_big


def _align(n: int) -> int:
    return (n + _ALIGN - 1) & -_ALIGN


def _flat(buf: Any) -> memoryview:
    """A 1-D unsigned-byte view of a contiguous buffer (no copy)."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if mv.ndim == 1 and mv.format == "B":
        return mv
    if not mv.c_contiguous:
        raise ValueError(f"buffer of shape {mv.shape} is not C-contiguous")
    try:
        return mv.cast("B")
    except TypeError:  # formats cast() refuses (complex, byte-swapped): view via numpy
        return memoryview(np.frombuffer(mv, np.uint8))


def encode_frame(header: bytes, buffers: Sequence[Any] = (),
                 kind: int = KIND_MESSAGE) -> tuple[list[Any], int]:
    """Frame ``(header, buffers)`` (see the module docstring).

    :returns: the pieces whose concatenation is the frame (the buffers themselves, not
        copies) and the frame's total size in bytes
    """
    views = [_flat(b) for b in buffers]
    lens = [v.nbytes for v in views]
    n = len(views)
    head = _PREFIX.pack(_MAGIC, _VERSION, kind, n, len(header))
    if n:
        head += struct.pack(f"<{n}Q", *lens)
    pos = len(head)
    pieces: list[Any] = [head]
    for part, size in itertools.chain(((header, len(header)),), zip(views, lens)):
        if size:
            pad = _align(pos) - pos
            if pad:
                pieces.append(_ZEROS[:pad])
            pieces.append(part)
            pos += pad + size
    return pieces, pos


def _frame_layout(mv: memoryview, limit: int) -> tuple[int, int, int, list[int], int]:
    """Parse a frame's prefix: ``(kind, nbuf, header_len, lens, total)``; needs the
    whole prefix (16 + 8 * nbuf bytes) in ``mv``."""
    if len(mv) < _PREFIX.size:
        raise FrameError(f"frame of {len(mv)} bytes is shorter than its "
                         f"{_PREFIX.size}-byte prefix")
    magic, version, kind, n, hlen = _PREFIX.unpack_from(mv)
    if magic != _MAGIC or version != _VERSION or kind not in (KIND_MESSAGE, KIND_PENDING):
        raise FrameError(f"not a flowrt frame (magic {magic:#x}, version {version}, "
                         f"kind {kind})")
    plen = _PREFIX.size + 8 * n
    if plen > limit:
        raise FrameError(f"frame declares {n} buffers, over the {limit}-byte limit",
                         too_big=True)
    if len(mv) < plen:
        raise FrameError(f"frame of {len(mv)} bytes is shorter than its prefix of "
                         f"{plen} bytes ({n} buffers)")
    lens = list(struct.unpack_from(f"<{n}Q", mv, _PREFIX.size)) if n else []
    pos = plen
    for size in itertools.chain((hlen,), lens):
        if size:
            pos = _align(pos) + size
    if pos > limit:
        raise FrameError(f"message of {pos} bytes exceeds the limit of {limit} bytes",
                         too_big=True)
    return kind, n, hlen, lens, pos


def decode_frame(data: Any, limit: int) -> tuple[int, bytes, list[memoryview]]:
    """Decode one whole frame: ``(kind, header, buffers)``.

    The buffers are memoryviews into ``data`` (no copies). Raises :class:`FrameError`
    when the frame is malformed or larger than ``limit`` bytes.
    """
    mv = data if isinstance(data, memoryview) else memoryview(data)
    kind, n, hlen, lens, total = _frame_layout(mv, limit)
    if total != len(mv):
        raise FrameError(f"frame lengths add up to {total} bytes but it has {len(mv)}")
    pos = _PREFIX.size + 8 * n
    header = b""
    if hlen:
        pos = _align(pos)
        header = bytes(mv[pos:pos + hlen])
        pos += hlen
    bufs = []
    for size in lens:
        if size:
            pos = _align(pos)
        bufs.append(mv[pos:pos + size])
        pos += size
    return kind, header, bufs


def _chunks(pieces: Sequence[Any], size: int) -> Iterator[bytes]:
    """Cut the concatenation of ``pieces`` into byte strings of ``size`` bytes (the last
    one shorter); each byte of the payload is copied once."""
    out: list[Any] = []
    have = 0
    for piece in pieces:
        mv = piece if isinstance(piece, memoryview) else memoryview(piece)
        while len(mv):
            take = min(size - have, len(mv))
            out.append(mv[:take] if take < len(mv) else mv)
            mv = mv[take:]
            have += take
            if have == size:
                yield b"".join(out)
                out, have = [], 0
    if out:
        yield b"".join(out)


class _Assembler:
    """Reassembles a frame from its chunks into one uninitialised numpy byte array (a
    frame that arrives in a single chunk is used as it is)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.head = b""  # the start of the frame while its prefix is incomplete
        self.whole: bytes | None = None
        self.data: np.ndarray | None = None
        self.pos = 0

    def add(self, chunk: bytes) -> None:
        if self.whole is not None:
            raise FrameError(f"stream carries more than the {len(self.whole)} bytes its "
                             "frame declares")
        if self.data is None:
            first = self.head + chunk if self.head else chunk
            if len(first) < _PREFIX.size:
                self.head = first
                return
            plen = _PREFIX.size + 8 * _PREFIX.unpack_from(first)[3]
            if len(first) < plen <= self.limit:
                self.head = first
                return
            total = _frame_layout(memoryview(first), self.limit)[4]
            self.head = b""
            if total == len(first):
                self.whole = first
                return
            self.data, chunk = np.empty(total, np.uint8), first
        end = self.pos + len(chunk)
        if end > len(self.data):
            raise FrameError(f"stream carries more than the {len(self.data)} bytes its "
                             "frame declares")
        self.data[self.pos:end] = np.frombuffer(chunk, np.uint8)
        self.pos = end

    def finish(self) -> tuple[int, bytes, list[memoryview]]:
        if self.whole is not None:
            return decode_frame(self.whole, self.limit)
        if self.data is None or self.pos != len(self.data):
            want = "?" if self.data is None else len(self.data)
            raise FrameError(f"stream ended after {self.pos or len(self.head)} of {want} "
                             "frame bytes")
        return decode_frame(memoryview(self.data), self.limit)


# -- the server ------------------------------------------------------------------------

class _Pending:
    """Large replies parked until their client fetches them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[bytes, tuple[float, list[Any]]] = {}

    def put(self, pieces: list[Any]) -> bytes:
        token = secrets.token_bytes(16)
        now = time.monotonic()
        with self._lock:
            for k in [k for k, (t, _) in self._items.items() if now - t > PENDING_TTL]:
                del self._items[k]
            self._items[token] = (now, pieces)
        return token

    def take(self, token: bytes) -> list[Any] | None:
        with self._lock:
            item = self._items.pop(token, None)
        return None if item is None else item[1]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


class GrpcServer(ServerHandle, grpc.GenericRpcHandler):
    """A running gRPC server that answers every request with one :data:`Handler`."""

    def __init__(self, transport: "GrpcTransport", address: str, handler: Handler):
        host, port = split_host_port(address)
        self._handler = handler
        self._limit = transport.max_message_bytes
        self._chunk = transport.chunk_bytes
        self._pending = _Pending()
        self._cache: dict[str, grpc.RpcMethodHandler] = {}
        self._fetch = grpc.unary_stream_rpc_method_handler(self._fetch_reply)
        # each request on an idle thread or a new one: never queued behind blocked
        # work (a step can block for long); daemon threads, never joined at exit
        self._executor = DaemonPool(None, thread_name_prefix=f"grpc-server-{port}",
                                    idle_timeout=IDLE_THREAD_S)
        self._stopped = False
        bind_host = f"[{host}]" if ":" in host else host
        self._server = grpc.server(self._executor, handlers=[self],
                                   options=transport._server_options())
        try:
            bound = self._server.add_insecure_port(f"{bind_host}:{port}")
        except RuntimeError as e:
            bound, why = 0, str(e)
        else:
            why = "the port is in use or the host is not local"
        if not bound:
            self._executor.shutdown()
            raise errors.UnknownError(None, None, f"could not start gRPC server on "
                                      f"{address!r}: {why}")
        self.address = f"{bind_host}:{bound}"
        self._server.start()

    # grpc.GenericRpcHandler
    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        """The gRPC handler for a call's path (None, so UNIMPLEMENTED, for foreign ones)."""
        path = details.method
        h = self._cache.get(path)
        if h is not None:
            return h
        if path == _FETCH_PATH:
            return self._fetch
        if path.startswith(_UNARY_PREFIX):
            method = path[len(_UNARY_PREFIX):]
            h = grpc.unary_unary_rpc_method_handler(
                lambda req, ctx: self._unary(method, req, ctx))
        elif path.startswith(_CHUNKED_PREFIX):
            method = path[len(_CHUNKED_PREFIX):]
            h = grpc.stream_stream_rpc_method_handler(
                lambda it, ctx: self._streamed(method, it, ctx))
        else:
            return None
        if len(self._cache) < _HANDLER_CACHE:
            self._cache[path] = h
        return h

    def _handle(self, method: str, header: bytes, bufs: list, ctx: grpc.ServicerContext
                ) -> tuple[list[Any], int]:
        try:
            rh, rb = self._handler(method, header, bufs)
            pieces, total = encode_frame(rh, rb)
        except Exception as e:  # noqa: BLE001 - reported to the caller
            ctx.abort(grpc.StatusCode.INTERNAL,
                      f"handler for {method} on {self.address} failed: "
                      f"{type(e).__name__}: {e}")
        if total > self._limit:
            ctx.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                      f"reply to {method} on {self.address} is {total} bytes, over the "
                      f"limit of {self._limit} bytes")
        return pieces, total

    def _decode(self, method: str, fn: Callable[[], tuple[int, bytes, list]],
                ctx: grpc.ServicerContext) -> tuple[bytes, list]:
        try:
            kind, header, bufs = fn()
        except FrameError as e:
            code = grpc.StatusCode.RESOURCE_EXHAUSTED if e.too_big else grpc.StatusCode.INTERNAL
            ctx.abort(code, f"request to {method} on {self.address} refused: {e}")
        if kind != KIND_MESSAGE:
            ctx.abort(grpc.StatusCode.INTERNAL,
                      f"request to {method} on {self.address} refused: frame kind {kind}")
        return header, bufs

    def _unary(self, method: str, request: bytes, ctx: grpc.ServicerContext) -> bytes:
        header, bufs = self._decode(method, lambda: decode_frame(request, self._limit), ctx)
        pieces, total = self._handle(method, header, bufs, ctx)
        if total <= self._chunk:
            return b"".join(pieces)
        token = self._pending.put(pieces)
        return b"".join(encode_frame(token, (), KIND_PENDING)[0])

    def _streamed(self, method: str, chunks: Iterable[bytes], ctx: grpc.ServicerContext
                  ) -> Iterator[bytes]:
        def read() -> tuple[int, bytes, list]:
            asm = _Assembler(self._limit)
            for chunk in chunks:
                asm.add(chunk)
            return asm.finish()

        header, bufs = self._decode(method, read, ctx)
        pieces, _ = self._handle(method, header, bufs, ctx)
        del header, bufs
        yield from _chunks(pieces, self._chunk)

    def _fetch_reply(self, token: bytes, ctx: grpc.ServicerContext) -> Iterator[bytes]:
        pieces = self._pending.take(token)
        if pieces is None:
            ctx.abort(grpc.StatusCode.NOT_FOUND,
                      f"no pending reply with that token on {self.address} (expired after "
                      f"{PENDING_TTL:g} s or already fetched)")
        yield from _chunks(pieces, self._chunk)

    def stop(self, grace: float = 0.0) -> None:
        """Stop listening; calls still running after ``grace`` seconds are cancelled
        (their callers get UnavailableError)."""
        if self._stopped:
            return
        self._stopped = True
        done = self._server.stop(grace)
        done.wait(grace + 5.0)
        self._pending.clear()
        self._executor.shutdown(wait=False)

    def __repr__(self) -> str:
        return f"<GrpcServer {self.address}>"


# -- the client ------------------------------------------------------------------------

class _Shared:
    """One grpc channel per address, shared by every :class:`GrpcChannel` handle."""

    def __init__(self, transport: "GrpcTransport", address: str):
        self.transport = transport
        self.address = address
        self.refs = 0
        self.closed = False
        self.limit = transport.max_message_bytes
        self.chunk = transport.chunk_bytes
        self.channel = grpc.insecure_channel(address, options=transport._channel_options())
        self.fetch = self.channel.unary_stream(_FETCH_PATH)
        self.unary: dict[str, grpc.UnaryUnaryMultiCallable] = {}
        self.streamed: dict[str, grpc.StreamStreamMultiCallable] = {}


class GrpcChannel(Channel):
    """A handle on the transport's shared gRPC channel to one address.

    :meth:`close` releases the handle; the underlying connection closes (cancelling any
    calls still in flight, which then raise UnavailableError) when its last handle does.
    """

    def __init__(self, shared: _Shared):
        self._shared = shared
        self._closed = False
        self.address = shared.address

    cancellable = True

    def call(self, method: str, header: bytes, buffers: Sequence[Any] = (),
             timeout: float | None = None, cancel: threading.Event | None = None
             ) -> tuple[bytes, list[Any]]:
        sh = self._shared
        if self._closed or sh.closed:
            raise errors.UnavailableError(None, None, f"grpc call {method} to "
                                          f"{self.address}: the channel is closed")
        try:
            pieces, total = encode_frame(header, buffers)
        except (TypeError, ValueError) as e:
            raise errors.InvalidArgumentError(None, None, f"grpc call {method} to "
                                              f"{self.address}: bad buffer: {e}") from None
        if total > sh.limit:
            raise errors.ResourceExhaustedError(
                None, None, f"grpc call {method} to {self.address}: message of {total} "
                f"bytes exceeds the limit of {sh.limit} bytes")
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            if total <= sh.chunk:
                mc = sh.unary.get(method)
                if mc is None:
                    mc = sh.unary[method] = sh.channel.unary_unary(_UNARY_PREFIX + method)
                if cancel is None:
                    reply = mc(b"".join(pieces), timeout=timeout)
                else:
                    reply = self._wait(method, mc.future(b"".join(pieces), timeout=timeout),
                                       cancel)
                kind, rh, rb = decode_frame(reply, sh.limit)
                if kind == KIND_MESSAGE:
                    return rh, rb
                left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                return self._receive(method, sh.fetch(rh, timeout=left))
            mc = sh.streamed.get(method)
            if mc is None:
                mc = sh.streamed[method] = sh.channel.stream_stream(_CHUNKED_PREFIX + method)
            del buffers
            stream = mc(_chunks(pieces, sh.chunk), timeout=timeout)
            if cancel is None:
                return self._receive(method, stream)
            finished = threading.Event()
            threading.Thread(target=self._watch, args=(stream, cancel, finished),
                             daemon=True, name="flowrt-grpc-cancel").start()
            try:
                return self._receive(method, stream)
            finally:
                finished.set()
        except grpc.RpcError as e:
            if cancel is not None and cancel.is_set():
                raise self._cancelled(method) from None
            raise self._error(method, e) from None
        except FrameError as e:
            cls = errors.ResourceExhaustedError if e.too_big else errors.InternalError
            raise cls(None, None, f"grpc call {method} to {self.address}: bad reply: "
                      f"{e}") from None

    def _cancelled(self, method: str) -> errors.CancelledError:
        return errors.CancelledError(None, None, f"grpc call {method} to {self.address} "
                                     "was cancelled")

    def _wait(self, method: str, fut: Any, cancel: threading.Event) -> Any:
        """The result of a unary call's future, looking at ``cancel`` every 100 ms
        (the call is cancelled, and CancelledError raised, once it is set)."""
        while True:
            try:
                return fut.result(timeout=_CANCEL_SLICE_S)
            except grpc.FutureTimeoutError:
                if cancel.is_set():
                    fut.cancel()
                    raise self._cancelled(method) from None

    @staticmethod
    def _watch(stream: Any, cancel: threading.Event, finished: threading.Event) -> None:
        """Cancel a streamed call once ``cancel`` is set, unless it finished first."""
        while not finished.wait(_CANCEL_SLICE_S):
            if cancel.is_set():
                stream.cancel()
                return

    def _receive(self, method: str, stream: Any) -> tuple[bytes, list[Any]]:
        asm = _Assembler(self._shared.limit)
        try:
            for chunk in stream:
                asm.add(chunk)
        except FrameError:
            stream.cancel()
            raise
        kind, header, bufs = asm.finish()
        if kind != KIND_MESSAGE:
            raise FrameError(f"reply frame has kind {kind}")
        return header, bufs

    def _error(self, method: str, e: grpc.RpcError) -> errors.OpError:
        code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
        details = e.details() if hasattr(e, "details") else str(e)
        where = f"grpc call {method} to {self.address}"
        if code == grpc.StatusCode.UNAVAILABLE:
            return errors.UnavailableError(None, None, f"{where}: unavailable: {details}")
        if code == grpc.StatusCode.CANCELLED:  # cut off by a closing channel or server
            return errors.UnavailableError(None, None, f"{where}: cancelled: {details}")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return errors.DeadlineExceededError(None, None,
                                                f"{where}: deadline exceeded: {details}")
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            return errors.ResourceExhaustedError(None, None, f"{where}: {details}")
        if code == grpc.StatusCode.UNIMPLEMENTED:
            return errors.UnimplementedError(None, None, f"{where}: unimplemented: {details}")
        if code == grpc.StatusCode.UNKNOWN:
            return errors.UnknownError(None, None, f"{where}: {details}")
        return errors.InternalError(None, None, f"{where}: {code.name}: {details}")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._shared.transport._release(self._shared)

    def __repr__(self) -> str:
        return f"<GrpcChannel {self.address}{' closed' if self._closed else ''}>"


class GrpcTransport(MessageTransport):
    """The ``grpc`` scheme: framed messages over gRPC (see the module docstring).

    :ivar keepalive_ms: how often a connection with calls in flight is pinged; a peer
        that does not answer within ``keepalive_timeout_ms`` fails those calls with
        UnavailableError
    """

    scheme = "grpc"
    keepalive_ms: int = 10_000
    keepalive_timeout_ms: int = 5_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channels: dict[str, _Shared] = {}

    def _message_limit(self) -> int:
        # one gRPC message carries at most one chunk (plus slack for a peer that uses
        # chunks of up to 16 MiB); grpc's own limit is a signed 32-bit size
        return min(2**31 - 1, max(self.chunk_bytes, 16 << 20) + (1 << 16))

    def _common_options(self) -> list[tuple[str, Any]]:
        n = self._message_limit()
        return [("grpc.max_send_message_length", n), ("grpc.max_receive_message_length", n),
                ("grpc.keepalive_time_ms", self.keepalive_ms),
                ("grpc.keepalive_timeout_ms", self.keepalive_timeout_ms),
                ("grpc.http2.max_pings_without_data", 0)]

    def _server_options(self) -> list[tuple[str, Any]]:
        return self._common_options() + [
            ("grpc.so_reuseport", 0),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_recv_ping_interval_without_data_ms",
             min(self.keepalive_ms, 5_000)),
            ("grpc.http2.max_ping_strikes", 0)]

    def _channel_options(self) -> list[tuple[str, Any]]:
        return self._common_options() + [
            ("grpc.enable_retries", 0),
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 2_000),
            (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1)]

    def serve(self, address: str, handler: Handler) -> GrpcServer:
        """Serve ``handler`` on ``address`` (``host:port``, port 0 for a free one)."""
        return GrpcServer(self, address, handler)

    def connect(self, address: str) -> GrpcChannel:
        """A handle on the cached channel to ``address`` (connecting lazily)."""
        split_host_port(address)
        with self._lock:
            sh = self._channels.get(address)
            if sh is None:
                sh = self._channels[address] = _Shared(self, address)
            sh.refs += 1
        return GrpcChannel(sh)

    def _release(self, sh: _Shared) -> None:
        with self._lock:
            sh.refs -= 1
            if sh.refs > 0:
                return
            sh.closed = True
            if self._channels.get(sh.address) is sh:
                del self._channels[sh.address]
        sh.channel.close()

    def close(self) -> None:
        """Close every cached channel (calls in flight fail with UnavailableError)."""
        with self._lock:
            shared, self._channels = list(self._channels.values()), {}
        for sh in shared:
            sh.closed = True
            sh.channel.close()
