"""The CPU device plugin: numpy arrays in host memory.

``ConfigProto(device_count={"CPU": n})`` gives ``n`` CPU devices in one process, so
multi-device placement can be exercised without hardware.

``ConfigProto(intra_op_parallelism_threads=n)`` (n > 0), given to a server or to the
worker that discovers the devices, sets the number of threads numpy's BLAS uses inside
one op, for the whole process (as TF's intra-op pool is per process). Several busy tasks
on one machine want 1: BLAS threads that spin between calls otherwise take the cores
from the other processes.

Small matrix products (a GEMM under :data:`SMALL_GEMM_FLOPS` multiply-adds) run with
BLAS on one thread whatever the setting (:meth:`CPUDevice.single_threaded_blas`): on a
product that small, waking and joining BLAS threads costs more than it saves, and on
a loaded machine (more runnable threads than cores) it costs 10-30x the product itself.

Heavy kernels thread themselves, as TF's kernels use its intra-op pool:
:meth:`CPUDevice.parallel_map` runs a kernel's independent parts (a convolution's batch
chunks, a large variable's update in ranges) on
:func:`intra_op_threads` threads, one per core by default, with BLAS on one thread in
each. That threads the memory-bound half of a convolution (im2col) as well as its
GEMM, and leaves no BLAS threads busy-waiting between calls to take the cores from the
next kernel.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from typing import Any, Callable, Iterator

import numpy as np

from flowrt.base.threads import DaemonPool
from flowrt.device import Device, DeviceType
from flowrt.hookspecs import hookimpl

__all__ = ["CPUDevice", "flowrt_device_types", "set_blas_threads", "SMALL_GEMM_FLOPS",
           "blas_single_threaded", "parallel_map", "intra_op_threads", "set_intra_op_threads"]

#: GEMMs with fewer multiply-adds (m * k * n) than this run with BLAS on one thread
SMALL_GEMM_FLOPS = 1 << 25  # the bound math_ops uses (see there)


class CPUDevice(Device):
    """A host CPU device; arrays are numpy arrays, copies between CPUs are free."""

    xp = np

    def __init__(self, index: int, job: str = "localhost", task: int = 0):
        super().__init__("CPU", index, job, task, memory_limit=_host_memory(),
                         description="numpy on the host")

    def to_host(self, value: Any) -> np.ndarray:
        return value

    def from_host(self, value: np.ndarray) -> Any:
        return value

    def copy_from(self, value: Any, src: Device) -> Any:
        if src.device_type == "CPU":
            return value  # same address space; arrays are never mutated in place
        return src.to_host(value)

    def single_threaded_blas(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` run with numpy's BLAS on one thread (``fn`` itself when no OpenBLAS is
        found). Kernels use it for small GEMMs."""
        if _blas() is None:
            return fn

        def call(*args: Any) -> Any:
            with blas_single_threaded():
                return fn(*args)

        return call

    def parallel_map(self, fn: Callable[[int], Any], n: int) -> list[Any]:
        """``[fn(0), ..., fn(n - 1)]``, the calls spread over the process's intra-op
        threads (:func:`intra_op_threads`; the caller's thread takes a share), with
        numpy's BLAS on one thread in each: a kernel splits its work into ``n``
        independent parts (batch chunks of a convolution) and this runs them side by
        side. The first exception raised by a part is raised here once all parts have
        finished."""
        return parallel_map(fn, n)

    def parallelism(self) -> int:
        """How many parts :meth:`parallel_map` runs at once."""
        return _intra_op[0]


def _host_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return 0


_BLAS_SET_NAMES = ("openblas_set_num_threads", "scipy_openblas_set_num_threads64_",
                   "scipy_openblas_set_num_threads", "openblas_set_num_threads64_")


_BLAS_GET_NAMES = ("openblas_get_num_threads", "scipy_openblas_get_num_threads64_",
                   "scipy_openblas_get_num_threads", "openblas_get_num_threads64_")
#: (set, get) of the OpenBLAS numpy loaded, once looked up (None: none found)
_blas_fns: list[Any] = []
#: the thread count BLAS runs with outside single-threaded calls
_blas_threads = [1]


def _blas() -> tuple[Callable[[int], Any], Callable[[], int]] | None:
    """The set/get thread-count functions of numpy's OpenBLAS (looked up once)."""
    if not _blas_fns:
        found = None
        for lib in _openblas_libs():
            setn = next((getattr(lib, n) for n in _BLAS_SET_NAMES if hasattr(lib, n)), None)
            getn = next((getattr(lib, n) for n in _BLAS_GET_NAMES if hasattr(lib, n)), None)
            if setn is not None and getn is not None:
                found = (setn, getn)
                _blas_threads[0] = int(getn())
                break
        _blas_fns.append(found)
    return _blas_fns[0]


def _openblas_libs() -> list[Any]:
    """The OpenBLAS shared libraries loaded in this process (Linux)."""
    paths: set[str] = set()
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and "openblas" in parts[-1].lower() and \
                        ".so" in parts[-1]:
                    paths.add(parts[-1])
    except OSError:
        return []
    libs = []
    for path in sorted(paths):
        try:
            libs.append(ctypes.CDLL(path))
        except OSError:
            continue
    return libs


#: (regions open, thread count to restore): BLAS runs on one thread while any
#: :func:`blas_single_threaded` region is open, on any thread
_single = [0, 1]
_single_lock = threading.Lock()


@contextlib.contextmanager
def blas_single_threaded() -> Iterator[None]:
    """numpy's BLAS on one thread for the duration (process-wide: OpenBLAS has one
    setting). Regions nest and overlap across threads: the first to open saves the
    thread count and the last to close restores it."""
    blas = _blas()
    if blas is None:
        yield
        return
    with _single_lock:
        if _single[0] == 0:
            _single[1] = _blas_threads[0]
            if _single[1] > 1:
                blas[0](1)
        _single[0] += 1
    try:
        yield
    finally:
        with _single_lock:
            _single[0] -= 1
            if _single[0] == 0 and _single[1] > 1:
                blas[0](_single[1])


def _default_intra_op_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


#: threads a kernel's parts run on (the caller's included); TF's default is one per core
_intra_op = [_default_intra_op_threads()]
_pools: dict[int, DaemonPool] = {}
#: set on a thread while it runs a part of a :func:`parallel_map`
_in_part = threading.local()
_pools_lock = threading.Lock()


def intra_op_threads() -> int:
    """How many threads :func:`parallel_map` spreads a kernel's parts over."""
    return _intra_op[0]


def set_intra_op_threads(n: int) -> None:
    """Set :func:`intra_op_threads` for the process (``intra_op_parallelism_threads``
    of a session's or server's config does this)."""
    _intra_op[0] = max(1, int(n))


def _quiet_fp() -> None:
    np.seterr(all="ignore")  # TF gives inf/nan silently; pool threads own their state


def _pool(threads: int) -> DaemonPool:
    pool = _pools.get(threads)
    if pool is None:
        with _pools_lock:
            pool = _pools.get(threads)
            if pool is None:
                pool = _pools[threads] = DaemonPool(threads, "flowrt-intraop",
                                                    initializer=_quiet_fp)
    return pool


def parallel_map(fn: Callable[[int], Any], n: int) -> list[Any]:
    """``[fn(i) for i in range(n)]`` over the intra-op threads, BLAS on one thread in
    each (see :meth:`CPUDevice.parallel_map`)."""
    threads = min(_intra_op[0], n)
    with blas_single_threaded():
        if threads <= 1 or getattr(_in_part, "on", False):
            # (a part that itself calls parallel_map runs its parts in turn: waiting
            # on the pool from a pool thread could wait for ever)
            return [fn(i) for i in range(n)]
        pool = _pool(threads - 1)
        results: list[Any] = [None] * n
        errors: list[BaseException] = []
        next_i = [0]
        lock = threading.Lock()

        def worker() -> None:
            while True:
                with lock:
                    i = next_i[0]
                    if i >= n or errors:
                        return
                    next_i[0] = i + 1
                _in_part.on = True
                try:
                    results[i] = fn(i)
                except BaseException as e:  # re-raised on the caller's thread
                    with lock:
                        errors.append(e)
                    return
                finally:
                    _in_part.on = False

        futs = [pool.submit(worker) for _ in range(threads - 1)]
        worker()
        for f in futs:
            f.result()
        if errors:
            raise errors[0]
        return results


def set_blas_threads(n: int) -> bool:
    """Set the thread count of the OpenBLAS library numpy loaded (Linux; the symbol
    names of plain and numpy-wheel builds). Returns False when no OpenBLAS is found."""
    _blas()
    done = False
    for lib in _openblas_libs():
        for name in _BLAS_SET_NAMES:
            fn = getattr(lib, name, None)
            if fn is not None:
                fn(int(n))
                done = True
                break
    if done:
        _blas_threads[0] = int(n)
    return done


def _discover(config: Any, job: str, task: int) -> list[Device]:
    if config is not None and getattr(config, "intra_op_parallelism_threads", 0) > 0:
        set_blas_threads(config.intra_op_parallelism_threads)
        set_intra_op_threads(config.intra_op_parallelism_threads)
    n = 1
    if config is not None:
        dc = getattr(config, "device_count", None)
        if dc is not None and "CPU" in dc:
            n = max(1, int(dc["CPU"]))
    return [CPUDevice(i, job, task) for i in range(n)]


@hookimpl
def flowrt_device_types() -> list[DeviceType]:
    return [DeviceType("CPU", _discover, priority=10)]
