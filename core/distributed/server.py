"""``tf.train.Server``: one task of a cluster, exporting its master and worker services.

Every task runs a worker (its devices, the partitions masters register on it, the
variables and queues it holds) and a master (sessions whose target is this task). The
protocol names the transport plugin: ``grpc``, ``zmq`` or ``inproc`` (all tasks in one
process). A server binds exactly the address the cluster gives its task.

Unlike TensorFlow's, a parameter server's ``join()`` returns: when a client calls
:func:`shutdown_cluster` (or ``Server.stop()`` runs), every task of the cluster stops.

A server built with ``file_roots`` lets the file ops of the graphs its clients send
(checkpoints, ``ReadFile``, readers ...) touch only those directories
(:mod:`flowrt.plugin.file_policy`); without it they may touch any path, as in TF.
``flowrt server`` always gives roots. A cluster resolver
(``tf.distribute.cluster_resolver``) may stand for the cluster: the task and protocol
then come from it too.

A server answers anyone who reaches its port unless it has a ``security`` config
(:mod:`flowrt.distributed.security`: a cluster token checked on every request, an
admin token for shutdown and reset, TLS or CURVE for the connections); by default it
takes the process's, from ``FLOWRT_*`` variables.
"""
from __future__ import annotations

import threading
from typing import Any

from ..base import errors, host_budget
from ..plugin.file_policy import FilePolicy
from ..plugin.transport import parse_target
from .message_transport import MessageTransport
from .cluster import ClusterSpec
from ..service.master import Master
from ..plugin.runtime import default_runtime
from ..service.worker import Worker
from . import shm
from . import security as _security
from .rpc import ServiceHandler

__all__ = ["Server", "shutdown_cluster"]


def _is_resolver(value: Any) -> bool:
    """A cluster resolver, duck-typed (the modeling layer is above this one)."""
    return callable(getattr(value, "cluster_spec", None)) and \
        hasattr(value, "task_type") and hasattr(value, "task_id")


def _as_cluster(value: Any) -> Any:

    if isinstance(value, ClusterSpec):
        return value
    if hasattr(value, "cluster") and hasattr(value, "job_name"):  # a ServerDef-like
        return ClusterSpec(value.cluster)
    return ClusterSpec(value)


class Server:
    """An in-process server for one task of a cluster (``tf.train.Server``).

    :param server_or_cluster_def: a ``ClusterSpec``, its dict form, a ``ClusterDef``, or
        a cluster resolver (anything with a callable ``cluster_spec`` and ``task_type``,
        ``task_id`` attributes; ``rpc_layer`` if it has one): its cluster, and its task
        and protocol where the arguments leave them out
    :param job_name: this task's job (may be omitted when the cluster has one job)
    :param task_index: this task's index (default 0 when the job has one task)
    :param protocol: ``"grpc"`` (default), ``"grpcs"`` (grpc with TLS required: the
        security config must have a certificate, else InvalidArgumentError), ``"zmq"``,
        ``"inproc"``, or another transport plugin's scheme
    :param config: a ``ConfigProto`` for this task's devices and sessions
    :param start: start serving now
    :param runtime: the runtime (default: the process-wide one)
    :param health_check_period: seconds between the master's health checks of the
        other tasks (default 1 s); a task that stops answering fails the steps that
        use it within about this period plus 2 s
    :param session_gc_seconds: close master sessions unused for this long with no step
        running, as left behind by a client that died without closing them (default
        None: never, as in TF); the next call on such a session is an AbortedError
    :param security: a :class:`~flowrt.distributed.security.SecurityConfig`: the
        tokens every request must carry, TLS (grpc) or CURVE (zmq) for the port, and
        the credentials of this task's own calls to the other tasks; default: the
        process's (:func:`flowrt.distributed.security.default`: ``FLOWRT_*``
        variables); None: none, anyone who reaches the port controls the task
    :param file_roots: the directories the file ops of this task's steps may touch
        (paths resolved, ``..`` and symbolic links followed, before the check; one
        outside is a ``PermissionDeniedError``); default None: anywhere, as in TF.
        ``file_policy`` holds the resolved roots (None when unrestricted)

    ``thread_budget`` (a ``flowrt.base.host_budget.ThreadBudget``) is the threads the
    process's BLAS and intra-op pool were given on creation: the cores shared among
    the cluster's tasks on this host, or ``config.intra_op_parallelism_threads``.
    """

    def __init__(self, server_or_cluster_def: Any, job_name: str | None = None,
                 task_index: int | None = None, protocol: str | None = None,
                 config: Any = None, start: bool = True, runtime: Any = None,
                 health_check_period: float | None = None,
                 session_gc_seconds: float | None = None,
                 file_roots: Any = None, security: Any = "default"):
        """Find this task in the cluster, build its worker and master, and serve unless
        ``start`` is false (the class docstring describes the parameters).

        :raises ValueError: when ``job_name`` (or ``task_index``) is omitted but the
            cluster has several jobs (or the job several tasks), or names no job (or
            task) of it.
        :raises NotFoundError: when no transport plugin provides ``protocol``.
        """
        if _is_resolver(server_or_cluster_def):
            resolver = server_or_cluster_def
            job_name = resolver.task_type if job_name is None else job_name
            task_index = resolver.task_id if task_index is None else task_index
            protocol = protocol or getattr(resolver, "rpc_layer", None)
            server_or_cluster_def = resolver.cluster_spec()
        if isinstance(file_roots, (str, bytes)):
            raise TypeError("file_roots must be a list of directories, not one string")
        self.file_policy = None if file_roots is None else FilePolicy(file_roots)
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
        self.address = cluster.task_address(job_name, self.task_index)
        scheme, security = _security.transport_scheme(
            self.protocol, security, f"{self.protocol}://{self.address}")
        self.transport = self.runtime.transport(scheme)
        self.security = _security.default() if security == "default" else security
        # this process's share of the host's cores: the cluster says which tasks are
        # local (with inproc every task is in this process)
        self._budget_token, self.thread_budget = host_budget.serve_task(
            {(j, t): cluster.task_address(j, t) for j in cluster.jobs
             for t in cluster.task_indices(j)}, job_name, self.task_index,
            all_in_process=self.protocol == "inproc",
            override=getattr(config, "intra_op_parallelism_threads", 0) or 0)
        self.worker = Worker(self.runtime, job_name, self.task_index, config,
                             resolver=self._resolve, file_policy=self.file_policy)
        self.worker._on_shutdown = self._on_shutdown
        self.master = Master(self.runtime, self.worker, cluster=cluster,
                             transport=_SecuredClients(self.transport, self.security)
                             if isinstance(self.transport, MessageTransport)
                             else self.transport,
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
                                                 on_shutdown=self._on_shutdown,
                                                 security=self.security))
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


class _SecuredClients:
    """A server's transport as its master sees it: the worker clients it makes carry
    the server's security config (its tokens and credentials), not the process's."""

    def __init__(self, transport: Any, security: Any):
        self._transport, self._security = transport, security

    def worker_client(self, address: str) -> Any:
        """A worker client of ``address`` with the server's security config."""
        return self._transport.worker_client(address, security=self._security)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def shutdown_cluster(target: str, reason: str = "", runtime: Any = None,
                     security: Any = "default") -> None:
    """Stop every task of the cluster whose master is at ``target``: each task's
    ``Server.join()`` returns. This is how the chief ends a job whose parameter servers
    would otherwise serve forever. ``security``: the caller's
    :class:`~flowrt.distributed.security.SecurityConfig` (default: the process's); a
    cluster with an admin token stops only for a caller that has it
    (``PermissionDeniedError`` otherwise)."""

    scheme, address = parse_target(target)
    if not scheme:
        raise ValueError("shutdown_cluster needs a server target such as grpc://host:port")
    rt = runtime or default_runtime()
    scheme, security = _security.transport_scheme(scheme, security, target)
    transport = rt.transport(scheme)
    # every master service (a client, or an in-process master) stops its whole cluster
    if isinstance(transport, MessageTransport):
        transport.master_client(address, security=security).shutdown(reason)
    else:
        transport.master_client(address).shutdown(reason)
