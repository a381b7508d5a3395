"""tf.math extras: segment reductions (sorted, unsorted, sparse), special functions,
bincount and histograms, cumulative_logsumexp and small composites, their errors and
their gradients, under TensorFlow and flowrt."""
from __future__ import annotations

import numpy as np
import pytest

from compat_harness import STATIC_KEYS, Run, run_both

RNG = np.random.RandomState(7)
DATA = RNG.randn(5, 3)
IDS = np.array([0, 0, 2, 3, 3], np.int32)
UIDS = np.array([3, -1, 0, 3, 1], np.int64)
SHAPES_ONLY = ("kind", "dtype", "shape")

VALUES = {
    "segment_sum": lambda tf: tf.math.segment_sum(tf.constant(DATA), IDS),
    "segment_mean": lambda tf: tf.segment_mean(tf.constant(DATA, tf.float32), IDS),
    "segment_mean_int": lambda tf: tf.segment_mean(tf.constant([[1, 4], [2, -7], [3, 3]]),
                                                   [0, 0, 1]),
    "segment_prod": lambda tf: tf.segment_prod(tf.constant(DATA), IDS),
    "segment_max": lambda tf: tf.math.segment_max(tf.constant(DATA), IDS),
    "segment_min_int64": lambda tf: tf.segment_min(tf.constant([5, 1, 9], tf.int64),
                                                   tf.constant([1, 1, 3], tf.int64)),
    "segment_sum_complex": lambda tf: tf.segment_sum(tf.constant([1 + 2j, 3j, 4.0]),
                                                     [0, 1, 1]),
    "unsorted_max": lambda tf: tf.math.unsorted_segment_max(tf.constant(DATA), UIDS, 5),
    "unsorted_min": lambda tf: tf.unsorted_segment_min(tf.constant(DATA), UIDS, 5),
    "unsorted_max_int": lambda tf: tf.unsorted_segment_max(tf.constant([3, 1, 2]), [0, 0, 2],
                                                           4),
    "unsorted_prod": lambda tf: tf.unsorted_segment_prod(tf.constant(DATA), UIDS, 5),
    "unsorted_mean": lambda tf: tf.math.unsorted_segment_mean(tf.constant(DATA), UIDS, 5),
    "unsorted_sqrt_n": lambda tf: tf.unsorted_segment_sqrt_n(tf.constant(DATA), UIDS, 5),
    "unsorted_2d_ids": lambda tf: tf.unsorted_segment_max(
        tf.constant(DATA[:4].reshape(2, 2, 3)), [[0, 1], [1, -1]], 3),
    "sparse_sum": lambda tf: tf.sparse_segment_sum(tf.constant(DATA), [0, 4, 4, 1],
                                                   [0, 0, 1, 3]),
    "sparse_mean": lambda tf: tf.sparse_segment_mean(tf.constant(DATA), [0, 4, 4, 1],
                                                     [0, 0, 1, 3]),
    "sparse_sqrt_n": lambda tf: tf.sparse_segment_sqrt_n(tf.constant(DATA), [0, 4, 4, 1],
                                                         [0, 0, 1, 3]),
    "sparse_sum_num": lambda tf: tf.sparse_segment_sum(tf.constant(DATA), [0, 4], [0, 1],
                                                       num_segments=4),
    "sparse_mean_num": lambda tf: tf.sparse.segment_mean(tf.constant(DATA), [0, 4], [0, 1],
                                                         num_segments=3),
    "sparse_sqrt_n_ns": lambda tf: tf.sparse.segment_sqrt_n(tf.constant(DATA), [2, 3], [1, 1]),
    "igamma": lambda tf: tf.math.igamma(tf.constant([0.5, 2.0, 10.0, 3.0]),
                                        tf.constant([0.3, 3.0, 12.0, 0.0])),
    "igammac_broadcast": lambda tf: tf.igammac(tf.constant([[0.5], [4.0]], tf.float64),
                                               tf.constant([0.1, 1.0, 9.0], tf.float64)),
    "igamma_nan": lambda tf: tf.igamma(tf.constant([-1.0, 0.0, 1.0]),
                                       tf.constant([1.0, 1.0, -1.0])),
    "betainc": lambda tf: tf.math.betainc(tf.constant([0.5, 2.0, 10.0]),
                                          tf.constant([3.0, 4.0, 5.0]),
                                          tf.constant([0.3, 0.5, 0.9])),
    "betainc_scalar_ab": lambda tf: tf.betainc(2.0, 3.0, tf.constant([0.0, 0.2, 1.0])),
    "bessel_i0e": lambda tf: tf.math.bessel_i0e(tf.constant([-40.0, -1.0, 0.0, 2.0, 31.0])),
    "bessel_i1e": lambda tf: tf.math.bessel_i1e(tf.constant([-40.0, -1.0, 0.0, 2.0, 31.0],
                                                            tf.float64)),
    "bessel_i0": lambda tf: tf.math.bessel_i0(tf.constant([-4.0, 0.0, 2.5, 20.0])),
    "bessel_i1": lambda tf: tf.math.bessel_i1(tf.constant([-4.0, 0.0, 2.5, 20.0], tf.float64)),
    "special_bessel_i1e": lambda tf: tf.math.special.bessel_i1e(tf.constant([0.5, 50.0])),
    "erfinv": lambda tf: tf.math.erfinv(tf.constant([-1.0, -0.9, 0.0, 1e-8, 0.5, 0.999, 1.0,
                                                      2.0], tf.float64)),
    "erfinv_f32": lambda tf: tf.math.erfinv(tf.constant([-0.5, 0.25, 0.99])),
    "ndtri": lambda tf: tf.math.ndtri(tf.constant([0.0, 1e-10, 0.025, 0.5, 0.9, 1.0, 1.5],
                                                  tf.float64)),
    "erfcinv": lambda tf: tf.math.erfcinv(tf.constant([0.1, 1.0, 1.9], tf.float64)),
    "xlog1py": lambda tf: tf.math.xlog1py(tf.constant([0.0, 2.0, 3.0]),
                                          tf.constant([-1.0, 0.5, 2.0])),
    "nextafter": lambda tf: tf.math.nextafter(tf.constant([1.0, 1.0, 0.0]),
                                              tf.constant([2.0, 0.0, -1.0])),
    "lbeta": lambda tf: tf.math.lbeta(tf.constant([[1.5, 2.5, 0.5], [3.0, 1.0, 2.0]])),
    "lbeta_top": lambda tf: tf.lbeta(tf.constant([2.0, 3.0], tf.float64)),
    "polyval": lambda tf: tf.math.polyval([1.0, -2.0, 3.0], tf.constant([0.0, 2.0, -1.5])),
    "polyval_empty": lambda tf: tf.math.polyval([], tf.constant([1.0, 2.0])),
    "cumulative_logsumexp": lambda tf: tf.math.cumulative_logsumexp(tf.constant(DATA * 30)),
    "cumulative_logsumexp_excl_rev": lambda tf: tf.math.cumulative_logsumexp(
        tf.constant(DATA), axis=1, exclusive=True, reverse=True),
    "bincount": lambda tf: tf.math.bincount(tf.constant([[1, 1, 4], [0, 1, 4]])),
    "bincount_min_max": lambda tf: [tf.bincount(tf.constant([1, 1, 4]), minlength=7),
                                    tf.bincount(tf.constant([1, 1, 4]), maxlength=2)],
    "bincount_weights": lambda tf: tf.bincount(tf.constant([1, 1, 4]),
                                               weights=tf.constant([0.5, 1.0, 2.0])),
    "bincount_empty": lambda tf: tf.bincount(tf.zeros([0], tf.int32)),
    "bincount_dtype": lambda tf: tf.bincount(tf.constant([2, 0]), dtype=tf.float64),
    "histogram_fixed_width": lambda tf: tf.histogram_fixed_width(
        tf.constant([-1.0, 0.0, 1.5, 2.0, 5.0, 7.0]), [0.0, 5.0], nbins=5),
    "histogram_int64": lambda tf: tf.histogram_fixed_width(
        tf.constant([1, 2, 3, 9], tf.int64), tf.constant([0, 10], tf.int64), nbins=3,
        dtype=tf.int64),
    "histogram_bins": lambda tf: tf.histogram_fixed_width_bins(
        tf.constant([[-1.0, 0.0, 1.5], [2.0, 5.0, 7.0]]), [0.0, 5.0], nbins=5),
    "accumulate_n": lambda tf: tf.math.accumulate_n([tf.constant(DATA), tf.constant(DATA)]),
    "accumulate_n_one": lambda tf: tf.accumulate_n([tf.constant(DATA)], name="acc"),
    "arg_max": lambda tf: tf.arg_max(tf.constant(DATA), 1),
    "arg_min": lambda tf: tf.arg_min(tf.constant(DATA), 0, output_type=tf.int32),
    "is_non_decreasing": lambda tf: [tf.math.is_non_decreasing([1, 1, 2]),
                                     tf.is_non_decreasing([2.0, 1.0]),
                                     tf.is_non_decreasing([[1, 2], [3, 4]])],
    "is_strictly_increasing": lambda tf: [tf.math.is_strictly_increasing([1, 1, 2]),
                                          tf.is_strictly_increasing([3])],
    "zero_fraction": lambda tf: tf.math.zero_fraction(tf.constant([0.0, 1.0, 0.0, 2.0])),
    "zero_fraction_nn_int": lambda tf: tf.nn.zero_fraction(tf.constant([[0, 1], [0, 0]])),
}


# TF 1.15 built these from other ops than TF 2.x does, and flowrt follows 1.15:
# accumulate_n was an AccumulateNV2 op (2.x: AddN); bincount was a Bincount op with an
# unknown static length, or an UnsortedSegmentSum with weights (2.x: DenseBincount)
TF115_OPS = {"accumulate_n", "bincount", "bincount_min_max", "bincount_weights",
             "bincount_empty", "bincount_dtype"}


@pytest.mark.parametrize("name", sorted(VALUES))
def test_values(name):
    keys = ("kind", "dtype") if name in TF115_OPS else STATIC_KEYS
    run_both(VALUES[name], rtol=2e-5 if "f32" in name else None, static_keys=keys)


# composites whose ops TF builds differently (names and op types not compared)
VALUES_NOT_NAMES = {
    "confusion_matrix": lambda tf: tf.math.confusion_matrix([0, 1, 2, 1], [0, 2, 2, 1]),
    "confusion_matrix_weights": lambda tf: tf.confusion_matrix(
        [0, 1], [1, 1], num_classes=3, weights=tf.constant([2, 5]), dtype=tf.int64),
}


@pytest.mark.parametrize("name", sorted(VALUES_NOT_NAMES))
def test_values_not_names(name):
    run_both(VALUES_NOT_NAMES[name], static_keys=SHAPES_ONLY)


def test_static_shapes():
    def program(tf):
        d = tf.placeholder(tf.float32, [None, 3])
        i = tf.placeholder(tf.int32, [None])
        outs = [tf.segment_sum(d, i), tf.segment_max(d, i),
                tf.unsorted_segment_max(d, i, 4), tf.unsorted_segment_mean(d, i, 4),
                tf.sparse_segment_mean(d, i, i), tf.sparse_segment_sum(d, i, i,
                                                                        num_segments=6),
                tf.math.cumulative_logsumexp(d), tf.bincount(i),
                tf.histogram_fixed_width(d, [0.0, 1.0])]
        return Run(outs, {d: np.ones((2, 3)), i: [0, 1]})

    run_both(program, static_keys=SHAPES_ONLY)


ERRORS = {
    "segment_not_sorted": lambda tf: tf.segment_sum(tf.ones([3]), [0, 2, 1]),
    "segment_negative": lambda tf: tf.segment_max(tf.ones([2]), [-1, 0]),
    "segment_size": lambda tf: tf.segment_sum(tf.ones([3]), tf.constant([0, 1])),
    "segment_ids_rank": lambda tf: tf.segment_sum(tf.ones([2, 2]), [[0, 1], [1, 1]]),
    "segment_complex_max": lambda tf: tf.segment_max(tf.constant([1j]), [0]),
    "unsorted_out_of_range": lambda tf: tf.unsorted_segment_max(tf.ones([2]), [0, 5], 2),
    "sparse_bad_index": lambda tf: tf.sparse_segment_sum(tf.ones([2, 1]), [0, 5], [0, 0]),
    "sparse_not_sorted": lambda tf: tf.sparse_segment_mean(tf.ones([2, 1]), [0, 1], [1, 0]),
    "bincount_negative": lambda tf: tf.bincount(tf.constant([-1, 2])),
    "histogram_bad_range": lambda tf: tf.histogram_fixed_width(tf.constant([1.0]),
                                                               [2.0, 1.0]),
    "histogram_bad_nbins": lambda tf: tf.histogram_fixed_width(tf.constant([1.0]),
                                                               [0.0, 1.0], nbins=0),
    "polyval_not_list": lambda tf: tf.math.polyval((1.0, 2.0), tf.constant(1.0)),
    "accumulate_n_empty": lambda tf: tf.math.accumulate_n([]),
    "accumulate_n_dtypes": lambda tf: tf.math.accumulate_n([tf.ones([2]),
                                                            tf.ones([2], tf.float64)]),
    "betainc_shapes": lambda tf: tf.betainc(tf.ones([2]), tf.ones([3]), 0.5),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors(name):
    run_both(ERRORS[name], static_keys=("kind", "dtype") if "bincount" in name
             else STATIC_KEYS)


def _grads(build, *values):
    def program(tf):
        xs = [tf.constant(v) for v in values]
        return tf.gradients(build(tf, *xs), xs)

    return program


GRADS = {
    "segment_sum": _grads(lambda tf, x: tf.segment_sum(x, IDS), DATA),
    "segment_mean": _grads(lambda tf, x: tf.segment_mean(x, IDS), DATA),
    "segment_max": _grads(lambda tf, x: tf.segment_max(x, IDS), DATA),
    "segment_min": _grads(lambda tf, x: tf.segment_min(x, IDS), DATA),
    "unsorted_max": _grads(lambda tf, x: tf.unsorted_segment_max(x, UIDS, 5), DATA),
    "unsorted_min": _grads(lambda tf, x: tf.unsorted_segment_min(x, UIDS, 5), DATA),
    "unsorted_prod": _grads(lambda tf, x: tf.unsorted_segment_prod(x, UIDS, 5),
                            np.where(DATA > 1, 0.0, DATA)),
    "unsorted_mean": _grads(lambda tf, x: tf.unsorted_segment_mean(x, UIDS, 5), DATA),
    "unsorted_sqrt_n": _grads(lambda tf, x: tf.unsorted_segment_sqrt_n(x, UIDS, 5), DATA),
    "sparse_sum": _grads(lambda tf, x: tf.sparse_segment_sum(x, [0, 4, 4], [0, 0, 2]), DATA),
    "sparse_mean": _grads(lambda tf, x: tf.sparse_segment_mean(x, [0, 4, 4], [0, 0, 2]),
                          DATA),
    "sparse_sqrt_n_num": _grads(lambda tf, x: tf.sparse_segment_sqrt_n(
        x, [0, 4, 4], [0, 0, 2], num_segments=4), DATA),
    "igamma": _grads(lambda tf, a, x: tf.igamma(a, x), np.array([0.7, 2.0, 5.0]),
                     np.array([0.4, 2.5, 6.0])),
    "igammac": _grads(lambda tf, a, x: tf.igammac(a, x), np.array([0.7, 2.0]),
                      np.array([0.4, 2.5])),
    "betainc": _grads(lambda tf, a, b, x: tf.betainc(a, b, x), np.array([2.0, 0.5]),
                      np.array([3.0, 1.5]), np.array([0.2, 0.7])),
    "bessel": _grads(lambda tf, x: [tf.math.bessel_i0e(x), tf.math.bessel_i1e(x),
                                    tf.math.bessel_i0(x), tf.math.bessel_i1(x)],
                     np.array([-3.0, -0.5, 0.3, 2.0])),
    "erfinv_ndtri": _grads(lambda tf, x: [tf.math.erfinv(x), tf.math.ndtri(x)],
                           np.array([0.1, 0.5, 0.9])),
    "xlog1py": _grads(lambda tf, x, y: tf.math.xlog1py(x, y), np.array([0.0, 2.0]),
                      np.array([0.3, 1.5])),
    "lbeta": _grads(lambda tf, x: tf.lbeta(x), np.array([[1.5, 2.5], [0.7, 3.0]])),
    "cumulative_logsumexp": _grads(lambda tf, x: tf.math.cumulative_logsumexp(x, axis=1),
                                   DATA),
    "cumulative_logsumexp_rev": _grads(lambda tf, x: tf.math.cumulative_logsumexp(
        x, reverse=True), DATA),
    "accumulate_n": _grads(lambda tf, x, y: tf.math.accumulate_n([x, y, x]), DATA, DATA),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients(name):
    run_both(GRADS[name], rtol=1e-6, atol=1e-9, static_keys=SHAPES_ONLY)
