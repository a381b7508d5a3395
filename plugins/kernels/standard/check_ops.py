"""The rest of TF 1.15's ``check_ops``: ``tf.debugging.assert_*`` checks that
``logging_ops`` does not define (integer, type, scalar, near, rank ranges, shapes, same
float dtype, proper iterables) and the ``tf.debugging`` aliases of ``is_finite``,
``is_inf`` and ``is_nan``.

As in TF, whatever is known while building the graph is checked then (TypeError for a
wrong dtype, ValueError for a wrong static rank or shape); the rest becomes an ``Assert``
op that raises InvalidArgumentError when the step runs.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt.framework.sparse_tensor import SparseTensor
from flowrt.graph import Operation, Tensor, apply_op, convert_to_tensor, name_scope

from ._common import constant_value, ks
from .logging_ops import Assert, _no_op, _reduce_all, _with_dependencies, assert_rank, group

__all__ = ["assert_integer", "assert_type", "assert_scalar", "assert_same_float_dtype",
           "assert_proper_iterable", "assert_rank_at_least", "assert_rank_in", "assert_near",
           "assert_shapes"]

_I32 = _dt.int32


@ks.api("debugging.assert_integer", "assert_integer")
def assert_integer(x: Any, message: str | None = None, name: str | None = None) -> Operation:
    """Statically asserts that ``x`` has an integer dtype.

    :raises TypeError: when it does not.
    """
    message = message or ""
    with name_scope(name, "assert_integer", [x]):
        x = convert_to_tensor(x, name="x")
        if not x.dtype.is_integer:
            raise TypeError(f'{message}  Expected "x" to be integer type.  Found: {x.name} '
                            f"of dtype {x.dtype}")
        return _no_op(name="statically_determined_was_integer")


@ks.api("debugging.assert_type", "assert_type")
def assert_type(tensor: Any, tf_type: Any, message: str | None = None,
                name: str | None = None) -> Operation:
    """Statically asserts that ``tensor``'s dtype is ``tf_type``.

    :raises TypeError: when it is not.
    """
    message = message or ""
    tf_type = _dt.as_dtype(tf_type)
    with name_scope(name, "assert_type", [tensor]):
        tensor = convert_to_tensor(tensor, name="tensor")
        if tensor.dtype != tf_type:
            raise TypeError(f"{message}  {tensor.name} must be of type {tf_type}")
        return _no_op(name="statically_determined_correct_type")


@ks.api("debugging.assert_scalar", "assert_scalar")
def assert_scalar(tensor: Any, name: str | None = None, message: str | None = None) -> Tensor:
    """Returns ``tensor`` if its static shape is a scalar.

    :raises ValueError: when its static rank is not 0 (or unknown).
    """
    with name_scope(name, "assert_scalar", [tensor]) as scope:
        tensor = convert_to_tensor(tensor, name=scope)
        shape = tensor.shape
        if shape.ndims != 0:
            raise ValueError(f"{message or ''}Expected scalar shape for {tensor.name}, saw "
                             f"shape: {shape}.")
        return tensor


def _same_base_type(items: Sequence[Any], expected: Any) -> Any:
    original = expected
    for item in items:
        if item is not None:
            t = item.dtype.base_dtype
            if not expected:
                expected = t
            elif expected != t:
                break
    else:
        return expected
    expected, first = original, None
    for item in items:
        if item is None:
            continue
        t = item.dtype.base_dtype
        label = item.name if hasattr(item, "name") else str(item)
        if not expected:
            expected, first = t, label
        elif expected != t:
            suffix = f" as {first}" if first else ""
            raise ValueError(f"{label}, type={t}, must be of the same type ({expected})"
                             f"{suffix}.")
    return expected


@ks.api("debugging.assert_same_float_dtype", "assert_same_float_dtype")
def assert_same_float_dtype(tensors: Sequence[Any] | None = None,
                            dtype: Any = None) -> _dt.DType:
    """The common floating dtype of ``tensors`` (and ``dtype``); float32 when neither
    gives one.

    :raises ValueError: on mixed dtypes or a non-floating dtype.
    """
    if dtype is not None:
        dtype = _dt.as_dtype(dtype)
    if tensors:
        dtype = _same_base_type(tensors, dtype)
    if not dtype:
        dtype = _dt.float32
    elif not dtype.is_floating:
        raise ValueError(f"Expected floating point type, got {dtype}.")
    return dtype


@ks.api("debugging.assert_proper_iterable", "assert_proper_iterable")
def assert_proper_iterable(values: Any) -> None:
    """Raises TypeError unless ``values`` is an iterable other than a tensor, a sparse
    tensor, an ndarray or a string."""
    if isinstance(values, (Tensor, SparseTensor, np.ndarray, bytes, str)):
        raise TypeError(f'Expected argument "values" to be a "proper" iterable.  Found: '
                        f"{type(values)}")
    if not hasattr(values, "__iter__"):
        raise TypeError(f'Expected argument "values" to be iterable.  Found: {type(values)}')


class _StaticRankFailed(ValueError):
    def __init__(self, actual: int, given: Any):
        super().__init__("Static rank condition failed", actual, given)
        self.actual, self.given = actual, given


def _rank_check(rank: Tensor) -> Operation:
    return assert_rank(rank, 0, data=["Rank must be a scalar. Received rank: ", rank])


def _assert_ranks(x: Tensor, ranks: Sequence[Tensor], static_ok: Any, dynamic: Any,
                  data: list[Any], summarize: Any) -> Operation:
    """TF's ``_assert_ranks_condition``: a no-op when the ranks are known and hold, an
    ``Assert`` on ``dynamic(rank(x), ranks)`` otherwise."""
    for r in ranks:
        assert_type(r, _I32)
    statics = [constant_value(r) for r in ranks]
    if all(s is not None for s in statics):
        if any(np.ndim(s) != 0 for s in statics):
            raise ValueError("Rank must be a scalar.")
        xr = x.shape.ndims
        if xr is not None:
            given = tuple(int(s) for s in statics)
            if not static_ok(xr, given):
                raise _StaticRankFailed(xr, given)
            return _no_op(name="static_checks_determined_all_ok")
    condition = dynamic(apply_op("Rank", input=x), ranks)
    for r, s in zip(ranks, statics):
        if s is None:
            condition = _with_dependencies([_rank_check(r)], condition)
    return Assert(condition, data, summarize=summarize)


@ks.api("debugging.assert_rank_at_least", "assert_rank_at_least")
def assert_rank_at_least(x: Any, rank: Any, data: Any = None, summarize: int | None = None,
                         message: str | None = None, name: str | None = None) -> Operation:
    """Asserts that ``x`` has rank ``rank`` or more.

    :raises ValueError: when the ranks are statically known and the check fails.
    """
    with name_scope(name, "assert_rank_at_least", [x, rank] + list(data or [])):
        x = convert_to_tensor(x, name="x")
        rank = convert_to_tensor(rank, name="rank")
        message = message or ""
        if data is None:
            data = [message, f"Tensor {x.name} must have rank at least", rank,
                    "Received shape: ", apply_op("Shape", input=x, out_type=_I32)]
        try:
            return _assert_ranks(x, [rank], lambda a, g: a >= g[0],
                                 lambda r, gs: apply_op("GreaterEqual", x=r, y=gs[0]),
                                 data, summarize)
        except _StaticRankFailed as e:
            raise ValueError(f"{message}.  Tensor {x.name} must have rank at least "
                             f"{e.given[0]}.  Received rank {e.actual}, shape {x.shape}"
                             ) from None


def _rank_in(r: Tensor, ranks: Sequence[Tensor]) -> Tensor:
    if not ranks:
        return convert_to_tensor(False)
    out = apply_op("Equal", x=ranks[0], y=r)
    for g in ranks[1:]:
        out = apply_op("LogicalOr", x=out, y=apply_op("Equal", x=g, y=r))
    return out


@ks.api("debugging.assert_rank_in", "assert_rank_in")
def assert_rank_in(x: Any, ranks: Sequence[Any], data: Any = None,
                   summarize: int | None = None, message: str | None = None,
                   name: str | None = None) -> Operation:
    """Asserts that ``x``'s rank is one of ``ranks``.

    :raises ValueError: when the ranks are statically known and the check fails.
    """
    with name_scope(name, "assert_rank_in", [x] + list(ranks) + list(data or [])):
        x = convert_to_tensor(x, name="x")
        rank_ts = [convert_to_tensor(r, name="rank") for r in ranks]
        message = message or ""
        if data is None:
            data = ([message, f"Tensor {x.name} must have rank in"] + list(rank_ts)
                    + ["Received shape: ", apply_op("Shape", input=x, out_type=_I32)])
        try:
            return _assert_ranks(x, rank_ts, lambda a, g: a in g, _rank_in, data, summarize)
        except _StaticRankFailed as e:
            raise ValueError(f"{message}.  Tensor {x.name} must have rank in {e.given}.  "
                             f"Received rank {e.actual}, shape {x.shape}") from None


@ks.api("debugging.assert_near", "assert_near")
def assert_near(x: Any, y: Any, rtol: Any = None, atol: Any = None, data: Any = None,
                summarize: int | None = None, message: str | None = None,
                name: str | None = None) -> Operation:
    """Asserts ``|x - y| < atol + rtol * |y|`` element-wise (default tolerances
    ``10 * eps`` of the dtype)."""
    message = message or ""
    with name_scope(name, "assert_near", [x, y, rtol, atol, data]):
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, name="y", dtype=x.dtype.base_dtype)
        eps = float(np.finfo(x.dtype.base_dtype.np).eps)
        rtol = convert_to_tensor(10 * eps if rtol is None else rtol, name="rtol",
                                 dtype=x.dtype.base_dtype)
        atol = convert_to_tensor(10 * eps if atol is None else atol, name="atol",
                                 dtype=x.dtype.base_dtype)
        if data is None:
            data = [message, f"x and y not equal to tolerance rtol = {rtol}, atol = {atol}",
                    f"x ({x.name}) = ", x, f"y ({y.name}) = ", y]
        tol = apply_op("AddV2", x=atol, y=apply_op("Mul", x=rtol, y=apply_op("Abs", x=y)))
        diff = apply_op("Abs", x=apply_op("Sub", x=x, y=y))
        condition = _reduce_all(apply_op("Less", x=diff, y=tol))
        return Assert(condition, data, summarize=summarize)


def _shape_spec(spec: Any) -> tuple[bool, list[Any]]:
    """(has an unspecified outer part, the inner dim entries) of an assert_shapes spec."""
    spec = list(spec.as_list() if hasattr(spec, "as_list") else spec)
    outer = bool(spec) and (spec[0] is Ellipsis or spec[0] == "*")
    if outer:
        spec = spec[1:]
    entries = []
    for s in spec:
        if s is None or s == ".":
            entries.append(None)
        else:
            try:
                entries.append(int(s))
            except (TypeError, ValueError):
                entries.append(("sym", s))
    return outer, entries


@ks.api("debugging.assert_shapes")
def assert_shapes(shapes: Any, data: Any = None, summarize: int | None = None,
                  message: str | None = None, name: str | None = None) -> Operation:
    """Asserts the shapes of several tensors at once: each spec entry is a size, None or
    ``'.'`` (any size), or a symbol that must be the same size everywhere it appears; a
    leading ``...`` or ``'*'`` leaves the outer dims free (TF's ``assert_shapes``).

    :raises ValueError: when statically known shapes break a constraint.
    """
    message = message or ""
    items = list(shapes.items()) if isinstance(shapes, dict) else list(shapes)
    with name_scope(name, "assert_shapes", [t for t, _ in items] + list(data or [])):
        checks: list[Any] = []
        symbols: dict[Any, tuple[Tensor, int, Any]] = {}
        for tensor, spec in items:
            x = convert_to_tensor(tensor)
            outer, entries = _shape_spec(spec)
            if not entries and not outer:
                entries = [1]
            d = x.shape.as_tuple()
            if d is not None and not d:
                d = (1,)
            dyn = apply_op("Shape", input=x, out_type=_I32)
            if x.shape.ndims == 0:
                dyn = convert_to_tensor(np.array([1], np.int32))
            rank = len(entries)
            if d is not None:
                if (len(d) < rank) if outer else (len(d) != rank):
                    cmp = "at least" if outer else "exactly"
                    raise ValueError(f"{message}.  Tensor {x.name} must have rank {cmp} "
                                     f"{rank}.  Received rank {len(d)}, shape {x.shape}")
            elif not outer:
                checks.append(assert_rank(x, rank, message=message))
            for i, e in enumerate(entries):
                pos = i - rank
                static = None if d is None else d[pos]
                size = dyn[pos]
                if e is None:
                    continue
                if isinstance(e, tuple):
                    if e not in symbols:
                        symbols[e] = (x, pos, static if static is not None else size)
                        continue
                    src, spos, want = symbols[e]
                    where = f"Specified by tensor {src.name} dimension {spos}"
                else:
                    want, where = e, "Specified explicitly"
                w_static = want if isinstance(want, int) else None
                if static is not None and w_static is not None:
                    if static != w_static:
                        raise ValueError(f"{message}.  {where}.  Tensor {x.name} dimension "
                                         f"{pos} must have size {w_static}.  Received size "
                                         f"{static}, shape {x.shape}")
                    continue
                msg = [message, f"{where}.  Tensor {x.name} dimension {pos} must have size",
                       want, "Received shape: ", dyn] if data is None else data
                checks.append(Assert(apply_op("Equal", x=size, y=convert_to_tensor(
                    want, dtype=_I32)), msg, summarize=summarize))
        if not checks:
            return _no_op(name="static_checks_determined_all_ok")
        if len(checks) == 1:
            return checks[0]
        return group(*checks)


# tf.debugging's aliases of the math predicates
for _n in ("is_finite", "is_inf", "is_nan"):
    if f"debugging.{_n}" not in ks.api_names and _n in ks.api_names:
        ks.api(f"debugging.{_n}")(ks.api_names[_n])
