"""Functional scatters (``tf.tensor_scatter_update/add/sub``), the reference-variable
scatters TF 1.15 has beyond extra_ops' (``scatter_max``, ``scatter_min``,
``scatter_nd_sub``), ``tf.roll`` and ``tf.bitcast``."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowrt import dtypes as _dt
from flowrt.graph import Tensor, apply_op, convert_to_tensor
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import host_reader, ks
from ._common import invalid as _invalid
from .state_ops import _frozen, _ref_of


def _nd_positions(shape: tuple[int, ...], idx: np.ndarray, upd: np.ndarray
                  ) -> tuple[tuple, Any]:
    """The index tuple of ``idx`` (``[..., k]``, in host memory) into an array of
    ``shape`` and the updates reshaped to one row per index, checked as TF's scatter_nd
    kernels check."""
    k = idx.shape[-1] if idx.ndim else 0
    if idx.ndim < 1 or k > len(shape):
        raise _invalid(f"indices.shape[-1] must be <= params rank, got indices shape "
                       f"{list(idx.shape)} and params shape {list(shape)}")
    flat = idx.reshape(-1, k).astype(np.int64)
    lim = np.asarray(shape[:k], np.int64)
    bad = np.nonzero(np.any((flat < 0) | (flat >= lim), axis=1))[0]
    if bad.size:
        j = int(bad[0])
        raise _invalid(f"indices[{j}] = [{', '.join(str(int(v)) for v in flat[j])}] does "
                       f"not index into param shape {list(shape)}")
    want = tuple(idx.shape[:-1]) + tuple(shape[k:])
    if tuple(upd.shape) != want:
        raise _invalid(f"updates shape {list(upd.shape)} must be indices.shape[:-1] + "
                       f"shape[indices.shape[-1]:] = {list(want)}")
    return tuple(flat.T), upd.reshape((flat.shape[0],) + tuple(shape[k:]))


# -- tensor_scatter_update / add / sub ---------------------------------------------------
def _tensor_scatter_shape(op: Any) -> list[TensorShape]:
    return [op.inputs[0].shape]


for _op in ("TensorScatterUpdate", "TensorScatterAdd", "TensorScatterSub"):
    ks.op(OpDef(_op, inputs=["tensor: T", "indices: Tindices", "updates: T"],
                outputs=["output: T"], attrs=["T: type", "Tindices: {int32, int64}"],
                shape_fn=_tensor_scatter_shape,
                doc=f"{_op}: a copy of ``tensor`` with ``updates`` scattered in by "
                    "``indices`` (as scatter_nd)."))


def _tensor_scatter_kernel(kind: str) -> Callable[[Any], Callable]:
    def factory(ctx: Any) -> Callable:
        host = host_reader(ctx)

        def scatter(tensor: Any, indices: Any, updates: Any) -> Any:
            t = host(tensor)
            key, upd = _nd_positions(tuple(t.shape), host(indices), host(updates))
            out = np.array(t, copy=True)
            if kind == "update":
                out[key] = upd
            elif kind == "add":
                np.add.at(out, key, upd)
            else:
                np.subtract.at(out, key, upd)
            return out

        return scatter

    return factory


for _op, _kind in (("TensorScatterUpdate", "update"), ("TensorScatterAdd", "add"),
                   ("TensorScatterSub", "sub")):
    ks.kernel(_op, device_type="CPU")(_tensor_scatter_kernel(_kind))


def _tensor_scatter_api(op_type: str, doc: str) -> Callable[..., Tensor]:
    def fn(tensor: Any, indices: Any, updates: Any, name: str | None = None) -> Tensor:
        tensor = convert_to_tensor(tensor, name="tensor")
        updates = convert_to_tensor(updates, dtype=tensor.dtype, name="updates")
        return apply_op(op_type, name=name, tensor=tensor, indices=indices,
                        updates=updates)
    fn.__doc__ = doc
    return fn


tensor_scatter_update = ks.api("tensor_scatter_update", "tensor_scatter_nd_update")(
    _tensor_scatter_api("TensorScatterUpdate", "``tensor`` with the elements at "
                        "``indices`` replaced by ``updates``."))
tensor_scatter_add = ks.api("tensor_scatter_add", "tensor_scatter_nd_add")(
    _tensor_scatter_api("TensorScatterAdd", "``tensor`` with ``updates`` added at "
                        "``indices`` (repeated indices add up)."))
tensor_scatter_sub = ks.api("tensor_scatter_sub", "tensor_scatter_nd_sub")(
    _tensor_scatter_api("TensorScatterSub", "``tensor`` with ``updates`` subtracted at "
                        "``indices``."))


def _gather_nd(grad: Any, indices: Any) -> Any:
    return apply_op("GatherNd", params=grad, indices=indices)


@ks.gradient("TensorScatterUpdate")
def _tensor_scatter_update_grad(op: Any, grad: Any) -> list[Any]:
    indices = op.inputs[1]
    zeros = apply_op("ZerosLike", x=op.inputs[2])
    return [tensor_scatter_update(grad, indices, zeros), None, _gather_nd(grad, indices)]


@ks.gradient("TensorScatterAdd")
def _tensor_scatter_add_grad(op: Any, grad: Any) -> list[Any]:
    return [grad, None, _gather_nd(grad, op.inputs[1])]


@ks.gradient("TensorScatterSub")
def _tensor_scatter_sub_grad(op: Any, grad: Any) -> list[Any]:
    return [grad, None, apply_op("Neg", x=_gather_nd(grad, op.inputs[1]))]


# -- reference-variable scatters: max, min, nd_sub ---------------------------------------
for _op, _shape in (("ScatterMax", "rows"), ("ScatterMin", "rows"), ("ScatterNdSub", "nd")):
    ks.op(OpDef(_op, inputs=["ref: Ref(T)", "indices: Tindices", "updates: T"],
                outputs=["output_ref: Ref(T)"],
                attrs=["T: numbertype" if _shape == "nd" else "T: {half, bfloat16, float, "
                       "double, int32, int64}", "Tindices: {int32, int64}",
                       "use_locking: bool = false"],
                shape_fn=lambda op: [op.inputs[0].shape],
                doc=f"{_op} on a reference variable."))


def _ref_scatter_kernel(kind: str) -> Callable[[Any], Callable]:
    def factory(ctx: Any) -> Callable:
        host = host_reader(ctx)

        def apply(cur: np.ndarray, idx: Any, upd: Any) -> np.ndarray:
            idx, upd = host(idx), host(upd).astype(cur.dtype, copy=False)
            new = np.array(cur, copy=True)
            if kind == "nd_sub":
                key, rows = _nd_positions(tuple(cur.shape), idx, upd)
                np.subtract.at(new, key, rows)
                return new
            flat = idx.reshape(-1)
            n = cur.shape[0] if cur.ndim else 0
            bad = np.nonzero((flat < 0) | (flat >= n))[0]
            if bad.size:
                j = int(bad[0])
                raise _invalid(f"indices[{j}] = {int(flat[j])} is not in [0, {n})")
            want = tuple(np.shape(idx)) + tuple(cur.shape[1:])
            if upd.ndim == 0:
                upd = np.broadcast_to(upd, want)
            elif upd.shape != want:
                raise _invalid(f"updates.shape {list(upd.shape)} must be indices.shape + "
                               f"params.shape[1:] = {list(want)}")
            rows = upd.reshape((flat.size,) + tuple(cur.shape[1:]))
            (np.maximum if kind == "max" else np.minimum).at(new, flat, rows)
            return new

        def scatter(ref: Any, idx: Any, upd: Any) -> Any:
            with ref.lock:
                ref.value = _frozen(apply(ref.read(), idx, upd))
            return ref

        return scatter

    return factory


for _op, _kind in (("ScatterMax", "max"), ("ScatterMin", "min"), ("ScatterNdSub", "nd_sub")):
    ks.kernel(_op, device_type="CPU")(_ref_scatter_kernel(_kind))


def _ref_scatter_api(op_type: str, doc: str) -> Callable[..., Tensor]:
    def fn(ref: Any, indices: Any, updates: Any, use_locking: bool = False,
           name: str | None = None) -> Tensor:
        return apply_op(op_type, name=name, ref=_ref_of(ref), indices=indices,
                        updates=updates, use_locking=bool(use_locking))
    fn.__doc__ = doc
    return fn


scatter_max = ks.api("scatter_max")(_ref_scatter_api(
    "ScatterMax", "``ref[indices] = max(ref[indices], updates)``; returns ``ref``."))
scatter_min = ks.api("scatter_min")(_ref_scatter_api(
    "ScatterMin", "``ref[indices] = min(ref[indices], updates)``; returns ``ref``."))
scatter_nd_sub = ks.api("scatter_nd_sub")(_ref_scatter_api(
    "ScatterNdSub", "``updates`` subtracted from ``ref`` at the scatter_nd ``indices``; "
    "returns ``ref``."))
ks.not_differentiable("ScatterMax", "ScatterMin", "ScatterNdSub")


# -- roll --------------------------------------------------------------------------------
ks.op(OpDef("Roll", inputs=["input: T", "shift: Tshift", "axis: Taxis"],
            outputs=["output: T"],
            attrs=["T: type", "Tshift: {int32, int64}", "Taxis: {int32, int64}"],
            shape_fn=lambda op: [op.inputs[0].shape],
            doc="Elements shifted along axes, wrapping around."))


@ks.kernel("Roll", host_memory=("shift", "axis"))
def _roll_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    host = host_reader(ctx)

    def roll(x: Any, shift: Any, axis: Any) -> Any:
        s, a = host(shift), host(axis)
        if s.ndim > 1 or a.ndim > 1 or s.shape != a.shape:
            raise _invalid(f"shift and axis must have the same size, got shift shape "
                           f"{list(s.shape)} and axis shape {list(a.shape)}")
        s, a = s.reshape(-1).tolist(), a.reshape(-1).tolist()
        nd = x.ndim
        for ax in a:
            if not -nd <= ax < nd:
                raise _invalid(f"axis {ax} is out of range for a tensor of rank {nd}")
        return xp.roll(x, s, [ax % nd for ax in a]) if a else x

    return roll


@ks.api("roll", "manip.roll")
def roll(input: Any, shift: Any, axis: Any, name: str | None = None) -> Tensor:
    """``input`` with its elements shifted by ``shift`` along ``axis`` (both scalars or
    1-D of one length), wrapping around; several shifts of one axis add up."""
    return apply_op("Roll", name=name, input=input, shift=shift, axis=axis)


@ks.gradient("Roll")
def _roll_grad(op: Any, grad: Any) -> list[Any]:
    return [roll(grad, apply_op("Neg", x=op.inputs[1]), op.inputs[2]), None, None]


# -- bitcast -----------------------------------------------------------------------------
def _bitcast_shape(op: Any) -> list[TensorShape]:
    src = op.inputs[0].shape
    a = op.inputs[0].dtype.base_dtype.size
    b = _dt.as_dtype(op.node_attrs["type"]).size
    if src.ndims is None:
        return [unknown_shape()]
    dims = list(src.as_tuple())
    if a == b:
        return [TensorShape(dims)]
    if a > b:
        return [TensorShape(dims + [a // b])]
    if not dims or (dims[-1] is not None and dims[-1] != b // a):
        raise ValueError(f"Cannot bitcast from {op.inputs[0].dtype.name} to "
                         f"{_dt.as_dtype(op.node_attrs['type']).name}: the last dimension "
                         f"must be {b // a} for '{op.name}' (op: 'Bitcast')")
    return [TensorShape(dims[:-1])]


ks.op(OpDef("Bitcast", inputs=["input: T"], outputs=["output: type"],
            attrs=["T: {bfloat16, half, float, double, int64, int32, uint8, uint16, "
                   "uint32, uint64, int8, int16, complex64, complex128, qint8, quint8, "
                   "qint16, quint16, qint32}",
                   "type: {bfloat16, half, float, double, int64, int32, uint8, uint16, "
                   "uint32, uint64, int8, int16, complex64, complex128, qint8, quint8, "
                   "qint16, quint16, qint32}"],
            shape_fn=_bitcast_shape,
            doc="The same bytes seen as another dtype (the shape gains or loses a last "
                "dimension when the sizes differ)."))


@ks.kernel("Bitcast", device_type="CPU")
def _bitcast_kernel(ctx: Any) -> Callable:
    out_np = ctx.output_dtypes[0].np

    def bitcast(x: Any) -> Any:
        x = np.ascontiguousarray(x)
        a, b = x.dtype.itemsize, np.dtype(out_np).itemsize
        if a < b and (x.ndim == 0 or x.shape[-1] != b // a):
            raise _invalid(f"Cannot bitcast from {x.dtype} to {np.dtype(out_np)}: shape "
                           f"{list(x.shape)} does not end in {b // a}")
        y = x.view(out_np)
        if a > b:
            return y.reshape(x.shape + (a // b,))
        if a < b:
            return y.reshape(x.shape[:-1])
        return y

    return bitcast


@ks.api("bitcast")
def bitcast(input: Any, type: Any, name: str | None = None) -> Tensor:
    """The bytes of ``input`` as dtype ``type``: a larger element size consumes a last
    dimension of the size ratio, a smaller one appends it (TF's ``Bitcast``)."""
    return apply_op("Bitcast", name=name, input=convert_to_tensor(input),
                    type=_dt.as_dtype(type))


ks.not_differentiable("Bitcast")
