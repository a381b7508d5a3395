"""Input-pipeline benchmark: an MLP training step fed by ``tf.data`` (issue 17).

Run the same program under TensorFlow and flowrt, one process each, and compare:

    TF_USE_LEGACY_KERAS=1 ../tf-venv/bin/python bench/data_bench.py --impl tf
    .venv/bin/python bench/data_bench.py --impl flowrt

Case ``mlp``: 6400 examples of 784 float32 features and an int label, fed through
``from_tensor_slices((x, y)).shuffle(1000).map(scale).repeat().batch(64).prefetch(1)``
into a 784-256-10 MLP (softmax cross-entropy, ``GradientDescentOptimizer``). Prints one
JSON line: steps per second (median of ``--reps`` rounds of ``--steps`` steps) and the
process CPU milliseconds per step.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

import numpy as np


def load(impl: str) -> Any:
    """``tensorflow.compat.v1`` in graph mode, or flowrt."""
    if impl == "tf":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as _tf  # type: ignore  # optional: only for --impl tf

        tf = _tf.compat.v1
        tf.disable_eager_execution()
        return tf
    import flowrt as tf  # noqa: PLC0415 - the implementation under test is chosen at run time

    return tf


def run(impl: str, reps: int, steps: int, threads: int) -> dict[str, Any]:
    """Build the MLP fed by tf.data under ``impl`` and time its training step."""
    tf = load(impl)
    rng = np.random.RandomState(0)
    x = rng.rand(6400, 784).astype(np.float32)
    y = rng.randint(0, 10, 6400).astype(np.int64)
    ds = (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1000, seed=1)
          .map(lambda a, b: (a * 2.0 - 1.0, b), num_parallel_calls=2)
          .repeat().batch(64).prefetch(1))
    feats, labels = tf.data.make_one_shot_iterator(ds).get_next() \
        if hasattr(tf.data, "make_one_shot_iterator") else ds.make_one_shot_iterator().get_next()
    w1 = tf.Variable(rng.randn(784, 256).astype(np.float32) * 0.05)
    b1 = tf.Variable(np.zeros(256, np.float32))
    w2 = tf.Variable(rng.randn(256, 10).astype(np.float32) * 0.05)
    b2 = tf.Variable(np.zeros(10, np.float32))
    h = tf.nn.relu(tf.matmul(feats, w1) + b1)
    logits = tf.matmul(h, w2) + b2
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    cfg = tf.ConfigProto(intra_op_parallelism_threads=threads,
                         inter_op_parallelism_threads=threads) if threads else None
    rates, cpu = [], []
    with tf.Session(config=cfg) as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(20):
            sess.run(train)
        for _ in range(reps):
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(steps):
                sess.run(train)
            rates.append(steps / (time.perf_counter() - t0))
            cpu.append((time.process_time() - c0) / steps * 1e3)
        final = float(sess.run(loss))
    return {"impl": impl, "case": "mlp", "steps_per_s": round(statistics.median(rates), 1),
            "cpu_ms_per_step": round(statistics.median(cpu), 3), "loss": round(final, 4)}


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the case, print its JSON line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--impl", choices=["tf", "flowrt"], default="flowrt")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--threads", type=int, default=0)
    a = p.parse_args(argv)
    print(json.dumps(run(a.impl, a.reps, a.steps, a.threads)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
