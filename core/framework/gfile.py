"""``tf.gfile`` and ``tf.io.gfile``: TF 1.15's file API, on the local file system.

Paths are ``str``, ``bytes`` or path-like; a ``file://`` prefix is dropped and any other
scheme (``gs://``, ``hdfs://`` ...) raises ``UnimplementedError`` naming it, as a TF
build without that file system does. Every failure is a :mod:`flowrt.errors` class
chosen from the OS error number as TF's ``IOError`` does (``ENOENT`` -> NotFoundError,
``EEXIST`` -> AlreadyExistsError, ``EACCES`` -> PermissionDeniedError, ``ENOTDIR`` /
``EISDIR`` / ``ENOTEMPTY`` -> FailedPreconditionError ...) with the message
``"<path>; <reason>"``.

:class:`GFile` opens nothing until the first read or write, as TF's ``FileIO`` does: it
writes in place (no temporary file), ``w`` truncates and ``a`` appends at the first
write, and a file opened for writing but never written is not created. Text modes read
``str`` (UTF-8), binary modes ``bytes``; ``write`` takes either.

Also here, for the core's own writers: :func:`read_file_to_string`,
:func:`write_string_to_file` and :func:`atomic_write_string_to_file` (write to a
temporary name beside the target, then rename over it).
"""
from __future__ import annotations

import errno as _errno
import fnmatch
import os
import re
import shutil
import uuid
from typing import Any, Callable, Iterator

from ..base import errors

__all__ = ["GFile", "FastGFile", "Open", "FileStatistics", "exists", "remove", "glob",
           "mkdir", "makedirs", "copy", "rename", "rmtree", "isdir", "listdir", "walk",
           "stat", "Walk", "read_file_to_string", "write_string_to_file",
           "atomic_write_string_to_file", "API"]

# TF's mapping of errno to canonical code (tensorflow/core/platform/errors: ErrnoToCode)
_ERRNO_CLASS: dict[str, type[errors.OpError]] = {}
for _cls, _names in (
        (errors.InvalidArgumentError, "EINVAL ENAMETOOLONG E2BIG EDESTADDRREQ EDOM EFAULT "
                                      "EILSEQ ENOPROTOOPT ENOSTR ENOTSOCK ENOTTY EPROTOTYPE "
                                      "ESPIPE"),
        (errors.DeadlineExceededError, "ETIMEDOUT ETIME"),
        (errors.NotFoundError, "ENODEV ENOENT ENXIO ESRCH"),
        (errors.AlreadyExistsError, "EEXIST EADDRNOTAVAIL EALREADY"),
        (errors.PermissionDeniedError, "EPERM EACCES EROFS"),
        (errors.FailedPreconditionError, "ENOTEMPTY EISDIR ENOTDIR EADDRINUSE EBADF EBUSY "
                                         "ECHILD EISCONN ENOTBLK ENOTCONN EPIPE ESHUTDOWN "
                                         "ETXTBSY"),
        (errors.ResourceExhaustedError, "ENOSPC EMFILE EMLINK ENFILE ENOBUFS ENODATA ENOMEM "
                                        "ENOSR EUSERS"),
        (errors.OutOfRangeError, "EFBIG EOVERFLOW ERANGE"),
        (errors.UnimplementedError, "ENOSYS ENOTSUP EAFNOSUPPORT EPFNOSUPPORT "
                                    "EPROTONOSUPPORT ESOCKTNOSUPPORT EXDEV"),
        (errors.UnavailableError, "EAGAIN ECONNREFUSED ECONNABORTED ECONNRESET EINTR "
                                  "EHOSTDOWN EHOSTUNREACH ENETDOWN ENETRESET ENETUNREACH "
                                  "ENOLCK ENOLINK ENONET"),
        (errors.AbortedError, "EDEADLK ESTALE"),
        (errors.CancelledError, "ECANCELED")):
    for _n in _names.split():
        _ERRNO_CLASS[_n] = _cls

_SCHEME = re.compile(r"^([a-zA-Z][0-9a-zA-Z.]*)://")


def _error(e: OSError, path: str) -> errors.OpError:
    """The TF error for an OS error on ``path``: ``"<path>; <strerror>"``."""
    name = _errno.errorcode.get(e.errno or 0, "")
    cls = _ERRNO_CLASS.get(name, errors.UnknownError)
    return cls(None, None, f"{path}; {e.strerror or e}")


def _path(p: Any) -> str:
    """``p`` as a local path: ``file://`` dropped; another scheme is Unimplemented."""
    if isinstance(p, os.PathLike):
        p = os.fspath(p)
    if isinstance(p, (bytes, bytearray)):
        p = bytes(p).decode("utf-8")
    if not isinstance(p, str):
        raise TypeError(f"Expected a path (str, bytes or os.PathLike), got {p!r}")
    m = _SCHEME.match(p)
    if m:
        if m.group(1) != "file":
            raise errors.UnimplementedError(
                None, None, f"File system scheme '{m.group(1)}' not implemented "
                            f"(file: '{p}')")
        p = p[len("file://"):]
    return p


class FileStatistics:
    """What :func:`stat` returns: ``length`` in bytes, ``mtime_nsec`` (the modification
    time in whole seconds, as nanoseconds, as TF's local file system reports it) and
    ``is_directory``."""

    def __init__(self, length: int = 0, mtime_nsec: int = 0, is_directory: bool = False):
        self.length = length
        self.mtime_nsec = mtime_nsec
        self.is_directory = is_directory

    def __repr__(self) -> str:
        return (f"FileStatistics(length={self.length}, mtime_nsec={self.mtime_nsec}, "
                f"is_directory={self.is_directory})")


class GFile:
    """A file on the local file system, read and written as TF's ``tf.gfile.GFile``.

    :param name: the path
    :param mode: ``r``, ``w``, ``a``, ``r+``, ``w+`` or ``a+``, each with an optional
        ``b`` (binary: ``bytes`` in and out; otherwise ``str``, UTF-8)
    """

    def __init__(self, name: Any, mode: str = "r") -> None:
        self._name = name
        self._mode = mode
        self._path = _path(name)
        self._binary = "b" in mode
        m = mode.replace("b", "")
        if m not in ("r", "w", "a", "r+", "w+", "a+"):
            raise errors.InvalidArgumentError(
                None, None, "mode is not 'r' or 'w' or 'a' or 'r+' or 'w+' or 'a+'")
        self._can_read = m in ("r", "r+", "a+", "w+")
        self._can_write = m in ("a", "w", "r+", "a+", "w+")
        self._append = "a" in m
        self._reader: Any = None
        self._writer: Any = None

    @property
    def name(self) -> Any:
        """The path the file was opened with."""
        return self._name

    @property
    def mode(self) -> str:
        """The mode the file was opened with."""
        return self._mode

    def _open_reader(self) -> Any:
        if self._reader is None:
            if not self._can_read:
                raise errors.PermissionDeniedError(None, None, "File isn't open for reading")
            if os.path.isdir(self._path):
                raise errors.FailedPreconditionError(
                    None, None, f"{self._path}; Is a directory")
            try:
                self._reader = open(self._path, "rb")  # noqa: SIM115 - closed by close()
            except OSError as e:
                raise _error(e, self._path) from None
        return self._reader

    def _open_writer(self) -> Any:
        if self._writer is None:
            if not self._can_write:
                raise errors.PermissionDeniedError(None, None, "File isn't open for writing")
            try:
                self._writer = open(self._path, "ab" if self._append else "wb")  # noqa: SIM115
            except OSError as e:
                raise _error(e, self._path) from None
        return self._writer

    def _value(self, data: bytes) -> bytes | str:
        if self._binary:
            return data
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise errors.InvalidArgumentError(
                None, None, f"{self._path}: not valid UTF-8 text ({e}); open it in "
                            "binary mode ('rb')") from None

    def _io(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except OSError as e:
            raise _error(e, self._path) from None

    def size(self) -> int:
        """The file's length in bytes (what is on disk: call :meth:`flush` first)."""
        return stat(self._path).length

    def write(self, file_content: bytes | str) -> None:
        """Append ``file_content`` (``str`` is written as UTF-8)."""
        w = self._open_writer()
        data = file_content.encode("utf-8") if isinstance(file_content, str) \
            else bytes(file_content)
        self._io(lambda: w.write(data))

    def read(self, n: int = -1) -> bytes | str:
        """``n`` bytes from the current position (``-1``: to the end of the file)."""
        r = self._open_reader()
        return self._value(self._io(lambda: r.read(-1 if n is None or n < 0 else n)))

    def readline(self) -> bytes | str:
        """The next line, with its ``\\n``; empty at the end of the file."""
        r = self._open_reader()
        return self._value(self._io(r.readline))

    def readlines(self) -> list[bytes | str]:
        """All the lines left."""
        out = []
        while True:
            line = self.readline()
            if not line:
                return out
            out.append(line)

    def seek(self, offset: int | None = None, whence: int = 0,
             position: int | None = None) -> None:
        """Move the read position: ``whence`` 0 from the start, 1 from here, 2 from the end
        (``position`` is TF's deprecated name for ``offset``)."""
        r = self._open_reader()
        if offset is None and position is None:
            raise TypeError("seek(): offset argument required")
        if offset is not None and position is not None:
            raise TypeError("seek(): offset and position may not be set simultaneously.")
        offset = position if offset is None else offset
        if whence == 1:
            offset += self.tell()
        elif whence == 2:
            offset += self.size()
        elif whence != 0:
            raise errors.InvalidArgumentError(
                None, None, f"Invalid whence argument: {whence}. Valid values are 0, 1, or 2.")
        if offset < 0:
            raise errors.InvalidArgumentError(None, None, f"{self._path}: negative seek "
                                                          f"offset {offset}")
        self._io(lambda: r.seek(offset))

    def tell(self) -> int:
        """The read position (the write position for a file open only for writing)."""
        if self._can_read:
            return self._io(self._open_reader().tell)
        return self._io(self._open_writer().tell)

    def flush(self) -> None:
        """Hand what was written to the operating system."""
        if self._writer is not None:
            self._io(self._writer.flush)

    def close(self) -> None:
        """Flush and close (a closed GFile reopens on its next read or write)."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._writer is not None:
            w, self._writer = self._writer, None
            self._io(w.close)

    def seekable(self) -> bool:
        return True

    def __enter__(self) -> GFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __iter__(self) -> Iterator[bytes | str]:
        return self

    def __next__(self) -> bytes | str:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    next = __next__

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing to report to at collection time
            pass


#: ``tf.gfile.FastGFile`` and ``tf.gfile.Open``: the same class as GFile in TF 1.15
FastGFile = GFile
Open = GFile


def exists(path: Any) -> bool:
    """Whether ``path`` exists (a file or a directory)."""
    return os.path.exists(_path(path))


def isdir(path: Any) -> bool:
    """Whether ``path`` is a directory (False when it does not exist)."""
    return os.path.isdir(_path(path))


def stat(path: Any) -> FileStatistics:
    """``path``'s :class:`FileStatistics`; NotFoundError when it does not exist."""
    p = _path(path)
    try:
        st = os.stat(p)
    except OSError as e:
        raise _error(e, p) from None
    return FileStatistics(length=st.st_size,
                          mtime_nsec=int(st.st_mtime) * 1_000_000_000,
                          is_directory=os.path.isdir(p))


def remove(path: Any) -> None:
    """Delete the file ``path`` (NotFoundError when missing; a directory fails)."""
    p = _path(path)
    try:
        os.unlink(p)
    except OSError as e:
        raise _error(e, p) from None


def mkdir(path: Any) -> None:
    """Create the directory ``path``; its parent must exist (NotFoundError). An existing
    ``path`` is not an error (TF 1.15 drops ALREADY_EXISTS here)."""
    p = _path(path)
    try:
        os.mkdir(p)
    except FileExistsError:
        pass
    except OSError as e:
        raise _error(e, p) from None


def makedirs(path: Any) -> None:
    """Create ``path`` and every missing parent; an existing directory is fine."""
    p = _path(path)
    if os.path.isdir(p):
        return
    try:
        os.makedirs(p, exist_ok=True)
    except OSError as e:
        raise _error(e, p) from None


def _no_overwrite(dst: str, overwrite: bool) -> None:
    if not overwrite and os.path.lexists(dst):
        raise errors.AlreadyExistsError(None, None, f"{dst}; file already exists")


def copy(src: Any, dst: Any, overwrite: bool = False) -> None:
    """Copy the file ``src`` to ``dst`` (AlreadyExistsError if ``dst`` exists and not
    ``overwrite``)."""
    s, d = _path(src), _path(dst)
    _no_overwrite(d, overwrite)
    if os.path.isdir(s):
        raise errors.FailedPreconditionError(None, None, f"{s}; Is a directory")
    try:
        with open(s, "rb") as fin:
            data = fin.read()
    except OSError as e:
        raise _error(e, s) from None
    try:
        with open(d, "wb") as fout:
            fout.write(data)
    except OSError as e:
        raise _error(e, d) from None


def rename(src: Any, dst: Any, overwrite: bool = False) -> None:
    """Rename ``src`` to ``dst`` (AlreadyExistsError if ``dst`` exists and not
    ``overwrite``)."""
    s, d = _path(src), _path(dst)
    _no_overwrite(d, overwrite)
    try:
        os.replace(s, d)
    except OSError as e:
        raise _error(e, s if e.filename == s or not os.path.lexists(s) else d) from None


def rmtree(path: Any) -> None:
    """Delete ``path`` and everything under it (a file is deleted too); NotFoundError
    when it does not exist."""
    p = _path(path)
    if not os.path.lexists(p):
        raise errors.NotFoundError(None, None, f"{p}; No such file or directory")
    try:
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)
    except OSError as e:
        raise _error(e, e.filename or p) from None


def listdir(path: Any) -> list[str]:
    """The names in the directory ``path`` (not ``.`` or ``..``), sorted; NotFoundError
    ("Could not find directory") when ``path`` is not a directory, as TF."""
    p = _path(path)
    if not os.path.isdir(p):
        raise errors.NotFoundError(None, None, f"Could not find directory {p}")
    try:
        return sorted(os.listdir(p))
    except OSError as e:
        raise _error(e, p) from None


def walk(top: Any, topdown: bool = True,
         onerror: Callable[[errors.OpError], Any] | None = None
         ) -> Iterator[tuple[str, list[str], list[str]]]:
    """Yield ``(dirname, subdirs, files)`` for ``top`` and each directory under it,
    parents first when ``topdown`` (edit ``subdirs`` in place to prune then). A directory
    that cannot be listed is skipped (``onerror`` is called with its NotFoundError)."""
    top = os.fspath(top) if isinstance(top, os.PathLike) else top
    top = top.decode("utf-8") if isinstance(top, bytes) else top
    try:
        listing = listdir(top)
    except errors.NotFoundError as err:
        if onerror:
            onerror(err)
        return
    subdirs, files = [], []
    for item in listing:
        (subdirs if isdir(os.path.join(top, item)) else files).append(item)
    here = (top, subdirs, files)
    if topdown:
        yield here
    for sub in subdirs:
        yield from walk(os.path.join(top, sub), topdown, onerror)
    if not topdown:
        yield here


def Walk(top: Any, in_order: bool = True  # noqa: N802 - TF's name
         ) -> Iterator[tuple[str, list[str], list[str]]]:
    """``tf.gfile.Walk``: :func:`walk` with TF 1.x's name for ``topdown``."""
    return walk(top, in_order)


def _has_magic(s: str) -> bool:
    return any(c in s for c in "*?[")


def _glob_one(pattern: str) -> list[str]:
    """Paths matching ``pattern``: ``*``, ``?`` and ``[...]`` within one path component,
    hidden files included (TF's rules); the literal path when nothing is special."""
    p = pattern
    if not _has_magic(p):
        return [p] if os.path.lexists(p) else []
    absolute = p.startswith(os.sep)
    parts = [c for c in p.split(os.sep) if c]
    found = [os.sep if absolute else ""]
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        nxt = []
        for base in found:
            if not _has_magic(part):
                cand = os.path.join(base, part) if base else part
                if os.path.lexists(cand):
                    nxt.append(cand)
                continue
            try:
                names = os.listdir(base or ".")
            except OSError:
                continue
            for name in sorted(fnmatch.filter(names, part)):
                cand = os.path.join(base, name) if base else name
                if last or os.path.isdir(cand):
                    nxt.append(cand)
        found = nxt
    return sorted(found)


def glob(pattern: Any) -> list[str]:
    """The paths matching ``pattern`` (or any of a list of patterns), sorted."""
    if isinstance(pattern, (str, bytes, os.PathLike)):
        return _glob_one(_path(pattern))
    return [m for one in pattern for m in _glob_one(_path(one))]


# -- helpers for the core's writers (TF's file_io functions of the same names) ----------
def read_file_to_string(filename: Any, binary_mode: bool = False) -> bytes | str:
    """The whole content of ``filename`` (``bytes`` if ``binary_mode``)."""
    with GFile(filename, "rb" if binary_mode else "r") as f:
        return f.read()


def write_string_to_file(filename: Any, file_content: bytes | str) -> None:
    """Write ``file_content`` to ``filename``, replacing what was there."""
    with GFile(filename, "wb") as f:
        f.write(file_content)


def atomic_write_string_to_file(filename: Any, contents: bytes | str,
                                overwrite: bool = True) -> None:
    """Write ``contents`` to a temporary file beside ``filename`` and rename it over
    ``filename``, so readers never see a partial file."""
    p = _path(filename)
    tmp = f"{p}.tmp{uuid.uuid4().hex}"
    write_string_to_file(tmp, contents)
    try:
        rename(tmp, p, overwrite)
    except errors.OpError:
        remove(tmp)
        raise


#: published as ``tf.gfile.*`` (TF 1.x names) and ``tf.io.gfile.*`` (TF 2 names)
API: dict[str, Any] = {
    "gfile.GFile": GFile, "gfile.Open": Open, "gfile.FastGFile": FastGFile,
    "gfile.Exists": exists, "gfile.MakeDirs": makedirs, "gfile.MkDir": mkdir,
    "gfile.Glob": glob, "gfile.ListDirectory": listdir, "gfile.Remove": remove,
    "gfile.Rename": rename, "gfile.Copy": copy, "gfile.Walk": Walk,
    "gfile.IsDirectory": isdir, "gfile.DeleteRecursively": rmtree, "gfile.Stat": stat,
    "io.gfile.GFile": GFile, "io.gfile.exists": exists, "io.gfile.makedirs": makedirs,
    "io.gfile.mkdir": mkdir, "io.gfile.glob": glob, "io.gfile.listdir": listdir,
    "io.gfile.remove": remove, "io.gfile.rename": rename, "io.gfile.copy": copy,
    "io.gfile.walk": walk, "io.gfile.isdir": isdir, "io.gfile.rmtree": rmtree,
    "io.gfile.stat": stat,
}
