"""The dataflow graph: :class:`Graph`, :class:`Operation`, :class:`Tensor`.

Graph construction follows TensorFlow 1.x: unique names (``add``, ``add_1``), name,
device, control-dependency, colocation and container scopes, collections, a default
graph per thread, and static shape inference when an op is added. :func:`apply_op`
turns Python arguments into a node exactly as TF's op-def library does (dtype inference
from type attrs, conversion of Python values, type-constraint checks at build time).
"""
from __future__ import annotations

import contextlib
import re
import threading
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..plugin import device as _device_module  # noqa: F401
from ..base import dtypes as _dt
from ..base.device_spec import DeviceSpec
from ..base.tensor_codec import numpy_value_for, text_of_bytes
from ..plugin.op_registry import expand_args
from ..plugin.runtime import default_runtime, require_api, set_graph_importer
from ..base.tensor_shape import TensorShape, as_shape, unknown_shape

__all__ = [
    "Graph", "Operation", "Tensor", "GraphKeys", "get_default_graph",
    "reset_default_graph", "convert_to_tensor", "register_tensor_conversion_function",
    "apply_op", "name_scope", "control_dependencies", "device", "colocate_with",
    "container", "get_seed", "set_random_seed", "add_to_collection", "add_to_collections",
    "get_collection", "get_collection_ref", "make_ndarray_for", "is_tensor",
    "convert_n_to_tensor", "numpy_value_for", "DEFAULT_GRAPH_SEED", "init_scope",
]

DEFAULT_GRAPH_SEED = 87654321
_MAXINT32 = 2**31 - 1
_VALID_OP_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*$")
_VALID_SCOPE_NAME = re.compile(r"^[A-Za-z0-9_.\\/>-]*$")


class GraphKeys:
    """Standard collection names (``tf.GraphKeys``)."""

    GLOBAL_VARIABLES = "variables"
    VARIABLES = "variables"
    LOCAL_VARIABLES = "local_variables"
    METRIC_VARIABLES = "metric_variables"
    MODEL_VARIABLES = "model_variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    SUMMARIES = "summaries"
    QUEUE_RUNNERS = "queue_runners"
    TABLE_INITIALIZERS = "table_initializer"
    ASSET_FILEPATHS = "asset_filepaths"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    REGULARIZATION_LOSSES = "regularization_losses"
    CONCATENATED_VARIABLES = "concatenated_variables"
    SAVERS = "savers"
    WEIGHTS = "weights"
    BIASES = "biases"
    ACTIVATIONS = "activations"
    UPDATE_OPS = "update_ops"
    LOSSES = "losses"
    SAVEABLE_OBJECTS = "saveable_objects"
    RESOURCES = "resources"
    LOCAL_RESOURCES = "local_resources"
    TRAINABLE_RESOURCE_VARIABLES = "trainable_resource_variables"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
    SUMMARY_OP = "summary_op"
    GLOBAL_STEP = "global_step"
    EVAL_STEP = "eval_step"
    TRAIN_OP = "train_op"
    COND_CONTEXT = "cond_context"
    WHILE_CONTEXT = "while_context"


# ---------------------------------------------------------------------------------------
# Tensor
# ---------------------------------------------------------------------------------------
class Tensor:
    """A symbolic handle to one output of an :class:`Operation` (``tf.Tensor``)."""

    __slots__ = ("_op", "_value_index", "_dtype", "_shape", "_consumers", "_name",
                 "__weakref__")
    __array_priority__ = 100  # numpy defers to our operators

    #: The Python operators a Tensor overloads (TF's list).
    OVERLOADABLE_OPERATORS = frozenset({
        "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__div__",
        "__rdiv__", "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__",
        "__mod__", "__rmod__", "__lt__", "__le__", "__gt__", "__ge__", "__and__",
        "__rand__", "__or__", "__ror__", "__xor__", "__rxor__", "__getitem__", "__pow__",
        "__rpow__", "__invert__", "__neg__", "__abs__", "__matmul__", "__rmatmul__"})

    @classmethod
    def _override_operator(cls, operator: str, func: Callable[..., Any]) -> None:
        """Replace the implementation of one of :attr:`OVERLOADABLE_OPERATORS`."""
        if operator not in cls.OVERLOADABLE_OPERATORS:
            raise ValueError(f"Overriding {operator} is disallowed")
        setattr(cls, operator, func)

    def __init__(self, op: "Operation", value_index: int, dtype: _dt.DType):
        self._op = op
        self._value_index = value_index
        self._dtype = dtype
        self._shape = unknown_shape()
        self._consumers: list[Operation] = []
        self._name = f"{op.name}:{value_index}"

    @property
    def op(self) -> "Operation":
        return self._op

    @property
    def value_index(self) -> int:
        return self._value_index

    @property
    def dtype(self) -> _dt.DType:
        return self._dtype

    @property
    def graph(self) -> "Graph":
        return self._op._graph

    @property
    def name(self) -> str:
        return self._name

    @property
    def device(self) -> str:
        return self._op.device

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    def set_shape(self, shape: Any) -> None:
        """Merge ``shape`` into the static shape; ValueError if incompatible."""
        self._shape = self._shape.merge_with(as_shape(shape))

    def consumers(self) -> list["Operation"]:
        return list(self._consumers)

    def eval(self, feed_dict: Any = None, session: Any = None) -> Any:
        """Run this tensor in ``session`` (default: the default session)."""
        # session imports this module: a cycle, broken here
        from .session import _default_session_for

        return _default_session_for(self.graph, session).run(self, feed_dict)

    def _as_node_def_input(self) -> str:
        return self._op.name if self._value_index == 0 else self._name

    def __repr__(self) -> str:
        return f"<tf.Tensor '{self._name}' shape={self._shape} dtype={self._dtype.name}>"

    def __str__(self) -> str:
        shape = f", shape={self._shape}" if self._shape.ndims is not None else ""
        dev = f", device={self.device}" if self.device else ""
        return f'Tensor("{self._name}"{shape}, dtype={self._dtype.name}{dev})'

    # equality and hash are object's (identity, as TF1's Tensor: tensors are dict keys)

    def __bool__(self) -> bool:
        raise TypeError("Using a `tf.Tensor` as a Python `bool` is not allowed. "
                        "Use `if t is not None:` instead of `if t:` to test if a tensor "
                        "is defined, and use TensorFlow ops such as tf.cond to execute "
                        "subgraphs conditioned on the value of a tensor.")

    __nonzero__ = __bool__

    def __iter__(self) -> Iterator["Tensor"]:
        # TF 1.x graph mode never iterates a symbolic tensor, whatever its shape.
        raise TypeError("Tensor objects are only iterable when eager execution is "
                        "enabled. To iterate over this tensor use tf.map_fn.")

    def __len__(self) -> int:
        raise TypeError(f"len is not well defined for symbolic Tensors. ({self._name}) "
                        "Please call `x.shape` rather than `len(x)` for shape information.")

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise NotImplementedError(
            f"Cannot convert a symbolic Tensor ({self._name}) to a numpy array.")

    def __getitem__(self, key: Any) -> "Tensor":
        return api_function("__getitem__")(self, key)


#: The op API names the core's TF-API layers (framework, training) call through
#: :func:`api_function`: a kernel set must provide them (the ``standard`` plugin does).
#: The runtime checks them when it builds its API table (``Runtime.missing_required_api``)
#: and ``flowrt plugins`` reports any that no loaded plugin provides.
REQUIRED_API_NAMES: frozenset[str] = frozenset({
    # Tensor operators
    "_add_dispatch", "subtract", "multiply", "truediv", "floordiv", "floormod", "pow",
    "matmul", "logical_and", "logical_or", "logical_xor", "less", "less_equal", "greater",
    "greater_equal", "negative", "abs", "logical_not", "__getitem__",
    # gradients, variables, savers, monitored sessions
    "stack", "zeros_like", "ones_like", "reshape", "group", "zeros_initializer",
    "glorot_uniform_initializer", "train.get_global_step", "train.Saver", "shape",
    "reduce_all", "identity", "constant", "cond", "cast", "boolean_mask", "add_n",
    # IndexedSlices, partitioned variables, scatter updates
    "math.unsorted_segment_sum", "range", "concat", "split", "slice", "scatter_add",
    "scatter_sub", "scatter_update",
})


def api_function(name: str) -> Callable[..., Any]:
    """The op API function ``name`` (``"reshape"``, ``"nn.relu"``) of the default graph's
    runtime: how the core's TF-API layers call ops that kernel-set plugins define. Names
    the core itself calls are listed in :data:`REQUIRED_API_NAMES`.

    :raises AttributeError: naming the function, with "did you mean" and the plugins
        that failed to load or were blocked
    """
    return get_default_graph()._runtime.api_function(name)


def _binop(op_name: str, api_name: str, reverse: bool = False
           ) -> Callable[[Tensor, Any], Any]:
    """A Python operator as TF defines it: the op is built in a name scope named after
    the operator (``x + 1.0`` gives ``add`` with the constant ``add/y``)."""
    rname = f"__r{op_name}__"

    def op(self: Tensor, other: Any) -> Any:
        fn = api_function(api_name)
        with name_scope(None, op_name, [self, other]) as name:
            if reverse:
                x = convert_to_tensor(other, dtype=self._dtype.base_dtype, name="x")
                return fn(x, self, name=name)
            if not isinstance(other, Tensor):
                try:
                    other = convert_to_tensor(other, dtype_hint=self._dtype.base_dtype,
                                              name="y")
                except TypeError:
                    if hasattr(type(other), rname):
                        return NotImplemented
                    raise
            return fn(self, other, name=name)

    op.__name__ = f"__{'r' if reverse else ''}{op_name}__"
    return op


def _cmp(api_name: str, op_name: str) -> Callable[[Tensor, Any], Any]:
    def op(self: Tensor, other: Any) -> Any:
        return api_function(api_name)(self, other)

    op.__name__ = f"__{op_name}__"
    return op


for _name, _fn in [("add", "_add_dispatch"), ("sub", "subtract"), ("mul", "multiply"),
                   ("truediv", "truediv"), ("floordiv", "floordiv"), ("mod", "floormod"),
                   ("pow", "pow"), ("matmul", "matmul"), ("and", "logical_and"),
                   ("or", "logical_or"), ("xor", "logical_xor")]:
    setattr(Tensor, f"__{_name}__", _binop(_name, _fn))
    setattr(Tensor, f"__r{_name}__", _binop(_name, _fn, reverse=True))
Tensor.__div__ = Tensor.__truediv__  # type: ignore[attr-defined]
Tensor.__rdiv__ = Tensor.__rtruediv__  # type: ignore[attr-defined]
for _name, _fn in [("lt", "less"), ("le", "less_equal"), ("gt", "greater"),
                   ("ge", "greater_equal")]:
    setattr(Tensor, f"__{_name}__", _cmp(_fn, _name))
Tensor.__neg__ = lambda self: api_function("negative")(self)  # type: ignore[attr-defined]
Tensor.__abs__ = lambda self: api_function("abs")(self)  # type: ignore[attr-defined]
Tensor.__invert__ = lambda self: api_function("logical_not")(self)  # type: ignore[attr-defined]


def is_tensor(x: Any) -> bool:
    """True for graph tensors (and objects convertible like variables)."""
    return isinstance(x, Tensor) or hasattr(x, "_as_graph_element")


# ---------------------------------------------------------------------------------------
# Operation
# ---------------------------------------------------------------------------------------
class Operation:
    """A node of the graph (``tf.Operation``).

    ``node_attrs`` holds attrs as Python values: DType for types, TensorShape for shapes,
    numpy arrays for tensors, str for strings.
    """

    __slots__ = ("_graph", "_name", "_type", "_inputs", "_outputs", "_control_inputs",
                 "_control_outputs", "_device", "node_attrs", "_id", "op_def",
                 "_original_op", "_traceback", "__weakref__")

    def __init__(self, graph: "Graph", name: str, op_type: str, inputs: Sequence[Tensor],
                 output_dtypes: Sequence[_dt.DType], attrs: dict[str, Any], op_def: Any,
                 control_inputs: Sequence["Operation"] = (), device: str = ""):
        self._graph = graph
        self._name = name
        self._type = op_type
        self._inputs: list[Tensor] = list(inputs)
        self._outputs = [Tensor(self, i, d) for i, d in enumerate(output_dtypes)]
        self._control_inputs: list[Operation] = []
        self._control_outputs: list[Operation] = []
        self._device = device
        self.node_attrs = attrs
        self.op_def = op_def
        self._id = 0
        self._original_op = None
        for t in self._inputs:
            t._consumers.append(self)
        for c in control_inputs:
            self._add_control_input(c)

    @property
    def name(self) -> str:
        return self._name

    @property
    def type(self) -> str:
        return self._type

    @property
    def graph(self) -> "Graph":
        return self._graph

    @property
    def inputs(self) -> list[Tensor]:
        return self._inputs

    @property
    def outputs(self) -> list[Tensor]:
        return self._outputs

    @property
    def control_inputs(self) -> list["Operation"]:
        return list(self._control_inputs)

    @property
    def _control_outputs_list(self) -> list["Operation"]:
        return self._control_outputs

    @property
    def device(self) -> str:
        return self._device

    def _set_device(self, device: Any) -> None:
        self._device = device.to_string() if isinstance(device, DeviceSpec) else (device or "")

    def values(self) -> tuple[Tensor, ...]:
        return tuple(self._outputs)

    def _add_control_input(self, op: "Operation") -> None:
        if not isinstance(op, Operation):
            raise TypeError(f"op must be an Operation: {op!r}")
        if op not in self._control_inputs:
            self._control_inputs.append(op)
            op._control_outputs.append(self)
            self._graph._version_bump()

    def _add_control_inputs(self, ops: Sequence["Operation"]) -> None:
        for o in ops:
            self._add_control_input(o)

    def _update_input(self, index: int, tensor: Tensor) -> None:
        old = self._inputs[index]
        old._consumers.remove(self)
        self._inputs[index] = tensor
        tensor._consumers.append(self)
        self._graph._version_bump()

    def get_attr(self, name: str) -> Any:
        """The attr's value, as TF returns it (bytes for strings, DType for types)."""
        if name not in self.node_attrs:
            raise ValueError(f"Operation '{self._name}' has no attr named '{name}'.")
        v = self.node_attrs[name]
        adef = self.op_def.attrs.get(name) if self.op_def is not None else None
        kind = adef.kind if adef is not None else None
        if kind == "string" and isinstance(v, str):
            return v.encode()
        if kind == "list(string)":
            return [x.encode() if isinstance(x, str) else x for x in v]
        if name == "_class":
            return [x.encode() if isinstance(x, str) else x for x in v]
        return v

    def _set_attr(self, name: str, value: Any) -> None:
        self.node_attrs[name] = value
        self._graph._version_bump()

    @property
    def node_def(self) -> Any:
        # graph_def imports this module: a cycle, broken here
        from .graph_def import node_def_of

        return node_def_of(self)

    def colocation_groups(self) -> list[bytes]:
        """The ``loc:@`` groups this op belongs to (its own name when it has none)."""
        cls = self.node_attrs.get("_class") or ()
        groups = [x.encode() if isinstance(x, str) else x for x in cls]
        groups = [g for g in groups if g.startswith(b"loc:@")]
        return groups if groups else [f"loc:@{self._name}".encode()]

    def run(self, feed_dict: Any = None, session: Any = None) -> None:
        """Run this op in ``session`` (default: the default session)."""
        # session imports this module: a cycle, broken here
        from .session import _default_session_for

        _default_session_for(self._graph, session).run(self, feed_dict)

    def __repr__(self) -> str:
        return f"<tf.Operation '{self._name}' type={self._type}>"

    def __str__(self) -> str:
        return str(self.node_def)


# ---------------------------------------------------------------------------------------
# Graph
# ---------------------------------------------------------------------------------------
class Graph:
    """A TensorFlow computation as a dataflow graph (``tf.Graph``).

    A graph is bound to a :class:`~flowrt.runtime.Runtime` (the default one unless given)
    whose op registry validates every op added.
    """

    def __init__(self, runtime: Any = None):
        self._runtime_obj = runtime
        self._lock = threading.RLock()
        self._nodes_by_name: dict[str, Operation] = {}
        self._nodes: list[Operation] = []
        self._names_in_use: dict[str, int] = {}
        self._next_id = 0
        # name, device, control-dependency and colocation scopes are per thread (TF)
        self._tls = _ThreadScopes()
        self._container = ""
        self._collections: dict[str, list[Any]] = {}
        self._finalized = False
        self._version = 0
        self._seed: int | None = None
        self._attr_scope_map: dict[str, Any] = {}
        self._gradient_override_map: dict[str, str] = {}
        self._control_flow_context: Any = None
        self._cond_preds: dict[Any, Any] = {}  # cond's Merge op -> its predicate
        self._building_function = False

    # -- per-thread scope stacks ------------------------------------------------------
    @property
    def _name_stack(self) -> str:
        return self._tls.name_stack

    @_name_stack.setter
    def _name_stack(self, value: str) -> None:
        self._tls.name_stack = value

    @property
    def _device_stack(self) -> list[Any]:
        return self._tls.device_stack

    @_device_stack.setter
    def _device_stack(self, value: list[Any]) -> None:
        self._tls.device_stack = value

    @property
    def _control_stack(self) -> list["_ControlDependencies"]:
        return self._tls.control_stack

    @_control_stack.setter
    def _control_stack(self, value: list["_ControlDependencies"]) -> None:
        self._tls.control_stack = value

    @property
    def _colocation_stack(self) -> list[Operation]:
        return self._tls.colocation_stack

    @_colocation_stack.setter
    def _colocation_stack(self, value: list[Operation]) -> None:
        self._tls.colocation_stack = value

    # -- runtime ----------------------------------------------------------------------
    @property
    def _runtime(self) -> Any:
        if self._runtime_obj is None:
            self._runtime_obj = default_runtime()
        return self._runtime_obj

    # -- basic properties -------------------------------------------------------------
    @property
    def version(self) -> int:
        """Grows whenever a node or edge is added: a session recompiles when it changes."""
        return self._version

    def _version_bump(self) -> None:
        self._version += 1

    @property
    def finalized(self) -> bool:
        return self._finalized

    def finalize(self) -> None:
        """Make the graph read-only: adding an op raises RuntimeError afterwards."""
        self._finalized = True

    def _unsafe_unfinalize(self) -> None:
        self._finalized = False

    def _check_not_finalized(self) -> None:
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")

    @property
    def seed(self) -> int | None:
        return self._seed

    @seed.setter
    def seed(self, seed: int | None) -> None:
        self._seed = seed

    @property
    def _last_id(self) -> int:
        """The id of the last op created (ids count up from 1 and are never reused)."""
        return self._next_id

    @property
    def building_function(self) -> bool:
        return False

    def _get_control_flow_context(self) -> Any:
        return self._control_flow_context

    def _set_control_flow_context(self, ctx: Any) -> None:
        self._control_flow_context = ctx

    # -- default graph ----------------------------------------------------------------
    @contextlib.contextmanager
    def as_default(self) -> Iterator["Graph"]:
        """Make this the default graph of the current thread inside the ``with``."""
        stack = _graph_stack()
        stack.append(self)
        try:
            yield self
        finally:
            stack.pop()

    # -- names ------------------------------------------------------------------------
    def get_name_scope(self) -> str:
        return self._name_stack

    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        """``name`` prefixed by the current scope, suffixed ``_1``, ``_2`` ... if taken.

        Names are compared case-insensitively (``foo`` and ``Foo`` collide), as in TF.
        """
        if self._name_stack:
            name = self._name_stack + "/" + name
        key = name.lower()
        with self._lock:
            i = self._names_in_use.get(key, 0)
            if mark_as_used:
                self._names_in_use[key] = i + 1
            if i > 0:
                base = key
                while key in self._names_in_use:
                    key = f"{base}_{i}"
                    i += 1
                if mark_as_used:
                    self._names_in_use[key] = 1
                name = f"{name}_{i - 1}"
        return name

    @contextlib.contextmanager
    def name_scope(self, name: str | None) -> Iterator[str]:
        """Push a name scope; yields the scope prefix ending in ``/`` (TF1 semantics).

        ``None`` or ``""`` resets to the root scope; a name ending in ``/`` is used as an
        absolute scope as it is; any other name is made unique inside the current scope.
        """
        if name:
            if isinstance(name, bytes):
                name = name.decode()
            rx = _VALID_SCOPE_NAME if self._name_stack else _VALID_OP_NAME
            if not rx.match(name):
                raise ValueError(f"'{name}' is not a valid scope name")
        old = self._name_stack
        if not name:
            new = ""
        elif name.endswith("/"):
            new = name[:-1]
        else:
            new = self.unique_name(name)
        self._name_stack = new
        try:
            yield (new + "/") if new else ""
        finally:
            self._name_stack = old

    # -- device scopes ----------------------------------------------------------------
    @contextlib.contextmanager
    def device(self, device_name_or_function: Any) -> Iterator[None]:
        """Device scope: a (partial) device name merged with enclosing scopes, a function
        ``op -> name``, or None to ignore the enclosing scopes.

        As in TF, scopes apply innermost first: a name's fields fill only the fields the
        op's device does not set yet, a function's result replaces the op's device, and
        None stops the walk outwards.
        """
        d = device_name_or_function
        if isinstance(d, bytes):
            d = d.decode()
        if isinstance(d, str):
            d = _parse_device(d)  # malformed names fail here, as in TF
        elif d is not None and not isinstance(d, DeviceSpec) and not callable(d):
            raise TypeError(f"tf.device expects a device name, a DeviceSpec, a function or "
                            f"None, got {type(d).__name__}")
        self._device_stack.append(d)
        try:
            yield
        finally:
            self._device_stack.pop()

    def _apply_device_functions(self, op: Operation) -> None:
        for d in reversed(self._device_stack):
            if d is None:
                break
            if isinstance(d, DeviceSpec):
                if not op._device:
                    op._device = d.to_string()
                else:
                    op._device = d.make_merged_spec(_parse_device(op._device)).to_string()
                continue
            r = d(op)
            if isinstance(r, bytes):
                r = r.decode()
            op._set_device(r)

    # -- colocation -------------------------------------------------------------------
    @contextlib.contextmanager
    def colocate_with(self, op: Any, ignore_existing: bool = False) -> Iterator[None]:
        """Ops created inside are colocated with ``op`` (a Tensor, Operation or Variable).

        As in TF, the enclosing device scopes are suspended inside the block, and an op
        created inside takes the device of the op it is colocated with (when that has
        one). ``ignore_existing`` drops enclosing colocation requests; ``op=None`` with
        ``ignore_existing=True`` only does that.
        """
        if op is None and not ignore_existing:
            raise ValueError("Trying to reset colocation (op is None) but "
                             "ignore_existing is not True")
        if op is not None:
            op = _as_operation(op)
        old_stack = self._colocation_stack
        old_devices = self._device_stack
        self._device_stack = []
        if ignore_existing:
            self._colocation_stack = []
        if op is not None:
            self._colocation_stack = self._colocation_stack + [op]
        try:
            yield
        finally:
            self._colocation_stack = old_stack
            self._device_stack = old_devices

    @contextlib.contextmanager
    def _attr_scope(self, attr_map: dict[str, Any]) -> Iterator[None]:
        """Ops created inside get these attrs unless they already set them (None: unset)."""
        if not isinstance(attr_map, dict):
            raise TypeError("attr_scope must be a dictionary mapping strings to AttrValue "
                            "protocol buffers")
        saved = {k: self._attr_scope_map.get(k, _MISSING) for k in attr_map}
        for k, v in attr_map.items():
            if hasattr(v, "WhichOneof"):  # an AttrValue proto, as TF code passes
                # graph_def imports this module: a cycle, broken here
                from .graph_def import python_attr_of

                v = python_attr_of(v)
                if isinstance(v, list):
                    v = [x.decode() if isinstance(x, bytes) else x for x in v]
                elif isinstance(v, bytes):
                    v = v.decode()
            if v is None:
                self._attr_scope_map.pop(k, None)
            else:
                self._attr_scope_map[k] = v
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is _MISSING:
                    self._attr_scope_map.pop(k, None)
                else:
                    self._attr_scope_map[k] = v

    # -- control dependencies ---------------------------------------------------------
    def control_dependencies(self, control_inputs: Any) -> "_ControlDependencies":
        """Ops created inside run after ``control_inputs`` (None clears the stack).

        Dependencies already active in an enclosing block are not repeated; an op gets
        no dependency on an op that is already its data input, nor on the dependencies
        of a block that one of its inputs was itself created in (TF's dominance rule).
        """
        if control_inputs is None:
            return _ControlDependencies(self, None)
        current = set(self._current_control_inputs())
        ops: list[Operation] = []
        for c in control_inputs:
            if not isinstance(c, (Tensor, Operation)):
                if hasattr(c, "_as_graph_element"):
                    c = c._as_graph_element()
                elif isinstance(c, str):
                    c = self.as_graph_element(c)
                elif callable(c):
                    c = c()
                    if hasattr(c, "_as_graph_element") and not isinstance(c, (Tensor,
                                                                                Operation)):
                        c = c._as_graph_element()
            if isinstance(c, Tensor):
                c = c.op
            elif not isinstance(c, Operation):
                raise TypeError(f"Control input must be Operation or Tensor: {c!r}")
            if c.graph is not self:
                raise ValueError(f"Operation {c!r} is not an element of this graph.")
            if c not in current:
                current.add(c)
                ops.append(c)
        return _ControlDependencies(self, ops)

    def _current_control_inputs(self) -> list[Operation]:
        out: list[Operation] = []
        for frame in self._control_stack:
            for o in frame.control_inputs:
                if o not in out:
                    out.append(o)
        return out

    def _control_dependencies_for_inputs(self, input_ops: Sequence[Operation]
                                         ) -> list[Operation]:
        ret: list[Operation] = []
        for frame in self._control_stack:
            if any(o in frame.seen for o in input_ops):
                continue  # dominated: an input already runs after this frame's inputs
            for c in frame.control_inputs:
                if c not in input_ops and c not in ret:
                    ret.append(c)
        return ret

    # -- container --------------------------------------------------------------------
    @contextlib.contextmanager
    def container(self, container_name: str) -> Iterator[str]:
        """Stateful ops created inside keep their state in resource container ``name``."""
        old = self._container
        self._container = container_name
        try:
            yield container_name
        finally:
            self._container = old

    @contextlib.contextmanager
    def gradient_override_map(self, op_type_map: dict[str, str]) -> Iterator[None]:
        old = dict(self._gradient_override_map)
        self._gradient_override_map.update(op_type_map)
        try:
            yield
        finally:
            self._gradient_override_map = old

    # -- node creation ----------------------------------------------------------------
    def create_op(self, op_type: str, inputs: Sequence[Tensor], dtypes: Any = None,
                  input_types: Any = None, name: str | None = None,
                  attrs: dict[str, Any] | None = None, op_def: Any = None,
                  compute_shapes: bool = True, compute_device: bool = True) -> Operation:
        """Add a node. Most code should call :func:`apply_op`, which infers attrs."""
        self._check_not_finalized()
        if op_def is None:
            op_def = self._runtime.op_def(op_type)
        attrs = dict(attrs or {})
        override = self._gradient_override_map.get(op_type)
        if override is not None:  # gradient_override_map: recorded at creation, as TF
            attrs["_gradient_op_type"] = override
        if name is None:
            name = op_type
        if name.endswith("/"):
            name = name[:-1]
            if name in self._nodes_by_name:
                raise ValueError(f"Duplicate node name in graph: '{name}'")
        else:
            name = self.unique_name(name)
        if not _VALID_OP_NAME.match(name):
            raise ValueError(f"'{name}' is not a valid node name")
        for t in inputs:
            if t.graph is not self:
                raise ValueError(f"Tensor {t.name} must be from the same graph as "
                                 f"the op {name} being created.")
        with self._lock:
            if name in self._nodes_by_name:
                raise ValueError(f"Duplicate node name in graph: '{name}'")
            if dtypes is None:
                dtypes = _output_dtypes(op_def, attrs, name)
            control = self._control_dependencies_for_inputs(
                list(dict.fromkeys(t.op for t in inputs)))
            for k, v in self._attr_scope_map.items():
                attrs.setdefault(k, v)
            op = Operation(self, name, op_type, inputs, dtypes, attrs, op_def, control)
            try:
                if compute_device:
                    self._apply_device_functions(op)
                if self._colocation_stack:
                    groups: set[bytes] = set()
                    for o in reversed(self._colocation_stack):
                        groups.update(o.colocation_groups())
                        if o.device:
                            op._device = o.device
                    attrs["_class"] = sorted(g.decode() for g in groups)
                if op_def is not None and op_def.is_stateful and self._container and \
                        "container" in op_def.attrs and not attrs.get("container"):
                    attrs["container"] = self._container
                if self._control_flow_context is not None:
                    self._control_flow_context.add_op(op)
            except BaseException:
                self._unlink(op)  # e.g. a device function raised: the op never existed
                raise
            self._next_id += 1
            op._id = self._next_id
            self._nodes_by_name[name] = op
            self._nodes.append(op)
            self._names_in_use.setdefault(name.lower(), 1)
            for frame in self._control_stack:
                frame.seen.add(op)
            self._version += 1
        if compute_shapes and op_def is not None and op_def.shape_fn is not None:
            try:
                shapes = op_def.shape_fn(op)
            except BaseException:
                self._remove_failed_op(op)  # TF never adds a node whose shapes fail
                raise
            for t, s in zip(op._outputs, shapes):
                if s is not None:
                    t._shape = as_shape(s)
        return op

    def _remove_failed_op(self, op: Operation) -> None:
        with self._lock:
            if self._nodes_by_name.get(op.name) is not op:
                return
            del self._nodes_by_name[op.name]
            self._nodes.remove(op)
            self._unlink(op)
            for frame in self._control_stack:
                frame.seen.discard(op)
            self._version += 1

    @staticmethod
    def _unlink(op: Operation) -> None:
        """Drop the edges an unregistered op added to its inputs."""
        for t in op._inputs:
            if op in t._consumers:
                t._consumers.remove(op)
        for c in op._control_inputs:
            if op in c._control_outputs:
                c._control_outputs.remove(op)

    # -- lookup -----------------------------------------------------------------------
    def get_operations(self) -> list[Operation]:
        return list(self._nodes)

    def get_operation_by_name(self, name: str) -> Operation:
        if not isinstance(name, str):
            raise TypeError(f"Operation names are strings (or similar), not {type(name).__name__}.")
        return self.as_graph_element(name, allow_tensor=False, allow_operation=True)

    def _get_operation_by_name_unsafe(self, name: str) -> Operation | None:
        return self._nodes_by_name.get(name)

    def get_tensor_by_name(self, name: str) -> Tensor:
        if not isinstance(name, str):
            raise TypeError(f"Tensor names are strings (or similar), not {type(name).__name__}.")
        return self.as_graph_element(name, allow_tensor=True, allow_operation=False)

    def as_graph_element(self, obj: Any, allow_tensor: bool = True,
                         allow_operation: bool = True) -> Any:
        """Resolve a name, Tensor, Operation or convertible object to a graph element."""
        if hasattr(obj, "_as_graph_element") and not isinstance(obj, (Tensor, Operation)):
            obj = obj._as_graph_element()
        if isinstance(obj, Tensor) and allow_tensor:
            if obj.graph is not self:
                raise ValueError(f"Tensor {obj} is not an element of this graph.")
            return obj
        if isinstance(obj, Operation) and allow_operation:
            if obj.graph is not self:
                raise ValueError(f"Operation {obj} is not an element of this graph.")
            return obj
        if isinstance(obj, str) and ":" in obj and not allow_tensor:
            raise ValueError(f"Name '{obj}' appears to refer to a Tensor, not a "
                             f"{'Operation' if allow_operation else 'graph element'}.")
        if isinstance(obj, str) and ":" not in obj and not allow_operation:
            if obj in self._nodes_by_name:
                raise ValueError(f"The name '{obj}' refers to an Operation, not a Tensor. "
                                 "Tensor names must be of the form "
                                 "\"<op_name>:<output_index>\".")
            raise ValueError(f"The name '{obj}' looks like an (invalid) Operation name, not "
                             "a Tensor. Tensor names must be of the form "
                             "\"<op_name>:<output_index>\".")
        if isinstance(obj, str):
            if ":" in obj and allow_tensor:
                op_name, _, idx = obj.rpartition(":")
                try:
                    i = int(idx)
                except ValueError:
                    raise ValueError(f"The name {obj!r} looks a like a Tensor name, but is "
                                     "not a valid one.")
                op = self._nodes_by_name.get(op_name)
                if op is None:
                    raise KeyError(f"The name {obj!r} refers to a Tensor which does not "
                                   f"exist. The operation, {op_name!r}, does not exist in "
                                   "the graph.")
                if i >= len(op.outputs):
                    raise KeyError(f"The name {obj!r} refers to a Tensor which does not "
                                   f"exist. The operation, {op_name!r}, exists but only has "
                                   f"{len(op.outputs)} outputs.")
                return op.outputs[i]
            if ":" not in obj and allow_operation:
                op = self._nodes_by_name.get(obj)
                if op is None:
                    raise KeyError(f"The name {obj!r} refers to an Operation not in the graph.")
                return op
            if ":" not in obj and allow_tensor and not allow_operation:
                if obj in self._nodes_by_name:
                    raise ValueError(f"The name {obj!r} refers to an Operation, not a Tensor. "
                                     f"Tensor names must be of the form "
                                     f"\"<op_name>:<output_index>\".")
                raise KeyError(f"The name {obj!r} refers to a Tensor which does not exist.")
        types = [t for t, ok in (("Tensor", allow_tensor), ("Operation", allow_operation)) if ok]
        raise TypeError(f"Can not convert a {type(obj).__name__} into a "
                        f"{' or '.join(types)}.")

    # -- collections ------------------------------------------------------------------
    def add_to_collection(self, name: str, value: Any) -> None:
        self._check_not_finalized()
        self._collections.setdefault(name, []).append(value)

    def add_to_collections(self, names: Any, value: Any) -> None:
        names = (names,) if isinstance(names, str) else set(names)
        for n in names:
            self.add_to_collection(n, value)

    def get_collection_ref(self, name: str) -> list[Any]:
        return self._collections.setdefault(name, [])

    def get_collection(self, name: str, scope: str | None = None) -> list[Any]:
        items = self._collections.get(name, [])
        if scope is None:
            return list(items)
        rx = re.compile(scope)
        return [i for i in items if hasattr(i, "name") and rx.match(i.name)]

    @property
    def collections(self) -> list[str]:
        """The names of the collections known to this graph."""
        return list(self._collections)

    def get_all_collection_keys(self) -> list[str]:
        return [k for k, v in self._collections.items() if isinstance(v, list)]

    def clear_collection(self, name: str) -> None:
        self._collections.pop(name, None)

    # -- serialisation ----------------------------------------------------------------
    def as_graph_def(self, from_version: int | None = None, add_shapes: bool = False) -> Any:
        """The graph as a ``GraphDef`` protobuf message."""
        # graph_def imports this module: a cycle, broken here
        from .graph_def import graph_to_graph_def

        return graph_to_graph_def(self, add_shapes=add_shapes)

    def is_feedable(self, tensor: Tensor) -> bool:
        return tensor not in self._unfeedable

    def prevent_feeding(self, tensor: Tensor) -> None:
        self._unfeedable.add(tensor)

    def is_fetchable(self, obj: Any) -> bool:
        return True

    @property
    def _unfeedable(self) -> set[Tensor]:
        s = self.__dict__.get("_unfeedable_set")
        if s is None:
            s = self.__dict__["_unfeedable_set"] = set()
        return s


_MISSING = object()


class _ThreadScopes(threading.local):
    def __init__(self) -> None:
        self.name_stack = ""
        self.device_stack: list[Any] = []
        self.control_stack: list[Any] = []
        self.colocation_stack: list[Operation] = []


_DEVICE_CACHE: dict[str, DeviceSpec] = {}


def _parse_device(name: str) -> DeviceSpec:
    """A parsed (shared, never mutated) DeviceSpec for a device string."""
    d = _DEVICE_CACHE.get(name)
    if d is None:
        d = DeviceSpec.from_string(name)
        if len(_DEVICE_CACHE) < 4096:
            _DEVICE_CACHE[name] = d
    return d


class _ControlDependencies:
    """One ``control_dependencies`` block: its ops and the ops created inside it."""

    def __init__(self, graph: "Graph", control_inputs: list[Operation] | None):
        self.graph = graph
        self.new_stack = control_inputs is None
        self.control_inputs: list[Operation] = control_inputs or []
        self.seen: set[Operation] = set()
        self._saved: list[Any] | None = None
        self._saved_ctx: Any = None

    def __enter__(self) -> None:
        g = self.graph
        if self.new_stack:
            self._saved = g._control_stack
            g._control_stack = []
            self._saved_ctx = g._control_flow_context
            g._control_flow_context = None
        g._control_stack.append(self)

    def __exit__(self, *exc: Any) -> None:
        g = self.graph
        if g._control_stack and g._control_stack[-1] is self:
            g._control_stack.pop()
        if self.new_stack:
            g._control_stack = self._saved
            g._control_flow_context = self._saved_ctx


def _as_operation(x: Any) -> Operation:
    if hasattr(x, "_as_graph_element") and not isinstance(x, (Tensor, Operation)):
        x = x._as_graph_element()
    if isinstance(x, Tensor):
        return x.op
    if isinstance(x, Operation):
        return x
    if hasattr(x, "op") and isinstance(x.op, Operation):
        return x.op
    raise TypeError(f"Expected an Operation or Tensor, got {x!r}")


def _output_dtypes(op_def: Any, attrs: dict[str, Any], name: str) -> list[_dt.DType]:
    out: list[_dt.DType] = []
    for arg in op_def.outputs:
        if arg.type_list_attr is not None:
            ts = [_dt.as_dtype(t) for t in attrs[arg.type_list_attr]]
        else:
            t = arg.dtype if arg.dtype is not None else _dt.as_dtype(attrs[arg.type_attr])
            n = attrs[arg.number_attr] if arg.number_attr is not None else 1
            ts = [t] * n
        if arg.is_ref:
            ts = [t._as_ref for t in ts]
        out.extend(ts)
    return out


# ---------------------------------------------------------------------------------------
# default graph
# ---------------------------------------------------------------------------------------
class _Local(threading.local):
    def __init__(self) -> None:
        self.stack: list[Graph] = []


_local = _Local()
_global_default: list[Graph | None] = [None]


def _graph_stack() -> list[Graph]:
    return _local.stack


def get_default_graph() -> Graph:
    """The innermost ``as_default`` graph of this thread, else the global default graph."""
    st = _local.stack
    if st:
        return st[-1]
    g = _global_default[0]
    if g is None:
        g = _global_default[0] = Graph()
    return g


def reset_default_graph() -> None:
    """Clear the global default graph (not allowed inside a ``with g.as_default()``)."""
    if _local.stack:
        raise AssertionError("Do not use tf.reset_default_graph() to clear nested graphs. "
                             "If you need a cleared graph, exit the nesting and create a "
                             "new graph.")
    _global_default[0] = Graph()


def _graph_from_inputs(values: Any) -> "Graph | None":
    """The graph of the graph elements among ``values`` (TF's ``_get_graph_from_inputs``).

    :raises ValueError: when they come from different graphs.

    While a function is being traced into its own graph (a graph with
    ``_building_function`` set, as tf.data's map functions are), that graph: it turns
    the outer graph's tensors into captured inputs itself.
    """
    dg = get_default_graph()
    if getattr(dg, "_building_function", False):
        return dg
    graph = None
    first = None
    for v in values or ():
        el = v
        if not isinstance(v, (Tensor, Operation)):
            el = v._as_graph_element() if hasattr(v, "_as_graph_element") else None
            if el is not None and not isinstance(el, (Tensor, Operation)):
                el = None
        if el is None:
            continue
        if graph is None:
            graph, first = el.graph, el
        elif el.graph is not graph:
            raise ValueError(f"{el!r} must be from the same graph as {first!r}.")
    return graph


# module-level scope helpers acting on the default graph (tf.name_scope ...)
@contextlib.contextmanager
def name_scope(name: str | None, default_name: str | None = None,
               values: Any = None) -> Iterator[str]:
    """``tf.name_scope(name, default_name=None, values=None)`` (TF1 signature).

    ``name`` (or ``default_name`` when ``name`` is None) is entered in the graph of
    ``values`` (the default graph if they hold no graph element), which becomes the
    default graph inside the block. ``name=None`` with no default resets to the root.
    """
    n = default_name if name is None else name
    if n is None and values is not None:
        raise ValueError(f"At least one of name ({name}) and default_name "
                         f"({default_name}) must be provided.")
    g = _graph_from_inputs(values) or get_default_graph()
    with g.as_default(), g.name_scope(n) as scope:
        yield scope


def control_dependencies(control_inputs: Any) -> Any:
    return get_default_graph().control_dependencies(control_inputs)


@contextlib.contextmanager
def init_scope() -> Iterator[None]:
    """``tf.init_scope`` in graph mode: ops created inside keep the current name scope but
    are lifted out of control-flow contexts (``cond``, ``while_loop`` bodies) and have no
    control dependencies, as variable initialisers need."""
    g = get_default_graph()
    scope = g.get_name_scope()
    if scope and scope[-1] != "/":
        scope = scope + "/"
    with g.as_default(), g.name_scope(scope), g.control_dependencies(None):
        yield


def device(device_name_or_function: Any) -> Any:
    return get_default_graph().device(device_name_or_function)


def colocate_with(op: Any, ignore_existing: bool = False) -> Any:
    return get_default_graph().colocate_with(op, ignore_existing)


def container(container_name: str) -> Any:
    return get_default_graph().container(container_name)


def add_to_collection(name: str, value: Any) -> None:
    get_default_graph().add_to_collection(name, value)


def add_to_collections(names: Any, value: Any) -> None:
    get_default_graph().add_to_collections(names, value)


def get_collection(key: str, scope: str | None = None) -> list[Any]:
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key: str) -> list[Any]:
    return get_default_graph().get_collection_ref(key)


# ---------------------------------------------------------------------------------------
# seeds
# ---------------------------------------------------------------------------------------
def set_random_seed(seed: int | None) -> None:
    """``tf.set_random_seed``: the graph-level seed of the default graph."""
    get_default_graph().seed = seed


def get_seed(op_seed: int | None) -> tuple[int | None, int | None]:
    """TF's seed rule: (graph seed, op seed) for a random op created now."""
    g = get_default_graph()
    gs = g.seed
    if gs is not None:
        if op_seed is None:
            op_seed = g._last_id
        seeds: tuple[int | None, int | None] = (int(gs) % _MAXINT32, int(op_seed) % _MAXINT32)
    elif op_seed is not None:
        seeds = (DEFAULT_GRAPH_SEED, int(op_seed) % _MAXINT32)
    else:
        seeds = (None, None)
    if seeds == (0, 0):
        seeds = (0, _MAXINT32)
    return seeds


# ---------------------------------------------------------------------------------------
# conversion of Python values to tensors
# ---------------------------------------------------------------------------------------
_conversion_registry: list[tuple[Any, Callable[..., Any], int]] = []


def register_tensor_conversion_function(base_type: Any, conversion_func: Callable[..., Any],
                                        priority: int = 100) -> None:
    """``fn(value, dtype=None, name=None, as_ref=False) -> Tensor`` for ``base_type``."""
    _conversion_registry.append((base_type, conversion_func, priority))
    _conversion_registry.sort(key=lambda e: e[2])


def _dtype_of_array(arr: np.ndarray) -> _dt.DType:
    return _dt.string if arr.dtype == object else _dt.as_dtype(arr.dtype)


def make_ndarray_for(value: Any, dtype: Any = None) -> np.ndarray:
    """Public alias of :func:`numpy_value_for` with dtype conversion of the argument."""
    return numpy_value_for(value, None if dtype is None else _dt.as_dtype(dtype))


def convert_to_tensor(value: Any, dtype: Any = None, name: str | None = None,
                      preferred_dtype: Any = None, as_ref: bool = False,
                      dtype_hint: Any = None) -> Tensor:
    """``tf.convert_to_tensor``: Tensors pass through; Variables and registered types
    convert; Python and numpy values become ``Const`` nodes of the default graph.

    ``preferred_dtype`` (``dtype_hint``) is tried first when no ``dtype`` is given and
    silently dropped if the value cannot be converted to it.

    :raises ValueError: when a Tensor's dtype differs from the requested one, or for
        None / ragged values.
    :raises TypeError: when a value cannot be represented in the requested dtype.
    """
    want = None if dtype is None else _dt.as_dtype(dtype)
    if isinstance(value, Tensor):
        if want is not None and not want.is_compatible_with(value.dtype) and \
                want.base_dtype is not value.dtype.base_dtype:
            raise ValueError(f"Tensor conversion requested dtype {want.name} for Tensor "
                             f"with dtype {value.dtype.name}: {value!r}")
        return value
    hint = None
    if want is None:
        h = preferred_dtype if preferred_dtype is not None else dtype_hint
        hint = None if h is None else _dt.as_dtype(h)
    for base, fn, _ in _conversion_registry:
        if isinstance(value, base):
            if hint is not None:
                try:
                    t = fn(value, dtype=hint, name=name, as_ref=as_ref)
                except (TypeError, ValueError):
                    pass
                else:
                    if t.dtype.base_dtype is not hint.base_dtype:
                        raise TypeError(f"convert_to_tensor did not convert to the "
                                        f"preferred dtype: {t.dtype.base_dtype.name} vs "
                                        f"{hint.base_dtype.name}")
                    return t
            t = fn(value, dtype=want, name=name, as_ref=as_ref)
            if want is not None and t.dtype.base_dtype is not want.base_dtype:
                raise ValueError(f"Tensor conversion requested dtype {want.name} for Tensor "
                                 f"with dtype {t.dtype.name}: {t!r}")
            return t
    if isinstance(value, Operation):
        raise TypeError(f"Can't convert Operation '{value.name}' to Tensor (target dtype="
                        f"{want}, name={name}, as_ref={as_ref})")
    if isinstance(value, (list, tuple)) and _contains_tensor(value):
        return _autopack(value, want or hint, name)
    if hint is not None:
        try:
            arr = numpy_value_for(value, hint)
        except (TypeError, ValueError):
            pass
        else:
            return _const(arr, hint.base_dtype, name)
    arr = numpy_value_for(value, want)
    d = want if want is not None else _dtype_of_array(arr)
    return _const(arr, d.base_dtype, name)


def _contains_tensor(value: Any) -> bool:
    for v in value:
        if isinstance(v, Tensor) or (hasattr(v, "_as_graph_element") and
                                     not isinstance(v, Operation)):
            return True
        if isinstance(v, (list, tuple)) and _contains_tensor(v):
            return True
    return False


def _autopack(value: Any, dtype: _dt.DType | None, name: str | None) -> Tensor:
    """A (nested) list mixing tensors and Python values becomes a ``Pack`` of its
    elements, as TF's auto-packing conversion does (``[tf.shape(x)[0], -1]``)."""
    if dtype is None:
        for v in _flatten(value):
            if isinstance(v, Tensor) or hasattr(v, "_as_graph_element"):
                dtype = convert_to_tensor(v).dtype.base_dtype
                break
    g = get_default_graph()
    with g.name_scope(name or "packed") as scope:
        elems = [_autopack(v, dtype, None) if isinstance(v, (list, tuple)) and
                 _contains_tensor(v) else convert_to_tensor(v, dtype=dtype)
                 for v in value]
        return apply_op("Pack", name=scope, values=elems, axis=0)


def _flatten(value: Any) -> Iterator[Any]:
    for v in value:
        if isinstance(v, (list, tuple)):
            yield from _flatten(v)
        else:
            yield v


def _const(arr: np.ndarray, dtype: _dt.DType, name: str | None) -> Tensor:
    g = get_default_graph()
    op = g.create_op("Const", [], [dtype], name=name or "Const",
                     attrs={"value": arr, "dtype": dtype}, compute_shapes=False)
    op.outputs[0]._shape = TensorShape(arr.shape)
    return op.outputs[0]


def convert_n_to_tensor(values: Sequence[Any], dtype: Any = None,
                        name: str | None = None) -> list[Tensor]:
    return [convert_to_tensor(v, dtype=dtype, name=None if name is None else f"{name}_{i}")
            for i, v in enumerate(values)]


# ---------------------------------------------------------------------------------------
# apply_op: TF's op-def library
# ---------------------------------------------------------------------------------------
def _check_allowed(adef: Any, dtype: _dt.DType, op_type: str, param: str) -> None:
    if adef.allowed is not None and dtype.base_dtype not in adef.allowed:
        allowed = ", ".join(d.name for d in adef.allowed)
        raise TypeError(f"Value passed to parameter '{param}' has DataType {dtype.base_dtype.name}"
                        f" not in list of allowed values: {allowed}")


def _attr_value(adef: Any, value: Any, op_type: str) -> Any:
    """Check and convert the value given for attr ``adef`` of an ``op_type`` op.

    Lists are converted element by element as their inner kind.

    :returns: the value in the form stored on the node (a DType, int, str, TensorShape, ...)
    :raises TypeError: if ``value`` is not of the attr's kind
    :raises ValueError: if it is below the attr's minimum or not an allowed string
    """
    k = adef.kind
    if k == "type":
        return _dt.as_dtype(value)
    if k == "int":
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"Expected int for argument '{adef.name}' not {value!r}.")
        v = int(value)
        if adef.minimum is not None and v < adef.minimum:
            raise ValueError(f"Attr '{adef.name}' of '{op_type}' Op passed {v} less than "
                             f"minimum {adef.minimum}.")
        return v
    if k == "float":
        if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool):
            raise TypeError(f"Expected float for argument '{adef.name}' not {value!r}.")
        return float(value)
    if k == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"Expected bool for argument '{adef.name}' not {value!r}.")
        return bool(value)
    if k == "string":
        if isinstance(value, bytes):
            value = text_of_bytes(value)  # bytes that are not UTF-8 text stay bytes
        if not isinstance(value, (str, bytes)):
            raise TypeError(f"Expected string for argument '{adef.name}' not {value!r}.")
        if adef.allowed is not None and value not in adef.allowed:
            raise ValueError(f"Attr '{adef.name}' of '{op_type}' Op passed string '{value}' "
                             f"not in: {', '.join(repr(a) for a in adef.allowed)}.")
        return value
    if k == "shape":
        return as_shape(value)
    if k == "tensor":
        return np.asarray(value)
    if k.startswith("list("):
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"Expected list for attr {adef.name}, got {value!r}")
        inner = type("A", (), {"name": adef.name, "kind": k[5:-1], "allowed": None,
                               "minimum": None})
        vals = [_attr_value(inner, v, op_type) for v in value]
        if adef.minimum is not None and len(vals) < adef.minimum:
            raise ValueError(f"Attr '{adef.name}' of '{op_type}' Op passed list of length "
                             f"{len(vals)} less than minimum {adef.minimum}.")
        return vals
    return value


def _expand_input_args(op_def: Any, attrs: dict[str, Any]) -> list[Any]:
    """The ArgDef of each input position (list args repeated)."""
    return expand_args(op_def.inputs, attrs)


def apply_op(op_type: str, name: str | None = None, **kwargs: Any) -> Any:
    """Build a node of ``op_type`` from keyword arguments named after its inputs and attrs.

    Input values are converted to tensors; type attrs are inferred from them, Python
    values adopting the dtype already fixed by another input of the same attr. Returns
    the single output Tensor, a list of outputs for a list output, a tuple for several
    outputs, or the Operation when the op has no outputs.

    :raises TypeError: wrong input dtypes or attr types (TF's messages)
    :raises ValueError: bad attr values or incompatible static shapes
    """
    flat: list[Any] = []
    for v in kwargs.values():
        if isinstance(v, (list, tuple)):
            flat.extend(v)
        else:
            flat.append(v)
    g = _graph_from_inputs(flat) or get_default_graph()
    with g.as_default():
        return _apply_op(g, op_type, name, kwargs)


def _apply_op(g: Graph, op_type: str, name: str | None, kwargs: dict[str, Any]) -> Any:
    """Add an ``op_type`` op to ``g`` from keyword arguments (TF's ``op_def_library.apply_op``).

    Converts each input named by the op def to a tensor, inferring type and list-length
    attrs from the inputs, fills the remaining attrs from ``kwargs`` or their defaults,
    and creates the node under a name scope of ``name`` (default: ``op_type``),
    colocated with any reference inputs. Consumes ``kwargs``.

    :returns: the Operation if the op has no outputs, the output (or list of outputs) if
        it has one, else a tuple of them with list outputs grouped
    :raises TypeError: for a missing or unexpected argument, or an input whose dtype does
        not match the op def or the other inputs
    :raises ValueError: for a value that cannot be made a tensor, or a list whose length
        does not match its number attr or is below its minimum
    """
    op_def = g._runtime.op_def(op_type)
    attrs: dict[str, Any] = {}
    inferred: dict[str, _dt.DType] = {}
    inputs: list[Tensor] = []
    scope_name = name if name is not None else op_type
    with g.name_scope(scope_name) as scope:
        for arg in op_def.inputs:
            if arg.name not in kwargs:
                raise TypeError(f"No argument for input {arg.name} found in {op_def}")
            value = kwargs.pop(arg.name)
            if arg.is_list:
                if not isinstance(value, (list, tuple)):
                    raise TypeError(f"Expected list for '{arg.name}' argument to "
                                    f"'{op_type}' Op, not {value!r}.")
                if arg.type_list_attr is not None:
                    ts = [convert_to_tensor(v, as_ref=arg.is_ref, name=f"{arg.name}_{i}")
                          for i, v in enumerate(value)]
                    attrs[arg.type_list_attr] = [t.dtype.base_dtype for t in ts]
                else:
                    want = arg.dtype or inferred.get(arg.type_attr) or \
                        (_dt.as_dtype(kwargs[arg.type_attr]) if arg.type_attr in kwargs else None)
                    if want is None:
                        # infer from the first Tensor in the list, else from the values
                        for v in value:
                            if isinstance(v, Tensor) or hasattr(v, "_as_graph_element"):
                                want = convert_to_tensor(v).dtype.base_dtype
                                break
                    try:
                        ts = [convert_to_tensor(v, dtype=want, as_ref=arg.is_ref,
                                                name=f"{arg.name}_{i}")
                              for i, v in enumerate(value)]
                    except ValueError as e:
                        raise TypeError(f"Tensors in list passed to '{arg.name}' of "
                                        f"'{op_type}' Op have types that don't all match: {e}"
                                        ) from None
                    if ts:
                        base = ts[0].dtype.base_dtype
                        for t in ts[1:]:
                            if t.dtype.base_dtype is not base:
                                raise TypeError(
                                    f"Tensors in list passed to '{arg.name}' of '{op_type}' Op "
                                    f"have types [{', '.join(t.dtype.name for t in ts)}] that "
                                    "don't all match.")
                        if arg.type_attr is not None:
                            _check_allowed(op_def.attrs[arg.type_attr], base, op_type, arg.name)
                            inferred[arg.type_attr] = base
                    if arg.number_attr is not None:
                        if arg.number_attr in attrs and attrs[arg.number_attr] != len(ts):
                            raise ValueError(f"List argument '{arg.name}' to '{op_type}' Op "
                                             f"with length {len(ts)} must match length "
                                             f"{attrs[arg.number_attr]} of argument.")
                        attrs[arg.number_attr] = len(ts)
                        nd = op_def.attrs[arg.number_attr]
                        if nd.minimum is not None and len(ts) < nd.minimum:
                            raise ValueError(f"List argument '{arg.name}' to '{op_type}' Op "
                                             f"with length {len(ts)} shorter than minimum "
                                             f"length {nd.minimum}.")
                inputs.extend(ts)
                continue
            want = arg.dtype
            preferred = None
            if want is None:
                want = inferred.get(arg.type_attr)
                if want is None and arg.type_attr in kwargs:
                    want = _dt.as_dtype(kwargs[arg.type_attr])
                if want is None:
                    tdef = op_def.attrs.get(arg.type_attr)
                    if tdef is not None and tdef.has_default:
                        preferred = tdef.default
            try:
                t = convert_to_tensor(value, dtype=want, as_ref=arg.is_ref, name=arg.name,
                                      preferred_dtype=preferred)
            except ValueError as e:
                if isinstance(value, Tensor) or hasattr(value, "_as_graph_element"):
                    got = convert_to_tensor(value, as_ref=arg.is_ref).dtype
                    prior = [a.name for a in op_def.inputs if a.type_attr == arg.type_attr
                             and a.name != arg.name]
                    if prior and arg.dtype is None and arg.type_attr in inferred:
                        raise TypeError(f"Input '{arg.name}' of '{op_type}' Op has type "
                                        f"{got.base_dtype.name} that does not match type "
                                        f"{want.name} of argument '{prior[0]}'.") from None
                    raise TypeError(f"Input '{arg.name}' of '{op_type}' Op has type "
                                    f"{got.base_dtype.name} that does not match expected "
                                    f"type of {want.name}.") from None
                raise ValueError(f"Tried to convert '{arg.name}' to a tensor and failed. "
                                 f"Error: {e}") from None
            except TypeError as e:
                if want is not None and arg.type_attr in inferred:
                    prior = [a.name for a in op_def.inputs if a.type_attr == arg.type_attr
                             and a.name != arg.name]
                    raise TypeError(f"Expected {want.name} passed to parameter '{arg.name}' "
                                    f"of op '{op_type}', got {value!r} of type "
                                    f"'{type(value).__name__}' instead. Error: {e}") from None
                raise
            if arg.is_ref and not t.dtype.is_ref_dtype:
                raise TypeError(f"'{op_type}' Op requires that input '{arg.name}' be a "
                                "mutable tensor (e.g.: a tf.Variable)")
            if arg.type_attr is not None:
                _check_allowed(op_def.attrs[arg.type_attr], t.dtype, op_type, arg.name)
                inferred.setdefault(arg.type_attr, t.dtype.base_dtype)
            elif arg.dtype is not None and t.dtype.base_dtype is not arg.dtype:
                raise TypeError(f"Input '{arg.name}' of '{op_type}' Op has type "
                                f"{t.dtype.base_dtype.name} that does not match expected type "
                                f"of {arg.dtype.name}.")
            inputs.append(t)
        # attrs
        for aname, adef in op_def.attrs.items():
            if aname in attrs:
                if aname in kwargs:
                    kwargs.pop(aname)
                continue
            if aname in inferred:
                if aname in kwargs:
                    given = _dt.as_dtype(kwargs.pop(aname))
                    if given is not inferred[aname]:
                        raise TypeError(f"Input of '{op_type}' Op has type "
                                        f"{inferred[aname].name} that does not match "
                                        f"attr {aname}={given.name}.")
                attrs[aname] = inferred[aname]
                continue
            if aname in kwargs:
                v = kwargs.pop(aname)
                if v is None and adef.has_default:
                    attrs[aname] = adef.default
                    continue
                attrs[aname] = _attr_value(adef, v, op_type)
                if adef.kind == "type":
                    _check_allowed(adef, attrs[aname], op_type, aname)
            elif adef.has_default:
                attrs[aname] = adef.default
            else:
                raise TypeError(f"No argument for attr {aname} found in op {op_type}")
        if kwargs:
            raise TypeError(f"{op_type} got unexpected keyword arguments: "
                            f"{', '.join(sorted(kwargs))}")
        node_name = scope[:-1] + "/" if scope else op_type
        # ops taking a reference live with the referenced variable (TF colocates them)
        refs = [t for a, t in zip(_expand_input_args(op_def, attrs), inputs) if a.is_ref]
        with contextlib.ExitStack() as stack:
            for r in refs:
                stack.enter_context(g.colocate_with(r))
            op = g.create_op(op_type, inputs, name=node_name, attrs=attrs, op_def=op_def)
    outs = op.outputs
    if not op_def.outputs:
        return op
    if len(op_def.outputs) == 1:
        arg = op_def.outputs[0]
        return list(outs) if arg.is_list else outs[0]
    # several outputs: group list outputs
    res: list[Any] = []
    i = 0
    for arg in op_def.outputs:
        if arg.is_list:
            n = len(attrs[arg.type_list_attr]) if arg.type_list_attr else attrs[arg.number_attr]
            res.append(list(outs[i:i + n]))
            i += n
        else:
            res.append(outs[i])
            i += 1
    return tuple(res)


def _import_client_graph(runtime: Any, graph_def: Any) -> Graph:
    """A new graph of ``runtime`` holding ``graph_def``: what a master compiles for a
    client that sent it (installed with :func:`~flowrt.plugin.runtime.set_graph_importer`
    when this module is imported, which ``import flowrt`` does)."""
    # graph_def imports this module: a cycle, broken here
    from .graph_def import import_graph_def

    g = Graph(runtime)
    with g.as_default():
        import_graph_def(graph_def, name="")
    return g


set_graph_importer(_import_client_graph)
require_api(REQUIRED_API_NAMES)
