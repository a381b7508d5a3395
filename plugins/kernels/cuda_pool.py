"""MaxPool and MaxPoolGrad on a GPU as one CUDA kernel each (CuPy ``RawKernel``).

The standard kernels pool with one array pass per window offset, and ``MaxPoolGrad``
checks the input for NaN first, which on a GPU waits for every queued kernel. Here each
op is a single kernel over the outputs, queued on the device's compute stream with no
host synchronisation, with the CPU kernels' semantics exactly:

- ``MaxPool``: the maximum of the window's valid elements, NaN propagating (as
  ``maximum`` does);
- ``MaxPoolGrad``: each output's gradient goes to the first valid element of its window
  in row-major order that no later element exceeds (a NaN is never greater, so ties and
  NaNs resolve as on the CPU), added atomically where windows overlap.

Both take NHWC and NCHW (the kernel reads through the arrays' strides) in float32 and
float64. Other dtypes, pooling over channels and malformed inputs go to the standard
kernel, which gives TF's errors.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

from flowrt.plugins.kernels.standard.nn_ops import _windowed_size

__all__ = ["POOL_OPS", "pool_factory"]

#: the ops with a single-kernel GPU path
POOL_OPS = ("MaxPool", "MaxPoolGrad")

_CTYPES = {"float32": "float", "float64": "double"}

_SOURCE = r"""
extern "C" __global__ void {name}(const T* x, const T* dy, T* out, long long total,
        long long C, long long OH, long long OW, long long H, long long W,
        long long kh, long long kw, long long sh, long long sw, long long pt, long long pl,
        long long xn, long long xh, long long xw, long long xc,
        long long yn, long long yh, long long yw, long long yc, T lowest) {{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    long long c = i % C, t = i / C;
    long long ow = t % OW; t /= OW;
    long long oh = t % OH, n = t / OH;
    long long h0 = oh * sh - pt, w0 = ow * sw - pl;
    const T* xb = x + n * xn + c * xc;
    long long y = n * yn + oh * yh + ow * yw + c * yc;
    T best = lowest;
    long long at = -1;
    for (long long a = 0; a < kh; ++a) {{
        long long hh = h0 + a;
        if (hh < 0 || hh >= H) continue;
        for (long long b = 0; b < kw; ++b) {{
            long long ww = w0 + b;
            if (ww < 0 || ww >= W) continue;
            long long off = hh * xh + ww * xw;
            T v = xb[off];
            {body}
        }}
    }}
    {tail}
}}
"""
# forward: NaN propagates (once the best is NaN, nothing replaces it)
_FWD = dict(body="if (isnan(v) || v > best) best = v;", tail="out[y] = best;")
# gradient: the first valid element, then only a strictly greater one
_GRAD = dict(body="if (at < 0 || v > best) { best = v; at = off; }",
             tail="if (at >= 0) atomicAdd(out + n * xn + c * xc + at, dy[y]);")

_lock = threading.Lock()
_kernels: dict[tuple[str, str], Any] = {}


def _kernel(cp: Any, which: str, dtype: np.dtype) -> Any:
    key = (which, dtype.name)
    k = _kernels.get(key)
    if k is None:
        with _lock:
            k = _kernels.get(key)
            if k is None:
                name = f"flowrt_maxpool_{which}_{dtype.name}"
                parts = _FWD if which == "fwd" else _GRAD
                src = f"typedef {_CTYPES[dtype.name]} T;\n" + _SOURCE.format(name=name, **parts)
                k = _kernels[key] = cp.RawKernel(src, name)
    return k


def _strides(a: Any, nchw: bool) -> list[int]:
    """Element strides in (N, H, W, C) order."""
    s = [st // a.itemsize for st in a.strides]
    return [s[0], s[2], s[3], s[1]] if nchw else s


class _Pool:
    """The window geometry of one node, from its attrs (None: not handled here)."""

    def __init__(self, attrs: dict[str, Any]):
        fmt = attrs.get("data_format", "NHWC")
        self.nchw = fmt == "NCHW"
        ksize, strides = list(attrs.get("ksize") or []), list(attrs.get("strides") or [])
        self.ok = fmt in ("NHWC", "NCHW") and len(ksize) == 4 and len(strides) == 4
        if not self.ok:
            return
        order = (0, 2, 3, 1) if self.nchw else (0, 1, 2, 3)
        k = [ksize[i] for i in order]
        s = [strides[i] for i in order]
        self.ok = k[0] == 1 and s[0] == 1 and k[3] == 1 and s[3] == 1 and \
            min(k[1:3] + s[1:3]) > 0
        self.kh, self.kw, self.sh, self.sw = k[1], k[2], s[1], s[2]
        self.padding = attrs.get("padding")

    def out_geometry(self, h: int, w: int) -> tuple[int, int, int, int] | None:
        """(oh, ow, pad top, pad left) as TF computes them, or None (the standard kernel
        then gives TF's error)."""
        if self.padding not in ("SAME", "VALID"):
            return None
        try:
            oh, pt, _ = _windowed_size(h, self.kh, self.sh, self.padding)
            ow, pl, _ = _windowed_size(w, self.kw, self.sw, self.padding)
        except ValueError:
            return None
        return oh, ow, pt, pl


def _launch(kern: Any, total: int, args: tuple) -> None:
    block = 256
    kern(((total + block - 1) // block,), (block,), args)


def pool_factory(op: str, fallback_factory: Callable[[Any], Callable[..., Any]]
                 ) -> Callable[[Any], Callable[..., Any]]:
    """The GPU kernel factory of ``op`` (one of :data:`POOL_OPS`): the single-kernel
    path where it applies, ``fallback_factory``'s kernel otherwise."""

    def factory(ctx: Any) -> Callable[..., Any]:
        fallback = fallback_factory(ctx)
        dt = np.dtype(ctx.output_dtypes[0].np)
        pool = _Pool(ctx.attrs)
        if dt.name not in _CTYPES or not pool.ok:
            return fallback
        cp = ctx.device.xp
        kern = _kernel(cp, "fwd" if op == "MaxPool" else "grad", dt)
        lowest = dt.type(-np.inf)
        nchw = pool.nchw
        i64 = np.int64

        def geometry(x: Any) -> Any:
            if x.ndim != 4 or x.dtype != dt or x.size == 0:
                return None
            n, h, w, c = (x.shape[0], x.shape[2], x.shape[3], x.shape[1]) if nchw \
                else x.shape
            g = pool.out_geometry(h, w)
            if g is None or g[0] == 0 or g[1] == 0:
                return None
            return n, h, w, c, g

        def shape_of(n: int, oh: int, ow: int, c: int) -> tuple[int, ...]:
            return (n, c, oh, ow) if nchw else (n, oh, ow, c)

        def args(x: Any, dy: Any, out: Any, geo: tuple, y_like: Any) -> tuple:
            n, h, w, c, (oh, ow, pt, pl) = geo
            total = n * oh * ow * c
            return total, (x, dy, out, i64(total), i64(c), i64(oh), i64(ow), i64(h), i64(w),
                           i64(pool.kh), i64(pool.kw), i64(pool.sh), i64(pool.sw), i64(pt),
                           i64(pl), *[i64(v) for v in _strides(x, nchw)],
                           *[i64(v) for v in _strides(y_like, nchw)], lowest)

        def max_pool(x: Any) -> Any:
            geo = geometry(x)
            if geo is None:
                return fallback(x)
            n, _, _, c, (oh, ow, _, _) = geo
            y = cp.empty(shape_of(n, oh, ow, c), dtype=dt)
            total, a = args(x, y, y, geo, y)
            _launch(kern, total, a)
            return y

        def max_pool_grad(x: Any, y: Any, dy: Any) -> Any:
            geo = geometry(x)
            if geo is None or y.ndim != 4 or dy.dtype != dt:
                return fallback(x, y, dy)
            n, _, _, c, (oh, ow, _, _) = geo
            want = shape_of(n, oh, ow, c)
            if tuple(dy.shape) != want or tuple(y.shape) != want:
                return fallback(x, y, dy)
            x = cp.ascontiguousarray(x)
            dx = cp.zeros(x.shape, dtype=dt)  # same layout as x: x's strides index it
            total, a = args(x, dy, dx, geo, dy)
            _launch(kern, total, a)
            return dx

        return max_pool if op == "MaxPool" else max_pool_grad

    return factory
