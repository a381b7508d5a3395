"""Graphviz DOT pictures of graphs and of placed, partitioned steps.

``to_dot(sess, fetches, feed_list)`` draws the step a session runs for ``(fetches,
feeds)`` as the runtime prepared it: after the graph passes, placement and partitioning,
one ``subgraph cluster_N`` per device (labelled with the device name), the ``_Send`` /
``_Recv`` pairs that carry tensors between devices drawn as tabs joined by a bold blue
"transfer" edge, control edges dashed. ``to_dot(graph)`` (a ``tf.Graph`` or a
``GraphDef``) draws the whole graph -- or what ``fetches`` need -- grouped by each node's
*requested* device; nodes without one stay outside the clusters.

Render with Graphviz: ``dot -Tsvg step.dot -o step.svg``.
"""
from __future__ import annotations

from typing import Any, Sequence
from ..base.device_spec import DeviceSpec
from ..framework.session import _make_fetch
from ..engine.partition import partition
from ..plugin.runtime import default_runtime
import os

__all__ = ["to_dot", "write_dot"]

_SEND_OPS = frozenset({"_Send", "_HostSend"})
_RECV_OPS = frozenset({"_Recv", "_HostRecv"})


class _VNode:
    """A node as drawn: name, op, device, data inputs ``(src, index)``, control inputs."""

    __slots__ = ("name", "op", "device", "inputs", "controls", "tensor_name", "fetched")

    def __init__(self, name: str, op: str, device: str, inputs: list[tuple[str, int]],
                 controls: list[str], tensor_name: str = ""):
        self.name, self.op, self.device = name, op, device
        self.inputs, self.controls = inputs, controls
        self.tensor_name = tensor_name
        self.fetched = False


def _quote(s: str) -> str:
    """``s`` as a DOT double-quoted string (also safe inside labels)."""
    s = s.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + s.replace("\r", "").replace("\n", "\\n") + '"'


def _str_attr(v: Any) -> str:
    if hasattr(v, "WhichOneof"):  # AttrValue
        v = v.s if v.WhichOneof("value") == "s" else b""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v if isinstance(v, str) else ""


def _canonical_device(dev: str) -> str:
    if not dev:
        return ""
    try:

        return DeviceSpec.from_string(dev).to_string() or dev
    except ValueError:
        return dev


def _parse_input(s: str) -> tuple[str, int, bool]:
    """GraphDef input string -> (node, output index, is control)."""
    if s.startswith("^"):
        return s[1:], -1, True
    base, sep, idx = s.rpartition(":")
    if sep and idx.isdigit():
        return base, int(idx), False
    return s, 0, False


# -- sources ----------------------------------------------------------------------------
def _nodes_of_ir(ir: Any, device: str | None = None) -> list[_VNode]:
    out = []
    for n in ir.nodes.values():
        dev = device if device is not None else (n.assigned_device or n.device or "")
        out.append(_VNode(n.name, n.type, dev, list(n.inputs), list(n.control_inputs),
                          _str_attr(n.node_attrs.get("tensor_name", ""))))
    fetched = {name for name, _ in getattr(ir, "fetches", [])} | \
        set(getattr(ir, "targets", []))
    for v in out:
        v.fetched = v.name in fetched
    return out


def _nodes_of_graph_def(gd: Any) -> list[_VNode]:
    out = []
    for nd in gd.node:
        ins: list[tuple[str, int]] = []
        ctrl: list[str] = []
        for s in nd.input:
            src, idx, is_ctrl = _parse_input(s)
            (ctrl.append(src) if is_ctrl else ins.append((src, idx)))
        tn = _str_attr(nd.attr["tensor_name"]) if "tensor_name" in nd.attr else ""
        out.append(_VNode(nd.name, nd.op, _canonical_device(nd.device), ins, ctrl, tn))
    return out


def _nodes_of_graph(graph: Any, fetches: Any, feed_list: Sequence[Any] | None
                    ) -> list[_VNode]:
    """A ``tf.Graph``'s ops (those ``fetches`` need, cut at fed tensors, if given)."""
    ops = graph.get_operations()
    fed: set[Any] = set()
    fetched: set[str] = set()
    if fetches is not None:

        elements = _make_fetch(graph, fetches).elements
        fed = {graph.as_graph_element(f, allow_tensor=True, allow_operation=False)
               for f in (feed_list or ())}
        stack = []
        for e in elements:
            op = getattr(e, "op", e)
            fetched.add(op.name)
            stack.append(op)
        keep: set[str] = set()
        while stack:
            op = stack.pop()
            if op.name in keep:
                continue
            keep.add(op.name)
            stack.extend(t.op for t in op.inputs if t not in fed)
            stack.extend(op.control_inputs)
        ops = [op for op in ops if op.name in keep]
    names = {op.name for op in ops}
    out = []
    for op in ops:
        ins = [(t.op.name, t.value_index) for t in op.inputs
               if t not in fed and t.op.name in names]
        ctrl = [c.name for c in op.control_inputs if c.name in names]
        v = _VNode(op.name, op.type, _canonical_device(op.device), ins, ctrl,
                   _str_attr(op.node_attrs.get("tensor_name", "")))
        v.fetched = op.name in fetched
        out.append(v)
    return out


class _DeviceShim:
    """Stands in for a Device object when partitioning a compiled step for display."""

    __slots__ = ("name", "incarnation")

    def __init__(self, name: str):
        self.name, self.incarnation = name, 0


def _nodes_of_step(sess: Any, fetches: Any, feed_list: Sequence[Any] | None
                   ) -> list[_VNode]:
    """The step the session runs for ``(fetches, feed_list)``, placed and partitioned."""

    fetch = _make_fetch(sess.graph, fetches)
    sig = sess._make_signature(fetch, tuple(feed_list or ()))
    cs = getattr(sess._msession, "_callables", {}).get(sig.cid)
    ir = getattr(cs, "ir", None)
    if cs is None or ir is None:
        # a remote master: the placement is all we can ask for; edges from the graph
        placed = sess.placement(fetches, feed_list)
        nodes = _nodes_of_graph(sess.graph, fetches, feed_list)
        kept = [v for v in nodes if v.name in placed]
        for v in kept:
            v.device = placed[v.name]
        return kept
    # the partitions the master made, when it keeps them
    parts = getattr(cs, "partitions", None)
    if not parts:
        parts = _partition_for_display(ir, sess)
    if parts:
        out: list[_VNode] = []
        for p in parts:
            dev = getattr(p.device, "name", p.device)
            out.extend(_nodes_of_ir(p.ir, dev))
        fetched = {name for name, _ in ir.fetches} | set(ir.targets)
        for v in out:
            v.fetched = v.name in fetched
        return out
    return _nodes_of_ir(ir)


def _partition_for_display(ir: Any, sess: Any) -> list[Any] | None:
    """Split a placed step graph the way the runtime does (None when it cannot)."""
    devices = {n.assigned_device for n in ir.nodes.values()}
    if len(devices) < 2 or None in devices:
        return None
    try:

        known: dict[str, Any] = {}
        ms = sess._msession
        for w in ms.master.workers_for(ms.config):
            known.update({d.name: d for d in w.devices})
        shims = {d: known.get(d) or _DeviceShim(d) for d in devices}
        runtime = getattr(sess.graph, "_runtime", None) or _default_runtime()
        return partition(ir, {n.name: shims[n.assigned_device] for n in ir.nodes.values()},
                         runtime)
    except Exception:  # an older core without partitioning: draw the placed graph
        return None


def _default_runtime() -> Any:

    return default_runtime()


def _collect(source: Any, fetches: Any, feed_list: Sequence[Any] | None) -> list[_VNode]:
    if hasattr(source, "_msession") and hasattr(source, "graph"):  # a Session
        if fetches is None:
            return _nodes_of_graph(source.graph, None, None)
        return _nodes_of_step(source, fetches, feed_list)
    if hasattr(source, "get_operations"):  # tf.Graph
        return _nodes_of_graph(source, fetches, feed_list)
    if isinstance(source, (list, tuple)):  # GraphDefs, e.g. RunMetadata.partition_graphs
        return [v for gd in source for v in _nodes_of_graph_def(gd)]
    if hasattr(source, "node"):  # GraphDef
        return _nodes_of_graph_def(source)
    if isinstance(getattr(source, "nodes", None), dict):  # GraphIR
        return _nodes_of_ir(source)
    raise TypeError(f"to_dot: expected a Session, Graph or GraphDef, got "
                    f"{type(source).__name__}")


# -- rendering --------------------------------------------------------------------------
def _node_line(v: _VNode, indent: str) -> str:
    label = _quote(f"{v.name}\n{v.op}")
    attrs = [f"label={label}"]
    if v.op in _SEND_OPS or v.op in _RECV_OPS:
        attrs += ["shape=cds", "style=filled",
                  'fillcolor="#f6c77a"' if v.op in _SEND_OPS else 'fillcolor="#9fd3f5"']
    elif v.op == "_Arg":
        attrs += ["shape=invhouse", "style=filled", 'fillcolor="#d9f2d0"']
    elif v.op == "_Retval":
        attrs += ["shape=house", "style=filled", 'fillcolor="#d9f2d0"']
    else:
        attrs += ["shape=box", 'style="rounded"']
    if v.fetched:
        attrs.append("peripheries=2")
    return f"{indent}{_quote(v.name)} [{', '.join(attrs)}];"


def _render(nodes: list[_VNode], title: str) -> str:
    """The Graphviz DOT text of ``nodes`` titled ``title``: a cluster per device, data
    edges labelled with the output index when not 0, control edges dashed, and a bold
    edge from each ``_Send`` to the ``_Recv`` of its tensor. Edges from nodes not in
    ``nodes`` are left out."""
    lines = [f"digraph {_quote(title)} {{",
             "  graph [rankdir=TB, compound=true, fontname=\"Helvetica\"];",
             "  node [fontname=\"Helvetica\", fontsize=10];",
             "  edge [fontname=\"Helvetica\", fontsize=9];"]
    devices: list[str] = []
    for v in nodes:
        if v.device and v.device not in devices:
            devices.append(v.device)
    for v in nodes:
        if not v.device:
            lines.append(_node_line(v, "  "))
    for i, dev in enumerate(devices):
        lines.append(f"  subgraph cluster_{i} {{")
        lines.append(f"    label={_quote(dev)};")
        lines.append('    style="rounded,filled"; fillcolor="#f4f4f8"; color="#8a8aa0";')
        for v in nodes:
            if v.device == dev:
                lines.append(_node_line(v, "    "))
        lines.append("  }")
    known = {v.name for v in nodes}
    for v in nodes:
        for src, idx in v.inputs:
            if src in known:
                extra = f" [label={_quote(':' + str(idx))}]" if idx else ""
                lines.append(f"  {_quote(src)} -> {_quote(v.name)}{extra};")
        for src in v.controls:
            if src in known:
                lines.append(f"  {_quote(src)} -> {_quote(v.name)} [style=dashed];")
    # each _Recv is fed by the _Send of the same tensor (rendezvous key)
    sends = {v.tensor_name: v for v in nodes if v.op in _SEND_OPS and v.tensor_name}
    for v in nodes:
        if v.op in _RECV_OPS and v.tensor_name in sends:
            lines.append(f"  {_quote(sends[v.tensor_name].name)} -> {_quote(v.name)} "
                         f"[style=bold, color=\"#2a62c9\", constraint=true, "
                         f"label={_quote(v.tensor_name)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_dot(session_or_graph: Any, fetches: Any = None,
           feed_list: Sequence[Any] | None = None, title: str = "flowrt") -> str:
    """Graphviz DOT text of a step or a graph.

    :param session_or_graph: a ``tf.Session`` (with ``fetches``: the placed,
        partitioned step the session runs for them), a ``tf.Graph`` or a ``GraphDef``
        (or a list of GraphDefs such as ``run_metadata.partition_graphs``): nodes
        grouped by their requested device
    :param fetches: what the step fetches (tensors, ops, names or a structure of them)
    :param feed_list: the tensors the step feeds
    :param title: the graph's name in the DOT text
    :returns: ``digraph ... { subgraph cluster_0 { label="<device>"; ... } ... }``
    """
    return _render(_collect(session_or_graph, fetches, feed_list), title)


def write_dot(path: Any, session_or_graph: Any, fetches: Any = None,
              feed_list: Sequence[Any] | None = None, title: str = "flowrt") -> str:
    """Write :func:`to_dot`'s text to ``path``; returns the path written (a str)."""

    text = to_dot(session_or_graph, fetches, feed_list, title)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return os.fspath(path)
