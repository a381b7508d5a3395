"""Transport base classes: how masters, workers and clients talk across a URL scheme.

Two kinds of transport exist:

- an *object* transport (``inproc``) hands the master and worker objects themselves to
  its clients: calls are plain method calls, arrays pass by reference;
- a *message* transport (``grpc``, ``zmq``, or a third party's) subclasses
  :class:`~flowrt.distributed.message_transport.MessageTransport` and only moves framed
  messages: a method name, a small
  header (serialised protobuf, owned by the core) and a list of raw buffers (tensor
  payloads). The core's :mod:`flowrt.distributed.rpc` encodes and decodes those messages and
  dispatches them to the master and worker services, so every message transport speaks
  the same protocol (docs/wire.md) and a new transport is only the plumbing.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence
import importlib
import importlib.util

__all__ = ["Transport", "DeferredTransport", "Channel", "ServerHandle", "Handler",
           "parse_target", "split_host_port", "require"]

#: a server-side message handler: ``handler(method, header, buffers) -> (header, buffers)``.
#: ``buffers`` are the request's raw payload frames (memoryviews or bytes, valid until
#: the handler returns or longer if the transport keeps the frame alive); the reply's
#: buffers are any objects exporting the buffer protocol (bytes, memoryview, contiguous
#: numpy arrays). The handler never raises for a bad request: errors travel in the reply
#: header. It may block for a long time (a step, a blocked receive). The core's handler
#: also has ``dispatch(method, header, buffers)``, which returns either the reply, when
#: it could be computed without waiting, or a zero-argument callable computing it that
#: may block: a server with an I/O thread may call it there and run only the callables
#: elsewhere (see docs/plugins.md, "Message transports").
Handler = Callable[[str, bytes, "list[Any]"], "tuple[bytes, Sequence[Any]]"]


class Transport:
    """A transport plugin's entry: one URL scheme (``inproc``, ``grpc``, ``zmq``).

    Subclasses implement :meth:`start_server`, :meth:`master_client` and
    :meth:`worker_client`. A master client implements
    :class:`~flowrt.plugin.services.MasterService` and a worker client
    :class:`~flowrt.plugin.services.WorkerService`, as the local
    :class:`~flowrt.master.Master` and :class:`~flowrt.worker.Worker` objects do.
    """

    scheme: str = ""
    #: the :class:`~flowrt.runtime.Runtime` whose registry holds this transport (set
    #: by the runtime when it merges the plugins' transports)
    runtime: Any = None

    def start_server(self, address: str, master: Any, worker: Any) -> Any:
        """Serve ``master`` and ``worker`` on ``address``; return an object with
        ``address`` and ``stop()``."""
        raise NotImplementedError(f"transport {self.scheme}: need start_server")

    def master_client(self, address: str, **options: Any) -> Any:
        """A client of the master service at ``address`` (``options``: what the
        transport takes, e.g. ``security=``)."""
        raise NotImplementedError(f"transport {self.scheme}: need master_client")

    def worker_client(self, address: str, **options: Any) -> Any:
        """A client of the worker service at ``address`` (``options`` as for
        :meth:`master_client`)."""
        raise NotImplementedError(f"transport {self.scheme}: need worker_client")

    #: optional: ``free_addresses(k) -> list[str]``, ``k`` addresses a test may serve
    #: on, for a transport whose addresses are not ``host:port`` (the conformance kit
    #: uses it; without it the kit takes free ports on 127.0.0.1)
    free_addresses: Any = None

    def __repr__(self) -> str:
        return f"<Transport {self.scheme}>"


class DeferredTransport(Transport):
    """A transport declared by its scheme and where it lives, imported on first use.

    A plugin whose transport needs a heavy library returns one of these from
    ``flowrt_transports``, so that listing a runtime's transports (and an in-process
    session, which uses ``inproc``) does not import that library::

        @hookimpl
        def flowrt_transports():
            require("grpc")  # fails the plugin, with the reason, if grpcio is missing
            return [DeferredTransport("grpc", "flowrt.plugins.transports.grpc",
                                      "GrpcTransport")]

    The first call to :meth:`start_server`, :meth:`master_client` or
    :meth:`worker_client` (or any other attribute) imports ``module`` and makes
    ``factory()``; every call goes to that object from then on.
    """

    def __init__(self, scheme: str, module: str, factory: str):
        self.scheme = scheme
        self._where = (module, factory)
        self._loaded: Transport | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the transport's module was imported."""
        return self._loaded is not None

    def load(self) -> Transport:
        """The transport object, importing its module on the first call."""
        t = self._loaded
        if t is None:
            with self._lock:
                t = self._loaded
                if t is None:

                    module, factory = self._where
                    t = getattr(importlib.import_module(module), factory)()
                    t.plugin = getattr(self, "plugin", None)
                    t.runtime = self.runtime
                    self._loaded = t
        return t

    def start_server(self, address: str, master: Any, worker: Any) -> Any:
        """:meth:`Transport.start_server` of the loaded transport."""
        return self.load().start_server(address, master, worker)

    def master_client(self, address: str, **options: Any) -> Any:
        """:meth:`Transport.master_client` of the loaded transport."""
        return self.load().master_client(address, **options)

    def worker_client(self, address: str, **options: Any) -> Any:
        """:meth:`Transport.worker_client` of the loaded transport."""
        return self.load().worker_client(address, **options)

    #: attributes of the declaration itself; any other is the loaded transport's
    _OWN = frozenset({"scheme", "plugin", "runtime", "_where", "_loaded", "_lock"})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in DeferredTransport._OWN:
            raise AttributeError(name)
        return getattr(self.load(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        """Set an option (``max_message_bytes`` ...) on the loaded transport."""
        if name in DeferredTransport._OWN:
            object.__setattr__(self, name, value)
            if name in ("plugin", "runtime") and self.__dict__.get("_loaded") is not None:
                setattr(self._loaded, name, value)
        else:
            setattr(self.load(), name, value)

    def __repr__(self) -> str:
        state = "loaded" if self.loaded else "not loaded"
        return f"<Transport {self.scheme} ({state})>"


def require(module: str, package: str | None = None) -> None:
    """Raise ImportError naming ``package`` (the distribution to install) when the
    top-level ``module`` cannot be found; finds it without importing it."""

    if importlib.util.find_spec(module) is None:
        raise ImportError(f"{package or module} is not installed")


class ServerHandle:
    """What :meth:`MessageTransport.serve` returns."""

    #: the bound ``host:port`` (the real port when 0 was asked for)
    address: str = ""

    def stop(self, grace: float = 0.0) -> None:
        """Stop accepting requests and close the connections clients opened (their
        calls, then and later, fail with UnavailableError); wait up to ``grace``
        seconds for calls in flight. May be called from inside a handler (a shutdown
        request): it must not wait for that handler itself."""
        raise NotImplementedError


class Channel:
    """A client connection to one ``host:port``; safe to share between threads, with
    any number of calls in flight at once.

    A channel whose :attr:`cancellable` is true also takes ``cancel=`` (a
    ``threading.Event``) in :meth:`call`: once it is set, the waiting call soon raises
    :class:`~flowrt.errors.CancelledError` (the reply, if one comes, is dropped)."""

    #: whether :meth:`call` takes ``cancel=``
    cancellable: bool = False

    def call(self, method: str, header: bytes, buffers: Sequence[Any] = (),
             timeout: float | None = None) -> tuple[bytes, list[Any]]:
        """Send one request and wait for its reply ``(header, buffers)``.

        Raises :class:`~flowrt.errors.UnavailableError` naming the address when the
        peer cannot be reached or the connection is lost while waiting,
        :class:`~flowrt.errors.DeadlineExceededError` when ``timeout`` seconds pass
        first, :class:`~flowrt.errors.ResourceExhaustedError` when the request or the
        reply is over the size limit, and :class:`~flowrt.errors.InternalError` when
        the server could not handle the message at all.
        """
        raise NotImplementedError

    def close(self) -> None:
        """Release the connection: calls in flight on it, and later calls, raise
        UnavailableError."""


def parse_target(target: str) -> tuple[str, str]:
    """``"grpc://host:port"`` -> ``("grpc", "host:port")``; ``""`` -> ``("", "")``."""
    if not target:
        return "", ""
    if "://" not in target:
        raise ValueError(f"session target {target!r} has no scheme: expected "
                         "'scheme://address' (grpc://, zmq://, inproc://) or ''")
    scheme, _, addr = target.partition("://")
    return scheme.lower(), addr


def split_host_port(address: str) -> tuple[str, int]:
    """``"127.0.0.1:2222"`` -> ``("127.0.0.1", 2222)``; ``"[::1]:5"`` -> ``("::1", 5)``.

    Raises :class:`ValueError` naming the address when it has no valid port.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not host:
        raise ValueError(f"address {address!r} is not 'host:port'")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        p = int(port)
    except ValueError:
        raise ValueError(f"address {address!r} has a bad port {port!r}") from None
    if not 0 <= p <= 65535:
        raise ValueError(f"address {address!r} has a port out of range")
    return host, p


def __getattr__(name: str) -> Any:
    """``flowrt.transport.MessageTransport``, the old import path of the message
    transport base class, which lives in the distributed layer (it builds the master
    and worker services with the wire protocol)."""
    if name == "MessageTransport":
        from ..distributed.message_transport import MessageTransport

        return MessageTransport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
