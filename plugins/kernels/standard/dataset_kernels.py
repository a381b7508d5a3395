"""The ops of ``tf.data`` iterators (TF's names): ``IteratorV2`` and ``OneShotIterator``
hold an iterator's state in the device's resource manager, ``MakeIterator`` starts it on
a dataset, ``IteratorGetNext`` reads the next element, ``IteratorToStringHandle`` /
``IteratorFromStringHandleV2`` name it for feedable iterators. The ops that run a whole
dataset at once: ``DatasetToSingleElement`` (``get_single_element``, ``Dataset.reduce``),
``DatasetCardinality`` and ``DatasetToTFRecord`` (``TFRecordWriter.write``). This module
also publishes :mod:`flowrt.inputs.dataset_more` (``tf.data.experimental``).

A dataset is a description built in Python (:mod:`flowrt.inputs.dataset`); these ops
name it by their ``dataset`` attr and receive the graph tensors it captured as their
``arguments`` input, so those are evaluated when the initializer runs, as in TF.
"""
from __future__ import annotations

import itertools
import threading
import traceback
import weakref
from typing import Any, Iterator

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.framework.tf_record import TFRecordWriter as _RecordWriter
from flowrt.inputs import dataset_extra, dataset_more
from flowrt.inputs.dataset import Env, dense_components, lookup_dataset
from flowrt.inputs.dataset_extra import Optional, OptionalValue
from flowrt.inputs.file_datasets import FileCheck, set_file_check
from flowrt.op_registry import OpDef
from flowrt.plugin.file_policy import check_path
from flowrt.tensor_shape import TensorShape, as_shape, unknown_shape

from ._common import ks, publish
from .top_level_specs import SparseTensorSpec, TensorArraySpec, TensorSpec, TypeSpec

__all__: list[str] = []

_NOT_INITIALIZED = ("GetNext() failed because the iterator has not been initialized. "
                    "Ensure that you have run the initializer operation for this iterator "
                    "before getting the next element.")


class _IteratorResource:
    """One iterator's state: the running dataset (a generator) and its environment."""

    def __init__(self, name: str, types: list[_dt.DType], shapes: list[TensorShape]):
        self.name = name
        self.types = types
        self.shapes = [s.as_tuple() for s in shapes]
        self.np_types = [np.dtype(object) if t is _dt.string else np.dtype(t.as_numpy_dtype)
                         for t in types]
        self._lock = threading.Lock()
        self._env: Env | None = None
        self._gen: Iterator[tuple] | None = None
        self._initialized = False
        # the position a saved state records: dataset, captured values, elements read
        self._token = ""
        self._args: tuple = ()
        self._count = 0

    def reset(self, token: str, args: tuple, check: FileCheck | None = None) -> None:
        """Start (again) on the dataset named ``token`` with its captured values;
        ``check``: the file check of the kernel's file roots (:func:`_file_check`)."""
        ds = lookup_dataset(token)
        env = Env(dict(zip(ds._inputs(), args)))
        set_file_check(env, check)
        with self._lock:
            self._close_locked()
            self._env = env
            self._gen = ds._elements(env)
            self._initialized = True
            self._token, self._args, self._count = token, tuple(args), 0

    def save_state(self, tokens: list[str]) -> np.ndarray:
        """The iterator's position as a string vector (dataset_extra.iterator_state).

        :raises errors.FailedPreconditionError: when it has not been initialized"""
        with self._lock:
            if not self._initialized:
                raise errors.FailedPreconditionError(
                    None, None, "Save() failed because the iterator has not been "
                    "initialized. Ensure that you have run the initializer operation for "
                    "this iterator before saving it.")
            if self._token not in tokens:
                raise errors.FailedPreconditionError(
                    None, None, "The iterator runs a dataset its saveable does not know "
                    "(make the saveable after every make_initializer)")
            return dataset_extra.iterator_state(
                lookup_dataset(self._token), tokens.index(self._token), self._args,
                self._count, self._gen is None, self._env)

    def restore_state(self, tokens: list[str], state: Any,
                      check: FileCheck | None = None) -> None:
        """Start again at a saved position (its dataset, values, seeds; the elements
        read are read again); ``check`` as for :meth:`reset`."""
        index, count, ended, seeds, args = dataset_extra.parse_state(state)
        if not 0 <= index < len(tokens):
            raise errors.InvalidArgumentError(None, None, f"The saved iterator state names "
                                              f"dataset {index} of {len(tokens)}")
        ds = lookup_dataset(tokens[index])
        if len(args) != len(ds._inputs()):
            raise errors.InvalidArgumentError(
                None, None, f"The saved iterator state has {len(args)} captured values; "
                f"the dataset captures {len(ds._inputs())}")
        with self._lock:
            self._close_locked()
            try:
                env, gen, done = dataset_extra.start_from_state(ds, args, count, ended,
                                                                seeds, check)
            except errors.OpError:
                raise
            except Exception as e:  # noqa: BLE001 - a Python error in a dataset's code
                raise _op_error(e) from e
            self._env, self._gen, self._initialized = env, gen, True
            self._token, self._args, self._count = tokens[index], tuple(args), done

    def get_next(self) -> tuple:
        """The next element, checked against the iterator's types and shapes.

        :raises errors.OutOfRangeError: at the end of the dataset"""
        with self._lock:
            if not self._initialized:
                raise errors.FailedPreconditionError(None, None, _NOT_INITIALIZED)
            if self._gen is None:
                raise errors.OutOfRangeError(None, None, "End of sequence")
            try:
                el = next(self._gen)
                self._count += 1
            except StopIteration:
                self._gen = None
                raise errors.OutOfRangeError(None, None, "End of sequence") from None
            except errors.OpError:
                self._gen = None
                raise
            except Exception as e:  # noqa: BLE001 - a Python error in a dataset's code
                self._gen = None
                raise _op_error(e) from e
        return self._check(el)

    def _check(self, el: tuple) -> tuple:
        el = dense_components(el)
        if len(el) != len(self.types):
            raise errors.InvalidArgumentError(
                None, None, f"The iterator expects {len(self.types)} components but the "
                f"dataset produced {len(el)}")
        out = []
        for i, (v, t, s) in enumerate(zip(el, self.np_types, self.shapes)):
            a = np.asarray(v)
            if a.dtype != t:
                if t == object and a.dtype.char in "SU":
                    a = a.astype(object)
                else:
                    raise errors.InvalidArgumentError(
                        None, None, f"Data type mismatch at component {i}: expected "
                        f"{_dt.as_dtype(t if t != object else _dt.string).name} but got "
                        f"{a.dtype.name}.")
            if s is not None and (len(s) != a.ndim or
                                  any(w is not None and w != d for w, d in zip(s, a.shape))):
                raise errors.InvalidArgumentError(
                    None, None, f"Incompatible shapes at component {i}: expected "
                    f"{_fmt(s)} but got {_fmt(a.shape)}.")
            out.append(a)
        return tuple(out)

    def _close_locked(self) -> None:
        if self._gen is not None:
            self._gen.close() if hasattr(self._gen, "close") else None
        if self._env is not None:
            self._env.close()
        self._gen, self._env = None, None

    def close_resource(self) -> None:
        """Stop background threads and sessions (the resource is being dropped)."""
        with self._lock:
            self._close_locked()


def _fmt(s: Any) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in s) + "]"


def _op_error(e: BaseException) -> errors.OpError:
    """TF's mapping of a Python exception raised inside a dataset (from_generator)."""
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip("\n")
    if isinstance(e, (ValueError, TypeError)):
        return errors.InvalidArgumentError(None, None, text)
    return errors.UnknownError(None, None, text)


#: string handles of live iterators (feedable iterators)
_by_handle: "weakref.WeakValueDictionary[str, _IteratorResource]" = \
    weakref.WeakValueDictionary()
_uids = itertools.count()


def _resource(h: Any) -> _IteratorResource:
    if isinstance(h, _IteratorResource):
        return h
    if isinstance(h, np.ndarray) and h.size == 1:
        return _resource(h.reshape(()).item())
    raise errors.InvalidArgumentError(None, None, f"expected an iterator handle, got "
                                      f"{type(h).__name__}")


def _types_shapes(attrs: Any) -> tuple[list[_dt.DType], list[TensorShape]]:
    types = [_dt.as_dtype(t) for t in attrs.get("output_types") or []]
    shapes = [as_shape(s) for s in attrs.get("output_shapes") or []]
    if len(shapes) != len(types):
        shapes = [unknown_shape()] * len(types)
    return types, shapes


def _make_handle(ctx: Any) -> Any:
    """The compute of an iterator's handle op: look the resource up, creating it once
    (a private name per kernel unless ``shared_name``)."""
    rm = ctx.device.resource_mgr
    container = ctx.attrs.get("container") or ""
    shared = ctx.attrs.get("shared_name") or ""
    name = shared or f"_iterator_{next(_uids)}_{ctx.node_name}"
    types, shapes = _types_shapes(ctx.attrs)

    def make() -> _IteratorResource:
        r = _IteratorResource(name, types, shapes)
        _by_handle[f"{container}/{name}/{id(r)}"] = r
        r.handle_string = f"{container}/{name}/{id(r)}"  # type: ignore[attr-defined]
        return r

    def lookup() -> _IteratorResource:
        return rm.lookup_or_create(container, name, make)

    if not shared:
        weakref.finalize(lookup, _drop_later, rm, container, name)
    return lookup


def _drop_later(rm: Any, container: str, name: str) -> None:
    """Drop the resource on another thread: a finalizer may run inside a garbage
    collection that started while this thread held the resource manager's lock."""
    threading.Thread(target=_drop, args=(rm, container, name), daemon=True,
                     name="flowrt-iterator-drop").start()


def _drop(rm: Any, container: str, name: str) -> None:
    try:
        r = rm.lookup(container, name)
    except Exception:  # noqa: BLE001 - already gone
        return
    rm.delete(container, name)
    r.close_resource()


# =======================================================================================
# Op definitions
# =======================================================================================
def _scalar(op: Any) -> list[TensorShape]:
    return [TensorShape([]) for _ in op.outputs]


def _no_outputs(op: Any) -> list[TensorShape]:
    return []


def _get_next_shapes(op: Any) -> list[TensorShape]:
    shapes = op.node_attrs.get("output_shapes") or []
    if len(shapes) != len(op.outputs):
        return [unknown_shape() for _ in op.outputs]
    return [as_shape(s) for s in shapes]


_IT_ATTRS = ["output_types: list(type) >= 1", "output_shapes: list(shape) >= 1"]
ks.op(
    OpDef("IteratorV2", outputs=["handle: resource"],
          attrs=["shared_name: string", "container: string", *_IT_ATTRS], is_stateful=True,
          shape_fn=_scalar, doc="A container for an iterator's state."),
    OpDef("OneShotIterator", inputs=["arguments: Targuments"], outputs=["handle: resource"],
          attrs=["dataset: string", "Targuments: list(type) >= 0", *_IT_ATTRS,
                 "container: string = ''", "shared_name: string = ''"], is_stateful=True,
          shape_fn=_scalar,
          doc="An iterator started on its dataset by the first use (the arguments are the "
              "tensors the dataset captured)."),
    OpDef("MakeIterator", inputs=["iterator: resource", "arguments: Targuments"],
          attrs=["dataset: string", "Targuments: list(type) >= 0"], is_stateful=True,
          shape_fn=_no_outputs,
          doc="(Re)starts the iterator on the dataset named by the ``dataset`` attr, with "
              "the values of the tensors it captured."),
    OpDef("IteratorGetNext", inputs=["iterator: resource"],
          outputs=["components: output_types"], attrs=_IT_ATTRS, is_stateful=True,
          shape_fn=_get_next_shapes, doc="Gets the next element from the iterator."),
    OpDef("IteratorToStringHandle", inputs=["resource_handle: resource"],
          outputs=["string_handle: string"], is_stateful=True, shape_fn=_scalar,
          doc="A string naming the iterator (for feedable iterators)."),
    OpDef("IteratorFromStringHandleV2", inputs=["string_handle: string"],
          outputs=["resource_handle: resource"],
          attrs=["output_types: list(type) >= 0 = []",
                 "output_shapes: list(shape) >= 0 = []"], is_stateful=True,
          shape_fn=_scalar, doc="The iterator a string handle names."),
)
ks.op(
    OpDef("DatasetToSingleElement", inputs=["arguments: Targuments"],
          outputs=["components: output_types"],
          attrs=["dataset: string", "Targuments: list(type) >= 0", *_IT_ATTRS],
          is_stateful=True, shape_fn=_get_next_shapes,
          doc="The only element of the dataset named by the ``dataset`` attr."),
    OpDef("DatasetCardinality", inputs=["arguments: Targuments"],
          outputs=["cardinality: int64"],
          attrs=["dataset: string", "Targuments: list(type) >= 0"], is_stateful=True,
          shape_fn=_scalar, doc="The number of elements of the dataset (-1: infinite, "
                                "-2: unknown)."),
    OpDef("DatasetToTFRecord", inputs=["filename: string", "compression_type: string",
                                       "arguments: Targuments"],
          attrs=["dataset: string", "Targuments: list(type) >= 0"], is_stateful=True,
          shape_fn=_no_outputs,
          doc="Writes the dataset's string elements as the records of a TFRecord file."),
)
_OPT_ATTRS = ["output_types: list(type) >= 0", "output_shapes: list(shape) >= 0"]
ks.op(
    OpDef("OptionalFromValue", inputs=["components: Toutput_types"],
          outputs=["optional: variant"], attrs=["Toutput_types: list(type) >= 0"],
          shape_fn=_scalar, doc="An optional holding the components."),
    OpDef("OptionalNone", outputs=["optional: variant"], shape_fn=_scalar,
          doc="An optional holding nothing."),
    OpDef("OptionalHasValue", inputs=["optional: variant"], outputs=["has_value: bool"],
          shape_fn=_scalar, doc="Whether the optional holds a value."),
    OpDef("OptionalGetValue", inputs=["optional: variant"],
          outputs=["components: output_types"], attrs=_OPT_ATTRS,
          shape_fn=_get_next_shapes,
          doc="The components of the optional's value (InvalidArgumentError if none)."),
    OpDef("IteratorGetNextAsOptional", inputs=["iterator: resource"],
          outputs=["optional: variant"], attrs=_OPT_ATTRS, is_stateful=True,
          shape_fn=_scalar,
          doc="The next element as an optional; an empty one at the end of the dataset."),
    OpDef("SerializeIteratorState", inputs=["resource_handle: resource"],
          outputs=["serialized: string"], attrs=["datasets: list(string)"],
          is_stateful=True, shape_fn=lambda op: [TensorShape([None])],
          doc="An iterator's position (its dataset among ``datasets``, the captured "
              "values, the elements read, the seeds drawn) as a string vector."),
    OpDef("DeserializeIteratorState", inputs=["resource_handle: resource",
                                              "serialized: string"],
          attrs=["datasets: list(string)"], is_stateful=True, shape_fn=_no_outputs,
          doc="Puts an iterator back at a position SerializeIteratorState saved."),
)
ks.not_differentiable("OptionalFromValue", "OptionalNone", "OptionalHasValue",
                      "OptionalGetValue", "IteratorGetNextAsOptional",
                      "SerializeIteratorState", "DeserializeIteratorState")
ks.not_differentiable("IteratorV2", "OneShotIterator", "MakeIterator", "IteratorGetNext",
                      "IteratorToStringHandle", "IteratorFromStringHandleV2",
                      "DatasetToSingleElement", "DatasetCardinality", "DatasetToTFRecord")


# =======================================================================================
# Kernels
# =======================================================================================
@ks.kernel("IteratorV2", device_type="CPU")
def _iterator_kernel(ctx: Any) -> Any:
    return _make_handle(ctx)


@ks.kernel("OneShotIterator", device_type="CPU")
def _one_shot_kernel(ctx: Any) -> Any:
    lookup = _make_handle(ctx)
    token = _text(ctx.attrs["dataset"])
    lock = threading.Lock()
    check = _file_check(ctx)

    def compute(*args: Any) -> Any:
        r = lookup()
        with lock:
            if not r._initialized:
                r.reset(token, args, check)
        return r

    return compute


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _file_check(ctx: Any) -> FileCheck | None:
    """The check the file datasets a kernel runs apply to each file before they open
    it (flowrt.inputs.file_datasets): the kernel's file roots, naming the dataset, the
    kernel's op and its node; None where every path is allowed."""
    policy = ctx.file_policy
    if not policy.restricted:
        return None

    def check(path: str, what: str, write: bool = False) -> str:
        return policy.check(path, write=write, node=ctx.node_name,
                            op=f"{what} in {ctx.op_type}")

    return check


@ks.kernel("MakeIterator", device_type="CPU")
def _make_iterator_kernel(ctx: Any) -> Any:
    token = _text(ctx.attrs["dataset"])
    check = _file_check(ctx)

    def compute(handle: Any, *args: Any) -> None:
        _resource(handle).reset(token, args, check)

    return compute


@ks.kernel("IteratorGetNext", device_type="CPU")
def _get_next_kernel(ctx: Any) -> Any:
    n = len(ctx.attrs.get("output_types") or [])

    def compute(handle: Any) -> Any:
        el = _resource(handle).get_next()
        return el[0] if n == 1 else el

    return compute


@ks.kernel("IteratorToStringHandle", device_type="CPU")
def _to_string_handle_kernel(ctx: Any) -> Any:
    def compute(handle: Any) -> Any:
        return np.asarray(_resource(handle).handle_string.encode(), dtype=object)

    return compute


@ks.kernel("IteratorFromStringHandleV2", device_type="CPU")
def _from_string_handle_kernel(ctx: Any) -> Any:
    types, shapes = _types_shapes(ctx.attrs)

    def compute(s: Any) -> Any:
        key = _text(np.asarray(s).reshape(()).item())
        r = _by_handle.get(key)
        if r is None:
            raise errors.InvalidArgumentError(None, None, f"Could not find an iterator for "
                                              f"string handle {key!r}")
        if types and [t.base_dtype for t in types] != [t.base_dtype for t in r.types]:
            raise errors.InvalidArgumentError(
                None, None, f"Expected output types [{', '.join(t.name for t in types)}] "
                f"but the iterator has [{', '.join(t.name for t in r.types)}]")
        return r

    return compute


def _run_dataset(token: str, args: tuple, ctx: Any) -> tuple[Any, Env]:
    ds = lookup_dataset(token)
    env = Env(dict(zip(ds._inputs(), args)))
    set_file_check(env, _file_check(ctx))
    return ds, env


def _python_errors(e: Exception) -> errors.OpError:
    return e if isinstance(e, errors.OpError) else _op_error(e)


@ks.kernel("DatasetToSingleElement", device_type="CPU")
def _single_element_kernel(ctx: Any) -> Any:
    token = _text(ctx.attrs["dataset"])
    types, shapes = _types_shapes(ctx.attrs)
    n = len(types)

    def compute(*args: Any) -> Any:
        ds, env = _run_dataset(token, args, ctx)
        check = _IteratorResource("single_element", types, shapes)
        try:
            it = ds._elements(env)
            first = next(it, None)
            if first is None:
                raise errors.InvalidArgumentError(None, None, "Dataset was empty.")
            if next(it, None) is not None:
                raise errors.InvalidArgumentError(None, None,
                                                  "Dataset had more than one element.")
            el = check._check(first)
        except Exception as e:  # noqa: BLE001 - a Python error in a dataset's code
            raise _python_errors(e) from None
        finally:
            env.close()
        return el[0] if n == 1 else el

    return compute


@ks.kernel("DatasetCardinality", device_type="CPU")
def _cardinality_kernel(ctx: Any) -> Any:
    token = _text(ctx.attrs["dataset"])

    def compute(*args: Any) -> Any:
        ds, env = _run_dataset(token, args, ctx)
        try:
            return np.int64(dataset_more.count_elements(ds, env))
        finally:
            env.close()

    return compute


@ks.kernel("DatasetToTFRecord", device_type="CPU")
def _to_tfrecord_kernel(ctx: Any) -> Any:
    token = _text(ctx.attrs["dataset"])

    def compute(filename: Any, compression: Any, *args: Any) -> None:
        path = check_path(ctx, _text(np.asarray(filename, dtype=object).item()), write=True)
        ds, env = _run_dataset(token, args, ctx)
        comp = _text(np.asarray(compression, dtype=object).item())
        try:
            with _RecordWriter(path, comp or None) as w:
                for el in ds._elements(env):
                    w.write(np.asarray(el[0], dtype=object).item())
        except Exception as e:  # noqa: BLE001 - a Python error in a dataset's code
            raise _python_errors(e) from None
        finally:
            env.close()

    return compute


# -- Optional ----------------------------------------------------------------------------
@ks.kernel("OptionalFromValue", device_type="CPU")
def _optional_from_value_kernel(ctx: Any) -> Any:
    def compute(*components: Any) -> OptionalValue:
        return OptionalValue(tuple(np.asarray(c) if not isinstance(c, np.ndarray) else c
                                   for c in components))
    return compute


@ks.kernel("OptionalNone", device_type="CPU")
def _optional_none_kernel(ctx: Any) -> Any:
    return lambda: OptionalValue(None)


def _optional(v: Any) -> OptionalValue:
    if isinstance(v, np.ndarray) and v.size == 1 and v.dtype == object:
        v = v.reshape(()).item()
    if not isinstance(v, OptionalValue):
        raise errors.InvalidArgumentError(None, None, f"expected an optional, got "
                                          f"{type(v).__name__}")
    return v


@ks.kernel("OptionalHasValue", device_type="CPU")
def _optional_has_value_kernel(ctx: Any) -> Any:
    return lambda v: np.asarray(_optional(v).components is not None)


@ks.kernel("OptionalGetValue", device_type="CPU")
def _optional_get_value_kernel(ctx: Any) -> Any:
    types, shapes = _types_shapes(ctx.attrs)
    n = len(types)

    def compute(v: Any) -> Any:
        comps = _optional(v).components
        if comps is None:
            raise errors.InvalidArgumentError(None, None,
                                              "The optional does not have a value.")
        el = _IteratorResource("optional", types, shapes)._check(comps)
        return el[0] if n == 1 else el

    return compute


@ks.kernel("IteratorGetNextAsOptional", device_type="CPU")
def _get_next_as_optional_kernel(ctx: Any) -> Any:
    def compute(handle: Any) -> OptionalValue:
        try:
            return OptionalValue(_resource(handle).get_next())
        except errors.OutOfRangeError:
            return OptionalValue(None)

    return compute


# -- saving an iterator's position -------------------------------------------------------
def _tokens(ctx: Any) -> list[str]:
    return [_text(t) for t in ctx.attrs.get("datasets") or []]


@ks.kernel("SerializeIteratorState", device_type="CPU")
def _serialize_state_kernel(ctx: Any) -> Any:
    tokens = _tokens(ctx)
    return lambda handle: _resource(handle).save_state(tokens)


@ks.kernel("DeserializeIteratorState", device_type="CPU")
def _deserialize_state_kernel(ctx: Any) -> Any:
    tokens = _tokens(ctx)
    check = _file_check(ctx)

    def compute(handle: Any, state: Any) -> None:
        _resource(handle).restore_state(tokens, state, check)

    return compute


class OptionalSpec(TypeSpec):
    """``tf.data.experimental.OptionalStructure``: the spec of an Optional, from the
    spec of its value (a nest of TensorSpec / SparseTensorSpec)."""

    __slots__ = ("_value_structure",)

    def __init__(self, value_structure: Any):
        self._value_structure = value_structure

    @property
    def value_type(self) -> type:
        return Optional

    @property
    def value_structure(self) -> Any:
        return self._value_structure

    @staticmethod
    def from_value(value: Any) -> "OptionalSpec":
        """The spec of an Optional."""
        return OptionalSpec(value.value_structure)

    def _serialize(self) -> tuple[Any, ...]:
        return (self._value_structure,)

    def _key(self) -> tuple[Any, ...]:
        return (repr(self._value_structure),)


def _tensor_array_structure(dtype: Any, element_shape: Any, dynamic_size: bool,
                            infer_shape: bool) -> TensorArraySpec:
    """``tf.data.experimental.TensorArrayStructure``: a TensorArraySpec."""
    return TensorArraySpec(element_shape, dtype, dynamic_size, infer_shape)


publish(dataset_more, dataset_extra)
ks.export("data.experimental.TensorStructure", TensorSpec)
ks.export("data.experimental.SparseTensorStructure", SparseTensorSpec)
ks.export("data.experimental.Structure", TypeSpec)
ks.export("data.experimental.OptionalStructure", OptionalSpec)
ks.export("data.experimental.TensorArrayStructure", _tensor_array_structure)
