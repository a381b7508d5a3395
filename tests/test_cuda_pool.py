"""MaxPool and MaxPoolGrad as one CUDA kernel each (flowrt.plugins.kernels.cuda_pool).

Everywhere: the kernels' window geometry is TF's. On a GPU: both ops agree exactly with
the CPU kernels over layouts, paddings, overlapping windows, ties and NaNs, in float32 and
float64, and ran as the single kernel.
"""
from __future__ import annotations

import numpy as np
import pytest

import flowrt as tf
from flowrt.plugins.devices import cuda as cuda_dev
from flowrt.plugins.kernels import cuda_pool
from flowrt.plugins.kernels.standard.nn_ops import _windowed_size

_DT = cuda_dev.gpu_device_type()
GPUS = _DT.discover(None, "localhost", 0)
needs_gpu = pytest.mark.skipif(not GPUS, reason=f"no GPU here: {_DT.unavailable_reason}")


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_window_geometry_is_tfs(padding):
    for k in range(1, 5):
        for s in range(1, 4):
            pool = cuda_pool._Pool({"ksize": [1, k, k, 1], "strides": [1, s, s, 1],
                                    "padding": padding})
            assert pool.ok
            for n in range(1, 12):
                try:
                    want = _windowed_size(n, k, s, padding)
                except ValueError:
                    continue
                oh, ow, pt, pl = pool.out_geometry(n, n)
                assert (oh, pt) == (want[0], want[1]), (k, s, n)


def test_channel_pooling_and_odd_formats_are_left_to_the_standard_kernel():
    assert not cuda_pool._Pool({"ksize": [1, 2, 2, 2], "strides": [1, 2, 2, 2],
                                "padding": "VALID"}).ok
    assert not cuda_pool._Pool({"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1],
                                "padding": "VALID", "data_format": "NCHW_VECT_C"}).ok
    nchw = cuda_pool._Pool({"ksize": [1, 1, 3, 2], "strides": [1, 1, 2, 1],
                            "padding": "SAME", "data_format": "NCHW"})
    assert nchw.ok and (nchw.kh, nchw.kw, nchw.sh, nchw.sw) == (3, 2, 2, 1)


def _pool_step(device, x, dy_seed, **kw):
    g = tf.Graph()
    with g.as_default(), tf.device(device):
        xv = tf.constant(x)
        y = tf.nn.max_pool(xv, **kw)
        gy = tf.constant(np.random.default_rng(dy_seed).standard_normal(
            y.shape.as_list()).astype(x.dtype))
        (dx,) = tf.gradients(y, [xv], grad_ys=gy)
    with tf.Session(graph=g) as s:
        return s.run([y, dx])


CASES = [
    ((4, 8, 8, 3), dict(ksize=2, strides=2, padding="VALID")),
    ((2, 9, 7, 5), dict(ksize=3, strides=2, padding="SAME")),     # overlapping, padded
    ((2, 6, 6, 4), dict(ksize=3, strides=1, padding="SAME")),
    ((3, 7, 5, 2), dict(ksize=[1, 2, 3, 1], strides=[1, 1, 2, 1], padding="VALID")),
    ((2, 4, 6, 6), dict(ksize=[1, 1, 2, 2], strides=[1, 1, 2, 2], padding="SAME",
                        data_format="NCHW")),
]


@needs_gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("values", ["random", "ties", "nan"])
def test_gpu_max_pool_and_grad_match_the_cpu_exactly(case, dtype, values):
    shape, kw = CASES[case]
    rng = np.random.default_rng(case)
    if values == "ties":  # few distinct values: many windows hold several maxima
        x = rng.integers(0, 3, shape).astype(dtype)
    else:
        x = rng.standard_normal(shape).astype(dtype)
    if values == "nan":
        x.reshape(-1)[rng.choice(x.size, max(1, x.size // 7), replace=False)] = np.nan
    gpu = _pool_step("/device:GPU:0", x, case, **kw)
    assert ("fwd", np.dtype(dtype).name) in cuda_pool._kernels
    assert ("grad", np.dtype(dtype).name) in cuda_pool._kernels
    cpu = _pool_step("/device:CPU:0", x, case, **kw)
    np.testing.assert_array_equal(gpu[0], cpu[0])
    np.testing.assert_allclose(gpu[1], cpu[1], rtol=1e-6, atol=1e-6)


@needs_gpu
def test_bad_input_gets_the_standard_kernels_error():
    g = tf.Graph()
    with g.as_default(), tf.device("/device:GPU:0"):
        x = tf.placeholder(tf.float32, None)
        y = tf.nn.max_pool(x, 2, 2, "VALID")
    with tf.Session(graph=g) as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="4-dimensional"):
            s.run(y, {x: np.ones((2, 3), np.float32)})
        assert s.run(y, {x: np.ones((0, 4, 4, 1), np.float32)}).shape == (0, 2, 2, 1)
