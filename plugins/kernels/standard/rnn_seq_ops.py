"""A whole LSTM sequence in one op: what ``dynamic_rnn`` runs for ``BasicLSTMCell``.

``FusedLSTMSequence`` runs ``BasicLSTMCell`` (gates ``i, j, f, o``, ``forget_bias`` on
``f``, tanh) over every step of a time-major input ``[time, batch, depth]`` in one
kernel, with ``dynamic_rnn``'s ``sequence_length`` rule: past an entry's length its
output is zero and its state is carried through unchanged; the loop stops after the
longest length (at least one step). The input's share of the gates (``x @ w[:depth]``)
is one product over all steps; each step adds ``h @ w[depth:]``. Outputs: every step's
``h`` (``[time, batch, n]``), the final ``c`` and ``h``, and ``saved``
(``[steps, batch, 7n]``: ``h_prev``, ``c_prev``, the four gate activations and
``tanh(c)`` of each step), what the gradient reads.

``FusedLSTMSequenceGrad`` is back-propagation through time in one kernel: each step
carries ``dh @ w[depth:]^T`` back; the gradients of ``x``, ``w`` and ``b`` are each one
product over all steps at the end.

Per step the arithmetic is the fused cell's (rnn_ops.py), so values match the step-by-
step loop to float rounding; the graph has one op (and one in the gradient) instead of
a while loop of ~20 ops a step. flowrt's own ops; the API function is
``_fused_lstm_sequence``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from flowrt import errors
from flowrt.graph import Tensor, api_function, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape

from ._common import ks
from .rnn_ops import _GateRows, cell_backward

__all__ = ["fused_lstm_sequence"]

_T = "T: {half, float, double}"


def _seq_shape(op: Any) -> list[TensorShape]:
    x, w = op.inputs[0].shape, op.inputs[3].shape
    t = b = n = None
    if x.ndims is not None:
        if x.ndims != 3:
            raise ValueError(f"{op.name}: x must be [time, batch, depth], got shape {x}")
        t, b = x.dims[0].value, x.dims[1].value
    if w.ndims == 2 and w.dims[1].value is not None:
        n = w.dims[1].value // 4
    state = TensorShape([b, n])
    return [TensorShape([t, b, n]), state, state,
            TensorShape([None, b, None if n is None else 7 * n])]


def _seq_grad_shape(op: Any) -> list[TensorShape]:
    x, w = op.inputs[0].shape, op.inputs[1].shape
    b = x.dims[1].value if x.ndims == 3 else None
    n = w.dims[1].value // 4 if w.ndims == 2 and w.dims[1].value is not None else None
    return [x, TensorShape([b, n]), TensorShape([b, n]), w,
            TensorShape([None if n is None else 4 * n])]


ks.op(
    OpDef("FusedLSTMSequence",
          inputs=["x: T", "cs0: T", "h0: T", "w: T", "b: T", "sequence_length: int32"],
          outputs=["y: T", "cs: T", "h: T", "saved: T"],
          attrs=[_T, "forget_bias: float = 1.0"], shape_fn=_seq_shape,
          doc="BasicLSTMCell over a time-major sequence (empty sequence_length: every "
              "entry runs every step)."),
    OpDef("FusedLSTMSequenceGrad",
          inputs=["x: T", "w: T", "saved: T", "sequence_length: int32", "y_grad: T",
                  "cs_grad: T", "h_grad: T"],
          outputs=["x_grad: T", "cs0_grad: T", "h0_grad: T", "w_grad: T", "b_grad: T"],
          attrs=[_T], shape_fn=_seq_grad_shape,
          doc="The gradient of FusedLSTMSequence's inputs."),
)


def _bad(name: str, msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, f"{name}: {msg}")


def _lengths(seq: Any, t: int, batch: int, name: str) -> tuple[Any, int]:
    """(lengths as a column mask source or None, steps to run)."""
    seq = np.asarray(seq)
    if seq.size == 0:
        return None, t
    if seq.shape != (batch,):
        raise _bad(name, f"sequence_length must be a vector of length {batch} (the batch "
                   f"size), got shape {list(seq.shape)}")
    if (seq < 0).any():
        raise _bad(name, f"sequence_length must be non-negative, got {seq.tolist()}")
    return seq, min(t, max(int(seq.max()), 1))


def _one_blas_thread(ctx: Any, fn: Any) -> Any:
    """``fn`` with BLAS on one thread throughout (where the device offers it): most of
    its products are one step's, small; the few over all steps are not worth waking
    BLAS's threads, which on a busy machine cost more than they save."""
    wrap = getattr(ctx.device, "single_threaded_blas", None)
    return fn if wrap is None else wrap(fn)


@ks.kernel("FusedLSTMSequence", expensive=True, host_memory=("sequence_length",))
def _seq_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    fb = float(ctx.attrs.get("forget_bias", 1.0))
    mm = xp.matmul
    rows = _GateRows(xp)
    name = ctx.node_name

    def compute(x: Any, c0: Any, h0: Any, w: Any, b: Any, seq: Any) -> tuple[Any, ...]:
        if x.ndim != 3 or w.ndim != 2 or b.ndim != 1:
            raise _bad(name, f"x must be 3-D, w 2-D and b 1-D, got shapes "
                       f"{list(x.shape)}, {list(w.shape)}, {list(b.shape)}")
        t, bs, d = x.shape
        n = w.shape[1] // 4
        if w.shape != (d + n, 4 * n) or b.shape != (4 * n,) or \
                c0.shape != (bs, n) or h0.shape != (bs, n):
            raise _bad(name, f"shapes do not match: x {list(x.shape)}, cs0 "
                       f"{list(c0.shape)}, h0 {list(h0.shape)}, w {list(w.shape)}, b "
                       f"{list(b.shape)} (w must be [depth + num_units, 4 * num_units])")
        lengths, steps = _lengths(seq, t, bs, name)
        y = xp.zeros((t, bs, n), dtype=x.dtype)
        saved = xp.empty((steps, bs, 7 * n), dtype=x.dtype)
        if steps == 0:
            return y, c0, h0, saved
        scale, shift, _ = rows.get(n, x.dtype)
        bias = b.copy()
        bias[2 * n:3 * n] += x.dtype.type(fb)
        gx = xp.matmul(x[:steps].reshape(-1, d), w[:d]).reshape(steps, bs, 4 * n)
        gx += bias
        wh = w[d:]
        c, h = c0, h0
        for k in range(steps):
            s = saved[k]
            s[:, :n] = h
            s[:, n:2 * n] = c
            gates = mm(h, wh)
            gates += gx[k]
            gates *= scale
            xp.tanh(gates, out=gates)
            gates *= scale
            gates += shift
            s[:, 2 * n:6 * n] = gates
            i, j, f, o = (gates[:, q * n:(q + 1) * n] for q in range(4))
            c_new = xp.multiply(f, c)
            c_new += i * j
            tc = xp.tanh(c_new)
            s[:, 6 * n:] = tc
            h_new = xp.multiply(o, tc)
            if lengths is None:
                c, h = c_new, h_new
                y[k] = h_new
            else:
                live = (k < lengths)[:, None]
                c = xp.where(live, c_new, c)
                h = xp.where(live, h_new, h)
                y[k] = xp.where(live, h_new, 0)
        return y, c, h, saved

    return _one_blas_thread(ctx, compute)


@ks.kernel("FusedLSTMSequenceGrad", expensive=True, host_memory=("sequence_length",))
def _seq_grad_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    mm = xp.matmul
    rows = _GateRows(xp)
    name = ctx.node_name

    def compute(x: Any, w: Any, saved: Any, seq: Any, dy: Any, dc: Any,
                dh: Any) -> tuple[Any, ...]:
        t, bs, d = x.shape
        n = w.shape[1] // 4
        steps = saved.shape[0]
        if saved.shape != (steps, bs, 7 * n) or dy.shape != (t, bs, n) or \
                dc.shape != (bs, n) or dh.shape != (bs, n):
            raise _bad(name, f"shapes do not match: x {list(x.shape)}, w {list(w.shape)}, "
                       f"saved {list(saved.shape)}, y_grad {list(dy.shape)}, cs_grad "
                       f"{list(dc.shape)}, h_grad {list(dh.shape)}")
        lengths, _ = _lengths(seq, t, bs, name)
        _, _, e = rows.get(n, saved.dtype)
        dgates = xp.empty((steps, bs, 4 * n), dtype=saved.dtype)
        wh_t = xp.ascontiguousarray(w[d:].T)
        dc_t, dh_t = dc, dh
        for k in range(steps - 1, -1, -1):
            s = saved[k]
            g_h = dh_t + dy[k]
            g_c = dc_t
            if lengths is not None:  # carried-through entries pass the gradient back
                live = (k < lengths)[:, None]
                keep_h = xp.where(live, 0, dh_t)
                keep_c = xp.where(live, 0, dc_t)
                g_h = xp.where(live, g_h, 0)
                g_c = xp.where(live, g_c, 0)
            dg, dct = cell_backward(xp, s[:, 2 * n:6 * n], s[:, 6 * n:], s[:, n:2 * n],
                                    g_c, g_h, e, out=dgates[k])
            dh_t, dc_t = mm(dg, wh_t), dct
            if lengths is not None:
                dh_t += keep_h
                dc_t += keep_c
        flat_dg = dgates.reshape(-1, 4 * n)
        dx = xp.zeros_like(x)
        dx[:steps] = xp.matmul(flat_dg, w[:d].T).reshape(steps, bs, d)
        dw = xp.empty_like(w)
        dw[:d] = xp.matmul(x[:steps].reshape(-1, d).T, flat_dg)
        dw[d:] = xp.matmul(saved[:, :, :n].reshape(-1, n).T, flat_dg)
        return dx, dc_t, dh_t, dw, flat_dg.sum(axis=0)

    return _one_blas_thread(ctx, compute)


@ks.gradient("FusedLSTMSequence")
def _seq_grad(op: Any, dy: Any, dcs: Any, dh: Any, dsaved: Any = None) -> list[Any]:
    zeros_like = api_function("zeros_like")
    dy = zeros_like(op.outputs[0]) if dy is None else dy
    dcs = zeros_like(op.outputs[1]) if dcs is None else dcs
    dh = zeros_like(op.outputs[2]) if dh is None else dh
    g = apply_op("FusedLSTMSequenceGrad", x=op.inputs[0], w=op.inputs[3],
                 saved=op.outputs[3], sequence_length=op.inputs[5], y_grad=dy,
                 cs_grad=dcs, h_grad=dh)
    return [*g[:3], g[3], g[4], None]


ks.not_differentiable("FusedLSTMSequenceGrad")


@ks.api("_fused_lstm_sequence")
def fused_lstm_sequence(x: Any, c: Any, h: Any, w: Any, b: Any,
                        sequence_length: Any = None, forget_bias: float = 1.0,
                        name: str | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """``BasicLSTMCell`` over the time-major ``x`` ``[time, batch, depth]`` from the
    state ``(c, h)``: ``(outputs [time, batch, n], final c, final h)``, with
    ``dynamic_rnn``'s rule for ``sequence_length`` (zero outputs and a carried state
    past each entry's length)."""
    with name_scope(name, "FusedLSTMSequence", [x, c, h, w, b]) as scope:
        x = convert_to_tensor(x, name="x")
        dt = x.dtype.base_dtype
        c, h = (convert_to_tensor(v, dtype=dt, name=nm) for v, nm in ((c, "c"), (h, "h")))
        w = convert_to_tensor(w, dtype=dt, name="w")
        b = convert_to_tensor(b, dtype=dt, name="b")
        seq = convert_to_tensor(np.zeros([0], np.int32) if sequence_length is None
                                else sequence_length, name="sequence_length")
        y, cs, hs, _ = apply_op("FusedLSTMSequence", name=scope, x=x, cs0=c, h0=h, w=w,
                                b=b, sequence_length=seq, forget_bias=float(forget_bias))
        return y, cs, hs
