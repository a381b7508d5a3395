"""Connectionist temporal classification (TF 1.15's ``ctc_ops.py``): the ``CTCLoss``,
``CTCGreedyDecoder`` and ``CTCBeamSearchDecoder`` ops and the ``tf.nn.ctc_*`` functions.

``CTCLoss`` follows TF's ``ctc_loss_calculator.h``: the blank is the last class; labels
come as a SparseTensor's indices and values, grouped by batch row; the loss is
``-log p(labels | inputs)`` from a forward-backward pass in log space (vectorised over the
batch with numpy), and the second output is the gradient w.r.t. the unnormalised inputs,
``softmax - posterior``, zero past each sequence's length. ``ctc_merge_repeated=False``
lets a label state emit only once (TF's rule), ``preprocess_collapse_repeated`` merges
repeated labels first. The decoders follow ``ctc_decoder_ops.cc`` and
``ctc_beam_search.h`` (the trie beam search, with its log probabilities relative to each
step's largest logit). ``ctc_loss_v2`` with dense labels runs the same op after moving
the blank class last.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.framework.sparse_tensor import SparseTensor
from flowrt.graph import Tensor, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, dimension_value

from ._common import ks
from ._common import invalid as _invalid

_NEG_INF = -np.inf


def _tf() -> Any:
    # a cycle: the flowrt package imports this plugin while it is being imported
    import flowrt
    return flowrt


def _host(ctx: Any, a: Any) -> np.ndarray:
    return np.asarray(ctx.device.to_host(a))


# =======================================================================================
# op definitions and shape functions
# =======================================================================================
def _rank(op: Any, i: int, rank: int) -> tuple[int | None, ...]:
    d = op.inputs[i].shape.as_tuple()
    if d is None:
        return (None,) * rank
    if len(d) != rank:
        shapes = ", ".join(_fmt(t.shape.as_tuple()) for t in op.inputs)
        raise ValueError(f"Shape must be rank {rank} but is rank {len(d)} for '{op.name}' "
                         f"(op: '{op.type}') with input shapes: {shapes}.")
    return d


def _fmt(d: tuple[int | None, ...] | None) -> str:
    if d is None:
        return "?"
    return "[" + ",".join("?" if x is None else str(x) for x in d) + "]"


def _merge(op: Any, a: int | None, b: int | None) -> int | None:
    if a is not None and b is not None and a != b:
        shapes = ", ".join(_fmt(t.shape.as_tuple()) for t in op.inputs)
        raise ValueError(f"Dimensions must be equal, but are {a} and {b} for '{op.name}' "
                         f"(op: '{op.type}') with input shapes: {shapes}.")
    return a if a is not None else b


def _ctc_loss_shape(op: Any) -> list[TensorShape]:
    inputs = _rank(op, 0, 3)
    li = _rank(op, 1, 2)
    lv = _rank(op, 2, 1)
    sl = _rank(op, 3, 1)
    _merge(op, li[0], lv[0])
    batch = _merge(op, inputs[1], sl[0])
    return [TensorShape([batch]), TensorShape([inputs[0], batch, inputs[2]])]


def _decoder_shape(op: Any, top_paths: int) -> list[TensorShape]:
    inputs = _rank(op, 0, 3)
    sl = _rank(op, 1, 1)
    batch = _merge(op, inputs[1], sl[0])
    return ([TensorShape([None, 2])] * top_paths + [TensorShape([None])] * top_paths
            + [TensorShape([2])] * top_paths + [TensorShape([batch, top_paths])])


_T = "T: {float, double} = DT_FLOAT"
ks.op(
    OpDef("CTCLoss", inputs=["inputs: T", "labels_indices: int64", "labels_values: int32",
                             "sequence_length: int32"],
          outputs=["loss: T", "gradient: T"],
          attrs=["preprocess_collapse_repeated: bool = false",
                 "ctc_merge_repeated: bool = true",
                 "ignore_longer_outputs_than_inputs: bool = false", _T],
          shape_fn=_ctc_loss_shape,
          doc="The CTC loss per batch entry and its gradient w.r.t. the inputs."),
    OpDef("CTCGreedyDecoder", inputs=["inputs: T", "sequence_length: int32"],
          outputs=["decoded_indices: int64", "decoded_values: int64",
                   "decoded_shape: int64", "log_probability: T"],
          attrs=["merge_repeated: bool = false", "blank_index: int = -1", _T],
          shape_fn=lambda op: _decoder_shape(op, 1),
          doc="Best-path decoding: the most likely class per step, repeats and blanks "
              "removed."),
    OpDef("CTCBeamSearchDecoder", inputs=["inputs: T", "sequence_length: int32"],
          outputs=["decoded_indices: top_paths * int64", "decoded_values: top_paths * int64",
                   "decoded_shape: top_paths * int64", "log_probability: T"],
          attrs=["beam_width: int >= 1", "top_paths: int >= 1",
                 "merge_repeated: bool = true", _T],
          shape_fn=lambda op: _decoder_shape(op, op.node_attrs["top_paths"]),
          doc="Beam search decoding of the top_paths most likely label sequences."),
)
ks.not_differentiable("CTCGreedyDecoder", "CTCBeamSearchDecoder")


# =======================================================================================
# CTCLoss kernel
# =======================================================================================
def _check_label_indices(ind: np.ndarray, batch: int, max_len: int) -> None:
    """TF's SparseTensor::IndicesValid for the labels: in bounds, ordered, distinct."""
    bound = f"[{batch},{max_len}]"
    prev: tuple[int, int] | None = None
    for i, (r, c) in enumerate(ind.tolist()):
        where = f"indices[{i}] = [{r},{c}]"
        if not (0 <= r < batch and 0 <= c < max_len):
            raise _invalid(f"label SparseTensor is not valid: {where} is out of bounds: "
                           f"need 0 <= index < {bound}")
        if prev is not None:
            if (r, c) == prev:
                raise _invalid(f"label SparseTensor is not valid: {where} is repeated")
            if (r, c) < prev:
                raise _invalid(f"label SparseTensor is not valid: {where} is out of order. "
                               "Many sparse ops require sorted indices.\n    Use "
                               "`tf.sparse.reorder` to create a correctly ordered copy.\n\n")
        prev = (r, c)


def _label_sequences(ind: np.ndarray, vals: np.ndarray, batch: int) -> list[list[int]]:
    max_len = int(ind[:, 1].max()) + 1 if len(ind) else 0
    _check_label_indices(ind, batch, max_len)
    labels: list[list[int]] = [[] for _ in range(batch)]
    for (r, _), v in zip(ind.tolist(), vals.tolist()):
        labels[r].append(int(v))
    return labels


def _l_prime(b: int, label: list[int], num_classes: int, seq_len: int, collapse: bool,
             ignore_longer: bool) -> list[int]:
    """TF's PopulateLPrimes for one batch entry: the label sequence (repeats collapsed
    when asked, blank-or-above labels ending it) with a blank before each label and at
    the end.

    :raises InvalidArgumentError: for empty or invalid labels, or too little time.
    """
    blank = num_classes - 1
    if not label:
        raise _invalid(f"Labels length is zero in batch {b}")
    seq: list[int] = []
    finished = False
    for i, v in enumerate(label):
        if i == 0 or not collapse or v != label[i - 1]:
            if v >= num_classes - 1:
                finished = True
            else:
                if finished:
                    raise _invalid(
                        "Saw a non-null label (index >= num_classes - 1) following a null "
                        f"label, batch: {b} num_classes: {num_classes} labels: "
                        f"{','.join(map(str, label))} labels seen so far: "
                        f"{','.join(map(str, seq))}")
                seq.append(v)
    for v in seq:
        if v < 0:
            raise _invalid(f"All labels must be nonnegative integers, batch: {b} labels: "
                           f"{','.join(map(str, seq))}")
    if not ignore_longer and len(label) > seq_len:
        raise _invalid(f"Not enough time for target transition sequence (required: "
                       f"{len(label)}, available: {seq_len}){b}You can turn this error into "
                       "a warning by using the flag ignore_longer_outputs_than_inputs")
    out = []
    for v in seq:
        out += [blank, v]
    return out + [blank]


def _logaddexp3(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.logaddexp(np.logaddexp(a, b), c)


def _forward_backward(lp: np.ndarray, lprime: np.ndarray, ulen: np.ndarray,
                      tlen: np.ndarray, blank: int,
                      merge: bool) -> tuple[np.ndarray, np.ndarray]:
    """log alpha and log beta, ``[T, B, U]``, for emissions ``lp[t, b, u]`` (log prob of
    state u's class) of padded state sequences ``lprime`` ``[B, U]`` of lengths ``ulen``
    over ``tlen`` steps (TF's CalculateForwardVariables / CalculateBackwardVariables)."""
    nt, nb, nu = lp.shape
    u_idx = np.arange(nu)
    valid_u = u_idx[None, :] < ulen[:, None]
    is_blank = lprime == blank
    can_stay = np.ones_like(is_blank) if merge else is_blank
    shifted2 = np.full_like(lprime, -1)
    shifted2[:, 2:] = lprime[:, :-2]
    can_skip = ~is_blank & ~(merge & (lprime == shifted2))
    can_skip[:, :2] = False
    alpha = np.full((nt, nb, nu), _NEG_INF)
    beta = np.full((nt, nb, nu), _NEG_INF)
    if nt == 0:
        return alpha, beta
    alpha[0, :, :2] = lp[0, :, :2]
    alpha[0] = np.where(valid_u, alpha[0], _NEG_INF)
    for t in range(1, nt):
        prev = alpha[t - 1]
        stay = np.where(can_stay, prev, _NEG_INF)
        one = np.concatenate([np.full((nb, 1), _NEG_INF), prev[:, :-1]], axis=1)
        two = np.where(can_skip, np.concatenate([np.full((nb, 2), _NEG_INF), prev[:, :-2]],
                                                axis=1), _NEG_INF)
        new = lp[t] + _logaddexp3(stay, one, two)
        active = (t < tlen)[:, None] & valid_u
        alpha[t] = np.where(active, new, _NEG_INF)
    # the skip rule seen from the state skipped from (u -> u + 2 when u + 2 may skip)
    skip_from = np.zeros_like(can_skip)
    skip_from[:, :-2] = can_skip[:, 2:]
    for t in range(nt - 1, -1, -1):
        last = (t == tlen - 1)[:, None]
        init = np.where(last & ((u_idx[None, :] == ulen[:, None] - 1)
                                | (u_idx[None, :] == ulen[:, None] - 2)), 0.0, _NEG_INF)
        if t + 1 < nt:
            nxt = beta[t + 1] + lp[t + 1]
            stay = np.where(can_stay, nxt, _NEG_INF)
            one = np.concatenate([nxt[:, 1:], np.full((nb, 1), _NEG_INF)], axis=1)
            two = np.where(skip_from, np.concatenate([nxt[:, 2:], np.full((nb, 2), _NEG_INF)],
                                                     axis=1), _NEG_INF)
            rec = _logaddexp3(stay, one, two)
        else:
            rec = np.full((nb, nu), _NEG_INF)
        inner = (t < tlen - 1)[:, None] & valid_u
        beta[t] = np.where(last, init, np.where(inner, rec, _NEG_INF))
    return alpha, beta


def _ctc_loss_compute(x: np.ndarray, labels: list[list[int]], seq_len: np.ndarray,
                      collapse: bool, merge: bool,
                      ignore_longer: bool) -> tuple[np.ndarray, np.ndarray]:
    """Loss ``[B]`` and gradient ``[T, B, C]`` (float64) of TF's CTCLossCalculator."""
    nt, nb, nc = x.shape
    blank = nc - 1
    for b in range(nb):
        if seq_len[b] < 0:
            raise _invalid(f"seq_len({b}) < 0")
        if seq_len[b] > nt:
            raise _invalid(f"seq_len({b}) > num_time_steps")
    primes = [_l_prime(b, labels[b], nc, int(seq_len[b]), collapse, ignore_longer)
              for b in range(nb)]
    skip = np.array([seq_len[b] == 0 or (ignore_longer and len(labels[b]) > seq_len[b])
                     for b in range(nb)], bool)
    loss = np.zeros(nb)
    grad = np.zeros((nt, nb, nc))
    work = np.flatnonzero(~skip)
    if not len(work):
        return loss, grad
    xw = x[:, work].astype(np.float64)
    shifted = xw - xw.max(axis=2, keepdims=True)
    log_y = shifted - np.log(np.exp(shifted).sum(axis=2, keepdims=True))
    ulen = np.array([len(primes[b]) for b in work])
    tlen = seq_len[work].astype(np.int64)
    lprime = np.full((len(work), int(ulen.max())), blank, np.int64)
    for i, b in enumerate(work):
        lprime[i, :ulen[i]] = primes[b]
    lp = np.take_along_axis(log_y, np.broadcast_to(lprime[None], (nt,) + lprime.shape),
                            axis=2)
    alpha, beta = _forward_backward(lp, lprime, ulen, tlen, blank, merge)
    ab = alpha + beta
    with np.errstate(invalid="ignore"):
        m0 = ab[0].max(axis=1)
        log_p = np.where(np.isfinite(m0), m0 + np.log(np.exp(
            ab[0] - np.where(np.isfinite(m0), m0, 0.0)[:, None]).sum(axis=1)), _NEG_INF)
    loss[work] = -log_p
    y = np.exp(log_y)
    onehot = lprime[:, :, None] == np.arange(nc)[None, None, :]
    with np.errstate(invalid="ignore", over="ignore"):
        post = np.einsum("tbu,buc->tbc", np.exp(ab - log_p[None, :, None]), onehot)
    g = y - np.nan_to_num(post)
    g = np.where(np.isfinite(log_p)[None, :, None], g, y)  # no valid path: TF gives y
    in_time = np.arange(nt)[:, None] < tlen[None, :]
    grad[:, work] = np.where(in_time[:, :, None], g, 0.0)
    return loss, grad


@ks.kernel("CTCLoss", device_type="CPU")
def _ctc_loss_kernel(ctx: Any) -> Callable:
    collapse = bool(ctx.attrs.get("preprocess_collapse_repeated", False))
    merge = bool(ctx.attrs.get("ctc_merge_repeated", True))
    ignore_longer = bool(ctx.attrs.get("ignore_longer_outputs_than_inputs", False))
    out_dt = ctx.output_dtypes[0].np

    def compute(inputs: Any, labels_indices: Any, labels_values: Any,
                sequence_length: Any) -> tuple[np.ndarray, np.ndarray]:
        x, ind = _host(ctx, inputs), _host(ctx, labels_indices)
        vals, sl = _host(ctx, labels_values), _host(ctx, sequence_length)
        if x.ndim != 3:
            raise _invalid("inputs is not a 3-Tensor")
        if sl.ndim != 1:
            raise _invalid("sequence_length is not a vector")
        if ind.ndim != 2:
            raise _invalid("labels_indices is not a matrix")
        if vals.ndim != 1:
            raise _invalid("labels_values is not a vector")
        nt, nb, _ = x.shape
        if nb != sl.shape[0]:
            raise _invalid(f"len(sequence_length) != batch_size.  len(sequence_length):  "
                           f"{sl.shape[0]} batch_size: {nb}")
        if ind.shape[0] != vals.shape[0]:
            raise _invalid("labels_indices and labels_values must contain the same number "
                           f"of rows, but saw shapes: {list(ind.shape)} vs. "
                           f"{list(vals.shape)}")
        if nb == 0:
            raise _invalid("batch_size must not be 0")
        if ind.shape[1] != 2:
            raise _invalid(f"labels_indices must have 2 columns, got {ind.shape[1]}")
        labels = _label_sequences(ind.astype(np.int64), vals, nb)
        for b in range(nb):
            if sl[b] > nt:
                raise _invalid(f"sequence_length({b}) <= {nt}")
        loss, grad = _ctc_loss_compute(x, labels, sl.astype(np.int64), collapse, merge,
                                       ignore_longer)
        return loss.astype(out_dt), grad.astype(out_dt)

    return compute


@ks.gradient("CTCLoss")
def _ctc_loss_grad(op: Any, grad_loss: Tensor, _unused: Any) -> list[Any]:
    """``grad_loss[b] * gradient[:, b, :]``; a second derivative is refused."""
    grad = apply_op("PreventGradient", input=op.outputs[1],
                    message="Currently there is no way to take the second  derivative of "
                            "ctc_loss due to the fused implementation's interaction  with "
                            "tf.gradients()")
    vec = apply_op("ExpandDims", input=grad_loss, dim=np.int32(-1))
    return [apply_op("Mul", name="mul", x=vec, y=grad), None, None, None]


# =======================================================================================
# decoders
# =======================================================================================
def _check_decoder_inputs(x: np.ndarray, sl: np.ndarray) -> None:
    """TF's CTCDecodeHelper::ValidateInputsGenerateOutputs."""
    if x.ndim != 3:
        raise _invalid("inputs is not a 3-Tensor")
    nt, nb = x.shape[0], x.shape[1]
    if nt == 0:
        raise _invalid("max_time is 0")
    if sl.ndim != 1:
        raise _invalid("sequence_length is not a vector")
    if nb != sl.shape[0]:
        raise errors.FailedPreconditionError(
            None, None, f"len(sequence_length) != batch_size.  len(sequence_length):  "
                        f"{sl.shape[0]} batch_size: {nb}")
    for b in range(nb):
        if not sl[b] <= nt:
            raise errors.FailedPreconditionError(None, None, f"sequence_length({b}) <= {nt}")


def _store_decoded(paths: list[list[list[int]]], top: int) -> tuple[list[np.ndarray], ...]:
    """TF's StoreAllDecodedSequences: per path rank, (indices, values, dense shape)."""
    nb = len(paths)
    inds, vals, shapes = [], [], []
    for p in range(top):
        rows = [paths[b][p] for b in range(nb)]
        ind = [(b, t) for b in range(nb) for t in range(len(rows[b]))]
        inds.append(np.array(ind, np.int64).reshape(-1, 2))
        vals.append(np.array([v for r in rows for v in r], np.int64))
        shapes.append(np.array([nb, max((len(r) for r in rows), default=0)], np.int64))
    return inds, vals, shapes


@ks.kernel("CTCGreedyDecoder", device_type="CPU")
def _ctc_greedy_kernel(ctx: Any) -> Callable:
    merge = bool(ctx.attrs.get("merge_repeated", False))
    blank_attr = int(ctx.attrs.get("blank_index", -1))
    out_dt = ctx.output_dtypes[3].np

    def compute(inputs: Any, sequence_length: Any) -> tuple[np.ndarray, ...]:
        x, sl = _host(ctx, inputs), _host(ctx, sequence_length)
        _check_decoder_inputs(x, sl)
        nt, nb, nc = x.shape
        blank = nc + blank_attr if blank_attr < 0 else blank_attr
        if not 0 <= blank < nc:
            raise _invalid(f"blank_index expected to be between {-nc} and {nc} but was "
                           f"{blank_attr}")
        if nc == 0 and sl.max(initial=0) > 0:
            raise _invalid("Invalid input dimensions.")
        log_prob = np.zeros((nb, 1), np.float64)
        paths: list[list[list[int]]] = []
        for b in range(nb):
            n = int(sl[b])
            best = x[:n, b].argmax(axis=1) if n else np.zeros(0, np.int64)
            log_prob[b, 0] = -x[np.arange(n), b, best].astype(np.float64).sum()
            seq, prev = [], -1
            for c in best.tolist():
                if c != blank and not (merge and c == prev):
                    seq.append(c)
                prev = c
            paths.append([seq])
        inds, vals, shapes = _store_decoded(paths, 1)
        return inds[0], vals[0], shapes[0], log_prob.astype(out_dt)

    return compute


class _Entry:
    """A node of the beam search's prefix trie (TF's BeamEntry): its label, parent,
    children, and the (total, blank, label) log probabilities now and one step ago."""

    __slots__ = ("parent", "label", "children", "new", "old")

    def __init__(self, parent: "_Entry | None", label: int):
        self.parent = parent
        self.label = label
        self.children: dict[int, _Entry] = {}
        self.new = [_NEG_INF, _NEG_INF, _NEG_INF]  # total, blank, label
        self.old = [_NEG_INF, _NEG_INF, _NEG_INF]

    def child(self, label: int) -> "_Entry":
        c = self.children.get(label)
        if c is None:
            c = self.children[label] = _Entry(self, label)
        return c

    def labels(self, merge_repeated: bool) -> list[int]:
        out: list[int] = []
        prev = -1
        e: _Entry | None = self
        while e is not None and e.parent is not None:
            if not merge_repeated or e.label != prev:
                out.append(e.label)
            prev = e.label
            e = e.parent
        return out[::-1]


def _lse(a: float, b: float) -> float:
    if a == _NEG_INF:
        return b
    if b == _NEG_INF:
        return a
    return max(a, b) + float(np.log1p(np.exp(-abs(a - b))))


def _beam_step(leaves: list[_Entry], row: np.ndarray, beam_width: int) -> list[_Entry]:
    """One step of TF's CTCBeamSearchDecoder::Step (default scorer): extend the live
    prefixes by blank or their own label, then grow children while they beat the beam."""
    nc = len(row)
    blank = nc - 1
    mx = float(row.max())
    branches = sorted(leaves, key=lambda e: -e.new[0])
    for e in branches:
        e.old = list(e.new)
    out: list[_Entry] = []
    for e in branches:
        if e.parent is not None:
            p = e.parent
            if p.new[0] != _NEG_INF:
                previous = p.old[1] if e.label == p.label else p.old[0]
                e.new[2] = _lse(e.new[2], previous)
            e.new[2] += float(row[e.label]) - mx
        e.new[1] = e.old[0] + float(row[blank]) - mx
        e.new[0] = _lse(e.new[1], e.new[2])
        out.append(e)

    def bottom() -> _Entry:
        return min(out, key=lambda e: e.new[0])

    rel = row[:blank].astype(np.float64) - mx
    for e in branches:
        total = e.old[0]
        if not (total > _NEG_INF and (len(out) < beam_width or total > bottom().new[0])):
            continue
        for label in range(blank):
            c = e.child(label)
            if c.new[0] != _NEG_INF:
                continue
            previous = e.old[1] if label == e.label else e.old[0]
            c.new = [float(rel[label]) + previous, _NEG_INF, float(rel[label]) + previous]
            full = len(out) >= beam_width
            if c.new[0] > _NEG_INF and (not full or c.new[0] > bottom().new[0]):
                if full:
                    low = bottom()
                    low.new = [_NEG_INF, _NEG_INF, _NEG_INF]
                    out.remove(low)
                out.append(c)
            else:
                c.old = [_NEG_INF, _NEG_INF, _NEG_INF]
                c.new = [_NEG_INF, _NEG_INF, _NEG_INF]
    return out


def beam_search_one(x: np.ndarray, beam_width: int, top_paths: int,
                    merge_repeated: bool) -> tuple[list[list[int]], list[float]]:
    """The ``top_paths`` best label sequences of one ``[T, C]`` input and their log
    probabilities (TF's beam search with the default scorer).

    :raises InvalidArgumentError: when more paths are asked than the beam holds.
    """
    if top_paths > beam_width:
        raise _invalid("requested more paths than the beam width.")
    root = _Entry(None, -1)
    root.new = [0.0, 0.0, _NEG_INF]
    leaves = [root]
    for t in range(x.shape[0]):
        leaves = _beam_step(leaves, x[t], beam_width)
    if top_paths > len(leaves):
        raise _invalid("Less leaves in the beam search than requested.")
    # the steps score logits relative to each step's largest; the results are log
    # probabilities under the softmax of each step (TF's, invariant to logit offsets)
    mx = x.max(axis=1) if len(x) else np.zeros(0)
    offset = float(-np.log(np.exp(x - mx[:, None]).sum(axis=1)).sum())
    best = sorted(leaves, key=lambda e: -e.new[0])[:top_paths]
    return [e.labels(merge_repeated) for e in best], [e.new[0] + offset for e in best]


@ks.kernel("CTCBeamSearchDecoder", device_type="CPU")
def _ctc_beam_kernel(ctx: Any) -> Callable:
    beam_width = int(ctx.attrs["beam_width"])
    top = int(ctx.attrs["top_paths"])
    merge = bool(ctx.attrs.get("merge_repeated", True))
    out_dt = ctx.output_dtypes[-1].np

    def compute(inputs: Any, sequence_length: Any) -> tuple[np.ndarray, ...]:
        x, sl = _host(ctx, inputs), _host(ctx, sequence_length)
        _check_decoder_inputs(x, sl)
        nb = x.shape[1]
        log_prob = np.zeros((nb, top), np.float64)
        paths = []
        for b in range(nb):
            p, lp = beam_search_one(x[:int(sl[b]), b].astype(np.float64), beam_width, top,
                                    merge)
            paths.append(p)
            log_prob[b] = lp
        inds, vals, shapes = _store_decoded(paths, top)
        return tuple(inds + vals + shapes + [log_prob.astype(out_dt)])

    return compute


# =======================================================================================
# API
# =======================================================================================
@ks.api("nn.ctc_loss")
def ctc_loss(labels: Any, inputs: Any = None, sequence_length: Any = None,
             preprocess_collapse_repeated: bool = False, ctc_merge_repeated: bool = True,
             ignore_longer_outputs_than_inputs: bool = False, time_major: bool = True,
             logits: Any = None) -> Tensor:
    """The CTC loss ``[batch]`` of ``inputs`` (logits ``[max_time, batch, num_classes]``,
    or batch-major when ``time_major=False``; the blank is the last class) against the
    ``labels`` SparseTensor (int32 values), TF 1.15's ``tf.nn.ctc_loss``.

    :raises TypeError: when ``labels`` is not a SparseTensor.
    :raises ValueError: when both ``inputs`` and ``logits`` are given.
    """
    tf = _tf()
    if not isinstance(labels, SparseTensor):
        raise TypeError("Expected labels (first argument) to be a SparseTensor")
    if inputs is not None and logits is not None:
        raise ValueError("Cannot specify both 'logits' and 'inputs'")
    inputs = logits if inputs is None else inputs
    inputs = convert_to_tensor(inputs, name="logits")
    if not time_major:
        inputs = tf.transpose(inputs, [1, 0, 2])
    orig = inputs.dtype.base_dtype
    if orig in (_dt.float16, _dt.bfloat16):
        inputs = tf.cast(inputs, _dt.float32)
    loss, _ = apply_op("CTCLoss", inputs=inputs, labels_indices=labels.indices,
                       labels_values=labels.values,
                       sequence_length=convert_to_tensor(sequence_length, dtype=_dt.int32),
                       preprocess_collapse_repeated=preprocess_collapse_repeated,
                       ctc_merge_repeated=ctc_merge_repeated,
                       ignore_longer_outputs_than_inputs=ignore_longer_outputs_than_inputs)
    if orig in (_dt.float16, _dt.bfloat16):
        loss = tf.cast(loss, orig)
    return loss


def _dim(t: Tensor, i: int) -> Any:
    """A static dimension where known, else the dynamic one (TF's ``_get_dim``)."""
    return dimension_value(t.shape[i]) or _tf().shape(t)[i]


def _dense_labels_to_sparse(dense: Tensor, length: Tensor) -> SparseTensor:
    tf = _tf()
    mask = tf.sequence_mask(length, maxlen=tf.shape(dense)[1])
    indices = tf.where(mask)
    values = tf.cast(tf.boolean_mask(dense, mask), _dt.int32)
    return SparseTensor(indices, values, tf.cast(tf.shape(dense), _dt.int64))


@ks.api("nn.ctc_loss_v2")
def ctc_loss_v2(labels: Any, logits: Any, label_length: Any, logit_length: Any,
                logits_time_major: bool = True, unique: Any = None,
                blank_index: int | None = None, name: str | None = None) -> Tensor:
    """The CTC loss ``[batch]`` with dense ``labels`` ``[batch, max_label_len]`` and
    ``label_length`` (blank class ``blank_index``, default 0), or a SparseTensor of labels
    (``blank_index`` required). ``unique`` (from ``ctc_unique_labels``) only speeds up TF's
    computation and is accepted and not needed here.

    :raises ValueError: for SparseTensor labels without ``blank_index``.
    """
    tf = _tf()
    if isinstance(labels, SparseTensor):
        if blank_index is None:
            raise ValueError("blank_index must be given when using SparseTensor labels.")
        logits = convert_to_tensor(logits, name="logits")
        if blank_index < 0:
            blank_index += _dim(logits, 2)
        if blank_index != _dim(logits, 2) - 1:
            logits = tf.concat([logits[:, :, :blank_index], logits[:, :, blank_index + 1:],
                                logits[:, :, blank_index:blank_index + 1]], axis=2)
            labels = SparseTensor(labels.indices,
                                  tf.where(labels.values < blank_index, labels.values,
                                           labels.values - 1), labels.dense_shape)
        return ctc_loss(labels=labels, inputs=logits, sequence_length=logit_length,
                        time_major=logits_time_major)
    if blank_index is None:
        blank_index = 0
    with name_scope(name, "ctc_loss_dense", [logits, labels, label_length, logit_length]):
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, name="labels")
        label_length = convert_to_tensor(label_length, name="label_length")
        logit_length = convert_to_tensor(logit_length, name="logit_length")
        if not logits_time_major:
            logits = tf.transpose(logits, perm=[1, 0, 2])
        num_classes = _dim(logits, 2)
        if blank_index < 0:
            blank_index += num_classes
        if not isinstance(num_classes, int) or blank_index != num_classes - 1:
            logits = tf.concat([logits[:, :, :blank_index], logits[:, :, blank_index + 1:],
                                logits[:, :, blank_index:blank_index + 1]], axis=2)
            labels = tf.where(labels < blank_index, labels, labels - 1)
        sparse = _dense_labels_to_sparse(labels, label_length)
        return ctc_loss(labels=sparse, inputs=logits,
                        sequence_length=tf.cast(logit_length, _dt.int32))


@ks.api("nn.ctc_greedy_decoder")
def ctc_greedy_decoder(inputs: Any, sequence_length: Any, merge_repeated: bool = True,
                       blank_index: int | None = None) -> tuple[list[SparseTensor], Tensor]:
    """Best-path decoding of ``inputs`` ``[max_time, batch, num_classes]``: returns
    ``([decoded SparseTensor], neg_sum_logits [batch, 1])`` (the negated sum of each
    step's largest logit). ``blank_index`` (a TF 2 addition) defaults to the last class."""
    outs = apply_op("CTCGreedyDecoder", inputs=inputs,
                    sequence_length=convert_to_tensor(sequence_length, dtype=_dt.int32),
                    merge_repeated=merge_repeated,
                    blank_index=-1 if blank_index is None else blank_index)
    ind, val, shape, log_prob = outs
    return [SparseTensor(ind, val, shape)], log_prob


@ks.api("nn.ctc_beam_search_decoder")
def ctc_beam_search_decoder(inputs: Any, sequence_length: Any, beam_width: int = 100,
                            top_paths: int = 1,
                            merge_repeated: bool = True) -> tuple[list[SparseTensor], Tensor]:
    """Beam search decoding: ``top_paths`` SparseTensors of decoded labels and the log
    probabilities ``[batch, top_paths]`` (the blank is the last class)."""
    inds, vals, shapes, log_probs = apply_op(
        "CTCBeamSearchDecoder", inputs=inputs,
        sequence_length=convert_to_tensor(sequence_length, dtype=_dt.int32),
        beam_width=beam_width, top_paths=top_paths, merge_repeated=merge_repeated)
    return [SparseTensor(i, v, s) for i, v, s in zip(inds, vals, shapes)], log_probs


@ks.api("nn.ctc_beam_search_decoder_v2")
def ctc_beam_search_decoder_v2(inputs: Any, sequence_length: Any, beam_width: int = 100,
                               top_paths: int = 1) -> tuple[list[SparseTensor], Tensor]:
    """``ctc_beam_search_decoder`` with ``merge_repeated=False``."""
    return ctc_beam_search_decoder(inputs, sequence_length=sequence_length,
                                   beam_width=beam_width, top_paths=top_paths,
                                   merge_repeated=False)


@ks.api("nn.collapse_repeated")
def collapse_repeated(labels: Any, seq_length: Any,
                      name: str | None = None) -> tuple[Tensor, Tensor]:
    """Merges runs of a repeated label in each row of ``labels`` ``[batch, max_len]``:
    returns the left-aligned, zero-padded labels ``[batch, new_max_len]`` and the new
    lengths."""
    tf = _tf()
    with name_scope(name, "collapse_repeated_labels", [labels, seq_length]):
        labels = convert_to_tensor(labels, name="labels")
        seq_length = convert_to_tensor(seq_length, name="seq_length")
        label_mask = tf.concat([tf.ones_like(labels[:, :1], _dt.bool),
                                tf.not_equal(labels[:, 1:], labels[:, :-1])], axis=1)
        maxlen = _dim(labels, 1)
        seq_mask = tf.sequence_mask(seq_length, maxlen=maxlen)
        label_mask = tf.logical_and(label_mask, seq_mask)
        new_seq_len = tf.reduce_sum(tf.cast(label_mask, _dt.int32), axis=1)
        new_maxlen = tf.reduce_max(new_seq_len)
        idx_mask = tf.sequence_mask(new_seq_len, maxlen=new_maxlen)
        flat_labels = tf.reshape(labels, [-1])
        flat_label_mask = tf.reshape(label_mask, [-1])
        flat_idx_mask = tf.reshape(idx_mask, [-1])
        idx = tf.range(_dim(flat_idx_mask, 0))
        flat = tf.scatter_nd(
            indices=tf.expand_dims(tf.boolean_mask(idx, flat_idx_mask), axis=1),
            updates=tf.boolean_mask(flat_labels, flat_label_mask),
            shape=tf.shape(flat_idx_mask))
        batch_size = _dim(labels, 0)
        new_shape = [batch_size, new_maxlen]
        return tf.reshape(flat, new_shape), tf.cast(new_seq_len, seq_length.dtype)


@ks.api("nn.ctc_unique_labels")
def ctc_unique_labels(labels: Any, name: str | None = None) -> list[Tensor]:
    """Per row of ``labels`` ``[batch, max_len]``: its distinct labels in order of first
    appearance, zero-padded (int64), and each position's index among them (int32)."""
    tf = _tf()
    with name_scope(name, "ctc_unique_labels", [labels]):
        labels = convert_to_tensor(labels, name="labels")

        def _unique(x: Tensor) -> list[Tensor]:
            y, idx = tf.unique(x)
            y = tf.pad(y, [[0, _dim(idx, 0) - _dim(y, 0)]])
            return [tf.cast(y, _dt.int64), idx]

        return tf.map_fn(_unique, labels, dtype=[_dt.int64, _dt.int32])


__all__ = ["ctc_loss", "ctc_loss_v2", "ctc_greedy_decoder", "ctc_beam_search_decoder",
           "ctc_beam_search_decoder_v2", "collapse_repeated", "ctc_unique_labels",
           "beam_search_one"]
