"""The plugin host: a Runtime's registries, duplicate rules, failure reporting, the
autoload switch, the block list, and runtimes that host applications build themselves.

Plugins here are in-test objects (namespaces or class instances of ``@flowrt.hookimpl``
functions) registered through ``Runtime(plugins={...})``; entry-point behaviour is
exercised by substituting ``importlib.metadata.entry_points`` or, for the real installed
example plugin, in a subprocess.
"""
from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import pytest

import flowrt as tf
from flowrt import errors
from flowrt.device import Device, DeviceType
from flowrt.graph import apply_op
from flowrt.master import Master
from flowrt.op_registry import KernelSet, OpDef
from flowrt.passes import GraphPass
from flowrt.runtime import PluginError, Runtime
from flowrt.transport import Transport
from flowrt.worker import Worker

SUBPROCESS_TIMEOUT = 120


# -- helpers ----------------------------------------------------------------------------
def plugin(**hooks: Callable[[], Any]) -> SimpleNamespace:
    """A plugin object: each keyword is a hook name and its implementation."""
    return SimpleNamespace(**{name: tf.hookimpl(fn) for name, fn in hooks.items()})


def runtime(**plugins: Any) -> Runtime:
    """A host application's runtime: built-ins plus ``plugins``, no entry points."""
    return Runtime(autoload=False, plugins=plugins)


def same_shape(op: Any) -> list[Any]:
    return [op.inputs[0].shape]


def unary_op_set(set_name: str, op: str, api: str | None = None, scale: float = 2.0,
                 device_type: str = "CPU") -> KernelSet:
    """A kernel set with one float op ``y = x * scale`` and a kernel on ``device_type``."""
    ks = KernelSet(set_name)
    ks.op(OpDef(op, inputs=["x: T"], outputs=["y: T"], attrs=["T: {float, double}"],
                shape_fn=same_shape))

    @ks.kernel(op, device_type=device_type)
    def _factory(ctx: Any) -> Any:
        s = ctx.output_dtypes[0].np.type(scale)
        return lambda x: ctx.xp.multiply(x, s)

    if api:
        ks.api(api)(lambda x, name=None: apply_op(op, name=name, x=x))
    return ks


def kernel_plugin(*sets: KernelSet) -> SimpleNamespace:
    return plugin(flowrt_kernel_sets=lambda: list(sets))


class NumpyDevice(Device):
    """A host-memory device of any type name (for device-type tests)."""

    def __init__(self, type_name: str, index: int, job: str = "localhost", task: int = 0):
        super().__init__(type_name, index, job, task)

    def to_host(self, value: Any) -> np.ndarray:
        return np.array(value, copy=True)

    def from_host(self, value: np.ndarray) -> Any:
        return np.array(value, copy=True)


def numpy_device_type(name: str, priority: int = 0, array_kernels: bool = True,
                      count: int = 1) -> DeviceType:
    return DeviceType(name, lambda config, job, task: [NumpyDevice(name, i, job, task)
                                                       for i in range(count)],
                      priority=priority, array_kernels=array_kernels)


class LoopTransport(Transport):
    """A transport whose clients are the in-process master and worker of one runtime."""

    def __init__(self, scheme: str = "loop", rt: Runtime | None = None):
        self.scheme = scheme
        self.rt = rt
        self.servers: dict[str, Any] = {}
        self.connects: list[str] = []

    def start_server(self, address: str, master: Any, worker: Any) -> Any:
        srv = SimpleNamespace(address=address, master=master, worker=worker,
                              stop=lambda: self.servers.pop(address, None))
        self.servers[address] = srv
        return srv

    def _get(self, address: str) -> Any:
        if address not in self.servers:
            w = Worker(self.rt, "localhost", 0, None)
            self.start_server(address, Master(self.rt, w), w)
        return self.servers[address]

    def master_client(self, address: str) -> Any:
        self.connects.append(address)
        return self._get(address).master

    def worker_client(self, address: str) -> Any:
        return self._get(address).worker


def fake_entry_points(monkeypatch: pytest.MonkeyPatch, *extra: Any) -> None:
    """Make ``importlib.metadata.entry_points`` (as used by Runtime._load) also list
    ``extra`` in the ``flowrt`` group."""
    real = importlib.metadata.entry_points

    def entry_points(**kw: Any) -> list[Any]:
        eps = list(real(**kw))
        if kw.get("group") == "flowrt":
            eps.extend(extra)
        return eps

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


class RaisingEntryPoint:
    """An entry point whose module raises ImportError (a missing shared library)."""

    def __init__(self, name: str, value: str, message: str):
        self.name, self.value, self.group, self.message = name, value, "flowrt", message
        self.dist = SimpleNamespace(name=f"{name}-dist", version="9.9")

    def load(self) -> Any:
        raise ImportError(self.message)


def example_installed() -> bool:
    return any(ep.name == "example"
               for ep in importlib.metadata.entry_points(group="flowrt"))


needs_example = pytest.mark.skipif(not example_installed(),
                                   reason="flowrt-example-plugin is not installed "
                                          "(make test installs it)")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("FLOWRT_BLOCK_PLUGINS", "FLOWRT_DISABLE_PLUGIN_AUTOLOAD",
                "FLOWRT_DISABLE_PASSES"):
        monkeypatch.delenv(var, raising=False)


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("FLOWRT_BLOCK_PLUGINS", "FLOWRT_DISABLE_PLUGIN_AUTOLOAD")}
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)


# -- duplicates -------------------------------------------------------------------------
def _dup_op() -> tuple[Any, Any]:
    return (kernel_plugin(unary_op_set("a", "TwinOp")),
            kernel_plugin(unary_op_set("b", "TwinOp")))


def _dup_kernel() -> tuple[Any, Any]:
    ks_b = KernelSet("b")
    ks_b.kernel("TwinOp", device_type="CPU")(lambda ctx: (lambda x: x))
    return kernel_plugin(unary_op_set("a", "TwinOp")), kernel_plugin(ks_b)


def _dup_api() -> tuple[Any, Any]:
    return (kernel_plugin(unary_op_set("a", "TwinOpA", api="twin_fn")),
            kernel_plugin(unary_op_set("b", "TwinOpB", api="twin_fn")))


def _dup_gradient() -> tuple[Any, Any]:
    a = unary_op_set("a", "TwinOp")
    a.gradient("TwinOp")(lambda op, grad: [grad])
    b = KernelSet("b")
    b.gradient("TwinOp")(lambda op, grad: [grad])
    return kernel_plugin(a), kernel_plugin(b)


def _dup_device_type() -> tuple[Any, Any]:
    return (plugin(flowrt_device_types=lambda: [numpy_device_type("TWIN")]),
            plugin(flowrt_device_types=lambda: [numpy_device_type("twin")]))


def _dup_transport() -> tuple[Any, Any]:
    return (plugin(flowrt_transports=lambda: [LoopTransport("twin")]),
            plugin(flowrt_transports=lambda: [LoopTransport("twin")]))


def _dup_pass() -> tuple[Any, Any]:
    return (plugin(flowrt_graph_passes=lambda: [GraphPass("twin_pass", lambda ir, c: None)]),
            plugin(flowrt_graph_passes=lambda: [GraphPass("twin_pass", lambda ir, c: None)]))


@pytest.mark.parametrize("make, registry, what", [
    (_dup_op, "op_defs", "op 'TwinOp'"),
    (_dup_kernel, "kernels", "kernel for op 'TwinOp' on device type 'CPU'"),
    (_dup_api, "api", "API name 'twin_fn'"),
    (_dup_gradient, "gradients", "gradient for op 'TwinOp'"),
    (_dup_device_type, "device_types", "device type 'TWIN'"),
    (_dup_transport, "transports", "transport scheme 'twin'"),
    (_dup_pass, "graph_passes", "graph pass 'twin_pass'"),
], ids=["op", "kernel", "api", "gradient", "device_type", "transport", "graph_pass"])
def test_duplicate_registration_names_both_plugins(make: Any, registry: str,
                                                   what: str) -> None:
    a, b = make()
    rt = runtime(alpha_plugin=a, beta_plugin=b)
    with pytest.raises(PluginError) as ei:
        getattr(rt, registry)
    msg = str(ei.value)
    assert what in msg
    assert "'alpha_plugin'" in msg and "'beta_plugin'" in msg


@pytest.mark.parametrize("hook, value, registry, builtin, what", [
    # Const is the core's essential kernel set's (flowrt.engine.essential)
    ("flowrt_kernel_sets", lambda: [unary_op_set("mine", "Const")], "op_defs", "essential",
     "op 'Const'"),
    ("flowrt_kernel_sets", lambda: [unary_op_set("mine", "MatMul")], "op_defs", "standard",
     "op 'MatMul'"),
    ("flowrt_device_types", lambda: [numpy_device_type("cpu")], "device_types", "cpu",
     "device type 'CPU'"),
    ("flowrt_transports", lambda: [LoopTransport("inproc")], "transports", "inproc",
     "transport scheme 'inproc'"),
], ids=["op", "standard_op", "device_type", "transport"])
def test_duplicate_of_a_builtin_names_the_builtin(hook: str, value: Any, registry: str,
                                                  builtin: str, what: str) -> None:
    rt = runtime(intruder=plugin(**{hook: value}))
    with pytest.raises(PluginError) as ei:
        getattr(rt, registry)
    msg = str(ei.value)
    assert what in msg and f"'{builtin}'" in msg and "'intruder'" in msg


def test_kernel_for_an_undefined_op_names_the_plugin() -> None:
    ks = KernelSet("orphan")
    ks.kernel("NoSuchOpAnywhere")(lambda ctx: (lambda: None))
    rt = runtime(orphans=kernel_plugin(ks))
    with pytest.raises(PluginError, match="'orphans' registers a kernel for op "
                                          "'NoSuchOpAnywhere', which no plugin defines"):
        rt.op_defs


def test_two_entry_points_with_one_name_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = importlib.metadata.EntryPoint("cpu", "some_other_package.cpu", "flowrt")
    fake_entry_points(monkeypatch, ep)
    with pytest.raises(PluginError, match="two plugins are named 'cpu'"):
        Runtime().pm


# -- failures, not-found errors, did-you-mean -------------------------------------------
def test_failed_import_is_recorded_and_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = importlib.metadata.EntryPoint("ghost", "flowrt_tests_no_such_module_x1",
                                            "flowrt")
    broken = RaisingEntryPoint("foo_accel", "foo_accel.flowrt_plugin",
                               "libfooaccel.so.3: cannot open shared object file")
    fake_entry_points(monkeypatch, missing, broken)
    rt = Runtime(autoload=True)
    rt.pm
    ghost, foo = rt.plugins["ghost"], rt.plugins["foo_accel"]
    assert ghost.status == "failed" and "flowrt_tests_no_such_module_x1" in ghost.error
    assert ghost.error.startswith("ModuleNotFoundError")
    assert foo.status == "failed" and not foo.builtin
    assert foo.error == "ImportError: libfooaccel.so.3: cannot open shared object file"
    assert (foo.distribution, foo.version) == ("foo_accel-dist", "9.9")
    assert rt.plugins["cpu"].status == "loaded"

    with pytest.raises(errors.NotFoundError) as ei:
        rt.device_type("FOO")
    msg = ei.value.message
    assert "No device type 'FOO' is registered" in msg
    assert "'CPU'" in msg  # what exists
    assert "foo_accel (ImportError: libfooaccel.so.3" in msg  # what failed to load
    assert "ghost (ModuleNotFoundError" in msg

    with pytest.raises(errors.NotFoundError) as ei:
        rt.transport("foo")
    assert "No transport for scheme 'foo'" in ei.value.message
    assert "libfooaccel.so.3" in ei.value.message


def test_did_you_mean() -> None:
    rt = runtime()
    with pytest.raises(errors.NotFoundError, match=r"Did you mean 'inproc'\?"):
        rt.transport("inprc")
    with pytest.raises(errors.NotFoundError, match=r"Did you mean 'CPU'\?"):
        rt.device_type("CPUU")
    with pytest.raises(ValueError, match=r"Did you mean 'Placeholder'"):
        rt.op_def("Placehlder")
    with pytest.raises(errors.NotFoundError) as ei:
        rt.transport("zzzzzz")
    assert "Did you mean" not in ei.value.message


def test_unknown_transport_in_a_session_target() -> None:
    g = tf.Graph(runtime=runtime())
    with pytest.raises(errors.NotFoundError, match="Did you mean 'inproc'"):
        tf.Session("inprc://x", graph=g)


def test_hook_that_raises_is_recorded_as_failed() -> None:
    def broken() -> list[Any]:
        raise RuntimeError("driver version mismatch")

    rt = runtime(flaky=plugin(flowrt_device_types=broken))
    assert "CPU" in rt.device_types  # the other plugins still load
    info = rt.plugins["flaky"]
    assert info.status == "failed"
    assert info.error == "flowrt_device_types: RuntimeError: driver version mismatch"
    with pytest.raises(errors.NotFoundError, match="flaky .flowrt_device_types: "
                                                   "RuntimeError: driver version mismatch"):
        rt.device_type("FLAKY")


# -- autoload switch and block list -----------------------------------------------------
def test_autoload_switch_keeps_builtins(monkeypatch: pytest.MonkeyPatch) -> None:
    third = importlib.metadata.EntryPoint("thirdparty", "flowrt_tests_no_such_module_x2",
                                          "flowrt")
    fake_entry_points(monkeypatch, third)
    monkeypatch.setenv("FLOWRT_DISABLE_PLUGIN_AUTOLOAD", "1")
    rt = Runtime()
    assert rt.autoload is False
    rt.pm
    info = rt.plugins["thirdparty"]
    assert info.status == "disabled" and "FLOWRT_DISABLE_PLUGIN_AUTOLOAD" in info.error
    assert {rt.plugins[n].status for n in ("cpu", "inproc", "standard")} == {"loaded"}
    assert "CPU" in rt.device_types and "inproc" in rt.transports
    assert "Const" in rt.op_defs


@needs_example
def test_autoload_env_var_stops_the_example_plugin_in_a_fresh_process() -> None:
    code = """
        import flowrt as tf
        rt = tf.default_runtime()
        assert "CPU" in rt.device_types and "inproc" in rt.transports, rt.plugins
        assert "EXAMPLE" not in rt.device_types
        assert "ExampleSquarePlusOne" not in rt.op_defs
        info = rt.plugins["example"]
        assert info.status == "disabled", info
        assert all(rt.plugins[n].status == "loaded" for n in ("cpu", "inproc", "standard"))
        assert not hasattr(tf, "example_square_plus_one")
        g = tf.Graph()
        with g.as_default():
            y = tf.identity(tf.constant([1.0, 2.0]))
        with tf.Session(graph=g) as s:
            assert s.run(y).tolist() == [1.0, 2.0]
        print("autoload-off-ok")
    """
    p = run_python(code, FLOWRT_DISABLE_PLUGIN_AUTOLOAD="1")
    assert p.returncode == 0, p.stderr
    assert "autoload-off-ok" in p.stdout
    # and without the switch the same process finds it
    p = run_python("import flowrt as tf; rt = tf.default_runtime(); "
                   "print(sorted(rt.device_types))")
    assert p.returncode == 0, p.stderr
    assert "EXAMPLE" in p.stdout


@needs_example
def test_block_list_argument() -> None:
    rt = Runtime(block=["example"])
    rt.pm
    assert rt.plugins["example"].status == "blocked"
    assert rt.plugins["example"].distribution is not None
    assert "EXAMPLE" not in rt.device_types
    assert "ExampleSquarePlusOne" not in rt.op_defs
    assert rt.plugins["cpu"].status == "loaded"


@needs_example
def test_block_list_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWRT_BLOCK_PLUGINS", " example , inproc")
    rt = Runtime()
    assert rt.blocked >= {"example", "inproc"}
    rt.pm
    assert rt.plugins["example"].status == "blocked"
    assert rt.plugins["inproc"].status == "blocked"
    assert "inproc" not in rt.transports and "EXAMPLE" not in rt.device_types
    with pytest.raises(errors.NotFoundError, match="No transport for scheme 'inproc'"):
        rt.transport("inproc")


def test_blocking_builtins_and_host_plugins() -> None:
    extra = plugin(flowrt_device_types=lambda: [numpy_device_type("EXTRA")])
    rt = Runtime(autoload=False, block=["cpu", "cuda", "extra"], plugins={"extra": extra})
    rt.pm
    assert rt.plugins["cpu"].status == "blocked" and rt.plugins["cpu"].builtin
    assert rt.plugins["cuda"].status == "blocked" and rt.plugins["cuda"].builtin
    assert rt.plugins["extra"].status == "blocked"
    assert rt.device_types == {}


def test_builtins_false_gives_an_empty_runtime() -> None:
    rt = Runtime(builtins=False, autoload=False)
    assert rt.device_types == {} and rt.transports == {} and rt.op_defs == {}
    assert rt.graph_passes == []


# -- laziness ---------------------------------------------------------------------------
def test_import_builds_no_plugin_manager_and_imports_no_backends() -> None:
    code = """
        import sys
        import flowrt
        assert flowrt.runtime._default[0] is None, "a runtime was built at import"
        g = flowrt.Graph()
        assert flowrt.runtime._default[0] is None, "flowrt.Graph() built a runtime"
        heavy = [m for m in ("grpc", "zmq", "cupy") if m in sys.modules]
        assert not heavy, heavy
        plugins = [m for m in sys.modules if m.startswith("flowrt.plugins")]
        assert not plugins, plugins
        flowrt.default_runtime().op_defs
        assert flowrt.runtime._default[0] is not None
        print("lazy-ok")
    """
    p = run_python(code)
    assert p.returncode == 0, p.stderr
    assert "lazy-ok" in p.stdout


def test_a_lazy_attribute_that_fails_to_load_is_an_attribute_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``hasattr`` and ``getattr(flowrt, name, default)`` must work as on any module
    (issue 14, item 5: ``hasattr(flowrt, "compat")`` raised ModuleNotFoundError)."""
    import flowrt

    monkeypatch.setitem(flowrt._LAZY_CORE, "broken_thing", ("no_such_module", None))
    monkeypatch.delitem(vars(flowrt), "broken_thing", raising=False)
    assert not hasattr(flowrt, "broken_thing")
    assert getattr(flowrt, "broken_thing", 7) == 7
    with pytest.raises(AttributeError, match="broken_thing.*no_such_module"):
        flowrt.broken_thing  # noqa: B018


def test_every_public_name_loads() -> None:
    """``from flowrt import *`` and ``tf.compat.v1``, as TF 1.x programs use them."""
    code = """
        from flowrt import *
        import flowrt
        import flowrt.compat.v1 as v1
        assert v1 is flowrt and flowrt.compat.v1 is flowrt
        assert flowrt.compat.as_bytes("ab") == b"ab" and flowrt.compat.as_bytes(b"c") == b"c"
        assert flowrt.compat.as_text(b"ab") == "ab" and flowrt.compat.as_str_any(b"x") == "x"
        assert flowrt.compat.forward_compatible(2019, 1, 1)
        assert not flowrt.compat.forward_compatible(2030, 1, 1)
        with flowrt.compat.forward_compatibility_horizon(2031, 1, 1):
            assert flowrt.compat.forward_compatible(2030, 1, 1)
        missing = [n for n in flowrt.__all__ if not hasattr(flowrt, n)]
        assert not missing, missing
        print("all-ok")
    """
    p = run_python(code)
    assert p.returncode == 0, p.stderr
    assert "all-ok" in p.stdout
    from flowrt import compat

    with pytest.raises(TypeError, match="Expected binary or unicode string, got 3"):
        compat.as_bytes(3)  # type: ignore[arg-type]


def test_hooks_are_called_once_per_runtime_and_only_when_needed() -> None:
    calls: dict[str, int] = {}

    def counted(name: str, value: Callable[[], list[Any]]) -> Callable[[], list[Any]]:
        def hook() -> list[Any]:
            calls[name] = calls.get(name, 0) + 1
            return value()
        return hook

    p = plugin(
        flowrt_device_types=counted("flowrt_device_types", lambda: []),
        flowrt_transports=counted("flowrt_transports", lambda: []),
        flowrt_kernel_sets=counted("flowrt_kernel_sets", lambda: []),
        flowrt_graph_passes=counted("flowrt_graph_passes", lambda: []),
    )
    rt = runtime(counter=p)
    assert calls == {}  # building a Runtime calls nothing
    rt.transports
    assert calls == {"flowrt_transports": 1}
    g = tf.Graph(runtime=rt)
    with g.as_default():
        y = tf.identity(tf.constant(3.0))
    with tf.Session(graph=g) as s:
        for _ in range(3):
            assert s.run(y) == 3.0
    with tf.Session(graph=g) as s:
        assert s.run(y) == 3.0
    assert calls == {"flowrt_device_types": 1, "flowrt_transports": 1,
                     "flowrt_kernel_sets": 1, "flowrt_graph_passes": 1}


def test_plugin_objects_may_be_class_instances() -> None:
    class MyPlugin:
        def __init__(self) -> None:
            self.ks = unary_op_set("cls", "ClassPluginOp", api="class_plugin_op")

        @tf.hookimpl
        def flowrt_kernel_sets(self) -> list[KernelSet]:
            return [self.ks]

    rt = runtime(classy=MyPlugin())
    assert "ClassPluginOp" in rt.op_defs
    info = rt.plugins["classy"]
    assert info.status == "loaded" and info.provides == {"ops": ["ClassPluginOp"]}


# -- host applications' own runtimes ----------------------------------------------------
def test_graph_bound_to_a_custom_runtime_uses_its_op_registry() -> None:
    rt = runtime(private=kernel_plugin(unary_op_set("private", "PrivateDouble",
                                                    api="private_double")))
    assert "PrivateDouble" not in tf.default_runtime().op_defs
    assert "private_double" not in tf.default_runtime().api
    g = tf.Graph(runtime=rt)
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 2])
        y = rt.api_function("private_double")(x)
        z = apply_op("PrivateDouble", x=y, name="again")
    assert y.op.type == "PrivateDouble" and y.op.op_def is rt.op_defs["PrivateDouble"]
    assert y.shape.as_list() == [None, 2]
    with tf.Session(graph=g) as s:
        assert s._runtime is rt
        out = s.run(z, {x: np.array([[1.0, -2.0]], np.float32)})
    np.testing.assert_array_equal(out, np.array([[4.0, -8.0]], np.float32))
    assert out.dtype == np.float32
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="Op type not registered 'PrivateDouble'"):
            apply_op("PrivateDouble", x=tf.constant(1.0))


def test_custom_device_type_priority_and_array_kernels() -> None:
    """A high-priority type without generic kernels gets only the ops it has kernels
    for; everything else stays on CPU."""
    ks = unary_op_set("toy", "ToyTriple", scale=3.0, device_type="TOY")
    rt = runtime(toy=plugin(flowrt_device_types=lambda: [
        numpy_device_type("TOY", priority=50, array_kernels=False)],
        flowrt_kernel_sets=lambda: [ks]))
    assert rt.kernel_device_types("ToyTriple") == ["TOY"]
    assert rt.find_kernel("Identity", "TOY") is None  # generic kernels do not run there
    assert rt.find_kernel("Identity", "CPU") is not None
    g = tf.Graph(runtime=rt)
    with g.as_default():
        x = tf.placeholder(tf.float32, [3], name="x")
        y = apply_op("ToyTriple", x=x, name="triple")
        z = tf.identity(y, name="out")
    with tf.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(z, {x: [1, 2, 3]}), [3.0, 6.0, 9.0])
        where = s.placement(z, [x])
        names = [d.name for d in s.list_devices()]
    assert where["triple"].endswith("/device:TOY:0")
    assert where["out"].endswith("/device:CPU:0")
    assert "/job:localhost/replica:0/task:0/device:TOY:0" in names
    assert rt.plugins["toy"].provides == {"device types": ["TOY"], "ops": ["ToyTriple"]}


def test_custom_transport_serves_sessions_on_its_scheme() -> None:
    holder: dict[str, Any] = {}
    rt = runtime(looper=plugin(flowrt_transports=lambda: [holder["t"]]))
    holder["t"] = LoopTransport("loop", rt)
    assert rt.transport("loop") is holder["t"] and holder["t"].plugin == "looper"
    g = tf.Graph(runtime=rt)
    with g.as_default():
        v = tf.Variable([1.0, 2.0], name="v")
        inc = tf.assign_add(v, [10.0, 10.0])
        init = tf.global_variables_initializer()
    with tf.Session("loop://shared", graph=g) as s:
        s.run(init)
        s.run(inc)
    with tf.Session("loop://shared", graph=g) as s:  # same server: state persists
        np.testing.assert_array_equal(s.run(v), [11.0, 12.0])
    assert holder["t"].connects == ["shared", "shared"]
    assert rt.plugins["looper"].provides == {"transports": ["loop"]}


def test_graph_passes_run_in_order_once_per_step_signature(
        monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[tuple[str, tuple[Any, ...]]] = []

    def recorder(name: str) -> Callable[[Any, Any], None]:
        def run(ir: Any, ctx: Any) -> None:
            assert ctx.runtime is rt
            log.append((name, tuple(ctx.fetches)))
        return run

    rt = runtime(passes=plugin(flowrt_graph_passes=lambda: [
        GraphPass("second", recorder("second"), order=20),
        GraphPass("first", recorder("first"), order=10),
        GraphPass("off", recorder("off"), enabled_by_default=False)]))
    mine = [p.name for p in rt.graph_passes if p.name in ("first", "second", "off")]
    assert mine == ["first", "second", "off"]
    g = tf.Graph(runtime=rt)
    with g.as_default():
        a = tf.constant(1.0, name="a")
        b = tf.identity(a, name="b")
    with tf.Session(graph=g) as s:
        s.run(b)
        s.run(b)  # cached: the passes do not run again
        assert log == [("first", (("b", 0),)), ("second", (("b", 0),))]
        s.run(a)  # a new signature
        assert [n for n, _ in log] == ["first", "second", "first", "second"]
    monkeypatch.setenv("FLOWRT_DISABLE_PASSES", "first")
    log.clear()
    with tf.Session(graph=g) as s:
        s.run(b)
    assert [n for n, _ in log] == ["second"]


def test_graph_pass_rewrites_the_step_graph() -> None:
    """A pass that rewires consumers of Identity nodes to the Identity's input."""
    def skip_identities(ir: Any, ctx: Any) -> None:
        keep = {n for n, _ in ctx.fetches}
        for node in list(ir.nodes.values()):
            if node.type != "Identity" or node.name in keep or node.control_inputs:
                continue
            src = node.inputs[0]
            for other in ir.nodes.values():
                other.inputs = [src if s == (node.name, 0) else s for s in other.inputs]
            del ir.nodes[node.name]

    rt = runtime(rewriter=plugin(flowrt_graph_passes=lambda: [
        GraphPass("skip_identities", skip_identities)]))
    g = tf.Graph(runtime=rt)
    with g.as_default():
        x = tf.placeholder(tf.float32, [2], name="x")
        y = tf.identity(tf.identity(x, name="i1"), name="i2")
        z = tf.identity(y, name="z")
    with tf.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(z, {x: [1.0, 2.0]}), [1.0, 2.0])
        assert set(s.placement(z, [x])) == {"_arg_x_0", "z"}


def test_plugin_info_for_host_plugins() -> None:
    ks = unary_op_set("info", "InfoOp", api="info_op")
    mod = SimpleNamespace(__name__="my_app.flowrt_ops",
                          flowrt_kernel_sets=tf.hookimpl(lambda: [ks]))
    rt = runtime(my_app=mod)
    rt.op_defs
    info = rt.plugins["my_app"]
    assert (info.name, info.module, info.status, info.builtin) == (
        "my_app", "my_app.flowrt_ops", "loaded", False)
    assert info.provides == {"ops": ["InfoOp"]}
    assert rt.op_defs["InfoOp"].plugin == "my_app"
    assert rt.kernels[("InfoOp", "CPU")].plugin == "my_app"
    described = {p.name: p for p in rt.describe()}
    assert described["my_app"] is info and described["cpu"].provides == {
        "device types": ["CPU"]}


def test_loading_plugins_does_not_shadow_flowrt_names() -> None:
    """Plugins import flowrt.device; ``tf.device`` must stay the scope function."""
    tf.default_runtime().device_types
    import flowrt.device  # noqa: F401

    assert callable(tf.device)
    with tf.Graph().as_default() as g:
        with tf.device("/cpu:0"):
            c = tf.constant(1.0)
    assert c.device == "/device:CPU:0" and g is c.graph


def test_in_process_sessions_never_load_grpc_or_zmq():
    """``Session()`` goes through the ``inproc`` transport like every target; listing
    the transports declares grpc and zmq without importing them; the first use of one
    (here a client of a ``grpc://`` address) imports its library."""
    import subprocess
    import sys

    code = ("import sys, flowrt as tf\n"
            "x = tf.constant(2.0) * 3.0\n"
            "with tf.Session() as s:\n"
            "    assert s.run(x) == 6.0\n"
            "assert 'grpc' not in sys.modules and 'zmq' not in sys.modules, 'loaded'\n"
            "rt = tf.default_runtime()\n"
            "assert {'grpc', 'zmq', 'inproc'} <= set(rt.transports)\n"
            "assert 'grpc' not in sys.modules and 'zmq' not in sys.modules, 'listed'\n"
            "assert not rt.transports['grpc'].loaded\n"
            "rt.transport('grpc').worker_client('127.0.0.1:1')\n"
            "assert rt.transports['grpc'].loaded and 'grpc' in sys.modules\n"
            "assert 'zmq' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


def test_a_deferred_transport_loads_on_first_use_and_forwards_options():
    from flowrt.plugin.transport import DeferredTransport, require

    t = DeferredTransport("fake", "flowrt.plugins.transports.inproc", "InProcTransport")
    t.plugin, t.runtime = "fake-plugin", "rt"
    assert not t.loaded and t.scheme == "fake" and "not loaded" in repr(t)
    t.max_message_bytes = 1234  # an option: set on the transport itself
    assert t.loaded and t.load().max_message_bytes == 1234 == t.max_message_bytes
    assert t.load().plugin == "fake-plugin" and t.load().runtime == "rt"
    assert t.load() is t.load()
    with pytest.raises(ImportError, match="no-such-lib-pkg is not installed"):
        require("flowrt_no_such_module_xyz", "no-such-lib-pkg")
    broken = DeferredTransport("x", "flowrt_no_such_module_xyz", "T")
    with pytest.raises(ModuleNotFoundError):
        broken.master_client("a")
