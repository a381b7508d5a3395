"""``tf.TensorArray`` on TF's TensorArrayV3 ops, with their gradients.

A TensorArray is a per-run array of tensors behind a resource handle (made by
``TensorArrayV3``). Every op that changes it returns a scalar float32 *flow* that the
next op takes as an input: the flow carries no data, it only orders the ops (and carries
the gradient, so a write in a ``while_loop`` body is differentiated like any loop value).
A Python :class:`TensorArray` object is an immutable ``(handle, flow)`` pair; ``write``
and friends return a new one with the new flow.

Gradients use a second array per forward array and gradient source
(``TensorArrayGradV3``): the gradient of a read writes into it, the gradient of a write
reads from it. Writes to a gradient array add up instead of failing.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.device import host_array
from flowrt.graph import Tensor, api_function, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, as_shape, unknown_shape

from ._common import constant_value, host_reader, ks
from ._common import invalid as _invalid

__all__ = ["TensorArray"]


# -- op definitions ------------------------------------------------------------------------
def _ta_shape(op: Any) -> list[TensorShape]:
    return [TensorShape([2]), TensorShape([])]


def _scalar_flow(op: Any) -> list[TensorShape]:
    return [TensorShape([])] * len(op.outputs)


def _read_shape(op: Any) -> list[TensorShape]:
    return [unknown_shape()]


def _gather_shape(op: Any) -> list[TensorShape]:
    es = op.node_attrs.get("element_shape")
    n = op.inputs[1].shape.as_tuple()
    lead = TensorShape([n[0] if n else None])
    return [lead.concatenate(unknown_shape() if es is None else as_shape(es))]


def _concat_shape(op: Any) -> list[TensorShape]:
    es = op.node_attrs.get("element_shape_except0")
    rest = unknown_shape() if es is None else as_shape(es)
    return [TensorShape([None]).concatenate(rest) if rest.ndims is not None
            else unknown_shape(), TensorShape([None])]


_H = "handle: resource"
_F = "flow_in: float"
ks.op(
    OpDef("TensorArrayV3", inputs=["size: int32"], outputs=[_H, "flow: float"],
          attrs=["dtype: type", "element_shape: shape = ?", "dynamic_size: bool = false",
                 "clear_after_read: bool = true", "identical_element_shapes: bool = false",
                 "tensor_array_name: string = ''"], is_stateful=True, shape_fn=_ta_shape,
          doc="A new TensorArray of the given size (one per run of the op)."),
    OpDef("TensorArrayGradV3", inputs=[_H, _F], outputs=["grad_handle: resource",
                                                         "flow_out: float"],
          attrs=["source: string"], is_stateful=True, shape_fn=_ta_shape,
          doc="The gradient TensorArray of a TensorArray for a gradient source."),
    OpDef("TensorArrayWriteV3", inputs=[_H, "index: int32", "value: T", _F],
          outputs=["flow_out: float"], attrs=["T: type"], is_stateful=True,
          shape_fn=_scalar_flow, doc="Writes an element."),
    OpDef("TensorArrayReadV3", inputs=[_H, "index: int32", _F], outputs=["value: dtype"],
          attrs=["dtype: type"], is_stateful=True, shape_fn=_read_shape,
          doc="Reads an element."),
    OpDef("TensorArrayGatherV3", inputs=[_H, "indices: int32", _F],
          outputs=["value: dtype"], attrs=["dtype: type", "element_shape: shape = ?"],
          is_stateful=True, shape_fn=_gather_shape,
          doc="Stacks the elements at indices into one tensor."),
    OpDef("TensorArrayScatterV3", inputs=[_H, "indices: int32", "value: T", _F],
          outputs=["flow_out: float"], attrs=["T: type"], is_stateful=True,
          shape_fn=_scalar_flow, doc="Writes value's rows to the elements at indices."),
    OpDef("TensorArrayConcatV3", inputs=[_H, _F], outputs=["value: dtype",
                                                           "lengths: int64"],
          attrs=["dtype: type", "element_shape_except0: shape = ?"], is_stateful=True,
          shape_fn=_concat_shape, doc="Concatenates all elements along axis 0."),
    OpDef("TensorArraySplitV3", inputs=[_H, "value: T", "lengths: int64", _F],
          outputs=["flow_out: float"], attrs=["T: type"], is_stateful=True,
          shape_fn=_scalar_flow, doc="Splits value along axis 0 into the elements."),
    OpDef("TensorArraySizeV3", inputs=[_H, _F], outputs=["size: int32"], is_stateful=True,
          shape_fn=_scalar_flow, doc="The current size."),
    OpDef("TensorArrayCloseV3", inputs=[_H], is_stateful=True,
          doc="Deletes the TensorArray's elements."),
)


# -- the runtime state ---------------------------------------------------------------------
def _fmt(shape: tuple[int | None, ...] | None) -> str:
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _compatible(a: tuple[int | None, ...] | None, b: tuple[int, ...]) -> bool:
    return a is None or (len(a) == len(b) and all(x is None or x == y
                                                   for x, y in zip(a, b)))


def _tf_name(d: Any) -> str:
    """TF's DataTypeString spelling of a numpy dtype (float32 is "float")."""
    name = _dt.as_dtype(d).name
    return {"float32": "float", "float64": "double"}.get(name, name)


class _TensorArrayState:
    """What a TensorArrayV3 handle refers to in one run: the elements and their flags."""

    def __init__(self, name: str, dtype: Any, size: int, dynamic_size: bool,
                 clear_after_read: bool, identical_shapes: bool,
                 element_shape: tuple[int | None, ...] | None, aggregate: bool = False):
        self.name, self.dtype = name, dtype
        self.dynamic_size, self.clear_after_read = dynamic_size, clear_after_read
        self.identical_shapes, self.element_shape = identical_shapes, element_shape
        self.aggregate = aggregate  # a gradient array: writes to one index add up
        self.values: list[Any] = [None] * size
        self.written = [False] * size
        self.cleared = [False] * size
        self.closed = False
        self.grads: dict[str, _TensorArrayState] = {}
        self.lock = threading.RLock()

    def __repr__(self) -> str:
        return f"<TensorArray {self.name}: size {len(self.values)}>"

    def check_open(self) -> None:
        if self.closed:
            raise _invalid(f"TensorArray {self.name} has already been closed.")

    def write(self, index: int, value: Any) -> None:
        self.check_open()
        if value.dtype != self.dtype:
            raise _invalid(f"TensorArray dtype is {_tf_name(self.dtype)} but Op is trying "
                           f"to write dtype {_tf_name(value.dtype)}.")
        if index < 0:
            raise _invalid(f"Tried to write to index {index} but array is not resizeable "
                           f"and size is: {len(self.values)}")
        if index >= len(self.values):
            if not self.dynamic_size:
                raise _invalid(f"TensorArray {self.name}: Tried to write to index {index} "
                               "but array is not resizeable and size is: "
                               f"{len(self.values)}")
            grow = index + 1 - len(self.values)
            self.values += [None] * grow
            self.written += [False] * grow
            self.cleared += [False] * grow
        shape = tuple(value.shape)
        if not _compatible(self.element_shape, shape):
            raise _invalid(f"TensorArray {self.name}: Could not write to TensorArray index "
                           f"{index} because the value shape is {_fmt(shape)} which is "
                           "incompatible with the TensorArray's inferred element shape: "
                           f"{_fmt(self.element_shape)} (consider setting "
                           "infer_shape=False).")
        if self.identical_shapes:
            self.element_shape = shape
        if self.cleared[index]:
            raise _invalid(f"TensorArray {self.name}: Could not write to TensorArray index "
                           f"{index} because it has already been read.")
        if self.written[index]:
            if not self.aggregate:
                raise _invalid(f"TensorArray {self.name}: Could not write to TensorArray "
                               f"index {index} because it has already been written to.")
            old = self.values[index]
            if tuple(old.shape) != shape:
                raise _invalid(f"TensorArray {self.name}: Could not aggregate to "
                               f"TensorArray index {index} because the existing shape is "
                               f"{_fmt(tuple(old.shape))} but the new input shape is "
                               f"{_fmt(shape)}.")
            value = old + value
        self.values[index] = value
        self.written[index] = True

    def read(self, index: int, xp: Any) -> Any:
        self.check_open()
        if not 0 <= index < len(self.values):
            raise _invalid(f"Tried to read from index {index} but array size is: "
                           f"{len(self.values)}")
        if self.cleared[index]:
            raise _invalid(f"TensorArray {self.name}: Could not read index {index} twice "
                           "because it was cleared after a previous read (perhaps try "
                           "setting clear_after_read = false?).")
        if not self.written[index]:
            es = self.element_shape
            if es is None or any(d is None for d in es):
                raise _invalid(f"TensorArray {self.name}: Could not read from TensorArray "
                               f"index {index}. Furthermore, the element shape is not fully "
                               f"defined: {_fmt(es)}. It is possible you are working with "
                               "a resizeable TensorArray and stop_gradients is not allowing "
                               "the gradients to be written. If you set the full "
                               "element_shape property on the forward TensorArray, the "
                               "proper all-zeros tensor will be returned instead of "
                               "incurring this error.")
            return xp.zeros(es, dtype=self.dtype)
        v = self.values[index]
        if self.clear_after_read and not self.aggregate:
            self.values[index] = None
            self.cleared[index] = True
        return v


def _state(h: Any) -> _TensorArrayState:
    if not isinstance(h, _TensorArrayState):
        raise _invalid(f"Expected a TensorArray handle, got {type(h).__name__}")
    return h


def _np_shape(s: Any) -> tuple[int | None, ...] | None:
    if s is None:
        return None
    shape = as_shape(s)
    return shape.as_tuple()


# -- kernels -------------------------------------------------------------------------------
@ks.kernel("TensorArrayV3", all_devices=True)
def _ta_kernel(ctx: Any) -> Any:
    a = ctx.attrs
    dtype = _dt.as_dtype(a["dtype"]).np
    name = a.get("tensor_array_name") or ctx.node_name
    es = _np_shape(a.get("element_shape"))
    host = host_reader(ctx)

    def make(size: Any) -> tuple[Any, Any]:
        n = _index(host, size)
        if n < 0:
            raise _invalid(f"Size should be >= 0, got {n} for TensorArray {name}")
        st = _TensorArrayState(name, dtype, n, bool(a.get("dynamic_size")),
                               bool(a.get("clear_after_read", True)),
                               bool(a.get("identical_element_shapes")), es)
        return st, np.float32(0)

    return make


@ks.kernel("TensorArrayGradV3", all_devices=True)
def _ta_grad_kernel(ctx: Any) -> Any:
    source = ctx.attrs["source"]
    if isinstance(source, bytes):
        source = source.decode()

    def grad(h: Any, flow: Any) -> tuple[Any, Any]:
        st = _state(h)
        with st.lock:
            st.check_open()
            g = st.grads.get(source)
            if g is None:
                g = st.grads[source] = _TensorArrayState(
                    f"{st.name}@{source}", st.dtype, len(st.values), False, True,
                    st.identical_shapes, st.element_shape, aggregate=True)
                st.dynamic_size = False  # its size is fixed once a gradient exists
        return g, flow

    return grad


@ks.kernel("TensorArrayWriteV3", all_devices=True)
def _ta_write_kernel(ctx: Any) -> Any:
    host = host_reader(ctx)

    def write(h: Any, index: Any, value: Any, flow: Any) -> Any:
        st = _state(h)
        i = _index(host, index)
        with st.lock:
            st.write(i, value)
        return flow

    return write


def _index(host: Callable[[Any], np.ndarray], x: Any) -> int:
    """A scalar int input (an index, a size) as a Python int: on a device it may be a
    device array (made by an op placed there, such as a ``Range`` in a ``dynamic_rnn``),
    read through ``host``, the kernel's ``host_reader``."""
    return int(x) if isinstance(x, (int, np.integer)) else int(host(x))


def _in_module(v: Any, xp: Any) -> Any:
    """An element as an array of the kernel's array module ``xp``: elements written on
    another device type (a CPU write, a GPU stack) are copied across; to the host
    through the device type that holds the element (:func:`flowrt.device.host_array`)."""
    if xp is np:
        return v if isinstance(v, np.ndarray) else host_array(v)
    return xp.asarray(v)


@ks.kernel("TensorArrayReadV3", all_devices=True)
def _ta_read_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    host = host_reader(ctx)

    def read(h: Any, index: Any, flow: Any) -> Any:
        st = _state(h)
        i = _index(host, index)
        with st.lock:
            return st.read(i, xp)

    return read


@ks.kernel("TensorArrayGatherV3", all_devices=True)
def _ta_gather_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    attr_es = _np_shape(ctx.attrs.get("element_shape"))
    host = host_reader(ctx)

    def gather(h: Any, indices: Any, flow: Any) -> Any:
        st = _state(h)
        idx = host(indices).reshape(-1).tolist()
        with st.lock:
            st.check_open()
            if not idx:
                es = st.element_shape if st.element_shape is not None else attr_es
                if es is None or any(d is None for d in es):
                    raise errors.UnimplementedError(
                        None, None, f"TensorArray has size zero, but element shape "
                        f"{_fmt(es)} is not fully defined. Currently only static shapes "
                        "are supported when packing zero-size TensorArrays.")
                return xp.zeros((0,) + tuple(es), dtype=st.dtype)
            vals = [st.read(i, xp) for i in idx]
        first = tuple(vals[0].shape)
        for k, v in enumerate(vals[1:], 1):
            if tuple(v.shape) != first:
                raise _invalid(f"TensorArray has inconsistent shapes.  Index 0 has shape: "
                               f"{_fmt(first)} but index {k} has shape: "
                               f"{_fmt(tuple(v.shape))}")
        return xp.stack([_in_module(v, xp) for v in vals])

    return gather


@ks.kernel("TensorArrayScatterV3", all_devices=True)
def _ta_scatter_kernel(ctx: Any) -> Any:
    host = host_reader(ctx)

    def scatter(h: Any, indices: Any, value: Any, flow: Any) -> Any:
        st = _state(h)
        idx = host(indices).reshape(-1).tolist()
        if value.ndim == 0 or value.shape[0] != len(idx):
            raise _invalid(f"Expected len(indices) == values.shape[0], but saw: "
                           f"{len(idx)} vs. {value.shape[0] if value.ndim else 0}")
        with st.lock:
            st.check_open()
            if idx and not st.dynamic_size and max(idx) >= len(st.values):
                raise _invalid(f"Max scatter index must be < array size ({max(idx)} vs. "
                               f"{len(st.values)})")
            for k, i in enumerate(idx):
                st.write(i, value[k])
        return flow

    return scatter


@ks.kernel("TensorArrayConcatV3", all_devices=True)
def _ta_concat_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    attr_rest = _np_shape(ctx.attrs.get("element_shape_except0"))

    def concat(h: Any, flow: Any) -> tuple[Any, Any]:
        st = _state(h)
        with st.lock:
            st.check_open()
            n = len(st.values)
            if n == 0:
                if attr_rest is None or any(d is None for d in attr_rest):
                    raise errors.UnimplementedError(
                        None, None, "TensorArray has size zero, but "
                        f"element_shape_except0 {_fmt(attr_rest)} is not fully defined. "
                        "Currently only static shapes are supported when concatenating "
                        "zero-size TensorArrays.")
                return xp.zeros((0,) + tuple(attr_rest), st.dtype), np.zeros(0, np.int64)
            vals = [st.read(i, xp) for i in range(n)]
        for k, v in enumerate(vals):
            if v.ndim == 0:
                raise _invalid(f"Concat saw a scalar shape at index {k} but requires at "
                               "least vectors.  Did you mean to call stack instead?")
            if tuple(v.shape[1:]) != tuple(vals[0].shape[1:]):
                raise _invalid(f"TensorArray has inconsistent shapes.  Index 0 has "
                               f"(excepting dimension 0) shape: "
                               f"{_fmt(tuple(vals[0].shape[1:]))} but index {k} has "
                               f"(excepting dimension 0) shape: {_fmt(tuple(v.shape[1:]))}")
        lengths = np.array([v.shape[0] for v in vals], np.int64)
        return xp.concatenate([_in_module(v, xp) for v in vals], axis=0), lengths

    return concat


@ks.kernel("TensorArraySplitV3", all_devices=True)
def _ta_split_kernel(ctx: Any) -> Any:
    host = host_reader(ctx)

    def split(h: Any, value: Any, lengths: Any, flow: Any) -> Any:
        st = _state(h)
        lens = host(lengths).reshape(-1).tolist()
        if value.ndim == 0:
            raise _invalid("Expected value to be at least a vector, but received shape: []")
        if sum(lens) != value.shape[0]:
            raise _invalid("Expected sum of lengths to be equal to values.shape[0], but "
                           f"sum of lengths is {sum(lens)} and value's shape is: "
                           f"{_fmt(tuple(value.shape))}")
        with st.lock:
            st.check_open()
            if not st.dynamic_size and len(lens) != len(st.values):
                raise _invalid(f"TensorArray's size is not equal to the size of lengths ("
                               f"{len(st.values)} vs. {len(lens)}), and the TensorArray is "
                               "not marked as dynamically resizeable")
            start = 0
            for i, n in enumerate(lens):
                st.write(i, value[start:start + n])
                start += n
        return flow

    return split


@ks.kernel("TensorArraySizeV3", all_devices=True)
def _ta_size_kernel(ctx: Any) -> Any:
    def size(h: Any, flow: Any) -> Any:
        st = _state(h)
        with st.lock:
            return np.int32(len(st.values))

    return size


@ks.kernel("TensorArrayCloseV3", all_devices=True)
def _ta_close_kernel(ctx: Any) -> Any:
    def close(h: Any) -> None:
        st = _state(h)
        with st.lock:
            st.check_open()
            st.closed = True
            st.values = [None] * len(st.values)

    return close


# -- the Python class ----------------------------------------------------------------------
def _as_int32(x: Any, name: str) -> Tensor:
    return convert_to_tensor(x, dtype=_dt.int32, name=name)


class TensorArray:
    """A per-run array of tensors for graph loops (``tf.TensorArray``, TF 1.15 graph form).

    :param dtype: the elements' dtype
    :param size: the initial size (required unless ``handle`` is given)
    :param dynamic_size: writes past the end grow the array
    :param clear_after_read: a read releases the element (reading it again fails)
    :param tensor_array_name: the array's name in error messages
    :param handle: an existing array's handle (with ``flow``)
    :param flow: the flow tensor to continue from
    :param infer_shape: every element must have the shape of the first written one
    :param element_shape: the elements' (partial) shape
    :param colocate_with_first_write_call: accepted for compatibility
    :param name: the op name
    """

    _flowrt_tensor_array = True

    def __init__(self, dtype: Any, size: Any = None, dynamic_size: bool | None = None,
                 clear_after_read: bool | None = None, tensor_array_name: str | None = None,
                 handle: Any = None, flow: Any = None, infer_shape: bool = True,
                 element_shape: Any = None, colocate_with_first_write_call: bool = True,
                 name: str | None = None):
        if clear_after_read is None:
            clear_after_read = True
        dynamic_size = bool(dynamic_size)
        if handle is not None and tensor_array_name:
            raise ValueError("Cannot construct with both handle and tensor_array_name")
        if handle is not None and not isinstance(handle, Tensor):
            raise TypeError("Handle must be a Tensor")
        if handle is None and size is None:
            raise ValueError("Size must be provided if handle is not provided")
        if handle is not None and size is not None:
            raise ValueError("Cannot provide both a handle and size at the same time")
        if handle is not None and element_shape is not None:
            raise ValueError("Cannot provide both a handle and element_shape at the same "
                             "time")
        if handle is not None and dynamic_size:
            raise ValueError("Cannot provide both a handle and dynamic_size at the same "
                             "time")
        if handle is not None and flow is None:
            raise ValueError("flow must be provided if handle is provided")
        self._dtype = _dt.as_dtype(dtype).base_dtype
        self._dynamic_size = dynamic_size
        self._infer_shape = infer_shape
        self._colocate_with_first_write_call = colocate_with_first_write_call
        # shared by every TensorArray object derived from this one, so that a shape
        # learned from a write is known to later reads
        if element_shape is None:
            self._element_shape = [unknown_shape()]
        else:
            self._element_shape = [as_shape(element_shape)]
        if handle is not None:
            self._handle = handle
            self._flow = convert_to_tensor(flow)
        else:
            self._handle, self._flow = apply_op(
                "TensorArrayV3", name=name or "TensorArray", size=_as_int32(size, "size"),
                dtype=self._dtype, element_shape=self._element_shape[0],
                dynamic_size=dynamic_size, clear_after_read=clear_after_read,
                identical_element_shapes=bool(infer_shape),
                tensor_array_name=tensor_array_name or "")

    # -- properties --
    @property
    def flow(self) -> Tensor:
        """The flow tensor ordering this array's ops."""
        return self._flow

    @property
    def dtype(self) -> Any:
        """The elements' dtype."""
        return self._dtype

    @property
    def handle(self) -> Tensor:
        """The resource handle."""
        return self._handle

    @property
    def element_shape(self) -> TensorShape:
        """The (partial) shape every element has."""
        return self._element_shape[0]

    @property
    def dynamic_size(self) -> bool:
        return self._dynamic_size

    def _merge_element_shape(self, shape: TensorShape) -> None:
        if not self._infer_shape:
            return
        cur = self._element_shape[0]
        if not shape.is_compatible_with(cur):
            raise ValueError(f"Inconsistent shapes: saw {shape} but expected {cur} "
                             "(and infer_shape=True)")
        self._element_shape[0] = cur.merge_with(shape)

    def _with_flow(self, flow: Tensor) -> "TensorArray":
        """A TensorArray for the same array continuing from ``flow``."""
        ta = TensorArray(self._dtype, handle=self._handle, flow=flow,
                         infer_shape=self._infer_shape,
                         colocate_with_first_write_call=self._colocate_with_first_write_call)
        ta._element_shape = self._element_shape
        ta._dynamic_size = self._dynamic_size
        return ta

    # -- ops --
    def identity(self) -> "TensorArray":
        """This array with an Identity of its flow (to anchor control dependencies)."""
        return self._with_flow(api_function("identity")(self._flow))

    def grad(self, source: str, flow: Any = None, name: str | None = None) -> "TensorArray":
        """The gradient array of this array for the gradient source ``source``."""
        flow = self._flow if flow is None else flow
        with name_scope(name, "TensorArrayGrad", [self._handle]):
            g_handle, g_flow = apply_op("TensorArrayGradV3", handle=self._handle,
                                        flow_in=flow, source=source)
        g = TensorArray(self._dtype, handle=g_handle, flow=g_flow,
                        infer_shape=self._infer_shape, colocate_with_first_write_call=False)
        g._element_shape = self._element_shape
        return g

    def read(self, index: Any, name: str | None = None) -> Tensor:
        """The element at ``index``."""
        value = apply_op("TensorArrayReadV3", name=name, handle=self._handle,
                         index=_as_int32(index, "index"), flow_in=self._flow,
                         dtype=self._dtype)
        if self.element_shape.ndims is not None:
            value._shape = self.element_shape
        return value

    def write(self, index: Any, value: Any, name: str | None = None) -> "TensorArray":
        """Writes ``value`` at ``index``; returns the array after the write."""
        with name_scope(name, "TensorArrayWrite", [self._handle, index, value]):
            value = convert_to_tensor(value, preferred_dtype=self._dtype, name="value") \
                if not isinstance(value, Tensor) else value
            self._merge_element_shape(value.shape)
            flow = apply_op("TensorArrayWriteV3", handle=self._handle,
                            index=_as_int32(index, "index"), value=value,
                            flow_in=self._flow)
        return self._with_flow(flow)

    def stack(self, name: str | None = None) -> Tensor:
        """All elements stacked along a new axis 0."""
        with name_scope(name, "TensorArrayStack", [self._handle]):
            return self.gather(api_function("range")(0, self.size()), name=None)

    def gather(self, indices: Any, name: str | None = None) -> Tensor:
        """The elements at ``indices`` stacked along a new axis 0."""
        es = self.element_shape
        value = apply_op("TensorArrayGatherV3", name=name, handle=self._handle,
                         indices=_as_int32(indices, "indices"), flow_in=self._flow,
                         dtype=self._dtype, element_shape=es)
        return value

    def concat(self, name: str | None = None) -> Tensor:
        """All elements concatenated along axis 0."""
        es = self.element_shape
        rest = es[1:] if es.ndims else unknown_shape()
        value, _ = apply_op("TensorArrayConcatV3", name=name, handle=self._handle,
                            flow_in=self._flow, dtype=self._dtype,
                            element_shape_except0=rest)
        return value

    def unstack(self, value: Any, name: str | None = None) -> "TensorArray":
        """Writes ``value[i]`` to element ``i`` for every row of ``value``."""
        with name_scope(name, "TensorArrayUnstack", [self._handle, value]):
            value = convert_to_tensor(value, preferred_dtype=self._dtype, name="value") \
                if not isinstance(value, Tensor) else value
            n = api_function("shape")(value)
            indices = api_function("range")(0, api_function("strided_slice")(n, [0], [1], [1],
                                                               shrink_axis_mask=1))
            return self.scatter(indices, value, name=None)

    def scatter(self, indices: Any, value: Any, name: str | None = None) -> "TensorArray":
        """Writes ``value[k]`` to element ``indices[k]``."""
        with name_scope(name, "TensorArrayScatter", [self._handle, value, indices]):
            value = convert_to_tensor(value, preferred_dtype=self._dtype, name="value") \
                if not isinstance(value, Tensor) else value
            if value.shape.ndims is not None and value.shape.ndims >= 1:
                self._merge_element_shape(value.shape[1:])
            flow = apply_op("TensorArrayScatterV3", handle=self._handle,
                            indices=_as_int32(indices, "indices"), value=value,
                            flow_in=self._flow)
        return self._with_flow(flow)

    def split(self, value: Any, lengths: Any, name: str | None = None) -> "TensorArray":
        """Writes consecutive row blocks of ``value`` of the given lengths."""
        with name_scope(name, "TensorArraySplit", [self._handle, value, lengths]):
            value = convert_to_tensor(value, preferred_dtype=self._dtype, name="value") \
                if not isinstance(value, Tensor) else value
            lengths_64 = convert_to_tensor(lengths, dtype=_dt.int64) \
                if not isinstance(lengths, Tensor) else api_function("cast")(lengths, _dt.int64)
            clengths = constant_value(lengths_64)
            if value.shape.ndims and clengths is not None and clengths.size and \
                    (clengths == clengths.reshape(-1)[0]).all():
                self._merge_element_shape(TensorShape([int(clengths.reshape(-1)[0])])
                                          .concatenate(value.shape[1:]))
            flow = apply_op("TensorArraySplitV3", handle=self._handle, value=value,
                            lengths=lengths_64, flow_in=self._flow)
        return self._with_flow(flow)

    def size(self, name: str | None = None) -> Tensor:
        """The current size (an int32 scalar)."""
        return apply_op("TensorArraySizeV3", name=name, handle=self._handle,
                        flow_in=self._flow)

    def close(self, name: str | None = None) -> Any:
        """Deletes the elements (the op)."""
        return apply_op("TensorArrayCloseV3", name=name, handle=self._handle)


ks.export("TensorArray", TensorArray)


# -- gradients -----------------------------------------------------------------------------
ks.not_differentiable("TensorArrayV3", "TensorArrayGradV3", "TensorArraySizeV3",
                      "TensorArrayCloseV3")


def _grad_source(t: Any) -> str:
    """The gradient source of a gradient op (TF's ``_GetGradSource``): the name prefix
    up to the ``gradients`` scope it was made in."""
    name = t.op.name if isinstance(t, Tensor) else t.name
    parts = name.split("/")
    for k, p in enumerate(parts):
        if p.startswith("gradients"):
            return "/".join(parts[:k + 1])
    raise ValueError(f"Expected op/tensor name to start with gradients (excluding "
                     f"scope), got: {name}")


def _forward(op: Any, dtype: Any, flow: Tensor) -> TensorArray:
    return TensorArray(dtype, handle=op.inputs[0], flow=flow,
                       colocate_with_first_write_call=False)


@ks.gradient("TensorArrayReadV3")
def _read_grad(op: Any, grad: Tensor) -> list[Any]:
    index, flow = op.inputs[1], op.inputs[2]
    g = _forward(op, op.node_attrs["dtype"], flow).grad(_grad_source(grad), flow=flow)
    return [None, None, g.write(index, grad).flow]


@ks.gradient("TensorArrayWriteV3")
def _write_grad(op: Any, flow: Tensor) -> list[Any]:
    index = op.inputs[1]
    flow_out = api_function("identity")(op.outputs[0], name="flow_out")
    from flowrt.graph import get_default_graph

    with get_default_graph().control_dependencies([flow_out]):
        flow = api_function("identity")(flow, name="write_barrier")
    g = _forward(op, op.node_attrs["T"], flow).grad(_grad_source(flow), flow=flow)
    return [None, None, g.read(index), flow]


@ks.gradient("TensorArrayGatherV3")
def _gather_grad(op: Any, grad: Tensor) -> list[Any]:
    indices, flow = op.inputs[1], op.inputs[2]
    g = _forward(op, op.node_attrs["dtype"], flow).grad(_grad_source(grad), flow=flow)
    return [None, None, g.scatter(indices, grad).flow]


@ks.gradient("TensorArrayScatterV3")
def _scatter_grad(op: Any, flow: Tensor) -> list[Any]:
    indices = op.inputs[1]
    flow_out = api_function("identity")(op.outputs[0], name="flow_out")
    from flowrt.graph import get_default_graph

    with get_default_graph().control_dependencies([flow_out]):
        flow = api_function("identity")(flow, name="write_barrier")
    g = _forward(op, op.node_attrs["T"], flow).grad(_grad_source(flow), flow=flow)
    return [None, None, g.gather(indices), flow]


@ks.gradient("TensorArrayConcatV3")
def _concat_grad(op: Any, grad: Tensor, unused_lengths_grad: Any = None) -> list[Any]:
    flow = op.inputs[1]
    lengths = op.outputs[1]
    g = _forward(op, op.node_attrs["dtype"], flow).grad(_grad_source(grad), flow=flow)
    return [None, g.split(grad, lengths).flow]


@ks.gradient("TensorArraySplitV3")
def _split_grad(op: Any, flow: Tensor) -> list[Any]:
    flow_out = api_function("identity")(op.outputs[0], name="flow_out")
    from flowrt.graph import get_default_graph

    with get_default_graph().control_dependencies([flow_out]):
        flow = api_function("identity")(flow, name="write_barrier")
    g = _forward(op, op.node_attrs["T"], flow).grad(_grad_source(flow), flow=flow)
    return [None, g.concat(), None, flow]
