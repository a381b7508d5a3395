"""The step executor through sessions: error reporting and step abort, branch execution,
control-dependency ordering, large steps on both schedulers (straight-line and
dataflow), expensive kernels on the inter-op pool, and concurrent steps.

Test ops come from an in-test kernel set registered on a private runtime, so failures,
side effects and slow kernels are under the test's control.
"""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import flowrt as tf
from flowrt import errors
from flowrt.graph import apply_op
from flowrt.op_registry import KernelSet, OpDef
from flowrt.runtime import Runtime

THREAD_TIMEOUT = 30
RAN: list[str] = []
_RAN_LOCK = threading.Lock()


def _same(op: Any) -> list[Any]:
    return [op.inputs[0].shape]


def _test_kernel_set() -> KernelSet:
    ks = KernelSet("executor_test_ops")
    ks.op(OpDef("TestRaise", inputs=["x: float"], outputs=["y: float"],
                attrs=["kind: string = 'value'"], shape_fn=_same),
          OpDef("TestRaiseSlow", inputs=["x: float"], outputs=["y: float"], shape_fn=_same),
          # (it has a side effect, so it says so: the graph passes leave it alone)
          OpDef("TestRecord", inputs=["x: float"], outputs=["y: float"],
                attrs=["tag: string"], shape_fn=_same, is_stateful=True),
          OpDef("TestAddOne", inputs=["x: float"], outputs=["y: float"], shape_fn=_same),
          OpDef("TestSlow", inputs=["x: float"], outputs=["y: float"],
                attrs=["delay: float = 0.05"], shape_fn=_same))

    @ks.kernel("TestRaise")
    def _raise(ctx: Any) -> Any:
        kind = ctx.attrs["kind"]
        exc = {"value": ValueError("bad value"), "type": TypeError("bad type"),
               "index": IndexError("bad index"), "zero": ZeroDivisionError("div by zero"),
               "key": KeyError("bad key"), "memory": MemoryError("no memory"),
               "runtime": RuntimeError("boom"),
               "oor": errors.OutOfRangeError(None, None, "sequence ended")}[kind]

        def compute(x: Any) -> Any:
            raise exc

        return compute

    @ks.kernel("TestRaiseSlow", expensive=True)
    def _raise_slow(ctx: Any) -> Any:
        def compute(x: Any) -> Any:
            time.sleep(0.02)
            raise ValueError("slow failure")

        return compute

    @ks.kernel("TestRecord")
    def _record(ctx: Any) -> Any:
        tag = ctx.attrs["tag"]

        def compute(x: Any) -> Any:
            with _RAN_LOCK:
                RAN.append(tag)
            return x

        return compute

    @ks.kernel("TestAddOne")
    def _add_one(ctx: Any) -> Any:
        one = np.float32(1)
        return lambda x: ctx.xp.add(x, one)

    @ks.kernel("TestSlow", expensive=True)
    def _slow(ctx: Any) -> Any:
        delay = ctx.attrs["delay"]
        one = np.float32(1)

        def compute(x: Any) -> Any:
            time.sleep(delay)
            return x + one

        return compute

    return ks


@pytest.fixture(scope="module")
def runtime() -> Runtime:
    ks = _test_kernel_set()
    plugin = SimpleNamespace(flowrt_kernel_sets=tf.hookimpl(lambda: [ks]))
    return Runtime(autoload=False, plugins={"executor_test_ops": plugin})


@pytest.fixture
def g(runtime):
    RAN.clear()
    graph = tf.Graph(runtime=runtime)
    with graph.as_default():
        yield graph


def record(x: Any, tag: str) -> Any:
    return apply_op("TestRecord", x=x, tag=tag, name=tag)


TRACE = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
MODES = [pytest.param(None, id="straight_line"), pytest.param(TRACE, id="dataflow")]


@pytest.fixture
def cpu_only(monkeypatch):
    """Tests of the executor's internals look at a step's single partition: keep any GPU
    out of it (a GPU host puts ops there by default)."""
    monkeypatch.setenv("FLOWRT_GPUS", "0")


def executors(sess: Any) -> list[Any]:
    """The executors a session compiled (for asserting which scheduler ran)."""
    out = []
    for cs in sess._msession._callables.values():
        for worker, handle, *_ in cs.parts:
            out.append(worker._graphs[handle].executor)
    return out


# -- errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind, cls", [
    ("value", errors.InvalidArgumentError), ("type", errors.InvalidArgumentError),
    ("index", errors.InvalidArgumentError), ("zero", errors.InvalidArgumentError),
    ("key", errors.InvalidArgumentError), ("memory", errors.ResourceExhaustedError),
    ("oor", errors.OutOfRangeError),
])
@pytest.mark.parametrize("options", MODES)
def test_kernel_errors_become_op_errors_naming_the_node(g, kind, cls, options):
    x = tf.placeholder(tf.float32, name="x")
    y = apply_op("TestRaise", x=x, kind=kind, name=f"fail_{kind}")
    with tf.Session() as s:
        with pytest.raises(cls) as ei:
            s.run(y, {x: 1.0}, options=options)
    e = ei.value
    msg = str(e)
    assert f"[[node fail_{kind} (op TestRaise)" in msg
    assert "/device:CPU:0" in msg
    assert e.op is y.op
    assert e.node_def.name == f"fail_{kind}" and e.node_def.op == "TestRaise"
    assert e.error_code == cls.error_code_default
    if kind == "oor":
        assert "sequence ended" in msg
    elif kind != "memory":
        assert "bad" in msg or "div by zero" in msg


@pytest.mark.parametrize("options", MODES)
def test_other_exceptions_are_op_errors_too(g, options):
    x = tf.placeholder(tf.float32, name="x")
    y = apply_op("TestRaise", x=x, kind="runtime", name="rt")
    with tf.Session() as s:
        with pytest.raises(errors.OpError, match=r"boom[\s\S]*\[\[node rt \(op TestRaise\)"):
            s.run(y, {x: 1.0}, options=options)


@pytest.mark.parametrize("options", MODES)
def test_a_failing_kernel_aborts_the_step(g, options):
    x = tf.placeholder(tf.float32, name="x")
    before = record(x, "before")
    bad = apply_op("TestRaise", x=before, name="bad")
    after = record(bad, "after")
    with tf.Session() as s:
        with pytest.raises(errors.InvalidArgumentError, match=r"\[\[node bad "):
            s.run(after, {x: 1.0}, options=options)
        assert RAN == ["before"]
        # the error does not poison the session: the next step runs
        RAN.clear()
        assert s.run(before, {x: 2.0}, options=options) == 2.0
        assert RAN == ["before"]


def test_failing_node_found_among_many_in_the_straight_line_path(g, cpu_only):
    x = tf.placeholder(tf.float32, name="x")
    y = x
    for i in range(60):
        y = apply_op("TestAddOne", x=y, name=f"pre{i}")
    y = apply_op("TestRaise", x=y, kind="index", name="the_bad_one")
    for i in range(60):
        y = apply_op("TestAddOne", x=y, name=f"post{i}")
    with tf.Session() as s:
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"\[\[node the_bad_one \(op TestRaise\)") as ei:
            s.run(y, {x: 0.0})
        assert ei.value.op.name == "the_bad_one"
        assert all(e.straight_line for e in executors(s))


def test_failure_on_the_inter_op_pool(g):
    x = tf.placeholder(tf.float32, name="x")
    slow = [apply_op("TestSlow", x=x, delay=0.05, name=f"slow{i}") for i in range(3)]
    bad = apply_op("TestRaiseSlow", x=x, name="slow_bad")
    cfg = tf.ConfigProto(inter_op_parallelism_threads=4)
    with tf.Session(config=cfg) as s:
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"slow failure[\s\S]*\[\[node slow_bad \(op TestRaiseSlow\)"):
            s.run(slow + [bad], {x: 1.0})
        assert s.run(slow, {x: 1.0}) == [2.0, 2.0, 2.0]


# -- branches and ordering -----------------------------------------------------------------------
@pytest.mark.parametrize("options", MODES)
def test_independent_branches_all_run(g, options):
    x = tf.placeholder(tf.float32, name="x")
    tags = [f"b{i}" for i in range(8)]
    outs = [record(x, t) for t in tags]
    with tf.control_dependencies(outs[4:]):
        join = tf.no_op(name="join")
    with tf.Session() as s:
        got = s.run([outs[:4], join], {x: 3.0}, options=options)
    assert got == [[3.0] * 4, None]
    assert sorted(RAN) == sorted(tags)


@pytest.mark.parametrize("options", MODES)
def test_control_dependencies_order_side_effects(g, options):
    x = tf.placeholder(tf.float32, name="x")
    late = record(x, "late")  # created first ...
    early = record(x, "early")
    late.op._add_control_input(early.op)  # ... but must run after "early"
    with tf.control_dependencies([late]):
        last = record(x, "last")
    with tf.Session() as s:
        for _ in range(3):
            RAN.clear()
            s.run(last, {x: 1.0}, options=options)
            assert RAN == ["early", "late", "last"]


def test_assign_then_read_with_control_dependencies(runtime):
    graph = tf.Graph()  # standard kernels only
    with graph.as_default():
        v = tf.Variable(1, name="v")
        with tf.control_dependencies([tf.assign(v, 10)]):
            r = v.read_value()
        with tf.control_dependencies([r]):
            up = tf.assign_add(v, 5)
    with tf.Session(graph=graph) as s:
        s.run(v.initializer)
        assert s.run(r) == 10
        assert s.run([up]) == [15]
        assert s.run(r) == 10 and s.run(v) == 10


# -- large steps on both schedulers ----------------------------------------------------------
@pytest.mark.parametrize("options", MODES)
def test_two_hundred_node_step(g, cpu_only, options, monkeypatch):
    monkeypatch.setenv("FLOWRT_DISABLE_PASSES", "all")  # CSE would merge the fan-out
    x = tf.placeholder(tf.float32, [3], name="x")
    chain = x
    for i in range(100):
        chain = apply_op("TestAddOne", x=chain, name=f"c{i}")
    fan = [apply_op("TestAddOne", x=x, name=f"f{i}") for i in range(99)]
    xs = np.array([0.0, 1.0, 2.0], np.float32)
    with tf.Session() as s:
        got = s.run([chain, fan], {x: xs}, options=options)
        nodes = sum(len(e.nodes) for e in executors(s))
    assert nodes >= 200
    np.testing.assert_array_equal(got[0], xs + 100)
    assert len(got[1]) == 99
    for f in got[1]:
        np.testing.assert_array_equal(f, xs + 1)


def test_dataflow_scheduler_with_expensive_kernels(g, cpu_only, monkeypatch):
    monkeypatch.setenv("FLOWRT_DISABLE_PASSES", "all")  # CSE would merge the slow nodes
    x = tf.placeholder(tf.float32, name="x")
    cheap = x
    for i in range(150):
        cheap = apply_op("TestAddOne", x=cheap, name=f"c{i}")
    slow = [apply_op("TestSlow", x=cheap, delay=0.1, name=f"s{i}") for i in range(4)]
    more = [apply_op("TestAddOne", x=s_, name=f"m{i}") for i, s_ in enumerate(slow)]
    cfg = tf.ConfigProto(inter_op_parallelism_threads=4)
    with tf.Session(config=cfg) as s:
        s.run(more, {x: 0.0})  # compile
        t0 = time.perf_counter()
        got = s.run(more, {x: 0.0})
        elapsed = time.perf_counter() - t0
        exes = executors(s)
    assert got == [152.0] * 4
    assert exes and not any(e.straight_line for e in exes)
    assert elapsed < 0.38  # the four 0.1 s kernels overlap (serially: 0.4 s)


def test_matmuls_on_the_dataflow_path():
    graph = tf.Graph()  # the standard kernel set: MatMul is an expensive kernel
    rng = np.random.default_rng(0)
    a_val = rng.standard_normal((48, 48)).astype(np.float32)
    with graph.as_default():
        a = tf.placeholder(tf.float32, [48, 48])
        prods = [tf.matmul(a, tf.constant(np.eye(48, dtype=np.float32) * (i + 1)))
                 for i in range(4)]
        chained = tf.matmul(prods[0], prods[1])
    with tf.Session(graph=graph,
                    config=tf.ConfigProto(inter_op_parallelism_threads=2)) as s:
        got = s.run(prods + [chained], {a: a_val})
        assert not any(e.straight_line for e in executors(s))
    for i in range(4):
        np.testing.assert_allclose(got[i], a_val * (i + 1), rtol=1e-5)
    np.testing.assert_allclose(got[4], (a_val @ a_val) * 2, rtol=1e-4, atol=1e-4)


def test_one_inter_op_thread_runs_expensive_kernels_serially(g, cpu_only):
    x = tf.placeholder(tf.float32, name="x")
    slow = [apply_op("TestSlow", x=x, delay=0.01, name=f"s{i}") for i in range(3)]
    with tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=1)) as s:
        assert s.run(slow, {x: 1.0}) == [2.0, 2.0, 2.0]
        assert all(e.straight_line for e in executors(s))


# -- concurrency -------------------------------------------------------------------------
@pytest.mark.parametrize("threads_cfg", [0, 4])
def test_concurrent_steps_from_threads(g, threads_cfg):
    x = tf.placeholder(tf.float32, [2], name="x")
    y = x
    for i in range(30):
        y = apply_op("TestAddOne", x=y, name=f"a{i}")
    slow = [apply_op("TestSlow", x=y, delay=0.002, name=f"s{i}") for i in range(2)]
    cfg = tf.ConfigProto(inter_op_parallelism_threads=threads_cfg) if threads_cfg else None
    failures: list[str] = []
    with tf.Session(config=cfg) as s:

        def worker(i: int) -> None:
            try:
                for r in range(15):
                    v = np.array([i, r], np.float32)
                    a, (b, c) = s.run([y, slow], {x: v})
                    if a.tolist() != (v + 30).tolist() or b.tolist() != (v + 31).tolist() \
                            or c.tolist() != b.tolist():
                        failures.append(f"thread {i} step {r}: {a} {b} {c}")
            except Exception as e:  # noqa: BLE001 - reported below
                failures.append(f"thread {i}: {type(e).__name__}: {e}")

        ts = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(THREAD_TIMEOUT)
        assert not any(t.is_alive() for t in ts), "a step hung"
    assert failures == []


def test_floating_point_warnings_stay_quiet_and_moves_skip_errstate(monkeypatch):
    """Kernels run with numpy's floating-point warnings off, as TF's produce inf and
    nan silently; a plan that only moves values (a variable read, say) skips the
    ``np.errstate`` that costs more than its kernels."""
    import warnings

    from flowrt.engine import executor as ex_mod

    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2])
        q = x / tf.constant([0.0, 0.0])
        v = tf.Variable([1.0, 2.0])
        read = tf.identity(v)
    seen: list[Any] = []
    orig = ex_mod.Executor.__init__

    def record(self: Any, *a: Any, **k: Any) -> None:
        orig(self, *a, **k)
        seen.append(self)

    monkeypatch.setattr(ex_mod.Executor, "__init__", record)
    with tf.Session(graph=g) as sess, warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would fail the step
        sess.run(v.initializer)
        got = sess.run(q, {x: np.float32([1.0, 0.0])})
        assert np.isposinf(got[0]) and np.isnan(got[1])
        np.testing.assert_array_equal(sess.run(read), [1.0, 2.0])
    kinds = {tuple(sorted(c.node.type for c in e.nodes)): e._moves_only for e in seen
             if e.straight_line}
    assert any(not quiet and "RealDiv" in types for types, quiet in kinds.items()), kinds
    assert any(quiet and "VariableV2" in types for types, quiet in kinds.items()), kinds
