"""``tf.train.ExponentialMovingAverage`` (shadow slots, collections, decay with
num_updates, zero debiasing, restoring averages with a Saver), ``ProfilerHook`` and
``basic_train_loop``."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import flowrt as tf
from flowrt import errors
from flowrt.modeling.moving_averages import assign_moving_average
from flowrt.training.monitored_session import (SessionRunArgs, SessionRunContext,
                                               SessionRunValues)


def test_shadow_variables_names_collections_and_values():
    with tf.Graph().as_default():
        w = tf.Variable([1.0, 2.0], name="w")
        ema = tf.train.ExponentialMovingAverage(0.9)
        assert ema.average_name(w) == "w/ExponentialMovingAverage"
        upd = ema.apply([w])
        avg = ema.average(w)
        assert avg.op.name == "w/ExponentialMovingAverage"
        assert [v.op.name for v in tf.moving_average_variables()] == ["w"]
        assert avg not in tf.trainable_variables() and avg in tf.global_variables()
        assert avg.op.colocation_groups() == w.op.colocation_groups()
        with tf.control_dependencies([upd]):
            step = w.assign_add([1.0, 1.0])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            np.testing.assert_allclose(s.run(avg), [1.0, 2.0])  # starts at the variable
            ref, cur = np.array([1.0, 2.0]), np.array([1.0, 2.0])
            for _ in range(3):
                s.run(step)
                ref = ref - (1 - 0.9) * (ref - cur)
                cur = cur + 1
            np.testing.assert_allclose(s.run(avg), ref, rtol=1e-6)


def test_num_updates_caps_the_decay():
    with tf.Graph().as_default():
        w = tf.Variable(0.0)
        ema = tf.train.ExponentialMovingAverage(0.999, num_updates=tf.constant(0))
        upd = ema.apply([w])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(w.assign(10.0))
            s.run(upd)  # decay = min(0.999, 1/10) = 0.1
            np.testing.assert_allclose(s.run(ema.average(w)), 9.0, rtol=1e-6)


def test_zero_debias_of_a_tensor():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [2])
        t = x * 1.0
        ema = tf.train.ExponentialMovingAverage(0.5, zero_debias=True)
        upd = ema.apply([t])
        names = sorted(v.op.name for v in tf.global_variables())
        assert names == ["mul/ExponentialMovingAverage",
                         "mul/ExponentialMovingAverage/biased",
                         "mul/ExponentialMovingAverage/local_step"]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(upd, {x: [2.0, 4.0]})
            np.testing.assert_allclose(s.run(ema.average(t)), [2.0, 4.0], rtol=1e-6)
            s.run(upd, {x: [4.0, 0.0]})
            # biased = 0.25*[2,4] + ... : (0.5*1 + 0.5*... ) / (1 - 0.25)
            np.testing.assert_allclose(s.run(ema.average(t)), [(0.5 * 1 + 2.0) / 0.75,
                                                               (0.5 * 2 + 0.0) / 0.75],
                                       rtol=1e-6)


def test_assign_moving_average_without_debias():
    with tf.Graph().as_default():
        v = tf.Variable([1.0, 1.0])
        op = assign_moving_average(v, tf.constant([3.0, -1.0]), 0.75, zero_debias=False)
        assert op.op.name == "AssignMovingAvg"
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            np.testing.assert_allclose(s.run(op), [1.5, 0.5])


def test_bad_dtype_raises():
    with tf.Graph().as_default():
        v = tf.Variable(1, name="i")
        with pytest.raises(TypeError, match="half, float, or double: i:0"):
            tf.train.ExponentialMovingAverage(0.9).apply([v])


def test_variables_to_restore_with_saver(tmp_path):
    path = str(tmp_path / "model")
    with tf.Graph().as_default():
        w = tf.Variable([1.0, 2.0], name="w")
        other = tf.Variable(5.0, name="other", trainable=False)
        ema = tf.train.ExponentialMovingAverage(0.5)
        upd = ema.apply([w])
        with tf.control_dependencies([upd]):
            step = w.assign_add([2.0, 2.0])
        saver = tf.train.Saver()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(step)
            s.run(step)
            avg = s.run(ema.average(w))
            saver.save(s, path)
    with tf.Graph().as_default():
        w = tf.Variable([0.0, 0.0], name="w")
        other = tf.Variable(0.0, name="other", trainable=False)
        ema = tf.train.ExponentialMovingAverage(0.5)
        mapping = ema.variables_to_restore()
        assert mapping == {"w/ExponentialMovingAverage": w, "other": other}
        with tf.Session() as s:
            tf.train.Saver(mapping).restore(s, path)
            np.testing.assert_allclose(s.run(w), avg)
            assert s.run(other) == 5.0


def test_profiler_hook_writes_timelines(tmp_path):
    with tf.Graph().as_default():
        gs = tf.train.get_or_create_global_step()
        x = tf.Variable(1.0)
        train = tf.group(x.assign_add(1.0), tf.assign_add(gs, 1))
        hook = tf.train.ProfilerHook(save_steps=2, output_dir=str(tmp_path))
        hook.begin()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for _ in range(5):
                ctx = SessionRunContext(SessionRunArgs(train), s)
                req = hook.before_run(ctx)
                md = tf.RunMetadata()
                res = s.run({"h": req.fetches, "t": train}, options=req.options,
                            run_metadata=md)
                hook.after_run(ctx, SessionRunValues(res["h"], req.options, md))
    names = sorted(n for n in os.listdir(tmp_path) if n.startswith("timeline"))
    assert names == ["timeline-2.json", "timeline-4.json"]
    trace = json.loads((tmp_path / names[0]).read_text())
    assert any(e.get("ph") == "X" for e in trace["traceEvents"])
    with pytest.raises(ValueError):
        tf.train.ProfilerHook()
    with tf.Graph().as_default(), pytest.raises(RuntimeError, match="Global step"):
        tf.train.ProfilerHook(save_steps=1).begin()


class _FakeSupervisor:
    def __init__(self, aborts):
        self.aborts, self.steps, self.sessions = aborts, 0, 0

    def managed_session(self, master):
        sup = self

        class _Ctx:
            def __enter__(self):
                sup.sessions += 1
                return "sess"

            def __exit__(self, *exc):
                return False
        return _Ctx()

    def should_stop(self):
        return self.steps >= 4


def test_basic_train_loop_retries_after_aborted():
    sup = _FakeSupervisor(aborts=1)
    seen = []

    def step(sess, a, k=None):
        seen.append((sess, a, k))
        sup.steps += 1
        if sup.aborts and sup.steps == 2:
            sup.aborts -= 1
            raise errors.AbortedError(None, None, "restarted")

    tf.train.basic_train_loop(sup, step, args=[1], kwargs={"k": 2})
    assert sup.sessions == 2 and sup.steps == 4 and seen[0] == ("sess", 1, 2)
