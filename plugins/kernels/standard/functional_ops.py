"""``tf.map_fn``, ``tf.foldl``, ``tf.foldr`` and ``tf.scan``, built as TF 1.15 builds
them: the elements are unstacked into TensorArrays, a ``while_loop`` reads one per
iteration and (for ``map_fn`` and ``scan``) writes each result to an output TensorArray
that is stacked at the end. Gradients come from the loop's and the TensorArrays'."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowrt import dtypes as _dt
from flowrt.graph import Tensor, api_function, convert_to_tensor, name_scope
from flowrt.tensor_shape import Dimension, TensorShape

from ._common import ks
from .control_flow_ops import _assert_same_structure, _flatten, _pack_like, while_loop
from .tensor_array_ops import TensorArray

__all__ = ["map_fn", "foldl", "foldr", "scan"]


def _is_nested(x: Any) -> bool:
    return isinstance(x, (list, tuple, dict))


def _elements(elems: Any) -> tuple[list[Tensor], Any]:
    """The flat element tensors and the number of elements (a Python int when static,
    else a scalar tensor)."""
    flat = [convert_to_tensor(e, name="elem") for e in _flatten(elems)]
    if not flat:
        raise ValueError("elems must not be empty")
    for e in flat:
        if e.shape.ndims == 0:
            raise ValueError("Elements in elems must be 1+ dimensional Tensors, not "
                             f"scalars: {e}")
    n = flat[0].shape[0].value if flat[0].shape.ndims else None
    if n is None:
        n = api_function("shape")(flat[0])[0]
    return flat, n


def _static_n(flat: list[Tensor]) -> Dimension:
    d = Dimension(None)
    for e in flat:
        if e.shape.ndims:
            d = d.merge_with(e.shape[0])
    return d


def _unstacked(flat: list[Tensor], n: Any) -> list[TensorArray]:
    return [TensorArray(e.dtype, size=n, dynamic_size=False, infer_shape=True).unstack(e)
            for e in flat]


def _stacked(tas: list[TensorArray], flat_elems: list[Tensor]) -> list[Tensor]:
    n_static = _static_n(flat_elems)
    out = []
    for ta in tas:
        r = ta.stack()
        if r.shape.ndims is not None:
            r.set_shape(TensorShape([n_static]).concatenate(r.shape[1:]))
        out.append(r)
    return out


@ks.api("map_fn")
def map_fn(fn: Callable[[Any], Any], elems: Any, dtype: Any = None,
           parallel_iterations: int | None = None, back_prop: bool = True,
           swap_memory: bool = False, infer_shape: bool = True,
           name: str | None = None) -> Any:
    """Applies ``fn`` to each element of ``elems`` unstacked on axis 0 and stacks the
    results (``tf.map_fn``).

    ``elems`` may be a nested structure of tensors with the same first dimension; ``fn``
    then receives the same structure of slices. ``dtype`` gives the structure and dtypes
    of ``fn``'s result when it differs from ``elems``'.

    :raises TypeError: ``fn`` not callable
    :raises ValueError: scalar elements, a result of another structure
    """
    if not callable(fn):
        raise TypeError("fn must be callable.")
    in_graph_mode = True
    if parallel_iterations is None:
        parallel_iterations = 10 if in_graph_mode else 1
    out_structure = elems if dtype is None else dtype
    with name_scope(name, "map", _flatten(elems)):
        flat, n = _elements(elems)
        dtypes_flat = [e.dtype for e in flat] if dtype is None else \
            [_dt.as_dtype(d) for d in _flatten(dtype)]
        elems_ta = _unstacked(flat, n)
        accs_ta = [TensorArray(d, size=n, dynamic_size=False, infer_shape=infer_shape)
                   for d in dtypes_flat]

        def compute(i: Tensor, tas: list[TensorArray]) -> tuple[Any, Any]:
            packed = _pack_like(elems, [ta.read(i) for ta in elems_ta]) \
                if _is_nested(elems) else elems_ta[0].read(i)
            result = fn(packed)
            if _is_nested(out_structure) or _is_nested(result):
                if not _is_nested(out_structure) or not _is_nested(result):
                    raise ValueError("The two structures don't have the same nested "
                                     f"structure.\n\nFirst structure: {out_structure}\n\n"
                                     f"Second structure: {result}")
                _assert_same_structure(list(out_structure) if not isinstance(
                    out_structure, dict) else [out_structure], list(result) if not
                    isinstance(result, dict) else [result])
            values = _flatten(result)
            if len(values) != len(tas):
                raise ValueError(f"fn returned {len(values)} tensors, expected {len(tas)}")
            return i + 1, [ta.write(i, v) for ta, v in zip(tas, values)]

        i0 = convert_to_tensor(np.int32(0))
        _, r_a = while_loop(lambda i, _: i < n, compute, (i0, accs_ta),
                            parallel_iterations=parallel_iterations, back_prop=back_prop,
                            swap_memory=swap_memory, maximum_iterations=n)
        results = _stacked(list(r_a), flat)
        return _pack_like(out_structure, results) if _is_nested(out_structure) \
            else results[0]


def _fold(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any,
          parallel_iterations: int, back_prop: bool, swap_memory: bool, name: str | None,
          default_name: str, reverse: bool) -> Any:
    if not callable(fn):
        raise TypeError("fn must be callable.")
    with name_scope(name, default_name, _flatten(elems)):
        flat, n = _elements(elems)
        elems_ta = _unstacked(flat, n)

        def pack(values: list[Tensor]) -> Any:
            return _pack_like(elems, values) if _is_nested(elems) else values[0]

        last = n - 1
        if initializer is None:
            a = pack([ta.read(last if reverse else 0) for ta in elems_ta])
            i = last - 1 if reverse else convert_to_tensor(np.int32(1))
        else:
            a = initializer
            i = last if reverse else convert_to_tensor(np.int32(0))
        i = convert_to_tensor(i, dtype=_dt.int32)

        def compute(i: Tensor, a: Any) -> list[Any]:
            elem_i = pack([ta.read(i) for ta in elems_ta])
            return [i - 1 if reverse else i + 1, fn(a, elem_i)]

        cond = (lambda i, a: i >= 0) if reverse else (lambda i, a: i < n)  # noqa: E731
        _, r_a = while_loop(cond, compute, [i, a], parallel_iterations=parallel_iterations,
                            back_prop=back_prop, swap_memory=swap_memory,
                            maximum_iterations=n)
        return r_a


@ks.api("foldl")
def foldl(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None,
          parallel_iterations: int = 10, back_prop: bool = True, swap_memory: bool = False,
          name: str | None = None) -> Any:
    """Folds ``fn(accumulator, element)`` over ``elems`` unstacked on axis 0, first to
    last (``tf.foldl``); without ``initializer`` the first element starts the fold."""
    return _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory,
                 name, "foldl", reverse=False)


@ks.api("foldr")
def foldr(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None,
          parallel_iterations: int = 10, back_prop: bool = True, swap_memory: bool = False,
          name: str | None = None) -> Any:
    """Folds ``fn(accumulator, element)`` over ``elems`` unstacked on axis 0, last to
    first (``tf.foldr``); without ``initializer`` the last element starts the fold."""
    return _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory,
                 name, "foldr", reverse=True)


@ks.api("scan")
def scan(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None,
         parallel_iterations: int = 10, back_prop: bool = True, swap_memory: bool = False,
         infer_shape: bool = True, reverse: bool = False, name: str | None = None) -> Any:
    """The accumulators of folding ``fn(accumulator, element)`` over ``elems``, stacked
    (``tf.scan``); ``reverse`` scans from the last element. Without ``initializer`` the
    first (last) element starts and is the first (last) result.

    :raises ValueError: ``fn`` returns another structure than the accumulator's
    """
    if not callable(fn):
        raise TypeError("fn must be callable.")
    acc_structure = elems if initializer is None else initializer
    with name_scope(name, "scan", _flatten(elems)):
        flat, n = _elements(elems)
        elems_ta = _unstacked(flat, n)

        def pack_in(values: list[Tensor]) -> Any:
            return _pack_like(elems, values) if _is_nested(elems) else values[0]

        def pack_acc(values: list[Tensor]) -> Any:
            return _pack_like(acc_structure, values) if _is_nested(acc_structure) \
                else values[0]

        last = n - 1
        if initializer is None:
            a_flat = [ta.read(last if reverse else 0) for ta in elems_ta]
            start = 1
        else:
            a_flat = [convert_to_tensor(x) for x in _flatten(initializer)]
            start = 0
        accs_ta = [TensorArray(a.dtype, size=n, dynamic_size=False, infer_shape=infer_shape,
                               element_shape=a.shape if infer_shape else None)
                   for a in a_flat]
        if initializer is None:
            accs_ta = [ta.write(last if reverse else 0, a) for ta, a in zip(accs_ta, a_flat)]

        def compute(i: Tensor, a_flat: list[Tensor], tas: list[TensorArray]) -> Any:
            packed_elems = pack_in([ta.read(i) for ta in elems_ta])
            a_out = fn(pack_acc(list(a_flat)), packed_elems)
            if _is_nested(acc_structure) != _is_nested(a_out):
                raise ValueError("The two structures don't have the same nested structure."
                                 f"\n\nFirst structure: {acc_structure}\n\nSecond "
                                 f"structure: {a_out}")
            if _is_nested(a_out):
                _assert_same_structure([acc_structure], [a_out])
            flat_out = [convert_to_tensor(v) for v in _flatten(a_out)]
            tas = [ta.write(i, v) for ta, v in zip(tas, flat_out)]
            return i - 1 if reverse else i + 1, flat_out, tas

        if reverse:
            i0 = convert_to_tensor(n - 1 - start, dtype=_dt.int32)
            cond = lambda i, _1, _2: i >= 0  # noqa: E731
        else:
            i0 = convert_to_tensor(np.int32(start))
            cond = lambda i, _1, _2: i < n  # noqa: E731
        _, _, r_a = while_loop(cond, compute, (i0, a_flat, accs_ta),
                               parallel_iterations=parallel_iterations, back_prop=back_prop,
                               swap_memory=swap_memory, maximum_iterations=n)
        return pack_acc(_stacked(list(r_a), flat))
