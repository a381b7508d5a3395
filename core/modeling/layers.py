"""``tf.layers`` (TF 1.15's ``tf.compat.v1.layers``): layer classes and their functional
forms.

The classes live here (``Dense``, ``Dropout``, ``Flatten``, ``BatchNormalization``), in
:mod:`.layers_conv` (convolutions and pooling) and :mod:`.layers_base` (``Layer``,
``InputSpec``). Each lowercase function makes a layer and applies it once:
``tf.layers.dense(x, 3, name="fc", reuse=tf.AUTO_REUSE)`` builds ``fc/kernel`` and
``fc/bias`` in the current variable scope, or reuses them.

``BatchNormalization`` follows TF 1.15: ``fused=None`` means the fused kernel for 4-D
inputs normalised over axis 1 or 3 (float16/bfloat16/float32), whose moving variance is
updated with the unbiased batch variance, and the composite ``tf.nn`` ops otherwise
(biased batch variance). Its moving-average updates are built when ``training`` is True
or a tensor, and are added to ``tf.GraphKeys.UPDATE_OPS``. ``renorm`` and
``virtual_batch_size`` are not supported.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..base import dtypes as _dt
from ..base.tensor_shape import TensorShape, as_shape
from ..framework.graph import api_function, colocate_with, convert_to_tensor, name_scope
from ..plugin.runtime import require_api
from .layers_base import (InputSpec, Layer, constant_value, get_activation,
                          get_initializer, normalize_data_format, smart_cond)
from .layers_conv import (AveragePooling1D, AveragePooling2D, AveragePooling3D, Conv1D,
                          Conv2D, Conv2DTranspose, Conv3D, Conv3DTranspose, MaxPooling1D,
                          MaxPooling2D, MaxPooling3D, SeparableConv1D, SeparableConv2D)

__all__ = [
    "Layer", "InputSpec", "Dense", "Dropout", "Flatten", "BatchNormalization", "Conv1D",
    "Conv2D", "Conv3D", "Conv2DTranspose", "Conv3DTranspose", "SeparableConv1D",
    "SeparableConv2D", "MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "AveragePooling1D",
    "AveragePooling2D", "AveragePooling3D", "dense", "dropout", "flatten",
    "batch_normalization", "conv1d", "conv2d", "conv3d", "conv2d_transpose",
    "conv3d_transpose", "separable_conv1d", "separable_conv2d", "max_pooling1d",
    "max_pooling2d", "max_pooling3d", "average_pooling1d", "average_pooling2d",
    "average_pooling3d",
]

REQUIRED_API_NAMES = frozenset({
    "tensordot", "matmul", "nn.bias_add", "nn.dropout", "identity", "shape", "reshape",
    "transpose", "stack", "cast", "constant", "nn.moments", "nn.batch_normalization",
    "nn.fused_batch_norm", "ones_like", "zeros_like",
})
require_api(REQUIRED_API_NAMES)

Fn = Callable[..., Any]


def _op(name: str) -> Fn:
    return api_function(name)


# ---------------------------------------------------------------------------------------
# Dense, Dropout, Flatten
# ---------------------------------------------------------------------------------------
class Dense(Layer):
    """A densely connected layer, ``activation(inputs @ kernel + bias)``
    (``tf.layers.Dense``). Inputs of rank above 2 are contracted on their last axis.

    :raises ValueError: when the inputs' last dimension is unknown
    :raises TypeError: for a non-floating layer dtype
    """

    def __init__(self, units: int, activation: Fn | None = None, use_bias: bool = True,
                 kernel_initializer: Any = None, bias_initializer: Any = None,
                 kernel_regularizer: Fn | None = None, bias_regularizer: Fn | None = None,
                 activity_regularizer: Fn | None = None, kernel_constraint: Fn | None = None,
                 bias_constraint: Fn | None = None, trainable: bool = True,
                 name: str | None = None, **kwargs: Any):
        """Record the layer's arguments; variables are made by :meth:`build`."""
        super().__init__(trainable=trainable, name=name,
                         activity_regularizer=activity_regularizer, **kwargs)
        self.units = int(units)
        self.activation = get_activation(activation)
        self.use_bias = use_bias
        self.kernel_initializer = get_initializer(kernel_initializer)
        self.bias_initializer = get_initializer(
            bias_initializer if bias_initializer is not None else "zeros")
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.kernel_constraint = kernel_constraint
        self.bias_constraint = bias_constraint
        self.supports_masking = True
        self.input_spec = InputSpec(min_ndim=2)

    def build(self, input_shape: Any) -> None:
        """Create ``kernel`` ([last input dim, units]) and ``bias`` ([units])."""
        dtype = _dt.as_dtype(self.dtype or _dt.float32)
        if not (dtype.is_floating or dtype.is_complex):
            raise TypeError("Unable to build `Dense` layer with non-floating point dtype "
                            f"{dtype.name}")
        input_shape = as_shape(input_shape)
        last = input_shape.as_list()[-1] if input_shape.ndims else None
        if last is None:
            raise ValueError("The last dimension of the inputs to `Dense` should be "
                             "defined. Found `None`.")
        self.input_spec = InputSpec(min_ndim=2, axes={-1: last})
        self.kernel = self.add_weight(
            "kernel", shape=[last, self.units], initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer, constraint=self.kernel_constraint,
            dtype=self.dtype, trainable=True)
        if self.use_bias:
            self.bias = self.add_weight(
                "bias", shape=[self.units], initializer=self.bias_initializer,
                regularizer=self.bias_regularizer, constraint=self.bias_constraint,
                dtype=self.dtype, trainable=True)
        else:
            self.bias = None
        self.built = True

    def call(self, inputs: Any) -> Any:
        rank = inputs.shape.ndims
        if rank is not None and rank > 2:
            outputs = _op("tensordot")(inputs, self.kernel, [[rank - 1], [0]])
            outputs.set_shape(inputs.shape.as_list()[:-1] + [self.units])
        else:
            outputs = _op("matmul")(inputs, self.kernel)
        if self.use_bias:
            outputs = _op("nn.bias_add")(outputs, self.bias)
        if self.activation is not None:
            return self.activation(outputs)
        return outputs

    def compute_output_shape(self, input_shape: Any) -> TensorShape:
        input_shape = as_shape(input_shape).with_rank_at_least(2)
        if input_shape.as_list()[-1] is None:
            raise ValueError("The innermost dimension of input_shape must be defined, but "
                             f"saw: {input_shape}")
        return TensorShape(input_shape.as_list()[:-1] + [self.units])


class Dropout(Layer):
    """Drops inputs with probability ``rate`` while training, scaling the kept ones by
    ``1 / (1 - rate)`` (``tf.layers.Dropout``); ``training`` is a Python bool or a bool
    tensor (then a ``tf.cond``)."""

    def __init__(self, rate: Any = 0.5, noise_shape: Any = None, seed: int | None = None,
                 name: str | None = None, **kwargs: Any):
        super().__init__(name=name, **kwargs)
        self.rate = rate
        self.noise_shape = noise_shape
        self.seed = seed
        self.supports_masking = True

    def _get_noise_shape(self, inputs: Any) -> Any:
        if self.noise_shape is None:
            return None
        concrete = _op("shape")(inputs)
        dims = [concrete[i] if v is None else v for i, v in enumerate(self.noise_shape)]
        return _op("stack")(dims) if any(v is None for v in self.noise_shape) \
            else convert_to_tensor(dims)

    def call(self, inputs: Any, training: Any = False) -> Any:
        def dropped() -> Any:
            return _op("nn.dropout")(inputs, noise_shape=self._get_noise_shape(inputs),
                                     seed=self.seed, rate=self.rate)

        return smart_cond(training, dropped, lambda: _op("identity")(inputs))

    def compute_output_shape(self, input_shape: Any) -> TensorShape:
        return as_shape(input_shape)


class Flatten(Layer):
    """Flattens each example to one dimension, keeping the batch axis
    (``tf.layers.Flatten``); ``channels_first`` inputs are first made channels-last."""

    def __init__(self, data_format: str | None = "channels_last", **kwargs: Any):
        super().__init__(**kwargs)
        self.data_format = normalize_data_format(data_format)
        self.input_spec = InputSpec(min_ndim=1)

    def call(self, inputs: Any) -> Any:
        ndim = inputs.shape.ndims
        if self.data_format == "channels_first" and ndim is not None and ndim > 1:
            inputs = _op("transpose")(inputs, perm=[0, *range(2, ndim), 1])
        batch = inputs.shape.as_list()[0] if ndim else None
        outputs = _op("reshape")(inputs, (batch or _op("shape")(inputs)[0], -1))
        outputs.set_shape(self.compute_output_shape(inputs.shape))
        return outputs

    def compute_output_shape(self, input_shape: Any) -> TensorShape:
        dims = as_shape(input_shape).as_list()
        if not dims:
            return TensorShape([1])
        rest = dims[1:]
        return TensorShape([dims[0], int(np.prod(rest)) if all(rest) else None])


# ---------------------------------------------------------------------------------------
# BatchNormalization
# ---------------------------------------------------------------------------------------
class BatchNormalization(Layer):
    """Batch normalization (``tf.layers.BatchNormalization``, TF 1.15).

    With ``training`` True the batch's mean and variance over every axis but ``axis``
    normalise the inputs, and ``moving_mean``/``moving_variance`` get the updates
    ``moving = moving * momentum + batch * (1 - momentum)`` (ops in :attr:`updates` and
    ``UPDATE_OPS``); with False the moving statistics are used; a bool tensor chooses at
    run time.

    :raises TypeError: if ``axis`` is not an int or a list
    :raises NotImplementedError: for ``renorm`` or ``virtual_batch_size``
    """

    def __init__(self, axis: Any = -1, momentum: float = 0.99, epsilon: float = 1e-3,
                 center: bool = True, scale: bool = True, beta_initializer: Any = None,
                 gamma_initializer: Any = None, moving_mean_initializer: Any = None,
                 moving_variance_initializer: Any = None,
                 beta_regularizer: Fn | None = None, gamma_regularizer: Fn | None = None,
                 beta_constraint: Fn | None = None, gamma_constraint: Fn | None = None,
                 renorm: bool = False, renorm_clipping: Any = None,
                 renorm_momentum: float = 0.99, fused: bool | None = None,
                 trainable: bool = True, virtual_batch_size: int | None = None,
                 adjustment: Fn | None = None, name: str | None = None, **kwargs: Any):
        """Record the arguments (TF 1.15's defaults); ``fused=None`` means fused when
        the input allows it."""
        super().__init__(trainable=trainable, name=name, **kwargs)
        if isinstance(axis, (list, tuple)):
            self.axis: Any = list(axis)
        elif isinstance(axis, (int, np.integer)):
            self.axis = int(axis)
        else:
            raise TypeError(f"axis must be int or list, type given: {type(axis)}")
        if renorm:
            raise NotImplementedError("BatchNormalization(renorm=True) is not supported by "
                                      "flowrt")
        if virtual_batch_size is not None:
            raise NotImplementedError("BatchNormalization(virtual_batch_size=...) is not "
                                      "supported by flowrt")
        self.momentum = momentum
        self.epsilon = epsilon
        self.center = center
        self.scale = scale
        self.beta_initializer = get_initializer(beta_initializer or "zeros")
        self.gamma_initializer = get_initializer(gamma_initializer or "ones")
        self.moving_mean_initializer = get_initializer(moving_mean_initializer or "zeros")
        self.moving_variance_initializer = get_initializer(
            moving_variance_initializer or "ones")
        self.beta_regularizer = beta_regularizer
        self.gamma_regularizer = gamma_regularizer
        self.beta_constraint = beta_constraint
        self.gamma_constraint = gamma_constraint
        self.renorm = renorm
        self.renorm_clipping = renorm_clipping
        self.renorm_momentum = renorm_momentum
        self.virtual_batch_size = virtual_batch_size
        self.adjustment = adjustment
        self.fused = True if fused is None else fused
        self.supports_masking = True

    def _fused_can_be_used(self, ndims: int) -> bool:
        axis = [self.axis] if isinstance(self.axis, int) else self.axis
        return (ndims == 4 and len(axis) == 1 and axis[0] in (-3, -1, 1, 3)
                and self.adjustment is None
                and (self.dtype or "float32") in ("float16", "bfloat16", "float32"))

    @property
    def _param_dtype(self) -> _dt.DType:
        if self.dtype in ("float16", "bfloat16"):
            return _dt.float32
        return _dt.as_dtype(self.dtype or _dt.float32)

    def build(self, input_shape: Any) -> None:
        """Resolve ``axis`` against the input rank, choose fused or not, and create
        ``gamma``, ``beta``, ``moving_mean`` and ``moving_variance``."""
        input_shape = as_shape(input_shape)
        if not input_shape.ndims:
            raise ValueError(f"Input has undefined rank: {input_shape}")
        ndims = input_shape.ndims
        if isinstance(self.axis, int):
            self.axis = [self.axis]
        self.axis = [a + ndims if a < 0 else a for a in self.axis]
        for a in self.axis:
            if a < 0 or a >= ndims:
                raise ValueError(f"Invalid axis: {a}")
        if len(self.axis) != len(set(self.axis)):
            raise ValueError(f"Duplicate axis: {self.axis}")
        if self.fused:
            self.fused = self._fused_can_be_used(ndims)
        if self.fused:
            self._data_format = "NCHW" if self.axis == [1] else "NHWC"
        dims = input_shape.as_list()
        axis_to_dim = {a: dims[a] for a in self.axis}
        for a, d in axis_to_dim.items():
            if d is None:
                raise ValueError(f"Input has undefined `axis` dimension. Input shape: "
                                 f"{input_shape}")
        self.input_spec = InputSpec(ndim=ndims, axes=axis_to_dim)
        if len(axis_to_dim) == 1:
            param_shape: Any = [list(axis_to_dim.values())[0]]
        else:
            param_shape = [axis_to_dim.get(i, 1) for i in range(ndims)]
        self._param_shape = param_shape
        pdt = self._param_dtype
        self.gamma = self.add_weight(
            name="gamma", shape=param_shape, dtype=pdt, initializer=self.gamma_initializer,
            regularizer=self.gamma_regularizer, constraint=self.gamma_constraint,
            trainable=True) if self.scale else None
        self.beta = self.add_weight(
            name="beta", shape=param_shape, dtype=pdt, initializer=self.beta_initializer,
            regularizer=self.beta_regularizer, constraint=self.beta_constraint,
            trainable=True) if self.center else None
        self.moving_mean = self.add_weight(
            name="moving_mean", shape=param_shape, dtype=pdt,
            initializer=self.moving_mean_initializer, trainable=False)
        self.moving_variance = self.add_weight(
            name="moving_variance", shape=param_shape, dtype=pdt,
            initializer=self.moving_variance_initializer, trainable=False)
        self.built = True

    def _assign_moving_average(self, variable: Any, value: Any, momentum: Any) -> Any:
        """``variable -= (variable - value) * (1 - momentum)``, colocated with it."""
        with name_scope("AssignMovingAvg") as scope:
            with colocate_with(variable):
                vdt = variable.dtype.base_dtype
                decay = convert_to_tensor(1.0 - momentum, name="decay")
                if decay.dtype.base_dtype != vdt:
                    decay = _op("cast")(decay, vdt)
                delta = (variable - _op("cast")(value, vdt)) * decay
                return variable.assign_sub(delta, name=scope)

    def _fused_batch_norm(self, inputs: Any, training: Any) -> Any:
        """Normalise with ``tf.nn.fused_batch_norm`` (4-D inputs); its batch variance,
        with Bessel's correction, updates ``moving_variance`` as in TF 1.15."""
        pdt = self._param_dtype
        beta = self.beta if self.center else _op("constant")(0.0, dtype=pdt,
                                                             shape=self._param_shape)
        gamma = self.gamma if self.scale else _op("constant")(1.0, dtype=pdt,
                                                              shape=self._param_shape)
        fused = _op("nn.fused_batch_norm")

        def train() -> Any:
            return fused(inputs, gamma, beta, epsilon=self.epsilon,
                         data_format=self._data_format)

        def infer() -> Any:
            return fused(inputs, gamma, beta, mean=self.moving_mean,
                         variance=self.moving_variance, epsilon=self.epsilon,
                         is_training=False, data_format=self._data_format)

        output, mean, variance = smart_cond(training, train, infer)
        value = constant_value(training)
        if value is None or value:
            if value is None:
                momentum = smart_cond(training, lambda: self.momentum, lambda: 1.0)
            else:
                momentum = convert_to_tensor(self.momentum)
            self.add_update(lambda: self._assign_moving_average(self.moving_mean, mean,
                                                                momentum))
            self.add_update(lambda: self._assign_moving_average(self.moving_variance,
                                                                variance, momentum))
        return output

    def call(self, inputs: Any, training: Any = False) -> Any:
        """Normalise ``inputs`` with the batch statistics (``training`` True), the
        moving ones (False), or either by a ``tf.cond`` (a bool tensor), and add the
        moving-average updates."""
        if self.fused:
            return self._fused_batch_norm(inputs, training)
        input_shape = inputs.shape
        ndims = input_shape.ndims
        reduction_axes = [i for i in range(ndims) if i not in self.axis]
        broadcast_shape = [1] * ndims
        broadcast_shape[self.axis[0]] = input_shape.as_list()[self.axis[0]]

        def _broadcast(v: Any) -> Any:
            if v is not None and v.shape.ndims != ndims and \
                    reduction_axes != list(range(ndims - 1)):
                return _op("reshape")(v, broadcast_shape)
            return v

        scale, offset = _broadcast(self.gamma), _broadcast(self.beta)
        value = constant_value(training)
        if value is False:
            mean, variance = self.moving_mean, self.moving_variance
        else:
            if self.adjustment:
                adj_scale, adj_bias = self.adjustment(_op("shape")(inputs))
                adj_scale = smart_cond(training, lambda: adj_scale,
                                       lambda: _op("ones_like")(adj_scale))
                adj_bias = smart_cond(training, lambda: adj_bias,
                                      lambda: _op("zeros_like")(adj_bias))
                if scale is not None:
                    adj_scale = adj_scale * scale
                    adj_bias = adj_bias * scale
                if offset is not None:
                    adj_bias = adj_bias + offset
                scale, offset = adj_scale, adj_bias
            keep_dims = len(self.axis) > 1
            batch_mean, batch_var = _op("nn.moments")(
                _op("cast")(inputs, self._param_dtype), reduction_axes, keep_dims=keep_dims)
            moving_mean, moving_variance = self.moving_mean, self.moving_variance
            mean = smart_cond(training, lambda: batch_mean,
                              lambda: convert_to_tensor(moving_mean))
            variance = smart_cond(training, lambda: batch_var,
                                  lambda: convert_to_tensor(moving_variance))
            new_mean, new_variance = mean, variance

            def mean_update() -> Any:
                return smart_cond(training, lambda: self._assign_moving_average(
                    self.moving_mean, new_mean, self.momentum), lambda: self.moving_mean)

            def variance_update() -> Any:
                return smart_cond(training, lambda: self._assign_moving_average(
                    self.moving_variance, new_variance, self.momentum),
                    lambda: self.moving_variance)

            self.add_update(mean_update)
            self.add_update(variance_update)
        xdt = inputs.dtype.base_dtype
        mean = _op("cast")(mean, xdt)
        variance = _op("cast")(variance, xdt)
        if offset is not None:
            offset = _op("cast")(offset, xdt)
        if scale is not None:
            scale = _op("cast")(scale, xdt)
        outputs = _op("nn.batch_normalization")(inputs, _broadcast(mean),
                                                _broadcast(variance), offset, scale,
                                                self.epsilon)
        outputs.set_shape(input_shape)
        return outputs

    def compute_output_shape(self, input_shape: Any) -> TensorShape:
        return as_shape(input_shape)


# ---------------------------------------------------------------------------------------
# the functional forms
# ---------------------------------------------------------------------------------------
def dense(inputs: Any, units: int, activation: Fn | None = None, use_bias: bool = True,
          kernel_initializer: Any = None, bias_initializer: Any = None,
          kernel_regularizer: Fn | None = None, bias_regularizer: Fn | None = None,
          activity_regularizer: Fn | None = None, kernel_constraint: Fn | None = None,
          bias_constraint: Fn | None = None, trainable: bool = True,
          name: str | None = None, reuse: Any = None) -> Any:
    """A :class:`Dense` layer applied to ``inputs`` (``tf.layers.dense``)."""
    layer = Dense(units, activation=activation, use_bias=use_bias,
                  kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
                  kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                  activity_regularizer=activity_regularizer,
                  kernel_constraint=kernel_constraint, bias_constraint=bias_constraint,
                  trainable=trainable, name=name, _scope=name, _reuse=reuse)
    return layer.apply(inputs)


def dropout(inputs: Any, rate: Any = 0.5, noise_shape: Any = None, seed: int | None = None,
            training: Any = False, name: str | None = None) -> Any:
    """A :class:`Dropout` layer applied to ``inputs`` (``tf.layers.dropout``)."""
    layer = Dropout(rate, noise_shape=noise_shape, seed=seed, name=name)
    return layer.apply(inputs, training=training)


def flatten(inputs: Any, name: str | None = None,
            data_format: str = "channels_last") -> Any:
    """A :class:`Flatten` layer applied to ``inputs`` (``tf.layers.flatten``)."""
    return Flatten(name=name, data_format=data_format).apply(inputs)


def batch_normalization(inputs: Any, axis: Any = -1, momentum: float = 0.99,
                        epsilon: float = 1e-3, center: bool = True, scale: bool = True,
                        beta_initializer: Any = None, gamma_initializer: Any = None,
                        moving_mean_initializer: Any = None,
                        moving_variance_initializer: Any = None,
                        beta_regularizer: Fn | None = None,
                        gamma_regularizer: Fn | None = None,
                        beta_constraint: Fn | None = None,
                        gamma_constraint: Fn | None = None, training: Any = False,
                        trainable: bool = True, name: str | None = None, reuse: Any = None,
                        renorm: bool = False, renorm_clipping: Any = None,
                        renorm_momentum: float = 0.99, fused: bool | None = None,
                        virtual_batch_size: int | None = None,
                        adjustment: Fn | None = None) -> Any:
    """A :class:`BatchNormalization` layer applied to ``inputs``
    (``tf.layers.batch_normalization``). With ``training=True`` run the ops of
    ``tf.GraphKeys.UPDATE_OPS`` with the train op to update the moving statistics."""
    layer = BatchNormalization(
        axis=axis, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
        beta_initializer=beta_initializer, gamma_initializer=gamma_initializer,
        moving_mean_initializer=moving_mean_initializer,
        moving_variance_initializer=moving_variance_initializer,
        beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
        beta_constraint=beta_constraint, gamma_constraint=gamma_constraint, renorm=renorm,
        renorm_clipping=renorm_clipping, renorm_momentum=renorm_momentum, fused=fused,
        trainable=trainable, virtual_batch_size=virtual_batch_size, adjustment=adjustment,
        name=name, _reuse=reuse, _scope=name)
    return layer.apply(inputs, training=training)


def _conv_fn(cls: type, api_name: str, arg_names: list[str]) -> Fn:
    """The functional form of a convolution class: ``fn(inputs, filters, kernel_size,
    *args, **kwargs)`` taking the class's arguments in TF's positional order, then
    ``name`` and ``reuse``."""
    order = ["strides", "padding", "data_format", *arg_names, "name", "reuse"]

    def fn(inputs: Any, filters: int, kernel_size: Any, *args: Any, **kwargs: Any) -> Any:
        if len(args) > len(order):
            raise TypeError(f"{api_name}() takes at most {len(order) + 3} positional "
                            f"arguments but {len(args) + 3} were given")
        for key, value in zip(order, args):
            if key in kwargs:
                raise TypeError(f"{api_name}() got multiple values for argument '{key}'")
            kwargs[key] = value
        for key in kwargs:
            if key not in order:
                raise TypeError(f"{api_name}() got an unexpected keyword argument '{key}'")
        name, reuse = kwargs.pop("name", None), kwargs.pop("reuse", None)
        layer = cls(filters, kernel_size, name=name, _scope=name, _reuse=reuse, **kwargs)
        return layer.apply(inputs)

    fn.__name__ = fn.__qualname__ = api_name
    fn.__doc__ = (f"A :class:`{cls.__name__}` layer applied to ``inputs`` "
                  f"(``tf.layers.{api_name}``): arguments ``{', '.join(order)}`` as the "
                  "class takes them, then ``name`` and ``reuse``.")
    return fn


_CONV_ARGS = ["dilation_rate", "activation", "use_bias", "kernel_initializer",
              "bias_initializer", "kernel_regularizer", "bias_regularizer",
              "activity_regularizer", "kernel_constraint", "bias_constraint", "trainable"]
_TRANSPOSE_ARGS = [a for a in _CONV_ARGS if a != "dilation_rate"]
_SEPARABLE_ARGS = ["dilation_rate", "depth_multiplier", "activation", "use_bias",
                   "depthwise_initializer", "pointwise_initializer", "bias_initializer",
                   "depthwise_regularizer", "pointwise_regularizer", "bias_regularizer",
                   "activity_regularizer", "depthwise_constraint", "pointwise_constraint",
                   "bias_constraint", "trainable"]

conv1d = _conv_fn(Conv1D, "conv1d", _CONV_ARGS)
conv2d = _conv_fn(Conv2D, "conv2d", _CONV_ARGS)
conv3d = _conv_fn(Conv3D, "conv3d", _CONV_ARGS)
conv2d_transpose = _conv_fn(Conv2DTranspose, "conv2d_transpose", _TRANSPOSE_ARGS)
conv3d_transpose = _conv_fn(Conv3DTranspose, "conv3d_transpose", _TRANSPOSE_ARGS)
separable_conv1d = _conv_fn(SeparableConv1D, "separable_conv1d", _SEPARABLE_ARGS)
separable_conv2d = _conv_fn(SeparableConv2D, "separable_conv2d", _SEPARABLE_ARGS)


def _pool_fn(cls: type, api_name: str) -> Fn:
    def fn(inputs: Any, pool_size: Any, strides: Any, padding: str = "valid",
           data_format: str = "channels_last", name: str | None = None) -> Any:
        return cls(pool_size=pool_size, strides=strides, padding=padding,
                   data_format=data_format, name=name).apply(inputs)

    fn.__name__ = fn.__qualname__ = api_name
    fn.__doc__ = (f"A :class:`{cls.__name__}` layer applied to ``inputs`` "
                  f"(``tf.layers.{api_name}``).")
    return fn


max_pooling1d = _pool_fn(MaxPooling1D, "max_pooling1d")
max_pooling2d = _pool_fn(MaxPooling2D, "max_pooling2d")
max_pooling3d = _pool_fn(MaxPooling3D, "max_pooling3d")
average_pooling1d = _pool_fn(AveragePooling1D, "average_pooling1d")
average_pooling2d = _pool_fn(AveragePooling2D, "average_pooling2d")
average_pooling3d = _pool_fn(AveragePooling3D, "average_pooling3d")

API: dict[str, Any] = {f"layers.{name}": globals()[name] for name in __all__}
