"""TF1 variable scopes and ``tf.get_variable``: named, shareable variables.

A graph keeps one variable store (collection ``("__variable_store",)``) mapping full
variable names to the variables :func:`get_variable` created, and one per-thread scope
store (collection ``("__varscope",)``) holding the current :class:`VariableScope` and
how often each scope name was opened. ``variable_scope`` sets the prefix of variable
names, the reuse mode and defaults (initializer, regularizer, dtype ...) for
``get_variable``, and opens a name scope for the ops created inside, as TF 1.15 does.
"""
from __future__ import annotations

import collections.abc as _abc
import contextlib
import copy
import enum
import functools
import inspect
import os
import threading
import traceback
from typing import Any, Callable, Sequence

from ..base import dtypes as _dt
from ..framework.graph import (GraphKeys, _graph_from_inputs, api_function, colocate_with,
                               convert_to_tensor, get_default_graph, name_scope)
from ..base.tensor_shape import as_shape
from .partitioned import get_partitioned_variable
from .variables import Variable

__all__ = ["AUTO_REUSE", "VariableScope", "variable_scope", "get_variable_scope",
           "get_variable", "get_local_variable", "no_regularizer"]

_VARSTORE_KEY = ("__variable_store",)
_VARSCOPESTORE_KEY = ("__varscope",)
# flowrt's own frames are left out of the traceback a variable records
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _ReuseMode(enum.Enum):
    """Reuse modes besides True/False/None."""

    AUTO_REUSE = 1


#: ``reuse=tf.AUTO_REUSE``: get_variable creates a variable if it does not exist and
#: returns the existing one otherwise.
AUTO_REUSE = _ReuseMode.AUTO_REUSE


def no_regularizer(_: Any) -> None:
    """A regularizer that regularizes nothing (``tf.no_regularizer``)."""
    return None




def _accepts(fn: Callable[..., Any], arg: str) -> bool:
    """Whether ``fn`` takes a parameter ``arg`` (or ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == arg or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _needs_no_arguments(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(p.default is not inspect.Parameter.empty or
               p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
               for p in params)


# ---------------------------------------------------------------------------------------
# the variable store
# ---------------------------------------------------------------------------------------
class _VariableStore:
    """The variables ``get_variable`` made in one graph, by full name."""

    def __init__(self) -> None:
        self._vars: dict[str, Any] = {}
        self._partitioned_vars: dict[str, Any] = {}
        self._origins: dict[str, str] = {}
        self._lock = threading.RLock()

    def get_variable(self, name: str, shape: Any = None, dtype: Any = _dt.float32,
                     initializer: Any = None, regularizer: Callable | None = None,
                     reuse: Any = None, trainable: bool | None = None,
                     collections: Sequence[str] | None = None, caching_device: Any = None,
                     partitioner: Callable | None = None, validate_shape: bool = True,
                     use_resource: bool | None = None, custom_getter: Callable | None = None,
                     constraint: Callable | None = None, synchronization: Any = None,
                     aggregation: Any = None) -> Any:
        """Get the variable ``name`` or create it, following ``reuse``."""
        if custom_getter is not None and not callable(custom_getter):
            raise ValueError(f"Passed a custom_getter which is not callable: {custom_getter}")
        if dtype is not None and hasattr(dtype, "base_dtype"):
            dtype = dtype.base_dtype

        def true_getter(name: str, shape: Any = None, dtype: Any = _dt.float32,
                        initializer: Any = None, regularizer: Callable | None = None,
                        reuse: Any = None, trainable: bool | None = None,
                        collections: Sequence[str] | None = None,
                        caching_device: Any = None, partitioner: Callable | None = None,
                        validate_shape: bool = True, use_resource: bool | None = None,
                        constraint: Callable | None = None, synchronization: Any = None,
                        aggregation: Any = None) -> Any:
            """The getter a custom getter wraps: get or create one variable, or a
            :class:`~flowrt.training.partitioned.PartitionedVariable` with a partitioner.

            :raises ValueError: if ``partitioner`` is not callable, or a partitioned
                variable of that name exists and this one is not (or the reverse)
            """
            is_scalar = isinstance(shape, _abc.Sequence) and not shape
            single = {"regularizer": regularizer, "trainable": trainable,
                      "collections": collections, "caching_device": caching_device,
                      "validate_shape": validate_shape, "use_resource": use_resource,
                      "constraint": constraint}
            if partitioner is not None and not is_scalar:
                if not callable(partitioner):
                    raise ValueError(f"Partitioner must be callable, but received: "
                                     f"{partitioner}")
                with name_scope(None):
                    return get_partitioned_variable(
                        self, name, partitioner, shape=shape, dtype=dtype,
                        initializer=initializer, reuse=reuse, **single)
            if reuse is True and partitioner is None and name in self._partitioned_vars:
                return get_partitioned_variable(self, name, None, shape=shape, dtype=dtype,
                                                initializer=initializer, reuse=reuse,
                                                **single)
            if f"{name}/part_0" in self._vars:
                raise ValueError("No partitioner was provided, but a partitioned version of "
                                 f"the variable was found: {name}/part_0. Perhaps a variable "
                                 "of the same name was already created with partitioning?")
            return self._get_single_variable(
                name, shape=shape, dtype=dtype, initializer=initializer,
                regularizer=regularizer, reuse=reuse, trainable=trainable,
                collections=collections, caching_device=caching_device,
                validate_shape=validate_shape, use_resource=use_resource,
                constraint=constraint)

        if custom_getter is not None:
            kwargs: dict[str, Any] = {
                "getter": true_getter, "name": name, "shape": shape, "dtype": dtype,
                "initializer": initializer, "regularizer": regularizer, "reuse": reuse,
                "trainable": trainable, "collections": collections,
                "caching_device": caching_device, "partitioner": partitioner,
                "validate_shape": validate_shape, "use_resource": use_resource,
                "synchronization": synchronization, "aggregation": aggregation}
            if _accepts(custom_getter, "constraint"):
                kwargs["constraint"] = constraint
            return custom_getter(**kwargs)
        return true_getter(name, shape=shape, dtype=dtype, initializer=initializer,
                           regularizer=regularizer, reuse=reuse, trainable=trainable,
                           collections=collections, caching_device=caching_device,
                           partitioner=partitioner, validate_shape=validate_shape,
                           use_resource=use_resource, constraint=constraint)

    def _get_single_variable(self, name: str, shape: Any = None, dtype: Any = _dt.float32,
                             initializer: Any = None, regularizer: Callable | None = None,
                             partition_info: Any = None, reuse: Any = None,
                             trainable: bool | None = None,
                             collections: Sequence[str] | None = None,
                             caching_device: Any = None, validate_shape: bool = True,
                             use_resource: bool | None = None,
                             constraint: Callable | None = None) -> Any:
        """Get the variable ``name`` or create it (TF's ``_VariableStore._get_single_variable``).

        An existing variable is returned unless ``reuse`` is False; a new one is made unless
        ``reuse`` is True, with ``initializer`` (a value, a callable taking the shape, or a
        class to instantiate) or the default initializer for ``dtype``, outside any control
        dependencies. A regularizer's loss is added to ``REGULARIZATION_LOSSES``.

        :returns: the variable
        :raises ValueError: if the variable exists and ``reuse`` is False, does not exist and
            ``reuse`` is True, exists with an incompatible shape or dtype, or the shape and
            initializer do not fit together
        """
        initializing_from_value = initializer is not None and not callable(initializer)
        if shape is not None and initializing_from_value:
            raise ValueError("If initializer is a constant, do not specify shape.")
        dtype = _dt.as_dtype(dtype)
        if shape is not None:
            shape = as_shape(shape)

        with self._lock:
            found = self._vars.get(name)
            if found is not None:
                if reuse is False:
                    origin = self._origins.get(name, "")
                    raise ValueError(
                        f"Variable {name} already exists, disallowed. Did you mean to set "
                        "reuse=True or reuse=tf.AUTO_REUSE in VarScope? Originally defined "
                        f"at:\n\n{origin}")
                if shape is not None and not shape.is_compatible_with(found.get_shape()):
                    raise ValueError(f"Trying to share variable {name}, but specified shape "
                                     f"{shape} and found shape {found.get_shape()}.")
                if not dtype.is_compatible_with(found.dtype):
                    raise ValueError(f"Trying to share variable {name}, but specified dtype "
                                     f"{dtype.name} and found dtype {found.dtype.name}.")
                return found

            if reuse is True:
                raise ValueError(f"Variable {name} does not exist, or was not created with "
                                 "tf.get_variable(). Did you mean to set "
                                 "reuse=tf.AUTO_REUSE in VarScope?")

            if initializer is None:
                if shape is None:
                    raise ValueError(f"Variable {name} did not get an initializer, so its "
                                     "`shape` argument must be specified.")
                initializer, initializing_from_value = self._default_initializer(
                    name, dtype)
            if initializing_from_value:
                init_val: Any = initializer
                variable_dtype = None
            else:
                if inspect.isclass(initializer):
                    initializer = initializer()
                if shape is not None and shape.is_fully_defined():
                    kw: dict[str, Any] = {"dtype": dtype}
                    if _accepts(initializer, "partition_info"):
                        kw["partition_info"] = partition_info
                    init_val = functools.partial(initializer, shape.as_list(), **kw)
                    variable_dtype = dtype.base_dtype
                elif _needs_no_arguments(initializer):
                    init_val = initializer
                    variable_dtype = None
                else:
                    raise ValueError("The initializer passed is not valid. It should be a "
                                     "callable with no arguments and the shape should not "
                                     "be provided or an instance of "
                                     "`tf.keras.initializers.*' and `shape` should be fully "
                                     "defined.")
            g = get_default_graph()
            with g.control_dependencies(None):
                v = Variable(initial_value=init_val, name=name, trainable=trainable,
                             collections=collections, caching_device=caching_device,
                             dtype=variable_dtype, validate_shape=validate_shape,
                             constraint=constraint, use_resource=use_resource)
            self._vars[name] = v
            self._origins[name] = _user_frames()

        if regularizer:
            with colocate_with(v), name_scope(name + "/Regularizer/"), \
                    g.control_dependencies(None):
                loss = regularizer(v)
            if loss is not None:
                g.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
        return v

    @staticmethod
    def _default_initializer(name: str, dtype: _dt.DType) -> tuple[Any, bool]:
        """glorot_uniform for floats, zeros for integers, bools and strings (TF1)."""
        if dtype.is_floating:
            return api_function("glorot_uniform_initializer")(), False
        if dtype.is_integer or dtype.is_unsigned or dtype.is_bool or dtype is _dt.string:
            return api_function("zeros_initializer")(), False
        raise ValueError(f"An initializer for variable {name} of {dtype.base_dtype} is "
                         "required")


def _user_frames() -> str:
    """The innermost few stack frames outside flowrt's core, for error messages."""
    frames = [f for f in traceback.extract_stack(limit=16)[::-1]
              if not f.filename.startswith(_PKG_DIR)][:5]
    return "".join(traceback.format_list(frames))


def _get_default_variable_store() -> _VariableStore:
    g = get_default_graph()
    store = g.get_collection(_VARSTORE_KEY)
    if store:
        return store[0]
    s = _VariableStore()
    g.add_to_collection(_VARSTORE_KEY, s)
    return s


# ---------------------------------------------------------------------------------------
# scopes
# ---------------------------------------------------------------------------------------
class VariableScope:
    """The defaults ``get_variable`` uses inside a ``variable_scope`` (``tf.VariableScope``).

    :ivar name: the prefix of variable names created in this scope
    :ivar reuse: True, False or ``tf.AUTO_REUSE``
    :ivar original_name_scope: the name scope opened when the scope was first entered
    """

    def __init__(self, reuse: Any, name: str = "", initializer: Any = None,
                 regularizer: Callable | None = None, caching_device: Any = None,
                 partitioner: Callable | None = None, custom_getter: Callable | None = None,
                 name_scope: str = "", dtype: Any = _dt.float32,
                 use_resource: bool | None = None, constraint: Callable | None = None):
        self._name = name
        self._initializer = initializer
        self._regularizer = regularizer
        self._reuse = reuse
        self._caching_device = caching_device
        self._partitioner = partitioner
        self._custom_getter = custom_getter
        self._name_scope = name_scope
        self._dtype = dtype
        self._use_resource = use_resource
        self._constraint = constraint

    name = property(lambda self: self._name)
    original_name_scope = property(lambda self: self._name_scope)
    reuse = property(lambda self: self._reuse)
    initializer = property(lambda self: self._initializer)
    dtype = property(lambda self: self._dtype)
    use_resource = property(lambda self: self._use_resource)
    regularizer = property(lambda self: self._regularizer)
    caching_device = property(lambda self: self._caching_device)
    partitioner = property(lambda self: self._partitioner)
    custom_getter = property(lambda self: self._custom_getter)
    constraint = property(lambda self: self._constraint)

    def reuse_variables(self) -> None:
        """Reuse variables in this scope from now on."""
        self._reuse = True

    def set_initializer(self, initializer: Any) -> None:
        self._initializer = initializer

    def set_dtype(self, dtype: Any) -> None:
        self._dtype = dtype

    def set_use_resource(self, use_resource: bool | None) -> None:
        self._use_resource = use_resource

    def set_regularizer(self, regularizer: Callable | None) -> None:
        self._regularizer = regularizer

    def set_caching_device(self, caching_device: Any) -> None:
        self._caching_device = caching_device

    def set_partitioner(self, partitioner: Callable | None) -> None:
        self._partitioner = partitioner

    def set_custom_getter(self, custom_getter: Callable | None) -> None:
        self._custom_getter = custom_getter

    def get_collection(self, name: str) -> list[Any]:
        """The members of collection ``name`` whose names start with this scope."""
        scope = self._name + "/" if self._name else ""
        return get_default_graph().get_collection(name, scope)

    def trainable_variables(self) -> list[Any]:
        return self.get_collection(GraphKeys.TRAINABLE_VARIABLES)

    def global_variables(self) -> list[Any]:
        return self.get_collection(GraphKeys.GLOBAL_VARIABLES)

    def local_variables(self) -> list[Any]:
        return self.get_collection(GraphKeys.LOCAL_VARIABLES)

    def get_variable(self, var_store: _VariableStore, name: str, shape: Any = None,
                     dtype: Any = None, initializer: Any = None,
                     regularizer: Callable | None = None, reuse: Any = None,
                     trainable: bool | None = None, collections: Sequence[str] | None = None,
                     caching_device: Any = None, partitioner: Callable | None = None,
                     validate_shape: bool = True, use_resource: bool | None = None,
                     custom_getter: Callable | None = None,
                     constraint: Callable | None = None, synchronization: Any = None,
                     aggregation: Any = None) -> Any:
        """Get or create ``<scope name>/<name>`` with this scope's defaults."""
        if regularizer is None:
            regularizer = self._regularizer
        if caching_device is None:
            caching_device = self._caching_device
        if partitioner is None:
            partitioner = self._partitioner
        if custom_getter is None:
            custom_getter = self._custom_getter
        if reuse is None:
            reuse = self._reuse
        if use_resource is None:
            use_resource = self._use_resource
        full_name = self._name + "/" + name if self._name else name
        # Variable names depend on the variable scope only, not on the name scope.
        with name_scope(None):
            if dtype is not None and initializer is not None and not callable(initializer):
                init_dtype = convert_to_tensor(initializer).dtype.base_dtype
                if init_dtype is not _dt.as_dtype(dtype).base_dtype:
                    raise ValueError(f"Initializer type '{init_dtype}' and explicit dtype "
                                     f"'{_dt.as_dtype(dtype)}' don't match.")
            if initializer is None:
                initializer = self._initializer
            if constraint is None:
                constraint = self._constraint
            if dtype is None:
                dtype = self._dtype
            return var_store.get_variable(
                full_name, shape=shape, dtype=dtype, initializer=initializer,
                regularizer=regularizer, reuse=reuse, trainable=trainable,
                collections=collections, caching_device=caching_device,
                partitioner=partitioner, validate_shape=validate_shape,
                use_resource=use_resource, custom_getter=custom_getter,
                constraint=constraint, synchronization=synchronization,
                aggregation=aggregation)

    def __repr__(self) -> str:
        return f"<tf.VariableScope {self._name!r} reuse={self._reuse}>"


class _VariableScopeStore(threading.local):
    """Per thread: the current scope and how often each scope name was opened."""

    def __init__(self) -> None:
        super().__init__()
        self.current_scope = VariableScope(False)
        self.variable_scopes_count: dict[str, int] = {}

    def open_variable_scope(self, scope_name: str) -> None:
        self.variable_scopes_count[scope_name] = \
            self.variable_scopes_count.get(scope_name, 0) + 1

    def close_variable_subscopes(self, scope_name: str | None) -> None:
        if scope_name is None:
            for k in self.variable_scopes_count:
                self.variable_scopes_count[k] = 0
            return
        prefix = scope_name + "/"
        for k in self.variable_scopes_count:
            if k.startswith(prefix):
                self.variable_scopes_count[k] = 0

    def variable_scope_count(self, scope_name: str) -> int:
        return self.variable_scopes_count.get(scope_name, 0)


def _get_variable_scope_store() -> _VariableScopeStore:
    g = get_default_graph()
    store = g.get_collection(_VARSCOPESTORE_KEY)
    if store:
        return store[0]
    s = _VariableScopeStore()
    g.add_to_collection(_VARSCOPESTORE_KEY, s)
    return s


def get_variable_scope() -> VariableScope:
    """The current variable scope (``tf.get_variable_scope``)."""
    return _get_variable_scope_store().current_scope


def _maybe_wrap_custom_getter(custom_getter: Callable, old_getter: Callable | None
                              ) -> Callable:
    """A getter calling ``custom_getter`` around ``old_getter`` (nested scopes)."""
    if old_getter is None:
        return custom_getter

    def wrapped_custom_getter(getter: Callable, *args: Any, **kwargs: Any) -> Any:
        return custom_getter(functools.partial(old_getter, getter), *args, **kwargs)

    return wrapped_custom_getter


def _get_unique_variable_scope(prefix: str) -> str:
    store = _get_variable_scope_store()
    current = store.current_scope
    name = current.name + "/" + prefix if current.name else prefix
    if store.variable_scope_count(name) == 0:
        return prefix
    idx = 1
    while store.variable_scope_count(f"{name}_{idx}") > 0:
        idx += 1
    return f"{prefix}_{idx}"


class _pure_variable_scope:  # noqa: N801 - TF's name
    """Switches the current variable scope (opens no name scope)."""

    def __init__(self, name_or_scope: Any, reuse: Any = None, initializer: Any = None,
                 regularizer: Callable | None = None, caching_device: Any = None,
                 partitioner: Callable | None = None, custom_getter: Callable | None = None,
                 old_name_scope: str | None = None, dtype: Any = _dt.float32,
                 use_resource: bool | None = None, constraint: Callable | None = None):
        """Record the scope to switch to and the defaults to override in it.

        For a :class:`VariableScope` ``name_or_scope`` the scope to enter is made now (and
        re-entered as is); for a string it is made on entry, under the current scope.
        """
        self._name_or_scope = name_or_scope
        self._reuse = reuse
        self._initializer = initializer
        self._regularizer = regularizer
        self._caching_device = caching_device
        self._partitioner = partitioner
        self._custom_getter = custom_getter
        self._old_name_scope = old_name_scope
        self._dtype = dtype
        self._use_resource = use_resource
        self._constraint = constraint
        self._store = _get_variable_scope_store()
        self._last: VariableScope | None = None
        self._cached: VariableScope | None = None
        if isinstance(name_or_scope, VariableScope):
            self._new_name = name_or_scope.name
            s = name_or_scope
            obj = VariableScope(
                s.reuse if not reuse else reuse, name=self._new_name,
                initializer=s.initializer, regularizer=s.regularizer,
                caching_device=s.caching_device, partitioner=s.partitioner,
                dtype=s.dtype, custom_getter=s.custom_getter,
                name_scope=s.original_name_scope, use_resource=s.use_resource,
                constraint=constraint)
            self._apply_overrides(obj, s.custom_getter)
            self._cached = obj

    def _apply_overrides(self, obj: VariableScope, old_getter: Callable | None) -> None:
        if self._initializer is not None:
            obj.set_initializer(self._initializer)
        if self._regularizer is not None:
            obj.set_regularizer(self._regularizer)
        if self._caching_device is not None:
            obj.set_caching_device(self._caching_device)
        if self._partitioner is not None:
            obj.set_partitioner(self._partitioner)
        if self._custom_getter is not None:
            obj.set_custom_getter(_maybe_wrap_custom_getter(self._custom_getter, old_getter))
        if self._dtype is not None:
            obj.set_dtype(self._dtype)
        if self._use_resource is not None:
            obj.set_use_resource(self._use_resource)

    def __enter__(self) -> VariableScope:
        """Make the new scope current and open its sub-scope count.

        A string scope is nested in the current one and inherits its defaults and ``reuse``.

        :returns: the :class:`VariableScope` entered
        """
        store = self._store
        self._old = store.current_scope
        if isinstance(self._name_or_scope, VariableScope):
            store.open_variable_scope(self._new_name)
            self._old_subscopes = copy.copy(store.variable_scopes_count)
            obj = self._cached
            assert obj is not None
        else:
            old = self._old
            self._new_name = (old.name + "/" + self._name_or_scope if old.name
                              else self._name_or_scope)
            reuse = self._reuse or old.reuse  # reuse is inherited by sub-scopes
            ns = self._name_or_scope if self._old_name_scope is None else self._old_name_scope
            obj = VariableScope(
                reuse, name=self._new_name, initializer=old.initializer,
                regularizer=old.regularizer, caching_device=old.caching_device,
                partitioner=old.partitioner, dtype=old.dtype, use_resource=old.use_resource,
                custom_getter=old.custom_getter, name_scope=ns, constraint=self._constraint)
            self._apply_overrides(obj, old.custom_getter)
            store.open_variable_scope(self._new_name)
        store.current_scope = obj
        self._last = obj
        return obj

    def __exit__(self, *exc: Any) -> None:
        store = self._store
        if store.current_scope is not self._last:
            raise RuntimeError("Improper nesting of variable_scope.")
        if isinstance(self._name_or_scope, VariableScope):
            store.variable_scopes_count = self._old_subscopes
        else:
            store.close_variable_subscopes(self._new_name)
        store.current_scope = self._old


class variable_scope:  # noqa: N801 - TF's name
    """A context manager for code that creates variables (``tf.variable_scope``).

    ``name_or_scope`` (a string or a :class:`VariableScope`) or, when None, a unique
    ``default_name`` prefixes the names of variables made by :func:`get_variable`
    inside; ``reuse`` (True, None or ``tf.AUTO_REUSE``; False means None) controls
    whether existing variables are returned, and is inherited by sub-scopes; the other
    arguments set defaults for ``get_variable``. A name scope of the same name is
    opened too (made unique: re-entering gives ``foo_1/`` for ops), unless
    ``auxiliary_name_scope`` is False.

    :raises ValueError: for a bad ``reuse``, or ``reuse=True`` without a name
    :raises TypeError: when neither ``name_or_scope`` nor ``default_name`` is given
    """

    def __init__(self, name_or_scope: Any, default_name: str | None = None,
                 values: Any = None, initializer: Any = None,
                 regularizer: Callable | None = None, caching_device: Any = None,
                 partitioner: Callable | None = None, custom_getter: Callable | None = None,
                 reuse: Any = None, dtype: Any = None, use_resource: bool | None = None,
                 constraint: Callable | None = None, auxiliary_name_scope: bool = True):
        """Check the arguments and pick the graph (from ``values``, else the default graph).

        :raises TypeError: if neither ``name_or_scope`` nor ``default_name`` is given, or
            ``auxiliary_name_scope`` is not a bool
        :raises ValueError: if ``reuse`` is not True, False, None or ``tf.AUTO_REUSE``
        """
        self._name_or_scope = name_or_scope
        self._default_name = default_name
        self._values = values
        self._initializer = initializer
        self._regularizer = regularizer
        self._caching_device = caching_device
        self._partitioner = partitioner
        self._custom_getter = custom_getter
        self._reuse = reuse
        self._dtype = dtype
        self._use_resource = use_resource
        self._constraint = constraint
        if default_name is None and name_or_scope is None:
            raise TypeError("If default_name is None then name_or_scope is required")
        if self._reuse is False:
            self._reuse = None  # non-inheriting scopes are not allowed: False means None
        if not (self._reuse is True or self._reuse is None or self._reuse is AUTO_REUSE):
            raise ValueError("The reuse parameter must be True or False or None.")
        if self._values is None:
            self._values = []
        self._graph = _graph_from_inputs(self._values) or get_default_graph()
        if not isinstance(auxiliary_name_scope, bool):
            raise TypeError("The auxiliary_name_scope must be `True` or `False`, while get "
                            f"{auxiliary_name_scope}")
        self._auxiliary_name_scope = auxiliary_name_scope
        self._cached_pure: _pure_variable_scope | None = None
        self._ns_name: str | None = None  # the name scope to re-open on re-entry
        self._stack: list[contextlib.ExitStack] = []

    def _pure(self, name_or_scope: Any, old_name_scope: str | None,
              reuse: Any = None) -> _pure_variable_scope:
        return _pure_variable_scope(
            name_or_scope, reuse=reuse, initializer=self._initializer,
            regularizer=self._regularizer, caching_device=self._caching_device,
            partitioner=self._partitioner, custom_getter=self._custom_getter,
            old_name_scope=old_name_scope, dtype=self._dtype,
            use_resource=self._use_resource, constraint=self._constraint)

    def __enter__(self) -> VariableScope:
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(self._graph.as_default())
            if self._cached_pure is not None:
                if self._ns_name is not None:
                    stack.enter_context(self._graph.name_scope(self._ns_name))
                result = stack.enter_context(self._cached_pure)
            else:
                result = self._enter_uncached(stack)
        except BaseException:
            stack.close()
            raise
        self._stack.append(stack)
        return result

    def _enter_uncached(self, stack: contextlib.ExitStack) -> VariableScope:
        """First entry: open the name scope on ``stack`` and enter the variable scope.

        Without ``name_or_scope`` the variable scope is ``default_name`` made unique. The
        name scope and variable scope are kept so that a later entry re-opens the same ones.

        :returns: the :class:`VariableScope` entered
        :raises TypeError: if ``name_or_scope`` is neither a string nor a VariableScope
        :raises ValueError: if ``reuse`` is True without a ``name_or_scope``
        """
        g = self._graph
        if self._auxiliary_name_scope:
            reenter: str | None = None
        else:
            cur = g.get_name_scope()
            reenter = cur + "/" if cur else ""
        nos = self._name_or_scope
        if nos is not None:
            if not isinstance(nos, (VariableScope, str)):
                raise TypeError("VariableScope: name_or_scope must be a string or "
                                "VariableScope.")
            ns = nos if isinstance(nos, str) else nos.name.split("/")[-1]
            if ns or reenter is not None:
                ns_arg = reenter if reenter is not None else ns
                scope_name = stack.enter_context(g.name_scope(ns_arg))
                self._ns_name = ns_arg
                old_ns = scope_name if isinstance(nos, str) else nos.original_name_scope
                pure = self._pure(nos, old_ns, self._reuse)
            else:
                self._ns_name = None
                pure = self._pure(nos, None, self._reuse)
                pure._old_name_scope = None
            result = stack.enter_context(pure)
            self._cached_pure = pure
            return result
        if self._reuse:
            raise ValueError("reuse=True cannot be used without a name_or_scope")
        ns_arg = reenter if reenter is not None else self._default_name
        scope_name = stack.enter_context(g.name_scope(ns_arg))
        self._ns_name = ns_arg
        unique = _get_unique_variable_scope(self._default_name)
        pure = self._pure(unique, scope_name)
        result = stack.enter_context(pure)
        self._cached_pure = pure
        return result

    def __exit__(self, *exc: Any) -> None:
        self._stack.pop().__exit__(*exc)


def get_variable(name: str, shape: Any = None, dtype: Any = None, initializer: Any = None,
                 regularizer: Callable | None = None, trainable: bool | None = None,
                 collections: Sequence[str] | None = None, caching_device: Any = None,
                 partitioner: Callable | None = None, validate_shape: bool = True,
                 use_resource: bool | None = None, custom_getter: Callable | None = None,
                 constraint: Callable | None = None, synchronization: Any = None,
                 aggregation: Any = None) -> Variable:
    """Get an existing variable or create a new one (``tf.get_variable``).

    The full name is ``<current variable scope>/<name>``; whether an existing variable
    is returned depends on the scope's ``reuse``. Without an initializer, floats get
    ``glorot_uniform_initializer`` and integers/bools/strings zeros. ``initializer`` may
    also be a Tensor or value (then ``shape`` must not be given).

    :raises ValueError: the variable exists and reuse is off, does not exist and reuse
        is True, or its shape/dtype conflicts with the existing one
    With a ``partitioner`` (here or on the scope) a non-scalar variable is made of
    slices ``<name>/part_<i>`` and returned as a ``PartitionedVariable``.
    """
    return get_variable_scope().get_variable(
        _get_default_variable_store(), name, shape=shape, dtype=dtype,
        initializer=initializer, regularizer=regularizer, trainable=trainable,
        collections=collections, caching_device=caching_device, partitioner=partitioner,
        validate_shape=validate_shape, use_resource=use_resource,
        custom_getter=custom_getter, constraint=constraint,
        synchronization=synchronization, aggregation=aggregation)


def get_local_variable(name: str, shape: Any = None, dtype: Any = None,
                       initializer: Any = None, regularizer: Callable | None = None,
                       trainable: bool = False, collections: Sequence[str] | None = None,
                       caching_device: Any = None, partitioner: Callable | None = None,
                       validate_shape: bool = True, use_resource: bool | None = None,
                       custom_getter: Callable | None = None,
                       constraint: Callable | None = None, synchronization: Any = None,
                       aggregation: Any = None) -> Variable:
    """Like :func:`get_variable`, for a non-trainable variable in ``LOCAL_VARIABLES``."""
    collections = (list(collections) + [GraphKeys.LOCAL_VARIABLES] if collections
                   else [GraphKeys.LOCAL_VARIABLES])
    return get_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                        regularizer=regularizer, trainable=False, collections=collections,
                        caching_device=caching_device, partitioner=partitioner,
                        validate_shape=validate_shape, use_resource=use_resource,
                        synchronization=synchronization, aggregation=aggregation,
                        custom_getter=custom_getter, constraint=constraint)

