"""Symbolic differentiation: ``tf.gradients`` builds the gradient graph.

Gradient functions come from kernel sets (``KernelSet.gradient``) and from
:func:`RegisterGradient`; ``fn(op, *output_grads)`` returns one gradient (or None) per
input of ``op``. Walking back from ``ys`` over the ops between ``xs`` and ``ys``, the
gradients of a tensor with several consumers are summed; tensors not connected to
``ys`` get None; gradients flow only through float and complex tensors.
"""
from __future__ import annotations

import collections
import enum
from typing import Any, Callable, Sequence

from ..base import dtypes as _dt
from .graph import (Operation, Tensor, api_function, apply_op, colocate_with, convert_to_tensor,
                    get_default_graph, name_scope)
from .indexed_slices import IndexedSlices, as_indexed_slices_list

__all__ = ["gradients", "RegisterGradient", "NotDifferentiable", "NoGradient",
           "no_gradient", "gradient_function", "hessians", "UnconnectedGradients",
           "AggregationMethod"]


class UnconnectedGradients(enum.Enum):
    """What ``tf.gradients`` returns for an x that ``ys`` do not depend on
    (``tf.UnconnectedGradients``): None, or zeros shaped like x."""

    NONE = "none"
    ZERO = "zero"


class AggregationMethod:
    """How gradient contributions to one tensor are summed (``tf.AggregationMethod``):
    ``ADD_N`` (the default) sums them with one ``AddN``; the experimental methods add
    them pairwise."""

    ADD_N = 0
    DEFAULT = ADD_N
    EXPERIMENTAL_TREE = 1
    EXPERIMENTAL_ACCUMULATE_N = 2


_AGGREGATION_METHODS = (AggregationMethod.ADD_N, AggregationMethod.EXPERIMENTAL_TREE,
                        AggregationMethod.EXPERIMENTAL_ACCUMULATE_N)

#: ops whose gradient passes an IndexedSlices gradient through unchanged, as in TF; every
#: other op's gradient function gets a densified gradient
_SLICES_PASS_THROUGH = frozenset({"Identity", "IdentityN", "PlaceholderWithDefault",
                                  "Snapshot"})

_user_gradients: dict[str, Callable[..., Any] | None] = {}


class RegisterGradient:
    """Decorator registering a gradient function for an op type (``tf.RegisterGradient``).

    Registrations here take precedence over kernel sets', so ``gradient_override_map``
    can point an op at a custom gradient::

        @tf.RegisterGradient("MySquareGrad")
        def _grad(op, grad):
            return grad * 2.0 * op.inputs[0]

        with g.gradient_override_map({"Square": "MySquareGrad"}):
            y = tf.square(x)
    """

    def __init__(self, op_type: str):
        if not isinstance(op_type, str):
            raise TypeError("op_type must be a string")
        self._op_type = op_type

    def __call__(self, f: Callable[..., Any]) -> Callable[..., Any]:
        if self._op_type in _user_gradients and _user_gradients[self._op_type] is not f:
            raise KeyError(f"Registering two gradient with name '{self._op_type}'!")
        _user_gradients[self._op_type] = f
        return f


def NotDifferentiable(op_type: str) -> None:  # noqa: N802 - TF's name
    """Declare ``op_type`` as having no gradient: its inputs get None."""
    if not isinstance(op_type, str):
        raise TypeError("op_type must be a string")
    _user_gradients[op_type] = None


NoGradient = NotDifferentiable
no_gradient = NotDifferentiable

_NOT_FOUND = object()


def gradient_function(op: Operation) -> Any:
    """The gradient function for ``op`` (None: not differentiable; raises LookupError
    when no function is registered)."""
    typ = op.node_attrs.get("_gradient_op_type", op.type)
    if isinstance(typ, bytes):
        typ = typ.decode()
    fn = _user_gradients.get(typ, _NOT_FOUND)
    if fn is _NOT_FOUND:
        fn = op.graph._runtime.gradients.get(typ, _NOT_FOUND)
    if fn is _NOT_FOUND:
        raise LookupError(f"No gradient defined for operation '{op.name}' (op type: {typ})")
    return fn


_TRAINABLE = frozenset({_dt.float16, _dt.bfloat16, _dt.float32, _dt.float64, _dt.complex64,
                        _dt.complex128, _dt.resource, _dt.variant})


def _is_trainable(t: Tensor) -> bool:
    return t.dtype.base_dtype in _TRAINABLE


def _as_list(x: Any) -> list[Any]:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _to_tensor(x: Any) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if hasattr(x, "_ref") and hasattr(x, "_as_graph_element"):  # a Variable: its ref
        return x._ref()
    return convert_to_tensor(x)


def gradients(ys: Any, xs: Any, grad_ys: Any = None, name: str = "gradients",
              colocate_gradients_with_ops: bool = False, gate_gradients: bool = False,
              aggregation_method: Any = None, stop_gradients: Any = None,
              unconnected_gradients: Any = UnconnectedGradients.NONE
              ) -> list[Tensor | IndexedSlices | None]:
    """The symbolic derivatives of ``sum(ys)`` with respect to each of ``xs``.

    :param ys: a tensor or list of tensors to differentiate
    :param xs: tensors or variables to differentiate with respect to
    :param grad_ys: initial gradients for ``ys`` (default: ones of each y's shape)
    :param gate_gradients: gate the gradients of each op's inputs together (each runs
        only after all of them are computed), as TF does
    :param aggregation_method: an :class:`AggregationMethod` constant
    :param stop_gradients: tensors whose gradient is not propagated further
    :param unconnected_gradients: :class:`UnconnectedGradients` (or ``"none"``,
        ``"zero"``) for xs not connected to ys
    :returns: one entry per x: a Tensor, an IndexedSlices (e.g. the params of a
        ``tf.gather``), or None when x does not affect ys
    :raises LookupError: when an op on the path has no registered gradient
    :raises ValueError: for mismatched ``grad_ys``, an unknown aggregation method or
        ``unconnected_gradients`` value
    """
    ys = [_to_tensor(y) for y in _as_list(ys)]
    xs = [_to_tensor(x) for x in _as_list(xs)]
    stops = [_to_tensor(s) for s in _as_list(stop_gradients)] if stop_gradients is not None \
        else []
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    else:
        grad_ys = _as_list(grad_ys)
        if len(grad_ys) != len(ys):
            raise ValueError(f"Passed {len(grad_ys)} grad_ys for {len(ys)} ys")
    try:
        unconnected_gradients = UnconnectedGradients(unconnected_gradients).value
    except ValueError:
        raise ValueError(f"Unknown value for unconnected_gradients: "
                         f"{unconnected_gradients!r}") from None
    if aggregation_method is None:
        aggregation_method = AggregationMethod.DEFAULT
    if aggregation_method not in _AGGREGATION_METHODS:
        raise ValueError(f"Invalid aggregation_method specified {aggregation_method}.")
    g = ys[0].graph if ys else get_default_graph()
    with g.as_default(), name_scope(name, "gradients", ys + xs):
        # initial gradients
        init: list[Tensor] = []
        for i, (y, gy) in enumerate(zip(ys, grad_ys)):
            if gy is None:
                if y.dtype.is_complex:
                    raise TypeError(f"Gradients of complex tensors must set grad_ys "
                                    f"(y.dtype = {y.dtype.base_dtype.name})")
                # (an integer y gets ones too; nothing flows back from it, as in TF)
                with _maybe_colocate(y.op, colocate_gradients_with_ops):
                    gy = api_function("ones_like")(y, name=f"grad_ys_{i}")
            else:
                gy = convert_to_tensor(gy, dtype=y.dtype.base_dtype, name=f"grad_y_{i}")
                if not gy.shape.is_compatible_with(y.shape):
                    raise ValueError(f"grad_ys[{i}] has shape {gy.shape}, which is "
                                     f"incompatible with ys[{i}] shape {y.shape}")
                # TF gives each grad_y an Identity in the gradients' scope (what a
                # gradient equal to grad_ys is fetched as)
                gy = apply_op("Identity", name=f"grad_ys_{i}", input=gy)
            init.append(gy)

        return backprop(ys, init, xs, stops, colocate_gradients_with_ops,
                        unconnected_gradients, level=_loop_level(g),
                        gate_gradients=gate_gradients,
                        aggregation_method=aggregation_method)


class _LoopUnit:
    """A while loop seen from outside, as one node of the backward walk: its inputs are
    what its Enter ops read, its outputs its Exit ops' outputs."""

    __slots__ = ("loop", "inputs", "outputs", "name")

    def __init__(self, loop: Any):
        self.loop = loop
        self.inputs = [e.inputs[0] for e in loop.enter_ops]
        self.outputs = list(loop.exits)
        self.name = loop.name


def _loop_level(g: Any) -> Any:
    """The innermost while loop being built in ``g`` right now (None: none)."""
    ctx = g._control_flow_context
    while ctx is not None and not hasattr(ctx, "enter_ops"):
        ctx = getattr(ctx, "_outer", None)
    return ctx


def backprop(ys: list[Tensor], init: list[Tensor], xs: list[Tensor], stops: list[Tensor],
             colocate_gradients_with_ops: bool = False, unconnected_gradients: str = "none",
             level: Any = None, boundary: frozenset = frozenset(),
             gate_gradients: bool = False, aggregation_method: int = AggregationMethod.ADD_N
             ) -> list[Any]:
    """The walk of :func:`gradients`: ``init[i]`` is the gradient of ``ys[i]``.

    A while loop nested below ``level`` (the loop whose body is being differentiated,
    None at the top) is one node of the walk (:class:`_LoopUnit`), differentiated by its
    context's ``gradient`` method; ops in ``boundary`` are never walked through.
    IndexedSlices gradients reach only the ops of ``_SLICES_PASS_THROUGH`` as they are;
    other gradient functions and loops get them densified.
    """
    g = ys[0].graph if ys else get_default_graph()
    loop_of = getattr(g, "_flowrt_loop_of", None) or {}
    units: dict[Any, _LoopUnit] = {}

    def unit_of(op: Operation) -> Any:
        u = loop_of.get(op)
        if u is None:
            return op
        top = None
        while u is not None and u is not level:
            top = u
            u = u.outer_loop
        if top is None:
            return op
        unit = units.get(top)
        if unit is None:
            unit = units[top] = _LoopUnit(top)
        return unit

    def inputs_of(node: Any) -> list[Tensor]:
        return node.inputs

    def outputs_of(node: Any) -> list[Tensor]:
        return node.outputs

    # ops reachable forward from xs, and backward from ys: the ops between
    stop_ops = {s.op for s in stops}
    reached = _reachable_forward([x.op for x in xs], stop_ops)
    between: set[Any] = set()
    queue = collections.deque(unit_of(y.op) for y in ys)
    while queue:
        node = queue.popleft()
        if node in between:
            continue
        if isinstance(node, _LoopUnit):
            if not any(t.op in reached for t in node.outputs):
                continue
        elif node not in reached or node in boundary:
            continue
        between.add(node)
        for t in inputs_of(node):
            queue.append(unit_of(t.op))
    x_set = set(xs)
    # pending gradient contributions per node (from consumers inside `between`)
    pending: dict[Any, int] = collections.defaultdict(int)
    for node in between:
        for t in inputs_of(node):
            src = unit_of(t.op)
            if src in between:
                pending[src] += 1
    grads: dict[Tensor, list[Tensor]] = collections.defaultdict(list)
    for y, gy in zip(ys, init):
        grads[y].append(gy)
    ready = collections.deque()
    seen_ready: set[Any] = set()
    for y in ys:
        node = unit_of(y.op)
        if node in between and pending[node] == 0 and node not in seen_ready:
            ready.append(node)
            seen_ready.add(node)
    stop_tensors = set(stops)
    while ready:
        op = ready.popleft()
        outs = outputs_of(op)
        out_grads = [_aggregate(grads.get(t), t, op, aggregation_method) for t in outs]
        for t, og in zip(outs, out_grads):  # summed once: an x's result reuses the sum
            if og is not None:
                grads[t] = [og]
        if isinstance(op, _LoopUnit) or op.type not in _SLICES_PASS_THROUGH:
            out_grads = [convert_to_tensor(og) if isinstance(og, IndexedSlices) else og
                         for og in out_grads]
        is_loop = isinstance(op, _LoopUnit)
        is_x_op = not is_loop and any(t in x_set for t in outs)
        has_grad = any(og is not None for og, t in zip(out_grads, outs) if _is_trainable(t))
        ins = inputs_of(op)
        if is_loop and has_grad:
            with name_scope(op.name.rsplit("/", 1)[0] + "_grad"):
                by_enter = op.loop.gradient(out_grads)
            in_grads = [by_enter.get(e) for e in op.loop.enter_ops[:len(ins)]]
            for t, gi in zip(ins, in_grads):
                if gi is None or not _is_trainable(t) or t in stop_tensors:
                    continue
                if unit_of(t.op) in between or t in x_set:
                    grads[t].append(convert_to_tensor(gi))
        elif has_grad and op not in stop_ops and not (is_x_op and not op.inputs):
            fn = gradient_function(op) if op.inputs else None
            if fn is not None and any(_is_trainable(t) for t in op.inputs):
                scope = op.name + "_grad"
                with name_scope(scope), _maybe_colocate(op, colocate_gradients_with_ops):
                    filled = [og if og is not None else
                              (api_function("zeros_like")(t) if _is_trainable(t) else None)
                              for og, t in zip(out_grads, op.outputs)]
                    in_grads = _as_list(fn(op, *filled))
                    if gate_gradients and len([gi for gi in in_grads if gi is not None]) > 1:
                        with name_scope("tuple"):
                            in_grads = _gate(in_grads)
                if len(in_grads) != len(op.inputs):
                    raise ValueError(f"Num gradients {len(in_grads)} generated for op "
                                     f"{op.type} "
                                     f"'{op.name}' do not match num inputs "
                                     f"{len(op.inputs)}")
                for t, gi in zip(op.inputs, in_grads):
                    if gi is None or not _is_trainable(t) or t in stop_tensors:
                        continue
                    if not isinstance(gi, IndexedSlices):
                        gi = convert_to_tensor(gi)
                    if unit_of(t.op) in between or t in x_set:
                        grads[t].append(gi)
        for t in ins:
            src = unit_of(t.op)
            if src in between:
                pending[src] -= 1
                if pending[src] == 0 and src not in seen_ready:
                    ready.append(src)
                    seen_ready.add(src)
    out: list[Tensor | None] = []
    for x in xs:
        gl = grads.get(x)
        if not gl or not _is_trainable(x):
            if unconnected_gradients == "zero" and _is_trainable(x):
                out.append(api_function("zeros_like")(x))
            else:
                out.append(None)
            continue
        agg = _aggregate(gl, x, None, aggregation_method)
        if level is not None and isinstance(agg, IndexedSlices):
            agg = convert_to_tensor(agg)  # a loop body's gradients feed loop variables
        out.append(agg)
    return out


def _aggregate(gl: list[Any] | None, t: Tensor, op: Any,
               aggregation_method: int = AggregationMethod.ADD_N) -> Any:
    """The sum of the gradient contributions ``gl`` to ``t`` (TF's ``_AggregatedGrads``).

    Dense gradients are summed with one ``AddN`` (pairwise ``AddN``s for the
    experimental methods). If any is an IndexedSlices, all become IndexedSlices (a dense
    one: all its rows) and the sum is their concatenation, as in TF.
    """
    if not gl:
        return None
    if len(gl) == 1:
        return gl[0]
    if all(isinstance(g, Tensor) for g in gl):
        if aggregation_method in (AggregationMethod.EXPERIMENTAL_TREE,
                                  AggregationMethod.EXPERIMENTAL_ACCUMULATE_N):
            scope = (op.name if op is not None else t.op.name) + "_gradient_sum"
            with name_scope(scope):
                running = gl[0]
                for g in gl[1:]:
                    running = api_function("add_n")([running, g])
                return running
        return api_function("add_n")(gl)
    parts = as_indexed_slices_list(gl)
    concat = api_function("concat")
    return IndexedSlices(concat([p.values for p in parts], 0),
                         concat([p.indices for p in parts], 0), parts[0].dense_shape)


def _gate(grads: list[Any]) -> list[Any]:
    """``grads`` gated together, as TF's ``control_flow_ops.tuple``: a ``group_deps``
    NoOp on all of them, and per gradient a ``control_dependency`` Identity, colocated
    with it, that runs after the group."""
    deps = []
    for g in grads:
        if isinstance(g, IndexedSlices):
            deps.extend(c.op for c in g._components())
        elif isinstance(g, Tensor):
            deps.append(g.op)
    with get_default_graph().control_dependencies(deps):
        gate = apply_op("NoOp", name="group_deps")

    def gated(t: Tensor) -> Tensor:
        with name_scope(None, "control_dependency", [t]) as scope:
            with colocate_with(t):
                with get_default_graph().control_dependencies([gate]):
                    return apply_op("Identity", name=scope, input=t)

    out: list[Any] = []
    for g in grads:
        if isinstance(g, IndexedSlices):
            out.append(IndexedSlices(gated(g.values), gated(g.indices), g.dense_shape))
        elif isinstance(g, Tensor):
            out.append(gated(g))
        else:
            out.append(g)
    return out


def _reachable_forward(start: Sequence[Operation], stop_ops: set[Operation]
                       ) -> set[Operation]:
    reached: set[Operation] = set()
    queue = collections.deque(start)
    while queue:
        op = queue.popleft()
        if op in reached:
            continue
        reached.add(op)
        if op in stop_ops:
            continue
        for t in op.outputs:
            queue.extend(t.consumers())
    return reached


class _maybe_colocate:
    def __init__(self, op: Operation, on: bool):
        self._ctx = colocate_with(op) if on else None

    def __enter__(self) -> None:
        if self._ctx is not None:
            self._ctx.__enter__()

    def __exit__(self, *a: Any) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(*a)


def hessians(ys: Any, xs: Any, name: str = "hessians", **kwargs: Any) -> list[Any]:
    """Second derivatives of ``sum(ys)`` with respect to each (1-D or scalar) x."""
    xs = _as_list(xs)
    out = []
    with name_scope(name):
        for x in xs:
            g1 = gradients(ys, x, **kwargs)[0]
            if g1 is None:
                out.append(None)
                continue
            flat = api_function("reshape")(g1, [-1])
            n = flat.shape.as_tuple()[0] if flat.shape.as_tuple() else None
            if n is None:
                raise ValueError("hessians needs the size of x to be known statically")
            rows = [gradients(flat[i], x, **kwargs)[0] for i in range(n)]
            rows = [r if r is not None else api_function("zeros_like")(x) for r in rows]
            out.append(api_function("reshape")(api_function("stack")(rows),
                                       x.shape.concatenate(x.shape).as_list()))
    return out
