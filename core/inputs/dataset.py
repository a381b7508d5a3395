"""``tf.data.Dataset`` in graph mode (TF 1.15 semantics): a dataset is a description
built while the graph is built; an iterator's initializer op evaluates the tensors the
description captured and walks it on the host, element by element.

How it runs
-----------
Every dataset knows its element structure (nested tuples/dicts of components, each with
a dtype and a static shape) and the graph tensors it captured (:meth:`Dataset._inputs`:
the arguments of ``from_tensor_slices``, ``batch_size`` ...). The iterator's
``MakeIterator`` op (plugins/kernels/standard/dataset_kernels.py) takes those tensors as
inputs, so a placeholder fed at ``session.run(iterator.initializer, feed_dict=...)`` is
evaluated then, as TF's MakeIterator does. The kernel builds an :class:`Env` (the
captured values by tensor, the sessions of traced functions, per-iterator state)
and calls :meth:`Dataset._elements`, a Python generator of flat tuples of numpy arrays.

``map``/``filter``/``flat_map``/``interleave`` functions are traced ONCE into a separate
graph (:class:`TracedFunction`) with a placeholder per component, as TF traces a
function; Python side effects happen at trace time and Python values returned become
constants. Each element runs through a compiled callable of a private session.

Extension point (source datasets, e.g. TFRecordDataset)
------------------------------------------------------
Subclass :class:`Dataset`, call ``super().__init__(structure, types, shapes)`` with the
element structure (a nested template whose leaves are ``None``) and the flat component
dtypes / static shapes, hold the graph tensors you need in ``self._captured`` (a list),
and implement ``_elements(self, env)`` as a generator of flat tuples of numpy arrays,
reading captured values with ``env.value(tensor)``. Raise ``flowrt.errors`` classes
(DataLossError, NotFoundError ...) for bad input; the end of the generator is the end
of the dataset.
"""
from __future__ import annotations

import copy
import itertools
import queue
import threading
import weakref
from typing import Any, Callable, Iterator

import numpy as np

from ..base import dtypes as _dt
from ..base import errors
from ..base.tensor_shape import TensorShape, as_shape, unknown_shape
from ..framework.graph import (Graph, Operation, Tensor, api_function, convert_to_tensor,
                               get_default_graph, get_seed)
from ..framework.graph_def import import_graph_def
from ..framework.session import Session
from ..framework.sparse_tensor import SparseTensor, SparseTensorValue
from ..plugin.runtime import require_api

__all__ = ["Dataset", "DatasetV1", "TracedFunction", "Env", "flatten", "pack_as",
           "lookup_dataset", "register_dataset", "AUTOTUNE", "SPARSE", "dense_components",
           "op_types_shapes", "sparse_rows", "sparse_stack"]

#: the op API names this package calls by name (checked by the runtime)
REQUIRED_API_NAMES = frozenset({"TensorSpec", "SparseTensorSpec"})
require_api(REQUIRED_API_NAMES)

#: ``tf.data.experimental.AUTOTUNE``
AUTOTUNE = -1
_AUTOTUNE_PREFETCH = 2

Flat = tuple  # one element: a flat tuple of numpy arrays


# =======================================================================================
# Nested structures (tf.data's nest: tuples and dicts nest, lists are values)
# =======================================================================================
def _is_seq(x: Any) -> bool:
    return isinstance(x, (tuple, dict))


def flatten(x: Any) -> list[Any]:
    """The leaves of a nested tuple/dict structure (dict values by sorted key, as TF)."""
    if isinstance(x, dict):
        return [v for k in sorted(x) for v in flatten(x[k])]
    if isinstance(x, tuple):
        return [v for item in x for v in flatten(item)]
    return [x]


def pack_as(structure: Any, flat: Any) -> Any:
    """``flat`` (a sequence of leaves) packed into the nesting of ``structure``."""
    it = iter(flat)

    def build(s: Any) -> Any:
        if isinstance(s, dict):
            vals = {k: build(s[k]) for k in sorted(s)}
            return type(s)((k, vals[k]) for k in s) if type(s) is not dict else \
                {k: vals[k] for k in s}
        if isinstance(s, tuple):
            items = [build(v) for v in s]
            return type(s)(*items) if hasattr(s, "_fields") else tuple(items)
        return next(it)

    return build(structure)


class _SparseLeaf:
    """The leaf of an element template standing for a SparseTensor component."""

    def __repr__(self) -> str:
        return "SPARSE"


#: a template leaf for a SparseTensor component (a dense one's leaf is None). At run
#: time the component is one SparseTensorValue of numpy arrays; at the iterator's ops and
#: a traced function's boundary it is three dense tensors (indices, values, dense_shape).
SPARSE = _SparseLeaf()


def _template(x: Any) -> Any:
    """``x``'s nesting with every leaf replaced by None (SPARSE for a sparse one)."""
    return pack_as(x, [SPARSE if isinstance(v, (SparseTensor, SparseTensorValue)) else None
                       for v in flatten(x)])


class DatasetLeaf:
    """A template leaf for a component that is itself a dataset (the elements of
    ``window``, the groups of ``group_by_window``): its run-time value is a
    :class:`WindowValue`, and a function receives it as a Dataset."""

    def __init__(self, structure: Any, types: list[_dt.DType], shapes: list[TensorShape]):
        self.structure, self.types, self.shapes = structure, list(types), list(shapes)

    def __repr__(self) -> str:
        return f"DatasetLeaf({self.structure!r})"


class WindowValue(list):
    """The run-time value of a dataset component: the list of its elements (flat tuples)."""


def _sparse_flags(structure: Any) -> list[bool]:
    return [leaf is SPARSE for leaf in flatten(structure)]


def op_types_shapes(structure: Any, types: list[_dt.DType], shapes: list[TensorShape]
                    ) -> tuple[list[_dt.DType], list[TensorShape]]:
    """The dense tensors that carry the components across an op (a sparse one as
    indices ``[N, rank]``, values ``[N]`` and dense_shape ``[rank]``).

    :raises TypeError: for a component that is a dataset (window elements)"""
    ots: list[_dt.DType] = []
    oss: list[TensorShape] = []
    for leaf, t, s in zip(flatten(structure), types, shapes):
        if isinstance(leaf, DatasetLeaf):
            raise TypeError("Elements whose components are datasets (from `window` or "
                            "`group_by_window`) cannot leave the pipeline: consume them "
                            "in a `flat_map`/`interleave` function (e.g. `w.batch(n)`)")
        if leaf is SPARSE:
            ots += [_dt.int64, t, _dt.int64]
            oss += [TensorShape([None, s.ndims]), TensorShape([None]),
                    TensorShape([s.ndims])]
        else:
            ots.append(t)
            oss.append(s)
    return ots, oss


def dense_components(el: Any) -> list[Any]:
    """A run-time element's components with each SparseTensorValue as its three arrays."""
    out: list[Any] = []
    for c in el:
        if isinstance(c, WindowValue):
            continue
        if isinstance(c, SparseTensorValue):
            out += [np.asarray(c.indices, np.int64), np.asarray(c.values),
                    np.asarray(c.dense_shape, np.int64)]
        else:
            out.append(c)
    return out


def _collapse(flags: list[bool], flat: list[Any], make: Callable[..., Any]) -> list[Any]:
    """``flat`` (dense parts) regrouped per component: three parts of a sparse one become
    ``make(indices, values, dense_shape)``."""
    out, i = [], 0
    for sp in flags:
        if sp:
            out.append(make(*flat[i:i + 3]))
            i += 3
        else:
            out.append(flat[i])
            i += 1
    return out


def _same_structure(a: Any, b: Any) -> bool:
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and sorted(a) == sorted(b) and \
            all(_same_structure(a[k], b[k]) for k in a)
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and \
            all(_same_structure(x, y) for x, y in zip(a, b))
    return True


def _fmt_shape(s: Any) -> str:
    d = s.as_tuple() if isinstance(s, TensorShape) else tuple(s)
    if d is None:
        return "<unknown>"
    return "[" + ",".join("?" if v is None else str(v) for v in d) + "]"


def _np_dtype(dt: _dt.DType) -> Any:
    return object if dt.base_dtype is _dt.string else dt.as_numpy_dtype


# =======================================================================================
# Dataset registry: iterator ops name their dataset by a token attr
# =======================================================================================
_registry_lock = threading.Lock()
_registry: dict[str, "Dataset"] = {}
_next_token = itertools.count()


def register_dataset(ds: "Dataset", graph: Graph) -> str:
    """A token naming ``ds`` for the iterator ops of ``graph`` (kept while it lives)."""
    with _registry_lock:
        token = f"dataset_{next(_next_token)}"
        _registry[token] = ds
    try:
        weakref.finalize(graph, _registry.pop, token, None)
    except TypeError:  # a graph that cannot be weakly referenced keeps its datasets
        pass
    return token


def lookup_dataset(token: str) -> "Dataset":
    """The dataset registered under ``token``.

    :raises errors.NotFoundError: when it is not (another process's graph)"""
    ds = _registry.get(token)
    if ds is None:
        raise errors.NotFoundError(None, None, f"Dataset {token} is not registered in this "
                                   "process (datasets do not cross process boundaries)")
    return ds


# =======================================================================================
# Function tracing
# =======================================================================================
class _FuncGraph(Graph):
    """A graph a dataset function is traced into. Tensors of the graph the dataset is
    built in that reach one of its ops become placeholders (captures)."""

    def __init__(self, outer: Graph, name: str):
        super().__init__(outer._runtime_obj)
        self._building_function = True
        self.outer = outer
        self.fn_name = name
        self.captures: dict[Tensor, Tensor] = {}  # outer tensor -> placeholder here
        self.seed = outer.seed

    def capture(self, t: Tensor) -> Tensor:
        """The placeholder standing for the outer tensor ``t``."""
        ph = self.captures.get(t)
        if ph is None:
            with self.as_default(), self.control_dependencies(None):
                ph = self.create_op("Placeholder", [], [t.dtype.base_dtype],
                                    name="captured", attrs={"dtype": t.dtype.base_dtype,
                                                            "shape": t.shape}).outputs[0]
            self.captures[t] = ph
        return ph

    def create_op(self, op_type: str, inputs: Any, *args: Any, **kw: Any) -> Operation:
        inputs = [self.capture(t) if isinstance(t, Tensor) and t.graph is not self else t
                  for t in inputs]
        return super().create_op(op_type, inputs, *args, **kw)


class TracedFunction:
    """A Python function traced once into its own graph: placeholders for the element's
    components, the flat output tensors (or a dataset built from them) and the outer
    tensors it captured.

    :param kind: the transformation, for error messages (``"map"`` ...)
    :param want_dataset: the function must return a Dataset (flat_map, interleave)
    """

    def __init__(self, fn: Callable[..., Any], structure: Any, types: list[_dt.DType],
                 shapes: list[TensorShape], kind: str, want_dataset: bool = False):
        """Trace ``fn`` on placeholders for the element (see the class docstring)."""
        if not callable(fn):
            raise TypeError(f"`{kind}_func` must be callable, got {type(fn).__name__}")
        outer = get_default_graph()
        g = _FuncGraph(outer, kind)
        self.graph = g
        self.kind = kind
        self.in_flags = _sparse_flags(structure)
        with g.as_default():
            self.inputs, comps = self._arguments(g, structure, types, shapes)
            arg = pack_as(structure, comps)
            ret = fn(*arg) if isinstance(arg, tuple) and not hasattr(arg, "_fields") \
                else fn(arg)
            self.dataset: Dataset | None = None
            if want_dataset:
                if not isinstance(ret, Dataset):
                    raise TypeError(f"`{kind}_func` must return a `Dataset` object, got "
                                    f"{type(ret).__name__}")
                self.dataset = ret
                outs = ret._inputs()
                self.out_flags = [False] * len(outs)
                self.types = [o.dtype.base_dtype for o in outs]
                self.shapes = [o.shape for o in outs]
            else:
                if isinstance(ret, Dataset):
                    raise TypeError(f"`{kind}_func` returned a Dataset: use flat_map")
                if ret is None:
                    raise ValueError(f"The `{kind}` function returned None: it must return "
                                     "a tensor or a nested structure of tensors")
                ret = tuple(ret) if isinstance(ret, list) else ret  # TF 1.15 does so
                ret = _normalize_input(ret)
                self.structure = _template(ret)
                self.out_flags = _sparse_flags(self.structure)
                outs, self.types, self.shapes = [], [], []
                for v in flatten(ret):
                    if isinstance(v, SparseTensorValue):
                        v = SparseTensor.from_value(v)
                    if isinstance(v, SparseTensor):
                        outs += [v.indices, v.values, v.dense_shape]
                        self.types.append(v.dtype.base_dtype)
                        self.shapes.append(v.shape)
                        continue
                    outs.append(_to_tensor(v, f"{kind} function output"))
                    self.types.append(outs[-1].dtype.base_dtype)
                    self.shapes.append(outs[-1].shape)
            self.outputs = [o if o.graph is g else g.capture(o) for o in outs]
        self.captured = list(g.captures)  # outer tensors, in capture order
        self.placeholders = [g.captures[t] for t in self.captured]
        self._batched: TracedFunction | None | bool = None

    def _arguments(self, g: Graph, structure: Any, types: list[_dt.DType],
                   shapes: list[TensorShape]) -> tuple[list[Tensor], list[Any]]:
        """The placeholders fed per element and the function's arguments (a tensor, a
        SparseTensor of three placeholders, or a dataset reading a dataset component)."""
        inputs: list[Tensor] = []
        comps: list[Any] = []
        self.dataset_args: list[tuple[int, Dataset]] = []
        for i, (leaf, t, s) in enumerate(zip(flatten(structure), types, shapes)):
            if isinstance(leaf, DatasetLeaf):
                comps.append(_ArgDataset(leaf))
                self.dataset_args.append((i, comps[-1]))
                continue
            n = len(inputs)
            if leaf is SPARSE:
                inputs += [_placeholder(g, _dt.int64, TensorShape([None, s.ndims]),
                                        f"arg{n}"),
                           _placeholder(g, t, TensorShape([None]), f"arg{n + 1}"),
                           _placeholder(g, _dt.int64, TensorShape([s.ndims]), f"arg{n + 2}")]
                shape: Any = inputs[-1]
                if s.is_fully_defined():  # a constant, as TF's static dense shape
                    shape = convert_to_tensor(np.array(s.as_list(), np.int64))
                comps.append(SparseTensor(inputs[-3], inputs[-2], shape))
                if s.ndims is not None:
                    comps[-1].set_shape(s)
            else:
                inputs.append(_placeholder(g, t, s, f"arg{n}"))
                comps.append(inputs[-1])
        return inputs, comps

    def child_env(self, env: "Env", el: Any, outs: list[Any], dataset: "Dataset") -> "Env":
        """The environment ``dataset`` (returned by this function for element ``el``, with
        the function's outputs ``outs``) runs in."""
        values: dict[Any, Any] = dict(zip(dataset._inputs(), outs))
        for i, ds in self.dataset_args:
            values[ds] = el[i]
        return Env(values, env)

    def batched(self) -> "TracedFunction | None":
        """The same function on a batch of elements (components stacked along a new
        first dimension), when that is the same as mapping element by element: every
        op elementwise, every constant a scalar, no captures. Else None."""
        if self._batched is None:
            self._batched = self._make_batched() or False
        return self._batched or None

    def _make_batched(self) -> "TracedFunction | None":
        """The batched copy of this function's graph (see :meth:`batched`), or None."""
        if self.dataset is not None or self.captured or not self.outputs or \
                any(self.in_flags) or any(self.out_flags) or self.dataset_args:
            return None
        inputs = set(self.inputs)
        for op in self.graph.get_operations():
            if op.type == "Placeholder":
                if op.outputs[0] not in inputs:
                    return None
            elif op.type == "Const":
                if op.outputs[0].shape.ndims != 0:
                    return None
            elif op.type not in _ELEMENTWISE or op.control_inputs:
                return None
            else:  # broadcasting between components would change meaning when batched
                out = op.outputs[0].shape
                if not out.is_fully_defined() or any(
                        not (i.op.type == "Const" or i.shape.as_tuple() == out.as_tuple())
                        for i in op.inputs):
                    return None
        for o in self.outputs:
            if o.op.type == "Const":
                return None
        g = Graph(self.graph._runtime_obj)
        with g.as_default():
            phs = [_placeholder(g, p.dtype.base_dtype,
                                TensorShape([None]).concatenate(p.shape), f"arg{i}")
                   for i, p in enumerate(self.inputs)]
            outs = import_graph_def(self.graph.as_graph_def(),
                                    input_map={p.name: b for p, b in zip(self.inputs, phs)},
                                    return_elements=[o.name for o in self.outputs], name="")
        clone = object.__new__(TracedFunction)
        clone.__dict__.update(self.__dict__)
        clone.graph, clone.inputs, clone.outputs, clone._batched = g, phs, list(outs), False
        return clone


#: ops whose result on stacked elements is the stack of their results
_ELEMENTWISE = frozenset({
    "Identity", "Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "FloorDiv", "FloorMod",
    "Maximum", "Minimum", "Pow", "Neg", "Abs", "Square", "Sqrt", "Rsqrt", "Exp", "Log",
    "Log1p", "Tanh", "Sigmoid", "Relu", "Relu6", "Elu", "Softplus", "Cast", "Floor", "Ceil",
    "Round", "Sign", "Reciprocal", "Equal", "NotEqual", "Less", "LessEqual", "Greater",
    "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "SquaredDifference",
    "Select", "Sin", "Cos"})


def _placeholder(g: Graph, dtype: _dt.DType, shape: TensorShape, name: str) -> Tensor:
    return g.create_op("Placeholder", [], [dtype], name=name,
                       attrs={"dtype": dtype, "shape": shape}).outputs[0]


def _to_tensor(v: Any, what: str) -> Tensor:
    if isinstance(v, Dataset):
        raise TypeError(f"The {what} is a Dataset; expected tensors")
    try:
        return convert_to_tensor(v)
    except (TypeError, ValueError) as e:
        raise TypeError(f"The {what} {v!r} cannot be converted to a tensor: {e}") from None


# =======================================================================================
# Run-time environment
# =======================================================================================
class Env:
    """What a dataset needs while it runs: captured values (by tensor), one session
    per traced function, and per-iterator state of datasets (cache contents, shuffle
    epochs). Made by the MakeIterator kernel; closed when the iterator is reset."""

    def __init__(self, values: dict[Tensor, Any], parent: "Env | None" = None):
        self.values = values
        self.parent = parent
        self._sessions: dict[int, tuple[Any, Callable[..., Any]]] = \
            parent._sessions if parent is not None else {}
        self.state: dict[int, Any] = {}
        self._closers: list[Callable[[], None]] = parent._closers if parent else []
        self.closed = threading.Event() if parent is None else parent.closed
        #: set under ``ignore_errors``: map and filter drop an element whose function fails
        self.skip_errors: bool = parent.skip_errors if parent is not None else False

    def value(self, t: Any) -> Any:
        """The run-time value of a captured tensor (a non-tensor is its own value)."""
        if not isinstance(t, Tensor):
            return t
        try:
            return self.values[t]
        except KeyError:
            raise errors.InternalError(None, None, f"no value for captured tensor "
                                       f"{t.name}") from None

    def call(self, fn: TracedFunction, flat: Any) -> list[Any]:
        """Run ``fn`` on one element (flat component values)."""
        entry = self._sessions.get(id(fn))
        if entry is None:
            sess = Session(graph=fn.graph)
            run = sess.make_callable(fn.outputs, feed_list=fn.inputs + fn.placeholders)
            entry = self._sessions[id(fn)] = (sess, run)
            self._closers.append(sess.close)
        caps = [self.value(t) for t in fn.captured]
        try:
            outs = entry[1](*dense_components(flat), *caps)
            return _collapse(fn.out_flags, outs, SparseTensorValue) \
                if any(fn.out_flags) else outs
        except errors.OpError as e:
            raise type(e)(None, None, f"{e.message}\n\t [[in the `{fn.kind}` function of "
                          f"the dataset]]") from None

    def add_closer(self, fn: Callable[[], None]) -> None:
        self._closers.append(fn)

    def close(self) -> None:
        """Stop background threads and close the function sessions."""
        self.closed.set()
        for c in reversed(self._closers):
            try:
                c()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
        self._closers.clear()
        self._sessions.clear()


# =======================================================================================
# Dataset
# =======================================================================================
class _OptionsBase:
    """TF's options objects: typed fields that default to None (or a nested options
    object), AttributeError for an unknown name, TypeError for a wrong type; merged
    field by field (:func:`merge_options`)."""

    #: field name -> (type, default factory)
    _FIELDS: dict[str, tuple[Any, Callable[[], Any]]] = {}

    def __init__(self) -> None:
        object.__setattr__(self, "_values", {})

    def __getattr__(self, name: str) -> Any:
        fields = type(self)._FIELDS
        if name in fields:
            vals = self.__dict__["_values"]
            if name not in vals:
                vals[name] = fields[name][1]()
            return vals[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        fields = type(self)._FIELDS
        if name not in fields:
            raise AttributeError(f"Cannot set the property {name} on "
                                 f"{type(self).__name__}.")
        ty = fields[name][0]
        if value is not None and not isinstance(value, ty) or \
                (ty is int and isinstance(value, bool)):
            raise TypeError(f"Property \"{name}\" must be of type {ty}, got: {value!r} "
                            f"(type: {type(value)})")
        self._values[name] = value

    def __eq__(self, other: Any) -> bool:
        if type(self) is not type(other):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in type(self)._FIELDS)

    def __ne__(self, other: Any) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]


def merge_options(*options_list: Any) -> Any:
    """TF 1.15's merge: each set field of each options object in turn; nested options
    merged field by field.

    :raises ValueError: two different values set for one field"""
    kind = type(options_list[0])
    default, result = kind(), kind()
    for options in options_list:
        if type(options) is not kind:
            raise TypeError(f"Incompatible options type: {type(options)!r} vs {kind!r}")
        for name in kind._FIELDS:
            this, that, base = (getattr(o, name) for o in (result, options, default))
            if that == base:
                continue
            if this == base:
                setattr(result, name, that)
            elif isinstance(this, _OptionsBase):
                setattr(result, name, merge_options(this, that))
            elif this != that:
                raise ValueError(f"Cannot merge incompatible values ({this!r} and "
                                 f"{that!r}) of option: {name}")
    return result


def _none() -> None:
    return None


class ThreadingOptions(_OptionsBase):
    """``tf.data.experimental.ThreadingOptions``: ``private_threadpool_size`` and
    ``max_intra_op_parallelism`` (kept, not used)."""

    _FIELDS = {"max_intra_op_parallelism": (int, _none),
               "private_threadpool_size": (int, _none)}


class MapVectorizationOptions(_OptionsBase):
    """``tf.data.experimental.MapVectorizationOptions``: ``enabled``,
    ``use_choose_fastest`` (kept, not used)."""

    _FIELDS = {"enabled": (bool, _none), "use_choose_fastest": (bool, _none)}


class OptimizationOptions(_OptionsBase):
    """``tf.data.experimental.OptimizationOptions``: TF 1.15's static optimization
    switches (kept and merged; flowrt's pipelines run the same whatever they say)."""

    _FIELDS = {**{n: (bool, _none) for n in (
        "apply_default_optimizations", "autotune", "autotune_buffers", "filter_fusion",
        "filter_with_random_uniform_fusion", "hoist_random_uniform", "map_and_batch_fusion",
        "map_and_filter_fusion", "map_fusion", "map_parallelization", "noop_elimination",
        "parallel_batch", "shuffle_and_repeat_fusion")},
        "autotune_cpu_budget": (int, _none),
        "map_vectorization": (MapVectorizationOptions, MapVectorizationOptions)}


class DistributeOptions(_OptionsBase):
    """``tf.data.experimental.DistributeOptions``: ``auto_shard`` (default True) and
    ``num_devices`` (kept, not used)."""

    _FIELDS = {"auto_shard": (bool, lambda: True), "num_devices": (int, _none)}


class Options(_OptionsBase):
    """``tf.data.Options``: settings a pipeline carries (``experimental_deterministic``,
    ``experimental_optimization`` ...). flowrt keeps and merges them as TF 1.15 does
    (a conflicting value is a ValueError) but its pipelines do not depend on them."""

    _FIELDS = {"experimental_deterministic": (bool, _none),
               "experimental_distribute": (DistributeOptions, DistributeOptions),
               "experimental_optimization": (OptimizationOptions, OptimizationOptions),
               "experimental_slack": (bool, _none),
               "experimental_stats": (object, _none),
               "experimental_threading": (ThreadingOptions, ThreadingOptions),
               "experimental_external_state_policy": (object, _none)}

    def merge(self, options: "Options") -> "Options":
        """A new Options: these merged with ``options`` (ValueError on a conflict)."""
        return merge_options(self, options)


class ElementStructure:
    """TF 1.15's element properties, shared by datasets and iterators: a subclass sets
    ``_structure`` (the nesting), ``_types`` and ``_shapes`` (one per component)."""

    _structure: Any
    _types: list[Any]
    _shapes: list[Any]

    @property
    def output_types(self) -> Any:
        """The dtype of each component, nested as the elements are."""
        return pack_as(self._structure, self._types)

    @property
    def output_shapes(self) -> Any:
        """The static shape of each component, nested as the elements are."""
        return pack_as(self._structure, self._shapes)

    @property
    def output_classes(self) -> Any:
        """The class of each component (``tf.Tensor``), nested as the elements are."""
        return pack_as(self._structure, [
            SparseTensor if leaf is SPARSE else Dataset if isinstance(leaf, DatasetLeaf)
            else Tensor for leaf in flatten(self._structure)])

    @property
    def element_spec(self) -> Any:
        """A ``tf.TensorSpec`` (``tf.SparseTensorSpec``) per component, nested as the
        elements are."""
        spec, sparse = api_function("TensorSpec"), api_function("SparseTensorSpec")
        return pack_as(self._structure, [(sparse if sp else spec)(s, t) for sp, s, t in zip(
            _sparse_flags(self._structure), self._shapes, self._types)])


class Dataset(ElementStructure):
    """A sequence of elements, each a nested structure of tensors (``tf.data.Dataset``,
    TF 1.15's ``DatasetV1``). Transformations return new datasets; iterate one with
    :meth:`make_one_shot_iterator` or :meth:`make_initializable_iterator`."""

    _transformation = "Dataset"

    def __init__(self, structure: Any, types: list[_dt.DType], shapes: list[TensorShape],
                 inputs: tuple["Dataset", ...] = ()):
        self._structure = structure
        self._types = [_dt.as_dtype(t).base_dtype for t in types]
        self._shapes = [as_shape(s) for s in shapes]
        self._input_datasets = inputs
        self._captured: list[Any] = []
        self._graph = get_default_graph()

    # -- what runs ------------------------------------------------------------------
    def _elements(self, env: Env) -> Iterator[Flat]:
        """The elements, as flat tuples of numpy arrays (subclasses implement)."""
        raise NotImplementedError("need _elements")

    @property
    def _state_key(self) -> int:
        """The key of this dataset's per-iterator state in :attr:`Env.state` (its id; a
        working copy made by a fusion keeps the original's)."""
        return self.__dict__.get("_state_id") or id(self)

    def _inputs(self) -> list[Tensor]:
        """Every graph tensor this dataset and its inputs captured (no duplicates)."""
        seen: dict[Tensor, None] = {}
        for d in self._input_datasets:
            for t in d._inputs():
                seen.setdefault(t, None)
        for t in self._captured:
            if isinstance(t, Tensor):
                seen.setdefault(t, None)
        return list(seen)

    def _capture(self, value: Any, dtype: Any = None, name: str = "arg") -> Tensor:
        """``value`` as a tensor this dataset reads at run time."""
        t = value if isinstance(value, Tensor) else convert_to_tensor(value, dtype=dtype,
                                                                      name=name)
        if dtype is not None and t.dtype.base_dtype is not _dt.as_dtype(dtype):
            if t.dtype.is_integer and _dt.as_dtype(dtype).is_integer:
                t = convert_to_tensor(t, dtype=None)
            else:
                raise TypeError(f"{name} must be {_dt.as_dtype(dtype).name}, got "
                                f"{t.dtype.name}")
        self._captured.append(t)
        return t

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} shapes: {self.output_shapes}, types: "
                f"{self.output_types}>")

    def __iter__(self) -> Any:
        raise RuntimeError("dataset.__iter__() is only supported when eager execution is "
                           "enabled.")

    # -- sources ------------------------------------------------------------------------
    @staticmethod
    def from_tensors(tensors: Any) -> "Dataset":
        """A dataset of one element, ``tensors``."""
        return _TensorsDataset(tensors, slices=False)

    @staticmethod
    def from_tensor_slices(tensors: Any) -> "Dataset":
        """A dataset of the slices of ``tensors`` along their first dimension."""
        return _TensorsDataset(tensors, slices=True)

    @staticmethod
    def range(*args: Any) -> "Dataset":
        """``range(stop)``, ``range(start, stop[, step])``: int64 scalars."""
        return _RangeDataset(*args)

    @staticmethod
    def zip(datasets: Any) -> "Dataset":
        """Elements of ``datasets`` (a nested structure of datasets) side by side."""
        return _ZipDataset(datasets)

    @staticmethod
    def from_generator(generator: Callable[..., Any], output_types: Any,
                       output_shapes: Any = None, args: Any = None) -> "Dataset":
        """Elements yielded by ``generator()`` (called anew for each iteration)."""
        return _GeneratorDataset(generator, output_types, output_shapes, args)

    # -- transformations -------------------------------------------------------------
    def concatenate(self, dataset: "Dataset") -> "Dataset":
        """This dataset's elements, then ``dataset``'s."""
        return _ConcatenateDataset(self, dataset)

    def map(self, map_func: Callable[..., Any], num_parallel_calls: Any = None) -> "Dataset":
        """``map_func`` applied to each element (traced once; ``num_parallel_calls`` is
        accepted and the elements are mapped in order)."""
        return _MapDataset(self, map_func)

    def map_with_legacy_function(self, map_func: Callable[..., Any],
                                 num_parallel_calls: Any = None) -> "Dataset":
        return _MapDataset(self, map_func)

    def filter(self, predicate: Callable[..., Any]) -> "Dataset":
        """The elements for which ``predicate`` is True (a scalar bool)."""
        return _FilterDataset(self, predicate)

    def filter_with_legacy_function(self, predicate: Callable[..., Any]) -> "Dataset":
        """:meth:`filter` (TF 1.15's name for a function traced the legacy way)."""
        return _FilterDataset(self, predicate)

    @staticmethod
    def list_files(file_pattern: Any, shuffle: bool | None = None,
                   seed: int | None = None) -> "Dataset":
        """The files matching ``file_pattern`` (string, list or string tensor), in a
        random order each epoch unless ``shuffle=False`` (then sorted).
        InvalidArgumentError ``No files matched pattern: ...`` when none match."""
        from . import dataset_more  # cycle: dataset_more builds on this module
        return dataset_more.list_files(file_pattern, shuffle, seed)

    @staticmethod
    def from_sparse_tensor_slices(sparse_tensor: Any) -> "Dataset":
        """Per row of ``sparse_tensor``: ``(indices, values, dense_shape)`` of the row."""
        from . import dataset_more  # cycle: dataset_more builds on this module
        return dataset_more.from_sparse_tensor_slices(sparse_tensor)

    def window(self, size: Any, shift: Any = None, stride: Any = 1,
               drop_remainder: Any = False) -> "Dataset":
        """Windows of ``size`` elements, ``stride`` apart, one starting every ``shift``
        (default ``size``) elements; each component of a window element is a dataset,
        consumed in ``flat_map`` (``ds.window(3).flat_map(lambda w: w.batch(3))``)."""
        from . import dataset_more  # cycle: dataset_more builds on this module
        return dataset_more._WindowDataset(self, size, shift, stride, drop_remainder)

    def reduce(self, initial_state: Any, reduce_func: Callable[..., Any]) -> Any:
        """``reduce_func(state, element)`` over every element from ``initial_state``:
        the final state, as tensors."""
        from . import dataset_more  # cycle: dataset_more builds on this module
        return dataset_more.reduce(self, initial_state, reduce_func)

    def shard(self, num_shards: Any, index: Any) -> "Dataset":
        """Every ``num_shards``-th element, starting at element ``index``."""
        from . import dataset_more  # cycle: dataset_more builds on this module
        return dataset_more._ShardDataset(self, num_shards, index)

    def enumerate(self, start: Any = 0) -> "Dataset":
        """``(index, element)`` pairs, the int64 index counting from ``start``."""
        from . import dataset_more  # cycle: dataset_more builds on this module
        return dataset_more.enumerate_ds(self, start)

    def flat_map(self, map_func: Callable[..., Any]) -> "Dataset":
        """The elements of the datasets ``map_func`` returns for each element."""
        return _InterleaveDataset(self, map_func, 1, 1, "flat_map")

    def interleave(self, map_func: Callable[..., Any], cycle_length: int = AUTOTUNE,
                   block_length: int = 1, num_parallel_calls: Any = None) -> "Dataset":
        """``block_length`` elements in turn from ``cycle_length`` datasets that
        ``map_func`` makes (TF's deterministic order)."""
        return _InterleaveDataset(self, map_func, cycle_length, block_length, "interleave")

    def batch(self, batch_size: Any, drop_remainder: bool = False) -> "Dataset":
        """Consecutive elements stacked into batches of ``batch_size``."""
        return _BatchDataset(self, batch_size, drop_remainder)

    def padded_batch(self, batch_size: Any, padded_shapes: Any, padding_values: Any = None,
                     drop_remainder: bool = False) -> "Dataset":
        """Batches whose components are padded to ``padded_shapes`` (-1/None: the
        longest in the batch) with ``padding_values`` (default 0 / b"")."""
        return _BatchDataset(self, batch_size, drop_remainder, padded_shapes,
                             padding_values)

    def unbatch(self) -> "Dataset":
        """Each element split along its first dimension into elements."""
        return _UnbatchDataset(self)

    def shuffle(self, buffer_size: Any, seed: int | None = None,
                reshuffle_each_iteration: bool | None = None) -> "Dataset":
        """Elements in random order drawn from a buffer of ``buffer_size`` (TF's
        algorithm: the buffer is filled, then a random slot is emitted and refilled)."""
        return _ShuffleDataset(self, buffer_size, seed,
                               True if reshuffle_each_iteration is None
                               else reshuffle_each_iteration)

    def repeat(self, count: Any = None) -> "Dataset":
        """The dataset ``count`` times (None or -1: for ever)."""
        return _RepeatDataset(self, count)

    def take(self, count: Any) -> "Dataset":
        """The first ``count`` elements (-1: all)."""
        return _TakeSkipDataset(self, count, take=True)

    def skip(self, count: Any) -> "Dataset":
        """All but the first ``count`` elements (-1: none)."""
        return _TakeSkipDataset(self, count, take=False)

    def cache(self, filename: str = "") -> "Dataset":
        """Elements kept in memory after the first full pass (a file name is accepted
        and the cache is kept in memory)."""
        return _CacheDataset(self)

    def prefetch(self, buffer_size: Any) -> "Dataset":
        """Elements produced ahead by a background thread into a bounded buffer."""
        return _PrefetchDataset(self, buffer_size)

    def apply(self, transformation_func: Callable[["Dataset"], "Dataset"]) -> "Dataset":
        """``transformation_func(self)``, which must return a Dataset."""
        ds = transformation_func(self)
        if not isinstance(ds, Dataset):
            raise TypeError("`transformation_func` must return a Dataset.")
        return ds

    def with_options(self, options: Any) -> "Dataset":
        """The dataset with ``options`` (a :class:`Options`) merged into its own, as TF
        does; flowrt's pipelines run the same whatever they say (``options()`` returns
        them)."""
        if not isinstance(options, Options):
            raise TypeError(f"options must be a tf.data.Options, got {type(options).__name__}")
        mine = getattr(self, "_options", None)
        merged = merge_options(options) if mine is None else merge_options(mine, options)
        out = copy.copy(self)  # (the original keeps its options, as in TF)
        out._options = merged
        return out

    def options(self) -> "Options":
        """The options set with :meth:`with_options` (TF 1.15's ``Dataset.options``)."""
        return getattr(self, "_options", None) or Options()

    # -- iterators --------------------------------------------------------------------
    def make_one_shot_iterator(self) -> Any:
        """An iterator that initializes itself on first use (no placeholders)."""
        from . import iterator  # cycle: iterator builds on this module
        return iterator.make_one_shot_iterator(self)

    def make_initializable_iterator(self, shared_name: str | None = None) -> Any:
        """An iterator with an ``initializer`` op to run before ``get_next``."""
        from . import iterator  # cycle: iterator builds on this module
        return iterator.make_initializable_iterator(self, shared_name)


DatasetV1 = Dataset


def _dim0(shape: TensorShape) -> Any:
    return shape[0].value if shape.ndims else None


# -- sources ------------------------------------------------------------------------------
class _TensorsDataset(Dataset):
    def __init__(self, tensors: Any, slices: bool):
        """The components of ``tensors`` (nested), as one element or sliced along dim 0."""
        tensors = _normalize_input(tensors)
        leaves = flatten(tensors)
        if not leaves:
            raise ValueError("Dataset elements must have at least one component")
        ts = [v if isinstance(v, SparseTensor) else _to_tensor(v, "dataset component")
              for v in leaves]
        if slices:
            n = None
            for t in ts:
                if t.shape.ndims == 0:
                    raise ValueError(f"Unbatching a tensor is only supported for rank >= 1 "
                                     f"(component {_name(t)} is a scalar)")
                d = _dim0(t.shape)
                if d is not None and n is not None and d != n:
                    raise ValueError(f"Dimensions {n} and {d} are not compatible")
                n = d if d is not None else n
            shapes = [TensorShape(t.shape.as_tuple()[1:]) if t.shape.ndims is not None
                      else unknown_shape() for t in ts]
        else:
            shapes = [t.shape for t in ts]
        super().__init__(_template(tensors), [t.dtype for t in ts], shapes)
        self._slices = slices
        self._captured = [c for t in ts for c in ((t.indices, t.values, t.dense_shape)
                                                  if isinstance(t, SparseTensor) else (t,))]

    def _elements(self, env: Env) -> Iterator[Flat]:
        vals = _collapse(_sparse_flags(self._structure),
                         [np.asarray(env.value(t)) for t in self._captured],
                         SparseTensorValue)
        if not self._slices:
            yield tuple(vals)
            return
        n = _batch_dim(vals[0])
        for v in vals[1:]:
            if _batch_dim(v) != n:
                raise errors.InvalidArgumentError(
                    None, None, f"Dimensions of the components must all have the same "
                    f"size in dimension 0: {n} vs. {_batch_dim(v)} (from_tensor_slices)")
        parts = [list(sparse_rows(v)) if isinstance(v, SparseTensorValue) else v
                 for v in vals]
        for i in range(n):
            yield tuple(v[i] for v in parts)


def _name(t: Any) -> str:
    return t.name if isinstance(t, Tensor) else "SparseTensor"


def _batch_dim(v: Any) -> int:
    return int(v.dense_shape[0]) if isinstance(v, SparseTensorValue) else np.shape(v)[0]


def sparse_rows(v: SparseTensorValue) -> Iterator[SparseTensorValue]:
    """The slices of a sparse value along its first dimension (TF's unbatch of a
    SparseTensor: each has ``dense_shape[1:]``)."""
    ind = np.asarray(v.indices, np.int64).reshape(-1, len(v.dense_shape))
    vals, shape = np.asarray(v.values), np.asarray(v.dense_shape, np.int64)
    rows = ind[:, 0] if len(ind) else np.zeros(0, np.int64)
    for i in range(int(shape[0])):
        sel = rows == i
        yield SparseTensorValue(ind[sel][:, 1:], vals[sel], shape[1:])


def sparse_stack(parts: list[SparseTensorValue]) -> SparseTensorValue:
    """Sparse values batched as TF batches them: indices prefixed with the position in
    the batch, dense_shape the batch size then each dimension's maximum.

    :raises errors.InvalidArgumentError: when their ranks differ"""
    ranks = {len(p.dense_shape) for p in parts}
    if len(ranks) != 1:
        raise errors.InvalidArgumentError(None, None, "Cannot batch sparse tensors of "
                                          f"different ranks: {sorted(ranks)}")
    rank = ranks.pop()
    ind = [np.concatenate([np.full((len(p.values), 1), i, np.int64),
                           np.asarray(p.indices, np.int64).reshape(-1, rank)], axis=1)
           for i, p in enumerate(parts)]
    shape = np.max(np.stack([np.asarray(p.dense_shape, np.int64) for p in parts]), axis=0) \
        if rank else np.zeros(0, np.int64)
    return SparseTensorValue(np.concatenate(ind).reshape(-1, rank + 1),
                             np.concatenate([np.asarray(p.values) for p in parts]),
                             np.concatenate([[len(parts)], shape]).astype(np.int64))


class _ArgDataset(Dataset):
    """The dataset a function receives for a dataset component: it reads the component's
    elements from the environment the function's result runs in."""

    def __init__(self, leaf: DatasetLeaf):
        super().__init__(leaf.structure, leaf.types, leaf.shapes)

    def _elements(self, env: Env) -> Iterator[Flat]:
        e: Env | None = env
        while e is not None:
            if self in e.values:
                yield from e.values[self]
                return
            e = e.parent
        raise errors.InternalError(None, None, "a dataset argument was read outside the "
                                   "function that received it")


def _normalize_input(x: Any) -> Any:
    """Nested tuples/dicts of values; a namedtuple keeps its class; a
    SparseTensorValue becomes a SparseTensor (one component)."""
    if isinstance(x, SparseTensorValue):
        return SparseTensor.from_value(x)
    if isinstance(x, dict):
        return {k: _normalize_input(v) for k, v in x.items()}
    if isinstance(x, tuple):
        items = [_normalize_input(v) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else tuple(items)
    return x


class _RangeDataset(Dataset):
    def __init__(self, *args: Any):
        if not 1 <= len(args) <= 3:
            raise ValueError(f"Invalid arguments to RangeDataset: {args}")
        start, step = 0, 1
        if len(args) == 1:
            stop = args[0]
        elif len(args) == 2:
            start, stop = args
        else:
            start, stop, step = args
        super().__init__(None, [_dt.int64], [TensorShape([])])
        self._args = [self._capture(a, _dt.int64, n) for a, n in
                      zip((start, stop, step), ("start", "stop", "step"))]

    def _elements(self, env: Env) -> Iterator[Flat]:
        start, stop, step = (int(env.value(a)) for a in self._args)
        if step == 0:
            raise errors.InvalidArgumentError(None, None, "step must be a non-zero integer.")
        for i in range(start, stop, step):
            yield (np.int64(i),)


class _GeneratorDataset(Dataset):
    def __init__(self, generator: Callable[..., Any], output_types: Any,
                 output_shapes: Any, args: Any):
        if not callable(generator):
            raise TypeError("`generator` must be callable.")
        types = [_dt.as_dtype(t) for t in flatten(_normalize_input(output_types))]
        if output_shapes is None:
            shapes = [unknown_shape()] * len(types)
        else:
            shapes = [as_shape(s) for s in _flatten_shapes(output_shapes, output_types)]
        super().__init__(_template(_normalize_input(output_types)), types, shapes)
        self._gen = generator
        self._args = [self._capture(a, None, "generator_arg") for a in (args or ())]

    def _elements(self, env: Env) -> Iterator[Flat]:
        """Each yielded item converted to the declared types and checked against the
        declared shapes (InvalidArgumentError naming what differs)."""
        args = [env.value(a) for a in self._args]
        for item in self._gen(*args):
            item = _normalize_input(item)
            if not _same_structure(item, self._structure):
                raise errors.InvalidArgumentError(
                    None, None, "`generator` yielded an element that did not match the "
                    f"expected structure. The expected structure was {self.output_types}, "
                    f"but the yielded element was {item}.")
            out = []
            for i, (v, t, s) in enumerate(zip(flatten(item), self._types, self._shapes)):
                try:
                    a = np.asarray(v, dtype=_np_dtype(t))
                except (TypeError, ValueError) as e:
                    raise errors.InvalidArgumentError(
                        None, None, f"TypeError: `generator` yielded an element that could "
                        f"not be converted to the expected type {t.name}: {e}") from None
                if not s.is_compatible_with(TensorShape(a.shape)):
                    raise errors.InvalidArgumentError(
                        None, None, f"`generator` yielded an element of shape "
                        f"{_fmt_shape(a.shape)} where an element of shape {_fmt_shape(s)} "
                        "was expected.")
                out.append(a)
            yield tuple(out)


def _flatten_shapes(shapes: Any, types: Any) -> list[Any]:
    """Shapes given as nested lists under a tuple/dict structure of types."""
    if isinstance(types, dict):
        return [s for k in sorted(types) for s in _flatten_shapes(shapes[k], types[k])]
    if isinstance(types, tuple):
        return [s for st, tt in zip(shapes, types) for s in _flatten_shapes(st, tt)]
    return [shapes]


class _ZipDataset(Dataset):
    _transformation = "zip"

    def __init__(self, datasets: Any):
        datasets = _normalize_input(datasets)
        flat = flatten(datasets)
        for d in flat:
            if not isinstance(d, Dataset):
                raise TypeError("The argument to `Dataset.zip()` must be a nested structure "
                                f"of `Dataset` objects, got {type(d).__name__}")
        structure = pack_as(datasets, [d._structure for d in flat])
        super().__init__(structure, [t for d in flat for t in d._types],
                         [s for d in flat for s in d._shapes], tuple(flat))

    def _elements(self, env: Env) -> Iterator[Flat]:
        its = [d._elements(env) for d in self._input_datasets]
        for parts in zip(*its):
            yield tuple(c for p in parts for c in p)


# -- transformations ----------------------------------------------------------------------
class _ConcatenateDataset(Dataset):
    def __init__(self, a: Dataset, b: Dataset):
        if not isinstance(b, Dataset):
            raise TypeError("`dataset` must be a Dataset")
        if not _same_structure(a._structure, b._structure) or a._types != b._types or \
                _sparse_flags(a._structure) != _sparse_flags(b._structure):
            raise TypeError(f"Two datasets to concatenate have different types "
                            f"{a.output_types} and {b.output_types}")
        shapes = [_most_specific_compatible(x, y) for x, y in zip(a._shapes, b._shapes)]
        super().__init__(a._structure, a._types, shapes, (a, b))

    def _elements(self, env: Env) -> Iterator[Flat]:
        yield from self._input_datasets[0]._elements(env)
        yield from self._input_datasets[1]._elements(env)


def _most_specific_compatible(a: TensorShape, b: TensorShape) -> TensorShape:
    da, db = a.as_tuple(), b.as_tuple()
    if da is None or db is None or len(da) != len(db):
        return unknown_shape()
    return TensorShape([x if x == y else None for x, y in zip(da, db)])


class _MapDataset(Dataset):
    def __init__(self, src: Dataset, fn: Callable[..., Any]):
        self._fn = TracedFunction(fn, src._structure, src._types, src._shapes, "map")
        super().__init__(self._fn.structure, self._fn.types, self._fn.shapes, (src,))
        self._captured = list(self._fn.captured)

    def _elements(self, env: Env) -> Iterator[Flat]:
        fn = self._fn
        for el in self._input_datasets[0]._elements(env):
            try:
                out = env.call(fn, el)
            except errors.OpError:
                if env.skip_errors:
                    continue
                raise
            yield tuple(out)


class _FilterDataset(Dataset):
    def __init__(self, src: Dataset, predicate: Callable[..., Any]):
        self._fn = TracedFunction(predicate, src._structure, src._types, src._shapes,
                                  "filter")
        if len(self._fn.types) != 1 or self._fn.types[0] is not _dt.bool or \
                not self._fn.shapes[0].is_compatible_with(TensorShape([])):
            raise ValueError("`predicate` must return a scalar boolean tensor.")
        super().__init__(src._structure, src._types, src._shapes, (src,))
        self._captured = list(self._fn.captured)

    def _elements(self, env: Env) -> Iterator[Flat]:
        for el in self._input_datasets[0]._elements(env):
            try:
                keep = bool(np.asarray(env.call(self._fn, el)[0]))
            except errors.OpError:
                if env.skip_errors:
                    continue
                raise
            if keep:
                yield el


class _InterleaveDataset(Dataset):
    def __init__(self, src: Dataset, fn: Callable[..., Any], cycle_length: Any,
                 block_length: Any, kind: str):
        self._fn = TracedFunction(fn, src._structure, src._types, src._shapes, kind,
                                  want_dataset=True)
        inner = self._fn.dataset
        assert inner is not None
        super().__init__(inner._structure, inner._types, inner._shapes, (src,))
        self._inner = inner
        self._captured = list(self._fn.captured)
        self._cycle = self._capture(cycle_length, _dt.int64, "cycle_length")
        self._block = self._capture(block_length, _dt.int64, "block_length")

    def _elements(self, env: Env) -> Iterator[Flat]:
        """TF's interleave order: ``block_length`` elements from each of ``cycle_length``
        open datasets in turn; an exhausted one is replaced at once by the next input."""
        cycle, block = int(env.value(self._cycle)), int(env.value(self._block))
        if cycle == AUTOTUNE:
            cycle = 16
        if cycle <= 0 or block <= 0:
            raise errors.InvalidArgumentError(
                None, None, "cycle_length and block_length must be greater than zero.")
        src = self._input_datasets[0]._elements(env)

        def open_next() -> Iterator[Flat] | None:
            for el in src:
                child = self._fn.child_env(env, el, env.call(self._fn, el), self._inner)
                return self._inner._elements(child)
            return None

        slots: list[Iterator[Flat] | None] = [None] * cycle
        i = n_open = taken = 0
        end_of_input = False
        while not end_of_input or n_open:
            it = slots[i]
            if it is not None:
                try:
                    el = next(it)
                except StopIteration:  # move on to the next slot; refill this one later
                    slots[i] = None
                    n_open -= 1
                    i, taken = (i + 1) % cycle, 0
                    continue
                taken += 1
                if taken == block:
                    i, taken = (i + 1) % cycle, 0
                yield el
            elif not end_of_input:
                it = open_next()
                if it is None:
                    end_of_input = True
                else:
                    slots[i] = it
                    n_open += 1
            else:
                i, taken = (i + 1) % cycle, 0


class _BatchDataset(Dataset):
    def __init__(self, src: Dataset, batch_size: Any, drop_remainder: Any,
                 padded_shapes: Any = None, padding_values: Any = None):
        """Batch (or pad and batch) ``src``; padded shapes and values checked against its
        component shapes and dtypes."""
        self._size = self._capture_early(batch_size, "batch_size")
        self._drop = bool(drop_remainder)
        static = None
        if not isinstance(batch_size, Tensor):
            static = int(batch_size)
        self._padded = padded_shapes is not None
        if self._padded and any(_sparse_flags(src._structure)):
            raise TypeError("Batching of padded sparse tensors is not currently supported")
        shapes = list(src._shapes)
        self._pad_values: list[Any] = []
        if self._padded:
            pshapes = _flatten_shapes(_normalize_input(padded_shapes)
                                      if isinstance(padded_shapes, (dict, tuple))
                                      else padded_shapes, src._structure) \
                if src._structure is not None else [padded_shapes]
            if len(pshapes) != len(shapes):
                raise ValueError("The two structures don't have the same number of elements "
                                 f"(padded_shapes {padded_shapes} vs {src.output_shapes})")
            shapes = []
            for ps, s in zip(pshapes, src._shapes):
                p = as_shape([None if d == -1 else d for d in ps]
                             if isinstance(ps, (list, tuple)) else ps)
                if not p.is_compatible_with(s) or (s.ndims is not None and
                                                   p.ndims != s.ndims):
                    raise ValueError(f"The padded shape {_fmt_shape(p)} is not compatible "
                                     f"with the corresponding input component shape "
                                     f"{_fmt_shape(s)}.")
                shapes.append(p)
            if padding_values is None:
                pv = [None] * len(shapes)
            else:
                pv = flatten(_normalize_input(padding_values)) \
                    if src._structure is not None else [padding_values]
            for v, t in zip(pv, src._types):
                self._pad_values.append(np.asarray(b"" if v is None and t is _dt.string
                                                   else (0 if v is None else v),
                                                   dtype=_np_dtype(t)))
        dim = static if (self._drop and static is not None) else None
        super().__init__(src._structure, src._types,
                         [TensorShape([dim]).concatenate(s) for s in shapes], (src,))
        self._pad_shapes = shapes
        self._captured = [self._size]
        #: (input with an elementwise map taken out, that map batched) once looked up
        self._fused: tuple[Dataset, TracedFunction | None] | None = None

    def _capture_early(self, v: Any, name: str) -> Any:
        return v if isinstance(v, Tensor) else np.int64(v)

    def _elements(self, env: Env) -> Iterator[Flat]:
        """Batches of ``batch_size`` elements (the last one smaller unless dropped); an
        elementwise map below runs once per batch on the stacked elements."""
        n = int(env.value(self._size))
        if n <= 0:
            raise errors.InvalidArgumentError(None, None,
                                              "Batch size must be greater than zero.")
        src, fn = self._input_datasets[0], None
        if not self._padded and not env.skip_errors:
            # map then batch: the function runs once per batch
            if self._fused is None:
                self._fused = _without_map(src)
            src, fn = self._fused
        types = src._types
        buf: list[Flat] = []
        for el in src._elements(env):
            buf.append(el)
            if len(buf) == n:
                yield self._stack(buf, types) if fn is None else \
                    tuple(env.call(fn, self._stack(buf, types)))
                buf = []
        if buf and not self._drop:
            yield self._stack(buf, types) if fn is None else \
                tuple(env.call(fn, self._stack(buf, types)))

    def _stack(self, buf: list[Flat], types: list[_dt.DType] | None = None) -> Flat:
        """Elements (of component dtypes ``types``, by default this dataset's) stacked (or padded) per component;
        sparse ones batched as TF does.

        :raises errors.InvalidArgumentError: when dense components differ in shape"""
        types = self._types if types is None else types
        out = []
        for c in range(len(buf[0])):
            if isinstance(buf[0][c], SparseTensorValue):
                out.append(sparse_stack([e[c] for e in buf]))
                continue
            parts = [np.asarray(e[c], dtype=object if types[c] is _dt.string else None)
                     for e in buf]  # (bytes as 'S' would lose trailing NULs)
            if self._padded:
                out.append(self._pad(parts, c))
                continue
            first = parts[0].shape
            for j, p in enumerate(parts):
                if p.shape != first:
                    raise errors.InvalidArgumentError(
                        None, None, f"Cannot batch tensors with different shapes in "
                        f"component {c}. First element had shape {_fmt_shape(first)} and "
                        f"element {j} had shape {_fmt_shape(p.shape)}.")
            out.append(np.stack(parts))
        return tuple(out)

    def _pad(self, parts: list[np.ndarray], c: int) -> np.ndarray:
        want = self._pad_shapes[c].as_tuple()
        dims = []
        for k, w in enumerate(want):
            longest = max(p.shape[k] for p in parts)
            if w is not None and longest > w:
                raise errors.InvalidArgumentError(
                    None, None, "Attempted to pad to a smaller size than the input "
                    "element.")
            dims.append(longest if w is None else w)
        out = np.full([len(parts), *dims], self._pad_values[c],
                      dtype=parts[0].dtype if parts[0].dtype != object else object)
        for i, p in enumerate(parts):
            out[(i, *[slice(0, d) for d in p.shape])] = p
        return out


#: datasets that pass their input's elements through unchanged, in an order that does not
#: depend on their values: an elementwise map may run after them instead of before
_ORDER_ONLY: tuple[type, ...] = ()


def _without_map(ds: Dataset) -> tuple[Dataset, "TracedFunction | None"]:
    """``ds`` with an elementwise map taken out from under it, and that map batched
    (:meth:`TracedFunction.batched`); ``(ds, None)`` when there is none. The map may
    sit under repeat, shuffle, take and skip: they only pick and order elements, so
    mapping after them gives the same elements (shuffle draws the same slots). Those
    above the map are copied over the map's input, keeping their state keys (epochs and
    seeds, which saved iterator states name) so the copy behaves as the original."""
    if isinstance(ds, _MapDataset):
        fn = ds._fn.batched()
        return (ds._input_datasets[0], fn) if fn is not None else (ds, None)
    if type(ds) in _ORDER_ONLY:
        inner, fn = _without_map(ds._input_datasets[0])
        if fn is not None:
            copy = object.__new__(type(ds))
            copy.__dict__.update(ds.__dict__)
            copy._input_datasets = (inner,)
            copy._state_id = ds._state_key
            return copy, fn
    return ds, None


class _UnbatchDataset(Dataset):
    def __init__(self, src: Dataset):
        for s in src._shapes:
            if s.ndims == 0:
                raise ValueError("Cannot unbatch an input with scalar components.")
        super().__init__(src._structure, src._types,
                         [TensorShape(s.as_tuple()[1:]) if s.ndims is not None
                          else unknown_shape() for s in src._shapes], (src,))

    def _elements(self, env: Env) -> Iterator[Flat]:
        for el in self._input_datasets[0]._elements(env):
            n = _batch_dim(el[0])
            if any(_batch_dim(c) != n for c in el):
                raise errors.InvalidArgumentError(None, None, "Input element must have the "
                                                  "same batch size in each component.")
            el = tuple(list(sparse_rows(c)) if isinstance(c, SparseTensorValue) else c
                       for c in el)
            for i in range(n):
                yield tuple(c[i] for c in el)


class _ShuffleDataset(Dataset):
    def __init__(self, src: Dataset, buffer_size: Any, seed: int | None, reshuffle: bool):
        super().__init__(src._structure, src._types, src._shapes, (src,))
        self._buffer = self._capture(buffer_size, _dt.int64, "buffer_size")
        self._seeds = get_seed(seed)
        self._reshuffle = bool(reshuffle)

    def _elements(self, env: Env) -> Iterator[Flat]:
        """TF's shuffle buffer: fill ``buffer_size`` elements, emit a random slot and refill
        it; seeds per epoch when reshuffling each iteration."""
        n = int(env.value(self._buffer))
        if n <= 0:
            raise errors.InvalidArgumentError(None, None,
                                              "buffer_size must be greater than zero.")
        key = self._state_key
        epoch = env.state.get(key, 0)
        env.state[key] = epoch + 1
        s1, s2 = self._seeds
        if s1 is None and s2 is None:
            base = env.state.setdefault(("seed", key),
                                        int(np.random.SeedSequence().entropy % (1 << 62)))
            rng = np.random.default_rng([base, epoch if self._reshuffle else 0])
        else:
            rng = np.random.default_rng([s1 or 0, s2 or 0, epoch if self._reshuffle else 0])
        buf: list[Flat] = []
        for el in self._input_datasets[0]._elements(env):
            if len(buf) < n:
                buf.append(el)
                if len(buf) < n:
                    continue
            i = int(rng.integers(len(buf)))
            out = buf[i]
            buf[i] = buf[-1]
            buf.pop()
            yield out
        while buf:
            i = int(rng.integers(len(buf)))
            buf[i], buf[-1] = buf[-1], buf[i]
            yield buf.pop()


class _RepeatDataset(Dataset):
    def __init__(self, src: Dataset, count: Any):
        super().__init__(src._structure, src._types, src._shapes, (src,))
        self._count = self._capture(-1 if count is None else count, _dt.int64, "count")

    def _elements(self, env: Env) -> Iterator[Flat]:
        count = int(env.value(self._count))
        src = self._input_datasets[0]
        i = 0
        while count < 0 or i < count:
            got = False
            for el in src._elements(env):
                got = True
                yield el
            i += 1
            if not got:  # an empty input repeated for ever is empty (as TF)
                return


class _TakeSkipDataset(Dataset):
    def __init__(self, src: Dataset, count: Any, take: bool):
        super().__init__(src._structure, src._types, src._shapes, (src,))
        self._count = self._capture(count, _dt.int64, "count")
        self._take = take

    def _elements(self, env: Env) -> Iterator[Flat]:
        count = int(env.value(self._count))
        it = self._input_datasets[0]._elements(env)
        if self._take:
            yield from (it if count < 0 else itertools.islice(it, count))
        elif count >= 0:
            yield from itertools.islice(it, count, None)


class _CacheDataset(Dataset):
    def __init__(self, src: Dataset):
        super().__init__(src._structure, src._types, src._shapes, (src,))

    def _elements(self, env: Env) -> Iterator[Flat]:
        done = env.state.get(id(self))
        if done is not None:
            yield from done
            return
        seen: list[Flat] = []
        for el in self._input_datasets[0]._elements(env):
            seen.append(el)
            yield el
        env.state[id(self)] = seen


_ORDER_ONLY = (_RepeatDataset, _ShuffleDataset, _TakeSkipDataset)

_END = object()


class _PrefetchDataset(Dataset):
    def __init__(self, src: Dataset, buffer_size: Any):
        super().__init__(src._structure, src._types, src._shapes, (src,))
        self._size = self._capture(buffer_size, _dt.int64, "buffer_size")

    def _elements(self, env: Env) -> Iterator[Flat]:
        """Run the input on a daemon thread into a bounded queue; its errors reach the
        consumer; closing the iterator stops it."""
        n = int(env.value(self._size))
        if n == AUTOTUNE:
            n = _AUTOTUNE_PREFETCH
        if n < 0:
            raise errors.InvalidArgumentError(None, None, "buffer_size must be >= 0 or "
                                              "AUTOTUNE (-1)")
        if n == 0:
            yield from self._input_datasets[0]._elements(env)
            return
        q: queue.Queue = queue.Queue(n)
        stop = threading.Event()
        src = self._input_datasets[0]._elements(env)

        def put(item: Any) -> bool:
            while not stop.is_set() and not env.closed.is_set():
                try:
                    q.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def produce() -> None:
            try:
                for el in src:
                    if not put(el):
                        return
                put(_END)
            except BaseException as e:  # noqa: BLE001 - handed to the consumer
                put(e)

        th = threading.Thread(target=produce, name="flowrt-prefetch", daemon=True)
        env.add_closer(stop.set)
        th.start()
        try:
            while True:
                item = q.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()


#: ``tf.data.experimental.INFINITE_CARDINALITY`` / ``UNKNOWN_CARDINALITY`` (TF's values)
INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2

API = {
    "data.Dataset": Dataset,
    "data.experimental.AUTOTUNE": AUTOTUNE,
    "data.AUTOTUNE": AUTOTUNE,
    "data.Options": Options,
    "data.experimental.ThreadingOptions": ThreadingOptions,
    "data.experimental.OptimizationOptions": OptimizationOptions,
    "data.experimental.MapVectorizationOptions": MapVectorizationOptions,
    "data.experimental.DistributeOptions": DistributeOptions,
    "data.experimental.INFINITE_CARDINALITY": INFINITE_CARDINALITY,
    "data.experimental.UNKNOWN_CARDINALITY": UNKNOWN_CARDINALITY,
    "data.INFINITE_CARDINALITY": INFINITE_CARDINALITY,
    "data.UNKNOWN_CARDINALITY": UNKNOWN_CARDINALITY,
}
