"""Per-device resource managers: containers of variables, queues and accumulators.

Resources outlive steps and sessions: they belong to the worker's device, keyed by
(container, name). ``Session.reset(target, containers)`` clears containers.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from ..base import errors

__all__ = ["ResourceMgr", "VarRef", "DEFAULT_CONTAINER"]

DEFAULT_CONTAINER = "localhost"


class VarRef:
    """The persistent tensor behind a ``VariableV2`` node (a TF1 reference tensor).

    ``value`` is None until assigned. A value somebody else holds is never mutated in
    place: an assignment stores a new array, so readers of the old value keep a
    consistent snapshot. An optimizer's update may write the value in place when the
    variable is its only holder (see ``training_ops``): it sets ``writing`` (under
    ``lock``) before it checks that, and :meth:`read` waits for the lock while
    ``writing`` is set, so a reader gets the value before or after the update, never
    half of it.
    """

    __slots__ = ("name", "value", "lock", "dtype", "shape", "writing")

    def __init__(self, name: str, dtype: Any = None, shape: Any = None):
        self.name = name
        self.value: Any = None
        self.lock = threading.Lock()
        self.dtype = dtype
        self.shape = shape
        #: an update is writing ``value`` in place (readers wait for ``lock``)
        self.writing = False

    def read(self) -> Any:
        v = self.value
        if self.writing:  # (read after ``value``: see the class docstring)
            with self.lock:
                v = self.value
        if v is None:
            raise errors.FailedPreconditionError(
                None, None, f"Attempting to use uninitialized value {self.name}")
        return v

    def __repr__(self) -> str:
        return f"<VarRef {self.name} {'uninitialized' if self.value is None else ''}>"


class ResourceMgr:
    """Named resources of one device, grouped in containers."""

    def __init__(self, device_name: str = ""):
        self.device_name = device_name
        self._lock = threading.Lock()
        self._containers: dict[str, dict[str, Any]] = {}

    def lookup_or_create(self, container: str, name: str, create: Callable[[], Any]) -> Any:
        c = container or DEFAULT_CONTAINER
        res = self._containers.get(c)
        if res is not None:
            r = res.get(name)
            if r is not None:
                return r
        with self._lock:
            res = self._containers.setdefault(c, {})
            r = res.get(name)
            if r is None:
                r = res[name] = create()
            return r

    def lookup(self, container: str, name: str) -> Any:
        c = container or DEFAULT_CONTAINER
        r = self._containers.get(c, {}).get(name)
        if r is None:
            raise errors.NotFoundError(None, None, f"Resource {c}/{name} does not exist on "
                                       f"device {self.device_name}")
        return r

    def delete(self, container: str, name: str) -> None:
        with self._lock:
            self._containers.get(container or DEFAULT_CONTAINER, {}).pop(name, None)

    def cleanup(self, container: str | None) -> None:
        """Drop every resource of ``container`` (all containers if None)."""
        with self._lock:
            if container is None:
                items = list(self._containers.values())
                self._containers.clear()
            else:
                items = [self._containers.pop(container or DEFAULT_CONTAINER, {})]
        for group in items:
            for r in group.values():
                close = getattr(r, "close_resource", None)
                if close is not None:
                    close()

    def containers(self) -> list[str]:
        return list(self._containers)

    def names(self, container: str | None = None) -> list[str]:
        c = container or DEFAULT_CONTAINER
        return list(self._containers.get(c, {}))
