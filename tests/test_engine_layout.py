"""The executor's split into modules: the names other code imports from
``flowrt.executor`` still resolve there, to the same objects as in the modules that
hold them, and the executor's probe points (``_run_frames``, ``_run_on_pool``,
``_run_on_pool_framed``) are looked up in ``flowrt.executor`` at each step."""
from __future__ import annotations

import flowrt as tf
from flowrt import executor
from flowrt.engine import dataflow, frames, plan, straight_line


def test_old_names_are_the_objects_of_the_new_modules():
    assert executor is __import__("flowrt.engine.executor", fromlist=["x"])
    for mod, names in [(plan, ["StepContext", "SessionState", "NodeStat", "DEAD",
                               "op_error_for", "_CNode", "_Dead"]),
                       (dataflow, ["inter_op_pool", "_init_worker_thread", "_run_on_pool"]),
                       (frames, ["_FramePlan", "_run_on_pool_framed"]),
                       (straight_line, ["RECV_WAIT_S", "_take_now"])]:
        for name in names:
            assert getattr(executor, name) is getattr(mod, name), name


def test_dead_fields_are_gone():
    slots = set(plan._CNode.__slots__)
    assert not slots & {"f_in", "f_out", "f_kill", "f_ctrl_kill", "f_all_kill", "f_exit",
                        "f_succ", "lidx", "fkind"}
    assert "cancelled" not in plan.StepContext.__slots__
    assert "frame_iter" not in frames._FrameStepView.__slots__


def test_the_frame_scheduler_is_found_through_the_executor_module(monkeypatch):
    runs = []
    real = executor._run_frames

    def watch(ex, *a, **k):
        runs.append(ex)
        return real(ex, *a, **k)

    monkeypatch.setattr(executor, "_run_frames", watch)
    g = tf.Graph()
    with g.as_default():
        r = tf.while_loop(lambda i: i < 5, lambda i: i + 1, [tf.constant(0)])
        with tf.Session() as s:
            assert s.run(r) == 5
    assert runs and all(ex.frames is not None for ex in runs)
