"""The master session's step cache (MasterSession._refresh): a new graph version only
compiles a cached step again when the step's pruned graph (or what places it) changed.
Adding an unrelated op keeps the compiled step and its registered partitions."""
from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest

import flowrt as tf
import flowrt.testing as ft
from flowrt import rpc
from flowrt.graph import apply_op
from flowrt.ir import extract_step_graph, step_fingerprint
from flowrt.master import StagedParts, StepPart
from flowrt.op_registry import KernelSet, OpDef
from flowrt.runtime import Runtime
from flowrt.server import Server
from test_plugins import numpy_device_type, plugin


class Counts:
    """Counts the compiles of a master session and the graphs its workers register."""

    def __init__(self, ms: Any, monkeypatch: Any):
        self.compiles = 0
        self.registered = 0
        compile_ = ms._compile

        def counting_compile(cs: Any) -> None:
            self.compiles += 1
            compile_(cs)

        monkeypatch.setattr(ms, "_compile", counting_compile)
        for w in ms.master.workers_for(ms.config):
            for name in ("register_graph", "register_partitions"):
                fn = getattr(w, name)

                def counting(*a: Any, _fn: Any = fn, **k: Any) -> Any:
                    self.registered += 1
                    return _fn(*a, **k)

                monkeypatch.setattr(w, name, counting)


def _chain(g: tf.Graph) -> tuple[Any, Any]:
    with g.as_default():
        x = tf.placeholder(tf.float32, [2], name="x")
        y = x
        for i in range(5):
            y = tf.add(y, np.float32(i), name=f"add{i}")
    return x, y


def test_an_unrelated_op_keeps_the_compiled_step(monkeypatch):
    g = tf.Graph()
    x, y = _chain(g)
    with tf.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(y, {x: [1, 2]}), [11, 12])
        ms = s._msession
        counts = Counts(ms, monkeypatch)
        (cs,) = ms._callables.values()
        parts = list(cs.parts)
        with g.as_default():
            tf.constant(np.arange(6.0).reshape(2, 3), name="unrelated")
            tf.multiply(x, 4.0, name="another_user_of_x")
        np.testing.assert_array_equal(s.run(y, {x: [3, 4]}), [13, 14])
        assert counts.compiles == 0 and counts.registered == 0
        assert cs.version == g.version and cs.parts == parts
        # the next steps take the fast path again
        np.testing.assert_array_equal(s.run(y, {x: [0, 0]}), [10, 10])
        assert counts.compiles == 0


def test_a_change_the_step_needs_compiles_it_again(monkeypatch):
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.float32(1.0), name="v")
        r = v.read_value()
        y = tf.multiply(r, 2.0, name="y")
    with tf.Session(graph=g) as s:
        s.run(v.initializer)
        assert s.run(y) == 2.0
        counts = Counts(s._msession, monkeypatch)
        with g.as_default():
            bump = tf.assign_add(v, 10.0, name="bump")
        assert s.run(y) == 2.0 and counts.compiles == 0
        # the step now depends on the new op: compiled again, and the new op runs
        r.op._add_control_input(bump.op)
        assert s.run(y) == 22.0
        assert counts.compiles == 1 and counts.registered == 1
        # an attr of a node of the step changes (an array value): compiled again
        with g.as_default():
            c = tf.constant(np.ones(3, np.float32), name="c")
            z = tf.reduce_sum(c, name="z")
        assert s.run(z) == 3.0
        before = counts.compiles
        c.op._set_attr("value", np.full(3, 2.0, np.float32))
        assert s.run(z) == 6.0
        assert counts.compiles == before + 1


def test_a_colocation_attr_counts():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(1.0, name="a")
        b = tf.identity(a, name="b")
    ir = extract_step_graph(g, [], [b], [])
    key = step_fingerprint(ir)
    assert step_fingerprint(extract_step_graph(g, [], [b], [])) == key
    b.op._set_attr("_class", ["loc:@a"])
    assert step_fingerprint(extract_step_graph(g, [], [b], [])) != key


@pytest.mark.parametrize("a, b", [
    (np.zeros(3, np.float32), np.zeros(3, np.float64)),
    (np.zeros(4, np.float32), np.zeros((2, 2), np.float32)),
    (np.array([b"ab", b"c"], object), np.array([b"a", b"bc"], object)),
    (1, 1.0), (1, True), ("1", 1), ([1, 2], [[1], 2]), ("ab", ["a", "b"]),
])
def test_fingerprints_tell_values_apart(a, b):
    g = tf.Graph()
    with g.as_default():
        c = tf.constant(1.0, name="c")
    ir = extract_step_graph(g, [], [c], [])
    ir.nodes["c"] = ir.nodes["c"].copy(node_attrs={"x": a})
    fa = step_fingerprint(ir)
    ir.nodes["c"] = ir.nodes["c"].copy(node_attrs={"x": b})
    assert step_fingerprint(ir) != fa


# -- placement through ops of the whole graph -------------------------------------------
def _toy_runtime() -> Runtime:
    """A runtime with a preferred TOY device type that runs the generic kernels, and an
    op that reads a variable's reference with a kernel on CPU only."""
    ks = KernelSet("cpu_only_peek")
    ks.op(OpDef("CpuOnlyPeek", inputs=["ref: Ref(T)"], outputs=["y: T"],
                attrs=["T: {float}"], shape_fn=lambda op: [op.inputs[0].shape]))

    @ks.kernel("CpuOnlyPeek", device_type="CPU")
    def _factory(ctx: Any) -> Any:
        return lambda ref: ctx.xp.array(ref.read(), copy=True)

    return Runtime(autoload=False, plugins={"toy": plugin(
        flowrt_device_types=lambda: [numpy_device_type("TOY", priority=50)],
        flowrt_kernel_sets=lambda: [ks])})


def test_a_new_user_of_a_variable_that_moves_it_compiles_again(monkeypatch):
    g = tf.Graph(runtime=_toy_runtime())
    with g.as_default():
        v = tf.Variable(np.float32(2.0), name="v")
        y = tf.multiply(v, 3.0, name="y")
    with tf.Session(graph=g) as s:
        s.run(v.initializer)
        assert s.run(y) == 6.0
        assert "TOY" in s.placement(y)["v"]
        counts = Counts(s._msession, monkeypatch)
        # another op using the variable that TOY runs too: nothing moves
        with g.as_default():
            tf.assign(v, 5.0, name="other_assign")
        assert s.run(y) == 6.0 and counts.compiles == 0
        # a user with a kernel on CPU only: the variable's group moves to CPU (as TF's
        # whole-graph placer would have put it), so the step compiles again
        with g.as_default():
            peek = apply_op("CpuOnlyPeek", ref=v._variable, name="peek")
        s.run(v.initializer)
        assert s.run(y) == 6.0
        assert counts.compiles == 2  # the initializer's step and y's
        assert "CPU" in s.placement(y)["v"]
        assert s.run(peek) == 2.0


def test_a_worker_restart_still_compiles_again(monkeypatch):
    g = tf.Graph()
    x, y = _chain(g)
    with tf.Session(graph=g) as s:
        s.run(y, {x: [0, 0]})
        ms = s._msession
        counts = Counts(ms, monkeypatch)
        ms.invalidate(ms.master.local_worker)
        np.testing.assert_array_equal(s.run(y, {x: [1, 1]}), [11, 11])
        assert counts.compiles == 1


# -- a remote session: the graph grows through ExtendSession ----------------------------
@pytest.fixture
def grpc_pair():
    cluster = ft.cluster_addresses("grpc", {"ps": 1, "worker": 1})
    servers = [Server(cluster, job, 0, protocol="grpc") for job in ("ps", "worker")]
    yield servers
    for srv in servers:
        srv.stop()


def test_a_remote_session_keeps_its_steps_when_the_graph_grows(grpc_pair, monkeypatch):
    ps, worker = grpc_pair
    calls: collections.Counter = collections.Counter()
    call = rpc._Client.call

    def counting(self: Any, method: str, *a: Any, **k: Any) -> Any:
        calls[method] += 1
        return call(self, method, *a, **k)

    monkeypatch.setattr(rpc._Client, "call", counting)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2], name="x")
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(np.float32([1.0, 2.0]), name="v")
        with tf.device("/job:worker/task:0"):
            y = tf.add(v.read_value() * 2.0, x, name="y")
    with tf.Session(worker.target, graph=g) as s:
        s.run(v.initializer)
        np.testing.assert_array_equal(s.run(y, {x: [1, 1]}), [3, 5])
        (ms,) = worker.master._sessions.values()
        graph_before = ms.graph
        compiles = Counts(ms, monkeypatch)
        registered = calls["Worker/RegisterGraph"]
        extended = calls["Master/ExtendSession"]
        with g.as_default():
            tf.constant([7.0], name="unrelated")
        np.testing.assert_array_equal(s.run(y, {x: [2, 2]}), [4, 6])
        assert calls["Master/ExtendSession"] == extended + 1  # the graph did grow
        assert ms.graph is not graph_before and ms.graph.version != graph_before.version
        (cs_y,) = [cs for cs in ms._callables.values() if cs.fetches == ("y:0",)]
        assert cs_y.version == ms.graph.version  # refreshed, not compiled
        assert compiles.compiles == 0 and calls["Worker/RegisterGraph"] == registered
        for cs in ms._callables.values():
            assert all(isinstance(p, StepPart) for p in cs.parts)
            assert cs.staged is None or isinstance(cs.staged, StagedParts)
        # a new op changing the variable on the ps: its own step compiles and
        # registers, the kept step reads the new value
        with g.as_default(), tf.device("/job:ps/task:0"):
            bump = tf.assign_add(v, [10.0, 10.0], name="bump")
        s.run(bump)
        assert compiles.compiles == 1 and calls["Worker/RegisterGraph"] > registered
        np.testing.assert_array_equal(s.run(y, {x: [0, 0]}), [22, 24])
        assert compiles.compiles == 1
