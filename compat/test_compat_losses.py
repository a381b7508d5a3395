"""tf.losses programs: every loss under every reduction and weighting, label smoothing,
unknown shapes, dtypes, the loss collections, gradients, and the errors TF raises."""
from __future__ import annotations

import numpy as np
import pytest

from compat_harness import Run, Steps, run_both, run_custom

R = np.random.default_rng(3)
LABELS = R.uniform(0, 1, (4, 3)).astype(np.float32)
PREDS = R.uniform(0, 1, (4, 3)).astype(np.float32)
BINARY = (R.uniform(0, 1, (4, 3)) > 0.5).astype(np.float32)
LOGITS = R.normal(0, 2, (4, 3)).astype(np.float32)
ONEHOT = np.eye(3, dtype=np.float32)[[0, 2, 1, 2]]
SPARSE = np.array([0, 2, 1, 2], np.int32)
UNIT_A = (LABELS / np.linalg.norm(LABELS, axis=1, keepdims=True)).astype(np.float32)
UNIT_B = (PREDS / np.linalg.norm(PREDS, axis=1, keepdims=True)).astype(np.float32)

WEIGHTS = {
    "default": None,
    "scalar": 2.5,
    "zero": 0.0,
    "batch_col": np.array([[1.0], [0.0], [2.0], [0.5]], np.float32),
    "row": np.array([[1.0, 0.0, 3.0]], np.float32),
    "full": R.choice([0.0, 1.0, 2.0], (4, 3)).astype(np.float32),
    "all_zero_full": np.zeros((4, 3), np.float32),
}
REDUCTIONS = ["NONE", "SUM", "MEAN", "SUM_OVER_BATCH_SIZE", "SUM_OVER_NONZERO_WEIGHTS",
              "SUM_BY_NONZERO_WEIGHTS"]


def _call(tf, fn, *args, weights=None, **kw):
    if weights is not None:
        kw["weights"] = weights
    return fn(*args, **kw)


ELEMENTWISE = {
    "absolute_difference": lambda tf: (tf.losses.absolute_difference, LABELS, PREDS, {}),
    "mean_squared_error": lambda tf: (tf.losses.mean_squared_error, LABELS, PREDS, {}),
    "huber_loss": lambda tf: (tf.losses.huber_loss, LABELS * 3, PREDS, {}),
    "huber_loss_delta": lambda tf: (tf.losses.huber_loss, LABELS * 3, PREDS,
                                    {"delta": 0.3}),
    "log_loss": lambda tf: (tf.losses.log_loss, BINARY, PREDS, {}),
    "log_loss_eps": lambda tf: (tf.losses.log_loss, BINARY, PREDS, {"epsilon": 0.1}),
    "hinge_loss": lambda tf: (tf.losses.hinge_loss, BINARY, LOGITS, {}),
    "sigmoid_cross_entropy": lambda tf: (tf.losses.sigmoid_cross_entropy, BINARY,
                                         LOGITS, {}),
    "sigmoid_cross_entropy_smooth": lambda tf: (tf.losses.sigmoid_cross_entropy, BINARY,
                                                LOGITS, {"label_smoothing": 0.2}),
}


@pytest.mark.parametrize("weights", sorted(WEIGHTS))
@pytest.mark.parametrize("loss", sorted(ELEMENTWISE))
def test_elementwise_losses(loss, weights):
    """One graph per (loss, weights): the loss under every reduction, then the
    collection."""
    def program(tf):
        fn, a, b, kw = ELEMENTWISE[loss](tf)
        outs = [_call(tf, fn, tf.constant(a), tf.constant(b), weights=WEIGHTS[weights],
                      reduction=getattr(tf.losses.Reduction, r), **kw) for r in REDUCTIONS]
        return [outs, tf.losses.get_losses()]

    run_both(program)


PER_ROW = {
    "softmax_cross_entropy": lambda tf, kw: tf.losses.softmax_cross_entropy(
        tf.constant(ONEHOT), tf.constant(LOGITS), **kw),
    "softmax_cross_entropy_smooth": lambda tf, kw: tf.losses.softmax_cross_entropy(
        tf.constant(ONEHOT), tf.constant(LOGITS), label_smoothing=0.1, **kw),
    "sparse_softmax_cross_entropy": lambda tf, kw: tf.losses.sparse_softmax_cross_entropy(
        tf.constant(SPARSE), tf.constant(LOGITS), **kw),
    "sparse_softmax_cross_entropy_col": lambda tf, kw: tf.losses.sparse_softmax_cross_entropy(
        tf.constant(SPARSE[:, None]), tf.constant(LOGITS), **kw),
    "cosine_distance": lambda tf, kw: tf.losses.cosine_distance(
        tf.constant(UNIT_A), tf.constant(UNIT_B), axis=1, **kw),
    "cosine_distance_dim": lambda tf, kw: tf.losses.cosine_distance(
        tf.constant(UNIT_A), tf.constant(UNIT_B), dim=1, **kw),
}
ROW_WEIGHTS = {"default": None, "scalar": 0.5,
               "batch": np.array([1.0, 0.0, 2.0, 3.0], np.float32),
               "batch_col": np.array([[1.0], [0.0], [2.0], [3.0]], np.float32)}


@pytest.mark.parametrize("weights", sorted(ROW_WEIGHTS))
@pytest.mark.parametrize("loss", sorted(PER_ROW))
def test_per_row_losses(loss, weights):
    w = ROW_WEIGHTS[weights]
    if loss.startswith("cosine") and weights == "batch":
        w = None  # a [batch] weight does not broadcast to [batch, 1] losses (both error)

    def program(tf):
        outs = []
        for r in REDUCTIONS:
            kw = {"reduction": getattr(tf.losses.Reduction, r)}
            if w is not None:
                kw["weights"] = w
            outs.append(PER_ROW[loss](tf, kw))
        return outs

    run_both(program)


@pytest.mark.parametrize("weights", ["default", "scalar", "batch_col", "zero"])
def test_mean_pairwise_squared_error(weights):
    w = {"default": None, "scalar": 2.0, "zero": 0.0,
         "batch_col": np.array([[1.0], [0.0], [2.0], [0.5]], np.float32)}[weights]

    def program(tf):
        kw = {} if w is None else {"weights": w}
        return tf.losses.mean_pairwise_squared_error(tf.constant(LABELS),
                                                     tf.constant(PREDS), **kw)

    run_both(program)


def test_mean_pairwise_squared_error_3d():
    run_both(lambda tf, kw: tf.losses.mean_pairwise_squared_error(
        tf.constant(LABELS.reshape(2, 2, 3)), tf.constant(PREDS.reshape(2, 2, 3)),
        weights=[[[1.0]], [[0.0]]]))


def test_compute_weighted_loss():
    def program(tf):
        l = tf.constant(LABELS)
        outs = [tf.losses.compute_weighted_loss(l, reduction=getattr(tf.losses.Reduction, r))
                for r in REDUCTIONS]
        outs.append(tf.losses.compute_weighted_loss(l, weights=WEIGHTS["full"],
                                                    scope="mine"))
        outs.append(tf.losses.compute_weighted_loss(tf.constant(LABELS.astype(np.float64)),
                                                    weights=2.0))
        outs.append(tf.losses.compute_weighted_loss(l, loss_collection=None))
        return [outs, tf.losses.get_losses()]

    run_both(program, rtol=1e-6)  # the float64 loss is summed in float32


def test_float64_and_half_inputs():
    def program(tf):
        return [tf.losses.mean_squared_error(LABELS.astype(np.float64),
                                             PREDS.astype(np.float64)),
                tf.losses.sigmoid_cross_entropy(BINARY, LOGITS.astype(np.float64)),
                tf.losses.softmax_cross_entropy(ONEHOT, LOGITS.astype(np.float64)),
                tf.losses.sparse_softmax_cross_entropy(SPARSE.astype(np.int64),
                                                       LOGITS.astype(np.float64)),
                tf.losses.absolute_difference(tf.constant([1, 2]), tf.constant([3, 5]))]

    run_both(program, rtol=1e-6)  # float64 losses are summed in float32


def test_unknown_shapes():
    def program(tf):
        l = tf.placeholder(tf.float32, [None, 3])
        p = tf.placeholder(tf.float32, None)
        w = tf.placeholder(tf.float32, None)
        lg = tf.placeholder(tf.float32, [None, None])
        sl = tf.placeholder(tf.int32, None)
        outs = [tf.losses.mean_squared_error(l, p, weights=w),
                tf.losses.huber_loss(l, p, weights=w, reduction=tf.losses.Reduction.MEAN),
                tf.losses.sparse_softmax_cross_entropy(sl, lg, weights=w),
                tf.losses.mean_pairwise_squared_error(l, p, weights=w)]
        return Run(outs, {l: LABELS, p: PREDS, w: WEIGHTS["batch_col"], lg: LOGITS,
                          sl: SPARSE[:, None]})

    run_both(program)


def test_unknown_weights_cannot_broadcast_at_run_time():
    def program(tf):
        w = tf.placeholder(tf.float32, None)
        return Run(tf.losses.mean_squared_error(LABELS, PREDS, weights=w),
                   {w: np.ones((4, 2), np.float32)})

    run_both(program)


def test_unknown_weights_broadcast_at_run_time():
    def program(tf):
        w = tf.placeholder(tf.float32, [None, None])
        loss = tf.losses.mean_squared_error(LABELS, PREDS, weights=w)
        return Steps(Run(loss, {w: np.ones((1, 3), np.float32)}),
                     Run(loss, {w: np.ones((4, 1), np.float32)}),
                     Run(loss, {w: 2 * np.ones((4, 3), np.float32)}))

    run_both(program)


ERRORS = {
    "shape_mismatch": lambda tf: tf.losses.mean_squared_error(LABELS, PREDS[:, :2]),
    "weights_rank": lambda tf: tf.losses.mean_squared_error(LABELS, PREDS,
                                                            weights=[1.0, 2.0, 3.0, 4.0]),
    "weights_dim": lambda tf: tf.losses.absolute_difference(LABELS, PREDS,
                                                            weights=np.ones((4, 2))),
    "bad_reduction": lambda tf: tf.losses.mean_squared_error(LABELS, PREDS,
                                                             reduction="avg"),
    "labels_none": lambda tf: tf.losses.mean_squared_error(None, PREDS),
    "logits_none": lambda tf: tf.losses.softmax_cross_entropy(ONEHOT, None),
    "cosine_no_axis": lambda tf: tf.losses.cosine_distance(UNIT_A, UNIT_B),
    "softmax_shape": lambda tf: tf.losses.softmax_cross_entropy(ONEHOT[:, :2], LOGITS),
    "sigmoid_shape": lambda tf: tf.losses.sigmoid_cross_entropy(BINARY[:2], LOGITS),
    "sparse_rank": lambda tf: tf.losses.sparse_softmax_cross_entropy(ONEHOT, LOGITS),
    "hinge_shape": lambda tf: tf.losses.hinge_loss(BINARY[:, :1].T, LOGITS),
    "total_loss_empty": lambda tf: tf.losses.get_total_loss(),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors(case):
    run_both(ERRORS[case], static=False)


def test_collections_and_total_loss():
    def program(tf):
        a = tf.losses.mean_squared_error(LABELS, PREDS)
        with tf.name_scope("tower"):
            b = tf.losses.absolute_difference(LABELS, PREDS)
        c = tf.losses.log_loss(BINARY, PREDS, loss_collection="mine")
        tf.losses.add_loss(tf.constant(1.5, name="extra"))
        tf.add_to_collection(tf.GraphKeys.REGULARIZATION_LOSSES,
                             tf.constant(0.25, name="reg_a"))
        with tf.name_scope("tower"):
            tf.add_to_collection(tf.GraphKeys.REGULARIZATION_LOSSES,
                                 tf.constant(0.5, name="reg_b"))
        return [a, b, c, tf.losses.get_losses(), tf.losses.get_losses(loss_collection="mine"),
                tf.losses.get_losses(scope="tower"), tf.losses.get_regularization_losses(),
                tf.losses.get_regularization_losses("tower"),
                tf.losses.get_regularization_loss(),
                tf.losses.get_regularization_loss(scope="tower", name="reg"),
                tf.losses.get_total_loss(), tf.losses.get_total_loss(False, name="t2"),
                tf.losses.get_total_loss(scope="tower")]

    run_both(program)


def test_regularization_loss_when_none():
    run_both(lambda tf, kw: tf.losses.get_regularization_loss())


def test_scope_argument():
    def program(tf):
        return [tf.losses.mean_squared_error(LABELS, PREDS, scope="mse"),
                tf.losses.softmax_cross_entropy(ONEHOT, LOGITS, scope="xent"),
                tf.losses.mean_squared_error(LABELS, PREDS, scope="mse")]

    run_both(program)


@pytest.mark.parametrize("loss", ["mean_squared_error", "absolute_difference",
                                  "huber_loss", "log_loss", "hinge_loss",
                                  "sigmoid_cross_entropy", "softmax_cross_entropy",
                                  "sparse_softmax_cross_entropy", "cosine_distance",
                                  "mean_pairwise_squared_error"])
def test_gradients(loss):
    args = {"sigmoid_cross_entropy": (BINARY, LOGITS), "hinge_loss": (BINARY, LOGITS),
            "log_loss": (BINARY, PREDS), "softmax_cross_entropy": (ONEHOT, LOGITS),
            "sparse_softmax_cross_entropy": (SPARSE, LOGITS),
            "cosine_distance": (UNIT_A, UNIT_B)}.get(loss, (LABELS * 2, PREDS))

    def program(tf):
        x = tf.constant(args[1])
        kw = {"axis": 1} if loss == "cosine_distance" else {}
        out = getattr(tf.losses, loss)(args[0], x, weights=WEIGHTS["full"][:, :1], **kw)
        return tf.gradients(out, x)

    run_both(program, static=False)  # gradient op names belong to the gradient functions


def test_reduction_constants():
    run_custom(lambda tf: [tf.losses.Reduction.all(), tf.losses.Reduction.MEAN,
                           tf.losses.Reduction.SUM_OVER_NONZERO_WEIGHTS])
