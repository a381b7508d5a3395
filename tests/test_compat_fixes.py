"""Fixes the differential suite found (issue 16): TF 1.15 semantics of swish (a
custom_gradient IdentityN), tf.Assert's AssertGuard conditional, the einsum scope,
complex division by zero and complex rsqrt at 0, integer reduce_euclidean_norm, and
tf.print to files and logging levels. Each test failed before its fix."""
from __future__ import annotations

import logging
import sys

import numpy as np
import pytest

import flowrt as tf


def run(fetches, feed=None):
    with tf.Session() as s:
        return s.run(fetches, feed)


@pytest.fixture(autouse=True)
def graph():
    with tf.Graph().as_default() as g:
        yield g


# -- swish -------------------------------------------------------------------------------
def test_swish_is_identity_n_with_custom_gradient(graph):
    xv = np.array([[-3.0, -1.0, 0.0, 0.5, 2.0]])
    x = tf.constant(xv)
    y = tf.nn.swish(x)
    assert (y.name, y.op.type) == ("IdentityN:0", "IdentityN")
    assert [o.type for o in graph.get_operations()] == ["Const", "Sigmoid", "Mul", "IdentityN"]
    sig = 1 / (1 + np.exp(-xv))
    dy = tf.gradients(y, x)[0]
    got, gdy = run([y, dy])
    np.testing.assert_allclose(got, xv * sig, rtol=1e-12)
    np.testing.assert_allclose(gdy, sig * (1 + xv * (1 - sig)), rtol=1e-12)
    with tf.Session():
        assert tf.test.compute_gradient_error(x, [1, 5], y, [1, 5], x_init_value=xv) < 1e-6


def test_swish_float32_and_no_name_argument(graph):
    y = tf.nn.swish(tf.constant([1.0, -1.0]))
    assert y.dtype == tf.float32
    with pytest.raises(TypeError):
        tf.nn.swish(tf.constant([1.0]), name="s")  # TF 1.15's swish(features) only


# -- Assert ------------------------------------------------------------------------------
def test_assert_with_float_data_is_guarded_by_a_cond(graph):
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    a = tf.Assert(x[0, 0] > 0, [x])
    assert (a.name, a.type) == ("Assert/AssertGuard/Merge", "Merge")
    names = {o.name: o.type for o in graph.get_operations()}
    assert names["Assert/AssertGuard/Assert"] == "Assert"
    assert names["Assert/AssertGuard/Switch"] == "Switch"
    with tf.control_dependencies([a]):
        y = tf.identity(x)
    np.testing.assert_array_equal(run(y, {x: [[1, 2]]}), [[1, 2]])
    with pytest.raises(tf.errors.InvalidArgumentError, match="assertion failed") as e:
        run(y, {x: [[-1, 2]]})
    assert "Assert/AssertGuard/Assert" in str(e.value)


def test_assert_with_int32_or_string_data_is_the_op(graph):
    a = tf.Assert(tf.constant(True), [tf.constant(1), "msg"])
    assert (a.name, a.type) == ("Assert/Assert", "Assert")
    b = tf.Assert(tf.constant(False), [tf.constant([1, 2])], name="chk")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"\[1 2\]"):
        run(b)


def test_assert_equal_fails_at_run_time_through_the_guard(graph):
    p = tf.placeholder(tf.float32, [2])
    check = tf.assert_equal(p, tf.constant([1.0, 2.0]))
    run(check, {p: [1.0, 2.0]})
    with pytest.raises(tf.errors.InvalidArgumentError):
        run(check, {p: [1.0, 3.0]})


# -- einsum ------------------------------------------------------------------------------
def test_einsum_in_its_scope(graph):
    r = tf.einsum("ij,j->i", tf.ones([2, 3]), tf.ones([3]))
    assert r.name == "einsum/Einsum:0"
    r2 = tf.einsum("ij->ji", tf.ones([2, 3]), name="tr")
    assert r2.name == "tr/Einsum:0"
    np.testing.assert_array_equal(run(r), [3.0, 3.0])


# -- complex division ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [tf.complex64, tf.complex128])
def test_complex_division_by_zero_is_nan(graph, dtype):
    x = tf.constant([-1.0, 0.0, 1.0, 1 + 1j, 2j], dtype)
    z = tf.zeros([5], dtype)
    for out in run([x / z, tf.div(x, z), tf.realdiv(x, z), tf.truediv(x, z)]):
        assert np.isnan(out.real).all() and np.isnan(out.imag).all()
        assert out.dtype == dtype.as_numpy_dtype
    xd = run(tf.math.xdivy(x, z))
    assert xd[1] == 0 and np.isnan(xd[[0, 2, 3, 4]].real).all()


def test_complex_division_values_and_range(graph):
    a = np.array([1 + 2j, -3 + 0.5j, 1e30 + 1e30j, 4j, 1.0], np.complex128)
    b = np.array([2 - 1j, 1e-30 + 0j, 1e30 - 1e30j, 1e-300j, 1e300 + 1e300j], np.complex128)
    got = run(tf.constant(a) / tf.constant(b))
    want = [a[0] / b[0], -3e30 + 0.5e30j, 1j, 4e300 + 0j, 0.5e-300 - 0.5e-300j]
    np.testing.assert_allclose(got, want, rtol=1e-14)
    g64 = run(tf.constant(a[:2], tf.complex64) / tf.constant(b[:2], tf.complex64))
    np.testing.assert_allclose(g64, want[:2], rtol=1e-6)
    # broadcasting with a scalar divisor
    np.testing.assert_allclose(run(tf.constant(a[:2]) / tf.constant(2j)), a[:2] / 2j)


def test_complex_rsqrt_at_zero(graph):
    out = run(tf.math.rsqrt(tf.constant([0j, 4 + 0j, -4 + 0j], tf.complex64)))
    assert np.isinf(out[0].real) and np.isnan(out[0].imag)
    np.testing.assert_allclose(out[1:], [0.5, -0.5j], rtol=1e-6)


# -- reduce_euclidean_norm of integers ------------------------------------------------------
def test_integer_euclidean_norm_wraps_the_sum_of_squares(graph):
    a8 = np.array([[4, 9, 4, 2], [7, -2, 7, 4], [3, -2, -3, 7]], np.int8)
    u8 = np.array([[8, 8, 6, 2], [8, 7, 2, 1], [5, 4, 4, 5]], np.uint8)
    r = run([tf.math.reduce_euclidean_norm(a8), tf.math.reduce_euclidean_norm(u8),
             tf.math.reduce_euclidean_norm(a8, axis=1),
             tf.math.reduce_euclidean_norm(tf.constant([[100, 100]], tf.int8)),
             tf.math.reduce_euclidean_norm(tf.constant([[100, 100]], tf.int32))])
    # 306 wraps to 50 in int8 and 368 to 112 in uint8; sqrt truncates
    assert r[0] == 7 and r[0].dtype == np.int8
    assert r[1] == 10 and r[1].dtype == np.uint8
    np.testing.assert_array_equal(r[2], [10, 10, 8])
    assert r[3] == 5 and r[4] == 141  # 20000 wraps to 32 in int8


# -- tf.print ----------------------------------------------------------------------------
def test_print_to_file_appends(graph, tmp_path):
    path = tmp_path / "out.txt"
    op = tf.print("x =", tf.constant([1, 2]), output_stream="file://" + str(path))
    assert op.get_attr("output_stream") in ("file://" + str(path),
                                            ("file://" + str(path)).encode())
    run(op)
    run(op)
    assert path.read_text() == "x = [1 2]\nx = [1 2]\n"


def test_print_to_logging_levels(graph, caplog):
    ops = [tf.print("info", output_stream=logging.info),
           tf.print("warn", output_stream=logging.WARNING),
           tf.print("err", output_stream=logging.error)]
    assert [o.get_attr("output_stream") for o in ops] in (
        ["log(info)", "log(warning)", "log(error)"],
        [b"log(info)", b"log(warning)", b"log(error)"])
    with caplog.at_level(logging.INFO, logger="flowrt"):
        run(ops)
    assert {r.getMessage() for r in caplog.records} >= {"info", "warn", "err"}


def test_print_unsupported_stream(graph):
    with pytest.raises(ValueError, match="File needs to be in the form"):
        tf.print("x", output_stream=sys.stdin)


def test_matmul_sparsity_hints_take_sparse_matmul_for_float32_as_tf_1_15():
    """TF 1.15's tf.matmul: a_is_sparse/b_is_sparse on float32 (or bfloat16) inputs
    build SparseMatMul; on other dtypes, or without hints, MatMul. Same values."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    with tf.Graph().as_default():
        hinted = tf.matmul(a, b, a_is_sparse=True, transpose_b=False)
        plain = tf.matmul(a, b)
        wide = tf.matmul(a.astype(np.float64), b.astype(np.float64), b_is_sparse=True)
        assert hinted.op.type == "SparseMatMul" and hinted.dtype == tf.float32
        assert plain.op.type == "MatMul" and wide.op.type == "MatMul"
        with tf.Session() as s:
            h, p = s.run([hinted, plain])
    np.testing.assert_allclose(h, a @ b, rtol=1e-5)
    np.testing.assert_array_equal(h, p)
