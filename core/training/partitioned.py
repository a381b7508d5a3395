"""Partitioned variables: ``tf.get_variable(..., partitioner=...)`` and the partitioners.

A partitioner maps a variable's full shape and dtype to the number of slices along each
axis (at most one axis above 1). ``get_variable`` then makes one variable per slice,
named ``<name>/part_<i>``, each remembering where it sits in the full variable
(:class:`~flowrt.training.variables.SaveSliceInfo`), and returns them as one
:class:`PartitionedVariable`: iterable over the parts, converted to a Tensor by
concatenating them (an Identity named ``<name>``), as TF 1.15 does.
"""
from __future__ import annotations

import collections.abc
import math
from typing import Any, Callable, Iterator, Sequence

from ..base import dtypes as _dt
from ..base.tensor_shape import TensorShape, as_shape, dimension_value
from ..framework.graph import (Tensor, api_function, control_dependencies, convert_to_tensor,
                               name_scope, register_tensor_conversion_function)
from .variables import SaveSliceInfo, Variable

__all__ = ["PartitionedVariable", "PartitionInfo", "fixed_size_partitioner",
           "min_max_variable_partitioner", "variable_axis_size_partitioner",
           "create_partitioned_variables", "get_partitioned_variable"]


class PartitionInfo:
    """Where one slice of a partitioned variable sits (TF's ``_PartitionInfo``): what an
    initializer's ``partition_info`` argument receives.

    :raises TypeError: if ``full_shape`` or ``var_offset`` is not a sequence
    :raises ValueError: if their lengths differ or an offset is outside the shape
    """

    __slots__ = ("_full_shape", "_var_offset")

    def __init__(self, full_shape: Sequence[int], var_offset: Sequence[int]):
        if not isinstance(full_shape, (list, tuple)):
            raise TypeError("`full_shape` must be a sequence (like tuple or list) instead of "
                            f"{type(full_shape).__name__}")
        if not isinstance(var_offset, (list, tuple)):
            raise TypeError("`var_offset` must be a sequence (like tuple or list) instead of "
                            f"{type(var_offset).__name__}")
        if len(var_offset) != len(full_shape):
            raise ValueError(f"Expected equal length, but `var_offset` is of length "
                             f"{len(var_offset)} while full_shape is of length "
                             f"{len(full_shape)}.")
        for offset, size in zip(var_offset, full_shape):
            if offset < 0 or offset >= size:
                raise ValueError(f"Expected 0 <= offset < shape but found offset={offset}, "
                                 f"shape={size} for var_offset={var_offset}, "
                                 f"full_shape={full_shape}")
        self._full_shape = full_shape
        self._var_offset = var_offset

    @property
    def full_shape(self) -> Sequence[int]:
        return self._full_shape

    @property
    def var_offset(self) -> Sequence[int]:
        return self._var_offset

    def single_offset(self, shape: Sequence[int]) -> int:
        """The offset along the partitioned axis (0 when none is)."""
        dim = self.single_slice_dim(shape)
        return 0 if dim is None else self._var_offset[dim]

    def single_slice_dim(self, shape: Sequence[int]) -> int | None:
        """The axis along which a slice of ``shape`` is partitioned (None: none).

        :raises ValueError: if ``shape`` does not fit, or is sliced along several axes
        """
        if not isinstance(shape, (list, tuple)):
            raise TypeError("`shape` must be a sequence (like tuple or list) instead of "
                            f"{type(shape).__name__}")
        if len(shape) != len(self._full_shape):
            raise ValueError(f"Expected equal length, but received shape={shape} of length "
                             f"{len(shape)} while self.full_shape={self._full_shape} is of "
                             f"length {len(self._full_shape)}.")
        for i in range(len(shape)):
            if self._var_offset[i] + shape[i] > self._full_shape[i]:
                raise ValueError(f"With self.var_offset={self._var_offset}, a partition of "
                                 f"shape={shape} would exceed self.full_shape="
                                 f"{self._full_shape} in dimension {i}.")
        dim = None
        for i in range(len(shape)):
            if shape[i] == self._full_shape[i]:
                continue
            if dim is not None:
                raise ValueError(f"Cannot use single_slice_dim() with shape={shape} and "
                                 f"self.full_shape={self._full_shape} since slice dim "
                                 f"could be either dimension {dim} or {i}.")
            dim = i
        return dim


# ---------------------------------------------------------------------------------------
# partitioners (TF's partitioned_variables.py)
# ---------------------------------------------------------------------------------------
def _element_size(dtype: _dt.DType, bytes_per_string_element: int) -> int:
    if dtype.base_dtype is _dt.string:
        return bytes_per_string_element
    return dtype.size


def _check_partitioner_args(shape: Any, dtype: Any) -> None:
    if not isinstance(shape, TensorShape):
        raise ValueError(f"shape is not a TensorShape: {shape}")
    if not shape.is_fully_defined():
        raise ValueError(f"shape is not fully defined: {shape}")
    if not isinstance(dtype, _dt.DType):
        raise ValueError(f"dtype is not a DType: {dtype}")


def variable_axis_size_partitioner(max_shard_bytes: int, axis: int = 0,
                                   bytes_per_string_element: int = 16,
                                   max_shards: int | None = None) -> Callable[..., list[int]]:
    """A partitioner keeping each shard under ``max_shard_bytes`` by slicing ``axis``
    (``tf.variable_axis_size_partitioner``); at most ``max_shards`` shards.

    :raises ValueError: for non-positive sizes or ``max_shards``
    """
    if max_shard_bytes < 1 or bytes_per_string_element < 1:
        raise ValueError("Both max_shard_bytes and bytes_per_string_element must be "
                         "positive.")
    if max_shards and max_shards < 1:
        raise ValueError("max_shards must be positive.")

    def _partitioner(shape: TensorShape, dtype: _dt.DType) -> list[int]:
        _check_partitioner_args(shape, dtype)
        element_size = _element_size(dtype, bytes_per_string_element)
        partitions = [1] * shape.ndims
        n_axis = dimension_value(shape.dims[axis])
        bytes_per_slice = 1.0 * (shape.num_elements() / n_axis) * element_size
        slices_per_shard = max(1, math.floor(max_shard_bytes / bytes_per_slice))
        axis_shards = int(math.ceil(1.0 * n_axis / slices_per_shard))
        if max_shards:
            axis_shards = min(max_shards, axis_shards)
        partitions[axis] = axis_shards
        return partitions

    return _partitioner


def min_max_variable_partitioner(max_partitions: int = 1, axis: int = 0,
                                 min_slice_size: int = 256 << 10,
                                 bytes_per_string_element: int = 16
                                 ) -> Callable[..., list[int]]:
    """A partitioner giving each slice at least ``min_slice_size`` bytes, with at most
    ``max_partitions`` slices along ``axis`` (``tf.min_max_variable_partitioner``)."""

    def _partitioner(shape: TensorShape, dtype: _dt.DType) -> list[int]:
        _check_partitioner_args(shape, dtype)
        total_size_bytes = shape.num_elements() * _element_size(dtype,
                                                                bytes_per_string_element)
        partitions = total_size_bytes / min_slice_size
        partitions_list = [1] * len(shape)
        partitions_list[axis] = max(1, min(dimension_value(shape.dims[axis]),
                                           max_partitions, int(math.ceil(partitions))))
        return partitions_list

    return _partitioner


def fixed_size_partitioner(num_shards: int, axis: int = 0) -> Callable[..., list[int]]:
    """A partitioner slicing ``axis`` into ``num_shards`` (fewer if the axis is
    shorter) (``tf.fixed_size_partitioner``)."""

    def _partitioner(shape: Any, **unused_args: Any) -> list[int]:
        partitions_list = [1] * len(shape)
        partitions_list[axis] = min(num_shards, dimension_value(as_shape(shape).dims[axis]))
        return partitions_list

    return _partitioner


# ---------------------------------------------------------------------------------------
# PartitionedVariable
# ---------------------------------------------------------------------------------------
class PartitionedVariable:
    """A variable made of slices (``tf.get_variable`` with a partitioner): iterating
    gives the part Variables in offset order; used as a Tensor it is their
    concatenation (``as_tensor``).

    :raises TypeError: if ``variable_list`` or ``partitions`` is not a list or tuple
    :raises ValueError: for an empty list, non-positive partitions, or parts without
        save-slice info matching ``shape``
    """

    def __init__(self, name: str, shape: Any, dtype: Any, variable_list: Sequence[Variable],
                 partitions: Sequence[int]):
        """Check the parts and keep them sorted by their offset in the full variable."""
        if not isinstance(variable_list, (list, tuple)):
            raise TypeError(f"variable_list is not a list or tuple: {variable_list}")
        if not isinstance(partitions, (list, tuple)):
            raise TypeError(f"partitions is not a list or tuple: {partitions}")
        if not all(p >= 1 for p in partitions):
            raise ValueError(f"partition values must be positive: {partitions}")
        if not variable_list:
            raise ValueError("variable_list may not be empty")
        for v in variable_list:
            if not all(x._get_save_slice_info() is not None for x in variable_list):
                raise ValueError("All variables must have a save_slice_info available: "
                                 f"{[x.name for x in variable_list]}")
            if len(shape) != len(partitions):
                raise ValueError(f"len(shape) != len(partitions): {shape} vs. {partitions}")
            if v._get_save_slice_info().full_shape != shape:
                raise ValueError(f"All variables' full shapes must match shape: {shape}; but "
                                 f"full shapes were: "
                                 f"{[v._get_save_slice_info().full_shape]}")
        self._variable_list = sorted(variable_list,
                                     key=lambda v: v._get_save_slice_info().var_offset)
        self._name = name
        self._shape = shape
        self._dtype = dtype
        self._partitions = partitions
        self._as_tensor = None

    def __iter__(self) -> Iterator[Variable]:
        return iter(self._variable_list)

    def __len__(self) -> int:
        n_axes = len(self._partition_axes())
        if n_axes > 1:
            raise ValueError(f"Cannot get a length of {n_axes} > 1-D partition")
        return len(self._variable_list)

    def _partition_axes(self) -> list[int]:
        if all(p == 1 for p in self._partitions):
            return [0]
        return [i for i, p in enumerate(self._partitions) if p > 1]

    def _concat(self) -> Tensor:
        """The parts concatenated along the partitioned axis, as an Identity ``<name>``.

        :raises NotImplementedError: for a partitioning along several axes
        """
        if len(self._variable_list) == 1:
            with name_scope(None):
                return api_function("identity")(self._variable_list[0], name=self._name)
        axes = self._partition_axes()
        if len(axes) > 1:
            raise NotImplementedError(f"Cannot concatenate along more than one dimension: "
                                      f"{axes}.  Multi-axis partition concat is not "
                                      "supported")
        with name_scope(self._name + "/ConcatPartitions/"):
            concatenated = api_function("concat")(self._variable_list, axes[0])
        with name_scope(None):
            return api_function("identity")(concatenated, name=self._name)

    def as_tensor(self) -> Tensor:
        """The full value, built outside any control dependencies."""
        with control_dependencies(None):
            return self._concat()

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self) -> _dt.DType:
        return self._dtype

    @property
    def shape(self) -> TensorShape:
        return self.get_shape()

    @property
    def graph(self) -> Any:
        return self._variable_list[0].graph

    def get_shape(self) -> TensorShape:
        return self._shape

    def _get_variable_list(self) -> list[Variable]:
        return self._variable_list

    def _get_partitions(self) -> Sequence[int]:
        return self._partitions

    def _apply_assign_fn(self, assign_fn: Callable[[Variable, Any], Any], value: Any
                         ) -> list[Any]:
        """``assign_fn(part, value_part)`` for each part, ``value`` split to the parts'
        sizes (a list or PartitionedVariable gives the parts directly)."""
        axes = self._partition_axes()
        if len(axes) > 1:
            raise NotImplementedError(f"Cannot do assign action along more than one "
                                      f"dimension: {axes}.  Multi-axis partition assign "
                                      "action is not supported ")
        if isinstance(value, list):
            if len(value) != len(self._variable_list):
                raise ValueError(f"Expected {len(self._variable_list)} values, got "
                                 f"{len(value)}")
            value_list = value
        elif isinstance(value, PartitionedVariable):
            value_list = list(value)
        else:
            sizes = [dimension_value(v.shape[axes[0]]) for v in self._variable_list]
            value_list = api_function("split")(value, sizes, axis=axes[0])
        return [assign_fn(var, value_list[i]) for i, var in enumerate(self._variable_list)]

    def assign(self, value: Any, use_locking: bool = False, name: str | None = None,
               read_value: bool = True) -> list[Any]:
        """Assign ``value`` (split along the partitioned axis) to the parts."""
        out = self._apply_assign_fn(lambda v, x: v.assign(
            x, use_locking=use_locking, name=name, read_value=read_value), value)
        return out

    def assign_add(self, value: Any, use_locking: bool = False, name: str | None = None,
                   read_value: bool = True) -> list[Any]:
        return self._apply_assign_fn(lambda v, x: v.assign_add(
            x, use_locking=use_locking, name=name, read_value=read_value), value)

    def assign_sub(self, value: Any, use_locking: bool = False, name: str | None = None,
                   read_value: bool = True) -> list[Any]:
        return self._apply_assign_fn(lambda v, x: v.assign_sub(
            x, use_locking=use_locking, name=name, read_value=read_value), value)

    def __repr__(self) -> str:
        return (f"<tf.PartitionedVariable '{self._name}' shape={self._shape} "
                f"dtype={self._dtype.name} partitions={list(self._partitions)}>")


def _partitioned_to_tensor(v: PartitionedVariable, dtype: Any = None, name: str | None = None,
                           as_ref: bool = False) -> Tensor:
    if dtype is not None and not _dt.as_dtype(dtype).is_compatible_with(v.dtype):
        raise ValueError(f"Incompatible type conversion requested to type "
                         f"'{_dt.as_dtype(dtype).name}' for variable of type "
                         f"'{v.dtype.name}'")
    if as_ref:
        raise NotImplementedError("PartitionedVariable doesn't support being used as a "
                                  "reference.")
    return v.as_tensor()


register_tensor_conversion_function(PartitionedVariable, _partitioned_to_tensor)


# ---------------------------------------------------------------------------------------
# creation (TF's _VariableStore._get_partitioned_variable)
# ---------------------------------------------------------------------------------------
def call_partitioner(partitioner: Callable[..., Any], shape: TensorShape,
                     dtype: _dt.DType) -> list[int]:
    """The partitioner's slicing of ``shape``, checked.

    :raises ValueError: for a shape that is not fully defined or is scalar, or a result
        that is not one positive count per axis with at most one above 1
    """
    if not shape.is_fully_defined():
        raise ValueError("Shape of a new partitioned variable must be fully defined, but "
                         f"instead was {shape}.")
    if shape.ndims < 1:
        raise ValueError(f"A partitioned Variable must have rank at least 1, shape: {shape}")
    slicing = partitioner(shape=shape, dtype=dtype)
    if not isinstance(slicing, collections.abc.Sequence):
        raise ValueError(f"Partitioner must return a sequence, but saw: {slicing}")
    if len(slicing) != shape.ndims:
        raise ValueError("Partitioner returned a partition list that does not match the "
                         f"Variable's rank: {slicing} vs. {shape}")
    if any(p < 1 for p in slicing):
        raise ValueError(f"Partitioner returned zero partitions for some axes: {slicing}")
    if sum(p > 1 for p in slicing) > 1:
        raise ValueError(f"Can only slice a variable along one dimension: shape: {shape}, "
                         f"partitioning: {slicing}")
    return list(slicing)


def _slice_dim_and_num_slices(slicing: Sequence[int]) -> tuple[int, int]:
    for dim, n in enumerate(slicing):
        if n > 1:
            return dim, n
    return 0, 1


def _iter_slices(full_shape: list[int], num_slices: int, slice_dim: int
                 ) -> Iterator[tuple[list[int], list[int]]]:
    """``(offset, shape)`` of each slice: the first ``full % num`` slices get one extra."""
    excess = full_shape[slice_dim] % num_slices
    offset = [0] * len(full_shape)
    min_len = full_shape[slice_dim] // num_slices
    for i in range(num_slices):
        shape = full_shape[:]
        shape[slice_dim] = min_len + (1 if i < excess else 0)
        yield offset[:], shape
        offset[slice_dim] += shape[slice_dim]


def get_partitioned_variable(store: Any, name: str, partitioner: Callable[..., Any] | None,
                             shape: Any = None, dtype: Any = _dt.float32,
                             initializer: Any = None, reuse: Any = None,
                             **single_kwargs: Any) -> PartitionedVariable:
    """Get or create the partitioned variable ``name`` in the variable store ``store``.

    The parts ``<name>/part_<i>`` are made by the store's ``_get_single_variable`` with a
    :class:`PartitionInfo` for the initializer and their initial values built under
    ``<name>/part_<i>/PartitionedInitializer``; a Tensor or value initializer is sliced.

    :raises ValueError: as TF: an unpartitioned variable of that name exists, reuse
        conflicts, the shape, dtype or partitions differ from the existing ones, or the
        parts found do not match the partitioning
    """
    dtype = _dt.as_dtype(dtype)
    from_value = initializer is not None and isinstance(initializer, Tensor)
    if name in store._vars:
        raise ValueError("A partitioner was provided, but an unpartitioned version of the "
                         f"variable was found: {name}.  Perhaps a variable of the same name "
                         "was already created without partitioning?")
    shape = as_shape(shape)
    if from_value:
        shape = shape.merge_with(initializer.get_shape())
    partitions = None
    if not reuse or partitioner:
        partitions = call_partitioner(partitioner, shape, dtype)
    existing = store._partitioned_vars.get(name)
    if existing is not None:
        if reuse is False:
            raise ValueError(f"Partitioned variable with name {name} already exists. Did you "
                             "mean to set reuse=True or reuse=tf.AUTO_REUSE in VarScope?")
        if not shape.is_compatible_with(existing.get_shape()):
            raise ValueError(f"Trying to reuse partitioned variable {name}, but specified "
                             f"shape {shape} and found shape {existing.get_shape()}.")
        if not dtype.is_compatible_with(existing.dtype):
            raise ValueError(f"Trying to reuse partitioned variable {name}, but specified "
                             f"dtype {dtype.name} and found dtype {existing.dtype.name}.")
        if partitions is not None and list(existing._get_partitions()) != partitions:
            raise ValueError(f"Trying to reuse partitioned variable {name}, but specified "
                             f"partitions {partitions} and found partitions "
                             f"{existing._get_partitions()}.")
        return existing
    if reuse is True:
        raise ValueError(f"PartitionedVariable {name} does not exist, or was not created "
                         "with tf.get_variable(). Did you mean to set reuse=False or "
                         "reuse=tf.AUTO_REUSE in VarScope?")
    slice_dim, num_slices = _slice_dim_and_num_slices(partitions)
    if f"{name}/part_0" in store._vars:
        if f"{name}/part_{num_slices - 1}" not in store._vars:
            raise ValueError("Partitioner returned a different partitioning than what was "
                             f"already found.  Partitioner returned {num_slices} shards, and "
                             f"shard {name}/part_0 was found, but "
                             f"{name}/part_{num_slices - 1} was not.")
        if f"{name}/part_{num_slices}" in store._vars:
            raise ValueError("Partitioner returned a different partitioning than what was "
                             f"already found.  Partitioner returned {num_slices} shards, and "
                             f"shard {name}/part_0 was found, but so was the extra shard "
                             f"{name}/part_{num_slices}.")
    parts = []
    full = shape.as_list()
    for i, (offset, part_shape) in enumerate(_iter_slices(full, num_slices, slice_dim)):
        info = PartitionInfo(full_shape=full, var_offset=offset)
        part_name = f"{name}/part_{i}"
        with name_scope(part_name + "/PartitionedInitializer"):
            if initializer is None:
                init, init_from_value = store._default_initializer(name, dtype)
                init_shape = None if init_from_value else part_shape
            elif callable(initializer):
                init, init_shape = initializer, part_shape
            elif isinstance(initializer, Tensor):
                init = api_function("slice")(initializer, offset, part_shape)
                dtype = init.dtype.base_dtype
                init_shape = None
            else:
                init = convert_to_tensor(initializer, dtype=dtype)
                init = api_function("slice")(init, offset, part_shape)
                init_shape = None
        with name_scope(None):
            var = store._get_single_variable(
                part_name, shape=init_shape, dtype=dtype, initializer=init,
                partition_info=info, reuse=reuse, **single_kwargs)
        var._set_save_slice_info(SaveSliceInfo(name, full, offset, part_shape))
        parts.append(var)
    pv = PartitionedVariable(name=name, shape=shape, dtype=dtype, variable_list=parts,
                             partitions=partitions)
    store._partitioned_vars[name] = pv
    return pv


def create_partitioned_variables(shape: Sequence[int], slicing: Sequence[int],
                                 initializer: Any, dtype: Any = _dt.float32,
                                 trainable: bool = True, collections: Any = None,
                                 name: str | None = None, reuse: Any = None
                                 ) -> list[Variable]:
    """The parts of a new partitioned variable of ``shape`` sliced as ``slicing``
    (``tf.create_partitioned_variables``, deprecated in TF 1.15 for ``get_variable``
    with a partitioner), in a variable scope ``name`` (default ``PartitionedVariable``).

    :raises ValueError: if ``shape`` and ``slicing`` differ in length or are empty
    """
    # variable_scope imports this module: a cycle, broken here
    from .variable_scope import get_variable_scope, variable_scope, _get_default_variable_store

    if len(shape) != len(slicing):
        raise ValueError("The 'shape' and 'slicing' of a partitioned Variable must have the "
                         f"length: shape: {shape}, slicing: {slicing}")
    if len(shape) < 1:
        raise ValueError(f"A partitioned Variable must have rank at least 1: shape: {shape}")
    partitioner = lambda **unused_kwargs: slicing  # noqa: E731 - the slicing as given
    with variable_scope(name, "PartitionedVariable", reuse=reuse):
        scope = get_variable_scope()
        with name_scope(None):
            pv = get_partitioned_variable(
                _get_default_variable_store(), scope.name, partitioner, shape=shape,
                dtype=dtype, initializer=initializer, reuse=scope.reuse,
                trainable=trainable, collections=collections,
                caching_device=scope.caching_device, regularizer=scope.regularizer,
                validate_shape=True)
        return list(pv)
