"""Device functions for replicated training (``tf.train.replica_device_setter``).

:func:`replica_device_setter` returns a function for ``tf.device``: variables (and the
other stateful "ps ops") go to the parameter-server job, one task chosen per op by a
strategy, and every other op goes to the worker device. Fields an op already names in
its own device (from an inner ``tf.device`` or an explicit device) are kept; the
setter only fills the rest, as TF 1.15 does.

Strategies are callables ``op -> ps task index``: :class:`_RoundRobinStrategy` (the
default) cycles through the tasks; :class:`GreedyLoadBalancingStrategy` puts each op on
the least-loaded task so far, with the load given by a function such as
:func:`byte_size_load_fn`.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..distributed.cluster import ClusterSpec
from ..base.device_spec import DeviceSpec
from ..base.tensor_shape import as_shape

__all__ = ["replica_device_setter", "GreedyLoadBalancingStrategy", "byte_size_load_fn",
           "STANDARD_PS_OPS"]

_log = logging.getLogger("flowrt.device_setter")

#: Op types placed on the ps job by default (TF 1.15's list).
STANDARD_PS_OPS: tuple[str, ...] = (
    "Variable", "VariableV2", "AutoReloadVariable", "MutableHashTable",
    "MutableHashTableV2", "MutableHashTableOfTensors", "MutableHashTableOfTensorsV2",
    "MutableDenseHashTable", "MutableDenseHashTableV2", "VarHandleOp",
    "BoostedTreesEnsembleResourceHandleOp", "BoostedTreesQuantileStreamResourceHandleOp",
    "ResourceConditionalAccumulator", "DecisionTreeResource")


def _op_type(op: Any) -> str:
    """The op type of an Operation (``.type``) or a NodeDef (``.op``)."""
    t = getattr(op, "type", None)
    return t if isinstance(t, str) else op.op


class _RoundRobinStrategy:
    """Cycles through ps tasks ``0, 1, ..., num_tasks - 1, 0, ...`` (the default)."""

    def __init__(self, num_tasks: int):
        self._num_tasks = num_tasks
        self._next_task = 0

    def __call__(self, unused_op: Any) -> int:
        """The ps task for the next ps op."""
        task = self._next_task
        self._next_task = (task + 1) % self._num_tasks
        return task


class GreedyLoadBalancingStrategy:
    """Puts each ps op on the ps task with the least load so far (lowest index on
    ties), then adds ``load_fn(op)`` to that task's load.

    Greedy placement depends on the order ops are created in, so every replica must
    build its variables in the same order (as with round robin). Use as the
    ``ps_strategy`` of :func:`replica_device_setter`, e.g. with
    :func:`byte_size_load_fn` to balance variable bytes.

    :param num_tasks: number of ps tasks
    :param load_fn: ``op -> number``, in any consistent unit
    """

    def __init__(self, num_tasks: int, load_fn: Callable[[Any], float]):
        self._num_tasks = num_tasks
        self._load_fn = load_fn
        self._ps_loads = np.zeros(num_tasks)

    @property
    def loads(self) -> list[float]:
        """The load placed on each ps task so far."""
        return self._ps_loads.tolist()

    def __call__(self, op: Any) -> int:
        """The least-loaded ps task for ``op``."""
        task = int(np.argmin(self._ps_loads))
        self._ps_loads[task] += self._load_fn(op)
        return task


def byte_size_load_fn(op: Any) -> int:
    """Bytes in ``op``'s single output: elements of its static shape times the dtype's
    size (for ``GreedyLoadBalancingStrategy``).

    Meant for variable ops. An output whose shape is not known yet falls back to the
    op's ``shape`` attr, as a variable's is when device functions see it.

    :raises ValueError: if ``op`` does not have exactly one output, or its shape is not
        fully defined.
    """
    if len(op.outputs) != 1:
        raise ValueError(f"Op {op} must have a single output")
    output = op.outputs[0]
    shape = output.get_shape()
    if not shape.is_fully_defined():
        shape = as_shape(op.get_attr("shape"))
    shape.assert_is_fully_defined()
    return shape.num_elements() * output.dtype.size


class _ReplicaDeviceChooser:
    """The device function :func:`replica_device_setter` returns (its bound method)."""

    def __init__(self, ps_tasks: int, ps_device: str | None, worker_device: str | None,
                 merge_devices: bool, ps_ops: Sequence[str],
                 ps_strategy: Callable[[Any], int]):
        self._ps_tasks = ps_tasks
        self._ps_device = ps_device
        self._worker_device = worker_device
        self._merge_devices = merge_devices
        self._ps_ops = frozenset(ps_ops)
        self._ps_strategy = ps_strategy

    def device_function(self, op: Any) -> str:
        """The device string for ``op`` (an Operation or a NodeDef)."""
        if not self._merge_devices and op.device:
            return op.device
        current = DeviceSpec.from_string(op.device or "")
        if self._ps_tasks and self._ps_device and _op_type(op) in self._ps_ops:
            ps = DeviceSpec.from_string(self._ps_device)
            # The task is chosen only when the op's own job (if any) is the ps job;
            # an op pinned to another job keeps its job and gets no ps task.
            if ps.job and (not current.job or current.job == ps.job):
                ps = ps.replace(task=self._ps_strategy(op))
            return ps.make_merged_spec(current).to_string()
        worker = DeviceSpec.from_string(self._worker_device or "")
        return worker.make_merged_spec(current).to_string()


def replica_device_setter(ps_tasks: int = 0, ps_device: str | None = "/job:ps",
                          worker_device: str | None = "/job:worker",
                          merge_devices: bool = True, cluster: Any = None,
                          ps_ops: Sequence[str] | None = None,
                          ps_strategy: Callable[[Any], int] | None = None
                          ) -> Callable[[Any], str] | None:
    """A device function for ``tf.device`` that spreads ps ops over ps tasks.

    Ops whose type is in ``ps_ops`` (default :data:`STANDARD_PS_OPS`: variables and
    hash tables) get ``ps_device`` with the task ``ps_strategy(op)`` (round robin by
    default); all other ops get ``worker_device``. With ``merge_devices`` (the
    default), fields the op already has (job, task, device type and index) win and the
    setter fills only the unset ones; without it, an op with any device is left alone.

    :param ps_tasks: number of ps tasks; ignored when ``cluster`` is given
    :param ps_device: the ps device (job), e.g. ``"/job:ps"``; empty: no ps placement
    :param worker_device: the device of all other ops, e.g.
        ``"/job:worker/task:0/device:GPU:0"``; empty: left unset
    :param merge_devices: merge with an op's device rather than skip ops that have one
    :param cluster: a ClusterSpec, dict or ClusterDef; the number of ps tasks is the
        size of ``ps_device``'s job in it
    :param ps_ops: op types to put on ps tasks
    :param ps_strategy: ``op -> task index`` for each ps op
    :returns: the device function, or None when there are no ps tasks (also when
        ``cluster`` has no job named like ``ps_device``'s)
    :raises TypeError: for a bad ``cluster`` or a ``ps_strategy`` that is not callable
    """
    if cluster is not None:
        spec = (cluster if isinstance(cluster, ClusterSpec) else ClusterSpec(cluster)
                ).as_dict()
        ps_job = DeviceSpec.from_string(ps_device).job if ps_device else None
        if ps_job not in spec or spec[ps_job] is None:
            return None
        ps_tasks = len(spec[ps_job])
    if ps_tasks == 0:
        return None
    if ps_ops is None:
        ps_ops = list(STANDARD_PS_OPS)
    if not merge_devices:
        _log.warning("replica_device_setter(merge_devices=False) is deprecated: ops "
                     "that already have a device keep it unmerged")
    if ps_strategy is None:
        ps_strategy = _RoundRobinStrategy(ps_tasks)
    if not callable(ps_strategy):
        raise TypeError("ps_strategy must be callable")
    chooser = _ReplicaDeviceChooser(ps_tasks, ps_device, worker_device, merge_devices,
                                    ps_ops, ps_strategy)
    return chooser.device_function
