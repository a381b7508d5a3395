"""tf.SparseTensor and tf.sparse: the sparse ops of TF 1.15 with numpy kernels.

A sparse tensor travels as its three dense components (``indices`` int64 ``[N, rank]``,
``values`` ``[N]``, ``dense_shape`` int64 ``[rank]``); every op here takes and returns
them as separate tensors under TF's op names (``SparseToDense``, ``SparseAdd``,
``SparseReorder`` ...), and the Python functions wrap them in
:class:`~flowrt.framework.sparse_tensor.SparseTensor`. Kernels run on the host (as most
of TF's sparse kernels do); gradients follow TF's ``sparse_grad.py``. Ops that assume
row-major ("canonical") order of the indices say so, as in TF.
"""
from __future__ import annotations

import itertools
import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.framework.sparse_tensor import (SparseTensor, SparseTensorValue,
                                            constant_value_as_shape,
                                            convert_to_tensor_or_sparse_tensor)
from flowrt.graph import Tensor, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import constant_value, ks
from ._common import invalid as _invalid
from .string_ops import fingerprint64

__all__ = ["SparseTensor", "SparseTensorValue", "sparse_tensor_to_dense", "sparse_to_dense",
           "sparse_reorder", "sparse_add", "sparse_concat", "sparse_reshape", "sparse_slice",
           "sparse_placeholder"]

_I64 = _dt.int64


def _tf() -> Any:
    import flowrt
    return flowrt


# =======================================================================================
# static shapes
# =======================================================================================
def _vec_len(t: Tensor) -> int | None:
    """The static length of a vector tensor (a sparse tensor's rank from its shape)."""
    s = t.shape
    return s.as_list()[0] if s.ndims == 1 else None


def _shape_from_tensor(t: Tensor) -> TensorShape:
    """The static shape a shape tensor describes (TF's ``MakeShapeFromShapeTensor``)."""
    v = constant_value(t)
    if v is not None and np.ndim(v) == 1:
        return TensorShape([int(d) if d >= 0 else None for d in np.asarray(v).tolist()])
    return constant_value_as_shape(t)


def _dim0(shape_t: Tensor) -> int | None:
    s = _shape_from_tensor(shape_t)
    return s.as_list()[0] if s.ndims else None


def _sparse_outputs(rank: int | None) -> list[TensorShape]:
    return [TensorShape([None, rank]), TensorShape([None]), TensorShape([rank])]


def _rank_of(op: Any, shape_input: int) -> int | None:
    r = _vec_len(op.inputs[shape_input])
    if r is None:
        d = op.inputs[0].shape
        if d.ndims == 2:
            r = d.as_list()[1]
    return r


# =======================================================================================
# kernel helpers
# =======================================================================================
def _fmt(row: Any) -> str:
    return "[" + ",".join(str(int(x)) for x in np.asarray(row).reshape(-1)) + "]"


def _check_sparse(ind: Any, vals: Any, shape: Any, who: str = "input") -> None:
    """Validate the components of a sparse tensor at run time (TF's messages)."""
    if ind.ndim != 2:
        raise _invalid(f"{who} indices should be a matrix but received shape "
                       f"{list(ind.shape)}")
    if vals.ndim != 1:
        raise _invalid(f"{who} values should be a vector but received shape "
                       f"{list(vals.shape)}")
    if shape.ndim != 1:
        raise _invalid(f"{who} shape should be a vector but received shape "
                       f"{list(shape.shape)}")
    if ind.shape[0] != vals.shape[0]:
        raise _invalid(f"Expected {ind.shape[0]} non-empty {who} values, got "
                       f"{vals.shape[0]}")
    if ind.shape[1] != shape.shape[0]:
        raise _invalid(f"{who} indices and shape disagree on the rank: indices have "
                       f"{ind.shape[1]} columns, shape has {shape.shape[0]} entries")


def _row_order(ind: np.ndarray) -> np.ndarray:
    """The stable permutation sorting the rows of ``ind`` lexicographically."""
    if ind.shape[1] == 0 or ind.shape[0] == 0:
        return np.arange(ind.shape[0])
    return np.lexsort(ind.T[::-1])


def _row_keys(ind: np.ndarray) -> list[tuple[int, ...]]:
    return [tuple(r) for r in np.asarray(ind).tolist()]


def _positions(query: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """For each row of ``query``, its position among the rows of ``ref`` (-1: absent)."""
    where = {k: i for i, k in enumerate(_row_keys(ref))}
    return np.array([where.get(k, -1) for k in _row_keys(query)], dtype=np.int64)


def _check_order_and_bounds(ind: np.ndarray, shape: np.ndarray) -> None:
    """TF's ``IndicesValid``: each index in bounds, then after the previous one in
    row-major order (neither before it nor equal); the first failure raises."""
    n, nd = ind.shape
    if n == 0:
        return
    oob = np.any((ind < 0) | (ind >= shape[None, :]), axis=1)
    repeated = np.zeros(n, bool)
    unordered = np.zeros(n, bool)
    if n > 1:
        if nd == 0:
            repeated[1:] = True
        else:
            neq = ind[:-1] != ind[1:]
            differ = neq.any(axis=1)
            first = neq.argmax(axis=1)
            rows = np.arange(n - 1)
            less = ind[1:][rows, first] < ind[:-1][rows, first]
            repeated[1:] = ~differ
            unordered[1:] = differ & less
    bad = np.nonzero(oob | repeated | unordered)[0]
    if not bad.size:
        return
    i = int(bad[0])
    if oob[i]:
        raise _invalid(f"indices[{i}] = {_fmt(ind[i])} is out of bounds: need 0 <= index < "
                       f"{_fmt(shape)}")
    if repeated[i]:
        raise _invalid(f"indices[{i}] = {_fmt(ind[i])} is repeated")
    raise _invalid(f"indices[{i}] = {_fmt(ind[i])} is out of order. Many sparse ops require "
                   "sorted indices.\n    Use `tf.sparse.reorder` to create a correctly "
                   "ordered copy.\n\n")


def _strides(shape: np.ndarray) -> np.ndarray:
    s = np.ones(len(shape), dtype=np.int64)
    for i in range(len(shape) - 2, -1, -1):
        s[i] = s[i + 1] * shape[i + 1]
    return s


def _unravel(lin: np.ndarray, shape: np.ndarray) -> np.ndarray:
    out = np.zeros((lin.shape[0], len(shape)), dtype=np.int64)
    rem = lin.astype(np.int64)
    for i, st in enumerate(_strides(shape)):
        out[:, i] = rem // st if st else 0
        rem = rem - out[:, i] * st
    return out


def _i64(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


# =======================================================================================
# SparseToDense
# =======================================================================================
def _sparse_to_dense_shape(op: Any) -> list[TensorShape]:
    return [_shape_from_tensor(op.inputs[1])]


ks.op(OpDef("SparseToDense",
            inputs=["sparse_indices: Tindices", "output_shape: Tindices", "sparse_values: T",
                    "default_value: T"],
            outputs=["dense: T"],
            attrs=["validate_indices: bool = true", "T: type", "Tindices: {int32, int64}"],
            shape_fn=_sparse_to_dense_shape,
            doc="A dense tensor with the given values at the given indices."))


@ks.kernel("SparseToDense", device_type="CPU")
def _sparse_to_dense_kernel(ctx: Any) -> Any:
    validate = ctx.attrs.get("validate_indices", True)

    def to_dense(ind: Any, oshape: Any, vals: Any, default: Any) -> Any:
        if ind.ndim > 2:
            raise _invalid(f"sparse_indices should be a scalar, vector, or matrix, got shape "
                           f"{list(ind.shape)}")
        n = ind.shape[0] if ind.ndim > 0 else 1
        nd = ind.shape[1] if ind.ndim > 1 else 1
        if oshape.ndim != 1:
            raise _invalid(f"output_shape should be a vector, got shape {list(oshape.shape)}")
        if oshape.shape[0] != nd:
            raise _invalid(f"output_shape has incorrect number of elements: "
                           f"{oshape.shape[0]} should be: {nd}")
        if not (vals.ndim == 0 or (vals.ndim == 1 and vals.shape[0] == n)):
            raise _invalid(f"sparse_values has incorrect shape {list(vals.shape)}, should be "
                           f"[] or [{n}]")
        if default.ndim != 0:
            raise _invalid(f"default_value should be a scalar, got shape "
                           f"{list(default.shape)}")
        shape = _i64(oshape)
        if np.any(shape < 0):
            raise _invalid(f"Dimension -1 must be >= 0 in output_shape {_fmt(shape)}")
        idx = _i64(ind).reshape(n, nd)
        if validate:
            _check_order_and_bounds(idx, shape)
        elif n and np.any((idx < 0) | (idx >= shape[None, :])):
            raise _invalid(f"Indices are not valid (out of bounds).  Shape: {_fmt(shape)}")
        out = np.full(tuple(shape.tolist()), default, dtype=vals.dtype)
        if n:
            out[tuple(idx.T)] = vals
        return out

    return to_dense


@ks.gradient("SparseToDense")
def _sparse_to_dense_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    ind, _, vals, _ = op.inputs
    if ind.shape.ndims == 1:
        ind = tf.expand_dims(ind, 1)
    elif ind.shape.ndims == 0:
        ind = tf.reshape(ind, [1, 1])
    vgrad = tf.gather_nd(grad, ind)
    dgrad = tf.reduce_sum(grad) - tf.reduce_sum(vgrad)
    if vals.shape.ndims == 0:
        vgrad = tf.reduce_sum(vgrad)
    return [None, None, vgrad, dgrad]


@ks.api("sparse_to_dense")
def sparse_to_dense(sparse_indices: Any, output_shape: Any, sparse_values: Any,
                    default_value: Any = 0, validate_indices: bool = True,
                    name: str | None = None) -> Tensor:
    """A dense tensor of ``output_shape`` holding ``sparse_values`` at ``sparse_indices``
    (a scalar, a vector of indices into a 1-D output, or an ``[N, rank]`` matrix) and
    ``default_value`` elsewhere. With ``validate_indices`` the indices must be in
    row-major order without repeats."""
    return apply_op("SparseToDense", name=name, sparse_indices=sparse_indices,
                    output_shape=output_shape, sparse_values=sparse_values,
                    default_value=default_value, validate_indices=validate_indices)


def _convert_sparse(sp_input: Any) -> SparseTensor:
    if isinstance(sp_input, SparseTensorValue):
        return SparseTensor.from_value(sp_input)
    if not isinstance(sp_input, SparseTensor):
        raise TypeError("Input must be a SparseTensor.")
    return sp_input


def _convert_sparse_list(sp_inputs: Any) -> list[SparseTensor]:
    if not isinstance(sp_inputs, (list, tuple)):
        raise TypeError("Inputs must be a list or tuple.")
    return [_convert_sparse(s) for s in sp_inputs]


@ks.api("sparse.to_dense", "sparse_tensor_to_dense")
def sparse_tensor_to_dense(sp_input: Any, default_value: Any = None,
                           validate_indices: bool = True, name: str | None = None) -> Tensor:
    """The dense tensor a SparseTensor stands for (``default_value``, default 0, at
    the missing positions)."""
    sp = _convert_sparse(sp_input)
    if default_value is None:
        default_value = _tf().zeros([], dtype=sp.dtype)
    return apply_op("SparseToDense", name=name, sparse_indices=sp.indices,
                    output_shape=sp.dense_shape, sparse_values=sp.values,
                    default_value=default_value, validate_indices=validate_indices)


@ks.api("sparse.from_dense")
def from_dense(tensor: Any, name: str | None = None) -> SparseTensor:
    """A SparseTensor of the non-zero entries of a dense tensor."""
    tf = _tf()
    with name_scope(name, "dense_to_sparse"):
        tensor = convert_to_tensor(tensor)
        indices = tf.where_v2(tf.not_equal(tensor, tf.zeros_like(tensor)))
        values = tf.gather_nd(tensor, indices)
        shape = tf.shape(tensor, out_type=_I64)
        return SparseTensor(indices, values, shape)


# =======================================================================================
# SparseReorder
# =======================================================================================
def _reorder_shape(op: Any) -> list[TensorShape]:
    return _sparse_outputs(_rank_of(op, 2))[:2]


ks.op(OpDef("SparseReorder",
            inputs=["input_indices: int64", "input_values: T", "input_shape: int64"],
            outputs=["output_indices: int64", "output_values: T"], attrs=["T: type"],
            shape_fn=lambda op: [op.inputs[0].shape.merge_with(TensorShape([None, None])),
                                 op.inputs[1].shape.merge_with(TensorShape([None]))],
            doc="The same sparse tensor with its indices in row-major order."))


@ks.kernel("SparseReorder", device_type="CPU")
def _reorder_kernel(ctx: Any) -> Any:
    def reorder(ind: Any, vals: Any, shape: Any) -> Any:
        _check_sparse(ind, vals, shape)
        order = _row_order(ind)
        return np.ascontiguousarray(ind[order]), np.ascontiguousarray(vals[order])

    return reorder


@ks.gradient("SparseReorder")
def _reorder_grad(op: Any, _ind_grad: Any, vals_grad: Tensor) -> list[Any]:
    tf = _tf()
    ind, shape = op.inputs[0], op.inputs[2]
    entries = tf.range(tf.shape(ind)[0])
    ordered = sparse_reorder(SparseTensor(ind, entries, shape))
    inv = tf.invert_permutation(ordered.values)
    return [None, tf.gather(vals_grad, inv), None]


@ks.api("sparse.reorder", "sparse_reorder")
def sparse_reorder(sp_input: Any, name: str | None = None) -> SparseTensor:
    """The same sparse tensor with its entries in row-major (canonical) order."""
    sp = _convert_sparse(sp_input)
    ind, vals = apply_op("SparseReorder", name=name, input_indices=sp.indices,
                         input_values=sp.values, input_shape=sp.dense_shape)
    if sp.get_shape().is_fully_defined():
        return SparseTensor(ind, vals, sp.get_shape().as_list())
    out = SparseTensor(ind, vals, _tf().identity(sp.dense_shape))
    out.set_shape(sp.shape)
    return out


# =======================================================================================
# SparseAdd, SparseAddGrad, SparseTensorDenseAdd
# =======================================================================================
ks.op(OpDef("SparseAdd",
            inputs=["a_indices: int64", "a_values: T", "a_shape: int64", "b_indices: int64",
                    "b_values: T", "b_shape: int64", "thresh: Treal"],
            outputs=["sum_indices: int64", "sum_values: T", "sum_shape: int64"],
            attrs=["T: numbertype", "Treal: realnumbertype"],
            shape_fn=lambda op: _sparse_outputs(_rank_of(op, 2)),
            doc="The sum of two sparse tensors; sums below thresh in magnitude dropped."),
      OpDef("SparseAddGrad",
            inputs=["backprop_val_grad: T", "a_indices: int64", "b_indices: int64",
                    "sum_indices: int64"],
            outputs=["a_val_grad: T", "b_val_grad: T"], attrs=["T: numbertype"],
            shape_fn=lambda op: [TensorShape([op.inputs[1].shape[0] if
                                              op.inputs[1].shape.ndims else None]),
                                 TensorShape([op.inputs[2].shape[0] if
                                              op.inputs[2].shape.ndims else None])],
            doc="The gradients of SparseAdd's two value inputs."),
      OpDef("SparseTensorDenseAdd",
            inputs=["a_indices: Tindices", "a_values: T", "a_shape: Tindices", "b: T"],
            outputs=["output: T"], attrs=["T: numbertype", "Tindices: {int32, int64}"],
            shape_fn=lambda op: [op.inputs[3].shape],
            doc="A dense tensor plus a sparse one."))
ks.not_differentiable("SparseAddGrad")


def _check_same_shape(ashape: np.ndarray, bshape: np.ndarray) -> None:
    if ashape.shape != bshape.shape:
        raise _invalid(f"Operands do not have the same ranks; got shapes: {_fmt(ashape)} and "
                       f"{_fmt(bshape)}")
    if not np.array_equal(ashape, bshape):
        raise _invalid(f"Operands' shapes do not match: got {_fmt(ashape)} and "
                       f"{_fmt(bshape)} for sparse tensor A and B")


@ks.kernel("SparseAdd", device_type="CPU")
def _sparse_add_kernel(ctx: Any) -> Any:
    def add(ai: Any, av: Any, ashape: Any, bi: Any, bv: Any, bshape: Any, thresh: Any) -> Any:
        _check_sparse(ai, av, ashape, "a")
        _check_sparse(bi, bv, bshape, "b")
        if np.ndim(thresh) != 0:
            raise _invalid(f"The magnitude threshold must be a scalar: got shape "
                           f"{list(np.shape(thresh))}")
        _check_same_shape(ashape, bshape)
        both = np.concatenate([ai, bi]).reshape(-1, ai.shape[1])
        if both.shape[0] == 0:
            return (np.zeros((0, ai.shape[1]), np.int64), av[:0].copy(), ashape.copy())
        rows, inv = np.unique(both, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        out = np.zeros(rows.shape[0], dtype=av.dtype)
        count = np.zeros(rows.shape[0], dtype=np.int64)
        np.add.at(out, inv[:ai.shape[0]], av)
        np.add.at(out, inv[ai.shape[0]:], bv)
        np.add.at(count, inv, 1)
        keep = (count < 2) | (np.abs(out) >= thresh)
        return np.ascontiguousarray(rows[keep]), out[keep], ashape.copy()

    return add


@ks.kernel("SparseAddGrad", device_type="CPU")
def _sparse_add_grad_kernel(ctx: Any) -> Any:
    def add_grad(g: Any, ai: Any, bi: Any, si: Any) -> Any:
        if any(np.ndim(i) != 2 for i in (ai, bi, si)):
            raise errors.InvalidArgumentError(
                None, None, f"Input indices should be matrices but received shapes: "
                f"{list(np.shape(ai))}, {list(np.shape(bi))} and {list(np.shape(si))}")
        if np.ndim(g) != 1:
            raise errors.InvalidArgumentError(
                None, None, f"Input backprop_val_grad should be a vector but received "
                f"shape: {list(np.shape(g))}")
        if g.shape[0] != si.shape[0]:
            raise errors.InvalidArgumentError(
                None, None, f"Expected backprop_val_grad [{g.shape[0]}] to have the same "
                f"number of elements as sum_indices [{si.shape[0]}]")
        pa, pb = _positions(ai, si), _positions(bi, si)
        ga = np.where(pa >= 0, g[np.maximum(pa, 0)] if g.size else 0, 0).astype(g.dtype)
        gb = np.where(pb >= 0, g[np.maximum(pb, 0)] if g.size else 0, 0).astype(g.dtype)
        return ga, gb

    return add_grad


@ks.gradient("SparseAdd")
def _sparse_add_grad(op: Any, *grads: Any) -> list[Any]:
    a_grad, b_grad = apply_op("SparseAddGrad", backprop_val_grad=grads[1],
                              a_indices=op.inputs[0], b_indices=op.inputs[3],
                              sum_indices=op.outputs[0])
    a_grad.set_shape(op.inputs[1].shape)
    b_grad.set_shape(op.inputs[4].shape)
    return [None, a_grad, None, None, b_grad, None, None]


@ks.kernel("SparseTensorDenseAdd", device_type="CPU")
def _sparse_dense_add_kernel(ctx: Any) -> Any:
    def add(ai: Any, av: Any, ashape: Any, b: Any) -> Any:
        _check_sparse(ai, av, ashape, "a")
        if tuple(_i64(ashape).tolist()) != tuple(b.shape):
            raise _invalid(f"Dimension mismatch: a_shape {_fmt(ashape)} vs. b.shape "
                           f"{_fmt(b.shape)}")
        out = np.array(b, copy=True)
        idx = _i64(ai)
        if idx.shape[0]:
            if np.any((idx < 0) | (idx >= _i64(ashape)[None, :])):
                bad = int(np.nonzero(np.any((idx < 0) | (idx >= _i64(ashape)), axis=1))[0][0])
                raise _invalid(f"Index {_fmt(idx[bad])} is out of bounds of the shape "
                               f"{_fmt(ashape)}")
            np.add.at(out, tuple(idx.T), av)
        return out

    return add


@ks.gradient("SparseTensorDenseAdd")
def _sparse_dense_add_grad(op: Any, grad: Tensor) -> list[Any]:
    return [None, _tf().gather_nd(grad, op.inputs[0]), None, grad]


@ks.api("sparse.add", "sparse_add")
def sparse_add(a: Any, b: Any, threshold: Any = None, thresh: Any = None) -> Any:
    """``a + b`` where at least one is sparse: a SparseTensor when both are (sums of
    magnitude below ``threshold`` dropped), a dense Tensor otherwise."""
    if threshold is not None and thresh is not None:
        raise ValueError("Cannot specify both 'threshold' and 'thresh'")
    threshold = thresh if threshold is None else threshold
    if threshold is None:
        threshold = 0
    sparse_classes = (SparseTensor, SparseTensorValue)
    if not any(isinstance(x, sparse_classes) for x in (a, b)):
        raise TypeError("At least one input should be SparseTensor; do you mean to use "
                        "tf.add()?")
    if all(isinstance(x, sparse_classes) for x in (a, b)):
        a, b = _convert_sparse(a), _convert_sparse(b)
        threshold = convert_to_tensor(threshold, dtype=a.values.dtype.real_dtype.base_dtype,
                                      name="threshold")
        ind, vals, shape = apply_op("SparseAdd", a_indices=a.indices, a_values=a.values,
                                    a_shape=a.dense_shape, b_indices=b.indices,
                                    b_values=b.values, b_shape=b.dense_shape,
                                    thresh=threshold)
        a.get_shape().assert_is_compatible_with(b.get_shape())
        static = a.get_shape().merge_with(b.get_shape())
        if static.is_fully_defined():
            shape = static.as_list()
        return SparseTensor(ind, vals, shape)
    if isinstance(b, sparse_classes):
        a, b = b, a
    a = _convert_sparse(a)
    return apply_op("SparseTensorDenseAdd", a_indices=a.indices, a_values=a.values,
                    a_shape=a.dense_shape, b=b)


# =======================================================================================
# SparseTensorDenseMatMul
# =======================================================================================
def _spmm_shape(op: Any) -> list[TensorShape]:
    a = _shape_from_tensor(op.inputs[2])
    b = op.inputs[3].shape
    adj_a, adj_b = op.node_attrs.get("adjoint_a", False), op.node_attrs.get("adjoint_b", False)
    if b.ndims is not None and b.ndims != 2:
        raise ValueError(f"Shape must be rank 2 but is rank {b.ndims} for '{op.name}' "
                         f"(op: 'SparseTensorDenseMatMul')")
    ad = a.as_list() if a.ndims == 2 else [None, None]
    bd = b.as_list() if b.ndims == 2 else [None, None]
    rows = ad[1] if adj_a else ad[0]
    inner_a = ad[0] if adj_a else ad[1]
    inner_b = bd[1] if adj_b else bd[0]
    if inner_a is not None and inner_b is not None and inner_a != inner_b:
        raise ValueError(f"Dimensions must be equal, but are {inner_a} and {inner_b} for "
                         f"'{op.name}' (op: 'SparseTensorDenseMatMul')")
    return [TensorShape([rows, bd[0] if adj_b else bd[1]])]


ks.op(OpDef("SparseTensorDenseMatMul",
            inputs=["a_indices: Tindices", "a_values: T", "a_shape: int64", "b: T"],
            outputs=["product: T"],
            attrs=["T: type", "Tindices: {int32, int64} = DT_INT64",
                   "adjoint_a: bool = false", "adjoint_b: bool = false"],
            shape_fn=_spmm_shape, doc="A sparse matrix times a dense matrix."))


@ks.kernel("SparseTensorDenseMatMul", device_type="CPU")
def _spmm_kernel(ctx: Any) -> Any:
    adj_a, adj_b = ctx.attrs.get("adjoint_a", False), ctx.attrs.get("adjoint_b", False)

    def spmm(ai: Any, av: Any, ashape: Any, b: Any) -> Any:
        if ai.ndim != 2:
            raise _invalid(f"Tensor 'a_indices' is not a matrix")
        if ai.shape[1] != 2:
            raise _invalid(f"Tensor 'a_indices' does not have 2 columns, got "
                           f"{ai.shape[1]}")
        if av.ndim != 1 or av.shape[0] != ai.shape[0]:
            raise _invalid(f"Number of rows of a_indices does not match number of entries "
                           f"in a_values")
        if ashape.ndim != 1 or ashape.shape[0] != 2:
            raise _invalid(f"Tensor 'a_shape' is not a vector with 2 elements")
        if b.ndim != 2:
            raise _invalid(f"Tensor 'b' is not a matrix")
        shape = _i64(ashape)
        rows_n, inner = (shape[1], shape[0]) if adj_a else (shape[0], shape[1])
        bm = b.conj().T if adj_b else b
        if bm.shape[0] != inner:
            raise _invalid(f"Cannot multiply A and B because inner dimension does not match: "
                           f"{inner} vs. {bm.shape[0]}.  Did you forget a transpose?  "
                           f"Dimensions of A: [{shape[0]}, {shape[1]}).  Dimensions of B: "
                           f"{list(b.shape)}")
        idx = _i64(ai)
        r, c = (idx[:, 1], idx[:, 0]) if adj_a else (idx[:, 0], idx[:, 1])
        vals = av.conj() if adj_a else av
        for n, (rr, cc) in enumerate(zip(r.tolist(), c.tolist())):
            if not 0 <= cc < inner:
                raise _invalid(f"k ({cc}) from index[{n},{1 - int(adj_a)}] out of bounds "
                               f"(>={inner})")
            if not 0 <= rr < rows_n:
                raise _invalid(f"i ({rr}) from index[{n},{int(adj_a)}] out of bounds "
                               f"(>={rows_n})")
        out = np.zeros((int(rows_n), bm.shape[1]), dtype=b.dtype)
        if idx.shape[0]:
            np.add.at(out, r, vals[:, None] * bm[c])
        return out

    return spmm


@ks.gradient("SparseTensorDenseMatMul")
def _spmm_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    ai, av, ashape, b = op.inputs
    adj_a, adj_b = op.get_attr("adjoint_a"), op.get_attr("adjoint_b")
    if av.dtype.base_dtype is not b.dtype.base_dtype:
        raise TypeError(f"SparseTensorDenseMatMul op received operands with different "
                        f"types: {av.dtype.base_dtype.name} and {b.dtype.base_dtype.name}")
    b_grad = apply_op("SparseTensorDenseMatMul", a_indices=ai, a_values=av, a_shape=ashape,
                      b=grad, adjoint_a=not adj_a)
    if adj_b:
        b_grad = tf.matrix_transpose(b_grad, conjugate=True)
    rows, cols = ai[:, 0], ai[:, 1]
    parts_a = tf.gather(grad, cols if adj_a else rows)
    parts_b = tf.gather(tf.transpose(b) if adj_b else b, rows if adj_a else cols)
    if not adj_a and not adj_b:
        vg = tf.matmul(tf.expand_dims(parts_a, -2), tf.expand_dims(parts_b, -2),
                       adjoint_b=True)
    elif adj_a and not adj_b:
        vg = tf.matmul(tf.expand_dims(parts_a, -1), tf.expand_dims(parts_b, -1),
                       adjoint_a=True)
    elif not adj_a and adj_b:
        vg = tf.matmul(tf.expand_dims(parts_a, -2), tf.expand_dims(parts_b, -1))
    else:
        vg = tf.matmul(tf.expand_dims(parts_a, -1), tf.expand_dims(parts_b, -2),
                       adjoint_a=True, adjoint_b=True)
    return [None, tf.squeeze(vg, axis=[-2, -1]), None, b_grad]


@ks.api("sparse.sparse_dense_matmul", "sparse.matmul", "sparse_tensor_dense_matmul")
def sparse_tensor_dense_matmul(sp_a: Any, b: Any, adjoint_a: bool = False,
                               adjoint_b: bool = False, name: str | None = None) -> Tensor:
    """``sp_a @ b`` for a rank-2 SparseTensor ``sp_a`` and a dense matrix ``b`` (either
    side adjointed); a sparse ``b`` with a dense ``sp_a`` is computed transposed."""
    tf = _tf()
    if isinstance(b, (SparseTensor, SparseTensorValue)):
        if adjoint_a != adjoint_b:
            return tf.transpose(sparse_tensor_dense_matmul(b, sp_a, adjoint_a, adjoint_b))
        return tf.transpose(sparse_tensor_dense_matmul(b, sp_a, adjoint_a=not adjoint_a,
                                                       adjoint_b=not adjoint_b))
    sp = _convert_sparse(sp_a)
    with name_scope(name, "SparseTensorDenseMatMul", [sp.indices, sp.values, b]) as name:
        b = convert_to_tensor(b, name="b")
        return apply_op("SparseTensorDenseMatMul", a_indices=sp.indices, a_values=sp.values,
                        a_shape=sp.dense_shape, b=b, adjoint_a=adjoint_a,
                        adjoint_b=adjoint_b)


# =======================================================================================
# SparseConcat
# =======================================================================================
def _concat_shape(op: Any) -> list[TensorShape]:
    n = op.node_attrs["N"]
    rank = None
    for t in op.inputs[2 * n:]:
        rank = rank if rank is not None else _vec_len(t)
    return _sparse_outputs(rank)


ks.op(OpDef("SparseConcat",
            inputs=["indices: N * int64", "values: N * T", "shapes: N * int64"],
            outputs=["output_indices: int64", "output_values: T", "output_shape: int64"],
            attrs=["concat_dim: int", "N: int >= 2", "T: type"], shape_fn=_concat_shape,
            doc="Sparse tensors concatenated along one dimension."))
ks.not_differentiable("SparseConcat")


@ks.kernel("SparseConcat", device_type="CPU")
def _concat_kernel(ctx: Any) -> Any:
    n = ctx.attrs["N"]
    dim0 = ctx.attrs["concat_dim"]

    def concat(*args: Any) -> Any:
        inds, vals, shapes = args[:n], args[n:2 * n], args[2 * n:]
        for i in range(n):
            _check_sparse(inds[i], vals[i], shapes[i], f"Input {i}")
        rank = shapes[0].shape[0]
        dim = dim0 + rank if dim0 < 0 else dim0
        if not 0 <= dim < rank:
            raise _invalid(f"Concat dimension must be in range [{-rank}, {rank}), got "
                           f"{dim0}.")
        for i in range(1, n):
            if shapes[i].shape[0] != rank:
                raise _invalid(f"Ranks of all input tensors must match: expected {rank} but "
                               f"got {shapes[i].shape[0]} at position {i}")
            for j in range(rank):
                if j != dim and shapes[i][j] != shapes[0][j]:
                    raise _invalid(f"Input shapes must match: expected {shapes[0][j]} for "
                                   f"dimension {j} but got {shapes[i][j]} at position {i}")
        offset = 0
        parts = []
        for i in range(n):
            ind = _i64(inds[i]).copy()
            ind[:, dim] += offset
            parts.append(ind)
            offset += int(shapes[i][dim])
        ind = np.concatenate(parts).reshape(-1, rank)
        val = np.concatenate(vals)
        order = _row_order(ind)
        out_shape = _i64(shapes[0]).copy()
        out_shape[dim] = offset
        return np.ascontiguousarray(ind[order]), np.ascontiguousarray(val[order]), out_shape

    return concat


@ks.api("sparse.concat", "sparse_concat")
def sparse_concat(axis: Any, sp_inputs: Any, name: str | None = None,
                  expand_nonconcat_dim: bool = False, concat_dim: Any = None,
                  expand_nonconcat_dims: Any = None) -> SparseTensor:
    """SparseTensors concatenated along ``axis``; with ``expand_nonconcat_dim`` the
    other dimensions grow to the largest input's."""
    tf = _tf()
    if expand_nonconcat_dims is not None:
        expand_nonconcat_dim = expand_nonconcat_dims
    if axis is not None and concat_dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'concat_dim'")
    axis = concat_dim if axis is None else axis
    sps = _convert_sparse_list(sp_inputs)
    if len(sps) == 1:
        return sps[0]
    inds = [s.indices for s in sps]
    vals = [s.values for s in sps]
    shapes = [s.dense_shape for s in sps]
    if expand_nonconcat_dim:
        max_shape = tf.reduce_max(tf.concat([tf.reshape(s, [1, -1]) for s in shapes], 0), 0)
        shapes = [tf.concat([max_shape[:axis],
                             s[-1:] if axis == -1 else s[axis:axis + 1],
                             [] if axis == -1 else max_shape[axis + 1:]], 0)
                  for s in shapes]
    ind, val, shape = apply_op("SparseConcat", name=name, indices=inds, values=vals,
                               shapes=shapes, concat_dim=axis)
    in_shapes = [s.shape for s in sps]
    if all(s.ndims is not None for s in in_shapes):
        if expand_nonconcat_dim:
            static: list[Any] = []
            for d in range(in_shapes[0].ndims):
                ds = [s.as_list()[d] for s in in_shapes]
                static.append(None if None in ds else max(ds))
        else:
            static = in_shapes[0].as_list()
        cd = [s.as_list()[axis] for s in in_shapes]
        static[axis] = None if None in cd else sum(cd)
        static_shape = TensorShape(static)
    else:
        static_shape = unknown_shape()
    if all(s.is_fully_defined() for s in in_shapes):
        return SparseTensor(ind, val, convert_to_tensor(static_shape.as_list(), dtype=_I64))
    out = SparseTensor(ind, val, shape)
    out.set_shape(static_shape)
    return out


# =======================================================================================
# SparseReshape
# =======================================================================================
ks.op(OpDef("SparseReshape",
            inputs=["input_indices: int64", "input_shape: int64", "new_shape: int64"],
            outputs=["output_indices: int64", "output_shape: int64"],
            shape_fn=lambda op: [TensorShape([None, _vec_len(op.inputs[2])]),
                                 TensorShape([_vec_len(op.inputs[2])])],
            doc="A sparse tensor's indices and shape for a new dense shape."))
ks.not_differentiable("SparseReshape")


@ks.kernel("SparseReshape", device_type="CPU")
def _reshape_kernel(ctx: Any) -> Any:
    def reshape(ind: Any, shape: Any, new: Any) -> Any:
        if shape.ndim != 1:
            raise _invalid(f"Input shape should be a vector but received shape "
                           f"{list(shape.shape)}")
        if new.ndim != 1:
            raise _invalid(f"Target shape should be a vector but received shape "
                           f"{list(new.shape)}")
        if ind.ndim != 2 or ind.shape[1] != shape.shape[0]:
            raise _invalid(f"Input rank ({shape.shape[0]}) and indices dimension "
                           f"({ind.shape[-1] if ind.ndim else 0}) must match")
        dense = int(np.prod(shape)) if shape.size else 1
        out = _i64(new).copy()
        unknown = -1
        product = 1
        for d, v in enumerate(out.tolist()):
            if v == -1:
                if unknown != -1:
                    raise _invalid(f"only one output dimension may be -1, not both "
                                   f"{unknown} and {d}")
                unknown = d
            elif v < 0:
                raise _invalid(f"size {d} must be non-negative, not {v}")
            else:
                product *= v
        if unknown != -1:
            if product <= 0 or dense % product != 0:
                raise _invalid(f"Input to reshape is a SparseTensor with {dense} dense "
                               f"values, but the requested shape requires a multiple of "
                               f"{product}. inputShape={_fmt(shape)} "
                               f"outputShape={_fmt(new)}")
            out[unknown] = dense // product
        elif product != dense:
            raise _invalid(f"Input to reshape is a tensor with {dense} dense values, but "
                           f"the requested shape has {product}. inputShape={_fmt(shape)} "
                           f"outputShape={_fmt(new)}")
        idx = _i64(ind)
        lin = (idx * _strides(_i64(shape))[None, :]).sum(axis=1) if idx.shape[1] else \
            np.zeros(idx.shape[0], np.int64)
        return _unravel(lin, out), out

    return reshape


@ks.api("sparse.reshape", "sparse_reshape")
def sparse_reshape(sp_input: Any, shape: Any, name: str | None = None) -> SparseTensor:
    """The same entries in a dense shape of the same size (one dimension may be -1)."""
    tf = _tf()
    sp = _convert_sparse(sp_input)
    shape = tf.cast(shape, _I64)
    with name_scope(name, "SparseReshape", [sp.indices, sp.values, sp.dense_shape]) as name:
        ind, out_shape = apply_op("SparseReshape", name=name, input_indices=sp.indices,
                                  input_shape=sp.dense_shape, new_shape=shape)
        want = _shape_from_tensor(shape)
        want_l = want.as_list() if want.ndims is not None else None
        if want_l is not None and sp.shape.is_fully_defined():
            given = constant_value(shape)
            if given is not None and int(np.sum(np.asarray(given) == -1)) > 1:
                raise ValueError(f"At most one dimension can be inferred (-1). Found: "
                                 f"{np.asarray(given)}")
            original = list(want_l)
            in_size = int(np.prod(sp.shape.as_list()))
            implied = sum(d is None for d in want_l)
            if implied == 1 and 0 not in want_l:
                k = original.index(None)
                rest = original[:k] + original[k + 1:]
                want_l[k] = int(in_size // int(np.prod(rest)))
            if implied == 0 or (implied == 1 and 0 not in want_l):
                size = int(np.prod(want_l))
                if size != in_size:
                    raise ValueError(f"Cannot reshape a tensor with {in_size} elements to "
                                     f"shape {original} ({size} elements).")
                out_shape = tf.constant(want_l, dtype=_I64)
        return SparseTensor(ind, tf.identity(sp.values), out_shape)


# =======================================================================================
# SparseSlice, SparseSliceGrad
# =======================================================================================
ks.op(OpDef("SparseSlice",
            inputs=["indices: int64", "values: T", "shape: int64", "start: int64",
                    "size: int64"],
            outputs=["output_indices: int64", "output_values: T", "output_shape: int64"],
            attrs=["T: type"], shape_fn=lambda op: _sparse_outputs(_rank_of(op, 2)),
            doc="The entries of a sparse tensor inside a box."),
      OpDef("SparseSliceGrad",
            inputs=["backprop_val_grad: T", "input_indices: int64", "input_start: int64",
                    "output_indices: int64"],
            outputs=["val_grad: T"], attrs=["T: numbertype"],
            shape_fn=lambda op: [TensorShape([op.inputs[1].shape[0] if
                                              op.inputs[1].shape.ndims else None])],
            doc="The gradient of SparseSlice's values."))
ks.not_differentiable("SparseSliceGrad")


@ks.kernel("SparseSlice", device_type="CPU")
def _slice_kernel(ctx: Any) -> Any:
    def slice_(ind: Any, vals: Any, shape: Any, start: Any, size: Any) -> Any:
        _check_sparse(ind, vals, shape)
        rank = shape.shape[0]
        if start.ndim != 1 or start.shape[0] != rank:
            raise _invalid(f"Expected start to be a vector of length {rank} but got length "
                           f"{start.size}")
        if size.ndim != 1 or size.shape[0] != rank:
            raise _invalid(f"Expected size to be a vector of length {rank} but got length "
                           f"{size.size}")
        start, size, shape = _i64(start), _i64(size), _i64(shape)
        end = np.minimum(start + size, shape)
        out_shape = np.maximum(end - start, 0)
        idx = _i64(ind)
        keep = np.all((idx >= start[None, :]) & (idx < end[None, :]), axis=1)
        return np.ascontiguousarray(idx[keep] - start[None, :]), vals[keep], out_shape

    return slice_


@ks.kernel("SparseSliceGrad", device_type="CPU")
def _slice_grad_kernel(ctx: Any) -> Any:
    def slice_grad(g: Any, ind: Any, start: Any, out_ind: Any) -> Any:
        pos = _positions(_i64(ind), _i64(out_ind) + _i64(start)[None, :])
        res = np.zeros(ind.shape[0], dtype=g.dtype)
        hit = pos >= 0
        res[hit] = g[pos[hit]]
        return res

    return slice_grad


@ks.gradient("SparseSlice")
def _slice_grad(op: Any, *grads: Any) -> list[Any]:
    vg = apply_op("SparseSliceGrad", backprop_val_grad=grads[1], input_indices=op.inputs[0],
                  input_start=op.inputs[3], output_indices=op.outputs[0])
    vg.set_shape(op.inputs[1].shape)
    return [None, vg, None, None, None]


@ks.api("sparse.slice", "sparse_slice")
def sparse_slice(sp_input: Any, start: Any, size: Any, name: str | None = None
                 ) -> SparseTensor:
    """The entries with ``start <= index < start + size``, shifted by ``-start``."""
    sp = _convert_sparse(sp_input)
    start = convert_to_tensor(start, _I64)
    size = convert_to_tensor(size, _I64)
    with name_scope(name, "SparseSlice", [sp.indices, sp.values, sp.dense_shape]) as name:
        ind, vals, shape = apply_op("SparseSlice", name=name, indices=sp.indices,
                                    values=sp.values, shape=sp.dense_shape, start=start,
                                    size=size)
        return SparseTensor(ind, vals, shape)


# =======================================================================================
# SparseReduceSum / Max (dense and sparse outputs)
# =======================================================================================
def _reduce_static(op: Any) -> TensorShape:
    shape = _shape_from_tensor(op.inputs[2])
    axes = constant_value(op.inputs[3])
    keep = op.node_attrs.get("keep_dims", False)
    if shape.ndims is None or axes is None:
        return unknown_shape()
    rank = shape.ndims
    ax = {int(a) % rank for a in np.asarray(axes).reshape(-1)} if rank else set()
    dims = shape.as_list()
    if keep:
        return TensorShape([1 if d in ax else dims[d] for d in range(rank)])
    return TensorShape([dims[d] for d in range(rank) if d not in ax])


for _name, _t in (("SparseReduceSum", "numbertype"), ("SparseReduceMax", "realnumbertype")):
    ks.op(OpDef(_name,
                inputs=["input_indices: int64", "input_values: T", "input_shape: int64",
                        "reduction_axes: int32"],
                outputs=["output: T"], attrs=["keep_dims: bool = false", f"T: {_t}"],
                shape_fn=lambda op: [_reduce_static(op)],
                doc=f"{_name[6:]} of a sparse tensor over some axes, as a dense tensor."),
          OpDef(_name + "Sparse",
                inputs=["input_indices: int64", "input_values: T", "input_shape: int64",
                        "reduction_axes: int32"],
                outputs=["output_indices: int64", "output_values: T", "output_shape: int64"],
                attrs=["keep_dims: bool = false", f"T: {_t}"],
                shape_fn=lambda op: _sparse_outputs(None),
                doc=f"{_name[6:]} of a sparse tensor over some axes, as a sparse tensor."))
ks.not_differentiable("SparseReduceSumSparse", "SparseReduceMax", "SparseReduceMaxSparse")


def _reduce_groups(ind: Any, vals: Any, shape: Any, axes: Any, keep: bool) -> Any:
    """The output shape, each entry's output group, and the groups' kept coordinates."""
    _check_sparse(ind, vals, shape)
    rank = shape.shape[0]
    ax_set = set()
    for a in np.asarray(axes).reshape(-1).tolist():
        if not -rank <= a < rank:
            raise _invalid(f"Invalid reduction dimension {a}, for input with {rank} "
                           f"dimensions.")
        ax_set.add(a % rank)
    kept = [d for d in range(rank) if d not in ax_set]
    shape = _i64(shape)
    out_shape = np.array([1 if d in ax_set else shape[d] for d in range(rank)] if keep
                         else [shape[d] for d in kept], dtype=np.int64)
    coords = _i64(ind)[:, kept]
    if coords.shape[0] == 0:
        return out_shape, np.zeros(0, np.int64), np.zeros((0, len(kept)), np.int64), kept
    groups, inv = np.unique(coords, axis=0, return_inverse=True)
    return out_shape, inv.reshape(-1), groups, kept


def _reduce_values(kind: str, vals: Any, inv: Any, n: int) -> Any:
    if kind == "sum":
        out = np.zeros(n, dtype=vals.dtype)
        np.add.at(out, inv, vals)
        return out
    if vals.dtype.kind == "f":
        out = np.full(n, -np.inf, dtype=vals.dtype)
    else:
        out = np.full(n, np.iinfo(vals.dtype).min, dtype=vals.dtype)
    np.maximum.at(out, inv, vals)
    return out


def _reduce_kernel(kind: str, sparse_out: bool) -> Any:
    def factory(ctx: Any) -> Any:
        keep = ctx.attrs.get("keep_dims", False)

        def reduce_(ind: Any, vals: Any, shape: Any, axes: Any) -> Any:
            out_shape, inv, groups, kept = _reduce_groups(ind, vals, shape, axes, keep)
            red = _reduce_values(kind, vals, inv, groups.shape[0])
            if sparse_out:
                if keep:
                    full = np.zeros((groups.shape[0], shape.shape[0]), np.int64)
                    full[:, kept] = groups
                    groups = full
                return np.ascontiguousarray(groups, dtype=np.int64), red, out_shape
            kshape = np.array([out_shape[i] for i in range(len(out_shape))], np.int64)
            dense = np.zeros(int(np.prod(kshape)) if kshape.size else 1, dtype=vals.dtype)
            if groups.shape[0]:
                kept_shape = _i64(shape)[kept]
                lin = (groups * _strides(kept_shape)[None, :]).sum(axis=1) if kept else \
                    np.zeros(groups.shape[0], np.int64)
                dense[lin] = red
            return dense.reshape(tuple(kshape.tolist()))

        return reduce_

    return factory


for _name, _kind in (("SparseReduceSum", "sum"), ("SparseReduceMax", "max")):
    ks.kernel(_name, device_type="CPU")(_reduce_kernel(_kind, False))
    ks.kernel(_name + "Sparse", device_type="CPU")(_reduce_kernel(_kind, True))


@ks.gradient("SparseReduceSum")
def _reduce_sum_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    ind, shape, axes = op.inputs[0], op.inputs[2], op.inputs[3]
    rank = tf.size(shape)
    axes = (tf.reshape(axes, [-1]) + rank) % rank
    mask = tf.reduce_any(tf.cast(tf.one_hot(axes, rank, dtype=_dt.int32), _dt.bool), 0)
    kept_shape = tf.where(mask, tf.ones_like(shape), shape)
    g = tf.reshape(grad, kept_shape)
    scale = shape // kept_shape
    return [None, tf.gather_nd(g, ind // scale), None, None]


def _reduction_axes(sp: SparseTensor, axis: Any) -> Any:
    if axis is not None:
        return axis
    rank = sp.shape.ndims
    if rank is not None:
        return _tf().constant(np.arange(rank, dtype=np.int32))
    return _tf().range(0, _tf().size(sp.dense_shape))


def _reduce_args(axis: Any, keepdims: Any, reduction_axes: Any, keep_dims: Any
                 ) -> tuple[Any, bool]:
    if keepdims is not None and keep_dims is not None:
        raise ValueError("Cannot specify both 'keepdims' and 'keep_dims'")
    if axis is not None and reduction_axes is not None:
        raise ValueError("Cannot specify both 'axis' and 'reduction_axes'")
    keepdims = keep_dims if keepdims is None else keepdims
    return (reduction_axes if axis is None else axis), bool(keepdims)


def _reduce_api(op_type: str, sparse_out: bool) -> Any:
    def reduce_(sp_input: Any, axis: Any = None, keepdims: Any = None,
                reduction_axes: Any = None, keep_dims: Any = None) -> Any:
        axis, keepdims = _reduce_args(axis, keepdims, reduction_axes, keep_dims)
        sp = _convert_sparse(sp_input)
        out = apply_op(op_type, input_indices=sp.indices, input_values=sp.values,
                       input_shape=sp.dense_shape,
                       reduction_axes=_reduction_axes(sp, axis), keep_dims=keepdims)
        return SparseTensor(*out) if sparse_out else out

    kind = "sum" if "Sum" in op_type else "max"
    out = "a SparseTensor" if sparse_out else "a dense Tensor"
    reduce_.__doc__ = (f"The {kind} of a SparseTensor's values over ``axis`` (default: all), "
                       f"as {out}; missing entries count as absent, not as zeros"
                       f"{'' if kind == 'sum' else ' (an all-negative group gives its max)'}.")
    reduce_.__name__ = f"sparse_reduce_{kind}{'_sparse' if sparse_out else ''}"
    return reduce_


for _kind, _op in (("sum", "SparseReduceSum"), ("max", "SparseReduceMax")):
    ks.api(f"sparse.reduce_{_kind}", f"sparse_reduce_{_kind}")(_reduce_api(_op, False))
    ks.api(f"sparse.reduce_{_kind}_sparse", f"sparse_reduce_{_kind}_sparse")(
        _reduce_api(_op + "Sparse", True))


# =======================================================================================
# SparseFillEmptyRows (+Grad)
# =======================================================================================
ks.op(OpDef("SparseFillEmptyRows",
            inputs=["indices: int64", "values: T", "dense_shape: int64", "default_value: T"],
            outputs=["output_indices: int64", "output_values: T", "empty_row_indicator: bool",
                     "reverse_index_map: int64"],
            attrs=["T: type"],
            shape_fn=lambda op: [TensorShape([None, _rank_of(op, 2)]), TensorShape([None]),
                                 TensorShape([_dim0(op.inputs[2])]),
                                 TensorShape([op.inputs[0].shape[0]
                                              if op.inputs[0].shape.ndims else None])],
            doc="A default entry in each empty row of a sparse tensor."),
      OpDef("SparseFillEmptyRowsGrad", inputs=["reverse_index_map: int64", "grad_values: T"],
            outputs=["d_values: T", "d_default_value: T"], attrs=["T: type"],
            shape_fn=lambda op: [op.inputs[0].shape, TensorShape([])],
            doc="The gradient of SparseFillEmptyRows."))
ks.not_differentiable("SparseFillEmptyRowsGrad")


@ks.kernel("SparseFillEmptyRows", device_type="CPU")
def _fill_kernel(ctx: Any) -> Any:
    def fill(ind: Any, vals: Any, shape: Any, default: Any) -> Any:
        if shape.ndim != 1:
            raise _invalid(f"dense_shape must be a vector, saw: {list(shape.shape)}")
        if ind.ndim != 2:
            raise _invalid(f"indices must be a matrix, saw: {list(ind.shape)}")
        if vals.ndim != 1:
            raise _invalid(f"values must be a vector, saw: {list(vals.shape)}")
        if np.ndim(default) != 0:
            raise _invalid(f"default_value must be a scalar, saw: {list(np.shape(default))}")
        if ind.shape[0] != vals.shape[0]:
            raise _invalid(f"The length of `values` ({vals.shape[0]}) must match the first "
                           f"dimension of `indices` ({ind.shape[0]}).")
        if shape.shape[0] == 0:
            raise _invalid("dense_shape must not be empty")
        rank = shape.shape[0]
        n = ind.shape[0]
        rows_n = int(shape[0])
        idx = _i64(ind)
        rows = idx[:, 0] if n else np.zeros(0, np.int64)
        for i, r in enumerate(rows.tolist()):
            if r < 0:
                raise _invalid(f"indices({i}, 0) is invalid: {r} < 0")
            if r >= rows_n:
                raise _invalid(f"indices({i}, 0) is invalid: {r} >= {rows_n}")
        counts = np.bincount(rows, minlength=rows_n) if rows_n else np.zeros(0, np.int64)
        empty = counts == 0
        per_row = np.maximum(counts, 1)
        starts = np.cumsum(per_row) - per_row
        total = int(per_row.sum())
        out_ind = np.zeros((total, rank), np.int64)
        out_val = np.empty(total, dtype=vals.dtype)
        order = np.argsort(rows, kind="stable")
        seen = np.zeros(rows_n, np.int64)
        rev = np.zeros(n, np.int64)
        for i in order.tolist():
            r = rows[i]
            p = starts[r] + seen[r]
            seen[r] += 1
            out_ind[p] = idx[i]
            out_val[p] = vals[i]
            rev[i] = p
        er = np.nonzero(empty)[0]
        out_ind[starts[er], 0] = er
        out_val[starts[er]] = default
        return out_ind, out_val, empty.astype(np.bool_), rev

    return fill


@ks.kernel("SparseFillEmptyRowsGrad", device_type="CPU")
def _fill_grad_kernel(ctx: Any) -> Any:
    def fill_grad(rev: Any, g: Any) -> Any:
        if np.ndim(rev) != 1:
            raise errors.InvalidArgumentError(
                None, None, f"reverse_index_map must be a vector, saw: "
                f"{list(np.shape(rev))}")
        if np.ndim(g) != 1:
            raise errors.InvalidArgumentError(
                None, None, f"grad_values must be a vector, saw: {list(np.shape(g))}")
        rev = _i64(rev)
        dv = g[rev] if rev.size else g[:0].copy()
        used = np.zeros(g.shape[0], bool)
        used[rev] = True
        return dv, np.asarray(g[~used].sum(), dtype=g.dtype)

    return fill_grad


@ks.gradient("SparseFillEmptyRows")
def _fill_grad(op: Any, _gi: Any, gv: Tensor, _ge: Any, _gr: Any) -> list[Any]:
    dv, dd = apply_op("SparseFillEmptyRowsGrad", reverse_index_map=op.outputs[3],
                      grad_values=gv)
    return [None, dv, None, dd]


@ks.api("sparse.fill_empty_rows", "sparse_fill_empty_rows")
def sparse_fill_empty_rows(sp_input: Any, default_value: Any, name: str | None = None
                           ) -> tuple[SparseTensor, Tensor]:
    """Adds ``default_value`` at ``[row, 0, ...]`` for every row without entries; returns
    ``(filled SparseTensor, empty_row_indicator)``."""
    sp = _convert_sparse(sp_input)
    with name_scope(name, "SparseFillEmptyRows", [sp.indices, sp.values, sp.dense_shape]):
        default_value = convert_to_tensor(default_value, dtype=sp.values.dtype)
        ind, vals, empty, _ = apply_op("SparseFillEmptyRows", indices=sp.indices,
                                       values=sp.values, dense_shape=sp.dense_shape,
                                       default_value=default_value)
        return SparseTensor(ind, vals, sp.dense_shape), empty


# =======================================================================================
# SparseSplit
# =======================================================================================
ks.op(OpDef("SparseSplit",
            inputs=["split_dim: int64", "indices: int64", "values: T", "shape: int64"],
            outputs=["output_indices: num_split * int64", "output_values: num_split * T",
                     "output_shape: num_split * int64"],
            attrs=["num_split: int >= 1", "T: type"],
            shape_fn=lambda op: ([TensorShape([None, _rank_of(op, 3)])] * op.node_attrs[
                "num_split"] + [TensorShape([None])] * op.node_attrs["num_split"]
                + [TensorShape([_rank_of(op, 3)])] * op.node_attrs["num_split"]),
            doc="A sparse tensor split into num_split pieces along one dimension."))
ks.not_differentiable("SparseSplit")


@ks.kernel("SparseSplit", device_type="CPU")
def _split_kernel(ctx: Any) -> Any:
    num = ctx.attrs["num_split"]

    def split(dim: Any, ind: Any, vals: Any, shape: Any) -> Any:
        _check_sparse(ind, vals, shape)
        rank = shape.shape[0]
        d = int(dim)
        if not -rank <= d < rank:
            raise _invalid(f"Input split_dim should be between {-rank} and {rank}, got {d}")
        d %= rank
        size = int(shape[d])
        if not 1 <= num <= size:
            raise _invalid(f"Input num_split should be between 1 and the splitting "
                           f"dimension size ({size}), got {num}")
        base, extra = divmod(size, num)
        idx = _i64(ind)
        outs_i, outs_v, outs_s = [], [], []
        start = 0
        for i in range(num):
            n = base + (1 if i < extra else 0)
            keep = (idx[:, d] >= start) & (idx[:, d] < start + n)
            part = idx[keep].copy()
            part[:, d] -= start
            s = _i64(shape).copy()
            s[d] = n
            outs_i.append(np.ascontiguousarray(part))
            outs_v.append(vals[keep])
            outs_s.append(s)
            start += n
        return tuple(outs_i + outs_v + outs_s)

    return split


class _KeywordRequired:
    def __repr__(self) -> str:
        return "KeywordRequired()"


@ks.api("sparse.split", "sparse_split")
def sparse_split(keyword_required: Any = _KeywordRequired(), sp_input: Any = None,
                 num_split: Any = None, axis: Any = None, name: str | None = None,
                 split_dim: Any = None) -> list[SparseTensor]:
    """``num_split`` SparseTensors along ``axis`` (the first ``size % num_split`` one
    larger); keyword arguments only."""
    if not isinstance(keyword_required, _KeywordRequired):
        raise ValueError("Keyword arguments are required for this function.")
    if sp_input is None:
        raise ValueError("sp_input is required")
    if num_split is None:
        raise ValueError("num_split is required")
    if axis is None:  # also with split_dim, as in TF
        raise ValueError("axis is required")
    if split_dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'split_dim'")
    sp = _convert_sparse(sp_input)
    out = apply_op("SparseSplit", name=name, split_dim=convert_to_tensor(axis, _I64),
                   indices=sp.indices, values=sp.values, shape=sp.dense_shape,
                   num_split=num_split)
    inds, vals, shapes = out
    return [SparseTensor(inds[i], vals[i], shapes[i]) for i in range(num_split)]


# =======================================================================================
# SparseSoftmax, SparseSparseMaximum/Minimum, SparseDenseCwise*
# =======================================================================================
ks.op(OpDef("SparseSoftmax",
            inputs=["sp_indices: int64", "sp_values: T", "sp_shape: int64"],
            outputs=["output: T"], attrs=["T: {half, float, double}"],
            shape_fn=lambda op: [TensorShape([None]).merge_with(op.inputs[1].shape)],
            doc="Softmax over the last dimension of the entries of a sparse tensor."))
for _name in ("SparseSparseMaximum", "SparseSparseMinimum"):
    ks.op(OpDef(_name,
                inputs=["a_indices: int64", "a_values: T", "a_shape: int64",
                        "b_indices: int64", "b_values: T", "b_shape: int64"],
                outputs=["output_indices: int64", "output_values: T"],
                attrs=["T: realnumbertype"],
                shape_fn=lambda op: _sparse_outputs(_rank_of(op, 2))[:2],
                doc=f"Element-wise {_name[12:].lower()} of two sparse tensors."))
ks.not_differentiable("SparseSparseMaximum", "SparseSparseMinimum")
for _name in ("SparseDenseCwiseMul", "SparseDenseCwiseDiv", "SparseDenseCwiseAdd"):
    ks.op(OpDef(_name,
                inputs=["sp_indices: int64", "sp_values: T", "sp_shape: int64", "dense: T"],
                outputs=["output: T"], attrs=["T: numbertype"],
                shape_fn=lambda op: [TensorShape([None]).merge_with(op.inputs[1].shape)],
                doc=f"{_name[16:]} of a sparse tensor's values and a dense tensor "
                    "broadcast to its shape."))


@ks.kernel("SparseSoftmax", device_type="CPU")
def _softmax_kernel(ctx: Any) -> Any:
    def softmax(ind: Any, vals: Any, shape: Any) -> Any:
        _check_sparse(ind, vals, shape)
        if shape.shape[0] < 2:
            raise _invalid(f"Input should have rank >= 2, but received shape: {_fmt(shape)}")
        if vals.size == 0:
            return vals.copy()
        _, inv = np.unique(_i64(ind)[:, :-1], axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        m = np.full(inv.max() + 1, -np.inf, dtype=vals.dtype)
        np.maximum.at(m, inv, vals)
        e = np.exp(vals - m[inv])
        s = np.zeros_like(m)
        np.add.at(s, inv, e)
        return (e / s[inv]).astype(vals.dtype)

    return softmax


@ks.gradient("SparseSoftmax")
def _softmax_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    ind, shape = op.inputs[0], op.inputs[2]
    out = op.outputs[0]
    prod = SparseTensor(ind, out * grad, shape)
    summed = -tf.sparse.reduce_sum(prod, [-1], keepdims=True)
    sp_sum = apply_op("SparseDenseCwiseAdd", sp_indices=ind, sp_values=grad, sp_shape=shape,
                      dense=summed)
    return [None, sp_sum * out, None]


def _maxmin_kernel(fn: Any) -> Any:
    def factory(ctx: Any) -> Any:
        def maxmin(ai: Any, av: Any, ashape: Any, bi: Any, bv: Any, bshape: Any) -> Any:
            _check_sparse(ai, av, ashape, "a")
            _check_sparse(bi, bv, bshape, "b")
            _check_same_shape(ashape, bshape)
            both = np.concatenate([ai, bi]).reshape(-1, ai.shape[1])
            if both.shape[0] == 0:
                return np.zeros((0, ai.shape[1]), np.int64), av[:0].copy()
            rows, inv = np.unique(both, axis=0, return_inverse=True)
            inv = inv.reshape(-1)
            a = np.zeros(rows.shape[0], dtype=av.dtype)
            b = np.zeros(rows.shape[0], dtype=av.dtype)
            a[inv[:ai.shape[0]]] = av
            b[inv[ai.shape[0]:]] = bv
            return np.ascontiguousarray(rows), fn(a, b).astype(av.dtype)

        return maxmin

    return factory


ks.kernel("SparseSparseMaximum", device_type="CPU")(_maxmin_kernel(np.maximum))
ks.kernel("SparseSparseMinimum", device_type="CPU")(_maxmin_kernel(np.minimum))


def _cwise_kernel(kind: str) -> Any:
    def factory(ctx: Any) -> Any:
        def cwise(ind: Any, vals: Any, shape: Any, dense: Any) -> Any:
            _check_sparse(ind, vals, shape)
            shp = tuple(_i64(shape).tolist())
            ok = dense.ndim <= len(shp) and all(
                d == 1 or d == s for d, s in zip(dense.shape[::-1], shp[::-1]))
            if not ok:
                raise _invalid(f"SparseDenseBinaryOpShared broadcasts dense to sparse only; "
                               f"got incompatible shapes: {_fmt(shp)} vs. "
                               f"{_fmt(dense.shape)}")
            idx = _i64(ind)
            if idx.shape[0] == 0:
                return vals.copy()
            d = np.broadcast_to(dense, shp)[tuple(idx.T)]
            if kind == "mul":
                return (vals * d).astype(vals.dtype)
            if kind == "add":
                return (vals + d).astype(vals.dtype)
            if vals.dtype.kind in "iu":
                if np.any(d == 0):
                    raise _invalid("Integer division by zero")
                q = np.abs(vals) // np.abs(d)
                return np.where((vals < 0) != (d < 0), -q, q).astype(vals.dtype)
            return (vals / d).astype(vals.dtype)

        return cwise

    return factory


for _name, _kind in (("SparseDenseCwiseMul", "mul"), ("SparseDenseCwiseDiv", "div"),
                     ("SparseDenseCwiseAdd", "add")):
    ks.kernel(_name, device_type="CPU")(_cwise_kernel(_kind))


def _cwise_grad(op: Any, grad: Tensor, is_mul: bool) -> list[Any]:
    tf = _tf()
    x_ind, x_shape, y = op.inputs[0], op.inputs[2], op.inputs[3]
    y_shape = tf.cast(tf.shape(y), _I64)
    added = tf.expand_dims(tf.size(x_shape) - tf.size(y_shape), 0)
    aug = tf.concat([tf.ones(added, _I64), y_shape], 0)
    scaled = tf.slice(x_ind // (x_shape // aug), tf.concat([[0], added], 0), [-1, -1])
    dense_vals = tf.gather_nd(y, scaled)
    if is_mul:
        dx = grad * dense_vals
        dy_val = grad * op.inputs[1]
    else:
        dx = grad / dense_vals
        dy_val = grad * (-op.inputs[1] / tf.square(dense_vals))
    dy = sparse_add(tf.zeros_like(y), SparseTensor(scaled, dy_val, y_shape))
    return [None, dx, None, dy]


ks.gradient("SparseDenseCwiseMul")(lambda op, grad: _cwise_grad(op, grad, True))
ks.gradient("SparseDenseCwiseDiv")(lambda op, grad: _cwise_grad(op, grad, False))


def _sparse_binop(op_type: str, scope: str) -> Any:
    def binop(sp_x: SparseTensor, y: Any) -> SparseTensor:
        with name_scope(None, scope, [sp_x.indices, sp_x.values, y]) as name:
            y = convert_to_tensor(y, dtype=sp_x.dtype.base_dtype, name="y")
            out = apply_op(op_type, name=name, sp_indices=sp_x.indices, sp_values=sp_x.values,
                           sp_shape=sp_x.dense_shape, dense=y)
            return SparseTensor(sp_x.indices, out, sp_x.dense_shape)

    return binop


SparseTensor._override_operator("__mul__", _sparse_binop("SparseDenseCwiseMul", "mul"))
SparseTensor._override_operator("__div__", _sparse_binop("SparseDenseCwiseDiv", "div"))
SparseTensor._override_operator("__truediv__", _sparse_binop("SparseDenseCwiseDiv", "truediv"))


@ks.api("sparse.softmax", "sparse_softmax")
def sparse_softmax(sp_input: Any, name: str | None = None) -> SparseTensor:
    """Softmax over the last dimension among the entries present (others stay absent)."""
    sp = _convert_sparse(sp_input)
    with name_scope(name, "SparseSoftmax", [sp.indices, sp.values]):
        out = apply_op("SparseSoftmax", sp_indices=sp.indices, sp_values=sp.values,
                       sp_shape=sp.dense_shape)
        return SparseTensor(sp.indices, out, sp.dense_shape)


def _maxmin_api(op_type: str, word: str) -> Any:
    def fn(sp_a: Any, sp_b: Any, name: str | None = None) -> SparseTensor:
        a, b = _convert_sparse(sp_a), _convert_sparse(sp_b)
        with name_scope(name, op_type, [a.indices, a.values, b.indices, b.values]) as name:
            ind, vals = apply_op(op_type, name=name, a_indices=a.indices, a_values=a.values,
                                 a_shape=a.dense_shape, b_indices=b.indices,
                                 b_values=b.values, b_shape=b.dense_shape)
        return SparseTensor(ind, vals, a.dense_shape)

    fn.__doc__ = (f"The element-wise {word} of two SparseTensors of one shape (absent entries "
                  f"count as 0), in row-major order.")
    fn.__name__ = f"sparse_{word}"
    return fn


ks.api("sparse.maximum", "sparse_maximum")(_maxmin_api("SparseSparseMaximum", "maximum"))
ks.api("sparse.minimum", "sparse_minimum")(_maxmin_api("SparseSparseMinimum", "minimum"))


# =======================================================================================
# composites: retain, reset_shape, transpose, expand_dims, eye, merge, to_indicator
# =======================================================================================
@ks.api("sparse.retain", "sparse_retain")
def sparse_retain(sp_input: Any, to_retain: Any) -> SparseTensor:
    """The entries where the boolean vector ``to_retain`` is true."""
    tf = _tf()
    sp = _convert_sparse(sp_input)
    to_retain = convert_to_tensor(to_retain)
    rs = to_retain.shape
    rs.assert_has_rank(1)
    if sp.values.shape.dims is not None:
        sp.values.shape.dims[0].assert_is_compatible_with(rs.dims[0])
    where_true = tf.reshape(tf.where_v2(to_retain), [-1])
    return SparseTensor(tf.gather(sp.indices, where_true), tf.gather(sp.values, where_true),
                        tf.identity(sp.dense_shape))


@ks.api("sparse.reset_shape", "sparse_reset_shape")
def sparse_reset_shape(sp_input: Any, new_shape: Any = None) -> SparseTensor:
    """The same entries with dense shape ``new_shape`` (no smaller than the old one), or
    with the tightest shape holding the entries when ``new_shape`` is None."""
    tf = _tf()
    sp = _convert_sparse(sp_input)
    in_ind = tf.identity(sp.indices)
    in_val = tf.identity(sp.values)
    in_shape = tf.identity(sp.dense_shape)
    if new_shape is None:
        low = tf.reduce_max(in_ind, axis=0)
        out = tf.maximum(tf.constant(0, dtype=_I64), tf.add(low, tf.ones_like(in_shape)))
    else:
        out = convert_to_tensor(new_shape)
        out.shape.assert_has_rank(1)
        out = tf.cast(out, _I64)
        if out.shape.ndims is not None:
            out.shape.dims[0].assert_is_compatible_with(in_shape.shape.dims[0])
        const = constant_value(out)
        if const is not None and sp.get_shape().is_fully_defined():
            in_const = np.array(sp.get_shape().as_list())
            if not np.all(in_const <= const):
                raise ValueError(f"Requested new_shape should have dimension sizes >= "
                                 f"sp_input.shape.  Found new_shape ({in_const}), "
                                 f"sp_input.shape ({const}).")
            out = const
        else:
            with _tf().control_dependencies([tf.assert_equal(tf.shape(in_shape),
                                                             tf.shape(out))]):
                out = tf.identity(out)
            with _tf().control_dependencies([tf.assert_less_equal(in_shape, out)]):
                out = tf.identity(out)
    return SparseTensor(in_ind, in_val, out)


@ks.api("sparse.transpose", "sparse_transpose")
def sparse_transpose(sp_input: Any, perm: Any = None, name: str | None = None
                     ) -> SparseTensor:
    """The SparseTensor with its dimensions permuted by ``perm`` (default: reversed),
    reordered to row-major order."""
    tf = _tf()
    sp = _convert_sparse(sp_input)
    with name_scope(name, "SparseTranspose", [sp.indices, sp.values, sp.dense_shape]):
        if perm is None:
            if sp.shape.ndims is not None:
                rank = sp.shape.ndims
                perm = rank - 1 - np.arange(0, rank, 1)
            else:
                rank = tf.size(sp.dense_shape)
                perm = rank - 1 - tf.range(0, rank, 1)
        ind = tf.transpose(tf.gather(tf.transpose(sp.indices), perm))
        p = constant_value(convert_to_tensor(perm))
        if p is not None and sp.get_shape().is_fully_defined():
            old = sp.get_shape().as_list()
            new_shape: Any = [old[int(i)] for i in np.asarray(p).reshape(-1)]
        else:
            new_shape = tf.gather(sp.dense_shape, perm)
        return sparse_reorder(SparseTensor(ind, sp.values, new_shape))


@ks.api("sparse.expand_dims")
def sparse_expand_dims(sp_input: Any, axis: Any = None, name: str | None = None
                       ) -> SparseTensor:
    """The SparseTensor with a dimension of size 1 inserted at ``axis`` (default -1)."""
    tf = _tf()
    sp = _convert_sparse(sp_input)
    rank = _vec_len(sp.dense_shape)
    if rank is None:
        rank = tf.shape(sp.dense_shape)[0]
    axis = -1 if axis is None else axis
    with name_scope(name, "expand_dims", [sp.indices, sp.values, sp.dense_shape]):
        if isinstance(axis, numbers.Integral):
            axis = convert_to_tensor(axis, name="axis", dtype=_dt.int32)
        elif not isinstance(axis, Tensor):
            raise TypeError("axis must be an integer value in range [-rank(sp_input) - 1, "
                            "rank(sp_input)]")
        axis = tf.where_v2(axis >= 0, axis, axis + rank + 1)
        column_size = tf.shape(sp.indices)[0]
        new_index = tf.zeros([column_size, 1], dtype=_I64)
        before = tf.slice(sp.indices, [0, 0], [-1, axis])
        after = tf.slice(sp.indices, [0, axis], [-1, -1])
        indices = tf.concat([before, new_index, after], axis=1)
        shape_before = tf.slice(sp.dense_shape, [0], [axis])
        shape_after = tf.slice(sp.dense_shape, [axis], [-1])
        one = convert_to_tensor([1], name="new_shape", dtype=_I64)
        shape = tf.concat([shape_before, one, shape_after], axis=0)
        out = SparseTensor(indices=indices, values=sp.values, dense_shape=shape)
        a = constant_value(axis)
        if a is not None and isinstance(rank, int):
            # TF's shape inference knows where the new dimension goes, not the others
            out.set_shape([None] * int(a) + [1] + [None] * (rank - int(a)))
        return out


def _int64_tensor(value: Any, name: str) -> Tensor:
    if isinstance(value, numbers.Integral):
        return convert_to_tensor(value, name=name, dtype=_I64)
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be an integer value")
    return value if value.dtype.base_dtype is _I64 else _tf().cast(value, _I64)


@ks.api("sparse.eye")
def sparse_eye(num_rows: Any, num_columns: Any = None, dtype: Any = _dt.float32,
               name: str | None = None) -> SparseTensor:
    """A sparse ``[num_rows, num_columns]`` identity matrix."""
    tf = _tf()
    with name_scope(name, "eye", [num_rows, num_columns]):
        num_rows = _int64_tensor(num_rows, "num_rows")
        num_columns = num_rows if num_columns is None else _int64_tensor(num_columns,
                                                                         "num_columns")
        diag = tf.minimum(num_rows, num_columns)
        rng = tf.range(diag, dtype=_I64)
        return SparseTensor(indices=tf.stack([rng, rng], axis=1),
                            values=tf.ones(diag, dtype=dtype),
                            dense_shape=[num_rows, num_columns])


def _merge_impl(sp_ids: Any, sp_values: Any, vocab_size: Any, name: str | None = None,
                already_sorted: bool = False) -> SparseTensor:
    tf = _tf()
    if isinstance(sp_ids, (SparseTensor, SparseTensorValue)):
        sp_ids = [sp_ids]
        if not isinstance(vocab_size, (Tensor, numbers.Integral)):
            raise TypeError(f"vocab_size has to be a Tensor or Python int. Found "
                            f"{type(vocab_size)}")
        vocab_size = [vocab_size]
    else:
        if not isinstance(sp_ids, Iterable):
            raise TypeError(f"sp_ids has to be a SparseTensor or list thereof. Found "
                            f"{type(sp_ids)}")
        if not isinstance(vocab_size, Iterable):
            raise TypeError(f"vocab_size has to be a list of Tensors or Python ints. Found "
                            f"{type(vocab_size)}")
        for dim in vocab_size:
            if not isinstance(dim, (Tensor, numbers.Integral)):
                raise TypeError(f"vocab_size has to be a list of Tensors or Python ints. "
                                f"Found {type(dim)}")
    sp_ids, vocab_size = list(sp_ids), list(vocab_size)
    if len(sp_ids) != len(vocab_size):
        raise ValueError("sp_ids and vocab_size have to have equal lengths.")
    with name_scope(name, "SparseMerge", []):
        sp_ids = [_convert_sparse(s) for s in sp_ids]
        sp_values = _convert_sparse(sp_values)
        ids = []
        for s in sp_ids:
            v = s.values if s.dtype.base_dtype is _I64 else tf.cast(s.values, _I64)
            ids.append(tf.expand_dims(v, axis=1))
        vocab = [tf.cast(x, _I64) for x in vocab_size]
        new_ind = tf.concat([sp_ids[0].indices[:, :-1]] + ids, 1)
        new_shape = tf.concat([sp_ids[0].dense_shape[:-1], vocab], 0)
        result = SparseTensor(new_ind, sp_values.values, new_shape)
        if already_sorted:
            return result
        ordered = sparse_reorder(result)
        return SparseTensor(ordered.indices, ordered.values, new_shape)


@ks.api("sparse.merge", "sparse_merge")
def sparse_merge(sp_ids: Any, sp_values: Any, vocab_size: Any, name: str | None = None,
                 already_sorted: bool = False) -> SparseTensor:
    """Ids and values (two SparseTensors of the same indices) as one SparseTensor whose
    last dimension is the id (of size ``vocab_size``)."""
    return _merge_impl(sp_ids, sp_values, vocab_size, name, already_sorted)


@ks.api("sparse.to_indicator", "sparse_to_indicator")
def sparse_to_indicator(sp_input: Any, vocab_size: Any, name: str | None = None) -> Tensor:
    """A dense bool tensor, ``[..., vocab_size]``, true at each id of the last dimension."""
    tf = _tf()
    sp = _convert_sparse(sp_input)
    with name_scope(name, "SparseToIndicator", [sp.indices, sp.values, sp.dense_shape]) \
            as name:
        n = tf.shape(sp.indices)[0]
        new_values = tf.fill(tf.expand_dims(n, 0), True)
        sp_values = SparseTensor(sp.indices, new_values, sp.dense_shape)
        sp_new = _merge_impl(sp, sp_values, vocab_size, name)
        return sparse_tensor_to_dense(sp_new, default_value=False, validate_indices=False,
                                      name=name)


@ks.api("sparse.mask", "sparse_mask")
def sparse_mask(a: Any, mask_indices: Any, name: str | None = None) -> Any:
    """The slices of the IndexedSlices ``a`` whose indices are not in ``mask_indices``."""
    tf = _tf()
    with name_scope(name, "sparse_mask", [a.indices, a.values, mask_indices]) as name:
        out_indices, to_gather = tf.setdiff1d(a.indices, mask_indices)
        out_values = tf.gather(a.values, to_gather, name=name)
        return tf.IndexedSlices(out_values, out_indices, a.dense_shape)


# =======================================================================================
# placeholders and conversions
# =======================================================================================
@ks.api("sparse.placeholder", "sparse_placeholder")
def sparse_placeholder(dtype: Any, shape: Any = None, name: str | None = None
                       ) -> SparseTensor:
    """A SparseTensor of placeholders, fed with a SparseTensorValue or an ``(indices,
    values, dense_shape)`` tuple; a given ``shape`` (with None or -1 for unknown
    dimensions) is the default of the fed dense shape and sets the static shape."""
    tf = _tf()
    shape_name = f"{name}/shape" if name is not None else None
    default_name = f"{name}/shape_default" if name is not None else None
    if shape is None:
        rank = None
        dense_shape = tf.placeholder(_I64, shape=[rank], name=shape_name)
        default = constant_value_as_shape(dense_shape)
    else:
        if isinstance(shape, Tensor):
            rank = shape.shape.as_list()[0] if shape.shape.ndims else None
            default = constant_value_as_shape(shape)
        else:
            dims = list(shape.as_list()) if isinstance(shape, TensorShape) else list(shape)
            rank = len(dims)
            dims = [getattr(d, "value", d) for d in dims]
            default = TensorShape([None if d is None or d == -1 else d for d in dims])
            shape = convert_to_tensor([-1 if d is None else d for d in dims], dtype=_I64,
                                      name=default_name)
        dense_shape = tf.placeholder_with_default(shape, shape=shape.shape, name=shape_name)
    result = SparseTensor(
        values=tf.placeholder(dtype, shape=[None],
                              name=f"{name}/values" if name is not None else None),
        indices=tf.placeholder(_I64, shape=[None, rank],
                               name=f"{name}/indices" if name is not None else None),
        dense_shape=dense_shape)
    result.set_shape(default)
    return result


ks.export("SparseTensor", SparseTensor)
ks.export("sparse.SparseTensor", SparseTensor)
ks.export("SparseTensorValue", SparseTensorValue)
ks.api("convert_to_tensor_or_sparse_tensor")(convert_to_tensor_or_sparse_tensor)


def _export_sparse_segment_ops() -> None:
    """``tf.sparse.segment_*`` are the ``tf.sparse_segment_*`` functions (defined with the
    other segment ops in special_math_ops, imported before this module)."""
    for n in ("segment_sum", "segment_mean", "segment_sqrt_n"):
        fn = ks.api_names.get(f"sparse_{n}") or ks.api_names.get(f"math.sparse_{n}")
        if fn is not None and f"sparse.{n}" not in ks.api_names:
            ks.api(f"sparse.{n}")(fn)


_export_sparse_segment_ops()


# =======================================================================================
# serialize / deserialize (three serialized TensorProtos per sparse tensor, as TF)
# =======================================================================================
def _serialize_shapes(many: bool) -> Any:
    return lambda op: [TensorShape([None, 3] if many else [3])]


for _name, _many in (("SerializeSparse", False), ("SerializeManySparse", True)):
    ks.op(OpDef(_name,
                inputs=["sparse_indices: int64", "sparse_values: T", "sparse_shape: int64"],
                outputs=["serialized_sparse: out_type"],
                attrs=["T: type", "out_type: {string, variant} = DT_STRING"],
                shape_fn=_serialize_shapes(_many),
                doc="A sparse tensor (or each row of a batch of them) as 3 serialized "
                    "TensorProtos."))
ks.op(OpDef("DeserializeManySparse", inputs=["serialized_sparse: string"],
            outputs=["sparse_indices: int64", "sparse_values: dtype", "sparse_shape: int64"],
            attrs=["dtype: type"], shape_fn=lambda op: _sparse_outputs(None),
            doc="A batch of serialized sparse tensors as one sparse tensor, batch first."))
ks.not_differentiable("SerializeSparse", "SerializeManySparse", "DeserializeManySparse")


def _proto_bytes(a: np.ndarray) -> bytes:
    from flowrt.base.tensor_codec import make_tensor_proto

    if a.dtype == object:
        return make_tensor_proto(a, dtype=_dt.string).SerializeToString()
    return make_tensor_proto(a).SerializeToString()


def _from_proto(b: Any, what: str) -> np.ndarray:
    from flowrt.base.tensor_codec import make_ndarray
    from flowrt.proto.tensor_pb2 import TensorProto

    p = TensorProto()
    try:
        p.ParseFromString(b if isinstance(b, bytes) else bytes(b))
        return make_ndarray(p)
    except Exception:  # noqa: BLE001 -- any malformed input is the caller's error
        raise _invalid(f"Could not parse serialized_sparse[{what}]") from None


@ks.kernel("SerializeSparse", "SerializeManySparse", device_type="CPU")
def _serialize_kernel(ctx: Any) -> Any:
    many = ctx.op_type == "SerializeManySparse"
    if ctx.attrs.get("out_type", _dt.string).base_dtype is not _dt.string:
        raise errors.UnimplementedError(None, None, "out_type variant is not supported")

    def one(ind: np.ndarray, vals: np.ndarray, shape: np.ndarray) -> list[bytes]:
        return [_proto_bytes(ind), _proto_bytes(vals), _proto_bytes(shape)]

    def serialize(ind: Any, vals: Any, shape: Any) -> Any:
        _check_sparse(ind, vals, shape)
        idx, shape = _i64(ind), _i64(shape)
        if not many:
            return _strs_obj(one(idx, vals, shape), (3,))
        if shape.shape[0] < 2:
            raise _invalid(f"Rank of input SparseTensor should be > 1, but saw rank: "
                           f"{shape.shape[0]}")
        order = _row_order(idx)
        idx, vals = idx[order], vals[order]
        rows = []
        for b in range(int(shape[0])):
            keep = idx[:, 0] == b
            rows.extend(one(np.ascontiguousarray(idx[keep][:, 1:]), vals[keep], shape[1:]))
        return _strs_obj(rows, (int(shape[0]), 3))

    return serialize


def _strs_obj(items: list[bytes], shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    for i, v in enumerate(items):
        out[i] = v
    return out.reshape(shape)


@ks.kernel("DeserializeManySparse", device_type="CPU")
def _deserialize_kernel(ctx: Any) -> Any:
    dt = ctx.attrs["dtype"].base_dtype

    def deserialize(ser: Any) -> Any:
        if ser.ndim != 2 or ser.shape[1] != 3:
            raise _invalid(f"Serialized sparse should be a matrix with 3 columns but "
                           f"received shape {list(ser.shape)}")
        parts, shapes = [], []
        for b in range(ser.shape[0]):
            ind = _from_proto(ser[b, 0], f"{b}, 0").astype(np.int64)
            val = _from_proto(ser[b, 1], f"{b}, 1")
            shp = _from_proto(ser[b, 2], f"{b}, 2").astype(np.int64)
            if val.dtype != np.dtype(dt.np):
                raise _invalid(f"Requested SparseTensor of type {dt.name} but "
                               f"SparseTensor[{b}].values.dtype() == "
                               f"{_dt.as_dtype(val.dtype).name}")
            if shapes and shp.shape != shapes[0].shape:
                raise _invalid(f"Inconsistent rank across SparseTensors: rank prior to "
                               f"SparseTensor[{b}] was: {shapes[0].shape[0]} but rank of "
                               f"SparseTensor[{b}] is: {shp.shape[0]}")
            ind = ind.reshape(-1, shp.shape[0])
            parts.append((np.concatenate([np.full((ind.shape[0], 1), b, np.int64), ind], 1),
                          val))
            shapes.append(shp)
        if not parts:
            return np.zeros((0, 1), np.int64), np.zeros(0, dt.np), np.array([0], np.int64)
        out_shape = np.concatenate([[len(parts)], np.max(np.stack(shapes), axis=0)])
        ind = np.concatenate([p[0] for p in parts]).reshape(-1, len(out_shape))
        vals = np.concatenate([p[1] for p in parts])
        return ind, vals, out_shape.astype(np.int64)

    return deserialize


@ks.api("io.serialize_sparse", "serialize_sparse")
def serialize_sparse(sp_input: Any, name: str | None = None, out_type: Any = _dt.string
                     ) -> Tensor:
    """A SparseTensor as a string 3-vector of serialized TensorProtos (indices, values,
    dense_shape)."""
    sp = _convert_sparse(sp_input)
    return apply_op("SerializeSparse", name=name, sparse_indices=sp.indices,
                    sparse_values=sp.values, sparse_shape=sp.dense_shape, out_type=out_type)


@ks.api("io.serialize_many_sparse", "serialize_many_sparse")
def serialize_many_sparse(sp_input: Any, name: str | None = None, out_type: Any = _dt.string
                          ) -> Tensor:
    """Each row (first dimension) of a SparseTensor serialized as by
    ``serialize_sparse``: a ``[N, 3]`` string matrix."""
    sp = _convert_sparse(sp_input)
    return apply_op("SerializeManySparse", name=name, sparse_indices=sp.indices,
                    sparse_values=sp.values, sparse_shape=sp.dense_shape, out_type=out_type)


@ks.api("io.deserialize_many_sparse", "deserialize_many_sparse")
def deserialize_many_sparse(serialized_sparse: Any, dtype: Any, rank: Any = None,
                            name: str | None = None) -> SparseTensor:
    """The SparseTensor of a ``[N, 3]`` batch of serialized sparse tensors (each row one
    entry of the new first dimension; the shape is the largest of each dimension)."""
    ind, vals, shape = apply_op("DeserializeManySparse", name=name,
                                serialized_sparse=serialized_sparse, dtype=dtype)
    ind.set_shape([None, rank])
    shape.set_shape([rank])
    return SparseTensor(ind, vals, shape)


# =======================================================================================
# SparseMatMul: a dense matmul with sparsity hints (tf.sparse_matmul)
# =======================================================================================
ks.op(OpDef("SparseMatMul", inputs=["a: Ta", "b: Tb"], outputs=["product: float"],
            attrs=["transpose_a: bool = false", "transpose_b: bool = false",
                   "a_is_sparse: bool = false", "b_is_sparse: bool = false",
                   "Ta: {float, bfloat16} = DT_FLOAT", "Tb: {float, bfloat16} = DT_FLOAT"],
            shape_fn=lambda op: [_matmul_static(op)],
            doc="A matrix product of dense matrices hinted to be mostly zero."))


def _matmul_static(op: Any) -> TensorShape:
    a, b = op.inputs[0].shape, op.inputs[1].shape
    ad = a.as_list() if a.ndims == 2 else [None, None]
    bd = b.as_list() if b.ndims == 2 else [None, None]
    if op.node_attrs.get("transpose_a", False):
        ad = ad[::-1]
    if op.node_attrs.get("transpose_b", False):
        bd = bd[::-1]
    if ad[1] is not None and bd[0] is not None and ad[1] != bd[0]:
        raise ValueError(f"Dimensions must be equal, but are {ad[1]} and {bd[0]} for "
                         f"'{op.name}' (op: 'SparseMatMul')")
    return TensorShape([ad[0], bd[1]])


@ks.kernel("SparseMatMul", device_type="CPU")
def _sparse_matmul_kernel(ctx: Any) -> Any:
    ta, tb = ctx.attrs.get("transpose_a", False), ctx.attrs.get("transpose_b", False)

    def mm(a: Any, b: Any) -> Any:
        a = a.T if ta else a
        b = b.T if tb else b
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
            raise _invalid(f"Matrix size-incompatible: In[0]: {list(a.shape)}, In[1]: "
                           f"{list(b.shape)}")
        return (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float32)

    return mm


@ks.gradient("SparseMatMul")
def _sparse_matmul_grad(op: Any, grad: Tensor) -> list[Any]:
    tf = _tf()
    a, b = op.inputs
    ta, tb = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    if not ta:
        ga = tf.matmul(grad, b, transpose_b=not tb)
    else:
        ga = tf.matmul(b, grad, transpose_a=tb, transpose_b=True)
    if not tb:
        gb = tf.matmul(a, grad, transpose_a=not ta)
    else:
        gb = tf.matmul(grad, a, transpose_a=True, transpose_b=ta)
    return [tf.cast(ga, a.dtype), tf.cast(gb, b.dtype)]


@ks.api("sparse_matmul")
def sparse_matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False,
                  a_is_sparse: bool = False, b_is_sparse: bool = False,
                  name: str | None = None) -> Tensor:
    """``a @ b`` (float32 result) for dense matrices hinted to be sparse; the hints only
    choose TF's algorithm, the values are those of ``tf.matmul``."""
    return apply_op("SparseMatMul", name=name, a=a, b=b, transpose_a=transpose_a,
                    transpose_b=transpose_b, a_is_sparse=a_is_sparse, b_is_sparse=b_is_sparse)


# =======================================================================================
# SparseCross: tf.sparse.cross, tf.sparse.cross_hashed
# =======================================================================================
_CROSS_MUL = 0xC6A4A7935BD1E995
_M64 = (1 << 64) - 1
_DEFAULT_HASH_KEY = 0xDECAFCAFFE


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def _fingerprint_cat64(fp1: int, fp2: int) -> int:
    """TF's ``FingerprintCat64``: combines two 64-bit fingerprints."""
    result = fp1 ^ _CROSS_MUL
    result ^= (_shift_mix((fp2 * _CROSS_MUL) & _M64) * _CROSS_MUL) & _M64
    result = (result * _CROSS_MUL) & _M64
    result = (_shift_mix(result) * _CROSS_MUL) & _M64
    return _shift_mix(result)


def _cross_shape(op: Any) -> list[TensorShape]:
    return [TensorShape([None, 2]), TensorShape([None]), TensorShape([2])]


ks.op(OpDef("SparseCross",
            inputs=["indices: N * int64", "values: sparse_types", "shapes: N * int64",
                    "dense_inputs: dense_types"],
            outputs=["output_indices: int64", "output_values: out_type",
                     "output_shape: int64"],
            attrs=["N: int >= 0", "hashed_output: bool", "num_buckets: int >= 0",
                   "hash_key: int", "sparse_types: list(type) >= 0",
                   "dense_types: list(type) >= 0", "out_type: {int64, string}",
                   "internal_type: {int64, string}"],
            shape_fn=_cross_shape,
            doc="The row-wise cross product of sparse and dense feature columns."))


def _cross_columns(n: int, args: list[Any]) -> tuple[list[Any], int]:
    """Per column, a function ``row -> list of feature values``; and the batch size."""
    inds, vals, shapes, dense = args[:n], args[n:2 * n], args[2 * n:3 * n], args[3 * n:]
    batch = None
    cols: list[Any] = []
    for i in range(n):
        ind, val, shp = _i64(inds[i]), np.asarray(vals[i]), _i64(shapes[i])
        if ind.ndim != 2 or ind.shape[1] != 2:
            raise _invalid(f"Expected D2 of index to be 2 got {ind.shape[-1] if ind.ndim else 0}"
                           f" at position {i}")
        if shp.shape != (2,):
            raise _invalid(f"Expected D1 of shape to be 2 got {shp.size} at position {i}")
        if val.shape[0] != ind.shape[0]:
            raise _invalid(f"Expected size of values to be {ind.shape[0]} got "
                           f"{val.shape[0]} at position {i}")
        b = int(shp[0])
        if batch is None:
            batch = b
        elif b != batch:
            raise _invalid(f"Expected batch size {batch} got {b} at position {i}")
        rows: list[list[Any]] = [[] for _ in range(b)]
        for r, v in zip(ind[:, 0].tolist(), val.reshape(-1).tolist()):
            if 0 <= r < b:
                rows[r].append(v)
        cols.append(rows)
    for i, d in enumerate(dense):
        d = np.asarray(d)
        if d.ndim != 2:
            raise _invalid(f"Dense inputs should be a matrix but received shape "
                           f"{list(d.shape)} at position {i}")
        if batch is None:
            batch = d.shape[0]
        elif d.shape[0] != batch:
            raise _invalid(f"Expected batch size {batch} got {d.shape[0]} at dense tensor {i}")
        cols.append([list(row) for row in d.tolist()])
    return cols, batch or 0


def _cross_feature_str(v: Any) -> bytes:
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode()
    return str(int(v)).encode()


def _cross_feature_hash(v: Any) -> int:
    if isinstance(v, (bytes, np.bytes_, str)):
        return fingerprint64(v.encode() if isinstance(v, str) else bytes(v))
    return int(v) & _M64


@ks.kernel("SparseCross", device_type="CPU")
def _sparse_cross_kernel(ctx: Any) -> Any:
    n = int(ctx.attrs["N"])
    hashed = bool(ctx.attrs["hashed_output"])
    buckets = int(ctx.attrs["num_buckets"])
    key = int(ctx.attrs["hash_key"]) & _M64

    def sparse_cross(*args: Any) -> Any:
        cols, batch = _cross_columns(n, list(args))
        out_ind: list[tuple[int, int]] = []
        out_val: list[Any] = []
        width = 0
        for b in range(batch):
            feats = [c[b] for c in cols]
            j = 0
            for combo in (itertools.product(*feats) if feats else ()):
                if hashed:
                    h = key
                    for v in combo:
                        h = _fingerprint_cat64(h, _cross_feature_hash(v))
                    out_val.append(h % buckets if buckets > 0 else h % ((1 << 63) - 1))
                else:
                    out_val.append(b"_X_".join(_cross_feature_str(v) for v in combo))
                out_ind.append((b, j))
                j += 1
            width = max(width, j)
        ind = np.array(out_ind, dtype=np.int64).reshape(-1, 2)
        vals = (np.array(out_val, dtype=np.int64) if hashed
                else np.array(out_val, dtype=object).reshape(-1))
        return ind, vals, np.array([batch, width], dtype=np.int64)

    return sparse_cross


ks.not_differentiable("SparseCross")


def _sparse_cross(inputs: Any, hashed: bool, num_buckets: int, hash_key: Any,
                  name: str | None) -> SparseTensor:
    if not isinstance(inputs, list):
        raise TypeError("Inputs must be a list")
    if not all(isinstance(i, (SparseTensor, Tensor)) for i in inputs):
        raise TypeError("All inputs must be SparseTensors")
    sparse = [i for i in inputs if isinstance(i, SparseTensor)]
    dense = [i for i in inputs if not isinstance(i, SparseTensor)]
    tf = _tf()
    internal = _dt.string
    values = [s.values for s in sparse]
    for i, v in enumerate(values):
        if v.dtype.base_dtype is not _dt.string:
            values[i] = tf.cast(v, _dt.int64)
            internal = _dt.int64
    for i, d in enumerate(dense):
        if d.dtype.base_dtype is not _dt.string:
            dense[i] = tf.cast(d, _dt.int64)
            internal = _dt.int64
    out_type = _dt.int64 if hashed else _dt.string
    ind, vals, shape = _cross_outputs(sparse, values, dense, hashed, num_buckets, hash_key,
                                      out_type, internal, name)
    return SparseTensor(ind, vals, shape)


def _cross_outputs(sparse: list[SparseTensor], values: list[Tensor], dense: list[Tensor],
                   hashed: bool, num_buckets: int, hash_key: Any, out_type: Any,
                   internal: Any, name: str | None) -> list[Tensor]:
    out = apply_op("SparseCross", name=name, indices=[s.indices for s in sparse],
                   values=values, shapes=[s.dense_shape for s in sparse],
                   dense_inputs=dense, N=len(sparse), hashed_output=hashed,
                   num_buckets=int(num_buckets),
                   hash_key=int(hash_key or _DEFAULT_HASH_KEY),
                   sparse_types=[v.dtype.base_dtype for v in values],
                   dense_types=[d.dtype.base_dtype for d in dense], out_type=out_type,
                   internal_type=internal)
    return list(out)


@ks.api("sparse.cross")
def sparse_cross(inputs: Any, name: str | None = None) -> SparseTensor:
    """The row-wise cross of sparse (and dense ``[batch, k]``) string/int64 feature
    columns: each output value joins one feature of every input with ``"_X_"``
    (sparse inputs first, then dense, as TF orders them)."""
    return _sparse_cross(inputs, False, 0, None, name)


@ks.api("sparse.cross_hashed")
def sparse_cross_hashed(inputs: Any, num_buckets: int = 0, hash_key: Any = None,
                        name: str | None = None) -> SparseTensor:
    """Like :func:`sparse_cross` but each cross is TF's ``FingerprintCat64`` hash of the
    features' fingerprints, modulo ``num_buckets`` when it is positive."""
    return _sparse_cross(inputs, True, num_buckets, hash_key, name)
