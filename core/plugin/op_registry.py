"""Op definitions, kernel definitions and kernel sets.

An :class:`OpDef` is written in TensorFlow's ``REGISTER_OP`` notation::

    OpDef("MatMul",
          inputs=["a: T", "b: T"], outputs=["product: T"],
          attrs=["transpose_a: bool = false", "transpose_b: bool = false",
                 "T: {half, float, double, int32, int64, complex64, complex128}"],
          shape_fn=matmul_shape)

Inputs and outputs read ``name: T`` (a type attr), ``name: float`` (a fixed dtype),
``name: N * T`` (a list of N tensors of one type), ``name: Tlist`` (a ``list(type)``
attr) or ``name: Ref(T)`` (a reference, as variables give). Attrs read ``name: kind``
with an optional ``= default``; kinds are ``type``, ``int``, ``float``, ``bool``,
``string``, ``shape``, ``tensor``, ``func``, ``list(...)`` of those, a set of allowed
types ``{float, double}``, a named type group (``numbertype``, ``realnumbertype``), a
set of allowed strings ``{'SAME', 'VALID'}``, and a bound ``int >= 1``.

A :class:`KernelSet` gathers op defs, kernels, gradient functions and the public API
functions of one plugin; the :class:`~flowrt.runtime.Runtime` merges every plugin's
kernel sets into plain dicts once.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from ..base import dtypes as _dt
from .file_policy import OUTSIDE_STEP, UNRESTRICTED

__all__ = ["ArgDef", "AttrDef", "OpDef", "KernelDef", "KernelSet", "TYPE_GROUPS",
           "KernelContext"]

_F = [_dt.float16, _dt.bfloat16, _dt.float32, _dt.float64]
_I = [_dt.int8, _dt.int16, _dt.int32, _dt.int64, _dt.uint8, _dt.uint16, _dt.uint32,
      _dt.uint64]
_C = [_dt.complex64, _dt.complex128]
_Q = [_dt.qint8, _dt.quint8, _dt.qint16, _dt.quint16, _dt.qint32]
#: Named groups usable in attr specs (``T: numbertype``).
TYPE_GROUPS: dict[str, tuple[_dt.DType, ...]] = {
    "numbertype": tuple(_F + _I + _C),
    "realnumbertype": tuple(_F + _I),
    "floatingpointtype": tuple(_F),
    "integertype": tuple(_I),
    "complextype": tuple(_C),
    "quantizedtype": tuple(_Q),
    "alltypes": tuple(_F + _I + _C + [_dt.bool, _dt.string]),
}


@dataclass(frozen=True)
class ArgDef:
    """One input or output of an op.

    Exactly one of ``dtype``, ``type_attr`` and ``type_list_attr`` is set; ``number_attr``
    makes it a list of that many tensors of one type.
    """

    name: str
    dtype: _dt.DType | None = None
    type_attr: str | None = None
    number_attr: str | None = None
    type_list_attr: str | None = None
    is_ref: bool = False

    @property
    def is_list(self) -> bool:
        return self.number_attr is not None or self.type_list_attr is not None


def expand_args(args: Sequence[ArgDef], attrs: dict[str, Any]) -> list[ArgDef]:
    """The ``ArgDef`` of each position of a node's inputs or outputs: list arguments
    (``N * T``, a type list) repeated once per tensor, as ``attrs`` says."""
    out: list[ArgDef] = []
    for a in args:
        if a.number_attr is not None:
            out.extend([a] * int(attrs[a.number_attr]))
        elif a.type_list_attr is not None:
            out.extend([a] * len(attrs[a.type_list_attr]))
        else:
            out.append(a)
    return out


@dataclass(frozen=True)
class AttrDef:
    """One attr: its kind (``type``, ``int``, ``list(int)`` ...), default and constraints."""

    name: str
    kind: str
    default: Any = None
    has_default: bool = False
    allowed: tuple[Any, ...] | None = None
    minimum: int | None = None


_ARG_RE = re.compile(r"^\s*(\w+)\s*:\s*(.+?)\s*$")
_REF_RE = re.compile(r"^Ref\((.+)\)$")


def _parse_type_name(s: str) -> _dt.DType | None:
    try:
        return _dt.as_dtype(s.strip())
    except TypeError:
        return None


def _parse_arg(spec: str, attr_names: set[str], op: str) -> ArgDef:
    """The :class:`ArgDef` of op ``op``'s argument spec ``spec``, such as ``"x: T"``,
    ``"values: N * T"``, ``"ref: Ref(T)"`` or ``"y: float"``: the type is an attr named
    in ``attr_names`` (a ``list(type)`` attr gives a list of tensors) or a dtype name.

    :raises ValueError: when the spec does not parse or names an unknown type.
    """
    m = _ARG_RE.match(spec)
    if not m:
        raise ValueError(f"op {op}: cannot parse argument spec {spec!r}")
    name, t = m.group(1), m.group(2)
    is_ref = False
    r = _REF_RE.match(t)
    if r:
        is_ref, t = True, r.group(1).strip()
    number_attr = None
    if "*" in t:
        number_attr, t = (p.strip() for p in t.split("*", 1))
    if t in attr_names:
        if number_attr is None and _is_list_type_attr(t):
            return ArgDef(name, type_list_attr=t, is_ref=is_ref)
        return ArgDef(name, type_attr=t, number_attr=number_attr, is_ref=is_ref)
    d = _parse_type_name(t)
    if d is None:
        raise ValueError(f"op {op}: argument {name!r} has unknown type {t!r}")
    return ArgDef(name, dtype=d, number_attr=number_attr, is_ref=is_ref)


_LIST_TYPE_ATTRS: set[str] = set()  # filled per-op while parsing


def _is_list_type_attr(name: str) -> bool:
    return name in _LIST_TYPE_ATTRS


def _literal(text: str) -> Any:
    t = text.strip()
    low = t.lower()
    if low == "true":
        return True
    if low == "false":
        return False
    if low in ("none", "null"):
        return None
    t2 = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", t))
    try:
        return ast.literal_eval(t2)
    except (ValueError, SyntaxError):
        return t


def _parse_attr(spec: str, op: str) -> AttrDef:
    """The :class:`AttrDef` of op ``op``'s attr spec ``spec``, such as
    ``"T: {float, double}"``, ``"N: int >= 1"`` or ``"transpose_a: bool = false"``: its
    kind, the values a ``{...}`` set or a type group allows, its minimum, and its
    default as the kind's Python value (a DType for a type, None for an unknown shape).

    :raises ValueError: when the spec does not parse or its kind is unknown.
    :raises TypeError: for an unknown dtype name in an allowed set or a default.
    """
    m = _ARG_RE.match(spec)
    if not m:
        raise ValueError(f"op {op}: cannot parse attr spec {spec!r}")
    name, rest = m.group(1), m.group(2)
    default, has_default = None, False
    # split "kind = default" (the kind itself never contains a bare '=' except in '>=')
    dm = re.match(r"^(.*?[^<>!=])\s*=\s*([^=].*)$", rest)
    if dm:
        rest, dtext = dm.group(1).strip(), dm.group(2).strip()
        has_default = True
        default = dtext
    allowed: tuple[Any, ...] | None = None
    minimum = None
    mm = re.match(r"^(.*?)\s*>=\s*(-?\d+)$", rest)
    if mm:
        rest, minimum = mm.group(1).strip(), int(mm.group(2))
    if rest.startswith("{"):
        body = rest.strip("{} ")
        items = [x.strip() for x in body.split(",") if x.strip()]
        if items and items[0][0] in "'\"":
            kind = "string"
            allowed = tuple(_literal(x) for x in items)
        else:
            kind = "type"
            allowed = tuple(_dt.as_dtype(x) for x in items)
    elif rest in TYPE_GROUPS:
        kind, allowed = "type", TYPE_GROUPS[rest]
    elif rest.startswith("list(") and rest[5:-1].strip().startswith("{"):
        kind = "list(type)"
        allowed = tuple(_dt.as_dtype(x.strip()) for x in rest[5:-1].strip("{} ").split(",")
                        if x.strip())
    else:
        kind = rest
    if kind not in ("type", "int", "float", "bool", "string", "shape", "tensor", "func",
                    "list(type)", "list(int)", "list(float)", "list(bool)", "list(string)",
                    "list(shape)", "list(tensor)", "list(func)"):
        raise ValueError(f"op {op}: attr {name!r} has unknown kind {kind!r}")
    if has_default:
        if kind == "type":
            default = _dt.as_dtype(str(default).replace("DT_", "").lower())
        elif kind == "list(type)":
            v = _literal(default)
            default = [_dt.as_dtype(x) for x in v] if isinstance(v, list) else []
        elif kind == "shape":
            v = _literal(default)
            default = None if v in ("?", "None", None) else v
        else:
            default = _literal(default)
            if kind == "float" and isinstance(default, int):
                default = float(default)
    return AttrDef(name, kind, default, has_default, allowed, minimum)


class OpDef:
    """The definition of one op type: typed inputs/outputs, attrs, shape function, flags.

    :param name: the op type, e.g. ``"MatMul"``
    :param inputs: argument specs, e.g. ``["a: T", "b: T"]``
    :param outputs: argument specs
    :param attrs: attr specs, e.g. ``["T: {float, double}", "transpose_a: bool = false"]``
    :param shape_fn: ``fn(op) -> list[TensorShape]`` computing static output shapes from
        ``op.inputs[i].shape`` and ``op.get_attr(...)``; raise ``ValueError`` on mismatch.
        None gives unknown shapes.
    :param is_stateful: the op has side effects or hidden state (never folded, never
        deduplicated, its kernel lives as long as the session).
    :param allows_uninitialized_input: ref inputs may be uninitialised (``Assign``).
    :param doc: one-line summary.
    """

    __slots__ = ("name", "inputs", "outputs", "attrs", "shape_fn", "is_stateful",
                 "allows_uninitialized_input", "doc", "plugin")

    def __init__(self, name: str, inputs: Sequence[str] = (), outputs: Sequence[str] = (),
                 attrs: Sequence[str] = (), shape_fn: Callable[[Any], Any] | None = None,
                 is_stateful: bool = False, allows_uninitialized_input: bool = False,
                 doc: str = ""):
        """Parse the attr specs, then the argument specs against them (see the class).

        :raises ValueError: for a spec that does not parse, or an argument that refers
            to an attr the op does not declare.
        """
        self.name = name
        parsed_attrs = [_parse_attr(a, name) for a in attrs]
        self.attrs: dict[str, AttrDef] = {a.name: a for a in parsed_attrs}
        _LIST_TYPE_ATTRS.clear()
        _LIST_TYPE_ATTRS.update(a.name for a in parsed_attrs if a.kind == "list(type)")
        names = set(self.attrs)
        self.inputs: tuple[ArgDef, ...] = tuple(_parse_arg(s, names, name) for s in inputs)
        self.outputs: tuple[ArgDef, ...] = tuple(_parse_arg(s, names, name) for s in outputs)
        _LIST_TYPE_ATTRS.clear()
        for arg in self.inputs + self.outputs:
            for ref in (arg.type_attr, arg.number_attr, arg.type_list_attr):
                if ref is not None and ref not in self.attrs:
                    raise ValueError(f"op {name}: argument {arg.name!r} refers to "
                                     f"undeclared attr {ref!r}")
        self.shape_fn = shape_fn
        self.is_stateful = is_stateful
        self.allows_uninitialized_input = allows_uninitialized_input
        self.doc = doc
        self.plugin: str | None = None  # set by the runtime when merged

    def __repr__(self) -> str:
        return f"OpDef({self.name!r})"


class KernelContext:
    """What a kernel factory sees when a node is compiled (once, not per step).

    :ivar node_name: the node's name
    :ivar op_type: the op type
    :ivar attrs: the node's attrs as Python values (dtypes as :class:`DType`)
    :ivar device: the :class:`~flowrt.device.Device` the node runs on
    :ivar xp: that device's array module (numpy, cupy)
    :ivar input_dtypes / output_dtypes: base dtypes of the node's inputs and outputs
    :ivar input_shapes / output_shapes: static shapes (may be partly unknown)
    :ivar op: the graph :class:`~flowrt.graph.Operation` the node came from (None for
        nodes made by graph passes)
    :ivar session_state: per-session state for stateful kernels (rarely needed)
    :ivar file_policy: the :class:`~flowrt.plugin.file_policy.FilePolicy` every path the
        kernel opens must pass (``flowrt.plugin.file_policy.check_path``): its worker's
        (a server's ``file_roots``), unrestricted for a local session, and refusing
        every path for a kernel made outside a step (no ``session_state``)
    """

    __slots__ = ("node_name", "op_type", "attrs", "device", "xp", "input_dtypes",
                 "output_dtypes", "input_shapes", "output_shapes", "op", "session_state",
                 "file_policy")

    def __init__(self, node: Any, device: Any, session_state: Any = None):
        """What ``node`` (a step-graph node or a graph ``Operation``) on ``device`` gives
        its kernel; ``session_state`` is None outside a step (see ``file_policy``)."""
        self.op = getattr(node, "source_op", node)
        self.node_name: str = node.name
        self.op_type: str = node.type
        self.attrs: dict[str, Any] = node.node_attrs
        self.device = device
        self.xp = device.xp
        if hasattr(node, "in_dtypes"):
            self.input_dtypes = [d.base_dtype for d in node.in_dtypes]
            self.output_dtypes = [d.base_dtype for d in node.out_dtypes]
            self.input_shapes = list(node.in_shapes)
            self.output_shapes = list(node.out_shapes)
        else:  # a graph Operation
            self.input_dtypes = [t.dtype.base_dtype for t in node.inputs]
            self.output_dtypes = [t.dtype.base_dtype for t in node.outputs]
            self.input_shapes = [t.shape for t in node.inputs]
            self.output_shapes = [t.shape for t in node.outputs]
        self.session_state = session_state
        self.file_policy = OUTSIDE_STEP if session_state is None else \
            getattr(session_state, "file_policy", None) or UNRESTRICTED

    def attr(self, name: str) -> Any:
        return self.attrs[name]


@dataclass
class KernelDef:
    """A kernel for one op on one device type.

    ``factory(ctx: KernelContext)`` is called once when a step is compiled and returns
    the compute callable. By ``kind``:

    - ``"plain"``: ``compute(*inputs) -> output`` (or a tuple/list for several outputs)
    - ``"step"``: ``compute(step, *inputs) -> output``; ``step`` is the
      :class:`~flowrt.executor.StepContext` (resource manager, rendezvous, step id)
    - ``"async"``: ``compute(step, done, *inputs)``; call ``done(outputs)`` or
      ``done(None, exc)`` later, from any thread (Recv, queue dequeue)
    - ``"const"``: ``compute() -> output`` with no inputs and the same result every
      time; the executor may call it once per compiled step and reuse the value
    - ``"switch"``: called as ``"plain"``, but may return ``flowrt.executor.DEAD`` for
      an output; every node downstream of a dead tensor is dead and does not run
    - ``"merge"``: no compute: the executor forwards the first live input as output 0
      and its index as output 1 (the node is dead when every input is)

    ``device_type="*"`` registers an array-module kernel for every device type whose
    array module can run it; a kernel for a specific type overrides it.
    ``all_devices`` makes a ``"*"`` kernel available on every device type, even those
    that run no array kernels (framework ops that only move data: Const, _Send, _Recv).
    ``expensive`` kernels may run on the inter-op pool; cheap ones run inline.
    ``host_memory`` names inputs/outputs that stay in host memory on accelerators.
    ``supports(attrs) -> bool``, when given, says whether the kernel handles a node with
    these attrs (its dtypes, say); placement only picks a device type whose kernel
    supports the node, as TF's kernel type constraints do.
    """

    op: str
    factory: Callable[[KernelContext], Callable[..., Any]]
    device_type: str = "*"
    kind: str = "plain"
    expensive: bool = False
    host_memory: tuple[str, ...] = ()
    plugin: str | None = None
    all_devices: bool = False
    supports: Callable[[dict[str, Any]], bool] | None = None


class KernelSet:
    """A plugin's bundle of op defs, kernels, gradient functions and API functions.

    Build one at module level and return it from the ``flowrt_kernel_sets`` hook::

        ks = KernelSet("myops")
        ks.op(OpDef("Square2", inputs=["x: T"], outputs=["y: T"],
                    attrs=["T: {float, double}"], shape_fn=unchanged_shape))

        @ks.kernel("Square2")
        def _square2(ctx):
            return lambda x: x * x

        @ks.gradient("Square2")
        def _square2_grad(op, grad):
            return [grad * 2.0 * op.inputs[0]]

        @ks.api("square2", "math.square2")
        def square2(x, name=None):
            return apply_op("Square2", name=name, x=x)
    """

    def __init__(self, name: str):
        self.name = name
        self.ops: dict[str, OpDef] = {}
        self.kernels: list[KernelDef] = []
        self.gradients: dict[str, Callable[..., Any] | None] = {}
        self.api_names: dict[str, Any] = {}

    def op(self, *defs: OpDef) -> None:
        """Declare op definitions; a name declared twice in one set raises ValueError."""
        for d in defs:
            if d.name in self.ops:
                raise ValueError(f"kernel set {self.name!r} declares op {d.name!r} twice")
            self.ops[d.name] = d

    def kernel(self, *ops: str, device_type: str = "*", kind: str = "plain",
               expensive: bool = False, host_memory: Iterable[str] = (),
               all_devices: bool = False,
               supports: Callable[[dict[str, Any]], bool] | None = None) -> Callable:
        """Decorator registering ``factory`` as the kernel of ``ops`` on ``device_type``
        (the other arguments are :class:`KernelDef`'s). ``supports(attrs) -> bool``,
        when given, is asked with a node's attrs (``DType`` objects for its type attrs)
        and says whether this kernel handles that node: placement and the executor only
        use the kernel where it says yes."""
        if supports is not None and not callable(supports):
            raise TypeError(f"kernel set {self.name!r}: supports= for {list(ops)} must be "
                            f"a callable taking the node's attrs, got {supports!r}")

        def deco(factory: Callable[[KernelContext], Callable[..., Any]]) -> Callable:
            for o in ops:
                self.kernels.append(KernelDef(o, factory, device_type, kind, expensive,
                                              tuple(host_memory), all_devices=all_devices,
                                              supports=supports))
            return factory

        return deco

    def gradient(self, *ops: str) -> Callable:
        """Decorator registering ``fn(op, *output_grads) -> list of input grads``."""

        def deco(fn: Callable[..., Any]) -> Callable:
            for o in ops:
                self.gradients[o] = fn
            return fn

        return deco

    def not_differentiable(self, *ops: str) -> None:
        """Mark ops as having no gradient (their inputs get None)."""
        for o in ops:
            self.gradients[o] = None

    def api(self, *names: str) -> Callable:
        """Decorator exporting a function under ``flowrt.<name>`` (dotted for namespaces)."""

        def deco(fn: Any) -> Any:
            for n in names:
                if n in self.api_names and self.api_names[n] is not fn:
                    raise ValueError(f"kernel set {self.name!r} exports {n!r} twice")
                self.api_names[n] = fn
            return fn

        return deco

    def export(self, name: str, value: Any) -> None:
        """Export a non-function value (a class, a constant) under ``flowrt.<name>``."""
        self.api(name)(value)
