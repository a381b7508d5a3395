"""TF1's queue-based input: input producers (``tf.train.string_input_producer`` ...)
and batching (``tf.train.batch``, ``shuffle_batch`` and their ``_join`` / ``maybe_``
variants), as TF 1.15's ``input.py`` builds them.

A producer fills a FIFOQueue from a tensor (shuffled each epoch unless ``shuffle`` is
False); ``num_epochs`` bounds it through :func:`limit_epochs`, a local-variable counter
(``CountUpTo``) that fails with OutOfRangeError once the epochs are used up, which ends
the queue runner and closes the queue. A batcher enqueues its tensors in a queue
(FIFOQueue, PaddingFIFOQueue with ``dynamic_pad``, RandomShuffleQueue for the shuffling
ones) and dequeues ``batch_size`` of them at a time (``dequeue_up_to`` with
``allow_smaller_final_batch``). Each adds its ``QueueRunner`` to the ``QUEUE_RUNNERS``
collection and a scalar summary of how full its queue is.

Sparse tensors are not batched (TypeError naming them).
"""
from __future__ import annotations

from typing import Any, Sequence

from ..base import dtypes as _dt
from ..base.tensor_shape import TensorShape, as_shape
from ..framework.graph import (GraphKeys, Tensor, api_function, control_dependencies,
                               convert_to_tensor, name_scope)
from ..framework.sparse_tensor import SparseTensor
from ..plugin.runtime import require_api
from ..training.coordinator import QueueRunner, add_queue_runner
from ..training.variables import Variable

__all__ = ["limit_epochs", "input_producer", "string_input_producer",
           "range_input_producer", "slice_input_producer", "match_filenames_once", "batch",
           "maybe_batch", "batch_join", "maybe_batch_join", "shuffle_batch",
           "maybe_shuffle_batch", "shuffle_batch_join", "maybe_shuffle_batch_join"]

REQUIRED_API_NAMES = frozenset({
    "constant", "identity", "count_up_to", "random_shuffle", "FIFOQueue", "PaddingFIFOQueue",
    "RandomShuffleQueue", "summary.scalar", "cast", "size", "greater", "Assert", "range",
    "shape", "gather", "maximum", "matching_files", "cond", "no_op", "dynamic_partition",
    "multiply", "subtract",
})
require_api(REQUIRED_API_NAMES)


def _op(name: str) -> Any:
    return api_function(name)


# -- producers ---------------------------------------------------------------------------
def limit_epochs(tensor: Any, num_epochs: int | None = None, name: str | None = None) -> Any:
    """``tensor``, but only ``num_epochs`` times: each evaluation counts up a local
    variable ``epochs``, and the one after the last raises OutOfRangeError."""
    if num_epochs is None:
        return tensor
    if num_epochs <= 0:
        raise ValueError(f"num_epochs must be > 0 not {num_epochs}.")
    with name_scope(name, "limit_epochs", [tensor]) as scope:
        zero64 = _op("constant")(0, dtype=_dt.int64)
        epochs = Variable(zero64, name="epochs", trainable=False,
                          collections=[GraphKeys.LOCAL_VARIABLES])
        counter = _op("count_up_to")(epochs, num_epochs)
        with control_dependencies([counter]):
            return _op("identity")(tensor, name=scope)


def _fraction_summary(queue: Any, capacity: int, name: str) -> None:
    full = _op("multiply")(_op("cast")(queue.size(), _dt.float32), 1.0 / capacity)
    _op("summary.scalar")(name, full)


def input_producer(input_tensor: Any, element_shape: Any = None,
                   num_epochs: int | None = None, shuffle: bool = True,
                   seed: int | None = None, capacity: int = 32,
                   shared_name: str | None = None, summary_name: str | None = None,
                   name: str | None = None, cancel_op: Any = None) -> Any:
    """A FIFOQueue filled with the rows of ``input_tensor`` (shuffled each epoch when
    ``shuffle``), ``num_epochs`` times or forever, by a QueueRunner."""
    with name_scope(name, "input_producer", [input_tensor]):
        input_tensor = convert_to_tensor(input_tensor, name="input_tensor")
        shape = input_tensor.shape
        element = (shape[1:] if shape.ndims is not None else as_shape(None))
        element = element.merge_with(as_shape(element_shape))
        if not element.is_fully_defined():
            raise ValueError("Either `input_tensor` must have a fully defined shape or "
                             "`element_shape` must be specified")
        if shuffle:
            input_tensor = _op("random_shuffle")(input_tensor, seed=seed)
        input_tensor = limit_epochs(input_tensor, num_epochs)
        q = _op("FIFOQueue")(capacity=capacity, dtypes=[input_tensor.dtype.base_dtype],
                             shapes=[element], shared_name=shared_name, name=name)
        enq = q.enqueue_many([input_tensor])
        add_queue_runner(QueueRunner(q, [enq], cancel_op=cancel_op))
        if summary_name is not None:
            _fraction_summary(q, capacity, summary_name)
        return q


def string_input_producer(string_tensor: Any, num_epochs: int | None = None,
                          shuffle: bool = True, seed: int | None = None, capacity: int = 32,
                          shared_name: str | None = None, name: str | None = None,
                          cancel_op: Any = None) -> Any:
    """A queue of the strings (file names) of ``string_tensor``, for a reader."""
    not_null_err = "string_input_producer requires a non-null input tensor"
    if not isinstance(string_tensor, Tensor) and len(string_tensor) == 0:
        raise ValueError(not_null_err)
    with name_scope(name, "input_producer", [string_tensor]) as scope:
        string_tensor = convert_to_tensor(string_tensor, dtype=_dt.string)
        ok = _op("greater")(_op("size")(string_tensor), 0)
        with control_dependencies([_op("Assert")(ok, [not_null_err])]):
            string_tensor = _op("identity")(string_tensor)
        return input_producer(string_tensor, element_shape=[], num_epochs=num_epochs,
                              shuffle=shuffle, seed=seed, capacity=capacity,
                              shared_name=shared_name, name=scope,
                              summary_name=f"fraction_of_{capacity}_full",
                              cancel_op=cancel_op)


def range_input_producer(limit: Any, num_epochs: int | None = None, shuffle: bool = True,
                         seed: int | None = None, capacity: int = 32,
                         shared_name: str | None = None, name: str | None = None) -> Any:
    """A queue of the integers ``0 .. limit-1``."""
    with name_scope(name, "input_producer", [limit]) as scope:
        range_tensor = _op("range")(limit)
        return input_producer(range_tensor, [], num_epochs, shuffle, seed, capacity,
                              shared_name, f"fraction_of_{capacity}_full", scope)


def slice_input_producer(tensor_list: Sequence[Any], num_epochs: int | None = None,
                         shuffle: bool = True, seed: int | None = None, capacity: int = 32,
                         shared_name: str | None = None, name: str | None = None
                         ) -> list[Tensor]:
    """One row of each tensor of ``tensor_list`` at a time (the same row of each)."""
    with name_scope(name, "input_producer", list(tensor_list)):
        tensors = [convert_to_tensor(t) for t in tensor_list]
        if not tensors:
            raise ValueError("Expected at least one tensor in slice_input_producer().")
        range_size = _op("shape")(tensors[0])[0]
        queue = range_input_producer(range_size, num_epochs=num_epochs, shuffle=shuffle,
                                     seed=seed, capacity=capacity, shared_name=shared_name)
        index = queue.dequeue()
        return [_op("gather")(t, index) for t in tensors]


def match_filenames_once(pattern: Any, name: str | None = None) -> Variable:
    """A local variable holding the files matching ``pattern``, matched once when local
    variables are initialized."""
    with name_scope(name, "matching_filenames", [pattern]) as scope:
        return Variable(name=scope, initial_value=_op("matching_files")(pattern),
                        trainable=False, validate_shape=False,
                        collections=[GraphKeys.LOCAL_VARIABLES])


# -- batching ----------------------------------------------------------------------------
def _as_tensor_list(tensors: Any) -> list[Any]:
    if isinstance(tensors, dict):
        return [tensors[k] for k in sorted(tensors)]
    if isinstance(tensors, (Tensor, SparseTensor)):
        raise TypeError(f"tensors must be a list or a dict of tensors, got {tensors}")
    return list(tensors)


def _as_tensor_list_list(tensors_list: Sequence[Any]) -> list[list[Any]]:
    if not tensors_list:
        raise ValueError("Expected at least one set of tensors")
    if isinstance(tensors_list[0], dict):
        keys = set(tensors_list[0])
        if any(set(t) != keys for t in tensors_list[1:]):
            raise ValueError("All dictionaries in tensors_list must have the same keys")
    return [_as_tensor_list(t) for t in tensors_list]


def _validate(tensor_list: list[Any]) -> list[Tensor]:
    if not tensor_list:
        raise ValueError("Expected at least one tensor in batch().")
    for t in tensor_list:
        if isinstance(t, SparseTensor):
            raise TypeError(f"flowrt does not batch SparseTensors yet: {t}")
    return [convert_to_tensor(t) for t in tensor_list]


def _validate_join(tensor_list_list: list[list[Any]]) -> list[list[Tensor]]:
    out = [_validate(tl) for tl in tensor_list_list]
    if not out:
        raise ValueError("Expected at least one input in batch_join().")
    return out


def _validate_keep_input(keep_input: Any, enqueue_many: bool) -> Tensor:
    keep_input = convert_to_tensor(keep_input)
    ndims = keep_input.shape.ndims
    if ndims is None:
        raise ValueError("`keep_input` dimensions must be known at graph construction.")
    if not enqueue_many and ndims == 1:
        raise ValueError("`keep_input` cannot be a vector when `enqueue_many=False`.")
    if ndims > 1:
        raise ValueError("`keep_input` must be 0 or 1 dimensions.")
    return keep_input


def _dtypes(tensor_list_list: list[list[Tensor]]) -> list[_dt.DType]:
    types = [t.dtype.base_dtype for t in tensor_list_list[0]]
    for other in tensor_list_list[1:]:
        if len(other) != len(types):
            raise ValueError(f"Expected {len(types)} tensors in each tensor list, got "
                             f"{len(other)}")
        got = [t.dtype.base_dtype for t in other]
        if got != types:
            raise TypeError(f"Expected types to be consistent: {types} vs. {got}.")
    return types


def _shapes(tensor_list_list: list[list[Tensor]], shapes: Any, enqueue_many: bool) -> Any:
    if shapes is not None:
        return shapes
    out = []
    for i in range(len(tensor_list_list[0])):
        merged: TensorShape | None = None
        for tl in tensor_list_list:
            s = tl[i].shape
            if s.ndims is None:
                raise ValueError(f"Cannot infer Tensor's rank: {tl[i]}")
            if enqueue_many:
                s = s.with_rank_at_least(1)[1:]
            merged = s if merged is None else merged
        out.append(merged.as_list())  # type: ignore[union-attr]
    return out


def _enqueue(queue: Any, tensor_list_list: list[list[Tensor]], threads: int,
             enqueue_many: bool, keep_input: Tensor, static: bool | None) -> None:
    """One enqueue op per tensor list (``threads`` copies for a single list), kept or
    not by ``keep_input``; their QueueRunner goes to the QUEUE_RUNNERS collection."""
    enqueue_fn = queue.enqueue_many if enqueue_many else queue.enqueue
    ops = []
    for tensor_list in tensor_list_list:
        if static is True:  # TF's smart_cond: a constant condition builds no cond
            ops.append(enqueue_fn(tensor_list))
        elif static is False:
            ops.append(_op("no_op")())
        elif keep_input.shape.ndims == 1:
            select = _op("cast")(keep_input, _dt.int32)
            kept = [_op("dynamic_partition")(t, select, num_partitions=2)[1]
                    for t in tensor_list]
            ops.append(enqueue_fn(kept))
        else:
            ops.append(_op("cond")(keep_input, lambda tl=tensor_list: enqueue_fn(tl),
                                   _op("no_op")))
    if len(tensor_list_list) == 1:
        ops = ops * threads
    add_queue_runner(QueueRunner(queue, ops))


def _as_original_type(original: Any, dequeued: Any) -> Any:
    if isinstance(original, dict):
        if len(original) == 1:  # a one-component queue dequeues a bare tensor
            dequeued = [dequeued]
        return {k: dequeued[i] for i, k in enumerate(sorted(original))}
    return dequeued


def _batch_impl(tensors_list: Sequence[Any], original: Any, batch_size: Any,
                keep_input: Any, threads: int, capacity: int, enqueue_many: bool,
                shapes: Any, dynamic_pad: bool, allow_smaller_final_batch: bool,
                shared_name: str | None, name: str | None, default: str,
                shuffle: tuple[int, Any] | None = None) -> Any:
    """What every batcher does: validate, build the queue (RandomShuffleQueue when
    ``shuffle`` = (min_after_dequeue, seed)), its enqueue ops and runner, the fullness
    summary, and the dequeue of ``batch_size`` elements."""
    static = keep_input if isinstance(keep_input, bool) else None
    tensor_list_list = _as_tensor_list_list(tensors_list)
    flat = [t for tl in tensor_list_list for t in tl]
    with name_scope(name, default, flat + [keep_input]) as scope:
        if shuffle is not None and capacity <= shuffle[0]:
            raise ValueError(f"capacity {capacity} must be bigger than min_after_dequeue "
                             f"{shuffle[0]}.")
        tensor_list_list = _validate_join(tensor_list_list)
        keep_input = _validate_keep_input(keep_input, enqueue_many)
        types = _dtypes(tensor_list_list)
        shapes = _shapes(tensor_list_list, shapes, enqueue_many)
        if shuffle is not None:
            queue = _op("RandomShuffleQueue")(capacity=capacity, min_after_dequeue=shuffle[0],
                                              seed=shuffle[1], dtypes=types, shapes=shapes,
                                              shared_name=shared_name)
        else:
            queue = _op("PaddingFIFOQueue" if dynamic_pad else "FIFOQueue")(
                capacity=capacity, dtypes=types, shapes=shapes, shared_name=shared_name)
        _enqueue(queue, tensor_list_list, threads, enqueue_many, keep_input, static)
        if shuffle is None:
            _fraction_summary(queue, capacity, f"fraction_of_{capacity}_full")
        else:
            over = _op("maximum")(0, _op("subtract")(queue.size(), shuffle[0]))
            full = _op("multiply")(_op("cast")(over, _dt.float32),
                                   1.0 / (capacity - shuffle[0]))
            _op("summary.scalar")(f"fraction_over_{shuffle[0]}_of_"
                                  f"{capacity - shuffle[0]}_full", full)
        if allow_smaller_final_batch:
            dequeued = queue.dequeue_up_to(batch_size, name=scope)
        else:
            dequeued = queue.dequeue_many(batch_size, name=scope)
        return _as_original_type(original, dequeued)


def batch(tensors: Any, batch_size: Any, num_threads: int = 1, capacity: int = 32,
          enqueue_many: bool = False, shapes: Any = None, dynamic_pad: bool = False,
          allow_smaller_final_batch: bool = False, shared_name: str | None = None,
          name: str | None = None) -> Any:
    """Batches of ``batch_size`` of ``tensors`` (a list or dict), in order, filled by
    ``num_threads`` threads of a QueueRunner."""
    return _batch_impl([tensors], tensors, batch_size, True, num_threads, capacity,
                       enqueue_many, shapes, dynamic_pad, allow_smaller_final_batch,
                       shared_name, name, "batch")


def maybe_batch(tensors: Any, keep_input: Any, batch_size: Any, num_threads: int = 1,
                capacity: int = 32, enqueue_many: bool = False, shapes: Any = None,
                dynamic_pad: bool = False, allow_smaller_final_batch: bool = False,
                shared_name: str | None = None, name: str | None = None) -> Any:
    """:func:`batch`, enqueuing only the elements for which ``keep_input`` is true."""
    return _batch_impl([tensors], tensors, batch_size, keep_input, num_threads, capacity,
                       enqueue_many, shapes, dynamic_pad, allow_smaller_final_batch,
                       shared_name, name, "batch")


def batch_join(tensors_list: Sequence[Any], batch_size: Any, capacity: int = 32,
               enqueue_many: bool = False, shapes: Any = None, dynamic_pad: bool = False,
               allow_smaller_final_batch: bool = False, shared_name: str | None = None,
               name: str | None = None) -> Any:
    """Batches from several lists of tensors, one enqueuing thread per list."""
    return _batch_impl(tensors_list, tensors_list[0] if tensors_list else None, batch_size,
                       True, 1, capacity, enqueue_many, shapes, dynamic_pad,
                       allow_smaller_final_batch, shared_name, name, "batch_join")


def maybe_batch_join(tensors_list: Sequence[Any], keep_input: Any, batch_size: Any,
                     capacity: int = 32, enqueue_many: bool = False, shapes: Any = None,
                     dynamic_pad: bool = False, allow_smaller_final_batch: bool = False,
                     shared_name: str | None = None, name: str | None = None) -> Any:
    """:func:`batch_join` with ``keep_input`` as for :func:`maybe_batch`."""
    return _batch_impl(tensors_list, tensors_list[0] if tensors_list else None, batch_size,
                       keep_input, 1, capacity, enqueue_many, shapes, dynamic_pad,
                       allow_smaller_final_batch, shared_name, name, "batch_join")


def shuffle_batch(tensors: Any, batch_size: Any, capacity: int, min_after_dequeue: int,
                  num_threads: int = 1, seed: int | None = None, enqueue_many: bool = False,
                  shapes: Any = None, allow_smaller_final_batch: bool = False,
                  shared_name: str | None = None, name: str | None = None) -> Any:
    """Batches of ``tensors`` in a random order, from a RandomShuffleQueue that keeps at
    least ``min_after_dequeue`` elements while it is open."""
    return _batch_impl([tensors], tensors, batch_size, True, num_threads, capacity,
                       enqueue_many, shapes, False, allow_smaller_final_batch, shared_name,
                       name, "shuffle_batch", (min_after_dequeue, seed))


def maybe_shuffle_batch(tensors: Any, batch_size: Any, capacity: int,
                        min_after_dequeue: int, keep_input: Any, num_threads: int = 1,
                        seed: int | None = None, enqueue_many: bool = False,
                        shapes: Any = None, allow_smaller_final_batch: bool = False,
                        shared_name: str | None = None, name: str | None = None) -> Any:
    """:func:`shuffle_batch` with ``keep_input`` as for :func:`maybe_batch`."""
    return _batch_impl([tensors], tensors, batch_size, keep_input, num_threads, capacity,
                       enqueue_many, shapes, False, allow_smaller_final_batch, shared_name,
                       name, "shuffle_batch", (min_after_dequeue, seed))


def shuffle_batch_join(tensors_list: Sequence[Any], batch_size: Any, capacity: int,
                       min_after_dequeue: int, seed: int | None = None,
                       enqueue_many: bool = False, shapes: Any = None,
                       allow_smaller_final_batch: bool = False,
                       shared_name: str | None = None, name: str | None = None) -> Any:
    """:func:`shuffle_batch` from several lists of tensors, one thread per list."""
    return _batch_impl(tensors_list, tensors_list[0] if tensors_list else None, batch_size,
                       True, 1, capacity, enqueue_many, shapes, False,
                       allow_smaller_final_batch, shared_name, name, "shuffle_batch_join",
                       (min_after_dequeue, seed))


def maybe_shuffle_batch_join(tensors_list: Sequence[Any], batch_size: Any, capacity: int,
                             min_after_dequeue: int, keep_input: Any,
                             seed: int | None = None, enqueue_many: bool = False,
                             shapes: Any = None, allow_smaller_final_batch: bool = False,
                             shared_name: str | None = None, name: str | None = None
                             ) -> Any:
    """:func:`shuffle_batch_join` with ``keep_input`` as for :func:`maybe_batch`."""
    return _batch_impl(tensors_list, tensors_list[0] if tensors_list else None, batch_size,
                       keep_input, 1, capacity, enqueue_many, shapes, False,
                       allow_smaller_final_batch, shared_name, name, "shuffle_batch_join",
                       (min_after_dequeue, seed))


#: the names of this module under ``tf.*`` (published by the standard plugin)
API: dict[str, Any] = {}
for _fn in (limit_epochs, input_producer, string_input_producer, range_input_producer,
            slice_input_producer, match_filenames_once, batch, maybe_batch, batch_join,
            maybe_batch_join, shuffle_batch, maybe_shuffle_batch, shuffle_batch_join,
            maybe_shuffle_batch_join):
    API[f"train.{_fn.__name__}"] = _fn
API["io.match_filenames_once"] = match_filenames_once
