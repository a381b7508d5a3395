"""TF1's readers (TF 1.15's io_ops readers): ``tf.ReaderBase`` and ``TextLineReader``,
``TFRecordReader``, ``FixedLengthRecordReader``, ``WholeFileReader``,
``IdentityReader``, with their resource-handle ops (``TextLineReaderV2`` ...,
``ReaderReadV2``, ``ReaderReadUpToV2``, ``ReaderNumRecordsProducedV2``,
``ReaderNumWorkUnitsCompletedV2``, ``ReaderSerializeStateV2``,
``ReaderRestoreStateV2``, ``ReaderResetV2``).

A reader is a resource of the device's resource manager (private to its session unless
it has a shared_name, as queues are) holding a :class:`flowrt.inputs.readers.RecordReader`.
``read`` takes a work unit (a file name) from a string queue when the current one is
used up; it is an ``async`` kernel: waiting for the queue holds no thread. A closed,
empty queue ends the read with the queue's OutOfRangeError. The operations of one
reader run one at a time, in arrival order.

A work unit that fails (a missing file, a corrupt record, a file outside the worker's
file roots: PermissionDeniedError) fails that read and is dropped: the next read moves
on to the next work unit.
"""
from __future__ import annotations

import collections
import threading
from typing import Any, Callable

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.graph import Tensor, apply_op
from flowrt.inputs.readers import (FixedLengthSource, IdentitySource, RecordReader,
                                   RecordSource, TextLineSource, TFRecordSource,
                                   WholeFileSource)
from flowrt.op_registry import OpDef
from flowrt.plugin.file_policy import check_path
from flowrt.tensor_shape import TensorShape
from flowrt.framework.tf_record import TFRecordOptions

from ._common import ks
from .data_flow_ops import _handle_kernel, _Queue, _resource

__all__ = ["ReaderBase", "TextLineReader", "TFRecordReader", "FixedLengthRecordReader",
           "WholeFileReader", "IdentityReader"]

ReaderReadOutput = collections.namedtuple("ReaderRead", ["key", "value"])
ReaderReadUpToOutput = collections.namedtuple("ReaderReadUpTo", ["keys", "values"])


class _Reader:
    """A reader resource: a :class:`RecordReader` whose operations run one at a time."""

    def __init__(self, name: str, source: RecordSource, supports_serialize: bool) -> None:
        self.name = name
        self.reader = RecordReader(source, supports_serialize)
        self._lock = threading.Lock()
        self._busy = False
        self._jobs: collections.deque[Callable[[Callable[[], None]], None]] = \
            collections.deque()

    def __repr__(self) -> str:
        return f"<{self.reader.source.name} {self.name!r}>"

    def submit(self, job: Callable[[Callable[[], None]], None]) -> None:
        """Run ``job(release)`` once the operations before it have released."""
        with self._lock:
            if self._busy:
                self._jobs.append(job)
                return
            self._busy = True
        job(self._release)

    def _release(self) -> None:
        with self._lock:
            if not self._jobs:
                self._busy = False
                return
            job = self._jobs.popleft()
        job(self._release)


class _Checked(RecordSource):
    """A file source whose work units are checked against the file roots of the reader
    op that made it (its kernel context) before each file is opened."""

    def __init__(self, source: RecordSource, ctx: Any) -> None:
        self.source, self._ctx = source, ctx
        self.single, self.name = source.single, source.name

    def records(self, work: bytes) -> Any:
        """The source's records of ``work`` once its file name passed the check."""
        check_path(self._ctx, work.decode("utf-8", "surrogateescape"))
        yield from self.source.records(work)


def _work_of(element: Any) -> bytes:
    v = element[0]
    a = np.asarray(v, dtype=object)
    if a.size != 1:
        raise errors.InvalidArgumentError(None, None, "Expected to dequeue a one-element "
                                          "string tensor")
    w = a.reshape(()).item()
    return w if isinstance(w, bytes) else str(w).encode()


def _read(res: _Reader, queue: _Queue, limit: int | None, step: Any,
          done: Callable[..., None]) -> None:
    """Read one record (``limit`` None) or up to ``limit`` records of one work unit,
    taking work units from ``queue``; ``done`` gets (key, value) or (keys, values)."""
    if len(queue.dtypes) != 1:
        raise errors.InvalidArgumentError(None, None, "Expected single component queue")
    if queue.dtypes[0] is not _dt.string:
        raise errors.InvalidArgumentError(None, None,
                                          "Expected queue with single string component")
    r = res.reader
    keys: list[bytes] = []
    values: list[bytes] = []

    def job(release: Callable[[], None]) -> None:
        def finish(err: BaseException | None = None) -> None:
            release()
            if err is not None:
                done(None, err)
            elif limit is None:
                done((np.array(keys[0], dtype=object), np.array(values[0], dtype=object)))
            else:
                done((np.array(keys, dtype=object).reshape(len(keys)),
                      np.array(values, dtype=object).reshape(len(values))))

        def on_work(element: Any, err: BaseException | None = None) -> None:
            if err is None:
                try:
                    r.start(_work_of(element))
                except errors.OpError as e:
                    err = e
            if err is not None:
                finish(err)
            else:
                go()

        def go() -> None:
            want = 1 if limit is None else limit
            while len(keys) < want:
                if not r.work_in_progress:
                    if keys:  # read_up_to stops at the end of a work unit
                        break
                    queue.dequeue(step, on_work, lambda t: t)
                    return
                try:
                    rec = r.next_record()
                except errors.OpError as e:
                    finish(e)
                    return
                if rec is not None:
                    keys.append(rec[0])
                    values.append(rec[1])
            finish()

        if limit == 0:
            finish()
        else:
            go()

    res.submit(job)


# -- ops ---------------------------------------------------------------------------------
def _scalars(op: Any) -> list[TensorShape]:
    return [TensorShape([]) for _ in op.outputs]


def _vectors(op: Any) -> list[TensorShape]:
    n = op.inputs[2].shape
    if n.ndims not in (None, 0):
        raise ValueError(f"Shape must be rank 0 but is rank {n.ndims} for '{op.name}' "
                         f"(op: '{op.type}') (input 'num_records')")
    return [TensorShape([None]), TensorShape([None])]


def _none(op: Any) -> list[TensorShape]:
    return []


_SHARED = ["container: string = ''", "shared_name: string = ''"]
_H = "reader_handle: resource"
ks.op(
    OpDef("TextLineReaderV2", outputs=[_H], attrs=["skip_header_lines: int = 0"] + _SHARED,
          is_stateful=True, shape_fn=_scalars, doc="A reader of the lines of text files."),
    OpDef("TFRecordReaderV2", outputs=[_H], attrs=_SHARED + ["compression_type: string = ''"],
          is_stateful=True, shape_fn=_scalars, doc="A reader of TFRecord files."),
    OpDef("FixedLengthRecordReaderV2", outputs=[_H],
          attrs=["header_bytes: int = 0", "record_bytes: int", "footer_bytes: int = 0",
                 "hop_bytes: int = 0"] + _SHARED + ["encoding: string = ''"],
          is_stateful=True, shape_fn=_scalars,
          doc="A reader of fixed-length records of files."),
    OpDef("WholeFileReaderV2", outputs=[_H], attrs=_SHARED, is_stateful=True,
          shape_fn=_scalars, doc="A reader of whole files: (file name, contents)."),
    OpDef("IdentityReaderV2", outputs=[_H], attrs=_SHARED, is_stateful=True,
          shape_fn=_scalars, doc="A reader giving each work unit as key and value."),
    OpDef("ReaderReadV2", inputs=[_H, "queue_handle: resource"],
          outputs=["key: string", "value: string"], is_stateful=True, shape_fn=_scalars,
          doc="The next (key, value) record, taking work from the queue as needed."),
    OpDef("ReaderReadUpToV2", inputs=[_H, "queue_handle: resource", "num_records: int64"],
          outputs=["keys: string", "values: string"], is_stateful=True, shape_fn=_vectors,
          doc="Up to num_records records of one work unit."),
    OpDef("ReaderNumRecordsProducedV2", inputs=[_H], outputs=["records_produced: int64"],
          is_stateful=True, shape_fn=_scalars, doc="How many records the reader produced."),
    OpDef("ReaderNumWorkUnitsCompletedV2", inputs=[_H], outputs=["units_completed: int64"],
          is_stateful=True, shape_fn=_scalars, doc="How many work units it finished."),
    OpDef("ReaderSerializeStateV2", inputs=[_H], outputs=["state: string"],
          is_stateful=True, shape_fn=_scalars, doc="The reader's state as a string."),
    OpDef("ReaderRestoreStateV2", inputs=[_H, "state: string"], is_stateful=True,
          shape_fn=_none, doc="Restore a state from ReaderSerializeState."),
    OpDef("ReaderResetV2", inputs=[_H], is_stateful=True, shape_fn=_none,
          doc="Reset the reader to its initial clean state."),
)
_READER_OPS = ("TextLineReaderV2", "TFRecordReaderV2", "FixedLengthRecordReaderV2",
               "WholeFileReaderV2", "IdentityReaderV2")
ks.not_differentiable(*_READER_OPS, "ReaderReadV2", "ReaderReadUpToV2",
                      "ReaderNumRecordsProducedV2", "ReaderNumWorkUnitsCompletedV2",
                      "ReaderSerializeStateV2", "ReaderRestoreStateV2", "ReaderResetV2")


def _source(op_type: str, attrs: Any) -> RecordSource:
    if op_type == "TextLineReaderV2":
        return TextLineSource(int(attrs.get("skip_header_lines", 0)))
    if op_type == "TFRecordReaderV2":
        return TFRecordSource(attrs.get("compression_type", ""))
    if op_type == "FixedLengthRecordReaderV2":
        return FixedLengthSource(int(attrs["record_bytes"]), int(attrs.get("header_bytes", 0)),
                                 int(attrs.get("footer_bytes", 0)),
                                 int(attrs.get("hop_bytes", 0)), attrs.get("encoding", ""))
    return WholeFileSource() if op_type == "WholeFileReaderV2" else IdentitySource()


@ks.kernel(*_READER_OPS, device_type="CPU")
def _reader_kernel(ctx: Any) -> Any:
    op_type = ctx.op_type
    source = _source(op_type, ctx.attrs)  # bad attrs fail when the kernel is made

    def make(name: str) -> _Reader:
        src = _source(op_type, ctx.attrs)
        if op_type != "IdentityReaderV2":  # the others' work units are file names
            src = _Checked(src, ctx)
        return _Reader(name, src, op_type == "IdentityReaderV2")

    def check(r: Any, name: str) -> None:
        if not isinstance(r, _Reader) or r.reader.source.name != source.name:
            raise errors.InvalidArgumentError(None, None, f"Resource '{name}' is not a "
                                              f"{source.name} but {type(r).__name__}")

    return _handle_kernel(ctx, make, check)


def _reader(h: Any) -> _Reader:
    if isinstance(h, np.ndarray) and h.size == 1:
        h = h.reshape(()).item()
    if not isinstance(h, _Reader):
        raise errors.InvalidArgumentError(None, None, f"the reader_handle input is not a "
                                          f"reader handle (got {type(h).__name__})")
    return h


@ks.kernel("ReaderReadV2", device_type="CPU", kind="async")
def _read_kernel(ctx: Any) -> Any:
    def read(step: Any, done: Callable[..., None], handle: Any, queue: Any) -> None:
        _read(_reader(handle), _resource(queue, _Queue, "ReaderReadV2"), None, step, done)

    return read


@ks.kernel("ReaderReadUpToV2", device_type="CPU", kind="async")
def _read_up_to_kernel(ctx: Any) -> Any:
    def read_up_to(step: Any, done: Callable[..., None], handle: Any, queue: Any,
                   n: Any) -> None:
        if np.ndim(n) != 0:
            raise errors.InvalidArgumentError(None, None, f"num_records must be a scalar, "
                                              f"got shape {list(np.shape(n))}")
        k = int(n)
        if k <= 0:
            raise errors.InvalidArgumentError(None, None, f"num_records must be positive, "
                                              f"got {k}")
        _read(_reader(handle), _resource(queue, _Queue, "ReaderReadUpToV2"), k, step, done)

    return read_up_to


@ks.kernel("ReaderNumRecordsProducedV2", device_type="CPU")
def _produced_kernel(ctx: Any) -> Any:
    return lambda h: np.int64(_reader(h).reader.num_records_produced)


@ks.kernel("ReaderNumWorkUnitsCompletedV2", device_type="CPU")
def _completed_kernel(ctx: Any) -> Any:
    return lambda h: np.int64(_reader(h).reader.work_finished)


@ks.kernel("ReaderSerializeStateV2", device_type="CPU")
def _serialize_kernel(ctx: Any) -> Any:
    return lambda h: np.array(_reader(h).reader.serialize_state(), dtype=object)


@ks.kernel("ReaderRestoreStateV2", device_type="CPU")
def _restore_kernel(ctx: Any) -> Any:
    def restore(h: Any, state: Any) -> None:
        a = np.asarray(state, dtype=object)
        if a.ndim != 0:
            raise errors.InvalidArgumentError(None, None, f"Reader state must be a scalar, "
                                              f"got shape {list(a.shape)}")
        v = a.item()
        _reader(h).reader.restore_state(v if isinstance(v, bytes) else str(v).encode())

    return restore


@ks.kernel("ReaderResetV2", device_type="CPU")
def _reset_kernel(ctx: Any) -> Any:
    def reset(h: Any) -> None:
        _reader(h).reader.reset()

    return reset


# -- Python API ---------------------------------------------------------------------------
class ReaderBase:
    """Base class of readers (``tf.ReaderBase``): produce (key, value) records from the
    work units (file names) of a string queue."""

    def __init__(self, reader_ref: Tensor, supports_serialize: bool = False) -> None:
        self._reader_ref = reader_ref
        self._supports_serialize = supports_serialize

    @property
    def reader_ref(self) -> Tensor:
        """The reader's handle tensor."""
        return self._reader_ref

    @property
    def supports_serialize(self) -> bool:
        """Whether :meth:`serialize_state` works for this reader."""
        return self._supports_serialize

    @staticmethod
    def _queue_ref(queue: Any) -> Tensor:
        return queue if isinstance(queue, Tensor) else queue.queue_ref

    def read(self, queue: Any, name: str | None = None) -> ReaderReadOutput:
        """The next record as ``(key, value)`` string scalars; a closed, exhausted queue
        raises OutOfRangeError when the op runs."""
        out = apply_op("ReaderReadV2", name=name, reader_handle=self._reader_ref,
                       queue_handle=self._queue_ref(queue))
        return ReaderReadOutput(*out)

    def read_up_to(self, queue: Any, num_records: Any, name: str | None = None
                   ) -> ReaderReadUpToOutput:
        """Up to ``num_records`` records of one work unit, as ``(keys, values)``."""
        out = apply_op("ReaderReadUpToV2", name=name, reader_handle=self._reader_ref,
                       queue_handle=self._queue_ref(queue), num_records=num_records)
        return ReaderReadUpToOutput(*out)

    def num_records_produced(self, name: str | None = None) -> Tensor:
        """An int64 scalar: the records this reader has produced."""
        return apply_op("ReaderNumRecordsProducedV2", name=name,
                        reader_handle=self._reader_ref)

    def num_work_units_completed(self, name: str | None = None) -> Tensor:
        """An int64 scalar: the work units this reader has finished."""
        return apply_op("ReaderNumWorkUnitsCompletedV2", name=name,
                        reader_handle=self._reader_ref)

    def serialize_state(self, name: str | None = None) -> Tensor:
        """A string scalar with the reader's state (UnimplementedError when the op runs,
        unless :attr:`supports_serialize`)."""
        return apply_op("ReaderSerializeStateV2", name=name, reader_handle=self._reader_ref)

    def restore_state(self, state: Any, name: str | None = None) -> Any:
        """Restore a state from :meth:`serialize_state`."""
        return apply_op("ReaderRestoreStateV2", name=name, reader_handle=self._reader_ref,
                        state=state)

    def reset(self, name: str | None = None) -> Any:
        """Forget the work in progress and zero the counters."""
        return apply_op("ReaderResetV2", name=name, reader_handle=self._reader_ref)


class WholeFileReader(ReaderBase):
    """Each file of the queue is one record: (file name, contents)."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(apply_op("WholeFileReaderV2", name=name))


class TextLineReader(ReaderBase):
    """The lines of the queue's files: (``b"file:line"``, line), lines counted from 1;
    ``skip_header_lines`` lines of each file are skipped."""

    def __init__(self, skip_header_lines: int | None = None, name: str | None = None) -> None:
        super().__init__(apply_op("TextLineReaderV2", name=name,
                                  skip_header_lines=int(skip_header_lines or 0)))


class FixedLengthRecordReader(ReaderBase):
    """Fixed-length records of the queue's files: (``b"file:n"``, record bytes)."""

    def __init__(self, record_bytes: int, header_bytes: int | None = None,
                 footer_bytes: int | None = None, hop_bytes: int | None = None,
                 name: str | None = None, encoding: str | None = None) -> None:
        super().__init__(apply_op("FixedLengthRecordReaderV2", name=name,
                                  record_bytes=int(record_bytes),
                                  header_bytes=int(header_bytes or 0),
                                  footer_bytes=int(footer_bytes or 0),
                                  hop_bytes=int(hop_bytes or 0), encoding=encoding or ""))


class TFRecordReader(ReaderBase):
    """The records of the queue's TFRecord files: (``b"file:offset"``, record);
    ``options`` a ``TFRecordOptions`` (its compression type) or None."""

    def __init__(self, name: str | None = None, options: Any = None) -> None:
        compression = TFRecordOptions.get_compression_type_string(options)
        super().__init__(apply_op("TFRecordReaderV2", name=name,
                                  compression_type=compression))


class IdentityReader(ReaderBase):
    """Each work unit is one record, as both key and value (supports serialization)."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(apply_op("IdentityReaderV2", name=name), supports_serialize=True)


for _cls in (ReaderBase, WholeFileReader, TextLineReader, FixedLengthRecordReader,
             TFRecordReader, IdentityReader):
    ks.export(_cls.__name__, _cls)
