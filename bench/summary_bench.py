"""Summary-cost benchmark: what writing TensorBoard summaries every step adds to a
training step (issue 17).

Run the same program under TensorFlow and flowrt, one process each:

    TF_USE_LEGACY_KERAS=1 ../tf-venv/bin/python bench/summary_bench.py --impl tf
    .venv/bin/python bench/summary_bench.py --impl flowrt

An MLP 784-256-128-10 (batch 64, softmax cross-entropy, plain SGD) is trained with
``sess.run(train)`` and, alternately in rounds, with ``sess.run([train, merged])`` plus
``FileWriter.add_summary`` every step. ``--case small`` summarises the loss (scalar) and
two small histograms (the logits and the last bias); ``--case weights`` adds histograms
of every weight matrix (251k values). ``--case cnn`` is the TF tutorial's MNIST CNN step
(``tf.layers``, Adam) with the summaries such a tutorial writes: loss and accuracy, the
logits and every trainable variable; ``--case cnn_light`` the same without the
variables' histograms. Prints one JSON line: median ms per step without
and with summaries, and the overhead in percent.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np

from data_bench import load


def run(impl: str, case: str, reps: int, steps: int, warmup: int = 20) -> dict[str, Any]:
    """Build the MLP under ``impl`` and time steps with and without summaries."""
    tf = load(impl)
    rng = np.random.RandomState(0)
    if case in ("cnn", "cnn_light"):
        train, merged = _cnn(tf, rng, weights=case == "cnn")
    else:
        train, merged = _mlp(tf, rng, case)
    plain, summed = [], []
    with tempfile.TemporaryDirectory() as logdir, tf.Session() as sess:
        writer = tf.summary.FileWriter(logdir)
        sess.run(tf.global_variables_initializer())
        step = 0
        for _ in range(warmup):
            sess.run(train)
            _, s = sess.run([train, merged])
            writer.add_summary(s, step)
            step += 1
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(steps):
                sess.run(train)
            plain.append((time.perf_counter() - t0) / steps * 1e3)
            t0 = time.perf_counter()
            for _ in range(steps):
                _, s = sess.run([train, merged])
                writer.add_summary(s, step)
                step += 1
            summed.append((time.perf_counter() - t0) / steps * 1e3)
        writer.close()
    p, s = statistics.median(plain), statistics.median(summed)
    return {"impl": impl, "case": case, "ms_plain": round(p, 3), "ms_summaries": round(s, 3),
            "overhead_pct": round((s / p - 1) * 100, 1)}


def _mlp(tf: Any, rng: np.random.RandomState, case: str) -> tuple[Any, Any]:
    """The MLP training op and the merged summaries of ``case`` (small or weights)."""
    x = tf.constant(rng.rand(64, 784).astype(np.float32))
    y = tf.constant(rng.randint(0, 10, 64).astype(np.int64))
    sizes = [784, 256, 128, 10]
    h, weights, biases = x, [], []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        w = tf.Variable(rng.randn(a, b).astype(np.float32) * 0.05, name=f"w{i}")
        bias = tf.Variable(np.zeros(b, np.float32), name=f"b{i}")
        h = tf.matmul(h, w) + bias
        if i < len(sizes) - 2:
            h = tf.nn.relu(h)
        weights.append(w)
        biases.append(bias)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
    train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    tf.summary.scalar("loss", loss)
    tf.summary.histogram("logits", h)
    tf.summary.histogram("last_bias", biases[-1])
    if case == "weights":
        for w in weights:
            tf.summary.histogram(w.op.name, w)
    return train, tf.summary.merge_all()


def _cnn(tf: Any, rng: np.random.RandomState, weights: bool = True) -> tuple[Any, Any]:
    """The TF tutorial's MNIST CNN (``tf.layers``: conv 32 5x5, pool, conv 64 5x5, pool,
    dense 1024, dropout, dense 10; batch 64, Adam) and the summaries a tutorial writes:
    the loss and accuracy (scalars), the logits and (``weights``) every trainable
    variable (histograms, 3.3M values in all)."""
    x = tf.constant(rng.rand(64, 28, 28, 1).astype(np.float32))
    y = tf.constant(rng.randint(0, 10, 64).astype(np.int64))
    h = tf.layers.conv2d(x, 32, 5, padding="same", activation=tf.nn.relu)
    h = tf.layers.max_pooling2d(h, 2, 2)
    h = tf.layers.conv2d(h, 64, 5, padding="same", activation=tf.nn.relu)
    h = tf.layers.max_pooling2d(h, 2, 2)
    h = tf.layers.dense(tf.layers.flatten(h), 1024, activation=tf.nn.relu)
    h = tf.layers.dropout(h, rate=0.4, training=True)
    logits = tf.layers.dense(h, 10)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y,
                                                                         logits=logits))
    train = tf.train.AdamOptimizer(1e-4).minimize(loss)
    acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
    tf.summary.scalar("loss", loss)
    tf.summary.scalar("accuracy", acc)
    tf.summary.histogram("logits", logits)
    for v in tf.trainable_variables() if weights else []:
        tf.summary.histogram(v.op.name, v)
    return train, tf.summary.merge_all()


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the case, print its JSON line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--impl", choices=["tf", "flowrt"], default="flowrt")
    p.add_argument("--case", choices=["small", "weights", "cnn", "cnn_light"],
                   default="small")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--steps", type=int, default=None,
                   help="steps per round (default 50; 5 for cnn)")
    a = p.parse_args(argv)
    cnn = a.case.startswith("cnn")
    steps = a.steps or (5 if cnn else 50)
    warmup = 3 if cnn else 20
    print(json.dumps(run(a.impl, a.case, a.reps, steps, warmup)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
