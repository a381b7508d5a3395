"""The same-host fast path: large tensors travel through shared memory, not the socket.

When both ends of a call run on the same machine (and see the same ``/dev/shm``), a
tensor of at least :data:`MIN_BYTES` bytes is copied once into a *segment* (a file in
``/dev/shm``) and only the segment's name travels in the message. The receiver maps the
segment read-only: the tensor it hands on is a view of that mapping, so receiving
copies nothing, and the socket's two kernel copies and the transport's framing of every
byte are gone.

Segments are recycled. Each process that sends keeps a pool of segment files and one
small *control* file with a byte per segment (1: lent to a receiver, 0: free). The
receiver clears its byte when the last view of the mapping is gone (a finalizer on the
mapping), and the sender then writes the next tensor into the same, already allocated
pages: allocating fresh shared memory for every tensor would cost about as much as the
socket it replaces.

How the two ends agree (docs/wire.md): :func:`host_token` names this machine's
shared-memory namespace (the kernel's boot id, the mount namespace and the user; None
where there is no ``/dev/shm``). Requests carry it; a server that finds its own token
there may answer with segments and says so by putting its token in the reply; a client
that saw its own token in a server's reply may send segments to that server. A receiver
maps a segment only from a message bearing its own token, only under a name this
module makes (``flowrt-<pid>-<slot>-<hex>``), only a regular file of this user at least
as large as the tensor; anything else is refused with InvalidArgumentError.

Nothing is left behind or overwritten while read:

- a segment whose call failed is *retired*: unlinked and never written again (a
  receiver that did map it keeps its pages until it lets go);
- a segment still lent after :data:`CLAIM_S` seconds (its receiver died, or keeps the
  tensor) is retired the same way;
- a process unlinks its pool when it exits, and :func:`sweep_orphans` (run when a
  server starts, and when a process first writes a segment) removes the files of
  processes that were killed;
- the pool stops growing at :data:`MAX_POOL_BYTES` (or a quarter of ``/dev/shm``): the
  tensors that do not fit then travel on the socket.

``FLOWRT_SHM=0`` in the environment turns the fast path off.
"""
from __future__ import annotations

import atexit
import mmap
import os
import re
import secrets
import stat
import threading
import time
import weakref
from typing import Any

import numpy as np

from ..base import errors

__all__ = ["MIN_BYTES", "CLAIM_S", "MAX_POOL_BYTES", "host_token", "enabled", "set_enabled",
           "write", "discard", "open_segment", "sweep_orphans"]

#: tensors at least this large use a segment (smaller ones are cheaper on the socket)
MIN_BYTES = 256 << 10
#: seconds a segment may stay lent before it is retired
CLAIM_S = 60.0
#: the most bytes one process keeps in segments
MAX_POOL_BYTES = 2 << 30
#: where segments live
DIR = "/dev/shm"
_SLOTS = 1 << 16  # slot ids per process (the control file's size); never reused
_NAME = re.compile(r"flowrt-(\d+)-(\d+)-([0-9a-f]{16})\Z")

_token: list[str | None] = []
_enabled = os.environ.get("FLOWRT_SHM", "1").lower() not in ("0", "false", "no", "off")


def host_token() -> str | None:
    """This machine's shared-memory namespace as a string, or None when there is no
    usable ``/dev/shm`` (then the fast path is off)."""
    if not _token:
        tok = None
        try:
            with open("/proc/sys/kernel/random/boot_id") as f:
                boot = f.read().strip()
            mnt = os.readlink("/proc/self/ns/mnt")
            if boot and os.path.isdir(DIR) and os.access(DIR, os.W_OK | os.X_OK):
                tok = f"{boot}/{mnt}/{os.getuid()}"
        except OSError:
            tok = None
        _token.append(tok)
    return _token[0]


def enabled() -> bool:
    """Whether this process uses the fast path."""
    return _enabled and host_token() is not None


def set_enabled(on: bool) -> bool:
    """Turn the fast path on or off for this process (``FLOWRT_SHM=0`` sets it off at
    start); returns the previous setting. Off, large tensors between processes of one
    host travel over the transport itself (the conformance kit tests transports so)."""
    global _enabled
    before, _enabled = _enabled, bool(on)
    return before


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class _Segment:
    __slots__ = ("slot", "name", "fd", "size", "lent_at")

    def __init__(self, slot: int, name: str, fd: int, size: int):
        self.slot, self.name, self.fd, self.size = slot, name, fd, size
        self.lent_at = 0.0


class _Pool:
    """This process's segments (the sending side)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tag = secrets.token_hex(8)
        self._ctl: mmap.mmap | None = None
        self._segments: dict[str, _Segment] = {}
        self._next = 1
        self._bytes = 0
        self._limit = MAX_POOL_BYTES
        self._broken = False

    def _name(self, slot: int) -> str:
        return f"flowrt-{os.getpid()}-{slot}-{self._tag}"

    def _control(self) -> mmap.mmap:
        if self._ctl is None:
            sweep_orphans()  # what killed processes left, before adding our own
            path = os.path.join(DIR, self._name(0))
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_NOFOLLOW, 0o600)
            try:
                os.ftruncate(fd, _SLOTS)
                self._ctl = mmap.mmap(fd, _SLOTS, mmap.MAP_SHARED,
                                      mmap.PROT_READ | mmap.PROT_WRITE)
            finally:
                os.close(fd)
            try:
                st = os.statvfs(DIR)
                self._limit = min(MAX_POOL_BYTES, st.f_bsize * st.f_blocks // 4)
            except OSError:
                pass
        return self._ctl

    def write(self, data: memoryview) -> str | None:
        """Copy ``data`` into the smallest free segment that holds it, creating one (of
        the next power of two, at least :data:`MIN_BYTES`) when none does; returns the
        segment's name, now lent, or None when the pool is full, a file cannot be
        created or written, or shared memory is unusable. Segments lent for longer than
        :data:`CLAIM_S` are retired on the way."""
        n = data.nbytes
        now = time.monotonic()
        with self._lock:
            if self._broken:
                return None
            try:
                ctl = self._control()
            except OSError:
                self._broken = True
                return None
            best = None
            for seg in list(self._segments.values()):
                if ctl[seg.slot]:
                    if now - seg.lent_at > CLAIM_S:
                        self._retire(seg)
                    continue
                if seg.size >= n and (best is None or seg.size < best.size):
                    best = seg
            if best is None:
                size = max(MIN_BYTES, 1 << (n - 1).bit_length())
                if self._next >= _SLOTS or self._bytes + size > self._limit:
                    return None
                slot = self._next
                self._next += 1
                name = self._name(slot)
                try:
                    fd = os.open(os.path.join(DIR, name),
                                 os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_NOFOLLOW, 0o600)
                except OSError:
                    return None
                best = self._segments[name] = _Segment(slot, name, fd, size)
                self._bytes += size
            ctl[best.slot] = 1
            best.lent_at = now
        try:
            off = 0
            while off < n:
                off += os.pwrite(best.fd, data[off:off + (1 << 30)], off)
        except OSError:  # no space left in /dev/shm, most likely
            self.discard([best.name])
            return None
        return best.name

    def _retire(self, seg: _Segment) -> None:
        """Forget a segment for good (the lock held): unlink it; a receiver that
        mapped it keeps its pages."""
        if self._segments.pop(seg.name, None) is not None:
            self._bytes -= seg.size
            os.close(seg.fd)
            _unlink(os.path.join(DIR, seg.name))

    def discard(self, names: list[str]) -> None:
        with self._lock:
            for name in names:
                seg = self._segments.get(name)
                if seg is not None:
                    self._retire(seg)

    def close(self) -> None:
        with self._lock:
            for seg in list(self._segments.values()):
                self._retire(seg)
            if self._ctl is not None:
                _unlink(os.path.join(DIR, self._name(0)))
                self._ctl.close()
                self._ctl = None
            self._broken = True


_pool = _Pool()
atexit.register(_pool.close)


def write(data: Any) -> str | None:
    """Copy ``data`` (a contiguous buffer) into a free segment of this process's pool;
    the segment's name, or None when the pool is full or shared memory is unusable (the
    caller then sends the bytes on the socket). The segment stays lent until its
    receiver lets go of it (or the call fails: :func:`discard`)."""
    return _pool.write(memoryview(data).cast("B"))


def discard(names: list[str]) -> None:
    """Retire segments this process wrote for a call that failed: whether or not the
    peer mapped them, they are never written again."""
    if names:
        _pool.discard(names)


# -- the receiving side ----------------------------------------------------------------
_controls: dict[str, mmap.mmap | None] = {}
_controls_lock = threading.Lock()


def _release(writer: str, slot: int) -> None:
    """Give a segment back to the process that wrote it (``writer``: its control file's
    name) once the last view of its mapping is gone."""
    with _controls_lock:
        ctl = _controls.get(writer, False)
        if ctl is False:
            ctl = None
            try:
                fd = os.open(os.path.join(DIR, writer), os.O_RDWR | os.O_NOFOLLOW)
                try:
                    st = os.fstat(fd)
                    if st.st_size == _SLOTS and st.st_uid == os.getuid():
                        ctl = mmap.mmap(fd, _SLOTS, mmap.MAP_SHARED,
                                        mmap.PROT_READ | mmap.PROT_WRITE)
                finally:
                    os.close(fd)
            except OSError:
                pass  # the writer is gone: nothing to give back
            if len(_controls) > 256:
                for v in _controls.values():
                    if v is not None:
                        v.close()
                _controls.clear()
            _controls[writer] = ctl
        if ctl is not None:
            try:
                ctl[slot] = 0
            except (ValueError, IndexError):
                pass


class _Mapped:
    """Mappings of segments this process received, kept for the segments' next use:
    a segment is written again and again by its sender, and mapping it anew each time
    would cost page faults and TLB flushes. Least recently used ones are dropped past
    :attr:`max_entries` or :attr:`max_bytes` (arrays still using one keep it alive).
    Those of writers that exited are dropped by a sweep every :attr:`sweep_s`
    seconds and whenever a segment of a new writer is mapped."""

    max_entries = 64
    #: ``FLOWRT_SHM_MAP_BYTES`` in the environment
    max_bytes = int(os.environ.get("FLOWRT_SHM_MAP_BYTES", "") or 256 << 20)
    sweep_s = 2.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._maps: dict[str, mmap.mmap] = {}  # in least-recently-used-first order
        self._bytes = 0
        self._writers: set[str] = set()  # pids whose segments are mapped
        self._sweeper: threading.Thread | None = None

    def sweep(self) -> int:
        """Drop the mappings of segments whose writer exited (and the control files of
        those writers); returns how many were dropped."""
        with self._lock:
            pids = {n.split("-", 2)[1] for n in self._maps} | self._writers
        gone = {p for p in pids if not _alive(int(p))}
        if not gone:
            return 0
        with self._lock:
            dead = [n for n in self._maps if n.split("-", 2)[1] in gone]
            for n in dead:
                self._bytes -= len(self._maps.pop(n))
            self._writers -= gone
        with _controls_lock:
            for w in [w for w in _controls if w.split("-", 2)[1] in gone]:
                ctl = _controls.pop(w)
                if ctl is not None:
                    ctl.close()
        return len(dead)

    def _sweep_loop(self) -> None:
        while True:
            time.sleep(self.sweep_s)
            try:
                self.sweep()
            except Exception:  # noqa: BLE001 - a sweep must never end the loop
                pass

    def get(self, name: str, nbytes: int) -> mmap.mmap:
        """A read-only mapping of segment ``name``, at least ``nbytes`` long: the cached
        one when it is large enough (now the most recently used), else a new one that
        replaces it, dropping the least recently used mappings past the limits.

        :raises InvalidArgumentError: when the segment cannot be mapped (:func:`_map`).
        """
        with self._lock:
            mp = self._maps.pop(name, None)
            if mp is not None and len(mp) >= nbytes:
                self._maps[name] = mp
                return mp
            if mp is not None:
                self._bytes -= len(mp)
        mp = _map(name, nbytes)
        writer = name.split("-", 2)[1]
        if writer not in self._writers:  # a new client: drop those that exited
            self._writers.add(writer)
            self.sweep()
            if self._sweeper is None:
                self._sweeper = threading.Thread(target=self._sweep_loop, daemon=True,
                                                 name="flowrt-shm-sweep")
                self._sweeper.start()
        with self._lock:
            old = self._maps.pop(name, None)
            if old is not None:
                self._bytes -= len(old)
            self._maps[name] = mp
            self._bytes += len(mp)
            while len(self._maps) > self.max_entries or \
                    (self._bytes > self.max_bytes and len(self._maps) > 1):
                victim = next(iter(self._maps))
                self._bytes -= len(self._maps.pop(victim))
        return mp


_mapped = _Mapped()


def _map(name: str, nbytes: int) -> mmap.mmap:
    """Map the whole segment ``name`` read-only, after checking it."""
    try:
        fd = os.open(os.path.join(DIR, name), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise errors.InvalidArgumentError(None, None, f"shared-memory segment {name} "
                                          f"cannot be opened: {e.strerror} (retired by "
                                          "its writer after a failed call?)") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or \
                st.st_size < nbytes:
            raise errors.InvalidArgumentError(
                None, None, f"shared-memory segment {name}: {st.st_size} bytes for a "
                f"tensor of {nbytes} (or not a regular file of this user)")
        return mmap.mmap(fd, st.st_size, mmap.MAP_SHARED, mmap.PROT_READ)
    finally:
        os.close(fd)


def open_segment(name: str, nbytes: int) -> Any:
    """The first ``nbytes`` bytes of the segment ``name``, read-only, as a uint8 array;
    the segment goes back to its writer when that array (and every array made from
    it) is gone.

    Raises InvalidArgumentError for a name this module would not make, a missing
    segment, or one that is not a regular file of this user of at least ``nbytes``
    bytes."""
    m = _NAME.match(name)
    if m is None or int(m.group(2)) < 1 or nbytes <= 0:
        raise errors.InvalidArgumentError(None, None, f"bad shared-memory segment "
                                          f"{name[:80]!r} ({nbytes} bytes)")
    base = np.frombuffer(_mapped.get(name, nbytes), np.uint8, nbytes)
    weakref.finalize(base, _release, f"flowrt-{m.group(1)}-0-{m.group(3)}", int(m.group(2)))
    return base


def sweep_orphans() -> int:
    """Unlink the segments of this user whose writing process is gone; returns how
    many."""
    try:
        names = os.listdir(DIR)
    except OSError:
        return 0
    n = 0
    uid, me = os.getuid(), os.getpid()
    for name in names:
        m = _NAME.match(name)
        if m is None:
            continue
        pid = int(m.group(1))
        if pid == me or _alive(pid):
            continue
        path = os.path.join(DIR, name)
        try:
            if os.stat(path, follow_symlinks=False).st_uid != uid:
                continue
        except OSError:
            continue
        _unlink(path)
        n += 1
    return n


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
