"""Chrome trace (Perfetto) view of one traced step: ``flowrt.timeline.Timeline``.

The API is TF's ``tensorflow.python.client.timeline``::

    md = tf.RunMetadata()
    sess.run(train, feed, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
             run_metadata=md)
    tl = timeline.Timeline(md.step_stats)
    with open("timeline.json", "w") as f:
        f.write(tl.generate_chrome_trace_format())

Open the file in https://ui.perfetto.dev (or ``chrome://tracing``). The trace has one
process per device (named by the device), one thread row per executor thread, a
complete event (``"ph": "X"``) per node execution, with ``ts``/``dur`` straight from
``all_start_micros``/``all_end_rel_micros``, and -- with ``show_dataflow`` -- flow
arrows (``"s"``/``"f"``) for tensors that pass between threads or devices, including
``_Send`` -> ``_Recv`` transfers.

A node's op and inputs come from its ``timeline_label`` (``"name = Op(in0, in1)"``, or
``"name = _Send(tensor @device"`` for transfers, as TF writes them); when the label
lists no inputs they are taken from ``graph`` if one is given (a ``tf.Graph``, a
``GraphDef``, or a list of them such as ``run_metadata.partition_graphs``).
"""
from __future__ import annotations

import collections
import json
import re
from typing import Any

__all__ = ["Timeline", "AllocationMaximum", "StepStatsAnalysis", "timeline_label"]

AllocationMaximum = collections.namedtuple("AllocationMaximum",
                                           ("timestamp", "num_bytes", "tensors"))
AllocationMaximum.__doc__ = "Peak of one allocator: when, how many bytes, which tensors."

StepStatsAnalysis = collections.namedtuple("StepStatsAnalysis",
                                           ("chrome_trace", "allocator_maximums"))
StepStatsAnalysis.__doc__ = ("Result of :meth:`Timeline.analyze_step_stats`: the trace "
                             "builder and ``{allocator: AllocationMaximum}``.")

from ..engine.ir import RECV_OPS as _RECV_OPS
from ..engine.ir import SEND_OPS as _SEND_OPS
from ..engine.ir import attr_str as _attr_str
from ..engine.ir import timeline_label
from ..base.device_spec import DeviceSpec
# "name = Op(args)"; transfer labels lack the closing parenthesis in TF.
_LABEL_RE = re.compile(r"^(?:\[[^\]]*\] )*(.*?) = ([^()]*)\((.*?)\)?$", re.S)


class _Trace:
    """Collects Chrome trace events; metadata events are written first."""

    def __init__(self) -> None:
        self.metadata: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []

    def process(self, pid: int, name: str, sort_index: int) -> None:
        self.metadata.append({"name": "process_name", "ph": "M", "pid": pid,
                              "args": {"name": name}})
        self.metadata.append({"name": "process_sort_index", "ph": "M", "pid": pid,
                              "args": {"sort_index": sort_index}})

    def thread(self, pid: int, tid: int, name: str) -> None:
        self.metadata.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                              "args": {"name": name}})
        self.metadata.append({"name": "thread_sort_index", "ph": "M", "pid": pid,
                              "tid": tid, "args": {"sort_index": tid}})

    def event(self, ph: str, cat: str, name: str, pid: int, tid: int, ts: int,
              **extra: Any) -> dict[str, Any]:
        ev = {"ph": ph, "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts}
        ev.update(extra)
        self.events.append(ev)
        return ev

    def to_json(self, pretty: bool = True) -> str:
        trace = {"traceEvents": self.metadata + self.events}
        if pretty:
            return json.dumps(trace, indent=1, separators=(",", ": "))
        return json.dumps(trace, separators=(",", ":"))


class _GraphNode:
    __slots__ = ("op", "inputs", "tensor_name", "send_device", "recv_device")

    def __init__(self, op: str, inputs: list[str], attrs: dict[str, str]):
        self.op, self.inputs = op, inputs
        self.tensor_name = attrs.get("tensor_name", "")
        self.send_device = attrs.get("send_device", "")
        self.recv_device = attrs.get("recv_device", "")


def _graph_nodes(graph: Any) -> dict[str, _GraphNode]:
    """``{node name: _GraphNode}`` from a Graph, GraphDef, GraphIR or a list of them."""
    out: dict[str, _GraphNode] = {}
    if graph is None:
        return out
    keys = ("tensor_name", "send_device", "recv_device")
    if isinstance(graph, (list, tuple)):
        for g in graph:
            out.update(_graph_nodes(g))
    elif hasattr(graph, "get_operations"):  # flowrt.Graph
        for op in graph.get_operations():
            ins = [t.op.name if t.value_index == 0 else f"{t.op.name}:{t.value_index}"
                   for t in op.inputs] + ["^" + c.name for c in op.control_inputs]
            out[op.name] = _GraphNode(op.type, ins, {k: _attr_str(op.node_attrs.get(k))
                                                     for k in keys})
    elif hasattr(graph, "node") and not isinstance(graph, dict):  # GraphDef
        for nd in graph.node:
            out[nd.name] = _GraphNode(nd.op, list(nd.input),
                                      {k: _attr_str(nd.attr[k]) for k in keys
                                       if k in nd.attr})
    elif isinstance(getattr(graph, "nodes", None), dict):  # the master's GraphIR
        for n in graph.nodes.values():
            ins = [s if i == 0 else f"{s}:{i}" for s, i in n.inputs]
            out[n.name] = _GraphNode(n.type, ins + ["^" + c for c in n.control_inputs],
                                     {k: _attr_str(n.node_attrs.get(k)) for k in keys})
    else:
        raise TypeError(f"Timeline: cannot read a graph from {type(graph).__name__}")
    return out


def _parse_label(label: str) -> tuple[str, str, list[str]] | None:
    """``(name, op, inputs)`` of a ``"name = Op(a, b)"`` label, or None."""
    m = _LABEL_RE.match(label)
    if m is None:
        return None
    name, op, args = m.groups()
    inputs = [a for a in args.split(", ") if a] if args else []
    return name, op.strip(), inputs


def _tensor_key(name: str) -> str:
    """The producing node of an input string (``"x:1"`` -> ``"x"``)."""
    base, sep, idx = name.rpartition(":")
    return base if sep and idx.isdigit() else name


class _NodeRec:
    """One node execution, as the trace sees it."""

    __slots__ = ("stats", "device", "pid", "tid", "op", "inputs", "start", "end",
                 "transfer")

    def __init__(self, stats: Any, device: str, pid: int):
        self.stats, self.device, self.pid = stats, device, pid
        self.tid = 0
        self.start = int(stats.all_start_micros)
        self.end = self.start + int(stats.all_end_rel_micros)
        self.op = "unknown"
        self.inputs: list[str] = []
        # (tensor name, peer device) of a _Send/_Recv
        self.transfer: tuple[str, str] | None = None


class Timeline:
    """Chrome trace of a step's ``StepStats`` (``RunMetadata.step_stats``).

    :param step_stats: a ``StepStats`` message
    :param graph: optional ``tf.Graph``, ``GraphDef`` or list of GraphDefs (for example
        ``run_metadata.partition_graphs``) the step ran; used for ops and inputs that
        the timeline labels do not carry
    """

    def __init__(self, step_stats: Any, graph: Any = None):
        self._step_stats = step_stats
        self._graph = graph
        self._graph_nodes: dict[str, _GraphNode] | None = None

    # -- analysis ---------------------------------------------------------------------
    def _nodes_of_graph(self) -> dict[str, _GraphNode]:
        if self._graph_nodes is None:
            self._graph_nodes = _graph_nodes(self._graph)
        return self._graph_nodes

    def _describe(self, rec: _NodeRec) -> None:
        """Fill in ``rec``'s op and inputs from its timeline label, else from the step's
        graph; for a ``_Send`` or ``_Recv``, also ``rec.transfer`` (the tensor and the
        peer device), leaving a ``_Send`` its graph inputs and a ``_Recv`` none."""
        ns = rec.stats
        parsed = _parse_label(ns.timeline_label) if ns.timeline_label else None
        gn = self._nodes_of_graph().get(ns.node_name)
        if parsed is not None:
            rec.op, rec.inputs = parsed[1] or "unknown", parsed[2]
        if gn is not None:
            if rec.op == "unknown":
                rec.op = gn.op
            if not rec.inputs:
                rec.inputs = list(gn.inputs)
        if ns.node_name == "RecvTensor":
            rec.op, rec.inputs = "RecvTensor", []
        if rec.op in _SEND_OPS or rec.op in _RECV_OPS:
            tensor, peer = "", ""
            if gn is not None and gn.tensor_name:
                tensor = gn.tensor_name
                peer = gn.recv_device if rec.op in _SEND_OPS else gn.send_device
            elif rec.inputs and " @" in rec.inputs[0]:
                tensor, _, peer = rec.inputs[0].partition(" @")
            if tensor:
                rec.transfer = (tensor, peer)
                # a _Send's data input comes from the graph; the label names the tensor
                rec.inputs = [i for i in (gn.inputs if gn is not None else [])
                              if rec.op in _SEND_OPS]

    def _records(self, trace: _Trace) -> list[list[_NodeRec]]:
        """Per device: its node records, with pids/tids assigned and metadata emitted."""
        per_device: list[list[_NodeRec]] = []
        for pid, ds in enumerate(self._step_stats.dev_stats):
            trace.process(pid, ds.device, pid)
            recs = [_NodeRec(ns, ds.device, pid) for ns in ds.node_stats]
            # One row per executor thread; executions that overlap on a thread (async
            # kernels, or microsecond rounding) get an extra row so slices nest cleanly.
            lanes: dict[tuple[int, int], int] = {}
            lane_end: dict[int, list[int]] = {}
            for rec in sorted(recs, key=lambda r: (r.start, -r.end)):
                thread = int(rec.stats.thread_id)
                ends = lane_end.setdefault(thread, [])
                for i, e in enumerate(ends):
                    if rec.start >= e:
                        ends[i] = rec.end
                        lane = i
                        break
                else:
                    lane = len(ends)
                    ends.append(rec.end)
                key = (thread, lane)
                if key not in lanes:
                    lanes[key] = len(lanes)
                rec.tid = lanes[key]
            names = dict(ds.thread_names)
            for (thread, lane), tid in lanes.items():
                name = names.get(thread) or f"thread {thread}"
                trace.thread(pid, tid, name if lane == 0 else f"{name} ({lane + 1})")
            for rec in recs:
                self._describe(rec)
            per_device.append(recs)
        return per_device

    def _emit_ops(self, trace: _Trace, per_device: list[list[_NodeRec]]) -> None:
        for recs in per_device:
            for rec in recs:
                args: dict[str, Any] = {"name": rec.stats.node_name, "op": rec.op}
                for i, name in enumerate(rec.inputs):
                    args[f"input{i}"] = name
                if rec.transfer is not None:
                    args["tensor"] = rec.transfer[0]
                    args["peer_device"] = rec.transfer[1]
                trace.event("X", "Op", rec.op, rec.pid, rec.tid, rec.start,
                            dur=rec.end - rec.start, args=args)

    def _emit_flows(self, trace: _Trace, per_device: list[list[_NodeRec]]) -> int:
        """Flow arrows producer -> consumer across threads/devices; returns how many."""
        producer: dict[str, _NodeRec] = {}
        for recs in per_device:
            for rec in recs:
                producer[rec.stats.node_name] = rec
        flow_id = 0

        def flow(name: str, src: _NodeRec, dst: _NodeRec, at: int) -> None:
            nonlocal flow_id
            # "s" binds to the producer's slice, "f" (binding "e") to the consumer's
            s_ts = src.start + max(src.end - src.start - 1, 0)
            f_ts = min(max(at, dst.start), dst.start + max(dst.end - dst.start - 1, 0))
            trace.event("s", "DataFlow", name, src.pid, src.tid, s_ts, id=flow_id)
            trace.event("f", "DataFlow", name, dst.pid, dst.tid, f_ts, id=flow_id, bp="e")
            flow_id += 1

        for recs in per_device:
            for rec in recs:
                for inp in rec.inputs:
                    if inp.startswith("^"):
                        continue
                    key = _tensor_key(inp)
                    src = producer.get(key)
                    if src is None:
                        # an input renamed by partitioning ("x/_3"): credit the original
                        cut = key.rfind("/_")
                        src = producer.get(key[:cut]) if cut > 0 else None
                    if src is None or (src.pid == rec.pid and src.tid == rec.tid):
                        continue
                    flow(inp, src, rec, rec.start)
        # transfers: each _Recv is fed by the _Send of the same tensor
        sends: dict[str, list[_NodeRec]] = {}
        for recs in per_device:
            for rec in recs:
                if rec.transfer is not None and rec.op in _SEND_OPS:
                    sends.setdefault(rec.transfer[0], []).append(rec)
        for recs in per_device:
            for rec in recs:
                if rec.transfer is None or rec.op not in _RECV_OPS:
                    continue
                tensor, send_device = rec.transfer
                cands = sends.get(tensor, [])
                src = next((s for s in cands if _same_device(s.device, send_device)
                            and (not s.transfer[1] or _same_device(s.transfer[1],
                                                                   rec.device))),
                           cands[0] if len(cands) == 1 else None)
                if src is not None:
                    flow(tensor, src, rec, src.end)
        return flow_id

    def _emit_memory(self, trace: _Trace, per_device: list[list[_NodeRec]]
                     ) -> dict[str, AllocationMaximum]:
        """Tensor lifetimes (object events) and per-allocator byte counters."""
        alloc_pid = len(per_device)
        trace.process(alloc_pid, "Allocators", alloc_pid)
        tensors: dict[str, dict[str, Any]] = {}
        for recs in per_device:
            if not recs:
                continue
            tpid = alloc_pid + 1 + recs[0].pid
            trace.process(tpid, f"{recs[0].device} Tensors", tpid)
            for rec in recs:
                for out in rec.stats.output:
                    slot = out.slot
                    name = rec.stats.node_name if slot == 0 else \
                        f"{rec.stats.node_name}:{slot}"
                    ad = out.tensor_description.allocation_description
                    obj = len(tensors)
                    tensors[name] = {"pid": tpid, "id": obj, "create": rec.start,
                                     "last": rec.end, "bytes": int(ad.requested_bytes),
                                     "allocator": ad.allocator_name}
                    trace.event("N", "Tensor", name, tpid, rec.tid, rec.start, id=obj)
                    desc = str(out.tensor_description).replace('"', "")
                    trace.event("O", "Tensor", name, tpid, rec.tid, max(rec.end - 1,
                                                                         rec.start),
                                id=obj, args={"snapshot": {"tensor_description": desc}})
        for recs in per_device:
            for rec in recs:
                for inp in rec.inputs:
                    t = tensors.get(inp[:-2] if inp.endswith(":0") else inp)
                    if t is not None:
                        t["last"] = max(t["last"], rec.end - 1)
        events: dict[str, list[tuple[int, int, str]]] = {}
        for name, t in tensors.items():
            trace.event("D", "Tensor", name, t["pid"], 0, t["last"], id=t["id"])
            lst = events.setdefault(t["allocator"], [])
            lst.append((t["create"], t["bytes"], name))
            lst.append((t["last"], -t["bytes"], name))
        maxima: dict[str, AllocationMaximum] = {}
        for allocator, lst in events.items():
            total, live = 0, set()
            best = AllocationMaximum(0, 0, set())
            for ts, nbytes, name in sorted(lst, key=lambda e: e[0]):
                total += nbytes
                (live.discard if nbytes < 0 else live.add)(name)
                if total > best.num_bytes:
                    best = AllocationMaximum(ts, total, set(live))
                trace.event("C", "Memory", allocator, alloc_pid, 0, ts,
                            args={allocator: total})
            maxima[allocator] = best
        return maxima

    # -- public API -------------------------------------------------------------------
    def analyze_step_stats(self, show_dataflow: bool = True, show_memory: bool = True,
                           op_time: str = "schedule") -> StepStatsAnalysis:
        """Build the trace; returns ``StepStatsAnalysis(chrome_trace, allocator_maximums)``.

        ``op_time`` is accepted for TF compatibility; flowrt records no separate GPU
        kernel streams, so every value shows the node's own start and duration.
        """
        if op_time not in ("schedule", "gpu", "all"):
            raise ValueError(f"op_time must be 'schedule', 'gpu' or 'all', got {op_time!r}")
        trace = _Trace()
        per_device = self._records(trace)
        self._emit_ops(trace, per_device)
        if show_dataflow:
            self._emit_flows(trace, per_device)
        maxima = self._emit_memory(trace, per_device) if show_memory else {}
        return StepStatsAnalysis(trace, maxima)

    def generate_chrome_trace_format(self, show_dataflow: bool = True,
                                     show_memory: bool = False,
                                     op_time: str = "schedule") -> str:
        """The step as Chrome trace format JSON (a string), for Perfetto or
        ``chrome://tracing``.

        :param show_dataflow: add flow arrows for tensors passed between threads or
            devices (and from each ``_Send`` to its ``_Recv``)
        :param show_memory: add tensor lifetimes and allocator counters (from the
            ``output`` records of the step stats, when the runtime filled them)
        """
        step = self.analyze_step_stats(show_dataflow, show_memory, op_time)
        return step.chrome_trace.to_json(pretty=True)


def _same_device(a: str, b: str) -> bool:
    """Device names equal, allowing a short form (``/cpu:0``) against a full one."""
    if not a or not b or a == b:
        return True
    try:

        x, y = DeviceSpec.from_string(a), DeviceSpec.from_string(b)
    except (ValueError, ImportError):
        return False
    for f in ("job", "replica", "task", "device_type", "device_index"):
        u, v = getattr(x, f, None), getattr(y, f, None)
        if u is not None and v is not None and str(u).upper() != str(v).upper():
            return False
    return True
