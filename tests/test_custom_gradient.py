"""tf.custom_gradient in graph mode (inputs, nested outputs, variables), tf.grad_pass_through,
tf.recompute_grad, tf.init_scope, tf.get_static_value and the small framework names
(eager switches, version constants, tf.compat.dimension_at_index, variable creators)."""
from __future__ import annotations

import numpy as np
import pytest

import flowrt as tf
from flowrt import errors


@pytest.fixture
def g():
    graph = tf.Graph()
    with graph.as_default():
        yield graph


def test_custom_gradient_replaces_the_gradient(g):
    @tf.custom_gradient
    def log1pexp(x):
        e = tf.exp(x)

        def grad(dy):
            return dy * (1 - 1 / (1 + e))
        return tf.log(1 + e), grad

    x = tf.constant([0.0, 100.0])
    y = log1pexp(x)
    dx = tf.gradients(y, x)[0]
    assert y.op.type == "IdentityN" and log1pexp.__name__ == "log1pexp"
    with tf.Session() as sess:
        yv, dxv = sess.run([y, dx])
    np.testing.assert_allclose(dxv, [0.5, 1.0])
    assert np.isinf(yv[1])


def test_custom_gradient_several_inputs_and_outputs(g):
    @tf.custom_gradient
    def f(a, b):
        def grad(da, db):
            return da * 2.0 + db, da * 3.0
        return (a * b, a + b), grad

    a, b = tf.constant(2.0), tf.constant(5.0)
    p, s = f(a, b)
    ga, gb = tf.gradients([p, s], [a, b])
    gp = tf.gradients(p, a)[0]
    with tf.Session() as sess:
        assert sess.run([p, s]) == [10.0, 7.0]
        assert sess.run([ga, gb, gp]) == [3.0, 3.0, 2.0]


def test_custom_gradient_numeric_check(g):
    @tf.custom_gradient
    def cube(x):
        return x * x * x, lambda dy: dy * 3.0 * x * x

    x = tf.placeholder(tf.float64, [3])
    with tf.Session():
        err = tf.test.compute_gradient_error(x, [3], cube(x), [3],
                                             x_init_value=np.array([0.5, -1.0, 2.0]))
    assert err < 1e-6


def test_custom_gradient_with_variables(g):
    with tf.variable_scope("s", use_resource=True):
        @tf.custom_gradient
        def dense(x):
            w = tf.get_variable("w", [2], initializer=tf.constant_initializer(3.0))

            def grad(dy, variables=None):
                assert [v.name for v in variables] == ["s/w:0"]
                return dy * w, [dy * x * 10.0]
            return x * w, grad

        x = tf.constant([1.0, 2.0])
        y = dense(x)
    w = tf.global_variables()[0]
    gx, gw = tf.gradients(y, [x, w])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(gx), [3, 3])
        np.testing.assert_allclose(sess.run(gw), [10, 20])
        train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(y))
        sess.run(train)
        np.testing.assert_allclose(sess.run(w), [2, 1])


def test_custom_gradient_errors(g):
    v = tf.Variable([1.0])

    @tf.custom_gradient
    def uses_var(x):
        return x * v, lambda dy: dy

    with pytest.raises(TypeError, match="must accept keyword argument 'variables'"):
        uses_var(tf.constant([2.0]))

    @tf.custom_gradient
    def wrong_count(x):
        def grad(dy, variables=None):
            return dy, []
        return x * v, grad

    y = wrong_count(tf.constant([2.0]))
    with pytest.raises(ValueError, match="gradient for each variable"):
        tf.gradients(y, v)

    @tf.custom_gradient
    def kw(x, scale=1.0):
        return x * scale, lambda dy: dy

    with pytest.raises(ValueError, match="keywords arguments only when eager"):
        kw(tf.constant(1.0), scale=2.0)


def test_grad_pass_through(g):
    x = tf.constant([0.4, 1.6])
    y = tf.grad_pass_through(tf.round)(x)
    dx = tf.gradients(y * 3.0, x)[0]
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(y), [0, 2])
        np.testing.assert_allclose(sess.run(dx), [3, 3])


def test_recompute_grad(g):
    def block(x):
        w = tf.get_variable("w", [], initializer=tf.constant_initializer(2.0))
        return tf.sin(x) * w

    with tf.variable_scope("r", use_resource=True):
        x = tf.constant([0.5, 1.0])
        y = tf.recompute_grad(block)(x)
    w = tf.global_variables()[0]
    gx, gw = tf.gradients(y, [x, w])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(gx), 2 * np.cos([0.5, 1.0]), rtol=1e-6)
        np.testing.assert_allclose(sess.run(gw), np.sin(0.5) + np.sin(1.0), rtol=1e-6)
    assert len(tf.global_variables()) == 1  # the recomputation reused the variable


def test_init_scope_lifts_out_of_control_dependencies_and_cond(g):
    a = tf.constant(1.0, name="a")
    with tf.name_scope("outer"):
        with tf.control_dependencies([a]):
            with tf.init_scope():
                b = tf.constant(2.0, name="b")
            c = tf.identity(a, name="c")
    assert b.name == "outer/b:0" and not b.op.control_inputs
    assert c.op.control_inputs == [] or a.op in c.op.control_inputs

    made = []

    def branch():
        with tf.init_scope():
            made.append(tf.constant(3.0, name="lifted"))
        return tf.constant(1.0)

    tf.cond(tf.constant(True), branch, lambda: tf.constant(0.0))
    assert made[0].op._control_flow_context if hasattr(made[0].op, "_control_flow_context") \
        else True
    with tf.Session() as sess:
        assert sess.run(made[0]) == 3.0  # runs outside the cond


def test_get_static_value(g):
    c = tf.constant([1, 2])
    assert tf.get_static_value(c).tolist() == [1, 2]
    assert tf.get_static_value(tf.shape(tf.zeros([3, 4]))).tolist() == [3, 4]
    assert tf.get_static_value((c + 1) * 2).tolist() == [4, 6]
    p = tf.placeholder(tf.float32, [None])
    assert tf.get_static_value(p) is None
    assert tf.get_static_value(5) == 5
    s = tf.shape(tf.zeros([2]))
    tf.get_static_value(s)
    assert not g.is_feedable(s)  # TF: a tensor whose value was used cannot be fed


def test_eager_switches_and_constants():
    assert tf.executing_eagerly() is False
    assert tf.executing_eagerly_outside_functions() is False
    tf.disable_eager_execution()
    tf.disable_v2_behavior()
    tf.disable_control_flow_v2()
    tf.disable_resource_variables()
    tf.disable_tensor_equality()
    tf.disable_v2_tensorshape()
    assert tf.control_flow_v2_enabled() is False
    assert tf.resource_variables_enabled() is False
    with pytest.raises(NotImplementedError, match="graph mode only"):
        tf.enable_eager_execution()
    with pytest.raises(NotImplementedError, match="graph-mode"):
        tf.enable_v2_behavior()
    assert tf.VERSION == "1.15.0" and tf.version.VERSION == "1.15.0"
    assert tf.GIT_VERSION.startswith("v1.15.0")
    assert (tf.GRAPH_DEF_VERSION, tf.GRAPH_DEF_VERSION_MIN_CONSUMER,
            tf.GRAPH_DEF_VERSION_MIN_PRODUCER) == (134, 0, 0)
    assert tf.CXX11_ABI_FLAG == 0 and tf.MONOLITHIC_BUILD == 0
    assert tf.qint8 in tf.QUANTIZED_DTYPES and tf.float32 not in tf.QUANTIZED_DTYPES
    assert tf.OpError is errors.OpError
    assert tf.get_logger().name == "tensorflow"
    with pytest.raises(errors.NotFoundError, match="native op libraries"):
        tf.load_op_library("libfoo.so")


def test_compat_dimension_helpers():
    s = tf.TensorShape([3, None])
    assert tf.compat.dimension_value(s[0]) == 3
    assert tf.compat.dimension_value(s[1]) is None
    assert tf.compat.dimension_at_index(s, 0).value == 3
    assert tf.compat.dimension_at_index(tf.TensorShape(None), 5).value is None
    assert tf.dimension_at_index(s, 1).value is None


def test_enums(g):
    assert tf.VariableAggregation.ONLY_FIRST_TOWER is tf.VariableAggregation.ONLY_FIRST_REPLICA
    assert [e.value for e in tf.VariableSynchronization] == [0, 1, 2, 3]
    v = tf.Variable(1.0, synchronization=tf.VariableSynchronization.ON_READ,
                    aggregation=tf.VariableAggregation.MEAN)
    assert not v.trainable and v.aggregation is tf.VariableAggregation.MEAN
    with pytest.raises(ValueError, match="ON_READ only for non-trainable"):
        tf.Variable(1.0, trainable=True, synchronization=tf.VariableSynchronization.ON_READ)
    w = tf.get_variable("w", [1], aggregation=tf.VariableAggregation.SUM)
    assert w.trainable


def test_variable_creator_scope_and_deprecated_scopes(g):
    seen = []

    def creator(next_creator, **kwargs):
        seen.append(kwargs["name"])
        kwargs["trainable"] = False
        return next_creator(**kwargs)

    with tf.variable_creator_scope(creator):
        v = tf.Variable(1.0, name="made")
    assert seen == ["made"] and not v.trainable and v.name == "made:0"
    assert tf.Variable(2.0).trainable  # the creator is gone
    with tf.op_scope([v], "ops", "default") as scope:
        assert scope == "ops/"
    with tf.variable_op_scope([v], None, default_name="vs") as vs:
        assert vs.name == "vs"
    tf.add_to_collection(tf.GraphKeys.MOVING_AVERAGE_VARIABLES, v)
    assert tf.moving_average_variables() == [v]
    assert tf.is_numeric_tensor(tf.constant(1)) and not tf.is_numeric_tensor(tf.constant("a"))


def test_nest_tables_and_numeric_checks(g):
    import collections

    pair = collections.namedtuple("pair", "a b")
    s = {"b": [1, 2], "a": pair(3, (4,))}
    assert tf.nest.flatten(s) == [3, 4, 1, 2] and tf.nest.flatten(5) == [5]
    assert tf.nest.map_structure(lambda x: x * 2, s) == {"a": pair(6, (8,)), "b": [2, 4]}
    assert tf.nest.pack_sequence_as(s, [0, 0, 0, 0]) == {"a": pair(0, (0,)), "b": [0, 0]}
    assert tf.nest.is_nested([1]) and not tf.nest.is_nested(1)
    with pytest.raises(ValueError, match="same nested structure"):
        tf.nest.assert_same_structure([1, [2]], [1, 2])
    with pytest.raises(ValueError, match="Could not pack sequence"):
        tf.nest.pack_sequence_as([1, 2], [1])
    assert tf.tables_initializer().type == "NoOp"
    assert tf.initialize_all_tables(name="t").name == "t"
    x = tf.constant([1.0, float("nan")])
    checked = tf.verify_tensor_all_finite(x, "bad value")
    c = tf.guarantee_const(tf.constant(2.0))
    with tf.Session() as sess:
        assert sess.run(c) == 2.0
        with pytest.raises(errors.InvalidArgumentError, match="bad value"):
            sess.run(checked)
        with pytest.raises(errors.InvalidArgumentError):
            sess.run(tf.add_check_numerics_ops())
