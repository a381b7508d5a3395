"""tf.losses (core/modeling/losses.py): every loss and reduction against numpy
references, weights of every broadcastable shape, label smoothing, dtypes, names and
scopes, the loss collections, errors at graph construction and at run time, and
numerical gradient checks."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors

RNG = np.random.default_rng(5)
Red = tf.losses.Reduction
REDUCTIONS = [Red.NONE, Red.SUM, Red.MEAN, Red.SUM_OVER_BATCH_SIZE,
              Red.SUM_BY_NONZERO_WEIGHTS]


# -- numpy references -------------------------------------------------------------------
def reduce_ref(losses, weights, reduction):
    losses = np.asarray(losses, np.float64)
    w = np.broadcast_to(np.asarray(weights, np.float64), losses.shape)
    weighted = losses * w
    total = weighted.sum()
    if reduction == Red.NONE:
        return weighted
    if reduction == Red.SUM:
        return total
    den = {Red.MEAN: w.sum(), Red.SUM_OVER_BATCH_SIZE: losses.size,
           Red.SUM_BY_NONZERO_WEIGHTS: np.count_nonzero(w)}[reduction]
    return total / den if den else 0.0


def log_softmax(x):
    x = np.asarray(x, np.float64)
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def sigmoid_xent(z, x):
    return np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))


def huber(l, p, d):
    a = np.abs(p - l)
    return np.where(a <= d, 0.5 * a * a, 0.5 * d * d + d * (a - d))


ELEMENTWISE = {
    "absolute_difference": (lambda l, p, **k: tf.losses.absolute_difference(l, p, **k),
                            lambda l, p: np.abs(p - l)),
    "mean_squared_error": (lambda l, p, **k: tf.losses.mean_squared_error(l, p, **k),
                           lambda l, p: (p - l) ** 2),
    "huber_loss": (lambda l, p, **k: tf.losses.huber_loss(l, p, delta=0.4, **k),
                   lambda l, p: huber(l, p, 0.4)),
    "log_loss": (lambda l, p, **k: tf.losses.log_loss(l, p, epsilon=1e-3, **k),
                 lambda l, p: -l * np.log(p + 1e-3) - (1 - l) * np.log(1 - p + 1e-3)),
    "hinge_loss": (lambda l, p, **k: tf.losses.hinge_loss(l, p, **k),
                   lambda l, p: np.maximum(0, 1 - (2 * l - 1) * p)),
    "sigmoid_cross_entropy": (lambda l, p, **k: tf.losses.sigmoid_cross_entropy(l, p, **k),
                              sigmoid_xent),
    "sigmoid_smoothed": (
        lambda l, p, **k: tf.losses.sigmoid_cross_entropy(l, p, label_smoothing=0.3, **k),
        lambda l, p: sigmoid_xent(l * 0.7 + 0.15, p)),
}


def _inputs(name, shape, rng=RNG):
    if name in ("log_loss", "hinge_loss", "sigmoid_cross_entropy", "sigmoid_smoothed"):
        labels = (rng.uniform(size=shape) > 0.5).astype(np.float32)
    else:
        labels = rng.normal(size=shape).astype(np.float32)
    if name == "log_loss":
        preds = rng.uniform(0.05, 0.95, shape).astype(np.float32)
    else:
        preds = rng.normal(size=shape).astype(np.float32)
    return labels, preds


def run(t, feed=None):
    with tf.Session() as s:
        return s.run(t, feed)


WEIGHTS = [1.0, 0.0, 2.5, np.array([[1.0], [0.0], [3.0]], np.float32),
           np.array([[0.5, 0.0, 2.0, 1.0]], np.float32),
           RNG.choice([0.0, 1.0, 2.0], (3, 4)).astype(np.float32)]


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_losses_every_reduction_and_weight(name):
    fn, ref = ELEMENTWISE[name]
    labels, preds = _inputs(name, (3, 4))
    with tf.Graph().as_default():
        outs, refs = [], []
        for w in WEIGHTS:
            for r in REDUCTIONS:
                outs.append(fn(tf.constant(labels), tf.constant(preds), weights=w,
                               reduction=r))
                refs.append(reduce_ref(ref(labels.astype(np.float64), preds), w, r))
        vals = run(outs)
    for o, v, r in zip(outs, vals, refs):
        assert o.dtype == tf.float32
        assert v.shape == np.shape(r)
        np.testing.assert_allclose(v, r, rtol=2e-5, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_weighted_reductions_property(shape, data):
    """Random shapes, weights of every broadcastable shape, every reduction."""
    rng = np.random.default_rng(len(shape) * 31 + sum(shape))
    labels, preds = rng.normal(size=shape), rng.normal(size=shape)
    w_shape = [data.draw(st.sampled_from([1, d])) for d in shape]
    weights = rng.choice([0.0, 0.5, 2.0], w_shape).astype(np.float32)
    reduction = data.draw(st.sampled_from(REDUCTIONS))
    with tf.Graph().as_default():
        out = tf.losses.mean_squared_error(labels, preds, weights, reduction=reduction)
        got = run(out)
    np.testing.assert_allclose(got, reduce_ref((preds - labels) ** 2, weights, reduction),
                               rtol=1e-4, atol=1e-6)


def test_softmax_sparse_and_cosine_losses():
    logits = RNG.normal(size=(4, 5)).astype(np.float32)
    ids = np.array([0, 3, 1, 4])
    onehot = np.eye(5, dtype=np.float32)[ids]
    w = np.array([1.0, 0.0, 2.0, 0.5], np.float32)
    a = RNG.normal(size=(4, 3))
    b = RNG.normal(size=(4, 3))
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    with tf.Graph().as_default():
        outs = [tf.losses.softmax_cross_entropy(onehot, logits, weights=w),
                tf.losses.softmax_cross_entropy(onehot, logits, label_smoothing=0.2,
                                                reduction=Red.NONE),
                tf.losses.sparse_softmax_cross_entropy(ids, logits, weights=w),
                tf.losses.sparse_softmax_cross_entropy(ids[:, None], logits,
                                                       weights=w[:, None],
                                                       reduction=Red.NONE),
                tf.losses.cosine_distance(a, b, axis=1, weights=w[:, None],
                                          reduction=Red.SUM),
                tf.losses.cosine_distance(a, b, dim=0, reduction=Red.NONE)]
        vals = run(outs)
    ls = log_softmax(logits)
    xent = -(onehot * ls).sum(-1)
    smooth = onehot * 0.8 + 0.2 / 5
    np.testing.assert_allclose(vals[0], (xent * w).sum() / 3, rtol=1e-5)
    np.testing.assert_allclose(vals[1], -(smooth * ls).sum(-1), rtol=1e-5)
    np.testing.assert_allclose(vals[2], (xent * w).sum() / 3, rtol=1e-5)
    np.testing.assert_allclose(vals[3], xent * w, rtol=1e-5)
    assert vals[3].shape == (4,)
    np.testing.assert_allclose(vals[4], ((1 - (a * b).sum(1)) * w).sum(), rtol=1e-5)
    np.testing.assert_allclose(vals[5], 1 - (a * b).sum(0, keepdims=True), rtol=1e-5)
    assert vals[5].shape == (1, 3)


def _pairwise_ref(labels, preds, weights):
    total = 0.0
    d = (preds - labels).reshape(len(labels), -1)
    w = np.broadcast_to(np.asarray(weights, np.float64).reshape(-1, 1)
                        if np.ndim(weights) else weights, (len(labels), 1))
    for row, wi in zip(d, w[:, 0]):
        n = row.size
        if wi == 0 or n < 2:
            continue
        pairs = [(row[i] - row[j]) ** 2 for i in range(n) for j in range(n) if i != j]
        total += wi * np.mean(pairs)
    return total


@pytest.mark.parametrize("weights", [1.0, 3.0, np.array([[1.0], [0.0], [2.0]])])
def test_mean_pairwise_squared_error(weights):
    labels = RNG.normal(size=(3, 4)).astype(np.float32)
    preds = RNG.normal(size=(3, 4)).astype(np.float32)
    with tf.Graph().as_default():
        out = tf.losses.mean_pairwise_squared_error(labels, preds, weights)
        assert out.name == "mean_pairwise_squared_error/value_2:0"  # as TF
        got = run(out)
    np.testing.assert_allclose(got, _pairwise_ref(labels, preds, weights), rtol=1e-5)


def test_mean_pairwise_all_zero_weights_is_zero():
    with tf.Graph().as_default():
        assert run(tf.losses.mean_pairwise_squared_error([[1.0, 2.0]], [[0.0, 5.0]],
                                                         0.0)) == 0.0


def test_dtypes_and_casts():
    with tf.Graph().as_default():
        a = tf.losses.mean_squared_error(np.ones(3), np.zeros(3))        # float64 in
        b = tf.losses.sigmoid_cross_entropy([1, 0], np.array([0.5, -1.0]))  # float64
        c = tf.losses.softmax_cross_entropy([[0, 1]], tf.constant([[1.0, 2.0]], tf.float16))
        d = tf.losses.absolute_difference([1, 2], [3, 5])               # int32 in
        e = tf.losses.compute_weighted_loss(tf.constant([1.0, 3.0], tf.float64))
        assert (a.dtype, b.dtype, c.dtype, d.dtype, e.dtype) == \
            (tf.float32, tf.float64, tf.float16, tf.float32, tf.float64)
        va, vb, vc, vd, ve = run([a, b, c, d, e])
    assert va == 1.0 and vd == 2.5 and ve == 2.0
    np.testing.assert_allclose(vb, sigmoid_xent(np.array([1, 0]), np.array([0.5, -1])).mean(),
                               rtol=1e-6)
    np.testing.assert_allclose(vc, -log_softmax([1.0, 2.0])[1], rtol=1e-3)


def test_names_scopes_and_collections():
    with tf.Graph().as_default():
        a = tf.losses.mean_squared_error([1.0], [2.0])
        b = tf.losses.mean_squared_error([1.0], [2.0], reduction=Red.SUM)
        c = tf.losses.mean_squared_error([1.0], [2.0], reduction=Red.NONE, scope="mine")
        d = tf.losses.softmax_cross_entropy([[1.0]], [[2.0]])
        e = tf.losses.sparse_softmax_cross_entropy([0], [[2.0]], loss_collection="other")
        f = tf.losses.hinge_loss([1.0], [2.0], loss_collection=None)
        assert [a.name, b.name, c.name, d.name, e.name, f.name] == [
            "mean_squared_error/value:0", "mean_squared_error_1/Sum:0", "mine/Mul:0",
            "softmax_cross_entropy_loss/value:0",
            "sparse_softmax_cross_entropy_loss/value:0", "hinge_loss/value:0"]
        assert tf.losses.get_losses() == [a, b, c, d]
        assert tf.get_collection(tf.GraphKeys.LOSSES) == [a, b, c, d]
        assert tf.losses.get_losses(loss_collection="other") == [e]
        assert tf.losses.get_losses(scope="mean_squared_error_1") == [b]


def test_total_and_regularization_losses():
    with tf.Graph().as_default():
        zero = tf.losses.get_regularization_loss()
        a = tf.losses.absolute_difference([1.0, 2.0], [2.0, 4.0])              # 1.5
        tf.losses.add_loss(tf.constant(2.0))
        tf.losses.add_loss(tf.constant(100.0), loss_collection=None)
        tf.add_to_collection(tf.GraphKeys.REGULARIZATION_LOSSES, tf.constant(0.25))
        with tf.name_scope("tower"):
            tf.add_to_collection(tf.GraphKeys.REGULARIZATION_LOSSES,
                                 tf.constant(0.5, name="r"))
        assert len(tf.losses.get_regularization_losses()) == 2
        assert len(tf.losses.get_regularization_losses("tower")) == 1
        reg = tf.losses.get_regularization_loss()
        total = tf.losses.get_total_loss()
        no_reg = tf.losses.get_total_loss(add_regularization_losses=False, name="t")
        assert reg.name == "total_regularization_loss:0" and total.name == "total_loss:0"
        assert no_reg.name == "t:0"
        assert run([zero, a, reg, total, no_reg]) == [0.0, 1.5, 0.75, 4.25, 3.5]


def test_reduction_keys():
    assert Red.SUM_OVER_NONZERO_WEIGHTS == Red.SUM_BY_NONZERO_WEIGHTS
    assert len(Red.all()) == 6 and Red.NONE == "none"
    Red.validate(Red.MEAN)
    with pytest.raises(ValueError, match="Invalid Reduction Key"):
        Red.validate("mean")


ERRORS = {
    "shape": lambda: tf.losses.mean_squared_error(np.ones((2, 3)), np.ones((2, 4))),
    "weights_rank": lambda: tf.losses.absolute_difference(np.ones((2, 3)), np.ones((2, 3)),
                                                          weights=[1.0, 2.0]),
    "weights_dim": lambda: tf.losses.log_loss(np.ones((2, 3)), np.ones((2, 3)),
                                              weights=np.ones((2, 2))),
    "reduction": lambda: tf.losses.huber_loss([1.0], [1.0], reduction="mean"),
    "none_arg": lambda: tf.losses.hinge_loss(None, [1.0]),
    "cosine_axis": lambda: tf.losses.cosine_distance([[1.0]], [[1.0]]),
    "softmax_shape": lambda: tf.losses.softmax_cross_entropy([[1.0, 0.0]], [[1.0, 2, 3]]),
    "pairwise_weights": lambda: tf.losses.mean_pairwise_squared_error(
        np.ones((2, 3)), np.ones((2, 3)), weights=np.ones((3, 1))),
    "total_of_nothing": lambda: tf.losses.get_total_loss(),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_graph_construction_errors(case):
    with tf.Graph().as_default():
        with pytest.raises(ValueError):
            ERRORS[case]()


def test_run_time_weights_check():
    with tf.Graph().as_default():
        w = tf.placeholder(tf.float32, None)
        loss = tf.losses.mean_squared_error(np.ones((2, 3)), np.zeros((2, 3)), weights=w)
        with tf.Session() as s:
            assert s.run(loss, {w: [[1.0, 0.0, 1.0]]}) == 1.0
            assert s.run(loss, {w: 2.0}) == 2.0
            with pytest.raises(errors.InvalidArgumentError,
                               match="weights can not be broadcast"):
                s.run(loss, {w: np.ones((2, 2))})
            with pytest.raises(errors.InvalidArgumentError):
                s.run(loss, {w: np.ones(3)})


def test_unknown_rank_inputs():
    labels = tf.placeholder(tf.int32, None)
    logits = tf.placeholder(tf.float32, None)
    w = tf.placeholder(tf.float32, None)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits, w, reduction=Red.SUM)
    x = np.array([[1.0, 2.0], [0.5, -1.0]], np.float32)
    with tf.Session() as s:
        got = s.run(loss, {labels: [[1], [0]], logits: x, w: [[2.0], [1.0]]})
    np.testing.assert_allclose(got, -2 * log_softmax(x)[0, 1] - log_softmax(x)[1, 0],
                               rtol=1e-5)


# -- gradients --------------------------------------------------------------------------
def away(v, points, margin=0.1):
    v = np.array(v, np.float64)
    for p in points:
        near = np.abs(v - p) < margin
        v[near] = p + np.where(v[near] >= p, margin, -margin)
    return v


GRADS = {
    "absolute_difference": (lambda y, x: tf.losses.absolute_difference(y, x, W), "normal",
                            []),
    "mean_squared_error": (lambda y, x: tf.losses.mean_squared_error(y, x, W), "normal", []),
    "huber_loss": (lambda y, x: tf.losses.huber_loss(y, x, W, delta=0.5), "normal", []),
    "log_loss": (lambda y, x: tf.losses.log_loss(y, x, W), "prob", []),
    "hinge_loss": (lambda y, x: tf.losses.hinge_loss(y, x, W), "binary", [-1.0, 1.0]),
    "sigmoid_cross_entropy": (lambda y, x: tf.losses.sigmoid_cross_entropy(
        y, x, W, label_smoothing=0.1), "binary", []),
    "softmax_cross_entropy": (lambda y, x: tf.losses.softmax_cross_entropy(
        y, x, W[:, 0], label_smoothing=0.1), "onehot", []),
    "sparse_softmax_cross_entropy": (lambda y, x: tf.losses.sparse_softmax_cross_entropy(
        y, x, W), "ids", []),
    "cosine_distance": (lambda y, x: tf.losses.cosine_distance(y, x, 1, W), "normal", []),
    "mean_pairwise_squared_error": (lambda y, x: tf.losses.mean_pairwise_squared_error(
        y, x, W), "normal", []),
    "compute_weighted_loss": (lambda y, x: tf.losses.compute_weighted_loss(
        x * y, W, reduction=Red.MEAN), "normal", []),
}
W = np.array([[1.0], [0.0], [2.5]], np.float32)


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradient(name):
    build, kind, kinks = GRADS[name]
    rng = np.random.default_rng(sorted(GRADS).index(name))
    x0 = rng.normal(size=(3, 4))
    labels = {"normal": rng.normal(size=(3, 4)), "prob": (rng.uniform(size=(3, 4)) > 0.5),
              "binary": (rng.uniform(size=(3, 4)) > 0.5), "onehot": np.eye(4)[[1, 0, 3]],
              "ids": np.array([[1], [0], [3]])}[kind]
    if kind == "prob":
        x0 = rng.uniform(0.2, 0.8, (3, 4))
    if name in ("absolute_difference", "huber_loss"):
        x0 = labels + away(x0 - labels, [0.0, -0.5, 0.5])
    if kinks:
        sign = 2 * labels - 1
        x0 = away(x0 * sign, kinks) * sign
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, (3, 4))
        y = build(tf.constant(labels.astype(np.float32) if kind != "ids" else labels), x)
        with tf.Session():
            err = tf.test.compute_gradient_error(x, [3, 4], y, y.get_shape().as_list(),
                                                 x_init_value=x0.astype(np.float32))
    assert err < 2e-2, err


def test_softmax_labels_get_no_gradient():
    with tf.Graph().as_default():
        labels = tf.constant([[0.3, 0.7]])
        loss = tf.losses.softmax_cross_entropy(labels, [[1.0, 2.0]])
        assert tf.gradients(loss, labels) == [None]


@pytest.mark.parametrize("module", ["losses", "metrics"])
def test_every_op_called_is_declared(module):
    """The modules call ops through ``_op("name")`` (api_function): each name must be in
    the module's REQUIRED_API_NAMES, and the runtime must provide all of them."""
    import ast
    import importlib
    import pathlib

    mod = importlib.import_module(f"flowrt.modeling.{module}")
    tree = ast.parse(pathlib.Path(mod.__file__).read_text())
    called = {n.args[0].value for n in ast.walk(tree)
              if isinstance(n, ast.Call) and getattr(n.func, "id", None) in
              ("_op", "api_function") and n.args and isinstance(n.args[0], ast.Constant)}
    assert called <= mod.REQUIRED_API_NAMES, sorted(called - mod.REQUIRED_API_NAMES)
    api = tf.default_runtime().api
    assert [n for n in sorted(mod.REQUIRED_API_NAMES) if n not in api] == []
    assert set(mod.API) <= set(api)
