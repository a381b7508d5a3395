"""The rest of TF 1.15's ``tf.data``: the Dataset methods ``list_files``, ``window``,
``reduce``, ``shard``, ``enumerate``, ``from_sparse_tensor_slices`` (the Dataset class
delegates to this module), and ``tf.data.experimental`` (``tf.compat.v1.data.experimental``):
transformations (``map_and_batch``, ``scan``, ``group_by_window``,
``bucket_by_sequence_length`` ...), sources (``CsvDataset``, ``Counter``,
``RandomDataset``, ``make_csv_dataset`` ...), and the functions that run a dataset in one
op (``get_single_element``, ``cardinality``, ``TFRecordWriter.write``).

Datasets here are :class:`flowrt.inputs.dataset.Dataset` subclasses like the core ones:
a description built with the graph, walked element by element by ``_elements(env)``.
Dataset components (the elements of ``window``, the groups of ``group_by_window``) are
:class:`~flowrt.inputs.dataset.WindowValue` lists at run time; a function traced on such
an element receives a Dataset for each of them.
"""
from __future__ import annotations

import csv
import itertools
from typing import Any, Callable, Iterator

import numpy as np

from ..base import dtypes as _dt
from ..base import errors
from ..base.tensor_shape import TensorShape, as_shape, unknown_shape
from ..framework import gfile
from ..framework.graph import Tensor, api_function, apply_op, get_default_graph, get_seed
from ..framework.session import Session
from ..framework.sparse_tensor import SparseTensor, SparseTensorValue
from .dataset import (AUTOTUNE, INFINITE_CARDINALITY, SPARSE, UNKNOWN_CARDINALITY, Dataset,
                      DatasetLeaf, Env, Flat, TracedFunction, WindowValue, _BatchDataset,
                      _CacheDataset, _ConcatenateDataset, _FilterDataset, _MapDataset,
                      _normalize_input, _PrefetchDataset, _RangeDataset, _RepeatDataset,
                      _ShuffleDataset, _TakeSkipDataset, _template, _TensorsDataset,
                      _ZipDataset, flatten, op_types_shapes, pack_as, register_dataset,
                      sparse_rows)
from ..plugin.runtime import require_api
from .file_datasets import checked_name, file_check
from .readers import TextLineSource

__all__ = ["list_files", "CsvDataset", "RandomDataset", "Counter", "TFRecordWriter",
           "get_single_element", "cardinality", "DatasetSpec", "NumpyIterator"]

#: the op API names this module calls by name (checked by the runtime)
REQUIRED_API_NAMES = frozenset({"io.parse_example", "cast"})
require_api(REQUIRED_API_NAMES)

_INT64_MAX = np.iinfo(np.int64).max


def _int(env: Env, t: Any) -> int:
    return int(np.asarray(env.value(t)))


# =======================================================================================
# Dataset methods
# =======================================================================================
class _ListFilesDataset(Dataset):
    """The file names matching ``patterns``, sorted (TF's MatchingFiles)."""

    def __init__(self, patterns: Any):
        super().__init__(None, [_dt.string], [TensorShape([])])
        self._patterns = self._capture(patterns, _dt.string, "file_pattern")

    def _names(self, env: Env) -> list[str]:
        pats = [p.decode() if isinstance(p, bytes) else str(p) for p in
                np.asarray(env.value(self._patterns), dtype=object).reshape(-1)]
        found = sorted({f for p in pats for f in gfile.glob(p)})
        check = file_check(env)
        if check is not None:  # under file roots: only the names inside them, as MatchingFiles
            found = [f for f in found if _allowed(check, f)]
        if not found:
            raise errors.InvalidArgumentError(
                None, None, f"assertion failed: [No files matched pattern: "
                f"{', '.join(pats)}]")
        return found

    def _elements(self, env: Env) -> Iterator[Flat]:
        for f in self._names(env):
            yield (np.array(f.encode(), dtype=object),)


def _allowed(check: Any, name: str) -> bool:
    try:
        check(name, "ListFiles")
    except errors.PermissionDeniedError:
        return False
    return True


def list_files(file_pattern: Any, shuffle: bool | None = None,
               seed: int | None = None) -> Dataset:
    """``Dataset.list_files``: the files matching ``file_pattern`` (a string, a list of
    them or a string tensor), shuffled unless ``shuffle=False`` (a new order each epoch).

    :raises errors.InvalidArgumentError: at run time when nothing matches"""
    ds: Dataset = _ListFilesDataset(file_pattern)
    if shuffle is None or shuffle:
        ds = _ShuffleDataset(ds, _INT64_MAX, seed, True)  # the buffer holds every name
    return ds


class _WindowDataset(Dataset):
    def __init__(self, src: Dataset, size: Any, shift: Any, stride: Any, drop: Any):
        leaves = [DatasetLeaf(None, [t], [s]) for t, s in zip(src._types, src._shapes)]
        super().__init__(pack_as(src._structure, leaves), src._types, src._shapes, (src,))
        self._size = self._capture(size, _dt.int64, "size")
        self._shift = self._capture(size if shift is None else shift, _dt.int64, "shift")
        self._stride = self._capture(stride, _dt.int64, "stride")
        self._drop = self._capture(drop, _dt.bool, "drop_remainder")

    def _elements(self, env: Env) -> Iterator[Flat]:
        """TF's windows: ``size`` elements ``stride`` apart, starting every ``shift``
        elements; the last partial ones unless ``drop_remainder``."""
        size, shift, stride = (_int(env, t) for t in (self._size, self._shift, self._stride))
        drop = bool(np.asarray(env.value(self._drop)))
        for name, v in (("Window size", size), ("Window shift", shift),
                        ("Window stride", stride)):
            if v <= 0:
                raise errors.InvalidArgumentError(None, None,
                                                  f"{name} must be greater than zero.")
        span = (size - 1) * stride + 1
        src = self._input_datasets[0]._elements(env)
        buf: list[Flat] = []
        end = False
        while True:
            while len(buf) < span and not end:
                el = next(src, None)
                if el is None:
                    end = True
                else:
                    buf.append(el)
            if not buf or (drop and len(buf) < span):
                return
            win = buf[0:span:stride]
            yield tuple(WindowValue([(el[c],) for el in win]) for c in range(len(buf[0])))
            skip = shift - len(buf)
            del buf[:shift]
            while skip > 0 and not end:
                end = next(src, None) is None
                skip -= 1


class _ReduceDataset(Dataset):
    """One element: the state after ``reduce_func`` has seen every element."""

    def __init__(self, src: Dataset, initial_state: Any, reduce_func: Callable[..., Any],
                 kind: str = "reduce", scan: bool = False):
        """Trace ``reduce_func(state, element)`` (a ``(new_state, output)`` pair when
        ``scan``), relaxing the state's static shapes until the function keeps them.

        :raises TypeError: when the new state's structure or dtypes differ"""
        init = _normalize_input(initial_state)
        if any(isinstance(v, SparseTensor) for v in flatten(init)):
            raise TypeError(f"A SparseTensor state is not supported by `{kind}`")
        self._captured = []
        ts = [self._capture(v, None, "initial_state") for v in flatten(init)]
        state_t = _template(init)
        types = [t.dtype.base_dtype for t in ts]
        shapes = [t.shape for t in ts]
        self._scan = scan
        for _ in range(8):  # relax the state's shapes until the function keeps them
            fn = TracedFunction(reduce_func, (state_t, src._structure), types + src._types,
                                shapes + src._shapes, kind)
            new_state = fn.structure[0] if scan else fn.structure
            n = len(types)
            if scan and (not isinstance(fn.structure, tuple) or len(fn.structure) != 2):
                raise TypeError("The scan function must return a pair comprising the new "
                                "state and the output value.")
            got_types = fn.types[:n]
            if not _same_nest(new_state, state_t) or got_types != types:
                raise TypeError(f"The element types for the new state must match the "
                                f"initial state. Expected {pack_as(state_t, types)}; got "
                                f"{pack_as(new_state, got_types)}.")
            relaxed = [_relax(a, b) for a, b in zip(shapes, fn.shapes[:n])]
            if all(r.as_tuple() == a.as_tuple() for r, a in zip(relaxed, shapes)):
                break
            shapes = relaxed
        self._fn = fn
        if scan:
            out = fn.structure[1]
            super().__init__(out, fn.types[n:], fn.shapes[n:], (src,))
        else:
            super().__init__(state_t, types, shapes, (src,))
        self._captured = ts + list(fn.captured)
        self._n_state = n

    def _elements(self, env: Env) -> Iterator[Flat]:
        state = [np.asarray(env.value(t)) for t in self._captured[:self._n_state]]
        for el in self._input_datasets[0]._elements(env):
            out = env.call(self._fn, (*state, *el))
            state = list(out[:self._n_state])
            if self._scan:
                yield tuple(out[self._n_state:])
        if not self._scan:
            yield tuple(state)


def _same_nest(a: Any, b: Any) -> bool:
    if isinstance(a, (tuple, dict)) or isinstance(b, (tuple, dict)):
        if type(a) is not type(b) and not (isinstance(a, tuple) and isinstance(b, tuple)):
            return False
        if isinstance(a, dict):
            return sorted(a) == sorted(b) and all(_same_nest(a[k], b[k]) for k in a)
        return len(a) == len(b) and all(_same_nest(x, y) for x, y in zip(a, b))
    return True


def _relax(a: TensorShape, b: TensorShape) -> TensorShape:
    da, db = a.as_tuple(), b.as_tuple()
    if da is None or db is None or len(da) != len(db):
        return unknown_shape()
    return TensorShape([x if x == y else None for x, y in zip(da, db)])


def reduce(dataset: Dataset, initial_state: Any, reduce_func: Callable[..., Any]) -> Any:
    """``Dataset.reduce``: ``reduce_func(state, element)`` over every element, from
    ``initial_state``; the final state as tensors (computed when they are run)."""
    return get_single_element(_ReduceDataset(dataset, initial_state, reduce_func))


class _ShardDataset(Dataset):
    def __init__(self, src: Dataset, num_shards: Any, index: Any):
        super().__init__(src._structure, src._types, src._shapes, (src,))
        self._num = self._capture(num_shards, _dt.int64, "num_shards")
        self._index = self._capture(index, _dt.int64, "index")

    def _elements(self, env: Env) -> Iterator[Flat]:
        n, i = _int(env, self._num), _int(env, self._index)
        if n <= 0:
            raise errors.InvalidArgumentError(None, None, "Number of shards must be greater "
                                              f"than zero (currently num_shards = {n}).")
        if not 0 <= i < n:
            raise errors.InvalidArgumentError(None, None, f"Index must be between 0 and "
                                              f"{n - 1} (currently index = {i}).")
        yield from itertools.islice(self._input_datasets[0]._elements(env), i, None, n)


def enumerate_ds(dataset: Dataset, start: Any = 0) -> Dataset:
    """``Dataset.enumerate``: ``(index, element)`` pairs, the index int64 from ``start``."""
    return _ZipDataset((_RangeDataset(start, _INT64_MAX), dataset))


class _SparseSlicesDataset(Dataset):
    def __init__(self, sparse: Any):
        if isinstance(sparse, SparseTensorValue):
            sparse = SparseTensor.from_value(sparse)
        if not isinstance(sparse, SparseTensor):
            raise TypeError(f"`sparse_tensor` must be a `tf.SparseTensor` object. Was "
                            f"{sparse!r}.")
        rank = sparse.shape.ndims
        r = None if rank is None else rank - 1
        super().__init__((None, None, None), [_dt.int64, sparse.dtype, _dt.int64],
                         [TensorShape([None, r]), TensorShape([None]), TensorShape([r])])
        self._captured = [sparse.indices, sparse.values, sparse.dense_shape]

    def _elements(self, env: Env) -> Iterator[Flat]:
        ind, vals, shape = (np.asarray(env.value(t)) for t in self._captured)
        for row in sparse_rows(SparseTensorValue(ind, vals, shape)):
            yield (np.asarray(row.indices, np.int64), row.values,
                   np.asarray(row.dense_shape, np.int64))


def from_sparse_tensor_slices(sparse_tensor: Any) -> Dataset:
    """``Dataset.from_sparse_tensor_slices``: per row of ``sparse_tensor``, the tuple
    ``(indices, values, dense_shape)`` of that row (dense tensors, as TF 1.15)."""
    return _SparseSlicesDataset(sparse_tensor)


# =======================================================================================
# tf.data.experimental transformations (each returns a function of a dataset)
# =======================================================================================
def map_and_batch(map_func: Callable[..., Any], batch_size: Any,
                  num_parallel_batches: Any = None, drop_remainder: bool = False,
                  num_parallel_calls: Any = None) -> Callable[[Dataset], Dataset]:
    """``map(map_func)`` then ``batch(batch_size, drop_remainder)``."""
    if num_parallel_batches is not None and num_parallel_calls is not None:
        raise ValueError("The `num_parallel_batches` and `num_parallel_calls` arguments "
                         "are mutually exclusive.")
    return lambda ds: ds.map(map_func).batch(batch_size, drop_remainder)


def shuffle_and_repeat(buffer_size: Any, count: Any = None,
                       seed: int | None = None) -> Callable[[Dataset], Dataset]:
    """``shuffle(buffer_size, seed)`` then ``repeat(count)``, a new order each epoch."""
    return lambda ds: ds.shuffle(buffer_size, seed).repeat(count)


def parallel_interleave(map_func: Callable[..., Any], cycle_length: Any,
                        block_length: Any = 1, sloppy: bool = False,
                        buffer_output_elements: Any = None,
                        prefetch_input_elements: Any = None
                        ) -> Callable[[Dataset], Dataset]:
    """``interleave(map_func, cycle_length, block_length)`` in its deterministic order
    (``sloppy`` allows any order; this one is it)."""
    return lambda ds: ds.interleave(map_func, cycle_length, block_length)


class _IgnoreErrorsDataset(Dataset):
    def __init__(self, src: Dataset):
        super().__init__(src._structure, src._types, src._shapes, (src,))

    def _elements(self, env: Env) -> Iterator[Flat]:
        """The input's elements; an element whose map/filter function fails is dropped
        (an error elsewhere ends the input, as a failed source would)."""
        child = Env({}, env)
        child.values = env.values
        child.skip_errors = True  # read by Env.call's callers: map and filter
        it = self._input_datasets[0]._elements(child)
        while True:
            try:
                el = next(it)
            except StopIteration:
                return
            except errors.OpError:
                return
            yield el


def ignore_errors(log_warning: bool = False) -> Callable[[Dataset], Dataset]:
    """Drop the elements whose production raises an error."""
    return _IgnoreErrorsDataset


def unbatch() -> Callable[[Dataset], Dataset]:
    """``Dataset.unbatch``."""
    return lambda ds: ds.unbatch()


def prefetch_to_device(device: str, buffer_size: Any = None) -> Callable[[Dataset], Dataset]:
    """Prefetch ``buffer_size`` elements (host memory serves every device here)."""
    return lambda ds: ds.prefetch(AUTOTUNE if buffer_size is None else buffer_size)


def copy_to_device(target_device: str, source_device: str = "/cpu:0"
                   ) -> Callable[[Dataset], Dataset]:
    """The dataset unchanged (its elements are host values on every device here)."""
    return lambda ds: ds


def enumerate_dataset(start: Any = 0) -> Callable[[Dataset], Dataset]:
    """``Dataset.enumerate(start)``."""
    return lambda ds: enumerate_ds(ds, start)


def scan(initial_state: Any, scan_func: Callable[..., Any]) -> Callable[[Dataset], Dataset]:
    """``scan_func(state, element) -> (new_state, output)``: the outputs, in order."""
    return lambda ds: _ReduceDataset(ds, initial_state, scan_func, "scan", scan=True)


class _TakeWhileDataset(Dataset):
    def __init__(self, src: Dataset, predicate: Callable[..., Any]):
        self._fn = TracedFunction(predicate, src._structure, src._types, src._shapes,
                                  "take_while")
        if self._fn.types != [_dt.bool] or self._fn.shapes[0].ndims not in (None, 0):
            raise ValueError("`predicate` must return a scalar boolean tensor.")
        super().__init__(src._structure, src._types, src._shapes, (src,))
        self._captured = list(self._fn.captured)

    def _elements(self, env: Env) -> Iterator[Flat]:
        for el in self._input_datasets[0]._elements(env):
            if not bool(np.asarray(env.call(self._fn, el)[0])):
                return
            yield el


def take_while(predicate: Callable[..., Any]) -> Callable[[Dataset], Dataset]:
    """The elements up to the first for which ``predicate`` is False."""
    return lambda ds: _TakeWhileDataset(ds, predicate)


class _GroupByWindowDataset(Dataset):
    def __init__(self, src: Dataset, key_func: Callable[..., Any],
                 reduce_func: Callable[..., Any], window_size: Any,
                 window_size_func: Callable[..., Any] | None):
        """Trace ``key_func(element)``, ``reduce_func(key, window_dataset)`` and
        ``window_size_func(key)`` (or capture ``window_size``)."""
        self._key = TracedFunction(key_func, src._structure, src._types, src._shapes,
                                   "key_func")
        if self._key.types != [_dt.int64] or self._key.shapes[0].ndims not in (None, 0):
            raise ValueError("`key_func` must return a single tf.int64 tensor. Got type="
                             f"{self._key.types} and shape={self._key.shapes}")
        leaf = DatasetLeaf(src._structure, src._types, src._shapes)
        self._reduce = TracedFunction(reduce_func, (None, leaf), [_dt.int64, _dt.int64],
                                      [TensorShape([]), TensorShape([])], "reduce_func",
                                      want_dataset=True)
        inner = self._reduce.dataset
        assert inner is not None
        super().__init__(inner._structure, inner._types, inner._shapes, (src,))
        self._inner = inner
        self._size_fn = None
        self._size: Any = None
        if window_size_func is not None:
            self._size_fn = TracedFunction(window_size_func, None, [_dt.int64],
                                           [TensorShape([])], "window_size_func")
        else:
            self._size = self._capture(window_size, _dt.int64, "window_size")
        self._captured += list(self._key.captured) + list(self._reduce.captured) + \
            (list(self._size_fn.captured) if self._size_fn else [])

    def _window_size(self, env: Env, key: int) -> int:
        n = int(np.asarray(env.call(self._size_fn, (np.int64(key),))[0])) \
            if self._size_fn is not None else _int(env, self._size)
        if n <= 0:
            raise errors.InvalidArgumentError(None, None,
                                              "Window size must be greater than zero, but "
                                              f"got {n}.")
        return n

    def _flush(self, env: Env, key: int, group: list[Flat]) -> Iterator[Flat]:
        el = (np.int64(key), WindowValue(group))
        outs = env.call(self._reduce, el)
        yield from self._inner._elements(self._reduce.child_env(env, el, outs, self._inner))

    def _elements(self, env: Env) -> Iterator[Flat]:
        """Group by key; a group reaching its window size goes through ``reduce_func``;
        at the end the rest, by ascending key (TF's order)."""
        groups: dict[int, list[Flat]] = {}
        for el in self._input_datasets[0]._elements(env):
            key = int(np.asarray(env.call(self._key, el)[0]))
            groups.setdefault(key, []).append(el)
            if len(groups[key]) >= self._window_size(env, key):
                yield from self._flush(env, key, groups.pop(key))
        for key in sorted(groups):
            yield from self._flush(env, key, groups.pop(key))


def group_by_window(key_func: Callable[..., Any], reduce_func: Callable[..., Any],
                    window_size: Any = None, window_size_func: Callable[..., Any] | None = None
                    ) -> Callable[[Dataset], Dataset]:
    """Elements grouped by ``key_func``; each window of up to ``window_size`` elements
    of a key is passed to ``reduce_func(key, dataset)`` and its elements emitted."""
    def apply(ds: Dataset) -> Dataset:
        if (window_size is None) == (window_size_func is None):  # checked when applied
            raise ValueError("Either the `window_size` argument or the `window_size_func` "
                             "argument must be specified.")
        return _GroupByWindowDataset(ds, key_func, reduce_func, window_size,
                                     window_size_func)
    return apply


class _BucketDataset(Dataset):
    def __init__(self, src: Dataset, length_func: Callable[..., Any], boundaries: list[int],
                 batch_sizes: list[int], padded_shapes: Any, padding_values: Any,
                 pad_to_boundary: bool, no_padding: bool, drop_remainder: bool):
        """One padded batcher per bucket (the same padding rules as ``padded_batch``)."""
        if len(batch_sizes) != len(boundaries) + 1:
            raise ValueError("len(bucket_batch_sizes) must equal len(bucket_boundaries) + 1")
        if list(boundaries) != sorted(boundaries):
            raise ValueError("bucket_boundaries must be sorted")
        self._len = TracedFunction(length_func, src._structure, src._types, src._shapes,
                                   "element_length_func")
        self._bounds = [int(b) for b in boundaries]
        self._sizes = [int(b) for b in batch_sizes]
        self._pad_boundary = pad_to_boundary
        if no_padding:
            self._batchers = [_BatchDataset(src, n, drop_remainder) for n in self._sizes]
        else:
            shapes = padded_shapes if padded_shapes is not None else \
                pack_as(src._structure, [s if s.ndims is not None else unknown_shape()
                                         for s in src._shapes])
            self._batchers = [_BatchDataset(src, n, drop_remainder, shapes, padding_values)
                              for n in self._sizes]
        b0 = self._batchers[0]
        super().__init__(src._structure, src._types,
                         [TensorShape([None]).concatenate(s[1:]) for s in b0._shapes], (src,))
        self._drop = bool(drop_remainder)
        self._captured = list(self._len.captured)

    def _batch(self, bucket: int, buf: list[Flat]) -> Flat:
        b = self._batchers[bucket]
        if self._pad_boundary and b._padded:
            if bucket == len(self._bounds):
                raise errors.InvalidArgumentError(
                    None, None, "When pad_to_bucket_boundary=True, elements must have "
                    "length < max(bucket_boundaries).")
            saved = b._pad_shapes
            b._pad_shapes = [TensorShape([self._bounds[bucket] - 1 if d is None else d
                                          for d in s.as_tuple()]) for s in saved]
            try:
                return b._stack(buf)
            finally:
                b._pad_shapes = saved
        return b._stack(buf)

    def _elements(self, env: Env) -> Iterator[Flat]:
        buckets: dict[int, list[Flat]] = {}
        for el in self._input_datasets[0]._elements(env):
            n = int(np.asarray(env.call(self._len, el)[0]))
            bucket = sum(1 for b in self._bounds if n >= b)
            buckets.setdefault(bucket, []).append(el)
            if len(buckets[bucket]) == self._sizes[bucket]:
                yield self._batch(bucket, buckets.pop(bucket))
        if not self._drop:
            for bucket in sorted(buckets):
                yield self._batch(bucket, buckets.pop(bucket))


def bucket_by_sequence_length(element_length_func: Callable[..., Any],
                              bucket_boundaries: list[int], bucket_batch_sizes: list[int],
                              padded_shapes: Any = None, padding_values: Any = None,
                              pad_to_bucket_boundary: bool = False, no_padding: bool = False,
                              drop_remainder: bool = False) -> Callable[[Dataset], Dataset]:
    """Elements bucketed by ``element_length_func`` (bucket ``i`` holds lengths in
    ``[boundaries[i-1], boundaries[i])``), each bucket padded and batched by its batch
    size; the remainders at the end by ascending bucket."""
    return lambda ds: _BucketDataset(ds, element_length_func, bucket_boundaries,
                                     bucket_batch_sizes, padded_shapes, padding_values,
                                     pad_to_bucket_boundary, no_padding, drop_remainder)


class _DenseToSparseBatchDataset(Dataset):
    def __init__(self, src: Dataset, batch_size: Any, row_shape: Any):
        if len(src._types) != 1 or src._structure is not None:
            raise TypeError("dense_to_sparse_batch needs a dataset of single tensors")
        self._row = [-1 if d is None else int(d) for d in as_shape(row_shape).as_tuple()] \
            if not isinstance(row_shape, Tensor) else None
        if self._row is None:
            raise TypeError("row_shape must be a static shape here")
        super().__init__(SPARSE, src._types,
                         [TensorShape([None]).concatenate(
                             TensorShape([None if d < 0 else d for d in self._row]))], (src,))
        self._size = self._capture(batch_size, _dt.int64, "batch_size")

    def _elements(self, env: Env) -> Iterator[Flat]:
        n = _int(env, self._size)
        if n <= 0:
            raise errors.InvalidArgumentError(None, None,
                                              "Batch size must be greater than zero.")
        src = self._input_datasets[0]._elements(env)
        while True:
            batch = [np.asarray(el[0]) for el in itertools.islice(src, n)]
            if not batch:
                return
            yield (self._sparse(batch),)

    def _sparse(self, batch: list[np.ndarray]) -> SparseTensorValue:
        """Every entry of the batch's elements as a value at ``[i, *position]``.

        :raises errors.InvalidArgumentError: an element of another rank than row_shape
        :raises errors.DataLossError: an element larger than row_shape"""
        rank = len(self._row)
        shape = list(self._row)
        ind, vals = [], []
        for i, a in enumerate(batch):
            if a.ndim != rank:
                raise errors.InvalidArgumentError(
                    None, None, f"Input element had shape ({', '.join(map(str, a.shape))}) "
                    f"that is incompatible with the row shape ({', '.join(map(str, shape))}).")
            for k, (d, w) in enumerate(zip(a.shape, self._row)):
                if w >= 0 and d > w:
                    raise errors.DataLossError(
                        None, None, f"Input element had shape ({', '.join(map(str, a.shape))}"
                        f") that is incompatible with the row shape "
                        f"({', '.join(map(str, self._row))}).")
                if w < 0:
                    shape[k] = max(shape[k], d)
            idx = np.indices(a.shape).reshape(rank, -1).T
            ind.append(np.concatenate([np.full((len(idx), 1), i), idx], axis=1))
            vals.append(a.reshape(-1))
        return SparseTensorValue(np.concatenate(ind).astype(np.int64).reshape(-1, rank + 1),
                                 np.concatenate(vals),
                                 np.array([len(batch), *[max(d, 0) for d in shape]],
                                          np.int64))


def dense_to_sparse_batch(batch_size: Any, row_shape: Any) -> Callable[[Dataset], Dataset]:
    """Batches of ``batch_size`` elements as one SparseTensor of dense shape
    ``[n] + row_shape`` (every entry of every element a value)."""
    return lambda ds: _DenseToSparseBatchDataset(ds, batch_size, row_shape)


class _AssertCardinalityDataset(Dataset):
    def __init__(self, src: Dataset, expected: Any):
        super().__init__(src._structure, src._types, src._shapes, (src,))
        self._expected = self._capture(expected, _dt.int64, "expected_cardinality")

    def _elements(self, env: Env) -> Iterator[Flat]:
        want = _int(env, self._expected)
        n = 0
        for el in self._input_datasets[0]._elements(env):
            n += 1
            if want != INFINITE_CARDINALITY and n > want:
                raise errors.FailedPreconditionError(
                    None, None, f"Input dataset was expected to contain {_count(want)} but "
                    f"contained at least {_count(want + 1)}.")
            yield el
        if want == INFINITE_CARDINALITY or n < want:
            raise errors.FailedPreconditionError(
                None, None, f"Input dataset was expected to contain {_count(want)} but "
                f"contained only {_count(n)}.")


def _count(n: int) -> str:
    if n == INFINITE_CARDINALITY:
        return "an infinite number of elements"
    return f"{n} element{'' if n == 1 else 's'}"


def assert_cardinality(expected_cardinality: Any) -> Callable[[Dataset], Dataset]:
    """The dataset, failing with FailedPreconditionError when it does not have
    ``expected_cardinality`` elements."""
    return lambda ds: _AssertCardinalityDataset(ds, expected_cardinality)


# =======================================================================================
# Sources
# =======================================================================================
class _DirectedDataset(Dataset):
    """Elements of ``datasets[i]`` for each ``i`` the selector dataset gives; an
    exhausted input is skipped; the end when the selector or every input ends."""

    def __init__(self, datasets: list[Dataset], selector: Dataset):
        if not datasets:
            raise ValueError("`datasets` must be a non-empty list of datasets.")
        first = datasets[0]
        for d in datasets:
            if not isinstance(d, Dataset):
                raise TypeError(f"`datasets` must be a list of datasets, got {d!r}")
            if d._types != first._types or not _same_nest(d._structure, first._structure):
                raise TypeError("All datasets must have the same type structure.")
        if selector._types != [_dt.int64] or selector._shapes[0].ndims not in (None, 0):
            raise TypeError("`choice_dataset` must be a dataset of scalar `tf.int64` "
                            "tensors.")
        shapes = list(first._shapes)
        for d in datasets[1:]:
            shapes = [_relax(a, b) for a, b in zip(shapes, d._shapes)]
        super().__init__(first._structure, first._types, shapes, (selector, *datasets))

    def _elements(self, env: Env) -> Iterator[Flat]:
        sel, *ins = self._input_datasets
        its: list[Iterator[Flat] | None] = [d._elements(env) for d in ins]
        env.state[("live", id(sel))] = its  # a random selector draws among live inputs
        for s in sel._elements(env):
            i = int(np.asarray(s[0]))
            if not 0 <= i < len(its):
                raise errors.InvalidArgumentError(None, None, f"Selector index out of "
                                                  f"range: {i} >= {len(its)}")
            it = its[i]
            if it is None:
                continue
            el = next(it, None)
            if el is None:
                its[i] = None
                if all(x is None for x in its):
                    return
                continue
            yield el


def choose_from_datasets(datasets: list[Dataset], choice_dataset: Dataset,
                         stop_on_empty_dataset: bool = False) -> Dataset:
    """The next element of ``datasets[i]`` for each ``i`` of ``choice_dataset``."""
    return _DirectedDataset(list(datasets), choice_dataset)


class _CategoricalDataset(Dataset):
    def __init__(self, weights: Any, n: int, seed: int | None):
        super().__init__(None, [_dt.int64], [TensorShape([])])
        self._weights = None if weights is None else \
            self._capture(weights, _dt.float32, "weights")
        self._n = n
        self._seeds = get_seed(seed)

    def _elements(self, env: Env) -> Iterator[Flat]:
        rng = _rng(env, self, self._seeds)
        w = np.ones(self._n) if self._weights is None else \
            np.asarray(env.value(self._weights), np.float64).reshape(-1)
        if len(w) != self._n or (w < 0).any() or w.sum() <= 0:
            raise errors.InvalidArgumentError(None, None, "`weights` must be non-negative, "
                                              "not all zero, one per dataset")
        live = env.state.get(("live", id(self)))
        while True:
            if live is not None:
                w = w * np.array([it is not None for it in live])
                if w.sum() <= 0:  # every input with a weight has ended
                    return
            yield (np.int64(rng.choice(self._n, p=w / w.sum())),)


def _rng(env: Env, ds: Dataset, seeds: tuple[int | None, int | None]) -> Any:
    """A generator for ``ds``: seeded by the graph/op seeds, else random per iterator;
    a new stream each time the dataset restarts in the same iterator."""
    epoch = env.state.get(("epoch", id(ds)), 0)
    env.state[("epoch", id(ds))] = epoch + 1
    s1, s2 = seeds
    if s1 is None and s2 is None:
        base = env.state.setdefault(("seed", id(ds)),
                                    int(np.random.SeedSequence().entropy % (1 << 62)))
        return np.random.default_rng([base, epoch])
    return np.random.default_rng([s1 or 0, s2 or 0, epoch])


def sample_from_datasets(datasets: list[Dataset], weights: Any = None, seed: int | None = None,
                         stop_on_empty_dataset: bool = False) -> Dataset:
    """Elements drawn from ``datasets`` at random, dataset ``i`` with probability
    ``weights[i]`` (uniform by default); until every input ends."""
    datasets = list(datasets)
    if isinstance(weights, Dataset):
        raise TypeError("A dataset of weights is not supported; pass a list or a tensor")
    return _DirectedDataset(datasets, _CategoricalDataset(weights, len(datasets), seed))


class RandomDataset(Dataset):
    """``tf.data.experimental.RandomDataset(seed=None)``: random int64 scalars for ever
    (numpy's stream, not TF's Philox)."""

    def __init__(self, seed: int | None = None):
        super().__init__(None, [_dt.int64], [TensorShape([])])
        self._seeds = get_seed(seed)

    def _elements(self, env: Env) -> Iterator[Flat]:
        rng = _rng(env, self, self._seeds)
        while True:
            yield (np.int64(rng.integers(np.iinfo(np.int64).min, _INT64_MAX)),)


def Counter(start: Any = 0, step: Any = 1, dtype: Any = _dt.int64) -> Dataset:  # noqa: N802
    """``tf.data.experimental.Counter``: ``start``, ``start + step`` ... for ever."""
    dtype = _dt.as_dtype(dtype)
    ds = _RangeDataset(start, _INT64_MAX if int(np.sign(_py(step))) >= 0
                       else np.iinfo(np.int64).min, step)
    if dtype is _dt.int64:
        return ds
    cast = api_function("cast")
    return ds.map(lambda v: cast(v, dtype))


def _py(v: Any) -> Any:
    return v if not isinstance(v, Tensor) else 1


_CSV_TYPES = (_dt.float32, _dt.float64, _dt.int32, _dt.int64, _dt.string)


class CsvDataset(Dataset):
    """``tf.data.experimental.CsvDataset``: the records of CSV files as tuples of
    scalars, one per selected column. ``record_defaults`` gives each column's dtype and
    default (a dtype or an empty tensor: required); an empty field or ``na_value``
    takes the default."""

    def __init__(self, filenames: Any, record_defaults: Any, compression_type: Any = None,
                 buffer_size: Any = None, header: bool = False, field_delim: str = ",",
                 use_quote_delim: bool = True, na_value: str = "",
                 select_cols: Any = None) -> None:
        """Each column's dtype and default from ``record_defaults``; the files (a
        string tensor) are read when the iterator starts."""
        defaults, types = [], []
        for i, d in enumerate(record_defaults):
            if isinstance(d, _dt.DType) or (isinstance(d, type) and d in (int, float, str)):
                t = _dt.as_dtype(d)
                defaults.append(None)
            else:
                a = np.asarray(d) if not isinstance(d, Tensor) else None
                if a is not None:
                    t = _dt.string if a.dtype.kind in "SUO" else _dt.as_dtype(a.dtype)
                    if a.dtype == np.float64 and not isinstance(d, np.ndarray):
                        t = _dt.float32
                    if a.dtype == np.int64 and not isinstance(d, np.ndarray):
                        t = _dt.int32
                    defaults.append(None if a.size == 0 else a.reshape(-1)[0])
                else:
                    t = d.dtype.base_dtype
                    defaults.append(d)
            if t not in _CSV_TYPES:
                raise TypeError(f"Unsupported type for record_defaults[{i}]: {t.name}")
            types.append(t)
        if len(field_delim) != 1:
            raise ValueError("field_delim should be only 1 char")
        super().__init__(tuple([None] * len(types)), types, [TensorShape([])] * len(types))
        self._files = self._capture(filenames, _dt.string, "filenames")
        self._defaults = defaults
        self._captured += [d for d in defaults if isinstance(d, Tensor)]
        self._compression = compression_type or ""
        self._header, self._delim = bool(header), field_delim
        self._quote, self._na = bool(use_quote_delim), na_value
        self._select = None if select_cols is None else [int(c) for c in select_cols]
        if self._select is not None:
            if self._select != sorted(set(self._select)):
                raise errors.InvalidArgumentError(None, None, "select_cols is not "
                                                  "strictly increasing.")
            if len(self._select) != len(types):
                raise ValueError("Expected len(select_cols) to equal len(record_defaults).")

    def _elements(self, env: Env) -> Iterator[Flat]:
        source = TextLineSource(0, str(self._compression))
        files = [f if isinstance(f, bytes) else str(f).encode() for f in
                 np.asarray(env.value(self._files), dtype=object).reshape(-1)]
        defaults = [_default(env.value(d)) if isinstance(d, Tensor) else d
                    for d in self._defaults]
        rec = 0
        for name in files:
            lines = (v for _k, v in source.records(checked_name(env, name, "CsvDataset")))
            if self._header:
                next(lines, None)
            for line in lines:
                yield self._parse(line.decode("utf-8", "replace") if isinstance(line, bytes)
                                  else line, rec, defaults)
                rec += 1

    def _parse(self, line: str, rec: int, defaults: list[Any]) -> Flat:
        """One record's selected fields as scalars of the column dtypes.

        :raises errors.InvalidArgumentError: a missing required field, a value that is
            not of its column's type, or a wrong number of fields"""
        rows = list(csv.reader([line], delimiter=self._delim,
                               quoting=csv.QUOTE_MINIMAL if self._quote else csv.QUOTE_NONE,
                               quotechar='"' if self._quote else None))
        fields = rows[0] if rows else [""]
        cols = self._select if self._select is not None else range(len(self._types))
        if self._select is None and len(fields) != len(self._types):
            raise errors.InvalidArgumentError(
                None, None, f"Expect {len(self._types)} fields but have {len(fields)} in "
                f"record {rec}")
        out = []
        for k, (c, t, d) in enumerate(zip(cols, self._types, defaults)):
            if c >= len(fields):
                raise errors.InvalidArgumentError(
                    None, None, f"Expect {len(self._types)} fields but have {len(fields)} "
                    f"in record {rec}")
            f = fields[c]
            if f == "" or f == self._na:
                if d is None:
                    raise errors.InvalidArgumentError(
                        None, None, f"Field {k} is required but missing in record {rec}!")
                if t is _dt.string:
                    out.append(np.array(d.encode() if isinstance(d, str) else d,
                                        dtype=object))
                else:
                    out.append(np.asarray(d, dtype=t.as_numpy_dtype))
                continue
            out.append(_csv_value(f, t, k, rec))
        return tuple(out)


def _default(v: Any) -> Any:
    a = np.asarray(v)
    return None if a.size == 0 else a.reshape(-1)[0]


def _csv_value(f: str, t: _dt.DType, k: int, rec: int) -> Any:
    if t is _dt.string:
        return np.array(f.encode(), dtype=object)
    try:
        v = int(f) if t.is_integer else float(f)
        a = np.asarray(v, dtype=t.as_numpy_dtype)
        if t.is_integer and int(a) != v:
            raise ValueError(f)
        return a
    except (ValueError, OverflowError):
        raise errors.InvalidArgumentError(
            None, None, f"Field {k} in record {rec} is not a valid "
            f"{'float' if t is _dt.float32 else 'double' if t is _dt.float64 else t.name}: "
            f"{f}") from None


def _infer_type(values: list[str], na: str) -> _dt.DType:
    order = [_dt.int32, _dt.int64, _dt.float32, _dt.float64, _dt.string]
    best = 0
    for v in values:
        if v == "" or v == na:
            continue
        while best < 4:
            t = order[best]
            try:
                x = int(v) if t.is_integer else float(v)
                if t.is_integer and not (np.iinfo(t.as_numpy_dtype).min <= x <=
                                         np.iinfo(t.as_numpy_dtype).max):
                    raise ValueError(v)
                if t is _dt.float32 and not np.isfinite(np.float32(x)) and np.isfinite(x):
                    raise ValueError(v)
                break
            except (ValueError, OverflowError):
                best += 1
    return order[best]


def make_csv_dataset(file_pattern: Any, batch_size: int, column_names: Any = None,
                     column_defaults: Any = None, label_name: str | None = None,
                     select_columns: Any = None, field_delim: str = ",",
                     use_quote_delim: bool = True, na_value: str = "", header: bool = True,
                     num_epochs: int | None = None, shuffle: bool = True,
                     shuffle_buffer_size: int = 10000, shuffle_seed: int | None = None,
                     prefetch_buffer_size: Any = AUTOTUNE, num_parallel_reads: int = 1,
                     sloppy: bool = False, num_rows_for_inference: int = 100,
                     compression_type: Any = None, ignore_errors: bool = False) -> Dataset:
    """Batches of ``(features, label)`` (or ``features``) from CSV files: a dict of
    column name -> batch; column names from the header and types inferred from the
    first rows unless given (TF's ``make_csv_dataset``)."""
    files = sorted({f for p in ([file_pattern] if isinstance(file_pattern, (str, bytes))
                                else list(file_pattern))
                    for f in gfile.glob(p.decode() if isinstance(p, bytes) else p)})
    if not files:
        raise ValueError(f"No files match `file_pattern` {file_pattern}.")
    rows = _first_rows(files[0], field_delim, use_quote_delim,
                       num_rows_for_inference + 1, compression_type)
    if column_names is None:
        if not header:
            raise ValueError("Cannot infer column names without a header line.")
        column_names = rows[0] if rows else []
    column_names = list(column_names)
    if len(set(column_names)) != len(column_names):
        raise ValueError("Cannot have duplicate column names.")
    select = None
    if select_columns is not None:
        select = sorted(c if isinstance(c, int) else column_names.index(c)
                        for c in select_columns)
        column_names = [column_names[i] for i in select]
    if label_name is not None and label_name not in column_names:
        raise ValueError("`label_name` provided must be one of the columns.")
    if column_defaults is None:
        data = rows[1:] if header else rows
        cols = select if select is not None else range(len(column_names))
        column_defaults = [_infer_type([r[c] for r in data if c < len(r)], na_value)
                           for c in cols]
        column_defaults = [np.array([""]) if t is _dt.string else
                           np.array([0], t.as_numpy_dtype) for t in column_defaults]
    ds = list_files(files, shuffle=shuffle, seed=shuffle_seed)

    def read(name: Any) -> Dataset:
        return CsvDataset(name, column_defaults, compression_type, None, header,
                          field_delim, use_quote_delim, na_value, select)

    ds = ds.interleave(read, cycle_length=num_parallel_reads, block_length=1)
    if ignore_errors:
        ds = _IgnoreErrorsDataset(ds)
    if num_epochs != 1 and shuffle:
        ds = ds.shuffle(shuffle_buffer_size, shuffle_seed).repeat(num_epochs)
    elif shuffle:
        ds = ds.shuffle(shuffle_buffer_size, shuffle_seed)
    elif num_epochs != 1:
        ds = ds.repeat(num_epochs)
    ds = ds.batch(batch_size, drop_remainder=num_epochs is None)

    def to_dict(*cols: Any) -> Any:
        feats = dict(zip(column_names, cols))
        if label_name is None:
            return feats
        label = feats.pop(label_name)
        return feats, label

    return ds.map(to_dict).prefetch(prefetch_buffer_size)


def _first_rows(name: str, delim: str, quote: bool, n: int, compression: Any
                ) -> list[list[str]]:
    lines = []
    for _k, v in TextLineSource(0, str(compression or "")).records(name.encode()):
        lines.append(v.decode("utf-8", "replace") if isinstance(v, bytes) else v)
        if len(lines) >= n:
            break
    return [r for r in csv.reader(lines, delimiter=delim,
                                  quoting=csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE)]


def make_batched_features_dataset(file_pattern: Any, batch_size: int, features: dict,
                                  reader: Any = None, label_key: str | None = None,
                                  reader_args: Any = None, num_epochs: int | None = None,
                                  shuffle: bool = True, shuffle_buffer_size: int = 10000,
                                  shuffle_seed: int | None = None,
                                  prefetch_buffer_size: Any = AUTOTUNE,
                                  reader_num_threads: int = 1, parser_num_threads: int = 2,
                                  sloppy_ordering: bool = False,
                                  drop_final_batch: bool = False) -> Dataset:
    """Batches of parsed ``tf.train.Example`` records (a dict of feature -> batched
    tensor or SparseTensor; ``(features, label)`` with ``label_key``), from the files
    matching ``file_pattern`` read by ``reader`` (default TFRecordDataset)."""
    if reader is None:
        from .file_datasets import TFRecordDataset  # cycle: file_datasets imports dataset
        reader = TFRecordDataset
    ds = list_files(file_pattern, shuffle=shuffle, seed=shuffle_seed)
    args = list(reader_args or [])
    ds = ds.interleave(lambda f: reader(f, *args), cycle_length=reader_num_threads,
                       block_length=1)
    if num_epochs != 1 and shuffle:
        ds = ds.shuffle(shuffle_buffer_size, shuffle_seed).repeat(num_epochs)
    elif shuffle:
        ds = ds.shuffle(shuffle_buffer_size, shuffle_seed)
    elif num_epochs != 1:
        ds = ds.repeat(num_epochs)
    ds = ds.batch(batch_size, drop_remainder=drop_final_batch)
    parse = api_function("io.parse_example")
    ds = ds.map(lambda s: parse(s, features))
    if label_key is not None:
        if label_key not in features:
            raise ValueError(f"The `label_key` provided ({label_key}) must be one of the "
                             f"`features` keys.")
        ds = ds.map(lambda d: ({k: v for k, v in d.items() if k != label_key}, d[label_key]))
    return ds.prefetch(prefetch_buffer_size)


# =======================================================================================
# Whole-dataset ops
# =======================================================================================
def _outputs(ds: Dataset, outs: Any) -> Any:
    from .iterator import pack_outputs  # cycle: iterator imports dataset
    return pack_outputs(ds._structure, ds._shapes, outs)


def get_single_element(dataset: Dataset) -> Any:
    """The only element of ``dataset`` as tensors (InvalidArgumentError when it has none
    or more than one, when they are run)."""
    if not isinstance(dataset, Dataset):
        raise TypeError(f"`dataset` must be a `tf.data.Dataset` object, got "
                        f"{type(dataset).__name__}.")
    types, shapes = op_types_shapes(dataset._structure, dataset._types, dataset._shapes)
    token = register_dataset(dataset, get_default_graph())
    outs = apply_op("DatasetToSingleElement", arguments=dataset._inputs(), dataset=token,
                    output_types=types, output_shapes=[
                        s if s.ndims is not None else unknown_shape() for s in shapes])
    return _outputs(dataset, outs)


def cardinality(dataset: Dataset) -> Tensor:
    """The number of elements of ``dataset`` as an int64 scalar tensor:
    ``INFINITE_CARDINALITY`` (-1) or ``UNKNOWN_CARDINALITY`` (-2) when so (computed from
    the dataset's arguments when it is run, as TF)."""
    if not isinstance(dataset, Dataset):
        raise TypeError(f"`dataset` must be a `tf.data.Dataset` object, got "
                        f"{type(dataset).__name__}.")
    token = register_dataset(dataset, get_default_graph())
    return apply_op("DatasetCardinality", arguments=dataset._inputs(), dataset=token)


def count_elements(ds: Dataset, env: Env) -> int:
    """TF's cardinality rules for ``ds`` with its captured values in ``env``."""
    rule = _CARDINALITY.get(type(ds))
    return UNKNOWN_CARDINALITY if rule is None else rule(ds, env)


def _card_range(ds: Any, env: Env) -> int:
    start, stop, step = (_int(env, a) for a in ds._args)
    return max(0, len(range(start, stop, step))) if step else 0


def _card_tensors(ds: Any, env: Env) -> int:
    if not ds._slices:
        return 1
    if flatten(ds._structure)[0] is SPARSE:  # its dense_shape's first entry
        return int(np.asarray(env.value(ds._captured[2])).reshape(-1)[0])
    return int(np.shape(env.value(ds._captured[0]))[0])


def _card_of(ds: Dataset, env: Env, i: int = 0) -> int:
    return count_elements(ds._input_datasets[i], env)


def _card_repeat(ds: Any, env: Env) -> int:
    n, c = _card_of(ds, env), _int(env, ds._count)
    if n == 0 or c == 0:
        return 0
    if c < 0 or n == INFINITE_CARDINALITY:
        return INFINITE_CARDINALITY
    return UNKNOWN_CARDINALITY if n < 0 else n * c


def _card_take_skip(ds: Any, env: Env) -> int:
    n, c = _card_of(ds, env), _int(env, ds._count)
    if ds._take:
        if c < 0:
            return n
        return c if n == INFINITE_CARDINALITY else UNKNOWN_CARDINALITY if n < 0 \
            else min(n, c)
    if c < 0:
        return 0
    return n if n < 0 else max(0, n - c)


def _card_batch(ds: Any, env: Env) -> int:
    n, b = _card_of(ds, env), _int(env, ds._size)
    if n < 0:
        return n
    return n // b if ds._drop else -(-n // b)


def _card_zip(ds: Any, env: Env) -> int:
    ns = [count_elements(d, env) for d in ds._input_datasets]
    if any(n == UNKNOWN_CARDINALITY for n in ns):
        finite = [n for n in ns if n >= 0]
        return min(finite) if finite and min(finite) == 0 else UNKNOWN_CARDINALITY
    finite = [n for n in ns if n >= 0]
    return min(finite) if finite else INFINITE_CARDINALITY


def _card_concat(ds: Any, env: Env) -> int:
    a, b = _card_of(ds, env, 0), _card_of(ds, env, 1)
    if INFINITE_CARDINALITY in (a, b):
        return INFINITE_CARDINALITY
    return UNKNOWN_CARDINALITY if min(a, b) < 0 else a + b


def _card_shard(ds: Any, env: Env) -> int:
    n, k, i = _card_of(ds, env), _int(env, ds._num), _int(env, ds._index)
    return n if n < 0 else n // k + (1 if i < n % k else 0)


def _card_window(ds: Any, env: Env) -> int:
    n = _card_of(ds, env)
    size, shift, stride = (_int(env, t) for t in (ds._size, ds._shift, ds._stride))
    if n < 0:
        return n
    if bool(np.asarray(env.value(ds._drop))):
        span = (size - 1) * stride + 1
        return 0 if n < span else (n - span) // shift + 1
    return -(-n // shift)


def _card_assert(ds: Any, env: Env) -> int:
    return _int(env, ds._expected)


def _same(ds: Dataset, env: Env) -> int:
    return _card_of(ds, env)


#: per dataset class (a class not here: UNKNOWN; TF 1.15's map does not keep it)
_CARDINALITY: dict[type, Callable[[Any, Env], int]] = {
    _RangeDataset: _card_range, _TensorsDataset: _card_tensors,
    _ShuffleDataset: _same, _CacheDataset: _same, _PrefetchDataset: _same,
    _RepeatDataset: _card_repeat, _TakeSkipDataset: _card_take_skip,
    _BatchDataset: _card_batch, _ZipDataset: _card_zip, _ConcatenateDataset: _card_concat,
    _ShardDataset: _card_shard, _WindowDataset: _card_window,
    _AssertCardinalityDataset: _card_assert, _ReduceDataset: lambda d, e: (
        _same(d, e) if d._scan else 1),
    RandomDataset: lambda d, e: INFINITE_CARDINALITY,
    _CategoricalDataset: lambda d, e: INFINITE_CARDINALITY,
    _SparseSlicesDataset: lambda d, e: int(np.asarray(e.value(d._captured[2]))[0]),
}


class TFRecordWriter:
    """``tf.data.experimental.TFRecordWriter(filename, compression_type=None)``:
    ``write(dataset)`` is the op that writes a dataset of string scalars to a TFRecord
    file ("", "ZLIB" or "GZIP")."""

    def __init__(self, filename: Any, compression_type: Any = None):
        self._filename = filename
        self._compression = compression_type or ""

    def write(self, dataset: Dataset) -> Any:
        """The op writing every element of ``dataset`` as one record.

        :raises TypeError: when the elements are not string scalars"""
        if not isinstance(dataset, Dataset):
            raise TypeError(f"`dataset` must be a `tf.data.Dataset` object, got "
                            f"{type(dataset).__name__}.")
        if dataset._types != [_dt.string] or dataset._structure is not None or \
                not dataset._shapes[0].is_compatible_with(TensorShape([])):
            raise TypeError(f"`dataset` must produce scalar `DT_STRING` tensors whereas it "
                            f"produces shape {dataset.output_shapes} and types "
                            f"{dataset.output_types}")
        token = register_dataset(dataset, get_default_graph())
        return apply_op("DatasetToTFRecord", filename=self._filename,
                        compression_type=self._compression, arguments=dataset._inputs(),
                        dataset=token)


class DatasetSpec:
    """``tf.data.DatasetSpec``: the type of a dataset (its element spec and the shape
    of the dataset itself, ``[]``)."""

    def __init__(self, element_spec: Any, dataset_shape: Any = ()):
        self._element_spec = element_spec
        self._dataset_shape = as_shape(dataset_shape)

    @property
    def element_spec(self) -> Any:
        return self._element_spec

    @property
    def value_type(self) -> type:
        return Dataset

    @staticmethod
    def from_value(value: Dataset) -> "DatasetSpec":
        """The spec of a dataset."""
        return DatasetSpec(value.element_spec)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, DatasetSpec) and \
            other._element_spec == self._element_spec and \
            other._dataset_shape.as_tuple() == self._dataset_shape.as_tuple()

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        return f"DatasetSpec({self._element_spec!r}, {self._dataset_shape!r})"


class NumpyIterator:
    """``tf.data.NumpyIterator``: a Python iterator over a dataset's elements as numpy
    values, run in a private session on the dataset's graph."""

    def __init__(self, dataset: Dataset):
        if not isinstance(dataset, Dataset):
            raise TypeError(f"expected a Dataset, got {type(dataset).__name__}")
        from .iterator import make_initializable_iterator  # cycle: iterator imports dataset
        with dataset._graph.as_default():
            it = make_initializable_iterator(dataset)
            self._next = it.get_next()
        self._sess = Session(graph=dataset._graph)
        self._sess.run(it.initializer)

    def __iter__(self) -> "NumpyIterator":
        return self

    def __next__(self) -> Any:
        if self._sess is None:
            raise StopIteration
        try:
            return self._sess.run(self._next)
        except errors.OutOfRangeError:
            self._sess.close()
            self._sess = None
            raise StopIteration from None

    def next(self) -> Any:
        """The next element (Python 2's name, as TF keeps it)."""
        return self.__next__()


API: dict[str, Any] = {
    "data.experimental.map_and_batch": map_and_batch,
    "data.experimental.shuffle_and_repeat": shuffle_and_repeat,
    "data.experimental.parallel_interleave": parallel_interleave,
    "data.experimental.ignore_errors": ignore_errors,
    "data.experimental.unbatch": unbatch,
    "data.experimental.prefetch_to_device": prefetch_to_device,
    "data.experimental.copy_to_device": copy_to_device,
    "data.experimental.make_csv_dataset": make_csv_dataset,
    "data.experimental.CsvDataset": CsvDataset,
    "data.experimental.make_batched_features_dataset": make_batched_features_dataset,
    "data.experimental.Counter": Counter,
    "data.experimental.choose_from_datasets": choose_from_datasets,
    "data.experimental.sample_from_datasets": sample_from_datasets,
    "data.experimental.get_single_element": get_single_element,
    "data.experimental.enumerate_dataset": enumerate_dataset,
    "data.experimental.scan": scan,
    "data.experimental.group_by_window": group_by_window,
    "data.experimental.bucket_by_sequence_length": bucket_by_sequence_length,
    "data.experimental.dense_to_sparse_batch": dense_to_sparse_batch,
    "data.experimental.take_while": take_while,
    "data.experimental.assert_cardinality": assert_cardinality,
    "data.experimental.cardinality": cardinality,
    "data.experimental.RandomDataset": RandomDataset,
    "data.experimental.TFRecordWriter": TFRecordWriter,
    "data.experimental.DatasetStructure": DatasetSpec,
    "data.DatasetSpec": DatasetSpec,
    "data.experimental.DatasetSpec": DatasetSpec,
    "data.NumpyIterator": NumpyIterator,
}
