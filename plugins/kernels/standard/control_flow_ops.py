"""Control flow in TF1's graph form: ``tf.cond``, ``tf.case`` and ``tf.while_loop``.

``cond`` routes every tensor a branch reads from outside through a ``Switch`` on the
predicate: the untaken side's outputs are dead, so every op of the untaken branch is
dead and never runs (its assignments, asserts and queue ops included). A ``Merge`` per
result forwards whichever branch was live.

``while_loop`` builds TF's loop: per loop variable ``Enter -> Merge -> Switch`` on the
``LoopCond`` of the predicate, the body on the Switch's true side, ``NextIteration``
back into the Merge and ``Exit`` on the false side. Tensors the body or the predicate
read from outside enter through one ``Enter(is_constant=True)`` each (a loop invariant);
ops with no input from inside the loop hang on the loop's pivot, so they run once per
iteration. The executor runs such plans frame by frame and iteration by iteration.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt.executor import DEAD
from flowrt.graph import (Operation, Tensor, apply_op, convert_to_tensor, get_default_graph,
                          name_scope)
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import ks


def _switch_shape(op: Any) -> list[TensorShape]:
    if not op.inputs[1].shape.is_compatible_with(TensorShape([])):
        raise ValueError(f"Switch '{op.name}': pred must be a scalar, got shape "
                         f"{op.inputs[1].shape}")
    return [op.inputs[0].shape, op.inputs[0].shape]


def _merge_shape(op: Any) -> list[TensorShape]:
    shape = op.inputs[0].shape
    for t in op.inputs[1:]:
        if not shape.is_compatible_with(t.shape):
            shape = unknown_shape() if shape.ndims != t.shape.ndims else TensorShape(
                [a if a == b else None for a, b in zip(shape.as_tuple(), t.shape.as_tuple())])
        else:
            shape = shape.merge_with(t.shape) if shape.ndims is not None else shape
    return [shape, TensorShape([])]


ks.op(
    OpDef("Switch", inputs=["data: T", "pred: bool"],
          outputs=["output_false: T", "output_true: T"], attrs=["T: type"],
          shape_fn=_switch_shape, doc="Forwards data to the output pred selects."),
    OpDef("RefSwitch", inputs=["data: Ref(T)", "pred: bool"],
          outputs=["output_false: Ref(T)", "output_true: Ref(T)"], attrs=["T: type"],
          shape_fn=_switch_shape, allows_uninitialized_input=True,
          doc="Switch for references."),
    OpDef("Merge", inputs=["inputs: N * T"], outputs=["output: T", "value_index: int32"],
          attrs=["T: type", "N: int >= 1"], shape_fn=_merge_shape,
          doc="Forwards the first input that is live."),
    OpDef("RefMerge", inputs=["inputs: Ref(N * T)"],
          outputs=["output: Ref(T)", "value_index: int32"],
          attrs=["T: type", "N: int >= 1"], shape_fn=_merge_shape,
          doc="Merge for references."),
)


def _same_shape(op: Any) -> list[TensorShape]:
    return [op.inputs[0].shape]


def _loop_cond_shape(op: Any) -> list[TensorShape]:
    shape = op.inputs[0].shape
    if not shape.is_compatible_with(TensorShape([])):
        raise ValueError(f"Shape must be rank 0 but is rank {shape.ndims} for "
                         f"'{op.name}' (op: 'LoopCond') with input shapes: {shape}.")
    return [TensorShape([])]


_ENTER_ATTRS = ["T: type", "frame_name: string", "is_constant: bool = false",
                "parallel_iterations: int = 10"]
ks.op(
    OpDef("Enter", inputs=["data: T"], outputs=["output: T"], attrs=_ENTER_ATTRS,
          shape_fn=_same_shape, doc="Makes its input available to the child frame "
          "frame_name (every iteration of it when is_constant)."),
    OpDef("RefEnter", inputs=["data: Ref(T)"], outputs=["output: Ref(T)"],
          attrs=_ENTER_ATTRS, shape_fn=_same_shape, allows_uninitialized_input=True,
          doc="Enter for references."),
    OpDef("Exit", inputs=["data: T"], outputs=["output: T"], attrs=["T: type"],
          shape_fn=_same_shape, doc="Makes its input available to the parent frame."),
    OpDef("RefExit", inputs=["data: Ref(T)"], outputs=["output: Ref(T)"],
          attrs=["T: type"], shape_fn=_same_shape, doc="Exit for references."),
    OpDef("NextIteration", inputs=["data: T"], outputs=["output: T"], attrs=["T: type"],
          shape_fn=_same_shape, doc="Makes its input available to the next iteration."),
    OpDef("RefNextIteration", inputs=["data: Ref(T)"], outputs=["output: Ref(T)"],
          attrs=["T: type"], shape_fn=_same_shape, doc="NextIteration for references."),
    OpDef("LoopCond", inputs=["input: bool"], outputs=["output: bool"],
          shape_fn=_loop_cond_shape, doc="The loop's predicate (the pivot of its "
          "Switches)."),
)


@ks.kernel("Enter", "RefEnter", "Exit", "RefExit", "NextIteration", "RefNextIteration",
           "LoopCond", all_devices=True)
def _frame_forward_kernel(ctx: Any) -> Any:
    # the frame-aware executor routes Enter/Exit/NextIteration values itself; the
    # kernel (LoopCond, or a frame op run outside a loop plan) forwards its input
    def forward(x: Any) -> Any:
        return x

    return forward


@ks.kernel("Switch", "RefSwitch", kind="switch", all_devices=True)
def _switch_kernel(ctx: Any) -> Any:
    def switch(data: Any, pred: Any) -> tuple[Any, Any]:
        return (DEAD, data) if bool(pred) else (data, DEAD)

    return switch


@ks.kernel("Merge", "RefMerge", kind="merge", all_devices=True)
def _merge_kernel(ctx: Any) -> Any:
    # the executor forwards the live input itself; this is only called if a Merge is
    # run outside a dataflow step (it then takes the first input that has a value)
    def merge(*inputs: Any) -> tuple[Any, Any]:
        for k, v in enumerate(inputs):
            if v is not DEAD:
                return v, np.int32(k)
        return DEAD, DEAD

    return merge


# -- building conditionals ---------------------------------------------------------------
class CondContext:
    """The branch being built: ops created inside read outside tensors through a Switch
    on the predicate, and ops with no inputs hang on the branch's pivot."""

    def __init__(self, pred: Tensor, pivot: Tensor, branch: int):
        self.pred, self.pivot, self.branch = pred, pivot, branch
        self.ops: set[Operation] = set()
        self._switched: dict[Tensor, Tensor] = {}
        self._outer: Any = None

    def __enter__(self) -> "CondContext":
        g = get_default_graph()
        self._outer = g._control_flow_context
        g._control_flow_context = self
        return self

    def __exit__(self, *exc: Any) -> None:
        get_default_graph()._control_flow_context = self._outer

    def add_op(self, op: Operation) -> None:
        self.ops.add(op)
        _cond_registry(op.graph)[op] = self
        _register_outer(self, op)
        for i, t in enumerate(op.inputs):
            if t.op not in self.ops:
                op._update_input(i, self.switched(t))
        if not op.inputs and op is not self.pivot.op:
            op._add_control_input(self.pivot.op)

    def switched(self, t: Tensor) -> Tensor:
        """The branch's view of an outside tensor (made once per tensor)."""
        s = self._switched.get(t)
        if s is None:
            g = get_default_graph()
            with g.control_dependencies(None):  # (which clears the context: set it after)
                g._control_flow_context = self._outer
                op_type = "RefSwitch" if t.dtype.is_ref_dtype else "Switch"
                outs = apply_op(op_type, name="Switch" if op_type == "Switch" else None,
                                data=t, pred=self.pred)
            s = self._switched[t] = outs[self.branch]
            self.ops.add(s.op)
            _cond_switch_registry(g)[s.op] = self
        return s


def _cond_registry(g: Any) -> dict[Operation, CondContext]:
    """``op -> the conditional branch it was built in`` (innermost) for a graph."""
    reg = getattr(g, "_flowrt_cond_of", None)
    if reg is None:
        reg = g._flowrt_cond_of = {}
    return reg


def _cond_switch_registry(g: Any) -> dict[Operation, CondContext]:
    """``Switch op -> the branch that reads one of its outputs`` (output ``k`` is live
    exactly when the predicate is ``k``)."""
    reg = getattr(g, "_flowrt_cond_switch_of", None)
    if reg is None:
        reg = g._flowrt_cond_switch_of = {}
    return reg


def cond_guards(t: Tensor, loop: Any) -> list[tuple[CondContext, int]]:
    """The conditionals inside ``loop`` that ``t`` is live under, innermost first, as
    ``(branch context, side)``: ``t`` has a value in an iteration exactly when every
    such predicate equals its side. Empty for a tensor outside conditionals."""
    g = t.graph
    sw = _cond_switch_registry(g).get(t.op)
    if sw is not None:
        guards, ctx = [(sw, t.value_index)], sw._outer
    else:
        c = _cond_registry(g).get(t.op)
        if c is None:
            return []
        guards, ctx = [(c, c.branch)], c._outer
    while isinstance(ctx, CondContext):
        guards.append((ctx, ctx.branch))
        ctx = ctx._outer
    return guards if ctx is loop else []


def _register_outer(ctx: Any, op: Operation) -> None:
    """Record ``op`` as inside every context enclosing ``ctx`` (and, for the innermost
    loop among them, as one of that loop's ops)."""
    o = ctx._outer
    while o is not None:
        o.ops.add(op)
        if isinstance(o, WhileContext):
            _loop_registry(op.graph).setdefault(op, o)
        o = o._outer


def _loop_registry(g: Any) -> dict[Operation, "WhileContext"]:
    """``op -> innermost WhileContext it belongs to`` for a graph (its Enter and Exit
    ops included)."""
    reg = getattr(g, "_flowrt_loop_of", None)
    if reg is None:
        reg = g._flowrt_loop_of = {}
    return reg


def loop_of(op: Operation) -> "WhileContext | None":
    """The innermost while loop ``op`` belongs to (None outside loops)."""
    reg = getattr(op.graph, "_flowrt_loop_of", None)
    return None if reg is None else reg.get(op)


def _flatten(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [y for e in x for y in _flatten(e)]
    if isinstance(x, dict):
        return [y for k in sorted(x) for y in _flatten(x[k])]
    return [x]


def _pack_like(structure: Any, flat: list[Any]) -> Any:
    it = iter(flat)

    def build(s: Any) -> Any:
        if isinstance(s, tuple) and hasattr(s, "_fields"):
            return type(s)(*[build(e) for e in s])
        if isinstance(s, (list, tuple)):
            return type(s)(build(e) for e in s)
        if isinstance(s, dict):
            return {k: build(s[k]) for k in sorted(s)}
        return next(it)

    return build(structure)


def _build_branch(ctx: CondContext, fn: Callable[[], Any]) -> tuple[Any, list[Any]]:
    with ctx:
        result = fn()
        flat = []
        for r in _flatten(result):
            if r is None:
                flat.append(None)
                continue
            if isinstance(r, Operation):
                flat.append(r)
                continue
            t = convert_to_tensor(r)
            if t.op not in ctx.ops:  # an outside tensor: route it through the branch
                t = apply_op("Identity", input=t)
            flat.append(t)
    return result, flat


@ks.api("cond")
def cond(pred: Any, true_fn: Callable[[], Any] | None = None,
         false_fn: Callable[[], Any] | None = None, strict: bool = False,
         name: str | None = None, fn1: Any = None, fn2: Any = None) -> Any:
    """``true_fn()`` if ``pred`` else ``false_fn()`` (``tf.cond``, TF1 graph form).

    Only the taken branch runs. Both branches must return the same structure; a
    single-element list is unpacked unless ``strict``.
    """
    true_fn = true_fn if true_fn is not None else fn1
    false_fn = false_fn if false_fn is not None else fn2
    if not callable(true_fn):
        raise TypeError("true_fn must be callable.")
    if not callable(false_fn):
        raise TypeError("false_fn must be callable.")
    with name_scope(name, "cond", [pred]):
        pred = convert_to_tensor(pred, dtype=_dt.bool, name="pred")
        if not pred.shape.is_compatible_with(TensorShape([])):
            raise ValueError(f"Shape must be rank 0 but is rank {pred.shape.ndims} for "
                             f"'cond' with pred {pred.name}")
        p_false, p_true = apply_op("Switch", data=pred, pred=pred)
        pivot_t = apply_op("Identity", name="switch_t", input=p_true)
        pivot_f = apply_op("Identity", name="switch_f", input=p_false)
        pred_id = apply_op("Identity", name="pred_id", input=pred)
        res_t, flat_t = _build_branch(CondContext(pred_id, pivot_t, 1), true_fn)
        res_f, flat_f = _build_branch(CondContext(pred_id, pivot_f, 0), false_fn)
        if len(flat_t) != len(flat_f):
            raise ValueError("true_fn and false_fn must return the same number of results: "
                             f"{len(flat_t)} vs {len(flat_f)}")
        merged: list[Any] = []
        g = get_default_graph()
        for t, f in zip(flat_t, flat_f):
            if t is None or f is None:
                if t is not None or f is not None:
                    raise ValueError("one branch returns None where the other returns a value")
                merged.append(None)
                continue
            if isinstance(t, Operation) or isinstance(f, Operation):
                ops = [o if isinstance(o, Operation) else o.op for o in (f, t)]
                merged.append(_group_after(ops))
                continue
            if t.dtype.base_dtype is not f.dtype.base_dtype:
                raise ValueError(f"Outputs of true_fn and false_fn must have the same type: "
                                 f"{t.dtype.name}, {f.dtype.name}")
            op_type = "RefMerge" if t.dtype.is_ref_dtype and f.dtype.is_ref_dtype else "Merge"
            out, _ = apply_op(op_type, name="Merge", inputs=[f, t])
            g._cond_preds[out.op] = pred_id
            merged.append(out)
    result = _pack_like(res_t, merged)
    if not strict and isinstance(result, (list, tuple)) and len(result) == 1 and \
            not hasattr(result, "_fields"):
        return result[0]
    return result


def _group_after(ops: Sequence[Operation]) -> Operation:
    with get_default_graph().control_dependencies(list(ops)):
        return apply_op("NoOp", name="cond_group")


@ks.api("case")
def case(pred_fn_pairs: Any, default: Callable[[], Any] | None = None,
         exclusive: bool = False, strict: bool = False, name: str = "case") -> Any:
    """The result of the first ``fn`` whose ``pred`` is true, else ``default()``
    (``tf.case``). With ``exclusive``, more than one true predicate is an error."""
    pairs = list(pred_fn_pairs.items()) if isinstance(pred_fn_pairs, dict) else \
        list(pred_fn_pairs)
    for p in pairs:
        if not (isinstance(p, (tuple, list)) and len(p) == 2 and callable(p[1])):
            raise TypeError("Each entry in pred_fn_pairs must be a 2-tuple (pred, fn)")
    if default is None:
        if not pairs:
            raise ValueError("pred_fn_pairs must not be empty when there is no default")
        pairs, default = pairs[:-1], pairs[-1][1]
    with name_scope(name, "case", [p for p, _ in pairs]):
        preds = [convert_to_tensor(p, dtype=_dt.bool) for p, _ in pairs]
        if exclusive and len(preds) > 1:
            count = apply_op("Sum", input=apply_op("Cast", x=apply_op(
                "Pack", values=preds, axis=0), DstT=_dt.int32),
                reduction_indices=np.asarray([0], np.int32))
            check = apply_op("Assert", condition=apply_op(
                "LessEqual", x=count, y=np.int32(1)), data=[
                convert_to_tensor("Input error: exclusive=True: more than 1 conditions "
                                  "evaluated as True:"), count], summarize=3)
        else:
            check = None
        fn = default
        for p, (_, f) in reversed(list(zip(preds, pairs))):
            fn = _chain(p, f, fn, strict)
        if check is not None:
            with get_default_graph().control_dependencies([check]):
                return fn()
        return fn()


def _chain(p: Tensor, f: Callable[[], Any], rest: Callable[[], Any],
           strict: bool) -> Callable[[], Any]:
    return lambda: cond(p, f, rest, strict=strict)


# -- gradients -----------------------------------------------------------------------------
@ks.gradient("Switch", "RefSwitch")
def _switch_grad(op: Any, grad_false: Tensor, grad_true: Tensor) -> list[Any]:
    # the live side's gradient comes back; the dead side's is dead and Merge skips it
    c = _cond_switch_registry(op.graph).get(op)
    if c is not None:
        # a conditional reads one side only: the other side's gradient is zeros that
        # must be live exactly when the branch is not taken (a filler zeros constant is
        # live in every case, and the Merge could take it over the branch's gradient)
        side = c.branch
        untaken = apply_op("Switch", data=op.inputs[0], pred=op.inputs[1])[1 - side]
        zeros = apply_op("ZerosLike", x=untaken)
        pair = [zeros, grad_true] if side else [grad_false, zeros]
        out, _ = apply_op("Merge", inputs=pair)
        return [out, None]
    out, _ = apply_op("Merge", inputs=[grad_false, grad_true])
    return [out, None]


@ks.gradient("Merge", "RefMerge")
def _merge_grad(op: Any, grad: Tensor, _index_grad: Any = None) -> list[Any]:
    pred = op.graph._cond_preds.get(op)
    if pred is None:
        raise LookupError(f"No gradient for Merge '{op.name}' outside a tf.cond or "
                          "tf.while_loop")
    g_false, g_true = apply_op("Switch", data=grad, pred=pred)
    return [g_false, g_true]


# -- loops ---------------------------------------------------------------------------------
class WhileContext:
    """The loop being built (TF's WhileContext): ops created inside read outside tensors
    through one constant ``Enter`` each, and ops with no input from inside the loop get a
    control input from the loop's pivot, so they run once per iteration.

    :ivar name: the frame name (``<scope>/while_context``)
    :ivar ops: every op inside the loop (nested conditionals and loops included)
    :ivar loop_enters, merges, switches, identities, next_iterations, exits: the
        loop variables' structure, one entry per flattened loop variable
    :ivar pivot: the LoopCond output
    """

    def __init__(self, name: str, parallel_iterations: int = 10, back_prop: bool = True,
                 swap_memory: bool = False, outer: Any = None):
        self.name = name
        self.parallel_iterations = parallel_iterations
        self.back_prop, self.swap_memory = back_prop, swap_memory
        self._outer = outer
        self.ops: set[Operation] = set()
        self.captured: dict[Tensor, Tensor] = {}  # outside tensor -> its Enter output
        self.invariant_of: dict[Tensor, Tensor] = {}  # Enter output -> outside tensor
        self.enter_ops: list[Operation] = []
        self.loop_enters: list[Tensor] = []
        self.merges: list[Tensor] = []
        self.switches: list[tuple[Tensor, Tensor]] = []
        self.identities: list[Tensor] = []
        self.next_iterations: list[Tensor] = []
        self.exits: list[Tensor] = []
        self.pivot: Tensor | None = None
        self.pivot_for_pred: Tensor | None = None
        self.pivot_for_body: Tensor | None = None
        self._raw = False  # building the loop's own structure: no capturing
        # gradients (control_flow_grad): the forward loop this one differentiates,
        # and the forward loop's iteration counter once a gradient needs it
        self.forward: "WhileContext | None" = None
        self.grad_state: Any = None

    # context protocol -------------------------------------------------------------
    def __enter__(self) -> "WhileContext":
        g = get_default_graph()
        self._saved = g._control_flow_context
        g._control_flow_context = self
        return self

    def __exit__(self, *exc: Any) -> None:
        get_default_graph()._control_flow_context = self._saved

    @property
    def outer_loop(self) -> "WhileContext | None":
        """The enclosing while loop (through enclosing conditionals), if any."""
        o = self._outer
        while o is not None and not isinstance(o, WhileContext):
            o = o._outer
        return o

    def control_pivot(self) -> Tensor | None:
        return self.pivot_for_body if self.pivot_for_body is not None else \
            self.pivot_for_pred

    # ops created inside -------------------------------------------------------------
    def add_op(self, op: Operation) -> None:
        self.ops.add(op)
        _loop_registry(op.graph)[op] = self
        _register_outer(self, op)
        if self._raw:
            return
        for i, t in enumerate(op.inputs):
            if t.op not in self.ops:
                op._update_input(i, self.capture(t))
        internal = False
        for c in list(op._control_inputs):
            if c in self.ops:
                internal = True
                continue
            # a control input from outside the loop: it runs once, before the loop
            op._control_inputs.remove(c)
            c._control_outputs.remove(op)
            op._add_control_input(self.capture(_as_value(c)).op)
        if not internal and all(t in self.invariant_of for t in op.inputs):
            pivot = self.control_pivot()
            if pivot is not None and op is not pivot.op:
                op._add_control_input(pivot.op)

    def capture(self, t: Tensor) -> Tensor:
        """The loop's view of an outside tensor (one constant Enter per tensor)."""
        e = self.captured.get(t)
        if e is not None:
            return e
        if self.forward is not None and self.grad_state is not None:
            e = self.grad_state.backward_value(t)
            if e is not None:
                return e
        e = _make_enter(self, t, is_constant=True)
        self.captured[t] = e
        self.invariant_of[e] = t
        return e

    def gradient(self, exit_grads: list[Any]) -> dict[Operation, Any]:
        """The gradients of this loop's inputs, by Enter op, given its exits' gradients
        (None where an exit has none): builds the backward loop."""
        from .control_flow_grad import while_loop_gradient

        return while_loop_gradient(self, exit_grads)

    def raw(self) -> "_Raw":
        """A block in which ops are created as part of the loop's structure."""
        return _Raw(self)


class _Raw:
    def __init__(self, ctx: WhileContext):
        self.ctx = ctx

    def __enter__(self) -> None:
        g = get_default_graph()
        self._cd = g.control_dependencies(None)
        self._cd.__enter__()
        self._saved_ctx = g._control_flow_context
        self._saved_raw = self.ctx._raw
        g._control_flow_context = self.ctx
        self.ctx._raw = True

    def __exit__(self, *exc: Any) -> None:
        g = get_default_graph()
        self.ctx._raw = self._saved_raw
        g._control_flow_context = self._saved_ctx
        self._cd.__exit__(*exc)


def _as_value(op: Operation) -> Tensor:
    """A tensor available once ``op`` ran (its first output, or a scalar after it)."""
    if op.outputs:
        return op.outputs[0]
    g = op.graph
    with g.control_dependencies([op]):
        saved, g._control_flow_context = g._control_flow_context, None
        try:
            return apply_op("Const", name="control_dependency", value=np.zeros((),
                                                                                 np.int32),
                            dtype=_dt.int32)
        finally:
            g._control_flow_context = saved


def _make_enter(ctx: WhileContext, t: Tensor, is_constant: bool,
                name: str = "Enter") -> Tensor:
    """An Enter of ``t`` into ``ctx``'s frame, built in the enclosing context (which
    routes ``t`` into itself first)."""
    g = get_default_graph()
    with g.control_dependencies(None):
        g._control_flow_context = ctx._outer
        op_type = "RefEnter" if t.dtype.is_ref_dtype else "Enter"
        e = apply_op(op_type, name=name, data=t, frame_name=ctx.name,
                     is_constant=is_constant, parallel_iterations=ctx.parallel_iterations)
    ctx.ops.add(e.op)
    ctx.enter_ops.append(e.op)
    _loop_registry(g)[e.op] = ctx
    return e


def _is_sequence(x: Any) -> bool:
    return isinstance(x, (list, tuple, dict))


def _assert_same_structure(a: Any, b: Any) -> None:
    """TF's nest.assert_same_structure (the outer sequence types are not compared)."""
    def shape_of(x: Any) -> Any:
        if isinstance(x, dict):
            return ("dict", tuple(sorted(x)), tuple(shape_of(x[k]) for k in sorted(x)))
        if isinstance(x, (list, tuple)):
            return (type(x).__name__ if hasattr(x, "_fields") else "seq",
                    tuple(shape_of(e) for e in x))
        return "."

    la, lb = len(_flatten(a)), len(_flatten(b))
    if la != lb:
        raise ValueError("The two structures don't have the same number of elements.\n\n"
                         f"First structure ({la} elements): {a}\n\nSecond structure "
                         f"({lb} elements): {b}")
    sa, sb = shape_of(list(a)), shape_of(list(b))
    if sa != sb:
        raise TypeError("The two structures don't have the same sequence type. First "
                        f"structure: {a}, second structure: {b}")


def _shape_le(have: TensorShape, want: TensorShape) -> bool:
    """Whether ``have`` is at least as specific as ``want`` (TF's _ShapeLessThanOrEqual)."""
    if want.ndims is None:
        return True
    if have.ndims != want.ndims:
        return False
    return all(w is None or h == w for h, w in zip(have.as_tuple(), want.as_tuple()))


@ks.api("while_loop")
def while_loop(cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Any,
               shape_invariants: Any = None, parallel_iterations: int = 10,
               back_prop: bool = True, swap_memory: bool = False, name: str | None = None,
               maximum_iterations: Any = None, return_same_structure: bool = False) -> Any:
    """Repeat ``body`` while ``cond`` is true (``tf.while_loop``, TF1 graph form).

    ``loop_vars`` is a (nested) list, tuple, namedtuple or dict of tensors; ``cond`` and
    ``body`` take them as positional arguments and ``body`` returns the same structure.
    A single loop variable comes back as a tensor unless ``return_same_structure``.
    ``shape_invariants`` relaxes the shapes a variable may take across iterations;
    ``maximum_iterations`` bounds the number of iterations; ``parallel_iterations``
    bounds how many iterations may run at once.

    :raises TypeError: when ``cond`` or ``body`` is not callable, or ``body`` returns
        another structure
    :raises ValueError: no loop variables, a shape that changes without an invariant,
        an invariant the initial value does not satisfy, a predicate that is no scalar
    """
    if not callable(cond):
        raise TypeError("cond must be callable.")
    if not callable(body):
        raise TypeError("body must be callable.")
    if parallel_iterations < 1:
        raise TypeError("parallel_iterations must be a positive integer.")
    if isinstance(loop_vars, (Tensor, np.ndarray, int, float)) or \
            hasattr(loop_vars, "_as_graph_element") or _is_ta(loop_vars):
        loop_vars, single = [loop_vars], True
    else:
        single = False
    if any(_is_ta(v) for v in _flatten(loop_vars)):
        return _while_loop_tensor_arrays(cond, body, loop_vars, single, shape_invariants,
                                         parallel_iterations, back_prop, swap_memory, name,
                                         maximum_iterations, return_same_structure)
    with name_scope(name, "while", _flatten(loop_vars)):
        if not loop_vars:
            raise ValueError("No loop variables provided")
        try_to_pack = (len(loop_vars) == 1 or single) and not return_same_structure
        if maximum_iterations is not None:
            maximum_iterations = convert_to_tensor(maximum_iterations,
                                                   name="maximum_iterations")
            if maximum_iterations.shape.ndims not in (None, 0):
                raise ValueError("maximum_iterations must be a scalar, saw shape: "
                                 f"{maximum_iterations.shape}")
            counter = apply_op("Const", name="iteration_counter",
                               value=np.zeros((), maximum_iterations.dtype.base_dtype.np),
                               dtype=maximum_iterations.dtype.base_dtype)
            orig_cond, orig_body = cond, body
            mi = maximum_iterations
            if try_to_pack:
                loop_vars = (counter, loop_vars[0])
                cond = lambda i, lv: _api_logical_and(apply_op("Less", x=i, y=mi),  # noqa
                                                      orig_cond(lv))
                body = lambda i, lv: (apply_op("AddV2", x=i, y=np.ones(  # noqa: E731
                    (), mi.dtype.base_dtype.np)), orig_body(lv))
            else:
                loop_vars = (counter, loop_vars)
                cond = lambda i, lv: _api_logical_and(apply_op("Less", x=i, y=mi),  # noqa
                                                      orig_cond(*lv))
                body = lambda i, lv: (apply_op("AddV2", x=i, y=np.ones(  # noqa: E731
                    (), mi.dtype.base_dtype.np)), orig_body(*lv))
            if shape_invariants is not None:
                shape_invariants = (TensorShape([]), shape_invariants[0] if try_to_pack
                                    and isinstance(shape_invariants, (list, tuple))
                                    else shape_invariants)
            try_to_pack = False
        g = get_default_graph()
        ctx = WhileContext(g.unique_name("while_context"), parallel_iterations, back_prop,
                           swap_memory, g._control_flow_context)
        result = _build_loop(ctx, cond, body, loop_vars, shape_invariants)
    if maximum_iterations is not None:
        return result[1]
    if not return_same_structure and len(_flatten(result)) == 1:
        return _flatten(result)[0]
    return result


def _is_ta(x: Any) -> bool:
    return getattr(x, "_flowrt_tensor_array", False) is True


def _while_loop_tensor_arrays(cond: Callable[..., Any], body: Callable[..., Any],
                              loop_vars: list[Any], single: bool, shape_invariants: Any,
                              *args: Any) -> Any:
    """``while_loop`` over loop variables that include TensorArrays (as TF does it): each
    TensorArray travels as its flow tensor and is rebuilt from it in ``cond``, ``body``
    and the result."""
    template = _flatten(loop_vars)

    def to_arrays(flat: list[Any]) -> list[Any]:
        return [t._with_flow(f) if _is_ta(t) else f for t, f in zip(template, flat)]

    def to_flows(x: Any) -> Any:
        return _pack_like(x, [v.flow if _is_ta(v) else v for v in _flatten(x)])

    def unpack(args: tuple[Any, ...]) -> list[Any]:
        return _pack_like(list(loop_vars), to_arrays(_flatten(list(args))))

    if shape_invariants is not None:
        inv = _flatten_shapes(shape_invariants)
        shape_invariants = _pack_like(list(loop_vars), [
            TensorShape([]) if _is_ta(t) else s for t, s in zip(template, inv)])
    result = while_loop(lambda *a: cond(*unpack(a)), lambda *a: to_flows(body(*unpack(a))),
                        to_flows(list(loop_vars)), shape_invariants, *args[:-1],
                        return_same_structure=True)
    packed = _pack_like(list(loop_vars), to_arrays(_flatten(result)))
    return_same_structure = args[-1]
    if single and not return_same_structure:
        return packed[0]
    if not return_same_structure and len(template) == 1:
        return _flatten(packed)[0]
    return packed


def _api_logical_and(a: Any, b: Any) -> Tensor:
    return apply_op("LogicalAnd", x=a, y=b)


def _build_loop(ctx: WhileContext, cond: Callable[..., Any], body: Callable[..., Any],
                loop_vars: Any, shape_invariants: Any) -> Any:
    g = get_default_graph()
    flat = [v._ref() if hasattr(v, "_ref") and hasattr(v, "_as_graph_element")
            and not isinstance(v, Tensor) else v for v in _flatten(loop_vars)]
    flat = [convert_to_tensor(v) for v in flat]
    if shape_invariants is not None:
        inv_flat = [s if isinstance(s, TensorShape) else TensorShape(s)
                    for s in _flatten_shapes(shape_invariants)]
        if len(inv_flat) != len(flat):
            raise ValueError("The two structures don't have the same number of elements: "
                             f"loop_vars has {len(flat)}, shape_invariants {len(inv_flat)}")
        for v, sh in zip(flat, inv_flat):
            if not _shape_le(v.shape, sh):
                raise ValueError(
                    f"The shape invariant specified for {v.name} is not compatible with "
                    "the initial shape of the loop variable. It enters the loop with shape "
                    f"{v.shape}, but the specified shape invariant is {sh}.")
    else:
        inv_flat = None
    enters = [_make_enter(ctx, v, is_constant=False) for v in flat]
    if inv_flat is not None:
        for e, sh in zip(enters, inv_flat):
            e._shape = sh
    ctx.loop_enters = enters
    with ctx.raw():
        merges = [apply_op("RefMerge" if e.dtype.is_ref_dtype else "Merge", name="Merge",
                           inputs=[e, e])[0] for e in enters]
    ctx.merges = merges
    ctx.pivot_for_pred = merges[0]
    with ctx:
        c = convert_to_tensor(cond(*_pack_like(loop_vars, merges)))
    if c.dtype.base_dtype is not _dt.bool:
        raise TypeError(f"cond must return a boolean scalar tensor, got {c.dtype.name}")
    with ctx.raw():
        ctx.pivot = apply_op("LoopCond", name="LoopCond", input=c)
        switches = []
        for m in merges:
            op_type = "RefSwitch" if m.dtype.is_ref_dtype else "Switch"
            switches.append(tuple(apply_op(op_type, name="Switch", data=m, pred=ctx.pivot)))
        idents = [apply_op("Identity", name="Identity", input=t) for _, t in switches]
    ctx.switches, ctx.identities = switches, idents
    ctx.pivot_for_body = idents[0]
    with ctx:
        packed = _pack_like(loop_vars, idents)
        result = body(*packed)
        if not _is_sequence(result):
            result = [result]
        _assert_same_structure(list(packed), list(result))
        outs = []
        for m, r in zip(merges, _flatten(result)):
            if hasattr(r, "_ref") and hasattr(r, "_as_graph_element") and \
                    not isinstance(r, Tensor):
                r = r.value()
            r = convert_to_tensor(r, dtype=m.dtype.base_dtype if not isinstance(r, Tensor)
                                  else None)
            if r.op not in ctx.ops:  # an outside tensor or a loop variable as it is
                r = apply_op("Identity", input=r)
            outs.append(r)
    if len(outs) != len(merges):
        raise ValueError("Number of inputs and outputs of body must match loop_vars: "
                         f"{len(merges)}, {len(outs)}")
    nexts = []
    with ctx.raw():
        for m, r, e in zip(merges, outs, enters):
            if r.dtype.base_dtype is not m.dtype.base_dtype:
                raise TypeError(f"The body returns a {r.dtype.base_dtype.name} tensor for "
                                f"the loop variable {e.op.inputs[0].name} of type "
                                f"{m.dtype.base_dtype.name}")
            if not _shape_le(r.shape, m.shape) and ctx.forward is not None:
                m._shape = _most_specific_common(m.shape, r.shape)  # a backward loop
            elif not _shape_le(r.shape, m.shape):
                raise ValueError(
                    f"Input tensor '{e.op.inputs[0].name}' enters the loop with shape "
                    f"{m.shape}, but has shape {r.shape} after one iteration. To allow the "
                    "shape to vary across iterations, use the `shape_invariants` argument "
                    "of tf.while_loop to specify a less-specific shape.")
            op_type = "RefNextIteration" if r.dtype.is_ref_dtype else "NextIteration"
            n = apply_op(op_type, name="NextIteration", data=r)
            m.op._update_input(1, n)
            nexts.append(n)
        exits = [apply_op("RefExit" if f.dtype.is_ref_dtype else "Exit", name="Exit",
                          data=f) for f, _ in switches]
    for e, m in zip(exits, merges):
        e._shape = m.shape
    ctx.next_iterations, ctx.exits = nexts, exits
    _exits_registry(g).update({x.op: ctx for x in exits})
    g._version_bump()
    # the exits belong to the enclosing context
    o = ctx._outer
    if o is not None:
        for x in exits:
            o.ops.add(x.op)
    return _pack_like(result, exits)


def _most_specific_common(a: TensorShape, b: TensorShape) -> TensorShape:
    if a.ndims is None or b.ndims is None or a.ndims != b.ndims:
        return unknown_shape()
    return TensorShape([x if x == y else None for x, y in zip(a.as_tuple(), b.as_tuple())])


def _flatten_shapes(x: Any) -> list[Any]:
    if isinstance(x, TensorShape):
        return [x]
    if isinstance(x, (list, tuple)) and (not x or isinstance(x[0], (list, tuple, dict,
                                                                        TensorShape))):
        return [y for e in x for y in _flatten_shapes(e)]
    if isinstance(x, dict):
        return [y for k in sorted(x) for y in _flatten_shapes(x[k])]
    return [x]


def _exits_registry(g: Any) -> dict[Operation, WhileContext]:
    reg = getattr(g, "_flowrt_loop_exits", None)
    if reg is None:
        reg = g._flowrt_loop_exits = {}
    return reg
