"""Publishes ``tf.graph_util`` (:mod:`flowrt.modeling.graph_util`), and registers the
meta-graph form of while loops: the ``while_context`` collection holds a
``WhileContextDef`` per top-level loop, written for flowrt's loops and rebuilt into a
:class:`~.control_flow_ops.WhileContext` on import, so that ``tf.gradients`` of an
imported loop (TensorFlow's or flowrt's) builds its backward loop."""
from __future__ import annotations

from typing import Any

from flowrt.graph import GraphKeys, Operation, get_default_graph
from flowrt.modeling import graph_util as _graph_util
from flowrt.modeling import meta_graph_objects  # noqa: F401  (registers its proto functions)
from flowrt.proto.meta_graph_pb2 import WhileContextDef
from flowrt.training.meta_graph import (prepend_name_scope, register_proto_function,
                                        strip_name_scope)

from ._common import ks
from .control_flow_ops import WhileContext, _exits_registry, _loop_registry

for _name, _value in _graph_util.API.items():
    ks.export(_name, _value)

_ENTERS = ("Enter", "RefEnter")
_EXITS = ("Exit", "RefExit")


def _consumer(t: Any, types: tuple[str, ...]) -> Operation:
    for op in t.consumers():
        if op.type in types:
            return op
    raise ValueError(f"the loop value {t.name} has no {'/'.join(types)} consumer")


def _while_to_proto(ctx: WhileContext, export_scope: str | None = None) -> Any:
    """The ``WhileContextDef`` of a flowrt loop (TF's ``WhileContext.to_proto``)."""
    if export_scope and not ctx.name.startswith(export_scope):
        return None

    def rel(name: str) -> str:
        return strip_name_scope(name, export_scope)

    wd = WhileContextDef(
        context_name=rel(ctx.name), parallel_iterations=int(ctx.parallel_iterations),
        back_prop=bool(ctx.back_prop), swap_memory=bool(ctx.swap_memory),
        pivot_name=rel(ctx.pivot.name), pivot_for_pred_name=rel(ctx.pivot_for_pred.name),
        pivot_for_body_name=rel(ctx.pivot_for_body.name),
        loop_exit_names=[rel(t.name) for t in ctx.exits],
        loop_enter_names=[rel(t.name) for t in ctx.loop_enters])
    values = {t.name for op in ctx.ops for t in op.outputs}  # Exits too, as TF lists them
    for inner, outer in ctx.invariant_of.items():
        values.add(outer.name)
        wd.values_def.external_values[rel(outer.name)] = rel(inner.name)
    wd.values_def.values.extend(sorted(rel(v) for v in values))
    return wd


def _while_from_proto(wd: Any, import_scope: str | None = None) -> WhileContext:
    """A WhileContext over the imported nodes a ``WhileContextDef`` names: its ops (the
    def's values that are not outside values, its Enters and Exits), its loop variables'
    Enter/Merge/Switch/Identity/NextIteration/Exit chains, its invariants (constant
    Enters) and the pivots."""
    g = get_default_graph()

    def el(name: str) -> Any:
        return g.as_graph_element(prepend_name_scope(name, import_scope))

    ctx = WhileContext(prepend_name_scope(wd.context_name, import_scope),
                       wd.parallel_iterations or 10, wd.back_prop, wd.swap_memory, None)
    external = set(wd.values_def.external_values)
    ops = {el(v).op for v in wd.values_def.values if v not in external}
    exits = [el(n) for n in wd.loop_exit_names]
    enters = [el(n) for n in wd.loop_enter_names]
    enters = enters if enters else sorted(
        (op.outputs[0] for op in ops if op.type in _ENTERS and
         not op.get_attr("is_constant")), key=lambda t: t.name)
    # TF lists the loop variables' initial values among the values: they are outside
    ops -= {e.op.inputs[0].op for e in enters}
    ops.update(t.op for t in exits)
    ops.update(e.op for e in enters)
    ctx.ops = ops
    registry = _loop_registry(g)
    for op in ops:
        registry[op] = ctx
    ctx.enter_ops = sorted((op for op in ops if op.type in _ENTERS),
                           key=lambda op: op.name)
    for op in ctx.enter_ops:
        if op.get_attr("is_constant"):
            ctx.invariant_of[op.outputs[0]] = op.inputs[0]
            ctx.captured[op.inputs[0]] = op.outputs[0]
    ctx.pivot = el(wd.pivot_name)
    ctx.pivot_for_pred = el(wd.pivot_for_pred_name)
    ctx.pivot_for_body = el(wd.pivot_for_body_name)
    ctx.loop_enters = enters
    ctx.merges = [_consumer(e, ("Merge", "RefMerge")).outputs[0] for e in enters]
    ctx.switches = [tuple(_consumer(m, ("Switch", "RefSwitch")).outputs)
                    for m in ctx.merges]
    # TF's own counters (gradients/f_count) read the Switch's true side directly
    ctx.identities = [next((op.outputs[0] for op in t.consumers()
                            if op.type in ("Identity", "RefIdentity")), t)
                      for _, t in ctx.switches]
    ctx.next_iterations = [m.op.inputs[1] for m in ctx.merges]
    by_switch = {x.op.inputs[0].op: x for x in exits}
    ctx.exits = [by_switch[f.op] if f.op in by_switch else _consumer(f, _EXITS).outputs[0]
                 for f, _ in ctx.switches]
    _exits_registry(g).update({x.op: ctx for x in ctx.exits})
    g._version_bump()
    return ctx


def _top_level_loops(g: Any) -> list[WhileContext]:
    """The graph's forward top-level loops, in the order they were built."""
    seen: dict[int, WhileContext] = {}
    for ctx in getattr(g, "_flowrt_loop_of", {}).values():
        if ctx.outer_loop is None and ctx.forward is None and ctx.pivot is not None:
            seen.setdefault(id(ctx), ctx)
    return sorted(seen.values(), key=lambda c: c.pivot.op._id)


register_proto_function(GraphKeys.WHILE_CONTEXT, WhileContextDef, _while_to_proto,
                        _while_from_proto, collect=_top_level_loops)
