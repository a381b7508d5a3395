"""TFRecord files and tf.train.Example parsing under TensorFlow and flowrt: files written
by one implementation read by the other (plain, ZLIB, GZIP; byte-identical when
uncompressed), Example protos serialized by one parsed by the other, and
``parse_example`` / ``parse_single_example`` / ``parse_single_sequence_example`` programs
compared by values, dtypes, static shapes and error classes.

Op names and types are not compared for the parsing programs: TF 2.x builds
``ParseExampleV2`` where TF 1.15 (and flowrt) build ``ParseExample`` /
``ParseSingleExample``.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

from compat_harness import Run, module, run_both, run_custom

TMP = tempfile.mkdtemp(prefix="flowrt_compat_records_")
RECORDS = [b"", b"a", b"\x00\xff" * 1000, os.urandom(70000)]
PARSE_KEYS = ("kind", "dtype", "shape")


def _path(name: str) -> str:
    return os.path.join(TMP, name)


@pytest.mark.parametrize("kind", [None, "ZLIB", "GZIP"])
@pytest.mark.parametrize("writer,reader", [("tf", "flowrt"), ("flowrt", "tf")])
def test_files_cross_read(kind: str | None, writer: str, reader: str) -> None:
    p = _path(f"x_{writer}_{kind}.tfrecord")
    w = module(writer)
    with w.io.TFRecordWriter(p, w.io.TFRecordOptions(kind)) as f:
        for r in RECORDS:
            f.write(r)
    assert list(module(reader).io.tf_record_iterator(p, kind)) == RECORDS


def test_plain_files_are_byte_identical() -> None:
    for impl in ("tf", "flowrt"):
        with module(impl).python_io.TFRecordWriter(_path(f"same_{impl}")) as f:
            for r in RECORDS:
                f.write(r)
    with open(_path("same_tf"), "rb") as a, open(_path("same_flowrt"), "rb") as b:
        assert a.read() == b.read()


def test_corruption_errors_agree() -> None:
    tf = module("tf")
    p = _path("corrupt")
    with tf.io.TFRecordWriter(p) as f:
        f.write(b"hello")
        f.write(b"world")
    data = open(p, "rb").read()
    for bad, want in ((data[:-3], "DataLossError"), (data[:21] + b"\x00" + data[22:],
                      "DataLossError"), (data[:35], "DataLossError"), (data[:30], None)):
        with open(p, "wb") as f:
            f.write(bad)
        got = {}
        for impl in ("tf", "flowrt"):
            m = module(impl)
            try:
                list(m.io.tf_record_iterator(p))
                got[impl] = None
            except m.errors.OpError as e:
                got[impl] = type(e).__name__
        assert got["tf"] == got["flowrt"] == want, got


def _example(tf: object, i: int) -> bytes:
    e = tf.train.Example()
    f = e.features.feature
    f["label"].int64_list.value.append(i - 3)
    f["x"].float_list.value.extend([0.5 * i, -1.0, float(i) ** 2])
    f["name"].bytes_list.value.append(b"n%d" % i)
    f["tokens"].int64_list.value.extend(range(i % 4))
    if i % 2:
        f["seq"].float_list.value.extend([1.0 * i] * (2 * (i % 3)))
    return e.SerializeToString()


@pytest.mark.parametrize("writer", ["tf", "flowrt"])
def test_example_protos_cross_parse(writer: str) -> None:
    data = [_example(module(writer), i) for i in range(6)]
    reader = module("flowrt" if writer == "tf" else "tf")
    assert [str(reader.train.Example.FromString(d)) for d in data] == \
           [str(module(writer).train.Example.FromString(d)) for d in data]


SERIALIZED = [_example(module("flowrt"), i) for i in range(6)]
FEATURES = lambda tf: {  # noqa: E731
    "label": tf.FixedLenFeature([], tf.int64),
    "x": tf.FixedLenFeature([3], tf.float32),
    "name": tf.FixedLenFeature([], tf.string),
    "missing": tf.FixedLenFeature([2], tf.float32, default_value=[7.0, 8.0]),
    "tokens": tf.VarLenFeature(tf.int64),
    "seq": tf.FixedLenSequenceFeature([2], tf.float32, allow_missing=True,
                                      default_value=-1.0)}

PROGRAMS = {
    "parse_example": lambda tf: tf.parse_example(SERIALIZED, FEATURES(tf)),
    "parse_example_fed": lambda tf: (lambda p: Run(tf.parse_example(p, FEATURES(tf)),
                                                   {p: SERIALIZED}))(
        tf.placeholder(tf.string, [None])),
    "parse_example_names": lambda tf: tf.io.parse_example(
        SERIALIZED[:2], {"label": tf.FixedLenFeature([], tf.int64)},
        example_names=["a", "b"]),
    "parse_example_sparse_feature": lambda tf: tf.parse_example(
        SERIALIZED, {"sp": tf.SparseFeature("tokens", "x", tf.float32, 9)}),
    "parse_example_missing": lambda tf: tf.parse_example(
        SERIALIZED, {"nope": tf.FixedLenFeature([], tf.int64)}),
    "parse_example_wrong_len": lambda tf: tf.parse_example(
        SERIALIZED, {"x": tf.FixedLenFeature([2], tf.float32)}),
    "parse_example_wrong_type": lambda tf: tf.parse_example(
        SERIALIZED, {"x": tf.VarLenFeature(tf.int64)}),
    "parse_example_bad_proto": lambda tf: tf.parse_example(
        [b"\x0a\x03abc"], {"x": tf.VarLenFeature(tf.int64)}),
    "parse_single_example": lambda tf: tf.parse_single_example(SERIALIZED[3], FEATURES(tf)),
    "parse_single_example_missing": lambda tf: tf.parse_single_example(
        SERIALIZED[3], {"nope": tf.FixedLenFeature([], tf.int64)}),
    "decode_json_example": lambda tf: tf.parse_example(tf.decode_json_example(
        ['{"features": {"feature": {"a": {"floatList": {"value": [1.5, 2]}}}}}']),
        {"a": tf.FixedLenFeature([2], tf.float32)}),
}


@pytest.mark.parametrize("program", [pytest.param(v, id=k)
                                     for k, v in sorted(PROGRAMS.items())])
def test_parsing(program: object) -> None:
    run_both(program, static_keys=PARSE_KEYS)


def _sequence(tf: object) -> bytes:
    se = tf.train.SequenceExample()
    se.context.feature["length"].int64_list.value.append(3)
    for t in range(3):
        se.feature_lists.feature_list["ids"].feature.add().int64_list.value.extend([t, -t])
        se.feature_lists.feature_list["w"].feature.add().bytes_list.value.extend([b"z"] * t)
    return se.SerializeToString()


def test_parse_single_sequence_example() -> None:
    run_both(lambda tf: tf.parse_single_sequence_example(
        _sequence(tf), {"length": tf.FixedLenFeature([], tf.int64),
                        "c": tf.VarLenFeature(tf.float32)},
        {"ids": tf.FixedLenSequenceFeature([2], tf.int64),
         "w": tf.VarLenFeature(tf.string),
         "gone": tf.FixedLenSequenceFeature([], tf.float32, allow_missing=True)}),
        static_keys=PARSE_KEYS)
    run_both(lambda tf: tf.parse_single_sequence_example(
        _sequence(tf), sequence_features={"gone": tf.FixedLenSequenceFeature(
            [], tf.float32)})[1], static_keys=PARSE_KEYS)


def test_feature_config_reprs() -> None:
    run_custom(lambda tf: [repr(tf.FixedLenFeature([2], tf.int64)),
                           repr(tf.VarLenFeature(tf.float32)),
                           repr(tf.io.FixedLenSequenceFeature([3], tf.string)),
                           repr(tf.SparseFeature("i", "v", tf.float32, 10))])


def test_options_api() -> None:
    run_custom(lambda tf: [tf.io.TFRecordOptions.get_compression_type_string(x)
                           for x in (None, "GZIP", tf.io.TFRecordCompressionType.ZLIB,
                                     tf.python_io.TFRecordOptions("ZLIB"))]
               + [tf.python_io.TFRecordCompressionType.GZIP])
