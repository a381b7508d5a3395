"""The CPU device plugin: numpy arrays in host memory.

``ConfigProto(device_count={"CPU": n})`` gives ``n`` CPU devices in one process, so
multi-device placement can be exercised without hardware.

The threads numpy's BLAS and the intra-op pool use follow the process's share of the
host (``flowrt.base.host_budget``): every core for a process alone, ``cores // n`` for
each of ``n`` tasks of a cluster on one host, 1 for a client whose steps run on servers
(BLAS threads spin between calls and would take the cores from the other processes).
``ConfigProto(intra_op_parallelism_threads=n)`` (n > 0), given to a server or to the
worker that discovers the devices, sets both to ``n`` instead, for the whole process (as
TF's intra-op pool is per process). BLAS is controlled through threadpoolctl (any BLAS
it knows: OpenBLAS, MKL, BLIS); without one, nothing is changed.

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
import os
import threading
import time
from typing import Any, Callable, Iterator

import numpy as np

try:
    import threadpoolctl
except ImportError:  # a dependency, but without it BLAS is only left as it is
    threadpoolctl = None

from flowrt.base import host_budget
from flowrt.base.threads import DaemonPool
from flowrt.device import Device, DeviceType
from flowrt.hookspecs import hookimpl

__all__ = ["CPUDevice", "flowrt_device_types", "set_blas_threads", "SMALL_GEMM_FLOPS",
           "blas_single_threaded", "parallel_map", "intra_op_threads", "set_intra_op_threads",
           "blas_info", "adapt_to_load"]

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
        """``fn`` run with numpy's BLAS on one thread (``fn`` itself when no BLAS is
        found). Kernels use it for small GEMMs: a call costs two thread-count switches
        (none while BLAS is on one thread anyway, as on a shared host)."""
        if not _controllers():
            return fn

        def call(*args: Any) -> Any:
            opened = _enter_single()
            try:
                return fn(*args)
            finally:
                if opened:
                    _exit_single()

        return call

    def adapt_threads(self) -> None:
        """Before a large product: follow the other processes' load (see
        :func:`adapt_to_load`)."""
        adapt_to_load()

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


#: the BLAS libraries' threadpoolctl controllers, once looked up (``[()]``: none found)
_libs: list[tuple[Any, ...]] = []
_libs_lock = threading.Lock()
#: the thread count BLAS runs with outside single-threaded regions
_blas_threads = [1]
#: BLAS's own thread count when first looked up (its environment's choice): the most a
#: host budget gives it
_initial_blas = [1]
#: the thread that last set the count (see :func:`_set`)
_last_setter: list[int | None] = [None]


def _controllers() -> tuple[Any, ...]:
    """The threadpoolctl controllers of the BLAS libraries in this process (looked up
    once; empty without threadpoolctl or a BLAS it knows)."""
    if not _libs:
        with _libs_lock:
            if not _libs:
                found: tuple[Any, ...] = ()
                if threadpoolctl is not None:
                    try:
                        found = tuple(threadpoolctl.ThreadpoolController()
                                      .select(user_api="blas").lib_controllers)
                    except Exception:  # a library threadpoolctl cannot read: leave BLAS be
                        found = ()
                if found:
                    _initial_blas[0] = _blas_threads[0] = \
                        max(1, int(found[0].get_num_threads() or 1))
                _libs.append(found)
    return _libs[0]


def _set(libs: tuple[Any, ...], n: int) -> None:
    """Set every BLAS library to ``n`` threads (with ``_single_lock`` held).

    threadpoolctl lets only one thread (the first to set) change a process-wide OpenBLAS
    pool and silently ignores the others; flowrt changes it from whichever thread runs a
    kernel, under its own lock, so control is handed to the calling thread first when
    another thread set it last."""
    me = threading.get_ident()
    for lib in libs:
        if _last_setter[0] != me:
            clear = getattr(type(lib), "clear_controlling_thread", None)
            if clear is not None:
                clear(force=True)
        lib.set_num_threads(n)
    _last_setter[0] = me


def _blas() -> tuple[Callable[[int], Any], Callable[[], int]] | None:
    """``(set, get)`` of numpy's BLAS thread count, or None when no BLAS is found."""
    libs = _controllers()
    if not libs:
        return None
    return set_blas_threads, libs[0].get_num_threads


#: regions open: BLAS runs on one thread while any single-threaded region is open, on
#: any thread
_single = [0]
_single_lock = threading.Lock()


def _enter_single() -> bool:
    """Open a single-threaded region; False when there was nothing to switch (BLAS is
    on one thread anyway, or not found) and no region was opened."""
    libs = _controllers()  # (looked up on the first call: it reads BLAS's own count)
    if not libs or (_blas_threads[0] <= 1 and _single[0] == 0):
        return False
    with _single_lock:
        if _single[0] == 0 and _blas_threads[0] > 1:
            _set(libs, 1)
        _single[0] += 1
    return True


def _exit_single() -> None:
    """Close a region :func:`_enter_single` opened: the last to close restores BLAS's
    thread count."""
    with _single_lock:
        _single[0] -= 1
        if _single[0] == 0 and _blas_threads[0] > 1:
            _set(_libs[0], _blas_threads[0])


@contextlib.contextmanager
def blas_single_threaded() -> Iterator[None]:
    """numpy's BLAS on one thread for the duration (process-wide: BLAS has one
    setting). Regions nest and overlap across threads: the first to open sets one
    thread and the last to close restores the count :func:`set_blas_threads` (or the
    host budget) gave."""
    opened = _enter_single()
    try:
        yield
    finally:
        if opened:
            _exit_single()


#: threads a kernel's parts run on (the caller's included); TF's default is one per core,
#: the host budget may give fewer
_intra_op = [host_budget.host_cores()]
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
    """Set the thread count of the BLAS libraries numpy loaded (through threadpoolctl),
    for the process, outside single-threaded regions (one open now keeps one thread
    until it closes). Returns False when no BLAS is found (or threadpoolctl is not
    installed)."""
    libs = _controllers()
    if not libs:
        return False
    with _single_lock:
        _blas_threads[0] = max(1, int(n))
        if _single[0] == 0:
            _set(libs, _blas_threads[0])
    return True


#: seconds between two looks at the host's load
ADAPT_EVERY_S = 1.0
#: (next look, wall clock and process CPU time at the last look)
_adapt = {"next": 0.0, "wall": 0.0, "cpu": 0.0}
_adapt_lock = threading.Lock()


def adapt_to_load(now: float | None = None) -> None:
    """Give BLAS only the cores other processes leave free, for a process alone on its
    host (no cluster share, no ``intra_op_parallelism_threads``): at most once every
    :data:`ADAPT_EVERY_S`, the runnable threads of others are estimated as the host's
    load average less this process's own CPU use since the last look, and BLAS gets
    ``cores - others`` threads (at least 1, at most its budget). BLAS threads wait for
    each other inside every product, so one the OS holds back for another process
    stalls the product (measured on 2 cores with one busy: a 64x3136x1024 product 2 to
    5 times slower on two threads than on one, and the CPU spent spinning)."""
    now = time.monotonic() if now is None else now
    if now < _adapt["next"] or not _adapt_lock.acquire(blocking=False):
        return
    try:
        _adapt["next"] = now + ADAPT_EVERY_S
        cpu = time.process_time()
        wall, last_cpu = _adapt["wall"], _adapt["cpu"]
        _adapt["wall"], _adapt["cpu"] = now, cpu
        budget = host_budget.current()
        if budget.role != "alone" or _initial_blas[0] <= 1 or not wall or \
                not _controllers():
            return
        own = (cpu - last_cpu) / max(now - wall, 1e-3)
        try:
            others = max(0.0, os.getloadavg()[0] - own)
        except OSError:  # no load average here
            return
        want = max(1, min(budget.threads, _initial_blas[0],
                          int(budget.cores - others + 0.5)))
        if want != _blas_threads[0]:
            set_blas_threads(want)
    finally:
        _adapt_lock.release()


def blas_info() -> list[dict[str, Any]]:
    """The BLAS libraries found (threadpoolctl's description of each: ``internal_api``,
    ``version``, ``num_threads`` now, ...); empty when none is found."""
    return [lib.info() for lib in _controllers()]


def _apply_budget(budget: host_budget.ThreadBudget) -> None:
    """Give BLAS and the intra-op pool the process's thread budget: the override as it
    is; otherwise at most the budget, and never more BLAS threads than the library
    started with (``OPENBLAS_NUM_THREADS`` and the like still cap it)."""
    if budget.role == "override":
        set_intra_op_threads(budget.threads)
        set_blas_threads(budget.threads)
        return
    set_intra_op_threads(min(budget.threads, budget.cores))
    if budget.role == "alone" and not _libs:
        return  # BLAS was never changed here: it keeps its own count, no lookup needed
    if _controllers():
        set_blas_threads(min(budget.threads, _initial_blas[0]))


def _discover(config: Any, job: str, task: int) -> list[Device]:
    if config is not None and getattr(config, "intra_op_parallelism_threads", 0) > 0:
        host_budget.set_override(config.intra_op_parallelism_threads)
    n = 1
    if config is not None:
        dc = getattr(config, "device_count", None)
        if dc is not None and "CPU" in dc:
            n = max(1, int(dc["CPU"]))
    return [CPUDevice(i, job, task) for i in range(n)]


@hookimpl
def flowrt_device_types() -> list[DeviceType]:
    return [DeviceType("CPU", _discover, priority=10)]


host_budget.subscribe(_apply_budget)
