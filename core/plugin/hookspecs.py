"""Every extension point of flowrt, in one place.

A plugin is a module (or object) with functions named after these hooks, marked with
``flowrt.hookimpl``, and advertised in the ``flowrt`` entry-point group::

    [project.entry-points.flowrt]
    myplugin = "my_package.flowrt_plugin"

Each hook is called exactly once per :class:`~flowrt.runtime.Runtime`, the first time
the runtime needs that kind of registry; the results of all plugins are merged into plain
dicts, and a name registered by two plugins raises, naming both. Nothing calls a hook
per node or per step. See docs/plugins.md for an example of each.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:  # only for annotations: importing this module stays cheap
    from .device import DeviceType
    from .op_registry import KernelSet
    from .passes import GraphPass
    from .transport import Transport

hookspec = pluggy.HookspecMarker("flowrt")
hookimpl = pluggy.HookimplMarker("flowrt")


@hookspec
def flowrt_device_types() -> "list[DeviceType]":
    """Declare device types this plugin provides.

    Called once per runtime, when devices are first needed (a session is created or
    ``flowrt plugins`` runs). A :class:`~flowrt.device.DeviceType` names the type
    (``"CPU"``, ``"GPU"``), gives its placement priority (higher wins when an op has
    kernels for several types) and a ``discover(config, job, task)`` factory that returns
    the devices present in this process. Discovery must never raise for a missing driver
    or library: it returns an empty list and sets ``DeviceType.unavailable_reason``.

    :returns: a list of :class:`~flowrt.device.DeviceType`; two plugins naming the same
        type is an error naming both.
    """


@hookspec
def flowrt_transports() -> "list[Transport]":
    """Declare transports, each bound to a URL scheme (``grpc``, ``zmq``, ``inproc``).

    Called once per runtime, when a session target or server protocol is first resolved.
    A :class:`~flowrt.transport.Transport` creates a server exporting the master and
    worker services on an address, and a client for a remote address.

    :returns: a list of :class:`~flowrt.transport.Transport`; two plugins claiming the
        same scheme is an error naming both.
    """


@hookspec
def flowrt_kernel_sets() -> "list[KernelSet]":
    """Declare op definitions, kernels, gradient functions and API functions.

    Called once per runtime, when the op registry is first used (the first op is built).
    A :class:`~flowrt.op_registry.KernelSet` carries ``OpDef`` objects (typed
    inputs/outputs, attrs, shape function, stateful flag), kernels per (op, device type),
    gradient functions per op type, and functions exported as ``flowrt.<name>``.

    :returns: a list of :class:`~flowrt.op_registry.KernelSet`. An op, a kernel for the
        same (op, device type), a gradient or an API name defined by two plugins is an
        error naming both. The framework ops the core inserts (``_Send``, ``_Recv``,
        ``Const``, ``Identity``, ``NoOp``, ``Placeholder``) are the core's own essential
        kernel set (``flowrt.engine.essential``, never blocked): plugins may add kernels
        for them on their own device types, never define them.
    """


@hookspec
def flowrt_graph_passes() -> "list[GraphPass]":
    """Declare graph optimisation passes run by the master on every new step signature.

    Called once per runtime, when the first step is compiled. Passes run in ascending
    ``order`` after pruning and before placement; each can be switched off by name in
    the session config. A pass whose output only an in-process worker can run sets
    ``GraphPass.local_only = True``: the master skips it for steps with remote tasks.

    :returns: a list of :class:`~flowrt.passes.GraphPass`; duplicate names are an error
        naming both plugins.
    """
