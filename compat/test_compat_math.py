"""Math programs: elementwise ops on every dtype, division semantics, casts, reductions,
matmul and friends."""
from __future__ import annotations

import numpy as np
import pytest

from compat_data import (ALL_DTYPES, COMPLEX, FLOATS, INTS, arr, binary_operands, dt, kind,
                   resolve, unary_operand)
from compat_harness import STATIC_KEYS, Run, expect_tf115, run_both, tf_only

# -- elementwise binary ops x every dtype ----------------------------------------------------
BINARY = [
    "add", "subtract", "multiply", "truediv", "div", "divide", "realdiv", "floordiv",
    "floormod", "mod", "truncatediv", "truncatemod", "maximum", "minimum", "pow",
    "squared_difference", "atan2", "math.xdivy", "math.xlogy", "div_no_nan",
    "math.multiply_no_nan", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "math.logical_xor",
    "bitwise.bitwise_and", "bitwise.bitwise_or", "bitwise.bitwise_xor",
    "bitwise.left_shift", "bitwise.right_shift",
]


_DIV_NO_NAN_INT_TF115 = dict(
    was=None, error_class="TypeError", error_phase="build",
    reason="TF 1.15's DivNoNan op took T in {half, float, double, complex64, complex128}")


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("op", BINARY)
def test_binary_dtype_sweep(op, dtype):
    xs, ys = binary_operands(dtype)

    def program(tf):
        x = tf.constant(xs, dtype=dt(tf, dtype))
        y = tf.constant(ys, dtype=dt(tf, dtype))
        return resolve(tf, op)(x, y)

    tf115 = None
    if op == "div_no_nan" and kind(dtype) in ("int", "uint"):
        tf115 = _DIV_NO_NAN_INT_TF115
    run_both(program, tf115=tf115)


# -- elementwise unary ops x every dtype -----------------------------------------------------
UNARY = [
    "abs", "negative", "sign", "square", "sqrt", "rsqrt", "exp", "expm1", "log", "log1p",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
    "atanh", "floor", "ceil", "round", "rint", "reciprocal", "sigmoid", "erf", "erfc",
    "lgamma", "digamma", "is_nan", "is_inf", "is_finite", "logical_not", "conj", "real",
    "imag", "angle", "nn.softplus", "nn.softsign", "bitwise.invert", "math.log_sigmoid",
    "math.reciprocal_no_nan", "zeros_like", "ones_like", "identity", "stop_gradient",
]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("op", UNARY)
def test_unary_dtype_sweep(op, dtype):
    if op in ("real", "angle") and dtype not in COMPLEX:
        pytest.skip("TF 2.x changed real()/angle() of non-complex inputs: "
                    "see test_real_angle_of_real_inputs_tf115")
    xs = unary_operand(dtype)
    if op == "reciprocal" and kind(dtype) in ("int", "uint"):
        xs = [v for v in xs if v != 0]  # integer 1/0 is undefined behaviour in TF's kernel

    def program(tf):
        return resolve(tf, op)(tf.constant(xs, dtype=dt(tf, dtype)))

    # Eigen's and libm's transcendental functions differ by a few ulp
    rtol = 2e-5 if dtype in ("float32", "complex64") else None
    run_both(program, rtol=rtol)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("op", ["round", "rint", "floor", "ceil"])
def test_rounding_halves(op, dtype):
    big = 1000.5 if dtype == "float16" else 1e6 + 0.5
    vals = [-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 2.4999, -2.5001, big]

    def program(tf):
        return resolve(tf, op)(tf.constant(vals, dtype=dt(tf, dtype)))

    run_both(program)


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64", "bool", "string", "uint8"])
def test_real_angle_of_real_inputs_tf115(dtype):
    # TF 1.15: real(x) is x itself and angle(x) is zeros_like(x) (a Const named
    # "Angle/zeros_like") for every non-complex dtype; TF 2.x returns pi for negative
    # reals and rejects non-numeric dtypes, so the expectation is written out here.
    xs = unary_operand(dtype)
    zero = {"bool": False, "string": b""}.get(dtype, 0)
    npdt = {"string": object}.get(dtype, dtype)

    def program(tf):
        x = tf.constant(xs, dt(tf, dtype))
        return [tf.real(x), tf.angle(x)]

    expected = [[np.array(xs, npdt), np.array([zero] * len(xs), npdt)]]
    expect_tf115(program, expected)
    expect_tf115(lambda tf: tf.angle(tf.constant(xs, dt(tf, dtype))), [expected[0][1]],
                 static={"kind": "tensor", "dtype": dtype, "shape": [len(xs)],
                         "name": "Angle/zeros_like:0", "op_type": "Const"})


def test_denormals():
    # TF's CPU thread pools run with flush-to-zero / denormals-are-zero
    def program(tf):
        x = tf.constant([1e-40, -1e-42, 1e-38], tf.float32)
        return {"sign": tf.sign(x), "log": tf.log(x), "x_plus_0": x + 0.0,
                "mul": x * 1.0, "gt0": tf.greater(x, 0.0)}

    run_both(program)


def test_special_float_values():
    vals = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5e-38, 3e38]

    def program(tf):
        x = tf.constant(vals, tf.float32)
        return {
            "sign": tf.sign(x), "abs": tf.abs(x), "exp": tf.exp(x), "log": tf.log(x),
            "sqrt": tf.sqrt(x), "tanh": tf.tanh(x), "sigmoid": tf.sigmoid(x),
            "is_nan": tf.is_nan(x), "is_inf": tf.is_inf(x), "floor": tf.floor(x),
            "square": tf.square(x), "reciprocal": tf.reciprocal(x),
        }

    run_both(program)


def test_nan_in_min_max_and_compare():
    def program(tf):
        x = tf.constant([np.nan, 1.0, np.nan, -np.inf])
        y = tf.constant([1.0, np.nan, np.nan, 2.0])
        return [tf.maximum(x, y), tf.minimum(x, y), tf.equal(x, y), tf.not_equal(x, y),
                tf.less(x, y), tf.greater_equal(x, y)]

    run_both(program)


# -- division and modulus semantics ----------------------------------------------------------
DIV_OPS = ["floordiv", "floormod", "truncatediv", "truncatemod", "div", "mod", "truediv",
           "realdiv", "div_no_nan", "//", "%", "/"]


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("op", DIV_OPS)
def test_division_signs(op, dtype):
    xs = [[-7], [-6], [-1], [0], [1], [6], [7]]
    ys = [2, -2, 3, -3]

    def program(tf):
        x = tf.constant(xs, dt(tf, dtype))
        y = tf.constant(ys, dt(tf, dtype))
        if op == "//":
            return x // y
        if op == "%":
            return x % y
        if op == "/":
            return x / y
        return resolve(tf, op)(x, y)

    run_both(program, tf115=_DIV_NO_NAN_INT_TF115 if op == "div_no_nan" and
             dtype.startswith("int") else None)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_floordiv_is_floor_of_quotient(dtype):
    # TF computes floor(x / y); numpy's floor_divide uses divmod (1 // 0.1 == 9 there)
    def program(tf):
        x = tf.constant([1.0, 0.3, -1.0, 7.0], dt(tf, dtype))
        y = tf.constant([0.1, 0.1, 0.1, 0.7], dt(tf, dtype))
        return [tf.floordiv(x, y), tf.floormod(x, y)]

    run_both(program)


_TRUNC_TF115 = dict(was="InternalError", error_class="InvalidArgumentError",
                    reason="TF 1.15's TruncateDiv/TruncateMod integer kernels raise "
                           "InvalidArgumentError('Integer division by zero')")


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("op", ["floordiv", "floormod", "truncatediv", "truncatemod", "div",
                                "mod", "truediv", "div_no_nan", "//", "%"])
def test_integer_division_by_zero(op, dtype):
    def program(tf):
        x = tf.constant([5, 3, 0], dt(tf, dtype))
        y = tf.constant([0, 1, 0], dt(tf, dtype))
        if op == "//":
            return x // y
        if op == "%":
            return x % y
        return resolve(tf, op)(x, y)

    tf115 = None
    if op in ("truncatediv", "truncatemod") and tf_only(program).error_class == "InternalError":
        tf115 = _TRUNC_TF115
    elif op == "div_no_nan":
        tf115 = _DIV_NO_NAN_INT_TF115
    run_both(program, tf115=tf115)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64"])
@pytest.mark.parametrize("op", ["truediv", "floordiv", "floormod", "truncatemod", "realdiv",
                                "div_no_nan", "math.xdivy", "div"])
def test_float_division_by_zero(op, dtype):
    def program(tf):
        x = tf.constant([-1.0, 0.0, 1.0, np.nan], dt(tf, dtype))
        y = tf.constant([0.0, 0.0, 0.0, 0.0], dt(tf, dtype))
        return resolve(tf, op)(x, y)

    run_both(program)


def test_integer_overflow_wraps():
    def program(tf):
        a = tf.constant([100, -100, 127], tf.int8)
        u = tf.constant([0, 1, 255], tf.uint8)
        i = tf.constant([2147483647, -2147483648], tf.int32)
        return {
            "int8_add": a + a, "int8_mul": a * tf.constant(3, tf.int8), "int8_neg": -a,
            "uint8_sub": u - tf.constant(1, tf.uint8), "uint8_add": u + u,
            "int32_add": i + tf.constant(1), "int32_neg": tf.negative(i),
            "int32_abs": tf.abs(i), "int8_abs": tf.abs(tf.constant([-128], tf.int8)),
            "int32_sq": tf.square(i),
        }

    run_both(program)


def test_integer_pow():
    def program(tf):
        x = tf.constant([2, -3, 0, 5])
        return [tf.pow(x, tf.constant([3, 3, 0, 2])), x ** 2,
                tf.pow(tf.constant([2.0, -8.0, 0.0]), tf.constant([-1.0, 1.0 / 3, -1.0]))]

    run_both(program)


def test_integer_pow_negative_exponent_fails():
    def program(tf):
        return tf.pow(tf.constant([2, 3]), tf.constant([-1, 2]))

    run_both(program)


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "int64"])
def test_shift_out_of_range(dtype):
    def program(tf):
        x = tf.constant([1, 5, 64], dt(tf, dtype))
        s = tf.constant([7, 9, 70], dt(tf, dtype))
        return [tf.bitwise.left_shift(x, s), tf.bitwise.right_shift(x, s)]

    run_both(program)


# -- casts -------------------------------------------------------------------------------------
_CAST_SRC = {
    "int": [-3, 0, 5, 127, 300, -129],
    "uint": [0, 5, 127, 200, 255, 1],
    "float": [-2.7, -0.5, 0.0, 0.5, 2.7, 100.9, 1.5, 2.5],
    "complex": [1.5 + 2j, -0.5 - 1j, 0j, 3 + 0j],
    "bool": [True, False, True],
    "string": [b"1", b"abc"],
}


def _cast_values(src: str, dst: str) -> list:
    vals = _CAST_SRC[kind(src)]
    if src == "int8":
        vals = [v for v in vals if -128 <= v <= 127]
    if src == "uint8":
        vals = [v for v in vals if 0 <= v <= 255]
    if kind(src) in ("float", "complex") and kind(dst) == "uint":
        # negative float -> unsigned is undefined behaviour in C++ (and in TF)
        vals = [v for v in vals if np.real(v) >= 0]
    return vals


@pytest.mark.parametrize("dst", ALL_DTYPES)
@pytest.mark.parametrize("src", ALL_DTYPES)
def test_cast_matrix(src, dst):
    vals = _cast_values(src, dst)

    def program(tf):
        x = tf.constant(vals, dtype=dt(tf, src))
        return tf.cast(x, dt(tf, dst))

    run_both(program)


def test_cast_helpers_and_saturate():
    def program(tf):
        x = tf.constant([-2.7, 0.5, 300.0, 1e10])
        return {
            "to_int32": tf.to_int32(x), "to_int64": tf.to_int64(x),
            "to_double": tf.to_double(x), "to_float": tf.to_float(tf.constant([1, 2])),
            "saturate_uint8": tf.saturate_cast(x, tf.uint8),
            "saturate_int8": tf.saturate_cast(tf.constant([-300, 5, 300]), tf.int8),
            "cast_same": tf.cast(x, tf.float32),
        }

    run_both(program)


def test_cast_of_python_values():
    def program(tf):
        return [tf.cast(3.7, tf.int32), tf.cast([True, False], tf.float32),
                tf.cast(5, tf.float64), tf.cast([1.5, -1.5], tf.int64)]

    run_both(program)


# -- python operators and implicit conversion ---------------------------------------------------
OPERATOR_PROGRAMS = {
    "int_plus_python_int": lambda tf: tf.constant([1, 2]) + 1,
    "python_int_plus_int": lambda tf: 1 + tf.constant([1, 2]),
    "int_times_python_float": lambda tf: tf.constant([1, 2]) * 2.5,
    "float_plus_python_int": lambda tf: tf.constant([1.5, 2.0]) + 1,
    "int32_truediv": lambda tf: tf.constant([1, 2, 7]) / 2,
    "rtruediv": lambda tf: 7 / tf.constant([1, 2, 4]),
    "int8_truediv": lambda tf: tf.constant([1, 2, 7], tf.int8) / tf.constant(2, tf.int8),
    "uint8_truediv": lambda tf: tf.constant([1, 2, 7], tf.uint8) / tf.constant(2, tf.uint8),
    "int16_truediv": lambda tf: tf.constant([1, 2], tf.int16) / tf.constant(2, tf.int16),
    "int64_truediv": lambda tf: tf.constant([1, 2], tf.int64) / tf.constant(2, tf.int64),
    "float16_truediv": lambda tf: tf.constant([1, 2], tf.float16) / 2,
    "bool_truediv": lambda tf: tf.constant([True]) / tf.constant([True]),
    "floordiv_op": lambda tf: tf.constant([-7, 7]) // 2,
    "rfloordiv_op": lambda tf: 7 // tf.constant([-2, 2]),
    "mod_op": lambda tf: tf.constant([-7, 7]) % 3,
    "rmod_op": lambda tf: 7 % tf.constant([-3, 3]),
    "neg_op": lambda tf: -tf.constant([1.0, -2.0]),
    "abs_op": lambda tf: abs(tf.constant([-1, 2])),
    "pow_op": lambda tf: tf.constant([1.0, 2.0]) ** 2,
    "rpow_op": lambda tf: 2.0 ** tf.constant([1.0, 3.0]),
    "cmp_ops": lambda tf: [tf.constant([1, 5]) > 2, tf.constant([1, 5]) <= 1,
                           tf.constant([1, 5]) < 2, tf.constant([1, 5]) >= 5],
    "bool_ops": lambda tf: [tf.constant([True, False]) & tf.constant([True, True]),
                            tf.constant([True, False]) | False,
                            tf.constant([True, False]) ^ True, ~tf.constant([True, False])],
    "int_invert": lambda tf: ~tf.constant([1, -1]),
    "int_and": lambda tf: tf.constant([6, 3]) & tf.constant([3, 3]),
    "matmul_op": lambda tf: tf.constant([[1.0, 2.0]]) @ tf.constant([[3.0], [4.0]]),
    "rsub_op": lambda tf: 10 - tf.constant([1, 2]),
    "mixed_tensor_dtypes": lambda tf: tf.constant([1, 2]) + tf.constant([1.0, 2.0]),
    "numpy_scalar": lambda tf: tf.constant([1.0, 2.0]) * np.float32(3),
    "numpy_float64_array": lambda tf: tf.constant([1.0, 2.0]) + np.array([1.0, 2.0]),
    "numpy_int64_array_to_int32": lambda tf: tf.constant([1, 2]) + np.array([1, 2]),
    "string_add": lambda tf: tf.constant("ab") + tf.constant("cd"),
    "large_python_int": lambda tf: tf.constant([1, 2]) + 2 ** 40,
    "scalar_mul": lambda tf: tf.scalar_mul(2.0, tf.constant([1.0, 2.0])),
}


_LOGICAL_OPERATORS_TF115 = dict(
    was=None, error_class="TypeError", error_phase="build",
    reason="TF 1.15's Tensor.__and__/__or__/__xor__/__invert__ were logical_and/or/xor/not "
           "(bool only); TF 2.x maps integer tensors to the bitwise ops")


@pytest.mark.parametrize("name", sorted(OPERATOR_PROGRAMS))
def test_python_operators(name):
    run_both(OPERATOR_PROGRAMS[name],
             tf115=_LOGICAL_OPERATORS_TF115 if name in ("int_and", "int_invert") else None)


# -- n-ary and misc math -----------------------------------------------------------------------
MISC_PROGRAMS = {
    "add_n": lambda tf: tf.add_n([tf.constant([1, 2]), tf.constant([3, 4]),
                                  tf.constant([5, 6])]),
    "add_n_single": lambda tf: tf.add_n([tf.constant([1.5, 2.0])]),
    "add_n_mixed_dtypes": lambda tf: tf.add_n([tf.constant([1]), tf.constant([1.0])]),
    "add_n_shape_mismatch": lambda tf: tf.add_n([tf.constant([1, 2]), tf.constant([1])]),
    "add_n_empty": lambda tf: tf.add_n([]),
    "clip_by_value": lambda tf: tf.clip_by_value(tf.constant([-3.0, 0.5, 4.0]), -1.0, 1.0),
    "clip_by_value_int": lambda tf: tf.clip_by_value(tf.constant([-3, 0, 4]), 0, 2),
    "clip_by_value_tensor_bounds": lambda tf: tf.clip_by_value(
        tf.constant([[1.0, 5.0], [-2.0, 2.0]]), tf.constant([0.0, 1.0]),
        tf.constant([2.0, 3.0])),
    "clip_by_norm": lambda tf: tf.clip_by_norm(tf.constant([[3.0, 4.0], [0.3, 0.4]]), 1.0),
    "clip_by_norm_axes": lambda tf: tf.clip_by_norm(
        tf.constant([[3.0, 4.0], [0.3, 0.4]]), 1.0, axes=[1]),
    "clip_by_global_norm": lambda tf: tf.clip_by_global_norm(
        [tf.constant([3.0, 4.0]), tf.constant([[12.0]])], 5.0),
    "global_norm": lambda tf: tf.global_norm([tf.constant([3.0, 4.0]), tf.constant([12.0])]),
    "cumsum": lambda tf: tf.cumsum(tf.constant([[1, 2, 3], [4, 5, 6]]), axis=1),
    "cumsum_exclusive_reverse": lambda tf: [
        tf.cumsum(tf.constant([1.0, 2.0, 3.0]), exclusive=True),
        tf.cumsum(tf.constant([1.0, 2.0, 3.0]), reverse=True),
        tf.cumsum(tf.constant([1.0, 2.0, 3.0]), exclusive=True, reverse=True)],
    "cumsum_axis0_default": lambda tf: tf.cumsum(tf.constant([[1, 2], [3, 4]])),
    "cumprod": lambda tf: [tf.cumprod(tf.constant([[1, 2, 3], [4, 5, 6]]), axis=-1),
                           tf.cumprod(tf.constant([2.0, 3.0, 4.0]), exclusive=True,
                                      reverse=True)],
    "cumsum_bad_axis": lambda tf: tf.cumsum(tf.constant([1, 2]), axis=3),
    "complex_build": lambda tf: tf.complex(tf.constant([1.0, 2.0]), tf.constant([0.5, -1.0])),
    "complex_float64": lambda tf: tf.complex(tf.constant([1.0], tf.float64),
                                             tf.constant([2.0], tf.float64)),
    "complex_parts": lambda tf: [tf.real(tf.constant([1 + 2j])), tf.imag(tf.constant([1 + 2j])),
                                 tf.abs(tf.constant([3 + 4j])), tf.angle(tf.constant([1j])),
                                 tf.conj(tf.constant([1 + 2j]))],
    "real_of_float": lambda tf: [tf.real(tf.constant([1.5])), tf.imag(tf.constant([1.5])),
                                 tf.conj(tf.constant([1.5]))],
    "squared_difference_int": lambda tf: tf.squared_difference(tf.constant([1, 5]),
                                                               tf.constant([4, 2])),
    "segment_sum": lambda tf: tf.math.segment_sum(tf.constant([[1, 2], [3, 4], [5, 6]]),
                                                  tf.constant([0, 0, 1])),
    "segment_mean_max": lambda tf: [
        tf.math.segment_mean(tf.constant([1.0, 2.0, 4.0, 8.0]), tf.constant([0, 0, 1, 3])),
        tf.math.segment_max(tf.constant([1.0, 2.0, 4.0, 8.0]), tf.constant([0, 0, 1, 3]))],
    "unsorted_segment_sum": lambda tf: tf.math.unsorted_segment_sum(
        tf.constant([1.0, 2.0, 3.0, 4.0]), tf.constant([2, 0, 2, -1]), 3),
    "unsorted_segment_max": lambda tf: tf.math.unsorted_segment_max(
        tf.constant([1.0, 2.0, 3.0]), tf.constant([1, 1, 0]), 3),
    "polyval": lambda tf: tf.math.polyval([tf.constant(2.0), tf.constant(1.0)],
                                          tf.constant([1.0, 3.0])),
    "invert_permutation": lambda tf: tf.invert_permutation(tf.constant([2, 0, 1])),
    "accumulate_n": lambda tf: tf.accumulate_n([tf.constant([1.0, 2.0]),
                                                tf.constant([3.0, 4.0])]),
    "lbeta_igamma": lambda tf: [tf.math.lbeta(tf.constant([[1.0, 2.0]])),
                                tf.math.igamma(tf.constant([1.0]), tf.constant([2.0])),
                                tf.math.igammac(tf.constant([1.0]), tf.constant([2.0]))],
    "bincount": lambda tf: tf.math.bincount(tf.constant([1, 1, 3, 0])),
    "cross": lambda tf: tf.linalg.cross(tf.constant([1.0, 0.0, 0.0]),
                                        tf.constant([0.0, 1.0, 0.0])),
    "trace": lambda tf: tf.linalg.trace(tf.constant([[1.0, 2.0], [3.0, 4.0]])),
    "matrix_diag": lambda tf: [tf.linalg.diag(tf.constant([1, 2])),
                               tf.linalg.diag_part(tf.constant([[1, 2], [3, 4]])),
                               tf.diag(tf.constant([1.0, 2.0]))],
    "band_part": lambda tf: tf.linalg.band_part(tf.ones([3, 3]), 0, -1),
    "matrix_inverse_det": lambda tf: [
        tf.matrix_inverse(tf.constant([[2.0, 1.0], [1.0, 3.0]])),
        tf.matrix_determinant(tf.constant([[2.0, 1.0], [1.0, 3.0]]))],
    "cholesky": lambda tf: tf.cholesky(tf.constant([[4.0, 2.0], [2.0, 3.0]])),
    "eye_matmul": lambda tf: tf.matmul(tf.eye(2), tf.constant([[1.0, 2.0], [3.0, 4.0]])),
}


#: programs whose graphs TF 2.x builds from other ops than TF 1.15 did: 1.15 built
#: accumulate_n as one AccumulateNV2 and bincount as a Bincount of unknown length (TF
#: 2.x: AddN, and DenseBincount with a static length); values and dtypes are compared
_TF115_GRAPHS = {"accumulate_n", "bincount"}


@pytest.mark.parametrize("name", sorted(MISC_PROGRAMS))
def test_misc_math(name):
    keys = ("kind", "dtype") if name in _TF115_GRAPHS else STATIC_KEYS
    run_both(MISC_PROGRAMS[name], rtol=2e-5, static_keys=keys)


# -- reductions ----------------------------------------------------------------------------------
REDUCE = ["reduce_sum", "reduce_prod", "reduce_mean", "reduce_max", "reduce_min",
          "reduce_logsumexp", "math.reduce_std", "math.reduce_variance",
          "math.reduce_euclidean_norm", "count_nonzero"]
AXES = [None, 0, 1, -1, -2, [0, 1], [-1, 0], [], (1,)]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=repr)
@pytest.mark.parametrize("fn", REDUCE)
def test_reduce_axes_float32(fn, axis, keepdims):
    a = arr((2, 3), "float32", seed=1)

    def program(tf):
        return resolve(tf, fn)(tf.constant(a), axis=axis, keepdims=keepdims)

    run_both(program)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "float16", "float64",
                                   "complex64", "bool"])
@pytest.mark.parametrize("fn", REDUCE + ["reduce_all", "reduce_any"])
def test_reduce_dtypes(fn, dtype):
    a = arr((3, 4), dtype, seed=2, lo=-4, hi=9) if dtype != "uint8" else arr((3, 4), dtype, 2,
                                                                             0, 9)

    def program(tf):
        x = tf.constant(a, dt(tf, dtype))
        f = resolve(tf, fn)
        return [f(x), f(x, axis=1), f(x, axis=0, keepdims=True)]

    tf115 = None
    if fn == "math.reduce_variance" and dtype.startswith("int"):
        tf115 = dict(was="TypeError", error_class=None,
                     reason="TF 1.15's reduce_variance had no dtype check (integer mean "
                            "and squares); 2.x rejects integer inputs")
    run_both(program, tf115=tf115)


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("fn", ["reduce_sum", "reduce_prod", "reduce_mean", "reduce_max",
                                "reduce_min", "reduce_all", "reduce_any", "reduce_logsumexp",
                                "count_nonzero"])
def test_reduce_empty(fn, axis, dtype):
    def program(tf):
        x = tf.zeros([0, 3], dt(tf, dtype))
        return resolve(tf, fn)(x, axis=axis)

    run_both(program)


def test_reduce_legacy_kwargs():
    def program(tf):
        x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
        return [tf.reduce_sum(x, reduction_indices=[1]), tf.reduce_sum(x, 1, keep_dims=True),
                tf.reduce_mean(x, reduction_indices=0, keep_dims=True),
                tf.reduce_max(x, axis=tf.constant(1))]

    run_both(program)


def test_reduce_int_mean_truncates():
    def program(tf):
        return [tf.reduce_mean(tf.constant([1, 2])), tf.reduce_mean(tf.constant([-1, -2])),
                tf.reduce_mean(tf.constant([[1, 2], [2, 4]], tf.uint8), axis=1)]

    run_both(program)


def test_reduce_axis_out_of_range():
    run_both(lambda tf: tf.reduce_sum(tf.ones([2, 3]), axis=2))


def test_reduce_duplicate_axis():
    run_both(lambda tf: tf.reduce_sum(tf.ones([2, 3]), axis=[1, 1]))


def test_reduce_axis_fed():
    def program(tf):
        x = tf.placeholder(tf.float32, [None, 3])
        ax = tf.placeholder(tf.int32, [])
        return Run([tf.reduce_sum(x, axis=ax), tf.reduce_sum(x, axis=ax, keepdims=True)],
                   {x: arr((2, 3)), ax: 1})

    run_both(program)


def test_reduce_unknown_dims():
    def program(tf):
        x = tf.placeholder(tf.float32, [None, 3, None])
        return Run([tf.reduce_sum(x, 1), tf.reduce_max(x, [0, 2], keepdims=True),
                    tf.reduce_mean(x)], {x: arr((2, 3, 4))})

    run_both(program)


@pytest.mark.parametrize("output_type", [None, "int32", "int64"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("fn", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", ["float32", "int32", "float64", "uint8", "float16"])
def test_argmax_argmin(dtype, fn, axis, output_type):
    a = np.array([[3, 1, 3, 0], [2, 7, 7, 1], [0, 0, 0, 0]]).astype(dtype)

    def program(tf):
        kw = {} if output_type is None else {"output_type": dt(tf, output_type)}
        return resolve(tf, fn)(tf.constant(a), axis=axis, **kw)

    run_both(program)


def test_argmax_legacy_dimension_and_errors():
    run_both(lambda tf: tf.argmax(tf.constant([[1, 5], [7, 2]]), dimension=1))
    run_both(lambda tf: tf.argmax(tf.constant([[1, 5]]), axis=2))
    run_both(lambda tf: tf.argmax(tf.zeros([0, 3]), axis=0))
    run_both(lambda tf: tf.argmax(tf.constant([True, False])))


# -- matmul family -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "int32",
                                   "int64", "int8", "complex64", "complex128", "bool"])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul(dtype, ta, tb):
    a = np.arange(6).reshape(2, 3) - 2
    b = np.arange(12).reshape(3, 4) % 5 - 1
    if ta:
        a = a.T
    if tb:
        b = b.T

    def program(tf):
        x = tf.constant(a.tolist(), dt(tf, dtype))
        y = tf.constant(b.tolist(), dt(tf, dtype))
        return tf.matmul(x, y, transpose_a=ta, transpose_b=tb)

    run_both(program)


MATMUL_PROGRAMS = {
    "adjoint": lambda tf: tf.matmul(tf.constant([[1 + 1j, 2j]]), tf.constant([[1 - 1j, 3j]]),
                                    adjoint_b=True),
    "adjoint_and_transpose": lambda tf: tf.matmul(tf.constant([[1.0]]), tf.constant([[1.0]]),
                                                  transpose_a=True, adjoint_a=True),
    "batch3": lambda tf: tf.matmul(tf.constant(arr((2, 3, 4))), tf.constant(arr((2, 4, 5), 1))),
    "batch4_transpose": lambda tf: tf.matmul(tf.constant(arr((2, 2, 4, 3))),
                                             tf.constant(arr((2, 2, 5, 4), seed=1)),
                                             transpose_a=True, transpose_b=True),
    "batch_broadcast_rank": lambda tf: tf.matmul(tf.constant(arr((2, 3, 4))),
                                                 tf.constant(arr((4, 5), seed=1))),
    "batch_broadcast_dims": lambda tf: tf.matmul(tf.constant(arr((2, 1, 3, 4))),
                                                 tf.constant(arr((3, 4, 2), seed=1))),
    "shape_mismatch": lambda tf: tf.matmul(tf.ones([2, 3]), tf.ones([2, 3])),
    "batch_shape_mismatch": lambda tf: tf.matmul(tf.ones([2, 2, 3]), tf.ones([3, 3, 4])),
    "dtype_mismatch": lambda tf: tf.matmul(tf.ones([2, 3]), tf.ones([3, 2], tf.float64)),
    "rank1": lambda tf: tf.matmul(tf.ones([3]), tf.ones([3, 2])),
    "unknown_dims": lambda tf: (lambda x: Run(tf.matmul(x, tf.ones([3, 2])),
                                              {x: arr((4, 3))}))(
        tf.placeholder(tf.float32, [None, 3])),
    "runtime_mismatch": lambda tf: (lambda x: Run(tf.matmul(x, tf.ones([3, 2])),
                                                  {x: arr((4, 2))}))(
        tf.placeholder(tf.float32, [None, None])),
    "batch_matmul_api": lambda tf: tf.linalg.matmul(tf.ones([2, 2, 3]), tf.ones([2, 3, 1])),
    "matvec": lambda tf: tf.linalg.matvec(tf.constant(arr((2, 3))), tf.constant([1.0, 2, 3])),
    "empty": lambda tf: tf.matmul(tf.ones([2, 0]), tf.ones([0, 3])),
    "sparse_flags": lambda tf: tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]), a_is_sparse=True),
}


@pytest.mark.parametrize("name", sorted(MATMUL_PROGRAMS))
def test_matmul_programs(name):
    run_both(MATMUL_PROGRAMS[name])


TENSORDOT = {
    "axes1": ((2, 3), (3, 4), 1),
    "axes0_outer": ((2,), (3,), 0),
    "axes2": ((2, 3, 4), (3, 4, 5), 2),
    "axes_lists": ((2, 3, 4), (4, 2, 5), [[0, 2], [1, 0]]),
    "axes_pair_ints": ((2, 3), (2, 3), [0, 0]),
    "axes_mismatch": ((2, 3), (4, 5), 1),
}


@pytest.mark.parametrize("name", sorted(TENSORDOT))
def test_tensordot(name):
    sa, sb, axes = TENSORDOT[name]

    def program(tf):
        return tf.tensordot(tf.constant(arr(sa)), tf.constant(arr(sb, seed=1)), axes)

    run_both(program)


EINSUM = {
    "matmul": ("ij,jk->ik", [(2, 3), (3, 4)]),
    "batch_matmul": ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    "dot": ("i,i->", [(3,), (3,)]),
    "outer": ("i,j->ij", [(2,), (3,)]),
    "transpose": ("ij->ji", [(2, 3)]),
    "sum_all": ("ij->", [(2, 3)]),
    "row_sum": ("ij->i", [(2, 3)]),
    "implicit": ("ij,jk", [(2, 3), (3, 4)]),
    "ellipsis": ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 1)]),
    "bilinear": ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    "trace": ("ii->", [(3, 3)]),
    "diag": ("ii->i", [(3, 3)]),
    "bad_shapes": ("ij,jk->ik", [(2, 3), (4, 4)]),
}


@pytest.mark.parametrize("name", sorted(EINSUM))
def test_einsum(name):
    eq, shapes = EINSUM[name]

    def program(tf):
        return tf.einsum(eq, *[tf.constant(arr(s, seed=i)) for i, s in enumerate(shapes)])

    # TF 1.15 built einsum from transposes/reshapes/matmuls in Python, TF 2.x emits an
    # Einsum op: the op type of the result is version-specific, so compare results only.
    run_both(program, static=False)


def test_dtype_sweep_shapes_of_complex_abs():
    def program(tf):
        return [tf.abs(tf.constant([3 + 4j], dt(tf, c))) for c in COMPLEX] + \
               [tf.abs(tf.constant([-1.5], dt(tf, f))) for f in FLOATS]

    run_both(program)
