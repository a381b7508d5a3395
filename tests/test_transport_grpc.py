"""The gRPC message transport: framing, round trips, chunking, concurrency, failures."""
from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
import time

import grpc
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from flowrt import errors
from flowrt.plugins.transports import grpc as G
from flowrt.runtime import Runtime
from flowrt.transport import MessageTransport

from _threads import Bg

WAIT = 5.0
SMALL_CHUNK = 64 << 10


def _echo(method: str, header: bytes, buffers: list) -> tuple[bytes, list]:
    return method.encode() + b"|" + header, buffers


def _transport(chunk: int | None = None, limit: int | None = None) -> G.GrpcTransport:
    t = G.GrpcTransport()
    if chunk is not None:
        t.chunk_bytes = chunk
    if limit is not None:
        t.max_message_bytes = limit
    return t


@pytest.fixture
def served():
    """``start(handler, **transport_args) -> (server, channel)``; stopped afterwards."""
    made: list = []

    def start(handler=_echo, chunk=None, limit=None, client_chunk=None, client_limit=None):
        srv = _transport(chunk, limit).serve("127.0.0.1:0", handler)
        client = _transport(client_chunk or chunk, client_limit or limit)
        ch = client.connect(srv.address)
        made.append((srv, ch, client))
        return srv, ch

    yield start
    for srv, ch, client in made:
        ch.close()
        client.close()
        srv.stop()


def _bytes(bufs: list) -> list[bytes]:
    return [bytes(b) for b in bufs]


# -- framing -----------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=64), st.lists(st.binary(max_size=80), max_size=12))
def test_frame_round_trip_and_alignment(header, bufs):
    pieces, total = G.encode_frame(header, bufs)
    frame = b"".join(pieces)
    assert len(frame) == total
    kind, h, out = G.decode_frame(frame, 1 << 20)
    assert kind == G.KIND_MESSAGE and h == header and _bytes(out) == bufs
    base = memoryview(frame)
    for b in out:
        if len(b):  # every non-empty buffer starts 16-byte aligned within the frame
            off = np.frombuffer(b, np.uint8).ctypes.data - np.frombuffer(base, np.uint8).ctypes.data
            assert off % 16 == 0
    for cut in {0, 5, total // 2, total - 1} - {total}:
        if cut >= 0:
            with pytest.raises(G.FrameError):
                G.decode_frame(frame[:cut], 1 << 20)
    with pytest.raises(G.FrameError, match="add up"):
        G.decode_frame(frame + b"\0", 1 << 20)


def test_frame_rejects_foreign_and_oversized_frames():
    with pytest.raises(G.FrameError, match="not a flowrt frame"):
        G.decode_frame(b"\0" * 32, 1 << 20)
    pieces, total = G.encode_frame(b"h", [b"x" * 100])
    with pytest.raises(G.FrameError, match="exceeds the limit of 50 bytes") as e:
        G.decode_frame(b"".join(pieces), 50)
    assert e.value.too_big
    # a prefix that declares absurdly many buffers is refused before anything else
    bogus = struct.pack("<BBBxIQ", 0xF7, 1, 0, 2**31, 0)
    with pytest.raises(G.FrameError, match="buffers") as e:
        G.decode_frame(bogus, 1 << 20)
    assert e.value.too_big


@settings(max_examples=30, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=6), st.integers(1, 97))
def test_chunks_reassemble(bufs, size):
    pieces, total = G.encode_frame(b"head", bufs)
    chunks = list(G._chunks(pieces, size))
    assert all(len(c) == size for c in chunks[:-1]) and 0 < len(chunks[-1]) <= size
    asm = G._Assembler(1 << 20)
    for c in chunks:
        asm.add(c)
    kind, h, out = asm.finish()
    assert h == b"head" and _bytes(out) == bufs


def test_numpy_buffers_of_any_dtype_travel_as_raw_bytes():
    arrays = [np.arange(12, dtype=np.float32).reshape(3, 4),
              np.array([1 + 2j, 3 - 4j], np.complex128),
              np.arange(5, dtype=">i4"), np.array([True, False])]
    pieces, _ = G.encode_frame(b"", arrays)
    _, _, out = G.decode_frame(b"".join(pieces), 1 << 20)
    for a, b in zip(arrays, out):
        np.testing.assert_array_equal(np.frombuffer(b, a.dtype).reshape(a.shape), a)
    with pytest.raises(ValueError, match="not C-contiguous"):
        G.encode_frame(b"", [np.ones((4, 4))[:, ::2]])


# -- round trips -------------------------------------------------------------------------

def test_plugin_registers_the_grpc_scheme():
    from flowrt.plugins.transports import grpc_plugin

    (t,) = grpc_plugin.flowrt_transports()  # declared, imported on first use
    assert t.scheme == "grpc" and isinstance(t.load(), MessageTransport)
    assert isinstance(Runtime().transport("grpc"), G.GrpcTransport)


@pytest.mark.parametrize("bufs", [
    [], [b""], [b"", b"a", b""], [bytes([i]) * i for i in range(100)],
], ids=["none", "one-empty", "empties", "many"])
def test_echo_small(served, bufs):
    srv, ch = served()
    h, out = ch.call("Worker/RunGraph", b"\x01\x02", bufs, timeout=WAIT)
    assert h == b"Worker/RunGraph|\x01\x02"
    assert _bytes(out) == bufs


def test_method_maps_to_grpc_path(served):
    seen = []
    srv, _ = served(lambda m, h, b: (seen.append(m) or h, b))
    with grpc.insecure_channel(srv.address) as raw:
        frame = b"".join(G.encode_frame(b"hdr", [b"payload"])[0])
        reply = raw.unary_unary("/flowrt.Worker/RunGraph")(frame, timeout=WAIT)
    assert seen == ["Worker/RunGraph"]
    _, h, out = G.decode_frame(reply, 1 << 20)
    assert h == b"hdr" and _bytes(out) == [b"payload"]


@pytest.mark.parametrize("size", [SMALL_CHUNK - 200, SMALL_CHUNK, SMALL_CHUNK + 1,
                                  3 * SMALL_CHUNK + 7])
def test_buffers_around_the_chunk_size(served, size):
    srv, ch = served(chunk=SMALL_CHUNK)
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    h, out = ch.call("T/Echo", b"x", [data, b"tail"], timeout=WAIT)
    assert h == b"T/Echo|x"
    np.testing.assert_array_equal(np.frombuffer(out[0], np.uint8), data)
    assert bytes(out[1]) == b"tail"
    assert not srv._pending._items  # any parked reply was fetched


def test_small_request_with_large_reply_is_fetched_in_chunks(served):
    big = np.arange(100_000, dtype=np.float64)
    srv, ch = served(lambda m, h, b: (b"big", [big, b"z"]), chunk=SMALL_CHUNK)
    h, out = ch.call("Worker/RecvTensor", b"", [], timeout=WAIT)
    assert h == b"big" and bytes(out[1]) == b"z"
    np.testing.assert_array_equal(np.frombuffer(out[0], np.float64), big)
    assert not srv._pending._items


def test_64_mib_round_trip(served):
    big = np.random.default_rng(0).random(8 << 20)  # 64 MiB of float64
    srv, ch = served()
    h, out = ch.call("T/Echo", b"h", [big], timeout=30)
    assert h == b"T/Echo|h"
    got = np.frombuffer(out[0], np.float64)
    assert got.shape == big.shape and np.array_equal(got, big)


def test_50_concurrent_calls_that_wait_for_each_other(served):
    n = 50
    arrived = threading.Barrier(n, timeout=WAIT)

    def handler(method, header, bufs):
        arrived.wait()  # no handler returns before all n are running at once
        return header, [bytes(bufs[0]) * 2]

    srv, ch = served(handler)
    calls = [Bg(lambda i=i: ch.call("T/Meet", b"%d" % i, [b"%d" % i], timeout=WAIT))
             for i in range(n)]
    for i, c in enumerate(calls):
        h, out = c.result(WAIT + 2)
        assert h == b"%d" % i and bytes(out[0]) == b"%d" % i * 2


def test_300_handlers_block_at_once_without_deadlock(served):
    n = 300
    arrived = threading.Barrier(n + 1, timeout=10)
    srv, ch = served(lambda m, h, b: (arrived.wait(), (h, b))[1])
    calls = [Bg(lambda: ch.call("T/Meet", b"", [], timeout=15)) for _ in range(n)]
    arrived.wait()  # all n handlers are blocked inside the server together
    assert all(c.result(10) == (b"", []) for c in calls)


# -- failures ----------------------------------------------------------------------------

def test_timeout_raises_deadline_exceeded(served):
    release = threading.Event()
    srv, ch = served(lambda m, h, b: (release.wait(WAIT), (h, b))[1])
    t0 = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError, match=r"T/Slow to 127\.0\.0\.1:\d+"):
        ch.call("T/Slow", b"", [], timeout=0.2)
    assert time.monotonic() - t0 < 2.0
    release.set()
    assert ch.call("T/Echo", b"ok", [], timeout=WAIT)[0] == b"ok"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_address_raises_unavailable_naming_it():
    t = G.GrpcTransport()
    addr = f"127.0.0.1:{_free_port()}"
    ch = t.connect(addr)
    t0 = time.monotonic()
    with pytest.raises(errors.UnavailableError, match=addr.replace(".", r"\.")):
        ch.call("Worker/GetStatus", b"", [], timeout=WAIT)
    assert time.monotonic() - t0 < 3.0
    ch.close()


def test_bad_addresses_are_refused():
    t = G.GrpcTransport()
    with pytest.raises(ValueError, match="host:port"):
        t.connect("nohost")
    srv = t.serve("127.0.0.1:0", _echo)
    try:
        with pytest.raises(errors.UnknownError, match=srv.address):
            t.serve(srv.address, _echo)  # no port sharing
    finally:
        srv.stop()


_CHILD = """
import sys, time
from flowrt.plugins.transports.grpc import GrpcTransport
def handler(method, header, bufs):
    if method == "T/Hang":
        time.sleep(60)
    return header, bufs
srv = GrpcTransport().serve("127.0.0.1:0", handler)
print(srv.address, flush=True)
time.sleep(60)
"""


def test_server_killed_mid_call_fails_promptly():
    proc = subprocess.Popen([sys.executable, "-c", _CHILD], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        line = Bg(proc.stdout.readline).result(30)
        addr = line.strip()
        t = G.GrpcTransport()
        ch = t.connect(addr)
        assert ch.call("T/Echo", b"up", [], timeout=WAIT)[0] == b"up"
        hung = Bg(lambda: ch.call("T/Hang", b"", [], timeout=30))
        time.sleep(0.3)
        assert hung.alive()
        t0 = time.monotonic()
        os.kill(proc.pid, 9)
        err = hung.error(5)
        assert time.monotonic() - t0 < 2.5
        assert isinstance(err, errors.UnavailableError) and addr in str(err)
        with pytest.raises(errors.UnavailableError, match=addr):
            ch.call("T/Echo", b"", [], timeout=WAIT)
        ch.close()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, 9)
        proc.wait(5)
        proc.stdout.close()


def test_handler_crash_is_internal_error_with_reason(served):
    def handler(method, header, bufs):
        raise RuntimeError("kaboom in the handler")

    srv, ch = served(handler)
    with pytest.raises(errors.InternalError, match="kaboom in the handler"):
        ch.call("T/Crash", b"", [], timeout=WAIT)
    with pytest.raises(errors.InternalError, match="kaboom"):
        ch.call("T/Crash", b"", [b"x" * (SMALL_CHUNK * 80)], timeout=WAIT)


@pytest.mark.parametrize("size", [300_000, 3_000_000], ids=["unary", "chunked"])
def test_oversized_message_is_refused_by_the_server(served, size):
    calls = []
    srv, ch = served(lambda m, h, b: (calls.append(m), (h, b))[1], chunk=1 << 20,
                     limit=100_000, client_limit=1 << 30)
    with pytest.raises(errors.ResourceExhaustedError, match="100000"):
        ch.call("T/Big", b"", [bytes(size)], timeout=WAIT)
    assert calls == []  # never half-processed
    assert ch.call("T/Echo", b"ok", [b"x"], timeout=WAIT)[0] == b"ok"


def test_oversized_message_is_refused_by_the_client(served):
    srv, ch = served(limit=1000)
    with pytest.raises(errors.ResourceExhaustedError, match="exceeds the limit of 1000"):
        ch.call("T/Big", b"", [bytes(2000)], timeout=WAIT)


def test_oversized_reply_is_refused(served):
    srv, ch = served(lambda m, h, b: (b"", [bytes(5000)]), limit=1000)
    with pytest.raises(errors.ResourceExhaustedError, match="reply to T/Get"):
        ch.call("T/Get", b"", [], timeout=WAIT)
    srv, ch = served(lambda m, h, b: (b"", [bytes(5000)]), limit=1 << 20, client_limit=1000)
    with pytest.raises(errors.ResourceExhaustedError, match="1000"):
        ch.call("T/Get", b"", [], timeout=WAIT)


def _raw_socket_garbage(addr: str) -> None:
    host, port = addr.rsplit(":", 1)
    rng = np.random.default_rng(7)
    payloads = [rng.bytes(4096), b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + rng.bytes(512),
                b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\0" * 100_000]
    for p in payloads:
        with socket.create_connection((host, int(port)), timeout=WAIT) as s:
            s.settimeout(1.0)
            try:
                s.sendall(p)
                s.recv(100)
            except OSError:
                pass


def test_garbage_on_the_port_then_a_good_call_works(served):
    calls = []
    srv, ch = served(lambda m, h, b: (calls.append(m), (h, b))[1], chunk=SMALL_CHUNK)
    _raw_socket_garbage(srv.address)
    good = b"".join(G.encode_frame(b"h", [b"x" * 10])[0])
    pending = b"".join(G.encode_frame(b"token", [], G.KIND_PENDING)[0])
    with grpc.insecure_channel(srv.address) as raw:
        unary = raw.unary_unary("/flowrt.T/Echo")
        for bad in [b"", b"junk", good[:-1], good + b"!", pending, b"\xf7\x01\x09\x00" + bytes(12),
                    struct.pack("<BBBxIQ", 0xF7, 1, 0, 1, 0) + struct.pack("<Q", 2**60)]:
            with pytest.raises(grpc.RpcError) as e:
                unary(bad, timeout=WAIT)
            assert e.value.code() in (grpc.StatusCode.INTERNAL,
                                      grpc.StatusCode.RESOURCE_EXHAUSTED), bad
        streamed = raw.stream_stream("/flowrt-chunked.T/Echo")
        for bad in [[], [good[:5]], [good[:20], good[20:-3]], [good, b"extra"], [b"nonsense" * 9]]:
            with pytest.raises(grpc.RpcError) as e:
                list(streamed(iter(bad), timeout=WAIT))
            assert e.value.code() == grpc.StatusCode.INTERNAL, bad
        with pytest.raises(grpc.RpcError) as e:
            list(raw.unary_stream(G._FETCH_PATH)(b"no such token", timeout=WAIT))
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as e:
            raw.unary_unary("/other.Service/Method")(good, timeout=WAIT)
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert calls == []
    assert ch.call("T/Echo", b"fine", [b"y"], timeout=WAIT) == (b"fine", [memoryview(b"y")])


def test_stop_fails_calls_in_flight(served):
    release = threading.Event()
    srv, ch = served(lambda m, h, b: (release.wait(10), (h, b))[1])
    inflight = [Bg(lambda: ch.call("T/Hang", b"", [], timeout=10)) for _ in range(3)]
    time.sleep(0.3)
    t0 = time.monotonic()
    srv.stop(grace=0.2)
    for c in inflight:
        assert isinstance(c.error(3), errors.UnavailableError)
    assert time.monotonic() - t0 < 3.0
    release.set()
    with pytest.raises(errors.UnavailableError, match=srv.address):
        ch.call("T/Echo", b"", [], timeout=WAIT)
    srv.stop()  # idempotent


def test_stop_lets_short_calls_finish_within_grace(served):
    srv, ch = served(lambda m, h, b: (time.sleep(0.3), (h, b))[1])
    call = Bg(lambda: ch.call("T/Short", b"done", [], timeout=WAIT))
    time.sleep(0.1)
    srv.stop(grace=2.0)
    assert call.result()[0] == b"done"


def test_channels_are_shared_and_close_when_the_last_handle_does(served):
    release = threading.Event()
    srv, _ = served(lambda m, h, b: (release.wait(WAIT) if m == "T/Hang" else None, (h, b))[1])
    t = G.GrpcTransport()
    a, b = t.connect(srv.address), t.connect(srv.address)
    assert a._shared is b._shared and len(t._channels) == 1
    a.close()
    with pytest.raises(errors.UnavailableError, match="closed"):
        a.call("T/Echo", b"", [], timeout=WAIT)
    assert b.call("T/Echo", b"x", [], timeout=WAIT)[0] == b"x"
    hung = Bg(lambda: b.call("T/Hang", b"", [], timeout=WAIT))
    time.sleep(0.2)
    b.close()  # last handle: the connection closes and the call in flight fails
    assert isinstance(hung.error(3), errors.UnavailableError)
    release.set()
    assert not t._channels
    c = t.connect(srv.address)  # a fresh channel
    assert c.call("T/Echo", b"again", [], timeout=WAIT)[0] == b"again"
    c.close()


# -- call streams --------------------------------------------------------------------------

def _stream_counts(srv: G.GrpcServer, ch: G.GrpcChannel) -> tuple[int, int]:
    """(call streams the server has open, idle ones the channel keeps)."""
    with srv._streams_lock:
        served = len(srv._streams)
    return served, len(ch._shared.idle)


def test_sequential_calls_reuse_one_call_stream(served):
    srv, ch = served()
    for i in range(30):
        h, out = ch.call("T/Echo", b"%d" % i, [b"x" * i], timeout=WAIT)
        assert h == b"T/Echo|%d" % i and _bytes(out) == [b"x" * i]
    assert _stream_counts(srv, ch) == (1, 1)


def test_concurrent_calls_get_their_own_replies(served):
    n = 40
    arrived = threading.Barrier(n, timeout=WAIT)

    def handler(method, header, bufs):
        arrived.wait()  # all n are in flight at once, each on a stream of its own
        time.sleep(0.001 * (int(header) % 7))  # replies come back out of order
        return header, [bytes(bufs[0])[::-1], np.full(int(header), int(header), np.int32)]

    srv, ch = served(handler)
    calls = [Bg(lambda i=i: ch.call("T/Meet", b"%d" % i, [b"p%d" % i], timeout=WAIT))
             for i in range(n)]
    for i, c in enumerate(calls):
        h, (rev, arr) = c.result(WAIT + 2)
        assert h == b"%d" % i and bytes(rev) == (b"p%d" % i)[::-1]
        np.testing.assert_array_equal(np.frombuffer(arr, np.int32), np.full(i, i, np.int32))
    served_n, idle = _stream_counts(srv, ch)
    assert idle == min(n, G.MAX_IDLE_STREAMS)
    # the streams beyond the idle ones were closed: their server threads are free
    _threads_wait(lambda: _stream_counts(srv, ch)[0] == idle)


def _threads_wait(pred, timeout: float = WAIT) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.01)


def test_a_cancelled_call_ends_its_stream_and_the_next_call_works(served):
    release = threading.Event()
    entered = threading.Event()

    def handler(method, header, bufs):
        if method == "T/Block":
            entered.set()
            release.wait(WAIT)
        return header, bufs

    srv, ch = served(handler)
    assert ch.call("T/Echo", b"warm", [], timeout=WAIT)[0] == b"warm"
    cancel = threading.Event()
    blocked = Bg(lambda: ch.call("T/Block", b"", [], cancel=cancel))
    assert entered.wait(WAIT)
    t0 = time.monotonic()
    cancel.set()
    err = blocked.error(WAIT)
    assert isinstance(err, errors.CancelledError) and srv.address in str(err)
    assert time.monotonic() - t0 < 1.0  # the watchdog looks every 100 ms
    # the blocked handler's stream is not reused: the next call runs at once elsewhere
    assert ch.call("T/Echo", b"next", [b"n"], timeout=WAIT) == (b"next", [memoryview(b"n")])
    release.set()
    # a call whose event is already set is never sent
    with pytest.raises(errors.CancelledError, match="T/Echo"):
        ch.call("T/Echo", b"", [], cancel=cancel)


def test_a_deadline_ends_the_stream_and_a_late_reply_reaches_nobody(served):
    release = threading.Event()
    srv, ch = served(lambda m, h, b: (release.wait(WAIT) if m == "T/Slow" else None,
                                      (h, b))[1])
    t0 = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError,
                       match=r"T/Slow to 127\.0\.0\.1:\d+: deadline exceeded after 0.3 s"):
        ch.call("T/Slow", b"late", [], timeout=0.3)
    assert 0.25 < time.monotonic() - t0 < 1.5
    release.set()  # the slow reply goes out now, on a stream its caller gave up
    for i in range(5):
        assert ch.call("T/Echo", b"%d" % i, [], timeout=WAIT)[0] == b"%d" % i
    # short deadlines that are met leave the stream in use
    for i in range(5):
        assert ch.call("T/Echo", b"ok", [], timeout=2.0)[0] == b"ok"
    assert _stream_counts(srv, ch)[1] == 1


def test_transport_failures_end_the_stream_with_the_unary_error_classes(served):
    srv, ch = served(lambda m, h, b: (b"", [bytes(5000)]) if m == "T/Get" else (h, b),
                     limit=4000, client_limit=1 << 20)
    with pytest.raises(errors.ResourceExhaustedError, match="reply to T/Get"):
        ch.call("T/Get", b"", [], timeout=WAIT)
    with pytest.raises(errors.ResourceExhaustedError, match="4000"):
        ch.call("T/Big", b"", [bytes(4500)], timeout=WAIT)
    assert ch.call("T/Echo", b"fine", [b"z"], timeout=WAIT)[0] == b"fine"


def test_garbage_on_the_call_stream_is_refused(served):
    calls = []
    srv, ch = served(lambda m, h, b: (calls.append(m), (h, b))[1])
    good = G._call_message(5, b"T/Echo", G.encode_frame(b"h", [b"x"])[0])
    with grpc.insecure_channel(srv.address) as raw:
        stream = raw.stream_stream(G._CALLS_PATH)
        for bad in [b"", b"short", good[:-1],
                    G._call_message(5, b"", G.encode_frame(b"h")[0]),  # no method
                    struct.pack("<QII", 1, 1000, 0) + b"T",  # the method runs past the end
                    struct.pack("<QII", 1, 2, 7) + bytes(14),  # the zero field is not zero
                    G._call_message(5, b"\xff\xfe", G.encode_frame(b"h")[0]),
                    G._call_message(5, b"T/Echo", G.encode_frame(b"t", (), G.KIND_PENDING)[0])]:
            with pytest.raises(grpc.RpcError) as e:
                list(stream(iter([bad]), timeout=WAIT))
            assert e.value.code() == grpc.StatusCode.INTERNAL, bad
        # a well-formed stream answers each request, in turn, with its call id
        replies = list(stream(iter([good, good.replace(b"\x05", b"\x06", 1)]), timeout=WAIT))
        assert [G._split_call(r, 1 << 20)[0] for r in replies] == [5, 6]
        assert G._split_call(replies[0], 1 << 20)[3] == b"h"
    assert calls == ["T/Echo", "T/Echo"]


def test_unary_calls_when_call_streams_are_off(served):
    srv, ch = served()
    ch._shared.streams = False
    assert ch.call("T/Echo", b"u", [b"1"], timeout=WAIT) == (b"T/Echo|u", [memoryview(b"1")])
    assert _stream_counts(srv, ch) == (0, 0)


def test_stop_ends_idle_streams_at_once_and_a_call_in_flight_after_the_grace(served):
    release = threading.Event()
    srv, ch = served(lambda m, h, b: (release.wait(WAIT) if m == "T/Hang" else None,
                                      (h, b))[1])
    other = G.GrpcTransport().connect(srv.address)
    try:
        for c in (ch, other):  # two clients, each with an idle stream
            assert c.call("T/Echo", b"x", [], timeout=WAIT)[0] == b"x"
        t0 = time.monotonic()
        srv.stop(grace=3.0)  # nothing in flight: idle streams do not hold it up
        assert time.monotonic() - t0 < 1.5
        with pytest.raises(errors.UnavailableError, match=srv.address):
            other.call("T/Echo", b"", [], timeout=WAIT)
    finally:
        other.close()
        release.set()


_RESTARTABLE = """
import sys, time
from flowrt.plugins.transports.grpc import GrpcTransport
def handler(method, header, bufs):
    if method == "T/Hang":
        time.sleep(60)
    return header + sys.argv[2].encode(), bufs
srv = GrpcTransport().serve(sys.argv[1], handler)
print(srv.address, flush=True)
time.sleep(60)
"""


def _serve_child(addr: str, tag: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", _RESTARTABLE, addr, tag],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = Bg(proc.stdout.readline).result(30)
    assert line.strip() == addr
    return proc


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, 9)
    proc.wait(5)
    proc.stdout.close()


def test_a_killed_peer_fails_the_calls_on_its_streams_and_a_restarted_one_is_reached():
    addr = f"127.0.0.1:{_free_port()}"
    first = _serve_child(addr, "-1")
    t = G.GrpcTransport()
    ch = t.connect(addr)
    try:
        for _ in range(3):
            assert ch.call("T/Echo", b"a", [], timeout=WAIT)[0] == b"a-1"
        hung = [Bg(lambda: ch.call("T/Hang", b"", [], timeout=30)) for _ in range(3)]
        time.sleep(0.3)
        assert all(h.alive() for h in hung)
        t0 = time.monotonic()
        os.kill(first.pid, 9)
        for h in hung:  # every pending call fails, naming the address
            err = h.error(5)
            assert isinstance(err, errors.UnavailableError) and addr in str(err)
        assert time.monotonic() - t0 < 2.5
        with pytest.raises(errors.UnavailableError, match=addr):
            ch.call("T/Echo", b"", [], timeout=WAIT)
        _kill(first)
        second = _serve_child(addr, "-2")
        try:
            end = time.monotonic() + 10  # the channel reconnects (backoff up to 2 s)
            while True:
                try:
                    assert ch.call("T/Echo", b"b", [], timeout=WAIT)[0] == b"b-2"
                    break
                except errors.UnavailableError:
                    assert time.monotonic() < end, "no reconnect to the restarted server"
                    time.sleep(0.1)
            assert ch.call("T/Echo", b"c", [], timeout=WAIT)[0] == b"c-2"
        finally:
            _kill(second)
    finally:
        ch.close()
        _kill(first)


def test_the_watchdog_forgets_calls_that_ended_before_their_deadline(served):
    srv, ch = served()
    dog = ch._shared.transport._watchdog
    for i in range(600):
        assert ch.call("T/Echo", b"%d" % i, [], timeout=60)[0] == b"T/Echo|%d" % i
    with dog._cond:
        assert len(dog._heap) <= 4 * dog._timed + 257 and dog._timed == 0
