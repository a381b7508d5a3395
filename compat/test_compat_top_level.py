"""Top-level ``tf.*`` names of helper M (top_level_ops, quantize_ops, top_level_specs,
top_level_critical) run under TensorFlow and flowrt: values, dtypes, static shapes, op
names and types, error classes.

Where TF 2.x and TF 1.15 differ, TF 1.15 wins and the comparison says why:
- fake quantization: TF 2.x computes ``x * ((quant_max - quant_min) / (max - min))``
  where TF 1.15 multiplies by ``1 / scale`` (Args) or divides by the scale (Vars), and
  TF 2.x's build fuses multiply-adds; results differ in the last float32 bit, so they are
  compared with a 1e-6 tolerance;
- Dequantize MIN_FIRST differs the same way (1-2 float32 ulps);
- ``TensorSpec.is_compatible_with`` of a numpy array: TF 1.15 compares its dtype and shape
  (True for a matching array), TF 2.x says False; not compared.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

from compat_harness import Run, Steps, run_both, run_custom

X = np.array([-7.3, -4.0, -1.26, -0.5, 0.0, 0.37, 1.5, 2.5, 4.99, 6.2], np.float32)
TMP = tempfile.mkdtemp(prefix="flowrt_compat_top_")


def _progs(d: dict) -> list:
    return [pytest.param(v, id=k) for k, v in sorted(d.items())]


def _sparse(tf, ind, vals, shape):
    return tf.SparseTensor(np.array(ind, np.int64), vals, np.array(shape, np.int64))


ARRAY = {
    "parallel_stack": lambda tf: tf.parallel_stack([tf.constant([1., 2.]),
                                                    tf.constant([3., 4.])]),
    "parallel_stack_ints": lambda tf: tf.parallel_stack([np.arange(3), np.arange(3) * 2]),
    "parallel_stack_unknown": lambda tf: tf.parallel_stack([tf.placeholder(tf.float32,
                                                                           [None])]),
    "repeat_scalar": lambda tf: tf.repeat(tf.constant([[1, 2], [3, 4]]), 2, axis=1),
    "repeat_vector": lambda tf: tf.repeat(tf.constant([[1, 2], [3, 4]]), [1, 3], axis=0),
    "repeat_flat": lambda tf: tf.repeat(tf.constant([[1, 2], [3, 4]]), 2),
    "repeat_scalar_input": lambda tf: tf.repeat(3, 4),
    "repeat_zero": lambda tf: tf.repeat(tf.constant([1.0, 2.0]), [0, 2]),
    "volume_same": lambda tf: tf.extract_volume_patches(
        np.arange(240, dtype=np.float32).reshape(2, 3, 4, 5, 2), [1, 2, 2, 3, 1],
        [1, 1, 2, 2, 1], "SAME"),
    "volume_valid": lambda tf: tf.extract_volume_patches(
        np.arange(240, dtype=np.float32).reshape(2, 3, 4, 5, 2), [1, 2, 2, 3, 1],
        [1, 1, 2, 2, 1], "VALID"),
    "volume_int": lambda tf: tf.extract_volume_patches(
        np.arange(48, dtype=np.int32).reshape(1, 2, 4, 3, 2), [1, 1, 3, 2, 1],
        [1, 2, 1, 1, 1], "SAME"),
    "volume_bad_rank": lambda tf: tf.extract_volume_patches(tf.zeros([1, 2, 2, 2]),
                                                            [1] * 5, [1] * 5, "SAME"),
}


@pytest.mark.parametrize("program", _progs(ARRAY))
def test_array_ops(program):
    run_both(program)


def _volume_grad(tf):
    x = tf.constant(np.arange(36, dtype=np.float64).reshape(1, 2, 3, 3, 2))
    y = tf.extract_volume_patches(x, [1, 2, 2, 2, 1], [1, 1, 2, 1, 1], "SAME")
    return tf.gradients(tf.reduce_sum(y * y), x)[0]


def _repeat_grad(tf):
    x = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    return tf.gradients(tf.reduce_sum(tf.repeat(x, [2, 0, 1], axis=1) ** 2), x)[0]


@pytest.mark.parametrize("program", _progs({"volume": _volume_grad, "repeat": _repeat_grad}))
def test_gradients(program):
    run_both(program, static=False)


def _switch(tf):
    i = tf.placeholder(tf.int32, [])
    out = tf.switch_case(i, [lambda: tf.constant(10), lambda: tf.constant(20)],
                         default=lambda: tf.constant(-1))
    return Steps(*[Run(out, {i: k}) for k in (0, 1, 2, -3)])


def _switch_dict(tf):
    i = tf.placeholder(tf.int32, [])
    out = tf.switch_case(i, {1: lambda: (tf.constant(1.0), tf.constant([1])),
                             0: lambda: (tf.constant(0.0), tf.constant([0]))})
    return Steps(*[Run(list(out), {i: k}) for k in (0, 1, 9)])


CONTROL = {
    "switch_case": _switch,
    "switch_case_dict": _switch_dict,
    "switch_case_not_tensor": lambda tf: tf.switch_case(1, [lambda: tf.constant(1)]),
    "switch_case_keys": lambda tf: tf.switch_case(tf.constant(0), {0: lambda: 1,
                                                                   2: lambda: 2}),
}


@pytest.mark.parametrize("program", _progs(CONTROL))
def test_switch_case(program):
    run_both(program, static=False)


def _batch_scatter(tf):
    v = tf.Variable(np.zeros([2, 2, 4], np.float32), name="v")
    idx = np.array([[[1, 3], [0, 2]], [[2, 2], [3, 0]]], np.int32)
    op = tf.batch_scatter_update(v, idx, np.arange(8, dtype=np.float32).reshape(2, 2, 2))
    return Steps(Run(tf.global_variables_initializer()), Run(op), Run(v))


def test_batch_scatter_update():
    run_both(_batch_scatter)


H = ([[0, 0, 0], [1, 0, 0]], ["a", "b"], [2, 1, 1])
T = ([[0, 1, 0], [1, 0, 0], [1, 0, 1], [1, 0, 2], [1, 0, 3]], ["a", "b", "c", "a", "x"],
     [2, 2, 4])
EDIT = {
    "normalized": lambda tf: tf.edit_distance(_sparse(tf, *H), _sparse(tf, *T)),
    "raw": lambda tf: tf.edit_distance(_sparse(tf, *H), _sparse(tf, *T), normalize=False),
    "ints": lambda tf: tf.edit_distance(
        _sparse(tf, [[0, 0], [0, 1], [1, 0]], np.array([1, 2, 3], np.int32), [2, 2]),
        _sparse(tf, [[0, 0], [1, 0], [1, 1]], np.array([1, 3, 4], np.int32), [2, 2])),
    "unsorted": lambda tf: tf.edit_distance(_sparse(tf, [[1, 0], [0, 0]], ["a", "b"], [2, 1]),
                                            _sparse(tf, [[0, 0]], ["a"], [2, 1])),
    "out_of_bounds": lambda tf: tf.edit_distance(_sparse(tf, [[0, 5]], ["a"], [1, 1]),
                                                 _sparse(tf, [[3, 0]], ["a"], [1, 1])),
    "rank_mismatch": lambda tf: tf.edit_distance(_sparse(tf, [[0, 0]], ["a"], [1, 1]),
                                                 _sparse(tf, [[0, 0, 0]], ["a"], [1, 1, 1])),
    "not_sparse": lambda tf: tf.edit_distance(tf.constant([1]), _sparse(tf, *T)),
    "fed_shape": lambda tf: tf.edit_distance(
        tf.SparseTensor(tf.placeholder_with_default(np.array(H[0], np.int64), [None, 3]),
                        H[1], tf.placeholder_with_default(np.array(H[2], np.int64), [3])),
        _sparse(tf, *T)),
}


@pytest.mark.parametrize("program", _progs(EDIT))
def test_edit_distance(program):
    run_both(program)


def _path(name: str) -> str:
    return os.path.join(TMP, name)


def _files(tf):
    w = tf.write_file(_path("d/sub/a.txt"), "hello")
    w2 = tf.io.write_file(_path("d/b.txt"), tf.constant(b"\x00\xff"))
    r = tf.read_file(_path("d/sub/a.txt"))
    m = tf.matching_files(_path("d/*/*.txt"))
    m2 = tf.io.matching_files([_path("d/*.txt"), _path("d/sub/a*")])
    return Steps(Run(w), Run(w2), Run([r, tf.io.read_file(_path("d/b.txt"))]),
                 Run(m), Run(m2), Run(tf.matching_files(_path("nothing*"))))


FILES = {
    "write_read_match": _files,
    "read_missing": lambda tf: tf.read_file(_path("missing")),
    "read_directory": lambda tf: tf.read_file(TMP),
    "write_directory": lambda tf: tf.write_file(TMP, "x"),
    "read_not_scalar": lambda tf: tf.read_file(["a", "b"]),
    "match_rank2": lambda tf: tf.matching_files([["a"]]),
}


@pytest.mark.parametrize("program", _progs(FILES))
def test_file_ops(program):
    run_both(program)


SERIAL = {
    "floats": lambda tf: tf.serialize_tensor(tf.constant([[1.5, 2.0]])),
    "scalar": lambda tf: tf.serialize_tensor(tf.constant(3)),
    "strings": lambda tf: tf.serialize_tensor(tf.constant(["a", "bc"])),
    "bools": lambda tf: tf.io.serialize_tensor(tf.constant([True, False])),
    "int64_empty": lambda tf: tf.serialize_tensor(tf.zeros([0, 3], tf.int64)),
    "half": lambda tf: tf.serialize_tensor(tf.constant([1.5, -2.0], tf.float16)),
    "round_trip": lambda tf: tf.parse_tensor(tf.serialize_tensor(tf.constant([[1.5, 2.]])),
                                             tf.float32),
    "round_trip_strings": lambda tf: tf.io.parse_tensor(
        tf.serialize_tensor(tf.constant([["x"], ["yz"]])), tf.string),
    "type_mismatch": lambda tf: tf.parse_tensor(tf.serialize_tensor(tf.constant(1.0)),
                                                tf.int32),
    "garbage": lambda tf: tf.parse_tensor("garbage\xff", tf.int32),
}


@pytest.mark.parametrize("program", _progs(SERIAL))
def test_serialize_parse(program):
    run_both(program)


def _poisson(tf):
    return [tf.random_poisson([1.0, 5.0], [3, 4], seed=1),
            tf.random.poisson(tf.constant([[2.0]]), [2], dtype=tf.int64, seed=2),
            tf.random_poisson(np.array([3.0], np.float64), [5], dtype=tf.float64)]


def _poisson_moments(tf, results):
    a = results[0]
    assert np.all(a[0] >= 0) and np.all(a[0] == np.round(a[0]))


def test_random_poisson():
    run_both(_poisson, values=False, check=_poisson_moments)


def test_timestamp_and_is_symbolic_tensor():
    run_both(lambda tf: tf.timestamp(), values=False)
    run_custom(lambda tf: [tf.is_symbolic_tensor(tf.constant(1)),
                           tf.is_symbolic_tensor(np.ones(2)),
                           tf.is_symbolic_tensor(tf.Variable(1.0))])


def _vmap(tf):
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    return [tf.vectorized_map(lambda r: tf.reduce_sum(r) * 2, x),
            tf.vectorized_map(lambda r: r * tf.constant([1.0, 10.0]), x)]


def test_vectorized_map():
    run_both(_vmap, static=False)


def _q(tf, T, mode, lo=-4.0, hi=5.0, x=X):
    dt = getattr(tf, T)
    bits = {"qint8": tf.int8, "quint8": tf.uint8, "qint16": tf.int16, "quint16": tf.uint16,
            "qint32": tf.int32}[T]
    r = tf.quantize(x, lo, hi, dt, mode=mode)
    d = tf.dequantize(r.output, r.output_min, r.output_max, mode=mode)
    return [tf.bitcast(r.output, bits), r.output_min, r.output_max, d]


QUANT = {f"{T}_{mode}_{lo}_{hi}": (lambda tf, T=T, mode=mode, lo=lo, hi=hi:
                                   _q(tf, T, mode, lo, hi))
         for T in ("qint8", "quint8", "qint16", "quint16", "qint32")
         for mode in ("MIN_COMBINED", "MIN_FIRST", "SCALED")
         for lo, hi in ((-4.0, 5.0), (0.0, 6.0), (1.0, 3.0), (0.0, 0.0))}


@pytest.mark.parametrize("program", _progs(QUANT))
def test_quantize_dequantize(program):
    # Dequantize MIN_FIRST: 1-2 float32 ulps (see the module docstring); qint32 values
    # are integers near 2^31 whose float32 products differ in the last bit
    run_both(program, rtol=1e-6, atol=1e-6, static=False)


QUANT_MORE = {
    "half_to_even": lambda tf: tf.bitcast(tf.quantize(
        np.array([0.5, 1.5, 2.5, -0.5, -1.5], np.float32), -127., 127., tf.qint8,
        mode="SCALED", round_mode="HALF_TO_EVEN").output, tf.int8),
    "half_to_even_bad_mode": lambda tf: tf.quantize(X, -1., 1., tf.qint8,
                                                    round_mode="HALF_TO_EVEN"),
    "bad_range": lambda tf: tf.quantize(X, 1., -1., tf.qint8),
    "static": lambda tf: list(tf.quantization.quantize(tf.zeros([2, 3]), 0., 1., tf.quint8)),
    "quantize_v2": lambda tf: tf.bitcast(tf.quantize_v2(X, -4., 5., tf.quint8).output,
                                         tf.uint8),
}


@pytest.mark.parametrize("program", _progs(QUANT_MORE))
def test_quantize_more(program):
    run_both(program)


def _qconcat(tf, T="quint8"):
    dt = getattr(tf, T)
    bits = {"quint8": tf.uint8, "qint32": tf.int32, "qint8": tf.int8}[T]
    a = tf.quantize(X[:4].reshape(2, 2), -4., 5., dt)
    b = tf.quantize(X[4:8].reshape(2, 2), -1., 8., dt)
    c = tf.quantize(X[8:].reshape(2, 1), -4., 5., dt)
    r = tf.quantized_concat(1, [a.output, b.output, c.output],
                            [a.output_min, b.output_min, c.output_min],
                            [a.output_max, b.output_max, c.output_max])
    out = tf.bitcast(r.output, bits)
    return [tf.cast(out, tf.float64) if T == "qint32" else out, r.output_min, r.output_max]


@pytest.mark.parametrize("T", ["quint8", "qint32", "qint8"])
def test_quantized_concat(T):
    # qint32: requantized values near 0 differ by a few units of 2^32 / range (float32
    # rounding of TF 2.x's fused multiply-adds; see the module docstring)
    run_both(lambda tf: _qconcat(tf, T), rtol=1e-6, atol=64.0, static=False)


def _fq(tf, kind, bits, narrow):
    if kind == "args":
        return tf.fake_quant_with_min_max_args(X, -3.3, 5.1, num_bits=bits,
                                               narrow_range=narrow)
    if kind == "vars":
        return tf.quantization.fake_quant_with_min_max_vars(X, -3.3, 5.1, num_bits=bits,
                                                            narrow_range=narrow)
    if kind == "per_channel":
        return tf.fake_quant_with_min_max_vars_per_channel(
            X[:8].reshape(2, 4), [-4.0, -1.0, -0.5, 0.0], [5.0, 1.0, 3.0, 6.0],
            num_bits=bits, narrow_range=narrow)
    if kind == "vars_gradient":
        return list(tf.fake_quant_with_min_max_vars_gradient(
            X * 0 + 1.5, X, -3.3, 5.1, num_bits=bits, narrow_range=narrow))
    return list(tf.fake_quant_with_min_max_vars_per_channel_gradient(
        np.ones([2, 4], np.float32), X[:8].reshape(2, 4), [-4.0, -1.0, -0.5, 0.0],
        [5.0, 1.0, 3.0, 6.0], num_bits=bits, narrow_range=narrow))


FAKE = {f"{k}_{b}_{n}": (lambda tf, k=k, b=b, n=n: _fq(tf, k, b, n))
        for k in ("args", "vars", "per_channel", "vars_gradient", "pc_gradient")
        for b in (8, 4) for n in (False, True)}


@pytest.mark.parametrize("program", _progs(FAKE))
def test_fake_quant(program):
    run_both(program, rtol=1e-6, atol=1e-6)


def _fq_grads(tf):
    x = tf.constant(X)
    mn, mx = tf.constant(-3.3), tf.constant(5.1)
    y = tf.fake_quant_with_min_max_vars(x, mn, mx)
    ya = tf.fake_quant_with_min_max_args(x, -2.0, 2.0)
    return tf.gradients(tf.reduce_sum(y * 3.0), [x, mn, mx]) + \
        tf.gradients(tf.reduce_sum(ya), [x])


FAKE_MORE = {
    "gradients": _fq_grads,
    "args_bad_range": lambda tf: tf.fake_quant_with_min_max_args(X, 3.0, 1.0),
    "args_bad_bits": lambda tf: tf.fake_quant_with_min_max_args(X, num_bits=1),
    "args_gradient": lambda tf: tf.fake_quant_with_min_max_args_gradient(X * 0 + 1, X),
    "vars_not_scalar": lambda tf: tf.fake_quant_with_min_max_vars(X, [0.0, 1.0], 1.0),
}


@pytest.mark.parametrize("program", _progs(FAKE_MORE))
def test_fake_quant_more(program):
    run_both(program, rtol=1e-6, atol=1e-6)


def _specs(tf):
    s = tf.TensorSpec([None, 3], tf.float32)
    x = tf.zeros([2, 3], name="zz")
    sp = tf.SparseTensor([[0, 0]], [1.0], [2, 3])
    return [repr(s), str(s.shape), s.dtype.name, s.name,
            s == tf.TensorSpec([None, 3], tf.float32), s == tf.TensorSpec([None, 3], name="x"),
            hash(s) == hash(tf.TensorSpec([None, 3])),
            s.is_compatible_with(x), s.is_compatible_with(tf.zeros([2, 4])),
            s.is_compatible_with(tf.TensorSpec([5, 3])),
            repr(tf.TensorSpec.from_tensor(x)), repr(tf.TensorSpec.from_spec(s, "n")),
            repr(tf.type_spec_from_value(x)), repr(tf.type_spec_from_value([1, 2])),
            repr(tf.type_spec_from_value(sp)), repr(tf.SparseTensorSpec([2, None], tf.int32)),
            repr(tf.IndexedSlicesSpec([5, 2])), repr(tf.TensorArraySpec([2], tf.int32)),
            isinstance(s, tf.TypeSpec), s.value_type.__name__,
            tf.SparseTensorSpec().value_type.__name__, repr(tf.TensorSpec(None))]


def test_specs():
    run_custom(_specs)


def test_spec_errors():
    run_custom(lambda tf: tf.type_spec_from_value(object()))


def _critical(tf):
    cs = tf.CriticalSection(name="cs")
    v = tf.Variable(0, name="v")
    out = cs.execute(lambda: tf.identity(v.assign_add(1)))
    pair = cs.execute(lambda: (tf.constant(1), {"a": tf.constant(2.0)}))
    return Steps(Run(tf.global_variables_initializer()), Run(out), Run(out),
                 Run(pair), Run(v))


def test_critical_section():
    run_both(_critical, static=False)
    run_custom(lambda tf: tf.CriticalSection(name="cs").name)
    run_custom(lambda tf: (lambda cs: cs.execute(lambda: cs.execute(
        lambda: tf.constant(1))))(tf.CriticalSection()))
