"""Candidate samplers and the sampled losses of ``tf.nn`` (TF 1.15's
``candidate_sampling_ops.py`` and the sampled parts of ``nn_impl.py``).

Ops, with TF's names, inputs, outputs and attrs: ``UniformCandidateSampler``,
``LogUniformCandidateSampler``, ``LearnedUnigramCandidateSampler``,
``FixedUnigramCandidateSampler``, ``AllCandidateSampler`` and ``ComputeAccidentalHits``.
The samplers are stateful random ops: each kernel is built once per session and owns a
numpy ``Generator`` seeded from ``(seed, seed2)`` (OS entropy when both are zero), as the
random ops of ``random_ops`` do; the sampled values differ from TF's Philox streams, but
the expected counts follow TF's ``range_sampler.cc`` exactly: ``p * num_sampled`` when no
draw was rejected, else ``-expm1(num_tries * log1p(-p))``. The learned unigram sampler's
counts live as long as the session's kernel.

Composites: ``nce_loss`` and ``sampled_softmax_loss`` (TF's ``_compute_sampled_logits``),
``embedding_lookup_sparse``, ``safe_embedding_lookup_sparse`` and ``log_poisson_loss``.
"""
from __future__ import annotations

import collections
import math
from typing import Any, Callable, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.framework.sparse_tensor import SparseTensor
from flowrt.graph import Tensor, apply_op, convert_to_tensor, get_seed, name_scope
from flowrt.op_registry import OpDef
from flowrt.plugin.file_policy import check_path
from flowrt.tensor_shape import TensorShape, dimension_value, unknown_shape

from ._common import ks
from ._common import invalid as _invalid

_MASK64 = (1 << 64) - 1


def _tf() -> Any:
    # a cycle: the flowrt package imports this plugin while it is being imported
    import flowrt
    return flowrt


def _fmt_shape(s: TensorShape) -> str:
    d = s.as_tuple()
    if d is None:
        return "?"
    return "[" + ",".join("?" if x is None else str(x) for x in d) + "]"


def _shape_error(op: Any, msg: str) -> ValueError:
    shapes = ", ".join(_fmt_shape(t.shape) for t in op.inputs)
    return ValueError(f"{msg} for '{op.name}' (op: '{op.type}') with input shapes: {shapes}.")


# =======================================================================================
# op definitions
# =======================================================================================
def _true_classes_dims(op: Any, num_true: int | None) -> int | None:
    """Checks ``true_classes`` is a matrix (of ``num_true`` columns unless None, which the
    samplers leave to the kernel, as TF); its row count."""
    d = op.inputs[0].shape.as_tuple()
    if d is None:
        return None
    if len(d) != 2:
        raise _shape_error(op, f"Shape must be rank 2 but is rank {len(d)}")
    if num_true is not None and d[1] is not None and d[1] != num_true:
        raise _shape_error(op, f"Dimension must be {num_true} but is {d[1]}")
    return d[0]


def _sampler_shape(op: Any) -> list[TensorShape]:
    """TF's CandidateSamplerShapeFn: ``[num_sampled]``, ``[batch, num_true]``,
    ``[num_sampled]``."""
    num_true = op.node_attrs["num_true"]
    num_sampled = op.node_attrs["num_sampled"]
    batch = _true_classes_dims(op, None)
    vec = TensorShape([num_sampled])
    return [vec, TensorShape([batch, num_true]), vec]


def _accidental_hits_shape(op: Any) -> list[TensorShape]:
    num_true = op.node_attrs["num_true"]
    _true_classes_dims(op, num_true)
    d = op.inputs[1].shape.as_tuple()
    if d is not None and len(d) != 1:
        raise _shape_error(op, f"Shape must be rank 1 but is rank {len(d)}")
    return [TensorShape([None])] * 3


_SAMPLER_OUTPUTS = ["sampled_candidates: int64", "true_expected_count: float",
                    "sampled_expected_count: float"]
_SAMPLER_ATTRS = ["num_true: int >= 1", "num_sampled: int >= 1", "unique: bool",
                  "range_max: int >= 1", "seed: int = 0", "seed2: int = 0"]

for _name, _doc in (
        ("UniformCandidateSampler", "Samples classes uniformly from [0, range_max)."),
        ("LogUniformCandidateSampler",
         "Samples classes from [0, range_max) with P(k) = log((k+2)/(k+1)) / log(range_max+1)."),
        ("LearnedUnigramCandidateSampler",
         "Samples classes in proportion to 1 + the times each was seen as a true class."),
        ("ThreadUnsafeUnigramCandidateSampler",
         "Samples classes in proportion to 1 + the times each was seen as a true class.")):
    ks.op(OpDef(_name, inputs=["true_classes: int64"], outputs=_SAMPLER_OUTPUTS,
                attrs=_SAMPLER_ATTRS, shape_fn=_sampler_shape, is_stateful=True, doc=_doc))

ks.op(
    OpDef("FixedUnigramCandidateSampler", inputs=["true_classes: int64"],
          outputs=_SAMPLER_OUTPUTS,
          attrs=_SAMPLER_ATTRS[:4] + ["vocab_file: string = ''", "distortion: float = 1.0",
                                      "num_reserved_ids: int = 0",
                                      "num_shards: int >= 1 = 1", "shard: int >= 0 = 0",
                                      "unigrams: list(float) = []"] + _SAMPLER_ATTRS[4:],
          shape_fn=_sampler_shape, is_stateful=True,
          doc="Samples classes in proportion to fixed unigram weights raised to distortion."),
    OpDef("AllCandidateSampler", inputs=["true_classes: int64"], outputs=_SAMPLER_OUTPUTS,
          attrs=["num_true: int >= 1", "num_sampled: int >= 1", "unique: bool",
                 "seed: int = 0", "seed2: int = 0"],
          shape_fn=_sampler_shape, is_stateful=True,
          doc="Returns every class of [0, num_sampled) with expected count 1."),
    OpDef("ComputeAccidentalHits", inputs=["true_classes: int64", "sampled_candidates: int64"],
          outputs=["indices: int32", "ids: int64", "weights: float"],
          attrs=["num_true: int", "seed: int = 0", "seed2: int = 0"],
          shape_fn=_accidental_hits_shape,
          doc="The positions of sampled candidates that match a row's true classes."),
)
ks.not_differentiable("UniformCandidateSampler", "LogUniformCandidateSampler",
                      "LearnedUnigramCandidateSampler", "ThreadUnsafeUnigramCandidateSampler",
                      "FixedUnigramCandidateSampler", "AllCandidateSampler",
                      "ComputeAccidentalHits")


# =======================================================================================
# samplers (TF's range_sampler.cc)
# =======================================================================================
class _RangeSampler:
    """A distribution over ``[0, range)``: ``draw`` samples, ``probability`` gives P."""

    def __init__(self, range_: int):
        self.range = range_

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        raise NotImplementedError("need draw")

    def probability(self, values: np.ndarray) -> np.ndarray:
        raise NotImplementedError("need probability")

    def update(self, values: np.ndarray) -> None:
        """Learns from the true classes of a step (only the learned unigram sampler)."""


class _UniformSampler(_RangeSampler):
    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.integers(0, self.range, size=n, dtype=np.int64)

    def probability(self, values: np.ndarray) -> np.ndarray:
        return np.full(values.shape, 1.0 / self.range)


class _LogUniformSampler(_RangeSampler):
    def __init__(self, range_: int):
        super().__init__(range_)
        self.log_range = math.log1p(range_)

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        v = np.exp(rng.random(n) * self.log_range).astype(np.int64) - 1
        return v % self.range

    def probability(self, values: np.ndarray) -> np.ndarray:
        v = values.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log((v + 2.0) / (v + 1.0)) / self.log_range


class _WeightedSampler(_RangeSampler):
    """Samples in proportion to ``weights`` (the unigram samplers)."""

    def __init__(self, weights: np.ndarray, learned: bool = False):
        super().__init__(len(weights))
        self.weights = np.asarray(weights, np.float64)
        self.learned = learned
        self._cdf: np.ndarray | None = None

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self._cdf is None:
            self._cdf = np.cumsum(self.weights)
        u = rng.random(n) * self._cdf[-1]
        return np.minimum(np.searchsorted(self._cdf, u, side="right"),
                          self.range - 1).astype(np.int64)

    def probability(self, values: np.ndarray) -> np.ndarray:
        ok = (values >= 0) & (values < self.range)
        w = np.where(ok, self.weights[np.where(ok, values, 0)], 0.0)
        return w / self.weights.sum()

    def update(self, values: np.ndarray) -> None:
        if self.learned:
            v = values[(values >= 0) & (values < self.range)]
            np.add.at(self.weights, v, 1.0)
            self._cdf = None


def _draw_unique(sampler: _RangeSampler, rng: np.random.Generator,
                 n: int) -> tuple[np.ndarray, int]:
    """``n`` distinct values in the order of first drawing, and the number of draws
    taken (TF's rejection loop, a chunk of draws at a time)."""
    picked = np.zeros(0, np.int64)
    tries = 0
    while len(picked) < n:
        need = n - len(picked)
        chunk = sampler.draw(rng, max(2 * need, 16))
        _, first = np.unique(chunk, return_index=True)
        fresh = np.zeros(len(chunk), bool)
        fresh[first] = True
        fresh &= ~np.isin(chunk, picked)
        pos = np.flatnonzero(fresh)
        if len(pos) >= need:
            pos = pos[:need]
            tries += int(pos[-1]) + 1
        else:
            tries += len(chunk)
        picked = np.concatenate([picked, chunk[pos]])
    return picked, tries


def _expected_count(p: np.ndarray, batch_size: int, num_tries: int) -> np.ndarray:
    """TF's ExpectedCountHelper."""
    if num_tries == batch_size:
        return p * batch_size
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.expm1(num_tries * np.log1p(-p))


def _make_rng(ctx: Any) -> np.random.Generator:
    seed = int(ctx.attrs.get("seed", 0) or 0)
    seed2 = int(ctx.attrs.get("seed2", 0) or 0)
    if seed == 0 and seed2 == 0:
        return np.random.default_rng()
    return np.random.default_rng([seed & _MASK64, seed2 & _MASK64])


def _check_true_classes(tc: np.ndarray, num_true: int, range_: int) -> None:
    """TF's checks of ``true_classes``: a matrix of ``num_true`` columns of classes in
    ``[0, range)`` (the range check is TF 2's; TF 1.15 read out of bounds)."""
    if tc.ndim != 2:
        raise _invalid("true_classes must be a matrix")
    if tc.shape[1] != num_true:
        raise _invalid(f"true_classes must have num_true columns, expected: {tc.shape[1]} "
                       f"was: {num_true}")
    bad = tc[(tc < 0) | (tc >= range_)]
    if bad.size:
        raise _invalid(f"`true_candidate` out of range [0, {range_}), received {bad[0]}")


def _sampler_factory(ctx: Any, make: Callable[[], _RangeSampler]) -> Callable:
    """The kernel of a candidate sampler: checks, samples, counts, then lets a learned
    sampler see the true classes. Errors from building the sampler (a bad vocabulary)
    are raised when the op runs, as TF's kernel construction errors are."""
    rng = _make_rng(ctx)
    num_true = int(ctx.attrs["num_true"])
    num_sampled = int(ctx.attrs["num_sampled"])
    unique = bool(ctx.attrs["unique"])
    state: dict[str, Any] = {}

    def compute(true_classes: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if "sampler" not in state:
            state["sampler"] = make()
        sampler: _RangeSampler = state["sampler"]
        tc = np.asarray(ctx.device.to_host(true_classes)).astype(np.int64, copy=False)
        _check_true_classes(tc, num_true, sampler.range)
        if unique and num_sampled > sampler.range:
            raise _invalid("Sampler's range is too small.")
        if unique:
            sampled, tries = _draw_unique(sampler, rng, num_sampled)
        else:
            sampled, tries = sampler.draw(rng, num_sampled), num_sampled
        true_ec = _expected_count(sampler.probability(tc), num_sampled, tries)
        samp_ec = _expected_count(sampler.probability(sampled), num_sampled, tries)
        sampler.update(tc.reshape(-1))
        return (np.ascontiguousarray(sampled, np.int64), true_ec.astype(np.float32),
                samp_ec.astype(np.float32))

    return compute


@ks.kernel("UniformCandidateSampler", device_type="CPU")
def _uniform_sampler_kernel(ctx: Any) -> Callable:
    return _sampler_factory(ctx, lambda: _UniformSampler(int(ctx.attrs["range_max"])))


@ks.kernel("LogUniformCandidateSampler", device_type="CPU")
def _log_uniform_sampler_kernel(ctx: Any) -> Callable:
    return _sampler_factory(ctx, lambda: _LogUniformSampler(int(ctx.attrs["range_max"])))


@ks.kernel("LearnedUnigramCandidateSampler", "ThreadUnsafeUnigramCandidateSampler",
           device_type="CPU")
def _learned_unigram_sampler_kernel(ctx: Any) -> Callable:
    return _sampler_factory(
        ctx, lambda: _WeightedSampler(np.ones(int(ctx.attrs["range_max"])), learned=True))


def _read_vocab_weights(path: str, first_id: int, num_shards: int, shard: int,
                        distortion: float) -> list[float]:
    """The weights of ``path``'s lines (last comma-separated column) in this shard."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise errors.NotFoundError(None, None, f"{path}; {e.strerror}") from None
    out: list[float] = []
    word_id = first_id
    for line in lines:
        cols = line.split(",")
        if word_id % num_shards == shard:
            try:
                w = float(cols[-1])
            except ValueError:
                raise _invalid(f"Wrong vocabulary format at line: {line}") from None
            out.append(w ** distortion)
        word_id += 1
    return out


def _fixed_unigram(attrs: dict[str, Any]) -> _WeightedSampler:
    """TF's FixedUnigramSampler: zero weights for the reserved ids of this shard, then
    the weights (``** distortion``) of the vocabulary file or the unigrams list, counting
    ids on from the number of weights already held (TF's numbering, shards included)."""
    vocab_file = attrs.get("vocab_file", "") or ""
    if isinstance(vocab_file, bytes):
        vocab_file = vocab_file.decode()
    unigrams = [float(u) for u in (attrs.get("unigrams") or [])]
    if bool(vocab_file) == bool(unigrams):
        raise _invalid("Must provide either vocab_file or unigrams, but not both.")
    num_shards = int(attrs.get("num_shards", 1))
    shard = int(attrs.get("shard", 0))
    distortion = float(attrs.get("distortion", 1.0))
    range_max = int(attrs["range_max"])
    weights = [0.0 for i in range(int(attrs.get("num_reserved_ids", 0)))
               if i % num_shards == shard]
    if vocab_file:
        weights += _read_vocab_weights(vocab_file, len(weights), num_shards, shard,
                                       distortion)
        what = "vocab_file"
    else:
        start = len(weights)
        weights += [w ** distortion for i, w in enumerate(unigrams)
                    if (start + i) % num_shards == shard]
        what = "unigrams"
    if len(weights) != range_max:
        raise _invalid(f"range_max must be equal to {what} size: {range_max} vs "
                       f"{len(weights)}")
    return _WeightedSampler(np.array(weights, np.float64))


@ks.kernel("FixedUnigramCandidateSampler", device_type="CPU")
def _fixed_unigram_sampler_kernel(ctx: Any) -> Callable:
    vocab_file = ctx.attrs.get("vocab_file", "") or ""

    def make() -> _WeightedSampler:
        if vocab_file:  # read when the op first runs: checked against the file roots
            check_path(ctx, vocab_file.decode() if isinstance(vocab_file, bytes)
                       else vocab_file)
        return _fixed_unigram(ctx.attrs)

    return _sampler_factory(ctx, make)


@ks.kernel("AllCandidateSampler", device_type="CPU")
def _all_sampler_kernel(ctx: Any) -> Callable:
    num_true = int(ctx.attrs["num_true"])
    num_sampled = int(ctx.attrs["num_sampled"])

    def compute(true_classes: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tc = np.asarray(ctx.device.to_host(true_classes))
        _check_true_classes(tc, num_true, num_sampled)
        return (np.arange(num_sampled, dtype=np.int64), np.ones(tc.shape, np.float32),
                np.ones(num_sampled, np.float32))

    return compute


@ks.kernel("ComputeAccidentalHits", device_type="CPU")
def _accidental_hits_kernel(ctx: Any) -> Callable:
    num_true = int(ctx.attrs["num_true"])

    def compute(true_classes: Any, sampled: Any) -> tuple[np.ndarray, ...]:
        tc = np.asarray(ctx.device.to_host(true_classes)).astype(np.int64, copy=False)
        sc = np.asarray(ctx.device.to_host(sampled)).astype(np.int64, copy=False)
        if tc.ndim != 2 or tc.shape[1] != num_true:
            raise _invalid("true_candidates must be a batch_size * num_true matrix")
        if sc.ndim != 1:
            raise _invalid("sampled_candidates must be a vector, which is typically an "
                           "output from CandidateSampler")
        pos = {int(v): i for i, v in enumerate(sc.tolist())}  # the last position wins
        rows, ids = [], []
        for i, row in enumerate(tc.tolist()):
            for v in row:
                j = pos.get(v)
                if j is not None:
                    rows.append(i)
                    ids.append(j)
        return (np.array(rows, np.int32), np.array(ids, np.int64),
                np.full(len(rows), -np.finfo(np.float32).max, np.float32))

    return compute


# =======================================================================================
# sampler API
# =======================================================================================
SamplerOutput = collections.namedtuple(
    "SamplerOutput", ["sampled_candidates", "true_expected_count", "sampled_expected_count"])
AccidentalHits = collections.namedtuple("AccidentalHits", ["indices", "ids", "weights"])


def _sampler(op_type: str, true_classes: Any, seed: int | None, name: str | None,
             **attrs: Any) -> SamplerOutput:
    seed1, seed2 = get_seed(seed)
    out = apply_op(op_type, name=name, true_classes=true_classes, seed=seed1 or 0,
                   seed2=seed2 or 0, **attrs)
    return SamplerOutput(*out)


@ks.api("random.uniform_candidate_sampler", "nn.uniform_candidate_sampler")
def uniform_candidate_sampler(true_classes: Any, num_true: int, num_sampled: int,
                              unique: bool, range_max: int, seed: int | None = None,
                              name: str | None = None) -> SamplerOutput:
    """Samples ``num_sampled`` classes uniformly from ``[0, range_max)``; returns
    ``(sampled_candidates, true_expected_count, sampled_expected_count)``."""
    return _sampler("UniformCandidateSampler", true_classes, seed, name, num_true=num_true,
                    num_sampled=num_sampled, unique=unique, range_max=range_max)


@ks.api("random.log_uniform_candidate_sampler", "nn.log_uniform_candidate_sampler")
def log_uniform_candidate_sampler(true_classes: Any, num_true: int, num_sampled: int,
                                  unique: bool, range_max: int, seed: int | None = None,
                                  name: str | None = None) -> SamplerOutput:
    """Samples classes from the log-uniform (Zipfian) distribution
    ``P(k) = (log(k + 2) - log(k + 1)) / log(range_max + 1)``."""
    return _sampler("LogUniformCandidateSampler", true_classes, seed, name,
                    num_true=num_true, num_sampled=num_sampled, unique=unique,
                    range_max=range_max)


@ks.api("random.learned_unigram_candidate_sampler", "nn.learned_unigram_candidate_sampler")
def learned_unigram_candidate_sampler(true_classes: Any, num_true: int, num_sampled: int,
                                      unique: bool, range_max: int,
                                      seed: int | None = None,
                                      name: str | None = None) -> SamplerOutput:
    """Samples classes in proportion to 1 + the number of times each was a true class in
    earlier runs of the op (in this session).

    :raises ValueError: when ``range_max`` exceeds int32.
    """
    if range_max > 2147483647:
        raise ValueError(f"Value of range_max:{range_max} is too large to handle")
    return _sampler("LearnedUnigramCandidateSampler", true_classes, seed, name,
                    num_true=num_true, num_sampled=num_sampled, unique=unique,
                    range_max=range_max)


@ks.api("random.fixed_unigram_candidate_sampler", "nn.fixed_unigram_candidate_sampler")
def fixed_unigram_candidate_sampler(true_classes: Any, num_true: int, num_sampled: int,
                                    unique: bool, range_max: int, vocab_file: str = "",
                                    distortion: float = 1.0, num_reserved_ids: int = 0,
                                    num_shards: int = 1, shard: int = 0,
                                    unigrams: Sequence[float] = (), seed: int | None = None,
                                    name: str | None = None) -> SamplerOutput:
    """Samples classes in proportion to fixed weights (``unigrams``, or the last column of
    each line of ``vocab_file``) raised to ``distortion``; ``num_reserved_ids`` leading
    ids get weight 0; ``num_shards``/``shard`` keep every ``num_shards``-th id."""
    return _sampler("FixedUnigramCandidateSampler", true_classes, seed, name,
                    num_true=num_true, num_sampled=num_sampled, unique=unique,
                    range_max=range_max, vocab_file=vocab_file, distortion=distortion,
                    num_reserved_ids=num_reserved_ids, num_shards=num_shards, shard=shard,
                    unigrams=[float(u) for u in unigrams])


@ks.api("random.all_candidate_sampler", "nn.all_candidate_sampler")
def all_candidate_sampler(true_classes: Any, num_true: int, num_sampled: int, unique: bool,
                          seed: int | None = None, name: str | None = None) -> SamplerOutput:
    """Returns every class of ``[0, num_sampled)`` with expected counts of 1 (for tests
    of sampled losses against the full softmax)."""
    return _sampler("AllCandidateSampler", true_classes, seed, name, num_true=num_true,
                    num_sampled=num_sampled, unique=unique)


@ks.api("nn.compute_accidental_hits")
def compute_accidental_hits(true_classes: Any, sampled_candidates: Any, num_true: int,
                            seed: int | None = None,
                            name: str | None = None) -> AccidentalHits:
    """``(indices, ids, weights)``: for each true class of row ``indices[i]`` that was
    sampled, its position ``ids[i]`` in ``sampled_candidates`` and weight ``-FLT_MAX``."""
    seed1, seed2 = get_seed(seed)
    out = apply_op("ComputeAccidentalHits", name=name, true_classes=true_classes,
                   sampled_candidates=sampled_candidates, num_true=num_true,
                   seed=seed1 or 0, seed2=seed2 or 0)
    return AccidentalHits(*out)


# =======================================================================================
# nce_loss / sampled_softmax_loss (TF's _compute_sampled_logits)
# =======================================================================================
def _param_list(params: Any) -> list[Any]:
    if hasattr(params, "_get_variable_list"):  # a PartitionedVariable: its parts
        return list(params)
    if isinstance(params, (list, tuple)):
        return list(params)
    return [params]


def _sum_rows(x: Tensor) -> Tensor:
    """Row sums as a matmul with a column of ones (TF's ``_sum_rows``)."""
    tf = _tf()
    cols = tf.shape(x)[1]
    ones = tf.ones(tf.stack([cols, 1]), x.dtype)
    return tf.reshape(tf.matmul(x, ones), [-1])


def _compute_sampled_logits(weights: Any, biases: Any, labels: Any, inputs: Any,
                            num_sampled: int, num_classes: int, num_true: int = 1,
                            sampled_values: Any = None, subtract_log_q: bool = True,
                            remove_accidental_hits: bool = False,
                            partition_strategy: str = "mod", name: str | None = None,
                            seed: int | None = None) -> tuple[Tensor, Tensor]:
    """The logits ``[batch, num_true + num_sampled]`` of the true and the sampled classes,
    and their labels (``1/num_true`` for the true ones), as TF's
    ``_compute_sampled_logits``: a log-uniform unique sampler unless ``sampled_values``
    is given, accidental hits pushed to ``-FLT_MAX`` when asked, ``log Q`` subtracted."""
    tf = _tf()
    weights = _param_list(weights)
    with name_scope(name, "compute_sampled_logits", weights + [biases, inputs, labels]):
        labels = convert_to_tensor(labels, name="labels")
        inputs = convert_to_tensor(inputs, name="inputs")
        if labels.dtype != _dt.int64:
            labels = tf.cast(labels, _dt.int64)
        labels_flat = tf.reshape(labels, [-1])
        if sampled_values is None:
            sampled_values = log_uniform_candidate_sampler(
                true_classes=labels, num_true=num_true, num_sampled=num_sampled,
                unique=True, range_max=num_classes, seed=seed)
        sampled, true_expected_count, sampled_expected_count = (
            tf.stop_gradient(s) for s in sampled_values)
        sampled = tf.cast(sampled, _dt.int64)
        all_ids = tf.concat([labels_flat, sampled], 0)
        all_w = tf.nn.embedding_lookup(weights, all_ids, partition_strategy=partition_strategy)
        if all_w.dtype != inputs.dtype:
            all_w = tf.cast(all_w, inputs.dtype)
        n_true = tf.shape(labels_flat)[0]
        true_w = tf.slice(all_w, [0, 0], tf.stack([n_true, -1]))
        sampled_w = tf.slice(all_w, tf.stack([n_true, 0]), [-1, -1])
        sampled_logits = tf.matmul(inputs, sampled_w, transpose_b=True)
        all_b = tf.nn.embedding_lookup(biases, all_ids, partition_strategy=partition_strategy)
        if all_b.dtype != inputs.dtype:
            all_b = tf.cast(all_b, inputs.dtype)
        true_b = tf.slice(all_b, [0], tf.shape(labels_flat))
        sampled_b = tf.slice(all_b, tf.shape(labels_flat), [-1])
        dim = tf.shape(true_w)[1:2]
        new_true_w_shape = tf.concat([[-1, num_true], dim], 0)
        row_wise_dots = tf.multiply(tf.expand_dims(inputs, 1),
                                    tf.reshape(true_w, new_true_w_shape))
        dots_as_matrix = tf.reshape(row_wise_dots, tf.concat([[-1], dim], 0))
        true_logits = tf.reshape(_sum_rows(dots_as_matrix), [-1, num_true])
        true_b = tf.reshape(true_b, [-1, num_true])
        true_logits += true_b
        sampled_logits += sampled_b
        if remove_accidental_hits:
            acc_indices, acc_ids, acc_weights = compute_accidental_hits(
                labels, sampled, num_true=num_true)
            acc_indices_2d = tf.reshape(acc_indices, [-1, 1])
            acc_ids_2d_int32 = tf.reshape(tf.cast(acc_ids, _dt.int32), [-1, 1])
            sparse_indices = tf.concat([acc_indices_2d, acc_ids_2d_int32], 1, "sparse_indices")
            sampled_logits_shape = tf.concat(
                [tf.shape(labels)[:1], tf.expand_dims(num_sampled, 0)], 0)
            if sampled_logits.dtype != acc_weights.dtype:
                acc_weights = tf.cast(acc_weights, sampled_logits.dtype)
            sampled_logits += apply_op(
                "SparseToDense", sparse_indices=sparse_indices, output_shape=sampled_logits_shape,
                sparse_values=acc_weights,
                default_value=convert_to_tensor(0.0, dtype=acc_weights.dtype),
                validate_indices=False)
        if subtract_log_q:
            true_logits -= tf.log(true_expected_count)
            sampled_logits -= tf.log(sampled_expected_count)
        out_logits = tf.concat([true_logits, sampled_logits], 1)
        out_labels = tf.concat([tf.ones_like(true_logits) / num_true,
                                tf.zeros_like(sampled_logits)], 1)
        return out_logits, out_labels


@ks.api("nn.nce_loss")
def nce_loss(weights: Any, biases: Any, labels: Any, inputs: Any, num_sampled: int,
             num_classes: int, num_true: int = 1, sampled_values: Any = None,
             remove_accidental_hits: bool = False, partition_strategy: str = "mod",
             name: str = "nce_loss") -> Tensor:
    """The noise-contrastive estimation loss per example, ``[batch]``: sigmoid cross
    entropy of the true classes (label ``1/num_true``) and the sampled ones (label 0)."""
    tf = _tf()
    logits, labels = _compute_sampled_logits(
        weights=weights, biases=biases, labels=labels, inputs=inputs,
        num_sampled=num_sampled, num_classes=num_classes, num_true=num_true,
        sampled_values=sampled_values, subtract_log_q=True,
        remove_accidental_hits=remove_accidental_hits,
        partition_strategy=partition_strategy, name=name)
    sampled_losses = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=labels, logits=logits, name="sampled_losses")
    return _sum_rows(sampled_losses)


@ks.api("nn.sampled_softmax_loss")
def sampled_softmax_loss(weights: Any, biases: Any, labels: Any, inputs: Any,
                         num_sampled: int, num_classes: int, num_true: int = 1,
                         sampled_values: Any = None, remove_accidental_hits: bool = True,
                         partition_strategy: str = "mod", name: str = "sampled_softmax_loss",
                         seed: int | None = None) -> Tensor:
    """The sampled softmax loss per example, ``[batch]``: softmax cross entropy over the
    true classes and ``num_sampled`` sampled ones (accidental hits removed by default)."""
    tf = _tf()
    logits, labels = _compute_sampled_logits(
        weights=weights, biases=biases, labels=labels, inputs=inputs,
        num_sampled=num_sampled, num_classes=num_classes, num_true=num_true,
        sampled_values=sampled_values, subtract_log_q=True,
        remove_accidental_hits=remove_accidental_hits,
        partition_strategy=partition_strategy, name=name, seed=seed)
    labels = tf.stop_gradient(labels, name="labels_stop_gradient")
    return tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)


# =======================================================================================
# embedding_lookup_sparse, safe_embedding_lookup_sparse
# =======================================================================================
@ks.api("nn.embedding_lookup_sparse")
def embedding_lookup_sparse(params: Any, sp_ids: Any, sp_weights: Any,
                            partition_strategy: str = "mod", name: str | None = None,
                            combiner: str | None = None, max_norm: Any = None) -> Tensor:
    """Per-row combination (``"sum"``, ``"mean"`` (default), ``"sqrtn"``) of the
    embeddings of the ids of a SparseTensor, weighted by ``sp_weights`` (a SparseTensor
    with the same indices, or None for weight 1). Rows are given by the first index
    column; the result has ``max row + 1`` rows.

    :raises ValueError: for an unknown combiner.
    :raises TypeError: when ``sp_ids``/``sp_weights`` are not SparseTensors.
    """
    tf = _tf()
    if combiner is None:
        combiner = "mean"
    if combiner not in ("mean", "sqrtn", "sum"):
        raise ValueError("combiner must be one of 'mean', 'sqrtn' or 'sum'")
    params = _param_list(params)
    if not isinstance(sp_ids, SparseTensor):
        raise TypeError("sp_ids must be SparseTensor")
    ignore_weights = sp_weights is None
    if not ignore_weights:
        if not isinstance(sp_weights, SparseTensor):
            raise TypeError("sp_weights must be either None or SparseTensor")
        sp_ids.values.shape.assert_is_compatible_with(sp_weights.values.shape)
        sp_ids.indices.shape.assert_is_compatible_with(sp_weights.indices.shape)
        sp_ids.dense_shape.shape.assert_is_compatible_with(sp_weights.dense_shape.shape)
    with name_scope(name, "embedding_lookup_sparse", params + [sp_ids]) as name:
        segment_ids = sp_ids.indices[:, 0]
        if segment_ids.dtype != _dt.int32:
            segment_ids = tf.cast(segment_ids, _dt.int32)
        ids, idx = tf.unique(sp_ids.values)
        embeddings = tf.nn.embedding_lookup(params, ids, partition_strategy=partition_strategy,
                                            max_norm=max_norm)
        if ignore_weights:
            fn = {"sum": tf.sparse_segment_sum, "mean": tf.sparse_segment_mean,
                  "sqrtn": tf.sparse_segment_sqrt_n}[combiner]
            return fn(embeddings, idx, segment_ids, name=name)
        weights = sp_weights.values
        if weights.dtype != embeddings.dtype:
            weights = tf.cast(weights, embeddings.dtype)
        embeddings = tf.gather(embeddings, idx)
        ones = tf.fill(tf.expand_dims(tf.rank(embeddings) - 1, 0), 1)
        bcast_weights_shape = tf.concat([tf.shape(weights), ones], 0)
        orig_weights_shape = weights.shape
        weights = tf.reshape(weights, bcast_weights_shape)
        if embeddings.shape.ndims is not None:
            weights.set_shape(orig_weights_shape.concatenate(
                [1] * (embeddings.shape.ndims - 1)))
        embeddings *= weights
        if combiner == "sum":
            return tf.math.segment_sum(embeddings, segment_ids, name=name)
        embeddings = tf.math.segment_sum(embeddings, segment_ids)
        if combiner == "mean":
            weight_sum = tf.math.segment_sum(weights, segment_ids)
            return tf.div(embeddings, weight_sum, name=name)
        weight_sum = tf.math.segment_sum(tf.pow(weights, 2), segment_ids)
        return tf.div(embeddings, tf.sqrt(weight_sum), name=name)


def _prune(sparse_ids: SparseTensor, sparse_weights: Any,
           keep: Callable[[SparseTensor, Any], Tensor]) -> tuple[SparseTensor, Any]:
    tf = _tf()
    mask = keep(sparse_ids, sparse_weights)
    sparse_ids = tf.sparse_retain(sparse_ids, mask)
    if sparse_weights is not None:
        sparse_weights = tf.sparse_retain(sparse_weights, mask)
    return sparse_ids, sparse_weights


def _valid_ids(ids: SparseTensor, weights: Any) -> Tensor:
    tf = _tf()
    ok = tf.greater_equal(ids.values, 0)
    if weights is not None:
        ok = tf.logical_and(ok, tf.ones_like(weights.values, dtype=_dt.bool))
    return ok


@ks.api("nn.safe_embedding_lookup_sparse")
def safe_embedding_lookup_sparse(embedding_weights: Any, sparse_ids: Any,
                                 sparse_weights: Any = None, combiner: str = "mean",
                                 default_id: int | None = None, name: str | None = None,
                                 partition_strategy: str = "div",
                                 max_norm: Any = None) -> Tensor:
    """``embedding_lookup_sparse`` over ids of any rank ``>= 2`` that drops negative ids
    (and non-positive weights unless ``combiner="sum"``) and gives empty rows the
    embedding of ``default_id`` (zeros when None). Result shape: the ids' dense shape
    without its last dimension, plus the embedding dimensions.

    :raises ValueError: without embedding weights.
    """
    tf = _tf()
    if embedding_weights is None:
        raise ValueError(f"Missing embedding_weights {embedding_weights}.")
    embedding_weights = _param_list(embedding_weights)
    if len(embedding_weights) < 1:
        raise ValueError(f"Missing embedding_weights {embedding_weights}.")
    dtype = sparse_weights.dtype if sparse_weights is not None else None
    # TF 1.15 keeps only resource variables as they are; its default (ref) variables and
    # everything else become tensors of the weights' dtype
    embedding_weights = [convert_to_tensor(w, dtype=dtype) for w in embedding_weights]
    with name_scope(name, "embedding_lookup",
                    embedding_weights + [sparse_ids, sparse_weights]) as scope:
        original_shape = sparse_ids.dense_shape
        original_rank_dim = dimension_value(sparse_ids.dense_shape.shape[0])
        original_rank = (tf.size(original_shape) if original_rank_dim is None
                         else original_rank_dim)
        sparse_ids = tf.sparse_reshape(sparse_ids, [
            tf.reduce_prod(tf.slice(original_shape, [0], [original_rank - 1])),
            tf.gather(original_shape, original_rank - 1)])
        if sparse_weights is not None:
            sparse_weights = SparseTensor(sparse_ids.indices, sparse_weights.values,
                                          sparse_ids.dense_shape)
        sparse_ids, sparse_weights = _prune(sparse_ids, sparse_weights, _valid_ids)
        if combiner != "sum" and sparse_weights is not None:
            sparse_ids, sparse_weights = _prune(
                sparse_ids, sparse_weights, lambda i, w: tf.greater(w.values, 0))
        sparse_ids, is_row_empty = tf.sparse_fill_empty_rows(sparse_ids, default_id or 0)
        if sparse_weights is not None:
            sparse_weights, _ = tf.sparse_fill_empty_rows(sparse_weights, 1.0)
        result = embedding_lookup_sparse(
            embedding_weights, sparse_ids, sparse_weights, combiner=combiner,
            partition_strategy=partition_strategy,
            name=None if default_id is None else scope, max_norm=max_norm)
        if default_id is None:
            is_row_empty = tf.tile(tf.reshape(is_row_empty, [-1, 1]),
                                   tf.stack([1, tf.shape(result)[1]]))
            result = tf.where(is_row_empty, tf.zeros_like(result), result, name=scope)
        final_result = tf.reshape(result, tf.concat([
            tf.slice(tf.cast(original_shape, _dt.int32), [0], [original_rank - 1]),
            tf.slice(tf.shape(result), [1], [-1])], 0))
        lead = None if original_rank_dim is None else original_rank_dim - 1
        final_result.set_shape(unknown_shape(lead).concatenate(result.shape[1:]))
        return final_result


# =======================================================================================
# log_poisson_loss
# =======================================================================================
@ks.api("nn.log_poisson_loss")
def log_poisson_loss(targets: Any, log_input: Any, compute_full_loss: bool = False,
                     name: str | None = None) -> Tensor:
    """``exp(log_input) - log_input * targets``, plus Stirling's approximation of
    ``log(targets!)`` for targets above 1 when ``compute_full_loss``.

    :raises ValueError: when the two shapes are incompatible.
    """
    tf = _tf()
    with name_scope(name, "log_poisson_loss", [log_input, targets]) as name:
        log_input = convert_to_tensor(log_input, name="log_input")
        targets = convert_to_tensor(targets, name="targets")
        try:
            targets.shape.assert_is_compatible_with(log_input.shape)
        except ValueError:
            raise ValueError("log_input and targets must have the same shape "
                             f"({log_input.shape} vs {targets.shape})") from None
        result = tf.exp(log_input) - log_input * targets
        if compute_full_loss:
            point_five = tf.constant(0.5, dtype=targets.dtype)
            two_pi = tf.constant(2 * math.pi, dtype=targets.dtype)
            stirling_approx = (targets * tf.log(targets)) - targets + (
                point_five * tf.log(two_pi * targets))
            zeros = tf.zeros_like(targets, dtype=targets.dtype)
            ones = tf.ones_like(targets, dtype=targets.dtype)
            cond = tf.logical_and(targets >= zeros, targets <= ones)
            result += tf.where(cond, zeros, stirling_approx)
        return result


__all__ = ["uniform_candidate_sampler", "log_uniform_candidate_sampler",
           "learned_unigram_candidate_sampler", "fixed_unigram_candidate_sampler",
           "all_candidate_sampler", "compute_accidental_hits", "nce_loss",
           "sampled_softmax_loss", "embedding_lookup_sparse", "safe_embedding_lookup_sparse",
           "log_poisson_loss"]
