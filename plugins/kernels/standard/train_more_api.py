"""Publishes the rest of ``tf.train`` TF1 programs use: ``ExponentialMovingAverage``
(:mod:`flowrt.modeling.moving_averages`), ``ProfilerHook`` and ``basic_train_loop``.

``ProfilerHook`` traces a step every N steps or seconds (``RunOptions(trace_level=
FULL_TRACE)``) and writes its Chrome trace as ``<output_dir>/timeline-<step>.json``
(:class:`flowrt.tools.timeline.Timeline`), and the step's ``RunMetadata`` to the
directory's event file, as TF 1.15's ``basic_session_run_hooks.ProfilerHook`` does.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Callable, Sequence

from flowrt import errors
from flowrt.framework.events import FileWriterCache
from flowrt.framework.gfile import GFile
from flowrt.modeling import moving_averages
from flowrt.proto import config_pb2
from flowrt.tools.timeline import Timeline
from flowrt.training.monitored_session import (SecondOrStepTimer, SessionRunArgs,
                                               SessionRunContext, SessionRunHook,
                                               SessionRunValues)

from ._common import ks
from .optimizers import get_global_step

__all__ = ["ProfilerHook", "basic_train_loop"]

_log = logging.getLogger("flowrt")


class ProfilerHook(SessionRunHook):
    """Captures a Chrome trace of a step every ``save_steps`` steps or ``save_secs``
    seconds into ``output_dir/timeline-<global step>.json``
    (``tf.train.ProfilerHook``).

    :raises ValueError: unless exactly one of ``save_steps`` and ``save_secs`` is given
    """

    def __init__(self, save_steps: int | None = None, save_secs: float | None = None,
                 output_dir: str = "", show_dataflow: bool = True, show_memory: bool = False):
        self._output_file = os.path.join(output_dir, "timeline-{}.json")
        self._output_dir = output_dir
        self._show_dataflow = show_dataflow
        self._show_memory = show_memory
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._file_writer: Any = None

    def begin(self) -> None:
        """Find the global step.

        :raises RuntimeError: when the graph has none
        """
        self._next_step: int | None = None
        self._global_step_tensor = get_global_step()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use ProfilerHook.")
        self._global_step_read = self._global_step_tensor
        if hasattr(self._global_step_tensor, "read_value"):
            self._global_step_read = self._global_step_tensor.read_value()
        if self._output_dir:
            self._file_writer = FileWriterCache.get(self._output_dir)

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        self._request_summary = (self._next_step is not None
                                 and self._timer.should_trigger_for_step(self._next_step))
        opts = (config_pb2.RunOptions(trace_level=config_pb2.RunOptions.FULL_TRACE)
                if self._request_summary else None)
        return SessionRunArgs({"global_step": self._global_step_read}, options=opts)

    def after_run(self, run_context: SessionRunContext,
                  run_values: SessionRunValues) -> None:
        stale = int(run_values.results["global_step"])
        if self._next_step is None:
            # the first run only starts the timer: N steps or seconds from here
            self._timer.update_last_triggered_step(stale)
        step = stale + 1
        if self._request_summary:
            step = int(run_context.session.run(self._global_step_tensor))
            self._timer.update_last_triggered_step(step)
            if run_values.run_metadata is None:
                # the session running the hooks gave it no RunMetadata to trace into
                _log.warning("ProfilerHook: no RunMetadata for step %d; no timeline saved.",
                             step)
            else:
                self._save(step, self._output_file.format(step),
                           run_values.run_metadata.step_stats)
            if self._file_writer is not None and run_values.run_metadata is not None:
                self._file_writer.add_run_metadata(run_values.run_metadata, f"step_{step}")
        self._next_step = step + 1

    def _save(self, step: int, path: str, step_stats: Any) -> None:
        _log.info("Saving timeline for %d into '%s'.", step, path)
        trace = Timeline(step_stats).generate_chrome_trace_format(
            show_dataflow=self._show_dataflow, show_memory=self._show_memory)
        with GFile(path, "w") as f:
            f.write(trace)


def basic_train_loop(supervisor: Any, train_step_fn: Callable[..., Any],
                     args: Sequence[Any] | None = None, kwargs: dict | None = None,
                     master: str = "") -> None:
    """Call ``train_step_fn(sess, *args, **kwargs)`` in a ``supervisor.managed_session``
    until the supervisor says stop; the whole loop starts again after an
    ``AbortedError`` (a server of the cluster restarted) (``tf.train.basic_train_loop``)."""
    args = list(args or [])
    kwargs = dict(kwargs or {})
    should_retry = True
    while should_retry:
        try:
            should_retry = False
            with supervisor.managed_session(master) as sess:
                while not supervisor.should_stop():
                    train_step_fn(sess, *args, **kwargs)
        except errors.AbortedError:
            should_retry = True


for _name, _value in (*moving_averages.API.items(),
                      ("train.ProfilerHook", ProfilerHook),
                      ("train.basic_train_loop", basic_train_loop)):
    if _name not in ks.api_names:
        ks.export(_name, _value)
