"""The proto functions of the meta-graph collections whose members flowrt's training
layer defines (TF registers them beside the classes): variables (``VariableDef``, with
the ``SaveSliceInfoDef`` of a partition), savers (``SaverDef``) and queue runners
(``QueueRunnerDef``); and the op definitions of an export's ``stripped_op_list``.
Registered with
:func:`flowrt.training.meta_graph.register_proto_function` when this module is imported
(the standard kernel set imports it)."""
from __future__ import annotations

from typing import Any

from ..base import errors
from ..framework.graph import GraphKeys, Operation, Tensor, get_default_graph
from ..base.tensor_codec import attr_value_of
from ..proto import meta_graph_pb2, op_def_pb2, saver_pb2
from ..training.coordinator import QueueRunner
from ..training import meta_graph as _meta_graph
from ..training.meta_graph import (VARIABLE_COLLECTIONS, prepend_name_scope,
                                   register_proto_function, strip_name_scope)
from ..training.saver import Saver
from ..training.variables import SaveSliceInfo, Variable

__all__: list[str] = []


def _variable_to_proto(v: Variable, export_scope: str | None = None) -> Any:
    if export_scope and not v.name.startswith(export_scope):
        return None
    vd = v.to_proto(export_scope=export_scope)
    info = v._get_save_slice_info()
    if info is not None:
        s = vd.save_slice_info_def
        s.full_name = strip_name_scope(info.full_name, export_scope)
        s.full_shape.extend(int(d) for d in info.full_shape)
        s.var_offset.extend(int(d) for d in info.var_offset)
        s.var_shape.extend(int(d) for d in info.var_shape)
    return vd


def _variable_from_proto(vd: Any, import_scope: str | None = None) -> Variable:
    v = Variable.from_proto(vd, import_scope=import_scope or None)
    if vd.HasField("save_slice_info_def"):
        v._set_save_slice_info(SaveSliceInfo(save_slice_info_def=vd.save_slice_info_def,
                                             import_scope=import_scope or None))
    return v


def _saver_to_proto(saver: Any, export_scope: str | None = None) -> Any:
    return saver.to_proto(export_scope=export_scope)


def _saver_from_proto(sd: Any, import_scope: str | None = None) -> Any:
    return Saver.from_proto(sd, import_scope=import_scope)


def _error_code(exc_type: type) -> int:
    return int(errors.error_code_from_exception_type(exc_type))


def _queue_runner_to_proto(qr: QueueRunner, export_scope: str | None = None) -> Any:
    name = qr.queue.name if not isinstance(qr.queue, Tensor) else qr.queue.op.name
    if export_scope and not name.startswith(export_scope):
        return None
    names = [getattr(o, "op", o).name for o in qr.enqueue_ops]
    return meta_graph_pb2.QueueRunnerDef(
        queue_name=strip_name_scope(name, export_scope),
        enqueue_op_name=[strip_name_scope(n, export_scope) for n in names],
        close_op_name=strip_name_scope(getattr(qr.close_op, "op", qr.close_op).name,
                                       export_scope),
        cancel_op_name=strip_name_scope(getattr(qr.cancel_op, "op", qr.cancel_op).name,
                                        export_scope),
        queue_closed_exception_types=[_error_code(t)
                                      for t in qr.queue_closed_exception_types])


def _queue_runner_from_proto(qd: Any, import_scope: str | None = None) -> QueueRunner:
    """A QueueRunner over the imported ops a ``QueueRunnerDef`` names (TF's
    ``QueueRunner(queue_runner_def=...)``)."""
    g = get_default_graph()

    def op(name: str) -> Any:
        return g.as_graph_element(prepend_name_scope(name, import_scope))

    queue = op(qd.queue_name)
    enqueue_ops = [op(n) for n in qd.enqueue_op_name]
    close_op = op(qd.close_op_name) if qd.close_op_name else None
    cancel_op = op(qd.cancel_op_name) if qd.cancel_op_name else None
    kinds = [errors.exception_type_from_error_code(c) for c in
             qd.queue_closed_exception_types] or [errors.OutOfRangeError]
    qr = QueueRunner.__new__(QueueRunner)
    # an imported queue is an op, not a queue object: the runner only runs the ops
    QueueRunner.__init__(qr, queue=_ImportedQueue(queue, close_op, cancel_op),
                         enqueue_ops=enqueue_ops, close_op=close_op, cancel_op=cancel_op,
                         queue_closed_exception_types=kinds)
    return qr


class _ImportedQueue:
    """The queue of an imported QueueRunner: its op, by name."""

    def __init__(self, op: Any, close_op: Any, cancel_op: Any):
        self.op = op if isinstance(op, Operation) else op.op
        self.name = self.op.name
        self._close, self._cancel = close_op, cancel_op

    def close(self, cancel_pending_enqueues: bool = False) -> Any:
        return self._cancel if cancel_pending_enqueues else self._close


for _key in sorted(VARIABLE_COLLECTIONS | {GraphKeys.GLOBAL_STEP}):
    register_proto_function(_key, meta_graph_pb2.VariableDef, _variable_to_proto,
                            _variable_from_proto)
register_proto_function(GraphKeys.SAVERS, saver_pb2.SaverDef, _saver_to_proto,
                        _saver_from_proto)
register_proto_function(GraphKeys.QUEUE_RUNNERS, meta_graph_pb2.QueueRunnerDef,
                        _queue_runner_to_proto, _queue_runner_from_proto)


def _op_def_proto(od: Any) -> Any:
    """The ``OpDef`` message of a registered op definition."""
    out = op_def_pb2.OpDef(name=od.name, is_stateful=bool(od.is_stateful),
                           allows_uninitialized_input=bool(od.allows_uninitialized_input))
    for args, field in ((od.inputs, out.input_arg), (od.outputs, out.output_arg)):
        for a in args:
            arg = field.add(name=a.name, type_attr=a.type_attr or "",
                            number_attr=a.number_attr or "",
                            type_list_attr=a.type_list_attr or "", is_ref=a.is_ref)
            if a.dtype is not None:
                arg.type = a.dtype.as_datatype_enum
    for a in od.attrs.values():
        ad = out.attr.add(name=a.name, type=a.kind)
        if a.has_default:
            try:
                ad.default_value.CopyFrom(attr_value_of(a.default, a.kind))
            except (TypeError, ValueError):
                pass
        if a.minimum is not None:
            ad.has_minimum, ad.minimum = True, int(a.minimum)
        if a.allowed:
            try:
                ad.allowed_values.CopyFrom(attr_value_of(list(a.allowed), f"list({a.kind})"))
            except (TypeError, ValueError):
                pass
    return out


def _stripped_op_list(graph_def: Any, runtime: Any) -> Any:
    """The ``OpList`` of the op types ``graph_def`` uses, sorted by name."""
    ops = op_def_pb2.OpList()
    for name in sorted({n.op for n in graph_def.node}):
        od = runtime.op_defs.get(name)
        if od is not None:
            ops.op.append(_op_def_proto(od))
    return ops


_meta_graph._OP_LIST_FUNCTION[:] = [_stripped_op_list]
