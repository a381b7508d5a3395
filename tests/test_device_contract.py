"""The device-array contract (docs/plugins.md, "The device-array contract"): every value
that crosses between host memory and a device goes through that device's ``to_host`` /
``from_host``, never through numpy or a guess at the device library.

The device here is ``EMU``: its arrays are :class:`EmuArray` wrappers with no
``__array__``, no ``.get()``, no buffer and no DLPack, and its kernels refuse anything
else, so any crossing that skipped the device would fail loudly. Each test counts the
calls the device saw.
"""
from __future__ import annotations

import socket
import threading
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import flowrt as tf
from flowrt import errors
from flowrt.device import Device, DeviceType, host_array, takes_host_arrays
from flowrt.graph import apply_op
from flowrt.op_registry import KernelSet
from flowrt.plugin.resources import VarRef
from flowrt.runtime import Runtime
from flowrt.server import Server

EMU = "/device:EMU:0"


# -- the EMU device plugin ----------------------------------------------------------------
class EmuArray:
    """An array in EMU memory: only the EMU device can read it."""

    __slots__ = ("_data", "shape", "dtype")

    def __init__(self, data: Any):
        self._data = np.array(data, copy=True)
        self.shape, self.dtype = self._data.shape, self._data.dtype


class Counts:
    """How many values crossed each way (shared by every EMU device of a runtime)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.to_host = 0
        self.from_host = 0

    def add(self, what: str) -> None:
        with self.lock:
            setattr(self, what, getattr(self, what) + 1)


class EmuDevice(Device):
    """A device with explicit copies and arrays of its own."""

    xp = None  # no generic kernels run here (array_kernels=False)

    def __init__(self, index: int, job: str, task: int, counts: Counts):
        super().__init__("EMU", index, job, task, memory_limit=1 << 20)
        self.counts = counts

    def to_host(self, value: Any) -> np.ndarray:
        if not isinstance(value, EmuArray):
            raise TypeError(f"EMU to_host got a {type(value).__name__}")
        self.counts.add("to_host")
        return np.array(value._data, copy=True)

    def from_host(self, value: np.ndarray) -> Any:
        if not isinstance(value, np.ndarray):
            raise TypeError(f"EMU from_host got a {type(value).__name__}")
        self.counts.add("from_host")
        return EmuArray(value)


class EmuType(DeviceType):
    """The EMU type: it also takes EmuArrays a caller feeds, and gives them back."""

    def holds(self, value: Any) -> bool:
        return isinstance(value, EmuArray)

    def feed(self, value: Any, np_dtype: Any) -> Any:
        return value if value.dtype == np_dtype else EmuArray(value._data.astype(np_dtype))

    def to_host(self, value: Any) -> np.ndarray:
        return np.array(value._data, copy=True)


def _emu(x: Any) -> np.ndarray:
    if not isinstance(x, EmuArray):
        raise TypeError(f"an EMU kernel got a {type(x).__name__}, not an EmuArray")
    return x._data


def _not_string(attrs: dict[str, Any]) -> bool:
    t = attrs.get("T", attrs.get("dtype"))
    return t is None or t.base_dtype != tf.string


def emu_kernels() -> KernelSet:
    ks = KernelSet("emu")

    @ks.kernel("Mul", device_type="EMU", supports=_not_string)
    def _mul(ctx: Any) -> Any:
        return lambda a, b: EmuArray(_emu(a) * _emu(b))

    @ks.kernel("AddV2", "Add", device_type="EMU", supports=_not_string)
    def _add(ctx: Any) -> Any:
        return lambda a, b: EmuArray(_emu(a) + _emu(b))

    @ks.kernel("Identity", device_type="EMU", supports=_not_string)
    def _identity(ctx: Any) -> Any:
        def identity(x: Any) -> Any:
            _emu(x)
            return x
        return identity

    @ks.kernel("VariableV2", device_type="EMU", supports=_not_string)
    def _variable(ctx: Any) -> Any:
        rm, name = ctx.device.resource_mgr, ctx.attrs.get("shared_name") or ctx.node_name
        make = lambda: VarRef(name, ctx.attrs["dtype"], ctx.attrs.get("shape"))  # noqa: E731
        return lambda: rm.lookup_or_create(ctx.attrs.get("container") or "", name, make)

    @ks.kernel("Assign", device_type="EMU", supports=_not_string)
    def _assign(ctx: Any) -> Any:
        def assign(ref: VarRef, value: Any) -> VarRef:
            _emu(value)
            ref.value = value
            return ref
        return assign

    return ks


def emu_runtime(counts: Counts, *, host_inputs: bool | None = None, n: int = 1,
                priority: int = 1, extra: KernelSet | None = None) -> Runtime:
    """A runtime with the EMU plugin (``n`` devices per task), and the kernel set
    ``extra`` as a plugin of its own."""

    def discover(config: Any, job: str, task: int) -> list[Device]:
        devs = [EmuDevice(i, job, task, counts) for i in range(n)]
        for d in devs:
            d.host_inputs = host_inputs
        return devs

    ks = emu_kernels()
    plugin = SimpleNamespace(
        flowrt_device_types=tf.hookimpl(
            lambda: [EmuType("EMU", discover, priority=priority, array_kernels=False)]),
        flowrt_kernel_sets=tf.hookimpl(lambda: [ks]))
    plugins: dict[str, Any] = {"emu": plugin}
    if extra is not None:
        plugins[extra.name] = SimpleNamespace(
            flowrt_kernel_sets=tf.hookimpl(lambda: [extra]))
    return Runtime(autoload=False, plugins=plugins)


@pytest.fixture
def counts() -> Counts:
    return Counts()


@pytest.fixture
def rt(counts: Counts) -> Runtime:
    return emu_runtime(counts)


# -- feeds, constants, fetches --------------------------------------------------------------
def test_feed_kernel_fetch_on_the_device(rt: Runtime, counts: Counts) -> None:
    g = tf.Graph(runtime=rt)
    with g.as_default():
        with tf.device(EMU):
            x = tf.placeholder(tf.float32, [3], name="x")    # fed to a node on EMU
            y = x * tf.constant([1.0, 2.0, 3.0]) + x         # a constant on EMU
    with tf.Session(graph=g) as sess:
        where = sess.placement(y, [x])
        assert {where[n] for n in ("_arg_x_0", "mul", "add")} == \
            {"/job:localhost/replica:0/task:0/device:EMU:0"}
        out = sess.run(y, {x: [1.0, 2.0, 3.0]})
        assert type(out) is np.ndarray and out.dtype == np.float32
        np.testing.assert_array_equal(out, [2.0, 6.0, 12.0])
        assert counts.from_host >= 2 and counts.to_host == 1  # the constant, the feed
        # each step: the feed goes in through from_host, the fetch comes out through
        # to_host (the constant was put on the device once, when the step compiled)
        before = (counts.from_host, counts.to_host)
        out2 = sess.run(y, {x: np.array([0.0, 1.0, 0.0], np.float32)})
        np.testing.assert_array_equal(out2, [0.0, 3.0, 0.0])
        assert (counts.from_host - before[0], counts.to_host - before[1]) == (1, 1)


def test_strings_cross_devices_in_host_memory(rt: Runtime, counts: Counts) -> None:
    """A string ``Switch`` placed on the device (as a ``cond``'s is): its input comes over
    from the CPU and its output goes back, both left in host memory (TF's HostMemory),
    never through the device's copies."""
    g = tf.Graph(runtime=rt)
    with g.as_default():
        s = tf.constant(["a", "bc"], name="s")
        p = tf.constant(True, name="p")
        with tf.device(EMU):
            _, taken = apply_op("Switch", name="sw", data=s, pred=p)
        out = tf.identity(taken, name="back_on_cpu")
    with tf.Session(graph=g) as sess:
        where = sess.placement(out)
        assert where["sw"].endswith("EMU:0") and where["s"].endswith("CPU:0")
        before = (counts.from_host, counts.to_host)
        assert sess.run(out).tolist() == [b"a", b"bc"]
        assert counts.to_host == before[1]  # the strings never went through the device


def test_a_feed_on_the_cpu_reaches_the_device_through_a_copy(rt: Runtime,
                                                              counts: Counts) -> None:
    g = tf.Graph(runtime=rt)
    with g.as_default():
        x = tf.placeholder(tf.float32, [2], name="x")  # on the CPU
        with tf.device(EMU):
            y = x * x
        z = tf.identity(y, name="back_on_cpu")          # a copy to the CPU: to_host
    with tf.Session(graph=g) as sess:
        assert sess.placement(z, [x])["_arg_x_0"].endswith("CPU:0")
        assert sess.run([y, z], {x: [3.0, 4.0]})[1].tolist() == [9.0, 16.0]
    assert counts.from_host >= 1 and counts.to_host >= 2


def test_a_fed_device_array_stays_on_the_device(rt: Runtime, counts: Counts) -> None:
    """A value the EMU type ``holds`` is fed through ``DeviceType.feed`` and reaches the
    kernel as it is (no trip through the host); fetched back, it comes through the
    type's ``to_host``."""
    g = tf.Graph(runtime=rt)
    with g.as_default():
        with tf.device(EMU):
            x = tf.placeholder(tf.float64, [2], name="x")
            y = x + x
    fed = EmuArray(np.array([1.5, 2.5]))
    with tf.Session(graph=g) as sess:
        sess.run(y, {x: [0.0, 0.0]})
        from_host = counts.from_host
        out, back = sess.run([y, x], {x: fed})
        assert counts.from_host == from_host          # the fed EmuArray was not copied
    assert out.tolist() == [3.0, 5.0]
    assert type(back) is np.ndarray and back.tolist() == [1.5, 2.5]


def test_a_device_array_fed_to_a_cpu_node_comes_through_its_types_to_host(
        rt: Runtime, counts: Counts) -> None:
    g = tf.Graph(runtime=rt)
    with g.as_default():
        x = tf.placeholder(tf.float32, [2], name="x")  # on the CPU
        y = tf.identity(x) * 2.0
    with tf.Session(graph=g) as sess:
        assert sess.placement(y, [x])["_arg_x_0"].endswith("CPU:0")
        out = sess.run(y, {x: EmuArray(np.array([1.0, 2.5], np.float32))})
    assert out.tolist() == [2.0, 5.0] and counts.from_host == 0


def test_a_device_whose_kernels_take_host_arrays_gets_feeds_as_fed(counts: Counts) -> None:
    """``Device.host_inputs = True`` (the built-in GPU): feeds are not copied by the
    executor; the kernels take host arrays themselves."""
    ks = KernelSet("emu_host")
    seen: list[type] = []

    @ks.kernel("Neg", device_type="EMU")
    def _neg(ctx: Any) -> Any:
        def neg(x: Any) -> Any:
            seen.append(type(x))
            return ctx.device.from_host(-np.asarray(x))
        return neg

    rt = emu_runtime(counts, host_inputs=True, extra=ks)
    g = tf.Graph(runtime=rt)
    with g.as_default():
        with tf.device(EMU):
            x = tf.placeholder(tf.float32, [2], name="x")
            y = tf.negative(x)
    with tf.Session(graph=g) as sess:
        assert sess.run(y, {x: [1.0, -2.0]}).tolist() == [-1.0, 2.0]
    assert seen == [np.ndarray]
    assert takes_host_arrays(SimpleNamespace(device_type="CPU"))
    assert not takes_host_arrays(SimpleNamespace(device_type="EMU"))


def test_a_fetch_the_device_cannot_bring_back_names_the_fetch_and_device(
        counts: Counts) -> None:
    ks = KernelSet("emu_broken")

    @ks.kernel("Neg", device_type="EMU")
    def _neg(ctx: Any) -> Any:
        return lambda x: object()  # a kernel bug: no EMU array, no host value

    g = tf.Graph(runtime=emu_runtime(counts, extra=ks))
    with g.as_default():
        with tf.device(EMU):
            y = tf.negative(tf.constant([1.0]))
    with tf.Session(graph=g) as sess:
        with pytest.raises(errors.InternalError) as ei:
            sess.run(y)
    msg = ei.value.message
    assert "fetch 0 of the step, from /job:localhost/replica:0/task:0/device:EMU:0" in msg
    assert "to_host of a object raised TypeError: EMU to_host got a object" in msg


# -- variables, checkpoints, summaries ------------------------------------------------------
def test_variable_saved_and_restored_through_the_device(rt: Runtime, counts: Counts,
                                                         tmp_path: Any) -> None:
    g = tf.Graph(runtime=rt)
    with g.as_default():
        with tf.device(EMU):
            v = tf.Variable(np.array([1.0, 2.0], np.float32), name="v")
            bump = tf.assign(v, v * tf.constant([10.0, 10.0]))
        saver = tf.train.Saver([v])
    prefix = str(tmp_path / "ckpt")
    with tf.Session(graph=g) as sess:
        sess.run(v.initializer)
        sess.run(bump)
        assert sess.placement(v)["v"].endswith("EMU:0")
        to_host = counts.to_host
        path = saver.save(sess, prefix)
        assert counts.to_host > to_host          # the saved value left through to_host
    reader = tf.train.NewCheckpointReader(path)
    np.testing.assert_array_equal(reader.get_tensor("v"), [10.0, 20.0])
    with tf.Session(graph=g) as sess:
        from_host = counts.from_host
        saver.restore(sess, path)
        assert counts.from_host > from_host      # restored through from_host
        value = sess.run(v)
    assert type(value) is np.ndarray and value.tolist() == [10.0, 20.0]


def test_summary_of_a_value_on_the_device(rt: Runtime, counts: Counts) -> None:
    g = tf.Graph(runtime=rt)
    with g.as_default():
        with tf.device(EMU):
            x = tf.placeholder(tf.float32, [], name="x")
            y = x * tf.constant(3.0)
        s = tf.summary.scalar("tripled", y)
        h = tf.summary.histogram("values", y)
        merged = tf.summary.merge([s, h])
    with tf.Session(graph=g) as sess:
        assert sess.placement(merged, [x])["mul"].endswith("EMU:0")
        blob = sess.run(merged, {x: 2.0})
    summary = tf.Summary()
    summary.ParseFromString(blob)
    by_tag = {v.tag: v for v in summary.value}
    assert by_tag["tripled"].simple_value == 6.0
    assert by_tag["values"].histo.num == 1 and by_tag["values"].histo.sum == 6.0
    assert counts.to_host >= 1


# -- across tasks: the wire ------------------------------------------------------------------
def free_ports(n: int) -> list[int]:
    """``n`` distinct ports of 127.0.0.1 that were free a moment ago."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize("protocol", ["grpc"])
def test_remote_feed_fetch_and_send_through_the_device(counts: Counts,
                                                        protocol: str) -> None:
    """A cluster of in-process servers on a real transport: a feed to a node on the
    ps's EMU, a fetch from it (the RunGraph reply), and a tensor sent from the ps's EMU
    to the worker's CPU all cross through the device, never through ``np.asarray``."""
    rt = emu_runtime(counts)
    ports = free_ports(2)
    cluster = tf.train.ClusterSpec({"ps": [f"127.0.0.1:{ports[0]}"],
                                    "worker": [f"127.0.0.1:{ports[1]}"]})
    servers = [Server(cluster, "ps", 0, protocol=protocol, runtime=rt),
               Server(cluster, "worker", 0, protocol=protocol, runtime=rt)]
    try:
        g = tf.Graph(runtime=rt)
        with g.as_default():
            with tf.device("/job:ps/task:0" + EMU):
                x = tf.placeholder(tf.float32, [2], name="x")
                v = tf.Variable(np.array([1.0, 2.0], np.float32), name="v")
                on_ps = v * x
            with tf.device("/job:worker/task:0/device:CPU:0"):
                on_worker = tf.identity(on_ps, name="on_worker") * 2.0
        with tf.Session(servers[1].target, graph=g) as sess:
            sess.run(v.initializer)
            a, b = sess.run([on_ps, on_worker], {x: [3.0, 4.0]})
            assert sess.placement(on_ps, [x])["mul"].startswith("/job:ps/replica:0/task:0")
        assert type(a) is np.ndarray and a.tolist() == [3.0, 8.0]
        assert b.tolist() == [6.0, 16.0]
        assert counts.from_host >= 2 and counts.to_host >= 2
    finally:
        for s in servers:
            s.stop()


# -- host_array: the one helper for a crossing with no device at hand ----------------------
class CpuDLPack:
    """A DLPack exporter on the CPU that is no numpy array (as a torch CPU tensor)."""

    def __init__(self, a: np.ndarray):
        self._a = a

    def __dlpack__(self, **kw: Any) -> Any:
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self._a.__dlpack_device__()


class ArrayLike:
    def __init__(self, a: Any):
        self._a = np.asarray(a)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._a if dtype is None else self._a.astype(dtype)


def test_host_array_asks_the_device_then_the_types_then_dlpack_then_numpy(
        rt: Runtime, counts: Counts) -> None:
    a = np.arange(3, dtype=np.float32)
    assert host_array(a) is a
    assert host_array(np.float32(2.5)).tolist() == 2.5 and host_array([1, 2]).tolist() == [1, 2]
    dev = EmuDevice(0, "localhost", 0, counts)
    assert host_array(EmuArray(a), dev).tolist() == [0.0, 1.0, 2.0]
    assert counts.to_host == 1
    # no device given: the runtime's device type that holds it
    assert host_array(EmuArray(a), runtime=rt).tolist() == [0.0, 1.0, 2.0]
    out = host_array(CpuDLPack(a))
    assert type(out) is np.ndarray and out.tolist() == [0.0, 1.0, 2.0]
    assert host_array(ArrayLike([[1, 2]])).shape == (1, 2)


def test_host_array_names_what_it_cannot_convert(counts: Counts) -> None:
    with pytest.raises(errors.InternalError) as ei:
        host_array(EmuArray([1.0]), runtime=Runtime(autoload=False))  # no EMU type here
    msg = ei.value.message
    assert "cannot bring a value of type test_device_contract.EmuArray to host memory" in msg
    assert "no device type of the runtime holds it" in msg and "DLPack" in msg

    class Bad:
        def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
            raise RuntimeError("device lost")

    with pytest.raises(errors.InternalError, match="numpy could not convert it "
                                                   r"\(RuntimeError: device lost\)"):
        host_array(Bad(), runtime=Runtime(autoload=False))
    dev = EmuDevice(0, "localhost", 0, counts)
    with pytest.raises(errors.InternalError, match="device /job:localhost/replica:0/task:0/"
                                                   "device:EMU:0: to_host of a .*Bad raised "
                                                   "TypeError: EMU to_host got a Bad"):
        host_array(Bad(), dev)
