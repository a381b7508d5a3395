"""The conformance kit catches plugins that are wrong in ways that matter.

Each test plants one mistake in the example plugin package (examples/flowrt-example-
plugin: its ``example`` kernel set, its ``EMU`` device, its ``unix://`` transport) by
monkeypatching the installed objects, never by editing its files, and asserts the kit's
message names the object and the rule broken. Each mistake is one a plugin author
makes: a kernel that computes the wrong thing but runs, a shape function or gradient
that is off, a transport that hangs where it must fail.
"""
from __future__ import annotations

import itertools
import re
import threading
import time
from typing import Any

import numpy as np
import pytest

import flowrt as tf
import flowrt.testing as ft
from flowrt import errors
from flowrt.tensor_shape import TensorShape

# the example package, as installed (make test installs it)
emu = pytest.importorskip("flowrt_example_plugin.emu")
ops = pytest.importorskip("flowrt_example_plugin.ops")
unix = pytest.importorskip("flowrt_example_plugin.unix")


def _fails(check: Any, *needles: str) -> str:
    with pytest.raises(AssertionError) as ei:
        check()
    msg = str(ei.value)
    assert msg.startswith("flowrt conformance: "), msg
    for n in needles:
        assert n in msg, msg
    return msg


def _kernel(ks: Any, op: str, device_type: str) -> Any:
    return next(k for k in ks.kernels if k.op == op and k.device_type == device_type)


# -- kernels and devices -----------------------------------------------------------------
def test_the_unmutated_example_kernels_pass() -> None:
    ft.check_kernel_set(ops.ks)
    ft.check_kernel_set(emu.ks)


def test_an_emu_add_that_subtracts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(emu.BINARY, "Add", np.subtract)
    _fails(lambda: ft.check_kernel_set(emu.ks),
           "kernel set 'example_emu': kernel for op 'Add' on 'EMU': output 'z' differs "
           "from the CPU kernel's on inputs (float32 [2, 3], float32 [2, 3])")
    # the device type's own check compares every kernel registered for it, too
    _fails(lambda: ft.check_plugin("example_emu"),
           "plugin 'example_emu': device type 'EMU'", "kernel for op 'Add' on 'EMU'",
           "differs from the CPU kernel's")


def test_an_emu_matmul_ignoring_transpose_a(monkeypatch: pytest.MonkeyPatch) -> None:
    def matmul(ctx: Any) -> Any:
        tb = ctx.attrs["transpose_b"]
        return lambda a, b: emu.EmuArray(np.asarray(
            np.matmul(a._data, b._data.T if tb else b._data)))

    monkeypatch.setattr(_kernel(emu.ks, "MatMul", "EMU"), "factory", matmul)
    _fails(lambda: ft.check_kernel_set(emu.ks),
           "kernel set 'example_emu': kernel for op 'MatMul' on 'EMU'",
           "output 'product' differs from the CPU kernel's on inputs (float32 [3, 3], "
           "float32 [3, 3]), attrs {'transpose_a': True, 'transpose_b': False")


def test_a_kernel_returning_the_wrong_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_kernel(ops.ks, ops.OP, "CPU"), "factory",
                        lambda ctx: (lambda x: (x * x + 1).astype(np.float64)))
    _fails(lambda: ft.check_kernel_set(ops.ks),
           f"kernel set 'example': kernel for op '{ops.OP}' on 'CPU'",
           "output 'y' has dtype float64, but the OpDef gives float32: kernels return "
           "exactly the output dtype")


def test_a_kernel_returning_the_wrong_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_kernel(ops.ks, ops.OP, "CPU"), "factory",
                        lambda ctx: (lambda x: (x * x + 1).reshape(-1)))
    _fails(lambda: ft.check_kernel_set(ops.ks),
           f"kernel for op '{ops.OP}' on 'CPU'", "the shape function gives output 'y' the "
           "static shape (2, 3), but the kernel computed shape [6]: static shapes must "
           "hold at run time")


def test_an_emu_kernel_returning_a_host_array(monkeypatch: pytest.MonkeyPatch) -> None:
    # computes the right values, but in host memory: to_host refuses it
    monkeypatch.setattr(_kernel(emu.ks, ops.OP, "EMU"), "factory",
                        lambda ctx: (lambda a: np.square(a._data) + np.float32(1)))
    _fails(lambda: ft.check_kernel_set(emu.ks),
           f"kernel for op '{ops.OP}' on 'EMU': raised TypeError",
           "expected an EMU array, got ndarray")


def test_a_shape_function_with_a_wrong_static_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops.ks.ops[ops.OP], "shape_fn",
                        lambda op: [TensorShape([None, 1])])
    _fails(lambda: ft.check_kernel_set(ops.ks),
           "the shape function gives output 'y' the static shape (?, 1), but the kernel "
           "computed shape [2, 3]")


def test_a_gradient_with_the_wrong_sign(monkeypatch: pytest.MonkeyPatch) -> None:
    right = ops.ks.gradients[ops.OP]
    monkeypatch.setitem(ops.ks.gradients, ops.OP,
                        lambda op, grad: [tf.negative(right(op, grad)[0])])
    msg = _fails(lambda: ft.check_kernel_set(ops.ks),
                 f"kernel set 'example': gradient of op '{ops.OP}': the gradient with "
                 "respect to input 'x' (float64 [2, 3]) differs from central differences "
                 "of the CPU kernel")
    got, num = map(float, re.search(r"got (\S+), numeric (\S+) at", msg).groups())
    assert got == pytest.approx(-num, rel=1e-3)


# -- the unix transport ------------------------------------------------------------------
@pytest.fixture
def transport(tmp_path: Any) -> Any:
    """A unix transport whose sockets live in the test's directory (a mutant's stop()
    may leave them behind)."""
    t = unix.UnixTransport()
    n = itertools.count()
    t.free_addresses = lambda k: [str(tmp_path / f"s{next(n)}.sock") for _ in range(k)]
    return t


def test_the_unmutated_unix_transport_keeps_the_channel_rules(transport: Any) -> None:
    r = ft.check_transport(transport, cluster=False)
    assert "an unreachable peer raises UnavailableError naming its address" in r.checked


def test_a_raw_connection_refused_error(monkeypatch: pytest.MonkeyPatch,
                                        transport: Any) -> None:
    opened = unix._Channel._open

    def raw_open(self: Any) -> Any:  # lets the socket's error out of connect
        try:
            return opened(self)
        except errors.UnavailableError as e:
            if "cannot connect" not in str(e):
                raise
            raise ConnectionRefusedError(111, "Connection refused") from None

    monkeypatch.setattr(unix._Channel, "_open", raw_open)
    _fails(lambda: ft.check_transport(transport, cluster=False),
           "transport 'unix': ", "raised a raw ConnectionRefusedError: [Errno 111] "
           "Connection refused: a channel turns socket errors into "
           "flowrt.errors.UnavailableError naming the address")


@pytest.mark.parametrize("dropped, rule", [
    ("timeout", "call(timeout=0.5) was still waiting after 3.0 s: timeout is in seconds; "
                "the call must end then with DeadlineExceededError"),
    ("cancel", "call(cancel=event), the event set after 0.3 s was still waiting after "
               "3.0 s: a cancellable channel ends the call with CancelledError soon after "
               "the event is set"),
])
def test_a_channel_ignoring(dropped: str, rule: str, monkeypatch: pytest.MonkeyPatch,
                            transport: Any) -> None:
    call = unix._Channel.call

    def ignoring(self: Any, method: str, header: bytes, buffers: Any = (),
                 timeout: float | None = None, cancel: Any = None) -> Any:
        return call(self, method, header, buffers,
                    None if dropped == "timeout" else timeout,
                    None if dropped == "cancel" else cancel)

    monkeypatch.setattr(unix._Channel, "call", ignoring)
    _fails(lambda: ft.check_transport(transport, cluster=False), f"transport 'unix': {rule}")


def test_stop_leaving_connections_open(monkeypatch: pytest.MonkeyPatch,
                                       transport: Any) -> None:
    def stop(self: Any, grace: float = 0.0) -> None:  # closes the listener only
        self._sock.close()

    monkeypatch.setattr(unix._Server, "stop", stop)
    _fails(lambda: ft.check_transport(transport, cluster=False),
           "transport 'unix': after stop() a call on a connection opened before was "
           "answered: stop() must close the server's connections")


def test_replies_truncated_to_four_buffers(monkeypatch: pytest.MonkeyPatch,
                                           transport: Any) -> None:
    send = unix._Server._send

    def truncating(conn: Any, lock: Any, kind: int, rid: int, code: int, header: bytes,
                   buffers: Any) -> None:
        send(conn, lock, kind, rid, code, header, list(buffers)[:4])

    monkeypatch.setattr(unix._Server, "_send", staticmethod(truncating))
    _fails(lambda: ft.check_transport(transport, cluster=False),
           "transport 'unix': echo: a reply of 9 buffers came back with 4: every buffer "
           "of a message must arrive, in order")


def test_an_oversized_message_as_unavailable(monkeypatch: pytest.MonkeyPatch,
                                             transport: Any) -> None:
    monkeypatch.setattr(unix, "_too_big", lambda what, size, limit: errors.UnavailableError(
        None, None, f"{what} is too big"))
    _fails(lambda: ft.check_transport(transport, cluster=False),
           "a request over max_message_bytes (1048576) raised UnavailableError",
           "expected flowrt.errors.ResourceExhaustedError: a message over "
           "max_message_bytes is refused with ResourceExhaustedError")


def test_a_single_threaded_server_is_caught_in_seconds(monkeypatch: pytest.MonkeyPatch,
                                                       transport: Any) -> None:
    init = unix._Server.__init__

    def one_at_a_time(self: Any, t: Any, address: str, handler: Any) -> None:
        lock = threading.Lock()

        def serial(*args: Any) -> Any:
            with lock:
                return handler(*args)

        init(self, t, address, serial)

    monkeypatch.setattr(unix._Server, "__init__", one_at_a_time)
    t0 = time.monotonic()
    _fails(lambda: ft.check_transport(transport, cluster=False),
           "transport 'unix': a second call was not answered within 3 s while the handler "
           "of the first was blocked: handlers must run concurrently")
    assert time.monotonic() - t0 < 10
