"""FTRL, proximal GD, proximal Adagrad and AdagradDA (ops, kernels, optimizers) and the
cosine learning-rate decays, against numpy references of TF's kernel formulas."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import flowrt as tf
from flowrt import errors
from flowrt.plugins.kernels.standard import optimizers_more as om

F32 = np.float32
_vals = hnp.arrays(np.float32, 6, elements=st.floats(-4, 4, width=32))


# -- numpy references (TF's CPU functors, float32) ------------------------------------
def ref_fobos(prox, lr_t, l1, l2):
    if l1 > 0:
        return np.sign(prox) * np.maximum(np.abs(prox) - lr_t * l1, 0) / (F32(1) + l2 * lr_t)
    return prox / (F32(1) + l2 * lr_t)


def ref_ftrl(var, accum, linear, grad, lr, l1, l2, lr_power, shrink=F32(0)):
    g = grad + F32(2) * shrink * var
    new = accum + grad * grad
    linear = linear + (g - (new ** -lr_power - accum ** -lr_power) / lr * var)
    y = new ** -lr_power / lr + F32(2) * l2
    var = np.where(np.abs(linear) > l1, (l1 * np.sign(linear) - linear) / y, F32(0))
    return var, new, linear


def ref_adagrad_da(var, ga, gg, grad, lr, l1, l2, t):
    ga, gg = ga + grad, gg + grad * grad
    denom = l2 * (F32(t) * lr) + np.sqrt(gg)
    if l1 > 0:
        return lr * F32(-1) * np.sign(ga) * np.maximum(np.abs(ga) - F32(t) * l1, 0) / denom, ga, gg
    return lr * ga * F32(-1) / denom, ga, gg


def _run_op(fn, values, *args, **kw):
    """Build variables of ``values``, run ``fn(*vars, *args)`` once, return the vars."""
    with tf.Graph().as_default():
        vs = [tf.Variable(v) for v in values]
        op = fn(*vs, *args, **kw)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(op)
            return s.run(vs)


@settings(max_examples=15, deadline=None)
@given(_vals, _vals, st.sampled_from([0.0, 0.3]), st.sampled_from([0.0, 0.5]))
def test_proximal_gradient_descent_kernel(var, grad, l1, l2):
    (got,) = _run_op(om.apply_proximal_gradient_descent, [var], F32(0.1), F32(l1), F32(l2),
                     grad)
    want = ref_fobos(var - grad * F32(0.1), F32(0.1), F32(l1), F32(l2))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@settings(max_examples=15, deadline=None)
@given(_vals, _vals, st.sampled_from([0.0, 0.3]))
def test_proximal_adagrad_kernel(var, grad, l1):
    acc = np.full(6, 0.1, F32)
    got_v, got_a = _run_op(om.apply_proximal_adagrad, [var, acc], F32(0.5), F32(l1),
                           F32(0.2), grad)
    new_a = acc + grad * grad
    lr_t = F32(0.5) * (F32(1) / np.sqrt(new_a))
    np.testing.assert_allclose(got_a, new_a, rtol=1e-6)
    np.testing.assert_allclose(got_v, ref_fobos(var - grad * lr_t, lr_t, F32(l1), F32(0.2)),
                               rtol=1e-5, atol=1e-6)


@settings(max_examples=15, deadline=None)
@given(_vals, _vals, st.sampled_from([-0.5, -0.7, 0.0]), st.sampled_from([0.0, 0.1]))
def test_ftrl_kernels(var, grad, lr_power, shrink):
    acc, lin = np.full(6, 0.1, F32), np.linspace(-1, 1, 6).astype(F32)
    if shrink:
        got = _run_op(om.apply_ftrl_v2, [var, acc, lin], grad, F32(0.2), F32(0.05),
                      F32(0.1), F32(shrink), F32(lr_power))
    else:
        got = _run_op(om.apply_ftrl, [var, acc, lin], grad, F32(0.2), F32(0.05), F32(0.1),
                      F32(lr_power))
    want = ref_ftrl(var, acc, lin, grad, F32(0.2), F32(0.05), F32(0.1), F32(lr_power),
                    F32(shrink))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@settings(max_examples=15, deadline=None)
@given(_vals, st.sampled_from([0.0, 0.05]), st.integers(1, 50))
def test_adagrad_da_kernel(grad, l1, step):
    var, ga, gg = np.zeros(6, F32), np.linspace(-1, 1, 6).astype(F32), np.full(6, 0.1, F32)
    got = _run_op(om.apply_adagrad_da, [var, ga, gg], grad, F32(0.3), F32(l1), F32(0.01),
                  np.int64(step))
    want = ref_adagrad_da(var, ga, gg, grad, F32(0.3), F32(l1), F32(0.01), step)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("rows", [[0, 2], [2, 0, 2]])
def test_sparse_ftrl_updates_only_named_rows_in_order(rows):
    var = np.arange(8, dtype=F32).reshape(4, 2) / 4
    acc, lin = np.full((4, 2), 0.1, F32), np.zeros((4, 2), F32)
    grad = np.linspace(-1, 1, 2 * len(rows)).astype(F32).reshape(len(rows), 2)
    got = _run_op(om.sparse_apply_ftrl, [var, acc, lin], grad, np.array(rows, np.int32),
                  F32(0.2), F32(0.01), F32(0.1), F32(-0.5))
    want = [var.copy(), acc.copy(), lin.copy()]
    for k, r in enumerate(rows):
        v, a, l_ = ref_ftrl(want[0][r], want[1][r], want[2][r], grad[k], F32(0.2),
                            F32(0.01), F32(0.1), F32(-0.5))
        want[0][r], want[1][r], want[2][r] = v, a, l_
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)
    untouched = [i for i in range(4) if i not in rows]
    np.testing.assert_array_equal(got[0][untouched], var[untouched])


def test_sparse_index_out_of_range_and_bad_hyperparameters():
    with tf.Graph().as_default():
        v = tf.Variable(np.zeros((3, 2), F32))
        op = om.sparse_apply_proximal_gradient_descent(
            v, F32(0.1), F32(0), F32(0), np.ones((1, 2), F32), np.array([5], np.int64))
        a, lin = tf.Variable(np.ones(2, F32)), tf.Variable(np.zeros(2, F32))
        w = tf.Variable(np.zeros(2, F32))
        bad_lr = om.apply_ftrl(w, a, lin, np.ones(2, F32), F32(-1), F32(0), F32(0),
                               F32(-0.5))
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            with pytest.raises(errors.InvalidArgumentError,
                               match="Index 5 at offset 0 in indices is out of range"):
                s.run(op)
            with pytest.raises(errors.InvalidArgumentError, match="lr is not a positive"):
                s.run(bad_lr)
    with tf.Graph().as_default(), pytest.raises(ValueError, match="rank 0"):
        om.apply_proximal_gradient_descent(tf.Variable(np.zeros(2, F32)), [0.1, 0.2], 0.0,
                                           0.0, np.ones(2, F32))


def _train(make_opt, sparse=False, steps=3):
    with tf.Graph().as_default():
        w = tf.Variable(np.array([[0.5, -1.0], [2.0, 0.3], [-0.7, 0.1]], F32), name="w")
        gs = tf.train.get_or_create_global_step()
        if sparse:
            rows = tf.gather(w, [0, 2, 0])
            loss = tf.reduce_sum(tf.square(rows - 1.0))
        else:
            loss = tf.reduce_sum(tf.square(w - 1.0))
        opt = make_opt(gs)
        train = opt.minimize(loss, global_step=gs)
        slots = {n: opt.get_slot(w, n).op.name for n in opt.get_slot_names()}
        coll = [v.op.name for v in tf.trainable_variables()]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for _ in range(steps):
                s.run(train)
            return s.run(w), slots, coll, s.run(gs)


@pytest.mark.parametrize("make,slots", [
    (lambda gs: tf.train.FtrlOptimizer(0.1), {"accum": "w/Ftrl", "linear": "w/Ftrl_1"}),
    (lambda gs: tf.train.FtrlOptimizer(0.1, accum_name="A", linear_name="L"),
     {"accum": "w/A", "linear": "w/L"}),
    (lambda gs: tf.train.ProximalGradientDescentOptimizer(0.1), {}),
    (lambda gs: tf.train.ProximalAdagradOptimizer(0.1),
     {"accumulator": "w/ProximalAdagrad"}),
    (lambda gs: tf.train.AdagradDAOptimizer(0.1, gs),
     {"gradient_accumulator": "w/AdagradDA", "gradient_squared_accumulator": "w/AdagradDA_1"}),
])
@pytest.mark.parametrize("sparse", [False, True])
def test_optimizer_slots_and_training(make, slots, sparse):
    w, got_slots, trainable, step = _train(make, sparse)
    assert got_slots == slots
    assert trainable == ["w"]  # slots are not trainable
    assert step == 3
    assert np.abs(w - 1.0).sum() < np.abs(np.array([[0.5, -1.0], [2.0, 0.3], [-0.7, 0.1]]) - 1).sum()


def test_proximal_gd_dense_matches_reference_over_steps():
    w0 = np.array([[0.5, -1.0], [2.0, 0.3], [-0.7, 0.1]], F32)
    w, _, _, _ = _train(lambda gs: tf.train.ProximalGradientDescentOptimizer(0.1, 0.05, 0.1))
    ref = w0.copy()
    for _ in range(3):
        ref = ref_fobos(ref - (F32(2) * (ref - F32(1))) * F32(0.1), F32(0.1), F32(0.05),
                        F32(0.1))
    np.testing.assert_allclose(w, ref, rtol=1e-6)


def test_optimizer_argument_errors():
    with pytest.raises(ValueError, match="learning_rate_power"):
        tf.train.FtrlOptimizer(0.1, learning_rate_power=0.5)
    with pytest.raises(ValueError, match="l1_regularization_strength"):
        tf.train.FtrlOptimizer(0.1, l1_regularization_strength=-1.0)
    with pytest.raises(ValueError, match="initial_accumulator_value must be positive"):
        tf.train.ProximalAdagradOptimizer(0.1, initial_accumulator_value=0.0)
    with pytest.raises(ValueError, match="initial_gradient_squared_accumulator_value"):
        tf.train.AdagradDAOptimizer(0.1, None, initial_gradient_squared_accumulator_value=0)


def _decays(fn, steps):
    with tf.Graph().as_default():
        step = tf.placeholder(tf.int64, [])
        t = fn(step)
        with tf.Session() as s:
            return np.array([s.run(t, {step: i}) for i in steps])


def test_cosine_decays_follow_tf_formulas():
    steps = [0, 5, 10, 15, 40, 120]
    got = _decays(lambda s: tf.train.cosine_decay(0.1, s, 100, alpha=0.1), steps)
    want = [0.1 * (0.9 * 0.5 * (1 + math.cos(math.pi * min(i, 100) / 100)) + 0.1)
            for i in steps]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    got = _decays(lambda s: tf.train.linear_cosine_decay(0.1, s, 100, num_periods=2.0), steps)
    want = [0.1 * (((100 - min(i, 100)) / 100) * 0.5 * (1 + math.cos(
        math.pi * 4.0 * min(i, 100) / 100)) + 0.001) for i in steps]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-8)


def _sgdr(i, first, t_mul, m_mul, alpha):
    frac = i / first
    if t_mul == 1.0:
        r = math.floor(frac)
        frac -= r
    else:
        r = math.floor(math.log(1 - frac * (1 - t_mul)) / math.log(t_mul))
        frac = (frac - (1 - t_mul ** r) / (1 - t_mul)) / t_mul ** r
    return (1 - alpha) * 0.5 * m_mul ** r * (1 + math.cos(math.pi * frac)) + alpha


@pytest.mark.parametrize("t_mul,m_mul", [(2.0, 1.0), (1.0, 0.5)])
def test_cosine_decay_restarts(t_mul, m_mul):
    steps = [0, 3, 10, 11, 29, 30, 45]
    got = _decays(lambda s: tf.train.cosine_decay_restarts(0.1, s, 10, t_mul, m_mul, 0.01),
                  steps)
    want = [0.1 * _sgdr(i, 10, t_mul, m_mul, 0.01) for i in steps]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_noisy_linear_cosine_and_piecewise_alias():
    got = _decays(lambda s: tf.train.noisy_linear_cosine_decay(0.1, s, 100), [100])
    np.testing.assert_allclose(got, [0.1 * 0.001], rtol=1e-5)  # no noise left at the end
    noisy = _decays(lambda s: tf.train.noisy_linear_cosine_decay(0.1, s, 100), [10] * 4)
    assert len(set(noisy.tolist())) > 1
    assert tf.train.piecewise_constant_decay is tf.train.piecewise_constant
    with pytest.raises(ValueError, match="requires global_step"):
        tf.train.cosine_decay(0.1, None, 10)
