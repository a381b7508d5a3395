"""Tests of Assert, Print, PrintV2, tf.group, tf.tuple and the tf.debugging.assert_* checks."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import flowrt as tf
from flowrt import errors
from flowrt.plugins.kernels.standard.logging_ops import summarize_value


# ---------------------------------------------------------------------------------------
# SummarizeValue formatting
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("value,n,want", [
    (np.array([1, 2, 3], np.int32), 3, "1 2 3"),
    (np.array([1, 2, 3, 4], np.int32), 3, "1 2 3..."),
    (np.array(5, np.int64), 3, "5"),
    (np.array([[1, 2], [3, 4]], np.int32), 3, "[1 2][3...]..."),
    (np.array([[1, 2], [3, 4]], np.int32), 10, "[1 2][3 4]"),
    (np.array([[[1, 2]], [[3, 4]]], np.int32), -1, "[[1 2]][[3 4]]"),
    (np.array([0.1, 1.0, 2.5e-8], np.float32), 3, "0.1 1 2.5e-08"),
    (np.array([1 / 3], np.float64), 3, "0.33333333333333331"),  # 15 digits don't round-trip
    (np.array([0.1], np.float64), 3, "0.1"),
    (np.array([np.inf, -np.inf, np.nan], np.float32), 3, "inf -inf nan"),
    (np.array([True, False]), 3, "1 0"),
    (np.array(b"x is bad", dtype=object), 3, "x is bad"),
    (np.array([b"a\nb", b'q"'], dtype=object), 3, 'a\\nb q\\"'),
    (np.zeros((0,), np.float32), 3, ""),
])
def test_summarize_value(value, n, want):
    assert summarize_value(value, n) == want


# ---------------------------------------------------------------------------------------
# Assert
# ---------------------------------------------------------------------------------------
def test_assert_raises_only_when_false():
    g = tf.Graph()
    with g.as_default():
        c = tf.placeholder(tf.bool, [])
        x = tf.placeholder(tf.int32, [None])
        a = tf.Assert(c, ["x is bad:", x], summarize=2)
        assert isinstance(a, tf.Operation) and a.type == "Assert"
        assert a.name == "Assert/Assert"
        assert a.get_attr("summarize") == 2
        assert a.outputs == []
    with tf.Session(graph=g) as s:
        assert s.run(a, {c: True, x: [1, 2, 3]}) is None
        with pytest.raises(errors.InvalidArgumentError) as ei:
            s.run(a, {c: False, x: [1, 2, 3]})
        assert "assertion failed: [x is bad:] [1 2...]" in ei.value.message


def test_assert_gates_a_value_through_control_dependencies():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [3])
        check = tf.Assert(tf.reduce_all(tf.greater(x, 0.0)), [x])
        with tf.control_dependencies([check]):
            y = tf.identity(x)
    with tf.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(y, {x: [1.0, 2.0, 3.0]}), [1.0, 2.0, 3.0])
        with pytest.raises(errors.InvalidArgumentError, match=r"assertion failed: \[1 -2 3\]"):
            s.run(y, {x: [1.0, -2.0, 3.0]})


def test_assert_default_summarize_and_float_data():
    g = tf.Graph()
    with g.as_default():
        a = tf.Assert(False, [tf.constant([0.5, 1.5, 2.5, 3.5]), "end"])
        # float data: as TF 1.15 the Assert sits in an AssertGuard cond, `a` is its Merge
        assert a.type == "Merge"
        assert g.get_operation_by_name("Assert/AssertGuard/Assert").get_attr("summarize") == 3
    with tf.Session(graph=g) as s:
        with pytest.raises(errors.InvalidArgumentError) as ei:
            s.run(a)
    assert "assertion failed: [0.5 1.5 2.5...] [end]" in ei.value.message


def test_assert_condition_must_be_bool_scalar():
    with tf.Graph().as_default():
        with pytest.raises(TypeError):
            tf.Assert(tf.constant(1), ["x"])
        with pytest.raises(ValueError, match="rank 0"):
            tf.Assert(tf.constant([True, False]), ["x"])


@settings(max_examples=30, deadline=None)
@given(hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=2, max_side=6),
                  elements=st.integers(-100, 100)), st.integers(1, 8), st.booleans())
def test_assert_property(data, summarize, cond):
    g = tf.Graph()
    with g.as_default():
        a = tf.Assert(tf.constant(cond), [data], summarize=summarize)
    with tf.Session(graph=g) as s:
        if cond:
            assert s.run(a) is None
        else:
            with pytest.raises(errors.InvalidArgumentError) as ei:
                s.run(a)
            assert f"assertion failed: [{summarize_value(data, summarize)}]" in ei.value.message
            shown = min(summarize, data.size)
            assert ("..." in ei.value.message) == (data.size > shown)


# ---------------------------------------------------------------------------------------
# Print, tf.print
# ---------------------------------------------------------------------------------------
def test_print_passes_value_and_prints(capfd):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 2])
        y = tf.Print(x, [x, tf.constant("tag")], message="value: ")
        assert y.dtype == tf.float32 and y.shape.as_list() == [None, 2]
        assert y.op.type == "Print"
        z = y * 2.0
    with tf.Session(graph=g) as s:
        arr = np.array([[1.0, 2.5], [3.0, 4.0]], np.float32)
        out = s.run(z, {x: arr})
    np.testing.assert_array_equal(out, arr * 2)
    err = capfd.readouterr().err
    assert "value: [[1 2.5][3...]...][tag]" in err


def test_print_first_n_and_summarize(capfd):
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(np.arange(10, dtype=np.int64))
        y = tf.Print(x, [x], message="m", first_n=2, summarize=5)
    with tf.Session(graph=g) as s:
        for _ in range(4):
            np.testing.assert_array_equal(s.run(y), np.arange(10))
    err = capfd.readouterr().err
    assert err.count("m[0 1 2 3 4...]") == 2


def test_tf_print_string(capfd):
    g = tf.Graph()
    with g.as_default():
        p = tf.print("hello", "world")
        assert p.type == "PrintV2"
        q = tf.print(tf.constant("direct"))
    with tf.Session(graph=g) as s:
        s.run([p, q])
    err = capfd.readouterr().err
    assert "hello world\n" in err and "direct\n" in err
    with tf.Graph().as_default():
        with pytest.raises(ValueError):
            tf.print("x", bogus=1)


# ---------------------------------------------------------------------------------------
# group, tuple, no_op
# ---------------------------------------------------------------------------------------
def test_group_no_inputs_and_control_inputs():
    with tf.Graph().as_default():
        g0 = tf.group()
        assert g0.type == "NoOp" and g0.name == "group_deps" and g0.control_inputs == []
        a = tf.constant(1.0)
        b = tf.constant(2.0)
        grp = tf.group(a, [b], name="both")
        assert grp.type == "NoOp" and grp.name == "both"
        assert set(grp.control_inputs) == {a.op, b.op}
        with pytest.raises(TypeError, match="tf.group"):
            tf.group(a, 3)
        assert tf.no_op(name="nothing").type == "NoOp"


def test_group_runs_all_inputs(capfd):
    g = tf.Graph()
    with g.as_default():
        p1 = tf.Print(tf.constant(1), [tf.constant(1)], message="first")
        p2 = tf.Print(tf.constant(2), [tf.constant(2)], message="second")
        grp = tf.group(p1, p2)
        bad = tf.group(p1, tf.Assert(False, ["boom"]))
    with tf.Session(graph=g) as s:
        assert s.run(grp) is None
        err = capfd.readouterr().err
        assert "first[1]" in err and "second[2]" in err
        with pytest.raises(errors.InvalidArgumentError, match="boom"):
            s.run(bad)


def test_group_per_device():
    with tf.Graph().as_default():
        with tf.device("/cpu:0"):
            a = tf.constant(1.0)
        with tf.device("/cpu:1"):
            b = tf.constant(2.0)
        grp = tf.group(a, b)
        assert grp.name == "group_deps"
        inner = grp.control_inputs
        assert len(inner) == 2 and all(op.type == "NoOp" for op in inner)
        assert {op.control_inputs[0] for op in inner} == {a.op, b.op}
        assert sorted(op.device for op in inner) == sorted([a.op.device, b.op.device])


def test_tuple():
    g = tf.Graph()
    with g.as_default():
        xf = tf.placeholder(tf.float32, [2])
        yf = tf.placeholder(tf.float32, [])
        x, y = tf.identity(xf), tf.identity(yf)
        check = tf.Assert(tf.greater(y, 0.0), ["y must be positive"])
        tx, ty, tn = tf.tuple([x, y, None], control_inputs=[check])
        assert tn is None
        assert tx.op.type == "Identity" and tx.shape.as_list() == [2]
        gate = tx.op.control_inputs[0]
        assert gate.type == "NoOp" and set(gate.control_inputs) == {x.op, y.op, check}
        with pytest.raises(ValueError, match="at least one"):
            tf.tuple([None])
        with pytest.raises(TypeError):
            tf.tuple([x], control_inputs=[3])
    with tf.Session(graph=g) as s:
        vx, vy = s.run([tx, ty], {xf: [1.0, 2.0], yf: 3.0})
        np.testing.assert_array_equal(vx, [1.0, 2.0])
        assert vy == 3.0
        with pytest.raises(errors.InvalidArgumentError, match="y must be positive"):
            s.run(tx, {xf: [1.0, 2.0], yf: -1.0})


# ---------------------------------------------------------------------------------------
# tf.debugging.assert_*
# ---------------------------------------------------------------------------------------
def test_assert_equal_static_and_dynamic():
    with tf.Graph().as_default():
        with pytest.raises(errors.InvalidArgumentError, match="x == y did not hold"):
            tf.debugging.assert_equal(tf.constant([1, 2]), tf.constant([1, 3]), message="msg")
        ok = tf.assert_equal(tf.constant([1, 2]), tf.constant([1, 2]))
        assert ok.type == "Assert"
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.int32, [None])
        chk = tf.debugging.assert_equal(x, tf.constant([1, 2]), message="mismatch")
    with tf.Session(graph=g) as s:
        assert s.run(chk, {x: [1, 2]}) is None
        with pytest.raises(errors.InvalidArgumentError) as ei:
            s.run(chk, {x: [1, 5]})
    msg = ei.value.message
    assert "assertion failed: [mismatch] [Condition x == y did not hold element-wise:]" in msg
    assert "[1 5]" in msg


@pytest.mark.parametrize("fn,good,bad", [
    (tf.debugging.assert_positive, [1, 2], [1, 0]),
    (tf.debugging.assert_non_negative, [0, 2], [0, -1]),
    (tf.debugging.assert_negative, [-1, -2], [-1, 0]),
    (tf.debugging.assert_non_positive, [0, -2], [1, 0]),
])
def test_sign_asserts(fn, good, bad):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2])
        chk = fn(x)
        with pytest.raises(errors.InvalidArgumentError, match="did not hold"):
            fn(tf.constant(bad, tf.float32))  # statically known: build-time error
        assert fn(tf.constant(good, tf.float32)).type == "Merge"  # AssertGuard (float data)
    with tf.Session(graph=g) as s:
        assert s.run(chk, {x: good}) is None
        with pytest.raises(errors.InvalidArgumentError, match="did not hold element-wise"):
            s.run(chk, {x: bad})


@pytest.mark.parametrize("fn,x,y,ok", [
    (tf.debugging.assert_less, [1, 2], [2, 3], True),
    (tf.debugging.assert_less, [1, 3], [2, 3], False),
    (tf.debugging.assert_less_equal, [1, 3], [2, 3], True),
    (tf.debugging.assert_greater, [3, 4], [2, 3], True),
    (tf.debugging.assert_greater_equal, [2, 2], [2, 3], False),
    (tf.debugging.assert_none_equal, [1, 2], [2, 1], True),
])
def test_binary_asserts(fn, x, y, ok):
    g = tf.Graph()
    with g.as_default():
        px = tf.placeholder(tf.int32, [2])
        chk = fn(px, tf.constant(y))
    with tf.Session(graph=g) as s:
        if ok:
            assert s.run(chk, {px: x}) is None
        else:
            with pytest.raises(errors.InvalidArgumentError, match="did not hold"):
                s.run(chk, {px: x})


def test_assert_rank():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [2, 3])
        ok = tf.debugging.assert_rank(x, 2)
        assert ok.type == "NoOp" and ok.name.endswith("static_checks_determined_all_ok")
        with pytest.raises(ValueError, match="must have rank 3"):
            tf.assert_rank(x, 3)
    g = tf.Graph()
    with g.as_default():
        y = tf.placeholder(tf.float32)
        chk = tf.debugging.assert_rank(y, 2)
    with tf.Session(graph=g) as s:
        assert s.run(chk, {y: np.zeros((2, 2))}) is None
        with pytest.raises(errors.InvalidArgumentError, match="must have rank"):
            s.run(chk, {y: np.zeros(3)})
