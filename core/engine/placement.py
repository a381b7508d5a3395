"""Placement: choose a device for every node of a step graph.

Constraints come from each node's requested device (merged from ``device`` scopes when
the op was built), colocation groups (``colocate_with``'s ``_class`` attr, and nodes
that take a variable's reference, which must live with the variable) and kernel
availability. ``allow_soft_placement`` relaxes a constraint that cannot be met instead
of failing. Every failure names the node, what it asked for, and what exists.

Among the devices a group of nodes may use, one of two placers chooses
(``ConfigProto.experimental.placer``):

- ``"simple"`` (the default, also ``""``): the highest-priority device type, lowest
  index -- everything unconstrained lands on one device;
- ``"cost_model"``: the greedy placer of :mod:`flowrt.cost_model`, which simulates the
  step and puts each group where it would finish soonest, counting compute from shapes
  (or measured step stats) and the cost of moving inputs between devices.
"""
from __future__ import annotations

from typing import Any, Sequence

from ..base import errors
from ..base.device_spec import DeviceSpec
from ..base import dtypes as _dtypes
from .ir import ARG_OP, GraphIR, Node, extract_step_graph
import sys
from .cost_model import default_cost_model, place_groups

__all__ = ["place", "placer_from_config", "PLACERS"]

#: The accepted values of ``ConfigProto.experimental.placer``.
PLACERS = ("", "simple", "cost_model")


def placer_from_config(config: Any) -> str:
    """The placer a ``ConfigProto`` selects: ``"simple"`` or ``"cost_model"``.

    :raises InvalidArgumentError: for an unknown name
    """
    name = ""
    if config is not None:
        exp = getattr(config, "experimental", None)
        name = getattr(exp, "placer", "") or ""
    return _check_placer(name)


def _check_placer(name: str) -> str:
    if name not in PLACERS:
        raise errors.InvalidArgumentError(
            None, None, f"Unknown placer {name!r} in ConfigProto.experimental.placer; "
            f"expected one of {', '.join(repr(p) for p in PLACERS)}")
    return name or "simple"


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        p = self.parent.setdefault(x, x)
        while p != self.parent.setdefault(p, p):
            self.parent[p] = self.parent[self.parent[p]]
            p = self.parent[p]
        self.parent[x] = p
        return p

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def _spec(node: Node) -> DeviceSpec:
    try:
        return DeviceSpec.from_string(node.device)
    except ValueError as e:
        raise errors.InvalidArgumentError(None, node.source_op,
                                          f"Malformed device specification '{node.device}' "
                                          f"of node '{node.name}': {e}") from None


def place(ir: GraphIR, devices: Sequence[Any], runtime: Any, allow_soft: bool = False,
          log: bool = False, default_job: str | None = None,
          default_task: int | None = None, placer: str | None = None,
          cost_model: Any = None, config: Any = None,
          _whole_graph: bool = False,
          graph_types: dict[str, set[str]] | None = None) -> dict[str, Any]:
    """Assign ``node.assigned_device`` for every node; returns ``{name: Device}``.

    :param devices: every device the session may use (their ``name`` is canonical)
    :param placer: ``"simple"`` (default) or ``"cost_model"``; when None, taken from
        ``config.experimental.placer``
    :param cost_model: the session's :class:`~flowrt.cost_model.CostModel` (it holds
        measured node times); a fresh one when None
    :param config: the session's ``ConfigProto`` (only read for the placer)
    :param graph_types: ``{node name: device types}`` the node's group must also allow:
        the kernel types of the ops in the whole graph colocated with it (a variable's
        updates in other steps), so that every step puts a variable on the same device
        type, as TF's placer of the whole graph does
    :raises InvalidArgumentError: when a constraint cannot be met, naming the node,
        the requested device and the available devices or kernel device types, or for
        an unknown placer name
    """
    kind = _check_placer(placer) if placer is not None else placer_from_config(config)
    by_type: dict[str, list[Any]] = {}
    for d in devices:
        by_type.setdefault(d.device_type, []).append(d)
    type_priority = {t: getattr(runtime.device_types.get(t), "priority", 0) for t in by_type}
    full = {d.name: DeviceSpec.from_string(d.name) for d in devices}

    uf = _UnionFind()
    # Nodes joined to a group only through a reference or resource input: as in TF's
    # placer, their own device request gives way to the reference's ("Ignoring device
    # specification ... because the input edge ... is a reference connection").
    ref_followers: set[str] = set()
    for node in ir.nodes.values():
        uf.find(node.name)
        for loc in node.node_attrs.get("_class", ()) or ():
            loc = loc.decode() if isinstance(loc, bytes) else loc
            if loc.startswith("loc:@"):
                other = loc[5:]
                if other in ir.nodes:
                    uf.union(other, node.name)
        # ops consuming a reference live with the variable
        if node.op_def is not None and node.inputs:
            for k, ((src, _), arg) in enumerate(zip(node.inputs, node.input_args())):
                if src not in ir.nodes or ir.nodes[src].type == ARG_OP:
                    continue
                if arg.is_ref or _is_resource(node, k):
                    # (a resource handle, like a queue's, is only valid on its device)
                    uf.union(src, node.name)
                    ref_followers.add(node.name)
    groups: dict[str, list[Node]] = {}
    for node in ir.nodes.values():
        groups.setdefault(uf.find(node.name), []).append(node)

    placed: dict[str, Any] = {}
    allowed: dict[str, list[Any]] = {}
    for root, members in groups.items():
        # merge the group's requests; conflicting explicit requests are an error
        spec = DeviceSpec()
        # (reference followers last: a request of theirs that conflicts is ignored)
        for n in sorted(members, key=lambda m: m.name in ref_followers):
            s = _spec(n)
            follower = n.name in ref_followers
            if follower and any(getattr(spec, f) is not None and getattr(s, f) is not None
                                and getattr(spec, f) != getattr(s, f)
                                for f in DeviceSpec.__slots__):
                continue
            for f in DeviceSpec.__slots__:
                v = getattr(s, f)
                if v is None:
                    continue
                cur = getattr(spec, f)
                if cur is not None and cur != v and not allow_soft:
                    raise errors.InvalidArgumentError(
                        None, n.source_op,
                        f"Cannot colocate nodes {members[0].name!r} and {n.name!r}: their "
                        f"devices conflict ({spec} vs {s}). Colocation group members: "
                        f"{[m.name for m in members][:8]}")
                if cur is None:
                    setattr(spec, f, v)
        kernel_types = None
        for n in members:
            if n.type == ARG_OP:
                continue
            ts = set(runtime.kernel_device_types(n.type, n.node_attrs))
            if graph_types and n.name in graph_types and ts & graph_types[n.name]:
                ts &= graph_types[n.name]
            kernel_types = ts if kernel_types is None else kernel_types & ts
            if not ts:
                raise errors.InvalidArgumentError(
                    None, n.source_op,
                    f"No kernel is registered for op '{n.type}' (node '{n.name}') on any "
                    f"device type. Device types present: {sorted(by_type)}.")
        candidates = [d for d in devices if spec.is_compatible_with(full[d.name])
                      and (kernel_types is None or d.device_type in kernel_types)]
        if not candidates:
            matching = [d.name for d in devices if spec.is_compatible_with(full[d.name])]
            first = members[0]
            if not matching:
                why = (f"no devices matching that specification are available. "
                       f"Available devices: {[d.name for d in devices]}"
                       f"{runtime.placement_notes(spec.device_type)}")
            else:
                why = (f"no supported kernel for {spec.device_type or 'those'} devices is "
                       f"available. Device types with kernels for the group: "
                       f"{sorted(kernel_types or [])}")
            if not allow_soft:
                raise errors.InvalidArgumentError(
                    None, first.source_op,
                    f"Cannot assign a device for operation {first.name}: Could not satisfy "
                    f"explicit device specification '{spec}' because {why}. (Set "
                    "allow_soft_placement=True in ConfigProto to fall back.)")
            # soft placement: keep job/task if possible, drop the device type/index
            soft = DeviceSpec(spec.job, spec.replica, spec.task)
            candidates = [d for d in devices if soft.is_compatible_with(full[d.name])
                          and (kernel_types is None or d.device_type in kernel_types)]
            if not candidates:
                candidates = [d for d in devices
                              if kernel_types is None or d.device_type in kernel_types]
            if not candidates:
                raise errors.InvalidArgumentError(
                    None, first.source_op, f"Cannot assign a device for operation "
                    f"{first.name}: no device has a kernel for it (kernel device types: "
                    f"{sorted(kernel_types or [])}).")
        if default_job is not None and spec.job is None:
            pref = [d for d in candidates if full[d.name].job == default_job and
                    (default_task is None or full[d.name].task == default_task)]
            candidates = pref or candidates
        allowed[root] = candidates

    def preference(d: Any) -> tuple[int, int]:  # smaller is preferred
        return (-type_priority.get(d.device_type, 0), d.index)

    if kind == "cost_model" and any(len(c) > 1 for c in allowed.values()):
        choice = _cost_model_choice(ir, groups, allowed, devices, runtime, preference,
                                    cost_model, default_job, default_task, _whole_graph)
    else:
        choice = {root: min(c, key=preference) for root, c in allowed.items()}
    for root, members in groups.items():
        best = choice[root]
        for n in members:
            n.assigned_device = best.name
            placed[n.name] = best
    if log:

        for n in ir.nodes.values():
            print(f"{n.name}: ({n.type}): {n.assigned_device}", file=sys.stderr)
    return placed


def _is_resource(node: Node, k: int) -> bool:
    try:
        return node.in_dtypes[k].base_dtype == _dtypes.resource
    except (IndexError, AttributeError):
        return False


def _cost_model_choice(ir: GraphIR, groups: dict[str, list[Node]],
                       allowed: dict[str, list[Any]], devices: Sequence[Any], runtime: Any,
                       preference: Any, cost_model: Any,
                       default_job: str | None, default_task: int | None,
                       whole_graph: bool) -> dict[str, Any]:
    """The cost-model placer's device for every group.

    Stateful nodes (variables, queues, random ops) must keep their device across the
    steps of a session, or a later step would find a fresh, uninitialized resource on
    another device. The first time a step has a stateful node the cost model has not
    placed yet, the whole graph is placed (as TensorFlow places the full graph once per
    session), and the device of every stateful node is remembered in the cost model;
    later steps keep those devices.
    """

    cm = cost_model if cost_model is not None else default_cost_model(ir, devices)
    stateful = {root for root, members in groups.items()
                if any(n.is_stateful for n in members)}

    def unpinned() -> bool:
        return any(not any(n.name in cm.pins for n in groups[r]) for r in stateful)

    if stateful and not whole_graph and unpinned():
        _place_whole_graph(ir, devices, runtime, cm, default_job, default_task)
    restricted = dict(allowed)
    for root in stateful:
        want = {cm.pins[n.name] for n in groups[root] if n.name in cm.pins}
        match = [d for d in allowed[root] if d.name in want]
        if match:
            restricted[root] = [min(match, key=preference)]
    group_of = {n.name: root for root, members in groups.items() for n in members}
    follow = {r for r in stateful if len(restricted[r]) > 1}
    choice = place_groups(ir, group_of, restricted, cm, preference, runtime, follow)
    for root in stateful:
        for n in groups[root]:
            if n.is_stateful:
                cm.pins[n.name] = choice[root].name
    return choice


def _place_whole_graph(ir: GraphIR, devices: Sequence[Any], runtime: Any, cm: Any,
                       default_job: str | None, default_task: int | None) -> None:
    """Run the cost-model placer on every op of the step's graph (pinning its stateful
    nodes in ``cm``); once per graph version."""
    graph = next((getattr(n.source_op, "graph", None) for n in ir.nodes.values()
                  if n.source_op is not None), None)
    if graph is None:
        return
    stamp = (id(graph), getattr(graph, "version", None))
    if cm.whole_graph_stamp == stamp:
        return
    cm.whole_graph_stamp = stamp
    try:
        full = extract_step_graph(graph, [], [], list(graph.get_operations()))
        place(full, devices, runtime, allow_soft=True, default_job=default_job,
              default_task=default_task, placer="cost_model", cost_model=cm,
              _whole_graph=True)
    except errors.OpError:
        pass  # a part of the graph this step does not use cannot be placed: skip it
