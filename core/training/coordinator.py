"""``tf.train.Coordinator`` and ``tf.train.QueueRunner``: threads that feed a model.

A :class:`Coordinator` lets a set of threads stop together: any of them may request a
stop (with an exception, which :meth:`Coordinator.join` re-raises). A
:class:`QueueRunner` runs enqueue ops in threads until the session closes, the queue
closes or the coordinator stops them; ``start_queue_runners`` starts every runner of the
graph's ``queue_runners`` collection.
"""
from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any, Iterable, Sequence

from ..base import errors
from ..framework.graph import add_to_collection
from ..framework.session import get_default_session
from ..framework.graph import get_collection

__all__ = ["Coordinator", "QueueRunner", "add_queue_runner", "start_queue_runners",
           "LooperThread"]

_log = logging.getLogger("flowrt")

QUEUE_RUNNERS = "queue_runners"


class Coordinator:
    """Coordinates the termination of a set of threads (TF 1.15 semantics).

    :param clean_stop_exception_types: exceptions that stop the threads without being
        reported by :meth:`join` (default: ``errors.OutOfRangeError``)
    """

    def __init__(self, clean_stop_exception_types: Iterable[type] | None = None):
        if clean_stop_exception_types is None:
            clean_stop_exception_types = (errors.OutOfRangeError,)
        self._clean_stop_exception_types = tuple(clean_stop_exception_types)
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exc_info_to_raise: Any = None
        self._joined = False
        self._registered_threads: set[threading.Thread] = set()

    def _filter_exception(self, ex: Any) -> Any:
        ex2 = ex[1] if isinstance(ex, tuple) else ex
        if isinstance(ex2, self._clean_stop_exception_types):
            return None
        return ex

    def request_stop(self, ex: Any = None) -> None:
        """Ask every thread to stop; ``ex`` (an exception or ``sys.exc_info()``) is
        re-raised by :meth:`join` unless it is a clean-stop type."""
        with self._lock:
            ex = self._filter_exception(ex)
            if self._joined:
                if isinstance(ex, tuple):
                    raise ex[1].with_traceback(ex[2])
                if ex is not None:
                    raise ex
            if not self._stop_event.is_set():
                if ex is not None and self._exc_info_to_raise is None:
                    if isinstance(ex, tuple):
                        self._exc_info_to_raise = ex
                    else:
                        if not isinstance(ex, BaseException):
                            raise ValueError(f"Expected an exception or exc_info tuple, "
                                             f"got {ex!r}")
                        self._exc_info_to_raise = (type(ex), ex, ex.__traceback__)
                self._stop_event.set()

    def clear_stop(self) -> None:
        """Forget a stop request so the coordinator can be used again."""
        with self._lock:
            self._joined = False
            self._exc_info_to_raise = None
            if self._stop_event.is_set():
                self._stop_event.clear()

    def should_stop(self) -> bool:
        """True once a stop was requested."""
        return self._stop_event.is_set()

    def stop_on_exception(self) -> "_StopOnException":
        """``with coord.stop_on_exception():`` requests a stop on any exception."""
        return _StopOnException(self)

    def wait_for_stop(self, timeout: float | None = None) -> bool:
        """Wait until a stop is requested; True if it was."""
        return self._stop_event.wait(timeout)

    def register_thread(self, thread: threading.Thread) -> None:
        """Have :meth:`join` wait for ``thread`` too."""
        with self._lock:
            self._registered_threads.add(thread)

    def join(self, threads: Sequence[threading.Thread] | None = None,
             stop_grace_period_secs: float = 120, ignore_live_threads: bool = False
             ) -> None:
        """Wait for the threads to stop after a stop request; re-raise the exception
        passed to :meth:`request_stop`.

        :raises RuntimeError: when threads are still alive ``stop_grace_period_secs``
            after the stop request (unless ``ignore_live_threads``)
        """
        with self._lock:
            threads = list(self._registered_threads | set(threads or ()))
        while any(t.is_alive() for t in threads) and not self.wait_for_stop(1.0):
            pass
        deadline = time.monotonic() + stop_grace_period_secs
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in threads if t.is_alive()]
        with self._lock:
            self._joined = True
            self._registered_threads = set()
            exc = self._exc_info_to_raise
        if exc:
            raise exc[1].with_traceback(exc[2])
        if alive:
            if ignore_live_threads:
                _log.info("Coordinator stopped with threads still running: %s",
                          " ".join(alive))
            else:
                raise RuntimeError("Coordinator stopped with threads still running: "
                                   + " ".join(alive))

    @property
    def joined(self) -> bool:
        return self._joined

    def raise_requested_exception(self) -> None:
        """Raise the exception passed to :meth:`request_stop`, if any."""
        with self._lock:
            exc = self._exc_info_to_raise
        if exc:
            raise exc[1].with_traceback(exc[2])


class _StopOnException:
    def __init__(self, coord: Coordinator):
        self._coord = coord

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if exc_type is None:
            return False
        self._coord.request_stop((exc_type, exc, tb))
        return True


class LooperThread(threading.Thread):
    """A thread that runs ``target(*args)`` every ``timer_interval_secs`` until the
    coordinator stops (``tf.train.LooperThread``)."""

    def __init__(self, coord: Coordinator, timer_interval_secs: float | None,
                 target: Any = None, args: Sequence[Any] | None = None,
                 kwargs: dict[str, Any] | None = None):
        if not isinstance(coord, Coordinator):
            raise ValueError(f"'coord' argument must be a Coordinator: {coord}")
        super().__init__(daemon=True)
        self._coord = coord
        self._timer_interval_secs = timer_interval_secs
        self._target_fn = target
        self._args = tuple(args or ())
        self._kwargs = dict(kwargs or {})
        coord.register_thread(self)

    @staticmethod
    def loop(coord: Coordinator, timer_interval_secs: float, target: Any,
             args: Sequence[Any] | None = None, kwargs: dict[str, Any] | None = None
             ) -> "LooperThread":
        t = LooperThread(coord, timer_interval_secs, target, args, kwargs)
        t.start()
        return t

    def run(self) -> None:
        with self._coord.stop_on_exception():
            self.start_loop()
            if self._timer_interval_secs is None:
                while not self._coord.should_stop():
                    self.run_loop()
            else:
                next_at = time.monotonic()
                while not self._coord.wait_for_stop(max(0.0, next_at - time.monotonic())):
                    next_at += self._timer_interval_secs
                    self.run_loop()
            self.stop_loop()

    def start_loop(self) -> None:
        """Called once before the loop."""

    def stop_loop(self) -> None:
        """Called once after the loop."""

    def run_loop(self) -> None:
        if self._target_fn is not None:
            self._target_fn(*self._args, **self._kwargs)


class QueueRunner:
    """Runs enqueue ops in threads (``tf.train.QueueRunner``).

    :param queue: the queue the ops fill
    :param enqueue_ops: one thread per op, each running it in a loop
    :param close_op: run when the last thread ends (default: ``queue.close()``)
    :param cancel_op: run on a stop request (default: ``queue.close(True)``)
    :param queue_closed_exception_types: exceptions that end a thread quietly
        (default: ``errors.OutOfRangeError``)
    """

    def __init__(self, queue: Any = None, enqueue_ops: Sequence[Any] | None = None,
                 close_op: Any = None, cancel_op: Any = None,
                 queue_closed_exception_types: Sequence[type] | None = None,
                 queue_runner_def: Any = None, import_scope: str | None = None):
        if queue_runner_def is not None:
            raise NotImplementedError("QueueRunner from a QueueRunnerDef is not supported")
        if not queue or not enqueue_ops:
            raise ValueError("Must provide queue and enqueue_ops.")
        self._queue = queue
        self._enqueue_ops = list(enqueue_ops)
        self._close_op = close_op if close_op is not None else queue.close()
        self._cancel_op = cancel_op if cancel_op is not None else \
            queue.close(cancel_pending_enqueues=True)
        self._queue_closed_exception_types = tuple(queue_closed_exception_types or
                                                   (errors.OutOfRangeError,))
        self._lock = threading.Lock()
        self._runs_per_session: dict[Any, int] = {}
        self._exceptions_raised: list[BaseException] = []

    @property
    def queue(self) -> Any:
        return self._queue

    @property
    def enqueue_ops(self) -> list[Any]:
        return self._enqueue_ops

    @property
    def close_op(self) -> Any:
        return self._close_op

    @property
    def cancel_op(self) -> Any:
        return self._cancel_op

    @property
    def queue_closed_exception_types(self) -> tuple[type, ...]:
        return self._queue_closed_exception_types

    @property
    def exceptions_raised(self) -> list[BaseException]:
        """Exceptions the threads raised (other than the queue-closed ones)."""
        return list(self._exceptions_raised)

    @property
    def name(self) -> str:
        return self._queue.name

    def _run(self, sess: Any, enqueue_op: Any, coord: Coordinator | None) -> None:
        """Thread body: run ``enqueue_op`` in ``sess`` until stopped or the queue is closed.

        A queue-closed error ends the thread; the last thread of ``sess`` to end that way
        runs the close op. Any other exception is handed to ``coord`` (``request_stop``), or
        without one recorded in :attr:`exceptions_raised` and re-raised.
        """
        decremented = False
        try:
            run = sess.make_callable(enqueue_op)
            while True:
                if coord is not None and coord.should_stop():
                    break
                try:
                    run()
                except self._queue_closed_exception_types:
                    with self._lock:
                        self._runs_per_session[sess] -= 1
                        decremented = True
                        if self._runs_per_session[sess] == 0:
                            try:
                                sess.run(self._close_op)
                            except Exception as e:  # noqa: BLE001
                                _log.info("Ignored exception: %s", e)
                    return
        except Exception as e:  # noqa: BLE001 - reported through the coordinator
            if coord is not None:
                coord.request_stop(e)
            else:
                _log.error("Exception in QueueRunner: %s", e)
                with self._lock:
                    self._exceptions_raised.append(e)
                raise
        finally:
            if not decremented:
                with self._lock:
                    self._runs_per_session[sess] -= 1

    def _close_on_stop(self, sess: Any, coord: Coordinator) -> None:
        coord.wait_for_stop()
        try:
            sess.run(self._cancel_op)
        except Exception as e:  # noqa: BLE001
            _log.info("Ignored exception: %s", e)

    def create_threads(self, sess: Any, coord: Coordinator | None = None,
                       daemon: bool = False, start: bool = False) -> list[threading.Thread]:
        """Threads that run the enqueue ops in ``sess`` (plus one that cancels the queue
        on a coordinator stop); started when ``start``."""
        with self._lock:
            if self._runs_per_session.get(sess, 0) > 0:
                return []
            self._runs_per_session[sess] = len(self._enqueue_ops)
            self._exceptions_raised = []
        threads = [threading.Thread(target=self._run, args=(sess, op, coord),
                                    name=f"QueueRunnerThread-{self.name}-{op.name}",
                                    daemon=daemon) for op in self._enqueue_ops]
        if coord is not None:
            threads.append(threading.Thread(target=self._close_on_stop, args=(sess, coord),
                                            name=f"QueueRunnerThread-{self.name}-close",
                                            daemon=daemon))
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            if start:
                t.start()
        return threads


def add_queue_runner(qr: QueueRunner, collection: str = QUEUE_RUNNERS) -> None:
    """Add ``qr`` to the default graph's ``queue_runners`` collection."""

    add_to_collection(collection, qr)


def start_queue_runners(sess: Any = None, coord: Coordinator | None = None,
                        daemon: bool = True, start: bool = True,
                        collection: str = QUEUE_RUNNERS) -> list[threading.Thread]:
    """Start the threads of every queue runner in the graph's collection."""

    if sess is None:
        sess = get_default_session()
        if not sess:
            raise ValueError("Cannot start queue runners: No default session is "
                             "registered. Use `with sess.as_default()` or pass an explicit "
                             "session to tf.start_queue_runners(sess=sess)")
    with sess.graph.as_default():

        threads: list[threading.Thread] = []
        for qr in get_collection(collection):
            threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads


del sys
