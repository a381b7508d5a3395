"""Coordinator, QueueRunner, MonitoredTrainingSession and its hooks (single process)."""
from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest

import flowrt as tf
from flowrt import errors


def linear_model(lr: float = 0.1):
    g = tf.Graph()
    with g.as_default():
        gs = tf.train.get_or_create_global_step()
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        w = tf.Variable(np.zeros((3, 1), np.float32), name="w")
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        train = tf.train.GradientDescentOptimizer(lr).minimize(loss, global_step=gs)
    return g, gs, x, w, loss, train


X = np.ones((4, 3), np.float32)


# -- coordinator and queue runners ----------------------------------------------------
def test_coordinator_join_reraises_the_first_exception():
    coord = tf.train.Coordinator()

    def bad():
        with coord.stop_on_exception():
            raise ValueError("boom")

    def good():
        coord.wait_for_stop(5)

    ts = [threading.Thread(target=bad), threading.Thread(target=good)]
    for t in ts:
        t.start()
    with pytest.raises(ValueError, match="boom"):
        coord.join(ts, stop_grace_period_secs=5)
    assert coord.should_stop() and coord.joined


def test_coordinator_clean_stop_exceptions_are_not_reported():
    coord = tf.train.Coordinator()
    coord.request_stop(errors.OutOfRangeError(None, None, "done"))
    coord.join([], stop_grace_period_secs=1)  # nothing raised
    coord.clear_stop()
    assert not coord.should_stop()


def test_coordinator_reports_threads_that_do_not_stop():
    coord = tf.train.Coordinator()
    ev = threading.Event()
    t = threading.Thread(target=ev.wait, args=(10,), name="stubborn", daemon=True)
    t.start()
    coord.request_stop()
    with pytest.raises(RuntimeError, match="stubborn"):
        coord.join([t], stop_grace_period_secs=0.2)
    ev.set()


def test_queue_runner_fills_a_queue_until_stopped():
    g = tf.Graph()
    with g.as_default():
        q = tf.FIFOQueue(10, tf.float32, shapes=[])
        counter = tf.Variable(0.0)
        enq = q.enqueue(tf.assign_add(counter, 1.0))
        qr = tf.train.QueueRunner(q, [enq])
        tf.train.add_queue_runner(qr)
        deq = q.dequeue()
        init = tf.global_variables_initializer()
    with tf.Session(graph=g) as sess:
        sess.run(init)
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        got = [float(sess.run(deq)) for _ in range(15)]
        assert got == [float(i) for i in range(1, 16)]  # one enqueuing thread: in order
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=5)
        assert not any(t.is_alive() for t in threads)


def test_queue_runner_closes_the_queue_when_its_op_runs_out():
    g = tf.Graph()
    with g.as_default():
        src = tf.FIFOQueue(10, tf.int32, shapes=[])
        fill = src.enqueue_many([[1, 2, 3]])
        close_src = src.close()
        dst = tf.FIFOQueue(10, tf.int32, shapes=[])
        qr = tf.train.QueueRunner(dst, [dst.enqueue(src.dequeue())])
        deq = dst.dequeue()
    with tf.Session(graph=g) as sess:
        sess.run(fill)
        sess.run(close_src)
        coord = tf.train.Coordinator()
        threads = qr.create_threads(sess, coord=coord, start=True)
        assert [int(sess.run(deq)) for _ in range(3)] == [1, 2, 3]
        with pytest.raises(errors.OutOfRangeError):  # dst was closed by the runner
            sess.run(deq)
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=5)


def test_looper_thread_runs_until_stop():
    coord = tf.train.Coordinator()
    n = []
    t = tf.train.LooperThread.loop(coord, 0.01, n.append, args=(1,))
    time.sleep(0.1)
    coord.request_stop()
    coord.join([t], stop_grace_period_secs=2)
    assert len(n) >= 3


# -- monitored training session -------------------------------------------------------
def test_stop_at_step_checkpoints_and_restore(tmp_path):
    g, gs, x, w, loss, train = linear_model()
    with g.as_default():
        with tf.train.MonitoredTrainingSession(
                checkpoint_dir=str(tmp_path), save_checkpoint_steps=5,
                hooks=[tf.train.StopAtStepHook(last_step=12)]) as sess:
            n = 0
            while not sess.should_stop():
                sess.run(train, {x: X})
                n += 1
            assert n == 12
            w12 = sess.raw_session().run(w)
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-12")
    steps = sorted(int(p.name.split("-")[1].split(".")[0])
                   for p in tmp_path.glob("model.ckpt-*.index"))
    assert steps[-1] == 12 and 0 in steps and 5 in steps
    assert (tmp_path / "graph.pbtxt").exists()
    # a new session restores (not re-initialises) and continues from step 12
    g, gs, x, w, loss, train = linear_model()
    with g.as_default():
        with tf.train.MonitoredTrainingSession(
                checkpoint_dir=str(tmp_path), save_checkpoint_steps=5,
                hooks=[tf.train.StopAtStepHook(num_steps=3)]) as sess:
            assert int(sess.run(gs)) == 12
            np.testing.assert_array_equal(sess.run(w), w12)
            while not sess.should_stop():
                sess.run(train, {x: X})
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-15")


def test_hooks_see_every_run_and_can_add_fetches_and_feeds():
    g, gs, x, w, loss, train = linear_model()

    class Recorder(tf.train.SessionRunHook):
        def __init__(self):
            self.calls = []

        def begin(self):
            self.calls.append("begin")

        def after_create_session(self, session, coord):
            self.calls.append("created")

        def before_run(self, run_context):
            self.calls.append("before")
            return tf.train.SessionRunArgs(loss, feed_dict={x: X})

        def after_run(self, run_context, run_values):
            self.calls.append(("after", float(run_values.results)))
            if len([c for c in self.calls if c == "before"]) == 3:
                run_context.request_stop()

        def end(self, session):
            self.calls.append("end")

    rec = Recorder()
    with g.as_default():
        with tf.train.MonitoredTrainingSession(hooks=[rec]) as sess:
            while not sess.should_stop():
                assert sess.run(train) is None  # the hook feeds x
    assert rec.calls[:3] == ["begin", "created", "before"]
    assert rec.calls[-1] == "end"
    losses = [c[1] for c in rec.calls if isinstance(c, tuple)]
    assert len(losses) == 3 and losses[0] == pytest.approx(1.0) and losses[2] < losses[0]


def test_a_tensor_fed_by_a_hook_and_the_caller_is_an_error():
    g, gs, x, w, loss, train = linear_model()
    with g.as_default():
        hook = tf.train.FeedFnHook(lambda: {x: X})
        with tf.train.MonitoredTrainingSession(hooks=[hook]) as sess:
            with pytest.raises(RuntimeError, match="Same tensor is fed"):
                sess.run(train, {x: X})


def test_nan_tensor_hook_raises_or_stops():
    g = tf.Graph()
    with g.as_default():
        tf.train.get_or_create_global_step()
        nan = tf.constant(np.nan, tf.float32)
        with tf.train.MonitoredTrainingSession(hooks=[tf.train.NanTensorHook(nan)]) as sess:
            with pytest.raises(tf.train.NanLossDuringTrainingError, match="NaN loss"):
                sess.run(nan)
    with g.as_default():
        hook = tf.train.NanTensorHook(nan, fail_on_nan_loss=False)
        with tf.train.MonitoredTrainingSession(hooks=[hook]) as sess:
            sess.run(nan)
            assert sess.should_stop()


def test_logging_tensor_hook_and_step_counter(caplog):
    g, gs, x, w, loss, train = linear_model()
    with g.as_default():
        log = tf.train.LoggingTensorHook({"loss": loss, "step": gs}, every_n_iter=2)
        counter = tf.train.StepCounterHook(every_n_steps=2)
        with caplog.at_level(logging.INFO, logger="flowrt"):
            with tf.train.MonitoredTrainingSession(
                    hooks=[log, counter, tf.train.StopAtStepHook(last_step=6),
                           tf.train.FeedFnHook(lambda: {x: X})]) as sess:
                while not sess.should_stop():
                    sess.run(train)
    lines = [r.getMessage() for r in caplog.records if "loss = " in r.getMessage()]
    assert len(lines) == 3 and lines[0].startswith("loss = 1.0, step = ")
    assert counter.last_rate is not None and counter.last_rate > 0
    assert any("global_step/sec" in r.getMessage() for r in caplog.records)


def test_logging_tensor_hook_argument_checks():
    with pytest.raises(ValueError, match="exactly one of every_n_iter"):
        tf.train.LoggingTensorHook({"a": 1})
    with pytest.raises(ValueError, match="invalid every_n_iter"):
        tf.train.LoggingTensorHook({"a": 1}, every_n_iter=0)
    with pytest.raises(ValueError, match="One of num_steps or last_step"):
        tf.train.StopAtStepHook()


def test_stop_at_step_needs_a_global_step():
    g = tf.Graph()
    with g.as_default():
        tf.constant(1)
        with pytest.raises(RuntimeError, match="Global step should be created"):
            tf.train.MonitoredTrainingSession(hooks=[tf.train.StopAtStepHook(last_step=1)])


def test_final_ops_hook_and_out_of_range_ends_the_loop_quietly():
    g = tf.Graph()
    with g.as_default():
        tf.train.get_or_create_global_step()
        q = tf.FIFOQueue(5, tf.int32, shapes=[])
        fill = q.enqueue_many([[1, 2, 3]])
        close = q.close()
        deq = q.dequeue()
        total = tf.Variable(0, name="total")
        add = tf.assign_add(total, deq)
        final = tf.train.FinalOpsHook(total)
        seen = []
        with tf.train.MonitoredTrainingSession(hooks=[final]) as sess:
            sess.run(fill)
            sess.run(close)
            while not sess.should_stop():
                seen.append(int(sess.run(add)))
    assert seen == [1, 3, 6]
    assert final.final_ops_values == 6


def test_worker_waits_for_the_chief_with_a_bounded_wait_and_a_clear_message():
    server_name = "mts-wait"
    g, gs, x, w, loss, train = linear_model()
    with g.as_default():
        creator = tf.train.WorkerSessionCreator(master=f"inproc://{server_name}",
                                                max_wait_secs=0.5, recovery_wait_secs=0.1)
        t0 = time.monotonic()
        with pytest.raises(errors.DeadlineExceededError) as ei:
            tf.train.MonitoredSession(session_creator=creator)
        assert time.monotonic() - t0 < 5
    msg = ei.value.message
    assert "was not ready after waiting 0.5 secs" in msg and "chief" in msg
    assert "global_step" in msg or "w" in msg


def test_worker_starts_once_the_chief_initialised():
    target = "inproc://mts-chief-first"
    g1, gs1, x1, w1, loss1, train1 = linear_model()
    g2, gs2, x2, w2, loss2, train2 = linear_model()
    out = {}

    def worker():
        with g2.as_default():
            with tf.train.MonitoredTrainingSession(master=target, is_chief=False,
                                                   max_wait_secs=10) as sess:
                out["step"] = int(sess.run(gs2))

    t = threading.Thread(target=worker)
    t.start()
    time.sleep(0.3)  # the worker is waiting
    assert t.is_alive()
    with g1.as_default():
        with tf.train.MonitoredTrainingSession(master=target, is_chief=True) as sess:
            sess.run(train1, {x1: X})
            t.join(15)
    assert not t.is_alive() and out["step"] in (0, 1)


def test_monitored_session_recovers_from_a_lost_task_by_restoring(tmp_path):
    """An AbortedError/UnavailableError closes the session, creates a new one (which
    restores the latest checkpoint) and retries the run."""
    g, gs, x, w, loss, train = linear_model()

    class FailOnce(tf.train.SessionRunHook):
        def __init__(self):
            self.failed = False
            self.created = 0

        def begin(self):
            self.reset = tf.variables_initializer([w, gs])

        def after_create_session(self, session, coord):
            self.created += 1

        def before_run(self, run_context):
            step = int(run_context.session.run(gs))
            if step == 7 and not self.failed:
                self.failed = True
                # what a restarted parameter server looks like: state lost, step aborted
                run_context.session.run(self.reset)
                raise errors.AbortedError(None, None, "task /job:ps/task:0 restarted")
            return None

    hook = FailOnce()
    with g.as_default():
        with tf.train.MonitoredTrainingSession(
                checkpoint_dir=str(tmp_path), save_checkpoint_steps=5,
                hooks=[hook, tf.train.StopAtStepHook(last_step=10)]) as sess:
            steps = []
            while not sess.should_stop():
                steps.append(int(sess.run(gs)))
                sess.run(train, {x: X})
            assert sess.recoveries == 1, steps
    assert hook.created == 2
    # the run at step 7 failed; the retried run saw the restored step 5 (the last
    # checkpoint), and the step never went below it again
    assert steps[:7] == list(range(7))
    assert steps[7] == 5 and steps[7:] == list(range(5, 10))
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-10")


def test_singular_monitored_session_does_not_recover():
    g, gs, x, w, loss, train = linear_model()

    class Fail(tf.train.SessionRunHook):
        def before_run(self, run_context):
            raise errors.UnavailableError(None, None, "gone")

    with g.as_default():
        sess = tf.train.SingularMonitoredSession(hooks=[Fail()])
        with pytest.raises(errors.UnavailableError):
            sess.run(train, {x: X})
        sess.close()


def test_scaffold_defaults_and_finalized_graph():
    g, gs, x, w, loss, train = linear_model()
    with g.as_default():
        sc = tf.train.Scaffold()
        sc.finalize()
        assert sc.init_op is not None and sc.ready_op is not None
        assert sc.saver is not None and g.finalized
        with pytest.raises(RuntimeError):
            tf.constant(1)
