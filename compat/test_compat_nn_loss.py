"""tf.nn sampled losses, candidate samplers, sparse embedding lookups and CTC: flowrt
against TensorFlow on the same programs.

The samplers' draws differ by design (numpy's generator, not Philox), so sampler programs
compare everything that does not depend on the draw: static facts, the expected counts of
the true classes where they follow from the distribution alone, and the deterministic
samplers' values. The sampled losses get their candidates through ``sampled_values``, so
their numbers are compared exactly.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

from compat_harness import Run, Steps, run_both

R = np.random.default_rng(11)
TRUE1 = np.array([[1], [4], [7]], np.int64)
TRUE2 = np.array([[1, 2], [4, 0], [7, 7]], np.int64)
W = R.normal(size=(10, 4)).astype(np.float32)
B = R.normal(size=(10,)).astype(np.float32)
X = R.normal(size=(3, 4)).astype(np.float32)
SAMPLED = np.array([0, 3, 4, 9], np.int64)
TEC1 = np.array([[0.5], [0.2], [0.7]], np.float32)
TEC2 = np.array([[0.5, 0.4], [0.2, 0.3], [0.7, 0.7]], np.float32)
SEC = np.array([0.9, 0.3, 0.2, 0.1], np.float32)


#: static facts compared where the graph holds gradient ops of other modules, whose node
#: names (AddN numbering, Transpose vs transpose) are not this module's business
NO_NAMES = ("kind", "dtype", "shape", "op_type")


def _progs(d: dict) -> list:
    return [pytest.param(v, id=k) for k, v in sorted(d.items())]


# ---------------------------------------------------------------------------------------
# candidate samplers
# ---------------------------------------------------------------------------------------
def _sampler_static(fn, *args, **kw):
    def program(tf):
        tf.set_random_seed(1)
        return list(fn(tf)(*args, **kw))
    return program


def _expected_true(fn, *args, **kw):
    """Only the true classes' expected counts (independent of the draw when unique is
    False), over two runs (the learned sampler learns in between)."""
    def program(tf):
        out = fn(tf)(*args, **kw)
        return Steps(out.true_expected_count if hasattr(out, "true_expected_count")
                     else out[1], out[1])
    return program


UNIGRAMS = [3.0, 1.0, 0.5, 2.0, 4.0, 1.5, 0.25, 1.0]
SAMPLERS_STATIC = {
    "uniform": _sampler_static(lambda tf: tf.nn.uniform_candidate_sampler, TRUE1, 1, 4,
                               True, 10),
    "uniform_random_alias": _sampler_static(lambda tf: tf.random.uniform_candidate_sampler,
                                            TRUE2, 2, 3, False, 10, name="s"),
    "log_uniform": _sampler_static(lambda tf: tf.nn.log_uniform_candidate_sampler, TRUE2, 2,
                                   5, True, 10),
    "learned": _sampler_static(lambda tf: tf.nn.learned_unigram_candidate_sampler, TRUE1,
                               1, 4, False, 10),
    "fixed": _sampler_static(lambda tf: tf.nn.fixed_unigram_candidate_sampler, TRUE1, 1, 3,
                             True, 8, unigrams=UNIGRAMS),
    "all": _sampler_static(lambda tf: tf.nn.all_candidate_sampler, TRUE2, 2, 6, True),
}


@pytest.mark.parametrize("program", _progs(SAMPLERS_STATIC))
def test_sampler_static(program):
    run_both(program, values=False)


SAMPLERS_EXPECTED = {
    "uniform": _expected_true(lambda tf: tf.nn.uniform_candidate_sampler, TRUE2, 2, 4,
                              False, 10),
    "log_uniform": _expected_true(lambda tf: tf.nn.log_uniform_candidate_sampler, TRUE2, 2,
                                  6, False, 10),
    "learned": _expected_true(lambda tf: tf.nn.learned_unigram_candidate_sampler, TRUE2, 2,
                              4, False, 10),
    "fixed": _expected_true(lambda tf: tf.nn.fixed_unigram_candidate_sampler, TRUE1, 1, 3,
                            False, 8, unigrams=UNIGRAMS, distortion=0.5),
    "fixed_reserved": _expected_true(lambda tf: tf.nn.fixed_unigram_candidate_sampler,
                                     TRUE1, 1, 3, False, 10, unigrams=UNIGRAMS,
                                     num_reserved_ids=2),
    "fixed_shard": _expected_true(lambda tf: tf.nn.fixed_unigram_candidate_sampler,
                                  np.array([[1], [3]], np.int64), 1, 2, False, 4,
                                  unigrams=UNIGRAMS, num_shards=2, shard=1),
    "all": _expected_true(lambda tf: tf.nn.all_candidate_sampler, TRUE2, 2, 8, False),
    "all_out_of_range": _expected_true(lambda tf: tf.nn.all_candidate_sampler, TRUE2, 2, 6,
                                       False),
}


@pytest.mark.parametrize("program", _progs(SAMPLERS_EXPECTED))
def test_sampler_expected_counts(program):
    run_both(program)


def test_all_candidate_sampler_values():
    run_both(lambda tf: list(tf.random.all_candidate_sampler(TRUE2, 2, 8, False)))


def test_fixed_unigram_vocab_file():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "vocab.txt")
        with open(path, "w") as f:
            f.write("a,3\nb,1\nc,0.5\nd,2\n")
        run_both(lambda tf: tf.nn.fixed_unigram_candidate_sampler(
            np.array([[0], [3]], np.int64), 1, 2, False, 4, vocab_file=path,
            distortion=2.0).true_expected_count)


SAMPLER_ERRORS = {
    "wrong_num_true": lambda tf: tf.nn.uniform_candidate_sampler(TRUE2, 1, 2, True, 10),
    "rank1_true": lambda tf: tf.nn.uniform_candidate_sampler([1, 2], 1, 2, True, 10),
    "range_too_small": lambda tf: tf.nn.uniform_candidate_sampler(TRUE1, 1, 5, True, 3),
    "int32_true_classes": lambda tf: tf.nn.uniform_candidate_sampler(
        tf.constant([[1]], tf.int32), 1, 2, True, 10),
    "fixed_size_mismatch": lambda tf: tf.nn.fixed_unigram_candidate_sampler(
        TRUE1, 1, 2, False, 5, unigrams=UNIGRAMS),
    "fed_wrong_columns": lambda tf: (lambda p: Run(
        tf.nn.uniform_candidate_sampler(p, 2, 2, False, 10), {p: TRUE1}))(
            tf.placeholder(tf.int64, [None, None])),
}


@pytest.mark.parametrize("program", _progs(SAMPLER_ERRORS))
def test_sampler_errors(program):
    run_both(program, values=False)


ACC_HITS = {
    "one": lambda tf: list(tf.nn.compute_accidental_hits(TRUE1, SAMPLED, 1)),
    "two": lambda tf: list(tf.nn.compute_accidental_hits(TRUE2, SAMPLED, 2)),
    "duplicates": lambda tf: list(tf.nn.compute_accidental_hits(
        TRUE2, np.array([7, 1, 7, 2], np.int64), 2)),
    "none": lambda tf: list(tf.nn.compute_accidental_hits(TRUE1, np.array([2], np.int64),
                                                          1)),
}


@pytest.mark.parametrize("program", _progs(ACC_HITS))
def test_compute_accidental_hits(program):
    run_both(program)


# ---------------------------------------------------------------------------------------
# nce_loss, sampled_softmax_loss
# ---------------------------------------------------------------------------------------
def _sampled(tf, loss, num_true=1, grads=False, parts=None, **kw):
    labels = TRUE1 if num_true == 1 else TRUE2
    tec = TEC1 if num_true == 1 else TEC2
    w = tf.constant(W) if parts is None else [tf.constant(W[i::parts]) for i in range(parts)]
    if parts is not None and kw.get("partition_strategy") == "div":
        w = [tf.constant(p) for p in np.array_split(W, parts)]
    x = tf.constant(X)
    b = tf.constant(B)
    fn = tf.nn.nce_loss if loss == "nce" else tf.nn.sampled_softmax_loss
    out = fn(w, b, labels, x, num_sampled=4, num_classes=10, num_true=num_true,
             sampled_values=(SAMPLED, tec, SEC), **kw)
    if not grads:
        return out
    ws = w if isinstance(w, list) else [w]
    g = tf.gradients(tf.reduce_sum(out), [x, b] + ws)
    return [out, g[0]] + [tf.convert_to_tensor(t) for t in g[1:]]


SAMPLED_LOSSES = {}
for _loss in ("nce", "softmax"):
    SAMPLED_LOSSES.update({
        f"{_loss}_basic": lambda tf, _l=_loss: _sampled(tf, _l),
        f"{_loss}_num_true2": lambda tf, _l=_loss: _sampled(tf, _l, num_true=2),
        f"{_loss}_hits": lambda tf, _l=_loss: _sampled(tf, _l, remove_accidental_hits=True),
        f"{_loss}_no_hits": lambda tf, _l=_loss: _sampled(tf, _l,
                                                          remove_accidental_hits=False),
        f"{_loss}_hits_num_true2": lambda tf, _l=_loss: _sampled(
            tf, _l, num_true=2, remove_accidental_hits=True),
        f"{_loss}_grads": lambda tf, _l=_loss: _sampled(tf, _l, grads=True),
        f"{_loss}_parts_mod": lambda tf, _l=_loss: _sampled(tf, _l, parts=3, grads=True),
        f"{_loss}_parts_div": lambda tf, _l=_loss: _sampled(tf, _l, parts=3,
                                                            partition_strategy="div"),
        f"{_loss}_named": lambda tf, _l=_loss: _sampled(tf, _l, name="my_loss"),
    })


@pytest.mark.parametrize("program", _progs(SAMPLED_LOSSES))
def test_sampled_losses(program):
    run_both(program, rtol=1e-5, atol=1e-5, static_keys=NO_NAMES)


def _sampled_default_sampler(tf):
    tf.set_random_seed(5)
    out = tf.nn.sampled_softmax_loss(tf.constant(W), tf.constant(B), TRUE1, tf.constant(X),
                                     num_sampled=4, num_classes=10)
    return out


def test_sampled_softmax_default_sampler():
    run_both(_sampled_default_sampler, values=False)


def test_nce_loss_variables_train():
    def program(tf):
        w = tf.get_variable("w", initializer=W)
        b = tf.get_variable("b", initializer=B)
        loss = tf.reduce_mean(tf.nn.nce_loss(w, b, TRUE1, tf.constant(X), 4, 10,
                                             sampled_values=(SAMPLED, TEC1, SEC)))
        step = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
        return Steps(tf.global_variables_initializer(), step, [w, b, loss])
    run_both(program, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------
# embedding_lookup_sparse, safe_embedding_lookup_sparse, log_poisson_loss
# ---------------------------------------------------------------------------------------
SP_IND = [[0, 0], [0, 1], [1, 0], [2, 0], [2, 1], [2, 2]]
SP_IDS = np.array([1, 3, 0, 9, 3, 3], np.int64)
SP_W = np.array([1.0, 2.0, 0.5, -1.0, 1.5, 3.0], np.float32)


def _els(tf, combiner, weights=True, parts=None, strategy="mod", grads=False):
    ids = tf.SparseTensor(SP_IND, SP_IDS, [3, 3])
    sw = tf.SparseTensor(SP_IND, SP_W, [3, 3]) if weights else None
    if parts is None:
        p = tf.constant(W)
    elif strategy == "mod":
        p = [tf.constant(W[i::parts]) for i in range(parts)]
    else:
        p = [tf.constant(q) for q in np.array_split(W, parts)]
    out = tf.nn.embedding_lookup_sparse(p, ids, sw, partition_strategy=strategy,
                                        combiner=combiner)
    if not grads:
        return out
    ps = p if isinstance(p, list) else [p]
    return [out] + [tf.convert_to_tensor(g) for g in tf.gradients(tf.reduce_sum(out * out),
                                                                  ps)]


ELS = {}
for _c in ("sum", "mean", "sqrtn"):
    ELS.update({
        f"{_c}_weighted": lambda tf, _c=_c: _els(tf, _c),
        f"{_c}_unweighted": lambda tf, _c=_c: _els(tf, _c, weights=False),
        f"{_c}_parts_mod": lambda tf, _c=_c: _els(tf, _c, parts=2),
        f"{_c}_parts_div": lambda tf, _c=_c: _els(tf, _c, parts=3, strategy="div"),
        f"{_c}_grads": lambda tf, _c=_c: _els(tf, _c, grads=True),
        f"{_c}_grads_unweighted": lambda tf, _c=_c: _els(tf, _c, weights=False, grads=True),
    })
ELS.update({
    "default_combiner": lambda tf: tf.nn.embedding_lookup_sparse(
        tf.constant(W), tf.SparseTensor(SP_IND, SP_IDS, [3, 3]), None),
    "bad_combiner": lambda tf: tf.nn.embedding_lookup_sparse(
        tf.constant(W), tf.SparseTensor(SP_IND, SP_IDS, [3, 3]), None, combiner="max"),
    "dense_ids": lambda tf: tf.nn.embedding_lookup_sparse(tf.constant(W), SP_IDS, None),
    "named": lambda tf: tf.nn.embedding_lookup_sparse(
        tf.constant(W), tf.SparseTensor(SP_IND, SP_IDS, [3, 3]), None, name="els"),
})


def _els_empty_row(tf, combiner, weights):
    ind = [[0, 0], [2, 0], [2, 1]]
    ids = tf.SparseTensor(ind, np.array([1, 3, 3], np.int64), [3, 2])
    sw = tf.SparseTensor(ind, np.array([2.0, 1.0, 0.5], np.float32), [3, 2]) if weights \
        else None
    return tf.nn.embedding_lookup_sparse(tf.constant(W), ids, sw, combiner=combiner)


ELS.update({
    "empty_row_unweighted_mean": lambda tf: _els_empty_row(tf, "mean", False),
    "empty_row_unweighted_sqrtn": lambda tf: _els_empty_row(tf, "sqrtn", False),
    "empty_row_weighted_sum": lambda tf: _els_empty_row(tf, "sum", True),
})


@pytest.mark.parametrize("program", _progs(ELS))
def test_embedding_lookup_sparse(program):
    # TF 2 divides by the weight sums with DivNoNan, TF 1.15 with RealDiv (nan for a row
    # without ids, tested in tests/test_nn_loss_ops.py): op types are not compared
    run_both(program, rtol=1e-5, atol=1e-5, static_keys=("kind", "dtype", "shape", "name"))


SAFE_IND = [[0, 0], [0, 1], [2, 0], [2, 1], [3, 0]]
SAFE_IDS = np.array([1, -1, 4, 2, -3], np.int64)
SAFE_W = np.array([1.0, 2.0, 0.0, 1.5, 1.0], np.float32)


def _safe(tf, combiner="mean", weights=True, default_id=None, rank3=False, strategy="div"):
    if rank3:
        ind = [[0, 0, 0], [0, 0, 1], [1, 0, 0], [1, 1, 0], [1, 1, 1]]
        ids = tf.SparseTensor(ind, SAFE_IDS, [2, 2, 2])
        sw = tf.SparseTensor(ind, SAFE_W, [2, 2, 2]) if weights else None
    else:
        ids = tf.SparseTensor(SAFE_IND, SAFE_IDS, [5, 2])
        sw = tf.SparseTensor(SAFE_IND, SAFE_W, [5, 2]) if weights else None
    return tf.nn.safe_embedding_lookup_sparse(
        [tf.constant(q) for q in np.array_split(W, 2)], ids, sw, combiner=combiner,
        default_id=default_id, partition_strategy=strategy)


SAFE = {
    "mean": lambda tf: _safe(tf),
    "sum": lambda tf: _safe(tf, "sum"),
    "sqrtn": lambda tf: _safe(tf, "sqrtn"),
    "unweighted": lambda tf: _safe(tf, weights=False),
    "default_id": lambda tf: _safe(tf, default_id=3),
    "rank3": lambda tf: _safe(tf, rank3=True),
    "rank3_sum_default": lambda tf: _safe(tf, "sum", rank3=True, default_id=0),
    "mod": lambda tf: _safe(tf, strategy="mod"),
    "single_tensor": lambda tf: tf.nn.safe_embedding_lookup_sparse(
        tf.constant(W), tf.SparseTensor(SAFE_IND, SAFE_IDS, [5, 2])),
    "missing_weights": lambda tf: tf.nn.safe_embedding_lookup_sparse(
        [], tf.SparseTensor(SAFE_IND, SAFE_IDS, [5, 2])),
}


@pytest.mark.parametrize("program", _progs(SAFE))
def test_safe_embedding_lookup_sparse(program):
    run_both(program, rtol=1e-5, atol=1e-5)


TARGETS = np.array([[0.0, 0.5, 1.0], [2.0, 3.0, 7.5]], np.float32)
LOG_IN = R.normal(size=(2, 3)).astype(np.float32)
POISSON = {
    "partial": lambda tf: tf.nn.log_poisson_loss(TARGETS, LOG_IN),
    "full": lambda tf: tf.nn.log_poisson_loss(TARGETS, LOG_IN, compute_full_loss=True),
    "named": lambda tf: tf.nn.log_poisson_loss(TARGETS, LOG_IN, name="lp"),
    "grad": lambda tf: (lambda x: tf.gradients(
        tf.nn.log_poisson_loss(TARGETS, x, compute_full_loss=True), x))(tf.constant(LOG_IN)),
    "double": lambda tf: tf.nn.log_poisson_loss(TARGETS.astype(np.float64),
                                                LOG_IN.astype(np.float64), True),
    "shape_mismatch": lambda tf: tf.nn.log_poisson_loss(TARGETS, LOG_IN[:, :2]),
}


@pytest.mark.parametrize("program", _progs(POISSON))
def test_log_poisson_loss(program):
    run_both(program, static_keys=NO_NAMES)


# ---------------------------------------------------------------------------------------
# CTC
# ---------------------------------------------------------------------------------------
CT, CB, CC = 6, 3, 5
CX = R.normal(size=(CT, CB, CC)).astype(np.float32)
C_IND = [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [2, 0]]
C_VALS = np.array([1, 1, 2, 0, 3, 2], np.int32)
C_LEN = np.array([6, 5, 3], np.int32)


def _ctc(tf, x=CX, ind=C_IND, vals=C_VALS, seq=C_LEN, grads=False, **kw):
    xi = tf.constant(x)
    sp = tf.SparseTensor(ind, vals, [CB, 3])
    loss = tf.nn.ctc_loss(sp, xi, seq, **kw)
    if grads:
        return [loss, tf.gradients(tf.reduce_sum(loss * [1.0, 2.0, 0.5]), xi)[0]]
    return loss


CTC_LOSS = {
    "basic": lambda tf: _ctc(tf),
    "grads": lambda tf: _ctc(tf, grads=True),
    "double": lambda tf: _ctc(tf, x=CX.astype(np.float64), grads=True),
    "collapse": lambda tf: _ctc(tf, preprocess_collapse_repeated=True, grads=True),
    "no_merge": lambda tf: _ctc(tf, ctc_merge_repeated=False, grads=True),
    "collapse_no_merge": lambda tf: _ctc(tf, preprocess_collapse_repeated=True,
                                         ctc_merge_repeated=False),
    "batch_major": lambda tf: _ctc(tf, x=np.transpose(CX, (1, 0, 2)), time_major=False,
                                   grads=True),
    "logits_kw": lambda tf: tf.nn.ctc_loss(tf.SparseTensor(C_IND, C_VALS, [CB, 3]),
                                           sequence_length=C_LEN, logits=CX),
    "too_long": lambda tf: _ctc(tf, seq=np.array([2, 5, 3], np.int32)),
    "too_long_ignored": lambda tf: _ctc(tf, seq=np.array([2, 5, 3], np.int32),
                                        ignore_longer_outputs_than_inputs=True, grads=True),
    "zero_length": lambda tf: _ctc(tf, seq=np.array([6, 0, 3], np.int32),
                                   ignore_longer_outputs_than_inputs=True, grads=True),
    "no_valid_path": lambda tf: _ctc(tf, seq=np.array([6, 5, 2], np.int32),
                                     ind=[[0, 0], [1, 0], [2, 0], [2, 1]],
                                     vals=np.array([1, 2, 3, 3], np.int32), grads=True),
    "label_is_blank": lambda tf: _ctc(tf, vals=np.array([1, 1, 4, 0, 3, 2], np.int32)),
    "label_after_blank": lambda tf: _ctc(tf, vals=np.array([1, 4, 2, 0, 3, 2], np.int32)),
    "negative_label": lambda tf: _ctc(tf, vals=np.array([1, -1, 2, 0, 3, 2], np.int32)),
    "seq_too_long": lambda tf: _ctc(tf, seq=np.array([7, 5, 3], np.int32)),
    "seq_wrong_batch": lambda tf: _ctc(tf, seq=np.array([6, 5], np.int32)),
    "unordered_labels": lambda tf: _ctc(tf, ind=[[0, 1], [0, 0], [0, 2], [1, 0], [1, 1],
                                                 [2, 0]]),
    "empty_labels_row": lambda tf: _ctc(tf, ind=[[0, 0], [0, 1], [0, 2], [2, 0], [2, 1],
                                                 [2, 2]]),
    "dense_labels": lambda tf: tf.nn.ctc_loss(tf.constant([[1, 2]]), CX, C_LEN),
    "rank2_inputs": lambda tf: tf.nn.ctc_loss(tf.SparseTensor(C_IND, C_VALS, [CB, 3]),
                                              CX[0], C_LEN),
}


@pytest.mark.parametrize("program", _progs(CTC_LOSS))
def test_ctc_loss(program):
    # names of gradient ops other modules build (Transpose's gradient) are not compared
    run_both(program, rtol=2e-4, atol=2e-4, static_keys=NO_NAMES)


DENSE_LABELS = np.array([[1, 1, 2], [0, 3, 0], [2, 0, 0]], np.int32)
DENSE_LEN = np.array([3, 2, 1], np.int32)


def _ctc_v2(tf, blank_index=None, sparse=False, time_major=True, grads=False,
            unique=False):
    x = tf.constant(CX if time_major else np.transpose(CX, (1, 0, 2)))
    labels = DENSE_LABELS + (1 if blank_index in (None, 0) and not sparse else 0)
    if sparse:
        labels = tf.SparseTensor(C_IND, C_VALS, [CB, 3])
    extra = {}
    if unique:
        extra["unique"] = tf.nn.ctc_unique_labels(labels)
    loss = tf.nn.ctc_loss_v2(labels, x, None if sparse else DENSE_LEN, C_LEN,
                             logits_time_major=time_major, blank_index=blank_index,
                             **extra)
    if grads:
        return [loss, tf.gradients(tf.reduce_sum(loss), x)[0]]
    return loss


CTC_V2 = {
    "dense": lambda tf: _ctc_v2(tf, grads=True),
    "dense_batch_major": lambda tf: _ctc_v2(tf, time_major=False),
    "dense_blank_last": lambda tf: _ctc_v2(tf, blank_index=4, grads=True),
    "dense_blank_neg": lambda tf: _ctc_v2(tf, blank_index=-1),
    "dense_blank_mid": lambda tf: _ctc_v2(tf, blank_index=3),
    "dense_unique": lambda tf: _ctc_v2(tf, unique=True),
    "sparse_blank_last": lambda tf: _ctc_v2(tf, sparse=True, blank_index=-1, grads=True),
    "sparse_blank_zero": lambda tf: _ctc_v2(tf, sparse=True, blank_index=0),
    "sparse_no_blank": lambda tf: _ctc_v2(tf, sparse=True),
}


@pytest.mark.parametrize("program", _progs(CTC_V2))
def test_ctc_loss_v2(program):
    run_both(program, rtol=2e-4, atol=2e-4, static_keys=("kind", "dtype", "shape"))


DX = np.log(R.dirichlet(np.ones(CC), size=(CT, CB))).astype(np.float32)
DX[1, 0] = DX[0, 0]  # a repeated best class
DEC_LEN = np.array([6, 4, 0], np.int32)


def _decoded(sps, logp):
    return [[sp.indices, sp.values, sp.dense_shape] for sp in sps] + [logp]


DECODERS = {
    "greedy": lambda tf: _decoded(*tf.nn.ctc_greedy_decoder(DX, DEC_LEN)),
    "greedy_no_merge": lambda tf: _decoded(*tf.nn.ctc_greedy_decoder(DX, DEC_LEN,
                                                                     merge_repeated=False)),
    "greedy_logits": lambda tf: _decoded(*tf.nn.ctc_greedy_decoder(CX, C_LEN)),
    "beam": lambda tf: _decoded(*tf.nn.ctc_beam_search_decoder(DX, DEC_LEN, beam_width=4)),
    "beam_top3": lambda tf: _decoded(*tf.nn.ctc_beam_search_decoder(
        DX, np.array([6, 4, 3], np.int32), beam_width=5, top_paths=3)),
    "beam_no_merge": lambda tf: _decoded(*tf.nn.ctc_beam_search_decoder(
        CX, C_LEN, beam_width=3, top_paths=2, merge_repeated=False)),
    "beam_logits_default_width": lambda tf: _decoded(*tf.nn.ctc_beam_search_decoder(
        CX, C_LEN, top_paths=2)),
    "beam_v2": lambda tf: _decoded(*tf.nn.ctc_beam_search_decoder_v2(CX, C_LEN,
                                                                     beam_width=6,
                                                                     top_paths=3)),
    "beam_too_many_paths": lambda tf: _decoded(*tf.nn.ctc_beam_search_decoder(
        CX, C_LEN, beam_width=2, top_paths=3)),
    "beam_empty_sequence": lambda tf: _decoded(*tf.nn.ctc_beam_search_decoder(
        CX, np.array([6, 0, 2], np.int32), beam_width=3, top_paths=2)),
    "greedy_seq_too_long": lambda tf: _decoded(*tf.nn.ctc_greedy_decoder(
        CX, np.array([7, 1, 1], np.int32))),
    "greedy_rank2": lambda tf: _decoded(*tf.nn.ctc_greedy_decoder(CX[0], C_LEN)),
}


@pytest.mark.parametrize("program", _progs(DECODERS))
def test_ctc_decoders(program):
    run_both(program, rtol=1e-5, atol=1e-5)


CTC_MISC = {
    "collapse_repeated": lambda tf: list(tf.nn.collapse_repeated(
        np.array([[1, 1, 2, 2, 3], [4, 4, 4, 0, 0], [5, 6, 6, 5, 5]], np.int32),
        np.array([5, 3, 4], np.int32))),
    "collapse_repeated_int64": lambda tf: list(tf.nn.collapse_repeated(
        np.array([[1, 1], [2, 3]], np.int64), np.array([2, 1], np.int64))),
    "unique_labels": lambda tf: list(tf.nn.ctc_unique_labels(
        np.array([[3, 1, 3, 2, 1], [0, 0, 5, 0, 1]], np.int32))),
}


@pytest.mark.parametrize("program", _progs(CTC_MISC))
def test_ctc_misc(program):
    run_both(program, static_keys=("kind", "dtype", "shape"))
