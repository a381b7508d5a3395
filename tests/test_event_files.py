"""Event files: tf.summary.FileWriter (file names, framing, background writing, flush,
close/reopen, exit), FileWriterCache and tf.train.summary_iterator, read back with
TensorBoard's own reader as well as flowrt's."""
from __future__ import annotations

import glob
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors
from flowrt.framework import events

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _files(d) -> list:
    return sorted(glob.glob(os.path.join(str(d), "events.out.tfevents.*")))


def _events(path) -> list:
    return list(tf.train.summary_iterator(path))


def _scalar(tag: str, value: float) -> tf.Summary:
    return tf.Summary(value=[tf.Summary.Value(tag=tag, simple_value=value)])


# -- framing ------------------------------------------------------------------------------
def _crc32c(data: bytes) -> int:
    """Bitwise CRC32C (Castagnoli), independent of google_crc32c."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_masked_crc():
    assert _crc32c(b"123456789") == 0xE3069283
    for data in (b"", b"123456789", bytes(range(256))):
        crc = _crc32c(data)
        want = ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
        assert events.masked_crc32c(data) == want


@settings(max_examples=30, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=8))
def test_records_round_trip(tmp_path_factory, records):
    path = tmp_path_factory.mktemp("rec") / "r"
    framed = b"".join(events.frame_record(r) for r in records)
    path.write_bytes(framed)
    assert list(events.read_records(str(path))) == records
    # the framing byte by byte: length, its masked CRC, the data, its masked CRC
    off = 0
    for r in records:
        (n,) = struct.unpack("<Q", framed[off:off + 8])
        assert n == len(r)
        assert struct.unpack("<I", framed[off + 8:off + 12])[0] == \
            events.masked_crc32c(framed[off:off + 8])
        assert framed[off + 12:off + 12 + n] == r
        assert struct.unpack("<I", framed[off + 12 + n:off + 16 + n])[0] == \
            events.masked_crc32c(r)
        off += 16 + n


# -- the file -----------------------------------------------------------------------------
def test_file_name_and_first_event(tmp_path):
    before = int(time.time())
    w = tf.summary.FileWriter(str(tmp_path / "run"))
    assert _files(tmp_path / "run") == []  # created with the first event, as TF does
    w.add_summary(_scalar("x", 1.5), global_step=3)
    w.close()
    (path,) = _files(tmp_path / "run")
    m = re.fullmatch(r"events\.out\.tfevents\.(\d{10})\.(.+)", os.path.basename(path))
    assert m and m.group(2) == socket.gethostname()
    assert before <= int(m.group(1)) <= time.time()
    first, second = _events(path)
    assert first.file_version == "brain.Event:2"
    assert first.wall_time == int(m.group(1)) and first.step == 0
    assert second.step == 3 and second.summary.value[0].simple_value == 1.5
    assert abs(second.wall_time - time.time()) < 60
    assert w.get_logdir() == str(tmp_path / "run")


def test_filename_suffix_creates_the_file_at_once(tmp_path):
    w = tf.summary.FileWriter(str(tmp_path), filename_suffix=".v2")
    (path,) = _files(tmp_path)
    assert path.endswith("." + socket.gethostname() + ".v2")
    assert [e.file_version for e in _events(path)] == ["brain.Event:2"]
    w.close()


def test_tensorboard_reads_what_flowrt_writes(tmp_path):
    from tensorboard.backend.event_processing import event_accumulator as ea

    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [None, 4])
        with tf.name_scope("train"):
            tf.summary.scalar("loss", tf.reduce_mean(x))
            tf.summary.histogram("x", x)
        tf.summary.image("img", tf.reshape(x, [-1, 2, 2, 1]), max_outputs=1)
        tf.summary.audio("snd", x / 10, 4000, max_outputs=1)
        tf.summary.text("note", tf.constant("hello"))
        merged = tf.summary.merge_all()
        with tf.Session() as sess:
            with tf.summary.FileWriter(str(tmp_path), sess.graph) as w:
                for step in range(3):
                    feed = {x: np.arange(8, dtype=np.float32).reshape(2, 4) * (step + 1)}
                    w.add_summary(sess.run(merged, feed), step * 10)
    acc = ea.EventAccumulator(str(tmp_path), size_guidance={k: 0 for k in (
        ea.SCALARS, ea.HISTOGRAMS, ea.IMAGES, ea.AUDIO, ea.TENSORS)})
    acc.Reload()
    tags = acc.Tags()
    assert tags["scalars"] == ["train/loss"] and tags["histograms"] == ["train/x"]
    assert tags["images"] == ["img/image"] and tags["audio"] == ["snd/audio"]
    assert tags["tensors"] == ["note"] and tags["graph"] and tags["meta_graph"]
    assert [(e.step, e.value) for e in acc.Scalars("train/loss")] == \
        [(0, 3.5), (10, 7.0), (20, 10.5)]
    h = acc.Histograms("train/x")[2].histogram_value
    assert (h.min, h.max, h.num, h.sum) == (0.0, 21.0, 8.0, 84.0)
    img = acc.Images("img/image")[0]
    assert (img.width, img.height, img.step) == (2, 2, 0)
    assert acc.Audio("snd/audio")[1].sample_rate == 4000.0
    assert acc.Tensors("note")[0].tensor_proto.string_val == [b"hello"]
    assert acc.SummaryMetadata("note").plugin_data.plugin_name == "text"
    assert {n.name for n in acc.Graph().node} >= {"train/loss", "Merge/MergeSummary"}


def test_tensorboard_event_file_loader(tmp_path):
    from tensorboard.backend.event_processing import event_file_loader

    w = tf.summary.FileWriter(str(tmp_path))
    for step in range(5):
        w.add_summary(_scalar("a", step * 0.5).SerializeToString(), step)
    w.close()
    loaded = list(event_file_loader.LegacyEventFileLoader(_files(tmp_path)[0]).Load())
    assert loaded[0].file_version == "brain.Event:2"
    assert [(e.step, e.summary.value[0].simple_value) for e in loaded[1:]] == \
        [(s, s * 0.5) for s in range(5)]


# -- what the writer writes ---------------------------------------------------------------
def test_add_methods(tmp_path):
    with tf.Graph().as_default() as g:
        tf.constant(1.0, name="c")
    w = tf.summary.FileWriter(str(tmp_path), graph=g)
    w.add_session_log(tf.SessionLog(status=tf.SessionLog.START), 1)
    md = tf.RunMetadata()
    md.step_stats.dev_stats.add(device="/cpu:0")
    w.add_run_metadata(md, "step1", global_step=2)
    with pytest.raises(ValueError, match="tag was already used"):
        w.add_run_metadata(md, "step1")
    w.add_event(tf.Event(wall_time=5.0, step=9, log_message=tf.LogMessage(
        level=tf.LogMessage.WARN, message="careful")))
    w.add_graph(g.as_graph_def(), global_step=4)
    with pytest.raises(TypeError, match="must be an instance of `Graph`"):
        w.add_graph("nope")
    with pytest.raises(ValueError, match="only graph, or graph_def"):
        w.add_graph(g, graph_def=g.as_graph_def())
    with pytest.raises(TypeError, match="meta_graph_def must be type MetaGraphDef"):
        w.add_meta_graph(g.as_graph_def())
    w.close()
    ev = _events(_files(tmp_path)[0])
    kinds = [(e.WhichOneof("what"), e.step) for e in ev]
    assert kinds == [("file_version", 0), ("graph_def", 0), ("meta_graph_def", 0),
                     ("session_log", 1), ("tagged_run_metadata", 2), ("log_message", 9),
                     ("graph_def", 4)]
    gd = tf.GraphDef.FromString(ev[1].graph_def)
    assert [n.name for n in gd.node] == ["c"] and "_output_shapes" in gd.node[0].attr
    mg = tf.MetaGraphDef.FromString(ev[2].meta_graph_def)
    assert [n.name for n in mg.graph_def.node] == ["c"]
    assert ev[3].session_log.status == tf.SessionLog.START
    trm = ev[4].tagged_run_metadata
    assert trm.tag == "step1" and tf.RunMetadata.FromString(trm.run_metadata) == md
    assert ev[5].wall_time == 5.0 and ev[5].log_message.message == "careful"


def test_metadata_kept_on_the_first_value_of_a_tag(tmp_path):
    w = tf.summary.FileWriter(str(tmp_path))
    s = tf.Summary()
    v = s.value.add(tag="t")
    v.metadata.plugin_data.plugin_name = "text"
    v.tensor.CopyFrom(tf.make_tensor_proto(np.array([b"a"], object)))
    for step in range(3):
        w.add_summary(s.SerializeToString() if step else s, step)
    w.close()
    assert s.value[0].HasField("metadata")  # the caller's proto is not changed
    got = [e.summary.value[0].HasField("metadata") for e in _events(_files(tmp_path)[0])[1:]]
    assert got == [True, False, False]


def test_add_summary_rejects_other_things(tmp_path):
    w = tf.summary.FileWriter(str(tmp_path))
    with pytest.raises(TypeError, match="Summary proto or its serialized bytes"):
        w.add_summary(3.5)
    w.close()


# -- background writing -------------------------------------------------------------------
def test_flush_makes_events_visible(tmp_path):
    w = tf.summary.FileWriter(str(tmp_path), flush_secs=1000)
    w.add_summary(_scalar("a", 1.0), 0)
    w.flush()
    (path,) = _files(tmp_path)
    assert len(_events(path)) == 2
    for step in range(1, 4):
        w.add_summary(_scalar("a", 1.0), step)
    time.sleep(0.2)
    assert len(_events(path)) == 2  # still in memory: flush_secs has not passed
    w.flush()
    assert [e.step for e in _events(path)] == [0, 0, 1, 2, 3]
    w.close()


def test_flush_secs_writes_without_being_asked(tmp_path):
    w = tf.summary.FileWriter(str(tmp_path), flush_secs=0.2)
    w.add_summary(_scalar("a", 1.0), 7)
    deadline = time.time() + 10
    while time.time() < deadline:
        files = _files(tmp_path)
        if files and len(_events(files[0])) == 2:
            break
        time.sleep(0.05)
    assert [e.step for e in _events(_files(tmp_path)[0])] == [0, 7]
    w.close()


def test_adding_does_not_wait_for_the_disk(tmp_path, monkeypatch):
    class SlowDisk:
        """``os`` as the writer sees it, with every write taking 50 ms."""

        def __getattr__(self, name):
            return getattr(os, name)

        def write(self, fd, data):
            time.sleep(0.05)
            return os.write(fd, data)

    monkeypatch.setattr(events, "os", SlowDisk())
    w = tf.summary.FileWriter(str(tmp_path), max_queue=2)  # wakes the writer every 2
    t = time.perf_counter()
    for step in range(10):
        w.add_summary(_scalar("a", 1.0), step)
    assert time.perf_counter() - t < 0.2  # five writes take 0.25 s
    assert w.event_writer._max_queue == 2
    w.close()
    assert [e.step for e in _events(_files(tmp_path)[0])][1:] == list(range(10))


def test_events_from_many_threads_all_arrive_whole(tmp_path):
    w = tf.summary.FileWriter(str(tmp_path), max_queue=3)

    def add(k):
        for step in range(50):
            w.add_summary(_scalar(f"t{k}", float(step)), step)
            if step % 17 == 0:
                w.flush()

    threads = [threading.Thread(target=add, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    w.close()
    got = {}
    for e in _events(_files(tmp_path)[0])[1:]:
        got.setdefault(e.summary.value[0].tag, []).append(e.step)
    assert got == {f"t{k}": list(range(50)) for k in range(4)}  # each thread's in order


def test_the_buffer_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(events, "_HARD_LIMIT", 4096)
    gate = threading.Event()

    class StuckDisk:
        def __getattr__(self, name):
            return getattr(os, name)

        def write(self, fd, data):
            gate.wait(10)
            return os.write(fd, data)

    monkeypatch.setattr(events, "os", StuckDisk())
    w = tf.summary.FileWriter(str(tmp_path), max_queue=1)
    done = threading.Event()

    def add():
        for step in range(1000):
            w.add_summary(_scalar("a", float(step)), step)
        done.set()

    t = threading.Thread(target=add)
    t.start()
    assert not done.wait(0.5)  # the disk is stuck: the adder waits once 4 KiB are held
    assert len(w.event_writer._buffer) < 4096 + 100
    gate.set()
    assert done.wait(10)
    t.join(10)
    w.close()
    assert [e.step for e in _events(_files(tmp_path)[0])][1:] == list(range(1000))


def test_close_reopen(tmp_path):
    w = tf.summary.FileWriter(str(tmp_path))
    w.add_summary(_scalar("a", 1.0), 1)
    w.close()
    w.close()  # twice is fine
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w.add_summary(_scalar("a", 2.0), 2)  # dropped
    assert "closed FileWriter" in str(caught[0].message)
    w.reopen()
    w.add_summary(_scalar("a", 3.0), 3)
    w.close()
    steps = [e.step for p in _files(tmp_path) for e in _events(p) if e.HasField("summary")]
    assert steps == [1, 3]
    assert all(_events(p)[0].file_version == "brain.Event:2" for p in _files(tmp_path))


def test_a_deleted_file_is_started_again(tmp_path):
    w = tf.summary.FileWriter(str(tmp_path))
    w.add_summary(_scalar("a", 1.0), 1)
    w.flush()
    os.remove(_files(tmp_path)[0])
    w.add_summary(_scalar("a", 2.0), 2)
    w.close()
    (path,) = _files(tmp_path)
    assert [(e.WhichOneof("what"), e.step) for e in _events(path)] == \
        [("file_version", 0), ("summary", 2)]


def test_events_are_written_at_exit(tmp_path):
    code = (
        "import flowrt as tf\n"
        f"w = tf.summary.FileWriter({str(tmp_path)!r}, flush_secs=1000)\n"
        "for i in range(25):\n"
        "    w.add_summary(tf.Summary(value=[tf.Summary.Value(tag='a', simple_value=i)]), i)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, cwd=ROOT)
    assert [e.step for e in _events(_files(tmp_path)[0])][1:] == list(range(25))


def test_file_writer_cache(tmp_path):
    a = tf.summary.FileWriterCache.get(str(tmp_path / "a"))
    assert tf.summary.FileWriterCache.get(str(tmp_path / "a")) is a
    b = tf.summary.FileWriterCache.get(str(tmp_path / "b"))
    assert b is not a
    tf.summary.FileWriterCache.clear()
    assert tf.summary.FileWriterCache.get(str(tmp_path / "a")) is not a
    tf.summary.FileWriterCache.clear()
    # each was made with the default graph
    assert any(e.HasField("graph_def") for e in _events(_files(tmp_path / "b")[0]))


# -- reading ------------------------------------------------------------------------------
def _two_event_file(tmp_path) -> str:
    w = tf.summary.FileWriter(str(tmp_path))
    w.add_summary(_scalar("a", 1.0), 1)
    w.add_summary(_scalar("a", 2.0), 2)
    w.close()
    return _files(tmp_path)[0]


@pytest.mark.parametrize("cut", [1, 4, 5, 13])
def test_truncated_file(tmp_path, cut):
    path = _two_event_file(tmp_path)
    data = open(path, "rb").read()
    last = len(data) - len(events.frame_record(_events(path)[-1].SerializeToString()))
    open(path, "wb").write(data[:-cut])
    got = []
    with pytest.raises(errors.DataLossError,
                       match=f"^{re.escape(path)}: truncated record at {last}$"):
        for e in tf.train.summary_iterator(path):
            got.append(e.step)
    assert got == [0, 1]


@pytest.mark.parametrize("keep", [0, 1, 11])
def test_a_partial_header_at_the_end_is_the_end(tmp_path, keep):
    path = _two_event_file(tmp_path)
    data = open(path, "rb").read()
    last = len(data) - len(events.frame_record(_events(path)[-1].SerializeToString()))
    open(path, "wb").write(data[:last + keep])
    assert [e.step for e in tf.train.summary_iterator(path)] == [0, 1]


def test_corrupt_file(tmp_path):
    path = _two_event_file(tmp_path)
    data = bytearray(open(path, "rb").read())
    data[-6] ^= 0xFF  # inside the last record's data
    open(path, "wb").write(bytes(data))
    with pytest.raises(errors.DataLossError, match=r"corrupted record at \d+"):
        list(tf.train.summary_iterator(path))
    data = bytearray(open(path, "rb").read())
    data[0] ^= 0x01  # the first record's length
    open(path, "wb").write(bytes(data))
    with pytest.raises(errors.DataLossError, match="corrupted record at 0$"):
        list(tf.train.summary_iterator(path))


def test_logdir_that_is_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(errors.FailedPreconditionError, match="is not a directory"):
        tf.summary.FileWriter(str(tmp_path / "f"))


def test_missing_file(tmp_path):
    with pytest.raises(errors.NotFoundError, match="No such file or directory"):
        list(tf.train.summary_iterator(str(tmp_path / "none")))
