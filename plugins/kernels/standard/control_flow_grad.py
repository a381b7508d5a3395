"""Gradients of while loops, built as TF builds them: with stacks.

The forward loop gets an iteration counter and, for every forward value a gradient
function reads, a ``StackPushV2`` per iteration onto a stack made (``StackV2``) outside
the loop; the backward loop runs the counter's number of iterations and pops those
values in reverse order (``StackPopV2``). Pushes are ordered by the counter (each push
waits for its iteration's counter and the counter's increment waits for the pushes), and
pops likewise by the backward counter, so iterations never interleave their stack
traffic. The backward loop's variables are the gradients of the forward loop variables
plus one accumulator per loop invariant the forward body read; its body differentiates
the forward body (the walk of ``tf.gradients`` restricted to that body).
"""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.graph import Operation, Tensor, api_function, apply_op, get_default_graph
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape

from ._common import ks
from .control_flow_ops import WhileContext, _build_loop, _make_enter, cond_guards

__all__ = ["while_loop_gradient"]


# -- stacks --------------------------------------------------------------------------------
def _handle_shape(op: Any) -> list[TensorShape]:
    return [TensorShape([])]


def _pop_shape(op: Any) -> list[TensorShape]:
    return [TensorShape(None)]


ks.op(
    OpDef("StackV2", inputs=["max_size: int32"], outputs=["handle: resource"],
          attrs=["elem_type: type", "stack_name: string = ''"], is_stateful=True,
          shape_fn=_handle_shape, doc="A new, empty stack (one per run of the op)."),
    OpDef("StackPushV2", inputs=["handle: resource", "elem: T"], outputs=["output: T"],
          attrs=["T: type", "swap_memory: bool = false"], is_stateful=True,
          shape_fn=lambda op: [op.inputs[1].shape], doc="Pushes elem; returns it."),
    OpDef("StackPopV2", inputs=["handle: resource"], outputs=["elem: elem_type"],
          attrs=["elem_type: type"], is_stateful=True, shape_fn=_pop_shape,
          doc="Pops the top element."),
    OpDef("StackCloseV2", inputs=["handle: resource"], is_stateful=True,
          doc="Drops the stack's elements."),
)


class _Stack:
    """A stack's state: the value of a StackV2 handle."""

    __slots__ = ("name", "max_size", "items", "closed", "lock")

    def __init__(self, name: str, max_size: int):
        self.name, self.max_size = name, max_size
        self.items: list[Any] = []
        self.closed = False
        self.lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<stack {self.name}: {len(self.items)} elements>"


def _check_handle(h: Any, op: str) -> _Stack:
    if not isinstance(h, _Stack):
        raise errors.InvalidArgumentError(None, None, f"{op}: the handle is not a stack")
    if h.closed:
        raise errors.InvalidArgumentError(None, None, f"Stack[{h.name}] has already been "
                                          "closed.")
    return h


@ks.kernel("StackV2", all_devices=True)
def _stack_kernel(ctx: Any) -> Any:
    name = ctx.attrs.get("stack_name") or ctx.node_name

    def make(max_size: Any) -> _Stack:
        return _Stack(name, int(max_size))

    return make


@ks.kernel("StackPushV2", all_devices=True)
def _stack_push_kernel(ctx: Any) -> Any:
    def push(h: Any, elem: Any) -> Any:
        st = _check_handle(h, "StackPushV2")
        with st.lock:
            if 0 <= st.max_size <= len(st.items):
                raise errors.InvalidArgumentError(None, None, f"Stack[{st.name}] overflowed "
                                                  f"its max_size ({st.max_size})")
            st.items.append(elem)
        return elem

    return push


@ks.kernel("StackPopV2", all_devices=True)
def _stack_pop_kernel(ctx: Any) -> Any:
    def pop(h: Any) -> Any:
        st = _check_handle(h, "StackPopV2")
        with st.lock:
            if not st.items:
                raise errors.InvalidArgumentError(None, None, "Stack is empty.")
            return st.items.pop()

    return pop


@ks.kernel("StackCloseV2", all_devices=True)
def _stack_close_kernel(ctx: Any) -> Any:
    def close(h: Any) -> None:
        st = _check_handle(h, "StackCloseV2")
        st.closed = True
        st.items.clear()

    return close


ks.not_differentiable("StackV2", "StackPushV2", "StackPopV2", "StackCloseV2", "LoopCond")


@ks.gradient("Enter", "RefEnter", "Exit", "RefExit", "NextIteration", "RefNextIteration")
def _frame_op_grad(op: Any, grad: Any) -> list[Any]:
    # loops are differentiated as a whole (WhileContext.gradient); these are only met
    # by hand-built graphs
    raise LookupError(f"No gradient for {op.type} '{op.name}' outside a tf.while_loop")


# -- the forward loop's side ---------------------------------------------------------------
def _trainable(t: Tensor) -> bool:
    return t.dtype.base_dtype in (_dt.float16, _dt.bfloat16, _dt.float32, _dt.float64,
                                  _dt.complex64, _dt.complex128)


class _ForwardState:
    """What a forward loop gains once it is differentiated: an iteration counter and
    one stack per forward value the backward loop reads."""

    def __init__(self, ctx: WhileContext):
        self.ctx = ctx
        self.stacks: dict[Tensor, Tensor] = {}
        g = get_default_graph()
        with g.control_dependencies(None):
            g._control_flow_context = ctx._outer
            zero = apply_op("Const", name="f_count_init", value=np.zeros((), np.int32),
                            dtype=_dt.int32)
        enter = _make_enter(ctx, zero, is_constant=False, name="f_count")
        with ctx.raw():
            m = apply_op("Merge", name="f_count_merge", inputs=[enter, enter])[0]
            f, t = apply_op("Switch", name="f_count_switch", data=m, pred=ctx.pivot)
            ident = apply_op("Identity", name="f_count_identity", input=t)
            one = apply_op("Const", name="f_count_one", value=np.ones((), np.int32),
                           dtype=_dt.int32)
            one.op._add_control_input(ident.op)
            add = apply_op("AddV2", name="f_count_add", x=ident, y=one)
            nxt = apply_op("NextIteration", name="f_count_next", data=add)
            m.op._update_input(1, nxt)
            self.count = apply_op("Exit", name="f_count_exit", data=f)
        if ctx._outer is not None:
            ctx._outer.ops.add(self.count.op)
        self.counter_identity = ident
        self.counter_add = add.op

    def stack_for(self, t: Tensor) -> Tensor:
        """The stack holding ``t``'s value of every iteration (made once)."""
        h = self.stacks.get(t)
        if h is not None:
            return h
        ctx = self.ctx
        g = get_default_graph()
        with g.control_dependencies(None):
            g._control_flow_context = ctx._outer
            h = apply_op("StackV2", name="f_acc", max_size=np.int32(-1),
                         elem_type=t.dtype.base_dtype, stack_name="f_acc")
        saved = g._control_flow_context
        g._control_flow_context = ctx
        try:
            h_in = ctx.capture(h)
        finally:
            g._control_flow_context = saved
        with ctx.raw():
            push = apply_op("StackPushV2", name="f_acc_push", handle=h_in, elem=t,
                            swap_memory=bool(ctx.swap_memory))
            push.op._add_control_input(self.counter_identity.op)
        # a value inside a conditional is pushed only in iterations that take its branch:
        # the counter then waits for "pushed, or the branch was not taken"
        guards = cond_guards(t, ctx)
        self.counter_add._add_control_input(
            _after_or_untaken(ctx, push.op, [(c.pred, side) for c, side in guards]))
        self.stacks[t] = h
        return h


def _forward_state(ctx: WhileContext) -> _ForwardState:
    st = getattr(ctx, "_forward_state", None)
    if st is None:
        st = ctx._forward_state = _ForwardState(ctx)
    return st


class _BackwardState:
    """The backward loop's view of the forward loop's values: a loop invariant of the
    forward loop is read as it is; any other forward value is popped from its stack."""

    def __init__(self, bctx: WhileContext, fstate: _ForwardState):
        self.bctx, self.fstate = bctx, fstate
        self.pops: dict[Tensor, Tensor] = {}
        self.pop_ops: list[Operation] = []

    def backward_value(self, t: Tensor) -> Tensor | None:
        fctx = self.fstate.ctx
        outer = fctx.invariant_of.get(t)
        if outer is not None:
            return self.bctx.capture(outer)
        if t.op not in fctx.ops:
            return None
        from .control_flow_ops import loop_of

        owner = loop_of(t.op)
        nested_exit = t.op.type in ("Exit", "RefExit") and owner is not None and \
            owner.outer_loop is fctx
        if (owner is not fctx and not nested_exit) or t.op in fctx.enter_ops:
            raise ValueError(f"Cannot use '{t.name}' of a nested loop in a gradient of "
                             f"the loop {fctx.name}")
        p = self.pops.get(t)
        if p is not None:
            return p
        if t.op.type == "Const" and not t.op.inputs and not cond_guards(t, fctx):
            # a constant inside the forward loop has the same value in every iteration:
            # the backward loop makes its own copy instead of pushing and popping it
            # (TF copies loop-invariant constants into the gradient loop too)
            with self.bctx.raw():
                p = apply_op("Const", name="b_const", value=t.op.node_attrs["value"],
                             dtype=t.dtype.base_dtype)
                p.op._add_control_input(self.bctx.pivot_for_body.op)
            self.pops[t] = p
            return p
        h = self.fstate.stack_for(t)
        bctx = self.bctx
        h_in = bctx.capture(h)
        guards = cond_guards(t, fctx)
        # inside a conditional: pop only in iterations whose forward pass took the
        # branch, by the predicates popped in step with it (TF's cond-in-loop gradient)
        preds = [(self.backward_value(c.pred), side) for c, side in guards]
        with bctx.raw():
            if preds:
                h_in = apply_op("Switch", name="b_acc_switch", data=h_in,
                                pred=preds[0][0])[preds[0][1]]
            p = apply_op("StackPopV2", name="b_acc_pop", handle=h_in,
                         elem_type=t.dtype.base_dtype)
            p._shape = t.shape
            if not preds:
                p.op._add_control_input(bctx.pivot_for_body.op)
        self.pops[t] = p
        self.pop_ops.append(_after_or_untaken(bctx, p.op, preds))
        return p


def _after_or_untaken(ctx: WhileContext, op: Operation,
                      guards: list[tuple[Tensor, int]]) -> Operation:
    """An op of ``ctx`` that runs in every iteration once ``op`` ran, or once it is
    known that ``op`` is dead (one of the ``(predicate, side)`` guards it runs under,
    innermost first, went the other way)."""
    if not guards:
        return op
    with ctx.raw():
        for pred, side in guards:
            done = apply_op("Const", name="b_sync_done" if ctx.forward else "f_sync_done",
                            value=np.bool_(True), dtype=_dt.bool)
            done.op._add_control_input(op)
            other = apply_op("Switch", name="sync_switch", data=pred, pred=pred)[1 - side]
            op = apply_op("Merge", name="sync_merge", inputs=[done, other])[0].op
    return op


# -- the backward loop ---------------------------------------------------------------------
def while_loop_gradient(ctx: WhileContext, exit_grads: list[Any]) -> dict[Operation, Any]:
    """Gradients of the inputs of the loop ``ctx`` (by Enter op) given the gradients of
    its exits (None: no gradient)."""
    if not ctx.back_prop:
        return {}
    from flowrt.gradients import backprop

    g = get_default_graph()
    fstate = _forward_state(ctx)
    var_idx = [j for j, m in enumerate(ctx.merges) if _trainable(m)]
    invariants = [(e, o) for e, o in ctx.invariant_of.items() if _trainable(e)]
    if not var_idx and not invariants:
        return {}
    zeros_like = api_function("zeros_like")
    init_g = [exit_grads[j] if exit_grads[j] is not None else zeros_like(ctx.exits[j])
              for j in var_idx]
    init_acc = [zeros_like(o) for _, o in invariants]
    structure = frozenset(ctx.enter_ops) | {t.op for t in ctx.merges} | \
        {t.op for t, _ in ctx.switches} | {t.op for t in ctx.next_iterations} | \
        {t.op for t in ctx.exits} | {ctx.pivot.op}
    ys = [ctx.next_iterations[j].op.inputs[0] for j in var_idx]
    xs = [ctx.identities[j] for j in var_idx] + [e for e, _ in invariants]
    nv = len(var_idx)

    def cond(k: Tensor, *rest: Tensor) -> Tensor:
        return apply_op("Greater", x=k, y=np.zeros((), np.int32))

    def body(k: Tensor, *rest: Tensor) -> list[Tensor]:
        k1 = apply_op("Sub", x=k, y=np.ones((), np.int32))
        gs, accs = list(rest[:nv]), list(rest[nv:])
        grads = backprop(ys, gs, xs, [], level=ctx, boundary=structure)
        new_gs = [gr if gr is not None else zeros_like(gj)
                  for gr, gj in zip(grads[:nv], gs)]
        new_accs = [a if gr is None else apply_op("AddV2", x=a, y=gr)
                    for gr, a in zip(grads[nv:], accs)]
        for p in bstate.pop_ops:  # the next iteration pops after this one's pops
            k1.op._add_control_input(p)
        return [k1] + new_gs + new_accs

    bctx = WhileContext(g.unique_name("while_context"), ctx.parallel_iterations, False,
                        ctx.swap_memory, g._control_flow_context)
    bctx.forward = ctx
    bstate = bctx.grad_state = _BackwardState(bctx, fstate)
    outs = _build_loop(bctx, cond, body, [fstate.count] + init_g + init_acc, None)
    out: dict[Operation, Any] = {}
    for j, gv in zip(var_idx, outs[1:1 + nv]):
        out[ctx.loop_enters[j].op] = gv
    for (e, _), acc in zip(invariants, outs[1 + nv:]):
        out[e.op] = acc
    return out

