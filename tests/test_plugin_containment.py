"""When a plugin fails, the failure stays with it (docs/plugins.md, "When a plugin
fails"): graphs that need nothing of it build and run, and the failure shows up where a
user meets it -- the plugin table, placement errors, missing API names. Also the API
edges of the issue: ``supports=`` on ``KernelSet.kernel``, the reason a plugin is
``disabled``, and CLI transport lists that come from the runtime.

Plugins are in-test objects registered through ``Runtime(plugins=...)``, or entry
points substituted for ``importlib.metadata.entry_points``.
"""
from __future__ import annotations

import importlib.metadata
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import pytest

import flowrt as tf
from flowrt import errors
from flowrt.device import Device, DeviceType
from flowrt.graph import apply_op
from flowrt.op_registry import KernelSet, OpDef
from flowrt.runtime import BUILTIN_PLUGINS, PluginError, Runtime, set_default_runtime
from flowrt.tools import cli


def plugin(**hooks: Callable[[], Any]) -> SimpleNamespace:
    return SimpleNamespace(**{name: tf.hookimpl(fn) for name, fn in hooks.items()})


class BrokenEntryPoint:
    """An installed plugin whose module raises at import (a missing shared library)."""

    def __init__(self, name: str, message: str):
        self.name, self.value, self.group = name, f"{name}_pkg.plugin", "flowrt"
        self.dist = SimpleNamespace(name=f"{name}-dist", version="1.0")
        self.message = message

    def load(self) -> Any:
        raise ImportError(self.message)


class PluginEntryPoint:
    """An installed plugin that loads ``obj``."""

    def __init__(self, name: str, obj: Any):
        self.name, self.value, self.group, self.obj = name, f"{name}_pkg", "flowrt", obj
        self.dist = SimpleNamespace(name=f"{name}-dist", version="1.0")

    def load(self) -> Any:
        return self.obj


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """``entry_points(*eps)``: make the ``flowrt`` group list ``eps`` too."""

    def install(*extra: Any) -> None:
        real = importlib.metadata.entry_points

        def fake(**kw: Any) -> list[Any]:
            eps = list(real(**kw))
            return eps + list(extra) if kw.get("group") == "flowrt" else eps

        monkeypatch.setattr(importlib.metadata, "entry_points", fake)

    return install


def bar_extra() -> SimpleNamespace:
    """Kernels (and a gradient) for ``BarScale``, an op the ``bar`` plugin defines."""
    ks = KernelSet("bar_extra")

    @ks.kernel("BarScale", device_type="CPU")
    def _cpu(ctx: Any) -> Any:
        return lambda x: x * 2

    ks.gradient("BarScale")(lambda op, grad: [grad])
    return plugin(flowrt_kernel_sets=lambda: [ks])


LIB = "libbarops.so.1: cannot open shared object file"
#: third-party plugins installed here (the example package): kept out of the runtimes
#: that load entry points, so that only the plugins of each test can fail
INSTALLED = [ep.name for ep in importlib.metadata.entry_points(group="flowrt")
             if ep.name not in BUILTIN_PLUGINS]


# -- a failed op plugin does not break other graphs ------------------------------------------
def test_kernels_for_a_failed_plugins_op_are_dropped_and_reported(
        entry_points: Callable[..., None]) -> None:
    entry_points(BrokenEntryPoint("bar", LIB), PluginEntryPoint("bar_extra", bar_extra()))
    rt = Runtime(autoload=True, block=INSTALLED)
    g = tf.Graph(runtime=rt)
    with g.as_default():  # it raised PluginError here: every graph was broken
        x = tf.placeholder(tf.float32, [2], name="x")
        y = x * 3.0
    with tf.Session(graph=g) as sess:
        assert sess.run(y, {x: [1.0, 2.0]}).tolist() == [3.0, 6.0]
    bar, extra = rt.plugins["bar"], rt.plugins["bar_extra"]
    assert bar.status == "failed" and bar.error == f"ImportError: {LIB}"
    assert extra.status == "loaded"
    assert len(extra.notes) == 1 and extra.notes[0].startswith(
        "kernel for op 'BarScale' on CPU dropped: no loaded plugin defines the op (not "
        "loaded: bar (failed)")  # (and the installed plugins, blocked here)
    assert ("BarScale", "CPU") not in rt.kernels
    assert [p.name for p in rt.failed_plugins] == ["bar", "bar_extra"]
    with pytest.raises(errors.NotFoundError) as ei:
        rt.device_type("BAR")
    assert f"Plugins that failed to load: bar (ImportError: {LIB})." in ei.value.message
    assert "Left out: bar_extra: kernel for op 'BarScale' on CPU dropped" in ei.value.message
    with pytest.raises(ValueError, match="Op type not registered 'BarScale'.*bar "
                                         r"\(ImportError: libbarops"):
        rt.op_def("BarScale")


def test_a_kernel_set_hook_that_raises_is_contained_too() -> None:
    def broken() -> list[Any]:
        raise RuntimeError("cannot initialise the bar runtime")

    rt = Runtime(autoload=False, plugins={"bar": plugin(flowrt_kernel_sets=broken),
                                          "bar_extra": bar_extra()})
    g = tf.Graph(runtime=rt)
    with g.as_default():
        tf.placeholder(tf.float32, [2])
    assert rt.plugins["bar"].error == \
        "flowrt_kernel_sets: RuntimeError: cannot initialise the bar runtime"
    assert "dropped" in rt.plugins["bar_extra"].notes[0]


def test_kernels_for_a_blocked_plugins_ops_are_dropped_and_noted() -> None:
    rt = Runtime(autoload=False, block=["standard"], plugins={"bar_extra": bar_extra()})
    ks = KernelSet("relu_cpu")
    ks.kernel("Relu", device_type="CPU")(lambda ctx: np.negative)
    rt2 = Runtime(autoload=False, block=["standard"], plugins={
        "relu_cpu": plugin(flowrt_kernel_sets=lambda: [ks])})
    assert "Const" in rt.op_defs and "Const" in rt2.op_defs
    assert rt2.plugins["relu_cpu"].notes == [
        "kernel for op 'Relu' on CPU dropped: no loaded plugin defines the op (not "
        "loaded: standard (blocked))"]
    assert ("Relu", "CPU") not in rt2.kernels


def test_an_orphan_kernel_with_nothing_failed_still_names_its_plugin(
        entry_points: Callable[..., None]) -> None:
    """A kernel for an op nobody defines, with no plugin failed or blocked, is a bug of
    its plugin (a misspelt op): PluginError, naming the plugins autoload left out."""
    entry_points(PluginEntryPoint("bar", plugin()))
    rt = Runtime(autoload=False, plugins={"bar_extra": bar_extra()})
    with pytest.raises(PluginError) as ei:
        rt.op_defs
    msg = str(ei.value)
    assert "plugin 'bar_extra' registers a kernel for op 'BarScale', which no plugin " \
           "defines" in msg
    assert "plugins not loaded: " in msg and "bar (Runtime(autoload=False) was given)" in msg


# -- placement errors and API names say what failed --------------------------------------------
def absent_gpu() -> SimpleNamespace:
    """A device type that finds no devices, and says why."""

    def discover(config: Any, job: str, task: int) -> list[Any]:
        dt.unavailable_reason = "no FAKEGPU driver (libfakegpu.so.2 not found)"
        return []

    dt = DeviceType("FAKEGPU", discover, priority=30)
    return plugin(flowrt_device_types=lambda: [dt])


def placement_runtime(entry_points: Callable[..., None]) -> Runtime:
    entry_points(BrokenEntryPoint("zed", "libzed.so: cannot open shared object file"))
    return Runtime(autoload=True, block=INSTALLED, plugins={"fakegpu": absent_gpu()})


def test_placement_notes_name_failed_plugins_and_unavailable_devices(
        entry_points: Callable[..., None]) -> None:
    rt = placement_runtime(entry_points)
    rt.device_types["FAKEGPU"].discover(None, "localhost", 0)
    notes = rt.placement_notes("ZED")
    assert notes.startswith("; plugin 'zed' failed to load: ImportError: libzed.so")
    assert "; no device type 'ZED' is registered (known: ['CPU'" in notes
    assert "FAKEGPU unavailable" not in notes  # only the type asked for
    gpu = rt.placement_notes("FAKEGPU")
    assert gpu.endswith("; device type FAKEGPU unavailable: no FAKEGPU driver "
                        "(libfakegpu.so.2 not found)")
    assert "FAKEGPU unavailable" in rt.placement_notes()
    assert Runtime(autoload=False).placement_notes("CPU") == ""


def test_a_placement_error_names_the_failed_plugin_and_the_unavailable_device(
        entry_points: Callable[..., None]) -> None:
    rt = placement_runtime(entry_points)
    for want, needle in (("ZED", "plugin 'zed' failed to load: ImportError: libzed.so"),
                         ("FAKEGPU", "device type FAKEGPU unavailable: no FAKEGPU driver")):
        g = tf.Graph(runtime=rt)
        with g.as_default():
            with tf.device(f"/device:{want}:0"):
                y = tf.constant(1.0) * 2.0
        with tf.Session(graph=g) as sess:
            with pytest.raises(errors.InvalidArgumentError) as ei:
                sess.run(y)
        assert "no devices matching that specification" in ei.value.message
        assert needle in ei.value.message


def bar_api_runtime(entry_points: Callable[..., None]) -> Runtime:
    entry_points(BrokenEntryPoint("bar", LIB))
    return Runtime(autoload=True, block=INSTALLED)


def test_api_function_names_the_failed_plugin(entry_points: Callable[..., None]) -> None:
    rt = bar_api_runtime(entry_points)
    with pytest.raises(AttributeError) as ei:
        rt.api_function("bar_scale")
    assert str(ei.value).startswith(
        f"flowrt has no API function 'bar_scale' (the plugin 'bar' that may provide it "
        f"failed to load: ImportError: {LIB}).")
    assert rt.missing_api_note("x") == \
        f" (the plugin 'bar' that may provide it failed to load: ImportError: {LIB})"
    assert Runtime(autoload=False).missing_api_note("x") == ""


def test_a_plugin_that_failed_after_its_kernel_sets_is_not_blamed() -> None:
    def broken() -> list[Any]:
        raise RuntimeError("no devices today")

    ks = KernelSet("half")
    rt = Runtime(autoload=False, plugins={"half": plugin(
        flowrt_kernel_sets=lambda: [ks], flowrt_device_types=broken)})
    rt.device_types
    assert rt.plugins["half"].status == "failed"
    assert rt.missing_api_note("anything") == ""


def test_a_missing_module_attribute_names_the_failed_plugin(
        entry_points: Callable[..., None]) -> None:
    rt = bar_api_runtime(entry_points)
    set_default_runtime(rt)
    try:
        with pytest.raises(AttributeError, match="the plugin 'bar' that may provide it "
                                                 "failed to load"):
            tf.bar_scale  # noqa: B018
        with pytest.raises(AttributeError, match="the plugin 'bar' that may provide it"):
            tf.nn.bar_scale  # noqa: B018
    finally:
        set_default_runtime(None)


# -- supports= ------------------------------------------------------------------------------
def two_device_runtime(supports: Any) -> tuple[Runtime, KernelSet]:
    """A ``TWIN`` device type that runs only its own kernels, and an op with a kernel
    on CPU and one on TWIN taking ``supports``."""

    class TwinDevice(Device):
        """Host memory under another name."""

        def __init__(self, index: int, job: str, task: int):
            super().__init__("TWIN", index, job, task)

        def to_host(self, value: Any) -> np.ndarray:
            return np.asarray(value)

        def from_host(self, value: np.ndarray) -> Any:
            return value

    ks = KernelSet("twin_ops")
    ks.op(OpDef("TwinNeg", inputs=["x: T"], outputs=["y: T"],
                attrs=["T: {float, double, int32}"], shape_fn=lambda op: [op.inputs[0].shape]))
    ks.kernel("TwinNeg", device_type="CPU")(lambda ctx: (lambda x: -x))
    ks.kernel("TwinNeg", device_type="TWIN", supports=supports)(
        lambda ctx: (lambda x: -x * 10))
    dt = DeviceType("TWIN", lambda c, j, t: [TwinDevice(0, j, t)], priority=50,
                    array_kernels=False)
    return Runtime(autoload=False, plugins={"twin": plugin(
        flowrt_kernel_sets=lambda: [ks], flowrt_device_types=lambda: [dt])}), ks


def test_supports_picks_the_kernel_by_the_nodes_dtype() -> None:
    rt, ks = two_device_runtime(lambda attrs: attrs["T"].is_floating)
    assert ks.kernels[1].supports is not None
    assert rt.kernel_device_types("TwinNeg", {"T": tf.float32}) == ["CPU", "TWIN"]
    assert rt.kernel_device_types("TwinNeg", {"T": tf.int32}) == ["CPU"]
    g = tf.Graph(runtime=rt)
    with g.as_default():
        f = apply_op("TwinNeg", x=tf.constant([1.0]), name="f")  # TWIN wins on priority
        i = apply_op("TwinNeg", x=tf.constant([1]), name="i")    # TWIN refuses int32
    with tf.Session(graph=g) as sess:
        where = sess.placement([f, i])
        assert where["f"].endswith("TWIN:0") and where["i"].endswith("CPU:0")
        assert sess.run(f).tolist() == [-10.0] and sess.run(i).tolist() == [-1]


def test_supports_of_a_generic_kernel_is_honoured() -> None:
    ks = KernelSet("generic")
    ks.op(OpDef("GenNeg", inputs=["x: T"], outputs=["y: T"], attrs=["T: {float, int32}"]))
    ks.kernel("GenNeg", supports=lambda attrs: attrs["T"] == tf.float32)(
        lambda ctx: (lambda x: -x))
    rt = Runtime(autoload=False, plugins={"g": plugin(flowrt_kernel_sets=lambda: [ks])})
    assert rt.find_kernel("GenNeg", "CPU", {"T": tf.float32}) is not None
    assert rt.find_kernel("GenNeg", "CPU", {"T": tf.int32}) is None
    assert rt.find_kernel("GenNeg", "CPU") is not None  # no attrs: not asked


def test_a_supports_that_raises_counts_as_no_and_is_noted() -> None:
    def buggy(attrs: dict[str, Any]) -> bool:
        raise KeyError("dtype")

    rt, _ = two_device_runtime(buggy)
    assert rt.kernel_device_types("TwinNeg", {"T": tf.float32}) == ["CPU"]
    assert rt.kernel_device_types("TwinNeg", {"T": tf.float64}) == ["CPU"]
    assert rt.plugins["twin"].notes == [
        "supports() of the kernel for op 'TwinNeg' on TWIN raised KeyError: 'dtype'; "
        "the kernel is not used for such nodes"]
    assert [p.name for p in rt.failed_plugins] == ["twin"]


def test_supports_must_be_callable() -> None:
    with pytest.raises(TypeError, match="supports= for \\['X'\\] must be a callable"):
        KernelSet("k").kernel("X", supports=True)


# -- autoload: the real reason -------------------------------------------------------------
def test_disabled_plugins_say_which_switch_disabled_them(
        entry_points: Callable[..., None], monkeypatch: pytest.MonkeyPatch) -> None:
    entry_points(PluginEntryPoint("thirdparty", plugin()))
    monkeypatch.delenv("FLOWRT_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    rt = Runtime(autoload=False)
    assert rt.plugins["thirdparty"].status == "disabled"
    assert rt.plugins["thirdparty"].error == "Runtime(autoload=False) was given"
    assert rt.autoload_off_reason == "Runtime(autoload=False) was given"
    monkeypatch.setenv("FLOWRT_DISABLE_PLUGIN_AUTOLOAD", "1")
    rt = Runtime()
    assert rt.plugins["thirdparty"].error == "FLOWRT_DISABLE_PLUGIN_AUTOLOAD is set"
    assert Runtime(autoload=True).autoload_off_reason is None
    assert Runtime(autoload=True).plugins["thirdparty"].status == "loaded"


# -- CLI lists come from the runtime -------------------------------------------------------------
def test_cli_protocol_lists_are_the_runtimes_transports(
        capsys: pytest.CaptureFixture[str]) -> None:
    class Loop:
        scheme = "loopback"

    set_default_runtime(Runtime(autoload=False, plugins={
        "loop": plugin(flowrt_transports=lambda: [Loop()])}))
    try:
        for cmd in ("server", "demo"):
            with pytest.raises(SystemExit) as ei:
                cli.main([cmd, "--help"])
            assert ei.value.code == 0
            out = capsys.readouterr().out
            # (grpcs: grpc with TLS required, offered wherever grpc is)
            assert "--protocol {grpc,grpcs,inproc,loopback,zmq}" in out, out
            assert "grpc, grpcs, inproc, loopback, zmq" in " ".join(out.split())
        with pytest.raises(SystemExit) as ei:
            cli.main(["server", "--protocol", "carrier-pigeon"])
        assert ei.value.code == 2
        err = capsys.readouterr().err
        assert "invalid choice: 'carrier-pigeon' (choose from 'grpc', 'grpcs', " \
               "'inproc', 'loopback', 'zmq')" in err
    finally:
        set_default_runtime(None)
