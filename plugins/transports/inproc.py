"""The in-process transport (``inproc://name``): the embedded default.

Masters and workers in the same process talk by plain method calls: array objects pass
by reference, with no serialisation and no copies. ``Session("inproc://name")`` attaches
to the named in-process server, creating it on first use, so every session on that
target shares its variables (as sessions on a ``grpc://`` server do).
"""
from __future__ import annotations

import threading
from typing import Any

from flowrt.hookspecs import hookimpl
from flowrt.transport import Transport

__all__ = ["InProcTransport", "flowrt_transports"]


class _Server:
    def __init__(self, transport: "InProcTransport", address: str, master: Any, worker: Any):
        self.transport, self.address = transport, address
        self.master, self.worker = master, worker

    def stop(self) -> None:
        self.transport._servers.pop(self.address, None)


class _InProcWorkerRef:
    """A cluster's handle on the worker of an in-process task: resolves the named
    server at each use, so a task started later, stopped or restarted is seen as it is
    now (a stopped one is unreachable)."""

    def __init__(self, transport: "InProcTransport", address: str):
        self._transport, self.address = transport, address
        self.target = f"inproc://{address}"
        self.job, self.task = "", -1
        self._devices: Any = None
        self.incarnation = 0

    def _worker(self) -> Any:
        s = self._transport._servers.get(self.address)
        if s is None or s.worker is None:
            from flowrt.errors import UnavailableError

            raise UnavailableError(None, None, f"no in-process server is serving "
                                   f"{self.target}")
        return s.worker

    def get_status(self, timeout: float | None = None) -> Any:
        w = self._worker()
        self.incarnation, self.job, self.task = w.incarnation, w.job, w.task
        self._devices = w.devices
        return None

    @property
    def devices(self) -> Any:
        if self._devices is None:
            self.get_status()
        return self._devices

    def __getattr__(self, name: str) -> Any:
        return getattr(self._worker(), name)


class InProcTransport(Transport):
    """Named in-process servers of one runtime."""

    scheme = "inproc"

    def __init__(self) -> None:
        self._servers: dict[str, _Server] = {}
        self._lock = threading.Lock()
        self.runtime: Any = None

    def start_server(self, address: str, master: Any, worker: Any) -> _Server:
        with self._lock:
            if address in self._servers:
                from flowrt.errors import AlreadyExistsError

                raise AlreadyExistsError(None, None,
                                         f"an in-process server is already named {address!r}")
            s = self._servers[address] = _Server(self, address, master, worker)
        return s

    def _server(self, address: str) -> _Server:
        s = self._servers.get(address)
        if s is None:
            with self._lock:
                s = self._servers.get(address)
                if s is None:
                    from flowrt.master import Master
                    from flowrt.runtime import default_runtime
                    from flowrt.worker import Worker

                    rt = self.runtime or default_runtime()
                    w = Worker(rt, "localhost", 0, None)
                    s = self._servers[address] = _Server(self, address, Master(rt, w), w)
        return s

    def master_client(self, address: str) -> Any:
        return self._server(address).master

    def worker_client(self, address: str) -> Any:
        """The worker of the in-process server named ``address``; unlike
        :meth:`master_client` it is never created on demand (a cluster's task that was
        not started is unreachable)."""
        return _InProcWorkerRef(self, address)


@hookimpl
def flowrt_transports() -> list[Transport]:
    return [InProcTransport()]
