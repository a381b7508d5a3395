"""TFRecord read-and-parse benchmark written against the TF1 API.

Run the same program under TensorFlow and flowrt, one process each, and compare:

    TF_USE_LEGACY_KERAS=1 ../tf-venv/bin/python bench/records_bench.py --impl tf
    .venv/bin/python bench/records_bench.py --impl flowrt

Both write the same ``--n`` (10000) ``tf.train.Example`` records to a TFRecord file
(``--compression`` none, ZLIB or GZIP): each an int64 ``label``, a float ``x`` of 16
values, a bytes ``id`` and a variable-length int64 ``tokens`` (0-7 values). A timed
round reads every record back with ``tf.io.tf_record_iterator`` and parses them all
with one ``session.run`` of ``tf.parse_example`` (FixedLenFeature x3, VarLenFeature).
It prints one JSON line: the median and min wall milliseconds of a round, records per
second from the median, and a checksum of the parsed values (equal between the two
implementations: both parsed the same records).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _module(impl: str) -> Any:
    """``tensorflow.compat.v1`` in graph mode, or flowrt."""
    if impl == "tf":
        import tensorflow.compat.v1 as tf  # noqa: PLC0415 -- only the tf run has it

        tf.disable_v2_behavior()
        return tf
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import flowrt  # noqa: PLC0415 -- after the path is set

    return flowrt


def _write(tf: Any, path: str, n: int, compression: str) -> None:
    rng = np.random.RandomState(0)
    with tf.io.TFRecordWriter(path, compression or None) as w:
        for i in range(n):
            ex = tf.train.Example()
            f = ex.features.feature
            f["label"].int64_list.value.append(int(i % 10))
            f["x"].float_list.value.extend(rng.rand(16).astype(np.float32).tolist())
            f["id"].bytes_list.value.append(b"example-%06d" % i)
            f["tokens"].int64_list.value.extend(rng.randint(0, 1000, rng.randint(0, 8)).tolist())
            w.write(ex.SerializeToString())


def main(argv: list[str] | None = None) -> int:
    """Write the file, time ``--reps`` read-and-parse rounds, print the JSON line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--impl", choices=["tf", "flowrt"], default="flowrt")
    p.add_argument("--n", type=int, default=10000, help="records in the file")
    p.add_argument("--reps", type=int, default=7, help="timing rounds (median taken)")
    p.add_argument("--compression", choices=["", "ZLIB", "GZIP"], default="")
    args = p.parse_args(argv)
    tf = _module(args.impl)
    features = {"label": tf.FixedLenFeature([], tf.int64),
                "x": tf.FixedLenFeature([16], tf.float32),
                "id": tf.FixedLenFeature([], tf.string),
                "tokens": tf.VarLenFeature(tf.int64)}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.tfrecord")
        _write(tf, path, args.n, args.compression)
        serialized = tf.placeholder(tf.string, [None])
        parsed = tf.parse_example(serialized, features)
        times = []
        with tf.Session() as sess:
            out = None
            for _ in range(args.reps + 1):
                t0 = time.perf_counter()
                records = list(tf.io.tf_record_iterator(path, args.compression or None))
                out = sess.run(parsed, {serialized: records})
                times.append(time.perf_counter() - t0)
        times = times[1:]  # the first round compiles the step
    check = (float(out["x"].sum()) + int(out["label"].sum()) + int(out["tokens"].values.sum())
             + sum(len(v) for v in out["id"].tolist()))
    med = statistics.median(times)
    print(json.dumps({"impl": args.impl, "n": args.n, "compression": args.compression,
                      "median_ms": round(med * 1e3, 2), "min_ms": round(min(times) * 1e3, 2),
                      "records_per_s": round(args.n / med), "checksum": round(check, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
