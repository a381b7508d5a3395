"""tf.train's input producers and batching: the classic MNIST-from-TFRecord queue
pipeline end to end, num_epochs exhaustion, shuffle_batch statistics, the join and
maybe_ variants, dynamic_pad, the graph TF builds (names, collections, summaries)."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

import flowrt as tf
from flowrt import errors


@pytest.fixture
def g() -> tf.Graph:
    with tf.Graph().as_default() as graph:
        yield graph


def _write_mnist(tmp_path: pathlib.Path, n_files: int = 3, per_file: int = 10) -> list[str]:
    files = []
    for i in range(n_files):
        p = str(tmp_path / f"mnist-{i}.tfrecord")
        with tf.python_io.TFRecordWriter(p) as w:
            for j in range(per_file):
                label = i * per_file + j
                image = np.full(784, label % 256, dtype=np.uint8).tobytes()
                ex = tf.train.Example(features=tf.train.Features(feature={
                    "image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))}))
                w.write(ex.SerializeToString())
        files.append(p)
    return files


def _drain(sess: tf.Session, fetches: object) -> list:
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess, coord)
    out = []
    try:
        while not coord.should_stop():
            out.append(sess.run(fetches))
    except errors.OutOfRangeError:
        pass
    finally:
        coord.request_stop()
        coord.join(threads)
    return out


def test_mnist_tfrecord_pipeline(tmp_path: pathlib.Path, g: tf.Graph) -> None:
    files = _write_mnist(tmp_path)
    fq = tf.train.string_input_producer(files, num_epochs=2, shuffle=False)
    _, serialized = tf.TFRecordReader().read(fq)
    feats = tf.parse_single_example(serialized, {
        "image_raw": tf.FixedLenFeature([], tf.string),
        "label": tf.FixedLenFeature([], tf.int64)})
    image = tf.cast(tf.decode_raw(feats["image_raw"], tf.uint8), tf.float32) * (1. / 255)
    image.set_shape([784])
    label = tf.cast(feats["label"], tf.int32)
    images, labels = tf.train.batch([image, label], batch_size=7, num_threads=1,
                                    capacity=20, allow_smaller_final_batch=True)
    assert images.shape.as_list() == [None, 784]
    with tf.Session() as s:
        s.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
        batches = _drain(s, [images, labels])
    got = np.concatenate([b[1] for b in batches])
    np.testing.assert_array_equal(got, np.tile(np.arange(30), 2))
    assert [len(b[1]) for b in batches] == [7] * 8 + [4]
    np.testing.assert_allclose(batches[0][0][:, 0], np.arange(7) / 255, rtol=1e-6)


def test_num_epochs_exhaustion_and_local_counter(g: tf.Graph) -> None:
    q = tf.train.string_input_producer(["a", "b"], num_epochs=3, shuffle=False)
    x = q.dequeue()
    assert any(v.op.name == "input_producer/limit_epochs/epochs"
               for v in tf.local_variables())
    with tf.Session() as s:
        s.run(tf.local_variables_initializer())
        got = [v for v in _drain(s, x)]
    assert got == [b"a", b"b"] * 3


def test_graph_names_collections_summaries(g: tf.Graph) -> None:
    q = tf.train.string_input_producer(["a"], capacity=16)
    assert q.name == "input_producer"
    x = q.dequeue()
    b = tf.train.batch([x], batch_size=2)
    assert isinstance(b, tf.Tensor) and b.op.name == "batch"  # one component: a bare tensor
    sb = tf.train.shuffle_batch({"x": x}, 2, capacity=10, min_after_dequeue=3)
    assert list(sb) == ["x"] and sb["x"].op.name == "shuffle_batch"
    qrs = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    assert [qr.name for qr in qrs] == ["input_producer", "batch/fifo_queue",
                                       "shuffle_batch/random_shuffle_queue"]
    tags = sorted(op.name for op in g.get_operations() if op.type == "ScalarSummary")
    assert tags == ["batch/fraction_of_32_full", "input_producer/fraction_of_16_full",
                    "shuffle_batch/fraction_over_3_of_7_full"]


def test_shuffle_batch_statistics(g: tf.Graph) -> None:
    n = 40
    q = tf.train.range_input_producer(n, num_epochs=1, shuffle=False)
    x = q.dequeue()
    b = tf.train.shuffle_batch([x], batch_size=5, capacity=30, min_after_dequeue=10, seed=7,
                               allow_smaller_final_batch=True)
    with tf.Session() as s:
        s.run(tf.local_variables_initializer())
        got = np.concatenate(_drain(s, b))
    assert sorted(got.tolist()) == list(range(n))  # every element once
    assert got.tolist() != list(range(n))  # in a shuffled order
    # each element leaves no earlier than its enqueue and the queue holds >= 10 while open
    first = got[:5]
    assert first.max() >= 10


def test_slice_input_producer_and_batch_join(g: tf.Graph) -> None:
    a = np.arange(6, dtype=np.int64)
    x, y = tf.train.slice_input_producer([a, a * 10], num_epochs=1, shuffle=False)
    joined = tf.train.batch_join([[x, y], [x + 100, y + 100]], batch_size=3,
                                 allow_smaller_final_batch=True)
    with tf.Session() as s:
        s.run(tf.local_variables_initializer())
        batches = _drain(s, joined)
    xs = np.concatenate([b[0] for b in batches])
    ys = np.concatenate([b[1] for b in batches])
    np.testing.assert_array_equal(ys, (xs % 100) * 10 + (xs >= 100) * 100)
    assert sorted(int(v) % 100 for v in xs) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5] or \
        len(xs) == 6


def test_maybe_batch_and_enqueue_many(g: tf.Graph) -> None:
    data = tf.constant(np.arange(10, dtype=np.int32))
    keep = tf.constant(np.arange(10) % 2 == 0)
    b = tf.train.maybe_batch([data], keep, batch_size=5, enqueue_many=True)
    x = tf.placeholder(tf.int32, [])
    b2 = tf.train.maybe_batch([x], tf.equal(x % 3, 0), batch_size=2)
    enqueue = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)[1].enqueue_ops[0]
    with tf.Session() as s:
        coord = tf.train.Coordinator()
        qr = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)[0]
        threads = qr.create_threads(s, coord=coord, start=True)
        np.testing.assert_array_equal(s.run(b), [0, 2, 4, 6, 8])
        for v in range(7):
            s.run(enqueue, {x: v})
        np.testing.assert_array_equal(s.run(b2), [0, 3])
        coord.request_stop()
        coord.join(threads)


def test_dynamic_pad(g: tf.Graph) -> None:
    q = tf.train.range_input_producer(4, num_epochs=1, shuffle=False)
    i = q.dequeue()
    row = tf.range(i + 1)
    b = tf.train.batch([row], batch_size=4, dynamic_pad=True)
    assert b.shape.as_list() == [4, None]
    with tf.Session() as s:
        s.run(tf.local_variables_initializer())
        got = _drain(s, b)
    np.testing.assert_array_equal(got[0], [[0, 0, 0, 0], [0, 1, 0, 0], [0, 1, 2, 0],
                                           [0, 1, 2, 3]])


def test_match_filenames_once(tmp_path: pathlib.Path, g: tf.Graph) -> None:
    for n in ("a.txt", "b.txt", "c.bin"):
        (tmp_path / n).write_text("x")
    v = tf.train.match_filenames_once(str(tmp_path / "*.txt"))
    assert v in tf.local_variables()
    with tf.Session() as s:
        s.run(tf.local_variables_initializer())
        got = sorted(s.run(v))
    assert got == [str(tmp_path / "a.txt").encode(), str(tmp_path / "b.txt").encode()]


def test_errors(g: tf.Graph) -> None:
    with pytest.raises(ValueError, match="requires a non-null input tensor"):
        tf.train.string_input_producer([])
    with pytest.raises(ValueError, match="num_epochs must be > 0"):
        tf.train.limit_epochs(tf.constant(1), 0)
    x = tf.constant(1)
    with pytest.raises(ValueError, match="must be bigger than min_after_dequeue"):
        tf.train.shuffle_batch([x], 2, capacity=5, min_after_dequeue=5)
    with pytest.raises(ValueError, match="cannot be a vector"):
        tf.train.maybe_batch([x], [True], 2)
    with pytest.raises(ValueError, match="Expected at least one tensor"):
        tf.train.batch([], 2)
    with pytest.raises(ValueError, match="fully defined"):
        tf.train.input_producer(tf.placeholder(tf.int32, [None, None]))
    with pytest.raises(TypeError, match="SparseTensor"):
        tf.train.batch([tf.SparseTensor([[0]], [1], [2])], 2)


def test_shuffle_batch_join_and_maybe_shuffle(g: tf.Graph) -> None:
    q1 = tf.train.range_input_producer(10, num_epochs=1, shuffle=False)
    q2 = tf.train.range_input_producer(10, num_epochs=1, shuffle=False)
    x1, x2 = q1.dequeue(), q2.dequeue() + 100
    joined = tf.train.shuffle_batch_join([[x1], [x2]], 4, capacity=12, min_after_dequeue=2,
                                         seed=1, allow_smaller_final_batch=True)
    q3 = tf.train.range_input_producer(10, num_epochs=1, shuffle=False)
    x3 = q3.dequeue()
    kept = tf.train.maybe_shuffle_batch([x3], 3, capacity=8, min_after_dequeue=1,
                                        keep_input=tf.equal(x3 % 2, 0),
                                        allow_smaller_final_batch=True)
    with tf.Session() as s:
        s.run(tf.local_variables_initializer())
        got = _drain(s, [joined])
        assert sorted(np.concatenate([b[0] for b in got]).tolist()) == \
            list(range(10)) + list(range(100, 110))
    with tf.Session() as s:
        s.run(tf.local_variables_initializer())
        coord = tf.train.Coordinator()
        qrs = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)
        threads = [t for qr in qrs if qr.name.startswith(("input_producer_2",
                                                           "shuffle_batch/"))
                   for t in qr.create_threads(s, coord=coord, start=True)]
        out = []
        try:
            while True:
                out.extend(s.run(kept).tolist())
        except errors.OutOfRangeError:
            pass
        coord.request_stop()
        coord.join(threads)
    assert sorted(out) == [0, 2, 4, 6, 8]
