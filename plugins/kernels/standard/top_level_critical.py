"""``tf.CriticalSection`` (TF 1.15 graph form) and its ops: ``MutexV2`` (a mutex resource),
``MutexLock`` (waits for the mutex, outputs a lock) and ``ConsumeMutexLock`` (releases it).

``CriticalSection.execute(fn)`` builds ``fn``'s ops under a control dependency on a
``MutexLock``, and a ``ConsumeMutexLock`` after ``fn``'s results; the results are
returned through identities that run after the release. Two executions of one critical
section (in concurrent ``Session.run`` calls, or in two sessions sharing the mutex by
``shared_name``) therefore never overlap. ``MutexLock`` is an asynchronous kernel: a step
waiting for the mutex parks without holding a thread, and a step that fails or is
cancelled while holding or waiting for the lock gives it up (``StepContext.on_abort``).

Difference from TF: TF releases the lock when the last copy of its variant tensor dies;
here ``ConsumeMutexLock`` releases it, so fetching an intermediate tensor of ``fn``
without the execution's outputs keeps the lock until the step aborts. TF's
``exclusive_resource_access`` check looks at resource-typed inputs only; flowrt's
variables are reference variables, so (as for TF's ref variables) it finds none.
"""
from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any

from flowrt import errors
from flowrt.graph import (Operation, Tensor, apply_op, colocate_with, control_dependencies,
                          get_default_graph, name_scope)
from flowrt.op_registry import OpDef

from ._common import ks, scalar_shape
from .data_flow_ops import _handle_kernel
from .control_flow_ops import _flatten, _pack_like

__all__ = ["CriticalSection"]

ks.op(
    OpDef("MutexV2", outputs=["resource: resource"],
          attrs=["container: string = ''", "shared_name: string = ''"],
          shape_fn=scalar_shape, is_stateful=True, doc="A mutex resource."),
    OpDef("MutexLock", inputs=["mutex: resource"], outputs=["mutex_lock: variant"],
          shape_fn=scalar_shape, is_stateful=True,
          doc="Waits for the mutex and holds it until its lock is consumed."),
    OpDef("ConsumeMutexLock", inputs=["mutex_lock: variant"], outputs=[],
          shape_fn=lambda op: [], is_stateful=True, doc="Releases a mutex lock."),
)
ks.not_differentiable("MutexV2", "MutexLock", "ConsumeMutexLock")


class _Lock:
    """One holding of a mutex (the value of a MutexLock output)."""

    __slots__ = ("mutex", "released")

    def __init__(self, mutex: "_Mutex"):
        self.mutex = mutex
        self.released = False

    def release(self) -> None:
        self.mutex.release(self)


class _Mutex:
    """A mutex granted in request order to waiting steps (TF's Mutex resource)."""

    def __init__(self, name: str):
        self.name = name
        self._lock = threading.Lock()
        self._held: _Lock | None = None
        self._waiting: collections.deque[list[Any]] = collections.deque()

    def acquire(self, step: Any, done: Callable[..., None]) -> None:
        """Call ``done(lock)`` once the mutex is this step's; ``done(None, error)`` if the
        step aborts first."""
        entry = [step, done, False]  # step, done, withdrawn
        with self._lock:
            if self._held is None:
                lock = self._held = _Lock(self)
            else:
                lock = None
                self._waiting.append(entry)
        if lock is not None:
            self._granted(step, done, lock)
        elif step is not None:
            step.on_abort(lambda err: self._withdraw(entry, err))

    def _granted(self, step: Any, done: Callable[..., None], lock: _Lock) -> None:
        if step is not None:
            step.on_abort(lambda _err: lock.release())
        done(lock)

    def _withdraw(self, entry: list[Any], err: BaseException) -> None:
        with self._lock:
            if entry[2] or entry not in self._waiting:
                return
            entry[2] = True
            self._waiting.remove(entry)
        entry[1](None, errors.CancelledError(
            None, None, f"MutexLock on '{self.name}' was cancelled: {err}"))

    def release(self, lock: _Lock) -> None:
        """Give the mutex to the next waiting step (a second release does nothing)."""
        with self._lock:
            if lock.released or self._held is not lock:
                return
            lock.released = True
            self._held = None
            nxt = None
            while self._waiting:
                entry = self._waiting.popleft()
                if not entry[2]:
                    entry[2] = True
                    nxt = entry
                    self._held = _Lock(self)
                    break
            new = self._held
        if nxt is not None and new is not None:
            self._granted(nxt[0], nxt[1], new)


def _check_mutex(r: Any, name: str) -> None:
    if not isinstance(r, _Mutex):
        raise errors.InvalidArgumentError(
            None, None, f"Resource '{name}' is not a mutex but {type(r).__name__}")


@ks.kernel("MutexV2", device_type="CPU")
def _mutex_kernel(ctx: Any) -> Any:
    return _handle_kernel(ctx, _Mutex, _check_mutex)


@ks.kernel("MutexLock", device_type="CPU", kind="async")
def _mutex_lock_kernel(ctx: Any) -> Any:
    def lock(step: Any, done: Callable[..., None], handle: Any) -> None:
        if not isinstance(handle, _Mutex):
            raise errors.InvalidArgumentError(
                None, None, f"MutexLock: the input is not a mutex handle (got "
                f"{type(handle).__name__})")
        handle.acquire(step, done)

    return lock


@ks.kernel("ConsumeMutexLock", device_type="CPU")
def _consume_kernel(ctx: Any) -> Any:
    def consume(lock: Any) -> None:
        if not isinstance(lock, _Lock):
            raise errors.InvalidArgumentError(
                None, None, f"ConsumeMutexLock: the input is not a mutex lock (got "
                f"{type(lock).__name__})")
        lock.release()

    return consume


_building = threading.local()


def _identity(x: Any) -> Any:
    if isinstance(x, Operation):
        with control_dependencies([x]):
            return apply_op("NoOp")
    if isinstance(x, Tensor):
        return apply_op("Identity", input=x)
    if x is None:
        return None
    return apply_op("Identity", input=x)


class CriticalSection:
    """A critical section (``tf.CriticalSection``): the functions run by :meth:`execute`
    never run at the same time, in any session sharing its mutex.

    ::

        cs = tf.CriticalSection()
        v = tf.Variable(0)
        add = cs.execute(lambda: v.assign_add(1))   # a read-modify-write under the lock
    """

    def __init__(self, name: str | None = None, shared_name: str | None = None,
                 critical_section_def: Any = None, import_scope: str | None = None):
        """Create the mutex (``MutexV2``) in a ``CriticalSection`` name scope; with no
        ``shared_name`` the mutex is shared under the scope's name."""
        if critical_section_def is not None:
            raise NotImplementedError("CriticalSection from a CriticalSectionDef (a "
                                      "MetaGraph collection) is not supported")
        with name_scope(name, "CriticalSection", []) as scope:
            if shared_name is None:
                shared_name = scope
            container = getattr(get_default_graph(), "_container", "") or ""
            self._handle = apply_op("MutexV2", name=scope, shared_name=shared_name,
                                    container=container)

    @property
    def name(self) -> str:
        """The name of the mutex op."""
        return self._handle.op.name

    def execute(self, fn: Callable[[], Any], exclusive_resource_access: bool = True,
                name: str | None = None) -> Any:
        """Run ``fn()`` under the lock: its ops wait for the mutex, and the returned
        structure (tensors or ops) is ready only after the mutex is released.

        :raises ValueError: ``fn`` executes this same critical section (a deadlock)
        """
        active = getattr(_building, "sections", None)
        if active is None:
            active = _building.sections = []
        if any(cs is self for cs in active):
            raise ValueError("Attempting to lock a CriticalSection in which we are "
                             "already running. This is illegal and may cause deadlocks.")
        with name_scope(name, "critical_section_execute", []):
            lock = apply_op("MutexLock", mutex=self._handle)
            active.append(self)
            try:
                with control_dependencies([lock]):
                    r = fn()
            finally:
                active.pop()
            flat = _flatten(r)
            r_flat = [_identity(x) for x in flat if x is not None]
            deps = [t.op if isinstance(t, Tensor) else t for t in r_flat]
            with control_dependencies(deps):
                with colocate_with(self._handle.op):
                    release = apply_op("ConsumeMutexLock", mutex_lock=lock)
            with control_dependencies([release]):
                outs = [_identity(x) for x in flat]
            return _pack_like(r, outs)


ks.export("CriticalSection", CriticalSection)
