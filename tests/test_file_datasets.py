"""tf.data's file datasets: TFRecordDataset (compression, several files,
num_parallel_reads interleaving, a dataset of file names), TextLineDataset,
FixedLengthRecordDataset, and their errors."""
from __future__ import annotations

import gzip
import pathlib

import pytest

import flowrt as tf
from flowrt import errors


@pytest.fixture
def g() -> tf.Graph:
    with tf.Graph().as_default() as graph:
        yield graph


def _all(ds: tf.data.Dataset) -> list:
    nxt = ds.make_one_shot_iterator().get_next()
    out = []
    with tf.Session() as s:
        with pytest.raises(errors.OutOfRangeError):
            while True:
                out.append(s.run(nxt))
    return out


def _records(tmp_path: pathlib.Path, sizes: list[int], compression: str | None = None
             ) -> list[str]:
    files = []
    for i, n in enumerate(sizes):
        p = str(tmp_path / f"f{i}.tfr")
        with tf.python_io.TFRecordWriter(p, compression) as w:
            for j in range(n):
                w.write(f"{i}-{j}".encode())
        files.append(p)
    return files


def test_tfrecord_dataset_files_in_order(tmp_path: pathlib.Path, g: tf.Graph) -> None:
    files = _records(tmp_path, [2, 0, 3])
    assert _all(tf.data.TFRecordDataset(files)) == [b"0-0", b"0-1", b"2-0", b"2-1", b"2-2"]
    assert _all(tf.data.TFRecordDataset(files[0])) == [b"0-0", b"0-1"]


def test_tfrecord_dataset_compression(tmp_path: pathlib.Path, g: tf.Graph) -> None:
    files = _records(tmp_path, [2], "ZLIB")
    assert _all(tf.data.TFRecordDataset(files, compression_type="ZLIB")) == [b"0-0", b"0-1"]


def test_num_parallel_reads_interleaves(tmp_path: pathlib.Path, g: tf.Graph) -> None:
    files = _records(tmp_path, [3, 2, 3])
    got = _all(tf.data.TFRecordDataset(files, num_parallel_reads=2))
    # an exhausted file's slot is refilled when the cycle comes back to it (as TF)
    assert got == [b"0-0", b"1-0", b"0-1", b"1-1", b"0-2", b"2-0", b"2-1", b"2-2"]
    files = _records(tmp_path, [1, 3, 2])
    got = _all(tf.data.TFRecordDataset(files, num_parallel_reads=2))
    assert got == [b"0-0", b"1-0", b"1-1", b"2-0", b"1-2", b"2-1"]


def test_filenames_from_a_placeholder_and_a_dataset(tmp_path: pathlib.Path,
                                                    g: tf.Graph) -> None:
    files = _records(tmp_path, [1, 1])
    names = tf.placeholder(tf.string, [None])
    it = tf.data.TFRecordDataset(names).make_initializable_iterator()
    nxt = it.get_next()
    with tf.Session() as s:
        s.run(it.initializer, {names: files[::-1]})
        assert [s.run(nxt), s.run(nxt)] == [b"1-0", b"0-0"]
    ds = tf.data.TFRecordDataset(tf.data.Dataset.from_tensor_slices(files))
    assert _all(ds) == [b"0-0", b"1-0"]


def test_text_line_dataset(tmp_path: pathlib.Path, g: tf.Graph) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt.gz"
    a.write_bytes(b"x\r\n\ny")
    b.write_bytes(gzip.compress(b"1\n2\n"))
    assert _all(tf.data.TextLineDataset(str(a))) == [b"x", b"", b"y"]
    assert _all(tf.data.TextLineDataset([str(b)], compression_type="GZIP")) == [b"1", b"2"]


def test_fixed_length_record_dataset(tmp_path: pathlib.Path, g: tf.Graph) -> None:
    p = tmp_path / "f.bin"
    p.write_bytes(b"HHabcdefF")
    ds = tf.data.FixedLengthRecordDataset(str(p), 3, header_bytes=2, footer_bytes=1)
    assert ds.output_types == tf.string and ds.output_shapes.as_list() == []
    assert _all(ds) == [b"abc", b"def"]
    decoded = ds.map(lambda r: tf.decode_raw(r, tf.uint8)).batch(2)
    assert [x.tolist() for x in _all(decoded)] == [[[97, 98, 99], [100, 101, 102]]]
    p.write_bytes(b"HHabcdefgF")
    with pytest.raises(errors.InvalidArgumentError, match="body length 7 bytes, which is "
                       "not an exact multiple of the record length"):
        _all(ds)


def test_errors(tmp_path: pathlib.Path, g: tf.Graph) -> None:
    with pytest.raises(errors.NotFoundError, match="nope.tfr"):
        _all(tf.data.TFRecordDataset(str(tmp_path / "nope.tfr")))
    p = tmp_path / "bad.tfr"
    _records(tmp_path, [2])
    data = bytearray((tmp_path / "f0.tfr").read_bytes())
    data[-1] ^= 0xFF
    p.write_bytes(bytes(data))
    nxt = tf.data.TFRecordDataset(str(p)).make_one_shot_iterator().get_next()
    with tf.Session() as s:
        assert s.run(nxt) == b"0-0"
        with pytest.raises(errors.DataLossError, match=r"bad\.tfr: corrupted record at 19"):
            s.run(nxt)
    with pytest.raises(TypeError):
        tf.data.TFRecordDataset(tf.constant([1, 2]))
    with pytest.raises(errors.InvalidArgumentError, match="compression_type"):
        _all(tf.data.TFRecordDataset(str(p), compression_type="LZ4"))
