"""Graph-level names of the TF 1.15 API: ``tf.IndexedSlices``, ``tf.custom_gradient``,
``tf.make_template``, the partitioners, ``tf.init_scope``, ``tf.get_static_value``, the
eager-mode switches and the version constants.

The classes and functions live in the core (``flowrt.framework``, ``flowrt.training``);
this module exports them under their TF names, and defines the decorators built on
gradient overrides: :func:`custom_gradient` (an ``IdentityN`` of the outputs, inputs and
variables whose gradient is the user's function), :func:`grad_pass_through` and
:func:`recompute_grad`.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import logging
import threading
import types
from typing import Any, Callable

from flowrt import errors
from flowrt.framework.compat import dimension_at_index
from flowrt.framework.gradients import (AggregationMethod, RegisterGradient,
                                        UnconnectedGradients, gradients, no_gradient)
from flowrt.framework.indexed_slices import (IndexedSlices, IndexedSlicesValue,
                                             convert_to_tensor_or_indexed_slices)
from flowrt.graph import (GraphKeys, Operation, Tensor, api_function, control_dependencies,
                          convert_to_tensor, get_collection, get_default_graph, init_scope,
                          is_tensor, name_scope)
from flowrt.training.partitioned import (create_partitioned_variables, fixed_size_partitioner,
                                         min_max_variable_partitioner,
                                         variable_axis_size_partitioner)
from flowrt.training.template import make_template
from flowrt.training.variables import (Variable, VariableAggregation,
                                       VariableSynchronization, variable_creator_scope)
from flowrt.variable_scope import get_variable_scope, variable_scope
from flowrt.tools import tf_logging

from ._common import ks
from .array_ops import _static_value

__all__ = ["custom_gradient", "grad_pass_through", "recompute_grad", "get_static_value",
           "executing_eagerly", "enable_eager_execution", "disable_eager_execution"]

# ---------------------------------------------------------------------------------------
# custom_gradient (TF's custom_gradient.py, graph mode)
# ---------------------------------------------------------------------------------------
_uid = itertools.count()
_uid_lock = threading.Lock()


def _flatten(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [y for e in x for y in _flatten(e)]
    if isinstance(x, dict):
        return [y for k in sorted(x) for y in _flatten(x[k])]
    return [x]


def _pack_as(structure: Any, flat: list[Any]) -> Any:
    it = iter(flat)

    def pack(s: Any) -> Any:
        if isinstance(s, (list, tuple)):
            items = [pack(e) for e in s]
            if isinstance(s, tuple) and hasattr(s, "_fields"):
                return type(s)(*items)
            return type(s)(items)
        if isinstance(s, dict):
            return {k: pack(s[k]) for k in sorted(s)}
        return next(it)

    return pack(structure)


def _variables_used(outputs: list[Tensor], args: list[Tensor], start_id: int) -> list[Variable]:
    """The variables whose values the ops built since ``start_id`` read on the way from
    ``args`` to ``outputs`` (TF's ``_get_dependent_variables``), sorted by name."""
    g = get_default_graph()
    by_tensor: dict[Tensor, Variable] = {}
    for v in g.get_collection(GraphKeys.GLOBAL_VARIABLES) + \
            g.get_collection(GraphKeys.LOCAL_VARIABLES):
        if isinstance(v, Variable):
            by_tensor[v.value()] = v
            by_tensor[v._ref()] = v
    arg_set = set(args)
    found: dict[int, Variable] = {}
    seen: set[Operation] = set()
    stack = [t.op for t in outputs if isinstance(t, Tensor) and t not in arg_set]
    while stack:
        op = stack.pop()
        if op in seen or op._id <= start_id:
            continue
        seen.add(op)
        for t in op.inputs:
            if t in arg_set:
                continue
            v = by_tensor.get(t)
            if v is not None:
                found[id(v)] = v
            elif t.op._id > start_id:
                stack.append(t.op)
    return sorted(found.values(), key=lambda v: v.name)


def _accepts_variables(fn: Callable[..., Any]) -> bool:
    try:
        spec = inspect.getfullargspec(fn)
    except TypeError:
        return False
    return "variables" in spec.args or "variables" in spec.kwonlyargs or bool(spec.varkw)


def _graph_mode_decorator(f: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
    """Build ``f(*args)``'s ops and route their gradient through its ``grad_fn``.

    The outputs, the inputs and the variables ``f`` read pass through one ``IdentityN``
    whose gradient (registered as ``CustomGradient-<n>``) calls ``grad_fn`` with the
    outputs' gradients (and ``variables=`` when there are any) and returns
    ``[None] * outputs + input grads + variable grads``.

    :raises ValueError: for keyword arguments (graph mode accepts none), as TF
    :raises TypeError: when ``f`` reads variables but ``grad_fn`` takes no ``variables``
    """
    if kwargs:
        raise ValueError("The custom_gradient decorator currently supports keywords "
                         "arguments only when eager execution is enabled.")
    with _uid_lock:
        name = f"CustomGradient-{next(_uid)}"
    args = [convert_to_tensor(x) for x in args]
    g = get_default_graph()
    start_id = g._last_id
    result, grad_fn = f(*args)
    flat_result = [convert_to_tensor(r) for r in _flatten(result)]
    n_result = len(flat_result)
    variables = _variables_used(flat_result, args, start_id)
    takes_variables = _accepts_variables(grad_fn)
    if variables and not takes_variables:
        raise TypeError("@tf.custom_gradient grad_fn must accept keyword argument "
                        f"'variables', since function uses variables: {variables}")

    def tape_grad_fn(*result_grads: Any) -> list[Any]:
        result_grads = result_grads[:n_result]
        if variables:
            input_grads, variable_grads = grad_fn(*result_grads, variables=variables)
            if len(variable_grads) != len(variables):
                raise ValueError("Must return gradient for each variable from "
                                 "@custom_gradient grad_fn.")
        else:
            input_grads = grad_fn(*result_grads)
            variable_grads = []
        return [None] * n_result + _flatten(input_grads) + list(variable_grads)

    @RegisterGradient(name)
    def internal_grad_fn(unused_op: Any, *result_grads: Any) -> list[Any]:
        return tape_grad_fn(*result_grads)

    all_tensors = flat_result + args + [v.value() for v in variables]
    with g.gradient_override_map({"IdentityN": name}):
        outs = api_function("identity_n")(all_tensors)
    return _pack_as(result, list(outs[:n_result])) if isinstance(result, (list, tuple, dict)) \
        else outs[0]


def custom_gradient(f: Callable[..., Any] | None = None) -> Any:
    """Decorator giving a function its own gradient (``tf.custom_gradient``, graph mode).

    ``f(*xs)`` returns ``(y, grad_fn)``; ``grad_fn(*dys)`` returns the gradients of the
    ``xs``. When ``f`` reads variables (``tf.get_variable`` inside it or outside),
    ``grad_fn(*dys, variables=...)`` gets them and returns ``(input_grads,
    variable_grads)``. Keyword arguments are not supported in graph mode (ValueError).
    """
    if f is None:
        return custom_gradient

    @functools.wraps(f)
    def decorated(*args: Any, **kwargs: Any) -> Any:
        return _graph_mode_decorator(f, args, kwargs)

    return decorated


def grad_pass_through(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f`` with an identity gradient: the gradient of its output passes to its inputs
    unchanged (variables used get None) (``tf.grad_pass_through``)."""

    @custom_gradient
    def _grad_pass_through_op(*args: Any, **kwargs: Any) -> Any:
        def grad(*dys: Any, **gkw: Any) -> Any:
            variables = gkw.get("variables")
            if variables is not None:
                return dys, [None] * len(variables)
            return dys

        return f(*args, **kwargs), grad

    return functools.wraps(f)(_grad_pass_through_op)


def recompute_grad(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f`` whose activations are recomputed for the backward pass
    (``tf.recompute_grad``): the gradient re-runs ``f`` on its inputs (in the same
    variable scope, reusing its variables) after the output gradients are known, and
    differentiates that."""

    @custom_gradient
    def inner(*args: Any) -> Any:
        scope = get_variable_scope()
        result = f(*args)

        def grad_fn(*dresult: Any, variables: Any = None) -> Any:
            deps = [d.op for d in dresult if isinstance(d, Tensor)]
            with control_dependencies(deps):
                id_args = [api_function("identity")(a) for a in args]
            with variable_scope(scope, reuse=True):
                recomputed = f(*id_args)
            kw_vars = list(variables) if variables is not None else []
            grads = gradients(_flatten(recomputed), id_args + kw_vars, grad_ys=list(dresult),
                              unconnected_gradients=UnconnectedGradients.ZERO)
            return grads[:len(id_args)], grads[len(id_args):]

        return result, grad_fn

    return functools.wraps(f)(inner)


# ---------------------------------------------------------------------------------------
# small framework functions
# ---------------------------------------------------------------------------------------
def get_static_value(tensor: Any, partial: bool = False) -> Any:
    """The value of ``tensor`` when it can be computed at graph-construction time, else
    None (``tf.get_static_value``); a non-tensor is returned as it is. A tensor with a
    known value can no longer be fed, as in TF."""
    if not is_tensor(tensor):
        return tensor
    if not isinstance(tensor, Tensor):
        return None
    value = _static_value(tensor)
    if value is not None:
        tensor.graph.prevent_feeding(tensor)
    return value


def executing_eagerly() -> bool:
    """Always False: flowrt runs TF1 graph mode (``tf.executing_eagerly``)."""
    return False


def enable_eager_execution(config: Any = None, device_policy: Any = None,
                           execution_mode: Any = None) -> None:
    """Eager execution is not available (``tf.enable_eager_execution``).

    :raises NotImplementedError: always: flowrt runs graph mode only
    """
    raise NotImplementedError("flowrt runs TensorFlow 1.x graph mode only: eager execution "
                              "cannot be enabled. Build a graph and run it in a tf.Session.")


def enable_v2_behavior() -> None:
    """TF2 behaviour is not available (``tf.enable_v2_behavior``).

    :raises NotImplementedError: always: flowrt runs graph mode only
    """
    raise NotImplementedError("flowrt implements TensorFlow 1.x graph-mode behaviour only: "
                              "TF2 behaviour cannot be enabled.")


def _noop(*args: Any, **kwargs: Any) -> None:
    """Accepted for compatibility: flowrt already behaves this way."""
    return None


def _false() -> bool:
    return False


def load_op_library(library_filename: str) -> Any:
    """Native op libraries cannot be loaded (``tf.load_op_library``).

    :raises errors.NotFoundError: always: flowrt's ops are Python kernel-set plugins
        (docs/plugins.md), not shared libraries
    """
    raise errors.NotFoundError(None, None, f"{library_filename}: flowrt cannot load native "
                               "op libraries; write a kernel-set plugin instead "
                               "(docs/plugins.md)")


def op_scope(values: Any, name: str, default_name: str | None = None) -> Any:
    """Deprecated ``tf.op_scope(values, name, default_name)``: ``tf.name_scope``."""
    return name_scope(name, default_name, values)


def variable_op_scope(values: Any, name_or_scope: Any, default_name: str | None = None,
                      initializer: Any = None, regularizer: Any = None,
                      caching_device: Any = None, partitioner: Any = None,
                      custom_getter: Any = None, reuse: Any = None, dtype: Any = None,
                      use_resource: Any = None, constraint: Any = None) -> Any:
    """Deprecated ``tf.variable_op_scope``: ``tf.variable_scope`` with values first."""
    return variable_scope(name_or_scope, default_name=default_name, values=values,
                          initializer=initializer, regularizer=regularizer,
                          caching_device=caching_device, partitioner=partitioner,
                          custom_getter=custom_getter, reuse=reuse, dtype=dtype,
                          use_resource=use_resource, constraint=constraint)


def moving_average_variables(scope: str | None = None) -> list[Any]:
    """The ``MOVING_AVERAGE_VARIABLES`` collection (``tf.moving_average_variables``)."""
    return get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, scope)


def get_logger() -> logging.Logger:
    """The ``tensorflow`` logger (``tf.get_logger``), with TF's stderr handler added on
    first use (the same logger ``tf.logging`` writes to)."""
    return tf_logging.get_logger()


def is_numeric_tensor(tensor: Any) -> bool:
    """Whether ``tensor`` is a Tensor of a numeric dtype (``tf.is_numeric_tensor``)."""
    numeric = {"float16", "bfloat16", "float32", "float64", "int8", "int16", "int32",
               "int64", "uint8", "uint16", "uint32", "uint64", "complex64", "complex128",
               "qint8", "qint16", "qint32", "quint8", "quint16"}
    return isinstance(tensor, Tensor) and tensor.dtype.base_dtype.name in numeric


def tables_initializer(name: str = "init_all_tables") -> Operation:
    """An op running every lookup-table initializer of the graph (collection
    ``TABLE_INITIALIZERS``), a NoOp when there is none (``tf.tables_initializer``)."""
    inits = get_collection(GraphKeys.TABLE_INITIALIZERS)
    if inits:
        return api_function("group")(*inits, name=name)
    return api_function("no_op")(name=name)


def guarantee_const(input: Any, name: str | None = None) -> Tensor:  # noqa: A002 - TF's name
    """``tf.guarantee_const``: the input, promised constant (an Identity here: flowrt
    does not use the promise)."""
    return api_function("identity")(input, name=name or "GuaranteeConst")


def verify_tensor_all_finite(t: Any = None, msg: str | None = None, name: str | None = None,
                             x: Any = None, message: str | None = None) -> Tensor:
    """``t``, checked for NaN and Inf when it is computed (``tf.verify_tensor_all_finite``).

    :raises errors.InvalidArgumentError: at run time, with ``msg``, for a non-finite value
    """
    t = x if t is None else t
    msg = message if msg is None else msg
    with name_scope(name, "VerifyFinite", [t]) as scope:
        t = convert_to_tensor(t, name="x")
        with get_default_graph().colocate_with(t):
            verify = api_function("check_numerics")(t, message=msg)
            with control_dependencies([verify]):
                return api_function("identity")(t, name=scope)


def add_check_numerics_ops() -> Operation:
    """A group of ``CheckNumerics`` on every float output of the default graph
    (``tf.add_check_numerics_ops``), each checked after the previous one.

    :raises ValueError: if the graph has control flow (TF cannot check inside loops)
    """
    check_op = []
    for op in get_default_graph().get_operations():
        if op.type in ("Enter", "RefEnter", "Switch", "RefSwitch", "Merge", "Exit"):
            raise ValueError(f"`tf.add_check_numerics_ops() is not compatible with "
                             f"TensorFlow control flow operations such as `tf.cond()` or "
                             f"`tf.while_loop()`. ({op.name})")
        for output in op.outputs:
            if output.dtype.base_dtype.is_floating and not output.dtype.is_ref_dtype:
                message = f"{op.name}:{output.value_index}"
                with get_default_graph().colocate_with(op):
                    if not check_op:
                        check_op = [api_function("check_numerics")(output, message=message)]
                    else:
                        with control_dependencies(check_op):
                            check_op = [api_function("check_numerics")(output,
                                                                       message=message)]
    return api_function("group")(*check_op)


# -- tf.nest (TF's nest: lists, tuples, namedtuples and dicts by sorted key) -----------------
def _nest_is_nested(x: Any) -> bool:
    return isinstance(x, (list, tuple, dict))


def _nest_pack_sequence_as(structure: Any, flat_sequence: Any) -> Any:
    flat = list(flat_sequence)
    if not _nest_is_nested(structure):
        if len(flat) != 1:
            raise ValueError(f"Structure is a scalar but len(flat_sequence) == {len(flat)} > 1")
        return flat[0]
    n = len(_flatten(structure))
    if n != len(flat):
        raise ValueError(f"Could not pack sequence. Structure had {n} elements, but "
                         f"flat_sequence had {len(flat)} elements.")
    return _pack_as(structure, flat)


def _nest_assert_same_structure(nest1: Any, nest2: Any, check_types: bool = True) -> None:
    def shape(x: Any) -> Any:
        if isinstance(x, dict):
            return (type(x) if check_types else dict, [(k, shape(x[k])) for k in sorted(x)])
        if isinstance(x, (list, tuple)):
            return (type(x) if check_types else list, [shape(e) for e in x])
        return None

    if shape(nest1) != shape(nest2):
        raise ValueError(f"The two structures don't have the same nested structure.\n\n"
                         f"First structure: {nest1}\n\nSecond structure: {nest2}")


def _nest_map_structure(func: Callable[..., Any], *structure: Any, **kwargs: Any) -> Any:
    if not structure:
        raise ValueError("Must provide at least one structure")
    check_types = kwargs.pop("check_types", True)
    for other in structure[1:]:
        _nest_assert_same_structure(structure[0], other, check_types=check_types)
    flats = [_flatten(s) if _nest_is_nested(s) else [s] for s in structure]
    return _nest_pack_sequence_as(structure[0], [func(*xs) for xs in zip(*flats)])


nest = types.SimpleNamespace(
    flatten=lambda structure, expand_composites=False:
        _flatten(structure) if _nest_is_nested(structure) else [structure],
    pack_sequence_as=lambda structure, flat_sequence, expand_composites=False:
        _nest_pack_sequence_as(structure, flat_sequence),
    map_structure=_nest_map_structure, assert_same_structure=_nest_assert_same_structure,
    is_nested=_nest_is_nested)


#: TF 1.15.0's version strings (``tf.version``)
VERSION = "1.15.0"
GIT_VERSION = "v1.15.0-rc3-22-g590d6ee"
COMPILER_VERSION = "7.3.1 20180303"
CXX11_ABI_FLAG = 0
MONOLITHIC_BUILD = 0
GRAPH_DEF_VERSION = 134
GRAPH_DEF_VERSION_MIN_CONSUMER = 0
GRAPH_DEF_VERSION_MIN_PRODUCER = 0

version = types.SimpleNamespace(
    VERSION=VERSION, GIT_VERSION=GIT_VERSION, COMPILER_VERSION=COMPILER_VERSION,
    CXX11_ABI_FLAG=CXX11_ABI_FLAG, MONOLITHIC_BUILD=MONOLITHIC_BUILD,
    GRAPH_DEF_VERSION=GRAPH_DEF_VERSION,
    GRAPH_DEF_VERSION_MIN_CONSUMER=GRAPH_DEF_VERSION_MIN_CONSUMER,
    GRAPH_DEF_VERSION_MIN_PRODUCER=GRAPH_DEF_VERSION_MIN_PRODUCER)


def _quantized_dtypes() -> frozenset:
    from flowrt import dtypes as _dt

    return frozenset({_dt.qint8, _dt.quint8, _dt.qint16, _dt.quint16, _dt.qint32,
                      _dt.qint8._as_ref, _dt.quint8._as_ref, _dt.qint16._as_ref,
                      _dt.quint16._as_ref, _dt.qint32._as_ref})


# ---------------------------------------------------------------------------------------
# exports
# ---------------------------------------------------------------------------------------
_FUNCTIONS: dict[str, tuple[str, ...]] = {}
for _obj, _names in (
        (convert_to_tensor_or_indexed_slices, ("convert_to_tensor_or_indexed_slices",)),
        (custom_gradient, ("custom_gradient",)),
        (grad_pass_through, ("grad_pass_through",)),
        (recompute_grad, ("recompute_grad",)),
        (no_gradient, ("no_gradient",)),
        (make_template, ("make_template",)),
        (fixed_size_partitioner, ("fixed_size_partitioner",)),
        (min_max_variable_partitioner, ("min_max_variable_partitioner",)),
        (variable_axis_size_partitioner, ("variable_axis_size_partitioner",)),
        (create_partitioned_variables, ("create_partitioned_variables",)),
        (get_static_value, ("get_static_value",)),
        (init_scope, ("init_scope",)),
        (dimension_at_index, ("dimension_at_index",)),
        (executing_eagerly, ("executing_eagerly", "executing_eagerly_outside_functions")),
        (enable_eager_execution, ("enable_eager_execution",)),
        (enable_v2_behavior, ("enable_v2_behavior",)),
        (_noop, ("disable_eager_execution", "disable_v2_behavior", "disable_control_flow_v2",
                 "disable_resource_variables", "disable_tensor_equality",
                 "disable_v2_tensorshape")),
        (_false, ("control_flow_v2_enabled", "resource_variables_enabled")),
        (load_op_library, ("load_op_library", "load_library", "load_file_system_library")),
        (op_scope, ("op_scope",)),
        (variable_op_scope, ("variable_op_scope",)),
        (moving_average_variables, ("moving_average_variables",)),
        (variable_creator_scope, ("variable_creator_scope",)),
        (get_logger, ("get_logger",)),
        (is_numeric_tensor, ("is_numeric_tensor", "debugging.is_numeric_tensor")),
        (tables_initializer, ("tables_initializer", "initialize_all_tables")),
        (guarantee_const, ("guarantee_const",)),
        (verify_tensor_all_finite, ("verify_tensor_all_finite",
                                    "debugging.assert_all_finite")),
        (add_check_numerics_ops, ("add_check_numerics_ops",)),
):
    ks.api(*_names)(_obj)

for _name, _value in (
        ("IndexedSlices", IndexedSlices), ("IndexedSlicesValue", IndexedSlicesValue),
        ("UnconnectedGradients", UnconnectedGradients),
        ("AggregationMethod", AggregationMethod),
        ("VariableAggregation", VariableAggregation),
        ("VariableSynchronization", VariableSynchronization),
        ("OpError", errors.OpError),
        ("VERSION", VERSION), ("GIT_VERSION", GIT_VERSION),
        ("COMPILER_VERSION", COMPILER_VERSION), ("CXX11_ABI_FLAG", CXX11_ABI_FLAG),
        ("MONOLITHIC_BUILD", MONOLITHIC_BUILD), ("GRAPH_DEF_VERSION", GRAPH_DEF_VERSION),
        ("GRAPH_DEF_VERSION_MIN_CONSUMER", GRAPH_DEF_VERSION_MIN_CONSUMER),
        ("GRAPH_DEF_VERSION_MIN_PRODUCER", GRAPH_DEF_VERSION_MIN_PRODUCER),
        ("QUANTIZED_DTYPES", _quantized_dtypes()), ("version", version), ("nest", nest)):
    ks.export(_name, _value)
