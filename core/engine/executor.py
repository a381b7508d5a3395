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
from ..plugin.device import DeviceType, host_array, takes_host_arrays
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
        #: no node computes anything that could raise a floating-point warning (it
        #: only moves values: a variable read and its send, say): a straight-line run
        #: needs no ``np.errstate``, which costs more than such a step's kernels
        self._moves_only = all(c.node.type in _MOVES_ONLY for c in self.nodes)
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
        self._feeds_in, self._fetches_out = _host_crossings(self)
        #: feeds that always go through a device (its ``from_host``) ...
        self._feeds_always = any(not f[3] for f in self._feeds_in)
        #: ... and those that do only when they are not numpy arrays
        self._feeds_host = [f[0] for f in self._feeds_in if f[3]]

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
        if self._feeds_always:
            args = self._feed_through_devices(args)
        else:
            for i in self._feeds_host:  # numpy arrays stay as they are
                if type(args[i]) is not np.ndarray:
                    args = self._feed_through_devices(args)
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
        if self._fetches_out:
            out = self._fetch_through_devices(out)
        return out

    def _feed_through_devices(self, args: Sequence[Any]) -> list[Any]:
        """The step's feeds as the nodes reading them take them: a host array through
        the ``from_host`` of a device whose kernels take its own arrays; an array a
        device type holds (a fed GPU array) as it is on a device of that type; any
        other value first through :func:`~flowrt.plugin.device.host_array`."""
        args = list(args)
        for i, dev, holds, host_ok in self._feeds_in:
            v = args[i]
            if type(v) is not np.ndarray:
                if holds is not None and holds(v):
                    continue
                v = host_array(v, runtime=self.runtime)
            args[i] = v if host_ok else dev.from_host(v)
        return args

    def _fetch_through_devices(self, out: list[Any]) -> list[Any]:
        """The fetched values made on devices other than the CPU, through their
        ``to_host``: callers (the session, the wire) always get host arrays."""
        out = list(out)
        for k, dev in self._fetches_out:
            v = out[k]
            if type(v) is np.ndarray or isinstance(v, _HOST_OUT):
                continue
            try:
                out[k] = host_array(v, dev)
            except errors.OpError as e:
                raise type(e)(None, None, f"fetch {k} of the step, from {dev.name}: "
                              f"{e.message}") from e
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
            if self._moves_only:
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


#: ops that only move values (no arithmetic, so no floating-point warning)
_MOVES_ONLY = frozenset({"_Arg", "_Retval", "_Send", "_Recv", "_HostSend", "_HostRecv",
                         "Const", "Identity", "IdentityN", "StopGradient", "NoOp",
                         "VariableV2", "Variable", "VarHandleOp", "ReadVariableOp",
                         "Placeholder", "PlaceholderWithDefault"})

#: fetched values that are in host memory already, whatever device made them
_HOST_OUT = (np.generic, bytes, str, int, float, bool, type(None))


def _host_crossings(plan: Plan) -> tuple[list[tuple[int, Any, Any, bool]],
                                         list[tuple[int, Any]]]:
    """Where values of ``plan`` cross between the host and its devices, decided once:
    ``(feed index, device, its type's holds or None, takes host arrays)`` for each feed
    a node reads (every feed may be a device array; on a device whose kernels take only
    its own arrays a host one goes through ``from_host``), and ``(fetch position,
    device)`` for each fetch a node on a device other than the CPU makes (it goes
    through that device's ``to_host``)."""
    by_name = {d.name: d for d in plan.devices}
    types = plan.runtime.device_types if plan.runtime is not None else {}
    feeds: dict[int, tuple[int, Any, Any, bool]] = {}
    made_by: dict[int, Any] = {}
    for c in plan.nodes:
        dev = by_name[c.device_name]
        if c.kind == "arg":
            dt = types.get(dev.device_type)
            holds = None if dt is None or type(dt).holds is DeviceType.holds else dt.holds
            feeds.setdefault(c.arg_index, (c.arg_index, dev, holds, takes_host_arrays(dev)))
        if dev.device_type != "CPU":
            for slot in range(c.out_base, c.out_base + c.n_out):
                made_by[slot] = dev
    fetches = [(k, made_by[slot]) for k, slot in enumerate(plan.fetch_slots)
               if slot in made_by]
    return sorted(feeds.values(), key=lambda f: f[0]), fetches
