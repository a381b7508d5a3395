"""``tf.map_fn``, ``tf.foldl``, ``tf.foldr`` and ``tf.scan``, built as TF 1.15 builds
them: the elements are unstacked into TensorArrays, a ``while_loop`` reads one per
iteration and (for ``map_fn`` and ``scan``) writes each result to an output TensorArray
that is stacked at the end. Gradients come from the loop's and the TensorArrays'.

Also ``tf.py_func``, ``tf.numpy_function`` and ``tf.py_function`` (TF's script_ops): the
``PyFunc``, ``PyFuncStateless`` and ``EagerPyFunc`` ops call a registered Python function
on the host (CPU kernels only), by the node's ``token`` attr."""
from __future__ import annotations

import threading
import traceback
import weakref
from typing import Any, Callable

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.graph import (Tensor, api_function, apply_op, convert_to_tensor, get_default_graph,
                          name_scope, numpy_value_for)
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import Dimension, TensorShape

from ._common import ks
from .control_flow_ops import _assert_same_structure, _flatten, _pack_like, while_loop
from .tensor_array_ops import TensorArray

__all__ = ["map_fn", "foldl", "foldr", "scan", "py_func", "numpy_function", "py_function",
           "EagerValue"]


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


# =======================================================================================
# py_func, numpy_function, py_function (TF's script_ops): Python on the host
# =======================================================================================
class _FuncRegistry:
    """The Python functions of PyFunc nodes, by the node's ``token`` attr
    (``pyfunc_<n>``). A function lives as long as the graph it was added to."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._funcs: dict[str, Callable[..., Any]] = {}
        self._next = 0

    def insert(self, func: Callable[..., Any], graph: Any) -> str:
        with self._lock:
            token = f"pyfunc_{self._next}"
            self._next += 1
            self._funcs[token] = func
        try:
            weakref.finalize(graph, self._remove, token)
        except TypeError:  # a graph that cannot be weakly referenced keeps its funcs
            pass
        return token

    def _remove(self, token: str) -> None:
        with self._lock:
            self._funcs.pop(token, None)

    def get(self, token: str) -> Callable[..., Any] | None:
        return self._funcs.get(token)

    def size(self) -> int:
        return len(self._funcs)


_py_funcs = _FuncRegistry()

_PY_FUNC_ATTRS = ["token: string", "Tin: list(type) >= 0", "Tout: list(type) >= 0"]
ks.op(OpDef("PyFunc", inputs=["input: Tin"], outputs=["output: Tout"], attrs=_PY_FUNC_ATTRS,
            is_stateful=True, doc="Calls a Python function with numpy arrays."),
      OpDef("PyFuncStateless", inputs=["input: Tin"], outputs=["output: Tout"],
            attrs=_PY_FUNC_ATTRS, doc="A PyFunc without side effects."),
      OpDef("EagerPyFunc", inputs=["input: Tin"], outputs=["output: Tout"],
            attrs=_PY_FUNC_ATTRS, is_stateful=True,
            doc="Calls a Python function with eager-like values (tf.py_function)."))
ks.not_differentiable("PyFunc", "PyFuncStateless")

#: TF's DataTypeString where it differs from the dtype's name
_TF_TYPE_STRING = {"float32": "float", "float64": "double", "float16": "half"}


def _type_string(dt: Any) -> str:
    name = _dt.as_dtype(dt).name
    return _TF_TYPE_STRING.get(name, name)


class EagerValue(np.ndarray):
    """What a ``tf.py_function`` receives for each input in flowrt's graph mode: a numpy
    array with ``.numpy()`` (as an ``EagerTensor`` has)."""

    def numpy(self) -> np.ndarray:
        """The value as a plain numpy array (0-d values as numpy scalars)."""
        out = np.asarray(self).view(np.ndarray)
        return out[()] if out.ndim == 0 else out


def _error_for_python_exception(exc: BaseException, token: str) -> errors.OpError:
    """The OpError TF's PyFunc kernel reports for an exception raised by the function:
    ValueError/TypeError: InvalidArgument, StopIteration: OutOfRange, MemoryError:
    ResourceExhausted, NotImplementedError: Unimplemented, an OpError its own class,
    anything else Unknown; the message is the formatted traceback."""
    if isinstance(exc, errors.OpError):
        return exc
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if isinstance(exc, (ValueError, TypeError)):
        cls: type[errors.OpError] = errors.InvalidArgumentError
    elif isinstance(exc, StopIteration):
        cls = errors.OutOfRangeError
    elif isinstance(exc, MemoryError):
        cls = errors.ResourceExhaustedError
    elif isinstance(exc, NotImplementedError):
        cls = errors.UnimplementedError
    else:
        cls = errors.UnknownError
    return cls(None, None, text.rstrip("\n"))


def _convert_numpy_result(value: Any) -> np.ndarray:
    """A value a ``py_func`` returned as an array (TF's ``FuncRegistry._convert``):
    unicode becomes UTF-8 bytes; no dtype is forced."""
    result = np.asarray(value, order="C")
    if result.dtype.char == "S":  # a string tensor holds bytes objects
        return result.astype(object)
    if result.dtype.char == "U":
        return np.vectorize(lambda x: x.encode("utf8"), otypes=[object])(result) \
            if result.ndim else np.asarray(result.item().encode("utf8"), dtype=object)
    return result


def _convert_eager_result(value: Any, dtype: Any) -> np.ndarray:
    """A value a ``py_function`` returned, converted to its Tout dtype as
    ``tf.convert_to_tensor`` would (TypeError/ValueError when it cannot be)."""
    if isinstance(value, EagerValue):
        value = np.asarray(value).view(np.ndarray)
    return numpy_value_for(value, _dt.as_dtype(dtype))


def _py_func_kernel(eager: bool) -> Callable[[Any], Callable[..., Any]]:
    def factory(ctx: Any) -> Callable[..., Any]:
        token = ctx.attrs["token"]
        if isinstance(token, bytes):
            token = token.decode()
        tout = [_dt.as_dtype(t) for t in ctx.attrs.get("Tout", [])]

        def call(step: Any, *inputs: Any) -> Any:
            func = _py_funcs.get(token)
            if func is None:
                raise errors.InvalidArgumentError(
                    None, None, f"ValueError: callback {token} is not found")
            args = [np.asarray(a).view(EagerValue) if eager else _host_array(a)
                    for a in inputs]
            try:
                ret = func(*args)
            except Exception as e:  # noqa: BLE001 - reported as TF reports it
                raise _error_for_python_exception(e, token) from e
            try:
                outs = _collect_results(ret, tout, eager)
            except (TypeError, ValueError) as e:
                raise errors.InvalidArgumentError(None, None, f"{type(e).__name__}: {e}"
                                                  ) from e
            if len(outs) != len(tout):
                raise errors.InvalidArgumentError(
                    None, None, f"{token} returns {len(outs)} values, but expects to see "
                    f"{len(tout)} values.")
            for i, (o, want) in enumerate(zip(outs, tout)):
                got = _dt.string if o.dtype == object or o.dtype.char == "S" else \
                    _dt.as_dtype(o.dtype)
                if got.base_dtype is not want:
                    raise errors.InvalidArgumentError(
                        None, None, f"{i}-th value returned by {token} is "
                        f"{_type_string(got)}, but expects {_type_string(want)}")
            if not tout:
                return None
            return outs[0] if len(outs) == 1 else tuple(outs)

        return call

    return factory


def _host_array(a: Any) -> np.ndarray:
    arr = np.asarray(a)
    return arr if arr.flags.writeable else arr.copy()


def _collect_results(ret: Any, tout: list[Any], eager: bool) -> list[np.ndarray]:
    """The function's return value as a list of arrays (None: no values)."""
    if eager:
        if ret is None:
            return []
        if isinstance(ret, (list, tuple)):
            return [_convert_eager_result(x, d) for x, d in zip(ret, tout)] + \
                [np.asarray(x) for x in ret[len(tout):]]
        return [_convert_eager_result(ret, tout[0] if tout else None)]
    if isinstance(ret, bytes):
        ret = [ret]
    if isinstance(ret, (list, tuple)):
        return [_convert_numpy_result(x) for x in ret]
    arr = _convert_numpy_result(ret)
    if arr.dtype == object and arr.ndim == 0 and arr.item() is None:
        return []
    return [arr]


for _op in ("PyFunc", "PyFuncStateless"):
    ks.kernel(_op, device_type="CPU", kind="step")(_py_func_kernel(eager=False))
ks.kernel("EagerPyFunc", device_type="CPU", kind="step")(_py_func_kernel(eager=True))


def _internal_py_func(func: Callable[..., Any], inp: Any, Tout: Any, stateful: bool,
                      eager: bool, name: str | None) -> Any:
    """Add the PyFunc/PyFuncStateless/EagerPyFunc node calling ``func``.

    :raises ValueError: if ``func`` is not callable
    """
    if not callable(func):
        raise ValueError(f"Expected func to be callable, got func of type {type(func)}")
    inp = list(inp) if isinstance(inp, (list, tuple)) else [inp]
    is_list = isinstance(Tout, (list, tuple))
    tout = [_dt.as_dtype(t) for t in (Tout if is_list else [Tout])]
    graph = get_default_graph()
    token = _py_funcs.insert(func, graph)
    op_type = "EagerPyFunc" if eager else ("PyFunc" if stateful else "PyFuncStateless")
    result = apply_op(op_type, name=name, input=inp, token=token, Tout=tout)
    if not tout:  # no outputs: the op itself, as TF's generated wrapper returns
        op = graph.get_operations()[-1]
        return op if is_list else None
    if isinstance(result, Tensor):
        result = [result]
    return list(result) if is_list else result[0]


@ks.api("py_func")
def py_func(func: Callable[..., Any], inp: Any, Tout: Any, stateful: bool = True,
            name: str | None = None) -> Any:
    """Wrap the Python function ``func`` as an op (``tf.py_func``): it runs on the host
    with the inputs as numpy arrays and must return numpy values of the ``Tout`` dtypes
    exactly (a Python float is float64). With ``Tout`` a list the result is a list.

    Exceptions raised by ``func`` fail the step with TF's error classes (ValueError /
    TypeError: InvalidArgumentError, anything else UnknownError ...). The op has no
    gradient; give it one with ``gradient_override_map`` or ``tf.custom_gradient``.
    """
    return _internal_py_func(func, inp, Tout, stateful, False, name)


@ks.api("numpy_function")
def numpy_function(func: Callable[..., Any], inp: Any, Tout: Any,
                   name: str | None = None, stateful: bool = True) -> Any:
    """``tf.numpy_function``: :func:`py_func` (stateful unless told otherwise)."""
    return _internal_py_func(func, inp, Tout, stateful, False, name)


@ks.api("py_function")
def py_function(func: Callable[..., Any], inp: Any, Tout: Any,
                name: str | None = None) -> Any:
    """``tf.py_function`` in graph mode: ``func`` gets each input as an
    :class:`EagerValue` (a numpy array with ``.numpy()``) and its results are converted
    to the ``Tout`` dtypes as ``tf.convert_to_tensor`` would. Without eager execution
    there is no tape: its gradient must come from ``gradient_override_map``.
    """
    return _internal_py_func(func, inp, Tout, True, True, name)


@ks.gradient("EagerPyFunc")
def _eager_py_func_grad(op: Any, *grads: Any) -> list[Any]:
    raise LookupError(f"No gradient defined for operation '{op.name}' (op type: "
                      "EagerPyFunc): flowrt runs tf.py_function's Python function on numpy "
                      "values, with no tape to differentiate it; use "
                      "tf.custom_gradient or gradient_override_map")
