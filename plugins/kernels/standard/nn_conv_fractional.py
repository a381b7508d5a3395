"""Fractional max and average pooling (``FractionalMaxPool``, ``FractionalAvgPool`` and
their gradient ops), as TF's kernels define them: output size ``floor(in / ratio)`` in
rows and columns, pooling boundaries from TF's random or pseudo-random sequence rule
(each step ``k`` or ``k + 1``), windows ``[seq[i], seq[i+1])`` or, overlapping,
``[seq[i], seq[i+1]]``. The random draws come from numpy, not TF's Philox generator,
so sequences equal TF's only in their rule; a given (seed, seed2) is reproducible.
"""
from __future__ import annotations

import collections
import math
from typing import Any, Callable

import numpy as np

from flowrt import dtypes as _dt
from flowrt.graph import Tensor, apply_op
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import host_reader, ks
from ._common import invalid as _invalid
from .array_grad import shape_tensor
from .nn_ops import _shape_error, _with_rank

__all__ = ["fractional_max_pool", "fractional_avg_pool"]


def _frac_shape(op: Any) -> list[TensorShape]:
    ratio = list(op.node_attrs["pooling_ratio"])
    if len(ratio) != 4:
        raise _shape_error(op, "pooling_ratio field must specify 4 dimensions")
    d = _with_rank(op, op.inputs[0].shape, 4)
    out = []
    for v, r in zip(d, ratio):
        out.append(None if v is None else int(math.floor(v / r)))
    # TF's shape function gives the sequences the output's length (the kernel returns
    # one more element); flowrt keeps TF's static shapes
    return [TensorShape(out), TensorShape([out[1]]), TensorShape([out[2]])]


_FRAC_ATTRS = ["pooling_ratio: list(float) >= 4", "pseudo_random: bool = false",
               "overlapping: bool = false", "deterministic: bool = false", "seed: int = 0",
               "seed2: int = 0"]
ks.op(
    OpDef("FractionalMaxPool", inputs=["value: T"],
          outputs=["output: T", "row_pooling_sequence: int64",
                   "col_pooling_sequence: int64"],
          attrs=_FRAC_ATTRS + ["T: {float, double, int32, int64}"], shape_fn=_frac_shape,
          is_stateful=True, doc="Max pooling over randomly sized windows."),
    OpDef("FractionalAvgPool", inputs=["value: T"],
          outputs=["output: T", "row_pooling_sequence: int64",
                   "col_pooling_sequence: int64"],
          attrs=_FRAC_ATTRS + ["T: {float, double, int32, int64}"], shape_fn=_frac_shape,
          is_stateful=True, doc="Average pooling over randomly sized windows."),
    OpDef("FractionalMaxPoolGrad",
          inputs=["orig_input: T", "orig_output: T", "out_backprop: T",
                  "row_pooling_sequence: int64", "col_pooling_sequence: int64"],
          outputs=["output: T"],
          attrs=["overlapping: bool = false", "T: {float, double, int32, int64}"],
          shape_fn=lambda op: [op.inputs[0].shape if op.inputs[0].shape.ndims is not None
                               else unknown_shape(4)],
          doc="The gradient of FractionalMaxPool."),
    OpDef("FractionalAvgPoolGrad",
          inputs=["orig_input_tensor_shape: int64", "out_backprop: T",
                  "row_pooling_sequence: int64", "col_pooling_sequence: int64"],
          outputs=["output: T"],
          attrs=["overlapping: bool = false", "T: {float, double, int32, int64}"],
          shape_fn=lambda op: [unknown_shape(4)], doc="The gradient of FractionalAvgPool."),
)


def pooling_sequence(n_in: int, n_out: int, rng: np.random.Generator,
                     pseudo_random: bool) -> np.ndarray:
    """TF's GeneratePoolingSequence: cumulative boundaries, ``n_out + 1`` of them, from 0
    to ``n_in``, every step ``k = n_in // n_out`` or ``k + 1``."""
    k = n_in // n_out
    if n_in % n_out == 0:
        diff = np.full(n_out, k, np.int64)
    elif pseudo_random:
        alpha = n_in / n_out
        max_u = min((k + 2) / alpha - 1, (n_in + 1 - k) / alpha - (n_out - 1))
        u = rng.random() * max_u
        cum = np.zeros(n_out + 1, np.int64)
        cum[0], cum[n_out] = 1, n_in + 1
        for i in range(1, n_out):
            cum[i] = int(math.ceil(alpha * (i + u)))
        diff = np.diff(cum)
    else:
        diff = np.full(n_out, k, np.int64)
        diff[:n_in % n_out] += 1
        rng.shuffle(diff)
    return np.concatenate([[0], np.cumsum(diff)]).astype(np.int64)


def _windows(seq: Any, n_in: int, overlapping: bool,
             to_host: Callable[[Any], np.ndarray]) -> list[tuple[int, int]]:
    """The ``[start, end)`` windows of a pooling sequence brought to host memory by
    ``to_host`` (the kernel's ``host_reader``)."""
    s = [int(v) for v in to_host(seq).reshape(-1).tolist()]
    out = []
    for i in range(len(s) - 1):
        end = s[i + 1] if overlapping else s[i + 1] - 1
        out.append((s[i], min(end, n_in - 1) + 1))
    return out


def _frac_kernel(mode: str) -> Callable[[Any], Callable]:
    """Kernel factory of FractionalMaxPool (``mode="max"``) or FractionalAvgPool."""
    op_type = "FractionalMaxPool" if mode == "max" else "FractionalAvgPool"

    def factory(ctx: Any) -> Callable:
        xp = ctx.xp
        a = ctx.attrs
        ratio = [float(v) for v in a["pooling_ratio"]]
        if len(ratio) != 4 or ratio[0] != 1.0 or ratio[3] != 1.0:
            raise _invalid(f"{op_type}: We don't allow pooling on batch and depth "
                           "dimensions.")
        if any(r < 1.0 for r in ratio):
            raise _invalid(f"{op_type}: pooling_ratio cannot be smaller than 1, got {ratio}")
        seed, seed2 = int(a.get("seed", 0)), int(a.get("seed2", 0))
        rng = np.random.default_rng([seed, seed2] if (seed or seed2) else None)
        pseudo, overlap = bool(a.get("pseudo_random")), bool(a.get("overlapping"))
        out_dt = ctx.output_dtypes[0].np

        def fractional_pool(x: Any) -> Any:
            if x.ndim != 4:
                raise _invalid(f"{op_type}: input must be 4-dimensional")
            n, h, w, c = x.shape
            oh, ow = int(math.floor(h / ratio[1])), int(math.floor(w / ratio[2]))
            if oh <= 0 or ow <= 0:
                raise _invalid(f"{op_type}: pooling_ratio is set too large: output size "
                               f"would be [{oh}, {ow}] for an input of [{h}, {w}]")
            rs = pooling_sequence(h, oh, rng, pseudo)
            cs = pooling_sequence(w, ow, rng, pseudo)
            rw = _windows(rs, h, overlap, np.asarray)
            cw = _windows(cs, w, overlap, np.asarray)
            cdt = out_dt if mode == "max" else (np.float64 if out_dt == np.float64 else
                                                np.float32)
            xc = x.astype(cdt, copy=False)
            red = (lambda t, ax: t.max(axis=ax, keepdims=True)) if mode == "max" else \
                (lambda t, ax: t.sum(axis=ax, keepdims=True))
            rows = xp.concatenate([red(xc[:, lo:hi], 1) for lo, hi in rw], axis=1)
            out = xp.concatenate([red(rows[:, :, lo:hi], 2) for lo, hi in cw], axis=2)
            if mode == "avg":
                cnt = np.outer([hi - lo for lo, hi in rw], [hi - lo for lo, hi in cw])
                out = out / xp.asarray(cnt.reshape(1, oh, ow, 1).astype(cdt))
            return (out.astype(out_dt, copy=False), xp.asarray(rs), xp.asarray(cs))

        return fractional_pool

    return factory


ks.kernel("FractionalMaxPool")(_frac_kernel("max"))
ks.kernel("FractionalAvgPool")(_frac_kernel("avg"))


@ks.kernel("FractionalMaxPoolGrad", host_memory=("row_pooling_sequence",
                                                 "col_pooling_sequence"))
def _frac_max_grad_kernel(ctx: Any) -> Callable:
    """FractionalMaxPoolGrad: each output gradient to the first maximum of its window."""
    xp = ctx.xp
    overlap = bool(ctx.attrs.get("overlapping"))
    host = host_reader(ctx)

    def fractional_max_pool_grad(x: Any, y: Any, dy: Any, rs: Any, cs: Any) -> Any:
        n, h, w, c = x.shape
        rw, cw = _windows(rs, h, overlap, host), _windows(cs, w, overlap, host)
        if list(dy.shape) != [n, len(rw), len(cw), c] or dy.shape != y.shape:
            raise _invalid("FractionalMaxPoolGrad: out_backprop and orig_output must have "
                           f"the shape [{n}, {len(rw)}, {len(cw)}, {c}]")
        dx = xp.zeros(x.shape, dy.dtype)
        for i, (r0, r1) in enumerate(rw):
            for j, (c0, c1) in enumerate(cw):
                win = x[:, r0:r1, c0:c1, :].reshape(n, -1, c)
                k = xp.argmax(win, axis=1)  # the first maximum in row-major order
                rr, cc = r0 + k // (c1 - c0), c0 + k % (c1 - c0)
                bi, ci = xp.meshgrid(xp.arange(n), xp.arange(c), indexing="ij")
                dx[bi, rr, cc, ci] += dy[:, i, j, :]
        return dx

    return fractional_max_pool_grad


@ks.kernel("FractionalAvgPoolGrad", host_memory=("orig_input_tensor_shape",
                                                 "row_pooling_sequence",
                                                 "col_pooling_sequence"))
def _frac_avg_grad_kernel(ctx: Any) -> Callable:
    """FractionalAvgPoolGrad: each output gradient spread evenly over its window."""
    xp = ctx.xp
    overlap = bool(ctx.attrs.get("overlapping"))
    host = host_reader(ctx)

    def fractional_avg_pool_grad(shape: Any, dy: Any, rs: Any, cs: Any) -> Any:
        s = [int(v) for v in host(shape).reshape(-1).tolist()]
        if len(s) != 4:
            raise _invalid("FractionalAvgPoolGrad: orig_input_tensor_shape must have 4 "
                           "elements")
        n, h, w, c = s
        rw, cw = _windows(rs, h, overlap, host), _windows(cs, w, overlap, host)
        if list(dy.shape) != [n, len(rw), len(cw), c]:
            raise _invalid("FractionalAvgPoolGrad: out_backprop has the wrong shape")
        dx = xp.zeros(s, dy.dtype)
        for i, (r0, r1) in enumerate(rw):
            for j, (c0, c1) in enumerate(cw):
                cnt = (r1 - r0) * (c1 - c0)
                dx[:, r0:r1, c0:c1, :] += (dy[:, i, j, :] / cnt)[:, None, None, :].astype(
                    dy.dtype)
        return dx

    return fractional_avg_pool_grad


@ks.gradient("FractionalMaxPool")
def _frac_max_pool_grad(op: Any, grad: Tensor, *unused: Any) -> list[Any]:
    return [apply_op("FractionalMaxPoolGrad", orig_input=op.inputs[0],
                     orig_output=op.outputs[0], out_backprop=grad,
                     row_pooling_sequence=op.outputs[1], col_pooling_sequence=op.outputs[2],
                     overlapping=op.node_attrs.get("overlapping", False))]


@ks.gradient("FractionalAvgPool")
def _frac_avg_pool_grad(op: Any, grad: Tensor, *unused: Any) -> list[Any]:
    return [apply_op("FractionalAvgPoolGrad",
                     orig_input_tensor_shape=shape_tensor(op.inputs[0], _dt.int64),
                     out_backprop=grad, row_pooling_sequence=op.outputs[1],
                     col_pooling_sequence=op.outputs[2],
                     overlapping=op.node_attrs.get("overlapping", False))]


ks.not_differentiable("FractionalMaxPoolGrad", "FractionalAvgPoolGrad")

_FractionalMaxPool = collections.namedtuple(
    "FractionalMaxPool", ["output", "row_pooling_sequence", "col_pooling_sequence"])
_FractionalAvgPool = collections.namedtuple(
    "FractionalAvgPool", ["output", "row_pooling_sequence", "col_pooling_sequence"])


def _frac_api(op_type: str, cls: Any, value: Any, pooling_ratio: Any, pseudo_random: bool,
              overlapping: bool, deterministic: bool, seed: int, seed2: int,
              name: str | None) -> Any:
    out = apply_op(op_type, name=name, value=value,
                   pooling_ratio=[float(r) for r in pooling_ratio],
                   pseudo_random=pseudo_random, overlapping=overlapping,
                   deterministic=deterministic, seed=seed, seed2=seed2)
    return cls(*out)


@ks.api("nn.fractional_max_pool")
def fractional_max_pool(value: Any, pooling_ratio: Any, pseudo_random: bool = False,
                        overlapping: bool = False, deterministic: bool = False,
                        seed: int = 0, seed2: int = 0, name: str | None = None) -> Any:
    """Fractional max pooling (``tf.nn.fractional_max_pool``, TF1 signature): returns
    ``(output, row_pooling_sequence, col_pooling_sequence)``."""
    return _frac_api("FractionalMaxPool", _FractionalMaxPool, value, pooling_ratio,
                     pseudo_random, overlapping, deterministic, seed, seed2, name)


@ks.api("nn.fractional_avg_pool")
def fractional_avg_pool(value: Any, pooling_ratio: Any, pseudo_random: bool = False,
                        overlapping: bool = False, deterministic: bool = False,
                        seed: int = 0, seed2: int = 0, name: str | None = None) -> Any:
    """Fractional average pooling (``tf.nn.fractional_avg_pool``, TF1 signature)."""
    return _frac_api("FractionalAvgPool", _FractionalAvgPool, value, pooling_ratio,
                     pseudo_random, overlapping, deterministic, seed, seed2, name)
