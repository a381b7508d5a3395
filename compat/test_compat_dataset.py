"""tf.data in graph mode under TensorFlow and flowrt: the same pipelines give the same
elements, static types and shapes, and the same error classes.

Shuffle orders are not compared (TF's Philox stream is not reproduced); its multiset
and the reshuffle rule are."""
from __future__ import annotations

import numpy as np
import pytest

from compat_harness import run_custom


def drain(tf, nx, feed=None, init=None, limit=1000):
    """Every element until OutOfRangeError, as plain lists."""
    out = []
    with tf.Session() as s:
        if init is not None:
            s.run(init, feed)
        try:
            for _ in range(limit):
                out.append(_plain(s.run(nx)))
        except tf.errors.OutOfRangeError:
            out.append("end")
    return out


def _plain(v):
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in sorted(v.items())}
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    a = np.asarray(v)
    return [a.dtype.name if a.dtype != object else "object", a.tolist()]


def static(ds):
    """Types and shapes, as strings."""
    return [str(ds.output_types), str(ds.output_shapes)]


def one_shot(tf, ds):
    return static(ds) + drain(tf, tf.data.make_one_shot_iterator(ds).get_next())


def _progs(d):
    return [pytest.param(v, id=k) for k, v in sorted(d.items())]


X = np.arange(12, dtype=np.float32).reshape(6, 2)

PIPELINES = {
    "range": lambda tf: tf.data.Dataset.range(2, 11, 3),
    "slices_tuple": lambda tf: tf.data.Dataset.from_tensor_slices((X, np.arange(6))),
    "slices_dict": lambda tf: tf.data.Dataset.from_tensor_slices(
        {"b": np.array([b"p", b"q"]), "a": np.array([[1, 2], [3, 4]], np.int32)}),
    "slices_list": lambda tf: tf.data.Dataset.from_tensor_slices([[1, 2], [3, 4]]),
    "from_tensors": lambda tf: tf.data.Dataset.from_tensors((X, 3.5)),
    "map_batch": lambda tf: tf.data.Dataset.from_tensor_slices(X).map(
        lambda v: v * 2.0 + 1.0).batch(4),
    "map_tuple": lambda tf: tf.data.Dataset.range(5).map(
        lambda v: (v, tf.cast(v, tf.float32) / 2.0, [v, v])),
    "map_python_constant": lambda tf: tf.data.Dataset.range(3).map(lambda v: (v, 7)),
    "filter": lambda tf: tf.data.Dataset.range(12).filter(lambda v: v % 3 > 0),
    "flat_map": lambda tf: tf.data.Dataset.range(4).flat_map(
        lambda v: tf.data.Dataset.range(v)),
    "interleave_c2_b1": lambda tf: tf.data.Dataset.range(1, 4).interleave(
        lambda v: tf.data.Dataset.from_tensors(v).repeat(v), cycle_length=2, block_length=1),
    "interleave_c3_b2": lambda tf: tf.data.Dataset.range(4).interleave(
        lambda v: tf.data.Dataset.range(v * 10, v * 10 + v + 2), cycle_length=3,
        block_length=2),
    "batch_drop": lambda tf: tf.data.Dataset.range(10).batch(4, drop_remainder=True),
    "padded_batch": lambda tf: tf.data.Dataset.range(1, 6).map(
        lambda v: tf.fill([v], v)).padded_batch(2, padded_shapes=[None]),
    "padded_batch_fixed": lambda tf: tf.data.Dataset.range(1, 4).map(
        lambda v: tf.fill([v], tf.cast(v, tf.float32))).padded_batch(
        2, padded_shapes=[5], padding_values=-1.0),
    "unbatch": lambda tf: tf.data.Dataset.range(7).batch(3).unbatch(),
    "repeat_take_skip": lambda tf: tf.data.Dataset.range(4).repeat(3).skip(2).take(7),
    "zip_concat": lambda tf: tf.data.Dataset.zip(
        (tf.data.Dataset.range(3), tf.data.Dataset.range(5, 10))).concatenate(
        tf.data.Dataset.zip((tf.data.Dataset.range(1), tf.data.Dataset.range(1)))),
    "cache_repeat": lambda tf: tf.data.Dataset.range(3).cache().repeat(2),
    "prefetch": lambda tf: tf.data.Dataset.range(20).batch(3).prefetch(2),
    "shuffle_buffer1": lambda tf: tf.data.Dataset.range(8).shuffle(1),
    "batch_shapes_differ": lambda tf: tf.data.Dataset.range(1, 4).map(
        lambda v: tf.fill([v], v)).batch(2),
}


@pytest.mark.parametrize("make", _progs(PIPELINES))
def test_pipeline(make):
    run_custom(lambda tf: one_shot(tf, make(tf)))


def test_initializable_with_placeholder_and_reinit():
    def prog(tf):
        x = tf.placeholder(tf.float32, [None, 2])
        it = tf.data.make_initializable_iterator(
            tf.data.Dataset.from_tensor_slices(x).map(lambda v: v - 1.0).batch(2))
        nx = it.get_next()
        out = [str(nx.shape), nx.dtype.name]
        out += drain(tf, nx, {x: X}, it.initializer)
        out += drain(tf, nx, {x: X[:1]}, it.initializer)
        return out
    run_custom(prog)


def test_reinitializable_from_structure():
    def prog(tf):
        a = tf.data.Dataset.range(5).batch(2)
        b = tf.data.Dataset.range(100, 103).batch(2)
        it = tf.data.Iterator.from_structure(a.output_types, a.output_shapes)
        nx = it.get_next()
        ia, ib = it.make_initializer(a), it.make_initializer(b)
        res = []
        with tf.Session() as s:
            for init in (ia, ib, ia):
                s.run(init)
                res.append(s.run(nx).tolist())
        return res
    run_custom(prog)


def test_shuffle_is_permutation_and_reshuffles():
    def prog(tf):
        nx = tf.data.make_one_shot_iterator(
            tf.data.Dataset.range(30).shuffle(30, seed=4).repeat(2)).get_next()
        with tf.Session() as s:
            vals = [int(s.run(nx)) for _ in range(60)]
        return [sorted(vals[:30]) == list(range(30)), vals[:30] != vals[30:],
                sorted(vals[30:]) == list(range(30))]
    assert run_custom(prog) == [True, True, True]


ERRORS = {
    "not_initialized": lambda tf: (lambda it: tf.Session().run(it.get_next()))(
        tf.data.make_initializable_iterator(tf.data.Dataset.range(2))),
    "one_shot_placeholder": lambda tf: tf.data.make_one_shot_iterator(
        tf.data.Dataset.from_tensors(tf.placeholder(tf.float32))),
    "filter_not_bool": lambda tf: tf.data.Dataset.range(3).filter(lambda v: v),
    "concat_types": lambda tf: tf.data.Dataset.range(3).concatenate(
        tf.data.Dataset.from_tensors(1.0)),
    "slices_mismatch": lambda tf: tf.data.Dataset.from_tensor_slices(
        (np.arange(3), np.arange(4))),
    "initializer_of_one_shot": lambda tf: tf.data.make_one_shot_iterator(
        tf.data.Dataset.range(3)).initializer,
    "make_initializer_types": lambda tf: tf.data.Iterator.from_structure(
        tf.float32).make_initializer(tf.data.Dataset.range(3)),
}


@pytest.mark.parametrize("make", _progs(ERRORS))
def test_error_class(make):
    run_custom(lambda tf: make(tf))
