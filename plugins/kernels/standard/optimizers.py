"""TF1 optimizers (``tf.train.*Optimizer``), slot variables, the global step and
learning-rate decay, with TF 1.15's ``python/training`` semantics.

An optimizer's ``minimize`` is ``compute_gradients`` (``tf.gradients`` of the loss with
respect to the variables' references) followed by ``apply_gradients``: slot variables
(``<var>/<OptimizerName>``, colocated with their variable) are created once, the
hyper-parameters are converted to tensors in a name scope named after the optimizer,
one ``Apply*`` op per variable runs in ``update_<var>``, and the returned op groups
them (and increments ``global_step`` after them when one is given).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.framework.indexed_slices import (IndexedSlices,
                                             convert_to_tensor_or_indexed_slices)
from flowrt.gradients import gradients as _gradients
from flowrt.graph import (GraphKeys, Operation, Tensor, api_function, apply_op, colocate_with,
                          control_dependencies, convert_to_tensor, get_default_graph,
                          init_scope, name_scope)
from flowrt.op_registry import OpDef
from flowrt.variable_scope import get_variable, get_variable_scope, variable_scope
from flowrt.variables import SaveSliceInfo, Variable, trainable_variables

from . import training_ops
from ._common import ks
from .state_ops import _frozen
from .training_ops import _KERNEL_TYPES

__all__ = ["Optimizer", "GradientDescentOptimizer", "MomentumOptimizer", "AdamOptimizer",
           "AdagradOptimizer", "RMSPropOptimizer", "AdadeltaOptimizer",
           "get_global_step", "create_global_step", "get_or_create_global_step",
           "global_step", "assert_global_step", "exponential_decay", "piecewise_constant",
           "inverse_time_decay", "natural_exp_decay", "polynomial_decay"]




def _init_scope() -> Any:
    """TF's ``init_scope`` in graph mode: the name scope is kept, control dependencies
    and control-flow contexts are cleared."""
    return init_scope()


def _var_key(var: Any) -> tuple[Any, str]:
    return (var.op.graph, var.op.name)


# ---------------------------------------------------------------------------------------
# slots (TF's slot_creator)
# ---------------------------------------------------------------------------------------
def _create_slot_var(primary: Any, val: Any, scope: str, validate_shape: bool, shape: Any,
                     dtype: Any) -> Variable:
    vs = get_variable_scope()
    current_partitioner = vs.partitioner
    vs.set_partitioner(None)
    try:
        slot = get_variable(scope, initializer=val, trainable=False,
                            shape=shape if callable(val) else None, dtype=dtype,
                            validate_shape=validate_shape)
    finally:
        vs.set_partitioner(current_partitioner)
    info = primary._get_save_slice_info() if isinstance(primary, Variable) else None
    if info is not None:
        # a slot of a partition is the same slice of one slot variable, saved under
        # "<full name>/<slot>" as TF's slot_creator does (so TF's checkpoints restore);
        # a slot of lower rank keeps the leading dimensions, a scalar slot is whole
        real_slot_name = slot.name[len(primary.op.name + "/"):-2]
        n = slot.get_shape().ndims
        if n is None or n > 0:
            slot._set_save_slice_info(SaveSliceInfo(
                info.full_name + "/" + real_slot_name, info.full_shape[:n],
                info.var_offset[:n], info.var_shape[:n]))
    return slot


def create_slot(primary: Any, val: Any, name: str, colocate_with_primary: bool = True
                ) -> Variable:
    """A slot variable for ``primary`` initialised to the tensor ``val``, named
    ``<primary>/<name>`` (made unique)."""
    validate_shape = val.get_shape().is_fully_defined()
    with variable_scope(None, primary.op.name + "/" + name):
        if colocate_with_primary:
            with colocate_with(primary):
                return _create_slot_var(primary, val, "", validate_shape, None, None)
        return _create_slot_var(primary, val, "", validate_shape, None, None)


def create_slot_with_initializer(primary: Any, initializer: Any, shape: Any, dtype: Any,
                                 name: str, colocate_with_primary: bool = True) -> Variable:
    """A slot variable for ``primary`` of ``shape``/``dtype`` made by ``initializer``."""
    from flowrt.tensor_shape import as_shape

    shape = as_shape(shape)
    validate_shape = shape.is_fully_defined()
    with variable_scope(None, primary.op.name + "/" + name):
        if colocate_with_primary:
            with colocate_with(primary):
                return _create_slot_var(primary, initializer, "", validate_shape, shape,
                                        dtype)
        return _create_slot_var(primary, initializer, "", validate_shape, shape, dtype)


def create_zeros_slot(primary: Any, name: str, dtype: Any = None,
                      colocate_with_primary: bool = True) -> Variable:
    """A slot variable of zeros shaped like ``primary``."""
    if dtype is None:
        dtype = primary.dtype.base_dtype
    slot_shape = primary.get_shape()
    if slot_shape.is_fully_defined():
        return create_slot_with_initializer(primary, api_function("zeros_initializer")(), slot_shape,
                                            dtype, name, colocate_with_primary)
    if isinstance(primary, Variable):
        shape_t = api_function("shape")(primary.initialized_value())
    else:
        shape_t = api_function("shape")(primary)
    val = api_function("zeros")(shape_t, dtype=dtype)
    return create_slot(primary, val, name, colocate_with_primary)


# ---------------------------------------------------------------------------------------
# variable processors
# ---------------------------------------------------------------------------------------
class _RefVariableProcessor:
    def __init__(self, v: Variable):
        self._v = v

    def target(self) -> Tensor:
        return self._v._ref()

    def update_op(self, optimizer: "Optimizer", g: Any) -> Any:
        if isinstance(g, IndexedSlices):
            if self._v.constraint is not None:
                raise RuntimeError("Cannot use a constraint function on a sparse variable.")
            return optimizer._apply_sparse_duplicate_indices(g, self._v)
        update = optimizer._apply_dense(g, self._v)
        if self._v.constraint is not None:
            with control_dependencies([update]):
                # A fresh read after the update: flowrt's reads are snapshots, not aliases
                # of the variable's buffer, so the ``<var>/read`` snapshot would be stale.
                return self._v.assign(self._v.constraint(self._v.read_value()))
        return update


class _TensorProcessor:
    def __init__(self, v: Tensor):
        self._v = v

    def target(self) -> Tensor:
        return self._v

    def update_op(self, optimizer: "Optimizer", g: Tensor) -> Any:
        raise NotImplementedError("Trying to update a Tensor ", self._v)


def _get_processor(v: Any) -> Any:
    if isinstance(v, Variable):
        return _RefVariableProcessor(v)
    if isinstance(v, Tensor):
        return _TensorProcessor(v)
    raise NotImplementedError("Trying to optimize unsupported type ", v)


def _flatten(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple, set)):
        out: list[Any] = []
        for e in x:
            out.extend(_flatten(e))
        return out
    if isinstance(x, dict):
        return _flatten([x[k] for k in sorted(x)])
    return [x]


# ---------------------------------------------------------------------------------------
# the base class
# ---------------------------------------------------------------------------------------
class Optimizer:
    """Base class of TF1 optimizers (``tf.train.Optimizer``).

    Subclasses implement ``_create_slots(var_list)``, ``_prepare()``,
    ``_apply_dense(grad, var)`` and optionally ``_finish(update_ops, name)``.

    :param use_locking: pass ``use_locking`` to the update ops
    :param name: the name scope of the update ops and the suffix of slot names
    :raises ValueError: without a name
    """

    GATE_NONE = 0
    GATE_OP = 1
    GATE_GRAPH = 2

    def __init__(self, use_locking: bool, name: str):
        if not name:
            raise ValueError("Must specify the optimizer name")
        self._use_locking = use_locking
        self._name = name
        self._slots: dict[str, dict[tuple[Any, str], Variable]] = {}
        self._non_slot_dict: dict[tuple[str, Any], Variable] = {}

    def get_name(self) -> str:
        return self._name

    def minimize(self, loss: Any, global_step: Any = None, var_list: Any = None,
                 gate_gradients: int = GATE_OP, aggregation_method: Any = None,
                 colocate_gradients_with_ops: bool = False, name: str | None = None,
                 grad_loss: Any = None) -> Operation:
        """``compute_gradients`` then ``apply_gradients``: the op that takes one step.

        :raises ValueError: when no variable gets a gradient
        """
        grads_and_vars = self.compute_gradients(
            loss, var_list=var_list, gate_gradients=gate_gradients,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops, grad_loss=grad_loss)
        vars_with_grad = [v for g, v in grads_and_vars if g is not None]
        if not vars_with_grad:
            raise ValueError(
                "No gradients provided for any variable, check your graph for ops that do "
                f"not support gradients, between variables "
                f"{[str(v) for _, v in grads_and_vars]} and loss {loss}.")
        return self.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def compute_gradients(self, loss: Any, var_list: Any = None,
                          gate_gradients: int = GATE_OP, aggregation_method: Any = None,
                          colocate_gradients_with_ops: bool = False,
                          grad_loss: Any = None) -> list[tuple[Any, Any]]:
        """``[(gradient or None, variable)]`` of ``loss`` for ``var_list`` (default: the
        trainable variables).

        :raises ValueError: for a bad ``gate_gradients``, a non-float loss, or no
            variables
        """
        if callable(loss) and not isinstance(loss, Tensor):
            loss = loss()
        if gate_gradients not in (Optimizer.GATE_NONE, Optimizer.GATE_OP,
                                  Optimizer.GATE_GRAPH):
            raise ValueError("gate_gradients must be one of: Optimizer.GATE_NONE, "
                             f"Optimizer.GATE_OP, Optimizer.GATE_GRAPH.  Not {gate_gradients}")
        loss = convert_to_tensor(loss)
        self._assert_valid_dtypes([loss])
        if grad_loss is not None:
            self._assert_valid_dtypes([convert_to_tensor(grad_loss)])
        if var_list is None:
            var_list = (trainable_variables() +
                        get_default_graph().get_collection(
                            GraphKeys.TRAINABLE_RESOURCE_VARIABLES))
        else:
            var_list = _flatten(var_list)
        processors = [_get_processor(v) for v in var_list]
        if not var_list:
            raise ValueError("No variables to optimize.")
        var_refs = [p.target() for p in processors]
        grads = _gradients(
            loss, var_refs, grad_ys=grad_loss,
            gate_gradients=(gate_gradients == Optimizer.GATE_OP),
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops)
        if gate_gradients == Optimizer.GATE_GRAPH and any(g is not None for g in grads):
            grads = _gate_all(grads)
        grads_and_vars = list(zip(grads, var_list))
        self._assert_valid_dtypes([v for g, v in grads_and_vars if g is not None])
        return grads_and_vars

    def apply_gradients(self, grads_and_vars: Any, global_step: Any = None,
                        name: str | None = None) -> Operation:
        """Apply ``[(gradient, variable)]``: the op that updates every variable with a
        gradient (and then increments ``global_step`` when given).

        :raises ValueError: for an empty list or when every gradient is None
        :raises TypeError: for a gradient that is no tensor
        """
        grads_and_vars = tuple(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("No variables provided.")
        converted = []
        for g, v in grads_and_vars:
            if g is not None:
                try:
                    g = convert_to_tensor_or_indexed_slices(g)
                except (TypeError, ValueError):
                    raise TypeError("Gradient must be convertible to a Tensor or "
                                    f"IndexedSlices, or None: {g}") from None
                if not isinstance(g, (Tensor, IndexedSlices)):
                    raise TypeError(f"Gradient must be a Tensor, IndexedSlices, or None: {g}")
            converted.append((g, v, _get_processor(v)))
        var_list = [v for g, v, _ in converted if g is not None]
        if not var_list:
            raise ValueError("No gradients provided for any variable: "
                             f"{[str(v) for _, v, _ in converted]}.")
        with _init_scope():
            self._create_slots(var_list)
        update_ops = []
        with name_scope(name, self._name) as scope:
            self._prepare()
            for grad, var, processor in converted:
                if grad is None:
                    continue
                with name_scope("update_" + var.op.name), colocate_with(var):
                    update_ops.append(processor.update_op(self, grad))
            if global_step is None:
                apply_updates = self._finish(update_ops, scope)
            else:
                with control_dependencies([self._finish(update_ops, "update")]):
                    with colocate_with(global_step):
                        apply_updates = api_function("assign_add")(global_step, 1, name=scope)
            if isinstance(apply_updates, Tensor):
                apply_updates = apply_updates.op
            train_op = get_default_graph().get_collection_ref(GraphKeys.TRAIN_OP)
            if apply_updates not in train_op:
                train_op.append(apply_updates)
            return apply_updates

    # -- slots ------------------------------------------------------------------------
    def get_slot(self, var: Any, name: str) -> Variable | None:
        """The slot variable ``name`` of ``var`` (None if there is none)."""
        named = self._slots.get(name)
        if not named:
            return None
        return named.get(_var_key(var))

    def get_slot_names(self) -> list[str]:
        """The names of the slots this optimizer creates (sorted)."""
        return sorted(self._slots)

    def variables(self) -> list[Variable]:
        """The optimizer's variables (slots and non-slot ones) in the default graph,
        sorted by name."""
        g = get_default_graph()
        out = [v for v in self._non_slot_dict.values() if v.graph is g]
        for per_var in self._slots.values():
            out.extend(v for v in per_var.values() if v.graph is g)
        return sorted(out, key=lambda v: v.name)

    def _slot_dict(self, slot_name: str) -> dict[tuple[Any, str], Variable]:
        return self._slots.setdefault(slot_name, {})

    def _get_or_make_slot(self, var: Any, val: Any, slot_name: str, op_name: str
                          ) -> Variable:
        named = self._slot_dict(slot_name)
        key = _var_key(var)
        if key not in named:
            named[key] = create_slot(var, val, op_name)
        return named[key]

    def _get_or_make_slot_with_initializer(self, var: Any, initializer: Any, shape: Any,
                                           dtype: Any, slot_name: str, op_name: str
                                           ) -> Variable:
        named = self._slot_dict(slot_name)
        key = _var_key(var)
        if key not in named:
            named[key] = create_slot_with_initializer(var, initializer, shape, dtype, op_name)
        return named[key]

    def _zeros_slot(self, var: Any, slot_name: str, op_name: str) -> Variable:
        named = self._slot_dict(slot_name)
        key = _var_key(var)
        if key not in named:
            named[key] = create_zeros_slot(var, op_name)
        return named[key]

    def _create_non_slot_variable(self, initial_value: Any, name: str,
                                  colocate_with: Any) -> Variable:
        """A variable of the optimizer itself (Adam's ``beta1_power``), one per graph,
        colocated with ``colocate_with``."""
        graph = colocate_with.graph
        key = (name, graph)
        v = self._non_slot_dict.get(key)
        if v is None:
            with graph.colocate_with(colocate_with):
                v = Variable(initial_value, name=name, trainable=False)
            self._non_slot_dict[key] = v
        return v

    def _get_non_slot_variable(self, name: str, graph: Any = None) -> Variable | None:
        return self._non_slot_dict.get((name, graph))

    def _non_slot_variables(self) -> list[Variable]:
        return list(self._non_slot_dict.values())

    # -- hooks for subclasses ---------------------------------------------------------
    def _assert_valid_dtypes(self, tensors: Sequence[Any]) -> None:
        valid = self._valid_dtypes()
        for t in tensors:
            dtype = t.dtype.base_dtype
            if dtype not in valid:
                raise ValueError(f"Invalid type {dtype!r} for {t.name}, expected: "
                                 f"{[d for d in sorted(valid, key=lambda d: d.name)]}.")

    def _valid_dtypes(self) -> set[_dt.DType]:
        return {_dt.float16, _dt.bfloat16, _dt.float32, _dt.float64}

    def _create_slots(self, var_list: list[Any]) -> None:
        pass

    def _prepare(self) -> None:
        pass

    def _apply_dense(self, grad: Tensor, var: Any) -> Any:
        raise NotImplementedError()

    def _resource_apply_dense(self, grad: Tensor, handle: Any) -> Any:
        raise NotImplementedError()

    def _apply_sparse_duplicate_indices(self, grad: IndexedSlices, var: Any) -> Any:
        """Sum the rows of duplicate indices, then :meth:`_apply_sparse` (TF)."""
        values, indices = _deduplicate_indexed_slices(grad.values, grad.indices)
        return self._apply_sparse(IndexedSlices(values, indices, grad.dense_shape), var)

    def _apply_sparse(self, grad: Any, var: Any) -> Any:
        raise NotImplementedError()

    def _finish(self, update_ops: list[Any], name_scope: str) -> Operation:
        return api_function("group")(*update_ops, name=name_scope)

    @staticmethod
    def _call_if_callable(param: Any) -> Any:
        return param() if callable(param) else param


def _cast(t: Any, var: Any) -> Tensor:
    return api_function("cast")(t, var.dtype.base_dtype)


def _deduplicate_indexed_slices(values: Tensor, indices: Tensor) -> tuple[Tensor, Tensor]:
    """``(summed values, unique indices)``: rows of equal indices summed (TF)."""
    unique_indices, positions = api_function("unique")(indices)
    summed = api_function("math.unsorted_segment_sum")(
        values, positions, api_function("shape")(unique_indices)[0])
    return summed, unique_indices


def _gate_all(grads: list[Any]) -> list[Any]:
    """GATE_GRAPH: every gradient (an IndexedSlices' tensors too) computed before any is
    used (TF's ``control_flow_ops.tuple`` of the gradients)."""
    deps = []
    for g in grads:
        if isinstance(g, IndexedSlices):
            deps += [g.values.op, g.indices.op]
        elif g is not None:
            deps.append(g.op)
    identity = api_function("identity")
    out: list[Any] = []
    with name_scope(None, "tuple", deps), control_dependencies(deps):
        for g in grads:
            if isinstance(g, IndexedSlices):
                out.append(IndexedSlices(identity(g.values), identity(g.indices),
                                         g.dense_shape))
            else:
                out.append(None if g is None else identity(g))
    return out


# ---------------------------------------------------------------------------------------
# optimizers
# ---------------------------------------------------------------------------------------
class GradientDescentOptimizer(Optimizer):
    """``var -= learning_rate * grad`` (``tf.train.GradientDescentOptimizer``)."""

    def __init__(self, learning_rate: Any, use_locking: bool = False,
                 name: str = "GradientDescent"):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._learning_rate_tensor: Tensor | None = None

    def _prepare(self) -> None:
        lr = self._call_if_callable(self._learning_rate)
        self._learning_rate_tensor = convert_to_tensor(lr, name="learning_rate")

    def _apply_dense(self, grad: Tensor, var: Any) -> Any:
        return training_ops.apply_gradient_descent(
            var, _cast(self._learning_rate_tensor, var), grad,
            use_locking=self._use_locking).op

    def _apply_sparse_duplicate_indices(self, grad: IndexedSlices, var: Any) -> Any:
        # ScatterSub adds up duplicate rows itself
        delta = IndexedSlices(grad.values * _cast(self._learning_rate_tensor, var),
                              grad.indices, grad.dense_shape)
        return var.scatter_sub(delta, use_locking=self._use_locking)


class MomentumOptimizer(Optimizer):
    """``accum = momentum * accum + grad; var -= lr * accum`` (Nesterov optional)
    (``tf.train.MomentumOptimizer``); slot ``"momentum"``."""

    def __init__(self, learning_rate: Any, momentum: Any, use_locking: bool = False,
                 name: str = "Momentum", use_nesterov: bool = False):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._momentum = momentum
        self._use_nesterov = use_nesterov

    def _create_slots(self, var_list: list[Any]) -> None:
        for v in var_list:
            self._zeros_slot(v, "momentum", self._name)

    def _prepare(self) -> None:
        self._learning_rate_tensor = convert_to_tensor(
            self._call_if_callable(self._learning_rate), name="learning_rate")
        self._momentum_tensor = convert_to_tensor(self._call_if_callable(self._momentum),
                                                  name="momentum")

    def _apply_dense(self, grad: Tensor, var: Any) -> Any:
        mom = self.get_slot(var, "momentum")
        return training_ops.apply_momentum(
            var, mom, _cast(self._learning_rate_tensor, var), grad,
            _cast(self._momentum_tensor, var), use_locking=self._use_locking,
            use_nesterov=self._use_nesterov).op

    def _apply_sparse(self, grad: IndexedSlices, var: Any) -> Any:
        mom = self.get_slot(var, "momentum")
        return sparse_apply_momentum(
            var, mom, _cast(self._learning_rate_tensor, var), grad.values, grad.indices,
            _cast(self._momentum_tensor, var), use_locking=self._use_locking,
            use_nesterov=self._use_nesterov).op


class AdamOptimizer(Optimizer):
    """Adam (Kingma & Ba) (``tf.train.AdamOptimizer``); slots ``"m"`` and ``"v"``, and
    the non-slot variables ``beta1_power``/``beta2_power`` colocated with the first
    variable (by name), multiplied by beta1/beta2 after each step."""

    def __init__(self, learning_rate: Any = 0.001, beta1: Any = 0.9, beta2: Any = 0.999,
                 epsilon: Any = 1e-08, use_locking: bool = False, name: str = "Adam"):
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._beta1 = beta1
        self._beta2 = beta2
        self._epsilon = epsilon

    def _get_beta_accumulators(self) -> tuple[Variable, Variable]:
        g = get_default_graph()
        return (self._get_non_slot_variable("beta1_power", graph=g),
                self._get_non_slot_variable("beta2_power", graph=g))

    def _create_slots(self, var_list: list[Any]) -> None:
        first_var = min(var_list, key=lambda x: x.name)
        self._create_non_slot_variable(initial_value=self._beta1, name="beta1_power",
                                       colocate_with=first_var)
        self._create_non_slot_variable(initial_value=self._beta2, name="beta2_power",
                                       colocate_with=first_var)
        for v in var_list:
            self._zeros_slot(v, "m", self._name)
            self._zeros_slot(v, "v", self._name)

    def _prepare(self) -> None:
        self._lr_t = convert_to_tensor(self._call_if_callable(self._lr), name="learning_rate")
        self._beta1_t = convert_to_tensor(self._call_if_callable(self._beta1), name="beta1")
        self._beta2_t = convert_to_tensor(self._call_if_callable(self._beta2), name="beta2")
        self._epsilon_t = convert_to_tensor(self._call_if_callable(self._epsilon),
                                            name="epsilon")

    def _apply_dense(self, grad: Tensor, var: Any) -> Any:
        m = self.get_slot(var, "m")
        v = self.get_slot(var, "v")
        beta1_power, beta2_power = self._get_beta_accumulators()
        return training_ops.apply_adam(
            var, m, v, _cast(beta1_power, var), _cast(beta2_power, var),
            _cast(self._lr_t, var), _cast(self._beta1_t, var), _cast(self._beta2_t, var),
            _cast(self._epsilon_t, var), grad, use_locking=self._use_locking).op

    def _apply_sparse(self, grad: IndexedSlices, var: Any) -> Any:
        """TF1's sparse Adam: m and v decay in full, then the rows of the gradient are
        added with ``ScatterAdd``, and the whole variable is updated."""
        beta1_power, beta2_power = self._get_beta_accumulators()
        beta1_power, beta2_power = _cast(beta1_power, var), _cast(beta2_power, var)
        lr_t, beta1_t = _cast(self._lr_t, var), _cast(self._beta1_t, var)
        beta2_t, epsilon_t = _cast(self._beta2_t, var), _cast(self._epsilon_t, var)
        sqrt, scatter_add = api_function("sqrt"), api_function("scatter_add")
        lr = lr_t * sqrt(1 - beta2_power) / (1 - beta1_power)
        values, indices = grad.values, grad.indices
        m = self.get_slot(var, "m")
        m_scaled = values * (1 - beta1_t)
        m_t = m.assign(m * beta1_t, use_locking=self._use_locking)
        with control_dependencies([m_t]):
            m_t = scatter_add(m, indices, m_scaled, use_locking=self._use_locking)
        v = self.get_slot(var, "v")
        v_scaled = (values * values) * (1 - beta2_t)
        v_t = v.assign(v * beta2_t, use_locking=self._use_locking)
        with control_dependencies([v_t]):
            v_t = scatter_add(v, indices, v_scaled, use_locking=self._use_locking)
        var_update = var.assign_sub(lr * m_t / (sqrt(v_t) + epsilon_t),
                                    use_locking=self._use_locking)
        return api_function("group")(*[var_update, m_t, v_t])

    def _finish(self, update_ops: list[Any], name_scope: str) -> Operation:
        with control_dependencies(update_ops):
            beta1_power, beta2_power = self._get_beta_accumulators()
            with colocate_with(beta1_power):
                update_beta1 = beta1_power.assign(beta1_power * self._beta1_t,
                                                  use_locking=self._use_locking)
                update_beta2 = beta2_power.assign(beta2_power * self._beta2_t,
                                                  use_locking=self._use_locking)
        return api_function("group")(*(update_ops + [update_beta1, update_beta2]), name=name_scope)


class AdagradOptimizer(Optimizer):
    """Adagrad (``tf.train.AdagradOptimizer``); slot ``"accumulator"`` starting at
    ``initial_accumulator_value``.

    :raises ValueError: for a non-positive ``initial_accumulator_value``
    """

    def __init__(self, learning_rate: Any, initial_accumulator_value: float = 0.1,
                 use_locking: bool = False, name: str = "Adagrad"):
        if initial_accumulator_value <= 0.0:
            raise ValueError("initial_accumulator_value must be positive: "
                             f"{initial_accumulator_value}")
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_accumulator_value = initial_accumulator_value

    def _create_slots(self, var_list: list[Any]) -> None:
        for v in var_list:
            dtype = v.dtype.base_dtype
            if v.get_shape().is_fully_defined():
                init: Any = api_function("constant_initializer")(self._initial_accumulator_value,
                                                         dtype=dtype)
            else:
                with colocate_with(v):
                    init = api_function("cast")(api_function("fill")(api_function("shape")(v),
                                                     self._initial_accumulator_value), dtype)
            self._get_or_make_slot_with_initializer(v, init, v.get_shape(), dtype,
                                                    "accumulator", self._name)

    def _prepare(self) -> None:
        self._learning_rate_tensor = convert_to_tensor(
            self._call_if_callable(self._learning_rate), name="learning_rate")

    def _apply_dense(self, grad: Tensor, var: Any) -> Any:
        acc = self.get_slot(var, "accumulator")
        return training_ops.apply_adagrad(var, acc, _cast(self._learning_rate_tensor, var),
                                          grad, use_locking=self._use_locking)

    def _apply_sparse(self, grad: IndexedSlices, var: Any) -> Any:
        acc = self.get_slot(var, "accumulator")
        return sparse_apply_adagrad(var, acc, _cast(self._learning_rate_tensor, var),
                                    grad.values, grad.indices,
                                    use_locking=self._use_locking)


class RMSPropOptimizer(Optimizer):
    """RMSProp (``tf.train.RMSPropOptimizer``); slots ``"rms"`` (starting at ones),
    ``"momentum"`` and, when ``centered``, ``"mg"``."""

    def __init__(self, learning_rate: Any, decay: Any = 0.9, momentum: Any = 0.0,
                 epsilon: Any = 1e-10, use_locking: bool = False, centered: bool = False,
                 name: str = "RMSProp"):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._decay = decay
        self._momentum = momentum
        self._epsilon = epsilon
        self._centered = centered

    def _create_slots(self, var_list: list[Any]) -> None:
        for v in var_list:
            if v.get_shape().is_fully_defined():
                init_rms: Any = api_function("ones_initializer")(dtype=v.dtype.base_dtype)
            else:
                init_rms = api_function("ones_like")(v)
            self._get_or_make_slot_with_initializer(v, init_rms, v.get_shape(),
                                                    v.dtype.base_dtype, "rms", self._name)
            if self._centered:
                self._zeros_slot(v, "mg", self._name)
            self._zeros_slot(v, "momentum", self._name)

    def _prepare(self) -> None:
        c = self._call_if_callable
        self._learning_rate_tensor = convert_to_tensor(c(self._learning_rate),
                                                       name="learning_rate")
        self._decay_tensor = convert_to_tensor(c(self._decay), name="decay")
        self._momentum_tensor = convert_to_tensor(c(self._momentum), name="momentum")
        self._epsilon_tensor = convert_to_tensor(c(self._epsilon), name="epsilon")

    def _apply_dense(self, grad: Tensor, var: Any) -> Any:
        rms = self.get_slot(var, "rms")
        mom = self.get_slot(var, "momentum")
        args = (_cast(self._learning_rate_tensor, var), _cast(self._decay_tensor, var),
                _cast(self._momentum_tensor, var), _cast(self._epsilon_tensor, var), grad)
        if self._centered:
            mg = self.get_slot(var, "mg")
            return training_ops.apply_centered_rms_prop(
                var, mg, rms, mom, *args, use_locking=self._use_locking).op
        return training_ops.apply_rms_prop(var, rms, mom, *args,
                                           use_locking=self._use_locking).op

    def _apply_sparse(self, grad: IndexedSlices, var: Any) -> Any:
        rms = self.get_slot(var, "rms")
        mom = self.get_slot(var, "momentum")
        args = (_cast(self._learning_rate_tensor, var), _cast(self._decay_tensor, var),
                _cast(self._momentum_tensor, var), _cast(self._epsilon_tensor, var),
                grad.values, grad.indices)
        if self._centered:
            mg = self.get_slot(var, "mg")
            return sparse_apply_centered_rms_prop(var, mg, rms, mom, *args,
                                                  use_locking=self._use_locking)
        return sparse_apply_rms_prop(var, rms, mom, *args, use_locking=self._use_locking)


class AdadeltaOptimizer(Optimizer):
    """Adadelta (``tf.train.AdadeltaOptimizer``); slots ``"accum"`` and
    ``"accum_update"``."""

    def __init__(self, learning_rate: Any = 0.001, rho: Any = 0.95, epsilon: Any = 1e-8,
                 use_locking: bool = False, name: str = "Adadelta"):
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._rho = rho
        self._epsilon = epsilon

    def _create_slots(self, var_list: list[Any]) -> None:
        for v in var_list:
            self._zeros_slot(v, "accum", self._name)
            self._zeros_slot(v, "accum_update", self._name)

    def _prepare(self) -> None:
        c = self._call_if_callable
        self._lr_t = convert_to_tensor(c(self._lr), name="lr")
        self._rho_t = convert_to_tensor(c(self._rho), name="rho")
        self._epsilon_t = convert_to_tensor(c(self._epsilon), name="epsilon")

    def _apply_dense(self, grad: Tensor, var: Any) -> Any:
        return training_ops.apply_adadelta(
            var, self.get_slot(var, "accum"), self.get_slot(var, "accum_update"),
            _cast(self._lr_t, var), _cast(self._rho_t, var), _cast(self._epsilon_t, var),
            grad, use_locking=self._use_locking)

    def _apply_sparse(self, grad: IndexedSlices, var: Any) -> Any:
        return sparse_apply_adadelta(
            var, self.get_slot(var, "accum"), self.get_slot(var, "accum_update"),
            _cast(self._lr_t, var), _cast(self._rho_t, var), _cast(self._epsilon_t, var),
            grad.values, grad.indices, use_locking=self._use_locking)


# ---------------------------------------------------------------------------------------
# sparse updates (TF's SparseApply* ops): only the rows named by ``indices`` change
# ---------------------------------------------------------------------------------------
def _sparse_shape_fn(n_refs: int, scalars: Sequence[int], grad_i: int, ind_i: int
                     ) -> Any:
    """Shape function of a SparseApply op: the slots have the variable's shape, the
    hyper-parameters are scalars, ``grad`` is ``[N] + var.shape[1:]`` and ``indices``
    is ``[N]``; the output has the variable's shape."""

    def shape_fn(op: Any) -> list[Any]:
        shapes = [t.shape for t in op.inputs]
        where = f" for '{op.name}' (op: '{op.type}')"
        merged = shapes[0]
        for i in range(1, n_refs):
            if not merged.is_compatible_with(shapes[i]):
                raise ValueError(f"Shapes {shapes[0]} and {shapes[i]} are incompatible"
                                 f"{where}")
            merged = merged.merge_with(shapes[i])
        for i in scalars:
            if shapes[i].ndims not in (None, 0):
                raise ValueError(f"Shape must be rank 0 but is rank {shapes[i].ndims}{where}")
        grad, indices = shapes[grad_i], shapes[ind_i]
        if indices.ndims not in (None, 1):
            raise ValueError(f"Shape must be rank 1 but is rank {indices.ndims}{where}")
        if grad.ndims is not None and merged.ndims is not None:
            if grad.ndims != merged.ndims or not grad[1:].is_compatible_with(merged[1:]):
                raise ValueError(f"Dimensions of var {merged} and grad {grad} do not match"
                                 f"{where}")
        if grad.ndims and indices.ndims and \
                not grad[:1].is_compatible_with(indices[:1]):
            raise ValueError(f"Dimension 0 of grad {grad} and indices {indices} differ"
                             f"{where}")
        return [merged]

    return shape_fn


#: each SparseApply op's inputs in TF's order, and how many are references
_SPARSE_OPS = {
    "SparseApplyMomentum": (["var", "accum", "lr", "grad", "indices", "momentum"], 2),
    "SparseApplyAdagrad": (["var", "accum", "lr", "grad", "indices"], 2),
    "SparseApplyRMSProp": (["var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad",
                            "indices"], 3),
    "SparseApplyCenteredRMSProp": (["var", "mg", "ms", "mom", "lr", "rho", "momentum",
                                    "epsilon", "grad", "indices"], 4),
    "SparseApplyAdadelta": (["var", "accum", "accum_update", "lr", "rho", "epsilon", "grad",
                             "indices"], 3),
}


def _def_sparse(name: str, extra: Sequence[str] = ()) -> None:
    order, n_refs = _SPARSE_OPS[name]
    specs = [f"{nm}: Ref(T)" if i < n_refs else
             ("indices: Tindices" if nm == "indices" else f"{nm}: T")
             for i, nm in enumerate(order)]
    scalars = [i for i, nm in enumerate(order) if i >= n_refs and nm not in ("grad",
                                                                                "indices")]
    ks.op(OpDef(name, inputs=specs, outputs=["out: Ref(T)"],
                attrs=["T: numbertype", "Tindices: {int32, int64}",
                       "use_locking: bool = false", *extra],
                shape_fn=_sparse_shape_fn(n_refs, scalars, order.index("grad"),
                                          order.index("indices")),
                doc=f"The sparse form of {name[len('Sparse'):]}: only rows at indices change."))


_def_sparse("SparseApplyMomentum", ["use_nesterov: bool = false"])
_def_sparse("SparseApplyAdagrad", ["update_slots: bool = true"])
_def_sparse("SparseApplyRMSProp")
_def_sparse("SparseApplyCenteredRMSProp")
_def_sparse("SparseApplyAdadelta")
ks.not_differentiable("SparseApplyMomentum", "SparseApplyAdagrad", "SparseApplyRMSProp",
                      "SparseApplyCenteredRMSProp", "SparseApplyAdadelta")


def _make_sparse_apply(ctx: Any, update: Any) -> Any:
    """The compute function of a SparseApply kernel: check the inputs, then apply
    ``update(*slot_rows, *scalars, grad_rows) -> new slot rows`` to the named rows (row by
    row, in order, when an index repeats), holding every reference's lock.

    :raises errors.InvalidArgumentError: for mismatched shapes or an index out of range
    """
    dt = ctx.output_dtypes[0]
    if dt not in _KERNEL_TYPES or ctx.xp is not np:
        raise errors.InvalidArgumentError(
            None, None, f"No OpKernel was registered to support Op '{ctx.op_type}' used by "
            f"node {ctx.node_name} with these attrs: [T=DT_{dt.name.upper()}]")
    order, n_refs = _SPARSE_OPS[ctx.op_type]
    slot_names = order[:n_refs]
    scalar_pos = [i for i, nm in enumerate(order) if i >= n_refs and nm not in ("grad",
                                                                                  "indices")]
    grad_pos, ind_pos = order.index("grad"), order.index("indices")
    npdt = np.dtype(dt.np)

    def run(refs: Sequence[Any], scalars: Sequence[Any], grad: Any, indices: Any) -> Any:
        vals = [np.array(r.read(), dtype=npdt) for r in refs]
        shape = vals[0].shape
        for nm, v in zip(slot_names[1:], vals[1:]):
            if v.shape != shape:
                raise errors.InvalidArgumentError(
                    None, None, f"var and {nm} do not have the same shape"
                    f"{list(shape)} {list(v.shape)}")
        for i, sc in enumerate(scalars):
            if np.ndim(sc) != 0:
                raise errors.InvalidArgumentError(None, None, f"scalar argument {i} is not a "
                                                  f"scalar: {list(np.shape(sc))}")
        grad, indices = np.asarray(grad), np.asarray(indices)
        if indices.ndim != 1:
            raise errors.InvalidArgumentError(None, None, "indices must be one-dimensional")
        if len(shape) < 1 or grad.shape[1:] != shape[1:] or grad.shape[:1] != indices.shape:
            raise errors.InvalidArgumentError(
                None, None, f"var and grad do not have the same shape{list(shape)} "
                f"{list(grad.shape)}")
        bad = np.nonzero((indices < 0) | (indices >= shape[0]))[0]
        if bad.size:
            raise errors.InvalidArgumentError(
                None, None, f"Index {int(indices[bad[0]])} at offset {int(bad[0])} in "
                "indices is out of range")
        scalars = [npdt.type(sc) for sc in scalars]
        training_ops.update_rows(vals, indices, grad.astype(npdt),
                                 lambda rows, g: update(*rows, *scalars, g))
        for r, v in zip(refs, vals):
            r.value = _frozen(v)
        return refs[0]

    def compute(*inputs: Any) -> Any:
        refs = inputs[:n_refs]
        with training_ops.locked(refs):
            return run(refs, [inputs[i] for i in scalar_pos], inputs[grad_pos],
                       inputs[ind_pos])

    return compute


@ks.kernel("SparseApplyMomentum", device_type="CPU")
def _sparse_momentum_kernel(ctx: Any) -> Any:
    nesterov = bool(ctx.attrs.get("use_nesterov", False))

    def update(var: Any, accum: Any, lr: Any, momentum: Any, grad: Any) -> tuple:
        accum = accum * momentum + grad
        if nesterov:
            return var - (grad * lr + accum * momentum * lr), accum
        return var - accum * lr, accum

    return _make_sparse_apply(ctx, update)


@ks.kernel("SparseApplyAdagrad", device_type="CPU")
def _sparse_adagrad_kernel(ctx: Any) -> Any:
    update_slots = bool(ctx.attrs.get("update_slots", True))

    def update(var: Any, accum: Any, lr: Any, grad: Any) -> tuple:
        if update_slots:
            accum = accum + grad * grad
        return var - lr * grad / np.sqrt(accum), accum

    return _make_sparse_apply(ctx, update)


@ks.kernel("SparseApplyRMSProp", device_type="CPU")
def _sparse_rmsprop_kernel(ctx: Any) -> Any:
    def update(var: Any, ms: Any, mom: Any, lr: Any, rho: Any, momentum: Any, eps: Any,
               grad: Any) -> tuple:
        ms = ms * rho + grad * grad * (1 - rho)
        mom = mom * momentum + (1 / np.sqrt(ms + eps)) * lr * grad
        return var - mom, ms, mom

    return _make_sparse_apply(ctx, update)


@ks.kernel("SparseApplyCenteredRMSProp", device_type="CPU")
def _sparse_centered_rmsprop_kernel(ctx: Any) -> Any:
    def update(var: Any, mg: Any, ms: Any, mom: Any, lr: Any, rho: Any, momentum: Any,
               eps: Any, grad: Any) -> tuple:
        ms = ms * rho + grad * grad * (1 - rho)
        mg = mg * rho + grad * (1 - rho)
        denom = (ms + eps) - mg * mg
        mom = mom * momentum + (1 / np.sqrt(denom)) * lr * grad
        return var - mom, mg, ms, mom

    return _make_sparse_apply(ctx, update)


@ks.kernel("SparseApplyAdadelta", device_type="CPU")
def _sparse_adadelta_kernel(ctx: Any) -> Any:
    def update(var: Any, accum: Any, accum_update: Any, lr: Any, rho: Any, eps: Any,
               grad: Any) -> tuple:
        accum = accum * rho + grad * grad * (1 - rho)
        upd = np.sqrt(accum_update + eps) * (1 / np.sqrt(accum + eps)) * grad
        accum_update = accum_update * rho + upd * upd * (1 - rho)
        return var - upd * lr, accum, accum_update

    return _make_sparse_apply(ctx, update)


def _ref(v: Any) -> Any:
    return v._ref() if isinstance(v, Variable) else v


def sparse_apply_momentum(var: Any, accum: Any, lr: Any, grad: Any, indices: Any,
                          momentum: Any, use_locking: bool = False,
                          use_nesterov: bool = False, name: str | None = None) -> Tensor:
    """The momentum update of the rows ``indices`` of ``var`` and ``accum``."""
    return apply_op("SparseApplyMomentum", name=name, var=_ref(var), accum=_ref(accum),
                    lr=lr, momentum=momentum, grad=grad, indices=indices,
                    use_locking=use_locking, use_nesterov=use_nesterov)


def sparse_apply_adagrad(var: Any, accum: Any, lr: Any, grad: Any, indices: Any,
                         use_locking: bool = False, update_slots: bool = True,
                         name: str | None = None) -> Tensor:
    """The Adagrad update of the rows ``indices`` of ``var`` and ``accum``."""
    return apply_op("SparseApplyAdagrad", name=name, var=_ref(var), accum=_ref(accum),
                    lr=lr, grad=grad, indices=indices, use_locking=use_locking,
                    update_slots=update_slots)


def sparse_apply_rms_prop(var: Any, ms: Any, mom: Any, lr: Any, rho: Any, momentum: Any,
                          epsilon: Any, grad: Any, indices: Any, use_locking: bool = False,
                          name: str | None = None) -> Tensor:
    """The RMSProp update of the rows ``indices`` of ``var``, ``ms`` and ``mom``."""
    return apply_op("SparseApplyRMSProp", name=name, var=_ref(var), ms=_ref(ms),
                    mom=_ref(mom), lr=lr, rho=rho, momentum=momentum, epsilon=epsilon,
                    grad=grad, indices=indices, use_locking=use_locking)


def sparse_apply_centered_rms_prop(var: Any, mg: Any, ms: Any, mom: Any, lr: Any, rho: Any,
                                   momentum: Any, epsilon: Any, grad: Any, indices: Any,
                                   use_locking: bool = False,
                                   name: str | None = None) -> Tensor:
    """The centered RMSProp update of the rows ``indices``."""
    return apply_op("SparseApplyCenteredRMSProp", name=name, var=_ref(var), mg=_ref(mg),
                    ms=_ref(ms), mom=_ref(mom), lr=lr, rho=rho, momentum=momentum,
                    epsilon=epsilon, grad=grad, indices=indices, use_locking=use_locking)


def sparse_apply_adadelta(var: Any, accum: Any, accum_update: Any, lr: Any, rho: Any,
                          epsilon: Any, grad: Any, indices: Any, use_locking: bool = False,
                          name: str | None = None) -> Tensor:
    """The Adadelta update of the rows ``indices`` of ``var`` and its slots."""
    return apply_op("SparseApplyAdadelta", name=name, var=_ref(var), accum=_ref(accum),
                    accum_update=_ref(accum_update), lr=lr, rho=rho, epsilon=epsilon,
                    grad=grad, indices=indices, use_locking=use_locking)


# ---------------------------------------------------------------------------------------
# global step (TF's training_util)
# ---------------------------------------------------------------------------------------
def assert_global_step(global_step_tensor: Any) -> None:
    """Check that ``global_step_tensor`` is an integer scalar Variable or Tensor.

    :raises TypeError: otherwise
    """
    if not isinstance(global_step_tensor, (Variable, Tensor)):
        raise TypeError(f'Existing "global_step" must be a Variable or Tensor: '
                        f'{global_step_tensor}.')
    if not global_step_tensor.dtype.base_dtype.is_integer:
        raise TypeError(f'Existing "global_step" does not have integer type: '
                        f'{global_step_tensor.dtype}')
    shape = global_step_tensor.get_shape()
    if shape.ndims != 0 and shape.is_fully_defined():
        raise TypeError(f'Existing "global_step" is not scalar: {shape}')


def get_global_step(graph: Any = None) -> Any:
    """The global step variable of ``graph`` (collection ``GLOBAL_STEP``, else the
    tensor ``global_step:0``), or None."""
    graph = graph or get_default_graph()
    tensors = graph.get_collection(GraphKeys.GLOBAL_STEP)
    if len(tensors) == 1:
        step = tensors[0]
    elif not tensors:
        try:
            step = graph.get_tensor_by_name("global_step:0")
        except KeyError:
            return None
    else:
        return None  # TF logs "Multiple tensors in global_step collection."
    assert_global_step(step)
    return step


def create_global_step(graph: Any = None) -> Variable:
    """Create the int64 scalar ``global_step`` variable (zeros, not trainable, in
    ``GLOBAL_VARIABLES`` and ``GLOBAL_STEP``).

    :raises ValueError: when the graph already has one
    """
    graph = graph or get_default_graph()
    if get_global_step(graph) is not None:
        raise ValueError('"global_step" already exists.')
    with graph.as_default() as g, g.name_scope(None):
        return get_variable(GraphKeys.GLOBAL_STEP, shape=[], dtype=_dt.int64,
                            initializer=api_function("zeros_initializer")(), trainable=False,
                            collections=[GraphKeys.GLOBAL_VARIABLES, GraphKeys.GLOBAL_STEP])


def get_or_create_global_step(graph: Any = None) -> Any:
    """The graph's global step, created if missing."""
    graph = graph or get_default_graph()
    step = get_global_step(graph)
    if step is None:
        step = create_global_step(graph)
    return step


def global_step(sess: Any, global_step_tensor: Any) -> int:
    """The value of the global step as a Python int."""
    return int(sess.run(global_step_tensor))


# ---------------------------------------------------------------------------------------
# learning-rate decay (TF1 functions: they return the decayed rate as a tensor)
# ---------------------------------------------------------------------------------------
def _decay_inputs(learning_rate: Any, global_step: Any, decay_steps: Any, fn: str
                  ) -> tuple[Tensor, Any, Tensor, Tensor]:
    if global_step is None:
        raise ValueError(f"global_step is required for {fn}.")
    lr = convert_to_tensor(learning_rate, name="learning_rate")
    dtype = lr.dtype
    cast = api_function("cast")
    return lr, dtype, cast(global_step, dtype), cast(decay_steps, dtype)


def exponential_decay(learning_rate: Any, global_step: Any, decay_steps: Any,
                      decay_rate: Any, staircase: bool = False,
                      name: str | None = None) -> Tensor:
    """``learning_rate * decay_rate ^ (global_step / decay_steps)`` (the exponent
    floored when ``staircase``)."""
    with name_scope(name, "ExponentialDecay",
                    [learning_rate, global_step, decay_steps, decay_rate]) as scope:
        lr, dtype, step, steps = _decay_inputs(learning_rate, global_step, decay_steps,
                                               "exponential_decay")
        rate = api_function("cast")(decay_rate, dtype)
        p = step / steps
        if staircase:
            p = api_function("floor")(p)
        return api_function("multiply")(lr, api_function("pow")(rate, p), name=scope)


def inverse_time_decay(learning_rate: Any, global_step: Any, decay_steps: Any,
                       decay_rate: Any, staircase: bool = False,
                       name: str | None = None) -> Tensor:
    """``learning_rate / (1 + decay_rate * global_step / decay_steps)``."""
    with name_scope(name, "InverseTimeDecay",
                    [learning_rate, global_step, decay_rate]) as scope:
        lr, dtype, step, steps = _decay_inputs(learning_rate, global_step, decay_steps,
                                               "inverse_time_decay")
        rate = api_function("cast")(decay_rate, dtype)
        p = step / steps
        if staircase:
            p = api_function("floor")(p)
        denom = api_function("add")(api_function("cast")(1, dtype), api_function("multiply")(rate, p))
        return api_function("truediv")(lr, denom, name=scope)


def natural_exp_decay(learning_rate: Any, global_step: Any, decay_steps: Any,
                      decay_rate: Any, staircase: bool = False,
                      name: str | None = None) -> Tensor:
    """``learning_rate * exp(-decay_rate * global_step / decay_steps)``."""
    with name_scope(name, "NaturalExpDecay",
                    [learning_rate, global_step, decay_rate]) as scope:
        lr, dtype, step, steps = _decay_inputs(learning_rate, global_step, decay_steps,
                                               "natural_exp_decay")
        rate = api_function("cast")(decay_rate, dtype)
        p = step / steps
        if staircase:
            p = api_function("floor")(p)
        exponent = api_function("exp")(api_function("multiply")(api_function("negative")(rate), p))
        return api_function("multiply")(lr, exponent, name=scope)


def polynomial_decay(learning_rate: Any, global_step: Any, decay_steps: Any,
                     end_learning_rate: Any = 0.0001, power: Any = 1.0, cycle: bool = False,
                     name: str | None = None) -> Tensor:
    """``(lr - end) * (1 - step / decay_steps) ^ power + end``, the step clipped to
    ``decay_steps`` (or ``decay_steps`` stretched to the next multiple when ``cycle``)."""
    with name_scope(name, "PolynomialDecay",
                    [learning_rate, global_step, decay_steps, end_learning_rate, power]
                    ) as scope:
        lr, dtype, step, steps = _decay_inputs(learning_rate, global_step, decay_steps,
                                               "polynomial_decay")
        cast = api_function("cast")
        end_lr = cast(end_learning_rate, dtype)
        pw = cast(power, dtype)
        if cycle:
            one = cast(1.0, dtype)
            mult = api_function("where")(api_function("equal")(step, cast(0, dtype)), one,
                                 api_function("ceil")(step / steps))
            steps = api_function("multiply")(steps, mult)
        else:
            step = api_function("minimum")(step, steps)
        p = api_function("truediv")(step, steps)
        return api_function("add")(api_function("multiply")(lr - end_lr, api_function("pow")(1 - p, pw)), end_lr,
                           name=scope)


def piecewise_constant(x: Any, boundaries: Sequence[Any], values: Sequence[Any],
                       name: str | None = None) -> Tensor:
    """``values[0]`` while ``x <= boundaries[0]``, ``values[i]`` while
    ``boundaries[i-1] < x <= boundaries[i]``, ``values[-1]`` beyond the last boundary.

    :raises ValueError: when ``len(values) != len(boundaries) + 1`` or the dtypes of
        boundaries/values do not agree
    """
    if len(boundaries) != len(values) - 1:
        raise ValueError("The length of boundaries should be 1 less than the length of "
                         "values")
    with name_scope(name, "PiecewiseConstant", [x, boundaries, values]) as scope:
        x_t = convert_to_tensor(x)
        b = [convert_to_tensor(v) for v in boundaries]
        vals = [convert_to_tensor(v) for v in values]
        cast = api_function("cast")
        for i, bi in enumerate(b):
            if bi.dtype.base_dtype is not x_t.dtype.base_dtype:
                if bi.dtype.base_dtype is _dt.int32 and x_t.dtype.base_dtype is _dt.int64:
                    b[i] = cast(bi, _dt.int64)  # TF accepts Python int boundaries for int64
                else:
                    raise ValueError(f"Boundaries ({bi.dtype.base_dtype!r}) must have the "
                                     f"same dtype as x ({x_t.dtype.base_dtype!r}).")
        for v in vals[1:]:
            if v.dtype.base_dtype is not vals[0].dtype.base_dtype:
                raise ValueError(f"Values must have elements all with the same dtype "
                                 f"({vals[0].dtype.base_dtype!r} vs {v.dtype.base_dtype!r}).")
        where, less_equal = api_function("where"), api_function("less_equal")
        out = vals[-1]
        for i in reversed(range(len(b))):
            out = where(less_equal(x_t, b[i]), vals[i], out,
                        name=scope if i == 0 else None)
        return out


for _name, _obj in (
        ("train.Optimizer", Optimizer),
        ("train.GradientDescentOptimizer", GradientDescentOptimizer),
        ("train.MomentumOptimizer", MomentumOptimizer),
        ("train.AdamOptimizer", AdamOptimizer),
        ("train.AdagradOptimizer", AdagradOptimizer),
        ("train.RMSPropOptimizer", RMSPropOptimizer),
        ("train.AdadeltaOptimizer", AdadeltaOptimizer),
        ("train.get_global_step", get_global_step),
        ("train.create_global_step", create_global_step),
        ("train.get_or_create_global_step", get_or_create_global_step),
        ("train.global_step", global_step),
        ("train.assert_global_step", assert_global_step),
        ("train.exponential_decay", exponential_decay),
        ("train.inverse_time_decay", inverse_time_decay),
        ("train.natural_exp_decay", natural_exp_decay),
        ("train.polynomial_decay", polynomial_decay),
        ("train.piecewise_constant", piecewise_constant)):
    if _name not in ks.api_names:
        ks.export(_name, _obj)

