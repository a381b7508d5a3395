"""A fused LSTM cell: one op per cell step forward and one backward.

``FusedBasicLSTMCell`` computes the step of ``tf.nn.rnn_cell.BasicLSTMCell`` (gates in
TF's order ``i, j, f, o``, ``forget_bias`` added to ``f``, tanh activation) in one
kernel, as TF's ``LSTMBlockCell`` does; ``BasicLSTMCell`` builds it instead of the ~17
ops of the unfused cell. Besides the new ``c`` and ``h`` it returns one ``saved``
tensor, ``[batch, depth + 7 * num_units]``: the columns are ``concat(x, h_prev)``,
``c_prev``, the four gate activations and ``tanh(c)``: everything the gradient reads.
Inside ``tf.while_loop`` (``dynamic_rnn``) the gradient therefore keeps one stack per
cell instead of one per intermediate value. ``FusedBasicLSTMCellGrad`` takes ``w``,
``saved`` and the gradients of ``c`` and ``h`` and returns the gradients of every
input (``x``, ``c_prev``, ``h_prev``, ``w``, ``b``).

These ops are flowrt's own (TF 1.15 has no public name for them); the API function is
``_fused_basic_lstm_cell``.
"""
from __future__ import annotations

from typing import Any

from flowrt import errors
from flowrt.graph import Tensor, api_function, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape

from ._common import ks
from .math_ops import small_gemm_single_threaded

__all__ = ["fused_basic_lstm_cell"]

_T = "T: {half, float, double}"


def _dims(op: Any) -> tuple[Any, Any, Any]:
    """(batch, depth, num_units) from the static shapes (None where unknown)."""
    x, w = op.inputs[0].shape, op.inputs[3].shape
    batch = x.dims[0].value if x.ndims == 2 else None
    depth = x.dims[1].value if x.ndims == 2 else None
    n = None
    if w.ndims is not None:
        if w.ndims != 2:
            raise ValueError(f"{op.name}: w must be 2-D, got shape {w}")
        if w.dims[1].value is not None:
            if w.dims[1].value % 4:
                raise ValueError(f"{op.name}: w's second dimension ({w.dims[1].value}) "
                                 "must be 4 * num_units")
            n = w.dims[1].value // 4
            if depth is not None and w.dims[0].value is not None and \
                    w.dims[0].value != depth + n:
                raise ValueError(f"{op.name}: w must be [depth + num_units, 4 * num_units]"
                                 f" = [{depth + n}, {4 * n}], got {w}")
    if x.ndims is not None and x.ndims != 2:
        raise ValueError(f"{op.name}: x must be 2-D, got shape {x}")
    return batch, depth, n


def _cell_shape(op: Any) -> list[TensorShape]:
    batch, depth, n = _dims(op)
    for k, what in ((1, "cs_prev"), (2, "h_prev")):
        s = op.inputs[k].shape
        if s.ndims is not None and (s.ndims != 2 or not s.is_compatible_with([batch, n])):
            raise ValueError(f"{op.name}: {what} must be [batch, num_units] = "
                             f"[{batch}, {n}], got {s}")
    width = None if depth is None or n is None else depth + 7 * n
    return [TensorShape([batch, n]), TensorShape([batch, n]), TensorShape([batch, width])]


def _cell_grad_shape(op: Any) -> list[TensorShape]:
    w, saved = op.inputs[0].shape, op.inputs[1].shape
    batch = saved.dims[0].value if saved.ndims == 2 else None
    n = depth = None
    if w.ndims == 2 and w.dims[1].value is not None:
        n = w.dims[1].value // 4
        if w.dims[0].value is not None:
            depth = w.dims[0].value - n
    return [TensorShape([batch, depth]), TensorShape([batch, n]), TensorShape([batch, n]),
            w, TensorShape([None if n is None else 4 * n])]


ks.op(
    OpDef("FusedBasicLSTMCell",
          inputs=["x: T", "cs_prev: T", "h_prev: T", "w: T", "b: T"],
          outputs=["cs: T", "h: T", "saved: T"],
          attrs=[_T, "forget_bias: float = 1.0"], shape_fn=_cell_shape,
          doc="One BasicLSTMCell step (gates i, j, f, o; tanh), fused."),
    OpDef("FusedBasicLSTMCellGrad",
          inputs=["w: T", "saved: T", "cs_grad: T", "h_grad: T"],
          outputs=["x_grad: T", "cs_prev_grad: T", "h_prev_grad: T", "w_grad: T",
                   "b_grad: T"],
          attrs=[_T], shape_fn=_cell_grad_shape,
          doc="The gradient of FusedBasicLSTMCell's inputs."),
)


def _bad(name: str, msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, f"{name}: {msg}")


class _GateRows:
    """Per-column constants over the gates ``[i, j, f, o]`` (cached per width and
    dtype): with ``scale`` 1/2 on the sigmoid gates and 1 on ``j``,
    ``tanh(scale * g) * scale + shift`` is ``sigmoid(g)`` there (``0.5 * tanh(g / 2) +
    0.5``, which never overflows) and ``tanh(g)`` on ``j``; ``e`` is 1 on ``j``, so that
    ``(1 - a) * (a + e)`` is each activation's derivative (``a (1 - a)``, ``1 - a^2``)."""

    def __init__(self, xp: Any) -> None:
        self.xp = xp
        self.cache: dict[tuple[int, Any], tuple[Any, Any, Any]] = {}

    def get(self, n: int, dtype: Any) -> tuple[Any, Any, Any]:
        key = (n, dtype)
        r = self.cache.get(key)
        if r is None:
            xp = self.xp
            scale = xp.full((4 * n,), 0.5, dtype=dtype)
            scale[n:2 * n] = 1
            shift = xp.full((4 * n,), 0.5, dtype=dtype)
            shift[n:2 * n] = 0
            e = xp.zeros((4 * n,), dtype=dtype)
            e[n:2 * n] = 1
            r = self.cache[key] = (scale, shift, e)
        return r


@ks.kernel("FusedBasicLSTMCell")
def _fused_lstm_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    fb = float(ctx.attrs.get("forget_bias", 1.0))
    mm = small_gemm_single_threaded(ctx, xp.matmul)
    rows = _GateRows(xp)
    name = ctx.node_name

    def compute(x: Any, c_prev: Any, h_prev: Any, w: Any, b: Any) -> tuple[Any, Any, Any]:
        if x.ndim != 2 or w.ndim != 2 or b.ndim != 1:
            raise _bad(name, f"x and w must be 2-D and b 1-D, got shapes {list(x.shape)}, "
                       f"{list(w.shape)}, {list(b.shape)}")
        bs, d = x.shape
        n = w.shape[1] // 4
        if w.shape != (d + n, 4 * n) or b.shape != (4 * n,) or \
                c_prev.shape != (bs, n) or h_prev.shape != (bs, n):
            raise _bad(name, f"shapes do not match: x {list(x.shape)}, cs_prev "
                       f"{list(c_prev.shape)}, h_prev {list(h_prev.shape)}, w "
                       f"{list(w.shape)}, b {list(b.shape)} (w must be [depth + num_units,"
                       " 4 * num_units])")
        scale, shift, _ = rows.get(n, x.dtype)
        saved = xp.empty((bs, d + 7 * n), dtype=x.dtype)
        saved[:, :d] = x
        saved[:, d:d + n] = h_prev
        saved[:, d + n:d + 2 * n] = c_prev
        gates = mm(saved[:, :d + n], w)
        if fb:
            b = b.copy()
            b[2 * n:3 * n] += x.dtype.type(fb)
        gates += b
        gates *= scale
        xp.tanh(gates, out=gates)  # (contiguous: twice as fast as into saved's columns)
        gates *= scale
        gates += shift
        a = d + 2 * n  # the activations: i, j, f, o, tanh(c)
        saved[:, a:a + 4 * n] = gates
        i, j, f, o = (gates[:, k * n:(k + 1) * n] for k in range(4))
        c = xp.multiply(f, c_prev)
        c += i * j
        tc = xp.tanh(c)
        saved[:, a + 4 * n:] = tc
        return c, xp.multiply(o, tc), saved

    return compute


def cell_backward(xp: Any, act: Any, tc: Any, c_prev: Any, dc: Any, dh: Any, e: Any,
                  out: Any = None) -> tuple[Any, Any]:
    """One LSTM cell step backwards from its saved activations ``act`` (``i, j, f, o``
    columns) and ``tanh(c)``: ``(d pre-activations of the gates, d c_prev)`` for the
    gradients ``dc``, ``dh`` of its new state; ``e`` is :class:`_GateRows`' ``e``; the
    gate gradients go into ``out`` when given."""
    n = tc.shape[1]
    i, j, f, o = (act[:, k * n:(k + 1) * n] for k in range(4))
    # dc_total = dc + dh * o * (1 - tanh(c)^2)
    dct = xp.multiply(tc, tc)
    xp.subtract(1, dct, out=dct)
    dct *= o
    dct *= dh
    dct += dc
    # d(gate)/d(pre-activation) for all four gates, then times what multiplies each
    # gate: dc_total * j, dc_total * i, dc_total * c_prev, dh * tanh(c)
    dg = xp.add(act, e, out=out)
    dg *= 1 - act
    m = xp.empty_like(dg)
    xp.multiply(dct, j, out=m[:, :n])
    xp.multiply(dct, i, out=m[:, n:2 * n])
    xp.multiply(dct, c_prev, out=m[:, 2 * n:3 * n])
    xp.multiply(dh, tc, out=m[:, 3 * n:])
    dg *= m
    dct *= f
    return dg, dct


@ks.kernel("FusedBasicLSTMCellGrad")
def _fused_lstm_grad_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    mm_t = small_gemm_single_threaded(ctx, lambda p, q: xp.matmul(p.T, q), 0)
    mm_bt = small_gemm_single_threaded(ctx, lambda p, q: xp.matmul(p, q.T), 1, 0)
    rows = _GateRows(xp)
    name = ctx.node_name

    def compute(w: Any, saved: Any, dc: Any, dh: Any) -> tuple[Any, ...]:
        n = w.shape[1] // 4
        d = w.shape[0] - n
        bs = saved.shape[0]
        if saved.shape != (bs, d + 7 * n) or dc.shape != (bs, n) or dh.shape != (bs, n):
            raise _bad(name, f"shapes do not match: w {list(w.shape)}, saved "
                       f"{list(saved.shape)}, cs_grad {list(dc.shape)}, h_grad "
                       f"{list(dh.shape)}")
        _, _, e = rows.get(n, saved.dtype)
        a = d + 2 * n
        dg, dct = cell_backward(xp, saved[:, a:a + 4 * n], saved[:, a + 4 * n:],
                                saved[:, d + n:a], dc, dh, e)
        dxh = mm_bt(dg, w)
        return dxh[:, :d], dct, dxh[:, d:], mm_t(saved[:, :d + n], dg), dg.sum(axis=0)

    return compute


@ks.gradient("FusedBasicLSTMCell")
def _fused_lstm_grad(op: Any, dcs: Any, dh: Any, dsaved: Any = None) -> list[Any]:
    zeros_like = api_function("zeros_like")
    if dcs is None:
        dcs = zeros_like(op.outputs[0])
    if dh is None:
        dh = zeros_like(op.outputs[1])
    g = apply_op("FusedBasicLSTMCellGrad", w=op.inputs[3], saved=op.outputs[2],
                 cs_grad=dcs, h_grad=dh)
    return list(g)


ks.not_differentiable("FusedBasicLSTMCellGrad")


@ks.api("_fused_basic_lstm_cell")
def fused_basic_lstm_cell(x: Any, c: Any, h: Any, w: Any, b: Any, forget_bias: float = 1.0,
                          name: str | None = None) -> tuple[Tensor, Tensor]:
    """One ``BasicLSTMCell`` step as one op: ``(new_c, new_h)`` with
    ``[i, j, f, o] = split(concat([x, h], 1) @ w + b, 4, 1)``,
    ``new_c = c * sigmoid(f + forget_bias) + sigmoid(i) * tanh(j)`` and
    ``new_h = tanh(new_c) * sigmoid(o)``."""
    with name_scope(name, "FusedBasicLSTMCell", [x, c, h, w, b]) as scope:
        x = convert_to_tensor(x, name="x")
        dt = x.dtype.base_dtype
        c, h = (convert_to_tensor(v, dtype=dt, name=nm) for v, nm in ((c, "c"), (h, "h")))
        w = convert_to_tensor(w, dtype=dt, name="w")
        b = convert_to_tensor(b, dtype=dt, name="b")
        cs, hs, _ = apply_op("FusedBasicLSTMCell", name=scope, x=x, cs_prev=c, h_prev=h,
                             w=w, b=b, forget_bias=float(forget_bias))
        return cs, hs
