"""``tf.variable_scope`` and ``tf.get_variable`` against TF 1.15: variable and op names,
reuse modes (True, AUTO_REUSE, inheritance, ``reuse_variables``), re-entering scope
objects, default names, defaults inherited by sub-scopes, default initializers,
regularizers, custom getters, local variables and the errors TF raises."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import flowrt as tf


@pytest.fixture
def g():
    graph = tf.Graph()
    with graph.as_default():
        yield graph


def run_init(g, fetches):
    with tf.Session(graph=g) as s:
        s.run(tf.variables_initializer(tf.global_variables() + tf.local_variables()))
        return s.run(fetches)


# -- names -----------------------------------------------------------------------------
def test_names_nested_and_reentered(g):
    with tf.variable_scope("foo") as sc:
        v = tf.get_variable("v", [1])
        a = tf.constant(1.0, name="a")
        with tf.variable_scope("bar"):
            w = tf.get_variable("w", [1])
            b = tf.add(a, a, name="b")
    with tf.variable_scope(sc):  # re-entering the object: same variable names, new ops scope
        c = tf.constant(1.0, name="c")
        with tf.variable_scope("bar"):
            d = tf.constant(1.0, name="d")
    with tf.variable_scope("foo"):  # re-entering by name
        e = tf.constant(1.0, name="e")
    assert (v.name, w.name) == ("foo/v:0", "foo/bar/w:0")
    assert [t.name for t in (a, b, c, d, e)] == ["foo/a:0", "foo/bar/b:0", "foo_1/c:0",
                                                 "foo_1/bar/d:0", "foo_2/e:0"]
    assert sc.name == "foo" and sc.original_name_scope == "foo/"
    assert isinstance(sc, tf.VariableScope)


def test_variable_ops_and_initializer_names(g):
    with tf.variable_scope("foo"):
        v = tf.get_variable("v", [3, 4])
    names = [o.name for o in g.get_operations()]
    assert names == ["foo/v/Initializer/random_uniform/shape",
                     "foo/v/Initializer/random_uniform/min",
                     "foo/v/Initializer/random_uniform/max",
                     "foo/v/Initializer/random_uniform/RandomUniform",
                     "foo/v/Initializer/random_uniform/sub",
                     "foo/v/Initializer/random_uniform/mul",
                     "foo/v/Initializer/random_uniform",
                     "foo/v", "foo/v/Assign", "foo/v/read"]
    assert v.op.type == "VariableV2" and v.dtype == tf.float32._as_ref
    assert v in tf.global_variables() and v in tf.trainable_variables()


def test_variable_names_ignore_name_scope(g):
    with tf.name_scope("ns"):
        with tf.variable_scope("vs"):
            v = tf.get_variable("v", [1])
            a = tf.constant(1, name="a")
    assert v.name == "vs/v:0" and a.name == "ns/vs/a:0"
    assert v.initializer.name == "vs/v/Assign"


def test_default_name_made_unique(g):
    names = []
    for _ in range(3):
        with tf.variable_scope(None, default_name="layer") as sc:
            names += [sc.name, tf.get_variable("w", [1]).name, tf.constant(0, name="k").name]
    assert names == ["layer", "layer/w:0", "layer/k:0", "layer_1", "layer_1/w:0",
                     "layer_1/k:0", "layer_2", "layer_2/w:0", "layer_2/k:0"]
    # counts of sub-scopes are reset when the enclosing scope is closed (TF)
    for _ in range(2):
        with tf.variable_scope("outer"):
            with tf.variable_scope(None, default_name="layer") as sc:
                assert sc.name == "outer/layer"


def test_reentering_nested_scope_object(g):
    with tf.variable_scope("foo"):
        with tf.variable_scope("bar") as sc:
            pass
    with tf.variable_scope(sc) as sc2:
        a = tf.constant(1, name="a")
    assert sc2.name == "foo/bar" and a.name == "bar/a:0"


def test_auxiliary_name_scope_false(g):
    with tf.variable_scope("foo", auxiliary_name_scope=False) as sc:
        a = tf.constant(1, name="a")
    with tf.name_scope("q"):
        with tf.variable_scope(sc, auxiliary_name_scope=False):
            c = tf.constant(1, name="c")
            vv = tf.get_variable("vv", [1])
    assert (a.name, c.name, vv.name) == ("a:0", "q/c:0", "foo/vv:0")
    with pytest.raises(TypeError, match="auxiliary_name_scope"):
        tf.variable_scope("x", auxiliary_name_scope=1)


def test_same_context_manager_entered_twice(g):
    vs = tf.variable_scope("re")
    with vs as s1:
        a = tf.constant(1, name="a")
    with vs as s2:
        b = tf.constant(1, name="a")
    assert (a.name, b.name) == ("re/a:0", "re_1/a:0")
    assert s1.name == s2.name == "re"


def test_get_variable_scope_root_and_current(g):
    root = tf.get_variable_scope()
    assert root.name == "" and root.reuse is False
    with tf.variable_scope("a") as sc:
        assert tf.get_variable_scope() is sc
    assert tf.get_variable_scope() is root


def test_values_argument_picks_graph():
    g1, g2 = tf.Graph(), tf.Graph()
    with g1.as_default():
        x = tf.constant(1.0)
    with g2.as_default():
        with tf.variable_scope("s", values=[x]):
            assert tf.get_default_graph() is g1
            v = tf.get_variable("v", [1])
    assert v.graph is g1


# -- reuse -----------------------------------------------------------------------------
def test_reuse_false_raises_on_existing(g):
    with tf.variable_scope("foo"):
        tf.get_variable("v", [1])
    with pytest.raises(ValueError, match=r"Variable foo/v already exists, disallowed\. Did "
                       r"you mean to set reuse=True or reuse=tf\.AUTO_REUSE in VarScope\?"):
        with tf.variable_scope("foo"):
            tf.get_variable("v", [1])


def test_error_names_where_variable_was_defined(g):
    with tf.variable_scope("foo"):
        tf.get_variable("v", [1])
    with pytest.raises(ValueError) as ei:
        with tf.variable_scope("foo"):
            tf.get_variable("v", [1])
    assert "Originally defined at" in str(ei.value)
    assert "test_variable_scope.py" in str(ei.value)


def test_reuse_true_raises_on_missing(g):
    with pytest.raises(ValueError, match=r"Variable foo/v does not exist, or was not created "
                       r"with tf\.get_variable\(\)"):
        with tf.variable_scope("foo", reuse=True):
            tf.get_variable("v", [1])
    # a plain tf.Variable of that name is not in the store
    with tf.variable_scope("bar"):
        tf.Variable(1.0, name="w")
    with pytest.raises(ValueError, match="does not exist"):
        with tf.variable_scope("bar", reuse=True):
            tf.get_variable("w", [])


def test_reuse_true_returns_same_variable(g):
    with tf.variable_scope("foo") as sc:
        v = tf.get_variable("v", [2])
    with tf.variable_scope(sc, reuse=True):
        assert tf.get_variable("v") is v
        assert tf.get_variable("v", [2]) is v
    with tf.variable_scope("foo", reuse=True):
        assert tf.get_variable("v", [2], dtype=tf.float32) is v
    assert len(tf.global_variables()) == 1


def test_auto_reuse(g):
    with tf.variable_scope("foo"):
        v = tf.get_variable("v", [1])
    with tf.variable_scope("foo", reuse=tf.AUTO_REUSE):
        assert tf.get_variable("v", [1]) is v
        w = tf.get_variable("w", [2])
        assert tf.get_variable("w", [2]) is w
        with tf.variable_scope("in") as inner:
            u = tf.get_variable("u", [2])
            assert tf.get_variable("u", [2]) is u
            assert inner.reuse is tf.AUTO_REUSE
    assert w.name == "foo/w:0" and u.name == "foo/in/u:0"
    assert tf.get_variable_scope().reuse is False


def test_reuse_inherited_and_false_does_not_reset(g):
    with tf.variable_scope("foo"):
        with tf.variable_scope("bar"):
            v = tf.get_variable("v", [1])
    with tf.variable_scope("foo", reuse=True):
        with tf.variable_scope("bar", reuse=False) as sc:  # False means "inherit"
            assert sc.reuse is True
            assert tf.get_variable("v", [1]) is v


def test_reuse_variables(g):
    with tf.variable_scope("foo") as sc:
        v = tf.get_variable("v", [1])
        sc.reuse_variables()
        assert tf.get_variable_scope().reuse is True
        assert tf.get_variable("v") is v
        with tf.variable_scope("sub") as sub:
            assert sub.reuse is True


def test_shape_and_dtype_mismatch_on_reuse(g):
    with tf.variable_scope("foo"):
        tf.get_variable("v", [1, 2])
    with tf.variable_scope("foo", reuse=True):
        with pytest.raises(ValueError, match=r"Trying to share variable foo/v, but specified "
                           r"shape \(2, 2\) and found shape \(1, 2\)\."):
            tf.get_variable("v", [2, 2])
        with pytest.raises(ValueError, match=r"Trying to share variable foo/v, but specified "
                           r"dtype int32 and found dtype float32_ref\."):
            tf.get_variable("v", [1, 2], dtype=tf.int32)
        assert tf.get_variable("v", [None, 2]).name == "foo/v:0"  # compatible shape


def test_bad_arguments(g):
    with pytest.raises(TypeError, match="If default_name is None then name_or_scope is "
                       "required"):
        tf.variable_scope(None)
    with pytest.raises(ValueError, match="reuse=True cannot be used without a name_or_scope"):
        with tf.variable_scope(None, default_name="x", reuse=True):
            pass
    with pytest.raises(ValueError, match="The reuse parameter must be True or False or None"):
        tf.variable_scope("x", reuse="yes")
    with pytest.raises(TypeError, match="name_or_scope must be a string or VariableScope"):
        with tf.variable_scope(3):
            pass
    assert tf.get_variable_scope().name == ""  # failed entries leave no scope behind


def test_variable_store_is_per_graph():
    for _ in range(2):
        g = tf.Graph()
        with g.as_default():
            v = tf.get_variable("v", [1])
            assert v.name == "v:0"


def test_scopes_are_per_thread(g):
    seen = {}

    def worker():
        with g.as_default():
            seen["name"] = tf.get_variable_scope().name
            with tf.variable_scope("t"):
                seen["v"] = tf.get_variable("tv", [1]).name

    with tf.variable_scope("main"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert seen == {"name": "", "v": "t/tv:0"}


# -- initializers, dtypes and defaults -------------------------------------------------
def test_default_initializers(g):
    f = tf.get_variable("f", [20, 30])
    i = tf.get_variable("i", [3], dtype=tf.int32)
    b = tf.get_variable("b", [], dtype=tf.bool)
    s = tf.get_variable("s", [2], dtype=tf.string)
    assert f.initial_value.op.name == "f/Initializer/random_uniform"
    assert i.initial_value.op.name == "i/Initializer/zeros"
    fv, iv, bv, sv = run_init(g, [f, i, b, s])
    limit = np.sqrt(6.0 / 50)
    assert fv.dtype == np.float32 and np.all(np.abs(fv) <= limit) and fv.std() > limit / 3
    assert iv.dtype == np.int32 and iv.tolist() == [0, 0, 0]
    assert bv == np.False_ and sv.tolist() == [b"", b""]
    with pytest.raises(ValueError, match=r"An initializer for variable c of <dtype: "
                       r"'complex64'> is required"):
        tf.get_variable("c", [2], dtype=tf.complex64)


def test_scope_defaults_inherited(g):
    with tf.variable_scope("a", initializer=tf.constant_initializer(3.0),
                           dtype=tf.float64) as sc:
        v = tf.get_variable("v", [2])
        with tf.variable_scope("b"):
            w = tf.get_variable("w", [2], initializer=tf.zeros_initializer())
            x = tf.get_variable("x", [2])
    with tf.variable_scope(sc):
        y = tf.get_variable("y", [1])
    with tf.variable_scope(sc, initializer=tf.ones_initializer()):
        z = tf.get_variable("z", [1])
    assert all(t.dtype == tf.float64._as_ref for t in (v, w, x, y, z))
    assert x.initial_value.op.name == "a/b/x/Initializer/Const"
    vals = run_init(g, [v, w, x, y, z])
    assert [a.tolist() for a in vals] == [[3.0, 3.0], [0.0, 0.0], [3.0, 3.0], [3.0], [1.0]]


def test_initializer_values_and_tensors(g):
    c = tf.get_variable("c", initializer=tf.constant([1.0, 2.0]))
    d = tf.get_variable("d", initializer=[1, 2])
    e = tf.get_variable("e", [2, 2], initializer=tf.random_normal_initializer(seed=1))
    cls = tf.get_variable("cls", [2], initializer=tf.ones_initializer)  # a class is instantiated
    assert c.shape.as_list() == [2] and d.dtype == tf.int32._as_ref
    cv, dv, clsv = run_init(g, [c, d, cls])
    assert cv.tolist() == [1.0, 2.0] and dv.tolist() == [1, 2] and clsv.tolist() == [1, 1]
    assert e.shape.as_list() == [2, 2]
    with pytest.raises(ValueError, match="If initializer is a constant, do not specify shape"):
        tf.get_variable("x", shape=[2], initializer=tf.constant(1.0))
    with pytest.raises(ValueError, match=r"Initializer type '<dtype: 'int32'>' and explicit "
                       r"dtype '<dtype: 'float32'>' don't match\."):
        tf.get_variable("y", dtype=tf.float32, initializer=tf.constant([1, 2]))
    with pytest.raises(ValueError, match="did not get an initializer, so its `shape` argument "
                       "must be specified"):
        tf.get_variable("z")


def test_initializer_called_with_shape_dtype_and_partition_info(g):
    calls = []

    def init(shape, dtype=None, partition_info=None):
        calls.append((shape, dtype, partition_info))
        return tf.zeros(shape, dtype)

    def init2(shape, dtype):  # no partition_info parameter: still accepted
        calls.append((shape, dtype))
        return tf.ones(shape, dtype)

    v = tf.get_variable("v", [2, 3], dtype=tf.float64, initializer=init)
    w = tf.get_variable("w", [2], initializer=init2)
    assert calls == [([2, 3], tf.float64, None), ([2], tf.float32)]
    assert v.dtype == tf.float64._as_ref and w.shape.as_list() == [2]


def test_initializer_without_arguments_and_unknown_shape(g):
    v = tf.get_variable("v", initializer=lambda: tf.constant([5, 6]))
    assert run_init(g, v).tolist() == [5, 6]
    with pytest.raises(ValueError, match="The initializer passed is not valid"):
        tf.get_variable("w", [None, 2], initializer=tf.zeros_initializer())


def test_trainable_collections_and_local(g):
    v = tf.get_variable("v", [1], trainable=False)
    c = tf.get_variable("c", [1], collections=["mine"])
    lv = tf.get_local_variable("lv", [2])
    lc = tf.get_local_variable("lc", [2], collections=["extra"])
    assert v in tf.global_variables() and v not in tf.trainable_variables()
    assert tf.get_collection("mine") == [c] and c in tf.trainable_variables()
    assert c not in tf.global_variables()
    assert tf.local_variables() == [lv, lc] and tf.get_collection("extra") == [lc]
    assert lv not in tf.trainable_variables() and lv not in tf.global_variables()
    assert run_init(g, lv).shape == (2,)


def test_scope_collection_helpers(g):
    with tf.variable_scope("s") as sc:
        a = tf.get_variable("a", [1])
        b = tf.get_variable("b", [1], trainable=False)
        c = tf.get_local_variable("c", [1])
    tf.get_variable("sx", [1])  # "sx" does not start with "s/"
    assert sc.global_variables() == [a, b]
    assert sc.trainable_variables() == [a]
    assert sc.local_variables() == [c]


def test_regularizer(g):
    def reg(t):
        return tf.reduce_sum(tf.square(t))

    with tf.variable_scope("foo", regularizer=reg):
        v = tf.get_variable("v", initializer=tf.constant([1.0, 2.0]))
        tf.get_variable("w", [2], regularizer=tf.no_regularizer)
        with tf.variable_scope("sub"):
            u = tf.get_variable("u", initializer=tf.constant(3.0))
    tf.get_variable("x", [2], regularizer=lambda t: tf.reduce_mean(t))
    losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    assert [t.name for t in losses] == ["foo/v/Regularizer/Sum:0", "foo/sub/u/Regularizer/Sum:0",
                                        "x/Regularizer/Mean:0"]
    assert losses[0].op.colocation_groups() == [b"loc:@foo/v"]
    vals = run_init(g, losses[:2])
    assert vals == [5.0, 9.0]
    assert u.name == "foo/sub/u:0" and v.name == "foo/v:0"


def test_custom_getter(g):
    seen = []

    def getter(getter, name, *args, **kwargs):
        seen.append(name)
        return getter(name + "_x", *args, **kwargs)

    def outer_getter(getter, name, *args, **kwargs):
        seen.append("outer:" + name)
        kwargs["trainable"] = False
        return getter(name, *args, **kwargs)

    with tf.variable_scope("g", custom_getter=outer_getter):
        with tf.variable_scope("h", custom_getter=getter):
            v = tf.get_variable("v", [1])
    assert v.name == "g/h/v_x:0" and v not in tf.trainable_variables()
    assert seen == ["g/h/v", "outer:g/h/v_x"]  # the inner getter runs first
    with pytest.raises(ValueError, match="custom_getter which is not callable"):
        tf.get_variable("bad", [1], custom_getter=3)


def test_partitioner_makes_parts(g):
    p = tf.get_variable("p", [4, 2], partitioner=tf.fixed_size_partitioner(2))
    assert [v.name for v in p] == ["p/part_0:0", "p/part_1:0"]
    assert [v.shape.as_list() for v in p] == [[2, 2], [2, 2]]
    assert p.get_shape().as_list() == [4, 2]
    with tf.variable_scope("s", partitioner=tf.fixed_size_partitioner(2)):
        q = tf.get_variable("q", [4, 2])
        s = tf.get_variable("scalar", [])  # scalars are never partitioned
    assert [v.name for v in q] == ["s/q/part_0:0", "s/q/part_1:0"]
    assert isinstance(s, tf.Variable)
    assert s.name == "s/scalar:0" and s.shape.as_list() == []


def test_constraint_and_caching_device(g):
    def con(t):
        return t * 1.0

    with tf.variable_scope("c", constraint=con, caching_device="/cpu:0"):
        v = tf.get_variable("v", [2])
    assert v.constraint is con
    assert v.value().device.endswith("CPU:0")


def test_get_variable_values_run(g):
    with tf.variable_scope("net", initializer=tf.constant_initializer(0.5)):
        w = tf.get_variable("w", [2, 2])
        y = tf.matmul(tf.ones([1, 2]), w)
    with tf.variable_scope("net", reuse=True):
        w2 = tf.get_variable("w")
        y2 = tf.reduce_sum(w2)
    out = run_init(g, [y, y2])
    np.testing.assert_allclose(out[0], [[1.0, 1.0]])
    assert out[1] == 2.0
