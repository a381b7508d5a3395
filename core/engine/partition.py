"""Partitioning: split a placed step graph into one graph per device.

Every data edge between devices becomes a ``_Send`` on the source device and a
``_Recv`` on the destination, with one ``_Recv`` per (tensor, destination device)
however many consumers there are there. A control edge between devices is carried by a
dummy scalar sent after the source node ran. Each partition keeps the feeds (``_Arg``
nodes) and fetch endpoints that live on its device.

A while loop whose nodes span several devices (TF's graph_partition AddControlFlow):
every device the loop (or a loop nested in it) touches gets its own copy of the loop's
control state -- ``Enter -> Merge -> Switch -> Identity -> NextIteration`` -- driven by
the ``LoopCond`` value, sent from the device that computes it each iteration. Every
``_Recv`` inside the loop hangs on its device's control loop ``Merge``, so it runs once
per iteration; the executor puts the frame instance and the iteration into the
rendezvous key, so each iteration's transfers pair up.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..base import dtypes as _dt
from ..base.device_spec import DeviceSpec
from .ir import ARG_OP, GraphIR, Node
from .waiting import WaitFacts
from ..base.tensor_shape import TensorShape
from ..base.tensor_codec import attr_value_of
from ..proto.graph_def_pb2 import GraphDef

__all__ = ["Partition", "partition", "pull_together"]


class Partition:
    """One device's share of a step.

    :ivar device: the Device object
    :ivar ir: the partition's nodes
    :ivar fetches: the endpoints of this partition among the step's fetches
    :ivar fetch_positions: their positions in the step's fetch list
    """

    __slots__ = ("device", "ir", "fetches", "fetch_positions")

    def __init__(self, device: Any, ir: GraphIR):
        self.device = device
        self.ir = ir
        self.fetches: list[tuple[str, int]] = []
        self.fetch_positions: list[int] = []


def partition(ir: GraphIR, placed: dict[str, Any], runtime: Any) -> list[Partition]:
    """Split ``ir`` by ``placed`` (node name -> Device); see the module docstring."""
    parts: dict[str, Partition] = {}
    dev_of = {name: placed[name] for name in ir.nodes}
    for d in dev_of.values():
        if d.name not in parts:
            parts[d.name] = Partition(d, GraphIR())
    send_def, recv_def, const_def = (runtime.op_def("_Send"), runtime.op_def("_Recv"),
                                     runtime.op_def("Const"))
    nodes: dict[str, Node] = dict(ir.nodes)  # grows by the dummy control sources
    recv_for: dict[tuple[str, int, str], str] = {}
    ctrl_for: dict[tuple[str, str], str] = {}
    loops = _LoopInfo(ir, dev_of)
    all_nodes = list(ir.nodes.values()) + loops.control_loops(runtime, nodes, dev_of)

    def tag(dev: Any) -> str:
        # deterministic per (tensor, destination): the same name always means the same
        # transfer, whichever step signature builds it (kernels are cached by name)
        sp = DeviceSpec.from_string(dev.name)
        return f"{sp.job}_{sp.task}_{sp.device_type}_{sp.device_index}"

    def transfer(src: str, idx: int, dst_dev: Any) -> str:
        """The name of the _Recv on ``dst_dev`` for ``src:idx`` (made once)."""
        key = (src, idx, dst_dev.name)
        name = recv_for.get(key)
        if name is not None:
            return name
        src_node = nodes[src]
        src_dev = dev_of[src]
        dtype = src_node.out_dtypes[idx].base_dtype
        shape = src_node.out_shapes[idx]
        tensor_name = f"edge_{src}_{idx}"
        attrs = {"tensor_name": tensor_name, "send_device": src_dev.name,
                 "send_device_incarnation": src_dev.incarnation,
                 "recv_device": dst_dev.name, "client_terminated": False}
        send = Node(f"{src}/_send_{idx}_to_{tag(dst_dev)}", "_Send", [(src, idx)], [], src_dev.name,
                    {**attrs, "T": dtype}, send_def, [], [], [src_node.out_dtypes[idx]],
                    [shape])
        send.assigned_device = src_dev.name
        parts[src_dev.name].ir.add(send)
        name = f"{src}/_recv_{idx}_on_{tag(dst_dev)}"
        # inside a loop the receive runs once per iteration of its device's control loop
        pivot = loops.recv_control(src, dst_dev)
        recv = Node(name, "_Recv", [], [pivot] if pivot else [], dst_dev.name,
                    {**attrs, "tensor_type": dtype}, recv_def, [dtype], [shape], [], [])
        recv.assigned_device = dst_dev.name
        parts[dst_dev.name].ir.add(recv)
        recv_for[key] = name
        return name

    def control_transfer(src: str, dst_dev: Any) -> str:
        key = (src, dst_dev.name)
        name = ctrl_for.get(key)
        if name is not None:
            return name
        src_dev = dev_of[src]
        dummy = Node(f"{src}/_ctrl_to_{tag(dst_dev)}", "Const", [], [src], src_dev.name,
                     {"value": np.zeros((), np.float32), "dtype": _dt.float32}, const_def,
                     [_dt.float32], [TensorShape([])], [], [])
        dummy.assigned_device = src_dev.name
        parts[src_dev.name].ir.add(dummy)
        dev_of[dummy.name] = src_dev
        nodes[dummy.name] = dummy
        loops.same_frame(dummy.name, src)
        name = transfer(dummy.name, 0, dst_dev)
        ctrl_for[key] = name
        return name

    for node in all_nodes:
        d = dev_of[node.name]
        ins = [(s, i) if dev_of[s] is d else (transfer(s, i, d), 0) for s, i in node.inputs]
        ctrl = [c if dev_of[c] is d else control_transfer(c, d) for c in node.control_inputs]
        parts[d.name].ir.add(node.copy(inputs=ins, control_inputs=ctrl))
    for pos, (n, i) in enumerate(ir.fetches):
        p = parts[dev_of[n].name]
        p.fetches.append((n, i))
        p.fetch_positions.append(pos)
    for t in ir.targets:
        parts[dev_of[t].name].ir.targets.append(t)
    for p in parts.values():
        p.ir.feeds = [f for f in ir.feeds if f[1] in p.ir.nodes]
        p.ir.fetches = list(p.fetches)
    return list(parts.values())


def _task(device: str) -> tuple[str | None, int | None]:
    sp = DeviceSpec.from_string(device)
    return sp.job, sp.task


def _successors(nodes: Any) -> dict[str, list[str]]:
    """``{node name: names of the nodes that take its outputs or wait for it}``."""
    succ: dict[str, list[str]] = {}
    for n in nodes:
        for src, _ in n.inputs:
            succ.setdefault(src, []).append(n.name)
        for c in n.control_inputs:
            succ.setdefault(c, []).append(n.name)
    return succ


def pull_together(parts: list[Partition], runtime: Any = None) -> set[str]:
    """The ``_Recv`` nodes whose tensors their task may pull from the sending task in
    one call that waits for all of them.

    For a pair of tasks (sender S, receiver D) that holds when no tensor S sends to D
    depends, through the whole step (any task), on D having received another tensor
    from S: then waiting for all of them cannot deadlock. Only graph edges are
    followed, so steps with a kernel that waits for something else (an ``async``
    kernel other than ``_Recv``: a queue, an accumulator, a barrier, which may wait
    for another node of the same step) are left out, as are steps with loops (their
    transfers repeat per iteration). Without ``runtime`` the kernels are not known:
    nothing is pulled together."""
    if runtime is None or not _no_waiting(parts, runtime):
        return set()
    nodes = {n.name: n for p in parts for n in p.ir.nodes.values()}
    succ = _successors(nodes.values())
    recv_of: dict[tuple[str, str], str] = {}
    for n in nodes.values():
        if n.type == "_Recv":
            a = n.node_attrs
            recv_of[(str(a["tensor_name"]), str(a["recv_device"]))] = n.name
    pairs: dict[tuple[Any, Any], tuple[list[str], set[str]]] = {}  # -> (recvs, sends)
    for n in nodes.values():
        if n.type != "_Send":
            continue
        a = n.node_attrs
        r = recv_of.get((str(a["tensor_name"]), str(a["recv_device"])))
        if r is None:
            continue
        succ.setdefault(n.name, []).append(r)  # the transfer is an edge too
        s_task, d_task = _task(str(a["send_device"])), _task(str(a["recv_device"]))
        if s_task == d_task:
            continue
        recvs, sends = pairs.setdefault((s_task, d_task), ([], set()))
        recvs.append(r)
        sends.add(n.name)
    out: set[str] = set()
    for recvs, sends in pairs.values():
        seen: set[str] = set()
        stack = [x for r in recvs for x in succ.get(r, ())]
        ok = True
        while stack:
            x = stack.pop()
            if x in seen:
                continue
            if x in sends:
                ok = False
                break
            seen.add(x)
            stack.extend(succ.get(x, ()))
        if ok:
            out.update(recvs)
    return out


#: sources a stage may hold a copy of instead of receiving their value from the other
#: stage: they read nothing and give the same thing each time in one step
_COPYABLE = frozenset({"VariableV2", "Variable", "Const", ARG_OP})


def _no_waiting(parts: list[Partition], runtime: Any) -> bool:
    """No loop, and no kernel that waits for anything but a ``_Recv``
    (:attr:`WaitFacts.only_receives_wait <flowrt.engine.waiting.WaitFacts>`)."""
    return all(WaitFacts.of_partition(p.ir.nodes.values(), p.device.device_type,
                                      runtime).only_receives_wait for p in parts)


def split_stages(parts: list[Partition], local: tuple[str, int], runtime: Any
                 ) -> tuple[Partition, Partition] | None:
    """Split a two-task step so that the master can run it as three plain calls.

    For a step over the master's task ``local`` (any number of partitions) and one
    other task R (one partition, P): stage A is what P can run before ``local`` sends
    it anything, stage B the rest (everything in P downstream of a receive from
    ``local``). The master then runs A, which returns what it sends to ``local``; its
    own partitions, which then wait for nothing; and B, whose request carries what
    ``local`` sent to R. Nobody pulls, and no thread waits for another task.

    That holds when B sends nothing to ``local`` (so ``local`` never waits for B), the
    step has no loop and no kernel waiting for anything but a ``_Recv``, and A sends
    something to ``local`` (else the plain step is as good). A value A computes for B
    goes from A to B through R's rendezvous of the step (a ``_Send``/``_Recv`` pair on
    R's device); a variable, constant or feed B uses is read again by a copy of its
    node in B; a control edge from A to B is kept by the order of the two calls. A
    fetched variable is fetched from B: it is read at the end of R's part, as it is in
    a step that is not staged.
    Returns ``(A, B)``, with the fetches of P divided between them, or None."""
    if runtime is None:
        return None
    mine = [p for p in parts if _task(p.device.name) == local]
    other = [p for p in parts if _task(p.device.name) != local]
    if not mine or len(other) != 1 or not _no_waiting(parts, runtime):
        return None
    part = other[0]
    nodes = part.ir.nodes
    dev = part.device.name

    def from_local(n: Node) -> bool:
        return n.type == "_Recv" and _task(str(n.node_attrs["send_device"])) == local

    def to_local(n: Node) -> bool:
        return n.type == "_Send" and _task(str(n.node_attrs["recv_device"])) == local

    succ = _successors(nodes.values())
    late: set[str] = set()
    stack = [n.name for n in nodes.values() if from_local(n)]
    while stack:
        x = stack.pop()
        if x not in late:
            late.add(x)
            stack.extend(succ.get(x, ()))
    if not late or any(to_local(nodes[x]) for x in late):
        return None
    if not any(to_local(n) for n in nodes.values() if n.name not in late):
        return None
    send_def, recv_def = runtime.op_def("_Send"), runtime.op_def("_Recv")
    first, second = Partition(part.device, GraphIR()), Partition(part.device, GraphIR())
    copied: set[str] = set()
    carried: dict[tuple[str, int], str] = {}

    def carry(src: str, idx: int) -> tuple[str, int] | None:
        """B's endpoint for A's output ``src:idx`` (a copy or a stage receive)."""
        node = nodes[src]
        if node.type in _COPYABLE and not node.inputs and not node.control_inputs:
            if src not in copied:
                copied.add(src)
                second.ir.add(node.copy())
            return (src, idx)
        name = carried.get((src, idx))
        if name is None:
            dtype = node.out_dtypes[idx]
            if dtype.is_ref_dtype:
                return None  # a reference other than a variable's: not carried
            shape = node.out_shapes[idx]
            attrs = {"tensor_name": f"stage_{src}_{idx}", "send_device": dev,
                     "send_device_incarnation": part.device.incarnation,
                     "recv_device": dev, "client_terminated": False}
            send = Node(f"{src}/_stage_send_{idx}", "_Send", [(src, idx)], [], dev,
                        {**attrs, "T": dtype}, send_def, [], [], [dtype], [shape])
            send.assigned_device = dev
            first.ir.add(send)
            name = f"{src}/_stage_recv_{idx}"
            recv = Node(name, "_Recv", [], [], dev, {**attrs, "tensor_type": dtype},
                        recv_def, [dtype], [shape], [], [])
            recv.assigned_device = dev
            second.ir.add(recv)
            carried[(src, idx)] = name
        return (name, 0)

    for n in nodes.values():
        if n.name not in late:
            first.ir.add(n.copy())
            continue
        ins = []
        for src, idx in n.inputs:
            if src in late:
                ins.append((src, idx))
                continue
            e = carry(src, idx)
            if e is None:
                return None
            ins.append(e)
        # (a control input from A: A has run by the time B starts)
        second.ir.add(n.copy(inputs=ins,
                             control_inputs=[c for c in n.control_inputs if c in late]))
    for (n, i), pos in zip(part.fetches, part.fetch_positions):
        stage = second if n in late else first
        if stage is first and nodes[n].out_dtypes[i].is_ref_dtype and \
                carry(n, i) == (n, i):
            # a fetched variable is read when the task's part of the step ends, as in
            # a step that is not staged (after this step's updates of it)
            stage = second
        stage.fetches.append((n, i))
        stage.fetch_positions.append(pos)
    for stage in (first, second):
        stage.ir.targets = [t for t in part.ir.targets if t in stage.ir.nodes
                            and (t in late) == (stage is second)]
        stage.ir.feeds = [f for f in part.ir.feeds if f[1] in stage.ir.nodes]
        stage.ir.fetches = list(stage.fetches)
    return first, second


_ENTER = frozenset({"Enter", "RefEnter"})
_EXIT = frozenset({"Exit", "RefExit"})


class _LoopInfo:
    """Which loop frame each node's outputs are in, and the per-device control loops of
    frames that span several devices (TF's AddControlFlow)."""

    def __init__(self, ir: GraphIR, dev_of: dict[str, Any]):
        """Walk ``ir`` in topological order once, recording each node's frame and
        every device each frame (and its nested frames) touches."""
        self.out_frame: dict[str, str] = {}  # node -> frame of its outputs ("" = root)
        self.parent: dict[str, str] = {}  # frame -> enclosing frame
        self.loop_cond: dict[str, str] = {}  # frame -> its LoopCond node
        self.parallel: dict[str, int] = {}
        self.span: dict[str, set[str]] = {}  # frame -> devices (nested frames included)
        self.devices: dict[str, Any] = {}
        self.merge_of: dict[tuple[str, str], str] = {}  # (frame, device) -> Merge node
        if not any(n.type in _ENTER for n in ir.nodes.values()):
            return
        for node in ir.topo_sort():
            frame = ""
            for s in [s for s, _ in node.inputs] + list(node.control_inputs):
                if s in self.out_frame:  # (a loop's back edge comes later: same frame)
                    frame = self.out_frame[s]
                    break
            dev = dev_of[node.name]
            self.devices[dev.name] = dev
            if node.type in _ENTER:
                child = node.node_attrs.get("frame_name", "")
                child = child.decode() if isinstance(child, bytes) else str(child)
                self.parent.setdefault(child, frame)
                self.parallel.setdefault(child, int(node.node_attrs.get(
                    "parallel_iterations", 10) or 10))
                self.out_frame[node.name] = child
                self._touch(child, dev.name)
            elif node.type in _EXIT:
                self.out_frame[node.name] = self.parent.get(frame, "")
            else:
                self.out_frame[node.name] = frame
            if frame:
                self._touch(frame, dev.name)
                if node.type == "LoopCond":
                    self.loop_cond[frame] = node.name

    def _touch(self, frame: str, device: str) -> None:
        while frame:
            self.span.setdefault(frame, set()).add(device)
            frame = self.parent.get(frame, "")

    def same_frame(self, name: str, like: str) -> None:
        self.out_frame[name] = self.out_frame.get(like, "")

    def _needs_control_loops(self, frame: str) -> bool:
        return len(self.span.get(frame, ())) > 1 and frame in self.loop_cond

    def recv_control(self, src: str, dst_dev: Any) -> str | None:
        """The control loop Merge a _Recv of ``src``'s output on ``dst_dev`` hangs on."""
        frame = self.out_frame.get(src, "")
        if not frame:
            return None
        return self.merge_of.get((frame, dst_dev.name))

    def control_loops(self, runtime: Any, nodes: dict[str, Node],
                      dev_of: dict[str, Any]) -> list[Node]:
        """Build every (frame, device) control loop; returns the new nodes."""
        out: list[Node] = []
        f32, shape = _dt.float32, TensorShape([])
        pivot_of: dict[tuple[str, str], str] = {}

        def depth(f: str) -> int:
            d = 0
            while f:
                d, f = d + 1, self.parent.get(f, "")
            return d

        def add(name: str, op: str, inputs: list[tuple[str, int]], dev: Any,
                attrs: dict[str, Any], out_dtypes: list[Any], ctrl: list[str] = ()) -> str:
            n = Node(name, op, inputs, list(ctrl), dev.name, attrs, runtime.op_def(op),
                     out_dtypes, [shape] * len(out_dtypes), [], [])
            n.in_dtypes = [nodes[s].out_dtypes[k] if s in nodes else f32
                           for s, k in inputs]
            n.in_shapes = [shape] * len(inputs)
            n.assigned_device = dev.name
            nodes[name] = n
            dev_of[name] = dev
            out.append(n)
            return name

        for frame in sorted(self.span, key=depth):
            if not self._needs_control_loops(frame):
                continue
            for dname in sorted(self.span[frame]):
                dev = self.devices[dname]
                sp = DeviceSpec.from_string(dname)
                base = f"{frame}/_cloop_{sp.job}_{sp.task}_{sp.device_type}_{sp.device_index}"
                parent = self.parent.get(frame, "")
                if parent:
                    src = pivot_of[(parent, dname)]
                else:
                    src = add(f"{base}/start", "Const", [], dev,
                              {"value": np.zeros((), np.float32), "dtype": f32}, [f32])
                enter = add(f"{base}/Enter", "Enter", [(src, 0)], dev,
                            {"T": f32, "frame_name": frame, "is_constant": False,
                             "parallel_iterations": self.parallel.get(frame, 10)}, [f32])
                merge = add(f"{base}/Merge", "Merge", [(enter, 0), (f"{base}/NextIteration",
                                                                      0)], dev,
                            {"T": f32, "N": 2}, [f32, _dt.int32])
                switch = add(f"{base}/Switch", "Switch", [(merge, 0),
                                                           (self.loop_cond[frame], 0)], dev,
                             {"T": f32}, [f32, f32])
                pivot = add(f"{base}/Identity", "Identity", [(switch, 1)], dev, {"T": f32},
                            [f32])
                add(f"{base}/NextIteration", "NextIteration", [(pivot, 0)], dev,
                    {"T": f32}, [f32])
                for n in (enter,):
                    self.out_frame[n] = frame
                for n in (merge, switch, pivot, f"{base}/NextIteration"):
                    self.out_frame[n] = frame
                if src.endswith("/start"):
                    self.out_frame[src] = parent
                self.merge_of[(frame, dname)] = merge
                pivot_of[(frame, dname)] = pivot
        return out


def partition_graph_defs(parts: list[Partition]) -> list[Any]:
    """Each partition as a ``GraphDef`` (``RunMetadata.partition_graphs``)."""

    out = []
    for p in parts:
        gd = GraphDef()
        gd.versions.producer = 134
        for n in p.ir.nodes.values():
            nd = gd.node.add(name=n.name, op=n.type, device=n.assigned_device or p.device.name)
            nd.input.extend([s if i == 0 else f"{s}:{i}" for s, i in n.inputs])
            nd.input.extend("^" + c for c in n.control_inputs)
            kinds = n.op_def.attrs if n.op_def is not None else {}
            for k, v in n.node_attrs.items():
                adef = kinds.get(k)
                try:
                    av = attr_value_of(v, adef.kind if adef else None)
                except (TypeError, ValueError):
                    continue  # internal attrs with no wire form (fused op specs)
                nd.attr[k].CopyFrom(av)
        out.append(gd)
    return out
