"""The lean remote step path: requests that need no waiting are answered on the zmq
server's I/O thread (``ServiceHandler.dispatch``, ``Worker.runs_without_blocking``,
``Worker.try_recv_tensors``, ``Rendezvous.take_ready``), cancellable zmq calls, and the
master running a quick pushing partition on its own thread (``first_inline``)."""
from __future__ import annotations

import contextlib
import functools
import threading
import time
from typing import Any, Iterator

import numpy as np
import pytest

import flowrt as tf
import flowrt.testing as ft
from flowrt import errors
from flowrt.executor import DEAD
from flowrt.plugin.services import RunGraphRequest
from flowrt.ir import extract_step_graph
from flowrt.master import Master
from flowrt.partition import partition
from flowrt.placement import place
from flowrt.proto import service_pb2 as pb
from flowrt.rendezvous import Rendezvous, make_key
from flowrt.rpc import (ServiceHandler, WorkerClient, pack, request_context,
                        unpack)
from flowrt.runtime import default_runtime
from flowrt.server import Server
from flowrt.transport import Channel
from flowrt.worker import Worker

from _threads import WAIT, Bg

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"
PS = "/job:ps/replica:0/task:0"
IO_THREAD, HANDLER_THREAD = "flowrt-zmq-server", "flowrt-zmq-handler"


def key(name: str) -> str:
    return make_key(CPU0, 1, CPU1, name)


class _Src:
    """Where a sent tensor lives (as the executor's devices do): ``to_host`` copies it
    to host memory; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def to_host(self, value: Any) -> Any:
        self.calls += 1
        return np.asarray(value) * 10


# -- Rendezvous.take_ready --------------------------------------------------------------
def test_take_ready_pops_one_value_per_ready_key_and_leaves_the_rest():
    r = Rendezvous(3)
    r.send("a", 1)
    r.send("a", 2)
    r.send("c", 3)
    r.send("d", 4)
    assert r.take_ready(["a", "b", "c"]) == [(0, 1), (2, 3)]
    assert len(r) == 2  # the second "a" and the untouched "d"
    assert r.take_ready(["b", "a", "a"]) == [(1, 2)]  # one value per key, in key order
    assert r.take_ready(["a", "b", "c"]) == []
    assert r.take_ready([]) == []
    got = []
    r.recv_async("d", lambda v, e: got.append((v, e)))
    assert got == [(4, None)] and len(r) == 0


def test_take_ready_leaves_waiters_alone():
    r = Rendezvous(4)
    got = []
    r.recv_async("w", lambda v, e: got.append((v, e)))
    assert r.take_ready(["w"]) == [] and got == [] and len(r) == 1
    r.send("w", 5)  # still goes to the waiting receiver, not to the mailbox
    assert got == [(5, None)] and r.take_ready(["w"]) == [] and len(r) == 0


def test_take_ready_raises_the_abort_error():
    r = Rendezvous(5)
    r.send("a", 1)
    err = errors.CancelledError(None, None, "step 5 cancelled by the test")
    r.abort(err)
    with pytest.raises(errors.CancelledError, match="cancelled by the test") as info:
        r.take_ready(["a"])
    assert info.value is err
    with pytest.raises(errors.CancelledError):
        r.take_ready([])


# -- Worker.try_recv_tensors ------------------------------------------------------------
@pytest.fixture
def worker() -> Worker:
    return Worker(default_runtime(), config=tf.ConfigProto(device_count={"CPU": 2}))


def test_try_recv_tensors_unknown_step_and_nothing_ready(worker):
    assert worker.try_recv_tensors(77, [key("x")]) is None
    r = worker.rendezvous_mgr.find_or_create(78)
    r.send(key("other"), (np.float32(1), _Src()))
    assert worker.try_recv_tensors(78, [key("x"), key("y")]) is None
    assert len(r) == 1  # nothing was taken


def test_try_recv_tensors_returns_the_ready_tensors_in_host_memory(worker):
    src = _Src()
    r = worker.rendezvous_mgr.find_or_create(9)
    r.send(key("a"), (np.arange(3, dtype=np.float32), src))
    r.send(key("c"), (DEAD, src))
    got = worker.try_recv_tensors(9, [key("a"), key("b"), key("c")])
    assert [i for i, _ in got] == [0, 2]
    np.testing.assert_array_equal(got[0][1], np.float32([0, 10, 20]))
    assert got[1][1] is DEAD and src.calls == 1  # DEAD is never copied
    # every tensor was taken and the step runs nothing here: its rendezvous is released
    assert worker.rendezvous_mgr.get(9) is None
    assert worker.try_recv_tensors(9, [key("a")]) is None


def test_try_recv_tensors_keeps_the_rendezvous_while_values_are_left(worker):
    r = worker.rendezvous_mgr.find_or_create(10)
    r.send(key("a"), (np.int64(4), _Src()))
    r.send(key("b"), (np.int64(5), _Src()))
    got = worker.try_recv_tensors(10, [key("b")])
    assert [(i, int(v)) for i, v in got] == [(0, 50)]
    assert worker.rendezvous_mgr.get(10) is r and len(r) == 1
    assert [(i, int(v)) for i, v in worker.try_recv_tensors(10, [key("b"), key("a")])] \
        == [(1, 40)]


def test_try_recv_tensors_of_an_aborted_step_is_none(worker):
    err = errors.AbortedError(None, None, "step 11 failed elsewhere")
    worker.abort_step(11, err)
    # a rendezvous made after the abort (a late send) is not read either
    worker.rendezvous_mgr.find_or_create(11).send(key("a"), (np.float32(1), _Src()))
    assert worker.try_recv_tensors(11, [key("a")]) is None
    # a rendezvous aborted on its own: None too (the waiting call reports the error)
    r = worker.rendezvous_mgr.find_or_create(12)
    r.send(key("a"), (np.float32(1), _Src()))
    r.abort(err)
    assert worker.try_recv_tensors(12, [key("a")]) is None
    with pytest.raises(errors.AbortedError, match="failed elsewhere"):
        worker.recv_tensors(11, [key("a")], timeout=1.0)


# -- Worker.runs_without_blocking / is_light ----------------------------------------------
class _Graphs:
    """Test graphs, each registered on a worker as the master would."""

    def __init__(self, worker: Worker):
        self.worker, self.rt = worker, worker.runtime
        self.g = g = tf.Graph()
        with g.as_default():
            a = tf.constant(2.0)
            self.add = a + 3.0
            with tf.device("/cpu:1"):
                self.cross = self.add * 2.0
            q = tf.FIFOQueue(4, tf.float32, shapes=[[]], name="q")
            self.enqueue = q.enqueue([7.0])
            self.dequeue = q.dequeue()
            self.matmul = tf.matmul(tf.constant([[1.0, 2.0]]), tf.constant([[3.0], [4.0]]))

    def register(self, fetches: list[Any], targets: list[Any] = (), session: str = "s"
                 ) -> str:
        ir = extract_step_graph(self.g, [], fetches, list(targets))
        place(ir, self.worker.devices, self.rt)
        return self.worker.register_graph(session, ir, ir.fetches)

    def register_recv_part(self, session: str = "s") -> str:
        """The partition of ``cross`` on CPU:1 alone: it receives from CPU:0."""
        ir = extract_step_graph(self.g, [], [self.cross], [])
        placed = place(ir, self.worker.devices, self.rt)
        (p,) = [p for p in partition(ir, placed, self.rt) if p.device.name == CPU1]
        assert "_Recv" in {n.type for n in p.ir.nodes.values()}
        return self.worker.register_graph(session, p.ir, p.fetches)


def test_a_straight_line_graph_runs_without_blocking(worker):
    gs = _Graphs(worker)
    h = gs.register([gs.add])
    assert worker.runs_without_blocking(h) and worker.is_light(h)
    assert worker.run_graph(RunGraphRequest(h, 1)).outputs == [np.float32(5.0)]


def test_receives_queues_and_expensive_kernels_may_block(worker):
    gs = _Graphs(worker)
    recv = gs.register_recv_part()
    assert not worker.runs_without_blocking(recv) and worker.is_light(recv)
    deq = gs.register([gs.dequeue])
    assert not worker.runs_without_blocking(deq) and worker.is_light(deq)
    mm = gs.register([gs.matmul])  # MatMul is an expensive kernel
    assert not worker.runs_without_blocking(mm) and not worker.is_light(mm)
    # a multi-device registration has no single executor
    ir = extract_step_graph(gs.g, [], [gs.cross], [])
    placed = place(ir, worker.devices, gs.rt)
    both = worker.register_partitions("s", partition(ir, placed, gs.rt), 1)
    assert not worker.runs_without_blocking(both)
    assert worker.run_graph(RunGraphRequest(both, 2)).outputs == [np.float32(10.0)]


def test_unknown_or_deregistered_handles_are_not_quick(worker):
    assert not worker.runs_without_blocking("g999_nope")
    assert not worker.is_light("g999_nope")
    gs = _Graphs(worker)
    h = gs.register([gs.add])
    worker.deregister_graph(h)
    assert not worker.runs_without_blocking(h) and not worker.is_light(h)


# -- ServiceHandler.dispatch ------------------------------------------------------------
@pytest.fixture
def handler(worker) -> ServiceHandler:
    return ServiceHandler(Master(worker.runtime, worker), worker)


def _is_reply(r: Any) -> bool:
    return isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], bytes)


def test_dispatch_answers_get_status_at_once(handler, worker):
    r = handler.dispatch("Worker/GetStatus", *pack(pb.Empty()))
    assert _is_reply(r)
    resp, tensors = unpack(*r, pb.GetStatusResponse)
    assert (resp.incarnation, resp.job, resp.task) == (worker.incarnation, "localhost", 0)
    assert {d.name for d in resp.device} == {d.name for d in worker.devices}
    assert tensors == []


def test_dispatch_answers_unknown_methods_and_bad_headers_at_once(worker):
    for h in (ServiceHandler(Master(worker.runtime, worker), worker),
              ServiceHandler(None, worker)):
        r = h.dispatch("Worker/Nope", *pack(pb.Empty()))
        assert _is_reply(r)
        with pytest.raises(errors.UnimplementedError, match="unknown method 'Worker/Nope'"):
            unpack(*r, pb.Empty)
        r = h.dispatch("Worker/GetStatus", b"\xff\xff\xff not a header", [])
        assert _is_reply(r)
        with pytest.raises(errors.InvalidArgumentError, match="malformed message header"):
            unpack(*r, pb.Empty)
    # a task without a master refuses master calls at once
    r = ServiceHandler(None, worker).dispatch("Master/ListDevices", *pack(pb.Empty()))
    assert _is_reply(r)
    with pytest.raises(errors.UnimplementedError, match="serves no master"):
        unpack(*r, pb.ListDevicesResponse)


def test_dispatch_defers_master_calls(handler):
    req = pack(pb.Empty())
    r = handler.dispatch("Master/ListDevices", *req)
    assert callable(r) and not _is_reply(r)
    got, direct = r(), handler("Master/ListDevices", *req)
    assert _is_reply(got) and got[0] == direct[0]
    resp, _ = unpack(*got, pb.ListDevicesResponse)
    assert CPU0 in {d.name for d in resp.device}


def test_dispatch_runs_a_quick_graph_at_once(handler, worker):
    gs = _Graphs(worker)
    h = gs.register([gs.add])
    r = handler.dispatch("Worker/RunGraph",
                         *pack(pb.RunGraphRequest(graph_handle=h, step_id=21)))
    assert _is_reply(r)
    resp, values = unpack(*r, pb.RunGraphResponse)
    assert list(resp.fetch_position) == [0] and len(values) == 1
    np.testing.assert_array_equal(values[0], np.float32(5.0))


def test_a_quick_graph_whose_step_took_long_is_deferred_from_then_on(handler, worker,
                                                                      monkeypatch):
    gs = _Graphs(worker)
    h = gs.register([gs.add])
    monkeypatch.setattr(handler, "quick_limit_s", 0.0)  # every step "took long"
    for step in (30, 31):
        r = handler.dispatch("Worker/RunGraph",
                             *pack(pb.RunGraphRequest(graph_handle=h, step_id=step)))
        assert _is_reply(r)  # answered at once ...
        # ... and one slow step may be a pause: the graph is demoted after the second
        assert worker.runs_without_blocking(h) == (step == 30)
    later = handler.dispatch("Worker/RunGraph",
                             *pack(pb.RunGraphRequest(graph_handle=h, step_id=32)))
    assert callable(later)
    _, values = unpack(*later(), pb.RunGraphResponse)
    np.testing.assert_array_equal(values[0], np.float32(5.0))


def test_dispatch_defers_a_graph_that_is_not_quick(handler, worker):
    gs = _Graphs(worker)
    mm = gs.register([gs.matmul])
    req = pack(pb.RunGraphRequest(graph_handle=mm, step_id=22))
    r = handler.dispatch("Worker/RunGraph", *req)
    assert callable(r)
    resp, values = unpack(*r(), pb.RunGraphResponse)
    resp2, values2 = unpack(*handler("Worker/RunGraph", *req), pb.RunGraphResponse)
    assert list(resp.fetch_position) == list(resp2.fetch_position) == [0]
    np.testing.assert_array_equal(values[0], [[11.0]])
    np.testing.assert_array_equal(values[0], values2[0])
    # a dequeue may block: deferred; with an element queued, the callable delivers it
    enq, deq = gs.register([], [gs.enqueue]), gs.register([gs.dequeue])
    worker.run_graph(RunGraphRequest(enq, 23))
    r = handler.dispatch("Worker/RunGraph",
                         *pack(pb.RunGraphRequest(graph_handle=deq, step_id=24)))
    assert callable(r)
    _, values = unpack(*r(), pb.RunGraphResponse)
    np.testing.assert_array_equal(values[0], np.float32(7.0))
    # an unknown handle is not quick: deferred, and the callable reports it
    r = handler.dispatch("Worker/RunGraph",
                         *pack(pb.RunGraphRequest(graph_handle="g404_x", step_id=25)))
    assert callable(r)
    with pytest.raises(errors.AbortedError, match="g404_x is not registered"):
        unpack(*r(), pb.RunGraphResponse)


def test_dispatch_reports_a_failing_quick_graph_at_once(handler, worker):
    gs = _Graphs(worker)
    h = gs.register([gs.add])
    req = pb.RunGraphRequest(graph_handle=h, step_id=26)
    req.arg_index.append(-1)
    r = handler.dispatch("Worker/RunGraph", *pack(req, [np.float32(0)]))
    assert _is_reply(r)
    with pytest.raises(errors.InvalidArgumentError, match="bad arg index -1"):
        unpack(*r, pb.RunGraphResponse)


def test_dispatch_recv_tensors_waits_only_when_nothing_was_sent(handler, worker):
    keys = [key("a"), key("b")]
    req = pack(pb.RecvTensorsRequest(step_id=31, key=keys, timeout_in_ms=5000))
    r = handler.dispatch("Worker/RecvTensors", *req)
    assert callable(r)  # nothing sent yet: the answer must wait
    worker.rendezvous_mgr.find_or_create(31).send(keys[1], (np.float32(2.5), _Src()))
    resp, values = unpack(*r(), pb.RecvTensorsResponse)  # the deferred call delivers it
    assert list(resp.index) == [1]
    np.testing.assert_array_equal(values[0], np.float32(25.0))
    # a value already sent: answered at once
    worker.rendezvous_mgr.find_or_create(32).send(keys[0], (np.arange(2.0), _Src()))
    r = handler.dispatch("Worker/RecvTensors",
                         *pack(pb.RecvTensorsRequest(step_id=32, key=keys)))
    assert _is_reply(r)
    resp, values = unpack(*r, pb.RecvTensorsResponse)
    assert list(resp.index) == [0]
    np.testing.assert_array_equal(values[0], [0.0, 10.0])


def test_dispatch_answers_aborts_and_deregistrations_at_once(handler, worker):
    gs = _Graphs(worker)
    h = gs.register([gs.add])
    r = handler.dispatch("Worker/DeregisterGraph",
                         *pack(pb.DeregisterGraphRequest(graph_handle=h)))
    assert _is_reply(r) and not worker.runs_without_blocking(h)
    st = pb.Status(code=errors.CANCELLED, message="stopped by the test")
    r = handler.dispatch("Worker/AbortStep",
                         *pack(pb.AbortStepRequest(step_id=41, status=st)))
    assert _is_reply(r)
    unpack(*r, pb.Empty)
    with pytest.raises(errors.CancelledError, match="stopped by the test"):
        worker.recv_tensors(41, [key("a")], timeout=1.0)


# -- the zmq server: inline replies and handler threads ----------------------------------
@pytest.fixture(scope="module")
def transport():
    from flowrt.plugins.transports.zmq import ZmqTransport

    return ZmqTransport()


class Recorder:
    """A handler with ``dispatch``; records the thread each request ran on.

    ``quick``: answered by ``dispatch``; ``slow``: a callable that runs ``__call__``;
    ``block``: a callable that waits (bounded) for :attr:`release`; ``raise``: dispatch
    raises; ``late_raise``: the callable raises."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []  # (where, method, thread name)
        self.release = threading.Event()
        self.entered = threading.Event()
        self.blocked_done = threading.Event()
        self._lock = threading.Lock()

    def _note(self, where: str, method: str) -> None:
        with self._lock:
            self.seen.append((where, method, threading.current_thread().name))

    def threads(self, where: str, method: str) -> set[str]:
        with self._lock:
            return {t for w, m, t in self.seen if (w, m) == (where, method)}

    def __call__(self, method: str, header: bytes, buffers: list[Any]
                 ) -> tuple[bytes, list[Any]]:
        self._note("call", method)
        return b"called:" + bytes(header), [bytes(b) for b in buffers]

    def _block(self) -> tuple[bytes, list[Any]]:
        self._note("call", "block")
        self.entered.set()
        try:
            released = self.release.wait(WAIT)
        finally:
            self.blocked_done.set()
        return (b"released" if released else b"gave up"), []

    def _late_raise(self) -> tuple[bytes, list[Any]]:
        raise ValueError("the deferred handler broke")

    def dispatch(self, method: str, header: bytes, buffers: list[Any]) -> Any:
        self._note("dispatch", method)
        if method == "may_call":  # whether the server lets this thread make calls
            from flowrt.distributed.rpc import _REQUEST
            return str(getattr(_REQUEST, "may_call", None)).encode(), []
        if method == "quick":
            return b"quick:" + bytes(header), [bytes(b) for b in buffers]
        if method == "raise":
            raise RuntimeError("dispatch broke on purpose")
        if method == "block":
            return self._block
        if method == "late_raise":
            return self._late_raise
        return functools.partial(self, method, header, buffers)


@pytest.fixture
def served(transport):
    """A Recorder served on a free port and a channel to it."""
    h = Recorder()
    s = transport.serve("127.0.0.1:0", h)
    ch = transport.connect(s.address)
    yield h, s, ch
    h.release.set()
    ch.close()
    s.stop()


def test_quick_requests_are_answered_on_the_io_thread(served):
    h, _s, ch = served
    rh, rb = ch.call("quick", b"q1", [b"abc"], timeout=WAIT)
    assert bytes(rh) == b"quick:q1" and [bytes(b) for b in rb] == [b"abc"]
    (t,) = h.threads("dispatch", "quick")
    assert t.startswith(IO_THREAD)
    assert not h.threads("call", "quick")  # __call__ is never needed for it


def test_deferred_requests_run_on_handler_threads(served):
    h, s, ch = served
    rh, rb = ch.call("slow", b"s1", [b"xyz"], timeout=WAIT)
    assert bytes(rh) == b"called:s1" and [bytes(b) for b in rb] == [b"xyz"]
    assert all(t.startswith(IO_THREAD) for t in h.threads("dispatch", "slow"))
    (t,) = h.threads("call", "slow")
    assert t.startswith(HANDLER_THREAD) and s.address in t


def test_a_raising_dispatch_or_callable_is_an_internal_error_naming_the_method(served):
    _h, s, ch = served
    with pytest.raises(errors.InternalError) as info:
        ch.call("raise", b"", [], timeout=WAIT)
    msg = info.value.message
    assert "'raise'" in msg and "dispatch broke on purpose" in msg and s.address in msg
    with pytest.raises(errors.InternalError, match="'late_raise'.*deferred handler broke"):
        ch.call("late_raise", b"", [], timeout=WAIT)
    rh, _ = ch.call("quick", b"still up", [], timeout=WAIT)  # the server keeps serving
    assert bytes(rh) == b"quick:still up"


def test_a_blocked_deferred_call_does_not_hold_quick_ones(served):
    h, _s, ch = served
    blocked = Bg(lambda: ch.call("block", b"", [], timeout=WAIT * 2))
    assert h.entered.wait(WAIT)

    def many(k: int) -> list[bytes]:
        return [bytes(ch.call("quick", f"{k}-{j}".encode(), [], timeout=WAIT)[0])
                for j in range(25)]

    callers = [Bg(functools.partial(many, k)) for k in range(8)]
    for k, c in enumerate(callers):
        assert c.result(WAIT * 2) == [f"quick:{k}-{j}".encode() for j in range(25)]
    assert blocked.alive() and not h.blocked_done.is_set()
    assert all(t.startswith(IO_THREAD) for t in h.threads("dispatch", "quick"))
    (t,) = h.threads("call", "block")
    assert t.startswith(HANDLER_THREAD)
    h.release.set()
    assert bytes(blocked.result()[0]) == b"released"


def test_the_io_thread_may_make_calls_only_for_a_lone_request(served):
    h, _s, ch = served
    assert bytes(ch.call("may_call", b"", [], timeout=WAIT)[0]) == b"True"
    blocked = Bg(lambda: ch.call("block", b"", [], timeout=WAIT * 2))
    assert h.entered.wait(WAIT)
    # another request is in flight: this one must not hold the I/O thread on a call
    assert bytes(ch.call("may_call", b"", [], timeout=WAIT)[0]) == b"False"
    h.release.set()
    assert bytes(blocked.result()[0]) == b"released"
    assert bytes(ch.call("may_call", b"", [], timeout=WAIT)[0]) == b"True"


def test_handlers_without_dispatch_still_work(transport):
    seen = []

    def plain(method: str, header: bytes, buffers: list[Any]) -> tuple[bytes, list[Any]]:
        seen.append(threading.current_thread().name)
        return method.encode() + b":" + bytes(header), [bytes(b)[::-1] for b in buffers]

    s = transport.serve("127.0.0.1:0", plain)
    ch = transport.connect(s.address)
    try:
        rh, rb = ch.call("echo", b"h", [b"123"], timeout=WAIT)
        assert bytes(rh) == b"echo:h" and [bytes(b) for b in rb] == [b"321"]
        assert len(seen) == 1 and seen[0].startswith(HANDLER_THREAD)
    finally:
        ch.close()
        s.stop()


def test_stopping_the_server_fails_a_blocked_deferred_call(served):
    h, s, ch = served
    blocked = Bg(lambda: ch.call("block", b"", [], timeout=WAIT * 2))
    assert h.entered.wait(WAIT)
    t0 = time.monotonic()
    s.stop(0.1)
    e = blocked.error(WAIT)
    assert time.monotonic() - t0 < 3.0
    assert isinstance(e, errors.UnavailableError)
    assert "stopped before the call finished" in e.message and s.address in e.message
    assert not h.blocked_done.is_set()  # the handler itself is still waiting
    h.release.set()
    assert h.blocked_done.wait(WAIT)


# -- cancellable calls ------------------------------------------------------------------
def test_cancelling_a_waiting_zmq_call(served):
    h, s, ch = served
    assert ch.cancellable is True
    cancel = threading.Event()
    call = Bg(lambda: ch.call("block", b"", [], timeout=WAIT * 2, cancel=cancel))
    assert h.entered.wait(WAIT)
    time.sleep(0.05)
    t0 = time.monotonic()
    cancel.set()
    e = call.error(WAIT)
    assert time.monotonic() - t0 < 0.5
    assert isinstance(e, errors.CancelledError)
    assert "'block'" in e.message and "cancelled" in e.message and s.address in e.message
    # the cancelled call's link is closed rather than reused, so that the server sees its
    # caller go (and releases the request); later calls take a new link
    assert len(ch._idle) == 0
    h.release.set()
    assert h.blocked_done.wait(WAIT)
    time.sleep(0.05)
    for i in range(3):
        rh, rb = ch.call("quick", f"after {i}".encode(), [b"p"], timeout=WAIT,
                         cancel=threading.Event())
        assert bytes(rh) == f"quick:after {i}".encode() and [bytes(b) for b in rb] == [b"p"]


def test_a_cancel_set_beforehand_stops_the_call_at_once(served):
    _h, _s, ch = served
    cancel = threading.Event()
    cancel.set()
    t0 = time.monotonic()
    with pytest.raises(errors.CancelledError):
        ch.call("block", b"", [], timeout=WAIT, cancel=cancel)
    assert time.monotonic() - t0 < 0.5


@pytest.mark.parametrize("streamed", [False, True])
def test_cancelling_a_waiting_grpc_call(streamed):
    from flowrt.plugins.transports.grpc import GrpcTransport

    entered, release, done = threading.Event(), threading.Event(), threading.Event()

    def handler(method: str, header: bytes, buffers: list[Any]) -> tuple[bytes, list[Any]]:
        if method == "block":
            entered.set()
            try:
                release.wait(WAIT)
            finally:
                done.set()
            return b"released", []
        return b"ok:" + bytes(header), [bytes(b) for b in buffers]

    t = GrpcTransport()
    if streamed:  # the request goes in chunks: a streamed call
        t.chunk_bytes = 4096
    s = t.serve("127.0.0.1:0", handler)
    ch = t.connect(s.address)
    payload = [b"x" * (20000 if streamed else 10)]
    try:
        cancel = threading.Event()
        call = Bg(lambda: ch.call("block", b"", payload, timeout=WAIT * 2, cancel=cancel))
        assert entered.wait(WAIT)
        t0 = time.monotonic()
        cancel.set()
        e = call.error(WAIT)
        assert time.monotonic() - t0 < 0.5
        assert isinstance(e, errors.CancelledError)
        assert "block" in e.message and "cancelled" in e.message and s.address in e.message
        release.set()
        assert done.wait(WAIT)
        # the channel goes on working, with or without a cancel event
        for k in range(2):
            rh, rb = ch.call("echo", f"{k}".encode(), payload, timeout=WAIT,
                             cancel=threading.Event() if k else None)
            assert bytes(rh) == f"ok:{k}".encode() and bytes(rb[0]) == payload[0]
    finally:
        release.set()
        ch.close()
        s.stop()


def test_which_channels_can_cancel(transport):
    from flowrt.plugins.transports.grpc import GrpcTransport

    assert Channel.cancellable is False
    port = ft.free_port()
    g = GrpcTransport().connect(f"127.0.0.1:{port}")  # connects lazily: no server needed
    try:
        assert g.cancellable is True
    finally:
        g.close()
    s = transport.serve("127.0.0.1:0", lambda m, h, b: (h, b))
    clients = [WorkerClient(transport, s.address), WorkerClient(GrpcTransport(), s.address)]
    try:
        assert [c.cancellable for c in clients] == [True, True]
    finally:
        for c in clients:
            c.close()
        s.stop()


# -- the master's inline partition ---------------------------------------------------------
@contextlib.contextmanager
def _cluster(protocol: str, **kw: Any) -> Iterator[tuple[Server, Server]]:
    """A ps and a worker server, both stopped at the end."""
    cluster = ft.cluster_addresses(protocol, {"ps": 1, "worker": 1})
    ps = Server(cluster, "ps", 0, protocol=protocol, **kw)
    try:
        w = Server(cluster, "worker", 0, protocol=protocol, **kw)
        try:
            yield ps, w
        finally:
            w.stop()
    finally:
        ps.stop()


def _compiled(server: Server, sess: tf.Session, fetch: Any) -> Any:
    """The master's compiled step of ``sess`` that fetches ``fetch``."""
    ms = server.master.session(sess._handle)
    (cs,) = [cs for cs in ms._callables.values() if cs.fetches == (fetch.name,)]
    return cs


def _record_runs(server: Server, job: str) -> list[tuple[str, bool]]:
    """Record (thread name, had a cancel event) for each RunGraph the master sends to
    ``job``'s task 0."""
    client = server.master.worker_for(job, 0)
    seen: list[tuple[str, bool]] = []
    orig = client.run_graph

    def run_graph(request: RunGraphRequest) -> Any:
        seen.append((threading.current_thread().name, request.cancel is not None))
        return orig(request)

    client.run_graph = run_graph
    return seen


def _var_graph() -> tuple[tf.Graph, Any, Any, Any]:
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(1.5, name="v")
            inc = v.assign_add(1.0)
        with tf.device("/job:worker/task:0"):
            y = v + 1.0
    return g, v, inc, y


def test_a_quick_pushing_partition_runs_on_the_masters_thread():
    with _cluster("zmq") as (ps, w):
        g, v, inc, y = _var_graph()
        cfg = tf.ConfigProto(operation_timeout_in_ms=20000)
        with tf.Session(w.target, graph=g, config=cfg) as sess:
            sess.run(v.initializer)
            seen = _record_runs(w, "ps")
            expect = 1.5
            for k in range(30):
                assert sess.run(y) == np.float32(expect + 1.0)
                if k % 3 == 2:
                    expect = float(sess.run(inc))
            cs = _compiled(w, sess, y)
            assert cs.first_inline is not None
            assert cs.parts[cs.first_inline][0] is w.master.worker_for("ps", 0)
            assert cs.push  # the ps partition pushes its tensor with the reply
            runs = [s for s in seen if s[1]]
            assert len(runs) == 30  # every step of y ran the ps part with a cancel event
            assert all(not t.startswith("flowrt-partition") for t, _ in runs)
            # the one-task steps (inc) are not inline
            assert _compiled(w, sess, inc).first_inline is None


def test_a_dequeueing_ps_partition_is_not_run_inline():
    with _cluster("zmq") as (ps, w):
        g = tf.Graph()
        with g.as_default():
            with tf.device("/job:ps/task:0"):
                q = tf.FIFOQueue(8, tf.float32, shapes=[[]], name="q")
                x = tf.placeholder(tf.float32, [])
                enq = q.enqueue([x])
                d = q.dequeue()
            with tf.device("/job:worker/task:0"):
                y = d + 1.0
        cfg = tf.ConfigProto(operation_timeout_in_ms=20000)
        with tf.Session(w.target, graph=g, config=cfg) as sess:
            seen = _record_runs(w, "ps")
            for k in range(5):
                sess.run(enq, {x: float(k)})
            got = [sess.run(y) for _ in range(5)]
            assert got == [np.float32(k + 1.0) for k in range(5)]
            cs = _compiled(w, sess, y)
            assert cs.push and cs.first_inline is None  # it pushes but may block
            assert len(seen) == 10 and not any(c for _t, c in seen)


def test_the_inline_partition_over_grpc():
    with _cluster("grpc") as (ps, w):
        g, v, _inc, y = _var_graph()
        with tf.Session(w.target, graph=g) as sess:
            sess.run(v.initializer)
            for _ in range(5):
                assert sess.run(y) == np.float32(2.5)
            cs = _compiled(w, sess, y)
            # grpc calls can be cancelled too: the master's thread runs the ps part
            assert cs.push and cs.first_inline is not None


def test_a_stalled_ps_fails_the_inline_step_in_bounded_time():
    """The ps answers its quick RunGraph on its I/O thread; stalling that call stalls the
    whole ps server, so the health checker fails the step and cancels the master's call:
    the step raises UnavailableError naming the ps task instead of hanging."""
    stall = threading.Event()
    entered = threading.Event()
    with _cluster("zmq", health_check_period=0.2) as (ps, w):
        orig = ps.worker.run_graph

        def stalled(*a: Any, **k: Any) -> Any:
            entered.set()
            stall.wait(WAIT * 3)
            return orig(*a, **k)

        try:
            g, v, _inc, y = _var_graph()
            cfg = tf.ConfigProto(operation_timeout_in_ms=20000)
            with tf.Session(w.target, graph=g, config=cfg) as sess:
                sess.run(v.initializer)
                assert sess.run(y) == np.float32(2.5)
                assert _compiled(w, sess, y).first_inline is not None
                ps.worker.run_graph = stalled
                t0 = time.monotonic()
                step = Bg(lambda: sess.run(y))
                e = step.error(WAIT * 2)
                elapsed = time.monotonic() - t0
                assert entered.is_set()
                assert isinstance(e, errors.UnavailableError), repr(e)
                # the health checker's error, not the cancelled call's
                assert PS in e.message and "health check failed" in e.message
                assert elapsed < 8.0, elapsed
                stall.set()  # let the ps answer again before the session closes
        finally:
            stall.set()


def test_a_stopped_ps_fails_the_inline_step_in_bounded_time():
    with _cluster("zmq", health_check_period=0.2) as (ps, w):
        g, v, _inc, y = _var_graph()
        cfg = tf.ConfigProto(operation_timeout_in_ms=20000)
        with tf.Session(w.target, graph=g, config=cfg) as sess:
            sess.run(v.initializer)
            assert sess.run(y) == np.float32(2.5)
            assert _compiled(w, sess, y).first_inline is not None
            ps.stop()
            t0 = time.monotonic()
            e = Bg(lambda: sess.run(y)).error(WAIT * 2)
            assert time.monotonic() - t0 < 8.0
            assert isinstance(e, errors.UnavailableError), repr(e)
            assert PS in e.message and ps.target in e.message


# -- master steps run on the zmq server's I/O thread ---------------------------------------
def _session_of(server: Server, sess: tf.Session) -> Any:
    return server.master.session(sess._handle)


def _callable_id(server: Server, sess: tf.Session, fetch: Any) -> int:
    ms = _session_of(server, sess)
    (cid,) = [cid for cid, cs in ms._callables.items() if cs.fetches == (fetch.name,)]
    return cid


def test_which_callables_run_inline():
    with _cluster("zmq") as (ps, w):
        g, v, inc, y = _var_graph()
        with g.as_default():
            with tf.device("/job:worker/task:0"):
                local = tf.constant(3.0) * 2.0  # straight through, on the master's task
                mm = tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]))  # an expensive kernel
            with tf.device("/job:ps/task:0"):
                q = tf.FIFOQueue(4, tf.float32, shapes=[[]], name="q")
                enq = q.enqueue([5.0])
                deq = q.dequeue() + 1.0
        with tf.Session(w.target, graph=g) as sess:
            sess.run([v.initializer, enq])
            assert sess.run(y) == np.float32(2.5)
            assert sess.run(inc) == np.float32(2.5)
            assert sess.run(local) == np.float32(6.0)
            np.testing.assert_array_equal(sess.run(mm), np.full((2, 2), 2.0, np.float32))
            assert sess.run(deq) == np.float32(6.0)
            ms = _session_of(w, sess)
            inline = {t.name: ms.runs_inline(_callable_id(w, sess, t))
                      for t in (y, inc, local, mm, deq)}
            # y: the inline pushing ps part, then a light local part; local: straight
            # through on this task. inc runs wholly on the ps (a remote call the master
            # waits for on a partition thread); mm has an expensive kernel; deq's ps
            # part may block
            assert inline == {y.name: True, inc.name: False, local.name: True,
                              mm.name: False, deq.name: False}
            assert not ms.runs_inline(10 ** 9)  # no such callable


def test_an_inline_step_runs_on_the_io_thread_and_is_demoted_when_slow(monkeypatch):
    with _cluster("zmq") as (ps, w):
        g, v, inc, y = _var_graph()
        with tf.Session(w.target, graph=g) as sess:
            sess.run(v.initializer)
            seen = _record_runs(w, "ps")
            for _ in range(5):
                assert sess.run(y) == np.float32(2.5)
            # the ps part was called from the zmq server's leader: no hand-off to a
            # handler thread, and none to a partition thread
            assert len(seen) == 5
            assert all(t.startswith(IO_THREAD) and w.target.split("//")[1] in t
                       for t, _ in seen), seen
            cid = _callable_id(w, sess, y)
            ms = _session_of(w, sess)
            monkeypatch.setattr(ServiceHandler, "quick_limit_s", 0.0)  # all "took long"
            del seen[:]
            for k in range(4):
                assert sess.run(y) == np.float32(2.5)
                assert ms.runs_inline(cid) == (k == 0)  # demoted at the second
            assert [t.startswith(IO_THREAD) for t, _ in seen] == [True, True, False, False]
            assert all(t.startswith(HANDLER_THREAD) for t, _ in seen[2:])


def test_dispatch_answers_an_inline_run_callable_at_once():
    with _cluster("zmq") as (ps, w):
        g, v, inc, y = _var_graph()
        with tf.Session(w.target, graph=g) as sess:
            sess.run(v.initializer)
            assert sess.run(y) == np.float32(2.5) and sess.run(inc) == np.float32(2.5)
            h = ServiceHandler(w.master, w.worker)
            # only a transport that says its thread may make calls gets inline steps
            req = pack(pb.RunCallableRequest(session_handle=sess._handle,
                                             handle=_callable_id(w, sess, y)))
            request_context(None)
            r = h.dispatch("Master/RunCallable", *req)
            assert callable(r)
            # v is 2.5 after inc: y is 3.5
            np.testing.assert_array_equal(unpack(*r(), pb.RunCallableResponse)[1],
                                          [np.float32(3.5)])
            request_context(None, may_call=True)
            for fetch, at_once in ((y, True), (inc, False)):
                req = pack(pb.RunCallableRequest(session_handle=sess._handle,
                                                 handle=_callable_id(w, sess, fetch)))
                r = h.dispatch("Master/RunCallable", *req)
                assert _is_reply(r) == at_once and callable(r) != at_once
                _, values = unpack(*(r if at_once else r()), pb.RunCallableResponse)
                assert len(values) == 1 and values[0] >= np.float32(2.5)
            # an unknown session is answered at once with the master's error
            r = h.dispatch("Master/RunCallable", *pack(pb.RunCallableRequest(
                session_handle="nope", handle=1)))
            assert _is_reply(r)
            with pytest.raises(errors.AbortedError, match="nope"):
                unpack(*r, pb.RunCallableResponse)
            request_context(None)


def test_a_late_inline_call_hands_the_lead_over():
    """The ps takes its time with the inline step's RunGraph: after HANDOFF_MS the
    worker's leader hands the lead over, so the worker's server answers other
    requests while the step waits; the step then finishes with the right value."""
    from flowrt.plugins.transports import zmq as zmq_transport
    release = threading.Event()
    entered = threading.Event()
    with _cluster("zmq") as (ps, w):
        g, v, _inc, y = _var_graph()
        cfg = tf.ConfigProto(operation_timeout_in_ms=20000)
        with tf.Session(w.target, graph=g, config=cfg) as sess:
            sess.run(v.initializer)
            assert sess.run(y) == np.float32(2.5)
            assert _session_of(w, sess).runs_inline(_callable_id(w, sess, y))
            orig = ps.worker.run_graph

            def held(*a: Any, **k: Any) -> Any:
                entered.set()
                release.wait(WAIT)
                return orig(*a, **k)

            ps.worker.run_graph = held
            try:
                step = Bg(lambda: sess.run(y))
                assert entered.wait(WAIT)
                time.sleep(zmq_transport.HANDOFF_MS / 1000 * 4)
                # the worker's server still answers: another thread leads
                status = WorkerClient(zmq_transport.ZmqTransport(), w.target.split("//")[1])
                try:
                    t0 = time.monotonic()
                    assert status.get_status(timeout=WAIT).task == 0
                    assert time.monotonic() - t0 < WAIT / 2
                finally:
                    status.close()
                assert step.alive()
                release.set()
                assert step.result() == np.float32(2.5)
            finally:
                release.set()
                ps.worker.run_graph = orig
            # the thread that handed over went back to the pool; steps go on inline
            for _ in range(3):
                assert sess.run(y) == np.float32(2.5)


# -- the lean worker paths: a pushing partition, a part whose receives were pushed --------
def _count(obj: Any, name: str) -> list[int]:
    """Count the calls of method ``name`` of ``obj`` (an instance)."""
    n = [0]
    orig = getattr(obj, name)

    def counted(*a: Any, **k: Any) -> Any:
        n[0] += 1
        return orig(*a, **k)

    setattr(obj, name, counted)
    return n


def test_a_pushing_partition_and_its_receiver_run_outside_the_step_tables():
    with _cluster("zmq") as (ps, w):
        g, v, inc, y = _var_graph()
        with tf.Session(w.target, graph=g) as sess:
            sess.run(v.initializer)
            pushing = _count(ps.worker, "_run_pushing")
            ready = _count(w.worker, "_run_ready")
            expect = 1.5
            for k in range(6):
                assert sess.run(y) == np.float32(expect + 1.0)
                if k % 2:
                    expect = float(sess.run(inc))
            # every step of y: the ps part ran with a rendezvous of its own, worker 0's
            # part on the values pushed with the ps's reply; no step is left behind
            assert pushing[0] == 6 and ready[0] == 6
            assert not ps.worker.rendezvous_mgr._table and not ps.worker._running_steps
            assert not w.worker.rendezvous_mgr._table and not w.worker._running_steps
            # a traced step takes the general path, with the ps's nodes in its stats
            meta = tf.RunMetadata()
            assert sess.run(y, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                            run_metadata=meta) == np.float32(expect + 1.0)
            assert pushing[0] == 6 and ready[0] == 6
            devices = {d.device for d in meta.step_stats.dev_stats}
            assert any("/job:ps/" in d for d in devices), devices
            # an abort that came first still fails the step on the ps
            part = _compiled(w, sess, y).parts[_compiled(w, sess, y).first_inline]
            err = errors.AbortedError(None, None, "step 77 failed elsewhere")
            ps.worker.abort_step(77, err)
            with pytest.raises(errors.AbortedError, match="failed elsewhere"):
                ps.worker.run_graph(RunGraphRequest(part.handle, 77, push_to=("worker", 0)))
            assert pushing[0] == 7


def test_a_partition_that_also_sends_to_a_third_task_is_pulled_from_as_before():
    cluster = ft.cluster_addresses("zmq", {"ps": 1, "worker": 2})
    servers = [Server(cluster, j, i, protocol="zmq")
               for j, i in (("ps", 0), ("worker", 0), ("worker", 1))]
    try:
        ps, w0, _w1 = servers
        g = tf.Graph()
        with g.as_default():
            with tf.device(PS):
                v = tf.Variable(1.5, name="v")
            with tf.device("/job:worker/task:0"):
                y0 = v + 1.0
            with tf.device("/job:worker/task:1"):
                y1 = v * 2.0
        with tf.Session(w0.target, graph=g) as sess:
            sess.run(v.initializer)
            pushing = _count(ps.worker, "_run_pushing")
            for _ in range(3):
                assert sess.run([y0, y1]) == [np.float32(2.5), np.float32(3.0)]
            # worker 1 pulls its value from the ps's rendezvous: not the lean path
            assert pushing[0] == 0
            assert not ps.worker.rendezvous_mgr._table
    finally:
        for s in reversed(servers):
            s.stop()


def test_a_step_that_calls_its_own_master_from_a_py_func_does_not_deadlock():
    """A py_func step runs straight through, so the zmq leader runs it inline; its
    Python calls this same server. The leader's call hands the lead over once its reply
    is late, and another thread takes the nested request in."""
    with _cluster("zmq") as (_ps, w):
        g2 = tf.Graph()
        with g2.as_default(), tf.device("/job:worker/task:0"):
            z = tf.constant(4.0) + 1.0
        with tf.Session(w.target, graph=g2) as inner:
            g = tf.Graph()
            with g.as_default(), tf.device("/job:worker/task:0"):
                y = tf.py_func(lambda x: np.float32(x + inner.run(z)), [tf.constant(1.0)],
                               tf.float32)
            with tf.Session(w.target, graph=g) as sess:
                steps = Bg(lambda: [sess.run(y) for _ in range(3)])
                assert steps.result(WAIT * 2) == [np.float32(6.0)] * 3
