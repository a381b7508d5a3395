"""The CUDA device plugin and the GPU kernels.

Discovery, config handling and kernel registration are checked everywhere. Everything
that needs a GPU skips cleanly without one: device conformance, copies (pinned staging,
DLPack, concurrency), every GPU kernel against its CPU kernel on random inputs (placed
explicitly, without soft placement, and checked to have run on the GPU), gradients and
training against the CPU, placement rules, memory limits, and a two-task step whose
tensors cross the wire from a GPU.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors
from flowrt import testing as ft
from flowrt.graph import apply_op
from flowrt.plugins.devices import cuda as cuda_dev
from flowrt.plugins.kernels import cuda as cuda_k
from flowrt.runtime import default_runtime


_DT = cuda_dev.gpu_device_type()
GPUS = _DT.discover(None, "localhost", 0)
needs_gpu = pytest.mark.skipif(not GPUS, reason=f"no GPU here: {_DT.unavailable_reason}")
GPU0 = "/device:GPU:0"
CPU0 = "/device:CPU:0"


# -- everywhere: discovery, config, registration --------------------------------------
def test_discovery_without_cupy_finds_nothing_and_says_why(monkeypatch):
    def broken() -> Any:
        raise ImportError("No module named 'cupy'")

    monkeypatch.setattr(cuda_dev, "_cupy", broken)
    dt = cuda_dev.gpu_device_type()
    assert dt.discover(None, "localhost", 0) == []
    assert "cupy could not be imported" in dt.unavailable_reason
    assert "No module named 'cupy'" in dt.unavailable_reason


def test_discovery_without_a_driver_finds_nothing_and_says_why(monkeypatch):
    def count() -> int:
        raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")

    fake = SimpleNamespace(cuda=SimpleNamespace(runtime=SimpleNamespace(getDeviceCount=count)))
    monkeypatch.setattr(cuda_dev, "_cupy", lambda: fake)
    dt = cuda_dev.gpu_device_type()
    assert dt.discover(None, "localhost", 0) == []
    assert "no usable CUDA driver" in dt.unavailable_reason
    assert "InsufficientDriver" in dt.unavailable_reason
    fake.cuda.runtime.getDeviceCount = lambda: 0
    assert dt.discover(None, "localhost", 0) == []
    assert "reports no device" in dt.unavailable_reason


def test_a_task_wanting_no_gpu_never_imports_cupy(monkeypatch):
    def forbidden() -> Any:
        raise AssertionError("cupy imported although no GPU is wanted")

    monkeypatch.setattr(cuda_dev, "_cupy", forbidden)
    dt = cuda_dev.gpu_device_type()
    assert dt.discover(tf.ConfigProto(device_count={"GPU": 0}), "ps", 0) == []
    monkeypatch.setenv("FLOWRT_GPUS", "0")
    assert dt.discover(None, "ps", 0) == []


def test_a_session_asking_for_no_gpu_leaves_cupy_unimported():
    code = ("import sys, flowrt as tf\n"
            "with tf.Session(config=tf.ConfigProto(device_count={'GPU': 0})) as s:\n"
            "    assert s.run(tf.constant(2.0) * 3.0) == 6.0\n"
            "    assert not [d for d in s.list_devices() if 'GPU' in d.name]\n"
            "print('cupy' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_visible_device_list_orders_and_checks_ids():
    opts = SimpleNamespace(visible_device_list="1,0")
    assert cuda_dev._visible(opts, 2) == [1, 0]
    assert cuda_dev._visible(SimpleNamespace(visible_device_list=""), 3) == [0, 1, 2]
    for bad in ("2", "0,0", "x", "-1"):
        with pytest.raises(errors.InvalidArgumentError, match="visible_device_list") as e:
            cuda_dev._visible(SimpleNamespace(visible_device_list=bad), 2)
        assert "count is 2" in str(e.value)


def test_flowrt_plugins_shows_the_gpu_type_and_its_state():
    r = subprocess.run([sys.executable, "-m", "flowrt.cli", "plugins"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    line = [x for x in r.stdout.splitlines() if x.strip().startswith("GPU ")]
    assert line, r.stdout
    if GPUS:
        assert "device(s)" in line[0]
    else:
        assert "no devices (" in line[0]


def test_every_listed_op_has_a_gpu_kernel_and_strings_stay_off_the_gpu():
    rt = default_runtime()
    for op in cuda_k.GPU_OPS + cuda_k.HOST_OPS + ("Const",):
        k = rt.kernels.get((op, "GPU"))
        assert k is not None and k.plugin == "cuda_kernels", op
    assert "GPU" in rt.kernel_device_types("Add", {"T": tf.float32})
    assert "GPU" in rt.kernel_device_types("Add", {"T": tf.int32})  # in host memory
    assert "GPU" not in rt.kernel_device_types("Identity", {"T": tf.string})
    assert "GPU" not in rt.kernel_device_types("IdentityN", {"T": [tf.float32, tf.string]})
    assert "GPU" not in rt.kernel_device_types("Const", {"dtype": tf.string})
    segsum = {"Tindices": tf.int32, "Tnumsegments": tf.int32}
    assert "GPU" in rt.kernel_device_types("UnsortedSegmentSum", {"T": tf.float32, **segsum})
    assert "GPU" not in rt.kernel_device_types("UnsortedSegmentSum",
                                               {"T": tf.complex64, **segsum})
    # ops without a GPU kernel: strings, checkpoint I/O, printing
    for op in ("StringJoin", "SaveV2", "Print", "Einsum"):
        if op in rt.op_defs:
            assert "GPU" not in rt.kernel_device_types(op), op


def test_the_gpu_kernel_set_passes_the_kernel_set_checks():
    ft.check_kernel_set(cuda_k.ks, default_runtime())


def test_array_kernels_do_not_run_on_the_gpu_type_unless_listed():
    rt = default_runtime()
    assert rt.device_types["GPU"].array_kernels is False
    assert rt.find_kernel("Einsum", "GPU") is None  # not listed: CPU only
    assert rt.find_kernel("_Send", "GPU") is not None  # framework op: every device


def test_the_kernel_wrapper_copies_only_what_is_on_the_host():
    """The wrapper of a GPU kernel, on a stand-in array module (no GPU needed): inputs
    already on the device reach the kernel as they are, host arrays and Python scalars
    are copied over first, every call runs inside the device's activation, and an
    out-of-memory error becomes ResourceExhaustedError naming the node and device."""
    from flowrt.op_registry import KernelDef

    class DevArray(np.ndarray):
        pass

    class OOM(Exception):
        pass

    copied, active = [], []

    class Active:
        def __enter__(self):
            active.append(1)

        def __exit__(self, *exc):
            active.pop()

    def from_host(x):
        copied.append(x)
        return np.asarray(x).view(DevArray)

    xp = SimpleNamespace(ndarray=DevArray, cuda=SimpleNamespace(
        memory=SimpleNamespace(OutOfMemoryError=OOM)))
    dev = SimpleNamespace(xp=xp, activate=lambda: Active(), from_host=from_host,
                          name="/device:GPU:0")
    seen = []

    def base_factory(ctx):
        def add(a, b):
            assert active == [1]
            seen.append((a, b))
            if getattr(a, "ndim", 0) == 2:
                raise OOM("out of memory allocating 8 bytes")
            return a + b
        return add

    rt = default_runtime()
    wrapped = cuda_k._wrap(KernelDef("AddV2", base_factory, "*"), rt.op_defs["AddV2"])
    ctx = SimpleNamespace(device=dev, attrs={"T": tf.float32},
                          input_dtypes=[tf.float32, tf.float32], node_name="the_add",
                          op_type="AddV2")
    add = wrapped.factory(ctx)
    a = np.float32([1, 2]).view(DevArray)
    b = np.float32([3, 4]).view(DevArray)
    out = add(a, b)
    assert copied == [] and seen[-1][0] is a and seen[-1][1] is b
    np.testing.assert_array_equal(out, [4, 6])
    host = np.float32([5, 6])
    out = add(a, host)
    assert len(copied) == 1 and copied[0] is host and type(seen[-1][1]) is DevArray
    np.testing.assert_array_equal(out, [6, 8])
    add(a, 2.0)
    assert len(copied) == 2 and copied[1] == 2.0
    with pytest.raises(errors.ResourceExhaustedError, match="'the_add'.*GPU:0"):
        add(np.ones((2, 2), np.float32).view(DevArray), b)
    assert active == []


# -- with a GPU -------------------------------------------------------------------------
def _placed(md: Any) -> dict[str, str]:
    """{node name: device} from a FULL_TRACE run's step stats."""
    out = {}
    for ds in md.step_stats.dev_stats:
        for ns in ds.node_stats:
            out[ns.node_name] = ds.device
    return out


def _run(device: str, build: Callable[..., Any], feeds: dict[str, np.ndarray],
         soft: bool = False, config: Any = None) -> tuple[list[np.ndarray], dict[str, str], Any]:
    g = tf.Graph()
    with g.as_default():
        phs = {k: tf.placeholder(tf.as_dtype(v.dtype), v.shape, name=k)
               for k, v in feeds.items()}
        with tf.device(device):
            out = build(**phs)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        cfg = config or tf.ConfigProto(allow_soft_placement=soft)
        md = tf.RunMetadata()
        with tf.Session(graph=g, config=cfg) as s:
            vals = s.run(outs, {phs[k]: v for k, v in feeds.items()},
                         options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                         run_metadata=md)
    return vals, _placed(md), outs


def _f(*shape: int, lo: float = -2.0, hi: float = 2.0, dt: Any = np.float32
       ) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda r: r.uniform(lo, hi, shape).astype(dt)


def _i(*shape: int, lo: int = -9, hi: int = 9, dt: Any = np.int64
       ) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda r: r.integers(lo, hi, shape).astype(dt)


def _nz(*shape: int, dt: Any = np.int64) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda r: (r.integers(1, 9, shape) * r.choice([-1, 1], shape)).astype(dt)


def _b(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda r: r.random(shape) < 0.5


def _c(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda r: (r.normal(size=shape) + 1j * r.normal(size=shape)).astype(np.complex64)


_UNARY_RANGES = {"Sqrt": (0.1, 4.0), "Log": (0.1, 4.0), "Log1p": (-0.5, 4.0),
                 "Asin": (-0.9, 0.9), "Acos": (-0.9, 0.9), "Atanh": (-0.9, 0.9),
                 "Acosh": (1.1, 4.0), "Rsqrt": (0.1, 4.0), "Reciprocal": (0.5, 4.0),
                 "Inv": (0.5, 4.0)}
_BIN_FLOAT = ["AddV2", "Sub", "Mul", "Maximum", "Minimum", "Add", "Div", "RealDiv",
              "SquaredDifference", "DivNoNan", "MulNoNan", "Less", "LessEqual", "Greater",
              "GreaterEqual", "Equal", "NotEqual", "FloorDiv", "FloorMod"]


def _x(op: str, **kw: Any) -> Callable[..., Any]:
    return lambda **ph: apply_op(op, **kw, **{k: v for k, v in ph.items()})


# op -> (build(**placeholders), {name: input generator}); names are the op's arguments
CASES: dict[str, tuple[Callable[..., Any], dict[str, Callable]]] = {}
for _op in cuda_k._UNARY:
    if _op in ("LogicalNot",):
        CASES[_op] = (_x(_op), {"x": _b(4, 5)})
    elif _op in ("Real", "Imag", "Angle", "Conj"):
        CASES[_op] = (_x(_op), {"input": _c(4, 5)})
    elif _op == "ComplexAbs":
        CASES[_op] = (_x(_op), {"x": _c(4, 5)})
    elif _op == "Cast":
        CASES[_op] = (_x("Cast", DstT=tf.int64), {"x": _f(4, 5, lo=-50, hi=50)})
    else:
        lo, hi = _UNARY_RANGES.get(_op, (-2.0, 2.0))
        CASES[_op] = (_x(_op), {"x": _f(4, 5, lo=lo, hi=hi)})
for _op in _BIN_FLOAT:
    CASES[_op] = (_x(_op), {"x": _f(3, 4), "y": _f(1, 4, lo=0.5, hi=2.0)})
CASES.update({
    "Atan2": (_x("Atan2"), {"y": _f(3, 4), "x": _f(3, 4)}),
    "TruncateDiv": (_x("TruncateDiv"), {"x": _i(3, 4), "y": _nz(3, 4)}),
    "TruncateMod": (_x("TruncateMod"), {"x": _i(3, 4), "y": _nz(3, 4)}),
    "Mod": (_x("Mod"), {"x": _i(3, 4), "y": _nz(3, 4)}),
    "Pow": (_x("Pow"), {"x": _f(3, 4, lo=0.1, hi=2.0), "y": _f(3, 4)}),
    "Xdivy": (_x("Xdivy"), {"x": _f(3, 4), "y": _f(3, 4, lo=0.5, hi=2)}),
    "Xlogy": (_x("Xlogy"), {"x": _f(3, 4), "y": _f(3, 4, lo=0.5, hi=2)}),
    "Complex": (_x("Complex"), {"real": _f(3, 4), "imag": _f(3, 4)}),
    "LogicalAnd": (_x("LogicalAnd"), {"x": _b(3, 4), "y": _b(3, 4)}),
    "LogicalOr": (_x("LogicalOr"), {"x": _b(3, 4), "y": _b(3, 4)}),
    "AddN": (lambda a, b, c: apply_op("AddN", inputs=[a, b, c]),
             {"a": _f(3, 4), "b": _f(3, 4), "c": _f(3, 4)}),
    "ClipByValue": (lambda t: apply_op("ClipByValue", t=t, clip_value_min=-0.5,
                                       clip_value_max=0.7), {"t": _f(3, 4)}),
    "MatMul": (lambda a, b: apply_op("MatMul", a=a, b=b, transpose_b=True),
               {"a": _f(5, 7), "b": _f(3, 7)}),
    "BatchMatMulV2": (_x("BatchMatMulV2", adj_x=True), {"x": _f(2, 4, 3), "y": _f(1, 4, 5)}),
    "BatchMatMul": (_x("BatchMatMul"), {"x": _f(2, 3, 4), "y": _f(2, 4, 5)}),
    "Reshape": (lambda x: apply_op("Reshape", tensor=x, shape=[4, -1]), {"x": _f(2, 3, 4)}),
    "Transpose": (lambda x: apply_op("Transpose", x=x, perm=[2, 0, 1]), {"x": _f(2, 3, 4)}),
    "ConjugateTranspose": (lambda x: apply_op("ConjugateTranspose", x=x, perm=[1, 0]),
                           {"x": _c(2, 3)}),
    "ConcatV2": (lambda a, b: apply_op("ConcatV2", values=[a, b], axis=1),
                 {"a": _f(2, 3), "b": _f(2, 5)}),
    "Pack": (lambda a, b: apply_op("Pack", values=[a, b], axis=1), {"a": _f(2, 3), "b": _f(2, 3)}),
    "Unpack": (lambda x: apply_op("Unpack", value=x, num=3, axis=1), {"x": _f(2, 3, 4)}),
    "Split": (lambda x: apply_op("Split", split_dim=1, value=x, num_split=2), {"x": _f(3, 4)}),
    "SplitV": (lambda x: apply_op("SplitV", value=x, size_splits=[1, -1], split_dim=1,
                                  num_split=2), {"x": _f(3, 4)}),
    "Squeeze": (lambda x: apply_op("Squeeze", input=x, squeeze_dims=[1]), {"x": _f(3, 1, 4)}),
    "ExpandDims": (lambda x: apply_op("ExpandDims", input=x, dim=-1), {"x": _f(3, 4)}),
    "Tile": (lambda x: apply_op("Tile", input=x, multiples=[2, 3]), {"x": _f(2, 3)}),
    "Pad": (lambda x: apply_op("Pad", input=x, paddings=[[1, 0], [2, 1]]), {"x": _f(2, 3)}),
    "PadV2": (lambda x: apply_op("PadV2", input=x, paddings=[[1, 0], [2, 1]],
                                 constant_values=np.float32(7)), {"x": _f(2, 3)}),
    "MirrorPad": (lambda x: apply_op("MirrorPad", input=x, paddings=[[1, 1], [2, 1]],
                                     mode="REFLECT"), {"x": _f(3, 4)}),
    "MirrorPadGrad": (lambda x: apply_op("MirrorPadGrad", input=x, paddings=[[1, 1], [2, 1]],
                                         mode="SYMMETRIC"), {"x": _f(5, 7)}),
    "Slice": (lambda x: apply_op("Slice", input=x, begin=[1, 0], size=[2, -1]), {"x": _f(4, 5)}),
    "StridedSlice": (lambda x: x[1:, ::-2], {"x": _f(4, 5)}),
    "StridedSliceGrad": (lambda dy: apply_op("StridedSliceGrad", shape=[4, 5], begin=[1, 0],
                                             end=[4, 5], strides=[1, 2], dy=dy),
                         {"dy": _f(3, 3)}),
    "Gather": (lambda p, i: apply_op("Gather", params=p, indices=i),
               {"p": _f(5, 3), "i": _i(4, lo=0, hi=5, dt=np.int32)}),
    "GatherV2": (lambda p, i: apply_op("GatherV2", params=p, indices=i, axis=1),
                 {"p": _f(5, 3), "i": _i(4, lo=0, hi=3, dt=np.int64)}),
    "GatherNd": (lambda p, i: apply_op("GatherNd", params=p, indices=i),
                 {"p": _f(5, 3), "i": _i(4, 2, lo=0, hi=3, dt=np.int32)}),
    "OneHot": (lambda i: apply_op("OneHot", indices=i, depth=4, on_value=np.float32(2),
                                  off_value=np.float32(-1)),
               {"i": _i(5, lo=-1, hi=5, dt=np.int64)}),
    "Fill": (lambda v: apply_op("Fill", dims=[2, 3], value=v), {"v": _f()}),
    "ZerosLike": (_x("ZerosLike"), {"x": _f(2, 3)}),
    "OnesLike": (_x("OnesLike"), {"x": _f(2, 3)}),
    "Range": (lambda s: apply_op("Range", start=s, limit=np.float32(5), delta=np.float32(0.5)),
              {"s": _f(lo=-1, hi=1)}),
    "LinSpace": (lambda s: apply_op("LinSpace", start=s, stop=np.float32(3), num=7),
                 {"s": _f()}),
    "ReverseV2": (lambda x: apply_op("ReverseV2", tensor=x, axis=[0, 2]), {"x": _f(2, 3, 4)}),
    "Shape": (_x("Shape"), {"input": _f(2, 3, 4)}),
    "ShapeN": (lambda a, b: apply_op("ShapeN", input=[a, b]), {"a": _f(2, 3), "b": _f(4)}),
    "Size": (_x("Size"), {"input": _f(2, 3, 4)}),
    "Rank": (_x("Rank"), {"input": _f(2, 3, 4)}),
    "Select": (_x("Select"), {"condition": _b(3, 4), "t": _f(3, 4), "e": _f(3, 4)}),
    "SelectV2": (_x("SelectV2"), {"condition": _b(1, 4), "t": _f(3, 4), "e": _f(3, 1)}),
    "BroadcastTo": (lambda x: apply_op("BroadcastTo", input=x, shape=[3, 2, 4]),
                    {"x": _f(2, 1)}),
    "BroadcastArgs": (_x("BroadcastArgs"), {"s0": lambda r: np.array([2, 1, 4], np.int32),
                                            "s1": lambda r: np.array([3, 1], np.int32)}),
    "BroadcastGradientArgs": (_x("BroadcastGradientArgs"),
                              {"s0": lambda r: np.array([2, 1, 4], np.int32),
                               "s1": lambda r: np.array([3, 1], np.int32)}),
    "MatrixDiag": (_x("MatrixDiag"), {"diagonal": _f(2, 3)}),
    "MatrixDiagPart": (_x("MatrixDiagPart"), {"input": _f(2, 3, 4)}),
    "MatrixSetDiag": (_x("MatrixSetDiag"), {"input": _f(2, 3, 4), "diagonal": _f(2, 3)}),
    "MatrixBandPart": (lambda x: apply_op("MatrixBandPart", input=x, num_lower=1,
                                          num_upper=0), {"x": _f(4, 4)}),
    "Diag": (_x("Diag"), {"diagonal": _f(2, 3)}),
    "DiagPart": (_x("DiagPart"), {"input": _f(2, 3, 2, 3)}),
    "ScatterNd": (lambda i, u: apply_op("ScatterNd", indices=i, updates=u, shape=[4, 3]),
                  {"i": lambda r: np.array([[0], [2], [0]], np.int32), "u": _f(3, 3)}),
    "UnsortedSegmentSum": (lambda d, s: apply_op("UnsortedSegmentSum", data=d, segment_ids=s,
                                                 num_segments=4),
                           {"d": _f(5, 3), "s": _i(5, lo=0, hi=4, dt=np.int32)}),
    "Where": (_x("Where"), {"input": _b(3, 4)}),
    "Identity": (_x("Identity"), {"input": _f(3)}),
    "IdentityN": (lambda a, b: apply_op("IdentityN", input=[a, b]), {"a": _f(3), "b": _b(2)}),
    "StopGradient": (_x("StopGradient"), {"input": _f(3)}),
    "PreventGradient": (_x("PreventGradient"), {"input": _f(3)}),
    "Snapshot": (_x("Snapshot"), {"input": _f(3)}),
    "PlaceholderWithDefault": (lambda x: apply_op("PlaceholderWithDefault", input=x,
                                                  shape=[3]) * 2.0, {"x": _f(3)}),
    "BiasAdd": (_x("BiasAdd"), {"value": _f(2, 3, 4), "bias": _f(4)}),
    "BiasAddGrad": (_x("BiasAddGrad"), {"out_backprop": _f(2, 3, 4)}),
    "L2Loss": (_x("L2Loss"), {"t": _f(3, 4)}),
    "LeakyRelu": (_x("LeakyRelu", alpha=0.3), {"features": _f(3, 4)}),
    "LeakyReluGrad": (_x("LeakyReluGrad", alpha=0.3),
                      {"gradients": _f(3, 4), "features": _f(3, 4)}),
    "SoftmaxCrossEntropyWithLogits": (
        _x("SoftmaxCrossEntropyWithLogits"),
        {"features": _f(4, 5, lo=-5, hi=5), "labels": _f(4, 5, lo=0, hi=1)}),
    "SparseSoftmaxCrossEntropyWithLogits": (
        _x("SparseSoftmaxCrossEntropyWithLogits"),
        {"features": _f(4, 5, lo=-5, hi=5), "labels": _i(4, lo=0, hi=5)}),
    "Conv2D": (lambda x, w: apply_op("Conv2D", input=x, filter=w, strides=[1, 2, 1, 1],
                                     padding="SAME"), {"x": _f(2, 7, 6, 3), "w": _f(3, 2, 3, 4)}),
    "Conv2DBackpropInput": (
        lambda w, d: apply_op("Conv2DBackpropInput", input_sizes=[2, 7, 6, 3], filter=w,
                              out_backprop=d, strides=[1, 2, 1, 1], padding="SAME"),
        {"w": _f(3, 2, 3, 4), "d": _f(2, 4, 6, 4)}),
    "Conv2DBackpropFilter": (
        lambda x, d: apply_op("Conv2DBackpropFilter", input=x, filter_sizes=[3, 2, 3, 4],
                              out_backprop=d, strides=[1, 2, 1, 1], padding="SAME"),
        {"x": _f(2, 7, 6, 3), "d": _f(2, 4, 6, 4)}),
    "MaxPool": (lambda x: apply_op("MaxPool", input=x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1],
                                   padding="VALID"), {"x": _f(2, 6, 6, 3)}),
    "AvgPool": (lambda x: apply_op("AvgPool", value=x, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1],
                                   padding="SAME"), {"x": _f(2, 6, 5, 3)}),
    "MaxPoolGrad": (lambda x, g: apply_op(
        "MaxPoolGrad", orig_input=x, orig_output=apply_op(
            "MaxPool", input=x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"),
        grad=g, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"),
        {"x": _f(2, 6, 6, 3), "g": _f(2, 3, 3, 3)}),
    "MaxPoolGradGrad": (lambda x, g: apply_op(
        "MaxPoolGradGrad", orig_input=x, orig_output=apply_op(
            "MaxPool", input=x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"),
        grad=g, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"),
        {"x": _f(2, 6, 6, 3), "g": _f(2, 6, 6, 3)}),
    "AvgPoolGrad": (lambda g: apply_op("AvgPoolGrad", orig_input_shape=[2, 6, 5, 3], grad=g,
                                       ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1],
                                       padding="SAME"), {"g": _f(2, 3, 3, 3)}),
})
for _op in ("Sum", "Mean", "Prod", "Max", "Min", "EuclideanNorm"):
    CASES[_op] = (lambda input, _op=_op: apply_op(_op, input=input, reduction_indices=[0, 2],
                                                  keep_dims=_op == "Max"),
                  {"input": _f(3, 4, 5, lo=0.5, hi=1.5)})
for _op in ("All", "Any"):
    CASES[_op] = (lambda input, _op=_op: apply_op(_op, input=input, reduction_indices=1),
                  {"input": _b(3, 4)})
for _op in ("ArgMax", "ArgMin"):
    CASES[_op] = (lambda input, _op=_op: apply_op(_op, input=input, dimension=1),
                  {"input": _f(3, 4)})
for _op in ("Cumsum", "Cumprod"):
    CASES[_op] = (lambda x, _op=_op: apply_op(_op, x=x, axis=1, exclusive=True, reverse=True),
                  {"x": _f(3, 4)})
for _op in ("Relu", "Relu6", "Elu", "Selu", "Softplus", "Softsign", "Softmax", "LogSoftmax"):
    arg = "logits" if "Softmax" in _op else "features"
    CASES[_op] = (_x(_op), {arg: _f(3, 4, lo=-8, hi=8)})
for _op, arg2 in (("ReluGrad", "features"), ("Relu6Grad", "features"),
                  ("EluGrad", "outputs"), ("SeluGrad", "outputs"),
                  ("SoftplusGrad", "features"), ("SoftsignGrad", "features")):
    CASES[_op] = (_x(_op), {"gradients": _f(3, 4), arg2: _f(3, 4, lo=-8, hi=8)})
for _op in ("SigmoidGrad", "TanhGrad", "SqrtGrad", "RsqrtGrad", "ReciprocalGrad", "InvGrad"):
    CASES[_op] = (_x(_op), {"y": _f(3, 4, lo=0.5, hi=2), "dy": _f(3, 4)})

# stateful ops and Placeholder are covered by the training and feed tests below
_STATEFUL = set(cuda_k._STATE) | {"Placeholder"}


def _compared_elsewhere() -> set[str]:
    """GPU ops whose CPU comparison lives with their area's tests:
    tests/test_nn_conv_ops.py::test_gpu_matches_cpu (forward and gradient programs) and
    tests/test_linalg_gpu.py::test_gpu_matches_cpu."""
    import test_linalg_gpu
    from test_nn_conv_ops import GPU_AREA_OPS

    linalg = set()
    for build in test_linalg_gpu.CASES.values():
        g = tf.Graph()
        with g.as_default():
            build()
        linalg |= {op.type for op in g.get_operations()}
    return set(GPU_AREA_OPS) | linalg


def test_every_gpu_op_has_a_comparison_case():
    missing = sorted(set(cuda_k.GPU_OPS) - set(CASES) - _STATEFUL - _compared_elsewhere())
    assert not missing, f"GPU ops without a CPU comparison case: {missing}"


def _tolerance(a: np.ndarray) -> dict[str, float]:
    if a.dtype.kind in "fc":
        return {"rtol": 2e-5, "atol": 2e-5}
    return {"rtol": 0, "atol": 0}


@needs_gpu
@pytest.mark.parametrize("op", sorted(CASES))
def test_gpu_kernel_matches_cpu_kernel(op):
    build, gens = CASES[op]
    r = np.random.default_rng(abs(hash(op)) % 2**32)
    feeds = {k: g(r) for k, g in gens.items()}
    want, _, _ = _run(CPU0, build, feeds)
    got, placed, outs = _run(GPU0, build, feeds)
    assert placed[outs[0].op.name].endswith("GPU:0"), (op, placed)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert type(g) is type(w) and g.dtype == w.dtype and g.shape == w.shape, op
        np.testing.assert_allclose(g, w, **_tolerance(w), err_msg=op)


@needs_gpu
@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["AddV2", "Mul", "Sub", "Maximum", "SquaredDifference", "RealDiv"]),
       st.sampled_from([np.float32, np.float64, np.float16]),
       st.lists(st.integers(1, 5), min_size=0, max_size=3),
       st.integers(0, 2**31 - 1))
def test_broadcasting_binary_ops_match_the_cpu(op, dt, shape, seed):
    r = np.random.default_rng(seed)
    x = r.uniform(-3, 3, shape).astype(dt)
    y = r.uniform(0.5, 3, shape[-1:] or []).astype(dt)
    want, _, _ = _run(CPU0, _x(op), {"x": x, "y": y})
    got, _, _ = _run(GPU0, _x(op), {"x": x, "y": y})
    tol = {"rtol": 2e-3, "atol": 2e-3} if dt == np.float16 else {"rtol": 1e-5, "atol": 1e-6}
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), **tol)
    assert np.asarray(got[0]).dtype == dt


@needs_gpu
@settings(max_examples=15, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 40), st.booleans(),
       st.booleans(), st.integers(0, 2**31 - 1))
def test_matmul_matches_the_cpu(m, k, n, ta, tb, seed):
    r = np.random.default_rng(seed)
    a = r.normal(size=(k, m) if ta else (m, k)).astype(np.float32)
    b = r.normal(size=(n, k) if tb else (k, n)).astype(np.float32)

    def build(a, b):
        return tf.matmul(a, b, transpose_a=ta, transpose_b=tb)

    want, _, _ = _run(CPU0, build, {"a": a, "b": b})
    got, _, _ = _run(GPU0, build, {"a": a, "b": b})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)


def _mlp(x: Any, y: Any, seed: int = 1) -> tuple[Any, list[Any]]:
    init = tf.random_normal_initializer(stddev=0.1, seed=seed)
    h = x
    ws = []
    for i, n in enumerate((32, 16, 10)):
        w = tf.get_variable(f"w{i}", [h.shape[1], n], initializer=init)
        b = tf.get_variable(f"b{i}", [n], initializer=tf.zeros_initializer())
        ws += [w, b]
        h = tf.nn.bias_add(tf.matmul(h, w), b)
        if i < 2:
            h = tf.nn.relu(h)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
    return loss, ws


@needs_gpu
@pytest.mark.parametrize("opt", ["sgd", "momentum", "adam", "adagrad", "rmsprop"])
def test_training_on_the_gpu_matches_the_cpu(opt):
    r = np.random.default_rng(0)
    xs = r.normal(size=(64, 20)).astype(np.float32)
    ys = r.integers(0, 10, 64).astype(np.int64)
    make = {"sgd": lambda: tf.train.GradientDescentOptimizer(0.2),
            "momentum": lambda: tf.train.MomentumOptimizer(0.1, 0.9),
            "adam": lambda: tf.train.AdamOptimizer(0.01),
            "adagrad": lambda: tf.train.AdagradOptimizer(0.1),
            "rmsprop": lambda: tf.train.RMSPropOptimizer(0.01, centered=True)}[opt]

    def train(device: str) -> tuple[list[float], dict[str, str], list[np.ndarray]]:
        g = tf.Graph()
        with g.as_default(), tf.device(device):
            x = tf.placeholder(tf.float32, [None, 20])
            y = tf.placeholder(tf.int64, [None])
            loss, ws = _mlp(x, y)
            step = make().minimize(loss)
            init = tf.global_variables_initializer()
        md = tf.RunMetadata()
        with tf.Session(graph=g, config=tf.ConfigProto(allow_soft_placement=True)) as s:
            s.run(init)
            losses = []
            for i in range(15):
                opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE) if i == 0 else None
                _, lv = s.run([step, loss], {x: xs, y: ys}, options=opts,
                              run_metadata=md if i == 0 else None)
                losses.append(float(lv))
            return losses, _placed(md), s.run(ws)

    cpu_l, _, cpu_w = train(CPU0)
    gpu_l, placed, gpu_w = train(GPU0)
    np.testing.assert_allclose(gpu_l, cpu_l, rtol=2e-4, atol=2e-5)
    for a, b in zip(gpu_w, cpu_w):
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-4)
    assert gpu_l[-1] < gpu_l[0]
    on_gpu = {n for n, d in placed.items() if d.endswith("GPU:0")}
    assert any("MatMul" in n for n in on_gpu) and any(n.startswith("w0") for n in on_gpu)
    assert any("Apply" in n or "update" in n for n in on_gpu), sorted(on_gpu)


@needs_gpu
def test_gradients_on_the_gpu_match_the_cpu():
    r = np.random.default_rng(3)
    feeds = {"x": r.normal(size=(4, 6, 6, 3)).astype(np.float32)}

    def build(x):
        w = tf.constant(np.random.default_rng(4).normal(size=(3, 3, 3, 5)).astype(np.float32))
        h = tf.nn.conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME")
        h = tf.nn.max_pool(tf.nn.elu(h), [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        h = tf.nn.avg_pool(tf.sigmoid(h) * tf.tanh(h), [1, 2, 2, 1], [1, 1, 1, 1], "SAME")
        loss = tf.reduce_sum(tf.nn.softplus(h) + tf.sqrt(tf.abs(h) + 1.0))
        return tf.gradients(loss, [x, w])

    want, _, _ = _run(CPU0, build, feeds)
    got, placed, _ = _run(GPU0, build, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    kinds = {n for n, d in placed.items() if d.endswith("GPU:0")}
    assert any("Conv2DBackpropFilter" in n for n in kinds), sorted(kinds)


@needs_gpu
def test_device_conformance():
    ft.check_device_type(cuda_dev.gpu_device_type())


@needs_gpu
def test_list_devices_shows_the_gpu_with_its_memory():
    with tf.Session() as s:
        gpus = [d for d in s.list_devices() if d.device_type == "GPU"]
    assert gpus and gpus[0].name.endswith("/device:GPU:0")
    assert gpus[0].memory_limit_bytes > 1 << 30


def _bf16() -> Any:
    try:
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    except ImportError:  # pragma: no cover
        return None


@needs_gpu
@pytest.mark.parametrize("nbytes", [0, 24, 3 << 20, 40 << 20])
@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "int64", "int8", "bool",
                                "complex64", "bfloat16"])
def test_host_device_round_trips_are_exact(nbytes, dt):
    d = GPUS[0]
    npd = _bf16() if dt == "bfloat16" else np.dtype(dt)
    n = nbytes // npd.itemsize
    r = np.random.default_rng(n)
    a = (r.normal(size=n) * 100).astype(npd) if npd.kind != "b" else r.random(n) < 0.5
    a = a.reshape(-1, 2) if n % 2 == 0 and n else a
    before = a.copy()
    g = d.from_host(a)
    assert isinstance(g, d.xp.ndarray) and g.dtype == a.dtype and g.shape == a.shape
    back = d.to_host(g)
    assert type(back) is not d.xp.ndarray and back.dtype == a.dtype
    assert back.tobytes() == a.tobytes()
    assert a.tobytes() == before.tobytes()  # the source was not touched


@needs_gpu
def test_non_contiguous_and_concurrent_copies():
    d = GPUS[0]
    base = np.arange(24 << 20, dtype=np.float32).reshape(-1, 4)
    view = base[::2, 1:3]
    assert np.array_equal(d.to_host(d.from_host(view)), view)
    results: list[bool] = []

    def worker(k: int) -> None:
        a = np.full(5 << 20, k, np.float32)
        results.append(bool(np.array_equal(d.to_host(d.from_host(a)), a)))

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert results == [True] * 6


@needs_gpu
def test_the_compute_stream_waits_for_a_staged_copy():
    d = GPUS[0]
    a = np.random.default_rng(0).normal(size=(64 << 20) // 4).astype(np.float32)
    with d.activate():
        g = d.from_host(a)
        s = float(d.xp.sum(g.astype(d.xp.float64)).get())  # queued right behind the copy
    assert s == pytest.approx(float(a.sum(dtype=np.float64)), rel=1e-9)


@needs_gpu
def test_dlpack_in_without_a_copy():
    d = GPUS[0]
    cp = d.xp
    src = cp.arange(10, dtype=cp.float32)
    g = d.from_dlpack(src)
    assert g.data.ptr == src.data.ptr
    assert np.array_equal(d.to_host(g), np.arange(10, dtype=np.float32))


@needs_gpu
def test_gpu_arrays_can_be_fed_to_gpu_and_cpu_consumers():
    d = GPUS[0]
    cp = d.xp
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [3])
        with tf.device(GPU0):
            on_gpu = x * 2.0
        with tf.device(CPU0):
            on_cpu = x + 1.0
    with tf.Session(graph=g) as s:
        for fed in (cp.asarray(np.array([1, 2, 3], np.float32)),
                    cp.asarray(np.array([1, 2, 3], np.float64))):  # converted on the GPU
            a, b = s.run([on_gpu, on_cpu], {x: fed})
            assert isinstance(a, np.ndarray) and a.tolist() == [2, 4, 6]
            assert b.tolist() == [2, 3, 4]
        with pytest.raises(ValueError, match="Cannot feed value of shape"):
            s.run(on_gpu, {x: cp.zeros(4, cp.float32)})
        try:
            import torch
        except ImportError:  # pragma: no cover - the GPU image has torch
            return
        t = torch.arange(3, dtype=torch.float32, device="cuda") + 1  # through DLPack
        assert s.run(on_gpu, {x: t}).tolist() == [2, 4, 6]


@needs_gpu
def test_int32_nodes_on_the_gpu_run_in_host_memory():
    def build(x):
        n = tf.shape(x)[0] * 2 + 1  # int32 arithmetic: host memory
        return tf.reshape(tf.tile(x, [n, 1]), [-1]), n

    feeds = {"x": np.ones((3, 2), np.float32)}
    (flat, n), placed, outs = _run(GPU0, build, feeds)
    assert n == 7 and flat.shape == (42,)
    assert placed[outs[1].op.name].endswith("GPU:0")


@needs_gpu
def test_a_string_op_cannot_be_forced_onto_the_gpu():
    g = tf.Graph()
    with g.as_default(), tf.device(GPU0):
        s = tf.identity(tf.constant(["a", "b"]))
    with tf.Session(graph=g) as sess:
        with pytest.raises(errors.InvalidArgumentError, match="GPU"):
            sess.run(s)
    with tf.Session(graph=g, config=tf.ConfigProto(allow_soft_placement=True)) as sess:
        assert sess.run(s).tolist() == [b"a", b"b"]


@needs_gpu
def test_random_ops_on_the_gpu_give_the_cpu_values():
    def build(x):
        return tf.random_uniform([4, 3], seed=5) + x, tf.random_normal([5], seed=7)

    feeds = {"x": np.zeros((4, 3), np.float32)}
    want, _, _ = _run(CPU0, build, feeds)
    got, placed, outs = _run(GPU0, build, feeds)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    rnd = [n for n in placed if n.endswith("RandomUniform") or n.endswith("RandomStandardNormal")]
    assert len(rnd) == 2 and all(placed[n].endswith("GPU:0") for n in rnd), placed


@needs_gpu
def test_a_variable_and_its_colocated_initializer_stay_on_the_gpu():
    g = tf.Graph()
    with g.as_default(), tf.device(GPU0):
        v = tf.get_variable("v", [3, 4], initializer=tf.truncated_normal_initializer(seed=2))
        y = tf.reduce_sum(v * 2.0)
    md = tf.RunMetadata()
    with tf.Session(graph=g) as s:
        s.run(v.initializer, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
              run_metadata=md)
        assert s.run(y) == pytest.approx(2 * float(s.run(v).sum()), rel=1e-5)
    placed = _placed(md)
    assert placed["v"].endswith("GPU:0") and placed["v/Assign"].endswith("GPU:0")


def _python(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter (CuPy's pool settings are per process); the
    words it printed."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.split()


_SUBPROCESS_MEMORY = r"""
import numpy as np, flowrt as tf
from flowrt import errors
cfg = tf.ConfigProto(gpu_options=tf.GPUOptions(per_process_gpu_memory_fraction=0.02,
                                               allow_growth=True))
with tf.Session(config=cfg) as s:
    lim = [d for d in s.list_devices() if d.device_type == "GPU"][0].memory_limit_bytes
    n = int(lim // 4 * 1.5)
    with tf.device("/device:GPU:0"):
        big = tf.fill([n], 1.0)
        small = tf.reduce_sum(tf.fill([1000], 1.0))
    assert s.run(small) == 1000.0
    try:
        s.run(tf.reduce_sum(big))
    except errors.ResourceExhaustedError as e:
        assert "GPU:0" in str(e), e
        print("OOM", "fill" in str(e).lower())
    assert s.run(small) == 1000.0  # still serving after the failure
"""


@needs_gpu
def test_a_memory_fraction_caps_the_pool_and_oom_names_the_device():
    assert _python(_SUBPROCESS_MEMORY) == ["OOM", "True"]


@needs_gpu
@pytest.mark.parametrize("protocol", ["grpc", "zmq"])
def test_a_gpu_worker_and_a_cpu_ps_over_the_wire(protocol):
    if protocol == "zmq":
        pytest.importorskip("zmq", reason="pyzmq is not installed on this machine")
    cluster = ft.cluster_addresses(protocol, {"ps": 1, "worker": 1})
    ps = tf.train.Server(cluster, "ps", 0, protocol=protocol,
                         config=tf.ConfigProto(device_count={"GPU": 0}))
    w = tf.train.Server(cluster, "worker", 0, protocol=protocol)
    try:
        r = np.random.default_rng(0)
        a = r.normal(size=(300, 200)).astype(np.float32)
        g = tf.Graph()
        with g.as_default():
            with tf.device("/job:ps/task:0"):
                v = tf.Variable(a)
            with tf.device("/job:worker/task:0/device:GPU:0"):
                y = tf.matmul(v, v, transpose_b=True)  # reads the ps variable over the wire
                upd = v.assign_add(tf.ones_like(v))  # GPU value sent back to the ps
        md = tf.RunMetadata()
        with tf.Session(w.target, graph=g) as s:
            s.run(v.initializer)
            got = s.run(y, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                        run_metadata=md)
            np.testing.assert_allclose(got, a @ a.T, rtol=1e-4, atol=1e-3)
            s.run(upd.op)
            np.testing.assert_allclose(s.run(v), a + 1, rtol=1e-6)
        assert any(d.device.endswith("GPU:0") for d in md.step_stats.dev_stats)
    finally:
        w.stop()
        ps.stop()


def test_kernel_wrapper_positions_expand_list_arguments():
    od = default_runtime().op_def("ConcatV2")
    assert cuda_k._positions(od.inputs, {"N": 3}, {"axis"}) == {3}
    od = default_runtime().op_def("SplitV")
    assert cuda_k._positions(od.inputs, {}, {"size_splits", "split_dim"}) == {1, 2}


def test_environment_variable_limits_the_gpu_count(monkeypatch):
    monkeypatch.setenv("FLOWRT_GPUS", "0")
    assert cuda_dev._wanted(None) == 0
    monkeypatch.setenv("FLOWRT_GPUS", "2")
    assert cuda_dev._wanted(None) == 2
    assert cuda_dev._wanted(tf.ConfigProto(device_count={"GPU": 1})) == 1
    monkeypatch.delenv("FLOWRT_GPUS")
    assert cuda_dev._wanted(None) is None


if os.environ.get("FLOWRT_REQUIRE_GPU") == "1" and not GPUS:  # pragma: no cover
    raise RuntimeError(f"FLOWRT_REQUIRE_GPU=1 but no GPU: {_DT.unavailable_reason}")


@needs_gpu
def test_a_variable_updated_by_a_cpu_only_op_lives_on_the_cpu_in_every_step():
    # ScatterUpdate has no GPU kernel: the variable must be on the CPU already when the
    # step that only initializes it runs, or the update step would see another variable
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.zeros(4, np.float32))
        upd = tf.scatter_update(v, [1, 3], [5.0, 7.0])
    md = tf.RunMetadata()
    with tf.Session(graph=g) as s:
        s.run(v.initializer, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
              run_metadata=md)
        assert s.run(upd).tolist() == [0, 5, 0, 7]
        assert s.run(v).tolist() == [0, 5, 0, 7]
    placed = _placed(md)
    assert placed[v.op.name].endswith("CPU:0"), placed


@needs_gpu
def test_activate_is_reentrant_and_restores_the_threads_stream():
    d = GPUS[0]
    cp = d.xp
    before = cp.cuda.get_current_stream()
    assert cuda_dev.active_gpu() is None
    with d.activate():
        assert cp.cuda.get_current_stream() == d.compute_stream
        assert cuda_dev.active_gpu() == d.physical
        with d.activate():  # nested: no change, and nothing undone on its exit
            assert cp.cuda.get_current_stream() == d.compute_stream
        assert cp.cuda.get_current_stream() == d.compute_stream
    assert cp.cuda.get_current_stream() == before and cuda_dev.active_gpu() is None
    seen: list[bool] = []

    def other() -> None:  # another thread's state is its own
        seen.append(cuda_dev.active_gpu() is None and
                    cp.cuda.get_current_stream() != d.compute_stream)

    with d.activate():
        t = threading.Thread(target=other)
        t.start()
        t.join(10)
    assert seen == [True]


@needs_gpu
def test_the_peer_copy_path_orders_and_copies():
    # One GPU here: two device objects on it still take the cudaMemcpyPeerAsync path
    # (source contiguous after its stream's work, destination stream waiting, source
    # kept alive until the copy has run); two GPUs take the same code with peer access
    src = GPUS[0]
    dst = cuda_dev.CUDADevice(src.xp, 1, src.physical, memory_limit=src.memory_limit)
    cp = src.xp
    with src.activate():
        x = cp.arange(3 * 1000 * 1000, dtype=cp.float32).reshape(3, -1)[:, ::2] * 2
    y = dst._peer_copy(x, src)
    assert y.flags.c_contiguous and y.shape == x.shape
    assert np.array_equal(dst.to_host(y), src.to_host(x))


_SUBPROCESS_RESERVE = r"""
import cupy, flowrt as tf
cfg = tf.ConfigProto(gpu_options=tf.GPUOptions(per_process_gpu_memory_fraction=0.02,
                                               allow_growth=False))
with tf.Session(config=cfg) as s:
    gpu = [d for d in s.list_devices() if d.device_type == "GPU"][0]
    pool = cupy.get_default_memory_pool()
    lim = gpu.memory_limit_bytes
    print(pool.total_bytes() >= lim - (80 << 20), abs(pool.get_limit() - lim) <= lim // 100)
"""


@needs_gpu
def test_without_allow_growth_the_fraction_is_reserved_up_front():
    assert _python(_SUBPROCESS_RESERVE) == ["True", "True"]


@needs_gpu
def test_integer_constants_stay_in_host_memory_and_float_ones_go_to_the_gpu():
    d = GPUS[0]
    ints = cuda_k._const_factory(SimpleNamespace(attrs={"value": np.array([2, 3], np.int32)},
                                                 device=d))()
    floats = cuda_k._const_factory(SimpleNamespace(attrs={"value": np.ones(3, np.float32)},
                                                   device=d))()
    assert type(ints) is np.ndarray and not ints.flags.writeable
    assert isinstance(floats, d.xp.ndarray) and d.to_host(floats).tolist() == [1, 1, 1]


def test_cuda_and_gpu_names_canonicalise_to_gpu():
    from flowrt.device_spec import DeviceSpec

    for s in ("cuda:0", "/device:GPU:0", "/gpu:0", "/device:cuda:0"):
        assert DeviceSpec.from_string(s).to_string() == "/device:GPU:0", s
    assert cuda_dev.gpu_device_type().name == "GPU"


def _fake_cupy(count: int, cc: tuple[int, int]) -> Any:
    """Enough of CuPy for discovery (nothing here touches a GPU before first use)."""
    props = {"totalGlobalMem": 16 << 30, "name": b"Fake GPU", "major": cc[0],
             "minor": cc[1]}
    runtime = SimpleNamespace(getDeviceCount=lambda: count,
                              getDeviceProperties=lambda p: dict(props))
    return SimpleNamespace(cuda=SimpleNamespace(runtime=runtime), ndarray=type("nd", (), {}))


def test_discovery_reports_devices_with_their_compute_capability(monkeypatch):
    monkeypatch.setattr(cuda_dev, "_STATES", {})  # keep the fake out of the real GPUs' state
    monkeypatch.setattr(cuda_dev, "_cupy", lambda: _fake_cupy(2, (8, 0)))
    dt = cuda_dev.gpu_device_type()
    devs = dt.discover(tf.ConfigProto(gpu_options=tf.GPUOptions(visible_device_list="1")),
                       "worker", 3)
    assert [d.name for d in devs] == ["/job:worker/replica:0/task:3/device:GPU:0"]
    assert devs[0].physical == 1 and devs[0].compute_capability == (8, 0)
    assert devs[0].memory_limit == 16 << 30 and "Fake GPU" in devs[0].description
    assert dt.unavailable_reason is None


def test_is_gpu_available_checks_the_compute_capability(monkeypatch):
    from flowrt.runtime import default_runtime

    monkeypatch.setattr(cuda_dev, "_STATES", {})
    monkeypatch.setattr(cuda_dev, "_cupy", lambda: _fake_cupy(1, (8, 0)))
    monkeypatch.setitem(default_runtime().device_types, "GPU", cuda_dev.gpu_device_type())
    assert tf.test.is_gpu_available()
    assert tf.test.is_gpu_available(min_cuda_compute_capability=(7, 5))
    assert not tf.test.is_gpu_available(min_cuda_compute_capability=(9, 0))
    assert tf.test.gpu_device_name() == "/device:GPU:0"
