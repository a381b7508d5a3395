"""``tf.graph_util`` (TF 1.15's ``graph_util_impl``): freezing a graph's variables into
constants, extracting the subgraph some nodes need, removing training-only nodes.

Every function works on ``GraphDef`` messages and returns a new one; the input is never
changed.
"""
from __future__ import annotations

import logging
from typing import Any, Sequence

from ..base import dtypes as _dt
from ..base.tensor_codec import GraphDef, NodeDef, make_tensor_proto
from ..framework.graph import Operation
from ..framework.graph_def import import_graph_def

__all__ = ["convert_variables_to_constants", "extract_sub_graph", "remove_training_nodes",
           "must_run_on_cpu", "tensor_shape_from_node_def_name", "import_graph_def"]

_log = logging.getLogger("flowrt.graph_util")

_VARIABLE_OPS = frozenset({"Assign", "AssignAdd", "AssignSub", "Queue", "ScatterAdd",
                           "ScatterSub", "ScatterUpdate", "TruncatedNormal", "Variable",
                           "VariableV2"})


def _node_name(n: str) -> str:
    """``"^a"``, ``"a:1"`` -> ``"a"``."""
    n = n[1:] if n.startswith("^") else n
    return n.split(":", 1)[0]


def must_run_on_cpu(node: Any, pin_variables_on_cpu: bool = False) -> bool:
    """Whether ``node`` (an Operation or NodeDef) must be placed on a CPU: int32 and
    string constants, int32 stitches and casts from int32, and (with
    ``pin_variables_on_cpu``) variables and the ops that write them."""
    nd = node.node_def if isinstance(node, Operation) else node
    if pin_variables_on_cpu and nd.op in _VARIABLE_OPS:
        return True
    if nd.op == "Const":
        return nd.attr["dtype"].type in (_dt.string.as_datatype_enum,
                                         _dt.int32.as_datatype_enum)
    if nd.op in ("DynamicStitch", "ParallelDynamicStitch"):
        return nd.attr["T"].type == _dt.int32.as_datatype_enum
    if nd.op == "Cast":
        return nd.attr["SrcT"].type == _dt.int32.as_datatype_enum
    return False


def _extract_names(graph_def: Any, dest_nodes: Sequence[str]) -> set[str]:
    if isinstance(dest_nodes, (str, bytes)) or not isinstance(dest_nodes, (list, tuple,
                                                                           set)):
        raise TypeError("dest_nodes must be a list.")
    if not isinstance(graph_def, GraphDef):
        raise TypeError("graph_def must be a graph_pb2.GraphDef proto.")
    inputs = {n.name: [_node_name(i) for i in n.input] for n in graph_def.node}
    for d in dest_nodes:
        if d not in inputs:
            raise AssertionError(f"{d} is not in graph")
    keep: set[str] = set()
    stack = list(dest_nodes)
    while stack:
        n = stack.pop()
        if n in keep:
            continue
        keep.add(n)
        stack.extend(i for i in inputs.get(n, ()) if i not in keep)
    return keep


def extract_sub_graph(graph_def: Any, dest_nodes: Sequence[str]) -> Any:
    """The ``GraphDef`` of the nodes ``dest_nodes`` need (through data and control
    inputs), in their original order, with the graph's versions and library.

    :raises TypeError: ``dest_nodes`` is not a list or ``graph_def`` not a GraphDef
    :raises AssertionError: a destination node is not in the graph
    """
    keep = _extract_names(graph_def, dest_nodes)
    out = GraphDef()
    out.node.extend(n for n in graph_def.node if n.name in keep)
    out.library.CopyFrom(graph_def.library)
    out.versions.CopyFrom(graph_def.versions)
    return out


def convert_variables_to_constants(sess: Any, input_graph_def: Any,
                                   output_node_names: Sequence[str],
                                   variable_names_whitelist: Sequence[str] | None = None,
                                   variable_names_blacklist: Sequence[str] | None = None
                                   ) -> Any:
    """The subgraph ``output_node_names`` need, with each variable (``VariableV2``,
    ``Variable``, ``VarHandleOp``) replaced by a ``Const`` holding its value in ``sess``
    (``ReadVariableOp`` of a frozen resource variable becomes an ``Identity``). Only
    variables named in ``variable_names_whitelist`` (when given) and not in
    ``variable_names_blacklist`` are frozen."""
    sub = extract_sub_graph(input_graph_def, list(output_node_names))
    names, fetches = [], []
    for n in sub.node:
        if n.op not in ("Variable", "VariableV2", "VarHandleOp"):
            continue
        if variable_names_whitelist is not None and n.name not in variable_names_whitelist:
            continue
        if variable_names_blacklist is not None and n.name in variable_names_blacklist:
            continue
        names.append(n.name)
        fetches.append(n.name + ("/Read/ReadVariableOp:0" if n.op == "VarHandleOp"
                                 else ":0"))
    values = dict(zip(names, sess.run(fetches))) if fetches else {}
    resource = {n.name for n in sub.node if n.op == "VarHandleOp" and n.name in values}
    out = GraphDef()
    for n in sub.node:
        nd = NodeDef()
        if n.name in values:
            dtype = n.attr["dtype"]
            nd.op, nd.name = "Const", n.name
            nd.attr["dtype"].CopyFrom(dtype)
            nd.attr["value"].tensor.CopyFrom(make_tensor_proto(
                values[n.name], dtype=_dt.as_dtype(dtype.type)))
        elif n.op == "ReadVariableOp" and n.input and _node_name(n.input[0]) in resource:
            nd.op, nd.name = "Identity", n.name
            nd.input.extend(n.input)
            nd.attr["T"].CopyFrom(n.attr["dtype"])
            nd.device = n.device
        else:
            nd.CopyFrom(n)
        out.node.append(nd)
    out.library.CopyFrom(input_graph_def.library)
    out.versions.CopyFrom(input_graph_def.versions)
    _log.info("Froze %d variables.", len(values))
    _log.info("Converted %d variables to const ops.", len(values))
    return out


def remove_training_nodes(input_graph: Any, protected_nodes: Sequence[str] | None = None
                          ) -> Any:
    """``input_graph`` without its ``CheckNumerics`` nodes and with its ``Identity``
    nodes spliced out (their consumers read their input), except nodes named in
    ``protected_nodes`` and Identities that have, or are, control inputs."""
    protected = set(protected_nodes or ())
    removed = {n.name for n in input_graph.node
               if n.op == "CheckNumerics" and n.name not in protected}
    after: list[Any] = []
    for n in input_graph.node:
        if n.name in removed:
            continue
        nd = NodeDef()
        nd.CopyFrom(n)
        del nd.input[:]
        nd.input.extend(i for i in n.input if _node_name(i) not in removed)
        after.append(nd)
    ctrl_sources = {i[1:] for n in after for i in n.input if i.startswith("^")}
    with_ctrl = {n.name for n in after if any(i.startswith("^") for i in n.input)}
    splice = {n.name: n.input[0] for n in after
              if n.op == "Identity" and n.name not in protected and n.name not in with_ctrl
              and n.name not in ctrl_sources and n.input}
    out = GraphDef()
    for n in after:
        if n.name in splice:
            continue
        nd = NodeDef()
        nd.CopyFrom(n)
        del nd.input[:]
        for full in n.input:
            name = full[1:] if full.startswith("^") else full
            while name in splice:
                full = splice[name]
                name = full[1:] if full.startswith("^") else full
            nd.input.append(full)
        out.node.append(nd)
    return out


def tensor_shape_from_node_def_name(graph: Any, input_name: str) -> Any:
    """The static shape of tensor ``input_name`` (``"op"`` means ``"op:0"``) of
    ``graph``."""
    name = input_name if ":" in input_name else input_name + ":0"
    return graph.get_tensor_by_name(name).get_shape()


API = {
    "graph_util.convert_variables_to_constants": convert_variables_to_constants,
    "graph_util.extract_sub_graph": extract_sub_graph,
    "graph_util.remove_training_nodes": remove_training_nodes,
    "graph_util.must_run_on_cpu": must_run_on_cpu,
    "graph_util.tensor_shape_from_node_def_name": tensor_shape_from_node_def_name,
    "graph_util.import_graph_def": import_graph_def,
}
