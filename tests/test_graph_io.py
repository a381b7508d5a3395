"""tf.train.write_graph / tf.io.write_graph and tf.train.checkpoints_iterator."""
from __future__ import annotations

import os
import pathlib
import threading

import pytest
from google.protobuf import text_format

import flowrt as tf
from flowrt.proto import graph_def_pb2
from flowrt.training import graph_io


def _graph() -> tf.Graph:
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(1.5, name="a")
        tf.add(a, tf.constant(2.0, name="b"), name="sum")
    return g


def test_write_graph_text(tmp_path: pathlib.Path) -> None:
    g = _graph()
    logdir = tmp_path / "new" / "dir"
    path = tf.train.write_graph(g, str(logdir), "g.pbtxt")
    assert path == os.path.join(str(logdir), "g.pbtxt")
    assert os.listdir(logdir) == ["g.pbtxt"]  # no temporary file left
    text = pathlib.Path(path).read_text()
    assert 'name: "sum"' in text and ('op: "AddV2"' in text or 'op: "Add"' in text)
    gd = text_format.Parse(text, graph_def_pb2.GraphDef())
    assert gd == g.as_graph_def()
    assert tf.io.write_graph is tf.train.write_graph


def test_write_graph_binary_and_graph_def(tmp_path: pathlib.Path) -> None:
    gd = _graph().as_graph_def()
    path = tf.train.write_graph(gd, str(tmp_path), "g.pb", as_text=False)
    data = pathlib.Path(path).read_bytes()
    assert data == gd.SerializeToString(deterministic=True)
    back = graph_def_pb2.GraphDef.FromString(data)
    assert [n.name for n in back.node] == ["a", "b", "sum"]
    # the file imports back into a graph
    g2 = tf.Graph()
    with g2.as_default():
        tf.import_graph_def(back, name="")
        with tf.Session() as sess:
            assert sess.run("sum:0") == pytest.approx(3.5)


def test_write_graph_overwrites(tmp_path: pathlib.Path) -> None:
    p = tmp_path / "g.pbtxt"
    p.write_text("old")
    tf.train.write_graph(_graph(), str(tmp_path), "g.pbtxt")
    assert p.read_text().startswith("node {")


def test_write_graph_needs_a_directory(tmp_path: pathlib.Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(tf.errors.OpError):
        tf.train.write_graph(_graph(), str(tmp_path / "file"), "g.pb")


def _save(sess: tf.Session, saver: tf.train.Saver, d: pathlib.Path, step: int) -> str:
    return saver.save(sess, str(d / "model.ckpt"), global_step=step)


class _Clock:
    """A fake time for graph_io: sleeping advances it instantly."""

    def __init__(self, on_sleep: list | None = None) -> None:
        self.now = 1000.0
        self.slept: list[float] = []
        self.on_sleep = on_sleep or []

    def time(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s
        if self.on_sleep:
            self.on_sleep.pop(0)()


def test_checkpoints_iterator_yields_each_new_checkpoint(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(1.0, name="v")
        saver = tf.train.Saver([v])
        sess = tf.Session()
        sess.run(v.initializer)
    saves = [lambda i=i: _save(sess, saver, tmp_path, i) for i in (2, 3)]
    clock = _Clock(on_sleep=saves)
    monkeypatch.setattr(graph_io, "time", clock)
    first = _save(sess, saver, tmp_path, 1)
    it = tf.train.checkpoints_iterator(str(tmp_path), timeout=5)
    got = list(it)
    assert got == [first, str(tmp_path / "model.ckpt-2"), str(tmp_path / "model.ckpt-3")]
    assert got[-1] == tf.train.latest_checkpoint(str(tmp_path))
    # after the last one: polled once a second until the timeout
    assert clock.slept.count(1) >= 5
    sess.close()


def test_checkpoints_iterator_min_interval_and_timeout_fn(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(1.0, name="v")
        saver = tf.train.Saver([v])
        sess = tf.Session()
        sess.run(v.initializer)
    clock = _Clock()
    monkeypatch.setattr(graph_io, "time", clock)
    calls = []

    def timeout_fn() -> bool:
        calls.append(clock.now)
        if len(calls) == 1:
            _save(sess, saver, tmp_path, 7)  # more may come: keep waiting
            return False
        return True

    got = list(tf.train.checkpoints_iterator(str(tmp_path), min_interval_secs=10,
                                             timeout=2, timeout_fn=timeout_fn))
    assert got == [str(tmp_path / "model.ckpt-7")]
    assert len(calls) == 2
    assert 10 in clock.slept  # the min interval after yielding
    sess.close()


def test_checkpoints_iterator_empty_dir_times_out(tmp_path: pathlib.Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(graph_io, "time", clock)
    assert list(tf.train.checkpoints_iterator(str(tmp_path), timeout=3)) == []
    assert clock.now - 1000.0 <= 3


def test_checkpoints_iterator_real_time(tmp_path: pathlib.Path) -> None:
    """With the real clock: a checkpoint saved by another thread is picked up."""
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(1.0, name="v")
        saver = tf.train.Saver([v])
        sess = tf.Session()
        sess.run(v.initializer)
    t = threading.Timer(0.2, lambda: _save(sess, saver, tmp_path, 11))
    t.start()
    it = tf.train.checkpoints_iterator(str(tmp_path), timeout=3)
    assert next(it) == str(tmp_path / "model.ckpt-11")
    t.join()
    sess.close()
