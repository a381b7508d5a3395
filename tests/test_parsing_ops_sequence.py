"""tf.io.parse_sequence_example (a batch of SequenceExamples): context features, padded
FixedLenSequenceFeature lists and their lengths, VarLenFeature lists with a batch index,
static shapes, and TF's errors naming the example and the feature."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors
from flowrt.proto import example_pb2


def seq_ex(ctx: dict[str, Any] | None = None, lists: dict[str, list] | None = None) -> bytes:
    """A serialized SequenceExample: context int64/float/bytes features, and per feature
    list one Feature per step (a list of values; ``None``: an empty Feature)."""
    se = example_pb2.SequenceExample()
    for k, v in (ctx or {}).items():
        f = se.context.feature[k]
        _fill(f, v)
    for k, steps in (lists or {}).items():
        fl = se.feature_lists.feature_list[k]
        fl.SetInParent()
        for v in steps:
            f = fl.feature.add()
            if v is not None:
                _fill(f, v)
    return se.SerializeToString()


def _fill(f: Any, v: list) -> None:
    if isinstance(v[0], float):
        f.float_list.value.extend(v)
    elif isinstance(v[0], int):
        f.int64_list.value.extend(v)
    else:
        f.bytes_list.value.extend(v)


def run(fetches: Any) -> Any:
    with tf.Session() as sess:
        return sess.run(fetches)


DATA = [seq_ex({"len": [2]}, {"tok": [[b"a"], [b"b"]], "v": [[1.0], [2.0, 3.0]]}),
        seq_ex({"len": [3]}, {"tok": [[b"c"]], "v": []}),
        seq_ex({"len": [1]}, {"v": [[4.0, 5.0, 6.0]]})]


def test_batch_values_padding_lengths_and_sparse() -> None:
    c, f, n = tf.io.parse_sequence_example(
        DATA, context_features={"len": tf.io.FixedLenFeature([], tf.int64),
                                "w": tf.io.FixedLenFeature([2], tf.float32,
                                                           default_value=[7.0, 8.0])},
        sequence_features={"tok": tf.io.FixedLenSequenceFeature([], tf.string,
                                                                allow_missing=True),
                           "v": tf.io.VarLenFeature(tf.float32)},
        example_names=["x", "y", "z"])
    assert sorted(c) == ["len", "w"] and sorted(f) == ["tok", "v"] and list(n) == ["tok"]
    assert f["tok"].shape.as_list() == [3, None] and n["tok"].shape.as_list() == [3]
    assert f["v"].indices.shape.as_list() == [None, 3]
    c, f, n = run((c, f, n))
    np.testing.assert_array_equal(c["len"], [2, 3, 1])
    np.testing.assert_array_equal(c["w"], [[7, 8]] * 3)
    assert f["tok"].tolist() == [[b"a", b"b"], [b"c", b""], [b"", b""]]
    assert n["tok"].dtype == np.int64 and n["tok"].tolist() == [2, 1, 0]
    sp = f["v"]
    assert sp.indices.tolist() == [[0, 0, 0], [0, 1, 0], [0, 1, 1], [2, 0, 0], [2, 0, 1],
                                   [2, 0, 2]]
    np.testing.assert_array_equal(sp.values, np.float32([1, 2, 3, 4, 5, 6]))
    assert sp.dense_shape.tolist() == [3, 2, 3]


def test_shaped_steps_and_int_padding() -> None:
    data = [seq_ex(lists={"p": [[1, 2], [3, 4], [5, 6]]}), seq_ex(lists={"p": [[7, 8]]})]
    _, f, n = run(tf.io.parse_sequence_example(
        data, sequence_features={"p": tf.io.FixedLenSequenceFeature([2], tf.int64)}))
    assert f["p"].shape == (2, 3, 2) and f["p"].dtype == np.int64
    assert f["p"].tolist() == [[[1, 2], [3, 4], [5, 6]], [[7, 8], [0, 0], [0, 0]]]
    assert n["p"].tolist() == [3, 1]


def test_context_only_and_sequence_only() -> None:
    c, f, n = run(tf.io.parse_sequence_example(
        DATA, context_features={"len": tf.io.VarLenFeature(tf.int64)}))
    assert f == {} and n == {}
    assert c["len"].indices.tolist() == [[0, 0], [1, 0], [2, 0]]
    assert c["len"].dense_shape.tolist() == [3, 1]
    with pytest.raises(ValueError, match="Missing features"):
        tf.io.parse_sequence_example(DATA)


def test_empty_batch() -> None:
    ser = tf.placeholder(tf.string, [None])
    _, f, n = tf.io.parse_sequence_example(
        ser, sequence_features={"p": tf.io.FixedLenSequenceFeature([2], tf.float32,
                                                                   allow_missing=True)})
    with tf.Session() as sess:
        fv, nv = sess.run((f["p"], n["p"]), {ser: np.zeros([0], dtype=object)})
    assert fv.shape == (0, 0, 2) and nv.shape == (0,)


def test_missing_required_feature_list_names_example() -> None:
    _, f, _ = tf.io.parse_sequence_example(
        DATA, sequence_features={"nope": tf.io.FixedLenSequenceFeature([], tf.int64)},
        example_names=["x", "y", "z"])
    with pytest.raises(errors.InvalidArgumentError,
                       match="Name: x, Feature list 'nope' is required but could not be "
                             "found"):
        run(f)


def test_wrong_type_and_count_errors() -> None:
    _, f, _ = tf.io.parse_sequence_example(
        DATA, sequence_features={"tok": tf.io.FixedLenSequenceFeature([], tf.int64,
                                                                      allow_missing=True)})
    with pytest.raises(errors.InvalidArgumentError,
                       match="Name: <unknown>, Feature list: tok, Index: 0.  Data types "
                             "don't match. Expected type: int64"):
        run(f)
    _, f, _ = tf.io.parse_sequence_example(
        DATA, sequence_features={"v": tf.io.FixedLenSequenceFeature([], tf.float32)},
        example_names=["x", "y", "z"])
    with pytest.raises(errors.InvalidArgumentError, match="Name: x, Key: v, Index: 1.  "
                       "Number of float values != expected.  values size: 2"):
        run(f)
    c, _, _ = tf.io.parse_sequence_example(
        DATA, context_features={"len": tf.io.FixedLenFeature([], tf.string)})
    with pytest.raises(errors.InvalidArgumentError, match="Key: len, Index: 0.  Data "
                       "types don't match"):
        run(c)


def test_bad_input_and_arguments() -> None:
    _, f, _ = tf.io.parse_sequence_example(
        ["not a proto \xff"], sequence_features={"a": tf.io.VarLenFeature(tf.int64)})
    with pytest.raises(errors.InvalidArgumentError, match="Could not parse example input"):
        run(f)
    with pytest.raises(ValueError, match=r"feature_list_dense_defaults\[a\] must be None"):
        tf.io.parse_sequence_example(DATA, sequence_features={
            "a": tf.io.FixedLenSequenceFeature([], tf.int64, default_value=3)})
    with pytest.raises(ValueError, match="Unsupported"):
        tf.io.parse_sequence_example(DATA, context_features={
            "a": tf.io.FixedLenSequenceFeature([], tf.int64, allow_missing=True)})
    with pytest.raises(ValueError, match="rank 1"):
        tf.io.parse_sequence_example(DATA[0], sequence_features={
            "v": tf.io.VarLenFeature(tf.float32)})


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.lists(st.integers(-2**40, 2**40), min_size=2, max_size=2),
                         max_size=4), min_size=1, max_size=4))
def test_matches_single_example_parse(batch: list[list[list[int]]]) -> None:
    """Each row of the batched parse is the single-example parse, padded with zeros."""
    data = [seq_ex(lists={"p": steps}) for steps in batch]
    feats = {"p": tf.io.FixedLenSequenceFeature([2], tf.int64, allow_missing=True)}
    _, f, n = tf.io.parse_sequence_example(data, sequence_features=feats)
    singles = [tf.io.parse_single_sequence_example(d, sequence_features=feats)[1]["p"]
               for d in data]
    fv, nv, sv = run((f["p"], n["p"], singles))
    assert nv.tolist() == [len(s) for s in batch]
    for row, s, k in zip(fv, sv, nv):
        np.testing.assert_array_equal(row[:k], s)
        assert not row[k:].any()
