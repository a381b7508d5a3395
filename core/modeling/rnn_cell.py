"""The RNN cells of ``tf.nn.rnn_cell`` as TF 1.15 defines them (graph mode).

A cell maps ``(inputs, state)`` to ``(output, new_state)`` for one time step. The cells
here create their variables on the first call, in a variable scope named after the
class (``basic_lstm_cell``, ``lstm_cell``, ``gru_cell`` ...; made unique per enclosing
scope like a ``tf.layers`` layer) and reuse them on every later call, so that variable
names, shapes and gate layouts are TF's: a checkpoint written by TensorFlow restores
into the same program built with flowrt and gives TF's outputs.

The wrappers (``DropoutWrapper``, ``ResidualWrapper``, ``DeviceWrapper``) add no
variable scope of their own; ``MultiRNNCell`` calls its cells in ``cell_<i>`` sub-scopes
of ``multi_rnn_cell``.
"""
from __future__ import annotations

import collections
import hashlib
import numbers
import re
from typing import Any, Callable, Sequence

import numpy as np

from flowrt.base import dtypes as _dt
from flowrt.base.tensor_shape import as_shape, dimension_value
from flowrt.framework.graph import (Tensor, api_function, convert_to_tensor, device,
                                    name_scope)
from flowrt.plugin.runtime import require_api
from flowrt.training.variable_scope import get_variable, get_variable_scope
from flowrt.training.variable_scope import variable_scope as _variable_scope
from flowrt.training.variables import trainable_variables

__all__ = ["RNNCell", "LayerRNNCell", "BasicRNNCell", "BasicLSTMCell", "LSTMCell",
           "GRUCell", "MultiRNNCell", "DropoutWrapper", "ResidualWrapper", "DeviceWrapper",
           "LSTMStateTuple", "assert_like_rnncell"]

#: the op API functions this module calls by name
REQUIRED_API_NAMES = frozenset({
    "concat", "matmul", "nn.bias_add", "split", "slice", "sigmoid", "tanh", "add",
    "multiply", "clip_by_value", "zeros", "constant", "expand_dims", "nn.dropout",
    "random_uniform", "floor", "divide", "zeros_initializer", "constant_initializer",
    "nn.relu", "nn.relu6", "nn.elu", "nn.selu", "nn.softplus", "nn.softsign",
    "identity", "shape", "fixed_size_partitioner", "_fused_basic_lstm_cell",
    "_fused_lstm_sequence",
})
require_api(REQUIRED_API_NAMES)

_ACTIVATIONS = {"tanh": "tanh", "sigmoid": "sigmoid", "relu": "nn.relu",
                "relu6": "nn.relu6", "elu": "nn.elu", "selu": "nn.selu",
                "softplus": "nn.softplus", "softsign": "nn.softsign", "linear": "identity"}


# -- nested structures (TF's ``nest``: tuples, lists, namedtuples, dicts) ---------------
def is_sequence(x: Any) -> bool:
    """True for the containers ``nest`` walks into: lists, tuples and dicts."""
    return isinstance(x, (list, tuple, dict))


def _children(x: Any) -> list[Any]:
    if isinstance(x, dict):
        return [x[k] for k in sorted(x)]
    return list(x)


def flatten(x: Any) -> list[Any]:
    """The leaves of ``x`` in order (dicts by sorted key); a leaf is ``[x]``."""
    if not is_sequence(x):
        return [x]
    out: list[Any] = []
    for c in _children(x):
        out.extend(flatten(c))
    return out


def _rebuild(like: Any, items: list[Any]) -> Any:
    if isinstance(like, dict):
        return type(like)(zip(sorted(like), items))
    if isinstance(like, tuple) and hasattr(like, "_fields"):
        return type(like)(*items)
    return type(like)(items)


def pack_sequence_as(structure: Any, flat: Sequence[Any]) -> Any:
    """``flat`` put back into the shape of ``structure``.

    :raises ValueError: when the number of leaves differs
    """
    flat = list(flat)
    n = len(flatten(structure))
    if n != len(flat):
        raise ValueError(f"Could not pack sequence. Structure had {n} elements, but "
                         f"flat_sequence had {len(flat)} elements.")
    it = iter(flat)

    def build(s: Any) -> Any:
        if not is_sequence(s):
            return next(it)
        return _rebuild(s, [build(c) for c in _children(s)])

    return build(structure)


def assert_same_structure(a: Any, b: Any, check_types: bool = True) -> None:
    """Raise unless ``a`` and ``b`` nest the same way.

    :raises ValueError: different nesting or number of elements
    :raises TypeError: the same nesting in different sequence types (``check_types``)
    """
    if is_sequence(a) != is_sequence(b):
        raise ValueError("The two structures don't have the same nested structure.\n\n"
                         f"First structure: {a}\n\nSecond structure: {b}")
    if not is_sequence(a):
        return
    if check_types and type(a) is not type(b) and not (
            isinstance(a, list) and isinstance(b, list)):
        raise TypeError("The two structures don't have the same sequence type. First "
                        f"structure has type {type(a)}, while second structure has type "
                        f"{type(b)}.")
    ca, cb = _children(a), _children(b)
    if len(ca) != len(cb) or (isinstance(a, dict) and sorted(a) != sorted(b)):
        raise ValueError("The two structures don't have the same number of elements.\n\n"
                         f"First structure: {a}\n\nSecond structure: {b}")
    for x, y in zip(ca, cb):
        assert_same_structure(x, y, check_types)


def map_structure(fn: Callable[..., Any], *structures: Any) -> Any:
    """``fn`` applied leafwise to structures of the same nesting."""
    for s in structures[1:]:
        assert_same_structure(structures[0], s, check_types=False)
    flats = [flatten(s) for s in structures]
    return pack_sequence_as(structures[0], [fn(*xs) for xs in zip(*flats)])


def _map_up_to(shallow: Any, fn: Callable[..., Any], *structures: Any) -> Any:
    """``fn(index, *subtrees)`` for each leaf of ``shallow`` (index in leaf order)."""
    counter = iter(range(1 << 30))

    def walk(s: Any, subs: tuple[Any, ...]) -> Any:
        if not is_sequence(s):
            return fn(next(counter), *subs)
        parts = [_children(x) for x in subs]
        return _rebuild(s, [walk(c, tuple(p[i] for p in parts))
                            for i, c in enumerate(_children(s))])

    return walk(shallow, structures)


def _traverse_shallow(visit: Callable[[Any], Any], structure: Any) -> Any:
    """TF's ``get_traverse_shallow_structure``: the booleans ``visit`` gives, walking
    into a substructure only where it says True."""
    r = visit(structure)
    if isinstance(r, bool):
        if r and is_sequence(structure):
            return _rebuild(structure, [_traverse_shallow(visit, c)
                                        for c in _children(structure)])
        return r
    return _rebuild(structure, [
        _traverse_shallow(visit, c) if flag else False
        for c, flag in zip(_children(structure), _children(r))])


# -- helpers ---------------------------------------------------------------------------
def _snake_case(name: str) -> str:
    s = re.sub(r"(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    s = re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()
    return s if s[0] != "_" else "private" + s


def _activation(act: Any) -> Callable[[Tensor], Tensor]:
    if act is None:
        return api_function("tanh")
    if isinstance(act, str):
        if act not in _ACTIVATIONS:
            raise ValueError(f"Unknown activation function: {act}")
        return api_function(_ACTIVATIONS[act])
    return act


def static_value(t: Any) -> Any:
    """A Python number or array for a constant (a number, or a Const tensor), else None."""
    if isinstance(t, Tensor):
        if t.op.type == "Const":
            return np.asarray(t.op.get_attr("value"))
        return None
    if isinstance(t, numbers.Number):
        return t
    return None


def _check_supported_dtypes(dtype: Any) -> None:
    if dtype is None:
        return
    dtype = _dt.as_dtype(dtype)
    if not (dtype.is_floating or dtype.is_complex):
        raise ValueError("RNN cell only supports floating point inputs, but saw dtype: "
                         f"{dtype.name}")


def _concat(prefix: Any, suffix: Any, static: bool = False) -> Any:
    """``[prefix..., suffix...]`` of ints, shapes or 0-/1-D int tensors: a static list
    (``static``, entries may be None) or an int32 tensor."""
    def part(x: Any) -> tuple[Any, list[Any] | None]:
        if isinstance(x, Tensor):
            v = static_value(x)
            sv = None if v is None else [int(e) for e in np.reshape(v, [-1])]
            if x.shape.ndims == 0:
                x = api_function("expand_dims")(x, 0)
            elif x.shape.ndims != 1:
                raise ValueError("prefix/suffix tensor must be either a scalar or vector, "
                                 f"but saw tensor: {x}")
            return x, sv
        s = as_shape(x)
        sv = s.as_list() if s.ndims is not None else None
        t = None
        if not static and s.is_fully_defined():
            t = api_function("constant")(s.as_list(), dtype=_dt.int32)
        return t, sv

    p, ps = part(prefix)
    s, ss = part(suffix)
    if static:
        if ps is None or ss is None:
            return None
        return ps + ss
    if p is None or s is None:
        raise ValueError(f"Provided a prefix or suffix of None: {prefix} and {suffix}")
    return api_function("concat")([p, s], 0)


def _zero_state_tensors(state_size: Any, batch_size: Any, dtype: Any) -> Any:
    def zeros(s: Any) -> Tensor:
        shape = _concat(batch_size, s)
        z = api_function("zeros")(shape, dtype=dtype)
        static = _concat(batch_size, s, static=True)
        if static is not None:
            z.set_shape(static)
        return z

    return map_structure(zeros, state_size)


def assert_like_rnncell(cell_name: str, cell: Any) -> None:
    """Raise TypeError unless ``cell`` has what an RNN cell needs."""
    checks = [(hasattr(cell, "output_size"), "'output_size' property is missing"),
              (hasattr(cell, "state_size"), "'state_size' property is missing"),
              (hasattr(cell, "get_initial_state") or hasattr(cell, "zero_state"),
               "either 'zero_state' or 'get_initial_state' method is required"),
              (callable(cell), "is not callable")]
    bad = [msg for ok, msg in checks if not ok]
    if bad:
        raise TypeError(f"The argument {cell_name!r} ({cell}) is not an RNNCell: "
                        f"{', '.join(bad)}.")


class LSTMStateTuple(collections.namedtuple("LSTMStateTuple", ("c", "h"))):
    """The ``(c, h)`` state of an LSTM cell (``state_is_tuple=True``)."""

    __slots__ = ()

    @property
    def dtype(self) -> Any:
        """The dtype of both members.

        :raises TypeError: if ``c`` and ``h`` differ
        """
        c, h = self
        if c.dtype != h.dtype:
            raise TypeError(f"Inconsistent internal state: {c.dtype} vs {h.dtype}")
        return c.dtype


# -- the base classes ------------------------------------------------------------------
class RNNCell:
    """An RNN cell (``tf.nn.rnn_cell.RNNCell``): subclasses define ``state_size``,
    ``output_size`` and ``call(inputs, state) -> (output, new_state)``, and may create
    variables with ``add_variable`` (in ``build``) or ``tf.get_variable`` (in ``call``).

    Calling the cell enters its variable scope (the class name in snake case, made
    unique in the enclosing scope on the first call) and reuses its variables on every
    later call.

    :param trainable: whether the variables go to ``TRAINABLE_VARIABLES``
    :param name: the scope name instead of the class-derived one
    :param dtype: the variables' dtype (default: the first input's)
    """

    def __init__(self, trainable: bool = True, name: str | None = None,
                 dtype: Any = None, _reuse: Any = None, _scope: Any = None,
                 **kwargs: Any):
        self.trainable = trainable
        self._base_name = name or _snake_case(type(self).__name__)
        self._name = name
        self._dtype = None if dtype is None else _dt.as_dtype(dtype).base_dtype
        self._reuse = _reuse
        self._scope = _scope
        self._rnncell_scope: Any = None
        self.built = False
        self._trainable_weights: list[Any] = []
        self._non_trainable_weights: list[Any] = []

    # -- Layer-like properties --
    @property
    def name(self) -> str:
        """The layer name: its variable scope's last part once called."""
        if self._scope is not None:
            return self._scope.name.split("/")[-1]
        return self._name or self._base_name

    @property
    def dtype(self) -> Any:
        return self._dtype

    @property
    def scope_name(self) -> str:
        """The full name of the cell's variable scope.

        :raises ValueError: before the cell was first called
        """
        if self._scope is None:
            raise ValueError("No name available for layer scope because the layer "
                             f'"{self._base_name}" has not been used yet.')
        return self._scope.name

    @property
    def trainable_weights(self) -> list[Any]:
        return list(self._trainable_weights) if self.trainable else []

    @property
    def non_trainable_weights(self) -> list[Any]:
        if self.trainable:
            return list(self._non_trainable_weights)
        return list(self._trainable_weights) + list(self._non_trainable_weights)

    @property
    def weights(self) -> list[Any]:
        return self.trainable_weights + self.non_trainable_weights

    trainable_variables = property(lambda self: self.trainable_weights)
    non_trainable_variables = property(lambda self: self.non_trainable_weights)
    variables = property(lambda self: self.weights)

    @property
    def state_size(self) -> Any:
        """The size(s) of the state: an int, a TensorShape, or a nested tuple of them."""
        raise NotImplementedError("Abstract method")

    @property
    def output_size(self) -> Any:
        """The size of the output: an int or a TensorShape."""
        raise NotImplementedError("Abstract method")

    def build(self, inputs_shape: Any) -> None:
        """Create the cell's variables; called once, before the first ``call``."""
        self.built = True

    def call(self, inputs: Any, state: Any) -> tuple[Any, Any]:
        raise NotImplementedError("Abstract method")

    # -- variables --
    def add_variable(self, name: str, shape: Any, dtype: Any = None,
                     initializer: Any = None, trainable: bool | None = None,
                     partitioner: Any = None, **kwargs: Any) -> Any:
        """``get_variable(name)`` in the cell's scope, recorded in its weights."""
        trainable = self.trainable if trainable is None else trainable and self.trainable
        v = get_variable(name, shape=shape, dtype=dtype or self._dtype or _dt.float32,
                         initializer=initializer, trainable=trainable,
                         partitioner=partitioner, **kwargs)
        self._track(v, trainable)
        return v

    add_weight = add_variable

    def _track(self, v: Any, trainable: bool) -> None:
        bucket = self._trainable_weights if trainable else self._non_trainable_weights
        if all(v is not w for w in bucket):
            bucket.append(v)

    def _rnn_get_variable(self, getter: Callable[..., Any], *args: Any,
                          **kwargs: Any) -> Any:
        v = getter(*args, **kwargs)
        self._track(v, any(v is t for t in trainable_variables()))
        return v

    # -- calling --
    def __call__(self, inputs: Any, state: Any, scope: Any = None) -> tuple[Any, Any]:
        """Run the cell on ``inputs`` from ``state``: ``(output, new_state)``.

        :param scope: a variable scope (or name) to create the variables in instead of
            the cell's own
        """
        if scope is not None:
            with _variable_scope(scope, custom_getter=self._rnn_get_variable) as sc:
                return self._layer_call(inputs, state, sc)
        if self._rnncell_scope is None:
            self._rnncell_scope = _variable_scope(get_variable_scope(),
                                                  custom_getter=self._rnn_get_variable)
        with self._rnncell_scope:
            return self._layer_call(inputs, state, None)

    def _set_scope(self, scope: Any) -> None:
        if self._scope is None:
            if self._reuse:
                with _variable_scope(scope if scope is not None else
                                     self._base_name) as captured:
                    self._scope = captured
            else:
                with _variable_scope(scope, default_name=self._base_name) as captured:
                    self._scope = captured

    def _layer_call(self, inputs: Any, state: Any, scope: Any,
                    call: Callable[[Any, Any], tuple[Any, Any]] | None = None
                    ) -> tuple[Any, Any]:
        """A ``tf.layers.Layer`` call: enter the cell's scope (reusing its variables
        after the first call), check and convert the inputs, build, then ``call`` (or
        the given ``call``, which runs a whole sequence: its inputs are not checked as
        one step's)."""
        self._set_scope(scope)
        reuse = True if self.built else self._reuse
        with _variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False) as sc:
            with name_scope(sc.original_name_scope or None):
                inputs = map_structure(
                    lambda x: x if isinstance(x, Tensor) else convert_to_tensor(
                        x, dtype=self._dtype), inputs)
                if call is None:
                    self._check_inputs(inputs)
                if self._dtype is None:
                    first = flatten(inputs)[0]
                    if isinstance(first, Tensor):
                        self._dtype = first.dtype.base_dtype
                if not self.built:
                    self.build(map_structure(lambda x: x.shape, inputs)
                               if is_sequence(inputs) else inputs.shape)
                    self.built = True
                return (call or self.call)(inputs, state)

    # -- whole sequences --
    def _fuses_sequences(self) -> bool:
        """Whether :meth:`_call_sequence` can run this cell over a sequence in one op."""
        return False

    def _sequence(self, inputs: Tensor, state: Any,
                  sequence_length: Tensor | None) -> tuple[Any, Any]:
        raise NotImplementedError("Abstract method")

    def _call_sequence(self, inputs: Tensor, state: Any, sequence_length: Tensor | None
                       ) -> tuple[Any, Any]:
        """Run the cell over the time-major ``inputs`` ``[time, batch, depth]`` as
        ``dynamic_rnn`` would (same scopes and variables, same values), in one op:
        ``(outputs [time, batch, ...], final_state)``. Only when
        :meth:`_fuses_sequences`."""
        def run(x: Any, s: Any) -> tuple[Any, Any]:
            return self._sequence(x, s, sequence_length)

        if isinstance(self, LayerRNNCell):
            return self._layer_call(inputs, state, None, call=run)
        if self._rnncell_scope is None:
            self._rnncell_scope = _variable_scope(get_variable_scope(),
                                                  custom_getter=self._rnn_get_variable)
        with self._rnncell_scope:
            return self._layer_call(inputs, state, None, call=run)

    def _check_inputs(self, inputs: Any) -> None:
        """Input rank check of the cells with a 2-D input spec (none here)."""

    def _check_state(self, state: Any) -> None:
        """Raise ValueError naming the cell when ``state`` does not match
        ``state_size`` in structure or in its last dimension."""
        size = self.state_size
        try:
            assert_same_structure(size, state, check_types=False)
        except (ValueError, TypeError):
            raise ValueError(f"{type(self).__name__} ({self.name}): expected a state "
                             f"with the structure of state_size {size}, but saw "
                             f"{state}") from None
        for s, t in zip(flatten(size), flatten(state)):
            if not isinstance(t, Tensor):
                continue
            want = as_shape(s).as_list() if not isinstance(s, Tensor) else None
            shape = t.shape
            if want is None or shape.ndims is None:
                continue
            if shape.ndims != 1 + len(want) or not all(
                    w is None or dimension_value(d) is None or dimension_value(d) == w
                    for w, d in zip(want, shape.as_list()[1:])):
                raise ValueError(f"{type(self).__name__} ({self.name}): state shape "
                                 f"{shape} does not match state_size {s} (expected "
                                 f"[batch_size, {', '.join(str(w) for w in want)}])")

    # -- initial states --
    def get_initial_state(self, inputs: Any = None, batch_size: Any = None,
                          dtype: Any = None) -> Any:
        """The zero state for ``inputs`` (their batch size and dtype) or for
        ``batch_size`` and ``dtype``.

        :raises ValueError: if they disagree, or neither gives both
        """
        if inputs is not None:
            inputs = convert_to_tensor(inputs, name="inputs")
            if batch_size is not None:
                static = static_value(batch_size) if isinstance(batch_size, Tensor) \
                    else batch_size
                if dimension_value(inputs.shape[0]) != static:
                    raise ValueError("batch size from input tensor is different from the "
                                     "input param. Input tensor batch: "
                                     f"{dimension_value(inputs.shape[0])}, batch_size: "
                                     f"{batch_size}")
            if dtype is not None and inputs.dtype != _dt.as_dtype(dtype):
                raise ValueError("dtype from input tensor is different from the input "
                                 f"param. Input tensor dtype: {inputs.dtype}, dtype: "
                                 f"{dtype}")
            batch_size = dimension_value(inputs.shape[0]) or \
                api_function("shape")(inputs)[0]
            dtype = inputs.dtype
        if batch_size is None or dtype is None:
            raise ValueError("batch_size and dtype cannot be None while constructing "
                             f"initial state: batch_size={batch_size}, dtype={dtype}")
        return self.zero_state(batch_size, dtype)

    def zero_state(self, batch_size: Any, dtype: Any) -> Any:
        """Zeros of shape ``[batch_size] + s`` for each ``s`` in ``state_size``."""
        with name_scope(type(self).__name__ + "ZeroState", values=[batch_size]):
            return _zero_state_tensors(self.state_size, batch_size, dtype)

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "trainable": self.trainable,
                "dtype": None if self._dtype is None else self._dtype.name}

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.{type(self).__name__} {self.name!r}>"


class LayerRNNCell(RNNCell):
    """A cell that creates its variables in ``build`` (as a ``tf.layers.Layer``)."""

    _input_ndim: int | None = 2

    def __call__(self, inputs: Any, state: Any, scope: Any = None, *args: Any,
                 **kwargs: Any) -> tuple[Any, Any]:
        """Run the cell on ``inputs`` from ``state``: ``(output, new_state)``."""
        return self._layer_call(inputs, state, scope)

    def _check_inputs(self, inputs: Any) -> None:
        """TF's ``InputSpec(ndim=2)``: a ValueError naming the layer otherwise."""
        for i, x in enumerate(flatten(inputs)):
            nd = x.shape.ndims
            if self._input_ndim is not None and nd is not None and nd != self._input_ndim:
                raise ValueError(f"Input {i} of layer {self.name} is incompatible with the "
                                 f"layer: expected ndim={self._input_ndim}, found "
                                 f"ndim={nd}. Full shape received: {x.shape.as_list()}")

    def _depth(self, inputs_shape: Any) -> int:
        shape = as_shape(inputs_shape)
        depth = dimension_value(shape[-1]) if shape.ndims else None
        if depth is None:
            raise ValueError(f"Expected inputs.shape[-1] to be known, saw shape: {shape}")
        _check_supported_dtypes(self._dtype)
        return depth


def _check_input_dtypes(*values: Any) -> None:
    for t in flatten(list(values)):
        if isinstance(t, Tensor):
            _check_supported_dtypes(t.dtype)


def _matmul_concat(x: Tensor, h: Tensor, kernel: Any) -> Tensor:
    return api_function("matmul")(api_function("concat")([x, h], 1), kernel)


# -- the cells -------------------------------------------------------------------------
class BasicRNNCell(LayerRNNCell):
    """``output = new_state = activation(W [inputs, state] + b)``
    (``tf.nn.rnn_cell.BasicRNNCell``); variables ``kernel``
    ``[input_depth + num_units, num_units]`` and ``bias`` ``[num_units]``.

    :param num_units: the state and output size
    :param activation: default ``tanh``; a function or a Keras activation name
    :param reuse: reuse the variables of an existing scope of this name
    :param name: the scope name (default ``basic_rnn_cell``)
    :param dtype: the variables' dtype (default: the inputs')
    """

    def __init__(self, num_units: int, activation: Any = None, reuse: Any = None,
                 name: str | None = None, dtype: Any = None, **kwargs: Any):
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        _check_supported_dtypes(self._dtype)
        self._num_units = num_units
        self._activation = activation

    @property
    def state_size(self) -> int:
        return self._num_units

    @property
    def output_size(self) -> int:
        return self._num_units

    def build(self, inputs_shape: Any) -> None:
        """Create ``kernel`` and ``bias`` (zeros)."""
        depth = self._depth(inputs_shape)
        self._kernel = self.add_variable("kernel", [depth + self._num_units,
                                                    self._num_units])
        self._bias = self.add_variable(
            "bias", [self._num_units],
            initializer=api_function("zeros_initializer")(dtype=self._dtype))
        self.built = True

    def call(self, inputs: Any, state: Any) -> tuple[Any, Any]:
        """One step: ``act(W [x, h] + b)`` as output and state."""
        _check_input_dtypes(inputs, state)
        self._check_state(state)
        gate = api_function("nn.bias_add")(_matmul_concat(inputs, state, self._kernel),
                                           self._bias)
        out = _activation(self._activation)(gate)
        return out, out

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "num_units": self._num_units, "reuse": self._reuse}


class GRUCell(LayerRNNCell):
    """Gated recurrent unit (``tf.nn.rnn_cell.GRUCell``, Cho et al. 2014).

    Variables: ``gates/kernel`` ``[depth + n, 2n]`` and ``gates/bias`` (ones by default)
    for the reset and update gates ``r, u``; ``candidate/kernel`` ``[depth + n, n]`` and
    ``candidate/bias`` (zeros). ``new_h = u * h + (1 - u) * act(W_c [x, r * h] + b_c)``.

    :param num_units: the state and output size
    :param activation: default ``tanh``
    :param kernel_initializer: for both kernels (default: the scope's, else Glorot)
    :param bias_initializer: for both biases (default ones for the gates, zeros for the
        candidate)
    """

    def __init__(self, num_units: int, activation: Any = None, reuse: Any = None,
                 kernel_initializer: Any = None, bias_initializer: Any = None,
                 name: str | None = None, dtype: Any = None, **kwargs: Any):
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        _check_supported_dtypes(self._dtype)
        self._num_units = num_units
        self._activation = activation
        self._kernel_initializer = kernel_initializer
        self._bias_initializer = bias_initializer

    @property
    def state_size(self) -> int:
        return self._num_units

    @property
    def output_size(self) -> int:
        return self._num_units

    def build(self, inputs_shape: Any) -> None:
        """Create the gate and candidate kernels and biases."""
        depth = self._depth(inputs_shape)
        n = self._num_units
        bi = self._bias_initializer
        self._gate_kernel = self.add_variable("gates/kernel", [depth + n, 2 * n],
                                              initializer=self._kernel_initializer)
        self._gate_bias = self.add_variable(
            "gates/bias", [2 * n], initializer=bi if bi is not None else
            api_function("constant_initializer")(1.0, dtype=self._dtype))
        self._candidate_kernel = self.add_variable("candidate/kernel", [depth + n, n],
                                                   initializer=self._kernel_initializer)
        self._candidate_bias = self.add_variable(
            "candidate/bias", [n], initializer=bi if bi is not None else
            api_function("zeros_initializer")(dtype=self._dtype))
        self.built = True

    def call(self, inputs: Any, state: Any) -> tuple[Any, Any]:
        """One GRU step; the new state is also the output."""
        _check_input_dtypes(inputs, state)
        self._check_state(state)
        sigmoid, mul = api_function("sigmoid"), api_function("multiply")
        bias_add = api_function("nn.bias_add")
        value = sigmoid(bias_add(_matmul_concat(inputs, state, self._gate_kernel),
                                 self._gate_bias))
        r, u = api_function("split")(value=value, num_or_size_splits=2, axis=1)
        candidate = bias_add(_matmul_concat(inputs, mul(r, state), self._candidate_kernel),
                             self._candidate_bias)
        c = _activation(self._activation)(candidate)
        new_h = u * state + (1 - u) * c
        return new_h, new_h

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "num_units": self._num_units, "reuse": self._reuse}


class BasicLSTMCell(LayerRNNCell):
    """The basic LSTM cell (``tf.nn.rnn_cell.BasicLSTMCell``): no peepholes, clipping or
    projection. ``kernel`` is ``[depth + n, 4n]`` with the gates in TF's order
    ``i, j, f, o`` (input, new input, forget, output); ``bias`` ``[4n]`` starts at zero
    and ``forget_bias`` is added to ``f`` at every step.

    :param num_units: the cell size
    :param forget_bias: added to the forget gate's pre-activation
    :param state_is_tuple: states are ``LSTMStateTuple(c, h)``; else ``concat([c, h], 1)``
    :param activation: default ``tanh``
    """

    def __init__(self, num_units: int, forget_bias: float = 1.0,
                 state_is_tuple: bool = True, activation: Any = None, reuse: Any = None,
                 name: str | None = None, dtype: Any = None, **kwargs: Any):
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        _check_supported_dtypes(self._dtype)
        self._num_units = num_units
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = activation

    @property
    def state_size(self) -> Any:
        n = self._num_units
        return LSTMStateTuple(n, n) if self._state_is_tuple else 2 * n

    @property
    def output_size(self) -> int:
        return self._num_units

    def build(self, inputs_shape: Any) -> None:
        """Create ``kernel`` and ``bias`` (zeros)."""
        depth = self._depth(inputs_shape)
        n = self._num_units
        self._kernel = self.add_variable("kernel", [depth + n, 4 * n])
        self._bias = self.add_variable(
            "bias", [4 * n], initializer=api_function("zeros_initializer")(dtype=self._dtype))
        self.built = True

    def call(self, inputs: Any, state: Any) -> tuple[Any, Any]:
        """One LSTM step: ``(new_h, new_state)``."""
        _check_input_dtypes(inputs, state)
        self._check_state(state)
        sigmoid, add, mul = (api_function("sigmoid"), api_function("add"),
                             api_function("multiply"))
        act = _activation(self._activation)
        if self._state_is_tuple:
            c, h = state
        else:
            c, h = api_function("split")(value=state, num_or_size_splits=2, axis=1)
        if self._activation is None:
            # the default tanh cell is one fused op (and one op in its gradient); its op
            # names differ from TF's, its values and variables do not
            new_c, new_h = api_function("_fused_basic_lstm_cell")(
                inputs, c, h, self._kernel, self._bias, forget_bias=self._forget_bias)
        else:
            gates = api_function("nn.bias_add")(_matmul_concat(inputs, h, self._kernel),
                                                self._bias)
            i, j, f, o = api_function("split")(value=gates, num_or_size_splits=4, axis=1)
            forget_bias = api_function("constant")(self._forget_bias, dtype=f.dtype)
            new_c = add(mul(c, sigmoid(add(f, forget_bias))), mul(sigmoid(i), act(j)))
            new_h = mul(act(new_c), sigmoid(o))
        if self._state_is_tuple:
            return new_h, LSTMStateTuple(new_c, new_h)
        return new_h, api_function("concat")([new_c, new_h], 1)

    def _fuses_sequences(self) -> bool:
        return self._activation is None and self._state_is_tuple

    def _sequence(self, inputs: Tensor, state: Any,
                  sequence_length: Tensor | None) -> tuple[Any, Any]:
        """Every step at once (one op; see :meth:`RNNCell._call_sequence`)."""
        _check_input_dtypes(inputs, state)
        self._check_state(state)
        c, h = state
        outputs, new_c, new_h = api_function("_fused_lstm_sequence")(
            inputs, c, h, self._kernel, self._bias, sequence_length=sequence_length,
            forget_bias=self._forget_bias)
        return outputs, LSTMStateTuple(new_c, new_h)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "num_units": self._num_units,
                "forget_bias": self._forget_bias, "state_is_tuple": self._state_is_tuple,
                "reuse": self._reuse}


class LSTMCell(LayerRNNCell):
    """The full LSTM cell (``tf.nn.rnn_cell.LSTMCell``): optional peepholes
    (``w_f_diag``, ``w_i_diag``, ``w_o_diag``), cell clipping, and a projection of the
    output (``projection/kernel`` ``[num_units, num_proj]``) with optional clipping.

    :param num_units: the cell size
    :param use_peepholes: add the diagonal peephole connections
    :param cell_clip: clip the cell state to ``[-cell_clip, cell_clip]``
    :param initializer: for the kernel, peepholes and projection
    :param num_proj: project the output (and ``h``) to this size
    :param proj_clip: clip the projected output
    :param num_unit_shards: deprecated in TF: the kernel as a partitioned variable of
        this many shards
    :param num_proj_shards: deprecated in TF: likewise for the projection
    :param forget_bias: added to the forget gate's pre-activation
    :param state_is_tuple: states are ``LSTMStateTuple(c, h)``; else concatenated
    :param activation: default ``tanh``
    """

    def __init__(self, num_units: int, use_peepholes: bool = False,
                 cell_clip: float | None = None, initializer: Any = None,
                 num_proj: int | None = None, proj_clip: float | None = None,
                 num_unit_shards: int | None = None, num_proj_shards: int | None = None,
                 forget_bias: float = 1.0, state_is_tuple: bool = True,
                 activation: Any = None, reuse: Any = None, name: str | None = None,
                 dtype: Any = None, **kwargs: Any):
        """Record the configuration; the state is ``(c, h)`` with ``h`` of size
        ``num_proj`` when projecting, else ``num_units``."""
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        _check_supported_dtypes(self._dtype)
        self._num_units = num_units
        self._use_peepholes = use_peepholes
        self._cell_clip = cell_clip
        self._initializer = initializer
        self._num_proj = num_proj
        self._proj_clip = proj_clip
        self._num_unit_shards = num_unit_shards
        self._num_proj_shards = num_proj_shards
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = activation
        h = num_proj if num_proj else num_units
        self._state_size = (LSTMStateTuple(num_units, h) if state_is_tuple
                            else num_units + h)
        self._output_size = h

    @property
    def state_size(self) -> Any:
        return self._state_size

    @property
    def output_size(self) -> int:
        return self._output_size

    def _partitioner(self, shards: int | None) -> Any:
        if shards is None:
            return None
        return api_function("fixed_size_partitioner")(shards)

    def build(self, inputs_shape: Any) -> None:
        """Create ``kernel``, ``bias`` and, as configured, the peepholes and the
        projection."""
        depth = self._depth(inputs_shape)
        n = self._num_units
        h = self._num_proj if self._num_proj is not None else n
        self._kernel = self.add_variable("kernel", [depth + h, 4 * n],
                                         initializer=self._initializer,
                                         partitioner=self._partitioner(self._num_unit_shards))
        self._bias = self.add_variable(
            "bias", [4 * n], initializer=api_function("zeros_initializer")(dtype=self._dtype))
        if self._use_peepholes:
            self._w_f_diag = self.add_variable("w_f_diag", [n], initializer=self._initializer)
            self._w_i_diag = self.add_variable("w_i_diag", [n], initializer=self._initializer)
            self._w_o_diag = self.add_variable("w_o_diag", [n], initializer=self._initializer)
        if self._num_proj is not None:
            self._proj_kernel = self.add_variable(
                "projection/kernel", [n, self._num_proj], initializer=self._initializer,
                partitioner=self._partitioner(self._num_proj_shards))
        self.built = True

    def call(self, inputs: Any, state: Any) -> tuple[Any, Any]:
        """One LSTM step: ``(m, new_state)`` where ``m`` is the (projected) output."""
        _check_input_dtypes(inputs, state)
        self._check_state(state)
        n = self._num_units
        num_proj = n if self._num_proj is None else self._num_proj
        sigmoid = api_function("sigmoid")
        act = _activation(self._activation)
        if self._state_is_tuple:
            c_prev, m_prev = state
        else:
            slice_ = api_function("slice")
            c_prev = slice_(state, [0, 0], [-1, n])
            m_prev = slice_(state, [0, n], [-1, num_proj])
        if dimension_value(inputs.shape.with_rank(2)[1]) is None:
            raise ValueError("Could not infer input size from inputs.get_shape()[-1]")
        lstm_matrix = api_function("nn.bias_add")(
            _matmul_concat(inputs, m_prev, self._kernel), self._bias)
        i, j, f, o = api_function("split")(value=lstm_matrix, num_or_size_splits=4, axis=1)
        if self._use_peepholes:
            c = (sigmoid(f + self._forget_bias + self._w_f_diag * c_prev) * c_prev +
                 sigmoid(i + self._w_i_diag * c_prev) * act(j))
        else:
            c = sigmoid(f + self._forget_bias) * c_prev + sigmoid(i) * act(j)
        if self._cell_clip is not None:
            c = api_function("clip_by_value")(c, -self._cell_clip, self._cell_clip)
        if self._use_peepholes:
            m = sigmoid(o + self._w_o_diag * c) * act(c)
        else:
            m = sigmoid(o) * act(c)
        if self._num_proj is not None:
            m = api_function("matmul")(m, self._proj_kernel)
            if self._proj_clip is not None:
                m = api_function("clip_by_value")(m, -self._proj_clip, self._proj_clip)
        if self._state_is_tuple:
            return m, LSTMStateTuple(c, m)
        return m, api_function("concat")([c, m], 1)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "num_units": self._num_units,
                "use_peepholes": self._use_peepholes, "cell_clip": self._cell_clip,
                "num_proj": self._num_proj, "proj_clip": self._proj_clip,
                "forget_bias": self._forget_bias, "state_is_tuple": self._state_is_tuple,
                "reuse": self._reuse}


class MultiRNNCell(RNNCell):
    """Cells stacked in layers (``tf.nn.rnn_cell.MultiRNNCell``): cell ``i`` runs in
    the variable scope ``multi_rnn_cell/cell_<i>`` on the previous cell's output.

    :param cells: the cells, lowest first
    :param state_is_tuple: the state is a tuple of the cells' states; else their
        concatenation
    :raises ValueError: no cells, or tuple states with ``state_is_tuple=False``
    :raises TypeError: ``cells`` is not a list or tuple
    """

    def __init__(self, cells: Sequence[Any], state_is_tuple: bool = True):
        super().__init__()
        if not cells:
            raise ValueError("Must specify at least one cell for MultiRNNCell.")
        if not is_sequence(cells):
            raise TypeError(f"cells must be a list or tuple, but saw: {cells}.")
        self._cells = list(cells)
        self._state_is_tuple = state_is_tuple
        if not state_is_tuple and any(is_sequence(c.state_size) for c in self._cells):
            raise ValueError("Some cells return tuples of states, but the flag "
                             "state_is_tuple is not set.  State sizes are: "
                             f"{[c.state_size for c in self._cells]}")

    @property
    def state_size(self) -> Any:
        if self._state_is_tuple:
            return tuple(c.state_size for c in self._cells)
        return sum(c.state_size for c in self._cells)

    @property
    def output_size(self) -> Any:
        return self._cells[-1].output_size

    def zero_state(self, batch_size: Any, dtype: Any) -> Any:
        """Each cell's zero state (a tuple), or their concatenation."""
        with name_scope(type(self).__name__ + "ZeroState", values=[batch_size]):
            if self._state_is_tuple:
                return tuple(c.zero_state(batch_size, dtype) for c in self._cells)
            return _zero_state_tensors(self.state_size, batch_size, dtype)

    @property
    def trainable_weights(self) -> list[Any]:
        if not self.trainable:
            return []
        return [w for c in self._cells for w in getattr(c, "trainable_weights", [])]

    @property
    def non_trainable_weights(self) -> list[Any]:
        out = [w for c in self._cells for w in getattr(c, "non_trainable_weights", [])]
        if not self.trainable:
            return [w for c in self._cells for w in getattr(c, "trainable_weights", [])] + out
        return out

    def call(self, inputs: Any, state: Any) -> tuple[Any, Any]:
        """Run the cells in turn; the output is the last cell's."""
        if self._state_is_tuple:
            if not is_sequence(state):
                raise ValueError(f"Expected state to be a tuple of length "
                                 f"{len(self.state_size)}, but received: {state}")
            if len(state) != len(self._cells):
                raise ValueError(f"MultiRNNCell ({self.name}): expected a state tuple of "
                                 f"length {len(self._cells)}, but received one of length "
                                 f"{len(state)}")
        pos, cur, new_states = 0, inputs, []
        for i, cell in enumerate(self._cells):
            with _variable_scope(f"cell_{i}"):
                if self._state_is_tuple:
                    cur_state = state[i]
                else:
                    cur_state = api_function("slice")(state, [0, pos], [-1, cell.state_size])
                    pos += cell.state_size
                cur, new_state = cell(cur, cur_state)
                new_states.append(new_state)
        if self._state_is_tuple:
            return cur, tuple(new_states)
        return cur, api_function("concat")(new_states, 1)

    def _fuses_sequences(self) -> bool:
        return self._state_is_tuple and all(
            isinstance(c, RNNCell) and c._fuses_sequences() for c in self._cells)

    def _sequence(self, inputs: Tensor, state: Any,
                  sequence_length: Tensor | None) -> tuple[Any, Any]:
        """Each layer over the whole sequence in turn, in its ``cell_<i>`` scope: the
        same values as the step-by-step stack (layer ``i`` only reads layer ``i - 1``'s
        outputs)."""
        if not is_sequence(state) or len(state) != len(self._cells):
            raise ValueError(f"MultiRNNCell ({self.name}): expected a state tuple of "
                             f"length {len(self._cells)}, but received {state}")
        cur, new_states = inputs, []
        for i, cell in enumerate(self._cells):
            with _variable_scope(f"cell_{i}"):
                cur, new_state = cell._call_sequence(cur, state[i], sequence_length)
                new_states.append(new_state)
        return cur, tuple(new_states)


# -- wrappers --------------------------------------------------------------------------
class _Wrapper(RNNCell):
    """A cell around another cell, with no variable scope of its own."""

    def __init__(self, cell: Any, **kwargs: Any):
        super().__init__(**kwargs)
        assert_like_rnncell("cell", cell)
        self.cell = cell

    @property
    def wrapped_cell(self) -> Any:
        return self.cell

    @property
    def state_size(self) -> Any:
        return self.cell.state_size

    @property
    def output_size(self) -> Any:
        return self.cell.output_size

    @property
    def trainable_weights(self) -> list[Any]:
        return list(getattr(self.cell, "trainable_weights", []))

    @property
    def non_trainable_weights(self) -> list[Any]:
        return list(getattr(self.cell, "non_trainable_weights", []))

    def zero_state(self, batch_size: Any, dtype: Any) -> Any:
        """The wrapped cell's zero state."""
        with name_scope(type(self).__name__ + "ZeroState", values=[batch_size]):
            return self.cell.zero_state(batch_size, dtype)

    def __call__(self, inputs: Any, state: Any, scope: Any = None) -> tuple[Any, Any]:
        """Run the wrapped cell (with ``scope``) and the wrapping logic."""
        return self._call_wrapped_cell(inputs, state, self.cell.__call__, scope=scope)

    def _call_wrapped_cell(self, inputs: Any, state: Any, cell_call_fn: Callable[..., Any],
                           **kwargs: Any) -> tuple[Any, Any]:
        raise NotImplementedError


def _default_dropout_state_filter_visitor(substate: Any) -> Any:
    if isinstance(substate, LSTMStateTuple):
        return LSTMStateTuple(c=False, h=True)
    if getattr(substate, "_flowrt_tensor_array", False):
        return False
    return True


class DropoutWrapper(_Wrapper):
    """Dropout on a cell's inputs, outputs and new states
    (``tf.nn.rnn_cell.DropoutWrapper``). A keep probability that is the constant 1
    adds no op. State dropout leaves the ``c`` of an ``LSTMStateTuple`` alone unless
    ``dropout_state_filter_visitor`` says otherwise. With ``variational_recurrent`` the
    same mask (drawn once per run, of shape ``[1, depth]``) is used at every step.

    :param cell: the wrapped cell
    :param input_keep_prob: keep probability of the inputs (float or scalar tensor)
    :param output_keep_prob: keep probability of the outputs
    :param state_keep_prob: keep probability of the new states
    :param variational_recurrent: one mask for all time steps
    :param input_size: the inputs' depth(s); needed with ``variational_recurrent`` and
        ``input_keep_prob < 1``
    :param dtype: needed with ``variational_recurrent``
    :param seed: the random seed (each mask gets its own, derived from it)
    :param dropout_state_filter_visitor: which state parts to drop (see TF)
    :raises ValueError: a constant keep probability outside ``[0, 1]``, or a missing
        ``dtype``/``input_size`` with ``variational_recurrent``
    :raises TypeError: a ``dropout_state_filter_visitor`` that is not callable
    """

    def __init__(self, cell: Any, input_keep_prob: Any = 1.0, output_keep_prob: Any = 1.0,
                 state_keep_prob: Any = 1.0, variational_recurrent: bool = False,
                 input_size: Any = None, dtype: Any = None, seed: int | None = None,
                 dropout_state_filter_visitor: Callable[[Any], Any] | None = None,
                 **kwargs: Any):
        """Check and record the keep probabilities (constants as floats); with
        ``variational_recurrent``, draw the noise tensors the masks come from."""
        super().__init__(cell, dtype=dtype, **kwargs)
        if dropout_state_filter_visitor is not None and \
                not callable(dropout_state_filter_visitor):
            raise TypeError("dropout_state_filter_visitor must be callable")
        self._dropout_state_filter = (dropout_state_filter_visitor or
                                      _default_dropout_state_filter_visitor)
        with name_scope("DropoutWrapperInit"):
            for prob, attr in [(input_keep_prob, "input_keep_prob"),
                               (state_keep_prob, "state_keep_prob"),
                               (output_keep_prob, "output_keep_prob")]:
                const = static_value(prob)
                if const is not None:
                    const = float(const)
                    if const < 0 or const > 1:
                        raise ValueError(f"Parameter {attr} must be between 0 and 1: "
                                         f"{const:g}")
                    setattr(self, f"_{attr}", const)
                else:
                    setattr(self, f"_{attr}", convert_to_tensor(prob))
        self._variational_recurrent = variational_recurrent
        self._input_size = input_size
        self._seed = seed
        self._recurrent_input_noise = None
        self._recurrent_state_noise = None
        self._recurrent_output_noise = None
        if variational_recurrent:
            self._make_noise(cell, input_size, dtype)

    def _make_noise(self, cell: Any, input_size: Any, dtype: Any) -> None:
        """The ``[1, depth]`` uniform noise of each input, state and output part: the
        same draw serves every time step of a run (TF's variational dropout)."""
        if dtype is None:
            raise ValueError("When variational_recurrent=True, dtype must be provided")

        def batch_noise(s: Any, seed: int | None) -> Tensor:
            shape = [1] + as_shape(s).as_list()
            return api_function("random_uniform")(shape, seed=seed, dtype=dtype)

        if not isinstance(self._input_keep_prob, numbers.Real) or self._input_keep_prob < 1:
            if input_size is None:
                raise ValueError("When variational_recurrent=True and input_keep_prob < "
                                 "1.0 or is unknown, input_size must be provided")
            self._recurrent_input_noise = _map_up_to(
                input_size, lambda i, s: batch_noise(s, self._gen_seed("input", i)),
                input_size)
        self._recurrent_state_noise = _map_up_to(
            cell.state_size, lambda i, s: batch_noise(s, self._gen_seed("state", i)),
            cell.state_size)
        self._recurrent_output_noise = _map_up_to(
            cell.output_size, lambda i, s: batch_noise(s, self._gen_seed("output", i)),
            cell.output_size)

    def _gen_seed(self, salt_prefix: str, index: int) -> int | None:
        if self._seed is None:
            return None
        data = (str(self._seed) + f"{salt_prefix}_{index}").encode("utf-8")
        return int(hashlib.md5(data).hexdigest()[:8], 16) & 0x7FFFFFFF

    def _dropout(self, values: Any, salt: str, noise: Any, keep_prob: Any,
                 shallow: Any = None) -> Any:
        if shallow is None:
            shallow = values

        def drop(i: int, do: Any, v: Any, n: Any = None) -> Any:
            if isinstance(do, bool) and not do:
                return v
            if not self._variational_recurrent:
                return api_function("nn.dropout")(v, keep_prob=keep_prob,
                                                  seed=self._gen_seed(salt, i))
            mask = api_function("floor")(keep_prob + n)
            out = api_function("divide")(v, keep_prob) * mask
            out.set_shape(v.shape)
            return out

        if self._variational_recurrent:
            return _map_up_to(shallow, drop, shallow, values, noise)
        return _map_up_to(shallow, drop, shallow, values)

    def _call_wrapped_cell(self, inputs: Any, state: Any, cell_call_fn: Callable[..., Any],
                           **kwargs: Any) -> tuple[Any, Any]:
        """Drop inputs, run the cell, drop the new state and the output."""
        def should(p: Any) -> bool:
            return not isinstance(p, float) or p < 1

        if should(self._input_keep_prob):
            inputs = self._dropout(inputs, "input", self._recurrent_input_noise,
                                   self._input_keep_prob)
        output, new_state = cell_call_fn(inputs, state, **kwargs)
        if should(self._state_keep_prob):
            shallow = _traverse_shallow(self._dropout_state_filter, new_state)
            new_state = self._dropout(new_state, "state", self._recurrent_state_noise,
                                      self._state_keep_prob, shallow)
        if should(self._output_keep_prob):
            output = self._dropout(output, "output", self._recurrent_output_noise,
                                   self._output_keep_prob)
        return output, new_state


class ResidualWrapper(_Wrapper):
    """Adds the cell's inputs to its outputs (``tf.nn.rnn_cell.ResidualWrapper``).

    :param cell: the wrapped cell
    :param residual_fn: ``fn(inputs, outputs)`` instead of the elementwise sum
    """

    def __init__(self, cell: Any, residual_fn: Callable[[Any, Any], Any] | None = None,
                 **kwargs: Any):
        super().__init__(cell, **kwargs)
        self._residual_fn = residual_fn

    def _call_wrapped_cell(self, inputs: Any, state: Any, cell_call_fn: Callable[..., Any],
                           **kwargs: Any) -> tuple[Any, Any]:
        """Run the cell, then ``residual_fn(inputs, outputs)``.

        :raises ValueError: inputs and outputs of different structure or shape
        """
        outputs, new_state = cell_call_fn(inputs, state, **kwargs)

        def default(inp: Any, out: Any) -> Any:
            assert_same_structure(inp, out)
            map_structure(lambda a, b: a.shape.assert_is_compatible_with(b.shape), inp, out)
            return map_structure(lambda a, b: a + b, inp, out)

        return (self._residual_fn or default)(inputs, outputs), new_state


class DeviceWrapper(_Wrapper):
    """Runs a cell on a device (``tf.nn.rnn_cell.DeviceWrapper``).

    :param cell: the wrapped cell
    :param device: a device name or function, as for ``tf.device``
    """

    def __init__(self, cell: Any, device: Any, **kwargs: Any):
        super().__init__(cell, **kwargs)
        self._device = device

    def zero_state(self, batch_size: Any, dtype: Any) -> Any:
        """The wrapped cell's zero state, made on the device."""
        with name_scope(type(self).__name__ + "ZeroState", values=[batch_size]):
            with device(self._device):
                return self.cell.zero_state(batch_size, dtype)

    def _call_wrapped_cell(self, inputs: Any, state: Any, cell_call_fn: Callable[..., Any],
                           **kwargs: Any) -> tuple[Any, Any]:
        with device(self._device):
            return cell_call_fn(inputs, state, **kwargs)


API: dict[str, Any] = {}
for _name, _obj in [("RNNCell", RNNCell), ("BasicRNNCell", BasicRNNCell),
                    ("BasicLSTMCell", BasicLSTMCell), ("LSTMCell", LSTMCell),
                    ("GRUCell", GRUCell), ("MultiRNNCell", MultiRNNCell),
                    ("DropoutWrapper", DropoutWrapper), ("ResidualWrapper", ResidualWrapper),
                    ("DeviceWrapper", DeviceWrapper), ("LSTMStateTuple", LSTMStateTuple)]:
    API[f"nn.rnn_cell.{_name}"] = _obj
