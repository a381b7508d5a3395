"""The CPU kernels' fast paths against TensorFlow: convolutions over window rows and
tap-major patches (plugins/kernels/standard/nn_conv_rows.py), products split over the
intra-op threads or left to BLAS (math_ops.small_gemm_single_threaded), elementwise and
pooling kernels in row ranges (_common.row_parts), and a large variable's Adam update in
ranges. Each program is sized to take the path it names; values, dtypes, static shapes,
op names and types are compared, gradients included.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from compat_data import arr
from compat_harness import Steps, run_both, run_pair


def c(tf, v, dtype=None):
    return tf.constant(v, dtype or tf.float32)


def _conv_and_grads(x_shape, w_shape, strides, padding, dilations=(1, 1), seed=0,
                    via_convolution=False):
    """Conv2D and its input and filter gradients (a loss of sum(y * y)), NHWC.
    ``via_convolution``: build the dilated convolution as ``tf.nn.convolution`` does on
    TF's CPU (through SpaceToBatchND; TF's CPU Conv2D refuses dilations above 1, flowrt's
    computes them directly)."""
    x = arr(x_shape, seed=seed, lo=-1.0, hi=1.0)
    w = arr(w_shape, seed=seed + 1, lo=-0.5, hi=0.5)

    def program(tf):
        xt, wt = c(tf, x), c(tf, w)
        if via_convolution:
            y = tf.nn.convolution(xt, wt, padding, dilation_rate=list(dilations))
        else:
            y = tf.nn.conv2d(xt, wt, [1, *strides, 1], padding,
                             dilations=[1, *dilations, 1])
        gx, gw = tf.gradients(tf.reduce_sum(y * y), [xt, wt])
        return [y, gx, gw]
    return program


def _dilated_pair(x_shape, w_shape, padding, dilations, seed=0):
    """TF's program (through SpaceToBatchND) and flowrt's (Conv2D with dilations)."""
    return (_conv_and_grads(x_shape, w_shape, (1, 1), padding, dilations, seed, True),
            _conv_and_grads(x_shape, w_shape, (1, 1), padding, dilations, seed))


CONV = {
    # window rows of 5 x 16 values: the row path for all three kernels
    "rows_same": _conv_and_grads((4, 14, 14, 16), (5, 5, 16, 32), (1, 1), "SAME"),
    "rows_valid": _conv_and_grads((3, 11, 9, 16), (3, 4, 16, 8), (1, 1), "VALID"),
    # strides: rows stored by phase; the input gradient keeps its old path
    "rows_strided": _conv_and_grads((3, 13, 12, 16), (3, 3, 16, 8), (2, 3), "SAME"),
    "rows_strided_valid": _conv_and_grads((2, 12, 11, 32), (4, 2, 32, 4), (3, 2), "VALID"),
    "rows_explicit": _conv_and_grads((2, 9, 8, 16), (3, 3, 16, 8), (1, 1),
                                     [[0, 0], [2, 0], [1, 3], [0, 0]]),
    # one and three channels: tap-major patches (forward and filter gradient)
    "taps_one_channel": _conv_and_grads((4, 28, 28, 1), (5, 5, 1, 32), (1, 1), "SAME"),
    "taps_rgb_strided": _conv_and_grads((2, 17, 15, 3), (3, 3, 3, 8), (2, 2), "SAME"),
    # rows too thin for either: im2col
    "im2col_eight_channels": _conv_and_grads((2, 9, 9, 8), (3, 3, 8, 4), (1, 1), "SAME"),
}


@pytest.mark.parametrize("name", sorted(CONV))
def test_conv_paths(name):
    run_both(CONV[name], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_dilated_conv_rows(padding):
    run_pair(*_dilated_pair((2, 12, 12, 16), (3, 3, 16, 8), padding, (2, 2)), rtol=1e-4,
             atol=1e-3)


@given(n=st.integers(1, 3), h=st.integers(3, 10), w=st.integers(3, 10),
       c_in=st.sampled_from([1, 3, 16]), f=st.integers(1, 9), kh=st.integers(1, 4),
       kw=st.integers(2, 4), stride=st.integers(1, 2), dil=st.integers(1, 2),
       padding=st.sampled_from(["SAME", "VALID"]), seed=st.integers(0, 1000))
def test_conv_paths_property(n, h, w, c_in, f, kh, kw, stride, dil, padding, seed):
    if stride > 1:
        dil = 1  # TF: strides or dilations above 1, not both
    if padding == "VALID" and (h < (kh - 1) * dil + 1 or w < (kw - 1) * dil + 1):
        padding = "SAME"
    if dil > 1:
        run_pair(*_dilated_pair((n, h, w, c_in), (kh, kw, c_in, f), padding, (dil, dil),
                                seed), rtol=1e-4, atol=1e-3)
    else:
        run_both(_conv_and_grads((n, h, w, c_in), (kh, kw, c_in, f), (stride, stride),
                                 padding, seed=seed), rtol=1e-4, atol=1e-3)


# -- large elementwise and pooling kernels: over 1M values, in row ranges --------------
BIG = arr((8, 64, 64, 40), seed=11)  # 1.3M values
BIG_G = arr((8, 64, 64, 40), seed=12)
BIAS = arr((40,), seed=13)


def _relu_and_grad(tf):
    x = c(tf, BIG)
    y = tf.nn.relu(x)
    return [y, tf.gradients(y, x, grad_ys=c(tf, BIG_G))[0]]


def _bias_add_and_grads(tf):
    x, b = c(tf, BIG), c(tf, BIAS)
    y = tf.nn.bias_add(x, b)
    return [y] + tf.gradients(y, [x, b], grad_ys=c(tf, BIG_G))


def _pools_and_grads(tf):
    x = c(tf, BIG)
    mx = tf.nn.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    av = tf.nn.avg_pool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME")
    return [mx, av] + tf.gradients(tf.reduce_sum(mx * mx) + tf.reduce_sum(av), [x])


def _relu_int(tf):
    return tf.nn.relu(tf.constant(np.arange(-600_000, 600_000, dtype=np.int32)
                                  .reshape(12, 100_000)))


LARGE = {"relu_and_grad": _relu_and_grad, "bias_add_and_grads": _bias_add_and_grads,
         "pools_and_grads": _pools_and_grads, "relu_int32": _relu_int}


@pytest.mark.parametrize("name", sorted(LARGE))
def test_large_elementwise_and_pooling(name):
    run_both(LARGE[name], rtol=1e-5, atol=1e-2)


# -- large products: split along the longer side, thin ones on one thread, square ones
# -- on BLAS's threads (each over the 2^25 multiply-add bound) --------------------------
def _product(m, k, n, ta=False, tb=False, seed=20):
    a = arr((k, m) if ta else (m, k), seed=seed, lo=-1.0, hi=1.0)
    b = arr((n, k) if tb else (k, n), seed=seed + 1, lo=-1.0, hi=1.0)

    def program(tf):
        at, bt = c(tf, a), c(tf, b)
        p = tf.matmul(at, bt, transpose_a=ta, transpose_b=tb)
        return [p] + tf.gradients(tf.reduce_sum(p * p), [at, bt])
    return program


PRODUCTS = {
    "split_columns_dense_layer": _product(64, 600, 1200),
    "split_rows": _product(1200, 200, 150),
    "split_rows_transposed_a": _product(1200, 200, 150, ta=True),
    "split_columns_transposed_b": _product(150, 200, 1200, tb=True),
    "split_both_transposed": _product(300, 100, 1200, ta=True, tb=True),
    "thin_k_one_thread": _product(4800, 16, 1500),
    "square_blas_threads": _product(300, 320, 400),
    "float64_split": lambda tf: tf.matmul(c(tf, arr((64, 700), "float64", 30), tf.float64),
                                          c(tf, arr((700, 900), "float64", 31), tf.float64)),
}


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_large_products(name):
    run_both(PRODUCTS[name], rtol=1e-4, atol=1e-2)


# -- Adam on a variable over a million values: ranges on the intra-op threads ------------
def _adam_large(tf):
    v = tf.Variable(arr((1100, 1000), seed=40), name="v")
    grad = c(tf, arr((1100, 1000), seed=41))
    opt = tf.train.AdamOptimizer(0.01)
    train = opt.apply_gradients([(grad, v)])
    init = tf.global_variables_initializer()
    return Steps(init, train, train, train,
                 [v.read_value(), opt.get_slot(v, "m").read_value(),
                  opt.get_slot(v, "v").read_value()])


def test_adam_on_a_large_variable():
    run_both(_adam_large, rtol=1e-5, atol=1e-6, static_keys=("kind", "dtype", "shape"))


# -- the remapping pass: Conv2D + BiasAdd (+ Relu / Relu6) as one _FusedConv2D, training ----
def _conv_bias_act(act, x_shape, w_shape, strides, padding, seed=50):
    x = arr(x_shape, seed=seed, lo=-1.0, hi=1.0)
    w = arr(w_shape, seed=seed + 1, lo=-0.5, hi=0.5)
    b = arr(w_shape[-1:], seed=seed + 2, lo=-0.5, hi=0.5)

    def program(tf):
        # variables, not constants: constant folding would compute the chain at compile
        # time, before the remapping pass could fuse it
        xt, wt, bt = (tf.Variable(v, name=n) for v, n in ((x, "x"), (w, "w"), (b, "b")))
        y = tf.nn.bias_add(tf.nn.conv2d(xt, wt, [1, *strides, 1], padding), bt)
        if act is not None:
            y = getattr(tf.nn, act)(y)
        grads = tf.gradients(tf.reduce_sum(y * y), [xt, wt, bt])
        return Steps(tf.global_variables_initializer(), [y] + grads)
    return program


FUSED = {
    "rows_relu": _conv_bias_act("relu", (4, 14, 14, 16), (5, 5, 16, 32), (1, 1), "SAME"),
    "taps_relu6": _conv_bias_act("relu6", (4, 28, 28, 1), (5, 5, 1, 8), (1, 1), "SAME"),
    "im2col_bias_only": _conv_bias_act(None, (2, 9, 9, 8), (3, 3, 8, 4), (2, 1), "VALID"),
}


@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_conv_bias_activation(name):
    run_both(FUSED[name], rtol=1e-4, atol=1e-3, static_keys=("kind", "dtype", "shape"))


def _layers_cnn_adam(tf):
    """tf.layers conv2d with activation (fused here), pooling, dense, three Adam steps:
    the variables in place afterwards."""
    x = c(tf, arr((8, 12, 12, 3), seed=60, lo=0.0, hi=1.0))
    h = tf.layers.conv2d(x, 16, 3, padding="same", activation=tf.nn.relu,
                         kernel_initializer=tf.constant_initializer(
                             arr((3, 3, 3, 16), seed=61, lo=-0.3, hi=0.3)))
    h = tf.layers.max_pooling2d(h, 2, 2)
    logits = tf.layers.dense(tf.layers.flatten(h), 5, kernel_initializer=tf.constant_initializer(
        arr((576, 5), seed=62, lo=-0.1, hi=0.1)))
    loss = tf.reduce_mean(tf.square(logits))
    train = tf.train.AdamOptimizer(0.01).minimize(loss)
    init = tf.global_variables_initializer()
    return Steps(init, train, train, train, [loss] + tf.trainable_variables())


def test_layers_cnn_trains_the_same():
    run_both(_layers_cnn_adam, rtol=1e-4, atol=1e-5, static_keys=("kind", "dtype", "shape"))


# -- bias gradients as matrix-vector products: BiasAddGrad and a Sum over leading axes ----
def _bias_grads(tf):
    x = c(tf, arr((64, 28, 28, 32), seed=70))
    b = c(tf, arr((32,), seed=71))
    g = tf.Variable(arr((64, 28, 28, 32), seed=72), name="g")  # (not folded)
    ya, yp = tf.nn.bias_add(x, b), x + b
    return Steps(tf.global_variables_initializer(),
                 tf.gradients(ya, [b], grad_ys=g.value()) + tf.gradients(yp, [b],
                                                                        grad_ys=g.value())
                 + [tf.reduce_sum(g, [0, 1]), tf.reduce_sum(g, 0, keepdims=True)])


def test_bias_gradients_as_column_sums():
    run_both(_bias_grads, rtol=1e-5, atol=1e-2, static_keys=("kind", "dtype", "shape"))


# -- momentum and plain SGD updating a large variable in place ---------------------------
def _momentum_large(tf):
    v = tf.Variable(arr((1100, 1000), seed=80), name="v")
    grad = c(tf, arr((1100, 1000), seed=81))
    opt = tf.train.MomentumOptimizer(0.01, 0.9, use_nesterov=True)
    train = opt.apply_gradients([(grad, v)])
    sgd = tf.train.GradientDescentOptimizer(0.1).apply_gradients([(grad, v)])
    init = tf.global_variables_initializer()
    return Steps(init, train, sgd, train,
                 [v.read_value(), opt.get_slot(v, "momentum").read_value()])


def test_momentum_and_sgd_on_a_large_variable():
    run_both(_momentum_large, rtol=1e-5, atol=1e-6, static_keys=("kind", "dtype", "shape"))
