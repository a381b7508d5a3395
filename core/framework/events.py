"""Event files for TensorBoard: ``tf.summary.FileWriter``, ``tf.summary.FileWriterCache``
and ``tf.train.summary_iterator``.

An event file (``<logdir>/events.out.tfevents.<seconds>.<hostname><suffix>``) is a
sequence of records, each an ``Event`` proto, in the TFRecord framing: the length as a
little-endian uint64, its masked CRC32C, the bytes, their masked CRC32C. The first
record of every file is ``file_version: "brain.Event:2"``, as TensorFlow's
``EventsWriter`` writes it.

Writing never waits for the disk: :meth:`EventFileWriter.add_event` serializes and
frames the event into a memory buffer in the caller's thread (no thread hand-off per
event) and a daemon thread writes the buffer to the file every ``flush_secs``, soon
after ``max_queue`` events have gathered, on :meth:`~EventFileWriter.flush` and
:meth:`~EventFileWriter.close`, and when the interpreter exits.
"""
from __future__ import annotations

import atexit
import logging
import os
import socket
import threading
import time
import warnings
import weakref
from typing import Any, Iterator

from ..base import VERSION
from ..base import errors
from ..proto import event_pb2, graph_def_pb2, meta_graph_pb2, summary_pb2
from . import tf_record
from .graph import Graph, get_default_graph

__all__ = ["FileWriter", "FileWriterCache", "EventFileWriter", "summary_iterator",
           "read_records", "frame_record", "masked_crc32c", "event_file_name", "API"]

_log = logging.getLogger("flowrt")

#: the ``file_version`` of the first event of every file
FILE_VERSION = "brain.Event:2"
#: bytes buffered before the writer thread writes them out whatever ``flush_secs`` says
_BUFFER_LIMIT = 1 << 20
#: seconds the exit hook waits for a write under way before writing the rest out
_EXIT_WAIT_S = 2.0


# -- the TFRecord framing (shared with tf.io's TFRecordWriter: core/framework/tf_record.py)
masked_crc32c = tf_record.masked_crc
frame_record = tf_record.encode_record


def read_records(path: str) -> Iterator[bytes]:
    """The records of the TFRecord file ``path``, in order.

    :raises NotFoundError: if ``path`` does not exist
    :raises DataLossError: on a truncated record or a CRC mismatch, naming the file and
        the offset (a partial length header at the end is the end, as TF reads a file
        still being written)
    """
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{path}; No such file or directory") \
            from None
    except IsADirectoryError:
        raise errors.FailedPreconditionError(None, None, f"{path}; Is a directory") \
            from None
    with f:
        yield from tf_record.read_records(f, name=path)


def summary_iterator(path: str) -> Iterator[event_pb2.Event]:
    """``tf.train.summary_iterator``: the ``Event`` protos of the event file ``path``.

    A truncated last record (a file still being written, or cut short) raises
    ``DataLossError`` naming the file and offset, after the complete events before it,
    as TF 1.15's iterator does; a last record cut inside its 12-byte header ends the
    events quietly, as TF's does.
    """
    for record in read_records(path):
        yield event_pb2.Event.FromString(record)


def event_file_name(logdir: str, seconds: int, suffix: str = "") -> str:
    """``<logdir>/events.out.tfevents.<seconds, 10 digits>.<hostname><suffix>``."""
    return os.path.join(logdir, "events.out.tfevents.%010d.%s%s"
                        % (seconds, socket.gethostname(), suffix))


# -- the writer ----------------------------------------------------------------------------
_LIVE: "weakref.WeakSet[EventFileWriter]" = weakref.WeakSet()
#: bytes held in memory past which :meth:`EventFileWriter.add_event` waits for the
#: writer thread (the bound on what a stalled disk can make the process hold)
_HARD_LIMIT = 64 << 20


class EventFileWriter:
    """Writes ``Event`` protos to an event file in ``logdir`` from a daemon thread.

    The caller's thread serializes and frames each event into a memory buffer (a few
    microseconds, no thread hand-off); a daemon thread writes the buffer out every
    ``flush_secs``, or soon after ``max_queue`` events (or 1 MiB) have gathered, so a
    training step never waits for the disk. The buffer is bounded: past 64 MiB the caller
    waits for the writer thread. The file is created with the first event (at once when
    ``filename_suffix`` is given, as TF does); after :meth:`close`, :meth:`reopen` and a
    new event start a new file.

    :param logdir: the directory (created if missing)
    :param max_queue: events gathered before the writer thread is woken to write them
    :param flush_secs: the longest time an event stays in memory
    :param filename_suffix: appended to the file name
    """

    def __init__(self, logdir: str, max_queue: int = 10, flush_secs: float = 120,
                 filename_suffix: str | None = None):
        """Create ``logdir`` (PermissionDeniedError / FailedPreconditionError naming it
        when that fails) and start the writer thread; with a suffix, the file is
        created at once, as TF does."""
        self._logdir = str(os.fspath(logdir))
        try:
            os.makedirs(self._logdir, exist_ok=True)
        except PermissionError as e:
            raise errors.PermissionDeniedError(None, None, f"{self._logdir}; {e.strerror}") \
                from None
        except OSError as e:  # a file in the way
            raise errors.FailedPreconditionError(
                None, None, f"{self._logdir} is not a directory; {e.strerror}") from None
        self._flush_secs = float(flush_secs)
        self._max_queue = max(1, int(max_queue))
        self._suffix = filename_suffix or ""
        self._lock = threading.Lock()  # the buffer, its count and the file's name
        self._io_lock = threading.Lock()  # writing out: one writer at a time, in order
        self._drained = threading.Condition(self._lock)  # the buffer was taken
        self._wake = threading.Event()
        self._buffer = bytearray()
        self._count = 0  # events in the buffer
        self._path: str | None = None
        self._created = False  # whether self._path has been written to
        self._closed = False
        self._stopping = False
        if self._suffix:
            with self._io_lock, self._lock:
                self._name_file()
            self._write_out()
        self._thread = self._start_thread()
        _LIVE.add(self)

    def get_logdir(self) -> str:
        """The directory the files are written to."""
        return self._logdir

    @property
    def path(self) -> str | None:
        """The file written now (None before the first event and after close)."""
        return self._path

    def add_event(self, event: event_pb2.Event) -> None:
        """Buffer ``event`` for writing (nothing happens once closed)."""
        if not self._closed:
            self.add_serialized(event.SerializeToString())

    def add_serialized(self, event: bytes) -> None:
        """Buffer an already serialized ``Event`` for writing."""
        if self._closed:
            return
        record = frame_record(event)
        with self._lock:
            while len(self._buffer) >= _HARD_LIMIT and not self._stopping:
                self._wake.set()
                self._drained.wait(1.0)
            if self._path is None:
                self._name_file()
            self._buffer += record
            self._count += 1
            wake = self._count >= self._max_queue or len(self._buffer) >= _BUFFER_LIMIT
        if wake:
            self._wake.set()

    def flush(self) -> None:
        """Write every buffered event to the file now."""
        self._write_out()

    def close(self) -> None:
        """Flush, stop the writer thread and close the file."""
        if self._closed:
            return
        self._stopping = True
        self._wake.set()
        self._thread.join()
        self._write_out()
        with self._lock:
            self._path = None
        self._closed = True

    def reopen(self) -> None:
        """Start writing again after :meth:`close`; the next event opens a new file."""
        if self._closed:
            self._closed = False
            self._stopping = False
            self._thread = self._start_thread()
            _LIVE.add(self)

    # -- the writer thread's side ----------------------------------------------------------
    def _start_thread(self) -> threading.Thread:
        t = threading.Thread(target=self._run, name="flowrt-event-writer", daemon=True)
        t.start()
        return t

    def _run(self) -> None:
        """The writer thread: write the buffer out when woken (enough events gathered,
        a close) or every ``flush_secs``. An error writing is logged, not raised."""
        while not self._stopping:
            self._wake.wait(self._flush_secs)
            self._wake.clear()
            self._write_out()

    def _name_file(self) -> None:
        """Name a new file for this second and put its ``file_version`` event first in
        the buffer (the caller holds ``_lock``)."""
        seconds = int(time.time())
        self._path = event_file_name(self._logdir, seconds, self._suffix)
        first = event_pb2.Event(wall_time=float(seconds), file_version=FILE_VERSION)
        self._buffer[:0] = frame_record(first.SerializeToString())
        self._count += 1
        self._created = False

    def _write_out(self) -> None:
        """Append what the buffer holds to the file: one ``write`` of whole records on
        an append-only descriptor, so two writers on one file never interleave inside
        a record. Writers take turns (``_io_lock``) so that records keep their order;
        events added meanwhile wait in a new buffer. A file deleted under the writer is
        started again, as TF's EventsWriter does; a failed write is logged and its
        events dropped (the disk, not the step, is at fault)."""
        with self._io_lock:
            with self._lock:
                if not self._buffer or self._path is None:
                    return
                if self._created and not os.path.exists(self._path):
                    _log.warning("EventFileWriter: %s was deleted; starting a new file",
                                 self._path)
                    self._name_file()
                data, path = self._buffer, self._path
                self._buffer, self._count = bytearray(), 0
                self._drained.notify_all()
            try:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                    del view
                finally:
                    os.close(fd)
                self._created = True
            except OSError as e:
                _log.error("EventFileWriter: could not write %s: %s", path, e)

    def _drain_at_exit(self, timeout: float) -> None:
        """Write the buffer out, waiting at most ``timeout`` seconds for a write under
        way (the exit hook)."""
        if self._closed or not self._io_lock.acquire(timeout=timeout):
            return
        self._io_lock.release()
        self._write_out()


def _flush_all_at_exit() -> None:
    for w in list(_LIVE):
        w._drain_at_exit(_EXIT_WAIT_S)


atexit.register(_flush_all_at_exit)


# -- tf.summary.FileWriter -----------------------------------------------------------------
def _is_proto(value: Any, name: str) -> bool:
    desc = getattr(value, "DESCRIPTOR", None)
    return getattr(desc, "name", None) == name and hasattr(value, "SerializeToString")


class FileWriter:
    """``tf.summary.FileWriter``: writes summaries, graphs and session logs to an event
    file in ``logdir`` for TensorBoard.

    :param logdir: the directory of the event file (created if missing)
    :param graph: a ``Graph`` (or, deprecated, a ``GraphDef``) written first, with a
        ``MetaGraphDef`` of it
    :param max_queue: events gathered in memory before the writer thread is woken to
        write them out
    :param flush_secs: the longest time an event stays in memory
    :param graph_def: deprecated spelling of ``graph``
    :param filename_suffix: appended to the event file's name
    :param session: accepted for TF's signature; events are written from Python either way
    """

    def __init__(self, logdir: str, graph: Any = None, max_queue: int = 10,
                 flush_secs: float = 120, graph_def: Any = None,
                 filename_suffix: str | None = None, session: Any = None):
        del session
        self.event_writer = EventFileWriter(logdir, max_queue, flush_secs, filename_suffix)
        self._closed = False
        self._session_run_tags: set[str] = set()
        self._seen_summary_tags: set[str] = set()
        if graph is not None or graph_def is not None:
            self.add_graph(graph=graph, graph_def=graph_def)
            gd = graph.as_graph_def(add_shapes=True) if isinstance(graph, Graph) \
                else (graph_def if graph_def is not None else graph)
            self.add_meta_graph(_meta_graph_of(gd))

    def __enter__(self) -> "FileWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def get_logdir(self) -> str:
        """The directory the event files are written to."""
        return self.event_writer.get_logdir()

    def add_summary(self, summary: Any, global_step: int | None = None) -> None:
        """Write a ``Summary`` (a proto, or its serialized bytes as ``sess.run`` of a
        summary op returns) at ``global_step``. A value's ``metadata`` is kept only on
        the first value of its tag, as TF does."""
        raw = None
        if isinstance(summary, (bytes, bytearray)) or hasattr(summary, "dtype"):
            raw = _as_bytes(summary)
            summary = summary_pb2.Summary.FromString(raw)
        elif not _is_proto(summary, "Summary"):
            raise TypeError(f"add_summary expects a Summary proto or its serialized bytes, "
                            f"got {type(summary).__name__}")
        elif not isinstance(summary, summary_pb2.Summary):
            summary = summary_pb2.Summary.FromString(summary.SerializeToString())
        stripped = None
        for i, value in enumerate(summary.value):
            if not value.HasField("metadata"):
                continue
            if value.tag in self._seen_summary_tags:
                if stripped is None:
                    stripped = summary_pb2.Summary()
                    stripped.CopyFrom(summary)
                stripped.value[i].ClearField("metadata")
            else:
                self._seen_summary_tags.add(value.tag)
        if stripped is not None:
            self._add_event(event_pb2.Event(summary=stripped), global_step)
            return
        # an Event is its header fields followed by field 5, the Summary's bytes: no copy
        # of the Summary into an Event and out again
        self._warn_if_closed()
        head = event_pb2.Event(wall_time=time.time())
        if global_step is not None:
            head.step = int(global_step)
        body = summary.SerializeToString() if raw is None else raw
        self.event_writer.add_serialized(head.SerializeToString() + b"\x2a" +
                                         _varint(len(body)) + body)

    def add_session_log(self, session_log: Any, global_step: int | None = None) -> None:
        """Write a ``SessionLog`` (START, STOP, CHECKPOINT) at ``global_step``."""
        event = event_pb2.Event()
        event.session_log.ParseFromString(session_log.SerializeToString())
        self._add_event(event, global_step)

    def add_graph(self, graph: Any, global_step: int | None = None,
                  graph_def: Any = None) -> None:
        """Write a ``Graph`` (with its static shapes) or, deprecated, a ``GraphDef``.

        :raises ValueError: if both ``graph`` and ``graph_def`` are given
        :raises TypeError: if neither is a ``Graph`` or ``GraphDef``
        """
        if graph is not None and graph_def is not None:
            raise ValueError("Please pass only graph, or graph_def (deprecated), but not "
                             "both.")
        if isinstance(graph, Graph) or isinstance(graph_def, Graph):
            g = graph if isinstance(graph, Graph) else graph_def
            true_graph_def = g.as_graph_def(add_shapes=True)
        elif _is_proto(graph, "GraphDef") or _is_proto(graph_def, "GraphDef"):
            _log.warning("Passing a `GraphDef` to the SummaryWriter is deprecated. Pass a "
                         "`Graph` object instead, such as `sess.graph`.")
            true_graph_def = graph if _is_proto(graph, "GraphDef") else graph_def
        else:
            raise TypeError("The passed graph must be an instance of `Graph` or the "
                            "deprecated `GraphDef`")
        self._add_event(event_pb2.Event(graph_def=true_graph_def.SerializeToString()),
                        global_step)

    def add_meta_graph(self, meta_graph_def: Any, global_step: int | None = None) -> None:
        """Write a ``MetaGraphDef``.

        :raises TypeError: if it is not one
        """
        if not _is_proto(meta_graph_def, "MetaGraphDef"):
            raise TypeError("meta_graph_def must be type MetaGraphDef, saw type: "
                            f"{type(meta_graph_def)}")
        self._add_event(event_pb2.Event(meta_graph_def=meta_graph_def.SerializeToString()),
                        global_step)

    def add_run_metadata(self, run_metadata: Any, tag: str,
                         global_step: int | None = None) -> None:
        """Write a ``RunMetadata`` (from ``sess.run(..., run_metadata=)``) under ``tag``.

        :raises ValueError: if ``tag`` was used before by this writer
        """
        if tag in self._session_run_tags:
            raise ValueError("The provided tag was already used for this event type")
        self._session_run_tags.add(tag)
        tagged = event_pb2.TaggedRunMetadata(tag=tag,
                                             run_metadata=run_metadata.SerializeToString())
        self._add_event(event_pb2.Event(tagged_run_metadata=tagged), global_step)

    def add_event(self, event: Any) -> None:
        """Write an ``Event`` as it is (its ``wall_time`` and ``step`` untouched)."""
        self._warn_if_closed()
        if not isinstance(event, event_pb2.Event):
            event = event_pb2.Event.FromString(event.SerializeToString())
        self.event_writer.add_event(event)

    def flush(self) -> None:
        """Write every pending event to disk now."""
        self._warn_if_closed()
        self.event_writer.flush()

    def close(self) -> None:
        """Flush and close the event file; later events are dropped until
        :meth:`reopen`."""
        self.event_writer.close()
        self._closed = True

    def reopen(self) -> None:
        """Write again after :meth:`close` (to a new event file)."""
        self.event_writer.reopen()
        self._closed = False

    def _add_event(self, event: event_pb2.Event, step: Any) -> None:
        self._warn_if_closed()
        event.wall_time = time.time()
        if step is not None:
            event.step = int(step)
        self.event_writer.add_event(event)

    def _warn_if_closed(self) -> None:
        if self._closed:
            warnings.warn("Attempting to use a closed FileWriter. The operation will be a "
                          "noop unless the FileWriter is explicitly reopened.")


def _varint(n: int) -> bytes:
    """``n`` (>= 0) as a protobuf base-128 varint."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _as_bytes(value: Any) -> bytes:
    if hasattr(value, "dtype"):  # a numpy scalar or 0-d array from sess.run
        value = value.item() if getattr(value, "ndim", 0) == 0 else value
    if isinstance(value, str):
        return value.encode()
    if not isinstance(value, (bytes, bytearray)):
        raise TypeError(f"add_summary expects a Summary proto or its serialized bytes, "
                        f"got {type(value).__name__}")
    return bytes(value)


def _meta_graph_of(graph_def: Any) -> meta_graph_pb2.MetaGraphDef:
    mg = meta_graph_pb2.MetaGraphDef()
    # TF parses tensorflow_version as a version number (the TF API flowrt follows);
    # flowrt's own version goes in the git-version field
    mg.meta_info_def.tensorflow_version = "1.15.0"
    mg.meta_info_def.tensorflow_git_version = f"flowrt {VERSION}"
    if isinstance(graph_def, graph_def_pb2.GraphDef):
        mg.graph_def.CopyFrom(graph_def)
    else:
        mg.graph_def.ParseFromString(graph_def.SerializeToString())
    return mg


class FileWriterCache:
    """``tf.summary.FileWriterCache``: one shared :class:`FileWriter` per logdir."""

    _cache: dict[str, FileWriter] = {}
    _lock = threading.RLock()

    @staticmethod
    def clear() -> None:
        """Close every cached writer and forget them."""
        with FileWriterCache._lock:
            for w in FileWriterCache._cache.values():
                w.close()
            FileWriterCache._cache = {}

    @staticmethod
    def discard(logdir: str, writer: FileWriter) -> None:
        """Close ``writer`` and forget it if it is the cached writer of ``logdir`` (a
        flowrt addition: a monitored session releases the writers its hooks took)."""
        with FileWriterCache._lock:
            if FileWriterCache._cache.get(logdir) is writer:
                del FileWriterCache._cache[logdir]
        writer.close()

    @staticmethod
    def get(logdir: str) -> FileWriter:
        """The writer of ``logdir``, made (with the default graph) on first use."""
        with FileWriterCache._lock:
            if logdir not in FileWriterCache._cache:
                FileWriterCache._cache[logdir] = FileWriter(logdir,
                                                            graph=get_default_graph())
            return FileWriterCache._cache[logdir]


#: the names this module gives ``tf.*`` (published by the standard plugin's summary_api)
API: dict[str, Any] = {
    "summary.FileWriter": FileWriter,
    "summary.FileWriterCache": FileWriterCache,
    "train.summary_iterator": summary_iterator,
    "Summary": summary_pb2.Summary,
    "summary.Summary": summary_pb2.Summary,
    "summary.SummaryDescription": summary_pb2.SummaryDescription,
    "SummaryMetadata": summary_pb2.SummaryMetadata,
    "HistogramProto": summary_pb2.HistogramProto,
    "Event": event_pb2.Event,
    "summary.Event": event_pb2.Event,
    "SessionLog": event_pb2.SessionLog,
    "summary.SessionLog": event_pb2.SessionLog,
    "LogMessage": event_pb2.LogMessage,
    "summary.TaggedRunMetadata": event_pb2.TaggedRunMetadata,
}
