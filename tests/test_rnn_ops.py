"""The fused LSTM cell op (plugins/kernels/standard/rnn_ops.py), the backward loop's
copied constants (control_flow_grad) and small GEMMs on one BLAS thread (cpu device)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors


def _sig(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def _ref_cell(x, c, h, w, b, fb):
    g = np.concatenate([x, h], 1).astype(np.float64) @ w + b
    i, j, f, o = np.split(g, 4, 1)
    nc = c * _sig(f + fb) + _sig(i) * np.tanh(j)
    return nc, np.tanh(nc) * _sig(o)


def _inputs(rng, batch, depth, n, dtype=np.float32):
    return (rng.standard_normal((batch, depth)).astype(dtype),
            rng.standard_normal((batch, n)).astype(dtype),
            rng.standard_normal((batch, n)).astype(dtype),
            (rng.standard_normal((depth + n, 4 * n)) * 0.5).astype(dtype),
            rng.standard_normal(4 * n).astype(dtype))


@settings(max_examples=10, deadline=None)
@given(batch=st.integers(1, 4), depth=st.integers(1, 5), n=st.integers(1, 4),
       fb=st.sampled_from([0.0, 1.0, -0.5]), seed=st.integers(0, 100))
def test_fused_cell_matches_numpy(batch, depth, n, fb, seed):
    vals = _inputs(np.random.default_rng(seed), batch, depth, n)
    with tf.Graph().as_default():
        c, h = tf._fused_basic_lstm_cell(*vals, forget_bias=fb)
        assert c.shape.as_list() == [batch, n] and h.shape.as_list() == [batch, n]
        assert c.dtype == tf.float32
        with tf.Session() as s:
            got_c, got_h = s.run([c, h])
    want_c, want_h = _ref_cell(*vals, fb)
    np.testing.assert_allclose(got_c, want_c, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_h, want_h, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_cell_gradients(dtype):
    rng = np.random.default_rng(3)
    vals = _inputs(rng, 3, 2, 2, dtype)
    with tf.Graph().as_default():
        ts = [tf.constant(v) for v in vals]
        c, h = tf._fused_basic_lstm_cell(*ts, forget_bias=1.0)
        y = tf.reduce_sum(c * 0.7) + tf.reduce_sum(h * h)
        with tf.Session():
            for t, v in zip(ts, vals):
                err = tf.test.compute_gradient_error(t, list(v.shape), y, [], x_init_value=v,
                                                     delta=1e-3 if dtype == np.float32
                                                     else 1e-6)
                assert err < (5e-2 if dtype == np.float32 else 1e-6), (t.name, err)


def test_fused_cell_gradient_of_h_only():
    vals = _inputs(np.random.default_rng(4), 2, 3, 2, np.float64)
    with tf.Graph().as_default():
        ts = [tf.constant(v) for v in vals]
        _, h = tf._fused_basic_lstm_cell(*ts)
        gs = tf.gradients(tf.reduce_sum(h), ts)
        assert all(g is not None for g in gs)
        assert [g.shape.as_list() for g in gs] == [list(v.shape) for v in vals]
        with tf.Session():
            err = tf.test.compute_gradient_error(ts[3], list(vals[3].shape),
                                                 tf.reduce_sum(h), [], x_init_value=vals[3])
        assert err < 1e-6


def test_fused_cell_static_shape_errors():
    with tf.Graph().as_default():
        x = tf.zeros([2, 3])
        c = tf.zeros([2, 4])
        with pytest.raises(ValueError, match="4 \\* num_units"):
            tf._fused_basic_lstm_cell(x, c, c, tf.zeros([7, 15]), tf.zeros([15]))
        with pytest.raises(ValueError, match="depth \\+ num_units"):
            tf._fused_basic_lstm_cell(x, c, c, tf.zeros([6, 16]), tf.zeros([16]))
        with pytest.raises(ValueError, match="cs_prev"):
            tf._fused_basic_lstm_cell(x, tf.zeros([2, 3]), c, tf.zeros([7, 16]),
                                      tf.zeros([16]))


def test_fused_cell_runtime_shape_error():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, None])
        c = tf.zeros([2, 4])
        nc, _ = tf._fused_basic_lstm_cell(x, c, c, tf.zeros([7, 16]), tf.zeros([16]))
        with tf.Session() as s:
            with pytest.raises(errors.InvalidArgumentError, match="FusedBasicLSTMCell"):
                s.run(nc, {x: np.zeros((2, 5), np.float32)})


@pytest.mark.parametrize("wrapped", [False, True])
def test_basic_lstm_cell_uses_fused_op_and_keeps_variables(wrapped):
    """dynamic_rnn of a BasicLSTMCell is one FusedLSTMSequence op; wrapped (here in a
    DropoutWrapper keeping everything) it is the while loop of fused cell steps."""
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [2, 5, 3])
        cell = tf.nn.rnn_cell.BasicLSTMCell(4)
        run = tf.nn.rnn_cell.DropoutWrapper(cell, output_keep_prob=1.0) if wrapped \
            else cell
        out, st_ = tf.nn.dynamic_rnn(run, x, dtype=tf.float32)
        assert sorted(v.name for v in tf.trainable_variables()) == [
            "rnn/basic_lstm_cell/bias:0", "rnn/basic_lstm_cell/kernel:0"]
        types = {op.type for op in g.get_operations()}
        fused = "FusedBasicLSTMCell" if wrapped else "FusedLSTMSequence"
        assert fused in types and ("While" in str(types) or "Enter" in types) == wrapped
        loss = tf.reduce_sum(out)
        grads = tf.gradients(loss, tf.trainable_variables())
        assert fused + "Grad" in {op.type for op in g.get_operations()}
        if wrapped:  # one stack per cell: the fused op's saved tensor (and the TA's)
            pushed = [op.inputs[1].op.type for op in g.get_operations()
                      if op.type == "StackPushV2"]
            assert pushed.count("FusedBasicLSTMCell") == 1 and "Const" not in pushed
        xs = np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            kv, bv = s.run([cell._kernel, cell._bias])
            o, gv = s.run([out, grads], {x: xs})
    h = np.zeros((2, 4))
    c = np.zeros((2, 4))
    for t in range(5):
        c, h = _ref_cell(xs[:, t], c, h, kv, bv, 1.0)
        np.testing.assert_allclose(o[:, t], h, rtol=1e-5, atol=1e-5)
    assert sorted(v.shape for v in gv) == [(7, 16), (16,)]


def test_custom_activation_cell_is_not_fused_and_constants_are_not_stacked():
    with tf.Graph().as_default() as g:
        x = tf.constant(np.random.default_rng(1).standard_normal((2, 4, 3)), tf.float64)
        cell = tf.nn.rnn_cell.BasicLSTMCell(2, activation=tf.nn.softsign)
        out, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float64)
        assert "FusedBasicLSTMCell" not in {op.type for op in g.get_operations()}
        loss = tf.reduce_sum(out * out)
        tf.gradients(loss, tf.trainable_variables())
        pushed = [op.inputs[1].op.type for op in g.get_operations()
                  if op.type == "StackPushV2"]
        assert "Const" not in pushed  # forget_bias is copied into the backward loop
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            k = cell._kernel
            # (fixed weights: the central-difference error depends on them, and random
            # ones came within 2x of the bound now and then)
            w0 = np.random.default_rng(4).uniform(-0.5, 0.5, k.shape.as_list())
            err = tf.test.compute_gradient_error(k, k.shape.as_list(), loss, [],
                                                 x_init_value=w0)
        assert err < 1e-6


def test_while_loop_constant_gradient():
    with tf.Graph().as_default():
        x = tf.constant(1.5, tf.float64)

        def body(i, v):
            return i + 1, v * tf.constant(1.25, tf.float64) + tf.constant(0.5, tf.float64)

        _, y = tf.while_loop(lambda i, v: i < 4, body, [tf.constant(0), x])
        gx = tf.gradients(y, x)[0]
        with tf.Session() as s:
            assert s.run(y) == pytest.approx((((1.5 * 1.25 + .5) * 1.25 + .5) * 1.25 + .5)
                                             * 1.25 + .5)
            assert s.run(gx) == pytest.approx(1.25 ** 4)


def test_small_matmul_results_unchanged():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((8, 6)).astype(np.float32)
    b = rng.standard_normal((6, 5)).astype(np.float32)
    big = rng.standard_normal((300, 300)).astype(np.float32)
    with tf.Graph().as_default():
        r = [tf.matmul(a, b), tf.matmul(b, a, transpose_a=True, transpose_b=True),
             tf.matmul(big, big)]
        with tf.Session() as s:
            got = s.run(r)
    np.testing.assert_allclose(got[0], a @ b, rtol=1e-5)
    np.testing.assert_allclose(got[1], b.T @ a.T, rtol=1e-5)
    np.testing.assert_allclose(got[2], big @ big, rtol=1e-4, atol=1e-3)
