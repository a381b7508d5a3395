"""A process exits promptly while a thread is still blocked in ``Session.run``.

TensorFlow's processes exit (in about 5 s at worst) when their main thread ends while a
*daemon* thread waits in ``sess.run(queue.dequeue())``; a flowrt process must too. Each
test runs a real client process (``python -c CLIENT``) that blocks a thread on an empty
queue, prints a marker and lets its main thread return; the test asserts that the
process then exits within :data:`EXIT_BOUND` seconds, with status 0, the marker on
stdout and no traceback on stderr.

The queue is local (``""`` target), on another ``tf.train.Server`` of the same process,
or on a ps task served by a separate ``flowrt server`` process (grpc and zmq) reached
through an in-process worker server (the chief of a SyncReplicasOptimizer program) or
through the ps's own master. In the last two cases the step the client left blocked on
the ps must be cancelled when the client exits: a dequeue left waiting there would take
the next element enqueued by anyone else.

Every wait is bounded; every process a test starts is killed (by its pid) at the end.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

import flowrt as tf
import flowrt.testing as ft
from flowrt import threads
from _threads import Bg

#: seconds a client process may take to exit once it printed its marker (TensorFlow's
#: take about 5 s at worst; flowrt's take well under one)
EXIT_BOUND = 10.0
#: seconds a client process may take to start (import flowrt, connect) and block
START_BOUND = 60.0

#: the client: ``python -c CLIENT MODE PROTOCOL CLUSTER_JSON QUEUE_NAME``
CLIENT = r'''
import atexit, json, sys, threading, time


def late_step():
    """An atexit handler registered before flowrt's: it runs after flowrt cancelled the
    steps in flight, on the main thread, and may still run steps (over both tasks)."""
    if mode == "same_process":
        g, enq, deq = dequeue_graph("/job:ps/task:0")
        cfg = tf.ConfigProto(operation_timeout_in_ms=5000)
        with tf.Session(servers[-1].target, graph=g, config=cfg) as s:
            s.run(enq)
            print("LATE", s.run(deq), flush=True)


atexit.register(late_step)
import flowrt as tf

mode, protocol, cluster, name = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]


def dequeue_graph(device):
    """A graph that dequeues from the shared queue ``name`` on ``device``."""
    g = tf.Graph()
    with g.as_default(), tf.device(device):
        q = tf.FIFOQueue(4, tf.float32, shapes=[[]], shared_name=name)
        return g, q.enqueue(5.0), q.dequeue()


servers = []
if mode == "inter_op":         # in-process, with an inter-op pool for expensive kernels
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [64, 64])
        total = tf.add_n([tf.reduce_sum(tf.matmul(x + float(i), x)) for i in range(4)])
    sess = tf.Session("", graph=g, config=tf.ConfigProto(inter_op_parallelism_threads=4))
    feed = {x: [[1.0] * 64] * 64}
    sess.run(total, feed)  # the pool exists before the main thread ends

    def late():
        time.sleep(0.5)
        print("LATE", sess.run(total, feed), flush=True)

    threading.Thread(target=late, daemon=False).start()
    print("BLOCKED", flush=True)
    sys.exit(0)
if mode == "local":            # the in-process target
    g, enq, deq = dequeue_graph(None)
    sess = tf.Session("", graph=g)
elif mode == "ps_master":      # straight to the ps process's master
    g, enq, deq = dequeue_graph("/job:ps/task:0")
    sess = tf.Session(f"{protocol}://{cluster['ps'][0]}", graph=g,
                      config=tf.ConfigProto(device_filters=["/job:ps"]))
else:                          # through a worker server of this process
    spec = tf.train.ClusterSpec(cluster)
    if mode == "same_process":  # ... and the ps is a server of this process too
        servers.append(tf.train.Server(spec, "ps", 0, protocol=protocol))
    servers.append(tf.train.Server(spec, "worker", 0, protocol=protocol))
    g, enq, deq = dequeue_graph("/job:ps/task:0")
    sess = tf.Session(servers[-1].target, graph=g)

if mode == "non_daemon":
    # a non-daemon thread keeps working after the main thread returned (the process
    # waits for it): its steps must still run, and the process then exits
    def late():
        time.sleep(0.5)
        sess.run(enq)
        print("LATE", sess.run(deq), flush=True)

    threading.Thread(target=late, daemon=False).start()
    print("BLOCKED", flush=True)
else:
    started = threading.Event()

    def blocked():
        started.set()
        sess.run(deq)  # the queue is empty: blocks until the process exits
        print("UNEXPECTED: the dequeue returned", flush=True)

    threading.Thread(target=blocked, daemon=True).start()
    started.wait(10)
    time.sleep(0.3)  # let the step reach the empty queue
    print("BLOCKED", flush=True)
'''


class Client:
    """One client process; :meth:`wait_exit` asserts the exit bounds."""

    def __init__(self, mode: str, protocol: str = "grpc",
                 cluster: dict[str, list[str]] | None = None, name: str = "q"):
        self.mode, self.protocol = mode, protocol
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CLIENT, mode, protocol, json.dumps(cluster or {}), name],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            text=True)
        self.out: list[str] = []
        self.err: list[str] = []
        self.marked = threading.Event()
        self.marked_at = 0.0
        self._readers = [threading.Thread(target=self._read, args=(self.proc.stdout, self.out),
                                          daemon=True),
                         threading.Thread(target=self._read, args=(self.proc.stderr, self.err),
                                          daemon=True)]
        for t in self._readers:
            t.start()

    def _read(self, stream: Any, into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))
            if line.startswith("BLOCKED") and not self.marked.is_set():
                self.marked_at = time.monotonic()
                self.marked.set()

    def describe(self) -> str:
        return (f"client {self.mode}/{self.protocol} (rc {self.proc.returncode}):\n"
                f"stdout: {self.out!r}\nstderr: " + "\n".join(self.err[-40:]))

    def wait_exit(self) -> float:
        """Wait for the marker, then for the exit; returns the seconds from marker to
        exit. Fails (after killing the process) when either takes too long."""
        try:
            if not self.marked.wait(START_BOUND):
                pytest.fail(f"no marker within {START_BOUND:g} s; {self.describe()}")
            try:
                self.proc.wait(EXIT_BOUND)
            except subprocess.TimeoutExpired:
                pytest.fail(f"the process did not exit within {EXIT_BOUND:g} s of its "
                            f"main thread's end; {self.describe()}")
            took = time.monotonic() - self.marked_at
            for t in self._readers:
                t.join(5.0)
            assert self.proc.returncode == 0, self.describe()
            assert not any("Traceback" in line for line in self.err), self.describe()
            assert not any("UNEXPECTED" in line for line in self.out), self.describe()
            return took
        finally:
            self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10.0)


def _take_one_from(protocol: str, ps_address: str, name: str) -> float:
    """Enqueue 7 into the ps's queue ``name`` and dequeue one element (bounded): a
    dequeue a dead client left waiting on the ps would take the 7 first."""
    g = tf.Graph()
    with g.as_default(), tf.device("/job:ps/task:0"):
        q = tf.FIFOQueue(4, tf.float32, shapes=[[]], shared_name=name)
        enq, deq = q.enqueue(7.0), q.dequeue()
    cfg = tf.ConfigProto(device_filters=["/job:ps"], operation_timeout_in_ms=3000)
    with tf.Session(f"{protocol}://{ps_address}", graph=g, config=cfg) as sess:
        sess.run(enq)
        return float(sess.run(deq))


@pytest.fixture(scope="module", params=["grpc", "zmq"])
def ps(request):
    """A ``flowrt server`` process serving ``/job:ps/task:0`` of a ps + worker cluster
    (the worker's address is free for a client's in-process server)."""
    protocol = request.param
    cluster = ft.cluster_addresses(protocol, {"ps": 1, "worker": 1})
    proc = ft.ServerProcess(cluster, "ps", 0, protocol, timeout=60.0)
    yield protocol, cluster
    proc.stop()


def test_local_session_daemon_thread_blocked_on_dequeue():
    Client("local").wait_exit()


@pytest.mark.parametrize("protocol", ["grpc", "zmq", "inproc"])
def test_servers_of_the_same_process_daemon_thread_blocked(protocol):
    """The queue is on another ``tf.train.Server`` of the client's process: the step
    runs over two tasks (one of its parts on the partition pool). An ``atexit``
    handler registered before flowrt's runs a step after flowrt cancelled the blocked
    one."""
    cluster = ft.cluster_addresses(protocol, {"ps": 1, "worker": 1})
    c = Client("same_process", protocol, cluster)
    c.wait_exit()
    # an atexit handler that ran after the cancellation could still run a step; its
    # dequeue got its own element (the cancelled one did not take it)
    late = [float(line.split()[1]) for line in c.out if line.startswith("LATE ")]
    assert late == [5.0], c.describe()


@pytest.mark.parametrize("mode", ["worker_server", "ps_master"])
def test_daemon_thread_blocked_on_a_ps_process(ps, mode):
    """The queue is on a ps process, reached through this process's worker server
    (the SyncReplicasOptimizer chief's case) or through the ps's master. The process
    exits, and the dequeue it left on the ps was cancelled."""
    protocol, cluster = ps
    name = f"q_{mode}"
    Client(mode, protocol, cluster, name).wait_exit()
    assert _take_one_from(protocol, cluster["ps"][0], name) == 7.0


def test_non_daemon_thread_still_runs_steps_after_the_main_thread_ended(ps):
    """The interpreter joins non-daemon threads before anything is cancelled: a step
    such a thread starts after the main thread ended runs (over both tasks) as usual."""
    protocol, cluster = ps
    c = Client("non_daemon", protocol, cluster, "q_late")
    c.wait_exit()
    late = [float(line.split()[1]) for line in c.out if line.startswith("LATE ")]
    assert late == [5.0], c.describe()
    assert _take_one_from(protocol, cluster["ps"][0], "q_late") == 7.0


def test_non_daemon_thread_runs_steps_on_the_inter_op_pool_after_the_main_thread_ended():
    c = Client("inter_op")
    c.wait_exit()
    late = [float(line.split()[1]) for line in c.out if line.startswith("LATE ")]
    assert late == [64.0 ** 3 * (1 + 2 + 3 + 4)], c.describe()


def test_cancelled_steps_stop_on_every_task():
    """What the exit hook does, in this process: a step over two tasks (in-process
    servers) blocked on the ps's empty queue is aborted there too, so the next element
    goes to the next dequeue; the exit hook is bounded by its deadline."""
    from flowrt import master as master_mod

    cluster = ft.cluster_addresses("inproc", {"ps": 1, "worker": 1})
    spec = tf.train.ClusterSpec(cluster)
    servers = [tf.train.Server(spec, "ps", 0, protocol="inproc"),
               tf.train.Server(spec, "worker", 0, protocol="inproc")]
    try:
        g = tf.Graph()
        with g.as_default(), tf.device("/job:ps/task:0"):
            q = tf.FIFOQueue(4, tf.float32, shapes=[[]], shared_name="q_cancel")
            enq, deq = q.enqueue(7.0), q.dequeue()
        cfg = tf.ConfigProto(operation_timeout_in_ms=5000)
        with tf.Session(servers[1].target, graph=g, config=cfg) as sess:
            blocked = Bg(lambda: sess.run(deq))
            time.sleep(0.3)
            assert blocked.alive()
            master_mod._cancel_steps_at_exit(time.monotonic() + 2.0)
            e = blocked.error(5.0)
            assert isinstance(e, tf.errors.CancelledError) and "exiting" in e.message
            sess.run(enq)
            assert sess.run(deq) == 7.0
    finally:
        for s in servers:
            s.stop()


# -- the daemon pool --------------------------------------------------------------------
def test_daemon_pool_runs_tasks_on_daemon_threads():
    pool = threads.DaemonPool(4, thread_name_prefix="t-pool")
    names = [pool.submit(lambda: (threading.current_thread().name,
                                  threading.current_thread().daemon)) for _ in range(8)]
    for f in names:
        name, daemon = f.result(5.0)
        assert name.startswith("t-pool_") and daemon
    assert pool.threads <= 4
    with pytest.raises(ZeroDivisionError):
        pool.submit(lambda: 1 / 0).result(5.0)
    pool.shutdown()
    with pytest.raises(RuntimeError):
        pool.submit(lambda: None)


def test_daemon_pool_gives_blocked_tasks_threads_of_their_own():
    """Tasks that block (a partition waiting on a _Recv) never hold up later ones."""
    pool = threads.DaemonPool(64)
    gate = threading.Event()
    blocked = [pool.submit(gate.wait, 5.0) for _ in range(10)]
    assert pool.submit(lambda: 42).result(5.0) == 42
    gate.set()
    assert all(f.result(5.0) for f in blocked)
    # the threads are idle again: new tasks reuse them
    n = pool.threads
    assert [pool.submit(lambda i=i: i).result(5.0) for i in range(5)] == list(range(5))
    assert pool.threads == n


def test_daemon_pool_queues_beyond_its_limit_then_catches_up():
    pool = threads.DaemonPool(2)
    gate = threading.Event()
    first = [pool.submit(gate.wait, 5.0) for _ in range(2)]
    later = [pool.submit(lambda i=i: i) for i in range(6)]
    time.sleep(0.05)
    assert not any(f.done() for f in later)  # both threads are busy
    gate.set()
    assert [f.result(5.0) for f in later] == list(range(6))
    assert all(f.result(5.0) for f in first) and pool.threads == 2
    # the permits match the idle threads: two blocking tasks still get a thread each
    gate2 = threading.Event()
    a = pool.submit(gate2.wait, 5.0)
    b = pool.submit(lambda: 7)
    assert b.result(5.0) == 7
    gate2.set()
    assert a.result(5.0)


def test_daemon_pool_idle_threads_exit():
    pool = threads.DaemonPool(4, idle_timeout=0.05)
    assert pool.submit(lambda: 1).result(5.0) == 1
    end = time.monotonic() + 5.0
    while pool.threads and time.monotonic() < end:
        time.sleep(0.01)
    assert pool.threads == 0
    assert pool.submit(lambda: 2).result(5.0) == 2  # a new thread starts
