"""Differential tests of helper N's additions (issue 16): gather_nd with batch_dims,
SparseConditionalAccumulator, strings.unicode_script, LinearOperatorCirculant(2D/3D),
and the TF 1.15 forms of swish and tf.Assert."""
from __future__ import annotations

import numpy as np
import pytest

from compat_harness import Run, Steps, run_both, run_custom

X234 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def _progs(d: dict) -> list:
    return [pytest.param(v, id=k) for k, v in sorted(d.items())]


# -- gather_nd(batch_dims) ---------------------------------------------------------------
def _gather_nd_fed(tf):
    p = tf.placeholder(tf.float32, [None, 3, 4])
    i = tf.placeholder(tf.int64, [None, 2, 2])
    return Run(tf.gather_nd(p, i, batch_dims=1),
               {p: X234, i: [[[0, 1], [2, 3]], [[1, 1], [0, 0]]]})


def _gather_nd_grad(tf):
    p = tf.constant(X234)
    y = tf.gather_nd(p, [[[0, 1], [2, 3]], [[1, 1], [1, 1]]], batch_dims=1)
    return tf.gradients(tf.reduce_sum(y * y), p)


GATHER_ND = {
    "rows": lambda tf: tf.gather_nd(tf.constant(X234), [[1], [2]], batch_dims=1),
    "elements": lambda tf: tf.gather_nd(tf.constant(X234), [[[0, 1]], [[2, 3]]],
                                        batch_dims=1),
    "two_batch_dims": lambda tf: tf.gather_nd(tf.reshape(tf.range(24), [2, 3, 4]),
                                              [[[1], [3], [0]], [[0], [2], [2]]], batch_dims=2),
    "fed": _gather_nd_fed,
    "grad": _gather_nd_grad,
    "negative": lambda tf: tf.gather_nd(tf.constant(X234), [[1], [2]], batch_dims=-1),
    "too_deep": lambda tf: tf.gather_nd(tf.constant(X234), [[1], [2]], batch_dims=2),
    "out_of_range": lambda tf: tf.gather_nd(tf.constant(X234), [[1], [7]], batch_dims=1),
    "strings": lambda tf: tf.gather_nd([["a", "b"], ["c", "d"]], [[1], [0]], batch_dims=1),
}


@pytest.mark.parametrize("program", _progs(GATHER_ND))
def test_gather_nd_batch_dims(program):
    run_both(program)


# -- SparseConditionalAccumulator -------------------------------------------------------
def _sparse_acc_mean(tf):
    acc = tf.SparseConditionalAccumulator(tf.float32, shape=[5, 2], name="acc")
    a1 = acc.apply_grad([0, 3], [[1.0, 2.0], [3.0, 4.0]], grad_shape=[5, 2])
    a2 = acc.apply_indexed_slices_grad(tf.IndexedSlices(
        tf.constant([[10.0, 20.0], [5.0, 5.0]]), tf.constant([1, 3], tf.int64),
        tf.constant([5, 2], tf.int64)))
    t = acc.take_indexed_slices_grad(2)
    return Steps(a1, a2, acc.num_accumulated(), [t.indices, t.values, t.dense_shape],
                 acc.num_accumulated())


def _sparse_acc_sum_stale(tf):
    acc = tf.sparse.SparseConditionalAccumulator(tf.float64, reduction_type="SUM")
    step = tf.placeholder(tf.int64, [])
    # values of the accumulator's dtype: TF converts them with no dtype (a Python list of
    # floats becomes float32) and its kernel then aborts the process on a float64
    # accumulator; flowrt raises TypeError at graph construction instead
    apply = acc.apply_grad(tf.constant([2, 0], tf.int64),
                           tf.constant([[1.0], [2.0]], tf.float64), local_step=step)
    take = acc.take_grad(1)
    return Steps(Run(apply, {step: 0}), list(take), Run(apply, {step: 0}),
                 acc.num_accumulated(), Run(apply, {step: 1}), acc.set_global_step(7),
                 Run(apply, {step: 6}), acc.num_accumulated())


def _sparse_acc_unsorted_merge(tf):
    acc = tf.SparseConditionalAccumulator(tf.float32, reduction_type="SUM")
    a = acc.apply_grad(tf.constant([3, 1], tf.int64), [[1.0], [2.0]])
    b = acc.apply_grad(tf.constant([2], tf.int64), [[5.0]])
    return Steps(a, b, list(acc.take_grad(2)))


def _sparse_acc_bad_index(tf):
    acc = tf.SparseConditionalAccumulator(tf.float32, shape=[2, 1])
    return Steps(acc.apply_grad(tf.constant([5], tf.int64), [[1.0]]))


def _sparse_acc_facts(tf):
    acc = tf.SparseConditionalAccumulator(tf.float32, shape=[None, 3])
    t = acc.take_grad(1)
    apply = acc.apply_grad(tf.constant([1], tf.int64), tf.ones([1, 3]))
    return Steps(apply, [acc.num_accumulated(), t.indices, t.values, t.shape])


SPARSE_ACC = {"mean": _sparse_acc_mean, "sum_stale": _sparse_acc_sum_stale,
              "unsorted_merge": _sparse_acc_unsorted_merge, "bad_index": _sparse_acc_bad_index}


@pytest.mark.parametrize("program", _progs(SPARSE_ACC))
def test_sparse_conditional_accumulator(program):
    run_both(program)


def test_sparse_conditional_accumulator_graph_facts():
    run_both(_sparse_acc_facts)


# -- unicode_script ----------------------------------------------------------------------
SCRIPT_CPS = [1, 31, 38, 65, 0x3B1, 0x416, 0x627, 0x5D0, 0x4E2D, 0x3042, 0x30A2, 0xD55C,
              0x915, 0xE01, 0x301, 0xE000, 0x378, 0x10FFFF, -1, 0x110000, 0x1F600, 0x20000]


def test_unicode_script_values():
    run_both(lambda tf: tf.strings.unicode_script(tf.constant(SCRIPT_CPS)))


def test_unicode_script_table_matches_icu():
    # every code point of the BMP and the supplementary ideographic plane
    cps = np.arange(0, 0x30000, dtype=np.int32)
    run_both(lambda tf: tf.strings.unicode_script(tf.constant(cps)))


def test_unicode_script_shapes_and_errors():
    run_both(lambda tf: (lambda p: Run(tf.strings.unicode_script(p), {p: [[65, 0x5D0]]}))(
        tf.placeholder(tf.int32, [None, 2])))
    run_both(lambda tf: tf.strings.unicode_script(tf.constant([65], tf.int64)))


# -- LinearOperatorCirculant ------------------------------------------------------------
RNG = np.random.default_rng(5)
SPEC1 = (RNG.standard_normal(4) + 1j * RNG.standard_normal(4) + 2.0).astype(np.complex64)
SPEC2 = (RNG.standard_normal((2, 2, 3)) + 3.0).astype(np.float32)
SPEC3 = np.fft.fftn(RNG.standard_normal((2, 2, 2))).astype(np.complex128)
XC = (RNG.standard_normal((4, 2)) + 1j * RNG.standard_normal((4, 2))).astype(np.complex64)
X2 = RNG.standard_normal((2, 6, 3)).astype(np.float32)
X6 = RNG.standard_normal((6, 2))


def _circulant_facts(tf, op):
    return [op.to_dense(), op.determinant(), op.log_abs_determinant(), op.trace(),
            op.diag_part(), op.shape_tensor()]


def _circ1(tf):
    op = tf.linalg.LinearOperatorCirculant(tf.constant(SPEC1))
    return _circulant_facts(tf, op) + [op.matmul(XC), op.matmul(XC, adjoint=True),
                                       op.solve(XC), op.matvec(XC[:, 0]),
                                       op.convolution_kernel()]


def _circ2(tf):
    op = tf.linalg.LinearOperatorCirculant2D(tf.constant(SPEC2), input_output_dtype=tf.float32)
    x = tf.constant(X2)
    return _circulant_facts(tf, op) + [op.matmul(x), op.solve(x)]


def _circ3(tf):
    op = tf.linalg.LinearOperatorCirculant3D(tf.constant(SPEC3),
                                             input_output_dtype=tf.float64)
    return _circulant_facts(tf, op) + [op.convolution_kernel()]


def _circ_hermitian_check(tf):
    # TF (1.15 and 2.x) computes eps * domain_dimension_tensor() with an int32 tensor:
    # a TypeError at graph construction, which flowrt keeps
    op = tf.linalg.LinearOperatorCirculant3D(tf.constant(SPEC3),
                                             input_output_dtype=tf.float64)
    return op.assert_hermitian_spectrum()


def _circ_grad(tf):
    s = tf.constant(SPEC2[0].astype(np.float64))
    op = tf.linalg.LinearOperatorCirculant2D(s, input_output_dtype=tf.float64)
    x = tf.constant(X6)
    y = op.matmul(x) + op.solve(x)
    return tf.gradients(tf.reduce_sum(y * y), [s, x])


CIRCULANT = {"1d": _circ1, "2d_batch_real": _circ2, "3d_hermitian": _circ3,
             "grad": _circ_grad, "assert_hermitian_spectrum": _circ_hermitian_check}


@pytest.mark.parametrize("program", _progs(CIRCULANT))
def test_linear_operator_circulant(program):
    # built from FFTs in float32/complex64: results agree to FFT rounding
    run_both(program, rtol=1e-4, atol=1e-5, static=False)


def test_linear_operator_circulant_facts():
    def fn(tf):
        out = {}
        for cls, spec, kw in (("LinearOperatorCirculant", SPEC1, {}),
                              ("LinearOperatorCirculant2D", SPEC2,
                               {"input_output_dtype": tf.float32}),
                              ("LinearOperatorCirculant3D", SPEC3, {})):
            op = getattr(tf.linalg, cls)(tf.constant(spec), **kw)
            out[cls] = {"shape": op.shape.as_list(), "batch": op.batch_shape.as_list(),
                        "dtype": op.dtype.name, "self_adjoint": op.is_self_adjoint,
                        "square": op.is_square, "block_depth": op.block_depth,
                        "block_shape": op.block_shape.as_list(), "name": op.name,
                        "spectrum_dtype": op.spectrum.dtype.name}
        for bad in (lambda: tf.linalg.LinearOperatorCirculant([1.0], is_self_adjoint=False),
                    lambda: tf.linalg.LinearOperatorCirculant([1.0], is_square=False),
                    lambda: tf.linalg.LinearOperatorCirculant2D([1.0]),
                    lambda: tf.linalg.LinearOperatorCirculant([1.0],
                                                              input_output_dtype=tf.int32)):
            try:
                bad()
                out.setdefault("errors", []).append("ok")
            except Exception as e:  # noqa: BLE001
                out.setdefault("errors", []).append(type(e).__name__)
        return out

    run_custom(fn)


# -- swish and Assert in TF 1.15 form ------------------------------------------------------
def test_swish_value_and_gradient():
    def program(tf):
        x = tf.constant([[-3.0, -1.0, 0.0, 0.5, 2.0, 7.0]])
        y = tf.nn.swish(x)
        return [y] + tf.gradients(y, x)

    # TF 2.x's swish has a beta and a longer gradient (more Mul ops, so other numbering);
    # TF 1.15's gradient is dy * sig * (1 + x * (1 - sig)), as flowrt's
    run_both(program, rtol=1e-6, static_keys=("kind", "dtype", "shape"))


def test_assert_guard():
    def program(tf):
        x = tf.placeholder(tf.float32, [2])
        a = tf.Assert(x[0] > 0, [x], name="chk")
        with tf.control_dependencies([a]):
            y = tf.identity(x)
        return Steps(Run(y, {x: [1.0, 2.0]}), Run(y, {x: [-1.0, 2.0]}))

    run_both(program)
    run_custom(lambda tf: [tf.Assert(tf.constant(True), [tf.ones([2])]).name,
                           tf.Assert(tf.constant(True), [tf.constant(1)]).name])
