"""Monitored training sessions: ``tf.train.MonitoredTrainingSession`` and its hooks.

A :class:`MonitoredSession` wraps a session with

- *creation*: the chief initialises the model or restores it from the latest
  checkpoint (:class:`ChiefSessionCreator`); other workers wait, with a bounded wait,
  until the chief has done so (:class:`WorkerSessionCreator`);
- *hooks*: :class:`SessionRunHook` objects see every ``run`` (to add fetches and feeds,
  save checkpoints, stop at a step, log, check for NaN);
- *threads*: queue runners are started with a :class:`~flowrt.coordinator.Coordinator`;
- *recovery*: when a step fails with ``AbortedError`` or ``UnavailableError`` (a
  parameter server or worker died or restarted), the session is closed and created
  again -- which restores the latest checkpoint on the chief -- and the step is retried;
- *summaries*: :class:`SummarySaverHook`, :class:`StepCounterHook` and
  :class:`CheckpointSaverHook` write to the ``FileWriterCache`` writer of their
  directory, as TF's do; closing the session flushes those writers, closes them and
  drops them from the cache (a later session in the same directory starts a new file).

TF 1.15 semantics throughout.
"""
from __future__ import annotations

import collections
import logging
import os
import sys
import time
from typing import Any, Callable, Sequence

import numpy as np

from ..base import errors
from ..framework.events import FileWriterCache
from ..framework.graph import (GraphKeys, add_to_collection, api_function, get_collection,
                               get_default_graph)
from ..plugin.runtime import require_api
from ..proto import config_pb2, event_pb2, summary_pb2
from .coordinator import Coordinator, start_queue_runners
from . import variables as _vars
from ..framework.session import Session
from .graph_io import write_graph
from .saver import export_meta_graph, get_checkpoint_state

__all__ = [
    "SessionRunHook", "SessionRunArgs", "SessionRunContext", "SessionRunValues",
    "Scaffold", "SessionManager", "SessionCreator", "ChiefSessionCreator",
    "WorkerSessionCreator", "MonitoredSession", "SingularMonitoredSession",
    "MonitoredTrainingSession", "SecondOrStepTimer", "StopAtStepHook",
    "CheckpointSaverHook", "CheckpointSaverListener", "NanTensorHook",
    "NanLossDuringTrainingError", "LoggingTensorHook", "StepCounterHook",
    "GlobalStepWaiterHook", "FinalOpsHook", "FeedFnHook", "SummarySaverHook", "USE_DEFAULT",
]

#: op API functions called here besides the framework's (``Scaffold``'s summary op)
REQUIRED_API_NAMES = frozenset({"summary.merge_all"})
require_api(REQUIRED_API_NAMES)

_log = logging.getLogger("flowrt")

#: errors after which a monitored session is created again (a task died/restarted)
_PREEMPTION_ERRORS = (errors.AbortedError, errors.UnavailableError)

USE_DEFAULT = object()


def _global_step(graph: Any = None) -> Any:
    return api_function("train.get_global_step")(graph)


def _writer_of(hook: Any, output_dir: str | None) -> None:
    """Set ``hook._summary_writer``: the writer it was given, else the cached writer of
    ``output_dir`` (remembered in ``hook._cached_dir``: the session closes it)."""
    hook._summary_writer, hook._cached_dir = hook._own_writer, None
    if hook._own_writer is None and output_dir:
        hook._summary_writer = FileWriterCache.get(output_dir)
        hook._cached_dir = output_dir


def _release_writers(hooks: Sequence[Any]) -> None:
    """Flush the summary writers of ``hooks``; close those taken from ``FileWriterCache``
    and drop them from it, so no writer thread or file outlives the session."""
    writers: dict[int, tuple[Any, str | None]] = {}
    for h in hooks:
        w = getattr(h, "_summary_writer", None)
        if w is not None:
            cached = getattr(h, "_cached_dir", None)
            writers[id(w)] = (w, cached or writers.get(id(w), (w, None))[1])
    for w, cached in writers.values():
        try:
            if cached is None:
                w.flush()
                continue
            FileWriterCache.discard(cached, w)
        except Exception as e:  # noqa: BLE001 - closing must not hide the session's end
            _log.info("Ignored exception while closing a summary writer: %s", e)


# -- hooks ----------------------------------------------------------------------------
class SessionRunHook:
    """Hook to extend calls to ``MonitoredSession.run()``."""

    def begin(self) -> None:
        """Called once before the session is created; the graph may still change."""

    def after_create_session(self, session: Any, coord: Coordinator) -> None:
        """Called when a (new) session was created, before its first run."""

    def before_run(self, run_context: "SessionRunContext") -> "SessionRunArgs | None":
        """Called before each run; may return fetches/feeds to add to it."""
        return None

    def after_run(self, run_context: "SessionRunContext",
                  run_values: "SessionRunValues") -> None:
        """Called after each run with the results of what ``before_run`` asked for."""

    def end(self, session: Any) -> None:
        """Called at the end of the session (not when it ends with an exception)."""


class SessionRunArgs(collections.namedtuple("SessionRunArgs",
                                            ["fetches", "feed_dict", "options"])):
    """What a hook adds to a run: fetches, feeds and RunOptions."""

    def __new__(cls, fetches: Any, feed_dict: Any = None, options: Any = None
                ) -> "SessionRunArgs":
        return super().__new__(cls, fetches, feed_dict, options)


class SessionRunContext:
    """The run a hook sees: the caller's arguments and the session; a hook may ask the
    loop to stop."""

    def __init__(self, original_args: SessionRunArgs, session: Any):
        self._original_args = original_args
        self._session = session
        self._stop_requested = False

    @property
    def original_args(self) -> SessionRunArgs:
        return self._original_args

    @property
    def session(self) -> Any:
        return self._session

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    def request_stop(self) -> None:
        """Make ``MonitoredSession.should_stop()`` return True after this run."""
        self._stop_requested = True


class SessionRunValues(collections.namedtuple("SessionRunValues",
                                              ["results", "options", "run_metadata"])):
    """The results of what a hook's ``before_run`` asked for."""


class SecondOrStepTimer:
    """Triggers every ``every_secs`` seconds or every ``every_steps`` steps."""

    def __init__(self, every_secs: float | None = None, every_steps: int | None = None):
        self.reset()
        self._every_secs = every_secs
        self._every_steps = every_steps
        if self._every_secs is None and self._every_steps is None:
            raise ValueError("Either every_secs or every_steps should be provided.")
        if self._every_secs is not None and self._every_steps is not None:
            raise ValueError("Can not provide both every_secs and every_steps.")

    def reset(self) -> None:
        self._last_triggered_step: int | None = None
        self._last_triggered_time: float | None = None

    def should_trigger_for_step(self, step: int) -> bool:
        if self._last_triggered_step is None:
            return True
        if self._last_triggered_step == step:
            return False
        if self._every_secs is not None:
            return time.time() >= self._last_triggered_time + self._every_secs  # type: ignore
        return step >= self._last_triggered_step + self._every_steps  # type: ignore

    def update_last_triggered_step(self, step: int) -> tuple[float | None, int | None]:
        now = time.time()
        if self._last_triggered_time is None:
            elapsed_secs = elapsed_steps = None
        else:
            elapsed_secs = now - self._last_triggered_time
            elapsed_steps = step - self._last_triggered_step  # type: ignore[operator]
        self._last_triggered_time = now
        self._last_triggered_step = step
        return elapsed_secs, elapsed_steps

    def last_triggered_step(self) -> int | None:
        return self._last_triggered_step


class StopAtStepHook(SessionRunHook):
    """Requests a stop at a global step: after ``num_steps`` more steps, or at
    ``last_step``."""

    def __init__(self, num_steps: int | None = None, last_step: int | None = None):
        if num_steps is None and last_step is None:
            raise ValueError("One of num_steps or last_step must be specified.")
        if num_steps is not None and last_step is not None:
            raise ValueError("Only one of num_steps or last_step can be specified.")
        self._num_steps = num_steps
        self._last_step = last_step

    def begin(self) -> None:
        self._global_step_tensor = _global_step()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use StopAtStepHook.")

    def after_create_session(self, session: Any, coord: Coordinator) -> None:
        if self._last_step is None:
            self._last_step = int(session.run(self._global_step_tensor)) + self._num_steps

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context: SessionRunContext,
                  run_values: SessionRunValues) -> None:
        if int(run_values.results) + 1 >= self._last_step:
            # the stale value may be behind other replicas: read the current one
            step = int(run_context.session.run(self._global_step_tensor))
            if step >= self._last_step:
                run_context.request_stop()


def _global_step_to_trigger(timer: "SecondOrStepTimer", run_context: "SessionRunContext",
                            step_tensor: Any, stale_step: Any) -> int | None:
    """The current global step when ``timer`` should fire after this run, else None.

    ``stale_step`` is the step fetched with the run (it may lag behind other replicas):
    only when it suggests the timer is due is the current value read."""
    if not timer.should_trigger_for_step(int(stale_step) + 1):
        return None
    global_step = int(run_context.session.run(step_tensor))
    return global_step if timer.should_trigger_for_step(global_step) else None


class CheckpointSaverListener:
    """Called around the saves of a :class:`CheckpointSaverHook`."""

    def begin(self) -> None:
        pass

    def before_save(self, session: Any, global_step_value: int) -> None:
        pass

    def after_save(self, session: Any, global_step_value: int) -> bool | None:
        """Return True to stop training."""
        return None

    def end(self, session: Any, global_step_value: int) -> None:
        pass


class CheckpointSaverHook(SessionRunHook):
    """Saves a checkpoint every ``save_secs`` seconds or ``save_steps`` steps, when the
    session is created and at its end."""

    def __init__(self, checkpoint_dir: str, save_secs: float | None = None,
                 save_steps: int | None = None, saver: Any = None,
                 checkpoint_basename: str = "model.ckpt", scaffold: "Scaffold | None" = None,
                 listeners: Sequence[CheckpointSaverListener] | None = None,
                 save_graph_def: bool = True):
        if saver is not None and scaffold is not None:
            raise ValueError("You cannot provide both saver and scaffold.")
        self._saver = saver
        self._checkpoint_dir = checkpoint_dir
        self._save_path = os.path.join(checkpoint_dir, checkpoint_basename)
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._listeners = list(listeners or [])
        self._save_graph_def = save_graph_def
        self._own_writer = None

    def begin(self) -> None:
        _writer_of(self, self._checkpoint_dir)
        self._global_step_tensor = _global_step()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use CheckpointSaverHook.")
        for ls in self._listeners:
            ls.begin()

    def after_create_session(self, session: Any, coord: Coordinator) -> None:
        global_step = int(session.run(self._global_step_tensor))
        graph = session.graph
        if self._save_graph_def:
            write_graph(graph.as_graph_def(add_shapes=True), self._checkpoint_dir,
                        "graph.pbtxt")
        saver = self._get_saver()
        # what TensorBoard shows: the graph, and the meta graph with the saver
        self._summary_writer.add_graph(graph)
        self._summary_writer.add_meta_graph(export_meta_graph(
            graph_def=graph.as_graph_def(add_shapes=True), graph=graph,
            saver_def=getattr(saver, "saver_def", None) if saver else None))
        self._save(session, global_step)
        self._timer.update_last_triggered_step(global_step)

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context: SessionRunContext,
                  run_values: SessionRunValues) -> None:
        global_step = _global_step_to_trigger(self._timer, run_context,
                                              self._global_step_tensor, run_values.results)
        if global_step is not None:
            self._timer.update_last_triggered_step(global_step)
            if self._save(run_context.session, global_step):
                run_context.request_stop()

    def end(self, session: Any) -> None:
        last_step = int(session.run(self._global_step_tensor))
        if last_step != self._timer.last_triggered_step():
            self._save(session, last_step)
        for ls in self._listeners:
            ls.end(session, last_step)

    def _save(self, session: Any, step: int) -> bool:
        _log.info("Saving checkpoints for %d into %s.", step, self._save_path)
        for ls in self._listeners:
            ls.before_save(session, step)
        self._get_saver().save(session, self._save_path, global_step=step,
                               write_meta_graph=self._save_graph_def)
        self._summary_writer.add_session_log(event_pb2.SessionLog(
            status=event_pb2.SessionLog.CHECKPOINT, checkpoint_path=self._save_path), step)
        stop = False
        for ls in self._listeners:
            if ls.after_save(session, step):
                _log.info("A CheckpointSaverListener requested that training be stopped.")
                stop = True
        return stop

    def _get_saver(self) -> Any:
        if self._saver is not None:
            return self._saver
        if self._scaffold is not None:
            return self._scaffold.saver

        savers = get_collection(GraphKeys.SAVERS)
        if not savers:
            raise RuntimeError(f"No items in collection {GraphKeys.SAVERS}. Please add a "
                               "saver to the collection or provide a saver or scaffold.")
        if len(savers) > 1:
            raise RuntimeError(f"More than one item in collection {GraphKeys.SAVERS}. "
                               "Please indicate which one to use by passing it to the "
                               "constructor.")
        self._saver = savers[0]
        return savers[0]


class NanLossDuringTrainingError(RuntimeError):
    """Raised by :class:`NanTensorHook` when the loss is NaN."""

    def __str__(self) -> str:
        return "NaN loss during training."


class NanTensorHook(SessionRunHook):
    """Stops training (or raises) when ``loss_tensor`` is NaN."""

    def __init__(self, loss_tensor: Any, fail_on_nan_loss: bool = True):
        self._loss_tensor = loss_tensor
        self._fail_on_nan_loss = fail_on_nan_loss

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return SessionRunArgs(self._loss_tensor)

    def after_run(self, run_context: SessionRunContext,
                  run_values: SessionRunValues) -> None:
        if np.isnan(run_values.results):
            failure_message = "Model diverged with loss = NaN."
            if self._fail_on_nan_loss:
                _log.error(failure_message)
                raise NanLossDuringTrainingError
            _log.warning(failure_message)
            run_context.request_stop()


class LoggingTensorHook(SessionRunHook):
    """Logs the values of tensors every N steps, every N seconds, or at the end."""

    def __init__(self, tensors: Any, every_n_iter: int | None = None,
                 every_n_secs: float | None = None, at_end: bool = False,
                 formatter: Callable[[dict[str, Any]], str] | None = None):
        only_log_at_end = at_end and every_n_iter is None and every_n_secs is None
        if not only_log_at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError("either at_end and/or exactly one of every_n_iter and "
                             "every_n_secs must be provided.")
        if every_n_iter is not None and every_n_iter <= 0:
            raise ValueError(f"invalid every_n_iter={every_n_iter}.")
        if not isinstance(tensors, dict):
            self._tag_order = list(tensors)
            tensors = {item: item for item in tensors}
        else:
            self._tag_order = sorted(tensors)
        self._tensors = tensors
        self._formatter = formatter
        self._timer = SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter) \
            if not only_log_at_end else None
        self._log_at_end = at_end

    def begin(self) -> None:

        g = get_default_graph()
        self._current_tensors = {
            tag: (g.as_graph_element(t) if isinstance(t, str) else t)
            for tag, t in self._tensors.items()}
        self._iter_count = 0
        if self._timer is not None:
            self._timer.reset()

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        self._should_trigger = self._timer is not None and \
            self._timer.should_trigger_for_step(self._iter_count)
        if self._should_trigger:
            return SessionRunArgs(self._current_tensors)
        return None

    def _log_tensors(self, tensor_values: dict[str, Any]) -> None:
        if self._formatter:
            _log.info(self._formatter(tensor_values))
        else:
            stats = [f"{tag} = {tensor_values[tag]}" for tag in self._tag_order]
            elapsed = None
            if self._timer is not None:
                elapsed, _ = self._timer.update_last_triggered_step(self._iter_count)
            if elapsed is not None:
                _log.info("%s (%.3f sec)", ", ".join(stats), elapsed)
            else:
                _log.info("%s", ", ".join(stats))
        self.last_logged = dict(tensor_values)

    def after_run(self, run_context: SessionRunContext,
                  run_values: SessionRunValues) -> None:
        if self._should_trigger:
            if self._formatter and self._timer is not None:
                self._timer.update_last_triggered_step(self._iter_count)
            self._log_tensors(run_values.results)
        self._iter_count += 1

    def end(self, session: Any) -> None:
        if self._log_at_end:
            self._log_tensors(session.run(self._current_tensors))


class StepCounterHook(SessionRunHook):
    """Logs the training speed (``global_step/sec``) every N steps or seconds, and
    writes it as a scalar summary of that tag to ``summary_writer`` (else the cached
    writer of ``output_dir``); the last rate is kept in :attr:`last_rate`.
    """

    def __init__(self, every_n_steps: int | None = 100, every_n_secs: float | None = None,
                 output_dir: str | None = None, summary_writer: Any = None):
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError("exactly one of every_n_steps and every_n_secs should be "
                             "provided.")
        self._timer = SecondOrStepTimer(every_steps=every_n_steps, every_secs=every_n_secs)
        self._output_dir = output_dir
        self._own_writer = summary_writer
        self.last_rate: float | None = None

    def begin(self) -> None:
        _writer_of(self, self._output_dir)
        self._global_step_tensor = _global_step()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use StepCounterHook.")
        self._summary_tag = self._global_step_tensor.op.name + "/sec"

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context: SessionRunContext,
                  run_values: SessionRunValues) -> None:
        global_step = _global_step_to_trigger(self._timer, run_context,
                                              self._global_step_tensor, run_values.results)
        if global_step is not None:
            secs, steps = self._timer.update_last_triggered_step(global_step)
            if secs is not None and secs > 0:
                self.last_rate = steps / secs  # type: ignore[operator]
                if self._summary_writer is not None:
                    self._summary_writer.add_summary(summary_pb2.Summary(value=[
                        summary_pb2.Summary.Value(tag=self._summary_tag,
                                                  simple_value=self.last_rate)]),
                        global_step)
                _log.info("%s: %g", self._summary_tag, self.last_rate)


class SummarySaverHook(SessionRunHook):
    """Saves the summaries of ``summary_op`` (or the scaffold's) every ``save_steps``
    steps or ``save_secs`` seconds at the global step, with a ``SessionLog.START``
    before the first (``tf.train.SummarySaverHook``).

    :param output_dir: where the cached writer writes, when no ``summary_writer`` is
        given
    :param summary_op: a string tensor of a serialized ``Summary``, or a list of them
    :raises ValueError: unless exactly one of ``scaffold`` and ``summary_op`` is given,
        and exactly one of ``save_steps`` and ``save_secs``
    """

    def __init__(self, save_steps: int | None = None, save_secs: float | None = None,
                 output_dir: str | None = None, summary_writer: Any = None,
                 scaffold: "Scaffold | None" = None, summary_op: Any = None):
        if (scaffold is None) == (summary_op is None):
            raise ValueError("Exactly one of scaffold or summary_op must be provided.")
        self._summary_op = summary_op
        self._own_writer = summary_writer
        self._output_dir = output_dir
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)

    def begin(self) -> None:
        _writer_of(self, self._output_dir)
        self._next_step: int | None = None
        # the global step after a run minus the value fetched with it: 1 when the fetch
        # reads it before the train op's update, 0 when after (learned on read steps)
        self._fetch_lag = 1
        self._global_step_tensor = _global_step()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use SummarySaverHook.")

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        self._request_summary = (self._next_step is None or
                                 self._timer.should_trigger_for_step(self._next_step))
        requests = {"global_step": self._global_step_tensor}
        summary_op = self._get_summary_op()
        if self._request_summary and summary_op is not None:
            requests["summary"] = summary_op
        return SessionRunArgs(requests)

    def after_run(self, run_context: SessionRunContext,
                  run_values: SessionRunValues) -> None:
        if not self._summary_writer:
            return
        stale = int(run_values.results["global_step"])
        global_step = stale + self._fetch_lag
        if self._next_step is None or self._request_summary:
            global_step = int(run_context.session.run(self._global_step_tensor))
            self._fetch_lag = min(1, max(0, global_step - stale))
        if self._next_step is None:
            self._summary_writer.add_session_log(
                event_pb2.SessionLog(status=event_pb2.SessionLog.START), global_step)
        if self._request_summary:
            self._timer.update_last_triggered_step(global_step)
            for summary in run_values.results.get("summary", ()):
                self._summary_writer.add_summary(summary, global_step)
        self._next_step = global_step + 1

    def end(self, session: Any = None) -> None:
        if self._summary_writer:
            self._summary_writer.flush()

    def _get_summary_op(self) -> list[Any] | None:
        op = self._summary_op if self._summary_op is not None else \
            self._scaffold.summary_op  # type: ignore[union-attr]
        if op is None:
            return None
        return op if isinstance(op, list) else [op]


class GlobalStepWaiterHook(SessionRunHook):
    """Delays the first run until the global step reaches ``wait_until_step`` (workers
    that should start after the chief has made progress)."""

    def __init__(self, wait_until_step: int, max_wait_secs: float | None = None):
        self._wait_until_step = wait_until_step
        self._max_wait_secs = max_wait_secs

    def begin(self) -> None:
        self._worker_is_started = False
        self._global_step_tensor = _global_step()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use "
                               "_GlobalStepWaiterHook.")

    def before_run(self, run_context: SessionRunContext) -> None:
        if self._worker_is_started:
            return None
        if self._wait_until_step <= 0:
            self._worker_is_started = True
            return None
        deadline = None if self._max_wait_secs is None else \
            time.monotonic() + self._max_wait_secs
        while True:
            step = int(run_context.session.run(self._global_step_tensor))
            if step >= self._wait_until_step:
                self._worker_is_started = True
                return None
            if deadline is not None and time.monotonic() > deadline:
                raise errors.DeadlineExceededError(
                    None, None, f"global step {step} did not reach "
                    f"{self._wait_until_step} within {self._max_wait_secs} s")
            time.sleep(0.1)


class FinalOpsHook(SessionRunHook):
    """Runs ``final_ops`` when the session ends; their values are
    :attr:`final_ops_values`."""

    def __init__(self, final_ops: Any, final_ops_feed_dict: Any = None):
        self._final_ops = final_ops
        self._final_ops_feed_dict = final_ops_feed_dict
        self._final_ops_values = None

    @property
    def final_ops_values(self) -> Any:
        return self._final_ops_values

    def end(self, session: Any) -> None:
        if self._final_ops is not None:
            self._final_ops_values = session.run(self._final_ops,
                                                 feed_dict=self._final_ops_feed_dict)


class FeedFnHook(SessionRunHook):
    """Adds ``feed_fn()``'s feeds to every run."""

    def __init__(self, feed_fn: Callable[[], dict[Any, Any]]):
        self.feed_fn = feed_fn

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return SessionRunArgs(fetches=None, feed_dict=self.feed_fn())


# -- scaffold and session manager -----------------------------------------------------
class Scaffold:
    """The pieces a monitored session needs besides the graph: how to initialise,
    check readiness and save; anything left None gets TF's default at
    :meth:`finalize`."""

    def __init__(self, init_op: Any = None, init_feed_dict: Any = None,
                 init_fn: Callable[["Scaffold", Any], None] | None = None,
                 ready_op: Any = None, ready_for_local_init_op: Any = None,
                 local_init_op: Any = None, summary_op: Any = None, saver: Any = None,
                 copy_from_scaffold: "Scaffold | None" = None):
        """Keep the given pieces; those left None are made by :meth:`finalize`.

        :param init_fn: called as ``init_fn(scaffold, session)`` after ``init_op``
        :param copy_from_scaffold: a Scaffold whose pieces fill those not given here
        :raises TypeError: if ``copy_from_scaffold`` is not a Scaffold
        """
        if copy_from_scaffold is not None:
            if not isinstance(copy_from_scaffold, Scaffold):
                raise TypeError("copy_from_scaffold is not a Scaffold instance.")
            init_op = init_op or copy_from_scaffold.init_op
            init_feed_dict = init_feed_dict or copy_from_scaffold.init_feed_dict
            init_fn = init_fn or copy_from_scaffold._user_init_fn
            ready_op = ready_op or copy_from_scaffold.ready_op
            ready_for_local_init_op = ready_for_local_init_op or \
                copy_from_scaffold.ready_for_local_init_op
            local_init_op = local_init_op or copy_from_scaffold.local_init_op
            summary_op = summary_op or copy_from_scaffold.summary_op
            saver = saver or copy_from_scaffold.saver
        self._user_init_fn = init_fn
        self._init_fn = (lambda sess: init_fn(self, sess)) if init_fn else None
        self._init_op = init_op
        self._init_feed_dict = init_feed_dict
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._local_init_op = local_init_op
        self._summary_op = summary_op
        self._saver = saver
        self._finalized = False

    def finalize(self) -> "Scaffold":
        """Create the default ops that were not given, then finalize the graph."""

        if self._finalized:
            return self
        group = api_function("group")


        def get_or_default(key: str, make: Callable[[], Any]) -> Any:
            # the default is kept in a collection, so a later scaffold of the same
            # (finalized) graph finds it instead of creating ops
            items = get_collection(key)
            if len(items) > 1:
                raise RuntimeError(f"More than one item in the collection {key}. Please "
                                   "indicate which one to use by passing it to the "
                                   "constructor.")
            if items:
                return items[0]
            op = make()
            if op is not None:
                add_to_collection(key, op)
            return op

        if self._init_op is None:
            self._init_op = get_or_default(
                "init_op", lambda: group(_vars.global_variables_initializer()))
        if self._ready_op is None:
            self._ready_op = get_or_default(
                "ready_op", lambda: _vars.report_uninitialized_variables())
        if self._ready_for_local_init_op is None:
            self._ready_for_local_init_op = get_or_default(
                "ready_for_local_init_op",
                lambda: _vars.report_uninitialized_variables(_vars.global_variables()))
        if self._local_init_op is None:
            self._local_init_op = get_or_default(
                "local_init_op", lambda: group(_vars.local_variables_initializer()))
        if self._summary_op is None:
            self._summary_op = get_or_default(GraphKeys.SUMMARY_OP,
                                              api_function("summary.merge_all"))
        if self._saver is None:
            savers = get_collection(GraphKeys.SAVERS)
            if savers:
                if len(savers) > 1:
                    raise RuntimeError(f"More than one item in collection "
                                       f"{GraphKeys.SAVERS}. Please indicate which one to "
                                       "use by passing it to the constructor.")
                self._saver = savers[0]
            else:
                self._saver = api_function("train.Saver")(sharded=True, allow_empty=True)
                add_to_collection(GraphKeys.SAVERS, self._saver)
        get_default_graph().finalize()
        self._finalized = True
        return self

    init_fn = property(lambda self: self._init_fn)
    init_op = property(lambda self: self._init_op)
    ready_op = property(lambda self: self._ready_op)
    ready_for_local_init_op = property(lambda self: self._ready_for_local_init_op)
    local_init_op = property(lambda self: self._local_init_op)
    summary_op = property(lambda self: self._summary_op)
    saver = property(lambda self: self._saver)
    init_feed_dict = property(lambda self: self._init_feed_dict)

    @staticmethod
    def default_local_init_op() -> Any:

        return api_function("group")(_vars.local_variables_initializer())


def check_ready(op: Any, sess: Any, msg: str) -> tuple[bool, str | None]:
    """Run a ``report_uninitialized_variables``-style op: (ready, why not)."""
    if op is None:
        return True, None
    try:
        names = sess.run(op)
    except errors.FailedPreconditionError as e:
        return False, f"{msg} Error: {e.message}"
    names = np.asarray(names)
    if names.size == 0:
        return True, None
    shown = ", ".join(n.decode() if isinstance(n, bytes) else str(n)
                      for n in names.reshape(-1)[:10])
    return False, f"{msg} Variables not initialized: {shown}" + \
        (" ..." if names.size > 10 else "")


class SessionManager:
    """Creates sessions that are ready to train: restored from a checkpoint or
    initialised (chief), or waited for until another task made them ready."""

    def __init__(self, local_init_op: Any = None, ready_op: Any = None,
                 ready_for_local_init_op: Any = None, graph: Any = None,
                 recovery_wait_secs: float = 30, local_init_run_options: Any = None,
                 local_init_feed_dict: Any = None):

        self._local_init_op = local_init_op
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._graph = graph if graph is not None else get_default_graph()
        self._recovery_wait_secs = recovery_wait_secs
        self._local_init_feed_dict = local_init_feed_dict
        self._target: str | None = None
        if ready_for_local_init_op is not None and local_init_op is None:
            raise ValueError("If you pass a ready_for_local_init_op you must also pass a "
                             "local_init_op , ready_for_local_init_op [%s]"
                             % ready_for_local_init_op)

    def _new_session(self, master: str, config: Any) -> Any:

        return Session(master, graph=self._graph, config=config)

    def _restore_checkpoint(self, master: str, saver: Any = None,
                            checkpoint_dir: str | None = None,
                            checkpoint_filename_with_path: str | None = None,
                            wait_for_checkpoint: bool = False, max_wait_secs: float = 7200,
                            config: Any = None) -> tuple[Any, bool]:
        """Create a session on ``master`` and restore it from a checkpoint if there is one.

        Restores ``checkpoint_filename_with_path``, else the latest checkpoint in
        ``checkpoint_dir``; with ``wait_for_checkpoint`` it waits up to ``max_wait_secs``
        for one to appear. Without a saver or a checkpoint location nothing is restored.

        :returns: ``(session, restored)``
        :raises ValueError: if both ``checkpoint_dir`` and ``checkpoint_filename_with_path``
            are given
        """

        self._target = master
        sess = self._new_session(master, config)
        if checkpoint_dir and checkpoint_filename_with_path:
            raise ValueError("Can not provide both checkpoint_dir and "
                             "checkpoint_filename_with_path.")
        if not saver or not (checkpoint_dir or checkpoint_filename_with_path):
            return sess, False
        if checkpoint_filename_with_path:
            saver.restore(sess, checkpoint_filename_with_path)
            return sess, True
        wait_time = 0.0
        ckpt = get_checkpoint_state(checkpoint_dir)
        while not ckpt or not ckpt.model_checkpoint_path:
            if wait_for_checkpoint and wait_time < max_wait_secs:
                _log.info("Waiting for checkpoint to be available.")
                time.sleep(self._recovery_wait_secs)
                wait_time += self._recovery_wait_secs
                ckpt = get_checkpoint_state(checkpoint_dir)
            else:
                return sess, False
        saver.restore(sess, ckpt.model_checkpoint_path)
        if hasattr(saver, "recover_last_checkpoints"):
            saver.recover_last_checkpoints(list(ckpt.all_model_checkpoint_paths))
        return sess, True

    def prepare_session(self, master: str, init_op: Any = None, saver: Any = None,
                        checkpoint_dir: str | None = None, wait_for_checkpoint: bool = False,
                        max_wait_secs: float = 7200, config: Any = None,
                        init_feed_dict: Any = None, init_fn: Any = None,
                        checkpoint_filename_with_path: str | None = None) -> Any:
        """A session restored from the latest checkpoint in ``checkpoint_dir`` when there
        is one, else initialised with ``init_op``/``init_fn``; then local init.

        :raises RuntimeError: when the model is still not ready afterwards
        """
        sess, is_loaded = self._restore_checkpoint(
            master, saver, checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path,
            wait_for_checkpoint=wait_for_checkpoint, max_wait_secs=max_wait_secs,
            config=config)
        if not is_loaded:
            if init_op is None and not init_fn and self._local_init_op is None:
                raise RuntimeError("Model is not initialized and no init_op or init_fn or "
                                   "local_init_op was given")
            if init_op is not None:
                sess.run(init_op, feed_dict=init_feed_dict)
            if init_fn:
                init_fn(sess)
        ok, msg = self._try_run_local_init_op(sess)
        if not ok:
            raise RuntimeError("Init operations did not make model ready for local_init.  "
                               f"Init op: {getattr(init_op, 'name', init_op)}, init fn: "
                               f"{init_fn}, error: {msg}")
        ready, msg = check_ready(self._ready_op, sess, "Model not ready.")
        if not ready:
            raise RuntimeError("Init operations did not make model ready.  Init op: "
                               f"{getattr(init_op, 'name', init_op)}, init fn: {init_fn}, "
                               f"local_init_op: {self._local_init_op}, error: {msg}")
        return sess

    def recover_session(self, master: str, saver: Any = None,
                        checkpoint_dir: str | None = None, wait_for_checkpoint: bool = False,
                        max_wait_secs: float = 7200, config: Any = None,
                        checkpoint_filename_with_path: str | None = None
                        ) -> tuple[Any, bool]:
        """A session restored from a checkpoint if possible: ``(session, ready)``."""
        sess, is_loaded = self._restore_checkpoint(
            master, saver, checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path,
            wait_for_checkpoint=wait_for_checkpoint, max_wait_secs=max_wait_secs,
            config=config)
        ok, _ = self._try_run_local_init_op(sess)
        if not is_loaded:
            return sess, False
        if not ok:
            return sess, False
        ready, _ = check_ready(self._ready_op, sess, "Model not ready.")
        return sess, ready

    def wait_for_session(self, master: str, config: Any = None,
                         max_wait_secs: float = float("inf")) -> Any:
        """Wait (up to ``max_wait_secs``) until another task -- the chief -- made the
        model ready, then run the local init.

        :raises DeadlineExceededError: naming what is still not initialised
        """
        self._target = master
        deadline = time.monotonic() + max_wait_secs if max_wait_secs != float("inf") \
            else None
        last = "no attempt yet"
        while True:
            sess = None
            try:
                sess = self._new_session(master, config)
                ok, msg = self._try_run_local_init_op(sess)
                if ok:
                    ready, msg = check_ready(self._ready_op, sess, "Model not ready.")
                    if ready:
                        return sess
                last = msg or "not ready"
            except _PREEMPTION_ERRORS as e:
                last = f"{type(e).__name__}: {e.message}"
            if sess is not None:
                try:
                    sess.close()
                except Exception:  # noqa: BLE001
                    pass
            if deadline is not None and time.monotonic() >= deadline:
                raise errors.DeadlineExceededError(
                    None, None, f"Session was not ready after waiting {max_wait_secs:g} "
                    f"secs for the chief to initialize or restore the model on {master!r}. "
                    f"Last check: {last}")
            _log.info("Waiting for model to be ready. Ready_for_local_init_op: %s, "
                      "ready: %s", self._ready_for_local_init_op, last)
            wait = self._recovery_wait_secs
            if deadline is not None:
                wait = max(0.0, min(wait, deadline - time.monotonic()))
            time.sleep(wait)

    def _try_run_local_init_op(self, sess: Any) -> tuple[bool, str | None]:
        if self._local_init_op is None:
            return True, None
        ok, msg = check_ready(self._ready_for_local_init_op, sess,
                         "Model not ready for local init.")
        if not ok:
            return False, msg
        sess.run(self._local_init_op, feed_dict=self._local_init_feed_dict)
        return True, None


# -- session creators -----------------------------------------------------------------
class SessionCreator:
    """Creates a session (``create_session()``)."""

    def create_session(self) -> Any:
        raise NotImplementedError


class ChiefSessionCreator(SessionCreator):
    """The chief's sessions: restore from ``checkpoint_dir`` or initialise."""

    def __init__(self, scaffold: Scaffold | None = None, master: str = "",
                 config: Any = None, checkpoint_dir: str | None = None,
                 checkpoint_filename_with_path: str | None = None):
        self._checkpoint_dir = checkpoint_dir
        self._checkpoint_filename_with_path = checkpoint_filename_with_path
        self._scaffold = scaffold or Scaffold()
        self._session_manager: SessionManager | None = None
        self._master = master
        self._config = config

    def _get_session_manager(self) -> SessionManager:
        if self._session_manager is None:
            self._session_manager = SessionManager(
                local_init_op=self._scaffold.local_init_op,
                ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
                ready_op=self._scaffold.ready_op)
        return self._session_manager

    def create_session(self) -> Any:
        self._scaffold.finalize()
        return self._get_session_manager().prepare_session(
            self._master, saver=self._scaffold.saver, checkpoint_dir=self._checkpoint_dir,
            checkpoint_filename_with_path=self._checkpoint_filename_with_path,
            config=self._config, init_op=self._scaffold.init_op,
            init_feed_dict=self._scaffold.init_feed_dict, init_fn=self._scaffold.init_fn)


class WorkerSessionCreator(SessionCreator):
    """A non-chief's sessions: wait (bounded) until the chief made the model ready."""

    def __init__(self, scaffold: Scaffold | None = None, master: str = "",
                 config: Any = None, max_wait_secs: float = 30 * 60,
                 recovery_wait_secs: float = 1.0):
        self._scaffold = scaffold or Scaffold()
        self._session_manager: SessionManager | None = None
        self._master = master
        self._config = config
        self._max_wait_secs = max_wait_secs
        self._recovery_wait_secs = recovery_wait_secs

    def create_session(self) -> Any:
        self._scaffold.finalize()
        if self._session_manager is None:
            self._session_manager = SessionManager(
                local_init_op=self._scaffold.local_init_op,
                ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
                ready_op=self._scaffold.ready_op,
                recovery_wait_secs=self._recovery_wait_secs)
        return self._session_manager.wait_for_session(self._master, config=self._config,
                                                      max_wait_secs=self._max_wait_secs)


# -- the monitored session ------------------------------------------------------------
class _HookedSession:
    """Runs a session with the hooks' fetches and feeds added to each run."""

    def __init__(self, sess: Any, hooks: Sequence[SessionRunHook]):
        self._sess = sess
        self._hooks = list(hooks)
        self._should_stop = False

    @property
    def graph(self) -> Any:
        return self._sess.graph

    def should_stop(self) -> bool:
        return self._should_stop

    def run(self, fetches: Any, feed_dict: Any = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        """Run ``fetches`` with the hooks' requests added (``tf.train.MonitoredSession.run``).

        Each hook's ``before_run`` may add fetches, feeds and options; its ``after_run`` gets
        the values it asked for. A hook's stop request is kept for :meth:`should_stop`.

        :returns: the values of ``fetches``
        :raises RuntimeError: if a stop was requested before, or a tensor is fed by two
            hooks or by a hook and the caller
        """
        if self._should_stop:
            raise RuntimeError("Run called even after should_stop requested.")
        actual_fetches: dict[Any, Any] = {"caller": fetches}
        run_context = SessionRunContext(SessionRunArgs(fetches, feed_dict), self._sess)
        hook_feeds: dict[Any, Any] = {}
        for hook in self._hooks:
            request = hook.before_run(run_context)
            if request is None:
                continue
            if request.fetches is not None:
                actual_fetches[hook] = request.fetches
            if request.feed_dict:
                for k, v in request.feed_dict.items():
                    if k in hook_feeds:
                        raise RuntimeError(f"Same tensor is fed by two hooks: {k}")
                    hook_feeds[k] = v
            if request.options is not None:  # merged as TF's _merge_run_options
                options = options or config_pb2.RunOptions()
                ro = request.options
                options.trace_level = max(options.trace_level, ro.trace_level)
                options.timeout_in_ms = max(options.timeout_in_ms, ro.timeout_in_ms)
                options.output_partition_graphs |= ro.output_partition_graphs
        if hook_feeds:
            if feed_dict:
                for k in hook_feeds:
                    if k in feed_dict:
                        raise RuntimeError(f"Same tensor is fed by a SessionRunHook and "
                                           f"user. Conflict(s): {k}")
                feed_dict = {**feed_dict, **hook_feeds}
            else:
                feed_dict = hook_feeds
        run_metadata = run_metadata if run_metadata is not None else config_pb2.RunMetadata()
        outputs = self._sess.run(actual_fetches, feed_dict=feed_dict, options=options,
                                 run_metadata=run_metadata)
        for hook in self._hooks:
            hook.after_run(run_context, SessionRunValues(
                results=outputs.get(hook), options=options, run_metadata=run_metadata))
        self._should_stop = self._should_stop or run_context.stop_requested
        return outputs["caller"]

    def close(self) -> None:
        self._sess.close()


class MonitoredSession:
    """A session that creates itself with a session creator, runs hooks, starts queue
    runners and -- unless ``should_recover`` is False -- recovers from a lost task by
    creating a new session (restoring the latest checkpoint on the chief)."""

    def __init__(self, session_creator: SessionCreator | None = None,
                 hooks: Sequence[SessionRunHook] | None = None,
                 stop_grace_period_secs: float = 120, should_recover: bool = True,
                 max_recoveries: int | None = None):
        """Call every hook's ``begin`` and create the session (with its queue runners).

        :param session_creator: default: a :class:`ChiefSessionCreator`
        :param stop_grace_period_secs: how long :meth:`close` waits for the queue-runner
            threads to stop
        :param max_recoveries: the most times the session is created again after a lost
            task (None: no limit)
        """

        self._graph = get_default_graph()
        self._hooks = list(hooks or [])
        self._creator = session_creator or ChiefSessionCreator()
        self._stop_grace_period_secs = stop_grace_period_secs
        self._should_recover = should_recover
        self._max_recoveries = max_recoveries
        #: how many times the session was created again after a lost task
        self.recoveries = 0
        self._closed = False
        self._sess: _HookedSession | None = None
        self._tf_sess: Any = None
        self._coord: Coordinator | None = None
        for h in self._hooks:
            h.begin()
        self._create()

    # -- creation and recovery ---------------------------------------------------------
    def _create(self) -> None:
        while True:
            try:
                with self._graph.as_default():
                    tf_sess = self._creator.create_session()
                coord = Coordinator()
                start_queue_runners(sess=tf_sess, coord=coord)
                for h in self._hooks:
                    h.after_create_session(tf_sess, coord)
                self._tf_sess, self._coord = tf_sess, coord
                self._sess = _HookedSession(tf_sess, self._hooks)
                return
            except _PREEMPTION_ERRORS as e:
                if not self._should_recover:
                    raise
                self._count_recovery(e)
                _log.info("An error was raised while a session was being created: %s. "
                          "Trying again.", e.message)
                time.sleep(0.5)

    def _count_recovery(self, e: BaseException) -> None:
        self.recoveries += 1
        if self._max_recoveries is not None and self.recoveries > self._max_recoveries:
            raise e

    def _close_inner(self) -> None:
        # Stop the threads, then close the session -- which cancels the steps they may
        # be blocked in (a chief's queue runner waiting for gradients) -- and only then
        # wait for them: closing first means no wait for the grace period.
        coord, self._coord = self._coord, None
        if coord is not None:
            coord.request_stop()
        sess, self._sess = self._sess, None
        if sess is not None:
            try:
                sess.close()
            except Exception as e:  # noqa: BLE001
                _log.info("Ignored exception while closing the session: %s", e)
        if coord is not None:
            try:
                coord.join(stop_grace_period_secs=self._stop_grace_period_secs,
                           ignore_live_threads=True)
            except Exception as e:  # noqa: BLE001 - the session goes away anyway
                _log.info("Ignored exception while stopping threads: %s", e)

    # -- running -----------------------------------------------------------------------
    @property
    def graph(self) -> Any:
        return self._graph

    def run(self, fetches: Any, feed_dict: Any = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        """Run with hooks; a lost task makes the session be created again and the run
        retried."""
        if self._closed:
            raise RuntimeError("Session is already closed.")
        while True:
            if self._sess is None:
                self._create()
            try:
                return self._sess.run(fetches, feed_dict=feed_dict,  # type: ignore
                                      options=options, run_metadata=run_metadata)
            except _PREEMPTION_ERRORS as e:
                if not self._should_recover:
                    raise
                self._count_recovery(e)
                _log.info("An error was raised. This may be due to a preemption in a "
                          "connected worker or parameter server. The current session "
                          "will be closed and a new session will be created. This error "
                          "may also occur due to a gRPC failure caused by high memory or "
                          "network bandwidth usage in the parameter servers. If this "
                          "error occurs repeatedly, try increasing the number of "
                          "parameter servers assigned to the job. Error: %s", e.message)
                self._close_inner()
            except Exception:
                if self._coord is not None:
                    self._coord.raise_requested_exception()
                raise

    def run_step_fn(self, step_fn: Callable[[Any], Any]) -> Any:
        """Run ``step_fn(step_context)``; the context has ``session``,
        ``run_with_hooks`` and ``request_stop``."""
        return step_fn(_StepContext(self))

    def should_stop(self) -> bool:
        """True once a hook or the coordinator asked to stop, or the session closed."""
        if self._closed:
            return True
        if self._coord is not None and self._coord.should_stop():
            return True
        return self._sess is not None and self._sess.should_stop()

    def close(self) -> None:
        self._close_internal()

    def _close_internal(self, exception_type: Any = None) -> None:
        if self._closed:
            return
        try:
            if not exception_type and self._tf_sess is not None and self._sess is not None:
                for h in self._hooks:
                    h.end(self._tf_sess)
        finally:
            self._closed = True
            try:
                self._close_inner()
            finally:
                _release_writers(self._hooks)

    def __enter__(self) -> "MonitoredSession":
        return self

    def __exit__(self, exception_type: Any, exception_value: Any, traceback: Any) -> bool:
        if exception_type in (errors.OutOfRangeError, StopIteration):
            exception_type = None
        self._close_internal(exception_type)
        return exception_type is None and exception_value is not None

    def raw_session(self) -> Any:
        """The underlying ``Session`` (no hooks, no recovery)."""
        return self._tf_sess


class _StepContext:
    def __init__(self, monitored: MonitoredSession):
        self._m = monitored

    @property
    def session(self) -> Any:
        return self._m._tf_sess

    def run_with_hooks(self, *args: Any, **kwargs: Any) -> Any:
        return self._m.run(*args, **kwargs)

    def request_stop(self) -> None:
        if self._m._coord is not None:
            self._m._coord.request_stop()


class SingularMonitoredSession(MonitoredSession):
    """A monitored session for one process: chief, no recovery from lost tasks."""

    def __init__(self, hooks: Sequence[SessionRunHook] | None = None,
                 scaffold: Scaffold | None = None, master: str = "", config: Any = None,
                 checkpoint_dir: str | None = None, stop_grace_period_secs: float = 120,
                 checkpoint_filename_with_path: str | None = None):
        creator = ChiefSessionCreator(scaffold=scaffold, master=master, config=config,
                                      checkpoint_dir=checkpoint_dir,
                                      checkpoint_filename_with_path=checkpoint_filename_with_path)
        super().__init__(creator, hooks, stop_grace_period_secs, should_recover=False)


def MonitoredTrainingSession(master: str = "", is_chief: bool = True,  # noqa: N802
                             checkpoint_dir: str | None = None,
                             scaffold: Scaffold | None = None,
                             hooks: Sequence[SessionRunHook] | None = None,
                             chief_only_hooks: Sequence[SessionRunHook] | None = None,
                             save_checkpoint_secs: Any = USE_DEFAULT,
                             save_summaries_steps: Any = USE_DEFAULT,
                             save_summaries_secs: Any = USE_DEFAULT, config: Any = None,
                             stop_grace_period_secs: float = 120,
                             log_step_count_steps: int = 100, max_wait_secs: float = 7200,
                             save_checkpoint_steps: Any = USE_DEFAULT,
                             summary_dir: str | None = None,
                             save_graph_def: bool = True) -> MonitoredSession:
    """A :class:`MonitoredSession` set up for (distributed) training, as TF 1.15's.

    The chief restores from ``checkpoint_dir`` or initialises, saves checkpoints every
    ``save_checkpoint_secs`` (default 600) or ``save_checkpoint_steps``, and, to
    ``summary_dir`` (default ``checkpoint_dir``), writes the scaffold's summary op every
    ``save_summaries_steps`` (default 100) or ``save_summaries_secs`` and the step rate
    every ``log_step_count_steps``; other workers wait up to ``max_wait_secs`` for the
    chief and write nothing.
    """
    if save_summaries_steps is USE_DEFAULT and save_summaries_secs is USE_DEFAULT:
        save_summaries_steps, save_summaries_secs = 100, None
    elif save_summaries_secs is USE_DEFAULT:
        save_summaries_secs = None
    elif save_summaries_steps is USE_DEFAULT:
        save_summaries_steps = None
    if save_checkpoint_steps is USE_DEFAULT and save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_steps, save_checkpoint_secs = None, 600
    elif save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_secs = None
    elif save_checkpoint_steps is USE_DEFAULT:
        save_checkpoint_steps = None
    scaffold = scaffold or Scaffold()
    if not is_chief:
        creator: SessionCreator = WorkerSessionCreator(scaffold=scaffold, master=master,
                                                       config=config,
                                                       max_wait_secs=max_wait_secs)
        return MonitoredSession(session_creator=creator, hooks=list(hooks or []),
                                stop_grace_period_secs=stop_grace_period_secs)
    all_hooks: list[SessionRunHook] = list(chief_only_hooks or [])
    creator = ChiefSessionCreator(scaffold=scaffold, checkpoint_dir=checkpoint_dir,
                                  master=master, config=config)
    summary_dir = summary_dir or checkpoint_dir
    if summary_dir:
        if log_step_count_steps and log_step_count_steps > 0:
            all_hooks.append(StepCounterHook(every_n_steps=log_step_count_steps,
                                             output_dir=summary_dir))
        if (save_summaries_steps and save_summaries_steps > 0) or \
                (save_summaries_secs and save_summaries_secs > 0):
            all_hooks.append(SummarySaverHook(
                scaffold=scaffold, save_steps=save_summaries_steps,
                save_secs=save_summaries_secs, output_dir=summary_dir))
    if checkpoint_dir and ((save_checkpoint_secs and save_checkpoint_secs > 0) or
                           (save_checkpoint_steps and save_checkpoint_steps > 0)):
        all_hooks.append(CheckpointSaverHook(checkpoint_dir, save_steps=save_checkpoint_steps,
                                             save_secs=save_checkpoint_secs,
                                             scaffold=scaffold,
                                             save_graph_def=save_graph_def))
    all_hooks.extend(hooks or [])
    return MonitoredSession(session_creator=creator, hooks=all_hooks,
                            stop_grace_period_secs=stop_grace_period_secs)


del sys
