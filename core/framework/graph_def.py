"""Conversion between flowrt graphs and TensorFlow's protobuf messages.

The in-memory graph keeps attrs as Python values (:class:`~flowrt.dtypes.DType`,
``int``, ``float``, ``bool``, ``str``, :class:`~flowrt.tensor_shape.TensorShape`,
``numpy.ndarray`` and lists of those); on the wire they are ``AttrValue`` messages, and
tensors are ``TensorProto`` messages laid out exactly as TensorFlow 1.15 writes them, so
GraphDefs move between flowrt and TensorFlow in both directions.

- :func:`make_tensor_proto` / :func:`make_ndarray`: arrays <-> ``TensorProto``
- :func:`attr_value_of` / :func:`python_attr_of`: attr values <-> ``AttrValue``
- :func:`node_def_of` / :func:`graph_to_graph_def`: operations and graphs -> protos
- :func:`import_graph_def`: a ``GraphDef`` -> operations in the default graph
"""
from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ..base import dtypes as _dt
from ..base import errors
from ..base.tensor_codec import (AttrValue, GRAPH_DEF_VERSION,
                                 GRAPH_DEF_VERSION_MIN_CONSUMER,
                                 GRAPH_DEF_VERSION_MIN_PRODUCER, GraphDef,
                                 INTERNAL_ATTR_KINDS, NodeDef, TensorProto,
                                 attr_value_of, dtype_of_array,
                                 fill_attr_value, fill_tensor_proto, make_ndarray,
                                 make_tensor_proto, python_attr_of, text_of_bytes)
from ..plugin.node_def import decode_node_attrs
from ..proto import attr_value_pb2 as _av
from .graph import Operation, Tensor, convert_to_tensor, get_default_graph

if TYPE_CHECKING:  # pragma: no cover
    from .graph import Graph

__all__ = [
    "make_tensor_proto", "make_ndarray", "attr_value_of", "python_attr_of", "node_def_of",
    "graph_to_graph_def", "import_graph_def", "check_ops_registered",
    "UnregisteredOpsError", "GRAPH_DEF_VERSION",
    "GRAPH_DEF_VERSION_MIN_CONSUMER", "GRAPH_DEF_VERSION_MIN_PRODUCER",
]

_MERGE_OPS = frozenset({"Merge", "RefMerge"})
_NEXT_ITERATION_OPS = frozenset({"NextIteration", "RefNextIteration"})

# ---------------------------------------------------------------------------------------
# Operation / Graph -> NodeDef / GraphDef
# ---------------------------------------------------------------------------------------
def _attr_kind(op_def: Any, name: str) -> str | None:
    if op_def is not None:
        adef = op_def.attrs.get(name)
        if adef is not None:
            return adef.kind
    return INTERNAL_ATTR_KINDS.get(name)


def _is_broadcast(arr: np.ndarray) -> bool:
    """One value viewed as a bigger shape (``np.broadcast_to``), as imported from a
    TensorProto that stores a single value for its whole shape."""
    return arr.size > 1 and all(s == 0 for s in arr.strides)


def _fill_tensor_attr(target: TensorProto, value: np.ndarray, dtype: _dt.DType | None) -> None:
    if _is_broadcast(value):
        # Keep TensorFlow's compact form: one value plus the shape.
        fill_tensor_proto(target, value.reshape(-1)[:1].reshape(()), dtype=dtype,
                           shape=list(value.shape))
    else:
        fill_tensor_proto(target, value, dtype=dtype)


def _fill_node_attr(av: AttrValue, op: "Operation", name: str, value: Any) -> None:
    kind = _attr_kind(op.op_def, name)
    try:
        if kind == "tensor" and isinstance(value, np.ndarray):
            # A Const's dtype attr tells quantized types from the plain integer types
            # that store them.
            dt = op.node_attrs.get("dtype")
            if not (isinstance(dt, _dt.DType) and dt.base_dtype is not _dt.string and
                    value.dtype != object and dt.base_dtype.np == value.dtype):
                dt = None
            _fill_tensor_attr(av.tensor, value, None if dt is None else dt.base_dtype)
        else:
            fill_attr_value(av, value, kind)
    except (TypeError, ValueError) as e:
        raise type(e)(f"Node '{op.name}' (op '{op.type}'): cannot serialize attr "
                      f"'{name}' = {value!r}: {e}") from None


def _fill_node_def(op: "Operation", nd: NodeDef) -> None:
    nd.name = op.name
    nd.op = op.type
    nd.input.extend([t._as_node_def_input() for t in op.inputs])
    nd.input.extend(["^" + c.name for c in op.control_inputs])
    if op.device:
        nd.device = op.device
    for name, value in op.node_attrs.items():
        _fill_node_attr(nd.attr[name], op, name, value)


def node_def_of(op: "Operation") -> NodeDef:
    """The ``NodeDef`` of an operation: name, op type, inputs (``"a"`` for output 0,
    ``"a:1"``, then ``"^c"`` for each control input), device and every attr."""
    nd = NodeDef()
    _fill_node_def(op, nd)
    return nd


def graph_to_graph_def(graph: "Graph", add_shapes: bool = False) -> GraphDef:
    """The ``GraphDef`` of a graph: nodes in creation order, ``versions.producer`` set as
    TensorFlow 1.15 sets it.

    :param add_shapes: add an ``_output_shapes`` attr (one static shape per output) to
        every node that has outputs, as ``Graph.as_graph_def(add_shapes=True)`` does
    """
    gd = GraphDef()
    gd.versions.producer = GRAPH_DEF_VERSION
    with graph._lock:
        ops = graph.get_operations()
        for op in ops:
            nd = gd.node.add()
            _fill_node_def(op, nd)
            if add_shapes and op.outputs:
                shapes = nd.attr["_output_shapes"]
                shapes.Clear()
                lst = shapes.list
                for t in op.outputs:
                    lst.shape.add().CopyFrom(t.shape.as_proto())
    return gd


# ---------------------------------------------------------------------------------------
# import_graph_def
# ---------------------------------------------------------------------------------------
def _parse_tensor_name(name: str) -> tuple[str, int]:
    parts = name.split(":")
    if len(parts) == 1:
        return parts[0], 0
    if len(parts) == 2:
        try:
            idx = int(parts[1])
        except ValueError:
            idx = -1
        if idx >= 0 and parts[0]:
            return parts[0], idx
    raise ValueError(f"Cannot convert {name!r} to a tensor name: expected 'op_name' or "
                     "'op_name:output_index'")


def _as_str(x: Any, what: str) -> str:
    if isinstance(x, bytes):
        return x.decode("utf-8")
    if isinstance(x, str):
        return x
    raise TypeError(f"{what} must be strings, got {x!r}")


def _as_graph_def_message(graph_def: Any) -> GraphDef:
    if isinstance(graph_def, GraphDef):
        return graph_def
    # A GraphDef from another protobuf module (TensorFlow's own): same wire format.
    desc = getattr(graph_def, "DESCRIPTOR", None)
    if getattr(desc, "name", None) == "GraphDef" and hasattr(graph_def, "SerializeToString"):
        return GraphDef.FromString(graph_def.SerializeToString())
    raise TypeError("graph_def must be a GraphDef proto.")


def _remove_producer_default_attrs(producer_op_list: Any, graph_def: GraphDef,
                                   op_defs: Mapping[str, Any]) -> None:
    """Drop attrs our OpDefs do not know when they hold the producer's default value,
    so graphs from a newer producer import (TF's ``producer_op_list``)."""

    producer = {o.name: o for o in producer_op_list.op}
    for node in graph_def.node:
        pdef = producer.get(node.op)
        ours = op_defs.get(node.op)
        if pdef is None or ours is None:
            continue
        for key in list(node.attr):
            if key in ours.attrs:
                continue
            for a in pdef.attr:
                if a.name == key and a.HasField("default_value"):
                    default = _av.AttrValue.FromString(a.default_value.SerializeToString())
                    if node.attr[key] == default:
                        del node.attr[key]
                    break


def _node_attrs(node: NodeDef, op_def: Any, where: str) -> dict[str, Any]:
    """The node's attrs as Python values, checked against its OpDef, defaults filled
    (:func:`~flowrt.plugin.node_def.decode_node_attrs`)."""
    return decode_node_attrs(node.attr, op_def, where)


def _expected_inputs(op_def: Any, attrs: Mapping[str, Any]) -> list[tuple[_dt.DType, bool]]:
    """(dtype, is_ref) for every input the node must have, from its attrs."""
    out: list[tuple[_dt.DType, bool]] = []
    for arg in op_def.inputs:
        if arg.type_list_attr is not None:
            types = [_dt.as_dtype(t) for t in attrs[arg.type_list_attr]]
        else:
            t = arg.dtype if arg.dtype is not None else _dt.as_dtype(attrs[arg.type_attr])
            n = int(attrs[arg.number_attr]) if arg.number_attr is not None else 1
            types = [t] * n
        out.extend((t, arg.is_ref) for t in types)
    return out


def _find_cycle(remaining: set[str], preds: Mapping[str, list[str]]) -> list[str]:
    """A cycle among ``remaining`` nodes (each has a remaining predecessor)."""
    start = min(remaining)
    path: list[str] = []
    seen: dict[str, int] = {}
    cur = start
    while cur not in seen:
        seen[cur] = len(path)
        path.append(cur)
        cur = next(p for p in preds[cur] if p in remaining)
    return path[seen[cur]:] + [cur]


class UnregisteredOpsError(errors.NotFoundError, ValueError):
    """A GraphDef uses op types no loaded kernel set registers (TensorFlow raises
    ``NotFoundError``; a ``ValueError`` too, as flowrt's import raised before)."""


def check_ops_registered(graph_def: Any, runtime: Any) -> None:
    """Raise :class:`UnregisteredOpsError` naming every op type of ``graph_def`` that
    ``runtime`` does not register, sorted, each with a node
    that uses it, in one message."""
    known = runtime.op_defs
    missing: dict[str, str] = {}
    for node in graph_def.node:
        if node.op not in known:
            missing.setdefault(node.op, node.name)
    if not missing:
        return
    lines = []
    for op_type in sorted(missing):
        try:
            runtime.op_def(op_type)
            why = f"Op type not registered '{op_type}'"
        except ValueError as e:
            why = str(e)
        lines.append(f"  Node '{missing[op_type]}' (op '{op_type}'): {why}")
    raise UnregisteredOpsError(
        None, None, f"The GraphDef uses {len(missing)} op type(s) that no loaded kernel set "
        f"registers: {', '.join(sorted(missing))}\n" + "\n".join(lines))


def _rollback(graph: "Graph", created: Sequence["Operation"]) -> None:
    """Remove ops added by a failed import so the graph is left as it was."""
    for op in reversed(created):
        for t in op.inputs:
            if op in t._consumers:
                t._consumers.remove(op)
        for c in op.control_inputs:
            if op in c._control_outputs:
                c._control_outputs.remove(op)
        if graph._nodes and graph._nodes[-1] is op:
            graph._nodes.pop()
        elif op in graph._nodes:
            graph._nodes.remove(op)
        graph._nodes_by_name.pop(op.name, None)
        graph._names_in_use.pop(op.name.lower(), None)
    if created:
        graph._version_bump()


def import_graph_def(graph_def: Any, input_map: Mapping[str, Any] | None = None,
                     return_elements: Sequence[str] | None = None, name: str | None = None,
                     op_dict: Any = None, producer_op_list: Any = None) -> Any:
    """Import a ``GraphDef`` into the default graph (``tf.import_graph_def``).

    Nodes are created under the name scope ``name`` (default ``"import"``, made unique;
    ``""`` imports without a prefix), in a topological order whatever their order in the
    GraphDef, with the op definitions of the graph's runtime: missing attrs get their
    defaults, shape functions run, devices are kept (inside enclosing device scopes).

    :param graph_def: a ``GraphDef`` message
    :param input_map: ``{"name:i" (or "name" for output 0): Tensor}`` replacing tensors of
        the imported graph by existing ones (dtypes must match); ``"^name"`` keys remap
        control inputs to an existing op
    :param return_elements: op names (``"name"``) and tensor names (``"name:0"``) in the
        imported graph to return, in order
    :param name: the prefix of imported node names
    :param op_dict: ignored (deprecated in TensorFlow)
    :param producer_op_list: an ``OpList`` of the producer's op definitions; attrs we do
        not know are dropped where they hold the producer's default
    :returns: the list of requested Operations/Tensors, or None without
        ``return_elements``
    :raises TypeError: for arguments of the wrong type
    :raises NotFoundError: naming every op type the runtime does not register, with a
        node each (:class:`UnregisteredOpsError`, also a ``ValueError``)
    :raises ValueError: for an invalid GraphDef (naming the node): unknown op types or
        attrs, missing inputs, a cycle, dtype mismatches, and for ``input_map`` keys not
        found in the GraphDef
    """

    del op_dict  # deprecated, as in TensorFlow
    graph_def = _as_graph_def_message(graph_def)
    if input_map is None:
        input_map = {}
    elif not isinstance(input_map, Mapping):
        raise TypeError(f"input_map must be a dictionary mapping strings to Tensor objects, "
                        f"got {type(input_map).__name__}")
    imap: dict[str, Any] = {}
    for k, v in input_map.items():
        imap[_as_str(k, "input_map keys")] = v
    if return_elements is not None:
        if isinstance(return_elements, (str, bytes)):
            raise TypeError("return_elements must be a list of strings.")
        return_elements = [_as_str(x, "return_elements") for x in return_elements]

    graph = get_default_graph()
    graph._check_not_finalized()
    runtime = graph._runtime

    v = graph_def.versions
    if v.min_consumer > GRAPH_DEF_VERSION:
        raise ValueError(f"GraphDef min consumer version {v.min_consumer} is above this "
                         f"runtime's GraphDef version {GRAPH_DEF_VERSION}")
    if GRAPH_DEF_VERSION in list(v.bad_consumers):
        raise ValueError(f"GraphDef disallows consumer version {GRAPH_DEF_VERSION}")

    check_ops_registered(graph_def, runtime)
    if producer_op_list is not None:
        copy = GraphDef()
        copy.CopyFrom(graph_def)
        _remove_producer_default_attrs(producer_op_list, copy, runtime.op_defs)
        graph_def = copy

    with graph._lock:
        # -- the prefix, and input_map values as tensors --------------------------------
        scope_name = "import" if name is None else name
        mapped: dict[tuple[str, int], Tensor] = {}
        mapped_ctrl: dict[str, Operation] = {}
        plain = {k: val for k, val in imap.items() if not k.startswith("^")}
        needs_conversion = any(not isinstance(val, Tensor) for val in plain.values())
        if scope_name:
            with graph.as_default(), graph.name_scope(scope_name) as scope:
                prefix = scope[:-1]
                if needs_conversion:
                    with graph.name_scope("_inputs"):
                        plain = {k: convert_to_tensor(val) for k, val in plain.items()}
        else:
            prefix = ""
            if needs_conversion:
                raise ValueError("tf.import_graph_def() requires a non-empty `name` if "
                                 "`input_map` contains non-Tensor values. Try calling "
                                 "tf.convert_to_tensor() on `input_map` values before "
                                 "calling tf.import_graph_def().")
        for k, val in plain.items():
            if val.graph is not graph:
                raise ValueError(f"input_map value for '{k}' ({val.name}) is not in the "
                                 "default graph")
            mapped[_parse_tensor_name(k)] = val
        for k, val in imap.items():
            if not k.startswith("^"):
                continue
            op = val.op if isinstance(val, Tensor) else val
            if not isinstance(op, Operation):
                raise TypeError(f"input_map value for control input '{k}' must be an "
                                f"Operation or Tensor, got {val!r}")
            if op.graph is not graph:
                raise ValueError(f"input_map value for '{k}' ({op.name}) is not in the "
                                 "default graph")
            mapped_ctrl[k[1:]] = op

        # -- parse nodes and their inputs -----------------------------------------------
        nodes: dict[str, NodeDef] = {}
        index: dict[str, int] = {}
        for i, node in enumerate(graph_def.node):
            if not node.name:
                raise ValueError(f"Node {i} (op '{node.op}') of the GraphDef has no name")
            if node.name in nodes:
                raise ValueError(f"Node '{node.name}' is not unique in the GraphDef")
            nodes[node.name] = node
            index[node.name] = i
        used_keys: set[tuple[str, int]] = set()
        used_ctrl: set[str] = set()
        # per node: data inputs as ("mapped", Tensor) or ("node", src, idx); control
        # inputs as ("mapped", Operation) or ("node", src)
        data_in: dict[str, list[tuple[Any, ...]]] = {}
        ctrl_in: dict[str, list[tuple[Any, ...]]] = {}
        preds: dict[str, list[str]] = {}
        for node in graph_def.node:
            where = f"Node '{node.name}' (op '{node.op}')"
            d_list: list[tuple[Any, ...]] = []
            c_list: list[tuple[Any, ...]] = []
            p: list[str] = []
            for inp in node.input:
                if inp.startswith("^"):
                    src = inp[1:]
                    if src in mapped_ctrl:
                        used_ctrl.add(src)
                        c_list.append(("mapped", mapped_ctrl[src]))
                    elif src in nodes:
                        c_list.append(("node", src))
                        p.append(src)
                    else:
                        raise ValueError(f"{where} has control input '{inp}', but node "
                                         f"'{src}' does not exist in the GraphDef")
                    continue
                if c_list:
                    raise ValueError(f"{where}: control inputs must come after regular "
                                     f"inputs, but '{inp}' follows one")
                try:
                    key = _parse_tensor_name(inp)
                except ValueError as e:
                    raise ValueError(f"{where}: bad input {inp!r}: {e}") from None
                if key in mapped:
                    used_keys.add(key)
                    d_list.append(("mapped", mapped[key]))
                elif key[0] in nodes:
                    d_list.append(("node", key[0], key[1]))
                    p.append(key[0])
                else:
                    raise ValueError(f"{where} has input '{inp}', but node '{key[0]}' does "
                                     "not exist in the GraphDef (and the input is not in "
                                     "input_map)")
            data_in[node.name] = d_list
            ctrl_in[node.name] = c_list
            preds[node.name] = p

        # -- topological order (GraphDef order among ready nodes) -----------------------
        # A while loop's back edge (NextIteration -> Merge) is no ordering constraint:
        # the Merge is created with a forward input in that slot, and the edge is set
        # once every op exists (as TF's importer does).
        back: dict[str, list[tuple[int, str, int]]] = {}
        for node in graph_def.node:
            if node.op not in _MERGE_OPS:
                continue
            d_list = data_in[node.name]
            slots = [(i, src[1], src[2]) for i, src in enumerate(d_list)
                     if src[0] == "node" and nodes[src[1]].op in _NEXT_ITERATION_OPS]
            if slots and len(slots) < len(d_list):
                back[node.name] = slots
                p = preds[node.name]
                for _, src_name, _ in slots:
                    p.remove(src_name)
        pending = {n: len(set(p)) for n, p in preds.items()}
        succs: dict[str, list[str]] = {n: [] for n in nodes}
        for n, p in preds.items():
            for src in set(p):
                succs[src].append(n)
        ready = [index[n] for n, c in pending.items() if c == 0]
        heapq.heapify(ready)
        order: list[NodeDef] = []
        while ready:
            node = graph_def.node[heapq.heappop(ready)]
            order.append(node)
            for s in succs[node.name]:
                pending[s] -= 1
                if pending[s] == 0:
                    heapq.heappush(ready, index[s])
        if len(order) != len(nodes):
            remaining = {n for n, c in pending.items() if c > 0}
            cycle = _find_cycle(remaining, preds)
            raise ValueError(f"GraphDef contains a cycle, so node '{cycle[0]}' can never "
                             f"run: {' -> '.join(cycle)} (each node is an input of the next)")

        # -- final names: prefixed, made unique against the graph -----------------------
        def taken(n: str) -> bool:
            return n in graph._nodes_by_name or n.lower() in graph._names_in_use

        final: dict[str, str] = {}
        chosen: set[str] = set()
        wanted = {(f"{prefix}/{n}" if prefix else n) for n in nodes}
        for node in graph_def.node:
            base = f"{prefix}/{node.name}" if prefix else node.name
            cand, count = base, 0
            while taken(cand) or cand in chosen or (count > 0 and cand in wanted):
                count += 1
                cand = f"{base}_{count}"
            final[node.name] = cand
            chosen.add(cand)

        def rename_loc(s: str) -> str:
            if not s.startswith("loc:@"):
                return s
            target = s[5:]
            if target in final:
                return "loc:@" + final[target]
            return "loc:@" + (f"{prefix}/{target}" if prefix else target)

        # -- create the ops -------------------------------------------------------------
        created_by_name: dict[str, Operation] = {}
        created: list[Operation] = []
        try:
            for node in order:
                where = f"Node '{node.name}' (op '{node.op}')"
                try:
                    op_def = runtime.op_def(node.op)
                except ValueError as e:
                    raise ValueError(f"{where}: {e}") from None
                attrs = _node_attrs(node, op_def, where)
                if "_class" in attrs and isinstance(attrs["_class"], list):
                    attrs["_class"] = [rename_loc(text_of_bytes(x) if isinstance(x, bytes) else x)
                                       for x in attrs["_class"]]
                try:
                    expected = _expected_inputs(op_def, attrs)
                except (KeyError, TypeError, ValueError) as e:
                    raise ValueError(f"{where}: cannot work out its input types: {e}") from None
                if len(expected) != len(data_in[node.name]):
                    raise ValueError(
                        f"{where} has {len(data_in[node.name])} inputs, but its op definition "
                        f"expects {len(expected)} ({', '.join(t.name for t, _ in expected)})")
                if node.op == "Const" and isinstance(attrs.get("value"), np.ndarray) and \
                        isinstance(attrs.get("dtype"), _dt.DType):
                    v_dt = dtype_of_array(attrs["value"])
                    if v_dt.np != attrs["dtype"].np:
                        raise ValueError(f"{where}: its value is {v_dt.name} but its dtype "
                                         f"attr is {attrs['dtype'].name}")
                inputs: list[Tensor] = []
                d_list = data_in[node.name]
                later = {i for i, _, _ in back.get(node.name, ())}
                if later:  # back edges: a forward input stands in until every op exists
                    fwd = next(src for i, src in enumerate(d_list) if i not in later)
                    d_list = [fwd if i in later else src for i, src in enumerate(d_list)]
                for i, (src, (want, is_ref)) in enumerate(zip(d_list, expected)):
                    if src[0] == "mapped":
                        t = src[1]
                    else:
                        src_op = created_by_name[src[1]]
                        if src[2] >= len(src_op.outputs):
                            raise ValueError(
                                f"{where}: input {i} refers to output {src[2]} of node "
                                f"'{src[1]}', which has {len(src_op.outputs)} outputs")
                        t = src_op.outputs[src[2]]
                    if t.dtype.base_dtype is not want.base_dtype or \
                            (is_ref and not t.dtype.is_ref_dtype):
                        shown = want._as_ref.name if is_ref else want.name
                        raise ValueError(f"Input {i} of node '{final[node.name]}' was passed "
                                         f"{t.dtype.name} from {t.name} incompatible with "
                                         f"expected {shown}.")
                    inputs.append(t)
                try:
                    with graph.control_dependencies(None):
                        op = graph.create_op(node.op, inputs, dtypes=None,
                                             name=final[node.name] + "/", attrs=attrs,
                                             op_def=op_def, compute_device=False)
                except (ValueError, TypeError, KeyError, IndexError) as e:
                    # create_op may have added the node before its shape function failed
                    bad = graph._nodes_by_name.get(final[node.name])
                    if bad is not None and bad not in created:
                        created.append(bad)
                    raise ValueError(f"{where}: {e}") from None
                created.append(op)
                created_by_name[node.name] = op
                for c in ctrl_in[node.name]:
                    op._add_control_input(c[1] if c[0] == "mapped" else created_by_name[c[1]])

            # -- loop back edges, now that their NextIteration ops exist --------------
            for mname, slots in back.items():
                mop = created_by_name[mname]
                for i, src, k in slots:
                    nxt = created_by_name[src]
                    if k >= len(nxt.outputs):
                        raise ValueError(f"Node '{mname}' (op '{mop.type}'): input {i} "
                                         f"refers to output {k} of node '{src}', which has "
                                         f"{len(nxt.outputs)} outputs")
                    t = nxt.outputs[k]
                    want = mop.inputs[i].dtype
                    if t.dtype.base_dtype is not want.base_dtype:
                        raise ValueError(f"Input {i} of node '{final[mname]}' was passed "
                                         f"{t.dtype.name} from {t.name} incompatible with "
                                         f"expected {want.base_dtype.name}.")
                    mop._update_input(i, t)

            # -- devices: the node's own inside enclosing scopes; colocated ops follow --
            coloc: list[tuple[Operation, list[str]]] = []
            for node in order:
                op = created_by_name[node.name]
                groups = [g[5:] for g in op.node_attrs.get("_class", []) or []
                          if isinstance(g, str) and g.startswith("loc:@") and g[5:] != op.name]
                if groups:
                    coloc.append((op, groups))
                    continue
                try:
                    if node.device:
                        with graph.device(node.device):
                            graph._apply_device_functions(op)
                    else:
                        graph._apply_device_functions(op)
                except ValueError as e:
                    raise ValueError(f"Node '{node.name}' (op '{node.op}'): bad device "
                                     f"{node.device!r}: {e}") from None
            for op, groups in coloc:
                device = ""
                for g in groups:
                    other = graph._nodes_by_name.get(g)
                    if other is None:
                        raise ValueError(f"Specified colocation to an op that does not exist "
                                         f"during import: {g} in {op.name}")
                    if other.device:
                        device = other.device
                        break
                if device:
                    op._set_device(device)

            # -- input_map keys that matched nothing ------------------------------------
            unused = []
            for key, val in imap.items():
                if key.startswith("^"):
                    if key[1:] not in used_ctrl and key[1:] not in nodes:
                        unused.append(key)
                    continue
                src, idx = _parse_tensor_name(key)
                if (src, idx) in used_keys:
                    continue
                if src not in created_by_name or idx >= len(created_by_name[src].outputs):
                    unused.append(key)
            if unused:
                raise ValueError("Attempted to map inputs that were not found in graph_def: "
                                 f"[{', '.join(unused)}]")

            # -- return elements --------------------------------------------------------
            if return_elements is None:
                return None
            results: list[Any] = []
            for r in return_elements:
                if ":" in r:
                    src, idx = _parse_tensor_name(r)
                    if (src, idx) in mapped:
                        results.append(mapped[(src, idx)])
                        continue
                    op = created_by_name.get(src)
                    if op is None or idx >= len(op.outputs):
                        raise ValueError(f"Requested return tensor '{r}' not found in graph "
                                         "def")
                    results.append(op.outputs[idx])
                else:
                    op = created_by_name.get(r)
                    if op is None:
                        raise ValueError(f"Requested return node '{r}' not found in graph def")
                    results.append(op)
            return results
        except BaseException:
            _rollback(graph, created)
            raise
