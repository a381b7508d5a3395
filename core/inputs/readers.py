"""The record formats of TF1's readers, as plain Python: what a ``TextLineReader``,
``TFRecordReader``, ``FixedLengthRecordReader``, ``WholeFileReader`` or
``IdentityReader`` produces from one work unit (a file name, or for the identity reader
any string), and the state a reader keeps between runs.

The reader ops of the standard kernel set drive a :class:`RecordReader` (one per reader
resource), taking work units from a string queue; the file datasets of ``tf.data``
(:mod:`flowrt.inputs.file_datasets`) iterate over the same :class:`RecordSource`\\ s.

Keys are TF's: ``b"<file>:<line>"`` (lines counted from 1, header lines included),
``b"<file>:<offset>"`` for TFRecords (the byte offset of the record in the uncompressed
stream), ``b"<file>:<n>"`` for fixed-length records (counted from 0), the file name for
whole files, the work unit itself for the identity reader.
"""
from __future__ import annotations

import io
import zlib
from typing import Any, BinaryIO, Iterator

from ..base import errors
from ..framework.tf_record import TFRecordOptions, open_file, tf_record_iterator

__all__ = ["RecordSource", "TextLineSource", "TFRecordSource", "FixedLengthSource",
           "WholeFileSource", "IdentitySource", "RecordReader", "open_file",
           "encode_base_state", "decode_base_state"]

_CHUNK = 1 << 20


def _text(work: bytes) -> str:
    return work.decode("utf-8", "surrogateescape")


def _compression(kind: Any) -> str:
    """``""``, ``"ZLIB"`` or ``"GZIP"`` (InvalidArgumentError for anything else)."""
    kind = kind.decode() if isinstance(kind, bytes) else (kind or "")
    if kind not in ("", "ZLIB", "GZIP"):
        raise errors.InvalidArgumentError(None, None, f"Unsupported compression_type: "
                                          f"{kind!r} (expected '', 'ZLIB' or 'GZIP')")
    return kind


def _decompress(f: BinaryIO, path: str, kind: str) -> bytes:
    """The decompressed contents of ``f`` (closed here); DataLossError when corrupt."""
    try:
        data = f.read()
    finally:
        f.close()
    try:
        return zlib.decompress(data, zlib.MAX_WBITS + (16 if kind == "GZIP" else 0))
    except zlib.error as e:
        raise errors.DataLossError(None, None, f"{path}: corrupt compressed data "
                                   f"({e})") from None


class RecordSource:
    """The records of one work unit: :meth:`records` yields ``(key, value)`` pairs.

    ``single`` sources (whole file, identity) finish their work unit with the one record
    they produce, as TF's readers do; the others finish it on the read after the last.
    """

    single = False
    name = "ReaderBase"

    def records(self, work: bytes) -> Iterator[tuple[bytes, bytes]]:
        """The ``(key, value)`` records of ``work`` (opening files lazily is fine; errors
        are TF's classes naming the file)."""
        raise NotImplementedError("need records")


class TextLineSource(RecordSource):
    """The lines of a text file without their ``\\n`` (and a ``\\r`` before it); an empty
    last line is no record. ``skip_header_lines`` lines are skipped first."""

    name = "TextLineReader"

    def __init__(self, skip_header_lines: int = 0, compression_type: Any = "") -> None:
        self.skip_header_lines = int(skip_header_lines)
        self.compression_type = _compression(compression_type)

    def records(self, work: bytes) -> Iterator[tuple[bytes, bytes]]:
        path = _text(work)
        f: Any = open_file(path)
        if self.compression_type:
            f = io.BytesIO(_decompress(f, path, self.compression_type))
        try:
            for n, line in enumerate(f, 1):
                last = not line.endswith(b"\n")
                line = line[:-1] if not last else line
                if line.endswith(b"\r"):
                    line = line[:-1]
                if n <= self.skip_header_lines or (last and not line):
                    continue
                yield work + b":" + str(n).encode(), line
        finally:
            f.close()


class TFRecordSource(RecordSource):
    """The records of a TFRecord file (``compression_type`` ``""``, ``"ZLIB"`` or
    ``"GZIP"``); a corrupt record raises DataLossError naming the file and offset."""

    name = "TFRecordReader"

    def __init__(self, compression_type: Any = "") -> None:
        self.compression_type = _compression(compression_type)

    def records(self, work: bytes) -> Iterator[tuple[bytes, bytes]]:
        offset = 0
        options = TFRecordOptions(self.compression_type or None)
        for data in tf_record_iterator(_text(work), options):
            yield work + b":" + str(offset).encode(), data
            offset += len(data) + 16


class FixedLengthSource(RecordSource):
    """Records of ``record_bytes`` bytes after ``header_bytes``, before ``footer_bytes``;
    record ``k`` starts at ``header_bytes + k * (hop_bytes or record_bytes)``. A partial
    last record is dropped (the reader), or with ``exact`` an uncompressed body that is
    not a whole number of records is InvalidArgumentError (the dataset), as in TF.
    ``encoding`` ``"ZLIB"``/``"GZIP"`` decompresses first."""

    name = "FixedLengthRecordReader"

    def __init__(self, record_bytes: int, header_bytes: int = 0, footer_bytes: int = 0,
                 hop_bytes: int = 0, encoding: Any = "", exact: bool = False) -> None:
        if int(record_bytes) <= 0:
            raise errors.InvalidArgumentError(None, None, f"record_bytes must be > 0, got "
                                              f"{record_bytes}")
        for what, v in (("header_bytes", header_bytes), ("footer_bytes", footer_bytes),
                        ("hop_bytes", hop_bytes)):
            if int(v) < 0:
                raise errors.InvalidArgumentError(None, None, f"{what} must be >= 0, got {v}")
        self.record_bytes = int(record_bytes)
        self.header_bytes = int(header_bytes)
        self.footer_bytes = int(footer_bytes)
        self.hop_bytes = int(hop_bytes)
        self.encoding = _compression(encoding)
        self.exact = exact

    def _contents(self, path: str) -> bytes:
        f = open_file(path)
        if self.encoding:
            return _decompress(f, path, self.encoding)
        try:
            return f.read()
        finally:
            f.close()

    def records(self, work: bytes) -> Iterator[tuple[bytes, bytes]]:
        path = _text(work)
        data = self._contents(path)
        limit = len(data) - self.footer_bytes
        body = limit - self.header_bytes
        if self.exact and not self.encoding and body % self.record_bytes:
            raise errors.InvalidArgumentError(
                None, None, f"Excluding the header ({self.header_bytes} bytes) and footer "
                f"({self.footer_bytes} bytes), input file \"{path}\" has body length "
                f"{body} bytes, which is not an exact multiple of the record length "
                f"({self.record_bytes} bytes).")
        stride = self.hop_bytes or self.record_bytes
        pos, n = self.header_bytes, 0
        while pos + self.record_bytes <= limit:
            yield work + b":" + str(n).encode(), data[pos:pos + self.record_bytes]
            pos += stride
            n += 1


class WholeFileSource(RecordSource):
    """One record per file: its name and its contents."""

    single = True
    name = "WholeFileReader"

    def records(self, work: bytes) -> Iterator[tuple[bytes, bytes]]:
        f = open_file(_text(work))
        try:
            chunks = iter(lambda: f.read(_CHUNK), b"")
            contents = b"".join(chunks)
        finally:
            f.close()
        yield work, contents


class IdentitySource(RecordSource):
    """One record per work unit: the work unit as both key and value."""

    single = True
    name = "IdentityReader"

    def records(self, work: bytes) -> Iterator[tuple[bytes, bytes]]:
        yield work, work


# -- ReaderBaseState (TF's reader_base.proto), encoded by hand: four fields ---------------
def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def encode_base_state(work_started: int, work_finished: int, produced: int,
                      current_work: bytes) -> bytes:
    """A serialized ``ReaderBaseState`` (fields 1-3 int64, 4 bytes; zeros omitted)."""
    out = b""
    for num, v in ((1, work_started), (2, work_finished), (3, produced)):
        if v:
            out += _varint(num << 3) + _varint(v)
    if current_work:
        out += _varint((4 << 3) | 2) + _varint(len(current_work)) + current_work
    return out


def decode_base_state(state: bytes) -> tuple[int, int, int, bytes]:
    """The fields of a serialized ``ReaderBaseState``; ValueError when it does not parse."""
    vals: dict[int, Any] = {1: 0, 2: 0, 3: 0, 4: b""}
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= len(state) or shift > 63:
                raise ValueError("truncated varint")
            b = state[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return result

    while pos < len(state):
        key = varint()
        num, wire = key >> 3, key & 7
        if wire == 0:
            v = varint()
            vals[num] = v - (1 << 64) if v >= 1 << 63 else v
        elif wire == 2:
            n = varint()
            if pos + n > len(state):
                raise ValueError("truncated field")
            vals[num] = bytes(state[pos:pos + n])
            pos += n
        else:
            raise ValueError(f"unexpected wire type {wire}")
    return vals[1], vals[2], vals[3], vals[4]


class RecordReader:
    """A reader's state (TF's ``ReaderBase``): the work unit in progress, its records,
    and the counters ``num_records_produced`` / ``num_work_units_completed``.

    Not thread-safe: the reader ops run one operation of a reader at a time.
    """

    def __init__(self, source: RecordSource, supports_serialize: bool = False) -> None:
        self.source = source
        self.supports_serialize = supports_serialize
        self.reset()

    def reset(self) -> None:
        """Forget the work in progress and zero the counters."""
        self.work_started = 0
        self.work_finished = 0
        self.num_records_produced = 0
        self.work = b""
        self._records: Iterator[tuple[bytes, bytes]] | None = None
        self._unit_produced = 0

    @property
    def work_in_progress(self) -> bool:
        return self.work_finished < self.work_started

    def start(self, work: bytes) -> None:
        """Begin the work unit ``work``."""
        self.work = work
        self._records = self.source.records(work)
        self._unit_produced = 0
        self.work_started += 1

    def _finish(self) -> None:
        self._records = None
        self.work_finished = self.work_started

    def next_record(self) -> tuple[bytes, bytes] | None:
        """The next record of the work in progress, or None when it has ended (the work
        unit then counts as completed)."""
        if self._records is None:
            self._records = self.source.records(self.work)
        try:
            rec = next(self._records)
        except StopIteration:
            self._finish()
            return None
        except BaseException:  # drop the work unit: the next read takes the next one
            if self._unit_produced:
                self._finish()
            else:  # it failed to start (a missing file), as TF: it never started
                self._records = None
                self.work_started -= 1
            raise
        self._unit_produced += 1
        self.num_records_produced += 1
        if self.source.single:
            self._finish()
        return rec

    def serialize_state(self) -> bytes:
        """The reader's state as a ``ReaderBaseState`` (only readers that support it)."""
        if not self.supports_serialize:
            raise errors.UnimplementedError(None, None, f"Reader SerializeState not "
                                            f"implemented for {self.source.name}")
        return encode_base_state(self.work_started, self.work_finished,
                                 self.num_records_produced, self.work)

    def restore_state(self, state: bytes) -> None:
        """Restore what :meth:`serialize_state` produced; a bad state resets the reader
        and raises InvalidArgumentError."""
        if not self.supports_serialize:
            raise errors.UnimplementedError(None, None, f"Reader RestoreState not "
                                            f"implemented for {self.source.name}")
        try:
            started, finished, produced, work = decode_base_state(state)
        except ValueError:
            self.reset()
            raise errors.InvalidArgumentError(None, None, f"Could not parse state for "
                                              f"{self.source.name}: {state!r}") from None
        if started < 0 or finished < 0 or produced < 0 or started > finished:
            self.reset()
            raise errors.InvalidArgumentError(
                None, None, f"Unexpected or inconsistent state when restoring in "
                f"{self.source.name}: work_started={started} work_finished={finished} "
                f"num_records_produced={produced}")
        self.reset()
        self.work_started, self.work_finished = started, finished
        self.num_records_produced, self.work = produced, work
