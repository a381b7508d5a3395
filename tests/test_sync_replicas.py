"""SyncReplicasOptimizer on an in-process cluster (ps + workers as threads)."""
from __future__ import annotations

import itertools
import threading
import time

import numpy as np
import pytest

import flowrt as tf
from flowrt.server import Server

_ids = itertools.count()
LR = 0.1


@pytest.fixture()
def cluster():
    """A fresh in-process cluster: one ps and three workers."""
    k = next(_ids)
    spec = tf.train.ClusterSpec({"ps": [f"sr{k}-ps"],
                                 "worker": [f"sr{k}-w{i}" for i in range(3)]})
    servers = [Server(spec, "ps", 0, protocol="inproc")] + \
        [Server(spec, "worker", i, protocol="inproc") for i in range(3)]
    yield spec, servers
    for s in servers:
        s.stop()


def build(spec, task, agg, total):
    """Worker ``task``'s graph: loss = mean((x w - 1)^2) with x = task+1."""
    g = tf.Graph()
    with g.as_default():
        with tf.device(tf.train.replica_device_setter(
                cluster=spec, worker_device=f"/job:worker/task:{task}")):
            gs = tf.train.get_or_create_global_step()
            x = tf.constant(np.full((2, 2), task + 1.0, np.float32))
            w = tf.Variable(np.zeros((2, 1), np.float32), name="w")
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
            opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(LR),
                                                 replicas_to_aggregate=agg,
                                                 total_num_replicas=total)
            train = opt.minimize(loss, global_step=gs)
    return g, gs, w, train, opt


def grad_at_zero(task):
    # d/dw mean((x w - 1)^2) at w = 0 with x = c*ones(2,2): each entry -2*c
    c = task + 1.0
    return np.full((2, 1), -2.0 * c, np.float32)


def run_worker(spec, servers, task, agg, total, last_step, out, delay=0.0,
               max_steps=None, num_tokens=-1):
    g, gs, w, train, opt = build(spec, task, agg, total)
    steps = 0
    with g.as_default():
        hooks = [opt.make_session_run_hook(task == 0, num_tokens),
                 tf.train.StopAtStepHook(last_step=last_step)]
        with tf.train.MonitoredTrainingSession(master=servers[1 + task].target,
                                               is_chief=task == 0, hooks=hooks,
                                               max_wait_secs=20) as sess:
            while not sess.should_stop():
                if max_steps is not None and steps >= max_steps:
                    break
                sess.run(train)
                steps += 1
                time.sleep(delay)
    out[task] = steps


def start(fn, *args):
    t = threading.Thread(target=fn, args=args, daemon=True)
    t.start()
    return t


def test_one_step_applies_the_mean_of_the_replicas_gradients(cluster):
    """With no initial tokens each worker's first gradient is its own: the first update
    is their mean. (With the default tokens a fast worker may supply both.)"""
    spec, servers = cluster
    out = {}
    ts = [start(run_worker, spec, servers, i, 2, 2, 1, out, 0.0, None, 0)
          for i in range(2)]
    for t in ts:
        t.join(30)
    assert not any(t.is_alive() for t in ts), "a worker hung"
    g, gs, w, train, opt = build(spec, 0, 2, 2)
    with tf.Session(servers[1].target, graph=g) as sess:
        assert int(sess.run(gs)) == 1
        want = -LR * (grad_at_zero(0) + grad_at_zero(1)) / 2
        np.testing.assert_allclose(sess.run(w), want, rtol=1e-6)


def test_training_reaches_the_last_step_without_hanging(cluster):
    spec, servers = cluster
    out = {}
    t0 = time.monotonic()
    ts = [start(run_worker, spec, servers, i, 2, 2, 15, out) for i in range(2)]
    for t in ts:
        t.join(60)
    assert not any(t.is_alive() for t in ts), "a worker hung"
    assert time.monotonic() - t0 < 60
    assert set(out) == {0, 1} and all(n >= 1 for n in out.values())
    g, gs, *_ = build(spec, 0, 2, 2)
    with tf.Session(servers[1].target, graph=g) as sess:
        assert int(sess.run(gs)) == 15


def test_stale_gradients_are_dropped(cluster):
    spec, servers = cluster
    g, gs, w, train, opt = build(spec, 0, 1, 1)
    with g.as_default(), tf.device("/job:ps/task:0"):
        acc = tf.ConditionalAccumulator(tf.float32, shape=[2, 1],
                                        shared_name="w:0/grad_accum")
        stale = acc.apply_grad(np.ones((2, 1), np.float32), local_step=0)
        count = acc.num_accumulated()
    out = {}
    t = start(run_worker, spec, servers, 0, 1, 1, 3, out)
    t.join(30)
    assert not t.is_alive() and out[0] >= 3
    with tf.Session(servers[1].target, graph=g) as sess:
        assert int(sess.run(gs)) == 3
        sess.run(stale)  # computed from step 0, the accumulator is at step 3
        assert int(sess.run(count)) == 0


def test_backup_worker_lets_the_fast_replicas_make_the_step(cluster):
    """3 workers, 2 gradients per step: a worker that never shows up does not block."""
    spec, servers = cluster
    out = {}
    ts = [start(run_worker, spec, servers, i, 2, 3, 6, out) for i in range(2)]
    for t in ts:
        t.join(60)
    assert not any(t.is_alive() for t in ts), "a worker hung"
    assert set(out) == {0, 1}


def test_a_slow_worker_does_not_stall_training(cluster):
    spec, servers = cluster
    out = {}
    t0 = time.monotonic()
    ts = [start(run_worker, spec, servers, 0, 2, 2, 8, out),
          start(run_worker, spec, servers, 1, 2, 2, 8, out, 0.3)]
    for t in ts:
        t.join(60)
    assert not any(t.is_alive() for t in ts), "a worker hung"
    # the fast chief fills in with the tokens the slow worker has not taken: it does
    # not wait 0.3 s per step
    assert out[0] > out[1]
    assert time.monotonic() - t0 < 30


def test_a_worker_that_stops_early_does_not_stall_the_others(cluster):
    spec, servers = cluster
    out = {}
    ts = [start(run_worker, spec, servers, 0, 2, 2, 10, out),
          start(run_worker, spec, servers, 1, 2, 2, 10, out, 0.0, 2)]
    for t in ts:
        t.join(60)
    assert not any(t.is_alive() for t in ts), "a worker hung"
    assert 1 <= out[1] <= 2
    g, gs, *_ = build(spec, 0, 2, 2)
    with tf.Session(servers[1].target, graph=g) as sess:
        assert int(sess.run(gs)) == 10  # the chief carried on alone


def test_workers_waiting_for_a_token_stop_when_the_chief_finishes(cluster):
    """The chief's hook closes the token queue at its end: a worker blocked on a token
    gets OutOfRangeError, which ends its monitored session quietly (TF's hangs)."""
    spec, servers = cluster
    out = {}
    chief = start(run_worker, spec, servers, 0, 2, 2, 4, out)
    # the non-chief wants to train far past the chief's last step
    worker = start(run_worker, spec, servers, 1, 2, 2, 1000, out)
    chief.join(60)
    worker.join(30)
    assert not chief.is_alive() and not worker.is_alive(), "a worker hung"
    assert out[0] >= 1 and 1 in out


def test_api_errors():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(1.0)
        loss = v * v
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 2)
        with pytest.raises(ValueError, match="Global step is required"):
            opt.apply_gradients(opt.compute_gradients(loss))
        with pytest.raises(ValueError, match="should be called after apply_gradients"):
            opt.get_init_tokens_op()
        hook = opt.make_session_run_hook(True)
        with pytest.raises(ValueError, match="apply_gradient should be called"):
            hook.begin()
        gs = tf.train.get_or_create_global_step()
        opt2 = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 3,
                                              total_num_replicas=1)
        opt2.minimize(loss, global_step=gs)
        with pytest.raises(ValueError, match="Too few tokens"):
            opt2.get_init_tokens_op(1)
        assert opt2.get_slot_names() == []


def test_unsupported_gradient_types_are_refused():
    g = tf.Graph()
    with g.as_default():
        gs = tf.train.get_or_create_global_step()
        v = tf.Variable(1.0)
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 1)
        with pytest.raises(TypeError, match="Unsupported gradient type"):
            opt.apply_gradients([(np.float32(1.0), v)], global_step=gs)
