"""Checkpoint save and restore throughput: a Saver over 200 variables of 1 MiB (200 MiB)
saved and restored several times; prints the median MB/s of each.

    TF_USE_LEGACY_KERAS=1 ../tf-venv/bin/python bench/ckpt_bench.py --impl tf
    .venv/bin/python bench/ckpt_bench.py --impl flowrt
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from typing import Any

import numpy as np


def load(impl: str) -> Any:
    """``tensorflow.compat.v1`` (graph mode) or flowrt."""
    if impl == "tf":
        import tensorflow as _tf  # type: ignore  # optional: only for --impl tf

        _tf.compat.v1.disable_eager_execution()
        return _tf.compat.v1
    import flowrt as tf  # noqa: PLC0415 - the implementation under test is chosen at run time

    return tf


def run(impl: str, reps: int, nvars: int, mib: float) -> dict[str, Any]:
    """Save and restore ``nvars`` float32 variables of ``mib`` MiB each ``reps`` times."""
    tf = load(impl)
    n = int(mib * (1 << 20)) // 4
    total = nvars * n * 4 / 1e6
    d = tempfile.mkdtemp(prefix="ckpt_bench_")
    saves, restores = [], []
    try:
        with tf.Graph().as_default():
            vs = [tf.Variable(np.full(n, i, np.float32), name=f"v{i:03d}") for i in range(nvars)]
            saver = tf.train.Saver(vs, max_to_keep=1)
            with tf.Session() as s:
                s.run(tf.global_variables_initializer())
                path = os.path.join(d, "model.ckpt")
                for _ in range(reps):
                    t = time.perf_counter()
                    saver.save(s, path, write_meta_graph=False)
                    saves.append(total / (time.perf_counter() - t))
                    t = time.perf_counter()
                    saver.restore(s, path)
                    restores.append(total / (time.perf_counter() - t))
                assert float(s.run(vs[-1])[0]) == nvars - 1
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return {"impl": impl, "MB": round(total, 1), "reps": reps,
            "save_MBps_median": round(statistics.median(saves), 1),
            "restore_MBps_median": round(statistics.median(restores), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--impl", choices=["tf", "flowrt"], default="flowrt")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--vars", type=int, default=200)
    ap.add_argument("--mib", type=float, default=1.0)
    a = ap.parse_args()
    print(json.dumps(run(a.impl, a.reps, a.vars, a.mib)))


if __name__ == "__main__":
    main()
