"""The dataflow scheduler: pending counts and a ready stack over a compiled plan.

Kernels run inline on the caller's thread, which costs least per node; with
``inter_op_parallelism_threads > 1`` an expensive kernel goes to the inter-op pool when
something else could run meanwhile. Asynchronous kernels (``_Recv``, blocking queue
ops) complete through a callback into a queue the scheduler waits on. Plans with
Switch/Merge carry dead values: a node with a dead input is dead itself without
running; a Merge fires on its first live input.
"""
from __future__ import annotations

import os
import queue
import threading
import time
from typing import Any, Callable, Sequence

import numpy as np

from ..base import errors
from ..base.threads import DaemonPool
from ..plugin.resources import VarRef
from .plan import DEAD, NodeStat, StepContext, _CNode, _stat, op_error_for

__all__ = ["run_dataflow", "inter_op_pool"]


def _init_worker_thread() -> None:
    np.seterr(all="ignore")  # TF gives inf/nan silently; pool threads own their state


_POOLS: dict[int, DaemonPool] = {}
_POOLS_LOCK = threading.Lock()


def inter_op_pool(threads: int) -> DaemonPool:
    """A process-wide pool per size (threads <= 0: one per core). Its threads are
    daemon threads: process exit never waits for a step, and a thread still running
    steps after the main thread ended can still use it."""
    pool = _POOLS.get(threads)
    if pool is not None:
        return pool
    n = threads if threads > 0 else max(2, os.cpu_count() or 2)
    pool = _POOLS.get(n)
    if pool is None:
        with _POOLS_LOCK:
            pool = _POOLS.get(n)
            if pool is None:
                pool = _POOLS[n] = DaemonPool(n, thread_name_prefix="flowrt-interop",
                                              initializer=_init_worker_thread,
                                              idle_timeout=None)
                _POOLS[threads] = pool
    return pool


def run_dataflow(ex: Any, args: Sequence[Any], step: StepContext,
                 stats: list[NodeStat] | None, timeout: float | None,
                 pool_task: Callable[..., None]) -> list[Any]:
    """Run one step of ``ex`` on the dataflow scheduler; returns the fetch slots' values.

    ``pool_task(c, step, ins, done_q, clock)`` runs an expensive kernel on the inter-op
    pool (:func:`_run_on_pool`; a parameter so that tests can watch it).
    """
    nodes = ex.nodes
    vals: list[Any] = [None] * ex.nslots
    pending = [c.n_pending for c in nodes]
    ready = list(reversed(ex.initial_ready))
    done_q: "queue.SimpleQueue[tuple[int, Any, BaseException | None, float, float]]" = \
        queue.SimpleQueue()
    pool = None
    outstanding = 0
    remaining = len(nodes)
    error: BaseException | None = None
    clock = time.perf_counter
    deadline = None if not timeout else clock() + timeout

    has_dead = ex.has_dead
    is_dead = [False] * len(nodes) if has_dead else None
    merge_pick = [None] * len(nodes) if has_dead else None  # chosen input, or -1

    def finish(i: int, result: Any) -> None:
        """Store node ``i``'s outputs and make ready the successors that now can run."""
        c = nodes[i]
        if c.n_out == 1:
            vals[c.out_base] = result
        elif c.n_out > 1:
            if len(result) != c.n_out:
                raise errors.InternalError(None, c.node.source_op,
                                           f"kernel of {c.node.name} returned "
                                           f"{len(result)} outputs, expected {c.n_out}")
            vals[c.out_base:c.out_base + c.n_out] = result
        for s in c.succ:
            pending[s] -= 1
            if has_dead and nodes[s].kind == "merge":
                # a Merge fires on its first live input, or dead once all are dead
                if merge_pick[s] is not None:
                    continue
                sc = nodes[s]
                lo, hi = c.out_base, c.out_base + c.n_out
                for k, sl in enumerate(sc.in_slots):
                    if lo <= sl < hi and vals[sl] is not DEAD:
                        merge_pick[s] = k
                        ready.append(s)
                        break
                else:
                    if pending[s] == 0:
                        merge_pick[s] = -1
                        ready.append(s)
                continue
            if pending[s] == 0:
                ready.append(s)

    def inputs_of(c: _CNode) -> list[Any]:
        if True in c.deref:  # (a Merge may hand over a reference or a value)
            return [vals[s].read() if d and type(vals[s]) is VarRef else vals[s]
                    for s, d in zip(c.in_slots, c.deref)]
        return [vals[s] for s in c.in_slots]

    with np.errstate(all="ignore"):
        while remaining:
            while ready and error is None:
                i = ready.pop()
                c = nodes[i]
                if c.kind == "arg":
                    vals[c.out_base] = args[c.arg_index]
                    remaining -= 1
                    finish(i, vals[c.out_base])
                    continue
                if has_dead:
                    if c.kind == "merge":
                        k = merge_pick[i]
                        if k is None or k < 0:
                            is_dead[i] = True
                            r = (DEAD, DEAD)
                        else:
                            r = (vals[c.in_slots[k]], np.int32(k))
                        remaining -= 1
                        finish(i, r)
                        continue
                    if not c.dead_transparent and (
                            any(vals[sl] is DEAD for sl in c.in_slots) or
                            any(is_dead[p] for p in c.ctrl_preds)):
                        # a dead input kills the node: its kernel does not run
                        is_dead[i] = True
                        remaining -= 1
                        finish(i, DEAD if c.n_out == 1 else (DEAD,) * c.n_out
                               if c.n_out else None)
                        continue
                try:
                    ins = inputs_of(c)
                except Exception as e:
                    error = op_error_for(e, c.node, c.device_name)
                    remaining -= 1
                    break
                if c.kind == "async":
                    outstanding += 1
                    t0 = clock()

                    def done(result: Any = None, exc: BaseException | None = None,
                             i: int = i, t0: float = t0) -> None:
                        done_q.put((i, result, exc, t0, clock(), threading.get_ident()))

                    try:
                        c.compute(step, done, *ins)
                    except Exception as e:
                        done(None, e)
                    continue
                if c.expensive and ex.use_pool and (ready or outstanding):
                    if pool is None:
                        pool = inter_op_pool(ex.inter_op_threads)
                    outstanding += 1
                    pool.submit(pool_task, c, step, ins, done_q, clock)
                    continue
                t0 = clock() if stats is not None else 0.0
                try:
                    # ("const" kernels are zero-argument computes: the plain call)
                    r = c.compute(step, *ins) if c.kind == "step" else c.compute(*ins)
                except Exception as e:
                    error = op_error_for(e, c.node, c.device_name)
                    remaining -= 1
                    break
                if stats is not None:
                    stats.append(_stat(c, t0, clock(), threading.get_ident()))
                remaining -= 1
                try:
                    finish(i, r)
                except Exception as e:
                    error = op_error_for(e, c.node, c.device_name)
                    break
            if error is not None:
                step.abort(error)
                # let work in flight finish (it is told to stop through the step);
                # a kernel that ignores the abort is abandoned after a grace period
                while outstanding:
                    try:
                        done_q.get(timeout=10.0)
                    except queue.Empty:
                        break
                    outstanding -= 1
                raise error
            if not remaining:
                break
            if not outstanding:
                stuck = [nodes[k].node.name for k in range(len(nodes)) if pending[k] > 0]
                error = errors.InternalError(None, None, "step deadlocked: nodes never "
                                             f"became ready: {stuck[:5]}")
                step.abort(error)
                raise error
            try:
                i, r, exc, t0, t1, tid = done_q.get(
                    timeout=None if deadline is None else max(0.0, deadline - clock()))
            except queue.Empty:
                error = errors.DeadlineExceededError(
                    None, None, f"Timed out waiting for the step to finish (deadline "
                    f"{timeout:g} s); {outstanding} node(s) were still blocked")
                step.abort(error)
                continue
            outstanding -= 1
            remaining -= 1
            c = nodes[i]
            if exc is not None:
                error = op_error_for(exc, c.node, c.device_name)
                continue
            if stats is not None:
                stats.append(_stat(c, t0, t1, tid))
            if has_dead and r is DEAD and c.n_out == 1:
                is_dead[i] = True
            try:
                finish(i, r)
            except Exception as e:
                error = op_error_for(e, c.node, c.device_name)
        if error is not None:
            step.abort(error)
            raise error
    return [vals[s] for s in ex.fetch_slots]


def _run_on_pool(c: _CNode, step: StepContext, ins: list[Any], done_q: Any,
                 clock: Callable[[], float]) -> None:
    t0 = clock()
    tid = threading.get_ident()
    try:
        r = c.compute(step, *ins) if c.kind == "step" else c.compute(*ins)
    except BaseException as e:  # noqa: BLE001 - reported to the scheduler
        done_q.put((c.index, None, e, t0, clock(), tid))
        return
    done_q.put((c.index, r, None, t0, clock(), tid))


