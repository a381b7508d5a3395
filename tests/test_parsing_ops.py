"""tf.parse_example, parse_single_example, parse_single_sequence_example and
decode_json_example: values, static shapes, defaults, padding, SparseTensors, TF's error
messages, and Examples written by TensorFlow (tests/data/records)."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors

FIXTURES = pathlib.Path(__file__).parent / "data" / "records"
#: what compat/make_record_fixtures.py wrote: (label, weights, name, tokens)
FIXTURE_EXAMPLES = [(1, [0.5, -1.25], b"alpha", [3, 1, 4]),
                    (0, [2.0, 0.0], b"beta", []),
                    (7, [-0.125, 8.5], "gamma \u00e9".encode(), [1, 5, 9, 2, 6])]


def ex(**kw: list) -> bytes:
    e = tf.train.Example()
    for k, v in kw.items():
        f = e.features.feature[k]
        if not v:
            f.SetInParent()
        elif isinstance(v[0], float):
            f.float_list.value.extend(v)
        elif isinstance(v[0], int):
            f.int64_list.value.extend(v)
        else:
            f.bytes_list.value.extend(v)
    return e.SerializeToString()


def run(fetches: object, feed: dict | None = None) -> object:
    with tf.Session() as sess:
        return sess.run(fetches, feed)


@pytest.fixture(autouse=True)
def _graph() -> object:
    with tf.Graph().as_default() as g:
        yield g


def test_fixed_len_dense_and_defaults() -> None:
    out = tf.parse_example([ex(a=[1, 2], s=[b"q"]), ex(a=[3, 4])], {
        "a": tf.FixedLenFeature([2], tf.int64),
        "s": tf.FixedLenFeature([], tf.string, default_value="dflt"),
        "f": tf.FixedLenFeature([1, 2], tf.float32, default_value=[[1.5, 2.5]])})
    assert out["a"].shape.as_list() == [2, 2] and out["a"].dtype == tf.int64
    assert out["f"].shape.as_list() == [2, 1, 2]
    v = run(out)
    np.testing.assert_array_equal(v["a"], [[1, 2], [3, 4]])
    assert v["a"].dtype == np.int64
    assert v["s"].tolist() == [b"q", b"dflt"]
    np.testing.assert_array_equal(v["f"], [[[1.5, 2.5]], [[1.5, 2.5]]])
    assert v["f"].dtype == np.float32


def test_var_len_sparse() -> None:
    p = tf.placeholder(tf.string, [None])
    out = tf.parse_example(p, {"v": tf.VarLenFeature(tf.float32),
                               "w": tf.VarLenFeature(tf.string)})
    assert isinstance(out["v"], tf.SparseTensor)
    assert out["v"].indices.shape.as_list() == [None, 2]
    assert out["v"].dense_shape.shape.as_list() == [2]
    v = run(out, {p: [ex(v=[1.0, 2.0]), ex(), ex(v=[7.0], w=[b"a", b"b", b"c"])]})
    np.testing.assert_array_equal(v["v"].indices, [[0, 0], [0, 1], [2, 0]])
    np.testing.assert_array_equal(v["v"].values, np.float32([1, 2, 7]))
    np.testing.assert_array_equal(v["v"].dense_shape, [3, 2])
    np.testing.assert_array_equal(v["w"].indices, [[2, 0], [2, 1], [2, 2]])
    assert v["w"].values.tolist() == [b"a", b"b", b"c"]
    empty = run(out, {p: []})
    assert empty["v"].indices.shape == (0, 2)
    np.testing.assert_array_equal(empty["v"].dense_shape, [0, 0])


def test_fixed_len_sequence_feature_pads() -> None:
    out = tf.parse_example([ex(a=[1.0, 2.0, 3.0, 4.0]), ex(b=[1]), ex(a=[])], {
        "a": tf.FixedLenSequenceFeature([2], tf.float32, allow_missing=True,
                                        default_value=-1.0),
        "c": tf.FixedLenSequenceFeature([], tf.string, allow_missing=True)})
    assert out["a"].shape.as_list() == [3, None, 2]
    v = run(out)
    np.testing.assert_array_equal(v["a"], [[[1, 2], [3, 4]], [[-1, -1], [-1, -1]],
                                           [[-1, -1], [-1, -1]]])
    assert v["c"].shape == (3, 0)
    with pytest.raises(ValueError, match="requires allow_missing to be True"):
        tf.parse_example([ex()], {"a": tf.FixedLenSequenceFeature([], tf.int64)})


def test_sparse_feature() -> None:
    out = tf.parse_example([ex(ix=[5, 1], v=[1.0, 2.0]), ex(), ex(ix=[3], v=[7.0])], {
        "sp": tf.SparseFeature("ix", "v", tf.float32, 10)})
    assert set(out) == {"sp"}
    v = run(out)["sp"]
    np.testing.assert_array_equal(v.indices, [[0, 1], [0, 5], [2, 3]])
    np.testing.assert_array_equal(v.values, np.float32([2, 1, 7]))
    np.testing.assert_array_equal(v.dense_shape, [3, 10])


def test_errors_name_feature_and_example() -> None:
    p = tf.placeholder(tf.string, [None])
    req = tf.parse_example(p, {"a": tf.FixedLenFeature([], tf.int64)})
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"Name: <unknown>, Feature: a \(data type: int64\) is required "
                             "but could not be found."):
        run(req, {p: [ex(a=[1]), ex(b=[1])]})
    named = tf.parse_example(p, {"a": tf.FixedLenFeature([], tf.int64)},
                             example_names=["n0", "n1"])
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"Name: n1, Key: a, Index: 1\.  Number of int64 values != "
                             r"expected\.  Values size: 2 but output shape: \[\]"):
        run(named, {p: [ex(a=[1]), ex(a=[1, 2])]})
    with pytest.raises(errors.InvalidArgumentError,
                       match="Key: a, Index: 0.  Data types don't match. Data type: float "
                             "but expected type: int64"):
        run(req, {p: [ex(a=[1.0])]})
    var = tf.parse_example(p, {"a": tf.VarLenFeature(tf.string)})
    with pytest.raises(errors.InvalidArgumentError,
                       match="Expected type: string, Actual type: float"):
        run(var, {p: [ex(a=[1.0])]})
    with pytest.raises(errors.InvalidArgumentError, match="Could not parse example input"):
        run(var, {p: [ex(a=[b"x"]), b"\x0a\x03abc"]})
    seq = tf.parse_example(p, {"a": tf.FixedLenSequenceFeature([2], tf.int64,
                                                               allow_missing=True)})
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"not a multiple of stride length. Saw 3 values but output "
                             r"shape is: \[\?,2\]"):
        run(seq, {p: [ex(a=[1, 2, 3])]})


def test_python_errors() -> None:
    with pytest.raises(ValueError, match="Missing shape for feature a"):
        tf.parse_example(["x"], {"a": tf.FixedLenFeature(None, tf.int64)})
    with pytest.raises(TypeError, match="not in list of allowed values"):
        tf.parse_example(["x"], {"a": tf.FixedLenFeature([], tf.int32)})
    with pytest.raises(ValueError):
        tf.parse_example(["x"], {})
    with pytest.raises(ValueError, match="Conflicting type"):
        tf.parse_example(["x"], {"v": tf.VarLenFeature(tf.int64),
                                 "sp": tf.SparseFeature("ix", "v", tf.float32, 3)})


def test_feature_configs_are_tf_namedtuples() -> None:
    f = tf.io.FixedLenFeature([2], tf.int64)
    assert f.default_value is None and f._fields == ("shape", "dtype", "default_value")
    assert tf.FixedLenSequenceFeature([3], tf.string).allow_missing is False
    assert tf.SparseFeature("i", "v", tf.float32, 4).already_sorted is False
    assert tf.io.VarLenFeature(tf.string).dtype == tf.string


def test_parse_single_example() -> None:
    q = tf.placeholder(tf.string, [])
    out = tf.parse_single_example(q, {"a": tf.FixedLenFeature([2], tf.int64),
                                      "b": tf.VarLenFeature(tf.string),
                                      "c": tf.FixedLenSequenceFeature([], tf.float32,
                                                                      allow_missing=True)})
    assert out["a"].shape.as_list() == [2]
    assert out["b"].indices.shape.as_list() == [None, 1]
    assert out["c"].shape.as_list() == [None]
    v = run(out, {q: ex(a=[4, 5], b=[b"x", b"y"], c=[0.5, 1.5, 2.5])})
    np.testing.assert_array_equal(v["a"], [4, 5])
    np.testing.assert_array_equal(v["b"].indices, [[0], [1]])
    np.testing.assert_array_equal(v["b"].dense_shape, [2])
    np.testing.assert_array_equal(v["c"], np.float32([0.5, 1.5, 2.5]))
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"^Feature: a \(data type: int64\) is required"):
        run(out, {q: ex(b=[b"x"])})
    with pytest.raises(errors.InvalidArgumentError, match="Key: a.  Number of int64"):
        run(out, {q: ex(a=[1])})


def test_parse_single_sequence_example() -> None:
    data = (FIXTURES / "sequence.tfrecord")
    rec = next(tf.io.tf_record_iterator(str(data)))
    ctx, seq = tf.parse_single_sequence_example(
        rec, context_features={"length": tf.FixedLenFeature([], tf.int64),
                               "other": tf.VarLenFeature(tf.float32)},
        sequence_features={"ids": tf.FixedLenSequenceFeature([2], tf.int64),
                           "words": tf.VarLenFeature(tf.string),
                           "absent": tf.FixedLenSequenceFeature([], tf.float32,
                                                                allow_missing=True)})
    assert seq["ids"].shape.as_list() == [None, 2]
    c, s = run((ctx, seq))
    assert c["length"] == 3 and c["other"].values.size == 0
    np.testing.assert_array_equal(s["ids"], [[0, 0], [1, 10], [2, 20]])
    np.testing.assert_array_equal(s["words"].indices, [[1, 0], [2, 0], [2, 1]])
    assert s["words"].values.tolist() == [b"bb", b"ccc", b"ccc"]
    np.testing.assert_array_equal(s["words"].dense_shape, [3, 2])
    assert s["absent"].shape == (0,)
    _, miss = tf.parse_single_sequence_example(
        rec, sequence_features={"nope": tf.FixedLenSequenceFeature([], tf.int64)})
    with pytest.raises(errors.InvalidArgumentError,
                       match="Feature list 'nope' is required but could not be found"):
        run(miss)


def test_parses_tensorflow_written_records() -> None:
    for name, kind in (("examples.tfrecord", None), ("examples.tfrecord.gz", "GZIP")):
        records = list(tf.io.tf_record_iterator(str(FIXTURES / name), kind))
        out = run(tf.parse_example(records, {
            "label": tf.FixedLenFeature([], tf.int64),
            "weights": tf.FixedLenFeature([2], tf.float32),
            "name": tf.FixedLenFeature([], tf.string),
            "tokens": tf.VarLenFeature(tf.int64)}))
        assert out["label"].tolist() == [e[0] for e in FIXTURE_EXAMPLES]
        np.testing.assert_array_equal(out["weights"],
                                      np.float32([e[1] for e in FIXTURE_EXAMPLES]))
        assert out["name"].tolist() == [e[2] for e in FIXTURE_EXAMPLES]
        assert out["tokens"].values.tolist() == [t for e in FIXTURE_EXAMPLES for t in e[3]]
        np.testing.assert_array_equal(out["tokens"].dense_shape, [3, 5])


def test_decode_json_example() -> None:
    j = tf.decode_json_example(
        [['{"features": {"feature": {"a": {"int64List": {"value": ["3", "4"]}}}}}']])
    assert j.shape.as_list() == [1, 1]
    binary = run(j)
    e = tf.train.Example.FromString(binary[0, 0])
    assert list(e.features.feature["a"].int64_list.value) == [3, 4]
    with pytest.raises(errors.InvalidArgumentError, match="Error while parsing JSON"):
        run(tf.io.decode_json_example("{not json"))


_values = st.one_of(
    st.lists(st.integers(-2**63, 2**63 - 1), max_size=5).map(lambda v: ("i", v)),
    st.lists(st.floats(width=32, allow_nan=False), max_size=5).map(lambda v: ("f", v)),
    st.lists(st.binary(max_size=8), max_size=5).map(lambda v: ("b", v)))


@settings(max_examples=30, deadline=None)
@given(st.lists(_values, min_size=1, max_size=6))
def test_var_len_matches_the_protos(rows: list) -> None:
    kind = rows[0][0]
    rows = [v for k, v in rows if k == kind]
    dtype = {"i": tf.int64, "f": tf.float32, "b": tf.string}[kind]
    serialized = []
    for v in rows:
        e = tf.train.Example()
        lst = {"i": "int64_list", "f": "float_list", "b": "bytes_list"}[kind]
        getattr(e.features.feature["x"], lst).value.extend(v)
        serialized.append(e.SerializeToString())
    with tf.Graph().as_default():
        sp = run(tf.parse_example(serialized, {"x": tf.VarLenFeature(dtype)}))["x"]
    flat = [x for v in rows for x in v]
    if kind == "f":
        np.testing.assert_array_equal(sp.values, np.float32(flat))
    else:
        assert sp.values.tolist() == flat
    assert sp.dense_shape.tolist() == [len(rows), max(len(v) for v in rows)]
    assert sp.indices.tolist() == [[i, j] for i, v in enumerate(rows) for j in range(len(v))]
