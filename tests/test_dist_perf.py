"""Fewer RPCs per distributed step: batched receives (``Worker/RecvTensors``) and pushed
tensors (a RunGraph reply carrying what a receive-free partition sent to the master's
task). Calls are counted with wrappers around the worker objects (inproc) or around the
rpc client's ``call`` (zmq, grpc: real messages between in-process servers)."""
from __future__ import annotations

import collections
import threading

import numpy as np
import pytest

import flowrt as tf
import flowrt.testing as ft
from flowrt import errors
from flowrt import master as master_mod
from flowrt import rpc
from flowrt import worker as worker_mod
from flowrt.executor import DEAD
from flowrt.rendezvous import make_key
from flowrt.server import Server
from flowrt.worker import Worker, _WorkerRendezvous
from _pulls import DeferredPool, collector, worker_pair

PS_CPU = "/job:ps/replica:0/task:0/device:CPU:0"
W0_CPU = "/job:worker/replica:0/task:0/device:CPU:0"


def _key(i: int) -> str:
    return make_key(PS_CPU, 7, W0_CPU, f"edge_t{i}_0")


def _src() -> object:
    class Host:
        device_type, name = "CPU", "host"

        @staticmethod
        def to_host(v):
            return v

    return Host()


# -- Worker.recv_tensors --------------------------------------------------------------
def test_recv_tensors_returns_every_ready_key_and_leaves_the_rest():
    w = Worker(None, "ps", 0)
    r = w.rendezvous_mgr.find_or_create(5)
    src = _src()
    r.send(_key(0), (np.float32([1, 2]), src))
    r.send(_key(2), (DEAD, src))
    got = w.recv_tensors(5, [_key(0), _key(1), _key(2)], timeout=5.0)
    assert [i for i, _ in got] == [0, 2]
    np.testing.assert_array_equal(got[0][1], [1, 2])
    assert got[1][1] is DEAD
    # key 1 is not ready: the call waits for it, and gets it once it is sent (the step
    # is over on this task and nothing is left: its rendezvous is made again)
    threading.Timer(0.05, lambda: w.rendezvous_mgr.find_or_create(5).send(
        _key(1), (np.int64(3), src))).start()
    (i, v), = w.recv_tensors(5, [_key(1)], timeout=5.0)
    assert i == 0 and v == 3


def test_recv_tensors_deadline_withdraws_its_waiters():
    w = Worker(None, "ps", 0)
    r = w.rendezvous_mgr.find_or_create(9)
    with pytest.raises(errors.DeadlineExceededError, match="was sent within 0.05 s"):
        w.recv_tensors(9, [_key(4), _key(5)], timeout=0.05)
    assert len(r) == 0  # the timed-out call left no receiver behind
    r = w.rendezvous_mgr.find_or_create(9)
    r.send(_key(5), (np.float32(1.5), _src()))
    assert w.recv_tensors(9, [_key(4), _key(5)], timeout=1.0) == [(1, 1.5)]


def test_recv_tensors_reports_an_aborted_step():
    w = Worker(None, "ps", 0)
    w.rendezvous_mgr.find_or_create(11)
    err = errors.AbortedError(None, None, "the step 11 was cancelled")
    threading.Timer(0.05, w.abort_step, args=(11, err)).start()
    with pytest.raises(errors.AbortedError, match="step 11 was cancelled"):
        w.recv_tensors(11, [_key(0)], timeout=5.0)


# -- the receiving side: one RPC for a burst of keys ----------------------------------

@pytest.mark.parametrize("n", [1, 4, 16])
def test_a_burst_of_receives_from_one_task_is_one_rpc(monkeypatch, n):
    ps, w0, client, pool = worker_pair(monkeypatch)
    r = ps.rendezvous_mgr.find_or_create(3)
    for i in range(n):
        r.send(_key(i), (np.full(3, i, np.float32), _src()))
    rdv = _WorkerRendezvous(w0, 3, w0.rendezvous_mgr.find_or_create(3), 5.0)
    results, done, cb = collector(n)

    for i in range(n):
        rdv.recv_async(_key(i), cb(i))
    assert len(pool.jobs) == 1  # the first receive scheduled the pull; the rest joined
    pool.drain()
    assert done.wait(5.0)
    assert client.calls == [([_key(i) for i in range(n)], False)]
    for i in range(n):
        np.testing.assert_array_equal(results[i], np.full(3, i, np.float32))


def test_keys_not_ready_are_asked_for_again(monkeypatch):
    ps, w0, client, pool = worker_pair(monkeypatch)
    r = ps.rendezvous_mgr.find_or_create(4)
    ps._running_steps[4] = 1  # the step runs on ps: its rendezvous stays
    r.send(_key(1), (np.int32(10), _src()))
    rdv = _WorkerRendezvous(w0, 4, w0.rendezvous_mgr.find_or_create(4), 5.0)
    results, got_all, cb = collector(3)

    for i in range(3):
        rdv.recv_async(_key(i), cb(i))
    pool.drain()
    # key 1 came with the first reply; keys 0 and 2 are asked for again, together
    for i in (0, 2):
        threading.Timer(0.05 * (i + 1), r.send,
                        args=(_key(i), (np.int32(i), _src()))).start()
    assert got_all.wait(5.0)
    assert results == {0: 0, 1: 10, 2: 2}
    assert client.calls[0][0] == [_key(0), _key(1), _key(2)]
    assert client.calls[1][0] == [_key(0), _key(2)]
    assert sum(len(c) for c, _ in client.calls) <= 3 + 2 + 1


def test_a_pull_in_flight_does_not_hold_later_keys(monkeypatch):
    """Key 1 is sent only after key 0 was received; key 0 is asked for while a pull of
    key 1 already waits: the later key must not wait behind the earlier call."""
    ps, w0, client, pool = worker_pair(monkeypatch)
    r = ps.rendezvous_mgr.find_or_create(6)
    ps._running_steps[6] = 1
    rdv = _WorkerRendezvous(w0, 6, w0.rendezvous_mgr.find_or_create(6), 5.0)
    out: dict[int, object] = {}
    done = threading.Event()

    def got0(item, err):
        out[0] = item[0]
        r.send(_key(1), (np.int32(1), _src()))  # the producer of key 1 needed key 0

    def got1(item, err):
        out[1] = item[0]
        done.set()

    rdv.recv_async(_key(1), got1)
    pool.drain()  # a call waiting for key 1 only
    rdv.recv_async(_key(0), got0)
    pool.drain()
    r.send(_key(0), (np.int32(0), _src()))
    assert done.wait(5.0) and out == {0: 0, 1: 1}


def test_a_failed_pull_fails_every_key_of_the_batch_naming_the_task(monkeypatch):
    class Down:
        target = "zmq://127.0.0.1:1"

        def recv_tensors(self, *a, **k):
            raise errors.UnavailableError(None, None, "connection refused")

    w0 = Worker(None, "worker", 0, resolver=lambda job, task: Down())
    pool = DeferredPool()
    monkeypatch.setattr(worker_mod, "_partition_pool", lambda: pool)
    rdv = _WorkerRendezvous(w0, 8, w0.rendezvous_mgr.find_or_create(8), 5.0)
    errs: list[BaseException] = []
    for i in range(3):
        rdv.recv_async(_key(i), lambda item, err: errs.append(err))
    for t in pool.drain():
        t.join(5.0)
    assert len(errs) == 3
    assert all(isinstance(e, errors.UnavailableError) and
               "task /job:ps/replica:0/task:0 at zmq://127.0.0.1:1" in e.message
               for e in errs)


# -- whole steps on a ps + worker cluster ---------------------------------------------
def _servers(protocol: str):
    cluster = ft.cluster_addresses(protocol, {"ps": 1, "worker": 1})
    return [Server(cluster, job, i, protocol=protocol) for job in cluster
            for i in range(len(cluster[job]))]


@pytest.fixture
def count_calls(monkeypatch):
    """Counts rpc methods (network transports) and worker calls (inproc)."""
    counts: collections.Counter = collections.Counter()
    pushes: list = []
    call = rpc._Client.call

    def counting_call(self, method, *a, **k):
        counts[method] += 1
        return call(self, method, *a, **k)

    monkeypatch.setattr(rpc._Client, "call", counting_call)
    for name in ("recv_tensor", "recv_tensors", "run_graph"):
        orig = getattr(Worker, name)

        def wrapped(self, *a, _orig=orig, _name=name, **k):
            counts[f"inproc {_name}"] += 1
            if _name == "run_graph" and a[0].push_to is not None:
                pushes.append((self.job, self.task, a[0].push_to))
            return _orig(self, *a, **k)

        monkeypatch.setattr(Worker, name, wrapped)
    return counts, pushes


@pytest.mark.parametrize("protocol", ["inproc", "zmq", "grpc"])
def test_ps_read_is_pushed_with_the_run_graph_reply(count_calls, protocol):
    counts, pushes = count_calls
    servers = _servers(protocol)
    try:
        g = tf.Graph()
        with g.as_default():
            with tf.device("/job:ps/task:0"):
                v = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="v")
                s = tf.Variable(np.float32(2.0), name="s")
            with tf.device("/job:worker/task:0"):
                y = tf.reduce_sum(v * s, axis=1)
        with tf.Session(servers[1].target, graph=g) as sess:
            sess.run([v.initializer, s.initializer])
            sess.run(y)
            counts.clear()
            pushes.clear()
            for _ in range(3):
                np.testing.assert_allclose(sess.run(y), [6.0, 24.0])
            rpcs = {k: n for k, n in counts.items() if "/" in k}
        assert pushes == [("ps", 0, ("worker", 0))] * 3
        assert counts["inproc recv_tensor"] == counts["inproc recv_tensors"] == 0
        if protocol != "inproc":  # two RPCs per step: RunCallable, then one RunGraph
            assert rpcs == {"Master/RunCallable": 3, "Worker/RunGraph": 3}
        for srv in servers:  # nothing of the steps is left behind
            assert len(srv.worker.rendezvous_mgr) == 0
    finally:
        for srv in servers:
            srv.stop()


@pytest.mark.parametrize("protocol", ["inproc", "zmq"])
def test_ping_pong_step_across_two_tasks(count_calls, protocol):
    """worker0 receives a, ps receives a*2 and sends back b, worker0 receives b, ...: a
    key produced only after another was consumed; the ps partition receives, so nothing
    is pushed and the receives are batched pulls."""
    counts, pushes = count_calls
    servers = _servers(protocol)
    try:
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder(tf.float32, [3])
            t = x
            for k in range(3):
                with tf.device("/job:ps/task:0"):
                    t = t + float(k + 1)
                    extra = t * 10.0
                with tf.device("/job:worker/task:0"):
                    t = t * 2.0 + extra * 0.0
        cfg = tf.ConfigProto(operation_timeout_in_ms=20000)
        with tf.Session(servers[1].target, graph=g, config=cfg) as sess:
            for k in range(3):
                xv = np.float32([k, 1, -2])
                want = xv
                for j in range(3):
                    want = (want + (j + 1)) * 2
                np.testing.assert_allclose(sess.run(t, {x: xv}), want)
        assert pushes == []
        if protocol == "zmq":
            assert counts["Worker/RecvTensor"] == 0 and counts["Worker/RecvTensors"] > 0
        else:
            assert counts["inproc recv_tensor"] == 0 and counts["inproc recv_tensors"] > 0
    finally:
        for srv in servers:
            srv.stop()


@pytest.mark.parametrize("protocol", ["inproc", "zmq"])
def test_several_ps_reads_and_a_gradient_are_batched(count_calls, protocol, monkeypatch):
    """worker0 reads 4 ps tensors and ps takes one from worker0 (so the ps partition
    receives and cannot push): the 4 keys travel in batched calls, never one by one.
    (Pulls, not staging: see test_staged.py for the staged form of such a step.)"""
    monkeypatch.setattr(master_mod, "STAGED", False)
    counts, _ = count_calls
    servers = _servers(protocol)
    try:
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder(tf.float32, [4])
            with tf.device("/job:ps/task:0"):
                vs = [tf.constant(np.float32(i + 1)) * 1.0 for i in range(4)]
            with tf.device("/job:worker/task:0"):
                total = tf.add_n(vs) + x
            with tf.device("/job:ps/task:0"):
                back = total * 3.0
        with tf.Session(servers[1].target, graph=g) as sess:
            sess.run(back, {x: np.zeros(4, np.float32)})
            counts.clear()
            steps = 5
            for k in range(steps):
                xv = np.float32([k, 0, 1, 2])
                np.testing.assert_allclose(sess.run(back, {x: xv}), (10 + xv) * 3)
        name = "Worker/RecvTensors" if protocol == "zmq" else "inproc recv_tensors"
        single = "Worker/RecvTensor" if protocol == "zmq" else "inproc recv_tensor"
        assert counts[single] == 0
        # per step at most one call per key (4 from ps, 1 from the worker); batching
        # makes it fewer in practice
        assert steps * 2 <= counts[name] <= steps * 5
    finally:
        for srv in servers:
            srv.stop()


def test_a_failing_pushing_partition_fails_the_step():
    servers = _servers("zmq")
    try:
        g = tf.Graph()
        with g.as_default():
            with tf.device("/job:ps/task:0"):
                v = tf.Variable(np.float32([1.0, np.nan]), name="v")
                checked = tf.debugging.check_numerics(v.read_value(), "v is bad")
            with tf.device("/job:worker/task:0"):
                y = checked * 2.0
        cfg = tf.ConfigProto(operation_timeout_in_ms=20000)
        with tf.Session(servers[1].target, graph=g, config=cfg) as sess:
            sess.run(v.initializer)
            with pytest.raises(errors.InvalidArgumentError, match="v is bad"):
                sess.run(y)
            sess.run(v.assign([1.0, 2.0]))
            np.testing.assert_allclose(sess.run(y), [2.0, 4.0])
        for srv in servers:
            assert len(srv.worker.rendezvous_mgr) == 0
    finally:
        for srv in servers:
            srv.stop()
