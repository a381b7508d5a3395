"""The master and worker service contracts (``core/proto/service.proto``, in Python).

The master of a session talks to each task's worker through :class:`WorkerService`;
a session talks to its master through :class:`MasterService` and to the master's
session through :class:`SessionService`. Each contract has three implementations, and
the master and the session never ask which one they hold:

================  =================================  ====================================
contract          in this process                    over a message transport
================  =================================  ====================================
WorkerService     ``flowrt.worker.Worker``;           ``flowrt.rpc.WorkerClient``
                  the ``inproc`` transport's
                  reference to a named task
MasterService     ``flowrt.master.Master`` (also     ``flowrt.rpc.MasterClient``
                  what ``inproc://`` and ``""``
                  give)
SessionService    ``flowrt.master.MasterSession``    ``flowrt.rpc.RemoteMasterSession``
================  =================================  ====================================

``tests/test_service_contracts.py`` checks that every implementation has exactly the
signatures below. The wire messages carry the same calls: ``Worker/RunGraph`` is
:meth:`WorkerService.run_graph`, ``Master/CreateSession`` is
:meth:`MasterService.create_session`, and so on (``ExtendSession`` is implicit: a
remote session sends a graph again when its version changed).

Methods a master calls only on the worker of its own task (``accept_pushed``,
``forget_step``, ``is_light``, ...) and those a server calls on the worker it exports
(``runs_without_blocking``, ``try_recv_tensors``, ...) are not part of the contract:
they belong to :class:`~flowrt.worker.Worker` itself.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import Any, Protocol, Sequence, runtime_checkable

__all__ = ["WorkerStatus", "RunGraphRequest", "RunGraphResponse", "WorkerService",
           "MasterService", "SessionService"]


@dataclasses.dataclass(frozen=True)
class WorkerStatus:
    """What :meth:`WorkerService.get_status` answers (``GetStatusResponse``): the
    task's devices, the incarnation of its worker (it changes whenever the task
    restarts) and the task's name."""

    devices: list[Any]
    incarnation: int
    job: str
    task: int


@dataclasses.dataclass(slots=True)
class RunGraphRequest:
    """What :meth:`WorkerService.run_graph` is asked (``RunGraphRequest`` in
    ``service.proto``): run the registered graph ``graph_handle`` for step ``step_id``.

    The master fills the step's fields (``step_id``, ``args``, ``trace``,
    ``timeout``) for each step; how tensors cross between tasks (``push_to``,
    ``pushed_from``) is decided when the step is compiled and is the same for every
    step of it (:class:`flowrt.master.StepPart`)."""

    #: the handle ``register_graph`` / ``register_partitions`` gave back
    graph_handle: str
    #: the step's id, the same on every task that runs part of the step
    step_id: int
    #: the step's feeds, in the order of its ``_Arg`` indices
    args: Sequence[Any] = ()
    #: record a ``NodeStat`` per node (the response's ``stats``)
    trace: bool = False
    #: seconds a blocked kernel may wait (None: no deadline)
    timeout: float | None = None
    #: a task: every tensor the step sends there leaves with the reply (``pushed``)
    #: instead of waiting to be pulled
    push_to: tuple[str, int] | None = None
    #: tasks whose tensors for this step the caller pushes to this worker
    #: (``Worker.accept_pushed``): its receives from them wait locally. Only the
    #: caller's own worker can take them
    pushed_from: frozenset[tuple[str, int]] = frozenset()
    #: ``(key, value)`` pairs task ``pushed_in_from`` sent to this one in the step
    #: (the second stage of a staged step), given with the call
    pushed_in: Sequence[tuple[str, Any]] = ()
    pushed_in_from: tuple[str, int] | None = None
    #: once set, the call stops waiting for the reply (``CancelledError``); only
    #: honoured where the worker service is ``cancellable``
    cancel: threading.Event | None = None
    #: in-process only: the step's rendezvous, when the caller made one (None: the
    #: worker's own)
    rendezvous: Any = None


@dataclasses.dataclass(slots=True)
class RunGraphResponse:
    """What :meth:`WorkerService.run_graph` answers (``RunGraphResponse``)."""

    #: a list of the step's fetch count with this task's fetches at their positions
    outputs: list[Any]
    #: with ``push_to``: ``(rendezvous key, value)`` of every tensor the step sent to
    #: that task
    pushed: list[tuple[str, Any]] = dataclasses.field(default_factory=list)
    #: with ``trace``: the ``NodeStat`` of each node that ran
    stats: list[Any] | None = None


@runtime_checkable
class WorkerService(Protocol):
    """The worker service of one task (``Worker/*`` in ``service.proto``).

    Tensors are Python values (numpy arrays, ``DEAD``); a transport moves them without
    pickling, and an in-process implementation passes them by reference."""

    #: the task's job name and index, and its worker's incarnation (as last seen)
    job: str
    task: int
    incarnation: int
    #: whether :meth:`run_graph` honours ``cancel`` (the call can stop waiting)
    cancellable: bool

    @property
    def devices(self) -> list[Any]:
        """The task's devices (asks :meth:`get_status` the first time if needed)."""
        ...

    def get_status(self, timeout: float | None = None) -> WorkerStatus:
        """``GetStatus``: the task's devices, incarnation and name; refreshes
        :attr:`devices`, :attr:`incarnation`, :attr:`job` and :attr:`task`."""
        ...

    def register_graph(self, session_handle: str, ir: Any, fetches: Sequence[Any],
                       inter_op_threads: int = 0, pull_together: Sequence[str] = ()
                       ) -> str:
        """``RegisterGraph`` of one partition (a ``GraphIR`` placed on one device of
        this task) fetching ``fetches`` (``(node, output)`` pairs); returns its graph
        handle."""
        ...

    def register_partitions(self, session_handle: str, parts: Sequence[Any],
                            n_fetches: int, inter_op_threads: int = 0,
                            pull_together: Sequence[str] = ()) -> str:
        """``RegisterGraph`` of the partitions (``flowrt.partition.Partition``) of one
        step on this task, run together; ``pull_together`` names the ``_Recv`` nodes
        whose tensors are pulled in one call per sending task."""
        ...

    def fetch_positions(self, graph_handle: str) -> list[int]:
        """The step-wide fetch positions a registered graph produces."""
        ...

    def deregister_graph(self, graph_handle: str) -> None:
        """``DeregisterGraph``: forget a registered graph."""
        ...

    def run_graph(self, request: RunGraphRequest) -> RunGraphResponse:
        """``RunGraph``: run a registered graph for one step (see
        :class:`RunGraphRequest` for what the request says)."""
        ...

    def recv_tensor(self, step_id: int, key: str, timeout: float | None = None,
                    cancel: threading.Event | None = None) -> Any:
        """``RecvTensor``: the tensor this task sent under ``key`` in step
        ``step_id`` (waits for the send; ``cancel``, set when the caller went away,
        ends the wait)."""
        ...

    def recv_tensors(self, step_id: int, keys: Sequence[str],
                     timeout: float | None = None, wait_all: bool = False,
                     cancel: threading.Event | None = None) -> list[tuple[int, Any]]:
        """``RecvTensors``: ``[(index in keys, value)]`` for every key sent by the time
        at least one was (every one with ``wait_all``; ``cancel`` as for
        :meth:`recv_tensor`)."""
        ...

    def abort_step(self, step_id: int, error: BaseException) -> None:
        """``AbortStep``: fail step ``step_id`` on this task with ``error``."""
        ...

    def abort_steps(self, session_handle: str, error: BaseException) -> int:
        """Abort every in-flight step of a session this worker tracks; returns how
        many (a remote worker's steps are aborted one by one: 0)."""
        ...

    def cleanup_session(self, session_handle: str) -> None:
        """``CleanupSession``: cancel a session's steps, forget its graphs and state."""
        ...

    def reset(self, containers: Sequence[str] | None = None) -> None:
        """``Reset``: clear resource containers on every device (all if None)."""
        ...

    def shutdown(self, reason: str = "") -> None:
        """``Shutdown``: ask the server exporting the worker to stop."""
        ...


@runtime_checkable
class SessionService(Protocol):
    """One session on a master (the ``Master/*`` calls that name a session)."""

    def make_callable(self, feeds: Sequence[str], fetches: Sequence[str],
                      targets: Sequence[str]) -> int:
        """``MakeCallable``: a handle for the step ``(feeds, fetches, targets)``."""
        ...

    def run_callable(self, cid: int, args: Sequence[Any], trace: bool = False,
                     timeout_ms: int = 0) -> tuple[list[Any], list[Any] | None]:
        """``RunCallable``: run a step; returns its fetched values and, traced, the
        ``NodeStat`` of every node."""
        ...

    def release_callable(self, cid: int) -> None:
        """``ReleaseCallable``: forget a step handle."""
        ...

    def partition_graphs(self, cid: int) -> list[Any]:
        """``PartitionGraphs``: the ``GraphDef`` of each partition of a step."""
        ...

    def placement_of(self, cid: int) -> dict[str, str]:
        """``Placement``: the device of every node of a step."""
        ...


@runtime_checkable
class MasterService(Protocol):
    """The master service of one target (``Master/*`` in ``service.proto``)."""

    def create_session(self, graph: Any, config: Any = None,
                       connect_timeout: float | None = None) -> str:
        """``CreateSession`` on ``graph`` (a ``Graph``); waits up to
        ``connect_timeout`` seconds (else the config's ``operation_timeout_in_ms``,
        else 30 s) for the master and the cluster's tasks; returns the handle."""
        ...

    def session(self, handle: str) -> SessionService:
        """The session ``handle`` (``AbortedError`` when it is not known)."""
        ...

    def close_session(self, handle: str) -> None:
        """``CloseSession``: cancel its steps on every task and forget it."""
        ...

    def list_devices(self) -> list[tuple[str, str, int, int]]:
        """``ListDevices``: ``[(name, type, memory limit, incarnation)]``."""
        ...

    def reset(self, containers: Sequence[str] | None = None) -> None:
        """``Reset``: close every session, clear resource containers on every task."""
        ...

    def shutdown(self, reason: str = "") -> None:
        """``Shutdown``: stop every task of the master's cluster, its own included
        (their ``Server.join()`` returns)."""
        ...
