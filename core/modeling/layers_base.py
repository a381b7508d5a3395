"""The base of ``tf.layers``: :class:`Layer` and :class:`InputSpec` (TF 1.15's
``tf.compat.v1.layers.Layer``, a Keras layer with TF1 variable-scope semantics).

A layer gets its variable scope the first time it is called (or at construction when
the functional form passes ``name``): ``variable_scope(None, default_name=<snake case of
the class>)``, so unnamed layers are ``dense``, ``dense_1`` ... per graph and inside any
enclosing scope, as in TF. Its ops are built in that scope's name scope; a second call
re-enters the same variable scope with ``reuse=True`` and so shares the variables.
``layer.name`` itself follows Keras: the first unnamed ``Dense`` is ``dense_1``.

The helpers here (:func:`smart_cond`, argument normalisation, initializer and activation
look-ups) are shared by :mod:`.layers_conv` and :mod:`.layers`.
"""
from __future__ import annotations

import inspect
import re
import weakref
from collections import defaultdict
from typing import Any, Callable, Sequence

import numpy as np

from ..base import dtypes as _dt
from ..framework.graph import (GraphKeys, Operation, Tensor, api_function, convert_to_tensor,
                               get_collection_ref, get_default_graph, name_scope)
from ..plugin.runtime import require_api
from ..training.variable_scope import get_variable, variable_scope
from ..training.variables import Variable, trainable_variables

__all__ = ["InputSpec", "Layer", "smart_cond", "constant_value"]

REQUIRED_API_NAMES = frozenset({
    "cond", "cast", "shape", "truediv",
    "zeros_initializer", "ones_initializer", "glorot_uniform_initializer",
    "glorot_normal_initializer", "random_normal_initializer",
    "random_uniform_initializer", "truncated_normal_initializer", "orthogonal_initializer",
    "initializers.he_normal", "initializers.he_uniform", "initializers.lecun_normal",
    "initializers.lecun_uniform",
    "nn.relu", "nn.relu6", "nn.elu", "nn.selu", "nn.softplus", "nn.softsign", "nn.softmax",
    "nn.sigmoid", "nn.tanh",
})
require_api(REQUIRED_API_NAMES)

#: per graph: how many unnamed layers of each base name were made (Keras's
#: ``PER_GRAPH_OBJECT_NAME_UIDS``); the first ``Dense()`` is named ``dense_1``
_LAYER_UIDS: "weakref.WeakKeyDictionary[Any, defaultdict[str, int]]" = \
    weakref.WeakKeyDictionary()

# ---------------------------------------------------------------------------------------
# small helpers shared by the layer modules
# ---------------------------------------------------------------------------------------


def to_snake_case(name: str) -> str:
    """``Conv2DTranspose`` -> ``conv2d_transpose`` (Keras's rule)."""
    s = re.sub("(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    s = re.sub("([a-z])([A-Z])", r"\1_\2", s).lower()
    return s if s[0] != "_" else "private" + s


def unique_layer_name(base: str) -> str:
    """``base_1``, ``base_2`` ... per default graph (1-based, as TF 1.15's tf.layers)."""
    uids = _LAYER_UIDS.setdefault(get_default_graph(), defaultdict(int))
    uids[base] += 1
    return f"{base}_{uids[base]}"


def normalize_tuple(value: Any, n: int, name: str) -> tuple[int, ...]:
    """An int or ``n`` ints as a tuple of ``n`` ints.

    :raises ValueError: naming the argument, as Keras does
    """
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * n
    msg = f"The `{name}` argument must be a tuple of {n} integers. Received: {value}"
    try:
        out = tuple(value)
    except TypeError:
        raise ValueError(msg) from None
    if len(out) != n:
        raise ValueError(msg)
    for v in out:
        try:
            int(v)
        except (ValueError, TypeError):
            raise ValueError(f"{msg} including element {v} of type {type(v)}") from None
    return tuple(int(v) for v in out)


def normalize_padding(value: Any) -> str:
    """``'SAME'`` -> ``'same'``; one of valid, same, causal."""
    padding = str(value).lower()
    if padding not in ("valid", "same", "causal"):
        raise ValueError('The `padding` argument must be one of "valid", "same" (or '
                         f'"causal", only for `Conv1D). Received: {value}')
    return padding


def normalize_data_format(value: Any) -> str:
    """``channels_last`` (the default for None) or ``channels_first``."""
    data_format = "channels_last" if value is None else str(value).lower()
    if data_format not in ("channels_first", "channels_last"):
        raise ValueError('The `data_format` argument must be one of "channels_first", '
                         f'"channels_last". Received: {value}')
    return data_format


def convert_data_format(data_format: str, ndim: int) -> str:
    """``channels_last`` with 4 dims -> ``NHWC`` (3: NWC, 5: NDHWC)."""
    last = data_format == "channels_last"
    formats = {3: ("NWC", "NCW"), 4: ("NHWC", "NCHW"), 5: ("NDHWC", "NCDHW")}
    if ndim not in formats:
        raise ValueError(f"Input rank not supported: {ndim}")
    return formats[ndim][0 if last else 1]


def conv_output_length(length: int | None, filter_size: int, padding: str, stride: int,
                       dilation: int = 1) -> int | None:
    """The length of a convolution's output along one axis (None stays None)."""
    if length is None:
        return None
    dilated = filter_size + (filter_size - 1) * (dilation - 1)
    if padding in ("same", "causal"):
        out = length
    elif padding == "valid":
        out = length - dilated + 1
    else:  # full
        out = length + dilated - 1
    return (out + stride - 1) // stride


def deconv_output_length(length: Any, filter_size: int, padding: str,
                         output_padding: int | None = None, stride: int = 0,
                         dilation: int = 1) -> Any:
    """The length of a transposed convolution's output along one axis; ``length`` may
    be an int, None or a scalar tensor (Keras's ``deconv_output_length``)."""
    if length is None:
        return None
    filter_size = filter_size + (filter_size - 1) * (dilation - 1)
    if output_padding is None:
        if padding == "valid":
            return length * stride + max(filter_size - stride, 0)
        if padding == "full":
            return length * stride - (stride + filter_size - 2)
        return length * stride
    pad = {"same": filter_size // 2, "valid": 0, "full": filter_size - 1}[padding]
    return (length - 1) * stride + filter_size - 2 * pad + output_padding


def constant_value(pred: Any) -> bool | None:
    """The build-time value of a ``training``-style flag: a Python bool (or 0/1), a
    constant bool tensor; None when it is known only at run time (a placeholder, a
    variable, a computed tensor).

    :raises TypeError: for anything else, as Keras's ``tf_utils.constant_value``
    """
    if isinstance(pred, Variable):
        return None
    if isinstance(pred, Tensor):
        t = pred
        while t.op.type in ("Identity", "StopGradient"):
            t = t.op.inputs[0]
        if t.op.type == "Const":
            return bool(np.asarray(t.op.node_attrs["value"]))
        return None
    if isinstance(pred, (bool, np.bool_)):
        return bool(pred)
    if isinstance(pred, (int, np.integer)) and pred in (0, 1):
        return bool(pred)
    raise TypeError("`pred` must be a Tensor, a Variable, or a Python bool.")


def smart_cond(pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any],
               name: str | None = None) -> Any:
    """``true_fn()`` or ``false_fn()`` when ``pred`` is known at build time, else
    ``tf.cond(pred, true_fn, false_fn)`` (TF's ``smart_cond``)."""
    if not callable(true_fn) or not callable(false_fn):
        raise TypeError("`true_fn` and `false_fn` must be callable.")
    value = constant_value(pred)
    if value is None:
        return api_function("cond")(pred, true_fn, false_fn, name=name)
    return true_fn() if value else false_fn()


_INITIALIZERS = {
    "zeros": "zeros_initializer", "zero": "zeros_initializer",
    "ones": "ones_initializer", "one": "ones_initializer",
    "glorot_uniform": "glorot_uniform_initializer",
    "glorot_normal": "glorot_normal_initializer",
    "random_normal": "random_normal_initializer",
    "random_uniform": "random_uniform_initializer",
    "truncated_normal": "truncated_normal_initializer",
    "orthogonal": "orthogonal_initializer",
    "he_normal": "initializers.he_normal", "he_uniform": "initializers.he_uniform",
    "lecun_normal": "initializers.lecun_normal",
    "lecun_uniform": "initializers.lecun_uniform",
}


def get_initializer(identifier: Any) -> Any:
    """An initializer: None, a callable, or a Keras name (``'zeros'``, ``'he_normal'``).

    :raises ValueError: for an unknown name
    """
    if identifier is None or callable(identifier):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _INITIALIZERS:
        return api_function(_INITIALIZERS[identifier.lower()])()
    raise ValueError(f"Could not interpret initializer identifier: {identifier!r}")


_ACTIVATIONS = {name: f"nn.{name}" for name in (
    "relu", "relu6", "elu", "selu", "softplus", "softsign", "softmax", "sigmoid", "tanh")}


def get_activation(identifier: Any) -> Callable[[Any], Any] | None:
    """An activation: None, a callable, or a Keras name (``'relu'``; ``'linear'`` is
    None).

    :raises ValueError: for an unknown name
    """
    if identifier is None or callable(identifier):
        return identifier
    if isinstance(identifier, str):
        if identifier == "linear":
            return None
        if identifier in _ACTIVATIONS:
            api_name = _ACTIVATIONS[identifier]
            return lambda x: api_function(api_name)(x)
    raise ValueError(f"Could not interpret activation function identifier: {identifier!r}")


def _flatten(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [leaf for item in x for leaf in _flatten(item)]
    if isinstance(x, dict):
        return [leaf for k in sorted(x) for leaf in _flatten(x[k])]
    return [x]


def _map(fn: Callable[[Any], Any], x: Any) -> Any:
    if isinstance(x, list):
        return [_map(fn, v) for v in x]
    if isinstance(x, tuple):
        return tuple(_map(fn, v) for v in x)
    return fn(x)


def _depends_on(target: Any, sources: Sequence[Any]) -> bool:
    """Whether op/tensor ``target`` is computed from any of ``sources`` (tensors)."""
    wanted = {id(s.op) if isinstance(s, Tensor) else id(s) for s in sources
              if isinstance(s, (Tensor, Operation))}
    if not wanted:
        return False
    start = target.op if isinstance(target, Tensor) else target
    seen: set[int] = set()
    stack = [start]
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        if id(op) in wanted:
            return True
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return False


def _add_to_collection(elements: Sequence[Any], key: str) -> None:
    """Append each element to the collection unless it is there already."""
    ref = get_collection_ref(key)
    present = {id(e) for e in ref}
    for e in elements:
        if id(e) not in present:
            ref.append(e)
            present.add(id(e))


# ---------------------------------------------------------------------------------------
# InputSpec
# ---------------------------------------------------------------------------------------
class InputSpec:
    """What a layer accepts as input (``tf.layers.InputSpec``): a dtype, a shape or a
    rank (``ndim``, ``min_ndim``, ``max_ndim``), and values of given axes
    (``axes={-1: 3}``).

    :raises TypeError: if a key of ``axes`` is not an integer
    :raises ValueError: if an axis is beyond ``ndim``/``max_ndim``
    """

    def __init__(self, dtype: Any = None, shape: Any = None, ndim: int | None = None,
                 max_ndim: int | None = None, min_ndim: int | None = None,
                 axes: dict[int, int] | None = None):
        """Record the spec; ``shape`` also sets ``ndim``."""
        self.dtype = _dt.as_dtype(dtype).name if dtype is not None else None
        if shape is not None:
            self.ndim: int | None = len(shape)
            self.shape: Any = shape
        else:
            self.ndim = ndim
            self.shape = None
        self.max_ndim = max_ndim
        self.min_ndim = min_ndim
        try:
            axes = axes or {}
            self.axes = {int(k): axes[k] for k in axes}
        except (ValueError, TypeError):
            raise TypeError("The keys in axes must be integers.") from None
        if self.axes and (self.ndim is not None or self.max_ndim is not None):
            max_dim = (self.ndim if self.ndim else self.max_ndim) - 1  # type: ignore
            max_axis = max(self.axes)
            if max_axis > max_dim:
                raise ValueError(f"Axis {max_axis} is greater than the maximum allowed "
                                 f"value: {max_dim}")

    def __repr__(self) -> str:
        spec = [f"dtype={self.dtype}" if self.dtype else "",
                f"shape={self.shape}" if self.shape else "",
                f"ndim={self.ndim}" if self.ndim else "",
                f"max_ndim={self.max_ndim}" if self.max_ndim else "",
                f"min_ndim={self.min_ndim}" if self.min_ndim else "",
                f"axes={self.axes}" if self.axes else ""]
        return "InputSpec(%s)" % ", ".join(x for x in spec if x)

    def get_config(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": self.shape, "ndim": self.ndim,
                "max_ndim": self.max_ndim, "min_ndim": self.min_ndim, "axes": self.axes}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "InputSpec":
        return cls(**config)


def assert_input_compatibility(input_spec: Any, inputs: Any, layer_name: str) -> None:
    """Check ``inputs`` against a layer's ``input_spec`` (one spec or a list).

    :raises TypeError: when an input is not a tensor
    :raises ValueError: naming the layer and the input, with TF 1.15's messages
    """
    if not input_spec:
        return
    inputs = _flatten(inputs)
    for x in inputs:
        if not hasattr(x, "shape"):
            raise TypeError(f"Inputs to a layer should be tensors. Got: {x}")
    specs = _flatten(input_spec)
    if len(inputs) != len(specs):
        raise ValueError(f"Layer {layer_name} expects {len(specs)} inputs, but it received "
                         f"{len(inputs)} input tensors. Inputs received: {inputs}")
    for i, (x, spec) in enumerate(zip(inputs, specs)):
        if spec is None:
            continue
        head = f"Input {i} of layer {layer_name} is incompatible with the layer: "
        shape = x.shape
        ndim = shape.ndims
        if spec.ndim is not None or spec.min_ndim is not None or spec.max_ndim is not None:
            if ndim is None:
                raise ValueError(head + "its rank is undefined, but the layer requires a "
                                 "defined rank.")
        full = f". Full shape received: {shape.as_list() if ndim is not None else None}"
        if spec.ndim is not None and ndim != spec.ndim:
            raise ValueError(head + f"expected ndim={spec.ndim}, found ndim={ndim}{full}")
        if spec.max_ndim is not None and ndim is not None and ndim > spec.max_ndim:
            raise ValueError(head + f"expected max_ndim={spec.max_ndim}, found "
                                    f"ndim={ndim}")
        if spec.min_ndim is not None and ndim is not None and ndim < spec.min_ndim:
            raise ValueError(head + f"expected min_ndim={spec.min_ndim}, found "
                                    f"ndim={ndim}{full}")
        if spec.dtype is not None and x.dtype.base_dtype.name != spec.dtype:
            raise ValueError(head + f"expected dtype={spec.dtype}, found "
                                    f"dtype={x.dtype.base_dtype.name}")
        if spec.axes and ndim is not None:
            dims = shape.as_list()
            for axis, value in spec.axes.items():
                if value is not None and dims[int(axis)] not in (value, None):
                    raise ValueError(head + f"expected axis {axis} of input shape to have "
                                            f"value {value} but received input with shape "
                                            f"{shape}")
        if spec.shape is not None and ndim is not None:
            for spec_dim, dim in zip(spec.shape, shape.as_list()):
                if spec_dim is not None and dim is not None and spec_dim != dim:
                    raise ValueError(f"Input {i} is incompatible with layer {layer_name}: "
                                     f"expected shape={spec.shape}, found "
                                     f"shape={shape.as_list()}")


# ---------------------------------------------------------------------------------------
# Layer
# ---------------------------------------------------------------------------------------
_ALLOWED_KWARGS = frozenset({"input_shape", "batch_input_shape", "batch_size", "weights",
                             "autocast", "dynamic", "_scope", "_reuse"})


class Layer:
    """The base class of ``tf.layers`` (``tf.layers.Layer``).

    Subclasses create their variables in :meth:`build` (called once, with the input
    shape, on the first call) through :meth:`add_weight`, and compute their outputs in
    :meth:`call`. ``layer(inputs)`` checks ``inputs`` against :attr:`input_spec`,
    builds, calls, adds activity-regularization losses and puts the layer's
    :attr:`updates` into ``tf.GraphKeys.UPDATE_OPS``.

    :param trainable: whether the layer's variables are trainable
    :param name: the layer's name (and variable scope); unique default from the class
    :param dtype: the dtype of the variables; by default the first input's dtype
    :param activity_regularizer: a callable on each output whose result (divided by the
        batch size) is added to :attr:`losses` and ``REGULARIZATION_LOSSES``
    """

    def __init__(self, trainable: bool = True, name: Any = None, dtype: Any = None,
                 activity_regularizer: Callable[[Any], Any] | None = None, **kwargs: Any):
        """Check the keyword arguments, name the layer and, for ``_scope`` (the
        functional forms' ``name``), open its variable scope now."""
        for kwarg in kwargs:
            if kwarg not in _ALLOWED_KWARGS:
                raise TypeError("Keyword argument not understood:", kwarg)
        scope = kwargs.pop("_scope", None)
        self._reuse = kwargs.pop("_reuse", None)
        self._trainable = bool(trainable)
        self._dtype = None if dtype is None else _dt.as_dtype(dtype).base_dtype.name
        self._activity_regularizer = activity_regularizer
        self._trainable_weights: list[Any] = []
        self._non_trainable_weights: list[Any] = []
        self._losses: list[tuple[Any, bool, bool]] = []  # (loss, unconditional, callable)
        self._updates: list[tuple[Any, bool]] = []
        self._input_spec: Any = None
        self._call_inputs: Any = None
        self.built = False
        self.supports_masking = False
        self._init_set_name(name)
        self._call_arg_names = set(inspect.signature(self.call).parameters)
        self._call_has_scope_arg = "scope" in self._call_arg_names
        self._always_reuse_variable_scope: Any = None
        self._current_scope: Any = None
        if scope:
            with variable_scope(scope) as captured_scope:
                self._scope: Any = captured_scope
        else:
            self._scope = None

    def _init_set_name(self, name: Any) -> None:
        base = to_snake_case(type(self).__name__)
        if hasattr(name, "original_name_scope"):  # a VariableScope
            self._name = unique_layer_name(base)
            self._base_name = name.name
        elif name:
            self._name = str(name)
            self._base_name = str(name)
        else:
            self._name = unique_layer_name(base)
            self._base_name = base

    # -- properties ------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self) -> str | None:
        """The dtype name of the layer's variables (None until known)."""
        return self._dtype

    @property
    def trainable(self) -> bool:
        return self._trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self._trainable = bool(value)

    @property
    def activity_regularizer(self) -> Callable[[Any], Any] | None:
        return self._activity_regularizer

    @activity_regularizer.setter
    def activity_regularizer(self, regularizer: Callable[[Any], Any] | None) -> None:
        self._activity_regularizer = regularizer

    @property
    def input_spec(self) -> Any:
        return self._input_spec

    @input_spec.setter
    def input_spec(self, value: Any) -> None:
        for v in _flatten(value):
            if v is not None and not isinstance(v, InputSpec):
                raise TypeError("Layer input_spec must be an instance of InputSpec. "
                                f"Got: {v}")
        self._input_spec = value

    @property
    def scope_name(self) -> str:
        """The name of the layer's variable scope (known once it has been called).

        :raises ValueError: before the first call
        """
        if not self._scope:
            raise ValueError(f'No name available for layer scope because the layer '
                             f'"{self._name}" has not been used yet. The scope name  is '
                             'determined the first time the layer instance is called. You '
                             'must therefore call the layer before querying `scope_name`.')
        return self._scope.name

    @property
    def trainable_weights(self) -> list[Any]:
        return list(self._trainable_weights) if self._trainable else []

    @property
    def non_trainable_weights(self) -> list[Any]:
        if self._trainable:
            return list(self._non_trainable_weights)
        return self._trainable_weights + self._non_trainable_weights

    @property
    def weights(self) -> list[Any]:
        """Trainable weights, then the others."""
        return self.trainable_weights + self.non_trainable_weights

    trainable_variables = trainable_weights
    non_trainable_variables = non_trainable_weights
    variables = weights

    @property
    def losses(self) -> list[Any]:
        """Losses added by :meth:`add_loss` as tensors (activity regularization), then
        those added as callables (weight regularization), as Keras orders them."""
        return ([loss for loss, _, fn in self._losses if not fn] +
                [loss for loss, _, fn in self._losses if fn])

    @property
    def updates(self) -> list[Any]:
        """Update ops (moving averages); empty for a layer that is not trainable."""
        if not self._trainable:
            return []
        return [u for u, _ in self._updates]

    def get_losses_for(self, inputs: Any) -> list[Any]:
        """Losses that do not depend on inputs (``inputs=None``) or that depend on
        ``inputs``."""
        if inputs is None:
            return [loss for loss, uncond, _ in self._losses if uncond]
        srcs = _flatten(inputs)
        return [loss for loss, uncond, _ in self._losses
                if not uncond and _depends_on(loss, srcs)]

    def get_updates_for(self, inputs: Any) -> list[Any]:
        """Updates that do not depend on inputs (``inputs=None``) or that depend on
        ``inputs``."""
        if inputs is None:
            return [u for u, uncond in self._updates if uncond]
        srcs = _flatten(inputs)
        return [u for u, uncond in self._updates if not uncond and _depends_on(u, srcs)]

    # -- building blocks ---------------------------------------------------------------
    def build(self, input_shape: Any) -> None:
        """Create the layer's variables (subclasses); called once before :meth:`call`."""
        self.built = True

    def call(self, inputs: Any, **kwargs: Any) -> Any:
        """The layer's computation (subclasses); the base returns ``inputs``."""
        return inputs

    def compute_output_shape(self, input_shape: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.compute_output_shape")

    def apply(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        """The same as calling the layer."""
        return self.__call__(inputs, *args, **kwargs)

    def count_params(self) -> int:
        """The number of scalars in the layer's weights.

        :raises ValueError: if the layer has not been built
        """
        if not self.built:
            raise ValueError(f"You tried to call `count_params` on {self.name}, but the "
                             "layer isn't built. You can build it manually via: "
                             f"`{self.name}.build(batch_input_shape)`.")
        return int(sum(np.prod(w.shape.as_list()) for w in self.weights))

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "trainable": self.trainable, "dtype": self.dtype}

    def add_loss(self, losses: Any, inputs: Any = None) -> None:
        """Add loss tensors (or zero-argument callables giving one) to :attr:`losses`
        and to ``tf.GraphKeys.REGULARIZATION_LOSSES``; ``inputs`` not None marks them
        as depending on inputs."""
        new = []
        for loss in _flatten(losses):
            is_fn = callable(loss)
            if is_fn:
                loss = loss()
            if loss is None:
                continue
            if not isinstance(loss, Tensor):
                loss = convert_to_tensor(loss, dtype=_dt.float32)
            self._losses.append((loss, inputs is None, is_fn))
            new.append(loss)
        _add_to_collection(new, GraphKeys.REGULARIZATION_LOSSES)

    def add_update(self, updates: Any, inputs: Any = None) -> None:
        """Add update ops (or tensors, or zero-argument callables making them) to
        :attr:`updates`. An update computed from the inputs of the current call is
        conditional on them (:meth:`get_updates_for`)."""
        relevant = _flatten(self._call_inputs) if self._call_inputs is not None else []
        for u in _flatten(updates):
            if callable(u):
                u = u()
            if isinstance(u, Tensor):
                u = u.op
            elif not isinstance(u, Operation):
                u = convert_to_tensor(u).op
            self._updates.append((u, not _depends_on(u, relevant)))

    def add_weight(self, name: str, shape: Any, dtype: Any = None, initializer: Any = None,
                   regularizer: Callable[[Any], Any] | None = None,
                   trainable: bool | None = None, constraint: Callable | None = None,
                   use_resource: bool | None = None, synchronization: Any = None,
                   aggregation: Any = None, partitioner: Callable | None = None,
                   **kwargs: Any) -> Any:
        """Create (or, on reuse, get) the variable ``<layer scope>/<name>`` with
        ``tf.get_variable`` and track it in :attr:`weights`.

        ``initializer`` defaults to the scope's initializer, then glorot_uniform for
        floats and zeros for integers; a new variable's ``regularizer`` loss is added
        to :attr:`losses`. ``synchronization=ON_READ`` makes the variable
        non-trainable.

        :raises TypeError: for an unknown keyword argument
        :raises ValueError: for ``trainable=True`` with ``synchronization=ON_READ``, or
            a non-float variable without an initializer
        """
        for kwarg in kwargs:
            if kwarg != "experimental_autocast":
                raise TypeError("Unknown keyword argument:", kwarg)
        on_read = synchronization is not None and \
            str(getattr(synchronization, "name", synchronization)).upper() == "ON_READ"
        if on_read:
            if trainable:
                raise ValueError("Synchronization value can be set to "
                                 "VariableSynchronization.ON_READ only for non-trainable "
                                 "variables. You have specified trainable=True and "
                                 "synchronization=VariableSynchronization.ON_READ.")
            trainable = False
        elif trainable is None:
            trainable = True
        if dtype is None:
            dtype = self._dtype or _dt.float32
        dtype = _dt.as_dtype(dtype).base_dtype
        self._set_scope(None)
        reuse = self.built or self._reuse
        existing = {id(v) for v in get_collection_ref(GraphKeys.GLOBAL_VARIABLES)}
        with variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False) as scope:
            self._current_scope = scope
            with name_scope(self._name_scope()):
                initializer = get_initializer(initializer)
                if initializer is None:
                    initializer = scope.initializer
                if initializer is None:
                    if dtype.is_floating:
                        initializer = api_function("glorot_uniform_initializer")()
                    elif dtype.is_integer or dtype.is_unsigned or dtype.is_bool:
                        initializer = api_function("zeros_initializer")()
                    else:
                        raise ValueError(f"An initializer for variable {name} of type "
                                         f"{dtype} is required for layer {self.name}")
                variable = get_variable(name, shape=shape, dtype=dtype,
                                        initializer=initializer,
                                        trainable=trainable and self._trainable,
                                        constraint=constraint, partitioner=partitioner,
                                        use_resource=use_resource)
                if regularizer is not None and id(variable) not in existing:
                    def weight_loss() -> Any:
                        with name_scope(name + "/Regularizer"):
                            return regularizer(variable)

                    self.add_loss(weight_loss)
        if trainable and self._trainable and \
                not any(v is variable for v in trainable_variables()):
            self._non_trainable_weights.append(variable)
        elif trainable:
            self._trainable_weights.append(variable)
        else:
            self._non_trainable_weights.append(variable)
        return variable

    def add_variable(self, *args: Any, **kwargs: Any) -> Any:
        """Deprecated alias of :meth:`add_weight`."""
        return self.add_weight(*args, **kwargs)

    # -- scopes and calling ----------------------------------------------------------
    def _name_scope(self) -> str:
        return self._current_scope.original_name_scope

    def _set_scope(self, scope: Any = None) -> None:
        if self._scope is None:
            if self._reuse:
                with variable_scope(scope if scope is not None else self._base_name) as vs:
                    self._scope = vs
            else:
                with variable_scope(scope, default_name=self._base_name) as vs:
                    self._scope = vs

    def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        """Build the layer if needed and apply it to ``inputs`` in its scope.

        ``scope=`` (first call only) names the variable scope. A ``training`` argument
        is dropped when :meth:`call` does not take one.

        :returns: the outputs of :meth:`call`
        :raises ValueError: when ``inputs`` do not fit :attr:`input_spec` (naming the
            layer), or :meth:`call` returns None
        """
        scope = kwargs.pop("scope", None)
        self._set_scope(scope)
        if self.built:
            if self._always_reuse_variable_scope is None:
                self._always_reuse_variable_scope = variable_scope(
                    self._scope, reuse=True, auxiliary_name_scope=False)
            scope_cm = self._always_reuse_variable_scope
        else:
            scope_cm = variable_scope(self._scope, reuse=self._reuse,
                                      auxiliary_name_scope=False)
        if "training" in kwargs and "training" not in self._call_arg_names:
            kwargs.pop("training")
        with scope_cm as vs:
            self._current_scope = vs
            if self._call_has_scope_arg:
                kwargs["scope"] = vs
            inputs = _map(lambda x: convert_to_tensor(x)
                          if isinstance(x, (np.ndarray, float, int)) else x, inputs)
            assert_input_compatibility(self._input_spec, inputs, self.name)
            with name_scope(self._name_scope()):
                self._maybe_build(inputs)
                self._call_inputs = inputs
                try:
                    outputs = self.call(inputs, *args, **kwargs)
                finally:
                    self._call_inputs = None
                if outputs is None:
                    raise ValueError("A layer's `call` method should return a Tensor or a "
                                     f"list of Tensors, not None (layer: {self.name}).")
                self._handle_activity_regularization(inputs, outputs)
        _add_to_collection(self.updates, GraphKeys.UPDATE_OPS)
        return outputs

    def _maybe_build(self, inputs: Any) -> None:
        if self.built:
            return
        leaves = _flatten(inputs)
        if self._dtype is None:
            try:
                self._dtype = leaves[0].dtype.base_dtype.name
            except (AttributeError, IndexError):
                self._dtype = None
        shapes = None
        if all(hasattr(x, "shape") for x in leaves):
            shapes = _map(lambda x: x.shape, inputs)
        self.build(shapes)
        self.built = True

    def _handle_activity_regularization(self, inputs: Any, outputs: Any) -> None:
        if not self._activity_regularizer:
            return
        with name_scope("ActivityRegularizer"):
            for output in _flatten(outputs):
                loss = self._activity_regularizer(output)
                batch = api_function("cast")(api_function("shape")(output)[0],
                                             loss.dtype.base_dtype)
                self.add_loss(loss / batch, inputs=inputs)

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.{type(self).__name__} {self.name!r}>"
