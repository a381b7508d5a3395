"""Device base classes: what a device plugin subclasses.

A :class:`Device` is one place where kernels run: it names its array module (numpy,
cupy), moves arrays to and from host memory and between devices of its type, and waits
for its queued work. A :class:`DeviceType` discovers the devices of one kind.
"""
from __future__ import annotations

import random
from typing import Any, Callable

import numpy as np

from ..base.device_spec import canonical_device, canonical_type
from .resources import ResourceMgr

__all__ = ["Device", "DeviceType"]


class Device:
    """One device. Subclasses set ``xp`` and override the copy methods they need."""

    #: the array module kernels use on this device (numpy, cupy)
    xp: Any = np

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
        """Copy ``value`` (an array of this device) to a host numpy array."""
        raise NotImplementedError(f"device {self.name}: need to_host")

    def from_host(self, value: np.ndarray) -> Any:
        """Copy a host numpy array onto this device."""
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
