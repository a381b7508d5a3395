"""Step graphs on the wire: :class:`~flowrt.ir.GraphIR` <-> ``GraphDef``.

The distributed master registers each partition on a worker in another process, so a
partition travels as a ``GraphDef`` protobuf. Every node keeps its name, op type,
inputs (``"src"``, ``"src:1"``, ``"^ctrl"``) and attrs (TensorFlow's ``AttrValue``
encodings); the NodeDef's ``device`` is the node's assigned device. What a worker cannot
recompute from the op definitions travels in reserved attrs whose names start with
``_flowrt_``:

- ``_flowrt_out_dtypes`` / ``_flowrt_in_dtypes``: ``list(type)``; reference dtypes use
  TensorFlow's ``*_REF`` enum values
- ``_flowrt_out_shapes`` / ``_flowrt_in_shapes``: ``list(shape)``, unknown dims and
  ranks as TensorFlow writes them
- ``_flowrt_device``: the requested device, when it differs from the assigned one
- ``_flowrt_feed``: on an ``_Arg`` node, the name of the fed tensor
- ``_flowrt_fetch``: ``list(int)``, pairs (position among the step's fetches, output
  index) for each fetch the node provides
- ``_flowrt_target``: the node is one of the step's targets

A GraphDef without the reserved attrs (one written by TensorFlow) still reads: dtypes
come from the op definitions and shapes are unknown.

:func:`ir_from_graph_def` parses input from the network: every malformation is an
:class:`~flowrt.errors.InvalidArgumentError` naming the node and op.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..base import dtypes as _dt
from ..base import errors
from ..base.tensor_codec import GRAPH_DEF_VERSION, INTERNAL_ATTR_KINDS, attr_value_of, \
    make_tensor_proto, python_attr_of
from ..engine.ir import ARG_OP, GraphIR, Node
from ..plugin.node_def import decode_node_attrs
from ..proto.attr_value_pb2 import AttrValue
from ..proto.graph_def_pb2 import GraphDef
from ..base.tensor_shape import TensorShape

__all__ = ["ir_to_graph_def", "ir_from_graph_def", "graph_def_from_bytes",
           "RESERVED_PREFIX"]

#: Attrs whose names start with this carry flowrt's own per-node facts.
RESERVED_PREFIX = "_flowrt_"
_OUT_DTYPES = RESERVED_PREFIX + "out_dtypes"
_OUT_SHAPES = RESERVED_PREFIX + "out_shapes"
_IN_DTYPES = RESERVED_PREFIX + "in_dtypes"
_IN_SHAPES = RESERVED_PREFIX + "in_shapes"
_DEVICE = RESERVED_PREFIX + "device"
_FEED = RESERVED_PREFIX + "feed"
_FETCH = RESERVED_PREFIX + "fetch"
_TARGET = RESERVED_PREFIX + "target"
_RESERVED_KINDS = {_OUT_DTYPES: "list(type)", _IN_DTYPES: "list(type)",
                   _OUT_SHAPES: "list(shape)", _IN_SHAPES: "list(shape)",
                   _DEVICE: "string", _FEED: "string", _FETCH: "list(int)",
                   _TARGET: "bool"}
#: The attrs of an ``_Arg`` node (it has no OpDef).
_ARG_KINDS = {"index": "int", "T": "type"}


# ---------------------------------------------------------------------------------------
# GraphIR -> GraphDef
# ---------------------------------------------------------------------------------------
def _input_name(src: str, idx: int) -> str:
    return src if idx == 0 else f"{src}:{idx}"


def _shape_value(s: Any) -> TensorShape:
    return s if isinstance(s, TensorShape) else TensorShape(s)


def _encode_attr(node: Node, key: str, value: Any, kind: str | None) -> AttrValue:
    try:
        if kind == "tensor" and isinstance(value, np.ndarray):
            # the dtype attr tells quantized types from the integer types that hold them
            dt = node.node_attrs.get("dtype")
            if not (isinstance(dt, _dt.DType) and value.dtype != object
                    and dt.base_dtype is not _dt.string and dt.base_dtype.np == value.dtype):
                dt = None
            av = AttrValue()
            av.tensor.CopyFrom(make_tensor_proto(
                value, dtype=None if dt is None else dt.base_dtype))
            return av
        return attr_value_of(value, kind)
    except (TypeError, ValueError) as e:
        raise errors.UnimplementedError(
            None, None, f"node {node.name} (op {node.type}): attr '{key}' = "
            f"{type(value).__name__} has no protobuf form, so the node cannot be sent to a "
            f"remote worker: {e}") from None


def ir_to_graph_def(ir: GraphIR, default_device: str = "") -> GraphDef:
    """The ``GraphDef`` of a step graph or partition (see the module docstring).

    :param ir: the nodes, in their order (``_Arg``, ``_Send``/``_Recv`` and control
        dummies included), plus the feeds, fetches and targets of the step
    :param default_device: the NodeDef device of nodes not yet assigned one
    :raises UnimplementedError: a node holds an attr with no protobuf form (the
        ``_FusedElementwise`` nodes of the fusion pass), naming the node and attr
    """
    gd = GraphDef()
    gd.versions.producer = GRAPH_DEF_VERSION
    feed_of = {arg: tensor for tensor, arg in ir.feeds}
    fetch_of: dict[str, list[int]] = {}
    for pos, (n, i) in enumerate(ir.fetches):
        fetch_of.setdefault(n, []).extend((pos, i))
    targets = set(ir.targets)
    for node in ir.nodes.values():
        dev = node.assigned_device or default_device
        nd = gd.node.add(name=node.name, op=node.type, device=dev)
        nd.input.extend(_input_name(s, i) for s, i in node.inputs)
        nd.input.extend("^" + c for c in node.control_inputs)
        adefs = node.op_def.attrs if node.op_def is not None else {}
        for key, value in node.node_attrs.items():
            if key.startswith(RESERVED_PREFIX):
                raise errors.InvalidArgumentError(
                    None, None, f"node {node.name} (op {node.type}): attr name '{key}' is "
                    f"reserved ({RESERVED_PREFIX}*)")
            adef = adefs.get(key)
            kind = adef.kind if adef is not None else (
                _ARG_KINDS.get(key) if node.op_def is None else INTERNAL_ATTR_KINDS.get(key))
            nd.attr[key].CopyFrom(_encode_attr(node, key, value, kind))
        a = nd.attr
        a[_OUT_DTYPES].list.type.extend(d.as_datatype_enum for d in node.out_dtypes)
        a[_IN_DTYPES].list.type.extend(d.as_datatype_enum for d in node.in_dtypes)
        a[_OUT_SHAPES].list.shape.extend(_shape_value(s).as_proto() for s in node.out_shapes)
        a[_IN_SHAPES].list.shape.extend(_shape_value(s).as_proto() for s in node.in_shapes)
        for k in (_OUT_DTYPES, _IN_DTYPES, _OUT_SHAPES, _IN_SHAPES):
            a[k].list.SetInParent()  # an empty list still says "no outputs"
        if node.device != dev:
            a[_DEVICE].s = (node.device or "").encode()
        if node.name in feed_of:
            a[_FEED].s = feed_of[node.name].encode()
        if node.name in fetch_of:
            a[_FETCH].list.i.extend(fetch_of[node.name])
        if node.name in targets:
            a[_TARGET].b = True
    return gd


# ---------------------------------------------------------------------------------------
# GraphDef -> GraphIR
# ---------------------------------------------------------------------------------------
def _read_varint(data: bytes, pos: int) -> tuple[int, int] | None:
    value, shift = 0, 0
    while pos < len(data) and shift < 64:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    return None


def _damaged_node(data: bytes) -> str:
    """Where top-level parsing of serialized GraphDef bytes breaks: which node (with
    its name when the name field survived) is cut short, for the error message."""
    pos, k = 0, 0
    while pos < len(data):
        tag = _read_varint(data, pos)
        if tag is None:
            return f"a field tag after node #{k} is cut short"
        key, pos = tag
        field, wire = key >> 3, key & 7
        if wire != 2:
            if wire == 0 and (v := _read_varint(data, pos)) is not None:
                pos = v[1]
                continue
            return f"field {field} at byte {pos} has an unexpected wire type {wire}"
        ln = _read_varint(data, pos)
        if ln is None:
            return f"the length of field {field} at byte {pos} is cut short"
        size, pos = ln
        body = data[pos:pos + size]
        if field == 1 and len(body) < size:
            name = ""
            if body[:1] == b"\x0a" and (n := _read_varint(body, 1)) is not None:
                raw = body[n[1]:n[1] + n[0]]
                if len(raw) == n[0]:
                    name = raw.decode("utf-8", "replace")
            return (f"node #{k}" + (f" ('{name}')" if name else "") +
                    f" is cut short: {len(body)} of its {size} bytes are there")
        if len(body) < size:
            return f"field {field} is cut short"
        if field == 1:
            k += 1
        pos += size
    return "the bytes are not a valid GraphDef"


def graph_def_from_bytes(data: bytes) -> GraphDef:
    """Parse serialized ``GraphDef`` bytes from the network.

    :raises InvalidArgumentError: for bytes that do not parse, naming the damaged node
    """
    gd = GraphDef()
    try:
        gd.ParseFromString(bytes(data))
    except Exception as e:  # protobuf's DecodeError, or a RuntimeWarning-free failure
        raise errors.InvalidArgumentError(
            None, None, f"cannot parse a GraphDef from {len(data)} bytes: "
            f"{_damaged_node(bytes(data))} ({type(e).__name__}: {e})") from None
    return gd


class _Bad(Exception):
    """A malformation in one node; turned into InvalidArgumentError naming it."""


def _parse_input(text: str) -> tuple[str, int, bool]:
    """``(source, index, is_control)`` of a NodeDef input string."""
    if text.startswith("^"):
        if not text[1:] or ":" in text:
            raise _Bad(f"malformed control input {text!r}")
        return text[1:], -1, True
    src, sep, idx = text.rpartition(":")
    if not sep:
        src, idx = text, "0"
    if not src or not idx.isdigit() or not idx.isascii():
        raise _Bad(f"malformed input {text!r}: expected 'node', 'node:index' or '^node'")
    return src, int(idx), False


def _reserved(nd: Any, key: str) -> Any:
    if key not in nd.attr:
        return None
    try:
        return python_attr_of(nd.attr[key], _RESERVED_KINDS[key])
    except (TypeError, ValueError) as e:
        raise _Bad(f"reserved attr '{key}': {e}") from None


def _node_attrs(nd: Any, op_def: Any) -> dict[str, Any]:
    """The node's attrs as Python values: checked against its OpDef with defaults
    filled (:func:`~flowrt.plugin.node_def.decode_node_attrs`, the reserved attrs left
    out), or for an ``_Arg`` node (no OpDef) its ``index`` and ``T``."""
    if op_def is not None:
        try:
            return decode_node_attrs(nd.attr, op_def, reserved_prefix=RESERVED_PREFIX,
                                     reserved=_RESERVED_KINDS)
        except ValueError as e:
            raise _Bad(str(e)) from None
    attrs: dict[str, Any] = {}
    for key in nd.attr:
        if key.startswith(RESERVED_PREFIX):
            if key not in _RESERVED_KINDS:
                raise _Bad(f"unknown reserved attr '{key}'")
            continue
        kind = _ARG_KINDS.get(key)
        if kind is None:
            raise _Bad(f"attr '{key}' is not an attr of {ARG_OP} (index, T)")
        try:
            attrs[key] = python_attr_of(nd.attr[key], kind)
        except (TypeError, ValueError) as e:
            raise _Bad(f"attr '{key}': {e}") from None
    missing = [k for k in _ARG_KINDS if k not in attrs]
    if missing:
        raise _Bad(f"missing attr '{missing[0]}'")
    if attrs["index"] < 0:
        raise _Bad(f"attr 'index' must be >= 0, got {attrs['index']}")
    return attrs


def _arg_dtypes(args: Any, attrs: dict[str, Any]) -> list[_dt.DType]:
    """The dtypes (ref-ness included) of an op's inputs or outputs, from its attrs."""
    out: list[_dt.DType] = []
    for a in args:
        if a.type_list_attr is not None:
            ts = [_dt.as_dtype(t) for t in attrs[a.type_list_attr]]
        else:
            t = a.dtype if a.dtype is not None else _dt.as_dtype(attrs[a.type_attr])
            n = int(attrs[a.number_attr]) if a.number_attr is not None else 1
            if n < 0:
                raise _Bad(f"attr '{a.number_attr}' must be >= 0, got {n}")
            ts = [t] * n
        out.extend(t._as_ref if a.is_ref and not t.is_ref_dtype else t for t in ts)
    return out


def _check_count(what: str, got: list[Any] | None, want: int) -> None:
    if got is not None and len(got) != want:
        raise _Bad(f"reserved attr '{what}' lists {len(got)} entries; the node has {want}")


def ir_from_graph_def(gd: GraphDef | bytes, runtime: Any) -> GraphIR:
    """The :class:`GraphIR` a ``GraphDef`` written by :func:`ir_to_graph_def` describes.

    Op definitions come from ``runtime.op_def(type)``; attrs become the Python values
    kernels expect (:class:`~flowrt.dtypes.DType`, :class:`~flowrt.tensor_shape.TensorShape`,
    numpy arrays, ``str``, lists); ``source_op`` is None. Nodes keep the GraphDef's order.

    :param gd: a ``GraphDef`` message, or its serialized bytes
    :param runtime: the runtime whose op definitions are used
    :raises InvalidArgumentError: unknown ops, malformed or dangling inputs, attrs of the
        wrong kind or missing, inconsistent reserved attrs, undecodable bytes -- naming
        the node and op
    """
    if isinstance(gd, (bytes, bytearray, memoryview)):
        gd = graph_def_from_bytes(bytes(gd))
    if not isinstance(gd, GraphDef):
        raise errors.InvalidArgumentError(
            None, None, f"expected a GraphDef, got {type(gd).__name__}")
    ir = GraphIR()
    names = {nd.name for nd in gd.node}
    feeds: list[tuple[int, str, str]] = []
    fetches: dict[int, tuple[str, int]] = {}
    by_name: dict[str, Node] = {}
    for k, nd in enumerate(gd.node):
        where = f"node {nd.name or '#' + str(k)} (op {nd.op or '?'})"
        try:
            node = _node_from_def(nd, runtime, names, by_name)
            feed = _reserved(nd, _FEED)
            if feed is not None:
                if node.op_def is not None:
                    raise _Bad(f"only {ARG_OP} nodes are fed")
                feeds.append((node.node_attrs["index"], feed, node.name))
            fetch = _reserved(nd, _FETCH)
            if fetch:
                if len(fetch) % 2:
                    raise _Bad(f"reserved attr '{_FETCH}' must hold (position, output) pairs")
                for pos, idx in zip(fetch[0::2], fetch[1::2]):
                    if pos < 0 or pos in fetches or not 0 <= idx < len(node.out_dtypes):
                        raise _Bad(f"bad fetch (position {pos}, output {idx})")
                    fetches[pos] = (node.name, idx)
            if _reserved(nd, _TARGET):
                ir.targets.append(node.name)
            ir.add(node)
        except _Bad as e:
            raise errors.InvalidArgumentError(None, None, f"{where}: {e}") from None
        except errors.OpError as e:
            if where in e.message:
                raise
            raise type(e)(None, None, f"{where}: {e.message}") from None
        by_name[node.name] = node
    for node in ir.nodes.values():
        try:
            _link_inputs(node, ir.nodes)
        except _Bad as e:
            raise errors.InvalidArgumentError(
                None, None, f"node {node.name} (op {node.type}): {e}") from None
    feeds.sort()
    ir.feeds = [(t, n) for _, t, n in feeds]
    ir.fetches = [fetches[p] for p in sorted(fetches)]
    return ir


def _node_from_def(nd: Any, runtime: Any, names: set[str], done: dict[str, Node]) -> Node:
    """The :class:`Node` of NodeDef ``nd``, typed from its op's definition (an ``_Arg``
    node from its ``T`` attr) and checked against the reserved attrs. Inputs stay names,
    linked later (:func:`_link_inputs`); ``names`` holds every node name of the
    GraphDef, ``done`` the nodes already built.

    :raises _Bad: for an unnamed or duplicate node, an unknown op, an input naming no
        node of the graph or a data input after a control input, attrs that cannot type
        the op or give it another number of inputs, reserved attrs that disagree with
        the op.
    """
    if not nd.name:
        raise _Bad("the node has no name")
    if nd.name in done:
        raise _Bad("duplicate node name")
    if nd.op == ARG_OP:
        op_def = None
    else:
        try:
            op_def = runtime.op_def(nd.op)
        except (KeyError, ValueError, errors.OpError):
            op_def = None
        if op_def is None:
            raise _Bad(f"unknown op '{nd.op}': this worker has no definition for it")
    inputs: list[tuple[str, int]] = []
    ctrl: list[str] = []
    for text in nd.input:
        src, idx, is_ctrl = _parse_input(text)
        if src not in names:
            raise _Bad(f"input {text!r} refers to node '{src}', which is not in the graph")
        if is_ctrl:
            ctrl.append(src)
        else:
            if ctrl:
                raise _Bad(f"data input {text!r} comes after a control input")
            inputs.append((src, idx))
    attrs = _node_attrs(nd, op_def)
    if op_def is None:
        want_out = [attrs["T"]]
        want_in: list[_dt.DType] = []
    else:
        try:
            want_out = _arg_dtypes(op_def.outputs, attrs)
            want_in = _arg_dtypes(op_def.inputs, attrs)
        except (KeyError, TypeError, ValueError) as e:
            raise _Bad(f"cannot type the node from its attrs: {e}") from None
    if len(inputs) != len(want_in):
        raise _Bad(f"the op takes {len(want_in)} inputs from its attrs, the NodeDef has "
                   f"{len(inputs)}")
    out_dtypes = _reserved(nd, _OUT_DTYPES)
    in_dtypes = _reserved(nd, _IN_DTYPES)
    out_shapes = _reserved(nd, _OUT_SHAPES)
    in_shapes = _reserved(nd, _IN_SHAPES)
    _check_count(_OUT_DTYPES, out_dtypes, len(want_out))
    _check_count(_OUT_SHAPES, out_shapes, len(want_out))
    _check_count(_IN_DTYPES, in_dtypes, len(inputs))
    _check_count(_IN_SHAPES, in_shapes, len(inputs))
    if out_dtypes is not None:
        for got, want in zip(out_dtypes, want_out):
            if got.base_dtype is not want.base_dtype:
                raise _Bad(f"reserved attr '{_OUT_DTYPES}' says {got.name} where the op "
                           f"gives {want.name}")
    else:
        out_dtypes = want_out
    if out_shapes is None:
        out_shapes = [TensorShape(None) for _ in want_out]
    device = nd.device
    requested = _reserved(nd, _DEVICE)
    node = Node(nd.name, nd.op, inputs, ctrl, device if requested is None else requested,
                attrs, op_def, list(out_dtypes), list(out_shapes),
                list(in_dtypes) if in_dtypes is not None else None,
                list(in_shapes) if in_shapes is not None else None, source_op=None)
    node.assigned_device = device or None
    return node


def _link_inputs(node: Node, nodes: dict[str, Node]) -> None:
    """Check every input names an existing output; fill input dtypes and shapes the
    GraphDef did not carry from the producers."""
    producers = []
    for src, idx in node.inputs:
        prod = nodes[src]
        if idx >= len(prod.out_dtypes):
            raise _Bad(f"input '{_input_name(src, idx)}': node '{src}' has only "
                       f"{len(prod.out_dtypes)} outputs")
        producers.append((prod, idx))
    if node.in_dtypes is None:
        node.in_dtypes = [p.out_dtypes[i] for p, i in producers]
    if node.in_shapes is None:
        node.in_shapes = [p.out_shapes[i] for p, i in producers]
