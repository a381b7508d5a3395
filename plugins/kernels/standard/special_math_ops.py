"""tf.math extras: segment reductions, special functions, bincount, histograms,
cumulative_logsumexp and small composites (polyval, lbeta, zero_fraction ...).

Segment reductions keep TF's kernel semantics: sorted ``segment_ids`` are checked
(InvalidArgumentError "segment ids are not increasing"), empty segments of the sorted ops
give 0 (1 for products), empty segments of ``unsorted_segment_max``/``min`` give the
lowest/highest value of the dtype, and negative ids of the unsorted ops drop their rows.
Special functions are computed without scipy: series and continued fractions for the
incomplete gamma and beta functions, power series and asymptotic expansions for the
modified Bessel functions, a rational approximation refined by Halley steps for ``ndtri``
and ``erfinv``.
"""
from __future__ import annotations

import math
import types
from typing import Any, Callable, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt.device import host_array
from flowrt.graph import Tensor, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import broadcast_shape, ks, unchanged_shape
from ._common import invalid as _invalid
from .array_grad import _unsorted_segment_shape
from .math_grad import reduce_broadcast_grads


def _tf() -> Any:
    import flowrt
    return flowrt


def _fmt(d: Any) -> str:
    return "[" + ",".join("?" if x is None else str(x) for x in d) + "]"


def _where(op: Any) -> str:
    shapes = ", ".join("?" if t.shape.ndims is None else _fmt(t.shape.as_tuple())
                       for t in op.inputs)
    return f" for '{op.name}' (op: '{op.type}') with input shapes: {shapes}."


def _host(xp: Any, a: Any) -> np.ndarray:
    """``a`` in host memory: as it is on the CPU, else through the ``to_host`` of the
    device type holding it (the device-array contract)."""
    return np.asarray(a) if xp is np else host_array(a)


_REAL = "float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64"
_NUMBER = f"{_REAL}, complex64, complex128"


def _extreme(dt: Any, lowest: bool) -> Any:
    d = np.dtype(dt)  # TF's numeric_limits<T>::lowest() / max(), also for floats
    info = np.finfo(d) if d.kind == "f" else np.iinfo(d)
    return info.min if lowest else info.max


def _reduce_rows(xp: Any, kind: str, data: Any, ids: Any, n: int, sorted_: bool) -> Any:
    """``out[i] = reduce(data[j] for ids[j] == i)`` over ``n`` segments (ids >= 0)."""
    dt = data.dtype
    inner = data.shape[1:]
    if kind in ("sum", "mean", "sqrt_n"):
        out = xp.zeros((n,) + inner, dtype=dt)
        xp.add.at(out, ids, data)
        if kind != "sum":
            counts = xp.bincount(ids, minlength=n).reshape((n,) + (1,) * len(inner))
            div = counts if kind == "mean" else xp.sqrt(counts.astype(np.float64))
            if np.dtype(dt).kind in "iu":
                safe = xp.where(counts > 0, div, 1)
                q = out / safe
                out = xp.trunc(q).astype(dt)
            else:
                out = (out / xp.where(counts > 0, div, 1).astype(dt)).astype(dt)
        return out
    if kind == "prod":
        out = xp.ones((n,) + inner, dtype=dt)
        xp.multiply.at(out, ids, data)
        return out
    lowest = kind == "max"
    out = xp.full((n,) + inner, _extreme(dt, lowest), dtype=dt)
    (xp.maximum if lowest else xp.minimum).at(out, ids, data)
    if sorted_:  # TF's sorted max/min give 0 for an empty segment
        counts = xp.bincount(ids, minlength=n).reshape((n,) + (1,) * len(inner))
        out = xp.where(counts > 0, out, xp.zeros((), dtype=dt))
    return out


# =======================================================================================
# Segment{Sum,Mean,Prod,Max,Min}: sorted segment ids
# =======================================================================================
def _segment_shape(op: Any) -> list[TensorShape]:
    d = op.inputs[0].shape.as_tuple()
    i = op.inputs[1].shape.as_tuple()
    if i is not None and len(i) != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {len(i)}{_where(op)}")
    if d is None:
        return [unknown_shape()]
    if len(d) < 1:
        raise ValueError(f"Shape must be at least rank 1 but is rank 0{_where(op)}")
    # like TF, the sizes of data and segment_ids are checked by the kernel, not here
    return [TensorShape((None,) + d[1:])]


_SEGMENT_KINDS = {"SegmentSum": "sum", "SegmentMean": "mean", "SegmentProd": "prod",
                  "SegmentMax": "max", "SegmentMin": "min"}
for _op, _kind in _SEGMENT_KINDS.items():
    ks.op(OpDef(_op, inputs=["data: T", "segment_ids: Tindices"], outputs=["output: T"],
                attrs=["T: {" + (_REAL if _kind in ("max", "min") else _NUMBER) + "}",
                       "Tindices: {int32, int64}"],
                shape_fn=_segment_shape,
                doc=f"Segment {_kind} over rows with sorted segment ids."))


def _check_sorted(ids: np.ndarray, what: str = "segment ids") -> int:
    """Checks sorted, non-negative ids; returns the number of segments (last id + 1)."""
    if ids.size == 0:
        return 0
    if int(ids[0]) < 0:
        raise _invalid(f"{what} must be >= 0")
    if ids.size > 1 and bool((ids[1:] < ids[:-1]).any()):
        raise _invalid(f"{what} are not increasing")
    return int(ids[-1]) + 1


@ks.kernel(*_SEGMENT_KINDS, expensive=True)
def _segment_kernel(ctx: Any) -> Callable:
    xp, kind = ctx.xp, _SEGMENT_KINDS[ctx.op_type]

    def segment_reduce(data: Any, ids: Any) -> Any:
        if np.ndim(ids) != 1:
            raise _invalid("segment_ids should be a vector.")
        if np.ndim(data) < 1 or data.shape[0] != ids.shape[0]:
            raise _invalid("segment_ids should be the same size as dimension 0 of input.")
        n = _check_sorted(_host(xp, ids))
        return _reduce_rows(xp, kind, data, xp.asarray(ids).astype(np.int64), n, True)

    return segment_reduce


def _segment_api(op_type: str, names: Sequence[str], doc: str) -> Callable[..., Tensor]:
    def fn(data: Any, segment_ids: Any, name: str | None = None) -> Tensor:
        return apply_op(op_type, name=name, data=data, segment_ids=segment_ids)

    fn.__name__ = fn.__qualname__ = names[0].split(".")[-1]
    fn.__doc__ = doc
    ks.api(*names)(fn)
    return fn


segment_sum = _segment_api("SegmentSum", ("math.segment_sum", "segment_sum"),
                           "Sums of the rows of ``data`` per (sorted) segment id.")
segment_mean = _segment_api("SegmentMean", ("math.segment_mean", "segment_mean"),
                            "Means of the rows of ``data`` per (sorted) segment id.")
segment_prod = _segment_api("SegmentProd", ("math.segment_prod", "segment_prod"),
                            "Products of the rows of ``data`` per (sorted) segment id.")
segment_max = _segment_api("SegmentMax", ("math.segment_max", "segment_max"),
                           "Maxima of the rows of ``data`` per (sorted) segment id (0 for "
                           "an empty segment).")
segment_min = _segment_api("SegmentMin", ("math.segment_min", "segment_min"),
                           "Minima of the rows of ``data`` per (sorted) segment id (0 for "
                           "an empty segment).")


@ks.gradient("SegmentSum")
def _segment_sum_grad(op: Any, grad: Tensor) -> list[Any]:
    return [_tf().gather(grad, op.inputs[1]), None]


@ks.gradient("SegmentMean")
def _segment_mean_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    rank = tf.rank(op.inputs[0])
    ones_shape = tf.concat([tf.shape(op.inputs[1]), tf.fill(tf.expand_dims(rank - 1, 0), 1)],
                           0)
    ones = tf.fill(ones_shape, tf.constant(1, dtype=grad.dtype))
    scaled = grad / segment_sum(ones, op.inputs[1])
    return [tf.gather(scaled, op.inputs[1]), None]


@ks.gradient("SegmentMax", "SegmentMin")
def _segment_min_max_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    data, ids = op.inputs
    gathered = tf.gather(op.outputs[0], ids)
    is_selected = tf.equal(data, gathered)
    num_selected = segment_sum(tf.cast(is_selected, grad.dtype), ids)
    weighted = grad / num_selected
    return [tf.where(is_selected, tf.gather(weighted, ids), tf.zeros_like(data)), None]


def _prod_grad(data: Tensor, ids: Tensor, out: Tensor, grad: Tensor,
               n: Any, unsorted: bool) -> Tensor:
    """TF's product gradient: the product of the other elements, with zeros handled
    (a segment with two zeros has a zero gradient)."""
    tf = _tf()
    is_zero = tf.equal(data, tf.zeros((), dtype=data.dtype))
    if unsorted:
        num_zeros = apply_op("UnsortedSegmentSum", data=tf.cast(is_zero, _dt.int32),
                             segment_ids=ids, num_segments=n)
    else:
        num_zeros = segment_sum(tf.cast(is_zero, _dt.int32), ids)
    grad = tf.where_v2(num_zeros > 1, tf.zeros_like(grad), grad)
    non_zero_data = tf.where_v2(is_zero, tf.ones_like(data), data)
    if unsorted:
        non_zero_prod = apply_op("UnsortedSegmentProd", data=non_zero_data, segment_ids=ids,
                                 num_segments=n)
    else:
        non_zero_prod = segment_prod(non_zero_data, ids)
    clipped = tf.maximum(ids, tf.zeros_like(ids))
    gathered_prod = tf.gather(out, clipped)
    gathered_nz = tf.gather(non_zero_prod, clipped)
    partial = tf.where_v2(is_zero, gathered_nz, gathered_prod / non_zero_data)
    gathered_grad = _gather_drop_negatives(grad, ids)[0]
    return gathered_grad * partial


@ks.gradient("SegmentProd")
def _segment_prod_grad(op: Any, grad: Tensor) -> list[Any]:
    data, ids = op.inputs
    return [_prod_grad(data, ids, op.outputs[0], grad, None, False), None]


# =======================================================================================
# UnsortedSegment{Max,Min,Prod} (+ Python mean / sqrt_n)
# =======================================================================================
_UNSORTED_KINDS = {"UnsortedSegmentMax": "max", "UnsortedSegmentMin": "min",
                   "UnsortedSegmentProd": "prod"}
for _op, _kind in _UNSORTED_KINDS.items():
    ks.op(OpDef(_op, inputs=["data: T", "segment_ids: Tindices",
                             "num_segments: Tnumsegments"], outputs=["output: T"],
                attrs=["T: {" + (_REAL if _kind != "prod" else _NUMBER) + "}",
                       "Tindices: {int32, int64}", "Tnumsegments: {int32, int64} = DT_INT32"],
                shape_fn=_unsorted_segment_shape,
                doc=f"Segment {_kind} with unsorted ids (negative ids dropped)."))


def _unsorted_ids(xp: Any, data: Any, ids: Any, num: Any) -> tuple[Any, Any, int]:
    """Flattened ids and matching rows of data, checked; negative ids dropped."""
    ish, ds = np.shape(ids), np.shape(data)
    if ds[:len(ish)] != ish:
        raise _invalid(f"data.shape = {_fmt(ds)} does not start with segment_ids.shape = "
                       f"{_fmt(ish)}")
    if np.ndim(num) != 0:
        raise _invalid(f"num_segments should be a scalar, not shape {_fmt(np.shape(num))}")
    n = int(num)
    if n < 0:
        raise _invalid(f"num_segments must be non-negative, got {n}")
    flat = _host(xp, ids).reshape(-1).astype(np.int64)
    bad = np.flatnonzero(flat >= n)
    if bad.size:
        i = int(bad[0])
        raise _invalid(f"segment_ids[{i}] = {int(flat[i])} is out of range [0, {n})")
    rows = xp.asarray(data).reshape((flat.size,) + ds[len(ish):])
    keep = flat >= 0
    if not keep.all():
        rows = rows[xp.asarray(keep)]
        flat = flat[keep]
    return rows, xp.asarray(flat), n


@ks.kernel(*_UNSORTED_KINDS, host_memory=("num_segments",), expensive=True)
def _unsorted_segment_kernel(ctx: Any) -> Callable:
    xp, kind = ctx.xp, _UNSORTED_KINDS[ctx.op_type]

    def unsorted_segment_reduce(data: Any, ids: Any, num: Any) -> Any:
        rows, flat, n = _unsorted_ids(xp, data, ids, num)
        return _reduce_rows(xp, kind, rows, flat, n, False)

    return unsorted_segment_reduce


def _unsorted_api(op_type: str, names: Sequence[str], doc: str) -> Callable[..., Tensor]:
    def fn(data: Any, segment_ids: Any, num_segments: Any, name: str | None = None) -> Tensor:
        return apply_op(op_type, name=name, data=data, segment_ids=segment_ids,
                        num_segments=num_segments)

    fn.__name__ = fn.__qualname__ = names[0].split(".")[-1]
    fn.__doc__ = doc
    ks.api(*names)(fn)
    return fn


unsorted_segment_max = _unsorted_api(
    "UnsortedSegmentMax", ("math.unsorted_segment_max", "unsorted_segment_max"),
    "Maxima per segment id (unsorted; the dtype's lowest value for an empty segment).")
unsorted_segment_min = _unsorted_api(
    "UnsortedSegmentMin", ("math.unsorted_segment_min", "unsorted_segment_min"),
    "Minima per segment id (unsorted; the dtype's highest value for an empty segment).")
unsorted_segment_prod = _unsorted_api(
    "UnsortedSegmentProd", ("math.unsorted_segment_prod", "unsorted_segment_prod"),
    "Products per segment id (unsorted; 1 for an empty segment).")


def _unsorted_segment_n(data: Tensor, segment_ids: Tensor, num_segments: Any) -> Tensor:
    """The number of rows per segment (at least 1), shaped to broadcast against the
    segment sums."""
    tf = _tf()
    num_segments = convert_to_tensor(num_segments)
    ones = tf.ones(tf.shape(segment_ids), dtype=data.dtype)
    n = apply_op("UnsortedSegmentSum", data=ones, segment_ids=segment_ids,
                 num_segments=num_segments)
    dr, ir = data.shape.ndims, segment_ids.shape.ndims
    if dr is not None and ir is not None:
        extra = tf.ones([dr - ir], dtype=num_segments.dtype)
    else:
        extra = tf.ones(tf.expand_dims(tf.rank(data) - tf.rank(segment_ids), 0),
                        dtype=num_segments.dtype)
    n = tf.reshape(n, tf.concat([tf.reshape(num_segments, [1]), extra], 0))
    return tf.maximum(n, tf.ones((), dtype=n.dtype))


@ks.api("math.unsorted_segment_mean", "unsorted_segment_mean")
def unsorted_segment_mean(data: Any, segment_ids: Any, num_segments: Any,
                          name: str | None = None) -> Tensor:
    """Means per segment id (unsorted ids; 0 for an empty segment)."""
    with name_scope(name, "UnsortedSegmentMean"):
        data = convert_to_tensor(data)
        segment_ids = convert_to_tensor(segment_ids)
        n = _unsorted_segment_n(data, segment_ids, num_segments)
        summed = apply_op("UnsortedSegmentSum", data=data, segment_ids=segment_ids,
                          num_segments=num_segments)
        return summed / n


@ks.api("math.unsorted_segment_sqrt_n", "unsorted_segment_sqrt_n")
def unsorted_segment_sqrt_n(data: Any, segment_ids: Any, num_segments: Any,
                            name: str | None = None) -> Tensor:
    """Sums per segment id divided by the square root of the segment's size."""
    tf = _tf()
    with name_scope(name, "UnsortedSegmentSqrtN"):
        data = convert_to_tensor(data)
        segment_ids = convert_to_tensor(segment_ids)
        n = _unsorted_segment_n(data, segment_ids, num_segments)
        summed = apply_op("UnsortedSegmentSum", data=data, segment_ids=segment_ids,
                          num_segments=num_segments)
        return summed / tf.sqrt(n)


def _gather_drop_negatives(params: Tensor, ids: Tensor) -> tuple[Tensor, Tensor]:
    """``params[ids]`` with zeros where ``ids < 0``; also the (broadcast) mask."""
    tf = _tf()
    clipped = tf.maximum(ids, tf.zeros_like(ids))
    gathered = tf.gather(params, clipped)
    is_positive = tf.greater_equal(ids, tf.zeros_like(ids))
    gr, ir = gathered.shape.ndims, ids.shape.ndims
    if gr is not None and ir is not None:
        if gr > ir:
            is_positive = tf.reshape(is_positive, tf.concat(
                [tf.shape(is_positive), tf.ones([gr - ir], dtype=_dt.int32)], 0))
    else:
        ones = tf.ones(tf.expand_dims(tf.rank(gathered) - tf.rank(ids), 0), dtype=_dt.int32)
        is_positive = tf.reshape(is_positive, tf.concat([tf.shape(is_positive), ones], 0))
    is_positive = tf.logical_and(is_positive, tf.ones_like(gathered, dtype=_dt.bool))
    return tf.where(is_positive, gathered, tf.zeros_like(gathered)), is_positive


@ks.gradient("UnsortedSegmentMax", "UnsortedSegmentMin")
def _unsorted_segment_min_max_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    data, ids, n = op.inputs
    gathered, is_positive = _gather_drop_negatives(op.outputs[0], ids)
    is_selected = tf.logical_and(tf.equal(data, gathered), is_positive)
    num_selected = apply_op("UnsortedSegmentSum", data=tf.cast(is_selected, grad.dtype),
                            segment_ids=ids, num_segments=n)
    weighted = grad / num_selected
    gathered_grads, _ = _gather_drop_negatives(weighted, ids)
    return [tf.where(is_selected, gathered_grads, tf.zeros_like(gathered_grads)), None, None]


@ks.gradient("UnsortedSegmentProd")
def _unsorted_segment_prod_grad(op: Any, grad: Tensor) -> list[Any]:
    data, ids, n = op.inputs
    return [_prod_grad(data, ids, op.outputs[0], grad, n, True), None, None]


# =======================================================================================
# SparseSegment{Sum,Mean,SqrtN}[WithNumSegments] and their gradient ops
# =======================================================================================
def _sparse_segment_shape(op: Any) -> list[TensorShape]:
    d = op.inputs[0].shape.as_tuple()
    for t in op.inputs[1:3]:
        r = t.shape.ndims
        if r is not None and r != 1:
            raise ValueError(f"Shape must be rank 1 but is rank {r}{_where(op)}")
    if d is None:
        return [unknown_shape()]
    if len(d) < 1:
        raise ValueError(f"Shape must be at least rank 1 but is rank 0{_where(op)}")
    n = None
    if len(op.inputs) == 4:
        from ._common import constant_value
        v = constant_value(op.inputs[3])
        n = None if v is None else int(np.asarray(v).reshape(-1)[0])
    return [TensorShape((n,) + d[1:])]


_SPARSE_KINDS = {"SparseSegmentSum": "sum", "SparseSegmentMean": "mean",
                 "SparseSegmentSqrtN": "sqrt_n"}
_SPARSE_T = {"sum": _REAL, "mean": "bfloat16, half, float, double",
             "sqrt_n": "bfloat16, half, float, double"}
for _op, _kind in _SPARSE_KINDS.items():
    _attrs = ["T: {" + _SPARSE_T[_kind] + "}", "Tidx: {int32, int64} = DT_INT32",
              "Tsegmentids: {int32, int64} = DT_INT32"]
    ks.op(OpDef(_op, inputs=["data: T", "indices: Tidx", "segment_ids: Tsegmentids"],
                outputs=["output: T"], attrs=_attrs, shape_fn=_sparse_segment_shape,
                doc=f"Segment {_kind} of the rows of data picked by indices."),
          OpDef(_op + "WithNumSegments",
                inputs=["data: T", "indices: Tidx", "segment_ids: Tsegmentids",
                        "num_segments: Tnumsegments"], outputs=["output: T"],
                attrs=_attrs + ["Tnumsegments: {int32, int64} = DT_INT32"],
                shape_fn=_sparse_segment_shape,
                doc=f"Segment {_kind} of picked rows, with a given number of segments."))


def _sparse_segment_factory(kind: str, with_num: bool) -> Callable:
    def factory(ctx: Any) -> Callable:
        xp = ctx.xp

        def sparse_segment_reduce(data: Any, indices: Any, ids: Any, *num: Any) -> Any:
            if np.ndim(indices) != 1:
                raise _invalid("indices should be a vector.")
            if np.ndim(ids) != 1:
                raise _invalid("segment_ids should be a vector.")
            if indices.shape[0] != ids.shape[0]:
                raise _invalid("segment_ids and indices should have same size.")
            hids = _host(xp, ids).astype(np.int64)
            n = _check_sorted(hids)
            if with_num:
                given = int(num[0])
                if n > given:
                    raise _invalid(f"segment ids must be < num_segments: {n - 1} vs. {given}")
                n = given
            hidx = _host(xp, indices).astype(np.int64)
            bad = np.flatnonzero((hidx < 0) | (hidx >= data.shape[0]))
            if bad.size:
                i = int(bad[0])
                raise _invalid(f"Bad: indices[{i}] == {int(hidx[i])} out of range "
                               f"[0, {data.shape[0]})")
            rows = data[xp.asarray(hidx)]
            return _reduce_rows(xp, kind, rows, xp.asarray(hids), n, True)

        return sparse_segment_reduce

    return factory


for _op, _kind in _SPARSE_KINDS.items():
    ks.kernel(_op, expensive=True)(_sparse_segment_factory(_kind, False))
    ks.kernel(_op + "WithNumSegments", host_memory=("num_segments",),
              expensive=True)(_sparse_segment_factory(_kind, True))

def _sparse_grad_shape(op: Any) -> list[TensorShape]:
    from ._common import constant_value
    d = op.inputs[0].shape.as_tuple()
    if d is None:
        return [unknown_shape()]
    v = constant_value(op.inputs[3])
    n = None if v is None else int(np.asarray(v).reshape(-1)[0])
    return [TensorShape((n,) + d[1:])]


for _op in ("SparseSegmentMeanGrad", "SparseSegmentSqrtNGrad"):
    ks.op(OpDef(_op, inputs=["grad: T", "indices: Tidx", "segment_ids: Tsegmentids",
                             "output_dim0: int32"], outputs=["output: T"],
                attrs=["T: {bfloat16, half, float, double}", "Tidx: {int32, int64} = DT_INT32",
                       "Tsegmentids: {int32, int64} = DT_INT32"],
                shape_fn=_sparse_grad_shape,
                doc="The gradient of the sparse segment mean / sqrt_n."))


@ks.kernel("SparseSegmentMeanGrad", "SparseSegmentSqrtNGrad", host_memory=("output_dim0",))
def _sparse_segment_grad_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    sqrt = ctx.op_type == "SparseSegmentSqrtNGrad"

    def sparse_segment_grad(grad: Any, indices: Any, ids: Any, dim0: Any) -> Any:
        hids = _host(xp, ids).astype(np.int64)
        hidx = _host(xp, indices).astype(np.int64)
        n0 = int(dim0)
        if hids.size and (hids.min() < 0 or hids.max() >= grad.shape[0]):
            raise _invalid("Segment id out of range.")
        if hidx.size and (hidx.min() < 0 or hidx.max() >= n0):
            raise _invalid("Index out of range.")
        counts = np.bincount(hids, minlength=grad.shape[0]).astype(np.float64)
        scale = np.sqrt(counts) if sqrt else counts
        scale = np.where(scale > 0, 1.0 / np.maximum(scale, 1e-300), 0.0)
        rows = grad[xp.asarray(hids)] * xp.asarray(scale[hids].astype(grad.dtype)).reshape(
            (-1,) + (1,) * (grad.ndim - 1))
        out = xp.zeros((n0,) + grad.shape[1:], dtype=grad.dtype)
        xp.add.at(out, xp.asarray(hidx), rows)
        return out

    return sparse_segment_grad


ks.not_differentiable("SparseSegmentMeanGrad", "SparseSegmentSqrtNGrad")


def _dim0(data: Tensor) -> Any:
    d = data.shape.as_tuple()
    if d is not None and d and d[0] is not None:
        return np.int32(d[0])  # a constant keeps the gradient's static shape
    return _tf().shape(data, out_type=_dt.int32)[0]


@ks.gradient("SparseSegmentSum", "SparseSegmentSumWithNumSegments")
def _sparse_segment_sum_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    data, indices, ids = op.inputs[:3]
    out = apply_op("UnsortedSegmentSum", data=tf.gather(grad, ids), segment_ids=indices,
                   num_segments=_dim0(data))
    return [out, None, None] + [None] * (len(op.inputs) - 3)


@ks.gradient("SparseSegmentMean", "SparseSegmentMeanWithNumSegments",
             "SparseSegmentSqrtN", "SparseSegmentSqrtNWithNumSegments")
def _sparse_segment_mean_grad(op: Any, grad: Tensor) -> list[Any]:
    data, indices, ids = op.inputs[:3]
    kind = "SparseSegmentSqrtNGrad" if "SqrtN" in op.type else "SparseSegmentMeanGrad"
    out = apply_op(kind, grad=grad, indices=indices, segment_ids=ids,
                   output_dim0=_dim0(data))
    return [out, None, None] + [None] * (len(op.inputs) - 3)


def _sparse_api(op_type: str, names: Sequence[str], doc: str) -> Callable[..., Tensor]:
    def fn(data: Any, indices: Any, segment_ids: Any, name: str | None = None,
           num_segments: Any = None) -> Tensor:
        if num_segments is not None:
            return apply_op(op_type + "WithNumSegments", name=name, data=data,
                            indices=indices, segment_ids=segment_ids,
                            num_segments=num_segments)
        return apply_op(op_type, name=name, data=data, indices=indices,
                        segment_ids=segment_ids)

    fn.__name__ = fn.__qualname__ = names[0].replace(".", "_")
    fn.__doc__ = doc
    ks.api(*names)(fn)
    return fn


sparse_segment_sum = _sparse_api(
    "SparseSegmentSum", ("sparse_segment_sum", "sparse.segment_sum"),
    "Segment sums of ``data[indices]`` by sorted ``segment_ids`` (``num_segments`` "
    "fixes the number of output rows).")
sparse_segment_mean = _sparse_api(
    "SparseSegmentMean", ("sparse_segment_mean", "sparse.segment_mean"),
    "Segment means of ``data[indices]`` by sorted ``segment_ids``.")
sparse_segment_sqrt_n = _sparse_api(
    "SparseSegmentSqrtN", ("sparse_segment_sqrt_n", "sparse.segment_sqrt_n"),
    "Segment sums of ``data[indices]`` divided by the square root of the segment size.")


# =======================================================================================
# Special functions
# =======================================================================================
def _vectorize(fn: Callable[..., float], nin: int) -> Callable[..., np.ndarray]:
    uf = np.frompyfunc(fn, nin, 1)

    def run(*args: Any) -> np.ndarray:
        arrs = [np.asarray(a, dtype=np.float64) for a in args]
        return np.asarray(uf(*arrs), dtype=np.float64)

    return run


def _lgamma(v: float) -> float:
    try:
        return math.lgamma(v)
    except (ValueError, OverflowError):
        return math.inf


def _igamma_series(a: float, x: float) -> float:
    term = total = 1.0 / a
    n = a
    for _ in range(2000):
        n += 1.0
        term *= x / n
        total += term
        if abs(term) < abs(total) * 1e-17:
            break
    return total * math.exp(-x + a * math.log(x) - _lgamma(a))


def _igammac_cf(a: float, x: float) -> float:
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 2000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return math.exp(-x + a * math.log(x) - _lgamma(a)) * h


def _igamma_scalar(a: float, x: float, upper: bool) -> float:
    if math.isnan(a) or math.isnan(x) or a <= 0 or x < 0:
        return math.nan
    if x == 0:
        return 1.0 if upper else 0.0
    if math.isinf(x):
        return 0.0 if upper else 1.0
    if math.isinf(a):
        return 1.0 if upper else 0.0
    if x < a + 1.0:
        p = _igamma_series(a, x)
        return 1.0 - p if upper else p
    q = _igammac_cf(a, x)
    return q if upper else 1.0 - q


np_igamma = _vectorize(lambda a, x: _igamma_scalar(a, x, False), 2)
np_igammac = _vectorize(lambda a, x: _igamma_scalar(a, x, True), 2)


def np_igamma_grad_a(a: Any, x: Any) -> np.ndarray:
    """d igamma(a, x) / da by Richardson-extrapolated central differences (float64)."""
    a = np.asarray(a, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    h = np.maximum(np.abs(a), 1.0) * 1e-3
    h = np.minimum(h, np.abs(a) * 0.25)

    def d(step: np.ndarray) -> np.ndarray:
        return (np_igamma(a + step, x) - np_igamma(a - step, x)) / (2 * step)

    with np.errstate(all="ignore"):
        out = (4 * d(h / 2) - d(h)) / 3
    return np.where((a > 0) & (x >= 0), out, np.nan)


def _betacf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = tiny if abs(d) < tiny else d
    d = 1.0 / d
    h = d
    for m in range(1, 3000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return h


def _betainc_scalar(a: float, b: float, x: float) -> float:
    if math.isnan(a) or math.isnan(b) or math.isnan(x) or a <= 0 or b <= 0 or \
            x < 0 or x > 1:
        return math.nan
    if x == 0 or x == 1:
        return x
    lbt = _lgamma(a + b) - _lgamma(a) - _lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    bt = math.exp(lbt)
    if x < (a + 1.0) / (a + b + 2.0):
        return bt * _betacf(a, b, x) / a
    return 1.0 - bt * _betacf(b, a, 1.0 - x) / b


np_betainc = _vectorize(_betainc_scalar, 3)


def _bessel_scaled(x: np.ndarray, order: int) -> np.ndarray:
    """``exp(-|x|) * I_order(x)`` for order 0 or 1: the power series up to |x| = 30,
    the asymptotic expansion beyond."""
    x = np.asarray(x, dtype=np.float64)
    ax = np.abs(x)
    out = np.zeros_like(ax)
    small = ax <= 30.0
    if small.any():
        xs = ax[small]
        q = xs * xs / 4.0
        term = np.ones_like(xs) if order == 0 else xs / 2.0
        total = term.copy()
        for k in range(1, 120):
            term = term * q / (k * (k + order))
            total += term
        out[small] = total * np.exp(-xs)
    big = ~small & np.isfinite(ax)
    if big.any():
        xb = ax[big]
        mu = 4.0 * order * order
        term = np.ones_like(xb)
        total = term.copy()
        for k in range(1, 30):
            term = -term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * xb)
            total += term
        out[big] = total / np.sqrt(2 * np.pi * xb)
    out[np.isinf(ax)] = 0.0
    out[np.isnan(ax)] = np.nan
    return out if order == 0 else np.sign(x) * out


def np_bessel_i0e(x: Any) -> np.ndarray:
    return _bessel_scaled(x, 0)


def np_bessel_i1e(x: Any) -> np.ndarray:
    return _bessel_scaled(x, 1)


def np_bessel_i0(x: Any) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(np.isinf(x), np.inf, np.exp(np.abs(x)) * _bessel_scaled(x, 0))


def np_bessel_i1(x: Any) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(np.isinf(x), np.sign(x) * np.inf,
                        np.exp(np.abs(x)) * _bessel_scaled(x, 1))


_ACKLAM_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
             1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00)
_ACKLAM_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
             6.680131188771972e+01, -1.328068155288572e+01)
_ACKLAM_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
             -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00)
_ACKLAM_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
             3.754408661907416e+00)
_erfc = np.frompyfunc(math.erfc, 1, 1)
_erf = np.frompyfunc(math.erf, 1, 1)


def _poly(coeffs: Sequence[float], x: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x)
    for c in coeffs:
        out = out * x + c
    return out


def np_ndtri(p: Any) -> np.ndarray:
    """The inverse of the standard normal CDF: Acklam's rational approximation refined
    by two Halley steps on ``0.5 * erfc(-x / sqrt(2)) - p``."""
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(all="ignore"):
        lo, hi = p < 0.02425, p > 1 - 0.02425
        q = np.sqrt(-2 * np.log(np.where(lo, p, np.where(hi, 1 - p, 0.5))))
        tail = _poly(_ACKLAM_C, q) / (_poly(_ACKLAM_D, q) * q + 1)
        r = (p - 0.5) ** 2
        mid = (p - 0.5) * _poly(_ACKLAM_A, r) / (_poly(_ACKLAM_B, r) * r + 1)
        x = np.where(lo, tail, np.where(hi, -tail, mid))
        for _ in range(2):
            fin = np.isfinite(x)
            xf = np.where(fin, x, 0.0)
            e = 0.5 * np.asarray(_erfc(-xf / np.sqrt(2)), dtype=np.float64) - p
            u = e * np.sqrt(2 * np.pi) * np.exp(xf * xf / 2)
            x = np.where(fin, xf - u / (1 + xf * u / 2), x)
        x = np.where(p == 0, -np.inf, np.where(p == 1, np.inf, x))
        return np.where((p < 0) | (p > 1) | np.isnan(p), np.nan, x)


def np_erfinv(y: Any) -> np.ndarray:
    """The inverse error function: an ``ndtri`` start and Newton steps on ``erf``
    (accurate in relative terms near 0 as well)."""
    y = np.asarray(y, dtype=np.float64)
    with np.errstate(all="ignore"):
        x = np_ndtri((y + 1) / 2) / np.sqrt(2)
        for _ in range(2):
            fin = np.isfinite(x)
            xf = np.where(fin, x, 0.0)
            err = np.asarray(_erf(xf), dtype=np.float64) - y
            x = np.where(fin, xf - err / (2 / np.sqrt(np.pi) * np.exp(-xf * xf)), x)
        x = np.where(y == -1, -np.inf, np.where(y == 1, np.inf, x))
        return np.where((y < -1) | (y > 1) | np.isnan(y), np.nan, x)


_FLOATS = "T: {bfloat16, half, float, double}"
_UNARY_SPECIAL = {"BesselI0e": np_bessel_i0e, "BesselI1e": np_bessel_i1e,
                  "BesselI0": np_bessel_i0, "BesselI1": np_bessel_i1,
                  "Erfinv": np_erfinv, "Ndtri": np_ndtri}
for _op in _UNARY_SPECIAL:
    ks.op(OpDef(_op, inputs=["x: T"], outputs=["y: T"], attrs=[_FLOATS],
                shape_fn=unchanged_shape))
for _op in ("Igamma", "Igammac", "IgammaGradA"):
    ks.op(OpDef(_op, inputs=["a: T", "x: T"], outputs=["z: T"], attrs=["T: {float, double}"],
                shape_fn=broadcast_shape))
ks.op(OpDef("Xlog1py", inputs=["x: T", "y: T"], outputs=["z: T"],
            attrs=["T: {half, float, double, complex64, complex128}"],
            shape_fn=broadcast_shape),
      OpDef("NextAfter", inputs=["x1: T", "x2: T"], outputs=["output: T"],
            attrs=["T: {float64, float32} = DT_FLOAT"], shape_fn=broadcast_shape))


def _betainc_shape(op: Any) -> list[TensorShape]:
    out: tuple | None = ()
    for t in op.inputs:
        d = t.shape.as_tuple()
        if d is None:
            return [unknown_shape()]
        if len(d) == 0:
            continue
        if out == ():
            out = d
        elif len(out) != len(d) or any(x is not None and y is not None and x != y
                                       for x, y in zip(out, d)):
            raise ValueError(f"Shapes of a, b, and x are inconsistent{_where(op)}")
        else:
            out = tuple(x if x is not None else y for x, y in zip(out, d))
    return [TensorShape(out)]


ks.op(OpDef("Betainc", inputs=["a: T", "b: T", "x: T"], outputs=["z: T"],
            attrs=["T: {float, double}"], shape_fn=_betainc_shape))


def _host_float_kernel(fn: Callable[..., np.ndarray]) -> Callable:
    def factory(ctx: Any) -> Callable:
        xp, dt = ctx.xp, ctx.output_dtypes[0].np

        def special(*args: Any) -> Any:
            host = [_host(xp, a).astype(np.float64) for a in args]
            try:
                shape = np.broadcast_shapes(*(h.shape for h in host))
            except ValueError:
                raise _invalid("Incompatible shapes: " + " vs. ".join(
                    _fmt(h.shape) for h in host)) from None
            with np.errstate(all="ignore"):
                out = fn(*(np.broadcast_to(h, shape) for h in host))
            return xp.asarray(np.asarray(out).astype(dt))

        return special

    return factory


for _op, _fn in _UNARY_SPECIAL.items():
    ks.kernel(_op)(_host_float_kernel(_fn))
ks.kernel("Igamma")(_host_float_kernel(np_igamma))
ks.kernel("Igammac")(_host_float_kernel(np_igammac))
ks.kernel("IgammaGradA")(_host_float_kernel(np_igamma_grad_a))


@ks.kernel("Betainc")
def _betainc_kernel(ctx: Any) -> Callable:
    inner = _host_float_kernel(np_betainc)(ctx)

    def betainc(a: Any, b: Any, x: Any) -> Any:
        shapes = [np.shape(v) for v in (a, b, x) if np.ndim(v) > 0]
        if any(s != shapes[0] for s in shapes):
            raise _invalid("Shapes of a, b, and x are inconsistent: " +
                           " vs. ".join(_fmt(np.shape(v)) for v in (a, b, x)))
        return inner(a, b, x)

    return betainc


@ks.kernel("Xlog1py")
def _xlog1py_kernel(ctx: Any) -> Callable:
    xp = ctx.xp

    def xlog1py(x: Any, y: Any) -> Any:
        with np.errstate(all="ignore"):
            out = x * xp.log1p(y)
            return xp.where(x == 0, xp.zeros((), dtype=out.dtype), out).astype(x.dtype)

    return xlog1py


@ks.kernel("NextAfter")
def _nextafter_kernel(ctx: Any) -> Callable:
    return ctx.xp.nextafter


ks.not_differentiable("NextAfter", "IgammaGradA")


@ks.gradient("BesselI0e")
def _bessel_i0e_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    x, y = op.inputs[0], op.outputs[0]
    return [grad * (bessel_i1e(x) - tf.sign(x) * y)]


@ks.gradient("BesselI1e")
def _bessel_i1e_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    x, y = op.inputs[0], op.outputs[0]
    zero = tf.equal(x, tf.zeros_like(x))
    safe_x = tf.where_v2(zero, tf.ones_like(x), x)
    dy = tf.where_v2(zero, 0.5 * tf.ones_like(x),
                     bessel_i0e(x) - y * (tf.sign(x) + tf.math.reciprocal(safe_x)))
    return [grad * dy]


@ks.gradient("BesselI0")
def _bessel_i0_grad(op: Any, grad: Tensor) -> list[Any]:
    return [grad * bessel_i1(op.inputs[0])]


@ks.gradient("BesselI1")
def _bessel_i1_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    x, y = op.inputs[0], op.outputs[0]
    zero = tf.equal(x, tf.zeros_like(x))
    safe_x = tf.where_v2(zero, tf.ones_like(x), x)
    dy = tf.where_v2(zero, 0.5 * tf.ones_like(x), bessel_i0(x) - y / safe_x)
    return [grad * dy]


@ks.gradient("Erfinv")
def _erfinv_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    y = op.outputs[0]
    return [grad * (np.sqrt(np.pi) / 2) * tf.exp(tf.square(y))]


@ks.gradient("Ndtri")
def _ndtri_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    y = op.outputs[0]
    return [grad * np.sqrt(2 * np.pi) * tf.exp(tf.square(y) / 2.0)]


@ks.gradient("Igamma")
def _igamma_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    a, x = op.inputs
    partial_a = apply_op("IgammaGradA", a=a, x=x)
    partial_x = tf.exp(-x + (a - 1) * tf.log(x) - tf.lgamma(a))
    return list(reduce_broadcast_grads(a, x, partial_a * grad, partial_x * grad))


@ks.gradient("Igammac")
def _igammac_grad(op: Any, grad: Tensor) -> list[Any]:
    ga, gx = _igamma_grad(op, grad)
    return [-ga, -gx]


@ks.gradient("Betainc")
def _betainc_grad(op: Any, grad: Tensor) -> list[Any]:
    """Only the gradient with respect to x, as TF (a and b get None)."""
    tf = _tf()
    a, b, x = op.inputs
    log_beta = tf.lgamma(a) + tf.lgamma(b) - tf.lgamma(a + b)
    partial_x = tf.exp((b - 1) * tf.log1p(-x) + (a - 1) * tf.log(x) - log_beta)
    gx = partial_x * grad
    xs, gs = x.shape.as_tuple(), gx.shape.as_tuple()
    if xs is not None and gs is not None and xs != gs and len(xs) == 0:
        gx = tf.reduce_sum(gx)
    return [None, None, gx]


@ks.gradient("Xlog1py")
def _xlog1py_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    x, y = op.inputs
    not_zero_x = tf.cast(tf.not_equal(x, tf.zeros((), dtype=x.dtype)), x.dtype)
    partial_x = apply_op("Xlog1py", x=not_zero_x, y=y)
    partial_y = apply_op("Xdivy", x=x, y=y + tf.ones((), dtype=y.dtype))
    return list(reduce_broadcast_grads(x, y, partial_x * grad, partial_y * grad))


def _unary_special_api(op_type: str, names: Sequence[str], doc: str) -> Callable[..., Tensor]:
    scope_name = names[0].split(".")[-1]

    def fn(x: Any, name: str | None = None) -> Tensor:
        with name_scope(name, scope_name, [x]):
            return apply_op(op_type, x=x)

    fn.__name__ = fn.__qualname__ = names[0].split(".")[-1]
    fn.__doc__ = doc
    ks.api(*names)(fn)
    return fn


bessel_i0e = _unary_special_api("BesselI0e", ("math.bessel_i0e",),
                                "``exp(-|x|) * I0(x)``, the scaled modified Bessel function "
                                "of order 0.")
bessel_i1e = _unary_special_api("BesselI1e", ("math.bessel_i1e",),
                                "``exp(-|x|) * I1(x)``, the scaled modified Bessel function "
                                "of order 1.")
bessel_i0 = _unary_special_api("BesselI0", ("math.bessel_i0",),
                               "``I0(x)``, the modified Bessel function of order 0.")
bessel_i1 = _unary_special_api("BesselI1", ("math.bessel_i1",),
                               "``I1(x)``, the modified Bessel function of order 1.")
# ``tf.math.special`` (TF 2.x's home of the Bessel functions, also in its compat.v1): a
# plain module object exported as one name, so the core's namespace list stays as it is
_special = types.ModuleType("flowrt.math.special",
                            "Special functions (the modified Bessel functions).")
for _f in (bessel_i0, bessel_i0e, bessel_i1, bessel_i1e):
    setattr(_special, _f.__name__, _f)
_special.__all__ = sorted(n for n in vars(_special) if n.startswith("bessel"))
ks.export("math.special", _special)

erfinv = _unary_special_api("Erfinv", ("math.erfinv",), "The inverse error function.")
ndtri = _unary_special_api("Ndtri", ("math.ndtri",),
                           "The inverse of the standard normal CDF.")


@ks.api("math.erfcinv")
def erfcinv(x: Any, name: str | None = None) -> Tensor:
    """The inverse complementary error function: ``-ndtri(x / 2) / sqrt(2)``."""
    with name_scope(name, "erfcinv", [x]):
        x = convert_to_tensor(x, name="start")
        return -ndtri(0.5 * x) * np.sqrt(0.5)


@ks.api("math.igamma", "igamma")
def igamma(a: Any, x: Any, name: str | None = None) -> Tensor:
    """The regularised lower incomplete gamma function ``P(a, x)``."""
    return apply_op("Igamma", name=name, a=a, x=x)


@ks.api("math.igammac", "igammac")
def igammac(a: Any, x: Any, name: str | None = None) -> Tensor:
    """The regularised upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``."""
    return apply_op("Igammac", name=name, a=a, x=x)


@ks.api("math.betainc", "betainc")
def betainc(a: Any, b: Any, x: Any, name: str | None = None) -> Tensor:
    """The regularised incomplete beta function ``I_x(a, b)``."""
    return apply_op("Betainc", name=name, a=a, b=b, x=x)


@ks.api("math.xlog1py")
def xlog1py(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x * log1p(y)``, 0 where ``x == 0``."""
    with name_scope(name, "xlog1py", [x]):
        return apply_op("Xlog1py", x=x, y=y)


@ks.api("math.nextafter")
def nextafter(x1: Any, x2: Any, name: str | None = None) -> Tensor:
    """The next representable value after ``x1`` towards ``x2``."""
    return apply_op("NextAfter", name=name, x1=x1, x2=x2)


@ks.api("math.lbeta", "lbeta")
def lbeta(x: Any, name: str | None = None) -> Tensor:
    """``log(|Beta(x)|)`` reduced along the last dimension:
    ``sum(lgamma(x)) - lgamma(sum(x))``."""
    tf = _tf()
    with name_scope(name, "lbeta", [x]):
        x = convert_to_tensor(x, name="x")
        log_prod_gamma_x = tf.reduce_sum(tf.lgamma(x), axis=[-1])
        log_gamma_sum_x = tf.lgamma(tf.reduce_sum(x, axis=[-1]))
        return log_prod_gamma_x - log_gamma_sum_x


@ks.api("math.polyval")
def polyval(coeffs: Any, x: Any, name: str | None = None) -> Tensor:
    """The polynomial ``coeffs[0] * x**(n-1) + ... + coeffs[n-1]`` by Horner's rule."""
    tf = _tf()
    if not isinstance(coeffs, list):
        raise ValueError(f"Argument coeffs must be list type found {type(coeffs)}.")
    with name_scope(name, "polyval", list(coeffs) + [x]) as scope:
        x = convert_to_tensor(x, name="x")
        if len(coeffs) < 1:
            return tf.zeros_like(x, name=scope)
        cs = [convert_to_tensor(c, name=f"coeff_{i}") for i, c in enumerate(coeffs)]
        p = cs[0]
        for c in cs[1:]:
            p = c + p * x
        return p


# =======================================================================================
# CumulativeLogsumexp
# =======================================================================================
ks.op(OpDef("CumulativeLogsumexp", inputs=["x: T", "axis: Tidx"], outputs=["out: T"],
            attrs=["T: {float16, float32, float64}", "exclusive: bool = false",
                   "reverse: bool = false", "Tidx: {int32, int64} = DT_INT32"],
            shape_fn=unchanged_shape, doc="log(cumsum(exp(x))) computed stably."))


@ks.kernel("CumulativeLogsumexp", host_memory=("axis",))
def _cumulative_logsumexp_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    exclusive = bool(ctx.attrs.get("exclusive", False))
    reverse = bool(ctx.attrs.get("reverse", False))

    def cumulative_logsumexp(x: Any, axis: Any) -> Any:
        if np.ndim(axis) != 0:
            raise _invalid(f"axis must be a scalar, but got shape {_fmt(np.shape(axis))}")
        rank = np.ndim(x)
        ax = int(axis)
        if ax < -rank or ax >= rank:
            raise _invalid(f"Expected scan axis in the range [{-rank}, {rank}), but got {ax}")
        ax %= rank
        h = _host(xp, x)
        w = h.astype(np.float64)
        if reverse:
            w = np.flip(w, ax)
        if exclusive:
            pad = [(0, 0)] * rank
            pad[ax] = (1, 0)
            w = np.pad(w, pad, constant_values=-np.inf)
            w = np.take(w, np.arange(h.shape[ax]), axis=ax)
        with np.errstate(invalid="ignore"):
            out = np.logaddexp.accumulate(w, axis=ax) if w.size else w
        if reverse:
            out = np.flip(out, ax)
        return xp.asarray(out.astype(h.dtype))

    return cumulative_logsumexp


@ks.gradient("CumulativeLogsumexp")
def _cumulative_logsumexp_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    x, axis = op.inputs
    out = op.outputs[0]
    exclusive, reverse = bool(op.get_attr("exclusive")), bool(op.get_attr("reverse"))
    low = tf.constant(np.finfo(grad.dtype.np).min, dtype=grad.dtype)
    log_pos = tf.where_v2(grad > 0, tf.log(tf.where_v2(grad > 0, grad, tf.ones_like(grad))),
                          low)
    log_neg = tf.where_v2(grad < 0, tf.log(tf.where_v2(grad < 0, -grad, tf.ones_like(grad))),
                          low)
    pos = tf.exp(cumulative_logsumexp(log_pos - out, axis, exclusive=exclusive,
                                      reverse=not reverse) + x)
    neg = tf.exp(cumulative_logsumexp(log_neg - out, axis, exclusive=exclusive,
                                      reverse=not reverse) + x)
    return [pos - neg, None]


@ks.api("math.cumulative_logsumexp")
def cumulative_logsumexp(x: Any, axis: Any = 0, exclusive: bool = False,
                         reverse: bool = False, name: str | None = None) -> Tensor:
    """``log(cumsum(exp(x), axis))`` without overflow (``exclusive``/``reverse`` as
    ``tf.cumsum``)."""
    with name_scope(name, "CumulativeLogsumexp", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        return apply_op("CumulativeLogsumexp", name=scope, x=x, axis=axis,
                        exclusive=exclusive, reverse=reverse)


# =======================================================================================
# Bincount, histograms, AccumulateNV2
# =======================================================================================
def _histogram_shape(op: Any) -> list[TensorShape]:
    from ._common import constant_value
    v = constant_value(op.inputs[2])
    if v is None:
        return [TensorShape([None])]
    n = int(np.asarray(v).reshape(-1)[0])
    if n <= 0:
        raise ValueError(f"Requires nbins > 0: {n}{_where(op)}")
    return [TensorShape([n])]


ks.op(
    OpDef("Bincount", inputs=["arr: int32", "size: int32", "weights: T"],
          outputs=["bins: T"], attrs=["T: {int32, int64, float32, float64}"],
          shape_fn=lambda op: [TensorShape([None])], doc="Counts of each value in arr."),
    OpDef("HistogramFixedWidth", inputs=["values: T", "value_range: T", "nbins: int32"],
          outputs=["out: dtype"],
          attrs=["T: {int32, int64, float32, float64}", "dtype: {int32, int64} = DT_INT32"],
          shape_fn=lambda op: _histogram_shape(op),
          doc="Histogram of values over nbins equal-width bins."),
)
ks.not_differentiable("Bincount", "HistogramFixedWidth")


@ks.kernel("Bincount", host_memory=("size",))
def _bincount_kernel(ctx: Any) -> Callable:
    xp, dt = ctx.xp, ctx.output_dtypes[0].np

    def bincount_kernel(arr: Any, size: Any, weights: Any) -> Any:
        if np.ndim(size) != 0:
            raise _invalid(f"Shape must be rank 0 but is rank {np.ndim(size)}")
        n = int(size)
        if n < 0:
            raise _invalid(f"size ({n}) must be non-negative")
        flat = xp.asarray(arr).reshape(-1)
        if flat.size and int(flat.min()) < 0:
            raise _invalid("Input arr must be non-negative!")
        keep = flat < n
        w = None
        if np.size(weights) > 0:
            if np.shape(weights) != np.shape(arr):
                raise _invalid("Weights and arr must have the same shape.")
            w = xp.asarray(weights).reshape(-1)[keep]
        out = xp.bincount(flat[keep], weights=w, minlength=n)
        return out.astype(dt)

    return bincount_kernel


@ks.kernel("HistogramFixedWidth", host_memory=("nbins",))
def _histogram_kernel(ctx: Any) -> Callable:
    xp, dt = ctx.xp, ctx.output_dtypes[0].np

    def histogram_fixed_width_kernel(values: Any, value_range: Any, nbins: Any) -> Any:
        if np.shape(value_range) != (2,):
            raise _invalid(f"value_range should be a vector of 2 elements, but got shape "
                           f"{_fmt(np.shape(value_range))}")
        if np.ndim(nbins) != 0:
            raise _invalid(f"nbins should be a scalar, but got shape {_fmt(np.shape(nbins))}")
        n = int(nbins)
        if n <= 0:
            raise _invalid(f"nbins should be a positive number, but got '{n}'")
        lo, hi = (float(v) for v in _host(xp, value_range))
        if not lo < hi:
            raise _invalid(f"value_range should satisfy value_range[0] < value_range[1], "
                           f"but got '[{lo:g}, {hi:g}]'")
        v = xp.asarray(values).reshape(-1).astype(np.float64)
        idx = xp.floor((v - lo) / (hi - lo) * n)
        idx = xp.clip(idx, 0, n - 1).astype(np.int64)
        return xp.bincount(idx, minlength=n).astype(dt)

    return histogram_fixed_width_kernel


@ks.api("math.bincount", "bincount")
def bincount(arr: Any, weights: Any = None, minlength: Any = None, maxlength: Any = None,
             dtype: Any = _dt.int32, name: str | None = None) -> Tensor:
    """Counts of each value of the non-negative int32 ``arr`` (sums of ``weights``
    when given), ``max(arr) + 1`` long, at least ``minlength``, at most ``maxlength``."""
    tf = _tf()
    with name_scope(name, "bincount", [arr, weights, minlength, maxlength]):
        arr = convert_to_tensor(arr, name="arr", dtype=_dt.int32)
        nonempty = tf.reduce_prod(tf.shape(arr)) > 0
        output_size = tf.cast(nonempty, _dt.int32) * (tf.reduce_max(arr) + 1)
        if minlength is not None:
            minlength = convert_to_tensor(minlength, name="minlength", dtype=_dt.int32)
            output_size = tf.maximum(minlength, output_size)
        if maxlength is not None:
            maxlength = convert_to_tensor(maxlength, name="maxlength", dtype=_dt.int32)
            output_size = tf.minimum(maxlength, output_size)
        if weights is not None:
            weights = convert_to_tensor(weights, name="weights")
            return apply_op("UnsortedSegmentSum", data=weights, segment_ids=arr,
                            num_segments=output_size)
        w = tf.constant([], _dt.as_dtype(dtype))
        return apply_op("Bincount", arr=arr, size=output_size, weights=w)


@ks.api("histogram_fixed_width")
def histogram_fixed_width(values: Any, value_range: Any, nbins: Any = 100,
                          dtype: Any = _dt.int32, name: str | None = None) -> Tensor:
    """Counts of ``values`` in ``nbins`` equal bins over ``value_range``; values outside
    the range fall in the first or last bin."""
    with name_scope(name, "histogram_fixed_width", [values, value_range, nbins]) as scope:
        return apply_op("HistogramFixedWidth", name=scope, values=values,
                        value_range=value_range, nbins=nbins, dtype=_dt.as_dtype(dtype))


@ks.api("histogram_fixed_width_bins")
def histogram_fixed_width_bins(values: Any, value_range: Any, nbins: Any = 100,
                               dtype: Any = _dt.int32, name: str | None = None) -> Tensor:
    """The bin index of each of ``values`` (shape kept) for ``nbins`` equal bins over
    ``value_range``, clipped to ``[0, nbins - 1]``."""
    tf = _tf()
    with name_scope(name, "histogram_fixed_width_bins", [values, value_range, nbins]):
        values = convert_to_tensor(values, name="values")
        shape = tf.shape(values)
        values = tf.reshape(values, [-1])
        value_range = convert_to_tensor(value_range, name="value_range")
        nbins = convert_to_tensor(nbins, dtype=_dt.int32, name="nbins")
        nbins_float = tf.cast(nbins, values.dtype)
        scaled = tf.truediv(values - value_range[0], value_range[1] - value_range[0],
                            name="scaled_values")
        indices = tf.floor(nbins_float * scaled, name="indices")
        indices = tf.cast(tf.clip_by_value(indices, 0, nbins_float - 1), _dt.as_dtype(dtype))
        return tf.reshape(indices, shape)


def _accumulate_shape(op: Any) -> list[TensorShape]:
    shape = op.get_attr("shape")
    out = shape if isinstance(shape, TensorShape) else unknown_shape()
    for t in op.inputs:
        out = out.merge_with(t.shape)
    return [out]


ks.op(OpDef("AccumulateNV2", inputs=["inputs: N * T"], outputs=["sum: T"],
            attrs=["N: int >= 1", "T: numbertype", "shape: shape"],
            shape_fn=_accumulate_shape, doc="The sum of the inputs (like AddN)."))


@ks.kernel("AccumulateNV2")
def _accumulate_kernel(ctx: Any) -> Callable:
    def accumulate_n(*xs: Any) -> Any:
        out = xs[0].copy()
        for x in xs[1:]:
            if np.shape(x) != np.shape(out):
                raise _invalid(f"Inputs to operation AccumulateNV2 must have the same size "
                               f"and shape. Input 0: {_fmt(np.shape(out))} != input: "
                               f"{_fmt(np.shape(x))}")
            out = out + x
        return out

    return accumulate_n


@ks.gradient("AccumulateNV2")
def _accumulate_grad(op: Any, grad: Tensor) -> list[Any]:
    return [grad] * len(op.inputs)


@ks.api("math.accumulate_n", "accumulate_n")
def accumulate_n(inputs: Any, shape: Any = None, tensor_dtype: Any = None,
                 name: str | None = None) -> Tensor:
    """The element-wise sum of a list of tensors of one dtype and shape."""
    tf = _tf()

    def _input_error() -> ValueError:
        return ValueError("inputs must be a list of at least one Tensor with the same "
                          "dtype and shape")

    if not inputs or not isinstance(inputs, (list, tuple)):
        raise _input_error()
    inputs = [convert_to_tensor(x) for x in inputs]
    if not all(x.dtype == inputs[0].dtype for x in inputs):
        raise _input_error()
    static = TensorShape(shape) if shape is not None else unknown_shape()
    for x in inputs:
        static = static.merge_with(x.shape)
    if tensor_dtype is not None and _dt.as_dtype(tensor_dtype) != inputs[0].dtype:
        raise TypeError(f"tensor_dtype is {tensor_dtype}, but input is of type "
                        f"{inputs[0].dtype}")
    if len(inputs) == 1:
        return inputs[0] if name is None else tf.identity(inputs[0], name=name)
    return apply_op("AccumulateNV2", name=name, inputs=inputs, shape=static)


# =======================================================================================
# small composites: arg_max/arg_min, monotonicity, zero_fraction
# =======================================================================================
@ks.api("arg_max")
def arg_max(input: Any, dimension: Any, output_type: Any = _dt.int64,  # noqa: A002
            name: str | None = None) -> Tensor:
    """The raw ArgMax op (TF 1.x's ``tf.arg_max``)."""
    return apply_op("ArgMax", name=name, input=input, dimension=dimension,
                    output_type=_dt.as_dtype(output_type))


@ks.api("arg_min")
def arg_min(input: Any, dimension: Any, output_type: Any = _dt.int64,  # noqa: A002
            name: str | None = None) -> Tensor:
    """The raw ArgMin op (TF 1.x's ``tf.arg_min``)."""
    return apply_op("ArgMin", name=name, input=input, dimension=dimension,
                    output_type=_dt.as_dtype(output_type))


def _monotonic_diff(x: Any) -> Tensor:
    tf = _tf()
    x = tf.reshape(x, [-1])
    if not (x.dtype.is_floating or x.dtype.is_integer or x.dtype.is_complex):
        raise TypeError(f"Expected x to be numeric, instead found: {x}")
    return x[1:] - x[:-1]


@ks.api("math.is_non_decreasing", "is_non_decreasing", "debugging.is_non_decreasing")
def is_non_decreasing(x: Any, name: str | None = None) -> Tensor:
    """Whether ``x`` (flattened) is non-decreasing; True for fewer than 2 elements."""
    tf = _tf()
    with name_scope(name, "is_non_decreasing", [x]):
        diff = _monotonic_diff(convert_to_tensor(x, name="x"))
        return tf.reduce_all(tf.less_equal(tf.zeros((), dtype=diff.dtype), diff))


@ks.api("math.is_strictly_increasing", "is_strictly_increasing",
        "debugging.is_strictly_increasing")
def is_strictly_increasing(x: Any, name: str | None = None) -> Tensor:
    """Whether ``x`` (flattened) is strictly increasing; True for fewer than 2 elements."""
    tf = _tf()
    with name_scope(name, "is_strictly_increasing", [x]):
        diff = _monotonic_diff(convert_to_tensor(x, name="x"))
        return tf.reduce_all(tf.less(tf.zeros((), dtype=diff.dtype), diff))


@ks.api("math.zero_fraction", "nn.zero_fraction")
def zero_fraction(value: Any, name: str | None = None) -> Tensor:
    """The fraction of zeros in ``value``, as float32."""
    tf = _tf()
    with name_scope(name, "zero_fraction", [value]):
        value = convert_to_tensor(value, name="value")
        size = tf.size(value, out_type=_dt.int64)
        zero = tf.zeros((), dtype=value.dtype)
        num_nonzero = tf.cast(tf.reduce_sum(tf.cast(tf.not_equal(value, zero), _dt.int32)),
                              _dt.int64)
        with name_scope("counts_to_fraction"):
            num_zero = size - num_nonzero
            fraction = tf.cast(num_zero, _dt.float32) / tf.cast(size, _dt.float32)
        return tf.identity(fraction, "fraction")
