"""Binary element-wise math ops, comparisons, logic and casts of the standard kernel
set, checked end to end against numpy and TensorFlow's semantics (floor vs truncating
division, integer division by zero, no implicit dtype promotion ...)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import flowrt as tf
from flowrt import errors
from flowrt.graph import apply_op



def on_cpu(build):
    """Build on the CPU: these check TF's CPU kernel set (a GPU host would otherwise run
    the op on its GPU, whose kernels TF registers for other dtypes)."""
    with tf.device("/device:CPU:0"):
        return build()

def run(build, feeds=None):
    """Build ``build()`` in a fresh graph and run it; ``build`` may return
    ``(fetches, feed_dict)``."""
    g = tf.Graph()
    with g.as_default():
        out = build()
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict):
        out, feeds = out
    with tf.Session(graph=g) as s:
        return s.run(out, feeds)


def const(a):
    a = np.asarray(a)
    return tf.constant(a, dtype=tf.as_dtype(a.dtype))


FLOATS = [np.float16, np.float32, np.float64]
COMPLEX = [np.complex64, np.complex128]
SINTS = [np.int8, np.int16, np.int32, np.int64]
UINTS = [np.uint8, np.uint16, np.uint32, np.uint64]
ALL_NUM = SINTS + UINTS + FLOATS + COMPLEX
name = lambda d: np.dtype(d).name  # noqa: E731


# --------------------------------------------------------------------------------------
# add / subtract / multiply
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ALL_NUM, ids=name)
@pytest.mark.parametrize("api,ref", [("add", np.add), ("subtract", np.subtract),
                                     ("multiply", np.multiply)])
def test_arithmetic_with_broadcasting(api, ref, dt):
    x = np.arange(1, 7).reshape(2, 3).astype(dt)
    y = np.array([3, 1, 2]).astype(dt)
    g = tf.Graph()
    with g.as_default():
        z = getattr(tf, api)(const(x), const(y))
    if api == "add":  # TF1's Add op lacks uint16/32/64; AddV2 has them
        assert z.op.type == "Add"
    with tf.Session(graph=g) as s:
        got = s.run(z)
    assert got.dtype == dt and got.shape == (2, 3)
    np.testing.assert_array_equal(got, ref(x, y))
    got = run(lambda: getattr(tf, api)(const(x.reshape(2, 3, 1)), const(y.reshape(1, 1, 3))))
    assert got.shape == (2, 3, 3)
    np.testing.assert_array_equal(got, ref(x.reshape(2, 3, 1), y.reshape(1, 1, 3)))


def test_operators_build_tf_ops_and_accept_python_scalars():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, 2.0, 4.0])
        outs = [x + 1, 1 + x, x - 1, 10 - x, x * 2, 2 * x, x / 2, 8 / x, x // 3, 7 // x,
                x % 3, 7 % x, x ** 2, 2 ** x, -x, abs(-x)]
    assert outs[0].op.type == "AddV2" and outs[2].op.type == "Sub"
    assert outs[4].op.type == "Mul" and outs[6].op.type == "RealDiv"
    assert outs[8].op.type == "FloorDiv" and outs[10].op.type == "FloorMod"
    assert outs[12].op.type == "Pow" and outs[14].op.type == "Neg"
    with tf.Session(graph=g) as s:
        got = s.run(outs)
    v = np.array([1.0, 2.0, 4.0], np.float32)
    want = [v + 1, 1 + v, v - 1, 10 - v, v * 2, 2 * v, v / 2, 8 / v, np.floor(v / 3),
            np.floor(7 / v), v % 3, 7 % v, v ** 2, 2 ** v, -v, v]
    for a, b in zip(got, want):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_operator_node_names_follow_tf():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([[4, 6]])
        outs = [x + 1, x - 1, x * 2, x / 2, x // 2, x % 3, x ** 2, x @ tf.constant([[1], [1]])]
    names = [o.op.name for o in outs]
    assert names == ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul"]
    assert [o.op.type for o in outs] == ["AddV2", "Sub", "Mul", "RealDiv", "FloorDiv",
                                         "FloorMod", "Pow", "MatMul"]
    assert [i.op.name for i in outs[3].op.inputs] == ["truediv/Cast", "truediv/Cast_1"]


def test_string_add_concatenates():
    x = np.array([b"ab", b"c"], dtype=object)
    got = run(lambda: tf.add(tf.constant(x), tf.constant(b"!")))
    assert list(got) == [b"ab!", b"c!"]
    got = run(lambda: tf.constant("x") + tf.constant(["1", "2"]))
    assert list(got) == [b"x1", b"x2"]
    assert run(lambda: tf.constant("a") + "b") == b"ab"


def test_mixed_dtypes_are_a_build_time_type_error():
    g = tf.Graph()
    with g.as_default():
        i = tf.constant([1, 2], tf.int32)
        f = tf.constant([1.0, 2.0], tf.float32)
        with pytest.raises(TypeError):
            tf.add(i, f)
        with pytest.raises(TypeError):
            tf.multiply(f, tf.constant([1.0], tf.float64))
        with pytest.raises(TypeError):
            i + 1.5
        with pytest.raises(TypeError):
            tf.add(tf.constant([True]), tf.constant([False]))
        with pytest.raises(TypeError):
            tf.subtract(tf.constant(["a"]), tf.constant(["b"]))


def test_incompatible_static_shapes_are_a_build_time_value_error():
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(ValueError, match="Dimensions must be equal, but are 3 and 4"):
            tf.add(tf.constant(np.zeros((2, 3))), tf.constant(np.zeros(4)))


def test_broadcast_static_shapes_with_unknown_dims():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        assert tf.add(x, tf.constant([1.0, 2.0, 3.0])).shape.as_list() == [None, 3]
        assert tf.multiply(x, tf.placeholder(tf.float32, [4, 1, 1])).shape.as_list() == \
            [4, None, 3]
        assert tf.less(x, 1.0).shape.as_list() == [None, 3]
        assert tf.add(x, tf.placeholder(tf.float32)).shape.ndims is None


def test_incompatible_fed_shapes_raise_invalid_argument():
    def build():
        x = tf.placeholder(tf.float32, [None])
        y = tf.placeholder(tf.float32, [None])
        return x + y, {x: np.ones(2, np.float32), y: np.ones(3, np.float32)}

    with pytest.raises(errors.InvalidArgumentError, match="Incompatible shapes"):
        run(build)


# --------------------------------------------------------------------------------------
# Division family
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt,out", [(np.int8, np.float32), (np.uint8, np.float32),
                                    (np.int16, np.float32), (np.uint16, np.float32),
                                    (np.int32, np.float64), (np.int64, np.float64),
                                    (np.float16, np.float16), (np.float32, np.float32),
                                    (np.float64, np.float64), (np.complex64, np.complex64)])
def test_truediv_casts_integers_like_tf(dt, out):
    x = np.array([7, 9, 1]).astype(dt)
    y = np.array([2, 4, 3]).astype(dt)
    for fn in (tf.truediv, tf.divide, tf.math.truediv, lambda a, b: a / b):
        got = run(lambda: fn(const(x), const(y)))
        assert got.dtype == out
        np.testing.assert_allclose(got, (x.astype(np.complex128) / y).astype(out)
                                   if np.dtype(dt).kind == "c" else
                                   x.astype(np.float64) / y.astype(np.float64),
                                   rtol=1e-3 if out == np.float16 else 1e-6)


def test_truediv_nodes_and_scalar_hint():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([7, 8])
        y = tf.truediv(x, 2)
        z = tf.divide(10, x)
    assert y.op.type == "RealDiv" and y.op.name == "truediv"
    assert [i.op.type for i in y.op.inputs] == ["Cast", "Cast"]
    assert y.dtype == tf.float64 and z.dtype == tf.float64
    with tf.Session(graph=g) as s:
        np.testing.assert_allclose(s.run([y, z]), [[3.5, 4.0], [10 / 7, 1.25]])


def test_truediv_rejects_mismatched_dtypes():
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(TypeError):
            tf.truediv(tf.constant([1]), tf.constant([1.0]))


def test_tf1_div_is_floor_for_ints_and_real_for_floats():
    g = tf.Graph()
    with g.as_default():
        a = tf.div(tf.constant([7, -7]), tf.constant([2, 2]))
        b = tf.div(tf.constant([7.0, -7.0]), 2.0)
    assert a.op.type == "FloorDiv" and b.op.type == "RealDiv" and a.op.name == "div"
    with tf.Session(graph=g) as s:
        ra, rb = s.run([a, b])
    assert ra.dtype == np.int32
    np.testing.assert_array_equal(ra, [3, -4])
    np.testing.assert_array_equal(rb, [3.5, -3.5])


@pytest.mark.parametrize("dt", SINTS, ids=name)
def test_floordiv_and_floormod_of_signed_ints(dt):
    x = np.array([7, -7, 7, -7, 0, 6]).astype(dt)
    y = np.array([2, 2, -2, -2, 3, -3]).astype(dt)
    q, r, m = run(lambda: [tf.floordiv(const(x), const(y)), tf.floormod(const(x), const(y)),
                           tf.mod(const(x), const(y))])
    assert q.dtype == dt and r.dtype == dt
    np.testing.assert_array_equal(q, [3, -4, -4, 3, 0, -2])
    np.testing.assert_array_equal(r, [1, 1, -1, -1, 0, 0])  # sign of the divisor
    np.testing.assert_array_equal(m, r)
    np.testing.assert_array_equal(q * y + r, x)


@pytest.mark.parametrize("dt", SINTS[2:], ids=name)
def test_truncatediv_and_truncatemod_are_c_semantics(dt):
    x = np.array([7, -7, 7, -7, 0]).astype(dt)
    y = np.array([2, 2, -2, -2, 3]).astype(dt)
    q, r = run(lambda: [tf.truncatediv(const(x), const(y)),
                        tf.truncatemod(const(x), const(y))])
    assert q.dtype == dt and r.dtype == dt
    np.testing.assert_array_equal(q, [3, -3, -3, 3, 0])
    np.testing.assert_array_equal(r, [1, -1, 1, -1, 0])  # sign of the dividend
    np.testing.assert_array_equal(q * y + r, x)


@pytest.mark.parametrize("dt", UINTS, ids=name)
def test_unsigned_division(dt):
    x = np.array([7, 200, 9]).astype(dt)
    y = np.array([2, 7, 9]).astype(dt)
    q, r, t = run(lambda: [tf.floordiv(const(x), const(y)), tf.floormod(const(x), const(y)),
                           tf.truncatediv(const(x), const(y))])
    assert q.dtype == dt and r.dtype == dt and t.dtype == dt
    np.testing.assert_array_equal(q, x // y)
    np.testing.assert_array_equal(r, x % y)
    np.testing.assert_array_equal(t, x // y)


@pytest.mark.parametrize("dt", FLOATS, ids=name)
def test_float_floordiv_is_floor_of_quotient(dt):
    x = np.array([1.0, 7.5, -7.5, 7.5, -1.0]).astype(dt)
    y = np.array([0.1, 2.0, 2.0, -2.0, 3.0]).astype(dt)
    got = run(lambda: tf.floordiv(const(x), const(y)))
    assert got.dtype == dt
    want = np.floor(x / y)  # TF: floor(x / y); numpy's // gives 9.0 for 1.0 // 0.1
    np.testing.assert_array_equal(got, want)
    if dt == np.float64:
        assert got[0] == 10.0


@pytest.mark.parametrize("dt", FLOATS, ids=name)
def test_float_mods(dt):
    x = np.array([7.5, -7.5, 7.5, -7.5]).astype(dt)
    y = np.array([2.0, 2.0, -2.0, -2.0]).astype(dt)
    if dt == np.float16:  # TF's CPU has no float16 TruncateMod kernel
        with pytest.raises(errors.InvalidArgumentError, match="No OpKernel.*TruncateMod"):
            run(lambda: on_cpu(lambda: tf.truncatemod(const(x), const(y))))
        fm = run(lambda: tf.floormod(const(x), const(y)))
        np.testing.assert_array_equal(fm, np.array([1.5, 0.5, -0.5, -1.5]).astype(dt))
        return
    fm, tm = run(lambda: [tf.floormod(const(x), const(y)), tf.truncatemod(const(x), const(y))])
    assert fm.dtype == dt and tm.dtype == dt
    np.testing.assert_array_equal(fm, np.array([1.5, 0.5, -0.5, -1.5]).astype(dt))
    np.testing.assert_array_equal(tm, np.array([1.5, -1.5, 1.5, -1.5]).astype(dt))


def test_float_truncatediv():
    got = run(lambda: tf.truncatediv(tf.constant([-7.5, 7.5]), tf.constant([2.0, -2.0])))
    np.testing.assert_array_equal(got, [-3.0, -3.0])


def test_realdiv_and_float_division_by_zero_is_silent():
    got = run(lambda: tf.realdiv(tf.constant([1.0, -1.0, 0.0]), tf.constant(0.0)))
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])
    got = run(lambda: tf.floordiv(tf.constant([1.0]), tf.constant([0.0])))
    assert got[0] == np.inf


@pytest.mark.parametrize("fn", [tf.floordiv, tf.floormod, tf.truncatediv, tf.truncatemod,
                                tf.div, tf.floor_div, lambda a, b: a // b,
                                lambda a, b: a % b,
                                lambda a, b: apply_op("Div", x=a, y=b),
                                lambda a, b: apply_op("Mod", x=a, y=b)],
                         ids=["floordiv", "floormod", "truncatediv", "truncatemod", "div",
                              "floor_div", "op//", "op%", "Div", "Mod"])
@pytest.mark.parametrize("dt", [np.int32, np.int64])
def test_integer_division_by_zero_raises_invalid_argument(fn, dt):
    with pytest.raises(errors.InvalidArgumentError, match="Integer division by zero"):
        run(lambda: fn(const(np.array([1, 2], dt)), const(np.array([1, 0], dt))))


def test_integer_division_by_fed_zero_raises_at_run_time():
    def build():
        x = tf.placeholder(tf.int32, [None])
        y = tf.placeholder(tf.int32, [])
        return x // y, {x: np.array([4, 5], np.int32), y: 0}

    with pytest.raises(errors.InvalidArgumentError, match="division by zero"):
        run(build)


def test_div_op_on_ints_truncates():
    got = run(lambda: apply_op("Div", x=tf.constant([-7, 7]), y=tf.constant([2, 2])))
    np.testing.assert_array_equal(got, [-3, 3])
    got = run(lambda: apply_op("Mod", x=tf.constant([-7, 7]), y=tf.constant([2, -2])))
    np.testing.assert_array_equal(got, [-1, 1])


def test_div_no_nan_and_friends():
    x = np.array([1.0, 2.0, 0.0, np.inf], np.float32)
    y = np.array([0.0, 4.0, 0.0, 0.0], np.float32)
    dnn, mnn, xd, xl = run(lambda: [tf.div_no_nan(const(x), const(y)),
                                    tf.math.multiply_no_nan(const(x), const(y)),
                                    tf.math.xdivy(const(x[:3]), const(y[:3])),
                                    tf.math.xlogy(const(np.array([0.0, 2.0], np.float32)),
                                                  const(np.array([0.0, np.e], np.float32)))])
    for v in (dnn, mnn, xd, xl):
        assert v.dtype == np.float32
    np.testing.assert_array_equal(dnn, [0.0, 0.5, 0.0, 0.0])
    np.testing.assert_array_equal(mnn, [0.0, 8.0, 0.0, 0.0])
    np.testing.assert_array_equal(xd[[1, 2]], [0.5, 0.0])
    assert xd[0] == np.inf
    np.testing.assert_allclose(xl, [0.0, 2.0], rtol=1e-6)
    got = run(lambda: tf.div_no_nan(tf.constant([1 + 1j], tf.complex64),
                                    tf.constant([0j], tf.complex64)))
    assert got.dtype == np.complex64 and got[0] == 0


# --------------------------------------------------------------------------------------
# pow, maximum, minimum, squared_difference, atan2
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", SINTS, ids=name)
def test_integer_pow(dt):
    x = np.array([2, -3, 5, 0]).astype(dt)
    y = np.array([3, 3, 0, 2]).astype(dt)
    got = run(lambda: tf.pow(const(x), const(y)))
    assert got.dtype == dt
    np.testing.assert_array_equal(got, np.array([8, -27, 1, 0]).astype(dt))


def test_integer_pow_wraps_on_overflow():
    got = run(lambda: tf.pow(tf.constant([2], tf.int32), tf.constant([33], tf.int32)))
    assert got[0] == np.int32(np.power(np.int32(2), np.int32(33)))


def test_integer_pow_with_negative_exponent_is_invalid_argument():
    with pytest.raises(errors.InvalidArgumentError,
                       match="Integers to negative integer powers are not allowed"):
        run(lambda: tf.pow(tf.constant([2, 3]), tf.constant([1, -1])))
    with pytest.raises(errors.InvalidArgumentError):
        run(lambda: tf.constant(2) ** -1)


@pytest.mark.parametrize("dt", FLOATS + COMPLEX, ids=name)
def test_float_pow(dt):
    x = np.array([2.0, 0.5, 9.0]).astype(dt)
    y = np.array([-1.0, 2.0, 0.5]).astype(dt)
    got = run(lambda: tf.pow(const(x), const(y)))
    assert got.dtype == dt
    np.testing.assert_allclose(got, np.array([0.5, 0.25, 3.0]).astype(dt), rtol=1e-3)


def test_pow_node_name():
    g = tf.Graph()
    with g.as_default():
        p = tf.pow(tf.constant(2.0), 3.0)
    assert p.op.type == "Pow" and p.op.name == "Pow"


@pytest.mark.parametrize("dt", SINTS + UINTS + FLOATS, ids=name)
def test_maximum_minimum(dt):
    x = np.array([[1, 5, 3], [7, 0, 2]]).astype(dt)
    y = np.array([4, 4, 4]).astype(dt)
    mx, mn = run(lambda: [tf.maximum(const(x), const(y)), tf.minimum(const(x), const(y))])
    assert mx.dtype == dt and mn.dtype == dt
    np.testing.assert_array_equal(mx, np.maximum(x, y))
    np.testing.assert_array_equal(mn, np.minimum(x, y))


def test_maximum_propagates_nan():
    got = run(lambda: tf.maximum(tf.constant([np.nan, 1.0]), tf.constant([1.0, np.nan])))
    assert np.all(np.isnan(got))


@pytest.mark.parametrize("dt", [np.int32, np.int64, np.float32, np.float64], ids=name)
def test_squared_difference_real(dt):
    x = np.array([1, 5, -3]).astype(dt)
    y = np.array([4, 5, 2]).astype(dt)
    got = run(lambda: tf.squared_difference(const(x), const(y)))
    assert got.dtype == dt
    np.testing.assert_array_equal(got, np.array([9, 0, 25]).astype(dt))


def test_squared_difference_complex_is_abs_squared():
    got = run(lambda: tf.squared_difference(tf.constant([1 + 2j], tf.complex64),
                                            tf.constant([0j], tf.complex64)))
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, [5 + 0j])


@pytest.mark.parametrize("dt", FLOATS, ids=name)
def test_atan2(dt):
    y = np.array([1.0, 1.0, -1.0, 0.0]).astype(dt)
    x = np.array([1.0, -1.0, -1.0, -1.0]).astype(dt)
    got = run(lambda: tf.atan2(const(y), const(x)))
    assert got.dtype == dt
    np.testing.assert_allclose(got, np.arctan2(y, x), rtol=1e-3)


def test_scalar_mul():
    got = run(lambda: tf.scalar_mul(2, tf.constant([1.0, 2.0])))
    np.testing.assert_array_equal(got, [2.0, 4.0])
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(ValueError, match="Only scalar multiply"):
            tf.scalar_mul(tf.constant([1.0, 2.0]), tf.constant([1.0, 2.0]))


# --------------------------------------------------------------------------------------
# Bitwise
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", SINTS + UINTS, ids=name)
def test_bitwise_ops(dt):
    x = np.array([12, 10, 7, 0]).astype(dt)
    y = np.array([10, 6, 1, 5]).astype(dt)
    a, o, xo = run(lambda: [tf.bitwise.bitwise_and(const(x), const(y)),
                            tf.bitwise.bitwise_or(const(x), const(y)),
                            tf.bitwise.bitwise_xor(const(x), const(y))])
    for v in (a, o, xo):
        assert v.dtype == dt
    np.testing.assert_array_equal(a, x & y)
    np.testing.assert_array_equal(o, x | y)
    np.testing.assert_array_equal(xo, x ^ y)


def test_shifts_clamp_the_shift_amount_like_tf():
    x = np.array([1, 1, 1, 3], np.int8)
    s = np.array([7, 8, -1, 2], np.int8)
    got = run(lambda: tf.bitwise.left_shift(const(x), const(s)))
    np.testing.assert_array_equal(got, np.array([-128, -128, 1, 12], np.int8))
    x = np.array([-128, -128, 64, -7], np.int8)
    got = run(lambda: tf.bitwise.right_shift(const(x), const(s)))
    np.testing.assert_array_equal(got, np.array([-1, -1, 64, -2], np.int8))  # arithmetic
    x = np.array([255, 255], np.uint8)
    got = run(lambda: tf.bitwise.right_shift(const(x), const(np.array([4, 9], np.uint8))))
    np.testing.assert_array_equal(got, np.array([15, 1], np.uint8))


# --------------------------------------------------------------------------------------
# Comparisons and logic
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", SINTS + UINTS + FLOATS, ids=name)
def test_comparisons(dt):
    x = np.array([[1, 5, 3], [4, 4, 0]]).astype(dt)
    y = np.array([4, 4, 3]).astype(dt)
    fns = [(tf.less, np.less), (tf.less_equal, np.less_equal), (tf.greater, np.greater),
           (tf.greater_equal, np.greater_equal), (tf.equal, np.equal),
           (tf.not_equal, np.not_equal)]
    got = run(lambda: [f(const(x), const(y)) for f, _ in fns])
    for v, (_, ref) in zip(got, fns):
        assert v.dtype == np.bool_ and v.shape == (2, 3)
        np.testing.assert_array_equal(v, ref(x, y))


def test_comparison_operators():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1, 2, 3])
        outs = [x < 2, x <= 2, x > 2, x >= 2]
    with tf.Session(graph=g) as s:
        got = s.run(outs)
    np.testing.assert_array_equal(got, [[True, False, False], [True, True, False],
                                        [False, False, True], [False, True, True]])


def test_equal_on_strings_bools_and_complex():
    s, b, c = run(lambda: [tf.equal(tf.constant(["a", "b"]), tf.constant("a")),
                           tf.not_equal(tf.constant([True, False]), tf.constant(True)),
                           tf.equal(tf.constant([1 + 1j, 2j]), tf.constant(1 + 1j))])
    for v in (s, b, c):
        assert v.dtype == np.bool_
    np.testing.assert_array_equal(s, [True, False])
    np.testing.assert_array_equal(b, [False, True])
    np.testing.assert_array_equal(c, [True, False])


def test_ordering_comparisons_reject_complex_and_strings():
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(TypeError):
            tf.less(tf.constant([1j]), tf.constant([1j]))
        with pytest.raises(TypeError):
            tf.greater(tf.constant(["a"]), tf.constant(["b"]))
        with pytest.raises(TypeError):
            tf.equal(tf.constant([1]), tf.constant([1.0]))


def test_equal_without_incompatible_shape_error():
    g = tf.Graph()
    with g.as_default():
        x, y = tf.constant([1, 2]), tf.constant([1, 2, 3])
        e = apply_op("Equal", x=x, y=y, incompatible_shape_error=False)
        n = apply_op("NotEqual", x=x, y=y, incompatible_shape_error=False)
        with pytest.raises(ValueError):
            tf.equal(x, y)
    assert e.shape.ndims is None
    with tf.Session(graph=g) as s:
        assert s.run([e, n]) == [False, True]


def test_logical_ops_and_operators():
    x = np.array([True, True, False, False])
    y = np.array([True, False, True, False])
    got = run(lambda: [tf.logical_and(const(x), const(y)), tf.logical_or(const(x), const(y)),
                       tf.logical_xor(const(x), const(y)), const(x) & const(y),
                       const(x) | const(y), const(x) ^ const(y), tf.math.logical_xor(x, y)])
    np.testing.assert_array_equal(got[0], x & y)
    np.testing.assert_array_equal(got[1], x | y)
    np.testing.assert_array_equal(got[2], x ^ y)
    np.testing.assert_array_equal(got[3], x & y)
    np.testing.assert_array_equal(got[4], x | y)
    np.testing.assert_array_equal(got[5], x ^ y)
    np.testing.assert_array_equal(got[6], x ^ y)
    g = tf.Graph()
    with g.as_default():
        z = tf.logical_xor(tf.constant(True), tf.constant(False))
        assert z.op.type == "LogicalAnd" and z.op.name == "LogicalXor"
        with pytest.raises(TypeError):
            tf.logical_and(tf.constant([1]), tf.constant([1]))


# --------------------------------------------------------------------------------------
# Cast
# --------------------------------------------------------------------------------------
def test_cast_float_to_int_truncates_toward_zero():
    x = np.array([1.7, -1.7, 2.5, -0.5, 0.0], np.float32)
    for dt in (np.int8, np.int16, np.int32, np.int64):
        got = run(lambda: tf.cast(const(x), tf.as_dtype(dt)))
        assert got.dtype == dt
        np.testing.assert_array_equal(got, [1, -1, 2, 0, 0])


def test_cast_bool_number_round_trip():
    b, f, i, c = run(lambda: [tf.cast(tf.constant([0.0, 0.5, -2.0, np.nan]), tf.bool),
                              tf.cast(tf.constant([True, False]), tf.float32),
                              tf.cast(tf.constant([True, False]), tf.int64),
                              tf.cast(tf.constant([True]), tf.complex64)])
    np.testing.assert_array_equal(b, [False, True, True, True])
    assert f.dtype == np.float32 and list(f) == [1.0, 0.0]
    assert i.dtype == np.int64 and list(i) == [1, 0]
    assert c.dtype == np.complex64 and c[0] == 1


def test_cast_complex_to_real_keeps_the_real_part():
    x = np.array([1.5 + 2j, -2.7 - 1j, 0.5j], np.complex64)
    f, i, b = run(lambda: [tf.cast(const(x), tf.float64), tf.cast(const(x), tf.int32),
                           tf.cast(const(x), tf.bool)])
    assert f.dtype == np.float64
    np.testing.assert_allclose(f, [1.5, -2.7, 0.0], rtol=1e-6)
    np.testing.assert_array_equal(i, [1, -2, 0])
    np.testing.assert_array_equal(b, [True, True, False])  # TF looks at the real part


@pytest.mark.parametrize("src", SINTS + UINTS + FLOATS, ids=name)
@pytest.mark.parametrize("dst", [np.int32, np.uint8, np.float16, np.float64, np.complex128],
                         ids=name)
def test_cast_matrix(src, dst):
    x = np.array([0, 1, 7, 100]).astype(src)
    g = tf.Graph()
    with g.as_default():
        y = tf.cast(const(x), tf.as_dtype(dst))
    if src == dst:
        assert y.op.type == "Const"
    else:
        assert y.op.type == "Cast"
        assert y.op.get_attr("SrcT") == tf.as_dtype(src)
        assert y.op.get_attr("DstT") == tf.as_dtype(dst)
        assert y.op.get_attr("Truncate") is False
    with tf.Session(graph=g) as s:
        got = s.run(y)
    assert got.dtype == dst
    np.testing.assert_array_equal(got, x.astype(dst))


def test_cast_same_dtype_returns_the_same_tensor_and_python_values_convert():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0])
        assert tf.cast(x, tf.float32) is x
        y = tf.cast([1.9, -1.9], tf.int32)
        assert y.op.type == "Cast" and y.dtype == tf.int32
        z = tf.cast(x, tf.int32, name="my_cast")
        assert z.op.name == "my_cast"
    with tf.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(y), [1, -1])


def test_cast_aliases():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1, 2])
        f, d, i, l = tf.to_float(x), tf.to_double(x), tf.to_int32(tf.to_float(x)), tf.to_int64(x)
    assert (f.dtype, d.dtype, i.dtype, l.dtype) == (tf.float32, tf.float64, tf.int32, tf.int64)
    assert f.op.name == "ToFloat"
    with tf.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(i), [1, 2])


def test_cast_string_is_unimplemented_at_run_time():
    with pytest.raises(errors.UnimplementedError, match="Cast string to int32"):
        run(lambda: tf.cast(tf.constant(["1"]), tf.int32))


def test_saturate_cast_clamps():
    got = run(lambda: tf.saturate_cast(tf.constant([-500.0, 1.5, 300.0]), tf.uint8))
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, [0, 1, 255])
    got = run(lambda: tf.saturate_cast(tf.constant([70000, -70000], tf.int32), tf.int16))
    np.testing.assert_array_equal(got, [32767, -32768])


# --------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------
def _broadcastable_pair():
    return hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=4)


_BIN = [("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
        ("maximum", np.maximum), ("minimum", np.minimum),
        ("squared_difference", lambda a, b: (a - b) * (a - b))]


@settings(max_examples=30, deadline=None)
@given(fn=st.sampled_from(_BIN),
       dt=st.sampled_from([np.int32, np.int64, np.float32, np.float64]),
       shapes=_broadcastable_pair(), data=st.data())
def test_binary_property_matches_numpy(fn, dt, shapes, data):
    api, ref = fn
    (sx, sy), out_shape = shapes
    el = st.integers(-50, 50)
    x = data.draw(hnp.arrays(np.int64, sx, elements=el)).astype(dt)
    y = data.draw(hnp.arrays(np.int64, sy, elements=el)).astype(dt)
    got = run(lambda: getattr(tf, api)(const(x), const(y)))
    assert np.shape(got) == out_shape
    assert np.asarray(got).dtype == dt
    np.testing.assert_array_equal(got, ref(x, y).astype(dt))


def _py_trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


@settings(max_examples=30, deadline=None)
@given(dt=st.sampled_from([np.int32, np.int64]), data=st.data(),
       shapes=_broadcastable_pair())
def test_integer_division_property(dt, data, shapes):
    (sx, sy), out_shape = shapes
    x = data.draw(hnp.arrays(np.int64, sx, elements=st.integers(-1000, 1000))).astype(dt)
    y = data.draw(hnp.arrays(np.int64, sy, elements=st.integers(-30, 30).filter(bool))
                  ).astype(dt)
    fd, fm, td, tm = run(lambda: [tf.floordiv(const(x), const(y)),
                                  tf.floormod(const(x), const(y)),
                                  tf.truncatediv(const(x), const(y)),
                                  tf.truncatemod(const(x), const(y))])
    bx, by = np.broadcast_arrays(x, y)
    fd_want = np.array([a // b for a, b in zip(bx.ravel().tolist(), by.ravel().tolist())])
    td_want = np.array([_py_trunc_div(a, b)
                        for a, b in zip(bx.ravel().tolist(), by.ravel().tolist())])
    for v in (fd, fm, td, tm):
        assert np.shape(v) == out_shape and np.asarray(v).dtype == dt
    np.testing.assert_array_equal(np.ravel(fd), fd_want)
    np.testing.assert_array_equal(np.ravel(fm), bx.ravel() - fd_want * by.ravel())
    np.testing.assert_array_equal(np.ravel(td), td_want)
    np.testing.assert_array_equal(np.ravel(tm), bx.ravel() - td_want * by.ravel())


@settings(max_examples=30, deadline=None)
@given(src=st.sampled_from([np.float32, np.float64]),
       dst=st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.bool_]),
       x=hnp.arrays(np.float64, st.integers(0, 10), elements=st.floats(-100, 100)))
def test_cast_property(src, dst, x):
    x = x.astype(src)
    got = run(lambda: tf.cast(const(x), tf.as_dtype(dst)))
    assert got.dtype == dst
    if _GPU_PRESENT and src == np.float32:
        # the cast runs on the GPU, whose float32 arithmetic flushes subnormal inputs to
        # zero (1e-45 casts to False there, True on the CPU)
        x = np.where(np.abs(x) < np.finfo(np.float32).tiny, np.float32(0), x)
    want = (x != 0) if dst == np.bool_ else np.trunc(x).astype(dst)
    np.testing.assert_array_equal(got, want)


_GPU_PRESENT = tf.test.is_gpu_available()


# --------------------------------------------------------------------------------------
# The integer division family on empty and broadcast shapes (properties)
# --------------------------------------------------------------------------------------
def _trunc_div(x, y):
    q = np.abs(x) // np.abs(y)
    return np.where((x < 0) != (y < 0), -q, q).astype(x.dtype)


_INT_DIV_OPS = {"FloorDiv": np.floor_divide, "FloorMod": np.remainder,
                "TruncateDiv": _trunc_div, "TruncateMod": np.fmod,
                "Div": _trunc_div, "Mod": np.fmod}


@pytest.fixture(scope="module")
def int_division_steps():
    """One session, one placeholder pair per (op, dtype): the static shapes say nothing,
    so every example goes through the kernels' run-time checks."""
    g = tf.Graph()
    steps = {}
    with g.as_default(), tf.device("/device:CPU:0"):
        for dt in (np.int32, np.int64):
            x = tf.placeholder(tf.as_dtype(dt))
            y = tf.placeholder(tf.as_dtype(dt))
            for op in _INT_DIV_OPS:
                steps[op, np.dtype(dt)] = (x, y, apply_op(op, x=x, y=y))
    with tf.Session(graph=g) as s:
        yield s, steps


@st.composite
def _broadcast_pair(draw):
    """Two shapes that broadcast, with empty dimensions likely, and zero divisors likely."""
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3))
    ys = tuple(draw(st.sampled_from([d, 1])) for d in shape)
    ys = ys[draw(st.integers(0, len(ys))):]  # fewer leading dimensions
    xs = tuple(draw(st.sampled_from([d, 1])) for d in shape)
    dt = draw(st.sampled_from([np.int32, np.int64]))
    x = draw(hnp.arrays(dt, xs, elements=st.integers(-1000, 1000)))
    y = draw(hnp.arrays(dt, ys, elements=st.integers(-5, 5)))
    return x, y


@settings(max_examples=150, deadline=None)
@given(pair=_broadcast_pair(), op=st.sampled_from(sorted(_INT_DIV_OPS)))
def test_integer_division_family_only_checks_divisors_it_uses(int_division_steps, pair, op):
    sess, steps = int_division_steps
    x, y = pair
    px, py, out = steps[op, x.dtype]
    shape = np.broadcast_shapes(x.shape, y.shape)
    if math.prod(shape) and not y.all():
        with pytest.raises(errors.InvalidArgumentError, match="Integer division by zero"):
            sess.run(out, {px: x, py: y})
        return
    got = sess.run(out, {px: x, py: y})
    assert np.shape(got) == shape and np.asarray(got).dtype == x.dtype
    if math.prod(shape):
        np.testing.assert_array_equal(got, _INT_DIV_OPS[op](x, y))


@pytest.mark.parametrize("op", sorted(_INT_DIV_OPS))
def test_integer_division_by_zero_with_an_empty_result_is_empty(op):
    """TF computes nothing, so checks nothing: ``floormod(zeros([0]), 0)`` is ``[]``."""
    got = run(lambda: apply_op(op, x=tf.zeros([0], tf.int32), y=tf.constant(0)))
    assert got.shape == (0,) and got.dtype == np.int32
    got = run(lambda: apply_op(op, x=tf.zeros([2, 0], tf.int64),
                               y=tf.constant([[0], [3]], tf.int64)))
    assert got.shape == (2, 0)


def test_gradient_of_a_reduction_over_a_fed_scalar():
    """The reduction's gradient takes ``axes % rank`` with rank 0: an empty FloorMod by
    zero, which must not raise (issue 14, item 2)."""
    def build():
        x = tf.placeholder(tf.float32)
        return tf.gradients(tf.reduce_sum(x * x), x)[0], {x: 3.0}

    assert run(build) == np.float32(6.0)
