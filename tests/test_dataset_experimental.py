"""TF 1.15's last tf.data.experimental names: Optional / get_next_as_optional,
group_by_reducer, unique, rejection_resample, parse_example_dataset, SqlDataset, the
options objects, and iterator positions saved by tf.train.Saver."""
from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf

EXP = tf.data.experimental


def drain(ds, sess=None):
    nx = tf.data.make_one_shot_iterator(ds).get_next()
    out = []
    with tf.Session() as s:
        try:
            while True:
                out.append(s.run(nx))
        except tf.errors.OutOfRangeError:
            return out


def test_get_next_as_optional_never_raises_at_the_end():
    with tf.Graph().as_default():
        it = tf.data.make_initializable_iterator(tf.data.Dataset.range(2))
        opt = EXP.get_next_as_optional(it)
        got = tf.cond(opt.has_value(), opt.get_value, lambda: tf.constant(-1, tf.int64))
        assert isinstance(opt, EXP.Optional)
        assert opt.value_structure == tf.TensorSpec([], tf.int64)
        with tf.Session() as s:
            s.run(it.initializer)
            assert [int(s.run(got)) for _ in range(4)] == [0, 1, -1, -1]
            s.run(it.initializer)
            assert [bool(s.run(opt.has_value())) for _ in range(3)] == [True, True, False]


def test_optional_from_value_and_none():
    with tf.Graph().as_default():
        some = EXP.Optional.from_value({"a": tf.constant([1.5, 2.5]), "b": b"x"})
        none = EXP.Optional.none_from_structure(tf.TensorSpec([2], tf.float32))
        sp = EXP.Optional.from_value(tf.SparseTensor([[0, 1]], [7], [2, 3]))
        assert some._type_spec == EXP.OptionalStructure(some.value_structure)
        assert isinstance(some._type_spec, EXP.Structure)
        assert none.get_value().shape.as_list() == [2]
        with tf.Session() as s:
            h, v = s.run([some.has_value(), some.get_value()])
            assert h and v["a"].tolist() == [1.5, 2.5] and v["b"] == b"x"
            assert not s.run(none.has_value())
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match="The optional does not have a value"):
                s.run(none.get_value())
            got = s.run(sp.get_value())
            assert got.values.tolist() == [7] and got.dense_shape.tolist() == [2, 3]
        with pytest.raises(TypeError):
            EXP.Optional.none_from_structure([1, 2])


def test_group_by_reducer_orders_by_key():
    with tf.Graph().as_default():
        reducer = EXP.Reducer(lambda k: (np.int64(0), k), lambda s, x: (s[0] + x, s[1]),
                              lambda total, key: total * 10 + key)
        ds = tf.data.Dataset.from_tensor_slices(np.array([5, 2, 7, 4, 9], np.int64))
        out = drain(ds.apply(EXP.group_by_reducer(lambda x: 3 - x % 3, reducer)))
        # keys: 5->1, 2->1, 7->2, 4->2, 9->3  => sums 7, 11, 9
        assert [int(v) for v in out] == [71, 112, 93]
        with pytest.raises(ValueError, match="must return a single tf.int64"):
            ds.apply(EXP.group_by_reducer(lambda x: tf.cast(x, tf.int32), reducer))
        bad = EXP.Reducer(lambda k: np.int64(0), lambda s, x: tf.cast(s, tf.float32),
                          lambda s: s)
        with pytest.raises(TypeError, match="must match the initial state"):
            ds.apply(EXP.group_by_reducer(lambda x: x, bad))


def test_group_by_reducer_relaxes_the_state_shape():
    with tf.Graph().as_default():
        reducer = EXP.Reducer(lambda k: tf.zeros([0], tf.int64),
                              lambda s, x: tf.concat([s, [x]], 0), lambda s: s)
        ds = tf.data.Dataset.range(5).apply(EXP.group_by_reducer(lambda x: x % 2, reducer))
        assert ds.output_shapes.as_list() == [None]
        assert [v.tolist() for v in drain(ds)] == [[0, 2, 4], [1, 3]]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(-3, 3), max_size=12))
def test_unique_keeps_first_occurrences(values):
    with tf.Graph().as_default():
        ds = tf.data.Dataset.from_tensor_slices(np.array(values, np.int64).reshape(-1))
        got = [int(v) for v in drain(ds.apply(EXP.unique()))]
    assert got == list(dict.fromkeys(values))


def test_unique_strings_and_type_check():
    with tf.Graph().as_default():
        ds = tf.data.Dataset.from_tensor_slices(np.array([b"a", b"b", b"a", b""]))
        assert drain(ds.apply(EXP.unique())) == [b"a", b"b", b""]
        with pytest.raises(TypeError, match="only supports inputs with a single"):
            tf.data.Dataset.range(3).map(lambda v: tf.cast(v, tf.float32)).apply(
                EXP.unique())


def test_rejection_resample_static_cases_and_seed():
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(10)
        cls = lambda x: tf.cast(x % 2, tf.int32)  # noqa: E731
        only_odd = drain(ds.apply(EXP.rejection_resample(cls, [0.0, 1.0], [0.5, 0.5])))
        assert [(int(c), int(v)) for c, v in only_odd] == [(1, 1), (1, 3), (1, 5), (1, 7),
                                                          (1, 9)]
        same = drain(ds.apply(EXP.rejection_resample(cls, [0.5, 0.5], [0.5, 0.5])))
        assert [int(v) for _c, v in same] == list(range(10))
        mixed = ds.repeat(20).apply(EXP.rejection_resample(cls, [0.2, 0.8], seed=4))
        a, b = drain(mixed), drain(mixed)
        assert [(int(c), int(v)) for c, v in a] == [(int(c), int(v)) for c, v in b]
        assert all(int(c) == int(v) % 2 for c, v in a)
        odd = sum(int(c) for c, _v in a) / len(a)
        assert 0.65 < odd < 0.95


def _example(ids, w):
    return tf.train.Example(features=tf.train.Features(feature={
        "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids)),
        "w": tf.train.Feature(float_list=tf.train.FloatList(value=[w]))})).SerializeToString()


def test_parse_example_dataset():
    with tf.Graph().as_default():
        recs = np.array([_example([1, 2], 0.5), _example([], 1.5), _example([3], 2.5)],
                        dtype=object)
        ds = tf.data.Dataset.from_tensor_slices(recs).batch(2).apply(
            EXP.parse_example_dataset({"ids": tf.VarLenFeature(tf.int64),
                                       "w": tf.FixedLenFeature([], tf.float32)}))
        out = drain(ds)
        assert out[0]["w"].tolist() == [0.5, 1.5]
        assert out[0]["ids"].values.tolist() == [1, 2]
        assert out[1]["ids"].dense_shape.tolist() == [1, 1]
        with pytest.raises(TypeError, match="vectors of strings"):
            tf.data.Dataset.range(2).apply(EXP.parse_example_dataset({}))
        with pytest.raises(ValueError):
            EXP.parse_example_dataset(None)


def test_map_and_batch_with_legacy_function():
    with tf.Graph().as_default():
        out = drain(tf.data.Dataset.range(5).apply(
            EXP.map_and_batch_with_legacy_function(lambda v: v * 3, 2, drop_remainder=True)))
        assert [v.tolist() for v in out] == [[0, 3], [6, 9]]


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "people.db")
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE people (name TEXT, age INTEGER, score REAL, ok INTEGER)")
    c.executemany("INSERT INTO people VALUES (?, ?, ?, ?)",
                  [("ann", 31, 1.5, 1), ("bob", 22, None, 0), (None, None, 2.0, 5)])
    c.commit()
    c.close()
    return path


def test_sql_dataset(db):
    with tf.Graph().as_default():
        ds = EXP.SqlDataset("sqlite", db, "SELECT name, age, score, ok FROM people",
                            (tf.string, tf.int32, tf.float64, tf.bool))
        assert ds.output_types == (tf.string, tf.int32, tf.float64, tf.bool)
        got = [tuple(np.asarray(v).item() for v in row) for row in drain(ds)]
        assert got == [(b"ann", 31, 1.5, True), (b"bob", 22, 0.0, False),
                       (b"", 0, 2.0, True)]
        one = EXP.SqlDataset("sqlite", db, "SELECT age FROM people WHERE age > 25",
                             tf.int64)
        assert [int(v) for v in drain(one)] == [31]


def test_sql_dataset_errors(db, tmp_path):
    with tf.Graph().as_default():
        def first(ds):
            return drain(ds)
        with pytest.raises(tf.errors.InvalidArgumentError, match="The database type, "
                                                                 "mysql, is not supported"):
            first(EXP.SqlDataset("mysql", db, "SELECT age FROM people", tf.int32))
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"number of columns in query \(2\) must match"):
            first(EXP.SqlDataset("sqlite", db, "SELECT age, name FROM people", tf.int32))
        with pytest.raises(tf.errors.UnknownError, match=r"Prepare\(\) failed: \[1\] no such "
                                                          "column: nope"):
            first(EXP.SqlDataset("sqlite", db, "SELECT nope FROM people", tf.int32))
        with pytest.raises(tf.errors.FailedPreconditionError):
            first(EXP.SqlDataset("sqlite", str(tmp_path / "none.db"), "SELECT 1", tf.int32))
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be one of"):
            EXP.SqlDataset("sqlite", db, "SELECT age FROM people", tf.float32)


def test_options_objects_merge_as_tf_1_15():
    a = tf.data.Options()
    a.experimental_optimization.map_fusion = True
    a.experimental_threading.private_threadpool_size = 2
    b = tf.data.Options()
    b.experimental_optimization.noop_elimination = True
    b.experimental_distribute.num_devices = 4
    m = a.merge(b)
    assert m.experimental_optimization.map_fusion is True
    assert m.experimental_optimization.noop_elimination is True
    assert m.experimental_distribute.num_devices == 4
    assert m.experimental_threading.private_threadpool_size == 2
    assert isinstance(m.experimental_optimization, EXP.OptimizationOptions)
    assert EXP.DistributeOptions().auto_shard is True
    assert EXP.OptimizationOptions().map_vectorization.enabled is None
    c = tf.data.Options()
    c.experimental_optimization.map_fusion = False
    with pytest.raises(ValueError, match="Cannot merge incompatible values"):
        a.merge(c)
    with pytest.raises(TypeError, match="must be of type"):
        a.experimental_optimization.map_fusion = 3
    with pytest.raises(AttributeError, match="Cannot set the property foo"):
        a.experimental_optimization.foo = 1
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(2).with_options(a).with_options(b)
        assert ds.options().experimental_optimization.noop_elimination is True
        with pytest.raises(ValueError):
            ds.with_options(c)


def test_structures():
    assert EXP.TensorArrayStructure(tf.float32, [2], True, False) == \
        tf.TensorArraySpec([2], tf.float32, True, False)
    assert issubclass(EXP.OptionalStructure, EXP.Structure)
    assert isinstance(tf.TensorSpec([], tf.int32), EXP.Structure)


def _saver_pipeline(seed=None):
    ds = tf.data.Dataset.range(20).shuffle(20, seed=seed).batch(3)
    return ds


def test_saveable_iterator_restores_position(tmp_path):
    path = str(tmp_path / "it")
    with tf.Graph().as_default():
        limit = tf.placeholder(tf.int64, [])
        it = tf.data.make_initializable_iterator(
            tf.data.Dataset.range(limit).shuffle(50).map(lambda v: v * 2))
        nx = it.get_next()
        tf.add_to_collection(tf.GraphKeys.SAVEABLE_OBJECTS,
                             EXP.make_saveable_from_iterator(it))
        saver = tf.train.Saver()
        with tf.Session() as s:
            with pytest.raises(tf.errors.FailedPreconditionError, match="not been "
                                                                        "initialized"):
                saver.save(s, path)
            s.run(it.initializer, {limit: 30})
            first = [int(s.run(nx)) for _ in range(7)]
            saver.save(s, path)
            rest = [int(s.run(nx)) for _ in range(23)]
    with tf.Graph().as_default():  # a fresh graph, as a restarted program builds it
        limit = tf.placeholder(tf.int64, [])
        it = tf.data.make_initializable_iterator(
            tf.data.Dataset.range(limit).shuffle(50).map(lambda v: v * 2))
        nx = it.get_next()
        saver = tf.train.Saver([EXP.make_saveable_from_iterator(it)])
        with tf.Session() as s:
            saver.restore(s, path)
            again = [int(s.run(nx)) for _ in range(23)]
            with pytest.raises(tf.errors.OutOfRangeError):
                s.run(nx)
    assert again == rest
    assert sorted(first + rest) == list(range(0, 60, 2))


def test_saveable_iterator_of_a_fused_map_and_batch(tmp_path):
    """elementwise map -> shuffle -> repeat -> batch runs the map once per batch (after
    a working copy of the shuffle); a saved position, with the seed that shuffle drew,
    still restores the same batches."""
    path = str(tmp_path / "fused")
    x = np.arange(24, dtype=np.float32)

    def build():
        ds = (tf.data.Dataset.from_tensor_slices(x).map(lambda v: v * 2.0).shuffle(24)
              .repeat(2).batch(5))
        it = tf.data.make_one_shot_iterator(ds)
        return it, it.get_next()

    with tf.Graph().as_default():
        it, nx = build()
        saver = tf.train.Saver([EXP.make_saveable_from_iterator(it)])
        with tf.Session() as s:
            first = [s.run(nx) for _ in range(3)]
            saver.save(s, path)
            rest = [s.run(nx) for _ in range(7)]
    with tf.Graph().as_default():
        it, nx = build()
        saver = tf.train.Saver([EXP.make_saveable_from_iterator(it)])
        with tf.Session() as s:
            saver.restore(s, path)
            again = [s.run(nx) for _ in range(7)]
            with pytest.raises(tf.errors.OutOfRangeError):
                s.run(nx)
    for a, b in zip(again, rest):
        assert a.tolist() == b.tolist()
    flat = np.concatenate(first + rest)
    assert sorted(flat.tolist()) == sorted((x * 2).tolist() * 2)


def test_saveable_one_shot_and_corrupt_state(tmp_path):
    path = str(tmp_path / "one")
    with tf.Graph().as_default():
        it = tf.data.make_one_shot_iterator(tf.data.Dataset.range(5))
        nx = it.get_next()
        saver = tf.train.Saver([EXP.make_saveable_from_iterator(it)])
        with tf.Session() as s:
            s.run(nx)
            s.run(nx)
            saver.save(s, path)
            assert int(s.run(nx)) == 2
            saver.restore(s, path)
            assert [int(s.run(nx)) for _ in range(3)] == [2, 3, 4]
        with pytest.raises(TypeError):
            EXP.make_saveable_from_iterator(tf.data.Dataset.range(2))
    from flowrt.inputs.dataset_extra import parse_state
    with pytest.raises(tf.errors.DataLossError, match="not a flowrt iterator state"):
        parse_state(np.array([b"not a state"], dtype=object))


def test_checkpoint_input_pipeline_hook(tmp_path):
    class Config:
        save_checkpoints_steps = 2
        save_checkpoints_secs = None

    class Est:
        model_dir = str(tmp_path)
        config = Config()

    def run(steps):
        with tf.Graph().as_default():
            step = tf.train.get_or_create_global_step()
            nx = tf.data.make_one_shot_iterator(tf.data.Dataset.range(100)).get_next()
            inc = tf.assign_add(step, 1)
            hook = EXP.CheckpointInputPipelineHook(Est())
            with tf.train.MonitoredSession(hooks=[hook]) as s:
                return [int(s.run([nx, inc])[0]) for _ in range(steps)]

    assert run(5) == [0, 1, 2, 3, 4]
    assert (tmp_path / "checkpoint_worker_0").exists()
    assert not (tmp_path / "checkpoint").exists()
    assert run(2) == [5, 6]  # (the global step is not restored: no model checkpoint)
