"""Conformance checks for flowrt plugins (``flowrt.testing``).

A plugin author runs these from their own test suite::

    import flowrt.testing

    def test_my_plugin_conforms():
        flowrt.testing.check_plugin("myplugin")   # the entry-point name

or checks one piece at a time (:func:`check_device_type`, :func:`check_device`,
:func:`check_transport`, :func:`check_kernel_set`, :func:`check_graph_pass`). Every
check raises :class:`AssertionError` on the first problem, with a message that names the
plugin, kernel set, op, device or scheme at fault and what was expected; on success it
returns a :class:`Report` listing what was checked and what could not be checked (and
why). flowrt's built-in plugins pass the same checks.

Nothing here needs pytest, and nothing here is imported by ``import flowrt``.
"""
from __future__ import annotations

import importlib
import inspect
import json
import keyword
import os
import re
import subprocess
import sys
import tempfile
import threading
import types
import uuid
import zlib
from importlib.metadata import entry_points
from typing import Any, Callable, NoReturn, Sequence

import numpy as np
import pluggy

import flowrt as tf

from ..base import dtypes as _dt
from ..base import errors
from ..base.device_spec import canonical_device, canonical_type
from ..base.tensor_shape import TensorShape, as_shape, unknown_shape
from ..distributed.security import transport_scheme
from ..distributed.server import Server
from ..engine.executor import Executor, SessionState, StepContext
from ..engine.ir import extract_step_graph
from ..framework._namespace import NAMESPACES
from ..framework.graph import Graph, apply_op
from ..framework.session import Session
from ..plugin import hookspecs
from ..plugin.device import Device, DeviceType
from ..plugin.hookspecs import hookimpl
from ..plugin.op_registry import KernelContext, KernelDef, KernelSet, OpDef
from ..plugin.passes import GraphPass
from ..plugin.runtime import Runtime, default_runtime
from ..plugin.transport import Transport, parse_target
from ..proto.config_pb2 import ConfigProto
from ..service.master import Master
from ..service.worker import Worker
from . import conformance_kernels as _ck
from .conformance_kernels import HostDevice as _HostDevice
from .conformance_kernels import build_node as _build_node
from .conformance_kernels import device_for as _device_for
from .conformance_kernels import trivial_attrs as _trivial_attrs
from .conformance_device import device_graph
from .conformance_report import Report
from .conformance_report import exc_text as _exc
from .conformance_report import fail as _fail
from .conformance_report import same as _same
from .conformance_transport import (check_channels, free_addresses, free_port, free_ports,
                                    is_message_transport, listen_address, shared_memory_off)

__all__ = ["Report", "check_device_type", "check_device", "check_transport",
           "check_kernel_set", "check_graph_pass", "check_plugin", "TRANSPORT_LIVE_CHECKS",
           "KERNEL_KINDS", "run_distributed_conformance", "check_cluster",
           "ClusterConformance", "TaskStarter", "CLUSTER_JOBS", "cluster_addresses",
           "in_process_task_starter", "free_port", "free_ports", "free_addresses",
           "ServerProcess", "subprocess_task_starter", "start_server_processes"]

#: The kernel kinds the executor knows (see :class:`~flowrt.op_registry.KernelDef`),
#: with the number of arguments the compute callable takes before the node's inputs.
KERNEL_KINDS: dict[str, int] = {"plain": 0, "step": 1, "async": 2, "const": 0,
                                "switch": 0, "merge": 0}

_TYPE_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
_SCHEME_RE = re.compile(r"^[a-z][a-z0-9+.-]*$")
_OP_NAME_RE = re.compile(r"^_?[A-Z][A-Za-z0-9_>]*$")
_PASS_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def _owner(obj: Any) -> str:
    p = getattr(obj, "plugin", None)
    return f" (plugin {p!r})" if p else ""


def _rng(name: str) -> Any:
    """A random generator of its own for each op: samples do not depend on what else
    was checked before."""
    return np.random.default_rng(zlib.crc32(name.encode()))


def _bind_ok(fn: Callable[..., Any], nargs: int) -> bool | None:
    """Whether ``fn`` accepts ``nargs`` positional arguments (None: cannot tell)."""
    if isinstance(fn, np.ufunc):
        return fn.nin <= nargs <= fn.nin + fn.nout
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(*([None] * nargs))
    except TypeError:
        return False
    return True


# ---------------------------------------------------------------------------------------
# devices
# ---------------------------------------------------------------------------------------
def _sample_arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(1234)
    out: list[np.ndarray] = []
    for dtype in (np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_,
                  np.complex64):
        for shape in ((), (3,), (2, 3), (0, 4)):
            a = rng.normal(size=shape) * 10
            if np.dtype(dtype).kind == "c":
                a = a + 1j * rng.normal(size=shape)
            out.append(np.asarray(a).astype(dtype))
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    out.append(base[:, ::2].T)  # non-contiguous
    return out


def _check_device(device: Any, where: list[str], host: Device | None = None) -> Report:
    """The checks of :func:`check_device`; ``where`` (what holds the device) starts
    every failure message. Returns the :class:`Report`; raises AssertionError."""
    where = [*where, f"device {getattr(device, 'name', device)!r}"]
    r = Report(f"device {getattr(device, 'name', device)!r}")
    if not isinstance(device, Device):
        _fail(where, f"expected a flowrt.device.Device, got {type(device).__name__}")
    r.ok("is a flowrt.device.Device")
    t = device.device_type
    if not isinstance(t, str) or t != canonical_type(t) or not _TYPE_NAME_RE.match(t):
        _fail(where, f"device_type {t!r} is not a canonical type name (upper case, "
                     "letters, digits and '_')")
    if not isinstance(device.index, int) or isinstance(device.index, bool) or \
            device.index < 0:
        _fail(where, f"index must be a non-negative int, got {device.index!r}")
    if not isinstance(device.name, str) or canonical_device(device.name) != device.name:
        _fail(where, f"name {device.name!r} is not canonical: expected the form "
                     f"/job:J/replica:0/task:T/device:{t}:{device.index} "
                     "(let Device.__init__ build it)")
    if not device.name.endswith(f"/device:{t}:{device.index}"):
        _fail(where, f"name {device.name!r} does not end with /device:{t}:{device.index}")
    r.ok("canonical name, type and index")
    if not isinstance(device.incarnation, int) or device.incarnation == 0:
        _fail(where, f"incarnation must be a non-zero int, got {device.incarnation!r}")
    if not isinstance(device.memory_limit, int) or device.memory_limit < 0:
        _fail(where, f"memory_limit must be an int >= 0, got {device.memory_limit!r}")
    r.ok("incarnation and memory_limit")
    rm = getattr(device, "resource_mgr", None)
    if rm is None or not callable(getattr(rm, "lookup_or_create", None)) or \
            not callable(getattr(rm, "cleanup", None)):
        _fail(where, "has no resource_mgr (call Device.__init__ from the subclass)")
    r.ok("has a resource manager")
    xp = device.xp
    missing = [n for n in ("asarray", "add", "multiply", "zeros", "ndarray")
               if not hasattr(xp, n)]
    if missing:
        _fail(where, f"its array module xp={getattr(xp, '__name__', xp)!r} lacks {missing}")
    r.ok(f"array module {getattr(xp, '__name__', xp)!r}")

    for a in _sample_arrays():
        before = a.copy()
        desc = f"{a.dtype} array of shape {a.shape}"
        try:
            d = device.from_host(a)
        except Exception as e:
            _fail(where, f"from_host({desc}) raised {_exc(e)}")
        if not _same(a, before):
            _fail(where, f"from_host({desc}) modified its argument")
        try:
            h = device.to_host(d)
        except Exception as e:
            _fail(where, f"to_host() of a {desc} raised {_exc(e)}")
        if not isinstance(h, (np.ndarray, np.generic)):
            _fail(where, f"to_host() returned {type(h).__name__}, expected a numpy array")
        if not _same(h, a):
            _fail(where, f"from_host/to_host round trip changed a {desc}: got "
                         f"{np.asarray(h).dtype} {np.asarray(h).shape} {np.asarray(h)!r}")
    r.ok("from_host/to_host round trips keep dtype, shape and values "
         "(7 dtypes, scalars, empty and non-contiguous arrays)")

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    d = device.from_host(a)
    try:
        s = device.to_host(xp.add(d, d))
    except Exception as e:
        _fail(where, f"its array module cannot add two arrays made by from_host: {_exc(e)}")
    if not _same(s, a + a):
        _fail(where, f"xp.add on device arrays gave {s!r}, expected {a + a!r}")
    r.ok("xp computes on device arrays")

    host = host or _HostDevice()
    try:
        c1 = device.copy_from(a, host)
        c2 = device.copy_from(d, device)
    except Exception as e:
        _fail(where, f"copy_from raised {_exc(e)}")
    for what, c in (("from a CPU device", c1), ("from a device of its own type", c2)):
        if not _same(device.to_host(c), a):
            _fail(where, f"copy_from {what} changed the value")
    r.ok("copy_from the host and from its own type")
    try:
        device.synchronize()
    except Exception as e:
        _fail(where, f"synchronize() raised {_exc(e)}")
    r.ok("synchronize()")
    return r


def check_device(device: Device, *, host: Device | None = None) -> Report:
    """Check one :class:`~flowrt.device.Device`.

    Verifies its canonical name, type and index; its incarnation, memory limit and
    resource manager; that its array module works on its arrays; that
    ``from_host``/``to_host`` round-trip values of several dtypes and shapes exactly
    (without modifying the host array); ``copy_from`` from the host and from its own
    type; and ``synchronize()``.

    :param device: the device to check
    :param host: a CPU device to copy from (default: a plain numpy host device)
    :returns: a :class:`Report`
    :raises AssertionError: naming the device and what is wrong
    """
    return _check_device(device, [], host)


def _discover(dt: Any, where: list[str], config: Any, job: str, task: int) -> list[Any]:
    """``dt.discover(config, job, task)``, checked: a list of unique devices of this
    type named for the job and task, never an exception."""
    try:
        devs = dt.discover(config, job, task)
    except Exception as e:
        _fail(where, f"discover({'None' if config is None else 'config'}, {job!r}, {task}) "
                     f"raised {_exc(e)}; discovery must return [] and set "
                     "unavailable_reason instead of raising")
    if not isinstance(devs, (list, tuple)):
        _fail(where, f"discover() returned {type(devs).__name__}, expected a list")
    seen: set[str] = set()
    for d in devs:
        if not isinstance(d, Device):
            _fail(where, f"discover() returned {type(d).__name__}, expected "
                         "flowrt.device.Device objects")
        if d.device_type != dt.name:
            _fail(where, f"discover() returned device {d.name!r} of type {d.device_type!r}")
        prefix = f"/job:{job}/replica:0/task:{task}/"
        if not d.name.startswith(prefix):
            _fail(where, f"discover(None, {job!r}, {task}) returned {d.name!r}: device "
                         f"names must start with {prefix}")
        if d.name in seen:
            _fail(where, f"discover() returned two devices named {d.name!r}")
        seen.add(d.name)
    return list(devs)


def _check_device_type(dt: Any, where: list[str], host: Device | None = None,
                       runtime: Any = None, live: bool = True,
                       timeout: float = 60.0) -> Report:
    """The checks of :func:`check_device_type`; ``where`` (the plugin, if any) starts
    every failure message. Returns the :class:`Report`; raises AssertionError."""
    name = getattr(dt, "name", dt)
    where = [*where, f"device type {name!r}{_owner(dt)}"]
    r = Report(f"device type {name!r}")
    if not isinstance(dt, DeviceType):
        _fail(where, f"expected a flowrt.device.DeviceType, got {type(dt).__name__}")
    if not isinstance(dt.name, str) or not _TYPE_NAME_RE.match(dt.name) or \
            canonical_type(dt.name) != dt.name:
        _fail(where, "the name must be a canonical device type: upper case letters, "
                     "digits and '_', starting with a letter")
    r.ok("canonical name")
    if not isinstance(dt.priority, int) or isinstance(dt.priority, bool):
        _fail(where, f"priority must be an int, got {dt.priority!r}")
    if not isinstance(dt.array_kernels, bool):
        _fail(where, f"array_kernels must be a bool, got {dt.array_kernels!r}")
    r.ok("priority and array_kernels")
    if not callable(dt.discover) or _bind_ok(dt.discover, 3) is False:
        _fail(where, "discover must be callable as discover(config, job, task)")
    _discover(dt, where, None, "worker", 3)
    devs = _discover(dt, where, None, "localhost", 0)
    r.ok("discover(config, job, task) returns Devices of this type, named for the task")
    if not devs:
        reason = dt.unavailable_reason
        if not isinstance(reason, str) or not reason.strip():
            _fail(where, "discover() found no devices but unavailable_reason is not set: say "
                         "why (missing driver, library, or none requested)")
        devs = _discover(dt, where, ConfigProto(device_count={dt.name: 1}), "localhost", 0)
        if not devs:
            r.skip("device checks", f"no devices here ({reason})")
            return r
        r.ok("discover() makes the devices asked for with config.device_count")
    for d in devs:
        r.parts.append(_check_device(d, where, host))
    if not live:
        r.skip("live checks", "live=False")
        return r
    if runtime is not None:
        rt = runtime
        if rt.device_types.get(dt.name) is None:
            r.skip("live checks", f"the runtime has no device type {dt.name!r}")
            return r
    else:
        rt = default_runtime()
        if rt.device_types.get(dt.name) is not dt:
            rt = _adopting_runtime(dt, "flowrt_device_types", "name", "device_types", where)
    with shared_memory_off():
        r.ok(_with_timeout(lambda: device_graph(rt, dt.name, where), timeout, where,
                           "the graph on the device"))
    if dt.name != "CPU":
        pairs = [(k, rt.kernels.get((op, "CPU")) or rt.kernels.get((op, "*")))
                 for (op, t), k in sorted(rt.kernels.items()) if t == dt.name]
        n = _compare_kernels(pairs, where, rt, rt.op_defs.get, {}, {}, r)
        r.ok(f"{n} kernels registered for {dt.name} compute what the CPU kernels of their "
             "ops compute (every attr variant on random inputs)")
    return r


def check_device_type(device_type: DeviceType, *, host: Device | None = None,
                      runtime: Any = None, live: bool = True,
                      timeout: float = 60.0) -> Report:
    """Check a :class:`~flowrt.device.DeviceType`, every device it discovers here, and
    run it.

    Verifies the canonical name, priority and ``array_kernels`` types; that
    ``discover(config, job, task)`` never raises, returns devices of this type named for
    the given job and task with unique names; that an empty result comes with an
    ``unavailable_reason`` (a type whose devices exist only when asked for is then
    asked for one with ``config.device_count``); and runs :func:`check_device` on each
    device found. Live (``live=True``), in a runtime holding the type:

    - a graph placed on the device (a fed placeholder, a constant, the device's
      ``AddV2``, ``Mul``, ``Neg`` and ``Identity`` kernels where it has them) computes
      the right values, fetched in process, copied to a CPU, and fetched from another
      task of a two-task cluster;
    - every kernel registered for the type computes what the CPU kernel of its op
      computes, on random inputs of every attr variant (ops of any plugin).

    :param device_type: the object a ``flowrt_device_types`` hook returns
    :param host: a CPU device to copy from in :func:`check_device`
    :param runtime: the runtime holding the type and its kernels (default: the default
        runtime when it holds this object, else one of the built-ins plus this type)
    :param live: run the graph and the kernels
    :param timeout: seconds the graph may take
    :returns: a :class:`Report` (devices under ``parts``)
    :raises AssertionError: naming the device type (and plugin) at fault
    """
    return _check_device_type(device_type, [], host, runtime, live, timeout)


def _adopting_runtime(obj: Any, hook: str, key: str, registry: str,
                      where: list[str]) -> Any:
    """A runtime with the built-in plugins in which ``obj`` (a transport or a device
    type) owns its name: the plugin that had the name is blocked. ``obj`` keeps its
    ``plugin`` attribute."""
    name = getattr(obj, key)
    owner = getattr(obj, "plugin", None)
    if owner is None:
        owner = getattr(getattr(Runtime(autoload=False), registry).get(name), "plugin", None)
    plugin = types.SimpleNamespace(**{hook: hookimpl(lambda: [obj])})
    rt = Runtime(autoload=False, block=[owner] if owner else [],
                 plugins={"flowrt.testing": plugin})
    saved = getattr(obj, "plugin", None)
    try:
        got = getattr(rt, registry).get(name)
    finally:
        obj.plugin = saved
    if got is not obj:
        _fail(where, f"could not build a runtime in which this object owns {name!r}")
    return rt


# ---------------------------------------------------------------------------------------
# transports
# ---------------------------------------------------------------------------------------
def _small_graph(rt: Any, tag: str) -> tuple[Any, dict[str, Any]]:

    g = Graph(runtime=rt)
    with g.as_default():
        x = apply_op("Placeholder", name="x", dtype=_dt.float32, shape=TensorShape([2]))
        y = apply_op("Identity", name="y", input=x)
        c = g.create_op("Const", [], [_dt.int64], name="c",
                        attrs={"value": np.array([7, -8], np.int64), "dtype": _dt.int64}
                        ).outputs[0]
        v = apply_op("VariableV2", name="v", shape=TensorShape([2]), dtype=_dt.float32,
                     shared_name=f"flowrt_conformance_{tag}")
        assign = apply_op("Assign", name="assign", ref=v, value=x)
        read = apply_op("Identity", name="read", input=v)
    return g, {"x": x, "y": y, "c": c, "assign": assign, "read": read}


def _run_small_graph(rt: Any, target: str, where: list[str]) -> None:
    """Two sessions on ``target``: values, dtypes, error classes and shared state."""

    g, t = _small_graph(rt, uuid.uuid4().hex[:12])
    a = np.array([1.5, -2.0], np.float32)
    s1 = Session(target, graph=g, runtime=rt)
    try:
        y, c = s1.run([t["y"], t["c"]], {t["x"]: a})
        if not _same(y, a):
            _fail(where, f"session on {target!r}: fetching Identity(x) gave {y!r}, "
                         f"expected {a!r}")
        if not _same(c, np.array([7, -8], np.int64)):
            _fail(where, f"session on {target!r}: fetching an int64 constant gave {c!r}")
        try:
            s1.run(t["y"])
        except errors.InvalidArgumentError:
            pass
        except Exception as e:
            _fail(where, f"session on {target!r}: an unfed placeholder raised {_exc(e)}, "
                         "expected flowrt.errors.InvalidArgumentError to cross the transport")
        else:
            _fail(where, f"session on {target!r}: an unfed placeholder did not raise")
        s1.run(t["assign"], {t["x"]: a})
    finally:
        s1.close()
    s2 = Session(target, graph=g, runtime=rt)
    try:
        v = s2.run(t["read"])
    except Exception as e:
        _fail(where, f"a second session on {target!r} could not read the variable the "
                     f"first one assigned: {_exc(e)}")
    finally:
        s2.close()
    if not _same(v, a):
        _fail(where, f"a second session on {target!r} read {v!r}, expected {a!r}")


def _live_named_target(transport: Transport, rt: Any, where: list[str]) -> str:
    """In-process style: a session on ``scheme://conformance`` needs no server."""
    _run_small_graph(rt, f"{transport.scheme}://conformance", where)
    return f"sessions on {transport.scheme}://conformance run a graph and share variables"


def _live_served(transport: Transport, rt: Any, where: list[str]) -> str:
    """Serve a master and worker with ``start_server`` and run sessions against it.

    ``host:port`` transports bind ``127.0.0.1:0`` and report the port they got in
    ``server.address``; others get a free address (``listen_address``).
    """

    scheme = transport.scheme
    address = listen_address(transport)
    worker = Worker(rt, "localhost", 0, None)
    master = Master(rt, worker)
    try:
        server = transport.start_server(address, master, worker)
    except Exception as e:
        _fail(where, f"start_server({address!r}, master, worker) raised {_exc(e)}")
    try:
        addr = getattr(server, "address", None)
        if not isinstance(addr, str) or not addr:
            _fail(where, "start_server() returned an object without an address")
        if not callable(getattr(server, "stop", None)):
            _fail(where, "start_server() returned an object without stop()")
        _run_small_graph(rt, f"{scheme}://{addr}", where)
    finally:
        stop = getattr(server, "stop", None)
        if callable(stop):
            stop()
    return f"a server from start_server() serves sessions on {scheme}://<address>"


#: Live checks per scheme; schemes not listed get ``[_live_served]`` (a server on
#: 127.0.0.1 and sessions against it). A transport plugin may add its scheme here.
TRANSPORT_LIVE_CHECKS: dict[str, list[Callable[[Transport, Any, list[str]], str]]] = {
    "inproc": [_live_named_target, _live_served],
}


def _with_timeout(fn: Callable[[], str], timeout: float, where: list[str], what: str) -> str:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
            box["error"] = e

    th = threading.Thread(target=target, name="flowrt-conformance", daemon=True)
    th.start()
    th.join(timeout)
    if th.is_alive():
        _fail(where, f"{what} did not finish within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["result"]


def _check_transport(t: Any, where: list[str], live: bool, timeout: float,
                     cluster: bool = True) -> Report:
    """The checks of :func:`check_transport`; ``where`` (the plugin, if any) starts
    every failure message. Returns the :class:`Report`; raises AssertionError."""
    scheme = getattr(t, "scheme", None)
    where = [*where, f"transport {scheme!r}{_owner(t)}"]
    r = Report(f"transport {scheme!r}")
    if not isinstance(t, Transport):
        _fail(where, f"expected a flowrt.transport.Transport, got {type(t).__name__}")
    if not isinstance(scheme, str) or not scheme or not _SCHEME_RE.match(scheme):
        _fail(where, "scheme must be a non-empty lower-case URL scheme ([a-z][a-z0-9+.-]*)")
    r.ok("scheme")
    for m in ("start_server", "master_client", "worker_client"):
        fn = getattr(t, m, None)
        if not callable(fn):
            _fail(where, f"{m} is not callable")
        if getattr(type(t), m, None) is getattr(Transport, m):
            _fail(where, f"{m} is not implemented (the Transport base method raises)")
    r.ok("start_server, master_client and worker_client are implemented")
    if not live:
        r.skip("live checks", "live=False")
        return r
    # the check's runtime adopts the transport for the check (its ``runtime``); the
    # transport goes back to the runtime that owned it afterwards
    owner_rt = getattr(t, "runtime", None)
    try:
        with shared_memory_off():
            if is_message_transport(t):
                _with_timeout(lambda: check_channels(t, where, r) or "", timeout, where,
                              "the channel checks")
            else:
                r.skip("channel checks", "not a message transport (no serve/connect): its "
                                         "clients are objects")
            rt = _adopting_runtime(t, "flowrt_transports", "scheme", "transports", where)
            need = ("Placeholder", "Identity", "Const", "VariableV2", "Assign")
            missing = [o for o in need if o not in rt.op_defs]
            if missing:
                r.skip("live checks", f"the runtime has no kernel set defining {missing}")
                return r
            for fn in TRANSPORT_LIVE_CHECKS.get(scheme, [_live_served]):
                r.ok(_with_timeout(lambda fn=fn: fn(t, rt, where), timeout, where,
                                   fn.__name__))
            if cluster:
                r.parts.append(check_cluster(scheme, timeout=timeout, runtime=rt))
            else:
                r.skip("cluster suite", "cluster=False")
    finally:
        t.runtime = owner_rt  # type: ignore[attr-defined]
    return r


def check_transport(transport: Transport, *, live: bool = True, timeout: float = 60.0,
                    cluster: bool = True) -> Report:
    """Check a :class:`~flowrt.transport.Transport`.

    Static checks: the scheme is a non-empty lower-case URL scheme; ``start_server``,
    ``master_client`` and ``worker_client`` are implemented. Live checks
    (``live=True``) run with same-host shared memory off, so that every tensor crosses
    the transport itself: a message transport's channel and server rules
    (:func:`flowrt.tools.conformance_transport.check_channels`); then, in a runtime
    with the built-in plugins in which this transport owns its scheme, a small graph (a
    fed placeholder, an int64 constant, an unfed placeholder whose
    ``InvalidArgumentError`` must cross the transport, a variable assigned in one
    session and read in a second one) on a server from ``start_server`` at
    :func:`listen_address` (:data:`TRANSPORT_LIVE_CHECKS` maps a scheme to its live
    checks); and, with ``cluster``, :func:`check_cluster` over the transport.

    :param transport: the object a ``flowrt_transports`` hook returns
    :param live: also run the live checks
    :param timeout: seconds each live check may take
    :param cluster: run the distributed suite
    :returns: a :class:`Report` (the cluster suite's under ``parts``)
    :raises AssertionError: naming the scheme (and plugin) and the rule broken
    """
    return _check_transport(transport, [], live, timeout, cluster)


# ---------------------------------------------------------------------------------------
# kernel sets
# ---------------------------------------------------------------------------------------
def _check_shapes_result(res: Any, op: Any, where: list[str], what: str) -> None:
    n = len(op.outputs)
    if not isinstance(res, (list, tuple)):
        _fail(where, f"shape function returned {type(res).__name__} {what}, expected a list "
                     f"of {n} shapes")
    if len(res) != n:
        _fail(where, f"shape function returned {len(res)} shapes {what}, but the node has "
                     f"{n} outputs")
    for s in res:
        if s is None:
            continue
        try:
            as_shape(s)
        except Exception as e:
            _fail(where, f"shape function returned {s!r} {what}, not a shape: {_exc(e)}")


def _check_opdef(d: Any, key: str, where: list[str]) -> None:
    """Check the OpDef ``d`` that a kernel set registers as ``key``: its type and name,
    unique argument names, arguments that refer to declared attrs of the right kind,
    attr names, defaults within the allowed values and minimum, ``shape_fn`` and
    ``is_stateful``. Raises AssertionError (:func:`_fail`) at the first problem."""
    if not isinstance(d, OpDef):
        _fail(where, f"ops[{key!r}] is {type(d).__name__}, expected a flowrt OpDef")
    if d.name != key:
        _fail(where, f"ops[{key!r}] holds an OpDef named {d.name!r}")
    if not _OP_NAME_RE.match(d.name):
        _fail(where, "op names are CamelCase: [A-Z][A-Za-z0-9_>]* (a leading '_' for "
                     "internal ops)")
    names = [a.name for a in d.inputs + d.outputs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        _fail(where, f"argument names {sorted(dup)} are used twice")
    for a in d.inputs + d.outputs:
        for ref in (a.type_attr, a.number_attr, a.type_list_attr):
            if ref is not None and ref not in d.attrs:
                _fail(where, f"argument {a.name!r} refers to undeclared attr {ref!r}")
        if a.number_attr is not None and d.attrs[a.number_attr].kind != "int":
            _fail(where, f"argument {a.name!r}: list length attr {a.number_attr!r} must be "
                         "an int attr")
        if a.type_attr is not None and d.attrs[a.type_attr].kind != "type":
            _fail(where, f"argument {a.name!r}: {a.type_attr!r} must be a type attr")
    for name, a in d.attrs.items():
        if not name.isidentifier():
            _fail(where, f"attr name {name!r} is not an identifier")
        if a.kind == "type" and a.has_default and a.allowed and a.default not in a.allowed:
            _fail(where, f"attr {name!r}: default {a.default!r} is not one of its allowed "
                         "types")
        if a.kind == "string" and a.has_default and a.allowed and \
                a.default not in a.allowed:
            _fail(where, f"attr {name!r}: default {a.default!r} is not one of {a.allowed}")
        if a.minimum is not None and a.has_default and isinstance(a.default, int) and \
                a.default < a.minimum:
            _fail(where, f"attr {name!r}: default {a.default} is below its minimum "
                         f"{a.minimum}")
    if d.shape_fn is not None and not callable(d.shape_fn):
        _fail(where, "shape_fn is not callable")
    if not isinstance(d.is_stateful, bool):
        _fail(where, f"is_stateful must be a bool, got {d.is_stateful!r}")


def _api_reachable(name: str) -> str | None:
    """Why ``flowrt.<name>`` would not reach this export (None: it would)."""

    pkg = sys.modules[__name__.split(".")[0]]
    parts = name.split(".")
    if not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        return "is not a dotted Python identifier"
    if len(parts) == 1:
        if name.startswith("__"):
            return None  # operator hooks (``__getitem__``) are looked up, not attributes
        core = vars(pkg).get(name)
        lazy = name in getattr(pkg, "_LAZY_CORE", {}) or name in getattr(pkg, "_PROTO_NAMES", {})
        if lazy or (core is not None and not isinstance(core, types.ModuleType)):
            return "is hidden by flowrt's own attribute of that name"
        return None
    ns = ".".join(parts[:-1])
    if ns not in NAMESPACES:
        return (f"is not reachable as an attribute: {ns!r} is not one of flowrt's API "
                f"namespaces {sorted(NAMESPACES)}")
    return None


def _check_kernel_set(ks: Any, where: list[str], runtime: Any,
                      exempt: dict[str, str] | None = None) -> Report:
    """The checks of :func:`check_kernel_set`; ``where`` (the plugin, if any) starts
    every failure message. Returns the :class:`Report`; raises AssertionError."""

    name = getattr(ks, "name", ks)
    where = [*where, f"kernel set {name!r}"]
    r = Report(f"kernel set {name!r}")
    if not isinstance(ks, KernelSet):
        _fail(where, f"expected a flowrt.op_registry.KernelSet, got {type(ks).__name__}")
    if not isinstance(ks.name, str) or not ks.name:
        _fail(where, "the kernel set needs a non-empty name")
    rt = runtime if runtime is not None else default_runtime()
    known_ops: dict[str, Any] = dict(rt.op_defs)
    known_kernels: dict[tuple[str, str], Any] = dict(rt.kernels)
    known_api: dict[str, Any] = dict(rt.api)

    # op definitions
    for key, d in ks.ops.items():
        w = [*where, f"op {key!r}"]
        _check_opdef(d, key, w)
        other = known_ops.get(key)
        if other is not None and other is not d:
            _fail(w, f"is also defined by plugin {getattr(other, 'plugin', None)!r}; op "
                     "names are global")
    r.ok(f"{len(ks.ops)} op definitions are well formed and not defined elsewhere")

    def op_def(op: str) -> Any:
        return ks.ops.get(op) or known_ops.get(op)

    # kernels
    seen: set[tuple[str, str]] = set()
    for k in ks.kernels:
        w = [*where, f"kernel for op {getattr(k, 'op', k)!r} on "
                     f"{getattr(k, 'device_type', '?')!r}"]
        if not isinstance(k, KernelDef):
            _fail(w, f"expected a flowrt KernelDef, got {type(k).__name__}")
        if op_def(k.op) is None:
            _fail(w, f"no op {k.op!r} is defined by this kernel set or the runtime")
        if not isinstance(k.device_type, str) or (
                k.device_type != "*" and (k.device_type != canonical_type(k.device_type) or
                                          not _TYPE_NAME_RE.match(k.device_type))):
            _fail(w, "device_type must be '*' or a canonical device type name ('CPU', 'GPU')")
        if k.kind not in KERNEL_KINDS:
            _fail(w, f"kind {k.kind!r} is not one of {sorted(KERNEL_KINDS)}")
        if not callable(k.factory):
            _fail(w, "the factory is not callable")
        if not isinstance(k.expensive, bool):
            _fail(w, f"expensive must be a bool, got {k.expensive!r}")
        d = op_def(k.op)
        if k.kind == "const" and (d.inputs or d.is_stateful or len(d.outputs) != 1):
            _fail(w, "a 'const' kernel needs an op with no inputs, one output and no state")
        arg_names = {a.name for a in d.inputs + d.outputs}
        bad = [h for h in k.host_memory if h not in arg_names]
        if bad:
            _fail(w, f"host_memory names {bad}, which are not arguments of {k.op!r} "
                     f"({sorted(arg_names)})")
        key = (k.op, k.device_type)
        if key in seen:
            _fail(w, "registered twice in this kernel set")
        seen.add(key)
        other = known_kernels.get(key)
        if other is not None and other is not k:
            _fail(w, f"plugin {getattr(other, 'plugin', None)!r} registers a kernel for the "
                     "same op and device type")
    r.ok(f"{len(ks.kernels)} kernels refer to defined ops, name a device type and a kind")

    # gradients
    for op, fn in ks.gradients.items():
        w = [*where, f"gradient of op {op!r}"]
        d = op_def(op)
        if d is None:
            _fail(w, f"no op {op!r} is defined by this kernel set or the runtime")
        if fn is None:
            continue
        if not callable(fn):
            _fail(w, f"is {type(fn).__name__}, expected a function fn(op, *grads) or None")
        if not any(a.is_list for a in d.outputs) and _bind_ok(fn, 1 + len(d.outputs)) is False:
            _fail(w, f"must accept (op, {', '.join(['grad'] * len(d.outputs)) or '...'}): "
                     f"one gradient per output of {op!r}")
    r.ok(f"{len(ks.gradients)} gradients refer to known ops and take (op, *grads)")

    # API
    for n, fn in ks.api_names.items():
        w = [*where, f"API name {n!r}"]
        if not isinstance(n, str):
            _fail(w, "API names must be strings")
        why = _api_reachable(n)
        if why:
            _fail(w, why)
        other = known_api.get(n, fn)
        if other is not fn:
            _fail(w, "is already exported by another plugin of the runtime")
    r.ok(f"{len(ks.api_names)} API names are reachable dotted identifiers")

    # shape functions on placeholder inputs
    shapes_run = 0
    nodes: dict[str, Any] = {}
    for key, d in ks.ops.items():
        w = [*where, f"op {key!r}"]
        attrs, why = _trivial_attrs(d)
        if attrs is None:
            r.skip(f"op {key!r}", f"no trivially constructible node ({why})")
            continue
        try:
            nodes[key] = _build_node(d, attrs, unknown_shape(), rt)
        except Exception as e:
            r.skip(f"op {key!r}", f"could not build a node with attrs {attrs}: {_exc(e)}")
            continue
        if d.shape_fn is None:
            continue
        ran = False
        for shape in (unknown_shape(), TensorShape([None, None])):
            what = f"for inputs of shape {shape}"
            try:
                node = nodes[key] if shape.ndims is None else _build_node(d, attrs, shape, rt)
                res = d.shape_fn(node)
            except (ValueError, TypeError):
                continue  # a build-time shape error (TF also rejects some unknown ranks)
            except Exception as e:
                _fail(w, f"shape function raised {_exc(e)} {what} (dtypes "
                         f"{[t.dtype.name for t in nodes[key].inputs]}, attrs {attrs}); "
                         "shape errors must be ValueError, unknown dims must stay unknown")
            _check_shapes_result(res, node, w, what)
            ran = True
        if ran:
            shapes_run += 1
        else:
            r.skip(f"shape function of {key!r}", "raised ValueError/TypeError for both "
                   "unknown-rank and [?, ?] inputs")
    r.ok(f"{shapes_run} shape functions run on placeholder inputs and return one shape "
         "per output")

    # kernel factories
    cache: dict[str, Any] = {}
    compiled = 0
    for k in ks.kernels:
        w = [*where, f"kernel for op {k.op!r} on {k.device_type!r}"]
        if k.op not in nodes and k.op not in ks.ops:  # an op another plugin defines
            attrs, _ = _trivial_attrs(op_def(k.op))
            try:
                nodes[k.op] = _build_node(op_def(k.op), attrs, unknown_shape(), rt) \
                    if attrs is not None else None
            except Exception:  # noqa: BLE001 - the op's own plugin is checked for that
                nodes[k.op] = None
        node = nodes.get(k.op)
        if node is None:
            if k.op not in ks.ops:
                r.skip(f"kernel for {k.op!r}", "no trivially constructible node of its op")
            continue
        dtype = "CPU" if k.device_type == "*" else k.device_type
        dev = _device_for(rt, dtype, cache)
        if dev is None:
            r.skip(f"kernel for {k.op!r} on {k.device_type}",
                   f"no {dtype} device is available here")
            continue
        try:
            fn = k.factory(KernelContext(node, dev, SessionState("flowrt.testing")))
        except errors.OpError as e:
            r.skip(f"kernel for {k.op!r} on {k.device_type}",
                   f"the factory rejected the trivial node: {_exc(e)}")
            continue
        except Exception as e:
            _fail(w, f"the factory raised {_exc(e)} when compiled on {dev.name} for a node "
                     f"with input dtypes {[t.dtype.name for t in node.inputs]} of unknown "
                     f"shape and attrs {dict(node.node_attrs)}")
        if not callable(fn):
            _fail(w, f"the factory returned {type(fn).__name__}, expected the compute callable")
        n = len(node.inputs) + KERNEL_KINDS[k.kind]
        if _bind_ok(fn, n) is False:
            _fail(w, f"the compute callable cannot take {n} positional arguments "
                     f"({k.kind} kernel of a node with {len(node.inputs)} inputs)")
        compiled += 1
    r.ok(f"{compiled} kernel factories return callables taking the node's inputs")
    _run_kernel_set(ks, where, rt, op_def, cache, dict(exempt or {}), r)
    return r


_RUNNABLE = ("plain", "const", "switch")


def _compare_kernels(pairs: list[tuple[Any, Any]], where: list[str], rt: Any,
                     op_def: Callable[[str], Any], cache: dict[str, Any],
                     pre: dict[str, str], r: Report) -> int:
    """Compare each device kernel with its CPU reference (``(kernel, reference)``
    pairs); the number compared. Kernels without a device here, a reference, or a
    sample both compute are listed as skipped."""
    cpu = _device_for(rt, "CPU", cache)
    compared, absent = 0, {}
    for k, ref in pairs:
        if k.op in pre or ref is None or ref is k or op_def(k.op) is None:
            continue
        what = f"kernel for {k.op!r} on {k.device_type}"
        dev = _device_for(rt, k.device_type, cache)
        if dev is None:
            absent[k.device_type] = absent.get(k.device_type, 0) + 1
        elif k.kind not in _RUNNABLE or ref.kind not in _RUNNABLE:
            r.skip(what, f"a {k.kind} kernel needs a step")
        else:
            w = [*where, f"kernel for op {k.op!r} on {k.device_type!r}"]
            n, why = _ck.compare_with_cpu(op_def(k.op), k, ref, dev, cpu, rt, w, _rng(k.op))
            if n:
                compared += 1
            else:
                r.skip(what, why)
    for t, n in sorted(absent.items()):
        r.skip(f"{n} kernels on {t}", f"no {t} device here to compare with the CPU")
    return compared


def _cpu_kernel(ks: Any, rt: Any, op: str) -> Any:
    """The kernel that computes ``op`` on a CPU: the kernel set's own, else the
    runtime's."""
    own = {k.device_type: k for k in ks.kernels if k.op == op}
    return own.get("CPU") or own.get("*") or rt.kernels.get((op, "CPU")) or \
        rt.kernels.get((op, "*"))


def _run_kernel_set(ks: Any, where: list[str], rt: Any, op_def: Callable[[str], Any],
                    cache: dict[str, Any], pre: dict[str, str], r: Report) -> None:
    """Run what the kernel set declares: its ops' CPU kernels on sample inputs, its
    device kernels against the CPU kernels of their ops, its gradients against central
    differences (:mod:`flowrt.tools.conformance_kernels`)."""
    cpu = _device_for(rt, "CPU", cache)
    for op in sorted(pre):
        if op in ks.ops or any(k.op == op for k in ks.kernels) or op in ks.gradients:
            r.skip(f"running op {op!r}", f"exempt: {pre[op]}")
    ran, unrun = 0, 0
    for key, d in ks.ops.items():
        k = _cpu_kernel(ks, rt, key)
        if key in pre:
            continue
        if d.is_stateful or k is None or k.kind not in _RUNNABLE:
            unrun += 1
            continue
        w = [*where, f"kernel for op {key!r} on {k.device_type!r}"]
        n, why, _ = _ck.check_compute(d, k, cpu, rt, w, _rng(key))
        if n:
            ran += 1
        else:
            r.skip(f"running the kernel of {key!r}", why)
    if unrun:
        r.skip(f"running {unrun} ops", "stateful, or without a CPU kernel of kind "
                                       f"{'/'.join(_RUNNABLE)}")
    r.ok(f"{ran} kernels run on sample inputs give the OpDef's output dtypes and the "
         "shape functions' static shapes")

    pairs = [(k, rt.kernels.get((k.op, "*")) if k.device_type == "CPU" else
              _cpu_kernel(ks, rt, k.op)) for k in ks.kernels if k.device_type != "*"]
    n = _compare_kernels(pairs, where, rt, op_def, cache, pre, r)
    r.ok(f"{n} device kernels compute what the CPU kernel of their op computes "
         "(every attr variant on random inputs)")

    checked = 0
    for op, fn in ks.gradients.items():
        d, k = op_def(op), _cpu_kernel(ks, rt, op)
        if fn is None or op in pre:
            continue
        if d is None or d.is_stateful or k is None or k.kind not in _RUNNABLE:
            r.skip(f"gradient of {op!r}", "no CPU kernel of the op to differentiate")
            continue
        why = _ck.check_gradient(d, fn, k, cpu, rt, [*where, f"gradient of op {op!r}"],
                                 _rng(op))
        if why is None:
            checked += 1
        else:
            r.skip(f"gradient of {op!r}", why)
    r.ok(f"{checked} gradients agree with central differences of the CPU kernel")


def check_kernel_set(kernel_set: KernelSet, runtime: Any = None, *,
                     exempt: dict[str, str] | None = None) -> Report:
    """Check a :class:`~flowrt.op_registry.KernelSet`, statically and by running it.

    - every op definition is well formed (CamelCase name, arguments refer to declared
      attrs, defaults are allowed values) and no other plugin of ``runtime`` defines it;
    - every kernel refers to an op of this set or of ``runtime``, names ``"*"`` or a
      canonical device type and a known kind, and does not collide with another
      plugin's kernel;
    - every gradient refers to a known op and accepts ``(op, *grads)``;
    - every API name is a dotted identifier reachable as ``flowrt.<name>`` and not
      exported by another plugin;
    - shape functions run on placeholder inputs of allowed dtypes with unknown shapes
      (no error allowed) and with ``[?, ?]`` shapes (``ValueError`` allowed), returning
      one shape per output;
    - kernel factories, compiled once on a CPU device (or a device of the kernel's
      type) for a trivially constructible node, return a callable that accepts the
      node's inputs, for the set's ops and for ops other plugins define;
    - then runs them (:mod:`flowrt.tools.conformance_kernels`): the CPU kernel of each
      op of the set on sample inputs (several shapes, random values, every usual dtype
      of each type attr, each bool attr flipped) returns arrays of the OpDef's dtypes
      and of the shape function's static shapes; each kernel for another device type
      (for the set's ops or another plugin's) computes what the CPU kernel of its op
      computes, where ``runtime`` has such a device; each gradient function agrees
      with central differences of the op's CPU kernel.

    Ops whose required attrs have no obvious value, kernels no sample fits and
    gradients that cannot be evaluated are listed as skipped in the report, with why.

    :param kernel_set: the object a ``flowrt_kernel_sets`` hook returns
    :param runtime: the runtime that resolves ops, kernels and API names defined
        elsewhere and provides devices (default: :func:`flowrt.default_runtime`)
    :param exempt: ``{op: why}`` for ops the kit must not run on random samples: a
        precondition on their inputs that random values break (``{"ClipByValue":
        "clip_value_min <= clip_value_max"}``), a gradient that is not the derivative
        (a straight-through estimator); the report lists them as skipped, with why
    :returns: a :class:`Report`
    :raises AssertionError: naming the kernel set, the op, kernel or name at fault, and
        the rule it broke
    """
    return _check_kernel_set(kernel_set, [], runtime, exempt)


# ---------------------------------------------------------------------------------------
# graph passes
# ---------------------------------------------------------------------------------------
class _PassCtx:
    def __init__(self, runtime: Any, ir: Any):
        self.runtime = runtime
        self.config = None
        self.fetches = list(ir.fetches)
        self.feeds = list(ir.feeds)
        self.targets = list(ir.targets)


def _check_graph_pass(p: Any, where: list[str], runtime: Any) -> Report:
    """The checks of :func:`check_graph_pass`; ``where`` (the plugin, if any) starts
    every failure message. Returns the :class:`Report`; raises AssertionError."""
    name = getattr(p, "name", p)
    where = [*where, f"graph pass {name!r}{_owner(p)}"]
    r = Report(f"graph pass {name!r}")
    if not isinstance(p, GraphPass):
        _fail(where, f"expected a flowrt.passes.GraphPass, got {type(p).__name__}")
    if not isinstance(p.name, str) or not _PASS_NAME_RE.match(p.name):
        _fail(where, "the name must be a non-empty identifier-like string (letters, digits, "
                     "'_', '.', '-'): sessions switch passes off by name")
    if not callable(p.run) or _bind_ok(p.run, 2) is False:
        _fail(where, "run must be callable as run(graph_ir, ctx)")
    if not isinstance(p.order, int) or isinstance(p.order, bool):
        _fail(where, f"order must be an int, got {p.order!r}")
    if not isinstance(p.enabled_by_default, bool):
        _fail(where, f"enabled_by_default must be a bool, got {p.enabled_by_default!r}")
    r.ok("name, run, order and enabled_by_default")

    rt = runtime
    if rt is None:

        rt = default_runtime()
    if any(o not in rt.op_defs for o in ("Placeholder", "Identity", "Const")):
        r.skip("running the pass", "the runtime has no Placeholder/Identity/Const ops")
        return r

    g = Graph(runtime=rt)
    with g.as_default():
        x = apply_op("Placeholder", name="x", dtype=_dt.float32, shape=TensorShape([3]))
        y = apply_op("Identity", name="y", input=apply_op("Identity", name="y0", input=x))
        c = g.create_op("Const", [], [_dt.float32], name="c",
                        attrs={"value": np.array([1.0, 2.0], np.float32),
                               "dtype": _dt.float32}).outputs[0]
        z = apply_op("Identity", name="z", input=apply_op("Identity", name="z0", input=c))
    ir = extract_step_graph(g, [x], [y, z], [])
    try:
        p.run(ir, _PassCtx(rt, ir))
    except Exception as e:
        _fail(where, f"run() raised {_exc(e)} on a small step graph")
    for n, _ in ir.fetches:
        if n not in ir.nodes:
            _fail(where, f"the pass removed node {n!r}, which produces a fetch")
    for node in ir.nodes.values():
        for src, _ in node.inputs:
            if src not in ir.nodes:
                _fail(where, f"after the pass, node {node.name!r} reads {src!r}, which is "
                             "no longer in the graph")
    cpu = _device_for(rt, "CPU", {})
    for node in ir.nodes.values():
        node.assigned_device = cpu.name
    try:
        ex = Executor(ir, ir.fetches, lambda n: cpu, rt)
        a = np.array([1.0, -1.0, 0.5], np.float32)
        out = ex.run([a], StepContext(1, runtime=rt))
    except Exception as e:
        _fail(where, f"the rewritten step graph no longer runs: {_exc(e)}")
    if not (_same(out[0], a) and _same(out[1], np.array([1.0, 2.0], np.float32))):
        _fail(where, f"the rewritten step graph computes {out}, expected "
                     f"[{a!r}, array([1., 2.])]")
    r.ok("the rewritten graph keeps its fetches and computes the same values")
    return r


def check_graph_pass(graph_pass: GraphPass, runtime: Any = None) -> Report:
    """Check a :class:`~flowrt.passes.GraphPass`.

    Verifies its fields, then runs it on a small step graph (a fed placeholder and a
    constant, each through two Identity nodes) and checks that the fetches survive, no
    node reads a removed node, and the rewritten graph still computes the same values.

    :param graph_pass: the object a ``flowrt_graph_passes`` hook returns
    :param runtime: the runtime whose ops build the small graph (default: the default one)
    :returns: a :class:`Report`
    :raises AssertionError: naming the pass (and plugin) at fault
    """
    return _check_graph_pass(graph_pass, [], runtime)


# ---------------------------------------------------------------------------------------
# plugins
# ---------------------------------------------------------------------------------------
def _resolve_plugin(module_or_name: Any) -> tuple[str, Any]:
    if not isinstance(module_or_name, str):
        return getattr(module_or_name, "__name__", repr(module_or_name)), module_or_name

    for ep in entry_points(group="flowrt"):
        if ep.name == module_or_name:
            try:
                return ep.name, ep.load()
            except Exception as e:
                _fail([f"plugin {ep.name!r}"], f"its entry point {ep.value!r} failed to "
                                               f"load: {_exc(e)}")
    try:
        return module_or_name, importlib.import_module(module_or_name)
    except ImportError as e:
        _fail([f"plugin {module_or_name!r}"], "is neither an entry point of the 'flowrt' "
                                              f"group nor an importable module: {_exc(e)}")


def _plugin_runtime(pname: str, obj: Any, where: list[str]) -> Any:
    """A runtime holding the plugin: the default one when it has ``obj`` registered,
    else a new one with the installed plugins and ``obj`` under ``pname``."""
    rt = default_runtime()
    if rt.pm.get_name(obj) is not None:
        return rt
    try:
        rt = Runtime(plugins={pname: obj})
        for registry in ("device_types", "transports", "op_defs"):
            getattr(rt, registry)
    except Exception as e:
        _fail(where, f"could not build a runtime holding the plugin ({_exc(e)}): pass "
                     "runtime= with one that does")
    if rt.plugins[pname].status != "loaded":
        _fail(where, f"could not register the plugin in a runtime: "
                     f"{rt.plugins[pname].error}")
    return rt


def check_plugin(module_or_name: Any, runtime: Any = None, *, live: bool = True,
                 timeout: float = 60.0, exempt: dict[str, str] | None = None
                 ) -> Report:
    """Check a whole plugin: its hooks, then everything they return.

    The hook functions must be marked with ``@flowrt.hookimpl``, be named after a hook
    of :mod:`flowrt.hookspecs` (a misspelled hook is an error, as pluggy's
    ``check_pending``) and return lists. Each device type, transport, kernel set and
    graph pass returned is checked with :func:`check_device_type`,
    :func:`check_transport`, :func:`check_kernel_set` and :func:`check_graph_pass`; two
    objects of the plugin claiming the same name is an error.

    :param module_or_name: the plugin module or object, its entry-point name in the
        ``flowrt`` group, or an importable module name
    :param runtime: the runtime holding the plugin, for the live device checks and the
        kernel-set and graph-pass checks (default: the default runtime when the plugin
        is registered there, else one with the installed plugins and this one)
    :param live: run the live checks of device types and transports
    :param timeout: seconds each live check may take
    :param exempt: for :func:`check_kernel_set`
    :returns: a :class:`Report` whose ``parts`` are the per-object reports
    :raises AssertionError: naming the plugin and the object at fault
    """
    pname, obj = _resolve_plugin(module_or_name)
    where = [f"plugin {pname!r}"]
    r = Report(f"plugin {pname!r}")
    specs = {n for n in dir(hookspecs) if n.startswith("flowrt_")}
    for attr in dir(obj):
        if attr in specs and callable(getattr(obj, attr)) and \
                not hasattr(getattr(obj, attr), "flowrt_impl"):
            _fail(where, f"{attr} is not marked with @flowrt.hookimpl, so flowrt never "
                         "calls it")
    pm = pluggy.PluginManager("flowrt")
    pm.add_hookspecs(hookspecs)
    try:
        pm.register(obj, name=pname)
        pm.check_pending()
    except pluggy.PluginValidationError as e:
        _fail(where, str(e))
    impls = sorted(h.name for h in pm.get_hookcallers(obj) or [])
    if not impls:
        _fail(where, f"implements none of flowrt's hooks {sorted(specs)}")
    r.ok(f"hooks {impls} are marked, spelled and shaped as in flowrt.hookspecs")

    results: dict[str, list[Any]] = {}
    for hook in impls:
        try:
            out = getattr(pm.hook, hook)()
        except Exception as e:
            _fail(where, f"{hook}() raised {_exc(e)}")
        res = out[0] if out else None
        if res is None:
            results[hook] = []
            continue
        if not isinstance(res, (list, tuple)):
            _fail(where, f"{hook}() returned {type(res).__name__}, expected a list")
        results[hook] = list(res)

    def unique(items: list[Any], attr: str, what: str) -> None:
        names = [getattr(x, attr, None) for x in items]
        dup = sorted({str(n) for n in names if names.count(n) > 1})
        if dup:
            _fail(where, f"returns two {what} named {dup}")

    dts = results.get("flowrt_device_types", [])
    unique(dts, "name", "device types")
    ts = results.get("flowrt_transports", [])
    unique(ts, "scheme", "transports")
    passes = results.get("flowrt_graph_passes", [])
    unique(passes, "name", "graph passes")
    rt = runtime if runtime is not None else _plugin_runtime(pname, obj, where)
    for dt in dts:
        r.parts.append(_check_device_type(dt, where, runtime=rt, live=live,
                                          timeout=timeout))
    for t in ts:
        r.parts.append(_check_transport(t, where, live, timeout))
    for ks in results.get("flowrt_kernel_sets", []):
        r.parts.append(_check_kernel_set(ks, where, rt, exempt))
    for p in passes:
        r.parts.append(_check_graph_pass(p, where, rt))
    return r


# ---------------------------------------------------------------------------------------
# distributed conformance: a small cluster, checked end to end
# ---------------------------------------------------------------------------------------
#: ``start_task(cluster, job, task) -> stop``: start one task of ``cluster`` (a
#: ``{job: [address, ...]}`` dict) so that it serves at its address, and return a
#: callable that stops it again. It may return before the task answers: the suite waits
#: for every task when it creates its first session.
TaskStarter = Callable[[dict[str, list[str]], str, int], Callable[[], None]]

#: the cluster :func:`check_cluster` starts: one parameter server and two workers
CLUSTER_JOBS: dict[str, int] = {"ps": 1, "worker": 2}

_PS, _W0, _W1 = "/job:ps/task:0", "/job:worker/task:0", "/job:worker/task:1"


def cluster_addresses(protocol: str, jobs: dict[str, int] | None = None,
                      runtime: Any = None) -> dict[str, list[str]]:
    """A cluster dict for ``protocol``: unique names for ``inproc``, the transport's
    own ``free_addresses(k)`` where it has one (socket paths ...), else free
    ``127.0.0.1`` ports.

    :param runtime: the runtime whose transport serves ``protocol`` (default: the
        default runtime)"""
    tag = uuid.uuid4().hex[:8]
    jobs = jobs or CLUSTER_JOBS
    if protocol == "inproc":
        return {job: [f"{job}{i}-{tag}" for i in range(n)] for job, n in jobs.items()}
    t = (runtime or default_runtime()).transports.get(protocol)
    addrs = iter(free_addresses(t, sum(jobs.values())) if t is not None else
                 [f"127.0.0.1:{p}" for p in free_ports(sum(jobs.values()))])
    return {job: [next(addrs) for _ in range(n)] for job, n in jobs.items()}


def in_process_task_starter(protocol: str, runtime: Any = None) -> TaskStarter:
    """A :data:`TaskStarter` running each task as a ``flowrt.train.Server`` in this
    process (the only choice for ``inproc``; real sockets for ``grpc`` and ``zmq``),
    with ``runtime``'s transport (default: the default runtime's)."""

    def start(cluster: dict[str, list[str]], job: str, task: int) -> Callable[[], None]:
        return Server(cluster, job, task, protocol=protocol, runtime=runtime).stop

    return start


class ClusterConformance:
    """The distributed conformance checks, run against one live cluster of
    :data:`CLUSTER_JOBS` (``ps`` task 0, ``worker`` tasks 0 and 1) over ``protocol``.

    Sessions use the master of ``worker`` task 0 (the chief) unless a check needs a
    second client. Every check picks fresh variable and container names, so the checks
    may run in any order, any number of times, against one shared cluster. Each check
    method returns a line describing what it verified and raises AssertionError naming
    the protocol and what went wrong.

    :param protocol: the transport scheme (``inproc``, ``grpc``, ``zmq``, ...)
    :param cluster: the cluster's ``{job: [address, ...]}``
    :param op_timeout_ms: ``operation_timeout_in_ms`` of every session, so that a broken
        runtime fails a check instead of hanging it
    :param runtime: the runtime whose transport the sessions use (default: the default
        runtime)
    """

    #: the check methods, in the order :meth:`run_all` runs them
    CHECKS = ("cross_task_step", "between_graph_variables", "containers_and_reset",
              "device_filters", "graph_extension", "dtypes", "large_tensor",
              "cond_across_tasks", "remote_errors", "traced_step", "concurrent_steps")

    def __init__(self, protocol: str, cluster: dict[str, list[str]],
                 op_timeout_ms: int = 60000, runtime: Any = None):
        self.protocol = protocol
        self.cluster = cluster
        self.op_timeout_ms = op_timeout_ms
        self.runtime = runtime

    # -- helpers ------------------------------------------------------------------------
    def target(self, job: str = "worker", task: int = 0) -> str:
        """The session target of one task."""
        return f"{self.protocol}://{self.cluster[job][task]}"

    def graph(self) -> Any:
        """A new graph of the suite's runtime."""
        return tf.Graph() if self.runtime is None else Graph(runtime=self.runtime)

    def reset(self, containers: list[str]) -> None:
        """``Session.reset`` of worker 0's master, through the suite's runtime."""
        if self.runtime is None:
            tf.Session.reset(self.target(), containers)
            return
        scheme, addr = parse_target(self.target())
        scheme, _ = transport_scheme(scheme, "default", self.target())  # grpcs: TLS
        client = self.runtime.transport(scheme).master_client(addr)
        try:
            client.reset(containers)
        finally:
            close = getattr(client, "close", None)
            if callable(close) and scheme != "inproc":
                close()

    def config(self, **kw: Any) -> Any:

        return ConfigProto(operation_timeout_in_ms=self.op_timeout_ms, **kw)

    def session(self, graph: Any, task: int = 0, **config: Any) -> Any:
        """A session on worker ``task``'s master."""

        return Session(self.target("worker", task), graph=graph, config=self.config(**config))

    def _fail(self, what: str, message: str) -> NoReturn:
        _fail([f"cluster over {self.protocol!r}", what], message)

    def _same(self, what: str, got: Any, want: Any) -> None:
        got_a, want_a = np.asarray(got), np.asarray(want)
        if got_a.dtype != want_a.dtype or got_a.shape != want_a.shape or \
                not (np.array_equal(got_a, want_a) if got_a.dtype.kind in "OSUb?"
                     else np.allclose(got_a, want_a, rtol=1e-6, atol=0)):
            self._fail(what, f"got {got_a!r} ({got_a.dtype}, {got_a.shape}), expected "
                             f"{want_a!r} ({want_a.dtype}, {want_a.shape})")

    def _expect_error(self, what: str, cls: type, fn: Callable[[], Any],
                      *needles: str) -> BaseException:
        try:
            fn()
        except cls as e:
            msg = getattr(e, "message", str(e))
            for n in needles:
                if n not in msg:
                    self._fail(what, f"{cls.__name__} did not mention {n!r}: {msg!r}")
            return e
        except Exception as e:
            self._fail(what, f"expected flowrt.errors.{cls.__name__}, got {_exc(e)}")
        self._fail(what, f"expected flowrt.errors.{cls.__name__}; nothing was raised")

    # -- checks -------------------------------------------------------------------------
    def cross_task_step(self) -> str:
        """A step over three tasks: a feed consumed on the ps, fetches from every task."""

        g = self.graph()
        with g.as_default():
            with tf.device(_PS):
                x = tf.placeholder(tf.float32, [None, 3], name="x")
                a = tf.matmul(x, tf.constant(np.eye(3, dtype=np.float32) * 2))
            with tf.device(_W1):
                b = tf.reduce_sum(a, axis=1) + 1.0
            with tf.device(_W0):
                c = b * tf.reduce_max(a)
        xv = np.arange(6, dtype=np.float32).reshape(2, 3)
        with self.session(g) as s:
            for k in range(3):  # the compiled step is reused
                ra, rb, rc = s.run([a, b, c], {x: xv + k})
                ea = (xv + k) * 2
                self._same("cross-task step", ra, ea)
                self._same("cross-task step", rb, ea.sum(1) + 1)
                self._same("cross-task step", rc, (ea.sum(1) + 1) * ea.max())
        return "a step over ps, worker 0 and worker 1: feed on the ps, fetches from each"

    def between_graph_variables(self) -> str:
        """Two clients build their own graphs; the same variable name on the ps is one
        variable."""

        name = f"between_{uuid.uuid4().hex[:8]}"

        def build() -> tuple[Any, Any, Any, Any]:
            g = self.graph()
            with g.as_default():
                with tf.device(_PS):
                    v = tf.get_variable(name, initializer=tf.constant([1.0, 2.0]))
                with tf.device(_W0):
                    inc = tf.assign_add(v, [1.0, 10.0])
                init = v.initializer
            return g, v, inc, init

        g1, v1, inc1, init1 = build()
        g2, v2, inc2, _ = build()
        with self.session(g1, 0) as s1, self.session(g2, 1) as s2:
            s1.run(init1)
            s1.run(inc1)
            self._same("between-graph variables", s2.run(v2), np.float32([2, 12]))
            s2.run(inc2)
            self._same("between-graph variables", s1.run(v1), np.float32([3, 22]))
        return "a variable on the ps is shared by name between two clients' graphs"

    def containers_and_reset(self) -> str:
        """``tf.container`` separates variables; ``Session.reset`` clears one container
        and leaves the others."""

        tag = uuid.uuid4().hex[:8]
        g = self.graph()
        with g.as_default(), tf.device(_PS):
            with tf.container(f"a_{tag}"):
                va = tf.Variable(5.0, name="cv")
            with tf.container(f"b_{tag}"):
                vb = tf.Variable(7.0, name="cv")
        with self.session(g) as s:
            s.run([va.initializer, vb.initializer])
            self._same("containers", s.run([va, vb]), np.float32([5, 7]))
            s.run(va.assign(6.0))
            self._same("containers", s.run(vb), np.float32(7))
        self.reset([f"a_{tag}"])
        with self.session(g, 1) as s:
            self._expect_error("Session.reset", tf.errors.FailedPreconditionError,
                               lambda: s.run(va), "cv")
            self._same("Session.reset", s.run(vb), np.float32(7))
        return "containers separate same-named variables; Session.reset clears one"

    def device_filters(self) -> str:
        """``device_filters`` keeps a session's ops on the tasks it names."""

        g = self.graph()
        with g.as_default():
            x = tf.placeholder(tf.float32, [2])
            y = tf.square(x) + 1.0
            with tf.device(_PS):
                z = tf.identity(x)
        md = tf.RunMetadata()
        with self.session(g, 0, device_filters=[_W1]) as s:
            self._same("device_filters", s.run(y, {x: [1, 2]},
                                               options=tf.RunOptions(trace_level=3),
                                               run_metadata=md), np.float32([2, 5]))
            devs = {d.device for d in md.step_stats.dev_stats}
            if not devs or any("/job:worker/replica:0/task:1/" not in d for d in devs):
                self._fail("device_filters", f"ops ran on {sorted(devs)}, expected only "
                                             "/job:worker/task:1")
            self._expect_error("device_filters", tf.errors.InvalidArgumentError,
                               lambda: s.run(z, {x: [1, 2]}), "job:ps")
        return "device_filters place every op on the filtered task; others are refused"

    def graph_extension(self) -> str:
        """Nodes added after the first run (on other tasks) run in the same session."""

        g = self.graph()
        with g.as_default(), tf.device(_PS):
            a = tf.constant(2.0)
        with self.session(g) as s:
            self._same("graph extension", s.run(a), np.float32(2))
            with g.as_default():
                with tf.device(_W1):
                    p = tf.placeholder(tf.float32, [])
                    b = a * p
                with tf.device(_W0):
                    c = b + a
            self._same("graph extension", s.run([b, c], {p: 5.0}), np.float32([10, 12]))
            self._same("graph extension", s.run(a), np.float32(2))
        return "the graph grows after the first run; new nodes on other tasks run"

    def dtypes(self) -> str:
        """string, bool, int64 and 0-size tensors cross tasks (and come back)."""

        g = self.graph()
        sv = np.array([b"ab", b"", "\u00e9\u00e8".encode(), b"\x00\xff"], dtype=object)
        with g.as_default():
            with tf.device(_PS):
                s_in = tf.placeholder(tf.string, [None])
                b_in = tf.placeholder(tf.bool, [None])
                i = tf.constant([2 ** 40, -3, 0], tf.int64)
                z = tf.zeros([0, 3], tf.float32)
                zi = tf.zeros([4, 0], tf.int32)
            with tf.device(_W1):
                s2 = tf.identity(s_in)
                b2 = tf.logical_not(b_in)
                i2 = i * 2
                z2 = z * 2.0
                zi2 = tf.identity(zi)
        with self.session(g) as s:
            got = s.run([s2, b2, i2, z2, zi2], {s_in: sv, b_in: [True, False]})
        self._same("string tensor", got[0], sv)
        self._same("bool tensor", got[1], np.array([False, True]))
        self._same("int64 tensor", got[2], np.array([2 ** 41, -6, 0], np.int64))
        self._same("0-size tensor", got[3], np.zeros([0, 3], np.float32))
        self._same("0-size tensor", got[4], np.zeros([4, 0], np.int32))
        return "string, bool, int64 and 0-size tensors cross tasks"

    def large_tensor(self) -> str:
        """A 32 MiB tensor fed to the ps, moved to a worker and fetched."""

        n = 8 << 20  # float32: 32 MiB
        g = self.graph()
        with g.as_default():
            with tf.device(_PS):
                x = tf.placeholder(tf.float32, [n])
                y = x + 1.0
            with tf.device(_W1):
                z = y * 2.0
        xv = np.arange(n, dtype=np.float32)
        with self.session(g) as s:
            r = s.run(z, {x: xv})
        if r.shape != (n,) or not np.array_equal(r, (xv + 1.0) * 2.0):
            self._fail("32 MiB tensor", "the result differs from numpy's")
        return "a 32 MiB tensor crosses tasks intact"

    def cond_across_tasks(self) -> str:
        """A cond whose branches sit on two tasks: the untaken side's dead tensors
        cross tasks."""

        g = self.graph()
        with g.as_default():
            with tf.device(_W0):
                pred = tf.placeholder(tf.bool, [])
                x = tf.placeholder(tf.float32, [2])

            def on_ps() -> Any:
                with tf.device(_PS):
                    return x * 10.0

            def on_w1() -> Any:
                with tf.device(_W1):
                    return x - 1.0

            with tf.device(_W0):
                r = tf.cond(pred, on_ps, on_w1) + 0.5
        xv = np.float32([1, 2])
        with self.session(g) as s:
            for _ in range(2):
                self._same("cond across tasks", s.run(r, {pred: True, x: xv}), xv * 10 + .5)
                self._same("cond across tasks", s.run(r, {pred: False, x: xv}), xv - .5)
        return "a cond with one branch on the ps and one on worker 1 takes either"

    def remote_errors(self) -> str:
        """Errors raised on another task arrive with their class and the node's name;
        the session keeps working."""

        vname = f"uninit_{uuid.uuid4().hex[:8]}"
        g = self.graph()
        with g.as_default():
            with tf.device(_PS):
                x = tf.placeholder(tf.float32, [None])
                checked = tf.check_numerics(x, "bad value", name="remote_check")
                v = tf.Variable(1.0, name=vname)
            with tf.device(_W0):
                y = checked + 1.0
                w = v + 1.0
        with self.session(g) as s:
            self._expect_error("remote error", tf.errors.InvalidArgumentError,
                               lambda: s.run(y, {x: [1.0, np.nan]}), "remote_check")
            self._expect_error("remote error", tf.errors.FailedPreconditionError,
                               lambda: s.run(w), vname)
            self._same("after a remote error", s.run(y, {x: [1.0]}), np.float32([2]))
        return "remote InvalidArgument and FailedPrecondition errors name their node"

    def traced_step(self) -> str:
        """A FULL_TRACE step's step_stats have a device of every task it used."""

        g = self.graph()
        with g.as_default():
            with tf.device(_PS):
                x = tf.placeholder(tf.float32, [2])
                a = tf.multiply(x, 3.0, name="on_ps")
            with tf.device(_W1):
                b = tf.negative(a, name="on_w1")
            with tf.device(_W0):
                c = tf.add(a, b, name="on_w0")
        md = tf.RunMetadata()
        with self.session(g) as s:
            self._same("traced step", s.run(
                c, {x: [1.0, 2.0]}, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                run_metadata=md), np.float32([0, 0]))
        devs = {d.device: {n.node_name for n in d.node_stats}
                for d in md.step_stats.dev_stats}
        for task, node in (("/job:ps/replica:0/task:0", "on_ps"),
                           ("/job:worker/replica:0/task:1", "on_w1"),
                           ("/job:worker/replica:0/task:0", "on_w0")):
            if not any(d.startswith(task + "/") and node in names
                       for d, names in devs.items()):
                self._fail("traced step", f"no stats of node {node} on a device of {task}:"
                                          f" {sorted(devs)}")
        return "a traced step reports each task's devices and nodes"

    def concurrent_steps(self, threads: int = 8, steps: int = 15) -> str:
        """Steps from several threads at once share one session and stay correct."""

        g = self.graph()
        with g.as_default():
            with tf.device(_PS):
                x = tf.placeholder(tf.float32, [4])
                a = x * 2.0
            with tf.device(_W1):
                b = a + x
        failures: list[str] = []
        with self.session(g) as s:
            def work(k: int) -> None:
                try:
                    for j in range(steps):
                        xv = np.full(4, k * 1000 + j, np.float32)
                        r = s.run(b, {x: xv})
                        if not np.array_equal(r, xv * 3):
                            failures.append(f"thread {k} step {j}: {r!r}")
                except Exception as e:  # noqa: BLE001 - reported below
                    failures.append(f"thread {k}: {_exc(e)}")

            ths = [threading.Thread(target=work, args=(k,), daemon=True)
                   for k in range(threads)]
            for t in ths:
                t.start()
            for t in ths:
                t.join(self.op_timeout_ms / 1000.0)
            if any(t.is_alive() for t in ths):
                self._fail("concurrent steps", "a thread's steps did not finish in time")
        if failures:
            self._fail("concurrent steps", "; ".join(failures[:3]))
        return f"{threads} threads x {steps} cross-task steps at once"

    def run_all(self) -> Report:
        """Run every check of :attr:`CHECKS`."""
        r = Report(f"cluster over {self.protocol!r}")
        for name in self.CHECKS:
            r.ok(getattr(self, name)())
        return r


def check_cluster(protocol: str, start_task: TaskStarter | None = None, *,
                  checks: Sequence[str] | None = None, timeout: float = 300.0,
                  runtime: Any = None) -> Report:
    """Start a cluster of :data:`CLUSTER_JOBS` over ``protocol`` and run the
    distributed conformance checks of :class:`ClusterConformance` against it.

    Checked: steps across three tasks (values against numpy, feeds consumed on the ps,
    fetches from every task), variables shared by name between two clients
    (between-graph replication), containers and ``Session.reset``, ``device_filters``,
    growing the graph after the first run, string, bool, int64 and 0-size tensors, a
    32 MiB tensor, a cond whose branches sit on two tasks, errors from another task
    arriving with their class and node name, traced steps, and steps from 8 threads.

    :param protocol: the transport scheme
    :param start_task: how to start each task (default: in this process,
        :func:`in_process_task_starter`); pass one that starts ``flowrt server``
        processes to test across processes
    :param checks: run only these checks (names from ``ClusterConformance.CHECKS``)
    :param timeout: seconds the whole run may take
    :param runtime: the runtime whose transport serves ``protocol``, for the default
        in-process tasks and the sessions (default: the default runtime)
    :returns: a :class:`Report`
    :raises AssertionError: naming the protocol and the check that failed
    """
    cluster = cluster_addresses(protocol, runtime=runtime)
    starter = start_task or in_process_task_starter(protocol, runtime)
    stops: list[Callable[[], None]] = []
    try:
        tasks = [(job, i) for job, addrs in cluster.items() for i in range(len(addrs))]
        errs: list[BaseException] = []

        def start(job: str, i: int) -> None:
            try:
                stops.append(starter(cluster, job, i))
            except BaseException as e:  # noqa: BLE001 - raised below
                errs.append(e)

        ths = [threading.Thread(target=start, args=t, daemon=True) for t in tasks]
        for t in ths:
            t.start()
        for t in ths:
            t.join(timeout)
        if errs:
            raise errs[0]
        if len(stops) != len(tasks):
            _fail([f"cluster over {protocol!r}"], f"the tasks did not start within "
                                                  f"{timeout:g} s")
        conf = ClusterConformance(protocol, cluster, runtime=runtime)
        names = list(checks or ClusterConformance.CHECKS)

        def run() -> str:
            rep = Report(f"cluster over {protocol!r}")
            for n in names:
                rep.ok(getattr(conf, n)())
            box.append(rep)
            return "done"

        box: list[Report] = []
        _with_timeout(run, timeout, [f"cluster over {protocol!r}"], "the conformance run")
        return box[0]
    finally:
        for stop in reversed(stops):
            try:
                stop()
            except Exception:  # noqa: BLE001 - stopping is best effort
                pass


def run_distributed_conformance(protocol: str, start_task: TaskStarter | None = None, *,
                                checks: Sequence[str] | None = None,
                                timeout: float = 300.0) -> Report:
    """The same as :func:`check_cluster` (docs/distributed.md describes both)."""
    return check_cluster(protocol, start_task, checks=checks, timeout=timeout)


class ServerProcess:
    """One task of a cluster served by a ``flowrt server`` child process.

    The cluster is written to a JSON file (``--cluster``) or, with ``use_env=True``,
    passed in the ``FLOWRT_CONFIG`` environment variable. The constructor returns once
    the process prints that it is serving (or raises, with its output, when it exits or
    takes longer than ``timeout`` seconds). Every wait is bounded; :meth:`stop` and
    :meth:`kill` act on this process's pid only.

    :param cluster: ``{job: [address, ...]}``
    :param job: the task's job
    :param task: the task's index
    :param protocol: the transport scheme
    :param health_check_period: ``--health-check-period`` (seconds)
    :param use_env: describe the cluster and the task in ``FLOWRT_CONFIG`` instead of
        ``--cluster``/``--job``/``--task``
    :param directory: where to write the cluster file (default: a temporary directory)
    :param timeout: seconds to wait for the server to come up
    :param wait: wait for it here (else call :meth:`wait_ready`)
    :param extra_args: more ``flowrt server`` options, e.g. ``["--max-message-bytes",
        "1048576"]``
    """

    def __init__(self, cluster: dict[str, list[str]], job: str, task: int,
                 protocol: str = "grpc", *, health_check_period: float | None = None,
                 use_env: bool = False, directory: str | None = None,
                 timeout: float = 30.0, wait: bool = True,
                 extra_args: Sequence[str] = ()):
        """Start ``flowrt server`` for the task as a child process, whose output a
        thread collects, and with ``wait`` wait until it serves (see the class).

        :raises AssertionError: with ``wait``, when the server exits first or does not
            come up within ``timeout`` seconds.
        """

        self.cluster, self.job, self.task, self.protocol = cluster, job, task, protocol
        self.address = cluster[job][task]
        self.lines: list[str] = []
        self._ready = threading.Event()
        env = dict(os.environ)
        cmd = [sys.executable, "-m", "flowrt.tools.cli", "server", "--protocol", protocol]
        if use_env:
            env["FLOWRT_CONFIG"] = json.dumps({"cluster": cluster,
                                               "task": {"type": job, "index": task}})
        else:
            d = directory or tempfile.mkdtemp(prefix="flowrt-cluster-")
            path = os.path.join(d, f"cluster-{job}-{task}-{uuid.uuid4().hex[:6]}.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(cluster, f)
            cmd += ["--cluster", path, "--job", job, "--task", str(task)]
        if health_check_period is not None:
            cmd += ["--health-check-period", str(health_check_period)]
        cmd += list(extra_args)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, text=True)
        self.pid = self.proc.pid
        self._reader = threading.Thread(target=self._read, daemon=True,
                                        name=f"flowrt-server-{job}-{task}-output")
        self._reader.start()
        if wait:
            self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 30.0) -> "ServerProcess":
        """Wait until the server says it is serving; AssertionError (with its output)
        when it exits first or ``timeout`` seconds pass."""
        where = f"flowrt server /job:{self.job}/task:{self.task} at {self.address}"
        if not self._ready.wait(timeout):
            self.kill()
            raise AssertionError(f"{where} did not start within {timeout:g} s: "
                                 f"{self.output!r}")
        if not self.serving_line():
            self.wait(5.0)
            raise AssertionError(f"{where} exited with {self.proc.returncode}: "
                                 f"{self.output!r}")
        return self

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if " serving " in line:
                self._ready.set()
        self._ready.set()  # it exited

    def serving_line(self) -> str | None:
        """The line in which the server said it is serving, if it did."""
        return next((ln for ln in self.lines if " serving " in ln), None)

    @property
    def output(self) -> str:
        """Everything the process printed so far."""
        return "\n".join(self.lines)

    @property
    def target(self) -> str:
        return f"{self.protocol}://{self.address}"

    def wait(self, timeout: float = 10.0) -> int | None:
        """The exit status, or None if the process is still running after ``timeout``."""

        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reader.join(2.0)
        return rc

    def terminate(self, timeout: float = 10.0) -> int | None:
        """Send SIGTERM and wait (bounded) for the exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.wait(timeout)

    def kill(self) -> None:
        """SIGKILL the process (no clean-up on its side) and reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait(10.0)

    def stop(self) -> None:
        """Terminate, then kill if it does not exit within a few seconds."""
        if self.terminate(5.0) is None:
            self.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def subprocess_task_starter(protocol: str, **kwargs: Any) -> TaskStarter:
    """A :data:`TaskStarter` running each task as a ``flowrt server`` child process
    (:class:`ServerProcess`; ``kwargs`` go to it)."""

    def start(cluster: dict[str, list[str]], job: str, task: int) -> Callable[[], None]:
        return ServerProcess(cluster, job, task, protocol, **kwargs).stop

    return start


def start_server_processes(cluster: dict[str, list[str]], protocol: str = "grpc",
                           timeout: float = 30.0, **kwargs: Any) -> list[ServerProcess]:
    """Start every task of ``cluster`` as a :class:`ServerProcess` at once and wait
    until all serve; on failure the ones started are stopped."""
    procs = [ServerProcess(cluster, job, i, protocol, wait=False, **kwargs)
             for job, addrs in cluster.items() for i in range(len(addrs))]
    try:
        for p in procs:
            p.wait_ready(timeout)
    except BaseException:
        for p in procs:
            p.stop()
        raise
    return procs
