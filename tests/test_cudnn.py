"""Conv2D and its gradients through cuDNN (flowrt.plugins.kernels.cudnn_conv).

Everywhere: why cuDNN is not used is said plainly. On a machine with a GPU and NVIDIA's
cuDNN frontend: Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter on the GPU agree
with the CPU kernels over layouts, paddings (asymmetric SAME and EXPLICIT too), strides,
dilations and dtypes, and are checked to have gone through cuDNN; ``FLOWRT_CUDNN=0``,
``use_cudnn_on_gpu=False`` and float64 take the GEMM path and still agree.
"""
from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest

import flowrt as tf
from flowrt.plugins.devices import cuda as cuda_dev
from flowrt.plugins.kernels import cudnn_conv

_DT = cuda_dev.gpu_device_type()
GPUS = _DT.discover(None, "localhost", 0)
WHY = cudnn_conv.unavailable_reason()
needs_gpu = pytest.mark.skipif(not GPUS, reason=f"no GPU here: {_DT.unavailable_reason}")
needs_cudnn = pytest.mark.skipif(not GPUS or WHY is not None,
                                 reason=f"no GPU or no cuDNN here: "
                                        f"{_DT.unavailable_reason or WHY}")

if os.environ.get("FLOWRT_REQUIRE_CUDNN") == "1" and (not GPUS or WHY):  # pragma: no cover
    raise RuntimeError(f"FLOWRT_REQUIRE_CUDNN=1 but cuDNN cannot be used: "
                       f"{_DT.unavailable_reason or WHY}")


# -- everywhere ---------------------------------------------------------------------------
def test_the_reason_names_the_package_or_the_switch(monkeypatch):
    monkeypatch.setenv("FLOWRT_CUDNN", "0")
    assert cudnn_conv.unavailable_reason() == "FLOWRT_CUDNN=0 is set"
    monkeypatch.delenv("FLOWRT_CUDNN")
    why = cudnn_conv.unavailable_reason()
    try:
        import cudnn  # type: ignore  # noqa: F401, PLC0415  # optional package
    except ImportError:
        assert why is not None and "nvidia-cudnn-frontend" in why
        assert "No module named 'cudnn'" in why


def test_stats_count_and_keep_the_last_error():
    s = cudnn_conv.stats()
    assert set(s) == {"built", "unsupported", "executed", "last_error"}
    assert all(isinstance(s[k], int) and s[k] >= 0 for k in ("built", "unsupported",
                                                            "executed"))


# -- on a GPU -----------------------------------------------------------------------------
def _conv_step(device: str, x: np.ndarray, w: np.ndarray, gy_seed: int, **kw) -> list:
    """Conv2D of ``x`` by ``w`` on ``device``, and its gradients for a random ``grad_ys``."""
    g = tf.Graph()
    with g.as_default(), tf.device(device):
        xv = tf.constant(x)
        wv = tf.constant(w)
        y = tf.nn.conv2d(xv, wv, **kw)
        gy = tf.constant(np.random.default_rng(gy_seed).standard_normal(
            y.shape.as_list()).astype(x.dtype))
        dx, dw = tf.gradients(y, [xv, wv], grad_ys=gy)
    with tf.Session(graph=g) as s:
        return s.run([y, dx, dw])


CASES = [
    # (x NHWC shape, filter HWIO, kwargs): the tutorial layer, strides, paddings, layouts
    ((4, 14, 14, 32), (5, 5, 32, 64), dict(strides=[1, 1, 1, 1], padding="SAME")),
    ((3, 11, 9, 5), (3, 3, 5, 7), dict(strides=[1, 2, 2, 1], padding="VALID")),
    ((2, 8, 8, 6), (3, 3, 6, 4), dict(strides=[1, 2, 2, 1], padding="SAME")),  # pads 0/1
    ((2, 9, 10, 3), (3, 2, 3, 5), dict(strides=[1, 1, 1, 1], padding="SAME",
                                        dilations=[1, 2, 2, 1])),
    ((2, 7, 7, 4), (3, 3, 4, 6), dict(strides=[1, 1, 1, 1],
                                      padding=[[0, 0], [1, 2], [2, 0], [0, 0]])),
    ((5, 6, 6, 8), (1, 1, 8, 16), dict(strides=[1, 1, 1, 1], padding="VALID")),
    ((2, 10, 10, 4), (3, 3, 4, 8), dict(strides=[1, 1, 1, 1], padding="SAME",
                                        data_format="NCHW")),
]


def _inputs(xs, ws, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype))


@needs_cudnn
@pytest.mark.parametrize("case", range(len(CASES)))
def test_float32_through_cudnn_matches_the_cpu(case):
    xs, ws, kw = CASES[case]
    if kw.get("data_format") == "NCHW":
        xs = (xs[0], xs[3], xs[1], xs[2])
    x, w = _inputs(xs, ws, np.float32, case)
    before = cudnn_conv.stats()
    gpu = _conv_step("/device:GPU:0", x, w, case, **kw)
    after = cudnn_conv.stats()
    cpu = _conv_step("/device:CPU:0", x, w, case, **kw)
    for name, a, b in zip(("y", "dx", "dw"), gpu, cpu):
        scale = float(np.abs(b).max()) or 1.0
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * scale, err_msg=name)
    ran = after["executed"] - before["executed"]
    if case in (0, 1, 3, 5, 6):  # symmetric padding: every engine takes it
        assert ran == 3, (after, before)
    else:  # asymmetric padding: cuDNN or, where it has no engine, the GEMM path
        assert ran + (after["unsupported"] - before["unsupported"]) == 3, after


@needs_cudnn
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precisions_through_cudnn(dtype):
    if dtype == "bfloat16":
        ml = pytest.importorskip("ml_dtypes")
        npdt = np.dtype(ml.bfloat16)
    else:
        npdt = np.dtype(np.float16)
    xs, ws, kw = CASES[0]
    x32, w32 = _inputs(xs, ws, np.float32, 7)
    x32 *= 0.5
    w32 *= 0.1
    before = cudnn_conv.stats()
    gpu = _conv_step("/device:GPU:0", x32.astype(npdt), w32.astype(npdt), 7, **kw)
    assert cudnn_conv.stats()["executed"] - before["executed"] == 3
    cpu = _conv_step("/device:CPU:0", x32, w32, 7, **kw)
    tol = 2e-2 if dtype == "float16" else 8e-2
    for name, a, b in zip(("y", "dx", "dw"), gpu, cpu):
        assert a.dtype == npdt
        scale = float(np.abs(b).max())
        np.testing.assert_allclose(a.astype(np.float32), b, rtol=tol, atol=tol * scale,
                                   err_msg=name)


@needs_gpu
def test_gemm_path_when_switched_off_or_float64(monkeypatch):
    xs, ws, kw = CASES[0]
    x, w = _inputs(xs, ws, np.float64, 3)
    before = cudnn_conv.stats()["executed"]
    gpu = _conv_step("/device:GPU:0", x, w, 3, **kw)
    cpu = _conv_step("/device:CPU:0", x, w, 3, **kw)
    assert cudnn_conv.stats()["executed"] == before  # float64: never cuDNN
    for a, b in zip(gpu, cpu):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
    monkeypatch.setenv("FLOWRT_CUDNN", "0")
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    gpu = _conv_step("/device:GPU:0", x32, w32, 3, **kw)
    gpu_off = _conv_step("/device:GPU:0", x32, w32, 3, use_cudnn_on_gpu=False, **kw)
    assert cudnn_conv.stats()["executed"] == before
    for a, b, c in zip(gpu, gpu_off, cpu):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-3)


@needs_cudnn
def test_bad_shapes_get_the_standard_kernels_errors():
    g = tf.Graph()
    with g.as_default(), tf.device("/device:GPU:0"):
        x = tf.placeholder(tf.float32, [None, None, None, None])
        w = tf.constant(np.ones((3, 3, 4, 2), np.float32))
        y = tf.nn.conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME")
    with tf.Session(graph=g) as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="same depth"):
            s.run(y, {x: np.ones((1, 5, 5, 3), np.float32)})
        out = s.run(y, {x: np.ones((0, 5, 5, 4), np.float32)})
        assert out.shape == (0, 5, 5, 2)


@needs_cudnn
def test_a_training_step_on_the_gpu_goes_through_cudnn():
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((8, 12, 12, 3)).astype(np.float32)

    def train(device):
        g = tf.Graph()
        with g.as_default(), tf.device(device):
            tf.set_random_seed(1)
            x = tf.constant(xs)
            h = tf.layers.conv2d(x, 8, 3, padding="same", activation=tf.nn.relu,
                                 kernel_initializer=tf.constant_initializer(0.05))
            h = tf.layers.max_pooling2d(h, 2, 2)
            loss = tf.reduce_mean(tf.square(h))
            step = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
            init = tf.global_variables_initializer()
        with tf.Session(graph=g) as s:
            s.run(init)
            return [s.run([loss, step])[0] for _ in range(4)]

    before = cudnn_conv.stats()["executed"]
    on_gpu = train("/device:GPU:0")
    assert cudnn_conv.stats()["executed"] - before >= 8  # forward + filter grad, 4 steps
    np.testing.assert_allclose(on_gpu, train("/device:CPU:0"), rtol=1e-4)


# -- everywhere: the kernels' glue, against a stand-in for the cuDNN frontend ------------
class _FakeTensor:
    def __init__(self, name: str, dim=None, stride=None):
        self.name, self.dim, self.stride, self.output = name, dim, stride, False

    def set_output(self, v):
        self.output = v

    def set_data_type(self, t):
        self.dtype = t

    def set_dim(self, d):
        self.dim = list(d)

    def set_stride(self, s):
        self.stride = list(s)


class _FakeGraph:
    """Records what the kernel builds and binds; ``execute`` checks every bound array
    has the dims and strides its tensor was declared with, and fills the output with a
    marker value."""
    executed: list = []

    def __init__(self, **kw):
        self.kw, self.node = kw, None

    def tensor(self, name, dim, stride, data_type):
        return _FakeTensor(name, list(dim), list(stride))

    def _node(self, kind, a, b, name, **conv):
        self.node = (kind, a, b, conv)
        return _FakeTensor(name)

    def conv_fprop(self, image, weight, name, **conv):
        return self._node("fprop", image, weight, name, **conv)

    def conv_dgrad(self, loss, filter, name, **conv):  # noqa: A002 - cuDNN's names
        return self._node("dgrad", loss, filter, name, **conv)

    def conv_wgrad(self, image, loss, name, **conv):
        return self._node("wgrad", image, loss, name, **conv)

    def validate(self):
        pass

    build_operation_graph = check_support = build_plans = validate

    def create_execution_plans(self, modes):
        pass

    def deselect_numeric_notes(self, notes):
        self.deselected = notes

    def get_workspace_size(self):
        return 64

    def execute(self, ptrs, ws, handle):
        arrays = {t: _FakeCp.by_ptr[p] for t, p in ptrs.items()}
        for t, a in arrays.items():
            # the array read as channels-first or as channels-last (NHWC data, KRSC
            # filters): one of them must be what the tensor declares
            views = [([a.shape[i] for i in order], cudnn_conv._nchw_strides(a, first))
                     for order, first in (((0, 1, 2, 3), True), ((0, 3, 1, 2), False))]
            assert (t.dim, t.stride) in [tuple(v) for v in views], \
                (t.name, a.shape, a.strides, t.dim, t.stride)
            if t.output:
                a[...] = 7
        _FakeGraph.executed.append(self.node[0])


class _FakeCp:
    """numpy, with CuPy's ``cuda.get_current_stream`` and array pointers."""
    by_ptr: dict = {}
    ascontiguousarray, empty, uint8 = np.ascontiguousarray, np.empty, np.uint8
    cuda = SimpleNamespace(get_current_stream=lambda: SimpleNamespace(ptr=5))


def _fake_cudnn():
    names = SimpleNamespace(HALF="h", FLOAT="f", BFLOAT16="b")
    return SimpleNamespace(data_type=names, pygraph=_FakeGraph,
                           heur_mode=SimpleNamespace(A=1, FALLBACK=2),
                           numerical_note=SimpleNamespace(TENSOR_CORE=1,
                                                          DOWN_CONVERT_INPUTS=2),
                           create_handle=lambda: object(), set_stream=lambda h, s: None)


@pytest.fixture
def fake_cudnn(monkeypatch):
    fake = _fake_cudnn()
    monkeypatch.setattr(cudnn_conv, "_load", lambda: fake)
    monkeypatch.setattr(cudnn_conv, "unavailable_reason", lambda: None)
    monkeypatch.setattr(cudnn_conv, "_handles", {})

    def pointer(a):
        _FakeCp.by_ptr[a.ctypes.data] = a
        return a.ctypes.data

    monkeypatch.setattr(cudnn_conv, "_pointer", pointer)
    _FakeGraph.executed.clear()
    return fake


def _kernel(op, fmt, fallback):
    attrs = {"strides": [1, 1, 1, 1], "padding": "SAME", "data_format": fmt,
             "dilations": [1, 1, 1, 1], "use_cudnn_on_gpu": True}
    ctx = SimpleNamespace(attrs=attrs, op_type=op, output_dtypes=[tf.float32],
                          device=SimpleNamespace(xp=_FakeCp, physical=0))
    return cudnn_conv.conv_factory(op, lambda c: fallback)(ctx)


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_the_kernels_bind_arrays_as_declared_and_fall_back_on_bad_calls(fake_cudnn, fmt):
    nchw = fmt == "NCHW"

    def layout(n, h, w, c):
        return (n, c, h, w) if nchw else (n, h, w, c)

    fell = []
    fallback = lambda *a: fell.append(a) or "fallback"  # noqa: E731
    x = np.ones(layout(2, 6, 5, 3), np.float32)
    w = np.ones((3, 3, 3, 4), np.float32)
    dy = np.ones(layout(2, 6, 5, 4), np.float32)
    y = _kernel("Conv2D", fmt, fallback)(x, w)
    assert y.shape == layout(2, 6, 5, 4) and (y == 7).all()
    dx = _kernel("Conv2DBackpropInput", fmt, fallback)(np.array(x.shape, np.int32), w, dy)
    assert dx.shape == x.shape and (dx == 7).all()
    dw = _kernel("Conv2DBackpropFilter", fmt, fallback)(x, np.array(w.shape, np.int32), dy)
    assert dw.shape == w.shape and (dw == 7).all()  # back in TF's HWIO
    assert _FakeGraph.executed == ["fprop", "dgrad", "wgrad"] and not fell
    # a depth mismatch, an empty batch and float64 are the standard kernel's
    assert _kernel("Conv2D", fmt, fallback)(x, np.ones((3, 3, 2, 4), np.float32)) == \
        "fallback"
    assert _kernel("Conv2D", fmt, fallback)(x[:0], w) == "fallback"
    assert _kernel("Conv2D", fmt, fallback)(x.astype(np.float64), w) == "fallback"
    assert len(fell) == 3 and _FakeGraph.executed == ["fprop", "dgrad", "wgrad"]
