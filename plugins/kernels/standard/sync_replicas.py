"""``tf.train.SyncReplicasOptimizer``: synchronous data-parallel training across workers.

Every worker computes gradients on its own batch and puts them in one
ConditionalAccumulator per variable, on the variable's parameter server, tagged with
the global step the worker started from (its *local step*). The chief's queue runner
takes ``replicas_to_aggregate`` gradients from each accumulator (their mean), applies
them, advances the global step and puts one token per worker into the token queue. A
worker waits for a token before its next step; the token carries the new global step,
which becomes its local step. Gradients computed from an older step are stale: the
accumulator drops them.

What happens when a worker misbehaves (docs/training.md has the long form):

- *a slow worker*: every step aggregates ``replicas_to_aggregate`` fresh gradients, but
  tokens belong to no worker in particular: while a slow worker computes, the others
  take the tokens it has not claimed and supply the step's gradients, and its late
  gradient is dropped as stale. Only a worker already waiting for a token gets one of
  the next step's; backup workers (``total_num_replicas > replicas_to_aggregate``) add
  tokens to every step;
- *a worker that finishes early*: a worker always holds the token of its next step.
  Its hook's ``end()`` puts that token back, so a live worker takes it and computes
  the missing gradient: training continues at the pace of the live workers (TF's
  workers keep the token and the step never completes);
- *a worker that dies*: its token is lost (held, or about to be taken by its step that
  is still pending on the ps). When the global step has not moved for
  ``lost_worker_timeout_secs`` while the live workers wait on an empty token queue,
  the chief's hook adds the tokens that the step still needs; a restarted worker
  rejoins at the current global step;
- *the chief finishing*: its hook closes the token queue, so workers waiting for a token
  fail with ``OutOfRangeError``, which ends a ``MonitoredSession`` loop quietly instead
  of hanging (TF's workers hang there);
- *the chief dying*: workers wait for a token until the chief's session is created
  again (it re-initialises the accumulators and tokens), or until
  ``operation_timeout_in_ms``.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.coordinator import QueueRunner
from flowrt.framework.indexed_slices import IndexedSlices
from flowrt.graph import (GraphKeys, Tensor, api_function, colocate_with,
                          control_dependencies, convert_to_tensor, device, name_scope)
from flowrt.monitored_session import SessionRunHook, check_ready
from flowrt.variables import Variable, global_variables, report_uninitialized_variables

from ._common import ks
from .data_flow_ops import ConditionalAccumulator, FIFOQueue
from .optimizers import Optimizer

__all__ = ["SyncReplicasOptimizer"]

_log = logging.getLogger("flowrt")




class SyncReplicasOptimizer(Optimizer):
    """Aggregates the gradients of ``replicas_to_aggregate`` replicas per step.

    :param opt: the optimizer that applies the aggregated gradients
    :param replicas_to_aggregate: gradients averaged per step
    :param total_num_replicas: workers (default ``replicas_to_aggregate``; more means
        backup workers)
    :param lost_worker_timeout_secs: (flowrt) when the global step has not advanced for
        this long while the token queue is empty, the chief adds the tokens a lost
        worker took with it; ``None`` waits forever, as TF does
    """

    def __init__(self, opt: Optimizer, replicas_to_aggregate: int,
                 total_num_replicas: int | None = None, variable_averages: Any = None,
                 variables_to_average: Any = None, use_locking: bool = False,
                 name: str = "sync_replicas", lost_worker_timeout_secs: float | None = 60.0):
        if total_num_replicas is None:
            total_num_replicas = replicas_to_aggregate
        super().__init__(use_locking, name)
        _log.info("SyncReplicasV2: replicas_to_aggregate=%s; total_num_replicas=%s",
                  replicas_to_aggregate, total_num_replicas)
        if variable_averages is not None:
            raise NotImplementedError("SyncReplicasOptimizer: variable_averages is not "
                                      "supported by flowrt")
        self._opt = opt
        self._replicas_to_aggregate = int(replicas_to_aggregate)
        self._total_num_replicas = int(total_num_replicas)
        self._tokens_per_step = max(self._total_num_replicas, self._replicas_to_aggregate)
        self._gradients_applied = False
        self._global_step: Any = None
        self._sync_token_queue: Any = None
        self._chief_queue_runner: QueueRunner | None = None
        self._accumulator_list: list[tuple[Any, str]] = []
        self._close_tokens_op: Any = None
        self._lost_worker_timeout_secs = lost_worker_timeout_secs

    def compute_gradients(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped optimizer's gradients."""
        return self._opt.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars: Any, global_step: Any = None,
                        name: str | None = None) -> Any:
        """Put the gradients into the accumulators and wait for the next token; the
        returned op is the worker's training step."""
        grads_and_vars = list(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("Must supply at least one variable")
        if global_step is None:
            raise ValueError("Global step is required to check staleness")
        self._global_step = global_step
        group = api_function("group")
        assign = api_function("assign")
        fill = api_function("fill")
        train_ops = []
        aggregated_grad: list[Any] = []
        var_list = []
        # the local step lives on this worker (a device setter would send a variable to
        # a parameter server): colocated with an op placed by the current device scope
        local_anchor = api_function("no_op")()
        with colocate_with(local_anchor):
            self._local_step = Variable(0, trainable=False,
                                        collections=[GraphKeys.LOCAL_VARIABLES],
                                        dtype=global_step.dtype.base_dtype,
                                        name="sync_rep_local_step")
        self.local_step_init_op = assign(self._local_step, global_step)
        chief_init_ops = [self.local_step_init_op]
        self.ready_for_local_init_op = report_uninitialized_variables(global_variables())
        with name_scope(name or self._name):
            for grad, var in grads_and_vars:
                var_list.append(var)
                with device(var.device):
                    if grad is None:
                        aggregated_grad.append(None)
                        continue
                    if isinstance(grad, IndexedSlices):
                        # TF aggregates these in a SparseConditionalAccumulator, which
                        # flowrt lacks: the rows are summed into a dense gradient (same
                        # mean; the optimizer then applies it densely).
                        grad = convert_to_tensor(grad)
                    if not isinstance(grad, Tensor):
                        raise TypeError(f"Unsupported gradient type for {var.name}: "
                                        f"{type(grad).__name__}")
                    acc = ConditionalAccumulator(grad.dtype, shape=var.get_shape(),
                                                 shared_name=var.name + "/grad_accum")
                    train_ops.append(acc.apply_grad(grad, local_step=self._local_step))
                    aggregated_grad.append(acc.take_grad(self._replicas_to_aggregate))
                    self._accumulator_list.append((acc, var.device))
            with device(global_step.device), name_scope(""):
                update_op = self._opt.apply_gradients(list(zip(aggregated_grad, var_list)),
                                                      global_step)
            with device(global_step.device), name_scope(""):
                self._sync_token_queue = FIFOQueue(-1, global_step.dtype.base_dtype,
                                                   shapes=(), name="sync_token_q",
                                                   shared_name="sync_token_q")
                dummy_queue = FIFOQueue(1, _dt.int32, shapes=(), name="dummy_queue",
                                        shared_name="dummy_queue")
                with control_dependencies(train_ops):
                    token = self._sync_token_queue.dequeue()
                train_op = assign(self._local_step, token)
                with control_dependencies([update_op]):
                    tokens = fill([self._tokens_per_step], global_step)
                    sync_op = self._sync_token_queue.enqueue_many((tokens,))
                self._chief_queue_runner = QueueRunner(dummy_queue, [sync_op])
                self._close_tokens_op = self._sync_token_queue.close(
                    cancel_pending_enqueues=True, name="close_sync_token_q")
                # a worker that leaves puts back the token of the step it did not make
                self._return_token_op = self._sync_token_queue.enqueue(
                    (self._local_step,), name="return_sync_token")
                # the chief's watchdog: what it reads, and the op adding lost tokens
                self._token_queue_size = self._sync_token_queue.size()
                self._missing_tokens = api_function("placeholder")(_dt.int32, [],
                                                           name="missing_sync_tokens")
                self._add_tokens_op = self._sync_token_queue.enqueue_many(
                    (fill([self._missing_tokens], global_step),), name="add_sync_tokens")
            acc0, dev0 = self._accumulator_list[0]
            with device(dev0):
                self._num_accumulated = acc0.num_accumulated()
            for acc, dev in self._accumulator_list:
                with device(dev):
                    chief_init_ops.append(acc.set_global_step(global_step,
                                                              name="SetGlobalStep"))
            self.chief_init_op = group(*chief_init_ops)
        self._gradients_applied = True
        return train_op

    def get_chief_queue_runner(self) -> QueueRunner:
        """The queue runner the chief runs: aggregate, apply, release tokens."""
        if not self._gradients_applied:
            raise ValueError("Should be called after apply_gradients().")
        return self._chief_queue_runner  # type: ignore[return-value]

    def get_slot(self, *args: Any, **kwargs: Any) -> Any:
        return self._opt.get_slot(*args, **kwargs)

    def variables(self) -> list[Any]:
        return self._opt.variables()

    def get_slot_names(self, *args: Any, **kwargs: Any) -> list[str]:
        return self._opt.get_slot_names(*args, **kwargs)

    def get_init_tokens_op(self, num_tokens: int = -1) -> Any:
        """The op that puts the first tokens in the queue (default:
        ``replicas_to_aggregate`` of them)."""
        if not self._gradients_applied:
            raise ValueError("get_init_tokens_op() should be called after "
                             "apply_gradients().")
        tokens_needed = self._replicas_to_aggregate - self._total_num_replicas
        if num_tokens == -1:
            num_tokens = self._replicas_to_aggregate
        elif num_tokens < tokens_needed:
            raise ValueError(f"Too few tokens to finish the first step: {num_tokens} "
                             f"(given) vs {tokens_needed} (needed)")
        with device(self._global_step.device), name_scope(""):
            if num_tokens > 0:
                tokens = api_function("fill")([num_tokens], self._global_step)
                return self._sync_token_queue.enqueue_many((tokens,))
            return api_function("no_op")(name="no_init_tokens")

    def make_session_run_hook(self, is_chief: bool, num_tokens: int = -1) -> SessionRunHook:
        """The hook that sets up a worker's session (and the chief's queue runner)."""
        return _SyncReplicasOptimizerHook(self, is_chief, num_tokens)


class _SyncReplicasOptimizerHook(SessionRunHook):
    def __init__(self, sync_optimizer: SyncReplicasOptimizer, is_chief: bool,
                 num_tokens: int):
        self._sync_optimizer = sync_optimizer
        self._is_chief = is_chief
        self._num_tokens = num_tokens

    def begin(self) -> None:
        so = self._sync_optimizer
        if not so._gradients_applied:
            raise ValueError("SyncReplicasOptimizer.apply_gradient should be called before "
                             "using the hook.")
        self._ready_for_local_init_op = so.ready_for_local_init_op
        if self._is_chief:
            self._local_init_op = so.chief_init_op
            self._q_runner = so.get_chief_queue_runner()
            self._init_tokens_op = so.get_init_tokens_op(self._num_tokens)
        else:
            self._local_init_op = so.local_step_init_op
            self._q_runner = None
            self._init_tokens_op = None

    def after_create_session(self, session: Any, coord: Any) -> None:
        ok, msg = check_ready(self._ready_for_local_init_op, session,
                         "Model is not ready for SyncReplicasOptimizer local init.")
        if not ok:
            raise RuntimeError("Init operations did not make model ready for "
                               "SyncReplicasOptimizer local_init. Init op: "
                               f"{self._local_init_op.name}, error: {msg}")
        session.run(self._local_init_op)
        if self._init_tokens_op is not None:
            session.run(self._init_tokens_op)
        if self._q_runner is not None:
            self._q_runner.create_threads(session, coord=coord, daemon=True, start=True)
        timeout = self._sync_optimizer._lost_worker_timeout_secs
        if self._is_chief and timeout is not None:
            t = threading.Thread(target=self._watch_tokens, args=(session, coord, timeout),
                                 name="sync_replicas_watchdog", daemon=True)
            coord.register_thread(t)
            t.start()

    def _watch_tokens(self, session: Any, coord: Any, timeout: float) -> None:
        """The chief's watchdog: a step that has not advanced for ``timeout`` seconds
        while the token queue is empty lost a worker's token; add the missing ones."""
        so = self._sync_optimizer
        last, since = None, time.monotonic()
        while not coord.wait_for_stop(min(1.0, timeout / 4)):
            try:
                step, queued, have = session.run(
                    [so._global_step, so._token_queue_size, so._num_accumulated])
                now = time.monotonic()
                if step != last:
                    last, since = step, now
                elif queued == 0 and now - since >= timeout:
                    missing = max(1, so._replicas_to_aggregate - int(have))
                    _log.warning("SyncReplicasOptimizer: global step %d did not advance for "
                                 "%.0f s with no token left: a worker was lost; adding %d "
                                 "token(s)", int(step), now - since, missing)
                    session.run(so._add_tokens_op, {so._missing_tokens: missing})
                    since = now
            except (errors.OpError, RuntimeError):  # the session ended or is recovering
                return

    def end(self, session: Any) -> None:
        if self._is_chief:
            # workers waiting for a token would wait forever: let them fail and stop
            session.run(self._sync_optimizer._close_tokens_op)
        else:
            try:  # the token of the step this worker will not make goes back
                session.run(self._sync_optimizer._return_token_op)
            except errors.OpError:  # the queue is closed: the chief finished
                pass


ks.export("train.SyncReplicasOptimizer", SyncReplicasOptimizer)
