"""``tf.data.Iterator`` in graph mode: the ops that hold an iterator's state
(``IteratorV2`` / ``OneShotIterator``), start it on a dataset (``MakeIterator``) and read
it (``IteratorGetNext``), and the ``tf.compat.v1.data`` helper functions.

The kernels are the standard plugin's (dataset_kernels.py); they look the dataset up by
the ``dataset`` attr, a token :func:`flowrt.inputs.dataset.register_dataset` gives.
"""
from __future__ import annotations

import weakref
from typing import Any

from ..base import dtypes as _dt
from ..base.tensor_shape import TensorShape, as_shape, unknown_shape
from ..framework.graph import (Tensor, add_to_collection, apply_op, get_default_graph,
                               name_scope)
from ..framework.sparse_tensor import SparseTensor
from .dataset import (SPARSE, Dataset, ElementStructure, _collapse, _same_structure,
                      _sparse_flags, flatten, op_types_shapes, pack_as, register_dataset)

__all__ = ["Iterator", "make_one_shot_iterator", "make_initializable_iterator", "pack_outputs",
           "get_output_types", "get_output_shapes", "get_output_classes",
           "ITERATORS_COLLECTION"]

#: the collection every iterator's resource tensor is added to (TF's GLOBAL_ITERATORS)
ITERATORS_COLLECTION = "iterators"

#: per iterator resource tensor: its Iterator and the tokens of the datasets it can be
#: started on (what a saved position names: tf.data.experimental.make_saveable_...)
_ITERATORS: "weakref.WeakKeyDictionary[Tensor, Iterator]" = weakref.WeakKeyDictionary()


def _shapes_list(shapes: list[TensorShape]) -> list[Any]:
    return [s if s.ndims is not None else unknown_shape() for s in shapes]


def _structure_of(output_types: Any, output_classes: Any) -> Any:
    """The element template: SPARSE where ``output_classes`` says SparseTensor."""
    n = len(flatten(output_types))
    if output_classes is None:
        return pack_as(output_types, [None] * n)
    classes = flatten(output_classes)
    if len(classes) != n:
        raise TypeError("output_types and output_classes must have the same structure")
    return pack_as(output_types, [SPARSE if c is SparseTensor else None for c in classes])


def pack_outputs(structure: Any, shapes: list[TensorShape], outs: Any) -> Any:
    """An op's outputs carrying elements of ``structure`` (:func:`op_types_shapes`)
    nested as the elements are, three for each SparseTensor."""
    if isinstance(outs, Tensor):
        outs = [outs]
    outs = list(outs)
    flags = _sparse_flags(structure)
    if any(flags):
        sparse_shapes = iter([s for s, sp in zip(shapes, flags) if sp])
        outs = _collapse(flags, outs, lambda *p: _sparse_from(next(sparse_shapes))(*p))
    return pack_as(structure, outs)


def _sparse_from(shape: TensorShape) -> Any:
    def make(indices: Tensor, values: Tensor, dense_shape: Tensor) -> SparseTensor:
        sp = SparseTensor(indices, values, dense_shape)
        if shape.ndims is not None:
            sp.set_shape(shape)
        return sp
    return make


class Iterator(ElementStructure):
    """Reads the elements of a dataset (``tf.data.Iterator``): ``get_next()`` gives the
    tensors of the next element; running it past the end raises ``OutOfRangeError``."""

    def __init__(self, iterator_resource: Tensor, initializer: Any, output_types: Any,
                 output_shapes: Any, output_classes: Any = None):
        self._resource = iterator_resource
        self._initializer = initializer
        self._structure = _structure_of(output_types, output_classes)
        self._types = [_dt.as_dtype(t).base_dtype for t in flatten(output_types)]
        self._shapes = [as_shape(s) for s in flatten(output_shapes)] \
            if output_shapes is not None else [unknown_shape()] * len(self._types)
        if len(self._shapes) != len(self._types):
            raise ValueError("output_types and output_shapes must have the same structure")
        self._get_next_calls = 0
        self._dataset_tokens: list[str] = []
        if isinstance(iterator_resource, Tensor):
            _ITERATORS.setdefault(iterator_resource, self)

    @staticmethod
    def of_resource(resource: Tensor) -> "Iterator":
        """The Iterator whose state ``resource`` (an iterator op's output) holds.

        :raises ValueError: for a tensor no Iterator was made with"""
        it = _ITERATORS.get(resource)
        if it is None:
            raise ValueError(f"{resource} is not the resource of a tf.data Iterator")
        return it

    @staticmethod
    def from_structure(output_types: Any, output_shapes: Any = None,
                       shared_name: str | None = None, output_classes: Any = None
                       ) -> "Iterator":
        """An iterator for any dataset of this structure, started on one with
        :meth:`make_initializer`."""
        types = [_dt.as_dtype(t).base_dtype for t in flatten(output_types)]
        if output_shapes is None:
            shapes = [unknown_shape()] * len(types)
        else:
            if not _same_structure(output_types, output_shapes) and \
                    len(flatten(output_shapes)) != len(types):
                raise TypeError("output_types and output_shapes must have the same "
                                "structure")
            shapes = [as_shape(s) for s in flatten(output_shapes)]
        structure = _structure_of(output_types, output_classes)
        handle = _iterator_handle(structure, types, shapes, shared_name or "", "Iterator")
        return Iterator(handle, None, output_types, pack_as(structure, shapes),
                        output_classes)

    # -- properties -------------------------------------------------------------------
    @property
    def initializer(self) -> Any:
        """The op that starts the iterator on its dataset."""
        if self._initializer is None:
            raise ValueError("Iterator does not have an initializer.")
        return self._initializer

    # -- ops ----------------------------------------------------------------------------
    def make_initializer(self, dataset: Dataset, name: str | None = None) -> Any:
        """The op that (re)starts this iterator on ``dataset``.

        :raises TypeError: when the dataset's structure or types differ
        :raises ValueError: when its shapes are incompatible with the iterator's"""
        if not isinstance(dataset, Dataset):
            raise TypeError(f"make_initializer expects a Dataset, got {type(dataset).__name__}")
        if not _same_structure(self._structure, dataset._structure) or \
                len(self._types) != len(dataset._types):
            raise TypeError(f"Expected output types {self.output_types} but got dataset "
                            f"with output types {dataset.output_types}.")
        if self._types != dataset._types or \
                _sparse_flags(self._structure) != _sparse_flags(dataset._structure):
            raise TypeError(f"Expected output types {self.output_types} but got dataset "
                            f"with output types {dataset.output_types}.")
        for a, b in zip(self._shapes, dataset._shapes):
            if not a.is_compatible_with(b):
                raise TypeError(f"Expected output shapes compatible with "
                                f"{self.output_shapes} but got dataset with output shapes "
                                f"{dataset.output_shapes}.")
        token = register_dataset(dataset, get_default_graph())
        owner = _ITERATORS.get(self._resource, self)
        owner._dataset_tokens.append(token)
        if owner is not self:
            self._dataset_tokens.append(token)
        with name_scope(name, "make_initializer"):
            return apply_op("MakeIterator", name=name, iterator=self._resource,
                            arguments=dataset._inputs(), dataset=token)

    def get_next(self, name: str | None = None) -> Any:
        """The tensors of the next element, nested as the dataset's elements are."""
        self._get_next_calls += 1
        types, shapes = op_types_shapes(self._structure, self._types, self._shapes)
        outs = apply_op("IteratorGetNext", name=name or "IteratorGetNext",
                        iterator=self._resource, output_types=types,
                        output_shapes=_shapes_list(shapes))
        return pack_outputs(self._structure, self._shapes, outs)

    def string_handle(self, name: str | None = None) -> Tensor:
        """A string naming this iterator, for :meth:`from_string_handle` iterators."""
        return apply_op("IteratorToStringHandle", name=name, resource_handle=self._resource)

    @staticmethod
    def from_string_handle(string_handle: Any, output_types: Any, output_shapes: Any = None,
                           output_classes: Any = None) -> "Iterator":
        """An iterator that reads whichever iterator ``string_handle`` (fed) names."""
        types = [_dt.as_dtype(t).base_dtype for t in flatten(output_types)]
        shapes = [unknown_shape()] * len(types) if output_shapes is None else \
            [as_shape(s) for s in flatten(output_shapes)]
        structure = _structure_of(output_types, output_classes)
        op_types, op_shapes = op_types_shapes(structure, types, shapes)
        handle = apply_op("IteratorFromStringHandleV2", string_handle=string_handle,
                          output_types=op_types, output_shapes=_shapes_list(op_shapes))
        return Iterator(handle, None, output_types, pack_as(structure, shapes),
                        output_classes)


def _iterator_handle(structure: Any, types: list[_dt.DType], shapes: list[TensorShape],
                     shared_name: str, name: str) -> Tensor:
    types, shapes = op_types_shapes(structure, types, shapes)
    g = get_default_graph()
    with g.control_dependencies(None):
        handle = apply_op("IteratorV2", name=name, shared_name=shared_name, container="",
                          output_types=types, output_shapes=_shapes_list(shapes))
    add_to_collection(ITERATORS_COLLECTION, handle)
    return handle


def make_initializable_iterator(dataset: Dataset, shared_name: str | None = None) -> Iterator:
    """``dataset.make_initializable_iterator()``."""
    if not isinstance(dataset, Dataset):
        raise TypeError(f"expected a Dataset, got {type(dataset).__name__}")
    with name_scope("Iterator"):
        handle = _iterator_handle(dataset._structure, dataset._types, dataset._shapes,
                                  shared_name or "", "Iterator")
        it = Iterator(handle, None, dataset.output_types, dataset.output_shapes,
                      dataset.output_classes)
        it._initializer = it.make_initializer(dataset, name="MakeIterator")
    return it


def make_one_shot_iterator(dataset: Dataset) -> Iterator:
    """``dataset.make_one_shot_iterator()``: started by its first ``get_next``.

    :raises ValueError: when the dataset captures a placeholder (as TF)"""
    if not isinstance(dataset, Dataset):
        raise TypeError(f"expected a Dataset, got {type(dataset).__name__}")
    inputs = dataset._inputs()
    for t in inputs:
        if t.op.type in ("Placeholder", "PlaceholderV2", "PlaceholderWithDefault"):
            raise ValueError(f"Cannot capture a placeholder (name:{t.op.name}, type:"
                             f"{t.op.type}) by value.")
    token = register_dataset(dataset, get_default_graph())
    types, shapes = op_types_shapes(dataset._structure, dataset._types, dataset._shapes)
    handle = apply_op("OneShotIterator", name="OneShotIterator", arguments=inputs,
                      dataset=token, output_types=types, output_shapes=_shapes_list(shapes))
    add_to_collection(ITERATORS_COLLECTION, handle)
    it = Iterator(handle, None, dataset.output_types, dataset.output_shapes,
                  dataset.output_classes)
    it._dataset_tokens.append(token)
    return it


def get_output_types(dataset_or_iterator: Any) -> Any:
    """``tf.compat.v1.data.get_output_types``."""
    return dataset_or_iterator.output_types


def get_output_shapes(dataset_or_iterator: Any) -> Any:
    """``tf.compat.v1.data.get_output_shapes``."""
    return dataset_or_iterator.output_shapes


def get_output_classes(dataset_or_iterator: Any) -> Any:
    """``tf.compat.v1.data.get_output_classes``."""
    return dataset_or_iterator.output_classes


API = {
    "data.Iterator": Iterator,
    "data.make_one_shot_iterator": make_one_shot_iterator,
    "data.make_initializable_iterator": make_initializable_iterator,
    "data.get_output_types": get_output_types,
    "data.get_output_shapes": get_output_shapes,
    "data.get_output_classes": get_output_classes,
}
