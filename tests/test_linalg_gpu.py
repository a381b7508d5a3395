"""helper E's kernels (tf.linalg, segment reductions, special functions) on a GPU: each
op placed on GPU:0 without soft placement, against the same op on CPU:0. Skips cleanly
without a GPU."""
from __future__ import annotations

import numpy as np
import pytest

import flowrt as tf
from flowrt.plugins.devices import cuda as cuda_dev

_DT = cuda_dev.gpu_device_type()
GPUS = _DT.discover(None, "localhost", 0)
pytestmark = pytest.mark.skipif(not GPUS, reason=f"no GPU here: {_DT.unavailable_reason}")

rng = np.random.RandomState(0)
A = rng.randn(2, 3, 3) + 4 * np.eye(3)
B = rng.randn(2, 3, 2)
SPD = A @ np.swapaxes(A, -1, -2) + 3 * np.eye(3)
D = rng.randn(5, 3)
#: the segment products have no GPU kernel (they failed on CuPy): not compared here
CASES = {
    "inv": lambda: tf.linalg.inv(A), "det": lambda: tf.linalg.det(A),
    "slogdet": lambda: tf.linalg.slogdet(A)[1], "chol": lambda: tf.cholesky(SPD),
    "solve": lambda: tf.linalg.solve(A, B), "tri": lambda: tf.linalg.triangular_solve(A, B),
    "qr_r": lambda: tf.abs(tf.linalg.qr(A)[1]), "svd_s": lambda: tf.svd(A, compute_uv=False),
    "eigvalsh": lambda: tf.linalg.eigvalsh(SPD), "expm": lambda: tf.linalg.expm(0.3 * A),
    "sqrtm": lambda: tf.linalg.sqrtm(SPD), "lu": lambda: tf.linalg.lu(A)[0],
    "cross": lambda: tf.cross(A, SPD), "tridiag": lambda: tf.linalg.tridiagonal_solve(
        A + [[0.0], [5.0], [0.0]], B),
    "tridiag_mm": lambda: tf.linalg.tridiagonal_matmul(A, B),
    "lstsq_slow": lambda: tf.linalg.lstsq(D, D[:, :2], fast=False),
    "seg_sum": lambda: tf.segment_sum(D, [0, 0, 1, 3, 3]),
    "seg_mean": lambda: tf.segment_mean(D, [0, 0, 1, 3, 3]),
    "seg_max": lambda: tf.segment_max(D, [0, 0, 1, 3, 3]),
    "useg_min": lambda: tf.unsorted_segment_min(D, [2, -1, 0, 2, 1], 4),
    "sparse_mean": lambda: tf.sparse_segment_mean(D, [0, 4, 4], [0, 0, 2]),
    "igamma": lambda: tf.igamma(np.abs(D) + 0.1, np.abs(D)),
    "bessel": lambda: tf.math.bessel_i1e(D), "erfinv": lambda: tf.math.erfinv(D / 5),
    "xlog1py": lambda: tf.math.xlog1py(D, np.abs(D)),
    "nextafter": lambda: tf.math.nextafter(D, 0 * D),
    "cumlse": lambda: tf.math.cumulative_logsumexp(D, axis=1),
    "bincount": lambda: tf.bincount(np.array([1, 1, 4], np.int32)),
    "hist": lambda: tf.histogram_fixed_width(D, [-1.0, 1.0], nbins=4),
    "grad_det": lambda: _grad_det(),
}


def _grad_det():
    a = tf.constant(A)
    return tf.gradients(tf.reduce_sum(tf.linalg.det(a)), a)[0]



@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_matches_cpu(name):
    cfg = tf.ConfigProto(allow_soft_placement=False)
    outs = []
    for dev in ("/device:CPU:0", "/device:GPU:0"):
        with tf.Graph().as_default():
            with tf.device(dev):
                y = CASES[name]()
            with tf.Session(config=cfg) as sess:
                outs.append(sess.run(y))
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-6, atol=1e-8, equal_nan=True)
