"""The CPU device's intra-op parallelism: ``parallel_map`` and BLAS single-thread
regions (plugins/devices/cpu.py), and the convolutions that split their batch over it."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import flowrt as tf
from flowrt.plugins.devices import cpu


@pytest.fixture
def two_threads():
    old = cpu.intra_op_threads()
    cpu.set_intra_op_threads(2)
    yield
    cpu.set_intra_op_threads(old)

@pytest.fixture
def pmap_calls(monkeypatch):
    """The part counts of every ``parallel_map`` call made during the test."""
    calls = []
    real_pmap = cpu.parallel_map

    def pmap(fn, n):
        calls.append(n)
        return real_pmap(fn, n)
    monkeypatch.setattr(cpu, "parallel_map", pmap)
    return calls



def test_parallel_map_returns_results_in_order_and_uses_another_thread(two_threads):
    seen = set()
    both = threading.Barrier(2, timeout=10)

    def part(i):
        seen.add(threading.get_ident())
        if i < 2:
            both.wait()  # parts 0 and 1 can only both pass on two threads at once
        return i * i

    assert cpu.parallel_map(part, 6) == [0, 1, 4, 9, 16, 25]
    assert len(seen) == 2


def test_parallel_map_raises_a_parts_error_after_all_parts_stop(two_threads):
    running = []

    def part(i):
        running.append(i)
        if i == 1:
            raise ValueError("part 1 failed")
        time.sleep(0.01)
        return i

    with pytest.raises(ValueError, match="part 1 failed"):
        cpu.parallel_map(part, 4)
    # nothing is still running once the error is raised
    n = len(running)
    time.sleep(0.05)
    assert len(running) == n


def test_nested_parallel_map_runs_in_turn_without_deadlock(two_threads):
    def outer(i):
        return sum(cpu.parallel_map(lambda j: i * 10 + j, 3))

    assert cpu.parallel_map(outer, 4) == [3, 33, 63, 93]


def _blas_get():
    blas = cpu._blas()
    return None if blas is None else int(blas[1]())


def test_blas_single_threaded_regions_nest_and_restore():
    if cpu._blas() is None:
        pytest.skip("no OpenBLAS in this process")
    old = cpu._blas_threads[0]
    try:
        assert cpu.set_blas_threads(2)
        with cpu.blas_single_threaded():
            assert _blas_get() == 1
            with cpu.blas_single_threaded():
                assert _blas_get() == 1
            assert _blas_get() == 1
        assert _blas_get() == 2
        # overlapping regions on two threads: the count comes back only when both close
        inside, release = threading.Event(), threading.Event()

        def other():
            with cpu.blas_single_threaded():
                inside.set()
                release.wait(5)

        t = threading.Thread(target=other)
        t.start()
        assert inside.wait(5)
        with cpu.blas_single_threaded():
            pass
        assert _blas_get() == 1  # the other thread's region is still open
        release.set()
        t.join(5)
        assert _blas_get() == 2
    finally:
        cpu.set_blas_threads(old)


def test_the_first_kernel_of_a_fresh_process_already_keeps_blas_on_one_thread():
    # A process whose first BLAS-using kernel is a split convolution: nothing had looked
    # BLAS up yet, and the parts ran with BLAS's own threads on top of the pool's (a
    # conv step 1.6x slower). Each part must see one BLAS thread, and BLAS its two after.
    import subprocess
    import sys
    code = """
import threading, numpy as np, threadpoolctl
import flowrt as tf
from flowrt.plugins.devices import cpu
from flowrt.plugins.kernels.standard import nn_conv_rows as R
seen = []
orig = R._patches
def spy(x, geo):
    seen.append(threadpoolctl.threadpool_info()[0]["num_threads"])
    return orig(x, geo)
R._patches = spy
cpu.set_intra_op_threads(2)
x = tf.placeholder(tf.float32, [16, 14, 14, 32])
y = tf.nn.conv2d(x, tf.constant(np.ones((5, 5, 32, 64), np.float32)), [1] * 4, "SAME")
with tf.Session() as s:
    s.run(y, {x: np.ones((16, 14, 14, 32), np.float32)})
print(sorted(set(seen)), len(seen) > 1, threadpoolctl.threadpool_info()[0]["num_threads"])
"""
    env = dict(__import__("os").environ, OPENBLAS_NUM_THREADS="2")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env=env)
    if r.returncode != 0 and "IndexError" in r.stderr:
        pytest.skip("no BLAS threadpoolctl can read in this process")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["[1]", "True", "2"], r.stdout


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batch", [1, 3, 64])
def test_convolutions_split_over_the_batch_match_one_piece(threads, batch, monkeypatch):
    """Conv2D and both gradients, computed in batch chunks over the intra-op threads
    (a small CHUNK_BYTES forces several), equal the float64 result computed whole."""
    from flowrt.plugins.kernels.standard import nn_conv_rows
    monkeypatch.setattr(nn_conv_rows, "CHUNK_BYTES", 64 << 10)
    monkeypatch.setattr(nn_conv_rows, "ROW_CHUNK_BYTES", 4 << 10)
    old = cpu.intra_op_threads()
    cpu.set_intra_op_threads(threads)
    try:
        rng = np.random.default_rng(batch)
        x = rng.standard_normal((batch, 9, 7, 5))
        w = rng.standard_normal((3, 3, 5, 4))
        dy = rng.standard_normal((batch, 9, 7, 4))
        got, want = [], []
        for dtype, out in ((np.float32, got), (np.float64, want)):
            with tf.Graph().as_default():
                xt, wt, dt = (tf.constant(a.astype(dtype)) for a in (x, w, dy))
                y = tf.nn.conv2d(xt, wt, [1, 1, 1, 1], "SAME")
                gx = tf.nn.conv2d_backprop_input([batch, 9, 7, 5], wt, dt, [1, 1, 1, 1], "SAME")
                gw = tf.nn.conv2d_backprop_filter(xt, [3, 3, 5, 4], dt, [1, 1, 1, 1], "SAME")
                with tf.Session() as s:
                    out.extend(s.run([y, gx, gw]))
        for g, wv in zip(got, want):
            np.testing.assert_allclose(g, wv, rtol=1e-4, atol=1e-4)
    finally:
        cpu.set_intra_op_threads(old)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("mkn,how", [((1201, 200, 150), "rows"), ((150, 200, 1201), "columns"),
                                     ((1201, 16, 300), "one thread"),
                                     ((300, 320, 400), "blas")])
def test_large_matmul_split_over_threads_matches_numpy(two_threads, ta, tb, mkn, how,
                                                       monkeypatch, pmap_calls):
    """A product over SMALL_GEMM_FLOPS with every side at least SPLIT_MIN_SIDE is split
    over the intra-op threads along the result's longer side (rows or columns); one
    with a thinner side runs on one thread, BLAS never running its own threads in
    either; one with every side at least BLAS_THREADS_MIN_SIDE is left to BLAS's
    threads. Every transpose combination gives numpy's product."""
    from flowrt.plugins.kernels.standard import math_ops
    from flowrt.plugins.kernels.standard.math_ops import SMALL_GEMM_FLOPS
    assert math_ops.SPLIT_LARGE_GEMMS  # the default
    calls, blas_threads = pmap_calls, []
    real_matmul = np.matmul

    def matmul(*args, **kw):
        blas_threads.append(cpu._blas_threads[0] if cpu._single[0] == 0 else 1)
        return real_matmul(*args, **kw)
    rng = np.random.default_rng(7)
    m, k, n = mkn
    if how == "one thread":  # a thin product: k under SPLIT_MIN_SIDE, made large by m, n
        m, n = m * 4, n * 5
    assert m * k * n >= SMALL_GEMM_FLOPS
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    concatenated = []
    real_concatenate = np.concatenate

    def concatenate(*args, **kw):
        concatenated.append(1)
        return real_concatenate(*args, **kw)
    with tf.Graph().as_default():
        p = tf.matmul(a, b, transpose_a=ta, transpose_b=tb)
        with tf.Session() as s:
            monkeypatch.setattr(np, "matmul", matmul)
            monkeypatch.setattr(np, "concatenate", concatenate)
            got = s.run(p)
            monkeypatch.setattr(np, "matmul", real_matmul)
            monkeypatch.setattr(np, "concatenate", real_concatenate)
    assert not concatenated  # the parts write straight into the result
    want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    assert calls == ([] if how in ("one thread", "blas") else [2])
    if how == "blas":
        assert blas_threads == [cpu._blas_threads[0]]
    else:
        assert blas_threads and set(blas_threads) == {1}


@pytest.mark.parametrize("nesterov", [False, True])
def test_adam_update_of_a_large_variable_split_over_threads_matches_whole(two_threads,
                                                                          nesterov):
    """ApplyAdam on a variable of over a million elements runs in ranges on the intra-op
    threads: the same numbers as TF's formula applied to the whole arrays."""
    from flowrt.plugins.kernels.standard import training_ops as tops
    rng = np.random.default_rng(11)
    shape = (1100, 1000)
    assert np.prod(shape) >= tops._SPLIT_SIZE
    var0 = rng.standard_normal(shape).astype(np.float32)
    grad = rng.standard_normal(shape).astype(np.float32)
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    with tf.Graph().as_default():
        v = tf.Variable(var0)
        m = tf.Variable(np.full(shape, 0.1, np.float32))
        s2 = tf.Variable(np.full(shape, 0.2, np.float32))
        upd = tops.apply_adam(v, m, s2, 0.5, 0.25, lr, b1, b2, eps, tf.constant(grad),
                              use_nesterov=nesterov)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got_v, got_m, got_s = s.run(upd), s.run(m), s.run(s2)
    one = np.float32(1)
    alpha = np.float32(lr) * np.sqrt(one - np.float32(0.25)) / (one - np.float32(0.5))
    want_m = np.float32(0.1) + (grad - np.float32(0.1)) * (one - np.float32(b1))
    want_s = np.float32(0.2) + (grad * grad - np.float32(0.2)) * (one - np.float32(b2))
    if nesterov:
        step = (grad * (one - np.float32(b1)) + np.float32(b1) * want_m) * alpha
    else:
        step = want_m * alpha
    want_v = var0 - step / (np.sqrt(want_s) + np.float32(eps))
    np.testing.assert_allclose(got_m, want_m, rtol=1e-6)
    np.testing.assert_allclose(got_s, want_s, rtol=1e-6)
    np.testing.assert_allclose(got_v, want_v, rtol=1e-5, atol=1e-6)


def test_split_update_results_own_their_memory(two_threads):
    """A variable keeps an array that owns its memory as it is and copies any other: the
    split update hands back arrays of the variable's shape that own their memory (it
    once returned reshaped views, and every Adam step of a 3136x1024 kernel copied its
    three 12.8 MB results again)."""
    import types
    from flowrt.plugins.kernels.standard import training_ops as tops
    from flowrt.plugins.kernels.standard.state_ops import _frozen
    ctx = types.SimpleNamespace(xp=np)
    rng = np.random.default_rng(12)
    a, b = rng.standard_normal((2, 300, 500)).astype(np.float32)

    def fn(x, y, k, out):
        np.multiply(x, k, out=out[0])
        np.add(x, y, out=out[1])

    got = tops._split_update(ctx, cpu.parallel_map, fn, (a, b), (np.float32(3),), 2,
                             into=True)
    for r, want in zip(got, (a * np.float32(3), a + b)):
        assert r.shape == a.shape and r.flags.owndata and r.flags.c_contiguous
        np.testing.assert_array_equal(r, want)
        assert _frozen(r) is r  # stored without a copy


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_large_elementwise_kernels_run_in_row_ranges(two_threads, fmt, pmap_calls):
    """Relu, BiasAdd, ReluGrad and BiasAddGrad over at least PARALLEL_ELEMENTS values
    run in ranges of the leading axis on the intra-op threads and give numpy's results
    (NaN and infinities where they were, integer Relu in its dtype)."""
    from flowrt.plugins.kernels.standard._common import PARALLEL_ELEMENTS
    calls = pmap_calls
    rng = np.random.default_rng(21)
    shape = (9, 32, 64, 64) if fmt == "NCHW" else (9, 64, 64, 32)
    assert np.prod(shape) >= PARALLEL_ELEMENTS
    x = rng.standard_normal(shape).astype(np.float32)
    x.flat[::997] = np.nan
    x.flat[5::1009] = np.inf
    g = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    xi = rng.integers(-5, 5, shape).astype(np.int32)
    with tf.Graph().as_default():
        xt, bt = tf.constant(x), tf.constant(b)
        relu, biased = tf.nn.relu(xt), tf.nn.bias_add(xt, bt, data_format=fmt)
        ops = [relu, biased,
               tf.gradients(relu, xt, grad_ys=g)[0],  # ReluGrad
               tf.gradients(biased, bt, grad_ys=g)[0],  # BiasAddGrad
               tf.nn.relu(xi)]
        assert ops[2].op.type == "ReluGrad" and ops[3].op.type == "BiasAddGrad"
        with tf.Session() as s:
            got = s.run(ops)
    bb = b.reshape(-1, 1, 1) if fmt == "NCHW" else b
    axes = (0, 2, 3) if fmt == "NCHW" else (0, 1, 2)
    want = [np.maximum(x, 0), x + bb, g * (x > 0), g.astype(np.float64).sum(axis=axes),
            np.maximum(xi, 0)]
    for k, (a, w) in enumerate(zip(got, want)):
        assert a.dtype == (np.int32 if k == 4 else np.float32)
        np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-3)
    # (an NHWC BiasAddGrad is one matrix-vector product instead, with BLAS kept to the
    # calling thread and no parts; see test_nn_grad)
    want_parts = [3, 3, 3, 3] if fmt == "NHWC" else [3] * 5
    assert calls == want_parts


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_large_pooling_runs_in_batch_ranges(fmt, pmap_calls):
    """MaxPool and AvgPool over at least PARALLEL_ELEMENTS values run in batch ranges on
    the intra-op threads, with the results of the one-thread computation (which padding
    and window counts already test elsewhere) and of numpy for a tiling 2x2 max pool."""
    calls = pmap_calls
    rng = np.random.default_rng(22)
    shape = (10, 28, 28, 160)
    x = rng.standard_normal(shape).astype(np.float32)
    xf = x.transpose(0, 3, 1, 2) if fmt == "NCHW" else x
    k2 = [1, 1, 2, 2] if fmt == "NCHW" else [1, 2, 2, 1]
    k3 = [1, 1, 3, 3] if fmt == "NCHW" else [1, 3, 3, 1]
    results = {}
    old = cpu.intra_op_threads()
    try:
        for threads in (1, 2):
            cpu.set_intra_op_threads(threads)
            with tf.Graph().as_default():
                ops = [tf.nn.max_pool(xf, k2, k2, "VALID", data_format=fmt),
                       tf.nn.max_pool(xf, k3, k2, "SAME", data_format=fmt),
                       tf.nn.avg_pool(xf, k3, k2, "SAME", data_format=fmt)]
                with tf.Session() as s:
                    results[threads] = s.run(ops)
    finally:
        cpu.set_intra_op_threads(old)
    assert calls == [4, 4, 4]  # the two-thread run only
    for one, two in zip(results[1], results[2]):
        np.testing.assert_array_equal(one, two)
    tiled = x.reshape(10, 14, 2, 14, 2, 160).max(axis=(2, 4))
    got = results[2][0].transpose(0, 2, 3, 1) if fmt == "NCHW" else results[2][0]
    np.testing.assert_array_equal(got, tiled)


def test_row_ranges_are_for_numpy_only(monkeypatch):
    """On an array module other than numpy (a GPU's), the kernels that split large work
    into row ranges compute whole with that module and never allocate host arrays or
    call ``parallel_map``: a stand-in module forwarding to numpy, on a device that has a
    ``parallel_map`` that fails the test if called."""
    import types
    import flowrt
    from flowrt import dtypes
    from flowrt.plugins.kernels.standard._common import PARALLEL_ELEMENTS
    xp = types.SimpleNamespace(**{n: getattr(np, n) for n in (
        "maximum", "add", "multiply", "sum", "asarray", "zeros", "transpose", "pad",
        "concatenate", "empty")})

    def no_pmap(fn, n):
        raise AssertionError("parallel_map called for a non-numpy array module")
    device = types.SimpleNamespace(parallel_map=no_pmap, parallelism=lambda: 2)
    rt = flowrt.default_runtime()
    rng = np.random.default_rng(23)
    x = rng.standard_normal((8, 64, 64, 40)).astype(np.float32)
    assert x.size >= PARALLEL_ELEMENTS
    b = rng.standard_normal(40).astype(np.float32)

    def kernel(op, attrs, *args):
        ctx = types.SimpleNamespace(xp=xp, device=device, attrs=attrs, op_type=op,
                                    node_name=op, output_dtypes=[dtypes.float32])
        return rt.find_kernel(op, "CPU").factory(ctx)(*args)

    def no_host_array(*a, **k):
        raise AssertionError("a host array allocated for a non-numpy array module")
    monkeypatch.setattr(np, "empty", no_host_array)  # (xp.empty holds the real one)
    np.testing.assert_array_equal(kernel("Relu", {}, x), np.maximum(x, 0))
    np.testing.assert_array_equal(kernel("BiasAdd", {"data_format": "NHWC"}, x, b), x + b)
    np.testing.assert_array_equal(kernel("ReluGrad", {}, x, x), x * (x > 0))
    np.testing.assert_allclose(kernel("BiasAddGrad", {"data_format": "NHWC"}, x),
                               x.sum(axis=(0, 1, 2)), rtol=1e-4)
