"""Runs one partition of a step: compiled once into a flat plan, then run many times.

Compilation resolves every kernel, assigns every tensor a slot and precomputes each
node's input slots, successors and pending count. Two schedulers share that plan:

- *straight-line*: when no kernel is asynchronous and at most one is expensive, the plan
  is generated as one Python function whose body is a call per node in topological
  order -- no scheduling work at all per step;
- *dataflow*: pending counts and a ready queue; kernels run inline on the caller's
  thread, except that with ``inter_op_parallelism_threads > 1`` expensive ones go to the
  inter-op pool while others proceed; asynchronous kernels (Recv, blocking queue ops)
  complete through a callback. Traced steps
  (``RunOptions.trace_level``) use this scheduler and record per-node times.

The first error aborts the step: no further nodes start, and the error names the node,
its op and its device.
"""
from __future__ import annotations

import hashlib
import os
import queue
import sys
import threading
import time
from typing import Any, Callable, Sequence

import numpy as np

from ..base import errors
from .ir import ARG_OP, GraphIR, Node, timeline_label
from ..plugin.op_registry import KernelContext
from ..plugin.resources import VarRef
from ..base.threads import DaemonPool

__all__ = ["Executor", "StepContext", "op_error_for", "SessionState", "NodeStat", "DEAD"]


class StepContext:
    """What ``kind="step"``/``"async"`` kernels see for the step being run."""

    __slots__ = ("step_id", "rendezvous", "session_state", "cancelled", "error",
                 "_callbacks", "_lock", "runtime")

    def __init__(self, step_id: int, rendezvous: Any = None, session_state: Any = None,
                 runtime: Any = None):
        self.step_id = step_id
        self.rendezvous = rendezvous
        self.session_state = session_state
        self.runtime = runtime
        self.cancelled = False
        self.error: BaseException | None = None
        self._callbacks: list[Callable[[BaseException], None]] = []
        self._lock = threading.Lock()

    def on_abort(self, fn: Callable[[BaseException], None]) -> None:
        """Call ``fn(error)`` if the step aborts (immediately if it already has)."""
        with self._lock:
            if self.error is None:
                self._callbacks.append(fn)
                return
        fn(self.error)

    def abort(self, error: BaseException) -> None:
        """Abort the step: wake every blocked kernel with ``error``."""
        with self._lock:
            if self.error is not None:
                return
            self.error = error
            self.cancelled = True
            cbs, self._callbacks = self._callbacks, []
        for cb in cbs:
            try:
                cb(error)
            except Exception:  # pragma: no cover - a callback must not mask the error
                pass


class SessionState:
    """Per-session state shared by every executor of one session (TF's OpSegment):
    stateful kernels are built once per session and node name, so a random op keeps its
    sequence across step signatures."""

    def __init__(self, handle: str = ""):
        self.handle = handle
        self.stateful_kernels: dict[tuple[str, str], Callable[..., Any]] = {}
        self.lock = threading.Lock()


class NodeStat:
    """One node's execution in a traced step (perf_counter seconds)."""

    __slots__ = ("node_name", "op", "device", "start", "end", "thread_id", "label")

    def __init__(self, node_name: str, op: str, device: str, start: float, end: float,
                 thread_id: int, label: str = ""):
        self.node_name, self.op, self.device = node_name, op, device
        self.start, self.end, self.thread_id = start, end, thread_id
        self.label = label


def _stat(c: "_CNode", t0: float, t1: float, thread_id: int) -> NodeStat:
    label = c.label
    if label is None:  # TF's timeline label, made once per compiled node when traced
        label = c.label = timeline_label(c.node)
    return NodeStat(c.node.name, c.node.type, c.device_name, t0, t1, thread_id, label)


def op_error_for(exc: BaseException, node: Any, device_name: str = "") -> errors.OpError:
    """Turn any exception raised by ``node``'s kernel into the right OpError naming it."""
    where = f"[[node {node.name} (op {node.type})" + (f" on {device_name}" if device_name
                                                     else "") + "]]"
    if isinstance(exc, errors.OpError):
        if f"[[node {node.name} " in exc.message or "[[node " in exc.message:
            return exc
        e = type(exc)(exc._node_def, exc.op or getattr(node, "source_op", None),
                      f"{exc.message}\n\t {where}")
        e.__cause__ = exc.__cause__
        return e
    if isinstance(exc, MemoryError):
        cls: type[errors.OpError] = errors.ResourceExhaustedError
    elif isinstance(exc, NotImplementedError):
        cls = errors.UnimplementedError
    elif isinstance(exc, StopIteration):
        cls = errors.OutOfRangeError
    elif isinstance(exc, (ValueError, IndexError, TypeError, ZeroDivisionError,
                          FloatingPointError, OverflowError, KeyError)):
        cls = errors.InvalidArgumentError
    else:  # as TF reports Python exceptions raised inside a step
        cls = errors.UnknownError
    e = cls(None, getattr(node, "source_op", None),
            f"{type(exc).__name__}: {exc}\n\t {where}")
    e.__cause__ = exc
    return e


class _Dead:
    """The value of a dead tensor: an output of the untaken side of a Switch, and of
    every node downstream of one (Merge excepted). Kernels never see it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<dead>"


#: the sentinel a ``kind="switch"`` kernel returns for the output it does not take
DEAD = _Dead()

#: ops that pass a dead input on instead of dying with it (a send must still tell the
#: receiving partition that the tensor is dead)
_DEAD_TRANSPARENT = frozenset({"_Send"})

_REF_FORWARDING = frozenset({"Identity"})

_ENTER_OPS = frozenset({"Enter", "RefEnter"})
_EXIT_OPS = frozenset({"Exit", "RefExit"})
_NEXT_OPS = frozenset({"NextIteration", "RefNextIteration"})
_FRAME_OPS = _ENTER_OPS | _EXIT_OPS | _NEXT_OPS


def _forward(x: Any) -> Any:
    return x


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


class _CNode:
    """A compiled node."""

    __slots__ = ("node", "index", "compute", "kind", "expensive", "in_slots", "deref",
                 "out_base", "n_out", "succ", "n_pending", "device_name", "arg_index", "label",
                 "ctrl_preds", "dead_transparent",
                 # frame-aware scheduling (plans with loops)
                 "frame", "lidx", "fkind", "f_in", "f_out", "f_kill", "f_ctrl_kill",
                 "f_all_kill", "const_enter", "child", "f_succ", "fast", "simple_out",
                 "f_exit")

    def __init__(self) -> None:
        self.label: str | None = None
        self.succ: list[int] = []
        self.deref: tuple[bool, ...] = ()
        self.arg_index = -1


class Executor:
    """A compiled partition.

    :param ir: the partition's nodes (``_Arg`` nodes take ``args`` by their ``index``)
    :param fetches: endpoints whose values :meth:`run` returns, in order
    :param device_of: ``node -> Device`` (the node's assigned device)
    :param runtime: the runtime whose kernels are used
    :param session_state: the owning session's state (stateful kernels)
    :param inter_op_threads: pool size for expensive kernels (0: one per core)
    """

    def __init__(self, ir: GraphIR, fetches: Sequence[tuple[str, int]],
                 device_of: Callable[[Node], Any], runtime: Any,
                 session_state: SessionState | None = None, inter_op_threads: int = 0,
                 allow_straight_line: bool = True):
        self.runtime = runtime
        self.session_state = session_state or SessionState()
        self.inter_op_threads = inter_op_threads
        order = ir.topo_sort()
        devs: dict[int, Any] = {}
        self.nodes: list[_CNode] = []
        slot_of: dict[tuple[str, int], int] = {}
        index_of: dict[str, int] = {}
        nslots = 0
        self.n_args = 0
        ref_slots: list[bool] = []  # slots that may hold a VarRef
        for i, node in enumerate(order):
            c = _CNode()
            c.node, c.index = node, i
            dev = device_of(node)
            devs[id(dev)] = dev
            c.device_name = dev.name
            c.out_base = nslots
            c.n_out = len(node.out_dtypes)
            for k in range(c.n_out):
                slot_of[(node.name, k)] = nslots + k
            nslots += c.n_out
            index_of[node.name] = i
            for k in range(c.n_out):
                ref_slots.append(node.out_dtypes[k].is_ref_dtype)
            if node.type in _REF_FORWARDING and node.inputs and \
                    ref_slots[slot_of[node.inputs[0]]]:
                # TF's Identity of a reference forwards the reference: the variable is
                # read when the value is consumed, so reads ordered after an update (by
                # control dependencies) see it, as with TF's aliased buffers.
                ref_slots[c.out_base] = True
                c.compute, c.kind, c.expensive = _forward, "alias", False
            elif node.type == ARG_OP:
                c.arg_index = node.node_attrs["index"]
                c.compute, c.kind, c.expensive = None, "arg", False
                self.n_args = max(self.n_args, c.arg_index + 1)
            else:
                kdef = runtime.find_kernel(node.type, dev.device_type, node.node_attrs)
                if kdef is None:
                    have = runtime.kernel_device_types(node.type)
                    raise errors.InvalidArgumentError(
                        None, node.source_op,
                        f"No kernel for op '{node.type}' of node '{node.name}' on device "
                        f"{dev.name}. Device types with a kernel for it: {have or 'none'}.")
                c.compute = self._build_kernel(node, kdef, dev)
                c.kind, c.expensive = kdef.kind, kdef.expensive
                if c.kind == "merge" and any(ref_slots[slot_of[e]] for e in node.inputs
                                             if e in slot_of):
                    ref_slots[c.out_base] = True  # it forwards a reference as it is

            self.nodes.append(c)
        self.nslots = nslots
        # inputs, successors, pending counts
        for c in self.nodes:
            node = c.node
            try:
                c.in_slots = tuple(slot_of[e] for e in node.inputs)
            except KeyError as e:
                raise errors.InternalError(None, node.source_op,
                                           f"node {node.name}: input {e} is not in the step "
                                           "graph") from None
            if c.kind == "alias":
                c.deref = (False,)
            else:
                c.deref = tuple(ref_slots[sl] and not arg.is_ref
                                for sl, arg in zip(c.in_slots, node.input_args()))
            c.ctrl_preds = tuple(index_of[n] for n in node.control_inputs)
            c.dead_transparent = node.type in _DEAD_TRANSPARENT
            preds = {index_of[s] for s, _ in node.inputs} | set(c.ctrl_preds)
            c.n_pending = len(preds)
            for p in preds:
                self.nodes[p].succ.append(c.index)
        try:
            self.fetch_slots = [slot_of[e] for e in fetches]
        except KeyError as e:
            raise errors.InternalError(None, None, f"fetch {e} is not in the step graph") \
                from None
        self.fetch_is_ref = [ref_slots[sl] for sl in self.fetch_slots]
        self.initial_ready = [c.index for c in self.nodes if c.n_pending == 0]
        # loops: plans with Enter/Exit/NextIteration run on the frame-aware scheduler
        n_exp = sum(1 for c in self.nodes if c.expensive)
        # The inter-op pool pays only when asked for (inter_op_parallelism_threads > 1):
        # numpy's heavy kernels are already multithreaded inside (BLAS), and on a few
        # cores running them side by side measured slower than one after another.
        # (Set before the frame plan, which reads it for every expensive node.)
        self.use_pool = inter_op_threads > 1 and n_exp >= 2
        self.frames: _FramePlan | None = None
        if any(c.node.type in _FRAME_OPS for c in self.nodes):
            self.frames = _FramePlan(self, fetches)
        self.has_async = any(c.kind == "async" for c in self.nodes)
        # dead tensors appear with control flow (Switch/Merge) and can arrive through a
        # _Recv from a partition that has it: such plans check for them
        self.has_dead = any(c.kind in ("switch", "merge") or c.node.type == "_Recv"
                            for c in self.nodes)
        self.straight_line = (allow_straight_line and not self.has_async and
                              not self.use_pool and not self.has_dead and self.frames is None)
        self._fn: Callable[..., list[Any]] | None = None
        self._lines: list[int] = []
        if self.straight_line:
            self._fn = self._generate()
        #: a straight-line variant for steps whose receives are all already in the
        #: step's rendezvous (the caller checks): each ``_Recv`` takes its value
        #: synchronously. Only when receives are the sole asynchronous kernels.
        self._fn_ready: Callable[..., list[Any]] | None = None
        self._ready_lines: list[int] = []
        if (allow_straight_line and self.has_async and not self.use_pool and
                self.frames is None and  # (dead values only through receives: checked)
                not any(c.kind in ("switch", "merge") for c in self.nodes) and
                all(c.kind != "async" or c.node.type == "_Recv" for c in self.nodes)):
            # (never together with ``_fn``: that one needs no asynchronous kernel)
            self._fn_ready = self._generate(recvs_ready=True)
            self._ready_lines, self._ready_code = self._lines, self._code
        #: an accelerator's ``activate()`` (its device and stream made current), entered
        #: once around a straight-line run of a partition on that one device
        self._activate: Callable[[], Any] | None = None
        if len(devs) == 1:
            self._activate = getattr(next(iter(devs.values())), "activate", None)

    # -- compilation ------------------------------------------------------------------
    def _build_kernel(self, node: Node, kdef: Any, dev: Any) -> Callable[..., Any]:
        st = self.session_state
        if node.is_stateful:
            key = (node.name, dev.name)
            with st.lock:
                fn = st.stateful_kernels.get(key)
                if fn is None:
                    fn = st.stateful_kernels[key] = self._call_factory(node, kdef, dev)
            return fn
        return self._call_factory(node, kdef, dev)

    def _call_factory(self, node: Node, kdef: Any, dev: Any) -> Callable[..., Any]:
        try:
            return kdef.factory(KernelContext(node, dev, self.session_state))
        except errors.OpError as e:
            raise op_error_for(e, node, dev.name) from None
        except Exception as e:
            raise op_error_for(e, node, dev.name) from e

    def _generate(self, recvs_ready: bool = False) -> Callable[..., list[Any]]:
        """Emit the straight-line step function (with ``recvs_ready``: the variant in
        which each ``_Recv`` takes a value already in the rendezvous)."""
        lines = ["def step(args, step_ctx):"]
        env: dict[str, Any] = {"_take_now": _take_now}
        self._lines = []
        for c in self.nodes:
            outs = [f"v{c.out_base + k}" for k in range(c.n_out)]
            if c.kind == "arg":
                lines.append(f"    {outs[0]} = args[{c.arg_index}]")
                self._lines.append(c.index)
                continue
            kname = f"k{c.index}"
            if c.kind == "alias":
                lines.append(f"    {outs[0]} = v{c.in_slots[0]}")
                self._lines.append(c.index)
                continue
            if c.kind == "const":
                env[kname] = c.compute()
                lines.append(f"    {outs[0]} = {kname}")
                self._lines.append(c.index)
                continue
            env[kname] = c.compute
            if c.kind == "async":  # a _Recv (recvs_ready): its value is waiting
                lines.append(f"    {outs[0]} = _take_now({kname}, step_ctx)")
                self._lines.append(c.index)
                continue
            ins = [f"v{s}.read()" if d else f"v{s}" for s, d in zip(c.in_slots, c.deref)]
            if c.kind == "step":
                ins.insert(0, "step_ctx")
            call = f"{kname}({', '.join(ins)})"
            if c.n_out == 0:
                lines.append(f"    {call}")
            elif c.n_out == 1:
                lines.append(f"    {outs[0]} = {call}")
            else:
                lines.append(f"    {', '.join(outs)}, = {call}")
            self._lines.append(c.index)
        lines.append("    return [" + ", ".join(f"v{s}" for s in self.fetch_slots) + "]")
        src = "\n".join(lines) + "\n"
        tag = " ready" if recvs_ready else ""
        code = compile(src, f"<flowrt step {id(self):x}{tag}>", "exec")
        self._code = code
        exec(code, env)
        return env["step"]

    # -- running ----------------------------------------------------------------------
    @property
    def can_run_ready(self) -> bool:
        """Whether :meth:`run` has a straight-line variant for ``recvs_ready`` steps."""
        return self._fn_ready is not None

    def run(self, args: Sequence[Any], step: StepContext,
            stats: list[NodeStat] | None = None, timeout: float | None = None,
            recvs_ready: bool = False) -> list[Any]:
        """Run one step; returns the fetch values (references are read).

        :param timeout: seconds a blocked step may wait before it is aborted with
            DeadlineExceededError (None: no limit)
        :param recvs_ready: the caller has checked that every value this partition
            receives is already in the step's rendezvous, none of them dead: the step
            then runs straight through (see :attr:`can_run_ready`)
        """
        if self._activate is None:
            for a in args:  # feeds are numpy arrays, unless one is a GPU array
                if type(a) is not np.ndarray:
                    args = _host_args(args)
                    break
        ready = recvs_ready and stats is None and self._fn_ready is not None
        if ready or (self._fn is not None and stats is None):
            out = self._run_straight(args, step, ready)
        elif self.frames is not None:
            out = _run_frames(self, args, step, stats, timeout)
        else:
            out = self._run_dataflow(args, step, stats, timeout)
        if self.has_dead:
            for k, v in enumerate(out):
                if v is DEAD:
                    raise errors.InvalidArgumentError(
                        None, None, f"Retval[{k}] does not have value: the fetched tensor "
                        "is on the untaken side of a conditional")
        if True in self.fetch_is_ref:
            out = [v.read() if r and isinstance(v, VarRef) else v
                   for v, r in zip(out, self.fetch_is_ref)]
        return out

    def _run_straight(self, args: Sequence[Any], step: StepContext,
                      ready: bool = False) -> list[Any]:
        """Run a generated straight-line function (``ready``: the variant whose receives
        take values already there); an error names the node it came from."""
        if ready:
            fn, code, lines = self._fn_ready, self._ready_code, self._ready_lines
        else:
            fn, code, lines = self._fn, getattr(self, "_code", None), self._lines
        try:
            if self._activate is not None:
                with np.errstate(all="ignore"), self._activate():
                    return fn(args, step)  # type: ignore[misc]
            with np.errstate(all="ignore"):
                return fn(args, step)  # type: ignore[misc]
        except Exception as e:
            c = self._failing_node(sys.exc_info()[2], code, lines)
            if c is None:
                raise
            err = op_error_for(e, c.node, c.device_name)
            step.abort(err)
            raise err from (None if isinstance(e, errors.OpError) else e)

    def _failing_node(self, tb: Any, code: Any, lines: list[int]) -> _CNode | None:
        """The node whose line of the generated step function ``code`` the traceback
        ``tb`` passes through (``lines[i]``: the node of the function's line ``i + 2``)."""
        name = code.co_filename if code is not None else None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == name:
                line = tb.tb_lineno - 2  # line 1 is the def
                if 0 <= line < len(lines):
                    return self.nodes[lines[line]]
            tb = tb.tb_next
        return None

    def _run_dataflow(self, args: Sequence[Any], step: StepContext,
                      stats: list[NodeStat] | None, timeout: float | None = None
                      ) -> list[Any]:
        nodes = self.nodes
        vals: list[Any] = [None] * self.nslots
        pending = [c.n_pending for c in nodes]
        ready = list(reversed(self.initial_ready))
        done_q: "queue.SimpleQueue[tuple[int, Any, BaseException | None, float, float]]" = \
            queue.SimpleQueue()
        pool = None
        outstanding = 0
        remaining = len(nodes)
        error: BaseException | None = None
        clock = time.perf_counter
        deadline = None if not timeout else clock() + timeout

        has_dead = self.has_dead
        is_dead = [False] * len(nodes) if has_dead else None
        merge_pick = [None] * len(nodes) if has_dead else None  # chosen input, or -1

        def finish(i: int, result: Any) -> None:
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
                    if c.expensive and self.use_pool and (ready or outstanding):
                        if pool is None:
                            pool = inter_op_pool(self.inter_op_threads)
                        outstanding += 1
                        pool.submit(_run_on_pool, c, step, ins, done_q, clock)
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
        return [vals[s] for s in self.fetch_slots]


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


# =======================================================================================
# frames and iterations: the scheduler of plans that contain loops
# =======================================================================================
# A loop is a *frame*: ``Enter`` moves a value from the enclosing frame into a new frame
# instance (one per loop run: per parent frame instance and parent iteration);
# ``NextIteration`` moves a value to the next iteration of its frame; ``Exit`` hands a
# value back to the parent frame. Values and pending counts live per (frame instance,
# iteration), so an iteration's state is dropped as soon as it is done and memory does
# not grow with the iteration count. A constant ``Enter`` (a loop invariant) is seen by
# every iteration. ``Exit`` values reach the parent once the whole frame instance is
# done (then every push of the loop's stacks has happened); an ``Exit`` that never got a
# live value is dead in the parent (a loop in an untaken conditional branch).

_F_PLAIN, _F_ENTER, _F_EXIT, _F_NEXT = 0, 1, 2, 3
_SLOW_KINDS = frozenset({"arg", "merge", "async", "step", "alias"})


class _FrameInfo:
    """A frame of the plan (static): its nodes, slots and initial pending counts."""

    __slots__ = ("id", "name", "parent", "nslots", "nnodes", "pending", "n_enters",
                 "exits", "parallel")

    def __init__(self, fid: int, name: str, parent: "_FrameInfo | None"):
        self.id, self.name, self.parent = fid, name, parent
        self.nslots = 0
        self.nnodes = 0
        self.pending: list[int] = []
        self.n_enters = 0
        self.exits: list[int] = []
        self.parallel = 10


def _frame_name_of(node: Node) -> str:
    v = node.node_attrs.get("frame_name", "")
    return v.decode() if isinstance(v, bytes) else str(v)


class _FramePlan:
    """Static control-flow information of a plan with loops (TF's ControlFlowInfo):
    the frame every node runs in, frame-local slots and pending counts."""

    def __init__(self, ex: Executor, fetches: Sequence[tuple[str, int]]):
        nodes = ex.nodes
        root = _FrameInfo(0, "_root", None)
        frames = [root]
        by_key: dict[tuple[int, str], _FrameInfo] = {}
        index_of = {c.node.name: c.index for c in nodes}
        out_frame: list[_FrameInfo | None] = [None] * len(nodes)
        preds_of: list[list[int]] = []
        for c in nodes:  # topological order: only loop back edges come from later nodes
            node = c.node
            preds = [index_of[n] for n, _ in node.inputs] + \
                [index_of[n] for n in node.control_inputs]
            preds_of.append(preds)
            f: _FrameInfo | None = None
            first = -1
            for p in preds:
                pf = out_frame[p]
                if pf is None:
                    continue  # a back edge: checked below
                if f is None:
                    f, first = pf, p
                elif pf is not f:
                    raise errors.InvalidArgumentError(
                        None, node.source_op,
                        f"{node.name} has inputs from different frames. The input "
                        f"{nodes[first].node.name} is in frame '{f.name}'. The input "
                        f"{nodes[p].node.name} is in frame '{pf.name}'.")
            f = f or root
            c.frame = f
            c.lidx = f.nnodes
            f.nnodes += 1
            t = node.type
            c.const_enter = False
            c.child = None
            if t in _ENTER_OPS:
                name = _frame_name_of(node)
                child = by_key.get((f.id, name))
                if child is None:
                    child = by_key[(f.id, name)] = _FrameInfo(len(frames), name, f)
                    child.parallel = max(1, int(node.node_attrs.get("parallel_iterations",
                                                                    10) or 10))
                    frames.append(child)
                child.n_enters += 1
                c.fkind, c.child = _F_ENTER, child
                c.const_enter = bool(node.node_attrs.get("is_constant", False))
                out_frame[c.index] = child
            elif t in _EXIT_OPS:
                if f.parent is None:
                    raise errors.InvalidArgumentError(
                        None, node.source_op, f"Exit node {node.name} is not inside a "
                        "while loop (its input is in the root frame)")
                c.fkind = _F_EXIT
                f.exits.append(c.index)
                out_frame[c.index] = f.parent
            else:
                c.fkind = _F_NEXT if t in _NEXT_OPS else _F_PLAIN
                out_frame[c.index] = f
        for c, preds in zip(nodes, preds_of):  # every edge stays inside one frame
            for p in preds:
                if out_frame[p] is not c.frame:
                    raise errors.InvalidArgumentError(
                        None, c.node.source_op,
                        f"{c.node.name} has inputs from different frames. The input "
                        f"{nodes[p].node.name} is in frame '{out_frame[p].name}', the node "
                        f"in frame '{c.frame.name}'.")
        # frame-local slots, pending counts and the successors a dead output kills
        for c in nodes:
            of = out_frame[c.index]
            c.f_out = of.nslots
            of.nslots += c.n_out
        for c in nodes:
            node = c.node
            c.f_in = tuple(nodes[index_of[n]].f_out + k for n, k in node.inputs)
            preds = set(preds_of[c.index])
            if c.kind == "merge":  # a back edge never counts: it starts an iteration
                preds = {p for p in preds if nodes[p].fkind != _F_NEXT}
            c.frame.pending.append(len(preds))
            kill: list[list[int]] = [[] for _ in range(c.n_out)]
            exits: list[list[int]] = [[] for _ in range(c.n_out)]
            ctrl: list[int] = []
            for s in c.succ:
                sc = nodes[s]
                if sc.kind == "merge":
                    continue
                if c.kind == "switch" and sc.fkind == _F_EXIT and \
                        node.name not in sc.node.control_inputs:
                    # a dead Exit does nothing: the Switch's dead side skips it (every
                    # iteration but the last)
                    exits[sc.node.inputs[0][1]].append(s)
                    continue
                for (n, k) in sc.node.inputs:
                    if n == node.name and s not in kill[k]:
                        kill[k].append(s)
                if node.name in sc.node.control_inputs:
                    ctrl.append(s)
            # (frame-local indices: what the scheduler indexes per iteration)
            c.f_kill = tuple(tuple(nodes[s].lidx for s in k) for k in kill)
            c.f_exit = tuple(frozenset(e) for e in exits)
            c.f_ctrl_kill = tuple(nodes[s].lidx for s in ctrl)
            c.f_all_kill = tuple(nodes[s].lidx for s in c.succ if nodes[s].kind != "merge")
        for c in nodes:
            # successors as (index, frame-local index, is a Merge); the hot path of a
            # plain synchronous kernel: one output, no Merge successor, no references
            c.f_succ = tuple((s, nodes[s].lidx, nodes[s].kind == "merge") for s in c.succ)
            c.fast = (c.fkind == _F_PLAIN and c.kind not in _SLOW_KINDS and
                      True not in c.deref and not c.dead_transparent and
                      not (c.expensive and ex.use_pool))
            c.simple_out = (c.n_out == 1 and c.kind != "switch" and
                            not any(m for _, _, m in c.f_succ))
        for name, k in fetches:
            c = nodes[index_of[name]]
            if out_frame[c.index] is not root:
                raise errors.InvalidArgumentError(
                    None, c.node.source_op, f"Cannot fetch {name}:{k}: it is inside the "
                    f"while loop frame '{out_frame[c.index].name}'; fetch the loop's "
                    "results (its Exit outputs) instead")
        self.root = root
        self.frames = frames
        self.fetch_slots = [nodes[index_of[n]].f_out + k for n, k in fetches]
        self.root_count = root.nnodes


def _frame_id(name: str) -> int:
    """A frame instance's id in rendezvous keys: the same in every partition and
    process that runs the frame (a 64-bit hash of its full name)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


class _Iter:
    """One iteration of one frame instance: its values and pending counts."""

    __slots__ = ("frame", "n", "vals", "pending", "dead", "outstanding", "children",
                 "child_map", "view")

    def __init__(self, frame: "_Frame", n: int):
        info = frame.info
        self.frame, self.n = frame, n
        self.vals: list[Any] = [None] * info.nslots
        self.pending = info.pending[:]
        self.dead: set[int] | None = None  # nodes with a dead input
        self.outstanding = 0  # nodes ready or running
        self.children = 0  # child frame instances still running
        self.child_map: dict[int, _Frame] | None = None
        self.view: Any = None  # the step as kernels in this iteration see it


class _Frame:
    """One frame instance (one run of a loop)."""

    __slots__ = ("info", "parent_it", "name", "fid", "iters", "pending_enters",
                 "loop_invs", "newest", "deferred", "exits", "live_exits")

    def __init__(self, info: _FrameInfo, parent_it: _Iter | None, name: str, fid: int):
        self.info, self.parent_it, self.name, self.fid = info, parent_it, name, fid
        self.iters: dict[int, _Iter] = {}
        self.pending_enters = info.n_enters
        self.loop_invs: list[tuple[_CNode, Any]] = []
        self.newest = 0
        self.deferred: list[tuple[_CNode, Any]] = []  # values for iteration newest + 1
        self.exits: list[tuple[_CNode, Any]] = []
        self.live_exits: set[int] = set()


class _FrameStepView:
    """The step as a kernel inside a loop sees it: its rendezvous puts the frame
    instance and iteration into every key (TF's ``frame_id:iter`` key suffix)."""

    __slots__ = ("_step", "rendezvous", "frame_iter")

    def __init__(self, step: StepContext, frame_id: int, iter_id: int):
        from .rendezvous import FrameRendezvous

        self._step = step
        self.frame_iter = (frame_id, iter_id)
        self.rendezvous = None if step.rendezvous is None else \
            FrameRendezvous(step.rendezvous, frame_id, iter_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._step, name)


def _run_frames(ex: Executor, args: Sequence[Any], step: StepContext,
                stats: list[NodeStat] | None, timeout: float | None) -> list[Any]:
    """Run a plan with loops (see the section comment above)."""
    plan = ex.frames
    assert plan is not None
    nodes = ex.nodes
    root = _Frame(plan.root, None, "_root", 0)
    root_it = _Iter(root, 0)
    root.iters[0] = root_it
    ready: list[tuple[int, _Iter]] = []
    done_q: "queue.SimpleQueue[tuple[int, _Iter, Any, BaseException | None, float, float, int]]"\
        = queue.SimpleQueue()
    clock = time.perf_counter
    deadline = None if not timeout else clock() + timeout
    state = {"root_done": 0, "async": 0}
    pool = None

    ready_append = ready.append

    def push(s: int, it: _Iter) -> None:
        it.outstanding += 1
        ready_append((s, it))

    def deliver(c: _CNode, outs: Any, it: _Iter, dead_all: bool) -> None:
        """Store ``c``'s outputs in ``it`` and count them down at the consumers."""
        vals, pending = it.vals, it.pending
        base = c.f_out
        n_out = c.n_out
        if n_out == 1:
            vals[base] = outs
        elif n_out:
            if len(outs) != n_out:
                raise errors.InternalError(None, c.node.source_op,
                                           f"kernel of {c.node.name} returned {len(outs)} "
                                           f"outputs, expected {n_out}")
            vals[base:base + n_out] = outs
        skip: frozenset[int] | tuple[()] = ()  # dead Exits: not scheduled at all
        if dead_all:
            if c.f_all_kill:
                d = it.dead
                if d is None:
                    d = it.dead = set()
                d.update(c.f_all_kill)
        elif c.kind == "switch" or (n_out == 1 and outs is DEAD):
            for k in range(n_out):
                if vals[base + k] is DEAD:
                    if c.f_kill[k]:
                        d = it.dead
                        if d is None:
                            d = it.dead = set()
                        d.update(c.f_kill[k])
                    if c.f_exit and c.f_exit[k]:
                        skip = c.f_exit[k]
        for s, li, is_merge in c.f_succ:
            p = pending[li]
            if is_merge:
                if p < 0:
                    continue  # fired already
                for sl in nodes[s].f_in:
                    v = vals[sl]
                    if v is not None and v is not DEAD:
                        pending[li] = -1
                        it.outstanding += 1
                        ready_append((s, it))
                        break
                else:
                    if c.fkind != _F_NEXT:
                        p -= 1
                        pending[li] = p
                        if p == 0:
                            pending[li] = -1
                            it.outstanding += 1
                            ready_append((s, it))
                continue
            p -= 1
            pending[li] = p
            if p == 0:
                if skip and s in skip:
                    continue
                it.outstanding += 1
                ready_append((s, it))

    def new_iter(fr: _Frame, n: int) -> _Iter:
        it = fr.iters[n] = _Iter(fr, n)
        if n > fr.newest:
            fr.newest = n
        for c, v in fr.loop_invs:
            deliver(c, v, it, v is DEAD)
        return it

    def child_frame(c: _CNode, it: _Iter) -> _Frame:
        info = c.child
        cm = it.child_map
        if cm is None:
            cm = it.child_map = {}
        fr = cm.get(info.id)
        if fr is None:
            name = f"{it.frame.name};{it.n};{info.name}"
            fr = cm[info.id] = _Frame(info, it, name, _frame_id(name))
            it.children += 1
            new_iter(fr, 0)
        return fr

    def iter_done(it: _Iter) -> bool:
        if it.outstanding or it.children:
            return False
        fr = it.frame
        if it.n == 0:
            return fr.pending_enters == 0
        return (it.n - 1) not in fr.iters

    def retire(it: _Iter) -> None:
        """``it`` finished a node (or a child frame): drop finished iterations and
        frames, start deferred iterations, hand exits to the parent."""
        while it is not None and iter_done(it):
            fr = it.frame
            if fr.parent_it is None:
                return  # the root: the step ends when nothing is left to run
            del fr.iters[it.n]
            if fr.deferred and len(fr.iters) < fr.info.parallel:
                vals, fr.deferred = fr.deferred, []
                started = new_iter(fr, fr.newest + 1)
                for c, v in vals:
                    deliver(c, v, started, False)
            nxt = fr.iters.get(it.n + 1)
            if nxt is not None:
                it = nxt
                continue
            if fr.iters or fr.pending_enters:
                return
            # the frame instance is done: its exits reach the parent iteration
            pit = fr.parent_it
            for c, v in fr.exits:
                deliver(c, v, pit, False)
            for i in fr.info.exits:
                if i not in fr.live_exits:
                    deliver(nodes[i], DEAD, pit, True)
            del pit.child_map[fr.info.id]
            pit.children -= 1
            it = pit

    def complete(c: _CNode, it: _Iter, r: Any, dead: bool) -> None:
        """Route ``c``'s result by the node's role, then retire it."""
        fk = c.fkind
        if fk == _F_PLAIN:
            deliver(c, r, it, dead)
        elif fk == _F_ENTER:
            fr = child_frame(c, it)
            fr.pending_enters -= 1
            if c.const_enter:
                fr.loop_invs.append((c, r))
                for cit in list(fr.iters.values()):
                    deliver(c, r, cit, dead)
            else:
                it0 = fr.iters.get(0)
                if it0 is not None:
                    deliver(c, r, it0, dead)
            it0 = fr.iters.get(0)
            if it0 is not None:
                retire(it0)
        elif fk == _F_NEXT:
            if not dead:
                fr = it.frame
                n1 = it.n + 1
                nxt = fr.iters.get(n1)
                if nxt is None:
                    if fr.deferred or len(fr.iters) >= fr.info.parallel:
                        fr.deferred.append((c, r))  # parallel_iterations reached
                    else:
                        deliver(c, r, new_iter(fr, n1), False)
                else:
                    deliver(c, r, nxt, False)
        elif not dead:  # a live Exit
            fr = it.frame
            fr.exits.append((c, r))
            fr.live_exits.add(c.index)
        it.outstanding -= 1
        if it is root_it:
            state["root_done"] += 1
        elif not it.outstanding:
            retire(it)

    def view(it: _Iter) -> Any:
        if it is root_it:
            return step
        v = it.view
        if v is None:
            v = it.view = _FrameStepView(step, it.frame.fid, it.n)
        return v

    def fail(e: BaseException, c: _CNode) -> BaseException:
        err = op_error_for(e, c.node, c.device_name)
        step.abort(err)
        return err

    for i in reversed(ex.initial_ready):
        if nodes[i].frame is plan.root:
            push(i, root_it)
    error: BaseException | None = None
    with np.errstate(all="ignore"):
        while True:
            while ready and error is None:
                i, it = ready.pop()
                c = nodes[i]
                if c.fast:  # a plain synchronous kernel: the hot path, inlined
                    d = it.dead
                    if d is None or c.lidx not in d:
                        vals = it.vals
                        t0 = clock() if stats is not None else 0.0
                        try:
                            r = c.compute(*[vals[s] for s in c.f_in])
                            if stats is not None:
                                stats.append(_stat(c, t0, clock(), threading.get_ident()))
                            if c.simple_out and r is not DEAD:
                                vals[c.f_out] = r
                                pending = it.pending
                                for s, li, _ in c.f_succ:
                                    p = pending[li] - 1
                                    pending[li] = p
                                    if not p:
                                        it.outstanding += 1
                                        ready_append((s, it))
                            else:
                                deliver(c, r, it, False)
                        except Exception as e:
                            error = fail(e, c)
                            break
                        it.outstanding -= 1
                        if it is root_it:
                            state["root_done"] += 1
                        elif not it.outstanding:
                            retire(it)
                        continue
                kind = c.kind
                vals = it.vals
                if kind == "arg":
                    complete(c, it, args[c.arg_index], False)
                    continue
                if kind == "merge":
                    for k, sl in enumerate(c.f_in):
                        v = vals[sl]
                        if v is not None and v is not DEAD:
                            complete(c, it, (v, np.int32(k)), False)
                            break
                    else:
                        complete(c, it, (DEAD, DEAD), True)
                    continue
                d = it.dead
                if d is not None and c.lidx in d and not c.dead_transparent:
                    n = c.n_out
                    complete(c, it, DEAD if n == 1 else (DEAD,) * n if n else None, True)
                    continue
                try:
                    if True in c.deref:
                        ins = [vals[s].read() if dr and type(vals[s]) is VarRef else vals[s]
                               for s, dr in zip(c.f_in, c.deref)]
                    else:
                        ins = [vals[s] for s in c.f_in]
                except Exception as e:
                    error = fail(e, c)
                    break
                if kind == "alias" or c.fkind != _F_PLAIN:
                    complete(c, it, ins[0], ins[0] is DEAD)
                    continue
                if kind == "async":
                    state["async"] += 1
                    t0 = clock()

                    def done(result: Any = None, exc: BaseException | None = None,
                             i: int = i, it: _Iter = it, t0: float = t0) -> None:
                        done_q.put((i, it, result, exc, t0, clock(), threading.get_ident()))

                    try:
                        c.compute(view(it), done, *ins)
                    except Exception as e:
                        done(None, e)
                    continue
                if c.expensive and ex.use_pool and (ready or state["async"]):
                    if pool is None:
                        pool = inter_op_pool(ex.inter_op_threads)
                    state["async"] += 1
                    pool.submit(_run_on_pool_framed, c, view(it), ins, done_q, clock, it)
                    continue
                t0 = clock() if stats is not None else 0.0
                try:
                    r = c.compute(view(it), *ins) if kind == "step" else c.compute(*ins)
                    if stats is not None:
                        stats.append(_stat(c, t0, clock(), threading.get_ident()))
                    # (complete() for a plain node, inlined: the hot path)
                    deliver(c, r, it, False)
                    it.outstanding -= 1
                    if it is root_it:
                        state["root_done"] += 1
                    elif not it.outstanding:
                        retire(it)
                except Exception as e:
                    error = fail(e, c)
                    break
            if error is not None:
                while state["async"]:
                    try:
                        done_q.get(timeout=10.0)
                    except queue.Empty:
                        break
                    state["async"] -= 1
                raise error
            if not state["async"]:
                if state["root_done"] == plan.root_count and not root_it.children:
                    break
                stuck = [nodes[k].node.name for k in range(len(nodes))
                         if nodes[k].frame is plan.root and root_it.pending[nodes[k].lidx] > 0]
                error = errors.InternalError(None, None, "step deadlocked: nodes never "
                                             f"became ready: {stuck[:5]}")
                step.abort(error)
                raise error
            try:
                i, it, r, exc, t0, t1, tid = done_q.get(
                    timeout=None if deadline is None else max(0.0, deadline - clock()))
            except queue.Empty:
                error = errors.DeadlineExceededError(
                    None, None, f"Timed out waiting for the step to finish (deadline "
                    f"{timeout:g} s); {state['async']} node(s) were still blocked")
                step.abort(error)
                continue
            state["async"] -= 1
            c = nodes[i]
            if exc is not None:
                error = fail(exc, c)
                continue
            if stats is not None:
                stats.append(_stat(c, t0, t1, tid))
            try:
                complete(c, it, r, r is DEAD if c.n_out == 1 else False)
            except Exception as e:
                error = fail(e, c)
    return [root_it.vals[s] for s in plan.fetch_slots]


def _run_on_pool_framed(c: _CNode, step: Any, ins: list[Any], done_q: Any,
                        clock: Callable[[], float], it: _Iter) -> None:
    t0 = clock()
    tid = threading.get_ident()
    try:
        r = c.compute(step, *ins) if c.kind == "step" else c.compute(*ins)
    except BaseException as e:  # noqa: BLE001 - reported to the scheduler
        done_q.put((c.index, it, None, e, t0, clock(), tid))
        return
    done_q.put((c.index, it, r, None, t0, clock(), tid))


def _host_args(args: Sequence[Any]) -> list[Any]:
    """A partition outside any GPU gets GPU feeds (CuPy arrays) in host memory."""
    return [a.get() if hasattr(a, "__cuda_array_interface__") and hasattr(a, "get") else a
            for a in args]


def _take_now(recv: Callable[..., Any], step: StepContext) -> Any:
    """Run a ``_Recv`` kernel whose value is already in the step's rendezvous: its
    callback fires before ``recv`` returns. (Should it not, wait for it.)"""
    box: list[Any] = []
    ev: list[threading.Event] = []

    def done(value: Any, err: BaseException | None = None) -> None:
        box.append((value, err))
        if ev:
            ev[0].set()

    recv(step, done)
    if not box:
        e = threading.Event()
        ev.append(e)
        if not box and not e.wait(RECV_WAIT_S):
            raise errors.DeadlineExceededError(
                None, None, f"a receive of step {step.step_id:x} expected to be ready "
                f"was not delivered within {RECV_WAIT_S} s")
    value, err = box[0]
    if err is not None:
        raise err
    if value is DEAD:  # the caller checked: a dead value here is a bug
        raise errors.InternalError(None, None, "a dead tensor reached a straight-line step")
    return value


#: how long a straight-line receive waits for a value it was told is there
RECV_WAIT_S = 60.0
