"""flowrt.testing: the built-in plugins and the example plugin pass the conformance
checks, and deliberately broken plugins fail them with messages naming the culprit."""
from __future__ import annotations

import importlib.metadata
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import flowrt as tf
import flowrt.testing as ft
from flowrt.device import Device, DeviceType
from flowrt.graph import apply_op
from flowrt.master import Master
from flowrt.op_registry import KernelSet, OpDef
from flowrt.passes import GraphPass
from flowrt.tensor_shape import TensorShape
from flowrt.transport import Transport
from flowrt.worker import Worker


def _example_installed() -> bool:
    return any(ep.name == "example"
               for ep in importlib.metadata.entry_points(group="flowrt"))


# -- the built-ins and the example pass -------------------------------------------------
#: Standard ops the kit cannot check on random samples, and why.
STANDARD_EXEMPT = {
    "ClipByValue": "clip_value_min <= clip_value_max",
    "DynamicStitch": "distinct indices (a duplicate's data has no gradient)",
    "ParallelDynamicStitch": "distinct indices (a duplicate's data has no gradient)",
    "SoftmaxCrossEntropyWithLogits": "each row of labels is a probability distribution",
    "FakeQuantWithMinMaxVars": "min < max",
    "FakeQuantWithMinMaxArgs": "its gradient is a straight-through estimator",
}


@pytest.fixture(scope="module")
def standard_report() -> ft.Report:
    return ft.check_plugin("standard", exempt=STANDARD_EXEMPT)


def test_standard_kernel_set_passes_and_is_mostly_exercised(standard_report: ft.Report
                                                            ) -> None:
    from flowrt.plugins.kernels.standard import ks

    report = next(r for r in standard_report.walk() if r.subject == "kernel set 'standard'")
    assert all(r.checked for r in standard_report.walk())

    def count(needle: str) -> int:
        return int(next(c for c in report.checked if needle in c).split()[0])

    assert count("op definitions") == len(ks.ops)
    # ops that need a hand-picked attr (strides, equation...) are skipped, not many more
    assert count("shape functions run") >= 0.8 * sum(1 for d in ks.ops.values()
                                                     if d.shape_fn is not None)
    assert count("kernel factories") >= 0.8 * len(ks.kernels)
    # run on sample inputs: a good share of the stateless ops, and of the gradients
    assert count("kernels run on sample inputs") >= 200
    assert count("gradients agree with central differences") >= 100
    for op, why in STANDARD_EXEMPT.items():
        assert f"running op {op!r}: exempt: {why}" in report.skipped


#: what the kit verifies of every message transport (its channels and servers)
CHANNEL_RULES = [
    "a reply with 9 buffers (empty, bytes, arrays, memoryviews) arrives whole",
    "handlers run concurrently (a call is answered while another's handler waits)",
    "call(timeout=0.5) raises DeadlineExceededError",
    "call(cancel=event), the event set after 0.3 s raises CancelledError",
    "messages over max_message_bytes raise ResourceExhaustedError and never reach the "
    "handler; the channel goes on working",
    "Channel.close() ends calls in flight and later calls with UnavailableError",
    "after stop() calls on connections opened before raise UnavailableError",
    "an unreachable peer raises UnavailableError naming its address",
]


@pytest.mark.parametrize("name, subjects", [
    ("cpu", ["device type 'CPU'", "device '/job:localhost/replica:0/task:0/device:CPU:0'"]),
    ("inproc", ["transport 'inproc'", "cluster over 'inproc'"]),
    ("grpc", ["transport 'grpc'", "cluster over 'grpc'"]),
    ("zmq", ["transport 'zmq'", "cluster over 'zmq'"]),
    ("cuda", ["device type 'GPU'"]),
])
def test_builtin_plugins_pass(name: str, subjects: list[str]) -> None:
    report = ft.check_plugin(name)
    assert isinstance(report, ft.Report)
    assert report.subject == f"plugin {name!r}"
    seen = [r.subject for r in report.walk()]
    for s in subjects:
        assert s in seen
    assert all(r.checked for r in report.walk())
    if name in ("grpc", "zmq"):
        t = next(r for r in report.walk() if r.subject == f"transport {name!r}")
        assert [c for c in t.checked if c in CHANNEL_RULES] == CHANNEL_RULES
        assert len(t.parts[0].checked) == len(ft.ClusterConformance.CHECKS)
    if name == "cpu":
        assert any(c.startswith("a graph on CPU:0 (a fed placeholder, a constant, 4 "
                                "chained kernels") for c in report.parts[0].checked)


def _has_gpu() -> bool:
    return bool(tf.default_runtime().device_types.get("GPU") and
                tf.default_runtime().device_types["GPU"].discover(None, "localhost", 0))


def test_cuda_kernels_pass_and_are_skipped_without_a_gpu() -> None:
    report = ft.check_plugin("cuda_kernels", live=False)
    ks = next(r for r in report.walk() if r.subject.startswith("kernel set"))
    if not _has_gpu():
        assert any(s.endswith("kernels on GPU: no GPU device here to compare with the CPU")
                   for s in ks.skipped), ks.skipped


@pytest.mark.parametrize("op", ["SparseAddGrad", "SparseFillEmptyRowsGrad"])
def test_standard_sparse_grads_validate_inputs(op: str) -> None:
    from flowrt.plugins.kernels.standard import ks
    from flowrt.tools import conformance_kernels as ck

    rt = tf.default_runtime()
    kernel = rt.find_kernel(op, "CPU")
    ck.check_compute(ks.ops[op], kernel, ck.device_for(rt, "CPU", {}), rt, [op],
                     np.random.default_rng(0))


@pytest.mark.skipif(not _example_installed(), reason="flowrt-example-plugin not installed")
def test_example_plugin_passes() -> None:
    report = ft.check_plugin("example")
    subjects = [r.subject for r in report.walk()]
    assert "device type 'EXAMPLE'" in subjects
    assert "device '/job:localhost/replica:0/task:0/device:EXAMPLE:0'" in subjects
    assert "kernel set 'example'" in subjects
    ks_report = next(r for r in report.walk() if r.subject == "kernel set 'example'")
    for line in ("2 kernel factories return callables taking the node's inputs",
                 "1 gradients refer to known ops and take (op, *grads)",
                 "1 kernels run on sample inputs give the OpDef's output dtypes and the "
                 "shape functions' static shapes",
                 "1 device kernels compute what the CPU kernel of their op computes (every "
                 "attr variant on random inputs)",
                 "1 gradients agree with central differences of the CPU kernel"):
        assert line in ks_report.checked
    assert ks_report.skipped == []
    d = report.as_dict()
    assert d["subject"] == "plugin 'example'" and len(d["parts"]) == 2
    assert "plugin 'example'" in str(report)


@pytest.mark.skipif(not _example_installed(), reason="flowrt-example-plugin not installed")
def test_example_emu_device_and_its_kernels_pass() -> None:
    report = ft.check_plugin("example_emu")
    dt = next(r for r in report.walk() if r.subject == "device type 'EMU'")
    assert "discover() makes the devices asked for with config.device_count" in dt.checked
    assert any(c.startswith("a graph on EMU:0 (a fed placeholder, a constant, 4 chained "
                            "kernels") for c in dt.checked), dt.checked
    assert "8 kernels registered for EMU compute what the CPU kernels of their ops " \
           "compute (every attr variant on random inputs)" in dt.checked
    ks = next(r for r in report.walk() if r.subject == "kernel set 'example_emu'")
    # kernels for ops other plugins define (standard's Add, MatMul ...; the example's op)
    assert "8 device kernels compute what the CPU kernel of their op computes (every " \
           "attr variant on random inputs)" in ks.checked
    assert dt.skipped == [] and ks.skipped == []


@pytest.mark.skipif(not _example_installed(), reason="flowrt-example-plugin not installed")
def test_example_unix_transport_passes() -> None:
    report = ft.check_plugin("example_unix")
    t = next(r for r in report.walk() if r.subject == "transport 'unix'")
    assert [c for c in t.checked if c in CHANNEL_RULES] == CHANNEL_RULES
    assert [p.subject for p in t.parts] == ["cluster over 'unix'"]
    assert len(t.parts[0].checked) == len(ft.ClusterConformance.CHECKS)
    addrs = ft.cluster_addresses("unix", {"ps": 1, "worker": 2})
    assert all(a.endswith(".sock") and "127.0.0.1" not in a for v in addrs.values() for a in v)


def test_individual_checks_on_builtins() -> None:
    rt = tf.default_runtime()
    cpu_type = rt.device_type("CPU")
    r = ft.check_device_type(cpu_type)
    assert r.parts and r.parts[0].subject.endswith("device:CPU:0'")
    dev = cpu_type.discover(None, "localhost", 0)[0]
    assert ft.check_device(dev).checked
    t = ft.check_transport(rt.transport("inproc"))
    assert "sessions on inproc://conformance run a graph and share variables" in t.checked
    # the check leaves it as it was: its plugin, and the runtime that owns it
    assert rt.transport("inproc").plugin == "inproc" and rt.transport("inproc").runtime is rt
    static = ft.check_transport(rt.transport("inproc"), live=False)
    assert static.skipped == ["live checks: live=False"]


# -- broken kernel sets -----------------------------------------------------------------
def _square_set(name: str = "broken", op: str = "BrokenSquare", **opdef: Any) -> KernelSet:
    ks = KernelSet(name)
    kw: dict[str, Any] = dict(inputs=["x: T"], outputs=["y: T"], attrs=["T: {float, double}"],
                              shape_fn=lambda o: [o.inputs[0].shape])
    kw.update(opdef)
    ks.op(OpDef(op, **kw))
    return ks


def _fails(ks: KernelSet, *fragments: str) -> str:
    with pytest.raises(AssertionError) as ei:
        ft.check_kernel_set(ks)
    msg = str(ei.value)
    assert msg.startswith("flowrt conformance: kernel set 'broken'")
    for f in fragments:
        assert f in msg, msg
    return msg


def test_good_kernel_set_passes() -> None:
    ks = _square_set(op="GoodSquare")
    ks.kernel("GoodSquare")(lambda ctx: (lambda x: x * x))
    ks.gradient("GoodSquare")(lambda op, grad: [grad * 2.0 * op.inputs[0]])
    ks.api("good_square", "math.good_square")(lambda x, name=None: apply_op("GoodSquare", x=x))
    r = ft.check_kernel_set(ks)
    assert r.subject == "kernel set 'broken'" and r.skipped == []
    assert "1 kernel factories return callables taking the node's inputs" in r.checked
    assert "1 gradients agree with central differences of the CPU kernel" in r.checked


def test_kernel_for_undefined_op() -> None:
    ks = _square_set()
    ks.kernel("NoSuchOp", device_type="CPU")(lambda ctx: (lambda x: x))
    _fails(ks, "kernel for op 'NoSuchOp' on 'CPU'", "no op 'NoSuchOp' is defined")


def test_badly_named_op() -> None:
    _fails(_square_set(op="lower_case_op"), "op 'lower_case_op'", "CamelCase")


def test_op_defined_by_another_plugin() -> None:
    ks = KernelSet("broken")
    ks.op(OpDef("Identity", inputs=["input: T"], outputs=["output: T"], attrs=["T: type"]))
    # Identity is the core's essential kernel set's (flowrt.engine.essential)
    _fails(ks, "op 'Identity'", "also defined by plugin 'essential'")
    ks = KernelSet("broken")
    ks.op(OpDef("Relu", inputs=["features: T"], outputs=["activations: T"],
                attrs=["T: {float, double}"]))
    _fails(ks, "op 'Relu'", "also defined by plugin 'standard'")


def test_shape_function_returning_too_many_shapes() -> None:
    ks = _square_set(shape_fn=lambda o: [o.inputs[0].shape, o.inputs[0].shape])
    _fails(ks, "op 'BrokenSquare'", "returned 2 shapes", "1 outputs")


def test_shape_function_crashing() -> None:
    ks = _square_set(shape_fn=lambda o: [TensorShape([o.node_attrs["axis"]])])
    _fails(ks, "op 'BrokenSquare'", "shape function raised KeyError: 'axis'",
           "dtypes ['float32']", "shape errors must be ValueError")


def test_shape_function_value_errors_are_allowed() -> None:
    def needs_rank_1(o: Any) -> list[TensorShape]:
        if o.inputs[0].shape.ndims != 1:
            raise ValueError("Shape must be rank 1")
        return [o.inputs[0].shape]

    r = ft.check_kernel_set(_square_set(shape_fn=needs_rank_1))
    assert r.skipped[0] == ("shape function of 'BrokenSquare': raised ValueError/TypeError "
                            "for both unknown-rank and [?, ?] inputs")


def test_kernel_factory_returning_a_non_callable() -> None:
    ks = _square_set()
    ks.kernel("BrokenSquare")(lambda ctx: 42)
    _fails(ks, "kernel for op 'BrokenSquare' on '*'", "expected the compute callable")


def test_kernel_factory_raising() -> None:
    ks = _square_set()

    @ks.kernel("BrokenSquare", device_type="CPU")
    def _factory(ctx: Any) -> Any:
        return {"a": 1}[ctx.attrs["no_such_attr"]]

    _fails(ks, "kernel for op 'BrokenSquare' on 'CPU'", "the factory raised KeyError")


def test_compute_with_wrong_arity() -> None:
    ks = _square_set()
    ks.kernel("BrokenSquare")(lambda ctx: (lambda: 1.0))
    _fails(ks, "cannot take 1 positional arguments", "plain kernel")


def test_unknown_kernel_kind() -> None:
    ks = _square_set()
    ks.kernel("BrokenSquare", kind="fancy")(lambda ctx: (lambda x: x))
    _fails(ks, "kind 'fancy' is not one of")


def test_gradient_for_unknown_op_and_bad_signature() -> None:
    ks = _square_set()
    ks.gradient("NoSuchOp")(lambda op, grad: [grad])
    _fails(ks, "gradient of op 'NoSuchOp'", "no op 'NoSuchOp'")
    ks = _square_set()
    ks.gradient("BrokenSquare")(lambda op: [])
    _fails(ks, "gradient of op 'BrokenSquare'", "must accept (op, grad)")


@pytest.mark.parametrize("name, why", [
    ("not an identifier", "is not a dotted Python identifier"),
    ("nosuchnamespace.fn", "'nosuchnamespace' is not one of flowrt's API namespaces"),
    ("Session", "is hidden by flowrt's own attribute"),
    ("import_graph_def", "is hidden by flowrt's own attribute"),
    ("add", "already exported by another plugin"),
])
def test_bad_api_names(name: str, why: str) -> None:
    ks = _square_set()
    ks.api(name)(lambda x: x)
    _fails(ks, f"API name {name!r}", why)


# -- broken devices and device types ----------------------------------------------------
class _Dev(Device):
    def __init__(self, index: int = 0, job: str = "localhost", task: int = 0,
                 type_name: str = "WIDGET"):
        super().__init__(type_name, index, job, task)

    def to_host(self, value: Any) -> np.ndarray:
        return np.array(value, copy=True)

    def from_host(self, value: np.ndarray) -> Any:
        return np.array(value, copy=True)


def _dtype(discover: Any, name: str = "WIDGET") -> DeviceType:
    return DeviceType(name, discover, priority=1)


def test_good_device_type_passes() -> None:
    r = ft.check_device_type(_dtype(lambda c, j, t: [_Dev(0, j, t), _Dev(1, j, t)]))
    assert len(r.parts) == 2


def test_device_that_changes_dtype_on_the_way_back() -> None:
    class Lossy(_Dev):
        def to_host(self, value: Any) -> np.ndarray:
            return np.asarray(value, dtype=np.float64)

    with pytest.raises(AssertionError, match=r"device '/job:localhost/replica:0/task:0/"
                                             r"device:WIDGET:0': from_host/to_host round "
                                             r"trip changed a float32"):
        ft.check_device(Lossy())


def test_device_that_mutates_the_host_array() -> None:
    class Mutating(_Dev):
        def from_host(self, value: np.ndarray) -> Any:
            value[...] = 0
            return value

    with pytest.raises(AssertionError, match="from_host.* modified its argument"):
        ft.check_device(Mutating())


def test_device_without_copies() -> None:
    class Bare(Device):
        pass

    with pytest.raises(AssertionError, match="raised NotImplementedError: device .*need "
                                             "from_host"):
        ft.check_device(Bare("WIDGET", 0))


def test_device_type_whose_discovery_raises() -> None:
    def discover(config: Any, job: str, task: int) -> list[Device]:
        raise OSError("libwidget.so not found")

    with pytest.raises(AssertionError, match="device type 'WIDGET': discover.* raised "
                                             "OSError: libwidget.so not found; discovery "
                                             "must return"):
        ft.check_device_type(_dtype(discover))


def test_device_type_empty_without_reason_and_with_reason() -> None:
    with pytest.raises(AssertionError, match="unavailable_reason is not set"):
        ft.check_device_type(_dtype(lambda c, j, t: []))
    dt = _dtype(lambda c, j, t: [])
    dt.unavailable_reason = "no widget driver"
    assert ft.check_device_type(dt).skipped == ["device checks: no devices here "
                                                "(no widget driver)"]


def test_device_type_returning_wrong_devices() -> None:
    with pytest.raises(AssertionError, match="returned device .*GADGET:0' of type 'GADGET'"):
        ft.check_device_type(_dtype(lambda c, j, t: [_Dev(0, j, t, "GADGET")]))
    with pytest.raises(AssertionError, match="device names must start with "
                                             "/job:worker/replica:0/task:3/"):
        ft.check_device_type(_dtype(lambda c, j, t: [_Dev(0)]))
    with pytest.raises(AssertionError, match="two devices named"):
        ft.check_device_type(_dtype(lambda c, j, t: [_Dev(0, j, t), _Dev(0, j, t)]))
    bad = _dtype(lambda c, j, t: [])
    bad.name = "wid get"
    with pytest.raises(AssertionError, match="device type 'wid get': the name must be"):
        ft.check_device_type(bad)


# -- transports -------------------------------------------------------------------------
class _Loop(Transport):
    def __init__(self, scheme: str = "loopback") -> None:
        self.scheme = scheme
        self.servers: dict[str, Any] = {}

    def start_server(self, address: str, master: Any, worker: Any) -> Any:
        srv = SimpleNamespace(address=address, master=master, worker=worker,
                              stop=lambda: self.servers.pop(address, None))
        self.servers[address] = srv
        return srv

    def master_client(self, address: str) -> Any:
        return self.servers[address].master

    def worker_client(self, address: str) -> Any:
        return self.servers[address].worker


def test_custom_transport_passes_the_served_check() -> None:
    t = _Loop()
    r = ft.check_transport(t, timeout=30)
    assert r.checked[-1] == "a server from start_server() serves sessions on " \
                            "loopback://<address>"
    assert t.servers == {}  # the server was stopped


def test_transport_static_failures() -> None:
    with pytest.raises(AssertionError, match="transport 'Loop': scheme must be"):
        ft.check_transport(_Loop("Loop"))

    class Half(Transport):
        scheme = "half"

        def start_server(self, address: str, master: Any, worker: Any) -> Any:
            return None

    with pytest.raises(AssertionError, match="transport 'half': master_client is not "
                                             "implemented"):
        ft.check_transport(Half())


def test_transport_whose_server_has_no_address() -> None:
    class NoAddress(_Loop):
        def start_server(self, address: str, master: Any, worker: Any) -> Any:
            return SimpleNamespace(stop=lambda: None)

    with pytest.raises(AssertionError, match="without an address"):
        ft.check_transport(NoAddress("noaddr"))


def test_transport_that_loses_state_between_sessions() -> None:
    class Forgetful(_Loop):
        """Every client connection gets a brand new master: variables vanish."""

        def master_client(self, address: str) -> Any:
            rt = tf.default_runtime()
            return Master(rt, Worker(rt, "localhost", 0, None))

    with pytest.raises(AssertionError, match="a second session on 'forgetful://127.0.0.1:0' "
                                             "could not read the variable"):
        ft.check_transport(Forgetful("forgetful"), timeout=30)


def test_transport_live_check_times_out() -> None:
    import threading

    gate = threading.Event()

    class Hanging(_Loop):
        def master_client(self, address: str) -> Any:
            gate.wait(10)
            return super().master_client(address)

    try:
        with pytest.raises(AssertionError, match="did not finish within 0.5 s"):
            ft.check_transport(Hanging("hang"), timeout=0.5)
    finally:
        gate.set()


# -- graph passes -----------------------------------------------------------------------
def test_good_graph_pass_passes() -> None:
    r = ft.check_graph_pass(GraphPass("noop_pass", lambda ir, ctx: None))
    assert "the rewritten graph keeps its fetches and computes the same values" in r.checked


def test_graph_pass_that_removes_a_fetch() -> None:
    def drop_y(ir: Any, ctx: Any) -> None:
        del ir.nodes["y"]

    with pytest.raises(AssertionError, match="graph pass 'drop_y': the pass removed node "
                                             "'y', which produces a fetch"):
        ft.check_graph_pass(GraphPass("drop_y", drop_y))


def test_graph_pass_that_changes_values() -> None:
    def swap(ir: Any, ctx: Any) -> None:
        ir.nodes["y"].inputs = [("z0", 0)]

    with pytest.raises(AssertionError, match="(no longer runs|computes)"):
        ft.check_graph_pass(GraphPass("swap", swap))


def test_graph_pass_bad_fields() -> None:
    with pytest.raises(AssertionError, match="graph pass 'has space': the name must be"):
        ft.check_graph_pass(GraphPass("has space", lambda ir, ctx: None))
    with pytest.raises(AssertionError, match="run must be callable as run"):
        ft.check_graph_pass(GraphPass("one_arg", lambda ir: None))  # type: ignore[arg-type]


# -- whole plugins ----------------------------------------------------------------------
def test_plugin_with_unmarked_hook() -> None:
    mod = SimpleNamespace(__name__="unmarked_plugin", flowrt_kernel_sets=lambda: [])
    with pytest.raises(AssertionError, match="plugin 'unmarked_plugin': flowrt_kernel_sets "
                                             "is not marked with @flowrt.hookimpl"):
        ft.check_plugin(mod)


def test_plugin_with_misspelled_hook() -> None:
    mod = SimpleNamespace(__name__="typo_plugin",
                          flowrt_kernel_set=tf.hookimpl(lambda: []))
    with pytest.raises(AssertionError, match="plugin 'typo_plugin': .*unknown hook "
                                             "'flowrt_kernel_set'"):
        ft.check_plugin(mod)


def test_plugin_without_hooks_and_bad_results() -> None:
    with pytest.raises(AssertionError, match="implements none of flowrt's hooks"):
        ft.check_plugin(SimpleNamespace(__name__="empty_plugin"))
    mod = SimpleNamespace(__name__="dict_plugin",
                          flowrt_device_types=tf.hookimpl(lambda: {"X": 1}))
    with pytest.raises(AssertionError, match="flowrt_device_types.. returned dict, "
                                             "expected a list"):
        ft.check_plugin(mod)
    twins = SimpleNamespace(__name__="twin_plugin", flowrt_device_types=tf.hookimpl(
        lambda: [_dtype(lambda c, j, t: []), _dtype(lambda c, j, t: [])]))
    with pytest.raises(AssertionError, match="returns two device types named .'WIDGET'."):
        ft.check_plugin(twins)


def test_plugin_errors_name_the_plugin_and_the_object() -> None:
    ks = _square_set(name="inner")
    ks.kernel("BrokenSquare")(lambda ctx: None)
    mod = SimpleNamespace(__name__="outer_plugin",
                          flowrt_kernel_sets=tf.hookimpl(lambda: [ks]))
    with pytest.raises(AssertionError) as ei:
        ft.check_plugin(mod)
    assert str(ei.value).startswith(
        "flowrt conformance: plugin 'outer_plugin': kernel set 'inner': kernel for op "
        "'BrokenSquare' on '*': the factory returned NoneType")


def test_plugin_by_unknown_name() -> None:
    with pytest.raises(AssertionError, match="plugin 'no_such_plugin_xyz': is neither an "
                                             "entry point"):
        ft.check_plugin("no_such_plugin_xyz")


def test_sign_free_outputs_compare_up_to_the_sign_of_each_column():
    from flowrt.tools import conformance_kernels as ck

    rng = np.random.default_rng(3)
    v = rng.standard_normal((2, 4, 4))
    flipped = v * np.array([1.0, -1.0, 1.0, -1.0])
    assert not ck._close(v, flipped)
    assert ck._close(ck._column_signs_fixed(v), ck._column_signs_fixed(flipped))
    other = v.copy()
    other[0, 1, 2] += 0.5  # a real difference survives the normalisation
    assert not ck._close(ck._column_signs_fixed(v), ck._column_signs_fixed(other))
    assert ck.SIGN_FREE_COLUMNS["SelfAdjointEigV2"] == {"v"}
