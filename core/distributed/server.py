"""``tf.train.Server``: one task of a cluster, exporting its master and worker services.

Every task runs a worker (its devices, the partitions masters register on it, the
variables and queues it holds) and a master (sessions whose target is this task). The
protocol names the transport plugin: ``grpc``, ``zmq`` or ``inproc`` (all tasks in one
process). A server binds exactly the address the cluster gives its task.

Unlike TensorFlow's, a parameter server's ``join()`` returns: when a client calls
:func:`shutdown_cluster` (or ``Server.stop()`` runs), every task of the cluster stops.
"""
from __future__ import annotations

import threading
from typing import Any

from ..base import errors, host_budget
from ..plugin.transport import parse_target
from .message_transport import MessageTransport
from .cluster import ClusterSpec
from ..service.master import Master
from ..plugin.runtime import default_runtime
from ..service.worker import Worker
from . import shm
from .rpc import ServiceHandler

__all__ = ["Server", "shutdown_cluster"]


def _as_cluster(value: Any) -> Any:

    if isinstance(value, ClusterSpec):
        return value
    if hasattr(value, "cluster") and hasattr(value, "job_name"):  # a ServerDef-like
        return ClusterSpec(value.cluster)
    return ClusterSpec(value)


class Server:
    """An in-process server for one task of a cluster (``tf.train.Server``).

    :param server_or_cluster_def: a ``ClusterSpec``, its dict form, or a ``ClusterDef``
    :param job_name: this task's job (may be omitted when the cluster has one job)
    :param task_index: this task's index (default 0 when the job has one task)
    :param protocol: ``"grpc"`` (default), ``"zmq"``, ``"inproc"``, or another
        transport plugin's scheme
    :param config: a ``ConfigProto`` for this task's devices and sessions
    :param start: start serving now
    :param runtime: the runtime (default: the process-wide one)
    :param health_check_period: seconds between the master's health checks of the
        other tasks (default 1 s); a task that stops answering fails the steps that
        use it within about this period plus 2 s
    :param session_gc_seconds: close master sessions unused for this long with no step
        running, as left behind by a client that died without closing them (default
        None: never, as in TF); the next call on such a session is an AbortedError

    ``thread_budget`` (a ``flowrt.base.host_budget.ThreadBudget``) is the threads the
    process's BLAS and intra-op pool were given on creation: the cores shared among
    the cluster's tasks on this host, or ``config.intra_op_parallelism_threads``.
    """

    def __init__(self, server_or_cluster_def: Any, job_name: str | None = None,
                 task_index: int | None = None, protocol: str | None = None,
                 config: Any = None, start: bool = True, runtime: Any = None,
                 health_check_period: float | None = None,
                 session_gc_seconds: float | None = None):
        """Find this task in the cluster, build its worker and master, and serve unless
        ``start`` is false (the class docstring describes the parameters).

        :raises ValueError: when ``job_name`` (or ``task_index``) is omitted but the
            cluster has several jobs (or the job several tasks), or names no job (or
            task) of it.
        :raises NotFoundError: when no transport plugin provides ``protocol``.
        """

        cluster = _as_cluster(server_or_cluster_def)
        if job_name is None:
            if len(cluster.jobs) != 1:
                raise ValueError("Must specify an explicit `job_name`.")
            job_name = cluster.jobs[0]
        if job_name not in cluster.jobs:
            raise ValueError(f"job {job_name!r} is not in the cluster {cluster.as_dict()}")
        if task_index is None:
            tasks = cluster.task_indices(job_name)
            if len(tasks) != 1:
                raise ValueError("Must specify an explicit `task_index`.")
            task_index = tasks[0]
        self.cluster = cluster
        self.job_name = job_name
        self.task_index = int(task_index)
        self.protocol = (protocol or "grpc").lower()
        self.config = config
        self.runtime = runtime or default_runtime()
        self.transport = self.runtime.transport(self.protocol)
        self.address = cluster.task_address(job_name, self.task_index)
        # this process's share of the host's cores: the cluster says which tasks are
        # local (with inproc every task is in this process)
        self._budget_token, self.thread_budget = host_budget.serve_task(
            {(j, t): cluster.task_address(j, t) for j in cluster.jobs
             for t in cluster.task_indices(j)}, job_name, self.task_index,
            all_in_process=self.protocol == "inproc",
            override=getattr(config, "intra_op_parallelism_threads", 0) or 0)
        self.worker = Worker(self.runtime, job_name, self.task_index, config,
                             resolver=self._resolve)
        self.worker._on_shutdown = self._on_shutdown
        self.master = Master(self.runtime, self.worker, cluster=cluster,
                             transport=self.transport,
                             health_check_period=health_check_period,
                             session_gc_seconds=session_gc_seconds)
        self._handle: Any = None
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self.shutdown_reason: str | None = None
        if start:
            self.start()

    def _resolve(self, job: str, task: int) -> Any:
        return self.master.worker_for(job, task)

    @property
    def target(self) -> str:
        """The session target of this task: ``protocol://host:port``."""
        addr = self._handle.address if self._handle is not None and \
            getattr(self._handle, "address", None) else self.address
        return f"{self.protocol}://{addr}"

    @property
    def server_def(self) -> Any:
        """A ``ClusterDef`` of the cluster (TF's ``server_def.cluster``)."""
        return self.cluster.as_cluster_def()

    def start(self) -> None:
        """Start serving (idempotent)."""
        with self._lock:
            if self._handle is not None:
                return
            if self._stopped.is_set():
                raise errors.FailedPreconditionError(None, None, "the server was stopped")
            if isinstance(self.transport, MessageTransport):

                if shm.enabled():
                    shm.sweep_orphans()  # segments of killed processes

                self._handle = self.transport.serve(
                    self.address, ServiceHandler(self.master, self.worker,
                                                 on_shutdown=self._on_shutdown))
            else:
                self._handle = self.transport.start_server(self.address, self.master,
                                                           self.worker)

    def join(self, timeout: float | None = None) -> bool:
        """Block until the server stops (``stop()``, or the cluster was shut down).

        :returns: True once stopped, False if ``timeout`` seconds passed first
        """
        return self._stopped.wait(timeout)

    def _on_shutdown(self, reason: str) -> None:
        self.shutdown_reason = reason or "cluster shutdown"
        self.stop()

    def stop(self) -> None:
        """Stop serving: in-flight steps on this task fail, ``join()`` returns."""
        with self._lock:
            if self._stopped.is_set():
                return
            self._stopped.set()
            h, self._handle = self._handle, None
        host_budget.stop_serving(self._budget_token)
        self.master.stop()
        self.worker.rendezvous_mgr.abort_all(errors.CancelledError(
            None, None, f"server {self.target} stopped"))
        if h is not None:
            h.stop(0.5) if isinstance(self.transport, MessageTransport) else h.stop()

    @staticmethod
    def create_local_server(config: Any = None, start: bool = True) -> "Server":
        """A single-task server on a free local port (``tf.train.Server.
        create_local_server``)."""
        return Server({"localhost": ["127.0.0.1:0"]}, protocol="grpc", config=config,
                      start=start)

    def __repr__(self) -> str:
        return f"<Server /job:{self.job_name}/task:{self.task_index} {self.target}>"


def shutdown_cluster(target: str, reason: str = "", runtime: Any = None) -> None:
    """Stop every task of the cluster whose master is at ``target``: each task's
    ``Server.join()`` returns. This is how the chief ends a job whose parameter servers
    would otherwise serve forever."""

    scheme, address = parse_target(target)
    if not scheme:
        raise ValueError("shutdown_cluster needs a server target such as grpc://host:port")
    rt = runtime or default_runtime()
    # every master service (a client, or an in-process master) stops its whole cluster
    rt.transport(scheme).master_client(address).shutdown(reason)
