"""Variable initializers (TF 1.15's ``init_ops``): ``tf.zeros_initializer`` ...

An initializer is a callable object ``init(shape, dtype=None, partition_info=None)``
returning a Tensor of that shape, built from ``Fill``/``Const`` or the random ops; it
carries its ``seed``, so two calls of an initializer with a seed give the same values in
a fresh session (TF's op-seed rule). ``tf.get_variable`` calls them with the variable's
shape and dtype.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt.graph import Tensor, api_function, get_default_graph
from flowrt.tensor_shape import Dimension, TensorShape

from ._common import ks

__all__ = ["Initializer", "Zeros", "Ones", "Constant", "RandomUniform", "RandomNormal",
           "TruncatedNormal", "UniformUnitScaling", "VarianceScaling", "Orthogonal",
           "Identity", "GlorotUniform", "GlorotNormal", "lecun_normal", "lecun_uniform",
           "he_normal", "he_uniform", "compute_fans"]




def _assert_float_dtype(dtype: _dt.DType) -> _dt.DType:
    if not dtype.is_floating:
        raise ValueError(f"Expected floating point type, got {dtype!r}.")
    return dtype


def _dims(shape: Any) -> list[int]:
    """A static shape as a list of ints (TensorShape, Dimensions, ints)."""
    if isinstance(shape, TensorShape):
        shape = shape.as_list()
    elif isinstance(shape, (int, np.integer, Dimension)):
        shape = [shape]
    return [int(d.value if isinstance(d, Dimension) else d) for d in shape]


def compute_fans(shape: Sequence[int]) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight shape, as TF: a dense kernel is ``[in, out]``, a
    convolution kernel ``[..spatial.., in, out]`` multiplies both by the receptive field;
    scalars give (1, 1), vectors (n, n)."""
    shape = _dims(shape)
    if len(shape) < 1:
        fan_in = fan_out = 1
    elif len(shape) == 1:
        fan_in = fan_out = shape[0]
    elif len(shape) == 2:
        fan_in, fan_out = shape[0], shape[1]
    else:
        receptive = 1
        for d in shape[:-2]:
            receptive *= d
        fan_in = shape[-2] * receptive
        fan_out = shape[-1] * receptive
    return int(fan_in), int(fan_out)


class Initializer:
    """Base class of initializers: ``__call__(shape, dtype=None, partition_info=None)``."""

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        raise NotImplementedError

    def get_config(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Initializer":
        return cls(**config)


class Zeros(Initializer):
    """Tensors filled with zeros (``tf.zeros_initializer``)."""

    def __init__(self, dtype: Any = _dt.float32):
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        return api_function("zeros")(shape, self.dtype if dtype is None else dtype)

    def get_config(self) -> dict[str, Any]:
        return {"dtype": self.dtype.name}


class Ones(Initializer):
    """Tensors filled with ones (``tf.ones_initializer``)."""

    def __init__(self, dtype: Any = _dt.float32):
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        return api_function("ones")(shape, self.dtype if dtype is None else dtype)

    def get_config(self) -> dict[str, Any]:
        return {"dtype": self.dtype.name}


class Constant(Initializer):
    """Tensors holding ``value`` (``tf.constant_initializer``): a scalar fills the shape;
    a list shorter than the shape is padded with its last element (TF1 ``tf.constant``);
    ``verify_shape`` requires an exact shape match."""

    def __init__(self, value: Any = 0, dtype: Any = _dt.float32, verify_shape: bool = False):
        if not (np.isscalar(value) or isinstance(value, (list, tuple, np.ndarray))):
            raise TypeError(f"Invalid type for initial value: {type(value)} (expected "
                            "Python scalar, list or tuple of values, or numpy.ndarray).")
        self.value = value
        self.dtype = _dt.as_dtype(dtype)
        self._verify_shape = verify_shape

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None,
                 verify_shape: bool | None = None) -> Tensor:
        if dtype is None:
            dtype = self.dtype
        if verify_shape is None:
            verify_shape = self._verify_shape
        return api_function("constant")(self.value, dtype=dtype, shape=shape,
                                verify_shape=verify_shape)

    def get_config(self) -> dict[str, Any]:
        return {"value": self.value, "dtype": self.dtype.name}


class RandomUniform(Initializer):
    """Uniform values in ``[minval, maxval)`` (``tf.random_uniform_initializer``)."""

    def __init__(self, minval: Any = 0, maxval: Any = None, seed: int | None = None,
                 dtype: Any = _dt.float32):
        self.minval = minval
        self.maxval = maxval
        self.seed = seed
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        return api_function("random_uniform")(shape, self.minval, self.maxval,
                                      self.dtype if dtype is None else dtype, seed=self.seed)

    def get_config(self) -> dict[str, Any]:
        return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed,
                "dtype": self.dtype.name}


class RandomNormal(Initializer):
    """Normal values (``tf.random_normal_initializer``)."""

    def __init__(self, mean: Any = 0.0, stddev: Any = 1.0, seed: int | None = None,
                 dtype: Any = _dt.float32):
        self.mean = mean
        self.stddev = stddev
        self.seed = seed
        self.dtype = _assert_float_dtype(_dt.as_dtype(dtype))

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        return api_function("random_normal")(shape, self.mean, self.stddev,
                                     self.dtype if dtype is None else dtype, seed=self.seed)

    def get_config(self) -> dict[str, Any]:
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed,
                "dtype": self.dtype.name}


class TruncatedNormal(RandomNormal):
    """Normal values redrawn beyond two stddevs (``tf.truncated_normal_initializer``)."""

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        return api_function("truncated_normal")(shape, self.mean, self.stddev,
                                        self.dtype if dtype is None else dtype,
                                        seed=self.seed)


class UniformUnitScaling(Initializer):
    """Uniform in ``±sqrt(3 / input_size) * factor`` where input_size is the product of
    all but the last dim (``tf.uniform_unit_scaling_initializer``, deprecated in TF)."""

    def __init__(self, factor: float = 1.0, seed: int | None = None,
                 dtype: Any = _dt.float32):
        self.factor = factor
        self.seed = seed
        self.dtype = _assert_float_dtype(_dt.as_dtype(dtype))

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        scale_shape = _dims(shape if partition_info is None else partition_info.full_shape)
        input_size = 1.0
        for d in scale_shape[:-1]:
            input_size *= float(d)
        input_size = max(input_size, 1.0)
        max_val = math.sqrt(3 / input_size) * self.factor
        return api_function("random_uniform")(shape, -max_val, max_val,
                                      self.dtype if dtype is None else dtype, seed=self.seed)

    def get_config(self) -> dict[str, Any]:
        return {"factor": self.factor, "seed": self.seed, "dtype": self.dtype.name}


#: The stddev of a standard normal truncated to [-2, 2] (TF's correction constant).
_TRUNCATED_STDDEV = .87962566103423978


class VarianceScaling(Initializer):
    """Values scaled to the shape (``tf.variance_scaling_initializer``, TF 1.15).

    ``scale`` is divided by ``fan_in``, ``fan_out`` or their mean (``mode``); then
    ``"normal"``/``"truncated_normal"`` draw a truncated normal with stddev
    ``sqrt(scale) / .87962566103423978``, ``"untruncated_normal"`` a normal with stddev
    ``sqrt(scale)``, ``"uniform"`` a uniform in ``±sqrt(3 * scale)``.
    """

    def __init__(self, scale: float = 1.0, mode: str = "fan_in",
                 distribution: str = "truncated_normal", seed: int | None = None,
                 dtype: Any = _dt.float32):
        if scale <= 0.:
            raise ValueError("`scale` must be positive float.")
        if mode not in {"fan_in", "fan_out", "fan_avg"}:
            raise ValueError(f"Invalid `mode` argument: {mode}")
        distribution = distribution.lower()
        if distribution not in {"normal", "uniform", "truncated_normal",
                                "untruncated_normal"}:
            raise ValueError(f"Invalid `distribution` argument: {distribution}")
        self.scale = scale
        self.mode = mode
        self.distribution = distribution
        self.seed = seed
        self.dtype = _assert_float_dtype(_dt.as_dtype(dtype))

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        dtype = self.dtype if dtype is None else dtype
        scale = self.scale
        fan_in, fan_out = compute_fans(shape if partition_info is None
                                       else partition_info.full_shape)
        if self.mode == "fan_in":
            scale /= max(1., fan_in)
        elif self.mode == "fan_out":
            scale /= max(1., fan_out)
        else:
            scale /= max(1., (fan_in + fan_out) / 2.)
        if self.distribution in ("normal", "truncated_normal"):
            stddev = math.sqrt(scale) / _TRUNCATED_STDDEV
            return api_function("truncated_normal")(shape, 0.0, stddev, dtype, seed=self.seed)
        if self.distribution == "untruncated_normal":
            return api_function("random_normal")(shape, 0.0, math.sqrt(scale), dtype, seed=self.seed)
        limit = math.sqrt(3.0 * scale)
        return api_function("random_uniform")(shape, -limit, limit, dtype, seed=self.seed)

    def get_config(self) -> dict[str, Any]:
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution,
                "seed": self.seed, "dtype": self.dtype.name}


class GlorotUniform(VarianceScaling):
    """Uniform in ``±sqrt(6 / (fan_in + fan_out))`` (``tf.glorot_uniform_initializer``,
    also known as Xavier uniform)."""

    def __init__(self, seed: int | None = None, dtype: Any = _dt.float32):
        super().__init__(scale=1.0, mode="fan_avg", distribution="uniform", seed=seed,
                         dtype=dtype)

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed, "dtype": self.dtype.name}


class GlorotNormal(VarianceScaling):
    """Truncated normal with stddev ``sqrt(2 / (fan_in + fan_out))``
    (``tf.glorot_normal_initializer``)."""

    def __init__(self, seed: int | None = None, dtype: Any = _dt.float32):
        super().__init__(scale=1.0, mode="fan_avg", distribution="truncated_normal",
                         seed=seed, dtype=dtype)

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed, "dtype": self.dtype.name}


class Orthogonal(Initializer):
    """A (semi-)orthogonal matrix from the QR decomposition of a normal matrix
    (``tf.orthogonal_initializer``); needs the ``Qr`` op.

    :raises NotImplementedError: when no kernel set provides ``tf.linalg.qr``
    """

    def __init__(self, gain: float = 1.0, seed: int | None = None, dtype: Any = _dt.float32):
        self.gain = gain
        self.dtype = _assert_float_dtype(_dt.as_dtype(dtype))
        self.seed = seed

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        dtype = self.dtype if dtype is None else dtype
        dims = _dims(shape)
        if len(dims) < 2:
            raise ValueError("The tensor to initialize must be at least two-dimensional")
        api = get_default_graph()._runtime.api
        qr = api.get("linalg.qr") or api.get("qr")
        if qr is None:
            raise NotImplementedError("tf.orthogonal_initializer needs the Qr op "
                                      "(tf.linalg.qr), which no loaded kernel set provides")
        num_rows = 1
        for d in dims[:-1]:
            num_rows *= d
        num_cols = dims[-1]
        flat = (num_cols, num_rows) if num_rows < num_cols else (num_rows, num_cols)
        a = api_function("random_normal")(flat, dtype=dtype, seed=self.seed)
        q, r = qr(a, full_matrices=False)
        q = q * api_function("sign")(api_function("diag_part")(r))
        if num_rows < num_cols:
            q = api_function("matrix_transpose")(q)
        return self.gain * api_function("reshape")(q, dims)

    def get_config(self) -> dict[str, Any]:
        return {"gain": self.gain, "seed": self.seed, "dtype": self.dtype.name}


class Identity(Initializer):
    """``gain`` times the identity matrix (``tf.initializers.identity``); 2-D only."""

    def __init__(self, gain: float = 1.0, dtype: Any = _dt.float32):
        self.gain = gain
        self.dtype = _assert_float_dtype(_dt.as_dtype(dtype))

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        full = _dims(shape if partition_info is None else partition_info.full_shape)
        if len(full) != 2:
            raise ValueError("Identity matrix initializer can only be used for 2D matrices.")
        dtype = self.dtype if dtype is None else dtype
        eye = api_function("eye")(full[0], full[1], dtype=dtype)
        if partition_info is not None:
            eye = api_function("slice")(eye, partition_info.var_offset, _dims(shape))
        return self.gain * eye

    def get_config(self) -> dict[str, Any]:
        return {"gain": self.gain, "dtype": self.dtype.name}


def lecun_normal(seed: int | None = None) -> VarianceScaling:
    """Truncated normal with stddev ``sqrt(1 / fan_in)``."""
    return VarianceScaling(scale=1., mode="fan_in", distribution="truncated_normal",
                           seed=seed)


def lecun_uniform(seed: int | None = None) -> VarianceScaling:
    """Uniform in ``±sqrt(3 / fan_in)``."""
    return VarianceScaling(scale=1., mode="fan_in", distribution="uniform", seed=seed)


def he_normal(seed: int | None = None) -> VarianceScaling:
    """Truncated normal with stddev ``sqrt(2 / fan_in)``."""
    return VarianceScaling(scale=2., mode="fan_in", distribution="truncated_normal",
                           seed=seed)


def he_uniform(seed: int | None = None) -> VarianceScaling:
    """Uniform in ``±sqrt(6 / fan_in)``."""
    return VarianceScaling(scale=2., mode="fan_in", distribution="uniform", seed=seed)


def _global_variables_initializer() -> Any:
    from flowrt.variables import global_variables_initializer

    return global_variables_initializer()


def _local_variables_initializer() -> Any:
    from flowrt.variables import local_variables_initializer

    return local_variables_initializer()


def _variables_initializer(var_list: Any, name: str = "init") -> Any:
    from flowrt.variables import variables_initializer

    return variables_initializer(var_list, name=name)


for _names, _obj in (
        (("zeros_initializer", "initializers.zeros"), Zeros),
        (("ones_initializer", "initializers.ones"), Ones),
        (("constant_initializer", "initializers.constant"), Constant),
        (("random_uniform_initializer", "initializers.random_uniform"), RandomUniform),
        (("random_normal_initializer", "initializers.random_normal"), RandomNormal),
        (("truncated_normal_initializer", "initializers.truncated_normal"), TruncatedNormal),
        (("uniform_unit_scaling_initializer", "initializers.uniform_unit_scaling"),
         UniformUnitScaling),
        (("variance_scaling_initializer", "initializers.variance_scaling"), VarianceScaling),
        (("glorot_uniform_initializer", "initializers.glorot_uniform"), GlorotUniform),
        (("glorot_normal_initializer", "initializers.glorot_normal"), GlorotNormal),
        (("orthogonal_initializer", "initializers.orthogonal"), Orthogonal),
        (("initializers.identity",), Identity),
        (("initializers.lecun_normal",), lecun_normal),
        (("initializers.lecun_uniform",), lecun_uniform),
        (("initializers.he_normal",), he_normal),
        (("initializers.he_uniform",), he_uniform),
        (("initializers.global_variables",), _global_variables_initializer),
        (("initializers.local_variables",), _local_variables_initializer),
        (("initializers.variables",), _variables_initializer)):
    for _n in _names:
        if _n not in ks.api_names:
            ks.export(_n, _obj)
