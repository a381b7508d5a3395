"""The frame-aware scheduler: how a plan with loops (``Enter``/``Exit``/
``NextIteration``) runs.

A loop is a *frame*: ``Enter`` moves a value from the enclosing frame into a new frame
instance (one per loop run: per parent frame instance and parent iteration);
``NextIteration`` moves a value to the next iteration of its frame; ``Exit`` hands a
value back to the parent frame. Values and pending counts live per (frame instance,
iteration), so an iteration's state is dropped as soon as it is done and memory does
not grow with the iteration count. A constant ``Enter`` (a loop invariant) is seen by
every iteration. ``Exit`` values reach the parent once the whole frame instance is
done (then every push of the loop's stacks has happened); an ``Exit`` that never got a
live value is dead in the parent (a loop in an untaken conditional branch).

:class:`_FramePlan` is the static part, computed once per plan; :func:`run_frames` runs
one step.
"""
from __future__ import annotations

import hashlib
import queue
import threading
import time
from typing import Any, Callable, Sequence

import numpy as np

from ..base import errors
from ..plugin.resources import VarRef
from .dataflow import inter_op_pool
from .ir import Node
from .plan import DEAD, NodeStat, StepContext, _CNode, _stat, op_error_for
from .rendezvous import FrameRendezvous

__all__ = ["run_frames", "FRAME_OPS"]

_ENTER_OPS = frozenset({"Enter", "RefEnter"})
_EXIT_OPS = frozenset({"Exit", "RefExit"})
_NEXT_OPS = frozenset({"NextIteration", "RefNextIteration"})
#: the ops that make a plan run on this scheduler
FRAME_OPS = _ENTER_OPS | _EXIT_OPS | _NEXT_OPS

#: a node's role in its frame (``_CNode.frame_role``)
_F_PLAIN, _F_ENTER, _F_EXIT, _F_NEXT = 0, 1, 2, 3
_SLOW_KINDS = frozenset({"arg", "merge", "async", "step", "alias"})


class _FrameInfo:
    """A frame of the plan (static): its nodes, slots and initial pending counts."""

    __slots__ = ("id", "name", "parent", "nslots", "nnodes", "pending", "n_enters",
                 "exits", "parallel")

    def __init__(self, fid: int, name: str, parent: "_FrameInfo | None"):
        self.id, self.name, self.parent = fid, name, parent
        self.nslots = 0
        self.nnodes = 0
        self.pending: list[int] = []
        self.n_enters = 0
        self.exits: list[int] = []
        self.parallel = 10


def _frame_name_of(node: Node) -> str:
    v = node.node_attrs.get("frame_name", "")
    return v.decode() if isinstance(v, bytes) else str(v)


class _FramePlan:
    """Static control-flow information of a plan with loops (TF's ControlFlowInfo):
    the frame every node runs in, frame-local slots and pending counts."""

    def __init__(self, ex: Any, fetches: Sequence[tuple[str, int]]):
        """Assign every node of ``ex`` (an ``Executor`` being built) its frame, checking
        that every edge stays inside one frame, then its frame-local slots, pending
        count and dead-value successors."""
        nodes = ex.nodes
        root = _FrameInfo(0, "_root", None)
        frames = [root]
        by_key: dict[tuple[int, str], _FrameInfo] = {}
        index_of = {c.node.name: c.index for c in nodes}
        out_frame: list[_FrameInfo | None] = [None] * len(nodes)
        preds_of: list[list[int]] = []
        for c in nodes:  # topological order: only loop back edges come from later nodes
            node = c.node
            preds = [index_of[n] for n, _ in node.inputs] + \
                [index_of[n] for n in node.control_inputs]
            preds_of.append(preds)
            f: _FrameInfo | None = None
            first = -1
            for p in preds:
                pf = out_frame[p]
                if pf is None:
                    continue  # a back edge: checked below
                if f is None:
                    f, first = pf, p
                elif pf is not f:
                    raise errors.InvalidArgumentError(
                        None, node.source_op,
                        f"{node.name} has inputs from different frames. The input "
                        f"{nodes[first].node.name} is in frame '{f.name}'. The input "
                        f"{nodes[p].node.name} is in frame '{pf.name}'.")
            f = f or root
            c.frame = f
            c.frame_local_index = f.nnodes
            f.nnodes += 1
            t = node.type
            c.const_enter = False
            c.child = None
            if t in _ENTER_OPS:
                name = _frame_name_of(node)
                child = by_key.get((f.id, name))
                if child is None:
                    child = by_key[(f.id, name)] = _FrameInfo(len(frames), name, f)
                    child.parallel = max(1, int(node.node_attrs.get("parallel_iterations",
                                                                    10) or 10))
                    frames.append(child)
                child.n_enters += 1
                c.frame_role, c.child = _F_ENTER, child
                c.const_enter = bool(node.node_attrs.get("is_constant", False))
                out_frame[c.index] = child
            elif t in _EXIT_OPS:
                if f.parent is None:
                    raise errors.InvalidArgumentError(
                        None, node.source_op, f"Exit node {node.name} is not inside a "
                        "while loop (its input is in the root frame)")
                c.frame_role = _F_EXIT
                f.exits.append(c.index)
                out_frame[c.index] = f.parent
            else:
                c.frame_role = _F_NEXT if t in _NEXT_OPS else _F_PLAIN
                out_frame[c.index] = f
        for c, preds in zip(nodes, preds_of):  # every edge stays inside one frame
            for p in preds:
                if out_frame[p] is not c.frame:
                    raise errors.InvalidArgumentError(
                        None, c.node.source_op,
                        f"{c.node.name} has inputs from different frames. The input "
                        f"{nodes[p].node.name} is in frame '{out_frame[p].name}', the node "
                        f"in frame '{c.frame.name}'.")
        # frame-local slots, pending counts and the successors a dead output kills
        for c in nodes:
            of = out_frame[c.index]
            c.frame_out_base = of.nslots
            of.nslots += c.n_out
        for c in nodes:
            node = c.node
            c.frame_in_slots = tuple(nodes[index_of[n]].frame_out_base + k
                                     for n, k in node.inputs)
            preds = set(preds_of[c.index])
            if c.kind == "merge":  # a back edge never counts: it starts an iteration
                preds = {p for p in preds if nodes[p].frame_role != _F_NEXT}
            c.frame.pending.append(len(preds))
            kill: list[list[int]] = [[] for _ in range(c.n_out)]
            exits: list[list[int]] = [[] for _ in range(c.n_out)]
            for s in c.succ:
                sc = nodes[s]
                if sc.kind == "merge":
                    continue
                if c.kind == "switch" and sc.frame_role == _F_EXIT and \
                        node.name not in sc.node.control_inputs:
                    # a dead Exit does nothing: the Switch's dead side skips it (every
                    # iteration but the last)
                    exits[sc.node.inputs[0][1]].append(s)
                    continue
                for (n, k) in sc.node.inputs:
                    if n == node.name and s not in kill[k]:
                        kill[k].append(s)
            # (frame-local indices: what the scheduler indexes per iteration)
            c.dead_output_kills = tuple(tuple(nodes[s].frame_local_index for s in k)
                                        for k in kill)
            c.dead_output_skips = tuple(frozenset(e) for e in exits)
            c.dead_node_kills = tuple(nodes[s].frame_local_index for s in c.succ
                                      if nodes[s].kind != "merge")
        for c in nodes:
            # successors as (index, frame-local index, is a Merge); the hot path of a
            # plain synchronous kernel: one output, no Merge successor, no references
            c.frame_succ = tuple((s, nodes[s].frame_local_index, nodes[s].kind == "merge")
                                 for s in c.succ)
            c.fast = (c.frame_role == _F_PLAIN and c.kind not in _SLOW_KINDS and
                      True not in c.deref and not c.dead_transparent and
                      not (c.expensive and ex.use_pool))
            c.simple_out = (c.n_out == 1 and c.kind != "switch" and
                            not any(m for _, _, m in c.frame_succ))
        for name, k in fetches:
            c = nodes[index_of[name]]
            if out_frame[c.index] is not root:
                raise errors.InvalidArgumentError(
                    None, c.node.source_op, f"Cannot fetch {name}:{k}: it is inside the "
                    f"while loop frame '{out_frame[c.index].name}'; fetch the loop's "
                    "results (its Exit outputs) instead")
        self.root = root
        self.frames = frames
        self.fetch_slots = [nodes[index_of[n]].frame_out_base + k for n, k in fetches]
        self.root_count = root.nnodes


def _frame_id(name: str) -> int:
    """A frame instance's id in rendezvous keys: the same in every partition and
    process that runs the frame (a 64-bit hash of its full name)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


class _Iter:
    """One iteration of one frame instance: its values and pending counts."""

    __slots__ = ("frame", "n", "vals", "pending", "dead", "outstanding", "children",
                 "child_map", "view")

    def __init__(self, frame: "_Frame", n: int):
        info = frame.info
        self.frame, self.n = frame, n
        self.vals: list[Any] = [None] * info.nslots
        self.pending = info.pending[:]
        self.dead: set[int] | None = None  # nodes with a dead input
        self.outstanding = 0  # nodes ready or running
        self.children = 0  # child frame instances still running
        self.child_map: dict[int, _Frame] | None = None
        self.view: Any = None  # the step as kernels in this iteration see it


class _Frame:
    """One frame instance (one run of a loop)."""

    __slots__ = ("info", "parent_it", "name", "fid", "iters", "pending_enters",
                 "loop_invs", "newest", "deferred", "exits", "live_exits")

    def __init__(self, info: _FrameInfo, parent_it: _Iter | None, name: str, fid: int):
        self.info, self.parent_it, self.name, self.fid = info, parent_it, name, fid
        self.iters: dict[int, _Iter] = {}
        self.pending_enters = info.n_enters
        self.loop_invs: list[tuple[_CNode, Any]] = []
        self.newest = 0
        self.deferred: list[tuple[_CNode, Any]] = []  # values for iteration newest + 1
        self.exits: list[tuple[_CNode, Any]] = []
        self.live_exits: set[int] = set()


class _FrameStepView:
    """The step as a kernel inside a loop sees it: its rendezvous puts the frame
    instance and iteration into every key (TF's ``frame_id:iter`` key suffix)."""

    __slots__ = ("_step", "rendezvous")

    def __init__(self, step: StepContext, frame_id: int, iter_id: int):
        self._step = step
        self.rendezvous = None if step.rendezvous is None else \
            FrameRendezvous(step.rendezvous, frame_id, iter_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._step, name)


def run_frames(ex: Any, args: Sequence[Any], step: StepContext,
               stats: list[NodeStat] | None, timeout: float | None,
               pool_task: Callable[..., None]) -> list[Any]:
    """Run one step of the plan with loops ``ex`` (an ``Executor`` with a frame plan);
    returns the fetched values.

    ``pool_task(c, view, ins, done_q, clock, it)`` runs an expensive kernel on the
    inter-op pool (:func:`_run_on_pool_framed`; a parameter so that tests can watch it).
    """
    plan = ex.frames
    assert plan is not None
    nodes = ex.nodes
    root = _Frame(plan.root, None, "_root", 0)
    root_it = _Iter(root, 0)
    root.iters[0] = root_it
    ready: list[tuple[int, _Iter]] = []
    done_q: "queue.SimpleQueue[tuple[int, _Iter, Any, BaseException | None, float, float, int]]"\
        = queue.SimpleQueue()
    clock = time.perf_counter
    deadline = None if not timeout else clock() + timeout
    state = {"root_done": 0, "async": 0}
    pool = None

    ready_append = ready.append

    def push(s: int, it: _Iter) -> None:
        it.outstanding += 1
        ready_append((s, it))

    def deliver(c: _CNode, outs: Any, it: _Iter, dead_all: bool) -> None:
        """Store ``c``'s outputs in ``it`` and count them down at the consumers."""
        vals, pending = it.vals, it.pending
        base = c.frame_out_base
        n_out = c.n_out
        if n_out == 1:
            vals[base] = outs
        elif n_out:
            if len(outs) != n_out:
                raise errors.InternalError(None, c.node.source_op,
                                           f"kernel of {c.node.name} returned {len(outs)} "
                                           f"outputs, expected {n_out}")
            vals[base:base + n_out] = outs
        skip: frozenset[int] | tuple[()] = ()  # dead Exits: not scheduled at all
        if dead_all:
            if c.dead_node_kills:
                d = it.dead
                if d is None:
                    d = it.dead = set()
                d.update(c.dead_node_kills)
        elif c.kind == "switch" or (n_out == 1 and outs is DEAD):
            for k in range(n_out):
                if vals[base + k] is DEAD:
                    if c.dead_output_kills[k]:
                        d = it.dead
                        if d is None:
                            d = it.dead = set()
                        d.update(c.dead_output_kills[k])
                    if c.dead_output_skips and c.dead_output_skips[k]:
                        skip = c.dead_output_skips[k]
        for s, li, is_merge in c.frame_succ:
            p = pending[li]
            if is_merge:
                if p < 0:
                    continue  # fired already
                for sl in nodes[s].frame_in_slots:
                    v = vals[sl]
                    if v is not None and v is not DEAD:
                        pending[li] = -1
                        it.outstanding += 1
                        ready_append((s, it))
                        break
                else:
                    if c.frame_role != _F_NEXT:
                        p -= 1
                        pending[li] = p
                        if p == 0:
                            pending[li] = -1
                            it.outstanding += 1
                            ready_append((s, it))
                continue
            p -= 1
            pending[li] = p
            if p == 0:
                if skip and s in skip:
                    continue
                it.outstanding += 1
                ready_append((s, it))

    def new_iter(fr: _Frame, n: int) -> _Iter:
        it = fr.iters[n] = _Iter(fr, n)
        if n > fr.newest:
            fr.newest = n
        for c, v in fr.loop_invs:
            deliver(c, v, it, v is DEAD)
        return it

    def child_frame(c: _CNode, it: _Iter) -> _Frame:
        info = c.child
        cm = it.child_map
        if cm is None:
            cm = it.child_map = {}
        fr = cm.get(info.id)
        if fr is None:
            name = f"{it.frame.name};{it.n};{info.name}"
            fr = cm[info.id] = _Frame(info, it, name, _frame_id(name))
            it.children += 1
            new_iter(fr, 0)
        return fr

    def iter_done(it: _Iter) -> bool:
        if it.outstanding or it.children:
            return False
        fr = it.frame
        if it.n == 0:
            return fr.pending_enters == 0
        return (it.n - 1) not in fr.iters

    def retire(it: _Iter) -> None:
        """``it`` finished a node (or a child frame): drop finished iterations and
        frames, start deferred iterations, hand exits to the parent."""
        while it is not None and iter_done(it):
            fr = it.frame
            if fr.parent_it is None:
                return  # the root: the step ends when nothing is left to run
            del fr.iters[it.n]
            if fr.deferred and len(fr.iters) < fr.info.parallel:
                vals, fr.deferred = fr.deferred, []
                started = new_iter(fr, fr.newest + 1)
                for c, v in vals:
                    deliver(c, v, started, False)
            nxt = fr.iters.get(it.n + 1)
            if nxt is not None:
                it = nxt
                continue
            if fr.iters or fr.pending_enters:
                return
            # the frame instance is done: its exits reach the parent iteration
            pit = fr.parent_it
            for c, v in fr.exits:
                deliver(c, v, pit, False)
            for i in fr.info.exits:
                if i not in fr.live_exits:
                    deliver(nodes[i], DEAD, pit, True)
            del pit.child_map[fr.info.id]
            pit.children -= 1
            it = pit

    def complete(c: _CNode, it: _Iter, r: Any, dead: bool) -> None:
        """Route ``c``'s result by the node's role, then retire it."""
        fk = c.frame_role
        if fk == _F_PLAIN:
            deliver(c, r, it, dead)
        elif fk == _F_ENTER:
            fr = child_frame(c, it)
            fr.pending_enters -= 1
            if c.const_enter:
                fr.loop_invs.append((c, r))
                for cit in list(fr.iters.values()):
                    deliver(c, r, cit, dead)
            else:
                it0 = fr.iters.get(0)
                if it0 is not None:
                    deliver(c, r, it0, dead)
            it0 = fr.iters.get(0)
            if it0 is not None:
                retire(it0)
        elif fk == _F_NEXT:
            if not dead:
                fr = it.frame
                n1 = it.n + 1
                nxt = fr.iters.get(n1)
                if nxt is None:
                    if fr.deferred or len(fr.iters) >= fr.info.parallel:
                        fr.deferred.append((c, r))  # parallel_iterations reached
                    else:
                        deliver(c, r, new_iter(fr, n1), False)
                else:
                    deliver(c, r, nxt, False)
        elif not dead:  # a live Exit
            fr = it.frame
            fr.exits.append((c, r))
            fr.live_exits.add(c.index)
        it.outstanding -= 1
        if it is root_it:
            state["root_done"] += 1
        elif not it.outstanding:
            retire(it)

    def view(it: _Iter) -> Any:
        if it is root_it:
            return step
        v = it.view
        if v is None:
            v = it.view = _FrameStepView(step, it.frame.fid, it.n)
        return v

    def fail(e: BaseException, c: _CNode) -> BaseException:
        err = op_error_for(e, c.node, c.device_name)
        step.abort(err)
        return err

    for i in reversed(ex.initial_ready):
        if nodes[i].frame is plan.root:
            push(i, root_it)
    error: BaseException | None = None
    with np.errstate(all="ignore"):
        while True:
            while ready and error is None:
                i, it = ready.pop()
                c = nodes[i]
                if c.fast:  # a plain synchronous kernel: the hot path, inlined
                    d = it.dead
                    if d is None or c.frame_local_index not in d:
                        vals = it.vals
                        t0 = clock() if stats is not None else 0.0
                        try:
                            r = c.compute(*[vals[s] for s in c.frame_in_slots])
                            if stats is not None:
                                stats.append(_stat(c, t0, clock(), threading.get_ident()))
                            if c.simple_out and r is not DEAD:
                                vals[c.frame_out_base] = r
                                pending = it.pending
                                for s, li, _ in c.frame_succ:
                                    p = pending[li] - 1
                                    pending[li] = p
                                    if not p:
                                        it.outstanding += 1
                                        ready_append((s, it))
                            else:
                                deliver(c, r, it, False)
                        except Exception as e:
                            error = fail(e, c)
                            break
                        it.outstanding -= 1
                        if it is root_it:
                            state["root_done"] += 1
                        elif not it.outstanding:
                            retire(it)
                        continue
                kind = c.kind
                vals = it.vals
                if kind == "arg":
                    complete(c, it, args[c.arg_index], False)
                    continue
                if kind == "merge":
                    for k, sl in enumerate(c.frame_in_slots):
                        v = vals[sl]
                        if v is not None and v is not DEAD:
                            complete(c, it, (v, np.int32(k)), False)
                            break
                    else:
                        complete(c, it, (DEAD, DEAD), True)
                    continue
                d = it.dead
                if d is not None and c.frame_local_index in d and not c.dead_transparent:
                    n = c.n_out
                    complete(c, it, DEAD if n == 1 else (DEAD,) * n if n else None, True)
                    continue
                try:
                    if True in c.deref:
                        ins = [vals[s].read() if dr and type(vals[s]) is VarRef else vals[s]
                               for s, dr in zip(c.frame_in_slots, c.deref)]
                    else:
                        ins = [vals[s] for s in c.frame_in_slots]
                except Exception as e:
                    error = fail(e, c)
                    break
                if kind == "alias" or c.frame_role != _F_PLAIN:
                    complete(c, it, ins[0], ins[0] is DEAD)
                    continue
                if kind == "async":
                    state["async"] += 1
                    t0 = clock()

                    def done(result: Any = None, exc: BaseException | None = None,
                             i: int = i, it: _Iter = it, t0: float = t0) -> None:
                        done_q.put((i, it, result, exc, t0, clock(), threading.get_ident()))

                    try:
                        c.compute(view(it), done, *ins)
                    except Exception as e:
                        done(None, e)
                    continue
                if c.expensive and ex.use_pool and (ready or state["async"]):
                    if pool is None:
                        pool = inter_op_pool(ex.inter_op_threads)
                    state["async"] += 1
                    pool.submit(pool_task, c, view(it), ins, done_q, clock, it)
                    continue
                t0 = clock() if stats is not None else 0.0
                try:
                    r = c.compute(view(it), *ins) if kind == "step" else c.compute(*ins)
                    if stats is not None:
                        stats.append(_stat(c, t0, clock(), threading.get_ident()))
                    # (complete() for a plain node, inlined: the hot path)
                    deliver(c, r, it, False)
                    it.outstanding -= 1
                    if it is root_it:
                        state["root_done"] += 1
                    elif not it.outstanding:
                        retire(it)
                except Exception as e:
                    error = fail(e, c)
                    break
            if error is not None:
                while state["async"]:
                    try:
                        done_q.get(timeout=10.0)
                    except queue.Empty:
                        break
                    state["async"] -= 1
                raise error
            if not state["async"]:
                if state["root_done"] == plan.root_count and not root_it.children:
                    break
                stuck = [c.node.name for c in nodes if c.frame is plan.root and
                         root_it.pending[c.frame_local_index] > 0]
                error = errors.InternalError(None, None, "step deadlocked: nodes never "
                                             f"became ready: {stuck[:5]}")
                step.abort(error)
                raise error
            try:
                i, it, r, exc, t0, t1, tid = done_q.get(
                    timeout=None if deadline is None else max(0.0, deadline - clock()))
            except queue.Empty:
                error = errors.DeadlineExceededError(
                    None, None, f"Timed out waiting for the step to finish (deadline "
                    f"{timeout:g} s); {state['async']} node(s) were still blocked")
                step.abort(error)
                continue
            state["async"] -= 1
            c = nodes[i]
            if exc is not None:
                error = fail(exc, c)
                continue
            if stats is not None:
                stats.append(_stat(c, t0, t1, tid))
            try:
                complete(c, it, r, r is DEAD if c.n_out == 1 else False)
            except Exception as e:
                error = fail(e, c)
    return [root_it.vals[s] for s in plan.fetch_slots]


def _run_on_pool_framed(c: _CNode, step: Any, ins: list[Any], done_q: Any,
                        clock: Callable[[], float], it: _Iter) -> None:
    t0 = clock()
    tid = threading.get_ident()
    try:
        r = c.compute(step, *ins) if c.kind == "step" else c.compute(*ins)
    except BaseException as e:  # noqa: BLE001 - reported to the scheduler
        done_q.put((c.index, it, None, e, t0, clock(), tid))
        return
    done_q.put((c.index, it, r, None, t0, clock(), tid))
