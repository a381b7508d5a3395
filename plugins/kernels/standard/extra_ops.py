"""Commonly used TF 1.15 ops and composites: norm clipping, embedding lookup, top-k,
sort, ref-variable scatter updates, CountUpTo, CheckNumerics, EnsureShape and friends."""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import numpy as np

from flowrt import errors
from flowrt.framework.indexed_slices import IndexedSlices
from flowrt.graph import (Tensor, apply_op, colocate_with, control_dependencies,
                          convert_to_tensor, name_scope)
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, as_shape, unknown_shape

from ._common import constant_value, host_reader, ks
from ._common import invalid as _invalid
from .graph_api import custom_gradient
from .state_ops import _frozen, _ref_of


def _tf() -> Any:
    import flowrt
    return flowrt


# =======================================================================================
# norm clipping (python composites, as TF's clip_ops.py)
# =======================================================================================
def _values_of(t: Any) -> Any:
    """The dense part of ``t``: ``t.values`` for an IndexedSlices (as TF's clip_ops)."""
    return t.values if isinstance(t, IndexedSlices) else t


def _like(t: Any, values: Tensor) -> Any:
    """``values`` in the form of ``t``: an IndexedSlices with ``t``'s indices for one."""
    if isinstance(t, IndexedSlices):
        return IndexedSlices(values, t.indices, t.dense_shape)
    return values


@ks.api("clip_by_norm")
def clip_by_norm(t: Any, clip_norm: Any, axes: Any = None, name: str | None = None) -> Any:
    """Scales ``t`` so that its L2 norm (over ``axes``) is at most ``clip_norm``; for an
    IndexedSlices, the norm of its values, and an IndexedSlices is returned."""
    tf = _tf()
    with name_scope(name, "clip_by_norm", [t, clip_norm]) as name:
        values = convert_to_tensor(_values_of(t), name="t")
        l2sum = tf.reduce_sum(values * values, axes, keepdims=True)
        pred = l2sum > 0
        l2sum_safe = tf.where(pred, l2sum, tf.ones_like(l2sum))
        l2norm = tf.where(pred, tf.sqrt(l2sum_safe), l2sum)
        intermediate = values * clip_norm
        return _like(t, tf.identity(intermediate / tf.maximum(l2norm, clip_norm), name=name))


def _check_sequence(t_list: Any) -> None:
    if not isinstance(t_list, Sequence) or isinstance(t_list, str):
        raise TypeError("t_list should be a sequence")


@ks.api("global_norm", "linalg.global_norm")
def global_norm(t_list: Any, name: str | None = None) -> Tensor:
    """sqrt(sum of squared L2 norms) of the non-None tensors of ``t_list`` (of the
    values of an IndexedSlices)."""
    tf = _tf()
    _check_sequence(t_list)
    t_list = list(t_list)
    with name_scope(name, "global_norm", [t for t in t_list if t is not None]) as name:
        values = [convert_to_tensor(_values_of(t), name=f"t_{i}") if t is not None else None
                  for i, t in enumerate(t_list)]
        halves = []
        for v in values:
            if v is not None:
                with colocate_with(v.op):
                    halves.append(tf.nn.l2_loss(v))
        half = tf.reduce_sum(tf.stack(halves))
        return tf.sqrt(half * tf.constant(2.0, dtype=half.dtype), name="global_norm")


@ks.api("clip_by_global_norm")
def clip_by_global_norm(t_list: Any, clip_norm: Any, use_norm: Any = None,
                        name: str | None = None) -> tuple[list[Any], Tensor]:
    """Scales every tensor by ``clip_norm / max(global_norm, clip_norm)``; returns
    ``(list_clipped, global_norm)`` (None entries pass through; an IndexedSlices gives
    an IndexedSlices of its scaled values)."""
    tf = _tf()
    _check_sequence(t_list)
    t_list = list(t_list)
    if use_norm is None:
        use_norm = global_norm(t_list, name)
    use_norm = convert_to_tensor(use_norm)
    with name_scope(name, "clip_by_global_norm",
                    [t for t in t_list if t is not None] + [clip_norm]) as name:
        scale_finite = clip_norm * tf.minimum(
            1.0 / use_norm, tf.constant(1.0, dtype=use_norm.dtype) / clip_norm)
        # nan when the norm is inf or nan, so that the clipped values are nan as in TF
        scale = scale_finite + (use_norm - use_norm)
        out: list[Any] = []
        for i, t in enumerate(t_list):
            if t is None:
                out.append(None)
                continue
            v = convert_to_tensor(_values_of(t), name=f"t_{i}")
            with colocate_with(v.op):
                s = scale if v.dtype.base_dtype == scale.dtype else tf.cast(scale, v.dtype)
                out.append(_like(t, tf.identity(v * s, name=f"{name}_{i}")))
        return out, use_norm


@ks.api("clip_by_average_norm")
def clip_by_average_norm(t: Any, clip_norm: Any, name: str | None = None) -> Tensor:
    """Scales ``t`` so that its L2 norm divided by its element count is at most
    ``clip_norm``."""
    tf = _tf()
    with name_scope(name, "clip_by_average_norm", [t, clip_norm]) as name:
        t = convert_to_tensor(t, name="t")
        n = tf.cast(tf.size(t), tf.float32)
        inv = tf.rsqrt(tf.reduce_sum(t * t, tf.range(tf.rank(t))))
        return tf.identity(t * clip_norm * tf.minimum(inv * n, tf.constant(1.0) / clip_norm),
                           name=name)


# =======================================================================================
# embedding lookup
# =======================================================================================
def _clip_embeddings(params: Tensor, ids: Tensor, max_norm: Any) -> Tensor:
    if max_norm is None:
        return params
    tf = _tf()
    ids_rank, params_rank = ids.shape.ndims, params.shape.ndims
    if ids_rank is None or params_rank is None:
        axes = tf.range(tf.rank(ids), tf.rank(params))
    else:
        axes = list(range(ids_rank, params_rank))
    return clip_by_norm(params, max_norm, axes=axes)


@ks.api("nn.embedding_lookup")
def embedding_lookup(params: Any, ids: Any, partition_strategy: str = "mod",
                     name: str | None = None, validate_indices: bool = True,
                     max_norm: Any = None) -> Tensor:
    """Gathers rows of ``params`` (a tensor, or a list or PartitionedVariable
    partitioned by ``partition_strategy`` 'mod' or 'div')."""
    tf = _tf()
    if hasattr(params, "_get_variable_list"):  # a PartitionedVariable: its parts
        params = list(params)
    if params is None or (isinstance(params, (list, tuple)) and not params):
        raise ValueError("Need at least one param")
    if isinstance(params, (list, tuple)):
        params = list(params)
    else:
        params = [params]
    if partition_strategy not in ("mod", "div"):
        raise ValueError(f"Unrecognized partition strategy: {partition_strategy}")
    with name_scope(name, "embedding_lookup", params + [ids]) as name:
        np_ = len(params)
        params = [convert_to_tensor(p, name="params") for p in params]
        ids = convert_to_tensor(ids, name="ids")
        if np_ == 1:
            with colocate_with(params[0].op):
                res = _clip_embeddings(tf.gather(params[0], ids, name=name), ids, max_norm)
            # as TF: the result carries no colocation with the params
            return tf.identity(res)
        flat_ids = tf.reshape(ids, [-1])
        original_indices = tf.range(tf.size(flat_ids))
        if partition_strategy == "mod":
            p_assign = flat_ids % np_
            new_ids = flat_ids // np_
        else:
            sizes = [p.shape[0] if p.shape.ndims else None for p in params]
            sizes = [getattr(s, "value", s) for s in sizes]
            if all(s is not None for s in sizes):
                total = tf.constant(int(sum(sizes)), flat_ids.dtype)
            else:
                total = tf.reduce_sum(tf.cast(tf.stack([tf.shape(p)[0] for p in params]),
                                              flat_ids.dtype))
            per = total // np_
            extras = total % np_
            p_assign = tf.maximum(flat_ids // (per + 1), (flat_ids - extras) // per)
            first = tf.cast(p_assign < extras, flat_ids.dtype)
            new_ids = (first * (flat_ids % (per + 1))
                       + (1 - first) * ((flat_ids - extras) % per))
        p_assign = tf.cast(p_assign, tf.int32)
        gather_ids = tf.dynamic_partition(new_ids, p_assign, np_)
        pindices = tf.dynamic_partition(original_indices, p_assign, np_)
        parts = []
        for p in range(np_):
            with colocate_with(params[p].op):
                parts.append(tf.gather(params[p], gather_ids[p]))
        ret = tf.dynamic_stitch(pindices, parts, name=name)
        elem = params[0].shape[1:]
        for p in params[1:]:
            elem = elem.merge_with(p.shape[1:])
        if elem.is_fully_defined():
            elem_d = list(elem.as_list())
            ret = tf.reshape(ret, tf.concat([tf.shape(ids), tf.constant(elem_d, tf.int32)], 0)
                             if elem_d else tf.shape(ids))
        else:
            ret = tf.reshape(ret, tf.concat([tf.shape(ids), tf.shape(ret)[1:]], 0))
        return _clip_embeddings(ret, ids, max_norm)


# =======================================================================================
# TopKV2, InTopKV2, sort, argsort
# =======================================================================================
_REAL = ("{float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, "
         "uint32, uint64}")


def _top_k_shape(op: Any) -> list[TensorShape]:
    s = op.inputs[0].shape
    if s.ndims is not None and s.ndims < 1:
        raise ValueError(f"Shape must be at least rank 1 but is rank {s.ndims} for "
                         f"'{op.name}' (op: 'TopKV2')")
    kv = constant_value(op.inputs[1])
    k = None if kv is None else int(np.asarray(kv).reshape(()))
    if k is not None and k < 0:
        raise ValueError(f"Need k >= 0, got {k} for '{op.name}' (op: 'TopKV2')")
    if s.ndims is None:
        return [unknown_shape(), unknown_shape()]
    dims = list(s.as_list())
    if k is not None and dims[-1] is not None and dims[-1] < k:
        raise ValueError(f"input must have last dimension >= k = {k} but is {dims[-1]} "
                         f"for '{op.name}' (op: 'TopKV2')")
    out = TensorShape(dims[:-1] + [k])
    return [out, out]


TopKV2 = namedtuple("TopKV2", ["values", "indices"])

ks.op(OpDef("TopKV2", inputs=["input: T", "k: int32"],
            outputs=["values: T", "indices: int32"],
            attrs=["sorted: bool = true", f"T: {_REAL}"], shape_fn=_top_k_shape,
            doc="The k largest entries of the last dimension, and their indices."))


@ks.kernel("TopKV2", host_memory=("k",))
def _top_k_kernel(ctx: Any) -> Any:
    xp = ctx.xp

    read = host_reader(ctx)

    def top_k(x: Any, k: Any) -> Any:
        k = int(read(k))
        if k < 0:
            raise _invalid(f"Need k >= 0, got {k}")
        if x.ndim < 1:
            raise _invalid(f"input must be >= 1-D, got shape {list(x.shape)}")
        n = x.shape[-1]
        if n < k:
            raise _invalid(f"input must have at least k columns. Had {n}, needed {k}")
        # stable descending order, lower index first among ties
        order = xp.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1][..., :k]
        idx = (n - 1 - order).astype(np.int32)
        vals = xp.take_along_axis(x, idx.astype(np.intp), axis=-1)
        return xp.ascontiguousarray(vals), xp.ascontiguousarray(idx)

    return top_k


@ks.gradient("TopKV2")
def _top_k_grad(op: Any, grad: Tensor, _igrad: Tensor) -> list[Any]:
    tf = _tf()
    x = op.inputs[0]
    depth = tf.shape(x)[-1]
    hot = tf.one_hot(op.outputs[1], depth, dtype=grad.dtype)
    return [tf.reduce_sum(hot * tf.expand_dims(grad, -1), axis=-2), None]


@ks.api("nn.top_k", "math.top_k")
def top_k(input: Any, k: Any = 1, sorted: bool = True, name: str | None = None) -> Any:
    """The ``k`` largest entries of the last dimension: ``(values, indices)``."""
    values, indices = apply_op("TopKV2", name=name, input=input, k=k, sorted=sorted)
    return TopKV2(values, indices)


def _in_top_k_shape(op: Any) -> list[TensorShape]:
    p, t, k = (i.shape for i in op.inputs)
    if p.ndims is not None and p.ndims != 2:
        raise ValueError(f"Shape must be rank 2 but is rank {p.ndims} for '{op.name}'")
    if t.ndims is not None and t.ndims != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {t.ndims} for '{op.name}'")
    if k.ndims is not None and k.ndims != 0:
        raise ValueError(f"Shape must be rank 0 but is rank {k.ndims} for '{op.name}'")
    b = p.as_list()[0] if p.ndims is not None else None
    if t.ndims is not None and t.as_list()[0] is not None:
        if b is not None and b != t.as_list()[0]:
            raise ValueError(f"Dimensions must be equal, but are {b} and {t.as_list()[0]} "
                             f"for '{op.name}' (op: 'InTopKV2')")
        b = t.as_list()[0]
    return [TensorShape([b])]


ks.op(OpDef("InTopKV2", inputs=["predictions: float", "targets: T", "k: T"],
            outputs=["precision: bool"], attrs=["T: {int32, int64} = DT_INT32"],
            shape_fn=_in_top_k_shape, doc="Whether each target is in the top k predictions."))
ks.not_differentiable("InTopKV2")


@ks.kernel("InTopKV2")
def _in_top_k_kernel(ctx: Any) -> Any:
    xp = ctx.xp

    def in_top_k(pred: Any, targets: Any, k: Any) -> Any:
        if pred.ndim != 2 or targets.ndim != 1 or pred.shape[0] != targets.shape[0]:
            raise _invalid(f"predictions must be 2-dimensional and targets 1-dimensional "
                           f"with the same batch size, got {list(pred.shape)} and "
                           f"{list(targets.shape)}")
        b, n = pred.shape
        valid = (targets >= 0) & (targets < n)
        safe = xp.where(valid, targets, 0).astype(np.intp)
        tp = pred[xp.arange(b), safe]
        finite_row = xp.all(xp.isfinite(pred), axis=1)
        more = xp.sum(pred > tp[:, None], axis=1)
        return xp.asarray(valid & finite_row & (more < int(k)), dtype=np.bool_)

    return in_top_k


@ks.api("nn.in_top_k", "math.in_top_k")
def in_top_k(predictions: Any, targets: Any, k: Any, name: str | None = None) -> Tensor:
    """Whether ``targets[i]`` is among the top ``k`` of ``predictions[i]``."""
    with name_scope(name, "in_top_k"):
        targets = convert_to_tensor(targets, name="targets")
        if not isinstance(k, Tensor):
            k = convert_to_tensor(k, dtype=targets.dtype, name="k")
        return apply_op("InTopKV2", name=name, predictions=predictions, targets=targets, k=k)


def _sort_common(values: Any, axis: Any, direction: str, argsort: bool,
                 name: str | None, default: str) -> Tensor:
    tf = _tf()
    if direction not in ("ASCENDING", "DESCENDING"):
        raise ValueError(f"{direction!r} should be one of ['ASCENDING', 'DESCENDING']")
    with name_scope(name, default, [values]):
        values = convert_to_tensor(values, name="values")
        ax = constant_value(axis) if isinstance(axis, Tensor) else axis
        if ax is None or np.ndim(ax) != 0:
            raise ValueError(f"axis must be a constant scalar, got {axis}")
        ax = int(ax)
        rank = values.shape.ndims
        x = values if direction == "DESCENDING" else -values
        if ax in (-1,) or (rank is not None and ax == rank - 1):
            perm = None
        else:
            if rank is None:
                raise ValueError("sort along a non-last axis needs a known rank")
            ax = ax % rank
            perm = list(range(rank))
            perm[ax], perm[-1] = perm[-1], perm[ax]
            x = tf.transpose(x, perm)
        last = x.shape[-1] if x.shape.ndims else None
        last = getattr(last, "value", last)
        k = int(last) if last is not None else tf.shape(x)[-1]
        vals, idx = top_k(x, k)
        out = idx if argsort else vals
        if perm is not None:
            out = tf.transpose(out, perm)
        if not argsort and direction == "ASCENDING":
            out = -out
        return out


@ks.api("sort")
def sort(values: Any, axis: int = -1, direction: str = "ASCENDING",
         name: str | None = None) -> Tensor:
    """Sorts along ``axis`` (stable)."""
    return _sort_common(values, axis, direction, False, name, "sort")


@ks.api("argsort")
def argsort(values: Any, axis: int = -1, direction: str = "ASCENDING", stable: bool = False,
            name: str | None = None) -> Tensor:
    """int32 indices that sort ``values`` along ``axis`` (stable)."""
    return _sort_common(values, axis, direction, True, name, "argsort")


# =======================================================================================
# scatter updates of reference variables, CountUpTo
# =======================================================================================
def _scatter_shape(op: Any) -> list[TensorShape]:
    ref, idx, upd = (i.shape for i in op.inputs)
    if ref.ndims is not None and idx.ndims is not None and upd.ndims is not None \
            and upd.ndims != 0:
        want = idx.concatenate(ref[1:])
        if not want.is_compatible_with(upd):
            raise ValueError(f"Shapes must be equal: updates shape {upd} vs indices.shape + "
                             f"ref.shape[1:] = {want} for '{op.name}' (op: '{op.type}')")
    return [ref]


def _scatter_nd_shape(op: Any) -> list[TensorShape]:
    ref, idx, upd = (i.shape for i in op.inputs)
    if ref.ndims is not None and idx.ndims is not None and upd.ndims is not None:
        k = idx.as_list()[-1] if idx.ndims else None
        if k is not None:
            want = idx[:-1].concatenate(ref[k:])
            if not want.is_compatible_with(upd):
                raise ValueError(f"Dimensions mismatch: updates shape {upd} must be "
                                 f"{want} for '{op.name}' (op: '{op.type}')")
    return [ref]


for _op, _t, _lock in (("ScatterUpdate", "type", "true"), ("ScatterAdd", "numbertype", "false"),
                       ("ScatterSub", "numbertype", "false"),
                       ("ScatterMul", "numbertype", "false"),
                       ("ScatterDiv", "numbertype", "false")):
    ks.op(OpDef(_op, inputs=["ref: Ref(T)", "indices: Tindices", "updates: T"],
                outputs=["output_ref: Ref(T)"],
                attrs=[f"T: {_t}", "Tindices: {int32, int64}", f"use_locking: bool = {_lock}"],
                shape_fn=_scatter_shape, doc=f"{_op} on a reference variable."))
for _op, _t, _lock in (("ScatterNdUpdate", "type", "true"),
                       ("ScatterNdAdd", "numbertype", "false")):
    ks.op(OpDef(_op, inputs=["ref: Ref(T)", "indices: Tindices", "updates: T"],
                outputs=["output_ref: Ref(T)"],
                attrs=[f"T: {_t}", "Tindices: {int32, int64}", f"use_locking: bool = {_lock}"],
                shape_fn=_scatter_nd_shape, doc=f"{_op} on a reference variable."))


def _int_div_at(cur: Any, idx: Any, upd: Any) -> None:
    for i, u in zip(np.asarray(idx).reshape(-1).tolist(), upd):
        if np.any(u == 0):
            raise _invalid("Integer division by zero")
        a, b = cur[i], np.asarray(u, dtype=cur.dtype)
        q = np.abs(a) // np.abs(b)  # C (truncating) integer division
        cur[i] = np.where((a < 0) != (b < 0), -q, q).astype(cur.dtype)


def _scatter_kernel(kind: str) -> Any:
    def factory(ctx: Any) -> Any:
        is_int = ctx.attrs["T"].is_integer

        def apply(cur: Any, idx: Any, upd: Any) -> Any:
            n = cur.shape[0] if cur.ndim else 0
            flat = np.asarray(idx).reshape(-1)
            bad = np.nonzero((flat < 0) | (flat >= n))[0]
            if bad.size:
                j = int(bad[0])
                raise _invalid(f"indices[{j}] = {int(flat[j])} is not in [0, {n})")
            want = tuple(np.shape(idx)) + tuple(cur.shape[1:])
            upd = np.asarray(upd)
            if upd.ndim == 0:
                upd = np.broadcast_to(upd, want)
            elif upd.shape != want:
                raise _invalid(f"updates.shape {list(upd.shape)} must be indices.shape + "
                               f"params.shape[1:] = {list(want)}")
            upd = upd.reshape((flat.size,) + tuple(cur.shape[1:]))
            new = np.array(cur, copy=True)
            if kind == "update":
                new[flat] = upd
            elif kind == "add":
                np.add.at(new, flat, upd)
            elif kind == "sub":
                np.subtract.at(new, flat, upd)
            elif kind == "mul":
                np.multiply.at(new, flat, upd)
            elif is_int:
                _int_div_at(new, flat, upd)
            else:
                np.divide.at(new, flat, upd)
            return new

        def scatter(ref: Any, idx: Any, upd: Any) -> Any:
            with ref.lock:  # always: see state_ops on unlocked updates
                ref.value = _frozen(apply(ref.read(), idx, upd))
            return ref

        return scatter

    return factory


def _scatter_nd_kernel(kind: str) -> Any:
    def factory(ctx: Any) -> Any:

        def apply(cur: Any, idx: Any, upd: Any) -> Any:
            idx = np.asarray(idx)
            k = idx.shape[-1] if idx.ndim else 0
            if idx.ndim < 1 or k > cur.ndim:
                raise _invalid(f"indices.shape[-1] must be <= params rank, got indices shape "
                               f"{list(idx.shape)} and params shape {list(cur.shape)}")
            flat = idx.reshape(-1, k)
            lim = np.asarray(cur.shape[:k])
            bad = np.nonzero(np.any((flat < 0) | (flat >= lim), axis=1))[0]
            if bad.size:
                j = int(bad[0])
                raise _invalid(f"indices[{j}] = [{', '.join(str(int(v)) for v in flat[j])}] "
                               f"does not index into param shape {list(cur.shape)}")
            want = tuple(idx.shape[:-1]) + tuple(cur.shape[k:])
            upd = np.asarray(upd)
            if upd.shape != want:
                raise _invalid(f"updates shape {list(upd.shape)} must be {list(want)}")
            upd = upd.reshape((flat.shape[0],) + tuple(cur.shape[k:]))
            new = np.array(cur, copy=True)
            key = tuple(flat.T)
            if kind == "update":
                new[key] = upd
            else:
                np.add.at(new, key, upd)
            return new

        def scatter(ref: Any, idx: Any, upd: Any) -> Any:
            with ref.lock:  # always: see state_ops on unlocked updates
                ref.value = _frozen(apply(ref.read(), idx, upd))
            return ref

        return scatter

    return factory


for _op, _kind in (("ScatterUpdate", "update"), ("ScatterAdd", "add"), ("ScatterSub", "sub"),
                   ("ScatterMul", "mul"), ("ScatterDiv", "div")):
    ks.kernel(_op, device_type="CPU")(_scatter_kernel(_kind))
ks.kernel("ScatterNdUpdate", device_type="CPU")(_scatter_nd_kernel("update"))
ks.kernel("ScatterNdAdd", device_type="CPU")(_scatter_nd_kernel("add"))


def _scatter_api(op_type: str, default_lock: bool) -> Any:
    def fn(ref: Any, indices: Any, updates: Any, use_locking: bool = default_lock,
           name: str | None = None) -> Tensor:
        return apply_op(op_type, name=name, ref=_ref_of(ref), indices=indices,
                        updates=updates, use_locking=bool(use_locking))
    fn.__doc__ = f"Applies ``{op_type}`` to the reference variable ``ref``; returns ``ref``."
    return fn


scatter_update = ks.api("scatter_update")(_scatter_api("ScatterUpdate", True))
scatter_add = ks.api("scatter_add")(_scatter_api("ScatterAdd", False))
scatter_sub = ks.api("scatter_sub")(_scatter_api("ScatterSub", False))
scatter_mul = ks.api("scatter_mul")(_scatter_api("ScatterMul", False))
scatter_div = ks.api("scatter_div")(_scatter_api("ScatterDiv", False))
scatter_nd_update = ks.api("scatter_nd_update")(_scatter_api("ScatterNdUpdate", True))
scatter_nd_add = ks.api("scatter_nd_add")(_scatter_api("ScatterNdAdd", False))


def _count_shape(op: Any) -> list[TensorShape]:
    s = op.inputs[0].shape
    if s.ndims is not None and s.ndims != 0:
        raise ValueError(f"Shape must be rank 0 but is rank {s.ndims} for '{op.name}' "
                         f"(op: 'CountUpTo')")
    return [TensorShape([])]


ks.op(OpDef("CountUpTo", inputs=["ref: Ref(T)"], outputs=["output: T"],
            attrs=["limit: int", "T: {int32, int64}"], shape_fn=_count_shape,
            doc="Increments ref until it reaches limit; returns the old value."))
ks.not_differentiable("CountUpTo")


@ks.kernel("CountUpTo", device_type="CPU")
def _count_up_to_kernel(ctx: Any) -> Any:
    limit = int(ctx.attrs["limit"])
    np_t = ctx.output_dtypes[0].np

    def count(ref: Any) -> Any:
        with ref.lock:
            before = np.asarray(ref.read())
            if before >= limit:
                raise errors.OutOfRangeError(None, None, f"Reached limit of {limit}")
            ref.value = _frozen(np.asarray(before + 1, dtype=np_t))
        return before.astype(np_t)

    return count


@ks.api("count_up_to")
def count_up_to(ref: Any, limit: int, name: str | None = None) -> Tensor:
    """Increments the scalar variable ``ref`` until ``limit``; returns its old value."""
    return apply_op("CountUpTo", name=name, ref=_ref_of(ref), limit=int(limit))


# =======================================================================================
# CheckNumerics, EnsureShape and small composites
# =======================================================================================
ks.op(OpDef("CheckNumerics", inputs=["tensor: T"], outputs=["output: T"],
            attrs=["T: {bfloat16, half, float, double}", "message: string"],
            shape_fn=lambda op: [op.inputs[0].shape],
            doc="Passes tensor through; fails on NaN or Inf values."))


@ks.kernel("CheckNumerics")
def _check_numerics_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    message = ctx.attrs["message"]

    def check(x: Any) -> Any:
        has_nan = bool(xp.isnan(x).any())
        has_inf = bool(xp.isinf(x).any())
        if has_nan or has_inf:
            what = "Inf and NaN" if has_nan and has_inf else ("Inf" if has_inf else "NaN")
            raise _invalid(f"{message} : Tensor had {what} values")
        return x

    return check


@ks.gradient("CheckNumerics")
def _check_numerics_grad(op: Any, grad: Tensor) -> list[Any]:
    return [check_numerics(grad, "Not a number (NaN) or infinity (Inf) values detected "
                                 "in gradient. " + str(op.node_attrs["message"]))]


@ks.api("debugging.check_numerics", "check_numerics")
def check_numerics(tensor: Any, message: str, name: str | None = None) -> Tensor:
    """Passes ``tensor`` through, failing with ``message`` on NaN or Inf values."""
    return apply_op("CheckNumerics", name=name, tensor=tensor, message=message)


def _ensure_shape_shape(op: Any) -> list[TensorShape]:
    s = op.node_attrs.get("shape")
    want = unknown_shape() if s is None else as_shape(s)
    have = op.inputs[0].shape
    if not have.is_compatible_with(want):
        raise ValueError(f"Shapes must be compatible: {have} vs {want} for '{op.name}' "
                         f"(op: 'EnsureShape')")
    return [have.merge_with(want)]


ks.op(OpDef("EnsureShape", inputs=["input: T"], outputs=["output: T"],
            attrs=["shape: shape", "T: type"], shape_fn=_ensure_shape_shape,
            doc="Passes input through after checking its shape."))


@ks.kernel("EnsureShape")
def _ensure_shape_kernel(ctx: Any) -> Any:
    want = ctx.attrs.get("shape")
    want = unknown_shape() if want is None else as_shape(want)
    dims = None if want.ndims is None else list(want.as_list())
    text = "?" if dims is None else "[" + ",".join("?" if d is None else str(d)
                                                   for d in dims) + "]"

    def ensure(x: Any) -> Any:
        if dims is not None:
            ok = x.ndim == len(dims) and all(d is None or d == n for d, n in zip(dims, x.shape))
            if not ok:
                raise _invalid(f"Shape of tensor {ctx.node_name} [{','.join(map(str, x.shape))}]"
                               f" is not compatible with expected shape {text}.")
        return x

    return ensure


@ks.gradient("EnsureShape")
def _ensure_shape_grad(op: Any, grad: Tensor) -> list[Any]:
    return [grad]


@ks.api("ensure_shape")
def ensure_shape(x: Any, shape: Any, name: str | None = None) -> Tensor:
    """Passes ``x`` through, checking (and statically merging) its shape."""
    if not isinstance(shape, TensorShape):
        shape = as_shape(shape)
    return apply_op("EnsureShape", name=name, input=x, shape=shape)


@custom_gradient
def _swish(features: Tensor) -> Any:
    def grad(dy: Tensor) -> Tensor:
        # sigmoid(features) is recomputed once dy exists (the control dependency keeps it
        # from being shared with the forward pass), so the forward value can be freed
        with control_dependencies([dy]):
            sig = apply_op("Sigmoid", x=features)
        one = convert_to_tensor(np.array(1, dtype=features.dtype.base_dtype.np))
        return dy * (sig * (one + features * (one - sig)))

    return features * apply_op("Sigmoid", x=features), grad


@ks.api("nn.swish")
def swish(features: Any) -> Tensor:
    """``features * sigmoid(features)`` (``tf.nn.swish``). As in TF 1.15 it is a
    ``tf.custom_gradient`` function: the result is the output of an ``IdentityN``, the
    gradient recomputes the sigmoid, and there is no ``name`` argument."""
    return _swish(convert_to_tensor(features, name="features"))


@ks.api("math.reciprocal_no_nan")
def reciprocal_no_nan(x: Any, name: str | None = None) -> Tensor:
    """``1 / x``, with 0 where ``x`` is 0."""
    tf = _tf()
    with name_scope(name, "reciprocal_no_nan", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        one = tf.constant(1, dtype=x.dtype.base_dtype, name="one")
        return tf.div_no_nan(one, x, name=scope)


@ks.api("linalg.trace", "trace")
def trace(x: Any, name: str | None = None) -> Tensor:
    """Sum of the main diagonal of each innermost matrix of ``x``."""
    tf = _tf()
    with name_scope(name, "Trace", [x]) as name:
        x = convert_to_tensor(x, name="x")
        return tf.reduce_sum(tf.matrix_diag_part(x), [-1], name=name)


# =======================================================================================
# ReverseSequence
# =======================================================================================
def _reverse_sequence_shape(op: Any) -> list[TensorShape]:
    s, lens = op.inputs[0].shape, op.inputs[1].shape
    seq, batch = op.node_attrs["seq_dim"], op.node_attrs.get("batch_dim", 0)
    if lens.ndims is not None and lens.ndims != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {lens.ndims} for '{op.name}' "
                         f"(op: 'ReverseSequence')")
    if seq == batch:
        raise ValueError(f"batch_dim == seq_dim == {seq} for '{op.name}'")
    if s.ndims is None:
        return [s]
    if not (0 <= seq < s.ndims) or not (0 <= batch < s.ndims):
        raise ValueError(f"seq_dim {seq} and batch_dim {batch} must be in [0, {s.ndims}) "
                         f"for '{op.name}' (op: 'ReverseSequence')")
    dims = list(s.as_list())
    n = lens.as_list()[0] if lens.ndims == 1 else None
    if n is not None and dims[batch] is not None and n != dims[batch]:
        raise ValueError(f"Dimensions must be equal, but are {dims[batch]} and {n} for "
                         f"'{op.name}' (op: 'ReverseSequence')")
    if dims[batch] is None:
        dims[batch] = n
    return [TensorShape(dims)]


ks.op(OpDef("ReverseSequence", inputs=["input: T", "seq_lengths: Tlen"],
            outputs=["output: T"],
            attrs=["seq_dim: int", "batch_dim: int = 0", "T: type",
                   "Tlen: {int32, int64} = DT_INT64"],
            shape_fn=_reverse_sequence_shape,
            doc="Reverses the first seq_lengths[b] entries along seq_dim of each batch b."))


@ks.kernel("ReverseSequence")
def _reverse_sequence_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    seq, batch = int(ctx.attrs["seq_dim"]), int(ctx.attrs.get("batch_dim", 0))

    def reverse(x: Any, lens: Any) -> Any:
        if lens.ndim != 1 or x.ndim <= max(seq, batch) or lens.shape[0] != x.shape[batch]:
            raise _invalid(f"seq_lens must be 1-D with length input.dims({batch}); got "
                           f"seq_lens shape {list(lens.shape)}, input shape {list(x.shape)}")
        n = x.shape[seq]
        for b, v in enumerate(lens.tolist()):
            if v < 0:
                raise _invalid(f"seq_lens({b}) < 0")
            if v > n:
                raise _invalid(f"seq_lens({b}) > input.dims({seq})")
        j = xp.arange(n)[None, :]
        ln = xp.asarray(lens).astype(np.intp)[:, None]
        src = xp.where(j < ln, ln - 1 - j, j)
        if batch > seq:
            src = src.T
        shape = [1] * x.ndim
        shape[batch], shape[seq] = x.shape[batch], n
        idx = xp.broadcast_to(src.reshape(shape), x.shape)
        return xp.take_along_axis(x, idx, axis=seq)

    return reverse


@ks.gradient("ReverseSequence")
def _reverse_sequence_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("ReverseSequence", input=grad, seq_lengths=op.inputs[1],
                     seq_dim=op.node_attrs["seq_dim"],
                     batch_dim=op.node_attrs.get("batch_dim", 0)), None]


@ks.api("reverse_sequence")
def reverse_sequence(input: Any, seq_lengths: Any, seq_axis: int | None = None,
                     batch_axis: int | None = None, name: str | None = None,
                     seq_dim: int | None = None, batch_dim: int | None = None) -> Tensor:
    """Reverses variable-length slices: the first ``seq_lengths[b]`` entries along
    ``seq_axis`` of each batch ``b``."""
    if seq_axis is not None and seq_dim is not None:
        raise ValueError("Cannot specify both 'seq_axis' and 'seq_dim'")
    if batch_axis is not None and batch_dim is not None:
        raise ValueError("Cannot specify both 'batch_axis' and 'batch_dim'")
    seq = seq_axis if seq_axis is not None else seq_dim
    batch = batch_axis if batch_axis is not None else batch_dim
    if seq is None:
        raise TypeError("reverse_sequence() requires seq_axis")
    return apply_op("ReverseSequence", name=name, input=input, seq_lengths=seq_lengths,
                    seq_dim=int(seq), batch_dim=0 if batch is None else int(batch))
