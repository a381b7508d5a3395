"""Model training-step benchmarks written against the TF1 graph API.

Run the same program under TensorFlow and flowrt, one process each, and compare:

    TF_USE_LEGACY_KERAS=1 ../tf-venv/bin/python bench/model_bench.py --impl tf --case lstm
    .venv/bin/python bench/model_bench.py --impl flowrt --case lstm

Each case builds its model, sets every trainable variable to the same seeded values (by
variable name, so both implementations train the same weights), runs a few warm-up
steps, then times ``session.run(train_op)``: ``--reps`` rounds of ``--steps`` steps
each. It prints one JSON line per case: the median and min wall milliseconds per step,
the median process CPU milliseconds per step (all threads; steadier than wall time on a
loaded machine), and the loss before and after the timed steps (equal between the
implementations up to float rounding: both ran the same model). ``--threads N`` gives
both the same intra/inter-op thread counts (flowrt then also runs numpy's BLAS on N
threads), which a loaded 2-core machine needs for a fair comparison.

Cases:

- ``lstm``: a 2-layer ``BasicLSTMCell`` ``MultiRNNCell`` in ``tf.nn.dynamic_rnn``
  (batch 32, 50 time steps, 128 units, input depth 128), a softmax over 10 classes at
  every step, ``GradientDescentOptimizer`` (``--optimizer adam`` for Adam).
- ``cnn``: a ``tf.layers`` CNN on 28x28x1 inputs (batch 64: conv2d 32 5x5 relu,
  max_pooling2d 2, conv2d 64 5x5 relu, max_pooling2d 2, flatten, dense 1024 relu,
  dropout, dense 10), softmax cross-entropy, ``AdamOptimizer`` (the case's default;
  ``--optimizer sgd`` for gradient descent). The losses are computed without dropout,
  but dropout draws different masks in the two implementations, so both losses differ
  slightly after training steps (``--warmup 0`` gives equal ``loss_before``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np


def load(impl: str) -> Any:
    """``tensorflow.compat.v1`` in graph mode, or flowrt."""
    if impl == "tf":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as _tf  # type: ignore

        tf = _tf.compat.v1
        tf.disable_eager_execution()
        tf.logging.set_verbosity(tf.logging.ERROR)
        return tf
    import flowrt as tf

    return tf


def _seeded_values(tf: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """A value for every trainable variable, by name: uniform in +-sqrt(1/fan_in)
    (optimizer slots keep their initial values)."""
    rng = np.random.default_rng(seed)
    out = {}
    for v in sorted(tf.trainable_variables(), key=lambda v: v.name):
        shape = v.shape.as_list()
        scale = 1.0 / np.sqrt(shape[0]) if shape else 0.1
        out[v.name] = rng.uniform(-scale, scale, shape).astype(v.dtype.base_dtype.as_numpy_dtype)
    return out


def _assign_all(tf: Any, sess: Any) -> None:
    values = _seeded_values(tf)
    for v in tf.trainable_variables():
        if v.name in values:
            v.load(values[v.name], sess)


Built = tuple[Any, Callable[[], Any], Callable[[], float]]


def _session(tf: Any, g: Any, threads: int) -> Any:
    """A session on ``g``; ``threads > 0`` sets TF's intra- and inter-op threads (flowrt
    then runs numpy's BLAS with that many threads too)."""
    if threads <= 0:
        return tf.Session(graph=g)
    return tf.Session(graph=g, config=tf.ConfigProto(intra_op_parallelism_threads=threads,
                                                     inter_op_parallelism_threads=threads))


def case_lstm(tf: Any, optimizer: str = "sgd", threads: int = 0, batch: int = 32,
              steps: int = 50, units: int = 128, depth: int = 128,
              classes: int = 10) -> Built:
    """2-layer LSTM ``dynamic_rnn`` with a per-step softmax loss: returns
    (session, train step, loss)."""
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((batch, steps, depth)).astype(np.float32)
    ys = rng.integers(0, classes, (batch, steps)).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [batch, steps, depth], name="x")
        y = tf.placeholder(tf.int32, [batch, steps], name="y")
        cell = tf.nn.rnn_cell.MultiRNNCell([tf.nn.rnn_cell.BasicLSTMCell(units)
                                            for _ in range(2)])
        outputs, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        w = tf.get_variable("softmax/w", [units, classes])
        b = tf.get_variable("softmax/b", [classes], initializer=tf.zeros_initializer())
        logits = tf.matmul(tf.reshape(outputs, [-1, units]), w) + b
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.reshape(y, [-1]), logits=logits))
        opt = (tf.train.AdamOptimizer(1e-3) if optimizer == "adam"
               else tf.train.GradientDescentOptimizer(0.5))
        train = opt.minimize(loss)
        init = tf.global_variables_initializer()
    sess = _session(tf, g, threads)
    sess.run(init)
    with g.as_default():
        _assign_all(tf, sess)
    feed = {x: xs, y: ys}
    return sess, (lambda: sess.run(train, feed)), (lambda: float(sess.run(loss, feed)))


def case_cnn(tf: Any, optimizer: str = "adam", threads: int = 0, batch: int = 64,
             classes: int = 10) -> Built:
    """A ``tf.layers`` CNN on 28x28x1 inputs (the TF tutorial's MNIST model): conv2d 32
    5x5 relu, max_pooling2d 2, conv2d 64 5x5 relu, max_pooling2d 2, flatten, dense 1024
    relu, dropout (rate 0.4, training), dense 10; softmax cross-entropy and Adam
    (``--optimizer sgd`` for gradient descent). Returns (session, train step, loss)."""
    rng = np.random.default_rng(2)
    xs = rng.uniform(0, 1, (batch, 28, 28, 1)).astype(np.float32)
    ys = rng.integers(0, classes, (batch,)).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [batch, 28, 28, 1], name="x")
        y = tf.placeholder(tf.int32, [batch], name="y")
        training = tf.placeholder_with_default(True, [], name="training")
        h = tf.layers.conv2d(x, 32, 5, padding="same", activation=tf.nn.relu)
        h = tf.layers.max_pooling2d(h, 2, 2)
        h = tf.layers.conv2d(h, 64, 5, padding="same", activation=tf.nn.relu)
        h = tf.layers.max_pooling2d(h, 2, 2)
        h = tf.layers.flatten(h)
        h = tf.layers.dense(h, 1024, activation=tf.nn.relu)
        h = tf.layers.dropout(h, rate=0.4, training=training)
        logits = tf.layers.dense(h, classes)
        loss = tf.losses.sparse_softmax_cross_entropy(labels=y, logits=logits)
        opt = (tf.train.GradientDescentOptimizer(0.05) if optimizer == "sgd"
               else tf.train.AdamOptimizer(1e-4))
        train = opt.minimize(loss)
        init = tf.global_variables_initializer()
    sess = _session(tf, g, threads)
    sess.run(init)
    with g.as_default():
        _assign_all(tf, sess)
    feed = {x: xs, y: ys}
    # the loss without dropout: the same number in both implementations
    eval_feed = {x: xs, y: ys, training: False}
    return sess, (lambda: sess.run(train, feed)), (lambda: float(sess.run(loss, eval_feed)))


CASES: dict[str, Callable[..., Built]] = {"lstm": case_lstm, "cnn": case_cnn}


def run(impl: str, case: str, reps: int, steps: int, warmup: int,
        optimizer: str, threads: int = 0) -> dict[str, Any]:
    """Build ``case`` under ``impl`` and time its training step."""
    tf = load(impl)
    sess, step, loss = CASES[case](tf, optimizer=optimizer, threads=threads)
    for _ in range(warmup):
        step()
    before = loss()
    times, cpu = [], []
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - t) / steps)
        cpu.append((time.process_time() - c) / steps)
    after = loss()
    sess.close()
    return {"impl": impl, "case": case, "optimizer": optimizer, "threads": threads,
            "median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3,
            "cpu_median_ms": statistics.median(cpu) * 1e3,
            "reps": reps, "steps_per_rep": steps, "loss_before": before,
            "loss_after": after}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--impl", choices=["tf", "flowrt"], default="flowrt")
    p.add_argument("--case", action="append", choices=sorted(CASES),
                   help="a case to run (repeatable; default lstm)")
    p.add_argument("--reps", type=int, default=5, help="timing rounds (median taken)")
    p.add_argument("--steps", type=int, default=5, help="training steps per round")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--optimizer", choices=["sgd", "adam"], default=None,
                   help="default: sgd for lstm, adam for cnn")
    p.add_argument("--threads", type=int, default=0,
                   help="intra/inter-op threads (flowrt: also BLAS threads); 0: defaults")
    p.add_argument("--profile", metavar="FILE",
                   help="write a cProfile of the timed steps (flowrt) to FILE")
    a = p.parse_args(argv)
    for case in a.case or ["lstm"]:
        if a.profile:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        try:
            opt = a.optimizer or ("adam" if case == "cnn" else "sgd")
            row = run(a.impl, case, a.reps, a.steps, a.warmup, opt, a.threads)
        except NotImplementedError as e:
            row = {"impl": a.impl, "case": case, "error": str(e)}
        if a.profile:
            prof.disable()
            prof.dump_stats(a.profile)
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v
                          for k, v in row.items()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
