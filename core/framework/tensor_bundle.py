"""TensorFlow's checkpoint files, read and written byte for byte as TensorFlow does.

A V2 checkpoint ("tensor bundle") with prefix ``P`` is ``P.index`` plus the data files
``P.data-KKKKK-of-NNNNN``:

- the index is a LevelDB-style sorted string table (TF's ``table_builder.cc``): data
  blocks of prefix-compressed keys with restart points, each followed by a 5-byte
  trailer (compression type, masked CRC-32C of the block and the type byte); an empty
  metaindex block; the index block (one key per data block, restart interval 1); a
  48-byte footer (the two block handles as varints, zero padding, the magic number).
  Its rows are the empty key holding a ``BundleHeaderProto`` (shard count, endianness,
  version) and one ``BundleEntryProto`` per tensor (dtype, shape, shard, offset, size,
  masked CRC-32C of its bytes; ``slices`` for a tensor saved as slices, whose pieces
  are rows keyed by :func:`slice_key`);
- a data file holds the tensors back to back in the order they were added, without
  padding: raw little-endian element bytes, or for strings the varint64 lengths, a
  masked CRC-32C of the lengths (as uint32s) and then the bytes.

A V1 checkpoint is one such table (no data files) whose empty key holds a
``SavedTensorSlices`` with the metadata (names, shapes, dtypes, slices) and whose other
rows each hold one slice's values in a ``TensorProto``.

This module knows the layout only; atomic saves, recovery and the reader API are in
``flowrt.training.checkpoint``.
"""
from __future__ import annotations

import struct
from typing import Any, BinaryIO, Iterable, Sequence

import google_crc32c
import numpy as np

from ..base import dtypes as _dt
from ..base import errors
from ..base import tensor_codec
from ..proto import tensor_bundle_pb2 as _pb

__all__ = [
    "TABLE_MAGIC", "crc32c", "mask_crc", "unmask_crc", "build_table", "read_table",
    "is_table", "slice_key", "BundleWriter", "encode_index", "parse_index",
    "read_tensor", "tensor_crc", "read_v1", "write_v1", "parse_slice_spec",
]

#: The last 8 bytes of every table (little-endian).
TABLE_MAGIC = 0xdb4775248b80fb57
_FOOTER_SIZE = 48
_BLOCK_SIZE = 262144  # TF's table::Options defaults
_RESTART_INTERVAL = 16
_MASK_DELTA = 0xa282ead8
_U32 = struct.Struct("<I")
#: The version a bundle's header carries (kTensorBundleVersion, min consumer 0).
BUNDLE_VERSION = 1
_UNSAVEABLE = (_dt.resource, _dt.variant)

Extent = tuple[int, "int | None"]  # (start, length); None: the whole dimension


# -- checksums -----------------------------------------------------------------------------
def crc32c(data: bytes, crc: int = 0) -> int:
    """The CRC-32C (Castagnoli) of ``data``, extending ``crc``."""
    return google_crc32c.extend(crc, data) if crc else google_crc32c.value(data)


def mask_crc(crc: int) -> int:
    """TF's ``crc32c::Mask``: the form stored in files."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def unmask_crc(masked: int) -> int:
    """TF's ``crc32c::Unmask``."""
    rot = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


# -- varints ------------------------------------------------------------------------------
def _put_varint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _varint(buf: Any, pos: int) -> tuple[int, int]:
    out, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


# -- the table ----------------------------------------------------------------------------
class _Block:
    """TF's BlockBuilder: prefix-compressed entries with a restart point every
    ``interval`` entries."""

    def __init__(self, interval: int):
        self.interval = interval
        self.buf = bytearray()
        self.restarts = [0]
        self.counter = 0
        self.last = b""

    def add(self, key: bytes, value: bytes) -> None:
        shared = 0
        if self.counter < self.interval:
            n = min(len(key), len(self.last))
            while shared < n and key[shared] == self.last[shared]:
                shared += 1
        else:
            self.restarts.append(len(self.buf))
            self.counter = 0
        _put_varint(self.buf, shared)
        _put_varint(self.buf, len(key) - shared)
        _put_varint(self.buf, len(value))
        self.buf += key[shared:]
        self.buf += value
        self.last = key
        self.counter += 1

    def size_estimate(self) -> int:
        return len(self.buf) + 4 * len(self.restarts) + 4

    def finish(self) -> bytes:
        return bytes(self.buf) + b"".join(_U32.pack(r) for r in self.restarts) + \
            _U32.pack(len(self.restarts))

    def empty(self) -> bool:
        return not self.buf


def _separator(start: bytes, limit: bytes) -> bytes:
    """TF's FindShortestSeparator (table_builder.cc)."""
    n = min(len(start), len(limit))
    i = 0
    while i < n and start[i] == limit[i]:
        i += 1
    if i < n and start[i] < 0xFF and start[i] + 1 < limit[i]:
        return start[:i] + bytes([start[i] + 1])
    return start


def _successor(key: bytes) -> bytes:
    """TF's FindShortSuccessor."""
    for i, b in enumerate(key):
        if b != 0xFF:
            return key[:i] + bytes([b + 1])
    return key


def build_table(rows: Iterable[tuple[bytes, bytes]]) -> bytes:
    """The bytes of an uncompressed table holding ``rows`` (keys strictly increasing),
    exactly as TF's ``TableBuilder`` with default options and no compression writes it.

    :raises ValueError: keys not strictly increasing
    """
    out = bytearray()
    data = _Block(_RESTART_INTERVAL)
    index = _Block(1)
    pending: bytes | None = None  # handle of the last flushed data block
    last: bytes | None = None

    def write_block(block: _Block) -> bytes:
        raw = block.finish()
        handle = bytearray()
        _put_varint(handle, len(out))
        _put_varint(handle, len(raw))
        out.extend(raw)
        out.append(0)
        out.extend(_U32.pack(mask_crc(crc32c(b"\x00", crc32c(raw)))))
        return bytes(handle)

    for key, value in rows:
        if last is not None:
            if key <= last:
                raise ValueError(f"table keys out of order: {key!r} after {last!r}")
            if len(key) + len(value) >= 2 * _BLOCK_SIZE and not data.empty():
                pending = write_block(data)
                data = _Block(_RESTART_INTERVAL)
        if pending is not None:
            index.add(_separator(last or b"", key), pending)
            pending = None
        last = key
        data.add(key, value)
        if data.size_estimate() >= _BLOCK_SIZE:
            pending = write_block(data)
            data = _Block(_RESTART_INTERVAL)
    if not data.empty():
        pending = write_block(data)
    meta = write_block(_Block(_RESTART_INTERVAL))
    if pending is not None:
        index.add(_successor(last or b""), pending)
    footer = bytearray(meta + write_block(index))
    footer += bytes(40 - len(footer))
    footer += struct.pack("<Q", TABLE_MAGIC)
    return bytes(out + footer)


def is_table(data: bytes) -> bool:
    """Whether ``data`` ends with a table's footer magic."""
    return len(data) >= _FOOTER_SIZE and \
        struct.unpack_from("<Q", data, len(data) - 8)[0] == TABLE_MAGIC


def _read_block(data: bytes, handle: bytes, path: str) -> list[tuple[bytes, bytes]]:
    """The rows of the block at ``handle`` (varint offset and size) of the table ``data``,
    after checking its trailer's checksum.

    :raises DataLossError: a checksum mismatch (naming ``path``)
    :raises ValueError: a block or entry out of bounds
    """
    off, p = _varint(handle, 0)
    size, _ = _varint(handle, p)
    if off + size + 5 > len(data):
        raise ValueError(f"block at {off} of {size} bytes runs past the end")
    raw = data[off:off + size]
    kind = data[off + size]
    (stored,) = _U32.unpack_from(data, off + size + 1)
    if mask_crc(crc32c(bytes([kind]), crc32c(raw))) != stored:
        raise errors.DataLossError(None, None, f"Checkpoint index file {path} is corrupted:"
                                   f" block checksum mismatch at offset {off}")
    if kind != 0:
        raise errors.UnimplementedError(None, None, f"{path}: compressed table blocks "
                                        f"(type {kind}) are not supported")
    (nrestarts,) = _U32.unpack_from(raw, len(raw) - 4)
    end = len(raw) - 4 - 4 * nrestarts
    if end < 0:
        raise ValueError("bad restart count")
    pos, key, out = 0, b"", []
    while pos < end:
        shared, pos = _varint(raw, pos)
        unshared, pos = _varint(raw, pos)
        vlen, pos = _varint(raw, pos)
        if shared > len(key) or pos + unshared + vlen > end:
            raise ValueError("bad block entry")
        key = key[:shared] + raw[pos:pos + unshared]
        pos += unshared
        out.append((key, raw[pos:pos + vlen]))
        pos += vlen
    return out


def read_table(data: bytes, path: str) -> dict[bytes, bytes]:
    """All rows of the table ``data`` (read from ``path``), every block's checksum
    verified.

    :raises DataLossError: truncated, corrupted, or not a table (naming ``path``)
    """
    if not is_table(data):
        raise errors.DataLossError(None, None, f"Checkpoint index file {path} is truncated "
                                   "or corrupted: no table footer (bad magic number)")
    try:
        footer = data[len(data) - _FOOTER_SIZE:]
        _, p = _varint(footer, 0)
        _, p = _varint(footer, p)
        _read_block(data, footer[:p], path)  # the (empty) metaindex: checked only
        _, q = _varint(footer, p)
        _, q = _varint(footer, q)
        if any(footer[q:40]):  # zero padding (stricter than TF, which writes it so)
            raise ValueError("bad footer")
        rows: dict[bytes, bytes] = {}
        for _, handle in _read_block(data, footer[p:q], path):
            rows.update(_read_block(data, handle, path))
        return rows
    except (IndexError, ValueError, struct.error) as e:
        raise errors.DataLossError(None, None, f"Checkpoint index file {path} is "
                                   f"corrupted: {e}") from None


# -- slices -------------------------------------------------------------------------------
def parse_slice_spec(spec: str, name: str = "") -> tuple[list[int], list[Extent]]:
    """TF's ``shape_and_slice`` (``"d0 d1 s0:s1"``, each ``s`` ``start,length`` or
    ``-``) as the full shape and the extents, ``-`` kept as a None length.

    :raises InvalidArgumentError: a malformed spec or an extent outside the shape
    """
    def bad(why: str) -> errors.InvalidArgumentError:
        return errors.InvalidArgumentError(None, None, f"{why} in shape_and_slice "
                                           f"specification '{spec}'"
                                           + (f" of tensor '{name}'" if name else ""))

    parts = spec.split(" ")
    if len(parts) < 2:
        raise bad("Need least two elements")
    try:
        full = [int(d) for d in parts[:-1]]
    except ValueError:
        raise bad("Non numerical dimension") from None
    dims = parts[-1].split(":")
    if len(dims) != len(full):
        raise bad(f"Slice of rank {len(dims)} for a shape of rank {len(full)}")
    out: list[Extent] = []
    for d, (size, ext) in enumerate(zip(full, dims)):
        if ext == "-":
            out.append((0, None))
            continue
        try:
            start, length = (int(x) for x in ext.split(","))
        except ValueError:
            raise bad(f"Malformed extent '{ext}'") from None
        if size < 0 or start < 0 or length < 0 or start + length > size:
            raise bad(f"Extent {start},{length} of dimension {d} outside size {size}")
        out.append((start, length))
    return full, out


def _ordered_num(v: int) -> bytes:
    body = v.to_bytes((v.bit_length() + 7) // 8, "big") if v else b""
    return bytes([len(body)]) + body


def _ordered_signed(v: int) -> bytes:
    x = ~v if v < 0 else v
    if x < 64:
        return bytes([(0x80 ^ v) & 0xFF])
    n = min(x.bit_length() // 7 + 1, 10)
    buf = bytearray((b"\xff\xff" if v < 0 else b"\x00\x00")
                    + (v & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big"))[10 - n:]
    buf[0] ^= [0, 0x80, 0xc0, 0xe0, 0xf0, 0xf8, 0xfc, 0xfe, 0xff, 0xff, 0xff][n]
    buf[1] ^= {9: 0x80, 10: 0xc0}.get(n, 0)
    return bytes(buf)


def slice_key(name: str, extents: Sequence[Extent]) -> bytes:
    """TF's ``checkpoint::EncodeTensorNameSlice``: the row key of a slice's data (a
    whole dimension is encoded with length -1)."""
    enc = b"".join(b"\x00\xff" if c == 0 else b"\xff\x00" if c == 255 else bytes([c])
                   for c in name.encode())
    out = _ordered_num(0) + enc + b"\x00\x01" + _ordered_num(len(extents))
    return out + b"".join(_ordered_signed(s) + _ordered_signed(-1 if n is None else n)
                          for s, n in extents)


def _slice_proto(extents: Sequence[Extent], proto: Any) -> None:
    for s, n in extents:
        e = proto.extent.add()
        if n is not None:
            e.start = int(s)
            e.length = int(n)


def _extents_of(proto: Any, rank: int) -> list[Extent]:
    out: list[Extent] = [(int(e.start), int(e.length) if e.HasField("length") else None)
                         for e in proto.extent]
    return out + [(0, None)] * (rank - len(out))


# -- tensor data --------------------------------------------------------------------------
def _le(dtype: _dt.DType) -> np.dtype:
    if dtype is _dt.bfloat16 and not dtype.is_numpy_compatible:
        return np.dtype("<u2")  # its bits (no bfloat16 numpy type without ml_dtypes)
    npd = np.dtype(dtype.np)
    return npd if npd.itemsize == 1 else npd.newbyteorder("<")


def _string_bytes(flat: Any, name: str) -> list[bytes]:
    out = []
    for x in flat:
        if isinstance(x, (bytes, np.bytes_)):
            out.append(bytes(x))
        elif isinstance(x, str):
            out.append(x.encode())
        else:
            raise errors.InvalidArgumentError(None, None, f"string tensor '{name}' holds a "
                                              f"{type(x).__name__}, not bytes")
    return out


def encode_tensor(value: Any, dtype: _dt.DType, name: str) -> tuple[list[Any], int]:
    """A tensor's bytes in a data file (as pieces to write) and their masked CRC-32C."""
    if dtype is _dt.string:
        items = _string_bytes(np.asarray(value, dtype=object).reshape(-1), name)
        lens = np.fromiter((len(b) for b in items), dtype=np.uint64, count=len(items))
        head = bytearray()
        for n in lens.tolist():
            _put_varint(head, n)
        if len(lens) and int(lens.max()) > 0xFFFFFFFF:
            crc = 0
            for n in lens.tolist():
                crc = crc32c(struct.pack("<I" if n <= 0xFFFFFFFF else "<Q", n), crc)
        else:
            crc = crc32c(lens.astype("<u4").tobytes()) if len(lens) else 0
        check = _U32.pack(mask_crc(crc))
        crc = crc32c(check, crc)
        body = b"".join(items)
        crc = crc32c(body, crc) if body else crc
        return [bytes(head), check, body], mask_crc(crc)
    arr = np.ascontiguousarray(value, dtype=_le(dtype)).reshape(-1).view(np.uint8)
    view = arr.view()
    view.flags.writeable = False  # google_crc32c takes read-only buffers (no copy)
    return [view], mask_crc(crc32c(view))


def tensor_crc(raw: bytes) -> int:
    """The masked CRC-32C of a stored tensor's bytes (any dtype)."""
    return mask_crc(crc32c(raw))


def _decode_strings(raw: bytes, count: int, name: str, path: str, stored_crc: int
                    ) -> np.ndarray:
    """The elements of a stored string tensor; checks the lengths' checksum and the
    entry's (over the lengths as integers, that checksum and the bytes)."""
    def loss(why: str) -> errors.DataLossError:
        return errors.DataLossError(None, None, f"Checkpoint data file {path} is "
                                    f"corrupted: string tensor '{name}' {why}")

    lens = []
    pos = 0
    try:
        for _ in range(count):
            n, pos = _varint(raw, pos)
            lens.append(n)
        (stored,) = _U32.unpack_from(raw, pos)
    except (IndexError, ValueError, struct.error):
        raise loss("has truncated lengths") from None
    crc = 0
    for n in lens:
        crc = crc32c(struct.pack("<I" if n <= 0xFFFFFFFF else "<Q", n), crc)
    if unmask_crc(stored) != crc:
        raise loss("fails its length checksum")
    total = crc32c(raw[pos:], crc)
    if mask_crc(total) != stored_crc:
        raise loss(f"fails its checksum (stored {stored_crc:#010x}, computed "
                   f"{mask_crc(total):#010x})")
    pos += 4
    out = np.empty(count, dtype=object)
    for i, n in enumerate(lens):
        if pos + n > len(raw):
            raise loss("has an element running past its end")
        out[i] = raw[pos:pos + n]
        pos += n
    if pos != len(raw):
        raise loss(f"has {len(raw) - pos} trailing bytes")
    return out


def read_tensor(f: BinaryIO, entry: Any, path: str, name: str) -> np.ndarray:
    """Read and verify the tensor of ``entry`` (a ``BundleEntryProto``) from the open
    data file ``f`` (at ``path``).

    :returns: a new writable array in native byte order (strings: object array of bytes)
    :raises DataLossError: truncated data, a size not fitting the shape, a bad checksum
    """
    dtype = _dt.as_dtype(int(entry.dtype))
    shape = tuple(int(d.size) for d in entry.shape.dim)
    count = int(np.prod(shape, dtype=np.int64))
    size = int(entry.size)
    if dtype is _dt.bfloat16 and not dtype.is_numpy_compatible:
        raise errors.UnimplementedError(None, None, f"{path}: tensor '{name}' is bfloat16, "
                                        "which needs the ml_dtypes package to be read")
    if dtype is not _dt.string and count * np.dtype(dtype.np).itemsize != size:
        raise errors.DataLossError(None, None, f"Checkpoint data file {path}: invalid size "
                                   f"{size} in the bundle entry of tensor '{name}' (shape "
                                   f"{list(shape)}, type {dtype.name})")
    f.seek(int(entry.offset))
    if dtype is _dt.string:
        raw: Any = f.read(size)
    else:
        raw = np.empty(size, dtype=np.uint8)  # read in place: no copies
        got = f.readinto(memoryview(raw))
        raw = raw[:got or 0]
        raw.flags.writeable = False  # google_crc32c takes read-only buffers
    if len(raw) != size:
        raise errors.DataLossError(None, None, f"Checkpoint data file {path} is truncated: "
                                   f"tensor '{name}' needs {size} bytes at offset "
                                   f"{entry.offset}, {len(raw)} could be read")
    if dtype is _dt.string:
        return _decode_strings(raw, count, name, path, entry.crc32c).reshape(shape)
    if size and tensor_crc(raw) != entry.crc32c:
        raise errors.DataLossError(None, None, f"Checkpoint data file {path} is corrupted: "
                                   f"checksum of tensor '{name}' does not match (stored "
                                   f"{entry.crc32c:#010x}, computed {tensor_crc(raw):#010x})")
    raw.flags.writeable = True  # it owns its memory: hand it out as the result
    arr = raw.view(_le(dtype)).reshape(shape)
    return arr.astype(dtype.np) if arr.dtype != np.dtype(dtype.np) else arr


# -- V2 bundles ---------------------------------------------------------------------------
class BundleWriter:
    """Writes tensors to one data file as TF's BundleWriter does (in the order added)
    and collects their entries; :func:`encode_index` then gives the index.

    :param f: the data file, open for writing (positioned at 0)
    """

    def __init__(self, f: BinaryIO):
        self.f = f
        self.size = 0
        self.entries: dict[str, Any] = {}

    def add(self, key: str, value: Any, dtype: _dt.DType) -> None:
        """Append a whole tensor under ``key``.

        :raises InvalidArgumentError: a duplicate key or an unsaveable dtype
        """
        dtype = dtype.base_dtype
        if key in self.entries:
            raise errors.InvalidArgumentError(None, None, f"Adding duplicate key: {key}")
        if dtype in _UNSAVEABLE or not (dtype.is_numpy_compatible or dtype is _dt.bfloat16):
            raise errors.InvalidArgumentError(None, None, f"Cannot save tensor '{key}' of "
                                              f"type {dtype.name}")
        e = _pb.BundleEntryProto(dtype=dtype.as_datatype_enum, offset=self.size)
        e.shape.SetInParent()
        for d in np.shape(value):
            e.shape.dim.add(size=int(d))
        pieces, crc = encode_tensor(value, dtype, key)
        for p in pieces:
            if len(p):
                self.f.write(p)
        e.size = sum(len(p) for p in pieces)
        e.crc32c = crc
        self.size += e.size
        self.entries[key] = e

    def add_slice(self, key: str, full_shape: Sequence[int], extents: Sequence[Extent],
                  value: Any, dtype: _dt.DType) -> None:
        """Append a slice of the tensor ``key`` (TF's ``AddSlice``); a slice covering
        the whole tensor is added as the tensor itself."""
        full = [int(d) for d in full_shape]
        if all(n is None or (s == 0 and n == d) for (s, n), d in zip(extents, full)):
            self.add(key, value, dtype)
            return
        e = self.entries.get(key)
        if e is None:
            e = self.entries[key] = _pb.BundleEntryProto()
        elif not e.slices or int(e.dtype) != dtype.base_dtype.as_datatype_enum or \
                [d.size for d in e.shape.dim] != full:
            raise errors.InvalidArgumentError(None, None, f"Slices of tensor '{key}' "
                                              "disagree on its dtype or full shape, or it "
                                              "is also saved whole")
        e.dtype = dtype.base_dtype.as_datatype_enum
        del e.shape.dim[:]
        e.shape.SetInParent()
        for d in full:
            e.shape.dim.add(size=d)
        _slice_proto(extents, e.slices.add())
        self.add(slice_key(key, extents).decode("latin-1"), value, dtype)


def _row_key(name: str) -> bytes:
    return name.encode("latin-1") if name.startswith("\x00") else name.encode()


def encode_index(entries: dict[str, Any], num_shards: int = 1,
                 version: Any = None) -> bytes:
    """The ``.index`` table of a bundle: its header and ``entries`` (name -> entry,
    slice data rows under their latin-1-decoded :func:`slice_key`)."""
    header = _pb.BundleHeaderProto(num_shards=num_shards)
    if version is not None:
        header.version.CopyFrom(version)
    else:
        header.version.producer = BUNDLE_VERSION
    rows = [(_row_key(k), e.SerializeToString(deterministic=True))
            for k, e in entries.items()]
    rows.sort()
    return build_table([(b"", header.SerializeToString(deterministic=True))] + rows)


def parse_index(data: bytes, path: str) -> tuple[Any, dict[str, Any]]:
    """The header and entries of a bundle's index (slice data rows under
    latin-1-decoded keys).

    :raises DataLossError: a corrupted table, header or entry (naming ``path``)
    :raises UnimplementedError: a big-endian bundle
    """
    rows = read_table(data, path)
    if b"" not in rows:
        raise errors.DataLossError(None, None, f"Checkpoint index file {path} is corrupted:"
                                   " it has no header entry")
    header = _pb.BundleHeaderProto()
    entries: dict[str, Any] = {}
    try:
        header.ParseFromString(rows.pop(b""))
        for k, v in rows.items():
            e = _pb.BundleEntryProto()
            e.ParseFromString(v)
            entries[k.decode("latin-1") if k.startswith(b"\x00") else k.decode()] = e
    except Exception as e:  # DecodeError, UnicodeDecodeError
        raise errors.DataLossError(None, None, f"Checkpoint index file {path} is corrupted:"
                                   f" an entry cannot be parsed ({e})") from None
    if header.endianness != 0:
        raise errors.UnimplementedError(None, None, f"{path}: big-endian checkpoints are "
                                        "not supported")
    if header.version.producer > BUNDLE_VERSION or header.num_shards < 1:
        raise errors.DataLossError(None, None, f"Checkpoint index file {path} has an "
                                   f"unsupported header: {header}")
    return header, entries


def sliced_pieces(name: str, entry: Any, entries: dict[str, Any], path: str
                  ) -> list[tuple[Any, list[tuple[int, int]]]]:
    """The data entries of a tensor saved as slices, each with its explicit extents.

    :raises DataLossError: a slice without its data row
    """
    full = [int(d.size) for d in entry.shape.dim]
    out = []
    for sl in entry.slices:
        ext = _extents_of(sl, len(full))
        piece = entries.get(slice_key(name, ext).decode("latin-1"))
        if piece is None:
            raise errors.DataLossError(None, None, f"Checkpoint index file {path} lacks a "
                                       f"slice of tensor '{name}'")
        out.append((piece, [(s, d if n is None else n) for (s, n), d in zip(ext, full)]))
    return out


# -- V1 checkpoints -----------------------------------------------------------------------
def read_v1(paths: Sequence[str]) -> dict[str, tuple[_dt.DType, list[int],
                                                     list[tuple[list[tuple[int, int]],
                                                                Any]]]]:
    """The tensors of a V1 checkpoint (its files: one, or the shards of a sharded
    save): name -> (dtype, full shape, [(extents, decode() -> array)]).

    :raises DataLossError: a corrupted table or row (naming the file)
    """
    out: dict[str, Any] = {}
    for path in paths:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise errors.NotFoundError(None, None, f"cannot read checkpoint {path}: "
                                       f"{e.strerror}") from None
        rows = read_table(data, path)
        meta = _pb.SavedTensorSlices()
        try:
            meta.ParseFromString(rows.get(b"", b""))
        except Exception:
            raise errors.DataLossError(None, None, f"Checkpoint file {path} is corrupted: "
                                       "bad metadata") from None
        for t in meta.meta.tensor:
            full = [int(d.size) for d in t.shape.dim]
            dtype = _dt.as_dtype(int(t.type))
            _, _, pieces = out.setdefault(t.name, (dtype, full, []))
            for sl in t.slice:
                ext = _extents_of(sl, len(full))
                row = rows.get(slice_key(t.name, ext))
                if row is None:
                    raise errors.DataLossError(None, None, f"Checkpoint file {path} lacks "
                                               f"a slice of tensor '{t.name}'")
                want = [(s, d if n is None else n) for (s, n), d in zip(ext, full)]
                pieces.append((want, _v1_decoder(row, dtype, want, path, t.name)))
    return out


def _v1_decoder(row: bytes, dtype: _dt.DType, extents: list[tuple[int, int]], path: str,
                name: str) -> Any:
    def decode() -> np.ndarray:
        msg = _pb.SavedTensorSlices()
        try:
            msg.ParseFromString(row)
            proto = msg.data.data
            proto.dtype = dtype.as_datatype_enum
            del proto.tensor_shape.dim[:]
            for _, n in extents:
                proto.tensor_shape.dim.add(size=n)
            arr = tensor_codec.make_ndarray(proto)
        except errors.OpError:
            raise
        except Exception as e:
            raise errors.DataLossError(None, None, f"Checkpoint file {path} is corrupted: "
                                       f"tensor '{name}' cannot be decoded ({e})") from None
        return np.array(arr, dtype=object if dtype is _dt.string else dtype.np)
    return decode


def write_v1(f: BinaryIO, names: Sequence[str], values: Sequence[Any],
             dtypes: Sequence[_dt.DType], specs: Sequence[str]) -> None:
    """Write a V1 checkpoint (TF's ``SaveSlices``) of the tensors (slices) to ``f``."""
    metas: dict[str, Any] = {}
    rows = []
    for name, value, dtype, spec in zip(names, values, dtypes, specs):
        dtype = dtype.base_dtype
        if spec:
            full, ext = parse_slice_spec(spec, name)
        else:
            full, ext = list(np.shape(value)), [(0, None)] * np.ndim(value)
        m = metas.get(name)
        if m is None:
            m = metas[name] = _pb.SavedSliceMeta(name=name, type=dtype.as_datatype_enum)
            m.shape.SetInParent()
            for d in full:
                m.shape.dim.add(size=int(d))
        _slice_proto(ext, m.slice.add())
        msg = _pb.SavedTensorSlices()
        msg.data.name = name
        _slice_proto(ext, msg.data.slice)
        msg.data.slice.SetInParent()
        proto = tensor_codec.make_tensor_proto(np.asarray(value, dtype=object if dtype is
                                                          _dt.string else dtype.np), dtype)
        _typed_values(proto, msg.data.data)
        rows.append((slice_key(name, ext), msg.SerializeToString(deterministic=True)))
    meta = _pb.SavedTensorSlices()
    meta.meta.tensor.extend(metas[n] for n in sorted(metas))
    meta.meta.versions.producer = 1  # TF's checkpoint format version (kTensorSliceVersion)
    f.write(build_table([(b"", meta.SerializeToString(deterministic=True))]
                        + sorted(rows)))


def _typed_values(src: Any, dst: Any) -> None:
    """Copy ``src``'s values into ``dst``'s typed repeated field (V1 stores no
    ``tensor_content``, dtype or shape)."""
    arr = tensor_codec.make_ndarray(src).reshape(-1)
    dt = _dt.as_dtype(int(src.dtype))
    if dt is _dt.string:
        dst.string_val.extend(arr.tolist())
    elif dt in (_dt.float32,):
        dst.float_val.extend(arr.tolist())
    elif dt is _dt.float64:
        dst.double_val.extend(arr.tolist())
    elif dt is _dt.int64:
        dst.int64_val.extend(arr.tolist())
    elif dt is _dt.bool:
        dst.bool_val.extend(arr.tolist())
    elif dt in (_dt.float16, _dt.bfloat16):
        dst.half_val.extend(arr.view(np.uint16).astype(np.int32).tolist())
    elif dt in (_dt.complex64,):
        dst.scomplex_val.extend(np.stack([arr.real, arr.imag], -1).reshape(-1).tolist())
    elif dt in (_dt.complex128,):
        dst.dcomplex_val.extend(np.stack([arr.real, arr.imag], -1).reshape(-1).tolist())
    else:
        dst.int_val.extend(arr.astype(np.int64).tolist())
