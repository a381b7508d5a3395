"""The rest of ``tf.train`` (helper AA: FTRL, proximal GD, proximal Adagrad, AdagradDA,
the cosine decays, ExponentialMovingAverage) under TensorFlow and flowrt: the same losses
and variables after N steps (dense and sparse gradients), slot names, the same decayed
learning rates, the same EMA shadow values and ``variables_to_restore`` maps, and a
checkpoint written by one read by the other through ``variables_to_restore``.

Tolerances: float32 FTRL with ``learning_rate_power != -0.5`` uses ``pow`` (Eigen's and
numpy's differ in the last bit); the decays use ``cos`` (Eigen's vectorised cosine differs
by about 1e-8 absolute near its zeros).
"""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

from compat_harness import module, run_custom

W0 = np.array([[0.5, -1.0], [2.0, 0.3], [-0.7, 0.1]], np.float32)
X = np.array([[1., 2., 3.], [-1., 0.5, 2.]], np.float32)

OPTS = {
    "ftrl": lambda tf, gs: tf.train.FtrlOptimizer(
        0.1, l1_regularization_strength=0.01, l2_regularization_strength=0.02),
    "ftrl_power": lambda tf, gs: tf.train.FtrlOptimizer(
        0.1, learning_rate_power=-0.7, initial_accumulator_value=0.3,
        l1_regularization_strength=0.05),
    "ftrl_v2": lambda tf, gs: tf.train.FtrlOptimizer(
        0.1, l1_regularization_strength=0.05, l2_shrinkage_regularization_strength=0.1),
    "proximal_gd": lambda tf, gs: tf.train.ProximalGradientDescentOptimizer(0.05, 0.01, 0.02),
    "proximal_gd_l2": lambda tf, gs: tf.train.ProximalGradientDescentOptimizer(0.05, 0.0, 0.1),
    "proximal_adagrad": lambda tf, gs: tf.train.ProximalAdagradOptimizer(
        0.1, l1_regularization_strength=0.01, l2_regularization_strength=0.02),
    "adagrad_da": lambda tf, gs: tf.train.AdagradDAOptimizer(
        0.1, gs, l1_regularization_strength=0.01, l2_regularization_strength=0.02),
    "adagrad_da_no_l1": lambda tf, gs: tf.train.AdagradDAOptimizer(0.1, gs),
}


def _train(tf, which, sparse, column):
    w = tf.Variable(W0[:, :1] if column else W0, name="w")
    gs = tf.train.get_or_create_global_step()
    if sparse:
        rows = tf.gather(w, [0, 2, 0])
        loss = tf.reduce_sum(tf.square(tf.reduce_sum(rows, 0) - 1.0))
    else:
        loss = tf.reduce_sum(tf.square(tf.matmul(X, w) - 1.0))
    opt = OPTS[which](tf, gs)
    train = opt.minimize(loss, global_step=gs)
    slots = {n: opt.get_slot(w, n).op.name for n in opt.get_slot_names()}
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        losses = [s.run([loss, train])[0] for _ in range(6)]
        return {"losses": np.array(losses), "w": s.run(w), "slots": slots,
                "slot_values": [s.run(opt.get_slot(w, n)) for n in opt.get_slot_names()]}


@pytest.mark.parametrize("column", [False, True], ids=["rows", "scalar_rows"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("which", sorted(OPTS))
def test_optimizer_steps(which, sparse, column):
    run_custom(lambda tf: _train(tf, which, sparse, column), rtol=2e-6, atol=1e-7)


def _decays(tf):
    step = tf.placeholder(tf.int64, [])
    ts = [tf.train.cosine_decay(0.1, step, 100, alpha=0.1),
          tf.train.cosine_decay_restarts(0.1, step, 10),
          tf.train.cosine_decay_restarts(0.1, step, 10, t_mul=1.0, m_mul=0.5, alpha=0.01),
          tf.train.cosine_decay_restarts(0.2, step, 7, t_mul=3.0, m_mul=0.8),
          tf.train.linear_cosine_decay(0.1, step, 100, num_periods=2.0),
          tf.train.linear_cosine_decay(0.1, step, 100, alpha=0.2, beta=0.01),
          tf.train.noisy_linear_cosine_decay(0.1, step, 100, initial_variance=0.0),
          tf.train.piecewise_constant_decay(step, [10, 50], [1.0, 0.5, 0.1])]
    with tf.Session() as s:
        return np.array([s.run(ts, {step: i}) for i in [0, 1, 9, 10, 11, 35, 69, 99, 100, 150]])


def test_decays():
    run_custom(_decays, rtol=1e-5, atol=1e-7)


def _ema(tf):
    w = tf.Variable([1.0, 2.0], name="w")
    b = tf.Variable(3.0, name="b")
    gs = tf.train.get_or_create_global_step()
    t = tf.constant([4.0, -1.0]) * tf.cast(gs + 1, tf.float32)
    ema = tf.train.ExponentialMovingAverage(0.9, num_updates=gs, zero_debias=True)
    upd = ema.apply([w, b, t])
    with tf.control_dependencies([upd]):
        train = tf.group(w.assign_add([1.0, -1.0]), b.assign(b * 2.0), tf.assign_add(gs, 1))
    out = {"names": sorted(v.op.name for v in tf.global_variables()),
           "mav": [v.op.name for v in tf.moving_average_variables()],
           "avg_name": ema.average_name(w), "avg_name_new": ema.average_name(gs),
           "restore": sorted((k, v.op.name) for k, v in ema.variables_to_restore().items())}
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        for _ in range(4):
            s.run(train)
        out["vals"] = s.run([ema.average(w), ema.average(b), ema.average(t)])
    return out


def test_exponential_moving_average():
    run_custom(_ema, rtol=1e-6)


def _save_with(tf, path):
    with tf.Graph().as_default():
        w = tf.Variable([1.0, 2.0], name="w")
        ema = tf.train.ExponentialMovingAverage(0.5)
        upd = ema.apply([w])
        with tf.control_dependencies([upd]):
            step = w.assign_add([2.0, 2.0])
        saver = tf.train.Saver()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(step)
            s.run(step)
            saver.save(s, path)
            return s.run(ema.average(w))


def _restore_with(tf, path):
    with tf.Graph().as_default():
        w = tf.Variable([0.0, 0.0], name="w")
        saver = tf.train.Saver(tf.train.ExponentialMovingAverage(0.5).variables_to_restore())
        with tf.Session() as s:
            saver.restore(s, path)
            return s.run(w)


@pytest.mark.parametrize("writer,reader", [("tf", "flowrt"), ("flowrt", "tf")])
def test_ema_checkpoint_across(writer, reader):
    path = os.path.join(tempfile.mkdtemp(prefix="flowrt_compat_ema_"), "m")
    avg = _save_with(module(writer), path)
    np.testing.assert_allclose(_restore_with(module(reader), path), avg, rtol=1e-6)
