"""Queues and conditional accumulators (TF 1.15's data_flow_ops): FIFOQueue,
PaddingFIFOQueue, RandomShuffleQueue, PriorityQueue, ConditionalAccumulator.

Ops keep TF's names and signatures: the resource-handle family (``FIFOQueueV2``,
``QueueEnqueueV2`` ..., ``ResourceConditionalAccumulator``, ``ResourceAccumulator*``),
which the Python classes emit as TF 1.15 does, and the TF1 reference-handle family
(``FIFOQueue``, ``QueueEnqueue`` ..., ``ConditionalAccumulator``, ``Accumulator*``) so
GraphDefs that use either load. A handle -- resource or ``Ref(string)`` -- carries the
queue or accumulator object itself between nodes.

Queues and accumulators live in the device's resource manager, keyed by (container,
shared_name). Without a shared_name a handle op makes a private one named
``_<id>_<node name>``, as TF does: private to one session, dropped when that session's
kernels go away. With a shared_name every session on the same target sees one object.

Blocking ops (enqueue on a full queue, dequeue on an empty one, a close waiting behind
pending enqueues, take_grad) are ``async`` kernels: they leave an *attempt* with the
queue and return, and the attempt calls ``done`` when it completes, so no thread waits
and the rest of the step keeps running. Attempts are served strictly in arrival order
(a dequeue_many at the head holds the elements it has taken and blocks later dequeues,
as TF's queues do). An attempt whose step is aborted -- its session closed, a run
timeout, another node failing -- is withdrawn and fails with CancelledError.
"""
from __future__ import annotations

import collections
import hashlib
import itertools
import logging
import threading
import types
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.framework.indexed_slices import IndexedSlices
from flowrt.graph import (Operation, Tensor, apply_op, convert_to_tensor, get_default_graph,
                          name_scope)
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import Dimension, TensorShape, as_shape, unknown_shape

from ._common import constant_value, ks

__all__ = ["QueueBase", "FIFOQueue", "PaddingFIFOQueue", "RandomShuffleQueue", "PriorityQueue",
           "ConditionalAccumulatorBase", "ConditionalAccumulator", "SparseConditionalAccumulator"]

_log = logging.getLogger("flowrt")

_UNBOUNDED = 2**31 - 1  # TF's capacity of a queue made with capacity < 0 (INT32_MAX)
_NO_PROGRESS, _PROGRESS, _COMPLETE = 0, 1, 2
_TF_TYPE_NAMES = {_dt.float32: "float", _dt.float64: "double", _dt.float16: "half"}


def _tname(d: Any) -> str:
    """TF's DataTypeString for a dtype (``float``, ``double``, ``int32`` ...)."""
    d = _dt.as_dtype(d).base_dtype
    return _TF_TYPE_NAMES.get(d, d.name)


def _dbg(shape: Any) -> str:
    """TF's TensorShape DebugString: ``[2,3]``, ``[?,2]``, ``<unknown>``."""
    dims = shape.as_tuple() if isinstance(shape, TensorShape) else tuple(shape)
    if dims is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def _invalid(msg: str) -> errors.OpError:
    return errors.InvalidArgumentError(None, None, msg)


# =======================================================================================
# Blocking resources: FIFO-served attempts
# =======================================================================================
class _Attempt:
    """One pending operation on a blocking resource.

    ``run(attempt)`` is called with the resource's lock held and returns _COMPLETE (the
    attempt sets ``result`` or ``error``), _PROGRESS (it moved elements but needs more)
    or _NO_PROGRESS. ``done`` is the kernel's completion callback.
    """

    __slots__ = ("run", "done", "finished", "result", "error", "remaining", "taken", "index")

    def __init__(self, run: Callable[["_Attempt"], int], remaining: int = 1):
        self.run = run
        self.done: Callable[..., None] | None = None
        self.finished = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.remaining = remaining
        self.taken: list[Any] = []
        self.index = 0

    def finish(self) -> None:
        done = self.done
        if done is None:
            return
        if self.error is not None:
            done(None, self.error)
        else:
            done(self.result)


class _Blocking:
    """A resource whose operations may wait: lists of attempts served in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._service: tuple[collections.deque[_Attempt], ...] = ()

    def _drain(self, attempts: "collections.deque[_Attempt]", finished: list[_Attempt]
               ) -> bool:
        progress = False
        while attempts:
            a = attempts[0]
            if a.finished:  # withdrawn
                attempts.popleft()
                continue
            try:
                r = a.run(a)
            except Exception as e:  # a bug or a bad value must fail the attempt, not
                a.error = e  # whichever thread happened to flush the resource
                r = _COMPLETE
            if r == _COMPLETE:
                a.finished = True
                attempts.popleft()
                finished.append(a)
                progress = True
                continue
            if r == _PROGRESS:
                progress = True
            break  # the head waits; later attempts wait behind it
        return progress

    def _flush(self) -> None:
        finished: list[_Attempt] = []
        with self._lock:
            changed = True
            while changed:
                changed = False
                for attempts in self._service:
                    if self._drain(attempts, finished):
                        changed = True
        for a in finished:
            a.finish()

    def _submit(self, attempts: "collections.deque[_Attempt]", a: _Attempt, step: Any,
                done: Callable[..., None], cancel_message: str) -> None:
        """Queue ``a``; it is withdrawn with CancelledError if ``step`` aborts."""
        a.done = done
        with self._lock:
            attempts.append(a)
        if step is not None:
            step.on_abort(lambda _err: self._withdraw(
                attempts, a, errors.CancelledError(None, None, cancel_message)))
        self._flush()

    def _withdraw(self, attempts: "collections.deque[_Attempt]", a: _Attempt,
                  error: BaseException) -> None:
        with self._lock:
            if a.finished:
                return
            a.finished = True
            try:
                attempts.remove(a)
            except ValueError:
                pass
            self._restore(a)
            a.error = error
        a.finish()
        self._flush()  # a withdrawn head may have blocked others

    def _restore(self, a: _Attempt) -> None:
        """Give back what a withdrawn attempt held (called with the lock held)."""

    def _cancel_all(self, message: str) -> None:
        with self._lock:
            pending = [a for attempts in self._service for a in attempts if not a.finished]
            for attempts in self._service:
                attempts.clear()
            for a in pending:
                a.finished = True
                self._restore(a)
                a.error = errors.CancelledError(None, None, message)
        for a in pending:
            a.finish()


def _immutable(value: Any, np_dtype: Any) -> Any:
    """A value safe to keep past its step: an array nobody can change under the queue.

    A writeable array that owns its memory is a fresh kernel output: it is frozen in
    place. A view (a fed array aliases the caller's memory) is copied; a read-only array
    that owns its memory is immutable already."""
    if type(value) is np.ndarray:
        if value.flags.owndata:
            if value.flags.writeable:
                value.flags.writeable = False
            return value
        value = value.copy()
        value.flags.writeable = False
        return value
    if isinstance(value, np.generic):
        return value
    value = np.asarray(value, dtype=np_dtype)  # bytes, Python scalars
    value.flags.writeable = False
    return value


# =======================================================================================
# Queues
# =======================================================================================
class _Queue(_Blocking):
    """A FIFO queue of tuples of arrays (TF's FIFOQueue)."""

    type_name = "FIFOQueue"  # the name in enqueue/dequeue messages
    many_name = "FIFOQueue"  # the name in dequeue_many/up_to messages
    type_name_for_match = "FIFOQueue"  # what a shared queue's op type must be

    def __init__(self, name: str, dtypes: Sequence[Any], shapes: Sequence[TensorShape],
                 capacity: int):
        super().__init__()
        self.name = name
        self.dtypes = tuple(_dt.as_dtype(d).base_dtype for d in dtypes)
        self.shapes = tuple(as_shape(s) for s in shapes)
        self.capacity = capacity if capacity >= 0 else _UNBOUNDED
        self.closed = False
        self._np = [d.np for d in self.dtypes]
        self._items: Any = collections.deque()
        self._enq: collections.deque[_Attempt] = collections.deque()
        self._deq: collections.deque[_Attempt] = collections.deque()
        self._service = (self._enq, self._deq)

    def __repr__(self) -> str:
        return f"<{self.type_name} {self.name!r} size={len(self._items)}>"

    # -- storage (the order elements leave in) ------------------------------------------
    def _available(self) -> int:
        """How many elements a dequeue may take now."""
        return len(self._items)

    def _push(self, elem: tuple[Any, ...]) -> None:
        """Add one element (the order it leaves in is the subclass's: FIFO here)."""
        self._items.append(elem)

    def _pop(self) -> tuple[Any, ...]:
        return self._items.popleft()

    def _give_back(self, elems: list[tuple[Any, ...]]) -> None:
        """Return a partial batch, as if it had never been taken."""
        self._items.extendleft(reversed(elems))

    # -- checks -----------------------------------------------------------------------
    def matches(self, op_type: str, dtypes: Sequence[Any], shapes: Sequence[Any],
                capacity: int) -> None:
        """Raise InvalidArgumentError unless a node asking for this shared queue agrees
        with it (TF's MatchesNodeDef)."""
        if op_type.replace("V2", "") != self.type_name_for_match:
            raise _invalid(f"Expected {self.type_name_for_match}, found {op_type}")
        cap = capacity if capacity >= 0 else _UNBOUNDED
        if cap != self.capacity:
            raise _invalid(f"Shared queue '{self.name}' has capacity {self.capacity} but "
                           f"requested capacity was {cap}")
        want = tuple(_dt.as_dtype(d).base_dtype for d in dtypes)
        if want != self.dtypes:
            raise _invalid(f"Shared queue '{self.name}' has component types "
                           f"{', '.join(_tname(d) for d in self.dtypes)} but requested "
                           f"component types were {', '.join(_tname(d) for d in want)}")
        req = tuple(as_shape(s) for s in shapes)
        if tuple(s.as_tuple() for s in req) != tuple(s.as_tuple() for s in self.shapes):
            raise _invalid(f"Shared queue '{self.name}' has component shapes "
                           f"[{', '.join(_dbg(s) for s in self.shapes)}] but requested "
                           f"component shapes were [{', '.join(_dbg(s) for s in req)}]")

    def check_types(self, dtypes: Sequence[Any], what: str) -> None:
        want = tuple(_dt.as_dtype(d).base_dtype for d in dtypes)
        if len(want) != len(self.dtypes):
            raise _invalid(f"Wrong number of components in tuple. Expected "
                           f"{len(self.dtypes)}, got {len(want)}")
        if want != self.dtypes:
            raise _invalid(f"{what} of queue '{self.name}' does not match its component "
                           f"types: the op has [{', '.join(_tname(d) for d in want)}], the "
                           f"queue holds [{', '.join(_tname(d) for d in self.dtypes)}]")

    def _shape_ok(self, spec: TensorShape, shape: tuple[int, ...]) -> bool:
        return spec.as_tuple() == shape

    def validate(self, comps: Sequence[Any]) -> list[Any]:
        """Check one element's components; returns them as storable values."""
        if len(comps) != len(self.dtypes):
            raise _invalid(f"Wrong number of components in tuple. Expected "
                           f"{len(self.dtypes)}, got {len(comps)}")
        if self.shapes:
            for i, (c, spec) in enumerate(zip(comps, self.shapes)):
                s = np.shape(c)
                if not self._shape_ok(spec, s):
                    raise _invalid(f"Shape mismatch in tuple component {i}. Expected "
                                   f"{_dbg(spec)}, got {_dbg(s)}")
        return [_immutable(c, d) for c, d in zip(comps, self._np)]

    def validate_many(self, comps: Sequence[Any]) -> int:
        """Check a batch of elements (components stacked on dimension 0); returns the
        batch size."""
        if len(comps) != len(self.dtypes):
            raise _invalid(f"Wrong number of components in tuple. Expected "
                           f"{len(self.dtypes)}, got {len(comps)}")
        s0 = np.shape(comps[0])
        batch = s0[0] if s0 else None
        for i, c in enumerate(comps):
            s = np.shape(c)
            if self.shapes:
                spec = self.shapes[i]
                if not s or s[0] != batch or not self._shape_ok(spec, tuple(s[1:])):
                    raise _invalid(f"Shape mismatch in tuple component {i}. Expected "
                                   f"{_dbg((batch,) + spec.as_tuple())}, got {_dbg(s)}")
            elif not s:
                raise _invalid(f"EnqueueMany requires components of rank >= 1, but "
                               f"component {i} has shape {_dbg(s)}")
            elif s[0] != batch:
                raise _invalid(f"All input tensors must have the same size in the 0th "
                               f"dimension. Component {i} has {s[0]}, and should have "
                               f"{batch}")
        return int(batch)  # type: ignore[arg-type]

    # -- operations -------------------------------------------------------------------
    def size(self) -> int:
        return len(self._items)

    def enqueue(self, comps: Sequence[Any], step: Any, done: Callable[..., None]) -> None:
        elem = tuple(self.validate(comps))

        def run(a: _Attempt) -> int:
            if self.closed:
                a.error = errors.CancelledError(
                    None, None, f"{self.type_name} '{self.name}' is closed.")
                return _COMPLETE
            if len(self._items) < self.capacity:
                self._push(elem)
                return _COMPLETE
            return _NO_PROGRESS

        self._submit(self._enq, _Attempt(run), step, done, "Enqueue operation was cancelled")

    def enqueue_many(self, comps: Sequence[Any], step: Any, done: Callable[..., None]
                     ) -> None:
        n = self.validate_many(comps)
        if n == 0:
            done(None)
            return
        arrays = [_immutable(c, d) for c, d in zip(comps, self._np)]

        def run(a: _Attempt) -> int:
            if self.closed:
                a.error = errors.CancelledError(
                    None, None, f"{self.type_name} '{self.name}' is closed.")
                return _COMPLETE
            moved = False
            items, cap, push = self._items, self.capacity, self._push
            while a.index < n and len(items) < cap:
                j = a.index
                push(tuple(c[j, ...] for c in arrays))  # views of frozen arrays
                a.index += 1
                moved = True
            if a.index == n:
                return _COMPLETE
            return _PROGRESS if moved else _NO_PROGRESS

        self._submit(self._enq, _Attempt(run, n), step, done,
                     "Enqueue operation was cancelled")

    def dequeue(self, step: Any, done: Callable[..., None],
                post: Callable[[tuple[Any, ...]], Any]) -> None:
        def run(a: _Attempt) -> int:
            if self.closed and not self._items:
                a.error = errors.OutOfRangeError(
                    None, None, f"{self.type_name} '{self.name}' is closed and has "
                    "insufficient elements (requested 1, current size 0)")
                return _COMPLETE
            if self._available() > 0:
                a.result = post(self._pop())
                return _COMPLETE
            return _NO_PROGRESS

        self._submit(self._deq, _Attempt(run), step, done, "Dequeue operation was cancelled")

    def dequeue_many(self, n: int, allow_small: bool, step: Any, done: Callable[..., None],
                     post: Callable[[tuple[Any, ...]], Any]) -> None:
        if not self.shapes:
            raise _invalid(f"{self.many_name}'s DequeueMany and DequeueUpTo require the "
                           "components to have specified shapes.")
        if n == 0:
            done(post(self._batch([])))
            return

        def run(a: _Attempt) -> int:
            items = self._items
            size = len(items)
            if self.closed and size < a.remaining:
                wanted = a.remaining
                if a.taken:  # put a partial batch back
                    self._give_back(a.taken)
                    a.taken = []
                    a.remaining = n
                if allow_small and items:
                    a.remaining = len(items)  # take everything that is left
                else:
                    a.error = errors.OutOfRangeError(
                        None, None, f"{self.many_name} '{self.name}' is closed and has "
                        f"insufficient elements (requested {wanted}, current size {size})")
                    return _COMPLETE
            moved = False
            while a.remaining and self._available() > 0:
                a.taken.append(self._pop())
                a.remaining -= 1
                moved = True
            if a.remaining == 0:
                taken, a.taken = a.taken, []
                a.result = post(self._batch(taken))
                return _COMPLETE
            return _PROGRESS if moved else _NO_PROGRESS

        self._submit(self._deq, _Attempt(run, n), step, done,
                     "Dequeue operation was cancelled")

    def close(self, cancel_pending_enqueues: bool, step: Any, done: Callable[..., None]
              ) -> None:
        if cancel_pending_enqueues:
            with self._lock:
                self.closed = True
                pending = [a for a in self._enq if not a.finished]
                self._enq.clear()
                for a in pending:
                    a.finished = True
                    a.error = errors.CancelledError(None, None,
                                                    "Enqueue operation was cancelled")
            for a in pending:
                a.finish()
            done(None)
            self._flush()  # wake the dequeues that can no longer be satisfied
            return

        def run(a: _Attempt) -> int:  # served after the enqueues already waiting
            if self.closed:
                a.error = errors.CancelledError(None, None,
                                                f"Queue '{self.name}' is already closed.")
            else:
                self.closed = True
            return _COMPLETE

        self._submit(self._enq, _Attempt(run), step, done, "Enqueue operation was cancelled")

    def _restore(self, a: _Attempt) -> None:
        if a.taken:
            self._give_back(a.taken)
            a.taken = []

    def close_resource(self) -> None:
        """Called when the resource is dropped (Session.reset, a private queue's session
        ending): pending operations fail."""
        with self._lock:
            self.closed = True
        self._cancel_all(f"Queue '{self.name}' was deleted.")

    # -- batches ------------------------------------------------------------------------
    def _batch(self, elems: list[tuple[Any, ...]]) -> tuple[Any, ...]:
        out = []
        for i, spec in enumerate(self.shapes):
            if elems:
                out.append(np.stack([e[i] for e in elems]))
            else:
                out.append(np.empty((0,) + spec.as_tuple(), dtype=self._np[i]))
        return tuple(out)


class _PaddingQueue(_Queue):
    """A FIFO queue whose component shapes may have unknown dims; dequeue_many pads
    every component of a batch to the largest shape in it (zeros, ``b''`` for
    strings)."""

    many_name = "PaddingFIFOQueue"
    type_name_for_match = "PaddingFIFOQueue"

    def _shape_ok(self, spec: TensorShape, shape: tuple[int, ...]) -> bool:
        dims = spec.as_tuple()
        if dims is None:
            return True
        return len(dims) == len(shape) and all(d is None or d == s
                                               for d, s in zip(dims, shape))

    def _batch(self, elems: list[tuple[Any, ...]]) -> tuple[Any, ...]:
        out = []
        for i, spec in enumerate(self.shapes):
            npd = self._np[i]
            if not elems:
                out.append(np.empty((0,) + tuple(d or 0 for d in spec.as_tuple()), dtype=npd))
                continue
            parts = [e[i] for e in elems]
            shapes = [np.shape(p) for p in parts]
            big = tuple(max(col) for col in zip(*shapes)) if shapes[0] else ()
            if all(s == big for s in shapes):
                out.append(np.stack(parts))
                continue
            if npd.kind == "O":
                batch = np.full((len(parts),) + big, b"", dtype=object)
            else:
                batch = np.zeros((len(parts),) + big, dtype=npd)
            for j, (p, s) in enumerate(zip(parts, shapes)):
                batch[(j,) + tuple(slice(0, d) for d in s)] = p
            out.append(batch)
        return tuple(out)


class _ShuffleQueue(_Queue):
    """A queue that dequeues a uniformly random element (TF's RandomShuffleQueue); while
    it is open a dequeue leaves at least ``min_after_dequeue`` elements behind."""

    type_name = many_name = type_name_for_match = "RandomShuffleQueue"

    def __init__(self, name: str, dtypes: Sequence[Any], shapes: Sequence[TensorShape],
                 capacity: int, min_after_dequeue: int, seed: int, seed2: int):
        super().__init__(name, dtypes, shapes, capacity)
        self.min_after_dequeue = min_after_dequeue
        self.seeds = (seed, seed2)
        self._items = []
        self._rng = np.random.default_rng(
            None if seed == 0 and seed2 == 0 else [seed & 0xFFFFFFFFFFFFFFFF,
                                                   seed2 & 0xFFFFFFFFFFFFFFFF])

    def _available(self) -> int:
        n = len(self._items)
        return n if self.closed else n - self.min_after_dequeue

    def _pop(self) -> tuple[Any, ...]:
        items = self._items
        i = int(self._rng.integers(len(items)))
        items[i], items[-1] = items[-1], items[i]
        return items.pop()

    def _give_back(self, elems: list[tuple[Any, ...]]) -> None:
        self._items.extend(elems)

    def matches_shuffle(self, min_after_dequeue: int, seed: int, seed2: int) -> None:
        if min_after_dequeue != self.min_after_dequeue:
            raise _invalid(f"Shared queue '{self.name}' has min_after_dequeue "
                           f"{self.min_after_dequeue} but requested min_after_dequeue was "
                           f"{min_after_dequeue}")
        if (seed, seed2) != (-1, -1) and (seed, seed2) != self.seeds:
            raise _invalid(f"Shared queue '{self.name}' has random seeds {self.seeds} but "
                           f"requested seeds are ({seed}, {seed2}).")


class _PriorityQueue(_Queue):
    """A queue whose elements leave in ascending order of their int64 priority, the
    element's component 0 (TF's PriorityQueue). The elements are kept in a binary heap
    run as libstdc++'s ``std::priority_queue`` runs it, so elements of equal priority
    leave in the order TF's leave in."""

    type_name = many_name = type_name_for_match = "PriorityQueue"

    def __init__(self, name: str, dtypes: Sequence[Any], shapes: Sequence[TensorShape],
                 capacity: int):
        super().__init__(name, [_dt.int64, *dtypes], [TensorShape([]), *shapes] if shapes
                         else [], capacity)
        self._items = []

    def _pop(self) -> tuple[Any, ...]:
        heap = self._items
        top, last = heap[0], heap.pop()
        if heap:
            _adjust_heap(heap, last)
        return top[1]

    def _push(self, elem: tuple[Any, ...]) -> None:
        """Add ``elem``; its priority (component 0) must be a scalar."""
        if np.ndim(elem[0]) != 0:
            raise _invalid("Expected the priority element to be a scalar, but received "
                           f"shape: {_dbg(np.shape(elem[0]))}")
        heap = self._items
        heap.append(None)
        _sift_up(heap, len(heap) - 1, (int(elem[0]), elem))

    def _give_back(self, elems: list[tuple[Any, ...]]) -> None:
        for e in elems:
            self._push(e)

    def matches(self, op_type: str, dtypes: Sequence[Any], shapes: Sequence[Any],
                capacity: int) -> None:
        """As :meth:`_Queue.matches` for the requested component types and shapes, which
        leave out the priority."""
        super().matches(op_type, [_dt.int64, *dtypes],
                        [TensorShape([]), *shapes] if shapes else [], capacity)

    def dequeue_many(self, n: int, allow_small: bool, step: Any, done: Callable[..., None],
                     post: Callable[[tuple[Any, ...]], Any]) -> None:
        """TF's PriorityQueue::TryDequeueMany: wait until ``n`` elements are in, so a
        batch is in priority order. Once the queue is closed a dequeue_up_to takes what
        is left and then, as TF's does, fails with OutOfRangeError for the rest (the
        elements it took are lost)."""
        if not self.shapes:
            raise _invalid("PriorityQueue's DequeueMany requires the components to have "
                           "specified shapes.")
        if n == 0:
            done(post(self._batch([])))
            return

        def run(a: _Attempt) -> int:
            size = len(self._items)
            if self.closed and (size == 0 or (not allow_small and size < a.remaining)):
                a.taken = []
                a.error = errors.OutOfRangeError(
                    None, None, f"PriorityQueue '{self.name}' is closed and has insufficient "
                    f"elements (requested {a.remaining}, current size {size})")
                return _COMPLETE
            if size < a.remaining and not (self.closed and allow_small):
                return _NO_PROGRESS
            while self._items and a.remaining:
                a.taken.append(self._pop())
                a.remaining -= 1
            if a.remaining == 0:
                taken, a.taken = a.taken, []
                a.result = post(self._batch(taken))
                return _COMPLETE
            return _PROGRESS

        self._submit(self._deq, _Attempt(run, n), step, done,
                     "Dequeue operation was cancelled")

    def _restore(self, a: _Attempt) -> None:
        a.taken = []  # TF drops what a cancelled dequeue_many had taken


def _sift_up(heap: list[Any], hole: int, value: tuple[int, Any], top: int = 0) -> None:
    """libstdc++'s ``__push_heap`` for a min-heap on priority: move ``value`` up from
    ``hole``."""
    parent = (hole - 1) // 2
    while hole > top and heap[parent][0] > value[0]:
        heap[hole] = heap[parent]
        hole = parent
        parent = (hole - 1) // 2
    heap[hole] = value


def _adjust_heap(heap: list[Any], value: tuple[int, Any]) -> None:
    """libstdc++'s ``__adjust_heap`` from the root: the root has been popped, ``value``
    (the former last element) is placed again."""
    n, hole, child = len(heap), 0, 0
    while child < (n - 1) // 2:
        child = 2 * (child + 1)
        if heap[child][0] > heap[child - 1][0]:
            child -= 1
        heap[hole] = heap[child]
        hole = child
    if n % 2 == 0 and child == (n - 2) // 2:
        child = 2 * (child + 1)
        heap[hole] = heap[child - 1]
        hole = child - 1
    _sift_up(heap, hole, value)


_QUEUE_CLASSES: dict[str, type[_Queue]] = {
    "FIFOQueue": _Queue, "FIFOQueueV2": _Queue,
    "PaddingFIFOQueue": _PaddingQueue, "PaddingFIFOQueueV2": _PaddingQueue,
    "RandomShuffleQueue": _ShuffleQueue, "RandomShuffleQueueV2": _ShuffleQueue,
    "PriorityQueue": _PriorityQueue, "PriorityQueueV2": _PriorityQueue,
}


# =======================================================================================
# Conditional accumulators
# =======================================================================================
_ACCUMULATOR_DTYPES = (_dt.float16, _dt.float32, _dt.float64)  # TF's CPU kernels


class _Accumulator(_Blocking):
    """Aggregates gradients of one dtype and shape (TF's ConditionalAccumulator).

    A gradient whose local_step is below the accumulator's global step is dropped. A
    take_grad waits until ``num_required`` gradients are in, returns their mean (or sum),
    resets the count and advances the global step by one.
    """

    def __init__(self, name: str, dtype: Any, shape: TensorShape, reduction_type: str):
        super().__init__()
        self.name = name
        self.dtype = _dt.as_dtype(dtype).base_dtype
        self.shape = as_shape(shape)
        self.reduction_type = reduction_type
        self.counter = 0
        self.global_step = 0
        self._sum: Any = None
        self._np = self.dtype.np
        self._takes: collections.deque[_Attempt] = collections.deque()
        self._service = (self._takes,)

    def __repr__(self) -> str:
        return f"<ConditionalAccumulator {self.name!r} count={self.counter}>"

    def check_dtype(self, dtype: Any) -> None:
        d = _dt.as_dtype(dtype).base_dtype
        if d is not self.dtype:
            raise _invalid(f"Signature mismatch, have: {_tname(d)} expected: "
                           f"{_tname(self.dtype)} (accumulator '{self.name}')")

    def apply_grad(self, local_step: int, grad: Any) -> None:
        with self._lock:
            if local_step >= self.global_step:
                s = np.shape(grad)
                if self.counter > 0 and self._sum.shape != s:
                    raise _invalid(f"Shape mismatch: expected {_dbg(self._sum.shape)}, got "
                                   f"{_dbg(s)}")
                if not self.shape.is_compatible_with(TensorShape(s)):
                    raise _invalid(f"Shape mismatch: expected {_dbg(self.shape)}, got "
                                   f"{_dbg(s)}")
                if self.counter == 0:
                    self._sum = np.array(grad, dtype=self._np, copy=True)
                else:
                    np.add(self._sum, grad, out=self._sum, casting="unsafe")
                self.counter += 1
        self._flush()

    def take_grad(self, num_required: int, step: Any, done: Callable[..., None]) -> None:
        if num_required <= 0:
            raise _invalid(f"Argument num_required must be positive, but was {num_required}")

        def run(a: _Attempt) -> int:
            if self.counter < num_required:
                return _NO_PROGRESS
            self.global_step += 1
            a.result = self._take_result()
            self.counter = 0
            return _COMPLETE

        self._submit(self._takes, _Attempt(run, num_required), step, done,
                     "TakeGrad operation was cancelled")

    def _take_result(self) -> Any:
        """The aggregate a take returns (called under the lock); clears it."""
        total, self._sum = self._sum, None
        if self.reduction_type == "MEAN":
            total = np.asarray(np.true_divide(total, self._np.type(self.counter)),
                               dtype=self._np)
        total.flags.writeable = False  # callers copy what they get
        return total

    def set_global_step(self, new_global_step: int) -> None:
        with self._lock:
            if new_global_step < self.global_step:
                _log.warning("Attempt to set current_global_step_ to smaller value: "
                             "current_global_step_ = %d >= %d = new_global_step.",
                             self.global_step, new_global_step)
            self.global_step = new_global_step

    def num_accumulated(self) -> int:
        return self.counter

    def close_resource(self) -> None:
        self._cancel_all(f"Accumulator '{self.name}' was deleted.")


class _SparseAccumulator(_Accumulator):
    """Aggregates IndexedSlices gradients (TF's SparseConditionalAccumulator).

    Each gradient is (indices, values, dense shape or None). Sums keep TF's merge: the
    accumulated and the new index lists are walked together as if both were sorted, equal
    indices add their slices, and every index counts the gradients that had it. A MEAN
    take divides each slice by its own count (not by the number of gradients).
    """

    def __repr__(self) -> str:
        return f"<SparseConditionalAccumulator {self.name!r} count={self.counter}>"

    def _validate(self, idx: Any, vals: Any, dense: Any) -> None:
        spec = self.shape.as_tuple()
        if dense is not None:
            if spec is not None and len(spec) > dense.size:
                raise _invalid(f"Shape mismatch: expected shape rank at least {len(spec)}, "
                               f"got {dense.size}")
            for i, d in enumerate(spec or ()):
                if d is not None and d != int(dense[i]):
                    raise _invalid(f"Shape mismatch: expected shape dim {i} to be {d}, got "
                                   f"{int(dense[i])}")
        if spec and spec[0] is not None:
            for i, v in enumerate(idx.tolist()):
                if v >= spec[0]:
                    raise _invalid(f"Shape mismatch: index of slice {i} exceeded limits of "
                                   f"shape; index is {v} exceeded {spec[0]}")
        if self.counter > 0:
            have = self._sum[1].shape
            if len(have) != vals.ndim:
                raise _invalid(f"Shape mismatch: expected values rank {len(have)}, got "
                               f"{vals.ndim}")
            for i in range(1, len(have)):
                if have[i] != vals.shape[i]:
                    raise _invalid(f"Shape mismatch: expected values dim {i} to be "
                                   f"{have[i]}, got {vals.shape[i]}")
        elif spec is not None:
            if len(spec) > vals.ndim:
                raise _invalid(f"Shape mismatch: expected values rank at least {len(spec)}, "
                               f"got {vals.ndim}")
            for i in range(1, len(spec)):
                if spec[i] is not None and spec[i] != vals.shape[i]:
                    raise _invalid(f"Shape mismatch: expected values dim {i} to be "
                                   f"{spec[i]}, got {vals.shape[i]}")

    def apply_sparse_grad(self, local_step: int, indices: Any, values: Any,
                          dense_shape: Any) -> None:
        """Add one gradient (dropped when ``local_step`` is below the global step)."""
        idx = np.asarray(indices, dtype=np.int64)
        vals = np.asarray(values)
        if idx.ndim != 1:
            raise _invalid(f"Input indices should be vector but received shape: "
                           f"{_dbg(idx.shape)}")
        if vals.ndim == 0:
            raise _invalid("Values cannot be 0-dimensional.")
        if vals.shape[0] != idx.shape[0]:
            raise _invalid(f"Expected {idx.shape[0]} non-empty input values, got "
                           f"{vals.shape[0]}")
        dense = None if dense_shape is None else np.asarray(dense_shape, np.int64).reshape(-1)
        with self._lock:
            self._validate(idx, vals, dense)
            if local_step >= self.global_step:
                if self.counter == 0:
                    self._sum = (idx.copy(), np.array(vals, dtype=self._np, copy=True),
                                 np.ones(idx.shape[0], np.int64))
                else:
                    self._sum = self._merge(idx, vals)
                self.counter += 1
        self._flush()

    def _merge(self, idx: Any, vals: Any) -> tuple[Any, Any, Any]:
        a_idx, a_vals, a_cnt = self._sum
        out_idx, rows, counts = [], [], []
        i = j = 0
        na, nb = len(a_idx), len(idx)
        while i < na or j < nb:
            if j >= nb or (i < na and a_idx[i] < idx[j]):
                out_idx.append(a_idx[i]); rows.append(a_vals[i]); counts.append(a_cnt[i])
                i += 1
            elif i >= na or a_idx[i] > idx[j]:
                out_idx.append(idx[j]); rows.append(vals[j].astype(self._np)); counts.append(1)
                j += 1
            else:
                out_idx.append(a_idx[i]); rows.append(a_vals[i] + vals[j])
                counts.append(a_cnt[i] + 1)
                i += 1
                j += 1
        shape = (len(out_idx),) + a_vals.shape[1:]
        merged = np.array(rows, dtype=self._np).reshape(shape)
        return np.array(out_idx, np.int64), merged, np.array(counts, np.int64)

    def _take_result(self) -> Any:
        idx, vals, cnt = self._sum
        self._sum = None
        if self.reduction_type == "MEAN" and vals.shape[0]:
            div = cnt.astype(self._np).reshape((-1,) + (1,) * (vals.ndim - 1))
            vals = np.asarray(vals / div, dtype=self._np)
        spec = self.shape.as_tuple()
        first = -1 if not spec or spec[0] is None else spec[0]
        shape = np.array([first] + list(vals.shape[1:]), np.int64)
        for t in (idx, vals, shape):
            t.flags.writeable = False
        return (idx, vals, shape)


_ACCUMULATOR_OPS = ("ConditionalAccumulator", "ResourceConditionalAccumulator")


# =======================================================================================
# Handles
# =======================================================================================
_uids: "weakref.WeakKeyDictionary[Any, itertools.count]" = weakref.WeakKeyDictionary()
_uids_lock = threading.Lock()


def _unique_id(rm: Any) -> int:
    """The next id of a device's resource manager (TF's GenerateUniqueId)."""
    with _uids_lock:
        c = _uids.get(rm)
        if c is None:
            c = _uids[rm] = itertools.count()
        return next(c)


def _drop_private(rm: Any, container: str, name: str) -> None:
    try:
        r = rm.lookup(container, name)
    except Exception:
        return
    rm.delete(container, name)
    close = getattr(r, "close_resource", None)
    if close is not None:
        close()


def _handle_kernel(ctx: Any, make: Callable[[str], Any],
                   check: Callable[[Any, str], None]) -> Callable[[], Any]:
    """The compute of a handle op: look the resource up (creating it on first use).

    Unshared resources get a name private to this kernel, so to its session; they are
    removed from the resource manager when the kernel is released."""
    rm = ctx.device.resource_mgr
    container = ctx.attrs.get("container") or ""
    shared = ctx.attrs.get("shared_name") or ""
    name = shared or f"_{_unique_id(rm)}_{ctx.node_name}"
    checked: list[Any] = []

    def compute() -> Any:
        r = rm.lookup_or_create(container, name, lambda: make(name))
        if not checked or checked[0] is not r:
            check(r, name)
            checked[:] = [r]
        return r

    if not shared:
        weakref.finalize(compute, _drop_private, rm, container, name)
    return compute


def _resource(h: Any, cls: type, op: str) -> Any:
    if isinstance(h, cls):
        return h
    if isinstance(h, np.ndarray) and h.size == 1:
        return _resource(h.reshape(()).item(), cls, op)
    what = "queue" if cls is _Queue else "accumulator"
    raise _invalid(f"{op}: the handle input is not a {what} handle (got "
                   f"{type(h).__name__})")


def _scalar(x: Any, what: str, np_type: Any) -> int:
    if np.ndim(x) != 0:
        raise _invalid(f"Argument {what} must be scalar, but had bad shape {_dbg(np.shape(x))}")
    return int(np_type(x))


# =======================================================================================
# Op definitions
# =======================================================================================
def _scalar_out(op: Any) -> list[TensorShape]:
    return [TensorShape([]) for _ in op.outputs]


def _two_element_out(op: Any) -> list[TensorShape]:
    return [TensorShape([2])]


def _no_outputs(op: Any) -> list[TensorShape]:
    return []


def _handle_source(op: Any) -> Any:
    """The op that made this op's queue/accumulator handle, looking through Identity."""
    src = op.inputs[0].op
    while src.type in ("Identity", "RefIdentity") and src.inputs:
        src = src.inputs[0].op
    return src


def _queue_component_shapes(op: Any) -> list[TensorShape] | None:
    src = _handle_source(op)
    if src.type not in _QUEUE_CLASSES:
        return None
    shapes = src.node_attrs.get("shapes") or []
    if _QUEUE_CLASSES[src.type] is _PriorityQueue and shapes:
        shapes = [TensorShape([]), *shapes]
    if len(shapes) != len(op.outputs):
        return None
    return [as_shape(s) for s in shapes]


def _dequeue_shape(op: Any) -> list[TensorShape]:
    shapes = _queue_component_shapes(op)
    return shapes if shapes is not None else [unknown_shape() for _ in op.outputs]


def _dequeue_many_shape(op: Any) -> list[TensorShape]:
    n_t = op.inputs[1]
    if n_t.shape.ndims not in (None, 0):
        raise ValueError(f"Shape must be rank 0 but is rank {n_t.shape.ndims} for "
                         f"'{op.name}' (op: '{op.type}') (input 'n')")
    n = constant_value(n_t)
    if n is not None and op.type.startswith("QueueDequeueMany"):
        if int(n) < 0:
            raise ValueError(f"Input 'n' must be >= 0, but is {int(n)} for '{op.name}' "
                             f"(op: '{op.type}')")
        batch: int | None = int(n)
    else:
        batch = None
    shapes = _queue_component_shapes(op)
    if shapes is None:
        return [unknown_shape() for _ in op.outputs]
    return [TensorShape([batch]).concatenate(s) for s in shapes]


def _take_grad_shape(op: Any) -> list[TensorShape]:
    n_t = op.inputs[1]
    if n_t.shape.ndims not in (None, 0):
        raise ValueError(f"Shape must be rank 0 but is rank {n_t.shape.ndims} for "
                         f"'{op.name}' (op: '{op.type}') (input 'num_required')")
    src = _handle_source(op)
    if src.type in _ACCUMULATOR_OPS:
        return [as_shape(src.node_attrs.get("shape"))]
    return [unknown_shape()]


def _scalar_input_check(index: int, what: str) -> Callable[[Any], list[TensorShape]]:
    def fn(op: Any) -> list[TensorShape]:
        s = op.inputs[index].shape
        if s.ndims not in (None, 0):
            raise ValueError(f"Shape must be rank 0 but is rank {s.ndims} for '{op.name}' "
                             f"(op: '{op.type}') (input '{what}')")
        return [TensorShape([]) for _ in op.outputs]

    return fn


_QUEUE_ATTRS = ["component_types: list(type) >= 1", "shapes: list(shape) >= 0 = []",
                "capacity: int = -1", "container: string = ''", "shared_name: string = ''"]
_SHUFFLE_ATTRS = ["component_types: list(type) >= 1", "shapes: list(shape) >= 0 = []",
                  "capacity: int = -1", "min_after_dequeue: int = 0", "seed: int = 0",
                  "seed2: int = 0", "container: string = ''", "shared_name: string = ''"]
_PRIORITY_ATTRS = ["component_types: list(type) >= 0 = []", "shapes: list(shape) >= 0",
                   "capacity: int = -1", "container: string = ''", "shared_name: string = ''"]
_ACC_DTYPES = ("{float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, "
               "qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, "
               "uint64}")
_ACC_ATTRS = [f"dtype: {_ACC_DTYPES}", "shape: shape", "container: string = ''",
              "shared_name: string = ''", "reduction_type: {'MEAN', 'SUM'} = 'MEAN'"]

for _v2, _h, _stateful in (("V2", "handle: resource", True), ("", "handle: Ref(string)", False)):
    ks.op(
        OpDef(f"FIFOQueue{_v2}", outputs=[_h], attrs=_QUEUE_ATTRS, is_stateful=True,
              shape_fn=_scalar_out if _v2 else _two_element_out,
              doc="A queue that produces elements in first-in first-out order."),
        OpDef(f"PaddingFIFOQueue{_v2}", outputs=[_h], attrs=_QUEUE_ATTRS, is_stateful=True,
              shape_fn=_scalar_out if _v2 else _two_element_out,
              doc="A FIFO queue whose dequeue_many pads components of variable shape."),
        OpDef(f"RandomShuffleQueue{_v2}", outputs=[_h], attrs=_SHUFFLE_ATTRS,
              is_stateful=True, shape_fn=_scalar_out if _v2 else _two_element_out,
              doc="A queue that dequeues its elements in a random order."),
        OpDef(f"PriorityQueue{_v2}", outputs=[_h], attrs=_PRIORITY_ATTRS, is_stateful=True,
              shape_fn=_scalar_out if _v2 else _two_element_out,
              doc="A queue that dequeues its elements in ascending order of an int64 "
                  "priority, each element's component 0."),
        OpDef(f"QueueEnqueue{_v2}", inputs=[_h, "components: Tcomponents"],
              attrs=["Tcomponents: list(type) >= 1", "timeout_ms: int = -1"],
              is_stateful=_stateful, shape_fn=_no_outputs,
              doc="Enqueues a tuple of tensors (blocks while the queue is full)."),
        OpDef(f"QueueEnqueueMany{_v2}", inputs=[_h, "components: Tcomponents"],
              attrs=["Tcomponents: list(type) >= 1", "timeout_ms: int = -1"],
              is_stateful=_stateful, shape_fn=_no_outputs,
              doc="Enqueues the slices of the components along dimension 0."),
        OpDef(f"QueueDequeue{_v2}", inputs=[_h], outputs=["components: component_types"],
              attrs=["component_types: list(type) >= 1", "timeout_ms: int = -1"],
              is_stateful=_stateful, shape_fn=_dequeue_shape,
              doc="Dequeues a tuple of tensors (blocks while the queue is empty)."),
        OpDef(f"QueueDequeueMany{_v2}", inputs=[_h, "n: int32"],
              outputs=["components: component_types"],
              attrs=["component_types: list(type) >= 1", "timeout_ms: int = -1"],
              is_stateful=_stateful, shape_fn=_dequeue_many_shape,
              doc="Dequeues n tuples, concatenated along dimension 0."),
        OpDef(f"QueueDequeueUpTo{_v2}", inputs=[_h, "n: int32"],
              outputs=["components: component_types"],
              attrs=["component_types: list(type) >= 1", "timeout_ms: int = -1"],
              is_stateful=_stateful, shape_fn=_dequeue_many_shape,
              doc="Dequeues n tuples, or what is left once the queue is closed."),
        OpDef(f"QueueClose{_v2}", inputs=[_h], attrs=["cancel_pending_enqueues: bool = false"],
              is_stateful=_stateful, shape_fn=_no_outputs,
              doc="Closes the queue to further enqueues."),
        OpDef(f"QueueSize{_v2}", inputs=[_h], outputs=["size: int32"], is_stateful=_stateful,
              shape_fn=_scalar_out, doc="The number of elements in the queue."),
        OpDef(f"QueueIsClosed{_v2}", inputs=[_h], outputs=["is_closed: bool"],
              is_stateful=_stateful, shape_fn=_scalar_out,
              doc="Whether the queue is closed."),
    )

for _prefix, _h, _stateful in (("Resource", "handle: resource", True),
                               ("", "handle: Ref(string)", False)):
    ks.op(
        OpDef(f"{_prefix}ConditionalAccumulator", outputs=[_h], attrs=_ACC_ATTRS,
              is_stateful=True, shape_fn=_two_element_out,
              doc="A conditional accumulator for aggregating gradients."),
        OpDef(f"{_prefix}AccumulatorApplyGradient",
              inputs=[_h, "local_step: int64", "gradient: dtype"],
              attrs=[f"dtype: {_ACC_DTYPES}"], is_stateful=_stateful,
              shape_fn=_scalar_input_check(1, "local_step"),
              doc="Adds a gradient unless it is stale (local_step < global step)."),
        OpDef(f"{_prefix}AccumulatorTakeGradient", inputs=[_h, "num_required: int32"],
              outputs=["average: dtype"], attrs=[f"dtype: {_ACC_DTYPES}"],
              is_stateful=_stateful, shape_fn=_take_grad_shape,
              doc="Waits for num_required gradients and returns their mean (or sum)."),
        OpDef(f"{_prefix}AccumulatorNumAccumulated", inputs=[_h],
              outputs=["num_accumulated: int32"], is_stateful=_stateful,
              shape_fn=_scalar_out, doc="The number of gradients aggregated so far."),
        OpDef(f"{_prefix}AccumulatorSetGlobalStep", inputs=[_h, "new_global_step: int64"],
              is_stateful=_stateful, shape_fn=_scalar_input_check(1, "new_global_step"),
              doc="Sets the accumulator's global step."),
    )

def _sparse_take_grad_shape(op: Any) -> list[TensorShape]:
    n_t = op.inputs[1]
    if n_t.shape.ndims not in (None, 0):
        raise ValueError(f"Shape must be rank 0 but is rank {n_t.shape.ndims} for "
                         f"'{op.name}' (op: '{op.type}') (input 'num_required')")
    # TF: the accumulator's shape is not known here, so every output is unknown
    return [unknown_shape(), unknown_shape(), unknown_shape()]


def _sparse_apply_grad_shape(op: Any) -> list[TensorShape]:
    s = op.inputs[1].shape
    if s.ndims not in (None, 0):
        raise ValueError(f"Shape must be rank 0 but is rank {s.ndims} for '{op.name}' "
                         f"(op: '{op.type}') (input 'local_step')")
    return []


ks.op(
    OpDef("SparseConditionalAccumulator", outputs=["handle: Ref(string)"], attrs=_ACC_ATTRS,
          is_stateful=True, shape_fn=_two_element_out,
          doc="A conditional accumulator for aggregating sparse (IndexedSlices) gradients."),
    OpDef("SparseAccumulatorApplyGradient",
          inputs=["handle: Ref(string)", "local_step: int64", "gradient_indices: int64",
                  "gradient_values: dtype", "gradient_shape: int64"],
          attrs=[f"dtype: {_ACC_DTYPES}", "has_known_shape: bool"],
          shape_fn=_sparse_apply_grad_shape,
          doc="Adds a sparse gradient unless it is stale (local_step < global step)."),
    OpDef("SparseAccumulatorTakeGradient", inputs=["handle: Ref(string)", "num_required: int32"],
          outputs=["indices: int64", "values: dtype", "shape: int64"],
          attrs=[f"dtype: {_ACC_DTYPES}"], shape_fn=_sparse_take_grad_shape,
          doc="Waits for num_required sparse gradients; returns their per-index mean (or "
              "sum) as indices, values and dense shape."),
)

_QUEUE_OPS = [f"{base}{v}" for v in ("V2", "") for base in
              ("QueueEnqueue", "QueueEnqueueMany", "QueueDequeue", "QueueDequeueMany",
               "QueueDequeueUpTo", "QueueClose", "QueueSize", "QueueIsClosed")]
ks.not_differentiable(*_QUEUE_CLASSES, *_QUEUE_OPS,
                      *[f"{p}{b}" for p in ("Resource", "") for b in (
                          "ConditionalAccumulator", "AccumulatorApplyGradient",
                          "AccumulatorTakeGradient", "AccumulatorNumAccumulated",
                          "AccumulatorSetGlobalStep")],
                      "SparseConditionalAccumulator", "SparseAccumulatorApplyGradient",
                      "SparseAccumulatorTakeGradient")


# =======================================================================================
# Kernels
# =======================================================================================
@ks.kernel("FIFOQueueV2", "FIFOQueue", "PaddingFIFOQueueV2", "PaddingFIFOQueue",
           "RandomShuffleQueueV2", "RandomShuffleQueue", "PriorityQueueV2", "PriorityQueue",
           device_type="CPU")
def _queue_kernel(ctx: Any) -> Any:
    op_type = ctx.op_type
    cls = _QUEUE_CLASSES[op_type]
    dtypes = list(ctx.attrs["component_types"])
    shapes = [as_shape(s) for s in (ctx.attrs.get("shapes") or [])]
    capacity = int(ctx.attrs.get("capacity", -1))
    if not dtypes and cls is not _PriorityQueue:  # a priority alone is an element
        raise _invalid("Empty component types for queue")
    if cls is _PaddingQueue:
        if len(shapes) != len(dtypes):
            raise _invalid(f"Shapes must be provided for all components, but received "
                           f"{len(dtypes)} dtypes and {len(shapes)} shapes.")
        if any(s.ndims is None for s in shapes):
            raise _invalid("PaddingFIFOQueue requires every component shape to have a "
                           "known rank")
    else:
        if shapes and len(shapes) != len(dtypes):
            raise _invalid(f"Different number of component types.  Types: "
                           f"{', '.join(_tname(d) for d in dtypes)}, Shapes: "
                           f"[{', '.join(_dbg(s) for s in shapes)}]")
        if any(not s.is_fully_defined() for s in shapes):
            raise _invalid(f"FIFOQueue requires fully defined component shapes, got "
                           f"[{', '.join(_dbg(s) for s in shapes)}]")

    shuffle = (int(ctx.attrs.get("min_after_dequeue", 0)), int(ctx.attrs.get("seed", 0)),
               int(ctx.attrs.get("seed2", 0)))

    def make(name: str) -> _Queue:
        if cls is _ShuffleQueue:
            return _ShuffleQueue(name, dtypes, shapes, capacity, *shuffle)
        return cls(name, dtypes, shapes, capacity)

    def check(q: Any, name: str) -> None:
        if not isinstance(q, _Queue):
            raise _invalid(f"Resource '{name}' is not a queue but {type(q).__name__}")
        q.matches(op_type, dtypes, shapes, capacity)
        if isinstance(q, _ShuffleQueue):
            q.matches_shuffle(*shuffle)

    return _handle_kernel(ctx, make, check)


def _no_timeout(ctx: Any) -> None:
    if int(ctx.attrs.get("timeout_ms", -1)) != -1:  # as TF: the attr exists, unimplemented
        raise _invalid("Timeout not supported yet.")


def _unwrap(ctx: Any) -> Callable[[tuple[Any, ...]], Any]:
    """How a dequeued tuple becomes the kernel's outputs (one output: the array)."""
    if len(ctx.output_dtypes) == 1:
        return lambda t: t[0]
    return lambda t: t


@ks.kernel("QueueEnqueueV2", "QueueEnqueue", device_type="CPU", kind="async")
def _enqueue_kernel(ctx: Any) -> Any:
    _no_timeout(ctx)
    types_in = list(ctx.attrs["Tcomponents"])
    op = ctx.op_type

    def enqueue(step: Any, done: Callable[..., None], handle: Any, *comps: Any) -> None:
        q = _resource(handle, _Queue, op)
        q.check_types(types_in, "The components")
        q.enqueue(comps, step, done)

    return enqueue


@ks.kernel("QueueEnqueueManyV2", "QueueEnqueueMany", device_type="CPU", kind="async")
def _enqueue_many_kernel(ctx: Any) -> Any:
    _no_timeout(ctx)
    types_in = list(ctx.attrs["Tcomponents"])
    op = ctx.op_type

    def enqueue_many(step: Any, done: Callable[..., None], handle: Any, *comps: Any) -> None:
        q = _resource(handle, _Queue, op)
        q.check_types(types_in, "The components")
        q.enqueue_many(comps, step, done)

    return enqueue_many


@ks.kernel("QueueDequeueV2", "QueueDequeue", device_type="CPU", kind="async")
def _dequeue_kernel(ctx: Any) -> Any:
    _no_timeout(ctx)
    types_out = list(ctx.attrs["component_types"])
    post = _unwrap(ctx)
    op = ctx.op_type

    def dequeue(step: Any, done: Callable[..., None], handle: Any) -> None:
        q = _resource(handle, _Queue, op)
        q.check_types(types_out, "The component_types")
        q.dequeue(step, done, post)

    return dequeue


def _dequeue_many_factory(allow_small: bool) -> Callable[[Any], Any]:
    what = "DequeueUpToOp" if allow_small else "DequeueManyOp"

    def factory(ctx: Any) -> Any:
        _no_timeout(ctx)
        types_out = list(ctx.attrs["component_types"])
        post = _unwrap(ctx)
        op = ctx.op_type

        def dequeue_many(step: Any, done: Callable[..., None], handle: Any, n: Any) -> None:
            q = _resource(handle, _Queue, op)
            q.check_types(types_out, "The component_types")
            k = _scalar(n, "n", np.int32)
            if k < 0:
                raise _invalid(f"{what} requested {k} < 0 elements")
            q.dequeue_many(k, allow_small, step, done, post)

        return dequeue_many

    return factory


ks.kernel("QueueDequeueManyV2", "QueueDequeueMany", device_type="CPU",
          kind="async")(_dequeue_many_factory(False))
ks.kernel("QueueDequeueUpToV2", "QueueDequeueUpTo", device_type="CPU",
          kind="async")(_dequeue_many_factory(True))


@ks.kernel("QueueCloseV2", "QueueClose", device_type="CPU", kind="async")
def _close_kernel(ctx: Any) -> Any:
    cancel = bool(ctx.attrs.get("cancel_pending_enqueues", False))
    op = ctx.op_type

    def close(step: Any, done: Callable[..., None], handle: Any) -> None:
        _resource(handle, _Queue, op).close(cancel, step, done)

    return close


@ks.kernel("QueueSizeV2", "QueueSize", device_type="CPU")
def _size_kernel(ctx: Any) -> Any:
    op = ctx.op_type

    def size(handle: Any) -> Any:
        return np.int32(_resource(handle, _Queue, op).size())

    return size


@ks.kernel("QueueIsClosedV2", "QueueIsClosed", device_type="CPU")
def _is_closed_kernel(ctx: Any) -> Any:
    op = ctx.op_type

    def is_closed(handle: Any) -> Any:
        return np.bool_(_resource(handle, _Queue, op).closed)

    return is_closed


@ks.kernel(*_ACCUMULATOR_OPS, "SparseConditionalAccumulator", device_type="CPU")
def _accumulator_kernel(ctx: Any) -> Any:
    dtype = _dt.as_dtype(ctx.attrs["dtype"]).base_dtype
    if dtype not in _ACCUMULATOR_DTYPES:
        raise _invalid(f"No OpKernel was registered to support Op '{ctx.op_type}' used by "
                       f"node {ctx.node_name} with dtype {_tname(dtype)}. Registered "
                       f"kernels: device='CPU'; dtype in [DT_HALF, DT_FLOAT, DT_DOUBLE]")
    shape = as_shape(ctx.attrs.get("shape"))
    reduction = ctx.attrs.get("reduction_type", "MEAN") or "MEAN"

    cls = _SparseAccumulator if ctx.op_type == "SparseConditionalAccumulator" else _Accumulator

    def make(name: str) -> _Accumulator:
        return cls(name, dtype, shape, reduction)

    def check(a: Any, name: str) -> None:
        if type(a) is not cls:
            raise _invalid(f"Resource '{name}' is not a {cls.__name__.lstrip('_')} but "
                           f"{type(a).__name__}")

    return _handle_kernel(ctx, make, check)


@ks.kernel("SparseAccumulatorApplyGradient", device_type="CPU")
def _sparse_apply_grad_kernel(ctx: Any) -> Any:
    dtype = ctx.attrs["dtype"]
    known = bool(ctx.attrs.get("has_known_shape", False))
    op = ctx.op_type

    def apply_grad(handle: Any, local_step: Any, indices: Any, values: Any,
                   shape: Any) -> None:
        acc = _resource(handle, _SparseAccumulator, op)
        acc.check_dtype(dtype)
        acc.apply_sparse_grad(_scalar(local_step, "local_step", np.int64), indices, values,
                              shape if known else None)

    return apply_grad


@ks.kernel("SparseAccumulatorTakeGradient", device_type="CPU", kind="async")
def _sparse_take_grad_kernel(ctx: Any) -> Any:
    dtype = ctx.attrs["dtype"]
    op = ctx.op_type

    def take_grad(step: Any, done: Callable[..., None], handle: Any, num_required: Any
                  ) -> None:
        acc = _resource(handle, _SparseAccumulator, op)
        acc.check_dtype(dtype)
        acc.take_grad(_scalar(num_required, "num_required", np.int32), step, done)

    return take_grad


@ks.kernel("ResourceAccumulatorApplyGradient", "AccumulatorApplyGradient", device_type="CPU")
def _apply_grad_kernel(ctx: Any) -> Any:
    dtype = ctx.attrs["dtype"]
    op = ctx.op_type

    def apply_grad(handle: Any, local_step: Any, grad: Any) -> None:
        acc = _resource(handle, _Accumulator, op)
        acc.check_dtype(dtype)
        acc.apply_grad(_scalar(local_step, "local_step", np.int64), grad)

    return apply_grad


@ks.kernel("ResourceAccumulatorTakeGradient", "AccumulatorTakeGradient", device_type="CPU",
           kind="async")
def _take_grad_kernel(ctx: Any) -> Any:
    dtype = ctx.attrs["dtype"]
    op = ctx.op_type

    def take_grad(step: Any, done: Callable[..., None], handle: Any, num_required: Any
                  ) -> None:
        acc = _resource(handle, _Accumulator, op)
        acc.check_dtype(dtype)
        acc.take_grad(_scalar(num_required, "num_required", np.int32), step, done)

    return take_grad


@ks.kernel("ResourceAccumulatorNumAccumulated", "AccumulatorNumAccumulated",
           device_type="CPU")
def _num_accumulated_kernel(ctx: Any) -> Any:
    op = ctx.op_type

    def num_accumulated(handle: Any) -> Any:
        return np.int32(_resource(handle, _Accumulator, op).num_accumulated())

    return num_accumulated


@ks.kernel("ResourceAccumulatorSetGlobalStep", "AccumulatorSetGlobalStep", device_type="CPU")
def _set_global_step_kernel(ctx: Any) -> Any:
    op = ctx.op_type

    def set_global_step(handle: Any, new_global_step: Any) -> None:
        _resource(handle, _Accumulator, op).set_global_step(
            _scalar(new_global_step, "new_global_step", np.int64))

    return set_global_step


# =======================================================================================
# Python API
# =======================================================================================
def _as_type_list(dtypes: Any) -> list[_dt.DType]:
    if dtypes is None:
        raise TypeError("dtypes must be a DType or a list of DTypes, got None")
    if not isinstance(dtypes, (list, tuple)):
        dtypes = [dtypes]
    return [_dt.as_dtype(d) for d in dtypes]


def _as_shape_list(shapes: Any, dtypes: Sequence[Any], unknown_dim_allowed: bool = False,
                   unknown_rank_allowed: bool = False) -> list[TensorShape] | None:
    """Normalise a ``shapes`` argument: None, one shape, or a list of shapes."""
    if unknown_dim_allowed:
        if (not isinstance(shapes, (list, tuple)) or not shapes or
                any(s is None or isinstance(s, int) for s in shapes)):
            raise ValueError("When providing partial shapes, a list of shapes must be "
                             "provided.")
    if shapes is None:
        return None
    if isinstance(shapes, TensorShape):
        shapes = [shapes]
    if not isinstance(shapes, (list, tuple)):
        raise TypeError(f"shapes must be a TensorShape or a list or tuple of TensorShapes, "
                        f"got {type(shapes).__name__} instead.")
    if all(s is None or isinstance(s, (int, np.integer, Dimension)) for s in shapes):
        shapes = [shapes]  # a single shape given as a list of dims
    out = [as_shape(s) for s in shapes]
    if not unknown_dim_allowed and any(not s.is_fully_defined() for s in out):
        raise ValueError(f"All shapes must be fully defined: {out}")
    if not unknown_rank_allowed and any(s.ndims is None for s in out):
        raise ValueError(f"All shapes must have a defined rank: {out}")
    return out


def _as_name_list(names: Any, dtypes: Sequence[Any]) -> list[Any] | None:
    if names is None:
        return None
    if not isinstance(names, (list, tuple)):
        names = [names]
    if len(names) != len(dtypes):
        raise ValueError(f"List of names must have the same length as the list of dtypes, "
                         f"received len(names)={len(names)}, len(dtypes)={len(dtypes)}")
    return list(names)


def _shape_common(s1: Any, s2: Any) -> TensorShape:
    """The most specific shape both are compatible with."""
    return as_shape(s1).most_specific_compatible_shape(as_shape(s2))


def _cast(x: Any, dtype: _dt.DType) -> Tensor:
    from flowrt.graph import api_function

    return api_function("cast")(x, dtype)


class QueueBase:
    """Base class of queues (``tf.queue.QueueBase``): enqueue and dequeue tuples of
    tensors through a queue handle."""

    def __init__(self, dtypes: Any, shapes: Any, names: Any, queue_ref: Tensor):
        self._dtypes = list(dtypes)
        if shapes is not None:
            if len(shapes) != len(self._dtypes):
                raise ValueError(f"Queue shapes must have the same length as dtypes, "
                                 f"received len(shapes)={len(shapes)}, "
                                 f"len(dtypes)={len(self._dtypes)}")
            self._shapes = [as_shape(s) for s in shapes]
        else:
            self._shapes = [unknown_shape() for _ in self._dtypes]
        if names is not None:
            if len(names) != len(self._dtypes):
                raise ValueError(f"Queue names must have the same length as dtypes, "
                                 f"received len(names)={len(names)}, "
                                 f"len(dtypes)={len(self._dtypes)}")
            self._names = list(names)
        else:
            self._names = None
        self._queue_ref = queue_ref
        self._name = queue_ref.op.name.split("/")[-1]

    @staticmethod
    def from_list(index: Any, queues: Sequence["QueueBase"]) -> "QueueBase":
        """A queue whose handle is ``queues[index]`` (picked when the graph runs)."""
        if (not queues or not isinstance(queues, list) or
                not all(isinstance(q, QueueBase) for q in queues)):
            raise TypeError("A list of queues expected")
        dtypes = queues[0].dtypes
        if not all(dtypes == q.dtypes for q in queues[1:]):
            raise TypeError("Queues do not have matching component dtypes.")
        names = queues[0].names
        if not all(names == q.names for q in queues[1:]):
            raise TypeError("Queues do not have matching component names.")
        shapes = [q.shapes for q in queues]
        reduced = []
        for comp in zip(*shapes):
            s = comp[0]
            for other in comp[1:]:
                s = _shape_common(s, other)
            reduced.append(s)
        from flowrt.graph import api_function

        refs = api_function("stack")([q.queue_ref for q in queues])
        selected = api_function("gather")(refs, index)
        return QueueBase(dtypes=dtypes, shapes=reduced, names=names, queue_ref=selected)

    @property
    def queue_ref(self) -> Tensor:
        """The queue's handle tensor."""
        return self._queue_ref

    @property
    def name(self) -> str:
        """The name of the queue's handle op."""
        return self._queue_ref.op.name

    @property
    def dtypes(self) -> list[_dt.DType]:
        """The dtype of each component of an element."""
        return self._dtypes

    @property
    def shapes(self) -> list[TensorShape]:
        """The static shape of each component of an element."""
        return self._shapes

    @property
    def names(self) -> list[Any] | None:
        """The component names (enqueue/dequeue use dicts when set), or None."""
        return self._names

    def _resource(self) -> bool:
        return self._queue_ref.dtype.base_dtype is _dt.resource

    def _op(self, base: str) -> str:
        return base + "V2" if self._resource() else base

    def _check_enqueue_dtypes(self, vals: Any) -> list[Tensor]:
        if isinstance(vals, dict):
            if not self._names:
                raise ValueError("Queue must have names to enqueue a dictionary")
            if sorted(self._names, key=str) != sorted(vals.keys(), key=str):
                raise ValueError(f"Keys in dictionary to enqueue do not match names of "
                                 f"Queue.  Dictionary: {sorted(vals.keys(), key=str)}, "
                                 f"Queue: {sorted(self._names, key=str)}")
            vals = [vals[k] for k in self._names]
        else:
            if self._names:
                raise ValueError("You must enqueue a dictionary in a Queue with names")
            if not isinstance(vals, (list, tuple)):
                vals = [vals]
        # as TF: extra values are ignored; missing ones fail when the op runs
        return [convert_to_tensor(v, dtype=d, name=f"component_{i}")
                for i, (v, d) in enumerate(zip(vals, self._dtypes))]

    @staticmethod
    def _scope_vals(vals: Any) -> list[Any]:
        if isinstance(vals, (list, tuple)):
            return list(vals)
        if isinstance(vals, dict):
            return list(vals.values())
        return [vals]

    def enqueue(self, vals: Any, name: str | None = None) -> Any:
        """Enqueue one element (blocks while the queue is full); a closed queue raises
        CancelledError."""
        with name_scope(name, f"{self._name}_enqueue", self._scope_vals(vals)) as scope:
            tensors = self._check_enqueue_dtypes(vals)
            for t, shape in zip(tensors, self._shapes):
                t.shape.assert_is_compatible_with(shape)
            return apply_op(self._op("QueueEnqueue"), name=scope, handle=self._queue_ref,
                            components=tensors)

    def enqueue_many(self, vals: Any, name: str | None = None) -> Any:
        """Enqueue the slices of ``vals`` along dimension 0 as separate elements."""
        with name_scope(name, f"{self._name}_EnqueueMany",
                        self._scope_vals(vals)) as scope:
            tensors = self._check_enqueue_dtypes(vals)
            batch = tensors[0].shape.with_rank_at_least(1)[0]
            for t, shape in zip(tensors, self._shapes):
                batch = batch.merge_with(t.shape.with_rank_at_least(1)[0])
                t.shape[1:].assert_is_compatible_with(shape)
            return apply_op(self._op("QueueEnqueueMany"), name=scope,
                            handle=self._queue_ref, components=tensors)

    def _dequeue_return_value(self, tensors: Any) -> Any:
        if not isinstance(tensors, (list, tuple)):
            tensors = [tensors]
        if self._names:
            return {n: tensors[i] for i, n in enumerate(self._names)}
        if len(tensors) == 1:
            return tensors[0]
        return list(tensors)

    def dequeue(self, name: str | None = None) -> Any:
        """Dequeue one element (blocks while the queue is empty); a closed, empty queue
        raises OutOfRangeError."""
        if name is None:
            name = f"{self._name}_Dequeue"
        ret = apply_op(self._op("QueueDequeue"), name=name, handle=self._queue_ref,
                       component_types=self._dtypes)
        ret = list(ret) if isinstance(ret, (list, tuple)) else [ret]
        for t, shape in zip(ret, self._shapes):
            t.set_shape(shape)
        return self._dequeue_return_value(ret)

    def dequeue_many(self, n: Any, name: str | None = None) -> Any:
        """Dequeue ``n`` elements, concatenated along a new dimension 0."""
        if name is None:
            name = f"{self._name}_DequeueMany"
        ret = apply_op(self._op("QueueDequeueMany"), name=name, handle=self._queue_ref,
                       n=n, component_types=self._dtypes)
        ret = list(ret) if isinstance(ret, (list, tuple)) else [ret]
        nv = constant_value(ret[0].op.inputs[1])
        batch = TensorShape([None if nv is None else int(nv)])
        for t, shape in zip(ret, self._shapes):
            t.set_shape(batch.concatenate(shape))
        return self._dequeue_return_value(ret)

    def dequeue_up_to(self, n: Any, name: str | None = None) -> Any:
        """Dequeue ``n`` elements, or all that are left once the queue is closed
        (OutOfRangeError only when it is closed and empty)."""
        if name is None:
            name = f"{self._name}_DequeueUpTo"
        ret = apply_op(self._op("QueueDequeueUpTo"), name=name, handle=self._queue_ref,
                       n=n, component_types=self._dtypes)
        ret = list(ret) if isinstance(ret, (list, tuple)) else [ret]
        for t, shape in zip(ret, self._shapes):
            t.set_shape(TensorShape([None]).concatenate(shape))
        return self._dequeue_return_value(ret)

    def close(self, cancel_pending_enqueues: bool = False, name: str | None = None) -> Any:
        """Close the queue: later enqueues fail; dequeues drain what is left. Without
        ``cancel_pending_enqueues`` the close waits for enqueues already blocked; with it
        they fail with CancelledError."""
        if name is None:
            name = f"{self._name}_Close"
        return apply_op(self._op("QueueClose"), name=name, handle=self._queue_ref,
                        cancel_pending_enqueues=bool(cancel_pending_enqueues))

    def is_closed(self, name: str | None = None) -> Tensor:
        """A bool scalar: whether the queue is closed."""
        if name is None:
            name = f"{self._name}_Is_Closed"
        return apply_op(self._op("QueueIsClosed"), name=name, handle=self._queue_ref)

    def size(self, name: str | None = None) -> Tensor:
        """An int32 scalar: the number of elements in the queue."""
        if name is None:
            name = f"{self._name}_Size"
        return apply_op(self._op("QueueSize"), name=name, handle=self._queue_ref)


def _queue_handle(op_type: str, dtypes: list[_dt.DType], shapes: Any, capacity: int,
                  shared_name: Any, name: str) -> Tensor:
    g = get_default_graph()
    with g.control_dependencies(None):  # TF builds queues in an init scope
        return apply_op(op_type, name=name, component_types=dtypes, shapes=shapes or [],
                        capacity=capacity, shared_name=shared_name)


class FIFOQueue(QueueBase):
    """A queue that dequeues elements in first-in first-out order (``tf.FIFOQueue``)."""

    def __init__(self, capacity: int, dtypes: Any, shapes: Any = None, names: Any = None,
                 shared_name: str | None = None, name: str = "fifo_queue"):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes, dtypes)
        names = _as_name_list(names, dtypes)
        ref = _queue_handle("FIFOQueueV2", dtypes, shapes, capacity, shared_name, name)
        super().__init__(dtypes, shapes, names, ref)


class PaddingFIFOQueue(QueueBase):
    """A FIFO queue whose components may have unknown dims (None); dequeue_many pads
    each batch to its largest shape with zeros (``tf.PaddingFIFOQueue``)."""

    def __init__(self, capacity: int, dtypes: Any, shapes: Any, names: Any = None,
                 shared_name: str | None = None, name: str = "padding_fifo_queue"):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes, dtypes, unknown_dim_allowed=True)
        names = _as_name_list(names, dtypes)
        if len(dtypes) != len(shapes):  # type: ignore[arg-type]
            raise ValueError(f"Shapes must be provided for all components, but received "
                             f"{len(dtypes)} dtypes and {len(shapes)} shapes.")  # type: ignore
        ref = _queue_handle("PaddingFIFOQueueV2", dtypes, shapes, capacity, shared_name,
                            name)
        super().__init__(dtypes, shapes, names, ref)


class RandomShuffleQueue(QueueBase):
    """A queue that dequeues its elements in a random order (``tf.RandomShuffleQueue``);
    while it is open, a dequeue waits until it would leave ``min_after_dequeue`` elements
    behind."""

    def __init__(self, capacity: int, min_after_dequeue: int, dtypes: Any,
                 shapes: Any = None, names: Any = None, seed: int | None = None,
                 shared_name: str | None = None, name: str = "random_shuffle_queue"):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes, dtypes)
        names = _as_name_list(names, dtypes)
        from flowrt.graph import get_seed

        seed1, seed2 = get_seed(seed)
        if seed1 is None and seed2 is None:
            seed1, seed2 = 0, 0
        elif seed is None and shared_name is not None:
            # as TF: a shared queue's op seed depends only on the graph seed and its name
            digest = hashlib.md5((str(seed1) + shared_name).encode("utf-8")).hexdigest()
            seed2 = int(digest[:8], 16) & 0x7FFFFFFF
        g = get_default_graph()
        with g.control_dependencies(None):
            ref = apply_op("RandomShuffleQueueV2", name=name, component_types=dtypes,
                           shapes=shapes or [], capacity=capacity,
                           min_after_dequeue=min_after_dequeue, seed=seed1, seed2=seed2,
                           shared_name=shared_name)
        super().__init__(dtypes, shapes, names, ref)


class PriorityQueue(QueueBase):
    """A queue that dequeues its elements in ascending order of priority
    (``tf.PriorityQueue``): every element starts with an int64 priority (a scalar for
    ``enqueue``, a vector for ``enqueue_many``) followed by components of ``types``.
    ``shapes`` (a list, as TF requires; ``[]`` leaves them unspecified, which rules out
    ``dequeue_many``) gives the shapes of the components after the priority."""

    def __init__(self, capacity: int, types: Any, shapes: Any = None, names: Any = None,
                 shared_name: str | None = None, name: str = "priority_queue"):
        types = _as_type_list(types)
        shapes = _as_shape_list(shapes, types)
        if shapes is None:
            raise TypeError("Expected list for 'shapes' argument to 'priority_queue_v2' "
                            "Op, not None.")
        ref = _queue_handle("PriorityQueueV2", types, shapes, capacity, shared_name, name)
        super().__init__([_dt.int64, *types], [TensorShape([]), *shapes] if shapes else
                         shapes, names, ref)


class ConditionalAccumulatorBase:
    """Base class of conditional accumulators (``tf.ConditionalAccumulatorBase``)."""

    def __init__(self, dtype: Any, shape: Any, accumulator_ref: Tensor):
        self._dtype = _dt.as_dtype(dtype)
        self._shape = unknown_shape() if shape is None else as_shape(shape)
        self._accumulator_ref = accumulator_ref
        self._name = accumulator_ref.op.name.split("/")[-1]

    @property
    def accumulator_ref(self) -> Tensor:
        """The accumulator's handle tensor."""
        return self._accumulator_ref

    @property
    def name(self) -> str:
        """The name of the accumulator (its handle op's last name component)."""
        return self._name

    @property
    def dtype(self) -> _dt.DType:
        """The dtype of the gradients accumulated."""
        return self._dtype

    def _op(self, base: str) -> str:
        res = self._accumulator_ref.dtype.base_dtype is _dt.resource
        return "Resource" + base if res else base

    def num_accumulated(self, name: str | None = None) -> Tensor:
        """An int32 scalar: the number of gradients aggregated since the last take."""
        if name is None:
            name = f"{self._name}_NumAccumulated"
        return apply_op(self._op("AccumulatorNumAccumulated"), name=name,
                        handle=self._accumulator_ref)

    def set_global_step(self, new_global_step: Any, name: str | None = None) -> Any:
        """Set the accumulator's global step (gradients older than it are dropped)."""
        return apply_op(self._op("AccumulatorSetGlobalStep"), name=name,
                        handle=self._accumulator_ref,
                        new_global_step=_cast(convert_to_tensor(new_global_step), _dt.int64))


class ConditionalAccumulator(ConditionalAccumulatorBase):
    """Aggregates gradients (``tf.ConditionalAccumulator``): apply_grad adds a gradient
    unless its local_step is older than the accumulator's global step; take_grad waits
    for ``num_required`` gradients, returns their mean (``reduction_type='SUM'``: their
    sum), resets the count and advances the global step by one."""

    def __init__(self, dtype: Any, shape: Any = None, shared_name: str | None = None,
                 name: str = "conditional_accumulator", reduction_type: str = "MEAN"):
        ref = apply_op("ResourceConditionalAccumulator", name=name, dtype=dtype,
                       shape=shape, shared_name=shared_name, reduction_type=reduction_type)
        super().__init__(dtype, shape, ref)

    def apply_grad(self, grad: Any, local_step: Any = 0, name: str | None = None) -> Any:
        """Add ``grad`` computed at ``local_step`` (dropped silently if stale)."""
        grad = convert_to_tensor(grad, self._dtype)
        grad.shape.assert_is_compatible_with(self._shape)
        local_step = _cast(convert_to_tensor(local_step), _dt.int64)
        return apply_op(self._op("AccumulatorApplyGradient"), name=name,
                        handle=self._accumulator_ref, local_step=local_step, gradient=grad)

    def take_grad(self, num_required: Any, name: str | None = None) -> Tensor:
        """The mean (or sum) of the accumulated gradients, once ``num_required`` are in
        (blocks until then)."""
        out = apply_op(self._op("AccumulatorTakeGradient"), name=name,
                       handle=self._accumulator_ref, num_required=num_required,
                       dtype=self._dtype)
        out.set_shape(self._shape)
        return out


SparseTakeResult = collections.namedtuple("SparseAccumulatorTakeGradient",
                                          ["indices", "values", "shape"])


class SparseConditionalAccumulator(ConditionalAccumulatorBase):
    """Aggregates sparse gradients (``tf.SparseConditionalAccumulator``, TF 1.15).

    Gradients are IndexedSlices (``apply_indexed_slices_grad``) or their parts
    (``apply_grad``); one whose local_step is older than the accumulator's global step
    is dropped. A take waits for ``num_required`` gradients and returns, for each index
    that any of them had, the mean of that index's slices over the gradients that had it
    (``reduction_type='SUM'``: their sum); it resets the count and advances the global
    step by one. Uses the Ref-handle ops, as TF 1.15 did.
    """

    def __init__(self, dtype: Any, shape: Any = None, shared_name: str | None = None,
                 name: str = "sparse_conditional_accumulator",
                 reduction_type: str = "MEAN"):
        ref = apply_op("SparseConditionalAccumulator", name=name, dtype=dtype,
                       shape=shape, shared_name=shared_name, reduction_type=reduction_type)
        super().__init__(dtype, shape, ref)

    def apply_indexed_slices_grad(self, grad: Any, local_step: Any = 0,
                                  name: str | None = None) -> Operation:
        """Add the IndexedSlices ``grad`` computed at ``local_step``."""
        return self.apply_grad(grad_indices=grad.indices, grad_values=grad.values,
                               grad_shape=grad.dense_shape, local_step=local_step, name=name)

    def apply_grad(self, grad_indices: Any, grad_values: Any, grad_shape: Any = None,
                   local_step: Any = 0, name: str | None = None) -> Operation:
        """Add the gradient given as indices, values and (optionally) dense shape."""
        local_step = _cast(convert_to_tensor(local_step), _dt.int64)
        indices = _cast(convert_to_tensor(grad_indices), _dt.int64)
        shape = _cast(convert_to_tensor([] if grad_shape is None else grad_shape,
                                        dtype=None if grad_shape is not None else _dt.int64),
                      _dt.int64)
        return apply_op("SparseAccumulatorApplyGradient", name=name,
                        handle=self._accumulator_ref, local_step=local_step,
                        gradient_indices=indices, gradient_values=grad_values,
                        gradient_shape=shape, has_known_shape=grad_shape is not None,
                        dtype=self._dtype)

    def take_grad(self, num_required: Any, name: str | None = None) -> Any:
        """``(indices, values, shape)`` of the aggregate, once ``num_required`` gradients
        are in (blocks until then)."""
        out = apply_op("SparseAccumulatorTakeGradient", name=name,
                       handle=self._accumulator_ref, num_required=num_required,
                       dtype=self._dtype)
        return SparseTakeResult(*out)

    def take_indexed_slices_grad(self, num_required: Any,
                                 name: str | None = None) -> IndexedSlices:
        """The aggregate as an IndexedSlices, once ``num_required`` gradients are in."""
        indices, values, shape = self.take_grad(num_required, name=name)
        return IndexedSlices(indices=indices, values=values, dense_shape=shape)

    def num_accumulated(self, name: str | None = None) -> Tensor:
        """An int32 scalar: the number of gradients aggregated since the last take."""
        if name is None:
            name = f"{self._name}_NumAccumulated"
        return apply_op("AccumulatorNumAccumulated", name=name, handle=self._accumulator_ref)

    def set_global_step(self, new_global_step: Any, name: str | None = None) -> Operation:
        """Set the accumulator's global step (gradients older than it are dropped)."""
        return apply_op("AccumulatorSetGlobalStep", name=name, handle=self._accumulator_ref,
                        new_global_step=_cast(convert_to_tensor(new_global_step), _dt.int64))


# -- exports ------------------------------------------------------------------------------
ks.export("SparseConditionalAccumulator", SparseConditionalAccumulator)
ks.export("sparse.SparseConditionalAccumulator", SparseConditionalAccumulator)
ks.export("FIFOQueue", FIFOQueue)
ks.export("PaddingFIFOQueue", PaddingFIFOQueue)
ks.export("RandomShuffleQueue", RandomShuffleQueue)
ks.export("io.RandomShuffleQueue", RandomShuffleQueue)
ks.export("io.PaddingFIFOQueue", PaddingFIFOQueue)
ks.export("QueueBase", QueueBase)
ks.export("io.QueueBase", QueueBase)
ks.export("ConditionalAccumulator", ConditionalAccumulator)
ks.export("ConditionalAccumulatorBase", ConditionalAccumulatorBase)

for _name in ("PriorityQueue", "io.PriorityQueue", "queue.PriorityQueue"):
    ks.export(_name, PriorityQueue)
for _name, _cls in (("FIFOQueue", FIFOQueue), ("PaddingFIFOQueue", PaddingFIFOQueue),
                    ("QueueBase", QueueBase), ("RandomShuffleQueue", RandomShuffleQueue)):
    ks.export(f"queue.{_name}", _cls)

del _v2, _h, _stateful, _prefix
