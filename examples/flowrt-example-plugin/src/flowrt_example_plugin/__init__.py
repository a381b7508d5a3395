"""flowrt-example-plugin: a template for third-party flowrt plugins.

The package ships three plugins, each its own entry point of the ``flowrt`` group:

- ``example`` (this module): flowrt looks for functions named after its hooks and
  marked with :data:`flowrt.hookimpl`; this plugin implements two of the four:

  - ``flowrt_device_types``: the simulated ``EXAMPLE`` accelerator (:mod:`.device`);
  - ``flowrt_kernel_sets``: the ``ExampleSquarePlusOne`` op, its CPU and EXAMPLE
    kernels, its gradient and its API function ``flowrt.example_square_plus_one``
    (:mod:`.ops`);
- ``example_emu`` (:mod:`.emu`): ``EMU``, an emulated accelerator whose arrays numpy
  cannot read, with EMU kernels for ops other plugins define;
- ``example_unix`` (:mod:`.unix`): the ``unix://`` transport over Unix domain sockets.

Each hook is called once per :class:`flowrt.Runtime`, the first time that runtime needs
the registry the hook fills; keep this module cheap to import (no heavy libraries at
import time, no work at import time beyond building the kernel set).
"""
from __future__ import annotations

from flowrt import hookimpl
from flowrt.device import DeviceType
from flowrt.op_registry import KernelSet

from .device import ExampleDevice, example_device_type
from .ops import example_square_plus_one, ks

__all__ = ["ExampleDevice", "example_device_type", "example_square_plus_one", "ks",
           "flowrt_device_types", "flowrt_kernel_sets", "__version__"]

__version__ = "0.1.0"


@hookimpl
def flowrt_device_types() -> list[DeviceType]:
    """The ``EXAMPLE`` device type (a fresh object per runtime)."""
    return [example_device_type()]


@hookimpl
def flowrt_kernel_sets() -> list[KernelSet]:
    """The kernel set holding ``ExampleSquarePlusOne``."""
    return [ks]
