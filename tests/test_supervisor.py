"""``tf.train.Supervisor``: defaults, managed sessions, standard services (summaries, step
rate, checkpoints on secs timers), restoring, stopping within the grace period, and the
event files it writes (read back with the ``tensorboard`` package)."""
from __future__ import annotations

import glob
import os
import threading
import time

import numpy as np
import pytest

import flowrt as tf
from flowrt import errors


def model(device: str = ""):
    g = tf.Graph()
    with g.as_default(), tf.device(device):
        gs = tf.train.get_or_create_global_step()
        w = tf.Variable(np.zeros((3, 1), np.float32), name="w")
        loss = tf.reduce_mean(tf.square(tf.reduce_sum(w) - 1.0))
        tf.summary.scalar("loss", loss)
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    return g, w, train


def events(logdir: str) -> list:
    from tensorboard.backend.event_processing import event_file_loader

    out = []
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
        out.extend(event_file_loader.LegacyEventFileLoader(path).Load())
    return out


def tags_and_steps(logdir: str) -> dict:
    out: dict = {}
    for e in events(logdir):
        for v in e.summary.value:
            out.setdefault(v.tag, []).append(e.step)
    return out


def extra_threads(before: set) -> list:
    return [t for t in threading.enumerate() if t not in before and t.is_alive()]


def test_defaults_and_properties(tmp_path):
    g, w, train = model()
    with g.as_default():
        sv = tf.train.Supervisor(logdir=str(tmp_path))
    assert tf.train.Supervisor.USE_DEFAULT == 0
    assert g.finalized and sv.is_chief
    assert sv.global_step.name == "global_step:0"
    assert sv.summary_op.op.type == "MergeSummary"
    assert isinstance(sv.saver, tf.train.Saver)
    assert sv.save_path == os.path.join(str(tmp_path), "model.ckpt")
    assert (sv.save_summaries_secs, sv.save_model_secs) == (120, 600)
    assert isinstance(sv.coord, tf.train.Coordinator)
    assert isinstance(sv.session_manager, tf.train.SessionManager)
    assert sv.init_op is g.get_collection(tf.GraphKeys.INIT_OP)[0]
    assert sv.ready_op is g.get_collection(tf.GraphKeys.READY_OP)[0]
    assert sv.summary_op is g.get_collection(tf.GraphKeys.SUMMARY_OP)[0]
    assert sv.saver is g.get_collection(tf.GraphKeys.SAVERS)[0]
    assert sv.ready_for_local_init_op is None and sv.init_feed_dict is None
    assert isinstance(sv.summary_writer, tf.summary.FileWriter)
    sv.summary_writer.close()


def test_none_turns_pieces_off_and_non_chief_writes_nothing(tmp_path):
    g, w, train = model("/cpu:0")
    with g.as_default():
        sv = tf.train.Supervisor(logdir=str(tmp_path), is_chief=False, summary_op=None,
                                 saver=None, global_step=None, init_op=None)
    assert sv.summary_op is None and sv.saver is None and sv.global_step is None
    assert sv.init_op is None
    assert sv.summary_writer is None and sv.save_path is None
    assert sv.save_summaries_secs is None and sv.save_model_secs is None
    with pytest.raises(RuntimeError, match="Only chief supervisor"):
        sv.start_standard_services(None)
    with pytest.raises(RuntimeError, match="requires a summary writer"):
        sv.summary_computed(None, b"")


def test_non_chief_needs_devices_on_variables():
    g, w, train = model()
    with g.as_default(), pytest.raises(ValueError, match="all Variables must have their "
                                                         "device set"):
        tf.train.Supervisor(is_chief=False)


def test_managed_session_services_and_event_file(tmp_path):
    d = str(tmp_path)
    before = set(threading.enumerate())
    g, w, train = model()
    with g.as_default():
        sv = tf.train.Supervisor(logdir=d, save_summaries_secs=0.2, save_model_secs=0.2)
        with sv.managed_session() as sess:
            names = {t.name for t in extra_threads(before)}
            assert {"SVSummaryThread", "SVStepCounterThread",
                    "SVTimerCheckpointThread"} <= names
            for _ in range(6):
                sess.run(train)
                time.sleep(0.1)
            sv.summary_computed(sess, sess.run(sv.summary_op))
    assert extra_threads(before) == []  # services joined, writer closed
    ts = tags_and_steps(d)
    assert sorted(ts) == ["global_step/sec", "loss"]
    assert ts["loss"][0] == 0 and ts["loss"][-1] == 6 and len(ts["loss"]) >= 3
    assert ts["global_step/sec"][0] == 0 and len(ts["global_step/sec"]) >= 2
    evs = events(d)
    kinds = [e.WhichOneof("what") for e in evs]
    assert kinds[:4] == ["file_version", "graph_def", "meta_graph_def", "session_log"]
    S = tf.SessionLog
    logs = [(e.session_log.status, e.session_log.checkpoint_path)
            for e in evs if e.HasField("session_log")]
    assert logs[0] == (S.START, "") and evs[3].step == 0
    assert logs[-1] == (S.STOP, "")
    ckpt_logs = [p for s, p in logs if s == S.CHECKPOINT]
    assert len(ckpt_logs) >= 2 and set(ckpt_logs) == {os.path.join(d, "model.ckpt")}
    assert os.path.exists(os.path.join(d, "graph.pbtxt"))
    assert tf.train.latest_checkpoint(d) is not None


def test_restores_from_the_latest_checkpoint(tmp_path):
    d = str(tmp_path)
    g, w, train = model()
    with g.as_default():
        sv = tf.train.Supervisor(logdir=d, save_model_secs=0, save_summaries_secs=0)
        with sv.managed_session() as sess:
            for _ in range(3):
                sess.run(train)
            sv.saver.save(sess, sv.save_path, global_step=sv.global_step)
            trained = sess.run(w)
    g, w, train = model()
    with g.as_default():
        sv = tf.train.Supervisor(logdir=d, save_model_secs=0, save_summaries_secs=0)
        with sv.managed_session() as sess:
            assert int(sess.run(sv.global_step)) == 3
            np.testing.assert_array_equal(sess.run(w), trained)


def test_exception_in_managed_session_propagates_and_stops(tmp_path):
    before = set(threading.enumerate())
    g, w, train = model()
    with g.as_default():
        sv = tf.train.Supervisor(logdir=str(tmp_path), save_summaries_secs=0.1)
        with pytest.raises(ValueError, match="boom"):
            with sv.managed_session() as sess:
                sess.run(train)
                raise ValueError("boom")
    assert sv.should_stop()
    assert extra_threads(before) == []
    assert events(str(tmp_path))[-1].session_log.status == tf.SessionLog.STOP


def test_out_of_range_ends_the_managed_session_quietly(tmp_path):
    g, w, train = model()
    with g.as_default():
        sv = tf.train.Supervisor(logdir=str(tmp_path), save_summaries_secs=0,
                                 save_model_secs=0)
        with sv.managed_session() as sess:
            sess.run(train)
            raise errors.OutOfRangeError(None, None, "End of sequence")
        assert sv.should_stop()


def test_stop_within_grace_and_live_threads(tmp_path):
    g, w, train = model()
    release = threading.Event()
    with g.as_default():
        sv = tf.train.Supervisor(logdir=str(tmp_path), save_summaries_secs=0,
                                 save_model_secs=0, stop_grace_secs=0.3)
        sess = sv.prepare_or_wait_for_session()
        stubborn = sv.loop(None, lambda: release.wait(10))
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match="threads still running"):
            sv.stop()
        assert time.monotonic() - t0 < 2.0
        release.set()
        stubborn.join(5)
        assert not stubborn.is_alive()
        sess.close()


def test_loop_request_stop_and_stop_on_exception(tmp_path):
    g, w, train = model()
    calls = []
    with g.as_default():
        sv = tf.train.Supervisor(logdir=str(tmp_path), save_summaries_secs=0,
                                 save_model_secs=0)
        sess = sv.prepare_or_wait_for_session(start_standard_services=False)
        looper = sv.loop(0.05, calls.append, args=(1,))
        deadline = time.monotonic() + 5
        while len(calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not sv.should_stop()
        with sv.stop_on_exception():
            raise KeyError("k")
        assert sv.should_stop()
        sv.wait_for_stop()
        with pytest.raises(KeyError):
            sv.stop()
        assert not looper.is_alive() and len(calls) >= 3
        sess.close()


def test_no_logdir_means_no_services():
    g, w, train = model()
    with g.as_default():
        sv = tf.train.Supervisor(save_summaries_secs=0.1, save_model_secs=0.1)
        assert sv.summary_writer is None and sv.save_path is None
        with sv.managed_session() as sess:
            assert sv.start_standard_services(sess) is None
            sess.run(train)


def test_queue_runners_are_started(tmp_path):
    g = tf.Graph()
    with g.as_default():
        tf.train.get_or_create_global_step()
        q = tf.FIFOQueue(10, tf.float32, shapes=[])
        tf.train.add_queue_runner(tf.train.QueueRunner(q, [q.enqueue(1.0)]))
        x = q.dequeue()
        sv = tf.train.Supervisor(logdir=str(tmp_path), save_summaries_secs=0,
                                 save_model_secs=0)
        with sv.managed_session() as sess:
            assert [sess.run(x) for _ in range(3)] == [1.0, 1.0, 1.0]
