"""Threads that never hold up the process's exit, and cancelling in-flight work at exit.

Two things kept a flowrt process alive after its main thread ended while a daemon
thread was blocked in ``Session.run`` (TensorFlow's exit):

- a :class:`concurrent.futures.ThreadPoolExecutor`'s threads are joined at interpreter
  shutdown (``concurrent.futures``' ``_python_exit``, run from ``threading._shutdown``),
  so a pool thread blocked in a step or a transport call blocks the exit for ever. That
  hook also makes every later ``submit`` raise ``RuntimeError``, which broke the steps a
  non-daemon thread still runs once the main thread has returned. :class:`DaemonPool`
  is an executor of daemon threads: the interpreter never joins them.
- a step left blocked on another task (a dequeue on a ps) stays there when this process
  ends, and takes the next element anyone enqueues. Modules that start such steps
  register a canceller with :func:`at_exit`; :func:`cancel_at_exit` (an :mod:`atexit`
  hook, so it runs once every non-daemon thread has finished) calls them all, bounded
  by :data:`EXIT_GRACE_S` in total.

A daemon thread that a cancelled step would wake calls :func:`park_if_exiting` first:
the interpreter is about to stop it anyway, and it should not print a traceback for an
error nobody can handle.
"""
from __future__ import annotations

import atexit
import itertools
import os
import queue
import threading
import time
from concurrent import futures
from typing import Any, Callable

__all__ = ["DaemonPool", "at_exit", "cancel_at_exit", "exiting", "park_if_exiting",
           "serving", "EXIT_GRACE_S", "IDLE_THREAD_S"]

#: seconds the exit hook gives the registered cancellers, all together (they run at
#: once, each on a daemon thread; what is not done by then is abandoned)
EXIT_GRACE_S = float(os.environ.get("FLOWRT_EXIT_GRACE_S", "2.0"))

#: seconds a :class:`DaemonPool` thread waits for work before it exits
IDLE_THREAD_S = 60.0


class DaemonPool(futures.Executor):
    """A thread pool whose threads are daemon threads (never joined at exit).

    Each task runs on an idle thread or, while there are fewer than ``max_workers``, a
    new one; beyond that tasks wait their turn (as with ``ThreadPoolExecutor``). Threads
    that find no work for ``idle_timeout`` seconds exit.

    :param max_workers: the most threads at once (None: no limit)
    :param thread_name_prefix: the threads' names start with it
    :param initializer: called first on every new thread
    :param idle_timeout: seconds an idle thread waits before it exits (None: never)
    """

    def __init__(self, max_workers: int | None = None, thread_name_prefix: str = "flowrt-pool",
                 initializer: Callable[[], Any] | None = None,
                 idle_timeout: float | None = IDLE_THREAD_S):
        """Make an empty pool; threads start as tasks are submitted.

        :raises ValueError: if ``max_workers`` is not positive
        """
        if max_workers is not None and max_workers <= 0:
            raise ValueError(f"max_workers must be > 0, got {max_workers}")
        self._max = max_workers
        self._prefix = thread_name_prefix
        self._initializer = initializer
        self._idle_timeout = idle_timeout
        self._work: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        # one permit per idle thread: a submit that takes one needs no new thread
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads = 0
        # tasks queued at the limit, with neither an idle thread nor a new one: the next
        # thread to finish a task owes them its permit (else permits would outnumber the
        # idle threads, and a later task wait behind a blocked one)
        self._owed = 0
        self._names = itertools.count()
        self._shutdown = False

    @property
    def threads(self) -> int:
        """How many threads the pool has now (busy or idle)."""
        return self._threads

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> futures.Future:
        """Run ``fn(*args, **kwargs)`` on a pool thread; returns its future."""
        if self._shutdown:
            raise RuntimeError("cannot schedule new futures after shutdown")
        fut: futures.Future = futures.Future()
        self._work.put((fut, fn, args, kwargs))
        if self._idle.acquire(blocking=False):
            return fut
        with self._lock:
            start = self._max is None or self._threads < self._max
            if start:
                self._threads += 1
            else:
                self._owed += 1
        if start:
            try:
                threading.Thread(target=self._worker, daemon=True,
                                 name=f"{self._prefix}_{next(self._names)}").start()
            except BaseException:
                with self._lock:
                    self._threads -= 1
                raise
        return fut

    def _retire(self) -> None:
        with self._lock:
            self._threads -= 1

    def _worker(self) -> None:
        """Body of each pool thread: run queued tasks until told to stop or idle too long.

        The result or exception of each task goes to its future. A thread exits on a None
        sentinel, or after ``idle_timeout`` without work when no submitter has counted on it
        being idle.
        """
        if self._initializer is not None:
            try:
                self._initializer()
            except Exception:  # noqa: BLE001 - a thread without it still runs the tasks
                pass            # queued for it (else they would wait for ever)
        while True:
            try:
                item = self._work.get(timeout=self._idle_timeout)
            except queue.Empty:
                # retire only if no submitter has counted on this idle thread
                if self._idle.acquire(blocking=False):
                    self._retire()
                    return
                continue
            if item is None:
                self._retire()
                return
            fut, fn, args, kwargs = item
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn(*args, **kwargs))
                except BaseException as e:  # noqa: BLE001 - handed to the future
                    fut.set_exception(e)
            del item, fut, fn, args, kwargs  # drop references while idle
            with self._lock:
                owed = self._owed > 0
                if owed:
                    self._owed -= 1
            if not owed:
                self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse new tasks and let idle threads exit; busy ones exit when their task
        ends. ``wait`` is not honoured: the point of this pool is that nobody waits for
        a thread that may be blocked."""
        self._shutdown = True
        if cancel_futures:
            while True:
                try:
                    item = self._work.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        with self._lock:
            n = self._threads
        for _ in range(n):
            self._work.put(None)


# -- exit -------------------------------------------------------------------------------
_EXITING = threading.Event()
_CANCELLERS: list[Callable[[float], None]] = []
_CANCELLERS_LOCK = threading.Lock()


def exiting() -> bool:
    """Whether the process is exiting (:func:`cancel_at_exit` has begun)."""
    return _EXITING.is_set()


class _Serving(threading.local):
    depth = 0

    def __enter__(self) -> None:
        self.depth += 1

    def __exit__(self, *exc: Any) -> None:
        self.depth -= 1


#: ``with serving:`` marks the current thread as answering a request (a service's
#: handler): :func:`park_if_exiting` does not park it, since its caller (maybe the main
#: thread of this very process) waits for the answer
serving = _Serving()


def park_if_exiting() -> None:
    """When the process is exiting and the caller is a daemon thread, never return:
    the thread waits for the interpreter to stop it rather than start new work or raise
    the error its cancelled step got. Other threads return: by then the only one left
    is the main thread, running the ``atexit`` handlers (one may still run a step); so
    does a thread answering a request (see :data:`serving`): it replies, and its caller
    decides."""
    if _EXITING.is_set() and threading.current_thread().daemon and not serving.depth:
        threading.Event().wait()


def at_exit(canceller: Callable[[float], None]) -> Callable[[float], None]:
    """Register ``canceller(deadline)`` to run at exit: it should cancel the in-flight
    work it knows of and return by ``deadline`` (a :func:`time.monotonic` time). Returns
    ``canceller`` (so this can decorate it)."""
    with _CANCELLERS_LOCK:
        if canceller not in _CANCELLERS:
            _CANCELLERS.append(canceller)
    return canceller


def _run_canceller(fn: Callable[[float], None], deadline: float) -> None:
    try:
        fn(deadline)
    except Exception:  # noqa: BLE001 - exiting anyway: one failure must not stop the rest
        pass


def cancel_at_exit() -> None:
    """Mark the process as exiting, run every registered canceller at once, each on a
    daemon thread, and wait for them at most :data:`EXIT_GRACE_S` seconds. Registered
    with :mod:`atexit`, which runs after the interpreter joined the non-daemon threads:
    whatever is still blocked then is on a daemon thread, which nothing will ever wait
    for."""
    _EXITING.set()
    with _CANCELLERS_LOCK:
        cancellers = list(_CANCELLERS)
    deadline = time.monotonic() + EXIT_GRACE_S
    ts = []
    for fn in cancellers:
        t = threading.Thread(target=_run_canceller, args=(fn, deadline), daemon=True,
                             name="flowrt-exit-cancel")
        try:
            t.start()
        except RuntimeError:  # threads can no longer start: nothing more to do
            break
        ts.append(t)
    for t in ts:
        t.join(max(0.0, deadline - time.monotonic()))


atexit.register(cancel_at_exit)
