"""The compiled plan of a partition, and what a step's kernels see.

Compilation happens once per partition: every kernel is looked up (and built) once,
every tensor gets a slot in one flat list, and each node knows its input slots, its
successors and how many predecessors must finish before it can run. The schedulers
(:mod:`.straight_line`, :mod:`.dataflow`, :mod:`.frames`) only read this plan, so a step
does no lookups by name.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

from ..base import errors
from .ir import ARG_OP, GraphIR, Node, timeline_label
from ..plugin.op_registry import KernelContext

__all__ = ["Plan", "StepContext", "SessionState", "NodeStat", "op_error_for", "DEAD"]


class StepContext:
    """What ``kind="step"``/``"async"`` kernels see for the step being run."""

    __slots__ = ("step_id", "rendezvous", "session_state", "error", "_callbacks", "_lock",
                 "runtime")

    def __init__(self, step_id: int, rendezvous: Any = None, session_state: Any = None,
                 runtime: Any = None):
        self.step_id = step_id
        self.rendezvous = rendezvous
        self.session_state = session_state
        self.runtime = runtime
        self.error: BaseException | None = None
        self._callbacks: list[Callable[[BaseException], None]] = []
        self._lock = threading.Lock()

    def on_abort(self, fn: Callable[[BaseException], None]) -> None:
        """Call ``fn(error)`` if the step aborts (immediately if it already has)."""
        with self._lock:
            if self.error is None:
                self._callbacks.append(fn)
                return
        fn(self.error)

    def abort(self, error: BaseException) -> None:
        """Abort the step: wake every blocked kernel with ``error``."""
        with self._lock:
            if self.error is not None:
                return
            self.error = error
            cbs, self._callbacks = self._callbacks, []
        for cb in cbs:
            try:
                cb(error)
            except Exception:  # pragma: no cover - a callback must not mask the error
                pass


class SessionState:
    """Per-session state shared by every executor of one session (TF's OpSegment):
    stateful kernels are built once per session and node name, so a random op keeps its
    sequence across step signatures."""

    def __init__(self, handle: str = ""):
        self.handle = handle
        self.stateful_kernels: dict[tuple[str, str], Callable[..., Any]] = {}
        self.lock = threading.Lock()
        #: which paths file ops may touch (plugin.file_policy; a server's worker sets it,
        #: None: unrestricted)
        self.file_policy: Any = None


class NodeStat:
    """One node's execution in a traced step (perf_counter seconds)."""

    __slots__ = ("node_name", "op", "device", "start", "end", "thread_id", "label")

    def __init__(self, node_name: str, op: str, device: str, start: float, end: float,
                 thread_id: int, label: str = ""):
        self.node_name, self.op, self.device = node_name, op, device
        self.start, self.end, self.thread_id = start, end, thread_id
        self.label = label


def _stat(c: "_CNode", t0: float, t1: float, thread_id: int) -> NodeStat:
    label = c.label
    if label is None:  # TF's timeline label, made once per compiled node when traced
        label = c.label = timeline_label(c.node)
    return NodeStat(c.node.name, c.node.type, c.device_name, t0, t1, thread_id, label)


def op_error_for(exc: BaseException, node: Any, device_name: str = "") -> errors.OpError:
    """Turn any exception raised by ``node``'s kernel into the right OpError naming it."""
    where = f"[[node {node.name} (op {node.type})" + (f" on {device_name}" if device_name
                                                     else "") + "]]"
    if isinstance(exc, errors.OpError):
        if f"[[node {node.name} " in exc.message or "[[node " in exc.message:
            return exc
        e = type(exc)(exc._node_def, exc.op or getattr(node, "source_op", None),
                      f"{exc.message}\n\t {where}")
        e.__cause__ = exc.__cause__
        return e
    if isinstance(exc, MemoryError):
        cls: type[errors.OpError] = errors.ResourceExhaustedError
    elif isinstance(exc, NotImplementedError):
        cls = errors.UnimplementedError
    elif isinstance(exc, StopIteration):
        cls = errors.OutOfRangeError
    elif isinstance(exc, (ValueError, IndexError, TypeError, ZeroDivisionError,
                          FloatingPointError, OverflowError, KeyError)):
        cls = errors.InvalidArgumentError
    else:  # as TF reports Python exceptions raised inside a step
        cls = errors.UnknownError
    e = cls(None, getattr(node, "source_op", None),
            f"{type(exc).__name__}: {exc}\n\t {where}")
    e.__cause__ = exc
    return e


class _Dead:
    """The value of a dead tensor: an output of the untaken side of a Switch, and of
    every node downstream of one (Merge excepted). Kernels never see it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<dead>"


#: the sentinel a ``kind="switch"`` kernel returns for the output it does not take
DEAD = _Dead()

#: ops that run whatever the deadness of their inputs: a _Send passes a dead input on
#: (it must still tell the receiving partition that the tensor is dead); a
#: ControlTrigger (an anchor of TF's loop gradients) runs and is live, as in TF's executor
_DEAD_TRANSPARENT = frozenset({"_Send", "ControlTrigger"})

_REF_FORWARDING = frozenset({"Identity"})


def _forward(x: Any) -> Any:
    return x


class _CNode:
    """A compiled node. The ``frame_*`` fields and those after them are set only in
    plans with loops (:class:`.frames._FramePlan`)."""

    __slots__ = ("node", "index", "compute", "kind", "expensive", "in_slots", "deref",
                 "out_base", "n_out", "succ", "n_pending", "device_name", "arg_index", "label",
                 "ctrl_preds", "dead_transparent",
                 # frame-aware scheduling: the frame it runs in and its index among that
                 # frame's nodes; its role (plain, Enter, Exit, NextIteration); its input
                 # slots and first output slot among the frame's slots
                 "frame", "frame_local_index", "frame_role", "frame_in_slots",
                 "frame_out_base",
                 # per output, the frame-local indices of the successors a dead value of
                 # it kills, and the Exits it skips; all those a dead node kills
                 "dead_output_kills", "dead_output_skips", "dead_node_kills",
                 "const_enter", "child", "frame_succ", "fast", "simple_out")

    def __init__(self) -> None:
        self.label: str | None = None
        self.succ: list[int] = []
        self.deref: tuple[bool, ...] = ()
        self.arg_index = -1


class Plan:
    """A partition compiled into flat lists (see the module docstring).

    :param ir: the partition's nodes (``_Arg`` nodes take ``args`` by their ``index``)
    :param fetches: endpoints whose values a step returns, in order
    :param device_of: ``node -> Device`` (the node's assigned device)
    :param runtime: the runtime whose kernels are used
    :param session_state: the owning session's state (stateful kernels)
    """

    def __init__(self, ir: GraphIR, fetches: Sequence[tuple[str, int]],
                 device_of: Callable[[Node], Any], runtime: Any,
                 session_state: SessionState | None = None):
        """Compile in two passes: the first gives each node its kernel and output
        slots (inputs come first in topological order), the second its input slots,
        successors and pending count."""
        self.runtime = runtime
        self.session_state = session_state or SessionState()
        order = ir.topo_sort()
        devs: dict[int, Any] = {}
        self.nodes: list[_CNode] = []
        slot_of: dict[tuple[str, int], int] = {}
        index_of: dict[str, int] = {}
        nslots = 0
        self.n_args = 0
        ref_slots: list[bool] = []  # slots that may hold a VarRef
        for i, node in enumerate(order):
            c = _CNode()
            c.node, c.index = node, i
            dev = device_of(node)
            devs[id(dev)] = dev
            c.device_name = dev.name
            c.out_base = nslots
            c.n_out = len(node.out_dtypes)
            for k in range(c.n_out):
                slot_of[(node.name, k)] = nslots + k
            nslots += c.n_out
            index_of[node.name] = i
            for k in range(c.n_out):
                ref_slots.append(node.out_dtypes[k].is_ref_dtype)
            if node.type in _REF_FORWARDING and node.inputs and \
                    ref_slots[slot_of[node.inputs[0]]]:
                # TF's Identity of a reference forwards the reference: the variable is
                # read when the value is consumed, so reads ordered after an update (by
                # control dependencies) see it, as with TF's aliased buffers.
                ref_slots[c.out_base] = True
                c.compute, c.kind, c.expensive = _forward, "alias", False
            elif node.type == ARG_OP:
                c.arg_index = node.node_attrs["index"]
                c.compute, c.kind, c.expensive = None, "arg", False
                self.n_args = max(self.n_args, c.arg_index + 1)
            else:
                kdef = runtime.find_kernel(node.type, dev.device_type, node.node_attrs)
                if kdef is None:
                    have = runtime.kernel_device_types(node.type)
                    raise errors.InvalidArgumentError(
                        None, node.source_op,
                        f"No kernel for op '{node.type}' of node '{node.name}' on device "
                        f"{dev.name}. Device types with a kernel for it: {have or 'none'}.")
                c.compute = self._build_kernel(node, kdef, dev)
                c.kind, c.expensive = kdef.kind, kdef.expensive
                if c.kind == "merge" and any(ref_slots[slot_of[e]] for e in node.inputs
                                             if e in slot_of):
                    ref_slots[c.out_base] = True  # it forwards a reference as it is

            self.nodes.append(c)
        self.nslots = nslots
        #: the distinct devices the partition's nodes run on
        self.devices = list(devs.values())
        for c in self.nodes:
            node = c.node
            try:
                c.in_slots = tuple(slot_of[e] for e in node.inputs)
            except KeyError as e:
                raise errors.InternalError(None, node.source_op,
                                           f"node {node.name}: input {e} is not in the step "
                                           "graph") from None
            if c.kind == "alias":
                c.deref = (False,)
            else:
                c.deref = tuple(ref_slots[sl] and not arg.is_ref
                                for sl, arg in zip(c.in_slots, node.input_args()))
            c.ctrl_preds = tuple(index_of[n] for n in node.control_inputs)
            c.dead_transparent = node.type in _DEAD_TRANSPARENT
            preds = {index_of[s] for s, _ in node.inputs} | set(c.ctrl_preds)
            c.n_pending = len(preds)
            for p in preds:
                self.nodes[p].succ.append(c.index)
        try:
            self.fetch_slots = [slot_of[e] for e in fetches]
        except KeyError as e:
            raise errors.InternalError(None, None, f"fetch {e} is not in the step graph") \
                from None
        self.fetch_is_ref = [ref_slots[sl] for sl in self.fetch_slots]
        self.initial_ready = [c.index for c in self.nodes if c.n_pending == 0]

    def _build_kernel(self, node: Node, kdef: Any, dev: Any) -> Callable[..., Any]:
        """``node``'s kernel; a stateful one is shared by every plan of the session, so
        its state (a random op's sequence) survives new step signatures."""
        st = self.session_state
        if node.is_stateful:
            key = (node.name, dev.name)
            with st.lock:
                fn = st.stateful_kernels.get(key)
                if fn is None:
                    fn = st.stateful_kernels[key] = self._call_factory(node, kdef, dev)
            return fn
        return self._call_factory(node, kdef, dev)

    def _call_factory(self, node: Node, kdef: Any, dev: Any) -> Callable[..., Any]:
        try:
            return kdef.factory(KernelContext(node, dev, self.session_state))
        except errors.OpError as e:
            raise op_error_for(e, node, dev.name) from None
        except Exception as e:
            raise op_error_for(e, node, dev.name) from e
