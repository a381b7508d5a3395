"""The ``example_unix`` plugin: the ``unix://`` transport, framed messages over Unix
domain sockets (tasks on one host).

A small :class:`~flowrt.distributed.message_transport.MessageTransport`: flowrt's core
builds the master and worker services on :meth:`UnixTransport.serve` and
:meth:`UnixTransport.connect`; this module only moves messages.

Addresses are socket paths, not ``host:port``: ``unix://ps0.sock`` serves at
``ps0.sock`` in the working directory, ``unix:///<absolute path>`` at that path.
:meth:`UnixTransport.free_addresses` gives fresh paths (the conformance kit and tests
use it to build clusters).

Every message, request or reply, is one frame on the connection::

    magic b"FU" | kind u8 | 0 u8 | request id u64 | method length u16 | error code u16
    | buffer count u32 | header length u64 | buffer lengths u64 * count
    | method | header | buffers

A server reads requests on one thread per connection and runs each on its own thread,
so handlers may block on each other; replies go back on the request's connection, in
any order, matched by the request id. A channel holds one connection and a reader
thread that hands each reply to the call waiting for it.
"""
from __future__ import annotations

import atexit
import itertools
import os
import shutil
import socket
import struct
import tempfile
import threading
import time
from typing import Any, Sequence

from flowrt import errors, hookimpl
from flowrt.distributed.message_transport import MessageTransport
from flowrt.transport import Channel, Handler, ServerHandle, Transport

__all__ = ["UnixTransport", "flowrt_transports"]

_HEAD = struct.Struct("<2sBxQHHIQ")
_MAGIC, _REQUEST, _REPLY, _ERROR = b"FU", 1, 2, 3
_SLICE_S = 0.05  # how often a waiting call looks at its deadline and cancel event


def _frame(kind: int, rid: int, method: str, code: int, header: bytes,
           buffers: Sequence[Any]) -> tuple[list[Any], int]:
    """The frame's parts and its size as the limit counts it (method, header and
    buffers)."""
    views = [memoryview(b).cast("B") for b in buffers]
    m = method.encode()
    head = _HEAD.pack(_MAGIC, kind, rid, len(m), code, len(views), len(header))
    lengths = struct.pack(f"<{len(views)}Q", *(v.nbytes for v in views))
    return [head + lengths + m + bytes(header), *views], \
        len(m) + len(header) + sum(v.nbytes for v in views)


def _read(sock: socket.socket, n: int) -> bytearray:
    out = bytearray(n)
    view, got = memoryview(out), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise ConnectionError("connection closed")
        got += k
    return out


def _too_big(what: str, size: int, limit: int) -> errors.OpError:
    return errors.ResourceExhaustedError(None, None, f"{what} is {size} bytes, over the "
                                         f"limit of {limit} bytes (max_message_bytes)")


def _receive(sock: socket.socket, limit: int) -> tuple[int, int, str, int, bytes, list[Any],
                                                        int]:
    """One frame: (kind, rid, method, code, header, buffers, size); a frame over
    ``limit`` is read and dropped, and comes back with no header and buffers."""
    magic, kind, rid, mlen, code, nbuf, hlen = _HEAD.unpack(_read(sock, _HEAD.size))
    if magic != _MAGIC:
        raise ConnectionError(f"bad frame magic {magic!r}")
    lengths = struct.unpack(f"<{nbuf}Q", _read(sock, 8 * nbuf)) if nbuf else ()
    size = mlen + hlen + sum(lengths)
    if size > limit:
        method = _read(sock, mlen).decode()
        left = size - mlen
        while left:
            left -= len(_read(sock, min(left, 1 << 20)))
        return kind, rid, method, code, b"", [], size
    body = memoryview(_read(sock, size))
    method, header = bytes(body[:mlen]).decode(), bytes(body[mlen:mlen + hlen])
    bufs, at = [], mlen + hlen
    for n in lengths:
        bufs.append(body[at:at + n])
        at += n
    return kind, rid, method, code, header, bufs, size


class _Server(ServerHandle):
    """A listening socket, a reader thread per connection, a thread per request."""

    def __init__(self, transport: "UnixTransport", address: str, handler: Handler):
        self._t, self._handler, self.address = transport, handler, address
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.bind(address)
            self._sock.listen(64)
        except OSError as e:
            self._sock.close()
            raise errors.UnavailableError(None, None, f"unix server could not bind "
                                          f"{address}: {e.strerror or e}") from None
        self._conns: set[socket.socket] = set()
        self._busy = threading.Condition()
        self._inflight = 0
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True,
                         name=f"flowrt-unix-server {address}").start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # the listening socket was closed by stop()
            with self._busy:
                if self._stopped:
                    conn.close()
                    return
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn, threading.Lock()),
                             daemon=True, name=f"flowrt-unix-conn {self.address}").start()

    def _serve(self, conn: socket.socket, lock: threading.Lock) -> None:
        limit = self._t.max_message_bytes
        try:
            while True:
                kind, rid, method, _, header, bufs, size = _receive(conn, limit)
                if size > limit:
                    e = _too_big(f"request {method!r} to {self.address}", size, limit)
                    self._send(conn, lock, _ERROR, rid, e.error_code, e.message.encode(), ())
                    continue
                with self._busy:
                    if self._stopped:
                        return
                    self._inflight += 1
                threading.Thread(target=self._run, args=(conn, lock, rid, method, header,
                                                         bufs), daemon=True).start()
        except (OSError, ConnectionError, struct.error):
            pass  # the client went away, or stop() closed the connection
        finally:
            with self._busy:
                self._conns.discard(conn)
            conn.close()

    def _run(self, conn: socket.socket, lock: threading.Lock, rid: int, method: str,
             header: bytes, bufs: list[Any]) -> None:
        try:
            try:
                rh, rb = self._handler(method, header, bufs)
                kind, code = _REPLY, 0
                size = _frame(kind, rid, "", code, rh, rb)[1]
                if size > self._t.max_message_bytes:
                    e = _too_big(f"reply to {method!r} from {self.address}", size,
                                 self._t.max_message_bytes)
                    kind, code, rh, rb = _ERROR, e.error_code, e.message.encode(), ()
            except Exception as e:  # noqa: BLE001 - the caller gets it as INTERNAL
                kind, code = _ERROR, errors.INTERNAL
                rh, rb = f"handler for {method!r} on {self.address} failed: {e}".encode(), ()
            self._send(conn, lock, kind, rid, code, rh, rb)
        except OSError:
            pass  # the connection is gone: the client already failed the call
        finally:
            with self._busy:
                self._inflight -= 1
                self._busy.notify_all()

    @staticmethod
    def _send(conn: socket.socket, lock: threading.Lock, kind: int, rid: int, code: int,
              header: bytes, buffers: Sequence[Any]) -> None:
        parts, _ = _frame(kind, rid, "", code, header, buffers)
        with lock:
            for p in parts:
                conn.sendall(p)

    def stop(self, grace: float = 0.0) -> None:
        """Stop listening, wait up to ``grace`` seconds for the calls in flight, then
        close every connection (their callers get UnavailableError). May be called from
        inside a handler."""
        with self._busy:
            if self._stopped:
                return
            self._stopped = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        try:
            os.unlink(self.address)
        except OSError:
            pass
        with self._busy:
            self._busy.wait_for(lambda: self._inflight == 0, timeout=max(grace, 0.0))
            conns, self._conns = list(self._conns), set()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Call:
    __slots__ = ("done", "reply")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: Any = None


class _Channel(Channel):
    """One connection to a server, opened by the first call; a reader thread hands each
    reply to its call. Calls may be in flight from any number of threads."""

    cancellable = True

    def __init__(self, transport: "UnixTransport", address: str):
        self._t, self.address = transport, address
        self._lock = threading.Lock()  # the connection and the pending calls
        self._send_lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._pending: dict[int, _Call] = {}
        self._rids = itertools.count(1)
        self._closed = False

    def _unavailable(self, why: str) -> errors.OpError:
        return errors.UnavailableError(None, None, f"unix server {self.address}: {why}")

    def _open(self) -> socket.socket:
        """The connection, opened now if there is none."""
        with self._lock:
            if self._closed:
                raise self._unavailable("the channel is closed")
            if self._sock is None:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(self.address)
                except OSError as e:
                    s.close()
                    raise self._unavailable(f"cannot connect: {e.strerror or e}") from None
                self._sock = s
                threading.Thread(target=self._read, args=(s,), daemon=True,
                                 name=f"flowrt-unix-channel {self.address}").start()
            return self._sock

    def _read(self, sock: socket.socket) -> None:
        limit = self._t.max_message_bytes
        try:
            while True:
                kind, rid, _, code, header, bufs, size = _receive(sock, limit)
                with self._lock:
                    call = self._pending.pop(rid, None)
                if call is None:
                    continue  # its caller gave up (timeout, cancel)
                if size > limit:
                    call.reply = _too_big(f"reply from {self.address}", size, limit)
                elif kind == _ERROR:
                    call.reply = errors.exception_type_from_error_code(code)(
                        None, None, header.decode("utf-8", "replace"))
                else:
                    call.reply = (header, bufs)
                call.done.set()
        except (OSError, ConnectionError, struct.error):
            self._drop(sock, "lost the connection")

    def _drop(self, sock: socket.socket, why: str) -> None:
        """Forget ``sock`` and fail every call waiting on it."""
        with self._lock:
            if self._sock is sock:
                self._sock = None
            pending, self._pending = self._pending, {}
        for call in pending.values():
            call.reply = self._unavailable(why)
            call.done.set()
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def call(self, method: str, header: bytes, buffers: Sequence[Any] = (),
             timeout: float | None = None, cancel: threading.Event | None = None
             ) -> tuple[bytes, list[Any]]:
        """Send one request and wait for its reply (see :class:`flowrt.transport.Channel`);
        ``timeout`` is in seconds."""
        rid = next(self._rids)
        parts, size = _frame(_REQUEST, rid, method, 0, header, buffers)
        if size > self._t.max_message_bytes:
            raise _too_big(f"request {method!r} to {self.address}", size,
                           self._t.max_message_bytes)
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        sock = self._open()
        call = _Call()
        with self._lock:
            self._pending[rid] = call
        try:
            with self._send_lock:
                for p in parts:
                    sock.sendall(p)
        except OSError as e:
            self._drop(sock, f"sending {method!r} failed: {e.strerror or e}")
        while not call.done.wait(_SLICE_S):
            if cancel is not None and cancel.is_set():
                why: errors.OpError = errors.CancelledError(
                    None, None, f"unix call {method!r} to {self.address} was cancelled")
            elif deadline is not None and time.monotonic() >= deadline:
                why = errors.DeadlineExceededError(
                    None, None, f"unix call {method!r} to {self.address} timed out after "
                                f"{timeout:g} s")
            else:
                continue
            with self._lock:
                self._pending.pop(rid, None)
            raise why
        if isinstance(call.reply, BaseException):
            raise call.reply
        return call.reply

    def close(self) -> None:
        """Close the connection; calls in flight fail with UnavailableError."""
        with self._lock:
            self._closed = True
            sock = self._sock
        if sock is not None:
            self._drop(sock, "the channel was closed")


class UnixTransport(MessageTransport):
    """``unix://<socket path>``: flowrt's messages over Unix domain sockets."""

    scheme = "unix"

    def serve(self, address: str, handler: Handler) -> ServerHandle:
        """Listen on the socket path ``address`` and answer every request with
        ``handler``, each on its own thread."""
        return _Server(self, address, handler)

    def connect(self, address: str) -> Channel:
        """A channel to the server at the socket path ``address`` (connects on the
        first call)."""
        return _Channel(self, address)

    def free_addresses(self, k: int) -> list[str]:
        """``k`` socket paths nothing serves yet, in a temporary directory of this
        process (removed when it exits)."""
        with _paths_lock:
            if not _paths:
                _paths.append(tempfile.mkdtemp(prefix="flowrt-unix-"))
                atexit.register(shutil.rmtree, _paths[0], True)
            return [os.path.join(_paths[0], f"{next(_ids)}.sock") for _ in range(k)]


_paths: list[str] = []  # the process's directory for free_addresses
_paths_lock = threading.Lock()
_ids = itertools.count()


@hookimpl
def flowrt_transports() -> list[Transport]:
    """The ``unix`` transport (a fresh object per runtime)."""
    return [UnixTransport()]
