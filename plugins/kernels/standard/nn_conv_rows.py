"""2-D convolutions on the host as a few GEMMs over window rows.

The classic im2col copies every ``KH x KW`` window of the input into one row of a
``[N*OH*OW, KH*KW*C]`` matrix: for a 5x5 window that is 25 times the input, and on the
MNIST CNN's second layer (x [64,14,14,32], w [5,5,32,64]) that copy took as long as the
GEMM after it. Here only the *width* of the window is unrolled: the input is copied
once into width patches ``P[r, n, ow, kw, c] = x_padded[n, r, ow*sw + kw*dw, c]``, laid out
with the padded row ``r`` outermost. The rows a window row ``kh`` reads for every output
row are then one contiguous block of ``P`` (for a row stride above 1, ``P``'s rows are
stored by phase, ``r % sh`` first, so that this still holds), and the convolution is
``KH`` GEMMs of depth ``KW*C`` over those blocks, summed:

    out[oh, n, ow, :] = sum_kh  P[oh*sh + kh*dh, n, ow, :] @ W[kh]     (W[kh]: [KW*C, F])

The filter gradient is the transposed product of the same blocks with the output
gradient, one ``[KW*C, F]`` block of the filter per window row; the input gradient of a
stride-1 convolution is a convolution of the output gradient with the flipped filter, so
it takes the forward path. The copy is ``KW`` times the input rather than ``KH*KW``;
measured on that layer with 2 threads: forward 11 ms against 16 ms for im2col.

The patch buffers are kept per thread and per geometry: their padding stays zero from one
step to the next, and a step writes only the input's values into them (no fresh pages to
fault in, no zero fill). Batch chunks run side by side through
:func:`batch_parts`. Only numpy arrays take this path; a GPU keeps its own.
"""
from __future__ import annotations

import os
import threading
from typing import Any, Callable

import numpy as np

#: the size of one batch chunk's patches in a CPU convolution (see :func:`batch_parts`)
CHUNK_BYTES = 8 << 20


def batch_parts(ctx: Any, n: int, bytes_per_item: int,
                fn: Callable[[int, int], Any], chunk_bytes: int | None = None) -> list[Any]:
    """``fn(lo, hi)`` over batch ranges covering ``[0, n)``, for a convolution's
    im2col/GEMM on the host: ranges whose patches take about :data:`CHUNK_BYTES` (still
    in cache when the GEMM reads them, and under the allocator's mmap ceiling: a fresh
    40 MB array costs its page faults on every call), at least one per intra-op thread,
    run side by side by the device's ``parallel_map`` (BLAS on one thread in each). The
    MNIST CNN's second convolution ran 1.5x (forward) to 5x (input gradient) faster in
    chunks of 16 images than in one, on one thread. A GPU takes the whole batch.
    ``chunk_bytes`` replaces :data:`CHUNK_BYTES` for one call."""
    pmap = getattr(ctx.device, "parallel_map", None)
    if ctx.xp is not np or n <= 1 or pmap is None:
        return [fn(0, n)]
    threads = max(1, int(ctx.device.parallelism()))
    parts = -(-n * max(1, bytes_per_item) // (chunk_bytes or CHUNK_BYTES))
    parts = min(n, -(-parts // threads) * threads)
    step = -(-n // parts)
    ranges = [(lo, min(n, lo + step)) for lo in range(0, n, step)]
    if len(ranges) == 1:
        return [fn(0, n)]
    return pmap(lambda i: fn(*ranges[i]), len(ranges))


#: the size of one batch chunk's width patches: they, the GEMMs' results and the block of
#: the filter stay in a core's cache (the MNIST CNN's second layer: 1 MB chunks ran
#: 10-20 % faster than 8 MB ones, forward and filter gradient, on 1 and 2 threads)
ROW_CHUNK_BYTES = 1 << 20
#: the most bytes of patch buffers one thread keeps (the oldest geometries go first)
BUFFER_BYTES = 32 << 20

#: window rows narrower than this (``KW * C``) make GEMMs too thin to beat im2col's one
#: deep GEMM (the MNIST CNN's first layer, 5 x 1 channel, stays on im2col)
MIN_ROW_DEPTH = 32
#: ``FLOWRT_CONV_ROWS=0`` keeps every host convolution on im2col (for comparisons)
ENABLED = os.environ.get("FLOWRT_CONV_ROWS", "1") != "0"

_local = threading.local()


class RowGeometry:
    """One convolution's shapes, in NHWC terms: input ``[N, H, W, C]`` read with
    padding ``pt`` (top) and ``pl`` (left), strides ``sh, sw``, dilations ``dh, dw``,
    window ``KH x KW``, output ``[N, OH, OW, F]``. Padding below and to the right is
    whatever the output size implies; input rows or columns no window reaches are
    skipped (so a negative padding there is fine)."""

    __slots__ = ("h", "w", "c", "kh", "kw", "oh", "ow", "pt", "pl", "sh", "sw", "dh", "dw",
                 "hq", "cols", "rows")

    def __init__(self, h: int, w: int, c: int, kh: int, kw: int, oh: int, ow: int,
                 pt: int, pl: int, sh: int = 1, sw: int = 1, dh: int = 1, dw: int = 1):
        self.h, self.w, self.c, self.kh, self.kw = h, w, c, kh, kw
        self.oh, self.ow, self.pt, self.pl = oh, ow, pt, pl
        self.sh, self.sw, self.dh, self.dw = sh, sw, dh, dw
        rows_needed = (oh - 1) * sh + (kh - 1) * dh + 1
        self.hq = -(-rows_needed // sh)
        # per window column kw: the output columns [lo, hi) whose window column reads
        # an input column, and the first such input column
        self.cols = []
        for j in range(kw):
            off = j * dw - pl  # input column of output column 0
            lo = -(off // sw) if off < 0 else 0
            hi = min(ow, (w - 1 - off) // sw + 1) if w - 1 - off >= 0 else 0
            self.cols.append((lo, max(lo, hi), lo * sw + off))
        # per phase p of the padded rows: (first input row, its slot, how many rows)
        self.rows = []
        for p in range(sh):
            first = (p - pt) % sh  # the first input row i >= 0 with (i + pt) % sh == p
            last_r = min(h - 1 + pt, rows_needed - 1)
            count = 0 if first + pt > last_r else (last_r - (first + pt)) // sh + 1
            self.rows.append((first, (first + pt) // sh, count))

    def key(self, nb: int, dtype: Any) -> tuple:
        return (self.h, self.w, self.c, self.kh, self.kw, self.oh, self.ow, self.pt,
                self.pl, self.sh, self.sw, self.dh, self.dw, nb, np.dtype(dtype).str)

    def patch_bytes(self, itemsize: int) -> int:
        """Bytes of width patches one image takes."""
        return self.sh * self.hq * self.ow * self.kw * self.c * itemsize


def usable(xp: Any, geo: RowGeometry) -> bool:
    """Whether a convolution of this geometry takes the row path here."""
    return (ENABLED and xp is np and geo.kw * geo.c >= MIN_ROW_DEPTH and geo.oh > 0
            and geo.ow > 0)


def _patches(x: Any, geo: RowGeometry) -> Any:
    """The width patches of ``x`` ([nb, H, W, C], a batch chunk) in this thread's
    buffer for the geometry: ``[sh, hq, nb, OW, KW*C]``."""
    nb = x.shape[0]
    cache = getattr(_local, "buffers", None)
    if cache is None:
        cache = _local.buffers = {}
    key = geo.key(nb, x.dtype)
    buf = cache.get(key)
    if buf is None:
        buf = np.zeros((geo.sh, geo.hq, nb, geo.ow, geo.kw, geo.c), x.dtype)
        if buf.nbytes <= BUFFER_BYTES:  # (a larger one is used once and dropped)
            held = sum(b.nbytes for b in cache.values())
            while held + buf.nbytes > BUFFER_BYTES:
                held -= cache.pop(next(iter(cache))).nbytes
            cache[key] = buf
    xs = x.transpose(1, 0, 2, 3)  # [H, nb, W, C], a view
    sh, sw = geo.sh, geo.sw
    for p, (first, slot, count) in enumerate(geo.rows):
        if count == 0:
            continue
        src_rows = xs[first:first + (count - 1) * sh + 1:sh]
        dst = buf[p, slot:slot + count]
        for j, (lo, hi, start) in enumerate(geo.cols):
            if hi > lo:
                dst[:, :, lo:hi, j, :] = src_rows[:, :, start:start + (hi - lo - 1) * sw + 1:sw]
    return buf.reshape(sh, geo.hq, nb * geo.ow, geo.kw * geo.c)


def _block(pat: Any, geo: RowGeometry, j: int) -> Any:
    """The rows window row ``j`` reads for every output row: ``[OH*nb*OW, KW*C]``."""
    r = j * geo.dh
    p, q = r % geo.sh, r // geo.sh
    return pat[p, q:q + geo.oh].reshape(-1, pat.shape[-1])


def forward(ctx: Any, x: Any, w: Any, geo: RowGeometry, out_dtype: Any) -> Any:
    """The convolution of ``x`` [N, H, W, C] with ``w`` [KH, KW, C, F] (both in the
    compute dtype): ``[N, OH, OW, F]`` in ``out_dtype``."""
    n = x.shape[0]
    f = w.shape[-1]
    wk = w.reshape(geo.kh, geo.kw * geo.c, f)
    out = np.empty((n, geo.oh, geo.ow, f), dtype=out_dtype)

    def part(lo: int, hi: int) -> None:
        nb = hi - lo
        pat = _patches(x[lo:hi], geo)
        acc = np.empty((geo.oh * nb * geo.ow, f), dtype=wk.dtype)
        np.matmul(_block(pat, geo, 0), wk[0], out=acc)
        if geo.kh > 1:
            tmp = np.empty_like(acc)
            for j in range(1, geo.kh):
                np.matmul(_block(pat, geo, j), wk[j], out=tmp)
                acc += tmp
        out[lo:hi] = acc.reshape(geo.oh, nb, geo.ow, f).transpose(1, 0, 2, 3)

    batch_parts(ctx, n, geo.patch_bytes(x.itemsize), part, ROW_CHUNK_BYTES)
    return out


def filter_grad(ctx: Any, x: Any, dy: Any, geo: RowGeometry) -> Any:
    """The gradient of the convolution with respect to its filter, from the input
    ``x`` [N, H, W, C] and the output gradient ``dy`` [N, OH, OW, F] (compute dtype):
    ``[KH, KW, C, F]``."""
    n = x.shape[0]
    f = dy.shape[-1]

    def part(lo: int, hi: int) -> Any:
        pat = _patches(x[lo:hi], geo)
        dyh = np.ascontiguousarray(dy[lo:hi].transpose(1, 0, 2, 3)).reshape(-1, f)
        dw = np.empty((geo.kh, geo.kw * geo.c, f), dtype=dyh.dtype)
        for j in range(geo.kh):
            np.matmul(_block(pat, geo, j).T, dyh, out=dw[j])
        return dw

    parts = batch_parts(ctx, n, geo.patch_bytes(x.itemsize), part, ROW_CHUNK_BYTES)
    total = parts[0]
    for p in parts[1:]:
        total += p
    return total.reshape(geo.kh, geo.kw, geo.c, f)


def input_grad_geometry(h: int, w: int, c: int, kh: int, kw: int, oh: int, ow: int,
                        pt: int, pl: int, dh: int, dw: int, f: int) -> RowGeometry | None:
    """For a stride-1 convolution (input [., h, w, c], output [., oh, ow, f], padding
    ``pt``/``pl``), the geometry of the forward convolution of the output gradient with
    the flipped filter that gives the input gradient; None where that needs a negative
    padding above or to the left (an explicit padding larger than the window)."""
    top, left = (kh - 1) * dh - pt, (kw - 1) * dw - pl
    if top < 0 or left < 0:
        return None
    return RowGeometry(oh, ow, f, kh, kw, h, w, top, left, 1, 1, dh, dw)


def flipped_filter(w: Any) -> Any:
    """``w`` [KH, KW, C, F] rotated half a turn in space with its channels swapped:
    [KH, KW, F, C], the filter of the input gradient as a forward convolution."""
    return np.ascontiguousarray(w[::-1, ::-1].transpose(0, 1, 3, 2))
