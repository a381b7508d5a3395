"""The worker service: devices, resource managers, registered graphs, run graph.

A worker owns the devices of one task. The master registers each partition of a step
once per step signature (``register_graph``) and then runs it with one small call per
step (``run_graph``). In-process, the master calls these methods directly; across
processes, a transport plugin serves them.
"""
from __future__ import annotations

import itertools
import os
import random
import threading
import time
from typing import Any, Callable, Sequence

from ..base import errors
from ..base.device_spec import DeviceSpec
from ..engine.executor import DEAD, Executor, NodeStat, SessionState, StepContext
from ..engine.ir import GraphIR
from ..engine.rendezvous import Rendezvous, RendezvousMgr, make_key
from ..plugin.services import RunGraphRequest, RunGraphResponse, WorkerStatus
from ..engine.executor import _init_worker_thread
from ..base.threads import DaemonPool

__all__ = ["Worker"]

#: how long a remote receive may wait for its tensor when the step has no deadline
RECV_TIMEOUT = 3600.0
#: how long a remote receive for a step this task does not know (it runs no part of
#: it and holds nothing sent in it) waits for the step to start here before it fails
#: with AbortedError (``FLOWRT_UNKNOWN_STEP_S`` in the server's environment)
UNKNOWN_STEP_S = float(os.environ.get("FLOWRT_UNKNOWN_STEP_S", "") or 10.0)


class _Registered:
    """A registered graph: one executor per device partition."""

    __slots__ = ("handle", "session", "executor", "parts", "n_fetches", "straight_line",
                 "positions", "transfers", "answers_at_once", "no_expensive_kernel",
                 "pulled_together_keys", "pulled_together_count", "slow_answers",
                 "recv_keys", "recvs_only", "pushes_only_to", "runs_on_pushed")

    def __init__(self, handle: str, session: str, parts: list[tuple[Executor, list[int]]],
                 n_fetches: int, pull_together: Sequence[str] = (),
                 task_of: Callable[[str], tuple[str, int] | None] = lambda d: None):
        """``parts``: ``(executor, its step-wide fetch positions)`` per device;
        ``pull_together`` and ``task_of`` (a device name's task): see
        :meth:`Worker.register_graph`."""
        self.handle, self.session = handle, session
        self.parts = parts
        self.n_fetches = n_fetches
        self.executor = parts[0][0] if len(parts) == 1 else None
        self.straight_line = all(ex.straight_line for ex, _ in parts)
        self.positions = sorted(p for _, ps in parts for p in ps)
        facts = parts[0][0].wait_facts
        for ex, _ in parts[1:]:
            facts = facts.merge(ex.wait_facts)
        # does it exchange tensors (with other devices or tasks)?
        self.transfers = facts.transfers
        # no expensive kernel: a step of it takes little time once its inputs are there
        self.no_expensive_kernel = not facts.expensive
        # it runs straight through, never waiting for another step or task: a server
        # may answer its RunGraph at once, on its I/O thread
        self.answers_at_once = (self.no_expensive_kernel and self.executor is not None
                                and self.straight_line)
        # steps answered at once that took long (see Worker.not_quick)
        self.slow_answers = 0
        # the rendezvous keys of its receives, and whether they are the only kernels
        # that may wait: with all of those values there, a step runs straight through
        self.recv_keys = tuple(
            make_key(str(c.node.node_attrs["send_device"]),
                     int(c.node.node_attrs["send_device_incarnation"]),
                     str(c.node.node_attrs["recv_device"]),
                     str(c.node.node_attrs["tensor_name"]))
            for ex, _ in parts for c in ex.nodes if c.node.type == "_Recv")
        self.recvs_only = (self.no_expensive_kernel and self.executor is not None and
                           not facts.waits)
        # the tasks its sends go to (None among them: a device of no known task)
        tasks = {task_of(str(c.node.node_attrs["recv_device"]))
                 for ex, _ in parts for c in ex.nodes if c.node.type == "_Send"}
        lone = self.executor is not None
        #: the one task it sends to, when it also receives nothing and runs straight
        #: through: a step that pushes to that task runs apart (Worker._run_pushing)
        self.pushes_only_to: tuple[str, int] | None = \
            next(iter(tasks)) if (lone and self.straight_line and not self.recv_keys
                                  and len(tasks) == 1) else None
        #: it sends nothing and has a straight-line variant for steps whose receives
        #: are all there (Worker._run_ready)
        self.runs_on_pushed = lone and not tasks and parts[0][0].can_run_ready
        # per sending device: the keys of the receives pulled together (see
        # _WorkerRendezvous)
        names = set(pull_together)
        together: dict[str, set[str]] = {}
        for ex, _ in parts:
            for c in ex.nodes:
                if c.node.type == "_Recv" and c.node.name in names:
                    a = c.node.node_attrs
                    key = make_key(str(a["send_device"]), int(a["send_device_incarnation"]),
                                   str(a["recv_device"]), str(a["tensor_name"]))
                    together.setdefault(str(a["send_device"]), set()).add(key)
        self.pulled_together_keys = {d: frozenset(k) for d, k in together.items()}
        #: per sending task, how many keys it sends together
        self.pulled_together_count: dict[tuple[str, int], int] = {}
        count = self.pulled_together_count
        for dev, keys in self.pulled_together_keys.items():
            t = task_of(dev)
            if t is not None:
                count[t] = count.get(t, 0) + len(keys)


class _HostSource:
    """Where a tensor pulled from another task comes from: host memory."""

    device_type = "CPU"
    name = "host"

    @staticmethod
    def to_host(value: Any) -> Any:
        """A pulled tensor is in host memory already."""
        return value


_HOST = _HostSource()


class _PullBatch:
    """The receives of one step waiting for a pull from one sending task."""

    __slots__ = ("keys", "scheduled", "count")

    def __init__(self) -> None:
        #: ``(rendezvous key, callback token)`` of the receives not pulled yet
        self.keys: list[tuple[str, int]] = []
        #: whether a pull of ``keys`` is scheduled on the pool and has not started
        self.scheduled = False
        #: how many receives from the task the step has made so far
        self.count = 0


def _live(item: Any) -> bool:
    """A rendezvous entry ``(value, source device)`` that is not a dead tensor."""
    return item[0] is not DEAD


class _WorkerRendezvous:
    """A step's rendezvous on a worker of a cluster: sends stay local (the receiving
    task pulls them); a receive whose sender is on another task pulls the tensor from
    that task's worker. Receives from one task are batched: the first one of a burst
    schedules a pull on the pool, the keys that arrive before it runs join it, and one
    ``recv_tensors`` call fetches whatever of them is ready (at least one); the rest are
    asked for again. A pull in flight never holds keys that arrived after it started,
    so a tensor sent only once another was received still arrives. Tensors from a task
    in ``pushed`` come with that task's RunGraph reply (the master puts them in the
    local rendezvous): they are waited for locally. Aborting the step fails the pulls
    still waiting at once (their late answers are dropped), so a silent sender cannot
    hold the step."""

    __slots__ = ("worker", "step_id", "local", "timeout", "pushed", "_pending", "_error",
                 "_lock", "_batches", "_seq", "pulled_together_count")

    def __init__(self, worker: "Worker", step_id: int, local: Rendezvous,
                 timeout: float | None, pushed: frozenset[tuple[str, int]] = frozenset(),
                 pulled_together_count: dict[tuple[str, int], int] | None = None):
        self.worker, self.step_id, self.local = worker, step_id, local
        self.timeout = timeout
        self.pushed = pushed
        #: tasks whose tensors are pulled together: how many receives to gather first
        self.pulled_together_count = pulled_together_count or {}
        self._pending: dict[int, Any] = {}
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        # per sending task: the receives waiting for a pull from it
        self._batches: dict[tuple[str, int], _PullBatch] = {}
        self._seq = itertools.count()

    def send(self, key: str, value: Any) -> None:
        """A send stays in this task's rendezvous (the receiving task pulls it)."""
        self.local.send(key, value)

    def recv_async(self, key: str, callback: Any) -> None:
        """Receive ``key``: locally when this task (or a task that pushes) sent it,
        else join the batch pulled from the sending task."""
        w = self.worker
        task = w._task_of(key.partition(";")[0])
        if task is None or task == (w.job, w.task) or task in self.pushed:
            self.local.recv_async(key, callback)
            return
        with self._lock:
            err = self._error
            if err is None:
                token = next(self._seq)
                self._pending[token] = callback
                b = self._batches.get(task)
                if b is None:
                    b = self._batches[task] = _PullBatch()
                b.keys.append((key, token))
                b.count += 1
                want = self.pulled_together_count.get(task)
                # a task pulled together: one call, once every receive from it asked
                start = not b.scheduled and (want is None or b.count >= want)
                b.scheduled = b.scheduled or start
        if err is not None:
            callback(None, err)
        elif start:
            _partition_pool().submit(self._pull, task)

    def _finish(self, token: int, item: Any, error: BaseException | None) -> None:
        with self._lock:
            cb = self._pending.pop(token, None)
        if cb is not None:  # else the step was aborted and the callback fired
            cb(item, error)

    def _pull(self, task: tuple[str, int]) -> None:
        """Pull the keys waiting on ``task`` (and re-ask for those not ready yet)."""
        w = self.worker
        with self._lock:
            b = self._batches[task]
            batch, b.keys, b.scheduled = b.keys, [], False
        client = None
        together = task in self.pulled_together_count
        while batch:
            try:
                client = client or w.resolver(*task)
                got = client.recv_tensors(self.step_id, [k for k, _ in batch],
                                          self.timeout or RECV_TIMEOUT, together)
            except Exception as e:  # noqa: BLE001 - every failure is the step's
                err = self._pull_error(e, task, client, batch[0][0])
                for _, token in batch:
                    self._finish(token, None, err)
                return
            done = set()
            for i, value in got:
                if i not in done:
                    done.add(i)
                    self._finish(batch[i][1], (value, _HOST), None)
            rest = [kt for i, kt in enumerate(batch) if i not in done]
            with self._lock:
                if self._error is not None:
                    return  # aborted: every waiting callback has fired
                b = self._batches[task]
                if rest and b.scheduled:  # a pull is scheduled, not started: it takes them
                    b.keys[:0] = rest
                    rest = []
            batch = rest

    @staticmethod
    def _pull_error(e: BaseException, task: tuple[str, int], client: Any,
                    key: str) -> BaseException:
        where = f"/job:{task[0]}/replica:0/task:{task[1]}"
        if isinstance(e, (errors.UnavailableError, errors.DeadlineExceededError)):
            # the sending task is gone or silent: say which one
            target = getattr(client, "target", "")
            return type(e)(None, None, f"task {where}" + (f" at {target}" if target else "")
                           + f": {e.message}")
        if isinstance(e, errors.OpError):
            return e
        return errors.UnavailableError(None, None, f"receiving {key} from {where} failed: "
                                       f"{type(e).__name__}: {e}")

    def abort(self, error: BaseException) -> None:
        """Fail the step: every receive still waiting gets ``error`` now."""
        with self._lock:
            if self._error is None:
                self._error = error
            pending, self._pending = list(self._pending.values()), {}
        self.local.abort(error)
        for cb in pending:
            cb(None, error)


def _withdraw(r: Rendezvous, keys: Sequence[str], callbacks: Sequence[Any]) -> set[int]:
    """Take back the receive callbacks still waiting in ``r`` (so that later sends stay
    in the mailbox); returns the indices of those a send (or an abort) already took."""
    return {i for i, (k, cb) in enumerate(zip(keys, callbacks)) if not r.withdraw(k, cb)}


def _take_sent_to(r: Rendezvous, worker: "Worker", task: tuple[str, int]
                  ) -> list[tuple[str, Any]]:
    """Remove from ``r`` every tensor sent to a device of ``task``:
    ``[(key, host value or DEAD)]``."""
    taken = r.take_values(lambda k: worker._task_of(k.split(";", 3)[2]) == task)
    return [(key, value if value is DEAD else src.to_host(value))
            for key, (value, src) in taken]


_PARTITION_POOL: list[Any] = []
_PARTITION_POOL_LOCK = threading.Lock()


def _partition_pool() -> Any:
    """Threads that run the extra partitions of multi-device steps, the parts of
    multi-task steps and the calls to other tasks made beside them. A partition may
    block on a _Recv, so each one needs a thread of its own: the pool is large.

    Its threads are daemon threads (:class:`~flowrt.threads.DaemonPool`): one blocked
    in a step (a dequeue on a ps) must not keep the process alive after its main thread
    ended, as a ``ThreadPoolExecutor``'s would (they are joined at exit); and a
    non-daemon thread still running steps after that must find the pool open."""
    if not _PARTITION_POOL:
        with _PARTITION_POOL_LOCK:
            if not _PARTITION_POOL:

                _PARTITION_POOL.append(DaemonPool(
                    256, thread_name_prefix="flowrt-partition",
                    initializer=_init_worker_thread))
    return _PARTITION_POOL[0]


class Worker:
    """One task's worker: the in-process implementation of
    :class:`~flowrt.plugin.services.WorkerService`.

    :param runtime: the runtime whose device types and kernels are used
    :param job: this task's job name (``localhost`` for an in-process session)
    :param task: this task's index
    :param config: a ``ConfigProto`` (``device_count``, GPU options) used to discover
        devices
    :param resolver: in a cluster, ``resolver(job, task)`` gives the worker service
        (a client) of another task; tensors sent from there are pulled through it
    :param file_policy: the directories its file ops may touch (a
        :class:`~flowrt.plugin.file_policy.FilePolicy`; None: anywhere), given to every
        session state it makes, which hands it to kernels (``KernelContext.file_policy``)
    """

    #: an in-process run_graph cannot stop waiting: it runs on the caller's thread
    cancellable = False

    def __init__(self, runtime: Any, job: str = "localhost", task: int = 0,
                 config: Any = None,
                 resolver: Callable[[str, int], Any] | None = None,
                 file_policy: Any = None):
        """See the class's parameters; devices are discovered on first use."""
        self.runtime = runtime
        self.file_policy = file_policy
        self.job = job
        self.task = task
        self.config = config
        self.resolver = resolver
        #: changes whenever the task restarts: masters compare it to notice
        self.incarnation = random.getrandbits(63) or 1
        self.rendezvous_mgr = RendezvousMgr()
        self._running_steps: dict[int, int] = {}
        self._step_ctx: dict[int, set[StepContext]] = {}
        self._task_cache: dict[str, tuple[str, int] | None] = {}
        self._on_shutdown: Callable[[str], None] | None = None
        self._aborted: dict[int, BaseException] = {}
        self._lock = threading.Lock()
        self._graphs: dict[str, _Registered] = {}
        self._sessions: dict[str, SessionState] = {}
        self._active: dict[str, set[StepContext]] = {}
        self._ids = itertools.count(1)
        self._devices: list[Any] | None = None

    # -- devices ----------------------------------------------------------------------
    @property
    def devices(self) -> list[Any]:
        """Every device of this task, discovered once from the config."""
        if self._devices is None:
            with self._lock:
                if self._devices is None:
                    found: list[Any] = []
                    for dt in self.runtime.device_types.values():
                        try:
                            found.extend(dt.discover(self.config, self.job, self.task))
                        except Exception as e:  # discovery must not take the worker down
                            dt.unavailable_reason = f"{type(e).__name__}: {e}"
                    if not found:
                        raise errors.UnavailableError(
                            None, None, "no devices were found: every device plugin failed "
                            "or was blocked (see `flowrt plugins`)")
                    self._devices = found
        return self._devices

    def device(self, name: str) -> Any:
        """The device of this task named ``name`` (``NotFoundError`` if none)."""
        for d in self.devices:
            if d.name == name:
                return d
        raise errors.NotFoundError(None, None, f"device {name} is not on worker "
                                   f"/job:{self.job}/task:{self.task}; it has "
                                   f"{[d.name for d in self.devices]}")

    def get_status(self, timeout: float | None = None) -> WorkerStatus:
        """This task's devices, incarnation and name (``timeout``: unused in-process)."""
        return WorkerStatus(self.devices, self.incarnation, self.job, self.task)

    # -- graphs -----------------------------------------------------------------------
    def session_state(self, session_handle: str) -> SessionState:
        """The state a session's stateful kernels keep on this worker (made on first
        use)."""
        st = self._sessions.get(session_handle)
        if st is None:
            new = SessionState(session_handle)
            new.file_policy = self.file_policy  # type: ignore[attr-defined]  # for kernels
            with self._lock:
                st = self._sessions.setdefault(session_handle, new)
        return st

    def register_graph(self, session_handle: str, ir: GraphIR,
                       fetches: Sequence[tuple[str, int]], inter_op_threads: int = 0,
                       pull_together: Sequence[str] = ()) -> str:
        """Compile a partition; returns its handle for :meth:`run_graph`.
        ``pull_together`` names the ``_Recv`` nodes whose tensors, per sending task,
        are pulled in one call that waits for all of them (the master checked that
        none of them depends on this task receiving another)."""
        by_name = {d.name: d for d in self.devices}

        def device_of(node: Any) -> Any:
            d = by_name.get(node.assigned_device or "")
            if d is None:
                raise errors.InvalidArgumentError(
                    None, node.source_op, f"node {node.name} is assigned to "
                    f"{node.assigned_device}, which is not a device of this worker "
                    f"(/job:{self.job}/task:{self.task})")
            return d

        self._forget_transfers(session_handle, ir)
        ex = Executor(ir, fetches, device_of, self.runtime, self.session_state(session_handle),
                      inter_op_threads)
        handle = f"g{next(self._ids)}_{self.incarnation & 0xffffffff:08x}"
        with self._lock:
            self._graphs[handle] = _Registered(handle, session_handle,
                                               [(ex, list(range(len(fetches))))], len(fetches),
                                               pull_together, self._task_of)
        return handle

    def register_partitions(self, session_handle: str, parts: Sequence[Any], n_fetches: int,
                            inter_op_threads: int = 0, pull_together: Sequence[str] = ()
                            ) -> str:
        """Compile the per-device partitions of one step (``flowrt.partition.Partition``
        objects); :meth:`run_graph` then runs them together (``pull_together``: see
        :meth:`register_graph`)."""
        if len(parts) == 1 and parts[0].fetch_positions == list(range(n_fetches)):
            return self.register_graph(session_handle, parts[0].ir, parts[0].fetches,
                                       inter_op_threads, pull_together)
        by_name = {d.name: d for d in self.devices}
        compiled = []
        for p in parts:
            dev = by_name.get(p.device.name)
            if dev is None:
                raise errors.InvalidArgumentError(
                    None, None, f"partition for {p.device.name} sent to worker "
                    f"/job:{self.job}/task:{self.task}, which has no such device")
            self._forget_transfers(session_handle, p.ir)
            ex = Executor(p.ir, p.fetches, lambda node, dev=dev: dev, self.runtime,
                          self.session_state(session_handle), inter_op_threads)
            compiled.append((ex, list(p.fetch_positions)))
        # the partition holding the most work runs on the caller's thread
        compiled.sort(key=lambda c: -len(c[0].nodes))
        handle = f"g{next(self._ids)}_{self.incarnation & 0xffffffff:08x}"
        with self._lock:
            self._graphs[handle] = _Registered(handle, session_handle, compiled, n_fetches,
                                               pull_together, self._task_of)
        return handle

    def _forget_transfers(self, session_handle: str, ir: GraphIR) -> None:
        """Drop the session's cached _Send/_Recv kernels named as ``ir``'s: the session
        keeps stateful kernels by node name, but a transfer's rendezvous key depends on
        its attributes (the sending device's incarnation changes when a task restarts),
        so a re-registered partition must build its own."""
        st = self._sessions.get(session_handle)
        if st is None:
            return
        with st.lock:
            for key in [k for k in st.stateful_kernels
                        if k[0] in ir.nodes and ir.nodes[k[0]].type in ("_Send", "_Recv")]:
                del st.stateful_kernels[key]

    def runs_without_blocking(self, graph_handle: str, step_id: int | None = None,
                              pushed_keys: Sequence[str] = ()) -> bool:
        """Whether a step of this registered graph runs straight through, briefly:
        one device, no expensive kernel, and no asynchronous one (no blocking queue op),
        except receives whose values are already here: pushed with the request
        (``pushed_keys``) or sent earlier in step ``step_id`` (by the first stage of a
        staged step). A server may run such steps on its I/O thread."""
        reg = self._graphs.get(graph_handle)
        if reg is None:
            return False
        if reg.answers_at_once:
            return True
        if step_id is None or not reg.recvs_only or reg.slow_answers >= 2:
            return False
        if pushed_keys:
            pushed = set(pushed_keys)
            rest = [k for k in reg.recv_keys if k not in pushed]
        else:
            rest = list(reg.recv_keys)
        if not rest:
            return True
        r = self.rendezvous_mgr.get(step_id)
        return r is not None and r.holds(rest)

    def not_quick(self, graph_handle: str) -> None:
        """A step of a registered graph that runs straight through took long; the
        second time, stop treating it as brief (its tensors are large)."""
        reg = self._graphs.get(graph_handle)
        if reg is not None:
            reg.slow_answers += 1
            if reg.slow_answers >= 2:
                reg.answers_at_once = False

    def is_light(self, graph_handle: str) -> bool:
        """Whether the registered graph has no expensive kernel (it may still wait for
        its inputs)."""
        reg = self._graphs.get(graph_handle)
        return reg is not None and reg.no_expensive_kernel

    def fetch_positions(self, graph_handle: str) -> list[int]:
        """The step-wide fetch positions a registered graph produces."""
        reg = self._graphs.get(graph_handle)
        return list(reg.positions) if reg is not None else []

    def run_graph(self, request: RunGraphRequest) -> RunGraphResponse:
        """Run a registered partition for one step (:meth:`WorkerService.run_graph
        <flowrt.plugin.services.WorkerService.run_graph>`). An in-process call is not
        :attr:`cancellable`: ``request.cancel`` is ignored (:meth:`abort_step` cancels
        it).

        In a cluster, ``push_to`` (a task) makes the tensors this step sent to that task
        leave with the response (``pushed``) instead of waiting to be pulled.
        ``pushed_from`` names the tasks whose tensors for this step will be pushed to
        this worker (:meth:`accept_pushed`): its receives from them wait locally.
        ``pushed_in`` are such tensors, ``(key, value)`` pairs task ``pushed_in_from``
        sent in this step, given with the call (the second stage of a staged step)."""
        reg = self._graphs.get(request.graph_handle)
        if reg is None:
            raise errors.AbortedError(None, None, f"graph handle {request.graph_handle} is "
                                      f"not registered on /job:{self.job}/replica:0/task:"
                                      f"{self.task} (was the worker restarted?)")
        step_id, args, timeout = request.step_id, request.args, request.timeout
        stats: list[NodeStat] | None = [] if request.trace else None
        pushed_from = request.pushed_from
        if request.pushed_in_from is not None:
            self.accept_pushed(step_id, request.pushed_in)
            pushed_from = pushed_from | {request.pushed_in_from}
        if request.rendezvous is None and self.resolver is not None and reg.transfers:
            push_to = request.push_to
            if (push_to is not None and push_to == reg.pushes_only_to and stats is None
                    and not pushed_from):
                return self._run_pushing(reg, step_id, args, push_to)
            pushed: list[tuple[str, Any]] = []
            out = self._run_in_cluster(reg, step_id, args, stats, timeout,
                                       request.push_to, pushed, pushed_from)
            return RunGraphResponse(out, pushed, stats)
        ex = reg.executor
        if ex is None:
            return RunGraphResponse(self._run_partitions(reg, step_id, args, stats,
                                                         request.rendezvous, timeout),
                                    [], stats)
        step = StepContext(step_id, request.rendezvous, ex.session_state, self.runtime)
        if not ex.straight_line:  # only steps that can block need to be cancellable
            # by its session (cleanup_session) and by its id (abort_step): a master
            # cancels a step over several tasks by id, including the part of it that
            # exchanges nothing with the others (a dequeue on the ps), which otherwise
            # would wait on and take an element after its step was cancelled
            self._track(reg.session, step_id, step)
            try:
                err = self._aborted.get(step_id)
                if err is not None:  # the abort came before the step did
                    step.abort(err)
                return RunGraphResponse(ex.run(args, step, stats, timeout), [], stats)
            finally:
                self._untrack(reg.session, step_id, step)
        return RunGraphResponse(ex.run(args, step, stats), [], stats)

    # -- steps that exchange tensors with other tasks ---------------------------------
    def _task_of(self, device_name: str) -> tuple[str, int] | None:
        t = self._task_cache.get(device_name, False)
        if t is False:
            try:
                sp = DeviceSpec.from_string(device_name)
                t = (sp.job, int(sp.task)) if sp.job is not None and sp.task is not None \
                    else None
            except (ValueError, TypeError):
                t = None
            if len(self._task_cache) > 10000:
                self._task_cache.clear()
            self._task_cache[device_name] = t
        return t  # type: ignore[return-value]

    def _step_rendezvous(self, step_id: int) -> Rendezvous:
        err = self._aborted.get(step_id)
        if err is not None:
            raise err
        return self.rendezvous_mgr.find_or_create(step_id)

    def _release_step(self, step_id: int) -> None:
        """Forget a step's rendezvous once this task ran its part and every tensor it
        sent was pulled."""
        with self._lock:
            if self._running_steps.get(step_id):
                return
            self.rendezvous_mgr.pop_if_empty(step_id)

    def _run_in_cluster(self, reg: _Registered, step_id: int, args: Sequence[Any],
                        stats: list[NodeStat] | None, timeout: float | None,
                        push_to: tuple[str, int] | None = None,
                        pushed: list[tuple[str, Any]] | None = None,
                        pushed_from: frozenset[tuple[str, int]] = frozenset()) -> list[Any]:
        """Run a registered graph that exchanges tensors with other tasks: its
        receives pull from them (:class:`_WorkerRendezvous`), and with ``push_to`` the
        tensors sent to that task are taken into ``pushed``."""
        local = self._step_rendezvous(step_id)
        if (reg.runs_on_pushed and stats is None
                and self._recvs_ready(reg, local, pushed_from)):
            return self._run_ready(reg, step_id, args, local)
        rdv = _WorkerRendezvous(self, step_id, local, timeout, pushed_from,
                                reg.pulled_together_count)
        with self._lock:
            self._running_steps[step_id] = self._running_steps.get(step_id, 0) + 1
        try:
            if reg.executor is None:
                out = self._run_partitions(reg, step_id, args, stats, rdv, timeout)
            else:
                ex = reg.executor
                step = StepContext(step_id, rdv, ex.session_state, self.runtime)
                step.on_abort(rdv.abort)
                self._track(reg.session, step_id, step)
                ready = (stats is None and ex.can_run_ready and
                         self._recvs_ready(reg, local, pushed_from))
                try:
                    vals = ex.run(args, step, stats, timeout, recvs_ready=ready)
                finally:
                    self._untrack(reg.session, step_id, step)
                out = self._at_positions(reg, vals)
            if push_to is not None and pushed is not None:
                pushed.extend(_take_sent_to(local, self, push_to))
            return out
        finally:
            with self._lock:
                n = self._running_steps.get(step_id, 1) - 1
                if n > 0:
                    self._running_steps[step_id] = n
                else:
                    self._running_steps.pop(step_id, None)
            self._release_step(step_id)

    def _run_pushing(self, reg: _Registered, step_id: int, args: Sequence[Any],
                     push_to: tuple[str, int]) -> RunGraphResponse:
        """A step of a graph that receives nothing, runs straight through and sends
        only to ``push_to``, whose reply carries every tensor it sent: nothing in it
        can wait, and no other task asks this one for its tensors, so it runs with a
        rendezvous of its own, outside the worker's tables (an abort can find nothing
        to stop in it; one that came first still fails it)."""
        err = self._aborted.get(step_id)
        if err is not None:
            raise err
        ex = reg.executor
        assert ex is not None
        rdv = Rendezvous(step_id)
        vals = ex.run(args, StepContext(step_id, rdv, ex.session_state, self.runtime))
        return RunGraphResponse(self._at_positions(reg, vals),
                                _take_sent_to(rdv, self, push_to), None)

    def _run_ready(self, reg: _Registered, step_id: int, args: Sequence[Any],
                   local: Rendezvous) -> list[Any]:
        """A step of a graph that sends nothing and whose receives all find their
        values in the step's rendezvous already (pushed to this task): it runs
        straight through on that rendezvous, with nothing to wait for or to cancel,
        outside the tables of running steps."""
        ex = reg.executor
        assert ex is not None
        try:
            vals = ex.run(args, StepContext(step_id, local, ex.session_state,
                                            self.runtime), recvs_ready=True)
        finally:
            self._release_step(step_id)
        return self._at_positions(reg, vals)

    @staticmethod
    def _at_positions(reg: _Registered, vals: list[Any]) -> list[Any]:
        """A single-executor graph's outputs at their step-wide fetch positions."""
        positions = reg.parts[0][1]
        if len(positions) == reg.n_fetches and positions == reg.positions:
            return vals
        out: list[Any] = [None] * reg.n_fetches
        for pos, v in zip(positions, vals):
            out[pos] = v
        return out

    def _recvs_ready(self, reg: "_Registered", local: Rendezvous,
                     pushed_from: frozenset[tuple[str, int]]) -> bool:
        """Whether every tensor ``reg`` receives in this step is already in the step's
        local rendezvous, none of them dead, each from this task or a task that pushes
        to it (so that receiving it takes it from there): the partition can then run
        straight through."""
        own = (self.job, self.task)
        for key in reg.recv_keys:
            task = self._task_of(key.partition(";")[0])
            if task is not None and task != own and task not in pushed_from:
                return False
        return local.holds(reg.recv_keys, _live)

    def _track(self, session: str, step_id: int, step: StepContext) -> None:
        self._active.setdefault(session, set()).add(step)
        with self._lock:
            self._step_ctx.setdefault(step_id, set()).add(step)

    def _untrack(self, session: str, step_id: int, step: StepContext) -> None:
        self._active.get(session, set()).discard(step)
        with self._lock:
            s = self._step_ctx.get(step_id)
            if s is not None:
                s.discard(step)
                if not s:
                    del self._step_ctx[step_id]

    def _step_known(self, step_id: int) -> bool:
        """Whether this task runs a part of the step or holds a tensor sent in it."""
        if step_id in self._running_steps or step_id in self._step_ctx:
            return True
        r = self.rendezvous_mgr.get(step_id)
        return r is not None and r.has_values()

    def _recv_wait(self, step_id: int, wait: Callable[[float], bool],
                   timeout: float | None, cancel: threading.Event | None) -> bool:
        """Wait with ``wait(seconds)`` (True once the receive has what it needs) for up
        to ``timeout`` seconds (None: :data:`RECV_TIMEOUT`); False when it timed out.
        A step this task does not know is waited for :data:`UNKNOWN_STEP_S` at most
        (AbortedError); ``cancel`` (the caller went away) ends the wait with
        CancelledError. (An aborted step wakes ``wait`` with its error.)"""
        now = time.monotonic()
        end = now + (RECV_TIMEOUT if timeout is None else timeout)
        unknown = None if self._step_known(step_id) else now + UNKNOWN_STEP_S
        while True:
            limit = end if unknown is None else min(end, unknown)
            left = max(0.0, limit - now)
            if wait(left if cancel is None else min(left, 0.25)):
                return True
            now = time.monotonic()
            if cancel is not None and cancel.is_set():
                raise errors.CancelledError(None, None, f"a receive of step {step_id:x} "
                                            "was cancelled: its caller went away")
            if now >= end:
                return False
            if unknown is not None and now >= unknown:
                if not self._step_known(step_id):
                    raise errors.AbortedError(
                        None, None, f"/job:{self.job}/replica:0/task:{self.task}: step "
                        f"{step_id:x} did not start on this task within "
                        f"{UNKNOWN_STEP_S:g} s of a receive asking for its tensors")
                unknown = None

    def recv_tensor(self, step_id: int, key: str, timeout: float | None = None,
                    cancel: threading.Event | None = None) -> Any:
        """The tensor this task sent under ``key`` in step ``step_id`` (waits for the
        send, see :meth:`_recv_wait`); host memory, or DEAD."""
        r = self._step_rendezvous(step_id)
        ev = threading.Event()
        box: list[Any] = []

        def arrived(item: Any, err: BaseException | None) -> None:
            box.append((item, err))
            ev.set()

        r.recv_async(key, arrived)
        failed: BaseException | None = None
        try:
            done = self._recv_wait(step_id, ev.wait, timeout, cancel)
        except errors.OpError as e:
            done, failed = False, e
        if not done and r.withdraw(key, arrived):
            self._release_step(step_id)
            raise failed or errors.DeadlineExceededError(
                None, None, f"/job:{self.job}/replica:0/task:{self.task}: tensor {key} "
                f"of step {step_id:x} was not sent within {timeout} s")
        ev.wait(10.0)  # set, or about to be: a send or an abort took the receive
        item, err = box[0]
        self._release_step(step_id)
        if err is not None:
            raise err
        value, src = item
        if value is DEAD:
            return DEAD
        return src.to_host(value)

    def recv_tensors(self, step_id: int, keys: Sequence[str],
                     timeout: float | None = None, wait_all: bool = False,
                     cancel: threading.Event | None = None) -> list[tuple[int, Any]]:
        """Several tensors this task sent in step ``step_id``: waits until at least one
        of ``keys`` was sent (every one with ``wait_all``; see :meth:`_recv_wait`),
        then returns ``[(index in keys, host value or DEAD)]`` for every key sent by
        then; the others stay for a later call."""
        r = self._step_rendezvous(step_id)
        cond = threading.Condition()
        got: dict[int, tuple[Any, BaseException | None]] = {}
        # wake the waiting thread only once enough arrived (every arrival wakes it
        # after the withdrawal below): each needless wake-up is a thread switch
        enough = [len(keys) if wait_all else 1]

        def waiter(i: int) -> Any:
            def arrived(item: Any, err: BaseException | None) -> None:
                with cond:
                    got[i] = (item, err)
                    if len(got) >= enough[0]:
                        cond.notify_all()
            return arrived

        callbacks = [waiter(i) for i in range(len(keys))]
        for k, cb in zip(keys, callbacks):
            r.recv_async(k, cb)
        failed: BaseException | None = None
        with cond:
            try:
                self._recv_wait(step_id, lambda t: cond.wait_for(
                    lambda: len(got) >= enough[0], t), timeout, cancel)
            except errors.OpError as e:
                failed = e
            enough[0] = 0
        taken = _withdraw(r, keys, callbacks)
        with cond:  # a callback a send just took is about to run: wait for it
            complete = cond.wait_for(lambda: taken <= got.keys(), 10.0)
        self._release_step(step_id)
        if not complete:
            raise errors.InternalError(None, None, f"/job:{self.job}/replica:0/task:"
                                       f"{self.task}: a receive of step {step_id:x} "
                                       "never completed")
        if not taken and failed is not None:
            raise failed
        if not taken:
            raise errors.DeadlineExceededError(
                None, None, f"/job:{self.job}/replica:0/task:{self.task}: none of the "
                f"tensors {list(keys)[:3]} of step {step_id:x} was sent within {timeout} s")
        out = []
        for i in sorted(taken):
            item, err = got[i]
            if err is not None:
                raise err
            value, src = item
            out.append((i, value if value is DEAD else src.to_host(value)))
        return out

    def try_recv_tensors(self, step_id: int, keys: Sequence[str], wait_all: bool = False
                         ) -> list[tuple[int, Any]] | None:
        """:meth:`recv_tensors` without waiting: the tensors of ``keys`` already sent,
        or None when there is none yet (with ``wait_all``: unless all were) or the step
        is not known here, or failed (the waiting call then reports it)."""
        if step_id in self._aborted:
            return None
        r = self.rendezvous_mgr.get(step_id)
        if r is None:
            return None
        try:
            got = r.take_ready(keys, wait_all)
        except errors.OpError:
            return None
        if not got:
            return None
        self._release_step(step_id)
        return [(i, value if value is DEAD else src.to_host(value))
                for i, (value, src) in got]

    def accept_pushed(self, step_id: int, items: Sequence[tuple[str, Any]]) -> None:
        """Put tensors another task pushed for step ``step_id`` (``(key, host value)``
        pairs from its RunGraph reply) into this task's rendezvous of the step, where
        its receives find them. Does nothing once the step was aborted here."""
        try:
            r = self._step_rendezvous(step_id)
            for key, value in items:
                r.send(key, (value, _HOST))
        except errors.OpError:
            pass  # the step failed: its receives already have their error

    def forget_step(self, step_id: int) -> None:
        """Drop what is left of a finished step's rendezvous on this task (values
        pushed for receives that never ran, e.g. on an untaken branch)."""
        with self._lock:
            if not self._running_steps.get(step_id):
                self.rendezvous_mgr.pop(step_id)

    def abort_step(self, step_id: int, error: BaseException) -> None:
        """Abort one step on this task: its rendezvous and every partition running it."""
        with self._lock:
            r = self.rendezvous_mgr.pop(step_id)
            steps = list(self._step_ctx.get(step_id, ()))
            self._aborted[step_id] = error
            while len(self._aborted) > 1024:  # remember the recent ones only
                del self._aborted[next(iter(self._aborted))]
        if r is not None:
            r.abort(error)
        for st in steps:
            st.abort(error)

    def shutdown(self, reason: str = "") -> None:
        """Ask the server exporting this worker to stop (the cluster is shutting
        down); without a server, nothing happens."""
        cb = self._on_shutdown
        if cb is not None:
            cb(reason)

    def _run_partitions(self, reg: _Registered, step_id: int, args: Sequence[Any],
                        stats: list[NodeStat] | None, rendezvous: Any,
                        timeout: float | None) -> list[Any]:
        """Run every partition of a multi-device step at once, sharing one step context
        and rendezvous; the first error aborts them all and is the one raised."""
        rdv = rendezvous if rendezvous is not None else Rendezvous(step_id)
        first = reg.parts[0][0]
        step = StepContext(step_id, rdv, first.session_state, self.runtime)
        step.on_abort(rdv.abort)
        self._track(reg.session, step_id, step)
        out: list[Any] = [None] * reg.n_fetches
        part_stats = [None if stats is None else [] for _ in reg.parts]
        try:
            pool = _partition_pool()
            futures = [pool.submit(ex.run, args, step, part_stats[i], timeout)
                       for i, (ex, _) in enumerate(reg.parts[1:], 1)]
            results: list[Any] = [None] * len(reg.parts)
            errs: list[BaseException] = []
            try:
                results[0] = first.run(args, step, part_stats[0], timeout)
            except BaseException as e:  # noqa: BLE001 - gathered below
                errs.append(e)
            for i, f in enumerate(futures, 1):
                try:
                    results[i] = f.result()
                except BaseException as e:  # noqa: BLE001
                    errs.append(e)
            if errs:
                raise step.error if step.error is not None else errs[0]
            for (ex, positions), vals in zip(reg.parts, results):
                for pos, v in zip(positions, vals):
                    out[pos] = v
            if stats is not None:
                for ps in part_stats:
                    stats.extend(ps)
            return out
        finally:
            self._untrack(reg.session, step_id, step)

    def abort_steps(self, session_handle: str, error: BaseException) -> int:
        """Abort every in-flight step of a session; returns how many were aborted."""
        steps = list(self._active.get(session_handle, ()))
        for st in steps:
            st.abort(error)
        return len(steps)

    def deregister_graph(self, graph_handle: str) -> None:
        """Forget a registered graph (unknown handles are ignored)."""
        with self._lock:
            self._graphs.pop(graph_handle, None)

    def cleanup_session(self, session_handle: str) -> None:
        """Cancel a session's in-flight steps, then forget its graphs and stateful
        kernels."""
        self.abort_steps(session_handle, errors.CancelledError(
            None, None, "Session has been closed."))
        self._active.pop(session_handle, None)
        with self._lock:
            for h in [h for h, r in self._graphs.items() if r.session == session_handle]:
                del self._graphs[h]
            self._sessions.pop(session_handle, None)

    def reset(self, containers: Sequence[str] | None = None) -> None:
        """Clear resource containers on every device (all of them if None)."""
        for d in self.devices:
            if not containers:
                d.resource_mgr.cleanup(None)
            else:
                for c in containers:
                    d.resource_mgr.cleanup(c)
