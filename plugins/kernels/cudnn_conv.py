"""Conv2D and its two gradients through cuDNN on a GPU.

CuPy 14 dropped its cuDNN bindings, so flowrt reaches cuDNN through NVIDIA's cuDNN
frontend (the ``nvidia-cudnn-frontend`` package, imported as ``cudnn``), which loads the
``libcudnn`` of the environment. When it is installed, the ``GPU`` kernels of ``Conv2D``,
``Conv2DBackpropInput`` and ``Conv2DBackpropFilter`` build one cuDNN operation graph per
input shape (on the first step that sees the shape, then cached on the node) and queue
it on the device's compute stream. Otherwise, or where cuDNN has no engine for a case,
they run the standard kernels' GEMM formulation on CuPy, as before:

- ``float16``, ``bfloat16`` and ``float32`` go to cuDNN; ``float64`` uses the GEMM path;
- ``use_cudnn_on_gpu=False`` on the node, or ``FLOWRT_CUDNN=0`` in the environment,
  keeps the GEMM path;
- a ``float32`` convolution runs in full float32 precision (no TF32 tensor-core
  engines), as TF 1.15 does, unless ``CUPY_TF32=1``, the same switch CuPy's matrix
  products honour;
- the data stays in its layout (NHWC or NCHW): cuDNN is told the strides; the filter
  (TF's HWIO) is copied to KRSC, cuDNN's channels-last filter layout, on each call (a
  small copy on the GPU).

Bad shapes and attrs are diagnosed by the standard kernel, which gives TF's errors: the
cuDNN path hands any call it does not recognise as well formed to it.
"""
from __future__ import annotations

import os
import threading
from typing import Any, Callable

import numpy as np

from flowrt.plugins.kernels.standard.nn_grad import _ConvGeometry

__all__ = ["unavailable_reason", "conv_factory", "stats", "CUDNN_OPS"]

#: the ops with a cuDNN path
CUDNN_OPS = ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter")

_DTYPES = {"float16": "HALF", "bfloat16": "BFLOAT16", "float32": "FLOAT"}
_lock = threading.Lock()
_module: list[Any] = []          # [cudnn module] once imported
_why: list[str] = []             # [reason] once the import failed
_handles: dict[int, Any] = {}    # physical GPU -> cuDNN handle
_streams: dict[int, int] = {}    # id(cuDNN handle) -> the stream it was last set to
_counts = {"built": 0, "unsupported": 0, "executed": 0}
_last_error: list[str] = [""]    # why the last graph cuDNN could not build failed


def _load() -> Any:
    """The ``cudnn`` module, or None (the reason in :func:`unavailable_reason`)."""
    if _module:
        return _module[0]
    if _why:
        return None
    with _lock:
        if _module or _why:
            return _module[0] if _module else None
        try:
            import cudnn  # type: ignore  # noqa: PLC0415  # optional: nvidia-cudnn-frontend

            cudnn.backend_version()  # loads libcudnn: fails here when it is missing
        except Exception as e:  # ImportError, or no libcudnn
            _why.append(f"the cuDNN frontend (pip install nvidia-cudnn-frontend) cannot be "
                        f"used: {type(e).__name__}: {e}")
            return None
        _module.append(cudnn)
        return cudnn


def unavailable_reason() -> str | None:
    """None when convolutions on a GPU can go through cuDNN; else why not."""
    if os.environ.get("FLOWRT_CUDNN", "1") == "0":
        return "FLOWRT_CUDNN=0 is set"
    _load()
    return _why[0] if _why else None


def stats() -> dict[str, Any]:
    """How many cuDNN graphs were built, found unsupported, and executed, and why the
    last unsupported one failed (for tests and benchmarks: a convolution that silently
    took the GEMM path shows up here)."""
    return {**_counts, "last_error": _last_error[0]}


def _handle(cudnn: Any, physical: int) -> Any:
    """One cuDNN handle per GPU (made with the GPU current), shared under ``_lock``."""
    h = _handles.get(physical)
    if h is None:
        h = _handles[physical] = cudnn.create_handle()
    return h


def _nchw_strides(a: Any, nchw: bool) -> list[int]:
    """The element strides of a 4-d array in cuDNN's N, C, H, W order."""
    s = [st // a.itemsize for st in a.strides]
    return s if nchw else [s[0], s[3], s[1], s[2]]


def _nchw_dims(shape: Any, nchw: bool) -> list[int]:
    n, a, b, c = (int(v) for v in shape)
    return [n, a, b, c] if nchw else [n, c, a, b]


class _Graphs:
    """The cuDNN graphs of one node, one per input shape (None: cuDNN has no engine)."""

    def __init__(self, cudnn: Any, cp: Any, handle: Any, op: str, geo: _ConvGeometry,
                 dtype: np.dtype):
        self.cudnn, self.cp, self.handle, self.op, self.geo = cudnn, cp, handle, op, geo
        self.dtype = dtype
        self.io = getattr(cudnn.data_type, _DTYPES[dtype.name])
        self.tf32 = os.environ.get("CUPY_TF32", "0") == "1"
        self.fp32 = dtype.name == "float32"
        self.cache: dict[tuple, Any] = {}

    def get(self, key: tuple, make: Callable[[Any], tuple]) -> Any:
        """The built graph for ``key``: ``(graph, tensors, workspace)`` or None."""
        try:
            return self.cache[key]
        except KeyError:
            pass
        cudnn = self.cudnn
        try:
            g = cudnn.pygraph(io_data_type=self.io,
                              intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT,
                              handle=self.handle)
            tensors = make(g)
            g.validate()
            g.build_operation_graph()
            g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
            if self.fp32 and not self.tf32:
                g.deselect_numeric_notes([cudnn.numerical_note.TENSOR_CORE,
                                          cudnn.numerical_note.DOWN_CONVERT_INPUTS])
            g.check_support()
            g.build_plans()
            # one workspace per graph: every call is queued on the device's one compute
            # stream, so calls sharing it run one after the other
            ws = self.cp.empty((max(int(g.get_workspace_size()), 1),), dtype=self.cp.uint8)
            built = (g, tensors, ws)
            _counts["built"] += 1
        except Exception as e:  # cudnnGraphNotSupportedError, or no plan: GEMM path
            built = None
            _counts["unsupported"] += 1
            _last_error[0] = f"{self.op} {key}: {type(e).__name__}: {e}"
        self.cache[key] = built
        return built

    def conv_args(self, pads: tuple[int, int, int, int]) -> dict[str, Any]:
        geo = self.geo
        pt, pb, pl, pr = pads
        return {"pre_padding": [pt, pl], "post_padding": [pb, pr],
                "stride": [geo.sh, geo.sw], "dilation": [geo.dh, geo.dw],
                "compute_data_type": self.cudnn.data_type.FLOAT}


def _output(t: Any, io: Any, dim: list[int], stride: list[int]) -> None:
    """Mark a graph tensor as an output with its type, dims and strides."""
    t.set_output(True)
    t.set_data_type(io)
    t.set_dim(dim)
    t.set_stride(stride)


def _filter_krsc(cp: Any, w: Any) -> Any:
    """TF's HWIO filter as a contiguous KRSC array (cuDNN's channels-last filter)."""
    return cp.ascontiguousarray(w.transpose(3, 0, 1, 2))


def _krsc_tensor(g: Any, shape_krsc: tuple, io: Any, name: str) -> Any:
    k, r, s, c = shape_krsc
    return g.tensor(name=name, dim=[k, c, r, s], stride=[r * s * c, 1, s * c, c],
                    data_type=io)


def conv_factory(op: str, fallback_factory: Callable[[Any], Callable[..., Any]]
                 ) -> Callable[[Any], Callable[..., Any]]:
    """The kernel factory of ``op`` (one of :data:`CUDNN_OPS`) on a GPU: cuDNN where it
    can, ``fallback_factory``'s kernel (the GEMM path on CuPy) otherwise. The returned
    kernel runs inside the device's activation (its compute stream current), with host
    memory inputs already on the host, as every GPU kernel does."""

    def factory(ctx: Any) -> Callable[..., Any]:
        fallback = fallback_factory(ctx)
        dt = np.dtype(ctx.output_dtypes[0].np)
        if dt.name not in _DTYPES or not ctx.attrs.get("use_cudnn_on_gpu", True) \
                or unavailable_reason() is not None:
            return fallback
        cudnn = _load()
        with _lock:
            handle = _handle(cudnn, getattr(ctx.device, "physical", 0))
        graphs = _Graphs(cudnn, ctx.device.xp, handle, op, _ConvGeometry(ctx), dt)
        return _RUNNERS[op](graphs, fallback)

    return factory


def _pointer(a: Any) -> int:
    """The device address of a CuPy array (what cuDNN's variant pack takes)."""
    return a.data.ptr


def _execute(graphs: _Graphs, built: Any, arrays: dict) -> None:
    """Queue the graph ``built`` on the current stream with ``arrays`` (graph tensor ->
    array) bound to its tensors."""
    g, _, ws = built
    ptrs = {t: _pointer(a) for t, a in arrays.items()}
    stream = graphs.cp.cuda.get_current_stream().ptr
    handle = graphs.handle
    with _lock:
        if _streams.get(id(handle)) != stream:  # cudnnSetStream is not free: on change only
            graphs.cudnn.set_stream(handle, stream)
            _streams[id(handle)] = stream
        g.execute(ptrs, _pointer(ws), handle=handle)
        _counts["executed"] += 1


def _geometry(geo: _ConvGeometry, h: int, w: int, kh: int, kw: int) -> Any:
    """``(oh, ow, (pt, pb, pl, pr))``, or None where the standard kernel should speak."""
    try:
        oh, ow, pt, pb, pl, pr = geo.output_geometry(h, w, kh, kw)
    except Exception:
        return None
    return oh, ow, (pt, pb, pl, pr)


def _plan(geo: _ConvGeometry, nchw: bool, in_shape: Any, f_shape: Any,
          dy_shape: Any = None) -> Any:
    """``(n, c, fo, kh, kw, oh, ow, pads)`` of a well-formed, non-empty call (with
    ``dy_shape``, checked against the output shape), or None: the standard kernel then
    computes it or gives TF's error."""
    n, h, wd, c = (in_shape[0], in_shape[2], in_shape[3], in_shape[1]) if nchw \
        else tuple(in_shape)
    kh, kw, fc, fo = (int(v) for v in f_shape)
    g3 = _geometry(geo, h, wd, kh, kw) if fc == c else None
    if g3 is None or 0 in (n, h, wd, c, fo, kh, kw, g3[0], g3[1]):
        return None
    oh, ow, pads = g3
    if dy_shape is not None and \
            tuple(dy_shape) != ((n, fo, oh, ow) if nchw else (n, oh, ow, fo)):
        return None
    return n, c, fo, kh, kw, oh, ow, pads


def _fwd(graphs: _Graphs, fallback: Callable[..., Any]) -> Callable[..., Any]:
    cp, geo, dt = graphs.cp, graphs.geo, graphs.dtype
    nchw = geo.nchw

    def conv2d(x: Any, w: Any) -> Any:
        if x.ndim != 4 or w.ndim != 4 or x.dtype != dt or w.dtype != dt:
            return fallback(x, w)
        plan = _plan(geo, nchw, x.shape, w.shape)
        if plan is None:
            return fallback(x, w)
        n, c, fo, kh, kw, oh, ow, pads = plan
        x = cp.ascontiguousarray(x)
        y = cp.empty((n, fo, oh, ow) if nchw else (n, oh, ow, fo), dtype=dt)
        key = (x.shape, nchw, w.shape)

        def make(g: Any) -> tuple:
            X = g.tensor(name="X", dim=_nchw_dims(x.shape, nchw),
                         stride=_nchw_strides(x, nchw), data_type=graphs.io)
            W = _krsc_tensor(g, (fo, kh, kw, c), graphs.io, "W")
            Y = g.conv_fprop(image=X, weight=W, name="fprop", **graphs.conv_args(pads))
            _output(Y, graphs.io, _nchw_dims(y.shape, nchw),
                    _nchw_strides(y, nchw))
            return X, W, Y

        built = graphs.get(key, make)
        if built is None:
            return fallback(x, w)
        X, W, Y = built[1]
        wk = _filter_krsc(cp, w)
        _execute(graphs, built, {X: x, W: wk, Y: y})
        return y

    return conv2d


def _bwd_input(graphs: _Graphs, fallback: Callable[..., Any]) -> Callable[..., Any]:
    cp, geo, dt = graphs.cp, graphs.geo, graphs.dtype
    nchw = geo.nchw

    def conv2d_backprop_input(sizes: Any, w: Any, dy: Any) -> Any:
        s = np.asarray(sizes)
        if s.shape != (4,) or w.ndim != 4 or dy.ndim != 4 or w.dtype != dt \
                or dy.dtype != dt or (s < 0).any():
            return fallback(sizes, w, dy)
        shape = tuple(int(v) for v in s)
        plan = _plan(geo, nchw, shape, w.shape, dy.shape)
        if plan is None:
            return fallback(sizes, w, dy)
        n, c, fo, kh, kw, oh, ow, pads = plan
        dy = cp.ascontiguousarray(dy)
        dx = cp.empty(shape, dtype=dt)
        key = (shape, nchw, w.shape)

        def make(g: Any) -> tuple:
            DY = g.tensor(name="DY", dim=_nchw_dims(dy.shape, nchw),
                          stride=_nchw_strides(dy, nchw), data_type=graphs.io)
            W = _krsc_tensor(g, (fo, kh, kw, c), graphs.io, "W")
            DX = g.conv_dgrad(loss=DY, filter=W, name="dgrad", **graphs.conv_args(pads))
            _output(DX, graphs.io, _nchw_dims(shape, nchw),
                    _nchw_strides(dx, nchw))
            return DY, W, DX

        built = graphs.get(key, make)
        if built is None:
            return fallback(sizes, w, dy)
        DY, W, DX = built[1]
        wk = _filter_krsc(cp, w)
        _execute(graphs, built, {DY: dy, W: wk, DX: dx})
        return dx

    return conv2d_backprop_input


def _bwd_filter(graphs: _Graphs, fallback: Callable[..., Any]) -> Callable[..., Any]:
    cp, geo, dt = graphs.cp, graphs.geo, graphs.dtype
    nchw = geo.nchw

    def conv2d_backprop_filter(x: Any, sizes: Any, dy: Any) -> Any:
        s = np.asarray(sizes)
        if s.shape != (4,) or x.ndim != 4 or dy.ndim != 4 or x.dtype != dt \
                or dy.dtype != dt or (s < 0).any():
            return fallback(x, sizes, dy)
        plan = _plan(geo, nchw, x.shape, s, dy.shape)
        if plan is None:
            return fallback(x, sizes, dy)
        n, c, fo, kh, kw, oh, ow, pads = plan
        x = cp.ascontiguousarray(x)
        dy = cp.ascontiguousarray(dy)
        dw = cp.empty((fo, kh, kw, c), dtype=dt)  # KRSC
        key = (x.shape, nchw, (kh, kw, c, fo))

        def make(g: Any) -> tuple:
            X = g.tensor(name="X", dim=_nchw_dims(x.shape, nchw),
                         stride=_nchw_strides(x, nchw), data_type=graphs.io)
            DY = g.tensor(name="DY", dim=_nchw_dims(dy.shape, nchw),
                          stride=_nchw_strides(dy, nchw), data_type=graphs.io)
            DW = g.conv_wgrad(image=X, loss=DY, name="wgrad", **graphs.conv_args(pads))
            _output(DW, graphs.io, [fo, c, kh, kw],
                    [kh * kw * c, 1, kw * c, c])
            return X, DY, DW

        built = graphs.get(key, make)
        if built is None:
            return fallback(x, sizes, dy)
        X, DY, DW = built[1]
        _execute(graphs, built, {X: x, DY: dy, DW: dw})
        return cp.ascontiguousarray(dw.transpose(1, 2, 3, 0))

    return conv2d_backprop_filter


_RUNNERS = {"Conv2D": _fwd, "Conv2DBackpropInput": _bwd_input,
            "Conv2DBackpropFilter": _bwd_filter}
