"""The rest of tf.io under TensorFlow and flowrt: ``parse_sequence_example`` (batched
SequenceExamples) programs compared by values, dtypes, static shapes and error classes;
``PriorityQueue`` dequeue order (ties included), batches and close semantics;
``decode_proto`` / ``encode_proto`` on tf.train.Example bytes and on a proto2 message
from a FileDescriptorSet file both read; ``decode_webp`` on lossless WebP files.

Op names and types are not compared for the parsing programs: TF 2.x builds
``ParseSequenceExampleV2`` where TF 1.15 (and flowrt) build ``ParseSequenceExample``.
"""
from __future__ import annotations

import io
import os
import tempfile
from typing import Any

import numpy as np
import pytest
from google.protobuf import descriptor_pb2

from compat_harness import module, run_both, run_custom

PARSE_KEYS = ("kind", "dtype", "shape")
TMP = tempfile.mkdtemp(prefix="flowrt_compat_io_more_")


# -- parse_sequence_example ---------------------------------------------------------------
def _seq(tf: Any, i: int) -> bytes:
    se = tf.train.SequenceExample()
    se.context.feature["length"].int64_list.value.append(i)
    if i % 2:
        se.context.feature["tag"].bytes_list.value.append(b"t%d" % i)
    fl = se.feature_lists.feature_list
    for t in range(i):
        fl["ids"].feature.add().int64_list.value.extend([t, -t * i])
        fl["w"].feature.add().bytes_list.value.extend([b"z"] * (t % 3))
        fl["x"].feature.add().float_list.value.append(0.5 * t)
    return se.SerializeToString()


SEQS = [_seq(module("flowrt"), i) for i in (2, 0, 3, 1)]
CTX = lambda tf: {"length": tf.FixedLenFeature([], tf.int64),  # noqa: E731
                  "tag": tf.VarLenFeature(tf.string),
                  "d": tf.FixedLenFeature([2], tf.float32, default_value=[1.0, 2.0])}
SEQ = lambda tf: {"ids": tf.FixedLenSequenceFeature([2], tf.int64, allow_missing=True),  # noqa
                  "w": tf.VarLenFeature(tf.string),
                  "x": tf.FixedLenSequenceFeature([], tf.float32, allow_missing=True)}

SEQ_PROGRAMS = {
    "full": lambda tf: tf.io.parse_sequence_example(SEQS, CTX(tf), SEQ(tf)),
    "names": lambda tf: tf.io.parse_sequence_example(
        SEQS, sequence_features=SEQ(tf), example_names=["a", "b", "c", "d"]),
    "context_only": lambda tf: tf.io.parse_sequence_example(SEQS, context_features=CTX(tf)),
    "tf_written": lambda tf: tf.io.parse_sequence_example(
        [_seq(tf, i) for i in (1, 4)], CTX(tf), SEQ(tf)),
    "required_missing": lambda tf: tf.io.parse_sequence_example(
        SEQS, sequence_features={"ids": tf.FixedLenSequenceFeature([2], tf.int64)}),
    "wrong_type": lambda tf: tf.io.parse_sequence_example(
        SEQS, sequence_features={"x": tf.FixedLenSequenceFeature([], tf.int64,
                                                                 allow_missing=True)}),
    "wrong_count": lambda tf: tf.io.parse_sequence_example(
        SEQS, sequence_features={"ids": tf.FixedLenSequenceFeature([3], tf.int64,
                                                                   allow_missing=True)}),
    "bad_proto": lambda tf: tf.io.parse_sequence_example(
        [b"\x0a\x03abc"], sequence_features={"w": tf.VarLenFeature(tf.string)}),
    "no_features": lambda tf: tf.io.parse_sequence_example(SEQS),
}


@pytest.mark.parametrize("program", [pytest.param(v, id=k)
                                     for k, v in sorted(SEQ_PROGRAMS.items())])
def test_parse_sequence_example(program: Any) -> None:
    run_both(program, static_keys=PARSE_KEYS)


# -- PriorityQueue ------------------------------------------------------------------------
def _priority_run(tf: Any) -> list:
    q = tf.PriorityQueue(20, [tf.string, tf.int32], shapes=[[], [2]])
    prios = [5, 1, 3, 1, 0, 3, 1, 7, -2, 3]
    enq = q.enqueue_many((prios, [b"e%d" % i for i in range(10)],
                          [[i, -i] for i in range(10)]))
    out = []
    with tf.Session() as sess:
        sess.run(enq)
        out.append(sess.run(q.dequeue()))
        out.append(sess.run(q.dequeue_many(4)))
        sess.run(q.enqueue((np.int64(2), b"late", [9, 9])))
        out.append(sess.run(q.dequeue_up_to(3)))
        out.append(int(sess.run(q.size())))
        sess.run(q.close())
        for t in (q.dequeue_many(5), q.dequeue_up_to(5), q.dequeue()):
            try:
                out.append(sess.run(t))
            except tf.errors.OpError as e:
                out.append(type(e).__name__)
        out.append(int(sess.run(q.size())))
        try:
            sess.run(q.enqueue((np.int64(1), b"x", [0, 0])))
        except tf.errors.OpError as e:
            out.append(type(e).__name__)
    return out


def test_priority_queue() -> None:
    got = run_custom(_priority_run)
    assert got[0][0] == -2 and got[-1] == "CancelledError"


def test_priority_queue_static_and_errors() -> None:
    def fn(tf: Any) -> list:
        q = tf.PriorityQueue(3, [tf.float32], shapes=[[2]], names=["p", "v"])
        d = q.dequeue_many(2)
        out: list = [q.queue_ref.op.type, [t.name for t in q.dtypes],
                     {k: v.shape.as_list() for k, v in d.items()}]
        try:
            tf.PriorityQueue(3, [tf.float32])
        except TypeError as e:
            out.append(type(e).__name__)
        p = tf.placeholder(tf.int64)
        with tf.Session() as sess:
            try:
                sess.run(q.enqueue({"p": p, "v": [1.0, 2.0]}), {p: [1, 2]})
            except tf.errors.OpError as e:
                out.append(type(e).__name__)
        return out

    run_custom(fn)


# -- decode_proto / encode_proto ---------------------------------------------------------
def _examples(tf: Any) -> list[bytes]:
    out = []
    for i in range(3):
        e = tf.train.Example()
        for k in range(i):
            e.features.feature["k%d" % k].int64_list.value.extend(range(k + 1))
        out.append(e.SerializeToString())
    return out


def test_decode_proto_examples() -> None:
    def fn(tf: Any) -> list:
        data = _examples(tf)
        dec = tf.io.decode_proto(data, "tensorflow.Example", ["features"], [tf.string])
        feats = tf.io.decode_proto(dec.values[0][:, 0], "tensorflow.Features", ["feature"],
                                   [tf.string])
        vals = tf.io.decode_proto([data], "tensorflow.Example", ["features"], [tf.string])
        enc = tf.io.encode_proto(dec.sizes, dec.values, ["features"], "tensorflow.Example")
        with tf.Session() as sess:
            r = sess.run([dec, feats.sizes, vals, enc])
        static = [dec.sizes.shape.as_list(), dec.values[0].shape.as_list(),
                  enc.shape.as_list()]
        # map entries in wire order: the FeatureEntry keys, per example
        return [r[0].sizes, r[0].values, r[1], r[2].sizes, r[3], static,
                [sorted(x for x in row if x) for row in
                 sess_free_keys(tf, r[0].values[0][:, 0])]]

    run_custom(fn)


def sess_free_keys(tf: Any, features: Any) -> list[list[str]]:
    return [list(tf.train.Features.FromString(f).feature) for f in features]


def test_encode_proto_int64_list() -> None:
    def fn(tf: Any) -> list:
        values = tf.constant([[5, -1, 2**40], [7, 0, 0]], tf.int64)
        enc = tf.io.encode_proto([[3], [1]], [values], ["value"], "tensorflow.Int64List")
        dec = tf.io.decode_proto(enc, "tensorflow.Int64List", ["value"], [tf.int64])
        with tf.Session() as sess:
            return list(sess.run([enc, dec]))

    run_custom(fn)


def _rec_set() -> str:
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="wcompat/rec.proto", package="wcompat",
                                             syntax="proto2")
    m = fdp.message_type.add(name="Rec")
    e = m.enum_type.add(name="E")
    e.value.add(name="ONE", number=1)
    e.value.add(name="TWO", number=2)
    for name, num, typ, label, extra in (
            ("a", 1, F.TYPE_INT32, F.LABEL_OPTIONAL, {"default_value": "-7"}),
            ("s", 2, F.TYPE_STRING, F.LABEL_OPTIONAL, {"default_value": "dflt"}),
            ("r", 3, F.TYPE_SINT64, F.LABEL_REPEATED, {}),
            ("e", 4, F.TYPE_ENUM, F.LABEL_OPTIONAL, {"type_name": ".wcompat.Rec.E",
                                                     "default_value": "TWO"}),
            ("f", 5, F.TYPE_FIXED32, F.LABEL_REPEATED, {}),
            ("d", 6, F.TYPE_DOUBLE, F.LABEL_OPTIONAL, {"default_value": "2.5"}),
            ("fl", 7, F.TYPE_FLOAT, F.LABEL_REPEATED, {}),
            ("u", 8, F.TYPE_UINT64, F.LABEL_OPTIONAL, {})):
        f = m.field.add(name=name, number=num, type=typ, label=label, **extra)
        if name == "r":
            f.options.packed = True
    path = os.path.join(TMP, "rec.desc")
    with open(path, "wb") as fh:
        fh.write(descriptor_pb2.FileDescriptorSet(file=[fdp]).SerializeToString())
    return path


REC_SET = _rec_set()
REC_TEXT = ["a: 3 s: 'hi' r: -1 r: 1099511627776 e: ONE f: 7 f: 4294967295 d: -0.5 "
            "fl: 1.5 fl: 2 u: 18446744073709551615", "", "a: 1 a: 9 fl: 3"]


def test_decode_encode_descriptor_file() -> None:
    names = ["a", "s", "r", "e", "f", "d", "fl", "u"]

    def fn(tf: Any) -> list:
        types = [tf.int32, tf.string, tf.int64, tf.int32, tf.uint32, tf.float64,
                 tf.float32, tf.uint64]
        txt = tf.io.decode_proto(REC_TEXT, "wcompat.Rec", names, types,
                                 descriptor_source=REC_SET, message_format="text")
        enc = tf.io.encode_proto(txt.sizes, txt.values, names, "wcompat.Rec",
                                 descriptor_source=REC_SET)
        back = tf.io.decode_proto(enc, "wcompat.Rec", names, types,
                                  descriptor_source=REC_SET)
        with tf.Session() as sess:
            return list(sess.run([txt, enc, back]))

    run_custom(fn)


def test_proto_errors() -> None:
    data = _examples(module("flowrt"))
    for build in (
            lambda tf: tf.io.decode_proto(data, "tensorflow.Nope", ["x"], [tf.string]),
            lambda tf: tf.io.decode_proto(data, "tensorflow.Example", ["x"], [tf.string]),
            lambda tf: tf.io.decode_proto(data, "tensorflow.Example", ["features"],
                                          [tf.int32]),
            lambda tf: tf.io.decode_proto([b"\xff\xff"], "tensorflow.Example", ["features"],
                                          [tf.string]),
            lambda tf: tf.io.decode_proto(data, "wcompat.Rec", ["a"], [tf.int32],
                                          descriptor_source=REC_SET + ".missing"),
            lambda tf: tf.io.encode_proto([[2]], [tf.constant([[1]], tf.int64)], ["value"],
                                          "tensorflow.Int64List"),
            lambda tf: tf.io.encode_proto([[1]], [[["s"]]], ["value"],
                                          "tensorflow.Int64List"),
            lambda tf: tf.io.encode_proto([[1]], [[1]], ["value"], "tensorflow.Int64List")):
        run_both(build, static=False)


# -- decode_webp ------------------------------------------------------------------------------
def _webp(a: np.ndarray, **kw: Any) -> bytes:
    from PIL import Image  # Pillow is only needed by this test

    b = io.BytesIO()
    Image.fromarray(a).save(b, "WEBP", lossless=True, **kw)
    return b.getvalue()


def test_decode_webp() -> None:
    pytest.importorskip("PIL")
    rng = np.random.RandomState(1)
    rgb = _webp(rng.randint(0, 255, (6, 5, 3), dtype=np.uint8))
    rgba = _webp(rng.randint(0, 255, (3, 4, 4), dtype=np.uint8))
    for data, ch in ((rgb, 0), (rgb, 3), (rgba, 0), (rgba, 4), (rgb, 4), (rgba, 3),
                     (rgb, 1), (b"junk", 0)):
        run_both(lambda tf: tf.io.decode_webp(data, channels=ch),
                 static_keys=("kind", "dtype", "shape"))
