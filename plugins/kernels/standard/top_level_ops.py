"""Top-level ``tf.*`` ops of TF 1.15 that no other module holds: ``parallel_stack``,
``repeat``, ``switch_case``, ``batch_scatter_update``, ``extract_volume_patches``,
``edit_distance``, ``random_poisson``, ``timestamp``, ``is_symbolic_tensor``,
``vectorized_map`` (the file and TensorProto ops are in ``top_level_io``).

Ops: ParallelConcat, ExtractVolumePatches, EditDistance, RandomPoissonV2, Timestamp.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.framework.sparse_tensor import SparseTensor, SparseTensorValue
from flowrt.graph import Graph, Tensor, apply_op, convert_to_tensor, get_seed, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, as_shape, unknown_shape

from ._common import constant_value, ks, scalar_shape
from .control_flow_ops import cond
from .functional_ops import map_fn
from .image_common import host, invalid, shape_error, tf_mod, to_device
from .random_ops import _make_rng, _shape_arg
from .control_flow_ops import _flatten, _pack_like

__all__ = ["parallel_stack", "repeat", "switch_case", "batch_scatter_update",
           "extract_volume_patches", "edit_distance", "random_poisson", "timestamp",
           "is_symbolic_tensor", "vectorized_map"]


def _decode(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _type_name(d: _dt.DType) -> str:
    """A dtype as TF's kernel messages print it (DataTypeString: float, double ...)."""
    return {"float32": "float", "float64": "double", "float16": "half"}.get(d.name, d.name)


def _rank_at_most(op: Any, i: int, r: int) -> None:
    n = op.inputs[i].shape.ndims
    if n is not None and n > r:
        what = f"rank {r}" if r == 0 else f"at most rank {r}"
        raise ValueError(f"Shape must be {what} but is rank {n} for '{op.name}' "
                         f"(op: '{op.type}')")


# =======================================================================================
# parallel_stack (ParallelConcat)
# =======================================================================================
def _parallel_concat_shape(op: Any) -> list[TensorShape]:
    out = as_shape(op.node_attrs["shape"])
    if not out.is_fully_defined():
        raise ValueError(f"shape attr must be fully defined. for '{op.name}' "
                         f"(op: 'ParallelConcat')")
    for t in op.inputs:
        s = t.shape
        if s.ndims is None:
            continue
        if out.ndims is not None and s.ndims != out.ndims:
            raise ValueError(f"Shape must be rank {out.ndims} but is rank {s.ndims} for "
                             f"'{op.name}' (op: 'ParallelConcat')")
        d0 = s.as_list()[0] if s.ndims else None
        if d0 is not None and d0 != 1:
            raise ValueError(f"Dimension 0 in both shapes must be equal, but are {d0} and "
                             f"1 for '{op.name}' (op: 'ParallelConcat'): every input must "
                             f"have 1 as its first dimension")
    return [out]


ks.op(OpDef("ParallelConcat", inputs=["values: N * T"], outputs=["output: T"],
            attrs=["N: int >= 1", "T: type", "shape: shape"],
            shape_fn=_parallel_concat_shape,
            doc="Concatenates N tensors of first dimension 1 along that dimension."))


@ks.kernel("ParallelConcat")
def _parallel_concat_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    want = as_shape(ctx.attrs["shape"])

    def compute(*values: Any) -> Any:
        for i, v in enumerate(values):
            if v.ndim == 0 or v.shape[0] != 1:
                raise invalid(f"ParallelConcat input {i} must have 1 as its first "
                              f"dimension, got shape {list(v.shape)}")
            if v.shape[1:] != values[0].shape[1:]:
                raise invalid(f"ParallelConcat input {i} has shape {list(v.shape)}, "
                              f"input 0 has {list(values[0].shape)}")
        out = xp.concatenate(values, axis=0)
        if want.ndims is not None and not want.is_compatible_with(TensorShape(out.shape)):
            raise invalid(f"ParallelConcat output shape {list(out.shape)} does not match "
                          f"the shape attr {want}")
        return out

    return compute


@ks.api("parallel_stack")
def parallel_stack(values: Any, name: str = "parallel_stack") -> Tensor:
    """Stacks ``values`` (same shape and dtype) along a new first axis, as ``tf.stack``
    with axis 0; TF builds it from the ParallelConcat op (no gradient, as in TF), which
    needs the values' static shape."""
    with name_scope(name):
        first = convert_to_tensor(values[0])
        out_shape = TensorShape([len(values)]).concatenate(first.shape)
        tf = tf_mod()
        parts = [tf.expand_dims(v, 0) for v in values]
        return apply_op("ParallelConcat", values=parts, shape=out_shape)


# =======================================================================================
# repeat
# =======================================================================================
def _with_nonzero_rank(data: Tensor) -> Tensor:
    """A scalar as a 1-element vector (TF's _with_nonzero_rank)."""
    tf = tf_mod()
    if data.shape.ndims is not None:
        return tf.stack([data]) if data.shape.ndims == 0 else data
    shp = tf.shape(data)
    return tf.reshape(data, tf.concat([[1], shp], axis=0)[-tf.rank(data):])


def _tile_one(data: Tensor, axis: int, multiple: Any) -> Tensor:
    tf = tf_mod()
    multiples = [1] * data.shape.ndims
    multiples[axis] = multiple
    return tf.tile(data, tf.stack(multiples) if isinstance(multiple, Tensor) else multiples)


@ks.api("repeat")
def repeat(input: Any, repeats: Any, axis: int | None = None,
           name: str | None = None) -> Tensor:
    """Repeats each element of ``input`` along ``axis`` ``repeats`` times (numpy's
    ``np.repeat``); with ``axis=None`` the flattened input. ``repeats`` is a scalar or a
    1-D int tensor of ``input.shape[axis]`` entries. Built as TF builds it (tile and
    reshape, or tile, sequence mask and boolean_mask), so gradients flow to ``input``."""
    tf = tf_mod()
    if axis is None:
        input = tf.reshape(input, [-1])
        axis = 0
    if not isinstance(axis, (int, np.integer)):
        raise TypeError(f"Argument `axis` must be an int. Received `axis` = {axis} of type "
                        f"{type(axis).__name__}")
    axis = int(axis)
    with name_scope(name, "Repeat", [input, repeats]):
        data = convert_to_tensor(input, name="data")
        repeats = convert_to_tensor(repeats, name="repeats")
        if not repeats.dtype.is_integer:
            raise TypeError(f"repeats must be an integer tensor, got {repeats.dtype.name}")
        if repeats.dtype is not _dt.int32:
            repeats = tf.cast(repeats, _dt.int32)
        repeats.shape.with_rank_at_most(1)
        data = _with_nonzero_rank(data)
        rank = data.shape.ndims
        if rank is None:
            raise ValueError("repeat needs the rank of input to be known")
        if not -rank <= axis < rank:
            raise ValueError(f"axis={axis} out of bounds: expected {-rank}<=axis<{rank}")
        axis %= rank
        data_shape = tf.shape(data)
        if repeats.shape.num_elements() == 1:
            reps = tf.reshape(repeats, [])
            tiled = _tile_one(tf.expand_dims(data, axis + 1), axis + 1, reps)
            out_shape = tf.concat([data_shape[:axis], tf.stack([reps * data_shape[axis]]),
                                   data_shape[axis + 1:]], axis=0)
            out = tf.reshape(tiled, out_shape)
            rv = constant_value(repeats)
            dims = data.shape.as_list()
            dims[axis] = (None if rv is None or dims[axis] is None
                          else int(np.asarray(rv).reshape(())) * dims[axis])
            out.set_shape(dims)
            return out
        if repeats.shape.ndims == 1:
            data.shape[axis:axis + 1].assert_is_compatible_with(repeats.shape)
        repeats = tf.broadcast_to(repeats, tf.stack([data_shape[axis]]))
        if axis > 0:
            repeats = tf.broadcast_to(repeats, data_shape[:axis + 1])
            repeats.set_shape([None] * (axis + 1))
        max_repeat = tf.maximum(tf.constant(0, name="zero"), tf.reduce_max(repeats))
        mask = tf.sequence_mask(repeats, max_repeat)
        tiled = _tile_one(tf.expand_dims(data, axis + 1), axis + 1, max_repeat)
        masked = tf.boolean_mask(tiled, mask)
        if axis == 0:
            return masked
        out_shape = tf.concat([data_shape[:axis], [-1], data_shape[axis + 1:]], axis=0)
        out = tf.reshape(masked, out_shape)
        dims = data.shape.as_list()
        dims[axis] = None
        out.set_shape(dims)
        return out


# =======================================================================================
# switch_case
# =======================================================================================
def _branches(branch_fns: Any, default: Any) -> list[Callable[[], Any]]:
    """TF's checks of ``branch_fns``: callables in key order, ``default`` last."""
    if not branch_fns:
        raise ValueError("Must provide at least one item in 'branch_fns'")
    if not isinstance(branch_fns, (list, tuple, dict)):
        raise TypeError("'branch_fns' must be a list, tuple, or dict")
    pairs = list(branch_fns.items()) if isinstance(branch_fns, dict) else list(branch_fns)
    if all(callable(fn) for fn in pairs):
        pairs = list(enumerate(pairs))
    for p in pairs:
        if not isinstance(p, tuple) or len(p) != 2:
            raise TypeError(f"Each entry in 'branch_fns' must be a 2-tuple. Received {p}.")
        key, fn = p
        if not isinstance(key, int):
            raise TypeError(f"key must be a Python `int`, got {type(key)}")
        if not callable(fn):
            raise TypeError(f"fn for key {key} must be callable.")
    keys = [k for k, _ in pairs]
    if min(keys) < 0 or max(keys) >= len(keys) or len(set(keys)) != len(keys):
        raise ValueError(f"branch indices (keys) must form contiguous range of [0 to "
                         f"{len(keys)}) but found {{{','.join(map(str, sorted(keys)))}}}")
    actions = [fn for _, fn in sorted(pairs, key=lambda p: p[0])]
    if default is not None:
        if not callable(default):
            raise TypeError("default must be callable.")
        actions.append(default)
    return actions


@ks.api("switch_case")
def switch_case(branch_index: Any, branch_fns: Any, default: Callable[[], Any] | None = None,
                name: str = "switch_case") -> Any:
    """Runs the branch of ``branch_fns`` whose key is ``branch_index`` (a dict of int to
    callable, a list of (int, callable) pairs, or a list of callables keyed by position);
    an index out of range runs ``default``, or the last branch without one.

    Built as a chain of ``tf.cond``: only the taken branch runs. Every branch must
    return the same structure of tensors."""
    if not isinstance(branch_index, Tensor):
        raise TypeError(f"'branch_index' must be a Tensor, got {type(branch_index)}")
    if not branch_index.dtype.is_integer:
        raise TypeError(f"'branch_index' must be an integer Tensor, got "
                        f"{branch_index.dtype}")
    actions = _branches(branch_fns, default)
    tf = tf_mod()
    with name_scope(name, "case", [branch_index]):
        if len(actions) == 1:
            return actions[0]()
        preds = [tf.equal(branch_index, tf.constant(i, branch_index.dtype))
                 for i in range(len(actions) - 1)]

        def chain(i: int) -> Callable[[], Any]:
            if i == len(actions) - 1:
                return actions[i]
            return lambda: cond(preds[i], actions[i], chain(i + 1))

        return chain(0)()


# =======================================================================================
# batch_scatter_update
# =======================================================================================
@ks.api("batch_scatter_update")
def batch_scatter_update(ref: Any, indices: Any, updates: Any, use_locking: bool = True,
                         name: str | None = None) -> Any:
    """``ref[i_1, ..., i_n, indices[i_1, ..., i_n, j]] = updates[i_1, ..., i_n, j]``:
    a scatter update over the last index dimension of each batch (built from
    ``tf.scatter_nd_update``, as TF does)."""
    tf = tf_mod()
    with name_scope(name):
        indices = convert_to_tensor(indices, name="indices")
        ishape = tf.shape(indices)
        nd = indices.shape.ndims
        if nd is None:
            raise ValueError("batch_gather does not allow indices with unknown shape.")
        nd_indices = tf.expand_dims(indices, axis=-1)
        parts = []
        for d in range(nd - 1):
            size = ishape[d]
            bshape = [1] * (nd + 1)
            bshape[d] = size
            rng = tf.reshape(tf.range(0, size, 1), tf.stack(bshape))
            if rng.dtype.base_dtype != nd_indices.dtype.base_dtype:
                rng = tf.cast(rng, nd_indices.dtype)
            parts.append(rng * tf.ones_like(nd_indices))
        parts.append(nd_indices)
        final = tf.concat(parts, axis=-1)
        return tf.scatter_nd_update(ref, final, updates, use_locking=use_locking)


# =======================================================================================
# extract_volume_patches
# =======================================================================================
def _out_size(op: Any, size: int | None, k: int, s: int, pad: str) -> int | None:
    if size is None:
        return None
    if pad == "SAME":
        return (size + s - 1) // s
    if size < k:
        raise shape_error(op, f"Negative dimension size caused by subtracting {k} from "
                              f"{size}")
    return (size - k + s) // s


def _volume_patches_shape(op: Any) -> list[TensorShape]:
    s = op.inputs[0].shape
    if s.ndims is not None and s.ndims != 5:
        raise shape_error(op, f"Shape must be rank 5 but is rank {s.ndims}")
    ksz = list(op.node_attrs["ksizes"])
    st = list(op.node_attrs["strides"])
    for nm, v in (("ksizes", ksz), ("strides", st)):
        if len(v) != 5:
            raise shape_error(op, f"ExtractVolumePatches requires the {nm} attribute to "
                                  f"contain 5 values, but got: {len(v)}")
        if v[0] != 1 or v[4] != 1:
            raise shape_error(op, f"ExtractVolumePatches is only supported in the planes, "
                                  f"rows and columns dimensions ({nm}: {v})")
    pad = _decode(op.node_attrs["padding"])
    if s.ndims is None:
        return [unknown_shape(5)]
    d = s.as_list()
    outs = [_out_size(op, d[i], ksz[i], st[i], pad) for i in (1, 2, 3)]
    depth = None if d[4] is None else d[4] * ksz[1] * ksz[2] * ksz[3]
    return [TensorShape([d[0], *outs, depth])]


ks.op(OpDef("ExtractVolumePatches", inputs=["input: T"], outputs=["patches: T"],
            attrs=["ksizes: list(int) >= 5", "strides: list(int) >= 5",
                   "T: realnumbertype", "padding: {'SAME', 'VALID'}"],
            shape_fn=_volume_patches_shape,
            doc="Extracts 3-D patches of a 5-D input into the depth dimension."))


def _same_pads(size: int, k: int, s: int) -> tuple[int, int]:
    out = (size + s - 1) // s
    need = max(0, (out - 1) * s + k - size)
    return need // 2, need - need // 2


@ks.kernel("ExtractVolumePatches")
def _volume_patches_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    ksz = [int(v) for v in ctx.attrs["ksizes"]][1:4]
    st = [int(v) for v in ctx.attrs["strides"]][1:4]
    pad = _decode(ctx.attrs["padding"])

    def compute(x: Any) -> Any:
        if x.ndim != 5:
            raise invalid(f"input must be 5-dimensional{list(x.shape)}")
        b, c = x.shape[0], x.shape[4]
        pads, outs = [(0, 0)], []
        for size, k, s in zip(x.shape[1:4], ksz, st):
            if pad == "SAME":
                pads.append(_same_pads(size, k, s))
                outs.append((size + s - 1) // s)
            else:
                pads.append((0, 0))
                outs.append(max(0, (size - k + s) // s))
        xp_ = xp.pad(x, pads + [(0, 0)])
        idx = [(xp.arange(o) * s)[:, None] + xp.arange(k)[None, :]
               for o, k, s in zip(outs, ksz, st)]  # [o_i, k_i] each
        p = xp_[:, idx[0][:, None, None, :, None, None], idx[1][None, :, None, None, :, None],
                idx[2][None, None, :, None, None, :]]  # [b, op, or, oc, kp, kr, kc, c]
        return xp.ascontiguousarray(p.reshape(b, *outs, ksz[0] * ksz[1] * ksz[2] * c))

    return compute


@ks.gradient("ExtractVolumePatches")
def _volume_patches_grad(op: Any, grad: Tensor) -> list[Any]:
    """Each input element's gradient sums the patch entries it was copied to: patches of
    a volume of element numbers say which (0 marks padding)."""
    tf = tf_mod()
    x = op.inputs[0]
    shp = tf.shape(x)
    n = shp[1] * shp[2] * shp[3]
    ids = tf.reshape(tf.range(1, tf.cast(n, _dt.int64) + 1, dtype=_dt.int64),
                     tf.stack([1, shp[1], shp[2], shp[3], 1]))
    pid = apply_op("ExtractVolumePatches", input=ids, ksizes=op.node_attrs["ksizes"],
                   strides=op.node_attrs["strides"], padding=op.node_attrs["padding"])
    pid = tf.reshape(pid, [-1])
    g = tf.transpose(tf.reshape(grad, tf.stack([shp[0], -1, shp[4]])), [1, 0, 2])
    summed = tf.math.unsorted_segment_sum(g, tf.cast(pid, _dt.int32),
                                          tf.cast(n, _dt.int32) + 1)
    return [tf.reshape(tf.transpose(summed[1:], [1, 0, 2]), shp)]


@ks.api("extract_volume_patches")
def extract_volume_patches(input: Any, ksizes: Any, strides: Any, padding: str,
                           name: str | None = None) -> Tensor:
    """Extracts ``ksizes`` patches of the 5-D ``input`` [batch, planes, rows, cols,
    depth] every ``strides`` into the depth dimension (ksizes and strides have 1 first
    and last)."""
    return apply_op("ExtractVolumePatches", name=name, input=input, ksizes=list(ksizes),
                    strides=list(strides), padding=padding)


# =======================================================================================
# edit_distance
# =======================================================================================
def _edit_distance_shape(op: Any) -> list[TensorShape]:
    hs, ts = constant_value(op.inputs[2]), constant_value(op.inputs[5])
    if hs is None or ts is None:
        return [unknown_shape()]
    hs, ts = np.asarray(hs).reshape(-1), np.asarray(ts).reshape(-1)
    if hs.size != ts.size:
        raise ValueError(f"Num elements of hypothesis_shape does not match truth_shape: "
                         f"{hs.size} vs. {ts.size} for '{op.name}' (op: 'EditDistance')")
    return [TensorShape([int(max(a, b)) for a, b in zip(hs[:-1], ts[:-1])])]


ks.op(OpDef("EditDistance",
            inputs=["hypothesis_indices: int64", "hypothesis_values: T",
                    "hypothesis_shape: int64", "truth_indices: int64", "truth_values: T",
                    "truth_shape: int64"],
            outputs=["output: float"], attrs=["normalize: bool = true", "T: type"],
            shape_fn=_edit_distance_shape,
            doc="Levenshtein distances between the sequences of two SparseTensors."))
ks.not_differentiable("EditDistance")


def _levenshtein(a: list[Any], b: list[Any]) -> int:
    if not a:
        return len(b)
    if not b:
        return len(a)
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def _groups(ind: np.ndarray, vals: np.ndarray) -> list[tuple[list[int], list[Any]]]:
    """Consecutive runs of equal leading indices (TF's SparseTensor group), in order."""
    out: list[tuple[list[int], list[Any]]] = []
    for row, v in zip(ind.tolist(), vals.tolist()):
        key = row[:-1]
        if out and out[-1][0] == key:
            out[-1][1].append(v)
        else:
            out.append((key, [v]))
    return out


def _check_edit_inputs(hi: np.ndarray, hv: np.ndarray, hs: np.ndarray, ti: np.ndarray,
                       tv: np.ndarray, ts: np.ndarray) -> None:
    """TF's ValidateShapes for EditDistance (InvalidArgumentError)."""
    for nm, a in (("hypothesis_indices", hi), ("truth_indices", ti)):
        if a.ndim != 2:
            raise invalid(f"{nm} should be a matrix, but got shape: {list(a.shape)}")
    for nm, a in (("hypothesis_values", hv), ("truth_values", tv),
                  ("hypothesis_shape", hs), ("truth_shape", ts)):
        if a.ndim != 1:
            raise invalid(f"{nm} should be a vector, but got shape: {list(a.shape)}")
    if hv.shape[0] != hi.shape[0] or tv.shape[0] != ti.shape[0]:
        raise invalid("Expected as many values as indices in hypothesis and truth")
    if hs.size != hi.shape[1]:
        raise invalid(f"Expected hypothesis_shape.NumElements == #cols(hypothesis_indices), "
                      f"their shapes are: {list(hs.shape)} and {list(hi.shape)}")
    if ts.size < 2:
        raise invalid(f"Input SparseTensors must have rank at least 2, but truth_shape "
                      f"rank is: {ts.size}")
    if ts.size != ti.shape[1]:
        raise invalid(f"Expected truth_shape.NumElements == #cols(truth_indices), their "
                      f"shapes are: {list(ts.shape)} and {list(ti.shape)}")
    if ts.size != hs.size:
        raise invalid(f"Expected truth and hypothesis to have matching ranks, but their "
                      f"shapes are: {list(ts.shape)} and {list(hs.shape)}")


def _edit_distances(hyp: list[Any], tru: list[Any], out: np.ndarray,
                    normalize: bool) -> None:
    """TF's merge walk over the hypothesis and truth groups (both assumed in row-major
    order, as TF assumes): equal keys give the distance, a key on one side only gives
    the other's length (inf / 1.0 when normalized)."""
    flat = out.reshape(-1)
    strides = [int(s) // out.itemsize for s in out.strides] if out.ndim else []

    def put(key: list[int], value: Any) -> None:
        loc = sum(k * s for k, s in zip(key, strides))
        if not 0 <= loc < flat.size:
            raise errors.InternalError(
                None, None, f"Got an inner product {loc} which would require writing to "
                f"outside of the buffer for the output tensor (max elements {flat.size})")
        flat[loc] = value

    i = j = 0
    inf = np.float32(np.inf)
    while i < len(hyp) or j < len(tru):
        if j == len(tru) or (i < len(hyp) and tru[j][0] > hyp[i][0]):
            put(hyp[i][0], inf if normalize else len(hyp[i][1]))  # no truth here
            i += 1
        elif i == len(hyp) or tru[j][0] < hyp[i][0]:
            put(tru[j][0], 1.0 if normalize else len(tru[j][1]))  # no hypothesis here
            j += 1
        else:
            d = np.float32(_levenshtein(tru[j][1], hyp[i][1]))
            put(tru[j][0], d / np.float32(len(tru[j][1])) if normalize else d)
            i += 1
            j += 1


@ks.kernel("EditDistance")
def _edit_distance_kernel(ctx: Any) -> Any:
    normalize = bool(ctx.attrs.get("normalize", True))

    def compute(hi: Any, hv: Any, hs: Any, ti: Any, tv: Any, ts: Any) -> Any:
        hi, hv, hs, ti, tv, ts = (host(ctx, a) for a in (hi, hv, hs, ti, tv, ts))
        _check_edit_inputs(hi, hv, hs, ti, tv, ts)
        out = np.zeros([int(max(a, b)) for a, b in zip(hs[:-1], ts[:-1])], np.float32)
        _edit_distances(_groups(hi, hv), _groups(ti, tv), out, normalize)
        return to_device(ctx, out)

    return compute


@ks.api("edit_distance")
def edit_distance(hypothesis: Any, truth: Any, normalize: bool = True,
                  name: str = "edit_distance") -> Tensor:
    """The Levenshtein distance between the sequences (last dimension) of two
    SparseTensors, as a float32 tensor of rank R-1 whose dims are the larger of the two
    shapes'; ``normalize`` divides by the truth's length (inf for a hypothesis with no
    truth, 1.0 for a truth with no hypothesis)."""
    if not isinstance(hypothesis, (SparseTensor, SparseTensorValue)):
        raise TypeError("Hypothesis must be a SparseTensor.")
    if not isinstance(truth, (SparseTensor, SparseTensorValue)):
        raise TypeError("Truth must be a SparseTensor.")
    return apply_op("EditDistance", name=name,
                    hypothesis_indices=convert_to_tensor(hypothesis.indices, _dt.int64),
                    hypothesis_values=hypothesis.values,
                    hypothesis_shape=convert_to_tensor(hypothesis.dense_shape, _dt.int64),
                    truth_indices=convert_to_tensor(truth.indices, _dt.int64),
                    truth_values=truth.values,
                    truth_shape=convert_to_tensor(truth.dense_shape, _dt.int64),
                    normalize=normalize)


# =======================================================================================
# random_poisson (RandomPoissonV2)
# =======================================================================================
def _poisson_shape(op: Any) -> list[TensorShape]:
    v = constant_value(op.inputs[0])
    if v is not None:
        s = TensorShape([int(x) for x in np.asarray(v).reshape(-1)])
    else:
        d = op.inputs[0].shape.as_tuple()
        s = unknown_shape() if d is None or d[0] is None else TensorShape([None] * d[0])
    return [s.concatenate(op.inputs[1].shape)]


_POISSON_T = "{half, float, double, int32, int64}"
ks.op(OpDef("RandomPoissonV2", inputs=["shape: S", "rate: R"], outputs=["output: dtype"],
            attrs=["seed: int = 0", "seed2: int = 0", "S: {int32, int64}",
                   f"R: {_POISSON_T} = DT_DOUBLE", f"dtype: {_POISSON_T} = DT_INT64"],
            shape_fn=_poisson_shape, is_stateful=True,
            doc="Poisson samples of each rate, shape + rate.shape."))
ks.not_differentiable("RandomPoissonV2")


@ks.kernel("RandomPoissonV2", host_memory=("shape",))
def _random_poisson_kernel(ctx: Any) -> Any:
    rng = _make_rng(ctx)
    out_np = ctx.output_dtypes[0].np

    def compute(shape: Any, rate: Any) -> Any:
        size = _shape_arg(ctx, shape)
        lam = host(ctx, rate).astype(np.float64)
        full = size + lam.shape
        if np.any(lam < 0):
            lam = np.where(lam < 0, np.nan, lam)
        with np.errstate(invalid="ignore"):
            safe = np.where(np.isnan(lam), 0.0, lam)
            draw = rng.poisson(np.broadcast_to(safe, full)).astype(np.float64)
            draw = np.where(np.isnan(np.broadcast_to(lam, full)), np.nan, draw)
        if np.issubdtype(out_np, np.integer):
            draw = np.where(np.isnan(draw), 0, draw)
        return to_device(ctx, draw.astype(out_np))

    return compute


@ks.api("random_poisson", "random.poisson")
def random_poisson(lam: Any, shape: Any, dtype: Any = _dt.float32, seed: int | None = None,
                   name: str | None = None) -> Tensor:
    """``shape`` samples of each Poisson rate in ``lam``: a tensor of shape
    ``shape + lam.shape`` and ``dtype`` (float16/32/64, int32, int64). Seeded like the
    other random ops (numpy's generator, not TF's bit stream)."""
    with name_scope(name, "random_poisson", [lam, shape]):
        shape = convert_to_tensor(shape, name="shape", dtype=_dt.int32)
        seed1, seed2 = get_seed(seed)
        return apply_op("RandomPoissonV2", shape=shape, rate=lam,
                        dtype=_dt.as_dtype(dtype), seed=seed1, seed2=seed2)


# =======================================================================================
# timestamp, is_symbolic_tensor, vectorized_map
# =======================================================================================
ks.op(OpDef("Timestamp", inputs=[], outputs=["ts: float64"], shape_fn=scalar_shape,
            is_stateful=True, doc="Seconds since the epoch, as a float64."))
ks.not_differentiable("Timestamp")


@ks.kernel("Timestamp")
def _timestamp_kernel(ctx: Any) -> Any:
    def compute() -> Any:
        return to_device(ctx, np.array(time.time(), np.float64))

    return compute


@ks.api("timestamp")
def timestamp(name: str | None = None) -> Tensor:
    """The time of the op's run in seconds since the epoch (float64 scalar)."""
    return apply_op("Timestamp", name=name)


@ks.api("is_symbolic_tensor")
def is_symbolic_tensor(tensor: Any) -> bool:
    """Whether ``tensor`` is a graph (symbolic) tensor; in graph-only flowrt, whether it
    is a ``tf.Tensor`` (a variable is not, as in TF)."""
    return isinstance(tensor, Tensor)


def _result_dtypes(fn: Callable[[Any], Any], elems: Any) -> Any:
    """The structure of ``fn``'s result dtypes, found by calling ``fn`` on placeholders
    of one element in a scratch graph (or, when ``fn`` uses tensors of the caller's
    graph, on the first element in that graph: unused ops there are pruned)."""
    tf = tf_mod()
    flat = [convert_to_tensor(e) for e in _flatten(elems)]
    try:
        with Graph().as_default():
            phs = [tf.placeholder(e.dtype, e.shape[1:] if e.shape.ndims else None)
                   for e in flat]
            out = fn(_pack_like(elems, phs))
    except (ValueError, TypeError):
        with name_scope("vectorized_map_probe"):
            out = fn(_pack_like(elems, [e[0] for e in flat]))
    return _pack_like(out, [convert_to_tensor(t).dtype for t in _flatten(out)])


@ks.api("vectorized_map")
def vectorized_map(fn: Callable[[Any], Any], elems: Any) -> Any:
    """``fn`` applied to each slice of ``elems`` along axis 0, results stacked (TF's
    vectorized_map). flowrt does not vectorize: it runs ``tf.map_fn`` (a while loop),
    with the result dtypes found by tracing ``fn`` once."""
    with name_scope(None, "loop_body"):
        dtype = _result_dtypes(fn, elems)
        return map_fn(fn, elems, dtype=dtype)
