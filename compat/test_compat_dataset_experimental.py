"""The last tf.data.experimental names under TensorFlow (tf.compat.v1) and flowrt:
get_next_as_optional / Optional, group_by_reducer, unique, rejection_resample (its
deterministic cases), parse_example_dataset, map_and_batch_with_legacy_function,
SqlDataset (one sqlite file read by both), the options objects, and an iterator
position saved and restored with make_saveable_from_iterator."""
from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from compat_harness import run_custom
from test_compat_dataset_more import _examples, _plain, drain, one_shot


def _progs(d):
    return [pytest.param(v, id=k) for k, v in sorted(d.items())]


def _reducer(tf):
    return tf.data.experimental.Reducer(
        lambda k: (np.int64(0), k), lambda s, x: (s[0] + x, s[1]),
        lambda total, key: total * 10 + key)


PIPELINES = {
    "group_by_reducer": lambda tf: tf.data.Dataset.from_tensor_slices(
        np.array([5, 2, 7, 4, 9, 1], np.int64)).apply(
        tf.data.experimental.group_by_reducer(lambda x: 3 - x % 3, _reducer(tf))),
    "group_by_reducer_growing_state": lambda tf: tf.data.Dataset.range(7).apply(
        tf.data.experimental.group_by_reducer(lambda x: x % 3, tf.data.experimental.Reducer(
            lambda k: tf.zeros([0], tf.int64), lambda s, x: tf.concat([s, [x]], 0),
            lambda s: s))),
    "unique_int": lambda tf: tf.data.Dataset.from_tensor_slices(
        np.array([3, 1, 3, 2, 1, 0], np.int32)).apply(tf.data.experimental.unique()),
    "unique_string": lambda tf: tf.data.Dataset.from_tensor_slices(
        np.array([b"a", b"", b"a", b"b"])).apply(tf.data.experimental.unique()),
    "rejection_resample_filter_only": lambda tf: tf.data.Dataset.range(10).apply(
        tf.data.experimental.rejection_resample(
            lambda x: tf.cast(x % 2, tf.int32), [0.0, 1.0], [0.5, 0.5], seed=3)),
    "rejection_resample_identity": lambda tf: tf.data.Dataset.range(6).apply(
        tf.data.experimental.rejection_resample(
            lambda x: tf.cast(x % 3, tf.int64), [0.2, 0.3, 0.5], [0.2, 0.3, 0.5])),
    "parse_example_dataset": lambda tf: tf.data.Dataset.from_tensor_slices(
        _examples(tf)).batch(2).apply(tf.data.experimental.parse_example_dataset(
            {"ids": tf.VarLenFeature(tf.int64), "w": tf.FixedLenFeature([], tf.float32)})),
    "map_and_batch_legacy": lambda tf: tf.data.Dataset.range(7).apply(
        tf.data.experimental.map_and_batch_with_legacy_function(lambda v: v * 2, 3)),
}


@pytest.mark.parametrize("make", _progs(PIPELINES))
def test_pipeline(make):
    run_custom(lambda tf: one_shot(tf, make(tf)))


def test_get_next_as_optional():
    def prog(tf):
        it = tf.data.make_initializable_iterator(tf.data.Dataset.from_tensor_slices(
            (np.arange(3), np.array([b"a", b"b", b"c"]))))
        opt = tf.data.experimental.get_next_as_optional(it)
        val = tf.cond(opt.has_value(), opt.get_value,
                      lambda: (tf.constant(-1, tf.int64), tf.constant(b"")))
        with tf.Session() as s:
            s.run(it.initializer)
            got = [_plain(s.run(val)) for _ in range(5)]
        return got + [str(opt.element_spec if hasattr(opt, "element_spec") else None)]
    run_custom(prog)


def test_optional_values_and_empty_error():
    def prog(tf):
        some = tf.data.experimental.Optional.from_value(
            {"a": tf.constant([1.5, 2.5]), "b": tf.constant(3)})
        none = tf.data.experimental.Optional.empty(tf.TensorSpec([2], tf.float32))
        with tf.Session() as s:
            out = [_plain(s.run([some.has_value(), some.get_value()])),
                   bool(s.run(none.has_value()))]
            try:
                s.run(none.get_value())
            except tf.errors.OpError as e:
                out.append(type(e).__name__)
        return out + [isinstance(some._type_spec, tf.data.experimental.OptionalStructure),
                      isinstance(some._type_spec, tf.data.experimental.Structure)]
    run_custom(prog)


def test_structures():
    def prog(tf):
        ta = tf.data.experimental.TensorArrayStructure(tf.float32, [2], True, False)
        return [type(ta).__name__, ta == tf.TensorArraySpec([2], tf.float32, True, False),
                issubclass(tf.data.experimental.OptionalStructure,
                           tf.data.experimental.Structure)]
    run_custom(prog)


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "people.db")
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE people (name TEXT, age INTEGER, score REAL, ok INTEGER)")
    c.executemany("INSERT INTO people VALUES (?, ?, ?, ?)",
                  [("ann", 31, 1.5, 1), ("bob", 22, 3.0, 0), ("cy", 7, 2.0, 5)])
    c.commit()
    c.close()
    return path


def test_sql_dataset(db):
    def prog(tf):
        ds = tf.data.experimental.SqlDataset(
            "sqlite", db, "SELECT name, age, score, ok FROM people ORDER BY age",
            (tf.string, tf.int32, tf.float64, tf.bool))
        one = tf.data.experimental.SqlDataset("sqlite", db, "SELECT age FROM people",
                                              tf.int64)
        return [one_shot(tf, ds), one_shot(tf, one)]
    run_custom(prog)


SQL_ERRORS = {
    "driver": ("mysql", "SELECT age FROM people"),
    "columns": ("sqlite", "SELECT age, name FROM people"),
    "bad_query": ("sqlite", "SELECT nope FROM people"),
}


@pytest.mark.parametrize("case", list(SQL_ERRORS))
def test_sql_dataset_errors(db, case):
    driver, query = SQL_ERRORS[case]

    def prog(tf):
        return one_shot(tf, tf.data.experimental.SqlDataset(driver, db, query, tf.int32))
    run_custom(prog)


def test_options_objects():
    def prog(tf):
        a = tf.data.Options()
        a.experimental_optimization.map_fusion = True
        a.experimental_threading.private_threadpool_size = 2
        b = tf.data.Options()
        b.experimental_optimization.noop_elimination = True
        b.experimental_distribute.num_devices = 4
        m = a.merge(b)
        out = [m.experimental_optimization.map_fusion,
               m.experimental_optimization.noop_elimination,
               m.experimental_distribute.num_devices,
               m.experimental_threading.private_threadpool_size,
               type(m.experimental_optimization).__name__,
               type(m.experimental_distribute).__name__]
        for bad in (lambda: setattr(a.experimental_optimization, "map_fusion", 3),
                    lambda: setattr(a.experimental_optimization, "foo", 1)):
            try:
                bad()
            except Exception as e:  # noqa: BLE001
                out.append(type(e).__name__)
        ds = tf.data.Dataset.range(2).with_options(a).with_options(b)
        out.append(ds.options().experimental_optimization.noop_elimination)
        return out
    run_custom(prog)


def test_saveable_iterator(tmp_path):
    def prog(tf):
        path = str(tmp_path / f"it_{tf.__name__}")
        it = tf.data.make_initializable_iterator(tf.data.Dataset.range(10).map(
            lambda v: v * 3).batch(2))
        nx = it.get_next()
        saver = tf.train.Saver([tf.data.experimental.make_saveable_from_iterator(it)])
        with tf.Session() as s:
            s.run(it.initializer)
            head = [_plain(s.run(nx)) for _ in range(2)]
            saver.save(s, path)
            mid = _plain(s.run(nx))
            saver.restore(s, path)
            return head + [mid] + drain(tf, nx) if False else \
                head + [mid] + [_plain(s.run(nx)) for _ in range(3)]
    run_custom(prog)
