"""The top-level ``tf.*`` ops of plugins/kernels/standard/top_level_ops.py,
top_level_specs.py and top_level_critical.py: values against numpy references, static
shapes and dtypes, error classes, gradients (numeric checker), the file ops on a
temporary directory, the type specs and CriticalSection's mutual exclusion."""
from __future__ import annotations

import os
import tempfile
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import flowrt as tf
from flowrt import errors

from _unprivileged import as_unprivileged


def run(build, feeds=None):
    g = tf.Graph()
    with g.as_default():
        out = build()
        with tf.Session() as s:
            return s.run(out, feeds)


def static(build):
    g = tf.Graph()
    with g.as_default():
        return build()


# ---------------------------------------------------------------------------------------
# parallel_stack, repeat
# ---------------------------------------------------------------------------------------
def test_parallel_stack_values_shape_and_op():
    t = static(lambda: tf.parallel_stack([tf.constant([1., 2.]), tf.constant([3., 4.])]))
    assert t.shape.as_list() == [2, 2] and t.op.type == "ParallelConcat"
    assert t.op.name == "parallel_stack/ParallelConcat"
    np.testing.assert_array_equal(
        run(lambda: tf.parallel_stack([np.arange(3), np.arange(3) * 2])),
        np.stack([np.arange(3), np.arange(3) * 2]))


def test_parallel_stack_needs_a_static_shape_and_has_no_gradient():
    with pytest.raises(ValueError, match="fully defined"):
        static(lambda: tf.parallel_stack([tf.placeholder(tf.float32, [None])]))
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.])
        with pytest.raises(LookupError):
            tf.gradients(tf.parallel_stack([x]), [x])


@settings(max_examples=25, deadline=None)
@given(hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4)),
       st.integers(0, 3), st.data())
def test_repeat_matches_numpy(x, reps, data):
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)))
    n = x.size if axis is None else x.shape[axis]
    vec = data.draw(st.booleans())
    r = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)),
                 np.int32) if vec else reps
    np.testing.assert_array_equal(run(lambda: tf.repeat(x, r, axis=axis)),
                                  np.repeat(x, r, axis=axis))


def test_repeat_static_shapes_and_scalar_input():
    assert static(lambda: tf.repeat(tf.zeros([2, 3]), 2, axis=1)).shape.as_list() == [2, 6]
    assert static(lambda: tf.repeat(tf.zeros([2, 3]), [1, 2], axis=0)).shape.as_list() == \
        [None, 3]
    np.testing.assert_array_equal(run(lambda: tf.repeat(3, 4)), [3, 3, 3, 3])
    with pytest.raises(ValueError):
        static(lambda: tf.repeat(tf.zeros([2, 3]), [1, 2, 3], axis=0))


def test_repeat_gradient():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [2, 3])
        y = tf.repeat(x, [2, 0, 1], axis=1)
        with tf.Session():
            err = tf.test.compute_gradient_error(x, [2, 3], y, [2, 3],
                                                 x_init_value=np.arange(6.).reshape(2, 3))
    assert err < 1e-6


# ---------------------------------------------------------------------------------------
# switch_case
# ---------------------------------------------------------------------------------------
def test_switch_case_runs_only_the_taken_branch():
    calls = []

    def branch(v):
        def f():
            return tf.py_func(lambda: calls.append(v) or np.int32(v), [], tf.int32)
        return f

    g = tf.Graph()
    with g.as_default():
        i = tf.placeholder(tf.int32, [])
        out = tf.switch_case(i, [branch(10), branch(20)], default=branch(-1))
        with tf.Session() as s:
            got = [s.run(out, {i: k}) for k in (0, 1, 2, -5)]
    assert got == [10, 20, -1, -1]
    assert calls == [10, 20, -1, -1]


def test_switch_case_dict_pairs_and_errors():
    fns = {1: lambda: tf.constant(1), 0: lambda: tf.constant(0)}
    assert run(lambda: [tf.switch_case(tf.constant(k), fns) for k in (0, 1, 7)]) == [0, 1, 1]
    pairs = [(1, lambda: tf.constant(1.0)), (0, lambda: tf.constant(0.0))]
    assert run(lambda: tf.switch_case(tf.constant(0), pairs)) == 0.0
    with pytest.raises(TypeError, match="must be a Tensor"):
        static(lambda: tf.switch_case(0, [lambda: tf.constant(1)]))
    with pytest.raises(TypeError, match="integer"):
        static(lambda: tf.switch_case(tf.constant(0.5), [lambda: tf.constant(1)]))
    with pytest.raises(ValueError, match="contiguous"):
        static(lambda: tf.switch_case(tf.constant(0), {0: lambda: 1, 2: lambda: 2}))
    with pytest.raises(ValueError, match="at least one"):
        static(lambda: tf.switch_case(tf.constant(0), []))


# ---------------------------------------------------------------------------------------
# batch_scatter_update
# ---------------------------------------------------------------------------------------
def test_batch_scatter_update():
    idx = np.array([[[1, 3], [0, 2]], [[2, 2], [3, 0]]], np.int32)  # [2, 2, 2]
    upd = np.arange(8, dtype=np.float32).reshape(2, 2, 2) + 1
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.zeros([2, 2, 4], np.float32))
        op = tf.batch_scatter_update(v, idx, upd)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got = s.run(op)
            assert op.dtype.base_dtype == tf.float32
    want = np.zeros([2, 2, 4], np.float32)
    for i in range(2):
        for j in range(2):
            for k in range(2):
                want[i, j, idx[i, j, k]] = upd[i, j, k]
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="unknown shape"):
        static(lambda: tf.batch_scatter_update(tf.Variable(np.zeros([2, 2])),
                                               tf.placeholder(tf.int32), [1.0]))


# ---------------------------------------------------------------------------------------
# extract_volume_patches
# ---------------------------------------------------------------------------------------
def _volume_patches_ref(x, k, s, padding):
    b, p, r, c, d = x.shape
    pads, outs = [], []
    for size, kk, ss in zip((p, r, c), k, s):
        if padding == "SAME":
            o = -(-size // ss)
            need = max(0, (o - 1) * ss + kk - size)
            pads.append((need // 2, need - need // 2))
        else:
            o = (size - kk) // ss + 1
            pads.append((0, 0))
        outs.append(o)
    xp = np.pad(x, [(0, 0)] + pads + [(0, 0)])
    out = np.zeros([b] + outs + [k[0] * k[1] * k[2] * d], x.dtype)
    for i in range(outs[0]):
        for j in range(outs[1]):
            for m in range(outs[2]):
                blk = xp[:, i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1],
                         m * s[2]:m * s[2] + k[2], :]
                out[:, i, j, m] = blk.reshape(b, -1)
    return out


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("k,s", [((2, 2, 3), (1, 2, 2)), ((1, 1, 1), (1, 1, 1)),
                                 ((3, 1, 2), (2, 3, 1))])
def test_extract_volume_patches(padding, k, s):
    x = np.arange(2 * 3 * 4 * 5 * 2, dtype=np.float32).reshape(2, 3, 4, 5, 2)
    t = static(lambda: tf.extract_volume_patches(x, [1, *k, 1], [1, *s, 1], padding))
    want = _volume_patches_ref(x, k, s, padding)
    assert t.shape.as_list() == list(want.shape)
    np.testing.assert_array_equal(
        run(lambda: tf.extract_volume_patches(x, [1, *k, 1], [1, *s, 1], padding)), want)


def test_extract_volume_patches_errors_and_gradient():
    with pytest.raises(ValueError, match="rank 5"):
        static(lambda: tf.extract_volume_patches(tf.zeros([2, 3, 4, 5]), [1] * 5, [1] * 5,
                                                 "SAME"))
    with pytest.raises(ValueError, match="planes, rows and columns"):
        static(lambda: tf.extract_volume_patches(tf.zeros([1, 2, 2, 2, 1]), [2, 1, 1, 1, 1],
                                                 [1] * 5, "SAME"))
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [1, 2, 3, 3, 2])
        y = tf.extract_volume_patches(x, [1, 2, 2, 2, 1], [1, 1, 2, 1, 1], "SAME")
        ys = y.shape.as_list()
        with tf.Session():
            err = tf.test.compute_gradient_error(
                x, [1, 2, 3, 3, 2], y, ys,
                x_init_value=np.random.default_rng(0).normal(size=[1, 2, 3, 3, 2]))
    assert err < 1e-6


# ---------------------------------------------------------------------------------------
# edit_distance
# ---------------------------------------------------------------------------------------
def _lev(a, b):
    d = np.arange(len(b) + 1)
    for i, x in enumerate(a, 1):
        prev, d[0] = d.copy(), i
        for j, y in enumerate(b, 1):
            d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + (x != y))
    return int(d[-1])


def _sparse_of(seqs):
    ind, vals = [], []
    for i, s in enumerate(seqs):
        for j, v in enumerate(s):
            ind.append([i, j])
            vals.append(v)
    width = max([len(s) for s in seqs] + [1])
    return (np.array(ind, np.int64).reshape(-1, 2), np.array(vals, np.int32),
            np.array([len(seqs), width], np.int64))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 3), max_size=5),
                          st.lists(st.integers(0, 3), max_size=5)), min_size=1, max_size=4),
       st.booleans())
def test_edit_distance_matches_reference(pairs, normalize):
    hyp, tru = [p[0] for p in pairs], [p[1] for p in pairs]
    got = run(lambda: tf.edit_distance(tf.SparseTensor(*_sparse_of(hyp)),
                                       tf.SparseTensor(*_sparse_of(tru)), normalize))
    want = []
    for h, t in zip(hyp, tru):
        if not h and not t:
            want.append(0.0)
        elif not t:
            want.append(np.inf if normalize else len(h))
        elif not h:
            want.append(1.0 if normalize else len(t))
        else:
            d = _lev(t, h)
            want.append(d / len(t) if normalize else d)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.array(want, np.float32), rtol=1e-6)


def test_edit_distance_shapes_and_errors():
    h = tf.SparseTensorValue([[0, 0, 0], [1, 0, 0]], ["a", "b"], [2, 1, 1])
    t = tf.SparseTensorValue([[0, 1, 0], [1, 0, 0], [1, 0, 1]], ["a", "b", "c"], [2, 2, 4])
    out = static(lambda: tf.edit_distance(h, t))
    assert out.shape.as_list() == [2, 2] and out.dtype == tf.float32
    np.testing.assert_allclose(run(lambda: tf.edit_distance(h, t)),
                               [[np.inf, 1.0], [0.5, 0.0]])
    with pytest.raises(TypeError, match="Hypothesis must be a SparseTensor"):
        static(lambda: tf.edit_distance(tf.constant([1]), t))
    with pytest.raises(ValueError, match="does not match truth_shape"):
        static(lambda: tf.edit_distance(tf.SparseTensor([[0, 0]], ["a"], [1, 1]),
                                        tf.SparseTensor([[0, 0, 0]], ["a"], [1, 1, 1])))
    with pytest.raises(errors.InternalError, match="outside of the buffer"):
        run(lambda: tf.edit_distance(tf.SparseTensor([[0, 5]], ["a"], [1, 1]),
                                     tf.SparseTensor([[3, 0]], ["a"], [1, 1])))
    with pytest.raises(errors.InvalidArgumentError, match="rank at least 2"):
        run(lambda: tf.edit_distance(
            tf.SparseTensor(tf.placeholder_with_default(np.zeros([1, 1], np.int64), None),
                            ["a"], tf.placeholder_with_default(np.array([1], np.int64),
                                                               None)),
            tf.SparseTensor(tf.placeholder_with_default(np.zeros([1, 1], np.int64), None),
                            ["a"], tf.placeholder_with_default(np.array([1], np.int64),
                                                               None))))


# ---------------------------------------------------------------------------------------
# random_poisson, timestamp, is_symbolic_tensor, vectorized_map
# ---------------------------------------------------------------------------------------
def test_random_poisson_shapes_dtypes_and_seeding():
    t = static(lambda: tf.random_poisson([1.0, 5.0], [3, 4], seed=1))
    assert t.shape.as_list() == [3, 4, 2] and t.dtype == tf.float32
    assert static(lambda: tf.random.poisson(tf.constant([[2.]]), [2], dtype=tf.int64)).dtype \
        == tf.int64
    a = run(lambda: tf.random_poisson([1.0, 50.0], [4000], seed=3))
    b = run(lambda: tf.random_poisson([1.0, 50.0], [4000], seed=3))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a.mean(axis=0), [1.0, 50.0], rtol=0.05)
    assert np.all(a == np.round(a)) and np.all(a >= 0)


def test_timestamp_and_is_symbolic_tensor():
    before = time.time()
    ts = run(lambda: tf.timestamp())
    assert ts.dtype == np.float64 and before - 1 <= ts <= time.time() + 1
    g = tf.Graph()
    with g.as_default():
        assert tf.is_symbolic_tensor(tf.constant(1))
        assert not tf.is_symbolic_tensor(np.ones(2))
        assert not tf.is_symbolic_tensor(tf.Variable(1.0))


def test_vectorized_map():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_allclose(run(lambda: tf.vectorized_map(lambda r: tf.reduce_sum(r) * 2,
                                                             x)), x.sum(1) * 2)
    out = run(lambda: tf.vectorized_map(lambda e: (e[0] + 1, tf.cast(e[1], tf.int64)),
                                        (x, np.arange(3, dtype=np.int32))))
    np.testing.assert_allclose(out[0], x + 1)
    assert out[1].dtype == np.int64

    def closure():
        w = tf.constant([1.0, 10.0])
        return tf.vectorized_map(lambda r: tf.reduce_sum(r * w), x)
    np.testing.assert_allclose(run(closure), x @ np.array([1.0, 10.0]))


# ---------------------------------------------------------------------------------------
# read_file, write_file, matching_files
# ---------------------------------------------------------------------------------------
def test_write_read_and_match_files(tmp_path):
    path = str(tmp_path / "sub" / "dir" / "a.txt")
    run(lambda: tf.write_file(path, "hello"))
    assert open(path, "rb").read() == b"hello"
    assert not [n for n in os.listdir(os.path.dirname(path)) if n.startswith(".tmp")]
    assert run(lambda: tf.read_file(path)) == b"hello"
    assert run(lambda: tf.io.read_file(tf.constant(path))) == b"hello"
    (tmp_path / "sub" / "dir" / "b.txt").write_bytes(b"x")
    (tmp_path / "sub" / "dir" / ".hidden.txt").write_bytes(b"x")
    (tmp_path / "sub" / "c.bin").write_bytes(b"x")
    got = run(lambda: tf.matching_files(str(tmp_path / "sub" / "*" / "*.txt")))
    assert list(got) == sorted(os.path.join(str(tmp_path), "sub", "dir", n).encode()
                               for n in (".hidden.txt", "a.txt", "b.txt"))
    both = run(lambda: tf.io.matching_files([str(tmp_path / "sub" / "*.bin"),
                                             str(tmp_path / "sub" / "dir" / "a*")]))
    assert both.tolist() == sorted(both.tolist()) and len(both) == 2
    assert run(lambda: tf.matching_files(str(tmp_path / "nothing*"))).shape == (0,)


def test_file_errors_name_the_file(tmp_path):
    missing = str(tmp_path / "missing")
    with pytest.raises(errors.NotFoundError, match="missing"):
        run(lambda: tf.read_file(missing))
    with pytest.raises(errors.FailedPreconditionError, match="Is a directory"):
        run(lambda: tf.read_file(str(tmp_path)))
    with pytest.raises(errors.FailedPreconditionError, match="Is a directory"):
        run(lambda: tf.write_file(str(tmp_path), "x"))
    # a directory anyone may enter but no one may write to: as root, the check runs as
    # nobody (root ignores permissions)
    with tempfile.TemporaryDirectory() as d:
        locked = os.path.join(d, "locked")
        os.mkdir(locked)
        os.chmod(d, 0o755)
        os.chmod(locked, 0o555)

        def check():
            with pytest.raises(errors.PermissionDeniedError, match="locked"):
                run(lambda: tf.write_file(os.path.join(locked, "f"), "x"))

        try:
            as_unprivileged(check)
        finally:
            os.chmod(locked, 0o700)
    with pytest.raises(ValueError, match="rank 0"):
        static(lambda: tf.read_file(["a", "b"]))
    with pytest.raises(ValueError, match="at most rank 1"):
        static(lambda: tf.matching_files([["a"]]))


# ---------------------------------------------------------------------------------------
# serialize_tensor / parse_tensor
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [
    np.float32(3.5), np.arange(6, dtype=np.int64).reshape(2, 3), np.array([True, False]),
    np.array([b"a", b"bc"], object), np.array([1 + 2j], np.complex64),
    np.zeros([0, 2], np.float64), np.array([1.5, -2], np.float16)])
def test_serialize_parse_round_trip(value):
    dt = tf.as_dtype(np.asarray(value).dtype) if np.asarray(value).dtype != object \
        else tf.string
    got = run(lambda: tf.parse_tensor(tf.serialize_tensor(tf.constant(value, dtype=dt)), dt))
    np.testing.assert_array_equal(got, value)
    assert np.shape(got) == np.shape(value)


def test_serialized_bytes_are_a_tensor_proto_and_errors():
    raw = run(lambda: tf.serialize_tensor(tf.constant([[1.5, 2.0]])))
    assert raw == (b'\x08\x01\x12\x08\x12\x02\x08\x01\x12\x02\x08\x02"\x08'
                   b'\x00\x00\xc0?\x00\x00\x00@')
    assert static(lambda: tf.parse_tensor("x", tf.float32)).shape.ndims is None
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"Type mismatch between parsed tensor \(float\) and dtype "
                             r"\(int32\)"):
        run(lambda: tf.parse_tensor(tf.serialize_tensor(tf.constant(1.0)), tf.int32))
    with pytest.raises(errors.InvalidArgumentError, match="Could not parse"):
        run(lambda: tf.parse_tensor("garbage\xff", tf.int32))


# ---------------------------------------------------------------------------------------
# type specs
# ---------------------------------------------------------------------------------------
def test_tensor_spec():
    g = tf.Graph()
    with g.as_default():
        s = tf.TensorSpec([None, 3], tf.float32)
        assert repr(s) == "TensorSpec(shape=(?, 3), dtype=tf.float32, name=None)"
        assert s == tf.TensorSpec([None, 3]) and s != tf.TensorSpec([None, 3], name="x")
        assert hash(s) == hash(tf.TensorSpec([None, 3]))
        x = tf.zeros([2, 3], name="zz")
        assert s.is_compatible_with(x) and not s.is_compatible_with(tf.zeros([2, 4]))
        assert not s.is_compatible_with(tf.zeros([2, 3], tf.int32))
        assert tf.TensorSpec.from_tensor(x) == tf.TensorSpec([2, 3], tf.float32, "zz")
        assert tf.TensorSpec.from_spec(s, "n").name == "n"
        assert s.most_specific_compatible_type(tf.TensorSpec([4, 3])) == s
        with pytest.raises(ValueError):
            s.most_specific_compatible_type(tf.TensorSpec([1], tf.int32))
        assert isinstance(s, tf.TypeSpec) and s.value_type is tf.Tensor
        assert tf.type_spec_from_value(x) == tf.TensorSpec([2, 3])
        assert tf.type_spec_from_value([1, 2]) == tf.TensorSpec([2], tf.int32)
        with pytest.raises(TypeError):
            tf.type_spec_from_value(object())


def test_composite_specs():
    g = tf.Graph()
    with g.as_default():
        sp = tf.SparseTensor([[0, 0]], [1.0], [2, 3])
        spec = tf.type_spec_from_value(sp)
        assert spec == tf.SparseTensorSpec([2, 3], tf.float32)
        assert spec.is_compatible_with(tf.SparseTensorSpec([None, 3]))
        assert not spec.is_compatible_with(tf.TensorSpec([2, 3]))
        assert repr(tf.SparseTensorSpec([2, None], tf.int32)) == \
            "SparseTensorSpec(TensorShape([Dimension(2), Dimension(None)]), tf.int32)"
        ix = tf.IndexedSlicesSpec([5, 2])
        assert ix.dtype == tf.float32 and ix.value_type is tf.IndexedSlices
        ta = tf.TensorArray(tf.int32, size=2, element_shape=[3])
        assert tf.type_spec_from_value(ta) == tf.TensorArraySpec([3], tf.int32)


# ---------------------------------------------------------------------------------------
# CriticalSection
# ---------------------------------------------------------------------------------------
def _concurrency(with_cs):
    state = {"in": 0, "max": 0}
    lk = threading.Lock()

    def body(x):
        with lk:
            state["in"] += 1
            state["max"] = max(state["max"], state["in"])
        time.sleep(0.02)
        with lk:
            state["in"] -= 1
        return x

    g = tf.Graph()
    with g.as_default():
        cs = tf.CriticalSection(name="cs")
        v = tf.Variable(0, name="v")

        def fn():
            r = tf.py_func(body, [tf.identity(v)], tf.int32)
            with tf.control_dependencies([r]):
                return tf.identity(v.assign_add(1))

        out = cs.execute(fn) if with_cs else fn()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            ths = [threading.Thread(target=lambda: [s.run(out) for _ in range(3)])
                   for _ in range(3)]
            for t in ths:
                t.start()
            for t in ths:
                t.join()
            return s.run(v), state["max"], cs


def test_critical_section_excludes_concurrent_runs():
    total, most, cs = _concurrency(True)
    assert total == 9 and most == 1
    assert cs.name == "cs"


def test_critical_section_structure_errors_and_release_on_failure():
    g = tf.Graph()
    with g.as_default():
        cs = tf.CriticalSection()
        pair = cs.execute(lambda: (tf.constant(1), {"a": tf.constant(2.0)}))
        with pytest.raises(ValueError, match="already running"):
            cs.execute(lambda: cs.execute(lambda: tf.constant(1)))
        flag = tf.placeholder(tf.bool, [])
        bad = cs.execute(lambda: tf.py_func(
            lambda f: (_ for _ in ()).throw(RuntimeError("boom")) if f else np.int32(1),
            [flag], tf.int32))
        with tf.Session() as s:
            assert s.run(pair) == (1, {"a": 2.0})
            with pytest.raises(errors.OpError):
                s.run(bad, {flag: True})
            assert s.run(bad, {flag: False}) == 1  # the failed step gave the lock back
            assert s.run(pair) == (1, {"a": 2.0})
