"""tf.debugging check programs, banded matrix_diag and sparse crosses under TensorFlow
and flowrt: static errors (class and phase), run-time assertion failures, values.

Where TF 2.x and TF 1.15 differ: TF 2.x's ``tf.linalg.diag`` family defaults to
``align='RIGHT_LEFT'`` (MatrixDiagV3), TF 1.15 had no ``align`` and packed bands
``LEFT_LEFT`` (MatrixDiagV2). flowrt keeps TF 1.15's default, so band programs here pass
``align`` explicitly; the op types (V2/V3 vs TF 2.x's V3) are not compared.
"""
from __future__ import annotations

import numpy as np
import pytest

from compat_harness import Run, run_both

X = np.arange(1, 25, dtype=np.float32).reshape(2, 3, 4)
SHAPES_ONLY = ("kind", "dtype", "shape")


def _progs(d: dict) -> list:
    return [pytest.param(v, id=k) for k, v in sorted(d.items())]


def _ph_run(tf, dtype, value, build, shape=None):
    p = tf.placeholder(dtype, shape)
    with tf.control_dependencies([build(p)]):
        out = tf.identity(p)
    return Run(out, {p: value})


CHECKS = {
    "integer_ok": lambda tf: tf.assert_integer(tf.constant([1, 2])),
    "integer_bad": lambda tf: tf.debugging.assert_integer(tf.constant(1.0)),
    "type_ok": lambda tf: tf.assert_type(tf.constant(1.0), tf.float32),
    "type_bad": lambda tf: tf.debugging.assert_type(tf.constant([1]), tf.int64),
    "scalar_ok": lambda tf: tf.assert_scalar(tf.constant(2.0)),
    "scalar_bad": lambda tf: tf.debugging.assert_scalar(tf.constant([1.0])),
    "rank_at_least_static": lambda tf: tf.assert_rank_at_least(tf.constant([1.0]), 2),
    "rank_at_least_ok": lambda tf: _ph_run(tf, tf.float32, X, lambda p:
                                           tf.assert_rank_at_least(p, 2)),
    "rank_at_least_run": lambda tf: _ph_run(tf, tf.float32, [1.0], lambda p:
                                            tf.debugging.assert_rank_at_least(p, 2)),
    "rank_in_static": lambda tf: tf.assert_rank_in(tf.constant([1.0]), [0, 2]),
    "rank_in_ok": lambda tf: _ph_run(tf, tf.float32, X, lambda p:
                                     tf.assert_rank_in(p, [1, 3])),
    "rank_in_run": lambda tf: _ph_run(tf, tf.float32, 1.0, lambda p:
                                      tf.debugging.assert_rank_in(p, [1, 3])),
    "near_ok": lambda tf: _ph_run(tf, tf.float64, [1.0, 2.0], lambda p:
                                  tf.assert_near(p, [1.05, 2.0], atol=0.1)),
    "near_run": lambda tf: _ph_run(tf, tf.float64, [1.0, 2.0], lambda p:
                                   tf.debugging.assert_near(p, [1.5, 2.0])),
    "shapes_ok": lambda tf: tf.debugging.assert_shapes([(tf.zeros([2, 3]), ("N", 3)),
                                              (tf.zeros([2]), ("N",))]),
    "shapes_static_bad": lambda tf: tf.debugging.assert_shapes(
        [(tf.zeros([2, 3]), ("N", "Q")), (tf.zeros([3, 3]), ("N", "Q"))]),
    "shapes_run": lambda tf: _ph_run(tf, tf.float32, np.zeros((2, 3), np.float32), lambda p:
                                     tf.debugging.assert_shapes([(p, ("N", "N"))]), [None, None]),
    "positive_run": lambda tf: _ph_run(tf, tf.float32, [1.0, -1.0], lambda p:
                                       tf.debugging.assert_positive(p)),
}


@pytest.mark.parametrize("prog", _progs(CHECKS))
def test_checks(prog):
    run_both(prog, static_keys=SHAPES_ONLY)


def test_same_float_dtype_and_proper_iterable():
    from compat_harness import module
    for impl in ("tf", "flowrt"):
        tf = module(impl)
        with tf.Graph().as_default():
            assert tf.assert_same_float_dtype([tf.constant(1.0, tf.float64)]) == tf.float64
            assert tf.assert_same_float_dtype() == tf.float32
            with pytest.raises(ValueError):
                tf.assert_same_float_dtype([tf.constant(1.0), tf.constant(1.0, tf.float64)])
            with pytest.raises(ValueError):
                tf.assert_same_float_dtype([tf.constant(1)])
            with pytest.raises(TypeError):
                tf.assert_proper_iterable("abc")
            with pytest.raises(TypeError):
                tf.assert_proper_iterable(3)
            tf.assert_proper_iterable([1])


DIAGS = {
    "part_band_rl": lambda tf: tf.linalg.diag_part(tf.constant(X), k=(-1, 2),
                                                   align="RIGHT_LEFT", padding_value=9),
    "part_band_ll": lambda tf: tf.linalg.diag_part(tf.constant(X), k=(-2, 1),
                                                   align="LEFT_LEFT"),
    "part_band_lr": lambda tf: tf.linalg.diag_part(tf.constant(X), k=(0, 3),
                                                   align="LEFT_RIGHT"),
    "part_single": lambda tf: tf.linalg.diag_part(tf.constant(X), k=1),
    "part_single_neg": lambda tf: tf.matrix_diag_part(tf.constant(X), k=-2),
    "diag_single": lambda tf: tf.linalg.diag(tf.constant([1.0, 2.0]), k=2),
    "diag_rows_cols": lambda tf: tf.linalg.diag(tf.constant([1.0, 2.0]), k=-1, num_cols=4,
                                                padding_value=-1.0),
    "diag_band_rr": lambda tf: tf.linalg.diag(tf.constant(X[0, :2, :3]), k=(0, 1),
                                              align="RIGHT_RIGHT"),
    "diag_band_rl": lambda tf: tf.linalg.diag(tf.constant(X[:, :3, :3]), k=(-1, 1),
                                              num_rows=3, num_cols=4, align="RIGHT_LEFT"),
    "set_band": lambda tf: tf.linalg.set_diag(tf.constant(X), tf.zeros([2, 2, 3]),
                                              k=(0, 1), align="LEFT_RIGHT"),
    "set_single": lambda tf: tf.matrix_set_diag(tf.constant(X), tf.ones([2, 3]), k=1),
    "part_bad_band": lambda tf: tf.linalg.diag_part(tf.constant(X), k=(2, 1)),
    "part_out_of_bound": lambda tf: tf.linalg.diag_part(tf.constant(X), k=4),
    "grad_part": lambda tf: (lambda x: tf.gradients(tf.reduce_sum(tf.linalg.diag_part(
        x, k=(-1, 1), align="RIGHT_LEFT") ** 2), x))(tf.constant(X)),
    "grad_diag": lambda tf: (lambda x: tf.gradients(tf.reduce_sum(tf.linalg.diag(
        x, k=(0, 1), num_rows=3, num_cols=4, align="LEFT_RIGHT") ** 2), x))(
        tf.constant(X[:, :2, :3])),
}


@pytest.mark.parametrize("prog", _progs(DIAGS))
def test_matrix_diag_bands(prog):
    run_both(prog, static_keys=SHAPES_ONLY)


def _cross_inputs(tf):
    a = tf.SparseTensor([[0, 0], [1, 0], [1, 1]], ["a", "b", "c"], [2, 2])
    b = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], tf.constant([3, 5, 4], tf.int64), [2, 2])
    d = tf.constant([["f", "h"], ["g", "i"]])
    return a, b, d


CROSSES = {
    "cross": lambda tf: tf.sparse.cross(list(_cross_inputs(tf))),
    "cross_dense_first": lambda tf: (lambda a, b, d: tf.sparse.cross([d, a, b]))(
        *_cross_inputs(tf)),
    "cross_hashed": lambda tf: tf.sparse.cross_hashed(list(_cross_inputs(tf))),
    "cross_hashed_buckets": lambda tf: tf.sparse.cross_hashed(
        list(_cross_inputs(tf)), num_buckets=1000, hash_key=12345),
    "cross_int_dense": lambda tf: (lambda a, b, d: tf.sparse.cross_hashed(
        [b, tf.constant([[7], [8]])], num_buckets=50))(*_cross_inputs(tf)),
}


@pytest.mark.parametrize("prog", _progs(CROSSES))
def test_sparse_cross(prog):
    run_both(prog, static_keys=("kind", "dtype"))
