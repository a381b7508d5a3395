"""Entry point of the built-in ``grpc`` transport.

The transport itself lives in :mod:`flowrt.plugins.transports.grpc`; it is imported (and
grpcio with it) only when a runtime first needs its transports -- a ``grpc://`` target,
a server, or ``flowrt plugins`` -- so runtimes that only run in-process sessions never
load it. If grpcio cannot be imported, the plugin is reported as failed with the reason.
"""
from __future__ import annotations

from typing import Any

from flowrt.hookspecs import hookimpl

__all__ = ["flowrt_transports"]


@hookimpl
def flowrt_transports() -> list[Any]:
    from .grpc import GrpcTransport

    return [GrpcTransport()]
