"""The ``example_emu`` plugin: ``EMU``, an emulated accelerator, and its kernels.

A real accelerator keeps arrays in memory the host cannot read directly; every crossing
is an explicit copy. ``EMU`` behaves the same way: its arrays are :class:`EmuArray`
objects that hold their data privately and have no ``__array__``, so numpy cannot read
them by accident. A value reaches EMU memory only through :meth:`EmuDevice.from_host`
(or :meth:`EmuDeviceType.feed`) and leaves it only through :meth:`EmuDevice.to_host`;
code that skips a crossing fails loudly instead of computing on the wrong memory.

EMU runs no generic kernels (``array_kernels=False``): only the kernels registered here
for ``EMU``, for ops other plugins define (``Add``, ``MatMul`` ... from flowrt's standard
kernel set, ``ExampleSquarePlusOne`` from the ``example`` plugin). flowrt's conformance
kit compares each of them with the CPU kernel of the same op.

Devices exist only when asked for: ``ConfigProto(device_count={"EMU": n})`` for one
session, or ``FLOWRT_EMU_DEVICES=n``; otherwise discovery finds none and says why.
"""
from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np

from flowrt import errors, hookimpl
from flowrt.device import Device, DeviceType
from flowrt.op_registry import KernelContext, KernelSet

from .ops import OP as SQUARE_PLUS_ONE

__all__ = ["EMU", "EmuArray", "EmuDevice", "EmuDeviceType", "emu_device_type", "xp", "ks",
           "flowrt_device_types", "flowrt_kernel_sets"]

#: The device type name: ``/device:EMU:0``.
EMU = "EMU"


class EmuArray:
    """An array in EMU memory. Kernels on EMU take and return these; nothing else can
    read them (no ``__array__``, and numpy's ufuncs refuse them)."""

    __slots__ = ("_data",)
    __array_ufunc__ = None  # np.add(emu, 1) raises TypeError instead of guessing

    def __init__(self, data: np.ndarray):
        self._data = data

    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def __repr__(self) -> str:
        return f"EmuArray(dtype={self._data.dtype}, shape={self._data.shape})"


def _data(value: Any, who: str) -> np.ndarray:
    """The memory of an EMU array; TypeError naming ``who`` for anything else."""
    if type(value) is not EmuArray:
        raise TypeError(f"{who}: expected an EMU array, got {type(value).__name__} (a "
                        "host value reached EMU memory without EmuDevice.from_host)")
    return value._data


def _emu(a: Any) -> EmuArray:
    return EmuArray(np.asarray(a))  # a 0-d result of numpy is a scalar: keep an array


class _ArrayModule:
    """EMU's array module (``device.xp``): a few numpy functions on EMU arrays."""

    __name__ = "flowrt_example_plugin.emu.xp"
    ndarray = EmuArray

    @staticmethod
    def asarray(value: Any, dtype: Any = None) -> EmuArray:
        """An EMU array of ``value`` (host values are copied into EMU memory)."""
        src = _data(value, "xp.asarray") if type(value) is EmuArray else value
        return EmuArray(np.array(src, dtype=dtype, copy=True))

    @staticmethod
    def zeros(shape: Any, dtype: Any = np.float32) -> EmuArray:
        return EmuArray(np.zeros(shape, dtype))

    @staticmethod
    def add(a: EmuArray, b: EmuArray) -> EmuArray:
        return _emu(np.add(_data(a, "xp.add"), _data(b, "xp.add")))

    @staticmethod
    def multiply(a: EmuArray, b: EmuArray) -> EmuArray:
        return _emu(np.multiply(_data(a, "xp.multiply"), _data(b, "xp.multiply")))


#: The array module of EMU devices.
xp = _ArrayModule()


class EmuDevice(Device):
    """One EMU device: every transfer is an explicit copy."""

    xp = xp
    host_inputs = False  # fed values reach EMU kernels through from_host

    def __init__(self, index: int, job: str = "localhost", task: int = 0):
        super().__init__(EMU, index, job, task, memory_limit=1 << 30,
                         description="flowrt-example-plugin: emulated accelerator")

    def from_host(self, value: np.ndarray) -> EmuArray:
        """Copy a host array into EMU memory."""
        if type(value) is EmuArray:
            raise TypeError(f"{self.name}: from_host got an EMU array, not a host array")
        return EmuArray(np.array(value, copy=True))

    def to_host(self, value: Any) -> np.ndarray:
        """Copy an EMU array into a new host array."""
        return np.array(_data(value, f"{self.name}: to_host"), copy=True)

    def copy_from(self, value: Any, src: Device) -> EmuArray:
        """EMU to EMU copies stay in EMU memory; others go through the host."""
        if src.device_type == EMU:
            return EmuArray(np.array(_data(value, f"{self.name}: copy_from"), copy=True))
        return super().copy_from(value, src)


class EmuDeviceType(DeviceType):
    """The ``EMU`` type: also says which fed or fetched values are EMU arrays."""

    def holds(self, value: Any) -> bool:
        return type(value) is EmuArray

    def feed(self, value: Any, np_dtype: Any) -> EmuArray:
        return EmuArray(_data(value, "EMU feed").astype(np_dtype, copy=True))

    def to_host(self, value: Any) -> np.ndarray:
        return np.array(_data(value, "EMU fetch"), copy=True)


def _device_count(config: Any) -> int:
    dc = getattr(config, "device_count", None) if config is not None else None
    if dc is not None and EMU in dc:
        return max(0, int(dc[EMU]))
    try:
        return max(0, int(os.environ.get("FLOWRT_EMU_DEVICES", "0") or 0))
    except ValueError:
        return 0


def emu_device_type() -> EmuDeviceType:
    """A new ``EMU`` device type (one per runtime)."""

    def discover(config: Any, job: str, task: int) -> list[Device]:
        n = _device_count(config)
        dt.unavailable_reason = None if n else (
            "EMU devices exist only when asked for: ConfigProto(device_count={'EMU': n}) "
            "or FLOWRT_EMU_DEVICES=n")
        return [EmuDevice(i, job, task) for i in range(n)]

    dt = EmuDeviceType(EMU, discover, priority=1, array_kernels=False)
    return dt


# -- kernels: EMU versions of ops other plugins define ----------------------------------
ks = KernelSet("example_emu")

#: the element-wise binary kernels, by op (the factory looks the function up here)
BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "Add": np.add, "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply}


@ks.kernel(*BINARY, device_type=EMU)
def _binary(ctx: KernelContext) -> Callable[[Any, Any], EmuArray]:
    fn, who = BINARY[ctx.op_type], f"{ctx.op_type} on EMU"
    return lambda a, b: _emu(fn(_data(a, who), _data(b, who)))


@ks.kernel("Neg", device_type=EMU)
def _neg(ctx: KernelContext) -> Callable[[Any], EmuArray]:
    return lambda a: _emu(np.negative(_data(a, "Neg on EMU")))


@ks.kernel("Identity", device_type=EMU)
def _identity(ctx: KernelContext) -> Callable[[Any], Any]:
    def identity(a: Any) -> Any:
        _data(a, "Identity on EMU")  # an EMU array, passed on as it is
        return a

    return identity


@ks.kernel("MatMul", device_type=EMU)
def _matmul(ctx: KernelContext) -> Callable[[Any, Any], EmuArray]:
    ta, tb = bool(ctx.attrs["transpose_a"]), bool(ctx.attrs["transpose_b"])

    def matmul(a: Any, b: Any) -> EmuArray:
        x, y = _data(a, "MatMul on EMU"), _data(b, "MatMul on EMU")
        if x.ndim != 2 or y.ndim != 2:
            raise errors.InvalidArgumentError(None, None, "MatMul takes matrices, got "
                                              f"shapes {x.shape} and {y.shape}")
        x, y = (x.T if ta else x), (y.T if tb else y)
        if x.shape[1] != y.shape[0]:
            raise errors.InvalidArgumentError(None, None, "Matrix size-incompatible: "
                                              f"In[0]: {list(x.shape)}, In[1]: {list(y.shape)}")
        return _emu(np.matmul(x, y))

    return matmul


@ks.kernel(SQUARE_PLUS_ONE, device_type=EMU)
def _square_plus_one(ctx: KernelContext) -> Callable[[Any], EmuArray]:
    one = ctx.output_dtypes[0].np.type(1)
    return lambda a: _emu(np.square(_data(a, f"{SQUARE_PLUS_ONE} on EMU")) + one)


@hookimpl
def flowrt_device_types() -> list[DeviceType]:
    """The ``EMU`` device type (a fresh object per runtime)."""
    return [emu_device_type()]


@hookimpl
def flowrt_kernel_sets() -> list[KernelSet]:
    """EMU kernels for ops of other plugins."""
    return [ks]
