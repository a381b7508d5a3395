"""Cost estimates for placement: how long a node runs on a device, how long its inputs
take to arrive, and the greedy cost-model placer that uses them.

A node's compute cost comes from its static shapes -- a FLOP count for dense math
(MatMul ``2*m*n*k``, convolutions, Einsum), the number of elements touched for
elementwise ops, reductions and data movement, nothing for metadata ops -- divided by
the device type's speed (:class:`DeviceProfile`), plus a fixed per-op dispatch cost.
Unknown dimensions count as :attr:`CostModel.default_dim`. Once a traced run has
measured a node (:meth:`CostModel.record_step_stats`), the measurement replaces the
estimate. Moving a tensor between devices costs a link latency plus its bytes over the
link's bandwidth (:class:`LinkProfile`); two CPU devices of one process have a small
but nonzero link, so a chain of ops stays on one device.

:func:`greedy_place` is the placer of the TensorFlow white paper (section 3.2.1): it
simulates the step in the order nodes become ready and puts every node (every
colocation group, as a unit) on the allowed device where it would finish soonest.
"""
from __future__ import annotations

import heapq
import threading
import weakref
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..base.device_spec import DeviceSpec

__all__ = ["CostModel", "DeviceProfile", "LinkProfile", "greedy_place", "place_groups",
           "simulate", "Schedule", "default_cost_model"]


class DeviceProfile:
    """How fast one device type runs kernels.

    :param flops: floating-point operations per second of dense math (matmul, conv)
    :param elements: elements per second of memory-bound work (elementwise ops,
        reductions, copies)
    :param op_overhead: seconds of fixed cost per kernel launch. The simulation also
        charges it to the interpreter of the device's process, which all devices of
        that process share: dispatch work is serialized whichever device a node is
        on, so spreading cheap ops over devices gains nothing.
    """

    __slots__ = ("flops", "elements", "op_overhead")

    def __init__(self, flops: float, elements: float, op_overhead: float):
        self.flops, self.elements, self.op_overhead = float(flops), float(elements), \
            float(op_overhead)

    def __repr__(self) -> str:
        return (f"DeviceProfile(flops={self.flops:g}, elements={self.elements:g}, "
                f"op_overhead={self.op_overhead:g})")


class LinkProfile:
    """A connection between two devices: ``latency`` seconds per tensor plus its bytes
    divided by ``bandwidth`` (bytes per second)."""

    __slots__ = ("latency", "bandwidth")

    def __init__(self, latency: float, bandwidth: float):
        self.latency, self.bandwidth = float(latency), float(bandwidth)

    def cost(self, nbytes: float) -> float:
        """Seconds to move ``nbytes`` over the link."""
        return self.latency + nbytes / self.bandwidth

    def __repr__(self) -> str:
        return f"LinkProfile(latency={self.latency:g}, bandwidth={self.bandwidth:g})"


#: Defaults per device type; a device type may carry its own as ``cost_profile``.
#: CPU: one core running numpy with one BLAS thread (~50 GFLOP/s dense float32).
DEFAULT_PROFILES: dict[str, DeviceProfile] = {
    "CPU": DeviceProfile(flops=5e10, elements=2e9, op_overhead=3e-6),
    "GPU": DeviceProfile(flops=1e13, elements=2e11, op_overhead=1e-5),
}

# Ops that only describe or alias their input: no data work at all.
_FREE_OPS = frozenset({
    "_Arg", "_Retval", "Const", "Placeholder", "PlaceholderV2", "PlaceholderWithDefault",
    "VariableV2", "Variable", "VarHandleOp", "NoOp", "Identity", "IdentityN",
    "StopGradient", "PreventGradient", "Reshape", "ExpandDims", "Squeeze", "Shape",
    "ShapeN", "Rank", "Size", "IsVariableInitialized", "BroadcastGradientArgs",
    "BroadcastArgs", "FIFOQueue", "FIFOQueueV2", "PaddingFIFOQueue", "PaddingFIFOQueueV2",
    "RandomShuffleQueue", "RandomShuffleQueueV2", "ConditionalAccumulator",
    "ResourceConditionalAccumulator", "_Send", "_Recv", "_HostSend", "_HostRecv",
})

# Elementwise ops costing several times a plain add per element.
_TRANSCENDENTAL = frozenset({
    "Exp", "Expm1", "Log", "Log1p", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Atan2",
    "Sinh", "Cosh", "Tanh", "Asinh", "Acosh", "Atanh", "Sigmoid", "Erf", "Erfc", "Lgamma",
    "Digamma", "Polygamma", "Zeta", "Pow", "Softplus", "Elu", "Selu", "Softmax",
    "LogSoftmax", "SoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits",
    "RandomStandardNormal", "TruncatedNormal", "RandomGamma", "Multinomial", "Xlogy",
    "Rsqrt", "Sqrt", "TanhGrad", "SigmoidGrad",
})
_TRANSCENDENTAL_WEIGHT = 4.0

# Measured times of these are waiting or bookkeeping, not work.
_NOT_WORK = frozenset({"_Arg", "_Retval", "_Send", "_Recv", "_HostSend", "_HostRecv"})


def _attr(node: Any, name: str, default: Any = None) -> Any:
    v = node.node_attrs.get(name, default)
    return v.decode() if isinstance(v, bytes) else v


def _dims(shape: Any) -> tuple[int | None, ...] | None:
    if shape is None:
        return None
    t = getattr(shape, "as_tuple", None)
    if t is not None:
        return t()
    return tuple(shape)


class CostModel:
    """Per-session cost estimates, refined by measured node durations.

    :param profiles: ``{device type: DeviceProfile}`` overriding :data:`DEFAULT_PROFILES`
    :param default_dim: the size assumed for an unknown dimension (an unknown rank
        counts as a matrix of ``default_dim x default_dim``)
    :param local_link: two CPU devices in one process (no copy, but a Send/Recv pair
        and a hop between partitions)
    :param host_link: a host <-> accelerator copy, or accelerator <-> accelerator of
        one task
    :param network_link: devices of different tasks
    :param min_gain: a node leaves its preferred device (where its inputs are, else the
        highest-priority one) only if another device finishes it at least this many
        seconds sooner; defaults to the local link's latency
    :param history: measured durations kept per node (their median is used)
    :param light_op: ops estimated to take at most this many seconds hold the
        interpreter for their whole run (numpy releases the GIL only for bigger
        arrays), so they gain nothing from running on another device of the process
    """

    def __init__(self, profiles: Mapping[str, DeviceProfile] | None = None,
                 default_dim: int = 64,
                 local_link: LinkProfile | None = None,
                 host_link: LinkProfile | None = None,
                 network_link: LinkProfile | None = None,
                 min_gain: float | None = None, history: int = 16,
                 light_op: float = 1e-5):
        """See the class docstring; each link left out gets the default of its kind."""
        self.profiles = dict(DEFAULT_PROFILES)
        if profiles:
            self.profiles.update(profiles)
        self.default_dim = int(default_dim)
        self.local_link = local_link or LinkProfile(latency=2e-5, bandwidth=2e10)
        self.host_link = host_link or LinkProfile(latency=1e-5, bandwidth=1.2e10)
        self.network_link = network_link or LinkProfile(latency=2e-4, bandwidth=1e9)
        self.min_gain = self.local_link.latency if min_gain is None else float(min_gain)
        self.history = int(history)
        self.light_op = float(light_op)
        #: ``{(node name, shape key): {device type: [seconds, ...]}}``
        self._measured: dict[tuple[str, Any], dict[str, list[float]]] = {}
        self._lock = threading.Lock()
        self._link_kind: dict[tuple[str, str], str] = {}
        #: ``{stateful node name: device name}``: where the placer put each stateful
        #: node, kept for every later step of the session
        self.pins: dict[str, str] = {}
        #: the (graph, version) whose whole-graph placement produced the pins
        self.whole_graph_stamp: Any = None
        #: bumped whenever measurements change (a cached placement may be stale)
        self.version = 0

    # -- shapes -------------------------------------------------------------------------
    def _resolve(self, dims: tuple[int | None, ...] | None) -> tuple[int, ...]:
        if dims is None:
            return (self.default_dim, self.default_dim)
        return tuple(self.default_dim if d is None else int(d) for d in dims)

    def num_elements(self, shape: Any) -> int:
        """Elements of ``shape``; unknown dims count as :attr:`default_dim`."""
        n = 1
        for d in self._resolve(_dims(shape)):
            n *= d
        return n

    def output_bytes(self, node: Any, index: int = 0) -> int:
        """Bytes of ``node``'s output ``index`` as estimated from its static shape."""
        try:
            shape = node.out_shapes[index]
            dtype = node.out_dtypes[index]
        except (IndexError, AttributeError):
            return 0
        try:
            size = int(dtype.size)
        except Exception:  # strings and other types without a fixed width
            size = 16
        return self.num_elements(shape) * max(size, 1)

    # -- compute --------------------------------------------------------------------------
    def work(self, node: Any) -> tuple[float, float]:
        """``(flops, elements)``: the node's dense math and memory-bound work."""
        op = node.type
        if op in _FREE_OPS:
            return 0.0, 0.0
        ins = [self._resolve(_dims(s)) for s in (node.in_shapes or ())]
        outs = [self._resolve(_dims(s)) for s in (node.out_shapes or ())]
        out_el = float(sum(_prod(s) for s in outs))
        in_el = float(sum(_prod(s) for s in ins))
        try:
            flops = self._flops(node, ins, outs)
        except (IndexError, ValueError, TypeError, KeyError):
            flops = None
        if flops is not None:
            return float(flops), in_el + out_el
        if op in _TRANSCENDENTAL:
            return 0.0, _TRANSCENDENTAL_WEIGHT * max(in_el, out_el)
        # elementwise, reductions (input-sized), data movement: the bigger side
        return 0.0, max(in_el, out_el)

    def _flops(self, node: Any, ins: list[tuple[int, ...]],
               outs: list[tuple[int, ...]]) -> float | None:
        """The dense-math flops of ``node`` given its resolved input and output shapes;
        None for ops that are not dense math (:meth:`work` then counts elements)."""
        op = node.type
        if op == "MatMul":
            a = ins[0]
            k = a[0] if _attr(node, "transpose_a", False) else a[-1]
            return 2.0 * _prod(outs[0]) * k
        if op in ("BatchMatMul", "BatchMatMulV2"):
            a = ins[0]
            k = a[-2] if _attr(node, "adj_x", False) else a[-1]
            return 2.0 * _prod(outs[0]) * k
        if op == "Conv2D":  # filter [h, w, in, out]
            f = ins[1]
            return 2.0 * _prod(outs[0]) * f[0] * f[1] * f[2]
        if op == "Conv2DBackpropInput":  # (input_sizes, filter, out_backprop)
            f = ins[1]
            return 2.0 * _prod(ins[2]) * f[0] * f[1] * f[2]
        if op == "Conv2DBackpropFilter":  # (input, filter_sizes, out_backprop)
            f = outs[0]
            return 2.0 * _prod(ins[2]) * f[0] * f[1] * f[2]
        if op in ("MaxPool", "AvgPool", "MaxPoolGrad", "AvgPoolGrad", "MaxPoolGradGrad"):
            k = _attr(node, "ksize", None) or [1]
            return float(_prod(outs[0]) * _prod(tuple(int(x) for x in k)))
        if op == "Einsum":
            return self._einsum_flops(str(_attr(node, "equation", "")), ins)
        return None

    def _einsum_flops(self, equation: str, ins: list[tuple[int, ...]]) -> float | None:
        """Flops of an ``Einsum``: two per point of the product of every index's size
        (contracted ones included); None if the equation does not match the inputs."""
        lhs = equation.replace(" ", "").split("->")[0]
        terms = lhs.split(",")
        if len(terms) != len(ins):
            return None
        size: dict[str, int] = {}
        for term, shape in zip(terms, ins):
            letters = term.replace("...", "")
            n_ell = len(shape) - len(letters)
            it = iter(shape)
            if "..." in term:
                head, tail = term.split("...")
                for ch in head:
                    size[ch] = next(it)
                for i in range(n_ell):
                    size[f"...{i}"] = next(it)
                for ch in tail:
                    size[ch] = next(it)
            else:
                for ch in term:
                    size[ch] = next(it)
        return 2.0 * _prod(tuple(size.values()))

    def profile(self, device_type: str, runtime: Any = None) -> DeviceProfile:
        """The speed profile of ``device_type`` (a device type's own ``cost_profile``
        attribute wins; unknown types run like a CPU)."""
        if runtime is not None:
            dt = getattr(runtime, "device_types", {}).get(device_type)
            p = getattr(dt, "cost_profile", None)
            if isinstance(p, DeviceProfile):
                return p
        return self.profiles.get(device_type) or self.profiles["CPU"]

    def estimate(self, node: Any, device_type: str, runtime: Any = None) -> float:
        """Seconds ``node`` takes on a ``device_type`` device, from its static shapes."""
        p = self.profile(device_type, runtime)
        flops, elements = self.work(node)
        return p.op_overhead + flops / p.flops + elements / p.elements

    def compute_cost(self, node: Any, device_type: str, runtime: Any = None) -> float:
        """Seconds ``node`` takes on a ``device_type`` device: the median measured time
        when a traced run measured it (on another device type: scaled by the ratio of
        the two estimates), else :meth:`estimate`."""
        m = self.measured(node, device_type)
        if m is not None:
            return m
        if self._measured:
            with self._lock:
                other = self._lookup(node)
            if other:
                t, vals = next(iter(sorted(other.items())))
                est_here = self.estimate(node, device_type, runtime)
                est_there = self.estimate(node, t, runtime)
                return _median(vals) * (est_here / est_there if est_there > 0 else 1.0)
        return self.estimate(node, device_type, runtime)

    # -- transfers ------------------------------------------------------------------------
    def link(self, src: Any, dst: Any) -> LinkProfile | None:
        """The link between two devices (objects with ``name`` and ``device_type``, or
        device names); None for the same device."""
        sn, dn = _name(src), _name(dst)
        if sn == dn:
            return None
        key = (sn, dn)
        kind = self._link_kind.get(key)
        if kind is None:
            a, b = DeviceSpec.from_string(sn), DeviceSpec.from_string(dn)
            if (a.job, a.replica or 0, a.task or 0) != (b.job, b.replica or 0,
                                                        b.task or 0):
                kind = "network"
            elif a.device_type == "CPU" and b.device_type == "CPU":
                kind = "local"
            else:
                kind = "host"
            self._link_kind[key] = kind
        return {"network": self.network_link, "local": self.local_link,
                "host": self.host_link}[kind]

    def transfer_cost(self, nbytes: float, src: Any, dst: Any) -> float:
        """Seconds to move ``nbytes`` from device ``src`` to device ``dst`` (0 when they
        are the same device)."""
        ln = self.link(src, dst)
        return 0.0 if ln is None else ln.cost(nbytes)

    # -- measurements ---------------------------------------------------------------------
    @staticmethod
    def shape_key(node: Any) -> tuple[Any, ...]:
        """The static shapes a measurement of ``node`` is valid for."""
        return tuple(_dims(s) for s in (node.in_shapes or ())) + \
            ("->",) + tuple(_dims(s) for s in (node.out_shapes or ()))

    def _lookup(self, node: Any) -> dict[str, list[float]] | None:
        return (self._measured.get((node.name, self.shape_key(node)))
                or self._measured.get((node.name, None)))

    def measured(self, node: Any, device_type: str) -> float | None:
        """The median measured seconds of ``node`` on ``device_type``, if any."""
        if not self._measured:
            return None
        with self._lock:
            rec = self._lookup(node)
            vals = rec.get(device_type) if rec else None
            return _median(vals) if vals else None

    def record(self, node_name: str, shape_key: Any, device_type: str,
               seconds: float) -> None:
        """Remember one measured duration of ``node_name`` (with static shapes
        ``shape_key``, see :meth:`shape_key`; None matches any) on ``device_type``."""
        with self._lock:
            vals = self._measured.setdefault((node_name, shape_key), {}).setdefault(
                device_type, [])
            vals.append(max(0.0, float(seconds)))
            if len(vals) > self.history:
                del vals[0]
            self.version += 1

    def record_step_stats(self, stats: Iterable[Any], nodes: Any = None) -> int:
        """Feed a traced run's per-node timings into the model; returns how many were
        recorded.

        :param stats: :class:`~flowrt.executor.NodeStat` records (``node_name``, ``op``,
            ``device``, ``start``, ``end`` in seconds), or a ``RunMetadata`` /
            ``StepStats`` proto as a traced ``Session.run`` fills it
        :param nodes: the step's graph -- a GraphIR, a ``{name: Node}`` mapping or a
            sequence of GraphIRs (partitions) -- so measurements are keyed by the nodes'
            static shapes; without it they match any shapes
        """
        by_name: dict[str, Any] = {}
        if nodes is not None:
            if hasattr(nodes, "nodes"):
                by_name = dict(nodes.nodes)
            elif isinstance(nodes, Mapping):
                by_name = dict(nodes)
            else:
                for g in nodes:
                    by_name.update(getattr(g, "ir", g).nodes)
        if hasattr(stats, "step_stats"):  # RunMetadata
            stats = stats.step_stats
        if hasattr(stats, "dev_stats"):  # StepStats
            stats = list(_from_step_stats(stats))
        n = 0
        for st in stats:
            if (getattr(st, "op", "") or "") in _NOT_WORK:
                continue
            node = by_name.get(st.node_name)
            key = self.shape_key(node) if node is not None else None
            try:
                dtype = DeviceSpec.from_string(st.device).device_type or "CPU"
            except ValueError:
                dtype = "CPU"
            self.record(st.node_name, key, dtype, st.end - st.start)
            n += 1
        return n

    def clear_measurements(self) -> None:
        """Forget every measured duration (estimates only, from now on)."""
        with self._lock:
            self._measured.clear()
            self.version += 1


class _Stat:
    __slots__ = ("node_name", "op", "device", "start", "end")

    def __init__(self, node_name: str, op: str, device: str, start: float, end: float):
        self.node_name, self.op, self.device = node_name, op, device
        self.start, self.end = start, end


def _from_step_stats(step_stats: Any) -> Iterable[_Stat]:
    """NodeStat-like records from a ``StepStats`` proto."""
    for ds in step_stats.dev_stats:
        for ns in ds.node_stats:
            label = ns.timeline_label
            op = label.split(" = ", 1)[1].split("(", 1)[0] if " = " in label else ""
            if ns.all_end_rel_nanos:
                dur = ns.all_end_rel_nanos * 1e-9
            else:
                dur = (ns.op_end_rel_micros or ns.all_end_rel_micros) * 1e-6
            yield _Stat(ns.node_name, op, ds.device, 0.0, dur)


def _prod(s: Sequence[int]) -> int:
    n = 1
    for d in s:
        n *= int(d)
    return n


def _median(vals: Sequence[float]) -> float:
    v = sorted(vals)
    m = len(v) // 2
    return v[m] if len(v) % 2 else 0.5 * (v[m - 1] + v[m])


def _name(d: Any) -> str:
    return d if isinstance(d, str) else d.name



# -- the greedy simulation ------------------------------------------------------------------
class Schedule:
    """The outcome of a simulated step.

    :ivar device: ``{node name: Device}``
    :ivar start, finish: ``{node name: seconds}`` in simulated time
    :ivar makespan: when the last node finishes
    :ivar busy: ``{device name: seconds of compute}``
    """

    def __init__(self) -> None:
        self.device: dict[str, Any] = {}
        self.start: dict[str, float] = {}
        self.finish: dict[str, float] = {}
        self.busy: dict[str, float] = {}
        self.makespan = 0.0


def greedy_place(ir: Any, group_of: Mapping[str, str],
                 candidates: Mapping[str, Sequence[Any]], cost_model: CostModel,
                 preference: Callable[[Any], Any], runtime: Any = None,
                 fixed: Mapping[str, Any] | None = None) -> Schedule:
    """Choose a device for every colocation group by simulated execution.

    Nodes are visited in the order their inputs become ready (simulated time, ties in
    graph order). A node whose group already has a device runs there. Otherwise every
    candidate device ``d`` of its group is tried: the node could start once ``d`` is free
    and every input has arrived (its producer's finish time, plus the transfer cost when
    the producer is on another device), and would finish after its compute cost on
    ``d``. The group goes to the preferred device (most input bytes already there, then
    ``preference``, smaller first) unless another finishes the node more than
    ``cost_model.min_gain`` sooner, in which case it goes to the earliest finisher.

    A group whose first ready node has no inputs (constants, feeds, variables), or only
    does metadata work on undecided inputs (a variable's read, a reshape), is not
    decided at that point: it follows its first consumer, so sources do not scatter.

    The devices of one process share its interpreter: every node holds it for its
    dispatch overhead (a light op, for its whole run) and every new transfer for the
    link latency, so cheap work gains nothing from another device. A tensor moves to a
    device once, however many consumers it has there.

    :param group_of: ``{node name: group key}``
    :param candidates: ``{group key: [Device, ...]}`` the devices each group may use
    :param preference: sort key for devices, smaller preferred (e.g. ``(-priority,
        index)``)
    :param fixed: ``{node name: Device}`` to simulate a given placement instead
    :returns: the :class:`Schedule`; ``schedule.device`` has every node
    """
    nodes = ir.nodes
    order_index = {name: i for i, name in enumerate(nodes)}
    preds: dict[str, list[tuple[str, int]]] = {}
    ctrl: dict[str, list[str]] = {}
    succs: dict[str, list[str]] = {name: [] for name in nodes}
    indeg: dict[str, int] = {}
    for name, node in nodes.items():
        data = [(s, i) for s, i in node.inputs if s in nodes]
        cs = [c for c in node.control_inputs if c in nodes]
        preds[name], ctrl[name] = data, cs
        deps = {s for s, _ in data} | set(cs)
        indeg[name] = len(deps)
        for s in deps:
            succs[s].append(name)

    sched = Schedule()
    avail: dict[str, float] = {}  # device name -> when it is free
    host: dict[str, float] = {}  # process -> when its interpreter is free
    group_dev: dict[str, Any] = {}
    if fixed is not None:
        for name in nodes:
            if name in fixed:
                group_dev.setdefault(group_of[name], fixed[name])
    for name in nodes:  # a group with one candidate has nothing to decide
        g = group_of[name]
        if g not in group_dev and len(candidates[g]) == 1:
            group_dev[g] = candidates[g][0]
    virtual: dict[str, list[str]] = {}  # undecided source group -> its visited nodes
    dtype_of = lambda d: getattr(d, "device_type", "CPU")  # noqa: E731
    cost_cache: dict[tuple[str, str], float] = {}

    def cost(node: Any, d: Any) -> float:
        key = (node.name, dtype_of(d))
        c = cost_cache.get(key)
        if c is None:
            c = cost_cache[key] = cost_model.compute_cost(node, dtype_of(d), runtime)
        return c

    def overhead(d: Any) -> float:
        return cost_model.profile(dtype_of(d), runtime).op_overhead

    nbytes_cache: dict[tuple[str, int], int] = {}

    def nbytes(s: str, i: int) -> int:
        b = nbytes_cache.get((s, i))
        if b is None:
            b = nbytes_cache[(s, i)] = cost_model.output_bytes(nodes[s], i)
        return b

    received: dict[tuple[str, int, str], float] = {}  # (tensor, device) -> arrival

    def arrival(name: str, d: Any) -> tuple[float, float]:
        """When all of ``name``'s inputs are available on ``d``, and the interpreter time
        the new transfers this needs take (a ``_Send``/``_Recv`` pair in this process)."""
        t = work = 0.0
        for s, i in preds[name]:
            sd = sched.device.get(s)
            ready = sched.finish[s]
            if sd is not None and sd.name != d.name:
                got = received.get((s, i, d.name))
                if got is not None:
                    ready = got
                else:
                    ready += cost_model.transfer_cost(nbytes(s, i), sd, d)
                    if host_of(sd) == host_of(d):
                        work += cost_model.link(sd, d).latency  # type: ignore[union-attr]
            t = max(t, ready)
        for c in ctrl[name]:
            cd = sched.device.get(c)
            ready = sched.finish[c]
            if cd is not None and _name(cd) != _name(d):
                ready += cost_model.transfer_cost(0, cd, d)
            t = max(t, ready)
        return t, work

    def host_of(d: Any) -> str:
        """The process driving ``d``: its name up to the device part."""
        n = _name(d)
        i = n.find("/device:")
        return n[:i] if i >= 0 else n

    def timing(name: str, d: Any) -> tuple[float, float, float]:
        """``(dispatch, start, finish)`` of ``name`` if it ran on ``d`` now: dispatched
        once its inputs are there and the process's interpreter is free (after running
        any transfers), started once ``d`` is free as well."""
        ready, xfer = arrival(name, d)
        dispatch = max(ready, host.get(host_of(d), 0.0) + xfer)
        start = max(dispatch, avail.get(d.name, 0.0))
        return dispatch, start, start + cost(nodes[name], d)

    def run_on(name: str, d: Any) -> None:
        dispatch, start, finish = timing(name, d)
        c = finish - start
        sched.device[name] = d
        sched.start[name] = start
        sched.finish[name] = finish
        avail[d.name] = finish
        for s, i in preds[name]:
            sd = sched.device.get(s)
            if sd is not None and sd.name != d.name:
                received.setdefault((s, i, d.name), dispatch)
        # the interpreter of the process is held for the dispatch overhead whichever
        # device the node is on -- and for the whole of a light op, as numpy keeps the
        # interpreter lock on small arrays: spreading cheap ops gains nothing
        held = c if c <= cost_model.light_op else min(overhead(d), c)
        host[host_of(d)] = dispatch + held
        sched.busy[d.name] = sched.busy.get(d.name, 0.0) + c

    def resolve(g: str, d: Any) -> None:
        group_dev[g] = d
        for v in virtual.pop(g, ()):
            sched.device[v] = d

    def choose(name: str, g: str) -> Any:
        cands = candidates[g]
        if len(cands) == 1:
            return cands[0]
        node = nodes[name]
        local: dict[str, float] = {}
        for s, i in preds[name]:
            sd = sched.device.get(s)
            if sd is not None:
                local[sd.name] = local.get(sd.name, 0.0) + nbytes(s, i)
        fin = {d.name: timing(name, d)[2] for d in cands}
        best = min(fin.values())
        ranked = sorted(cands, key=lambda d: (-local.get(d.name, 0.0), preference(d)))
        pref = ranked[0]
        if fin[pref.name] <= best + cost_model.min_gain:
            return pref
        return min(cands, key=lambda d: (fin[d.name], preference(d)))

    def is_virtual(s: str) -> bool:
        return s not in sched.device

    def resolve_inputs(stack: list[tuple[str, Any]]) -> None:
        """Put the undecided producers feeding each ``(node, its device)`` next to it."""
        while stack:
            m, dm = stack.pop()
            for s in [p for p, _ in preds[m]] + ctrl[m]:
                if not is_virtual(s):
                    continue
                gs = group_of[s]
                cs_ = candidates[gs]
                target = dm if any(x.name == dm.name for x in cs_) else min(
                    cs_, key=preference)
                members = virtual.get(gs, [])
                resolve(gs, target)
                stack.extend((v, target) for v in members)

    heap: list[tuple[float, int, str]] = [(0.0, order_index[n], n) for n in nodes
                                          if indeg[n] == 0]
    heapq.heapify(heap)
    seen = 0
    while heap:
        _, _, name = heapq.heappop(heap)
        seen += 1
        node = nodes[name]
        g = group_of[name]
        d = group_dev.get(g)
        deps = [s for s, _ in preds[name]] + ctrl[name]
        if d is None and all(is_virtual(s) for s in deps) and (
                not deps or cost_model.work(node) == (0.0, 0.0)):
            # a source, or a free op (read, reshape) of undecided sources: decided by
            # whoever consumes it first
            virtual.setdefault(g, []).append(name)
            c0 = min(cost(node, x) for x in candidates[g])
            t0 = max([sched.finish[s] for s in deps] + [0.0])
            sched.start[name], sched.finish[name] = t0, t0 + c0
        else:
            todo = [(name, d)]
            if d is None:
                d = choose(name, g)
                todo = [(m, d) for m in [name] + virtual.get(g, [])]
                resolve(g, d)
            run_on(name, d)
            resolve_inputs(todo)
        for c in succs[name]:
            indeg[c] -= 1
            if indeg[c] == 0:
                t = max([sched.finish[s] for s, _ in preds[c]] +
                        [sched.finish[s] for s in ctrl[c]] + [0.0])
                heapq.heappush(heap, (t, order_index[c], c))
    if seen < len(nodes):  # a cycle: leave the rest to the default choice
        for name in nodes:
            if name not in sched.finish:
                sched.finish[name] = sched.start[name] = 0.0
    for name in nodes:
        if name not in sched.device:
            g = group_of[name]
            d = group_dev.get(g)
            if d is None:
                d = min(candidates[g], key=preference)
                group_dev[g] = d
            sched.device[name] = d
    sched.makespan = max(sched.finish.values(), default=0.0)
    return sched


def simulate(ir: Any, placement: Mapping[str, Any], cost_model: CostModel | None = None,
             runtime: Any = None) -> Schedule:
    """Simulate a step with a given placement (``{node name: Device}``)."""
    cm = cost_model or CostModel()
    group_of = {n: n for n in ir.nodes}
    cands = {n: [placement[n]] for n in ir.nodes}
    return greedy_place(ir, group_of, cands, cm, lambda d: (0,), runtime, fixed=placement)


def place_groups(ir: Any, group_of: Mapping[str, str],
                 candidates: Mapping[str, Sequence[Any]], cost_model: CostModel,
                 preference: Callable[[Any], Any], runtime: Any = None,
                 follow: Iterable[str] = ()) -> dict[str, Any]:
    """``{group key: Device}`` by :func:`greedy_place`.

    Groups in ``follow`` (variables and other state) go where the work that uses them
    runs: a first simulation places their members one by one; each such group then
    takes the candidate device where its members and their consumers spend the most
    estimated compute time, and a second simulation places everything else around it.
    Without this a variable would be decided by its cheapest node (its initializer).
    """
    follow = set(follow)
    if follow:
        g1: dict[str, Any] = {n: (("node", n) if group_of[n] in follow else
                                  ("group", group_of[n])) for n in ir.nodes}
        c1: dict[Any, Sequence[Any]] = {g1[n]: candidates[group_of[n]] for n in ir.nodes}
        s1 = greedy_place(ir, g1, c1, cost_model, preference, runtime)
        votes: dict[str, dict[str, float]] = {g: {} for g in follow}

        def vote(g: str, name: str) -> None:
            d = s1.device[name]
            c = cost_model.compute_cost(ir.nodes[name], getattr(d, "device_type", "CPU"),
                                        runtime)
            votes[g][d.name] = votes[g].get(d.name, 0.0) + c

        for name, node in ir.nodes.items():
            g = group_of[name]
            if g in follow:
                vote(g, name)
            for src in {s for s, _ in node.inputs if s in ir.nodes}:
                gs = group_of[src]
                if gs in follow and gs != g:
                    vote(gs, name)
        fixed = dict(candidates)
        for g in follow:
            v = votes[g]
            fixed[g] = [min(candidates[g], key=lambda d: (-v.get(d.name, 0.0),
                                                          preference(d)))]
        candidates = fixed
    sched = greedy_place(ir, group_of, candidates, cost_model, preference, runtime)
    first = {}
    for name in ir.nodes:
        first.setdefault(group_of[name], name)
    return {g: sched.device[n] for g, n in first.items()}


_DEFAULT_MODELS: "weakref.WeakKeyDictionary[Any, dict[tuple[str, ...], CostModel]]" = \
    weakref.WeakKeyDictionary()
_DEFAULT_LOCK = threading.Lock()


def default_cost_model(ir: Any, devices: Sequence[Any]) -> CostModel:
    """The cost model used when the caller keeps none: one per graph and device set,
    so stateful nodes keep their devices from step to step."""
    graph = next((getattr(n.source_op, "graph", None) for n in ir.nodes.values()
                  if getattr(n, "source_op", None) is not None), None)
    if graph is None:
        return CostModel()
    key = tuple(sorted(_name(d) for d in devices))
    with _DEFAULT_LOCK:
        try:
            per = _DEFAULT_MODELS.setdefault(graph, {})
        except TypeError:  # not weak-referenceable
            return CostModel()
        cm = per.get(key)
        if cm is None:
            cm = per[key] = CostModel()
        return cm
