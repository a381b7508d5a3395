"""Entry point of the built-in ``zmq`` transport.

The transport itself lives in :mod:`flowrt.plugins.transports.zmq`; it is imported (and
pyzmq with it) only when a runtime first needs its transports -- a ``zmq://`` target,
a server, or ``flowrt plugins`` -- so runtimes that only run in-process sessions never
load it. If pyzmq cannot be imported, the plugin is reported as failed with the reason.
"""
from __future__ import annotations

from typing import Any

from flowrt.hookspecs import hookimpl

__all__ = ["flowrt_transports"]


@hookimpl
def flowrt_transports() -> list[Any]:
    from .zmq import ZmqTransport

    return [ZmqTransport()]
