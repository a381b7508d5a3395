"""``tf.data``'s file datasets: ``TFRecordDataset``, ``TextLineDataset`` and
``FixedLengthRecordDataset`` (TF 1.15 signatures), source datasets over the record
formats of :mod:`flowrt.inputs.readers`.

Each element is one record, a string scalar. ``filenames`` is a string scalar or vector
(a tensor, read when the iterator is initialized) or a dataset of file names.
``num_parallel_reads`` reads that many files at once and interleaves their records one
by one in a fixed order (TF's deterministic parallel interleave); otherwise the files are
read one after another. ``buffer_size`` is accepted and has no effect on the values.

Where the kernel that runs a dataset has file roots to respect (a server's
``file_roots``), it gives the dataset's environment a check (:func:`set_file_check`),
and every file name is checked with it before the file is opened
(:func:`checked_name`): a name outside the roots raises PermissionDeniedError naming
the dataset, the kernel's op and node, the path and the roots.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np

from ..base import dtypes as _dt
from ..base import errors
from ..base.tensor_shape import TensorShape
from .dataset import Dataset, Env
from .readers import FixedLengthSource, RecordSource, TextLineSource, TFRecordSource

__all__ = ["TFRecordDataset", "TextLineDataset", "FixedLengthRecordDataset",
           "set_file_check", "file_check", "checked_name"]

#: ``check(path, what, write=False) -> path``: raises PermissionDeniedError for a path
#: the running kernel's file roots do not allow (``what``: the dataset, for the message)
FileCheck = Callable[..., str]


def set_file_check(env: Env, check: FileCheck | None) -> None:
    """Make ``check`` the file check of the datasets that run in ``env`` (and in the
    environments of their functions, made from it); None: no restriction."""
    env._file_check = check  # type: ignore[attr-defined]  # not a field of Env


def file_check(env: Env | None) -> FileCheck | None:
    """The file check of ``env`` or of the nearest environment it was made from (None:
    unrestricted)."""
    while env is not None:
        check = getattr(env, "_file_check", None)
        if check is not None:
            return check
        env = env.parent
    return None


def checked_name(env: Env | None, name: bytes, what: str) -> bytes:
    """``name`` (a file name a dataset is about to open) once ``env``'s file check
    allows reading it.

    :raises errors.PermissionDeniedError: when it lies outside the file roots"""
    check = file_check(env)
    if check is not None:
        check(name.decode("utf-8", "surrogateescape"), what)
    return name


_END = object()


def _interleave(sources: Iterator[Iterator[bytes]], cycle_length: int) -> Iterator[bytes]:
    """Records of ``cycle_length`` iterators at a time, one from each in turn (TF's
    interleave with block_length 1): an exhausted slot is refilled with the next
    iterator when the cycle comes back to it."""
    slots: list[Iterator[bytes] | None] = [None] * cycle_length
    i = n_open = 0
    end_of_input = False
    while not end_of_input or n_open:
        s = slots[i]
        if s is not None:
            rec = next(s, _END)
            if rec is not _END:
                yield rec  # type: ignore[misc]
            else:
                slots[i] = None
                n_open -= 1
            i = (i + 1) % cycle_length
        elif not end_of_input:
            nxt = next(sources, None)
            if nxt is None:
                end_of_input = True
            else:
                slots[i] = nxt
                n_open += 1
        else:
            i = (i + 1) % cycle_length


class _FileDataset(Dataset):
    """A dataset of the records of files, one string scalar per record."""

    _transformation = "FileDataset"

    def __init__(self, filenames: Any, compression_type: Any, buffer_size: Any,
                 num_parallel_reads: Any) -> None:
        """Capture the arguments: ``filenames`` (a string scalar or vector, or a
        dataset of file names) and the scalars, all read when the iterator starts."""
        inputs: tuple[Dataset, ...] = ()
        if isinstance(filenames, Dataset):
            if filenames._types != [_dt.string] or filenames._shapes[0].ndims not in (None, 0):
                raise TypeError(f"`filenames` must be a dataset of tf.string scalars, got "
                                f"types {filenames.output_types}")
            inputs = (filenames,)
        super().__init__(None, [_dt.string], [TensorShape([])], inputs)
        self._files_ds = filenames if inputs else None
        self._files = None
        if not inputs:
            self._files = self._capture(filenames, _dt.string, "filenames")
            if self._files.shape.ndims not in (None, 0, 1):
                raise ValueError(f"`filenames` must be a scalar or a vector, got shape "
                                 f"{self._files.shape}")
        self._compression = self._capture(compression_type or "", _dt.string,
                                          "compression_type")
        self._buffer = None if buffer_size is None else \
            self._capture(buffer_size, _dt.int64, "buffer_size")
        self._parallel = None if num_parallel_reads is None else \
            self._capture(num_parallel_reads, _dt.int64, "num_parallel_reads")

    def _source(self, compression: str, env: Env) -> RecordSource:
        raise NotImplementedError("need _source")

    def _names(self, env: Env) -> Iterator[bytes]:
        if self._files_ds is not None:
            for el in self._files_ds._elements(env):
                yield np.asarray(el[0], dtype=object).reshape(()).item()
            return
        for v in np.asarray(env.value(self._files), dtype=object).reshape(-1):
            yield v if isinstance(v, bytes) else str(v).encode()

    def _elements(self, env: Env) -> Iterator[tuple[Any, ...]]:
        comp = np.asarray(env.value(self._compression), dtype=object).item()
        source = self._source(comp.decode() if isinstance(comp, bytes) else str(comp), env)
        if self._buffer is not None and int(env.value(self._buffer)) < 0:
            raise errors.InvalidArgumentError(None, None, "buffer_size must be >= 0")
        cycle = 1
        if self._parallel is not None:
            cycle = int(env.value(self._parallel))
            if cycle <= 0:
                raise errors.InvalidArgumentError(None, None,
                                                  "num_parallel_reads must be > 0")
        what = self._transformation
        files = ((v for _k, v in source.records(checked_name(env, name, what)))
                 for name in self._names(env))
        for rec in _interleave(files, cycle):
            yield (np.array(rec, dtype=object),)


class TFRecordDataset(_FileDataset):
    """The records of TFRecord files (``tf.data.TFRecordDataset``);
    ``compression_type`` ``""``, ``"ZLIB"`` or ``"GZIP"``. A corrupt record ends the
    iteration with DataLossError naming the file and offset."""

    _transformation = "TFRecordDataset"

    def __init__(self, filenames: Any, compression_type: Any = None, buffer_size: Any = None,
                 num_parallel_reads: Any = None) -> None:
        super().__init__(filenames, compression_type, buffer_size, num_parallel_reads)

    def _source(self, compression: str, env: Env) -> RecordSource:
        return TFRecordSource(compression)


class TextLineDataset(_FileDataset):
    """The lines of text files without their line ends (``tf.data.TextLineDataset``)."""

    _transformation = "TextLineDataset"

    def __init__(self, filenames: Any, compression_type: Any = None, buffer_size: Any = None,
                 num_parallel_reads: Any = None) -> None:
        super().__init__(filenames, compression_type, buffer_size, num_parallel_reads)

    def _source(self, compression: str, env: Env) -> RecordSource:
        return TextLineSource(0, compression)


class FixedLengthRecordDataset(_FileDataset):
    """Records of ``record_bytes`` bytes of files between a header and a footer
    (``tf.data.FixedLengthRecordDataset``). An uncompressed file whose body is not a
    whole number of records raises InvalidArgumentError when it is reached."""

    _transformation = "FixedLengthRecordDataset"

    def __init__(self, filenames: Any, record_bytes: Any, header_bytes: Any = None,
                 footer_bytes: Any = None, buffer_size: Any = None,
                 compression_type: Any = None, num_parallel_reads: Any = None) -> None:
        super().__init__(filenames, compression_type, buffer_size, num_parallel_reads)
        self._sizes = [self._capture(v or 0, _dt.int64, n) for v, n in
                       ((record_bytes, "record_bytes"), (header_bytes, "header_bytes"),
                        (footer_bytes, "footer_bytes"))]

    def _source(self, compression: str, env: Env) -> RecordSource:
        record, header, footer = (int(env.value(t)) for t in self._sizes)
        return FixedLengthSource(record, header, footer, 0, compression, exact=True)


#: the names of this module under ``tf.*`` (published by the standard plugin)
API: dict[str, Any] = {}
for _cls in (TFRecordDataset, TextLineDataset, FixedLengthRecordDataset):
    API[f"data.{_cls.__name__}"] = _cls
