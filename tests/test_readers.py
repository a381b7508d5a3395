"""TF1's readers: keys and values of each reader over several files, read_up_to,
the counters, reset, serialize/restore state, and the errors (a closed queue, a missing
file, a corrupt TFRecord, bad attrs)."""
from __future__ import annotations

import gzip
import pathlib
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors
from flowrt.inputs import readers


def _read_all(reader: tf.ReaderBase, files: list[str], up_to: int | None = None
              ) -> list[tuple[bytes, bytes]]:
    """Every (key, value) ``reader`` produces from ``files`` through a closed queue."""
    q = tf.FIFOQueue(len(files) + 1, tf.string)
    enq = q.enqueue_many([files])
    close = q.close()
    out = []
    if up_to is None:
        k, v = reader.read(q)
    else:
        k, v = reader.read_up_to(q, up_to)
    with tf.Session() as s:
        s.run(enq)
        s.run(close)
        with pytest.raises(errors.OutOfRangeError, match="is closed and has insufficient"):
            for _ in range(10000):
                kk, vv = s.run([k, v])
                if up_to is None:
                    out.append((kk, vv))
                else:
                    assert 1 <= len(kk) <= up_to
                    out.extend(zip(kk, vv))
    return out


@pytest.fixture
def g() -> tf.Graph:
    with tf.Graph().as_default() as graph:
        yield graph


def test_text_line_reader_keys_and_header(tmp_path: pathlib.Path, g: tf.Graph) -> None:
    a = tmp_path / "a.txt"
    a.write_bytes(b"header\nx1\n\ny1\r\nz1")
    b = tmp_path / "b.txt"
    b.write_bytes(b"header\nonly\n")
    got = _read_all(tf.TextLineReader(skip_header_lines=1), [str(a), str(b)])
    assert got == [(f"{a}:2".encode(), b"x1"), (f"{a}:3".encode(), b""),
                   (f"{a}:4".encode(), b"y1"), (f"{a}:5".encode(), b"z1"),
                   (f"{b}:2".encode(), b"only")]


def test_tfrecord_reader_offsets(tmp_path: pathlib.Path, g: tf.Graph) -> None:
    files = []
    for i, opts in enumerate([None, tf.python_io.TFRecordOptions(
            tf.python_io.TFRecordCompressionType.GZIP)]):
        p = str(tmp_path / f"r{i}.tfr")
        with tf.python_io.TFRecordWriter(p, opts) as w:
            for rec in (b"ab", b"", b"xyz"):
                w.write(rec)
        files.append(p)
    got = _read_all(tf.TFRecordReader(), files[:1])
    assert got == [(f"{files[0]}:0".encode(), b"ab"), (f"{files[0]}:18".encode(), b""),
                   (f"{files[0]}:34".encode(), b"xyz")]
    opts = tf.python_io.TFRecordOptions(tf.python_io.TFRecordCompressionType.GZIP)
    got = _read_all(tf.TFRecordReader(options=opts), files[1:])
    assert [v for _, v in got] == [b"ab", b"", b"xyz"]
    assert got[2][0] == f"{files[1]}:34".encode()


def test_fixed_length_reader_header_footer_hop(tmp_path: pathlib.Path, g: tf.Graph) -> None:
    p = tmp_path / "f.bin"
    p.write_bytes(b"HH" + b"0123456789" + b"F")
    got = _read_all(tf.FixedLengthRecordReader(3, header_bytes=2, footer_bytes=1), [str(p)])
    assert got == [(f"{p}:0".encode(), b"012"), (f"{p}:1".encode(), b"345"),
                   (f"{p}:2".encode(), b"678")]  # "9" is a partial record: dropped
    got = _read_all(tf.FixedLengthRecordReader(4, header_bytes=2, footer_bytes=1,
                                               hop_bytes=2), [str(p)])
    assert [v for _, v in got] == [b"0123", b"2345", b"4567", b"6789"]


def test_fixed_length_reader_encoding(tmp_path: pathlib.Path, g: tf.Graph) -> None:
    p = tmp_path / "f.gz"
    p.write_bytes(gzip.compress(b"abcdef"))
    got = _read_all(tf.FixedLengthRecordReader(2, encoding="GZIP"), [str(p)])
    assert [v for _, v in got] == [b"ab", b"cd", b"ef"]


def test_whole_file_and_identity_readers(tmp_path: pathlib.Path, g: tf.Graph) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"\x00\x01")
    b.write_bytes(b"")
    assert _read_all(tf.WholeFileReader(), [str(a), str(b)]) == [
        (str(a).encode(), b"\x00\x01"), (str(b).encode(), b"")]
    assert _read_all(tf.IdentityReader(), ["w1", "w2"]) == [(b"w1", b"w1"), (b"w2", b"w2")]


def test_read_up_to_stops_at_work_unit_end(tmp_path: pathlib.Path, g: tf.Graph) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("1\n2\n3\n")
    b.write_text("4\n5\n")
    q = tf.FIFOQueue(4, tf.string)
    enq = q.enqueue_many([[str(a), str(b)]])
    r = tf.TextLineReader()
    ks, vs = r.read_up_to(q, 2)
    with tf.Session() as s:
        s.run(enq)
        s.run(q.close())
        batches = [list(s.run(vs)) for _ in range(3)]
        with pytest.raises(errors.OutOfRangeError):
            s.run(vs)
    assert batches == [[b"1", b"2"], [b"3"], [b"4", b"5"]]


def test_counters_reset_and_state(tmp_path: pathlib.Path, g: tf.Graph) -> None:
    a = tmp_path / "a.txt"
    a.write_text("1\n2\n")
    q = tf.FIFOQueue(4, tf.string)
    enq = q.enqueue_many([[str(a), str(a), str(a)]])
    r = tf.TextLineReader()
    k, v = r.read(q)
    n, w = r.num_records_produced(), r.num_work_units_completed()
    reset = r.reset()
    with tf.Session() as s:
        s.run(enq)
        assert [s.run(v) for _ in range(3)] == [b"1", b"2", b"1"]
        assert s.run([n, w]) == [3, 1]
        s.run(reset)
        assert s.run([n, w]) == [0, 0]
        assert s.run(v) == b"1"  # reset forgot the file in progress: the next one
        with pytest.raises(errors.UnimplementedError, match="SerializeState"):
            s.run(r.serialize_state())
    ident = tf.IdentityReader()
    assert ident.supports_serialize and not r.supports_serialize
    q2 = tf.FIFOQueue(4, tf.string)
    kv = ident.read(q2)
    state = ident.serialize_state()
    with tf.Session() as s:
        s.run(q2.enqueue_many([["u1", "u2"]]))
        s.run(kv)
        saved = s.run(state)
        assert readers.decode_base_state(saved) == (1, 1, 1, b"u1")
        s.run(kv)
        s.run(ident.restore_state(saved))
        assert s.run(ident.num_records_produced()) == 1
        with pytest.raises(errors.InvalidArgumentError, match="Could not parse state"):
            s.run(ident.restore_state(b"\xff"))
        assert s.run(ident.num_records_produced()) == 0  # a bad state resets


def test_missing_file_fails_one_read_then_moves_on(tmp_path: pathlib.Path,
                                                   g: tf.Graph) -> None:
    a = tmp_path / "a.txt"
    a.write_text("ok\n")
    q = tf.FIFOQueue(4, tf.string)
    enq = q.enqueue_many([[str(tmp_path / "missing.txt"), str(a)]])
    k, v = tf.TextLineReader().read(q)
    with tf.Session() as s:
        s.run(enq)
        with pytest.raises(errors.NotFoundError, match="missing.txt"):
            s.run(v)
        assert s.run(v) == b"ok"


def test_corrupt_tfrecord_is_data_loss(tmp_path: pathlib.Path, g: tf.Graph) -> None:
    p = tmp_path / "bad.tfr"
    with tf.python_io.TFRecordWriter(str(p)) as w:
        w.write(b"first")
        w.write(b"second")
    data = bytearray(p.read_bytes())
    data[21 + 12] ^= 0xFF  # the data of the second record (it starts at 21)
    p.write_bytes(bytes(data))
    q = tf.FIFOQueue(4, tf.string)
    enq = q.enqueue([str(p)])
    k, v = tf.TFRecordReader().read(q)
    with tf.Session() as s:
        s.run(enq)
        assert s.run(v) == b"first"
        with pytest.raises(errors.DataLossError, match=r"bad\.tfr: corrupted record at 21"):
            s.run(v)


def test_queue_and_attr_errors(g: tf.Graph) -> None:
    q = tf.FIFOQueue(4, tf.int32)
    k, v = tf.WholeFileReader().read(q)
    with tf.Session() as s:
        with pytest.raises(errors.InvalidArgumentError, match="single string component"):
            s.run(v)
    with pytest.raises(ValueError, match="Not a valid compression_type"):
        tf.TFRecordReader(options="BZIP")
    with pytest.raises(errors.InvalidArgumentError, match="record_bytes must be > 0"):
        readers.FixedLengthSource(0)


def test_graph_structure(g: tf.Graph) -> None:
    r = tf.TextLineReader(skip_header_lines=2, name="lines")
    assert r.reader_ref.op.type == "TextLineReaderV2"
    assert r.reader_ref.op.get_attr("skip_header_lines") == 2
    q = tf.FIFOQueue(4, tf.string)
    out = r.read(q)
    assert out.key.op.type == "ReaderReadV2" and out.key.shape.ndims == 0
    keys, values = r.read_up_to(q, 3)
    assert values.shape.as_list() == [None]


@settings(max_examples=30, deadline=None)
@given(lines=st.lists(st.binary(max_size=6).filter(lambda b: b"\n" not in b and
                                                   b"\r" not in b), max_size=8),
       trailing=st.booleans(), skip=st.integers(0, 3))
def test_text_source_matches_splitlines(tmp_path_factory: pytest.TempPathFactory,
                                        lines: list[bytes], trailing: bool,
                                        skip: int) -> None:
    p = tmp_path_factory.mktemp("t") / "f.txt"
    data = b"\n".join(lines) + (b"\n" if trailing and lines else b"")
    p.write_bytes(data)
    got = [(k, v) for k, v in readers.TextLineSource(skip).records(str(p).encode())]
    want = data.split(b"\n")
    if want and want[-1] == b"":
        want.pop()
    expect = [(f"{p}:{i}".encode(), w) for i, w in enumerate(want, 1) if i > skip]
    assert got == expect


@settings(max_examples=30, deadline=None)
@given(data=st.binary(max_size=40), record=st.integers(1, 7), header=st.integers(0, 5),
       footer=st.integers(0, 5), hop=st.integers(0, 7), zipped=st.booleans())
def test_fixed_length_source_model(tmp_path_factory: pytest.TempPathFactory, data: bytes,
                                   record: int, header: int, footer: int, hop: int,
                                   zipped: bool) -> None:
    p = tmp_path_factory.mktemp("f") / "f.bin"
    p.write_bytes(zlib.compress(data) if zipped else data)
    src = readers.FixedLengthSource(record, header, footer, hop, "ZLIB" if zipped else "")
    got = [v for _, v in src.records(str(p).encode())]
    want, pos = [], header
    while pos + record <= len(data) - footer:
        want.append(data[pos:pos + record])
        pos += hop or record
    assert got == want


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**40), st.integers(0, 2**40), st.integers(0, 2**40),
       st.binary(max_size=20))
def test_base_state_round_trip(a: int, b: int, c: int, work: bytes) -> None:
    assert readers.decode_base_state(readers.encode_base_state(a, b, c, work)) == \
        (a, b, c, work)
