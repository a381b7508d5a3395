"""TFRecord files: ``tf.io.TFRecordWriter``, ``tf.io.tf_record_iterator``,
``TFRecordOptions`` and ``TFRecordCompressionType`` (also under ``tf.python_io``).

A TFRecord file is a sequence of records, each framed as TensorFlow frames it::

    uint64 length            (little-endian)
    uint32 masked_crc32c(length bytes)
    byte   data[length]
    uint32 masked_crc32c(data)

where ``masked_crc(x) = ((crc >> 15) | (crc << 17)) + 0xa282ead8`` (32-bit) of the
CRC32C (Castagnoli) of ``x``. A ZLIB file is that byte stream through zlib (with its
header), a GZIP file through gzip.

The shared helpers, used by every writer of this framing (the event-file writer of
``tf.summary.FileWriter`` too): :func:`masked_crc`, :func:`encode_record`,
:func:`write_record` and the reader generator :func:`read_records`. A truncated record
or a bad checksum raises ``DataLossError`` naming the file and the byte offset of the
record (in the uncompressed stream).
"""
from __future__ import annotations

import gzip
import struct
import zlib
from typing import Any, BinaryIO, Iterator

import google_crc32c
import numpy as np

from ..base import errors

__all__ = ["masked_crc", "encode_record", "write_record", "read_records",
           "TFRecordCompressionType", "TFRecordOptions", "TFRecordWriter",
           "tf_record_iterator", "open_file", "API"]

_MASK_DELTA = 0xA282EAD8
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_HEADER = struct.Struct("<QI")
_crc = google_crc32c.value
#: bytes read from a file at a time by :func:`read_records`
_CHUNK = 1 << 20


# -- the framing (shared helpers) ---------------------------------------------------------
def masked_crc(data: bytes) -> int:
    """TF's masked CRC32C of ``data``: the CRC rotated right by 15 bits plus
    ``0xa282ead8``, modulo 2**32 (so a CRC of data holding CRCs is not degenerate)."""
    crc = _crc(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def encode_record(data: bytes) -> bytes:
    """``data`` framed as one TFRecord: length, its masked CRC, data, its masked CRC."""
    n = _U64.pack(len(data))
    return b"".join((n, _U32.pack(masked_crc(n)), data, _U32.pack(masked_crc(data))))


def write_record(f: BinaryIO, data: bytes) -> None:
    """Write ``data`` to the binary file ``f`` as one TFRecord (see :func:`encode_record`)."""
    f.write(encode_record(bytes(data)))


def _loss(name: str, what: str, offset: int) -> errors.DataLossError:
    return errors.DataLossError(None, None, f"{name}: {what} record at {offset}")


def _crc_table() -> np.ndarray:
    """The byte table of the reflected CRC32C (polynomial 0x82F63B78)."""
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(0x82F63B78), t >> 1).astype(np.uint32)
    return t


_TABLE = _crc_table()


def _mask(crc: np.ndarray) -> np.ndarray:
    """:func:`masked_crc`'s rotation and offset, over an array of CRCs (uint32)."""
    return ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(_MASK_DELTA)


def _length_crcs(a: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The masked CRC32C of the 8 bytes at each of ``starts`` in ``a`` (the length
    field of each record), a table-driven CRC over all records at once."""
    crc = np.full(len(starts), 0xFFFFFFFF, dtype=np.uint32)
    for j in range(8):
        crc = _TABLE[(crc ^ a[starts + j]) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
    return _mask(crc ^ np.uint32(0xFFFFFFFF))


def _first_bad(buf: bytes, starts: list[int], lens: list[int], datas: list[bytes]) -> int:
    """The index of the first record with a bad checksum (its length's for each of
    ``starts``, its data's for each of ``datas``, in file order), or ``len(starts)``."""
    a = np.frombuffer(buf, dtype=np.uint8)
    s = np.array(starts, dtype=np.int64)
    u32 = np.lib.stride_tricks.as_strided(a, (len(a) - 3, 4), (1, 1)).view("<u4")[:, 0]
    bad = _length_crcs(a, s) != u32[s + 8]
    if datas:
        ends = s[:len(datas)] + 12 + np.array(lens[:len(datas)], dtype=np.int64)
        got = _mask(np.fromiter(map(_crc, datas), dtype=np.uint32, count=len(datas)))
        bad[:len(datas)] |= got != u32[ends]
    hit = np.flatnonzero(bad)
    return int(hit[0]) if len(hit) else len(starts)


def read_records(f: BinaryIO, name: str = "<stream>", check_crc: bool = True
                 ) -> Iterator[bytes]:
    """Yield the data of each TFRecord read from the binary file ``f`` (the shared
    reader generator).

    :param name: the file's name, for error messages
    :param check_crc: verify both checksums of each record (TF always does)
    A partial length header at the end is the end of the records, as TensorFlow reads
    it (a file another process is still writing). The file is read in chunks of
    ``_CHUNK`` bytes; the records of a chunk are found with one loop over their length
    fields and checked together (the length CRCs over numpy arrays), then yielded in
    order up to the first bad one.

    :raises DataLossError: ``"<name>: truncated record at <offset>"`` when the file ends
        inside a record's data, ``"<name>: corrupted record at <offset>"`` for a bad checksum;
        ``offset`` is the byte offset of the record's start in the (uncompressed) stream.
    """
    buf = b""
    pos = 0          # position of the next record in buf
    base = 0         # stream offset of buf[0]
    eof = False
    unpack_u64 = _U64.unpack_from
    while True:
        limit = len(buf)
        starts: list[int] = []
        lens: list[int] = []
        p = pos
        while p + 12 <= limit:
            n = unpack_u64(buf, p)[0]
            starts.append(p)
            lens.append(n)
            if p + n + 16 > limit:
                break
            p += n + 16
        whole = len(starts) - (bool(starts) and p == starts[-1])  # the last may be partial
        datas = [buf[q + 12:q + 12 + n] for q, n in zip(starts[:whole], lens[:whole])]
        if check_crc and starts:
            bad = _first_bad(buf, starts, lens, datas)
            if bad < len(starts):
                yield from datas[:bad]
                raise _loss(name, "corrupted", base + starts[bad])
        yield from datas
        pos = p
        avail = limit - pos
        if eof:
            if avail >= 12:
                raise _loss(name, "truncated", base + pos)
            return  # no record or a partial header: the end, as TF (a file being written)
        need = lens[-1] + 16 if whole < len(starts) else 12
        more = f.read(max(_CHUNK, need - avail))
        eof = not more
        base += pos
        buf = buf[pos:] + more
        pos = 0


# -- options --------------------------------------------------------------------------
class TFRecordCompressionType:
    """The compression of a TFRecord file: ``NONE``, ``ZLIB`` or ``GZIP``."""

    NONE = 0
    ZLIB = 1
    GZIP = 2


class TFRecordOptions:
    """How a TFRecord file is compressed (TF's ``tf.io.TFRecordOptions``).

    ``compression_type`` is a :class:`TFRecordCompressionType` value, ``"ZLIB"``,
    ``"GZIP"``, ``""`` or None; the zlib settings (``compression_level`` 0-9 or -1 for
    zlib's default, ``window_bits``, ``mem_level``, ``compression_strategy``,
    ``compression_method``, ``flush_mode``) apply when it compresses; buffer sizes are
    accepted and not needed.
    """

    compression_type_map = {TFRecordCompressionType.ZLIB: "ZLIB",
                            TFRecordCompressionType.GZIP: "GZIP",
                            TFRecordCompressionType.NONE: ""}

    def __init__(self, compression_type: Any = None, flush_mode: int | None = None,
                 input_buffer_size: int | None = None,
                 output_buffer_size: int | None = None, window_bits: int | None = None,
                 compression_level: int | None = None,
                 compression_method: int | None = None, mem_level: int | None = None,
                 compression_strategy: int | None = None) -> None:
        if compression_type is None:
            compression_type = ""
        self.get_compression_type_string(compression_type)  # validates it
        self.compression_type = compression_type
        self.flush_mode = flush_mode
        self.input_buffer_size = input_buffer_size
        self.output_buffer_size = output_buffer_size
        self.window_bits = window_bits
        self.compression_level = compression_level
        self.compression_method = compression_method
        self.mem_level = mem_level
        self.compression_strategy = compression_strategy

    @classmethod
    def get_compression_type_string(cls, options: Any) -> str:
        """``"ZLIB"``, ``"GZIP"`` or ``""`` for options, a compression type or a string.

        :raises ValueError: for anything else.
        """
        if not options:
            return ""
        if isinstance(options, TFRecordOptions):
            return cls.get_compression_type_string(options.compression_type)
        if isinstance(options, int) and options in cls.compression_type_map:
            return cls.compression_type_map[options]
        if isinstance(options, str) and options in cls.compression_type_map.values():
            return options
        raise ValueError(f'Not a valid compression_type: "{options}"')

    def _compressor(self) -> Any:
        """A zlib compressor for these options (None when uncompressed)."""
        kind = self.get_compression_type_string(self)
        if not kind:
            return None
        wbits = self.window_bits if self.window_bits is not None else zlib.MAX_WBITS
        if kind == "GZIP":
            wbits = abs(wbits) + 16
        level = self.compression_level if self.compression_level is not None else -1
        return zlib.compressobj(
            level, self.compression_method if self.compression_method is not None
            else zlib.DEFLATED, wbits, self.mem_level if self.mem_level is not None else 9,
            self.compression_strategy if self.compression_strategy is not None
            else zlib.Z_DEFAULT_STRATEGY)


def _as_options(options: Any) -> TFRecordOptions:
    if isinstance(options, TFRecordOptions):
        return options
    return TFRecordOptions(compression_type=options)


def open_file(path: str, mode: str = "rb") -> BinaryIO:
    """``open(path, mode)`` with OS errors as TF's classes, naming the file (the readers
    of :mod:`flowrt.inputs.readers` open their files with it too)."""
    try:
        return open(path, mode)  # noqa: SIM115 -- the caller owns it
    except FileNotFoundError as e:
        raise errors.NotFoundError(None, None, f"{path}; {e.strerror}") from None
    except PermissionError as e:
        raise errors.PermissionDeniedError(None, None, f"{path}; {e.strerror}") from None
    except IsADirectoryError as e:
        raise errors.FailedPreconditionError(None, None, f"{path}; {e.strerror}") from None
    except OSError as e:
        raise errors.UnknownError(None, None, f"{path}; {e.strerror or e}") from None


# -- writer -----------------------------------------------------------------------------
class TFRecordWriter:
    """Writes records to a TFRecord file (TF's ``tf.io.TFRecordWriter``).

    ``options`` is a :class:`TFRecordOptions`, a :class:`TFRecordCompressionType` value
    or ``"ZLIB"`` / ``"GZIP"``. The file is created when the writer is; use it as a
    context manager or call :meth:`close`.
    """

    def __init__(self, path: Any, options: Any = None) -> None:
        self._path = path.decode() if isinstance(path, bytes) else str(path)
        self._options = _as_options(options)
        self._compressor = self._options._compressor()
        self._f: BinaryIO | None = open_file(self._path, "wb")

    def __enter__(self) -> TFRecordWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _file(self) -> BinaryIO:
        if self._f is None:
            raise errors.FailedPreconditionError(None, None,
                                                 f"{self._path}: the writer is closed")
        return self._f

    def write(self, record: Any) -> None:
        """Append one record (bytes; a str is written as UTF-8)."""
        f = self._file()
        data = record.encode() if isinstance(record, str) else bytes(record)
        framed = encode_record(data)
        f.write(self._compressor.compress(framed) if self._compressor else framed)

    def flush(self) -> None:
        """Write what is buffered to the file (a compressed stream is sync-flushed)."""
        f = self._file()
        if self._compressor is not None:
            f.write(self._compressor.flush(zlib.Z_SYNC_FLUSH))
        f.flush()

    def close(self) -> None:
        """Finish the stream and close the file; closing twice does nothing."""
        if self._f is None:
            return
        if self._compressor is not None:
            self._f.write(self._compressor.flush(zlib.Z_FINISH))
        self._f.close()
        self._f = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 -- nothing can be reported from a finaliser
            pass


# -- reader -----------------------------------------------------------------------------
class _Decompressed:
    """A read-only stream of the decompressed bytes of a zlib or gzip file; a corrupt
    stream raises DataLossError naming the file."""

    def __init__(self, f: BinaryIO, kind: str, name: str) -> None:
        self._f = f
        self._name = name
        self._wbits = zlib.MAX_WBITS + (16 if kind == "GZIP" else 0)
        self._d = zlib.decompressobj(self._wbits)
        self._done = False
        self._started = False  # the current member has begun

    def read(self, n: int) -> bytes:
        """At least ``n`` decompressed bytes where the stream holds them, b"" at its end."""
        out = []
        got = 0
        while got < n and not self._done:
            raw = self._d.unconsumed_tail or self._f.read(_CHUNK)
            if not raw:
                if self._started and not self._d.eof:
                    raise errors.DataLossError(None, None, f"{self._name}: truncated "
                                               "compressed stream")
                self._done = True
                break
            try:
                part = self._d.decompress(raw)
                self._started = True
                while self._d.eof:  # gzip members may follow one another
                    rest = self._d.unused_data
                    self._d = zlib.decompressobj(self._wbits)
                    self._started = bool(rest)
                    if not rest:
                        break
                    part += self._d.decompress(rest)
            except zlib.error as e:
                raise errors.DataLossError(None, None,
                                           f"{self._name}: corrupt compressed data ({e})"
                                           ) from None
            out.append(part)
            got += len(part)
        return b"".join(out)


def _record_stream(path: str, options: Any) -> Iterator[bytes]:
    kind = TFRecordOptions.get_compression_type_string(_as_options(options))
    f = open_file(path, "rb")
    try:
        yield from read_records(_Decompressed(f, kind, path) if kind else f, path)
    finally:
        f.close()


def tf_record_iterator(path: Any, options: Any = None) -> Iterator[bytes]:
    """An iterator over the records of the TFRecord file ``path`` (TF's
    ``tf.io.tf_record_iterator``). ``options`` as for :class:`TFRecordWriter`.

    :raises NotFoundError: when the file does not exist (at once, as TF does)
    :raises DataLossError: for a truncated or corrupted record (naming the file and
        the byte offset), when iteration reaches it.
    """
    p = path.decode() if isinstance(path, bytes) else str(path)
    _as_options(options)
    gen = _record_stream(p, options)
    open_file(p, "rb").close()
    return gen


#: the names of this module under ``tf.*`` (published by the standard plugin)
API = {}
for _ns in ("io.", "python_io."):
    API.update({_ns + "TFRecordWriter": TFRecordWriter,
                _ns + "tf_record_iterator": tf_record_iterator,
                _ns + "TFRecordOptions": TFRecordOptions,
                _ns + "TFRecordCompressionType": TFRecordCompressionType})
