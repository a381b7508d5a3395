"""while_loop across tasks: loops whose bodies span /job:worker and /job:ps run the same
over inproc, grpc and zmq (each task's partition gets its own copy of the loop's control
state; every iteration's transfers pair up through frame-keyed rendezvous keys), nested
loops, a body that reads and assigns a ps variable, gradients of a loop spanning tasks,
and a cluster of ``flowrt server`` processes."""
from __future__ import annotations

import numpy as np
import pytest

import flowrt as tf
import flowrt.testing as ft
from flowrt.server import Server

PROTOCOLS = ["inproc", "grpc", "zmq"]
PS, WORKER = "/job:ps/task:0", "/job:worker/task:0"
CONFIG = dict(operation_timeout_in_ms=20000)


@pytest.fixture(scope="module", params=PROTOCOLS)
def cluster(request):
    """One ps + one worker cluster per protocol, all tasks as Servers in this process
    (real sockets on 127.0.0.1 for grpc and zmq)."""
    protocol = request.param
    spec = ft.cluster_addresses(protocol, {"ps": 1, "worker": 1})
    servers = [Server(spec, job, i, protocol=protocol)
               for job, addrs in spec.items() for i in range(len(addrs))]
    try:
        yield servers[1].target  # the worker (jobs in order: ps, worker)
    finally:
        for s in servers:
            s.stop()


def _run(target, g, fetches, feed=None, init=True):
    with tf.Session(target, graph=g, config=tf.ConfigProto(**CONFIG)) as s:
        if init:
            s.run(tf.variables_initializer(g.get_collection("variables")))
        return s.run(fetches, feed)


def _ping_pong_loop(n):
    """x -> (x * a + 1) on the worker, then - 0.5 on the ps, ``n`` times."""
    a = tf.placeholder(tf.float32, [3], name="a")

    def body(i, x):
        with tf.device(WORKER):
            y = x * a + 1.0
        with tf.device(PS):
            z = y - 0.5
        return i + 1, z

    with tf.device(WORKER):
        i, x = tf.while_loop(lambda i, x: i < n, body, [0, tf.zeros([3])])
    return a, i, x


def test_body_spanning_two_tasks_matches_numpy(cluster):
    g = tf.Graph()
    with g.as_default():
        n = tf.placeholder(tf.int32, [], name="n")
        a, i, x = _ping_pong_loop(n)
    av = np.array([0.5, 1.0, 2.0], np.float32)
    with tf.Session(cluster, graph=g, config=tf.ConfigProto(**CONFIG)) as s:
        for steps in (0, 1, 7):
            want = np.zeros(3, np.float32)
            for _ in range(steps):
                want = want * av + np.float32(1.0) - np.float32(0.5)
            got_i, got_x = s.run([i, x], {a: av, n: steps})
            assert got_i == steps
            np.testing.assert_allclose(got_x, want, rtol=1e-6)


def test_predicate_on_the_other_task(cluster):
    g = tf.Graph()
    with g.as_default():
        limit = tf.placeholder(tf.float32, [])

        def cond(i, x):
            with tf.device(PS):
                return x < limit

        def body(i, x):
            with tf.device(WORKER):
                return i + 1, x * 3.0

        with tf.device(WORKER):
            i, x = tf.while_loop(cond, body, [0, tf.constant(1.0)])
    got_i, got_x = _run(cluster, g, [i, x], {limit: 100.0}, init=False)
    assert (got_i, got_x) == (5, 243.0)


def test_nested_loop_across_tasks(cluster):
    g = tf.Graph()
    with g.as_default():
        def inner(j, acc):
            with tf.device(PS):
                acc = acc + tf.cast(j, tf.float64)
            with tf.device(WORKER):
                return j + 1, acc * 1.5

        def outer(i, acc):
            with tf.device(WORKER):
                _, acc = tf.while_loop(lambda j, a: j < i, inner, [0, acc])
            with tf.device(PS):
                return i + 1, acc + 1.0

        with tf.device(WORKER):
            _, r = tf.while_loop(lambda i, a: i < 4, outer,
                                 [0, tf.constant(0.5, tf.float64)])
    want = 0.5
    for i in range(4):
        for j in range(i):
            want = (want + j) * 1.5
        want += 1.0
    assert _run(cluster, g, r, init=False) == pytest.approx(want, rel=1e-12)


def test_body_reads_and_assigns_a_ps_variable(cluster):
    g = tf.Graph()
    with g.as_default():
        with tf.device(PS):
            v = tf.Variable(np.array([1.0, 2.0]), name="v")

        def body(i, total):
            with tf.device(WORKER):
                delta = tf.cast(i, tf.float64) + 1.0
            with tf.device(PS):
                upd = tf.assign_add(v, tf.fill([2], delta))
            with tf.device(WORKER):
                return i + 1, total + tf.reduce_sum(upd)

        with tf.device(WORKER):
            _, total = tf.while_loop(lambda i, t: i < 4, body,
                                     [0, tf.constant(0.0, tf.float64)],
                                     parallel_iterations=1)
    with tf.Session(cluster, graph=g, config=tf.ConfigProto(**CONFIG)) as s:
        s.run(v.initializer)
        got = s.run(total)
        final = s.run(v)
    vv, want = np.array([1.0, 2.0]), 0.0
    for i in range(4):
        vv = vv + (i + 1)
        want += vv.sum()
    assert got == pytest.approx(want)
    np.testing.assert_allclose(final, vv)


def test_gradient_of_a_loop_spanning_tasks(cluster):
    g = tf.Graph()
    with g.as_default():
        with tf.device(PS):
            w = tf.Variable(np.array([0.9, 1.1, -0.7]), name="w")
        x0 = tf.placeholder(tf.float64, [3])

        def body(i, x):
            with tf.device(WORKER):
                y = tf.tanh(x * w)
            with tf.device(PS):
                return i + 1, y + x * 0.5

        with tf.device(WORKER):
            _, x = tf.while_loop(lambda i, x: i < 3, body, [0, x0])
            loss = tf.reduce_sum(x * x)
        dw, dx0 = tf.gradients(loss, [w, x0])
    xv = np.array([0.3, -0.2, 0.8])
    got_loss, got_dw, got_dx0 = _run(cluster, g, [loss, dw, dx0], {x0: xv})

    def f(wv, xv):
        for _ in range(3):
            xv = np.tanh(xv * wv) + xv * 0.5
        return float(np.sum(xv * xv))

    wv, eps = np.array([0.9, 1.1, -0.7]), 1e-6
    num_dw = [(f(wv + eps * e, xv) - f(wv - eps * e, xv)) / (2 * eps) for e in np.eye(3)]
    num_dx = [(f(wv, xv + eps * e) - f(wv, xv - eps * e)) / (2 * eps) for e in np.eye(3)]
    assert got_loss == pytest.approx(f(wv, xv), rel=1e-12)
    np.testing.assert_allclose(got_dw, num_dw, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(got_dx0, num_dx, rtol=1e-6, atol=1e-9)


def test_loop_on_a_cluster_of_server_processes():
    protocol = "grpc"
    spec = ft.cluster_addresses(protocol, {"ps": 1, "worker": 1})
    procs = ft.start_server_processes(spec, protocol)
    try:
        g = tf.Graph()
        with g.as_default():
            n = tf.placeholder(tf.int32, [])
            a, i, x = _ping_pong_loop(n)
        av = np.array([1.5, -1.0, 0.25], np.float32)
        target = f"{protocol}://{spec['worker'][0]}"
        got_i, got_x = _run(target, g, [i, x], {a: av, n: 6}, init=False)
        want = np.zeros(3, np.float32)
        for _ in range(6):
            want = want * av + np.float32(1.0) - np.float32(0.5)
        assert got_i == 6
        np.testing.assert_allclose(got_x, want, rtol=1e-6)
    finally:
        for p in procs:
            p.stop()
