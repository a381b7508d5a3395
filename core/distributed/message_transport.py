"""The base class of message transports (``grpc``, ``zmq``, or a third party's).

A message transport only moves framed messages: a method name, a small header
(serialised protobuf, owned by the core) and a list of raw buffers (tensor payloads).
Subclasses implement :meth:`MessageTransport.serve` and
:meth:`MessageTransport.connect`; this class builds the master and worker services and
their clients on top of them with :mod:`flowrt.distributed.rpc`, so every message
transport speaks the same protocol (docs/wire.md). The contract types it uses
(:class:`~flowrt.transport.Channel`, :class:`~flowrt.transport.ServerHandle`,
``Handler``) are in :mod:`flowrt.plugin.transport`.
"""
from __future__ import annotations

from typing import Any

from ..plugin.transport import Channel, Handler, ServerHandle, Transport
from . import security as _security
from .rpc import MasterClient, ServiceHandler, WorkerClient

__all__ = ["MessageTransport"]


class MessageTransport(Transport):
    """A transport that moves framed messages (see the module docstring).

    Subclasses implement :meth:`serve` and :meth:`connect`; this class builds the master
    and worker services and clients on top of them with :mod:`flowrt.rpc`.

    :cvar max_message_bytes: the largest message either side accepts (header plus
        buffers); larger ones are refused with an error, never half-read
    :cvar chunk_bytes: buffers larger than this travel in chunks of this size
    """

    max_message_bytes: int = 4 << 30
    chunk_bytes: int = 4 << 20

    def serve(self, address: str, handler: Handler) -> ServerHandle:
        """Listen on ``address`` (``host:port``; port 0 picks a free one) and answer
        every request with ``handler``, many at once.

        A transport that can encrypt and authenticate connections reads the
        handler's ``security`` attribute (a
        :class:`~flowrt.distributed.security.SecurityConfig`, or None) and serves
        accordingly (grpc: TLS, zmq: CURVE); the handler checks the tokens itself."""
        raise NotImplementedError(f"transport {self.scheme}: need serve")

    def connect(self, address: str) -> Channel:
        """A :class:`Channel` to ``address``. Connecting is lazy: an unreachable peer
        is reported by the first :meth:`Channel.call`. A transport that can encrypt
        also takes ``security=`` (a ``SecurityConfig`` with TLS or CURVE material),
        which the core passes only when there is some."""
        raise NotImplementedError(f"transport {self.scheme}: need connect")

    # -- the services, built by the core --------------------------------------------
    def start_server(self, address: str, master: Any, worker: Any) -> Any:
        """Serve ``master`` and ``worker`` with the process's default security
        (:func:`flowrt.distributed.security.default`)."""
        return self.serve(address, ServiceHandler(master, worker,
                                                  security=_security.default()))

    def master_client(self, address: str, security: Any = "default") -> Any:
        """A :class:`~flowrt.distributed.rpc.MasterClient` of ``address``;
        ``security``: a ``SecurityConfig``, None, or the process's default."""
        return MasterClient(self, address, security)

    def worker_client(self, address: str, security: Any = "default") -> Any:
        """A :class:`~flowrt.distributed.rpc.WorkerClient` of ``address``;
        ``security`` as for :meth:`master_client`."""
        return WorkerClient(self, address, security)
