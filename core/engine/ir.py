"""The master's working form of a step's graph.

The user's :class:`~flowrt.graph.Graph` is never modified by a session. For each step
signature the master extracts a :class:`GraphIR` -- the nodes the step needs, with fed
tensors replaced by ``_Arg`` nodes and fetches recorded as endpoints -- and passes,
placement and partitioning rewrite that copy.
"""
from __future__ import annotations

import hashlib
from typing import Any, Iterable, Sequence

import numpy as np

from ..base import errors
from ..base.dtypes import DType
from ..plugin.op_registry import expand_args

__all__ = ["Node", "GraphIR", "extract_step_graph", "step_fingerprint", "ARG_OP", "Endpoint",
           "timeline_label", "SEND_OPS", "RECV_OPS", "attr_str"]

ARG_OP = "_Arg"

_MERGE_OPS = frozenset({"Merge", "RefMerge"})
_NEXT_ITERATION_OPS = frozenset({"NextIteration", "RefNextIteration"})

#: (node name, output index)
Endpoint = tuple


class _PlainArg:
    is_ref = False


_PLAIN_ARG = _PlainArg()


class Node:
    """One node of a :class:`GraphIR` (a NodeDef with resolved types and shapes)."""

    __slots__ = ("name", "type", "inputs", "control_inputs", "device", "node_attrs",
                 "op_def", "out_dtypes", "out_shapes", "in_dtypes", "in_shapes",
                 "assigned_device", "source_op")

    def __init__(self, name: str, op_type: str, inputs: list[tuple[str, int]],
                 control_inputs: list[str], device: str, attrs: dict[str, Any],
                 op_def: Any, out_dtypes: list[Any], out_shapes: list[Any],
                 in_dtypes: list[Any], in_shapes: list[Any], source_op: Any = None):
        self.name = name
        self.type = op_type
        self.inputs = inputs
        self.control_inputs = control_inputs
        self.device = device
        self.node_attrs = attrs
        self.op_def = op_def
        self.out_dtypes = out_dtypes
        self.out_shapes = out_shapes
        self.in_dtypes = in_dtypes
        self.in_shapes = in_shapes
        self.assigned_device: str | None = None
        self.source_op = source_op

    def copy(self, **changes: Any) -> "Node":
        """A shallow copy with some fields replaced (``inputs=...`` ...)."""
        n = Node.__new__(Node)
        for f in Node.__slots__:
            setattr(n, f, changes.get(f, getattr(self, f)))
        return n

    def input_args(self) -> list[Any]:
        """The OpDef ``ArgDef`` of each input position (list arguments expanded)."""
        od = self.op_def
        if od is None:
            return [_PLAIN_ARG] * len(self.inputs)
        return expand_args(od.inputs, self.node_attrs)

    @property
    def is_stateful(self) -> bool:
        return bool(self.op_def is not None and self.op_def.is_stateful)

    def __repr__(self) -> str:
        return f"<Node {self.name} {self.type} @{self.assigned_device or self.device}>"


class GraphIR:
    """An ordered set of nodes plus the step's feeds and fetches.

    :ivar nodes: ``{name: Node}`` in a topological order once :meth:`topo_sort` ran
    :ivar feeds: ``[(fed tensor name, _Arg node name)]`` in feed order
    :ivar fetches: endpoints ``(node, index)`` in fetch order
    :ivar targets: node names that must run
    """

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.feeds: list[tuple[str, str]] = []
        self.fetches: list[tuple[str, int]] = []
        self.targets: list[str] = []

    def add(self, node: Node) -> Node:
        if node.name in self.nodes:
            raise errors.InternalError(None, None, f"duplicate node {node.name} in step graph")
        self.nodes[node.name] = node
        return node

    def consumers(self) -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {n: [] for n in self.nodes}
        for node in self.nodes.values():
            for src, _ in node.inputs:
                out[src].append(node)
            for c in node.control_inputs:
                out[c].append(node)
        return out

    def topo_sort(self) -> list[Node]:
        """Nodes in a topological order (stable: creation order among ready nodes).

        A while loop's back edges (``NextIteration`` -> ``Merge``) are not ordering
        constraints: they are the only cycles a graph may have."""
        pending: dict[str, int] = {}
        cons = self.consumers()
        order: list[Node] = []
        ready: list[str] = []
        nodes = self.nodes
        for name, node in nodes.items():
            deps = {s for s, _ in node.inputs} | set(node.control_inputs)
            if node.type in _MERGE_OPS:  # a loop's back edge closes a cycle: not a dep
                deps = {d for d in deps if nodes[d].type not in _NEXT_ITERATION_OPS}
            pending[name] = len(deps)
            if not deps:
                ready.append(name)
        ready.reverse()
        while ready:
            name = ready.pop()
            node = nodes[name]
            order.append(node)
            done: set[str] = set()
            back = node.type in _NEXT_ITERATION_OPS
            for c in cons[name]:
                if c.name in done or (back and c.type in _MERGE_OPS):
                    continue
                done.add(c.name)
                pending[c.name] -= 1
                if pending[c.name] == 0:
                    ready.append(c.name)
        if len(order) != len(self.nodes):
            stuck = [n for n in self.nodes if pending[n] > 0][:5]
            raise errors.InvalidArgumentError(
                None, None, f"Graph has a cycle (or an input that never becomes ready) "
                f"involving nodes {stuck}")
        self.nodes = {n.name: n for n in order}
        return order

    def prune(self, keep: Iterable[str]) -> None:
        """Drop nodes that no fetch, target or stateful side effect in ``keep`` needs."""
        needed: set[str] = set()
        stack = list(keep)
        while stack:
            n = stack.pop()
            if n in needed or n not in self.nodes:
                continue
            needed.add(n)
            node = self.nodes[n]
            stack.extend(s for s, _ in node.inputs)
            stack.extend(node.control_inputs)
        self.nodes = {k: v for k, v in self.nodes.items() if k in needed}


def _arg_name(tensor_name: str) -> str:
    return "_arg_" + tensor_name.replace(":", "_")


def extract_step_graph(graph: Any, feeds: Sequence[Any], fetches: Sequence[Any],
                       targets: Sequence[Any]) -> GraphIR:
    """Prune ``graph`` to what the fetches and targets need, cut at fed tensors.

    ``feeds``/``fetches`` are Tensors, ``targets`` Operations. A fed tensor becomes an
    ``_Arg`` node (``index`` attr = its position in ``feeds``); its producer is kept only
    if something else needs it.
    """
    fed = {t: i for i, t in enumerate(feeds)}
    ir = GraphIR()
    arg_for: dict[Any, str] = {}
    for t, i in fed.items():
        arg_for[t] = _arg_name(t.name)
    # walk backwards from fetches and targets
    # As TF does: a fed Placeholder's outgoing control edges move to its feed node.
    fed_placeholder = {t.op: arg_for[t] for t in fed
                       if t.op.type in ("Placeholder", "PlaceholderV2")}

    def controls(op: Any) -> list[Any]:
        return [c for c in op.control_inputs if c not in fed_placeholder]

    needed_ops: list[Any] = []
    seen: set[int] = set()
    stack: list[Any] = []
    for t in fetches:
        if t not in fed:
            stack.append(t.op)
    stack.extend(targets)
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        needed_ops.append(op)
        for t in op.inputs:
            if t not in fed:
                stack.append(t.op)
        stack.extend(controls(op))
    needed_ops.sort(key=lambda o: o._id)
    used_args: set[Any] = set()
    for op in needed_ops:
        ins: list[tuple[str, int]] = []
        for t in op.inputs:
            if t in fed:
                used_args.add(t)
                ins.append((arg_for[t], 0))
            else:
                ins.append((t.op.name, t.value_index))
        ctrl = [fed_placeholder.get(c, c.name) for c in op.control_inputs]
        ir.add(Node(op.name, op.type, ins, ctrl, op.device,
                    op.node_attrs, op.op_def, [t.dtype for t in op.outputs],
                    [t.shape for t in op.outputs], [t.dtype for t in op.inputs],
                    [t.shape for t in op.inputs], source_op=op))
    for t in fetches:
        if t in fed:
            used_args.add(t)
    for t, i in fed.items():
        name = arg_for[t]
        node = Node(name, ARG_OP, [], [], t.op.device, {"index": i, "T": t.dtype.base_dtype},
                    None, [t.dtype.base_dtype], [t.shape], [], [], source_op=t.op)
        ir.nodes = {name: node, **ir.nodes}
        ir.feeds.append((t.name, name))
    ir.fetches = [((arg_for[t], 0) if t in fed else (t.op.name, t.value_index))
                  for t in fetches]
    ir.targets = [op.name for op in targets]
    return ir


def _array_key(v: np.ndarray) -> tuple[Any, ...]:
    """An array attr by content: dtype, shape and a digest of its bytes (one value
    viewed as a bigger shape, a compact imported constant, is hashed as that value)."""
    if v.dtype.hasobject:  # strings and other Python objects: no raw buffer
        return ("ndarray", v.dtype.str, v.shape, repr(v.tolist()))
    bcast = v.size > 1 and not any(v.strides)
    data = np.ascontiguousarray(v[(0,) * v.ndim] if bcast else v)
    return ("ndarray", v.dtype.str, v.shape, bcast,
            hashlib.blake2b(data.tobytes(), digest_size=32).digest())


def _attr_key(v: Any) -> Any:
    """A value whose ``repr`` tells ``v`` from any other attr value: plain values as
    they are (the repr of ``1``, ``1.0``, ``True`` and ``"1"`` differ), arrays by
    content, lists element by element, anything else by its type and repr."""
    t = type(v)
    if t is str or t is int or t is float or t is bool or t is bytes or v is None:
        return v
    if t is DType:
        return ("DType", v.as_datatype_enum)
    if t is np.ndarray:
        return _array_key(v)
    if t is list or t is tuple:
        return (t.__name__, [_attr_key(x) for x in v])
    dims = getattr(v, "_dims", _NO_DIMS)  # a TensorShape: its dims, cheaply
    if dims is not _NO_DIMS:
        return (t.__name__, dims)
    return (t.__name__, repr(v))


_NO_DIMS = object()


def step_fingerprint(ir: GraphIR) -> bytes:
    """A digest of everything a compile reads from a freshly extracted step graph
    (:func:`extract_step_graph`, before any pass ran): the nodes in order with their
    names, op types, data and control inputs, requested devices, attrs (``_class``
    colocation included; array attrs by content) and input and output dtypes and
    shapes, and the step's feeds, fetches and targets. Two extractions with the same
    fingerprint compile to the same step, so a step cached for one graph version stays
    valid for a later version whose step graph has the same fingerprint (what the rest
    of the graph holds, e.g. ops that share a variable with the step, is the caller's to
    compare)."""
    h = hashlib.blake2b(digest_size=32)
    for n in ir.nodes.values():
        attrs = n.node_attrs
        key = (n.name, n.type, n.inputs, n.control_inputs, n.device,
               [(k, _attr_key(attrs[k])) for k in sorted(attrs)],
               [_attr_key(x) for x in n.out_dtypes], [_attr_key(x) for x in n.out_shapes],
               [_attr_key(x) for x in n.in_dtypes], [_attr_key(x) for x in n.in_shapes])
        h.update(repr(key).encode("utf-8", "backslashreplace"))
    h.update(repr((ir.feeds, ir.fetches, ir.targets)).encode("utf-8", "backslashreplace"))
    return h.digest()


# -- labels for step stats ------------------------------------------------------------------
#: the transfer ops partitioning inserts (their labels name the peer device)
SEND_OPS = frozenset({"_Send", "_HostSend"})
RECV_OPS = frozenset({"_Recv", "_HostRecv"})


def attr_str(value: Any) -> str:
    """A string attr from a Python value or an ``AttrValue`` message."""
    if hasattr(value, "WhichOneof"):
        value = value.s if value.WhichOneof("value") == "s" else ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else ""


def timeline_label(node: Any) -> str:
    """TF's ``NodeExecStats.timeline_label`` for a node: ``"name = Op(in0, in1:1, ^c)"``;
    for a transfer ``"name = _Send(tensor_name @recv_device)"`` (``@send_device`` for a
    ``_Recv``). ``node`` is a step-graph node (``inputs`` as ``(node, index)`` pairs), an
    ``Operation`` or a ``NodeDef``. Compute it once per node, when a step is compiled.
    """
    op = getattr(node, "type", None) or getattr(node, "op", "")
    attrs = getattr(node, "node_attrs", None)
    if attrs is None:  # NodeDef
        attrs = {k: node.attr[k] for k in ("tensor_name", "send_device", "recv_device")
                 if k in node.attr}
    if op in SEND_OPS or op in RECV_OPS:
        peer = attrs.get("recv_device" if op in SEND_OPS else "send_device")
        return f"{node.name} = {op}({attr_str(attrs.get('tensor_name'))} @{attr_str(peer)})"
    if hasattr(node, "input") and not hasattr(node, "inputs"):  # NodeDef
        ins = list(node.input)
    else:
        ins = []
        for t in node.inputs:
            src, idx = (t.op.name, t.value_index) if hasattr(t, "op") else t
            ins.append(src if idx == 0 else f"{src}:{idx}")
        ins += ["^" + getattr(c, "name", c) for c in node.control_inputs]
    return f"{node.name} = {op}({', '.join(ins)})"
