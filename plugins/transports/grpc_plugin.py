"""Entry point of the built-in ``grpc`` transport.

The transport itself lives in :mod:`flowrt.plugins.transports.grpc`. The hook declares
it without importing it (a :class:`~flowrt.plugin.transport.DeferredTransport`): that
module, and grpcio with it, is imported only when the transport is first used -- a
``grpc://`` target or a server -- so listing a runtime's transports or running
in-process sessions never loads it. If grpcio is not installed, the plugin is reported
as failed with the reason.
"""
from __future__ import annotations

from typing import Any

from flowrt.hookspecs import hookimpl
from flowrt.plugin.transport import DeferredTransport, require

__all__ = ["flowrt_transports"]


@hookimpl
def flowrt_transports() -> list[Any]:
    """The ``grpc`` transport, imported (with grpcio) when first used."""
    require("grpc", "grpcio")
    return [DeferredTransport("grpc", "flowrt.plugins.transports.grpc", "GrpcTransport")]
