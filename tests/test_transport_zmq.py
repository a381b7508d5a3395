"""The ZeroMQ message transport: framing, chunking, concurrency, failures, robustness."""
from __future__ import annotations

import selectors
import socket
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import zmq
from hypothesis import given, settings, strategies as st

from flowrt import errors
from flowrt.plugins.transports import zmq as zt
from flowrt.plugins.transports.zmq import ZmqTransport

from _threads import Bg

CHUNK = 1024


def echo(method, header, buffers):
    return header, list(buffers)


def as_bytes(bufs):
    return [bytes(b) for b in bufs]


@pytest.fixture(scope="module")
def transport():
    return ZmqTransport(chunk_bytes=CHUNK)


@pytest.fixture(scope="module")
def server(transport):
    seen = {}

    def handler(method, header, buffers):
        seen["types"] = [type(b) for b in buffers]
        if method == "echo":
            return header, list(buffers)
        if method == "fail":
            raise RuntimeError("the handler broke on purpose")
        if method == "sleep":
            time.sleep(float(header))
            return b"slept", []
        if method == "badheader":
            return 42, []
        if method == "big":
            return b"", [np.zeros(int(header), np.uint8)]
        return b"unknown " + method.encode(), []

    s = transport.serve("127.0.0.1:0", handler)
    s.seen = seen
    yield s
    s.stop()


@pytest.fixture(scope="module")
def shared_channel(transport, server):
    ch = transport.connect(server.address)
    yield ch
    ch.close()


@pytest.fixture
def channel(transport, server):
    ch = transport.connect(server.address)
    yield ch
    ch.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- plugin ------------------------------------------------------------------------------
def test_registered_through_the_hook():
    from flowrt.runtime import Runtime

    from flowrt.plugins.transports import zmq_plugin

    (t,) = zmq_plugin.flowrt_transports()  # declared, imported on first use
    assert t.scheme == "zmq" and isinstance(t.load(), ZmqTransport)
    assert isinstance(Runtime().transport("zmq"), ZmqTransport)


def test_serve_reports_the_bound_port(server):
    host, _, port = server.address.rpartition(":")
    assert host == "127.0.0.1" and int(port) > 0
    assert "zmq" in repr(server)


def test_bind_in_use_is_unavailable(transport, server):
    with pytest.raises(errors.UnavailableError, match=server.address):
        transport.serve(server.address, echo)


def test_bad_address_is_invalid_argument(transport):
    with pytest.raises(errors.InvalidArgumentError, match="nohost"):
        transport.connect("nohost")


# -- round trips ---------------------------------------------------------------------------
@pytest.mark.parametrize("bufs", [
    [],
    [b""],
    [b"", b"", b""],
    [b"a", b"", b"bc", b""],
    [bytes([i % 256]) * i for i in range(60)],
    [b"x" * (CHUNK - 1), b"y" * CHUNK, b"z" * (CHUNK + 1)],
    [bytes(range(256)) * 20, b"", b"tail"],
], ids=["none", "one-empty", "three-empty", "mixed-empty", "sixty", "chunk-edges", "chunked"])
def test_echo(channel, bufs):
    header, got = channel.call("echo", b"hdr", bufs, timeout=10)
    assert header == b"hdr"
    assert as_bytes(got) == bufs


def test_numpy_and_memoryview_payloads(channel):
    a = np.arange(1000, dtype=np.float32).reshape(10, 100)
    b = np.arange(7, dtype=np.int64)
    c = np.float64(2.5)
    header, got = channel.call("echo", b"", [a, memoryview(b), np.array(c), a[:, ::2]],
                               timeout=10)
    np.testing.assert_array_equal(np.frombuffer(got[0], np.float32).reshape(10, 100), a)
    np.testing.assert_array_equal(np.frombuffer(got[1], np.int64), b)
    assert np.frombuffer(got[2], np.float64)[0] == 2.5
    np.testing.assert_array_equal(np.frombuffer(got[3], np.float32).reshape(10, 50), a[:, ::2])


def test_handler_gets_memoryviews(channel, server):
    channel.call("echo", b"", [b"abc", b"q" * (3 * CHUNK)], timeout=10)
    assert server.seen["types"] == [memoryview, memoryview]


def test_64_mib_round_trip():
    t = ZmqTransport()
    s = t.serve("127.0.0.1:0", echo)
    ch = t.connect(s.address)
    try:
        big = np.random.default_rng(0).integers(0, 255, 64 << 20, dtype=np.uint8)
        header, (got,) = ch.call("echo", b"big", [big], timeout=60)
        assert header == b"big" and got.nbytes == big.nbytes
        assert np.array_equal(np.frombuffer(got, np.uint8), big)
    finally:
        ch.close()
        s.stop()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=3 * CHUNK + 7), max_size=12), st.binary(max_size=200),
       st.text(min_size=1, max_size=20))
def test_echo_property(shared_channel, bufs, header, method):
    ch = shared_channel
    if method != "echo":
        h, got = ch.call(method, b"", bufs, timeout=10)
        assert h == b"unknown " + method.encode() and got == []
        return
    h, got = ch.call("echo", header, bufs, timeout=10)
    assert h == header and as_bytes(got) == bufs


def test_wire_format_round_trip():
    method = "méthode".encode()
    bufs = [b"", b"ab" * 10, b"c", b"d" * 5]
    frames = zt._encode(zt._REQUEST, 7, method, 0, b"h", bufs, 8, 1 << 20)
    # the 20-byte buffer is over the chunk size: three frames of its own; the small
    # ones travel in the head, each starting 16-byte aligned within it
    assert len(frames) == 1 + 3 and [bytes(f) for f in frames[1:]] == [b"abababab"] * 2 + [b"abab"]
    head = frames[0]
    fields = zt._HEAD.size + len(method) + 4 * 12
    assert head[fields:fields + 1] == b"h"
    c_at = -(-(fields + 1) // 16) * 16
    assert head[fields + 1:] == bytes(c_at - fields - 1) + b"c" + bytes(15) + b"d" * 5
    ctx = zmq.Context.instance()
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    try:
        a.bind("inproc://flowrt-test-wire")
        b.connect("inproc://flowrt-test-wire")
        zt._send_frames(a, frames)
        b.rcvtimeo = 5000
        peer, (kind, rid, m, code, header, got) = zt._recv_message(b, False, 1 << 20)
        assert peer is None
        assert (kind, rid, m, code, header) == (zt._REQUEST, 7, "méthode", 0, b"h")
        assert as_bytes(got) == bufs
        assert all(isinstance(x, memoryview) for x in got)
        base = got[2].obj  # the received head
        for x in (got[2], got[3]):
            off = np.frombuffer(x, np.uint8).ctypes.data - np.frombuffer(base, np.uint8).ctypes.data
            assert x.obj is base and off % 16 == 0
        zt._send_frames(a, frames)
        with pytest.raises(zt._Refused, match="exceeds the limit of 10"):
            zt._recv_message(b, False, 10)
        a.send_multipart([b"next"])  # the refused message was consumed whole
        with pytest.raises(zt._Refused, match="fewer than 24"):
            zt._recv_message(b, False, 1 << 20)
    finally:
        a.close(0)
        b.close(0)


def test_small_messages_are_one_frame_and_large_buffers_frames_of_their_own():
    small = zt._encode(zt._REPLY, 1, b"", 0, b"hdr", [b"x" * 100, np.ones(7, np.float32)],
                       1 << 20, 1 << 30)
    assert len(small) == 1
    big = np.arange(zt.INLINE_BYTES // 8 + 1, dtype=np.float64)  # just over the inline size
    frames = zt._encode(zt._REPLY, 1, b"", 0, b"hdr", [b"x" * 100, big], 1 << 20, 1 << 30)
    assert len(frames) == 2 and memoryview(frames[1]).obj is big  # sent from its memory
    # the head holds at most INLINE_TOTAL bytes of buffers; the rest get frames
    many = [bytes(zt.INLINE_BYTES)] * (zt.INLINE_TOTAL // zt.INLINE_BYTES + 2)
    assert len(zt._encode(zt._REPLY, 1, b"", 0, b"", many, 1 << 20, 1 << 30)) == 3


# -- errors -----------------------------------------------------------------------------------
def test_handler_exception_is_internal(channel):
    with pytest.raises(errors.InternalError, match="broke on purpose") as e:
        channel.call("fail", b"", [], timeout=10)
    assert "'fail'" in str(e.value)
    assert channel.call("echo", b"after", [], timeout=10)[0] == b"after"


def test_bad_reply_header_is_internal(channel):
    with pytest.raises(errors.InternalError, match="must be bytes"):
        channel.call("badheader", b"", [], timeout=10)


def test_timeout_then_channel_still_works(channel):
    t0 = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError, match="'sleep'.*timed out"):
        channel.call("sleep", b"0.5", [], timeout=0.15)
    assert 0.1 < time.monotonic() - t0 < 2
    time.sleep(0.5)  # the late reply arrives and must be ignored
    h, b = channel.call("echo", b"next", [b"1"], timeout=10)
    assert h == b"next" and as_bytes(b) == [b"1"]


def test_unreachable_is_prompt_unavailable(transport):
    addr = f"127.0.0.1:{free_port()}"
    ch = transport.connect(addr)
    try:
        for timeout in (None, 5.0):
            t0 = time.monotonic()
            err = Bg(lambda: ch.call("echo", b"", [], timeout=timeout)).error()
            assert isinstance(err, errors.UnavailableError), err
            assert addr in str(err)
            assert time.monotonic() - t0 < 2
    finally:
        ch.close()


def test_client_refuses_oversized_message(server):
    small = ZmqTransport(max_message_bytes=1000)
    ch = small.connect(server.address)
    try:
        with pytest.raises(errors.ResourceExhaustedError, match="1001 bytes.*limit of 1000"):
            ch.call("echo", b"x", [b"y" * 1000], timeout=10)
        assert ch.call("echo", b"x", [b"y" * 999], timeout=10)[0] == b"x"
    finally:
        ch.close()


def test_server_refuses_oversized_message():
    calls = []
    t = ZmqTransport(max_message_bytes=4000, chunk_bytes=512)
    s = t.serve("127.0.0.1:0", lambda m, h, b: (calls.append(m), (h, b))[1])
    client = ZmqTransport(chunk_bytes=512)
    ch = client.connect(s.address)
    try:
        with pytest.raises(errors.ResourceExhaustedError, match="limit of 4000") as e:
            ch.call("echo", b"", [b"z" * 5000], timeout=10)
        assert s.address in str(e.value) and calls == []
        # a single frame over the limit (plus the head's slack): libzmq drops that
        # connection at once
        with pytest.raises(errors.UnavailableError, match=s.address):
            ZmqTransport(chunk_bytes=4 << 20).connect(s.address).call(
                "echo", b"", [b"z" * (zt.FRAME_SLACK + 8000)], timeout=10)
        assert ch.call("echo", b"ok", [b"z" * 100], timeout=10)[0] == b"ok"
        assert calls == ["echo"]
    finally:
        ch.close()
        s.stop()


def test_reply_over_the_limit_is_refused():
    t = ZmqTransport(max_message_bytes=10_000)
    s = t.serve("127.0.0.1:0", lambda m, h, b: (b"", [b"r" * 20_000]))
    ch = ZmqTransport().connect(s.address)
    try:
        with pytest.raises(errors.ResourceExhaustedError, match="reply.*too big"):
            ch.call("any", b"", [], timeout=10)
    finally:
        ch.close()
        s.stop()


# -- concurrency ------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [50, 300])
def test_concurrent_blocking_handlers(n):
    """Every handler waits until all ``n`` requests have arrived: a fixed pool smaller
    than ``n`` would deadlock here."""
    barrier = threading.Barrier(n, timeout=15)

    def handler(method, header, buffers):
        barrier.wait()
        return header + b"!", [bytes(buffers[0])[::-1]]

    t = ZmqTransport()
    s = t.serve("127.0.0.1:0", handler)
    ch = t.connect(s.address)
    try:
        runs = [Bg(lambda i=i: ch.call("wait", str(i).encode(), [f"p{i}".encode()],
                                       timeout=20)) for i in range(n)]
        for i, r in enumerate(runs):
            h, (b,) = r.result(timeout=20)
            assert h == f"{i}!".encode() and bytes(b) == f"p{i}".encode()[::-1]
    finally:
        ch.close()
        s.stop()


# -- robustness -------------------------------------------------------------------------------
def test_raw_tcp_garbage_then_good_call(channel, server):
    host, _, port = server.address.rpartition(":")
    payloads = [b"GET / HTTP/1.1\r\n\r\n", bytes(range(256)) * 40,
                b"\xff" + b"\x00" * 8 + b"\x7f\x03\x00" + b"NULL" + b"\x00" * 100,
                b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f"]
    for p in payloads:
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(p)
            s.settimeout(0.2)
            try:
                s.recv(100)
            except OSError:
                pass
    with socket.create_connection((host, int(port)), timeout=5):
        pass  # connect and hang up at once
    assert channel.call("echo", b"fine", [b"x"], timeout=10)[0] == b"fine"


def _head(rid, nbuf=0, method=b"", table=b"", header=b"", rest=b"", kind=zt._REQUEST,
          version=2, mlen=None):
    return zt._HEAD.pack(b"FZ", version, kind, rid, nbuf, len(method) if mlen is None else mlen,
                         0, len(header)) + method + table + header + rest


def _table(*pairs):  # (size, frame count) of each buffer
    return struct.pack(f"<{len(pairs)}Q{len(pairs)}I", *[p[0] for p in pairs],
                       *[p[1] for p in pairs])


def test_raw_dealer_garbage_gets_error_replies(channel, server):
    ok = _head(9, 1, b"echo", _table((4, 1)), b"h")  # one buffer of 4 bytes in a frame
    bad = [
        [b"garbage"],
        [b""],
        [b"", b""],
        [b"x" * 24, b"h"],
        [_head(1, version=9)],
        [ok],  # says one buffer frame, has none
        [ok, b"abcd", b"b"],  # one frame too many
        [ok, b"abc"],  # the frame is not the size the head says
        [_head(3, mlen=10, rest=b"ab")],  # the method runs past the head
        [_head(4, method=b"\xff\xfe")],
        [_head(5, kind=zt._REPLY, method=b"echo")],
        [_head(6, 1, b"echo", _table((100, 0)))],  # a buffer in the head runs past it
        [_head(7, 0, b"echo", rest=b"zz")],  # bytes after the last field
        [_head(8, 1, b"echo", _table((3, 3))), b"a"],  # fewer chunks
        [_head(8, 1, b"echo", _table((3, 2))), b"ab", b"cd"],  # chunks over the size
        [_head(8, 1, b"echo", _table((5, 2))), b"ab", b"c"],  # chunks under the size
        [_head(8, 1, b"echo", _table((3, 5))), b"a"],  # more chunks than bytes
        [_head(8, 1, b"echo", _table((1 << 40, 2))), b"ab", b"cd"],  # too big
    ]
    codes = [errors.INTERNAL] * (len(bad) - 1) + [errors.RESOURCE_EXHAUSTED]
    ctx = zmq.Context.instance()
    d = ctx.socket(zmq.DEALER)
    d.linger = 0
    d.rcvtimeo = 5000
    d.connect(f"tcp://{server.address}")
    try:
        for msg, want in zip(bad, codes):
            d.send_multipart(msg)
            (reply,) = d.recv_multipart()
            _, _, kind, _, nbuf, mlen, code, hlen = zt._HEAD.unpack_from(reply)
            assert kind == zt._ERROR and code == want and nbuf == mlen == 0, (msg, reply)
            assert b"refused" in reply[zt._HEAD.size:zt._HEAD.size + hlen], reply
        d.send_multipart([ok, b"payload"[:4]])
        (reply,) = d.recv_multipart(copy=False)  # a small reply is one frame
        (kind, rid, _, _, header, bufs), more = zt._receive_body(d, reply, 1 << 20)
        assert not more
        assert (kind, rid, header, as_bytes(bufs)) == (zt._REPLY, 9, b"h", [b"payl"])
    finally:
        d.close()
    assert channel.call("echo", b"still", [], timeout=10)[0] == b"still"


# -- server death and shutdown ----------------------------------------------------------------
SERVER = """
import sys, time
from flowrt.plugins.transports.zmq import ZmqTransport
def handler(method, header, buffers):
    if method == "hang":
        time.sleep(60)
    return header, list(buffers)
s = ZmqTransport().serve("127.0.0.1:0", handler)
print(s.address, flush=True)
time.sleep(60)
"""


def test_server_killed_mid_call_is_prompt_unavailable(transport):
    proc = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE)
    try:
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(timeout=30), "the server process did not start"
        addr = proc.stdout.readline().decode().strip()
        ch = transport.connect(addr)
        assert ch.call("echo", b"up", [], timeout=20)[0] == b"up"
        run = Bg(lambda: ch.call("hang", b"", [], timeout=30))
        time.sleep(0.3)
        assert run.alive()
        proc.kill()
        t0 = time.monotonic()
        err = run.error(timeout=10)
        assert time.monotonic() - t0 < 2.5
        assert isinstance(err, errors.UnavailableError) and addr in str(err), err
        err = Bg(lambda: ch.call("echo", b"", [], timeout=5)).error()
        assert isinstance(err, errors.UnavailableError) and addr in str(err), err
        ch.close()
    finally:
        proc.kill()
        proc.wait(10)


def test_stop_fails_calls_in_flight_after_grace():
    release = threading.Event()

    def handler(method, header, buffers):
        release.wait(10)
        return b"late", []

    t = ZmqTransport()
    s = t.serve("127.0.0.1:0", handler)
    ch = t.connect(s.address)
    try:
        runs = [Bg(lambda: ch.call("block", b"", [], timeout=20)) for _ in range(3)]
        time.sleep(0.3)
        t0 = time.monotonic()
        s.stop(grace=0.2)
        assert time.monotonic() - t0 < 2
        for r in runs:
            err = r.error(timeout=5)
            assert isinstance(err, errors.UnavailableError) and s.address in str(err), err
        assert time.monotonic() - t0 < 3
        err = Bg(lambda: ch.call("block", b"", [], timeout=5)).error()
        assert isinstance(err, errors.UnavailableError)
    finally:
        release.set()
        ch.close()


def test_stop_waits_for_calls_that_finish_within_grace():
    started = threading.Event()

    def handler(method, header, buffers):
        started.set()
        time.sleep(0.3)
        return b"done", [b"r"]

    t = ZmqTransport()
    s = t.serve("127.0.0.1:0", handler)
    ch = t.connect(s.address)
    try:
        run = Bg(lambda: ch.call("slow", b"", [], timeout=20))
        assert started.wait(5)
        s.stop(grace=5)
        h, b = run.result()
        assert h == b"done" and as_bytes(b) == [b"r"]
    finally:
        ch.close()


def test_requests_during_grace_are_refused():
    release, started = threading.Event(), threading.Event()

    def handler(method, header, buffers):
        started.set()
        release.wait(10)
        return b"ok", []

    t = ZmqTransport()
    s = t.serve("127.0.0.1:0", handler)
    ch = t.connect(s.address)
    try:
        first = Bg(lambda: ch.call("a", b"", [], timeout=20))
        assert started.wait(5)
        stopper = Bg(lambda: s.stop(grace=5))
        deadline = time.monotonic() + 5
        while not s._stopping:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        err = Bg(lambda: ch.call("b", b"", [], timeout=5)).error()
        assert isinstance(err, errors.UnavailableError) and "stopping" in str(err), err
        release.set()
        assert first.result()[0] == b"ok"
        stopper.result()
    finally:
        release.set()
        ch.close()


def test_restarted_server_is_reached_again():
    t = ZmqTransport()
    s = t.serve("127.0.0.1:0", echo)
    ch = t.connect(s.address)
    try:
        assert ch.call("echo", b"1", [], timeout=10)[0] == b"1"
        s.stop()
        err = Bg(lambda: ch.call("echo", b"", [], timeout=5)).error()
        assert isinstance(err, errors.UnavailableError)
        s = t.serve(s.address, echo)
        deadline = time.monotonic() + 5
        while True:
            try:
                assert ch.call("echo", b"2", [], timeout=5)[0] == b"2"
                break
            except errors.UnavailableError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        ch.close()
        s.stop()


def test_close_fails_calls_in_flight(transport, server):
    ch = transport.connect(server.address)
    run = Bg(lambda: ch.call("sleep", b"2", [], timeout=20))
    time.sleep(0.2)
    ch.close()
    err = run.error(timeout=2)
    assert isinstance(err, errors.UnavailableError) and "closed" in str(err), err
    with pytest.raises(errors.UnavailableError, match="closed"):
        ch.call("echo", b"", [], timeout=5)


def test_ipv6_and_host_names():
    t = ZmqTransport()
    for addr in ("[::1]:0", "localhost:0"):
        try:
            s = t.serve(addr, echo)
        except errors.UnavailableError:
            if addr.startswith("["):
                continue  # no IPv6 loopback here
            raise
        assert s.address.startswith(addr[:-1]) and not s.address.endswith(":0")
        ch = t.connect(s.address)
        try:
            assert ch.call("echo", b"v", [b"x"], timeout=10)[0] == b"v"
        finally:
            ch.close()
            s.stop()


# -- leader and followers ---------------------------------------------------------------------
def test_requests_that_need_a_thread_reuse_the_pools_threads():
    """A request that cannot be answered at once runs on the thread that took it in
    (which hands the lead to another): steps one after another alternate between two
    threads instead of starting a new one each."""
    seen = []

    class Handler:
        def __call__(self, method, header, buffers):
            seen.append(threading.get_ident())
            return header, list(buffers)

        def dispatch(self, method, header, buffers):
            # never at once: always on a thread of its own
            return lambda: self(method, header, buffers)

    t = ZmqTransport()
    s = t.serve("127.0.0.1:0", Handler())
    ch = t.connect(s.address)
    try:
        for i in range(60):
            assert ch.call("slow", b"%d" % i, [b"b"], timeout=10)[0] == b"%d" % i
        assert len(set(seen)) <= 3 and s._pool._threads <= 3
        # someone leads: the thread that ran the last request handed the lead to a pool
        # thread before running it, and that thread names itself once it starts (on a
        # loaded machine, a moment after the reply is back)
        deadline = time.monotonic() + 5
        while True:
            names = {th.name for th in threading.enumerate() if s.address in th.name}
            assert names <= {f"flowrt-zmq-server {s.address}",
                             f"flowrt-zmq-handler {s.address}"}
            if f"flowrt-zmq-server {s.address}" in names or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert f"flowrt-zmq-server {s.address}" in names
    finally:
        ch.close()
        s.stop()
