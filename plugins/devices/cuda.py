"""The CUDA device plugin: device type ``GPU``, one device per visible GPU, through CuPy.

Discovery never raises for a missing library, driver or GPU: it finds no devices and
records why in ``DeviceType.unavailable_reason`` (``flowrt plugins`` shows it). CuPy is
imported only when devices are asked for, and a task asked for no GPU
(``ConfigProto(device_count={"GPU": 0})``, ``flowrt server --gpus 0``) never imports it.
Nothing touches a GPU before the first array is put on it: discovery reads device
properties only, and streams, pools and staging buffers are made on first use, so a
parameter server whose ops all land on its CPU creates no CUDA context at all.

``ConfigProto.gpu_options``:

- ``visible_device_list`` ("1,0"): which physical GPUs, in what order, become
  ``/device:GPU:0``, ``/device:GPU:1``...
- ``per_process_gpu_memory_fraction``: a cap on CuPy's memory pool per GPU, as a
  fraction of its memory; allocations beyond it fail with ``ResourceExhaustedError``.
- ``allow_growth``: memory is always taken as it is needed (TF's ``allow_growth=True``).
  With ``allow_growth=False`` and a fraction set, that fraction is reserved up front.

Each device has a compute stream that every kernel on it is queued on, and two copy
streams (host to device, device to host). They are blocking streams: work a host
application queues on CUDA's legacy default stream (a bare ``cupy_array.get()``) waits
for them, so it never reads a half-written result. Host-to-device copies of large arrays go in
chunks through pinned staging buffers: the memcpy of one chunk into pinned memory (split
over a few threads) overlaps the DMA of the previous one, and the compute stream waits on
the copy's event rather than the host waiting for the copy. Copies between two GPUs go
peer to peer (``cudaMemcpyPeerAsync``); tensors for another task are copied to the host
and sent by the transport.
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Iterator

import numpy as np

from flowrt import errors
from flowrt.device import Device, DeviceType
from flowrt.hookspecs import hookimpl
from flowrt.threads import DaemonPool

__all__ = ["CUDADevice", "GPUDeviceType", "flowrt_device_types", "gpu_device_type",
           "STAGING_CHUNK", "SMALL_COPY", "active_gpu"]

#: Host-to-device copies at least this large go through the pinned staging pipeline;
#: smaller ones are one ``cudaMemcpyAsync`` from pageable memory on the compute stream.
SMALL_COPY = 1 << 20
#: Bytes per staging chunk (two chunk buffers per device alternate).
STAGING_CHUNK = 16 << 20
#: Threads copying one chunk into pinned memory (numpy's copy releases the GIL);
#: ``FLOWRT_H2D_THREADS`` overrides it.
_COPY_THREADS = max(1, int(os.environ.get("FLOWRT_H2D_THREADS", "0") or 0)
                    or min(8, (os.cpu_count() or 2) // 2))
#: Device-to-host copies at least this large land in pinned memory (a faster DMA); the
#: host array returned then lives in CuPy's pinned pool until it is dropped.
PINNED_RESULT = 1 << 20

_H2D, _D2H = 1, 2  # cudaMemcpyKind


def _cupy() -> Any:
    import cupy  # noqa: PLC0415 - imported only when GPUs are asked for

    return cupy


class _GPUState:
    """What one physical GPU shares between the Device objects of all sessions in this
    process: streams, staging buffers, peer access. Made on first use."""

    def __init__(self, cp: Any, physical: int):
        self.cp = cp
        self.physical = physical
        self.lock = threading.Lock()  # the staging buffers
        self._ready = False
        self.compute: Any = None
        self.h2d: Any = None
        self.d2h: Any = None
        self.staging: list[Any] = []
        self.staging_events: list[Any] = [None, None]
        self.peers: set[int] = set()

    def ensure(self) -> "_GPUState":
        if not self._ready:
            with self.lock:
                if not self._ready:
                    cp = self.cp
                    with cp.cuda.Device(self.physical):
                        self.compute = cp.cuda.Stream()
                        self.h2d = cp.cuda.Stream()
                        self.d2h = cp.cuda.Stream()
                    self._ready = True
        return self

    def staging_buffers(self) -> list[Any]:
        """Two pinned chunk buffers (as uint8 numpy arrays), made on first use; call
        with ``lock`` held."""
        if not self.staging:
            cp = self.cp
            for _ in range(2):
                mem = cp.cuda.alloc_pinned_memory(STAGING_CHUNK)
                self.staging.append(np.frombuffer(mem, np.uint8, STAGING_CHUNK))
        return self.staging


_STATES: dict[int, _GPUState] = {}
_STATES_LOCK = threading.Lock()
_POOL: list[DaemonPool] = []


def _state(cp: Any, physical: int) -> _GPUState:
    with _STATES_LOCK:
        s = _STATES.get(physical)
        if s is None:
            s = _STATES[physical] = _GPUState(cp, physical)
        return s


def _copy_pool() -> DaemonPool:
    # daemon threads: a copy still running after the main thread ended can use the pool
    with _STATES_LOCK:
        if not _POOL:
            _POOL.append(DaemonPool(_COPY_THREADS, thread_name_prefix="flowrt-h2d",
                                    idle_timeout=None))
        return _POOL[0]


#: ``_TLS.cur``: the physical GPU whose device and compute stream this thread has made
#: current through :meth:`CUDADevice.activate` (None outside one)
_TLS = threading.local()


def active_gpu() -> int | None:
    """The GPU (CUDA ordinal) whose ``activate()`` context this thread is in, if any."""
    return getattr(_TLS, "cur", None)


class _Active:
    """``with device.activate():`` makes the GPU the current device and its compute
    stream the current stream of this thread (CuPy keeps both per thread), and puts back
    the previous ones on exit. What is saved lives in a thread-local stack, so one
    object serves every thread. Re-entrant: inside a context for the same GPU, entering
    costs one thread-local read."""

    __slots__ = ("cp", "stream", "physical")

    def __init__(self, cp: Any, stream: Any, physical: int):
        self.cp, self.stream, self.physical = cp, stream, physical

    def __enter__(self) -> None:
        stack = getattr(_TLS, "stack", None)
        if stack is None:
            stack = _TLS.stack = []
        prev = getattr(_TLS, "cur", None)
        if prev == self.physical:
            stack.append(_NOOP)  # already current on this thread: nothing to change
            return
        rt = self.cp.cuda.runtime
        prev_dev = rt.getDevice()
        if prev_dev != self.physical:
            rt.setDevice(self.physical)
        prev_stream = self.cp.cuda.get_current_stream()
        self.stream.use()
        stack.append((prev, prev_dev, prev_stream))
        _TLS.cur = self.physical

    def __exit__(self, *exc: Any) -> None:
        saved = _TLS.stack.pop()
        if saved is _NOOP:
            return
        prev, prev_dev, prev_stream = saved
        _TLS.cur = prev
        prev_stream.use()  # the stream that was current on this device
        if prev_dev != self.physical:
            self.cp.cuda.runtime.setDevice(prev_dev)


_NOOP = object()


class CUDADevice(Device):
    """One GPU. Arrays are ``cupy.ndarray``; ``xp`` is the ``cupy`` module.

    :param index: the device's index in this task (after ``visible_device_list``)
    :param physical: the CUDA ordinal it maps to
    """

    #: the GPU kernels (``flowrt.plugins.kernels.cuda``) take host arrays and copy
    #: them over themselves, keeping int32 and host-memory arguments on the host as
    #: TF does: feeds reach them as they were fed
    host_inputs = True

    def __init__(self, cp: Any, index: int, physical: int, job: str = "localhost",
                 task: int = 0, memory_limit: int = 0, description: str = "",
                 compute_capability: tuple[int, int] = (0, 0)):
        super().__init__("GPU", index, job, task, memory_limit=memory_limit,
                         description=description)
        self.xp = cp
        self.physical = physical
        #: the CUDA compute capability, ``(major, minor)``
        self.compute_capability = compute_capability
        self._cp = cp
        self._st = _state(cp, physical)

    # -- streams -----------------------------------------------------------------------
    @property
    def compute_stream(self) -> Any:
        """The stream every kernel on this device is queued on."""
        return self._st.ensure().compute

    @contextlib.contextmanager
    def _on(self) -> Iterator[None]:
        """This GPU as the thread's current device (the stream left as it is)."""
        rt = self._cp.cuda.runtime
        prev = rt.getDevice()
        if prev != self.physical:
            rt.setDevice(self.physical)
        try:
            yield
        finally:
            if prev != self.physical:
                rt.setDevice(prev)

    def activate(self) -> _Active:
        """A context making this device and its compute stream current (per thread)."""
        return _Active(self._cp, self._st.ensure().compute, self.physical)

    def synchronize(self) -> None:
        st = self._st.ensure()
        with self._on():
            st.compute.synchronize()
            st.h2d.synchronize()
            st.d2h.synchronize()

    # -- copies ------------------------------------------------------------------------
    def from_host(self, value: Any) -> Any:
        """Copy a host array into this GPU's memory; the compute stream waits for it."""
        cp = self._cp
        a = np.asarray(value)
        if a.dtype.kind in "OSU" or a.dtype.fields is not None:
            raise errors.InvalidArgumentError(
                None, None, f"device {self.name}: cannot hold a tensor of numpy dtype "
                f"{a.dtype} (strings and objects stay in host memory)")
        st = self._st.ensure()
        if a.nbytes < SMALL_COPY:
            with self.activate():
                return cp.asarray(a)
        a = np.ascontiguousarray(a)
        with self.activate():
            out = _alloc(cp, a.shape, a.dtype, self.name)
        src = a.reshape(-1).view(np.uint8)
        dst = out.data.ptr
        n = src.size
        memcpy = cp.cuda.runtime.memcpyAsync
        pool = _copy_pool()
        with st.lock, self._on():
            # ``out`` came from the pool of the compute stream, whose queued kernels may
            # still read the block's previous tenant: the copy stream waits for them
            st.h2d.wait_event(st.compute.record())
            bufs = st.staging_buffers()
            evs = st.staging_events
            i = 0
            for off in range(0, n, STAGING_CHUNK):
                k = i % 2
                if evs[k] is not None:
                    evs[k].synchronize()  # the DMA out of this buffer has finished
                m = min(STAGING_CHUNK, n - off)
                _parallel_copy(pool, bufs[k][:m], src[off:off + m])
                memcpy(dst + off, bufs[k].ctypes.data, m, _H2D, st.h2d.ptr)
                evs[k] = st.h2d.record()
                i += 1
            st.compute.wait_event(evs[(i - 1) % 2])
        return out

    def to_host(self, value: Any) -> np.ndarray:
        """Copy an array of this GPU to a host numpy array (waits for the copy)."""
        cp = self._cp
        if not isinstance(value, cp.ndarray):
            return np.asarray(value)
        st = self._st.ensure()
        with self._on():
            ev = st.compute.record()
            st.d2h.wait_event(ev)
            if value.nbytes >= PINNED_RESULT:
                import cupyx  # noqa: PLC0415

                out = cupyx.empty_pinned(value.shape, value.dtype)
                value.get(stream=st.d2h, out=out)
            else:
                out = value.get(stream=st.d2h)
            st.d2h.synchronize()
        return out

    def copy_from(self, value: Any, src: Device) -> Any:
        """From the host or a CPU device: :meth:`from_host`. From another GPU: a peer
        copy on this device's compute stream, after the source's queued work. From any
        other device type: through the host."""
        if not isinstance(value, self._cp.ndarray):
            return self.from_host(value)  # a host array, whichever device sent it
        if isinstance(src, CUDADevice):
            if src.physical == self.physical:
                return value
            return self._peer_copy(value, src)
        return self.from_host(src.to_host(value))

    def _peer_copy(self, value: Any, src: "CUDADevice") -> Any:
        cp = self._cp
        sst, dst = src._st.ensure(), self._st.ensure()
        with src.activate():
            value = cp.ascontiguousarray(value)
            ev = sst.compute.record()
        with self.activate():
            if src.physical not in dst.peers:
                try:
                    if cp.cuda.runtime.deviceCanAccessPeer(self.physical, src.physical):
                        cp.cuda.runtime.deviceEnablePeerAccess(src.physical)
                except cp.cuda.runtime.CUDARuntimeError:
                    pass  # already enabled, or not possible: the driver stages it
                dst.peers.add(src.physical)
            out = _alloc(cp, value.shape, value.dtype, self.name)
            dst.compute.wait_event(ev)
            cp.cuda.runtime.memcpyPeerAsync(out.data.ptr, self.physical, value.data.ptr,
                                            src.physical, value.nbytes, dst.compute.ptr)
            # keep the source alive until the copy has run
            done = dst.compute.record()
        _keep_until(done, value)
        return out

    # -- DLPack ------------------------------------------------------------------------
    def from_dlpack(self, obj: Any) -> Any:
        """Wrap an object exporting ``__dlpack__`` (a torch or JAX GPU tensor, a cupy
        array) as an array of this device, without a copy when it is on this GPU."""
        cp = self._cp
        with self._on():
            a = cp.from_dlpack(obj)
        if a.device.id != self.physical:
            with self.activate():
                a = cp.asarray(a)
        return a

    def memory_info(self) -> dict[str, int]:
        """``{"in_use": bytes held by arrays, "pooled": bytes CuPy's pool holds,
        "limit": the pool's limit or 0}`` for this GPU."""
        cp = self._cp
        pool = cp.get_default_memory_pool()
        with self._on():
            return {"in_use": int(pool.used_bytes()), "pooled": int(pool.total_bytes()),
                    "limit": int(pool.get_limit())}


def _alloc(cp: Any, shape: Any, dtype: Any, where: str) -> Any:
    try:
        return cp.empty(shape, dtype)
    except cp.cuda.memory.OutOfMemoryError as e:
        raise errors.ResourceExhaustedError(
            None, None, f"OOM when allocating tensor with shape {list(shape)} and type "
            f"{np.dtype(dtype).name} on {where}: {e}") from None


def _parallel_copy(pool: DaemonPool, dst: np.ndarray, src: np.ndarray) -> None:
    n = src.size
    if n < (4 << 20):
        np.copyto(dst, src)
        return
    step = -(-n // _COPY_THREADS)
    futs = [pool.submit(np.copyto, dst[o:o + step], src[o:o + step])
            for o in range(step, n, step)]
    np.copyto(dst[:step], src[:step])
    for f in futs:
        f.result()


_KEEP: list[tuple[Any, Any]] = []
_KEEP_LOCK = threading.Lock()


def _keep_until(event: Any, obj: Any) -> None:
    """Hold ``obj`` until ``event`` has completed (checked on later calls)."""
    with _KEEP_LOCK:
        _KEEP[:] = [(e, o) for e, o in _KEEP if not e.done]
        _KEEP.append((event, obj))


# -- discovery ------------------------------------------------------------------------
def _wanted(config: Any) -> int | None:
    """How many GPUs the config allows (None: all)."""
    dc = getattr(config, "device_count", None) if config is not None else None
    if dc is not None and "GPU" in dc:
        return max(0, int(dc["GPU"]))
    env = os.environ.get("FLOWRT_GPUS", "").strip()
    if env:
        try:
            return max(0, int(env))
        except ValueError:
            pass
    return None


def _visible(gpu_options: Any, count: int) -> list[int]:
    spec = (getattr(gpu_options, "visible_device_list", "") or "").strip()
    if not spec:
        return list(range(count))
    out: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) >= count or int(part) in out:
            raise errors.InvalidArgumentError(
                None, None, f"'visible_device_list' listed an invalid GPU id '{part}' "
                f"(the visible device count is {count}): {spec!r}")
        out.append(int(part))
    return out


_DL_CUDA = (2, 13)  # DLPack's kDLCUDA and kDLCUDAManaged


class GPUDeviceType(DeviceType):
    """The ``GPU`` type: also takes GPU arrays a caller feeds (CuPy arrays, and torch or
    JAX tensors through DLPack, without a copy) and copies fetched ones to the host."""

    def holds(self, value: Any) -> bool:
        if hasattr(value, "__cuda_array_interface__"):
            return True
        dev = getattr(value, "__dlpack_device__", None)
        if dev is None:
            return False
        try:
            return int(dev()[0]) in _DL_CUDA
        except Exception:  # noqa: BLE001 - not a usable exporter: fed the ordinary way
            return False

    def feed(self, value: Any, np_dtype: Any) -> Any:
        try:
            cp = _cupy()
        except ImportError as e:
            raise TypeError(f"a GPU array was fed, but cupy is not installed: {e}") from None
        a = value if isinstance(value, cp.ndarray) else cp.from_dlpack(value)
        if a.dtype != np_dtype:
            a = a.astype(np_dtype)
        return a

    def to_host(self, value: Any) -> np.ndarray:
        get = getattr(value, "get", None)  # a CuPy array
        return get() if get is not None else _cupy().asnumpy(value)


def gpu_device_type() -> DeviceType:
    """A new ``GPU`` :class:`~flowrt.device.DeviceType` (one per runtime)."""
    dt: DeviceType

    def discover(config: Any, job: str, task: int) -> list[Device]:
        want = _wanted(config)
        if want == 0:
            return []
        try:
            cp = _cupy()
        except Exception as e:  # ImportError, or a broken install
            dt.unavailable_reason = (f"cupy could not be imported ({type(e).__name__}: {e});"
                                     " install the cupy wheel matching your CUDA version")
            return []
        try:
            count = cp.cuda.runtime.getDeviceCount()
        except Exception as e:  # no driver, driver too old, no device
            dt.unavailable_reason = f"no usable CUDA driver or device: {e}"
            return []
        if count == 0:
            dt.unavailable_reason = "the CUDA driver reports no device " \
                f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})"
            return []
        gpu_options = getattr(config, "gpu_options", None) if config is not None else None
        physical = _visible(gpu_options, count)
        if want is not None:
            physical = physical[:want]
        fraction = float(getattr(gpu_options, "per_process_gpu_memory_fraction", 0) or 0)
        grow = bool(getattr(gpu_options, "allow_growth", False))
        devices: list[Device] = []
        for i, p in enumerate(physical):
            try:
                props = cp.cuda.runtime.getDeviceProperties(p)
            except Exception as e:
                dt.unavailable_reason = f"GPU {p}: cannot read its properties: {e}"
                continue
            total = int(props["totalGlobalMem"])
            name = props["name"]
            name = name.decode() if isinstance(name, bytes) else str(name)
            limit = int(total * fraction) if 0 < fraction <= 1 else total
            if 0 < fraction:
                _limit_pool(cp, p, fraction, reserve=limit if not grow else 0)
            devices.append(CUDADevice(
                cp, i, p, job, task, memory_limit=limit,
                description=f"device: {p}, name: {name}, compute capability: "
                f"{props['major']}.{props['minor']}",
                compute_capability=(int(props["major"]), int(props["minor"]))))
        dt.unavailable_reason = None if devices else dt.unavailable_reason
        return devices

    dt = GPUDeviceType("GPU", discover, priority=20, array_kernels=False)
    return dt


def _limit_pool(cp: Any, physical: int, fraction: float, reserve: int) -> None:
    """Cap CuPy's pool on ``physical`` and, without allow_growth, reserve memory now."""
    if fraction > 1:
        raise errors.InvalidArgumentError(
            None, None, f"per_process_gpu_memory_fraction must be in (0, 1], got {fraction}")
    pool = cp.get_default_memory_pool()
    with cp.cuda.Device(physical):
        pool.set_limit(fraction=fraction)
        if reserve and pool.total_bytes() < reserve:
            try:  # taken once and returned to the pool, which keeps it
                blk = pool.malloc(max(0, reserve - pool.total_bytes() - (64 << 20)))
                del blk
            except cp.cuda.memory.OutOfMemoryError:
                pass


@hookimpl
def flowrt_device_types() -> list[DeviceType]:
    return [gpu_device_type()]
