"""Checkpoints on disk: atomic saves, merges, recovery and the reader.

A checkpoint with prefix ``P`` is TensorFlow's V2 tensor bundle, ``P.index`` plus the
data files ``P.data-KKKKK-of-NNNNN``, written byte for byte as TF writes it (the layout
is in :mod:`flowrt.framework.tensor_bundle` and docs/checkpoints.md). Also read: V1
checkpoints (one table file) and flowrt's earlier layout (an index starting with
``FRTCKIDX``: a header and a ``flowrt.CheckpointIndex``; data files with a header).

Data files and the index are written under TF's temporary names
(``<final name>.tempstate<random>``, one random token per save), flushed and fsynced;
then the data files are renamed into place (``os.replace``) and the index last, the
renames back to back: the presence of ``P.index`` marks a complete checkpoint and every
name is TF's once a save has completed. Overwriting a prefix has the same short window
TF has, between the data renames and the index rename; a reader that finds the index
and its data disagreeing (shard sizes, per-tensor CRC-32) while the save's complete
temporary index is present reads that one, and the next save's clean-up completes
such an interrupted save (or discards one that had renamed nothing). Nothing here uses
pickle.
"""
from __future__ import annotations

import errno
import glob
import os
import re
import shutil
import struct
import sys
import time
import uuid
import zlib
from typing import Any, BinaryIO, Callable, Iterable, Sequence

import numpy as np

from ..base import dtypes as _dt
from ..base import errors
from ..framework import tensor_bundle as _tb
from ..proto import tensor_bundle_pb2

__all__ = [
    "FORMAT_VERSION", "CheckpointReader", "write_checkpoint", "merge_checkpoints",
    "write_v1_checkpoint",
    "index_filename", "data_filename", "sharded_filename", "sharded_filespec",
    "checkpoint_exists", "remove_checkpoint_files", "cleanup_stale_files",
    "recover_interrupted_saves",
    "atomic_write", "AtomicFile", "fsync_dir", "is_temp_name",
    "parse_shape_and_slice", "slice_spec", "slice_key", "split_slice_key", "SLICE_MARK",
]

#: The layout version written into both headers; readers refuse newer versions.
FORMAT_VERSION = 1
INDEX_MAGIC = b"FRTCKIDX"
DATA_MAGIC = b"FRTCKDAT"
#: magic, version, payload length, CRC-32 (of bytes 0-19 and the payload)
_INDEX_HEADER = struct.Struct("<8sIQI")
#: magic, version, CRC-32 of bytes 0-11
_DATA_HEADER = struct.Struct("<8sII")
INDEX_HEADER_SIZE = _INDEX_HEADER.size  # 24
DATA_HEADER_SIZE = _DATA_HEADER.size  # 16
#: Legacy: flowrt versions before issue 14 wrote every second overwrite of a prefix to
#: ``<data file>.alt``. Such files are still read when an index names them and are
#: deleted by the next save to (or the removal of) that prefix; nothing writes them now.
ALT_SUFFIX = ".alt"
#: TF's BundleWriter temporary-file infix: ``<final name>.tempstate<random uint64>``.
TEMPSTATE = ".tempstate"
_LEN = struct.Struct("<Q")
#: Temporaries: TF-style ``.tempstate<digits>`` (data and index files) and
#: ``.tmp-<hex>`` (AtomicFile: state file, meta graph; data/index of older flowrt).
_TEMP_FILE_RE = re.compile(r"(?:\.tmp-[0-9a-f]{32}|" + re.escape(TEMPSTATE) + r"\d+)$")
_PENDING_INDEX_RE = re.compile(r"(.+)\.index" + re.escape(TEMPSTATE) + r"(\d+)$")
_TEMP_DIR_RE = re.compile(r"_temp_[0-9a-f]{32}$")
_LITTLE = sys.byteorder == "little"
_UNSAVEABLE = (_dt.resource, _dt.variant)


def _pb() -> Any:

    return tensor_bundle_pb2


# -- names --------------------------------------------------------------------------------
def index_filename(prefix: str) -> str:
    """``<prefix>.index``: the file whose presence marks a complete checkpoint."""
    return f"{prefix}.index"


def data_filename(prefix: str, shard: int, num_shards: int) -> str:
    """``<prefix>.data-KKKKK-of-NNNNN`` (the plain name of a data file)."""
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


def sharded_filename(basename: str, shard: int, num_shards: int) -> str:
    """TF's ``ShardedFilename``: ``<basename>-KKKKK-of-NNNNN``."""
    return f"{basename}-{shard:05d}-of-{num_shards:05d}"


def sharded_filespec(basename: str, num_shards: int) -> str:
    """TF's ``ShardedFilespec``: ``<basename>-?????-of-NNNNN``."""
    return f"{basename}-?????-of-{num_shards:05d}"


def checkpoint_exists(prefix: str) -> bool:
    """Whether ``prefix`` names a complete checkpoint: its index file exists, or it is
    a V1 checkpoint (a file, or a pattern matching its shards)."""
    prefix = os.fspath(prefix)
    return os.path.isfile(index_filename(prefix)) or bool(_v1_paths(prefix))


def is_temp_name(name: str) -> bool:
    """Whether a file or directory name is one of the temporaries a save creates."""
    return bool(_TEMP_FILE_RE.search(name) or _TEMP_DIR_RE.search(name))


def _data_file_re(base: str) -> re.Pattern[str]:
    return re.compile(re.escape(base) + r"\.data-\d{5}-of-\d{5}(?:" + re.escape(ALT_SUFFIX)
                      + r")?$")


# -- OS errors as TF errors --------------------------------------------------------------
def _os_error(e: OSError, what: str) -> errors.OpError:
    msg = f"{what}: {e.strerror or e}"
    if e.errno == errno.ENOENT:
        return errors.NotFoundError(None, None, msg)
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return errors.PermissionDeniedError(None, None, msg)
    if e.errno == errno.ENOSPC:
        return errors.ResourceExhaustedError(None, None, msg)
    if e.errno in (errno.ENOTDIR, errno.EISDIR):
        return errors.FailedPreconditionError(None, None, msg)
    return errors.UnknownError(None, None, msg)


# -- atomic files ------------------------------------------------------------------------
def fsync_dir(path: str) -> None:
    """Make renames inside directory ``path`` durable (a no-op where unsupported)."""
    try:
        fd = os.open(path or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class AtomicFile:
    """A file written under a temporary name beside ``path`` and renamed into place.

    On a normal exit from the ``with`` block the data is flushed and fsynced and the
    temporary file replaces ``path`` (the directory is fsynced too); on an exception the
    temporary file is removed and ``path`` is untouched. The temporary name is
    ``<path>.tmp-<32 hex digits>``; :func:`cleanup_stale_files` removes leftovers.
    """

    def __init__(self, path: str, sync_dir: bool = True):
        self.path = os.fspath(path)
        self.temp = f"{self.path}.tmp-{uuid.uuid4().hex}"
        self.sync_dir = sync_dir
        self._f: BinaryIO | None = None

    def __enter__(self) -> BinaryIO:
        try:
            self._f = open(self.temp, "wb")
        except OSError as e:
            raise _os_error(e, f"cannot create {self.temp}") from None
        return self._f

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        f = self._f
        assert f is not None
        if exc_type is not None:
            f.close()
            _unlink_quiet(self.temp)
            return
        try:
            f.flush()
            os.fsync(f.fileno())
            f.close()
            os.replace(self.temp, self.path)
        except OSError as e:
            f.close()
            _unlink_quiet(self.temp)
            raise _os_error(e, f"cannot write {self.path}") from None
        if self.sync_dir:
            fsync_dir(os.path.dirname(self.path))


def atomic_write(path: str, data: bytes | str) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, ``os.replace``)."""
    if isinstance(data, str):
        data = data.encode()
    with AtomicFile(path) as f:
        f.write(data)


def _unlink_quiet(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# -- tensor encodings --------------------------------------------------------------------
def _le_dtype(dtype: _dt.DType) -> np.dtype:
    npd = dtype.np
    if _LITTLE or npd.itemsize == 1:
        return npd
    return npd.newbyteorder("<")


def _read_exact(f: BinaryIO, buf: np.ndarray) -> int:
    view = memoryview(buf).cast("B")
    got = 0
    n = len(view)
    while got < n:
        k = f.readinto(view[got:])
        if not k:
            break
        got += k
    return got


def _decode_strings(raw: memoryview, count: int, name: str, path: str) -> np.ndarray:
    out = np.empty(count, dtype=object)
    pos, end = 0, len(raw)
    for i in range(count):
        if pos + 8 > end:
            raise errors.DataLossError(None, None, f"string tensor '{name}' in {path} is "
                                       "shorter than its element count")
        (n,) = _LEN.unpack_from(raw, pos)
        pos += 8
        if pos + n > end:
            raise errors.DataLossError(None, None, f"string tensor '{name}' in {path} has "
                                       "an element running past its end")
        out[i] = bytes(raw[pos:pos + n])
        pos += n
    if pos != end:
        raise errors.DataLossError(None, None, f"string tensor '{name}' in {path} has "
                                   f"{end - pos} trailing bytes")
    return out


def _decode_index(blob: bytes, path: str) -> Any:
    """Check and parse the index file ``blob`` read from ``path``.

    The header's magic number, length and CRC-32 (over the header and the payload) are
    verified before the ``CheckpointIndex`` payload is parsed.

    :returns: the ``CheckpointIndex`` message
    :raises DataLossError: if the file is truncated, corrupted or not a flowrt index
    :raises UnimplementedError: if it has a newer format version than this flowrt reads
    """
    if len(blob) < INDEX_HEADER_SIZE:
        raise errors.DataLossError(None, None, f"Checkpoint index file {path} is truncated: "
                                   f"{len(blob)} bytes, shorter than its "
                                   f"{INDEX_HEADER_SIZE}-byte header")
    magic, version, length, crc = _INDEX_HEADER.unpack_from(blob)
    if magic != INDEX_MAGIC:
        raise errors.DataLossError(None, None, f"Checkpoint index file {path} is corrupted "
                                   f"or not a flowrt checkpoint index (bad magic number "
                                   f"{magic!r})")
    have = len(blob) - INDEX_HEADER_SIZE
    if have < length:
        raise errors.DataLossError(None, None, f"Checkpoint index file {path} is truncated: "
                                   f"the header announces {length} bytes of index, "
                                   f"{have} are present")
    if have > length:
        raise errors.DataLossError(None, None, f"Checkpoint index file {path} is corrupted: "
                                   f"{have - length} bytes follow the index")
    payload = memoryview(blob)[INDEX_HEADER_SIZE:]
    calc = zlib.crc32(payload, zlib.crc32(memoryview(blob)[:20]))
    if calc != crc:
        raise errors.DataLossError(None, None, f"Checkpoint index file {path} is corrupted: "
                                   f"checksum does not match (stored {crc:#010x}, "
                                   f"computed {calc:#010x})")
    if version > FORMAT_VERSION:
        raise errors.UnimplementedError(None, None, f"Checkpoint index file {path} has "
                                        f"format version {version}; this flowrt reads "
                                        f"versions up to {FORMAT_VERSION}")
    index = _pb().CheckpointIndex()
    try:
        index.ParseFromString(bytes(payload))
    except Exception as e:  # google.protobuf.message.DecodeError
        raise errors.DataLossError(None, None, f"Checkpoint index file {path} is corrupted: "
                                   f"cannot parse the index ({e})") from None
    return index


def _remove_unreferenced(prefix: str, keep: Iterable[str]) -> None:
    """Delete data files of ``prefix`` that its (new) index does not name: the replaced
    checkpoint's other shards (another shard count) or legacy ``.alt`` files."""
    d = os.path.dirname(prefix) or "."
    rx = _data_file_re(os.path.basename(prefix))
    keep = set(keep)
    try:
        names = os.listdir(d)
    except OSError:
        return
    for n in names:
        if n not in keep and rx.match(n):
            _unlink_quiet(os.path.join(d, n))


# -- the commit of one save ---------------------------------------------------------------
def _new_token() -> str:
    """A random uint64 in decimal, as TF's ``random::New64()`` in ``.tempstate<N>``."""
    return str(int.from_bytes(os.urandom(8), "little"))


def _temp_path(path: str, token: str) -> str:
    return f"{path}{TEMPSTATE}{token}"


def _write_synced(path: str, data: bytes) -> None:
    """Create ``path`` holding ``data``, flushed and fsynced (a temporary name already:
    no rename here)."""
    try:
        with open(path, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        _unlink_quiet(path)
        raise _os_error(e, f"cannot write {path}") from None


def _rename_all(pairs: Sequence[tuple[str, str]]) -> None:
    """``os.replace`` each ``(temporary, final)`` pair in order, back to back.

    Once the first rename has happened the rest must follow, or the old index would be
    left naming new data: so an interrupt arriving in between (``KeyboardInterrupt``,
    ``SystemExit``) finishes the renames before it propagates. An ``OSError`` cannot be
    finished and becomes a TF error.
    """
    done = 0
    try:
        for src, dst in pairs:
            os.replace(src, dst)
            done += 1
    except OSError as e:
        src, dst = pairs[done]
        raise _os_error(e, f"cannot rename {src} to {dst}") from None
    except BaseException:
        # A signal is handled between bytecodes, possibly right after os.replace
        # returned and before ``done`` counted it: a missing source means "renamed".
        if done or not os.path.exists(pairs[0][0]):
            for src, dst in pairs[done:]:
                try:
                    os.replace(src, dst)
                except FileNotFoundError:
                    continue
                except OSError:
                    break
        raise


class _PendingSave:
    """The temporary files of one save to ``prefix``, and their commit.

    Every file of the save is named ``<final name>.tempstate<token>`` with one random
    token, so that a reader, or the clean-up of a later save, can pair an interrupted
    save's temporary index (``<prefix>.index.tempstate<token>``) with its data files.
    """

    def __init__(self, prefix: str, num_shards: int):
        self.prefix = prefix
        self.dirname = os.path.dirname(prefix)
        self.token = _new_token()
        base = os.path.basename(prefix)
        self.data_names = [data_filename(base, k, num_shards) for k in range(num_shards)]
        finals = [os.path.join(self.dirname, n) for n in self.data_names]
        self.data_pairs = [(_temp_path(p, self.token), p) for p in finals]
        final_index = index_filename(prefix)
        self.index_pair = (_temp_path(final_index, self.token), final_index)

    def data_temp(self, shard: int) -> str:
        """Where shard ``shard``'s data is to be written (or moved) before the commit."""
        return self.data_pairs[shard][0]

    def commit(self, index: bytes) -> None:
        """Write the index's temporary file, then rename the data files and the index
        into place, back to back (the only moment the old index can see new data), and
        delete data files of the prefix the new index does not name."""
        _write_synced(self.index_pair[0], index)
        # Make the temporaries' directory entries durable before any final name
        # changes: after a power loss the renamed data then always comes with the
        # temporary index that describes it, which recovery can use.
        fsync_dir(self.dirname)
        _rename_all(self.data_pairs + [self.index_pair])
        fsync_dir(self.dirname)
        _remove_unreferenced(self.prefix, self.data_names)

    def discard(self) -> None:
        """Remove whatever temporaries are left (after a failure)."""
        for temp, _ in self.data_pairs + [self.index_pair]:
            _unlink_quiet(temp)


def _make_dir(dirname: str, prefix: str) -> None:
    if dirname:
        try:
            os.makedirs(dirname, exist_ok=True)
        except OSError as e:
            raise _os_error(e, f"cannot create directory {dirname} for checkpoint "
                            f"{prefix}") from None


# -- slices ------------------------------------------------------------------------------
#: A slice of a partitioned variable ``v`` is stored as its own entry named
#: ``v`` + SLICE_MARK + its canonical spec ("4 2 0,2:0,2"); readers show ``v`` whole.
SLICE_MARK = "@slice="
Extents = list[tuple[int, int]]


def parse_shape_and_slice(spec: str, name: str = "") -> tuple[list[int], Extents]:
    """Parse TF's ``shape_and_slice`` string ``"d0 d1 ... s0:s1:..."`` (each ``s`` is
    ``start,length`` or ``-`` for the whole dimension) into the full shape and one
    ``(start, length)`` per dimension, ``-`` made explicit.

    :raises InvalidArgumentError: for a malformed spec or a slice outside the shape
    """
    full, extents = _tb.parse_slice_spec(spec, name)
    return full, [(start, size if length is None else length)
                  for size, (start, length) in zip(full, extents)]


def slice_spec(full: Sequence[int], extents: Extents) -> str:
    """The canonical spec of a slice: explicit ``start,length`` for every dimension."""
    return " ".join(str(int(d)) for d in full) + " " + ":".join(
        f"{int(s)},{int(n)}" for s, n in extents)


def slice_key(name: str, full: Sequence[int], extents: Extents) -> str:
    """The entry name a slice of ``name`` is stored under."""
    return name + SLICE_MARK + slice_spec(full, extents)


def split_slice_key(key: str) -> tuple[str, list[int], Extents] | None:
    """``(name, full shape, extents)`` of a slice entry's name; None for a whole tensor."""
    i = key.rfind(SLICE_MARK)
    if i < 0:
        return None
    try:
        full, extents = parse_shape_and_slice(key[i + len(SLICE_MARK):])
    except errors.InvalidArgumentError:
        return None
    return key[:i], full, extents


def _overlap(a: Extents, b: Extents) -> Extents | None:
    """The intersection of two slices (None when empty)."""
    out = []
    for (s1, n1), (s2, n2) in zip(a, b):
        lo, hi = max(s1, s2), min(s1 + n1, s2 + n2)
        if hi <= lo:
            return None
        out.append((lo, hi - lo))
    return out


# -- writing -----------------------------------------------------------------------------
def write_checkpoint(prefix: str, names: Sequence[str], values: Sequence[Any],
                     dtypes: Sequence[_dt.DType], slices: Sequence[str] | None = None
                     ) -> None:
    """Write a complete one-shard checkpoint at ``prefix`` in TF's layout (what
    ``SaveV2`` does): the same bytes TensorFlow's BundleWriter writes.

    The directory is created if needed. The data file and the index are written as
    ``<name>.tempstate<random>`` and fsynced, then renamed to
    ``<prefix>.data-00000-of-00001`` and ``<prefix>.index``, index last; afterwards data
    files of ``prefix`` that the new index does not name are deleted. On failure the
    temporaries are removed. ``slices`` (TF's ``shape_and_slices``) gives, per tensor,
    ``""`` for a whole tensor or the spec of the slice of a larger tensor it is.

    :raises InvalidArgumentError: duplicate names, a dtype that cannot be saved, or
        inconsistent slices
    """
    prefix = os.fspath(prefix)
    if not (len(names) == len(values) == len(dtypes)) or \
            (slices is not None and len(slices) != len(names)):
        raise errors.InvalidArgumentError(None, None, f"Got {len(names)} tensor names, "
                                          f"{len(values)} tensors and {len(dtypes)} dtypes")
    specs = list(slices) if slices else [""] * len(names)
    parsed = [_tb.parse_slice_spec(sp, n) if sp else None for n, sp in zip(names, specs)]
    seen: dict[str, list[Extents]] = {}
    for n, v, p in zip(names, values, parsed):
        if p is None:
            continue
        want = [d if ln is None else ln for d, (_, ln) in zip(p[0], p[1])]
        if list(np.shape(v)) != want:
            raise errors.InvalidArgumentError(None, None, f"Shape of tensor '{n}' "
                                              f"{list(np.shape(v))} does not match its "
                                              f"slice (of shape {want})")
        ext = [(s, w) for (s, _), w in zip(p[1], want)]
        for other in seen.setdefault(n, []):
            if all(w > 0 for w in want) and _overlap(other, ext) is not None:
                raise errors.InvalidArgumentError(None, None, f"Overlapping slices of "
                                                  f"tensor '{n}': '{slice_spec(p[0], other)}'"
                                                  f" and '{slice_spec(p[0], ext)}'")
        seen[n].append(ext)
    _make_dir(os.path.dirname(prefix), prefix)
    pending = _PendingSave(prefix, 1)
    temp = pending.data_temp(0)
    try:
        try:
            f = open(temp, "wb")
        except OSError as e:
            raise _os_error(e, f"cannot create {temp}") from None
        with f:
            w = _tb.BundleWriter(f)
            for n, v, d, p in zip(names, values, dtypes, parsed):
                if p is None:
                    w.add(n, v, d)
                else:
                    w.add_slice(n, p[0], p[1], v, d)
            try:
                f.flush()
                os.fsync(f.fileno())
            except OSError as e:
                raise _os_error(e, f"cannot write {temp}") from None
        pending.commit(_tb.encode_index(w.entries))
    except BaseException:
        pending.discard()
        raise


def write_v1_checkpoint(path: str, names: Sequence[str], values: Sequence[Any],
                        dtypes: Sequence[_dt.DType], slices: Sequence[str]) -> None:
    """Write a V1 checkpoint (TF's ``SaveSlices``) to the file ``path``, atomically."""
    path = os.fspath(path)
    _make_dir(os.path.dirname(path), path)
    with AtomicFile(path) as f:
        _tb.write_v1(f, names, values, dtypes, slices)


def merge_checkpoints(sources: Sequence[str], dest: str, delete_old_dirs: bool = True
                      ) -> None:
    """Merge complete checkpoints ``sources`` into one at ``dest`` as TF's
    ``MergeBundles`` does (what ``MergeV2Checkpoints`` does): entries merged (the
    slices of one tensor from several sources joined), data files numbered in the
    order their tensors are met.

    The data files are moved (renamed) to ``dest``'s temporary names, the merged index
    written, then all renamed into place as one commit (see :class:`_PendingSave`); the
    sources' index files are deleted, and with ``delete_old_dirs`` their directories
    too when that leaves them empty.

    :raises InvalidArgumentError: a (whole) tensor name appears in two sources
    :raises DataLossError: a source index is corrupted or not in TF's layout
    """
    dest = os.fspath(dest)
    merged: dict[str, Any] = {}
    shard_ids: dict[str, int] = {}
    num_shards, version, ipaths = 0, None, []
    for src in sources:
        src = os.fspath(src)
        ipath = index_filename(src)
        try:
            with open(ipath, "rb") as f:
                blob = f.read()
        except OSError as e:
            raise _os_error(e, f"cannot read checkpoint index {ipath}") from None
        header, entries = _tb.parse_index(blob, ipath)
        ipaths.append((src, ipath))
        num_shards += int(header.num_shards)
        version = version if version is not None else header.version
        for key, e in entries.items():
            have = merged.get(key)
            if have is not None:
                if not have.slices or not e.slices:
                    raise errors.InvalidArgumentError(None, None, f"Duplicate tensor keyed "
                                                      f"by {key} encountered, when merging "
                                                      f"prefix: {src}")
                have.slices.extend(e.slices)
                continue
            fname = data_filename(src, int(e.shard_id), int(header.num_shards))
            e.shard_id = shard_ids.setdefault(fname, len(shard_ids))
            merged[key] = e
    _make_dir(os.path.dirname(dest), dest)
    pending = _PendingSave(dest, len(shard_ids))
    try:
        for fname, k in shard_ids.items():
            _move(fname, pending.data_temp(k))
        pending.commit(_tb.encode_index(merged, num_shards, version))
    except BaseException:
        pending.discard()
        raise
    for src, ipath in ipaths:
        _unlink_quiet(ipath)
        if delete_old_dirs:
            try:
                os.rmdir(os.path.dirname(src) or ".")
            except OSError:
                pass


def _move(src: str, dst: str) -> None:
    """Rename ``src`` to the temporary name ``dst``, copying (fsynced) across file
    systems."""
    try:
        os.replace(src, dst)
        return
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise _os_error(e, f"cannot move {src} to {dst}") from None
    try:
        with open(src, "rb") as fi, open(dst, "wb") as fo:
            shutil.copyfileobj(fi, fo, 1 << 20)
            fo.flush()
            os.fsync(fo.fileno())
    except OSError as e:
        _unlink_quiet(dst)
        raise _os_error(e, f"cannot copy {src} to {dst}") from None
    _unlink_quiet(src)


# -- housekeeping ------------------------------------------------------------------------
def remove_checkpoint_files(prefix: str, meta_graph_suffix: str | None = "meta") -> None:
    """Delete a checkpoint: its index first (so it stops counting as complete), then
    its data files and its meta graph. Missing files are ignored."""
    prefix = os.fspath(prefix)
    _unlink_quiet(index_filename(prefix))
    _remove_unreferenced(prefix, ())
    if meta_graph_suffix:
        _unlink_quiet(f"{prefix}.{meta_graph_suffix}")


def recover_interrupted_saves(dirname: str) -> list[str]:
    """Finish the saves a killed process left between renaming its data files and its
    index; returns the prefixes rolled forward.

    For each temporary index ``<P>.index.tempstate<N>`` in ``dirname`` where ``P.index``
    exists but no longer describes the data on disk (every CRC-32 is checked), while
    the temporary index does (its data under ``.tempstate<N>`` names where not yet
    renamed): the remaining renames are done, index last, so ``P`` is the new
    checkpoint under TF's names. A save that had renamed nothing leaves ``P.index``
    intact and is left alone (its temporaries are stale: the caller deletes them).
    """
    done: list[str] = []
    try:
        names = os.listdir(dirname or ".")
    except OSError:
        return done
    found = []
    for n in names:
        m = _PENDING_INDEX_RE.match(n)
        if m:
            path = os.path.join(dirname, n)
            try:
                found.append((os.stat(path).st_mtime_ns, path, m.group(1), m.group(2)))
            except OSError:
                continue
    for _, path, base, token in sorted(found, reverse=True):  # the newest save first
        prefix = os.path.join(dirname, base)
        if not os.path.isfile(index_filename(prefix)):
            continue  # P never was complete: nothing to keep consistent
        try:
            _plain_bundle(prefix).verify()
            continue  # the old checkpoint is intact: the save is discarded
        except errors.OpError:
            pass
        try:
            b = _pending_bundle(prefix, path, token)
            b.verify()
            finals = [os.path.join(dirname, n) for n in b.filenames]
            pairs = [(p, f) for (p, _), f in zip(b.shards, finals) if p != f]
            _rename_all(pairs + [(path, index_filename(prefix))])
        except errors.OpError:
            continue  # neither index describes the data: nothing to roll forward to
        fsync_dir(dirname)
        _remove_unreferenced(prefix, b.filenames)
        done.append(prefix)
    return done


def cleanup_stale_files(dirname: str, family: str | None = None) -> list[str]:
    """Remove what killed saves left in ``dirname``: temporary files
    (``*.tempstate<N>``, ``*.tmp-<hex>``) and sharded-save directories
    (``*_temp_<hex>``); with ``family`` (a checkpoint basename such as
    ``model.ckpt``), also data files of checkpoints ``family`` / ``family-<step>``
    that have no index. Returns the removed paths.

    First, :func:`recover_interrupted_saves` completes a save killed between its data
    and index renames, so that deleting its temporary index cannot leave an index
    naming data it does not describe.

    Only one process should save into a directory at a time: a concurrent save's
    files in flight would look stale.
    """
    removed: list[str] = []
    recover_interrupted_saves(dirname)
    try:
        entries = list(os.scandir(dirname or "."))
    except OSError:
        return removed
    fam = None
    if family:
        fam = re.compile(re.escape(family) + r"(?:-\d+)?\.data-\d{5}-of-\d{5}(?:"
                         + re.escape(ALT_SUFFIX) + r")?$")
    for e in entries:
        name = e.name
        try:
            if _TEMP_DIR_RE.search(name) and e.is_dir(follow_symlinks=False):
                shutil.rmtree(e.path, ignore_errors=True)
                removed.append(e.path)
            elif _TEMP_FILE_RE.search(name) and e.is_file(follow_symlinks=False):
                _unlink_quiet(e.path)
                removed.append(e.path)
            elif fam is not None and fam.match(name):
                pre = name[:name.rindex(".data-")]
                if not os.path.exists(os.path.join(dirname or ".", pre + ".index")):
                    _unlink_quiet(e.path)
                    removed.append(e.path)
        except OSError:
            continue
    return removed


# -- reading -----------------------------------------------------------------------------
class _Bundle:
    """One index and the data files it names: checked for consistency on construction
    (names, sizes, entries), read and verified on demand.

    ``resolve`` maps a data file name recorded in the index to the path to read: the
    name in the index's directory, or for a save in flight the temporary name.
    """

    _crc = staticmethod(zlib.crc32)

    def __init__(self, index_path: str, index: Any, resolve: Callable[[str], str]):
        """Check ``index`` against its data files and build the table of entries.

        Each data file must exist and have the size the index records; each entry must be
        named once, lie inside its shard and have a saveable dtype. Tensor data is not read.

        :raises DataLossError: if the index or a data file is inconsistent
        :raises NotFoundError: if a data file is missing
        """
        self.index_path = index_path
        self.filenames: list[str] = []
        self.shards: list[tuple[str, int]] = []
        for s in index.shards:
            if not s.filename or os.path.basename(s.filename) != s.filename:
                raise errors.DataLossError(None, None, f"Checkpoint index file "
                                           f"{index_path} is corrupted: bad data file "
                                           f"name {s.filename!r}")
            path = resolve(s.filename)
            try:
                size = os.path.getsize(path)
            except FileNotFoundError:
                raise errors.NotFoundError(None, None, f"Checkpoint data file {path} is "
                                           f"missing (named by {index_path})") from None
            except OSError as e:
                raise _os_error(e, f"cannot read checkpoint data file {path}") from None
            if size != s.size:
                raise errors.DataLossError(None, None, f"Checkpoint data file {path} is "
                                           f"truncated or corrupted: {size} bytes, the index "
                                           f"{index_path} says {s.size}")
            self.filenames.append(s.filename)
            self.shards.append((path, int(s.size)))
        self.entries: dict[str, Any] = {}
        for e in index.entries:
            bad = None
            if e.name in self.entries:
                bad = f"tensor '{e.name}' is listed twice"
            elif not 0 <= e.shard < len(self.shards):
                bad = f"tensor '{e.name}' names shard {e.shard} of {len(self.shards)}"
            elif e.offset < DATA_HEADER_SIZE or \
                    e.offset + e.size > self.shards[e.shard][1]:
                bad = f"tensor '{e.name}' lies outside its data file"
            else:
                try:
                    dt = _dt.as_dtype(int(e.dtype))
                    if dt.base_dtype in _UNSAVEABLE or not dt.is_numpy_compatible:
                        raise TypeError
                except TypeError:
                    bad = f"tensor '{e.name}' has unknown dtype {e.dtype}"
            if bad is not None:
                raise errors.DataLossError(None, None, f"Checkpoint index file "
                                           f"{index_path} is corrupted: {bad}")
            self.entries[e.name] = e
        self._header_ok: set[int] = set()

    def _open_data(self, shard: int) -> tuple[BinaryIO, str]:
        path = self.shards[shard][0]
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            raise errors.NotFoundError(None, None, f"Checkpoint data file {path} is "
                                       f"missing (named by {self.index_path})") from None
        except OSError as e:
            raise _os_error(e, f"cannot read checkpoint data file {path}") from None
        if shard not in self._header_ok:
            try:
                _check_data_header(f, path)
            except BaseException:
                f.close()
                raise
            self._header_ok.add(shard)
        return f, path

    def read(self, entries: Sequence[Any]) -> list[np.ndarray]:
        """Read and verify the tensors ``entries`` (arrays, never scalars), opening each
        data file once."""
        out: list[Any] = [None] * len(entries)
        by_shard: dict[int, list[int]] = {}
        for i, e in enumerate(entries):
            by_shard.setdefault(e.shard, []).append(i)
        for shard, idxs in by_shard.items():
            f, path = self._open_data(shard)
            with f:
                for i in sorted(idxs, key=lambda k: entries[k].offset):
                    out[i] = self._read_entry(f, entries[i], path)
        return out

    def verify(self) -> None:
        """Check every tensor's bytes against its CRC-32 without decoding them: whether
        this index describes the data files now on disk.

        :raises DataLossError: a header, a size or a checksum does not match
        :raises NotFoundError: a data file is gone
        """
        by_shard: dict[int, list[Any]] = {}
        for e in self.entries.values():
            by_shard.setdefault(e.shard, []).append(e)
        for shard in range(len(self.shards)):
            f, path = self._open_data(shard)
            with f:
                for e in sorted(by_shard.get(shard, ()), key=lambda x: x.offset):
                    f.seek(int(e.offset))
                    crc, left = 0, int(e.size)
                    while left:
                        chunk = f.read(min(left, 1 << 20))
                        if not chunk:
                            raise errors.DataLossError(None, None, f"Checkpoint data file "
                                                       f"{path} is truncated: tensor "
                                                       f"'{e.name}' runs past its end")
                        crc = zlib.crc32(chunk, crc)
                        left -= len(chunk)
                    if crc != e.crc32:
                        raise _checksum_error(path, e, crc)

    def _read_entry(self, f: BinaryIO, e: Any, path: str) -> np.ndarray:
        """Read and verify the tensor of entry ``e`` from the open data file ``f`` (at ``path``).

        :returns: a new array of the entry's shape and dtype, in native byte order
            (``tf.string``: an object array of bytes)
        :raises DataLossError: if the data is truncated, its size does not fit the shape, or
            its CRC-32 does not match
        """
        dtype = _dt.as_dtype(int(e.dtype))
        shape = tuple(int(d.size) for d in e.shape.dim)
        size = int(e.size)
        f.seek(int(e.offset))
        if dtype is _dt.string:
            raw = np.empty(size, dtype=np.uint8)
            got = _read_exact(f, raw)
            buf: Any = raw
        else:
            npd = _le_dtype(dtype)
            count = int(np.prod(shape, dtype=np.int64))
            if count * npd.itemsize != size:
                raise errors.DataLossError(None, None, f"Checkpoint index file "
                                           f"{self.index_path} is corrupted: tensor "
                                           f"'{e.name}' of shape {list(shape)} and type "
                                           f"{dtype.name} cannot take {size} bytes")
            arr = np.empty(shape, dtype=npd)  # owns its memory: no copy when assigned
            buf = arr.reshape(-1).view(np.uint8)
            got = _read_exact(f, buf)
        if got != size:
            raise errors.DataLossError(None, None, f"Checkpoint data file {path} is "
                                       f"truncated: tensor '{e.name}' needs {size} bytes at "
                                       f"offset {e.offset}, {got} could be read")
        crc = self._crc(memoryview(buf).cast("B"))
        if crc != e.crc32:
            raise _checksum_error(path, e, crc)
        if dtype is _dt.string:
            count = int(np.prod(shape, dtype=np.int64))
            out = _decode_strings(memoryview(buf).cast("B"), count, e.name, path)
            out.shape = shape
            return out
        if npd.byteorder == "<" and not _LITTLE:
            arr = arr.astype(dtype.np)
        return arr


def _check_data_header(f: BinaryIO, path: str) -> None:
    head = f.read(DATA_HEADER_SIZE)
    if len(head) < DATA_HEADER_SIZE:
        raise errors.DataLossError(None, None, f"Checkpoint data file {path} is "
                                   "truncated: shorter than its header")
    magic, version, crc = _DATA_HEADER.unpack(head)
    if magic != DATA_MAGIC or zlib.crc32(head[:12]) != crc:
        raise errors.DataLossError(None, None, f"Checkpoint data file {path} is "
                                   "corrupted or not a flowrt checkpoint data file "
                                   "(bad header)")
    if version > FORMAT_VERSION:
        raise errors.UnimplementedError(None, None, f"Checkpoint data file {path} has "
                                        f"format version {version}; this flowrt reads "
                                        f"versions up to {FORMAT_VERSION}")


def _checksum_error(path: str, e: Any, crc: int) -> errors.DataLossError:
    return errors.DataLossError(None, None, f"Checkpoint data file {path} is corrupted: "
                                f"checksum of tensor '{e.name}' does not match (stored "
                                f"{e.crc32:#010x}, computed {crc:#010x})")


def _plain_bundle(prefix: str) -> _Bundle:
    """``<prefix>.index`` with the data files it names (TF's layout or flowrt's older
    one); without an index, a V1 checkpoint at ``prefix`` if there is one."""
    path = index_filename(prefix)
    if not os.path.exists(path):
        v1 = _v1_paths(prefix)
        if v1:
            return _V1Bundle(v1)
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"Unsuccessful TensorSliceReader constructor: "
                                   f"Failed to find any matching files for {prefix}"
                                   ) from None
    except IsADirectoryError:
        raise errors.NotFoundError(None, None, f"Unsuccessful TensorSliceReader constructor: "
                                   f"{path} is a directory, not a checkpoint index"
                                   ) from None
    except OSError as e:
        raise _os_error(e, f"cannot read checkpoint index {path}") from None
    d = os.path.dirname(prefix)
    return _bundle_of(prefix, path, blob, lambda name: os.path.join(d, name))


# -- TensorFlow's tensor bundles (flowrt's format) and V1 checkpoints -------------------
class _TFBundle(_Bundle):
    """A tensor bundle (TF's V2 layout, :mod:`flowrt.framework.tensor_bundle`): its
    entries as readers see them, each slice of a partitioned tensor as a slice entry."""

    def __init__(self, index_path: str, blob: bytes, base: str,
                 resolve: Callable[[str], str]):
        """Parse the index; check the data files exist with room for every entry.

        :raises DataLossError: a malformed index or an entry outside its data file
        :raises NotFoundError: a data file is missing
        """
        self.index_path = index_path
        self.header, raw = _tb.parse_index(blob, index_path)
        n = int(self.header.num_shards)
        self.filenames = [data_filename(base, k, n) for k in range(n)]
        self.shards = []
        for name in self.filenames:
            path = resolve(name)
            try:
                self.shards.append((path, os.path.getsize(path)))
            except FileNotFoundError:
                raise errors.NotFoundError(None, None, f"Checkpoint data file {path} is "
                                           f"missing (named by {index_path})") from None
            except OSError as e:
                raise _os_error(e, f"cannot read checkpoint data file {path}") from None
        self.entries = {}
        self._names: dict[int, str] = {}
        self._raw: dict[str, str] = {}
        self._raw_key = {id(e): k for k, e in raw.items()}
        for key, e in raw.items():
            if key.startswith("\x00"):
                continue  # a slice's data: reached from its tensor's entry
            if not e.slices:
                self._add(key, e)
                continue
            full = [int(d.size) for d in e.shape.dim]
            for piece, ext in _tb.sliced_pieces(key, e, raw, index_path):
                self._add(slice_key(key, full, ext), piece)

    def _add(self, name: str, e: Any) -> None:
        try:
            dt = _dt.as_dtype(int(e.dtype))
        except TypeError:
            dt = None
        if dt is None or dt.base_dtype in _UNSAVEABLE or \
                not 0 <= e.shard_id < len(self.shards) or e.offset < 0 or e.size < 0:
            raise errors.DataLossError(None, None, f"Checkpoint index file {self.index_path}"
                                       f" is corrupted: tensor '{name}' has an unknown dtype "
                                       "or shard")
        path, size = self.shards[e.shard_id]
        if e.offset + e.size > size:
            raise errors.DataLossError(None, None, f"Checkpoint data file {path} is truncated"
                                       f" or corrupted: tensor '{name}' runs to byte "
                                       f"{e.offset + e.size}, the file has {size} (named by "
                                       f"{self.index_path})")
        self.entries[name] = e
        self._names[id(e)] = name
        self._raw[name] = self._raw_key[id(e)]

    def read(self, entries: Sequence[Any]) -> list[np.ndarray]:
        """Read and verify the tensors ``entries``, opening each data file once."""
        out: list[Any] = [None] * len(entries)
        by_shard: dict[int, list[int]] = {}
        for i, e in enumerate(entries):
            by_shard.setdefault(int(e.shard_id), []).append(i)
        for shard, idxs in by_shard.items():
            f, path = self._open_data(shard)
            with f:
                for i in sorted(idxs, key=lambda k: entries[k].offset):
                    out[i] = _tb.read_tensor(f, entries[i], path, self._names[id(entries[i])])
        return out

    def verify(self) -> None:
        """Check every tensor against its CRC-32C."""
        for shard, (path, size) in enumerate(self.shards):
            if not os.path.exists(path) or os.path.getsize(path) != size:
                raise errors.DataLossError(None, None, f"Checkpoint data file {path} "
                                           "changed size")
        self.read(list(self.entries.values()))

    def _open_data(self, shard: int) -> tuple[BinaryIO, str]:
        path = self.shards[shard][0]
        try:
            return open(path, "rb"), path
        except FileNotFoundError:
            raise errors.NotFoundError(None, None, f"Checkpoint data file {path} is "
                                       f"missing (named by {self.index_path})") from None
        except OSError as e:
            raise _os_error(e, f"cannot read checkpoint data file {path}") from None

    def debug_lines(self) -> list[bytes]:
        """TF's BundleReader::DebugString lines: every row but the header and the
        entries of sliced tensors, in key order."""
        out = []
        for key, e in sorted((_tb._row_key(self._raw[n]), e) for n, e in self.entries.items()):
            dt = _dt.as_dtype(int(e.dtype)).name.upper()
            dt = {"FLOAT32": "FLOAT", "FLOAT64": "DOUBLE", "FLOAT16": "HALF"}.get(dt, dt)
            shape = ",".join(str(d.size) for d in e.shape.dim)
            out.append(key + f" (DT_{dt}) [{shape}]".encode())
        return out


class _V1Bundle(_Bundle):
    """A V1 checkpoint (TF's ``SaverDef.V1``: one table of SavedTensorSlices, or one per
    shard), read-only."""

    def __init__(self, paths: Sequence[str]):
        self.index_path = paths[0]
        self.filenames = [os.path.basename(p) for p in paths]
        self.shards = [(p, os.path.getsize(p)) for p in paths]
        self.entries = {}
        self._decoders: dict[int, Callable[[], np.ndarray]] = {}
        for name, (dtype, full, pieces) in _tb.read_v1(paths).items():
            for ext, decode in pieces:
                e = tensor_bundle_pb2.BundleEntryProto(dtype=dtype.as_datatype_enum)
                for _, n in ext:
                    e.shape.dim.add(size=n)
                whole = all(s == 0 and n == d for (s, n), d in zip(ext, full))
                key = name if whole and len(pieces) == 1 else slice_key(name, full, ext)
                self.entries[key] = e
                self._decoders[id(e)] = decode

    def read(self, entries: Sequence[Any]) -> list[np.ndarray]:
        return [self._decoders[id(e)]() for e in entries]

    def verify(self) -> None:
        self.read(list(self.entries.values()))


def _v1_paths(prefix: str) -> list[str]:
    """The files of a V1 checkpoint at ``prefix`` (itself, or the shards a pattern such as
    ``model.ckpt-?????-of-00002`` matches); empty when it is none."""
    paths = [prefix] if os.path.isfile(prefix) else sorted(glob.glob(prefix))
    out = []
    for p in paths:
        try:
            with open(p, "rb") as f:
                f.seek(0, 2)
                if f.tell() < 48:
                    continue
                f.seek(-8, 2)
                if struct.unpack("<Q", f.read(8))[0] == _tb.TABLE_MAGIC:
                    out.append(p)
        except OSError:
            continue
    return out


def _bundle_of(prefix: str, index_path: str, blob: bytes,
               resolve: Callable[[str], str]) -> _Bundle:
    """The checkpoint an index file's bytes describe: TF's layout or flowrt's older one
    (told apart by the leading magic)."""
    if blob[:len(INDEX_MAGIC)] == INDEX_MAGIC:
        return _Bundle(index_path, _decode_index(blob, index_path), resolve)
    return _TFBundle(index_path, blob, os.path.basename(prefix), resolve)


def _pending_indexes(prefix: str) -> list[tuple[str, str]]:
    """``(path, token)`` of the temporary indexes ``<prefix>.index.tempstate<token>``
    (of saves to ``prefix`` in flight or interrupted), newest first.

    One renamed into place while we look is still listed: callers rely on "nothing
    pending" meaning that no save had its data renamed and its index not yet (a save's
    temporary index exists from before its first rename until its last).
    """
    d = os.path.dirname(prefix)
    lead = os.path.basename(prefix) + ".index" + TEMPSTATE
    try:
        names = os.listdir(d or ".")
    except OSError:
        return []
    found = []
    for n in names:
        if n.startswith(lead) and n[len(lead):].isdigit():
            path = os.path.join(d, n)
            try:
                mtime = os.stat(path).st_mtime_ns
            except OSError:
                mtime = 0  # renamed into place meanwhile: still a sign of change
            found.append((mtime, path, n[len(lead):]))
    return [(p, t) for _, p, t in sorted(found, reverse=True)]


def _pending_bundle(prefix: str, path: str, token: str) -> _Bundle:
    """A save's temporary index with its data files: each under its temporary name
    while that still exists (not yet renamed), else under its final name."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise _os_error(e, f"cannot read checkpoint index {path}") from None
    d = os.path.dirname(prefix)

    def resolve(name: str) -> str:
        temp = os.path.join(d, _temp_path(name, token))
        return temp if os.path.exists(temp) else os.path.join(d, name)

    return _bundle_of(prefix, path, blob, resolve)


def _index_state(prefix: str) -> bytes | None:
    """What identifies ``<prefix>.index`` now (None if absent): its bytes, which hold
    every tensor's checksum. (Not the inode and mtime: saves in quick succession reuse
    inodes within one mtime tick.)"""
    try:
        with open(index_filename(prefix), "rb") as f:
            return f.read()
    except OSError:
        return None


def _open_bundle(prefix: str) -> _Bundle:
    """The checkpoint at ``prefix``: ``<prefix>.index`` and its data files.

    Only while a save to ``prefix`` is in flight or was killed (a temporary index
    ``<prefix>.index.tempstate<N>`` exists) is more work done: the index is then
    verified against its data (every CRC-32), and if it no longer describes them (the
    save died between renaming its data files and its index) the save's own complete
    temporary index is used when it verifies. A prefix without an index is not a
    checkpoint, whatever temporaries it has.
    """
    err: errors.OpError | None = None
    for attempt in range(_READ_ATTEMPTS):  # a save may move on while we look: look again
        pending = _pending_indexes(prefix)
        if not pending:
            return _plain_bundle(prefix)
        before = (_index_state(prefix), pending)  # pending first: see _pending_indexes
        try:
            b = _plain_bundle(prefix)
            b.verify()
            return b
        except (errors.DataLossError, errors.NotFoundError) as e:
            err = e
        if before[0] is not None:
            for path, token in pending:
                try:
                    b = _pending_bundle(prefix, path, token)
                    b.verify()
                    return b
                except errors.OpError:
                    continue
        after_pending = _pending_indexes(prefix)
        if (_index_state(prefix), after_pending) == before:
            break
        time.sleep(min(0.05, _RETRY_PAUSE_S * 2 ** attempt))  # let that save finish
    assert err is not None
    raise err


class _SavedVar:
    """One tensor of a checkpoint as readers see it: a whole entry, or the slice
    entries (``pieces``: entry and extents) it was saved as."""

    def __init__(self, name: str, dtype: _dt.DType, shape: Sequence[int],
                 pieces: list[tuple[Any, Extents | None]]):
        self.name = name
        self.dtype = dtype
        self.shape = tuple(int(d) for d in shape)
        self.pieces = pieces

    def plan(self, spec: str) -> tuple["_SavedVar", list[tuple[Any, Extents | None, Extents]],
                                       Extents]:
        """What to read for ``spec``: the entries overlapping it, each with its extents
        (None: a whole entry) and the overlap; and the extents wanted.

        :raises InvalidArgumentError: ``spec``'s full shape is not this tensor's
        :raises NotFoundError: the saved slices do not cover the requested one
        """
        if not spec:
            want = [(0, d) for d in self.shape]
        else:
            full, want = parse_shape_and_slice(spec, self.name)
            if tuple(full) != self.shape:
                raise errors.InvalidArgumentError(
                    None, None, f"tensor_name = {self.name}; shape in shape_and_slice spec "
                    f"{full} does not match the shape stored in checkpoint: "
                    f"{list(self.shape)}")
        need = int(np.prod([n for _, n in want], dtype=np.int64))
        picked, got = [], 0
        for entry, ext in self.pieces:
            over = want if ext is None else _overlap(ext, want)
            if over is None and need:
                continue
            picked.append((entry, ext, over or want))
            got += int(np.prod([n for _, n in over or want], dtype=np.int64))
        if need and got < need:
            raise errors.NotFoundError(None, None, f"The slice {slice_spec(self.shape, want)}"
                                       f" of tensor '{self.name}' is not covered by the "
                                       "slices saved in the checkpoint")
        return self, picked, want

    def assemble(self, want: Extents, picked: list[tuple[Any, Extents | None, Extents]],
                 arrays: Sequence[np.ndarray]) -> np.ndarray:
        """The slice ``want`` of this tensor from the ``arrays`` read for ``picked``."""
        if len(picked) == 1 and picked[0][1] is None and \
                list(want) == [(0, d) for d in self.shape]:
            return arrays[0]
        out = np.empty([n for _, n in want], dtype=arrays[0].dtype if arrays else
                       (object if self.dtype is _dt.string else self.dtype.np))
        for (_, ext, over), arr in zip(picked, arrays):
            base = ext if ext is not None else [(0, d) for d in self.shape]
            src = tuple(slice(s - b, s - b + n) for (s, n), (b, _) in zip(over, base))
            dst = tuple(slice(s - w, s - w + n) for (s, n), (w, _) in zip(over, want))
            out[dst] = arr[src]
        return out


def _variables_of(entries: dict[str, Any], index_path: str) -> dict[str, _SavedVar]:
    """The tensors an index's entries make up: whole entries as they are, slice entries
    (see :func:`slice_key`) gathered under the name of the tensor they slice.

    :raises DataLossError: slices disagreeing with each other or with a whole entry
    """
    out: dict[str, _SavedVar] = {}
    sliced: dict[str, list[tuple[Any, list[int], Extents]]] = {}
    for key, e in entries.items():
        parts = split_slice_key(key)
        dtype = _dt.as_dtype(int(e.dtype))
        if parts is None:
            out[key] = _SavedVar(key, dtype, [int(d.size) for d in e.shape.dim], [(e, None)])
        else:
            sliced.setdefault(parts[0], []).append((e, parts[1], parts[2]))
    for name, pieces in sliced.items():
        e0, full, _ = pieces[0]
        dtype = _dt.as_dtype(int(e0.dtype))
        if name in out or any(f != full or int(e.dtype) != int(e0.dtype)
                              for e, f, _ in pieces):
            raise errors.DataLossError(None, None, f"Checkpoint index file {index_path} is "
                                       f"corrupted: the slices of tensor '{name}' disagree")
        out[name] = _SavedVar(name, dtype, full, [(e, ext) for e, _, ext in pieces])
    return out


#: How often CheckpointReader.read re-opens a prefix that saves keep replacing.
_READ_ATTEMPTS = 12
#: first pause (seconds) before re-reading after the files changed under a read; it
#: doubles each time (up to 50 ms), so a save in flight can finish its renames
_RETRY_PAUSE_S = 0.001


class CheckpointReader:
    """Reads a checkpoint (``tf.train.NewCheckpointReader``).

    Opening reads and verifies the index (header, checksum, consistency) and checks
    that every data file exists with the size the index records; every tensor read is
    checked against its CRC-32. While a save to the same prefix is in flight or was
    interrupted, the reader picks whichever complete index describes the data on disk
    (see :func:`_open_bundle`), and a read that fails because the files changed under
    it (an overwrite completed meanwhile) re-opens the checkpoint and retries, pausing
    briefly while a save is between its renames (a dozen times at most: saves replacing
    the prefix back to back without pause can still win).

    :raises NotFoundError: no index at ``prefix``, or a data file is missing
    :raises DataLossError: the index or a data file is truncated or corrupted
    """

    def __init__(self, prefix: Any):
        if isinstance(prefix, bytes):
            prefix = prefix.decode()
        self._prefix = os.fspath(prefix)
        self._load()

    def _load(self) -> None:
        self._opened_state = _index_state(self._prefix)
        self._bundle = _open_bundle(self._prefix)
        self._vars = _variables_of(self._bundle.entries, self._bundle.index_path)

    @property
    def _index_path(self) -> str:
        return self._bundle.index_path

    @property
    def _shards(self) -> list[tuple[str, int]]:
        return self._bundle.shards

    @property
    def _entries(self) -> dict[str, Any]:
        return self._bundle.entries

    # -- TF's CheckpointReader API ------------------------------------------------------
    @property
    def prefix(self) -> str:
        return self._prefix

    def has_tensor(self, tensor_str: Any) -> bool:
        """Whether the checkpoint holds a tensor of that name."""
        return _name(tensor_str) in self._vars

    def get_tensor(self, tensor_str: Any) -> Any:
        """The saved value (a numpy array; a numpy scalar or bytes for scalars); a
        tensor saved as slices is put together whole.

        :raises NotFoundError: ``Key <name> not found in checkpoint``
        :raises DataLossError: the stored bytes fail their checksum
        """
        (arr,) = self.read([_name(tensor_str)])
        return arr[()] if arr.ndim == 0 else arr

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        """``{name: shape as a list of ints}`` for every saved tensor."""
        return {n: list(v.shape) for n, v in self._vars.items()}

    def get_variable_to_dtype_map(self) -> dict[str, _dt.DType]:
        """``{name: DType}`` for every saved tensor."""
        return {n: v.dtype for n, v in self._vars.items()}

    def debug_string(self) -> bytes:
        """One line per tensor: ``name (dtype) [shape]`` (for a TF bundle, TF's lines:
        one per row, slices under their binary keys)."""
        if isinstance(self._bundle, _TFBundle):
            return b"".join(line + b"\n" for line in self._bundle.debug_lines())
        lines = []
        for n in sorted(self._vars):
            v = self._vars[n]
            lines.append(f"{n} ({v.dtype.name}) [{','.join(str(d) for d in v.shape)}]")
        return ("\n".join(lines) + "\n").encode() if lines else b""

    # -- flowrt extras ------------------------------------------------------------------
    def keys(self) -> list[str]:
        return sorted(self._vars)

    def dtype(self, name: str) -> _dt.DType:
        return self._var(name).dtype

    def shape(self, name: str) -> tuple[int, ...]:
        return self._var(name).shape

    def _var(self, name: str) -> "_SavedVar":
        v = self._vars.get(name)
        if v is None:
            raise errors.NotFoundError(None, None, f"Key {name} not found in checkpoint")
        return v

    def read(self, names: Sequence[str], slices: Sequence[str] | None = None
             ) -> list[np.ndarray]:
        """Read and verify several tensors (arrays, never scalars), opening each data
        file once. All come from one index: after a retry, all from the new one.

        :param slices: per name ``""`` (the whole tensor) or a TF ``shape_and_slice``
            spec: that slice of it, from a whole tensor or from the slices it was saved as
        :raises InvalidArgumentError: a spec whose full shape is not the saved one
        :raises NotFoundError: the saved slices do not cover the requested one
        """
        specs = list(slices) if slices else [""] * len(names)
        for attempt in range(_READ_ATTEMPTS):
            plans = [self._var(n).plan(spec) for n, spec in zip(names, specs)]
            entries = [e for plan in plans for e, _, _ in plan[1]]
            try:
                arrays = self._bundle.read(entries)
            except (errors.DataLossError, errors.NotFoundError):
                # Data that no longer matches the index we opened is expected only when
                # a save to this prefix ran meanwhile: then re-open, else it is damage.
                # Pending saves are listed before the index is looked at: a save whose
                # index rename falls between the two looks is then seen by one of them.
                if attempt + 1 == _READ_ATTEMPTS:
                    raise
                pending = _pending_indexes(self._prefix)
                if not pending and _index_state(self._prefix) == self._opened_state:
                    raise
                if pending:  # a save is between renames: let it finish them
                    time.sleep(min(0.05, _RETRY_PAUSE_S * 2 ** attempt))
                self._load()
                continue
            out, k = [], 0
            for (var, pieces, want), n in zip(plans, names):
                out.append(var.assemble(want, pieces, arrays[k:k + len(pieces)]))
                k += len(pieces)
            return out
        raise AssertionError("unreachable")

    def __repr__(self) -> str:
        return f"<CheckpointReader {self._prefix} ({len(self._vars)} tensors)>"


def _name(x: Any) -> str:
    if isinstance(x, bytes):
        return x.decode()
    return str(x)
