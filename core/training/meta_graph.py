"""Meta graphs: ``tf.train.export_meta_graph`` / ``import_meta_graph``, compatible with
TensorFlow 1.15's files both ways (docs/api/interop.md). Collections with proto functions
(:func:`register_proto_function`) are written as serialized protos and rebuilt into
Python objects on import; :mod:`flowrt.saver` re-exports both functions.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Callable, Sequence

from google.protobuf import text_format

from . import checkpoint as _ckpt
from ..base import VERSION
from ..framework.graph import GraphKeys, Operation, Tensor, get_default_graph
from ..framework.graph_def import import_graph_def, python_attr_of
from ..proto import meta_graph_pb2, op_def_pb2, saver_pb2
from .variables import Variable

__all__ = [
    "export_meta_graph", "import_meta_graph", "read_meta_graph_file",
    "export_scoped_meta_graph", "import_scoped_meta_graph", "register_proto_function",
    "get_collection_proto_type", "get_to_proto_function", "get_from_proto_function",
    "stripped_op_list_for_graph", "prepend_name_scope", "strip_name_scope",
    "VARIABLE_COLLECTIONS",
]

_log = logging.getLogger("flowrt.meta_graph")

#: TF's GraphKeys._VARIABLE_COLLECTIONS: members are deduplicated on import
VARIABLE_COLLECTIONS = frozenset({
    GraphKeys.GLOBAL_VARIABLES, GraphKeys.LOCAL_VARIABLES, GraphKeys.MODEL_VARIABLES,
    GraphKeys.TRAINABLE_VARIABLES, GraphKeys.MOVING_AVERAGE_VARIABLES,
    GraphKeys.METRIC_VARIABLES, GraphKeys.CONCATENATED_VARIABLES,
})
_UNBOUND_INPUT_PREFIX = "$unbound_inputs_"
_TF_API_VERSION = "1.15.0"

# key -> (proto class, to_proto(obj, export_scope), from_proto(proto, import_scope))
_PROTO_FUNCTIONS: dict[str, tuple[Any, Callable | None, Callable | None]] = {}
# fn(graph_def, runtime) -> OpList, the meta_info_def.stripped_op_list of an export
_OP_LIST_FUNCTION: list[Callable[[Any, Any], Any]] = []
# key -> fn(graph) giving the collection's members when the graph holds them elsewhere
_COLLECTORS: dict[str, Callable[[Any], list]] = {}


def register_proto_function(collection_name: str, proto_type: Any = None,
                            to_proto: Callable | None = None,
                            from_proto: Callable | None = None,
                            collect: Callable[[Any], list] | None = None) -> None:
    """Serialize the members of collection ``collection_name`` as ``proto_type`` messages
    with ``to_proto(obj, export_scope=)`` and rebuild them on import with
    ``from_proto(proto, import_scope=)`` (TF's ``ops.register_proto_function``).
    ``collect(graph)``, a flowrt extension, lists the members when the collection is
    empty (objects a kernel set tracks itself, such as while-loop contexts)."""
    _PROTO_FUNCTIONS[collection_name] = (proto_type, to_proto, from_proto)
    if collect is not None:
        _COLLECTORS[collection_name] = collect


def get_collection_proto_type(collection_name: str) -> Any:
    return _PROTO_FUNCTIONS.get(collection_name, (None, None, None))[0]


def get_to_proto_function(collection_name: str) -> Callable | None:
    return _PROTO_FUNCTIONS.get(collection_name, (None, None, None))[1]


def get_from_proto_function(collection_name: str) -> Callable | None:
    return _PROTO_FUNCTIONS.get(collection_name, (None, None, None))[2]


def _as_str(x: Any) -> str:
    if isinstance(x, bytes):
        return x.decode()
    return os.fspath(x) if isinstance(x, os.PathLike) else str(x)


def prepend_name_scope(name: str, scope: str | None) -> str:
    """``scope/name`` (``^scope/name`` for a control input, ``loc:@scope/name`` for a
    colocation); ``name`` without a scope."""
    if not scope:
        return name
    scope = scope.rstrip("/")
    for mark in ("^", "loc:@"):
        if name.startswith(mark):
            return mark + scope + "/" + name[len(mark):]
    return scope + "/" + name


def strip_name_scope(name: str, scope: str | None) -> str:
    """``name`` without the leading ``scope/`` (after a ``^`` or ``loc:@`` mark); kept
    as is outside ``scope``."""
    if not scope:
        return name
    p = scope.rstrip("/") + "/"
    for mark in ("^", "loc:@", ""):
        if name.startswith(mark + p):
            return mark + name[len(mark) + len(p):]
    return name


# -- export --------------------------------------------------------------------------------
def stripped_op_list_for_graph(graph_def: Any, runtime: Any = None) -> Any:
    """The ``OpList`` of the op types ``graph_def`` uses, sorted by name (built by the
    function :mod:`flowrt.modeling.meta_graph_objects` registers; empty without it)."""
    runtime = runtime if runtime is not None else get_default_graph()._runtime
    fn = _OP_LIST_FUNCTION[0] if _OP_LIST_FUNCTION else None
    return fn(graph_def, runtime) if fn is not None else op_def_pb2.OpList()


def _strip_defaults(gd: Any, runtime: Any) -> None:
    """Remove the attrs that hold their op definition's default value."""
    for nd in gd.node:
        od = runtime.op_defs.get(nd.op)
        if od is None:
            continue
        for k in list(nd.attr):
            a = od.attrs.get(k)
            if a is None or not a.has_default:
                continue
            try:
                if python_attr_of(nd.attr[k], a.kind) == a.default:
                    del nd.attr[k]
            except (TypeError, ValueError):
                continue


def _in_scope(name: str, export_scope: str | None) -> bool:
    return name.startswith(_UNBOUND_INPUT_PREFIX) or not export_scope or \
        name.startswith(export_scope)


def _scoped_node(nd: Any, export_scope: str | None, unbound: list[str]) -> None:
    """Rewrite a copied NodeDef's names relative to ``export_scope`` (TF's ``_node_def``):
    inputs from outside become ``$unbound_inputs_<name>``."""
    for i, inp in enumerate(nd.input):
        if export_scope and not inp.lstrip("^").startswith(export_scope):
            nd.input[i] = ("^" + _UNBOUND_INPUT_PREFIX + inp[1:]) if inp.startswith("^") \
                else _UNBOUND_INPUT_PREFIX + inp
            unbound.append(nd.input[i])
        else:
            nd.input[i] = strip_name_scope(inp, export_scope)
    nd.name = strip_name_scope(nd.name, export_scope)
    if "_class" in nd.attr:
        keep = [s for s in nd.attr["_class"].list.s
                if not export_scope or s.decode().split("@", 1)[-1].startswith(export_scope)]
        nd.attr["_class"].list.ClearField("s")
        nd.attr["_class"].list.s.extend(strip_name_scope(s.decode(), export_scope).encode()
                                        for s in keep)
    if nd.op in ("Enter", "RefEnter") and "frame_name" in nd.attr:
        nd.attr["frame_name"].s = strip_name_scope(nd.attr["frame_name"].s.decode(),
                                                   export_scope).encode()


def _collection_def(key: str, values: list[Any], export_scope: str | None) -> Any:
    """The ``CollectionDef`` of a collection's members (None: nothing to write)."""
    values = [v for v in values if isinstance(v, (str, bytes, int, float)) or
              not hasattr(v, "name") or _in_scope(v.name, export_scope)]
    if not values:
        return None
    cd = meta_graph_pb2.CollectionDef()
    proto_type, to_proto, _ = _PROTO_FUNCTIONS.get(key, (None, None, None))
    if to_proto is not None:
        for v in values:
            p = to_proto(v, export_scope=export_scope)
            if p is not None:
                if proto_type is not None and not isinstance(p, proto_type):
                    raise TypeError(f"{type(p).__name__} is not a {proto_type.__name__}")
                cd.bytes_list.value.append(p.SerializeToString())
    elif isinstance(values[0], (str, bytes)):
        cd.bytes_list.value.extend(v.encode() if isinstance(v, str) else bytes(v)
                                   for v in values)
    elif isinstance(values[0], bool) or not isinstance(values[0], (int, float)):
        cd.node_list.value.extend(strip_name_scope(v.name, export_scope) for v in values
                                  if not export_scope or v.name.startswith(export_scope))
    elif isinstance(values[0], int):
        cd.int64_list.value.extend(int(v) for v in values)
    else:
        cd.float_list.value.extend(float(v) for v in values)
    return cd


def export_scoped_meta_graph(filename: str | None = None, graph_def: Any = None,
                             graph: Any = None, export_scope: str | None = None,
                             as_text: bool = False, unbound_inputs_col_name: str =
                             "unbound_inputs", clear_devices: bool = False,
                             saver_def: Any = None, clear_extraneous_savers: bool = False,
                             strip_default_attrs: bool = False, meta_info_def: Any = None,
                             collection_list: Sequence[str] | None = None,
                             **kwargs: Any) -> tuple[Any, dict[str, Variable]]:
    """The ``MetaGraphDef`` of ``graph`` (default: the default graph), limited to the
    nodes under ``export_scope`` with names relative to it, and ``{name: Variable}`` of
    its global variables (TF's ``meta_graph.export_scoped_meta_graph``); written to
    ``filename`` (binary, or text with ``as_text``) atomically when given. A given
    ``graph_def`` is used as it is (``clear_devices`` aside)."""
    del kwargs
    g = graph if graph is not None else get_default_graph()
    if graph_def is None:
        graph_def = g.as_graph_def(add_shapes=True)
        if export_scope or clear_devices:
            unbound: list[str] = []
            nodes = [nd for nd in graph_def.node if _in_scope(nd.name, export_scope)]
            del graph_def.node[:]
            for nd in nodes:
                _scoped_node(nd, export_scope, unbound)
                if clear_devices:
                    nd.device = ""
            graph_def.node.extend(nodes)
            if unbound_inputs_col_name and export_scope:
                g.clear_collection(unbound_inputs_col_name)
                for name in unbound:
                    g.add_to_collection(unbound_inputs_col_name, name)
    elif clear_devices:
        copy = type(graph_def)()
        copy.CopyFrom(graph_def)
        for nd in copy.node:
            nd.device = ""
        graph_def = copy
    mg = meta_graph_pb2.MetaGraphDef()
    if meta_info_def is not None:
        mg.meta_info_def.CopyFrom(meta_info_def)
    # TF parses tensorflow_version as a version number: the TF API flowrt follows
    mg.meta_info_def.tensorflow_version = _TF_API_VERSION
    mg.meta_info_def.tensorflow_git_version = f"flowrt {VERSION}"
    mg.graph_def.CopyFrom(graph_def)
    if not mg.meta_info_def.stripped_op_list.op:
        mg.meta_info_def.stripped_op_list.CopyFrom(
            stripped_op_list_for_graph(mg.graph_def, g._runtime))
    if strip_default_attrs:
        _strip_defaults(mg.graph_def, g._runtime)
        mg.meta_info_def.stripped_default_attrs = True
    if saver_def is not None:
        mg.saver_def.CopyFrom(saver_def)
    keys = list(collection_list) if collection_list is not None else \
        list(g.get_all_collection_keys()) + [k for k in _COLLECTORS
                                             if k not in g.get_all_collection_keys()]
    for key in keys:
        if not isinstance(key, str):
            _log.warning("Only collections with string type keys will be serialized. "
                         "This key has %s", type(key))
            continue
        values = list(g.get_collection(key))
        if not values and key in _COLLECTORS:
            values = _COLLECTORS[key](g)
        if key == GraphKeys.SAVERS and clear_extraneous_savers and saver_def is not None:
            values = [get_from_proto_function(key)(saver_def)]
        try:
            cd = _collection_def(key, values, export_scope)
        except Exception as e:  # TF too writes the rest of the meta graph  # noqa: BLE001
            _log.warning("Issue encountered when serializing: %s.\n%s", key, e)
            continue
        if cd is not None:
            mg.collection_def[key].CopyFrom(cd)
    var_list = {strip_name_scope(v.name, export_scope): v
                for v in g.get_collection(GraphKeys.GLOBAL_VARIABLES)
                if isinstance(v, Variable) and _in_scope(v.name, export_scope)}
    if filename:
        data: bytes | str = text_format.MessageToString(mg) if as_text else \
            mg.SerializeToString()
        d = os.path.dirname(filename)
        if d:
            os.makedirs(d, exist_ok=True)
        _ckpt.atomic_write(filename, data)
    return mg, var_list


def export_meta_graph(filename: str | None = None, meta_info_def: Any = None,
                      graph_def: Any = None, saver_def: Any = None,
                      collection_list: Sequence[str] | None = None, as_text: bool = False,
                      graph: Any = None, export_scope: str | None = None,
                      clear_devices: bool = False, clear_extraneous_savers: bool = False,
                      strip_default_attrs: bool = False, save_debug_info: bool = False,
                      **kwargs: Any) -> Any:
    """Build a ``MetaGraphDef`` (graph, op definitions, saver and collections); write it
    to ``filename`` (binary, or text with ``as_text``) atomically, and return it
    (``tf.train.export_meta_graph``)."""
    del save_debug_info
    mg, _ = export_scoped_meta_graph(
        filename=filename, meta_info_def=meta_info_def, graph_def=graph_def,
        saver_def=saver_def, collection_list=collection_list, as_text=as_text, graph=graph,
        export_scope=export_scope, clear_devices=clear_devices,
        clear_extraneous_savers=clear_extraneous_savers,
        strip_default_attrs=strip_default_attrs, **kwargs)
    return mg


# -- import --------------------------------------------------------------------------------
def read_meta_graph_file(filename: str) -> Any:
    """Parse a meta graph file written as binary or text.

    :raises IOError: the file does not exist or parses as neither
    """
    mg = meta_graph_pb2.MetaGraphDef()
    if not os.path.exists(filename):
        raise IOError(f"File {filename} does not exist.")
    with open(filename, "rb") as f:
        content = f.read()
    try:
        mg.ParseFromString(content)
        return mg
    except Exception:  # not binary: text  # noqa: BLE001
        pass
    try:
        text_format.Merge(content.decode("utf-8"), mg)
    except (text_format.ParseError, UnicodeDecodeError) as e:
        raise IOError(f"Cannot parse file {filename}: {e}.") from None
    return mg


def _collection_values(g: Any, key: str, cd: Any, scope: str,
                       variables: dict[bytes, Variable]) -> list[Any]:
    """The Python objects of one imported collection (TF's loop in
    ``import_scoped_meta_graph_with_return_elements``)."""
    kind = cd.WhichOneof("kind")
    proto_type, _, from_proto = _PROTO_FUNCTIONS.get(key, (None, None, None))
    if from_proto is not None and kind == "bytes_list":
        out = []
        for b in cd.bytes_list.value:
            if key in VARIABLE_COLLECTIONS or key == GraphKeys.GLOBAL_STEP:
                v = variables.get(b)
                if v is None:
                    v = variables[b] = from_proto(proto_type.FromString(b),
                                                  import_scope=scope)
                out.append(v)
            else:
                out.append(from_proto(proto_type.FromString(b), import_scope=scope))
        return out
    if kind == "node_list":
        return [g.as_graph_element(prepend_name_scope(n, scope)) for n in cd.node_list.value]
    if kind == "int64_list":
        return [int(x) for x in cd.int64_list.value]
    if kind == "float_list":
        return [float(x) for x in cd.float_list.value]
    if kind == "bytes_list":
        return list(cd.bytes_list.value)
    return []


def import_scoped_meta_graph(meta_graph_or_file: Any, clear_devices: bool = False,
                             graph: Any = None, import_scope: str | None = None,
                             input_map: dict[str, Any] | None = None,
                             unbound_inputs_col_name: str = "unbound_inputs",
                             restore_collections_predicate: Callable[[str], bool] =
                             lambda key: True, return_elements: Sequence[str] | None = None
                             ) -> Any:
    """Import a meta graph into ``graph`` (default: the default graph) under
    ``import_scope``: its nodes (``input_map`` replaces tensors, ``$unbound_inputs_``
    names included), then its collections, rebuilt into Python objects where proto
    functions are registered. Returns ``{name: Variable}`` of the imported global
    variables, and with ``return_elements`` also the requested elements.

    :raises ValueError: ``input_map`` given without ``import_scope`` for a meta graph
        with unbound inputs
    """
    mg = meta_graph_or_file
    if isinstance(mg, (str, bytes, os.PathLike)):
        mg = read_meta_graph_file(_as_str(mg))
    g = graph if graph is not None else get_default_graph()
    if unbound_inputs_col_name in mg.collection_def:
        unbound = mg.collection_def[unbound_inputs_col_name].bytes_list.value
        if unbound and not (input_map and import_scope):
            raise ValueError("Graph contains unbound inputs: %s. Must provide these inputs "
                             "through input_map." % ",".join(
                                 b.decode() for b in unbound
                                 if not input_map or b.decode() not in input_map))
    gd = mg.graph_def
    if clear_devices:
        gd = type(gd)()
        gd.CopyFrom(mg.graph_def)
        for nd in gd.node:
            nd.device = ""
    with g.as_default():
        scope = g.unique_name(import_scope or "", mark_as_used=False) if import_scope \
            else ""
        producer = mg.meta_info_def.stripped_op_list \
            if mg.meta_info_def.HasField("stripped_op_list") else None
        returned = import_graph_def(gd, name=scope, input_map=input_map,
                                    producer_op_list=producer,
                                    return_elements=return_elements)
        variables: dict[bytes, Variable] = {}
        for key in sorted(mg.collection_def):
            if key == unbound_inputs_col_name or not restore_collections_predicate(key):
                continue
            cd = mg.collection_def[key]
            if cd.WhichOneof("kind") is None:
                _log.error("Cannot identify data type for collection %s. Skipping.", key)
                continue
            try:
                values = _collection_values(g, key, cd, scope, variables)
            except (KeyError, ValueError, TypeError) as e:
                _log.warning("Cannot restore collection %s of the meta graph: %s", key, e)
                continue
            for v in values:
                g.add_to_collection(key, v)
        var_list = {strip_name_scope(v.name, scope): v
                    for v in g.get_collection(GraphKeys.GLOBAL_VARIABLES, scope=scope or None)
                    if isinstance(v, Variable)}
    if return_elements is not None:
        return var_list, returned
    return var_list


def import_meta_graph(meta_graph_or_file: Any, clear_devices: bool = False,
                      import_scope: str | None = None, **kwargs: Any) -> Any:
    """Import a meta graph into the default graph (``tf.train.import_meta_graph``): its
    nodes, its collections (variables, queue runners and while loops become Python
    objects again) and its saver, which is returned: built from the ``SaverDef`` when
    the meta graph has one, else a new ``Saver()`` of the graph's variables (None when
    there are none). ``kwargs``: ``input_map``, ``return_elements`` (then the result is
    ``(saver, elements)``), ``unbound_inputs_col_name``, ``restore_collections_predicate``.
    """
    # saver.py imports this module (Saver.export_meta_graph): a cycle within the layer
    from .saver import Saver
    mg = meta_graph_or_file
    if isinstance(mg, (str, bytes, os.PathLike)):
        mg = read_meta_graph_file(_as_str(mg))
    return_elements = kwargs.pop("return_elements", None)
    out = import_scoped_meta_graph(mg, clear_devices=clear_devices,
                                   import_scope=import_scope,
                                   return_elements=return_elements, **kwargs)
    imported, elements = out if return_elements is not None else (out, None)
    g = get_default_graph()
    if mg.HasField("saver_def"):
        scope = import_scope
        if imported:
            key = next(iter(imported))
            scope = imported[key].name[:-len(key)]
        sd = saver_pb2.SaverDef()
        sd.CopyFrom(mg.saver_def)
        saver = Saver(saver_def=sd, name=scope or None)
        _restore_static_shapes(g, saver.saver_def.restore_op_name)
    elif g.get_collection(GraphKeys.GLOBAL_VARIABLES, scope=import_scope or None):
        saver = Saver()
    else:
        _log.info("Saver not created because there are no variables in the graph to "
                  "restore")
        saver = None
    return (saver, elements) if return_elements is not None else saver


def _restore_static_shapes(g: Any, restore_op_name: str) -> None:
    """After an import, give each RestoreV2 output the shape of the variable it is
    assigned to (what the builder sets), so restores keep checking shapes."""
    try:
        root = g.as_graph_element(restore_op_name, allow_tensor=False)
    except (KeyError, ValueError, TypeError):
        return
    stack, seen = [root], set()
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        if op.type == "Assign" and op.get_attr("validate_shape") and \
                op.inputs[1].op.type == "RestoreV2":
            try:
                op.inputs[1].set_shape(op.inputs[0].shape)
            except ValueError:
                pass
        stack.extend(op.control_inputs)
