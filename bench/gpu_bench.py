"""GPU benchmarks: flowrt's CUDA device against the same work written in raw CuPy.

Each case times flowrt and a hand-written CuPy version of the same computation in
alternating repetitions (flowrt, CuPy, flowrt, CuPy ...), each repetition a number of
steps lasting at least ``--min-time`` seconds after a warm-up and ending with a wait for
the GPU (so work still queued when a step returns is charged to it), and reports the
medians over ``--repeats`` repetitions and the ratio flowrt/raw (every unit is "higher
is better", so a ratio below 1.0 means flowrt is slower; the target is >= 0.95):

- ``matmul_chain``: ``y = x; y = y @ w_i`` for ``i < K`` (``--chain``, default 8) on
  N x N matrices (``--size``, default 8192), in float32 and in bfloat16. In flowrt, ``x``
  and the ``w_i`` are ``tf.Variable``s on the GPU and a step fetches
  ``reduce_sum(cast(y[0, :8], float32))``, so the whole chain runs and only one scalar
  comes back; in CuPy, the same chain with ``cupy.matmul`` and the same reduction
  followed by ``.get()``. Both steps include one tiny device-to-host copy, which waits
  for the chain. TFLOP/s counts ``2 * N**3 * K`` per step.
- ``h2d_copy``: host-to-device bandwidth for a ``--copy-mib`` MiB (default 256) float32
  array: (a) ``CUDADevice.from_host`` of a pageable numpy array (flowrt's chunked,
  pinned staging pipeline) then ``device.synchronize()``; (b) CuPy's own pinned copy,
  ``ndarray.set(pinned, stream=s)`` from a ``cupyx.empty_pinned`` buffer, then
  ``s.synchronize()``; (c) CuPy from pageable memory, ``cupy.asarray(pageable)``; (d) a
  flowrt Session step feeding the pageable array to a ``tf.reduce_sum`` on the GPU (the
  whole step's time, as GB/s of the feed). Rows compare (a) and (d) with (b) and (c).
- ``mlp_train``: training steps/s of an MLP (``--layers``, default 784-512-512-10,
  batch ``--batch`` 256, ReLU, softmax cross entropy, ``GradientDescentOptimizer(0.1)``
  or Adam with ``--optimizer adam``), fed the same random numpy batch every step (so the
  feed's host-to-device copy is in the step) and fetching the loss. flowrt on the GPU
  (``allow_soft_placement=True``) is compared with a hand-written CuPy step (forward,
  softmax-cross-entropy gradients and backward written out, then the same update);
  flowrt on the CPU (the same graph under ``/device:CPU:0``) with the same hand-written
  step in numpy. The first losses of flowrt and the raw step are checked to agree.
- ``cnn_train``: training steps/s of the tutorial CNN (conv 5x5x32, pool, conv 5x5x64,
  pool, dense 1024, dense 10; batches ``--cnn-batch``, 128 and 256) on the GPU, against the same
  step written by hand with CuPy and cuDNN frontend graphs for the convolutions (target
  >= 0.9). Two rows: flowrt's cuDNN path, and its GEMM path (``FLOWRT_CUDNN=0``). Each
  row says how many cuDNN calls one flowrt step made. GPU only.

Every flowrt case also runs one traced step and reports where its nodes ran, so a node
that fell back to the CPU shows up. Run it on a machine with a GPU and CuPy (and
``ml_dtypes`` for bfloat16)::

    python bench/gpu_bench.py                      # every case, on the GPU
    python bench/gpu_bench.py --bench matmul_chain --size 4096 --chain 4
    python bench/gpu_bench.py --markdown --json gpu.json   # a table for BENCHMARKS.md

``--device CPU`` runs the flowrt side on ``/device:CPU:0`` with small sizes (default
``--size 512``, ``--copy-mib 16``) and numpy as the raw reference, a smoke test of the
script that needs no GPU; cases that need one are skipped with the reason.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

BENCHES = ("matmul_chain", "h2d_copy", "mlp_train", "cnn_train")
Step = Callable[[], Any]


class Skip(Exception):
    """A case (or one side of it) that cannot run here; the message says why."""


# -- environment ------------------------------------------------------------------------
def load_cupy() -> tuple[Any, str | None]:
    """``(cupy module, None)``, or ``(None, why it cannot be used)``."""
    try:
        import cupy  # type: ignore

        cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # ImportError, no driver, no device
        return None, f"{type(e).__name__}: {e}"
    return cupy, None


def load_bfloat16(tf: Any) -> tuple[Any, str | None]:
    """``(numpy bfloat16 dtype, None)``, or ``(None, why bfloat16 is unavailable)``."""
    try:
        import ml_dtypes  # type: ignore  # noqa: F401
    except ImportError as e:
        return None, f"ml_dtypes is not installed ({e}); pip install ml_dtypes"
    try:
        return np.dtype(tf.bfloat16.as_numpy_dtype), None
    except Exception as e:
        return None, f"flowrt has no numpy bfloat16: {type(e).__name__}: {e}"


def find_gpu(tf: Any) -> tuple[Any, str | None]:
    """flowrt's first ``CUDADevice`` (``/device:GPU:0``), or ``(None, reason)``."""
    try:
        from flowrt.plugins.devices.cuda import gpu_device_type
    except Exception as e:
        return None, f"flowrt's CUDA plugin cannot be imported: {type(e).__name__}: {e}"
    dt = gpu_device_type()
    try:
        devs = dt.discover(tf.ConfigProto(), "localhost", 0)
    except Exception as e:
        return None, f"GPU discovery failed: {type(e).__name__}: {e}"
    if not devs:
        return None, f"flowrt found no GPU: {dt.unavailable_reason}"
    return devs[0], None


def environment(tf: Any, cp: Any, cupy_why: str | None, gpu: Any) -> dict[str, Any]:
    """What the header prints: machine, library versions, GPU name."""
    env: dict[str, Any] = {
        "machine": platform.machine(), "cpus": os.cpu_count(),
        "python": platform.python_version(), "numpy": np.__version__,
        "flowrt": getattr(tf, "__version__", "?"),
        "cupy": getattr(cp, "__version__", None) if cp is not None else None,
        "cupy_unavailable": cupy_why, "gpu": None,
        "CUPY_TF32": os.environ.get("CUPY_TF32", "0"),
    }
    try:
        import ml_dtypes  # type: ignore

        env["ml_dtypes"] = ml_dtypes.__version__
    except ImportError:
        env["ml_dtypes"] = None
    if cp is not None:
        try:
            name = cp.cuda.runtime.getDeviceProperties(0)["name"]
            env["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
            env["cuda_runtime"] = cp.cuda.runtime.runtimeGetVersion()
            env["cuda_driver"] = cp.cuda.runtime.driverGetVersion()
        except Exception as e:
            env["gpu"] = f"? ({type(e).__name__}: {e})"
    if gpu is not None:
        env["flowrt_gpu"] = getattr(gpu, "description", "")
    return env


_T0 = time.perf_counter()


def _log(msg: str) -> None:
    """Progress on stderr, with the seconds since the start."""
    print(f"[{time.perf_counter() - _T0:7.1f} s] {msg}", file=sys.stderr, flush=True)


# -- timing -----------------------------------------------------------------------------
class Timed:
    """A step warmed up and calibrated: each call runs ``n`` steps, then ``sync`` (which
    waits for queued device work, so a step that returns before its GPU work is done is
    still charged for it), and returns the seconds per step. ``n`` is ``steps`` if given,
    else the number of steps that ran in ``min_time`` seconds after the warm-up."""

    def __init__(self, step: Step, warmup: int, min_time: float, steps: int | None = None,
                 sync: Callable[[], None] | None = None, max_steps: int = 100_000):
        self.step = step
        self.sync = sync or (lambda: None)
        for _ in range(max(0, warmup)):
            step()
        self.sync()
        if steps:
            self.n = steps
        else:
            n, t0 = 0, time.perf_counter()
            while n < max_steps:
                step()
                n += 1
                if time.perf_counter() - t0 >= min_time:
                    self.sync()
                    if time.perf_counter() - t0 >= min_time:
                        break
            self.n = n

    def __call__(self) -> float:
        step, n = self.step, self.n
        t = time.perf_counter()
        for _ in range(n):
            step()
        self.sync()
        return (time.perf_counter() - t) / n


def interleave(timed: dict[str, Timed], repeats: int) -> dict[str, list[float]]:
    """Seconds per step of each side, over ``repeats`` alternating repetitions."""
    out: dict[str, list[float]] = {k: [] for k in timed}
    for _ in range(repeats):
        for k, t in timed.items():
            out[k].append(t())
    return out


def make_timed(row: dict[str, Any], side: str, build: Callable[[], Step],
               a: argparse.Namespace, warmup: int,
               sync: Callable[[], None] | None = None) -> Timed | None:
    """``Timed(build(), ..., sync)``, or None with ``row[side + "_error"]`` set if it
    fails."""
    try:
        return Timed(build(), warmup, a.min_time, a.steps, sync)
    except Skip as e:
        row[f"{side}_error"] = f"skipped: {e}"
    except Exception as e:  # a failure is a finding, not a crash
        row[f"{side}_error"] = f"{type(e).__name__}: {e}"[:300]
        _log(f"  {row['case']}: {side} failed: {row[f'{side}_error']}")
    return None


def finish_row(row: dict[str, Any], timed: dict[str, Timed], repeats: int,
               work: float) -> None:
    """Time the sides that built and fill ``row``: ``work`` units per step (FLOPs,
    bytes, 1 for steps) divided by the median seconds per step, scaled by
    ``row["scale"]`` (1e12 for TFLOP/s, 1e9 for GB/s)."""
    secs = interleave(timed, repeats)
    for side, ts in secs.items():
        med = statistics.median(ts)
        row[f"{side}_s"] = med
        row[f"{side}_steps"] = timed[side].n
        row[f"{side}_all_s"] = ts
        row[side] = work / med / row.get("scale", 1.0)
    if row.get("flowrt") and row.get("raw"):
        row["ratio"] = row["flowrt"] / row["raw"]


def placement(tf: Any, sess: Any, fetches: Any, feed: dict | None = None) -> dict[str, Any]:
    """Run one traced step; ``{device: {op type: count}}`` of the nodes it ran."""
    opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    md = tf.RunMetadata()
    sess.run(fetches, feed, options=opts, run_metadata=md)
    out: dict[str, dict[str, int]] = {}
    for ds in md.step_stats.dev_stats:
        dev = ds.device.rsplit("/", 1)[-1].replace("device:", "")
        ops = out.setdefault(dev, {})
        for ns in ds.node_stats:
            label = ns.timeline_label
            op = label.split("=", 1)[1].strip().rstrip("()") if "=" in label else "?"
            ops[op] = ops.get(op, 0) + 1
    return out


def check_placement(row: dict[str, Any], where: dict[str, Any], device: str,
                    ops: tuple[str, ...]) -> None:
    """Record the placement in ``row``; add a warning if one of ``ops`` ran elsewhere
    than ``device`` ("GPU:0")."""
    row["placement"] = where
    off = sorted({op for dev, counts in where.items() if dev != device
                  for op in counts if op in ops})
    if off:
        row.setdefault("warnings", []).append(
            f"{', '.join(off)} ran off {device}: {where}")


def free_gpu(cp: Any) -> None:
    """Give CuPy's cached device and pinned blocks back (between cases)."""
    if cp is None:
        return
    try:
        cp.cuda.Device().synchronize()
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()
    except Exception:
        pass


class Ctx:
    """What every case needs: the parsed arguments, flowrt, and the raw array module."""

    def __init__(self, a: argparse.Namespace, tf: Any, cp: Any, cupy_why: str | None,
                 gpu: Any, gpu_why: str | None):
        self.a, self.tf, self.cp, self.gpu = a, tf, cp, gpu
        self.on_gpu = a.device == "GPU"
        self.device = "/device:GPU:0" if self.on_gpu else "/device:CPU:0"
        self.short = "GPU:0" if self.on_gpu else "CPU:0"
        # the raw reference runs where flowrt's side does
        self.xp = cp if self.on_gpu else np
        self.raw_label = "raw CuPy" if self.on_gpu else "raw numpy"
        self.raw_why = (f"cupy is unavailable ({cupy_why})" if self.on_gpu and cp is None
                        else None)
        self.gpu_why = gpu_why if self.on_gpu else None

    def need_flowrt_device(self) -> None:
        if self.gpu_why:
            raise Skip(self.gpu_why)

    def need_raw(self) -> None:
        if self.raw_why:
            raise Skip(self.raw_why)

    def config(self) -> Any:
        cfg = self.tf.ConfigProto(allow_soft_placement=True)
        cfg.gpu_options.allow_growth = True
        return cfg

    def sync(self) -> None:
        if self.xp is not np:
            self.xp.cuda.get_current_stream().synchronize()

    def host(self, a: Any) -> np.ndarray:
        return a.get() if self.xp is not np else np.asarray(a)

    def syncs(self, gpu: bool) -> dict[str, Callable[[], None] | None]:
        """``{side: what waits for its queued device work}``: for flowrt, every stream
        of its GPU; for raw CuPy, the whole device; nothing on the CPU."""
        if not gpu:
            return {"flowrt": None, "raw": None}
        dev, cp = self.gpu, self.cp
        return {"flowrt": dev.synchronize if dev is not None else None,
                "raw": (lambda: cp.cuda.Device().synchronize()) if cp is not None else None}


# -- 1. matmul_chain --------------------------------------------------------------------
def bench_matmul_chain(c: Ctx) -> list[dict[str, Any]]:
    """A chain of ``--chain`` N x N matmuls, float32 and bfloat16: TFLOP/s."""
    a, tf = c.a, c.tf
    n, k = a.size, a.chain
    rows = []
    bf16, bf16_why = load_bfloat16(tf)
    for name, dtype, why in (("float32", np.dtype(np.float32), None),
                             ("bfloat16", bf16, bf16_why)):
        row: dict[str, Any] = {"bench": "matmul_chain",
                               "case": f"matmul_chain {name} N={n} K={k}",
                               "unit": "TFLOP/s", "scale": 1e12}
        rows.append(row)
        if why:
            row["flowrt_error"] = row["raw_error"] = f"skipped: {why}"
            report(row, c)
            continue
        _log(f"{row['case']} ...")
        rng = np.random.default_rng(0)
        scale = np.float32(1.0 / math.sqrt(n))
        mats = []
        for _ in range(k + 1):
            m = rng.standard_normal((n, n), dtype=np.float32)
            m *= scale
            mats.append(m.astype(dtype) if dtype != np.float32 else m)
        tf_dtype = tf.as_dtype(dtype)
        sess: Any = None
        raw_arrays: list[Any] = []
        values: dict[str, float] = {}

        def build_flowrt() -> Step:
            nonlocal sess
            c.need_flowrt_device()
            g = tf.Graph()
            with g.as_default(), tf.device(c.device):
                phs = [tf.placeholder(tf_dtype, [n, n], name=f"init{i}")
                       for i in range(k + 1)]
                vs = [tf.Variable(ph, trainable=False, name=f"w{i}")
                      for i, ph in enumerate(phs)]
                y = vs[0]
                for w in vs[1:]:
                    y = tf.matmul(y, w)
                fetch = tf.reduce_sum(tf.cast(y[0, :8], tf.float32))
            sess = tf.Session(graph=g, config=c.config())
            for ph, v, m in zip(phs, vs, mats):  # fed, not embedded in the graph
                sess.run(v.initializer, {ph: m})
            values["flowrt"] = float(sess.run(fetch))
            check_placement(row, placement(tf, sess, fetch), c.short, ("MatMul",))
            return lambda: sess.run(fetch)

        def build_raw() -> Step:
            c.need_raw()
            xp = c.xp
            raw_arrays.extend(xp.asarray(m) for m in mats)
            c.sync()
            f32 = np.float32

            def step() -> Any:
                y = raw_arrays[0]
                for w in raw_arrays[1:]:
                    y = xp.matmul(y, w)
                return c.host(y[0, :8].astype(f32).sum())

            values["raw"] = float(step())
            return step

        try:
            timed = {}
            syncs = c.syncs(c.on_gpu)
            for side, build in (("flowrt", build_flowrt), ("raw", build_raw)):
                t = make_timed(row, side, build, a, a.warmup, syncs[side])
                if t is not None:
                    timed[side] = t
            del mats
            if "flowrt" in values and "raw" in values:
                tol = 1e-3 if name == "float32" else 5e-2
                row["values"] = [values["flowrt"], values["raw"]]
                row["agree"] = bool(np.isclose(values["flowrt"], values["raw"], rtol=tol,
                                               atol=tol * 3))
            finish_row(row, timed, a.repeats, 2.0 * n ** 3 * k)
        finally:
            if sess is not None:
                sess.close()
            raw_arrays.clear()
            free_gpu(c.cp)
        report(row, c)
    return rows


# -- 2. h2d_copy ------------------------------------------------------------------------
def bench_h2d_copy(c: Ctx) -> list[dict[str, Any]]:
    """Host-to-device bandwidth of a ``--copy-mib`` float32 array, four ways: GB/s."""
    a, tf, cp = c.a, c.tf, c.cp
    nbytes = int(a.copy_mib * (1 << 20)) // 4 * 4
    n = nbytes // 4
    mib = f"{nbytes / (1 << 20):g} MiB"
    rng = np.random.default_rng(0)
    pageable = rng.random(n, dtype=np.float32)  # every page touched
    ways: dict[str, Timed] = {}
    errs: dict[str, str] = {}
    info: dict[str, Any] = {}
    keep: list[Any] = []
    sess: Any = None

    def build_from_host() -> Step:  # (a)
        if not c.on_gpu:
            raise Skip("CUDADevice.from_host needs --device GPU")
        c.need_flowrt_device()
        dev = c.gpu
        out = dev.from_host(pageable)
        dev.synchronize()
        info["from_host_exact"] = bool(np.array_equal(dev.to_host(out), pageable))
        del out

        def step() -> None:
            dev.from_host(pageable)
            dev.synchronize()

        return step

    def build_pinned() -> Step:  # (b)
        if not c.on_gpu:
            raise Skip("CuPy's pinned copy needs --device GPU")
        c.need_raw()
        import cupyx  # type: ignore

        pinned = cupyx.empty_pinned((n,), np.float32)
        pinned[...] = pageable
        dst = cp.empty((n,), cp.float32)
        s = cp.cuda.Stream(non_blocking=True)
        keep.extend((pinned, dst, s))
        dst.set(pinned, stream=s)
        s.synchronize()
        info["pinned_exact"] = bool(np.array_equal(dst.get(), pageable))

        def step() -> None:
            dst.set(pinned, stream=s)
            s.synchronize()

        return step

    def build_pageable() -> Step:  # (c)
        if not c.on_gpu:
            raise Skip("cupy.asarray needs --device GPU")
        c.need_raw()
        stream = cp.cuda.get_current_stream()

        def step() -> None:
            cp.asarray(pageable)
            stream.synchronize()

        return step

    def build_feed() -> Step:  # (d)
        nonlocal sess
        c.need_flowrt_device()
        g = tf.Graph()
        with g.as_default(), tf.device(c.device):
            x = tf.placeholder(tf.float32, [n], name="x")
            total = tf.reduce_sum(x)
        sess = tf.Session(graph=g, config=c.config())
        feed = {x: pageable}
        got = float(sess.run(total, feed))
        # the same float32 reduction where the step runs (a float32 sum of many
        # elements is not the exact one); the exact one for reference
        if c.on_gpu and cp is not None:
            ref = float(cp.asarray(pageable).sum())
        else:
            ref = float(pageable.sum())
        info["feed_values"] = [got, ref, float(pageable.sum(dtype=np.float64))]
        info["feed_sum_ok"] = bool(np.isclose(got, ref, rtol=1e-4))
        info["feed_placement"] = placement(tf, sess, total, feed)
        return lambda: sess.run(total, feed)

    builds = {"from_host": build_from_host, "cupy_pinned": build_pinned,
              "cupy_pageable": build_pageable, "session_feed": build_feed}
    _log(f"h2d_copy {mib} ...")
    try:
        for way, build in builds.items():
            try:
                sync = c.syncs(c.on_gpu)["flowrt"] if way == "session_feed" else None
                ways[way] = Timed(build(), a.warmup, a.min_time, a.steps, sync)
            except Skip as e:
                errs[way] = f"skipped: {e}"
            except Exception as e:
                errs[way] = f"{type(e).__name__}: {e}"[:300]
                _log(f"  h2d_copy {way} failed: {errs[way]}")
        secs = interleave(ways, a.repeats)
    finally:
        if sess is not None:
            sess.close()
        keep.clear()
        free_gpu(cp)
    gbs = {w: nbytes / statistics.median(ts) / 1e9 for w, ts in secs.items()}
    rows = []
    for fl, raw, what in (("from_host", "cupy_pinned", "from_host vs cupy pinned set"),
                          ("from_host", "cupy_pageable", "from_host vs cupy.asarray"),
                          ("session_feed", "cupy_pinned", "session feed vs cupy pinned set"),
                          ("session_feed", "cupy_pageable", "session feed vs cupy.asarray")):
        row: dict[str, Any] = {"bench": "h2d_copy", "case": f"h2d_copy {mib}: {what}",
                               "unit": "GB/s", "flowrt_way": fl, "raw_way": raw}
        for side, way in (("flowrt", fl), ("raw", raw)):
            if way in gbs:
                row[side] = gbs[way]
                row[f"{side}_s"] = statistics.median(secs[way])
                row[f"{side}_steps"] = ways[way].n
                row[f"{side}_all_s"] = secs[way]
            else:
                row[f"{side}_error"] = errs.get(way, "not run")
        if row.get("flowrt") and row.get("raw"):
            row["ratio"] = row["flowrt"] / row["raw"]
        if fl == "from_host" and "from_host_exact" in info:
            row["agree"] = info["from_host_exact"]
        if fl == "session_feed" and "feed_sum_ok" in info:
            row["agree"] = info["feed_sum_ok"]
            row["values"] = info["feed_values"]
            check_placement(row, info["feed_placement"], c.short, ("Sum",))
        if row.get("raw_error", "").startswith("skipped") and \
                row.get("flowrt_error", "").startswith("skipped") and rows:
            continue  # nothing of this pair ran; the first row already says why
        rows.append(row)
        report(row, c)
    return rows


# -- 3. mlp_train -----------------------------------------------------------------------
def mlp_params(sizes: list[int], seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """He-initialised float32 ``(W, b)`` pairs of an MLP with layer ``sizes``."""
    rng = np.random.default_rng(seed)
    out = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        w = rng.standard_normal((fan_in, fan_out), dtype=np.float32)
        w *= np.float32(math.sqrt(2.0 / fan_in))
        out.append((w, np.zeros(fan_out, np.float32)))
    return out


class RawMLP:
    """The MLP's training step written out by hand against an array module ``xp``
    (cupy or numpy): forward, softmax cross entropy, backward, and an SGD or Adam update
    with TensorFlow's formulas. ``step`` copies the batch in and returns the loss (a
    host float, so a GPU step ends with a device-to-host sync)."""

    def __init__(self, xp: Any, params: list[tuple[np.ndarray, np.ndarray]],
                 optimizer: str, lr: float):
        self.xp = xp
        self.ws = [xp.asarray(w).copy() for w, _ in params]
        self.bs = [xp.asarray(b).copy() for _, b in params]
        self.adam = optimizer == "adam"
        self.lr = lr
        self.t = 0
        if self.adam:
            self.m = [xp.zeros_like(p) for p in self.ws + self.bs]
            self.v = [xp.zeros_like(p) for p in self.ws + self.bs]

    def step(self, xs: np.ndarray, ys: np.ndarray) -> float:
        """One training step on the host batch ``(xs, ys)``; the loss before it."""
        xp = self.xp
        x = xp.asarray(xs)
        y = xp.asarray(ys)
        last = len(self.ws) - 1
        acts = [x]  # the input of each layer
        h = x
        for i, (w, b) in enumerate(zip(self.ws, self.bs)):
            z = xp.matmul(h, w) + b
            if i < last:
                h = xp.maximum(z, 0)
                acts.append(h)
            else:
                h = z
        logits = h - h.max(axis=1, keepdims=True)
        e = xp.exp(logits)
        s = e.sum(axis=1, keepdims=True)
        loss = xp.mean(xp.log(s[:, 0]) - (y * logits).sum(axis=1))
        d = (e / s - y) * np.float32(1.0 / x.shape[0])  # d loss / d logits
        gw: list[Any] = [None] * len(self.ws)
        gb: list[Any] = [None] * len(self.ws)
        for i in range(last, -1, -1):
            gw[i] = xp.matmul(acts[i].T, d)
            gb[i] = d.sum(axis=0)
            if i > 0:
                d = xp.matmul(d, self.ws[i].T) * (acts[i] > 0)
        self._update(gw + gb)
        return float(loss)

    def _update(self, grads: list[Any]) -> None:
        params = self.ws + self.bs
        lr = np.float32(self.lr)
        if not self.adam:
            for p, g in zip(params, grads):
                p -= lr * g
            return
        xp = self.xp
        b1, b2, eps = 0.9, 0.999, 1e-8
        self.t += 1
        lr_t = np.float32(self.lr * math.sqrt(1 - b2 ** self.t) / (1 - b1 ** self.t))
        for p, g, m, v in zip(params, grads, self.m, self.v):
            m += (g - m) * np.float32(1 - b1)
            v += (g * g - v) * np.float32(1 - b2)
            p -= lr_t * m / (xp.sqrt(v) + np.float32(eps))


def build_flowrt_mlp(tf: Any, device: str, params: list[tuple[np.ndarray, np.ndarray]],
                     optimizer: str, lr: float,
                     config: Any) -> tuple[Any, Any, Any, Any, Any]:
    """The MLP's graph under ``device``: ``(session, x, y, train_op, loss)``, variables
    initialised from ``params``."""
    g = tf.Graph()
    with g.as_default(), tf.device(device):
        x = tf.placeholder(tf.float32, [None, params[0][0].shape[0]], name="x")
        y = tf.placeholder(tf.float32, [None, params[-1][0].shape[1]], name="y")
        h = x
        for i, (w0, b0) in enumerate(params):
            w = tf.Variable(w0, name=f"w{i}")
            b = tf.Variable(b0, name=f"b{i}")
            h = tf.matmul(h, w) + b
            if i < len(params) - 1:
                h = tf.nn.relu(h)
    return _training_session(tf, g, device, x, y, h, optimizer, lr, config)


def _training_session(tf: Any, g: Any, device: str, x: Any, y: Any, logits: Any,
                      optimizer: str, lr: float, config: Any
                      ) -> tuple[Any, Any, Any, Any, Any]:
    """Softmax cross entropy of ``logits`` against ``y``, its SGD or Adam step (under
    ``device``), and a session with the variables initialised: ``(session, x, y,
    train_op, loss)``."""
    with g.as_default(), tf.device(device):
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y,
                                                                          logits=logits))
        opt = (tf.train.AdamOptimizer(lr) if optimizer == "adam"
               else tf.train.GradientDescentOptimizer(lr))
        train = opt.minimize(loss)
        init = tf.global_variables_initializer()
    sess = tf.Session(graph=g, config=config)
    try:
        sess.run(init)
    except BaseException:
        sess.close()
        raise
    return sess, x, y, train, loss


def time_training(row: dict[str, Any], c: Ctx, gpu: bool, build_flowrt: Callable[[], Step],
                  build_raw: Callable[[], Step], losses: dict[str, list[float]]) -> None:
    """Build and time both sides of a training row, alternating; record whether the
    first losses each side's builder left in ``losses`` agree."""
    a = c.a
    timed = {}
    syncs = c.syncs(gpu)
    for side, build in (("flowrt", build_flowrt), ("raw", build_raw)):
        t = make_timed(row, side, build, a, max(a.warmup, 5), syncs[side])
        if t is not None:
            timed[side] = t
    if "flowrt" in losses and "raw" in losses:
        row["values"] = [losses["flowrt"], losses["raw"]]
        row["agree"] = bool(np.allclose(losses["flowrt"], losses["raw"], rtol=1e-3,
                                        atol=1e-4))
    finish_row(row, timed, a.repeats, 1.0)


def bench_mlp_train(c: Ctx) -> list[dict[str, Any]]:
    """Training steps/s of the MLP: flowrt on the GPU and on the CPU, each against the
    hand-written step on the same device (CuPy, numpy)."""
    a, tf = c.a, c.tf
    sizes = [int(s) for s in a.layers.split("-")]
    lr = a.lr if a.lr is not None else (0.001 if a.optimizer == "adam" else 0.1)
    params = mlp_params(sizes)
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((a.batch, sizes[0]), dtype=np.float32)
    ys = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], a.batch)]
    desc = f"{a.layers} b{a.batch} {a.optimizer}"
    targets = [("GPU", "/device:GPU:0", "GPU:0", c.cp, "CuPy")] if c.on_gpu else []
    targets.append(("CPU", "/device:CPU:0", "CPU:0", np, "numpy"))
    rows = []
    for where, device, short, xp, xp_name in targets:
        row: dict[str, Any] = {"bench": "mlp_train",
                               "case": f"mlp_train {desc}, {where} (raw: {xp_name})",
                               "unit": "steps/s", "raw_label": f"raw {xp_name}"}
        rows.append(row)
        _log(f"{row['case']} ...")
        sess: Any = None
        raw: RawMLP | None = None
        losses: dict[str, list[float]] = {}

        def build_flowrt() -> Step:
            nonlocal sess
            if where == "GPU":
                c.need_flowrt_device()
            sess, x, y, train, loss = build_flowrt_mlp(tf, device, params, a.optimizer,
                                                       lr, c.config())
            feed = {x: xs, y: ys}
            fetches = [train, loss]
            losses["flowrt"] = [float(sess.run(fetches, feed)[1]) for _ in range(3)]
            check_placement(row, placement(tf, sess, fetches, feed), short, ("MatMul",))
            return lambda: sess.run(fetches, feed)

        def build_raw() -> Step:
            nonlocal raw
            if xp is None:
                raise Skip(c.raw_why or "cupy is unavailable")
            raw = RawMLP(xp, params, a.optimizer, lr)
            losses["raw"] = [raw.step(xs, ys) for _ in range(3)]
            r = raw
            return lambda: r.step(xs, ys)

        try:
            time_training(row, c, where == "GPU", build_flowrt, build_raw, losses)
        finally:
            if sess is not None:
                sess.close()
            raw = None
            free_gpu(c.cp)
        report(row, c)
    if len(rows) == 2 and rows[0].get("flowrt") and rows[1].get("flowrt"):
        rows[0]["gpu_over_cpu"] = rows[0]["flowrt"] / rows[1]["flowrt"]
    return rows


# -- 4. cnn_train -----------------------------------------------------------------------
def cnn_params(seed: int = 0) -> dict[str, np.ndarray]:
    """The tutorial CNN's float32 parameters: conv 5x5x1x32 and 5x5x32x64 (HWIO, as TF
    stores them), dense 3136x1024 and 1024x10, zero biases."""
    rng = np.random.default_rng(seed)

    def he(shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        w = rng.standard_normal(shape, dtype=np.float32)
        return w * np.float32(math.sqrt(2.0 / fan_in))

    return {"c1": he((5, 5, 1, 32), 25), "c2": he((5, 5, 32, 64), 800),
            "d1": he((3136, 1024), 3136), "d2": he((1024, 10), 1024),
            "b1": np.zeros(32, np.float32), "b2": np.zeros(64, np.float32),
            "b3": np.zeros(1024, np.float32), "b4": np.zeros(10, np.float32)}


def load_cudnn() -> tuple[Any, str | None]:
    """``(cudnn frontend module, None)``, or ``(None, why it cannot be used)``."""
    try:
        import cudnn  # type: ignore

        cudnn.backend_version()
    except Exception as e:
        return None, f"the cuDNN frontend is unavailable: {type(e).__name__}: {e}"
    return cudnn, None


class RawCNN:
    """The tutorial CNN's training step written by hand: convolutions as cuDNN frontend
    graphs (filters kept in cuDNN's KRSC layout), max pooling, ReLU, dense layers and
    softmax cross entropy in CuPy, and the update of :class:`RawMLP`."""

    def __init__(self, cp: Any, cudnn: Any, params: dict[str, np.ndarray], batch: int,
                 optimizer: str, lr: float):
        self.xp, self.cudnn, self.batch = cp, cudnn, batch
        self.handle = cudnn.create_handle()
        krsc = [cp.ascontiguousarray(cp.asarray(params[k]).transpose(3, 0, 1, 2))
                for k in ("c1", "c2")]
        self.ws = krsc + [cp.asarray(params[k]).copy() for k in ("d1", "d2")]
        self.bs = [cp.asarray(params[k]).copy() for k in ("b1", "b2", "b3", "b4")]
        self.adam, self.lr, self.t = optimizer == "adam", lr, 0
        if self.adam:
            self.m = [cp.zeros_like(p) for p in self.ws + self.bs]
            self.v = [cp.zeros_like(p) for p in self.ws + self.bs]
        b = batch
        self.fwd1 = self._graph("fprop", (b, 28, 28, 1), (32, 5, 5, 1))
        self.fwd2 = self._graph("fprop", (b, 14, 14, 32), (64, 5, 5, 32))
        self.wg1 = self._graph("wgrad", (b, 28, 28, 1), (32, 5, 5, 1))
        self.wg2 = self._graph("wgrad", (b, 14, 14, 32), (64, 5, 5, 32))
        self.dg2 = self._graph("dgrad", (b, 14, 14, 32), (64, 5, 5, 32))

    def _graph(self, kind: str, xs: tuple[int, ...], ks: tuple[int, ...]) -> tuple:
        """A 'SAME' stride-1 convolution graph on NHWC data: (graph, tensors, ws)."""
        cudnn = self.cudnn
        f = cudnn.data_type.FLOAT
        g = cudnn.pygraph(io_data_type=f, intermediate_data_type=f, compute_data_type=f,
                          handle=self.handle)
        n, h, w, c = xs
        k, r, s_, _ = ks

        def nhwc(ch: int, name: str) -> Any:
            return g.tensor(name=name, dim=[n, ch, h, w], stride=[h * w * ch, 1, w * ch, ch],
                            data_type=f)

        def filt(name: str) -> Any:
            return g.tensor(name=name, dim=[k, c, r, s_], stride=[r * s_ * c, 1, s_ * c, c],
                            data_type=f)

        conv = {"pre_padding": [r // 2, s_ // 2], "post_padding": [r // 2, s_ // 2],
                "stride": [1, 1], "dilation": [1, 1], "compute_data_type": f}
        if kind == "fprop":
            a, b_ = nhwc(c, "x"), filt("w")
            out = g.conv_fprop(image=a, weight=b_, **conv)
            dim, stride = [n, k, h, w], [h * w * k, 1, w * k, k]
        elif kind == "wgrad":
            a, b_ = nhwc(c, "x"), nhwc(k, "dy")
            out = g.conv_wgrad(image=a, loss=b_, **conv)
            dim, stride = [k, c, r, s_], [r * s_ * c, 1, s_ * c, c]
        else:
            a, b_ = nhwc(k, "dy"), filt("w")
            out = g.conv_dgrad(loss=a, filter=b_, **conv)
            dim, stride = [n, c, h, w], [h * w * c, 1, w * c, c]
        out.set_output(True)
        out.set_data_type(f)
        out.set_dim(dim)
        out.set_stride(stride)
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        if os.environ.get("CUPY_TF32", "0") != "1":
            g.deselect_numeric_notes([cudnn.numerical_note.TENSOR_CORE,
                                      cudnn.numerical_note.DOWN_CONVERT_INPUTS])
        g.check_support()
        g.build_plans()
        ws = self.xp.empty((max(int(g.get_workspace_size()), 1),), dtype=self.xp.uint8)
        return g, a, b_, out, ws

    def _run(self, graph: tuple, a: Any, b: Any, out_shape: tuple[int, ...]) -> Any:
        g, ta, tb, to, ws = graph
        out = self.xp.empty(out_shape, dtype=self.xp.float32)
        g.execute({ta: a.data.ptr, tb: b.data.ptr, to: out.data.ptr}, ws.data.ptr,
                  handle=self.handle)
        return out

    def _pool(self, a: Any) -> tuple[Any, Any]:
        n, h, w, c = a.shape
        win = a.reshape(n, h // 2, 2, w // 2, 2, c)
        p = win.max(axis=(2, 4))
        return p, win == p[:, :, None, :, None, :]

    def step(self, xs: np.ndarray, ys: np.ndarray) -> float:
        """One training step on the host batch; the loss before it."""
        xp = self.xp
        b = xs.shape[0]
        x = xp.asarray(xs)
        y = xp.asarray(ys)
        w1, w2, w3, w4 = self.ws
        b1, b2, b3, b4 = self.bs
        z1 = self._run(self.fwd1, x, w1, (b, 28, 28, 32)) + b1
        a1 = xp.maximum(z1, 0)
        p1, m1 = self._pool(a1)
        z2 = self._run(self.fwd2, p1, w2, (b, 14, 14, 64)) + b2
        a2 = xp.maximum(z2, 0)
        p2, m2 = self._pool(a2)
        flat = p2.reshape(b, 3136)
        z3 = flat @ w3 + b3
        a3 = xp.maximum(z3, 0)
        logits = a3 @ w4 + b4
        logits = logits - logits.max(axis=1, keepdims=True)
        e = xp.exp(logits)
        s = e.sum(axis=1, keepdims=True)
        loss = xp.mean(xp.log(s[:, 0]) - (y * logits).sum(axis=1))
        d = (e / s - y) * np.float32(1.0 / b)
        g4, gb4 = a3.T @ d, d.sum(axis=0)
        d3 = (d @ w4.T) * (z3 > 0)
        g3, gb3 = flat.T @ d3, d3.sum(axis=0)
        dp2 = (d3 @ w3.T).reshape(b, 7, 7, 64)
        dz2 = (m2 * dp2[:, :, None, :, None, :]).reshape(b, 14, 14, 64) * (z2 > 0)
        gb2 = dz2.sum(axis=(0, 1, 2))
        g2 = self._run(self.wg2, p1, dz2, (64, 5, 5, 32))
        dp1 = self._run(self.dg2, dz2, w2, (b, 14, 14, 32))
        dz1 = (m1 * dp1[:, :, None, :, None, :]).reshape(b, 28, 28, 32) * (z1 > 0)
        gb1 = dz1.sum(axis=(0, 1, 2))
        g1 = self._run(self.wg1, x, dz1, (32, 5, 5, 1))
        RawMLP._update(self, [g1, g2, g3, g4, gb1, gb2, gb3, gb4])  # type: ignore[arg-type]
        return float(loss)


def build_flowrt_cnn(tf: Any, device: str, params: dict[str, np.ndarray], optimizer: str,
                     lr: float, config: Any) -> tuple[Any, Any, Any, Any, Any]:
    """The tutorial CNN under ``device``: ``(session, x, y, train_op, loss)``."""
    g = tf.Graph()
    with g.as_default(), tf.device(device):
        x = tf.placeholder(tf.float32, [None, 28, 28, 1], name="x")
        y = tf.placeholder(tf.float32, [None, 10], name="y")
        v = {k: tf.Variable(p, name=k) for k, p in params.items()}
        h = x
        for w, b in (("c1", "b1"), ("c2", "b2")):
            h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, v[w], [1, 1, 1, 1], "SAME"), v[b]))
            h = tf.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
        h = tf.reshape(h, [-1, 3136])
        h = tf.nn.relu(tf.matmul(h, v["d1"]) + v["b3"])
        logits = tf.matmul(h, v["d2"]) + v["b4"]
    return _training_session(tf, g, device, x, y, logits, optimizer, lr, config)


def bench_cnn_train(c: Ctx) -> list[dict[str, Any]]:
    """Training steps/s of the tutorial CNN on the GPU: flowrt with its cuDNN path, and
    with the GEMM path (``FLOWRT_CUDNN=0``), each against the hand-written CuPy + cuDNN
    step."""
    a, tf = c.a, c.tf
    if not c.on_gpu:
        return []
    lr = a.lr if a.lr is not None else (0.001 if a.optimizer == "adam" else 0.01)
    params = cnn_params()
    cudnn, cudnn_why = load_cudnn()
    from flowrt.plugins.kernels import cudnn_conv  # noqa: PLC0415  # GPU-only case

    rows = []
    for bsz, path, env_value in [(int(b), p, e) for b in a.cnn_batch.split(",")
                                 for p, e in (("cuDNN", None),
                                              ("GEMM path, FLOWRT_CUDNN=0", "0"))]:
        rng = np.random.default_rng(2)
        xs = rng.standard_normal((bsz, 28, 28, 1), dtype=np.float32)
        ys = np.eye(10, dtype=np.float32)[rng.integers(0, 10, bsz)]
        row: dict[str, Any] = {"bench": "cnn_train",
                               "case": f"cnn_train tutorial CNN b{bsz} {a.optimizer}, GPU, "
                                       f"flowrt {path} (raw: CuPy + cuDNN)",
                               "unit": "steps/s", "raw_label": "raw CuPy + cuDNN"}
        rows.append(row)
        _log(f"{row['case']} ...")
        sess: Any = None
        losses: dict[str, list[float]] = {}

        def build_flowrt() -> Step:
            nonlocal sess
            c.need_flowrt_device()
            old = os.environ.get("FLOWRT_CUDNN")
            if env_value is not None:
                os.environ["FLOWRT_CUDNN"] = env_value
            try:
                before = cudnn_conv.stats()["executed"]
                sess, x, y, train, loss = build_flowrt_cnn(tf, c.device, params, a.optimizer,
                                                           lr, c.config())
                feed = {x: xs, y: ys}
                fetches = [train, loss]
                losses["flowrt"] = [float(sess.run(fetches, feed)[1]) for _ in range(3)]
                row["cudnn_calls_per_step"] = (cudnn_conv.stats()["executed"] - before) / 3
            finally:
                if env_value is not None:
                    if old is None:
                        os.environ.pop("FLOWRT_CUDNN", None)
                    else:
                        os.environ["FLOWRT_CUDNN"] = old
            check_placement(row, placement(tf, sess, fetches, feed), c.short,
                            ("Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput",
                             "MaxPool", "MaxPoolGrad", "MatMul"))
            return lambda: sess.run(fetches, feed)

        def build_raw() -> Step:
            c.need_raw()
            if cudnn is None:
                raise Skip(cudnn_why)
            raw = RawCNN(c.cp, cudnn, params, bsz, a.optimizer, lr)
            losses["raw"] = [raw.step(xs, ys) for _ in range(3)]
            return lambda: raw.step(xs, ys)

        try:
            time_training(row, c, True, build_flowrt, build_raw, losses)
            if "cudnn_calls_per_step" in row:
                row.setdefault("warnings" if path == "cuDNN" and
                               row["cudnn_calls_per_step"] < 3 else "notes", []).append(
                    f"cuDNN calls per flowrt step: {row['cudnn_calls_per_step']:g} "
                    f"({cudnn_conv.stats()['last_error'] or 'no unsupported graph'})")
        finally:
            if sess is not None:
                sess.close()
            free_gpu(c.cp)
        report(row, c)
    return rows


# -- output -----------------------------------------------------------------------------
def _num(v: Any) -> str:
    if not isinstance(v, (int, float)):
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 1:
        return f"{v:.1f}"
    return f"{v:.3g}"


def _cell(row: dict[str, Any], side: str) -> str:
    if side in row:
        return _num(row[side])
    err = row.get(f"{side}_error")
    return "skipped" if err and err.startswith("skipped") else ("error" if err else "-")


def report(row: dict[str, Any], c: Ctx) -> None:
    """One line per finished row (unless ``--markdown``)."""
    if c.a.markdown:
        return
    ratio = f"{row['ratio']:.2f}" if "ratio" in row else "-"
    line = (f"{row['case']:<58} flowrt {_cell(row, 'flowrt'):>8}  "
            f"{row.get('raw_label', c.raw_label)} "
            f"{_cell(row, 'raw'):>8}  ratio {ratio:>5}  {row['unit']}")
    if "agree" in row:
        line += f"  agree={row['agree']}"
    print(line, flush=True)
    for side in ("flowrt", "raw"):
        if f"{side}_error" in row:
            print(f"    {side}: {row[f'{side}_error']}", flush=True)
    for w in row.get("warnings", []):
        print(f"    WARNING: {w}", flush=True)
    for w in row.get("notes", []):
        print(f"    note: {w}", flush=True)
    if "gpu_over_cpu" in row:
        print(f"    flowrt GPU/CPU: {row['gpu_over_cpu']:.1f}x", flush=True)


def header(env: dict[str, Any], c: Ctx) -> str:
    """The header line: machine, GPU, library versions, method."""
    a = c.a
    gpu = env["gpu"] or f"none (cupy: {env['cupy_unavailable'] or 'not used'})"
    return (f"Machine: {env['machine']}, {env['cpus']} cores, Python {env['python']}; "
            f"GPU: {gpu}; CuPy {env['cupy'] or 'absent'}, numpy {env['numpy']}, "
            f"ml_dtypes {env['ml_dtypes'] or 'absent'}, flowrt {env['flowrt']}"
            f"{', CUDA runtime ' + str(env['cuda_runtime']) if 'cuda_runtime' in env else ''}"
            f"; flowrt on {c.device}, CUPY_TF32={env['CUPY_TF32']}; medians of "
            f"{a.repeats} alternating repetitions of >= {a.min_time:g} s after warm-up; "
            "higher is better, ratio = flowrt / raw.")


def markdown(rows: list[dict[str, Any]], env: dict[str, Any], c: Ctx) -> str:
    """The Markdown table (and notes) for BENCHMARKS.md."""
    out = [header(env, c), "",
           f"| case | flowrt | {c.raw_label} | ratio | unit |", "|---|---:|---:|---:|---|"]
    notes: list[str] = []
    for r in rows:
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else "-"
        out.append(f"| {r['case']} | {_cell(r, 'flowrt')} | {_cell(r, 'raw')} | {ratio} | "
                   f"{r['unit']} |")
        for side in ("flowrt", "raw"):
            if f"{side}_error" in r:
                notes.append(f"{r['case']}, {side}: {r[f'{side}_error']}")
        if r.get("agree") is False:
            notes.append(f"{r['case']}: results DISAGREE: {r.get('values')}")
        notes.extend(f"{r['case']}: {w}" for w in r.get("warnings", []) + r.get("notes", []))
        if "gpu_over_cpu" in r:
            notes.append(f"{r['case']}: flowrt GPU/CPU {r['gpu_over_cpu']:.1f}x")
    if notes:
        out.append("")
        out.extend(f"- {n}" for n in dict.fromkeys(notes))
    return "\n".join(out)


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (np.generic,)):
        return v.item()
    return v


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", default=",".join(BENCHES),
                   help=f"comma-separated cases among {', '.join(BENCHES)}")
    p.add_argument("--device", choices=("GPU", "CPU"), default="GPU",
                   help="where flowrt's side runs (CPU: a smoke test with small sizes)")
    p.add_argument("--size", type=int, help="N of matmul_chain (GPU 8192, CPU 512)")
    p.add_argument("--chain", type=int, default=8, help="K, matmuls in the chain")
    p.add_argument("--copy-mib", type=float, help="h2d_copy size in MiB (GPU 256, CPU 16)")
    p.add_argument("--layers", default="784-512-512-10", help="mlp_train layer sizes")
    p.add_argument("--batch", type=int, default=256, help="mlp_train batch size")
    p.add_argument("--cnn-batch", default="128,256", help="cnn_train batch sizes")
    p.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    p.add_argument("--lr", type=float, help="learning rate (sgd 0.1, adam 0.001)")
    p.add_argument("--repeats", type=int, default=5, help="timed repetitions per side")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps before timing")
    p.add_argument("--min-time", type=float, default=0.25,
                   help="seconds one repetition lasts at least (sets its step count)")
    p.add_argument("--steps", type=int, help="steps per repetition (instead of --min-time)")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument("--json", metavar="FILE", help="write the results to FILE")
    a = p.parse_args(argv)
    benches = [b.strip() for b in a.bench.split(",") if b.strip()]
    unknown = [b for b in benches if b not in BENCHES]
    if unknown:
        p.error(f"unknown --bench {', '.join(unknown)} (choose from {', '.join(BENCHES)})")
    if a.size is None:
        a.size = 8192 if a.device == "GPU" else 512
    if a.copy_mib is None:
        a.copy_mib = 256 if a.device == "GPU" else 16
    if a.repeats < 1 or a.size < 8 or a.chain < 1 or a.copy_mib <= 0:
        p.error("--repeats and --chain must be >= 1, --size >= 8, --copy-mib > 0")

    import flowrt as tf

    cp, cupy_why = load_cupy()
    gpu, gpu_why = find_gpu(tf) if a.device == "GPU" else (None, None)
    c = Ctx(a, tf, cp, cupy_why, gpu, gpu_why)
    env = environment(tf, cp, cupy_why, gpu)
    if not a.markdown:
        print(header(env, c), flush=True)
        if c.on_gpu and gpu_why:
            print(f"no GPU for flowrt: {gpu_why}; its GPU cases are skipped", flush=True)
        if cp is None:
            print(f"cupy unavailable ({cupy_why}): raw CuPy cases are skipped"
                  + ("" if c.on_gpu else "; --device CPU uses numpy as the raw reference"),
                  flush=True)
    fns = {"matmul_chain": bench_matmul_chain, "h2d_copy": bench_h2d_copy,
           "mlp_train": bench_mlp_train, "cnn_train": bench_cnn_train}
    rows: list[dict[str, Any]] = []
    for b in benches:
        rows.extend(fns[b](c))
    if a.markdown:
        print(markdown(rows, env, c))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(_jsonable({"env": env, "args": vars(a), "rows": rows}), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
