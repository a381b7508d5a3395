"""Test helpers for tensor transfers between two tasks: a counting ``recv_tensors``
client, a pool that holds submitted pulls until drained (so that a burst of receives is
issued before any pull starts), a ps/worker pair wired through them, and a small
ps/worker training graph."""
from __future__ import annotations

import threading
from typing import Any

import numpy as np


class CountingClient:
    """A worker seen through ``recv_tensors``; ``calls`` records ``(keys, wait_all)``."""

    def __init__(self, worker: Any):
        self.worker = worker
        self.calls: list[tuple[list[str], bool]] = []
        self.target = "fake://ps"

    def recv_tensors(self, step_id, keys, timeout=None, wait_all=False):
        self.calls.append((list(keys), wait_all))
        return self.worker.recv_tensors(step_id, keys, timeout, wait_all)


class DeferredPool:
    """Holds submitted pulls until :meth:`drain` starts each on a thread of its own."""

    def __init__(self) -> None:
        self.jobs: list = []

    def submit(self, fn, *a):
        self.jobs.append((fn, a))

    def drain(self) -> list[threading.Thread]:
        jobs, self.jobs = self.jobs, []
        ts = [threading.Thread(target=fn, args=a, daemon=True) for fn, a in jobs]
        for t in ts:
            t.start()
        return ts


def worker_pair(monkeypatch: Any) -> tuple[Any, Any, CountingClient, DeferredPool]:
    """``(ps, worker, client, pool)``: two in-process workers, the worker reaching the
    ps through a :class:`CountingClient`, its pulls held in a :class:`DeferredPool`."""
    from flowrt import worker as worker_mod
    from flowrt.worker import Worker

    ps = Worker(None, "ps", 0)
    client = CountingClient(ps)
    w0 = Worker(None, "worker", 0, resolver=lambda job, task: client)
    pool = DeferredPool()
    monkeypatch.setattr(worker_mod, "_partition_pool", lambda: pool)
    return ps, w0, client, pool


def collector(n: int):
    """``(results, done, cb)``: ``cb(i)`` is a receive callback storing the value (or
    the error) of receive ``i`` in ``results``; ``done`` is set once ``n`` arrived."""
    results: dict[int, object] = {}
    done = threading.Event()

    def cb(i: int):
        def arrived(item, err):
            results[i] = err if err is not None else item[0]
            if len(results) == n:
                done.set()
        return arrived

    return results, done, cb


def train_graph(tf: Any, g: Any, fed: bool = False) -> tuple[Any, Any, Any, Any, Any]:
    """``w`` (3x2) and ``b`` on /job:ps/task:0, a squared loss of ``x @ w + b`` and its
    gradient-descent step on /job:worker/task:0; ``x`` is a [None, 3] placeholder when
    ``fed``, else a constant 4x3. Returns ``(x, w, b, loss, train)``."""
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(np.ones((3, 2), np.float32), name="w")
            b = tf.Variable(np.zeros(2, np.float32), name="b")
        with tf.device("/job:worker/task:0"):
            x = tf.placeholder(tf.float32, [None, 3], name="x") if fed else \
                tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3) / 10.0)
            loss = tf.reduce_sum(tf.square(tf.matmul(x, w) + b - 1.0))
            train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    return x, w, b, loss, train
