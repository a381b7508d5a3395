"""Receives pulled together: which ``_Recv`` nodes the master lets a task pull in one
call that waits for all of them (``flowrt.partition.pull_together``), how a worker
gathers them (``_WorkerRendezvous`` with ``expect``) and serves them
(``Worker.recv_tensors`` / ``try_recv_tensors`` with ``wait_all``,
``Rendezvous.take_ready(all_or_none=True)``), and whole training steps over zmq."""
from __future__ import annotations

import collections
import threading
import time

import numpy as np
import pytest

import flowrt as tf
import flowrt.testing as ft
from flowrt import errors
from flowrt import master as master_mod
from flowrt import rpc
from flowrt.executor import DEAD
from flowrt.ir import extract_step_graph
from flowrt.partition import partition, pull_together
from flowrt.placement import place
from flowrt.rendezvous import Rendezvous, make_key
from flowrt.runtime import default_runtime
from flowrt.server import Server
from flowrt.worker import Worker, _WorkerRendezvous
from _pulls import collector, train_graph, worker_pair

PS = "/job:ps/task:0"
W0 = "/job:worker/task:0"
PS_CPU = "/job:ps/replica:0/task:0/device:CPU:0"
W0_CPU = "/job:worker/replica:0/task:0/device:CPU:0"


# -- which receives go together ----------------------------------------------------------
def _parts(g, fetches=(), targets=(), tasks=(("ps", 0), ("worker", 0)), worker_cpus=1):
    """Place and partition the step of ``g`` over the given tasks, as the master does."""
    rt = default_runtime()
    ir = extract_step_graph(g, [], list(fetches), list(targets))
    workers = [Worker(rt, job, i, config=tf.ConfigProto(device_count={"CPU": worker_cpus})
                      if job == "worker" else None) for job, i in tasks]
    placed = place(ir, [d for w in workers for d in w.devices], rt)
    return partition(ir, placed, rt)


def _recvs(parts, src_job=None, dst_job=None) -> dict[str, str]:
    """``{_Recv node name: tensor name}`` of the transfers from ``src_job`` to
    ``dst_job`` (any job when None) between different tasks."""
    out = {}
    for p in parts:
        for n in p.ir.nodes.values():
            if n.type != "_Recv":
                continue
            a = n.node_attrs
            s, d = str(a["send_device"]), str(a["recv_device"])
            if s.split("/device:")[0] == d.split("/device:")[0]:
                continue
            if (src_job is None or f"/job:{src_job}/" in s) and \
                    (dst_job is None or f"/job:{dst_job}/" in d):
                out[n.name] = str(a["tensor_name"])
    return out


def _train_graph(g):
    return train_graph(tf, g)[3:]


def test_a_train_step_pulls_both_directions_together():
    g = tf.Graph()
    loss, train = _train_graph(g)
    parts = _parts(g, [loss], [train])
    to_worker, to_ps = _recvs(parts, "ps", "worker"), _recvs(parts, "worker", "ps")
    assert len(to_worker) == 2  # the reads of w and b
    assert len(to_ps) >= 2  # their gradients (and the learning rate)
    assert pull_together(parts, default_runtime()) == set(to_worker) | set(to_ps)


def test_a_train_step_with_fed_inputs_pulls_both_directions_together():
    # feeds become _Arg nodes, which have no kernel: they must not turn the analysis off
    g = tf.Graph()
    with g.as_default():
        with tf.device(PS):
            w = tf.Variable(np.ones((3, 2), np.float32), name="w")
        with tf.device(W0):
            x = tf.placeholder(tf.float32, [None, 3], name="x")
            loss = tf.reduce_sum(tf.square(tf.matmul(x, w) - 1.0))
            train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    rt = default_runtime()
    ir = extract_step_graph(g, [x], [loss], [train])
    workers = [Worker(rt, job, i) for job, i in (("ps", 0), ("worker", 0))]
    parts = partition(ir, place(ir, [d for w in workers for d in w.devices], rt), rt)
    assert any(n.type == "_Arg" for p in parts for n in p.ir.nodes.values())
    to_worker, to_ps = _recvs(parts, "ps", "worker"), _recvs(parts, "worker", "ps")
    assert to_worker and to_ps
    assert pull_together(parts, rt) == set(to_worker) | set(to_ps)


def test_a_ping_pong_step_pulls_only_the_direction_that_cannot_deadlock():
    """x on ps -> y = f(x) on the worker -> z = g(y) on ps -> w = h(z) on the worker: z
    needs the worker to have received x, so the worker must not wait for x and z in one
    call; the ps receives only y, which is safe."""
    g = tf.Graph()
    with g.as_default():
        with tf.device(PS):
            x = tf.Variable([1.0, 2.0], name="x").read_value()
        with tf.device(W0):
            y = tf.sin(x, name="y")
        with tf.device(PS):
            z = tf.square(y, name="z")
        with tf.device(W0):
            w = tf.exp(z, name="w")
    parts = _parts(g, [w])
    to_worker, to_ps = _recvs(parts, "ps", "worker"), _recvs(parts, "worker", "ps")
    assert sorted(to_worker.values()) == ["edge_read_0", "edge_z_0"]
    assert list(to_ps.values()) == ["edge_y_0"]
    assert pull_together(parts, default_runtime()) == set(to_ps)


def test_a_dependency_through_a_third_task_is_seen():
    """ps -> worker0 (x), worker0 -> worker1 (y), worker1 -> ps (z), ps -> worker0 (u):
    u needs worker0 to have received x, through worker1."""
    g = tf.Graph()
    with g.as_default():
        with tf.device(PS):
            x = tf.Variable([1.0, 2.0], name="x").read_value()
        with tf.device(W0):
            y = tf.sin(x, name="y")
        with tf.device("/job:worker/task:1"):
            z = tf.cos(y, name="z")
        with tf.device(PS):
            u = tf.square(z, name="u")
        with tf.device(W0):
            out = tf.exp(u, name="out")
    parts = _parts(g, [out], tasks=(("ps", 0), ("worker", 0), ("worker", 1)))
    recvs = _recvs(parts)
    assert sorted(recvs.values()) == ["edge_read_0", "edge_u_0", "edge_y_0", "edge_z_0"]
    together = pull_together(parts, default_runtime())
    assert sorted(recvs[n] for n in together) == ["edge_y_0", "edge_z_0"]


def test_receives_on_several_devices_of_a_task_are_one_pair():
    """Two devices of the worker read from ps: one pair of tasks, pulled together; a
    transfer between the worker's own devices is not a pull."""
    g = tf.Graph()
    with g.as_default():
        with tf.device(PS):
            a = tf.Variable([1.0, 2.0], name="a").read_value()
            b = tf.Variable([3.0, 4.0], name="b").read_value()
        with tf.device(W0 + "/device:CPU:0"):
            a2 = tf.sin(a, name="a2")
        with tf.device(W0 + "/device:CPU:1"):
            out = tf.add(a2, tf.cos(b), name="out")
    parts = _parts(g, [out], worker_cpus=2)
    assert len(parts) == 3
    cross = _recvs(parts, "ps", "worker")
    assert sorted(cross.values()) == ["edge_read_0", "edge_read_1_0"]
    assert {n.rsplit("_on_", 1)[1] for n in cross} == {"worker_0_CPU_0", "worker_0_CPU_1"}
    every_recv = {n.name for p in parts for n in p.ir.nodes.values() if n.type == "_Recv"}
    assert len(every_recv) == 3  # plus a2 from CPU:0 to CPU:1
    assert pull_together(parts, default_runtime()) == set(cross)


def test_a_while_loop_across_tasks_pulls_nothing_together():
    g = tf.Graph()
    with g.as_default():
        with tf.device(PS):
            v = tf.Variable(np.float32(2.0), name="v")
        with tf.device(W0):
            _, acc = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a + v),
                                   [tf.constant(0), tf.constant(np.float32(0))])
            out = acc * 2.0
    parts = _parts(g, [out])
    assert _recvs(parts)  # there are transfers across tasks...
    assert pull_together(parts, default_runtime()) == set()  # ...but inside loops they repeat


def test_one_task_has_nothing_to_pull():
    g = tf.Graph()
    with g.as_default(), tf.device(W0):
        out = tf.sin(tf.Variable([1.0], name="v").read_value())
    assert pull_together(_parts(g, [out]), default_runtime()) == set()


def _queue_graph(g):
    """ps reads v (sent to the worker), the worker sends y = 2 v back into a ps queue,
    and the ps dequeues it for the worker: the dequeued tensor exists only once the
    worker received v, though no edge of the graph says so."""
    with g.as_default():
        with tf.device(PS):
            q = tf.FIFOQueue(4, tf.float32, shapes=[[2]])
            v = tf.Variable([1.0, 2.0], name="v")
            x = v.read_value()
        with tf.device(W0):
            y = x * 2.0
        with tf.device(PS):
            enq = q.enqueue(y)
            deq = q.dequeue()
        with tf.device(W0):
            out = deq + 1.0
    return v, out, enq


def test_a_dependency_through_a_queue_is_not_pulled_together():
    g = tf.Graph()
    _, out, enq = _queue_graph(g)
    parts = _parts(g, [out], [enq])
    to_worker = _recvs(parts, "ps", "worker")
    assert sorted(to_worker.values()) == ["edge_fifo_queue_Dequeue_0", "edge_read_0"]
    assert not set(to_worker) <= pull_together(parts, default_runtime())


# -- the receiving worker: one pull once every receive asked ------------------------------
def _key(i: int) -> str:
    return make_key(PS_CPU, 7, W0_CPU, f"edge_t{i}_0")


class _Host:
    device_type, name = "CPU", "host"

    @staticmethod
    def to_host(v):
        return v


@pytest.fixture
def pair(monkeypatch):
    return worker_pair(monkeypatch)


def _send_later(ps: Worker, step: int, keys_values, gap: float = 0.02) -> threading.Thread:
    """Send ``(key, value)`` pairs on ps one after another from a thread of their own."""
    def run():
        for k, v in keys_values:
            time.sleep(gap)
            ps.rendezvous_mgr.find_or_create(step).send(k, (v, _Host()))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("n", [1, 3, 8])
def test_expect_starts_one_pull_once_every_receive_asked(pair, n):
    ps, w0, client, pool = pair
    ps._running_steps[3] = 1  # the step runs on ps: its rendezvous stays
    rdv = _WorkerRendezvous(w0, 3, w0.rendezvous_mgr.find_or_create(3), 5.0,
                            pulled_together_count={("ps", 0): n})
    results, done, cb = collector(n)
    for i in range(n):
        assert pool.jobs == []  # not yet: receives from ps are still to come
        rdv.recv_async(_key(i), cb(i))
    assert len(pool.jobs) == 1
    pool.drain()
    sender = _send_later(ps, 3, [(_key(i), np.full(2, i, np.float32))
                                 for i in reversed(range(n))])
    assert done.wait(5.0)
    sender.join(5.0)
    # one call with every key, which waited until all were sent
    assert client.calls == [([_key(i) for i in range(n)], True)]
    for i in range(n):
        np.testing.assert_array_equal(results[i], np.full(2, i, np.float32))


def test_without_expect_the_first_receive_starts_the_pull(pair):
    ps, w0, client, pool = pair
    r = ps.rendezvous_mgr.find_or_create(4)
    r.send(_key(0), (np.float32(5), _Host()))
    rdv = _WorkerRendezvous(w0, 4, w0.rendezvous_mgr.find_or_create(4), 5.0)
    results, done, cb = collector(1)
    rdv.recv_async(_key(0), cb(0))
    assert len(pool.jobs) == 1
    pool.drain()
    assert done.wait(5.0) and results == {0: 5.0}
    assert client.calls == [([_key(0)], False)]


def test_expect_for_another_task_leaves_pulls_from_ps_as_they_were(pair):
    ps, w0, client, pool = pair
    ps.rendezvous_mgr.find_or_create(5).send(_key(0), (np.float32(1), _Host()))
    rdv = _WorkerRendezvous(w0, 5, w0.rendezvous_mgr.find_or_create(5), 5.0,
                            pulled_together_count={("worker", 1): 2})
    results, done, cb = collector(1)
    rdv.recv_async(_key(0), cb(0))
    assert len(pool.jobs) == 1
    pool.drain()
    assert done.wait(5.0)
    assert client.calls == [([_key(0)], False)]


def test_an_aborted_step_fails_receives_still_gathering(pair):
    ps, w0, client, pool = pair
    rdv = _WorkerRendezvous(w0, 6, w0.rendezvous_mgr.find_or_create(6), 5.0,
                            pulled_together_count={("ps", 0): 3})
    results, done, cb = collector(2)
    rdv.recv_async(_key(0), cb(0))
    rdv.recv_async(_key(1), cb(1))
    err = errors.AbortedError(None, None, "step 6 was cancelled")
    rdv.abort(err)
    assert done.wait(1.0) and results == {0: err, 1: err}
    assert pool.jobs == [] and client.calls == []
    got = []
    rdv.recv_async(_key(2), lambda item, e: got.append(e))
    assert got == [err] and pool.jobs == []


# -- the sending worker: wait_all ---------------------------------------------------------
def test_recv_tensors_wait_all_waits_for_every_key():
    ps = Worker(None, "ps", 0)
    ps._running_steps[21] = 1
    keys = [_key(i) for i in range(3)]
    sender = _send_later(ps, 21, [(k, np.float32(i)) for i, k in enumerate(keys)])
    got = ps.recv_tensors(21, keys, timeout=5.0, wait_all=True)
    sender.join(5.0)
    assert got == [(0, 0.0), (1, 1.0), (2, 2.0)]
    assert len(ps.rendezvous_mgr.find_or_create(21)) == 0


def test_recv_tensors_without_wait_all_answers_with_the_first():
    ps = Worker(None, "ps", 0)
    ps._running_steps[22] = 1
    keys = [_key(i) for i in range(3)]
    answered = threading.Event()

    def run():
        r = ps.rendezvous_mgr.find_or_create(22)
        time.sleep(0.02)
        r.send(keys[1], (np.float32(1), _Host()))
        answered.wait(5.0)  # the others only once the first call returned
        r.send(keys[0], (np.float32(0), _Host()))
        r.send(keys[2], (DEAD, _Host()))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert ps.recv_tensors(22, keys, timeout=5.0) == [(1, 1.0)]
    answered.set()
    t.join(5.0)
    got = ps.recv_tensors(22, [keys[0], keys[2]], timeout=5.0, wait_all=True)
    assert got[0] == (0, 0.0) and got[1][0] == 1 and got[1][1] is DEAD


def test_recv_tensors_wait_all_times_out_with_what_came():
    ps = Worker(None, "ps", 0)
    ps._running_steps[23] = 1
    r = ps.rendezvous_mgr.find_or_create(23)
    keys = [_key(i) for i in range(3)]
    r.send(keys[0], (np.float32(10), _Host()))
    r.send(keys[2], (np.float32(12), _Host()))
    t0 = time.monotonic()
    got = ps.recv_tensors(23, keys, timeout=0.2, wait_all=True)
    assert time.monotonic() - t0 >= 0.15  # it did wait for key 1
    assert got == [(0, 10.0), (2, 12.0)]
    assert len(r) == 0  # no waiter left behind: key 1 stays for a later call
    r.send(keys[1], (np.float32(11), _Host()))
    assert ps.recv_tensors(23, [keys[1]], timeout=1.0, wait_all=True) == [(0, 11.0)]


def test_recv_tensors_wait_all_with_nothing_sent_is_a_deadline_error():
    ps = Worker(None, "ps", 0)
    ps._running_steps[24] = 1
    with pytest.raises(errors.DeadlineExceededError,
                       match="/job:ps/replica:0/task:0: none of the tensors"):
        ps.recv_tensors(24, [_key(0), _key(1)], timeout=0.05, wait_all=True)
    assert len(ps.rendezvous_mgr.find_or_create(24)) == 0


def test_try_recv_tensors_wait_all_is_none_until_all_were_sent():
    ps = Worker(None, "ps", 0)
    keys = [_key(i) for i in range(3)]
    assert ps.try_recv_tensors(25, keys, wait_all=True) is None  # step unknown here
    ps._running_steps[25] = 1
    r = ps.rendezvous_mgr.find_or_create(25)
    r.send(keys[0], (np.float32(0), _Host()))
    r.send(keys[1], (np.float32(1), _Host()))
    assert ps.try_recv_tensors(25, keys, wait_all=True) is None
    assert len(r) == 2  # nothing was taken
    r.send(keys[2], (DEAD, _Host()))
    got = ps.try_recv_tensors(25, keys, wait_all=True)
    assert [i for i, _ in got] == [0, 1, 2] and got[0][1] == 0.0 and got[2][1] is DEAD
    assert len(r) == 0
    # without wait_all, whatever is there
    r.send(keys[1], (np.float32(7), _Host()))
    assert ps.try_recv_tensors(25, keys) == [(1, 7.0)]


# -- Rendezvous.take_ready ----------------------------------------------------------------
def test_take_ready_all_or_none():
    r = Rendezvous(1)
    r.send("a", 1)
    r.send("b", 2)
    assert r.take_ready(["a", "b", "c"], all_or_none=True) == []
    assert len(r) == 2
    assert r.take_ready(["c", "b", "a"]) == [(1, 2), (2, 1)]  # without: what is there
    for k, v in (("c", 3), ("a", 4), ("a", 5), ("b", 6)):
        r.send(k, v)
    assert r.take_ready(["c", "a", "b"], all_or_none=True) == [(0, 3), (1, 4), (2, 6)]
    assert r.take_ready(["a", "b"], all_or_none=True) == []  # b has no second value
    assert r.take_ready(["a"], all_or_none=True) == [(0, 5)]
    assert len(r) == 0
    assert r.take_ready([], all_or_none=True) == []


def test_take_ready_ignores_waiting_receivers_and_raises_once_aborted():
    r = Rendezvous(2)
    got = []
    r.recv_async("x", lambda v, e: got.append(e))
    r.send("y", 1)
    assert r.take_ready(["x", "y"], all_or_none=True) == []
    err = errors.CancelledError(None, None, "step 2 cancelled")
    r.abort(err)
    assert got == [err]
    for all_or_none in (False, True):
        with pytest.raises(errors.CancelledError, match="step 2 cancelled"):
            r.take_ready(["y"], all_or_none=all_or_none)


# -- whole steps --------------------------------------------------------------------------
def _between_graph_model(distributed: bool):
    g = tf.Graph()
    setter = tf.train.replica_device_setter(ps_tasks=1, worker_device=W0) \
        if distributed else None
    with g.as_default(), tf.device(setter):
        rng = np.random.default_rng(0)
        x = tf.constant(rng.standard_normal((16, 5)).astype(np.float32))
        y = tf.constant(rng.standard_normal((16, 2)).astype(np.float32))
        w = tf.get_variable("w", initializer=rng.standard_normal((5, 2)).astype(np.float32))
        b = tf.get_variable("b", initializer=np.zeros(2, np.float32))
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = tf.global_variables_initializer()
    return g, (w, b), loss, train, init


def _train(target, steps, distributed, inspect=None, after_init=None):
    """Train ``steps`` steps; ``after_init()`` runs before the first, ``inspect()``
    after the last (the session is still open)."""
    g, (w, b), loss, train, init = _between_graph_model(distributed)
    cfg = tf.ConfigProto(operation_timeout_in_ms=20000)
    with tf.Session(target, graph=g, config=cfg) as sess:
        sess.run(init)
        if after_init is not None:
            after_init()
        losses = [sess.run([loss, train])[0] for _ in range(steps)]
        if inspect is not None:
            inspect()
        return losses, sess.run([w, b]), w.device


def _check_registered(servers):
    """Both tasks registered receives pulled together from the other one, expecting
    as many receives as they listed."""
    for srv, sender in ((servers[1], ("ps", 0)), (servers[0], ("worker", 0))):
        regs = [r for r in srv.worker._graphs.values() if r.pulled_together_keys]
        assert regs, f"no graph with pulled-together receives on {srv}"
        assert any(r.pulled_together_count and set(r.pulled_together_count) == {sender}
                   and r.pulled_together_count[sender] ==
                   sum(len(k) for k in r.pulled_together_keys.values())
                   for r in regs)


def test_a_between_graph_train_step_over_zmq_matches_a_local_session(monkeypatch):
    monkeypatch.setattr(master_mod, "STAGED", False)  # pulls, not staging (test_staged)
    calls: collections.Counter = collections.Counter()
    recv_tensors = rpc.WorkerClient.recv_tensors

    def counting(self, step_id, keys, timeout=None, wait_all=False):
        calls[(self.job, "wait_all" if wait_all else "plain")] += 1
        return recv_tensors(self, step_id, keys, timeout, wait_all)

    def inspect():
        _check_registered(servers)
        seen.update(calls)

    monkeypatch.setattr(rpc.WorkerClient, "recv_tensors", counting)
    want_losses, want, _ = _train("", 5, distributed=False)
    cluster = ft.cluster_addresses("zmq", {"ps": 1, "worker": 1})
    servers = [Server(cluster, job, 0, protocol="zmq") for job in ("ps", "worker")]
    try:
        seen: collections.Counter = collections.Counter()
        losses, got, device = _train(servers[1].target, 5, distributed=True,
                                     inspect=inspect, after_init=calls.clear)
        assert device.startswith("/job:ps")
        np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        # one RecvTensors per direction per step: the worker's pull of w and b from
        # ps, and the ps's pull of the gradients (and learning rate) from the worker
        assert seen == {("ps", "wait_all"): 5, ("worker", "wait_all"): 5}
    finally:
        for srv in servers:
            srv.stop()


def test_a_conditional_across_tasks_still_runs_with_pulls_together():
    """Both branches of a cond read from ps; the branch not taken receives dead
    tensors, which must still count for the gathered pull."""
    cluster = ft.cluster_addresses("zmq", {"ps": 1, "worker": 1})
    servers = [Server(cluster, job, 0, protocol="zmq") for job in ("ps", "worker")]
    try:
        g = tf.Graph()
        with g.as_default():
            p = tf.placeholder(tf.bool, [])
            with tf.device(PS):
                a = tf.Variable([1.0, 2.0], name="a")
                b = tf.Variable([10.0, 20.0], name="b")
            with tf.device(W0):
                out = tf.cond(p, lambda: a.read_value() * 2.0, lambda: b.read_value() - 1.0)
        cfg = tf.ConfigProto(operation_timeout_in_ms=10000)
        with tf.Session(servers[1].target, graph=g, config=cfg) as sess:
            sess.run([a.initializer, b.initializer])
            for flag in (True, False, True):
                want = [2.0, 4.0] if flag else [9.0, 19.0]
                np.testing.assert_allclose(sess.run(out, {p: flag}), want)
    finally:
        for srv in servers:
            srv.stop()


def test_a_queue_round_trip_across_tasks_runs_over_zmq():
    cluster = ft.cluster_addresses("zmq", {"ps": 1, "worker": 1})
    servers = [Server(cluster, job, 0, protocol="zmq") for job in ("ps", "worker")]
    try:
        g = tf.Graph()
        v, out, enq = _queue_graph(g)
        cfg = tf.ConfigProto(operation_timeout_in_ms=1500)
        with tf.Session(servers[1].target, graph=g, config=cfg) as sess:
            sess.run(v.initializer)
            np.testing.assert_allclose(sess.run([out, enq])[0], [3.0, 5.0])
    finally:
        for srv in servers:
            srv.stop()


def test_without_the_runtime_nothing_is_pulled_together():
    g = tf.Graph()
    _train_graph(g)
    assert pull_together(_parts(g, [], [g.get_operations()[-1]])) == set()
