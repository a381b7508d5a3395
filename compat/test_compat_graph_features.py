"""Graph-level features against TensorFlow: IndexedSlices gradients and their aggregation,
sparse optimizer updates, partitioned variables and the partitioners, make_template,
custom_gradient, py_func / py_function, UnconnectedGradients / AggregationMethod,
get_static_value and init_scope.

Fetched IndexedSlices are compared by value (values, indices, dense_shape); their
build-time facts are not (gradient node names are implementation details)."""
from __future__ import annotations

import numpy as np
import pytest

from compat_data import arr
from compat_harness import Run, Steps, run_both, run_custom

P = arr((5, 3), seed=31)
W = arr((4, 3), seed=32)


# -- IndexedSlices ------------------------------------------------------------------------
def test_gather_gradient_is_indexed_slices():
    def program(tf):
        p = tf.placeholder(tf.float32, [5, 3])
        y = tf.gather(p, [4, 0, 4, 2]) * W
        grad = tf.gradients(y, p)[0]
        assert type(grad).__name__ == "IndexedSlices"
        return Run([grad, tf.convert_to_tensor(grad)], {p: P})
    run_both(program, static=False)


def test_gather_gradient_unknown_shapes():
    def program(tf):
        p = tf.placeholder(tf.float32, [None, 3])
        i = tf.placeholder(tf.int64, None)
        grad = tf.gradients(tf.reduce_sum(tf.gather(p, i) ** 2), p)[0]
        return Run(grad, {p: P, i: [[1, 1], [3, 0]]})
    run_both(program, static=False)


def test_mixed_aggregation():
    def program(tf):
        p = tf.placeholder(tf.float32, [5, 3])
        y = tf.reduce_sum(tf.gather(p, [1, 1])) + tf.reduce_sum(p * p) + \
            tf.reduce_sum(tf.gather(p, tf.constant([3], tf.int64)))
        grad = tf.gradients(y, p)[0]
        # TF 1.15 makes the sum an IndexedSlices (every row of the dense gradient plus the
        # slices, concatenated); TF 2.x densifies it with AddN. flowrt follows TF 1.15, so
        # only the dense value is compared.
        return Run(tf.convert_to_tensor(grad), {p: P})
    run_both(program, static=False)


def test_embedding_lookup_gradients():
    def program(tf):
        v = tf.Variable(P)
        parts = [tf.Variable(P[:3]), tf.Variable(P[3:])]
        a = tf.nn.embedding_lookup(v, [[0, 4], [4, 4]])
        b = tf.nn.embedding_lookup(parts, [0, 4, 1, 3], partition_strategy="mod")
        ga = tf.gradients(tf.reduce_sum(a * 2.0), v)
        gb = tf.gradients(tf.reduce_sum(b), parts)
        return Steps(tf.global_variables_initializer(), [ga, gb])
    run_both(program, static=False)


OPTIMIZERS = {
    "sgd": lambda tf: tf.train.GradientDescentOptimizer(0.1),
    "momentum": lambda tf: tf.train.MomentumOptimizer(0.1, 0.9),
    "nesterov": lambda tf: tf.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
    "adam": lambda tf: tf.train.AdamOptimizer(0.1),
    "adagrad": lambda tf: tf.train.AdagradOptimizer(0.1),
    "rmsprop": lambda tf: tf.train.RMSPropOptimizer(0.1, momentum=0.5),
    "rmsprop_centered": lambda tf: tf.train.RMSPropOptimizer(0.1, momentum=0.5,
                                                             centered=True),
    "adadelta": lambda tf: tf.train.AdadeltaOptimizer(1.0),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_sparse_optimizer_steps(name):
    def program(tf):
        v = tf.Variable(P, name="emb")
        loss = tf.reduce_sum(tf.gather(v, [3, 0, 3]) * W[:3]) + \
            tf.reduce_sum(tf.gather(v, [1]) ** 2)
        opt = OPTIMIZERS[name](tf)
        train = opt.minimize(loss)
        slots = [opt.get_slot(v, s) for s in opt.get_slot_names()]
        return Steps(tf.global_variables_initializer(), train, train, train, [v] + slots,
                     sorted(x.op.name for x in tf.global_variables()))
    run_both(program, rtol=1e-5, atol=1e-6)


# -- partitioned variables -----------------------------------------------------------------
def test_partitioners():
    def fn(tf):
        shapes = [[10, 4], [7, 3], [100, 2], [3, 50]]
        out = []
        for s in shapes:
            ts = tf.TensorShape(s)
            out.append([
                tf.fixed_size_partitioner(3)(shape=ts, dtype=tf.float32),
                tf.fixed_size_partitioner(2, axis=1)(shape=ts, dtype=tf.float32),
                tf.variable_axis_size_partitioner(64)(ts, tf.float32),
                tf.variable_axis_size_partitioner(50, max_shards=3)(ts, tf.float64),
                tf.min_max_variable_partitioner(4, min_slice_size=64)(ts, tf.float32),
                tf.min_max_variable_partitioner()(ts, tf.float32)])
        return out
    run_custom(fn)


def test_partitioned_variable_names_and_specs():
    def fn(tf):
        with tf.variable_scope("emb"):
            pv = tf.get_variable("w", [7, 3], partitioner=tf.fixed_size_partitioner(3))
        with tf.variable_scope("s", partitioner=tf.fixed_size_partitioner(2, axis=1)):
            q = tf.get_variable("q", [2, 5], initializer=tf.zeros_initializer())
        full = tf.convert_to_tensor(pv)
        return {"parts": [v.name for v in pv], "q": [v.name for v in q],
                "shapes": [v.shape.as_list() for v in list(pv) + list(q)],
                "specs": [v._get_save_slice_info().spec for v in list(pv) + list(q)],
                "full": [full.name, full.shape.as_list(), full.op.type],
                "pv": [pv.name, pv.get_shape().as_list(), pv.dtype.name, len(pv)],
                "globals": [v.name for v in tf.global_variables()],
                "trainable": [v.name for v in tf.trainable_variables()]}
    run_custom(fn)


def test_partitioned_variable_values_and_training():
    init = arr((6, 2), seed=33)

    def program(tf):
        pv = tf.get_variable("emb", initializer=tf.constant(init),
                             partitioner=tf.fixed_size_partitioner(4))
        ids = [[5, 0], [3, 3]]
        mod = tf.nn.embedding_lookup(list(pv), ids, partition_strategy="mod")
        div = tf.nn.embedding_lookup(list(pv), ids, partition_strategy="div")
        loss = tf.reduce_sum(div * div)
        train = tf.train.AdagradOptimizer(0.5).minimize(loss)
        return Steps(tf.global_variables_initializer(), [mod, div, tf.convert_to_tensor(pv)],
                     train, [tf.convert_to_tensor(pv)] + list(pv),
                     pv.assign(np.ones((6, 2), np.float32)), list(pv))
    run_both(program, static_keys=("kind", "dtype", "shape"))


def test_partitioned_reuse_errors():
    def program(tf):
        p = tf.fixed_size_partitioner(2)
        with tf.variable_scope("r"):
            tf.get_variable("w", [4, 2], partitioner=p)
        with tf.variable_scope("r", reuse=True):
            return tf.get_variable("w", [4, 2], partitioner=tf.fixed_size_partitioner(4))
    run_both(program)

    def program2(tf):
        p = tf.fixed_size_partitioner(2)
        tf.get_variable("w", [4, 2], partitioner=p)
        return tf.get_variable("w", [4, 2])
    run_both(program2)

    def program3(tf):
        return tf.get_variable("w", [4, 2], partitioner=lambda shape, dtype: [2, 2])
    run_both(program3)


def test_create_partitioned_variables():
    def fn(tf):
        parts = tf.create_partitioned_variables([5, 2], [2, 1], tf.ones_initializer(),
                                                name="cpv")
        return [[v.name, v.shape.as_list(), v._get_save_slice_info().spec] for v in parts]
    run_custom(fn)


# -- make_template ---------------------------------------------------------------------------
def test_make_template():
    def fn(tf):
        def linear(x, units):
            w = tf.get_variable("w", [3, units], initializer=tf.ones_initializer())
            return tf.matmul(x, w)

        t = tf.make_template("lin", linear, units=2)
        u = tf.make_template("lin", linear, units=2)
        x = tf.ones([1, 3])
        ys = [t(x), t(x), u(x)]
        with tf.variable_scope("outer"):
            n = tf.make_template("now", linear, create_scope_now_=True, units=1)
        n(x)
        n(x)
        names = [v.name for v in tf.global_variables()]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            vals = sess.run(ys)
        return {"vars": names, "outputs": [y.name for y in ys], "values": vals,
                "scopes": [t.variable_scope_name, u.variable_scope_name,
                           n.variable_scope_name],
                "trainable": [v.name for v in t.trainable_variables]}
    run_custom(fn)


def test_make_template_second_call_new_variable():
    def program(tf):
        t = tf.make_template("bad", lambda x: x * tf.Variable(1.0))
        t(tf.constant(1.0))
        return t(tf.constant(1.0))
    run_both(program)


# -- custom_gradient --------------------------------------------------------------------------
def test_custom_gradient():
    def program(tf):
        @tf.custom_gradient
        def log1pexp(x):
            e = tf.exp(x)
            return tf.log(1 + e), lambda dy: dy * (1 - 1 / (1 + e))

        @tf.custom_gradient
        def pair(a, b):
            return (a * b, a + b), lambda da, db: (da * 2.0 + db, da * 3.0)

        x = tf.constant([0.0, 1.0, 5.0])
        y = log1pexp(x)
        a, b = tf.constant(2.0), tf.constant(5.0)
        p, s = pair(a, b)
        return [y, tf.gradients(y, x), tf.gradients([p, s], [a, b]), tf.gradients(p, a)]
    run_both(program, static_keys=("kind", "dtype", "shape"))


def test_custom_gradient_with_variables():
    def program(tf):
        with tf.variable_scope("s", use_resource=True):
            @tf.custom_gradient
            def dense(x):
                w = tf.get_variable("w", [2], initializer=tf.constant_initializer(3.0))

                def grad(dy, variables=None):
                    return dy * w, [dy * x * 10.0]
                return x * w, grad

            x = tf.constant([1.0, 2.0])
            y = dense(x)
        w = tf.global_variables()[0]
        train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(y))
        return Steps(tf.global_variables_initializer(), tf.gradients(y, x), train, w.value())
    run_both(program, static_keys=("kind", "dtype", "shape"))


def test_custom_gradient_errors():
    def program(tf):
        v = tf.Variable([1.0])

        @tf.custom_gradient
        def uses_var(x):
            return x * v, lambda dy: dy
        return uses_var(tf.constant([2.0]))
    run_both(program)

    def program2(tf):
        @tf.custom_gradient
        def kw(x, scale=1.0):
            return x * scale, lambda dy: dy
        return kw(tf.constant(1.0), scale=2.0)
    run_both(program2)


# -- py_func ------------------------------------------------------------------------------------
def test_py_func_values():
    def program(tf):
        x = tf.constant([3.0, 1.0, 2.0])
        a = tf.py_func(lambda v: np.sort(v), [x], tf.float32)
        b = tf.py_func(lambda v: [v * 2, np.int64(v.size)], [x], [tf.float32, tf.int64])
        c = tf.numpy_function(lambda v: v + np.float32(1), [x], tf.float32)
        d = tf.py_function(lambda v: v.numpy() * 3, [x], tf.float32)
        e = tf.py_func(lambda v: np.array([s.upper() for s in v]), [tf.constant(["a", "bc"])],
                       tf.string)
        f = tf.py_func(lambda v: v * 2, [x], tf.float32, stateful=False)
        return [a, b, c, d, e, f]
    run_both(program, static_keys=("kind", "dtype", "shape", "op_type"))


@pytest.mark.parametrize("case", ["double", "count", "value_error", "runtime_error",
                                  "stop_iteration", "eager_convert"])
def test_py_func_errors(case):
    def program(tf):
        x = tf.constant([1.0, 2.0])
        if case == "double":
            return tf.py_func(lambda v: v.astype(np.float64), [x], tf.float32)
        if case == "count":
            return tf.py_func(lambda v: [v, v], [x], [tf.float32])
        if case == "value_error":
            return tf.py_func(lambda v: int("x"), [x], tf.float32)
        if case == "runtime_error":
            def f(v):
                raise RuntimeError("boom")
            return tf.py_func(f, [x], tf.float32)
        if case == "stop_iteration":
            def s(v):
                raise StopIteration()
            return tf.py_func(s, [x], tf.float32)
        return tf.py_function(lambda v: "text", [x], tf.float32)
    run_both(program, static_keys=("kind", "dtype", "shape"))


def test_py_func_gradient_is_none():
    def fn(tf):
        x = tf.constant([1.0])
        return tf.gradients(tf.py_func(lambda v: v, [x], tf.float32), x) == [None]
    run_custom(fn)


# -- gradients options, static values, init_scope ----------------------------------------------
def test_unconnected_and_aggregation():
    def program(tf):
        x = tf.placeholder(tf.float32, [2])
        z = tf.placeholder(tf.float32, [3])
        y = x * 2.0 + x * 3.0 + tf.sin(x)
        out = [tf.gradients(y, [x, z], unconnected_gradients=tf.UnconnectedGradients.ZERO),
               tf.gradients(y, [x, z], unconnected_gradients="zero")]
        for m in (tf.AggregationMethod.ADD_N, tf.AggregationMethod.EXPERIMENTAL_TREE,
                  tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N):
            out.append(tf.gradients(y, x, aggregation_method=m, gate_gradients=True))
        return Run(out, {x: [0.5, 1.0], z: [1.0, 2.0, 3.0]})
    run_both(program, static_keys=("kind", "dtype", "shape"))


def test_bad_gradient_options():
    for kw in ({"unconnected_gradients": "zeros"}, {"aggregation_method": 7}):
        def program(tf, kw=kw):
            x = tf.placeholder(tf.float32, [2])
            return tf.gradients(x * 2.0, x, **kw)
        run_both(program)


def test_get_static_value_and_init_scope():
    def fn(tf):
        c = tf.constant([1, 2])
        vals = [tf.get_static_value(c).tolist(),
                tf.get_static_value(tf.shape(tf.zeros([3, 4]))).tolist(),
                tf.get_static_value(tf.placeholder(tf.float32)), tf.get_static_value(7)]
        with tf.name_scope("outer"):
            with tf.control_dependencies([c]):
                with tf.init_scope():
                    b = tf.constant(2.0, name="b")
        vals.append([b.name, [o.name for o in b.op.control_inputs]])
        vals.append([tf.executing_eagerly(), tf.compat.dimension_value(
            tf.TensorShape([3, None])[0]), tf.compat.dimension_at_index(
            tf.TensorShape([3, None]), 1).value])
        return vals
    run_custom(fn)


def test_enums_and_constants():
    def fn(tf):
        return {"agg": [tf.AggregationMethod.ADD_N, tf.AggregationMethod.DEFAULT,
                        tf.AggregationMethod.EXPERIMENTAL_TREE,
                        tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N],
                "unconnected": [tf.UnconnectedGradients.NONE.value,
                                tf.UnconnectedGradients.ZERO.value],
                "sync": sorted(e.name for e in tf.VariableSynchronization),
                "aggregation": sorted(e.name for e in tf.VariableAggregation),
                "quantized": sorted(d.name for d in tf.QUANTIZED_DTYPES),
                "version_min": [tf.GRAPH_DEF_VERSION_MIN_CONSUMER,
                                tf.GRAPH_DEF_VERSION_MIN_PRODUCER]}
    # TF 2.21's GRAPH_DEF_VERSION and VERSION are newer than TF 1.15's (134, "1.15.0"),
    # so they are checked in tests/test_custom_gradient.py, not here.
    run_custom(fn)
