"""The conformance kit's checks of a message transport's channels and servers
(``flowrt.testing``).

They serve a handler of the kit's own with :meth:`MessageTransport.serve` and call it
through :meth:`MessageTransport.connect`, so each rule of the channel contract is
checked on its own, with bounded waits, and a broken rule is named (a server that runs
one handler at a time is found in a few seconds, not by a step that hangs):

- every buffer of a message arrives (replies with many buffers);
- handlers run concurrently;
- ``call(timeout=...)`` (seconds) ends with ``DeadlineExceededError``;
- ``call(cancel=event)`` ends with ``CancelledError`` on a ``cancellable`` channel;
- ``Channel.close()`` ends calls in flight with ``UnavailableError``;
- a message over ``max_message_bytes`` is refused with ``ResourceExhaustedError``,
  never handed to the handler, and the channel goes on working;
- after ``stop()`` calls on connections opened before fail with ``UnavailableError``;
- an unreachable peer raises ``UnavailableError`` naming the address, not ``OSError``.

Also here: where a transport may serve (:func:`free_addresses`) and the switch that keeps
large tensors off same-host shared memory while a transport is checked.
"""
from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from typing import Any, Callable, Iterator

import numpy as np

from ..base import errors
from ..distributed import shm as _shm
from ..distributed.message_transport import MessageTransport
from ..plugin.transport import DeferredTransport
from .conformance_report import Report, exc_text, fail

__all__ = ["free_ports", "free_port", "free_addresses", "listen_address",
           "shared_memory_off", "is_message_transport", "check_channels"]

ECHO, BLOCK, RELEASE, BIG = ("conformance/Echo", "conformance/Block",
                             "conformance/Release", "conformance/Big")
#: longest a BLOCK handler waits to be released (the kit always releases it sooner)
_BLOCK_S = 10.0
#: how long the kit waits for any one call it expects to end
_WAIT_S = 3.0
#: the size limit set while the limit is checked
_LIMIT = 1 << 20


def free_ports(k: int, host: str = "127.0.0.1") -> list[int]:
    """``k`` distinct TCP ports that were free on ``host`` a moment ago (all bound to
    port 0 at once, then closed)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(k)]
    try:
        for s in socks:
            s.bind((host, 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago (bind to port 0, then close)."""
    return free_ports(1, host)[0]


def free_addresses(transport: Any, k: int) -> list[str]:
    """``k`` addresses nothing serves yet: the transport's own ``free_addresses(k)``
    when it has one (socket paths, names), unique names for ``inproc``, else
    ``127.0.0.1:<free port>``."""
    fn = getattr(transport, "free_addresses", None)
    if callable(fn):
        return list(fn(k))
    if getattr(transport, "scheme", "") == "inproc":
        tag = uuid.uuid4().hex[:8]
        return [f"conformance-{tag}-{i}" for i in range(k)]
    return [f"127.0.0.1:{p}" for p in free_ports(k)]


def listen_address(transport: Any) -> str:
    """Where the kit starts a server: ``127.0.0.1:0`` for ``host:port`` transports
    (the server reports the port it got), else a free address."""
    if callable(getattr(transport, "free_addresses", None)) or \
            getattr(transport, "scheme", "") == "inproc":
        return free_addresses(transport, 1)[0]
    return "127.0.0.1:0"


@contextlib.contextmanager
def shared_memory_off() -> Iterator[None]:
    """Inside, large tensors between processes of one host travel over the transport
    itself, not through shared memory (:mod:`flowrt.distributed.shm`), so that a
    transport under test carries every byte."""
    saved = _shm.set_enabled(False)
    try:
        yield
    finally:
        _shm.set_enabled(saved)


def is_message_transport(t: Any) -> bool:
    """Whether ``t`` (or the transport a DeferredTransport stands for) moves messages
    with its own ``serve`` and ``connect``."""
    t = t.load() if isinstance(t, DeferredTransport) else t
    return isinstance(t, MessageTransport) and \
        type(t).serve is not MessageTransport.serve and \
        type(t).connect is not MessageTransport.connect


class _Handler:
    """The kit's server side: echo, block until released, release, a big reply."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, method: str, header: bytes, buffers: list[Any]
                 ) -> tuple[bytes, list[Any]]:
        self.calls.append(method)
        if method == BLOCK:
            self.entered.set()
            self.release.wait(_BLOCK_S)
            return b"released", []
        if method == RELEASE:
            self.release.set()
            return b"ok", []
        if method == BIG:
            return b"big", [bytes(2 * _LIMIT)]
        return bytes(header), [bytes(memoryview(b).cast("B")) for b in buffers]


def _in_thread(fn: Callable[[], Any], limit: float) -> tuple[str, Any, float]:
    """Run ``fn`` on a thread for at most ``limit`` seconds: ``("ok", result, s)``,
    ``("error", exception, s)`` or ``("running", None, s)``."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["ok"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    t0 = time.monotonic()
    th = threading.Thread(target=run, daemon=True, name="flowrt-conformance-call")
    th.start()
    th.join(limit)
    took = time.monotonic() - t0
    if th.is_alive():
        return "running", None, took
    return ("ok", box["ok"], took) if "ok" in box else ("error", box["error"], took)


def _expect(where: list[str], what: str, got: tuple[str, Any, float], cls: type,
            rule: str) -> BaseException:
    """``got`` (from :func:`_in_thread`) must be an error of ``cls``; else fail with
    ``what`` and ``rule``."""
    state, value, took = got
    if state == "running":
        fail(where, f"{what} was still waiting after {took:.1f} s: {rule}")
    if state == "ok":
        fail(where, f"{what} returned a reply instead of raising {cls.__name__}: {rule}")
    if isinstance(value, OSError):
        fail(where, f"{what} raised a raw {exc_text(value)}: a channel turns socket errors "
                    "into flowrt.errors.UnavailableError naming the address")
    if not isinstance(value, cls):
        fail(where, f"{what} raised {exc_text(value)}, expected "
                    f"flowrt.errors.{cls.__name__}: {rule}")
    return value


def _echo(where: list[str], ch: Any, what: str) -> None:
    bufs: list[Any] = [b"", b"x", bytes(range(256)) * 40, np.arange(1000, dtype=np.float64),
                       memoryview(b"abc"), np.zeros((3, 4), np.int32), b"\x00" * 7,
                       bytearray(b"flowrt"), np.arange(5, dtype=np.uint8)]
    got = _in_thread(lambda: ch.call(ECHO, b"header", bufs, _WAIT_S), _WAIT_S + 1)
    if got[0] != "ok":
        fail(where, f"{what}: a call answered at once by the handler "
                    f"{'did not return' if got[0] == 'running' else 'raised ' + exc_text(got[1])}")
    header, out = got[1]
    if bytes(header) != b"header":
        fail(where, f"{what}: the reply's header came back as {bytes(header)[:40]!r}")
    if len(out) != len(bufs):
        fail(where, f"{what}: a reply of {len(bufs)} buffers came back with {len(out)}: "
                    "every buffer of a message must arrive, in order")
    for i, (a, b) in enumerate(zip(bufs, out)):
        if bytes(memoryview(a).cast("B")) != bytes(memoryview(b).cast("B")):
            fail(where, f"{what}: buffer {i} of the reply differs from the one sent")


def check_channels(transport: Any, where: list[str], r: Report) -> None:
    """The channel and server rules of the module docstring, on a server of the kit's
    own handler; each rule that fails raises AssertionError naming it."""
    t = transport.load() if isinstance(transport, DeferredTransport) else transport
    h = _Handler()
    try:
        srv = t.serve(listen_address(t), h)
    except Exception as e:
        fail(where, f"serve({listen_address(t)!r}, handler) raised {exc_text(e)}")
    addr = getattr(srv, "address", None)
    if not isinstance(addr, str) or not addr:
        fail(where, "serve() returned a server handle without an address")
    ch = t.connect(addr)
    stopped = False
    try:
        _echo(where, ch, "echo")
        r.ok("a reply with 9 buffers (empty, bytes, arrays, memoryviews) arrives whole")

        blocked = threading.Thread(target=lambda: _quiet(ch.call, BLOCK, b"", (), _BLOCK_S),
                                   daemon=True)
        blocked.start()
        if not h.entered.wait(_WAIT_S):
            fail(where, f"the handler of a call did not start within {_WAIT_S:g} s")
        got = _in_thread(lambda: ch.call(RELEASE, b"", (), 3.0), 4.0)
        if got[0] != "ok":
            h.release.set()
            fail(where, "a second call was not answered within 3 s while the handler of "
                        "the first was blocked: handlers must run concurrently (a step's "
                        "handler waits for other calls to the same server)")
        blocked.join(_WAIT_S)
        r.ok("handlers run concurrently (a call is answered while another's handler waits)")

        for what, cls, rule in (
                ("call(timeout=0.5)", errors.DeadlineExceededError,
                 "timeout is in seconds; the call must end then with DeadlineExceededError"),
                ("call(cancel=event), the event set after 0.3 s", errors.CancelledError,
                 "a cancellable channel ends the call with CancelledError soon after the "
                 "event is set")):
            if "cancel" in what and not getattr(ch, "cancellable", False):
                r.skip("cancel", "the channel is not cancellable")
                continue
            timed = "timeout" in what
            got = _blocked_call(h, lambda ev, timed=timed: ch.call(
                BLOCK, b"", (), 0.5 if timed else _BLOCK_S, **({} if timed else
                                                                {"cancel": ev})))
            _expect(where, what, got, cls, rule)
            if "timeout" in what and got[2] < 0.4:
                fail(where, f"{what} raised DeadlineExceededError after {got[2]:.2f} s: "
                            "timeout is in seconds")
            r.ok(f"{what} raises {cls.__name__}")
        _echo(where, ch, "a call after a timed-out and a cancelled one")

        _check_limit(t, where, r)
        _check_close(t, where, r)

        n = len(h.calls)
        srv.stop(0.0)
        stopped = True
        got = _in_thread(lambda: ch.call(ECHO, b"", (), _WAIT_S), _WAIT_S + 2)
        if got[0] == "ok" or len(h.calls) > n:
            fail(where, "after stop() a call on a connection opened before was answered: "
                        "stop() must close the server's connections")
        _expect(where, "a call after stop() on a connection opened before", got,
                errors.UnavailableError, "stop() closes the server's connections, so "
                                         "their callers fail at once")
        r.ok("after stop() calls on connections opened before raise UnavailableError")
    finally:
        h.release.set()
        if not stopped:
            srv.stop(0.0)
        ch.close()

    peer = free_addresses(t, 1)[0]
    chans: list[Any] = []

    def unreachable() -> Any:
        chans.append(t.connect(peer))  # connect may raise: a lazy one fails in call
        return chans[0].call(ECHO, b"", (), _WAIT_S)

    got = _in_thread(unreachable, _WAIT_S + 2)
    for c in chans:
        c.close()
    e = _expect(where, f"a call to {peer}, where nothing serves", got,
                errors.UnavailableError, "an unreachable peer raises "
                                         "flowrt.errors.UnavailableError, not OSError")
    if peer not in str(e):
        fail(where, f"the UnavailableError for an unreachable peer does not name its "
                    f"address {peer!r}: {e}")
    r.ok("an unreachable peer raises UnavailableError naming its address")


def _blocked_call(h: _Handler, call: Callable[[threading.Event], Any],
                  then: Callable[[], Any] | None = None) -> tuple[str, Any, float]:
    """Run ``call(event)`` (a BLOCK call) on a thread; 0.3 s after its handler starts,
    set the event and call ``then``; the outcome as :func:`_in_thread` gives it. The
    handler is released afterwards."""
    h.entered.clear()
    h.release.clear()
    ev = threading.Event()

    def poke() -> None:
        if h.entered.wait(_WAIT_S):
            time.sleep(0.3)
            ev.set()
            if then is not None:
                then()

    threading.Thread(target=poke, daemon=True).start()
    try:
        return _in_thread(lambda: call(ev), _WAIT_S)
    finally:
        h.release.set()


def _check_close(t: Any, where: list[str], r: Report) -> None:
    """``close()`` of a channel (the only one to its server) ends its call in flight
    with UnavailableError, and later calls on it raise UnavailableError."""
    h = _Handler()
    srv = t.serve(listen_address(t), h)
    ch = t.connect(srv.address)
    try:
        rule = "close() releases the channel: its calls in flight and later calls raise "\
               "UnavailableError"
        got = _blocked_call(h, lambda ev: ch.call(BLOCK, b"", (), _BLOCK_S), ch.close)
        _expect(where, "a call in flight when Channel.close() was called", got,
                errors.UnavailableError, rule)
        got = _in_thread(lambda: ch.call(ECHO, b"", (), _WAIT_S), _WAIT_S + 1)
        _expect(where, "a call on a closed channel", got, errors.UnavailableError, rule)
    finally:
        srv.stop(0.0)
        ch.close()
    r.ok("Channel.close() ends calls in flight and later calls with UnavailableError")


def _quiet(fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - the check that started it reports
        pass


def _check_limit(t: Any, where: list[str], r: Report) -> None:
    """With ``max_message_bytes`` set to 1 MiB: a larger request and a larger reply are
    refused with ResourceExhaustedError, the request never reaches the handler, and the
    channel still works."""
    had = "max_message_bytes" in vars(t)
    saved = t.max_message_bytes
    t.max_message_bytes = _LIMIT
    h = _Handler()
    try:
        srv = t.serve(listen_address(t), h)
        ch = t.connect(srv.address)
        try:
            rule = ("a message over max_message_bytes is refused with ResourceExhaustedError "
                    "(the peer is fine; the message is too big)")
            got = _in_thread(lambda: ch.call(ECHO, b"", [bytes(_LIMIT + 1024)], _WAIT_S),
                             _WAIT_S + 2)
            if ECHO in h.calls:
                fail(where, f"a request of {_LIMIT + 1024} bytes reached the handler with "
                            f"max_message_bytes = {_LIMIT}: {rule}")
            _expect(where, f"a request over max_message_bytes ({_LIMIT})", got,
                    errors.ResourceExhaustedError, rule)
            got = _in_thread(lambda: ch.call(BIG, b"", (), _WAIT_S), _WAIT_S + 2)
            _expect(where, f"a reply over max_message_bytes ({_LIMIT})", got,
                    errors.ResourceExhaustedError, rule)
            _echo(where, ch, "a call after refused oversized messages")
        finally:
            srv.stop(0.0)
            ch.close()
    finally:
        if had:
            t.max_message_bytes = saved
        else:
            del t.max_message_bytes
    r.ok("messages over max_message_bytes raise ResourceExhaustedError and never reach "
         "the handler; the channel goes on working")
