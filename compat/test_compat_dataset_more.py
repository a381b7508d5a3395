"""The rest of tf.data under TensorFlow (tf.compat.v1) and flowrt: list_files, window,
reduce, shard, enumerate, sparse components and VarLen parsing in a map, and
tf.data.experimental, compared element by element (random orders by their multisets)."""
from __future__ import annotations

import numpy as np
import pytest

from compat_harness import run_custom


def _plain(v):
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in sorted(v.items())}
    if hasattr(v, "dense_shape") and hasattr(v, "indices"):
        return ["sparse", _plain(v.indices), _plain(v.values), _plain(v.dense_shape)]
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    a = np.asarray(v)
    return [a.dtype.name if a.dtype != object else "object", a.tolist()]


def drain(tf, nx, limit=200):
    out = []
    with tf.Session() as s:
        try:
            for _ in range(limit):
                out.append(_plain(s.run(nx)))
        except tf.errors.OutOfRangeError:
            out.append("end")
    return out


def one_shot(tf, ds):
    return [str(tf.data.get_output_types(ds)), str(tf.data.get_output_shapes(ds))] + drain(
        tf, tf.data.make_one_shot_iterator(ds).get_next())


def _progs(d):
    return [pytest.param(v, id=k) for k, v in sorted(d.items())]


def _example(tf, vals, fl):
    return tf.train.Example(features=tf.train.Features(feature={
        "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=vals)),
        "w": tf.train.Feature(float_list=tf.train.FloatList(value=fl))})).SerializeToString()


def _examples(tf):
    return np.array([_example(tf, [1, 2], [0.5]), _example(tf, [], [1.5]),
                     _example(tf, [7, 8, 9], [2.5])], dtype=object)


EXP = "data.experimental"
SP = ([[0, 0], [0, 2], [2, 1]], [1.0, 2.0, 3.0], [3, 4])

PIPELINES = {
    "window_flat_map": lambda tf: tf.data.Dataset.range(7).window(3, 2).flat_map(
        lambda w: w.batch(3)),
    "window_drop_stride": lambda tf: tf.data.Dataset.range(10).window(
        3, shift=1, stride=2, drop_remainder=True).flat_map(lambda w: w.batch(3)),
    "window_tuple_zip": lambda tf: tf.data.Dataset.zip(
        (tf.data.Dataset.range(5), tf.data.Dataset.range(5).map(lambda v: v * 10))).window(
        2).flat_map(lambda a, b: tf.data.Dataset.zip((a.batch(2), b.batch(2)))),
    "window_shift_gt_size": lambda tf: tf.data.Dataset.range(10).window(2, 4).flat_map(
        lambda w: w.batch(2)),
    "shard": lambda tf: tf.data.Dataset.range(11).shard(3, 2),
    "enumerate": lambda tf: tf.data.Dataset.from_tensor_slices(
        np.array([b"a", b"b", b"c"])).enumerate(start=4),
    "sparse_slices": lambda tf: tf.data.Dataset.from_tensor_slices(
        tf.SparseTensor(*SP)),
    "sparse_slices_batch": lambda tf: tf.data.Dataset.from_tensor_slices(
        tf.SparseTensor(*SP)).batch(2),
    "sparse_unbatch": lambda tf: tf.data.Dataset.from_tensors(
        tf.SparseTensor(*SP)).unbatch(),
    "sparse_map_out": lambda tf: tf.data.Dataset.range(3).map(
        lambda v: tf.SparseTensor([[0]], [v], [4])).batch(2),
    "sparse_map_in": lambda tf: tf.data.Dataset.from_tensor_slices(
        tf.SparseTensor(*SP)).map(lambda s: tf.sparse.to_dense(s)),
    "from_sparse_tensor_slices": lambda tf: tf.data.Dataset.from_sparse_tensor_slices(
        tf.SparseTensor(*SP)),
    "parse_single_varlen": lambda tf: tf.data.Dataset.from_tensor_slices(
        _examples(tf)).map(lambda s: tf.parse_single_example(s, {
            "ids": tf.VarLenFeature(tf.int64), "w": tf.FixedLenFeature([1], tf.float32)})),
    "parse_single_varlen_batch": lambda tf: tf.data.Dataset.from_tensor_slices(
        _examples(tf)).map(lambda s: tf.parse_single_example(s, {
            "ids": tf.VarLenFeature(tf.int64)})).batch(2),
    "parse_example_batched": lambda tf: tf.data.Dataset.from_tensor_slices(
        _examples(tf)).batch(2).map(lambda s: tf.parse_example(s, {
            "ids": tf.VarLenFeature(tf.int64), "w": tf.FixedLenFeature([], tf.float32)})),
    "filter_legacy": lambda tf: tf.data.Dataset.range(6).filter_with_legacy_function(
        lambda v: tf.equal(v % 2, 0)),
    "map_and_batch": lambda tf: tf.data.Dataset.range(7).apply(
        tf.data.experimental.map_and_batch(lambda v: v * 2, 3)),
    "map_and_batch_drop": lambda tf: tf.data.Dataset.range(7).apply(
        tf.data.experimental.map_and_batch(lambda v: v * 2, 3, drop_remainder=True)),
    "parallel_interleave": lambda tf: tf.data.Dataset.range(1, 4).apply(
        tf.data.experimental.parallel_interleave(
            lambda v: tf.data.Dataset.range(v * 10, v * 10 + v), cycle_length=2)),
    "unbatch": lambda tf: tf.data.Dataset.range(5).batch(2).apply(
        tf.data.experimental.unbatch()),
    "ignore_errors": lambda tf: tf.data.Dataset.from_tensor_slices(
        np.array([1.0, 0.0, 2.0], np.float32)).map(
        lambda v: tf.debugging.check_numerics(1.0 / v, "bad")).apply(
        tf.data.experimental.ignore_errors()),
    "copy_prefetch_device": lambda tf: tf.data.Dataset.range(4).apply(
        tf.data.experimental.prefetch_to_device("/cpu:0")).apply(
        tf.data.experimental.copy_to_device("/cpu:0")),
    "counter": lambda tf: tf.data.experimental.Counter(3, -2).take(4),
    "counter_float": lambda tf: tf.data.experimental.Counter(1, 2, tf.float32).take(3),
    "choose": lambda tf: tf.data.experimental.choose_from_datasets(
        [tf.data.Dataset.range(2), tf.data.Dataset.range(10, 13)],
        tf.data.Dataset.from_tensor_slices(np.array([1, 0, 0, 0, 1, 1, 1], np.int64))),
    "sample_weights_one_hot": lambda tf: tf.data.experimental.sample_from_datasets(
        [tf.data.Dataset.range(3), tf.data.Dataset.range(10, 13)], weights=[0.0, 1.0]).take(3),
    "enumerate_dataset": lambda tf: tf.data.Dataset.range(3).apply(
        tf.data.experimental.enumerate_dataset(10)),
    "scan": lambda tf: tf.data.Dataset.range(6).apply(tf.data.experimental.scan(
        np.int64(1), lambda s, v: (s * 2, s + v))),
    "scan_tuple_state": lambda tf: tf.data.Dataset.range(4).apply(tf.data.experimental.scan(
        (np.int64(0), np.float32(1)), lambda s, v: ((s[0] + v, s[1] * 2.0), s[1]))),
    "group_by_window": lambda tf: tf.data.Dataset.range(11).apply(
        tf.data.experimental.group_by_window(lambda v: v % 3, lambda k, w: w.batch(4), 2)),
    "group_by_window_size_func": lambda tf: tf.data.Dataset.range(12).apply(
        tf.data.experimental.group_by_window(
            lambda v: v % 2, lambda k, w: w.batch(5), window_size_func=lambda k: k + 2)),
    "bucket": lambda tf: tf.data.Dataset.range(1, 9).map(
        lambda v: tf.fill([v], v)).apply(tf.data.experimental.bucket_by_sequence_length(
            lambda x: tf.shape(x)[0], [3, 6], [2, 2, 2])),
    "bucket_pad_boundary": lambda tf: tf.data.Dataset.range(1, 6).map(
        lambda v: tf.fill([v], v)).apply(tf.data.experimental.bucket_by_sequence_length(
            lambda x: tf.shape(x)[0], [3, 7], [2, 2, 2], pad_to_bucket_boundary=True)),
    "bucket_no_padding": lambda tf: tf.data.Dataset.range(6).apply(
        tf.data.experimental.bucket_by_sequence_length(
            lambda x: tf.cast(x, tf.int32), [2], [2, 3], no_padding=True)),
    "dense_to_sparse_batch": lambda tf: tf.data.Dataset.range(1, 5).map(
        lambda v: tf.fill([v], v)).apply(tf.data.experimental.dense_to_sparse_batch(3, [6])),
    "take_while": lambda tf: tf.data.Dataset.range(10).apply(
        tf.data.experimental.take_while(lambda v: v * v < 20)),
    "assert_cardinality_ok": lambda tf: tf.data.Dataset.range(3).apply(
        tf.data.experimental.assert_cardinality(3)),
    "assert_cardinality_fewer": lambda tf: tf.data.Dataset.range(3).apply(
        tf.data.experimental.assert_cardinality(5)),
    "assert_cardinality_more": lambda tf: tf.data.Dataset.range(3).apply(
        tf.data.experimental.assert_cardinality(2)),
    "reduce_in_flat_map_free": lambda tf: tf.data.Dataset.range(3).map(lambda v: v + 1),
}


@pytest.mark.parametrize("make", _progs(PIPELINES))
def test_pipeline(make):
    run_custom(lambda tf: one_shot(tf, make(tf)))


def test_reduce_and_get_single_element():
    def prog(tf):
        ds = tf.data.Dataset.range(1, 6)
        total = ds.reduce(np.int64(0), lambda s, v: s + v)
        pair = ds.reduce((np.int64(1), np.float32(0)),
                         lambda s, v: (s[0] * v, s[1] + tf.cast(v, tf.float32)))
        grow = ds.reduce(tf.zeros([0], tf.int64), lambda s, v: tf.concat([s, [v]], 0))
        one = tf.data.experimental.get_single_element(
            tf.data.Dataset.from_tensors((np.arange(3), b"x")))
        with tf.Session() as s:
            out = [_plain(s.run(x)) for x in (total, pair, grow, one)]
        return out + [str(grow.shape)]
    run_custom(prog)


SINGLE_ERRORS = {
    "empty": lambda tf: tf.data.Dataset.range(0),
    "two": lambda tf: tf.data.Dataset.range(2),
}


@pytest.mark.parametrize("make", _progs(SINGLE_ERRORS))
def test_get_single_element_errors(make):
    def prog(tf):
        with tf.Session() as s:
            s.run(tf.data.experimental.get_single_element(make(tf)))
    run_custom(prog)


CARDINALITY = {
    "range_batch": lambda tf: tf.data.Dataset.range(10).batch(3),
    "range_batch_drop": lambda tf: tf.data.Dataset.range(10).batch(3, True),
    "repeat_forever": lambda tf: tf.data.Dataset.range(3).repeat(),
    "repeat_take": lambda tf: tf.data.Dataset.range(3).repeat().take(7),
    "filter": lambda tf: tf.data.Dataset.range(3).filter(lambda v: v > 0),
    "slices_map_shuffle": lambda tf: tf.data.Dataset.from_tensor_slices(
        np.zeros([6, 2])).map(lambda v: v * 2).shuffle(3),
    "zip_concat": lambda tf: tf.data.Dataset.zip(
        (tf.data.Dataset.range(4), tf.data.Dataset.range(9))).concatenate(
        tf.data.Dataset.zip((tf.data.Dataset.range(2), tf.data.Dataset.range(2)))),
    "skip_shard": lambda tf: tf.data.Dataset.range(20).skip(3).shard(4, 1),
    "assert": lambda tf: tf.data.Dataset.range(3).filter(lambda v: v > 0).apply(
        tf.data.experimental.assert_cardinality(2)),
    "window": lambda tf: tf.data.Dataset.range(10).window(3, 2, drop_remainder=True),
    "enumerate": lambda tf: tf.data.Dataset.range(10).enumerate(),
}


@pytest.mark.parametrize("make", _progs(CARDINALITY))
def test_cardinality(make):
    def prog(tf):
        c = tf.data.experimental.cardinality(make(tf))
        with tf.Session() as s:
            return [c.dtype.name, int(s.run(c))]
    run_custom(prog)


def test_list_files(tmp_path):
    for n in ("b.txt", "a.txt", "c.txt", "d.csv"):
        (tmp_path / n).write_text(n)

    def prog(tf):
        pat = str(tmp_path / "*.txt")
        fixed = tf.data.Dataset.list_files(pat, shuffle=False)
        shuffled = tf.data.Dataset.list_files([pat, str(tmp_path / "*.csv")], seed=3)
        out = [str(fixed.output_types), str(fixed.output_shapes)]
        out += [[x.decode()[len(str(tmp_path)):] for x in v[1]] if isinstance(v, list) else v
                for v in []]
        got = drain(tf, tf.data.make_one_shot_iterator(fixed).get_next())
        out.append([g if g == "end" else g[1][len(str(tmp_path)):] for g in got])
        got = drain(tf, tf.data.make_one_shot_iterator(shuffled).get_next())
        out.append(sorted(g if g == "end" else g[1][len(str(tmp_path)):] for g in got))
        return out
    run_custom(prog)


def test_list_files_no_match(tmp_path):
    """TF 1.15 fails the iterator with InvalidArgumentError ``assertion failed: [No files
    matched pattern: ...]`` (list_files' Assert); TF 2.x's compat.v1 no longer runs that
    Assert and gives an empty dataset. flowrt keeps TF 1.15's behaviour."""
    import flowrt
    from compat_harness import module

    tf = module("tf")
    with tf.Graph().as_default():
        nx = tf.data.make_one_shot_iterator(
            tf.data.Dataset.list_files(str(tmp_path / "*.none"))).get_next()
        with tf.Session() as s, pytest.raises(tf.errors.OutOfRangeError):
            s.run(nx)
    with flowrt.Graph().as_default():
        nx = flowrt.data.make_one_shot_iterator(
            flowrt.data.Dataset.list_files(str(tmp_path / "*.none"))).get_next()
        with flowrt.Session() as s, pytest.raises(flowrt.errors.InvalidArgumentError,
                                                  match="No files matched pattern: "):
            s.run(nx)


def test_csv_dataset(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text('h1,h2,h3\n1,2.5,"x,y"\n,3.5,z\n4,,\n')

    def prog(tf):
        ds = tf.data.experimental.CsvDataset(str(p), [[0], [1.0], tf.string], header=True)
        with_select = tf.data.experimental.CsvDataset(
            str(p), [tf.constant([9], tf.int64), [""]], header=True, select_cols=[0, 2],
            na_value="z")
        return [one_shot(tf, ds), one_shot(tf, with_select)]
    run_custom(prog)


def test_make_csv_dataset(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("age,score,name,label\n1,0.5,ann,0\n2,1.5,bob,1\n3,,cy,0\n4,3.5,dee,1\n")

    def prog(tf):
        ds = tf.data.experimental.make_csv_dataset(str(p), 3, label_name="label",
                                                   num_epochs=1, shuffle=False)
        return [str(sorted(ds.output_types[0].items())), str(ds.output_types[1])] + drain(
            tf, tf.data.make_one_shot_iterator(ds).get_next())
    run_custom(prog)


def test_make_batched_features_dataset(tmp_path):
    def prog(tf):
        path = str(tmp_path / "f.tfrecord")
        with tf.io.TFRecordWriter(path) as w:
            for r in _examples(tf):
                w.write(r)
        ds = tf.data.experimental.make_batched_features_dataset(
            path, 2, {"ids": tf.VarLenFeature(tf.int64),
                      "w": tf.FixedLenFeature([], tf.float32)},
            label_key="w", num_epochs=1, shuffle=False)
        return drain(tf, tf.data.make_one_shot_iterator(ds).get_next())
    run_custom(prog)


def test_tfrecord_writer_read_back(tmp_path):
    def prog(tf):
        path = str(tmp_path / "out.tfrecord")
        ds = tf.data.Dataset.from_tensor_slices(np.array([b"one", b"", b"three"]))
        op = tf.data.experimental.TFRecordWriter(path, "GZIP").write(ds)
        with tf.Session() as s:
            s.run(op)
        back = tf.data.TFRecordDataset(path, compression_type="GZIP")
        return drain(tf, tf.data.make_one_shot_iterator(back).get_next())
    run_custom(prog)


def test_sparse_classes_and_get_output_classes():
    def prog(tf):
        ds = tf.data.Dataset.from_tensor_slices(
            {"s": tf.SparseTensor(*SP), "d": np.arange(3)})
        cls = tf.data.get_output_classes(ds)
        return [cls["s"].__name__, cls["d"].__name__, str(ds.output_shapes)]
    run_custom(prog)


def test_shuffle_and_repeat_and_random():
    def prog(tf):
        nx = tf.data.make_one_shot_iterator(tf.data.Dataset.range(6).apply(
            tf.data.experimental.shuffle_and_repeat(6, 2, seed=1))).get_next()
        r = tf.data.make_one_shot_iterator(
            tf.data.experimental.RandomDataset(seed=5).take(3)).get_next()
        with tf.Session() as s:
            v = [int(s.run(nx)) for _ in range(12)]
            rs = [s.run(r) for _ in range(3)]
        return [sorted(v[:6]), sorted(v[6:]), r.dtype.name, len(set(int(x) for x in rs))]
    run_custom(prog)


def test_sample_from_datasets_multiset():
    def prog(tf):
        ds = tf.data.experimental.sample_from_datasets(
            [tf.data.Dataset.range(5), tf.data.Dataset.range(100, 103)], seed=2)
        got = drain(tf, tf.data.make_one_shot_iterator(ds).get_next())
        return sorted(g[1] for g in got if g != "end")
    run_custom(prog)


ERRORS = {
    "shard_index": lambda tf: tf.data.Dataset.range(4).shard(2, 2),
    "shard_zero": lambda tf: tf.data.Dataset.range(4).shard(0, 0),
    "window_zero": lambda tf: tf.data.Dataset.range(4).window(0).flat_map(
        lambda w: w.batch(1)),
    "choose_out_of_range": lambda tf: tf.data.experimental.choose_from_datasets(
        [tf.data.Dataset.range(2)], tf.data.Dataset.from_tensors(np.int64(3))),
    "csv_required_missing": None,
}


@pytest.mark.parametrize("make", _progs({k: v for k, v in ERRORS.items() if v}))
def test_run_time_errors(make):
    def prog(tf):
        nx = tf.data.make_one_shot_iterator(make(tf)).get_next()
        with tf.Session() as s:
            return [s.run(nx) for _ in range(5)]
    run_custom(prog)


BUILD_ERRORS = {
    "take_while_not_bool": lambda tf: tf.data.Dataset.range(3).apply(
        tf.data.experimental.take_while(lambda v: v)),
    "scan_bad_state_type": lambda tf: tf.data.Dataset.range(3).apply(
        tf.data.experimental.scan(np.int64(0), lambda s, v: (tf.cast(s, tf.float32), v))),
    "reduce_bad_state_type": lambda tf: tf.data.Dataset.range(3).reduce(
        np.float32(0), lambda s, v: v),
    "padded_batch_sparse": lambda tf: tf.data.Dataset.from_tensor_slices(
        tf.SparseTensor(*SP)).padded_batch(2, [4]),
    "group_by_window_both": lambda tf: tf.data.Dataset.range(3).apply(
        tf.data.experimental.group_by_window(lambda v: v, lambda k, w: w, 2, lambda k: k)),
    "choose_not_int64": lambda tf: tf.data.experimental.choose_from_datasets(
        [tf.data.Dataset.range(2)], tf.data.Dataset.range(2).map(
            lambda v: tf.cast(v, tf.int32))),
    "tfrecord_writer_types": lambda tf: tf.data.experimental.TFRecordWriter(
        "/tmp/never").write(tf.data.Dataset.range(2)),
}


@pytest.mark.parametrize("make", _progs(BUILD_ERRORS))
def test_build_errors(make):
    run_custom(lambda tf: make(tf))
