"""The executor matrix (issue 14, item 6): every executor path x every kind of kernel x
every placement context, each cell one small TF1 program checked against a numpy model
of it (and, for the cells that run over a cluster, against the same program run in a
plain local session), with the path each cell means to take asserted from what actually
ran, so that the matrix cannot quietly collapse onto one path.

Paths (how the step runs):

- ``straight``: a local session; each partition is one generated straight-line function.
- ``dataflow``: a local session; the dataflow scheduler (pending counts, ready queue).
  A top-level cell gets a side ``tf.cond`` on its device (dead tensors keep a plan off
  the straight line; a top-level queue op would too, but not the other kinds).
- ``frames``: a local session; the frame-aware scheduler. A cell whose program has no
  loop gets a side ``tf.while_loop`` on each of its devices, so that the kernel runs in
  the root frame of a plan with loops.
- ``remote_<protocol>``: a session on the worker task of a ps + worker cluster of
  in-process ``tf.train.Server``s (inproc, or real sockets on 127.0.0.1 for grpc and
  zmq), staging off: one RunGraph per task, tensors crossing the transport.
- ``staged_<protocol>``: the same cluster with staging on (grpc and zmq, whose channels
  can cancel a waiting call): three plain calls per step, and the parts whose receives
  arrived with the call run the straight-line ``_fn_ready`` variant.

Kernel kinds (tests/_matrix.py): cheap elementwise (Mul, AddV2), BLAS-heavy (MatMul, an
"expensive" kernel; ``blas_pool`` is two independent MatMuls with
``inter_op_parallelism_threads=2``, so that one runs on the inter-op pool), asynchronous
(FIFOQueue enqueue and dequeue), stateful (AssignAdd on a variable, whose value carries
across the steps) and string (ReverseV2, string AddV2: flowrt has no tf.strings ops).

Placement contexts: top level; inside ``tf.cond`` (the taken branch alternates over the
steps); inside ``tf.while_loop``; nested: a cond in a loop, a loop in a loop, a loop in a
cond; across two devices: at top level (the kernel on another device than its source and
sink), and in a cond or a loop whose control flow is on another device than the kernel
(a cond and a loop spanning devices). Locally the program is on one device, or on two
CPU devices (``device_count={"CPU": 2}``) for the two-device contexts. Remote cells keep
the source, the sink and the kind's state (variable, queue) on the ps and the rest on the
worker (the master's task), so that every step crosses the transport both ways; their
two-device contexts put the kernel on the ps instead.

Some combinations cannot take their path at all; :func:`prune_reason` says why for each,
and :func:`test_pruned_cells_really_cannot_take_their_path` checks that the reason holds,
so nothing is skipped silently.
"""
from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest

import flowrt as tf
import flowrt.testing as ft
from flowrt import master as master_mod
from flowrt.server import Server

from _matrix import (CONDS, CONTEXTS, KINDS, LOOPS, STEPS, TWO_DEVICES, Probe, Program,
                     assert_same, device_of, kernel_nodes)

PS, WORKER = "/job:ps/task:0", "/job:worker/task:0"
PROTOCOLS = ("inproc", "grpc", "zmq")
LOCAL_PATHS = ("straight", "dataflow", "frames")
REMOTE_PATHS = tuple(f"remote_{p}" for p in PROTOCOLS)
# (inproc channels cannot cancel a waiting call: the master never stages over them)
STAGED_PATHS = ("staged_grpc", "staged_zmq")
PATHS = LOCAL_PATHS + REMOTE_PATHS + STAGED_PATHS
TIMEOUT_MS = 20000  # a cell that hangs fails instead of stalling the suite


def prune_reason(path: str, kind: str, ctx: str) -> str | None:
    """Why the cell ``(path, kind, ctx)`` cannot take its path (None: it can)."""
    if path == "straight":
        # a straight-line plan has no asynchronous kernel, no pool, no dead tensors and
        # no loop (Executor.straight_line)
        if ctx in LOOPS:
            return "a plan with a loop always runs on the frame-aware scheduler"
        if ctx in CONDS:
            return "Switch/Merge make dead tensors: the plan needs the dataflow scheduler"
        if ctx in TWO_DEVICES:
            return ("each partition receives from the other (an asynchronous _Recv), and "
                    "a local session never runs the receives-ready variant")
        if kind == "async":
            return "queue ops are asynchronous kernels: they complete through a callback"
        if kind == "blas_pool":
            return "the inter-op pool is used by the dataflow and frame schedulers only"
    if path == "dataflow" and ctx in LOOPS:
        return "a plan with a loop always runs on the frame-aware scheduler"
    if path in STAGED_PATHS:
        # (flowrt.partition.split_stages)
        if ctx in LOOPS:
            return "a step with a loop is never staged"
        if kind == "async":
            return "a step with a kernel that waits (a queue op) is never staged"
        if ctx == "two_devices":
            return ("the ps receives the source before it computes: it has nothing to "
                    "send to the worker before the worker sends to it (no first stage)")
        if ctx == "cond_two_devices" or (kind == "stateful" and ctx == "cond"):
            return ("the kernel (or the variable's update) on the ps takes the worker's "
                    "Switch output and feeds the worker's Merge: the tasks answer each "
                    "other (ping-pong)")
    return None


CELLS = [(p, k, c) for p in PATHS for k in KINDS for c in CONTEXTS]
LIVE = [cell for cell in CELLS if prune_reason(*cell) is None]
PRUNED = [cell for cell in CELLS if prune_reason(*cell) is not None]


# -- building and running a cell ---------------------------------------------------------
def program_for(path: str, kind: str, ctx: str) -> Program:
    """The cell's program: locally on one device, or on two CPU devices (the kernel on
    CPU:1) for the two-device contexts; remotely with the source, sink and state on the
    ps and the rest on the worker, except that the two-device contexts put the kernel on
    the ps (and the plain ``two_devices`` one the source and sink on the worker)."""
    if path in LOCAL_PATHS:
        force = None
        if path == "dataflow" and ctx == "top":  # (the one context that runs straight)
            force = "cond"
        if path == "frames" and ctx not in LOOPS:
            force = "loop"
        if ctx in TWO_DEVICES:
            return Program(kind, ctx, "/cpu:0", "/cpu:0", "/cpu:1", force)
        return Program(kind, ctx, force=force)
    if ctx == "two_devices":
        return Program(kind, ctx, WORKER, WORKER, PS)
    if ctx in TWO_DEVICES:
        return Program(kind, ctx, PS, WORKER, PS)
    return Program(kind, ctx, PS, WORKER, WORKER)


def config_for(path: str, kind: str, ctx: str) -> Any:
    kw: dict[str, Any] = dict(operation_timeout_in_ms=TIMEOUT_MS)
    if KINDS[kind].pool:
        kw["inter_op_parallelism_threads"] = 2
    if path in LOCAL_PATHS and ctx in TWO_DEVICES:
        kw["device_count"] = {"CPU": 2}
    return tf.ConfigProto(**kw)


_LOCAL_REFERENCE: dict[tuple[str, str], tuple[list[Any], list[Any]]] = {}


def local_reference(kind: str, ctx: str) -> tuple[list[Any], list[Any]]:
    """The program's results in a plain local session (one device, default config but
    the pool kind's threads): the simplest path it can take."""
    key = (kind, ctx)
    if key not in _LOCAL_REFERENCE:
        prog = Program(kind, ctx)
        _LOCAL_REFERENCE[key] = prog.run("", config_for("straight", kind, "top"))
    return _LOCAL_REFERENCE[key]


@pytest.fixture(scope="module")
def cluster():
    """``cluster(protocol)``: the target of the worker task of a ps + worker cluster of
    in-process Servers over ``protocol``, started on first use and stopped at the end of
    the module (so each cluster starts once per pytest-xdist worker that needs it)."""
    started: dict[str, list[Server]] = {}

    def target(protocol: str) -> str:
        if protocol not in started:
            spec = ft.cluster_addresses(protocol, {"ps": 1, "worker": 1})
            started[protocol] = []
            for job in ("ps", "worker"):
                started[protocol].append(Server(spec, job, 0, protocol=protocol))
        return started[protocol][1].target

    yield target
    for servers in started.values():
        for s in servers:
            s.stop()


@pytest.fixture
def probe(monkeypatch):
    return Probe(monkeypatch)


def _check_values(prog: Program, outs: list[Any], state: list[Any]) -> None:
    want = prog.expected()
    assert len(outs) == STEPS
    for s, (got, w) in enumerate(zip(outs, want)):
        assert_same(prog.kind, got, w, f"step {s}: out vs the numpy model")
    want_state = prog.expected_state()
    assert len(state) == len(want_state)
    for got, w in zip(state, want_state):  # (integers: a variable, a queue's size)
        assert np.asarray(got).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(got, w, "state after the steps vs the numpy model")


def _check_local_path(path: str, kind: str, probe: Probe) -> None:
    runs = probe.kernel_runs()
    assert runs, "no partition holding the kernel under test ran"
    taken = {p for _, p in runs}
    assert taken == {path}, f"the kernel's partitions took {taken}, not {path!r}"
    for ex, _ in runs:
        if path == "straight":
            assert ex.straight_line and ex.frames is None
        elif path == "dataflow":
            assert not ex.straight_line and ex.frames is None
        else:
            assert ex.frames is not None and not ex.straight_line


def _check_remote_path(path: str, ctx: str, probe: Probe) -> None:
    staged = path in STAGED_PATHS
    want = {"staged": STEPS} if staged else {"workers": STEPS}
    assert dict(probe.steps) == want, f"the master ran {dict(probe.steps)}, not {want}"
    # both tasks ran a part of each step, exchanging tensors
    tasks = collections.Counter(device_of(ex).split("/replica")[0] for ex, _ in probe.runs)
    assert set(tasks) == {"/job:ps", "/job:worker"}, tasks
    for ex, _ in probe.runs:
        if device_of(ex).startswith("/job:ps"):
            assert any(c.node.type in ("_Send", "_Recv") for c in ex.nodes)
    if not path.endswith("inproc"):  # through the transport's client
        assert probe.rpcs["Worker/RunGraph"] >= (2 if staged else 1) * STEPS, probe.rpcs
    if staged:
        # the parts whose receives came with the call run straight through
        ready = [ex for ex, p in probe.runs if p == "ready"]
        assert len(ready) >= STEPS and all(ex.can_run_ready for ex in ready)
        assert probe.rpcs["Worker/RecvTensor"] == 0 and probe.rpcs["Worker/RecvTensors"] == 0
    runs = probe.kernel_runs()
    assert runs, "no partition holding the kernel under test ran"
    if ctx in LOOPS:  # (each task's partition of the loop has its copy of the frame)
        assert {p for _, p in runs} == {"frames"}, runs


def _check_kind(kind: str, probe: Probe) -> None:
    runs = probe.kernel_runs()
    if kind.startswith("blas"):
        mm = [c for ex, _ in runs for c in kernel_nodes(ex) if c.node.type == "MatMul"]
        assert mm and all(c.expensive for c in mm)
    if kind == "blas_pool":
        assert all(ex.use_pool for ex, _ in runs if any(
            c.node.type == "MatMul" for c in kernel_nodes(ex)))
        assert any("/kut/MatMul" in n for n in probe.pooled), \
            f"no MatMul ran on the inter-op pool: {probe.pooled}"
    else:
        assert not probe.pooled and not any(ex.use_pool for ex, _ in runs)
    if kind == "async":
        assert any(c.kind == "async" and c.node.type.startswith("Queue")
                   for ex, _ in runs for c in kernel_nodes(ex))


@pytest.mark.parametrize("path,kind,ctx", LIVE, ids=["-".join(c) for c in LIVE])
def test_cell(path, kind, ctx, probe, cluster, monkeypatch):
    prog = program_for(path, kind, ctx)
    cfg = config_for(path, kind, ctx)
    if path in LOCAL_PATHS:
        target = ""
    else:
        monkeypatch.setattr(master_mod, "STAGED", path in STAGED_PATHS)
        target = cluster(path.split("_", 1)[1])
    outs, state = prog.run(target, cfg, probe)
    _check_values(prog, outs, state)
    if path in LOCAL_PATHS:
        _check_local_path(path, kind, probe)
    else:
        _check_remote_path(path, ctx, probe)
        ref_outs, ref_state = local_reference(kind, ctx)
        for s, (got, want) in enumerate(zip(outs, ref_outs)):
            assert_same(prog.kind, got, want, f"step {s}: remote vs local session")
        for got, want in zip(state, ref_state):
            np.testing.assert_array_equal(got, want)
    _check_kind(kind, probe)


def test_the_matrix_keeps_its_shape():
    """Every path, kind and context has live cells, and the product is fully accounted
    for (a cell is either run or pruned with a reason)."""
    assert len(CELLS) == len(PATHS) * len(KINDS) * len(CONTEXTS)
    assert len(LIVE) + len(PRUNED) == len(CELLS)
    for i, dim in enumerate((PATHS, KINDS, CONTEXTS)):
        assert {c[i] for c in LIVE} == set(dim)
    # the cell of issue 14's first bug: MatMul (expensive) in a loop body, on frames
    assert ("frames", "blas", "while") in LIVE and ("frames", "blas_pool", "while") in LIVE


# -- the pruned cells -----------------------------------------------------------------------
def _staged_split(prog: Program) -> Any:
    """What split_stages makes of the program's step over a ps and a worker task."""
    from flowrt.ir import extract_step_graph
    from flowrt.partition import partition, split_stages
    from flowrt.placement import place
    from flowrt.runtime import default_runtime
    from flowrt.worker import Worker

    rt = default_runtime()
    feeds = list(prog.feeds(0))
    ir = extract_step_graph(prog.graph, feeds, prog.fetches(), [])
    workers = [Worker(rt, "ps", 0), Worker(rt, "worker", 0)]
    parts = partition(ir, place(ir, [d for w in workers for d in w.devices], rt), rt)
    assert len({p.device.name for p in parts}) == 2
    return split_stages(parts, ("worker", 0), rt)


@pytest.mark.parametrize("path", sorted({c[0] for c in PRUNED}))
def test_pruned_cells_really_cannot_take_their_path(path, probe):
    """Each pruned cell's program, run (or split) as its path would, does not take that
    path: the reason given for pruning it holds."""
    cells = [(k, c) for p, k, c in PRUNED if p == path]
    assert cells
    for kind, ctx in cells:
        if path in STAGED_PATHS:
            assert _staged_split(program_for(path, kind, ctx)) is None, (kind, ctx)
            continue
        probe.runs.clear()
        program_for(path, kind, ctx).run("", config_for(path, kind, ctx), probe)
        runs = probe.kernel_runs()
        assert runs, (kind, ctx)
        taken = {p for _, p in runs}
        if path == "straight":
            assert "straight" not in taken and not any(ex.straight_line for ex, _ in runs), \
                (kind, ctx, taken)
        else:  # dataflow: loops always take the frame-aware scheduler
            assert taken == {"frames"} and all(ex.frames is not None for ex, _ in runs), \
                (kind, ctx, taken)
