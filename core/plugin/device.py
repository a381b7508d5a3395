"""Device base classes: what a device plugin subclasses, and the device-array contract.

A :class:`Device` is one place where kernels run: it names its array module (numpy,
cupy), moves arrays to and from host memory and between devices of its type, and waits
for its queued work. A :class:`DeviceType` discovers the devices of one kind.

Every value that crosses between host memory and a device goes through that device's
:meth:`Device.to_host` / :meth:`Device.from_host` (or its type's
:meth:`DeviceType.to_host` for a value a caller fed): fetches, feeds, the wire, saved
and restored variables, summaries. The core never guesses at a device library's array
type; where it holds a value and no device (the wire encoder), :func:`host_array` asks
the runtime's device types, then DLPack, then numpy, and names the value's type when
none of them can convert it (docs/plugins.md, "The device-array contract").
"""
from __future__ import annotations

import random
from typing import Any, Callable

import numpy as np

from ..base.device_spec import canonical_device, canonical_type
from ..base.errors import InternalError, OpError
from .resources import ResourceMgr
from .runtime import default_runtime

__all__ = ["Device", "DeviceType", "host_array", "takes_host_arrays"]

#: DLPack's ``kDLCPU`` device type: a DLPack exporter numpy can read without a copy
DLPACK_CPU = 1
#: values that are host values as they are (numpy converts them)
_HOST_VALUES = (np.generic, bytes, bytearray, memoryview, str, int, float, complex, bool,
                list, tuple, type(None))


class Device:
    """One device. Subclasses set ``xp`` and override the copy methods they need."""

    #: the array module kernels use on this device (numpy, cupy)
    xp: Any = np
    #: whether kernels on this device take host numpy arrays as inputs (and copy them
    #: over themselves where they need to): the executor then hands them fed values as
    #: they are instead of through :meth:`from_host`. ``None``: true for the ``CPU``
    #: type, false for every other (see :func:`takes_host_arrays`)
    host_inputs: bool | None = None

    def __init__(self, device_type: str, index: int, job: str = "localhost", task: int = 0,
                 memory_limit: int = 0, description: str = ""):
        self.device_type = canonical_type(device_type)
        self.index = index
        self.name = canonical_device(f"/device:{self.device_type}:{index}", job, task)
        self.incarnation = random.getrandbits(63) or 1
        self.memory_limit = memory_limit
        self.description = description

        self.resource_mgr = ResourceMgr(self.name)

    def to_host(self, value: Any) -> np.ndarray:
        """Copy ``value`` (an array of this device) to a host numpy array the caller
        owns. Called for every fetched value a node on this device made, for values
        sent to another device or task, and by kernels that need host memory."""
        raise NotImplementedError(f"device {self.name}: need to_host")

    def from_host(self, value: np.ndarray) -> Any:
        """Copy a host numpy array onto this device. Called for every value fed to a
        node on this device (unless :attr:`host_inputs`), for constants, for values
        received from another device or task, and for restored variables."""
        raise NotImplementedError(f"device {self.name}: need from_host")

    def copy_from(self, value: Any, src: "Device") -> Any:
        """Copy an array living on ``src`` onto this device (default: through the host)."""
        if src.device_type == "CPU":
            return self.from_host(value)
        return self.from_host(src.to_host(value))

    def synchronize(self) -> None:
        """Block until all work queued on this device has finished."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class DeviceType:
    """A kind of device, as returned by the ``flowrt_device_types`` hook.

    :param name: the type name (``"CPU"``, ``"GPU"``); canonicalised
    :param discover: ``discover(config, job, task) -> list[Device]``; ``config`` is the
        session's ``ConfigProto`` (or None). It must not raise for a missing driver:
        return ``[]`` and set :attr:`unavailable_reason`.
    :param priority: placement preference when an op has kernels for several types
    :param array_kernels: whether generic array-module kernels (``device_type="*"``)
        run on this type
    """

    def __init__(self, name: str, discover: Callable[[Any, str, int], list[Device]],
                 priority: int = 0, array_kernels: bool = True):
        self.name = canonical_type(name)
        self.discover = discover
        self.priority = priority
        self.array_kernels = array_kernels
        self.unavailable_reason: str | None = None
        self.plugin: str | None = None

    # -- values a caller hands in or gets back (feeds and fetches) ---------------------
    def holds(self, value: Any) -> bool:
        """Whether ``value`` is an array in this type's memory (a CuPy array, a DLPack
        exporter on a CUDA device ...): a feed the session passes through :meth:`feed`
        instead of converting it with numpy, or a fetched value it copies back with
        :meth:`to_host`. Called for feed and fetch values that are not numpy or Python
        values; must be cheap and must not import the device's library just to answer
        no. The default holds nothing (host memory only)."""
        return False

    def feed(self, value: Any, np_dtype: Any) -> Any:
        """A fed value this type :meth:`holds`, as the array its kernels take, of numpy
        dtype ``np_dtype``: without a copy where possible (DLPack), so a GPU feed stays
        in GPU memory. Raise ``TypeError`` if the value cannot be taken (the device's
        library is missing)."""
        raise NotImplementedError(f"device type {self.name}: need feed")

    def to_host(self, value: Any) -> np.ndarray:
        """A value this type :meth:`holds` (a fetched device array, or a fed one fetched
        back) as a host numpy array the caller owns."""
        raise NotImplementedError(f"device type {self.name}: need to_host")

    def __repr__(self) -> str:
        return f"DeviceType({self.name!r}, priority={self.priority})"


def takes_host_arrays(device: Any) -> bool:
    """Whether kernels on ``device`` take host numpy arrays as they are: its
    :attr:`Device.host_inputs`, or, when that is None, whether it is a ``CPU``."""
    h = getattr(device, "host_inputs", None)
    return device.device_type == "CPU" if h is None else bool(h)


def _type_name(value: Any) -> str:
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _as_host(h: Any, value: Any, who: str) -> np.ndarray:
    """What ``who``'s ``to_host`` gave for ``value``, checked to be a host array."""
    if isinstance(h, np.ndarray):
        return h
    try:
        return np.asarray(h)
    except Exception as e:  # noqa: BLE001 - reported with what gave it
        raise InternalError(None, None, f"{who}: to_host of a {_type_name(value)} gave a "
                            f"{_type_name(h)}, not a numpy array ({type(e).__name__}: "
                            f"{e})") from None


def host_array(value: Any, device: Device | None = None, runtime: Any = None) -> np.ndarray:
    """``value`` as a host numpy array, for a crossing to host memory (the wire, a
    fetch) that holds a value and perhaps no device: a numpy array as it is; through
    ``device.to_host`` when the owning ``device`` is known (and is not a CPU); else
    through the :meth:`DeviceType.to_host` of the first device type of ``runtime``
    (default: the process's runtime) that :meth:`DeviceType.holds` it; else a DLPack
    exporter on the CPU through ``numpy.from_dlpack``; else numpy's own conversion
    (``__array__``, the array interface, the buffer protocol, Python values).

    :raises InternalError: naming the value's type (and the device) when nothing can
        bring it to host memory
    """
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, _HOST_VALUES):
        return np.asarray(value)
    if device is not None and device.device_type != "CPU":
        try:
            return _as_host(device.to_host(value), value, f"device {device.name}")
        except OpError:
            raise
        except Exception as e:
            raise InternalError(None, None, f"device {device.name}: to_host of a "
                                f"{_type_name(value)} raised {type(e).__name__}: {e}"
                                ) from e
    rt = runtime if runtime is not None else default_runtime()
    for dt in rt.device_types.values():
        if dt.holds(value):
            return _as_host(dt.to_host(value), value, f"device type {dt.name}")
    where = getattr(value, "__dlpack_device__", None)
    if where is not None and hasattr(value, "__dlpack__"):
        try:
            on_cpu = int(where()[0]) == DLPACK_CPU
        except Exception:  # noqa: BLE001 - not a usable exporter: tried as an array below
            on_cpu = False
        if on_cpu:
            return np.from_dlpack(value)
    if hasattr(value, "__array__") or hasattr(value, "__array_interface__"):
        try:
            return np.asarray(value)
        except Exception as e:  # noqa: BLE001 - reported with the type below
            why = f"numpy could not convert it ({type(e).__name__}: {e})"
    else:
        why = "it has no __array__, array interface or DLPack CPU export"
    raise InternalError(None, None, f"cannot bring a value of type {_type_name(value)} to "
                        f"host memory: no device type of the runtime holds it "
                        f"(DeviceType.holds), and {why}. A device's arrays reach the host "
                        f"through its to_host (docs/plugins.md, \"The device-array "
                        f"contract\")")
