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
- A request whose frame fits in ``chunk_bytes`` travels on a *call stream*: a
  long-lived bidirectional stream to ``/flowrt-transport/Calls`` that the channel keeps
  open to its peer and reuses call after call. A stream carries one call at a time: the
  client writes one request message and reads one reply message; concurrent calls use
  separate streams (the channel keeps a pool of them, opening one when none is idle).
  The server answers a stream's request on the thread that reads the stream, so a call
  costs no hand-off between server threads and none of a unary call's setup. Each
  message is a 16-byte prefix, then the frame::

      offset 0   u64 call id   (chosen by the client, echoed in the reply)
      offset 8   u32 method_len (requests: the method's UTF-8 length; replies: 0)
      offset 12  u32 zero
      offset 16  method (requests only), zero padding to the next multiple of 16,
                 then the frame (so its buffers stay 16-byte aligned)

  A reply that does not fit in ``chunk_bytes`` is parked on the server and the reply
  message carries a *pending reply* frame with a one-time token; the client at once
  fetches it with a server-streaming call to ``/flowrt-transport/FetchReply`` (the
  token as request), in chunks. A failure of the transport itself (a malformed or
  oversized request, a handler that crashed, a server that is stopping) ends the stream
  with the gRPC status a unary call would have had, and the next call opens a new one.
  A call whose deadline passes or whose ``cancel`` event is set ends its stream (a
  watchdog thread per transport looks at them every 100 ms), so a late reply never
  reaches a later call. A stream that breaks (its peer died, the connection dropped)
  fails its call with UnavailableError naming the address; the next call opens a new
  stream, reconnecting to a restarted server.
- A larger request is a bidirectional stream of its own to ``/flowrt-chunked.<method>``:
  the frame is cut into pieces of ``chunk_bytes`` bytes (the last one shorter) and the
  reply streams back the same way.
- Servers also answer a small request as a unary call to ``/flowrt.<method>`` (the
  reply in the unary response, or a pending reply frame); a channel makes such calls
  instead of using call streams when :attr:`GrpcTransport.call_streams` is False.
- A frame larger than ``max_message_bytes`` is refused (RESOURCE_EXHAUSTED) as soon as
  its prefix is read, before any of it is handed to the handler. Malformed frames and
  handler crashes end the call with INTERNAL and the server's reason.

gRPC status codes become :mod:`flowrt.errors` classes: UNAVAILABLE (and calls cut off by
a closing channel) -> UnavailableError naming the address, DEADLINE_EXCEEDED ->
DeadlineExceededError, RESOURCE_EXHAUSTED -> ResourceExhaustedError, UNIMPLEMENTED ->
UnimplementedError, UNKNOWN -> UnknownError, anything else -> InternalError.

Servers run every handler on its own thread (idle threads are reused and retire after a
while; an open call stream holds one), so any number of handlers may block at once.
HTTP/2 keepalive pings notice a silent dead peer within about 15 seconds; a peer process
that dies closes its sockets and fails calls at once.
"""
from __future__ import annotations

import heapq
import itertools
import os
import secrets
import struct
import threading
import time
from queue import SimpleQueue
from typing import Any, Callable, Iterable, Iterator, Sequence

import grpc
import grpc.experimental  # noqa: F401  (makes grpc.experimental.ChannelOptions available)
import numpy as np

from flowrt import errors
from flowrt.distributed.message_transport import MessageTransport
from flowrt.distributed.rpc import request_context
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
_CALLS_PATH = "/flowrt-transport/Calls"
#: the prefix of a call stream message: call id, method length, zero
_CALL = struct.Struct("<QII")

#: seconds a parked large reply waits for its fetch before it is dropped
PENDING_TTL = 60.0
#: seconds an idle server thread waits for work before it exits
IDLE_THREAD_S = float(os.environ.get("FLOWRT_IDLE_THREAD_S", "") or 30.0)
#: distinct method paths whose gRPC handlers a server keeps cached
_HANDLER_CACHE = 1024
_CANCEL_SLICE_S = 0.1  # how often a cancellable call looks at its cancel event
#: idle call streams a channel keeps open for later calls; more are closed when returned
MAX_IDLE_STREAMS = 16


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


def _call_message(rid: int, method: bytes, pieces: Sequence[Any]) -> bytes:
    """A call stream message: the prefix, the method (requests) and the frame's
    pieces, the frame starting 16-byte aligned."""
    head = _CALL.pack(rid, len(method), 0) + method
    pad = _align(len(head)) - len(head)
    return b"".join([head, _ZEROS[:pad], *pieces]) if pad else b"".join([head, *pieces])


def _split_call(msg: bytes, limit: int) -> tuple[int, str, int, bytes, list[memoryview]]:
    """Decode a call stream message: ``(call id, method, kind, header, buffers)``
    (``method`` is empty in replies); raises :class:`FrameError` when it is
    malformed or over ``limit`` bytes."""
    mv = memoryview(msg)
    if len(mv) < _CALL.size:
        raise FrameError(f"call message of {len(mv)} bytes is shorter than its "
                         f"{_CALL.size}-byte prefix")
    rid, mlen, zero = _CALL.unpack_from(mv)
    start = _align(_CALL.size + mlen)
    if zero or start > len(mv):
        raise FrameError(f"malformed call message prefix (method length {mlen}, "
                         f"{len(mv)} bytes)")
    try:
        method = str(mv[_CALL.size:_CALL.size + mlen], "utf-8")
    except UnicodeDecodeError:
        raise FrameError("the method name is not UTF-8") from None
    kind, header, bufs = decode_frame(mv[start:], limit)
    return rid, method, kind, header, bufs


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
        self._calls_handler = grpc.stream_stream_rpc_method_handler(self._calls)
        self._streams: set[_ServedStream] = set()  # the open call streams
        self._streams_lock = threading.Lock()
        # each request on an idle thread or a new one: never queued behind blocked
        # work (a step can block for long); daemon threads, never joined at exit
        self._executor = DaemonPool(None, thread_name_prefix=f"grpc-server-{port}",
                                    idle_timeout=IDLE_THREAD_S)
        self._reaper = _Reaper(transport.stall_s)
        self._stopped = False
        bind_host = f"[{host}]" if ":" in host else host
        # each open stream holds a thread: beyond max_streams grpc refuses new ones
        # (RESOURCE_EXHAUSTED)
        self._server = grpc.server(self._executor, handlers=[self],
                                   options=transport._server_options(),
                                   maximum_concurrent_rpcs=transport.max_streams or None)
        sec = getattr(handler, "security", None)
        if sec is not None and sec.curve and not sec.tls:
            self._executor.shutdown()
            raise errors.InvalidArgumentError(
                None, None, f"gRPC server on {address!r}: the security config has CURVE "
                "keys but no TLS certificate (grpc encrypts with TLS: --tls-cert, "
                "--tls-key, --tls-ca)")
        try:
            if sec is not None and sec.tls:  # mutual TLS: clients need a cert of the CA
                creds = grpc.ssl_server_credentials(
                    [(sec.tls_key, sec.tls_cert)], root_certificates=sec.tls_ca,
                    require_client_auth=True)
                bound = self._server.add_secure_port(f"{bind_host}:{port}", creds)
            else:
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
        if path == _CALLS_PATH:
            return self._calls_handler
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

    def _handle(self, method: str, header: bytes, bufs: list, ctx: grpc.ServicerContext,
                gone: threading.Event | None = None) -> tuple[list[Any], int]:
        if gone is None:
            gone = _gone_event(ctx)
        request_context(_peer_host(ctx), gone)
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
                self._reaper.progress(ctx)
            return asm.finish()

        self._reaper.progress(ctx)  # a stream that stalls is ended (see _Reaper)
        try:
            header, bufs = self._decode(method, read, ctx)
        finally:
            self._reaper.done(ctx)

        pieces, _ = self._handle(method, header, bufs, ctx)
        del header, bufs
        yield from _chunks(pieces, self._chunk)

    def _calls(self, requests: Iterable[bytes], ctx: grpc.ServicerContext
               ) -> Iterator[bytes]:
        """A call stream: answer each request on this thread, in turn (the client
        sends the next one only after the reply)."""
        st = _ServedStream(ctx)
        gone = _gone_event(ctx)  # set when the stream ends: a receive waiting stops
        with self._streams_lock:
            self._streams.add(st)
        try:
            for msg in requests:
                if self._stopped:
                    ctx.abort(grpc.StatusCode.UNAVAILABLE,
                              f"gRPC server {self.address} is stopping")
                try:
                    rid, method, kind, header, bufs = _split_call(msg, self._limit)
                except FrameError as e:
                    code = grpc.StatusCode.RESOURCE_EXHAUSTED if e.too_big \
                        else grpc.StatusCode.INTERNAL
                    ctx.abort(code, f"request on {self.address} refused: {e}")
                if kind != KIND_MESSAGE or not method:
                    ctx.abort(grpc.StatusCode.INTERNAL,
                              f"request on {self.address} refused: frame kind {kind}, "
                              f"method {method!r}")
                st.busy = True
                pieces, total = self._handle(method, header, bufs, ctx, gone)
                del msg, header, bufs
                if total > self._chunk:
                    pieces = encode_frame(self._pending.put(pieces), (), KIND_PENDING)[0]
                yield _call_message(rid, b"", pieces)
                del pieces
                st.busy = False
                if self._stopped:
                    return
        finally:
            with self._streams_lock:
                self._streams.discard(st)

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
        # idle call streams end now (their clients open new ones, which are refused);
        # a stream with a call in flight ends after its reply, or after the grace
        with self._streams_lock:
            idle = [st for st in self._streams if not st.busy]
        for st in idle:
            st.ctx.cancel()
        done = self._server.stop(grace)
        done.wait(grace + 5.0)
        self._pending.clear()
        self._executor.shutdown(wait=False)

    def __repr__(self) -> str:
        return f"<GrpcServer {self.address}>"


def _peer_host(ctx: grpc.ServicerContext) -> str | None:
    """The address of a call's peer without its port (``ipv4:1.2.3.4:5`` -> 1.2.3.4)."""
    try:
        peer = ctx.peer()
    except Exception:  # noqa: BLE001 - grpcio may not know it
        return None
    return peer.partition(":")[2].rpartition(":")[0] or peer


def _gone_event(ctx: grpc.ServicerContext) -> threading.Event:
    """An event set once the call ends (its client cancelled it or went away)."""
    ev = threading.Event()
    if not ctx.add_callback(ev.set):
        ev.set()  # the call has ended already
    return ev


class _Reaper:
    """Ends chunked requests whose client stopped sending for ``stall_s`` seconds:
    each holds a server thread while it is read. One daemon thread per server, started
    on first use, looks once a second."""

    def __init__(self, stall_s: float):
        self.stall_s = stall_s
        self._lock = threading.Lock()
        self._last: dict[Any, float] = {}
        self._thread: threading.Thread | None = None

    def progress(self, ctx: Any) -> None:
        with self._lock:
            self._last[ctx] = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="flowrt-grpc-reaper")
                self._thread.start()

    def done(self, ctx: Any) -> None:
        with self._lock:
            self._last.pop(ctx, None)

    def _run(self) -> None:
        while True:
            time.sleep(min(1.0, self.stall_s / 4))
            now = time.monotonic()
            with self._lock:
                stalled = [c for c, t in self._last.items() if now - t > self.stall_s]
                for c in stalled:
                    del self._last[c]
            for c in stalled:
                c.cancel()


class _ServedStream:
    """A call stream the server is reading, and whether a call on it is running."""

    __slots__ = ("ctx", "busy")

    def __init__(self, ctx: grpc.ServicerContext):
        self.ctx = ctx
        self.busy = False


# -- the client ------------------------------------------------------------------------

_END = None  # put in a stream's request queue: the client is done with the stream


class _Stream:
    """One call stream of a channel, used by one call at a time: requests go into
    ``q`` (grpcio's request thread sends them), replies come from ``call``."""

    __slots__ = ("q", "call", "why", "gen")

    def __init__(self, calls: grpc.StreamStreamMultiCallable):
        self.q: SimpleQueue[bytes | None] = SimpleQueue()
        self.call = calls(iter(self.q.get, _END))
        #: why the watchdog ended the stream's call ("deadline", "cancel") or None
        self.why: str | None = None
        self.gen = 0  # bumped when a call ends: stale watchdog entries are ignored

    def usable(self) -> bool:
        return self.why is None and self.call.is_active()

    def end(self, why: str | None = None) -> None:
        """Stop using the stream: tell the server (its thread is freed) and drop it."""
        if why is not None:
            self.why = why
        self.q.put(_END)
        if why is not None:
            self.call.cancel()


class _Watchdog:
    """Ends call streams whose call passed its deadline or whose ``cancel`` event was
    set: their callers wait inside grpcio for the reply and cannot look themselves.
    One daemon thread per transport, started on first use; it looks every 100 ms while
    such calls run (and for a while after, so that a call that registers finds it
    awake rather than waking it), else sleeps until the earliest deadline."""

    HOT_S = 5.0  # seconds it keeps looking every 100 ms after the last watched call

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, _Stream, int]] = []
        self._cancels: dict[_Stream, tuple[threading.Event, int]] = {}
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._wake_at = float("inf")
        self._last = 0.0
        self._timed = 0  # watched calls with a deadline (the heap also has stale ones)

    def watch(self, st: _Stream, deadline: float | None,
              cancel: threading.Event | None) -> None:
        with self._cond:
            gen = st.gen
            wake = self._wake_at
            if deadline is not None:
                heap = self._heap
                if len(heap) > 4 * self._timed + 256:  # drop the entries of ended calls
                    heap[:] = [e for e in heap if e[2].gen == e[3]]
                    heapq.heapify(heap)
                heapq.heappush(heap, (deadline, next(self._seq), st, gen))
                self._timed += 1
                wake = min(wake, deadline)
            if cancel is not None:
                self._cancels[st] = (cancel, gen)
                self._last = time.monotonic()
                wake = min(wake, self._last + _CANCEL_SLICE_S)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="flowrt-grpc-watchdog")
                self._thread.start()
            elif wake < self._wake_at:
                self._cond.notify()

    def unwatch(self, st: _Stream, timed: bool) -> None:
        with self._cond:
            st.gen += 1
            self._cancels.pop(st, None)
            if timed:
                self._timed -= 1

    def _run(self) -> None:
        cond, heap = self._cond, self._heap
        with cond:
            while True:
                now = time.monotonic()
                while heap and heap[0][0] <= now:
                    _, _, st, gen = heapq.heappop(heap)
                    if st.gen == gen:
                        st.end("deadline")
                for st, (ev, gen) in list(self._cancels.items()):
                    if st.gen != gen:
                        del self._cancels[st]
                    elif ev.is_set():
                        del self._cancels[st]
                        st.end("cancel")
                wait = heap[0][0] - now if heap else None
                if self._cancels:
                    self._last = now
                if self._cancels or now - self._last < self.HOT_S:
                    wait = _CANCEL_SLICE_S if wait is None else min(wait, _CANCEL_SLICE_S)
                self._wake_at = float("inf") if wait is None else now + wait
                cond.wait(wait)


class _Shared:
    """One grpc channel per address, shared by every :class:`GrpcChannel` handle."""

    def __init__(self, transport: "GrpcTransport", address: str, security: Any = None,
                 key: Any = None):
        self.transport = transport
        self.address = address
        self.key = address if key is None else key  # in the transport's cache
        self.refs = 0
        self.closed = False
        self.limit = transport.max_message_bytes
        self.chunk = transport.chunk_bytes
        options = transport._channel_options()
        self.secure = security is not None and security.tls
        if self.secure:  # mutual TLS: our certificate, the cluster's CA as the root
            creds = grpc.ssl_channel_credentials(root_certificates=security.tls_ca,
                                                 private_key=security.tls_key,
                                                 certificate_chain=security.tls_cert)
            if security.tls_server_name:
                options.append(("grpc.ssl_target_name_override", security.tls_server_name))
            self.channel = grpc.secure_channel(address, creds, options=options)
        else:
            self.channel = grpc.insecure_channel(address, options=options)
        self.fetch = self.channel.unary_stream(_FETCH_PATH)
        self.unary: dict[str, grpc.UnaryUnaryMultiCallable] = {}
        self.streamed: dict[str, grpc.StreamStreamMultiCallable] = {}
        self.calls = self.channel.stream_stream(_CALLS_PATH)
        self.streams = transport.call_streams
        self.idle: list[_Stream] = []  # call streams waiting for a call
        self.lock = threading.Lock()
        self.rids = itertools.count(1)

    def checkout(self) -> _Stream:
        """An idle call stream that is still open, or a new one."""
        with self.lock:
            while self.idle:
                st = self.idle.pop()
                if st.usable():
                    return st
                st.end()
        return _Stream(self.calls)

    def checkin(self, st: _Stream) -> None:
        with self.lock:
            if not self.closed and len(self.idle) < MAX_IDLE_STREAMS and st.usable():
                self.idle.append(st)
                return
        st.end()

    def close(self) -> None:
        """Close the connection: calls in flight fail, idle streams end."""
        self.closed = True
        with self.lock:
            idle, self.idle = self.idle, []
        for st in idle:
            st.end()
        self.channel.close()


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
            if total <= sh.chunk and sh.streams:
                kind, rh, rb = self._on_stream(method, pieces, deadline, timeout, cancel)
                if kind == KIND_MESSAGE:
                    return rh, rb
                left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                return self._receive(method, sh.fetch(rh, timeout=left))
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

    def _on_stream(self, method: str, pieces: list[Any], deadline: float | None,
                   timeout: float | None, cancel: threading.Event | None
                   ) -> tuple[int, bytes, list[memoryview]]:
        """One call on a call stream of the channel: ``(kind, header, buffers)`` of the
        reply frame. A stream whose call failed, timed out or was cancelled is not used
        again."""
        sh = self._shared
        if cancel is not None and cancel.is_set():
            raise self._cancelled(method)
        try:
            st = sh.checkout()
        except ValueError:  # grpcio: the channel was closed meanwhile
            raise errors.UnavailableError(None, None, f"grpc call {method} to "
                                          f"{self.address}: the channel is closed") from None
        rid = next(sh.rids)
        watched = deadline is not None or cancel is not None
        if watched:
            self._shared.transport._watchdog.watch(st, deadline, cancel)
        ok = False
        try:
            st.q.put(_call_message(rid, method.encode("utf-8"), pieces))
            del pieces
            try:
                reply = next(st.call)
            except StopIteration:
                raise errors.UnavailableError(
                    None, None, f"grpc call {method} to {self.address}: the server "
                    "closed the call stream") from None
            except grpc.RpcError as e:
                if st.why == "deadline":
                    raise errors.DeadlineExceededError(
                        None, None, f"grpc call {method} to {self.address}: deadline "
                        f"exceeded after {timeout:g} s") from None
                if st.why == "cancel":
                    raise self._cancelled(method) from None
                raise self._error(method, e) from None
            got, _, kind, rh, rb = _split_call(reply, sh.limit)
            if got != rid:
                raise errors.InternalError(None, None, f"grpc call {method} to "
                                           f"{self.address}: the reply is for call {got}, "
                                           f"not {rid}")
            ok = True
            return kind, rh, rb
        finally:
            if watched:
                self._shared.transport._watchdog.unwatch(st, deadline is not None)
            if ok:
                sh.checkin(st)
            else:
                st.end("failed")

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
            low = details.lower()
            if "handshake" in low or "certificate" in low or "tsi_" in low:
                return errors.UnauthenticatedError(
                    None, None, f"{where}: the TLS handshake failed (a certificate not "
                    f"signed by the cluster's CA, or none): {details}")
            if not self._shared.secure:
                details += " (if the server requires TLS, give this client the cluster's " \
                    "certificates: FLOWRT_TLS_CERT, FLOWRT_TLS_KEY, FLOWRT_TLS_CA)"
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
    #: small calls travel on long-lived call streams (see the module docstring);
    #: False: one unary call each
    call_streams: bool = True
    #: streams (and calls) a server keeps open at once, each holding a thread; more are
    #: refused with RESOURCE_EXHAUSTED (``FLOWRT_GRPC_MAX_STREAMS``; 0: no limit)
    max_streams: int = int(os.environ.get("FLOWRT_GRPC_MAX_STREAMS", "") or 4096)
    #: seconds a chunked request may go without a chunk before the server ends it
    stall_s: float = float(os.environ.get("FLOWRT_STREAM_STALL_S", "") or 30.0)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channels: dict[str, _Shared] = {}
        self._watchdog = _Watchdog()

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

    def connect(self, address: str, security: Any = None) -> GrpcChannel:
        """A handle on the cached channel to ``address`` (connecting lazily);
        ``security``: a ``SecurityConfig`` whose TLS material (if any) the channel
        uses: mutual TLS, the server checked against the cluster's CA."""
        split_host_port(address)
        tls = security is not None and security.tls
        key = (address, security.identity) if tls else address
        with self._lock:
            sh = self._channels.get(key)
            if sh is None:
                sh = self._channels[key] = _Shared(self, address, security if tls else None,
                                                   key)
            sh.refs += 1
        return GrpcChannel(sh)

    def _release(self, sh: _Shared) -> None:
        with self._lock:
            sh.refs -= 1
            if sh.refs > 0:
                return
            sh.closed = True
            if self._channels.get(sh.key) is sh:
                del self._channels[sh.key]
        sh.close()

    def close(self) -> None:
        """Close every cached channel (calls in flight fail with UnavailableError)."""
        with self._lock:
            shared, self._channels = list(self._channels.values()), {}
        for sh in shared:
            sh.close()
