"""Staged steps (flowrt.partition.split_stages, MasterSession._run_staged): a step over
the master's task and one other runs as three plain calls (the other task's first
stage, the local part, the other task's second stage), with no pulls."""
from __future__ import annotations

import collections
import time
from typing import Any

import numpy as np
import pytest

import flowrt as tf
import flowrt.testing as ft
from flowrt import errors
from flowrt import master as master_mod
from flowrt import rpc
from flowrt.ir import extract_step_graph
from flowrt.partition import partition, split_stages
from flowrt.placement import place
from flowrt.runtime import default_runtime
from flowrt.server import Server
from flowrt.worker import Worker
from _pulls import train_graph

PS = "/job:ps/task:0"
W0 = "/job:worker/task:0"
W1 = "/job:worker/task:1"
LOCAL = ("worker", 0)


# -- the split -----------------------------------------------------------------------
def _split(g, feeds=(), fetches=(), targets=(), tasks=(("ps", 0), ("worker", 0))):
    rt = default_runtime()
    ir = extract_step_graph(g, list(feeds), list(fetches), list(targets))
    workers = [Worker(rt, job, i) for job, i in tasks]
    parts = partition(ir, place(ir, [d for w in workers for d in w.devices], rt), rt)
    return parts, split_stages(parts, LOCAL, rt)


def _types(stage) -> collections.Counter:
    return collections.Counter(n.type for n in stage.ir.nodes.values())


def _train_graph(g):
    return train_graph(tf, g, fed=True)


def test_a_train_step_splits_into_reads_and_updates():
    g = tf.Graph()
    x, w, b, loss, train = _train_graph(g)
    parts, stages = _split(g, [x], [loss], [train])
    assert stages is not None
    first, second = stages
    t1, t2 = _types(first), _types(second)
    # the first stage reads the variables and sends them to the worker
    assert t1["_Send"] == 2 and t1["_Recv"] == 0 and "ApplyGradientDescent" not in t1
    # the second receives the gradients (and the learning rate) and applies them; the
    # variables it updates are copies of their nodes, not values carried over
    assert t2["ApplyGradientDescent"] == 2 and t2["_Send"] == 0
    assert t2["VariableV2"] == 2 and t2["_Recv"] >= 2
    assert not any("_stage_recv" in n for n in second.ir.nodes)
    for n in second.ir.nodes.values():
        for src, _ in n.inputs:
            assert src in second.ir.nodes
    # the partition's targets are divided between the stages that hold their nodes
    ps_part = next(p for p in parts if p.device.name.startswith("/job:ps/"))
    assert sorted(first.ir.targets + second.ir.targets) == sorted(ps_part.ir.targets)
    assert all(t in second.ir.nodes for t in second.ir.targets)
    assert all(t in first.ir.nodes for t in first.ir.targets)


def test_a_value_the_first_stage_computes_is_carried_to_the_second():
    g = tf.Graph()
    with g.as_default():
        with tf.device(PS):
            v = tf.Variable(np.float32(3.0), name="v")
            r = tf.multiply(v.read_value(), 2.0, name="r")
        with tf.device(W0):
            y = tf.add(r, 1.0, name="y")
        with tf.device(PS):
            out = tf.add(r, y, name="out")
    parts, stages = _split(g, (), [out, r])
    assert stages is not None
    first, second = stages
    assert "r/_stage_send_0" in first.ir.nodes and "r/_stage_recv_0" in second.ir.nodes
    a = first.ir.nodes["r/_stage_send_0"].node_attrs
    assert a["send_device"] == a["recv_device"] and str(a["recv_device"]).startswith(
        "/job:ps/")
    # the fetches go with the stage that computes them: out in the second, r in the first
    assert second.fetches == [("out", 0)] and second.fetch_positions == [0]
    assert first.fetches == [("r", 0)] and first.fetch_positions == [1]


def test_steps_that_cannot_be_staged():
    # the other task answers the local one in its second stage (ping-pong)
    g = tf.Graph()
    with g.as_default():
        with tf.device(PS):
            v = tf.Variable(np.float32(1.0), name="v")
        with tf.device(W0):
            y = v * 2.0
        with tf.device(PS):
            z = y + 1.0
        with tf.device(W0):
            back = z * 3.0
    assert _split(g, (), [back])[1] is None
    # the other task only receives: nothing for the first stage to send back
    g = tf.Graph()
    with g.as_default():
        with tf.device(W0):
            c = tf.constant(2.0)
        with tf.device(PS):
            d = c + 1.0
    assert _split(g, (), [d])[1] is None
    # the other task only sends: it already pushes with one call
    g = tf.Graph()
    with g.as_default():
        with tf.device(PS):
            c = tf.constant(2.0)
        with tf.device(W0):
            d = c + 1.0
    assert _split(g, (), [d])[1] is None
    # three tasks
    g = tf.Graph()
    _, _, _, loss, train = _train_graph(g)
    with g.as_default(), tf.device(W1):
        extra = loss * 2.0
    assert _split(g, (), [extra], [train], tasks=(("ps", 0), ("worker", 0),
                                                 ("worker", 1)))[1] is None


def test_a_loop_or_a_queue_is_not_staged():
    g = tf.Graph()
    with g.as_default():
        with tf.device(PS):
            v = tf.Variable(np.float32(1.0), name="v")
        with tf.device(W0):
            loop = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a + v),
                                 [tf.constant(0), tf.constant(0.0)])[1]
        with tf.device(PS):
            upd = v.assign_add(loop)
    assert _split(g, (), [upd])[1] is None
    g = tf.Graph()
    with g.as_default():
        with tf.device(PS):
            v = tf.Variable(np.float32(1.0), name="v")
            q = tf.FIFOQueue(4, tf.float32)
            enq = q.enqueue(v.read_value())
        with tf.device(W0):
            y = tf.identity(v.read_value() * 2.0)
        with tf.device(PS):
            upd = v.assign_add(y)
            out = tf.add(q.dequeue(), upd)
    assert _split(g, (), [out], [enq])[1] is None


# -- staged steps over zmq -----------------------------------------------------------
@pytest.fixture
def zmq_pair():
    cluster = ft.cluster_addresses("zmq", {"ps": 1, "worker": 1})
    servers = [Server(cluster, job, 0, protocol="zmq") for job in ("ps", "worker")]
    yield servers
    for srv in servers:
        srv.stop()


@pytest.fixture
def calls(monkeypatch):
    counts: collections.Counter = collections.Counter()
    call = rpc._Client.call

    def counting(self, method, *a, **k):
        counts[method] += 1
        return call(self, method, *a, **k)

    monkeypatch.setattr(rpc._Client, "call", counting)
    return counts


def _staged_steps(server) -> int:
    """How many of the compiled steps of the server's master sessions are staged."""
    return sum(cs.staged is not None for ms in server.master._sessions.values()
               for cs in ms._callables.values())


def _train(target: str, steps: int, seed: int = 0):
    g = tf.Graph()
    x, w, b, loss, train = _train_graph(g)
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(steps)]
    losses = []
    cfg = tf.ConfigProto(allow_soft_placement=not target)  # (locally: one device)
    with tf.Session(target, graph=g, config=cfg) as sess:
        sess.run(tf.variables_initializer([w, b]))
        for xv in xs:
            losses.append(sess.run([loss, train], {x: xv})[0])
        return losses, sess.run([w, b])


def _matches_a_local_session(target: str, steps: int, before_remote: Any = None) -> None:
    """Train ``steps`` steps locally and on ``target``: the same losses and weights."""
    want_losses, want = _train("", steps)
    if before_remote is not None:
        before_remote()
    losses, got = _train(target, steps)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_staged_train_step_matches_a_local_session_with_two_calls_to_ps(zmq_pair, calls):
    _matches_a_local_session(zmq_pair[1].target, 6, before_remote=calls.clear)
    # 6 staged steps: two RunGraph calls each, nothing pulled (the initialisation and
    # the final read are not staged: one RunGraph each)
    assert calls["Worker/RecvTensors"] <= 2 and calls["Worker/RecvTensor"] == 0
    assert 12 <= calls["Worker/RunGraph"] <= 12 + 2
    # the ps keeps nothing of the finished steps
    assert len(zmq_pair[0].worker.rendezvous_mgr._table) == 0


def test_staged_parts_with_their_inputs_there_run_straight_through(zmq_pair, monkeypatch):
    # the local part (its inputs came back with the first stage) and the second stage
    # (its inputs came with the request) take the straight-line path, whose receives
    # take their values at once; the results are those of a local session
    from flowrt.executor import Executor

    ran: collections.Counter = collections.Counter()
    straight, dataflow = Executor._run_straight, Executor._run_dataflow

    def counting_ready(self, args, step, ready=False):
        ran["ready"] += bool(ready)
        return straight(self, args, step, ready)

    def counting_dataflow(self, *a, **k):
        ran["dataflow"] += 1
        return dataflow(self, *a, **k)

    monkeypatch.setattr(Executor, "_run_straight", counting_ready)
    monkeypatch.setattr(Executor, "_run_dataflow", counting_dataflow)
    _matches_a_local_session(zmq_pair[1].target, 5, before_remote=ran.clear)
    assert ran["ready"] >= 2 * 5 and ran["dataflow"] <= 3, ran  # (the first step compiles)


def test_staging_off_pulls_instead(zmq_pair, calls, monkeypatch):
    monkeypatch.setattr(master_mod, "STAGED", False)
    want_losses, _ = _train("", 3)
    calls.clear()
    losses, _ = _train(zmq_pair[1].target, 3)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    assert calls["Worker/RecvTensors"] >= 3


def test_a_carried_value_and_fetches_from_both_stages(zmq_pair):
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder(tf.float32, [], name="p")
        with tf.device(PS):
            v = tf.Variable(np.float32(3.0), name="v")
            r = tf.multiply(v.read_value(), p, name="r")
        with tf.device(W0):
            y = tf.add(r, 1.0, name="y")
        with tf.device(PS):
            out = tf.add(r, y, name="out")
            upd = v.assign(out)
    with tf.Session(zmq_pair[1].target, graph=g) as sess:
        sess.run(v.initializer)
        for k in range(1, 4):
            cur = sess.run(v)
            got = sess.run([out, r, y, upd], {p: np.float32(k)})
            rr = cur * k
            np.testing.assert_allclose(got, [2 * rr + 1, rr, rr + 1, 2 * rr + 1])
        assert _staged_steps(zmq_pair[1]) == 1


def test_a_failing_local_part_fails_the_step_and_leaves_nothing_on_ps(zmq_pair):
    g = tf.Graph()
    with g.as_default():
        bad = tf.placeholder(tf.float32, [2], name="bad")
        with tf.device(PS):
            v = tf.Variable(np.float32([1.0, 2.0]), name="v")
            r = v.read_value() * 2.0
        with tf.device(W0):
            checked = tf.debugging.check_numerics(r + bad, "the worker's value is bad")
        with tf.device(PS):
            upd = v.assign_add(checked)
    ps = zmq_pair[0].worker
    with tf.Session(zmq_pair[1].target, graph=g) as sess:
        sess.run(v.initializer)
        sess.run(upd, {bad: np.float32([0.0, 0.0])})
        np.testing.assert_allclose(sess.run(v), [3.0, 6.0])
        with pytest.raises(errors.InvalidArgumentError, match="the worker's value is bad"):
            sess.run(upd, {bad: np.float32([np.nan, 0.0])})
        np.testing.assert_allclose(sess.run(v), [3.0, 6.0])  # the update never ran
        deadline = time.monotonic() + 5.0  # (the abort reaches ps on its own thread)
        while ps.rendezvous_mgr._table and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not ps.rendezvous_mgr._table
        sess.run(upd, {bad: np.float32([1.0, 1.0])})  # the next step is fine
        np.testing.assert_allclose(sess.run(v), [10.0, 19.0])
        assert _staged_steps(zmq_pair[1]) == 1


def test_a_failing_second_stage_names_its_node(zmq_pair):
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder(tf.float32, [], name="p")
        with tf.device(PS):
            v = tf.Variable(np.float32(1.0), name="v")
        with tf.device(W0):
            y = v.read_value() * p
        with tf.device(PS):
            checked = tf.debugging.check_numerics(y + v.read_value(), "ps saw a bad sum")
            upd = v.assign(checked)
    with tf.Session(zmq_pair[1].target, graph=g) as sess:
        sess.run(v.initializer)
        assert sess.run(upd, {p: np.float32(2.0)}) == pytest.approx(3.0)
        with pytest.raises(errors.InvalidArgumentError, match="ps saw a bad sum"):
            sess.run(upd, {p: np.float32(np.inf)})
        assert sess.run(v) == pytest.approx(3.0)
        assert sess.run(upd, {p: np.float32(1.0)}) == pytest.approx(6.0)
        assert _staged_steps(zmq_pair[1]) == 1


def test_a_stopped_ps_fails_a_staged_step_as_unavailable(zmq_pair):
    g = tf.Graph()
    x, w, b, loss, train = _train_graph(g)
    cfg = tf.ConfigProto(operation_timeout_in_ms=5000)
    with tf.Session(zmq_pair[1].target, graph=g, config=cfg) as sess:
        sess.run(tf.variables_initializer([w, b]))
        sess.run(train, {x: np.ones((2, 3), np.float32)})
        assert _staged_steps(zmq_pair[1]) == 1
        zmq_pair[0].stop()
        t0 = time.monotonic()
        with pytest.raises((errors.UnavailableError, errors.DeadlineExceededError),
                           match="ps"):
            sess.run(train, {x: np.ones((2, 3), np.float32)})
        assert time.monotonic() - t0 < 15.0


def test_the_second_stage_is_answered_at_once_only_with_its_inputs_there():
    rt = default_runtime()
    g = tf.Graph()
    x, w, b, loss, train = _train_graph(g)
    parts, (first, second) = _split(g, [x], [loss], [train])
    ps = Worker(rt, "ps", 0)
    h = ps.register_partitions("s", [second], 1)
    reg = ps._graphs[h]
    cross = [k for k in reg.recv_keys if ";/job:ps/" in k and k.startswith("/job:worker")]
    assert cross and len(cross) == len(reg.recv_keys)  # (no carried values here)
    assert not ps.runs_without_blocking(h)
    assert not ps.runs_without_blocking(h, 7, cross[:-1])
    assert ps.runs_without_blocking(h, 7, cross)


def test_a_fetched_variable_is_read_after_the_steps_updates(zmq_pair):
    """As in a step that is not staged (and in a local session): a variable fetched with
    the step that updates it on its task reads the updated value."""
    def run(target):
        g = tf.Graph()
        x, w, b, loss, train = _train_graph(g)
        with g.as_default(), tf.device(PS):
            gs = tf.train.get_or_create_global_step()
            inc = tf.assign_add(gs, 1)
        with g.as_default(), tf.device(PS):  # (on W0 it would wait for B: not staged)
            step = tf.group(train, inc)
        cfg = tf.ConfigProto(allow_soft_placement=not target)
        with tf.Session(target, graph=g, config=cfg) as sess:
            sess.run(tf.global_variables_initializer())
            got = [int(sess.run([step, gs], {x: np.ones((2, 3), np.float32)})[1])
                   for _ in range(3)]
            if target:
                assert _staged_steps(zmq_pair[1]) == 1
            return got

    assert run("") == [1, 2, 3]
    assert run(zmq_pair[1].target) == [1, 2, 3]
