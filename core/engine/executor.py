"""Runs one partition of a step: compiled once into a flat plan, then run many times.

Compilation (:mod:`.plan`) resolves every kernel, assigns every tensor a slot and
precomputes each node's input slots, successors and pending count. :class:`Executor`
picks, once, which of three schedulers runs that plan:

- *straight-line* (:mod:`.straight_line`): when no kernel is asynchronous and at most one
  is expensive, the plan is generated as one Python function whose body is a call per
  node in topological order -- no scheduling work at all per step;
- *dataflow* (:mod:`.dataflow`): pending counts and a ready queue; kernels run inline on
  the caller's thread, except that with ``inter_op_parallelism_threads > 1`` expensive
  ones go to the inter-op pool while others proceed; asynchronous kernels (Recv,
  blocking queue ops) complete through a callback. Traced steps
  (``RunOptions.trace_level``) use this scheduler and record per-node times;
- *frames* (:mod:`.frames`): the dataflow scheduler per frame instance and iteration,
  for plans with loops.

The first error aborts the step: no further nodes start, and the error names the node,
its op and its device.

The names other modules import from here (``StepContext``, ``DEAD`` ...) live in those
modules; this one re-exports them, and ``_run_frames``, ``_run_on_pool`` and
``_run_on_pool_framed`` are looked up here at each step, so replacing them here (as the
test suite's probe does) sees every run.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

import numpy as np

from ..base import errors
from ..plugin.resources import VarRef
# (names the worker, plugins and tests import from here, kept where they were)
from .dataflow import (_init_worker_thread, _run_on_pool, inter_op_pool,  # noqa: F401
                       run_dataflow)
from .frames import FRAME_OPS, _FramePlan, _run_on_pool_framed, run_frames
from .ir import GraphIR, Node
from .plan import (DEAD, NodeStat, Plan, SessionState, StepContext, _CNode,  # noqa: F401
                   _Dead, op_error_for)
from .waiting import WaitFacts
from .straight_line import RECV_WAIT_S, _take_now, failing_node, generate  # noqa: F401

__all__ = ["Executor", "StepContext", "op_error_for", "SessionState", "NodeStat", "DEAD"]


class Executor(Plan):
    """A compiled partition and the scheduler that runs it.

    :param ir: the partition's nodes (``_Arg`` nodes take ``args`` by their ``index``)
    :param fetches: endpoints whose values :meth:`run` returns, in order
    :param device_of: ``node -> Device`` (the node's assigned device)
    :param runtime: the runtime whose kernels are used
    :param session_state: the owning session's state (stateful kernels)
    :param inter_op_threads: pool size for expensive kernels (0: one per core)
    :param allow_straight_line: False: never generate straight-line code
    """

    def __init__(self, ir: GraphIR, fetches: Sequence[tuple[str, int]],
                 device_of: Callable[[Node], Any], runtime: Any,
                 session_state: SessionState | None = None, inter_op_threads: int = 0,
                 allow_straight_line: bool = True):
        """Compile the plan, then choose once which scheduler runs it (and generate
        the straight-line code where that one can)."""
        self.inter_op_threads = inter_op_threads
        super().__init__(ir, fetches, device_of, runtime, session_state)
        #: how a step of this plan can wait (the one analysis the master and the
        #: worker use too)
        self.wait_facts = WaitFacts.of((c.node.type, c.kind, c.expensive)
                                       for c in self.nodes)
        n_exp = self.wait_facts.expensive
        # The inter-op pool pays only when asked for (inter_op_parallelism_threads > 1):
        # numpy's heavy kernels are already multithreaded inside (BLAS), and on a few
        # cores running them side by side measured slower than one after another.
        # (Set before the frame plan, which reads it for every expensive node.)
        self.use_pool = inter_op_threads > 1 and n_exp >= 2
        self.frames: _FramePlan | None = None
        if any(c.node.type in FRAME_OPS for c in self.nodes):
            self.frames = _FramePlan(self, fetches)
        self.has_async = self.wait_facts.asynchronous
        # dead tensors appear with control flow (Switch/Merge) and can arrive through a
        # _Recv from a partition that has it: such plans check for them
        self.has_dead = self.wait_facts.branches or self.wait_facts.receives
        self.straight_line = (allow_straight_line and not self.has_async and
                              not self.use_pool and not self.has_dead and self.frames is None)
        self._fn: Callable[..., list[Any]] | None = None
        self._code: Any = None
        self._lines: list[int] = []
        if self.straight_line:
            self._fn, self._code, self._lines = generate(self)
        #: a straight-line variant for steps whose receives are all already in the
        #: step's rendezvous (the caller checks): each ``_Recv`` takes its value
        #: synchronously. Only when receives are the sole asynchronous kernels.
        self._fn_ready: Callable[..., list[Any]] | None = None
        self._ready_code: Any = None
        self._ready_lines: list[int] = []
        if (allow_straight_line and self.has_async and not self.use_pool and
                self.frames is None and  # (dead values only through receives: checked)
                not self.wait_facts.branches and not self.wait_facts.waits):
            # (never together with ``_fn``: that one needs no asynchronous kernel)
            self._fn_ready, self._ready_code, self._ready_lines = \
                generate(self, recvs_ready=True)
        #: an accelerator's ``activate()`` (its device and stream made current), entered
        #: once around a straight-line run of a partition on that one device
        self._activate: Callable[[], Any] | None = None
        if len(self.devices) == 1:
            self._activate = getattr(self.devices[0], "activate", None)

    @property
    def can_run_ready(self) -> bool:
        """Whether :meth:`run` has a straight-line variant for ``recvs_ready`` steps."""
        return self._fn_ready is not None

    def run(self, args: Sequence[Any], step: StepContext,
            stats: list[NodeStat] | None = None, timeout: float | None = None,
            recvs_ready: bool = False) -> list[Any]:
        """Run one step; returns the fetch values (references are read).

        :param timeout: seconds a blocked step may wait before it is aborted with
            DeadlineExceededError (None: no limit)
        :param recvs_ready: the caller has checked that every value this partition
            receives is already in the step's rendezvous, none of them dead: the step
            then runs straight through (see :attr:`can_run_ready`)
        """
        if self._activate is None:
            for a in args:  # feeds are numpy arrays, unless one is a GPU array
                if type(a) is not np.ndarray:
                    args = _host_args(args)
                    break
        ready = recvs_ready and stats is None and self._fn_ready is not None
        if ready or (self._fn is not None and stats is None):
            out = self._run_straight(args, step, ready)
        elif self.frames is not None:
            out = _run_frames(self, args, step, stats, timeout)
        else:
            out = self._run_dataflow(args, step, stats, timeout)
        if self.has_dead:
            for k, v in enumerate(out):
                if v is DEAD:
                    raise errors.InvalidArgumentError(
                        None, None, f"Retval[{k}] does not have value: the fetched tensor "
                        "is on the untaken side of a conditional")
        if True in self.fetch_is_ref:
            out = [v.read() if r and isinstance(v, VarRef) else v
                   for v, r in zip(out, self.fetch_is_ref)]
        return out

    def _run_straight(self, args: Sequence[Any], step: StepContext,
                      ready: bool = False) -> list[Any]:
        """Run a generated straight-line function (``ready``: the variant whose receives
        take values already there); an error names the node it came from."""
        if ready:
            fn, code, lines = self._fn_ready, self._ready_code, self._ready_lines
        else:
            fn, code, lines = self._fn, self._code, self._lines
        try:
            if self._activate is not None:
                with np.errstate(all="ignore"), self._activate():
                    return fn(args, step)  # type: ignore[misc]
            with np.errstate(all="ignore"):
                return fn(args, step)  # type: ignore[misc]
        except Exception as e:
            c = failing_node(self.nodes, sys.exc_info()[2], code, lines)
            if c is None:
                raise
            err = op_error_for(e, c.node, c.device_name)
            step.abort(err)
            raise err from (None if isinstance(e, errors.OpError) else e)

    def _run_dataflow(self, args: Sequence[Any], step: StepContext,
                      stats: list[NodeStat] | None, timeout: float | None = None
                      ) -> list[Any]:
        """Run one step on the dataflow scheduler (:func:`.dataflow.run_dataflow`)."""
        return run_dataflow(self, args, step, stats, timeout, _run_on_pool)


def _run_frames(ex: Executor, args: Sequence[Any], step: StepContext,
                stats: list[NodeStat] | None, timeout: float | None) -> list[Any]:
    """Run one step of a plan with loops (:func:`.frames.run_frames`)."""
    return run_frames(ex, args, step, stats, timeout, _run_on_pool_framed)


def _host_args(args: Sequence[Any]) -> list[Any]:
    """A partition outside any GPU gets GPU feeds (CuPy arrays) in host memory."""
    return [a.get() if hasattr(a, "__cuda_array_interface__") and hasattr(a, "get") else a
            for a in args]
