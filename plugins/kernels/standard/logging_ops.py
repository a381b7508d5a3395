"""logging_ops of the standard kernel set: Assert, Print, PrintV2, and the Python helpers
``tf.Assert``, ``tf.Print``, ``tf.print``, ``tf.group``, ``tf.tuple`` and the
``tf.debugging.assert_*`` checks built from Assert.

Tensor data in messages is summarised as TF's ``Tensor::SummarizeValue`` does: elements
separated by spaces, nested brackets for the inner dimensions, at most ``summarize``
elements followed by ``...``.
"""
from __future__ import annotations

import logging
import sys
import threading
from typing import Any, Callable, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.graph import (Operation, Tensor, apply_op, control_dependencies,
                          convert_to_tensor, get_default_graph, is_tensor, name_scope)
from flowrt.op_registry import OpDef
from flowrt.plugin.file_policy import check_path

from ._common import constant_value, ks, unchanged_shape
from .control_flow_ops import cond


# ---------------------------------------------------------------------------------------
# value formatting (TF's SummarizeValue)
# ---------------------------------------------------------------------------------------
def _c_escape(b: bytes) -> str:
    """TF's ``str_util::CEscape`` of a byte string."""
    out = []
    for ch in b:
        if ch == 0x0A:
            out.append("\\n")
        elif ch == 0x0D:
            out.append("\\r")
        elif ch == 0x09:
            out.append("\\t")
        elif ch == 0x22:
            out.append('\\"')
        elif ch == 0x27:
            out.append("\\'")
        elif ch == 0x5C:
            out.append("\\\\")
        elif ch < 0x20 or ch >= 0x7F:
            out.append("\\%03o" % ch)
        else:
            out.append(chr(ch))
    return "".join(out)


def _fmt_float(v: float, digits: int, wide_digits: int, cast: Callable[[float], Any]) -> str:
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    s = "%.*g" % (digits, v)
    if cast(float(s)) != cast(v):
        s = "%.*g" % (wide_digits, v)
    return s


def _fmt_element(v: Any, kind: str) -> str:
    if kind == "S":
        if isinstance(v, str):
            v = v.encode()
        return _c_escape(bytes(v))
    if kind == "b":
        return "1" if v else "0"
    if kind == "f4":
        return _fmt_float(float(v), 6, 9, np.float32)
    if kind == "f8":
        return _fmt_float(float(v), 15, 17, np.float64)
    if kind == "c":
        re_, im = (np.float32, "f4") if np.asarray(v).dtype == np.complex64 else \
            (np.float64, "f8")
        return f"({_fmt_element(re_(v.real), im)},{_fmt_element(re_(v.imag), im)})"
    return str(int(v))


def _kind_of(a: np.ndarray) -> str:
    k = a.dtype.kind
    if k in ("O", "S", "U"):
        return "S"
    if k == "b":
        return "b"
    if k == "f":
        return "f8" if a.dtype == np.float64 else "f4"
    if k == "c":
        return "c"
    return "i"


def summarize_value(value: Any, max_entries: int) -> str:
    """Format ``value`` as TF's ``Tensor::SummarizeValue(max_entries)`` (TF1 layout)."""
    a = np.asarray(value)
    n = a.size
    if max_entries < 0:
        max_entries = n
    limit = min(max_entries, n)
    kind = _kind_of(a)
    flat = a.reshape(-1)
    shape = a.shape
    if not shape:
        s = " ".join(_fmt_element(flat[i], kind) for i in range(limit))
        return s + ("..." if n > limit else "")
    out: list[str] = []
    idx = [0]
    rank = len(shape)

    def one_dim(d: int) -> None:
        if idx[0] >= limit:
            return
        count = shape[d]
        if d == rank - 1:
            for i in range(count):
                if idx[0] >= limit:
                    if d != 0 and i < count:
                        out.append("...")
                    return
                if i > 0:
                    out.append(" ")
                out.append(_fmt_element(flat[idx[0]], kind))
                idx[0] += 1
            return
        for _ in range(count):
            flag = False
            if idx[0] < limit:
                out.append("[")
                flag = True
            one_dim(d + 1)
            if idx[0] < limit or flag:
                out.append("]")

    one_dim(0)
    s = "".join(out)
    return s + ("..." if n > limit else "")


# ---------------------------------------------------------------------------------------
# ops
# ---------------------------------------------------------------------------------------
def _assert_shape(op: Any) -> list[Any]:
    d = op.inputs[0].shape.as_tuple()
    if d is not None and any(x not in (1, None) for x in d):
        raise ValueError(f"Shape must be rank 0 but is rank {len(d)} for '{op.name}' "
                         f"(op: '{op.type}')")
    return []


ks.op(
    OpDef("Assert", inputs=["condition: bool", "data: T"],
          attrs=["T: list(type)", "summarize: int = 3"], shape_fn=_assert_shape,
          is_stateful=True, doc="Raises InvalidArgumentError with the data when false."),
    OpDef("Print", inputs=["input: T", "data: U"], outputs=["output: T"],
          attrs=["T: type", "U: list(type) >= 0", "message: string = ''",
                 "first_n: int = -1", "summarize: int = 3"],
          shape_fn=unchanged_shape, is_stateful=True,
          doc="Passes input through, printing message and data to stderr."),
    OpDef("PrintV2", inputs=["input: string"],
          attrs=["output_stream: string = 'stderr'", "end: string = '\\n'"],
          shape_fn=lambda op: [], is_stateful=True, doc="Prints a string scalar."),
)


def _to_host(ctx: Any, a: Any) -> np.ndarray:
    if isinstance(a, (np.ndarray, np.generic, bytes, str)):
        return np.asarray(a)
    try:
        return np.asarray(ctx.device.to_host(a))
    except Exception:  # not an array of the device (e.g. a Python object)
        return np.asarray(a)


@ks.kernel("Assert", host_memory=("condition", "data"))
def _assert_kernel(ctx: Any) -> Any:
    summarize = int(ctx.attrs.get("summarize", 3))

    def compute(cond: Any, *data: Any) -> None:
        c = _to_host(ctx, cond)
        if c.size != 1:
            raise errors.InvalidArgumentError(
                None, None, f"In[0] should be a scalar: {list(c.shape)}")
        if bool(c.reshape(())):
            return None
        parts = [f"[{summarize_value(_to_host(ctx, d), summarize)}]" for d in data]
        raise errors.InvalidArgumentError(None, None, "assertion failed: " + " ".join(parts))

    return compute


@ks.kernel("Print")
def _print_kernel(ctx: Any) -> Any:
    message = ctx.attrs.get("message", "") or ""
    if isinstance(message, bytes):
        message = message.decode(errors="replace")
    first_n = int(ctx.attrs.get("first_n", -1))
    summarize = int(ctx.attrs.get("summarize", 3))
    lock = threading.Lock()
    count = [0]

    def compute(x: Any, *data: Any) -> Any:
        if first_n >= 0:
            with lock:
                if count[0] >= first_n:
                    return x
                count[0] += 1
        msg = message + "".join(f"[{summarize_value(_to_host(ctx, d), summarize)}]"
                                for d in data)
        print(msg, file=sys.stderr, flush=True)
        return x

    return compute


_FILE_PREFIX = "file://"
#: PrintV2's logging streams and the Python logging level each logs at
_LOG_STREAMS = {"log(info)": logging.INFO, "log(warning)": logging.WARNING,
                "log(error)": logging.ERROR}


def _output_stream_name(output_stream: Any) -> str | None:
    """PrintV2's ``output_stream`` attr for a ``tf.print`` stream: sys.stdout/sys.stderr,
    a logging level (``logging.INFO`` ...) or logging function (``logging.info``,
    ``tf.logging.info`` ...), as TF 1.15's table; None when unsupported."""
    if output_stream is sys.stdout or output_stream == "stdout":
        return "stdout"
    if output_stream is sys.stderr or output_stream == "stderr":
        return "stderr"
    if isinstance(output_stream, int) and not isinstance(output_stream, bool):
        return {logging.INFO: "log(info)", logging.WARNING: "log(warning)",
                logging.ERROR: "log(error)"}.get(output_stream)
    fn_name = getattr(output_stream, "__name__", None)
    module = getattr(output_stream, "__module__", "") or ""
    if callable(output_stream) and module.split(".")[0] in ("logging", "flowrt", "absl"):
        return {"info": "log(info)", "warning": "log(warning)", "warn": "log(warning)",
                "error": "log(error)"}.get(fn_name or "")
    return None


@ks.kernel("PrintV2", host_memory=("input",))
def _print_v2_kernel(ctx: Any) -> Any:
    stream = ctx.attrs.get("output_stream", "stderr")
    end = ctx.attrs.get("end", "\n")
    if isinstance(stream, bytes):
        stream = stream.decode()
    if isinstance(end, bytes):
        end = end.decode()
    file_path = stream[len(_FILE_PREFIX):] if stream.startswith(_FILE_PREFIX) else None
    log_level = _LOG_STREAMS.get(stream)
    if file_path is None and log_level is None and stream not in ("stderr", "stdout"):
        raise errors.InvalidArgumentError(
            None, None, f"{stream} is not a valid output_stream; valid streams are stderr, "
                        "stdout, log(info), log(warning), log(error), file://<filename>")

    def compute(s: Any) -> None:
        v = _to_host(ctx, s)
        if v.ndim != 0:
            raise errors.InvalidArgumentError(
                None, None, f"Input is expected to be scalar, but got {list(v.shape)}")
        text = v.item()
        if isinstance(text, bytes):
            text = text.decode(errors="replace")
        if file_path is not None:  # TF appends to the file (AppendStringToFile)
            check_path(ctx, file_path, write=True)
            try:
                with open(file_path, "a", encoding="utf-8") as f:
                    f.write(f"{text}{end}")
            except OSError as e:
                raise errors.NotFoundError(None, None, f"{file_path}; {e.strerror}") from None
            return None
        if log_level is not None:
            logging.getLogger("flowrt").log(log_level, f"{text}{end}".rstrip("\n"))
            return None
        f = sys.stdout if stream == "stdout" else sys.stderr
        f.write(f"{text}{end}")
        f.flush()
        return None

    return compute


# ---------------------------------------------------------------------------------------
# API
# ---------------------------------------------------------------------------------------
@ks.api("Assert", "debugging.Assert")
def Assert(condition: Any, data: Any, summarize: int | None = None,
           name: str | None = None) -> Operation:
    """Raises InvalidArgumentError with ``data`` summarised when ``condition`` is false
    (``tf.Assert``); returns an op to use as a control dependency.

    As in TF 1.15: when every ``data`` tensor is int32 or string the result is the Assert
    op itself; otherwise the Assert sits in the false branch of a ``tf.cond`` named
    ``AssertGuard`` (so the data is only read when the check fails) and the result is
    that conditional's Merge op.
    """
    with name_scope(name, "Assert", [condition, data]):
        xs = [convert_to_tensor(d) for d in data]
        if all(x.dtype.base_dtype in (_dt.int32, _dt.string) for x in xs):
            return apply_op("Assert", name="Assert", condition=condition, data=xs,
                            summarize=summarize)
        condition = convert_to_tensor(condition, name="Condition")

        # TF's branches end in a control edge on the pivot; Identity of the (switched)
        # condition under the same control edge gives the same Merge
        def passed() -> Tensor:
            with control_dependencies([apply_op("NoOp")]):
                return apply_op("Identity", name="control_dependency", input=condition)

        def failed() -> Tensor:
            check = apply_op("Assert", name="Assert", condition=condition, data=xs,
                             summarize=summarize)
            with control_dependencies([check]):
                return apply_op("Identity", name="control_dependency", input=condition)

        return cond(condition, passed, failed, name="AssertGuard").op


@ks.api("Print")
def Print(input_: Any, data: Any, message: str | None = None, first_n: int | None = None,
          summarize: int | None = None, name: str | None = None) -> Tensor:
    """Returns ``input_`` unchanged and, when evaluated, prints ``message`` and ``data`` to
    stderr (``tf.Print``)."""
    return apply_op("Print", name=name, input=input_, data=list(data), message=message,
                    first_n=first_n, summarize=summarize)


@ks.api("print")
def print_(*inputs: Any, **kwargs: Any) -> Operation:
    """Prints its inputs when run (``tf.print``): tensors are formatted by the StringFormat
    op and the line is printed by PrintV2. Keywords: output_stream, summarize, sep, end,
    name."""
    output_stream = kwargs.pop("output_stream", sys.stderr)
    summarize = kwargs.pop("summarize", 3)
    sep = kwargs.pop("sep", " ")
    end = kwargs.pop("end", "\n")
    name = kwargs.pop("name", None)
    if kwargs:
        raise ValueError(f"Unrecognized keyword arguments for tf.print: {sorted(kwargs)}")
    if isinstance(output_stream, str) and output_stream.startswith(_FILE_PREFIX):
        stream_name = output_stream
    else:
        stream_name = _output_stream_name(output_stream)
    if stream_name is None:
        raise ValueError(f"Unsupported output stream, logging level, or file.{output_stream}. "
                         "Supported streams are sys.stdout, sys.stderr, tf.logging.info, "
                         "tf.logging.warning, tf.logging.error. File needs to be in the "
                         "form of 'file://<filepath>'.")
    g = get_default_graph()
    with name_scope(name, "PrintV2", list(inputs)) as scope:
        if len(inputs) == 1 and isinstance(inputs[0], Tensor) and \
                inputs[0].dtype.base_dtype is _dt.string and inputs[0].shape.ndims == 0:
            formatted = inputs[0]
        else:
            templ, tensors = [], []
            for x in inputs:
                if isinstance(x, (Tensor, Operation)) or is_tensor(x):
                    templ.append("{}")
                    tensors.append(x)
                else:
                    templ.append(str(x).replace("{}", "{{}}") if not isinstance(x, str)
                                 else x.replace("{}", "{{}}"))
            template = sep.join(templ)
            if tensors:
                if "StringFormat" not in g._runtime.op_defs:
                    raise NotImplementedError("tf.print of tensors needs the StringFormat op, "
                                              "which this build does not register")
                formatted = apply_op("StringFormat", inputs=tensors, template=template,
                                     placeholder="{}", summarize=summarize)
            else:
                formatted = convert_to_tensor(template.replace("{{}}", "{}"),
                                              dtype=_dt.string)
        return apply_op("PrintV2", name=scope, input=formatted, output_stream=stream_name,
                        end=end)


def _flatten(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        out: list[Any] = []
        for v in x:
            out.extend(_flatten(v))
        return out
    if isinstance(x, dict):
        out = []
        for k in sorted(x):
            out.extend(_flatten(x[k]))
        return out
    return [x]


def _no_op(name: str | None = None) -> Operation:
    return apply_op("NoOp", name=name)


def _group_control_deps(dev: str | None, deps: list[Any], name: str | None = None) -> Operation:
    with control_dependencies(deps):
        if dev is None:
            return _no_op(name=name)
        with get_default_graph().device(dev):
            return _no_op(name=name)


@ks.api("group")
def group(*inputs: Any, name: str | None = None) -> Operation:
    """A NoOp that runs after all ``inputs`` (``tf.group``); with inputs on several devices
    one NoOp per device is grouped first, as TF does."""
    with name_scope(name, "group_deps", list(inputs)) as scope:
        if not inputs:
            return _no_op(name=scope)
        on_device: dict[str, list[Any]] = {}
        for inp in _flatten(list(inputs)):
            if not hasattr(inp, "device"):
                raise TypeError(f"Expected tf.group() expected Tensor arguments not '{inp}' "
                                f"with type '{type(inp)}'")
            on_device.setdefault(inp.device, []).append(inp)
        if len(on_device) == 1:
            (dev, deps), = on_device.items()
            return _group_control_deps(dev, deps, name=scope)
        deps = [_group_control_deps(dev, on_device[dev])
                for dev in sorted(on_device, key=lambda d: "" if d is None else d)]
        with control_dependencies(deps):
            return _no_op(name=scope)


def _with_dependencies(dependencies: list[Any], output_tensor: Any,
                       name: str | None = None) -> Tensor:
    with name_scope(name, "control_dependency", list(dependencies) + [output_tensor]) as scope:
        g = get_default_graph()
        with g.colocate_with(output_tensor):
            with control_dependencies(dependencies):
                t = convert_to_tensor(output_tensor)
                return apply_op("Identity", name=scope, input=t)


@ks.api("tuple")
def tuple_(tensors: Any, name: str | None = None, control_inputs: Any = None) -> list[Any]:
    """Identities of ``tensors`` that are all computed only after every one of them
    (and ``control_inputs``) has been (``tf.tuple``).

    :raises ValueError: when there is no tensor or op to gate on.
    """
    with name_scope(name, "tuple", list(tensors)):
        ts = [t if (isinstance(t, Operation) or is_tensor(t) or t is None)
              else convert_to_tensor(t) for t in tensors]
        gating: list[Operation] = []
        for t in ts:
            if t is None:
                continue
            if isinstance(t, Operation):
                gating.append(t)
            elif isinstance(t, Tensor):
                gating.append(t.op)
            else:
                gating.append(convert_to_tensor(t).op)
        if control_inputs:
            for c in control_inputs:
                if isinstance(c, Tensor):
                    c = c.op
                elif not isinstance(c, Operation):
                    raise TypeError(f"Control input must be Operation or Tensor: {c}")
                gating.append(c)
        gating = sorted(set(gating), key=lambda o: o._id)
        if not gating:
            raise ValueError(f"Must have at least one Tensor: {tensors}")
        gate = group(*gating)
        out: list[Any] = []
        for t in ts:
            if t is None:
                out.append(None)
            elif isinstance(t, Operation):
                with control_dependencies([gate]):
                    out.append(group(t))
            else:
                out.append(_with_dependencies([gate], t))
        return out


# ---------------------------------------------------------------------------------------
# check_ops: tf.debugging.assert_*
# ---------------------------------------------------------------------------------------
def _maybe_constant_value_string(t: Any) -> str:
    if not isinstance(t, Tensor):
        return str(t)
    v = constant_value(t)
    return str(v) if v is not None else str(t)


def _assert_static(condition: bool, data: list[Any]) -> None:
    if not condition:
        raise errors.InvalidArgumentError(
            None, None, "\n".join(_maybe_constant_value_string(x) for x in data))


def _reduce_all(x: Tensor) -> Tensor:
    nd = x.shape.ndims
    if nd is not None:
        axes: Any = np.arange(nd, dtype=np.int32)
    else:
        axes = apply_op("Range", start=np.int32(0), limit=apply_op("Rank", input=x),
                        delta=np.int32(1))
    return apply_op("All", input=x, reduction_indices=axes, keep_dims=False)


def _binary_assert(sym: str, opname: str, op_type: str, static_fn: Callable[[Any, Any], Any],
                   x: Any, y: Any, data: Any, summarize: Any, message: Any,
                   name: str | None) -> Operation:
    message = message or ""
    with name_scope(name, opname, [x, y, data]):
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, name="y")
        if data is None:
            data = [message, f"Condition x {sym} y did not hold element-wise:",
                    f"x ({x.name}) = ", x, f"y ({y.name}) = ", y]
        condition = _reduce_all(apply_op(op_type, x=x, y=y))
        xs, ys = constant_value(x), constant_value(y)
        if xs is not None and ys is not None:
            _assert_static(bool(np.all(static_fn(xs, ys))), data)
        return Assert(condition, data, summarize=summarize)


@ks.api("debugging.assert_equal", "assert_equal")
def assert_equal(x: Any, y: Any, data: Any = None, summarize: int | None = None,
                 message: str | None = None, name: str | None = None) -> Operation:
    """Assert ``x == y`` element-wise (``tf.debugging.assert_equal``); a statically known
    violation raises InvalidArgumentError while building the graph."""
    return _binary_assert("==", "assert_equal", "Equal", np.equal, x, y, data, summarize,
                          message, name)


@ks.api("debugging.assert_none_equal", "assert_none_equal")
def assert_none_equal(x: Any, y: Any, data: Any = None, summarize: int | None = None,
                      message: str | None = None, name: str | None = None) -> Operation:
    """Assert ``x != y`` element-wise (``tf.debugging.assert_none_equal``)."""
    return _binary_assert("!=", "assert_none_equal", "NotEqual", np.not_equal, x, y, data,
                          summarize, message, name)


@ks.api("debugging.assert_less", "assert_less")
def assert_less(x: Any, y: Any, data: Any = None, summarize: int | None = None,
                message: str | None = None, name: str | None = None) -> Operation:
    """Assert ``x < y`` element-wise (``tf.debugging.assert_less``)."""
    return _binary_assert("<", "assert_less", "Less", np.less, x, y, data, summarize,
                          message, name)


@ks.api("debugging.assert_less_equal", "assert_less_equal")
def assert_less_equal(x: Any, y: Any, data: Any = None, summarize: int | None = None,
                      message: str | None = None, name: str | None = None) -> Operation:
    """Assert ``x <= y`` element-wise (``tf.debugging.assert_less_equal``)."""
    return _binary_assert("<=", "assert_less_equal", "LessEqual", np.less_equal, x, y, data,
                          summarize, message, name)


@ks.api("debugging.assert_greater", "assert_greater")
def assert_greater(x: Any, y: Any, data: Any = None, summarize: int | None = None,
                   message: str | None = None, name: str | None = None) -> Operation:
    """Assert ``x > y`` element-wise (``tf.debugging.assert_greater``)."""
    return _binary_assert(">", "assert_greater", "Greater", np.greater, x, y, data, summarize,
                          message, name)


@ks.api("debugging.assert_greater_equal", "assert_greater_equal")
def assert_greater_equal(x: Any, y: Any, data: Any = None, summarize: int | None = None,
                         message: str | None = None, name: str | None = None) -> Operation:
    """Assert ``x >= y`` element-wise (``tf.debugging.assert_greater_equal``)."""
    return _binary_assert(">=", "assert_greater_equal", "GreaterEqual", np.greater_equal, x,
                          y, data, summarize, message, name)


def _sign_assert(cond_text: str, opname: str, zero_on_left: bool, fn: Callable[..., Any],
                 x: Any, data: Any, summarize: Any, message: Any, name: Any) -> Operation:
    message = message or ""
    with name_scope(name, opname, [x, data]):
        x = convert_to_tensor(x, name="x")
        if data is None:
            data = [message, f"Condition x {cond_text} 0 did not hold element-wise:",
                    f"x ({x.name}) = ", x]
        zero = convert_to_tensor(0, dtype=x.dtype.base_dtype)
        if zero_on_left:
            return fn(zero, x, data=data, summarize=summarize)
        return fn(x, zero, data=data, summarize=summarize)


@ks.api("debugging.assert_positive", "assert_positive")
def assert_positive(x: Any, data: Any = None, summarize: int | None = None,
                    message: str | None = None, name: str | None = None) -> Operation:
    """Assert ``x > 0`` element-wise (``tf.debugging.assert_positive``)."""
    return _sign_assert(">", "assert_positive", True, assert_less, x, data, summarize,
                        message, name)


@ks.api("debugging.assert_negative", "assert_negative")
def assert_negative(x: Any, data: Any = None, summarize: int | None = None,
                    message: str | None = None, name: str | None = None) -> Operation:
    """Assert ``x < 0`` element-wise (``tf.debugging.assert_negative``)."""
    return _sign_assert("<", "assert_negative", False, assert_less, x, data, summarize,
                        message, name)


@ks.api("debugging.assert_non_negative", "assert_non_negative")
def assert_non_negative(x: Any, data: Any = None, summarize: int | None = None,
                        message: str | None = None, name: str | None = None) -> Operation:
    """Assert ``x >= 0`` element-wise (``tf.debugging.assert_non_negative``)."""
    return _sign_assert(">=", "assert_non_negative", True, assert_less_equal, x, data,
                        summarize, message, name)


@ks.api("debugging.assert_non_positive", "assert_non_positive")
def assert_non_positive(x: Any, data: Any = None, summarize: int | None = None,
                        message: str | None = None, name: str | None = None) -> Operation:
    """Assert ``x <= 0`` element-wise (``tf.debugging.assert_non_positive``)."""
    return _sign_assert("<=", "assert_non_positive", False, assert_less_equal, x, data,
                        summarize, message, name)


@ks.api("debugging.assert_rank", "assert_rank")
def assert_rank(x: Any, rank: Any, data: Any = None, summarize: int | None = None,
                message: str | None = None, name: str | None = None) -> Operation:
    """Assert that ``x`` has rank ``rank`` (``tf.debugging.assert_rank``).

    :raises ValueError: when the rank is statically known and wrong.
    """
    with name_scope(name, "assert_rank", [x, rank] + list(data or [])):
        x = convert_to_tensor(x, name="x")
        rank_t = convert_to_tensor(rank, name="rank")
        message = message or ""
        if rank_t.dtype.base_dtype is not _dt.int32:
            raise TypeError(f"{rank_t.name} must be of type tf.int32; got "
                            f"{rank_t.dtype.base_dtype.name}")
        xname = x.name
        rank_static = constant_value(rank_t)
        if rank_static is not None:
            if np.ndim(rank_static) != 0:
                raise ValueError("Rank must be a scalar.")
            xr = x.shape.ndims
            if xr is not None:
                if xr != int(rank_static):
                    raise ValueError(f"{message}.  Tensor {xname} must have rank "
                                     f"{int(rank_static)}.  Received rank {xr}, shape "
                                     f"{x.shape}")
                return _no_op(name="static_checks_determined_all_ok")
        if data is None:
            shp = apply_op("Shape", input=x, out_type=_dt.int32)
            data = [message, f"Tensor {xname} must have rank", rank_t, "Received shape: ", shp]
        condition = apply_op("Equal", x=apply_op("Rank", input=x), y=rank_t)
        if rank_static is None:
            rank_check = assert_rank(rank_t, 0, data=["Rank must be a scalar. Received rank: ",
                                                      rank_t])
            condition = _with_dependencies([rank_check], condition)
        return Assert(condition, data, summarize=summarize)


__all__: Sequence[str] = [
    "Assert", "Print", "print_", "group", "tuple_", "assert_equal", "assert_none_equal",
    "assert_less", "assert_less_equal", "assert_greater", "assert_greater_equal",
    "assert_positive", "assert_negative", "assert_non_negative", "assert_non_positive",
    "assert_rank", "summarize_value",
]
