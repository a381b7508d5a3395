"""Unary element-wise math ops of the standard kernel set, checked end to end through a
session against numpy and against TensorFlow's documented semantics."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import flowrt as tf
from flowrt import errors



def on_cpu(build):
    """Build on the CPU: these check TF's CPU kernel set (a GPU host would otherwise run
    the op on its GPU, whose kernels TF registers for other dtypes)."""
    with tf.device("/device:CPU:0"):
        return build()

def run(build, feeds=None):
    """Build ``build()`` in a fresh graph and run its result in a fresh session.

    ``feeds`` maps placeholder factories' names to values: ``build`` may return
    ``(fetches, {placeholder: value})``."""
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


def tol(dt):
    dt = np.dtype(dt)
    if dt in (np.float16,):
        return dict(rtol=2e-3, atol=2e-3)
    if dt in (np.float32, np.complex64):
        return dict(rtol=2e-6, atol=1e-6)
    return dict(rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------
# numpy-like unary functions over float and complex dtypes
# --------------------------------------------------------------------------------------
UNARY = [
    # (api name, numpy reference, input domain (lo, hi), complex allowed)
    ("sqrt", np.sqrt, (0.0, 10.0), True),
    ("exp", np.exp, (-5.0, 5.0), True),
    ("expm1", np.expm1, (-2.0, 2.0), True),
    ("log", np.log, (0.1, 10.0), True),
    ("log1p", np.log1p, (-0.5, 5.0), True),
    ("sin", np.sin, (-4.0, 4.0), True),
    ("cos", np.cos, (-4.0, 4.0), True),
    ("tan", np.tan, (-1.2, 1.2), True),
    ("asin", np.arcsin, (-0.99, 0.99), True),
    ("acos", np.arccos, (-0.99, 0.99), True),
    ("atan", np.arctan, (-5.0, 5.0), True),
    ("sinh", np.sinh, (-3.0, 3.0), True),
    ("cosh", np.cosh, (-3.0, 3.0), True),
    ("tanh", np.tanh, (-4.0, 4.0), True),
    ("asinh", np.arcsinh, (-5.0, 5.0), True),
    ("acosh", np.arccosh, (1.0, 6.0), True),
    ("atanh", np.arctanh, (-0.9, 0.9), True),
    ("floor", np.floor, (-5.0, 5.0), False),
    ("ceil", np.ceil, (-5.0, 5.0), False),
    ("rint", np.rint, (-5.0, 5.0), False),
]


@pytest.mark.parametrize("api,ref,domain,cplx", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("dt", FLOATS + COMPLEX, ids=lambda d: np.dtype(d).name)
def test_unary_float_and_complex(api, ref, domain, cplx, dt):
    if api == "rint" and dt == np.float16:  # TF's CPU has no float16 Rint kernel
        with pytest.raises(errors.InvalidArgumentError, match="No OpKernel.*Rint"):
            run(lambda: on_cpu(lambda: tf.rint(const(np.zeros(2, dt)))))
        return
    if np.dtype(dt).kind == "c" and not cplx:
        with pytest.raises(TypeError):
            run(lambda: getattr(tf, api)(const(np.zeros(2, dt))))
        return
    rng = np.random.default_rng(len(api))
    x = rng.uniform(*domain, size=(3, 4))
    if np.dtype(dt).kind == "c":
        x = x + 1j * rng.uniform(-0.5, 0.5, size=(3, 4))
    x = x.astype(dt)
    got = run(lambda: getattr(tf, api)(const(x)))
    assert got.dtype == dt
    assert got.shape == (3, 4)
    want = ref(x.astype(np.complex128 if np.dtype(dt).kind == "c" else np.float64))
    np.testing.assert_allclose(got, want.astype(dt), **tol(dt))
    # the tf.math alias is the same function
    assert getattr(tf.math, api) is getattr(tf, api)


@pytest.mark.parametrize("api", ["sqrt", "exp", "log", "sin", "floor", "erf", "lgamma"])
def test_unary_float_ops_reject_integers_at_build_time(api):
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(TypeError, match="int32"):
            getattr(tf, api)(tf.constant([1, 2], tf.int32))


def test_unary_static_shape_keeps_unknown_dims():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        for api in ("exp", "negative", "abs", "square", "sigmoid", "is_nan", "floor"):
            y = getattr(tf, api)(x)
            assert y.shape.as_list() == [None, 3]
        assert tf.is_nan(x).dtype == tf.bool
        u = tf.placeholder(tf.float32)
        assert tf.exp(u).shape.ndims is None


def test_unary_runs_with_fed_placeholder():
    def build():
        x = tf.placeholder(tf.float64, [None, 3])
        return tf.exp(x), {x: np.arange(6.0).reshape(2, 3)}

    np.testing.assert_allclose(run(build), np.exp(np.arange(6.0).reshape(2, 3)))


# --------------------------------------------------------------------------------------
# Neg, Abs, Sign, Square, Reciprocal over integer dtypes too
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", SINTS + FLOATS + COMPLEX, ids=lambda d: np.dtype(d).name)
def test_negative(dt):
    x = np.array([[1, -2, 0], [5, -7, 3]]).astype(dt)
    got = run(lambda: tf.negative(const(x)))
    assert got.dtype == dt
    np.testing.assert_array_equal(got, -x)
    got = run(lambda: -const(x))  # the operator
    np.testing.assert_array_equal(got, -x)


def test_negative_and_abs_of_int_min_wrap():
    x = np.array([np.iinfo(np.int32).min, 5], np.int32)
    np.testing.assert_array_equal(run(lambda: tf.negative(const(x))), x * -1)
    got = run(lambda: tf.abs(const(x)))
    assert got.dtype == np.int32
    assert got[0] == np.iinfo(np.int32).min and got[1] == 5
    x8 = np.array([-128, -3], np.int8)
    np.testing.assert_array_equal(run(lambda: tf.abs(const(x8))), np.array([-128, 3], np.int8))


@pytest.mark.parametrize("dt", SINTS + FLOATS, ids=lambda d: np.dtype(d).name)
def test_abs_real(dt):
    x = np.array([-3, 0, 4, -1]).astype(dt)
    got = run(lambda: abs(const(x)))  # Python abs() goes through tf.abs
    assert got.dtype == dt
    np.testing.assert_array_equal(got, np.abs(x))


@pytest.mark.parametrize("dt,real", [(np.complex64, np.float32), (np.complex128, np.float64)])
def test_abs_complex_gives_real_dtype_via_complex_abs(dt, real):
    x = np.array([3 + 4j, -2.25 + 4.75j, 0j], dt)
    g = tf.Graph()
    with g.as_default():
        y = tf.abs(const(x))
    assert y.dtype == tf.as_dtype(real)
    assert y.op.type == "ComplexAbs"
    with tf.Session(graph=g) as s:
        got = s.run(y)
    assert got.dtype == real
    np.testing.assert_allclose(got, [5.0, 5.25594902, 0.0], rtol=1e-6)


def test_abs_rejects_unsigned_and_bool():
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(TypeError):
            tf.abs(tf.constant([1], tf.uint8))
        with pytest.raises(TypeError):
            tf.abs(tf.constant([True]))


@pytest.mark.parametrize("dt", SINTS + FLOATS, ids=lambda d: np.dtype(d).name)
def test_sign_real(dt):
    x = np.array([-5, 0, 3, -1]).astype(dt)
    got = run(lambda: tf.sign(const(x)))
    assert got.dtype == dt
    np.testing.assert_array_equal(got, np.array([-1, 0, 1, -1]).astype(dt))


def test_sign_float_nan_is_nan():
    got = run(lambda: tf.sign(tf.constant([np.nan, -2.0, 0.0])))
    assert np.isnan(got[0]) and got[1] == -1 and got[2] == 0


@pytest.mark.parametrize("dt", COMPLEX, ids=lambda d: np.dtype(d).name)
def test_sign_complex_is_x_over_abs_x(dt):
    x = np.array([3 + 4j, 0j, -2j], dt)
    got = run(lambda: tf.sign(const(x)))
    assert got.dtype == dt
    np.testing.assert_allclose(got, np.array([0.6 + 0.8j, 0, -1j]), rtol=1e-6)


@pytest.mark.parametrize("dt", SINTS + UINTS + FLOATS + COMPLEX, ids=lambda d: np.dtype(d).name)
def test_square(dt):
    x = np.array([1, 2, 3, 11]).astype(dt)
    if np.dtype(dt).kind in "fc":
        x = x * dt(-1.5) if np.dtype(dt).kind == "f" else x * dt(1 - 1j)
    got = run(lambda: tf.square(const(x)))
    assert got.dtype == dt
    np.testing.assert_allclose(got, x * x, **tol(dt))


def test_square_int_overflow_wraps():
    x = np.array([16, 100], np.int8)
    np.testing.assert_array_equal(run(lambda: tf.square(const(x))), (x * x).astype(np.int8))


@pytest.mark.parametrize("dt", FLOATS + COMPLEX, ids=lambda d: np.dtype(d).name)
def test_reciprocal_float(dt):
    x = np.array([2, -4, 0.5, 8]).astype(dt)
    got = run(lambda: tf.reciprocal(const(x)))
    assert got.dtype == dt
    np.testing.assert_allclose(got, 1 / x, **tol(dt))
    assert tf.math.reciprocal is tf.reciprocal


def test_reciprocal_float_zero_is_inf():
    assert run(lambda: tf.reciprocal(tf.constant(0.0))) == np.inf


@pytest.mark.parametrize("dt", SINTS, ids=lambda d: np.dtype(d).name)
def test_reciprocal_of_ints_has_no_cpu_kernel_as_in_tf(dt):
    x = np.array([1, -1, 2, -3, 7]).astype(dt)
    with pytest.raises(errors.InvalidArgumentError, match="No OpKernel.*Reciprocal"):
        run(lambda: on_cpu(lambda: tf.reciprocal(const(x))))


@pytest.mark.parametrize("dt", FLOATS + COMPLEX, ids=lambda d: np.dtype(d).name)
def test_rsqrt(dt):
    x = np.array([1, 4, 0.25, 9]).astype(dt)
    got = run(lambda: tf.rsqrt(const(x)))
    assert got.dtype == dt
    np.testing.assert_allclose(got, 1 / np.sqrt(x), **tol(dt))


def test_sqrt_of_negative_is_nan_and_log_of_zero_is_minus_inf():
    got = run(lambda: [tf.sqrt(tf.constant(-1.0)), tf.log(tf.constant(0.0))])
    assert np.isnan(got[0]) and got[1] == -np.inf


# --------------------------------------------------------------------------------------
# Sigmoid / Tanh (also exported from tf.nn)
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: np.dtype(d).name)
def test_sigmoid_real_is_stable(dt):
    x = np.array([-1000, -100, -20, -1, 0, 1, 20, 100, 1000]).astype(dt)
    got = run(lambda: tf.sigmoid(const(x)))
    assert got.dtype == dt
    assert np.all(np.isfinite(got))
    with np.errstate(over="ignore"):
        want = 1 / (1 + np.exp(-x.astype(np.float64)))
    np.testing.assert_allclose(got, want.astype(dt), rtol=tol(dt)["rtol"], atol=1e-30)
    assert got[0] == 0 and got[-1] == 1 and got[4] == 0.5


@pytest.mark.parametrize("dt", COMPLEX, ids=lambda d: np.dtype(d).name)
def test_sigmoid_complex(dt):
    x = np.array([0.5 + 0.25j, -1 - 1j], dt)
    got = run(lambda: tf.sigmoid(const(x)))
    assert got.dtype == dt
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-x)), rtol=1e-6)


def test_sigmoid_and_tanh_exports():
    assert tf.nn.sigmoid is tf.sigmoid is tf.math.sigmoid
    assert tf.nn.tanh is tf.tanh is tf.math.tanh
    g = tf.Graph()
    with g.as_default():
        y = tf.nn.sigmoid(tf.constant([0.0]), name="sig")
        z = tf.tanh(tf.constant([0.0]))
    assert y.op.type == "Sigmoid" and y.op.name == "sig"
    assert z.op.type == "Tanh" and z.op.name == "Tanh"


def test_log_sigmoid_is_stable():
    x = np.array([-1000.0, -5.0, 0.0, 5.0, 1000.0])
    got = run(lambda: tf.math.log_sigmoid(const(x)))
    want = -np.logaddexp(0, -x)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert tf.log_sigmoid is tf.math.log_sigmoid


# --------------------------------------------------------------------------------------
# Rounding
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: np.dtype(d).name)
def test_round_is_half_to_even(dt):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, 2.6, -2.6]).astype(dt)
    if dt == np.float16:  # TF's CPU has no float16 Rint kernel
        with pytest.raises(errors.InvalidArgumentError, match="No OpKernel.*Rint"):
            run(lambda: on_cpu(lambda: tf.rint(const(x))))
    for fn in (tf.round,) if dt == np.float16 else (tf.round, tf.rint):
        got = run(lambda: fn(const(x)))
        assert got.dtype == dt
        np.testing.assert_array_equal(got, np.array([0, 2, 2, 0, -2, -2, 2, 3, -3]).astype(dt))


def test_round_of_integers_returns_the_input_tensor():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1, 2, 3])
        assert tf.round(x) is x
        assert tf.round(tf.constant([1.5])).op.type == "Round"


def test_floor_and_ceil_of_negative_values():
    x = np.array([-1.5, -0.2, 0.2, 1.5, -2.0])
    got = run(lambda: [tf.floor(const(x)), tf.ceil(const(x))])
    np.testing.assert_array_equal(got[0], [-2, -1, 0, 1, -2])
    np.testing.assert_array_equal(got[1], [-1, 0, 1, 2, -2])


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: np.dtype(d).name)
def test_is_nan_inf_finite(dt):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, 1.5]).astype(dt)
    nan, inf, fin = run(lambda: [tf.is_nan(const(x)), tf.is_inf(const(x)),
                                 tf.is_finite(const(x))])
    for v in (nan, inf, fin):
        assert v.dtype == np.bool_
    np.testing.assert_array_equal(nan, [True, False, False, False, False])
    np.testing.assert_array_equal(inf, [False, True, True, False, False])
    np.testing.assert_array_equal(fin, [False, False, False, True, True])
    assert tf.math.is_nan is tf.is_nan


# --------------------------------------------------------------------------------------
# Special functions
# --------------------------------------------------------------------------------------
def _special_inputs():
    return np.array([-3.7, -1.5, -0.5, 1e-8, 0.1, 0.5, 1.0, 1.4616, 2.0, 3.3, 10.0, 25.0, 170.0])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("api,ref", [("erf", math.erf), ("erfc", math.erfc),
                                     ("lgamma", math.lgamma)])
def test_erf_erfc_lgamma_against_math(api, ref, dt):
    x = _special_inputs().astype(dt)
    got = run(lambda: getattr(tf, api)(const(x)))
    assert got.dtype == dt
    want = np.array([ref(float(v)) for v in x])
    np.testing.assert_allclose(got, want.astype(dt), rtol=1e-6 if dt == np.float32 else 1e-13,
                               atol=1e-7 if dt == np.float32 else 1e-15)


def test_erf_half():
    x = np.array([-1.0, 0.0, 0.5, 2.0], np.float16)
    got = run(lambda: tf.erf(const(x)))
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, [math.erf(v) for v in x.astype(float)], rtol=2e-3)


def test_lgamma_poles_are_inf():
    got = run(lambda: tf.lgamma(tf.constant([0.0, -1.0, -2.0, np.inf], tf.float64)))
    np.testing.assert_array_equal(got, [np.inf] * 4)


DIGAMMA = [(1.0, -0.5772156649015329), (0.5, -1.9635100260214235), (2.0, 0.42278433509846713),
           (10.0, 2.251752589066721), (100.0, 4.600161852738087),
           (-0.5, 0.03648997397857652), (-1.5, 0.7031566406452432), (1e-3, -1000.5755719318103)]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_digamma_known_values(dt):
    x = np.array([a for a, _ in DIGAMMA], dt)
    got = run(lambda: tf.digamma(const(x)))
    assert got.dtype == dt
    np.testing.assert_allclose(got, [b for _, b in DIGAMMA],
                               rtol=2e-6 if dt == np.float32 else 1e-13)


def test_digamma_poles_are_nan():
    got = run(lambda: tf.math.digamma(tf.constant([0.0, -1.0, -4.0], tf.float64)))
    assert np.all(np.isnan(got))


@settings(max_examples=30, deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 20),
                  elements=st.floats(0.05, 60.0, allow_nan=False)))
def test_digamma_is_the_derivative_of_lgamma(x):
    h = 1e-5
    psi, lp, lm, psi1 = run(lambda: [tf.digamma(const(x)), tf.lgamma(const(x + h)),
                                     tf.lgamma(const(x - h)), tf.digamma(const(x + 1))])
    np.testing.assert_allclose(psi, (lp - lm) / (2 * h), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(psi1 - psi, 1 / x, rtol=1e-9, atol=1e-9)  # recurrence


# --------------------------------------------------------------------------------------
# Complex helpers
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt,real", [(np.complex64, np.float32), (np.complex128, np.float64)])
def test_real_imag_angle_conj(dt, real):
    x = np.array([[1 + 2j, -3 - 4j], [0.5j, -2 + 0j]], dt)
    g = tf.Graph()
    with g.as_default():
        c = const(x)
        outs = [tf.real(c), tf.imag(c), tf.angle(c), tf.conj(c)]
    assert [o.op.type for o in outs] == ["Real", "Imag", "Angle", "Conj"]
    assert [o.dtype for o in outs] == [tf.as_dtype(real)] * 3 + [tf.as_dtype(dt)]
    with tf.Session(graph=g) as s:
        re, im, an, cj = s.run(outs)
    assert re.dtype == real and im.dtype == real and an.dtype == real and cj.dtype == dt
    np.testing.assert_allclose(re, x.real)
    np.testing.assert_allclose(im, x.imag)
    np.testing.assert_allclose(an, np.angle(x), rtol=1e-6)
    np.testing.assert_allclose(cj, np.conj(x))
    assert tf.math.real is tf.real and tf.math.conj is tf.conj


def test_real_and_conj_of_real_tensors_return_the_input():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, -2.0])
        assert tf.real(x) is x
        assert tf.conj(x) is x
        i = tf.constant([1, 2])
        assert tf.conj(i) is i
        with pytest.raises(TypeError, match="numeric"):
            tf.conj(tf.constant([True]))


def test_complex_builds_from_parts():
    got = run(lambda: tf.complex(tf.constant([1.0, np.inf]), tf.constant([2.0, 0.0])))
    assert got.dtype == np.complex64
    assert got[0] == 1 + 2j and got[1].real == np.inf and got[1].imag == 0
    got = run(lambda: tf.complex(tf.constant([1.0], tf.float64), tf.constant(3.0, tf.float64)))
    assert got.dtype == np.complex128 and got[0] == 1 + 3j
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(TypeError, match="incorrect types"):
            tf.complex(tf.constant([1.0]), tf.constant([1.0], tf.float64))


# --------------------------------------------------------------------------------------
# logical_not, bitwise.invert
# --------------------------------------------------------------------------------------
def test_logical_not_and_invert_operator():
    x = np.array([True, False, True])
    np.testing.assert_array_equal(run(lambda: tf.logical_not(const(x))), ~x)
    np.testing.assert_array_equal(run(lambda: ~const(x)), ~x)
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(TypeError):
            tf.logical_not(tf.constant([1.0]))


@pytest.mark.parametrize("dt", SINTS + UINTS, ids=lambda d: np.dtype(d).name)
def test_bitwise_invert(dt):
    x = np.array([0, 1, 5, 100]).astype(dt)
    got = run(lambda: tf.bitwise.invert(const(x)))
    assert got.dtype == dt
    np.testing.assert_array_equal(got, np.invert(x))


# --------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------
_PROP_FUNCS = [("exp", np.exp), ("tanh", np.tanh), ("sin", np.sin), ("abs", np.abs),
               ("negative", np.negative), ("square", np.square), ("floor", np.floor),
               ("sigmoid", lambda v: 1 / (1 + np.exp(-v))), ("sign", np.sign),
               ("atan", np.arctan), ("round", np.round)]


@settings(max_examples=30, deadline=None)
@given(fn=st.sampled_from(_PROP_FUNCS),
       dt=st.sampled_from([np.float32, np.float64]),
       x=hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=5),
                    elements=st.floats(-30, 30, allow_nan=False)))
def test_unary_property_matches_numpy(fn, dt, x):
    api, ref = fn
    x = x.astype(dt)
    got = run(lambda: getattr(tf, api)(const(x)))
    assert np.shape(got) == x.shape
    assert np.asarray(got).dtype == dt
    np.testing.assert_allclose(got, ref(x.astype(np.float64)).astype(dt),
                               rtol=1e-5 if dt == np.float32 else 1e-12, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(dt=st.sampled_from(SINTS),
       x=hnp.arrays(np.int64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                    elements=st.integers(-100, 100)))
def test_integer_unary_property(dt, x):
    x = x.astype(dt)
    neg, ab, sq, sg = run(lambda: [tf.negative(const(x)), tf.abs(const(x)),
                                   tf.square(const(x)), tf.sign(const(x))])
    for v in (neg, ab, sq, sg):
        assert v.dtype == dt and v.shape == x.shape
    np.testing.assert_array_equal(neg, -x)
    np.testing.assert_array_equal(ab, np.abs(x))
    np.testing.assert_array_equal(sq, (x.astype(np.int64) ** 2).astype(dt))
    np.testing.assert_array_equal(sg, np.sign(x))
