"""The master and worker service contracts (flowrt.plugin.services): every
implementation has each Protocol method with exactly the Protocol's signature, and is
an instance of the (runtime-checkable) Protocol."""
from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Any

import pytest

import flowrt as tf
from flowrt.distributed.rpc import MasterClient, RemoteMasterSession, WorkerClient
from flowrt.framework.session import _master_for
from flowrt.plugin.services import (MasterService, SessionService, WorkerService,
                                     WorkerStatus)
from flowrt.plugins.transports.inproc import InProcTransport, _InProcWorkerRef
from flowrt.service.master import Master, MasterSession
from flowrt.service.worker import Worker


def _methods(proto: type) -> dict[str, Any]:
    """The Protocol's methods (its properties and data members are checked by
    isinstance)."""
    out = {}
    for name, value in vars(proto).items():
        if name.startswith("_") or not inspect.isfunction(value):
            continue
        out[name] = value
    return out


def _shape(fn: Any) -> list[tuple[str, Any, Any]]:
    """A signature without its annotations: each parameter's name, kind and default."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


WORKERS = [Worker, WorkerClient, _InProcWorkerRef]
MASTERS = [Master, MasterClient]
SESSIONS = [MasterSession, RemoteMasterSession]


@pytest.mark.parametrize("proto,impls", [(WorkerService, WORKERS),
                                         (MasterService, MASTERS),
                                         (SessionService, SESSIONS)],
                         ids=["worker", "master", "session"])
def test_every_protocol_method_has_the_same_signature(proto: type, impls: list[type]
                                                      ) -> None:
    methods = _methods(proto)
    assert methods, proto
    for impl in impls:
        for name, fn in methods.items():
            mine = getattr(impl, name, None)
            assert mine is not None, f"{impl.__name__} has no {name}"
            assert _shape(mine) == _shape(fn), \
                f"{impl.__name__}.{name}{inspect.signature(mine)} differs from " \
                f"{proto.__name__}.{name}{inspect.signature(fn)}"


def test_devices_is_a_property_everywhere() -> None:
    for impl in WORKERS:
        assert isinstance(inspect.getattr_static(impl, "devices"), property), impl


class _Scheme:
    """A message transport that is never reached: clients only need its scheme, and
    a channel for ``cancellable``."""

    scheme = "test"

    def connect(self, address: str) -> Any:
        return SimpleNamespace(cancellable=True, close=lambda: None)


@pytest.fixture
def objects() -> dict[str, Any]:
    rt = tf.Runtime()
    transport = rt.transport("inproc")
    master = Master.in_process(rt)
    client = WorkerClient(_Scheme(), "127.0.0.1:1")
    client._devices = []  # isinstance reads `devices`: no call to a server
    ref = transport.worker_client("contracts")
    ref._devices = []
    srv = transport.start_server("contracts-m", master, master.local_worker)
    try:
        yield {"rt": rt, "transport": transport, "master": master,
               "worker": master.local_worker, "client": client, "ref": ref,
               "master_client": MasterClient(_Scheme(), "127.0.0.1:1"),
               "inproc_master": transport.master_client("contracts-m")}
    finally:
        srv.stop()


def test_implementations_are_instances_of_the_protocols(objects: dict[str, Any]) -> None:
    for key in ("worker", "client", "ref"):
        assert isinstance(objects[key], WorkerService), key
    for key in ("master", "master_client", "inproc_master"):
        assert isinstance(objects[key], MasterService), key
    assert not isinstance(objects["worker"], MasterService)
    assert not isinstance(objects["master"], WorkerService)


def test_inproc_master_reference_is_the_master(objects: dict[str, Any]) -> None:
    assert objects["inproc_master"] is objects["master"]
    assert isinstance(objects["inproc_master"], Master)


def test_get_status_has_one_type(objects: dict[str, Any]) -> None:
    w = objects["worker"]
    st = w.get_status()
    assert isinstance(st, WorkerStatus)
    assert (st.job, st.task, st.incarnation) == (w.job, w.task, w.incarnation)
    assert st.devices == w.devices
    # the in-process reference to a served task answers the same type
    t: InProcTransport = objects["transport"]
    srv = t.start_server("contracts-w", None, w)
    try:
        ref = t.worker_client("contracts-w")
        assert isinstance(ref, WorkerService)
        rst = ref.get_status(timeout=1.0)
        assert isinstance(rst, WorkerStatus) and rst == st
        assert (ref.job, ref.task, ref.incarnation) == (w.job, w.task, w.incarnation)
        assert ref.devices == w.devices
    finally:
        srv.stop()
    with pytest.raises(tf.errors.UnavailableError):
        ref.get_status()


def test_session_with_no_target_uses_a_private_in_process_master() -> None:
    rt = tf.Runtime()
    a = _master_for(rt, "", None)
    b = _master_for(rt, "", None)
    assert isinstance(a, Master) and isinstance(a, MasterService)
    assert a is not b and a.local_worker is not b.local_worker
    assert a.runtime is rt and isinstance(a.local_worker, Worker)
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [3])
        y = tf.identity(x)
        with tf.Session() as sess:
            assert isinstance(sess._master, Master)
            import numpy as np

            v = np.arange(3, dtype=np.float32)
            assert sess.run(y, {x: v}).tolist() == [0.0, 1.0, 2.0]
    assert g is not None


def test_no_target_goes_through_the_inproc_transport(monkeypatch: pytest.MonkeyPatch
                                                     ) -> None:
    """``Session("")`` asks the runtime's ``inproc`` transport for its master, as every
    other target asks its scheme's transport: one path (issue 15, item 3)."""
    rt = tf.Runtime()
    inproc = rt.transport("inproc")
    calls: list[tuple[str, Any]] = []
    real = inproc.master_client

    def spy(address: str, config: Any = None) -> Any:
        calls.append((address, config))
        return real(address, config=config)

    monkeypatch.setattr(inproc, "master_client", spy)
    cfg = tf.ConfigProto(device_count={"CPU": 2})
    m = _master_for(rt, "", cfg)
    assert calls == [("", cfg)] and m.runtime is rt
    assert len([d for d in m.local_worker.devices if d.device_type == "CPU"]) == 2
    named = _master_for(rt, "inproc://contracts-test", None)
    assert calls[-1] == ("contracts-test", None) and named is not m
    assert named is _master_for(rt, "inproc://contracts-test", None)


def test_no_target_without_the_inproc_transport_names_it() -> None:
    rt = tf.Runtime(block=["inproc"])
    with pytest.raises(tf.errors.NotFoundError, match="No transport for scheme 'inproc'"):
        _master_for(rt, "", None)
