"""Shared pieces of the standard kernel set: the set itself and shape helpers."""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from flowrt import errors

from flowrt import dtypes
from flowrt.device import host_array
from flowrt.graph import Tensor
from flowrt.op_registry import KernelSet
from flowrt.tensor_shape import TensorShape, unknown_shape

ks = KernelSet("standard")

__all__ = ["ks", "publish", "unchanged_shape", "broadcast_static", "broadcast_shape", "scalar_shape",
           "unknown_shapes", "constant_value", "shape_of", "dims"]


def dims(t: Tensor) -> tuple[int | None, ...] | None:
    """A tensor's static dims as a tuple (None for unknown rank)."""
    return t.shape.as_tuple()


def unchanged_shape(op: Any) -> list[TensorShape]:
    """Output 0 has the shape of input 0."""
    return [op.inputs[0].shape]


def scalar_shape(op: Any) -> list[TensorShape]:
    return [TensorShape([])] * len(op.outputs)


def unknown_shapes(op: Any) -> list[TensorShape]:
    return [unknown_shape()] * len(op.outputs)


def broadcast_static(a: TensorShape, b: TensorShape, op: Any = None) -> TensorShape:
    """Numpy/TF broadcasting of two static shapes; ValueError naming the op if they
    cannot broadcast."""
    da, db = a.as_tuple(), b.as_tuple()
    if da is None or db is None:
        return unknown_shape()
    out: list[int | None] = []
    n = max(len(da), len(db))
    pa = (1,) * (n - len(da)) + da
    pb = (1,) * (n - len(db)) + db
    for x, y in zip(pa, pb):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x is None:
            out.append(y if y is not None else None)
        elif y is None:
            out.append(x)
        elif x == y:
            out.append(x)
        else:
            where = f" for '{op.name}' (op: '{op.type}')" if op is not None else ""
            raise ValueError(f"Dimensions must be equal, but are {x} and {y}{where} with "
                             f"input shapes: {_fmt(da)}, {_fmt(db)}.")
    return TensorShape(out)


def _fmt(d: tuple[int | None, ...]) -> str:
    return "[" + ",".join("?" if x is None else str(x) for x in d) + "]"


def broadcast_shape(op: Any) -> list[TensorShape]:
    """Output 0 is the broadcast of inputs 0 and 1."""
    return [broadcast_static(op.inputs[0].shape, op.inputs[1].shape, op)]


def shape_of(t: Tensor) -> TensorShape:
    return t.shape


def constant_value(t: Any) -> np.ndarray | None:
    """The value of ``t`` if it is known at graph-build time (TF's
    ``tensor_util.constant_value``): Const, Shape/Size/Rank of static shapes, Pack and
    ConcatV2 of constants, Cast, Identity. None otherwise."""
    if not isinstance(t, Tensor):
        try:
            return np.asarray(t)
        except Exception:
            return None
    op = t.op
    typ = op.type
    if typ == "Const":
        return op.node_attrs["value"]
    if typ == "Shape":
        d = op.inputs[0].shape.as_tuple()
        if d is not None and all(x is not None for x in d):
            return np.array(d, dtype=op.node_attrs["out_type"].np)
        return None
    if typ == "Size":
        n = op.inputs[0].shape.num_elements()
        return None if n is None else np.array(n, dtype=op.node_attrs["out_type"].np)
    if typ == "Rank":
        r = op.inputs[0].shape.ndims
        return None if r is None else np.array(r, dtype=np.int32)
    if typ in ("Identity", "StopGradient"):
        return constant_value(op.inputs[0])
    if typ == "Cast":
        v = constant_value(op.inputs[0])
        return None if v is None else v.astype(op.node_attrs["DstT"].np)
    if typ == "Pack":
        vals = [constant_value(x) for x in op.inputs]
        if any(v is None for v in vals):
            return None
        return np.stack(vals, axis=op.node_attrs.get("axis", 0))
    if typ == "ConcatV2":
        vals = [constant_value(x) for x in op.inputs]
        if any(v is None for v in vals):
            return None
        return np.concatenate(vals[:-1], axis=int(vals[-1]))
    return None


def as_dtype_np(d: Any) -> Any:
    return dtypes.as_dtype(d).np


def invalid(msg: str) -> errors.InvalidArgumentError:
    """An ``InvalidArgumentError`` with ``msg`` (a kernel's bad-input error)."""
    return errors.InvalidArgumentError(None, None, msg)


def host_reader(ctx: Any) -> Callable[[Any], np.ndarray]:
    """How the kernel compiled for ``ctx`` reads an input in host memory (a shape, an
    axis, indices), chosen once in its factory: ``np.asarray`` on a ``CPU``, whose inputs
    are host values already; elsewhere :func:`flowrt.device.host_array` with the
    kernel's device, which passes host arrays as they are and copies the device's own
    through its ``to_host`` (docs/plugins.md, "The device-array contract")."""
    dev = ctx.device
    if dev.device_type == "CPU":
        return np.asarray
    return functools.partial(host_array, device=dev)


def host_ints(a: Any, to_host: Callable[[Any], np.ndarray]) -> list[int]:
    """The elements of an integer input as Python ints, brought to host memory by
    ``to_host`` (the kernel's :func:`host_reader`)."""
    return [int(v) for v in to_host(a).reshape(-1).tolist()]


def fmt_dims(shape: Any) -> str:
    """``[2,3]``: a concrete shape as TF's kernel messages print it."""
    return "[" + ",".join(str(int(v)) for v in shape) + "]"


def publish(*modules: Any) -> None:
    """Add each core module's ``API`` table (``{"data.Dataset": Dataset, ...}``) to the
    standard kernel set, whose runtime resolves ``flowrt.data.Dataset`` and the rest
    through it."""
    for mod in modules:
        for api_name, value in mod.API.items():
            ks.export(api_name, value)


#: a kernel's work at least this large (elements) is split over the leading axis and run
#: side by side on the CPU's intra-op threads by the kernels that use :func:`row_parts`
#: (an elementwise pass over the MNIST CNN's first activations, 1.6M values, took 2.2-2.8
#: ms on one thread; its second layer's ReluGrad, 0.8M values, 3.1-3.4 ms on one thread
#: against 2.1-2.7 ms on two)
PARALLEL_ELEMENTS = 1 << 18


def row_parts(ctx: Any, n_rows: int, size: int,
              fn: Callable[[int, int], Any]) -> list[Any] | None:
    """``fn(lo, hi)`` over ranges of a leading axis of ``n_rows``, side by side on the
    device's intra-op threads (``parallel_map``: the CPU), when the work (``size``
    elements) is at least :data:`PARALLEL_ELEMENTS`; the parts' results in order. None
    when the kernel should compute whole instead (a small input, one thread, a device
    without ``parallel_map``, not numpy)."""
    if size < PARALLEL_ELEMENTS or n_rows < 2 or ctx.xp is not np:
        return None
    pmap = getattr(ctx.device, "parallel_map", None)
    if pmap is None:
        return None
    threads = int(ctx.device.parallelism())
    if threads < 2:
        return None
    step = -(-n_rows // min(n_rows, 2 * threads))
    return pmap(lambda i: fn(i * step, min(n_rows, (i + 1) * step)), -(-n_rows // step))


#: a float sum over the leading axes of at least this many values is one matrix-vector
#: product (:func:`column_sums`): the bias gradients (``BiasAddGrad``, the ``Sum`` of an
#: ``x + b``'s gradient)
GEMV_SUM_MIN = 1 << 14


def column_sums(ctx: Any, m: Any, cache: dict) -> Any:
    """The column sums of the C-contiguous float matrix ``m`` ``[rows, cols]`` as one
    product with a vector of ones (BLAS's gemv): 0.3 against numpy's 2.8 ms for the MNIST
    CNN's first bias gradient (64x28x28 rows of 32), on one thread. It runs with BLAS
    kept to the calling thread (the device's ``single_threaded_blas``: BLAS's own threads
    spin for a while after each call, taking a core from the kernels that follow).
    ``cache`` holds the ones vector of the last row count."""
    rows = m.shape[0]
    one = cache.get(rows)
    if one is None or one.dtype != m.dtype:
        cache.clear()
        one = cache[rows] = np.ones(rows, m.dtype)
    wrap = getattr(ctx.device, "single_threaded_blas", None)
    return np.matmul(one, m) if wrap is None else wrap(np.matmul)(one, m)


def sum_parts(parts: list[Any]) -> Any:
    """The sum of the partial results ``parts`` (a batch-split reduction's), added into
    the first one."""
    total = parts[0]
    for part in parts[1:]:
        total += part
    return total
