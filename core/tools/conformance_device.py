"""The conformance kit runs a small graph on a device (``flowrt.testing``): a fed
placeholder, a constant and a chain of the device's kernels placed on it, fetched in
this process and from another task of a small cluster, so that every crossing between
host memory and the device (feed, constant, kernel to kernel, device to CPU, device to
the wire) goes through the device's ``from_host``/``to_host`` and gives the right
values."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..base import dtypes as _dt
from ..base.tensor_shape import TensorShape
from ..distributed.server import Server
from ..framework.graph import Graph, apply_op
from ..framework.session import Session
from ..proto.config_pb2 import ConfigProto
from .conformance_report import exc_text, fail
from .conformance_transport import free_addresses, is_message_transport

__all__ = ["device_graph", "CHAIN"]

#: the kernels the graph chains on the device, those the device has, in this order
CHAIN = ("AddV2", "Mul", "Neg", "Identity")

_X = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
_C = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)


def _build(rt: Any, dev: str, host: str, chain: list[str]) -> tuple[Any, ...]:
    """The graph on ``dev`` (the ops of ``chain``), the CPU ``Identity`` on ``host``:
    ``(graph, x, c, y, back, the value y must have)``."""
    f32 = _dt.float32
    g = Graph(runtime=rt)
    with g.as_default():
        with g.device(dev):
            x = apply_op("Placeholder", name="x", dtype=f32, shape=TensorShape([2, 3]))
            c = g.create_op("Const", [], [f32], name="c",
                            attrs={"value": _C, "dtype": f32}).outputs[0]
            y, want = x, _X
            if "AddV2" in chain:
                y, want = apply_op("AddV2", name="add", x=y, y=c), want + _C
            if "Mul" in chain:
                y, want = apply_op("Mul", name="mul", x=y, y=y), want * want
            if "Neg" in chain:
                y, want = apply_op("Neg", name="neg", x=y), -want
            if "Identity" in chain:
                y = apply_op("Identity", name="out", input=y)
        with g.device(host):
            back = apply_op("Identity", name="back", input=y)
    return g, x, c, y, back, want


def _check(where: list[str], how: str, got: list[Any], want: np.ndarray) -> None:
    for what, v, w in (("the constant", got[0], _C), ("the chain's result", got[1], want),
                       ("the chain's result copied to a CPU", got[2], want)):
        v = np.asarray(v)
        if v.dtype != np.float32 or v.shape != w.shape or \
                not np.allclose(v, w, rtol=1e-6, atol=1e-6):
            fail(where, f"{how}, {what} came back as {v.dtype} {list(v.shape)} {v!r}, "
                        f"expected float32 {w!r}")


def device_graph(rt: Any, name: str, where: list[str]) -> str:
    """Run the graph on ``/device:<name>:0`` of ``rt``, in process and on a cluster of
    two tasks (the device on the second, fetched through the first).

    :returns: what was verified
    :raises AssertionError: naming what was placed elsewhere, failed or came back wrong
    """
    chain = [op for op in CHAIN if rt.find_kernel(op, name, {"T": _dt.float32}) is not None]
    cfg = ConfigProto(device_count={name: 1})
    g, x, c, y, back, want = _build(rt, f"/device:{name}:0", "/device:CPU:0", chain)
    how = "fetched in process"
    try:
        with Session(graph=g, config=cfg) as s:
            got = s.run([c, y, back], {x: _X})
            placed = s.placement(back, [x])
    except Exception as e:
        fail(where, f"a graph on /device:{name}:0 ({how}) raised {exc_text(e)}")
    off = {n: d for n, d in placed.items() if n not in ("back",) and
           not d.endswith(f"/device:{name}:0")}
    if off:
        fail(where, f"nodes of the graph asked for on /device:{name}:0 were placed "
                    f"elsewhere: {off}")
    _check(where, how, got, want)

    proto = next((p for p in ("grpc", "zmq") if p in rt.transports), None) or next(
        (p for p, t in rt.transports.items() if is_message_transport(t)), "inproc")
    cluster = {"worker": free_addresses(rt.transport(proto), 2)}
    how = f"fetched from another task over {proto}"
    servers = []
    try:
        servers = [Server(cluster, "worker", i, protocol=proto, config=cfg, runtime=rt)
                   for i in range(2)]
        g, x, c, y, back, want = _build(rt, f"/job:worker/task:1/device:{name}:0",
                                        "/job:worker/task:0/device:CPU:0", chain)
        with Session(servers[0].target, graph=g, config=cfg) as s:
            got = s.run([c, y, back], {x: _X})
    except Exception as e:
        fail(where, f"a graph on /job:worker/task:1/device:{name}:0 ({how}) raised "
                    f"{exc_text(e)}")
    finally:
        for srv in servers:
            srv.stop()
    _check(where, how, got, want)
    return (f"a graph on {name}:0 (a fed placeholder, a constant, {len(chain)} chained "
            f"kernels {chain}) gives the right values fetched in process, copied to a CPU, "
            f"and from another task over {proto}")
