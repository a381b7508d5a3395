"""The master service: sessions, and the compile-once, run-many step pipeline.

For each new step signature (feeds, fetches, targets) a master session extracts the
pruned step graph, runs the graph passes, places every node, partitions the graph per
worker, registers each partition on its worker once and caches the handles. A step is
then one ``run_graph`` call per participating worker. The in-process session and the
distributed one use this same code; only the worker objects differ (local objects or
transport clients).
"""
from __future__ import annotations

import itertools
import os
import queue
import random
import threading
import time
import weakref
from concurrent import futures
from typing import Any, NamedTuple, Sequence

from ..base import errors
from ..base import threads as _threads
from ..engine.cost_model import CostModel
from ..base.device_spec import DeviceSpec
from ..engine.executor import NodeStat
from ..engine.ir import GraphIR, extract_step_graph, step_fingerprint
from ..plugin.op_registry import expand_args
from ..plugin.services import RunGraphRequest
from ..plugin.runtime import import_client_graph
from ..engine.partition import (Partition, partition, partition_graph_defs, pull_together,
                                split_stages)
from ..engine.placement import place
from ..engine.waiting import WaitFacts
from .worker import _partition_pool
from .worker import Worker

__all__ = ["Master", "MasterSession", "CompiledStep", "StepPart", "StagedParts",
           "HEALTH_CHECK_PERIOD"]

_step_ids = itertools.count(1)

#: seconds between the master's health checks of the other tasks of its cluster
HEALTH_CHECK_PERIOD = 1.0
#: seconds a health check waits for an answer
HEALTH_CHECK_TIMEOUT = 2.0


def _task_name(w: Any) -> str:
    return f"/job:{w.job}/replica:0/task:{w.task}"


#: unset cancel events of steps that are over (making a threading.Event costs more than
#: the rest of a step's bookkeeping); list.pop and append are atomic
_FREE_EVENTS: list[threading.Event] = []


def _take_event() -> threading.Event:
    try:
        return _FREE_EVENTS.pop()
    except IndexError:
        return threading.Event()


class _Inflight:
    """A step running on several tasks: the master waits on ``q`` for each task's
    result. The first failure (a task's error, or the health checker finding a task
    gone) aborts the step on every task at once, so partitions blocked on a transfer
    from the failed task wake up instead of waiting for their receive timeout."""

    __slots__ = ("step_id", "workers", "q", "error", "_lock", "local", "cancel", "over")

    def __init__(self, step_id: int, workers: list[Any], local: Any = None):
        self.step_id, self.workers, self.local = step_id, workers, local
        self.q: "queue.SimpleQueue[tuple[int, Any, BaseException | None]]" = \
            queue.SimpleQueue()
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        #: set on the first failure: a call the master's thread makes itself stops
        self.cancel = _take_event()
        self.over = False

    def done(self) -> None:
        """The step succeeded and every part returned: a late :meth:`fail` (the
        health checker's) does nothing, and the cancel event serves another step."""
        with self._lock:
            if self.error is not None or self.over:
                return
            self.over = True
        if len(_FREE_EVENTS) < 64:
            _FREE_EVENTS.append(self.cancel)

    def fail(self, error: BaseException) -> list[futures.Future]:
        """Record the step's first error and abort it on every task; returns the
        futures of the aborts sent to other tasks (none if the step had failed)."""

        with self._lock:
            if self.error is not None or self.over:
                return []
            self.error = error
        self.cancel.set()
        self.q.put((-1, None, error))
        sent: list[futures.Future] = []
        for w in self.workers:
            if w is self.local:
                w.abort_step(self.step_id, error)
            else:
                sent.append(_partition_pool().submit(w.abort_step, self.step_id, error))
        return sent


#: every live master of this process (for :func:`_cancel_steps_at_exit`)
_MASTERS: "weakref.WeakSet[Master]" = weakref.WeakSet()


@_threads.at_exit
def _cancel_steps_at_exit(deadline: float) -> None:
    """The process is exiting: abort every step in flight over several tasks, on
    every task, and wait (until ``deadline``) for the other tasks to have heard. A step
    left blocked on another task (a dequeue on a ps) would otherwise stay there after
    this process is gone and take the next element anyone enqueues."""
    err = errors.CancelledError(None, None, "the step was cancelled: the process that "
                                "ran it is exiting")
    sent: list[futures.Future] = []
    for m in list(_MASTERS):
        for fl in list(m._inflight.values()):
            sent.extend(fl.fail(err))
    if sent:
        futures.wait(sent, timeout=max(0.0, deadline - time.monotonic()))


#: whether the master stages the steps it can (see split_stages); FLOWRT_STAGED=0 turns
#: it off (every step then pulls its transfers)
STAGED = os.environ.get("FLOWRT_STAGED", "1") != "0"


class StepPart:
    """One worker's share of a compiled step: the registered graph it runs, and how its
    ``RunGraph`` request crosses tensors with the other tasks -- decided once, when the
    step is compiled (:meth:`MasterSession._compile`), and the same for every step.

    A slotted class rather than a NamedTuple: the per-step path reads its fields, and
    slot reads are as fast as indexing a plain tuple (a tuple subclass's are not). It
    still unpacks and indexes as ``(worker, handle, fetch_positions)``."""

    __slots__ = ("worker", "handle", "fetch_positions", "push_to", "pushed_from",
                 "on_caller", "cancellable")

    def __init__(self, worker: Any, handle: str, fetch_positions: list[int],
                 push_to: tuple[str, int] | None = None,
                 pushed_from: frozenset[tuple[str, int]] = frozenset(),
                 on_caller: bool = False, cancellable: bool = False):
        #: the worker (an in-process ``Worker`` or a transport client)
        self.worker = worker
        #: the handle ``register_graph`` / ``register_partitions`` gave back
        self.handle = handle
        #: the positions among the step's fetches that this part's RunGraph reply fills
        self.fetch_positions = fetch_positions
        #: the task (the master's) to which this part pushes what it sends there, with
        #: its reply (:attr:`RunGraphRequest.push_to`)
        self.push_to = push_to
        #: the tasks that push to this part (only the master's own worker's part)
        self.pushed_from = pushed_from
        #: run on the master's thread (the local part, or the first inline part)
        self.on_caller = on_caller
        #: its call takes the step's cancel event (the health checker can end it)
        self.cancellable = cancellable

    def _fields(self) -> tuple[Any, str, list[int]]:
        return (self.worker, self.handle, self.fetch_positions)

    def __iter__(self) -> Any:
        return iter(self._fields())

    def __getitem__(self, i: int) -> Any:
        return self._fields()[i]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StepPart) and self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StepPart({self.worker!r}, {self.handle!r}, {self.fetch_positions})"

    def request(self, step_id: int, args: Sequence[Any], trace: bool,
                timeout: float | None, cancel: threading.Event | None = None
                ) -> RunGraphRequest:
        """This part's ``RunGraph`` request for one step."""
        return RunGraphRequest(self.handle, step_id, args, trace, timeout, self.push_to,
                               self.pushed_from,
                               cancel=cancel if self.cancellable else None)

    def _replace(self, **changes: Any) -> "StepPart":
        """A copy with some fields replaced (as ``NamedTuple._replace``)."""
        fields = {k: getattr(self, k) for k in self.__slots__}
        fields.update(changes)
        return StepPart(**fields)


class StagedParts(NamedTuple):
    """The three parts of a staged step (see :func:`~flowrt.partition.split_stages`),
    by role; :meth:`MasterSession._run_staged` runs ``first``, ``local``, ``second``."""

    #: the other task's first stage: depends on nothing from the master's task
    first: StepPart
    #: the other task's second stage: takes what the master's task sent it
    second: StepPart
    #: the master's own task's part
    local: StepPart


class CompiledStep:
    """A registered step: which worker runs which partition, and the graph version.

    ``key`` identifies what the step was compiled from (:meth:`MasterSession._step_key`):
    when the graph's version changes but the key of the step's new extraction is the
    same, the step stays registered and only ``version`` moves on."""

    __slots__ = ("feeds", "fetches", "targets", "version", "parts", "placement",
                 "ir", "partitions", "push", "first_inline", "staged", "key", "mode",
                 "slow_inline")

    def __init__(self, feeds: tuple[str, ...], fetches: tuple[str, ...],
                 targets: tuple[str, ...]):
        """A step not compiled yet: its feed, fetch and target names."""
        self.feeds, self.fetches, self.targets = feeds, fetches, targets
        self.version = -1
        #: what the step was compiled from (None: compile it again when next run)
        self.key: tuple[Any, ...] | None = None
        self.parts: list[StepPart] = []
        self.placement: dict[str, str] = {}
        self.ir: GraphIR | None = None
        self.partitions: list[Any] = []
        #: id(worker) -> its task, for the remote workers that push the tensors they
        #: send to the master's task with their RunGraph reply (see _push_sources)
        self.push: dict[int, tuple[str, int]] = {}
        #: the remote part run on the master's thread before the local one (or None)
        self.first_inline: int | None = None
        #: a staged step (see split_stages): its three parts (also in ``parts``)
        self.staged: StagedParts | None = None
        #: steps run on a server's I/O thread that took long (see
        #: :meth:`MasterSession.runs_inline`); from the second on, none runs there
        self.slow_inline = 0
        #: how a step of it runs, decided at compile time: ``"local"`` (one part, on
        #: the master's own worker: one call), ``"staged"`` (:meth:`MasterSession.
        #: _run_staged`) or ``"workers"`` (:meth:`MasterSession._run_on_workers`)
        self.mode = "local"


class _PassContext:
    def __init__(self, runtime: Any, config: Any, ir: GraphIR,
                 device_types: frozenset[str] | None = None):
        self.runtime = runtime
        self.config = config
        #: the device types the step can be placed on (None: any registered type)
        self.device_types = device_types
        self.fetches = list(ir.fetches)
        self.feeds = list(ir.feeds)
        self.targets = list(ir.targets)


def _pass_enabled(config: Any, p: Any, remote: bool = False) -> bool:
    """A pass runs unless switched off: by name in ``FLOWRT_DISABLE_PASSES`` (``all``
    for every pass), by ``graph_options.optimizer_options.opt_level = L0``, by
    ``graph_options.rewrite_options.disable_meta_optimizer``, or by the rewrite option
    of the pass's own name set to ``RewriterConfig.OFF`` (TF's names, e.g.
    ``constant_folding``). A pass that says its output only an in-process worker can
    run (``GraphPass.local_only``) is skipped when the step has ``remote`` tasks."""

    if remote and getattr(p, "local_only", False):
        return False
    off = {x.strip() for x in os.environ.get("FLOWRT_DISABLE_PASSES", "").split(",")}
    if p.name in off or "all" in off:
        return False
    if config is not None and config.HasField("graph_options"):
        go = config.graph_options
        if go.optimizer_options.opt_level == -1:  # OptimizerOptions.L0
            return False
        rw = go.rewrite_options
        if rw.disable_meta_optimizer:
            return False
        toggle = getattr(rw, p.name, None)
        if isinstance(toggle, int) and not isinstance(toggle, bool) and toggle == 2:  # OFF
            return False
    return p.enabled_by_default


def _colocated_users(graph: Any) -> dict[str, list[Any]]:
    """``{node name: ops of the whole graph that must share its device}``: the consumers
    of its reference (or resource) outputs and the ops colocated with it by ``_class``."""
    users: dict[str, list[Any]] = {}
    for op in graph.get_operations():
        od = getattr(op, "op_def", None)
        if od is not None and op.inputs:
            for t, a in zip(op.inputs, expand_args(od.inputs, op.node_attrs)):
                if a.is_ref or t.dtype.base_dtype.name == "resource":
                    users.setdefault(t.op.name, []).append(op)
        for loc in op.node_attrs.get("_class", ()) or ():
            loc = loc.decode() if isinstance(loc, bytes) else str(loc)
            if loc.startswith("loc:@"):
                users.setdefault(loc[5:], []).append(op)
    return users


class MasterSession:
    """A session on the master: the graph, its config and the compiled-step cache."""

    def __init__(self, master: "Master", handle: str, graph: Any, config: Any):
        """A session of ``master`` called ``handle`` on ``graph`` with the
        ``ConfigProto`` ``config``; no step is compiled yet."""
        self.master = master
        self.handle = handle
        self.graph = graph
        self.config = config
        self._lock = threading.Lock()
        self._callables: dict[int, CompiledStep] = {}
        self._by_sig: dict[tuple[Any, ...], int] = {}
        self._ids = itertools.count(1)
        self.closed = False
        #: when a step or call last used this session, and how many steps are running
        #: (session garbage collection: :meth:`Master.collect_idle_sessions`)
        self.last_used = time.monotonic()
        self.running = 0
        self._use_lock = threading.Lock()
        #: the client's graph version this master holds (remote sessions)
        self.graph_version = 0
        # measured node times and the devices of stateful nodes (cost-model placer)
        self.cost_model = CostModel()
        #: a restart of a task this session used, reported by its next step
        self.pending_error: BaseException | None = None
        #: (graph, its version, _colocated_users of it): a remote session's graph is
        #: replaced by a new object on ExtendSession, so both are compared
        self._users: tuple[Any, int, dict[str, list[Any]]] | None = None

    # -- compile ----------------------------------------------------------------------
    def make_callable(self, feeds: Sequence[str], fetches: Sequence[str],
                      targets: Sequence[str]) -> int:
        """A handle for running the step ``(feeds, fetches, targets)`` (names)."""
        sig = (tuple(feeds), tuple(fetches), tuple(targets))
        cid = self._by_sig.get(sig)
        if cid is not None:
            return cid
        with self._lock:
            cid = self._by_sig.get(sig)
            if cid is None:
                cs = CompiledStep(*sig)
                self._compile(cs)
                cid = next(self._ids)
                self._callables[cid] = cs
                self._by_sig[sig] = cid
        return cid

    def _resolve(self, cs: CompiledStep) -> tuple[list[Any], list[Any], list[Any]]:
        g = self.graph
        try:
            feeds = [g.as_graph_element(n, allow_tensor=True, allow_operation=False)
                     for n in cs.feeds]
            fetches = [g.as_graph_element(n, allow_tensor=True, allow_operation=False)
                       for n in cs.fetches]
            targets = [g.as_graph_element(n, allow_tensor=False, allow_operation=True)
                       for n in cs.targets]
        except (KeyError, ValueError, TypeError) as e:
            raise errors.NotFoundError(None, None, str(e).strip("'\"")) from None
        return feeds, fetches, targets

    def _colocated_types(self, ir: GraphIR, runtime: Any, devices: list[Any]
                         ) -> dict[str, set[str]] | None:
        """For each node of the step whose reference other ops of the graph use (a
        variable and its updates, maybe in other steps): the device types all of those
        ops have kernels for. Only computed when the devices are of several types."""
        if len({d.device_type for d in devices}) < 2 or \
                not hasattr(self.graph, "get_operations"):
            return None
        version = self.graph.version
        if self._users is None or self._users[0] is not self.graph or \
                self._users[1] != version:
            self._users = (self.graph, version, _colocated_users(self.graph))
        users = self._users[2]
        out: dict[str, set[str]] = {}
        for name in ir.nodes:
            ops = users.get(name)
            if not ops:
                continue
            ts: set[str] | None = None
            for op in ops:
                t = set(runtime.kernel_device_types(op.type, op.node_attrs))
                ts = t if ts is None else ts & t
            if ts:
                out[name] = ts
        return out

    def _extract(self, cs: CompiledStep) -> GraphIR:
        """The step graph of ``cs`` pruned from the session's current graph."""
        feeds, fetches, targets = self._resolve(cs)
        return extract_step_graph(self.graph, feeds, fetches, targets)

    def _step_key(self, ir: GraphIR, runtime: Any, devices: list[Any]) -> tuple[Any, ...]:
        """What a compile of the freshly extracted ``ir`` depends on: the step graph's
        content (:func:`~flowrt.ir.step_fingerprint`), the devices it may use and, for
        each of its nodes whose reference ops elsewhere in the graph use, the device
        types those ops allow (:meth:`_colocated_types`: a new op using a variable of
        the step can move the variable)."""
        types = self._colocated_types(ir, runtime, devices)
        frozen = None if types is None else \
            tuple(sorted((k, tuple(sorted(v))) for k, v in types.items()))
        return (step_fingerprint(ir), tuple(d.name for d in devices), frozen)

    def _refresh(self, cs: CompiledStep) -> None:
        """The graph's version changed since ``cs`` was compiled: extract its step graph
        again and keep the compiled step (registered partitions included) when its key
        is unchanged; compile it again otherwise. Called with ``_lock`` held."""
        version = self.graph.version
        if cs.key is not None:
            runtime = self.master.runtime
            devices = [d for w in self.master.workers_for(self.config) for d in w.devices]
            if self._step_key(self._extract(cs), runtime, devices) == cs.key:
                cs.version = version
                return
        self._compile(cs)

    def _compile(self, cs: CompiledStep) -> None:
        """Compile ``cs`` for the session's current graph: extract its step graph, run
        the graph passes, place, partition, register each worker's partitions (first
        deregistering what an earlier compile registered) and record the parts, the
        placement, the graph version and the key (:meth:`_step_key`)."""
        runtime = self.master.runtime
        version = self.graph.version
        ir = self._extract(cs)
        workers = self.master.workers_for(self.config)
        devices = [d for w in workers for d in w.devices]
        key = self._step_key(ir, runtime, devices)
        ctx = _PassContext(runtime, self.config, ir,
                           frozenset(d.device_type for d in devices))
        remote = any(w is not self.master.local_worker for w in workers)
        for p in runtime.graph_passes:
            # a local_only pass's output (fused kernels holding Python values with no
            # wire form) is not for remote tasks
            if _pass_enabled(self.config, p, remote):
                p.run(ir, ctx)
        cfg = self.config
        placed = place(ir, devices, runtime,
                       allow_soft=bool(cfg is not None and cfg.allow_soft_placement),
                       log=bool(cfg is not None and cfg.log_device_placement),
                       config=cfg, cost_model=self.cost_model,
                       graph_types=self._colocated_types(ir, runtime, devices))
        owners = {id(d): w for w in workers for d in w.devices}
        used = {id(owners[id(d)]): owners[id(d)] for d in placed.values()}
        threads = int(cfg.inter_op_parallelism_threads) if cfg is not None else 0
        for p in cs.parts:
            p.worker.deregister_graph(p.handle)
        cs.parts = []
        cs.key = None
        cs.push = {}
        cs.first_inline = None
        cs.staged = None
        cs.mode = "local"
        if len(used) > 1:
            parts = partition(ir, placed, runtime)
            if self._stage(cs, parts, used, len(ir.fetches), threads):
                cs.partitions = parts
                cs.placement = {n.name: n.assigned_device for n in ir.nodes.values()}
                cs.ir = ir
                cs.version, cs.key = version, key
                return
            together = pull_together(parts, runtime)
            by_worker: dict[int, list[Any]] = {}
            for p in parts:
                by_worker.setdefault(id(owners[id(p.device)]), []).append(p)
            # the local worker's share runs on the caller's thread, after the others
            # were started
            order = sorted(by_worker, key=lambda k: used[k] is self.master.local_worker)
            for k in order:
                w = used[k]
                wparts = by_worker[k]
                mine = [n for p in wparts for n in p.ir.nodes if n in together]
                h = w.register_partitions(self.handle, wparts, len(ir.fetches), threads,
                                          mine)
                cs.parts.append(StepPart(w, h, sorted(pos for p in wparts
                                                      for pos in p.fetch_positions)))
            cs.push = self._push_sources(by_worker, used)
            cs.first_inline = self._first_inline(cs, by_worker)
            local = self.master.local_worker
            pushed_from = frozenset(cs.push.values())
            here = (local.job, local.task)
            for i, p in enumerate(cs.parts):
                if p.worker is local:
                    p.pushed_from, p.on_caller = pushed_from, True
                elif id(p.worker) in cs.push:
                    p.push_to = here
                    if i == cs.first_inline:  # on the master's thread: cancellable
                        p.on_caller = p.cancellable = True
            cs.mode = "workers"
            cs.partitions = parts
            cs.placement = {n.name: n.assigned_device for n in ir.nodes.values()}
            cs.ir = ir
            cs.version, cs.key = version, key
            return
        worker = next(iter(used.values())) if used else workers[0]
        if len({d.name for d in placed.values()}) > 1:
            parts = partition(ir, placed, runtime)
            handle = worker.register_partitions(self.handle, parts, len(ir.fetches), threads)
        else:
            device = next(iter(placed.values())) if placed else worker.devices[0]
            parts = [Partition(device, ir)]
            handle = worker.register_graph(self.handle, ir, ir.fetches, threads)
        cs.partitions = parts
        cs.parts = [StepPart(worker, handle, list(range(len(ir.fetches))))]
        # a step wholly on another task still runs as "workers", so that the health
        # checker can fail it when that task stops answering
        cs.mode = "local" if worker is self.master.local_worker else "workers"
        cs.placement = {n.name: n.assigned_device for n in ir.nodes.values()}
        cs.ir = ir
        cs.version, cs.key = version, key

    def _stage(self, cs: CompiledStep, parts: list[Partition], used: dict[int, Any],
               n_fetches: int, threads: int) -> bool:
        """Register the step as a staged one (:func:`~flowrt.partition.split_stages`)
        if it can be: it spans the master's task and one other, whose channel can
        cancel a waiting call (the master's thread makes the calls; the health
        checker's failure of the step must be able to end them)."""
        local = self.master.local_worker
        if len(used) != 2 or id(local) not in used or not STAGED:
            return False
        other = next(w for w in used.values() if w is not local)
        if not getattr(other, "cancellable", False):
            return False
        stages = split_stages(parts, (local.job, local.task), self.master.runtime)
        if stages is None:
            return False
        here = {d.name for d in local.devices}
        mine = [p for p in parts if p.device.name in here]
        here, there = (local.job, local.task), (other.job, other.task)
        first, second = stages
        h = other.register_partitions(self.handle, [first], n_fetches, threads)
        # the first stage pushes what it sends to this task with its reply
        cs.parts.append(StepPart(other, h, sorted(first.fetch_positions), push_to=here,
                                 on_caller=True, cancellable=True))
        # the second stage takes what this task sent it with its request (pushed_in)
        h = other.register_partitions(self.handle, [second], n_fetches, threads)
        cs.parts.append(StepPart(other, h, sorted(second.fetch_positions),
                                 on_caller=True, cancellable=True))
        h = local.register_partitions(self.handle, mine, n_fetches, threads)
        cs.parts.append(StepPart(local, h, sorted(pos for p in mine
                                                  for pos in p.fetch_positions),
                                 push_to=there, pushed_from=frozenset((there,)),
                                 on_caller=True))
        cs.staged = StagedParts(*cs.parts)
        cs.mode = "staged"
        return True

    def _first_inline(self, cs: CompiledStep, by_worker: dict[int, list[Any]]) -> int | None:
        """The remote part the master's thread runs itself, before its own task's part,
        so that the step needs no thread hand-off around that RunGraph call: only when
        it is the one other task, pushes (it depends on nothing, so running it first
        cannot deadlock) and runs straight through (no kernel that may block or take
        long), its channel can cancel a waiting call (the health checker's failure of
        the step then ends the call at once), and the local part is light (little to
        overlap with the call)."""
        local = self.master.local_worker
        remote = [i for i, p in enumerate(cs.parts) if p.worker is not local]
        if len(remote) != 1 or len(cs.parts) != 2:
            return None
        w = cs.parts[remote[0]].worker
        if id(w) not in cs.push or not getattr(w, "cancellable", False):
            return None
        runtime = self.master.runtime
        for p in by_worker[id(w)]:
            if not WaitFacts.of_partition(p.ir.nodes.values(), p.device.device_type,
                                          runtime).brief:
                return None
        if not all(local.is_light(p.handle) for p in cs.parts if p.worker is local):
            return None
        return remote[0]

    def _push_sources(self, by_worker: dict[int, list[Any]], used: dict[int, Any]
                      ) -> dict[int, tuple[str, int]]:
        """The remote workers that can push: their partitions receive nothing (no
        ``_Recv``: they depend on no other task, so their RunGraph finishes on its own)
        and send to the master's own task, which takes part in the step. Their RunGraph
        reply then carries those tensors and the local worker's receives wait locally:
        no RecvTensor round trip."""
        local = self.master.local_worker
        if id(local) not in used:
            return {}
        here = (local.job, local.task)
        out: dict[int, tuple[str, int]] = {}
        for k, wparts in by_worker.items():
            w = used[k]
            if w is local:
                continue
            nodes = [n for p in wparts for n in p.ir.nodes.values()]
            if any(n.type == "_Recv" for n in nodes):
                continue
            if any(n.type == "_Send" and local._task_of(str(n.node_attrs["recv_device"]))
                   == here for n in nodes):
                out[k] = (w.job, w.task)
        return out

    # -- run --------------------------------------------------------------------------
    def runs_inline(self, cid: int) -> bool:
        """Whether a step of callable ``cid`` may run on the thread of a server that
        took its request in (for zmq, the one reading the socket): it is compiled for
        the current graph, and every part runs on the caller's thread and briefly, so
        that it needs nothing from this task's server and waits for nothing but its
        one inline RunGraph call. That is a step wholly on this task whose graph runs
        straight through (:meth:`Worker.runs_without_blocking`), or one whose only other
        part is the inline pushing partition (see :meth:`_first_inline`). Two such
        steps that took long (:meth:`not_quick`) end it for the callable."""
        cs = self._callables.get(cid)
        if cs is None or cs.slow_inline >= 2 or cs.version != self.graph.version \
                or self.closed:
            return False
        local = self.master.local_worker
        if cs.mode == "local":
            part = cs.parts[0] if cs.parts else None
            return part is not None and part.worker is local and \
                local.runs_without_blocking(part.handle)
        return cs.mode == "workers" and cs.first_inline is not None and \
            all(p.on_caller for p in cs.parts)

    def not_quick(self, cid: int) -> None:
        """A step of callable ``cid`` run inline took long; the second time, its steps
        stop running inline (see :meth:`runs_inline`)."""
        cs = self._callables.get(cid)
        if cs is not None:
            cs.slow_inline += 1

    def run_callable(self, cid: int, args: Sequence[Any], trace: bool = False,
                     timeout_ms: int = 0) -> tuple[list[Any], list[NodeStat] | None]:
        """Run a compiled step; ``timeout_ms`` (else the config's
        ``operation_timeout_in_ms``) bounds how long a blocked step may wait."""
        cs = self._callables.get(cid)
        if cs is None:
            if self.closed:
                raise self.master.not_found(self.handle)
            raise errors.InvalidArgumentError(None, None, f"no callable with handle {cid}")
        if self.pending_error is not None:
            e = self._take_pending()
            if e is not None:
                raise e
        if cs.version != self.graph.version:
            with self._lock:
                if cs.version != self.graph.version:
                    self._refresh(cs)
        # at exit (only daemon threads run then) a new step could block on another task
        # after the steps in flight were cancelled: it is never started
        _threads.park_if_exiting()
        with self._use_lock:
            if self.closed:
                raise self.master.not_found(self.handle)
            self.running += 1
        try:
            return self._run_callable(cs, trace, timeout_ms, args)
        except BaseException:
            # cancelled because the process is exiting: this daemon thread waits to be
            # stopped rather than raise (and print) an error nobody can handle
            _threads.park_if_exiting()
            raise
        finally:
            with self._use_lock:
                self.running -= 1
                self.last_used = time.monotonic()

    def _run_callable(self, cs: "CompiledStep", trace: bool, timeout_ms: int,
                      args: Sequence[Any]) -> tuple[list[Any], list[NodeStat] | None]:
        """Run the compiled step ``cs`` once: a step wholly on the local worker with one
        ``run_graph`` call, a staged one with :meth:`_run_staged`, any other with
        :meth:`_run_on_workers`. Returns the fetched values and (``trace``) the node
        stats, which also feed the session's cost model. A task that lost the step's
        graphs (it restarted) is probed at once so that this step reports it."""
        if not timeout_ms and self.config is not None:
            timeout_ms = self.config.operation_timeout_in_ms
        timeout = timeout_ms / 1000.0 if timeout_ms and timeout_ms > 0 else None
        stats: list[NodeStat] | None = None
        try:
            mode = cs.mode
            if mode == "local":
                part = cs.parts[0]
                step_id = next(_step_ids) if self.master.cluster is None else \
                    random.getrandbits(63) or 1
                try:
                    resp = part.worker.run_graph(RunGraphRequest(
                        part.handle, step_id, args, trace, timeout))
                except (errors.AbortedError, errors.UnavailableError,
                        errors.DeadlineExceededError) as e:
                    raise _name_task(e, part.worker) from None
                out, stats = resp.outputs, resp.stats
            elif mode == "staged":
                out, stats = self._run_staged(cs, args, trace, timeout)
            else:
                out, stats = self._run_on_workers(cs, args, trace, timeout)
        except errors.AbortedError as e:
            if "is not registered" in e.message:
                # a task lost our graphs: it restarted. Find out now rather than at the
                # next health check, so that this step reports it and the next recovers
                for p in list(cs.parts):
                    w = p.worker
                    if w is not self.master.local_worker and self.master.probe(w):
                        pending = self._take_pending()
                        if pending is not None:
                            raise pending from None
            raise
        if stats:
            self.cost_model.record_step_stats(stats, cs.ir)
        return out, stats

    def _run_on_workers(self, cs: CompiledStep, args: Sequence[Any], trace: bool,
                        timeout: float | None
                        ) -> tuple[list[Any], list[NodeStat] | None]:
        """One step over several tasks: one RunGraph per task, as each part's compiled
        request says (:class:`StepPart`). The parts that run on other threads are
        started first, then those on the master's thread (the first inline part, then
        the master's own); the first failure (a task's error, or the health checker
        finding a task gone) aborts the step everywhere and is raised. Returns the
        fetched values and (``trace``) the node stats."""

        master = self.master
        step_id = random.getrandbits(63) or 1
        workers = [p.worker for p in cs.parts]
        local = master.local_worker
        fl = _Inflight(step_id, workers, local)
        master._inflight[step_id] = fl
        out: list[Any] = [None] * len(cs.fetches)
        part_stats: list[list[NodeStat] | None] = [None] * len(cs.parts)

        def run(i: int) -> None:
            """Run part ``i`` and put ``(i, outputs, None)`` on ``fl.q``; what it pushed
            goes to the master's own worker. A failure fails the step (naming the
            task) and puts ``(i, None, None)``."""
            p = cs.parts[i]
            try:
                resp = p.worker.run_graph(p.request(step_id, args, trace, timeout,
                                                    fl.cancel))
                if p.push_to is not None:
                    local.accept_pushed(step_id, resp.pushed)
            except BaseException as e:  # noqa: BLE001 - reported to the waiting master
                fl.fail(_name_task(e, p.worker))
                fl.q.put((i, None, None))
                return
            part_stats[i] = resp.stats
            fl.q.put((i, resp.outputs, None))

        try:
            # a task that failed since the last health check fails the step up front
            for w in workers:
                down = master._down.get((getattr(w, "job", None), getattr(w, "task", None)))
                if down is not None and w is not local:
                    raise errors.UnavailableError(None, None, down)
            pool = _partition_pool()
            for i, p in enumerate(cs.parts):
                if not p.on_caller:
                    pool.submit(run, i)
            if cs.first_inline is not None:
                run(cs.first_inline)
            for i, p in enumerate(cs.parts):
                if p.on_caller and i != cs.first_inline and fl.error is None:
                    run(i)
            remaining = len(cs.parts)
            while remaining and fl.error is None:
                i, r, e = fl.q.get()
                if i < 0:
                    break
                remaining -= 1
                if r is not None:
                    for pos in cs.parts[i].fetch_positions:
                        out[pos] = r[pos]
            if fl.error is not None:
                raise fl.error
            fl.done()
        finally:
            master._inflight.pop(step_id, None)
            if cs.push and fl.error is None:
                local.forget_step(step_id)
        return out, _joined(part_stats) if trace else None

    def _run_staged(self, cs: CompiledStep, args: Sequence[Any], trace: bool,
                    timeout: float | None) -> tuple[list[Any], list[NodeStat] | None]:
        """One staged step, all on the caller's thread: the other task's first stage
        (its reply brings what it sent to this task), this task's part (what it sends
        to the other task is kept), the other task's second stage (given those). The
        first failure aborts the step on both tasks and is raised; the health checker
        failing the step ends a waiting call at once."""
        master = self.master
        staged: StagedParts = cs.staged  # type: ignore[assignment]
        first, second, mine = staged.first, staged.second, staged.local
        local, other = mine.worker, first.worker
        step_id = random.getrandbits(63) or 1
        fl = _Inflight(step_id, [other, local], local)
        master._inflight[step_id] = fl
        out: list[Any] = [None] * len(cs.fetches)
        w: Any = other
        try:
            down = master._down.get((other.job, other.task))
            if down is not None:
                raise errors.UnavailableError(None, None, down)
            ra = other.run_graph(first.request(step_id, args, trace, timeout, fl.cancel))
            local.accept_pushed(step_id, ra.pushed)
            w = local
            rl = local.run_graph(mine.request(step_id, args, trace, timeout))
            w = other
            req = second.request(step_id, args, trace, timeout, fl.cancel)
            req.pushed_in, req.pushed_in_from = rl.pushed, (local.job, local.task)
            rb = other.run_graph(req)
            for r, part in ((ra, first), (rl, mine), (rb, second)):
                for pos in part.fetch_positions:
                    out[pos] = r.outputs[pos]
        except BaseException as e:  # noqa: BLE001 - the step fails on both tasks
            fl.fail(_name_task(e, w))
            raise fl.error from None  # type: ignore[misc]
        finally:
            master._inflight.pop(step_id, None)
            if fl.error is None:
                local.forget_step(step_id)
        if fl.error is not None:
            raise fl.error
        fl.done()
        return out, _joined([ra.stats, rl.stats, rb.stats]) if trace else None

    def check_graph_version(self, version: int) -> None:
        """A remote client's request names the graph version it expects."""
        if version and version > self.graph_version:
            raise errors.FailedPreconditionError(
                None, None, f"session {self.handle}: the client's graph version {version} "
                f"was never sent to the master (it has {self.graph_version})")

    def release_callable(self, cid: int) -> None:
        """Forget the callable ``cid`` and deregister its graphs from their workers."""
        with self._lock:
            cs = self._callables.pop(cid, None)
            if cs is not None:
                self._by_sig = {k: v for k, v in self._by_sig.items() if v != cid}
                for p in cs.parts:
                    p.worker.deregister_graph(p.handle)

    def partition_graphs(self, cid: int) -> list[Any]:
        """The compiled step's per-device graphs as GraphDefs."""
        return partition_graph_defs(self._callables[cid].partitions)

    def placement_of(self, cid: int) -> dict[str, str]:
        """``{node name: assigned device}`` of the compiled step ``cid``."""
        return dict(self._callables[cid].placement)

    def invalidate(self, worker: Any, error: BaseException | None = None) -> None:
        """``worker`` restarted: the steps registered on it compile again when next run,
        and the session's next step raises ``error`` (once) to report the restart."""
        with self._lock:
            hit = False
            for cs in self._callables.values():
                if any(p.worker is worker for p in cs.parts):
                    cs.parts = [p for p in cs.parts if p.worker is not worker]
                    cs.version, cs.key = -1, None
                    hit = True
            if hit and error is not None:
                self.pending_error = error

    def _take_pending(self) -> BaseException | None:
        with self._lock:
            e, self.pending_error = self.pending_error, None
        return e

    def close(self) -> None:
        self.closed = True
        for w in self.master.workers_for(self.config):
            try:
                w.cleanup_session(self.handle)
            except errors.OpError:
                pass
        self._callables.clear()
        self._by_sig.clear()


def _joined(stats: Sequence[list[NodeStat] | None]) -> list[NodeStat]:
    """The node stats of a step's parts, in one list."""
    return [st for part in stats for st in (part or ())]


def _name_task(e: BaseException, w: Any) -> BaseException:
    """Make a transport failure name the task it happened on."""
    if isinstance(e, (errors.UnavailableError, errors.DeadlineExceededError)) and \
            getattr(w, "job", None) and "/job:" not in e.message:
        target = getattr(w, "target", "")
        return type(e)(None, None, f"task {_task_name(w)}" +
                       (f" at {target}" if target else "") + f": {e.message}")
    return e


def _matches(filters: Sequence[str], job: str, task: int) -> bool:
    if not filters:
        return True
    for f in filters:
        sp = DeviceSpec.from_string(f)
        if (sp.job is None or sp.job == job) and (sp.task is None or sp.task == task):
            return True
    return False


class Master:
    """The master service of one target: the in-process implementation of
    :class:`~flowrt.plugin.services.MasterService`.

    :param runtime: the runtime
    :param local_worker: the worker in this process (in-process sessions use only it)
    :param cluster: the :class:`~flowrt.cluster.ClusterSpec` of a server's cluster
        (None: this master has only its local worker)
    :param transport: how to reach the other tasks of ``cluster``
    :param health_check_period: seconds between health checks of the other tasks
        (default :data:`HEALTH_CHECK_PERIOD`)
    :param session_gc_seconds: close sessions nobody has used for this long, with no
        step running (a client that died without closing its session); None or 0: never
    """

    def __init__(self, runtime: Any, local_worker: Any, cluster: Any = None,
                 transport: Any = None, health_check_period: float | None = None,
                 session_gc_seconds: float | None = None):
        """See the class's parameters; starts the session collector if asked."""
        self.runtime = runtime
        self.local_worker = local_worker
        self.cluster = cluster
        self.transport = transport
        self.health_check_period = health_check_period or HEALTH_CHECK_PERIOD
        self._sessions: dict[str, MasterSession] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, int], Any] = {}
        self._inflight: dict[int, _Inflight] = {}
        self._monitor: threading.Thread | None = None
        self._stopped = threading.Event()
        self._down: dict[tuple[str, int], str] = {}
        self._incarnations: dict[tuple[str, int], int] = {}
        _MASTERS.add(self)
        self.session_gc_seconds = float(session_gc_seconds or 0.0)
        if self.session_gc_seconds < 0:
            raise ValueError(f"session_gc_seconds must be >= 0, got {session_gc_seconds}")
        #: how many sessions the garbage collector closed
        self.collected_sessions = 0
        if self.session_gc_seconds > 0:
            threading.Thread(target=self._gc_loop, name="flowrt-session-gc",
                             daemon=True).start()

    @classmethod
    def in_process(cls, runtime: Any, config: Any = None) -> "Master":
        """A master with a worker of its own, in this process (``/job:localhost``):
        the master of ``Session("")`` and of a named ``inproc://`` server. Its steps
        call the worker directly, arrays by reference. ``config``: the
        ``ConfigProto`` the worker discovers its devices with."""

        return cls(runtime, Worker(runtime, "localhost", 0, config))

    # -- the cluster ----------------------------------------------------------------
    def worker_for(self, job: str, task: int) -> Any:
        """The worker service of ``/job:job/task:task`` (a client unless it is ours)."""
        lw = self.local_worker
        if job == lw.job and task == lw.task:
            return lw
        c = self._clients.get((job, task))
        if c is None:
            if self.cluster is None:
                raise errors.InvalidArgumentError(None, None, f"/job:{job}/task:{task} is "
                                                  "not a task of this master's cluster")
            try:
                addr = self.cluster.task_address(job, task)
            except ValueError as e:
                raise errors.InvalidArgumentError(None, None, str(e)) from None
            with self._lock:
                c = self._clients.get((job, task))
                if c is None:
                    c = self._clients[(job, task)] = self.transport.worker_client(addr)
                    if getattr(c, "job", None) in (None, ""):
                        c.job, c.task = job, task
        return c

    def workers_for(self, config: Any) -> list[Any]:
        """The workers a session with ``config`` may use (``device_filters``)."""
        if self.cluster is None:
            return [self.local_worker]
        filters = list(config.device_filters) if config is not None else []
        out = []
        for job in self.cluster.jobs:
            for task in self.cluster.task_indices(job):
                if _matches(filters, job, task):
                    out.append(self.worker_for(job, task))
        if not out:
            raise errors.InvalidArgumentError(None, None, f"device_filters {filters} match "
                                              "no task of the cluster "
                                              f"{self.cluster.as_dict()}")
        return out

    def _connect(self, workers: list[Any], deadline_s: float) -> None:
        """Wait until every remote worker answers (up to ``deadline_s``), then learn its
        devices; name the first task that never answered."""
        deadline = time.monotonic() + deadline_s
        for w in workers:
            if w is self.local_worker:
                continue
            delay = 0.05
            while True:
                try:
                    # never past the deadline by much: the client waits only a
                    # little longer (flowrt.rpc.call_timeout) to hear which task it was
                    left = max(0.05, deadline - time.monotonic())
                    resp = w.get_status(timeout=min(left, 10.0))
                    key = (w.job, w.task)
                    if resp.job and (resp.job, resp.task) != key:
                        raise errors.InvalidArgumentError(
                            None, None, f"the server at {w.target} is "
                            f"/job:{resp.job}/task:{resp.task}, but the cluster says "
                            f"{_task_name(w)} is there")
                    self._observe(w)
                    break
                except (errors.UnavailableError, errors.DeadlineExceededError) as e:
                    # give up at the deadline, not before: a remote client waits for
                    # this answer up to then (and a little more), not again
                    now = time.monotonic()
                    if now >= deadline - 0.01:
                        raise errors.UnavailableError(
                            None, None, f"could not reach task {_task_name(w)} at "
                            f"{w.target} within {deadline_s:g} s "
                            f"(last error: {e.message})") from None
                    time.sleep(min(delay, deadline - now))
                    delay = min(1.0, delay * 2)
        if self.cluster is not None:
            self._start_monitor()

    def _start_monitor(self) -> None:
        if self._monitor is not None:
            return
        with self._lock:
            if self._monitor is None:
                t = threading.Thread(target=self._health_loop, name="flowrt-health",
                                     daemon=True)
                self._monitor = t
                t.start()

    def _health_loop(self) -> None:
        """Every period, ask each remote task for its status. A task that does not
        answer fails the steps that involve it (UnavailableError naming it); one that
        answers with a new incarnation restarted: its graphs are registered again."""

        while not self._stopped.wait(self.health_check_period):
            clients = list(self._clients.items())
            if not clients or not self._sessions:
                continue
            try:
                futs = [(k, c, _partition_pool().submit(c.get_status,
                                                        timeout=HEALTH_CHECK_TIMEOUT))
                        for k, c in clients]
            except RuntimeError:  # the pool was shut down (or no thread can start)
                return
            for key, c, f in futs:
                try:
                    f.result(HEALTH_CHECK_TIMEOUT + 1.0)
                except Exception as e:  # noqa: BLE001 - the task is unreachable
                    msg = getattr(e, "message", None) or f"{type(e).__name__}: {e}"
                    self._task_failed(c, errors.UnavailableError(
                        None, None, f"task {_task_name(c)} at {c.target} is unreachable "
                        f"(health check failed: {msg})"))
                    continue
                self._observe(c)

    def _observe(self, w: Any) -> bool:
        """``w`` just answered a status request: it is up. When its incarnation
        differs from the one seen before, it restarted: the steps in flight on it fail,
        and every session that registered graphs on it reports the restart once
        (AbortedError) and then registers them again. Returns whether it restarted."""
        key = (w.job, w.task)
        with self._lock:
            old = self._incarnations.get(key)
            self._incarnations[key] = w.incarnation
            self._down.pop(key, None)
        if old is None or old == w.incarnation:
            return False
        self._task_restarted(w, errors.AbortedError(
            None, None, f"task {_task_name(w)} at {w.target} restarted (incarnation "
            f"{old:x} is now {w.incarnation:x}): the state it held (variables, queues) was "
            "lost; run the step again (and re-initialise its variables)"))
        return True

    def probe(self, w: Any) -> bool:
        """Ask ``w`` for its status now (a step just failed on it); returns whether it
        restarted. An unreachable task is left to the health checker."""
        try:
            w.get_status(timeout=HEALTH_CHECK_TIMEOUT)
        except Exception:  # noqa: BLE001 - unreachable: nothing learnt
            return False
        return self._observe(w)

    def _task_failed(self, w: Any, error: errors.OpError) -> None:
        self._down[(w.job, w.task)] = error.message
        for fl in list(self._inflight.values()):
            if w in fl.workers:
                fl.fail(error)

    def _task_restarted(self, w: Any, error: errors.OpError) -> None:
        self._task_failed(w, error)
        self._down.pop((w.job, w.task), None)
        for s in list(self._sessions.values()):
            s.invalidate(w, error)

    # -- sessions ---------------------------------------------------------------------
    def create_session(self, graph: Any, config: Any = None,
                       connect_timeout: float | None = None) -> str:
        """Start a session on ``graph`` (a Graph object in-process); returns its handle.
        In a cluster, waits up to ``connect_timeout`` seconds (else the config's
        ``operation_timeout_in_ms``, else 30 s) for every task to answer."""
        handle = f"s{next(self._ids)}_{random.getrandbits(48):012x}"
        if self.cluster is not None:
            if connect_timeout is None:
                ms = config.operation_timeout_in_ms if config is not None else 0
                connect_timeout = ms / 1000.0 if ms > 0 else 30.0
            self._connect(self.workers_for(config), connect_timeout)
        with self._lock:
            self._sessions[handle] = MasterSession(self, handle, graph, config)
        return handle

    def create_session_from_graph_def(self, graph_def: Any, config: Any = None,
                                      version: int = 0) -> str:
        """A session for a remote client: its graph arrives as a GraphDef."""
        h = self.create_session(self._import(graph_def), config)
        self._sessions[h].graph_version = version
        return h

    def extend_session(self, handle: str, graph_def: Any, version: int) -> None:
        """The client's graph grew: replace the session's graph by its new version."""
        s = self.session(handle)
        g = self._import(graph_def)
        with s._lock:
            s.graph = g
            s.graph_version = version

    def _import(self, graph_def: Any) -> Any:
        try:
            return import_client_graph(self.runtime, graph_def)
        except (ValueError, TypeError, KeyError) as e:
            raise errors.InvalidArgumentError(None, None, f"bad GraphDef: {e}") from None

    def session(self, handle: str) -> MasterSession:
        """The session ``handle`` (``AbortedError`` when it is not known)."""
        s = self._sessions.get(handle)
        if s is None:
            raise self.not_found(handle)
        s.last_used = time.monotonic()
        return s

    def not_found(self, handle: str) -> errors.AbortedError:
        """The error for a call on a session this master does not hold (any more)."""
        gc = self.session_gc_seconds
        why = f"closed (or collected after {gc:g} s unused)" if gc else "closed"
        return errors.AbortedError(None, None, f"Session {handle} is not found: it was "
                                   f"{why}, or the master restarted.")

    def collect_idle_sessions(self, now: float | None = None) -> list[str]:
        """Close every session unused for ``session_gc_seconds`` with no step running;
        returns their handles. Their graphs are deregistered on every worker, so a
        client that died without closing its session leaves nothing behind."""
        if self.session_gc_seconds <= 0:
            return []
        now = time.monotonic() if now is None else now
        gc = self.session_gc_seconds
        idle: list[str] = []
        for h, s in list(self._sessions.items()):
            with s._use_lock:  # no step may start on it from here on
                if s.running or now - s.last_used < gc:
                    continue
                s.closed = True
            with self._lock:
                self._sessions.pop(h, None)
            s.close()
            idle.append(h)
        self.collected_sessions += len(idle)
        return idle

    def _gc_loop(self) -> None:
        period = min(10.0, max(0.05, self.session_gc_seconds / 4))
        while not self._stopped.wait(period):
            try:
                self.collect_idle_sessions()
            except Exception:  # noqa: BLE001 - a worker gone mid-cleanup: next round
                pass

    def close_session(self, handle: str) -> None:
        """Close a session: cancel its steps, deregister its graphs on every task."""
        with self._lock:
            s = self._sessions.pop(handle, None)
        if s is not None:
            s.close()

    def list_devices(self) -> list[tuple[str, str, int, int]]:
        """``[(name, type, memory limit, incarnation)]`` of every device."""
        return [(d.name, d.device_type, d.memory_limit, d.incarnation)
                for w in self.workers_for(None) for d in w.devices]

    def reset(self, containers: Sequence[str] | None = None) -> None:
        """Clear resource containers on every worker; close every session."""
        for h in list(self._sessions):
            self.close_session(h)
        for w in self.workers_for(None):
            w.reset(containers)

    def shutdown(self, reason: str = "") -> None:
        """Stop every task of the cluster, this one included (each task's
        ``Server.join()`` returns)."""
        self.shutdown_cluster(reason)
        self.local_worker.shutdown(reason)

    def shutdown_cluster(self, reason: str = "") -> None:
        """Stop every other task of the cluster (their ``Server.join()`` returns); the
        caller stops its own server."""
        for h in list(self._sessions):
            try:
                self.close_session(h)
            except errors.OpError:
                pass
        if self.cluster is not None:
            for job in self.cluster.jobs:
                for task in self.cluster.task_indices(job):
                    w = self.worker_for(job, task)
                    if w is self.local_worker:
                        continue
                    try:
                        w.shutdown(reason)
                    except errors.OpError:
                        pass  # already gone

    def stop(self) -> None:
        """Stop the health checker and close the clients (the server is stopping)."""
        self._stopped.set()
        for c in list(self._clients.values()):
            try:
                c.close()
            except Exception:  # noqa: BLE001 - an in-process task already gone, ...
                pass
