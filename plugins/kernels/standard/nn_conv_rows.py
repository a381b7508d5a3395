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
it takes the forward path. The copy is ``KW`` times the input rather than ``KH*KW``.

An input of one to a few channels (an image's first layer) makes window rows too thin
for that; its patches are laid out tap-major instead, ``[KH*KW*C, N*OH*OW]``, where
filling a row copies whole output rows rather than one value at a time, and the GEMM
takes them transposed.

The patch buffers are kept per thread and per geometry: their padding stays zero from one
step to the next, and a step writes only the input's values into them (no fresh pages to
fault in, no zero fill). Batch chunks run side by side through
:func:`batch_parts`. Only numpy arrays take this path; a GPU keeps its own.
"""
from __future__ import annotations

import functools
import os
import threading
from typing import Any, Callable

import numpy as np

from ._common import sum_parts

#: the size of one batch chunk's patches in a CPU convolution (see :func:`batch_parts`)
CHUNK_BYTES = 8 << 20
#: the least patch bytes one chunk of a split convolution gets: handing a part to a pool
#: thread costs tens of microseconds, more than a smaller part's GEMM (a batch of two
#: 8x8 images ran 2x faster in one part than in one per thread)
MIN_PART_BYTES = 256 << 10


def batch_parts(ctx: Any, n: int, bytes_per_item: int,
                fn: Callable[[int, int], Any], chunk_bytes: int | None = None) -> list[Any]:
    """``fn(lo, hi)`` over batch ranges covering ``[0, n)``, for a convolution's
    im2col/GEMM on the host: ranges whose patches take about :data:`CHUNK_BYTES` (still
    in cache when the GEMM reads them, and under the allocator's mmap ceiling: a fresh
    40 MB array costs its page faults on every call), at least one per intra-op thread,
    run side by side by the device's ``parallel_map`` (BLAS on one thread in each). The
    MNIST CNN's second convolution ran 1.5x (forward) to 5x (input gradient) faster in
    chunks of 16 images than in one, on one thread. Small work stays in one part (each
    part gets at least :data:`MIN_PART_BYTES`). A GPU takes the whole batch.
    ``chunk_bytes`` replaces :data:`CHUNK_BYTES` for one call."""
    pmap = getattr(ctx.device, "parallel_map", None)
    if ctx.xp is not np or n <= 1 or pmap is None:
        return [fn(0, n)]
    threads = max(1, int(ctx.device.parallelism()))
    total = n * max(1, bytes_per_item)
    parts = -(-total // (chunk_bytes or CHUNK_BYTES))
    parts = min(n, -(-parts // threads) * threads, max(1, total // MIN_PART_BYTES))
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
#: deep GEMM (the MNIST CNN's first layer, rows of 5 x 1 channel, takes the tap-major
#: path instead)
MIN_ROW_DEPTH = 32

#: inputs of at most this many channels (and rows too thin for the row path) take the
#: tap-major path (:func:`_taps`)
TAPS_MAX_DEPTH = 4
#: ``FLOWRT_CONV_ROWS=0`` keeps every host convolution on im2col (for comparisons)
ENABLED = os.environ.get("FLOWRT_CONV_ROWS", "1") != "0"

_local = threading.local()


def _spans(size: int, out: int, k: int, s: int, d: int, pad: int
           ) -> list[tuple[int, int, int]]:
    """For each window position ``j`` along one axis: the outputs ``[lo, hi)`` whose
    window position ``j`` falls on the input (not in the padding) and the input index
    the first of them reads."""
    spans = []
    for j in range(k):
        off = j * d - pad  # the input index output 0 reads
        lo = -(off // s) if off < 0 else 0
        hi = min(out, (size - 1 - off) // s + 1) if size - 1 - off >= 0 else 0
        spans.append((lo, max(lo, hi), lo * s + off))
    return spans


class RowGeometry:
    """One convolution's shapes, in NHWC terms: input ``[N, H, W, C]`` read with
    padding ``pt`` (top) and ``pl`` (left), strides ``sh, sw``, dilations ``dh, dw``,
    window ``KH x KW``, output ``[N, OH, OW, F]``. Padding below and to the right is
    whatever the output size implies; input rows or columns no window reaches are
    skipped (so a negative padding there is fine)."""

    __slots__ = ("h", "w", "c", "kh", "kw", "oh", "ow", "pt", "pl", "sh", "sw", "dh", "dw",
                 "hq", "cols", "rows", "trows")

    def __init__(self, h: int, w: int, c: int, kh: int, kw: int, oh: int, ow: int,
                 pt: int, pl: int, sh: int = 1, sw: int = 1, dh: int = 1, dw: int = 1):
        self.h, self.w, self.c, self.kh, self.kw = h, w, c, kh, kw
        self.oh, self.ow, self.pt, self.pl = oh, ow, pt, pl
        self.sh, self.sw, self.dh, self.dw = sh, sw, dh, dw
        rows_needed = (oh - 1) * sh + (kh - 1) * dh + 1
        self.hq = -(-rows_needed // sh)
        # per window column: the output columns [lo, hi) whose window column reads an
        # input column, and the first such input column (the same for window rows)
        self.cols = _spans(w, ow, kw, sw, dw, pl)
        self.trows = _spans(h, oh, kh, sh, dh, pt)
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


#: the geometry of a convolution's shapes and attributes, made once per shape (a kernel
#: asks for it at every call)
geometry = functools.lru_cache(maxsize=256)(RowGeometry)


def usable(xp: Any, geo: RowGeometry) -> bool:
    """Whether a convolution of this geometry takes the row path here."""
    return (ENABLED and xp is np and geo.kw * geo.c >= MIN_ROW_DEPTH and geo.oh > 0
            and geo.ow > 0)


def usable_taps(xp: Any, geo: RowGeometry) -> bool:
    """Whether a convolution of this geometry takes the tap-major path here: an input
    of at most :data:`TAPS_MAX_DEPTH` channels (an image's first layer)."""
    return (ENABLED and xp is np and geo.c <= TAPS_MAX_DEPTH
            and geo.kw * geo.c < MIN_ROW_DEPTH and geo.oh > 0 and geo.ow > 0)


def _taps(x: Any, geo: RowGeometry) -> Any:
    """The patches of ``x`` ([nb, H, W, C], C small) tap-major, in this thread's buffer
    for the geometry: ``[KH*KW*C, nb*OH*OW]``, each row one (window position, channel)
    across every output position. For one channel every row is filled by copies of
    whole output rows, where im2col's ``[nb*OH*OW, KH*KW]`` layout copies one value at a
    time (7.7 against 1.5 ms for the MNIST CNN's first layer)."""
    nb = x.shape[0]
    buf = _buffer(("taps", *geo.key(nb, x.dtype)),
                  (geo.kh, geo.kw, geo.c, nb, geo.oh, geo.ow), x.dtype)
    xs = x.transpose(3, 0, 1, 2)  # [C, nb, H, W], a view
    sh, sw = geo.sh, geo.sw
    for i, (rlo, rhi, r0) in enumerate(geo.trows):
        if rhi <= rlo:
            continue
        src = xs[:, :, r0:r0 + (rhi - rlo - 1) * sh + 1:sh]
        for j, (clo, chi, c0) in enumerate(geo.cols):
            if chi > clo:
                buf[i, j, :, :, rlo:rhi, clo:chi] = src[:, :, :, c0:c0 + (chi - clo - 1) * sw + 1:sw]
    return buf.reshape(geo.kh * geo.kw * geo.c, -1)


def taps_forward(ctx: Any, x: Any, w: Any, geo: RowGeometry, out_dtype: Any,
                 epilogue: Callable[[Any], None] | None = None) -> Any:
    """:func:`forward` for a shallow input, through :func:`_taps`: one GEMM per batch
    chunk, its left operand the transposed (unmoved) tap-major patches."""
    n, f = x.shape[0], w.shape[-1]
    wk = w.reshape(-1, f)
    direct = np.dtype(out_dtype) == wk.dtype
    out = np.empty((n, geo.oh, geo.ow, f), dtype=out_dtype)

    def part(lo: int, hi: int) -> None:
        pt = _taps(x[lo:hi], geo)
        if direct:
            block = out[lo:hi].reshape(-1, f)
            np.matmul(pt.T, wk, out=block)
            if epilogue is not None:
                epilogue(block)
        else:
            block = np.matmul(pt.T, wk)
            if epilogue is not None:
                epilogue(block)
            out[lo:hi] = block.reshape(hi - lo, geo.oh, geo.ow, f)

    batch_parts(ctx, n, geo.kh * geo.kw * geo.c * geo.oh * geo.ow * x.itemsize, part,
                ROW_CHUNK_BYTES)
    return out


def taps_filter_grad(ctx: Any, x: Any, dy: Any, geo: RowGeometry) -> Any:
    """:func:`filter_grad` for a shallow input, through :func:`_taps`."""
    n, f = x.shape[0], dy.shape[-1]

    def part(lo: int, hi: int) -> Any:
        return np.matmul(_taps(x[lo:hi], geo), dy[lo:hi].reshape(-1, f))

    parts = batch_parts(ctx, n, geo.kh * geo.kw * geo.c * geo.oh * geo.ow * x.itemsize,
                        part, ROW_CHUNK_BYTES)
    return sum_parts(parts).reshape(geo.kh, geo.kw, geo.c, f)


def _buffer(key: tuple, shape: tuple, dtype: Any) -> Any:
    """This thread's zero-initialised buffer for ``key``: made once, then handed out
    again as it was left (the caller writes the same places every time, so what it
    never writes stays zero)."""
    cache = getattr(_local, "buffers", None)
    if cache is None:
        cache = _local.buffers = {}
    buf = cache.get(key)
    if buf is None:
        buf = np.zeros(shape, dtype)
        if buf.nbytes <= BUFFER_BYTES:  # (a larger one is used once and dropped)
            held = sum(b.nbytes for b in cache.values())
            while held + buf.nbytes > BUFFER_BYTES:
                held -= cache.pop(next(iter(cache))).nbytes
            cache[key] = buf
    return buf


def _patches(x: Any, geo: RowGeometry) -> Any:
    """The width patches of ``x`` ([nb, H, W, C], a batch chunk) in this thread's
    buffer for the geometry: ``[sh, hq, nb, OW, KW*C]``."""
    nb = x.shape[0]
    buf = _buffer(("rows", *geo.key(nb, x.dtype)),
                  (geo.sh, geo.hq, nb, geo.ow, geo.kw, geo.c), x.dtype)
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


def forward(ctx: Any, x: Any, w: Any, geo: RowGeometry, out_dtype: Any,
            epilogue: Callable[[Any], None] | None = None) -> Any:
    """The convolution of ``x`` [N, H, W, C] with ``w`` [KH, KW, C, F] (both in the
    compute dtype): ``[N, OH, OW, F]`` in ``out_dtype``. ``epilogue(block)`` is applied
    in place to each chunk's ``[rows, F]`` result while it is in cache (a fused bias and
    activation)."""
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
        if epilogue is not None:
            epilogue(acc)
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
    return sum_parts(parts).reshape(geo.kh, geo.kw, geo.c, f)


@functools.lru_cache(maxsize=256)
def input_grad_geometry(h: int, w: int, c: int, kh: int, kw: int, oh: int, ow: int,
                        pt: int, pl: int, dh: int, dw: int, f: int) -> RowGeometry | None:
    """For a stride-1 convolution (input [., h, w, c], output [., oh, ow, f], padding
    ``pt``/``pl``), the geometry of the forward convolution of the output gradient with
    the flipped filter that gives the input gradient; None where that needs a negative
    padding above or to the left (an explicit padding larger than the window)."""
    top, left = (kh - 1) * dh - pt, (kw - 1) * dw - pl
    if top < 0 or left < 0:
        return None
    return geometry(oh, ow, f, kh, kw, h, w, top, left, 1, 1, dh, dw)


def flipped_filter(w: Any) -> Any:
    """``w`` [KH, KW, C, F] rotated half a turn in space with its channels swapped:
    [KH, KW, F, C], the filter of the input gradient as a forward convolution."""
    return np.ascontiguousarray(w[::-1, ::-1].transpose(0, 1, 3, 2))
