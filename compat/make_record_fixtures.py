"""Write the TFRecord fixtures of tests/test_tf_record.py and tests/test_parsing_ops.py
with TensorFlow, so flowrt's tests check reading TF's own bytes without TensorFlow.

    ../tf-venv/bin/python compat/make_record_fixtures.py

Writes into tests/data/records/: ``examples.tfrecord`` (plain), ``examples.tfrecord.gz``
(GZIP) and ``examples.tfrecord.zlib`` (ZLIB), each the same three ``tf.train.Example``
records, and ``sequence.tfrecord`` with one ``tf.train.SequenceExample``. The records'
contents are listed in the tests (``FIXTURE_EXAMPLES``), so nothing here is needed to run
them.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow.compat.v1 as tf  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                   "records")

#: (label, weights, name, tokens) of each example; tests list the same values
EXAMPLES = [(1, [0.5, -1.25], b"alpha", [3, 1, 4]),
            (0, [2.0, 0.0], b"beta", []),
            (7, [-0.125, 8.5], "gamma \u00e9".encode(), [1, 5, 9, 2, 6])]


def _example(label: int, weights: list, name: bytes, tokens: list) -> bytes:
    f = {"label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
         "weights": tf.train.Feature(float_list=tf.train.FloatList(value=weights)),
         "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[name]))}
    if tokens:
        f["tokens"] = tf.train.Feature(int64_list=tf.train.Int64List(value=tokens))
    return tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString()


def _sequence() -> bytes:
    se = tf.train.SequenceExample()
    se.context.feature["length"].int64_list.value.append(3)
    for t, word in enumerate([b"a", b"bb", b"ccc"]):
        se.feature_lists.feature_list["ids"].feature.add().int64_list.value.extend([t, 10 * t])
        se.feature_lists.feature_list["words"].feature.add().bytes_list.value.extend(
            [word] * t)
    return se.SerializeToString()


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    records = [_example(*e) for e in EXAMPLES]
    for suffix, kind in (("", None), (".gz", "GZIP"), (".zlib", "ZLIB")):
        with tf.io.TFRecordWriter(os.path.join(OUT, "examples.tfrecord" + suffix),
                                  kind) as w:
            for r in records:
                w.write(r)
    with tf.io.TFRecordWriter(os.path.join(OUT, "sequence.tfrecord")) as w:
        w.write(_sequence())


if __name__ == "__main__":
    main()
