"""TFRecord files: the framing (masked CRC32C), the writer and iterator with their
options, TF-written fixtures, and DataLossError for truncated or corrupted files."""
from __future__ import annotations

import gzip
import pathlib
import struct
import zlib

import google_crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors
from flowrt.framework import tf_record

FIXTURES = pathlib.Path(__file__).parent / "data" / "records"


def _mask(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def test_masked_crc_known_values() -> None:
    # CRC32C("123456789") = 0xE3069283 (the Castagnoli check value)
    assert google_crc32c.value(b"123456789") == 0xE3069283
    assert tf_record.masked_crc(b"123456789") == _mask(0xE3069283)
    assert tf_record.masked_crc(b"") == 0xA282EAD8
    # an empty record, byte for byte as TensorFlow 2.21 wrote it
    assert tf_record.encode_record(b"") == bytes.fromhex("0000000000000000" "29039807"
                                                         "d8ea82a2")


def test_record_layout() -> None:
    data = b"hello"
    rec = tf_record.encode_record(data)
    n, crc_n = struct.unpack("<QI", rec[:12])
    assert n == 5 and crc_n == tf_record.masked_crc(rec[:8])
    assert rec[12:17] == data
    assert struct.unpack("<I", rec[17:])[0] == tf_record.masked_crc(data)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=12))
def test_roundtrip_shared_helpers(tmp_path_factory: pytest.TempPathFactory,
                                  records: list[bytes]) -> None:
    p = tmp_path_factory.mktemp("r") / "x.tfrecord"
    with open(p, "wb") as f:
        for r in records:
            tf_record.write_record(f, r)
    with open(p, "rb") as f:
        assert list(tf_record.read_records(f, str(p))) == records


@pytest.mark.parametrize("options", [None, "", "ZLIB", "GZIP",
                                     tf.io.TFRecordCompressionType.GZIP,
                                     tf.python_io.TFRecordOptions("ZLIB",
                                                                  compression_level=9)])
def test_writer_iterator_roundtrip(tmp_path: pathlib.Path, options: object) -> None:
    p = str(tmp_path / "r.tfrecord")
    records = [b"", b"a", b"x" * 100000, "text \u00e9"]
    with tf.io.TFRecordWriter(p, options) as w:
        for r in records:
            w.write(r)
        w.flush()
    got = list(tf.python_io.tf_record_iterator(p, options))
    assert got == [b"", b"a", b"x" * 100000, "text \u00e9".encode()]


def test_compressed_bytes_are_standard_streams(tmp_path: pathlib.Path) -> None:
    p = tmp_path / "r"
    with tf.io.TFRecordWriter(str(p) + ".gz", "GZIP") as w:
        w.write(b"abc")
    with tf.io.TFRecordWriter(str(p) + ".z", tf.io.TFRecordOptions(
            tf.io.TFRecordCompressionType.ZLIB)) as w:
        w.write(b"abc")
    plain = tf_record.encode_record(b"abc")
    assert gzip.decompress((tmp_path / "r.gz").read_bytes()) == plain
    assert zlib.decompress((tmp_path / "r.z").read_bytes()) == plain


def test_options() -> None:
    O = tf.io.TFRecordOptions  # noqa: N806
    assert O.get_compression_type_string(None) == ""
    assert O.get_compression_type_string(O("GZIP")) == "GZIP"
    assert O.get_compression_type_string(tf.io.TFRecordCompressionType.ZLIB) == "ZLIB"
    assert tf.python_io.TFRecordCompressionType.NONE == 0
    assert O.compression_type_map[2] == "GZIP"
    with pytest.raises(ValueError, match='Not a valid compression_type: "LZ4"'):
        O("LZ4")
    with pytest.raises(ValueError):
        tf.io.TFRecordWriter("/tmp/never", "bogus")


def test_writer_after_close_and_double_close(tmp_path: pathlib.Path) -> None:
    w = tf.io.TFRecordWriter(str(tmp_path / "a"))
    w.write(b"1")
    w.close()
    w.close()
    with pytest.raises(errors.FailedPreconditionError):
        w.write(b"2")
    assert list(tf.io.tf_record_iterator(str(tmp_path / "a"))) == [b"1"]


def test_missing_file_and_directory(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.NotFoundError, match="nope"):
        tf.io.tf_record_iterator(str(tmp_path / "nope"))
    with pytest.raises(errors.NotFoundError):
        tf.io.TFRecordWriter(str(tmp_path / "no" / "dir" / "f"))


@pytest.mark.parametrize("cut", [1, 8, 11])
def test_partial_header_ends_the_file(tmp_path: pathlib.Path, cut: int) -> None:
    # as TensorFlow: a file still being written ends where its last whole record does
    p = tmp_path / "t.tfrecord"
    p.write_bytes(tf_record.encode_record(b"first") + tf_record.encode_record(b"x")[:cut])
    assert list(tf.io.tf_record_iterator(str(p))) == [b"first"]


@pytest.mark.parametrize("cut", [12, 14, 17, 20])
def test_truncated_file_is_data_loss(tmp_path: pathlib.Path, cut: int) -> None:
    p = tmp_path / "t.tfrecord"
    first = tf_record.encode_record(b"first")
    p.write_bytes(first + tf_record.encode_record(b"hello")[:cut])
    it = tf.io.tf_record_iterator(str(p))
    assert next(it) == b"first"
    with pytest.raises(errors.DataLossError,
                       match=f"{p}: truncated record at {len(first)}"):
        next(it)


@pytest.mark.parametrize("where", [3, 9, 13, 18])
def test_bad_checksum_is_data_loss(tmp_path: pathlib.Path, where: int) -> None:
    p = tmp_path / "c.tfrecord"
    first = tf_record.encode_record(b"first")
    bad = bytearray(tf_record.encode_record(b"hello"))
    bad[where] ^= 0x40
    p.write_bytes(first + bytes(bad))
    with pytest.raises(errors.DataLossError) as e:
        list(tf.io.tf_record_iterator(str(p)))
    assert str(p) in e.value.message
    assert e.value.message.endswith(f"record at {len(first)}")


def test_corrupt_compressed_stream(tmp_path: pathlib.Path) -> None:
    p = tmp_path / "g"
    p.write_bytes(gzip.compress(tf_record.encode_record(b"abc"))[:-10])
    with pytest.raises(errors.DataLossError, match=str(p)):
        list(tf.io.tf_record_iterator(str(p), "GZIP"))
    p.write_bytes(b"not gzip at all")
    with pytest.raises(errors.DataLossError, match="corrupt compressed data"):
        list(tf.io.tf_record_iterator(str(p), "GZIP"))


def test_concatenated_gzip_members(tmp_path: pathlib.Path) -> None:
    p = tmp_path / "m.gz"
    p.write_bytes(gzip.compress(tf_record.encode_record(b"1"))
                  + gzip.compress(tf_record.encode_record(b"2")))
    assert list(tf.io.tf_record_iterator(str(p), "GZIP")) == [b"1", b"2"]


def test_large_file_crosses_read_chunks(tmp_path: pathlib.Path) -> None:
    p = str(tmp_path / "big")
    records = [bytes([i % 251]) * (70000 + i) for i in range(40)]  # ~2.8 MB
    with tf.io.TFRecordWriter(p) as w:
        for r in records:
            w.write(r)
    assert list(tf.io.tf_record_iterator(p)) == records


@pytest.mark.parametrize("name,kind", [("examples.tfrecord", None),
                                       ("examples.tfrecord.gz", "GZIP"),
                                       ("examples.tfrecord.zlib", "ZLIB")])
def test_reads_tensorflow_written_files(name: str, kind: str | None) -> None:
    records = list(tf.io.tf_record_iterator(str(FIXTURES / name), kind))
    assert len(records) == 3
    ex = [tf.train.Example.FromString(r) for r in records]
    assert [e.features.feature["label"].int64_list.value[0] for e in ex] == [1, 0, 7]
    assert list(ex[2].features.feature["name"].bytes_list.value) == ["gamma \u00e9".encode()]
    assert list(ex[0].features.feature["weights"].float_list.value) == [0.5, -1.25]
    assert "tokens" not in ex[1].features.feature


def test_writes_the_bytes_tensorflow_writes(tmp_path: pathlib.Path) -> None:
    records = list(tf.io.tf_record_iterator(str(FIXTURES / "examples.tfrecord")))
    p = tmp_path / "again.tfrecord"
    with tf.io.TFRecordWriter(str(p)) as w:
        for r in records:
            w.write(r)
    assert p.read_bytes() == (FIXTURES / "examples.tfrecord").read_bytes()


def test_example_protos_are_wire_compatible() -> None:
    ex = tf.train.Example(features=tf.train.Features(feature={
        "i": tf.train.Feature(int64_list=tf.train.Int64List(value=[1, 300])),
        "f": tf.train.Feature(float_list=tf.train.FloatList(value=[1.5])),
        "b": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"x"]))}))
    wire = ex.SerializeToString(deterministic=True)
    # packed int64: field 1, length 3, varints 1 and 300 (0xac 0x02)
    assert b"\x1a\x05\x0a\x03\x01\xac\x02" in wire
    assert b"\x12\x06\x0a\x04\x00\x00\xc0\x3f" in wire  # packed float 1.5
    seq = tf.train.SequenceExample()
    seq.feature_lists.feature_list["s"].feature.add().int64_list.value.append(2)
    assert tf.train.SequenceExample.FromString(seq.SerializeToString()) == seq
    assert tf.train.FeatureLists and tf.train.FeatureList and tf.train.Features
