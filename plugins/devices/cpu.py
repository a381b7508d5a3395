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
"""
from __future__ import annotations

import ctypes
import os
from typing import Any, Callable

import numpy as np

from flowrt.device import Device, DeviceType
from flowrt.hookspecs import hookimpl

__all__ = ["CPUDevice", "flowrt_device_types", "set_blas_threads", "SMALL_GEMM_FLOPS"]

#: GEMMs with fewer multiply-adds (m * k * n) than this run with BLAS on one thread
SMALL_GEMM_FLOPS = 1 << 23


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
        """``fn`` run with numpy's BLAS on one thread (``fn`` itself when BLAS already
        uses one, or when no OpenBLAS is found). Kernels use it for small GEMMs."""
        blas = _blas()
        if blas is None:
            return fn
        setn = blas[0]

        def call(*args: Any) -> Any:
            n = _blas_threads[0]
            if n <= 1:
                return fn(*args)
            setn(1)
            try:
                return fn(*args)
            finally:
                setn(n)

        return call


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
    n = 1
    if config is not None:
        dc = getattr(config, "device_count", None)
        if dc is not None and "CPU" in dc:
            n = max(1, int(dc["CPU"]))
    return [CPUDevice(i, job, task) for i in range(n)]


@hookimpl
def flowrt_device_types() -> list[DeviceType]:
    return [DeviceType("CPU", _discover, priority=10)]
