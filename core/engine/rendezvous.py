"""Rendezvous: step-scoped mailboxes through which partitions exchange tensors.

A ``_Send`` kernel puts a tensor under a key; the matching ``_Recv`` takes it, whether it
asks before or after the send. Keys follow TF's form::

    <send device>;<send device incarnation, hex>;<recv device>;<tensor name>;<frame>:<iter>

Inside a loop the last part names the frame instance and iteration (the root frame is
``0:0``; see :class:`FrameRendezvous`). Sends never block. Aborting a rendezvous (the step failed or was cancelled) wakes every
waiting receiver with the step's error, makes later sends and receives fail at once,
and drops every entry, so nothing outlives its step.
"""
from __future__ import annotations

import threading
from collections import deque
from typing import Any, Callable, Iterable, Sequence

from ..base import errors

__all__ = ["Rendezvous", "RendezvousMgr", "make_key", "with_frame", "FrameRendezvous"]

RecvCallback = Callable[[Any, "BaseException | None"], None]


def make_key(send_device: str, incarnation: int, recv_device: str, tensor_name: str,
             frame_id: int = 0, iter_id: int = 0) -> str:
    """A rendezvous key in TF's layout."""
    return (f"{send_device};{incarnation & 0xffffffffffffffff:016x};{recv_device};"
            f"{tensor_name};{frame_id}:{iter_id}")


def with_frame(key: str, frame_id: int, iter_id: int) -> str:
    """``key`` with its ``frame:iter`` part replaced (a transfer inside a loop: one
    key per frame instance and iteration)."""
    return f"{key.rpartition(';')[0]};{frame_id}:{iter_id}"


class FrameRendezvous:
    """A step's rendezvous as seen from one iteration of one loop frame instance: every
    key gets that frame id and iteration, so each iteration's transfers pair up."""

    __slots__ = ("_inner", "_suffix")

    def __init__(self, inner: Any, frame_id: int, iter_id: int):
        self._inner = inner
        self._suffix = f";{frame_id}:{iter_id}"

    def _key(self, key: str) -> str:
        return key.rpartition(";")[0] + self._suffix

    def send(self, key: str, value: Any) -> None:
        """Send under ``key`` re-keyed to this frame and iteration."""
        self._inner.send(self._key(key), value)

    def recv_async(self, key: str, callback: RecvCallback) -> None:
        """Receive ``key`` re-keyed to this frame and iteration."""
        self._inner.recv_async(self._key(key), callback)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class Rendezvous:
    """The mailboxes of one step (in-process)."""

    __slots__ = ("_lock", "_values", "_waiters", "_error", "step_id")

    def __init__(self, step_id: int = 0):
        self.step_id = step_id
        self._lock = threading.Lock()
        self._values: dict[str, deque[Any]] = {}
        self._waiters: dict[str, deque[RecvCallback]] = {}
        self._error: BaseException | None = None

    def send(self, key: str, value: Any) -> None:
        """Deliver ``value`` under ``key`` (never blocks).

        :raises OpError: the step's error, if the rendezvous was aborted
        """
        with self._lock:
            if self._error is not None:
                raise self._error
            ws = self._waiters.get(key)
            if ws:
                cb = ws.popleft()
                if not ws:
                    del self._waiters[key]
            else:
                self._values.setdefault(key, deque()).append(value)
                return
        cb(value, None)

    def recv_async(self, key: str, callback: RecvCallback) -> None:
        """Call ``callback(value, None)`` once ``key`` has a value (perhaps right now),
        or ``callback(None, error)`` if the rendezvous is aborted first."""
        with self._lock:
            err = self._error
            if err is None:
                vs = self._values.get(key)
                if vs:
                    value = vs.popleft()
                    if not vs:
                        del self._values[key]
                else:
                    self._waiters.setdefault(key, deque()).append(callback)
                    return
        if err is not None:
            callback(None, err)
        else:
            callback(value, None)

    def abort(self, error: BaseException) -> None:
        """Fail every waiter with ``error`` and refuse further traffic."""
        with self._lock:
            if self._error is not None:
                return
            self._error = error
            waiters = [cb for q in self._waiters.values() for cb in q]
            self._waiters.clear()
            self._values.clear()
        for cb in waiters:
            cb(None, error)

    def withdraw(self, key: str, callback: RecvCallback) -> bool:
        """Take back a receive still waiting under ``key`` (a later send then stays in
        the mailbox); False if a send or an abort already took it."""
        with self._lock:
            q = self._waiters.get(key)
            if q is None or not any(x is callback for x in q):
                return False
            q.remove(callback)
            if not q:
                del self._waiters[key]
            return True

    def take_ready(self, keys: Sequence[str], all_or_none: bool = False
                   ) -> list[tuple[int, Any]]:
        """Without waiting: remove and return one value of each key of ``keys`` that
        has one, as ``(index in keys, value)`` (with ``all_or_none``, nothing unless
        every key has one); raises the step's error if aborted."""
        out: list[tuple[int, Any]] = []
        with self._lock:
            if self._error is not None:
                raise self._error
            values = self._values
            if all_or_none and not all(values.get(k) for k in keys):
                return out
            for i, key in enumerate(keys):
                vs = values.get(key)
                if vs:
                    out.append((i, vs.popleft()))
                    if not vs:
                        del values[key]
        return out

    def holds(self, keys: Iterable[str], accept: Callable[[Any], bool] | None = None
              ) -> bool:
        """Whether every key of ``keys`` has a value waiting (and the step is live);
        with ``accept``, also whether it accepts each key's first value."""
        with self._lock:
            values = self._values
            if self._error is not None:
                return False
            if accept is None:
                return all(values.get(k) for k in keys)
            for k in keys:
                vs = values.get(k)
                if not vs or not accept(vs[0]):
                    return False
            return True

    def has_values(self) -> bool:
        """Whether a tensor was sent and not yet received."""
        return bool(self._values)

    def take_values(self, select: Callable[[str], bool]) -> list[tuple[str, Any]]:
        """Remove and return every undelivered ``(key, value)`` whose key ``select``
        accepts."""
        out: list[tuple[str, Any]] = []
        with self._lock:
            for key in [k for k in self._values if select(k)]:
                out.extend((key, v) for v in self._values.pop(key))
        return out

    def __len__(self) -> int:
        """Entries still held: undelivered values plus waiting receivers."""
        with self._lock:
            return sum(len(q) for q in self._values.values()) + \
                sum(len(q) for q in self._waiters.values())


class RendezvousMgr:
    """A worker's rendezvous per in-flight step; a step's entry is removed when the
    step ends, whatever way it ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._table: dict[int, Rendezvous] = {}

    def find_or_create(self, step_id: int) -> Rendezvous:
        """The step's rendezvous, made on first use (a tensor may arrive before the
        step starts here)."""
        with self._lock:
            r = self._table.get(step_id)
            if r is None:
                r = self._table[step_id] = Rendezvous(step_id)
            return r

    def get(self, step_id: int) -> Rendezvous | None:
        """The step's rendezvous, if it has one."""
        return self._table.get(step_id)

    def pop(self, step_id: int) -> Rendezvous | None:
        """Forget the step's rendezvous (without aborting it); returns it."""
        with self._lock:
            return self._table.pop(step_id, None)

    def pop_if_empty(self, step_id: int) -> None:
        """Forget the step's rendezvous if it holds nothing any more."""
        with self._lock:
            r = self._table.get(step_id)
            if r is not None and len(r) == 0:
                del self._table[step_id]

    def cleanup(self, step_id: int) -> None:
        """Forget the step's rendezvous now that the step is over; if it still holds
        entries, abort it, so that no receive whose send never came waits on."""
        with self._lock:
            r = self._table.pop(step_id, None)
        if r is not None and len(r):
            r.abort(errors.AbortedError(None, None, f"step {step_id} is over"))

    def abort_all(self, error: BaseException) -> None:
        """Abort every in-flight step's rendezvous with ``error``."""
        with self._lock:
            rs = list(self._table.values())
        for r in rs:
            r.abort(error)

    def __len__(self) -> int:
        return len(self._table)
