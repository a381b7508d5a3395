"""tf.metrics programs: every metric streamed over several update batches (values after
each update_op run and the final value), with and without weights; the local variables
each creates (names, collections); metrics_collections / updates_collections;
tf.confusion_matrix; and the errors TF raises."""
from __future__ import annotations

import numpy as np
import pytest

from compat_harness import (STATIC_KEYS, Run, Steps, expect_tf115, run_both, run_custom,
                            tf_only)

R = np.random.default_rng(11)
N_BATCH, B = 3, 6

# one entry per batch
LABELS_BOOL = [R.uniform(size=B) > 0.5 for _ in range(N_BATCH)]
SCORES = [np.round(R.uniform(size=B), 3).astype(np.float32) for _ in range(N_BATCH)]
CLASS_LABELS = [R.integers(0, 4, B).astype(np.int64) for _ in range(N_BATCH)]
CLASS_PREDS = [R.integers(0, 4, B).astype(np.int64) for _ in range(N_BATCH)]
REG_LABELS = [R.normal(size=(B, 3)).astype(np.float32) for _ in range(N_BATCH)]
REG_PREDS = [R.normal(size=(B, 3)).astype(np.float32) for _ in range(N_BATCH)]
WEIGHTS = [R.choice([0.0, 0.5, 1.0, 2.0], B).astype(np.float32) for _ in range(N_BATCH)]
LOGITS = [R.normal(size=(B, 5)).astype(np.float32) for _ in range(N_BATCH)]
MULTI_LABELS = [R.integers(0, 5, (B, 2)).astype(np.int64) for _ in range(N_BATCH)]


def _unit(x):
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def streamed(tf, build, feeds_per_batch):
    """Placeholders from the first batch's arrays; init, one update per batch, then the
    value, the local variables and the collections."""
    first = feeds_per_batch[0]
    phs = [tf.placeholder(tf.as_dtype(a.dtype), [None] + list(a.shape[1:])) for a in first]
    value, update = build(tf, *phs)
    runs = [Run(tf.local_variables_initializer())]
    runs += [Run(update, dict(zip(phs, batch))) for batch in feeds_per_batch]
    runs.append(Run([value, tf.local_variables(),
                     tf.get_collection(tf.GraphKeys.METRIC_VARIABLES)]))
    return Steps(*runs)


def batches(*series):
    return [tuple(s[i] for s in series) for i in range(N_BATCH)]


M = {
    "accuracy": (lambda tf, l, p: tf.metrics.accuracy(l, p), (CLASS_LABELS, CLASS_PREDS)),
    "accuracy_w": (lambda tf, l, p, w: tf.metrics.accuracy(l, p, weights=w),
                   (CLASS_LABELS, CLASS_PREDS, WEIGHTS)),
    "mean": (lambda tf, v: tf.metrics.mean(v), (SCORES,)),
    "mean_w": (lambda tf, v, w: tf.metrics.mean(v, w), (SCORES, WEIGHTS)),
    "mean_tensor": (lambda tf, v: tf.metrics.mean_tensor(tf.reshape(v, [2, 3])), (SCORES,)),
    "mean_tensor_w": (lambda tf, v, w: tf.metrics.mean_tensor(
        tf.reshape(v, [2, 3]), tf.reshape(w, [2, 3])), (SCORES, WEIGHTS)),
    "mean_absolute_error": (lambda tf, l, p: tf.metrics.mean_absolute_error(l, p),
                            (REG_LABELS, REG_PREDS)),
    "mean_absolute_error_w": (lambda tf, l, p, w: tf.metrics.mean_absolute_error(l, p, w),
                              (REG_LABELS, REG_PREDS, WEIGHTS)),
    "mean_squared_error": (lambda tf, l, p: tf.metrics.mean_squared_error(l, p),
                           (REG_LABELS, REG_PREDS)),
    "root_mean_squared_error_w": (
        lambda tf, l, p, w: tf.metrics.root_mean_squared_error(l, p, w),
        (REG_LABELS, REG_PREDS, WEIGHTS)),
    "mean_relative_error": (lambda tf, l, p: tf.metrics.mean_relative_error(
        l, p, normalizer=tf.abs(l) * tf.cast(tf.abs(l) > 0.3, tf.float32)),
        (REG_LABELS, REG_PREDS)),
    "mean_cosine_distance": (lambda tf, l, p: tf.metrics.mean_cosine_distance(
        l, p, dim=1), ([_unit(x) for x in REG_LABELS], [_unit(x) for x in REG_PREDS])),
    "mean_cosine_distance_w": (lambda tf, l, p, w: tf.metrics.mean_cosine_distance(
        l, p, dim=1, weights=w), ([_unit(x) for x in REG_LABELS],
                                  [_unit(x) for x in REG_PREDS], WEIGHTS)),
    "percentage_below": (lambda tf, v: tf.metrics.percentage_below(v, 0.4), (SCORES,)),
    "percentage_below_w": (lambda tf, v, w: tf.metrics.percentage_below(v, 0.4, w),
                           (SCORES, WEIGHTS)),
    "mean_per_class_accuracy": (
        lambda tf, l, p: tf.metrics.mean_per_class_accuracy(l, p, 4),
        (CLASS_LABELS, CLASS_PREDS)),
    "mean_per_class_accuracy_w": (
        lambda tf, l, p, w: tf.metrics.mean_per_class_accuracy(l, p, 4, weights=w),
        (CLASS_LABELS, CLASS_PREDS, WEIGHTS)),
    "mean_iou": (lambda tf, l, p: tf.metrics.mean_iou(l, p, 4), (CLASS_LABELS, CLASS_PREDS)),
    "mean_iou_w": (lambda tf, l, p, w: tf.metrics.mean_iou(l, p, 5, weights=w),
                   (CLASS_LABELS, CLASS_PREDS, WEIGHTS)),
    "precision": (lambda tf, l, p: tf.metrics.precision(l, p > 0.5), (LABELS_BOOL, SCORES)),
    "precision_w": (lambda tf, l, p, w: tf.metrics.precision(l, p > 0.5, w),
                    (LABELS_BOOL, SCORES, WEIGHTS)),
    "recall": (lambda tf, l, p: tf.metrics.recall(l, p > 0.5), (LABELS_BOOL, SCORES)),
    "recall_w": (lambda tf, l, p, w: tf.metrics.recall(l, p > 0.5, w),
                 (LABELS_BOOL, SCORES, WEIGHTS)),
    "auc": (lambda tf, l, p: tf.metrics.auc(l, p), (LABELS_BOOL, SCORES)),
    "auc_w": (lambda tf, l, p, w: tf.metrics.auc(l, p, w, num_thresholds=50),
              (LABELS_BOOL, SCORES, WEIGHTS)),
    "auc_thresholds": (lambda tf, l, p: tf.metrics.auc(l, p, thresholds=[0.7, 0.2, 0.5]),
                       (LABELS_BOOL, SCORES)),
    "sensitivity_at_specificity": (
        lambda tf, l, p: tf.metrics.sensitivity_at_specificity(l, p, 0.6),
        (LABELS_BOOL, SCORES)),
    "sensitivity_at_specificity_w": (
        lambda tf, l, p, w: tf.metrics.sensitivity_at_specificity(
            l, p, 0.3, weights=w, num_thresholds=20), (LABELS_BOOL, SCORES, WEIGHTS)),
    "specificity_at_sensitivity": (
        lambda tf, l, p: tf.metrics.specificity_at_sensitivity(l, p, 0.7),
        (LABELS_BOOL, SCORES)),
    "specificity_at_sensitivity_w": (
        lambda tf, l, p, w: tf.metrics.specificity_at_sensitivity(
            l, p, 0.4, weights=w, num_thresholds=30), (LABELS_BOOL, SCORES, WEIGHTS)),
    "precision_at_thresholds": (
        lambda tf, l, p: tf.metrics.precision_at_thresholds(l, p, [0.1, 0.5, 0.9]),
        (LABELS_BOOL, SCORES)),
    "recall_at_thresholds_w": (
        lambda tf, l, p, w: tf.metrics.recall_at_thresholds(l, p, [0.1, 0.5, 0.9], w),
        (LABELS_BOOL, SCORES, WEIGHTS)),
    "precision_at_k": (lambda tf, l, p: tf.metrics.precision_at_k(l, p, 2),
                       (CLASS_LABELS, LOGITS)),
    "precision_at_k_multi": (lambda tf, l, p: tf.metrics.precision_at_k(l, p, 3),
                             (MULTI_LABELS, LOGITS)),
    "precision_at_k_class": (lambda tf, l, p: tf.metrics.precision_at_k(l, p, 2, class_id=1),
                             (MULTI_LABELS, LOGITS)),
    "precision_at_k_w": (lambda tf, l, p, w: tf.metrics.precision_at_k(l, p, 2, weights=w),
                         (MULTI_LABELS, LOGITS, WEIGHTS)),
    "sparse_precision_at_k": (lambda tf, l, p: tf.metrics.sparse_precision_at_k(l, p, 1),
                              (CLASS_LABELS, LOGITS)),
    "recall_at_k": (lambda tf, l, p: tf.metrics.recall_at_k(l, p, 2), (CLASS_LABELS, LOGITS)),
    "recall_at_k_multi_w": (lambda tf, l, p, w: tf.metrics.recall_at_k(l, p, 3, weights=w),
                            (MULTI_LABELS, LOGITS, WEIGHTS)),
    "recall_at_k_class": (lambda tf, l, p: tf.metrics.recall_at_k(l, p, 3, class_id=2),
                          (MULTI_LABELS, LOGITS)),
    "precision_at_top_k": (lambda tf, l, p: tf.metrics.precision_at_top_k(
        l, tf.nn.top_k(p, 2)[1], k=2), (MULTI_LABELS, LOGITS)),
    "recall_at_top_k": (lambda tf, l, p: tf.metrics.recall_at_top_k(
        l, tf.nn.top_k(p, 3)[1]), (MULTI_LABELS, LOGITS)),
    "average_precision_at_k": (lambda tf, l, p: tf.metrics.average_precision_at_k(l, p, 3),
                               (MULTI_LABELS, LOGITS)),
    "average_precision_at_k_1d": (
        lambda tf, l, p: tf.metrics.average_precision_at_k(l, p, 2), (CLASS_LABELS, LOGITS)),
    "average_precision_at_k_w": (
        lambda tf, l, p, w: tf.metrics.average_precision_at_k(l, p, 4, weights=w),
        (MULTI_LABELS, LOGITS, WEIGHTS)),
    "sparse_average_precision_at_k": (
        lambda tf, l, p: tf.metrics.sparse_average_precision_at_k(l, p, 1),
        (MULTI_LABELS, LOGITS)),
}
for _kind in ("true_positives", "false_positives", "true_negatives", "false_negatives"):
    M[_kind] = (lambda tf, l, p, _k=_kind: getattr(tf.metrics, _k)(l, p > 0.5),
                (LABELS_BOOL, SCORES))
    M[_kind + "_w"] = (lambda tf, l, p, w, _k=_kind: getattr(tf.metrics, _k)(l, p > 0.5, w),
                       (LABELS_BOOL, SCORES, WEIGHTS))
    M[_kind + "_at_thresholds"] = (
        lambda tf, l, p, _k=_kind: getattr(tf.metrics, _k + "_at_thresholds")(
            l, p, [0.0, 0.25, 0.5, 1.0]), (LABELS_BOOL, SCORES))
    M[_kind + "_at_thresholds_w"] = (
        lambda tf, l, p, w, _k=_kind: getattr(tf.metrics, _k + "_at_thresholds")(
            l, p, [0.3, 0.6], w), (LABELS_BOOL, SCORES, WEIGHTS))


@pytest.mark.parametrize("metric", sorted(M))
def test_streamed(metric):
    build, series = M[metric]
    keys = STATIC_KEYS
    if "average_precision" in metric:
        # TF 2.x's average_precision_at_k first takes a reduce_max of the labels (op
        # "Max"), so its "max" scope becomes "max_1" (names are unique ignoring case);
        # TF 1.15 had no such op and named the variable ".../max".
        keys = tuple(k for k in STATIC_KEYS if k != "name")
    run_both(lambda tf: streamed(tf, build, batches(*series)), static_keys=keys)


CURVES = [("ROC", "trapezoidal"), ("ROC", "minoring"), ("ROC", "majoring"),
          ("ROC", "careful_interpolation"), ("PR", "trapezoidal"), ("PR", "minoring"),
          ("PR", "majoring"), ("PR", "careful_interpolation")]


@pytest.mark.parametrize("curve,method", CURVES)
def test_auc_curves(curve, method):
    def build(tf, l, p, w):
        return tf.metrics.auc(l, p, w, num_thresholds=25, curve=curve,
                              summation_method=method)

    run_both(lambda tf: streamed(tf, build, batches(LABELS_BOOL, SCORES, WEIGHTS)))


def test_names_collections_and_scopes():
    def program(tf):
        l = tf.constant(CLASS_LABELS[0])
        p = tf.constant(CLASS_PREDS[0])
        out = [tf.metrics.accuracy(l, p, metrics_collections=["mc"],
                                   updates_collections=["uc"]),
               tf.metrics.accuracy(l, p),
               tf.metrics.accuracy(l, p, name="acc"),
               tf.metrics.auc(LABELS_BOOL[0], SCORES[0], updates_collections=["uc"]),
               tf.metrics.precision(LABELS_BOOL[0], SCORES[0] > 0.5,
                                    metrics_collections=["mc"])]
        with tf.variable_scope("eval"):
            out.append(tf.metrics.mean(SCORES[0]))
        with tf.name_scope("tower"):
            out.append(tf.metrics.mean_iou(l, p, 4, metrics_collections=["mc"]))
            out.append(tf.metrics.recall_at_k(CLASS_LABELS[0], LOGITS[0], 1, class_id=3,
                                              updates_collections=["uc"]))
        names = [[v.name for v in tf.local_variables()],
                 [v.name for v in tf.get_collection(tf.GraphKeys.METRIC_VARIABLES)],
                 [v.name for v in tf.global_variables()],
                 [v.name for v in tf.trainable_variables()],
                 [t.name for t in tf.get_collection("mc")],
                 [t.name for t in tf.get_collection("uc")],
                 [[t.name for t in pair] for pair in out]]
        return names

    run_custom(program)


def test_value_before_any_update():
    def program(tf):
        l = tf.constant(CLASS_LABELS[0])
        p = tf.constant(CLASS_PREDS[0])
        vals = [tf.metrics.accuracy(l, p)[0], tf.metrics.mean(SCORES[0])[0],
                tf.metrics.auc(LABELS_BOOL[0], SCORES[0])[0],
                tf.metrics.precision(LABELS_BOOL[0], SCORES[0] > 0.5)[0],
                tf.metrics.mean_iou(l, p, 4)[0],
                tf.metrics.mean_per_class_accuracy(l, p, 4)[0],
                tf.metrics.precision_at_k(CLASS_LABELS[0], LOGITS[0], 2)[0],
                tf.metrics.average_precision_at_k(CLASS_LABELS[0], LOGITS[0], 2)[0]]
        return Steps(Run(tf.local_variables_initializer()), Run(vals))

    run_both(program)


def test_sparse_labels():
    def program(tf):
        st = tf.SparseTensor(indices=[[0, 0], [0, 1], [1, 0], [2, 0], [2, 1], [2, 2]],
                             values=np.array([1, 3, 0, 4, 2, 2], np.int64),
                             dense_shape=[3, 3])
        logits = tf.constant(LOGITS[0][:3])
        out = [tf.metrics.precision_at_k(st, logits, 2),
               tf.metrics.recall_at_k(st, logits, 2),
               tf.metrics.recall_at_k(st, logits, 3, class_id=2),
               tf.metrics.average_precision_at_k(st, logits, 3)]
        return Steps(Run(tf.local_variables_initializer()), Run([u for _, u in out]),
                     Run([v for v, _ in out]))

    run_both(program)


def test_unknown_shapes_and_squeezable_dims():
    def program(tf):
        l = tf.placeholder(tf.int64, None)
        p = tf.placeholder(tf.int64, None)
        w = tf.placeholder(tf.float32, None)
        acc, up = tf.metrics.accuracy(l, p, w)
        m, mup = tf.metrics.mean(tf.cast(p, tf.float32), w)
        return Steps(Run(tf.local_variables_initializer()),
                     Run([up, mup], {l: CLASS_LABELS[0][:, None], p: CLASS_PREDS[0],
                                     w: WEIGHTS[0][:, None]}),
                     Run([up, mup], {l: CLASS_LABELS[1], p: CLASS_PREDS[1][:, None],
                                     w: WEIGHTS[1]}),
                     Run([acc, m]))

    run_both(program, static=False)


def _cm(tf):
    """TF's confusion_matrix, or flowrt.modeling.metrics' (the standard plugin's
    special_math_ops publishes another one as tf.confusion_matrix for now)."""
    if tf.__name__.startswith("flowrt"):
        import flowrt.modeling.metrics

        return flowrt.modeling.metrics.confusion_matrix
    return tf.confusion_matrix


def test_confusion_matrix_is_the_metrics_one():
    import flowrt
    import flowrt.modeling.metrics

    assert flowrt.confusion_matrix is flowrt.modeling.metrics.confusion_matrix
    assert flowrt.math.confusion_matrix is flowrt.modeling.metrics.confusion_matrix


@pytest.mark.parametrize("case", ["default", "num_classes", "weights", "dtype", "squeeze",
                                  "name", "unknown"])
def test_confusion_matrix(case):
    lab = np.array([0, 1, 2, 1, 3, 0])
    pred = np.array([0, 2, 2, 1, 1, 0])

    def program(tf):
        if case == "default":
            return _cm(tf)(lab, pred)
        if case == "num_classes":
            return _cm(tf)(lab, pred, num_classes=6)
        if case == "weights":
            return _cm(tf)(lab, pred, weights=np.arange(6.0), dtype=tf.float32)
        if case == "dtype":
            return _cm(tf)(lab.astype(np.int32), pred, 5, dtype=tf.int64)
        if case == "squeeze":
            return _cm(tf)(lab[:, None], pred, 4)
        if case == "name":
            return _cm(tf)(lab, pred, name="cm")
        x = tf.placeholder(tf.int64, None)
        return Run(_cm(tf)(x, pred), {x: lab})

    run_both(program)


def test_confusion_matrix_static():
    run_both(lambda tf: [_cm(tf)([0, 1], [1, 1], 3),
                         _cm(tf)([0, 1], [1, 1])], static_keys=("dtype", "shape"))


ERRORS = {
    "accuracy_shape": lambda tf: tf.metrics.accuracy(np.zeros(3), np.zeros(4)),
    "mean_weights": lambda tf: tf.metrics.mean(np.ones((2, 3)), weights=np.ones((2, 2))),
    "auc_curve": lambda tf: tf.metrics.auc([True], [0.5], curve="XX"),
    "auc_method": lambda tf: tf.metrics.auc(tf.constant([True]), tf.constant([0.5]),
                                            summation_method="median"),
    "auc_out_of_range": lambda tf: tf.metrics.auc(tf.constant([True]), tf.constant([1.5])),
    "auc_out_of_range_run": lambda tf: (lambda p: Steps(
        Run(tf.local_variables_initializer()),
        Run(tf.metrics.auc(tf.constant([True]), p)[1], {p: [-0.5]})))(
            tf.placeholder(tf.float32, [1])),
    "sensitivity_range": lambda tf: tf.metrics.sensitivity_at_specificity([True], [0.5],
                                                                          1.5),
    "specificity_range": lambda tf: tf.metrics.specificity_at_sensitivity([True], [0.5],
                                                                          -0.1),
    "ap_k": lambda tf: tf.metrics.average_precision_at_k(CLASS_LABELS[0], LOGITS[0], 0),
    "at_k_int32_labels": lambda tf: tf.metrics.precision_at_k(
        CLASS_LABELS[0].astype(np.int32), LOGITS[0], 2),
    "at_k_label_rank": lambda tf: tf.metrics.recall_at_k(
        np.zeros((6, 1, 1), np.int64), LOGITS[0], 2),
    "cm_negative": lambda tf: _cm(tf)([-1, 0], [0, 1]),
    "cm_out_of_bound": lambda tf: _cm(tf)([3, 0], [0, 1], num_classes=3),
    "cm_pred_out_of_bound": lambda tf: _cm(tf)([0, 0], [0, 4], num_classes=3),
    "cm_weights_shape": lambda tf: _cm(tf)([0, 1], [0, 1], weights=[1.0]),
    "count_weights_rank": lambda tf: tf.metrics.true_positives(
        [True, False], [True, True], weights=np.ones((2, 2, 2))),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors(case):
    run_both(ERRORS[case], static=False)


def test_average_precision_padded_labels_tf115():
    """TF 1.15 divides each row's precision sum by min(k, labels.shape[-1]) for dense
    labels; TF 2.x counts only the labels >= 0 (after mapping out-of-range ids to -1),
    so the two differ when rows are padded with -1. TF 1.15's value is hand-computed."""
    labels = np.array([[1, -1], [2, 0]], np.int64)
    logits = np.array([[0.1, 0.9, 0.3, 0.0], [0.8, 0.1, 0.7, 0.2]], np.float32)
    # row 0: top-2 = [1, 2]: hit at rank 1 -> 1/1; / min(2, 2) = 0.5
    # row 1: top-2 = [0, 2]: hits at ranks 1 and 2 -> 1 + 1; / 2 = 1.0
    expected = np.float64((0.5 + 1.0) / 2)

    def program(tf):
        value, update = tf.metrics.average_precision_at_k(labels, logits, 2)
        return Steps(Run(tf.local_variables_initializer()), Run(update), Run(value))

    expect_tf115(program, [None, expected, expected])
    # TF 2.x: row 0 has one relevant label, so its average precision is 1.0
    t = tf_only(program)
    assert np.isclose(t.results[-1], 1.0)
