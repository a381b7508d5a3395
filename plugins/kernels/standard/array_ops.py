"""array_ops of the standard kernel set: shapes, slicing, joining, gathering, filling.

Op definitions follow TF 1.15's ``array_ops.cc`` (types, attrs, shape functions); the
API functions follow TF 1.15's ``python/ops/array_ops.py`` (argument handling and the
composite ops they build, so GraphDefs match TF's). Kernels are written against
``ctx.xp`` and do their attr parsing in the factory.
"""
from __future__ import annotations

import collections
import sys
from typing import Any, Callable, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.graph import (Tensor, apply_op, convert_to_tensor, get_default_graph,
                          name_scope, register_tensor_conversion_function)
from flowrt.op_registry import KernelContext, OpDef
from flowrt.tensor_shape import Dimension, TensorShape, as_shape, unknown_shape

from ._common import constant_value, host_reader, ks, unchanged_shape

# =======================================================================================
# helpers: errors, partial shapes
# =======================================================================================


def _invalid(msg: str) -> errors.InvalidArgumentError:
    """A run-time InvalidArgumentError (the executor adds the node)."""
    return errors.InvalidArgumentError(None, None, msg)


def _fmt(d: Any) -> str:
    """TF's debug string of a partial shape: ``[2,?]``, ``?`` for unknown rank."""
    if isinstance(d, TensorShape):
        d = d.as_tuple()
    if d is None:
        return "?"
    return "[" + ",".join("?" if x is None else str(x) for x in d) + "]"


def _shape_str(shape: Sequence[int]) -> str:
    """A run-time shape as TF prints it: ``[2,3]``."""
    return "[" + ",".join(str(int(x)) for x in shape) + "]"


def _ctx(op: Any) -> str:
    return (f" for '{op.name}' (op: '{op.type}') with input shapes: "
            + ", ".join(_fmt(t.shape) for t in op.inputs) + ".")


def _shape_error(op: Any, msg: str) -> ValueError:
    """A build-time shape error, in TF's format."""
    return ValueError(msg + _ctx(op))


def _dims(t: Tensor) -> Any:
    return t.shape.as_tuple()


def _merge_dim(a: int | None, b: int | None, op: Any, sa: Any = None, sb: Any = None,
               i: int = 0) -> int | None:
    if a is None:
        return b
    if b is None or a == b:
        return a
    if sa is not None:
        raise _shape_error(op, f"Dimension {i} in both shapes must be equal, but are {a} and "
                               f"{b}. Shapes are {_fmt(sa)} and {_fmt(sb)}.")
    raise _shape_error(op, f"Dimensions must be equal, but are {a} and {b}")


def _merge(a: Any, b: Any, op: Any) -> Any:
    """Merge two partial shapes (tuples or None); ValueError naming ``op`` if they differ."""
    if a is None:
        return b
    if b is None:
        return a
    if len(a) != len(b):
        raise _shape_error(op, f"Shapes must be equal rank, but are {len(a)} and {len(b)}")
    return tuple(_merge_dim(x, y, op, a, b, i) for i, (x, y) in enumerate(zip(a, b)))


def _with_rank(d: Any, rank: int, op: Any) -> tuple[int | None, ...]:
    if d is None:
        return (None,) * rank
    if len(d) != rank:
        raise _shape_error(op, f"Shape must be rank {rank} but is rank {len(d)}")
    return tuple(d)


def _with_rank_at_least(d: Any, rank: int, op: Any) -> Any:
    if d is not None and len(d) < rank:
        raise _shape_error(op, f"Shape must be at least rank {rank} but is rank {len(d)}")
    return d


def _with_rank_at_most(d: Any, rank: int, op: Any) -> Any:
    if d is not None and len(d) > rank:
        raise _shape_error(op, f"Shape must be at most rank {rank} but is rank {len(d)}")
    return d


def _add_dim(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _mul_dim(a: int | None, b: int | None) -> int | None:
    if a == 0 or b == 0:
        return 0
    if a == 1:
        return b
    if b == 1:
        return a
    return None if a is None or b is None else a * b


def _num_elements(d: Any) -> int | None:
    if d is None or any(x is None for x in d):
        return None
    return int(np.prod(d, dtype=np.int64))


def _canon_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _slice_debug(shape: Sequence[int], flat: int) -> str:
    """TF's SliceDebugString: the multi-index of a flat position (``[1,0]``)."""
    if len(shape) == 0:
        return ""
    if len(shape) == 1:
        return f"[{flat}]"
    idx = np.unravel_index(int(flat), tuple(int(s) for s in shape))
    return "[" + ",".join(str(int(i)) for i in idx) + "]"


def _int_list(a: Any, to_host: Callable[[Any], np.ndarray]) -> list[int]:
    """The elements of an int input as Python ints, brought to host memory by
    ``to_host`` (the kernel's ``host_reader``: its device's ``to_host``)."""
    return [int(v) for v in to_host(a).reshape(-1).tolist()]


def _int_scalar(a: Any, to_host: Callable[[Any], np.ndarray]) -> int:
    """The first element of an int input (0 if it is empty), read as :func:`_int_list`."""
    h = to_host(a).reshape(-1)
    return int(h[0]) if h.size else 0


# =======================================================================================
# helpers: build-time values (TF's constant_value / constant_value_as_shape)
# =======================================================================================

# Ops whose value may be computed at graph-build time, by running their CPU kernel on
# constant inputs, as TF's shape inference evaluates small constant subgraphs.
_FOLDABLE = frozenset({
    "Reshape", "Transpose", "ConcatV2", "Pack", "Unpack", "Squeeze", "ExpandDims", "Tile",
    "Slice", "StridedSlice", "Gather", "GatherV2", "GatherNd", "Fill", "Range", "ZerosLike",
    "OnesLike", "ReverseV2", "Size", "Rank", "Shape", "ShapeN", "BroadcastArgs",
    "BroadcastTo", "InvertPermutation", "Pad", "PadV2", "Split", "SplitV", "OneHot",
    "Select", "SelectV2", "Where", "StopGradient", "IdentityN", "Identity", "Snapshot",
    "Cast", "Add", "AddV2", "Sub", "Mul", "FloorDiv", "FloorMod", "Maximum", "Minimum",
    "Neg", "Abs", "Prod", "Sum", "Max", "Min", "Equal", "NotEqual", "Less", "LessEqual",
    "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "TruncateDiv",
})
_FOLD_LIMIT = 1 << 12


class _HostDevice:
    """The stand-in device for evaluating kernels at build time."""

    xp = np
    device_type = "CPU"
    name = "/job:localhost/replica:0/task:0/device:CPU:0"


_HOST = _HostDevice()


def _static_value(t: Any, depth: int = 0) -> np.ndarray | None:
    """The value of ``t`` when it is known at build time, else None."""
    if not isinstance(t, Tensor):
        return constant_value(t)
    v = constant_value(t)
    if v is not None or depth > 10:
        return None if v is None else np.asarray(v)
    op = t.op
    if op.type not in _FOLDABLE or op.op_def is None or op.op_def.is_stateful:
        return None
    if op.type in ("Shape", "ShapeN", "Size", "Rank"):
        return None  # constant_value already handled the static cases
    if op.type == "StridedSlice" and op.inputs[0].op.type == "Shape":
        return _slice_of_shape(t)
    ins = []
    for x in op.inputs:
        xv = _static_value(x, depth + 1)
        if xv is None or np.size(xv) > _FOLD_LIMIT:
            return None
        ins.append(xv)
    try:
        kdef = op.graph._runtime.find_kernel(op.type, "CPU")
        if kdef is None or kdef.kind != "plain":
            return None
        fn = kdef.factory(KernelContext(op, _HOST))
        out = fn(*ins)
    except Exception:  # noqa: BLE001 - an invalid constant subgraph: unknown value
        return None
    if isinstance(out, (tuple, list)):
        out = out[t.value_index]
    out = np.asarray(out, dtype=t.dtype.base_dtype.np)
    return out if out.size <= _FOLD_LIMIT else None


def _slice_of_shape(t: Tensor) -> np.ndarray | None:
    """``tf.shape(x)[...]`` when the selected dimensions of x are statically known."""
    op = t.op
    d = op.inputs[0].op.inputs[0].shape.as_tuple()
    vals = [_static_value(x) for x in op.inputs[1:4]]
    if d is None or any(v is None for v in vals):
        return None
    a = op.node_attrs
    try:
        dense, gather = _strided_slice_spec(
            (len(d),), *([int(x) for x in v.reshape(-1)] for v in vals),
            a.get("begin_mask", 0), a.get("end_mask", 0), a.get("ellipsis_mask", 0),
            a.get("new_axis_mask", 0), a.get("shrink_axis_mask", 0))
    except _SliceSpecError:
        return None
    picked = np.array(d, dtype=object)[_numpy_key(dense, gather)]
    if any(x is None for x in picked.reshape(-1)):
        return None
    return picked.astype(t.dtype.base_dtype.np)


def _static_int(t: Any) -> int | None:
    v = _static_value(t)
    if v is None or v.size != 1:
        return None
    return int(v.reshape(-1)[0])


def _shape_value(t: Tensor, op: Any) -> TensorShape:
    """The partial shape a 1-D shape tensor holds (TF's MakeShapeFromShapeTensor):
    -1 and values unknown at build time become unknown dimensions."""
    d = _with_rank(_dims(t), 1, op)
    if d[0] == 0:
        return TensorShape([])
    v = _static_value(t)
    if v is not None:
        vals = [int(x) for x in v.reshape(-1)]
        for x in vals:
            if x < -1:
                raise _shape_error(op, f"Invalid value in tensor used for shape: {x}")
        return TensorShape([None if x == -1 else x for x in vals])
    p = t.op
    if p.type == "Shape":
        return p.inputs[0].shape
    if p.type == "Pack" and p.node_attrs.get("axis", 0) == 0:
        out = []
        for x in p.inputs:
            xv = _static_value(x)
            out.append(None if xv is None or int(xv) < 0 else int(xv))
        return TensorShape(out)
    if p.type == "ConcatV2":
        parts: list[int | None] = []
        for x in p.inputs[:-1]:
            s = _shape_value(x, op)
            if s.ndims is None:
                return unknown_shape(d[0])
            parts.extend(s.as_tuple())
        return TensorShape(parts)
    if p.type == "StridedSlice":
        b, e, s = (_static_value(x) for x in p.inputs[1:4])
        a = p.node_attrs
        if (b is not None and e is not None and s is not None and b.size == 1
                and not a.get("ellipsis_mask") and not a.get("new_axis_mask")
                and not a.get("shrink_axis_mask") and a.get("begin_mask", 0) in (0, 1)
                and a.get("end_mask", 0) in (0, 1)):
            src = _shape_value(p.inputs[0], op) if _dims(p.inputs[0]) == (None,) or \
                (_dims(p.inputs[0]) is not None and len(_dims(p.inputs[0])) == 1) else None
            if src is not None and src.ndims is not None:
                lo = None if a.get("begin_mask", 0) == 1 else int(b[0])
                hi = None if a.get("end_mask", 0) == 1 else int(e[0])
                return TensorShape(src.as_tuple()[lo:hi:int(s[0])])
    return unknown_shape(d[0])


def _has_tensor(v: Any) -> bool:
    if isinstance(v, Tensor) or (hasattr(v, "_as_graph_element") and not isinstance(v, type)):
        return True
    if isinstance(v, (list, tuple)):
        return any(_has_tensor(x) for x in v)
    return False


def _first_tensor(v: Any) -> Tensor | None:
    if isinstance(v, Tensor):
        return v
    if hasattr(v, "_as_graph_element") and not isinstance(v, type):
        return convert_to_tensor(v)
    if isinstance(v, (list, tuple)):
        for x in v:
            t = _first_tensor(x)
            if t is not None:
                return t
    if isinstance(v, dict):
        for x in v.values():
            t = _first_tensor(x)
            if t is not None:
                return t
    return None


def _cast(x: Tensor, dtype: _dt.DType, name: str = "Cast") -> Tensor:
    """A Cast node (``gen_math_ops.cast``) unless ``x`` already has ``dtype``."""
    if x.dtype.base_dtype is dtype:
        return x
    return apply_op("Cast", name=name, x=x, DstT=dtype)


def _autopack(value: Sequence[Any], dtype: _dt.DType | None, name: str) -> Any:
    """TF's auto-packing of a (nested) list holding tensors into one ``Pack`` node."""
    first = _first_tensor(value)
    inferred = first.dtype.base_dtype if first is not None else None
    want = dtype or inferred
    g = first.graph if first is not None else get_default_graph()
    with g.as_default(), g.name_scope(name) as scope:
        elems: list[Any] = []
        for i, e in enumerate(value):
            if isinstance(e, Tensor) or (hasattr(e, "_as_graph_element")
                                         and not isinstance(e, type)):
                e = convert_to_tensor(e)
                if want is not None and e.dtype.base_dtype is not want:
                    if dtype is None:
                        raise TypeError(f"Cannot convert a list containing a tensor of dtype "
                                        f"{e.dtype.base_dtype.name} to {want.name} (Tensor is: "
                                        f"{e!r})")
                    e = _cast(e, want)
            elif isinstance(e, (list, tuple)) and _has_tensor(e):
                e = _autopack(e, want, str(i))
            elems.append(e)
        ts = [e if isinstance(e, Tensor) else convert_to_tensor(e, dtype=want, name=str(i))
              for i, e in enumerate(elems)]
        return apply_op("Pack", name=scope, values=ts, axis=0)


def _convert(value: Any, dtype: Any = None, name: str | None = None,
             preferred_dtype: Any = None) -> Tensor:
    """``convert_to_tensor`` that also packs lists holding tensors (TF's autopacking)."""
    if isinstance(value, (list, tuple)) and _has_tensor(value):
        return _autopack(value, None if dtype is None else _dt.as_dtype(dtype),
                         name or "packed")
    return convert_to_tensor(value, dtype=dtype, name=name, preferred_dtype=preferred_dtype)


def _is_graph_value(v: Any) -> bool:
    return isinstance(v, Tensor) or (hasattr(v, "_as_graph_element") and not isinstance(v, type))


def _value_dtype(v: Any) -> _dt.DType | None:
    d = getattr(v, "dtype", None)
    try:
        return None if d is None else _dt.as_dtype(d).base_dtype
    except TypeError:
        return None


def _apply(op_type: str, name: str | None = None, **kwargs: Any) -> Any:
    """``apply_op`` converting Python inputs the way TF's op-def library does: inside the
    op's name scope, named after the input (``Reshape/shape``), with the dtype fixed by
    earlier inputs or the attr's default as the preferred dtype, and auto-packing lists
    that hold tensors."""
    op_def = get_default_graph()._runtime.op_def(op_type)
    t = _first_tensor([kwargs[a.name] for a in op_def.inputs if a.name in kwargs])
    g = t.graph if t is not None else get_default_graph()
    with g.as_default(), g.name_scope(name or op_type) as scope:
        attrs: dict[str, _dt.DType] = {}
        for aname, adef in op_def.attrs.items():
            if adef.kind == "type" and kwargs.get(aname) is not None:
                attrs[aname] = _dt.as_dtype(kwargs[aname]).base_dtype
        for a in op_def.inputs:
            if a.name not in kwargs or a.type_list_attr is not None:
                continue
            v = kwargs[a.name]
            default = None
            if a.dtype is not None:
                want: _dt.DType | None = a.dtype
            else:
                want = attrs.get(a.type_attr)
                adef = op_def.attrs[a.type_attr]
                if want is None and adef.has_default:
                    default = adef.default
            if a.is_list:
                if not isinstance(v, (list, tuple)):
                    continue
                if want is None:
                    kinds = [_value_dtype(x) for x in v if _is_graph_value(x)]
                    if a.number_attr is not None and len(set(kinds)) > 1:
                        raise TypeError(f"Tensors in list passed to '{a.name}' of '{op_type}' "
                                        f"Op have types [{', '.join(k.name for k in kinds)}] "
                                        "that don't all match.")
                    want = kinds[0] if kinds else None
                    pref = default if want is None else None
                else:
                    pref = None
                try:
                    v = [x if _is_graph_value(x) else
                         _autopack(x, want, f"{a.name}_{i}")
                         if isinstance(x, (list, tuple)) and _has_tensor(x) else
                         convert_to_tensor(x, dtype=want, name=f"{a.name}_{i}",
                                           preferred_dtype=pref)
                         for i, x in enumerate(v)]
                except (TypeError, ValueError):
                    continue  # apply_op reports the mismatch
                kwargs[a.name] = v
                if a.type_attr is not None and v and want is None:
                    want = _value_dtype(v[0])
            elif not _is_graph_value(v):
                try:
                    if isinstance(v, (list, tuple)) and _has_tensor(v):
                        v = _autopack(v, want, a.name)
                    else:
                        v = convert_to_tensor(v, dtype=want, name=a.name, preferred_dtype=default)
                except (TypeError, ValueError):
                    if want is None:
                        raise
                    continue  # apply_op reports the mismatch
                kwargs[a.name] = v
                want = want or v.dtype.base_dtype
            else:
                want = want or _value_dtype(v)
            if a.type_attr is not None and want is not None:
                attrs.setdefault(a.type_attr, want)
        return apply_op(op_type, name=scope, **kwargs)


# TensorShape and Dimension convert to int32 (int64 when large) shape tensors, as TF's
# constant_op registers them.
def _tensor_shape_to_tensor(s: TensorShape, dtype: Any = None, name: str | None = None,
                            as_ref: bool = False) -> Tensor:
    if not s.is_fully_defined():
        raise ValueError(f"Cannot convert a partially known TensorShape to a Tensor: {s}")
    vals = s.as_list()
    big = any(v >= 2**31 for v in vals)
    if dtype is not None:
        dtype = _dt.as_dtype(dtype)
        if dtype not in (_dt.int32, _dt.int64):
            raise TypeError(f"Cannot convert a TensorShape to dtype: {dtype.name}")
        if dtype is _dt.int32 and big:
            raise ValueError("Cannot convert a TensorShape to dtype int32; a dimension is "
                             "too large")
    else:
        dtype = _dt.int64 if big else _dt.int32
    return convert_to_tensor(np.array(vals, dtype=dtype.np), dtype=dtype,
                             name=name or "shape_as_tensor")


def _dimension_to_tensor(d: Dimension, dtype: Any = None, name: str | None = None,
                         as_ref: bool = False) -> Tensor:
    if d.value is None:
        raise ValueError(f"Cannot convert an unknown Dimension to a Tensor: {d}")
    dtype = _dt.int32 if dtype is None else _dt.as_dtype(dtype)
    if dtype not in (_dt.int32, _dt.int64):
        raise TypeError(f"Cannot convert a TensorShape to dtype: {dtype.name}")
    return convert_to_tensor(np.array(d.value, dtype=dtype.np), dtype=dtype,
                             name=name or "shape_as_tensor")


register_tensor_conversion_function(TensorShape, _tensor_shape_to_tensor, 100)
register_tensor_conversion_function(Dimension, _dimension_to_tensor, 100)


def _obj(x: Any) -> Any:
    """An object ndarray for string values (0-d strings may arrive as bytes)."""
    return x if isinstance(x, np.ndarray) else np.asarray(x, dtype=object)


def _zero_of(dtype: _dt.DType) -> Any:
    return b"" if dtype.base_dtype is _dt.string else dtype.np.type(0)


def _full(xp: Any, shape: Sequence[int], value: Any, dtype: _dt.DType) -> Any:
    if dtype.base_dtype is _dt.string:
        out = np.empty(tuple(shape), dtype=object)
        out.fill(value)
        return out
    return xp.full(tuple(shape), value, dtype=dtype.np)


def _string_safe(ctx: Any, fn: Callable[..., Any], positions: Sequence[int] = (0,)
                 ) -> Callable[..., Any]:
    """Wrap ``fn`` so string inputs at ``positions`` arrive as object ndarrays."""
    pos = [p for p in positions if p < len(ctx.input_dtypes)
           and ctx.input_dtypes[p] is _dt.string]
    if not pos:
        return fn

    def wrapped(*args: Any) -> Any:
        args = list(args)
        for p in pos:
            args[p] = _obj(args[p])
        return fn(*args)

    return wrapped




def _kernel(*ops: str, **kw: Any) -> Callable:
    """``ks.kernel`` for the generic array-module kernels of this module."""
    return ks.kernel(*ops, **kw)


def _list_out(ctx: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    """For a list output: the executor takes a one-output kernel's return value as that
    output, so a list of one is returned unwrapped."""
    if len(ctx.output_dtypes) != 1:
        return fn

    def single(*args: Any) -> Any:
        return fn(*args)[0]

    return single


# =======================================================================================
# Reshape
# =======================================================================================
def _reshape_shape(op: Any) -> list[TensorShape]:
    in_d = _dims(op.inputs[0])
    out = _shape_value(op.inputs[1], op)
    if out.ndims is None:
        return [out]
    out_d = list(out.as_tuple())
    if in_d is None:
        return [TensorShape(out_d)]
    too_many = False

    def known(d: Sequence[int | None]) -> tuple[int, int]:
        nonlocal too_many
        n, unk = 1, -1
        for i, x in enumerate(d):
            if x is None:
                if unk >= 0:
                    too_many = True
                unk = i
            else:
                n *= x
        return n, unk

    known_out, out_unk = known(out_d)
    known_in, in_unk = known(in_d)
    if too_many:
        return [TensorShape(out_d)]
    if in_unk < 0 and out_unk < 0:
        if known_in != known_out:
            raise _shape_error(op, f"Cannot reshape a tensor with {known_in} elements to shape "
                                   f"{_fmt(out_d)} ({known_out} elements)")
    elif in_unk < 0 and out_unk >= 0 and known_out > 0:
        if known_in % known_out:
            raise _shape_error(op, f"Dimension size must be evenly divisible by {known_out} "
                                   f"but is {known_in}")
        out_d[out_unk] = known_in // known_out
    elif in_unk >= 0 and out_unk < 0 and known_in != 0:
        if known_out % known_in:
            raise _shape_error(op, f"Dimension size must be evenly divisible by {known_in} "
                                   f"but is {known_out}")
    return [TensorShape(out_d)]


ks.op(OpDef("Reshape", inputs=["tensor: T", "shape: Tshape"], outputs=["output: T"],
            attrs=["T: type", "Tshape: {int32, int64} = DT_INT32"], shape_fn=_reshape_shape,
            doc="Reshapes a tensor."))


def _reshape_error(x: Any, shape: list[int]) -> errors.InvalidArgumentError:
    size = int(np.size(x))
    unknown = -1
    product = 1
    for i, d in enumerate(shape):
        if d == -1:
            if unknown != -1:
                return _invalid(f"Only one input size may be -1, not both {unknown} and {i}")
            unknown = i
        elif d < 0:
            return _invalid(f"Size {i} must be non-negative, not {d}")
        else:
            product *= d
    if unknown != -1:
        if product == 0:
            return _invalid("Reshape cannot infer the missing input size for an empty tensor "
                            "unless all specified input sizes are non-zero")
        return _invalid(f"Input to reshape is a tensor with {size} values, but the requested "
                        f"shape requires a multiple of {product}")
    return _invalid(f"Input to reshape is a tensor with {size} values, but the requested "
                    f"shape has {product}")


@_kernel("Reshape", host_memory=("shape",))
def _reshape_kernel(ctx: Any) -> Callable:
    host = host_reader(ctx)

    def reshape(x: Any, shape: Any) -> Any:
        shape = host(shape)
        if np.ndim(shape) != 1:
            raise _invalid(f"shape must be a vector of {{int32,int64}}, got shape "
                           f"{_shape_str(np.shape(shape))}")
        s = _int_list(shape, np.asarray)
        if any(d < -1 for d in s) or s.count(-1) > 1:
            raise _reshape_error(x, s)
        try:
            return x.reshape(s)
        except ValueError:
            raise _reshape_error(x, s) from None

    return _string_safe(ctx, reshape)


@ks.api("reshape", "manip.reshape")
def reshape(tensor: Any, shape: Any, name: str | None = None) -> Tensor:
    """Reshapes ``tensor`` to ``shape`` (one dimension may be -1)."""
    return _apply("Reshape", name=name, tensor=tensor, shape=shape)


# =======================================================================================
# Transpose, ConjugateTranspose
# =======================================================================================
def _transpose_shape(op: Any) -> list[TensorShape]:
    in_d = _dims(op.inputs[0])
    perm_d = _dims(op.inputs[1])
    perm = _static_value(op.inputs[1])
    perm_n = perm_d[0] if perm_d is not None and len(perm_d) == 1 else None
    if in_d is None and perm_n is None and perm is None:
        return [unknown_shape()]
    if in_d is not None:
        rank = len(in_d)
    elif perm_n is not None:
        rank = perm_n
    else:
        rank = int(perm.size)
    if in_d is None and rank < 2:
        return [op.inputs[0].shape]
    in_d = _with_rank(in_d, rank, op)
    pd = _with_rank(perm_d, 1, op)
    if pd[0] is not None and pd[0] != rank:
        raise _shape_error(op, f"Dimension must be {rank} but is {pd[0]}")
    if perm is None:
        return [unknown_shape(rank)]
    vals = [int(v) for v in perm.reshape(-1)]
    if len(vals) != rank:
        raise _shape_error(op, f"Dimension must be {rank} but is {len(vals)}")
    out = []
    for v in vals:
        if v >= rank or v < -rank:
            raise _shape_error(op, f"perm dim {v} is out of range of input rank {rank}")
        out.append(in_d[v])
    return [TensorShape(out)]


ks.op(OpDef("Transpose", inputs=["x: T", "perm: Tperm"], outputs=["y: T"],
            attrs=["T: type", "Tperm: {int32, int64} = DT_INT32"], shape_fn=_transpose_shape,
            doc="Permutes the dimensions of x."),
      OpDef("ConjugateTranspose", inputs=["x: T", "perm: Tperm"], outputs=["y: T"],
            attrs=["T: type", "Tperm: {int32, int64} = DT_INT32"], shape_fn=_transpose_shape,
            doc="Permutes the dimensions of x and conjugates it."))


def _check_perm(perm: list[int], rank: int) -> None:
    if len(perm) != rank:
        raise _invalid(f"transpose expects a vector of size {rank}. But input(1) is a vector "
                       f"of size {len(perm)}")
    seen = [False] * rank
    for d in perm:
        if d < 0 or d >= rank:
            raise _invalid(f"{d} is out of range [0 .. {rank})")
        seen[d] = True
    for i in range(rank):
        if not seen[i]:
            raise _invalid(f"{i} is missing from {{{','.join(str(d) for d in perm)}}}.")


@_kernel("Transpose", "ConjugateTranspose", host_memory=("perm",))
def _transpose_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    conj = ctx.op_type == "ConjugateTranspose" and ctx.input_dtypes[0].is_complex
    host = host_reader(ctx)

    def transpose(x: Any, perm: Any) -> Any:
        perm = host(perm)
        if np.ndim(perm) != 1:
            raise _invalid(f"perm must be a vector, not {_shape_str(np.shape(perm))}")
        p = _int_list(perm, np.asarray)
        _check_perm(p, np.ndim(x))
        y = xp.transpose(x, p)
        return xp.conj(y) if conj else y

    return _string_safe(ctx, transpose)


@ks.api("transpose")
def transpose(a: Any, perm: Any = None, name: str = "transpose",
              conjugate: bool = False) -> Tensor:
    """Permutes the dimensions of ``a`` (reverses them when ``perm`` is None)."""
    with name_scope(name, "transpose", [a]) as scope:
        a = _convert(a, name="a")
        op_type = "ConjugateTranspose" if conjugate and a.dtype.is_complex else "Transpose"
        if perm is None:
            rank = a.shape.ndims
            if rank is None:
                # TF builds range(rank(a) - 1, -1, -1); the same vector without math ops:
                r = apply_op("Range", start=0, limit=apply_op("Rank", input=a), delta=1)
                perm = apply_op("ReverseV2", tensor=r, axis=[0])
            else:
                perm = np.arange(rank - 1, -1, -1, dtype=np.int32)
        return _apply(op_type, name=scope, x=a, perm=perm)


@ks.api("linalg.transpose", "matrix_transpose", "linalg.matrix_transpose")
def matrix_transpose(a: Any, name: str = "matrix_transpose", conjugate: bool = False) -> Tensor:
    """Transposes the last two dimensions of ``a``."""
    with name_scope(name, "matrix_transpose", [a]):
        a = _convert(a, name="a")
        d = _dims(a)
        if d is not None:
            if len(d) < 2:
                raise ValueError(f"Argument 'a' should be a (batch) matrix, with rank >= 2.  "
                                 f"Found: {a.shape}")
            perm: Any = list(range(len(d) - 2)) + [len(d) - 1, len(d) - 2]
        else:
            rank = apply_op("Rank", input=a)
            head = apply_op("Range", start=0, limit=rank, delta=1)
            head = strided_slice(head, [0], [-2], [1])
            tail = apply_op("ReverseV2", tensor=strided_slice(
                apply_op("Range", start=0, limit=rank, delta=1), [-2], [0], [1], end_mask=1),
                axis=[0])
            perm = concat([head, tail], 0)
        return transpose(a, perm=perm, conjugate=conjugate)


@ks.api("linalg.adjoint")
def adjoint(matrix: Any, name: str | None = None) -> Tensor:
    """The conjugate transpose of the last two dimensions of ``matrix``."""
    with name_scope(name, "adjoint", [matrix]):
        matrix = _convert(matrix, name="matrix")
        return matrix_transpose(matrix, conjugate=True)


# =======================================================================================
# ConcatV2
# =======================================================================================
def _concat_shape(op: Any) -> list[TensorShape]:
    values = op.inputs[:-1]
    axis = _static_int(op.inputs[-1])
    _with_rank(_dims(op.inputs[-1]), 0, op)
    if axis is None:
        rank = None
        for v in values:
            if v.shape.ndims is not None:
                rank = v.shape.ndims
                break
        if rank is None:
            return [unknown_shape()]
        if rank == 0:
            raise _shape_error(op, "Can't concatenate scalars (use tf.stack instead)")
        for v in values:
            _with_rank(_dims(v), rank, op)
        return [unknown_shape(rank)]
    min_rank = -axis if axis < 0 else axis + 1
    ranks = [v.shape.ndims for v in values if v.shape.ndims is not None]
    for r in ranks[1:]:
        if r != ranks[0]:
            raise _shape_error(op, f"Shape must be rank {ranks[0]} but is rank {r}")
    last = _with_rank_at_least(_dims(values[-1]), min_rank, op)

    def parts(d: Any) -> tuple[Any, Any, Any]:
        if d is None:
            return None, None, None
        ax = _canon_axis(axis, len(d))
        return d[:ax], d[ax], d[ax + 1:]

    before, middle, after = parts(last)
    for v in reversed(values[:-1]):
        b, m, a = parts(_with_rank_at_least(_dims(v), min_rank, op))
        before = _merge(b, before, op)
        middle = _add_dim(middle, m)
        after = _merge(a, after, op)
    if before is None or after is None:
        return [unknown_shape()]
    return [TensorShape(list(before) + [middle] + list(after))]


ks.op(OpDef("ConcatV2", inputs=["values: N * T", "axis: Tidx"], outputs=["output: T"],
            attrs=["N: int >= 2", "T: type", "Tidx: {int32, int64} = DT_INT32"],
            shape_fn=_concat_shape, doc="Concatenates tensors along one dimension."))


@_kernel("ConcatV2", host_memory=("axis",))
def _concat_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    n = len(ctx.input_dtypes) - 1
    is_str = ctx.input_dtypes[0] is _dt.string
    host = host_reader(ctx)

    def concat_v2(*args: Any) -> Any:
        values, axis = args[:-1], _int_scalar(args[-1], host)
        if is_str:
            values = [_obj(v) for v in values]
        shapes = [np.shape(v) for v in values]
        rank = len(shapes[0])
        if rank == 0:
            raise _invalid("ConcatOp : Can't concatenate scalars (use tf.stack instead)")
        if not -rank <= axis < rank:
            raise _invalid(f"ConcatOp : Expected concatenating dimensions in the range "
                           f"[{-rank}, {rank}), but got {axis}")
        ax = _canon_axis(axis, rank)
        for i in range(1, n):
            s = shapes[i]
            if len(s) != rank:
                raise _invalid(f"ConcatOp : Ranks of all input tensors should match: "
                               f"shape[0] = {_shape_str(shapes[0])} vs. shape[{i}] = "
                               f"{_shape_str(s)}")
            for j in range(rank):
                if j != ax and s[j] != shapes[0][j]:
                    raise _invalid(f"ConcatOp : Dimensions of inputs should match: shape[0] = "
                                   f"{_shape_str(shapes[0])} vs. shape[{i}] = {_shape_str(s)}")
        return xp.concatenate(values, axis=ax)

    return concat_v2


@ks.api("concat")
def concat(values: Any, axis: Any, name: str = "concat") -> Tensor:
    """Concatenates the tensors ``values`` along dimension ``axis``."""
    if not isinstance(values, (list, tuple)):
        values = [values]
    if len(values) == 1:
        with name_scope(name):
            ax = _convert(axis, name="concat_dim", dtype=_dt.int32)
            if ax.shape.ndims is not None and ax.shape.ndims != 0:
                raise ValueError(f"Shape {ax.shape} must have rank 0")
            # TF: identity(values[0], name=name) inside the scope: concat/concat
            return apply_op("Identity", name=name, input=values[0])
    return _apply("ConcatV2", name=name, values=list(values), axis=axis)


# =======================================================================================
# Pack, Unpack
# =======================================================================================
def _pack_shape(op: Any) -> list[TensorShape]:
    cur = _dims(op.inputs[-1])
    for t in reversed(op.inputs[:-1]):
        cur = _merge(_dims(t), cur, op)
    if cur is None:
        return [unknown_shape()]
    rank = len(cur) + 1
    axis = op.node_attrs.get("axis", 0)
    if axis < -rank or axis >= rank:
        raise _shape_error(op, f"Invalid axis: {axis}; must be in [{-rank},{rank})")
    axis = _canon_axis(axis, rank)
    return [TensorShape(list(cur[:axis]) + [len(op.inputs)] + list(cur[axis:]))]


def _unpack_shape(op: Any) -> list[TensorShape]:
    d = _dims(op.inputs[0])
    n = len(op.outputs)
    if d is None:
        return [unknown_shape()] * n
    rank = len(d)
    axis = op.node_attrs.get("axis", 0)
    if axis < -rank or axis >= rank:
        raise _shape_error(op, f"Invalid axis: {axis}; must be in [{-rank},{rank})")
    axis = _canon_axis(axis, rank)
    if d[axis] is not None and d[axis] != n:
        raise _shape_error(op, f"Dimension must be {n} but is {d[axis]}")
    out = TensorShape(d[:axis] + d[axis + 1:])
    return [out] * n


ks.op(OpDef("Pack", inputs=["values: N * T"], outputs=["output: T"],
            attrs=["N: int >= 1", "T: type", "axis: int = 0"], shape_fn=_pack_shape,
            doc="Stacks N rank-R tensors into one rank-(R+1) tensor."),
      OpDef("Unpack", inputs=["value: T"], outputs=["output: num * T"],
            attrs=["num: int >= 0", "T: type", "axis: int = 0"], shape_fn=_unpack_shape,
            doc="Unstacks a rank-R tensor into rank-(R-1) tensors."))


@_kernel("Pack")
def _pack_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    axis = ctx.attrs.get("axis", 0)
    is_str = ctx.input_dtypes[0] is _dt.string

    def pack(*values: Any) -> Any:
        if is_str:
            values = tuple(_obj(v) for v in values)
        s0 = np.shape(values[0])
        for i, v in enumerate(values[1:], 1):
            if np.shape(v) != s0:
                raise _invalid(f"Shapes of all inputs must match: values[0].shape = "
                               f"{_shape_str(s0)} != values[{i}].shape = "
                               f"{_shape_str(np.shape(v))}")
        rank = len(s0) + 1
        if not -rank <= axis < rank:
            raise _invalid(f"axis = {axis} not in [{-rank}, {rank})")
        return xp.stack(values, axis=axis)

    return pack


@_kernel("Unpack")
def _unpack_kernel(ctx: Any) -> Callable:
    num = ctx.attrs["num"]
    axis = ctx.attrs.get("axis", 0)

    def unpack(x: Any) -> Any:
        shape = np.shape(x)
        rank = len(shape)
        if not -rank <= axis < rank:
            raise _invalid(f"axis = {axis} not in [{-rank}, {rank})")
        ax = _canon_axis(axis, rank)
        if shape[ax] != num:
            raise _invalid(f"Input shape axis {ax} must equal {num}, got shape "
                           f"{_shape_str(shape)}")
        pre = (slice(None),) * ax
        return tuple(x[pre + (i, Ellipsis)] for i in range(num))

    return _list_out(ctx, _string_safe(ctx, unpack))


@ks.api("stack")
def stack(values: Any, axis: int = 0, name: str = "stack") -> Tensor:
    """Stacks a list of rank-R tensors into one rank-(R+1) tensor."""
    if axis == 0:
        try:
            # A constant list becomes a Const; a list holding tensors is auto-packed.
            return _convert(values, name=name)
        except (TypeError, ValueError):
            pass
    value_shape = _convert(values[0], name=name).shape.as_tuple()
    if value_shape is not None:
        n = len(value_shape) + 1
        if axis < -n or axis >= n:
            raise ValueError(f"axis = {axis} not in [{-n}, {n})")
    return _apply("Pack", name=name, values=list(values), axis=axis)


@ks.api("unstack")
def unstack(value: Any, num: int | None = None, axis: int = 0,
            name: str = "unstack") -> list[Tensor]:
    """Unpacks dimension ``axis`` of ``value`` into a list of tensors."""
    if num is None:
        value = _convert(value)
        d = value.shape.as_tuple()
        if d is not None:
            if axis < -len(d) or axis >= len(d):
                raise ValueError(f"axis = {axis} not in [{-len(d)}, {len(d)})")
            num = d[axis]
        if num is None:
            raise ValueError(f"Cannot infer num from shape {value.shape}")
    return _apply("Unpack", name=name, value=value, num=num, axis=axis)


# =======================================================================================
# Split, SplitV
# =======================================================================================
def _scalar_axis(op: Any, t: Tensor, rank: int | None) -> int | None:
    v = _static_int(t)
    if v is None:
        return None
    if rank is None:
        return v if v >= 0 else None
    if v < -rank or v >= rank:
        raise _shape_error(op, f"Dimension size, given by scalar input {v} must be in range "
                               f"[{-rank}, {rank})")
    return _canon_axis(v, rank)


def _split_shape(op: Any) -> list[TensorShape]:
    d = _dims(op.inputs[1])
    n = len(op.outputs)
    axis = _scalar_axis(op, op.inputs[0], None if d is None else len(d))
    if axis is None or d is None:
        out = unknown_shape() if d is None else unknown_shape(len(d))
        return [out] * n
    d = _with_rank_at_least(d, axis + 1, op)
    size = d[axis]
    if size is not None:
        if size % n:
            raise _shape_error(op, f"Dimension size must be evenly divisible by {n} but is "
                                   f"{size}; Number of ways to split should evenly divide the "
                                   "split dimension")
        size //= n
    return [TensorShape(d[:axis] + (size,) + d[axis + 1:])] * n


def _splitv_shape(op: Any) -> list[TensorShape]:
    d = _dims(op.inputs[0])
    n = len(op.outputs)
    if d is None:
        return [unknown_shape()] * n
    rank = len(d)
    if rank == 0:
        raise _shape_error(op, "Can't split scalars")
    axis = _scalar_axis(op, op.inputs[2], rank)
    sizes = _static_value(op.inputs[1])
    if sizes is None:
        if axis is None:
            return [unknown_shape(rank)] * n
        return [TensorShape(d[:axis] + (None,) + d[axis + 1:])] * n
    if axis is None:
        return [unknown_shape(rank)] * n
    data = [int(v) for v in sizes.reshape(-1)]
    if len(data) != n:
        raise _shape_error(op, "Length of size_splits should be equal to num_outputs")
    total, neg = 0, False
    for s in data:
        if s == -1:
            if neg:
                raise _shape_error(op, "size_splits can only have one -1")
            neg = True
        else:
            total += s
    dim = d[axis]
    outs = []
    for s in data:
        size: int | None = s
        if s == -1:
            size = None if dim is None else dim - total
        outs.append(TensorShape(d[:axis] + (size,) + d[axis + 1:]))
    if dim is not None and (total > dim if neg else total != dim):
        raise _shape_error(op, f"can't split axis of size {dim} into pieces of size "
                               f"[{','.join(str(s) for s in data)}]")
    return outs


ks.op(OpDef("Split", inputs=["split_dim: int32", "value: T"], outputs=["output: num_split * T"],
            attrs=["num_split: int >= 1", "T: type"], shape_fn=_split_shape,
            doc="Splits a tensor into num_split equal pieces along one dimension."),
      OpDef("SplitV", inputs=["value: T", "size_splits: Tlen", "split_dim: int32"],
            outputs=["output: num_split * T"],
            attrs=["num_split: int >= 1", "T: type", "Tlen: {int32, int64} = DT_INT64"],
            shape_fn=_splitv_shape, doc="Splits a tensor into pieces of given sizes."))


def _split_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise _invalid(f"-input rank(-{rank}) <= split_dim < input rank ({rank}), but got "
                       f"{axis}")
    return _canon_axis(axis, rank)


@_kernel("Split", host_memory=("split_dim",))
def _split_kernel(ctx: Any) -> Callable:
    n = ctx.attrs["num_split"]
    host = host_reader(ctx)

    def split(split_dim: Any, x: Any) -> Any:
        shape = np.shape(x)
        ax = _split_axis(_int_scalar(split_dim, host), len(shape))
        size = shape[ax]
        if size % n:
            raise _invalid(f"Number of ways to split should evenly divide the split dimension, "
                           f"but got split_dim {ax} (size = {size}) and num_split {n}")
        step = size // n
        pre = (slice(None),) * ax
        return tuple(x[pre + (slice(i * step, (i + 1) * step),)] for i in range(n))

    return _list_out(ctx, _string_safe(ctx, split, (1,)))


@_kernel("SplitV", host_memory=("size_splits", "split_dim"))
def _splitv_kernel(ctx: Any) -> Callable:
    n = ctx.attrs["num_split"]
    host = host_reader(ctx)

    def split_v(x: Any, size_splits: Any, split_dim: Any) -> Any:
        shape = np.shape(x)
        if len(shape) == 0:
            raise _invalid("Can't split scalars")
        ax = _split_axis(_int_scalar(split_dim, host), len(shape))
        sizes = _int_list(size_splits, host)
        if len(sizes) != n:
            raise _invalid(f"Number of split sizes ({len(sizes)}) must equal num_split ({n})")
        dim = shape[ax]
        neg = [i for i, s in enumerate(sizes) if s == -1]
        if len(neg) > 1:
            raise _invalid(f"There can only be one -1 in the input. Got: {sizes}")
        total = sum(s for s in sizes if s != -1)
        if any(s < -1 for s in sizes) or (total != dim if not neg else total > dim):
            raise _invalid("Determined shape must either match input shape along split_dim "
                           "exactly if fully specified, or be less than the size of the input "
                           f"along split_dim if not fully specified.  Got: {total}")
        if neg:
            sizes[neg[0]] = dim - total
        pre = (slice(None),) * ax
        out, start = [], 0
        for s in sizes:
            out.append(x[pre + (slice(start, start + s),)])
            start += s
        return tuple(out)

    return _list_out(ctx, _string_safe(ctx, split_v))


@ks.api("split")
def split(value: Any, num_or_size_splits: Any, axis: Any = 0, num: int | None = None,
          name: str = "split") -> list[Tensor]:
    """Splits ``value`` into ``num_or_size_splits`` equal pieces, or pieces of the given
    sizes (one may be -1), along ``axis``."""
    size_splits = _convert(num_or_size_splits)
    if isinstance(num_or_size_splits, (int, np.integer, Dimension)) and \
            not isinstance(num_or_size_splits, bool):
        return _apply("Split", name=name, split_dim=axis, value=value,
                      num_split=int(num_or_size_splits))
    if size_splits.shape.ndims == 0:
        raise ValueError("Rank-0 tensors are not supported as the num_or_size_splits argument "
                         f"to split. Argument provided: {num_or_size_splits}")
    if num is None:
        d = size_splits.shape.as_tuple()
        if d:
            num = d[0]
        if num is None:
            raise ValueError(f"Cannot infer num from shape {num_or_size_splits}")
    return _apply("SplitV", name=name, value=value, size_splits=size_splits, split_dim=axis,
                  num_split=num)


# =======================================================================================
# Squeeze, ExpandDims
# =======================================================================================
def _squeeze_shape(op: Any) -> list[TensorShape]:
    d = _dims(op.inputs[0])
    if d is None:
        return [unknown_shape()]
    rank = len(d)
    sq = []
    for i, a in enumerate(op.node_attrs.get("squeeze_dims", [])):
        if a < -rank or a >= rank:
            raise _shape_error(op, f"squeeze_dims[{i}] not in [{-rank},{rank}).")
        sq.append(_canon_axis(a, rank))
    out = []
    for i, x in enumerate(d):
        match = i in sq
        if x is None:
            if match:
                continue
            if not sq:
                return [unknown_shape()]
        elif x == 1:
            if match or not sq:
                continue
        elif match:
            raise _shape_error(op, f"Can not squeeze dim[{i}], expected a dimension of 1, "
                                   f"got {x}")
        out.append(x)
    return [TensorShape(out)]


def _expand_dims_shape(op: Any) -> list[TensorShape]:
    v = _static_value(op.inputs[1])
    if v is not None and v.size != 1:
        raise _shape_error(op, "'dim' input must be a tensor with a single value")
    d = _dims(op.inputs[0])
    if v is None or d is None:
        return [unknown_shape()]
    dim = int(v.reshape(-1)[0])
    rank = len(d)
    if dim < -rank - 1 or dim > rank:
        raise _shape_error(op, f"dim {dim} not in the interval [{-rank - 1}, {rank}].")
    if dim < 0:
        dim += rank + 1
    return [TensorShape(d[:dim] + (1,) + d[dim:])]


ks.op(OpDef("Squeeze", inputs=["input: T"], outputs=["output: T"],
            attrs=["T: type", "squeeze_dims: list(int) >= 0 = []"], shape_fn=_squeeze_shape,
            doc="Removes dimensions of size 1."),
      OpDef("ExpandDims", inputs=["input: T", "dim: Tdim"], outputs=["output: T"],
            attrs=["T: type", "Tdim: {int32, int64} = DT_INT32"], shape_fn=_expand_dims_shape,
            doc="Inserts a dimension of size 1."))


@_kernel("Squeeze")
def _squeeze_kernel(ctx: Any) -> Callable:
    sq = list(ctx.attrs.get("squeeze_dims", []))

    def squeeze(x: Any) -> Any:
        shape = np.shape(x)
        rank = len(shape)
        axes = []
        for a in sq:
            if a < -rank or a >= rank:
                raise _invalid(f"Tried to squeeze dim index {a} for tensor with {rank} "
                               "dimensions.")
            a = _canon_axis(a, rank)
            if shape[a] != 1:
                raise _invalid(f"Can not squeeze dim[{a}], expected a dimension of 1, got "
                               f"{shape[a]}")
            axes.append(a)
        if not sq:
            axes = [i for i, s in enumerate(shape) if s == 1]
        keep = tuple(s for i, s in enumerate(shape) if i not in axes)
        return x.reshape(keep)

    return _string_safe(ctx, squeeze)


@_kernel("ExpandDims", host_memory=("dim",))
def _expand_dims_kernel(ctx: Any) -> Callable:
    host = host_reader(ctx)

    def expand_dims(x: Any, dim: Any) -> Any:
        dim = host(dim)
        if np.size(dim) != 1:
            raise _invalid("'dim' must be a tensor with a single value")
        d = _int_scalar(dim, np.asarray)
        shape = np.shape(x)
        rank = len(shape)
        if d < -1 - rank or d > rank:
            raise _invalid(f"Tried to expand dim index {d} for tensor with {rank} dimensions.")
        if d < 0:
            d += rank + 1
        return x.reshape(shape[:d] + (1,) + shape[d:])

    return _string_safe(ctx, expand_dims)


def _deprecated_lookup(new_name: str, new: Any, old_name: str, old: Any) -> Any:
    if old is not None:
        if new is not None:
            raise ValueError(f"Cannot specify both '{new_name}' and '{old_name}'")
        return old
    return new


@ks.api("squeeze")
def squeeze(input: Any, axis: Any = None, name: str | None = None,
            squeeze_dims: Any = None) -> Tensor:
    """Removes dimensions of size 1 (all of them, or those in ``axis``)."""
    axis = _deprecated_lookup("axis", axis, "squeeze_dims", squeeze_dims)
    if np.isscalar(axis):
        axis = [axis]
    return _apply("Squeeze", name=name, input=input,
                  squeeze_dims=[] if axis is None else [int(a) for a in axis])


@ks.api("expand_dims")
def expand_dims(input: Any, axis: Any = None, name: str | None = None,
                dim: Any = None) -> Tensor:
    """Inserts a dimension of size 1 at index ``axis``."""
    axis = _deprecated_lookup("axis", axis, "dim", dim)
    if axis is None:
        raise ValueError("Must specify an axis argument to tf.expand_dims()")
    return _apply("ExpandDims", name=name, input=input, dim=axis)


# =======================================================================================
# Tile
# =======================================================================================
def _tile_shape(op: Any) -> list[TensorShape]:
    d = _dims(op.inputs[0])
    mult = _shape_value(op.inputs[1], op)
    md = mult.as_tuple()
    if d is not None:
        md = _with_rank(md, len(d), op)
        _merge(_dims(op.inputs[1]), (len(d),), op)
    if md is None:
        return [unknown_shape()]
    d = _with_rank(d, len(md), op)
    return [TensorShape([_mul_dim(a, b) for a, b in zip(d, md)])]


ks.op(OpDef("Tile", inputs=["input: T", "multiples: Tmultiples"], outputs=["output: T"],
            attrs=["T: type", "Tmultiples: {int32, int64} = DT_INT32"], shape_fn=_tile_shape,
            doc="Repeats a tensor along each dimension."))


@_kernel("Tile", host_memory=("multiples",))
def _tile_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    host = host_reader(ctx)

    def tile(x: Any, multiples: Any) -> Any:
        multiples = host(multiples)
        m = _int_list(multiples, np.asarray)
        rank = np.ndim(x)
        if np.ndim(multiples) != 1 or len(m) != rank:
            raise _invalid(f"Expected multiples argument to be a vector of length {rank} but "
                           f"got length {len(m)}")
        for i, v in enumerate(m):
            if v < 0:
                raise _invalid(f"Expected multiples[{i}] >= 0, but got {v}")
        if rank == 0:
            return x
        return xp.tile(x, m)

    return _string_safe(ctx, tile)


@ks.api("tile", "manip.tile")
def tile(input: Any, multiples: Any, name: str | None = None) -> Tensor:
    """Repeats ``input`` ``multiples[i]`` times along dimension i."""
    return _apply("Tile", name=name, input=input, multiples=multiples)


# =======================================================================================
# Pad, PadV2, MirrorPad
# =======================================================================================
def _pad_shape(op: Any) -> list[TensorShape]:
    pd = _with_rank(_dims(op.inputs[1]), 2, op)
    if pd[1] is not None and pd[1] != 2:
        raise _shape_error(op, f"Dimension must be 2 but is {pd[1]}")
    d = _dims(op.inputs[0])
    n = pd[0]
    if n is not None:
        d = _with_rank(d, n, op)
    elif d is not None:
        n = len(d)
    pads = _static_value(op.inputs[1])
    if pads is None:
        return [unknown_shape() if n is None else unknown_shape(n)]
    pads = pads.reshape(-1, 2) if pads.size else np.zeros((0, 2), np.int64)
    d = _with_rank(d, pads.shape[0], op)
    out = []
    for i, (x, (a, b)) in enumerate(zip(d, pads.tolist())):
        if a < 0 or b < 0:
            raise _shape_error(op, "Paddings must be non-negative")
        out.append(_add_dim(x, int(a) + int(b)))
    return [TensorShape(out)]


ks.op(OpDef("Pad", inputs=["input: T", "paddings: Tpaddings"], outputs=["output: T"],
            attrs=["T: type", "Tpaddings: {int32, int64} = DT_INT32"], shape_fn=_pad_shape,
            doc="Pads a tensor with zeros."),
      OpDef("PadV2", inputs=["input: T", "paddings: Tpaddings", "constant_values: T"],
            outputs=["output: T"], attrs=["T: type", "Tpaddings: {int32, int64} = DT_INT32"],
            shape_fn=_pad_shape, doc="Pads a tensor with a constant."),
      OpDef("MirrorPad", inputs=["input: T", "paddings: Tpaddings"], outputs=["output: T"],
            attrs=["T: type", "Tpaddings: {int32, int64} = DT_INT32",
                   "mode: {'REFLECT', 'SYMMETRIC'}"],
            shape_fn=_pad_shape, doc="Pads a tensor with mirrored values."))


def _check_paddings(x: Any, paddings: Any, to_host: Callable[[Any], np.ndarray]
                    ) -> list[tuple[int, int]]:
    shape = np.shape(x)
    paddings = to_host(paddings)
    pshape = np.shape(paddings)
    if len(pshape) != 2 or pshape[1] != 2:
        raise _invalid(f"paddings must be a matrix with 2 columns: {_shape_str(pshape)}")
    if pshape[0] != len(shape):
        raise _invalid(f"The first dimension of paddings must be the rank of inputs"
                       f"{_shape_str(pshape)} {_shape_str(shape)}")
    flat = _int_list(paddings, np.asarray)
    pads = [(flat[2 * i], flat[2 * i + 1]) for i in range(len(shape))]
    for a, b in pads:
        if a < 0 or b < 0:
            raise _invalid(f"Paddings must be non-negative: {a} {b}")
    return pads


@_kernel("Pad", "PadV2", host_memory=("paddings",))
def _pad_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    dt = ctx.output_dtypes[0]
    zero = _zero_of(dt)
    host = host_reader(ctx)

    def pad(x: Any, paddings: Any, constant_values: Any = None) -> Any:
        pads = _check_paddings(x, paddings, host)
        if constant_values is None:
            c = zero
        else:
            if np.ndim(constant_values) != 0:
                raise _invalid(f"constant_values must be a scalar. Got: "
                               f"{_shape_str(np.shape(constant_values))}")
            c = constant_values[()] if isinstance(constant_values, np.ndarray) \
                else constant_values
        shape = np.shape(x)
        out_shape = [s + a + b for s, (a, b) in zip(shape, pads)]
        out = _full(xp, out_shape, c, dt)
        out[tuple(slice(a, a + s) for s, (a, _) in zip(shape, pads))] = x
        return out

    return _string_safe(ctx, pad, (0, 2))


@_kernel("MirrorPad", host_memory=("paddings",))
def _mirror_pad_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    mode = ctx.attrs["mode"]
    symmetric = mode == "SYMMETRIC"
    host = host_reader(ctx)

    def mirror_pad(x: Any, paddings: Any) -> Any:
        pads = _check_paddings(x, paddings, host)
        shape = np.shape(x)
        for (a, b), s in zip(pads, shape):
            if symmetric and (a > s or b > s):
                raise _invalid(f"paddings must be no greater than the dimension size: {a}, {b}"
                               f" greater than {s}")
            if not symmetric and (a >= s or b >= s):
                raise _invalid(f"paddings must be less than the dimension size: {a}, {b} not "
                               f"less than {s}")
        if not pads or all(a == 0 and b == 0 for a, b in pads):
            return x
        return xp.pad(x, pads, mode="symmetric" if symmetric else "reflect")

    return _string_safe(ctx, mirror_pad)


@ks.api("pad")
def pad(tensor: Any, paddings: Any, mode: str = "CONSTANT", name: str | None = None,
        constant_values: Any = 0) -> Tensor:
    """Pads ``tensor`` by ``paddings[i] = [before, after]`` in each dimension; ``mode`` is
    CONSTANT, REFLECT or SYMMETRIC (case-insensitive)."""
    mode = mode.upper()
    if mode == "CONSTANT":
        if not isinstance(constant_values, Tensor) and _is_zero(constant_values):
            result = _apply("Pad", name=name, input=tensor, paddings=paddings)
        else:
            result = _apply("PadV2", name=name, input=tensor, paddings=paddings,
                            constant_values=constant_values)
    elif mode in ("REFLECT", "SYMMETRIC"):
        result = _apply("MirrorPad", name=name, input=tensor, paddings=paddings, mode=mode)
    else:
        raise ValueError(f"Unknown padding mode: {mode}")
    # Restore what is known of the shape from partially known paddings, as TF does.
    in_d = _dims(result.op.inputs[0])
    if in_d is not None and not result.shape.is_fully_defined():
        pv = _partial_matrix(result.op.inputs[1])
        if pv is not None and len(pv) == len(in_d):
            new = [None if x is None or a is None or b is None else x + a + b
                   for x, (a, b) in zip(in_d, pv)]
            result.set_shape(new)
    return result


def _is_zero(v: Any) -> bool:
    try:
        return bool(np.all(np.asarray(v) == 0)) and np.ndim(v) == 0 and \
            not isinstance(v, (str, bytes))
    except Exception:  # noqa: BLE001
        return False


def _partial_matrix(t: Tensor) -> list[tuple[int | None, int | None]] | None:
    """Rows of a [n, 2] int tensor with entries known at build time (None if unknown)."""
    v = _static_value(t)
    if v is not None:
        return [(int(a), int(b)) for a, b in v.reshape(-1, 2).tolist()]
    if t.op.type == "Pack" and t.op.node_attrs.get("axis", 0) == 0:
        rows = []
        for r in t.op.inputs:
            rv = _static_value(r)
            if rv is not None and rv.size == 2:
                rows.append((int(rv[0]), int(rv[1])))
            elif r.op.type == "Pack" and len(r.op.inputs) == 2:
                a, b = (_static_int(x) for x in r.op.inputs)
                rows.append((a, b))
            else:
                rows.append((None, None))
        return rows
    return None


# =======================================================================================
# Slice
# =======================================================================================
def _slice_shape(op: Any) -> list[TensorShape]:
    in_d = _dims(op.inputs[0])
    bd = _with_rank(_dims(op.inputs[1]), 1, op)
    sd = _with_rank(_dims(op.inputs[2]), 1, op)
    bd = _merge(bd, sd, op)
    if bd[0] is not None:
        in_d = _with_rank(in_d, bd[0], op)
    begin = _shape_value(op.inputs[1], op)
    sizes = _static_value(op.inputs[2])
    if sizes is not None:
        sv = [int(v) for v in sizes.reshape(-1)]
        bv = _with_rank(begin.as_tuple(), len(sv), op)
        in_d = _with_rank(in_d, len(sv), op)
        out = []
        for i, s in enumerate(sv):
            if s != -1:
                if s < 0:
                    raise _shape_error(op, f"Out of bounds slicing on dimension {i} of length "
                                           f"{in_d[i]}: sizes vector cannot be < -1, but was {s}")
                out.append(s)
            else:
                x, b = in_d[i], bv[i]
                if x is None or b is None:
                    out.append(None)
                else:
                    if x - b < 0:
                        raise _shape_error(op, f"Negative dimension size caused by subtracting "
                                               f"{b} from {x}")
                    out.append(x - b)
        return [TensorShape(out)]
    sshape = _shape_value(op.inputs[2], op)
    if sshape.ndims is not None:
        _with_rank(begin.as_tuple(), sshape.ndims, op)
        return [sshape]
    return [unknown_shape() if in_d is None else unknown_shape(len(in_d))]


ks.op(OpDef("Slice", inputs=["input: T", "begin: Index", "size: Index"], outputs=["output: T"],
            attrs=["T: type", "Index: {int32, int64}"], shape_fn=_slice_shape,
            doc="Extracts a contiguous slice from a tensor."))


@_kernel("Slice", host_memory=("begin", "size"))
def _slice_kernel(ctx: Any) -> Callable:
    host = host_reader(ctx)

    def slice_kernel(x: Any, begin: Any, size: Any) -> Any:
        begin, size = host(begin), host(size)
        shape = np.shape(x)
        rank = len(shape)
        if np.ndim(begin) != 1 or np.ndim(size) != 1 or np.size(begin) != rank or \
                np.size(size) != rank:
            raise _invalid(f"Expected begin and size arguments to be 1-D tensors of size "
                           f"{rank}, but got shapes {_shape_str(np.shape(begin))} and "
                           f"{_shape_str(np.shape(size))} instead.")
        b, s = _int_list(begin, np.asarray), _int_list(size, np.asarray)
        key = []
        for i in range(rank):
            bi, si = b[i], s[i]
            if si == -1:
                si = shape[i] - bi
            if not 0 <= bi <= shape[i]:
                raise _invalid(f"Expected begin[{i}] in [0, {shape[i]}], but got {bi}")
            if not (0 <= si and bi + si <= shape[i]):
                raise _invalid(f"Expected size[{i}] in [0, {shape[i] - bi}], but got {si}")
            key.append(slice(bi, bi + si))
        return x[tuple(key)]

    return _string_safe(ctx, slice_kernel)


@ks.api("slice")
def slice_(input_: Any, begin: Any, size: Any, name: str | None = None) -> Tensor:
    """Extracts the slice of ``input_`` starting at ``begin`` with size ``size`` (-1: all
    remaining elements)."""
    return _apply("Slice", name=name, input=input_, begin=begin, size=size)


# =======================================================================================
# StridedSlice
# =======================================================================================
_NEW = "new"
_SHRINK = "shrink"
_DIM = "dim"


class _SliceSpecError(Exception):
    pass


def _strided_slice_spec(in_dims: Sequence[int | None], begin: list[int] | None,
                        end: list[int] | None, strides: list[int], begin_mask: int,
                        end_mask: int, ellipsis_mask: int, new_axis_mask: int,
                        shrink_axis_mask: int) -> tuple[list[Any], list[tuple[str, int]]]:
    """TF's ValidateStridedSliceOp: the canonical per-dimension slices of the input and
    how they map to output dimensions.

    Returns ``(dense, gather)``: ``dense[k] = (begin, end, stride, size)`` for input
    dimension k (begin/end None when unknown, size None when unknown); ``gather`` lists
    the output dimensions in order as ``("dim", k)``, ``("new", -1)`` or ``("shrink", k)``.
    Raises _SliceSpecError with TF's message for invalid specs.
    """
    n_sparse = len(strides)
    if ellipsis_mask & (ellipsis_mask - 1):
        raise _SliceSpecError("Multiple ellipses in slice spec not allowed")
    num_add_after = 0
    seen = False
    for i in range(n_sparse):
        if seen and (new_axis_mask >> i) & 1:
            num_add_after += 1
        if (ellipsis_mask >> i) & 1:
            seen = True
    if not seen:
        ellipsis_mask |= 1 << n_sparse
        n_sparse += 1
    rank = len(in_dims)
    sparse_b = begin
    sparse_e = end
    entries: list[tuple[int | None, int | None, int, bool, bool, bool]] = []
    gather: list[tuple[str, int]] = []
    full = 0
    for i in range(n_sparse):
        bit = 1 << i
        if ellipsis_mask & bit:
            nxt = min(rank - (n_sparse - i) + 1 + num_add_after, rank)
            while full < nxt:
                entries.append((0, 0, 1, True, True, False))
                gather.append((_DIM, full))
                full += 1
        elif new_axis_mask & bit:
            gather.append((_NEW, -1))
        else:
            if full == rank:
                raise _SliceSpecError(f"Index out of range using input dim {full}; input has "
                                      f"only {rank} dims")
            shrink = bool(shrink_axis_mask & bit)
            entries.append((None if sparse_b is None else sparse_b[i],
                            None if sparse_e is None else sparse_e[i], strides[i],
                            bool(begin_mask & bit), bool(end_mask & bit), shrink))
            gather.append((_SHRINK if shrink else _DIM, full))
            full += 1
    known = begin is not None and end is not None
    dense: list[Any] = []
    for k, (b, e, s, bm, em, shrink) in enumerate(entries):
        if s == 0:
            raise _SliceSpecError(f"strides[{k}] must be non-zero")
        dim = in_dims[k]
        if dim is None:
            dense.append((None, None, s, 1 if shrink else None))
            continue
        if shrink and s <= 0:
            raise _SliceSpecError("only stride 1 allowed on non-range indexing.")
        lo, hi = (0, dim) if s > 0 else (-1, dim - 1)
        length: int | None = None
        if known:
            if shrink:
                b = b + dim if b < 0 else b
                e = b + 1
                if b < 0 or b >= dim:
                    raise _SliceSpecError(f"slice index {b} of dimension {k} out of bounds.")
            else:
                if bm:
                    b = lo if s > 0 else hi
                else:
                    b = b + dim if b < 0 else b
                    b = lo if b < lo else hi if b > hi else b
                if em:
                    e = hi if s > 0 else lo
                else:
                    e = e + dim if e < 0 else e
                    e = lo if e < lo else hi if e > hi else e
            length = e - b
        elif shrink:
            length = 1
        elif bm and em:
            length = -dim if s < 0 else dim
        if length is None:
            dense.append((None, None, s, None))
            continue
        if length == 0 or (length < 0) != (s < 0):
            size = 0
        else:
            size = abs(length) // abs(s) + (1 if abs(length) % abs(s) else 0)
        dense.append((b if known else None, e if known else None, s, size))
    return dense, gather


def _strided_slice_shape(op: Any) -> list[TensorShape]:
    in_d = _dims(op.inputs[0])
    shapes = [_with_rank(_dims(t), 1, op) for t in op.inputs[1:4]]
    n = _merge(_merge(shapes[0], shapes[1], op), shapes[2], op)[0]
    strides = _static_value(op.inputs[3])
    if in_d is None or n is None or strides is None:
        return [unknown_shape()]
    b = _static_value(op.inputs[1])
    e = _static_value(op.inputs[2])
    a = op.node_attrs
    try:
        dense, gather = _strided_slice_spec(
            in_d, None if b is None or e is None else [int(v) for v in b.reshape(-1)],
            None if b is None or e is None else [int(v) for v in e.reshape(-1)],
            [int(v) for v in strides.reshape(-1)], a.get("begin_mask", 0), a.get("end_mask", 0),
            a.get("ellipsis_mask", 0), a.get("new_axis_mask", 0), a.get("shrink_axis_mask", 0))
    except _SliceSpecError as ex:
        raise _shape_error(op, str(ex)) from None
    out: list[int | None] = []
    for kind, k in gather:
        if kind == _DIM:
            out.append(dense[k][3])
        elif kind == _NEW:
            out.append(1)
    return [TensorShape(out)]


ks.op(OpDef("StridedSlice", inputs=["input: T", "begin: Index", "end: Index", "strides: Index"],
            outputs=["output: T"],
            attrs=["T: type", "Index: {int32, int64}", "begin_mask: int = 0",
                   "end_mask: int = 0", "ellipsis_mask: int = 0", "new_axis_mask: int = 0",
                   "shrink_axis_mask: int = 0"],
            shape_fn=_strided_slice_shape, doc="Python-style strided slicing."))


def _numpy_key(dense: list[Any], gather: list[tuple[str, int]]) -> tuple[Any, ...]:
    """The numpy index tuple performing a validated strided slice."""
    key: list[Any] = []
    for kind, k in gather:
        if kind == _NEW:
            key.append(None)
            continue
        b, e, s, size = dense[k]
        if kind == _SHRINK:
            key.append(b)
        elif size == 0:
            key.append(slice(0, 0))
        elif s > 0:
            key.append(slice(b, e, s))
        else:
            key.append(slice(b, None if e < 0 else e, s))
    key.append(Ellipsis)  # keeps 0-d results arrays
    return tuple(key)


@_kernel("StridedSlice", host_memory=("begin", "end", "strides"))
def _strided_slice_kernel(ctx: Any) -> Callable:
    a = ctx.attrs
    masks = (a.get("begin_mask", 0), a.get("end_mask", 0), a.get("ellipsis_mask", 0),
             a.get("new_axis_mask", 0), a.get("shrink_axis_mask", 0))
    # With constant begin/end/strides the numpy key depends only on the input shape.
    # (a worker of another process has no graph op, only the node: no constants known)
    consts = [_static_value(t) if t.op.type == "Const" else None for t in ctx.op.inputs[1:4]] \
        if ctx.op is not None else [None] * 3
    cache: dict[tuple[int, ...], tuple[Any, ...]] | None = \
        {} if all(c is not None for c in consts) else None
    host = host_reader(ctx)

    def key_for(shape: tuple[int, ...], begin: Any, end: Any, strides: Any) -> tuple[Any, ...]:
        begin, end, strides = host(begin), host(end), host(strides)
        if not (np.ndim(begin) == np.ndim(end) == np.ndim(strides) == 1
                and np.size(begin) == np.size(end) == np.size(strides)):
            raise _invalid(f"Expected begin, end, and strides to be 1D equal size tensors, but "
                           f"got shapes {_shape_str(np.shape(begin))}, "
                           f"{_shape_str(np.shape(end))}, and "
                           f"{_shape_str(np.shape(strides))} instead.")
        try:
            dense, gather = _strided_slice_spec(shape, _int_list(begin, np.asarray),
                                                _int_list(end, np.asarray),
                                                _int_list(strides, np.asarray), *masks)
        except _SliceSpecError as ex:
            raise _invalid(str(ex)) from None
        return _numpy_key(dense, gather)

    def strided_slice(x: Any, begin: Any, end: Any, strides: Any) -> Any:
        shape = np.shape(x)
        if cache is not None:
            key = cache.get(shape)
            if key is None:
                key = cache[shape] = key_for(shape, begin, end, strides)
        else:
            key = key_for(shape, begin, end, strides)
        return x[key]

    return _string_safe(ctx, strided_slice)


@ks.api("strided_slice")
def strided_slice(input_: Any, begin: Any, end: Any, strides: Any = None, begin_mask: int = 0,
                  end_mask: int = 0, ellipsis_mask: int = 0, new_axis_mask: int = 0,
                  shrink_axis_mask: int = 0, var: Any = None, name: str | None = None) -> Tensor:
    """Strided slice of ``input_`` (``input_[begin:end:strides]`` per dimension, with TF's
    begin/end/ellipsis/new-axis/shrink masks)."""
    if strides is None:
        strides = ones_like(begin)
    return _apply("StridedSlice", name=name, input=input_, begin=begin, end=end,
                  strides=strides, begin_mask=begin_mask, end_mask=end_mask,
                  ellipsis_mask=ellipsis_mask, new_axis_mask=new_axis_mask,
                  shrink_axis_mask=shrink_axis_mask)


_SLICE_TYPE_ERROR = ("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and "
                     "scalar tf.int32/tf.int64 tensors are valid indices")


def _check_index(idx: Any) -> None:
    if isinstance(idx, (int, Dimension)) and not isinstance(idx, bool):
        return
    dtype = getattr(idx, "dtype", None)
    ok = dtype is not None
    if ok:
        try:
            ok = _dt.as_dtype(dtype).base_dtype in (_dt.int32, _dt.int64)
        except TypeError:
            ok = False
    shape = getattr(idx, "shape", None)
    if ok and shape is not None:
        nd = shape.ndims if isinstance(shape, TensorShape) else len(shape)
        ok = nd != 1
    if not ok:
        raise TypeError(_SLICE_TYPE_ERROR + f", got {idx!r}")


def _index_value(v: Any) -> Any:
    return int(v) if isinstance(v, Dimension) else v


@ks.api("__getitem__")
def _slice_helper(tensor: Any, slice_spec: Any, var: Any = None) -> Tensor:
    """``tensor[slice_spec]``: ints, slices (negative steps too), Ellipsis, tf.newaxis and
    scalar int tensors build one StridedSlice; a bool mask calls boolean_mask."""
    if isinstance(slice_spec, bool) or \
            (isinstance(slice_spec, Tensor) and slice_spec.dtype.base_dtype is _dt.bool) or \
            (isinstance(slice_spec, np.ndarray) and slice_spec.dtype == bool):
        return boolean_mask(tensor=tensor, mask=slice_spec)
    if not isinstance(slice_spec, (list, tuple)):
        slice_spec = [slice_spec]
    begin: list[Any] = []
    end: list[Any] = []
    strides: list[Any] = []
    new_axis_mask = shrink_axis_mask = begin_mask = end_mask = ellipsis_mask = 0
    for index, s in enumerate(slice_spec):
        if isinstance(s, slice):
            if s.start is not None and (isinstance(s.start, Tensor) or s.start != sys.maxsize):
                _check_index(s.start)
                begin.append(_index_value(s.start))
            else:
                begin.append(0)
                begin_mask |= 1 << index
            if s.stop is not None and (isinstance(s.stop, Tensor) or s.stop != sys.maxsize):
                _check_index(s.stop)
                end.append(_index_value(s.stop))
            else:
                end.append(0)
                end_mask |= 1 << index
            if s.step is not None:
                _check_index(s.step)
                strides.append(_index_value(s.step))
            else:
                strides.append(1)
        elif s is Ellipsis:
            begin.append(0)
            end.append(0)
            strides.append(1)
            ellipsis_mask |= 1 << index
        elif s is None:
            begin.append(0)
            end.append(0)
            strides.append(1)
            new_axis_mask |= 1 << index
        else:
            _check_index(s)
            s = _index_value(s)
            begin.append(s)
            end.append(s + 1)
            strides.append(1)
            shrink_axis_mask |= 1 << index
    with name_scope(None, "strided_slice", [tensor] + begin + end + strides) as scope:
        if begin:
            pb, pe, ps = stack(begin), stack(end), stack(strides)
            if _dt.int64 in (pb.dtype.base_dtype, pe.dtype.base_dtype, ps.dtype.base_dtype):
                pb, pe, ps = (_cast(x, _dt.int64) for x in (pb, pe, ps))
        else:
            pb = pe = ps = convert_to_tensor(np.zeros([0], np.int32), dtype=_dt.int32)
        return strided_slice(tensor, pb, pe, ps, begin_mask=begin_mask, end_mask=end_mask,
                             shrink_axis_mask=shrink_axis_mask, new_axis_mask=new_axis_mask,
                             ellipsis_mask=ellipsis_mask, var=var, name=scope)


# =======================================================================================
# Gather, GatherV2, GatherNd
# =======================================================================================
def _gather_shape(op: Any) -> list[TensorShape]:
    p = _with_rank_at_least(_dims(op.inputs[0]), 1, op)
    i = _dims(op.inputs[1])
    if p is None or i is None:
        return [unknown_shape()]
    return [TensorShape(i + p[1:])]


def _gather_v2_shape(op: Any) -> list[TensorShape]:
    p = _with_rank_at_least(_dims(op.inputs[0]), 1, op)
    i = _dims(op.inputs[1])
    _with_rank(_dims(op.inputs[2]), 0, op)
    axis = _static_int(op.inputs[2])
    if axis is None:
        if p is not None and i is not None:
            return [unknown_shape(len(p) + len(i) - 1)]
        return [unknown_shape()]
    _with_rank_at_least(p, -axis if axis < 0 else axis + 1, op)
    bd = op.node_attrs.get("batch_dims", 0)
    _with_rank_at_least(i, abs(bd), op)
    if p is None or i is None:
        return [unknown_shape()]
    if bd < 0:
        bd += len(i)
    _with_rank_at_least(p, bd + 1, op)
    ax = _canon_axis(axis, len(p))
    return [TensorShape(p[:ax] + i[bd:] + p[ax + 1:])]


def _gather_nd_shape(op: Any) -> list[TensorShape]:
    p = _dims(op.inputs[0])
    i = _with_rank_at_least(_dims(op.inputs[1]), 1, op)
    if p is None or i is None or i[-1] is None:
        return [unknown_shape()]
    r = i[-1]
    if r > len(p):
        raise _shape_error(op, f"indices.shape[-1] must be <= params.rank, but saw indices "
                               f"shape: {_fmt(i)} and params shape: {_fmt(p)}")
    return [TensorShape(i[:-1] + p[r:])]


ks.op(OpDef("Gather", inputs=["params: Tparams", "indices: Tindices"],
            outputs=["output: Tparams"],
            attrs=["validate_indices: bool = true", "Tparams: type", "Tindices: {int32, int64}"],
            shape_fn=_gather_shape, doc="Gathers slices of params along dimension 0."),
      OpDef("GatherV2", inputs=["params: Tparams", "indices: Tindices", "axis: Taxis"],
            outputs=["output: Tparams"],
            attrs=["batch_dims: int = 0", "Tparams: type", "Tindices: {int32, int64}",
                   "Taxis: {int32, int64}"],
            shape_fn=_gather_v2_shape, doc="Gathers slices of params along an axis."),
      OpDef("GatherNd", inputs=["params: Tparams", "indices: Tindices"],
            outputs=["output: Tparams"], attrs=["Tparams: type", "Tindices: {int32, int64}"],
            shape_fn=_gather_nd_shape, doc="Gathers slices of params by N-d indices."))


def _check_indices(xp: Any, idx: Any, limit: int) -> None:
    if np.size(idx) == 0:
        return
    bad = (idx < 0) | (idx >= limit)
    if bool(bad.any()):
        flat = int(xp.flatnonzero(bad.reshape(-1))[0])
        v = int(idx.reshape(-1)[flat])
        raise _invalid(f"indices{_slice_debug(np.shape(idx), flat)} = {v} is not in "
                       f"[0, {limit})")


def _gather(xp: Any, params: Any, idx: Any, axis: int, batch_dims: int) -> Any:
    pshape = np.shape(params)
    rank = len(pshape)
    if not -rank <= axis < rank:
        raise _invalid(f"Expected axis in the range [{-rank}, {rank}), but got {axis}")
    axis = _canon_axis(axis, rank)
    ishape = np.shape(idx)
    if batch_dims < 0:
        batch_dims += len(ishape)
    if batch_dims:
        if batch_dims > axis:
            raise _invalid(f"batch_dims ({batch_dims}) must be less than or equal to axis "
                           f"({axis}).")
        for k in range(batch_dims):
            if pshape[k] != ishape[k]:
                raise _invalid(f"params.shape[{k}]: {pshape[k]} should be equal to "
                               f"indices.shape[{k}]: {ishape[k]}")
    _check_indices(xp, idx, pshape[axis])
    if not batch_dims:
        out = xp.take(params, idx, axis=axis)
    else:
        bshape = pshape[:batch_dims]
        nb = int(np.prod(bshape, dtype=np.int64))
        p = params.reshape((nb,) + pshape[batch_dims:])
        i = idx.reshape((nb,) + ishape[batch_dims:])
        ax = axis - batch_dims
        parts = [xp.take(p[b], i[b], axis=ax) for b in range(nb)]
        inner = pshape[batch_dims:axis] + ishape[batch_dims:] + pshape[axis + 1:]
        out = xp.stack(parts).reshape(bshape + inner) if nb else \
            xp.zeros(bshape + inner, dtype=params.dtype)
    if not isinstance(out, xp.ndarray):
        out = xp.asarray(out, dtype=params.dtype)
    return out


@_kernel("Gather")
def _gather_v1_kernel(ctx: Any) -> Callable:
    xp = ctx.xp

    def gather(params: Any, indices: Any) -> Any:
        return _gather(xp, params, xp.asarray(indices), 0, 0)

    return _string_safe(ctx, gather)


@_kernel("GatherV2", host_memory=("axis",))
def _gather_v2_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    batch_dims = ctx.attrs.get("batch_dims", 0)
    host = host_reader(ctx)

    def gather_v2(params: Any, indices: Any, axis: Any) -> Any:
        return _gather(xp, params, xp.asarray(indices), _int_scalar(axis, host), batch_dims)

    return _string_safe(ctx, gather_v2)


@_kernel("GatherNd")
def _gather_nd_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    host = host_reader(ctx)

    def gather_nd(params: Any, indices: Any) -> Any:
        indices = xp.asarray(indices)
        pshape = np.shape(params)
        ishape = np.shape(indices)
        if len(ishape) < 1:
            raise _invalid(f"indices must be at least a vector, but got shape "
                           f"{_shape_str(ishape)}")
        r = ishape[-1]
        if r > len(pshape):
            raise _invalid(f"index innermost dimension length must be <= params rank; saw: "
                           f"{r} vs. {len(pshape)}")
        outer = ishape[:-1]
        out_shape = outer + pshape[r:]
        if r == 0:
            n = int(np.prod(outer, dtype=np.int64))
            flat = params.reshape((1,) + pshape)
            return xp.repeat(flat, n, axis=0).reshape(out_shape)
        idx = indices.reshape(-1, r)
        if idx.shape[0]:
            bad = ((idx < 0) | (idx >= xp.asarray(pshape[:r], dtype=idx.dtype))).any(axis=1)
            if bool(bad.any()):
                row = int(xp.flatnonzero(bad)[0])
                vals = ", ".join(str(v) for v in _int_list(idx[row], host))
                raise _invalid(f"indices{_slice_debug(outer, row)} = [{vals}] does not index "
                               f"into param shape {_shape_str(pshape)}")
        out = params[tuple(idx[:, k] for k in range(r))]
        return out.reshape(out_shape)

    return _string_safe(ctx, gather_nd)


@ks.api("gather")
def gather(params: Any, indices: Any, validate_indices: Any = None, name: str | None = None,
           axis: Any = None, batch_dims: int = 0) -> Tensor:
    """Gathers slices of ``params`` along ``axis`` at ``indices`` (GatherV2)."""
    del validate_indices
    if axis is None:
        axis = batch_dims
    if hasattr(params, "sparse_read") and _static_int(axis) == 0 and not batch_dims:
        return params.sparse_read(indices, name=name)
    return _apply("GatherV2", name=name, params=params, indices=indices, axis=axis,
                  batch_dims=batch_dims)


@ks.api("batch_gather")
def batch_gather(params: Any, indices: Any, name: str | None = None) -> Tensor:
    """Gathers along the first non-batch axis with the leading dims of ``indices`` as batch
    dimensions."""
    with name_scope(name, "BatchGather", [params, indices]):
        indices = _convert(indices, name="indices")
        params = _convert(params, name="params")
        if indices.shape.ndims is None:
            raise ValueError("batch_gather does not allow indices with unknown shape.")
        bd = indices.shape.ndims - 1
        return gather(params, indices, axis=bd, batch_dims=bd)


@ks.api("gather_nd", "manip.gather_nd")
def gather_nd(params: Any, indices: Any, name: str | None = None, batch_dims: Any = 0) -> Tensor:
    """Gathers slices of ``params`` indexed by the last dimension of ``indices``; with
    ``batch_dims = B`` the first B dimensions of both are batch dimensions (the
    ``BatchGatherND`` composite of TF 1.15)."""
    if isinstance(batch_dims, Tensor):
        value = constant_value(batch_dims)
        if value is not None:
            batch_dims = int(value)
    elif isinstance(batch_dims, (np.integer, np.ndarray)):
        batch_dims = int(batch_dims)
    if isinstance(batch_dims, int) and not isinstance(batch_dims, bool) and batch_dims == 0:
        return _apply("GatherNd", name=name, params=params, indices=indices)
    return _batch_gather_nd(params, indices, batch_dims, name=name)


def _batch_gather_nd(params: Any, indices: Any, batch_dims: Any,
                     name: str | None = None) -> Tensor:
    """``gather_nd`` with leading batch dimensions, as TF 1.15's ``batch_gather_nd``: the
    batch coordinates (a meshgrid of the batch shape) are prepended to each index and
    one GatherNd runs over ``params`` with its batch dimensions flattened into one.

    :raises TypeError: ``batch_dims`` is not a Python int
    :raises ValueError: ``batch_dims`` is negative or not below both ranks
    """
    with name_scope(name, "BatchGatherND", [params, indices]):
        indices = _convert(indices, name="indices")
        params = _convert(params, name="params")
        if not isinstance(batch_dims, int) or isinstance(batch_dims, bool):
            raise TypeError(f"batch_dims must be an int; got {batch_dims!r}")
        if batch_dims < 0:
            raise ValueError("tf.gather_nd does not allow negative batch_dims.")
        pr, ir = params.shape.ndims, indices.shape.ndims
        if ir is not None and batch_dims >= ir:
            raise ValueError(f"batch_dims = {batch_dims} must be less than rank(indices) = "
                             f"{ir}")
        if pr is not None and batch_dims >= pr:
            raise ValueError(f"batch_dims = {batch_dims} must be less than rank(params) = "
                             f"{pr}")
        i32 = _dt.int32
        params_shape = shape(params)
        indices_shape = shape(indices)
        batch_shape = params_shape[:batch_dims]
        batch_size = apply_op("Prod", input=batch_shape,
                              reduction_indices=convert_to_tensor(np.array([0], np.int32)))
        index_internal_ndims = rank(indices) - batch_dims - 1
        indices_internal_shape = indices_shape[batch_dims:-1]
        idt = indices.dtype.base_dtype
        dim_ranges = [
            apply_op("Cast", x=apply_op("Range", start=convert_to_tensor(np.int32(0)), limit=d,
                                        delta=convert_to_tensor(np.int32(1))), DstT=idt)
            for d in unstack(batch_shape, num=batch_dims, axis=0)]
        mesh = meshgrid(*dim_ranges, indexing="ij")
        flat = [reshape(x, shape=(-1,)) for x in mesh]
        index_grid = transpose(stack(flat, axis=0))
        grid_shape = shape(index_grid)
        index_grid = reshape(index_grid, concat(
            [grid_shape[:1], ones(index_internal_ndims, dtype=i32), grid_shape[1:]], axis=0))
        tile_shape = concat(((1,), indices_internal_shape, (1,)), axis=0)
        index_grid = tile(index_grid, multiples=tile_shape)
        flat_shape = concat(([batch_size], indices_shape[batch_dims:]), axis=0)
        flat_indices = reshape(indices, shape=flat_shape)
        full = concat((index_grid, flat_indices), axis=-1)
        out = apply_op("GatherNd", params=params, indices=full)
        out_shape = shape(out)
        return reshape(out, shape=concat((batch_shape, out_shape[1:]), axis=0))


# =======================================================================================
# OneHot
# =======================================================================================
def _one_hot_shape(op: Any) -> list[TensorShape]:
    axis = op.node_attrs.get("axis", -1)
    if axis < -1:
        raise _shape_error(op, "axis must be >= -1")
    _with_rank(_dims(op.inputs[1]), 0, op)
    depth = _static_int(op.inputs[1])
    if depth is not None and depth < 0:
        raise _shape_error(op, f"Dimension size, given by scalar input {depth}, must be "
                               "non-negative")
    i = _dims(op.inputs[0])
    if i is None:
        return [unknown_shape()]
    new_rank = len(i) + 1
    k = (axis + new_rank) % new_rank
    return [TensorShape(i[:k] + (depth,) + i[k:])]


ks.op(OpDef("OneHot", inputs=["indices: TI", "depth: int32", "on_value: T", "off_value: T"],
            outputs=["output: T"],
            attrs=["axis: int = -1", "T: type", "TI: {uint8, int32, int64} = DT_INT64"],
            shape_fn=_one_hot_shape, doc="A one-hot tensor."))


@_kernel("OneHot", host_memory=("depth",))
def _one_hot_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    axis = ctx.attrs.get("axis", -1)
    dt = ctx.output_dtypes[0]
    host = host_reader(ctx)

    def one_hot(indices: Any, depth: Any, on_value: Any, off_value: Any) -> Any:
        indices = xp.asarray(indices)
        d = _int_scalar(depth, host)
        if d < 0:
            raise _invalid(f"depth must be non-negative, got: {d}")
        if np.ndim(on_value) != 0:
            raise _invalid(f"on_value must be a scalar, but got: "
                           f"{_shape_str(np.shape(on_value))}")
        if np.ndim(off_value) != 0:
            raise _invalid(f"off_value must be a scalar, but got: "
                           f"{_shape_str(np.shape(off_value))}")
        rank = indices.ndim
        if not -1 <= axis <= rank:
            raise _invalid(f"Expected axis to be -1 or between [0, {rank}).  But received: "
                           f"{axis}")
        ax = rank if axis == -1 else axis
        shape = [1] * (rank + 1)
        shape[ax] = d
        ar = xp.arange(d).reshape(shape)
        mask = xp.expand_dims(indices, ax).astype(np.int64) == ar
        if dt is _dt.string:
            return np.where(mask, _obj(on_value), _obj(off_value))
        return xp.where(mask, on_value, off_value).astype(dt.np, copy=False)

    return one_hot


@ks.api("one_hot")
def one_hot(indices: Any, depth: Any, on_value: Any = None, off_value: Any = None,
            axis: Any = None, dtype: Any = None, name: str | None = None) -> Tensor:
    """A one-hot tensor: ``on_value`` where ``indices`` equals the position along ``axis``,
    ``off_value`` elsewhere (dtype inferred from them, default float32)."""
    with name_scope(name, "one_hot", [indices, depth, on_value, off_value, axis, dtype]) as scope:
        dtype = None if dtype is None else _dt.as_dtype(dtype).base_dtype
        on_exists = on_value is not None
        off_exists = off_value is not None
        on_dtype = _convert(on_value).dtype.base_dtype if on_exists else None
        off_dtype = _convert(off_value).dtype.base_dtype if off_exists else None
        if on_exists or off_exists:
            if dtype is not None:
                if on_exists and on_dtype is not dtype:
                    raise TypeError(f"dtype {on_dtype!r} of on_value does not match dtype "
                                    f"parameter {dtype!r}")
                if off_exists and off_dtype is not dtype:
                    raise TypeError(f"dtype {off_dtype!r} of off_value does not match dtype "
                                    f"parameter {dtype!r}")
            else:
                dtype = on_dtype if on_exists else off_dtype
        elif dtype is None:
            dtype = _dt.float32
        if not on_exists:
            on_value = convert_to_tensor(1, dtype, name="on_value")
            on_dtype = dtype
        if not off_exists:
            off_value = convert_to_tensor(0, dtype, name="off_value")
            off_dtype = dtype
        if on_dtype is not off_dtype:
            raise TypeError(f"dtype {on_dtype!r} of on_value does not match dtype "
                            f"{off_dtype!r} of off_value")
        return _apply("OneHot", name=scope, indices=indices, depth=depth, on_value=on_value,
                      off_value=off_value, axis=axis)


# =======================================================================================
# Fill, ZerosLike, OnesLike, zeros, ones
# =======================================================================================
def _fill_shape(op: Any) -> list[TensorShape]:
    _with_rank(_dims(op.inputs[0]), 1, op)
    _with_rank(_dims(op.inputs[1]), 0, op)
    v = _static_value(op.inputs[0])
    if v is not None and np.any(v < 0):
        raise _shape_error(op, "Fill dimensions must be >= 0")
    return [_shape_value(op.inputs[0], op)]


ks.op(OpDef("Fill", inputs=["dims: index_type", "value: T"], outputs=["output: T"],
            attrs=["T: type", "index_type: {int32, int64} = DT_INT32"], shape_fn=_fill_shape,
            doc="A tensor of shape dims filled with value."),
      OpDef("ZerosLike", inputs=["x: T"], outputs=["y: T"], attrs=["T: type"],
            shape_fn=unchanged_shape, doc="Zeros with the shape and type of x."),
      OpDef("OnesLike", inputs=["x: T"], outputs=["y: T"],
            attrs=["T: {bfloat16, half, float, double, int8, uint8, int16, uint16, int32, "
                   "int64, complex64, complex128, bool}"],
            shape_fn=unchanged_shape, doc="Ones with the shape and type of x."))


@_kernel("Fill", host_memory=("dims",))
def _fill_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    dt = ctx.output_dtypes[0]
    host = host_reader(ctx)

    def fill(dims: Any, value: Any) -> Any:
        dims = host(dims)
        if np.ndim(dims) != 1:
            raise _invalid(f"dims must be a vector, got shape {_shape_str(np.shape(dims))}")
        if np.ndim(value) != 0:
            raise _invalid(f"value must be a scalar, got shape {_shape_str(np.shape(value))}")
        d = _int_list(dims, np.asarray)
        for x in d:
            if x < 0:
                raise _invalid(f"Dimension {x} must be >= 0")
        v = value[()] if isinstance(value, np.ndarray) else value
        return _full(xp, d, v, dt)

    return fill


@_kernel("ZerosLike")
def _zeros_like_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    dt = ctx.output_dtypes[0]
    if dt is _dt.string:
        return lambda x: _full(xp, np.shape(x), b"", dt)
    return lambda x: xp.zeros(np.shape(x), dtype=dt.np)


@_kernel("OnesLike")
def _ones_like_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    npd = ctx.output_dtypes[0].np
    return lambda x: xp.ones(np.shape(x), dtype=npd)


@ks.api("fill")
def fill(dims: Any, value: Any, name: str | None = None) -> Tensor:
    """A tensor of shape ``dims`` filled with the scalar ``value``."""
    return _apply("Fill", name=name, dims=dims, value=value)


def _small_shape(shape: Any) -> list[int] | None:
    """``shape`` as an int list when it is static and has fewer than 1000 elements."""
    if isinstance(shape, TensorShape):
        if not shape.is_fully_defined():
            return None
        shape = shape.as_list()
    elif isinstance(shape, Dimension):
        shape = [shape]
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = [shape]
    if isinstance(shape, np.ndarray) and shape.dtype.kind in "iu" and shape.ndim <= 1:
        shape = shape.reshape(-1).tolist()
    if not isinstance(shape, (list, tuple)):
        return None
    out = []
    for d in shape:
        if isinstance(d, Dimension):
            if d.value is None:
                return None
            d = d.value
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            return None
        out.append(int(d))
    if np.prod(out, dtype=np.float64) >= 1000:
        return None
    return out


def _filled(shape: Any, value: Any, dtype: _dt.DType, scope: str) -> Tensor:
    if dtype is _dt.string and not isinstance(value, bytes):
        raise TypeError(f"Expected string, but got {value!r} of type '{type(value).__name__}'.")
    if not isinstance(shape, Tensor):
        small = _small_shape(shape)
        if small is not None and all(d >= 0 for d in small):
            if dtype is _dt.string:
                arr = np.empty(small, dtype=object)
                arr.fill(value)
            else:
                arr = np.full(small, value, dtype=dtype.np)
            return convert_to_tensor(arr, dtype=dtype, name=scope)
        try:
            shape = _tensor_shape_to_tensor(as_shape(shape))
        except (TypeError, ValueError):
            shape = _convert(shape, dtype=_dt.int32)
    if shape.shape.ndims == 0:
        shape = reshape(shape, [-1])
    return apply_op("Fill", name=scope, dims=shape,
                    value=convert_to_tensor(np.array(value, dtype=object if dtype is _dt.string
                                                     else dtype.np), dtype=dtype))


@ks.api("zeros")
def zeros(shape: Any, dtype: Any = _dt.float32, name: str | None = None) -> Tensor:
    """A tensor of ``shape`` filled with zeros (a Const when small and static)."""
    dtype = _dt.as_dtype(dtype).base_dtype
    with name_scope(name, "zeros", [shape]) as scope:
        zero = False if dtype is _dt.bool else b"" if dtype is _dt.string else 0
        return _filled(shape, zero, dtype, scope)


@ks.api("ones")
def ones(shape: Any, dtype: Any = _dt.float32, name: str | None = None) -> Tensor:
    """A tensor of ``shape`` filled with ones (a Const when small and static)."""
    dtype = _dt.as_dtype(dtype).base_dtype
    with name_scope(name, "ones", [shape]) as scope:
        one = True if dtype is _dt.bool else 1
        return _filled(shape, one, dtype, scope)


@ks.api("zeros_like")
def zeros_like(tensor: Any, dtype: Any = None, name: str | None = None,
               optimize: bool = True) -> Tensor:
    """Zeros with the shape of ``tensor`` (and its dtype unless ``dtype`` is given)."""
    with name_scope(name, "zeros_like", [tensor]) as scope:
        tensor = _convert(tensor, name="tensor")
        dtype = None if dtype is None else _dt.as_dtype(dtype).base_dtype
        if optimize and tensor.shape.is_fully_defined() and tensor.dtype is not _dt.variant:
            return zeros(tensor.shape, dtype=dtype or tensor.dtype.base_dtype, name=scope)
        if dtype is not None and dtype is not tensor.dtype.base_dtype:
            return zeros(_shape_internal(tensor, optimize=optimize), dtype=dtype, name=scope)
        return apply_op("ZerosLike", name=scope, x=tensor)


@ks.api("ones_like")
def ones_like(tensor: Any, dtype: Any = None, name: str | None = None,
              optimize: bool = True) -> Tensor:
    """Ones with the shape of ``tensor`` (and its dtype unless ``dtype`` is given)."""
    with name_scope(name, "ones_like", [tensor]) as scope:
        tensor = _convert(tensor, name="tensor")
        ones_shape = _shape_internal(tensor, optimize=optimize)
        dtype = tensor.dtype.base_dtype if dtype is None else _dt.as_dtype(dtype).base_dtype
        ret = ones(ones_shape, dtype=dtype, name=scope)
        ret.set_shape(tensor.shape)
        return ret


# =======================================================================================
# Range, LinSpace
# =======================================================================================
def _range_size(start: Any, limit: Any, delta: Any, integral: bool) -> int:
    if start > limit and delta > 0:
        raise _SliceSpecError(f"Requires start <= limit when delta > 0: {start}/{limit}")
    if start < limit and delta < 0:
        raise _SliceSpecError(f"Requires start >= limit when delta < 0: {start}/{limit}")
    if delta == 0:
        raise _SliceSpecError("Requires delta != 0")
    if integral:
        return int((abs(int(limit) - int(start)) + abs(int(delta)) - 1) // abs(int(delta)))
    return int(np.ceil(np.abs((limit - start) / delta)))


def _range_shape(op: Any) -> list[TensorShape]:
    for t, n in zip(op.inputs, ("start", "limit", "delta")):
        d = _dims(t)
        if d is not None and len(d) != 0:
            raise _shape_error(op, f"Shape must be rank 0 but is rank {len(d)} for '{n}'")
    vals = [_static_value(t) for t in op.inputs]
    if any(v is None for v in vals):
        return [TensorShape([None])]
    dt = op.node_attrs["Tidx"]
    s, l, d = (dt.np.type(v.reshape(-1)[0]) for v in vals)
    try:
        return [TensorShape([_range_size(s, l, d, dt.is_integer)])]
    except _SliceSpecError as ex:
        raise _shape_error(op, str(ex)) from None


def _linspace_shape(op: Any) -> list[TensorShape]:
    for t, n in zip(op.inputs, ("start", "stop", "num")):
        d = _dims(t)
        if d is not None and len(d) != 0:
            raise _shape_error(op, f"Shape must be rank 0 but is rank {len(d)} for '{n}'")
    num = _static_int(op.inputs[2])
    if num is None:
        return [TensorShape([None])]
    if num <= 0:
        raise _shape_error(op, f"Requires num > 0: {num}")
    return [TensorShape([num])]


ks.op(OpDef("Range", inputs=["start: Tidx", "limit: Tidx", "delta: Tidx"],
            outputs=["output: Tidx"],
            attrs=["Tidx: {bfloat16, float, double, int32, int64} = DT_INT32"],
            shape_fn=_range_shape, doc="A sequence of numbers from start up to limit."),
      OpDef("LinSpace", inputs=["start: T", "stop: T", "num: Tidx"], outputs=["output: T"],
            attrs=["T: {bfloat16, float, double}", "Tidx: {int32, int64} = DT_INT32"],
            shape_fn=_linspace_shape, doc="Evenly spaced values in an interval."))


@_kernel("Range", host_memory=("start", "limit", "delta"))
def _range_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    dt = ctx.output_dtypes[0]
    t = dt.np.type
    integral = dt.is_integer
    host = host_reader(ctx)

    def range_kernel(start: Any, limit: Any, delta: Any) -> Any:
        start, limit, delta = host(start), host(limit), host(delta)
        for v, n in ((start, "start"), (limit, "limit"), (delta, "delta")):
            if np.ndim(v) != 0:
                raise _invalid(f"{n} must be a scalar, not shape {_shape_str(np.shape(v))}")
        s, l, d = t(start), t(limit), t(delta)
        if d == 0:
            raise _invalid(f"Requires delta != 0: {d}")
        try:
            n = _range_size(s, l, d, integral)
        except _SliceSpecError as ex:
            raise _invalid(str(ex)) from None
        if n == 0:
            return xp.zeros((0,), dtype=dt.np)
        if integral:
            return (xp.arange(n, dtype=dt.np) * d + s).astype(dt.np, copy=False)
        # TF accumulates (val += delta) in T; a sequential cumsum in T does the same.
        steps = xp.full((n,), d, dtype=dt.np)
        steps[0] = s
        return xp.cumsum(steps, dtype=dt.np)

    return range_kernel


@_kernel("LinSpace", host_memory=("num",))
def _linspace_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    dt = ctx.output_dtypes[0]
    t = dt.np.type
    host = host_reader(ctx)

    def lin_space(start: Any, stop: Any, num: Any) -> Any:
        start, stop, num = host(start), host(stop), host(num)
        for v, n in ((start, "start"), (stop, "stop"), (num, "num")):
            if np.ndim(v) != 0:
                raise _invalid(f"{n} must be a scalar, but received tensor of shape: "
                               f"{_shape_str(np.shape(v))}")
        n = _int_scalar(num, np.asarray)
        if n <= 0:
            raise _invalid(f"Requires num > 0: {n}")
        s, e = t(start), t(stop)
        if n == 1:
            return xp.full((1,), s, dtype=dt.np)
        step = t((e - s) / t(n - 1))
        out = xp.empty((n,), dtype=dt.np)
        out[:-1] = s + step * xp.arange(n - 1, dtype=dt.np)
        out[-1] = e
        return out

    return lin_space


_RANGE_HIERARCHY = (_dt.int32, _dt.int64, _dt.float32, _dt.float64)


@ks.api("range")
def range_(start: Any, limit: Any = None, delta: Any = 1, dtype: Any = None,
           name: str = "range") -> Tensor:
    """A sequence from ``start`` up to (not including) ``limit`` in steps of ``delta``;
    the dtype is inferred (int32 < int64 < float32 < float64) unless given."""
    if limit is None:
        start, limit = 0, start
    with name_scope(name, "Range", [start, limit, delta]) as scope:
        start = _convert(start, dtype=dtype, name="start")
        limit = _convert(limit, dtype=dtype, name="limit")
        delta = _convert(delta, dtype=dtype, name="delta")
        if dtype is None:
            args = (start, limit, delta)
            for a in args:
                if a.dtype.base_dtype not in _RANGE_HIERARCHY:
                    raise TypeError(f"tf.range: unsupported dtype {a.dtype.base_dtype.name}")
            inferred = max((a.dtype.base_dtype for a in args), key=_RANGE_HIERARCHY.index)
            start, limit, delta = (_cast(a, inferred) for a in args)
        return apply_op("Range", name=scope, start=start, limit=limit, delta=delta)


@ks.api("lin_space", "linspace")
def lin_space(start: Any, stop: Any, num: Any, name: str | None = None) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop`` inclusive."""
    return _apply("LinSpace", name=name, start=start, stop=stop, num=num)


# =======================================================================================
# ReverseV2
# =======================================================================================
def _reverse_shape(op: Any) -> list[TensorShape]:
    d = _dims(op.inputs[0])
    _with_rank(_dims(op.inputs[1]), 1, op)
    if d is not None and len(d) > 8:
        raise _shape_error(op, "reverse does not work on tensors with more than 8 dimensions")
    axes = _static_value(op.inputs[1])
    if axes is not None and d is not None:
        rank = len(d)
        seen = set()
        for i, a in enumerate(int(v) for v in axes.reshape(-1)):
            c = a + rank if a < 0 else a
            if c < 0 or c >= rank:
                raise _shape_error(op, f"'axis'[{i}] = {a} is out of valid range [0, {rank - 1}")
            if c in seen:
                raise _shape_error(op, f"axis {c} specified more than once.")
            seen.add(c)
    return [op.inputs[0].shape]


ks.op(OpDef("ReverseV2", inputs=["tensor: T", "axis: Tidx"], outputs=["output: T"],
            attrs=["Tidx: {int32, int64} = DT_INT32",
                   "T: {uint8, int8, uint16, int16, int32, int64, bool, bfloat16, half, "
                   "float, double, complex64, complex128, string}"],
            shape_fn=_reverse_shape, doc="Reverses the given dimensions of a tensor."))


@_kernel("ReverseV2", host_memory=("axis",))
def _reverse_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    host = host_reader(ctx)

    def reverse_v2(x: Any, axis: Any) -> Any:
        rank = np.ndim(x)
        axis = host(axis)
        if np.ndim(axis) != 1:
            raise _invalid(f"'dims' must be 1-dimension, not {np.ndim(axis)}")
        axes = []
        for i, a in enumerate(_int_list(axis, np.asarray)):
            c = a + rank if a < 0 else a
            if c < 0 or c >= rank:
                raise _invalid(f"'axis'[{i}] = {a} is out of valid range [0, {rank - 1}]")
            if c in axes:
                raise _invalid(f"axis {c} specified more than once.")
            axes.append(c)
        if not axes:
            return x
        return xp.flip(x, axis=tuple(axes))

    return _string_safe(ctx, reverse_v2)


@ks.api("reverse", "reverse_v2", "manip.reverse")
def reverse(tensor: Any, axis: Any, name: str | None = None) -> Tensor:
    """Reverses the dimensions of ``tensor`` listed in ``axis``."""
    return _apply("ReverseV2", name=name, tensor=tensor, axis=axis)


# =======================================================================================
# Shape, ShapeN, Size, Rank
# =======================================================================================
def _shape_shape(op: Any) -> list[TensorShape]:
    return [TensorShape([t.shape.ndims]) for t in op.inputs]


ks.op(OpDef("Shape", inputs=["input: T"], outputs=["output: out_type"],
            attrs=["T: type", "out_type: {int32, int64} = DT_INT32"], shape_fn=_shape_shape,
            doc="The shape of a tensor."),
      OpDef("ShapeN", inputs=["input: N * T"], outputs=["output: N * out_type"],
            attrs=["N: int", "T: type", "out_type: {int32, int64} = DT_INT32"],
            shape_fn=_shape_shape, doc="The shapes of N tensors."),
      OpDef("Size", inputs=["input: T"], outputs=["output: out_type"],
            attrs=["T: type", "out_type: {int32, int64} = DT_INT32"],
            shape_fn=lambda op: [TensorShape([])], doc="The number of elements of a tensor."),
      OpDef("Rank", inputs=["input: T"], outputs=["output: int32"], attrs=["T: type"],
            shape_fn=lambda op: [TensorShape([])], doc="The rank of a tensor."))


@_kernel("Shape", host_memory=("output",))
def _shape_kernel(ctx: Any) -> Callable:
    npd = ctx.output_dtypes[0].np
    return lambda x: np.array(np.shape(x), dtype=npd)


@_kernel("ShapeN", host_memory=("output",))
def _shape_n_kernel(ctx: Any) -> Callable:
    npd = ctx.output_dtypes[0].np
    return _list_out(ctx, lambda *xs: tuple(np.array(np.shape(x), dtype=npd) for x in xs))


@_kernel("Size", host_memory=("output",))
def _size_kernel(ctx: Any) -> Callable:
    t = ctx.output_dtypes[0].np.type
    return lambda x: np.array(t(np.size(x)))


@_kernel("Rank", host_memory=("output",))
def _rank_kernel(ctx: Any) -> Callable:
    return lambda x: np.array(np.int32(np.ndim(x)))


def _shape_internal(input: Any, name: str | None = None, optimize: bool = True,
                    out_type: Any = _dt.int32) -> Tensor:
    """TF's shape_internal: a Const when the static shape is fully defined."""
    out_type = _dt.as_dtype(out_type)
    with name_scope(name, "Shape", [input]) as scope:
        t = _convert(input)
        if optimize and t.shape.is_fully_defined():
            return convert_to_tensor(np.array(t.shape.as_list(), dtype=out_type.np),
                                     dtype=out_type, name=scope)
        return apply_op("Shape", name=scope, input=t, out_type=out_type)


@ks.api("shape")
def shape(input: Any, name: str | None = None, out_type: Any = _dt.int32) -> Tensor:
    """The shape of ``input`` as a 1-D tensor (a Const when statically known)."""
    return _shape_internal(input, name, optimize=True, out_type=out_type)


@ks.api("shape_n")
def shape_n(input: Any, out_type: Any = _dt.int32, name: str | None = None) -> list[Tensor]:
    """The shapes of a list of tensors."""
    return _apply("ShapeN", name=name, input=list(input), out_type=_dt.as_dtype(out_type))


@ks.api("size")
def size(input: Any, name: str | None = None, out_type: Any = _dt.int32) -> Tensor:
    """The number of elements of ``input`` (a Const when statically known)."""
    out_type = _dt.as_dtype(out_type)
    with name_scope(name, "Size", [input]) as scope:
        t = _convert(input)
        d = t.shape.as_tuple()
        if t.shape.is_fully_defined():
            return convert_to_tensor(np.array(t.shape.num_elements(), dtype=out_type.np),
                                     dtype=out_type, name=scope)
        if d and any(x == 0 for x in d):
            return convert_to_tensor(np.array(0, dtype=out_type.np), dtype=out_type,
                                     name=scope)
        return apply_op("Size", name=scope, input=t, out_type=out_type)


@ks.api("rank")
def rank(input: Any, name: str | None = None) -> Tensor:
    """The rank of ``input`` as an int32 scalar (a Const when statically known)."""
    with name_scope(name, "Rank", [input]) as scope:
        t = _convert(input)
        if t.shape.ndims is not None:
            return convert_to_tensor(np.array(t.shape.ndims, dtype=np.int32), dtype=_dt.int32,
                                     name=scope)
        return apply_op("Rank", name=scope, input=t)


# =======================================================================================
# Where, Select, SelectV2
# =======================================================================================
def _where_shape(op: Any) -> list[TensorShape]:
    return [TensorShape([None, op.inputs[0].shape.ndims])]


def _select_shape(op: Any) -> list[TensorShape]:
    data = _merge(_dims(op.inputs[1]), _dims(op.inputs[2]), op)
    cond = _dims(op.inputs[0])
    if cond is None or data is None:
        return [TensorShape(data)]
    if len(cond) == 0:
        return [TensorShape(data)]
    if len(cond) != 1 or len(data) == 0:
        return [TensorShape(_merge(data, cond, op))]
    _merge(cond, (data[0],), op)
    return [TensorShape(data)]


def _select_v2_shape(op: Any) -> list[TensorShape]:
    from ._common import broadcast_static

    s = broadcast_static(op.inputs[1].shape, op.inputs[2].shape, op)
    return [broadcast_static(op.inputs[0].shape, s, op)]


ks.op(OpDef("Where", inputs=["input: T"], outputs=["index: int64"],
            attrs=["T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, "
                   "quint8, qint32, bfloat16, uint16, complex128, half, uint32, uint64, "
                   "bool} = DT_BOOL"],
            shape_fn=_where_shape, doc="The coordinates of true (non-zero) elements."),
      OpDef("Select", inputs=["condition: bool", "t: T", "e: T"], outputs=["output: T"],
            attrs=["T: type"], shape_fn=_select_shape,
            doc="Elements of t where condition is true, else of e."),
      OpDef("SelectV2", inputs=["condition: bool", "t: T", "e: T"], outputs=["output: T"],
            attrs=["T: type"], shape_fn=_select_v2_shape,
            doc="Select with numpy-style broadcasting of all three inputs."))


@_kernel("Where")
def _where_kernel(ctx: Any) -> Callable:
    xp = ctx.xp

    def where(x: Any) -> Any:
        return xp.argwhere(xp.asarray(x)).astype(np.int64, copy=False)

    return where


@_kernel("Select")
def _select_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    is_str = ctx.output_dtypes[0] is _dt.string
    w = np.where if is_str else xp.where

    def select(cond: Any, t: Any, e: Any) -> Any:
        if is_str:
            t, e = _obj(t), _obj(e)
        ts, es, cs = np.shape(t), np.shape(e), np.shape(cond)
        if ts != es:
            raise _invalid(f"'then' and 'else' must have the same size.  but are: "
                           f"{_shape_str(ts)} vs. {_shape_str(es)}")
        if len(cs) == 0:
            return t if bool(cond) else e
        if cs == ts:
            return w(cond, t, e)
        if len(cs) == 1:
            if len(ts) < 1:
                raise _invalid(f"'then' must be at least a vector, but saw shape: "
                               f"{_shape_str(ts)}")
            if ts[0] != cs[0]:
                raise _invalid(f"Number of batches of 'then' must match size of 'cond', but "
                               f"saw: {ts[0]} vs. {cs[0]}")
            return w(xp.asarray(cond).reshape(cs + (1,) * (len(ts) - 1)), t, e)
        raise _invalid(f"'condition' must be a scalar, a vector, or have the same shape as "
                       f"'then': {_shape_str(cs)} vs. {_shape_str(ts)}")

    return select


@_kernel("SelectV2")
def _select_v2_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    is_str = ctx.output_dtypes[0] is _dt.string
    w = np.where if is_str else xp.where

    def select_v2(cond: Any, t: Any, e: Any) -> Any:
        if is_str:
            t, e = _obj(t), _obj(e)
        try:
            np.broadcast_shapes(np.shape(cond), np.shape(t), np.shape(e))
        except ValueError:
            raise _invalid(f"condition {_shape_str(np.shape(cond))}, then "
                           f"{_shape_str(np.shape(t))}, and else {_shape_str(np.shape(e))} "
                           "must be broadcastable") from None
        return w(cond, t, e)

    return select_v2


@ks.api("where")
def where(condition: Any, x: Any = None, y: Any = None, name: str | None = None) -> Tensor:
    """With one argument, the int64 coordinates [n, rank] of true elements; with three,
    elements of ``x`` where ``condition`` holds else of ``y`` (TF1 Select)."""
    if x is None and y is None:
        with name_scope(name, "Where", [condition]) as scope:
            condition = _convert(condition, preferred_dtype=_dt.bool, name="condition")
            return apply_op("Where", name=scope, input=condition)
    if x is not None and y is not None:
        return _apply("Select", name=name, condition=condition, t=x, e=y)
    raise ValueError("x and y must both be non-None or both be None.")


@ks.api("where_v2")
def where_v2(condition: Any, x: Any = None, y: Any = None, name: str | None = None) -> Tensor:
    """``tf.where`` with full broadcasting of condition, x and y (SelectV2)."""
    if x is None and y is None:
        with name_scope(name, "Where", [condition]) as scope:
            condition = _convert(condition, preferred_dtype=_dt.bool, name="condition")
            return apply_op("Where", name=scope, input=condition)
    if x is not None and y is not None:
        return _apply("SelectV2", name=name, condition=condition, t=x, e=y)
    raise ValueError("x and y must both be non-None or both be None.")


# =======================================================================================
# IdentityN, StopGradient, PreventGradient, Snapshot
# =======================================================================================
ks.op(OpDef("IdentityN", inputs=["input: T"], outputs=["output: T"], attrs=["T: list(type) >= 1"],
            shape_fn=lambda op: [t.shape for t in op.inputs],
            doc="Returns its list of inputs unchanged."),
      OpDef("StopGradient", inputs=["input: T"], outputs=["output: T"], attrs=["T: type"],
            shape_fn=unchanged_shape, doc="Identity that blocks gradients."),
      OpDef("PreventGradient", inputs=["input: T"], outputs=["output: T"],
            attrs=["T: type", "message: string = ''"], shape_fn=unchanged_shape,
            doc="Identity whose gradient is an error."),
      OpDef("Snapshot", inputs=["input: T"], outputs=["output: T"], attrs=["T: type"],
            shape_fn=unchanged_shape, doc="A copy of its input."))


@_kernel("IdentityN")
def _identity_n_kernel(ctx: Any) -> Callable:
    return _list_out(ctx, lambda *xs: tuple(xs))


@_kernel("StopGradient", "PreventGradient")
def _stop_gradient_kernel(ctx: Any) -> Callable:
    def identity(x: Any) -> Any:
        return x

    return identity


@_kernel("Snapshot")
def _snapshot_kernel(ctx: Any) -> Callable:
    def snapshot(x: Any) -> Any:
        return x.copy() if hasattr(x, "copy") else x

    return snapshot


@ks.api("identity_n")
def identity_n(input: Any, name: str | None = None) -> list[Tensor]:
    """Returns the list of tensors ``input`` unchanged."""
    return apply_op("IdentityN", name=name, input=list(input))


@ks.api("stop_gradient")
def stop_gradient(input: Any, name: str | None = None) -> Tensor:
    """Identity that blocks gradient propagation."""
    return _apply("StopGradient", name=name, input=input)


# =======================================================================================
# Unique, UniqueWithCounts, InvertPermutation
# =======================================================================================
def _unique_shape(op: Any) -> list[TensorShape]:
    d = _with_rank(_dims(op.inputs[0]), 1, op)
    out = [TensorShape([None]), TensorShape(d)]
    if len(op.outputs) == 3:
        out.append(TensorShape([None]))
    return out


ks.op(OpDef("Unique", inputs=["x: T"], outputs=["y: T", "idx: out_idx"],
            attrs=["T: type", "out_idx: {int32, int64} = DT_INT32"], shape_fn=_unique_shape,
            doc="The unique elements of a 1-D tensor, in order of first occurrence."),
      OpDef("UniqueWithCounts", inputs=["x: T"],
            outputs=["y: T", "idx: out_idx", "count: out_idx"],
            attrs=["T: type", "out_idx: {int32, int64} = DT_INT32"], shape_fn=_unique_shape,
            doc="Unique elements with their counts."))


def _unique(x: Any, with_counts: bool, idx_dtype: Any) -> tuple[Any, ...]:
    if x.dtype == object:
        first: dict[Any, int] = {}
        idx = np.empty(x.shape[0], dtype=idx_dtype)
        for i, v in enumerate(x.tolist()):
            idx[i] = first.setdefault(v, len(first))
        y = np.empty(len(first), dtype=object)
        for v, k in first.items():
            y[k] = v
        counts = np.bincount(idx, minlength=len(first)).astype(idx_dtype)
    else:
        try:
            vals, first_pos, inv, cnt = np.unique(x, return_index=True, return_inverse=True,
                                                  return_counts=True, equal_nan=False)
        except TypeError:  # older numpy
            vals, first_pos, inv, cnt = np.unique(x, return_index=True, return_inverse=True,
                                                  return_counts=True)
        order = np.argsort(first_pos, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        y = vals[order]
        idx = rank[inv.reshape(-1)].astype(idx_dtype)
        counts = cnt[order].astype(idx_dtype)
    return (y, idx, counts) if with_counts else (y, idx)


@_kernel("Unique", "UniqueWithCounts")
def _unique_kernel(ctx: Any) -> Callable:
    with_counts = ctx.op_type == "UniqueWithCounts"
    idx_dtype = ctx.output_dtypes[1].np
    xp = ctx.xp
    host = host_reader(ctx)

    def unique(x: Any) -> Any:
        x = host(x)
        if x.ndim != 1:
            raise _invalid("unique expects a 1D vector.")
        out = _unique(x, with_counts, idx_dtype)
        if xp is not np:
            out = tuple(xp.asarray(o) for o in out)
        return out

    return _string_safe(ctx, unique)


_UniqueOutput = collections.namedtuple("Unique", ["y", "idx"])
_UniqueWithCountsOutput = collections.namedtuple("UniqueWithCounts",
                                                 ["y", "idx", "count"])


@ks.api("unique")
def unique(x: Any, out_idx: Any = _dt.int32, name: str | None = None) -> Any:
    """The unique elements of 1-D ``x`` in order of first occurrence, and for each element
    of ``x`` the index of its value in them."""
    y, idx = _apply("Unique", name=name, x=x, out_idx=_dt.as_dtype(out_idx))
    return _UniqueOutput(y, idx)


@ks.api("unique_with_counts")
def unique_with_counts(x: Any, out_idx: Any = _dt.int32, name: str | None = None) -> Any:
    """``unique`` plus the number of occurrences of each unique element."""
    y, idx, count = _apply("UniqueWithCounts", name=name, x=x, out_idx=_dt.as_dtype(out_idx))
    return _UniqueWithCountsOutput(y, idx, count)


ks.op(OpDef("ListDiff", inputs=["x: T", "y: T"], outputs=["out: T", "idx: out_idx"],
            attrs=["T: type", "out_idx: {int32, int64} = DT_INT32"],
            shape_fn=lambda op: [TensorShape([None]), TensorShape([None])],
            doc="The elements of 1-D x not in 1-D y, in x's order, and their indices in x."))


@_kernel("ListDiff")
def _list_diff_kernel(ctx: Any) -> Callable:
    idx_dtype = ctx.output_dtypes[1].np
    xp = ctx.xp
    host = host_reader(ctx)

    def list_diff(x: Any, y: Any) -> Any:
        hx, hy = host(x), host(y)
        if hx.ndim != 1:
            raise _invalid(f"x should be a 1D vector, got shape {list(hx.shape)}")
        if hy.ndim != 1:
            raise _invalid(f"y should be a 1D vector, got shape {list(hy.shape)}")
        keep = ~np.isin(hx, hy)
        out, idx = hx[keep], np.flatnonzero(keep).astype(idx_dtype)
        if xp is not np:
            return xp.asarray(out), xp.asarray(idx)
        return out, idx

    return _string_safe(ctx, list_diff)


_ListDiffOutput = collections.namedtuple("ListDiff", ["out", "idx"])


@ks.api("setdiff1d", "listdiff")
def setdiff1d(x: Any, y: Any, index_dtype: Any = _dt.int32, name: str | None = None
              ) -> Any:
    """The values of 1-D ``x`` that are not in 1-D ``y``, in the order they appear in
    ``x`` (duplicates kept), and their positions in ``x`` (TF's ``ListDiff``)."""
    out, idx = _apply("ListDiff", name=name, x=x, y=y, out_idx=_dt.as_dtype(index_dtype))
    return _ListDiffOutput(out, idx)


ks.op(OpDef("InvertPermutation", inputs=["x: T"], outputs=["y: T"],
            attrs=["T: {int32, int64} = DT_INT32"],
            shape_fn=lambda op: [TensorShape(_with_rank(_dims(op.inputs[0]), 1, op))],
            doc="The inverse of a permutation."))


@_kernel("InvertPermutation")
def _invert_permutation_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    npd = ctx.output_dtypes[0].np
    host = host_reader(ctx)

    def invert_permutation(x: Any) -> Any:
        x = host(x)
        if np.ndim(x) != 1:
            raise _invalid("invert_permutation expects a 1D vector.")
        vals = _int_list(x, np.asarray)
        n = len(vals)
        out = np.full(n, -1, dtype=npd)
        for i, d in enumerate(vals):
            if d < 0 or d >= n:
                raise _invalid(f"{d} is not between 0 and {n}")
            if out[d] != -1:
                raise _invalid(f"{d} is duplicated in the input.")
            out[d] = i
        return out if xp is np else xp.asarray(out)

    return invert_permutation


@ks.api("invert_permutation", "math.invert_permutation")
def invert_permutation(x: Any, name: str | None = None) -> Tensor:
    """The inverse permutation: ``y[x[i]] = i``."""
    return _apply("InvertPermutation", name=name, x=x)


# =======================================================================================
# BroadcastTo, BroadcastArgs, broadcast shapes
# =======================================================================================
def _broadcast_to_shape(op: Any) -> list[TensorShape]:
    _with_rank(_dims(op.inputs[1]), 1, op)
    out = _shape_value(op.inputs[1], op)
    if out.ndims is None:
        return [out]
    in_d = _dims(op.inputs[0])
    if in_d is None:
        return [out]
    od = list(out.as_tuple())
    _with_rank_at_most(in_d, len(od), op)
    for i in range(len(in_d)):
        x = in_d[len(in_d) - 1 - i]
        if x is not None and x > 1:
            j = len(od) - 1 - i
            od[j] = _merge_dim(x, od[j], op)
    return [TensorShape(od)]


def _broadcast_args_shape(op: Any) -> list[TensorShape]:
    a = _with_rank(_dims(op.inputs[0]), 1, op)
    b = _with_rank(_dims(op.inputs[1]), 1, op)
    if a[0] is None or b[0] is None:
        return [TensorShape([None])]
    return [TensorShape([max(a[0], b[0])])]


ks.op(OpDef("BroadcastTo", inputs=["input: T", "shape: Tidx"], outputs=["output: T"],
            attrs=["T: type", "Tidx: {int32, int64} = DT_INT32"],
            shape_fn=_broadcast_to_shape, doc="Broadcasts a tensor to a shape."),
      OpDef("BroadcastArgs", inputs=["s0: T", "s1: T"], outputs=["r0: T"],
            attrs=["T: {int32, int64} = DT_INT32"], shape_fn=_broadcast_args_shape,
            doc="The broadcast shape of two shapes."))


@_kernel("BroadcastTo", host_memory=("shape",))
def _broadcast_to_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    host = host_reader(ctx)

    def broadcast_to(x: Any, shape: Any) -> Any:
        s = _int_list(shape, host)
        xs = list(np.shape(x))
        try:
            full = _broadcast_lists(xs, s)
        except errors.InvalidArgumentError:
            raise _invalid(f"Incompatible shapes: {_shape_str(xs)} vs. {_shape_str(s)}") from None
        if full != s:
            raise _invalid(f"Unable to broadcast tensor of shape {_shape_str(xs)} to tensor of "
                           f"shape {_shape_str(s)}")
        return xp.broadcast_to(x, s)

    return _string_safe(ctx, broadcast_to)


def _broadcast_lists(a: list[int], b: list[int]) -> list[int]:
    n = max(len(a), len(b))
    pa = [1] * (n - len(a)) + a
    pb = [1] * (n - len(b)) + b
    out = []
    for x, y in zip(pa, pb):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise _invalid(f"Incompatible shapes: {_shape_str(a)} vs. {_shape_str(b)}")
    return out


@_kernel("BroadcastArgs", host_memory=("s0", "s1", "r0"))
def _broadcast_args_kernel(ctx: Any) -> Callable:
    npd = ctx.output_dtypes[0].np
    host = host_reader(ctx)

    def broadcast_args(s0: Any, s1: Any) -> Any:
        return np.array(_broadcast_lists(_int_list(s0, host), _int_list(s1, host)),
                        dtype=npd)

    return broadcast_args


@ks.api("broadcast_to")
def broadcast_to(input: Any, shape: Any, name: str | None = None) -> Tensor:
    """Broadcasts ``input`` to ``shape`` (numpy rules, one direction)."""
    return _apply("BroadcastTo", name=name, input=input, shape=shape)


@ks.api("broadcast_dynamic_shape")
def broadcast_dynamic_shape(shape_x: Any, shape_y: Any) -> Tensor:
    """The broadcast of two shape tensors, as a tensor."""
    return _apply("BroadcastArgs", s0=shape_x, s1=shape_y)


@ks.api("broadcast_static_shape")
def broadcast_static_shape(shape_x: Any, shape_y: Any) -> TensorShape:
    """The broadcast of two TensorShapes; ValueError if they are incompatible."""
    a, b = as_shape(shape_x).as_tuple(), as_shape(shape_y).as_tuple()
    if a is None or b is None:
        return unknown_shape()
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    out: list[int | None] = []
    for x, y in zip(pa, pb):
        if x is None or y is None:
            if x is not None and x > 1:
                out.append(x)
            elif y is not None and y > 1:
                out.append(y)
            else:
                out.append(None)
        elif x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        else:
            raise ValueError(f"Incompatible shapes for broadcasting: {as_shape(shape_x)} and "
                             f"{as_shape(shape_y)}")
    return TensorShape(out)


# =======================================================================================
# MatrixDiag, MatrixDiagPart, MatrixSetDiag, MatrixBandPart, Diag, DiagPart
# =======================================================================================
def _matrix_diag_shape(op: Any) -> list[TensorShape]:
    d = _with_rank_at_least(_dims(op.inputs[0]), 1, op)
    if d is None:
        return [unknown_shape()]
    return [TensorShape(d + (d[-1],))]


def _matrix_diag_part_shape(op: Any) -> list[TensorShape]:
    d = _with_rank_at_least(_dims(op.inputs[0]), 2, op)
    if d is None:
        return [unknown_shape()]
    a, b = d[-2], d[-1]
    m = None if a is None or b is None else min(a, b)
    return [TensorShape(d[:-2] + (m,))]


def _matrix_set_diag_shape(op: Any) -> list[TensorShape]:
    inp = _with_rank_at_least(_dims(op.inputs[0]), 2, op)
    diag = _with_rank_at_least(_dims(op.inputs[1]), 1, op)
    if inp is not None:
        diag = _with_rank(diag, len(inp) - 1, op)
        a, b = inp[-2], inp[-1]
        m = None if a is None or b is None else min(a, b)
        _merge_dim(m, diag[-1], op)
        if diag is not None:
            inp = _merge(inp, diag[:-1] + (None, None), op)
    elif diag is not None:
        inp = diag[:-1] + (None, None)
    return [TensorShape(inp)]


def _diag_shape(op: Any) -> list[TensorShape]:
    d = _with_rank_at_least(_dims(op.inputs[0]), 1, op)
    return [TensorShape(None if d is None else d + d)]


def _diag_part_shape(op: Any) -> list[TensorShape]:
    d = _dims(op.inputs[0])
    if d is None:
        return [unknown_shape()]
    if len(d) % 2 or not d:
        raise _shape_error(op, f"Input must have even and non-zero rank, input rank is "
                               f"{len(d)}")
    h = len(d) // 2
    return [TensorShape([_merge_dim(d[i], d[i + h], op) for i in range(h)])]


_DIAG_T = "{bfloat16, half, float, double, int32, int64, complex64, complex128}"
ks.op(OpDef("MatrixDiag", inputs=["diagonal: T"], outputs=["output: T"], attrs=["T: type"],
            shape_fn=_matrix_diag_shape, doc="Batched diagonal matrices."),
      OpDef("MatrixDiagPart", inputs=["input: T"], outputs=["diagonal: T"], attrs=["T: type"],
            shape_fn=_matrix_diag_part_shape, doc="The main diagonals of batched matrices."),
      OpDef("MatrixSetDiag", inputs=["input: T", "diagonal: T"], outputs=["output: T"],
            attrs=["T: type"], shape_fn=_matrix_set_diag_shape,
            doc="Batched matrices with their main diagonals replaced."),
      OpDef("MatrixBandPart", inputs=["input: T", "num_lower: Tindex", "num_upper: Tindex"],
            outputs=["band: T"], attrs=["T: type", "Tindex: {int32, int64} = DT_INT64"],
            shape_fn=unchanged_shape, doc="Zeroes everything outside a central band."),
      OpDef("Diag", inputs=["diagonal: T"], outputs=["output: T"], attrs=[f"T: {_DIAG_T}"],
            shape_fn=_diag_shape, doc="A tensor with the given diagonal values."),
      OpDef("DiagPart", inputs=["input: T"], outputs=["diagonal: T"], attrs=[f"T: {_DIAG_T}"],
            shape_fn=_diag_part_shape, doc="The diagonal part of a tensor."))


@_kernel("MatrixDiag")
def _matrix_diag_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    dt = ctx.output_dtypes[0]

    def matrix_diag(d: Any) -> Any:
        shape = np.shape(d)
        if len(shape) < 1:
            raise _invalid(f"input must be at least 1-dim, received shape: "
                           f"{_shape_str(shape)}")
        n = shape[-1]
        out = _full(xp, shape + (n,), _zero_of(dt), dt)
        i = xp.arange(n)
        out[..., i, i] = d
        return out

    return _string_safe(ctx, matrix_diag)


@_kernel("MatrixDiagPart")
def _matrix_diag_part_kernel(ctx: Any) -> Callable:
    xp = ctx.xp

    def matrix_diag_part(x: Any) -> Any:
        if np.ndim(x) < 2:
            raise _invalid(f"input must be at least 2-dim, received shape: "
                           f"{_shape_str(np.shape(x))}")
        return xp.diagonal(x, axis1=-2, axis2=-1)

    return _string_safe(ctx, matrix_diag_part)


@_kernel("MatrixSetDiag")
def _matrix_set_diag_kernel(ctx: Any) -> Callable:
    xp = ctx.xp

    def matrix_set_diag(x: Any, d: Any) -> Any:
        xs, ds = np.shape(x), np.shape(d)
        if len(xs) < 2:
            raise _invalid(f"input must be at least 2-dim, received shape: {_shape_str(xs)}")
        m = min(xs[-2], xs[-1])
        if ds != xs[:-2] + (m,):
            raise _invalid(f"diagonal must have shape {_shape_str(xs[:-2] + (m,))}, received "
                           f"shape: {_shape_str(ds)}")
        out = x.copy()
        i = xp.arange(m)
        out[..., i, i] = d
        return out

    return _string_safe(ctx, matrix_set_diag, (0, 1))


@_kernel("MatrixBandPart", host_memory=("num_lower", "num_upper"))
def _matrix_band_part_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    dt = ctx.output_dtypes[0]
    host = host_reader(ctx)

    def matrix_band_part(x: Any, num_lower: Any, num_upper: Any) -> Any:
        shape = np.shape(x)
        if len(shape) < 2:
            raise _invalid(f"input must be at least 2-dim, received shape: "
                           f"{_shape_str(shape)}")
        lo, up = _int_scalar(num_lower, host), _int_scalar(num_upper, host)
        m, n = shape[-2], shape[-1]
        if lo > m:
            raise _invalid(f"num_lower must be negative or less or equal to number of rows "
                           f"({m}) got: {lo}")
        if up > n:
            raise _invalid(f"num_upper must be negative or less or equal to number of columns "
                           f"({n}) got: {up}")
        r = xp.arange(m).reshape(m, 1)
        c = xp.arange(n).reshape(1, n)
        keep = xp.ones((m, n), dtype=bool)
        if lo >= 0:
            keep &= (r - c) <= lo
        if up >= 0:
            keep &= (c - r) <= up
        if dt is _dt.string:
            return np.where(keep, x, b"")
        return xp.where(keep, x, xp.zeros((), dtype=dt.np))

    return _string_safe(ctx, matrix_band_part)


@_kernel("Diag")
def _diag_kernel(ctx: Any) -> Callable:
    xp = ctx.xp

    def diag(d: Any) -> Any:
        shape = np.shape(d)
        if len(shape) < 1:
            raise _invalid(f"Input must be at least rank 1, got {len(shape)}")
        n = int(np.size(d))
        out = xp.zeros((n, n), dtype=d.dtype)
        i = xp.arange(n)
        out[i, i] = d.reshape(-1)
        return out.reshape(shape + shape)

    return diag


@_kernel("DiagPart")
def _diag_part_kernel(ctx: Any) -> Callable:
    xp = ctx.xp

    def diag_part(x: Any) -> Any:
        shape = np.shape(x)
        if len(shape) % 2 or not shape:
            raise _invalid(f"The rank of the tensor should be even and positive, got shape "
                           f"{_shape_str(shape)}")
        h = len(shape) // 2
        if shape[:h] != shape[h:]:
            raise _invalid(f"Invalid shape {_shape_str(shape)}: dimensions must match")
        n = int(np.prod(shape[:h], dtype=np.int64))
        return xp.diagonal(x.reshape(n, n)).reshape(shape[:h])

    return diag_part


# ---------------------------------------------------------------------------------------
# MatrixDiagV2/V3, MatrixDiagPartV2/V3, MatrixSetDiagV2/V3: bands of diagonals (k)
# ---------------------------------------------------------------------------------------
_ALIGNS = ("LEFT_RIGHT", "RIGHT_LEFT", "LEFT_LEFT", "RIGHT_RIGHT")


def _diag_band(k: Any) -> tuple[int, int]:
    """``(lower, upper)`` of a ``k`` value (a scalar or a vector of one or two)."""
    v = np.asarray(k)
    if v.ndim > 1 or v.size not in (1, 2):
        raise _invalid("diag_index must be a scalar or vector with at most 2 elements")
    flat = [int(x) for x in v.reshape(-1)]
    lo, hi = flat[0], flat[-1]
    if lo > hi:
        raise _invalid(f"lower_diag_index must not be larger than upper_diag_index: {lo} > "
                       f"{hi}")
    return lo, hi


def _static_band(op: Any, i: int) -> tuple[int, int] | None:
    v = constant_value(op.inputs[i])
    if v is None:
        return None
    try:
        return _diag_band(v)
    except errors.InvalidArgumentError as e:
        raise _shape_error(op, e.message) from None


def _diag_len(rows: int, cols: int, d: int) -> int:
    return min(rows + min(0, d), cols - max(0, d))


def _diag_offset(align: str, d: int, max_len: int, length: int) -> int:
    """Where diagonal ``d``'s values start in its packed row under ``align``."""
    sup_left = align in ("LEFT_LEFT", "LEFT_RIGHT")
    sub_left = align in ("LEFT_LEFT", "RIGHT_LEFT")
    if (d >= 0 and not sup_left) or (d <= 0 and not sub_left):
        return max_len - length
    return 0


def _diag_coords(xp: Any, rows: int, cols: int, d: int, offset: int) -> tuple[Any, Any, Any]:
    """Row, column and packed-position indices of diagonal ``d``."""
    n = xp.arange(_diag_len(rows, cols, d))
    return n - min(d, 0), n + max(d, 0), n + offset


def _matrix_diag_v2_shape(op: Any) -> list[TensorShape]:
    d = _dims(op.inputs[0])
    band = _static_band(op, 1)
    if d is None or band is None:
        return [unknown_shape()]
    lo, hi = band
    nd = 1 if lo == hi else 2
    d = _with_rank_at_least(d, nd, op)
    max_len = d[-1]
    rows, cols = _static_int(op.inputs[2]), _static_int(op.inputs[3])
    rows = None if rows is None or rows == -1 else rows
    cols = None if cols is None or cols == -1 else cols
    if max_len is not None:
        min_rows, min_cols = max_len - min(hi, 0), max_len + max(lo, 0)
        if _static_int(op.inputs[2]) == -1 and _static_int(op.inputs[3]) == -1:
            rows = cols = max(min_rows, min_cols)
        elif _static_int(op.inputs[2]) == -1:
            rows = min_rows
        elif _static_int(op.inputs[3]) == -1:
            cols = min_cols
    return [TensorShape(tuple(d[:-nd]) + (rows, cols))]


def _matrix_diag_part_v2_shape(op: Any) -> list[TensorShape]:
    d = _with_rank_at_least(_dims(op.inputs[0]), 2, op)
    band = _static_band(op, 1)
    if d is None or band is None:
        return [unknown_shape()]
    lo, hi = band
    rows, cols = d[-2], d[-1]
    if rows is not None and cols is not None:
        if not -rows < lo < cols and not (lo == 0 and (rows == 0 or cols == 0)):
            raise _shape_error(op, f"lower_diag_index is out of bound: {lo}. It must be "
                                   f"between {-rows} and {cols}")
        if not -rows < hi < cols and not (hi == 0 and (rows == 0 or cols == 0)):
            raise _shape_error(op, f"upper_diag_index is out of bound: {hi}. It must be "
                                   f"between {-rows} and {cols}")
        max_len: int | None = max(0, min(rows + min(0, hi), cols - max(0, lo)))
    else:
        max_len = None
    inner = (max_len,) if lo == hi else (hi - lo + 1, max_len)
    return [TensorShape(tuple(d[:-2]) + inner)]


def _matrix_set_diag_v2_shape(op: Any) -> list[TensorShape]:
    d = _with_rank_at_least(_dims(op.inputs[0]), 2, op)
    band = _static_band(op, 2)
    if band is not None and d is not None and _dims(op.inputs[1]) is not None:
        lo, hi = band
        _with_rank(_dims(op.inputs[1]), len(d) - (1 if lo == hi else 0), op)
    return [TensorShape(d) if d is not None else unknown_shape()]


for _v, _extra in (("V2", []), ("V3", ["align: {'LEFT_RIGHT', 'RIGHT_LEFT', 'LEFT_LEFT', "
                                        "'RIGHT_RIGHT'} = 'RIGHT_LEFT'"])):
    ks.op(OpDef(f"MatrixDiag{_v}", inputs=["diagonal: T", "k: int32", "num_rows: int32",
                                           "num_cols: int32", "padding_value: T"],
                outputs=["output: T"], attrs=["T: type"] + _extra,
                shape_fn=_matrix_diag_v2_shape,
                doc="Batched matrices with a band of diagonals ``k`` set from ``diagonal``."),
          OpDef(f"MatrixDiagPart{_v}", inputs=["input: T", "k: int32", "padding_value: T"],
                outputs=["diagonal: T"], attrs=["T: type"] + _extra,
                shape_fn=_matrix_diag_part_v2_shape,
                doc="The band of diagonals ``k`` of batched matrices, packed and padded."),
          OpDef(f"MatrixSetDiag{_v}", inputs=["input: T", "diagonal: T", "k: int32"],
                outputs=["output: T"], attrs=["T: type"] + _extra,
                shape_fn=_matrix_set_diag_v2_shape,
                doc="Batched matrices with a band of diagonals ``k`` replaced."))


def _align_of(ctx: Any) -> str:
    a = ctx.attrs.get("align", "LEFT_LEFT")
    return a.decode() if isinstance(a, bytes) else a


@_kernel("MatrixDiagV2", "MatrixDiagV3", host_memory=("k", "num_rows", "num_cols"))
def _matrix_diag_v2_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    dt = ctx.output_dtypes[0]
    align = _align_of(ctx)
    host = host_reader(ctx)

    def matrix_diag_v2(diag: Any, k: Any, num_rows: Any, num_cols: Any, pad: Any) -> Any:
        lo, hi = _diag_band(host(k))
        shape = tuple(np.shape(diag))
        nd = 1 if lo == hi else 2
        if len(shape) < nd:
            raise _invalid(f"diagonal must be at least {nd}-dim, received shape: "
                           f"{_shape_str(shape)}")
        if nd == 2 and shape[-2] != hi - lo + 1:
            raise _invalid("The number of diagonals provided in the input does not match "
                           "the lower_diag_index and upper_diag_index range.")
        max_len = shape[-1]
        min_rows, min_cols = max_len - min(hi, 0), max_len + max(lo, 0)
        rows, cols = _int_scalar(num_rows, host), _int_scalar(num_cols, host)
        if rows == -1 and cols == -1:
            rows = cols = max(min_rows, min_cols)
        elif rows == -1:
            rows = min_rows
        elif cols == -1:
            cols = min_cols
        if rows != min_rows and cols != min_cols:
            raise _invalid("The number of rows or columns is not consistent with the "
                           "specified d_lower, d_upper, and diagonal.")
        batch = shape[:-nd]
        out = _full(xp, batch + (rows, cols), host(pad).reshape(()).item()
                    if dt is not _dt.string else pad, dt)
        for d in range(lo, hi + 1):
            length = _diag_len(rows, cols, d)
            if length <= 0:
                continue
            r, c, p = _diag_coords(xp, rows, cols, d,
                                   _diag_offset(align, d, max_len, length))
            src = diag if nd == 1 else diag[..., hi - d, :]
            out[..., r, c] = src[..., p]
        return out

    return _string_safe(ctx, matrix_diag_v2, (0, 4))


def _check_band(lo: int, hi: int, rows: int, cols: int) -> None:
    for which, v in (("lower", lo), ("upper", hi)):
        if not (-rows < v < cols or (v == 0 and (rows == 0 or cols == 0))):
            raise _invalid(f"{which}_diag_index is out of bound: {v}. It must be between "
                           f"{-rows} and {cols}")


@_kernel("MatrixDiagPartV2", "MatrixDiagPartV3", host_memory=("k",))
def _matrix_diag_part_v2_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    dt = ctx.output_dtypes[0]
    align = _align_of(ctx)
    host = host_reader(ctx)

    def matrix_diag_part_v2(x: Any, k: Any, pad: Any) -> Any:
        shape = tuple(np.shape(x))
        if len(shape) < 2:
            raise _invalid(f"input must be at least 2-dim, received shape: "
                           f"{_shape_str(shape)}")
        lo, hi = _diag_band(host(k))
        rows, cols = shape[-2], shape[-1]
        _check_band(lo, hi, rows, cols)
        max_len = max(0, min(rows + min(0, hi), cols - max(0, lo)))
        nd = hi - lo + 1
        out = _full(xp, shape[:-2] + (nd, max_len), host(pad).reshape(()).item()
                    if dt is not _dt.string else pad, dt)
        for d in range(lo, hi + 1):
            length = _diag_len(rows, cols, d)
            if length <= 0:
                continue
            r, c, p = _diag_coords(xp, rows, cols, d,
                                   _diag_offset(align, d, max_len, length))
            out[..., hi - d, p] = x[..., r, c]
        return out[..., 0, :] if lo == hi else out

    return _string_safe(ctx, matrix_diag_part_v2, (0, 2))


@_kernel("MatrixSetDiagV2", "MatrixSetDiagV3", host_memory=("k",))
def _matrix_set_diag_v2_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    align = _align_of(ctx)
    host = host_reader(ctx)

    def matrix_set_diag_v2(x: Any, diag: Any, k: Any) -> Any:
        shape = tuple(np.shape(x))
        if len(shape) < 2:
            raise _invalid(f"input must be at least 2-dim, received shape: "
                           f"{_shape_str(shape)}")
        lo, hi = _diag_band(host(k))
        rows, cols = shape[-2], shape[-1]
        _check_band(lo, hi, rows, cols)
        max_len = max(0, min(rows + min(0, hi), cols - max(0, lo)))
        want = shape[:-2] + ((max_len,) if lo == hi else (hi - lo + 1, max_len))
        if tuple(np.shape(diag)) != want:
            raise _invalid(f"diagonal must have shape {_shape_str(want)}, received shape: "
                           f"{_shape_str(np.shape(diag))}")
        out = x.copy()
        for d in range(lo, hi + 1):
            length = _diag_len(rows, cols, d)
            if length <= 0:
                continue
            r, c, p = _diag_coords(xp, rows, cols, d,
                                   _diag_offset(align, d, max_len, length))
            src = diag if lo == hi else diag[..., hi - d, :]
            out[..., r, c] = src[..., p]
        return out

    return _string_safe(ctx, matrix_set_diag_v2, (0, 1))


def _v_attrs(op: Any) -> dict[str, Any]:
    return {"align": op.node_attrs["align"]} if op.type.endswith("V3") else {}


@ks.gradient("MatrixDiagV2", "MatrixDiagV3")
def _matrix_diag_v2_grad(op: Any, grad: Tensor) -> list[Any]:
    part = apply_op("MatrixDiagPart" + op.type[-2:], input=grad, k=op.inputs[1],
                    padding_value=_zero_tensor(grad), **_v_attrs(op))
    return [part, None, None, None, None]


def _zero_tensor(t: Tensor) -> Tensor:
    return convert_to_tensor(np.zeros((), t.dtype.base_dtype.np))


@ks.gradient("MatrixDiagPartV2", "MatrixDiagPartV3")
def _matrix_diag_part_v2_grad(op: Any, grad: Tensor) -> list[Any]:
    d = _dims(op.inputs[0])
    v = op.type[-2:]
    if d is not None and d[-2] is not None and d[-1] is not None:
        out = apply_op("MatrixDiag" + v, diagonal=grad, k=op.inputs[1],
                       num_rows=np.int32(d[-2]), num_cols=np.int32(d[-1]),
                       padding_value=_zero_tensor(grad), **_v_attrs(op))
    else:
        zeros = apply_op("ZerosLike", x=op.inputs[0])
        out = apply_op("MatrixSetDiag" + v, input=zeros, diagonal=grad, k=op.inputs[1],
                       **_v_attrs(op))
    return [out, None, None]


@ks.gradient("MatrixSetDiagV2", "MatrixSetDiagV3")
def _matrix_set_diag_v2_grad(op: Any, grad: Tensor) -> list[Any]:
    v = op.type[-2:]
    zeros = apply_op("ZerosLike", x=op.inputs[1])
    grad_input = apply_op("MatrixSetDiag" + v, input=grad, diagonal=zeros, k=op.inputs[2],
                          **_v_attrs(op))
    grad_diag = apply_op("MatrixDiagPart" + v, input=grad, k=op.inputs[2],
                         padding_value=_zero_tensor(grad), **_v_attrs(op))
    return [grad_input, grad_diag, None]


def _diag_v(align: Any) -> tuple[str, dict[str, Any]]:
    """The op version and attrs: V2 (TF 1.15's LEFT_LEFT packing) when ``align`` is None,
    V3 with the given alignment otherwise."""
    if align is None:
        return "V2", {}
    if align not in _ALIGNS:
        raise ValueError(f"Value for attr 'align' of {align!r} is not in the list of "
                         f"allowed values: {', '.join(repr(a) for a in _ALIGNS)}")
    return "V3", {"align": align}


def _pad_value(x: Any, padding_value: Any) -> Any:
    if getattr(x, "dtype", None) is not None and _value_dtype(x) is _dt.bool:
        return bool(padding_value)
    return padding_value


def _is_default_k(k: Any) -> bool:
    return isinstance(k, (int, np.integer)) and int(k) == 0


@ks.api("linalg.diag", "matrix_diag")
def matrix_diag(diagonal: Any, name: str = "diag", k: Any = 0, num_rows: Any = -1,
                num_cols: Any = -1, padding_value: Any = 0, align: str | None = None
                ) -> Tensor:
    """Batched matrices with ``diagonal`` on the band of diagonals ``k`` (an int or a
    ``(lower, upper)`` pair), of ``num_rows`` x ``num_cols`` (-1: the smallest that fits),
    ``padding_value`` elsewhere. ``align`` (TF 2.x's attr) says how a band's shorter
    diagonals are packed; None is TF 1.15's packing, ``LEFT_LEFT``."""
    if (_is_default_k(k) and _static_int(num_rows) == -1 and _static_int(num_cols) == -1
            and _is_zero(padding_value) and align is None):
        return _apply("MatrixDiag", name=name, diagonal=diagonal)
    v, attrs = _diag_v(align)
    diagonal = convert_to_tensor(diagonal, name="diagonal")
    return _apply("MatrixDiag" + v, name=name, diagonal=diagonal, k=k, num_rows=num_rows,
                  num_cols=num_cols, padding_value=_pad_value(diagonal, padding_value),
                  **attrs)


@ks.api("linalg.diag_part", "matrix_diag_part")
def matrix_diag_part(input: Any, name: str = "diag_part", k: Any = 0,
                     padding_value: Any = 0, align: str | None = None) -> Tensor:
    """The band of diagonals ``k`` of batched matrices (the main diagonal by default),
    packed into rows padded with ``padding_value`` (see :func:`matrix_diag` for
    ``align``)."""
    if _is_default_k(k) and _is_zero(padding_value) and align is None:
        return _apply("MatrixDiagPart", name=name, input=input)
    v, attrs = _diag_v(align)
    input = convert_to_tensor(input, name="input")
    return _apply("MatrixDiagPart" + v, name=name, input=input, k=k,
                  padding_value=_pad_value(input, padding_value), **attrs)


@ks.api("linalg.set_diag", "matrix_set_diag")
def matrix_set_diag(input: Any, diagonal: Any, name: str = "set_diag", k: Any = 0,
                    align: str | None = None) -> Tensor:
    """Batched matrices ``input`` with the band of diagonals ``k`` (the main diagonal by
    default) replaced by ``diagonal`` (see :func:`matrix_diag` for ``align``)."""
    if _is_default_k(k) and align is None:
        return _apply("MatrixSetDiag", name=name, input=input, diagonal=diagonal)
    v, attrs = _diag_v(align)
    return _apply("MatrixSetDiag" + v, name=name, input=input, diagonal=diagonal, k=k,
                  **attrs)


@ks.api("linalg.band_part", "matrix_band_part")
def matrix_band_part(input: Any, num_lower: Any, num_upper: Any,
                     name: str | None = None) -> Tensor:
    """Keeps ``num_lower`` sub- and ``num_upper`` super-diagonals (negative: all)."""
    return _apply("MatrixBandPart", name=name, input=input, num_lower=num_lower,
                  num_upper=num_upper)


@ks.api("diag", "linalg.tensor_diag")
def diag(diagonal: Any, name: str | None = None) -> Tensor:
    """A tensor of rank 2k with ``diagonal`` (rank k) on its diagonal."""
    return _apply("Diag", name=name, diagonal=diagonal)


@ks.api("diag_part", "linalg.tensor_diag_part")
def diag_part(input: Any, name: str | None = None) -> Tensor:
    """The diagonal of a rank-2k tensor."""
    return _apply("DiagPart", name=name, input=input)


@ks.api("eye", "linalg.eye")
def eye(num_rows: Any, num_columns: Any = None, batch_shape: Any = None,
        dtype: Any = _dt.float32, name: str | None = None) -> Tensor:
    """Identity matrices (optionally batched, optionally rectangular)."""
    with name_scope(name, "eye", [num_rows, num_columns, batch_shape]):
        is_square = num_columns is None
        batch_shape = [] if batch_shape is None else batch_shape
        num_columns = num_rows if num_columns is None else num_columns
        if isinstance(num_rows, Tensor) or isinstance(num_columns, Tensor):
            diag_size: Any = apply_op("Minimum", x=num_rows, y=num_columns)
        else:
            if not isinstance(num_rows, (int, np.integer)) or \
                    not isinstance(num_columns, (int, np.integer)):
                raise TypeError("num_rows and num_columns must be positive integer values.")
            is_square = num_rows == num_columns
            diag_size = int(min(num_rows, num_columns))
        if isinstance(batch_shape, Tensor) or isinstance(diag_size, Tensor):
            batch_shape = _convert(batch_shape, name="shape", dtype=_dt.int32)
            diag_shape: Any = concat((batch_shape, [diag_size]), axis=0)
            if not is_square:
                shape: Any = concat((batch_shape, [num_rows, num_columns]), axis=0)
        else:
            batch_shape = list(batch_shape)
            diag_shape = batch_shape + [diag_size]
            if not is_square:
                shape = batch_shape + [num_rows, num_columns]
        diag_ones = ones(diag_shape, dtype=dtype)
        if is_square:
            return matrix_diag(diag_ones)
        zero_matrix = zeros(shape, dtype=dtype)
        return matrix_set_diag(zero_matrix, diag_ones)


# =======================================================================================
# ScatterNd
# =======================================================================================
def _scatter_nd_shape(op: Any) -> list[TensorShape]:
    ind = _with_rank_at_least(_dims(op.inputs[0]), 1, op)
    upd = _with_rank_at_least(_dims(op.inputs[1]), 1, op)
    out = _shape_value(op.inputs[2], op)
    od = out.as_tuple()
    n_out = _num_elements(od)
    if n_out == 0 and ((_num_elements(ind) or 0) > 0 or (_num_elements(upd) or 0) > 0):
        raise _shape_error(op, "Indices and updates specified for empty output shape")
    if ind is not None and upd is not None and ind[-1] is not None:
        outer = len(ind) - 1
        ix = ind[-1]
        try:
            _merge(ind[:outer], upd[:outer], op)
        except ValueError as ex:
            raise _shape_error(op, f"The outer {outer} dimensions of indices.shape={_fmt(ind)} "
                                   f"must match the outer {outer} dimensions of updates.shape="
                                   f"{_fmt(upd)}: {ex}") from None
        if od is not None:
            try:
                _merge(od[ix:], upd[outer:], op)
            except ValueError as ex:
                raise _shape_error(op, f"The inner {len(od) - ix} dimensions of output.shape="
                                       f"{_fmt(od)} must match the inner {len(upd) - outer} "
                                       f"dimensions of updates.shape={_fmt(upd)}: {ex}") from None
    return [out]


ks.op(OpDef("ScatterNd", inputs=["indices: Tindices", "updates: T", "shape: Tindices"],
            outputs=["output: T"], attrs=["T: type", "Tindices: {int32, int64}"],
            shape_fn=_scatter_nd_shape, doc="Scatters (sums) updates into a zero tensor."))


@_kernel("ScatterNd", host_memory=("shape",))
def _scatter_nd_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    dt = ctx.output_dtypes[0]
    host = host_reader(ctx)

    def scatter_nd(indices: Any, updates: Any, shape: Any) -> Any:
        indices = xp.asarray(indices)
        s = _int_list(shape, host)
        ishape, ushape = np.shape(indices), np.shape(updates)
        if len(ishape) < 1:
            raise _invalid(f"Indices shape must have rank at least one. Found:"
                           f"{_shape_str(ishape)}")
        r = ishape[-1]
        outer = ishape[:-1]
        if r > len(s):
            raise _invalid(f"Dimensions [0,{r}) of indices[shape={_shape_str(ishape)}] must be "
                           f"within the rank of output shape {_shape_str(s)}")
        if ushape != outer + tuple(s[r:]):
            raise _invalid(f"Must have updates.shape = indices.shape[:batch_dim] + "
                           f"params_shape[slice_dim:], got updates.shape: {_shape_str(ushape)}, "
                           f"indices.shape: {_shape_str(ishape)}, params_shape: {_shape_str(s)}")
        out = _full(xp, s, _zero_of(dt), dt)
        idx = indices.reshape(-1, r)
        if idx.shape[0] == 0:
            return out
        bad = ((idx < 0) | (idx >= xp.asarray(s[:r], dtype=idx.dtype))).any(axis=1)
        if bool(bad.any()):
            row = int(xp.flatnonzero(bad)[0])
            vals = ", ".join(str(v) for v in _int_list(idx[row], host))
            raise _invalid(f"indices{_slice_debug(outer, row)} = [{vals}] does not index into "
                           f"shape {_shape_str(s)}")
        upd = xp.asarray(updates).reshape((idx.shape[0],) + tuple(s[r:]))
        key = tuple(idx[:, k] for k in range(r))
        if dt is _dt.bool:
            xp.logical_or.at(out, key, upd)
        else:
            xp.add.at(out, key, upd)
        return out

    return scatter_nd


@ks.api("scatter_nd", "manip.scatter_nd")
def scatter_nd(indices: Any, updates: Any, shape: Any, name: str | None = None) -> Tensor:
    """A zero tensor of ``shape`` with ``updates`` summed in at ``indices``."""
    return _apply("ScatterNd", name=name, indices=indices, updates=updates, shape=shape)


# =======================================================================================
# DynamicPartition, DynamicStitch
# =======================================================================================
def _dynamic_partition_shape(op: Any) -> list[TensorShape]:
    data = _dims(op.inputs[0])
    parts = _dims(op.inputs[1])
    n = len(op.outputs)
    if data is None or parts is None:
        return [unknown_shape()] * n
    _with_rank_at_least(data, len(parts), op)
    _merge(data[:len(parts)], parts, op)
    return [TensorShape((None,) + data[len(parts):])] * n


def _dynamic_stitch_shape(op: Any) -> list[TensorShape]:
    n = len(op.inputs) // 2
    extra: Any = None
    for i in range(n):
        ind, dat = _dims(op.inputs[i]), _dims(op.inputs[n + i])
        if ind is None or dat is None:
            continue
        _with_rank_at_least(dat, len(ind), op)
        _merge(dat[:len(ind)], ind, op)
        extra = _merge(extra, dat[len(ind):], op)
    if extra is None:
        return [unknown_shape()]
    size: int | None = None
    vals = [_static_value(t) for t in op.inputs[:n]]
    if all(v is not None for v in vals):
        size = max([int(v.max()) if v.size else -1 for v in vals] + [-1]) + 1
    return [TensorShape((size,) + tuple(extra))]


ks.op(OpDef("DynamicPartition", inputs=["data: T", "partitions: int32"],
            outputs=["outputs: num_partitions * T"],
            attrs=["num_partitions: int >= 1", "T: type"], shape_fn=_dynamic_partition_shape,
            doc="Partitions data by an index tensor."),
      OpDef("DynamicStitch", inputs=["indices: N * int32", "data: N * T"],
            outputs=["merged: T"], attrs=["N: int >= 1", "T: type"],
            shape_fn=_dynamic_stitch_shape, doc="Interleaves data by indices."))


@_kernel("DynamicPartition")
def _dynamic_partition_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    n = ctx.attrs["num_partitions"]

    def dynamic_partition(data: Any, partitions: Any) -> Any:
        partitions = xp.asarray(partitions)
        ps, ds = np.shape(partitions), np.shape(data)
        if ds[:len(ps)] != ps:
            raise _invalid(f"data.shape must start with partitions.shape, got data.shape = "
                           f"{_shape_str(ds)}, partitions.shape = {_shape_str(ps)}")
        flat_p = partitions.reshape(-1)
        bad = (flat_p < 0) | (flat_p >= n)
        if bool(bad.any()):
            i = int(xp.flatnonzero(bad)[0])
            raise _invalid(f"partitions{_slice_debug(ps, i)} = {int(flat_p[i])} is not in "
                           f"[0, {n})")
        flat_d = data.reshape((-1,) + ds[len(ps):])
        return tuple(flat_d[flat_p == k] for k in range(n))

    return _list_out(ctx, _string_safe(ctx, dynamic_partition))


@_kernel("DynamicStitch")
def _dynamic_stitch_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    dt = ctx.output_dtypes[0]

    def dynamic_stitch(*args: Any) -> Any:
        n = len(args) // 2
        indices = [xp.asarray(a) for a in args[:n]]
        data = [_obj(d) if dt is _dt.string else xp.asarray(d) for d in args[n:]]
        extra = None
        for i, (ind, d) in enumerate(zip(indices, data)):
            if np.shape(d)[:ind.ndim] != np.shape(ind):
                raise _invalid(f"data[{i}].shape = {_shape_str(np.shape(d))} does not start with "
                               f"indices[{i}].shape = {_shape_str(np.shape(ind))}")
            e = np.shape(d)[ind.ndim:]
            if extra is None:
                extra = e
            elif e != extra:
                raise _invalid(f"Need data[0].shape[{indices[0].ndim}:] = {_shape_str(extra)} "
                               f"to match data[{i}].shape[{ind.ndim}:] = {_shape_str(e)}")
        size = max([int(ind.max()) if ind.size else -1 for ind in indices] + [-1]) + 1
        for i, ind in enumerate(indices):
            if ind.size and int(ind.min()) < 0:
                raise _invalid(f"indices[{i}] contains negative values")
        out = _full(xp, (size,) + tuple(extra or ()), _zero_of(dt), dt)
        for ind, d in zip(indices, data):
            out[ind.reshape(-1)] = d.reshape((-1,) + tuple(extra or ()))
        return out

    return dynamic_stitch


@ks.api("dynamic_partition")
def dynamic_partition(data: Any, partitions: Any, num_partitions: int,
                      name: str | None = None) -> list[Tensor]:
    """Splits ``data`` into ``num_partitions`` tensors by ``partitions``."""
    return _apply("DynamicPartition", name=name, data=data, partitions=partitions,
                  num_partitions=num_partitions)


@ks.api("dynamic_stitch")
def dynamic_stitch(indices: Any, data: Any, name: str | None = None) -> Tensor:
    """Interleaves ``data`` into one tensor with ``merged[indices[m][i]] = data[m][i]``."""
    return _apply("DynamicStitch", name=name, indices=list(indices), data=list(data))


# =======================================================================================
# UnravelIndex, LowerBound, UpperBound
# =======================================================================================
def _unravel_shape(op: Any) -> list[TensorShape]:
    ind = _dims(op.inputs[0])
    d = _with_rank(_dims(op.inputs[1]), 1, op)
    if ind is not None and len(ind) == 0:
        return [TensorShape([d[0]])]
    if ind is not None:
        return [TensorShape([d[0], _num_elements(ind)])]
    return [unknown_shape()]


def _bound_shape(op: Any) -> list[TensorShape]:
    _with_rank(_dims(op.inputs[0]), 2, op)
    return [TensorShape(_with_rank(_dims(op.inputs[1]), 2, op))]


ks.op(OpDef("UnravelIndex", inputs=["indices: Tidx", "dims: Tidx"], outputs=["output: Tidx"],
            attrs=["Tidx: {int32, int64} = DT_INT32"], shape_fn=_unravel_shape,
            doc="Converts flat indices into coordinate arrays."),
      OpDef("LowerBound", inputs=["sorted_inputs: T", "values: T"], outputs=["output: out_type"],
            attrs=["T: type", "out_type: {int32, int64} = DT_INT32"], shape_fn=_bound_shape,
            doc="Row-wise lower_bound (searchsorted left)."),
      OpDef("UpperBound", inputs=["sorted_inputs: T", "values: T"], outputs=["output: out_type"],
            attrs=["T: type", "out_type: {int32, int64} = DT_INT32"], shape_fn=_bound_shape,
            doc="Row-wise upper_bound (searchsorted right)."))


@_kernel("UnravelIndex")
def _unravel_index_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    npd = ctx.output_dtypes[0].np
    host = host_reader(ctx)

    def unravel_index(indices: Any, dims: Any) -> Any:
        dims = host(dims)
        d = _int_list(dims, np.asarray)
        if np.ndim(dims) != 1:
            raise _invalid(f"The indices can only be 1-D, got {_shape_str(np.shape(dims))}")
        ind = xp.asarray(indices)
        n = int(np.prod(d, dtype=np.int64))
        if ind.size and (int(ind.min()) < 0 or int(ind.max()) >= n):
            raise _invalid("index is out of bound as with dims")
        out = xp.stack(xp.unravel_index(ind.reshape(-1), d)).astype(npd) if d else \
            xp.zeros((0, ind.size), dtype=npd)
        return out.reshape((len(d),) + (() if ind.ndim == 0 else (ind.size,)))

    return unravel_index


@_kernel("LowerBound", "UpperBound")
def _bound_kernel(ctx: Any) -> Callable:
    xp = ctx.xp
    side = "left" if ctx.op_type == "LowerBound" else "right"
    npd = ctx.output_dtypes[0].np

    def bound(sorted_inputs: Any, values: Any) -> Any:
        ss, vs = np.shape(sorted_inputs), np.shape(values)
        if len(ss) != 2 or len(vs) != 2 or ss[0] != vs[0]:
            raise _invalid(f"Leading dim_size of both tensors must match: "
                           f"{_shape_str(ss)} vs. {_shape_str(vs)}")
        out = xp.empty(vs, dtype=npd)
        for r in range(vs[0]):
            out[r] = xp.searchsorted(sorted_inputs[r], values[r], side=side)
        return out

    return bound


@ks.api("unravel_index")
def unravel_index(indices: Any, dims: Any, name: str | None = None) -> Tensor:
    """Converts flat ``indices`` into coordinates in an array of shape ``dims``."""
    return _apply("UnravelIndex", name=name, indices=indices, dims=dims)


@ks.api("searchsorted")
def searchsorted(sorted_sequence: Any, values: Any, side: str = "left",
                 out_type: Any = _dt.int32, name: str | None = None) -> Tensor:
    """Insertion indices of ``values`` in the innermost dimension of ``sorted_sequence``."""
    sequence_size = _shape_internal(sorted_sequence)[-1]
    values_size = _shape_internal(values)[-1]
    sorted_2d = reshape(sorted_sequence, [-1, sequence_size])
    values_2d = reshape(values, [-1, values_size])
    if side == "right":
        output = _apply("UpperBound", name=name, sorted_inputs=sorted_2d, values=values_2d,
                        out_type=_dt.as_dtype(out_type))
    elif side == "left":
        output = _apply("LowerBound", name=name, sorted_inputs=sorted_2d, values=values_2d,
                        out_type=_dt.as_dtype(out_type))
    else:
        raise ValueError(f"side must be either 'right' or 'left'.  Saw: {side}.")
    return reshape(output, _shape_internal(values))


# =======================================================================================
# composites: boolean_mask, meshgrid, sequence_mask
# =======================================================================================
@ks.api("boolean_mask")
def boolean_mask(tensor: Any, mask: Any, name: str = "boolean_mask", axis: Any = None) -> Tensor:
    """The elements (slices along ``axis``) of ``tensor`` where the boolean ``mask`` is true,
    flattened over the masked dimensions."""
    with name_scope(name, values=[tensor, mask]):
        tensor = _convert(tensor, name="tensor")
        mask = _convert(mask, name="mask")
        shape_mask = mask.shape
        ndims_mask = shape_mask.ndims
        shape_tensor = tensor.shape
        if ndims_mask == 0:
            raise ValueError("mask cannot be scalar.")
        if ndims_mask is None:
            raise ValueError("Number of mask dimensions must be specified, even if some "
                             "dimensions are None.  E.g. shape=[None] is ok, but shape=None is "
                             "not.")
        axis = 0 if axis is None else axis
        shape_tensor[axis:axis + ndims_mask].assert_is_compatible_with(shape_mask)
        leading_size = apply_op("Prod", input=shape(tensor)[axis:axis + ndims_mask],
                                reduction_indices=[0])
        tensor = reshape(tensor, concat([shape(tensor)[:axis], [leading_size],
                                         shape(tensor)[axis + ndims_mask:]], 0))
        first_dim = shape_tensor[axis:axis + ndims_mask].num_elements()
        if shape_tensor.ndims is not None:
            tensor.set_shape(TensorShape(shape_tensor.as_tuple()[:axis]).concatenate(
                [first_dim]).concatenate(shape_tensor.as_tuple()[axis + ndims_mask:]))
        mask = reshape(mask, [-1])
        indices = squeeze(where(mask), axis=[1])
        return gather(tensor, indices, axis=axis)


@ks.api("meshgrid")
def meshgrid(*args: Any, **kwargs: Any) -> list[Tensor]:
    """N-D coordinate grids from 1-D coordinate vectors (``indexing`` 'xy' or 'ij')."""
    indexing = kwargs.pop("indexing", "xy")
    name = kwargs.pop("name", "meshgrid")
    if kwargs:
        key = list(kwargs.keys())[0]
        raise TypeError(f"'{key}' is an invalid keyword argument for this function")
    if indexing not in ("xy", "ij"):
        raise ValueError("indexing parameter must be either 'xy' or 'ij'")
    with name_scope(name, "meshgrid", list(args)):
        ndim = len(args)
        s0 = (1,) * ndim
        output = []
        for i, x in enumerate(args):
            output.append(reshape(stack(x), (s0[:i] + (-1,) + s0[i + 1::])))
        shapes = [size(x) for x in args]
        output_dtype = _convert(args[0]).dtype.base_dtype
        if indexing == "xy" and ndim > 1:
            output[0] = reshape(output[0], (1, -1) + (1,) * (ndim - 2))
            output[1] = reshape(output[1], (-1, 1) + (1,) * (ndim - 2))
            shapes[0], shapes[1] = shapes[1], shapes[0]
        mult_fact = ones(shapes, output_dtype)
        return [x * mult_fact for x in output]


def _all_dimensions(x: Tensor) -> Any:
    if x.shape.ndims is not None:
        return convert_to_tensor(np.arange(x.shape.ndims, dtype=np.int32), dtype=_dt.int32)
    return range_(0, rank(x))


@ks.api("sequence_mask")
def sequence_mask(lengths: Any, maxlen: Any = None, dtype: Any = _dt.bool,
                  name: str | None = None) -> Tensor:
    """``mask[i, j] = j < lengths[i]`` for j below ``maxlen`` (default max(lengths))."""
    with name_scope(name, "SequenceMask", [lengths, maxlen]):
        lengths = _convert(lengths)
        if maxlen is None:
            maxlen = apply_op("Max", input=lengths, reduction_indices=_all_dimensions(lengths))
            maxlen = apply_op("Maximum", x=convert_to_tensor(
                np.array(0, dtype=maxlen.dtype.base_dtype.np)), y=maxlen)
        else:
            maxlen = _convert(maxlen)
        if maxlen.shape.ndims is not None and maxlen.shape.ndims != 0:
            raise ValueError("maxlen must be scalar for sequence_mask")
        mdt = maxlen.dtype.base_dtype
        row_vector = apply_op("Range", start=convert_to_tensor(np.array(0, dtype=mdt.np)),
                              limit=maxlen, delta=convert_to_tensor(np.array(1, dtype=mdt.np)))
        matrix = apply_op("Cast", x=expand_dims(lengths, -1), DstT=mdt)
        result = row_vector < matrix
        if dtype is None or result.dtype.base_dtype is _dt.as_dtype(dtype).base_dtype:
            return result
        return apply_op("Cast", x=result, DstT=_dt.as_dtype(dtype))
