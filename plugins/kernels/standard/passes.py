"""The standard graph passes: constant folding, CSE, dependency optimization, pruning,
the fusion of a convolution with its bias and activation, and elementwise fusion.

The master runs these on every new step signature, after the step graph was extracted
(pruned to what the fetches and targets need, cut at the fed tensors) and before
placement. Each pass rewrites the step's :class:`~flowrt.ir.GraphIR` in place and keeps
what the master relies on: the fetch endpoints (``ir.fetches``, whose positions never
change), the ``_Arg`` nodes of the feeds and the target nodes.

==================================  =====  ==============================================
pass (``FLOWRT_DISABLE_PASSES``)    order  also switched off by (``RewriterConfig``)
==================================  =====  ==============================================
``constant_folding``                   10  ``constant_folding = OFF``
``common_subgraph_elimination``        20  ``common_subgraph_elimination = OFF``
``dependency_optimization``            30  ``dependency_optimization = OFF``
``model_pruning``                     150  ``disable_model_pruning = true``
``remapping`` (conv, bias, activation) 190  ``remapping = OFF``
``elementwise_fusion``                200  ``elementwise_fusion = OFF``, ``remapping = OFF``
==================================  =====  ==============================================

Third-party passes get order 100 by default, so they see folded and deduplicated graphs
but no fused nodes. Every pass keeps results bit-for-bit identical: folding evaluates
the same CPU kernels once at compile time, CSE merges only nodes that would compute the
same thing, and a fused node calls its members' own kernels in the original order
(a run of one unary ufunc may be a single call of that ufunc's own numpy loop).
Like TF's grappler, no pass folds, merges away or absorbs a fetched or target node, a
feed, or a node others are colocated with. Passes that remove nodes note in
``ir.replaced`` which surviving node stands for each (``{removed: survivor}``).
"""
from __future__ import annotations

import ctypes
import math
import threading
import weakref
from typing import Any, Callable, Iterable

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.executor import op_error_for
from flowrt.ir import ARG_OP, GraphIR, Node
from flowrt.op_registry import KernelContext, OpDef
from flowrt.passes import GraphPass

from ._common import ks

__all__ = ["graph_passes", "constant_folding", "common_subgraph_elimination",
           "dependency_optimization", "model_pruning", "conv_bias_activation_fusion",
           "elementwise_fusion", "FUSIBLE_OPS", "FusedMember",
           "DEFAULT_MAX_FOLDED_BYTES"]

#: TF's default bound on the size of a folded constant (10 MiB)
DEFAULT_MAX_FOLDED_BYTES = 10 * 1024 * 1024
_OFF = 2  # RewriterConfig.OFF

# Ops that are never folded or merged whatever their flags say: feeds, the graph's
# interface to the outside world, and control flow / transfer primitives.
_NEVER_TOUCH = frozenset({
    ARG_OP, "_Retval", "Placeholder", "PlaceholderV2", "PlaceholderWithDefault",
    "_Send", "_Recv", "_HostSend", "_HostRecv", "Enter", "RefEnter", "Exit", "RefExit",
    "Switch", "RefSwitch", "Merge", "RefMerge", "NextIteration", "RefNextIteration",
    "LoopCond", "ControlTrigger", "NoOp", "_FusedElementwise",
})

#: Elementwise ops the fusion pass may merge: one output, each output element depends
#: only on the same element of the (broadcast) inputs.
FUSIBLE_OPS = frozenset({
    # unary math
    "Abs", "Neg", "Sign", "Reciprocal", "Inv", "Square", "Sqrt", "Rsqrt", "Exp", "Expm1",
    "Log", "Log1p", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Tanh",
    "Asinh", "Acosh", "Atanh", "Sigmoid", "Floor", "Ceil", "Round", "Rint", "Erf", "Erfc",
    "Lgamma", "Digamma", "IsNan", "IsInf", "IsFinite", "LogicalNot", "Invert", "Real",
    "Imag", "Angle", "ComplexAbs", "Conj", "Cast",
    # unary activations
    "Relu", "Relu6", "Elu", "Selu", "Softplus", "Softsign", "LeakyRelu",
    # binary math
    "Add", "AddV2", "Sub", "Mul", "Div", "RealDiv", "TruncateDiv", "FloorDiv", "FloorMod",
    "TruncateMod", "Mod", "Pow", "Maximum", "Minimum", "SquaredDifference", "Atan2",
    "DivNoNan", "MulNoNan", "Xdivy", "Xlogy", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
    "LeftShift", "RightShift", "Complex",
    # comparisons and logic
    "Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd",
    "LogicalOr",
    # n-ary
    "AddN",
})


# =======================================================================================
# helpers
# =======================================================================================
def _rewrite_options(config: Any) -> Any:
    if config is None or not config.HasField("graph_options"):
        return None
    return config.graph_options.rewrite_options


def _protected(ir: GraphIR) -> set[str]:
    """Nodes whose names the master refers to: fetch producers, targets, feeds."""
    out = {n for n, _ in ir.fetches}
    out.update(ir.targets)
    out.update(a for _, a in ir.feeds)
    return out


def _coloc_targets(ir: GraphIR) -> set[str]:
    """Nodes that others ask to be colocated with (``_class = [b"loc:@name"]``): they
    keep their names, so the constraint still finds them."""
    out: set[str] = set()
    for node in ir.nodes.values():
        for loc in node.node_attrs.get("_class", ()) or ():
            loc = loc.decode() if isinstance(loc, bytes) else str(loc)
            if loc.startswith("loc:@") and loc[5:] != node.name:
                out.add(loc[5:])
    return out


def _has_ref(node: Node) -> bool:
    return any(d.is_ref_dtype for d in node.in_dtypes) or \
        any(d.is_ref_dtype for d in node.out_dtypes)


class _KernelKinds:
    """Per pass run: whether every kernel of an op is a plain (or const) one."""

    def __init__(self, runtime: Any, present: Any = None):
        self.rt = runtime
        self.present = present  # device types the step can use (None: all registered)
        self._cache: dict[str, tuple[str, ...]] = {}

    def types(self, op: str) -> tuple[str, ...]:
        t = self._cache.get(op)
        if t is None:
            t = tuple(x for x in self.rt.kernel_device_types(op)
                      if self.present is None or x in self.present)
            self._cache[op] = t
        return t

    def all_plain(self, op: str, allow_const: bool = False) -> bool:
        ok = ("plain", "const") if allow_const else ("plain",)
        types = self.types(op)
        return bool(types) and all(self.rt.find_kernel(op, t).kind in ok for t in types)


_CPU_DEVICES: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


def _cpu_device(runtime: Any) -> Any | None:
    """A CPU device of ``runtime`` for compile-time evaluation (made once per runtime)."""
    try:
        dev = _CPU_DEVICES.get(runtime)
    except TypeError:  # an unhashable runtime stand-in
        dev = None
    if dev is not None:
        return dev
    dt = runtime.device_types.get("CPU")
    if dt is None:
        return None
    try:
        found = dt.discover(None, "localhost", 0)
    except Exception:
        return None
    if not found:
        return None
    dev = found[0]
    try:
        _CPU_DEVICES[runtime] = dev
    except TypeError:
        pass
    return dev


def _dedupe(names: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for n in names:
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


# =======================================================================================
# constant folding
# =======================================================================================
def _max_folded_bytes(config: Any) -> int:
    if config is not None and config.HasField("graph_options"):
        v = int(config.graph_options.optimizer_options.max_folded_constant_in_bytes)
        if v > 0:
            return v
    return DEFAULT_MAX_FOLDED_BYTES


def _value_bytes(v: np.ndarray) -> int:
    if v.dtype.kind == "O":
        return sum(len(x) if isinstance(x, (bytes, str)) else 8 for x in v.reshape(-1))
    return int(v.nbytes)


def _static_bytes(node: Node) -> int | None:
    """The size of the node's outputs when their static shapes say it (else None)."""
    total = 0
    for dt, shp in zip(node.out_dtypes, node.out_shapes):
        dims = shp.as_tuple() if shp is not None else None
        if dims is None or None in dims or dt.base_dtype is _dt.string:
            return None
        total += math.prod(dims) * dt.base_dtype.np.itemsize
    return total


def _foldable_dtype(dt: Any) -> bool:
    base = dt.base_dtype
    return not dt.is_ref_dtype and (base is _dt.string or (
        base.is_numpy_compatible and base not in (_dt.resource, _dt.variant)))


def constant_folding(ir: GraphIR, ctx: Any) -> None:
    """Evaluate nodes whose inputs are all constants once, at compile time.

    A node is folded when every data input is a ``Const`` (or a folded node), it is not
    stateful, not a feed or placeholder, has a plain CPU kernel, no reference inputs or
    outputs, and each output is at most ``max_folded_constant_in_bytes`` (10 MiB by
    default). A single-output node becomes a ``Const`` of the same name in place; a
    multi-output node gets one ``Const`` per used output (``<name>/_folded_<k>``) and its
    consumers and fetches are rewired. Folded constants inherit the control inputs of
    what they replace, so side effects ordered before a constant still run first. A
    kernel that raises leaves its node unfolded: the error surfaces at run time.
    """
    runtime = ctx.runtime
    const_def = runtime.op_defs.get("Const")
    const_k = runtime.find_kernel("Const", "CPU")
    dev = _cpu_device(runtime)
    if const_def is None or const_k is None or dev is None:
        return
    limit = _max_folded_bytes(ctx.config)
    protected = _protected(ir)
    values: dict[str, Any] = {}  # Const node name -> its runtime value

    def const_value(name: str) -> Any:
        v = values.get(name)
        if v is None:
            node = ir.nodes[name]
            v = values[name] = const_k.factory(KernelContext(node, dev))()
        return v

    order = ir.topo_sort()
    cons = ir.consumers()
    control_users = {c for node in order for c in node.control_inputs}
    coloc = _coloc_targets(ir)
    for node in order:
        if node.type == "Const" or not node.inputs or node.name in protected:
            continue
        if node.type in _NEVER_TOUCH or node.is_stateful or node.op_def is None:
            continue
        if not node.out_dtypes or _has_ref(node):
            continue
        if not all(_foldable_dtype(d) for d in node.out_dtypes):
            continue
        srcs = [ir.nodes.get(s) for s, _ in node.inputs]
        if any(s is None or s.type != "Const" for s in srcs):
            continue
        multi = len(node.out_dtypes) > 1
        if multi and (node.name in control_users or node.name in coloc):
            continue
        kdef = runtime.find_kernel(node.type, "CPU")
        if kdef is None or kdef.kind != "plain":
            continue
        est = _static_bytes(node)
        if est is not None and est > limit:
            continue
        try:
            args = [const_value(s.name) for s in srcs]
            fn = kdef.factory(KernelContext(node, dev))
            with np.errstate(all="ignore"):
                result = fn(*args)
        except Exception:  # leave it: the same error will surface at run time
            continue
        outs = tuple(result) if multi else (result,)
        if len(outs) != len(node.out_dtypes):
            continue
        arrays = []
        for v, dt in zip(outs, node.out_dtypes):
            if not isinstance(v, (np.ndarray, np.generic)):
                break
            a = np.asarray(v)
            want = dt.base_dtype
            if (a.dtype.kind == "O") != (want is _dt.string) or \
                    (want is not _dt.string and a.dtype != want.np):
                break
            if _value_bytes(a) > limit:
                break
            arrays.append(a)
        else:
            ctrl = list(node.control_inputs)
            for s in srcs:
                ctrl.extend(s.control_inputs)
            ctrl = _dedupe(ctrl)
            cls = node.node_attrs.get("_class")
            if not multi:
                attrs = {"value": arrays[0], "dtype": node.out_dtypes[0].base_dtype}
                if cls:
                    attrs["_class"] = cls
                ir.nodes[node.name] = _const_node(node.name, node, const_def, attrs, 0,
                                                  ctrl)
                values[node.name] = result
                continue
            _fold_multi(ir, node, arrays, const_def, ctrl, cls, cons, values, outs)


def _const_node(name: str, like: Node, const_def: Any, attrs: dict[str, Any], k: int,
                ctrl: list[str]) -> Node:
    return Node(name, "Const", [], list(ctrl), like.device, attrs, const_def,
                [like.out_dtypes[k].base_dtype], [like.out_shapes[k]], [], [],
                source_op=like.source_op)


def _fold_multi(ir: GraphIR, node: Node, arrays: list[np.ndarray], const_def: Any,
                ctrl: list[str], cls: Any, cons: dict[str, list[Node]],
                values: dict[str, Any], outs: tuple[Any, ...]) -> None:
    used = {k for c in cons.get(node.name, ()) for s, k in c.inputs if s == node.name}
    new_name: dict[int, str] = {}
    for k in sorted(used):
        name, i = f"{node.name}/_folded_{k}", 0
        while name in ir.nodes:
            i += 1
            name = f"{node.name}/_folded_{k}_{i}"
        attrs = {"value": arrays[k], "dtype": node.out_dtypes[k].base_dtype}
        if cls:
            attrs["_class"] = cls
        ir.add(_const_node(name, node, const_def, attrs, k, ctrl))
        values[name] = outs[k]
        new_name[k] = name
    for c in cons.get(node.name, ()):
        c.inputs = [(new_name[k], 0) if s == node.name else (s, k) for s, k in c.inputs]
    del ir.nodes[node.name]


# =======================================================================================
# common subexpression elimination
# =======================================================================================
class _Unhashable(Exception):
    pass


def _fingerprint(v: Any) -> Any:
    """An exact, hashable stand-in for an attr value (type-tagged: 1 != True != 1.0)."""
    if v is None or isinstance(v, (str, bytes)):
        return (type(v).__name__, v)
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int):
        return ("int", v)
    if isinstance(v, float):
        return ("float", v.hex())
    if isinstance(v, (np.ndarray, np.generic)):
        a = np.asarray(v)
        if a.dtype.kind == "O":
            return ("objarray", a.shape, tuple(_fingerprint(x) for x in a.reshape(-1)))
        return ("array", a.dtype.str, a.shape, np.ascontiguousarray(a).tobytes())
    if isinstance(v, _dt.DType):
        return ("dtype", v.name)
    if hasattr(v, "as_tuple") and hasattr(v, "ndims"):  # TensorShape
        return ("shape", v.as_tuple())
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_fingerprint(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple(sorted((k, _fingerprint(x)) for k, x in v.items())))
    try:
        hash(v)
    except TypeError:
        raise _Unhashable from None
    return ("obj", type(v).__qualname__, id(v))  # identity: never equal to another object


def common_subgraph_elimination(ir: GraphIR, ctx: Any) -> None:
    """Merge identical non-stateful nodes: same op, same inputs (control inputs too),
    same attrs (arrays compared by dtype, shape and bytes), same requested device.

    Consumers are rewired to the surviving node. Fetched and target nodes are never
    merged away (TF's "nodes to preserve"): a duplicate of one merges into it, and two
    fetched duplicates both stay, so a step never hands back one array for two fetches.
    Nodes reading references, feeds, placeholders, nodes without outputs and ops with
    kernels other than plain ones are left alone.
    """
    kinds = _KernelKinds(ctx.runtime, getattr(ctx, "device_types", None))
    protected = _protected(ir) | _coloc_targets(ir)
    rep_of: dict[str, str] = {}  # merged node -> the first node of its class
    survivor: dict[str, str] = {}  # class (first node) -> the node that stays
    seen: dict[Any, str] = {}
    max_const = DEFAULT_MAX_FOLDED_BYTES
    created = {name: i for i, name in enumerate(ir.nodes)}  # the graph's creation order
    for node in ir.topo_sort():
        # read the classes' first nodes: duplicates further up may have been merged
        if rep_of:
            node.inputs = [(rep_of.get(s, s), k) for s, k in node.inputs]
            node.control_inputs = _dedupe(rep_of.get(c, c) for c in node.control_inputs)
        if node.type in _NEVER_TOUCH or node.is_stateful:
            continue
        if node.op_def is None or not node.out_dtypes or _has_ref(node):
            continue
        if not kinds.all_plain(node.type, allow_const=True):
            continue
        if node.type == "Const":
            v = node.node_attrs.get("value")
            if isinstance(v, np.ndarray) and v.dtype.kind != "O" and v.nbytes > max_const:
                continue
        try:
            key = (node.type, node.device, tuple(node.inputs),
                   tuple(sorted(set(node.control_inputs))),
                   tuple(sorted((k, _fingerprint(v)) for k, v in node.node_attrs.items())))
            hash(key)
        except (_Unhashable, TypeError):
            continue
        first = seen.get(key)
        if first is None:
            seen[key] = survivor[node.name] = node.name
            continue
        current = survivor[first]
        if node.name in protected and current in protected:
            continue  # both preserved: keep them apart
        # the preserved node stays; else the one the user made first
        if node.name in protected or (current not in protected
                                      and created[node.name] < created[current]):
            survivor[first] = node.name
        rep_of[node.name] = first
    if not rep_of:
        return
    final: dict[str, str] = {}
    for m, r in rep_of.items():
        final[m] = survivor[r]
    for r, sv in survivor.items():
        if sv != r:
            final[r] = sv
    final = {m: sv for m, sv in final.items() if m != sv}
    for name in final:
        del ir.nodes[name]
    for node in ir.nodes.values():
        node.inputs = [(final.get(s, s), k) for s, k in node.inputs]
        node.control_inputs = _dedupe(final.get(c, c) for c in node.control_inputs)
    _record_replaced(ir, final)


def _record_replaced(ir: GraphIR, mapping: dict[str, str]) -> None:
    """Note which node now stands for each removed one (``ir.replaced``), for tools
    that report on the user's node names (placement listings)."""
    rec = getattr(ir, "replaced", None)
    if rec is None:
        rec = {}
        try:
            ir.replaced = rec  # type: ignore[attr-defined]
        except AttributeError:  # pragma: no cover - a GraphIR with slots
            return
    for old, new in mapping.items():
        rec[old] = new
    for old, new in list(rec.items()):  # follow chains: a -> b -> c gives a -> c
        seen = {old}
        while new in rec and new not in seen:
            seen.add(new)
            new = rec[new]
        rec[old] = new


# =======================================================================================
# pruning
# =======================================================================================
def model_pruning(ir: GraphIR, ctx: Any) -> None:
    """Drop nodes that no fetch or target needs (feeds' ``_Arg`` nodes always stay):
    what folding, CSE or other passes left without a consumer."""
    rw = _rewrite_options(ctx.config)
    if rw is not None and rw.disable_model_pruning:
        return
    keep = _protected(ir)
    keep.update(n for n, node in ir.nodes.items() if node.type == ARG_OP)
    ir.prune(keep)


# =======================================================================================
# dependency optimization
# =======================================================================================
#: ops never turned into NoOps even when nothing reads their outputs: checks whose
#: failure is their effect, and the graph's interface (TF's list, plus flowrt's prints)
_KEEP_FOR_EFFECT = frozenset({"Assert", "CheckNumerics", "ControlTrigger", "Print",
                              "PrintV2", "_ParallelConcatUpdate"})


#: a node reading one of these keeps its op: a control edge from a Switch is live
#: whichever branch is taken, so a NoOp in its place would lose the node's deadness
#: (a cond's pivot is such an Identity)
_DEADNESS_SOURCES = frozenset({"Switch", "RefSwitch", "_SwitchN"})
#: Identities after these stay (TF's rule): variable reads and received values
_IDENTITY_KEEPERS = frozenset({"VariableV2", "Variable", "_Recv", "_HostRecv",
                               "VarHandleOp", "ReadVariableOp"})


def dependency_optimization(ir: GraphIR, ctx: Any) -> None:
    """TF grappler's dependency optimizer, its two rules that matter here:

    - a node without side effects whose outputs nobody reads (it is in the step only
      because something waits on it through a control edge) does no observable work:
      it becomes a ``NoOp`` with its data inputs turned into control inputs. The usual
      case is a gradient op gated by ``GATE_OP``'s ``tuple``: the first convolution's
      input gradient, which only the group that gates the filter gradient waits for;
    - such a ``NoOp`` is then bypassed (its control inputs handed to its consumers and
      the node dropped) when that adds no edges (fan-in x fan-out <= fan-in + fan-out)
      and moves no edge across devices.

    Stateful ops, control flow, references, fetched/target/fed nodes, colocation
    targets and the checks in :data:`_KEEP_FOR_EFFECT` are never touched. A node turned
    into a NoOp no longer runs, so an error it would have raised does not surface (as in
    TF)."""
    rw = _rewrite_options(ctx.config)
    if rw is not None and rw.dependency_optimization == _OFF:
        return
    noop_def = ctx.runtime.op_defs.get("NoOp")
    if noop_def is None:
        return
    protected = _protected(ir) | _coloc_targets(ir)
    converted: list[str] = []
    changed = True
    while changed:
        changed = False
        read: set[str] = {src for node in ir.nodes.values() for src, _ in node.inputs}
        waited: set[str] = {c for node in ir.nodes.values() for c in node.control_inputs}
        for name, node in list(ir.nodes.items()):
            # (a node nobody reads or waits for is model_pruning's to drop)
            if name in read or name not in waited or name in protected or \
                    node.type in _NEVER_TOUCH or \
                    node.type in _KEEP_FOR_EFFECT or node.is_stateful or \
                    node.op_def is None or not node.out_dtypes or _has_ref(node):
                continue
            srcs = [ir.nodes[src].type for src, _ in node.inputs]
            if any(t in _DEADNESS_SOURCES for t in srcs) or (
                    node.type in ("Identity", "IdentityN") and
                    any(t in _IDENTITY_KEEPERS for t in srcs)):
                continue
            ctl = _dedupe([*node.control_inputs, *(src for src, _ in node.inputs)])
            ir.nodes[name] = node.copy(type="NoOp", op_def=noop_def, inputs=[],
                                       control_inputs=ctl, node_attrs={}, out_dtypes=[],
                                       out_shapes=[], in_dtypes=[], in_shapes=[])
            converted.append(name)
            changed = True
    if converted:
        _bypass_noops(ir, converted, protected)


def _bypass_noops(ir: GraphIR, names: list[str], protected: set[str]) -> None:
    """Drop each NoOp of ``names`` whose consumers can wait on its inputs directly
    without adding edges or device crossings (grappler's rule)."""
    for name in names:
        node = ir.nodes.get(name)
        if node is None or name in protected:
            continue
        consumers = [c for c in ir.nodes.values() if name in c.control_inputs]
        ins = node.control_inputs
        if len(ins) * len(consumers) > len(ins) + len(consumers):
            continue
        devices = {ir.nodes[i].device for i in ins} | {c.device for c in consumers}
        if len(devices | {node.device}) > 1:
            continue
        for c in consumers:
            data_srcs = {s for s, _ in c.inputs}
            c.control_inputs = _dedupe(
                [x for x in c.control_inputs if x != name] +
                [i for i in ins if i not in data_srcs])
        del ir.nodes[name]


# =======================================================================================
# elementwise fusion
# =======================================================================================
class FusedMember:
    """One member of a ``_FusedElementwise`` node: the original node and where each of
    its inputs comes from -- ``("in", j)`` the fused node's input ``j`` or
    ``("tmp", i)`` the result of member ``i`` (always an earlier member)."""

    __slots__ = ("node", "args")

    def __init__(self, node: Node, args: tuple[tuple[str, int], ...]):
        self.node = node
        self.args = args

    def __repr__(self) -> str:
        return f"FusedMember({self.node.name!r}, {self.node.type}, {self.args})"


ks.op(OpDef("_FusedElementwise", inputs=["inputs: Tin"], outputs=["output: T"],
            attrs=["Tin: list(type) >= 0", "T: type", "ops: list(func)"],
            doc="Internal (made by the elementwise_fusion pass, never in a user graph): "
                "a region of elementwise nodes run as one, each by its own kernel, in "
                "order. ``ops`` holds FusedMember objects (absorbed constants too)."))


# -- same-ufunc chains ---------------------------------------------------------------------
# A chain of n applications of one unary ufunc to a small tensor costs n ufunc calls,
# each mostly numpy's per-call overhead. numpy's strided loop can instead run the whole
# recurrence in one call: with the input at buf[0:m] and the output at buf[m:], element
# k of the output (buf[m + k]) is computed after element k - m was written, so one call
# over n * m elements leaves f applied n times in buf[n*m:]. That relies on the loop
# going element by element, with the same per-element code, when its operands overlap;
# numpy 2's sources do that for the (ufunc, dtype) pairs below (float32 sin/cos: the
# vectorised sincos kernel on one lane at a time; float64: scalar libm calls either way),
# and each pair is checked on a probe once per process before it is used.
_RECURRENT = frozenset({("sin", "float32"), ("cos", "float32"), ("sin", "float64"),
                        ("cos", "float64")})
_CALL_INFO = b"numpy_1.24_ufunc_call_info"
#: elements: above this, vectorised ufunc calls beat the one-element-at-a-time loop
RECURRENCE_MAX_ELEMENTS = 16
_SCRATCH_BYTES = 1 << 20  # per chain and thread; longer chains run in segments
# PYFUNCTYPE: the GIL stays held (the loops are short; no release and re-acquire)
_LOOP_PROTO = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


class _CallInfo(ctypes.Structure):
    # numpy's ``ufunc_call_info`` (capsule ``numpy_1.24_ufunc_call_info``)
    _fields_ = [("strided_loop", ctypes.c_void_p), ("context", ctypes.c_void_p),
                ("auxdata", ctypes.c_void_p), ("requires_pyapi", ctypes.c_bool),
                ("no_floatingpoint_errors", ctypes.c_bool)]


class _StridedLoop:
    """numpy's inner loop of a unary ufunc for one dtype, callable on raw pointers."""

    __slots__ = ("fn", "context", "auxdata", "strides", "_capsule")

    def __init__(self, ufunc: np.ufunc, dtype: np.dtype):
        dts, capsule = ufunc._resolve_dtypes_and_context((dtype, None))
        if tuple(dts) != (dtype, dtype):
            raise TypeError(f"{ufunc.__name__} does not map {dtype} to itself")
        size = dtype.itemsize
        ufunc._get_strided_loop(capsule, fixed_strides=(size, size))
        info = _CallInfo.from_address(_capsule_pointer(capsule, _CALL_INFO))
        if info.requires_pyapi or not info.strided_loop:
            raise TypeError(f"{ufunc.__name__} has no plain strided loop for {dtype}")
        self._capsule = capsule  # owns the context and auxdata
        self.fn = _LOOP_PROTO(info.strided_loop)
        self.context, self.auxdata = info.context, info.auxdata
        self.strides = (ctypes.c_ssize_t * 2)(size, size)

    def args(self, data: Any, dims: Any) -> tuple[int, int, int, int, int]:
        """The raw arguments of one call over ``data`` pointers and ``dims``."""
        return (self.context, ctypes.addressof(data), ctypes.addressof(dims),
                ctypes.addressof(self.strides), self.auxdata)

    def recur(self, buf: np.ndarray, m: int, n: int) -> None:
        """Apply the ufunc ``n`` times to ``buf[:m]``, leaving step k in
        ``buf[k*m:(k+1)*m]`` (``buf`` is 1-D, contiguous, at least (n+1)*m long)."""
        base = buf.ctypes.data
        data = (ctypes.c_void_p * 2)(base, base + m * buf.itemsize)
        dims = (ctypes.c_ssize_t * 1)(n * m)
        self.call(data, dims, self.args(data, dims))

    def call(self, *keep: Any) -> None:
        """Call the loop with raw arguments ``keep[-1]`` (``keep`` holds what they point
        into, so that it lives as long as the call)."""
        if self.fn(*keep[-1]):
            raise errors.InternalError(None, None, "numpy strided loop failed")


_LOOPS: dict[tuple[str, str], _StridedLoop | None] = {}
_LOOPS_LOCK = threading.Lock()


def _probe_values(dtype: np.dtype) -> np.ndarray:
    info = np.finfo(dtype)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, float(info.tiny), -float(info.tiny),
               float(info.smallest_subnormal), -float(info.smallest_subnormal),
               float(info.max), -float(info.max), 1.0, -1.0, np.pi, 0.5,
               71476.0625, 117435.992, 117436.0, -2.5e5, 1e30]
    rng = np.random.default_rng(20261122)
    wide = rng.standard_normal(512) * 10.0 ** rng.integers(-40, 40, 512)
    near = rng.uniform(-1e6, 1e6, 256)
    with np.errstate(all="ignore"):
        return np.concatenate([np.array(special), wide, near]).astype(dtype)


def _recurrent_loop(ufunc: Any, dtype: Any) -> _StridedLoop | None:
    """The strided loop of ``ufunc`` for ``dtype`` when a chain of it may run as one
    recurrence (see above), else None. Checked once per process on a probe: three
    steps as one call must equal three ufunc calls bit for bit."""
    if not isinstance(ufunc, np.ufunc) or ufunc.nin != 1 or ufunc.nout != 1:
        return None
    dt = np.dtype(dtype)
    key = (ufunc.__name__, dt.name)
    if key not in _RECURRENT or int(np.__version__.split(".")[0]) < 2 or \
            ufunc is not getattr(np, ufunc.__name__, None):
        return None
    with _LOOPS_LOCK:
        if key in _LOOPS:
            return _LOOPS[key]
        loop: _StridedLoop | None
        try:
            loop = _StridedLoop(ufunc, dt)
            x = _probe_values(dt)
            m, steps = x.size, 3
            buf = np.empty((steps + 1) * m, dt)
            buf[:m] = x
            with np.errstate(all="ignore"):
                loop.recur(buf, m, steps)
                want = x
                for _ in range(steps):
                    want = ufunc(want)
            if buf[steps * m:].tobytes() != want.tobytes():
                loop = None
        except Exception:  # no usable loop on this numpy: plain calls
            loop = None
        _LOOPS[key] = loop
        return loop


class _ChainState(threading.local):
    m = -1
    buf: np.ndarray
    head: np.ndarray  # buf[:m]
    parts: list[tuple[Any, Any, np.ndarray, tuple[int, ...]]]  # per segment: data
    # pointers, dims, the view of its result, raw call arguments


#: chains shorter than this run as ufunc calls: one recurrence call has a fixed cost of
#: a few ufunc calls (ctypes call, copies in and out)
RECURRENCE_MIN_STEPS = 8


class _UfuncChain:
    """``n`` applications of one unary ufunc in a row, bit for bit as ``n`` calls.

    Small inputs of the chain's dtype run as one strided-loop recurrence (per-thread
    scratch; the result is copied out); anything else runs as ufunc calls, in place on
    the chain's own first result.
    """

    __slots__ = ("ufunc", "n", "dtype", "loop", "state")

    def __init__(self, ufunc: np.ufunc, dtype: Any, n: int):
        self.ufunc, self.n, self.dtype = ufunc, n, np.dtype(dtype)
        self.loop = _recurrent_loop(ufunc, self.dtype) if n >= RECURRENCE_MIN_STEPS \
            else None
        self.state = _ChainState()

    def __call__(self, x: Any) -> Any:
        if self.loop is not None and x.__class__ is np.ndarray and x.dtype == self.dtype \
                and 0 < x.size <= RECURRENCE_MAX_ELEMENTS:
            return self._recur(x)
        f = self.ufunc
        y = f(x)
        if y.__class__ is np.ndarray:  # a fresh array: the rest runs in place
            for _ in range(self.n - 1):
                f(y, y)
        else:
            for _ in range(self.n - 1):
                y = f(y)
        return y

    def _recur(self, x: np.ndarray) -> Any:
        st = self.state
        if st.m != x.size:
            self._prepare(st, x.size)
        nd = x.ndim
        st.head[...] = x if nd == 1 else x.reshape(-1)
        call, parts = self.loop.call, st.parts
        call(*parts[0])
        for k in range(1, len(parts)):  # segments: carry the last result over
            st.head[...] = parts[k - 1][2]
            call(*parts[k])
        out = parts[-1][2].copy()
        return out if nd == 1 else out.reshape(x.shape) if nd else out[0]

    def _prepare(self, st: _ChainState, m: int) -> None:
        size = self.dtype.itemsize
        seg = max(1, min(self.n, _SCRATCH_BYTES // (m * size) - 1))
        buf = np.empty((seg + 1) * m, self.dtype)
        base = buf.ctypes.data
        data = (ctypes.c_void_p * 2)(base, base + m * size)
        parts = []
        left = self.n
        while left:
            k = min(seg, left)
            dims = (ctypes.c_ssize_t * 1)(k * m)
            parts.append((data, dims, buf[k * m:(k + 1) * m], self.loop.args(data, dims)))
            left -= k
        st.buf, st.head, st.parts, st.m = buf, buf[:m], parts, m


def _same_dtype_ufunc(fn: Any, dt: Any) -> bool:
    """Whether kernel ``fn`` is a numpy unary ufunc whose loop maps ``dt`` to itself (so
    it may write its result over its input)."""
    if not isinstance(fn, np.ufunc) or fn.nin != 1 or fn.nout != 1:
        return False
    try:
        npdt = np.dtype(dt.base_dtype.np)
        return npdt.kind in "biufc" and tuple(fn.resolve_dtypes((npdt, None))) == \
            (npdt, npdt)
    except Exception:
        return False


@ks.kernel("_FusedElementwise")
def _fused_elementwise_kernel(ctx: Any) -> Callable[..., Any]:
    members: list[FusedMember] = list(ctx.attrs["ops"])
    runtime = ctx.attrs["_runtime"]
    dev = ctx.device
    env: dict[str, Any] = {"_nd": np.ndarray}
    n_in = len(ctx.attrs["Tin"])
    lines = [f"def fused({', '.join(f'a{j}' for j in range(n_in))}):", "    try:"]
    line_member: list[int] = []  # member index of each call line
    last = len(members) - 1
    readers: dict[int, int] = {}
    last_use: dict[int, int] = {}
    for i, m in enumerate(members):
        for kind, j in m.args:
            if kind == "tmp":
                last_use[j] = i
                readers[j] = readers.get(j, 0) + 1
    fns: list[Any] = []
    for m in members:
        kdef = runtime.find_kernel(m.node.type, dev.device_type)
        try:
            if kdef is None:
                raise errors.InvalidArgumentError(
                    None, None, f"No kernel for op '{m.node.type}' on device {dev.name}")
            fn = kdef.factory(KernelContext(m.node, dev, ctx.session_state))
            if kdef.kind == "const":  # an absorbed constant: its value, made once
                fn = ("const", fn())
        except Exception as e:
            raise op_error_for(e, m.node, dev.name) from e
        fns.append(fn)

    def unary_ufunc(i: int) -> bool:
        node = members[i].node
        out = node.out_dtypes[0]
        return len(members[i].args) == 1 and node.in_dtypes[0].base_dtype is \
            out.base_dtype and _same_dtype_ufunc(fns[i], out)

    def chained(i: int) -> bool:
        """Member i applies member i-1's ufunc to member i-1's result, its only reader."""
        return (i > 0 and unary_ufunc(i) and fns[i] is fns[i - 1] and unary_ufunc(i - 1)
                and members[i].args[0] == ("tmp", i - 1) and readers.get(i - 1) == 1
                and members[i].node.out_dtypes[0].base_dtype is
                members[i - 1].node.out_dtypes[0].base_dtype)

    # Each intermediate lives in a local "register" that is reused once its last reader
    # ran, so a chain frees (and numpy reuses) each buffer as soon as it is consumed;
    # the unfused step keeps every intermediate alive to the end of the step. A unary
    # ufunc whose input is the fresh result of an earlier ufunc, read by nobody else,
    # writes over that input (numpy treats exact in-place operands as non-overlapping,
    # so the same loop runs). Runs of one ufunc become a single _UfuncChain call.
    ref: dict[int, str] = {}  # member -> the expression naming its value
    owned: set[int] = set()  # members whose value is an array made in this call
    free: list[str] = []
    n_regs = 0
    i = 0
    while i <= last:
        m, fn = members[i], fns[i]
        if isinstance(fn, tuple):
            ref[i] = f"c{i}"
            env[ref[i]] = fn[1]
            i += 1
            continue
        end = i
        if unary_ufunc(i):
            while end < last and chained(end + 1):
                end += 1
        args = ", ".join(f"a{j}" if kind == "in" else ref[j] for kind, j in m.args)
        for kind, j in m.args:  # registers whose last reader is this member
            if kind == "tmp" and last_use.get(j) == i and ref[j].startswith("r") \
                    and ref[j] not in free:
                free.append(ref[j])
        src = m.args[0] if m.args else None
        in_place = (src is not None and src[0] == "tmp" and src[1] in owned
                    and readers.get(src[1]) == 1 and unary_ufunc(i))
        if end - i + 1 >= 2:
            env[f"f{i}"] = _UfuncChain(fn, m.node.out_dtypes[0].base_dtype.np, end - i + 1)
            call = f"f{i}({args})"
        else:
            env[f"f{i}"] = fn
            call = f"f{i}({args})"
            if in_place:
                call = f"f{i}({args}, {args}) if {args}.__class__ is _nd else {call}"
        if end == last:
            lines.append(f"        return {call}")
        else:
            if in_place and ref[src[1]] in free:
                free.remove(ref[src[1]])
                reg = ref[src[1]]
            elif free:
                reg = free.pop()
            else:
                reg, n_regs = f"r{n_regs}", n_regs + 1
            ref[end] = reg
            lines.append(f"        {reg} = {call}")
        if isinstance(fn, np.ufunc):
            owned.add(end)
        line_member.append(i)
        i = end + 1
    lines += ["    except Exception as e:", "        raise _member_error(e)"]
    dev_name = dev.name
    first_line = 3  # line number of the first call

    def member_error(e: BaseException) -> BaseException:
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_name != "fused":
            tb = tb.tb_next
        k = (tb.tb_lineno - first_line) if tb is not None else -1
        if not 0 <= k < len(line_member):  # pragma: no cover - defensive
            return e
        return op_error_for(e, members[line_member[k]].node, dev_name)

    env["_member_error"] = member_error
    code = compile("\n".join(lines) + "\n", f"<flowrt fused {ctx.node_name}>", "exec")
    exec(code, env)
    return env["fused"]


def _fusion_target(ctx: Any, fused_op: str) -> tuple[Any, Any, _KernelKinds, tuple] | None:
    """``(runtime, fused_op's OpDef, the kernel kinds, the device types running
    fused_op)`` for a fusing pass, or None where ``remapping`` is off or nothing can run
    ``fused_op``."""
    rw = _rewrite_options(ctx.config)
    if rw is not None and rw.remapping == _OFF:
        return None
    runtime = ctx.runtime
    fused_def = runtime.op_defs.get(fused_op)
    if fused_def is None:
        return None
    kinds = _KernelKinds(runtime, getattr(ctx, "device_types", None))
    fused_types = kinds.types(fused_op)
    if not fused_types:
        return None
    return runtime, fused_def, kinds, fused_types


def elementwise_fusion(ir: GraphIR, ctx: Any) -> None:
    """Replace each maximal region of elementwise nodes (see :data:`FUSIBLE_OPS`) by one
    ``_FusedElementwise`` node.

    A region has one output node (its root, whose name the fused node takes, so
    consumers and fetches resolve unchanged); every other member feeds only members of
    the region, is not fetched, not a target and not a control input. Members share the
    requested device, have no colocation constraint, and their ops have plain kernels on
    exactly the device types the fused op runs on. The fused kernel builds each member's
    own kernel and calls them in the original topological order, so results are
    bit-for-bit those of the unfused graph; a failing member is named in the error.
    Unary ufuncs write over their input where it is a fresh array nobody else reads, and
    a run of one unary ufunc on a small tensor may run as one recurrence of numpy's
    strided loop (see ``_UfuncChain``): the same per-element code, so the same bits.
    """
    target = _fusion_target(ctx, "_FusedElementwise")
    if target is None:
        return
    runtime, fused_def, kinds, fused_types = target
    order = ir.topo_sort()
    pos = {n.name: i for i, n in enumerate(order)}
    protected = _protected(ir) | _coloc_targets(ir)
    data_users: dict[str, set[str]] = {n: set() for n in ir.nodes}
    control_users: set[str] = set()
    for node in order:
        for s, _ in node.inputs:
            data_users[s].add(node.name)
        control_users.update(node.control_inputs)

    ok_cache: dict[str, bool] = {}

    def fusible(node: Node) -> bool:
        ok = ok_cache.get(node.name)
        if ok is None:
            ok = ok_cache[node.name] = (
                node.type in FUSIBLE_OPS and node.op_def is not None
                and not node.is_stateful and len(node.out_dtypes) == 1
                and not _has_ref(node) and not node.node_attrs.get("_class")
                and kinds.types(node.type) == fused_types
                and kinds.all_plain(node.type))
        return ok

    const_ok = set(fused_types) <= set(kinds.types("Const"))

    def absorbable(node: Node) -> bool:
        """A constant read only by the region: its value moves into the fused kernel."""
        return (const_ok and node.type == "Const" and len(node.out_dtypes) == 1
                and not _has_ref(node) and not node.node_attrs.get("_class"))

    taken: set[str] = set()
    replaced: dict[str, str] = {}
    for root in reversed(order):
        if root.name in taken or not fusible(root):
            continue
        group = {root.name}
        # Grow from the root upwards. An input joins once all its readers are members;
        # it is looked at again each time one of its readers joins.
        stack = [root.name]
        while stack:
            for s, _ in ir.nodes[stack.pop()].inputs:
                if s in group or s in taken or s in protected or s in control_users:
                    continue
                p = ir.nodes[s]
                if p.device != root.device or not (fusible(p) or absorbable(p)):
                    continue
                if data_users[s] <= group:
                    group.add(s)
                    stack.append(s)
        if sum(ir.nodes[n].type != "Const" for n in group) < 2:
            continue
        taken.update(group)
        replaced.update(_fuse(ir, root, sorted(group, key=pos.__getitem__), fused_def,
                              runtime))
    if replaced:
        _record_replaced(ir, replaced)


def _fuse(ir: GraphIR, root: Node, names: list[str], fused_def: Any,
          runtime: Any) -> dict[str, str]:
    index = {n: i for i, n in enumerate(names)}
    ext: dict[tuple[str, int], int] = {}
    in_dtypes: list[Any] = []
    in_shapes: list[Any] = []
    members = []
    ctrl: list[str] = []
    for n in names:
        node = ir.nodes[n]
        args = []
        for (s, k), dt, shp in zip(node.inputs, node.in_dtypes, node.in_shapes):
            if s in index:
                args.append(("tmp", index[s]))
                continue
            j = ext.get((s, k))
            if j is None:
                j = ext[(s, k)] = len(ext)
                in_dtypes.append(dt)
                in_shapes.append(shp)
            args.append(("in", j))
        members.append(FusedMember(node, tuple(args)))
        ctrl.extend(node.control_inputs)
    attrs = {"Tin": [d.base_dtype for d in in_dtypes], "T": root.out_dtypes[0].base_dtype,
             "ops": members, "_runtime": runtime}
    fused = Node(root.name, "_FusedElementwise", list(ext), _dedupe(ctrl), root.device,
                 attrs, fused_def, list(root.out_dtypes), list(root.out_shapes),
                 in_dtypes, in_shapes, source_op=root.source_op)
    for n in names:
        if n != root.name:
            del ir.nodes[n]
    ir.nodes[root.name] = fused
    return {n: root.name for n in names if n != root.name}


# =======================================================================================
# Conv2D + BiasAdd (+ Relu / Relu6) -> _FusedConv2D (TF's remapper)
# =======================================================================================
_FUSED_CONV_ACTS = ("Relu", "Relu6")
_FUSED_CONV_TYPES = (_dt.float32, _dt.float64)


def conv_bias_activation_fusion(ir: GraphIR, ctx: Any) -> None:
    """Replace each ``Conv2D -> BiasAdd [-> Relu | Relu6]`` chain by one ``_FusedConv2D``
    node (TF's remapper does the same), whose kernel adds the bias and applies the
    activation to each block of the convolution's output while it is still in cache:
    the same operations on the same values, so the same bits, without two more passes
    over the output in memory.

    A chain is fused when it is NHWC float32 or float64, each inner node feeds only the
    next one (not fetched, not a target, no control edge or colocation on it), all its
    nodes ask for the same device and no colocation, and the ops' kernels and
    ``_FusedConv2D``'s run on the same device types (the CPU: where a GPU is present
    nothing is fused). The fused node takes the last node's name, so consumers (the
    activation's gradient reads its output) and fetches resolve unchanged; the
    gradients, built on the original ops, read only the convolution's inputs.
    """
    target = _fusion_target(ctx, "_FusedConv2D")
    if target is None:
        return
    _, fused_def, kinds, fused_types = target
    if any(kinds.types(op) != fused_types or not kinds.all_plain(op)
           for op in ("Conv2D", "BiasAdd", *_FUSED_CONV_ACTS)):
        return
    protected = _protected(ir) | _coloc_targets(ir)
    users: dict[str, list[str]] = {n: [] for n in ir.nodes}
    control_users: set[str] = set()
    for node in ir.nodes.values():
        for s, _ in node.inputs:
            users[s].append(node.name)
        control_users.update(node.control_inputs)

    def inner(node: Node, consumer: Node) -> bool:
        """``node`` may disappear inside ``consumer``'s fused node."""
        return (node.name not in protected and node.name not in control_users
                and users[node.name] == [consumer.name] and consumer.inputs[0] == (node.name, 0)
                and node.device == consumer.device and not node.node_attrs.get("_class"))

    replaced: dict[str, str] = {}
    for conv in list(ir.nodes.values()):
        if conv.type != "Conv2D" or conv.name not in ir.nodes:
            continue
        a = conv.node_attrs
        if (a.get("data_format", "NHWC") not in ("NHWC", b"NHWC")
                or conv.out_dtypes[0] not in _FUSED_CONV_TYPES or len(users[conv.name]) != 1):
            continue
        bias = ir.nodes[users[conv.name][0]]
        if (bias.type != "BiasAdd" or not inner(conv, bias) or bias.node_attrs.get("_class")
                or bias.node_attrs.get("data_format", "NHWC") not in ("NHWC", b"NHWC")):
            continue
        chain, fused_ops = [conv, bias], ["BiasAdd"]
        if len(users[bias.name]) == 1:
            act = ir.nodes[users[bias.name][0]]
            if act.type in _FUSED_CONV_ACTS and inner(bias, act) and \
                    not act.node_attrs.get("_class") and \
                    act.out_dtypes[0] == conv.out_dtypes[0]:
                chain.append(act)
                fused_ops.append(act.type)
        root = chain[-1]
        attrs = {k: v for k, v in a.items() if k in (
            "strides", "padding", "explicit_paddings", "data_format", "dilations",
            "use_cudnn_on_gpu")}
        attrs.update(T=conv.out_dtypes[0].base_dtype, num_args=1, fused_ops=fused_ops,
                     epsilon=0.0001, leakyrelu_alpha=0.2)
        ctrl = _dedupe(c for n in chain for c in n.control_inputs)
        fused = Node(root.name, "_FusedConv2D", [conv.inputs[0], conv.inputs[1],
                                                 bias.inputs[1]], ctrl, root.device, attrs,
                     fused_def, list(root.out_dtypes), list(root.out_shapes),
                     [conv.in_dtypes[0], conv.in_dtypes[1], bias.in_dtypes[1]],
                     [conv.in_shapes[0], conv.in_shapes[1], bias.in_shapes[1]],
                     source_op=root.source_op)
        for n in chain[:-1]:
            del ir.nodes[n.name]
            replaced[n.name] = root.name
        ir.nodes[root.name] = fused
    if replaced:
        _record_replaced(ir, replaced)


# =======================================================================================
# registration
# =======================================================================================
def graph_passes() -> list[GraphPass]:
    """The standard passes, as the ``flowrt_graph_passes`` hook returns them."""
    return [
        GraphPass("constant_folding", constant_folding, order=10),
        GraphPass("common_subgraph_elimination", common_subgraph_elimination, order=20),
        GraphPass("dependency_optimization", dependency_optimization, order=30),
        GraphPass("model_pruning", model_pruning, order=150),
        # (named after TF's remapper, whose RewriterConfig field switches it off)
        GraphPass("remapping", conv_bias_activation_fusion, order=190, local_only=True),
        # fused nodes hold Python kernels with no GraphDef form: in-process only
        GraphPass("elementwise_fusion", elementwise_fusion, order=200, local_only=True),
    ]

