"""Round-trip floors: what one small request and its reply cost between two processes.

A distributed step is a chain of round trips (the client's RunCallable to the master,
the master's RunGraph to a ps, ...), so a step can never be faster than its round trips
on the bare libraries. This script measures, each with an echo server in a process of
its own on a free 127.0.0.1 port:

- ``tcp``: a plain blocking TCP socket (TCP_NODELAY), the kernel's floor;
- ``pyzmq``: a DEALER talking to a ROUTER that echoes (one thread each side);
- ``grpcio``: a unary call to a generic handler that echoes (grpcio's thread pool);
- ``grpcio-stream``: one message each way on a bidirectional stream kept open (the
  requests fed from a queue, as flowrt's call streams are), echoed by the handler;
- ``flowrt-zmq`` / ``flowrt-grpc``: flowrt's transports (``Channel.call``), the echo
  answered by the handler's ``dispatch`` where the transport uses it.

Every request carries about 100 bytes. Each row is the median of ``--rounds`` rounds of
``--calls`` calls, in microseconds per round trip::

    python bench/rtt_bench.py --markdown
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import socket
import statistics
import sys
import time
from typing import Any, Callable

KINDS = ("tcp", "pyzmq", "grpcio", "grpcio-stream", "flowrt-zmq", "flowrt-grpc")
_PAYLOAD = b"x" * 100


def _serve(kind: str, port: int) -> None:
    if kind == "tcp":
        lsock = socket.socket()
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind(("127.0.0.1", port))
        lsock.listen()
        conn, _ = lsock.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            data = conn.recv(65536)
            if not data:
                return
            conn.sendall(data)
    elif kind == "pyzmq":
        import zmq

        sock = zmq.Context().socket(zmq.ROUTER)
        sock.bind(f"tcp://127.0.0.1:{port}")
        while True:
            sock.send_multipart(sock.recv_multipart(copy=False), copy=False)
    elif kind in ("grpcio", "grpcio-stream"):
        from concurrent import futures

        import grpc

        handler = grpc.method_handlers_generic_handler(
            "echo", {"Echo": grpc.unary_unary_rpc_method_handler(lambda req, ctx: req),
                     "Stream": grpc.stream_stream_rpc_method_handler(
                         lambda reqs, ctx: (r for r in reqs))})
        server = grpc.server(futures.ThreadPoolExecutor(8), handlers=[handler])
        server.add_insecure_port(f"127.0.0.1:{port}")
        server.start()
        server.wait_for_termination()
    else:
        transport = _flowrt_transport(kind)

        class Echo:
            def __call__(self, method: str, header: bytes, buffers: list) -> Any:
                return header, buffers

            def dispatch(self, method: str, header: bytes, buffers: list) -> Any:
                return header, buffers

        transport.serve(f"127.0.0.1:{port}", Echo())
        while True:
            time.sleep(3600)


def _flowrt_transport(kind: str) -> Any:
    if kind == "flowrt-zmq":
        from flowrt.plugins.transports.zmq import ZmqTransport

        return ZmqTransport()
    from flowrt.plugins.transports.grpc import GrpcTransport

    return GrpcTransport()


def _client(kind: str, port: int) -> Callable[[], None]:
    if kind == "tcp":
        deadline = time.monotonic() + 10
        while True:
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def call() -> None:
            s.sendall(_PAYLOAD)
            got = 0
            while got < len(_PAYLOAD):
                got += len(s.recv(65536))
        return call
    if kind == "pyzmq":
        import zmq

        d = zmq.Context().socket(zmq.DEALER)
        d.connect(f"tcp://127.0.0.1:{port}")
        d.RCVTIMEO = 10_000

        def call() -> None:
            d.send(_PAYLOAD)
            d.recv()
        return call
    if kind == "grpcio":
        import grpc

        ch = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(ch).result(timeout=10)
        stub = ch.unary_unary("/echo/Echo")
        return lambda: stub(_PAYLOAD, timeout=10)
    if kind == "grpcio-stream":
        import queue

        import grpc

        ch = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(ch).result(timeout=10)
        q: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        replies = ch.stream_stream("/echo/Stream")(iter(q.get, None))

        def call() -> None:
            q.put(_PAYLOAD)
            next(replies)
        return call
    channel = _flowrt_transport(kind).connect(f"127.0.0.1:{port}")
    return lambda: channel.call("Echo", _PAYLOAD[:40], [_PAYLOAD[40:]], timeout=10)


def measure(kind: str, rounds: int, calls: int) -> float:
    """Median microseconds per round trip for ``kind``."""
    from flowrt.testing import free_ports

    port = free_ports(1)[0]
    proc = mp.get_context("spawn").Process(target=_serve, args=(kind, port), daemon=True)
    proc.start()
    try:
        time.sleep(1.0)
        call = _client(kind, port)
        for _ in range(300):  # connect, warm up
            call()
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(calls):
                call()
            times.append((time.perf_counter() - t0) / calls * 1e6)
        return statistics.median(times)
    finally:
        proc.terminate()
        proc.join(10)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("kinds", nargs="*", default=list(KINDS), help=", ".join(KINDS))
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--markdown", action="store_true")
    a = p.parse_args(argv)
    results = {k: measure(k, a.rounds, a.calls) for k in a.kinds}
    if a.markdown:
        print("| round trip | us (median) |\n|---|---:|")
        for k, us in results.items():
            print(f"| {k} | {us:.0f} |")
    else:
        for k, us in results.items():
            print(f"{k:12s} {us:8.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
