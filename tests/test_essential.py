"""The core/plugin boundary: the core's essential kernel set (never blocked),
``GraphPass.local_only``, and feeds/fetches of device arrays through device-type hooks."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import flowrt as tf
from flowrt import testing as ft
from flowrt.device import DeviceType
from flowrt.graph import apply_op
from flowrt.passes import GraphPass
from flowrt.plugins.devices import cuda as cuda_dev
from flowrt.runtime import ESSENTIAL_PLUGINS, PluginError, Runtime

ESSENTIAL = {"_Send", "_Recv", "Const", "Identity", "NoOp", "Placeholder"}


# -- the essential kernel set ---------------------------------------------------------------
def test_the_core_defines_the_essential_ops_and_standard_does_not() -> None:
    from flowrt.engine import essential
    from flowrt.plugins.kernels.standard import ks as standard_ks

    assert set(essential.ESSENTIAL_OPS) == ESSENTIAL
    assert not ESSENTIAL & set(standard_ks.ops)
    assert not {k.op for k in standard_ks.kernels} & ESSENTIAL
    rt = tf.default_runtime()
    for op in ESSENTIAL:
        assert rt.op_defs[op].plugin == "essential", op
        assert rt.kernels[(op, "*")].plugin == "essential", op
    info = rt.plugins["essential"]
    assert info.builtin and info.status == "loaded"
    assert set(info.provides["ops"]) == ESSENTIAL
    assert list(rt.plugins)[0] == "essential"  # registered before every other plugin
    assert ESSENTIAL_PLUGINS == {"essential": "flowrt.engine.essential"}


def test_kernel_kinds_of_the_essential_ops_are_unchanged() -> None:
    ks = tf.default_runtime().kernels
    kinds = {op: (ks[(op, "*")].kind, ks[(op, "*")].all_devices) for op in ESSENTIAL}
    assert kinds == {"_Send": ("step", True), "_Recv": ("async", True),
                     "Const": ("const", True), "NoOp": ("plain", True),
                     "Identity": ("plain", False), "Placeholder": ("plain", False)}


def test_blocking_standard_still_runs_feed_identity_fetch() -> None:
    rt = Runtime(block=["standard"], autoload=False)
    assert rt.plugins["standard"].status == "blocked"
    assert ESSENTIAL <= set(rt.op_defs) and "AddV2" not in rt.op_defs
    g = tf.Graph(runtime=rt)
    with g.as_default():
        x = apply_op("Placeholder", dtype=tf.float32, shape=tf.TensorShape([3]), name="x")
        y = apply_op("Identity", input=x, name="y")
        c = apply_op("Const", value=np.int64(7), dtype=tf.int64, name="c")
        n = apply_op("NoOp", name="n")
    with tf.Session(graph=g) as sess:
        out, seven, none = sess.run([y, c, n], {x: [1, 2, 3]})
        assert out.tolist() == [1.0, 2.0, 3.0] and seven == 7 and none is None
        with pytest.raises(tf.errors.InvalidArgumentError, match="must feed a value"):
            sess.run(y)


def test_blocking_standard_still_runs_a_two_device_send_recv_step() -> None:
    rt = Runtime(block=["standard"], autoload=False)
    g = tf.Graph(runtime=rt)
    with g.as_default():
        x = apply_op("Placeholder", dtype=tf.float64, shape=tf.TensorShape([2]), name="x")
        with tf.device("/device:CPU:1"):
            y = apply_op("Identity", input=x, name="y")
            anchor = apply_op("NoOp", name="anchor")
        with tf.control_dependencies([anchor]):  # a control edge across devices too
            z = apply_op("Identity", input=y, name="z")
    cfg = tf.ConfigProto(device_count={"CPU": 2})
    meta = tf.RunMetadata()
    with tf.Session(graph=g, config=cfg) as sess:
        out = sess.run(z, {x: [4.0, 5.0]},
                       options=tf.RunOptions(output_partition_graphs=True),
                       run_metadata=meta)
        assert out.tolist() == [4.0, 5.0]
        where = sess.placement(z, [x])
        assert where["y"].endswith("CPU:1") and where["z"].endswith("CPU:0")
    ops = {n.op for pg in meta.partition_graphs for n in pg.node}
    assert {"_Send", "_Recv"} <= ops and len(meta.partition_graphs) == 2


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_blocking_the_essential_set_is_refused(how: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    if how == "argument":
        make = lambda: Runtime(block=["essential"])  # noqa: E731
        where = "Runtime(block=...)"
    else:
        monkeypatch.setenv("FLOWRT_BLOCK_PLUGINS", "zmq, essential")
        make = Runtime
        where = "FLOWRT_BLOCK_PLUGINS"
    with pytest.raises(PluginError, match="'essential' cannot be blocked") as ei:
        make()
    assert where in str(ei.value) and "_Send" in str(ei.value) and "'standard'" in str(ei.value)


def test_a_plugin_cannot_redefine_an_essential_op_or_take_its_name() -> None:
    from flowrt.op_registry import KernelSet, OpDef

    ks = KernelSet("mine")
    ks.op(OpDef("NoOp"))
    rt = Runtime(autoload=False, plugins={"mine": SimpleNamespace(
        flowrt_kernel_sets=tf.hookimpl(lambda: [ks]))})
    with pytest.raises(PluginError, match="op 'NoOp' is defined by two plugins: "
                                          "'essential' and 'mine'"):
        rt.op_defs
    with pytest.raises(PluginError, match="two plugins are named 'essential'"):
        Runtime(autoload=False, plugins={"essential": SimpleNamespace()}).pm


def test_the_gpu_kernel_set_still_registers_gpu_kernels_for_essential_ops() -> None:
    for rt in (tf.default_runtime(), Runtime(block=["standard"], autoload=False)):
        if "GPU" not in rt.device_types:  # pragma: no cover - cuda plugins blocked
            pytest.skip("no GPU device type")
        for op in ("Identity", "Const", "Placeholder"):
            k = rt.kernels.get((op, "GPU"))
            assert k is not None and k.plugin == "cuda_kernels", op
        assert "GPU" not in rt.kernel_device_types("Identity", {"T": tf.string})


# -- GraphPass.local_only ---------------------------------------------------------------------
def _probe_runtime(seen: list[str]) -> Runtime:
    def recorder(tag: str) -> Any:
        return lambda ir, ctx: seen.append(tag)

    plugin = SimpleNamespace(flowrt_graph_passes=tf.hookimpl(lambda: [
        GraphPass("probe_anywhere", recorder("anywhere"), order=300),
        GraphPass("probe_local", recorder("local"), order=301, local_only=True)]))
    return Runtime(autoload=False, plugins={"probe": plugin})


def test_standard_fusion_says_it_is_local_only() -> None:
    by_name = {p.name: p for p in tf.default_runtime().graph_passes}
    assert by_name["elementwise_fusion"].local_only
    assert not any(by_name[n].local_only for n in
                   ("constant_folding", "common_subgraph_elimination", "model_pruning"))
    assert GraphPass("x", lambda ir, ctx: None).local_only is False


def test_a_local_only_pass_runs_in_process_and_is_skipped_on_a_remote_cluster() -> None:
    from flowrt.train import Server

    seen: list[str] = []
    rt = _probe_runtime(seen)
    g = tf.Graph(runtime=rt)
    with g.as_default():
        x = tf.placeholder(tf.float32, [2])
        with tf.device("/job:ps/task:0"):
            a = x + 1.0
        with tf.device("/job:worker/task:0"):
            b = a * 2.0
    soft = tf.ConfigProto(allow_soft_placement=True)
    with tf.Session(graph=g, config=soft) as sess:  # in process: both run
        assert sess.run(b, {x: [0.0, 1.0]}).tolist() == [2.0, 4.0]
    assert seen == ["anywhere", "local"]

    seen.clear()
    cluster = ft.cluster_addresses("inproc", {"ps": 1, "worker": 1})
    servers = [Server(cluster, j, 0, protocol="inproc", runtime=rt) for j in cluster]
    try:
        with tf.Session(servers[1].target, graph=g) as sess:
            assert sess.run(b, {x: [0.0, 1.0]}).tolist() == [2.0, 4.0]
    finally:
        for s in servers:
            s.stop()
    assert seen == ["anywhere"]


def test_a_graph_pass_subclass_can_default_local_only() -> None:
    @dataclass
    class InProcess(GraphPass):
        local_only: bool = True

    assert InProcess("p", lambda ir, ctx: None).local_only


# -- device arrays through device-type hooks ---------------------------------------------------
class _Boxed:
    """An accelerator array stand-in: no numpy conversion (as CuPy refuses one)."""

    def __init__(self, a: Any):
        self.a = np.asarray(a)
        self.shape = self.a.shape

    def __array__(self, *a: Any, **k: Any) -> Any:
        raise TypeError("implicit conversion to a numpy array is not allowed")


class _BoxType(DeviceType):
    def __init__(self) -> None:
        super().__init__("BOX", lambda config, job, task: [])
        self.calls: list[str] = []

    def holds(self, value: Any) -> bool:
        return isinstance(value, _Boxed)

    def feed(self, value: Any, np_dtype: Any) -> Any:
        self.calls.append("feed")
        return _Boxed(value.a.astype(np_dtype, copy=False))  # stays "on the device"

    def to_host(self, value: Any) -> np.ndarray:
        self.calls.append("to_host")
        return np.array(value.a)


def test_device_arrays_are_fed_and_fetched_through_the_device_type() -> None:
    box = _BoxType()
    rt = Runtime(autoload=False, plugins={
        "box": SimpleNamespace(flowrt_device_types=tf.hookimpl(lambda: [box]))})
    g = tf.Graph(runtime=rt)
    with g.as_default():
        x = tf.placeholder(tf.float32, [2])
        y = tf.identity(x)        # hands the device array on
        z = x * 3.0
    with tf.Session(graph=g) as sess:
        out, fed = sess.run([y, x], {x: _Boxed([1, 2])})
        assert isinstance(out, np.ndarray) and out.dtype == np.float32
        assert out.tolist() == [1.0, 2.0] and fed.tolist() == [1.0, 2.0]
        # fed once; the fetched result and the fed value fetched back: to_host each
        assert box.calls == ["feed", "to_host", "to_host"]
        with pytest.raises(ValueError, match="Cannot feed value of shape"):
            sess.run(y, {x: _Boxed([1, 2, 3])})
        box.calls.clear()
        assert sess.run(z, {x: [1.0, 1.0]}).tolist() == [3.0, 3.0]
        assert box.calls == []  # host values never reach a device type


def test_the_base_device_type_holds_nothing() -> None:
    dt = DeviceType("PLAIN", lambda config, job, task: [])
    assert not dt.holds(_Boxed([1]))
    with pytest.raises(NotImplementedError, match="need feed"):
        dt.feed(_Boxed([1]), np.float32)
    with pytest.raises(NotImplementedError, match="need to_host"):
        dt.to_host(_Boxed([1]))


class _FakeCupyArray:
    __cuda_array_interface__ = {"shape": (2,), "typestr": "<f4", "version": 3}

    def __init__(self, a: Any):
        self.a = np.asarray(a)
        self.dtype = self.a.dtype
        self.shape = self.a.shape

    def astype(self, dt: Any) -> "_FakeCupyArray":
        return _FakeCupyArray(self.a.astype(dt))

    def get(self) -> np.ndarray:
        return self.a.copy()


class _FakeDLPack:
    def __init__(self, device_type: int):
        self.kind = device_type

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.kind, 0)


def test_the_gpu_type_takes_gpu_arrays_without_a_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = SimpleNamespace(ndarray=_FakeCupyArray,
                           from_dlpack=lambda o: _FakeCupyArray(np.float32([5, 6])))
    monkeypatch.setattr(cuda_dev, "_cupy", lambda: fake)
    gpu = cuda_dev.gpu_device_type()
    assert isinstance(gpu, cuda_dev.GPUDeviceType)
    a = _FakeCupyArray(np.float32([1, 2]))
    assert gpu.holds(a) and gpu.holds(_FakeDLPack(2)) and gpu.holds(_FakeDLPack(13))
    assert not gpu.holds(_FakeDLPack(1)) and not gpu.holds(np.zeros(2))
    assert gpu.feed(a, np.dtype(np.float32)) is a  # the same array: no copy
    assert gpu.feed(a, np.dtype(np.float64)).dtype == np.float64
    assert gpu.feed(_FakeDLPack(2), np.dtype(np.float32)).a.tolist() == [5, 6]
    assert gpu.to_host(a).tolist() == [1.0, 2.0]


def test_a_gpu_feed_without_cupy_is_a_type_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> Any:
        raise ImportError("No module named 'cupy'")

    monkeypatch.setattr(cuda_dev, "_cupy", missing)
    with pytest.raises(TypeError, match="a GPU array was fed, but cupy is not installed"):
        cuda_dev.gpu_device_type().feed(_FakeDLPack(2), np.dtype(np.float32))


def test_session_imports_no_cupy_and_cpu_feeds_leave_it_unimported() -> None:
    import pathlib

    src = (pathlib.Path(tf.__file__).parent / "framework" / "session.py").read_text()
    assert "cupy" not in src
    code = ("import sys, numpy as np, flowrt as tf\n"
            "x = tf.placeholder(tf.float32, [2])\n"
            "y = tf.identity(x) * 2.0\n"
            "cfg = tf.ConfigProto(device_count={'GPU': 0})\n"
            "with tf.Session(config=cfg) as s:\n"
            "    assert s.run(y, {x: np.float32([1, 2])}).tolist() == [2.0, 4.0]\n"
            "    assert s.run(y, {x: [3, 4]}).tolist() == [6.0, 8.0]\n"
            "    assert s.run(x, {x: np.float64([5, 6])}).tolist() == [5.0, 6.0]\n"
            "assert 'GPU' in tf.default_runtime().device_types\n"
            "print('cupy' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "False"
