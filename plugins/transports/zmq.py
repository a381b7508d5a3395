"""The ZeroMQ message transport (``zmq://host:port``), built on pyzmq.

A server is one ROUTER socket bound to ``tcp://host:port``; a channel holds DEALER
sockets connected to it. zmq sockets are not thread-safe: a server's socket is shared
under a lock, which the thread that takes requests in holds only while it receives (it
waits on the socket's ``zmq.FD`` without it). Requests are taken in by one *leader*
thread at a time. The leader answers at once the requests the handler can answer
without waiting (the handler's optional ``dispatch``, see flowrt.transport); for any
other, it hands the leadership to another thread of the server's pool (an idle one, or a
new one: the pool has no fixed limit, so handlers that block on each other cannot
deadlock) and runs the request itself, so a request never waits for a thread to wake
up. A request answered at once may still wait on a call of its own (a master step run
inline, see ``ServiceHandler.dispatch``): if that call is not answered within
:data:`HANDOFF_MS`, the leader hands the lead over then, from inside the call, so a slow
peer never holds the server. A reply is sent by the thread that computed it.

Wire format
-----------
Every request and reply is one zmq multipart message (the ROUTER adds and strips the
peer's identity frame in front)::

    [head, data frame, data frame, ...]

The head frame is a 24-byte little-endian struct followed by variable parts::

    offset size  field
    0      2     magic b"FZ"
    2      1     version (2)
    3      1     kind: 1 request, 2 reply, 3 error, 4 probe (server to client, request
                 id 0, nothing else: clients skip it)
    4      8     request id (u64, chosen by the client, echoed in the reply)
    12     4     number of buffers n (u32)
    16     2     method name length in bytes (u16; 0 in replies)
    18     2     error code (u16; a canonical code in error replies, else 0)
    20     4     header length in bytes (u32)
    24     ...   method name (UTF-8)
    ...    8*n   the byte size of each buffer (u64 each)
    ...    4*n   the frame count of each buffer (u32 each; 0: the buffer is in the head)
    ...    ...   the header (the core's serialised header; for an error reply the UTF-8
                 reason), then the buffers kept in the head, in order, each non-empty
                 one starting at the next multiple of 16 bytes of the frame (zero
                 padding before it); nothing follows the last one

A buffer of at most 64 KiB (and at most ``chunk_bytes``) travels in the head frame
while the head's buffers add up to at most 256 KiB, so a small message is one frame: one
send and one receive on each side. Other buffers travel in frames of their own, sent
with ``copy=False`` (zmq reads the caller's memory) and received with ``copy=False``: the
handler or caller gets a memoryview of the received frame itself; buffers in the head
are memoryviews of the head. A buffer larger than ``chunk_bytes`` travels as several
consecutive frames of at most ``chunk_bytes`` each (slices of the original memory, still
not copied); only such a buffer is reassembled on receipt: its size is in the head, so
its chunks are received straight into one new array (libzmq copies each chunk there
once and frees it).

Limits and failures
-------------------
A message whose header plus buffers exceeds ``max_message_bytes`` is refused before it
is sent (ResourceExhaustedError); a server that receives one answers with a
RESOURCE_EXHAUSTED error reply and never runs the handler. A single frame more than 1 MiB
above the limit (zmq's ``MAXMSGSIZE``, enforced by libzmq per frame; the slack leaves
room for the head's own fields) makes libzmq drop the sending peer's connection.
Malformed requests (bad head, wrong frame count) get an INTERNAL error reply; a handler
that raises gets an INTERNAL reply with its reason. Raw TCP garbage is dropped by
libzmq's handshake.

A channel holds a pool of DEALER connections ("links"); a call takes an idle one (or
opens one), sends once the link's monitor has reported a finished handshake, and waits
for its reply on that link in the calling thread: a round trip costs no thread hand-off
on the client. zmq heartbeats and the monitor watch each link: when its connection
drops, the call waiting on it fails within a fraction of a second with UnavailableError
naming the address (after taking a reply that arrived first), and the link is closed
rather than reused, so a request still queued in it is never replayed to a restarted
server. A refused connection fails the call the same way; the next call tries afresh.
A call that times out or is cancelled closes its link too.

A request that runs on a server thread (it may block) is released when its caller goes
away: every :data:`PROBE_S` seconds (0.5) the server sends each such request's
connection a probe; once that connection has closed (the client process exited, the
call timed out or was cancelled and closed its link, or the server's heartbeats found
the client silent for 2 s) the ROUTER cannot route it, and the request's cancel event
is set (a receive it waits in ends within 0.25 s, freeing its thread and its
pending-request slot) and its reply dropped.
"""
from __future__ import annotations

import functools
import itertools
import logging
import os
import select
import socket
import struct
import threading
import time
from collections import deque
from queue import Empty, SimpleQueue
from typing import Any, Callable, Sequence

import numpy as np
import zmq
from zmq.utils.monitor import recv_monitor_message

from flowrt import errors
from flowrt.distributed.message_transport import MessageTransport
from flowrt.distributed.rpc import request_context
from flowrt.transport import Channel, Handler, ServerHandle, split_host_port

__all__ = ["ZmqTransport"]

_log = logging.getLogger(__name__)
_HEAD = struct.Struct("<2sBBQIHHI")
_MAGIC, _VERSION = b"FZ", 2
_REQUEST, _REPLY, _ERROR, _PROBE = 1, 2, 3, 4
#: buffers of at most this many bytes travel in the head frame ...
INLINE_BYTES = 64 << 10
#: ... while the head's buffers add up to at most this many
INLINE_TOTAL = 256 << 10
#: what a frame may have beyond ``max_message_bytes`` (the head's own fields)
FRAME_SLACK = 1 << 20
_ALIGN = 16
#: what a server sends a caller to see whether its connection is still open
_PROBE_FRAME = _HEAD.pack(_MAGIC, _VERSION, _PROBE, 0, 0, 0, 0, 0)
_ZEROS = bytes(_ALIGN)
#: seconds an idle server thread waits for work before it exits
IDLE_THREAD_S = float(os.environ.get("FLOWRT_IDLE_THREAD_S", "") or 30.0)
#: a request running on a handler thread for this long gets its caller's connection
#: probed, and again every as long, until it is answered (``FLOWRT_ZMQ_PROBE_S``)
PROBE_S = float(os.environ.get("FLOWRT_ZMQ_PROBE_S", "") or 0.5)
# plain ints for the options and flags of the hot paths (pyzmq's enum members cost
# a conversion on every use)
_EVENTS_OPT, _POLLIN, _RCVMORE = int(zmq.EVENTS), int(zmq.POLLIN), int(zmq.RCVMORE)
_NOBLOCK, _RCVTIMEO, _SNDMORE = int(zmq.NOBLOCK), int(zmq.RCVTIMEO), int(zmq.SNDMORE)


class _Gone:
    """The cancel flag of a request run on a handler thread: set once its caller went
    away. The part of ``threading.Event`` that receives use (``set``, ``is_set``), at a
    tenth of its cost to make (one per blocking request)."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


class _Refused(Exception):
    """A message that cannot be sent or accepted: carries a canonical code and reason."""

    def __init__(self, code: int, reason: str, rid: int = 0):
        super().__init__(reason)
        self.code, self.reason, self.rid = code, reason, rid
        self.peer: bytes | None = None
        self.more = False  # frames of the refused message are left to consume


def _flat(buf: Any) -> memoryview:
    """A 1-D byte view of ``buf`` (a copy only for non-contiguous memory)."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if not mv.c_contiguous:
        return memoryview(mv.tobytes())
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B") if mv.ndim else memoryview(mv.tobytes())
    return mv


def _encode(kind: int, rid: int, method: bytes, code: int, header: Any,
            buffers: Sequence[Any], chunk: int, limit: int) -> list[Any]:
    """The frames of one message (the head first); raises _Refused when it is over
    ``limit`` bytes."""
    if not isinstance(header, (bytes, bytearray, memoryview)):
        raise TypeError(f"a message header must be bytes, not {type(header).__name__}")
    n = len(buffers)
    hlen = len(header)
    total = hlen
    sizes: list[int] = []
    counts: list[int] = []
    inline: list[Any] = []
    frames: list[Any] = []
    pos = _HEAD.size + len(method) + 12 * n + hlen  # where the next inline buffer goes
    room = INLINE_TOTAL
    small = min(INLINE_BYTES, chunk)
    for buf in buffers:
        mv = _flat(buf)
        size = mv.nbytes
        total += size
        sizes.append(size)
        if size <= small and size <= room:
            counts.append(0)
            if size:
                pad = -pos & (_ALIGN - 1)
                if pad:
                    inline.append(_ZEROS[:pad])
                inline.append(mv)
                pos += pad + size
                room -= size
        elif size <= chunk:
            counts.append(1)
            frames.append(mv)
        else:
            counts.append(-(-size // chunk))
            frames.extend(mv[i:i + chunk] for i in range(0, size, chunk))
    if total > limit:
        raise _Refused(errors.RESOURCE_EXHAUSTED,
                       f"a message of {total} bytes exceeds the limit of {limit} bytes", rid)
    head = _HEAD.pack(_MAGIC, _VERSION, kind, rid, n, len(method), code, hlen)
    if n:
        frames.insert(0, b"".join([head, method, struct.pack(f"<{n}Q{n}I", *sizes, *counts),
                                   header, *inline]))
    else:
        frames.insert(0, b"".join([head, method, header]) if method or hlen else head)
    return frames


def _error_frames(rid: int, code: int, reason: str) -> list[Any]:
    text = reason.encode("utf-8", "replace")
    return [_HEAD.pack(_MAGIC, _VERSION, _ERROR, rid, 0, 0, code, len(text)) + text]


def _send_frames(sock: zmq.Socket, frames: list[Any], flags: int = 0) -> None:
    """Send a message's frames (after a ROUTER's identity frame, when there is one)."""
    last = len(frames) - 1
    if not last:
        sock.send(frames[0], flags, copy=False)
        return
    more = flags | _SNDMORE
    for i, f in enumerate(frames):
        sock.send(f, more if i < last else flags, copy=False)


_Message = tuple[int, int, str, int, bytes, list[Any]]


class _Ident(bytes):
    """A ROUTER peer identity, with the zmq frame it came in (whose metadata says the
    peer's address)."""

    frame: Any = None

    def peer_address(self) -> str | None:
        try:
            return self.frame.get("Peer-Address")
        except (zmq.ZMQError, AttributeError, TypeError):
            return None


def _recv_message(sock: zmq.Socket, peer: bool, limit: int, flags: int = 0
                  ) -> tuple[bytes | None, _Message]:
    """Receive one whole message: ``(peer identity, (kind, request id, method, code,
    header, buffers))``.

    The head drives the receive: buffers in the head are memoryviews of it; a buffer in
    one frame of its own stays a zmq frame (handed on as a memoryview, not copied); the
    chunks of a chunked buffer are received straight into one new array. A malformed or
    oversized message is consumed to its end and raises _Refused (with ``peer`` set);
    ``flags`` apply to the first frame only (zmq delivers the other frames of a message
    together with it). Whether more frames follow is read from each received frame
    (pyzmq's getsockopt costs an enum lookup per call).
    """
    ident = None
    if peer:
        fr = sock.recv(flags, copy=False)
        ident = _Ident(fr.bytes)
        ident.frame = fr  # its peer's address, for the pending-request cap per peer
        try:  # a ROUTER never delivers an identity alone
            head = sock.recv(_NOBLOCK, copy=False)
        except zmq.Again:
            e = _Refused(errors.INTERNAL, "a message needs a head frame")
            e.peer = ident
            raise e from None
    else:
        head = sock.recv(flags, copy=False)
    try:
        msg, more = _receive_body(sock, head, limit)
        if more:
            e = _Refused(errors.INTERNAL, "the message has more frames than its head "
                                          "describes", msg[1])
            e.more = True
            raise e
        return ident, msg
    except _Refused as e:
        if e.more:
            while sock.recv(copy=False).more:
                pass
        e.peer = ident
        raise


def _refused(more: bool, code: int, reason: str, rid: int = 0) -> _Refused:
    """A _Refused for a message of which frames are left to consume when ``more``."""
    e = _Refused(code, reason, rid)
    e.more = more
    return e


def _receive_body(sock: zmq.Socket, frame: zmq.Frame, limit: int
                  ) -> tuple[_Message, bool]:
    """Decode a message from its head ``frame``, receiving its other frames:
    ``(message, whether more frames follow)``; a _Refused says in ``more`` whether
    frames are left to consume."""
    more = frame.more
    head = frame.buffer
    size = len(head)
    bad = errors.INTERNAL
    if size < _HEAD.size:
        raise _refused(more, bad, f"the head frame has {size} bytes, fewer than "
                                  f"{_HEAD.size}")
    magic, version, kind, rid, nbuf, mlen, code, hlen = _HEAD.unpack_from(head)
    if magic != _MAGIC or version != _VERSION:
        raise _refused(more, bad, f"bad head (magic {magic!r}, version {version}); not a "
                                  "flowrt zmq message of this version")
    tpos = _HEAD.size + mlen
    pos = tpos + 12 * nbuf + hlen
    if pos > size:
        raise _refused(more, bad, f"the head frame has {size} bytes, its fields describe "
                                  f"at least {pos}", rid)
    try:
        method = str(head[_HEAD.size:tpos], "utf-8") if mlen else ""
    except UnicodeDecodeError:
        raise _refused(more, bad, "the method name is not UTF-8", rid) from None
    header = bytes(head[pos - hlen:pos])
    total = hlen
    if total > limit:
        raise _refused(more, errors.RESOURCE_EXHAUSTED, f"a message of {total}+ bytes "
                                                        f"exceeds the limit of {limit} "
                                                        "bytes", rid)
    if not nbuf:
        if pos != size:
            raise _refused(more, bad, f"the head frame has {size} bytes, its fields "
                                      f"describe {pos}", rid)
        return (kind, rid, method, code, header, []), more
    sizes = struct.unpack_from(f"<{nbuf}Q", head, tpos)
    counts = struct.unpack_from(f"<{nbuf}I", head, tpos + 8 * nbuf)
    buffers: list[Any] = []
    for i in range(nbuf):
        n, k = sizes[i], counts[i]
        total += n
        if total > limit:
            raise _refused(more, errors.RESOURCE_EXHAUSTED, f"a message of {total}+ bytes "
                                                            f"exceeds the limit of {limit} "
                                                            "bytes", rid)
        if k == 0:
            if n:
                pos += -pos & (_ALIGN - 1)
            if pos + n > size:
                raise _refused(more, bad, f"buffer {i} ({n} bytes) runs past the end of "
                                          f"the {size}-byte head frame", rid)
            buffers.append(head[pos:pos + n])
            pos += n
            continue
        if k > n:
            raise _refused(more, bad, f"buffer {i}: {k} chunk(s) for {n} bytes", rid)
        if k == 1:
            if not more:
                break
            f = sock.recv(copy=False)
            more = f.more
            if len(f) != n:
                raise _refused(more, bad, f"buffer {i} has {len(f)} bytes, the head says "
                                          f"{n}", rid)
            buffers.append(f.buffer)
            continue
        out, off = np.empty(n, np.uint8), 0
        for _ in range(k):
            if not more:
                break
            got = _recv_into(sock, out[off:])
            more = bool(sock.getsockopt(_RCVMORE))
            if got > n - off:
                raise _refused(more, bad, f"buffer {i} is larger than the {n} bytes its "
                                          "head says", rid)
            off += got
        else:
            if off != n:
                raise _refused(more, bad, f"buffer {i} has {off} bytes, the head says "
                                          f"{n}", rid)
            buffers.append(memoryview(out))
            continue
        break
    if len(buffers) != nbuf:
        raise _refused(more, bad, f"the message has fewer frames than its head describes "
                                  f"({nbuf} buffer(s))", rid)
    if pos != size:
        raise _refused(more, bad, f"the head frame has {size} bytes, its fields describe "
                                  f"{pos}", rid)
    return (kind, rid, method, code, header, buffers), more


if hasattr(zmq.Socket, "recv_into"):  # pyzmq >= 26.4: libzmq copies into our array
    def _recv_into(sock: zmq.Socket, out: np.ndarray) -> int:
        return sock.recv_into(out)
else:  # pragma: no cover - older pyzmq
    def _recv_into(sock: zmq.Socket, out: np.ndarray) -> int:
        f = sock.recv(copy=False)
        n = len(f)
        if n <= out.nbytes:
            out[:n] = np.frombuffer(f.buffer, np.uint8)
        return n


class _Mailbox:
    """Hands items to one I/O thread: ``put`` from any thread; the I/O thread polls
    ``fd`` (one end of a socket pair) next to its zmq socket and calls ``drain``."""

    def __init__(self) -> None:
        self.items: deque[Any] = deque()
        self._lock = threading.Lock()
        self._signalled = False
        self._closed = False
        self._r, self._w = socket.socketpair()
        self._r.setblocking(False)
        self._w.setblocking(False)
        self.fd = self._r.fileno()

    def put(self, item: Any) -> bool:
        """Queue ``item``; False when the mailbox is closed."""
        self.items.append(item)
        with self._lock:
            if self._closed:
                return False
            if not self._signalled:
                self._signalled = True
                try:
                    self._w.send(b"\0")
                except BlockingIOError:
                    pass  # a wake-up is pending anyway
        return True

    def drain(self) -> list[Any]:
        try:
            self._r.recv(4096)
        except BlockingIOError:
            pass
        with self._lock:
            self._signalled = False
        out = []
        pop = self.items.popleft
        try:
            while True:
                out.append(pop())
        except IndexError:
            return out

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._w.close()
        self._r.close()


def _tcp_endpoint(address: str) -> tuple[str, str, int]:
    """``(zmq endpoint, host as written, port)`` of ``host:port``."""
    try:
        host, port = split_host_port(address)
    except ValueError as e:
        raise errors.InvalidArgumentError(None, None, str(e)) from None
    shown = address.rpartition(":")[0]
    return (f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"), shown, port


class _Pool:
    """Handler threads: one more whenever a task arrives and none is idle; idle ones
    leave after ``idle_s`` seconds. A task that returns True said :meth:`idle_soon`
    itself."""

    def __init__(self, name: str, idle_s: float = 30.0):
        self._q: SimpleQueue[Any] = SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads = 0
        self._name, self._idle_s = name, idle_s

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        self._q.put((fn, args))
        with self._lock:
            if self._idle:
                self._idle -= 1
                return
            self._threads += 1
        threading.Thread(target=self._main, name=self._name, daemon=True).start()

    def _main(self) -> None:
        while True:
            try:
                task = self._q.get(timeout=self._idle_s)
            except Empty:
                with self._lock:
                    if self._idle:  # this thread is surplus: leave
                        self._idle -= 1
                        self._threads -= 1
                        return
                continue  # a submit counted on this thread: its task is coming
            if task is None:
                return
            fn, args = task
            released = fn(*args)
            del task, fn, args
            if not released:
                with self._lock:
                    self._idle += 1

    def idle_soon(self) -> None:
        """The calling task is about to end (it has only its reply left to send): count
        its thread as idle now, so that a task submitted meanwhile waits for it rather
        than start a new thread."""
        with self._lock:
            self._idle += 1

    def close(self) -> None:
        """Let every thread leave once its current task is done."""
        with self._lock:
            n = self._threads
        for _ in range(n):
            self._q.put(None)


_HANDED = ("handed over",)  # _Server._start: the request ran and another thread leads


class _Server(ServerHandle):
    """A ROUTER socket, taken in by one leader thread at a time.

    The leader waits on the socket's notification descriptor (``zmq.FD``) and takes in
    every request. A request the handler can answer without blocking (its optional
    ``dispatch``) is answered right there; for any other, the leader asks the pool for
    a new leader and runs the request itself (leader/followers: the request does not
    wait for another thread to wake up, the new leader does, meanwhile). Whoever
    computed a reply sends it at once: the socket is shared under a lock that the leader
    only holds while it receives (it waits for the descriptor without it), so a reply
    costs no hand-off either. ``zmq.FD`` is edge-triggered and a send can consume its
    notification, so a thread other than the leader that sent checks ``zmq.EVENTS``
    afterwards and wakes the leader when requests are waiting. A thread is named
    ``flowrt-zmq-server ADDRESS`` while it leads and ``flowrt-zmq-handler ADDRESS``
    while it runs a request.
    """

    #: the leader looks at the socket at least this often (a safety net: every arrival
    #: also wakes it)
    poll_ms = 200

    def __init__(self, transport: "ZmqTransport", address: str, handler: Handler):
        self._t, self._handler = transport, handler
        self._dispatch = getattr(handler, "dispatch", None)
        ctx = transport._context()
        endpoint, host, port = _tcp_endpoint(address)
        sock = ctx.socket(zmq.ROUTER)
        sock.linger = 0
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RCVHWM, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, transport.max_message_bytes + FRAME_SLACK)
        transport._heartbeats(sock)
        if ":" in endpoint[6:].rpartition(":")[0]:
            sock.setsockopt(zmq.IPV6, 1)
        try:
            transport._secure_server(sock, getattr(handler, "security", None), address)
        except errors.OpError:
            sock.close(0)
            raise
        try:
            sock.bind(endpoint if port else endpoint.rpartition(":")[0] + ":*")
        except zmq.ZMQError as e:
            sock.close(0)
            raise errors.UnavailableError(None, None, f"zmq server could not bind {address}: "
                                                      f"{e.strerror}") from None
        self._endpoint = sock.get(zmq.LAST_ENDPOINT).decode()
        self.address = f"{host}:{self._endpoint.rpartition(':')[2]}"
        self._sock = sock
        self._mail = _Mailbox()  # wake-ups of the leader, and "close"
        self._poller = select.poll()  # used by the leader of the moment only
        self._poller.register(sock.getsockopt(zmq.FD), select.POLLIN)
        self._poller.register(self._mail.fd, select.POLLIN)
        self._lead_name = f"flowrt-zmq-server {self.address}"
        self._work_name = f"flowrt-zmq-handler {self.address}"
        self._pool = _Pool(self._work_name, IDLE_THREAD_S)
        # guards the socket (any thread may send on it) and the bookkeeping below
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)  # stop() waits for the calls
        # requests taken in and not answered yet: True, or for one running on a handler
        # thread, ``[cancel event, when its caller's connection is next probed]``
        self._inflight: dict[tuple[bytes, int], Any] = {}
        self._parked = 0  # how many of them run on handler threads
        self._next_probe = 0.0
        self._stopping = False
        self._closed = False
        self._stopped = threading.Event()
        self._pool.submit(self._lead)

    def __repr__(self) -> str:
        return f"<zmq server {self.address}>"

    # -- the leader -------------------------------------------------------------------
    def _lead(self) -> bool | None:
        """Take requests in until one needs a thread of its own; then hand the lead to
        another thread and run that request here."""
        me = threading.current_thread()
        me.name = self._lead_name
        sock, mail, lock = self._sock, self._mail, self._lock
        limit = self._t.max_message_bytes
        work = None
        try:
            while work is None:
                if self._parked and time.monotonic() >= self._next_probe:
                    self._probe()
                woken = True
                while True:  # take in every request waiting
                    with lock:
                        if self._closed:
                            return
                        # just woken, a request is likely there: try it; after one,
                        # ask first (a receive that finds nothing raises, dearly)
                        if not woken and not sock.getsockopt(_EVENTS_OPT) & _POLLIN:
                            break
                        woken = False
                        try:
                            req = self._receive(sock, limit)
                        except zmq.Again:
                            break
                        except Exception:  # noqa: BLE001 - keep serving everyone else
                            _log.exception("zmq server %s: a request could not be taken",
                                           self.address)
                            continue
                    if req is not None:
                        work = self._start(*req)
                        if work is _HANDED:  # another thread leads now
                            me.name = self._work_name
                            return False
                        if work is not None:
                            break
                if work is None:
                    for fd, _ in self._poller.poll(self.poll_ms):
                        if fd == mail.fd and "close" in mail.drain():
                            self._close_io()
                            return
        except BaseException:
            self._stopped.set()  # nobody leads any more
            raise
        finally:
            if self._closed:
                self._stopped.set()
        self._pool.submit(self._lead)
        me.name = self._work_name
        self._work(*work)
        return True  # _work said idle_soon

    def _receive(self, sock: zmq.Socket, limit: int) -> tuple[Any, ...] | None:
        """Take one message (the lock held; zmq.Again when there is none): the request
        to start, or None when it was refused (its error reply is sent)."""
        try:
            ident, (kind, rid, method, _, header, buffers) = _recv_message(
                sock, True, limit, _NOBLOCK)
            if kind != _REQUEST:
                e = _Refused(errors.INTERNAL, f"expected a request, got message kind {kind}",
                             rid)
                e.peer = ident
                raise e
        except _Refused as e:
            if e.peer is not None:
                self._send(e.peer, _error_frames(e.rid, e.code, f"zmq server {self.address} "
                                                                f"refused a request: {e.reason}"))
            return None
        if self._stopping:
            self._send(ident, _error_frames(rid, errors.UNAVAILABLE,
                                            f"zmq server {self.address} is stopping"))
            return None
        self._inflight[(ident, rid)] = True
        return ident, rid, method, header, buffers

    def _start(self, ident: bytes, rid: int, method: str, header: bytes, buffers: list
               ) -> tuple[Any, ...] | None:
        """Answer a request now when the handler can without blocking (None; or
        :data:`_HANDED` when it handed the lead over meanwhile, see
        :meth:`_hand_off`); else return what a thread of its own must run:
        ``(ident, rid, method, callable)``."""
        dispatch = self._dispatch
        peer = ident.peer_address() if isinstance(ident, _Ident) else None
        if dispatch is None:
            self._park(ident, rid, peer)
            return ident, rid, method, functools.partial(self._handler, method, header,
                                                         buffers)
        # it may make a call of its own (a late one hands the lead over) when no other
        # request is in flight: requests that come together run on threads side by side
        request_context(peer, may_call=len(self._inflight) == 1)
        handed: list[bool] = []
        _LEADING.handoff = functools.partial(self._hand_off, handed)
        try:
            r = dispatch(method, header, buffers)
        except Exception as e:  # noqa: BLE001 - reported to the caller
            frames = self._failed(method, e, rid)
        else:
            if callable(r):
                self._park(ident, rid, peer)
                return ident, rid, method, r
            frames = self._frames(rid, method, r)
        finally:
            _LEADING.handoff = None
        self._finish(ident, rid, frames, not handed)
        return _HANDED if handed else None

    def _hand_off(self, handed: list[bool]) -> None:
        """Called (once) from inside a call that a request answered at once makes, when
        its reply is late: another thread takes the lead; this one, once it replied,
        goes back to the pool (see :meth:`_lead`)."""
        if not handed:
            handed.append(True)
            self._pool.submit(self._lead)

    def _park(self, ident: bytes, rid: int, peer: str | None) -> None:
        """The request ``(ident, rid)`` is about to run on this thread, which may block:
        give it a cancel event (the handler's receives end once it is set) and have its
        caller's connection probed while it runs (:meth:`_probe`)."""
        cancel = _Gone()
        request_context(peer, cancel)  # type: ignore[arg-type]  # is_set() is all it needs
        with self._lock:
            if (ident, rid) in self._inflight:
                self._inflight[(ident, rid)] = [cancel, time.monotonic() + PROBE_S]
                self._parked += 1

    def _probe(self) -> None:
        """Release the requests whose caller has gone: for every request that has run
        on a handler thread for :data:`PROBE_S` seconds or more, send its caller's
        connection a probe (a message of kind 4 with request id 0, which clients
        skip). The ROUTER (``ROUTER_MANDATORY``) refuses to route to a connection that
        has closed -- the caller's process exited or closed it after its deadline, or
        the heartbeats found it silent -- and that request's cancel event is set, its
        reply dropped: a receive waiting for it ends within a quarter of a second and
        its thread and pending-request slot are free again."""
        now = time.monotonic()
        self._next_probe = now + PROBE_S / 2
        gone: list[tuple[bytes, int]] = []
        seen: dict[bytes, bool] = {}  # connection -> still there
        with self._lock:
            if self._closed:
                return
            for key, v in self._inflight.items():
                if v is True or now < v[1]:
                    continue
                ident = key[0]
                up = seen.get(ident)
                if up is None:
                    up = seen[ident] = self._reachable(ident)
                if up:
                    v[1] = now + PROBE_S
                else:
                    v[0].set()
                    gone.append(key)
            for key in gone:
                del self._inflight[key]
            self._parked -= len(gone)
            if gone and not self._inflight and self._stopping:
                self._drained.notify_all()
        if gone:
            _log.info("zmq server %s: released %d request(s) whose caller went away",
                      self.address, len(gone))

    def _reachable(self, ident: bytes) -> bool:
        """Whether the connection ``ident`` is still open (sends it a probe; the lock
        held)."""
        try:
            self._sock.send(ident, _NOBLOCK | _SNDMORE)
            self._sock.send(_PROBE_FRAME, _NOBLOCK)
        except zmq.ZMQError as e:
            return e.errno != zmq.EHOSTUNREACH
        return True

    def _send(self, ident: bytes, frames: list[Any]) -> None:
        """Send on the socket (the lock held)."""
        try:
            self._sock.send(ident, _NOBLOCK | _SNDMORE)
            _send_frames(self._sock, frames, _NOBLOCK)
        except zmq.ZMQError:
            pass  # the client went away (ROUTER_MANDATORY): nobody to answer

    def _close_io(self) -> None:
        with self._lock:
            self._closed = True
            for (ident, rid), v in self._inflight.items():
                self._send(ident, _error_frames(rid, errors.UNAVAILABLE,
                                                f"zmq server {self.address} stopped before "
                                                "the call finished"))
                if v is not True:
                    v[0].set()  # nobody takes its reply any more
            self._inflight.clear()
            self._parked = 0
            self._drained.notify_all()
            self._mail.close()
            self._sock.linger = 200  # a moment for the replies just sent to go out
            try:
                self._sock.unbind(self._endpoint)  # free the port now, not at zmq's reaping
            except zmq.ZMQError:
                pass
            self._sock.close()

    # -- replies (any thread) ---------------------------------------------------------
    def _frames(self, rid: int, method: str, reply: tuple[bytes, Sequence[Any]]) -> list[Any]:
        t = self._t
        try:
            rh, rb = reply
            return _encode(_REPLY, rid, b"", 0, rh, rb, t.chunk_bytes, t.max_message_bytes)
        except _Refused as e:
            return _error_frames(rid, e.code, f"zmq server {self.address}: the reply to "
                                              f"{method!r} is too big: {e.reason}")
        except Exception as e:  # noqa: BLE001 - a reply that cannot be encoded
            return self._failed(method, e, rid)

    def _failed(self, method: str, e: BaseException, rid: int) -> list[Any]:
        return _error_frames(rid, errors.INTERNAL, f"zmq server {self.address}: the handler "
                                                   f"of {method!r} failed: "
                                                   f"{type(e).__name__}: {e}")

    def _work(self, ident: bytes, rid: int, method: str,
              fn: Callable[[], tuple[bytes, Sequence[Any]]]) -> None:
        try:
            frames = self._frames(rid, method, fn())
        except Exception as e:  # noqa: BLE001 - reported to the caller
            frames = self._failed(method, e, rid)
        del fn
        self._pool.idle_soon()
        self._finish(ident, rid, frames, False)

    def _finish(self, ident: bytes, rid: int, frames: list[Any], leading: bool) -> None:
        """Send a reply now, from the thread that computed it (``leading``: the
        leader, which looks at the socket again next anyway)."""
        with self._lock:
            v = self._inflight.pop((ident, rid), None)
            if v is None:
                return  # stopped meanwhile (the caller has had its error), or the
                # caller went away
            if v is not True:
                self._parked -= 1
            self._send(ident, frames)
            if not leading and self._sock.getsockopt(_EVENTS_OPT) & _POLLIN:
                self._mail.put("wake")  # the send may have taken the leader's wake-up
            if not self._inflight and self._stopping:
                self._drained.notify_all()

    def stop(self, grace: float = 0.0) -> None:
        """Answer new requests with UNAVAILABLE, wait up to ``grace`` seconds for the calls
        in flight, fail those left with UNAVAILABLE and close the port. (Connections stay
        up during the grace period: libzmq would drop them all on unbind.)"""
        with self._lock:
            first = not self._stopping
            self._stopping = True
            if first:
                self._drained.wait_for(lambda: not self._inflight, timeout=max(grace, 0.0))
                self._mail.put("close")
        self._stopped.wait(5.0)
        self._pool.close()


_EVENTS = (zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED | zmq.EVENT_CONNECT_RETRIED
           | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
           | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_CONNECTED)
_SLICE_MS = 100  # how often a waiting call looks at its link's monitor and the closed flag
#: a server's leader that makes a call of its own (running a request inline) hands the
#: lead to another thread once the call has waited this long for its reply
HANDOFF_MS = 5
_LEADING = threading.local()  # .handoff: the leader's hand-off, while it runs a request


class _Link:
    """One DEALER connection of a channel, with its monitor; used by one call at a time."""

    def __init__(self, ctx: zmq.Context, transport: "ZmqTransport", endpoint: str,
                 security: Any = None):
        sock = ctx.socket(zmq.DEALER)
        sock.linger = 0
        if security is not None and security.curve:  # before connect, as zmq requires
            sock.curve_secretkey = security.curve_secret
            sock.curve_publickey = security.curve_public
            sock.curve_serverkey = security.curve_server
        self.curve = security is not None and security.curve
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RCVHWM, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, transport.max_message_bytes + FRAME_SLACK)
        sock.setsockopt(zmq.CONNECT_TIMEOUT, max(1, int(transport.connect_timeout * 1000)))
        sock.setsockopt(zmq.RECONNECT_IVL, 100)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
        transport._heartbeats(sock)
        if endpoint.startswith("tcp://["):
            sock.setsockopt(zmq.IPV6, 1)
        self.mon = sock.get_monitor_socket(_EVENTS)
        self.mon.linger = 0
        sock.connect(endpoint)
        self.sock = sock
        self.poller = zmq.Poller()  # for the wait until connected
        self.poller.register(self.mon, zmq.POLLIN)
        self.rcvtimeo = -1
        self.ready = False
        self.down = False  # connecting failed
        self.dropped = False  # the connection dropped: the link is not reused
        self.refused = False  # the server refused the handshake (CURVE, mechanism)
        self.retries = 0  # connects refused or failed (and reconnects scheduled)
        self.tcp_up = False  # a TCP connection was made (the handshake may be pending)

    def events(self) -> None:
        """Take in the monitor's events (without blocking)."""
        mon = self.mon
        while mon.getsockopt(_EVENTS_OPT) & _POLLIN:
            ev = recv_monitor_message(mon)["event"]
            if ev == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self.ready, self.down = True, False
            elif ev == zmq.EVENT_CONNECTED:
                self.tcp_up = True
            elif ev == zmq.EVENT_DISCONNECTED:
                self.ready, self.dropped, self.tcp_up = False, True, False
            else:
                if ev == zmq.EVENT_CONNECT_RETRIED:
                    self.retries += 1
                if not self.ready:  # a failed connect or handshake
                    self.down = True
                    if ev in (zmq.EVENT_HANDSHAKE_FAILED_AUTH,
                              zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL):
                        self.refused = True

    def close(self) -> None:
        try:
            self.sock.disable_monitor()
        except zmq.ZMQError:
            pass
        self.mon.close(0)
        self.sock.close(0)


class _Channel(Channel):
    """A pool of DEALER links to one server. A call takes an idle link (or opens one),
    sends its request and waits for the reply on that link in the calling thread, so a
    round trip needs no hand-off to another thread; concurrent calls use separate links.
    A link's socket is only ever used by the one thread holding it (the lock around the
    pool orders its hand-over between threads, as libzmq requires)."""

    #: idle links kept open for later calls; more are closed when returned
    max_idle_links = 64

    def __init__(self, transport: "ZmqTransport", address: str, security: Any = None):
        self._t, self.address = transport, address
        self._security = security
        self._endpoint = _tcp_endpoint(address)[0]
        self._idle: list[_Link] = []
        self._lock = threading.Lock()
        self._closed = False
        self._rids = itertools.count(1)
        self._checkin(self._open())  # start connecting now: calls find it ready

    def __repr__(self) -> str:
        return f"<zmq channel {self.address}>"

    def _open(self) -> _Link:
        return _Link(self._t._context(), self._t, self._endpoint, self._security)

    def _checkout(self) -> _Link:
        with self._lock:
            if self._closed:
                raise errors.UnavailableError(None, None,
                                              f"zmq channel to {self.address} is closed")
            idle = self._idle
            while idle:
                link = idle.pop()
                link.events()
                if not (link.dropped or link.down):
                    return link
                link.close()
        return self._open()

    def _checkin(self, link: _Link) -> None:
        with self._lock:
            if (not self._closed and not link.dropped and not link.down
                    and len(self._idle) < self.max_idle_links):
                self._idle.append(link)
                return
        link.close()

    cancellable = True

    def call(self, method: str, header: bytes, buffers: Sequence[Any] = (),
             timeout: float | None = None, cancel: threading.Event | None = None
             ) -> tuple[bytes, list[Any]]:
        t = self._t
        rid = next(self._rids)
        try:
            frames = _encode(_REQUEST, rid, method.encode("utf-8"), 0, header, buffers,
                             t.chunk_bytes, t.max_message_bytes)
        except _Refused as e:
            raise errors.ResourceExhaustedError(
                None, None, f"zmq call {method!r} to {self.address} refused: {e.reason}") from None
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        link = self._checkout()
        try:
            return self._call(link, method, rid, frames, deadline, timeout, cancel)
        except (errors.DeadlineExceededError, errors.CancelledError):
            # the server may still run the request: closing the connection (not
            # reusing it) tells it its caller went away (see _Server._probe)
            link.dropped = True
            raise
        except zmq.ZMQError as e:
            link.dropped = True
            raise errors.UnavailableError(None, None, f"zmq call {method!r} to {self.address} "
                                                      f"failed: {e.strerror}") from None
        finally:
            self._checkin(link)

    def _slice(self, method: str, deadline: float | None, timeout: float | None,
               cancel: threading.Event | None = None) -> int:
        """Milliseconds to wait before looking again; raises when the deadline passed,
        the call was cancelled or the channel was closed."""
        if cancel is not None and cancel.is_set():
            raise errors.CancelledError(None, None, f"zmq call {method!r} to {self.address} "
                                                    "was cancelled")
        if self._closed:
            raise errors.UnavailableError(None, None, f"zmq channel to {self.address} was "
                                                      f"closed during call {method!r}")
        if deadline is None:
            return _SLICE_MS
        left = deadline - time.monotonic()
        if left <= 0:
            raise errors.DeadlineExceededError(
                None, None, f"zmq call {method!r} to {self.address} timed out after "
                            f"{timeout:g} s")
        return min(_SLICE_MS, int(left * 1000) + 1)

    def _unavailable(self, link: _Link, method: str) -> errors.OpError:
        if link.refused:
            return errors.UnauthenticatedError(
                None, None, f"zmq server {self.address} refused the handshake for call "
                f"{method!r}: " + ("this client's CURVE key is not among the keys it "
                                   "accepts, or the server key is wrong" if link.curve else
                                   "it requires CURVE (give this client the cluster's "
                                   "keys: FLOWRT_CURVE_SECRET_KEY, "
                                   "FLOWRT_CURVE_SERVER_KEY)"))
        if link.dropped:
            why = f"lost the connection to zmq server {self.address} during call {method!r}"
        else:
            why = f"could not connect to zmq server {self.address} for call {method!r}"
        return errors.UnavailableError(None, None, why)

    def _call(self, link: _Link, method: str, rid: int, frames: list[Any],
              deadline: float | None, timeout: float | None,
              cancel: threading.Event | None) -> tuple[bytes, list[Any]]:
        sock = link.sock
        # a server's leader running a request inline: wait briefly, then hand the lead
        # over (another thread takes requests in) and wait on as any call does
        handoff = getattr(_LEADING, "handoff", None)
        while not link.ready:  # a new link: wait for the handshake
            if link.down or link.dropped:
                raise self._unavailable(link, method)
            ms = self._slice(method, deadline, timeout, cancel)
            if handoff is not None:
                if not link.poller.poll(min(ms, HANDOFF_MS)):
                    handoff()
                    handoff = None
            else:
                link.poller.poll(ms)
            link.events()
        _send_frames(sock, frames)
        del frames
        while True:  # a blocking receive, a slice at a time, then a look at the monitor
            ms = self._slice(method, deadline, timeout, cancel)
            if handoff is not None:
                ms = min(ms, HANDOFF_MS)
            if ms != link.rcvtimeo:
                sock.setsockopt(_RCVTIMEO, ms)
                link.rcvtimeo = ms
            try:
                got = self._reply(sock, rid, method, 0)
            except zmq.Again:
                if handoff is not None:
                    handoff()
                    handoff = None
                link.events()
                if link.dropped:
                    try:  # a reply that made it before the connection dropped
                        while True:
                            got = self._reply(sock, rid, method, _NOBLOCK)
                            if got is not None:
                                return got
                    except zmq.Again:
                        pass
                    if deadline is not None:
                        self._hung(link, method, deadline, timeout, cancel)
                    raise self._unavailable(link, method) from None
                continue
            if got is not None:
                return got

    def _hung(self, link: _Link, method: str, deadline: float, timeout: float | None,
              cancel: threading.Event | None) -> None:
        """A call with a deadline lost its connection. The socket reconnects by itself:
        return (the caller raises UnavailableError) once that is refused or fails (the
        server is gone) or succeeds (a live server, which never got or lost the
        request); raise DeadlineExceededError at the deadline while neither happens (a
        server that is silent but still accepts connections: a hung or stopped process,
        which may answer a later call). The drop itself schedules a reconnect (one
        retry); a second retry without a TCP connection means the connect failed."""
        retries = link.retries
        while True:
            link.events()
            if link.ready or (link.retries > retries + 1 and not link.tcp_up):
                return
            link.poller.poll(self._slice(method, deadline, timeout, cancel))

    def _reply(self, sock: zmq.Socket, rid: int, method: str, flags: int
               ) -> tuple[bytes, list[Any]] | None:
        """Receive a message: the result of call ``rid`` if it is its reply (raising its
        error), None for a late reply to an earlier call on the link."""
        try:
            _, (kind, got, _, code, header, buffers) = _recv_message(
                sock, False, self._t.max_message_bytes, flags)
        except _Refused as e:
            if e.rid != rid:
                return None
            raise errors.exception_type_from_error_code(e.code)(
                None, None, f"bad reply to {method!r} from zmq server {self.address}: "
                            f"{e.reason}") from None
        if got != rid:
            return None  # its caller timed out
        if kind == _REPLY:
            return header, buffers
        if kind == _ERROR:
            raise errors.exception_type_from_error_code(code)(
                None, None, header.decode("utf-8", "replace"))
        raise errors.InternalError(None, None, f"bad reply to {method!r} from zmq server "
                                               f"{self.address}: message kind {kind}")

    def close(self) -> None:
        """Close the idle links; calls in flight fail with UnavailableError within a
        fraction of a second and close theirs."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for link in idle:
            link.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class ZmqTransport(MessageTransport):
    """Framed messages over ZeroMQ (ROUTER servers, DEALER channels); see the module
    docstring for the wire format.

    :param max_message_bytes: the largest message (header plus buffers) either side
        accepts; also zmq's per-frame ``MAXMSGSIZE``
    :param chunk_bytes: buffers larger than this travel as several frames
    :param heartbeat_s: zmq heartbeat interval; a peer silent for ``4 * heartbeat_s``
        is dropped (a closed socket is noticed at once)
    :param connect_timeout: seconds a TCP connect may take before it counts as failed
    """

    scheme = "zmq"

    def __init__(self, max_message_bytes: int | None = None, chunk_bytes: int | None = None,
                 heartbeat_s: float = 0.5, connect_timeout: float = 5.0):
        if max_message_bytes is not None:
            self.max_message_bytes = int(max_message_bytes)
        if chunk_bytes is not None:
            if chunk_bytes < 1:
                raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
            self.chunk_bytes = int(chunk_bytes)
        self.heartbeat_s, self.connect_timeout = heartbeat_s, connect_timeout
        self._ctx: zmq.Context | None = None
        self._ctx_lock = threading.Lock()
        self._auth: Any = None  # the ZAP handler of CURVE servers, made by the first

    def _context(self) -> zmq.Context:
        with self._ctx_lock:
            if self._ctx is None:
                self._ctx = zmq.Context(io_threads=1)
                self._ctx.set(zmq.MAX_SOCKETS, 1 << 16)
            return self._ctx

    def _heartbeats(self, sock: zmq.Socket) -> None:
        ivl = max(1, int(self.heartbeat_s * 1000))
        sock.setsockopt(zmq.HEARTBEAT_IVL, ivl)
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, 4 * ivl)
        sock.setsockopt(zmq.HEARTBEAT_TTL, 8 * ivl)

    def serve(self, address: str, handler: Handler) -> ServerHandle:
        """Bind a ROUTER socket to ``address`` (``host:port``, port 0 for a free one) and
        answer every request with ``handler`` on its own thread."""
        return _Server(self, address, handler)

    def connect(self, address: str, security: Any = None) -> Channel:
        """A DEALER channel to ``address``; an unreachable peer fails the first call.
        ``security``: a ``SecurityConfig`` whose CURVE keys (if any) the channel's
        links use (this process's keypair, the servers' public key)."""
        _tcp_endpoint(address)
        return _Channel(self, address, security)

    def _secure_server(self, sock: zmq.Socket, sec: Any, address: str) -> None:
        """Make ``sock`` a CURVE server with ``sec``'s keypair, accepting only the
        client keys ``sec`` allows (checked by this context's ZAP handler on every
        handshake); nothing without CURVE keys."""
        if sec is None or not sec.curve:
            if sec is not None and sec.tls:
                raise errors.InvalidArgumentError(
                    None, None, f"zmq server on {address!r}: the security config has a "
                    "TLS certificate but no CURVE keys (zmq encrypts with CURVE: "
                    "--curve-secret-key, --curve-public-keys)")
            return
        domain = f"flowrt-{id(sock):x}"
        ctx = self._context()
        with self._ctx_lock:
            if self._auth is None:
                # pyzmq's own ZAP handler, on a thread of its own: imported only by a
                # server that uses CURVE
                from zmq.auth.thread import ThreadAuthenticator

                self._auth = ThreadAuthenticator(ctx)
                self._auth.start()
            self._auth.configure_curve_callback(domain, _AllowedKeys(sec))
        sock.curve_secretkey = sec.curve_secret
        sock.curve_publickey = sec.curve_public
        sock.curve_server = True
        sock.zap_domain = domain.encode()


class _AllowedKeys:
    """The ZAP credentials provider of one CURVE server: the client keys its config
    allows, read again at most every 2 s (a key added to the directory counts soon)."""

    def __init__(self, sec: Any):
        self._sec, self._keys, self._at = sec, frozenset(), float("-inf")

    def callback(self, domain: str, key: bytes) -> bool:
        """Whether the client public ``key`` (Z85) may connect."""
        now = time.monotonic()
        if now - self._at > 2.0:
            self._keys, self._at = frozenset(self._sec.allowed_curve_keys()), now
        return key in self._keys
