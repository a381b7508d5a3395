"""Test helpers for tensor pulls between two workers in one process: a counting
``recv_tensors`` client and a pool that holds submitted pulls until drained, so that a
burst of receives is issued before any pull starts."""
from __future__ import annotations

import threading
from typing import Any


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
