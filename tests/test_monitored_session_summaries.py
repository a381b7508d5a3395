"""Summaries of monitored sessions: SummarySaverHook, StepCounterHook's scalar,
CheckpointSaverHook's graph and SessionLog events, MonitoredTrainingSession's defaults.
Event files are read back with the ``tensorboard`` package's own readers."""
from __future__ import annotations

import glob
import os
import threading

import numpy as np
import pytest
from google.protobuf import text_format

import flowrt as tf
from flowrt.proto import graph_def_pb2

X = np.ones((4, 3), np.float32)


def model(with_summary: bool = True):
    g = tf.Graph()
    with g.as_default():
        gs = tf.train.get_or_create_global_step()
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        w = tf.Variable(np.zeros((3, 1), np.float32), name="w")
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        if with_summary:
            tf.summary.scalar("loss", loss)
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    return g, x, loss, train


def train_to(sess, train, x):
    while not sess.should_stop():
        sess.run(train, {x: X})


def events(logdir: str) -> list:
    from tensorboard.backend.event_processing import event_file_loader

    out = []
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
        out.extend(event_file_loader.LegacyEventFileLoader(path).Load())
    return out


def scalars(logdir: str) -> dict:
    """tag -> [(step, value)] through TensorBoard's accumulator."""
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(logdir, size_guidance={ea.SCALARS: 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def session_logs(logdir: str) -> list:
    return [(e.step, e.session_log.status, e.session_log.checkpoint_path)
            for e in events(logdir) if e.HasField("session_log")]


def writer_threads() -> list:
    return [t for t in threading.enumerate() if t.name == "flowrt-event-writer"]


def test_monitored_training_session_writes_what_tensorboard_shows(tmp_path):
    d = str(tmp_path)
    before = len(writer_threads())
    g, x, loss, train = model()
    with g.as_default():
        with tf.train.MonitoredTrainingSession(
                checkpoint_dir=d, save_summaries_steps=2, log_step_count_steps=3,
                hooks=[tf.train.StopAtStepHook(last_step=7)]) as sess:
            train_to(sess, train, x)
    sc = scalars(d)
    assert sorted(sc) == ["global_step/sec", "loss"]
    # fetched with the step that makes the global step 1, 3, 5, 7: the loss before it
    assert [s for s, _ in sc["loss"]] == [1, 3, 5, 7]
    assert sc["loss"][0][1] == pytest.approx(1.0)
    assert sc["loss"][1][1] < sc["loss"][0][1]
    assert [s for s, _ in sc["global_step/sec"]] == [4, 7]
    assert all(v > 0 for _, v in sc["global_step/sec"])
    ckpt = os.path.join(d, "model.ckpt")
    S = tf.SessionLog
    assert session_logs(d) == [(0, S.CHECKPOINT, ckpt), (1, S.START, ""),
                               (7, S.CHECKPOINT, ckpt)]
    kinds = [e.WhichOneof("what") for e in events(d)]
    assert kinds[0] == "file_version" and "graph_def" in kinds and "meta_graph_def" in kinds
    graph_events = [e for e in events(d) if e.HasField("graph_def")]
    gd = graph_def_pb2.GraphDef.FromString(graph_events[-1].graph_def)
    assert {"w", "global_step", "loss"} <= {n.name for n in gd.node}
    meta = [e for e in events(d) if e.HasField("meta_graph_def")][-1]
    mg = tf.MetaGraphDef.FromString(meta.meta_graph_def)
    assert mg.saver_def.filename_tensor_name  # the meta graph carries the saver
    with open(os.path.join(d, "graph.pbtxt")) as f:
        text_format.Parse(f.read(), graph_def_pb2.GraphDef())
    assert len(writer_threads()) == before  # the cached writer was closed


def test_session_close_evicts_the_cached_writer(tmp_path):
    d = str(tmp_path)
    g, x, loss, train = model()
    with g.as_default():
        with tf.train.MonitoredTrainingSession(
                checkpoint_dir=d, save_summaries_steps=1,
                hooks=[tf.train.StopAtStepHook(last_step=2)]) as sess:
            writer = tf.summary.FileWriterCache.get(d)
            train_to(sess, train, x)
        again = tf.summary.FileWriterCache.get(d)
    assert again is not writer  # a new writer (and file) for a later session
    again.close()
    tf.summary.FileWriterCache.clear()


def test_summary_dir_and_disabled_summaries(tmp_path):
    ck, sd = str(tmp_path / "ck"), str(tmp_path / "sum")
    g, x, loss, train = model()
    with g.as_default():
        with tf.train.MonitoredTrainingSession(
                checkpoint_dir=ck, summary_dir=sd, save_summaries_steps=None,
                save_summaries_secs=None, log_step_count_steps=2,
                hooks=[tf.train.StopAtStepHook(last_step=4)]) as sess:
            train_to(sess, train, x)
    assert sorted(scalars(sd)) == ["global_step/sec"]  # no summary op run
    assert [st for _, st, _ in session_logs(sd)] == []
    assert [st for _, st, _ in session_logs(ck)] == [tf.SessionLog.CHECKPOINT] * 2


def test_save_summaries_secs(tmp_path):
    d = str(tmp_path)
    g, x, loss, train = model()
    with g.as_default():
        with tf.train.MonitoredTrainingSession(
                checkpoint_dir=d, save_summaries_secs=3600, log_step_count_steps=None,
                hooks=[tf.train.StopAtStepHook(last_step=5)]) as sess:
            train_to(sess, train, x)
    assert [s for s, _ in scalars(d)["loss"]] == [1]  # the first step only


def test_summary_saver_hook_with_own_writer_and_op_list(tmp_path):
    d = str(tmp_path)
    g, x, loss, train = model(with_summary=False)
    with g.as_default():
        s1 = tf.summary.scalar("a", loss)
        s2 = tf.summary.scalar("b", loss * 2)
        writer = tf.summary.FileWriter(d)
        hook = tf.train.SummarySaverHook(save_steps=3, summary_writer=writer,
                                         summary_op=[s1, s2])
        with tf.train.MonitoredTrainingSession(
                hooks=[hook, tf.train.StopAtStepHook(last_step=7)]) as sess:
            train_to(sess, train, x)
        sc = scalars(d)  # flushed at the end, though not closed: the writer is ours
        assert [s for s, _ in sc["a"]] == [1, 4, 7]
        assert [v for _, v in sc["b"]] == pytest.approx([2 * v for _, v in sc["a"]])
        writer.add_session_log(tf.SessionLog(status=tf.SessionLog.STOP), 7)
        writer.close()
    assert session_logs(d) == [(1, tf.SessionLog.START, ""), (7, tf.SessionLog.STOP, "")]


def test_summary_saver_hook_arguments():
    scaffold = tf.train.Scaffold()
    with pytest.raises(ValueError, match="Exactly one of scaffold or summary_op"):
        tf.train.SummarySaverHook(save_steps=1)
    with pytest.raises(ValueError, match="Exactly one of scaffold or summary_op"):
        tf.train.SummarySaverHook(save_steps=1, scaffold=scaffold, summary_op=object())
    with pytest.raises(ValueError, match="Can not provide both"):
        tf.train.SummarySaverHook(save_steps=1, save_secs=1, scaffold=scaffold)
    with pytest.raises(ValueError, match="Either every_secs or every_steps"):
        tf.train.SummarySaverHook(scaffold=scaffold)
    with tf.Graph().as_default():
        hook = tf.train.SummarySaverHook(save_steps=1, scaffold=scaffold)
        with pytest.raises(RuntimeError, match="Global step should be created"):
            hook.begin()


def test_scaffold_summary_op_defaults_to_merge_all():
    g, *_ = model()
    with g.as_default():
        sc = tf.train.Scaffold().finalize()
        assert sc.summary_op.op.type == "MergeSummary"
        assert tf.get_collection(tf.GraphKeys.SUMMARY_OP) == [sc.summary_op]
        assert tf.train.Scaffold().finalize().summary_op is sc.summary_op
    g, *_ = model(with_summary=False)
    with g.as_default():
        assert tf.train.Scaffold().finalize().summary_op is None
        assert tf.get_collection(tf.GraphKeys.SUMMARY_OP) == []


def test_step_counter_hook_writes_its_rate(tmp_path):
    d = str(tmp_path)
    g, x, loss, train = model(with_summary=False)
    with g.as_default():
        writer = tf.summary.FileWriter(d)
        counter = tf.train.StepCounterHook(every_n_steps=2, summary_writer=writer)
        with tf.train.MonitoredTrainingSession(
                hooks=[counter, tf.train.StopAtStepHook(last_step=6)]) as sess:
            train_to(sess, train, x)
        writer.close()
    sc = scalars(d)
    assert [s for s, _ in sc["global_step/sec"]] == [3, 5]
    assert sc["global_step/sec"][-1][1] == pytest.approx(counter.last_rate)


def test_events_are_flushed_when_the_session_fails(tmp_path):
    d = str(tmp_path)
    before = len(writer_threads())
    g, x, loss, train = model()
    with g.as_default():
        with pytest.raises(ValueError, match="boom"):
            with tf.train.MonitoredTrainingSession(checkpoint_dir=d,
                                                   save_summaries_steps=1) as sess:
                sess.run(train, {x: X})
                sess.run(train, {x: X})
                raise ValueError("boom")
    assert [s for s, _ in scalars(d)["loss"]] == [1, 2]
    assert len(writer_threads()) == before


def test_non_chief_writes_no_summaries(tmp_path):
    d = str(tmp_path)
    g, x, loss, train = model()
    with g.as_default():
        # the chief makes the model ready; a worker session on the same in-process
        # target then waits for nothing
        server = tf.train.Server.create_local_server()
        with tf.train.MonitoredTrainingSession(master=server.target, checkpoint_dir=d,
                                               save_summaries_steps=1) as chief:
            chief.run(train, {x: X})
            with tf.train.MonitoredTrainingSession(
                    master=server.target, is_chief=False, checkpoint_dir=str(tmp_path / "w"),
                    save_summaries_steps=1) as worker:
                worker.run(train, {x: X})
    assert not os.path.exists(tmp_path / "w")


def test_hook_run_options_are_merged_and_get_run_metadata(tmp_path):
    """As TF's _HookedSession: the hooks' RunOptions are merged (the highest trace level
    wins) and a RunMetadata is made when the caller passed none, so ProfilerHook writes
    its timelines inside a monitored session."""
    with tf.Graph().as_default():
        gs = tf.train.get_or_create_global_step()
        step = tf.assign_add(gs, 1)
        hook = tf.train.ProfilerHook(save_steps=2, output_dir=str(tmp_path))
        with tf.train.MonitoredSession(hooks=[hook]) as sess:
            for _ in range(4):
                sess.run(step)
    written = sorted(p.name for p in tmp_path.glob("timeline-*.json"))
    assert written and all(p.stat().st_size > 0 for p in tmp_path.glob("timeline-*.json"))
