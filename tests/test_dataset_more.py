"""The rest of tf.data: list_files, window, reduce, shard, enumerate, SparseTensor
components (VarLen parsing in a map), tf.data.experimental and their errors."""
from __future__ import annotations

import gzip

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf



def drain(nx, limit=10000):
    """Every element get_next gives, then the marker "end" for OutOfRangeError."""
    out = []
    with tf.Session() as sess:
        try:
            for _ in range(limit):
                out.append(sess.run(nx))
        except tf.errors.OutOfRangeError:
            out.append("end")
    return out


def values(ds):
    got = drain(tf.data.make_one_shot_iterator(ds).get_next())
    assert got[-1] == "end"
    return got[:-1]


def ints(ds):
    return [np.asarray(v).tolist() for v in values(ds)]


@pytest.fixture(autouse=True)
def fresh_graph():
    with tf.Graph().as_default() as g:
        yield g


SP = ([[0, 0], [0, 2], [2, 1]], [1.0, 2.0, 3.0], [3, 4])


def _example(ids, w):
    return tf.train.Example(features=tf.train.Features(feature={
        "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids)),
        "w": tf.train.Feature(float_list=tf.train.FloatList(value=w))})).SerializeToString()


# -- Dataset methods -----------------------------------------------------------------------
def test_list_files_sorted_shuffled_and_no_match(tmp_path):
    for n in ("b.txt", "a.txt", "c.txt", "x.csv"):
        (tmp_path / n).write_text(n)
    names = [str(tmp_path / n).encode() for n in ("a.txt", "b.txt", "c.txt")]
    ds = tf.data.Dataset.list_files(str(tmp_path / "*.txt"), shuffle=False)
    assert ds.output_types == tf.string and ds.output_shapes.as_list() == []
    assert values(ds) == names
    both = tf.data.Dataset.list_files([str(tmp_path / "*.txt"), str(tmp_path / "*.csv")],
                                      seed=7)
    got = values(both.repeat(4))
    assert sorted(got[:4]) == sorted(names + [str(tmp_path / "x.csv").encode()])
    assert len({tuple(got[i:i + 4]) for i in range(0, 16, 4)}) > 1  # reshuffled per epoch
    seeded = [values(tf.data.Dataset.list_files(str(tmp_path / "*"), seed=3))
              for _ in range(2)]
    assert seeded[0] == seeded[1]
    pat = tf.placeholder(tf.string, [])
    it = tf.data.make_initializable_iterator(tf.data.Dataset.list_files(pat, shuffle=False))
    with tf.Session() as s:
        s.run(it.initializer, {pat: str(tmp_path / "*.csv")})
        assert s.run(it.get_next()).endswith(b"x.csv")
        s.run(it.initializer, {pat: str(tmp_path / "*.none")})
        with pytest.raises(tf.errors.InvalidArgumentError, match="No files matched pattern: "):
            s.run(it.get_next())


def _windows(ds, size):
    return ints(ds.flat_map(lambda w: w.batch(size)))


def test_window_shift_stride_drop():
    r = tf.data.Dataset.range
    assert _windows(r(7).window(3, 2), 3) == [[0, 1, 2], [2, 3, 4], [4, 5, 6], [6]]
    assert _windows(r(7).window(3), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    assert _windows(r(7).window(3, drop_remainder=True), 3) == [[0, 1, 2], [3, 4, 5]]
    assert _windows(r(10).window(3, 1, 2, True), 3) == [
        [0, 2, 4], [1, 3, 5], [2, 4, 6], [3, 5, 7], [4, 6, 8], [5, 7, 9]]
    assert _windows(r(10).window(2, 4), 2) == [[0, 1], [4, 5], [8, 9]]
    assert _windows(r(0).window(2), 2) == []
    z = tf.data.Dataset.zip((r(4), r(4).map(lambda v: v * 10))).window(2)
    assert z.output_classes == (tf.data.Dataset, tf.data.Dataset)
    got = values(z.flat_map(lambda a, b: tf.data.Dataset.zip((a.batch(2), b.batch(2)))))
    assert [(a.tolist(), b.tolist()) for a, b in got] == [([0, 1], [0, 10]),
                                                           ([2, 3], [20, 30])]
    d = tf.data.Dataset.from_tensor_slices({"x": np.arange(4)}).window(3)
    assert ints(d.flat_map(lambda w: w["x"].batch(3))) == [[0, 1, 2], [3]]
    with pytest.raises(TypeError, match="cannot leave the pipeline"):
        tf.data.make_one_shot_iterator(r(3).window(2))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Window size must be greater"):
        values(r(3).window(0).flat_map(lambda w: w))


@settings(max_examples=12, deadline=None)
@given(n=st.integers(0, 12), size=st.integers(1, 4), shift=st.integers(1, 5),
       stride=st.integers(1, 3), drop=st.booleans())
def test_window_against_reference(n, size, shift, stride, drop):
    with tf.Graph().as_default():
        got = _windows(tf.data.Dataset.range(n).window(size, shift, stride, drop), size)
    want, start = [], 0
    while start < n:
        w = list(range(start, min(n, start + (size - 1) * stride + 1), stride))
        if drop and len(w) < size:
            break
        want.append(w)
        start += shift
    assert got == want


def test_reduce_state_structures_and_shape_relaxation():
    ds = tf.data.Dataset.range(1, 6)
    total = ds.reduce(np.int64(0), lambda s, v: s + v)
    pair = ds.reduce((np.int64(1), np.float32(0)),
                     lambda s, v: (s[0] * v, s[1] + tf.cast(v, tf.float32)))
    grow = ds.reduce(tf.zeros([0], tf.int64), lambda s, v: tf.concat([s, [v]], 0))
    assert grow.shape.as_list() == [None]
    d = tf.data.Dataset.from_tensor_slices({"a": np.arange(3.0)}).reduce(
        {"sum": np.float64(0)}, lambda s, e: {"sum": s["sum"] + e["a"]})
    with tf.Session() as s:
        assert s.run(total) == 15
        assert s.run(pair) == (120, 15.0)
        assert s.run(grow).tolist() == [1, 2, 3, 4, 5]
        assert s.run(d) == {"sum": 3.0}
    with pytest.raises(TypeError, match="must match the initial state"):
        ds.reduce(np.float32(0), lambda s, v: v)


def test_shard_and_enumerate():
    assert ints(tf.data.Dataset.range(11).shard(3, 2)) == [2, 5, 8]
    assert ints(tf.data.Dataset.range(2).shard(3, 2)) == []
    got = values(tf.data.Dataset.from_tensor_slices(np.array([b"a", b"b"])).enumerate(4))
    assert got == [(4, b"a"), (5, b"b")]
    assert tf.data.Dataset.range(3).enumerate().output_types == (tf.int64, tf.int64)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"Index must be between 0 and 1 \(currently index = 2\)"):
        values(tf.data.Dataset.range(4).shard(2, 2))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Number of shards must be"):
        values(tf.data.Dataset.range(4).shard(0, 0))


def test_filter_with_legacy_function():
    assert ints(tf.data.Dataset.range(6).filter_with_legacy_function(
        lambda v: tf.equal(v % 2, 0))) == [0, 2, 4]


def test_from_sparse_tensor_slices():
    ds = tf.data.Dataset.from_sparse_tensor_slices(tf.SparseTensor(*SP))
    assert ds.output_types == (tf.int64, tf.float32, tf.int64)
    assert [s.as_list() for s in ds.output_shapes] == [[None, 1], [None], [1]]
    got = [[np.asarray(c).tolist() for c in el] for el in values(ds)]
    assert got == [[[[0], [2]], [1.0, 2.0], [4]], [[], [], [4]], [[[1]], [3.0], [4]]]


# -- SparseTensor components -----------------------------------------------------------------
def test_sparse_slices_batch_unbatch_and_classes():
    ds = tf.data.Dataset.from_tensor_slices({"s": tf.SparseTensor(*SP), "d": np.arange(3)})
    assert ds.output_classes == {"s": tf.SparseTensor, "d": tf.Tensor}
    assert tf.data.get_output_classes(ds)["s"] is tf.SparseTensor
    assert ds.output_shapes["s"].as_list() == [4]
    assert isinstance(ds.element_spec["s"], tf.SparseTensorSpec)
    nx = tf.data.make_one_shot_iterator(ds).get_next()
    assert isinstance(nx["s"], tf.SparseTensor) and nx["s"].shape.as_list() == [4]
    got = drain(nx)
    assert got[0]["s"].indices.tolist() == [[0], [2]] and got[0]["d"] == 0
    assert got[1]["s"].values.tolist() == [] and got[1]["s"].dense_shape.tolist() == [4]
    b = values(tf.data.Dataset.from_tensor_slices(tf.SparseTensorValue(*SP)).batch(2))
    assert b[0].indices.tolist() == [[0, 0], [0, 2]] and b[0].dense_shape.tolist() == [2, 4]
    assert b[1].indices.tolist() == [[0, 1]] and b[1].dense_shape.tolist() == [1, 4]
    u = values(tf.data.Dataset.from_tensors(tf.SparseTensor(*SP)).unbatch())
    assert [v.values.tolist() for v in u] == [[1.0, 2.0], [], [3.0]]
    with pytest.raises(TypeError, match="padded sparse"):
        tf.data.Dataset.from_tensors(tf.SparseTensor(*SP)).padded_batch(2, [3, 4])


def test_sparse_in_and_out_of_map_and_batch_of_ragged_ranks():
    ds = tf.data.Dataset.range(3).map(lambda v: tf.SparseTensor([[0]], [v], [v + 1]))
    assert ds.output_classes is tf.SparseTensor
    b = values(ds.batch(3))
    assert b[0].indices.tolist() == [[0, 0], [1, 0], [2, 0]]
    assert b[0].dense_shape.tolist() == [3, 3]  # each dimension's maximum
    dense = values(tf.data.Dataset.from_tensor_slices(tf.SparseTensor(*SP)).map(
        lambda s: tf.sparse.to_dense(s)))
    assert [d.tolist() for d in dense] == [[1, 0, 2, 0], [0, 0, 0, 0], [0, 3, 0, 0]]


def test_varlen_parsing_in_dataset_map():
    recs = np.array([_example([1, 2], [0.5]), _example([], [1.5]),
                     _example([7, 8, 9], [2.5])], dtype=object)
    feats = {"ids": tf.VarLenFeature(tf.int64), "w": tf.FixedLenFeature([], tf.float32)}
    single = tf.data.Dataset.from_tensor_slices(recs).map(
        lambda s: tf.parse_single_example(s, feats))
    assert single.output_classes == {"ids": tf.SparseTensor, "w": tf.Tensor}
    assert single.output_shapes["ids"].as_list() == [None]
    got = values(single.batch(2))
    assert got[0]["ids"].indices.tolist() == [[0, 0], [0, 1]]
    assert got[0]["ids"].dense_shape.tolist() == [2, 2] and got[0]["w"].tolist() == [0.5, 1.5]
    assert got[1]["ids"].values.tolist() == [7, 8, 9]
    batched = tf.data.Dataset.from_tensor_slices(recs).batch(2).map(
        lambda s: tf.parse_example(s, feats))
    got = values(batched)
    assert got[0]["ids"].dense_shape.tolist() == [2, 2]
    assert got[1]["ids"].indices.tolist() == [[0, 0], [0, 1], [0, 2]]
    ub = values(batched.unbatch())
    assert [v["ids"].values.tolist() for v in ub] == [[1, 2], [], [7, 8, 9]]
    # the usual TF1 pipeline: a sparse feature densified inside the map
    dense = tf.data.Dataset.from_tensor_slices(recs).map(
        lambda s: tf.sparse.to_dense(tf.parse_single_example(s, feats)["ids"]))
    assert [v.tolist() for v in values(dense)] == [[1, 2], [], [7, 8, 9]]


def test_reinitializable_iterator_with_sparse_structure():
    a = tf.data.Dataset.from_tensor_slices(tf.SparseTensor(*SP))
    it = tf.data.Iterator.from_structure(a.output_types, a.output_shapes,
                                         output_classes=a.output_classes)
    nx = it.get_next()
    assert isinstance(nx, tf.SparseTensor)
    with tf.Session() as s:
        s.run(it.make_initializer(a))
        assert s.run(nx).values.tolist() == [1.0, 2.0]
    with pytest.raises(TypeError):
        it.make_initializer(tf.data.Dataset.from_tensor_slices(np.zeros([3, 4], np.float32)))


# -- tf.data.experimental -----------------------------------------------------------------


def test_experimental_transformations():
    e = tf.data.experimental
    r = tf.data.Dataset.range
    assert ints(r(7).apply(e.map_and_batch(lambda v: v * 2, 3))) == [[0, 2, 4], [6, 8, 10],
                                                                     [12]]
    assert ints(r(7).apply(e.map_and_batch(lambda v: v, 3, drop_remainder=True))) == [
        [0, 1, 2], [3, 4, 5]]
    assert ints(r(1, 4).apply(e.parallel_interleave(
        lambda v: tf.data.Dataset.range(v * 10, v * 10 + v), cycle_length=2))) == [
        10, 20, 21, 30, 31, 32]
    assert ints(r(5).batch(2).apply(e.unbatch())) == [0, 1, 2, 3, 4]
    assert ints(r(4).apply(e.prefetch_to_device("/gpu:0")).apply(
        e.copy_to_device("/cpu:0"))) == [0, 1, 2, 3]
    assert ints(r(3).apply(e.enumerate_dataset(10))) == [[10, 0], [11, 1], [12, 2]]
    assert ints(r(6).apply(e.scan(np.int64(1), lambda s, v: (s * 2, s + v)))) == [
        1, 3, 6, 11, 20, 37]
    assert ints(r(10).apply(e.take_while(lambda v: v * v < 20))) == [0, 1, 2, 3, 4]
    assert ints(r(11).apply(e.group_by_window(lambda v: v % 3, lambda k, w: w.batch(4),
                                              2))) == [
        [0, 3], [1, 4], [2, 5], [6, 9], [7, 10], [8]]
    assert ints(r(12).apply(e.group_by_window(lambda v: v % 2, lambda k, w: w.batch(5),
                                              window_size_func=lambda k: k + 2))) == [
        [0, 2], [1, 3, 5], [4, 6], [8, 10], [7, 9, 11]]
    with pytest.raises(ValueError, match="`window_size` argument or the `window_size_func`"):
        r(3).apply(e.group_by_window(lambda v: v, lambda k, w: w))


def test_ignore_errors_drops_failing_elements():
    ds = tf.data.Dataset.from_tensor_slices(np.array([1.0, 0.0, 2.0, 0.0, 4.0], np.float32))
    bad = ds.map(lambda v: tf.debugging.check_numerics(1.0 / v, "bad"))
    with pytest.raises(tf.errors.InvalidArgumentError, match="in the `map` function"):
        values(bad)
    assert ints(bad.apply(tf.data.experimental.ignore_errors())) == [1.0, 0.5, 0.25]


def test_bucket_by_sequence_length():
    e = tf.data.experimental
    seqs = tf.data.Dataset.range(1, 9).map(lambda v: tf.fill([v], v))
    got = ints(seqs.apply(e.bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3, 6],
                                                       [2, 2, 2])))
    assert got == [[[1, 0], [2, 2]], [[3, 3, 3, 0], [4, 4, 4, 4]],
                   [[6, 6, 6, 6, 6, 6, 0], [7, 7, 7, 7, 7, 7, 7]],
                   [[5, 5, 5, 5, 5]], [[8] * 8]]
    got = ints(tf.data.Dataset.range(1, 6).map(lambda v: tf.fill([v], v)).apply(
        e.bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3, 7], [2, 2, 2],
                                    pad_to_bucket_boundary=True)))
    assert got[0] == [[1, 0], [2, 2]] and got[1] == [[3, 3, 3, 0, 0, 0], [4, 4, 4, 4, 0, 0]]
    assert ints(tf.data.Dataset.range(6).apply(e.bucket_by_sequence_length(
        lambda x: tf.cast(x, tf.int32), [2], [2, 3], no_padding=True))) == [
        [0, 1], [2, 3, 4], [5]]


def test_dense_to_sparse_batch():
    ds = tf.data.Dataset.range(1, 5).map(lambda v: tf.fill([v], v)).apply(
        tf.data.experimental.dense_to_sparse_batch(3, [6]))
    assert ds.output_classes is tf.SparseTensor
    got = values(ds)
    assert got[0].indices.tolist() == [[0, 0], [1, 0], [1, 1], [2, 0], [2, 1], [2, 2]]
    assert got[0].dense_shape.tolist() == [3, 6] and got[1].dense_shape.tolist() == [1, 6]
    with pytest.raises(tf.errors.OpError, match="incompatible with the row shape"):
        values(tf.data.Dataset.range(1, 5).map(lambda v: tf.fill([v], v)).apply(
            tf.data.experimental.dense_to_sparse_batch(3, [2])))


def test_choose_and_sample_from_datasets():
    e = tf.data.experimental
    r = tf.data.Dataset.range
    sel = tf.data.Dataset.from_tensor_slices(np.array([1, 0, 0, 0, 1, 1, 1], np.int64))
    assert ints(e.choose_from_datasets([r(2), r(10, 13)], sel)) == [10, 0, 1, 11, 12]
    with pytest.raises(tf.errors.InvalidArgumentError, match="Selector index out of range"):
        values(e.choose_from_datasets([r(2)], tf.data.Dataset.from_tensors(np.int64(3))))
    with pytest.raises(TypeError, match="scalar `tf.int64`"):
        e.choose_from_datasets([r(2)], r(2).map(lambda v: tf.cast(v, tf.int32)))
    got = ints(e.sample_from_datasets([r(5), r(100, 103)], seed=2))
    assert sorted(got) == [0, 1, 2, 3, 4, 100, 101, 102]
    assert [v for v in got if v < 100] == [0, 1, 2, 3, 4]
    again = ints(e.sample_from_datasets([r(5), r(100, 103)], seed=2))
    assert again == got  # seeded: reproducible
    assert ints(e.sample_from_datasets([r(3), r(10, 13)], weights=[0.0, 1.0])) == [10, 11, 12]


def test_counter_random_and_cardinality():
    e = tf.data.experimental
    assert ints(e.Counter(3, -2).take(3)) == [3, 1, -1]
    c = e.Counter(1, 2, tf.float32)
    assert c.output_types == tf.float32 and ints(c.take(2)) == [1.0, 3.0]
    r1 = ints(e.RandomDataset(seed=4).take(4))
    assert r1 == ints(e.RandomDataset(seed=4).take(4)) and len(set(r1)) == 4
    cases = {
        tf.data.Dataset.range(10).batch(3): 4,
        tf.data.Dataset.range(10).batch(3, True): 3,
        tf.data.Dataset.range(3).repeat(): e.INFINITE_CARDINALITY,
        tf.data.Dataset.range(3).repeat().take(7): 7,
        tf.data.Dataset.range(3).filter(lambda v: v > 0): e.UNKNOWN_CARDINALITY,
        tf.data.Dataset.range(20).skip(3).shard(4, 1): 4,
        tf.data.Dataset.range(10).window(3, 2, drop_remainder=True): 4,
        tf.data.Dataset.range(3).filter(lambda v: v > 0).apply(e.assert_cardinality(2)): 2,
    }
    ts = {e.cardinality(ds): n for ds, n in cases.items()}
    with tf.Session() as s:
        for t, n in ts.items():
            assert t.dtype == tf.int64 and s.run(t) == n


def test_assert_cardinality_errors():
    e = tf.data.experimental
    assert ints(tf.data.Dataset.range(3).apply(e.assert_cardinality(3))) == [0, 1, 2]
    with pytest.raises(tf.errors.FailedPreconditionError,
                       match="expected to contain 5 elements but contained only 3 elements"):
        values(tf.data.Dataset.range(3).apply(e.assert_cardinality(5)))
    with pytest.raises(tf.errors.FailedPreconditionError,
                       match="expected to contain 2 elements but contained at least 3"):
        values(tf.data.Dataset.range(3).apply(e.assert_cardinality(2)))


def test_get_single_element():
    e = tf.data.experimental
    one = e.get_single_element(tf.data.Dataset.from_tensors((np.arange(3), b"x")))
    sp = e.get_single_element(tf.data.Dataset.from_tensors(tf.SparseTensor(*SP)))
    assert isinstance(sp, tf.SparseTensor)
    with tf.Session() as s:
        a, b = s.run(one)
        assert a.tolist() == [0, 1, 2] and b == b"x"
        assert s.run(sp).values.tolist() == [1.0, 2.0, 3.0]
        with pytest.raises(tf.errors.InvalidArgumentError, match="Dataset was empty."):
            s.run(e.get_single_element(tf.data.Dataset.range(0)))
        with pytest.raises(tf.errors.InvalidArgumentError, match="more than one element"):
            s.run(e.get_single_element(tf.data.Dataset.range(2)))


def test_csv_dataset_values_defaults_and_errors(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text('h1,h2,h3\n1,2.5,"x,y"\n,3.5,z\n4,,\n')
    e = tf.data.experimental
    ds = e.CsvDataset(str(p), [[0], [1.0], tf.string], header=True)
    assert ds.output_types == (tf.int32, tf.float32, tf.string)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="Field 2 is required but missing in record 2!"):
        values(ds)
    ds = e.CsvDataset(str(p), [[0], [1.0], [""]], header=True)
    assert values(ds) == [(1, 2.5, b"x,y"), (0, 3.5, b"z"), (4, 1.0, b"")]
    sel = e.CsvDataset(str(p), [tf.constant([9], tf.int64), [""]], header=True,
                       select_cols=[0, 2], na_value="z")
    assert values(sel) == [(1, b"x,y"), (9, b""), (4, b"")]
    g = tmp_path / "b.csv.gz"
    g.write_bytes(gzip.compress(b"1,x\nfoo,y\n"))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="Field 0 in record 1 is not a valid int32: foo"):
        values(e.CsvDataset(str(g), [[0], [""]], compression_type="GZIP"))


def test_make_csv_dataset(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("age,score,name,label\n1,0.5,ann,0\n2,1.5,bob,1\n3,,cy,0\n4,3.5,dee,1\n")
    ds = tf.data.experimental.make_csv_dataset(str(p), 3, label_name="label", num_epochs=1,
                                               shuffle=False)
    feats, label = ds.output_types
    assert feats == {"age": tf.int32, "score": tf.float32, "name": tf.string}
    got = values(ds)
    assert got[0][0]["score"].tolist() == [0.5, 1.5, 0.0] and got[0][1].tolist() == [0, 1, 0]
    assert got[1][0]["name"].tolist() == [b"dee"]
    rep = tf.data.experimental.make_csv_dataset(str(p), 4, num_epochs=None, shuffle=True,
                                                shuffle_seed=1)
    b = drain(tf.data.make_one_shot_iterator(rep).get_next(), limit=3)
    assert all(sorted(x["age"].tolist()) == [1, 2, 3, 4] for x in b)


def test_make_batched_features_dataset(tmp_path):
    path = str(tmp_path / "f.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for r in (_example([1, 2], [0.5]), _example([], [1.5]), _example([7], [2.5])):
            w.write(r)
    ds = tf.data.experimental.make_batched_features_dataset(
        path, 2, {"ids": tf.VarLenFeature(tf.int64), "w": tf.FixedLenFeature([], tf.float32)},
        label_key="w", num_epochs=1, shuffle=False)
    got = values(ds)
    assert got[0][0]["ids"].dense_shape.tolist() == [2, 2] and got[0][1].tolist() == [0.5, 1.5]
    assert got[1][0]["ids"].values.tolist() == [7]


def test_tfrecord_writer(tmp_path):
    path = str(tmp_path / "out.tfrecord")
    ds = tf.data.Dataset.from_tensor_slices(np.array([b"one", b"", b"three"]))
    op = tf.data.experimental.TFRecordWriter(path).write(ds)
    with tf.Session() as s:
        s.run(op)
    assert list(tf.io.tf_record_iterator(path)) == [b"one", b"", b"three"]
    gz = str(tmp_path / "out.gz")
    with tf.Session() as s:
        s.run(tf.data.experimental.TFRecordWriter(gz, "GZIP").write(ds))
    assert values(tf.data.TFRecordDataset(gz, "GZIP")) == [b"one", b"", b"three"]
    with pytest.raises(TypeError, match="scalar `DT_STRING`"):
        tf.data.experimental.TFRecordWriter(path).write(tf.data.Dataset.range(2))


def test_numpy_iterator_and_specs():
    ds = tf.data.Dataset.range(3).map(lambda v: (v, v * 2))
    assert [tuple(int(x) for x in el) for el in tf.data.NumpyIterator(ds)] == [
        (0, 0), (1, 2), (2, 4)]
    spec = tf.data.DatasetSpec.from_value(tf.data.Dataset.range(2))
    assert spec.element_spec == tf.TensorSpec([], tf.int64)
    assert tf.data.experimental.DatasetStructure is tf.data.DatasetSpec
    assert tf.data.experimental.TensorStructure is tf.TensorSpec
    assert tf.data.experimental.ThreadingOptions is not None


def test_errors_in_prefetch_and_parallel_map_reach_the_consumer():
    def gen():
        yield 1.0
        raise ValueError("producer broke")
    ds = tf.data.Dataset.from_generator(gen, tf.float32).map(
        lambda v: v + 1, num_parallel_calls=4).prefetch(2)
    got = []
    nx = tf.data.make_one_shot_iterator(ds).get_next()
    with tf.Session() as s:
        got.append(s.run(nx))
        with pytest.raises(tf.errors.InvalidArgumentError, match="producer broke"):
            s.run(nx)
    assert got == [2.0]


def test_batch_keeps_trailing_nul_bytes():
    recs = np.array([b"a\x00", b"\x00", b"b"], dtype=object)
    got = values(tf.data.Dataset.from_tensor_slices(recs).batch(2))
    assert [g.tolist() for g in got] == [[b"a\x00", b"\x00"], [b"b"]]
