"""``tf.train.ExponentialMovingAverage`` and ``assign_moving_average``: TF 1.15's
``python/training/moving_averages.py``.

Each averaged variable gets a shadow variable, a slot named ``<var>/<ema name>``
(``w/ExponentialMovingAverage``), colocated with it, not trainable, in
``GLOBAL_VARIABLES`` and (for the averaged ``tf.Variable`` itself)
``MOVING_AVERAGE_VARIABLES``. :meth:`ExponentialMovingAverage.apply` returns the op that
moves every shadow towards its variable, ``shadow -= (1 - decay) * (shadow - var)``
(with ``num_updates``: ``decay = min(decay, (1 + n) / (10 + n))``).
:meth:`ExponentialMovingAverage.variables_to_restore` maps the shadows' checkpoint names
to the model's variables, so that a ``Saver`` built from it restores the averages into
the model (TF1's usual evaluation pattern).
"""
from __future__ import annotations

from typing import Any, Sequence

from ..base import dtypes as _dt
from ..framework.graph import (GraphKeys, Tensor, add_to_collection, api_function,
                               colocate_with, control_dependencies, convert_to_tensor,
                               get_collection, get_default_graph, init_scope, name_scope)
from ..plugin.runtime import require_api
from ..training.variable_scope import get_variable, get_variable_scope, variable_scope
from ..training.variables import Variable, global_variables, trainable_variables

__all__ = ["ExponentialMovingAverage", "assign_moving_average", "weighted_moving_average"]

REQUIRED_API_NAMES = frozenset({"cast", "minimum", "group", "pow", "shape", "zeros",
                                "zeros_initializer", "truediv", "assign", "assign_sub"})
require_api(REQUIRED_API_NAMES)

_FLOATS = (_dt.bfloat16, _dt.float16, _dt.float32, _dt.float64)


def _create_slot(primary: Any, value: Any, name: str, colocate: bool) -> Variable:
    """A non-trainable variable ``<primary>/<name>`` (made unique) initialised to
    ``value``, colocated with ``primary`` when asked (TF's ``slot_creator``)."""
    vs = get_variable_scope()
    partitioner = vs.partitioner
    vs.set_partitioner(None)
    try:
        with variable_scope(None, primary.op.name + "/" + name):
            shape_known = value.get_shape().is_fully_defined()
            if colocate:
                with colocate_with(primary):
                    return get_variable("", initializer=value, trainable=False,
                                        validate_shape=shape_known)
            return get_variable("", initializer=value, trainable=False,
                                validate_shape=shape_known)
    finally:
        vs.set_partitioner(partitioner)


def _zeros_like_slot_value(primary: Any) -> Tensor:
    dtype = primary.dtype.base_dtype
    shape = primary.get_shape()
    if shape.is_fully_defined():
        return api_function("zeros")(shape.as_list(), dtype=dtype)
    return api_function("zeros")(api_function("shape")(primary), dtype=dtype)


def _zero_debias(unbiased_var: Any, value: Any, decay: Tensor) -> Any:
    """The zero-debiased update: a ``biased`` EMA and a ``local_step`` counter next to
    ``unbiased_var`` (in its variable scope), and ``unbiased = biased / (1 -
    (1 - decay) ^ local_step)``."""
    with variable_scope(unbiased_var.op.name, values=[unbiased_var, value, decay]):
        with colocate_with(unbiased_var):
            with init_scope():
                biased_init = api_function("zeros_initializer")()
                step_init = api_function("zeros_initializer")()

            def unique(name: str) -> str:
                scope = get_variable_scope()
                if scope.reuse:
                    return name
                known = {v.op.name for v in global_variables()}
                full = scope.name + "/" + name
                if full not in known:
                    return name
                idx = 1
                while f"{full}_{idx}" in known:
                    idx += 1
                return f"{name}_{idx}"

            biased = get_variable(unique("biased"), shape=unbiased_var.get_shape(),
                                  dtype=unbiased_var.dtype.base_dtype,
                                  initializer=biased_init, trainable=False)
            local_step = get_variable(unique("local_step"), shape=[],
                                      dtype=unbiased_var.dtype.base_dtype,
                                      initializer=step_init, trainable=False)
            update_biased = biased.assign_sub((biased - value) * decay)
            update_step = local_step.assign_add(1)
            with control_dependencies([update_biased, update_step]):
                factor = 1 - api_function("pow")(1.0 - decay, local_step.read_value())
                return unbiased_var.assign(biased.read_value() / factor,
                                           name=get_default_graph().get_name_scope() + "/")


def assign_moving_average(variable: Any, value: Any, decay: Any, zero_debias: bool = True,
                          name: str | None = None) -> Tensor:
    """``variable -= (1 - decay) * (variable - value)``: the op returns the new value.

    With ``zero_debias`` (for variables initialised to zeros) the average is divided by
    ``1 - decay ^ t`` through a biased copy and a step counter created next to
    ``variable`` (``<variable>/biased``, ``<variable>/local_step``).
    """
    with name_scope(name, "AssignMovingAvg", [variable, value, decay]) as scope:
        decay = convert_to_tensor(1.0 - decay, name="decay")
        if decay.dtype.base_dtype != variable.dtype.base_dtype:
            decay = api_function("cast")(decay, variable.dtype.base_dtype)
        if zero_debias:
            return _zero_debias(variable, value, decay)
        return variable.assign_sub((variable - value) * decay, name=scope)


def weighted_moving_average(value: Any, decay: Any, weight: Any, truediv: bool = True,
                            collections: Sequence[str] | None = None,
                            name: str | None = None) -> Tensor:
    """The moving average of ``value * weight`` divided by the moving average of
    ``weight`` (variables ``value_x_weight`` and ``weight`` in a ``WeightedMovingAvg``
    scope)."""
    if collections is None:
        collections = [GraphKeys.GLOBAL_VARIABLES]
    with variable_scope(name, "WeightedMovingAvg", [value, weight, decay]) as scope:
        zeros = api_function("zeros_initializer")()
        vw = get_variable("value_x_weight", shape=value.get_shape(), dtype=value.dtype,
                          initializer=zeros, trainable=False, collections=collections)
        w = get_variable("weight", shape=weight.get_shape(), dtype=weight.dtype,
                         initializer=zeros, trainable=False, collections=collections)
        num = assign_moving_average(vw, value * weight, decay, zero_debias=False)
        den = assign_moving_average(w, weight, decay, zero_debias=False)
        return api_function("truediv")(num, den, name=scope.name)


class ExponentialMovingAverage:
    """Moving averages of variables (``tf.train.ExponentialMovingAverage``).

    :param decay: the decay (a float or a scalar float tensor), e.g. 0.999
    :param num_updates: optional count of updates (the global step): the decay used is
        ``min(decay, (1 + num_updates) / (10 + num_updates))``
    :param zero_debias: debias the averages of tensors (not of variables, whose shadows
        start at the variable's initial value)
    :param name: the name of the ops and the suffix of the shadow variables
    """

    def __init__(self, decay: Any, num_updates: Any = None, zero_debias: bool = False,
                 name: str = "ExponentialMovingAverage"):
        self._decay = decay
        self._num_updates = num_updates
        self._zero_debias = zero_debias
        self._name = name
        self._averages: dict[Any, Variable] = {}

    @property
    def name(self) -> str:
        """The name of this ExponentialMovingAverage object."""
        return self._name

    def apply(self, var_list: Sequence[Any] | None = None) -> Any:
        """Create the shadow variables of ``var_list`` (default: the trainable variables)
        once, and return the op that updates them all.

        :raises TypeError: for a variable or tensor that is not half, bfloat16, float
            or double
        :raises ValueError: when ``var_list`` holds the same variable twice
        """
        if var_list is None:
            var_list = trainable_variables()
        var_list = list(var_list)
        zero_debias_true = set()
        for var in var_list:
            if var.dtype.base_dtype not in _FLOATS:
                raise TypeError(f"The variables must be half, float, or double: {var.name}")
            if var in self._averages:
                continue
            with init_scope():
                if isinstance(var, Variable):
                    avg = _create_slot(var, var.initialized_value(), self.name, True)
                    add_to_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, var)
                else:
                    colocate = var.op.type in ("Variable", "VariableV2", "VarHandleOp")
                    avg = _create_slot(var, _zeros_like_slot_value(var), self.name,
                                       colocate)
                    if self._zero_debias:
                        zero_debias_true.add(avg)
            self._averages[var] = avg
        with name_scope(self.name) as scope:
            decay = convert_to_tensor(self._decay, dtype=_dt.float32, name="decay")
            if self._num_updates is not None:
                n = api_function("cast")(self._num_updates, _dt.float32, name="num_updates")
                decay = api_function("minimum")(decay, (1.0 + n) / (10.0 + n))
            updates = [assign_moving_average(self._averages[v], v, decay,
                                             zero_debias=self._averages[v] in zero_debias_true)
                       for v in var_list]
            return api_function("group")(*updates, name=scope)

    def average(self, var: Any) -> Variable | None:
        """The shadow variable of ``var`` (None if it has none)."""
        return self._averages.get(var)

    def average_name(self, var: Any) -> str:
        """The name of ``var``'s shadow variable, also before :meth:`apply` made it
        (``<var>/<name>``, as the graph would make it unique)."""
        if var in self._averages:
            return self._averages[var].op.name
        return get_default_graph().unique_name(var.op.name + "/" + self.name,
                                               mark_as_used=False)

    def variables_to_restore(self, moving_avg_variables: Sequence[Any] | None = None
                             ) -> dict[str, Any]:
        """``{checkpoint name: variable}`` restoring the shadows of
        ``moving_avg_variables`` (default: the trainable and moving-average variables)
        into the variables themselves, and every other global variable as itself."""
        name_map: dict[str, Any] = {}
        if moving_avg_variables is None:
            moving_avg_variables = (trainable_variables()
                                    + get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES))
        averaged = list(dict.fromkeys(moving_avg_variables))
        for v in averaged:
            name_map[self.average_name(v)] = v
        names = {v.name for v in averaged}
        for v in global_variables():
            if v.name not in names and v.op.name not in name_map:
                name_map[v.op.name] = v
        return name_map


API = {"train.ExponentialMovingAverage": ExponentialMovingAverage}
