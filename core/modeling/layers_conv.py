"""``tf.layers`` convolution and pooling layers (TF 1.15): ``Conv1D``/``2D``/``3D``,
``Conv2DTranspose``/``Conv3DTranspose``, ``SeparableConv1D``/``2D``, and max and average
pooling in 1, 2 and 3 dimensions.

Kernels have shape ``kernel_size + (input channels, filters)`` (transposed:
``kernel_size + (filters, input channels)``) and are named ``<scope>/kernel``; biases
``<scope>/bias``. ``data_format`` is ``channels_last`` or ``channels_first``; padding
``valid``, ``same`` (any case) or, for the 1-D convolutions, ``causal``.
"""
from __future__ import annotations

from typing import Any, Callable

from ..base.tensor_shape import TensorShape, as_shape
from ..framework.graph import api_function
from ..plugin.runtime import require_api
from .layers_base import (InputSpec, Layer, conv_output_length, convert_data_format,
                          deconv_output_length, get_activation, get_initializer,
                          normalize_data_format, normalize_padding, normalize_tuple)

__all__ = ["Conv1D", "Conv2D", "Conv3D", "Conv2DTranspose", "Conv3DTranspose",
           "SeparableConv1D", "SeparableConv2D", "MaxPooling1D", "MaxPooling2D",
           "MaxPooling3D", "AveragePooling1D", "AveragePooling2D", "AveragePooling3D"]

REQUIRED_API_NAMES = frozenset({
    "nn.conv1d", "nn.conv2d", "nn.conv3d", "nn.conv2d_transpose", "nn.conv3d_transpose",
    "nn.separable_conv2d", "nn.bias_add", "nn.max_pool", "nn.avg_pool", "nn.max_pool3d",
    "nn.avg_pool3d", "zeros_initializer", "pad", "reshape", "shape", "stack",
    "expand_dims", "squeeze", "transpose",
})
require_api(REQUIRED_API_NAMES)

Fn = Callable[..., Any]


def _op(name: str) -> Fn:
    return api_function(name)


def _channel_axis(data_format: str) -> int:
    return 1 if data_format == "channels_first" else -1


def _input_channels(input_shape: TensorShape, data_format: str) -> int:
    dims = input_shape.as_list()
    c = dims[_channel_axis(data_format)]
    if c is None:
        raise ValueError("The channel dimension of the inputs should be defined. "
                         "Found `None`.")
    return int(c)


class _Conv(Layer):
    """An N-D convolution with bias and activation (Keras's ``Conv``)."""

    rank = 2

    def __init__(self, filters: int, kernel_size: Any, strides: Any = 1,
                 padding: str = "valid", data_format: str = "channels_last",
                 dilation_rate: Any = 1, activation: Fn | None = None, use_bias: bool = True,
                 kernel_initializer: Any = None, bias_initializer: Any = None,
                 kernel_regularizer: Fn | None = None, bias_regularizer: Fn | None = None,
                 activity_regularizer: Fn | None = None, kernel_constraint: Fn | None = None,
                 bias_constraint: Fn | None = None, trainable: bool = True,
                 name: str | None = None, **kwargs: Any):
        """Normalise and record the arguments (variables are made by :meth:`build`)."""
        super().__init__(trainable=trainable, name=name,
                         activity_regularizer=activity_regularizer, **kwargs)
        rank = self.rank
        self.filters = int(filters) if filters is not None else None
        self.kernel_size = normalize_tuple(kernel_size, rank, "kernel_size")
        self.strides = normalize_tuple(strides, rank, "strides")
        self.padding = normalize_padding(padding)
        if self.padding == "causal" and not isinstance(self, (Conv1D, SeparableConv1D)):
            raise ValueError("Causal padding is only supported for `Conv1D` and "
                             "``SeparableConv1D`.")
        self.data_format = normalize_data_format(data_format)
        self.dilation_rate = normalize_tuple(dilation_rate, rank, "dilation_rate")
        self.activation = get_activation(activation)
        self.use_bias = use_bias
        self.kernel_initializer = get_initializer(kernel_initializer)
        self.bias_initializer = get_initializer(
            bias_initializer if bias_initializer is not None else "zeros")
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.kernel_constraint = kernel_constraint
        self.bias_constraint = bias_constraint
        self.input_spec = InputSpec(ndim=rank + 2)

    def _kernel_shape(self, input_dim: int) -> tuple[int, ...]:
        return self.kernel_size + (input_dim, self.filters)

    def build(self, input_shape: Any) -> None:
        input_shape = as_shape(input_shape)
        input_dim = _input_channels(input_shape, self.data_format)
        self.kernel = self.add_weight(
            name="kernel", shape=self._kernel_shape(input_dim),
            initializer=self.kernel_initializer, regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint, trainable=True, dtype=self.dtype)
        self._add_bias()
        self.input_spec = InputSpec(ndim=self.rank + 2,
                                    axes={_channel_axis(self.data_format): input_dim})
        self.built = True

    def _add_bias(self) -> None:
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias", shape=(self.filters,), initializer=self.bias_initializer,
                regularizer=self.bias_regularizer, constraint=self.bias_constraint,
                trainable=True, dtype=self.dtype)
        else:
            self.bias = None

    def _causal_padding(self) -> list[list[int]]:
        left = self.dilation_rate[0] * (self.kernel_size[0] - 1)
        if self.data_format == "channels_last":
            return [[0, 0], [left, 0], [0, 0]]
        return [[0, 0], [0, 0], [left, 0]]

    def _convolve(self, inputs: Any) -> Any:
        rank, last = self.rank, self.data_format == "channels_last"
        padding = "VALID" if self.padding == "causal" else self.padding.upper()
        fmt = convert_data_format(self.data_format, rank + 2)
        if rank == 1:
            kw = {} if self.dilation_rate == (1,) else {"dilations": self.dilation_rate[0]}
            return _op("nn.conv1d")(inputs, self.kernel, stride=self.strides[0],
                                    padding=padding, data_format=fmt, **kw)

        def full(v: tuple[int, ...]) -> list[int]:
            return [1, *v, 1] if last else [1, 1, *v]

        return _op("nn.conv2d" if rank == 2 else "nn.conv3d")(
            inputs, self.kernel, strides=full(self.strides), padding=padding,
            data_format=fmt, dilations=full(self.dilation_rate))

    def _bias_and_activation(self, outputs: Any) -> Any:
        if self.use_bias:
            if self.data_format == "channels_first":
                if self.rank == 1:  # bias_add takes no 1-D NCW input
                    outputs = outputs + _op("reshape")(self.bias, (1, self.filters, 1))
                else:
                    outputs = _op("nn.bias_add")(outputs, self.bias, data_format="NCHW")
            else:
                outputs = _op("nn.bias_add")(outputs, self.bias, data_format="NHWC")
        if self.activation is not None:
            return self.activation(outputs)
        return outputs

    def call(self, inputs: Any) -> Any:
        if self.padding == "causal":
            inputs = _op("pad")(inputs, self._causal_padding())
        return self._bias_and_activation(self._convolve(inputs))

    def compute_output_shape(self, input_shape: Any) -> TensorShape:
        dims = as_shape(input_shape).as_list()
        last = self.data_format == "channels_last"
        space = dims[1:-1] if last else dims[2:]
        new = [conv_output_length(space[i], self.kernel_size[i], self.padding,
                                  self.strides[i], self.dilation_rate[i])
               for i in range(len(space))]
        return TensorShape([dims[0]] + new + [self.filters] if last
                           else [dims[0], self.filters] + new)


class Conv1D(_Conv):
    """1-D convolution layer (``tf.layers.Conv1D``); input ``[batch, width, channels]``."""

    rank = 1


class Conv2D(_Conv):
    """2-D convolution layer (``tf.layers.Conv2D``); input ``[batch, h, w, channels]``."""

    rank = 2


class Conv3D(_Conv):
    """3-D convolution layer (``tf.layers.Conv3D``); input ``[batch, d, h, w, channels]``."""

    rank = 3


class _ConvTranspose(_Conv):
    """A transposed convolution (Keras's ``Conv2DTranspose``/``Conv3DTranspose``).

    ``output_padding`` (an int or a tuple, each less than its stride) fixes the output
    size; otherwise it is ``input * stride`` (same) or ``input * stride + max(kernel -
    stride, 0)`` (valid).
    """

    def __init__(self, filters: int, kernel_size: Any, strides: Any = 1,
                 padding: str = "valid", data_format: str = "channels_last",
                 activation: Fn | None = None, use_bias: bool = True,
                 kernel_initializer: Any = None, bias_initializer: Any = None,
                 kernel_regularizer: Fn | None = None, bias_regularizer: Fn | None = None,
                 activity_regularizer: Fn | None = None, kernel_constraint: Fn | None = None,
                 bias_constraint: Fn | None = None, trainable: bool = True,
                 name: str | None = None, output_padding: Any = None,
                 dilation_rate: Any = 1, **kwargs: Any):
        """As :class:`_Conv`, plus ``output_padding`` and ``dilation_rate`` (keywords
        only)."""
        super().__init__(filters, kernel_size, strides=strides, padding=padding,
                         data_format=data_format, dilation_rate=dilation_rate,
                         activation=activation, use_bias=use_bias,
                         kernel_initializer=kernel_initializer,
                         bias_initializer=bias_initializer,
                         kernel_regularizer=kernel_regularizer,
                         bias_regularizer=bias_regularizer,
                         activity_regularizer=activity_regularizer,
                         kernel_constraint=kernel_constraint,
                         bias_constraint=bias_constraint, trainable=trainable, name=name,
                         **kwargs)
        if self.rank == 3 and self.dilation_rate != (1, 1, 1):
            raise ValueError("Conv3DTranspose does not support dilation_rate > 1, got "
                             f"{self.dilation_rate}")
        self.output_padding = output_padding
        if output_padding is not None:
            self.output_padding = normalize_tuple(output_padding, self.rank,
                                                  "output_padding")
            for stride, pad in zip(self.strides, self.output_padding):
                if pad >= stride:
                    raise ValueError(f"Stride {self.strides} must be greater than output "
                                     f"padding {self.output_padding}")

    def _kernel_shape(self, input_dim: int) -> tuple[int, ...]:
        return self.kernel_size + (self.filters, input_dim)

    def build(self, input_shape: Any) -> None:
        input_shape = as_shape(input_shape)
        if input_shape.ndims != self.rank + 2:
            raise ValueError(f"Inputs should have rank {self.rank + 2}. Received input "
                             f"shape: {input_shape}")
        super().build(input_shape)

    def _out_sizes(self, sizes: list[Any]) -> list[Any]:
        pads = self.output_padding or (None,) * self.rank
        return [deconv_output_length(n, k, self.padding, p, s, d)
                for n, k, p, s, d in zip(sizes, self.kernel_size, pads, self.strides,
                                         self.dilation_rate)]

    def call(self, inputs: Any) -> Any:
        """``conv2d_transpose``/``conv3d_transpose`` to the output shape computed from
        the input's run-time shape, then bias and activation."""
        last = self.data_format == "channels_last"
        shape = _op("shape")(inputs)
        space = [shape[i] for i in (range(1, self.rank + 1) if last
                                    else range(2, self.rank + 2))]
        out = self._out_sizes(space)
        dims = [shape[0], *out, self.filters] if last else [shape[0], self.filters, *out]
        output_shape = _op("stack")(dims)
        strides = [1, *self.strides, 1] if last else [1, 1, *self.strides]
        fmt = convert_data_format(self.data_format, self.rank + 2)
        if self.rank == 2:
            kw = {} if self.dilation_rate == (1, 1) else {
                "dilations": [1, *self.dilation_rate, 1] if last
                else [1, 1, *self.dilation_rate]}
            outputs = _op("nn.conv2d_transpose")(inputs, self.kernel, output_shape, strides,
                                                 padding=self.padding.upper(),
                                                 data_format=fmt, **kw)
        else:
            outputs = _op("nn.conv3d_transpose")(inputs, self.kernel, output_shape, strides,
                                                 padding=self.padding.upper(),
                                                 data_format=fmt)
        outputs.set_shape(self.compute_output_shape(inputs.shape))
        return self._bias_and_activation(outputs)

    def _bias_and_activation(self, outputs: Any) -> Any:
        if self.use_bias:
            fmt = "NHWC" if self.data_format == "channels_last" else "NCHW"
            outputs = _op("nn.bias_add")(outputs, self.bias, data_format=fmt)
        if self.activation is not None:
            return self.activation(outputs)
        return outputs

    def compute_output_shape(self, input_shape: Any) -> TensorShape:
        dims = as_shape(input_shape).as_list()
        last = self.data_format == "channels_last"
        axes = list(range(1, self.rank + 1)) if last else list(range(2, self.rank + 2))
        out = list(dims)
        out[-1 if last else 1] = self.filters
        for axis, size in zip(axes, self._out_sizes([dims[a] for a in axes])):
            out[axis] = size
        return TensorShape(out)


class Conv2DTranspose(_ConvTranspose):
    """Transposed 2-D convolution layer (``tf.layers.Conv2DTranspose``)."""

    rank = 2


class Conv3DTranspose(_ConvTranspose):
    """Transposed 3-D convolution layer (``tf.layers.Conv3DTranspose``)."""

    rank = 3


class _SeparableConv(_Conv):
    """A depthwise convolution (``depth_multiplier`` channels per input channel)
    followed by a 1x1 pointwise one (Keras's ``SeparableConv``)."""

    def __init__(self, filters: int, kernel_size: Any, strides: Any = 1,
                 padding: str = "valid", data_format: str = "channels_last",
                 dilation_rate: Any = 1, depth_multiplier: int = 1,
                 activation: Fn | None = None, use_bias: bool = True,
                 depthwise_initializer: Any = None, pointwise_initializer: Any = None,
                 bias_initializer: Any = None, depthwise_regularizer: Fn | None = None,
                 pointwise_regularizer: Fn | None = None, bias_regularizer: Fn | None = None,
                 activity_regularizer: Fn | None = None,
                 depthwise_constraint: Fn | None = None,
                 pointwise_constraint: Fn | None = None, bias_constraint: Fn | None = None,
                 trainable: bool = True, name: str | None = None, **kwargs: Any):
        """As :class:`_Conv`, with initializers, regularizers and constraints for the
        depthwise and pointwise kernels."""
        super().__init__(filters, kernel_size, strides=strides, padding=padding,
                         data_format=data_format, dilation_rate=dilation_rate,
                         activation=activation, use_bias=use_bias,
                         bias_initializer=bias_initializer,
                         bias_regularizer=bias_regularizer,
                         activity_regularizer=activity_regularizer,
                         bias_constraint=bias_constraint, trainable=trainable, name=name,
                         **kwargs)
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_initializer = get_initializer(depthwise_initializer)
        self.pointwise_initializer = get_initializer(pointwise_initializer)
        self.depthwise_regularizer = depthwise_regularizer
        self.pointwise_regularizer = pointwise_regularizer
        self.depthwise_constraint = depthwise_constraint
        self.pointwise_constraint = pointwise_constraint

    def build(self, input_shape: Any) -> None:
        input_shape = as_shape(input_shape)
        input_dim = _input_channels(input_shape, self.data_format)
        self.input_spec = InputSpec(ndim=self.rank + 2,
                                    axes={_channel_axis(self.data_format): input_dim})
        self.depthwise_kernel = self.add_weight(
            name="depthwise_kernel",
            shape=self.kernel_size + (input_dim, self.depth_multiplier),
            initializer=self.depthwise_initializer, regularizer=self.depthwise_regularizer,
            constraint=self.depthwise_constraint, trainable=True, dtype=self.dtype)
        self.pointwise_kernel = self.add_weight(
            name="pointwise_kernel",
            shape=(1,) * self.rank + (self.depth_multiplier * input_dim, self.filters),
            initializer=self.pointwise_initializer, regularizer=self.pointwise_regularizer,
            constraint=self.pointwise_constraint, trainable=True, dtype=self.dtype)
        self._add_bias()
        self.built = True

    def call(self, inputs: Any) -> Any:
        """``tf.nn.separable_conv2d`` (1-D inputs get a dummy spatial axis), bias and
        activation."""
        last = self.data_format == "channels_last"
        fmt = convert_data_format(self.data_format, 4)
        if self.rank == 2:
            strides = [1, *self.strides, 1] if last else [1, 1, *self.strides]
            outputs = _op("nn.separable_conv2d")(
                inputs, self.depthwise_kernel, self.pointwise_kernel, strides=strides,
                padding=self.padding.upper(), rate=self.dilation_rate, data_format=fmt)
        else:
            if self.padding == "causal":
                inputs = _op("pad")(inputs, self._causal_padding())
            strides = ([1, *(self.strides * 2), 1] if last else [1, 1, *(self.strides * 2)])
            axis = 1 if last else 2
            inputs = _op("expand_dims")(inputs, axis)
            depthwise = _op("expand_dims")(self.depthwise_kernel, 0)
            pointwise = _op("expand_dims")(self.pointwise_kernel, 0)
            padding = "VALID" if self.padding == "causal" else self.padding.upper()
            outputs = _op("nn.separable_conv2d")(
                inputs, depthwise, pointwise, strides=strides, padding=padding,
                rate=(1,) + self.dilation_rate, data_format=fmt)
            if self.use_bias:
                outputs = _op("nn.bias_add")(outputs, self.bias, data_format=fmt)
            outputs = _op("squeeze")(outputs, [axis])
            return self.activation(outputs) if self.activation is not None else outputs
        if self.use_bias:
            outputs = _op("nn.bias_add")(outputs, self.bias, data_format=fmt)
        return self.activation(outputs) if self.activation is not None else outputs


class SeparableConv1D(_SeparableConv):
    """Depthwise separable 1-D convolution layer (``tf.layers.SeparableConv1D``)."""

    rank = 1


class SeparableConv2D(_SeparableConv):
    """Depthwise separable 2-D convolution layer (``tf.layers.SeparableConv2D``)."""

    rank = 2


# ---------------------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------------------
class _Pooling(Layer):
    """Max or average pooling over ``rank`` spatial dimensions (Keras's ``PoolingND``).

    :raises ValueError: if ``strides`` is None (tf.layers requires it)
    """

    rank = 2
    mode = "max"

    def __init__(self, pool_size: Any, strides: Any, padding: str = "valid",
                 data_format: str = "channels_last", name: str | None = None,
                 **kwargs: Any):
        if strides is None:
            raise ValueError("Argument `strides` must not be None.")
        super().__init__(name=name, **kwargs)
        self.pool_size = normalize_tuple(pool_size, self.rank, "pool_size")
        self.strides = normalize_tuple(strides, self.rank, "strides")
        self.padding = normalize_padding(padding)
        self.data_format = normalize_data_format(data_format)
        self.input_spec = InputSpec(ndim=self.rank + 2)

    def call(self, inputs: Any) -> Any:
        """Pool with ``tf.nn`` (1-D through a 2-D pool on an expanded axis; 3-D
        channels_first through NDHWC)."""
        last = self.data_format == "channels_last"
        if self.rank == 1:
            axis = 2 if last else 3
            x = _op("expand_dims")(inputs, axis)
            ksize = [1, self.pool_size[0], 1, 1] if last else [1, 1, self.pool_size[0], 1]
            strides = [1, self.strides[0], 1, 1] if last else [1, 1, self.strides[0], 1]
            pool = _op("nn.max_pool" if self.mode == "max" else "nn.avg_pool")
            x = pool(x, ksize, strides, padding=self.padding.upper(),
                     data_format="NHWC" if last else "NCHW")
            return _op("squeeze")(x, [axis])
        if self.rank == 2:
            pool = _op("nn.max_pool" if self.mode == "max" else "nn.avg_pool")
            return pool(inputs, [1, *self.pool_size, 1] if last else [1, 1, *self.pool_size],
                        [1, *self.strides, 1] if last else [1, 1, *self.strides],
                        padding=self.padding.upper(),
                        data_format="NHWC" if last else "NCHW")
        pool = _op("nn.max_pool3d" if self.mode == "max" else "nn.avg_pool3d")
        if not last:  # TF pools 3-D channels_first inputs in NDHWC
            inputs = _op("transpose")(inputs, (0, 2, 3, 4, 1))
        outputs = pool(inputs, [1, *self.pool_size, 1], [1, *self.strides, 1],
                       padding=self.padding.upper())
        if not last:
            outputs = _op("transpose")(outputs, (0, 4, 1, 2, 3))
        return outputs

    def compute_output_shape(self, input_shape: Any) -> TensorShape:
        dims = as_shape(input_shape).as_list()
        last = self.data_format == "channels_last"
        axes = range(1, self.rank + 1) if last else range(2, self.rank + 2)
        out = list(dims)
        for i, a in enumerate(axes):
            out[a] = conv_output_length(dims[a], self.pool_size[i], self.padding,
                                        self.strides[i])
        return TensorShape(out)


def _pooling_class(name: str, rank: int, mode: str, doc: str) -> type:
    return type(name, (_Pooling,), {"rank": rank, "mode": mode, "__doc__": doc,
                                    "__module__": __name__})


MaxPooling1D = _pooling_class("MaxPooling1D", 1, "max",
                              "Max pooling over 1-D inputs (``tf.layers.MaxPooling1D``).")
MaxPooling2D = _pooling_class("MaxPooling2D", 2, "max",
                              "Max pooling over 2-D inputs (``tf.layers.MaxPooling2D``).")
MaxPooling3D = _pooling_class("MaxPooling3D", 3, "max",
                              "Max pooling over 3-D inputs (``tf.layers.MaxPooling3D``).")
AveragePooling1D = _pooling_class(
    "AveragePooling1D", 1, "avg", "Average pooling over 1-D inputs "
    "(``tf.layers.AveragePooling1D``).")
AveragePooling2D = _pooling_class(
    "AveragePooling2D", 2, "avg", "Average pooling over 2-D inputs "
    "(``tf.layers.AveragePooling2D``).")
AveragePooling3D = _pooling_class(
    "AveragePooling3D", 3, "avg", "Average pooling over 3-D inputs "
    "(``tf.layers.AveragePooling3D``).")
