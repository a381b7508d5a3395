"""Summaries of training loops under TensorFlow and flowrt (helper Y): the same TF1
program with ``MonitoredTrainingSession(save_summaries_steps=k)`` and with
``tf.train.Supervisor`` writes event files; each file is read by both readers (TF's
``summary_iterator`` and flowrt's) and the events are compared: their kinds, summary
tags and steps, SessionLog statuses and checkpoint paths (relative to the logdir),
the loss values; ``global_step/sec`` values are timings and only their steps are
compared.

TF's cached writers are flushed with ``FileWriterCache.clear()`` after the session:
TF 1.15 leaves them open (the last events reach the disk at exit), flowrt closes them
with the session. TF 2.x's ``compat.v1`` adds ``source_metadata`` to the first event,
which TF 1.15 does not write; it is ignored.
"""
from __future__ import annotations

import glob
import os
import tempfile
import time

import numpy as np
import pytest

from compat_harness import flowrt_module, tf_module

IMPLS = ("tf", "flowrt")
X = np.ones((4, 3), np.float32)


def _mod(impl: str):
    return tf_module() if impl == "tf" else flowrt_module()


def _model(tf):
    gs = tf.train.get_or_create_global_step()
    # the Supervisor's summary thread runs the summary op without feeds
    x = tf.placeholder_with_default(X, [None, 3], name="x")
    w = tf.Variable(np.zeros((3, 1), np.float32), name="w")
    pred = tf.matmul(x, w)
    loss = tf.reduce_mean(tf.square(pred - 1.0))
    tf.summary.scalar("loss", loss)
    with tf.name_scope("train"):
        # of a value the step computes before its update (``w`` itself may be read
        # before or after it, in TF as in flowrt)
        tf.summary.histogram("pred", pred)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    return x, train


def _monitored(impl: str, k: int, last_step: int) -> str:
    tf = _mod(impl)
    d = tempfile.mkdtemp(prefix=f"flowrt_compat_mts_{impl}_")
    with tf.Graph().as_default():
        x, train = _model(tf)
        with tf.train.MonitoredTrainingSession(
                checkpoint_dir=d, save_summaries_steps=k, log_step_count_steps=3,
                hooks=[tf.train.StopAtStepHook(last_step=last_step)]) as sess:
            while not sess.should_stop():
                sess.run(train, {x: X})
    tf.summary.FileWriterCache.clear()
    return d


def _supervised(impl: str) -> str:
    tf = _mod(impl)
    d = tempfile.mkdtemp(prefix=f"flowrt_compat_sv_{impl}_")
    with tf.Graph().as_default():
        x, train = _model(tf)
        # one round of each service, at step 0: their timers fire at once, then not
        # again within the test
        sv = tf.train.Supervisor(logdir=d, save_summaries_secs=300, save_model_secs=300)
        with sv.managed_session() as sess:
            time.sleep(0.5)
            for _ in range(5):
                sess.run(train, {x: X})
            sv.summary_computed(sess, sess.run(sv.summary_op, {x: X}))
    return d


def _read(reader: str, logdir: str) -> list:
    """(kind, detail, step, value) of every event of ``logdir``'s one event file, read by
    ``reader``'s ``summary_iterator``; the order of events written by different threads
    at once is not fixed, so the list is sorted."""
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    assert len(files) == 1, files
    out = []
    for e in _mod(reader).train.summary_iterator(files[0]):
        kind = e.WhichOneof("what")
        if kind == "summary":
            for v in e.summary.value:
                value = None
                if v.WhichOneof("value") == "simple_value" and v.tag == "loss":
                    value = round(v.simple_value, 5)
                elif v.WhichOneof("value") == "histo":
                    value = (v.histo.min, v.histo.max, v.histo.num, round(v.histo.sum, 5))
                out.append(("summary", v.tag, e.step, value))
        elif kind == "session_log":
            path = os.path.relpath(e.session_log.checkpoint_path, logdir) \
                if e.session_log.checkpoint_path else ""
            out.append(("session_log", int(e.session_log.status), e.step, path))
        else:
            out.append((kind, "", e.step, None))
    return sorted(out, key=repr)


# k = 1 and 2 only: SummarySaverHook predicts the next step from the global step fetched
# with the train op, which TF reads before or after the op's update as its threads
# happen to run (k = 3 gave steps 1, 3, 6 in one TF run); for k <= 2 both orders give
# the same steps. flowrt learns which order its graph has and keeps k's cadence.
@pytest.mark.parametrize("k,last_step", [(2, 7), (2, 8), (1, 3)])
def test_monitored_training_session_summaries(k, last_step):
    dirs = {impl: _monitored(impl, k, last_step) for impl in IMPLS}
    read = {(reader, impl): _read(reader, dirs[impl]) for reader in IMPLS for impl in IMPLS}
    ref = read[("tf", "tf")]
    assert ("summary", "loss", 1, 1.0) in ref  # the program did what it should
    for key, got in read.items():
        assert got == ref, f"{key}: {got} != {ref}"


def test_supervisor_summaries():
    dirs = {impl: _supervised(impl) for impl in IMPLS}
    read = {(reader, impl): _read(reader, dirs[impl]) for reader in IMPLS for impl in IMPLS}
    ref = read[("tf", "tf")]
    assert ("summary", "loss", 5, None) not in ref and \
        any(r[:3] == ("summary", "loss", 5) for r in ref)
    for key, got in read.items():
        assert got == ref, f"{key}: {got} != {ref}"
