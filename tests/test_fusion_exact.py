"""Fused elementwise kernels give the unfused graph's results bit for bit.

Covers the fast paths of ``_FusedElementwise``: runs of one unary ufunc (one strided-loop
recurrence for small tensors), unary ufuncs writing over their own fresh input, and
ordinary members around them, for float16/32/64 (NaN, inf, subnormals, signed zeros),
integers, broadcasting and 0-d tensors.
"""
from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import flowrt as tf
from flowrt.plugins.kernels.standard import passes as P
from flowrt.proto.rewriter_config_pb2 import RewriterConfig

FLOATS = [np.float16, np.float32, np.float64]
TF_DTYPE = {np.float16: tf.float16, np.float32: tf.float32, np.float64: tf.float64,
            np.int32: tf.int32, np.int64: tf.int64}


@pytest.fixture(autouse=True)
def _passes_on(monkeypatch):
    monkeypatch.delenv("FLOWRT_DISABLE_PASSES", raising=False)


def bits(v: Any) -> tuple[str, tuple[int, ...], bytes, str]:
    a = np.asarray(v)
    return a.dtype.str, a.shape, np.ascontiguousarray(a).tobytes(), type(v).__name__


def unfused_config() -> Any:
    cfg = tf.ConfigProto()
    cfg.graph_options.rewrite_options.elementwise_fusion = RewriterConfig.OFF
    return cfg


def run_both(build: Any, feeds: dict[str, np.ndarray]) -> tuple[Any, Any, int, int]:
    """Build the graph, run it fused and unfused; also the placed node counts."""
    out = []
    for cfg in (None, unfused_config()):
        g = tf.Graph()
        with g.as_default():
            phs = {k: tf.placeholder(TF_DTYPE[v.dtype.type], v.shape, name=k)
                   for k, v in feeds.items()}
            y = build(phs)
            with tf.Session(graph=g, config=cfg) as s:
                fd = {phs[k]: v for k, v in feeds.items()}
                first = s.run(y, fd)
                again = s.run(y, fd)
                assert bits(first) == bits(again)
                out.append((first, len(s.placement(y, list(phs.values())))))
    (fused, n_fused), (plain, n_plain) = out
    return fused, plain, n_fused, n_plain


def chain_of(op: Any, n: int) -> Any:
    def build(phs: dict[str, Any]) -> Any:
        y = phs["x"]
        for _ in range(n):
            y = op(y)
        return y

    return build


def float_arrays(dtype: Any, max_side: int = 5) -> Any:
    width = np.dtype(dtype).itemsize * 8
    elems = st.floats(width=width, allow_nan=True, allow_infinity=True,
                      allow_subnormal=True)
    return hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=2, max_side=max_side),
                      elements=elems)


# -- the same ufunc many times -----------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.sampled_from([np.sin, np.cos]), st.sampled_from(FLOATS),
       st.integers(1, 40), st.data())
def test_ufunc_chain_equals_repeated_calls(ufunc, dtype, n, data):
    x = data.draw(float_arrays(dtype, max_side=6))
    before = x.tobytes()
    with np.errstate(all="ignore"):
        got = P._UfuncChain(ufunc, dtype, n)(x)
        want = x
        for _ in range(n):
            want = ufunc(want)
    assert bits(got) == bits(want)
    assert x.tobytes() == before  # the input is never written


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([tf.sin, tf.cos]), st.sampled_from(FLOATS), st.integers(2, 30),
       st.data())
def test_graph_chains_fused_equal_unfused(op, dtype, n, data):
    x = data.draw(float_arrays(dtype))
    fused, plain, n_fused, n_plain = run_both(chain_of(op, n), {"x": x})
    assert bits(fused) == bits(plain)
    assert n_fused == 2 and n_plain == n + 1  # the feed and one fused node


def test_recurrence_is_used_for_float32_and_float64_sin_and_cos():
    for ufunc in (np.sin, np.cos):
        for dt in (np.float32, np.float64):
            loop = P._recurrent_loop(ufunc, dt)
            if int(np.__version__.split(".")[0]) >= 2:
                assert loop is not None, (ufunc, dt)
    # never for ufuncs or dtypes whose overlapping loop was not checked
    assert P._recurrent_loop(np.exp, np.float32) is None
    assert P._recurrent_loop(np.sin, np.float16) is None
    assert P._recurrent_loop(np.add, np.float32) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_chain1000_on_four_floats_matches_repeated_sin(dtype):
    x = np.array([0.5, -3.0, 1e-30, 7e4], dtype)
    got = P._UfuncChain(np.sin, dtype, 1000)(x)
    want = x
    for _ in range(1000):
        want = np.sin(want)
    assert bits(got) == bits(want)


def test_special_values_survive_a_recurrence():
    info = np.finfo(np.float32)
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, info.smallest_subnormal,
                  -info.tiny, info.max, 117435.992, 117436.0, -2.5e5, 3.0], np.float32)
    for ufunc in (np.sin, np.cos):
        with np.errstate(all="ignore"):
            got = P._UfuncChain(ufunc, np.float32, 12)(x)
            want = x
            for _ in range(12):
                want = ufunc(want)
        assert bits(got) == bits(want)


def test_long_chains_run_in_segments(monkeypatch):
    monkeypatch.setattr(P, "_SCRATCH_BYTES", 64)  # 3 steps per segment for 4 floats
    x = np.float32([0.25, 1.5, -2.0, 9.0])
    for n in (8, 9, 10, 31):
        chain = P._UfuncChain(np.cos, np.float32, n)
        got = chain(x)
        assert len(chain.state.parts) > 1
        want = x
        for _ in range(n):
            want = np.cos(want)
        assert bits(got) == bits(want)


def test_large_and_odd_inputs_take_the_plain_path():
    chain = P._UfuncChain(np.sin, np.float32, 10)
    cases = [np.linspace(-3, 3, 100, dtype=np.float32),          # too large
             np.linspace(-3, 3, 12, dtype=np.float32)[::2],      # strided view
             np.arange(6, dtype=np.float64).reshape(2, 3),       # another dtype
             np.float32(0.5), np.array(0.5, np.float32),         # scalars, 0-d
             np.zeros((0, 3), np.float32)]
    for x in cases:
        got = chain(x)
        want = x
        for _ in range(10):
            want = np.sin(want)
        assert bits(got) == bits(want), x


def test_results_are_fresh_arrays_each_step():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [4], name="x")
        y = chain_of(tf.sin, 50)({"x": x})
        z = chain_of(tf.tanh, 5)({"x": x})  # the in-place path
        d1 = np.float32([0.1, 0.2, 0.3, 0.4])
        d2 = np.float32([1.0, 2.0, 3.0, 4.0])
        with tf.Session(graph=graph) as s:
            a1, b1 = s.run([y, z], {x: d1})
            keep = a1.copy(), b1.copy()
            a2, b2 = s.run([y, z], {x: d2})
    assert not np.shares_memory(a1, a2) and not np.shares_memory(b1, b2)
    assert bits(a1) == bits(keep[0]) and bits(b1) == bits(keep[1])  # not overwritten
    assert d1.tolist() == np.float32([0.1, 0.2, 0.3, 0.4]).tolist()  # feeds untouched
    assert not np.shares_memory(b2, d2)


def test_threads_share_no_scratch():
    chain = P._UfuncChain(np.sin, np.float32, 200)
    inputs = [np.full(4, i / 10, np.float32) for i in range(8)]
    wants = []
    for x in inputs:
        w = x
        for _ in range(200):
            w = np.sin(w)
        wants.append(w)
    errors: list[str] = []

    def work(k: int) -> None:
        for _ in range(200):
            got = chain(inputs[k])
            if got.tobytes() != wants[k].tobytes():
                errors.append(f"thread {k}")
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors and not any(t.is_alive() for t in threads)


def test_scalar_chain_keeps_the_unfused_result_type():
    fused, plain, _, _ = run_both(chain_of(tf.sin, 20), {"x": np.array(0.75, np.float32)})
    assert bits(fused) == bits(plain)


# -- mixed unary chains (in place on the chain's own arrays) ---------------------------
UNARY = {"sin": tf.sin, "cos": tf.cos, "tanh": tf.tanh, "exp": tf.exp,
         "negative": tf.negative, "abs": tf.abs, "square": tf.square, "sqrt": tf.sqrt,
         "floor": tf.floor, "sigmoid": tf.sigmoid, "log1p": tf.log1p,
         "reciprocal": tf.reciprocal, "ceil": tf.ceil}


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(sorted(UNARY)), min_size=2, max_size=14),
       st.sampled_from(FLOATS), st.data())
def test_mixed_unary_chains_fused_equal_unfused(names, dtype, data):
    x = data.draw(float_arrays(dtype))

    def build(phs: dict[str, Any]) -> Any:
        y = phs["x"]
        for n in names:
            y = UNARY[n](y)
        return y

    fused, plain, n_fused, _ = run_both(build, {"x": x})
    assert bits(fused) == bits(plain)
    assert n_fused == 2


@settings(max_examples=20, deadline=None)
@given(st.lists(st.sampled_from(["negative", "abs", "square", "invert"]), min_size=2,
                max_size=10), st.sampled_from([np.int32, np.int64]), st.data())
def test_integer_unary_chains_fused_equal_unfused(names, dtype, data):
    x = data.draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=2, max_side=4)))
    ops = {"negative": tf.negative, "abs": tf.abs, "square": tf.square,
           "invert": tf.bitwise.invert}
    before = x.copy()

    def build(phs: dict[str, Any]) -> Any:
        y = phs["x"]
        for n in names:
            y = ops[n](y)
        return y

    fused, plain, _, _ = run_both(build, {"x": x})
    assert bits(fused) == bits(plain)
    assert bits(x) == bits(before)


# -- broadcasting chains -------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(st.sampled_from(FLOATS), st.integers(1, 4), st.integers(1, 4), st.integers(0, 12),
       st.data())
def test_broadcasting_chains_fused_equal_unfused(dtype, rows, cols, n_sin, data):
    a = data.draw(hnp.arrays(dtype, (rows, 1), elements=st.floats(
        width=np.dtype(dtype).itemsize * 8, allow_subnormal=True)))
    b = data.draw(float_arrays(dtype).filter(lambda v: v.ndim == 0) |
                  hnp.arrays(dtype, (cols,), elements=st.floats(
                      width=np.dtype(dtype).itemsize * 8, allow_nan=True,
                      allow_infinity=True, allow_subnormal=True)))
    k = np.asarray([0.5, -2.0, 3.0, 1e-3][:cols] + [1.0] * (cols - min(cols, 4)), dtype)

    def build(phs: dict[str, Any]) -> Any:
        y = tf.multiply(tf.add(phs["a"], phs["b"]), tf.constant(k))
        for _ in range(n_sin):  # a same-ufunc run inside a broadcast region
            y = tf.sin(y)
        return tf.maximum(tf.cos(y), tf.negative(y))

    fused, plain, n_fused, _ = run_both(build, {"a": a, "b": b})
    assert bits(fused) == bits(plain)
    assert n_fused == 3


def test_member_errors_still_name_the_member_after_a_chain():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.int32, [2], name="x")
        z = tf.placeholder(tf.int32, [2], name="z")
        y = tf.negative(tf.negative(tf.abs(x)), name="n2")
        out = tf.abs(tf.floordiv(y, z, name="q"), name="out")
        with tf.Session(graph=graph) as s:
            assert s.run(out, {x: [3, -5], z: [2, 3]}).tolist() == [1, 1]
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=r"\[\[node q \(op FloorDiv\)"):
                s.run(out, {x: [3, 5], z: [2, 0]})
