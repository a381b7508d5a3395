"""Readers, input producers and file datasets under TensorFlow and flowrt: the same
files (written by one implementation) read both ways give the same (key, value)
sequences; batches are equal where the order is deterministic."""
from __future__ import annotations

import gzip
import os
import tempfile

import numpy as np
import pytest

from compat_harness import module

TMP = tempfile.mkdtemp(prefix="flowrt_compat_readers_")


def _tfrecords(writer: str, kind: str | None = None) -> list[str]:
    w = module(writer)
    files = []
    for i in range(3):
        p = os.path.join(TMP, f"{writer}_{kind}_{i}.tfr")
        with w.io.TFRecordWriter(p, w.io.TFRecordOptions(kind)) as f:
            for j in range(i + 2):
                f.write(f"{i}:{j}".encode() * (j + 1))
        files.append(p)
    return files


def _texts() -> list[str]:
    files = []
    for i, data in enumerate([b"head\na\n\nb\r\nc", b"head\n", b"head\nx\ny\n"]):
        p = os.path.join(TMP, f"t{i}.txt")
        with open(p, "wb") as f:
            f.write(data)
        files.append(p)
    return files


def _fixed() -> list[str]:
    p = os.path.join(TMP, "fixed.bin")
    with open(p, "wb") as f:
        f.write(b"HH" + bytes(range(23)) + b"FF")
    e = os.path.join(TMP, "fixed_exact.bin")
    with open(e, "wb") as f:
        f.write(b"HH" + bytes(range(24)) + b"FF")
    q = os.path.join(TMP, "fixed.gz")
    with open(q, "wb") as f:
        f.write(gzip.compress(b"HH" + bytes(range(50, 60)) + b"FF"))
    return [p, q, e]


def _read_pairs(impl: str, make_reader, files: list[str], up_to: int | None = None) -> list:
    tf = module(impl)
    with tf.Graph().as_default():
        q = tf.FIFOQueue(10, tf.string)
        enq = q.enqueue_many([files])
        r = make_reader(tf)
        kv = r.read(q) if up_to is None else r.read_up_to(q, up_to)
        n, w = r.num_records_produced(), r.num_work_units_completed()
        out = []
        with tf.Session() as s:
            s.run(enq)
            s.run(q.close())
            try:
                while True:
                    k, v = s.run(list(kv))
                    out.append((k.tolist() if up_to else k, v.tolist() if up_to else v))
            except tf.errors.OutOfRangeError:
                pass
            out.append(tuple(int(x) for x in s.run([n, w])))
    return out


READERS = {
    "text": (lambda tf: tf.TextLineReader(skip_header_lines=1), "text"),
    "tfrecord": (lambda tf: tf.TFRecordReader(), "tfrecord"),
    "tfrecord_gzip": (lambda tf: tf.TFRecordReader(options=tf.io.TFRecordOptions("GZIP")),
                      "tfrecord_gzip"),
    "fixed": (lambda tf: tf.FixedLengthRecordReader(4, header_bytes=2, footer_bytes=2),
              "fixed"),
    "fixed_hop": (lambda tf: tf.FixedLengthRecordReader(4, header_bytes=2, footer_bytes=2,
                                                        hop_bytes=3), "fixed"),
    "whole": (lambda tf: tf.WholeFileReader(), "text"),
    "identity": (lambda tf: tf.IdentityReader(), "text"),
}


def _files(kind: str, writer: str) -> list[str]:
    if kind == "text":
        return _texts()
    if kind == "fixed":
        return _fixed()[:1]
    return _tfrecords(writer, "GZIP" if kind == "tfrecord_gzip" else None)


@pytest.mark.parametrize("name", sorted(READERS))
@pytest.mark.parametrize("up_to", [None, 2])
def test_reader_sequences(name: str, up_to: int | None) -> None:
    make, kind = READERS[name]
    files = _files(kind, "tf")
    if name == "fixed" and up_to is None:
        files = _fixed()[:1]
    want = _read_pairs("tf", make, files, up_to)
    got = _read_pairs("flowrt", make, files, up_to)
    assert got == want  # the same records, batches, counters


def test_fixed_length_encoding() -> None:
    make = lambda tf: tf.FixedLengthRecordReader(3, 2, 2, encoding="GZIP")  # noqa: E731
    files = _fixed()[1:2]
    assert _read_pairs("flowrt", make, files) == _read_pairs("tf", make, files)


def _pipeline(impl: str, files: list[str]) -> list:
    tf = module(impl)
    with tf.Graph().as_default():
        fq = tf.train.string_input_producer(files, num_epochs=2, shuffle=False)
        k, v = tf.TFRecordReader().read(fq)
        kb, vb = tf.train.batch([k, v], batch_size=3, allow_smaller_final_batch=True)
        out = []
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(s, coord)
            try:
                while True:
                    a, b = s.run([kb, vb])
                    out.append((a.tolist(), b.tolist()))
            except tf.errors.OutOfRangeError:
                pass
            finally:
                coord.request_stop()
                coord.join(threads)
    return out


@pytest.mark.parametrize("writer", ["tf", "flowrt"])
def test_queue_pipeline_batches(writer: str) -> None:
    files = _tfrecords(writer)
    assert _pipeline("flowrt", files) == _pipeline("tf", files)


def _dataset(impl: str, kind: str, files: list[str], **kw) -> list:
    tf = module(impl)
    with tf.Graph().as_default():
        if kind == "tfrecord":
            ds = tf.data.TFRecordDataset(files, **kw)
        elif kind == "text":
            ds = tf.data.TextLineDataset(files, **kw)
        else:
            ds = tf.data.FixedLengthRecordDataset(files, 4, header_bytes=2, footer_bytes=2)
        nxt = tf.compat.v1.data.make_one_shot_iterator(ds).get_next() \
            if not hasattr(ds, "make_one_shot_iterator") else \
            ds.make_one_shot_iterator().get_next()
        out = []
        with tf.Session() as s:
            try:
                while True:
                    out.append(s.run(nxt))
            except tf.errors.OutOfRangeError:
                pass
    return out


@pytest.mark.parametrize("case", ["tfrecord", "tfrecord_parallel", "tfrecord_gzip", "text",
                                  "fixed"])
def test_file_datasets(case: str) -> None:
    kw: dict = {}
    if case == "tfrecord_parallel":
        kw["num_parallel_reads"] = 2
    if case == "tfrecord_gzip":
        kw["compression_type"] = "GZIP"
    files = {"text": _texts, "fixed": lambda: _fixed()[2:]}.get(
        case, lambda: _tfrecords("tf", "GZIP" if case == "tfrecord_gzip" else None))()
    kind = case.split("_")[0]
    got = _dataset("flowrt", kind, files, **kw)
    want = _dataset("tf", kind, files, **kw)
    assert got == want
    assert np.asarray(got).size > 0


def test_fixed_length_dataset_partial_record_error() -> None:
    files = _fixed()[:1]
    for impl in ("tf", "flowrt"):
        tf = module(impl)
        with pytest.raises(tf.errors.InvalidArgumentError, match="not an exact multiple"):
            _dataset(impl, "fixed", files)
