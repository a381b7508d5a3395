"""The in-process transport (``inproc://name``): the embedded default.

Masters and workers in the same process talk by plain method calls: array objects pass
by reference, with no serialisation and no copies. ``Session("inproc://name")`` attaches
to the named in-process server, creating it on first use, so every session on that
target shares its variables (as sessions on a ``grpc://`` server do).
"""
from __future__ import annotations

import threading
from typing import Any, Sequence

from flowrt.hookspecs import hookimpl
from flowrt.plugin.services import RunGraphRequest, RunGraphResponse, WorkerStatus
from flowrt.transport import Transport

__all__ = ["InProcTransport", "flowrt_transports"]


class _Server:
    """A named in-process server: its master and worker objects."""

    def __init__(self, transport: "InProcTransport", address: str, master: Any, worker: Any):
        self.transport, self.address = transport, address
        self.master, self.worker = master, worker

    def stop(self) -> None:
        """Stop serving: the name is free again and its clients are unreachable."""
        self.transport._servers.pop(self.address, None)


class _InProcWorkerRef:
    """A cluster's handle on the worker of an in-process task: a
    :class:`~flowrt.plugin.services.WorkerService` that resolves the named server at
    each call, so a task started later, stopped or restarted is seen as it is now (a
    stopped one is unreachable). Tensors pass by reference."""

    #: calls run on the caller's thread: they cannot stop waiting
    cancellable = False

    def __init__(self, transport: "InProcTransport", address: str):
        self._transport, self.address = transport, address
        self.target = f"inproc://{address}"
        self.job, self.task = "", -1
        self._devices: Any = None
        self.incarnation = 0

    def __repr__(self) -> str:
        return f"<_InProcWorkerRef {self.target}>"

    def _worker(self) -> Any:
        s = self._transport._servers.get(self.address)
        if s is None or s.worker is None:
            from flowrt.errors import UnavailableError

            raise UnavailableError(None, None, f"no in-process server is serving "
                                   f"{self.target}")
        return s.worker

    def get_status(self, timeout: float | None = None) -> WorkerStatus:
        """The served worker's status; refreshes :attr:`devices`, :attr:`incarnation`,
        :attr:`job` and :attr:`task`."""
        st = self._worker().get_status(timeout)
        self.incarnation, self.job, self.task = st.incarnation, st.job, st.task
        self._devices = st.devices
        return st

    @property
    def devices(self) -> Any:
        """The served worker's devices (as of the last :meth:`get_status`)."""
        if self._devices is None:
            self.get_status()
        return self._devices

    def register_graph(self, session_handle: str, ir: Any, fetches: Sequence[Any],
                       inter_op_threads: int = 0, pull_together: Sequence[str] = ()
                       ) -> str:
        """``Worker.register_graph`` on the served worker."""
        return self._worker().register_graph(session_handle, ir, fetches,
                                             inter_op_threads, pull_together)

    def register_partitions(self, session_handle: str, parts: Sequence[Any],
                            n_fetches: int, inter_op_threads: int = 0,
                            pull_together: Sequence[str] = ()) -> str:
        """``Worker.register_partitions`` on the served worker."""
        return self._worker().register_partitions(session_handle, parts, n_fetches,
                                                  inter_op_threads, pull_together)

    def fetch_positions(self, graph_handle: str) -> list[int]:
        """``Worker.fetch_positions`` on the served worker."""
        return self._worker().fetch_positions(graph_handle)

    def deregister_graph(self, graph_handle: str) -> None:
        """``Worker.deregister_graph`` on the served worker."""
        self._worker().deregister_graph(graph_handle)

    def run_graph(self, request: RunGraphRequest) -> RunGraphResponse:
        """``Worker.run_graph`` on the served worker (arrays by reference)."""
        return self._worker().run_graph(request)

    def recv_tensor(self, step_id: int, key: str, timeout: float | None = None,
                    cancel: threading.Event | None = None) -> Any:
        """``Worker.recv_tensor`` on the served worker."""
        return self._worker().recv_tensor(step_id, key, timeout, cancel)

    def recv_tensors(self, step_id: int, keys: Sequence[str],
                     timeout: float | None = None, wait_all: bool = False,
                     cancel: threading.Event | None = None) -> list[tuple[int, Any]]:
        """``Worker.recv_tensors`` on the served worker."""
        return self._worker().recv_tensors(step_id, keys, timeout, wait_all, cancel)

    def abort_step(self, step_id: int, error: BaseException) -> None:
        """``Worker.abort_step`` on the served worker."""
        self._worker().abort_step(step_id, error)

    def abort_steps(self, session_handle: str, error: BaseException) -> int:
        """``Worker.abort_steps`` on the served worker."""
        return self._worker().abort_steps(session_handle, error)

    def cleanup_session(self, session_handle: str) -> None:
        """``Worker.cleanup_session`` on the served worker."""
        self._worker().cleanup_session(session_handle)

    def reset(self, containers: Sequence[str] | None = None) -> None:
        """``Worker.reset`` on the served worker."""
        self._worker().reset(containers)

    def shutdown(self, reason: str = "") -> None:
        """``Worker.shutdown`` on the served worker: its server stops."""
        self._worker().shutdown(reason)


class InProcTransport(Transport):
    """Named in-process servers of one runtime."""

    scheme = "inproc"

    def __init__(self) -> None:
        self._servers: dict[str, _Server] = {}
        self._lock = threading.Lock()
        self.runtime: Any = None

    def start_server(self, address: str, master: Any, worker: Any) -> _Server:
        """Serve ``master`` and ``worker`` under the name ``address``."""
        with self._lock:
            if address in self._servers:
                from flowrt.errors import AlreadyExistsError

                raise AlreadyExistsError(None, None,
                                         f"an in-process server is already named {address!r}")
            s = self._servers[address] = _Server(self, address, master, worker)
        return s

    def _server(self, address: str) -> _Server:
        """The server named ``address``, made (with a master and worker of its own)
        on first use."""
        s = self._servers.get(address)
        if s is None:
            with self._lock:
                s = self._servers.get(address)
                if s is None:
                    from flowrt.master import Master
                    from flowrt.runtime import default_runtime

                    m = Master.in_process(self.runtime or default_runtime())
                    s = self._servers[address] = _Server(self, address, m, m.local_worker)
        return s

    def master_client(self, address: str, config: Any = None) -> Any:
        """The master of the in-process server named ``address`` (the master object
        itself: a :class:`~flowrt.plugin.services.MasterService`), made on first use.

        The empty address (the target ``""`` of ``Session()``) gives a new master with
        a worker of its own, shared with no one and named nowhere; its worker finds its
        devices with ``config`` (a ``ConfigProto``, or None)."""
        if address == "":
            from flowrt.master import Master
            from flowrt.runtime import default_runtime

            return Master.in_process(self.runtime or default_runtime(), config)
        return self._server(address).master


    def worker_client(self, address: str) -> Any:
        """The worker of the in-process server named ``address``; unlike
        :meth:`master_client` it is never created on demand (a cluster's task that was
        not started is unreachable)."""
        return _InProcWorkerRef(self, address)


@hookimpl
def flowrt_transports() -> list[Transport]:
    """The ``inproc`` transport of a runtime."""
    return [InProcTransport()]
