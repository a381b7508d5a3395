"""The conformance kit runs kernels (``flowrt.testing``).

For an op it builds nodes with sample attrs (every type attr's usual dtypes, every bool
attr flipped) and sample inputs (several shapes, random values), and calls kernels the
way the executor does: the factory once, then ``compute`` on device arrays made with
``from_host``, the outputs brought back with ``to_host``. What it checks:

- a kernel's outputs have the dtype the OpDef gives and the shape the shape function
  gives (:func:`check_compute`);
- a device's kernel computes what the CPU kernel of the same op computes
  (:func:`compare_with_cpu`), for ops of any plugin;
- a gradient function agrees with central differences of the CPU kernel
  (:func:`check_gradient`).

A sample fits an op when its shape function accepts the shapes and the reference kernel
computes it; a kernel that fits none is reported as skipped, with the last error.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..base import dtypes as _dt
from ..base import errors
from ..base.tensor_shape import TensorShape, as_shape, unknown_shape
from ..engine.executor import SessionState
from ..engine.plan import DEAD
from ..framework.graph import Graph
from ..framework.session import Session
from ..plugin.device import Device
from ..plugin.op_registry import AttrDef, KernelContext, KernelDef, OpDef
from ..proto.config_pb2 import ConfigProto
from .conformance_report import exc_text, fail

__all__ = ["SHAPE_SETS", "trivial_attrs", "attr_variants", "build_node", "input_dtypes",
           "run_kernel", "find_sample", "check_compute", "compare_with_cpu",
           "check_gradient", "device_for", "HostDevice"]

#: Preferred dtypes when a check must pick one of an attr's allowed types.
_PREFERRED = (_dt.float32, _dt.float64, _dt.int32, _dt.int64, _dt.bool)
#: The dtypes a type attr is varied over (those it allows).
_VARIED = (_dt.float32, _dt.float64, _dt.int32, _dt.int64)
#: Input shapes tried, in order; input ``i`` gets entry ``min(i, len - 1)``.
SHAPE_SETS: tuple[tuple[tuple[int, ...], ...], ...] = (
    ((2, 3),), ((3, 3),), ((2, 3), (3, 2)), ((4,),), ((),), ((2, 3, 4),))

_PLACEHOLDER = OpDef("Placeholder", outputs=["output: dtype"],
                     attrs=["dtype: type", "shape: shape = ?"],
                     shape_fn=lambda op: [op.node_attrs["shape"]])


class HostDevice(Device):
    """A plain host device, the copy source and target when no runtime CPU exists."""

    def __init__(self) -> None:
        super().__init__("CPU", 0, description="flowrt.testing host device")

    def to_host(self, value: Any) -> np.ndarray:
        return value

    def from_host(self, value: np.ndarray) -> Any:
        return value


def device_for(rt: Any, device_type: str, cache: dict[str, Any]) -> Any:
    """A device of ``device_type`` from ``rt`` (asked for with ``device_count`` when
    plain discovery finds none), a :class:`HostDevice` for ``CPU``, or None."""
    if device_type in cache:
        return cache[device_type]
    dev = None
    dt = rt.device_types.get(device_type) if rt is not None else None
    if dt is not None:
        for config in (None, ConfigProto(device_count={device_type: 1})):
            try:
                devs = dt.discover(config, "localhost", 0)
            except Exception:  # noqa: BLE001 - the device-type check reports it
                devs = []
            if devs:
                dev = devs[0]
                break
    if dev is None and device_type == "CPU":
        dev = HostDevice()
    cache[device_type] = dev
    return dev


# -- nodes -----------------------------------------------------------------------------
def _pick_type(adef: AttrDef) -> _dt.DType:
    if adef.has_default and isinstance(adef.default, _dt.DType):
        return adef.default
    if not adef.allowed:
        return _dt.float32
    return next((d for d in _PREFERRED if d in adef.allowed), adef.allowed[0])


def trivial_attrs(d: OpDef) -> tuple[dict[str, Any] | None, str]:
    """Attr values for a node of ``d`` (None and why when none are obvious)."""
    attrs: dict[str, Any] = {}
    number_attrs = {a.number_attr for a in d.inputs + d.outputs if a.number_attr}
    for name, a in d.attrs.items():
        if a.kind == "type":
            attrs[name] = _pick_type(a)
        elif a.has_default:
            attrs[name] = a.default
        elif a.kind == "list(type)":
            n = max(a.minimum or 0, 1)
            attrs[name] = [_pick_type(AttrDef(name, "type", allowed=a.allowed))] * n
        elif a.kind == "int" and name in number_attrs:
            attrs[name] = max(a.minimum or 0, 1)  # a list of at least one tensor
        elif a.kind == "int" and a.minimum is not None:
            attrs[name] = a.minimum
        elif a.kind == "shape":
            attrs[name] = unknown_shape()
        elif a.kind == "tensor":
            attrs[name] = None  # filled from the dtype below
        elif a.kind == "string" and a.allowed:
            attrs[name] = a.allowed[0]
        else:
            return None, f"attr {name!r} ({a.kind}) has no default"
    if {"seed", "seed2"} <= set(attrs):  # seeded: random ops compare between devices
        attrs["seed"], attrs["seed2"] = 1, 2
    for name, a in d.attrs.items():
        if a.kind == "tensor" and attrs.get(name) is None:
            t = next((attrs[x] for x, b in d.attrs.items() if b.kind == "type"), _dt.float32)
            attrs[name] = np.zeros((), dtype=t.np if t.is_numpy_compatible else np.float32)
    return attrs, ""


def attr_variants(d: OpDef, attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """``attrs``, then each type attr set to each of its other usual dtypes, then each
    bool attr flipped (``transpose_a=True``)."""
    out = [attrs]
    tensors = [n for n, b in d.attrs.items() if b.kind == "tensor"]
    for name, a in d.attrs.items():
        if a.kind == "type" and isinstance(attrs.get(name), _dt.DType):
            # a tensor attr (Const's value) takes the varied dtype, as a graph's would
            out += [{**attrs, name: t, **{n: np.asarray(attrs[n]).astype(t.np)
                                          for n in tensors if attrs.get(n) is not None}}
                    for t in _VARIED if t != attrs[name] and (not a.allowed or t in a.allowed)]
        elif a.kind == "bool" and isinstance(attrs.get(name), bool):
            out.append({**attrs, name: not attrs[name]})
    return out


def _arg_dtypes(arg: Any, attrs: dict[str, Any]) -> list[_dt.DType]:
    """The dtypes of one (possibly list) argument for a node with ``attrs``."""
    if arg.type_list_attr is not None:
        ts = [_dt.as_dtype(x) for x in attrs[arg.type_list_attr]]
    else:
        t = arg.dtype if arg.dtype is not None else _dt.as_dtype(attrs[arg.type_attr])
        ts = [t] * (int(attrs[arg.number_attr]) if arg.number_attr else 1)
    return [t._as_ref if arg.is_ref else t for t in ts]


def _flat(args: Sequence[Any], attrs: dict[str, Any]) -> list[tuple[str, _dt.DType]]:
    return [(a.name, t) for a in args for t in _arg_dtypes(a, attrs)]


def input_dtypes(d: OpDef, attrs: dict[str, Any]) -> list[_dt.DType]:
    """The dtypes of a node's inputs, list arguments expanded."""
    return [t for _, t in _flat(d.inputs, attrs)]


def build_node(d: OpDef, attrs: dict[str, Any], shapes: Sequence[TensorShape] | TensorShape,
               rt: Any, graph: Any = None, compute_shapes: bool = False) -> Any:
    """An Operation of ``d`` in ``graph`` (a new one of ``rt``) fed by placeholders of
    ``shapes`` (one shape for all inputs, or one per input)."""
    g = graph if graph is not None else Graph(runtime=rt)
    inputs = []
    for i, t in enumerate(input_dtypes(d, attrs)):
        s = shapes if isinstance(shapes, TensorShape) else as_shape(shapes[i])
        p = g.create_op("Placeholder", [], [t], name=f"input_{i}",
                        attrs={"dtype": t.base_dtype, "shape": s}, op_def=_PLACEHOLDER)
        inputs.append(p.outputs[0])
    return g.create_op(d.name, inputs, name="node", attrs=dict(attrs), op_def=d,
                       compute_shapes=compute_shapes)


# -- sample inputs ---------------------------------------------------------------------
def _value(t: _dt.DType, shape: tuple[int, ...], rng: Any, small: bool) -> Any:
    if t == _dt.string:
        n = int(np.prod(shape))
        return np.array([b"s%d" % i for i in range(n)], dtype=object).reshape(shape)
    if not t.is_numpy_compatible:
        return None
    npd = np.dtype(t.np)
    if npd.kind == "b":
        return np.asarray(rng.random(shape) < 0.5)
    if npd.kind in "iu":
        lo, hi = (0, 2) if small else ((0, 4) if npd.kind == "u" else (-3, 4))
        return np.asarray(rng.integers(lo, hi, size=shape)).astype(npd)
    if npd.kind == "f":
        return np.asarray(rng.normal(size=shape)).astype(npd)
    if npd.kind == "c":
        return np.asarray(rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(npd)
    return None


# -- running kernels -------------------------------------------------------------------
def _attrs_text(attrs: dict[str, Any]) -> str:
    return "attrs " + str({k: (v.name if isinstance(v, _dt.DType) else v)
                           for k, v in attrs.items()
                           if not isinstance(v, (np.ndarray, TensorShape))})


def _describe(values: Sequence[Any], attrs: dict[str, Any]) -> str:
    ins = ", ".join(f"{np.asarray(v).dtype} {list(np.shape(v))}" for v in values) or "none"
    return f"inputs ({ins}), {_attrs_text(attrs)}"


def run_kernel(k: KernelDef, node: Any, dev: Any, values: Sequence[Any]) -> list[Any]:
    """Compile ``k`` for ``node`` on ``dev`` and run it once on host ``values``, moved
    as the executor moves feeds: with ``from_host``, except host-memory arguments and on
    a device whose kernels take host arrays (``Device.host_inputs``; the CPU); the
    outputs, back on the host."""
    d = node.op_def
    attrs = node.node_attrs
    fn = k.factory(KernelContext(node, dev, SessionState("flowrt.testing")))
    host = getattr(dev, "host_inputs", None)
    hm = set(k.host_memory) if not (dev.device_type == "CPU" if host is None else host) \
        else {n for n, _ in _flat(d.inputs, attrs)}
    args = [v if n in hm else dev.from_host(v)
            for v, (n, _) in zip(values, _flat(d.inputs, attrs))]
    outs = _flat(d.outputs, attrs)
    if k.kind not in ("const", "plain", "switch"):
        raise errors.UnimplementedError(None, None, f"{k.kind} kernels need a step")
    with np.errstate(all="ignore"):  # random inputs: nan and inf are expected
        got = fn() if k.kind == "const" else fn(*args)
    got = [got] if len(outs) == 1 else list(got if got is not None else ())
    if len(got) != len(outs):
        raise _WrongCount(f"returned {len(got)} outputs, the OpDef declares {len(outs)}")
    return [o if o is DEAD or n in k.host_memory else dev.to_host(o)
            for o, (n, _) in zip(got, outs)]


class _WrongCount(Exception):
    pass


def find_sample(d: OpDef, k: KernelDef, attrs: dict[str, Any], dev: Any, rt: Any,
                rng: Any, values: Sequence[Any] | None = None,
                prefer: list[tuple[int, ...]] | None = None
                ) -> tuple[Any, list[Any], Any, list[Any]] | tuple[None, str]:
    """The first sample ``k`` computes on ``dev`` and the shape function accepts:
    ``(node, values, static shapes or None, outputs)``; else ``(None, last error)``.
    The input shapes ``prefer`` (those that fitted another variant), then each shape
    set of :data:`SHAPE_SETS`, are tried with values in [-3, 3], then with integers in
    {0, 1} (indices, axes); ``values`` tries those only."""
    dts = input_dtypes(d, attrs)
    sets = [[np.shape(v) for v in values]] if values is not None else \
        [[s[min(i, len(s) - 1)] for i in range(len(dts))] for s in SHAPE_SETS] if dts else [[]]
    if prefer is not None and values is None and len(prefer) == len(dts):
        sets = [list(prefer)] + [x for x in sets if x != list(prefer)]
    built: dict[int, Any] = {}
    last: tuple[Any, ...] = ("no sample input of these dtypes",)
    for small in ((False,) if values is not None or not dts else (False, True)):
        for si, shapes in enumerate(sets):
            if si not in built:
                try:
                    node = build_node(d, attrs, [TensorShape(s) for s in shapes], rt)
                except (ValueError, TypeError, KeyError) as e:
                    return None, f"could not build a node: {exc_text(e)}"
                try:
                    static = d.shape_fn(node) if d.shape_fn is not None else None
                except (ValueError, TypeError) as e:
                    built[si] = None
                    last = ("the shape function refused shapes", shapes, e)
                    continue
                built[si] = (node, static)
            if built[si] is None:
                continue
            node, static = built[si]
            vals = list(values) if values is not None else \
                [_value(t, s, rng, small) for t, s in zip(dts, shapes)]
            if any(v is None for v in vals):
                return None, f"no sample values of dtypes {[t.name for t in dts]}"
            try:
                return node, vals, static, run_kernel(k, node, dev, vals)
            except _WrongCount:
                raise
            except Exception as e:  # noqa: BLE001 - this sample does not fit the op
                last = ("the kernel raised", vals, e)
    if len(last) == 1:
        return None, last[0]
    what, x, e = last
    ins = _describe(x, attrs) if what.startswith("the kernel") else f"{x}, {_attrs_text(attrs)}"
    return None, f"{what} {exc_text(e)} on {ins}"


def _dtype_ok(got: np.dtype, want: _dt.DType) -> bool:
    if want.base_dtype == _dt.string:
        return got.kind in "OS"
    return want.is_numpy_compatible and got == np.dtype(want.np)


def _shape_ok(static: Any, shape: tuple[int, ...]) -> bool:
    dims = as_shape(static).as_tuple()
    return dims is None or (len(dims) == len(shape) and
                            all(a is None or a == b for a, b in zip(dims, shape)))


def _check_outputs(node: Any, outs: Sequence[Any], static: Any, where: list[str],
                   what: str) -> None:
    """Each output is an array of the OpDef's dtype and of the static shape."""
    for i, (o, (n, t)) in enumerate(zip(outs, _flat(node.op_def.outputs, node.node_attrs))):
        if o is DEAD:
            continue
        if (not t.is_numpy_compatible and t.base_dtype != _dt.string) or t.is_ref_dtype:
            continue  # resources, variants, variable references: not arrays
        if not isinstance(o, (np.ndarray, np.generic)):
            fail(where, f"{what}: output {n!r} is a {type(o).__name__}, not an array "
                        "(kernels return arrays of the output dtype)")
        if not _dtype_ok(o.dtype, t):
            fail(where, f"{what}: output {n!r} has dtype {o.dtype}, but the OpDef gives "
                        f"{t.name}: kernels return exactly the output dtype")
        s = static[i] if static is not None and i < len(static) else None
        if s is not None and not _shape_ok(s, np.shape(o)):
            fail(where, f"{what}: the shape function gives output {n!r} the static shape "
                        f"{as_shape(s)}, but the kernel computed shape {list(np.shape(o))}: "
                        "static shapes must hold at run time")


#: outputs defined only up to the sign of each column (eigenvectors, singular vectors):
#: LAPACK and the GPU solvers pick different signs, so both sides are normalised first
SIGN_FREE_COLUMNS: dict[str, frozenset[str]] = {
    "SelfAdjointEigV2": frozenset({"v"}), "Svd": frozenset({"u", "v"})}


def _column_signs_fixed(a: Any) -> np.ndarray:
    """``a`` with each column (last-but-one axis) multiplied by the sign of its entry of
    largest magnitude, so vectors equal up to sign compare equal."""
    a = np.asarray(a)
    if a.ndim < 2 or a.size == 0:
        return a
    idx = np.argmax(np.abs(a), axis=-2)[..., None, :]
    sign = np.sign(np.take_along_axis(a, idx, axis=-2))
    return a * np.where(sign == 0, 1, sign)


def _close(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc":
        tol = float(np.sqrt(np.finfo(a.dtype).resolution))
        return bool(np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True))
    return bool(np.array_equal(a, b))


def check_compute(d: OpDef, k: KernelDef, cpu: Any, rt: Any, where: list[str],
                  rng: Any) -> tuple[int, str, tuple[Any, ...] | None]:
    """Run ``k`` (a CPU or generic kernel of ``d``) for every attr variant on the first
    sample that fits; fail on an output of the wrong count, dtype or shape.

    :returns: (variants run, why none ran, the first fitting (attrs, node, values))"""
    base, why = trivial_attrs(d)
    if base is None:
        return 0, why, None
    ran, first, prefer = 0, None, None
    for i, attrs in enumerate(attr_variants(d, base)):
        if k.supports is not None and not k.supports(attrs):
            continue
        try:
            got = find_sample(d, k, attrs, cpu, rt, rng, prefer=prefer)
        except _WrongCount as e:
            fail(where, f"for {_attrs_text(attrs)}: the kernel {e}")
        if got[0] is None:
            why = got[1]
            if i == 0:
                break  # no sample fits the usual attrs: the variants would not fit either
            continue
        node, vals, static, outs = got
        prefer = [np.shape(v) for v in vals]
        _check_outputs(node, outs, static, where, f"on {_describe(vals, attrs)}")
        ran += 1
        first = first or (attrs, node, vals)
    return ran, why, first


def compare_with_cpu(d: OpDef, k: KernelDef, ref: KernelDef, dev: Any, cpu: Any, rt: Any,
                     where: list[str], rng: Any) -> tuple[int, str]:
    """Run device kernel ``k`` and CPU kernel ``ref`` on the same samples (every attr
    variant the device kernel supports); fail on any difference.

    :returns: (variants compared, why none could be)"""
    base, why = trivial_attrs(d)
    if base is None:
        return 0, why
    n, prefer = 0, None
    for attrs in attr_variants(d, base):
        if any(x.supports is not None and not x.supports(attrs) for x in (k, ref)):
            continue
        got = find_sample(d, ref, attrs, cpu, rt, rng, prefer=prefer)
        if got[0] is None:
            why = f"the CPU kernel computed no sample: {got[1]}"
            continue
        node, vals, static, want = got
        prefer = [np.shape(v) for v in vals]
        what = f"on {_describe(vals, attrs)}"
        try:
            outs = run_kernel(k, node, dev, vals)
        except Exception as e:  # noqa: BLE001 - reported with the inputs
            fail(where, f"raised {exc_text(e)} {what}, which the CPU kernel computes")
        _check_outputs(node, outs, static, where, what)
        for (name, t), o, w in zip(_flat(d.outputs, attrs), outs, want):
            if t.is_ref_dtype:
                continue  # a variable reference: compared through the ops that read it
            if name in SIGN_FREE_COLUMNS.get(d.name, ()) and o is not DEAD:
                o, w = _column_signs_fixed(o), _column_signs_fixed(w)
            if (o is DEAD) != (w is DEAD) or (o is not DEAD and not _close(o, w)):
                fail(where, f"output {name!r} differs from the CPU kernel's {what}: got "
                            f"{np.asarray(o)!r}, the CPU kernel gives {np.asarray(w)!r}")
        n += 1
    return n, why


# -- gradients -------------------------------------------------------------------------
def _float_variant(d: OpDef, base: dict[str, Any]) -> dict[str, Any] | None:
    """The variant of ``base`` with the widest float inputs and only float outputs."""
    best = None
    for attrs in attr_variants(d, base):
        ins = input_dtypes(d, attrs)
        outs = [t for _, t in _flat(d.outputs, attrs)]
        if not outs or not any(t.is_floating for t in ins) or \
                not all(t.is_floating for t in outs):
            continue
        if best is None or _dt.float64 in ins:
            best = attrs
    return best


def check_gradient(d: OpDef, fn: Callable[..., Any], k: KernelDef, cpu: Any, rt: Any,
                   where: list[str], rng: Any) -> str | None:
    """Compare the gradient function ``fn`` of ``d`` with central differences of the
    CPU kernel ``k``, with respect to every float input, at a sample of positive values.

    :returns: None when they agree, or why the gradient could not be checked
    :raises AssertionError: when they differ, or ``fn`` returns the wrong number of
        gradients"""
    base, why = trivial_attrs(d)
    attrs = _float_variant(d, base) if base is not None else None
    if attrs is None:
        return why or "no variant with float inputs and float outputs"
    got = find_sample(d, k, attrs, cpu, rt, rng)
    if got[0] is None:
        return f"the CPU kernel computed no sample: {got[1]}"
    vals = [np.asarray(v) for v in got[1]]
    vals = [(rng.uniform(0.2, 0.9, v.shape)).astype(v.dtype) if v.dtype.kind == "f" else v
            for v in vals]
    g = Graph(runtime=rt)
    try:
        with g.as_default():
            node = build_node(d, attrs, [TensorShape(v.shape) for v in vals], rt, g, True)
            kfn = k.factory(KernelContext(node, cpu, SessionState("flowrt.testing")))
            ys = [np.asarray(y) for y in run_kernel(k, node, cpu, vals)]
            dys = [g.create_op("Placeholder", [], [t.dtype], name=f"dy_{i}",
                               attrs={"dtype": t.dtype, "shape": TensorShape(y.shape)},
                               op_def=_PLACEHOLDER).outputs[0]
                   for i, (t, y) in enumerate(zip(node.outputs, ys))]
            grads = fn(node, *dys)
    except Exception as e:  # noqa: BLE001 - a sample the gradient cannot take
        return f"building the gradient raised {exc_text(e)}"
    if not isinstance(grads, (list, tuple)) or len(grads) != len(vals):
        fail(where, f"returned {type(grads).__name__} of "
                    f"{len(grads) if isinstance(grads, (list, tuple)) else '?'} gradients "
                    f"for {len(vals)} inputs: one gradient (or None) per input")
    if not all(y.dtype.kind == "f" and np.all(np.isfinite(y)) for y in ys):
        return "the op's outputs are not finite floats at the sample"
    # (input index, gradient tensor) for float inputs with a gradient (None: none given)
    wanted = [(i, t) for i, t in enumerate(grads) if t is not None and vals[i].dtype.kind == "f"]
    if any(not hasattr(t, "op") for _, t in wanted):
        return "a gradient is not a dense tensor"
    dy_vals = [rng.normal(size=y.shape).astype(y.dtype) for y in ys]
    feeds = {**dict(zip(node.inputs, vals)), **dict(zip(node.outputs, ys)),
             **dict(zip(dys, dy_vals))}
    try:
        with Session(graph=g, runtime=rt) as s:
            analytic = s.run([t for _, t in wanted], feeds)
    except Exception as e:  # noqa: BLE001 - a gradient graph the runtime cannot run
        return f"running the gradient raised {exc_text(e)}"
    single = min(v.dtype.itemsize for v in [*ys, *(vals[i] for i, _ in wanted)]) < 8
    eps, rtol, atol = (1e-3, 3e-2, 3e-3) if single else (1e-6, 1e-4, 1e-6)

    def numeric(i: int, h: float) -> np.ndarray:
        out = np.zeros(vals[i].shape, np.float64)
        for j in np.ndindex(vals[i].shape):
            for sgn in (1, -1):
                xs = list(vals)
                xs[i] = vals[i].copy()
                xs[i][j] += sgn * h
                ys2 = [kfn(*xs)] if len(ys) == 1 else kfn(*xs)
                out[j] += sgn * sum(np.sum(np.asarray(y, np.float64) * dy)
                                    for y, dy in zip(ys2, dy_vals)) / (2 * h)
        return out

    for (i, _), ana in zip(wanted, analytic):
        with np.errstate(all="ignore"):
            num, num2 = numeric(i, eps), numeric(i, eps / 2)
        if not (np.all(np.isfinite(num)) and np.allclose(num, num2, rtol=rtol, atol=atol)):
            return "the op is not smooth at the sample (central differences disagree)"
        ana = np.asarray(ana, np.float64)
        if ana.shape != num.shape or not np.allclose(ana, num, rtol=rtol, atol=atol):
            name = _flat(d.inputs, attrs)[i][0]
            at = np.unravel_index(int(np.argmax(np.abs(ana - num))), num.shape) \
                if ana.shape == num.shape else None
            shown = (f"got {float(ana[at]):.6g}, numeric {float(num[at]):.6g} at "
                     f"{list(map(int, at))}"
                     if at is not None else f"got shape {list(ana.shape)}")
            fail(where, f"the gradient with respect to input {name!r} ({vals[i].dtype} "
                        f"{list(vals[i].shape)}) differs from central differences of the "
                        f"CPU kernel: {shown} ({_attrs_text(attrs)})")
    return None
