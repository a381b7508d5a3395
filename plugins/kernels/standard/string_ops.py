"""tf.strings and the string ops of the top level (TF 1.15), with host kernels.

String tensors hold ``bytes`` (numpy object arrays). Hashes are TensorFlow's, bit for
bit: ``to_hash_bucket_fast`` and ``tf.fingerprint`` use farmhash's ``Fingerprint64``,
``to_hash_bucket`` TF's own ``Hash64`` (a MurmurHash2 variant, seed ``0xDECAFCAFFE``),
``to_hash_bucket_strong`` SipHash-2-4 keyed with the two given integers. Regular
expressions are RE2 syntax run by Python's ``re`` on the UTF-8 decoded text (see
docs/api/sparse_strings.md for the differences). Ops returning ragged tensors in TF
(``unicode_decode``, ``unicode_split``, ``bytes_split`` of a batch) are supported for
scalar inputs, where TF returns a dense tensor.
"""
from __future__ import annotations

import base64
import binascii
import gzip
import re
import zlib
from typing import Any, Callable

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.framework.sparse_tensor import SparseTensor
from flowrt.graph import Tensor, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import constant_value, ks
from ._common import invalid as _invalid
from .unicode_script_table import SCRIPT_RANGES

__all__ = ["fingerprint64", "hash64", "siphash24"]

_STR = _dt.string


def _tf() -> Any:
    import flowrt
    return flowrt


_M64 = (1 << 64) - 1
_K0 = 0xc3a5c85c97cb3127
_K1 = 0xb492b66fbe98f273
_K2 = 0x9ae16a3b2f90404f


def _f64(s: bytes, i: int) -> int:
    return int.from_bytes(s[i:i + 8], "little")


def _f32(s: bytes, i: int) -> int:
    return int.from_bytes(s[i:i + 4], "little")


def _rot(v: int, n: int) -> int:
    return v if n == 0 else ((v >> n) | (v << (64 - n))) & _M64


def _smix(v: int) -> int:
    return v ^ (v >> 47)


def _h16(u: int, v: int, mul: int) -> int:
    a = ((u ^ v) * mul) & _M64
    a ^= a >> 47
    b = ((v ^ a) * mul) & _M64
    b ^= b >> 47
    return (b * mul) & _M64


def _len0to16(s: bytes, n: int) -> int:
    """farmhashna's hash of up to 16 bytes."""
    if n >= 8:
        mul = (_K2 + n * 2) & _M64
        a = (_f64(s, 0) + _K2) & _M64
        b = _f64(s, n - 8)
        c = (_rot(b, 37) * mul + a) & _M64
        d = ((_rot(a, 25) + b) * mul) & _M64
        return _h16(c, d, mul)
    if n >= 4:
        mul = (_K2 + n * 2) & _M64
        a = _f32(s, 0)
        return _h16((n + (a << 3)) & _M64, _f32(s, n - 4), mul)
    if n > 0:
        y = s[0] + (s[n >> 1] << 8)
        z = n + (s[n - 1] << 2)
        return (_smix(((y * _K2) ^ (z * _K0)) & _M64) * _K2) & _M64
    return _K2


def _len17to32(s: bytes, n: int) -> int:
    mul = (_K2 + n * 2) & _M64
    a = (_f64(s, 0) * _K1) & _M64
    b = _f64(s, 8)
    c = (_f64(s, n - 8) * mul) & _M64
    d = (_f64(s, n - 16) * _K2) & _M64
    return _h16((_rot((a + b) & _M64, 43) + _rot(c, 30) + d) & _M64,
                (a + _rot((b + _K2) & _M64, 18) + c) & _M64, mul)


def _len33to64(s: bytes, n: int) -> int:
    """farmhashna's hash of 33 to 64 bytes."""
    mul = (_K2 + n * 2) & _M64
    a = (_f64(s, 0) * _K2) & _M64
    b = _f64(s, 8)
    c = (_f64(s, n - 8) * mul) & _M64
    d = (_f64(s, n - 16) * _K2) & _M64
    y = (_rot((a + b) & _M64, 43) + _rot(c, 30) + d) & _M64
    z = _h16(y, (a + _rot((b + _K2) & _M64, 18) + c) & _M64, mul)
    e = (_f64(s, 16) * mul) & _M64
    f = _f64(s, 24)
    g = ((y + _f64(s, n - 32)) * mul) & _M64
    h = ((z + _f64(s, n - 24)) * mul) & _M64
    return _h16((_rot((e + f) & _M64, 43) + _rot(g, 30) + h) & _M64,
                (e + _rot((f + a) & _M64, 18) + g) & _M64, mul)


def _weak32(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = _f64(s, i), _f64(s, i + 8), _f64(s, i + 16), _f64(s, i + 24)
    a = (a + w) & _M64
    b = _rot((b + a + z) & _M64, 21)
    c = a
    a = (a + x + y) & _M64
    b = (b + _rot(a, 44)) & _M64
    return (a + z) & _M64, (b + c) & _M64


def fingerprint64(s: bytes) -> int:
    """farmhash ``Fingerprint64`` (``farmhashna::Hash64``) of ``s``: TF's
    ``Fingerprint64``, used by ``to_hash_bucket_fast`` and ``tf.fingerprint``."""
    n = len(s)
    if n <= 16:
        return _len0to16(s, n)
    if n <= 32:
        return _len17to32(s, n)
    if n <= 64:
        return _len33to64(s, n)
    seed = 81
    x = seed
    y = (seed * _K1 + 113) & _M64
    z = (_smix((y * _K2 + 113) & _M64) * _K2) & _M64
    v = (0, 0)
    w = (0, 0)
    x = (x * _K2 + _f64(s, 0)) & _M64
    end = ((n - 1) // 64) * 64
    last64 = end + ((n - 1) & 63) - 63
    p = 0
    while True:
        x = (_rot((x + y + v[0] + _f64(s, p + 8)) & _M64, 37) * _K1) & _M64
        y = (_rot((y + v[1] + _f64(s, p + 48)) & _M64, 42) * _K1) & _M64
        x ^= w[1]
        y = (y + v[0] + _f64(s, p + 40)) & _M64
        z = (_rot((z + w[0]) & _M64, 33) * _K1) & _M64
        v = _weak32(s, p, (v[1] * _K1) & _M64, (x + w[0]) & _M64)
        w = _weak32(s, p + 32, (z + w[1]) & _M64, (y + _f64(s, p + 16)) & _M64)
        z, x = x, z
        p += 64
        if p == end:
            break
    mul = (_K1 + ((z & 0xff) << 1)) & _M64
    p = last64
    w = ((w[0] + ((n - 1) & 63)) & _M64, w[1])
    v = ((v[0] + w[0]) & _M64, v[1])
    w = ((w[0] + v[0]) & _M64, w[1])
    x = (_rot((x + y + v[0] + _f64(s, p + 8)) & _M64, 37) * mul) & _M64
    y = (_rot((y + v[1] + _f64(s, p + 48)) & _M64, 42) * mul) & _M64
    x ^= (w[1] * 9) & _M64
    y = (y + v[0] * 9 + _f64(s, p + 40)) & _M64
    z = (_rot((z + w[0]) & _M64, 33) * mul) & _M64
    v = _weak32(s, p, (v[1] * mul) & _M64, (x + w[0]) & _M64)
    w = _weak32(s, p + 32, (z + w[1]) & _M64, (y + _f64(s, p + 16)) & _M64)
    z, x = x, z
    return _h16((_h16(v[0], w[0], mul) + _smix(y) * _K0 + z) & _M64,
                (_h16(v[1], w[1], mul) + x) & _M64, mul)


def hash64(s: bytes, seed: int = 0xDECAFCAFFE) -> int:
    """TensorFlow's ``Hash64`` (core/lib/hash/hash.cc, MurmurHash64A with TF's seed),
    used by the deprecated ``to_hash_bucket``."""
    m = 0xc6a4a7935bd1e995
    n = len(s)
    h = (seed ^ (n * m)) & _M64
    i = 0
    while n - i >= 8:
        k = (_f64(s, i) * m) & _M64
        k ^= k >> 47
        k = (k * m) & _M64
        h ^= k
        h = (h * m) & _M64
        i += 8
    rest = n - i
    if rest:
        for j in range(rest - 1, -1, -1):
            h ^= s[i + j] << (8 * j)
        h = (h * m) & _M64
    h ^= h >> 47
    h = (h * m) & _M64
    h ^= h >> 47
    return h


def siphash24(k0: int, k1: int, s: bytes) -> int:
    """SipHash-2-4 of ``s`` keyed with ``(k0, k1)``: ``to_hash_bucket_strong``."""
    v0 = k0 ^ 0x736f6d6570736575
    v1 = k1 ^ 0x646f72616e646f6d
    v2 = k0 ^ 0x6c7967656e657261
    v3 = k1 ^ 0x7465646279746573

    def rnd(v0: int, v1: int, v2: int, v3: int) -> tuple[int, int, int, int]:
        v0 = (v0 + v1) & _M64
        v1 = _rotl(v1, 13) ^ v0
        v0 = _rotl(v0, 32)
        v2 = (v2 + v3) & _M64
        v3 = _rotl(v3, 16) ^ v2
        v0 = (v0 + v3) & _M64
        v3 = _rotl(v3, 21) ^ v0
        v2 = (v2 + v1) & _M64
        v1 = _rotl(v1, 17) ^ v2
        v2 = _rotl(v2, 32)
        return v0, v1, v2, v3

    n = len(s)
    full = n - n % 8
    for i in range(0, full, 8):
        m = _f64(s, i)
        v3 ^= m
        v0, v1, v2, v3 = rnd(v0, v1, v2, v3)
        v0, v1, v2, v3 = rnd(v0, v1, v2, v3)
        v0 ^= m
    b = ((n & 0xff) << 56) | int.from_bytes(s[full:], "little")
    v3 ^= b
    v0, v1, v2, v3 = rnd(v0, v1, v2, v3)
    v0, v1, v2, v3 = rnd(v0, v1, v2, v3)
    v0 ^= b
    v2 ^= 0xff
    for _ in range(4):
        v0, v1, v2, v3 = rnd(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


def _rotl(v: int, n: int) -> int:
    return ((v << n) | (v >> (64 - n))) & _M64


# =======================================================================================
# helpers
# =======================================================================================
def _b(s: Any) -> bytes:
    if isinstance(s, bytes):
        return s
    if isinstance(s, str):
        return s.encode()
    if isinstance(s, np.bytes_):
        return bytes(s)
    return str(s).encode()


def _smap(fn: Callable[[Any], Any], a: Any, dtype: Any = object) -> np.ndarray:
    """``fn`` of every element of ``a``, in an array of ``a``'s shape."""
    a = np.asarray(a, dtype=object)
    out = np.empty(a.shape, dtype=dtype)
    flat = out.reshape(-1)
    for i, s in enumerate(a.reshape(-1)):
        flat[i] = fn(s)
    return out


def _strs(values: Any, shape: Any) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out.reshape(shape)


def _same_shape(op: Any) -> list[TensorShape]:
    return [op.inputs[0].shape]


def _unary_string_op(name: str, fn_factory: Callable[[Any], Callable[[bytes], Any]],
                     out: str = "string", attrs: tuple[str, ...] = (), doc: str = "") -> None:
    """Declare ``name``: one string input, one output of its shape, each element mapped
    by the function ``fn_factory(ctx)`` gives."""
    ks.op(OpDef(name, inputs=["input: string"], outputs=[f"output: {out}"], attrs=list(attrs),
                shape_fn=_same_shape, doc=doc))
    ks.not_differentiable(name)
    np_out = object if out == "string" else _dt.as_dtype(out).np

    @ks.kernel(name, device_type="CPU")
    def _kernel(ctx: Any) -> Any:
        fn = fn_factory(ctx)
        return lambda x: _smap(lambda s: fn(_b(s)), x, np_out)


# =======================================================================================
# hashes
# =======================================================================================
def _bucket_kernel(hash_fn: Callable[[Any, bytes], int]) -> Callable[[Any], Any]:
    def factory(ctx: Any) -> Any:
        n = ctx.attrs["num_buckets"]
        return lambda x: _smap(lambda s: hash_fn(ctx, _b(s)) % n, x, np.int64)

    return factory


ks.op(OpDef("StringToHashBucket", inputs=["string_tensor: string"], outputs=["output: int64"],
            attrs=["num_buckets: int >= 1"], shape_fn=_same_shape,
            doc="TF's Hash64 of each string modulo num_buckets (deprecated)."),
      OpDef("StringToHashBucketFast", inputs=["input: string"], outputs=["output: int64"],
            attrs=["num_buckets: int >= 1"], shape_fn=_same_shape,
            doc="farmhash Fingerprint64 of each string modulo num_buckets."),
      OpDef("StringToHashBucketStrong", inputs=["input: string"], outputs=["output: int64"],
            attrs=["num_buckets: int >= 1", "key: list(int)"], shape_fn=_same_shape,
            doc="SipHash-2-4 with a 128-bit key of each string modulo num_buckets."))
ks.not_differentiable("StringToHashBucket", "StringToHashBucketFast", "StringToHashBucketStrong")
ks.kernel("StringToHashBucket", device_type="CPU")(_bucket_kernel(lambda c, s: hash64(s)))
ks.kernel("StringToHashBucketFast", device_type="CPU")(
    _bucket_kernel(lambda c, s: fingerprint64(s)))


@ks.kernel("StringToHashBucketStrong", device_type="CPU")
def _strong_kernel(ctx: Any) -> Any:
    key = ctx.attrs["key"]
    if len(key) != 2:
        raise _invalid(f"Key must have 2 elements, got {len(key)}")
    k0, k1 = key[0] & _M64, key[1] & _M64
    n = ctx.attrs["num_buckets"]
    return lambda x: _smap(lambda s: siphash24(k0, k1, _b(s)) % n, x, np.int64)


@ks.api("strings.to_hash_bucket", "string_to_hash_bucket")
def string_to_hash_bucket(string_tensor: Any = None, num_buckets: Any = None,
                          name: str | None = None, input: Any = None) -> Tensor:
    """TF's ``Hash64`` of each string modulo ``num_buckets`` (int64; deprecated: prefer
    ``to_hash_bucket_fast``)."""
    if string_tensor is None:
        string_tensor = input
    return apply_op("StringToHashBucket", name=name, string_tensor=string_tensor,
                    num_buckets=num_buckets)


@ks.api("strings.to_hash_bucket_fast", "string_to_hash_bucket_fast")
def string_to_hash_bucket_fast(input: Any, num_buckets: int, name: str | None = None
                               ) -> Tensor:
    """farmhash ``Fingerprint64`` of each string modulo ``num_buckets`` (int64)."""
    return apply_op("StringToHashBucketFast", name=name, input=input, num_buckets=num_buckets)


@ks.api("strings.to_hash_bucket_strong", "string_to_hash_bucket_strong")
def string_to_hash_bucket_strong(input: Any, num_buckets: int, key: Any,
                                 name: str | None = None) -> Tensor:
    """SipHash-2-4 keyed with ``key`` (two ints) of each string modulo ``num_buckets``."""
    return apply_op("StringToHashBucketStrong", name=name, input=input,
                    num_buckets=num_buckets, key=list(key))


def _fingerprint_shape(op: Any) -> list[TensorShape]:
    s = op.inputs[0].shape
    if s.ndims is not None and s.ndims < 1:
        raise ValueError(f"Shape must be at least rank 1 but is rank {s.ndims} for "
                         f"'{op.name}' (op: 'Fingerprint')")
    return [TensorShape([s.as_list()[0] if s.ndims else None, 8])]


ks.op(OpDef("Fingerprint", inputs=["data: T", "method: string"], outputs=["fingerprint: uint8"],
            attrs=["T: type"], shape_fn=_fingerprint_shape,
            doc="An 8-byte farmhash fingerprint of each row (first dimension) of data."))
ks.not_differentiable("Fingerprint")


def _fp_bytes(s: bytes) -> bytes:
    return fingerprint64(s).to_bytes(8, "little")


@ks.kernel("Fingerprint", device_type="CPU")
def _fingerprint_kernel(ctx: Any) -> Any:
    is_str = ctx.attrs["T"].base_dtype is _STR

    def fingerprint(data: Any, method: Any) -> Any:
        m = _b(method.reshape(()).item() if np.ndim(method) == 0 else method)
        if m != b"farmhash64":
            raise _invalid(f"Unsupported fingerprint method: {m.decode(errors='replace')}")
        if data.ndim < 1:
            raise _invalid(f"`data` should have at least one dimension: {list(data.shape)}")
        rows = data.shape[0]
        flat = data.reshape(rows, -1) if rows else data.reshape(0, 0)
        out = np.zeros((rows, 8), np.uint8)
        for r in range(rows):
            if is_str:
                parts = [_b(s) for s in flat[r]]
                row = _fp_bytes(parts[0]) if len(parts) == 1 else \
                    _fp_bytes(b"".join(_fp_bytes(p) for p in parts))
            else:
                row = _fp_bytes(np.ascontiguousarray(flat[r]).astype(
                    flat.dtype.newbyteorder("<"), copy=False).tobytes())
            out[r] = np.frombuffer(row, np.uint8)
        return out

    return fingerprint


@ks.api("fingerprint")
def fingerprint(data: Any, method: str = "farmhash64", name: str | None = None) -> Tensor:
    """uint8 ``[data.shape[0], 8]``: TF's farmhash fingerprint of each row of ``data``."""
    return apply_op("Fingerprint", name=name, data=data, method=method)


# =======================================================================================
# join, reduce_join, length, lower/upper, strip
# =======================================================================================
def _join_shape(op: Any) -> list[TensorShape]:
    out = TensorShape([])
    for t in op.inputs:
        s = t.shape
        if s.ndims == 0:
            continue
        if s.ndims is None:
            return [unknown_shape()]
        if out.ndims == 0:
            out = s
        elif not out.is_compatible_with(s):
            raise ValueError(f"Dimensions must be equal: {out} vs. {s} for '{op.name}' "
                             f"(op: 'StringJoin')")
        else:
            out = out.merge_with(s)
    return [out]


ks.op(OpDef("StringJoin", inputs=["inputs: N * string"], outputs=["output: string"],
            attrs=["N: int >= 1", "separator: string = ''"], shape_fn=_join_shape,
            doc="Element-wise concatenation of strings (scalars broadcast)."))
ks.not_differentiable("StringJoin")


@ks.kernel("StringJoin", device_type="CPU")
def _join_kernel(ctx: Any) -> Any:
    sep = _b(ctx.attrs.get("separator", ""))

    def join(*xs: Any) -> Any:
        shape = None
        for x in xs:
            if x.ndim:
                if shape is not None and x.shape != shape:
                    raise _invalid(f"Input shapes do not match: {list(shape)} vs. "
                                   f"{list(x.shape)}")
                shape = x.shape
        shape = shape if shape is not None else ()
        parts = [np.broadcast_to(np.asarray(x, dtype=object), shape).reshape(-1) for x in xs]
        n = int(np.prod(shape)) if shape else 1
        return _strs([sep.join(_b(p[i]) for p in parts) for i in range(n)], shape)

    return join


@ks.api("strings.join", "string_join")
def string_join(inputs: Any, separator: str = "", name: str | None = None) -> Tensor:
    """The element-wise concatenation of a list of string tensors (scalars broadcast),
    with ``separator`` between the parts."""
    return apply_op("StringJoin", name=name, inputs=list(inputs), separator=separator)


def _reduce_join_shape(op: Any) -> list[TensorShape]:
    s = op.inputs[0].shape
    axes = constant_value(op.inputs[1])
    if s.ndims is None or axes is None:
        return [unknown_shape()]
    rank = s.ndims
    red = set()
    for a in np.asarray(axes).reshape(-1).tolist():
        if not -rank <= a < rank:
            raise ValueError(f"Invalid reduction dimension {a} for input with {rank} "
                             f"dimensions. for '{op.name}' (op: 'ReduceJoin')")
        red.add(a % rank)
    dims = s.as_list()
    if op.node_attrs.get("keep_dims", False):
        return [TensorShape([1 if i in red else d for i, d in enumerate(dims)])]
    return [TensorShape([d for i, d in enumerate(dims) if i not in red])]


ks.op(OpDef("ReduceJoin", inputs=["inputs: string", "reduction_indices: int32"],
            outputs=["output: string"],
            attrs=["keep_dims: bool = false", "separator: string = ''"],
            shape_fn=_reduce_join_shape,
            doc="Joins strings across dimensions (the first listed varying fastest)."))
ks.not_differentiable("ReduceJoin")


@ks.kernel("ReduceJoin", device_type="CPU", host_memory=("reduction_indices",))
def _reduce_join_kernel(ctx: Any) -> Any:
    keep = ctx.attrs.get("keep_dims", False)
    sep = _b(ctx.attrs.get("separator", ""))

    def reduce_join(x: Any, axes: Any) -> Any:
        rank = x.ndim
        order: list[int] = []
        for a in np.asarray(axes).reshape(-1).tolist():
            if not -rank <= a < rank:
                raise _invalid(f"Invalid reduction dimension {a} for input with {rank} "
                               f"dimension(s)")
            a %= rank
            if a in order:
                raise _invalid(f"Duplicate reduction dimension {a}")
            order.append(a)
        kept = [d for d in range(rank) if d not in order]
        # the first listed dimension varies fastest: it goes last
        t = np.transpose(np.asarray(x, dtype=object), kept + order[::-1])
        out_kept = [x.shape[d] for d in kept]
        flat = t.reshape(int(np.prod(out_kept)) if out_kept else 1, -1)
        joined = [sep.join(_b(s) for s in row) for row in flat]
        shape = [1 if d in order else x.shape[d] for d in range(rank)] if keep else out_kept
        return _strs(joined, shape)

    return reduce_join


@ks.api("strings.reduce_join", "reduce_join")
def reduce_join(inputs: Any, axis: Any = None, keep_dims: Any = None, separator: str = "",
                name: str | None = None, reduction_indices: Any = None,
                keepdims: Any = None) -> Tensor:
    """Joins the strings of ``inputs`` over ``axis`` (default: all, in row-major order);
    listed axes are joined with the first varying fastest."""
    tf = _tf()
    if keepdims is not None and keep_dims is not None:
        raise ValueError("Cannot specify both 'keepdims' and 'keep_dims'")
    keep = bool(keepdims if keepdims is not None else keep_dims)
    if axis is not None and reduction_indices is not None:
        raise ValueError("Cannot specify both 'axis' and 'reduction_indices'")
    axis = reduction_indices if axis is None else axis
    with name_scope(None, "ReduceJoin", [inputs, axis]):
        x = convert_to_tensor(inputs)
        if axis is None:
            if x.shape.ndims is not None:
                axis = tf.constant(np.arange(x.shape.ndims - 1, -1, -1), dtype=_dt.int32)
            else:
                axis = tf.range(tf.rank(x) - 1, -1, -1)
        return apply_op("ReduceJoin", name=name, inputs=x, reduction_indices=axis,
                        keep_dims=keep, separator=separator)


def _length_fn(ctx: Any) -> Callable[[bytes], int]:
    if ctx.attrs.get("unit", "BYTE") == "UTF8_CHAR":
        return lambda s: sum(1 for c in s if (c & 0xC0) != 0x80)
    return len


_unary_string_op("StringLength", _length_fn, out="int32",
                 attrs=("unit: {'BYTE', 'UTF8_CHAR'} = 'BYTE'",),
                 doc="The length of each string in bytes or UTF-8 characters.")


def _case_fn(upper: bool) -> Callable[[Any], Callable[[bytes], bytes]]:
    def factory(ctx: Any) -> Callable[[bytes], bytes]:
        enc = ctx.attrs.get("encoding", "")
        if enc and enc.lower().replace("-", "") != "utf8":
            raise _invalid(f"Unsupported encoding: {enc}")
        if not enc:
            return (lambda s: s.upper()) if upper else (lambda s: s.lower())

        def conv(s: bytes) -> bytes:
            t = s.decode("utf-8", errors="surrogateescape")
            return (t.upper() if upper else t.lower()).encode("utf-8", "surrogateescape")

        return conv

    return factory


_unary_string_op("StringLower", _case_fn(False), attrs=("encoding: string = ''",),
                 doc="Lower-cased strings (ASCII, or Unicode with encoding 'utf-8').")
_unary_string_op("StringUpper", _case_fn(True), attrs=("encoding: string = ''",),
                 doc="Upper-cased strings (ASCII, or Unicode with encoding 'utf-8').")
_unary_string_op("StringStrip", lambda ctx: lambda s: s.strip(b" \t\n\v\f\r"),
                 doc="Strings without leading and trailing ASCII whitespace.")


@ks.api("strings.length")
def string_length(input: Any, name: str | None = None, unit: str = "BYTE") -> Tensor:
    """int32 length of each string, in bytes (``unit='BYTE'``) or UTF-8 characters
    (``'UTF8_CHAR'``)."""
    return apply_op("StringLength", name=name, input=input, unit=unit)


@ks.api("strings.lower")
def lower(input: Any, encoding: str = "", name: str | None = None) -> Tensor:
    """Lower-cased strings: ASCII letters only, or all of Unicode with ``'utf-8'``."""
    return apply_op("StringLower", name=name, input=input, encoding=encoding)


@ks.api("strings.upper")
def upper(input: Any, encoding: str = "", name: str | None = None) -> Tensor:
    """Upper-cased strings: ASCII letters only, or all of Unicode with ``'utf-8'``."""
    return apply_op("StringUpper", name=name, input=input, encoding=encoding)


@ks.api("strings.strip", "string_strip")
def string_strip(input: Any, name: str | None = None) -> Tensor:
    """Strings with leading and trailing whitespace removed."""
    return apply_op("StringStrip", name=name, input=input)


# =======================================================================================
# as_string, to_number
# =======================================================================================
_AS_STRING_T = ("{int8, int16, int32, int64, uint8, uint16, uint32, uint64, complex64, "
                "complex128, half, bfloat16, float, double, bool, string}")
ks.op(OpDef("AsString", inputs=["input: T"], outputs=["output: string"],
            attrs=[f"T: {_AS_STRING_T}", "precision: int = -1", "scientific: bool = false",
                   "shortest: bool = false", "width: int = -1", "fill: string = ''"],
            shape_fn=_same_shape, doc="Each element formatted as a string (printf rules)."))
ks.not_differentiable("AsString")


def _as_string_format(ctx: Any) -> str:
    """The printf format AsString uses for its node's attrs (TF's rules and errors)."""
    t = ctx.attrs["T"].base_dtype
    prec, sci, short = ctx.attrs["precision"], ctx.attrs["scientific"], ctx.attrs["shortest"]
    width, fill = ctx.attrs["width"], ctx.attrs["fill"]
    is_float = t.is_floating or t.is_complex
    if sci and short:
        raise _invalid("Cannot select both scientific and shortest notation")
    if (sci or short) and not is_float:
        raise _invalid(f"scientific and shortest format not supported for datatype "
                       f"{t.name}")
    if prec > -1 and not is_float:
        raise _invalid(f"precision not supported for datatype {t.name}")
    fmt = "%"
    if fill:
        if len(fill) > 1:
            raise _invalid(f"Fill string must be one or fewer characters: {fill}")
        if fill not in " +-0#":
            raise _invalid(f"Fill argument not supported: \"{fill}\"")
        fmt += fill
    if width > -1:
        fmt += str(width)
    if prec > -1:
        fmt += f".{prec}"
    if t is _STR:
        return fmt + "s"
    if is_float:
        return fmt + ("g" if short else "e" if sci else "f")
    if t is _dt.bool:
        return fmt + "s"
    return fmt + "d"


@ks.kernel("AsString", device_type="CPU")
def _as_string_kernel(ctx: Any) -> Any:
    fmt = _as_string_format(ctx)
    t = ctx.attrs["T"].base_dtype

    def conv(v: Any) -> bytes:
        if t is _dt.bool:
            return (fmt % ("true" if v else "false")).encode()
        if t is _STR:
            return (fmt % _b(v).decode("utf-8", "surrogateescape")).encode(
                "utf-8", "surrogateescape")
        if t.is_complex:
            return ("(" + fmt % float(v.real) + "," + fmt % float(v.imag) + ")").encode()
        if t.is_floating:
            return (fmt % float(v)).encode()
        return (fmt % int(v)).encode()

    return lambda x: _smap(conv, np.asarray(x, dtype=object) if t is not _STR else x)


@ks.api("as_string", "strings.as_string")
def as_string(input: Any, precision: int = -1, scientific: bool = False,
              shortest: bool = False, width: int = -1, fill: str = "",
              name: str | None = None) -> Tensor:
    """Each element as a string: floats with printf's ``%f`` (``precision`` digits,
    ``%e`` when ``scientific``, ``%g`` when ``shortest``), integers with ``%d``, bools as
    ``true``/``false``; padded to ``width`` with ``fill``."""
    return apply_op("AsString", name=name, input=input, precision=precision,
                    scientific=scientific, shortest=shortest, width=width, fill=fill)


_FLOAT_RE = re.compile(rb"^[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|inf|infinity|nan)$",
                       re.IGNORECASE)
_HEX_RE = re.compile(rb"^[+-]?0[xX][0-9a-fA-F]+$")
_INT_RE = re.compile(rb"^[+-]?\d+$")
_WS = b" \t\n\v\f\r"


def parse_number(s: bytes, dtype: _dt.DType) -> Any:
    """``s`` as a number of ``dtype`` the way TF's ``SafeStringToNumeric`` reads it
    (surrounding whitespace allowed); None if it does not parse or overflows."""
    t = s.strip(_WS)
    if dtype.is_integer:
        if not _INT_RE.match(t):
            return None
        v = int(t)
        info = np.iinfo(dtype.np)
        return v if info.min <= v <= info.max else None
    if _HEX_RE.match(t):
        return float(int(t, 16))
    if not _FLOAT_RE.match(t):
        return None
    return float(t)


ks.op(OpDef("StringToNumber", inputs=["string_tensor: string"], outputs=["output: out_type"],
            attrs=["out_type: {float, double, int32, int64} = DT_FLOAT"], shape_fn=_same_shape,
            doc="Each string parsed as a number."))
ks.not_differentiable("StringToNumber")


@ks.kernel("StringToNumber", device_type="CPU")
def _to_number_kernel(ctx: Any) -> Any:
    dt = ctx.attrs["out_type"].base_dtype

    def conv(s: Any) -> Any:
        v = parse_number(_b(s), dt)
        if v is None:
            raise _invalid(f"StringToNumberOp could not correctly convert string: "
                           f"{_b(s).decode('utf-8', 'replace')}")
        return v

    def to_number(x: Any) -> Any:
        with np.errstate(over="ignore"):
            return _smap(conv, x).astype(dt.np) if x.size else np.zeros(x.shape, dt.np)

    return to_number


@ks.api("strings.to_number", "string_to_number")
def string_to_number(string_tensor: Any = None, out_type: Any = _dt.float32,
                     name: str | None = None, input: Any = None) -> Tensor:
    """Each string parsed as a number of ``out_type`` (float32, float64, int32, int64);
    InvalidArgumentError naming the first string that does not parse."""
    if string_tensor is None:
        string_tensor = input
    return apply_op("StringToNumber", name=name, string_tensor=string_tensor,
                    out_type=out_type)


# =======================================================================================
# substr
# =======================================================================================
ks.op(OpDef("Substr", inputs=["input: string", "pos: T", "len: T"], outputs=["output: string"],
            attrs=["T: {int32, int64}", "unit: {'BYTE', 'UTF8_CHAR'} = 'BYTE'"],
            shape_fn=lambda op: [_substr_shape(op)],
            doc="Substrings at pos of length len (pos and len broadcast)."))
ks.not_differentiable("Substr")


def _substr_shape(op: Any) -> TensorShape:
    s, p, n = (t.shape for t in op.inputs)
    if not p.is_compatible_with(n):
        raise ValueError(f"Shapes must be equal rank, but are {p.ndims} and {n.ndims} for "
                         f"'{op.name}' (op: 'Substr')")
    from ._common import broadcast_static
    return broadcast_static(s, p.merge_with(n), op)


def _utf8_starts(s: bytes) -> list[int]:
    return [i for i, c in enumerate(s) if (c & 0xC0) != 0x80]


@ks.kernel("Substr", device_type="CPU")
def _substr_kernel(ctx: Any) -> Any:
    chars = ctx.attrs.get("unit", "BYTE") == "UTF8_CHAR"

    def sub(s: bytes, pos: int, n: int, i: int) -> bytes:
        if chars:
            starts = _utf8_starts(s)
            size = len(starts)
        else:
            size = len(s)
        if abs(pos) > size:
            raise _invalid(f"pos {pos} out of range for string" +
                           ("" if chars else f"b'{s.decode('utf-8', 'replace')}'") +
                           f" at index {i}")
        p = pos + size if pos < 0 else pos
        end = size if n < 0 else min(size, p + n)
        if not chars:
            return s[p:end]
        bounds = starts + [len(s)]
        return s[bounds[p]:bounds[end]]

    def substr(x: Any, pos: Any, n: Any) -> Any:
        if pos.shape != n.shape:
            raise _invalid(f"pos and len should have the same shape, got: "
                           f"{list(pos.shape)} vs. {list(n.shape)}")
        try:
            shape = np.broadcast_shapes(x.shape, pos.shape)
        except ValueError:
            raise _invalid(f"Incompatible shapes: {list(x.shape)} vs. "
                           f"{list(pos.shape)}") from None
        xs = np.broadcast_to(np.asarray(x, dtype=object), shape).reshape(-1)
        ps = np.broadcast_to(pos, shape).reshape(-1)
        ns = np.broadcast_to(n, shape).reshape(-1)
        return _strs([sub(_b(xs[i]), int(ps[i]), int(ns[i]), i) for i in range(xs.size)],
                     shape)

    return substr


@ks.api("strings.substr", "substr")
def substr(input: Any, pos: Any, len: Any, name: str | None = None, unit: str = "BYTE"
           ) -> Tensor:
    """Substrings of ``input`` from ``pos`` (negative: from the end) of ``len`` bytes or
    UTF-8 characters (``unit``); ``pos``/``len`` broadcast against ``input``."""
    return apply_op("Substr", name=name, input=input, pos=pos, len=len, unit=unit)


# =======================================================================================
# regular expressions (RE2 syntax through Python's re)
# =======================================================================================
def _compile(pattern: Any) -> re.Pattern:
    """An RE2 pattern compiled by ``re`` (``\\z`` is Python's ``\\Z``)."""
    p = _b(pattern).decode("utf-8", "surrogateescape")
    p = re.sub(r"(?<!\\)((?:\\\\)*)\\z", r"\1\\Z", p)
    try:
        return re.compile(p)
    except re.error as e:
        raise _invalid(f"Invalid pattern: {p}, error: {e}") from None


def _rewrite_fn(rewrite: Any) -> Callable[[re.Match], str]:
    """An RE2 rewrite string (``\\0``-``\\9`` groups, ``\\\\`` a backslash) as a
    function of the match."""
    r = _b(rewrite).decode("utf-8", "surrogateescape")
    parts: list[Any] = []
    i = 0
    lit = ""
    while i < len(r):
        c = r[i]
        if c == "\\" and i + 1 < len(r):
            d = r[i + 1]
            if d.isdigit():
                parts.append(lit)
                parts.append(int(d))
                lit = ""
            elif d == "\\":
                lit += "\\"
            else:
                raise _invalid(f"Invalid rewrite pattern: {r}")
            i += 2
            continue
        if c == "\\":
            raise _invalid(f"Invalid rewrite pattern: {r}")
        lit += c
        i += 1
    parts.append(lit)

    def apply(m: re.Match) -> str:
        return "".join(p if isinstance(p, str) else (m.group(p) or "") for p in parts)

    return apply


def _text(s: Any) -> str:
    return _b(s).decode("utf-8", "surrogateescape")


def _bytes(t: str) -> bytes:
    return t.encode("utf-8", "surrogateescape")


ks.op(OpDef("RegexFullMatch", inputs=["input: string", "pattern: string"],
            outputs=["output: bool"], shape_fn=_same_shape,
            doc="Whether each string matches the regular expression entirely."),
      OpDef("StaticRegexFullMatch", inputs=["input: string"], outputs=["output: bool"],
            attrs=["pattern: string"], shape_fn=_same_shape,
            doc="Whether each string matches the (attr) regular expression entirely."),
      OpDef("RegexReplace", inputs=["input: string", "pattern: string", "rewrite: string"],
            outputs=["output: string"], attrs=["replace_global: bool = true"],
            shape_fn=_same_shape, doc="Replaces matches of a regular expression."),
      OpDef("StaticRegexReplace", inputs=["input: string"], outputs=["output: string"],
            attrs=["pattern: string", "rewrite: string", "replace_global: bool = true"],
            shape_fn=_same_shape, doc="Replaces matches of an (attr) regular expression."))
ks.not_differentiable("RegexFullMatch", "StaticRegexFullMatch", "RegexReplace",
                      "StaticRegexReplace")


def _full_match(x: Any, rx: re.Pattern) -> Any:
    return _smap(lambda s: rx.fullmatch(_text(s)) is not None, x, np.bool_)


def _replace(x: Any, rx: re.Pattern, rw: Callable[[re.Match], str], glob: bool) -> Any:
    return _smap(lambda s: _bytes(rx.sub(rw, _text(s), count=0 if glob else 1)), x)


@ks.kernel("RegexFullMatch", device_type="CPU")
def _regex_full_match_kernel(ctx: Any) -> Any:
    def full_match(x: Any, pattern: Any) -> Any:
        if np.ndim(pattern) != 0:
            raise _invalid(f"Pattern must be scalar, but received {list(np.shape(pattern))}")
        return _full_match(x, _compile(np.asarray(pattern).item()))

    return full_match


@ks.kernel("StaticRegexFullMatch", device_type="CPU")
def _static_full_match_kernel(ctx: Any) -> Any:
    rx = _compile(ctx.attrs["pattern"])
    return lambda x: _full_match(x, rx)


@ks.kernel("RegexReplace", device_type="CPU")
def _regex_replace_kernel(ctx: Any) -> Any:
    glob = ctx.attrs.get("replace_global", True)

    def replace(x: Any, pattern: Any, rewrite: Any) -> Any:
        if np.ndim(pattern) != 0:
            raise _invalid(f"Pattern must be scalar, but received {list(np.shape(pattern))}")
        if np.ndim(rewrite) != 0:
            raise _invalid(f"Replacement rewrite must be scalar, but received "
                           f"{list(np.shape(rewrite))}")
        return _replace(x, _compile(np.asarray(pattern).item()),
                        _rewrite_fn(np.asarray(rewrite).item()), glob)

    return replace


@ks.kernel("StaticRegexReplace", device_type="CPU")
def _static_replace_kernel(ctx: Any) -> Any:
    rx = _compile(ctx.attrs["pattern"])
    rw = _rewrite_fn(ctx.attrs["rewrite"])
    glob = ctx.attrs.get("replace_global", True)
    return lambda x: _replace(x, rx, rw, glob)


@ks.api("strings.regex_full_match")
def regex_full_match(input: Any, pattern: Any, name: str | None = None) -> Tensor:
    """Whether each string matches the RE2 ``pattern`` entirely (bool)."""
    if isinstance(pattern, (str, bytes)):
        return apply_op("StaticRegexFullMatch", name=name, input=input, pattern=pattern)
    return apply_op("RegexFullMatch", name=name, input=input, pattern=pattern)


@ks.api("strings.regex_replace", "regex_replace")
def regex_replace(input: Any, pattern: Any, rewrite: Any, replace_global: bool = True,
                  name: str | None = None) -> Tensor:
    """Each string with the matches of the RE2 ``pattern`` replaced by ``rewrite``
    (``\\1`` a group, ``\\0`` the match); only the first with ``replace_global=False``."""
    if isinstance(pattern, (str, bytes)) and isinstance(rewrite, (str, bytes)):
        return apply_op("StaticRegexReplace", name=name, input=input, pattern=pattern,
                        rewrite=rewrite, replace_global=replace_global)
    return apply_op("RegexReplace", name=name, input=input, pattern=pattern,
                    rewrite=rewrite, replace_global=replace_global)


# =======================================================================================
# split
# =======================================================================================
def _split_shapes(op: Any) -> list[TensorShape]:
    s = op.inputs[0].shape
    if s.ndims is not None and s.ndims != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {s.ndims} for '{op.name}' "
                         f"(op: '{op.type}')")
    return [TensorShape([None, 2]), TensorShape([None]), TensorShape([2])]


ks.op(OpDef("StringSplit", inputs=["input: string", "delimiter: string"],
            outputs=["indices: int64", "values: string", "shape: int64"],
            attrs=["skip_empty: bool = true"], shape_fn=_split_shapes,
            doc="Splits strings at any of the delimiter's characters (a SparseTensor)."),
      OpDef("StringSplitV2", inputs=["input: string", "sep: string"],
            outputs=["indices: int64", "values: string", "shape: int64"],
            attrs=["maxsplit: int = -1"], shape_fn=_split_shapes,
            doc="Splits strings at a separator, or at whitespace (a SparseTensor)."))
ks.not_differentiable("StringSplit", "StringSplitV2")


def _sparse_rows(rows: list[list[bytes]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ind = [(i, j) for i, r in enumerate(rows) for j in range(len(r))]
    vals = [t for r in rows for t in r]
    width = max((len(r) for r in rows), default=0)
    return (np.array(ind, dtype=np.int64).reshape(-1, 2), _strs(vals, (len(vals),)),
            np.array([len(rows), width], dtype=np.int64))


def _split_common(x: Any, sep: Any, fn: Callable[[bytes, bytes], list[bytes]]) -> Any:
    if x.ndim != 1:
        raise _invalid(f"input must be a vector, got shape: {list(x.shape)}")
    if np.ndim(sep) != 0:
        raise _invalid(f"sep must be a scalar, got shape: {list(np.shape(sep))}")
    d = _b(np.asarray(sep).item())
    return _sparse_rows([fn(_b(s), d) for s in x])


@ks.kernel("StringSplit", device_type="CPU")
def _string_split_kernel(ctx: Any) -> Any:
    skip = ctx.attrs.get("skip_empty", True)

    def split_one(s: bytes, d: bytes) -> list[bytes]:
        if not d:
            toks = [s[i:i + 1] for i in range(len(s))]
        else:
            toks = re.split(b"[" + re.escape(d) + b"]", s)
        return [t for t in toks if t] if skip else toks

    return lambda x, d: _split_common(x, d, split_one)


@ks.kernel("StringSplitV2", device_type="CPU")
def _string_split_v2_kernel(ctx: Any) -> Any:
    maxsplit = ctx.attrs.get("maxsplit", -1)

    def split_one(s: bytes, d: bytes) -> list[bytes]:
        if not d:
            return s.split(None, maxsplit)
        return s.split(d, maxsplit)

    return lambda x, d: _split_common(x, d, split_one)


def _split_result(ind: Tensor, vals: Tensor, shape: Tensor) -> SparseTensor:
    ind.set_shape([None, 2])
    vals.set_shape([None])
    shape.set_shape([2])
    return SparseTensor(ind, vals, shape)


@ks.api("string_split")
def string_split(source: Any, sep: Any = None, skip_empty: bool = True, delimiter: Any = None,
                 result_type: str = "SparseTensor", name: str | None = None) -> SparseTensor:
    """Splits each string of the vector ``source`` at any character of ``sep`` (default
    ``' '``; ``''`` splits into bytes); a SparseTensor ``[batch, max tokens]``."""
    if sep is not None and delimiter is not None:
        raise ValueError("Cannot specify both 'sep' and 'delimiter'")
    with name_scope(name, "StringSplit", [source]):
        d = sep if sep is not None else delimiter
        d = " " if d is None else d
        d = convert_to_tensor(d, dtype=_STR)
        src = convert_to_tensor(source, dtype=_STR)
        out = _split_result(*apply_op("StringSplit", input=src, delimiter=d,
                                      skip_empty=skip_empty))
        return _check_result_type(out, result_type)


def _check_result_type(out: SparseTensor, result_type: str) -> SparseTensor:
    if result_type == "SparseTensor":
        return out
    if result_type == "RaggedTensor":
        raise NotImplementedError("result_type='RaggedTensor': flowrt has no RaggedTensor")
    raise ValueError("result_type must be 'RaggedTensor' or 'SparseTensor'.")


@ks.api("strings.split")
def strings_split(input: Any = None, sep: Any = None, maxsplit: int = -1,
                  result_type: str = "SparseTensor", source: Any = None,
                  name: str | None = None) -> SparseTensor:
    """Splits each string of a vector at ``sep`` (default: runs of whitespace), at most
    ``maxsplit`` times; a SparseTensor ``[batch, max tokens]`` (TF 1.15's compat.v1)."""
    if input is not None and source is not None:
        raise ValueError("Cannot specify both 'input' and 'source'")
    src = source if input is None else input
    with name_scope(name, "StringSplit", [src]):
        s = convert_to_tensor("" if sep is None else sep, dtype=_STR)
        src = convert_to_tensor(src, dtype=_STR)
        out = _split_result(*apply_op("StringSplitV2", input=src, sep=s, maxsplit=maxsplit))
        return _check_result_type(out, result_type)


# =======================================================================================
# base64, decode_raw, decode_compressed
# =======================================================================================
ks.op(OpDef("EncodeBase64", inputs=["input: string"], outputs=["output: string"],
            attrs=["pad: bool = false"], shape_fn=_same_shape,
            doc="Web-safe base64 encoding of each string."),
      OpDef("DecodeBase64", inputs=["input: string"], outputs=["output: string"],
            shape_fn=_same_shape, doc="Decodes web-safe base64 strings."))
ks.not_differentiable("EncodeBase64", "DecodeBase64")
_B64_RE = re.compile(rb"^[A-Za-z0-9_-]*={0,2}$")


@ks.kernel("EncodeBase64", device_type="CPU")
def _encode_b64_kernel(ctx: Any) -> Any:
    pad = ctx.attrs.get("pad", False)

    def enc(s: Any) -> bytes:
        e = base64.urlsafe_b64encode(_b(s))
        return e if pad else e.rstrip(b"=")

    return lambda x: _smap(enc, x)


def _b64decode(s: Any) -> bytes:
    t = _b(s)
    if not _B64_RE.match(t) or len(t.rstrip(b"=")) % 4 == 1:
        raise _invalid("Invalid character found in base64.")
    try:
        return base64.urlsafe_b64decode(t.rstrip(b"=") + b"=" * (-len(t.rstrip(b"=")) % 4))
    except (binascii.Error, ValueError):
        raise _invalid("Invalid character found in base64.") from None


ks.kernel("DecodeBase64", device_type="CPU")(lambda ctx: lambda x: _smap(_b64decode, x))


@ks.api("io.encode_base64", "encode_base64")
def encode_base64(input: Any, pad: bool = False, name: str | None = None) -> Tensor:
    """Web-safe base64 (``-`` and ``_``) of each string, ``=``-padded if ``pad``."""
    return apply_op("EncodeBase64", name=name, input=input, pad=pad)


@ks.api("io.decode_base64", "decode_base64")
def decode_base64(input: Any, name: str | None = None) -> Tensor:
    """Decodes web-safe base64 strings (padding optional)."""
    return apply_op("DecodeBase64", name=name, input=input)


_RAW_T = ("{half, float, double, int32, uint16, uint8, int16, int8, int64, complex64, "
          "complex128, bool, bfloat16}")
ks.op(OpDef("DecodeRaw", inputs=["bytes: string"], outputs=["output: out_type"],
            attrs=[f"out_type: {_RAW_T}", "little_endian: bool = true"],
            shape_fn=lambda op: [op.inputs[0].shape.concatenate([None])
                                 if op.inputs[0].shape.ndims is not None else unknown_shape()],
            doc="The bytes of each string reinterpreted as numbers."))
ks.not_differentiable("DecodeRaw")


@ks.kernel("DecodeRaw", device_type="CPU")
def _decode_raw_kernel(ctx: Any) -> Any:
    dt = ctx.attrs["out_type"].base_dtype
    npd = np.dtype(dt.np).newbyteorder("<" if ctx.attrs.get("little_endian", True) else ">")
    size = npd.itemsize

    def decode(x: Any) -> Any:
        flat = [_b(s) for s in np.asarray(x, dtype=object).reshape(-1)]
        if not flat:
            return np.zeros(x.shape + (0,), dtype=dt.np)
        n = len(flat[0])
        for i, s in enumerate(flat):
            if len(s) != n:
                raise _invalid(f"DecodeRaw requires input strings to all be the same size, "
                               f"but element {i} has size {len(s)} != {n}")
        if n % size:
            raise _invalid(f"Input to DecodeRaw has length {n} that is not a multiple of "
                           f"{size}, the size of {dt.name}")
        buf = np.frombuffer(b"".join(flat), dtype=npd).astype(dt.np)
        return buf.reshape(x.shape + (n // size,))

    return decode


@ks.api("io.decode_raw", "decode_raw")
def decode_raw(input_bytes: Any = None, out_type: Any = None, little_endian: bool = True,
               name: str | None = None, bytes: Any = None) -> Tensor:
    """The bytes of each string (all of one length) as a vector of ``out_type``: shape
    ``input.shape + [length / size]``."""
    if input_bytes is not None and bytes is not None:
        raise ValueError("Cannot specify both 'input_bytes' and 'bytes'")
    src = bytes if input_bytes is None else input_bytes
    return apply_op("DecodeRaw", name=name, bytes=src, out_type=out_type,
                    little_endian=little_endian)


ks.op(OpDef("DecodeCompressed", inputs=["bytes: string"], outputs=["output: string"],
            attrs=["compression_type: string = ''"], shape_fn=_same_shape,
            doc="Decompresses ZLIB or GZIP strings."))
ks.not_differentiable("DecodeCompressed")


@ks.kernel("DecodeCompressed", device_type="CPU")
def _decompress_kernel(ctx: Any) -> Any:
    kind = ctx.attrs.get("compression_type", "")
    if kind not in ("", "ZLIB", "GZIP"):
        raise _invalid(f"Only ZLIB, GZIP or NONE are supported compressions, got {kind!r}")

    def dec(s: Any) -> bytes:
        data = _b(s)
        try:
            if kind == "ZLIB":
                return zlib.decompress(data)
            if kind == "GZIP":
                return gzip.decompress(data)
        except (zlib.error, OSError, EOFError) as e:
            raise errors.DataLossError(None, None, f"inflate() failed: {e}") from None
        return data

    return lambda x: _smap(dec, x)


@ks.api("io.decode_compressed", "decode_compressed")
def decode_compressed(bytes: Any, compression_type: str = "", name: str | None = None
                      ) -> Tensor:
    """Each string decompressed (``compression_type`` ``'ZLIB'``, ``'GZIP'`` or ``''``)."""
    return apply_op("DecodeCompressed", name=name, bytes=bytes,
                    compression_type=compression_type)


# =======================================================================================
# decode_csv
# =======================================================================================
def _csv_fields(rec: bytes, delim: int, quote: bool, r: int) -> list[bytes]:
    """The fields of one CSV record (TF's ``ExtractFields``: ``""`` escapes a quote)."""
    fields: list[bytes] = []
    i, n = 0, len(rec)
    if n == 0:
        return [b""]
    while i <= n:
        if quote and i < n and rec[i] == 0x22:
            i += 1
            buf = bytearray()
            while True:
                if i >= n:
                    raise _invalid(f"Quoted field has to end with quote followed by delim or "
                                   f"end in record {r}")
                if rec[i] == 0x22:
                    if i + 1 < n and rec[i + 1] == 0x22:
                        buf.append(0x22)
                        i += 2
                        continue
                    if i + 1 < n and rec[i + 1] != delim:
                        raise _invalid(f"Quote inside a string has to be escaped by another "
                                       f"quote in record {r}")
                    i += 1
                    break
                buf.append(rec[i])
                i += 1
            fields.append(bytes(buf))
            i += 1
            if i == n + 1:
                break
            continue
        j = i
        while j < n and rec[j] != delim:
            if (quote and rec[j] == 0x22) or rec[j] in (0x0A, 0x0D):
                raise _invalid(f"Unquoted fields cannot have quotes/CRLFs inside in record "
                               f"{r}")
            j += 1
        fields.append(rec[i:j])
        i = j + 1
    return fields


ks.op(OpDef("DecodeCSV", inputs=["records: string", "record_defaults: OUT_TYPE"],
            outputs=["output: OUT_TYPE"],
            attrs=["OUT_TYPE: list({float, double, int32, int64, string})",
                   "field_delim: string = ','", "use_quote_delim: bool = true",
                   "na_value: string = ''", "select_cols: list(int) = []"],
            shape_fn=lambda op: [op.inputs[0].shape] * len(op.node_attrs["OUT_TYPE"]),
            doc="Parses CSV records into one tensor per column."))
ks.not_differentiable("DecodeCSV")


@ks.kernel("DecodeCSV", device_type="CPU")
def _decode_csv_kernel(ctx: Any) -> Any:
    types = [t.base_dtype for t in ctx.attrs["OUT_TYPE"]]
    delim_s = _b(ctx.attrs.get("field_delim", ","))
    quote = ctx.attrs.get("use_quote_delim", True)
    na = _b(ctx.attrs.get("na_value", ""))
    cols = list(ctx.attrs.get("select_cols", []) or [])
    if len(delim_s) != 1:
        raise _invalid("field_delim should be only 1 char")
    if cols and any(b <= a for a, b in zip(cols, cols[1:])):
        raise _invalid("select_cols is not strictly increasing.")
    if cols and cols[0] < 0:
        raise _invalid("select_cols contains negative values.")
    if cols and len(cols) != len(types):
        raise _invalid("select_cols should match output size")

    def value(f: bytes, c: int, r: int, default: Any) -> Any:
        t = types[c]
        if f == b"" or f == na:
            if default.size == 0:
                raise _invalid(f"Field {c} is required but missing in record {r}!")
            return default.reshape(-1)[0]
        if t is _STR:
            return f
        v = parse_number(f, t)
        if v is None:
            raise _invalid(f"Field {c} in record {r} is not a valid {t.name}: "
                           f"{f.decode('utf-8', 'replace')}")
        return v

    def decode(records: Any, *defaults: Any) -> Any:
        for c, d in enumerate(defaults):
            if d.ndim > 1 or d.size > 1:
                raise _invalid(f"There should only be 1 default per field but field {c} has "
                               f"{d.size}")
        recs = [_b(s) for s in np.asarray(records, dtype=object).reshape(-1)]
        outs = [[] for _ in types]
        for r, rec in enumerate(recs):
            fields = _csv_fields(rec, delim_s[0], quote, r)
            if cols:
                if len(fields) <= cols[-1]:
                    raise _invalid(f"Expect {cols[-1] + 1} fields but have {len(fields)} in "
                                   f"record {r}")
                fields = [fields[k] for k in cols]
            elif len(fields) != len(types):
                raise _invalid(f"Expect {len(types)} fields but have {len(fields)} in record "
                               f"{r}")
            for c, f in enumerate(fields):
                outs[c].append(value(f, c, r, defaults[c]))
        res = []
        for c, t in enumerate(types):
            if t is _STR:
                res.append(_strs([_b(v) for v in outs[c]], records.shape))
            else:
                with np.errstate(over="ignore"):
                    res.append(np.array(outs[c], dtype=t.np).reshape(records.shape))
        return res

    return decode


@ks.api("io.decode_csv", "decode_csv")
def decode_csv(records: Any, record_defaults: Any, field_delim: str = ",",
               use_quote_delim: bool = True, name: str | None = None, na_value: str = "",
               select_cols: Any = None) -> list[Tensor]:
    """Parses CSV ``records`` into one tensor per column, typed as ``record_defaults``
    (each ``[]`` for a required column, or one default value)."""
    if select_cols is not None and any(b <= a for a, b in zip(select_cols, select_cols[1:])):
        raise ValueError("select_cols is not strictly increasing.")
    if select_cols is not None and select_cols and select_cols[0] < 0:
        raise ValueError("select_cols contains negative values.")
    if select_cols is not None and len(select_cols) != len(record_defaults):
        raise ValueError("Length of select_cols and record_defaults do not match.")
    return apply_op("DecodeCSV", name=name, records=records,
                    record_defaults=list(record_defaults), field_delim=field_delim,
                    use_quote_delim=use_quote_delim, na_value=na_value,
                    select_cols=list(select_cols or []))


# =======================================================================================
# format, unsorted_segment_join
# =======================================================================================
def _fmt_float(v: float, single: bool) -> str:
    """TF's ``SimpleFtoa`` / ``SimpleDtoa``: the shortest of ``%.{6,9}g`` (float) or
    ``%.{15,17}g`` (double) that reads back as the same value."""
    if np.isnan(v):
        return "nan" if not np.signbit(v) else "-nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    lo, hi = (6, 9) if single else (15, 17)
    s = "%.*g" % (lo, v)
    back = np.float32(float(s)) if single else float(s)
    if back == (np.float32(v) if single else v):
        return s
    return "%.*g" % (hi, v)


def _element(v: Any, t: _dt.DType) -> str:
    if t is _STR:
        raw = _b(v).decode("utf-8", "backslashreplace")
        return '"' + raw.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if t is _dt.bool:
        return "1" if v else "0"
    if t.is_complex:
        single = t is _dt.complex64
        return f"({_fmt_float(float(v.real), single)},{_fmt_float(float(v.imag), single)})"
    if t.is_floating:
        return _fmt_float(float(v), t is not _dt.float64)
    return str(int(v))


def summarize(a: Any, t: _dt.DType, n_ends: int) -> str:
    """A tensor as ``tf.strings.format`` and ``tf.print`` show it (TF's
    ``SummarizeValue(summarize, print_v2=True)``): nested brackets, ``...`` past
    ``n_ends`` elements at each end of a dimension (-1: all)."""
    a = np.asarray(a, dtype=object if t is _STR else None)
    if a.ndim == 0:
        return _element(a.item() if t is not _STR else a.reshape(()).item(), t)
    if n_ends < 0:
        n_ends = a.size
    nd = a.ndim

    def spacing(d: int) -> str:
        if d == nd - 1:
            return " "
        return "\n" * (nd - d - 1) + " " * (d + 1)

    def dim(d: int, sub: Any) -> str:
        if d == nd:
            return _element(sub, t)
        count = sub.shape[0]
        out = "["
        first = min(n_ends, count)
        for i in range(first):
            if i > 0:
                out += spacing(d)
            out += dim(d + 1, sub[i])
        if count > 2 * n_ends:
            out += spacing(d) + "..."
        for i in range(max(n_ends, count - n_ends), count):
            out += spacing(d) + dim(d + 1, sub[i])
        return out + "]"

    return dim(0, a)


ks.op(OpDef("StringFormat", inputs=["inputs: T"], outputs=["output: string"],
            attrs=["T: list(type) >= 0", "template: string = '%s'",
                   "placeholder: string = '%s'", "summarize: int = 3"],
            shape_fn=lambda op: [TensorShape([])],
            doc="A template with each placeholder replaced by a tensor's summary."))
ks.not_differentiable("StringFormat")


@ks.kernel("StringFormat", device_type="CPU")
def _format_kernel(ctx: Any) -> Any:
    template = ctx.attrs.get("template", "%s")
    ph = ctx.attrs.get("placeholder", "%s")
    n = ctx.attrs.get("summarize", 3)
    types = [t.base_dtype for t in ctx.attrs["T"]]
    pieces = template.split(ph)
    if len(pieces) - 1 != len(types):
        raise _invalid(f"num placeholders in template and num inputs must match: "
                       f"{len(pieces) - 1} vs {len(types)}")

    def fmt(*xs: Any) -> Any:
        out = pieces[0]
        for x, t, p in zip(xs, types, pieces[1:]):
            out += summarize(x, t, n) + p
        return np.array(out.encode("utf-8", "surrogateescape"), dtype=object)

    return fmt


@ks.api("strings.format")
def string_format(template: str, inputs: Any, placeholder: str = "{}", summarize: int = 3,
                  name: str | None = None) -> Tensor:
    """A scalar string: ``template`` with each ``placeholder`` replaced by the summary of
    the next tensor of ``inputs`` (``summarize`` elements at each end of a dimension)."""
    if isinstance(inputs, Tensor) or not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    split = template.split(placeholder)
    if len(inputs) != len(split) - 1:
        raise ValueError(f"num placeholders in template and num inputs must match: "
                         f"{len(split) - 1} vs {len(inputs)}")
    return apply_op("StringFormat", name=name, inputs=list(inputs), template=template,
                    placeholder=placeholder, summarize=summarize)


def _segment_join_shape(op: Any) -> list[TensorShape]:
    data, ids = op.inputs[0].shape, op.inputs[1].shape
    n = constant_value(op.inputs[2])
    if data.ndims is None or ids.ndims is None:
        return [unknown_shape()]
    return [TensorShape([None if n is None else int(n)]).concatenate(data[ids.ndims:])]


ks.op(OpDef("UnsortedSegmentJoin",
            inputs=["inputs: string", "segment_ids: Tindices", "num_segments: Tnumsegments"],
            outputs=["output: string"],
            attrs=["separator: string = ''", "Tindices: {int32, int64}",
                   "Tnumsegments: {int32, int64} = DT_INT32"],
            shape_fn=_segment_join_shape, doc="Joins strings by segment id."))
ks.not_differentiable("UnsortedSegmentJoin")


@ks.kernel("UnsortedSegmentJoin", device_type="CPU", host_memory=("num_segments",))
def _segment_join_kernel(ctx: Any) -> Any:
    sep = _b(ctx.attrs.get("separator", ""))

    def join(x: Any, ids: Any, num: Any) -> Any:
        num = int(num)
        if x.shape[:ids.ndim] != ids.shape:
            raise _invalid(f"segment_ids.shape = {list(ids.shape)} is not a prefix of "
                           f"inputs.shape = {list(x.shape)}")
        inner = x.shape[ids.ndim:]
        flat = np.asarray(x, dtype=object).reshape((ids.size,) + inner)
        groups: list[list[Any]] = [[] for _ in range(num)]
        for i, s in enumerate(ids.reshape(-1).tolist()):
            if not 0 <= s < num:
                raise _invalid("segment_ids are not allowed to exceed num_segments or be "
                               "negative.")
            groups[s].append(flat[i])
        m = int(np.prod(inner)) if inner else 1
        out = []
        for g in groups:
            rows = [np.asarray(r, dtype=object).reshape(-1) for r in g]
            out.extend(sep.join(_b(r[k]) for r in rows) for k in range(m))
        return _strs(out, (num,) + inner)

    return join


@ks.api("strings.unsorted_segment_join")
def unsorted_segment_join(inputs: Any, segment_ids: Any, num_segments: Any,
                          separator: str = "", name: str | None = None) -> Tensor:
    """Joins the strings of ``inputs`` with the same segment id (in order), one output
    per segment (``''`` for an empty one)."""
    return apply_op("UnsortedSegmentJoin", name=name, inputs=inputs, segment_ids=segment_ids,
                    num_segments=num_segments, separator=separator)


# =======================================================================================
# ngrams
# =======================================================================================
ks.op(OpDef("StringNGrams", inputs=["data: string", "data_splits: Tsplits"],
            outputs=["ngrams: string", "ngrams_splits: Tsplits"],
            attrs=["separator: string", "ngram_widths: list(int) >= 0", "left_pad: string",
                   "right_pad: string", "pad_width: int", "preserve_short_sequences: bool",
                   "Tsplits: {int32, int64} = DT_INT64"],
            shape_fn=lambda op: [TensorShape([None]), op.inputs[1].shape],
            doc="The n-grams of each row of a ragged batch of tokens."))
ks.not_differentiable("StringNGrams")


def _ngrams_row(tokens: list[bytes], widths: list[int], sep: bytes, lpad: bytes,
                rpad: bytes, pad: int, preserve: bool) -> list[bytes]:
    """TF's StringNGrams for one row of tokens."""
    def pad_of(w: int) -> int:
        return min(w - 1 if pad < 0 else pad, w - 1)

    def count(w: int) -> int:
        return max(0, len(tokens) + 2 * pad_of(w) - w + 1)

    def make(w: int, num: int) -> list[bytes]:
        out = []
        p = pad_of(w)
        for k in range(num):
            left = max(0, p - k)
            right = max(0, p - (num - (k + 1)))
            ntok = w - left - right
            start = 0 if left > 0 else k - p
            parts = [lpad] * left + tokens[start:start + ntok] + [rpad] * right
            out.append(sep.join(parts))
        return out

    res: list[bytes] = []
    for w in widths:
        res.extend(make(w, count(w)))
    if preserve and not res and tokens:
        res.extend(make(len(tokens) + 2 * pad, 1))
    return res


@ks.kernel("StringNGrams", device_type="CPU")
def _ngrams_kernel(ctx: Any) -> Any:
    a = ctx.attrs
    sep, lpad, rpad = _b(a["separator"]), _b(a["left_pad"]), _b(a["right_pad"])
    widths, pad, keep = list(a["ngram_widths"]), a["pad_width"], a["preserve_short_sequences"]

    def ngrams(data: Any, splits: Any) -> Any:
        toks = [_b(s) for s in np.asarray(data, dtype=object).reshape(-1)]
        sp = splits.reshape(-1).tolist()
        out: list[bytes] = []
        out_splits = [0]
        for i in range(len(sp) - 1):
            if not 0 <= sp[i] <= sp[i + 1] <= len(toks):
                raise _invalid(f"Invalid split value {sp[i + 1]}")
            out.extend(_ngrams_row(toks[sp[i]:sp[i + 1]], widths, sep, lpad, rpad, pad, keep))
            out_splits.append(len(out))
        return _strs(out, (len(out),)), np.array(out_splits, dtype=splits.dtype)

    return ngrams


@ks.api("strings.ngrams")
def ngrams(data: Any, ngram_width: Any, separator: str = " ", pad_values: Any = None,
           padding_width: Any = None, preserve_short_sequences: bool = False,
           name: str | None = None) -> Tensor:
    """The n-grams of the last dimension of a dense string tensor (rank >= 1), joined
    with ``separator``, padded with ``pad_values`` if given; shape ``[..., n_ngrams]``."""
    tf = _tf()
    with name_scope(name, "StringNGrams", [data]):
        if pad_values is None:
            lpad = rpad = ""
        elif isinstance(pad_values, (list, tuple)):
            if len(pad_values) != 2 or not all(isinstance(p, (str, bytes))
                                               for p in pad_values):
                raise ValueError("pad_values must be a string, tuple of strings, or None.")
            lpad, rpad = pad_values
        else:
            if not isinstance(pad_values, (str, bytes)):
                raise ValueError("pad_values must be a string, tuple of strings, or None.")
            lpad = rpad = pad_values
        if padding_width is not None and padding_width < 1:
            raise ValueError("padding_width must be greater than 0.")
        if padding_width is not None and pad_values is None:
            raise ValueError("pad_values must be provided if padding_width is set.")
        data = convert_to_tensor(data, name="data", dtype=_STR)
        if data.shape.ndims is None:
            raise ValueError("Rank of data must be known.")
        if data.shape.ndims == 0:
            raise ValueError("Data must have rank>0")
        widths = list(ngram_width) if isinstance(ngram_width, (list, tuple)) else [ngram_width]
        for w in widths:
            if w < 1:
                raise ValueError(f"All ngram_widths must be greater than 0. Got {ngram_width}")
        pad = 0 if pad_values is None else (-1 if padding_width is None else padding_width)
        shape = tf.shape(data, out_type=_dt.int64)
        last = shape[-1]
        rows = tf.reduce_prod(shape[:-1])
        flat = tf.reshape(data, [-1])
        splits = tf.range(rows + 1, dtype=_dt.int64) * last
        out, _ = apply_op("StringNGrams", data=flat, data_splits=splits, separator=separator,
                          ngram_widths=widths, left_pad=lpad, right_pad=rpad, pad_width=pad,
                          preserve_short_sequences=preserve_short_sequences)
        if data.shape.ndims == 1:
            return out
        return tf.reshape(out, tf.concat([tf.shape(data)[:-1], [-1]], 0))


# =======================================================================================
# unicode
# =======================================================================================
_ENCODINGS = {"UTF-8": "utf-8", "UTF-16-BE": "utf-16-be", "UTF-32-BE": "utf-32-be",
              "US-ASCII": "ascii", "ISO-8859-1": "latin-1", "UTF-16-LE": "utf-16-le",
              "UTF-32-LE": "utf-32-le", "UTF-16": "utf-16", "UTF-32": "utf-32"}


def _codec(name: Any) -> str:
    n = _b(name).decode().upper()
    if n not in _ENCODINGS:
        raise _invalid(f"Could not create converter for input encoding: {n}")
    return _ENCODINGS[n]


def _decode_chars(s: bytes, codec: str, errors_: str, repl: int, ctrl: bool
                  ) -> tuple[list[int], list[int]]:
    """The code points of ``s`` and the byte offset each starts at; invalid sequences
    become ``repl`` ('replace'), are dropped ('ignore') or raise ('strict')."""
    chars: list[int] = []
    offs: list[int] = []
    unit = {"utf-16-be": 2, "utf-16-le": 2, "utf-32-be": 4, "utf-32-le": 4}.get(codec, 1)
    dec = __import__("codecs").getincrementaldecoder(codec)(errors="strict")
    i, n = 0, len(s)
    while i < n:
        start = i
        out = ""
        err = False
        while not out and i < n:
            try:
                out = dec.decode(s[i:i + unit], final=(i + unit >= n))
            except UnicodeDecodeError:
                dec.reset()
                err = True
                i += unit
                break
            i += unit
        if err or not out:
            if errors_ == "strict":
                raise _invalid("Invalid formatting on input string")
            if errors_ == "replace":
                chars.append(repl)
                offs.append(start)
            continue
        for ch in out:
            c = ord(ch)
            if ctrl and (c < 0x20 or 0x7F <= c < 0xA0) and c not in (0x09, 0x0A, 0x0D):
                c = repl
            chars.append(c)
            offs.append(start)
    return chars, offs


def _encode_chars(chars: list[int], codec: str, errors_: str, repl: int) -> bytes:
    out = []
    for c in chars:
        if not (0 <= c <= 0x10FFFF) or 0xD800 <= c <= 0xDFFF:
            if errors_ == "strict":
                raise _invalid(f"Invalid code point {c}")
            if errors_ == "ignore":
                continue
            c = repl
        out.append(chr(c))
    return "".join(out).encode(codec, errors="surrogatepass")


_UNICODE_ATTRS = ["input_encoding: string", "errors: {'strict', 'replace', 'ignore'} = "
                  "'replace'", "replacement_char: int = 65533",
                  "replace_control_characters: bool = false"]
ks.op(OpDef("UnicodeTranscode", inputs=["input: string"], outputs=["output: string"],
            attrs=_UNICODE_ATTRS + ["output_encoding: {'UTF-8', 'UTF-16-BE', 'UTF-32-BE'}"],
            shape_fn=_same_shape, doc="Strings re-encoded from one encoding to another."),
      OpDef("UnicodeDecode", inputs=["input: string"],
            outputs=["row_splits: Tsplits", "char_values: int32"],
            attrs=_UNICODE_ATTRS + ["Tsplits: {int32, int64} = DT_INT64"],
            shape_fn=lambda op: [TensorShape([None]), TensorShape([None])],
            doc="The code points of each string (ragged: splits and values)."),
      OpDef("UnicodeDecodeWithOffsets", inputs=["input: string"],
            outputs=["row_splits: Tsplits", "char_values: int32", "char_to_byte_starts: int64"],
            attrs=_UNICODE_ATTRS + ["Tsplits: {int32, int64} = DT_INT64"],
            shape_fn=lambda op: [TensorShape([None])] * 3,
            doc="The code points of each string and their byte offsets."),
      OpDef("UnicodeEncode", inputs=["input_values: int32", "input_splits: Tsplits"],
            outputs=["output: string"],
            attrs=["errors: {'ignore', 'replace', 'strict'} = 'replace'",
                   "output_encoding: {'UTF-8', 'UTF-16-BE', 'UTF-32-BE'}",
                   "replacement_char: int = 65533", "Tsplits: {int32, int64} = DT_INT64"],
            shape_fn=lambda op: [TensorShape([None])],
            doc="Strings encoded from rows of code points."))
ks.not_differentiable("UnicodeTranscode", "UnicodeDecode", "UnicodeDecodeWithOffsets",
                      "UnicodeEncode")


def _unicode_args(ctx: Any) -> tuple[str, str, int, bool]:
    return (_codec(ctx.attrs["input_encoding"]), ctx.attrs.get("errors", "replace"),
            ctx.attrs.get("replacement_char", 65533),
            ctx.attrs.get("replace_control_characters", False))


@ks.kernel("UnicodeTranscode", device_type="CPU")
def _transcode_kernel(ctx: Any) -> Any:
    codec, err, repl, ctrl = _unicode_args(ctx)
    out = _codec(ctx.attrs["output_encoding"])

    def tr(s: Any) -> bytes:
        chars, _ = _decode_chars(_b(s), codec, err, repl, ctrl)
        return _encode_chars(chars, out, err, repl)

    return lambda x: _smap(tr, x)


def _decode_kernel(with_offsets: bool) -> Callable[[Any], Any]:
    def factory(ctx: Any) -> Any:
        codec, err, repl, ctrl = _unicode_args(ctx)
        sd = ctx.attrs.get("Tsplits", _dt.int64).np

        def decode(x: Any) -> Any:
            splits, vals, offs = [0], [], []
            for s in np.asarray(x, dtype=object).reshape(-1):
                c, o = _decode_chars(_b(s), codec, err, repl, ctrl)
                vals.extend(c)
                offs.extend(o)
                splits.append(len(vals))
            res = [np.array(splits, sd), np.array(vals, np.int32)]
            return tuple(res + [np.array(offs, np.int64)]) if with_offsets else tuple(res)

        return decode

    return factory


ks.kernel("UnicodeDecode", device_type="CPU")(_decode_kernel(False))
ks.kernel("UnicodeDecodeWithOffsets", device_type="CPU")(_decode_kernel(True))


@ks.kernel("UnicodeEncode", device_type="CPU")
def _encode_kernel(ctx: Any) -> Any:
    codec = _codec(ctx.attrs["output_encoding"])
    err, repl = ctx.attrs.get("errors", "replace"), ctx.attrs.get("replacement_char", 65533)

    def encode(vals: Any, splits: Any) -> Any:
        sp = splits.reshape(-1).tolist()
        v = vals.reshape(-1).tolist()
        return _strs([_encode_chars(v[a:b], codec, err, repl) for a, b in zip(sp, sp[1:])],
                     (max(len(sp) - 1, 0),))

    return encode


@ks.api("strings.unicode_transcode")
def unicode_transcode(input: Any, input_encoding: str, output_encoding: str,
                      errors: str = "replace", replacement_char: int = 65533,
                      replace_control_characters: bool = False,
                      name: str | None = None) -> Tensor:
    """Each string re-encoded from ``input_encoding`` to ``output_encoding`` (UTF-8,
    UTF-16-BE, UTF-32-BE); invalid input per ``errors``."""
    return apply_op("UnicodeTranscode", name=name, input=input, input_encoding=input_encoding,
                    output_encoding=output_encoding, errors=errors,
                    replacement_char=replacement_char,
                    replace_control_characters=replace_control_characters)


def _scalar_only(t: Tensor, fn: str) -> None:
    if t.shape.ndims != 0:
        raise NotImplementedError(f"tf.strings.{fn} of a tensor of rank "
                                  f"{t.shape.ndims} returns a tf.RaggedTensor in TensorFlow, "
                                  "which flowrt does not implement; pass a scalar string")


@ks.api("strings.unicode_decode")
def unicode_decode(input: Any, input_encoding: str, errors: str = "replace",
                   replacement_char: int = 65533, replace_control_characters: bool = False,
                   name: str | None = None) -> Tensor:
    """The int32 code points of a scalar string."""
    with name_scope(name, "UnicodeDecode", [input]):
        x = convert_to_tensor(input, dtype=_STR)
        _scalar_only(x, "unicode_decode")
        return apply_op("UnicodeDecode", input=x, input_encoding=input_encoding,
                        errors=errors, replacement_char=replacement_char,
                        replace_control_characters=replace_control_characters)[1]


@ks.api("strings.unicode_decode_with_offsets")
def unicode_decode_with_offsets(input: Any, input_encoding: str, errors: str = "replace",
                                replacement_char: int = 65533,
                                replace_control_characters: bool = False,
                                name: str | None = None) -> tuple[Tensor, Tensor]:
    """``(code points, byte offset of each)`` of a scalar string."""
    with name_scope(name, "UnicodeDecodeWithOffsets", [input]):
        x = convert_to_tensor(input, dtype=_STR)
        _scalar_only(x, "unicode_decode_with_offsets")
        _, chars, offs = apply_op("UnicodeDecodeWithOffsets", input=x,
                                  input_encoding=input_encoding, errors=errors,
                                  replacement_char=replacement_char,
                                  replace_control_characters=replace_control_characters)
        return chars, offs


def _split_chars(x: Tensor, offs: Tensor) -> Tensor:
    tf = _tf()
    ends = tf.concat([offs[1:], tf.reshape(tf.cast(tf.strings.length(x), _dt.int64), [1])], 0)
    return tf.strings.substr(x, offs, ends - offs)


@ks.api("strings.unicode_split")
def unicode_split(input: Any, input_encoding: str, errors: str = "replace",
                  replacement_char: int = 65533, name: str | None = None) -> Tensor:
    """A scalar string split into its characters (each a string)."""
    with name_scope(name, "UnicodeSplit", [input]):
        x = convert_to_tensor(input, dtype=_STR)
        _scalar_only(x, "unicode_split")
        _, _, offs = apply_op("UnicodeDecodeWithOffsets", input=x,
                              input_encoding=input_encoding, errors=errors,
                              replacement_char=replacement_char)
        return _split_chars(x, offs)


@ks.api("strings.unicode_split_with_offsets")
def unicode_split_with_offsets(input: Any, input_encoding: str, errors: str = "replace",
                               replacement_char: int = 65533, name: str | None = None
                               ) -> tuple[Tensor, Tensor]:
    """``(characters, byte offset of each)`` of a scalar string."""
    with name_scope(name, "UnicodeSplitWithOffsets", [input]):
        x = convert_to_tensor(input, dtype=_STR)
        _scalar_only(x, "unicode_split_with_offsets")
        _, _, offs = apply_op("UnicodeDecodeWithOffsets", input=x,
                              input_encoding=input_encoding, errors=errors,
                              replacement_char=replacement_char)
        return _split_chars(x, offs), offs


@ks.api("strings.unicode_encode")
def unicode_encode(input: Any, output_encoding: str, errors: str = "replace",
                   replacement_char: int = 65533, name: str | None = None) -> Tensor:
    """Strings encoded from the code points along the last dimension of a dense int32
    tensor (rank 1 gives a scalar)."""
    tf = _tf()
    with name_scope(name, "UnicodeEncode", [input]):
        x = convert_to_tensor(input, dtype=_dt.int32)
        if x.shape.ndims is None or x.shape.ndims == 0:
            raise ValueError("Rank of input must be statically known and at least 1.")
        shape = tf.shape(x, out_type=_dt.int64)
        rows = tf.reduce_prod(shape[:-1])
        splits = tf.range(rows + 1, dtype=_dt.int64) * shape[-1]
        out = apply_op("UnicodeEncode", input_values=tf.reshape(x, [-1]), input_splits=splits,
                       output_encoding=output_encoding, errors=errors,
                       replacement_char=replacement_char)
        return tf.reshape(out, shape[:-1])


@ks.api("strings.bytes_split")
def bytes_split(input: Any, name: str | None = None) -> Tensor:
    """A scalar string split into one-byte strings."""
    tf = _tf()
    with name_scope(name, "StringsByteSplit", [input]):
        x = convert_to_tensor(input, dtype=_STR, name="input")
        _scalar_only(x, "bytes_split")
        pos = tf.range(tf.strings.length(x))
        return tf.strings.substr(x, pos, tf.ones_like(pos))


# ---------------------------------------------------------------------------------------
# UnicodeScript
# ---------------------------------------------------------------------------------------
ks.op(OpDef("UnicodeScript", inputs=["input: int32"], outputs=["output: int32"],
            shape_fn=lambda op: [op.inputs[0].shape],
            doc="The ICU script code (UScriptCode) of each code point; -1 if invalid."))
ks.not_differentiable("UnicodeScript")

_SCRIPT_STARTS = np.asarray(SCRIPT_RANGES[0::2], dtype=np.int64)
_SCRIPT_CODES = np.asarray(SCRIPT_RANGES[1::2], dtype=np.int32)


@ks.kernel("UnicodeScript", device_type="CPU")
def _unicode_script_kernel(ctx: Any) -> Callable[[Any], Any]:
    def unicode_script(x: Any) -> Any:
        cp = np.asarray(x, dtype=np.int64)
        valid = (cp >= 0) & (cp <= 0x10FFFF)
        pos = np.searchsorted(_SCRIPT_STARTS, np.where(valid, cp, 0), side="right") - 1
        # ICU fails (U_ILLEGAL_ARGUMENT_ERROR) outside the code space; TF gives -1 there
        return np.where(valid, _SCRIPT_CODES[pos], np.int32(-1)).astype(np.int32)

    return unicode_script


@ks.api("strings.unicode_script")
def unicode_script(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The Unicode script of each int32 code point as ICU's ``UScriptCode`` number
    (``tf.strings.unicode_script``): 0 Common, 1 Inherited, 25 Latin, 17 Han ...; 103
    (Unknown) for unassigned and private-use code points, -1 for values that are not
    code points (negative or above U+10FFFF)."""
    return apply_op("UnicodeScript", name=name, input=input)
