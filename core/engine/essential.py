"""The essential kernel set: the framework ops the core itself inserts or needs to run
any graph, defined by the core and registered by every runtime before any plugin.

Like pytest's essential plugins, this set cannot be blocked
(``Runtime(block=["essential"])`` raises :class:`~flowrt.runtime.PluginError`): without
it no partitioned step could move a tensor, and no graph could be fed or fetched.
``Runtime(builtins=False)`` is the only runtime without it (an empty one, for tests).

=============== ==========================================================================
op              why the core needs it
=============== ==========================================================================
``_Send``       partitioning puts one on the sending side of every cut edge
``_Recv``       ... and one on the receiving side
``Const``       partitioning's dummy source of a cross-device control edge
``Identity``    the pivot of a partition's loop-control chain; the executor forwards refs
``NoOp``        a control-dependency anchor (``group``, ``Saver``, initializers)
``Placeholder`` the tensor a caller feeds
=============== ==========================================================================

Feeds become ``_Arg`` nodes (:data:`~flowrt.ir.ARG_OP`) that the executor fills
itself; they have no op definition. The op API functions (``tf.identity``,
``tf.constant``, ``tf.no_op``, ``tf.placeholder``) stay in the ``standard`` plugin;
kernels for other device types (the ``cuda_kernels`` plugin's ``GPU`` ones) may be
registered for these ops by any plugin.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..base import errors
from ..base.tensor_shape import TensorShape, as_shape, unknown_shape
from ..plugin.hookspecs import hookimpl
from ..plugin.op_registry import KernelSet, OpDef
from .executor import DEAD
from .rendezvous import make_key

__all__ = ["ks", "ESSENTIAL_OPS", "flowrt_kernel_sets"]

ks = KernelSet("essential")


def _const_shape(op: Any) -> list[TensorShape]:
    return [TensorShape(np.shape(op.node_attrs["value"]))]


def _placeholder_shape(op: Any) -> list[TensorShape]:
    s = op.node_attrs.get("shape")
    return [unknown_shape() if s is None else as_shape(s)]


def _unchanged_shape(op: Any) -> list[TensorShape]:
    return [op.inputs[0].shape]


_TRANSFER_ATTRS = ["tensor_name: string", "send_device: string",
                   "send_device_incarnation: int", "recv_device: string",
                   "client_terminated: bool = false"]
ks.op(
    OpDef("Const", outputs=["output: dtype"], attrs=["value: tensor", "dtype: type"],
          shape_fn=_const_shape, doc="A constant tensor."),
    OpDef("Placeholder", outputs=["output: dtype"], attrs=["dtype: type", "shape: shape = ?"],
          shape_fn=_placeholder_shape, doc="A value that must be fed."),
    OpDef("Identity", inputs=["input: T"], outputs=["output: T"], attrs=["T: type"],
          shape_fn=_unchanged_shape, doc="Returns its input."),
    OpDef("NoOp", doc="Does nothing; useful as a control-dependency anchor."),
    OpDef("_Send", inputs=["tensor: T"], attrs=["T: type"] + _TRANSFER_ATTRS,
          is_stateful=True, doc="Sends a tensor to another device through the rendezvous."),
    OpDef("_Recv", outputs=["tensor: tensor_type"], attrs=["tensor_type: type"] + _TRANSFER_ATTRS,
          is_stateful=True, doc="Receives a tensor sent by the matching _Send."),
)

#: the op types of the essential set
ESSENTIAL_OPS: tuple[str, ...] = tuple(ks.ops)


def _freeze(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        a = a.view()
        a.flags.writeable = False
    return a


@ks.kernel("Const", kind="const", all_devices=True)
def _const_kernel(ctx: Any) -> Any:
    # A read-only array (0-d ones too: numpy's binary ufuncs take a 0-d array faster
    # than a numpy scalar). Fetches copy read-only arrays, so callers never alias it.
    value = _freeze(ctx.device.from_host(np.asarray(ctx.attrs["value"])))
    return lambda: value


@ks.kernel("Placeholder")
def _placeholder_kernel(ctx: Any) -> Any:
    dt = ctx.attrs["dtype"]
    shape = ctx.attrs.get("shape")
    shape_s = "unknown" if shape is None or shape.ndims is None else "[" + ",".join(
        "?" if d is None else str(d) for d in shape.as_tuple()) + "]"
    msg = (f"You must feed a value for placeholder tensor '{ctx.node_name}' with dtype "
           f"{dt.name}" + ("" if shape_s == "unknown" else f" and shape {shape_s}"))

    def compute() -> Any:
        raise errors.InvalidArgumentError(None, None, msg)

    return compute


@ks.kernel("Identity")
def _identity_kernel(ctx: Any) -> Any:
    def identity(x: Any) -> Any:
        return x

    return identity


@ks.kernel("NoOp", all_devices=True)
def _noop_kernel(ctx: Any) -> Any:
    def noop() -> None:
        return None

    return noop


def _transfer_key(ctx: Any) -> str:
    a = ctx.attrs
    return make_key(a["send_device"], int(a["send_device_incarnation"]), a["recv_device"],
                    a["tensor_name"])


@ks.kernel("_Send", kind="step", all_devices=True)
def _send_kernel(ctx: Any) -> Any:
    key = _transfer_key(ctx)
    device = ctx.device

    def send(step: Any, x: Any) -> None:
        step.rendezvous.send(key, (x, device))

    return send


def _host_only(value: Any) -> bool:
    """Whether ``value`` is a host array of strings or objects, which no device copies
    (a string ``Switch`` of a ``cond`` placed on a GPU passes it on in host memory)."""
    return type(value) is np.ndarray and value.dtype.kind in "OSU"


@ks.kernel("_Recv", kind="async", all_devices=True)
def _recv_kernel(ctx: Any) -> Any:
    """The ``_Recv`` kernel: an async compute that waits on the step's rendezvous for
    what the matching ``_Send`` sent under the same key and completes the node with it,
    copied onto this node's device when another device sent it (a dead value passes as
    it is). A failed receive or copy becomes the node's error."""
    key = _transfer_key(ctx)
    device = ctx.device

    def recv(step: Any, done: Any) -> None:
        def arrived(item: Any, err: BaseException | None) -> None:
            if err is not None:
                done(None, err)
                return
            value, src = item
            try:
                # copies between device types go through the device plugins; strings
                # and objects stay in host memory on every device (TF's HostMemory)
                done(value if src is device or value is DEAD or _host_only(value) else
                     device.copy_from(value, src))
            except Exception as e:  # noqa: BLE001 - reported as the node's error
                done(None, e)

        step.rendezvous.recv_async(key, arrived)

    return recv


@hookimpl
def flowrt_kernel_sets() -> list[KernelSet]:
    return [ks]
