"""TF1 reference variables (``tf.Variable``) and the initializer helpers.

A variable is a ``VariableV2`` node whose output is a reference to a persistent tensor
in its device's resource manager, an ``Assign`` node (its initializer) and an
``Identity`` snapshot named ``<name>/read`` that ordinary uses read.
"""
from __future__ import annotations

import contextlib
import enum
import functools
from typing import Any, Callable, Iterator, Sequence

from ..base import dtypes as _dt
from ..framework.graph import (GraphKeys, Operation, Tensor, api_function, apply_op, control_dependencies,
                               convert_to_tensor, get_default_graph, name_scope,
                               register_tensor_conversion_function)
from ..base.tensor_shape import TensorShape, as_shape, unknown_shape
from ..framework.indexed_slices import IndexedSlices

__all__ = ["Variable", "global_variables", "trainable_variables", "local_variables",
           "model_variables", "all_variables", "global_variables_initializer",
           "local_variables_initializer", "variables_initializer",
           "initialize_all_variables", "initialize_local_variables",
           "initialize_variables", "is_variable_initialized",
           "report_uninitialized_variables", "assert_variables_initialized",
           "VariableAggregation", "VariableSynchronization", "SaveSliceInfo",
           "variable_creator_scope"]


class VariableSynchronization(enum.Enum):
    """When a distributed variable is aggregated (``tf.VariableSynchronization``);
    accepted by ``tf.Variable`` / ``tf.get_variable`` and recorded, as TF 1.15 does
    outside distribution strategies."""

    AUTO = 0
    NONE = 1
    ON_WRITE = 2
    ON_READ = 3


class VariableAggregation(enum.Enum):
    """How a distributed variable's updates are combined (``tf.VariableAggregation``,
    TF 1.15's V1 enum with ``ONLY_FIRST_TOWER``)."""

    NONE = 0
    SUM = 1
    MEAN = 2
    ONLY_FIRST_REPLICA = 3
    ONLY_FIRST_TOWER = 3  # alias of ONLY_FIRST_REPLICA, as in TF 1.15

    def __hash__(self) -> int:
        return hash(self.value)


def _check_sync_agg(synchronization: Any, aggregation: Any, trainable: bool | None
                    ) -> tuple[Any, Any, bool | None]:
    """Validate ``synchronization``/``aggregation`` as TF's ``validate_synchronization_
    aggregation_trainable`` does; ON_READ variables are not trainable by default.

    :raises ValueError: for values of the wrong enum, or ON_READ with trainable=True
    """
    if aggregation is None:
        aggregation = VariableAggregation.NONE
    elif not isinstance(aggregation, VariableAggregation):
        try:
            aggregation = VariableAggregation(aggregation)
        except ValueError:
            raise ValueError(f"Invalid variable aggregation mode: {aggregation} for "
                             "variable") from None
    if synchronization is None:
        synchronization = VariableSynchronization.AUTO
    else:
        try:
            synchronization = VariableSynchronization(synchronization)
        except ValueError:
            raise ValueError(f"Invalid variable synchronization mode: {synchronization} "
                             "for variable") from None
    if trainable is None:
        trainable = synchronization != VariableSynchronization.ON_READ
    elif trainable and synchronization == VariableSynchronization.ON_READ:
        raise ValueError("Synchronization value can be set to "
                         "VariableSynchronization.ON_READ only for non-trainable variables. "
                         "You have specified trainable=True and "
                         "synchronization=VariableSynchronization.ON_READ.")
    return synchronization, aggregation, trainable


class SaveSliceInfo:
    """Where a variable sits in a larger one it is a slice of (TF's
    ``Variable.SaveSliceInfo``): a Saver saves it under ``full_name`` with :attr:`spec`.

    :param full_name: the name of the full variable
    :param full_shape: the full variable's shape (list of int)
    :param var_offset: this slice's offset in it (list of int)
    :param var_shape: this slice's shape (list of int)
    :param save_slice_info_def: a ``SaveSliceInfoDef``-like message to read the fields
        from instead (flowrt's meta graph protos do not carry one)
    """

    def __init__(self, full_name: str | None = None, full_shape: Any = None,
                 var_offset: Any = None, var_shape: Any = None,
                 save_slice_info_def: Any = None, import_scope: str | None = None):
        if save_slice_info_def is not None:
            name = save_slice_info_def.full_name
            self.full_name = f"{import_scope}/{name}" if import_scope else name
            self.full_shape = list(save_slice_info_def.full_shape)
            self.var_offset = list(save_slice_info_def.var_offset)
            self.var_shape = list(save_slice_info_def.var_shape)
        else:
            self.full_name = full_name
            self.full_shape = full_shape
            self.var_offset = var_offset
            self.var_shape = var_shape

    @property
    def spec(self) -> str:
        """The slice spec a Saver writes: ``"<full shape> <offset>,<len>:..."``."""
        full = " ".join(f"{d:d}" for d in self.full_shape) + " "
        return full + ":".join(f"{o:d},{n:d}" for o, n in zip(self.var_offset,
                                                            self.var_shape))

    def __repr__(self) -> str:
        return f"SaveSliceInfo({self.full_name!r}, {self.spec!r})"


class _VariableMeta(type):
    """Routes ``tf.Variable(...)`` through the graph's variable creators
    (:func:`variable_creator_scope`), innermost scope first, as TF's metaclass does."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        stack = get_default_graph().__dict__.get("_variable_creator_stack")
        if cls is not Variable or not stack:
            return super().__call__(*args, **kwargs)
        names = ("initial_value", "trainable", "collections", "validate_shape",
                 "caching_device", "name", "variable_def", "dtype", "expected_shape",
                 "import_scope", "constraint", "use_resource", "synchronization",
                 "aggregation", "shape")
        kwargs.update(zip(names, args))

        def base(**kw: Any) -> Any:
            return type.__call__(cls, **kw)

        getter = base
        for creator in stack:
            getter = functools.partial(creator, getter)
        return getter(**kwargs)


@contextlib.contextmanager
def variable_creator_scope(variable_creator: Callable[..., Any]) -> Iterator[None]:
    """Within the block, ``tf.Variable(**kwargs)`` calls
    ``variable_creator(next_creator, **kwargs)`` (``tf.variable_creator_scope``); the
    innermost creator is called first and ``next_creator`` leads to the default one."""
    g = get_default_graph()
    stack = g.__dict__.setdefault("_variable_creator_stack", [])
    stack.append(variable_creator)
    try:
        yield
    finally:
        stack.remove(variable_creator)


class Variable(metaclass=_VariableMeta):
    """A TF1 ``tf.Variable``: persistent state shared by every step and session on the
    same target.

    :param initial_value: a Tensor or Python/numpy value, or a callable returning one
    :param trainable: also add to ``TRAINABLE_VARIABLES``
    :param collections: defaults to ``[GraphKeys.GLOBAL_VARIABLES]``
    :param validate_shape: the variable's shape must match the initial value's
    :param caching_device: device where reads are cached (``<name>/read`` lives there)
    :param name: the VariableV2 node's name (made unique)
    :param dtype: convert the initial value to this dtype
    :param expected_shape, import_scope, constraint, use_resource, synchronization,
        aggregation, shape: accepted for compatibility; ``shape`` overrides the
        static shape
    """

    def __init__(self, initial_value: Any = None, trainable: bool | None = None,
                 collections: Sequence[str] | None = None, validate_shape: bool = True,
                 caching_device: Any = None, name: str | None = None,
                 variable_def: Any = None, dtype: Any = None, expected_shape: Any = None,
                 import_scope: str | None = None, constraint: Callable | None = None,
                 use_resource: bool | None = None, synchronization: Any = None,
                 aggregation: Any = None, shape: Any = None):
        """Build the variable's ops, or rebuild it from ``variable_def`` (a ``VariableDef``).

        Adds, outside any control dependencies, the ``VariableV2`` node, its initial value
        (a callable's ops under ``Initializer``, colocated with the variable), the ``Assign``
        initializer and the ``read`` snapshot, then adds the variable to ``collections``.

        :raises ValueError: if both or neither of ``variable_def`` and ``initial_value`` are
            given, or ``collections`` is not a list, tuple or set
        """
        if variable_def is not None:
            if initial_value is not None:
                raise ValueError("variable_def and initial_value are mutually exclusive.")
            self._init_from_proto(variable_def, import_scope)
            return
        if initial_value is None:
            raise ValueError("initial_value must be specified.")
        synchronization, aggregation, trainable = _check_sync_agg(
            synchronization, aggregation, trainable)
        self._synchronization = synchronization
        self._aggregation = aggregation
        if collections is None:
            collections = [GraphKeys.GLOBAL_VARIABLES]
        if not isinstance(collections, (list, tuple, set)):
            raise ValueError(f"collections argument to Variable constructor must be a list, "
                             f"tuple, or set. Got {collections} of type {type(collections)}")
        collections = list(collections)
        if trainable and GraphKeys.TRAINABLE_VARIABLES not in collections:
            collections.append(GraphKeys.TRAINABLE_VARIABLES)
        self._trainable = trainable
        self._constraint = constraint
        self._caching_device = caching_device
        init_from_fn = callable(initial_value)
        g = get_default_graph()
        with g.control_dependencies(None):
            with name_scope(name, "Variable", [] if init_from_fn else [initial_value]) as nm:
                g = self._graph = get_default_graph()
                true_name = nm[:-1] if nm else "Variable"
                if init_from_fn:
                    # As TF: the initializer ops are built outside any device scope and
                    # colocated with the variable, which does not exist yet.
                    with g._attr_scope({"_class": [f"loc:@{true_name}"]}):
                        with g.name_scope("Initializer"), g.device(None):
                            iv = initial_value()
                            if isinstance(iv, Variable):
                                iv = iv.initialized_value()
                            self._initial_value = convert_to_tensor(
                                iv, name="initial_value", dtype=dtype)
                        vshape = self._var_shape(shape, validate_shape)
                        self._variable = apply_op(
                            "VariableV2", name=true_name + "/", shape=vshape,
                            dtype=self._initial_value.dtype.base_dtype)
                else:
                    iv = initial_value
                    if isinstance(iv, Variable):
                        iv = iv.initialized_value()
                    self._initial_value = convert_to_tensor(iv, name="initial_value",
                                                            dtype=dtype)
                    vshape = self._var_shape(shape, validate_shape)
                    self._variable = apply_op("VariableV2", name=true_name + "/",
                                              shape=vshape,
                                              dtype=self._initial_value.dtype.base_dtype)
                self._variable.set_shape(vshape)
                # Assign takes the variable's reference, so apply_op colocates it.
                self._initializer_op = apply_op(
                    "Assign", name="Assign", ref=self._variable, value=self._initial_value,
                    validate_shape=validate_shape).op
                if caching_device is not None:
                    with g.device(caching_device):
                        self._snapshot = apply_op("Identity", name="read",
                                                  input=self._variable)
                else:
                    with g.colocate_with(self._variable.op):
                        self._snapshot = apply_op("Identity", name="read",
                                                  input=self._variable)
        g.add_to_collections(collections, self)
        self._save_slice_info = None

    def _var_shape(self, shape: Any, validate_shape: bool) -> TensorShape:
        ishape = self._initial_value.shape
        if shape is not None:
            return as_shape(shape)
        if validate_shape:
            if not ishape.is_fully_defined():
                raise ValueError(f"initial_value must have a shape specified: "
                                 f"{self._initial_value}")
            return ishape
        return unknown_shape()

    def _init_from_proto(self, variable_def: Any, import_scope: str | None) -> None:
        """Rebuild the Python object for an imported variable's nodes."""
        g = get_default_graph()

        def el(name: str) -> Any:
            full = f"{import_scope}/{name}" if import_scope else name
            return g.as_graph_element(full)

        self._graph = g
        self._variable = el(variable_def.variable_name)
        self._initializer_op = el(variable_def.initializer_name)
        self._snapshot = el(variable_def.snapshot_name)
        self._initial_value = (el(variable_def.initial_value_name)
                               if variable_def.initial_value_name else None)
        self._trainable = bool(variable_def.trainable)
        self._constraint = None
        self._caching_device = None
        self._save_slice_info = None
        self._synchronization = VariableSynchronization.AUTO
        self._aggregation = VariableAggregation.NONE

    def to_proto(self, export_scope: str | None = None) -> Any:
        """This variable as a ``VariableDef`` (names relative to ``export_scope``)."""
        # meta_graph_pb2 is loaded only when a MetaGraph is written
        from ..proto.meta_graph_pb2 import VariableDef

        def strip(name: str) -> str:
            if export_scope and name.startswith(export_scope + "/"):
                return name[len(export_scope) + 1:]
            return name

        vd = VariableDef(variable_name=strip(self._variable.name),
                         initializer_name=strip(self._initializer_op.name),
                         snapshot_name=strip(self._snapshot.name),
                         trainable=self._trainable)
        if self._initial_value is not None:
            vd.initial_value_name = strip(self._initial_value.name)
        return vd

    @staticmethod
    def from_proto(variable_def: Any, import_scope: str | None = None) -> "Variable":
        """The variable a ``VariableDef`` describes, in the default graph."""
        return Variable(variable_def=variable_def, import_scope=import_scope)

    # -- identity ---------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._variable.name

    @property
    def op(self) -> Operation:
        return self._variable.op

    @property
    def graph(self) -> Any:
        return self._variable.graph

    @property
    def device(self) -> str:
        return self._variable.device

    @property
    def dtype(self) -> _dt.DType:
        return self._variable.dtype

    @property
    def shape(self) -> TensorShape:
        return self._variable.shape

    def get_shape(self) -> TensorShape:
        return self._variable.shape

    @property
    def trainable(self) -> bool:
        return self._trainable

    @property
    def constraint(self) -> Any:
        return self._constraint

    @property
    def synchronization(self) -> VariableSynchronization:
        return self._synchronization

    @property
    def aggregation(self) -> VariableAggregation:
        return self._aggregation

    @property
    def initializer(self) -> Operation:
        return self._initializer_op

    # -- slices of a partitioned variable ---------------------------------------------
    SaveSliceInfo = SaveSliceInfo

    def _set_save_slice_info(self, save_slice_info: SaveSliceInfo) -> None:
        self._save_slice_info = save_slice_info

    def _get_save_slice_info(self) -> SaveSliceInfo | None:
        return self._save_slice_info

    @property
    def initial_value(self) -> Tensor:
        return self._initial_value

    # -- reading ----------------------------------------------------------------------
    def value(self) -> Tensor:
        """The snapshot (``<name>/read``) that ordinary uses read."""
        return self._snapshot

    def read_value(self) -> Tensor:
        """A fresh read of the variable (an Identity node)."""
        return apply_op("Identity", name="read", input=self._variable)

    def _ref(self) -> Tensor:
        return self._variable

    def _as_graph_element(self) -> Tensor:
        return self._variable

    def initialized_value(self) -> Tensor:
        """The variable's value, initialising it first if it is not yet (TF1): for
        initialising other variables from this one."""
        with control_dependencies(None):
            return api_function("cond")(is_variable_initialized(self), self.read_value,
                                lambda: self._initial_value)

    def eval(self, session: Any = None) -> Any:
        return self._snapshot.eval(session=session)

    def load(self, value: Any, session: Any = None) -> None:
        """Assign ``value`` by feeding the initializer's input."""
        # session imports this module (through training): a cycle, broken here
        from ..framework.session import _default_session_for

        s = _default_session_for(self.graph, session)
        s.run(self._initializer_op, {self._initializer_op.inputs[1]: value})

    # -- updates ----------------------------------------------------------------------
    def assign(self, value: Any, use_locking: bool = False, name: str | None = None,
               read_value: bool = True) -> Any:
        t = apply_op("Assign", name=name, ref=self._variable, value=value,
                     use_locking=use_locking)
        return t if read_value else t.op

    def assign_add(self, delta: Any, use_locking: bool = False, name: str | None = None,
                   read_value: bool = True) -> Any:
        t = apply_op("AssignAdd", name=name, ref=self._variable, value=delta,
                     use_locking=use_locking)
        return t if read_value else t.op

    def assign_sub(self, delta: Any, use_locking: bool = False, name: str | None = None,
                   read_value: bool = True) -> Any:
        t = apply_op("AssignSub", name=name, ref=self._variable, value=delta,
                     use_locking=use_locking)
        return t if read_value else t.op

    def _scatter(self, api: str, sparse_delta: Any, use_locking: bool,
                 name: str | None) -> Tensor:

        if not isinstance(sparse_delta, IndexedSlices):
            raise TypeError(f"sparse_delta is not IndexedSlices: {sparse_delta}")
        return api_function(api)(self._variable, sparse_delta.indices, sparse_delta.values,
                                 use_locking=use_locking, name=name)

    def scatter_add(self, sparse_delta: Any, use_locking: bool = False,
                    name: str | None = None) -> Tensor:
        """Add the rows of the IndexedSlices ``sparse_delta`` to this variable."""
        return self._scatter("scatter_add", sparse_delta, use_locking, name)

    def scatter_sub(self, sparse_delta: Any, use_locking: bool = False,
                    name: str | None = None) -> Tensor:
        """Subtract the rows of the IndexedSlices ``sparse_delta`` from this variable."""
        return self._scatter("scatter_sub", sparse_delta, use_locking, name)

    def scatter_update(self, sparse_delta: Any, use_locking: bool = False,
                       name: str | None = None) -> Tensor:
        """Set the rows of this variable named by the IndexedSlices ``sparse_delta``."""
        return self._scatter("scatter_update", sparse_delta, use_locking, name)

    def set_shape(self, shape: Any) -> None:
        self._variable.set_shape(shape)
        self._snapshot.set_shape(shape)

    def __repr__(self) -> str:
        return (f"<tf.Variable '{self.name}' shape={self.shape} "
                f"dtype={self.dtype.name}>")

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: Any) -> bool:
        return self is other

    def __bool__(self) -> bool:
        raise TypeError("Using a `tf.Variable` as a Python `bool` is not allowed.")

    def __iter__(self) -> Any:
        raise TypeError("'Variable' object is not iterable.")

    def __getitem__(self, key: Any) -> Tensor:
        return self._snapshot[key]

    __array_priority__ = 100


def _variable_to_tensor(v: Variable, dtype: Any = None, name: str | None = None,
                        as_ref: bool = False) -> Tensor:
    if dtype is not None and not _dt.as_dtype(dtype).is_compatible_with(v.dtype):
        raise ValueError(f"Incompatible type conversion requested to type "
                         f"'{_dt.as_dtype(dtype).name}' for variable of type "
                         f"'{v.dtype.name}'")
    return v._ref() if as_ref else v.value()


register_tensor_conversion_function(Variable, _variable_to_tensor)


def _delegate(opname: str) -> Callable[..., Any]:
    def f(self: Variable, *args: Any) -> Any:
        return getattr(self.value(), opname)(*args)

    f.__name__ = opname
    return f


for _o in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
           "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
           "__rmod__", "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__neg__",
           "__abs__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__rand__",
           "__or__", "__ror__", "__xor__", "__rxor__", "__invert__"):
    setattr(Variable, _o, _delegate(_o))


# -- collections and initializers -----------------------------------------------------
def global_variables(scope: str | None = None) -> list[Variable]:
    return get_default_graph().get_collection(GraphKeys.GLOBAL_VARIABLES, scope)


all_variables = global_variables


def trainable_variables(scope: str | None = None) -> list[Variable]:
    return get_default_graph().get_collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def local_variables(scope: str | None = None) -> list[Variable]:
    return get_default_graph().get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def model_variables(scope: str | None = None) -> list[Variable]:
    return get_default_graph().get_collection(GraphKeys.MODEL_VARIABLES, scope)


def variables_initializer(var_list: Sequence[Variable], name: str = "init") -> Operation:
    """An op that runs the initializers of ``var_list`` (a NoOp when empty)."""
    if var_list:
        with control_dependencies([v.initializer for v in var_list]):
            return apply_op("NoOp", name=name)
    return apply_op("NoOp", name=name)


initialize_variables = variables_initializer


def global_variables_initializer() -> Operation:
    """``tf.global_variables_initializer()``: initialise every global variable."""
    return variables_initializer(global_variables())


initialize_all_variables = global_variables_initializer


def local_variables_initializer() -> Operation:
    return variables_initializer(local_variables())


initialize_local_variables = local_variables_initializer


def is_variable_initialized(variable: Variable) -> Tensor:
    return apply_op("IsVariableInitialized", ref=variable._ref())


def report_uninitialized_variables(var_list: Sequence[Variable] | None = None,
                                   name: str = "report_uninitialized_variables") -> Tensor:
    """A 1-D string tensor of the names of uninitialised variables."""
    if var_list is None:
        var_list = global_variables() + local_variables()
    stack, logical_not, boolean_mask, constant = (
        api_function("stack"), api_function("logical_not"), api_function("boolean_mask"), api_function("constant"))
    with name_scope(name):
        if not var_list:
            return constant([], dtype=_dt.string)
        inited = stack([is_variable_initialized(v) for v in var_list])
        names = constant([v.op.name for v in var_list])
        return boolean_mask(names, logical_not(inited))


def assert_variables_initialized(var_list: Sequence[Variable] | None = None) -> Any:
    if var_list is None:
        var_list = global_variables() + local_variables()
    if not var_list:
        return None
    reduce_all, stack = api_function("reduce_all"), api_function("stack")
    return reduce_all(stack([is_variable_initialized(v) for v in var_list]))
