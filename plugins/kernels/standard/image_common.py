"""Helpers shared by the ``image_*`` modules of the standard kernel set: shape-function
errors in TF's wording, host/device moves for kernels that work on the host, and the
``flowrt`` module for composites."""
from __future__ import annotations

from typing import Any

import numpy as np

from flowrt import errors
from flowrt.graph import Tensor
from flowrt.tensor_shape import TensorShape

from ._common import constant_value, ks

__all__ = ["tf_mod", "invalid", "shape_error", "with_rank", "merge_dim", "host", "to_device",
           "const_int_vector", "alias", "is_tensor"]


def tf_mod() -> Any:
    """The ``flowrt`` package (imported lazily: the plugin loads while it is built)."""
    import flowrt
    return flowrt


def invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _fmt(s: TensorShape) -> str:
    d = s.as_tuple()
    if d is None:
        return "?"
    return "[" + ",".join("?" if x is None else str(x) for x in d) + "]"


def shape_error(op: Any, msg: str) -> ValueError:
    """A ValueError in TF's shape-function wording, naming the node and its input shapes."""
    shapes = ", ".join(_fmt(t.shape) for t in op.inputs)
    return ValueError(f"{msg} for '{op.name}' (op: '{op.type}') with input shapes: {shapes}.")


def with_rank(op: Any, i: int, rank: int) -> tuple[int | None, ...]:
    """Input ``i``'s static dims, checked to have ``rank`` (unknown dims for unknown rank)."""
    d = op.inputs[i].shape.as_tuple()
    if d is None:
        return (None,) * rank
    if len(d) != rank:
        raise shape_error(op, f"Shape must be rank {rank} but is rank {len(d)}")
    return d


def merge_dim(op: Any, a: int | None, b: int | None) -> int | None:
    if a is not None and b is not None and a != b:
        raise shape_error(op, f"Dimensions must be equal, but are {a} and {b}")
    return a if a is not None else b


def const_int_vector(op: Any, i: int, n: int) -> list[int | None]:
    """The ``n`` known elements of 1-D int input ``i`` (None where unknown)."""
    d = with_rank(op, i, 1)
    if d[0] is not None and d[0] != n:
        raise shape_error(op, f"Dimension 0 in both shapes must be equal, but are {d[0]} "
                              f"and {n}")
    v = constant_value(op.inputs[i])
    if v is not None:
        return [int(x) for x in np.asarray(v).reshape(-1)]
    t = op.inputs[i]
    if t.op.type == "Pack":
        out: list[int | None] = []
        for e in t.op.inputs:
            ev = constant_value(e)
            out.append(None if ev is None else int(ev))
        if len(out) == n:
            return out
    return [None] * n


def host(ctx: Any, a: Any) -> np.ndarray:
    """A kernel input as a host numpy array."""
    if isinstance(a, (np.ndarray, np.generic)):
        return np.asarray(a)
    return np.asarray(ctx.device.to_host(a))


def to_device(ctx: Any, arr: Any) -> Any:
    """A host result moved to the kernel's device (0-d arrays kept 0-d)."""
    arr = np.asarray(arr)
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")
    return ctx.device.from_host(arr)


def alias(fn: Any, *names: str) -> None:
    """Export ``fn`` under the names no other module of the kernel set has taken yet."""
    for n in names:
        if n not in ks.api_names:
            ks.api(n)(fn)


def is_tensor(x: Any) -> bool:
    """A graph tensor or variable (TF's ``image_ops_impl._is_tensor``)."""
    return isinstance(x, Tensor) or type(x).__name__ in ("Variable", "RefVariable",
                                                          "ResourceVariable")
