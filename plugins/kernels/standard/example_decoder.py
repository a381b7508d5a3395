"""The values of requested features of a batch of serialized ``tf.train.Example`` protos,
read straight from the protobuf wire format with vectorised numpy over the whole batch.

The records are joined into one byte array and decoded level by level for every record
at once: the ``Example.features`` field, the entries of the ``Features.feature`` map (a
walk in lockstep over the records, one step per entry), each entry's key and ``Feature``,
and the value lists of each kind: packed or unpacked floats gathered and viewed as
``<f4``, packed or unpacked int64 varints decoded together, the elements of bytes lists
(a lockstep walk again). Every entry is checked, requested or not, so a batch the decoder
accepts is one protobuf parses, to the same values.

Anything else -- unknown or repeated fields, a map entry not written key-then-value, a
key twice in one example, a value list split over several fields, malformed bytes --
makes :func:`decode_columns` return None, and the caller parses the batch with the
protobuf runtime (:func:`proto_columns`), which gives the protobuf semantics and errors.

Both give one :class:`Column` per requested ``(key, kind)``: per example the kind of
the feature (:data:`NONE` when absent or empty), the number of values of the requested
kind, and those values, flat in example order.
"""
from __future__ import annotations

from itertools import chain
from operator import attrgetter, methodcaller
from typing import Any, Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from flowrt.proto import feature_pb2

__all__ = ["NONE", "BYTES", "FLOAT", "INT64", "KIND_CODE", "Column", "decode_columns",
           "proto_columns"]

#: the kinds of a ``Feature`` (its oneof), as codes
NONE, BYTES, FLOAT, INT64 = 0, 1, 2, 3
#: the code of each oneof field name (None: no field set)
KIND_CODE = {None: NONE, "bytes_list": BYTES, "float_list": FLOAT, "int64_list": INT64}
_FIELD = {BYTES: "bytes_list", FLOAT: "float_list", INT64: "int64_list"}
#: a Feature's tag byte (field 1, 2 or 3, length-delimited) -> its kind
_TAG_KIND = np.zeros(256, dtype=np.int8)
_TAG_KIND[0x0A], _TAG_KIND[0x12], _TAG_KIND[0x1A] = BYTES, FLOAT, INT64
_EMPTY = feature_pb2.Feature()
_NP = {BYTES: object, FLOAT: np.float32, INT64: np.int64}
_I64 = np.int64
_PAD = b"\0" * 16           # a varint read near the end stays inside the array
_MAX_LEN = 1 << 31           # protobuf's limit on a length-delimited field
#: the low 0..8 bytes of a uint64
_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(9)], dtype=np.uint64)
_HIGH_BITS = np.uint64(0x8080808080808080)


class Column:
    """One requested feature over a batch: ``lens[i]`` values of the requested kind in
    example ``i``, all of them in ``values`` (float32/int64 array, or an object array of
    bytes), and the kind of each example's feature through :meth:`kinds_at`."""

    def __init__(self, lens: np.ndarray, values: np.ndarray, kinds: np.ndarray | None = None,
                 features: list[Any] | None = None) -> None:
        self.lens = lens
        self.values = values
        self._kinds = kinds
        self._features = features

    def kinds_at(self, idx: np.ndarray) -> np.ndarray:
        """The kind codes of the features of examples ``idx``."""
        if self._kinds is not None:
            return self._kinds[idx]
        return np.array([KIND_CODE[self._features[i].WhichOneof("kind")]
                         for i in np.asarray(idx).tolist()], dtype=np.int8)


# -- protobuf runtime path -----------------------------------------------------------
def _flat(vals: list[Any], total: int, kind: int) -> np.ndarray:
    it = chain.from_iterable(vals)
    if kind == BYTES:
        out = np.empty(total, dtype=object)
        out[:] = list(it)
        return out
    return np.fromiter(it, dtype=np.float32 if kind == FLOAT else _I64, count=total)


def proto_columns(maps: Sequence[Any], specs: Sequence[tuple[str, int]]) -> list[Column]:
    """The columns of ``specs`` (``(key, kind)`` pairs) over parsed ``Features.feature``
    maps (one per example)."""
    out = []
    for key, kind in specs:
        fs = list(map(methodcaller("get", key, _EMPTY), maps))
        vals = list(map(attrgetter(_FIELD[kind] + ".value"), fs))
        lens = np.fromiter(map(len, vals), dtype=_I64, count=len(vals))
        out.append(Column(lens, _flat(vals, int(lens.sum()), kind), features=fs))
    return out


# -- wire-format path -----------------------------------------------------------------
class _Unusual(Exception):
    """The batch holds something the fast decoder leaves to protobuf."""


def _check(ok: np.ndarray) -> None:
    if not ok.all():
        raise _Unusual


def _varint(a: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(value, size in bytes) of the varint at each position ``p`` of ``a``, a length:
    below 2**31 (a longer varint, a valid one with zero bytes on top too, is left to
    protobuf)."""
    b = a[p]
    more = np.flatnonzero(b & 0x80)
    if not len(more):
        return b.astype(_I64), 1
    val = (b & 0x7F).astype(_I64)
    size = np.ones(len(p), dtype=_I64)
    for k in range(1, 5):                  # a length below 2**31 takes at most 5 bytes
        b = a[p[more] + k]
        val[more] |= (b & 0x7F).astype(_I64) << (7 * k)
        size[more] += 1
        more = more[b >= 0x80]
        if not len(more):
            break
    if len(more):                          # still unfinished after 5 bytes
        raise _Unusual
    _check(val < _MAX_LEN)
    return val, size


def _field(a: np.ndarray, p: np.ndarray, end: np.ndarray, tag: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of the length-delimited field with tag byte ``tag`` at each ``p``,
    which must lie inside ``end``."""
    _check(p + 2 <= end)
    _check(a[p] == tag)
    n, size = _varint(a, p + 1)
    s = p + 1 + size
    e = s + n
    _check(e <= end)
    return s, e


def _at_every_byte(a: np.ndarray, dtype: str) -> np.ndarray:
    """``a`` read as ``dtype`` at every byte offset: element ``i`` is the value whose
    bytes start at ``a[i]`` (an unaligned strided view, no copy)."""
    size = np.dtype(dtype).itemsize
    return as_strided(a, (len(a) - size + 1, size), (1, 1)).view(dtype)[:, 0]


def _gather(a: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The bytes ``a[starts[i]:starts[i] + lens[i]]`` for each ``i``, concatenated: rows
    of a strided view when all have one length (a copy per row), else byte by byte."""
    if len(lens) and (lens == lens[0]).all() and int(starts.max()) + int(lens[0]) <= len(a):
        n = int(lens[0])
        return as_strided(a, (len(a) - n + 1, n), (1, 1))[starts].reshape(-1)
    return a[_ranges(starts, lens)]


def _ranges(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The indices ``starts[i] .. starts[i] + lens[i] - 1`` for each ``i``, concatenated."""
    total = int(lens.sum())
    if not total:
        return np.zeros(0, dtype=_I64)
    shift = np.repeat(starts - (np.cumsum(lens) - lens), lens)
    return np.arange(total, dtype=_I64) + shift


def _walk(a: np.ndarray, pos: np.ndarray, end: np.ndarray, tag: int
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fields that make up each range ``[pos[i], end[i])``, all with tag byte ``tag``
    (a repeated length-delimited field): (owner ``i``, start, end) of each, in order."""
    owner = np.arange(len(pos), dtype=_I64)
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    while True:
        live = pos < end
        if not live.all():
            owner, pos, end = owner[live], pos[live], end[live]
        if not len(pos):
            break
        s, e = _field(a, pos, end, tag)
        parts.append((owner, s, e))
        pos = e
    if not parts:
        z = np.zeros(0, dtype=_I64)
        return z, z, z
    if len(parts) == 1:
        return parts[0]
    # the k-th field of owner i goes after the owner's first k: by owner, then in order
    count = np.zeros(len(parts[0][0]) and int(parts[0][0][-1]) + 1, dtype=_I64)
    for k, (own, _, _) in enumerate(parts):
        count[own] += 1
    first = np.cumsum(count) - count
    own_all, s_all, e_all = (np.empty(int(count.sum()), dtype=_I64) for _ in range(3))
    for k, (own, s, e) in enumerate(parts):
        at = first[own] + k
        own_all[at], s_all[at], e_all[at] = own, s, e
    return own_all, s_all, e_all


def _floats(a: np.ndarray, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(count, flat values) of the FloatList bodies ``[s, e)``: one packed field, or
    unpacked fixed32 fields."""
    n = e - s
    body = n > 0
    first = np.where(body, a[s], 0x0A)
    packed = body & (first == 0x0A)
    unpacked = body & (first == 0x0D)
    _check(~body | packed | unpacked)
    base = s.copy()
    count = np.zeros(len(s), dtype=_I64)
    if packed.any():
        ps, pe = _field(a, s[packed], e[packed], 0x0A)
        _check(pe == e[packed])
        _check((pe - ps) % 4 == 0)
        base[packed], count[packed] = ps, (pe - ps) // 4
    if unpacked.any():
        un = n[unpacked]
        _check(un % 5 == 0)
        base[unpacked], count[unpacked] = s[unpacked] + 1, un // 5
        stride = np.where(unpacked, 5, 4)
        owner = np.repeat(np.arange(len(s), dtype=_I64), count)
        at = base[owner] + stride[owner] * _ranges(np.zeros(len(s), dtype=_I64), count)
        _check(a[at[unpacked[owner]] - 1] == 0x0D)            # each unpacked value's tag
        return count, _at_every_byte(a, "<f4")[at]
    return count, _gather(a, base, 4 * count).view("<f4")


def _int64s(a: np.ndarray, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(count, flat values) of the Int64List bodies ``[s, e)``: one packed field, or
    unpacked varint fields."""
    body = (e - s) > 0
    first = np.where(body, a[s], 0x0A)
    packed = body & (first == 0x0A)
    unpacked = body & (first == 0x08)
    _check(~body | packed | unpacked)
    ps, pe = s.copy(), e.copy()
    if packed.any():
        ps[packed], pe[packed] = _field(a, s[packed], e[packed], 0x0A)
        _check(pe[packed] == e[packed])
    plen = pe - ps
    b = _gather(a, ps, plen)
    last = b < 0x80
    off = np.cumsum(plen) - plen                              # each list's start in b
    nz = plen > 0
    _check(last[(off + plen - 1)[nz]])                        # no varint runs past its list
    ends = np.flatnonzero(last)
    starts = np.concatenate(([0], ends[:-1] + 1))
    if last.all():
        vals = b.astype(np.uint64)
    else:
        size = ends - starts + 1
        _check(size <= 10)
        low = (b & 0x7F).astype(np.uint64)
        vals = low[starts]
        for k in range(1, int(size.max())):
            more = np.flatnonzero(size > k)
            vals[more] |= low[starts[more] + k] << np.uint64(7 * k)
    cum = np.concatenate(([0], np.cumsum(last, dtype=_I64)))
    first_v = cum[off]
    count = cum[off + plen] - first_v
    if unpacked.any():
        owner = np.repeat(np.arange(len(s), dtype=_I64), count)
        local = np.arange(len(vals), dtype=_I64) - first_v[owner]
        un = unpacked[owner]
        _check(count[unpacked] % 2 == 0)
        _check(vals[un & (local % 2 == 0)] == 8)             # tag: field 1, varint
        vals = vals[~un | (local % 2 == 1)]
        count = np.where(unpacked, count // 2, count)
    return count, vals.view(_I64)


def _bytes(a: np.ndarray, s: np.ndarray, e: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(count, element starts, element ends) of the BytesList bodies ``[s, e)``."""
    owner, es, ee = _walk(a, s, e, 0x0A)
    return np.bincount(owner, minlength=len(s)).astype(_I64), es, ee


def _keys_valid(buf: bytes, a: np.ndarray, ks: np.ndarray, ke: np.ndarray,
                prefix: np.ndarray) -> None:
    """Every map key is UTF-8 (protobuf checks string fields): ASCII, else decoded."""
    if not (prefix & _HIGH_BITS).any():
        long = np.flatnonzero(ke - ks > 8)
        if not len(long) or not (a[_ranges(ks[long] + 8, ke[long] - ks[long] - 8)]
                                 & 0x80).any():
            return
    for s, e in zip(ks.tolist(), ke.tolist()):
        try:
            buf[s:e].decode("utf-8")
        except UnicodeDecodeError:
            raise _Unusual from None


def _decode(records: list[bytes], specs: Sequence[tuple[str, int]]) -> list[Column]:
    """:func:`decode_columns`, raising :class:`_Unusual`; see the module docstring for the
    levels."""
    nrec = len(records)
    buf = b"".join(records + [_PAD])
    a = np.frombuffer(buf, dtype=np.uint8)
    rlen = np.fromiter(map(len, records), dtype=_I64, count=nrec)
    rend = np.cumsum(rlen)
    rstart = rend - rlen
    full = np.flatnonzero(rlen)
    # Example: one `features` field spanning the record
    fs, fe = _field(a, rstart[full], rend[full], 0x0A)
    _check(fe == rend[full])
    # Features: map entries; each entry a key then a value spanning it
    owner, es, ee = _walk(a, fs, fe, 0x0A)
    erec = full[owner]
    ks, ke = _field(a, es, ee, 0x0A)
    vs, ve = _field(a, ke, ee, 0x12)
    _check(ve == ee)
    # each key's first 8 bytes as a little-endian number (the rest checked on a match)
    prefix = _at_every_byte(a, "<u8")[ks] & _MASKS[np.minimum(ke - ks, 8)]
    _keys_valid(buf, a, ks, ke, prefix)
    # Feature: empty, or one list field spanning it
    kind = np.zeros(len(es), dtype=np.int8)
    ls, le = vs.copy(), ve.copy()
    if (ve > vs).all():
        kind = _TAG_KIND[a[vs]]
        _check(kind != NONE)
        ls, le = _field(a, vs, ve, a[vs])
        _check(le == ve)
    else:
        has = np.flatnonzero(ve > vs)
        kind[has] = _TAG_KIND[a[vs[has]]]
        _check(kind[has] != NONE)
        ls[has], le[has] = _field(a, vs[has], ve[has], a[vs[has]])
        _check(le[has] == ve[has])
    # every list of every kind, decoded: count and offset of each entry's values
    count = np.zeros(len(es), dtype=_I64)
    first = np.zeros(len(es), dtype=_I64)
    flat: dict[int, Any] = {}
    for k, dec in ((FLOAT, _floats), (INT64, _int64s), (BYTES, _bytes)):
        sel = np.flatnonzero(kind == k)
        if not len(sel):
            continue
        got = dec(a, ls[sel], le[sel])
        count[sel] = got[0]
        first[sel] = np.cumsum(got[0]) - got[0]
        flat[k] = (*got[1:], len(sel))
    return [_column(buf, a, key, want, erec, ks, ke, prefix, kind, count, first, flat, nrec)
            for key, want in specs]


def _column(buf: bytes, a: np.ndarray, key: str, want: int, erec: np.ndarray,
            ks: np.ndarray, ke: np.ndarray, prefix: np.ndarray, kind: np.ndarray,
            count: np.ndarray, first: np.ndarray, flat: dict[int, Any], nrec: int
            ) -> Column:
    """The column of ``key`` (values of kind ``want``) from the decoded entries."""
    kb = key.encode("utf-8")
    head = int.from_bytes(kb[:8], "little")
    cand = np.flatnonzero((prefix == head) & (ke - ks == len(kb)))
    if len(kb) > 8 and len(cand):
        tail = np.frombuffer(kb, dtype=np.uint8)[8:]
        cand = cand[(a[ks[cand][:, None] + 8 + np.arange(len(tail))] == tail).all(axis=1)]
    recs = erec[cand]
    _check(np.diff(recs) > 0)                                 # a key once per example
    kinds = np.zeros(nrec, dtype=np.int8)
    kinds[recs] = kind[cand]
    mine = cand[kind[cand] == want]
    lens = np.zeros(nrec, dtype=_I64)
    lens[erec[mine]] = count[mine]
    if want not in flat:
        return Column(lens, np.zeros(0, dtype=_NP[want]), kinds)
    whole = len(mine) == flat[want][-1]                      # every list of the kind
    idx = None if whole else _ranges(first[mine], count[mine])
    if want != BYTES:
        return Column(lens, flat[want][0] if whole else flat[want][0][idx], kinds)
    es, ee = flat[BYTES][0], flat[BYTES][1]
    if not whole:
        es, ee = es[idx], ee[idx]
    return Column(lens, _byte_strings(buf, a, es, ee), kinds)


def _byte_strings(buf: bytes, a: np.ndarray, es: np.ndarray, ee: np.ndarray
                  ) -> np.ndarray:
    """An object array of the byte strings ``buf[es[i]:ee[i]]``: through a fixed-width
    ``S`` array where that is exact (no string ends in a NUL byte, which ``S`` drops) and
    small, else sliced one by one."""
    n = ee - es
    width = int(n.max()) if len(n) else 0
    if 0 < width * len(n) <= 4 * int(n.sum()) + 4096 and not (a[ee[n > 0] - 1] == 0).any():
        if int(es.max()) + width <= len(a):
            grid = as_strided(a, (len(a) - width + 1, width), (1, 1))[es]
        else:
            grid = a[np.minimum(es[:, None] + np.arange(width), len(a) - 1)]
        if (n != width).any():
            grid[np.arange(width) >= n[:, None]] = 0
        return grid.view(f"S{width}").reshape(-1).astype(object)
    out = np.empty(len(n), dtype=object)
    out[:] = [buf[s:e] for s, e in zip(es.tolist(), ee.tolist())]
    return out


def decode_columns(records: Sequence[Any], specs: Sequence[tuple[str, int]]
                   ) -> list[Column] | None:
    """The columns of ``specs`` (``(key, kind)`` pairs, kinds :data:`BYTES`,
    :data:`FLOAT`, :data:`INT64`) over the serialized Examples ``records``, decoded from
    the wire format; None when the batch holds anything but plain Examples (the caller
    then parses it with protobuf: see the module docstring)."""
    records = list(records)
    if not set(map(type, records)) <= {bytes}:
        return None
    try:
        return _decode(records, specs)
    except _Unusual:
        return None
