"""``tf.train.Supervisor``: TF 1.x's older training wrapper, kept for programs that use it.

A :class:`Supervisor` takes the graph's pieces (init, ready and local-init ops, saver,
summary op, global step) from its arguments or the graph's collections, creating the
defaults TF 1.15 creates, and finalizes the graph. Its session is restored from the
latest checkpoint in ``logdir`` or initialised (:class:`~flowrt.training.
monitored_session.SessionManager`); on the chief, *standard services* run as
:class:`~flowrt.training.coordinator.LooperThread` s of its coordinator: summaries and
the step rate every ``save_summaries_secs``, a checkpoint every ``save_model_secs``.
:meth:`Supervisor.stop` stops and joins them within ``stop_grace_secs`` and closes the
summary writer.
"""
from __future__ import annotations

import contextlib
import logging
import os
import time
from typing import Any, Iterator, Sequence

from ..base import dtypes
from ..framework.events import FileWriter
from ..framework.graph import GraphKeys, api_function, get_default_graph
from ..plugin.runtime import require_api
from ..proto import event_pb2, summary_pb2
from ..training import variables as _vars
from ..training.coordinator import Coordinator, LooperThread
from ..training.graph_io import write_graph
from ..training.monitored_session import SessionManager
from ..training.saver import export_meta_graph

__all__ = ["Supervisor", "SVSummaryThread", "SVStepCounterThread",
           "SVTimerCheckpointThread", "API"]

_log = logging.getLogger("flowrt")

#: op API functions the default ops are built with
REQUIRED_API_NAMES = frozenset({"group", "summary.merge_all", "train.Saver"})
require_api(REQUIRED_API_NAMES)


def _first_in_collection(graph: Any, key: str) -> Any:
    items = graph.get_collection(key)
    if len(items) > 1:
        _log.info("Found %d %s operations. Returning the first one.", len(items), key)
    return items[0] if items else None


def _step_of(sess: Any, global_step: Any) -> int:
    return int(sess.run(global_step))


class Supervisor:
    """A training helper: session preparation, checkpoints, summaries and stopping
    (``tf.train.Supervisor``, TF 1.15 semantics).

    Arguments left as :attr:`USE_DEFAULT` are taken from the graph's collections
    (``ready_op``, ``init_op``, ``local_init_op``, ``savers``, ``summary_op``,
    ``global_step``) or created: ``report_uninitialized_variables()``,
    ``global_variables_initializer()``, the local and table initializers, a ``Saver``
    when there are variables, ``summary.merge_all()``, the ``global_step:0`` tensor. Pass
    None to go without one. Only the chief writes: ``logdir``, the summary writer and the
    ``save_*_secs`` timers are ignored on other tasks.
    """

    USE_DEFAULT = 0

    def __init__(self, graph: Any = None, ready_op: Any = USE_DEFAULT,
                 ready_for_local_init_op: Any = USE_DEFAULT, is_chief: bool = True,
                 init_op: Any = USE_DEFAULT, init_feed_dict: Any = None,
                 local_init_op: Any = USE_DEFAULT, logdir: str | None = None,
                 summary_op: Any = USE_DEFAULT, saver: Any = USE_DEFAULT,
                 global_step: Any = USE_DEFAULT, save_summaries_secs: float = 120,
                 save_model_secs: float = 600, recovery_wait_secs: float = 30,
                 stop_grace_secs: float = 120, checkpoint_basename: str = "model.ckpt",
                 session_manager: SessionManager | None = None,
                 summary_writer: Any = USE_DEFAULT, init_fn: Any = None,
                 local_init_run_options: Any = None):
        """Build the default ops that are missing, open the chief's summary writer on
        ``logdir`` (no file is written before the first event) and finalize the graph.

        :param init_fn: called as ``init_fn(sess)`` after ``init_op`` on a new model
        :raises ValueError: on a non-chief task, when a variable has no device
        """
        self._graph = graph = graph if graph is not None else get_default_graph()
        use = Supervisor.USE_DEFAULT
        with graph.as_default():
            if ready_op is use:
                ready_op = self._get_or_add(GraphKeys.READY_OP,
                                            _vars.report_uninitialized_variables)
            if ready_for_local_init_op is use:
                ready_for_local_init_op = _first_in_collection(
                    graph, GraphKeys.READY_FOR_LOCAL_INIT_OP)
            if init_op is use:
                init_op = self._get_or_add(GraphKeys.INIT_OP,
                                           _vars.global_variables_initializer)
            if local_init_op is use:
                # the local variables' and the lookup tables' initializers
                local_init_op = self._get_or_add(GraphKeys.LOCAL_INIT_OP, lambda: api_function(
                    "group")(_vars.local_variables_initializer(),
                             *graph.get_collection(GraphKeys.TABLE_INITIALIZERS)))
            if saver is use:
                saver = self._get_or_add(GraphKeys.SAVERS, lambda: api_function(
                    "train.Saver")() if _vars.global_variables() else None)
            if summary_op is use:
                summary_op = self._get_or_add(GraphKeys.SUMMARY_OP,
                                              api_function("summary.merge_all"))
            if global_step is use:
                global_step = self._get_or_add(GraphKeys.GLOBAL_STEP,
                                               self._default_global_step_tensor)
            self._meta_graph_def = export_meta_graph(
                graph_def=graph.as_graph_def(add_shapes=True), graph=graph,
                saver_def=getattr(saver, "saver_def", None) if saver else None)
        self._ready_op, self._ready_for_local_init_op = ready_op, ready_for_local_init_op
        self._init_op, self._init_feed_dict = init_op, init_feed_dict
        self._local_init_op, self._saver = local_init_op, saver
        self._summary_op, self._global_step = summary_op, global_step
        self._is_chief = is_chief
        self._coord = Coordinator()
        self._recovery_wait_secs = recovery_wait_secs
        self._stop_grace_secs = stop_grace_secs
        self._init_fn = init_fn
        self._logdir: str | None = None
        self._save_summaries_secs: float | None = None
        self._save_model_secs: float | None = None
        self._save_path: str | None = None
        self._summary_writer: Any = None
        self._graph_added_to_summary = False
        if is_chief:
            self._logdir = logdir
            self._save_summaries_secs = save_summaries_secs
            self._save_model_secs = save_model_secs
            if logdir:
                self._save_path = os.path.join(logdir, checkpoint_basename)
            if summary_writer is use:
                self._summary_writer = FileWriter(logdir) if logdir else None
            else:
                self._summary_writer = summary_writer
        self._session_manager = session_manager if session_manager is not None else \
            SessionManager(local_init_op=local_init_op, ready_op=ready_op,
                           ready_for_local_init_op=ready_for_local_init_op, graph=graph,
                           recovery_wait_secs=recovery_wait_secs,
                           local_init_run_options=local_init_run_options)
        self._verify_setup()
        graph.finalize()

    def _get_or_add(self, key: str, make: Any) -> Any:
        op = _first_in_collection(self._graph, key)
        if op is None:
            op = make()
            if op is not None:
                self._graph.add_to_collection(key, op)
        return op

    def _default_global_step_tensor(self) -> Any:
        try:
            gs = self._graph.get_tensor_by_name("global_step:0")
        except (KeyError, ValueError):
            return None
        if gs.dtype.base_dtype in (dtypes.int32, dtypes.int64):
            return gs
        _log.warning("Found 'global_step' is not an int type: %s", gs.dtype)
        return None

    def _verify_setup(self) -> None:
        if self._is_chief:
            return
        for op in self._graph.get_operations():
            if op.type in ("Variable", "VariableV2") and not op.device:
                raise ValueError("When using replicas, all Variables must have their "
                                 f"device set: {op.name}")

    # -- what it holds -----------------------------------------------------------------
    is_chief = property(lambda self: self._is_chief, doc="Whether this is the chief.")
    session_manager = property(lambda self: self._session_manager)
    coord = property(lambda self: self._coord, doc="The coordinator of its threads.")
    init_op = property(lambda self: self._init_op)
    init_feed_dict = property(lambda self: self._init_feed_dict)
    ready_op = property(lambda self: self._ready_op)
    ready_for_local_init_op = property(lambda self: self._ready_for_local_init_op)
    summary_writer = property(lambda self: self._summary_writer)
    summary_op = property(lambda self: self._summary_op)
    save_summaries_secs = property(lambda self: self._save_summaries_secs)
    global_step = property(lambda self: self._global_step)
    saver = property(lambda self: self._saver)
    save_model_secs = property(lambda self: self._save_model_secs)
    save_path = property(lambda self: self._save_path)

    # -- sessions and services ---------------------------------------------------------
    def _write_graph(self) -> None:
        if self._logdir:
            write_graph(self._graph.as_graph_def(add_shapes=True), self._logdir,
                        "graph.pbtxt")
        if self._summary_writer and not self._graph_added_to_summary:
            self._summary_writer.add_graph(self._graph)
            self._summary_writer.add_meta_graph(self._meta_graph_def)
            self._graph_added_to_summary = True

    def start_standard_services(self, sess: Any) -> list[LooperThread] | None:
        """Write ``SessionLog.START`` and start the summary, step-rate and checkpoint
        threads the settings ask for (None without a ``logdir``).

        :raises RuntimeError: on a non-chief task
        """
        if not self._is_chief:
            raise RuntimeError("Only chief supervisor can start standard services. "
                               "Because only chief supervisors can write events.")
        if not self._logdir:
            _log.warning("Standard services need a 'logdir' passed to the SessionManager")
            return None
        if self._global_step is not None and self._summary_writer:
            self._summary_writer.add_session_log(
                event_pb2.SessionLog(status=event_pb2.SessionLog.START),
                _step_of(sess, self._global_step))
        threads: list[LooperThread] = []
        if self._save_summaries_secs and self._summary_writer:
            if self._summary_op is not None:
                threads.append(SVSummaryThread(self, sess))
            if self._global_step is not None:
                threads.append(SVStepCounterThread(self, sess))
        if self._saver and self._save_model_secs:
            threads.append(SVTimerCheckpointThread(self, sess))
        for t in threads:
            t.start()
        return threads

    def prepare_or_wait_for_session(self, master: str = "", config: Any = None,
                                    wait_for_checkpoint: bool = False,
                                    max_wait_secs: float = 7200,
                                    start_standard_services: bool = True) -> Any:
        """The chief's session, restored from the latest checkpoint in ``logdir`` or
        initialised, with the graph written and the standard services started; another
        task's once the chief made the model ready. Queue runners are started too
        (with ``start_standard_services``)."""
        self._coord.clear_stop()
        if self._summary_writer:
            self._summary_writer.reopen()
        if self._is_chief:
            sess = self._session_manager.prepare_session(
                master, init_op=self._init_op, saver=self._saver,
                checkpoint_dir=self._logdir, wait_for_checkpoint=wait_for_checkpoint,
                max_wait_secs=max_wait_secs, config=config,
                init_feed_dict=self._init_feed_dict, init_fn=self._init_fn)
            self._write_graph()
            if start_standard_services:
                _log.info("Starting standard services.")
                self.start_standard_services(sess)
        else:
            sess = self._session_manager.wait_for_session(master, config=config,
                                                          max_wait_secs=max_wait_secs)
        if start_standard_services:
            _log.info("Starting queue runners.")
            self.start_queue_runners(sess)
        return sess

    def start_queue_runners(self, sess: Any, queue_runners: Sequence[Any] | None = None
                            ) -> list[Any]:
        """Start the threads of ``queue_runners`` (default: the graph's) under the
        supervisor's coordinator."""
        if queue_runners is None:
            queue_runners = self._graph.get_collection(GraphKeys.QUEUE_RUNNERS)
        threads: list[Any] = []
        for qr in queue_runners:
            threads.extend(qr.create_threads(sess, coord=self._coord, daemon=True,
                                             start=True))
        return threads

    def loop(self, timer_interval_secs: float | None, target: Any,
             args: Sequence[Any] | None = None, kwargs: dict[str, Any] | None = None
             ) -> LooperThread:
        """Start a thread that calls ``target(*args, **kwargs)`` every
        ``timer_interval_secs`` until the supervisor stops."""
        looper = LooperThread(self._coord, timer_interval_secs, target=target, args=args,
                              kwargs=kwargs)
        looper.start()
        return looper

    # -- stopping ----------------------------------------------------------------------
    def stop(self, threads: Sequence[Any] | None = None, close_summary_writer: bool = True,
             ignore_live_threads: bool = False) -> None:
        """Request a stop and join the threads within ``stop_grace_secs``; then write
        ``SessionLog.STOP`` and close the summary writer.

        :raises: the exception passed to :meth:`request_stop`, if any; RuntimeError when
            threads outlive the grace period (unless ``ignore_live_threads``)
        """
        self._coord.request_stop()
        try:
            self._coord.join(threads, stop_grace_period_secs=self._stop_grace_secs,
                             ignore_live_threads=ignore_live_threads)
        finally:
            if close_summary_writer and self._summary_writer:
                self._summary_writer.add_session_log(
                    event_pb2.SessionLog(status=event_pb2.SessionLog.STOP))
                self._summary_writer.close()
                self._graph_added_to_summary = False

    def request_stop(self, ex: Any = None) -> None:
        """Ask the threads to stop; ``ex`` is re-raised by :meth:`stop`."""
        self._coord.request_stop(ex=ex)

    def should_stop(self) -> bool:
        """True once a stop was requested."""
        return self._coord.should_stop()

    def stop_on_exception(self) -> Any:
        """``with sv.stop_on_exception():`` requests a stop on any exception."""
        return self._coord.stop_on_exception()

    def wait_for_stop(self) -> None:
        """Block until a stop is requested."""
        self._coord.wait_for_stop()

    def summary_computed(self, sess: Any, summary: Any, global_step: int | None = None
                         ) -> None:
        """Write ``summary`` (a ``Summary`` or its bytes) at ``global_step`` (default:
        the global step's value).

        :raises RuntimeError: without a summary writer
        """
        if not self._summary_writer:
            raise RuntimeError("Writing a summary requires a summary writer.")
        if global_step is None and self._global_step is not None:
            global_step = _step_of(sess, self._global_step)
        self._summary_writer.add_summary(summary, global_step)

    @contextlib.contextmanager
    def managed_session(self, master: str = "", config: Any = None,
                        start_standard_services: bool = True,
                        close_summary_writer: bool = True) -> Iterator[Any]:
        """``with sv.managed_session() as sess:``: a prepared session; on leaving, the
        threads are stopped and joined, the writer closed and the session closed. An
        exception in the block stops the threads and is re-raised, except
        ``OutOfRangeError``, which ends the block quietly."""
        sess = None
        try:
            sess = self.prepare_or_wait_for_session(
                master=master, config=config,
                start_standard_services=start_standard_services)
            yield sess
        except Exception as e:  # noqa: BLE001 - re-raised by stop() through the coord
            self.request_stop(e)
        finally:
            try:
                self.stop(close_summary_writer=close_summary_writer)
            finally:
                if sess is not None:
                    try:
                        sess.close()
                    except Exception:  # noqa: BLE001, S110 - closing is best effort
                        pass

    # TF's CamelCase aliases
    def PrepareSession(self, *a: Any, **k: Any) -> Any:  # noqa: N802
        return self.prepare_or_wait_for_session(*a, **k)

    def StartQueueRunners(self, *a: Any, **k: Any) -> Any:  # noqa: N802
        return self.start_queue_runners(*a, **k)

    def StartStandardServices(self, *a: Any, **k: Any) -> Any:  # noqa: N802
        return self.start_standard_services(*a, **k)

    def Stop(self, *a: Any, **k: Any) -> None:  # noqa: N802
        self.stop(*a, **k)

    def RequestStop(self, *a: Any, **k: Any) -> None:  # noqa: N802
        self.request_stop(*a, **k)

    def Loop(self, *a: Any, **k: Any) -> LooperThread:  # noqa: N802
        return self.loop(*a, **k)

    def ShouldStop(self) -> bool:  # noqa: N802
        return self.should_stop()

    def StopOnException(self) -> Any:  # noqa: N802
        return self.stop_on_exception()

    def WaitForStop(self) -> None:  # noqa: N802
        self.wait_for_stop()

    def SummaryComputed(self, *a: Any, **k: Any) -> None:  # noqa: N802
        self.summary_computed(*a, **k)


class SVSummaryThread(LooperThread):
    """Runs the summary op every ``save_summaries_secs`` and writes its value at the
    global step."""

    def __init__(self, sv: Supervisor, sess: Any):
        super().__init__(sv.coord, sv.save_summaries_secs)
        self.name = "SVSummaryThread"
        self._sv, self._sess = sv, sess

    def run_loop(self) -> None:
        if self._sv.global_step is not None:
            summary, step = self._sess.run([self._sv.summary_op, self._sv.global_step])
        else:
            summary, step = self._sess.run(self._sv.summary_op), None
        if self._sv.summary_writer:
            _log.info("Recording summary at step %s.", step)
            self._sv.summary_writer.add_summary(summary, step)


class SVStepCounterThread(LooperThread):
    """Writes ``<global step op>/sec`` every ``save_summaries_secs``."""

    def __init__(self, sv: Supervisor, sess: Any, step_counter: Any = None):
        super().__init__(sv.coord, sv.save_summaries_secs)
        self.name = "SVStepCounterThread"
        self._sv, self._sess = sv, sess
        self._step_counter = sv.global_step if step_counter is None else step_counter
        self._summary_tag = f"{self._step_counter.op.name}/sec"
        self._last_time, self._last_step = 0.0, 0
        self._logged = 0

    def start_loop(self) -> None:
        self._last_time = time.time()
        self._last_step = _step_of(self._sess, self._step_counter)

    def run_loop(self) -> None:
        step = _step_of(self._sess, self._step_counter)
        added, self._last_step = step - self._last_step, step
        now = time.time()
        elapsed, self._last_time = now - self._last_time, now
        rate = added / elapsed if elapsed > 0 else float("inf")
        if self._sv.summary_writer:
            self._sv.summary_writer.add_summary(summary_pb2.Summary(value=[
                summary_pb2.Summary.Value(tag=self._summary_tag, simple_value=rate)]), step)
        if self._logged < 10:  # TF logs the first 10
            self._logged += 1
            _log.info("%s: %g", self._summary_tag, rate)


class SVTimerCheckpointThread(LooperThread):
    """Saves a checkpoint to ``save_path`` every ``save_model_secs``."""

    def __init__(self, sv: Supervisor, sess: Any):
        super().__init__(sv.coord, sv.save_model_secs)
        self.name = "SVTimerCheckpointThread"
        self._sv, self._sess = sv, sess

    def run_loop(self) -> None:
        _log.info("Saving checkpoint to path %s", self._sv.save_path)
        self._sv.saver.save(self._sess, self._sv.save_path, global_step=self._sv.global_step)
        if self._sv.summary_writer and self._sv.global_step is not None:
            self._sv.summary_writer.add_session_log(event_pb2.SessionLog(
                status=event_pb2.SessionLog.CHECKPOINT, checkpoint_path=self._sv.save_path),
                _step_of(self._sess, self._sv.global_step))


#: the names this module gives ``tf.*`` (published by the standard plugin's shell_api)
API: dict[str, Any] = {"train.Supervisor": Supervisor}
