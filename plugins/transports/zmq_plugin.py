"""Entry point of the built-in ``zmq`` transport.

The transport itself lives in :mod:`flowrt.plugins.transports.zmq`. The hook declares
it without importing it (a :class:`~flowrt.plugin.transport.DeferredTransport`): that
module, and pyzmq with it, is imported only when the transport is first used -- a
``zmq://`` target or a server -- so listing a runtime's transports or running
in-process sessions never loads it. If pyzmq is not installed, the plugin is reported
as failed with the reason.
"""
from __future__ import annotations

from typing import Any

from flowrt.hookspecs import hookimpl
from flowrt.plugin.transport import DeferredTransport, require

__all__ = ["flowrt_transports"]


@hookimpl
def flowrt_transports() -> list[Any]:
    """The ``zmq`` transport, imported (with pyzmq) when first used."""
    require("zmq", "pyzmq")
    return [DeferredTransport("zmq", "flowrt.plugins.transports.zmq", "ZmqTransport")]
