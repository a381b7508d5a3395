"""Tests of tf.nn's candidate samplers, sampled losses, sparse embedding lookups,
log_poisson_loss and CTC (loss, decoders, label helpers) against numpy references:
TF's expected-count formulas, brute-force path enumeration for tiny CTC problems, an
exhaustive label-sequence search for the beam decoder, numeric gradient checks."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors
from flowrt.plugins.devices import cuda as cuda_dev

RNG = np.random.default_rng(7)


def run(build, feed=None):
    """Build with ``build()`` in a fresh graph and run what it returns."""
    g = tf.Graph()
    with g.as_default():
        out = build()
    with tf.Session(graph=g) as s:
        return s.run(out, feed)


def grad_error(build, *values):
    """The largest numeric-gradient error of ``build(*placeholders)`` over its inputs."""
    g = tf.Graph()
    with g.as_default():
        xs = [tf.placeholder(tf.float64, v.shape) for v in values]
        y = build(*xs)
        with tf.Session() as s:
            feed = dict(zip(xs, values))
            y_shape = list(s.run(y, feed).shape)
            errs = []
            for i, (x, v) in enumerate(zip(xs, values)):
                extra = {xx: vv for j, (xx, vv) in enumerate(zip(xs, values)) if j != i}
                errs.append(tf.test.compute_gradient_error(
                    x, list(v.shape), y, y_shape, x_init_value=v, extra_feed_dict=extra))
    return max(errs)


# =======================================================================================
# candidate samplers
# =======================================================================================
def log_uniform_p(k, n):
    return (np.log(k + 2.0) - np.log(k + 1.0)) / np.log(n + 1.0)


def expected(p, num_sampled, tries):
    if tries == num_sampled:
        return p * num_sampled
    return -np.expm1(tries * np.log1p(-p))


SAMPLERS = {
    "uniform": (tf.nn.uniform_candidate_sampler, lambda k, n: np.full(np.shape(k), 1.0 / n)),
    "log_uniform": (tf.nn.log_uniform_candidate_sampler, log_uniform_p),
}


@pytest.mark.parametrize("kind", sorted(SAMPLERS))
def test_sampler_shapes_dtypes_and_non_unique_counts(kind):
    fn, prob = SAMPLERS[kind]
    tc = np.array([[0, 3], [9, 5], [2, 2]], np.int64)
    g = tf.Graph()
    with g.as_default():
        out = fn(tc, 2, 6, False, 10, seed=3)
        assert out.sampled_candidates.shape.as_list() == [6]
        assert out.true_expected_count.shape.as_list() == [3, 2]
        assert out.sampled_expected_count.shape.as_list() == [6]
        assert out.sampled_candidates.dtype == tf.int64
        assert out.true_expected_count.dtype == tf.float32
        assert out.sampled_candidates.op.type == {
            "uniform": "UniformCandidateSampler",
            "log_uniform": "LogUniformCandidateSampler"}[kind]
    with tf.Session(graph=g) as s:
        sc, tec, sec = s.run(out)
    assert sc.dtype == np.int64 and ((sc >= 0) & (sc < 10)).all()
    np.testing.assert_allclose(tec, prob(tc, 10) * 6, rtol=1e-6)
    np.testing.assert_allclose(sec, prob(sc, 10) * 6, rtol=1e-6)


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(sorted(SAMPLERS)), st.integers(1, 8), st.integers(8, 30),
       st.integers(0, 1000))
def test_unique_sampler_counts_follow_one_number_of_tries(kind, num_sampled, range_max, seed):
    fn, prob = SAMPLERS[kind]
    tc = np.array([[1], [range_max - 1]], np.int64)
    sc, tec, sec = run(lambda: list(fn(tc, 1, num_sampled, True, range_max, seed=seed + 1)))
    assert len(set(sc.tolist())) == num_sampled
    assert ((sc >= 0) & (sc < range_max)).all()
    p_s, p_t = prob(sc, range_max), prob(tc, range_max)
    # every count comes from one number of tries: find it from the least likely class
    # (its count is the farthest from 1), check the rest
    i = int(np.argmin(p_s))
    if sec[i] == 1:  # every class drawn after many tries: all counts round to 1
        np.testing.assert_array_equal(sec, 1)
        np.testing.assert_allclose(tec, 1, rtol=1e-4)
        return
    if np.isclose(sec[i], p_s[i] * num_sampled, rtol=1e-6):
        tries = num_sampled
    else:
        tries = int(round(np.log1p(-float(sec[i])) / np.log1p(-p_s[i])))
    assert tries >= num_sampled
    np.testing.assert_allclose(sec, expected(p_s, num_sampled, tries), rtol=1e-4)
    np.testing.assert_allclose(tec, expected(p_t, num_sampled, tries), rtol=1e-4)


def test_log_uniform_frequencies_match_the_distribution():
    tc = np.zeros((1, 1), np.int64)
    sc = run(lambda: tf.nn.log_uniform_candidate_sampler(tc, 1, 40000, False, 8,
                                                         seed=5).sampled_candidates)
    freq = np.bincount(sc, minlength=8) / len(sc)
    np.testing.assert_allclose(freq, log_uniform_p(np.arange(8), 8), atol=0.01)


def test_samplers_follow_graph_and_op_seeds():
    tc = np.array([[1]], np.int64)

    def draw(graph_seed, op_seed, runs=1):
        g = tf.Graph()
        with g.as_default():
            if graph_seed is not None:
                tf.set_random_seed(graph_seed)
            s = tf.random.uniform_candidate_sampler(tc, 1, 20, False, 1000,
                                                    seed=op_seed).sampled_candidates
        with tf.Session(graph=g) as sess:
            return [sess.run(s).tolist() for _ in range(runs)]

    assert draw(1, None) == draw(1, None)
    assert draw(None, 7) == draw(None, 7)
    assert draw(1, 2) != draw(1, 3)
    a, b = draw(4, None, runs=2)
    assert a != b  # successive runs in a session differ


def test_learned_unigram_learns_the_true_classes():
    tc = np.array([[2], [2], [5]], np.int64)
    g = tf.Graph()
    with g.as_default():
        out = tf.nn.learned_unigram_candidate_sampler(tc, 1, 4, False, 6, seed=1)
    with tf.Session(graph=g) as s:
        first = s.run(out.true_expected_count)
        second = s.run(out.true_expected_count)
        third = s.run(out.true_expected_count)
    np.testing.assert_allclose(first, np.full((3, 1), 4 / 6), rtol=1e-6)
    w = np.ones(6)
    w[2] += 2
    w[5] += 1
    np.testing.assert_allclose(second[:, 0], 4 * w[[2, 2, 5]] / w.sum(), rtol=1e-6)
    w[2] += 2
    w[5] += 1
    np.testing.assert_allclose(third[:, 0], 4 * w[[2, 2, 5]] / w.sum(), rtol=1e-6)
    with pytest.raises(ValueError, match="too large"):
        tf.nn.learned_unigram_candidate_sampler(tc, 1, 4, False, 2 ** 31)


def fixed_weights(unigrams, distortion=1.0, reserved=0, shards=1, shard=0):
    """TF's FixedUnigramSampler weights (ids counted on from the weights already held)."""
    w = [0.0 for i in range(reserved) if i % shards == shard]
    start = len(w)
    w += [u ** distortion for i, u in enumerate(unigrams) if (start + i) % shards == shard]
    return np.array(w)


@pytest.mark.parametrize("kw", [{}, {"distortion": 0.5}, {"num_reserved_ids": 2},
                                {"num_shards": 2, "shard": 1},
                                {"num_shards": 3, "shard": 0, "num_reserved_ids": 2}])
def test_fixed_unigram_weights(kw):
    uni = [3.0, 1.0, 0.5, 2.0, 4.0, 1.5]
    w = fixed_weights(uni, kw.get("distortion", 1.0), kw.get("num_reserved_ids", 0),
                      kw.get("num_shards", 1), kw.get("shard", 0))
    tc = np.arange(len(w), dtype=np.int64).reshape(-1, 1)
    sc, tec, sec = run(lambda: list(tf.nn.fixed_unigram_candidate_sampler(
        tc, 1, 3, False, len(w), unigrams=uni, seed=2, **kw)))
    np.testing.assert_allclose(tec[:, 0], 3 * w / w.sum(), rtol=1e-6)
    assert (w[sc] > 0).all()  # reserved ids are never drawn


def test_fixed_unigram_vocab_file_and_errors(tmp_path):
    path = tmp_path / "vocab.csv"
    path.write_text("the,10\nof,5\nand,1\n")
    tc = np.array([[0], [2]], np.int64)
    tec = run(lambda: tf.random.fixed_unigram_candidate_sampler(
        tc, 1, 2, False, 3, vocab_file=str(path), distortion=2.0).true_expected_count)
    w = np.array([100.0, 25.0, 1.0])
    np.testing.assert_allclose(tec[:, 0], 2 * w[[0, 2]] / w.sum(), rtol=1e-6)
    with pytest.raises(errors.InvalidArgumentError, match="range_max must be equal"):
        run(lambda: tf.nn.fixed_unigram_candidate_sampler(tc, 1, 2, False, 4,
                                                          unigrams=[1.0, 2.0, 3.0]))
    with pytest.raises(errors.InvalidArgumentError, match="vocab_file or unigrams"):
        run(lambda: tf.nn.fixed_unigram_candidate_sampler(tc, 1, 2, False, 3))
    path.write_text("a,1\nb,x\n")
    with pytest.raises(errors.InvalidArgumentError, match="Wrong vocabulary format"):
        run(lambda: tf.nn.fixed_unigram_candidate_sampler(tc, 1, 1, False, 2,
                                                          vocab_file=str(path)))
    with pytest.raises(errors.NotFoundError):
        run(lambda: tf.nn.fixed_unigram_candidate_sampler(
            tc, 1, 1, False, 2, vocab_file=str(tmp_path / "missing")))


def test_all_candidate_sampler():
    tc = np.array([[0, 4], [2, 1]], np.int64)
    sc, tec, sec = run(lambda: list(tf.random.all_candidate_sampler(tc, 2, 5, True)))
    assert sc.tolist() == [0, 1, 2, 3, 4]
    assert (tec == 1).all() and tec.shape == (2, 2) and (sec == 1).all()


def test_sampler_errors():
    with pytest.raises(ValueError, match="rank 2"):
        with tf.Graph().as_default():
            tf.nn.uniform_candidate_sampler([1, 2], 1, 2, True, 10)
    with pytest.raises(TypeError):
        with tf.Graph().as_default():
            tf.nn.uniform_candidate_sampler(tf.constant([[1]], tf.int32), 1, 2, True, 10)
    tc = np.array([[1, 2]], np.int64)
    with pytest.raises(errors.InvalidArgumentError, match="num_true columns"):
        run(lambda: tf.nn.uniform_candidate_sampler(tc, 1, 2, True, 10))
    with pytest.raises(errors.InvalidArgumentError, match="range is too small"):
        run(lambda: tf.nn.log_uniform_candidate_sampler(tc, 2, 5, True, 4))
    with pytest.raises(errors.InvalidArgumentError, match="out of range"):
        run(lambda: tf.nn.uniform_candidate_sampler(tc, 2, 1, True, 2))


def accidental_hits_ref(tc, sc):
    pos = {v: i for i, v in enumerate(sc)}
    out = [(i, pos[v]) for i, row in enumerate(tc) for v in row if v in pos]
    return [o[0] for o in out], [o[1] for o in out]


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 6), st.integers(0, 10 ** 6))
def test_compute_accidental_hits(batch, num_true, n, seed):
    r = np.random.default_rng(seed)
    tc = r.integers(0, 6, (batch, num_true)).astype(np.int64)
    sc = r.integers(0, 6, n).astype(np.int64)
    ind, ids, w = run(lambda: list(tf.nn.compute_accidental_hits(tc, sc, num_true)))
    ref_i, ref_j = accidental_hits_ref(tc.tolist(), sc.tolist())
    assert ind.tolist() == ref_i and ids.tolist() == ref_j
    assert ind.dtype == np.int32 and ids.dtype == np.int64 and w.dtype == np.float32
    assert (w == -np.finfo(np.float32).max).all()


# =======================================================================================
# nce_loss, sampled_softmax_loss
# =======================================================================================
def sampled_logits_ref(w, b, labels, x, sampled, tec, sec, remove_hits):
    true_logits = np.einsum("bd,btd->bt", x, w[labels]) + b[labels] - np.log(tec)
    samp_logits = x @ w[sampled].T + b[sampled] - np.log(sec)
    if remove_hits:
        for i, j in zip(*accidental_hits_ref(labels.tolist(), sampled.tolist())):
            samp_logits[i, j] += -np.finfo(np.float32).max
    nt = labels.shape[1]
    logits = np.concatenate([true_logits, samp_logits], 1)
    lab = np.concatenate([np.full(true_logits.shape, 1.0 / nt),
                          np.zeros(samp_logits.shape)], 1)
    return logits, lab


def nce_ref(*args):
    logits, lab = sampled_logits_ref(*args)
    return (np.maximum(logits, 0) - logits * lab + np.log1p(np.exp(-np.abs(logits)))).sum(1)


def softmax_ref(*args):
    logits, lab = sampled_logits_ref(*args)
    m = logits.max(1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(logits - m).sum(1))
    return -(lab * logits).sum(1) + lse * lab.sum(1)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["nce", "softmax"]), st.integers(1, 3), st.integers(1, 2),
       st.booleans(), st.integers(1, 3), st.integers(0, 10 ** 6))
def test_sampled_losses_against_numpy(loss, batch, num_true, remove_hits, parts, seed):
    r = np.random.default_rng(seed)
    nc, dim, ns = 7, 3, 4
    w = r.normal(size=(nc, dim))
    b = r.normal(size=nc)
    x = r.normal(size=(batch, dim))
    labels = r.integers(0, nc, (batch, num_true)).astype(np.int64)
    sampled = r.permutation(nc)[:ns].astype(np.int64)
    tec = r.uniform(0.1, 1, (batch, num_true))
    sec = r.uniform(0.1, 1, ns)
    fn = tf.nn.nce_loss if loss == "nce" else tf.nn.sampled_softmax_loss
    ws = [w[i::parts] for i in range(parts)]
    got = run(lambda: fn([tf.constant(p) for p in ws], tf.constant(b), labels, tf.constant(x),
                         ns, nc, num_true=num_true, sampled_values=(sampled, tec, sec),
                         remove_accidental_hits=remove_hits))
    ref = (nce_ref if loss == "nce" else softmax_ref)(
        w, b, labels, x, sampled, tec, sec, remove_hits)
    assert got.shape == (batch,)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("loss", ["nce", "softmax"])
def test_sampled_loss_gradients(loss):
    w = RNG.normal(size=(6, 3))
    b = RNG.normal(size=6)
    x = RNG.normal(size=(2, 3))
    labels = np.array([[1, 4], [0, 0]], np.int64)
    sv = (np.array([2, 4, 5], np.int64), np.array([[0.3, 0.5], [0.2, 0.2]]),
          np.array([0.4, 0.5, 0.6]))
    fn = tf.nn.nce_loss if loss == "nce" else tf.nn.sampled_softmax_loss
    err = grad_error(lambda wp, bp, xp: fn(wp, bp, labels, xp, 3, 6, num_true=2,
                                           sampled_values=sv), w, b, x)
    assert err < 1e-6


def test_sampled_softmax_with_every_class_is_the_full_softmax():
    w = RNG.normal(size=(5, 3)).astype(np.float32)
    b = RNG.normal(size=5).astype(np.float32)
    x = RNG.normal(size=(4, 3)).astype(np.float32)
    labels = np.array([[0], [3], [4], [1]], np.int64)

    def build():
        sv = tf.nn.all_candidate_sampler(labels, 1, 5, True)
        sampled = tf.nn.sampled_softmax_loss(tf.constant(w), tf.constant(b), labels,
                                             tf.constant(x), 5, 5, sampled_values=sv)
        full = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels[:, 0], logits=tf.matmul(tf.constant(x), tf.constant(w),
                                                  transpose_b=True) + b)
        return sampled, full

    sampled, full = run(build)
    np.testing.assert_allclose(sampled, full, rtol=1e-5)


def test_sampled_loss_trains_variables_with_sparse_gradients():
    g = tf.Graph()
    with g.as_default():
        w = tf.get_variable("w", initializer=RNG.normal(size=(8, 3)).astype(np.float32))
        b = tf.get_variable("b", initializer=np.zeros(8, np.float32))
        x = tf.constant(RNG.normal(size=(4, 3)).astype(np.float32))
        labels = np.array([[1], [2], [3], [1]], np.int64)
        loss = tf.reduce_mean(tf.nn.nce_loss(w, b, labels, x, num_sampled=3, num_classes=8))
        grads = tf.gradients(loss, [w])
        assert type(grads[0]).__name__ == "IndexedSlices"
        step = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    with tf.Session(graph=g) as s:
        s.run(tf.global_variables_initializer())
        before = s.run(loss)
        for _ in range(30):
            s.run(step)
        assert s.run(loss) < before


# =======================================================================================
# embedding_lookup_sparse, safe_embedding_lookup_sparse, log_poisson_loss
# =======================================================================================
def els_ref(w, rows, ids, weights, combiner, nrows):
    out = np.zeros((nrows, w.shape[1]))
    for r in range(nrows):
        sel = [i for i, rr in enumerate(rows) if rr == r]
        if not sel:
            continue
        ww = np.array([weights[i] for i in sel])
        e = (w[[ids[i] for i in sel]] * ww[:, None]).sum(0)
        if combiner == "mean":
            e /= ww.sum()
        elif combiner == "sqrtn":
            e /= np.sqrt((ww ** 2).sum())
        out[r] = e
    return out


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["sum", "mean", "sqrtn"]), st.booleans(), st.integers(1, 3),
       st.sampled_from(["mod", "div"]), st.integers(0, 10 ** 6))
def test_embedding_lookup_sparse_against_numpy(combiner, weighted, parts, strategy, seed):
    r = np.random.default_rng(seed)
    w = r.normal(size=(7, 2))
    nrows = 3
    ind = sorted({(int(a), int(c)) for a, c in zip(r.integers(0, nrows, 6),
                                                 r.integers(0, 3, 6))})
    ind = sorted([list(p) for p in ind] + [[r_, 3] for r_ in range(nrows)])  # no empty row
    ids = r.integers(0, 7, len(ind)).astype(np.int64)
    wts = r.uniform(0.5, 2, len(ind)) if weighted else np.ones(len(ind))
    if strategy == "mod":
        ws = [w[i::parts] for i in range(parts)]
    else:
        ws = np.array_split(w, parts)

    def build():
        sp = tf.SparseTensor(ind, ids, [nrows, 4])
        sw = tf.SparseTensor(ind, wts, [nrows, 4]) if weighted else None
        return tf.nn.embedding_lookup_sparse([tf.constant(p) for p in ws], sp, sw,
                                             partition_strategy=strategy, combiner=combiner)

    got = run(build)
    rows = [i[0] for i in ind]
    np.testing.assert_allclose(got, els_ref(w, rows, ids, wts, combiner, nrows), rtol=1e-9)


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
@pytest.mark.parametrize("weighted", [False, True])
def test_embedding_lookup_sparse_gradients(combiner, weighted):
    ind = [[0, 0], [0, 1], [1, 0], [2, 0], [2, 1]]
    ids = np.array([1, 3, 3, 0, 1], np.int64)
    wts = np.array([1.0, 2.0, 0.5, 1.5, 3.0])

    def build(w, v):
        sw = tf.SparseTensor(ind, v, [3, 2]) if weighted else None
        out = tf.nn.embedding_lookup_sparse(w, tf.SparseTensor(ind, ids, [3, 2]), sw,
                                            combiner=combiner)
        return out * out

    assert grad_error(build, RNG.normal(size=(4, 3)), wts) < 1e-6


def test_embedding_lookup_sparse_tf115_details():
    w = RNG.normal(size=(4, 2))
    ind = [[0, 0], [2, 0]]

    def ids():
        return tf.SparseTensor(ind, np.array([1, 2], np.int64), [3, 2])

    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="combiner"):
            tf.nn.embedding_lookup_sparse(w, ids(), None, combiner="max")
        with pytest.raises(TypeError, match="sp_ids"):
            tf.nn.embedding_lookup_sparse(w, np.array([1]), None)
        with pytest.raises(TypeError, match="sp_weights"):
            tf.nn.embedding_lookup_sparse(w, ids(), np.array([1.0]))
    # TF 1.15 divides by the weight sum: a row without ids is nan under "mean"
    got = run(lambda: tf.nn.embedding_lookup_sparse(
        tf.constant(w), ids(), tf.SparseTensor(ind, np.array([1.0, 2.0]), [3, 2])))
    np.testing.assert_allclose(got[[0, 2]], w[[1, 2]])
    assert np.isnan(got[1]).all()
    got = run(lambda: tf.nn.embedding_lookup_sparse(tf.constant(w), ids(), None))
    assert (got[1] == 0).all()  # unweighted mean of nothing is 0


def test_safe_embedding_lookup_sparse():
    w = RNG.normal(size=(6, 2))
    ind = [[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 1, 0], [1, 1, 1]]
    ids = np.array([1, -1, 4, 2, 5], np.int64)
    wts = np.array([2.0, 1.0, 0.0, 1.0, 3.0])

    def build(default_id=None, combiner="mean"):
        return tf.nn.safe_embedding_lookup_sparse(
            [tf.constant(p) for p in np.array_split(w, 2)], tf.SparseTensor(ind, ids, [2, 2, 2]),
            tf.SparseTensor(ind, wts, [2, 2, 2]), combiner=combiner, default_id=default_id)

    out = run(build)
    assert out.shape == (2, 2, 2)
    np.testing.assert_allclose(out[0, 0], w[1])  # -1 dropped
    np.testing.assert_allclose(out[0, 1], 0)     # zero weight dropped, row empty -> 0
    np.testing.assert_allclose(out[1, 0], 0)     # empty row -> 0
    np.testing.assert_allclose(out[1, 1], (w[2] + 3 * w[5]) / 4)
    out = run(lambda: build(default_id=3))
    np.testing.assert_allclose(out[0, 1], w[3])
    np.testing.assert_allclose(out[1, 0], w[3])
    out = run(lambda: build(combiner="sum"))    # "sum" keeps zero weights
    np.testing.assert_allclose(out[0, 1], 0 * w[4])
    with tf.Graph().as_default():
        g = build()
        assert g.shape.ndims == 3 and g.shape.as_list()[-1] == 2
        with pytest.raises(ValueError, match="Missing embedding_weights"):
            tf.nn.safe_embedding_lookup_sparse([], tf.SparseTensor(ind, ids, [2, 2, 2]))


def test_log_poisson_loss():
    t = np.array([[0.0, 0.5, 1.0], [2.0, 3.0, 7.5]])
    x = RNG.normal(size=(2, 3))
    got = run(lambda: tf.nn.log_poisson_loss(t, x))
    np.testing.assert_allclose(got, np.exp(x) - x * t)
    full = run(lambda: tf.nn.log_poisson_loss(t, x, compute_full_loss=True))
    st_ = t * np.log(np.where(t > 0, t, 1)) - t + 0.5 * np.log(2 * math.pi * np.where(
        t > 0, t, 1))
    np.testing.assert_allclose(full, np.exp(x) - x * t + np.where(t <= 1, 0, st_))
    assert grad_error(lambda v: tf.nn.log_poisson_loss(t, v, compute_full_loss=True), x) < 1e-6
    with pytest.raises(ValueError, match="same shape"):
        with tf.Graph().as_default():
            tf.nn.log_poisson_loss(t, x[:, :2])


# =======================================================================================
# CTC loss
# =======================================================================================
def log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def ctc_brute(x, label, merge=True, collapse=False):
    """-log p(label | x) summed over every path of ``x`` ``[T, C]`` (blank = C - 1):
    blanks removed, and with ``merge`` runs of a label merged (TF's rule without merging:
    each label frame emits one label)."""
    if collapse:
        label = [v for i, v in enumerate(label) if i == 0 or v != label[i - 1]]
    nt, nc = x.shape
    blank = nc - 1
    ls = log_softmax(x)
    total = -np.inf
    for path in itertools.product(range(nc), repeat=nt):
        out, prev = [], None
        for c in path:
            if c != blank and not (merge and c == prev):
                out.append(c)
            prev = c
        if out == list(label):
            total = np.logaddexp(total, ls[np.arange(nt), path].sum())
    return -total


def ctc_inputs(labels):
    ind = [[b, i] for b, lab in enumerate(labels) for i in range(len(lab))]
    vals = np.array([v for lab in labels for v in lab], np.int32)
    width = max(len(lab) for lab in labels)
    return ind, vals, [len(labels), width]


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 4), st.integers(2, 4), st.integers(1, 3), st.booleans(), st.booleans(),
       st.integers(0, 10 ** 6))
def test_ctc_loss_against_brute_force(nt, nc, batch, merge, collapse, seed):
    r = np.random.default_rng(seed)
    x = r.normal(size=(nt, batch, nc))
    seq = r.integers(1, nt + 1, batch)
    labels = [r.integers(0, nc - 1, r.integers(1, seq[b] + 1)).tolist() for b in range(batch)]
    ind, vals, shape = ctc_inputs(labels)
    loss = run(lambda: tf.nn.ctc_loss(tf.SparseTensor(ind, vals, shape), tf.constant(x), seq,
                                      preprocess_collapse_repeated=collapse,
                                      ctc_merge_repeated=merge))
    ref = [ctc_brute(x[:seq[b], b], labels[b], merge, collapse) for b in range(batch)]
    np.testing.assert_allclose(loss, ref, rtol=1e-9)


@pytest.mark.parametrize("merge", [True, False])
def test_ctc_loss_gradient_and_op(merge):
    x = RNG.normal(size=(5, 2, 4))
    ind, vals, shape = ctc_inputs([[0, 1, 1], [2]])
    with tf.Graph().as_default():
        loss = tf.nn.ctc_loss(tf.SparseTensor(ind, vals, shape), tf.constant(x), [5, 3])
        assert loss.op.type == "CTCLoss" and loss.shape.as_list() == [2]
        assert loss.dtype == tf.float64
        assert loss.op.outputs[1].shape.as_list() == [5, 2, 4]
    err = grad_error(lambda v: tf.nn.ctc_loss(tf.SparseTensor(ind, vals, shape), v, [5, 3],
                                              ctc_merge_repeated=merge), x)
    assert err < 1e-6

    def build():
        c = tf.constant(x)
        lo = tf.nn.ctc_loss(tf.SparseTensor(ind, vals, shape), c, [5, 3])
        return tf.gradients(tf.reduce_sum(lo), c)[0]

    grad = run(build)
    assert (grad[3:, 1] == 0).all()  # nothing past the sequence length
    np.testing.assert_allclose(grad.sum(-1)[:, 0], 0, atol=1e-12)  # softmax - posterior


def test_ctc_loss_batch_major_float32_and_float16():
    x = RNG.normal(size=(4, 2, 3)).astype(np.float32)
    ind, vals, shape = ctc_inputs([[0], [1, 0]])
    ref = run(lambda: tf.nn.ctc_loss(tf.SparseTensor(ind, vals, shape), x, [4, 4]))
    bm = run(lambda: tf.nn.ctc_loss(tf.SparseTensor(ind, vals, shape), x.transpose(1, 0, 2),
                                    [4, 4], time_major=False))
    np.testing.assert_allclose(bm, ref, rtol=1e-6)
    half = run(lambda: tf.nn.ctc_loss(tf.SparseTensor(ind, vals, shape),
                                      x.astype(np.float16), [4, 4]))
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, ref, rtol=2e-2)
    np.testing.assert_allclose(ref, [ctc_brute(x[:, 0].astype(np.float64), [0]),
                                     ctc_brute(x[:, 1].astype(np.float64), [1, 0])],
                               rtol=1e-5)


def test_ctc_loss_edge_cases_and_errors():
    x = RNG.normal(size=(3, 2, 3))
    ind, vals, shape = ctc_inputs([[0, 1, 0, 1], [1]])

    def loss(seq, **kw):
        return lambda: tf.nn.ctc_loss(tf.SparseTensor(ind, vals, shape), tf.constant(x), seq,
                                      **kw)

    with pytest.raises(errors.InvalidArgumentError, match="Not enough time") as e:
        run(loss([3, 3]))
    assert "CTCLoss" in str(e.value)
    got, grad = run(lambda: (lambda lo: [lo, tf.gradients(tf.reduce_sum(lo), lo.op.inputs[0])[
        0]])(loss([3, 3], ignore_longer_outputs_than_inputs=True)()))
    assert got[0] == 0 and (grad[:, 0] == 0).all()
    np.testing.assert_allclose(got[1], ctc_brute(x[:, 1], [1]))
    # a sequence of length zero: loss 0
    assert run(loss([3, 0], ignore_longer_outputs_than_inputs=True))[1] == 0
    # repeated labels need a blank between: no valid path in 2 steps -> inf, gradient y
    ind2, vals2, shape2 = ctc_inputs([[1, 1], [0]])
    lo, gr = run(lambda: (lambda c: (lambda lo: [lo, tf.gradients(tf.reduce_sum(lo), c)[0]])(
        tf.nn.ctc_loss(tf.SparseTensor(ind2, vals2, shape2), c, [2, 2])))(tf.constant(x[:2])))
    assert np.isinf(lo[0])
    np.testing.assert_allclose(gr[:, 0], np.exp(log_softmax(x[:2, 0])))
    with pytest.raises(errors.InvalidArgumentError, match="sequence_length"):
        run(loss([4, 3]))
    bad = ctc_inputs([[0, -1], [1]])
    with pytest.raises(errors.InvalidArgumentError, match="nonnegative"):
        run(lambda: tf.nn.ctc_loss(tf.SparseTensor(*bad), x, [3, 3]))
    bad = ctc_inputs([[0, 2, 1], [1]])  # a label after the blank
    with pytest.raises(errors.InvalidArgumentError, match="non-null label"):
        run(lambda: tf.nn.ctc_loss(tf.SparseTensor(*bad), x, [3, 3]))
    with pytest.raises(errors.InvalidArgumentError, match="Labels length is zero"):
        run(lambda: tf.nn.ctc_loss(tf.SparseTensor([[1, 0]], np.array([0], np.int32),
                                                   [2, 1]), x, [3, 3]))
    with pytest.raises(errors.InvalidArgumentError, match="out of order"):
        run(lambda: tf.nn.ctc_loss(tf.SparseTensor([[0, 1], [0, 0], [1, 0]],
                                                   np.array([0, 1, 1], np.int32), [2, 2]),
                                   x, [3, 3]))
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="SparseTensor"):
            tf.nn.ctc_loss(np.array([[0]]), x, [3, 3])
        with pytest.raises(ValueError, match="rank 3"):
            tf.nn.ctc_loss(tf.SparseTensor(ind, vals, shape), x[0], [3, 3])
        with pytest.raises(ValueError, match="Dimensions must be equal"):
            tf.nn.ctc_loss(tf.SparseTensor(ind, vals, shape), x, [3, 3, 3])


def test_ctc_loss_has_no_second_derivative():
    x = RNG.normal(size=(3, 1, 3))
    ind, vals, shape = ctc_inputs([[0]])
    with tf.Graph().as_default():
        c = tf.constant(x)
        g = tf.gradients(tf.reduce_sum(tf.nn.ctc_loss(tf.SparseTensor(ind, vals, shape), c,
                                                      [3])), c)[0]
        with pytest.raises(LookupError, match="second  derivative"):
            tf.gradients(tf.reduce_sum(g), c)


@pytest.mark.parametrize("blank_index", [None, 0, 2, -1])
def test_ctc_loss_v2_dense_and_sparse(blank_index):
    x = RNG.normal(size=(4, 2, 4))
    b = 0 if blank_index is None else blank_index % 4
    labels = [[1, 3], [3]] if b == 0 else [[0, 1], [3]] if b == 2 else [[0, 2], [1]]
    dense = np.array([lab + [0] * (2 - len(lab)) for lab in labels], np.int32)
    perm = [c for c in range(4) if c != b] + [b]
    moved = [[perm.index(v) for v in lab] for lab in labels]
    ref = [ctc_brute(x[:, i, perm], moved[i]) for i in range(2)]
    got = run(lambda: tf.nn.ctc_loss_v2(dense, tf.constant(x), [2, 1], [4, 3],
                                        blank_index=blank_index))
    ref[1] = ctc_brute(x[:3, 1, perm], moved[1])
    np.testing.assert_allclose(got, ref, rtol=1e-9)
    got_bm = run(lambda: tf.nn.ctc_loss_v2(dense, tf.constant(x.transpose(1, 0, 2)), [2, 1],
                                           [4, 3], logits_time_major=False,
                                           blank_index=blank_index))
    np.testing.assert_allclose(got_bm, ref, rtol=1e-9)
    if blank_index is not None:
        ind, vals, shape = ctc_inputs(labels)
        sp = run(lambda: tf.nn.ctc_loss_v2(tf.SparseTensor(ind, vals, shape), tf.constant(x),
                                           None, [4, 3], blank_index=blank_index))
        np.testing.assert_allclose(sp, ref, rtol=1e-9)
    assert grad_error(lambda v: tf.nn.ctc_loss_v2(dense, v, [2, 1], [4, 3],
                                                  blank_index=blank_index), x) < 1e-6


def test_ctc_loss_v2_sparse_needs_blank_index():
    ind, vals, shape = ctc_inputs([[0]])
    with tf.Graph().as_default(), pytest.raises(ValueError, match="blank_index"):
        tf.nn.ctc_loss_v2(tf.SparseTensor(ind, vals, shape), np.zeros((2, 1, 3)), None, [2])


# =======================================================================================
# decoders and label helpers
# =======================================================================================
def greedy_ref(x, seq, merge, blank):
    paths, logp = [], []
    for b in range(x.shape[1]):
        best = x[:seq[b], b].argmax(1)
        out, prev = [], -1
        for c in best:
            if c != blank and not (merge and c == prev):
                out.append(int(c))
            prev = c
        paths.append(out)
        logp.append(-x[np.arange(seq[b]), b, best].sum())
    return paths, np.array(logp)[:, None]


def dense_paths(ind, vals, batch):
    out = [[] for _ in range(batch)]
    for (b, _), v in zip(ind.tolist(), vals.tolist()):
        out[b].append(v)
    return out


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 5), st.integers(1, 3), st.integers(2, 4), st.booleans(),
       st.integers(0, 10 ** 6))
def test_ctc_greedy_decoder(nt, batch, nc, merge, seed):
    r = np.random.default_rng(seed)
    x = r.integers(0, 3, (nt, batch, nc)).astype(np.float32) + r.normal(size=(nt, batch, nc)
                                                                        ).astype(np.float32)
    seq = r.integers(0, nt + 1, batch).astype(np.int32)
    (sp,), logp = run(lambda: tf.nn.ctc_greedy_decoder(x, seq, merge_repeated=merge))
    ref_paths, ref_logp = greedy_ref(x, seq, merge, nc - 1)
    assert dense_paths(sp.indices, sp.values, batch) == ref_paths
    assert sp.dense_shape.tolist() == [batch, max(len(p) for p in ref_paths)]
    assert sp.values.dtype == np.int64 and sp.indices.dtype == np.int64
    np.testing.assert_allclose(logp, ref_logp, rtol=1e-5, atol=1e-5)
    (sp0,), _ = run(lambda: tf.nn.ctc_greedy_decoder(x, seq, blank_index=0))
    assert dense_paths(sp0.indices, sp0.values, batch) == greedy_ref(x, seq, True, 0)[0]


def sequence_log_probs(x):
    """log p(label sequence | x) of every label sequence (brute force over paths)."""
    nt, nc = x.shape
    blank = nc - 1
    ls = log_softmax(x)
    out: dict[tuple, float] = {}
    for path in itertools.product(range(nc), repeat=nt):
        seq, prev = [], None
        for c in path:
            if c != blank and c != prev:
                seq.append(c)
            prev = c
        key = tuple(seq)
        out[key] = np.logaddexp(out.get(key, -np.inf), ls[np.arange(nt), path].sum())
    return out


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 4), st.integers(2, 3), st.integers(1, 3), st.integers(0, 10 ** 6))
def test_ctc_beam_search_with_a_wide_beam_is_exact(nt, nc, top, seed):
    """With a beam wider than the number of prefixes nothing is pruned: the top paths are
    the most probable label sequences, with their exact log probabilities."""
    r = np.random.default_rng(seed)
    x = r.normal(size=(nt, 1, nc)) * 2
    probs = sequence_log_probs(x[:, 0])
    ranked = sorted(probs.items(), key=lambda kv: -kv[1])
    top = min(top, len(ranked))
    sps, logp = run(lambda: tf.nn.ctc_beam_search_decoder_v2(x, [nt], beam_width=64,
                                                             top_paths=top))
    assert len(sps) == top and logp.shape == (1, top)
    for i in range(top):
        assert tuple(sps[i].values.tolist()) in {k for k, v in ranked
                                                 if abs(v - ranked[i][1]) < 1e-9}
        np.testing.assert_allclose(logp[0, i], ranked[i][1], rtol=1e-6)
        np.testing.assert_allclose(probs[tuple(sps[i].values.tolist())], ranked[i][1],
                                   rtol=1e-6)


def test_ctc_beam_search_merge_repeated_and_errors():
    x = np.log(np.array([[[0.1, 0.6, 0.3]], [[0.6, 0.1, 0.3]], [[0.1, 0.1, 0.8]],
                         [[0.6, 0.3, 0.1]]]))
    (sp,), _ = run(lambda: tf.nn.ctc_beam_search_decoder(x, [4], beam_width=10,
                                                         merge_repeated=False))
    (spm,), logp = run(lambda: tf.nn.ctc_beam_search_decoder(x, [4], beam_width=10))
    probs = sequence_log_probs(x[:, 0])
    best = max(probs, key=probs.get)
    assert tuple(sp.values.tolist()) == best
    merged = [v for i, v in enumerate(best) if i == 0 or v != best[i - 1]]
    assert spm.values.tolist() == merged
    np.testing.assert_allclose(logp[0, 0], probs[best], rtol=1e-6)
    # adding a constant to the logits of a step does not change the log probabilities
    (_, ), logp2 = run(lambda: tf.nn.ctc_beam_search_decoder(x + 3.0, [4], beam_width=10))
    np.testing.assert_allclose(logp2, logp, rtol=1e-6)
    with pytest.raises(errors.InvalidArgumentError, match="more paths than the beam"):
        run(lambda: tf.nn.ctc_beam_search_decoder(x, [4], beam_width=2, top_paths=3))
    with pytest.raises(errors.InvalidArgumentError, match="Less leaves"):
        run(lambda: tf.nn.ctc_beam_search_decoder(x, [0], beam_width=3, top_paths=2))
    with pytest.raises(errors.FailedPreconditionError, match="sequence_length"):
        run(lambda: tf.nn.ctc_beam_search_decoder(x, [5], beam_width=3))
    with tf.Graph().as_default():
        sps, lp = tf.nn.ctc_beam_search_decoder(tf.placeholder(tf.float32, [None, 3, 5]),
                                                tf.placeholder(tf.int32, [3]), top_paths=2)
        assert lp.shape.as_list() == [3, 2] and len(sps) == 2
        assert sps[0].indices.shape.as_list() == [None, 2]
        assert lp.op.type == "CTCBeamSearchDecoder"


def collapse_ref(labels, lengths):
    rows = []
    for lab, n in zip(labels, lengths):
        lab = list(lab[:n])
        rows.append([v for i, v in enumerate(lab) if i == 0 or v != lab[i - 1]])
    width = max(len(r) for r in rows)
    return np.array([r + [0] * (width - len(r)) for r in rows]), [len(r) for r in rows]


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 3), st.integers(1, 5), st.integers(0, 10 ** 6))
def test_collapse_repeated_and_unique_labels(batch, width, seed):
    r = np.random.default_rng(seed)
    labels = r.integers(1, 4, (batch, width)).astype(np.int32)
    lengths = r.integers(1, width + 1, batch).astype(np.int32)
    got, got_len = run(lambda: tf.nn.collapse_repeated(labels, lengths))
    ref, ref_len = collapse_ref(labels, lengths)
    np.testing.assert_array_equal(got, ref)
    assert got_len.tolist() == ref_len and got_len.dtype == np.int32
    y, idx = run(lambda: tf.nn.ctc_unique_labels(labels))
    assert y.dtype == np.int64 and idx.dtype == np.int32
    for b in range(batch):
        uniq = list(dict.fromkeys(labels[b].tolist()))
        assert y[b].tolist() == uniq + [0] * (width - len(uniq))
        assert idx[b].tolist() == [uniq.index(v) for v in labels[b].tolist()]


_GPU_TYPE = cuda_dev.gpu_device_type()
GPU = pytest.mark.skipif(not _GPU_TYPE.discover(None, "localhost", 0),
                         reason=f"no GPU here: {_GPU_TYPE.unavailable_reason}")


@GPU
def test_ctc_and_samplers_in_a_gpu_graph():
    """The kernels are CPU kernels: a graph placed on the GPU runs them on the host."""
    x = RNG.normal(size=(3, 1, 3)).astype(np.float32)
    ind, vals, shape = ctc_inputs([[0]])
    g = tf.Graph()
    with g.as_default(), tf.device("/device:GPU:0"):
        c = tf.constant(x)
        lo = tf.nn.ctc_loss(tf.SparseTensor(ind, vals, shape), c * 1.0, [3])
        gr = tf.gradients(tf.reduce_sum(lo), c)[0]
    with tf.Session(graph=g, config=tf.ConfigProto(allow_soft_placement=True)) as s:
        got, _ = s.run([lo, gr])
    np.testing.assert_allclose(got, [ctc_brute(x[:, 0].astype(np.float64), [0])], rtol=1e-5)
