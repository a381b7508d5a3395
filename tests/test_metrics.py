"""tf.metrics and tf.confusion_matrix (core/modeling/metrics.py): every metric streamed
over several update batches against numpy references (AUC against a numpy version of
TF's thresholded algorithm, the top-k metrics against Python sets), weights, the local
variables and collections each metric makes, and the errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors
from flowrt.modeling.metrics import confusion_matrix

RNG = np.random.default_rng(17)
EPS = np.float32(1e-7)


def stream(build, batches, dtypes=None):
    """Build the metric on placeholders, run update_op once per batch; returns the
    update results, the final value and the metric's local variable names."""
    with tf.Graph().as_default():
        first = batches[0]
        phs = [tf.placeholder(tf.as_dtype(np.asarray(a).dtype),
                              [None] + list(np.shape(a)[1:])) for a in first]
        value, update = build(*phs)
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            ups = [s.run(update, dict(zip(phs, b))) for b in batches]
            final = s.run(value)
        names = [v.name for v in tf.local_variables()]
        assert [v.name for v in tf.get_collection(tf.GraphKeys.METRIC_VARIABLES)] == names
        assert tf.global_variables() == [] and tf.trainable_variables() == []
    return ups, final, names


def batches_of(*arrays, n=3):
    return [tuple(a[i::n] for a in arrays) for i in range(n)]


# -- means --------------------------------------------------------------------------------
def test_accuracy_streams_over_batches():
    labels = RNG.integers(0, 3, 12)
    preds = RNG.integers(0, 3, 12)
    ups, final, names = stream(tf.metrics.accuracy, batches_of(labels, preds))
    assert names == ["accuracy/total:0", "accuracy/count:0"]
    seen = [np.concatenate([labels[i::3] for i in range(k + 1)]) == np.concatenate(
        [preds[i::3] for i in range(k + 1)]) for k in range(3)]
    np.testing.assert_allclose(ups, [s.mean() for s in seen], rtol=1e-6)
    np.testing.assert_allclose(final, (labels == preds).mean(), rtol=1e-6)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.booleans())
def test_weighted_accuracy_property(sizes, weighted):
    rng = np.random.default_rng(sum(sizes) * 7 + len(sizes))
    n = sum(sizes)
    labels, preds = rng.integers(0, 2, n), rng.integers(0, 2, n)
    w = rng.choice([0.0, 1.0, 3.0], n).astype(np.float32)
    cuts = np.cumsum(sizes)[:-1]
    parts = list(zip(np.split(labels, cuts), np.split(preds, cuts), np.split(w, cuts)))
    build = (lambda l, p, ww: tf.metrics.accuracy(l, p, ww)) if weighted else \
        (lambda l, p: tf.metrics.accuracy(l, p))
    _, final, _ = stream(build, parts if weighted else [p[:2] for p in parts])
    ww = w if weighted else np.ones(n)
    expect = (ww * (labels == preds)).sum() / ww.sum() if ww.sum() else 0.0
    np.testing.assert_allclose(final, expect, rtol=1e-5)


def test_mean_family():
    x = RNG.normal(size=(9, 3)).astype(np.float32)
    y = RNG.normal(size=(9, 3)).astype(np.float32)
    w = RNG.choice([0.0, 1.0, 2.0], (9, 1)).astype(np.float32)
    norm = np.abs(y) * (np.abs(y) > 0.3)
    wb = np.broadcast_to(w, x.shape)
    cases = {
        "mean": (lambda a, b, c: tf.metrics.mean(a, c), (wb * x).sum() / wb.sum()),
        "mean_absolute_error": (lambda a, b, c: tf.metrics.mean_absolute_error(a, b, c),
                                (wb * np.abs(x - y)).sum() / wb.sum()),
        "mean_squared_error": (lambda a, b, c: tf.metrics.mean_squared_error(a, b, c),
                               (wb * (x - y) ** 2).sum() / wb.sum()),
        "root_mean_squared_error": (
            lambda a, b, c: tf.metrics.root_mean_squared_error(a, b, c),
            np.sqrt((wb * (x - y) ** 2).sum() / wb.sum())),
        "mean_relative_error": (
            lambda a, b, c: tf.metrics.mean_relative_error(a, b, tf.abs(b) * tf.cast(
                tf.abs(b) > 0.3, tf.float32), c),
            (wb * np.where(norm == 0, 0, np.abs(x - y) / np.where(norm == 0, 1, norm))
             ).sum() / wb.sum()),
        "percentage_below": (lambda a, b, c: tf.metrics.percentage_below(a, 0.2, c),
                             (wb * (x < 0.2)).sum() / wb.sum()),
    }
    for name, (build, expect) in cases.items():
        _, final, names = stream(build, batches_of(x, y, w))
        np.testing.assert_allclose(final, expect, rtol=1e-5, err_msg=name)
        scope = "percentage_below_threshold" if name == "percentage_below" else name
        assert names == [f"{scope}/total:0", f"{scope}/count:0"], names


def test_mean_tensor_and_cosine_distance():
    x = RNG.normal(size=(6, 2, 3)).astype(np.float32)
    w = RNG.choice([0.0, 1.0, 2.0], (6, 2, 3)).astype(np.float32)

    def build(a, c):
        return tf.metrics.mean_tensor(tf.reshape(a, [2, 3]), tf.reshape(c, [2, 3]))

    _, final, names = stream(build, [(x[i], w[i]) for i in range(6)])
    assert names == ["mean/total_tensor:0", "mean/count_tensor:0"]
    tot, cnt = (x * w).sum(0), w.sum(0)
    np.testing.assert_allclose(final, np.where(cnt > 0, tot / np.maximum(cnt, 1e-30), 0),
                               rtol=1e-5)
    a = RNG.normal(size=(8, 3))
    b = RNG.normal(size=(8, 3))
    a = (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)
    b = (b / np.linalg.norm(b, axis=1, keepdims=True)).astype(np.float32)
    _, final, names = stream(lambda p, q: tf.metrics.mean_cosine_distance(p, q, dim=1),
                             batches_of(a, b, n=2))
    assert names[0] == "mean_cosine_distance/total:0"
    np.testing.assert_allclose(final, 1 - (a * b).sum(1).mean(), rtol=1e-5)


# -- per-class ----------------------------------------------------------------------------
def cm_ref(labels, preds, n, w=None):
    m = np.zeros((n, n))
    for i, (l, p) in enumerate(zip(labels, preds)):
        m[l, p] += 1 if w is None else w[i]
    return m


def test_mean_iou_and_per_class_accuracy():
    labels = RNG.integers(0, 4, 15)
    preds = RNG.integers(0, 4, 15)
    w = RNG.choice([0.0, 1.0, 2.0], 15).astype(np.float32)
    m = cm_ref(labels, preds, 5, w)
    den = m.sum(0) + m.sum(1) - np.diag(m)
    iou = np.diag(m)[den > 0] / den[den > 0]
    ups, final, names = stream(lambda l, p, ww: tf.metrics.mean_iou(l, p, 5, ww),
                               batches_of(labels, preds, w))
    assert names == ["mean_iou/total_confusion_matrix:0"]
    np.testing.assert_allclose(final, iou.mean(), rtol=1e-5)
    np.testing.assert_allclose(ups[-1], m)  # the update op returns the matrix, as TF
    ups, final, names = stream(
        lambda l, p, ww: tf.metrics.mean_per_class_accuracy(l, p, 5, ww),
        batches_of(labels, preds, w))
    assert names == ["mean_accuracy/total:0", "mean_accuracy/count:0"]
    per_class = np.array([np.diag(m)[c] / m[c].sum() if m[c].sum() else 0.0
                          for c in range(5)])
    np.testing.assert_allclose(final, per_class.mean(), rtol=1e-5)
    np.testing.assert_allclose(ups[-1], per_class, rtol=1e-5)


def test_confusion_matrix():
    lab = np.array([0, 1, 2, 1, 3, 0])
    pred = np.array([0, 2, 2, 1, 1, 0])
    w = np.arange(6.0)
    with tf.Graph().as_default():
        outs = [confusion_matrix(lab, pred), confusion_matrix(lab, pred, num_classes=5),
                confusion_matrix(lab, pred, weights=w, dtype=tf.float32),
                confusion_matrix(lab[:, None], pred, 4, dtype=tf.int64)]
        assert [o.dtype for o in outs] == [tf.int32, tf.int32, tf.float32, tf.int64]
        vals = tf.Session().run(outs)
    np.testing.assert_array_equal(vals[0], cm_ref(lab, pred, 4))
    np.testing.assert_array_equal(vals[1], cm_ref(lab, pred, 5))
    np.testing.assert_array_equal(vals[2], cm_ref(lab, pred, 4, w))
    np.testing.assert_array_equal(vals[3], cm_ref(lab, pred, 4))
    assert tf.confusion_matrix is tf.math.confusion_matrix


@pytest.mark.parametrize("args,match", [
    (([-1, 0], [0, 1], None), "`labels` contains negative values"),
    (([0, 0], [0, -2], None), "`predictions` contains negative values"),
    (([3, 0], [0, 1], 3), "`labels` out of bound"),
    (([0, 0], [0, 4], 3), "`predictions` out of bound")])
def test_confusion_matrix_bad_ids(args, match):
    with tf.Graph().as_default():
        x = tf.placeholder(tf.int64, None)
        y = tf.placeholder(tf.int64, None)
        cm = confusion_matrix(x, y, args[2])
        with tf.Session() as s, pytest.raises(errors.InvalidArgumentError, match=match):
            s.run(cm, {x: args[0], y: args[1]})


# -- counts, precision, recall ------------------------------------------------------------
def test_counts_precision_recall():
    labels = RNG.uniform(size=12) > 0.5
    scores = RNG.uniform(size=12).astype(np.float32)
    w = RNG.choice([0.0, 1.0, 2.0], 12).astype(np.float32)
    pred = scores > 0.5
    counts = {"true_positives": labels & pred, "false_positives": ~labels & pred,
              "true_negatives": ~labels & ~pred, "false_negatives": labels & ~pred}
    for name, mask in counts.items():
        fn = getattr(tf.metrics, name)
        _, final, names = stream(lambda l, p, ww, fn=fn: fn(l, p > 0.5, ww),
                                 batches_of(labels, scores, w))
        assert names == [f"{name}/count:0"]
        np.testing.assert_allclose(final, (w * mask).sum(), rtol=1e-6)
    tp, fp, fn_ = ((w * counts[k]).sum() for k in ("true_positives", "false_positives",
                                                    "false_negatives"))
    _, final, names = stream(lambda l, p, ww: tf.metrics.precision(l, p > 0.5, ww),
                             batches_of(labels, scores, w))
    assert names == ["precision/true_positives/count:0",
                     "precision/false_positives/count:0"]
    np.testing.assert_allclose(final, tp / (tp + fp), rtol=1e-6)
    _, final, names = stream(lambda l, p, ww: tf.metrics.recall(l, p > 0.5, ww),
                             batches_of(labels, scores, w))
    assert names == ["recall/true_positives/count:0", "recall/false_negatives/count:0"]
    np.testing.assert_allclose(final, tp / (tp + fn_), rtol=1e-6)


def test_precision_and_recall_are_zero_without_positives():
    with tf.Graph().as_default():
        p, up = tf.metrics.precision([True, False], [False, False])
        r, ur = tf.metrics.recall([False, False], [True, False])
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            assert s.run([up, ur, p, r]) == [0.0, 0.0, 0.0, 0.0]


# -- thresholds and AUC: a numpy version of TF's algorithm --------------------------------
def thresholded_ref(labels, scores, thresholds, w=None):
    """tp, fn, tn, fp per threshold, accumulated in float32 as TF."""
    t = np.asarray(thresholds, np.float32)[:, None]
    above = np.asarray(scores, np.float32)[None, :] > t
    lab = np.asarray(labels, bool)[None, :]
    ww = np.ones(len(scores), np.float32) if w is None else np.asarray(w, np.float32)
    out = {}
    for key, m in (("tp", lab & above), ("fn", lab & ~above), ("tn", ~lab & ~above),
                   ("fp", ~lab & above)):
        out[key] = (m * ww).sum(1).astype(np.float32)
    return out


def tf_thresholds(n, last=1.0 + 1e-7):
    return [-1e-7] + [(i + 1) / (n - 1) for i in range(n - 2)] + [last]


def auc_ref(labels, scores, w=None, n=200, curve="ROC", method="trapezoidal"):
    c = {k: v.astype(np.float64) for k, v in
         thresholded_ref(labels, scores, tf_thresholds(n), w).items()}
    tp, fn, tn, fp = c["tp"], c["fn"], c["tn"], c["fp"]
    if curve == "PR" and method == "careful_interpolation":
        dtp = tp[:-1] - tp[1:]
        p = tp + fp
        dp = np.maximum(p[:-1] - p[1:], 0)
        slope = np.divide(dtp, dp, out=np.zeros_like(dtp), where=dp != 0)
        intercept = tp[1:] - slope * p[1:]
        ok = (p[:-1] > 0) & (p[1:] > 0)
        ratio = np.where(ok, p[:-1] / np.where(p[1:] > 0, p[1:], 1), 1.0)
        den = np.maximum(tp[1:] + fn[1:], 0)
        num = slope * (dtp + intercept * np.log(ratio))
        return np.divide(num, den, out=np.zeros_like(num), where=den != 0).sum()
    e = 1e-6
    rec = (tp + e) / (tp + fn + e)
    x, y = ((fp / (fp + tn + e), rec) if curve == "ROC" else
            (rec, (tp + e) / (tp + fp + e)))
    h = {"minoring": np.minimum(y[:-1], y[1:]), "majoring": np.maximum(y[:-1], y[1:])}.get(
        method, (y[:-1] + y[1:]) / 2)
    return ((x[:-1] - x[1:]) * h).sum()


@pytest.mark.parametrize("curve,method", [
    ("ROC", "trapezoidal"), ("ROC", "minoring"), ("ROC", "majoring"),
    ("ROC", "careful_interpolation"), ("PR", "trapezoidal"), ("PR", "minoring"),
    ("PR", "majoring"), ("PR", "careful_interpolation")])
def test_auc_against_tf_algorithm(curve, method):
    labels = RNG.uniform(size=30) > 0.4
    scores = np.clip(labels * 0.3 + RNG.uniform(size=30) * 0.7, 0, 1).astype(np.float32)
    w = RNG.choice([0.0, 1.0, 2.0], 30).astype(np.float32)
    ups, final, names = stream(
        lambda l, p, ww: tf.metrics.auc(l, p, ww, num_thresholds=40, curve=curve,
                                        summation_method=method),
        batches_of(labels, scores, w))
    assert names == ["auc/true_positives:0", "auc/false_negatives:0",
                     "auc/true_negatives:0", "auc/false_positives:0"]
    np.testing.assert_allclose(final, auc_ref(labels, scores, w, 40, curve, method),
                               rtol=1e-5)
    np.testing.assert_allclose(ups[-1], final, rtol=1e-6)


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 40), st.integers(3, 60))
def test_auc_property(n, num_thresholds):
    rng = np.random.default_rng(n * 100 + num_thresholds)
    labels = rng.uniform(size=n) > 0.5
    scores = np.round(rng.uniform(size=n), 2).astype(np.float32)
    with tf.Graph().as_default():
        value, update = tf.metrics.auc(labels, scores, num_thresholds=num_thresholds)
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            s.run(update)
            got = s.run(value)
    np.testing.assert_allclose(got, auc_ref(labels, scores, n=num_thresholds), rtol=1e-5,
                               atol=1e-7)


def test_auc_explicit_thresholds():
    labels = np.array([True, False, True, True, False])
    scores = np.array([0.9, 0.6, 0.3, 0.8, 0.1], np.float32)
    with tf.Graph().as_default():
        v, u = tf.metrics.auc(labels, scores, thresholds=[0.7, 0.2, 0.5])
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            got = s.run(u)
    c = thresholded_ref(labels, scores, [-1e-7, 0.2, 0.5, 0.7, 1 + 1e-7])
    tp, fn, tn, fp = (c[k].astype(np.float64) for k in ("tp", "fn", "tn", "fp"))
    x, y = fp / (fp + tn + 1e-6), (tp + 1e-6) / (tp + fn + 1e-6)
    np.testing.assert_allclose(got, ((x[:-1] - x[1:]) * (y[:-1] + y[1:]) / 2).sum(),
                               rtol=1e-5)


def test_at_thresholds_metrics():
    labels = RNG.uniform(size=12) > 0.5
    scores = RNG.uniform(size=12).astype(np.float32)
    w = RNG.choice([0.0, 1.0, 2.0], 12).astype(np.float32)
    th = [0.0, 0.3, 0.5, 1.0]
    ref = thresholded_ref(labels, scores, th, w)
    for key, name in (("tp", "true_positives"), ("fp", "false_positives"),
                      ("tn", "true_negatives"), ("fn", "false_negatives")):
        fn = getattr(tf.metrics, f"{name}_at_thresholds")
        _, final, names = stream(lambda l, p, ww, fn=fn: fn(l, p, th, ww),
                                 batches_of(labels, scores, w))
        assert names == [f"{name}/{name}:0"]
        np.testing.assert_allclose(final, ref[key], rtol=1e-6)
    _, final, names = stream(lambda l, p, ww: tf.metrics.precision_at_thresholds(
        l, p, th, ww), batches_of(labels, scores, w))
    assert names == ["precision_at_thresholds/true_positives:0",
                     "precision_at_thresholds/false_positives:0"]
    np.testing.assert_allclose(final, ref["tp"] / (EPS + ref["tp"] + ref["fp"]), rtol=1e-6)
    _, final, _ = stream(lambda l, p, ww: tf.metrics.recall_at_thresholds(l, p, th, ww),
                         batches_of(labels, scores, w))
    np.testing.assert_allclose(final, ref["tp"] / (EPS + ref["tp"] + ref["fn"]), rtol=1e-6)


def test_sensitivity_and_specificity():
    labels = RNG.uniform(size=40) > 0.5
    scores = np.clip(labels * 0.2 + RNG.uniform(size=40) * 0.8, 0, 1).astype(np.float32)
    for spec in (0.2, 0.5, 0.9):
        c = thresholded_ref(labels, scores, tf_thresholds(50))
        specs = c["tn"] / (c["tn"] + c["fp"] + EPS)
        i = np.argmin(np.abs(specs - np.float32(spec)))
        expect = c["tp"][i] / (c["tp"][i] + c["fn"][i] + EPS)
        _, final, _ = stream(lambda l, p: tf.metrics.sensitivity_at_specificity(
            l, p, spec, num_thresholds=50), batches_of(labels, scores))
        np.testing.assert_allclose(final, expect, rtol=1e-6)
    for sens in (0.3, 0.8):
        c = thresholded_ref(labels, scores, tf_thresholds(50, 1 - 1e-7))
        gap = np.abs(c["tp"] / (c["tp"] + c["fn"] + EPS) - np.float32(sens))
        i = np.nonzero(gap == gap.min())[0][-1]
        expect = c["tn"][i] / (c["tn"][i] + c["fp"][i] + EPS)
        _, final, names = stream(lambda l, p: tf.metrics.specificity_at_sensitivity(
            l, p, sens, num_thresholds=50), batches_of(labels, scores))
        assert names[0] == "specificity_at_sensitivity/true_positives:0"
        np.testing.assert_allclose(final, expect, rtol=1e-6)


# -- top-k metrics: references with Python sets -------------------------------------------
def topk_ref(labels, logits, k, class_id=None, w=None):
    """tp, fp, fn summed over rows, labels rows as sets."""
    tp = fp = fn = 0.0
    labels = np.asarray(labels)
    if labels.ndim == 1:
        labels = labels[:, None]
    for i, (lab, row) in enumerate(zip(labels, logits)):
        top = set(np.argsort(-row, kind="stable")[:k].tolist())
        lab = set(lab.tolist())
        if class_id is not None:
            top, lab = top & {class_id}, lab & {class_id}
        wi = 1.0 if w is None else w[i]
        tp += wi * len(top & lab)
        fp += wi * len(top - lab)
        fn += wi * len(lab - top)
    return tp, fp, fn


def ap_ref(labels, logits, k, w=None):
    labels = np.asarray(labels)
    if labels.ndim == 1:
        labels = labels[:, None]
    total = weight = 0.0
    for i, (lab, row) in enumerate(zip(labels, logits)):
        top = np.argsort(-row, kind="stable")[:k]
        hits, s = 0, 0.0
        for rank, c in enumerate(top, 1):
            if c in set(lab.tolist()):
                hits += 1
                s += hits / rank
        wi = 1.0 if w is None else w[i]
        total += wi * s / min(k, labels.shape[1])
        weight += wi
    return total / weight


@pytest.mark.parametrize("k,class_id,multi,weighted", [
    (1, None, False, False), (2, None, True, False), (3, None, True, True),
    (2, 1, True, False), (3, 4, True, True), (2, 0, False, False)])
def test_precision_and_recall_at_k(k, class_id, multi, weighted):
    logits = RNG.normal(size=(12, 5)).astype(np.float32)
    labels = RNG.integers(0, 5, (12, 2) if multi else 12).astype(np.int64)
    w = RNG.choice([0.0, 1.0, 2.0, 0.3], 12).astype(np.float32)
    tp, fp, fn = topk_ref(labels, logits, k, class_id, w if weighted else None)
    kw = {"class_id": class_id}
    suffix = f"_at_{k}" + ("" if class_id is None else f"_class{class_id}")
    for metric, expect, other in (("precision", tp / (tp + fp), "false_positive"),
                                  ("recall", tp / (tp + fn), "false_negative")):
        fn_ = getattr(tf.metrics, f"{metric}_at_k")
        if weighted:
            build = (lambda l, p, ww, fn_=fn_: fn_(l, p, k, weights=ww, **kw))
            data = batches_of(labels, logits, w)
        else:
            build = (lambda l, p, fn_=fn_: fn_(l, p, k, **kw))
            data = batches_of(labels, logits)
        _, final, names = stream(build, data)
        assert names == [f"{metric}{suffix}/true_positive{suffix}:0",
                         f"{metric}{suffix}/{other}{suffix}:0"]
        np.testing.assert_allclose(final, expect, rtol=1e-7)  # float32 weights


def test_at_top_k_with_given_ids_and_duplicates():
    ids = np.array([[1, 1, 2], [0, 3, 3]], np.int64)   # duplicates count once (sets)
    labels = np.array([[1, 4], [3, 3]], np.int64)
    with tf.Graph().as_default():
        p, pu = tf.metrics.precision_at_top_k(labels, ids)
        r, ru = tf.metrics.recall_at_top_k(labels, ids, k=3)
        assert p.name == "precision_at_k:0" and r.name == "recall_at_3:0"
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            got = s.run([pu, ru])
    # row 0: P={1,2} L={1,4}: tp 1 fp 1 fn 1; row 1: P={0,3} L={3}: tp 1 fp 1 fn 0
    np.testing.assert_allclose(got, [2 / 4, 2 / 3])


@pytest.mark.parametrize("k,multi,weighted", [(1, False, False), (2, False, True),
                                              (3, True, False), (5, True, True)])
def test_average_precision_at_k(k, multi, weighted):
    logits = RNG.normal(size=(12, 6)).astype(np.float32)
    labels = RNG.integers(0, 6, (12, 3) if multi else 12).astype(np.int64)
    w = RNG.choice([0.0, 1.0, 2.0], 12).astype(np.float32)
    if weighted:
        build = (lambda l, p, ww: tf.metrics.average_precision_at_k(l, p, k, ww))
        data = batches_of(labels, logits, w)
    else:
        build = (lambda l, p: tf.metrics.sparse_average_precision_at_k(l, p, k))
        data = batches_of(labels, logits)
    _, final, names = stream(build, data)
    assert names == [f"average_precision_at_{k}/max:0", f"average_precision_at_{k}/total:0"]
    np.testing.assert_allclose(final, ap_ref(labels, logits, k, w if weighted else None),
                               rtol=1e-7)


class _Sparse:
    """A stand-in for tf.SparseTensor: the top-k metrics read indices/values/shape."""

    def __init__(self, indices, values, dense_shape):
        self.indices, self.values, self.dense_shape = indices, values, dense_shape


def test_sparse_labels():
    logits = np.array([[0.1, 0.5, 0.2, 0.9], [0.8, 0.1, 0.3, 0.0], [0.2, 0.3, 0.9, 0.4]],
                      np.float32)
    # rows: {1, 3}, {0}, {2, 3} (a duplicate 2 and 3)
    sp = _Sparse(np.array([[0, 0], [0, 1], [1, 0], [2, 0], [2, 1], [2, 2]], np.int64),
                 np.array([1, 3, 0, 2, 3, 2], np.int64), np.array([3, 3], np.int64))
    dense_sets = [[1, 3], [0], [2, 3]]
    with tf.Graph().as_default():
        outs = [tf.metrics.precision_at_k(sp, logits, 2)[1],
                tf.metrics.recall_at_k(sp, logits, 1)[1],
                tf.metrics.recall_at_k(sp, logits, 2, class_id=3)[1],
                tf.metrics.average_precision_at_k(sp, logits, 2)[1]]
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            got = s.run(outs)
    tops2 = [set(np.argsort(-r)[:2]) for r in logits]
    tops1 = [set(np.argsort(-r)[:1]) for r in logits]
    tp2 = sum(len(t & set(l)) for t, l in zip(tops2, dense_sets))
    tp1 = sum(len(t & set(l)) for t, l in zip(tops1, dense_sets))
    ap = []
    for r, l in zip(logits, dense_sets):
        hits, acc = 0, 0.0
        for rank, c in enumerate(np.argsort(-r)[:2], 1):
            if c in l:
                hits += 1
                acc += hits / rank
        ap.append(acc / min(2, len(l)))
    np.testing.assert_allclose(got, [tp2 / 6, tp1 / 5, 1.0, np.mean(ap)])


# -- names, collections, errors -----------------------------------------------------------
def test_collections_and_unique_scopes():
    with tf.Graph().as_default():
        l, p = tf.constant([1, 2]), tf.constant([1, 1])
        a = tf.metrics.accuracy(l, p, metrics_collections=["m"], updates_collections=["u"])
        b = tf.metrics.accuracy(l, p, name="acc")
        c = tf.metrics.accuracy(l, p)
        with tf.variable_scope("eval"):
            d = tf.metrics.mean([1.0, 2.0])
        assert [t.name for t in a + b + c + d] == [
            "accuracy/value:0", "accuracy/update_op:0", "acc/value:0", "acc/update_op:0",
            "accuracy_1/value:0", "accuracy_1/update_op:0", "eval/mean/value:0",
            "eval/mean/update_op:0"]
        assert tf.get_collection("m") == [a[0]] and tf.get_collection("u") == [a[1]]
        assert [v.name for v in tf.local_variables()][-2:] == ["eval/mean/total:0",
                                                               "eval/mean/count:0"]
        assert all(not v.trainable for v in tf.local_variables())
        with tf.Session() as s:
            with pytest.raises(errors.FailedPreconditionError):
                s.run(a[1])
            s.run(tf.local_variables_initializer())
            assert s.run([a[0], a[1], a[0]]) [2] == 0.5


BUILD_ERRORS = {
    "shape": (ValueError, lambda: tf.metrics.accuracy(np.zeros(3), np.zeros(4))),
    "weights": (ValueError, lambda: tf.metrics.mean(np.ones((2, 3)), np.ones((2, 2)))),
    "curve": (ValueError, lambda: tf.metrics.auc([True], [0.5], curve="XX")),
    "method": (ValueError, lambda: tf.metrics.auc([True], [0.5], summation_method="x")),
    "specificity": (ValueError, lambda: tf.metrics.sensitivity_at_specificity(
        [True], [0.5], 1.5)),
    "sensitivity": (ValueError, lambda: tf.metrics.specificity_at_sensitivity(
        [True], [0.5], -0.1)),
    "k": (ValueError, lambda: tf.metrics.average_precision_at_k(
        np.zeros(2, np.int64), np.zeros((2, 3)), 0)),
    "label_dtype": (TypeError, lambda: tf.metrics.precision_at_k(
        np.zeros(2, np.int32), np.zeros((2, 3)), 1)),
    "label_rank": (ValueError, lambda: tf.metrics.recall_at_k(
        np.zeros((2, 1, 1), np.int64), np.zeros((2, 3)), 1)),
    "count_weights": (ValueError, lambda: tf.metrics.true_positives(
        [True], [True], weights=np.ones((1, 2, 2)))),
    "auc_range": (errors.InvalidArgumentError, lambda: tf.metrics.auc(
        tf.constant([True]), tf.constant([1.5]))),
}


@pytest.mark.parametrize("case", sorted(BUILD_ERRORS))
def test_build_errors(case):
    cls, fn = BUILD_ERRORS[case]
    with tf.Graph().as_default(), pytest.raises(cls):
        fn()


def test_run_time_errors():
    with tf.Graph().as_default():
        p = tf.placeholder(tf.float32, None)
        w = tf.placeholder(tf.float32, None)
        _, up = tf.metrics.auc([True, False], p)
        _, mup = tf.metrics.mean([1.0, 2.0, 3.0], w)
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            with pytest.raises(errors.InvalidArgumentError, match=r"in \[0, 1\]"):
                s.run(up, {p: [0.5, -0.1]})
            with pytest.raises(errors.InvalidArgumentError, match="broadcast"):
                s.run(mup, {w: [1.0, 2.0]})
            assert s.run(mup, {w: [1.0, 0.0, 1.0]}) == 2.0
