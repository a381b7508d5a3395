"""tf.gradients behaviour over the math gradients, and the numerical gradient checker
(``tf.test.compute_gradient`` / ``compute_gradient_error``) itself."""
from __future__ import annotations

import numpy as np
import pytest

import flowrt as tf
from flowrt.graph import apply_op


def _run(g, fetches, feed=None):
    with tf.Session(graph=g) as s:
        return s.run(fetches, feed)


# =======================================================================================
# compute_gradient / compute_gradient_error
# =======================================================================================
def test_compute_gradient_returns_both_jacobians():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [2, 3])
        y = tf.reduce_sum(x * x, axis=1)  # y_i = sum_j x_ij^2
    xv = np.arange(6.0).reshape(2, 3) / 10
    with tf.Session(graph=g):
        jt, jn = tf.test.compute_gradient(x, [2, 3], y, [2], x_init_value=xv, delta=1e-4)
    assert jt.shape == (6, 2) and jn.shape == (6, 2)
    assert jt.dtype == np.float64 and jn.dtype == np.float64
    expected = np.zeros((6, 2))
    expected[:3, 0] = 2 * xv[0]
    expected[3:, 1] = 2 * xv[1]
    np.testing.assert_allclose(jt, expected, rtol=1e-12)
    np.testing.assert_allclose(jn, expected, atol=1e-8)


def test_numerical_jacobian_is_a_central_difference():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [3])
        y = x * x * x
    xv = np.array([0.5, 1.0, 2.0])
    with tf.Session(graph=g):
        jt, jn = tf.test.compute_gradient(x, [3], y, [3], x_init_value=xv, delta=0.1)
        err = tf.test.compute_gradient_error(x, [3], y, [3], x_init_value=xv, delta=0.1)
    # ((x+d)^3 - (x-d)^3) / 2d = 3x^2 + d^2
    np.testing.assert_allclose(np.diag(jn), 3 * xv ** 2 + 0.01, rtol=1e-12)
    np.testing.assert_allclose(np.diag(jt), 3 * xv ** 2, rtol=1e-12)
    assert err == pytest.approx(0.01, rel=1e-9)
    assert err == np.abs(jt - jn).max()


def test_compute_gradient_list_of_inputs_and_extra_feeds():
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder(tf.float64, [2])
        b = tf.placeholder(tf.float64, [3])
        scale = tf.placeholder(tf.float64, [])
        y = tf.reshape(a, [2, 1]) * tf.reshape(b, [1, 3]) * scale
    av, bv = np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0])
    feeds = {a: av, b: bv, scale: 2.0}
    with tf.Session(graph=g):
        out = tf.test.compute_gradient([a, b], [[2], [3]], y, [2, 3], x_init_value=[av, bv],
                                       extra_feed_dict=feeds)
        err = tf.test.compute_gradient_error([a, b], [[2], [3]], y, [2, 3],
                                             x_init_value=[av, bv], extra_feed_dict=feeds)
    assert isinstance(out, list) and len(out) == 2
    (ja_t, ja_n), (jb_t, jb_n) = out
    assert ja_t.shape == (2, 6) and jb_t.shape == (3, 6)
    # dy[i, j] / da[i] = 2 * b[j]
    np.testing.assert_allclose(ja_t[0], [6.0, 8.0, 10.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(jb_t[:, 3:], 2 * np.diag([2.0, 2.0, 2.0]))
    assert err < 1e-8


def test_compute_gradient_random_init_and_init_targets():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.array([1.0, -2.0]), name="v")
        x = tf.placeholder(tf.float64, [2])
        y = v * tf.sin(x)
    with tf.Session(graph=g):
        # no x_init_value: random values in [0, 1); the variable is initialised first
        err = tf.test.compute_gradient_error(x, [2], y, [2], init_targets=[v.initializer],
                                             delta=1e-4)
        assert err < 1e-7
        # gradient with respect to the variable itself
        jt, jn = tf.test.compute_gradient(v, [2], y, [2], extra_feed_dict={x: [0.5, 1.5]},
                                          x_init_value=np.array([1.0, 2.0]))
    np.testing.assert_allclose(np.diag(jt), np.sin([0.5, 1.5]), rtol=1e-12)
    np.testing.assert_allclose(jt, jn, atol=1e-9)


def test_compute_gradient_complex_counts_twice_as_many_reals():
    g = tf.Graph()
    with g.as_default():
        z = tf.placeholder(tf.complex128, [2])
        r = tf.abs(z)                      # complex -> real
        w = z * tf.constant(2 + 1j, tf.complex128)  # complex -> complex
    zv = np.array([3 + 4j, 1 - 1j])
    with tf.Session(graph=g):
        jt, jn = tf.test.compute_gradient(z, [2], r, [2], x_init_value=zv, delta=1e-4)
        assert jt.shape == (4, 2)
        # d|z|/d re = re/|z|, d|z|/d im = im/|z| for the first element
        np.testing.assert_allclose(jt[:2, 0], [0.6, 0.8], rtol=1e-12)
        np.testing.assert_allclose(jt, jn, atol=1e-8)
        jt, jn = tf.test.compute_gradient(z, [2], w, [2], x_init_value=zv, delta=1e-4)
        assert jt.shape == (4, 4)
        # w = (2 + i) z: d re(w)/d re(z) = 2, d im(w)/d re(z) = 1
        np.testing.assert_allclose(jt[0, :2], [2.0, 1.0], rtol=1e-12)
        np.testing.assert_allclose(jt, jn, atol=1e-8)


def test_compute_gradient_unconnected_and_empty():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [2])
        other = tf.placeholder(tf.float64, [2])
        y = other * 3.0
        e = tf.placeholder(tf.float64, [0])
        ye = e * 2.0
    with tf.Session(graph=g):
        jt, jn = tf.test.compute_gradient(x, [2], y, [2], extra_feed_dict={other: [1.0, 2.0]})
        np.testing.assert_array_equal(jt, np.zeros((2, 2)))
        np.testing.assert_array_equal(jn, np.zeros((2, 2)))
        jt, jn = tf.test.compute_gradient(e, [0], ye, [0])
        assert jt.shape == (0, 0) and jn.shape == (0, 0)
        assert tf.test.compute_gradient_error(e, [0], ye, [0]) == 0


def test_compute_gradient_errors():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [2])
        y = x * 2.0
        xi = tf.placeholder(tf.int32, [2])
        yi = tf.cast(xi, tf.float64)
    with pytest.raises(ValueError, match="default session"):
        tf.test.compute_gradient(x, [2], y, [2])
    with tf.Session(graph=g):
        with pytest.raises(AssertionError, match="init_data shape"):
            tf.test.compute_gradient(x, [2], y, [2], x_init_value=np.zeros(3))
        with pytest.raises(AssertionError, match="Don't support type int32 for x"):
            tf.test.compute_gradient(xi, [2], yi, [2], x_init_value=np.zeros(2, np.int32))


def test_test_namespace_device_queries():
    from flowrt.runtime import default_runtime

    gpu = default_runtime().device_types.get("GPU")
    has_gpu = bool(gpu is not None and gpu.discover(None, "localhost", 0))
    assert tf.test.is_gpu_available() is has_gpu
    assert tf.test.is_gpu_available(cuda_only=True) is has_gpu
    import importlib.util

    has_cupy = importlib.util.find_spec("cupy") is not None
    assert tf.test.is_built_with_cuda() is has_cupy
    assert tf.test.is_built_with_gpu_support() is has_cupy
    assert tf.test.is_built_with_rocm() is False
    assert tf.test.gpu_device_name() == ("/device:GPU:0" if has_gpu else "")


# =======================================================================================
# tf.gradients over math ops
# =======================================================================================
def test_multiple_paths_are_summed():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [3])
        y = x * x + tf.sin(x)
        (gx,) = tf.gradients(y, x)
    xv = np.array([0.1, 0.7, -1.3])
    np.testing.assert_allclose(_run(g, gx, {x: xv}), 2 * xv + np.cos(xv), rtol=1e-12)
    with tf.Session(graph=g):
        assert tf.test.compute_gradient_error(x, [3], y, [3], x_init_value=xv,
                                              delta=1e-4) < 1e-7


def test_several_ys_and_shared_subexpressions():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, 2.0], tf.float64)
        h = tf.exp(x)
        y1 = tf.reduce_sum(h * 2.0)
        y2 = tf.reduce_sum(h * h)
        (gx,) = tf.gradients([y1, y2], x)
    e = np.exp([1.0, 2.0])
    np.testing.assert_allclose(_run(g, gx), 2 * e + 2 * e * e, rtol=1e-12)


def test_unconnected_inputs_give_none_or_zeros():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [2])
        z = tf.placeholder(tf.float64, [2])
        y = tf.square(x)
        gx, gz = tf.gradients(y, [x, z])
        assert gz is None
        gz0 = tf.gradients(y, [x, z], unconnected_gradients="zero")[1]
    np.testing.assert_array_equal(_run(g, gz0, {x: [1.0, 2.0], z: [3.0, 4.0]}), [0.0, 0.0])
    np.testing.assert_array_equal(_run(g, gx, {x: [1.0, 2.0]}), [2.0, 4.0])


def test_integer_inputs_give_none():
    g = tf.Graph()
    with g.as_default():
        xi = tf.placeholder(tf.int32, [2])
        xf = tf.placeholder(tf.float64, [2])
        y = tf.cast(xi, tf.float64) * xf + tf.cast(xi * 2, tf.float64)
        gi, gf = tf.gradients(y, [xi, xf])
    assert gi is None
    np.testing.assert_array_equal(_run(g, gf, {xi: [3, 4], xf: [1.0, 1.0]}), [3.0, 4.0])


def test_stop_gradient_blocks():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [2])
        y = x * tf.stop_gradient(x)
        (gx,) = tf.gradients(y, x)
        a = tf.placeholder(tf.float64, [])
        b = a * 3.0
        (ga,) = tf.gradients(a + b, a, stop_gradients=[b])
        assert tf.gradients(tf.stop_gradient(x) * 2.0, x) == [None]
    np.testing.assert_array_equal(_run(g, gx, {x: [2.0, 5.0]}), [2.0, 5.0])
    assert _run(g, ga, {a: 1.0}) == 1.0


def test_grad_ys():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [3])
        y = tf.square(x)
        (gx,) = tf.gradients(y, x, grad_ys=tf.constant([1.0, 10.0, 100.0], tf.float64))
        (gl,) = tf.gradients(y, x, grad_ys=[np.array([0.5, 0.5, 0.5])])
        with pytest.raises(ValueError, match="incompatible"):
            tf.gradients(y, x, grad_ys=tf.constant([1.0, 2.0], tf.float64))
    np.testing.assert_array_equal(_run(g, gx, {x: [1.0, 2.0, 3.0]}), [2.0, 40.0, 600.0])
    np.testing.assert_array_equal(_run(g, gl, {x: [1.0, 2.0, 3.0]}), [1.0, 2.0, 3.0])


@tf.RegisterGradient("MathGradTestTimesTen")
def _times_ten(op, grad):
    return [grad * 10.0]


tf.NotDifferentiable("MathGradTestNoGradient")


def test_gradient_override_map():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [2])
        with g.gradient_override_map({"Square": "MathGradTestTimesTen"}):
            y = tf.square(x)
        y2 = tf.square(x)
        (gx,) = tf.gradients(y, x)
        (gx2,) = tf.gradients(y2, x)
    assert y.op.get_attr("_gradient_op_type") in (b"MathGradTestTimesTen",
                                                  "MathGradTestTimesTen")
    np.testing.assert_array_equal(_run(g, gx, {x: [1.0, 2.0]}), [10.0, 10.0])
    np.testing.assert_array_equal(_run(g, gx2, {x: [1.0, 2.0]}), [2.0, 4.0])


def test_not_differentiable():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [2])
        with g.gradient_override_map({"Exp": "MathGradTestNoGradient"}):
            y = tf.exp(x)
        assert tf.gradients(y, x) == [None]
        # the other path still contributes
        (gx,) = tf.gradients(y + 3.0 * x, x)
    np.testing.assert_array_equal(_run(g, gx, {x: [1.0, 2.0]}), [3.0, 3.0])


def test_lookup_error_for_op_without_gradient():
    # TF registers no gradient for TruncateMod
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [2])
        y = tf.truncatemod(x, 2.0)
        with pytest.raises(LookupError, match="No gradient defined for operation.*"
                                              "TruncateMod"):
            tf.gradients(y, x)


def test_gradient_with_respect_to_a_variable():
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(np.array([[1.0, 2.0], [3.0, 4.0]]))
        x = tf.constant([[1.0, -1.0]], tf.float64)
        loss = tf.reduce_sum(tf.square(tf.matmul(x, w)))
        (gw,) = tf.gradients(loss, w)
        init = tf.global_variables_initializer()
    with tf.Session(graph=g) as s:
        s.run(init)
        # x @ w = [-2, -2]; dloss/dw = x^T (2 * x @ w)
        np.testing.assert_allclose(s.run(gw), [[-4.0, -4.0], [4.0, 4.0]])


def test_second_derivatives_through_fused_grad_ops():
    x = np.array([0.3, 0.9, 1.7])
    g = tf.Graph()
    with g.as_default():
        t = tf.constant(x)
        outs = {}
        for name, fn in (("sigmoid", tf.sigmoid), ("tanh", tf.tanh), ("sqrt", tf.sqrt),
                         ("rsqrt", tf.math.rsqrt), ("reciprocal", tf.math.reciprocal)):
            (d1,) = tf.gradients(fn(t), t)
            (d2,) = tf.gradients(d1, t)
            outs[name] = d2
        types = {o.type for o in g.get_operations()}
    assert {"SigmoidGrad", "TanhGrad", "SqrtGrad", "RsqrtGrad", "ReciprocalGrad"} <= types
    r = _run(g, outs)
    s, th = 1 / (1 + np.exp(-x)), np.tanh(x)
    np.testing.assert_allclose(r["sigmoid"], s * (1 - s) * (1 - 2 * s), rtol=1e-12)
    np.testing.assert_allclose(r["tanh"], -2 * th * (1 - th * th), rtol=1e-12)
    np.testing.assert_allclose(r["sqrt"], -0.25 * x ** -1.5, rtol=1e-12)
    np.testing.assert_allclose(r["rsqrt"], 0.75 * x ** -2.5, rtol=1e-12)
    np.testing.assert_allclose(r["reciprocal"], 2 / x ** 3, rtol=1e-12)


def test_fused_grad_ops_gradients_numerically():
    rng = np.random.RandomState(3)
    y, dy = rng.uniform(0.3, 0.9, (2, 3)), rng.uniform(-1, 1, (2, 3))
    for op_type in ("SigmoidGrad", "TanhGrad", "SqrtGrad", "RsqrtGrad", "ReciprocalGrad",
                    "InvGrad"):
        g = tf.Graph()
        with g.as_default():
            a, b = tf.constant(y), tf.constant(dy)
            z = apply_op(op_type, y=a, dy=b)
        with tf.Session(graph=g):
            err = tf.test.compute_gradient_error([a, b], [[2, 3], [2, 3]], z, [2, 3],
                                                 x_init_value=[y, dy], delta=1e-4)
        assert err < 1e-6, op_type


def test_hessians_of_a_cubic():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, 2.0], tf.float64)
        (h,) = tf.hessians(tf.reduce_sum(x * x * x), x)
    np.testing.assert_allclose(_run(g, h), np.diag([6.0, 12.0]))


def test_gradient_graph_dtypes_and_shapes():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        b = tf.placeholder(tf.float32, [3])
        y = tf.reduce_mean(tf.tanh(x + b), axis=0)
        gx, gb = tf.gradients(y, [x, b])
    assert gx.dtype == tf.float32 and gb.dtype == tf.float32
    assert gx.shape.as_list() == [None, 3]
    assert gb.shape.as_list() == [3]
    out = _run(g, [gx, gb], {x: np.zeros((4, 3), np.float32), b: np.zeros(3, np.float32)})
    np.testing.assert_allclose(out[0], np.full((4, 3), 0.25), rtol=1e-6)
    np.testing.assert_allclose(out[1], np.ones(3), rtol=1e-6)


def test_an_x_with_several_consumers_is_summed_once_and_grad_ys_get_identities():
    """As in TF: the gradient of an ``x`` that several ops consume is one AddN (the
    backward walk's sum, reused for the result, not summed again); each given grad_y
    becomes ``gradients/grad_ys_<i>``, an Identity (of a Const ``grad_y_<i>`` for an
    array), which is what a gradient equal to it is fetched as."""
    with tf.Graph().as_default() as g:
        x = tf.constant(np.ones((2, 4, 4, 3), np.float32))
        mx = tf.nn.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        av = tf.nn.avg_pool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME")
        gx, = tf.gradients(tf.reduce_sum(mx * mx) + tf.reduce_sum(av), [x])
        addns = [o for o in g.get_operations() if o.type == "AddN"]
        assert [o.name for o in addns] == ["gradients/AddN", "gradients/AddN_1"]
        assert gx.name == "gradients/AddN_1:0"
        y = x * 2.0
        gys = tf.gradients(y, [x, y], grad_ys=np.full((2, 4, 4, 3), 3, np.float32))
        assert gys[1].name == "gradients_1/grad_ys_0:0" and gys[1].op.type == "Identity"
        assert gys[1].op.inputs[0].op.name == "gradients_1/grad_y_0"
        mine = tf.constant(np.ones((2, 4, 4, 3), np.float32), name="mine")
        gys = tf.gradients(y, [x, y], grad_ys=mine)
        assert gys[1].name == "gradients_2/grad_ys_0:0"
        assert gys[1].op.inputs[0] is mine
        with tf.Session() as s:
            got = s.run([gx, gys[0]])
    np.testing.assert_allclose(got[1], np.full((2, 4, 4, 3), 2, np.float32))
    assert got[0].shape == (2, 4, 4, 3)
