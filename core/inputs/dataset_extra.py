"""The last of TF 1.15's ``tf.data.experimental``: ``Optional`` and
``get_next_as_optional``, ``Reducer`` / ``group_by_reducer``, ``rejection_resample``,
``unique``, ``parse_example_dataset``, ``map_and_batch_with_legacy_function``,
``SqlDataset`` (sqlite through Python's ``sqlite3``), and ``make_saveable_from_iterator``
with ``CheckpointInputPipelineHook`` (an iterator's position saved by ``tf.train.Saver``).

An ``Optional`` is a ``variant`` scalar tensor whose run-time value is an
:class:`OptionalValue` (the element's flat components, or nothing); its ops
(``OptionalFromValue``, ``OptionalNone``, ``OptionalHasValue``, ``OptionalGetValue``,
``IteratorGetNextAsOptional``) are the standard plugin's, as TF's are.

An iterator's saved state is its position, not its generators: the captured values its
dataset was started with, the number of elements read, and the random seeds drawn for
unseeded shuffles. Restoring starts the dataset again with those values and seeds and
reads that many elements (the replay costs the time the elements took; a pipeline whose
functions are not deterministic, ``py_func`` or ``from_generator`` ones, may not come
back to the same place).
"""
from __future__ import annotations

import json
import os
import sqlite3
from typing import Any, Callable, Iterator

import numpy as np

from ..base import dtypes as _dt
from ..base import errors
from ..base.tensor_codec import make_ndarray, make_tensor_proto
from ..base.tensor_shape import TensorShape, unknown_shape
from ..framework.graph import (Tensor, api_function, apply_op, convert_to_tensor,
                               get_default_graph, get_seed)
from ..framework.sparse_tensor import SparseTensor
from ..plugin.runtime import require_api
from ..proto.tensor_pb2 import TensorProto
from ..training.monitored_session import CheckpointSaverHook, SessionRunHook
from ..training.saver import SaveableObject, SaveSpec, Saver, latest_checkpoint
from .dataset import (SPARSE, Dataset, Env, Flat, TracedFunction, _normalize_input,
                      _sparse_flags, _template, flatten, op_types_shapes, pack_as)
from .dataset_more import _relax, _rng, _same_nest, map_and_batch
from .file_datasets import FileCheck, set_file_check
from .iterator import Iterator as DatasetIterator
from .iterator import ITERATORS_COLLECTION, _shapes_list, pack_outputs

__all__ = ["Optional", "OptionalValue", "get_next_as_optional", "Reducer",
           "group_by_reducer", "rejection_resample", "unique", "parse_example_dataset",
           "map_and_batch_with_legacy_function", "SqlDataset",
           "make_saveable_from_iterator", "CheckpointInputPipelineHook",
           "iterator_state", "start_from_state"]

#: the op API names this module calls by name (checked by the runtime)
REQUIRED_API_NAMES = frozenset({"io.parse_example", "TensorSpec", "SparseTensorSpec",
                                "data.experimental.OptionalStructure"})
require_api(REQUIRED_API_NAMES)


# =======================================================================================
# Optional
# =======================================================================================
class OptionalValue:
    """The run-time value of an optional: the flat dense components, or None."""

    __slots__ = ("components",)

    def __init__(self, components: tuple | None):
        self.components = components

    def __repr__(self) -> str:
        return "OptionalValue(<none>)" if self.components is None else \
            f"OptionalValue({len(self.components)} components)"

    def __eq__(self, other: object) -> bool:
        """Two optionals are equal when both are empty or their components are."""
        if not isinstance(other, OptionalValue):
            return NotImplemented
        if self.components is None or other.components is None:
            return self.components is other.components
        return len(self.components) == len(other.components) and all(
            np.array_equal(a, b) for a, b in zip(self.components, other.components))

    __hash__ = None  # type: ignore[assignment]  # mutable components


def _spec_parts(structure_of_specs: Any) -> tuple[Any, list[_dt.DType], list[TensorShape]]:
    """The element template, dtypes and shapes a nest of TensorSpec /
    SparseTensorSpec describes.

    :raises TypeError: for a leaf that is not one of them"""
    sparse_cls = api_function("SparseTensorSpec")
    spec_cls = api_function("TensorSpec")
    leaves = flatten(_normalize_input(structure_of_specs))
    flags = []
    for leaf in leaves:
        if not isinstance(leaf, (spec_cls, sparse_cls)):
            raise TypeError(f"Expected a structure of `tf.TensorSpec` / "
                            f"`tf.SparseTensorSpec`, got {leaf!r}")
        flags.append(isinstance(leaf, sparse_cls))
    template = pack_as(_normalize_input(structure_of_specs),
                       [SPARSE if f else None for f in flags])
    return template, [s.dtype.base_dtype for s in leaves], [s.shape for s in leaves]


class Optional:
    """``tf.data.experimental.Optional``: a value that may be absent, as a ``variant``
    tensor (``from_value``, ``none_from_structure``, ``get_next_as_optional``).
    ``get_value()`` of an empty one fails with InvalidArgumentError when run."""

    def __init__(self, variant: Tensor, structure: Any, types: list[_dt.DType],
                 shapes: list[TensorShape]):
        self._variant_tensor = variant
        self._structure = structure
        self._types = list(types)
        self._shapes = list(shapes)

    @staticmethod
    def from_value(value: Any) -> "Optional":
        """An optional holding ``value`` (a nest of tensors, SparseTensors or values
        convertible to tensors)."""
        value = _normalize_input(value)
        leaves = [SparseTensor.from_value(v) if not isinstance(v, (Tensor, SparseTensor))
                  and hasattr(v, "dense_shape") else v for v in flatten(value)]
        parts: list[Tensor] = []
        types, shapes = [], []
        for v in leaves:
            if isinstance(v, SparseTensor):
                parts += [v.indices, v.values, v.dense_shape]
                types.append(v.dtype.base_dtype)
                shapes.append(v.shape)
            else:
                t = convert_to_tensor(v)
                parts.append(t)
                types.append(t.dtype.base_dtype)
                shapes.append(t.shape)
        variant = apply_op("OptionalFromValue", components=parts, name="OptionalFromValue")
        return Optional(variant, _template(value), types, shapes)

    @staticmethod
    def none_from_structure(value_structure: Any) -> "Optional":
        """An empty optional for values of ``value_structure`` (a nest of
        ``tf.TensorSpec`` / ``tf.SparseTensorSpec``)."""
        structure, types, shapes = _spec_parts(value_structure)
        return Optional(apply_op("OptionalNone", name="OptionalNone"), structure, types,
                        shapes)

    #: TF 2.x's name for :meth:`none_from_structure`
    empty = none_from_structure

    def has_value(self, name: str | None = None) -> Tensor:
        """A scalar bool tensor: whether this optional holds a value."""
        return apply_op("OptionalHasValue", optional=self._variant_tensor,
                        name=name or "OptionalHasValue")

    def get_value(self, name: str | None = None) -> Any:
        """The value's tensors, nested as it is (InvalidArgumentError when run on an
        empty optional)."""
        types, shapes = op_types_shapes(self._structure, self._types, self._shapes)
        outs = apply_op("OptionalGetValue", optional=self._variant_tensor,
                        output_types=types, output_shapes=_shapes_list(shapes),
                        name=name or "OptionalGetValue")
        return pack_outputs(self._structure, self._shapes, outs)

    @property
    def value_structure(self) -> Any:
        """The spec of the value: a nest of ``tf.TensorSpec`` / ``tf.SparseTensorSpec``."""
        spec, sparse = api_function("TensorSpec"), api_function("SparseTensorSpec")
        return pack_as(self._structure, [(sparse if sp else spec)(s, t) for sp, s, t in zip(
            _sparse_flags(self._structure), self._shapes, self._types)])

    #: TF 2.x's name for :attr:`value_structure`
    element_spec = value_structure

    @property
    def _type_spec(self) -> Any:
        return api_function("data.experimental.OptionalStructure")(self.value_structure)


def get_next_as_optional(iterator: DatasetIterator) -> Optional:
    """An optional holding the iterator's next element, empty at the end of its
    dataset (it never raises OutOfRangeError)."""
    if not isinstance(iterator, DatasetIterator):
        raise TypeError(f"expected a tf.data.Iterator, got {type(iterator).__name__}")
    types, shapes = op_types_shapes(iterator._structure, iterator._types, iterator._shapes)
    variant = apply_op("IteratorGetNextAsOptional", iterator=iterator._resource,
                       output_types=types, output_shapes=_shapes_list(shapes),
                       name="IteratorGetNextAsOptional")
    return Optional(variant, iterator._structure, iterator._types, iterator._shapes)


# =======================================================================================
# group_by_reducer
# =======================================================================================
class Reducer:
    """``tf.data.experimental.Reducer(init_func, reduce_func, finalize_func)``: a
    per-key state from ``init_func(key)``, updated by ``reduce_func(state, element)``,
    turned into the output by ``finalize_func(state)``."""

    def __init__(self, init_func: Callable[..., Any], reduce_func: Callable[..., Any],
                 finalize_func: Callable[..., Any]):
        self._init_func = init_func
        self._reduce_func = reduce_func
        self._finalize_func = finalize_func

    @property
    def init_func(self) -> Callable[..., Any]:
        return self._init_func

    @property
    def reduce_func(self) -> Callable[..., Any]:
        return self._reduce_func

    @property
    def finalize_func(self) -> Callable[..., Any]:
        return self._finalize_func


def _scalar_int64(fn: TracedFunction, what: str) -> None:
    if fn.types != [_dt.int64] or fn.shapes[0].ndims not in (None, 0):
        raise ValueError(f"`{what}` must return a single tf.int64 tensor. Got type="
                         f"{fn.types} and shape={fn.shapes}")


class _GroupByReducerDataset(Dataset):
    def __init__(self, src: Dataset, key_func: Callable[..., Any], reducer: Reducer):
        """Trace the key, init, reduce (relaxing the state's shapes until it keeps
        them, as ``scan``) and finalize functions.

        :raises ValueError: a key that is not one int64 scalar
        :raises TypeError: a new state whose structure or dtypes differ"""
        self._key = TracedFunction(key_func, src._structure, src._types, src._shapes,
                                   "key_func")
        _scalar_int64(self._key, "key_func")
        self._init = TracedFunction(reducer.init_func, None, [_dt.int64], [TensorShape([])],
                                    "init_func")
        state_t, types = self._init.structure, list(self._init.types)
        if any(self._init.out_flags):
            raise TypeError("A SparseTensor state is not supported by `group_by_reducer`")
        shapes = list(self._init.shapes)
        for _ in range(8):
            fn = TracedFunction(reducer.reduce_func, (state_t, src._structure),
                                types + src._types, shapes + src._shapes, "reduce_func")
            if not _same_nest(fn.structure, state_t) or fn.types != types:
                raise TypeError(f"The element types for the new state must match the "
                                f"initial state. Expected {pack_as(state_t, types)}; got "
                                f"{pack_as(fn.structure, fn.types)}.")
            relaxed = [_relax(a, b) for a, b in zip(shapes, fn.shapes)]
            if all(r.as_tuple() == a.as_tuple() for r, a in zip(relaxed, shapes)):
                break
            shapes = relaxed
        self._reduce = fn
        self._finalize = TracedFunction(reducer.finalize_func, state_t, types, shapes,
                                        "finalize_func")
        f = self._finalize
        super().__init__(f.structure, f.types, f.shapes, (src,))
        self._captured = [t for fn in (self._key, self._init, self._reduce, f)
                          for t in fn.captured]

    def _elements(self, env: Env) -> Iterator[Flat]:
        """Every element folded into its key's state; then, by ascending key (TF's
        order), each state finalized."""
        states: dict[int, list[Any]] = {}
        for el in self._input_datasets[0]._elements(env):
            key = int(np.asarray(env.call(self._key, el)[0]))
            state = states.get(key)
            if state is None:
                state = list(env.call(self._init, (np.int64(key),)))
            states[key] = list(env.call(self._reduce, (*state, *el)))
        for key in sorted(states):
            yield tuple(env.call(self._finalize, tuple(states.pop(key))))


def group_by_reducer(key_func: Callable[..., Any],
                     reducer: Reducer) -> Callable[[Dataset], Dataset]:
    """Elements grouped by ``key_func`` (an int64 scalar) and each group reduced by
    ``reducer``: one output element per key, by ascending key."""
    return lambda ds: _GroupByReducerDataset(ds, key_func, reducer)


# =======================================================================================
# unique
# =======================================================================================
class _UniqueDataset(Dataset):
    def __init__(self, src: Dataset):
        if src._structure is not None or src._types[0] not in (_dt.int32, _dt.int64,
                                                                _dt.string):
            raise TypeError("`tf.data.experimental.unique()` only supports inputs with a "
                            "single `tf.int32`, `tf.int64`, or `tf.string` component.")
        super().__init__(src._structure, src._types, src._shapes, (src,))

    def _elements(self, env: Env) -> Iterator[Flat]:
        seen: set[Any] = set()
        for el in self._input_datasets[0]._elements(env):
            a = np.asarray(el[0])
            key = (a.shape, tuple(a.reshape(-1).tolist()))
            if key not in seen:
                seen.add(key)
                yield el


def unique() -> Callable[[Dataset], Dataset]:
    """The elements seen for the first time (a dataset of one int32, int64 or string
    component), in order."""
    return _UniqueDataset


# =======================================================================================
# rejection_resample
# =======================================================================================
_BATCH, _SMOOTHING = 32, 10  # TF's dist_estimation_batch_size and smoothing_constant


def _acceptance(initial: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, float]:
    """TF's per-class acceptance probabilities and probability of the original stream:
    ``a_i = (r_i - min r) / (max r - min r)`` with ``r = target / initial``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = target / (initial + np.finfo(initial.dtype).tiny)
        m = ratio.min()
        a = (ratio - m) / (ratio.max() - m)
    return a.astype(np.float32), float(np.float32(m))


def _static(v: Any) -> np.ndarray | None:
    if isinstance(v, Tensor):
        if v.op.type != "Const":
            return None
        value = v.op.get_attr("value")
        return np.asarray(value if isinstance(value, np.ndarray) else make_ndarray(value))
    return np.asarray(v)


class _RejectionResampleDataset(Dataset):
    """``(class, element)`` pairs whose classes follow ``target_dist`` (TF's design:
    a pass filtered per class by rejection, mixed at random with an unfiltered pass in
    the proportion ``min(target / initial)``)."""

    def __init__(self, src: Dataset, class_func: Callable[..., Any], target: Any,
                 initial: Any, seed: int | None):
        self._fn = TracedFunction(class_func, src._structure, src._types, src._shapes,
                                  "class_func")
        if len(self._fn.types) != 1 or not self._fn.types[0].is_integer:
            raise ValueError("`class_func` must return a scalar integer tensor")
        super().__init__((None, src._structure), self._fn.types + src._types,
                         self._fn.shapes + src._shapes, (src,))
        self._captured = list(self._fn.captured)
        self._target = self._capture(target, None, "target_dist")
        self._initial = None if initial is None else \
            self._capture(initial, None, "initial_dist")
        self._mode: float | None = None  # 1: the input as it is; 0: the filtered pass
        if initial is not None:  # (TF's static check: both constants, initial as float)
            ts, is_ = _static(self._target), _static(self._initial)
            if ts is not None and is_ is not None:
                with np.errstate(divide="ignore", invalid="ignore"):
                    self._mode = float(np.min(ts / is_.astype(np.float32)))
        self._seeds = get_seed(seed)

    def _classed(self, env: Env) -> Iterator[tuple[int, Flat]]:
        for el in self._input_datasets[0]._elements(env):
            c = env.call(self._fn, el)[0]
            yield c, (c, *el)

    def _dists(self, env: Env, target: np.ndarray) -> Iterator[np.ndarray]:
        """The initial distribution for each position: given, or estimated from the
        class counts (plus 10 each) up to the end of the position's batch of 32."""
        if self._initial is not None:
            init = np.asarray(env.value(self._initial), np.float32)
            while True:
                yield init
        counts = np.full(len(target), _SMOOTHING, np.int64)
        batch: list[int] = []
        for c, _el in self._classed(env):
            batch.append(int(np.asarray(c)))
            if len(batch) == _BATCH:
                counts += np.bincount(batch, minlength=len(target))[:len(target)]
                yield from [(counts / counts.sum()).astype(np.float32)] * _BATCH
                batch = []
        if batch:
            counts += np.bincount(batch, minlength=len(target))[:len(target)]
            yield from [(counts / counts.sum()).astype(np.float32)] * _BATCH

    def _filtered(self, env: Env, target: np.ndarray, rng: Any) -> Iterator[Flat]:
        for (c, el), init in zip(self._classed(env), self._dists(env, target)):
            k = int(np.asarray(c))
            if not 0 <= k < len(target):
                raise errors.InvalidArgumentError(
                    None, None, f"indices = {k} is not in [0, {len(target)})")
            a, _m = _acceptance(init, target)
            if rng.uniform() < a[k]:
                yield el

    def _elements(self, env: Env) -> Iterator[Flat]:
        """The input as it is (probability of the original 1), the filtered pass (0),
        or the two mixed at random; the end when the chosen streams both end."""
        target = np.asarray(env.value(self._target))
        if self._mode == 1:
            yield from (el for _c, el in self._classed(env))
            return
        rng = _rng(env, self, self._seeds)
        if self._mode == 0:
            yield from self._filtered(env, target, rng)
            return
        streams: list[Iterator[Flat] | None] = [
            (el for _c, el in self._classed(env)), self._filtered(env, target, rng)]
        for init in self._dists(env, target):
            p = _acceptance(init, target)[1]
            i = 0 if rng.uniform() < p else 1
            it = streams[i]
            if it is None:
                continue
            el = next(it, None)
            if el is None:
                streams[i] = None
                if streams[1 - i] is None:
                    return
                continue
            yield el


def rejection_resample(class_func: Callable[..., Any], target_dist: Any,
                       initial_dist: Any = None, seed: int | None = None
                       ) -> Callable[[Dataset], Dataset]:
    """Resample to ``target_dist`` by rejection: ``(class, element)`` pairs, the class
    from ``class_func``; ``initial_dist`` estimated from the classes seen when not
    given. Random choices use numpy's generator (not TF's), seeded by ``seed``."""
    return lambda ds: _RejectionResampleDataset(ds, class_func, target_dist, initial_dist,
                                                seed)


# =======================================================================================
# parse_example_dataset, map_and_batch_with_legacy_function
# =======================================================================================
def parse_example_dataset(features: dict, num_parallel_calls: Any = 1,
                          deterministic: Any = None) -> Callable[[Dataset], Dataset]:
    """Each element (a vector of serialized ``tf.train.Example``) parsed with
    ``tf.io.parse_example(element, features)``."""
    if features is None:
        raise ValueError("Missing: features was None.")

    def apply(ds: Dataset) -> Dataset:
        if ds._structure is not None or ds._types != [_dt.string]:
            raise TypeError("Input dataset should be a dataset of vectors of strings")
        parse = api_function("io.parse_example")
        return ds.map(lambda s: parse(s, features))
    return apply


def map_and_batch_with_legacy_function(map_func: Callable[..., Any], batch_size: Any,
                                       num_parallel_batches: Any = None,
                                       drop_remainder: bool = False,
                                       num_parallel_calls: Any = None
                                       ) -> Callable[[Dataset], Dataset]:
    """:func:`map_and_batch` (TF 1.15's name for a function traced the legacy way)."""
    return map_and_batch(map_func, batch_size, num_parallel_batches, drop_remainder,
                         num_parallel_calls)


# =======================================================================================
# SqlDataset
# =======================================================================================
_SQL_TYPES = (_dt.string, _dt.int8, _dt.int16, _dt.int32, _dt.int64, _dt.uint8,
              _dt.uint16, _dt.uint32, _dt.uint64, _dt.bool, _dt.float64)


def _sql_int(v: Any) -> int:
    """sqlite's integer reading of a column value (NULL 0, reals truncated, text by its
    leading number)."""
    if v is None:
        return 0
    if isinstance(v, (int, float)):
        return int(v)
    s = (v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)).strip()
    num = ""
    for ch in s:
        if ch.isdigit() or (ch in "+-" and not num):
            num += ch
        else:
            break
    try:
        return int(num)
    except ValueError:
        return 0


def _sql_float(v: Any) -> float:
    if v is None:
        return 0.0
    try:
        return float(v.decode() if isinstance(v, bytes) else v)
    except ValueError:
        return 0.0


def _sql_text(v: Any) -> bytes:
    if v is None:
        return b""
    if isinstance(v, bytes):
        return v
    if isinstance(v, float):
        return (repr(v) if v != int(v) or abs(v) >= 1e15 else f"{v:.1f}").encode()
    return str(v).encode()


class SqlDataset(Dataset):
    """``tf.data.experimental.SqlDataset(driver_name, data_source_name, query,
    output_types)``: the rows of a SQL query as tuples of scalars. ``driver_name``
    must be ``"sqlite"`` (the database is opened read-only with Python's sqlite3)."""

    def __init__(self, driver_name: Any, data_source_name: Any, query: Any,
                 output_types: Any):
        """Check the column dtypes; the driver, file and query are read when the
        iterator starts (captured string tensors)."""
        types = [_dt.as_dtype(t).base_dtype for t in flatten(_normalize_input(output_types))]
        for t in types:
            if t not in _SQL_TYPES:
                raise errors.InvalidArgumentError(
                    None, None, "Each element of `output_types_` must be one of: DT_STRING, "
                    "DT_INT8, DT_INT16, DT_INT32, DT_INT64, DT_UINT8, DT_UINT16, DT_UINT32, "
                    "DT_UINT64, DT_BOOL, DT_DOUBLE ")
        structure = _template(_normalize_input(output_types))
        super().__init__(structure, types, [TensorShape([])] * len(types))
        self._driver = self._capture(driver_name, _dt.string, "driver_name")
        self._source = self._capture(data_source_name, _dt.string, "data_source_name")
        self._query = self._capture(query, _dt.string, "query")

    def _text(self, env: Env, t: Tensor) -> str:
        v = np.asarray(env.value(t), dtype=object).reshape(()).item()
        return v.decode() if isinstance(v, bytes) else str(v)

    def _elements(self, env: Env) -> Iterator[Flat]:
        """The query's rows converted to the output dtypes.

        :raises errors.InvalidArgumentError: another driver, or a column count other
            than the number of output types
        :raises errors.UnknownError: a query sqlite cannot prepare (TF's class)"""
        driver, source, query = (self._text(env, t) for t in
                                 (self._driver, self._source, self._query))
        if driver != "sqlite":
            raise errors.InvalidArgumentError(None, None, f"The database type, {driver}, "
                                              "is not supported.")
        try:
            db = sqlite3.connect(f"file:{source}?mode=ro", uri=True,
                                 check_same_thread=False)
        except sqlite3.Error as e:
            raise errors.FailedPreconditionError(None, None, f"{e}: {source}") from None
        env.add_closer(db.close)
        try:
            cursor = db.execute(query)
        except sqlite3.Error as e:
            code = getattr(e, "sqlite_errorcode", 1)
            raise errors.UnknownError(None, None, f"Prepare() failed: [{code}] {e}: "
                                      f"{query}") from None
        n = len(cursor.description or ())
        if n != len(self._types):
            raise errors.InvalidArgumentError(
                None, None, f"The number of columns in query ({n}) must match the number "
                f"of elements in output_types ({len(self._types)}).")
        try:
            for row in cursor:
                yield tuple(self._convert(v, t) for v, t in zip(row, self._types))
        finally:
            db.close()

    @staticmethod
    def _convert(v: Any, t: _dt.DType) -> np.ndarray:
        if t is _dt.string:
            return np.array(_sql_text(v), dtype=object)
        if t is _dt.float64:
            return np.asarray(_sql_float(v), np.float64)
        if t is _dt.bool:
            return np.asarray(_sql_int(v) != 0)
        return np.asarray(_sql_int(v)).astype(t.as_numpy_dtype)


# =======================================================================================
# Saving an iterator's position
# =======================================================================================
_STATE_MAGIC = b"flowrt.IteratorState/1"


def _tree(ds: Dataset) -> list[Dataset]:
    """The datasets of a pipeline in a fixed (depth-first) order: how a saved state
    names a dataset in another process."""
    out, stack = [], [ds]
    while stack:
        d = stack.pop()
        out.append(d)
        stack.extend(reversed(d._input_datasets))
    return out


def iterator_state(ds: Dataset, index: int, args: tuple, count: int, ended: bool,
                   env: Env | None) -> np.ndarray:
    """The saved form of an iterator's position (a string vector): which of its
    datasets, the values its dataset captured, the elements read and the seeds drawn."""
    seeds = {}
    if env is not None:
        for i, d in enumerate(_tree(ds)):
            v = env.state.get(("seed", id(d)))
            if isinstance(v, int):
                seeds[str(i)] = v
    head = [_STATE_MAGIC, str(index).encode(), str(count).encode(),
            b"1" if ended else b"0", json.dumps(seeds, sort_keys=True).encode()]
    body = [make_tensor_proto(np.asarray(a)).SerializeToString() for a in args]
    return np.array(head + body, dtype=object)


def parse_state(state: Any) -> tuple[int, int, bool, dict[str, int], list[np.ndarray]]:
    """``(dataset index, elements read, ended, seeds, captured values)`` of a state
    :func:`iterator_state` made.

    :raises errors.DataLossError: when it is not one"""
    parts = list(np.asarray(state, dtype=object).reshape(-1))
    if len(parts) < 5 or parts[0] != _STATE_MAGIC:
        raise errors.DataLossError(None, None, "The saved iterator state is not a flowrt "
                                   "iterator state (flowrt cannot read TensorFlow's)")
    try:
        index, count, ended = int(parts[1]), int(parts[2]), parts[3] == b"1"
        seeds = {str(k): int(v) for k, v in json.loads(parts[4].decode()).items()}
        args = []
        for p in parts[5:]:
            proto = TensorProto()
            proto.ParseFromString(p)
            args.append(make_ndarray(proto))
    except Exception as e:  # noqa: BLE001 - any malformed field is data loss
        raise errors.DataLossError(None, None, f"Corrupt saved iterator state: "
                                   f"{e}") from None
    return index, count, ended, seeds, args


def start_from_state(ds: Dataset, args: list[Any], count: int, ended: bool,
                     seeds: dict[str, int], check: FileCheck | None = None
                     ) -> tuple[Env, Iterator[Flat] | None, int]:
    """The environment and generator of ``ds`` started with the saved values and seeds,
    moved past ``count`` elements; the number actually skipped (fewer at its end).
    ``check``: the file check every file read on the way is held to (file roots)."""
    env = Env(dict(zip(ds._inputs(), args)))
    set_file_check(env, check)
    tree = _tree(ds)
    for k, v in seeds.items():
        if int(k) < len(tree):
            env.state[("seed", id(tree[int(k)]))] = v
    gen: Iterator[Flat] | None = ds._elements(env)
    done = 0
    while done < count and gen is not None:
        if next(gen, None) is None:
            gen = None
            break
        done += 1
    if ended:
        gen = None
    return env, gen, done


class _IteratorSaveable(SaveableObject):
    """An iterator's position as one string tensor of a checkpoint."""

    def __init__(self, iterator: DatasetIterator, name: str):
        tokens = list(getattr(iterator, "_dataset_tokens", []))
        if not tokens:
            raise ValueError("The iterator has no dataset to save a position in: make "
                             "its initializer (or use a one-shot iterator) first")
        self._iterator = iterator
        self._tokens = tokens
        state = apply_op("SerializeIteratorState", resource_handle=iterator._resource,
                         datasets=tokens, name="SerializeIteratorState")
        super().__init__(iterator._resource, [SaveSpec(state, "", name + "-state")], name)

    def restore(self, restored_tensors: Any, restored_shapes: Any) -> Any:
        """The op that puts the iterator back at the saved position."""
        return apply_op("DeserializeIteratorState", resource_handle=self._iterator._resource,
                        serialized=restored_tensors[0], datasets=self._tokens,
                        name="DeserializeIteratorState")


def make_saveable_from_iterator(iterator: DatasetIterator,
                                external_state_policy: Any = None) -> SaveableObject:
    """A saveable for ``tf.train.Saver`` (``var_list`` or the ``SAVEABLE_OBJECTS``
    collection) holding the iterator's position: restoring it makes ``get_next``
    continue where the saved iterator was."""
    if not isinstance(iterator, DatasetIterator):
        raise TypeError(f"expected a tf.data.Iterator, got {type(iterator).__name__}")
    return _IteratorSaveable(iterator, iterator._resource.op.name)


class CheckpointInputPipelineHook(SessionRunHook):
    """``tf.data.experimental.CheckpointInputPipelineHook(estimator)``: saves the
    position of every iterator of the graph in ``<model_dir>/input.ckpt-<step>`` as
    often as the estimator's checkpoints, and restores the latest at the first step.
    ``estimator`` needs ``model_dir`` and ``config`` (``save_checkpoints_steps`` /
    ``save_checkpoints_secs``)."""

    def __init__(self, estimator: Any, external_state_policy: Any = None):
        config = getattr(estimator, "config", None)
        steps = getattr(config, "save_checkpoints_steps", None)
        secs = getattr(config, "save_checkpoints_secs", None)
        if steps is None and secs is None:
            secs = 600
        self._latest = "checkpoint_" + (getattr(config, "task_type", None) or "worker") + \
            "_" + str(getattr(config, "task_id", 0) or 0)
        self._hook = CheckpointSaverHook(os.fspath(estimator.model_dir), save_secs=secs,
                                         save_steps=steps, checkpoint_basename="input.ckpt")
        self._first_run = True

    def begin(self) -> None:
        """Build a Saver of the graph's iterators (``iterators`` collection)."""
        its = get_default_graph().get_collection(ITERATORS_COLLECTION)
        saveables = [_IteratorSaveable(DatasetIterator.of_resource(r), r.op.name)
                     for r in its]
        self._hook._saver = _InputSaver(saveables, self._latest)
        self._hook.begin()

    def after_create_session(self, session: Any, coord: Any) -> None:
        """Nothing yet: iterators are initialized after the session is created."""

    def before_run(self, run_context: Any) -> Any:
        if self._first_run:
            path = latest_checkpoint(self._hook._checkpoint_dir, self._latest)
            # (a fresh directory: save the starting position, as TF does)
            if path:
                self._hook._saver.restore(run_context.session, path)
            else:
                step = int(run_context.session.run(self._hook._global_step_tensor))
                self._hook._save(run_context.session, step)
                self._hook._timer.update_last_triggered_step(step)
            self._first_run = False
        return self._hook.before_run(run_context)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self._hook.after_run(run_context, run_values)

    def end(self, session: Any) -> None:
        self._hook.end(session)


class _InputSaver(Saver):
    """A Saver whose checkpoints are listed in their own state file (not the model's
    ``checkpoint``)."""

    def __init__(self, saveables: list[SaveableObject], latest_filename: str):
        super().__init__(saveables)
        self._latest_name = latest_filename

    def save(self, sess: Any, save_path: Any, global_step: Any = None,
             latest_filename: str | None = None, **kw: Any) -> Any:
        """Save, listing the checkpoint in this saver's state file."""
        return super().save(sess, save_path, global_step=global_step,
                            latest_filename=latest_filename or self._latest_name, **kw)


API: dict[str, Any] = {
    "data.experimental.Optional": Optional,
    "data.experimental.get_next_as_optional": get_next_as_optional,
    "data.experimental.Reducer": Reducer,
    "data.experimental.group_by_reducer": group_by_reducer,
    "data.experimental.rejection_resample": rejection_resample,
    "data.experimental.unique": unique,
    "data.experimental.parse_example_dataset": parse_example_dataset,
    "data.experimental.map_and_batch_with_legacy_function":
        map_and_batch_with_legacy_function,
    "data.experimental.SqlDataset": SqlDataset,
    "data.experimental.make_saveable_from_iterator": make_saveable_from_iterator,
    "data.experimental.CheckpointInputPipelineHook": CheckpointInputPipelineHook,
}
