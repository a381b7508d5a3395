"""Failures of a real cluster: ``flowrt server`` processes on 127.0.0.1 are killed in
the middle of a step, restarted, never started, fed garbage, shut down and terminated.
Every wait is bounded and every process is killed (by its pid) in a finalizer."""
from __future__ import annotations

import os
import signal
import socket
import struct
import time

import numpy as np
import pytest

import flowrt as tf
import flowrt.testing as ft
from flowrt import errors
from flowrt.proto import service_pb2 as pb
from flowrt.rpc import pack, unpack
from _threads import Bg

#: the health-check period the servers run with; a dead task fails the steps that use
#: it within period + the health check's own 2 s timeout (plus scheduling slack)
PERIOD = 0.5
BOUND = PERIOD + 2.0 + 1.5


@pytest.fixture
def procs():
    """Start ``flowrt server`` processes; every one is stopped (or killed) at the end."""
    started: list[ft.ServerProcess] = []

    def start(cluster, *tasks, protocol="grpc", **kw):
        kw.setdefault("health_check_period", PERIOD)
        out = [ft.ServerProcess(cluster, job, i, protocol, wait=False, **kw)
               for job, i in tasks]
        started.extend(out)
        for p in out:
            p.wait_ready(30.0)
        return out if len(out) > 1 else out[0]

    yield start
    for p in started:
        p.stop()


def _config(ms=20000, **kw):
    return tf.ConfigProto(operation_timeout_in_ms=ms, **kw)


def _ps_graph(tag):
    """A queue and a variable on the ps, read through worker 0."""
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            q = tf.FIFOQueue(4, tf.float32, shapes=[[2]], shared_name=f"q_{tag}")
            v = tf.Variable([1.0, 2.0], name=f"v_{tag}")
            item = q.dequeue()
        with tf.device("/job:worker/task:0"):
            took = item + 1.0
            read = v * 2.0
    return g, took, read, v, item


def _local_graph():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [3])
        y = tf.reduce_sum(x * x)
    return g, x, y


def _stall_then_resume(ps, sess, took, read, item):
    """SIGSTOP the ps (its sockets stay open, it just stops answering) while steps
    wait on it (one across both tasks, one wholly on the ps): the health checks fail
    them; after SIGCONT the session works."""
    blocked = [Bg(lambda: sess.run(took)), Bg(lambda: sess.run(item))]
    time.sleep(0.3)
    assert all(b.alive() for b in blocked)
    t0 = time.monotonic()
    os.kill(ps.pid, signal.SIGSTOP)
    try:
        errs = [b.error(BOUND + 3.0) for b in blocked]
        elapsed = time.monotonic() - t0
    finally:
        os.kill(ps.pid, signal.SIGCONT)
    for e in errs:
        assert isinstance(e, errors.UnavailableError), repr(e)
        assert "/job:ps/replica:0/task:0" in e.message and "unreachable" in e.message
    assert elapsed < BOUND, elapsed
    deadline = time.monotonic() + 10  # the same incarnation: its state is still there
    while True:
        try:
            np.testing.assert_allclose(sess.run(read), [2, 4])
            return
        except errors.UnavailableError:
            assert time.monotonic() < deadline, "the ps did not come back"
            time.sleep(0.2)


@pytest.mark.parametrize("protocol", ["grpc", "zmq"])
def test_ps_stalled_killed_and_restarted_mid_step(procs, protocol):
    cluster = ft.cluster_addresses(protocol, {"ps": 1, "worker": 1})
    ps, w0 = procs(cluster, ("ps", 0), ("worker", 0), protocol=protocol)
    g, took, read, v, item = _ps_graph("kill")
    old = tf.Session(w0.target, graph=g, config=_config())
    lg, lx, ly = _local_graph()
    other = tf.Session(w0.target, graph=lg, config=_config(device_filters=["/job:worker"]))
    try:
        old.run(v.initializer)
        np.testing.assert_allclose(old.run(read), [2, 4])
        if protocol == "grpc":
            _stall_then_resume(ps, old, took, read, item)
        blocked = Bg(lambda: old.run(took))  # waits on the ps's empty queue
        time.sleep(0.3)
        assert blocked.alive()
        t0 = time.monotonic()
        os.kill(ps.pid, signal.SIGKILL)
        e = blocked.error(BOUND + 2.0)
        elapsed = time.monotonic() - t0
        assert isinstance(e, errors.UnavailableError), repr(e)
        assert "/job:ps/replica:0/task:0" in e.message, e.message
        assert elapsed < BOUND, elapsed
        # a session that does not use the ps keeps working, and the old one fails fast
        assert other.run(ly, {lx: [1, 2, 3]}) == 14.0
        t0 = time.monotonic()
        with pytest.raises(errors.UnavailableError, match="/job:ps/replica:0/task:0"):
            old.run(read)
        assert time.monotonic() - t0 < BOUND
        # the ps comes back on the same port: a new session works at once ...
        ps2 = procs(cluster, ("ps", 0), protocol=protocol)
        assert ps2.pid != ps.pid
        g2, took2, read2, v2, item2 = _ps_graph("kill")
        with tf.Session(w0.target, graph=g2, config=_config()) as new:
            new.run(v2.initializer)
            np.testing.assert_allclose(new.run(read2), [2, 4])
        # ... and the old one reports the restart once, then runs again (the variable
        # was re-initialised by the new session; else it would have to re-initialise)
        with pytest.raises(errors.AbortedError, match="restarted") as ei:
            old.run(read)
        assert "/job:ps/replica:0/task:0" in ei.value.message
        np.testing.assert_allclose(old.run(read), [2, 4])
        old.run(v.assign([5.0, 6.0]))
        np.testing.assert_allclose(old.run(read), [10, 12])
        assert other.run(ly, {lx: [0, 0, 2]}) == 4.0
    finally:
        old.close()
        other.close()


def test_unreachable_task_at_session_creation_then_sigterm(procs):
    cluster = ft.cluster_addresses("grpc", {"ps": 1, "worker": 1})
    w0 = procs(cluster, ("worker", 0), protocol="grpc", use_env=True)  # FLOWRT_CONFIG
    assert "/job:worker/task:0 serving grpc://" in w0.serving_line()
    g, took, read, v, item = _ps_graph("unreachable")
    t0 = time.monotonic()
    with pytest.raises(errors.UnavailableError) as ei:
        tf.Session(w0.target, graph=g, config=_config(ms=1500))
    elapsed = time.monotonic() - t0
    assert "/job:ps/replica:0/task:0" in ei.value.message
    assert cluster["ps"][0] in ei.value.message
    assert 1.4 <= elapsed < 6.0, elapsed
    # restricted to the task that is up, a session works
    lg, lx, ly = _local_graph()
    with tf.Session(w0.target, graph=lg,
                    config=_config(ms=1500, device_filters=["/job:worker/task:0"])) as s:
        assert s.run(ly, {lx: [1, 1, 1]}) == 3.0
    # SIGTERM stops the server cleanly
    assert w0.terminate(15.0) == 0, w0.output
    assert "stopped (SIGTERM)" in w0.output


# -- garbage on the server ports --------------------------------------------------------
LIMIT = 1 << 20


def _session_works(p):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.string, [None])
        y = tf.identity(x)
        n = tf.placeholder(tf.float32, [1000])
        total = tf.reduce_sum(n)
    with tf.Session(p.target, graph=g, config=_config(ms=10000)) as s:
        assert s.run(total, {n: np.ones(1000, np.float32)}) == 1000.0
        assert list(s.run(y, {x: ["ab", "c"]})) == [b"ab", b"c"]


def _raw(address, payload, *, hold=0.2):
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        try:
            s.sendall(payload)
            s.settimeout(hold)
            s.recv(1024)
        except OSError:
            pass


def _call(p, method, header, buffers=(), timeout=10.0):
    from flowrt.runtime import default_runtime

    ch = default_runtime().transport(p.protocol).connect(p.address)
    try:
        return ch.call(method, header, list(buffers), timeout)
    finally:
        ch.close()


def _envelope(body=b"", tensors=()):
    env = pb.Envelope(body=body)
    for t in tensors:
        env.tensors.add().CopyFrom(t)
    return env.SerializeToString()


def _run_graph(**kw):
    return pb.RunGraphRequest(graph_handle="nope", **kw).SerializeToString()


#: (method, header, buffers, error class, text of the message)
MALFORMED = [
    ("Worker/RunGraph", b"\xff\xfe not a protobuf", [], errors.InvalidArgumentError,
     "malformed message header"),
    ("Master/CreateSession", _envelope(b"\x0a\xff\xff\xff\x0f"), [],
     errors.InvalidArgumentError, "malformed CreateSessionRequest"),
    ("Worker/RegisterGraph", _envelope(b"\x12\x05\x0a\x03abc"), [],
     errors.NotFoundError, "device abc is not on worker"),
    ("Worker/RunGraph", _envelope(_run_graph(arg_index=[0]),
                                  [pb.TensorMeta(dtype=1, shape=[4], buffer=3)]), [b"x"],
     errors.InvalidArgumentError, "buffer 3"),
    ("Worker/RunGraph", _envelope(_run_graph(arg_index=[0]),
                                  [pb.TensorMeta(dtype=1, shape=[4], buffer=0)]), [b"abc"],
     errors.InvalidArgumentError, "needs 16 bytes"),
    ("Worker/RunGraph", _envelope(_run_graph(arg_index=[0]),
                                  [pb.TensorMeta(dtype=999, shape=[1], buffer=0)]), [b"a"],
     errors.InvalidArgumentError, "bad tensor dtype"),
    ("Worker/RunGraph", _envelope(_run_graph(arg_index=[0, 1]),
                                  [pb.TensorMeta(dtype=1, shape=[1], buffer=0)]), [b"abcd"],
     errors.InvalidArgumentError, "do not match the tensors"),
    ("Worker/RecvTensor", _envelope(b"", [pb.TensorMeta(dtype=1, shape=[-2], buffer=0)]),
     [b""], errors.InvalidArgumentError, "negative shape"),
    ("Worker/RunGraph", _envelope(_run_graph()), [], errors.AbortedError, "not registered"),
    ("Master/RunCallable", _envelope(pb.RunCallableRequest(session_handle="x")
                                     .SerializeToString()), [], errors.AbortedError,
     "Session x is not found"),
    ("Worker/Nothing", _envelope(), [], errors.UnimplementedError, "unknown method"),
]


def _lying_frames(p):
    """Frames whose prefix or envelope claims more than they hold, or more than the
    limit."""
    if p.protocol == "grpc":
        import grpc

        ch = grpc.insecure_channel(p.address)
        try:
            call = ch.unary_unary("/flowrt.Worker/GetStatus")
            bogus = [struct.pack("<BBBxIQ", 0xF7, 1, 0, 0, 1 << 40),  # a 1 TiB header
                     struct.pack("<BBBxIQ", 0xF7, 1, 0, 2 ** 31, 0),  # 2^31 buffers
                     struct.pack("<BBBxIQ", 0xF7, 1, 0, 0, 100) + b"cut short",
                     b"\x00" * 7]
            for b in bogus:
                with pytest.raises(grpc.RpcError) as ei:
                    call(b, timeout=10)
                assert ei.value.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED,
                                           grpc.StatusCode.INTERNAL)
        finally:
            ch.close()
        return
    import zmq

    d = zmq.Context.instance().socket(zmq.DEALER)
    d.linger = 0
    d.rcvtimeo = 5000
    d.connect(f"tcp://{p.address}")
    try:
        env = struct.pack("<2sBBQIHH", b"FZ", 1, 1, 7, 5, 16, 0) + b"Worker/GetStatus"
        d.send_multipart([env, b"h"])  # says 5 buffers, has none
        reply = d.recv_multipart()
        assert struct.unpack_from("<2sBB", reply[0])[2] == 3  # an error reply
        d.send_multipart([env[:9]])  # a truncated envelope
        reply = d.recv_multipart()
        assert struct.unpack_from("<2sBB", reply[0])[2] == 3
        d.send_multipart([env, b"h", b"\0" * (LIMIT + 10)])  # a frame over the limit
        time.sleep(0.2)
    finally:
        d.close()


@pytest.mark.parametrize("protocol", ["grpc", "zmq"])
def test_garbage_on_the_port_is_answered_or_dropped(procs, protocol):
    """Raw garbage, truncated streams, frames that lie about their size, well-framed
    requests with malformed bodies and an oversized message: each gets an error reply
    or is dropped, and the server keeps serving sessions."""
    cluster = ft.cluster_addresses(protocol, {"local": 1})
    p = procs(cluster, ("local", 0), protocol=protocol,
              extra_args=["--max-message-bytes", str(LIMIT)])
    rng = np.random.default_rng(5)
    for junk in [b"\x00" * 64, rng.bytes(5000), b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                 b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + rng.bytes(300),  # HTTP/2, junk
                 b"\xff" + b"\x00" * 8 + b"\x7f\x03\x00NULL" + b"\x00" * 10,  # ZMTP, cut
                 b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", b""]:
        _raw(p.address, junk)
    _session_works(p)
    _lying_frames(p)
    _session_works(p)
    for method, header, buffers, cls, needle in MALFORMED:
        rh, rb = _call(p, method, header, buffers)
        with pytest.raises(cls, match=needle):
            unpack(rh, rb, pb.Empty)
    _session_works(p)
    header, buffers = pack(pb.Empty(), [np.zeros(LIMIT // 4 + 16, np.float32)])
    with pytest.raises((errors.ResourceExhaustedError, errors.InternalError,
                        errors.UnavailableError)):
        rh, rb = _call(p, "Worker/RunGraph", header, buffers)
        unpack(rh, rb, pb.RunGraphResponse)
    _session_works(p)
    assert p.proc.poll() is None


# -- shutting down ----------------------------------------------------------------------
def test_shutdown_cluster_makes_every_server_exit_0(procs):
    cluster = ft.cluster_addresses("zmq", {"ps": 1, "worker": 1})
    servers = procs(cluster, ("ps", 0), ("worker", 0), protocol="zmq")
    g, took, read, v, item = _ps_graph("shutdown")
    with tf.Session(servers[1].target, graph=g, config=_config()) as s:
        s.run(v.initializer)
        np.testing.assert_allclose(s.run(read), [2, 4])
    tf.train.shutdown_cluster(servers[1].target, reason="training finished")
    for p in servers:
        assert p.wait(15.0) == 0, p.output
        assert "stopped (training finished)" in p.output, p.output


def test_bad_cluster_file_is_reported_with_exit_status_2(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "c.json"
    bad.write_text("{not json")
    r = subprocess.run([sys.executable, "-m", "flowrt.cli", "server", "--cluster", str(bad),
                        "--job", "w", "--task", "0"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "not valid JSON" in r.stderr


# -- sessions left behind by clients that died --------------------------------------
_DYING_CLIENT = r"""
import os, sys, numpy as np, flowrt as tf
g = tf.Graph()
with g.as_default(), tf.device("/job:ps/task:0"):
    v = tf.Variable(np.float32(2.0), name="v")
    y = v * 3.0
s = tf.Session(sys.argv[1], graph=g)
s.run(v.initializer)
assert s.run(y) == 6.0
print("ran", flush=True)
os._exit(0)  # dies without closing its session
"""


@pytest.mark.parametrize("protocol", ["zmq", "grpc"])
def test_sessions_of_a_client_that_died_are_collected(protocol):
    import subprocess
    import sys

    from flowrt.server import Server

    cluster = ft.cluster_addresses(protocol, {"ps": 1})
    srv = Server(cluster, "ps", 0, protocol=protocol, session_gc_seconds=0.4)
    try:
        r = subprocess.run([sys.executable, "-c", _DYING_CLIENT, srv.target],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stdout.strip() == "ran", r.stderr[-2000:]
        assert len(srv.master._sessions) == 1 and srv.worker._graphs
        deadline = time.monotonic() + 5.0
        while srv.master._sessions and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not srv.master._sessions and srv.master.collected_sessions == 1
        assert not srv.worker._graphs  # its registered graphs went with it
        # the variable lives on in the ps's resource manager, shared by name
        g = tf.Graph()
        with g.as_default(), tf.device("/job:ps/task:0"):
            v = tf.Variable(np.float32(0.0), name="v")
        with tf.Session(srv.target, graph=g) as sess:
            assert sess.run(v) == 2.0
    finally:
        srv.stop()


def test_a_session_in_use_stays_and_an_idle_one_is_aborted():
    from flowrt.server import Server

    cluster = ft.cluster_addresses("zmq", {"ps": 1})
    srv = Server(cluster, "ps", 0, protocol="zmq", session_gc_seconds=0.5)
    try:
        g = tf.Graph()
        with g.as_default():
            y = tf.constant(1.0) + 1.0
        sess = tf.Session(srv.target, graph=g)
        end = time.monotonic() + 1.5  # three times the limit, used all along
        while time.monotonic() < end:
            assert sess.run(y) == 2.0
            time.sleep(0.1)
        time.sleep(1.5)  # now idle for longer than the limit
        with pytest.raises(errors.AbortedError, match=r"is not found: it was closed "
                           r"\(or collected after 0.5 s unused\)"):
            sess.run(y)
        sess.close()
    finally:
        srv.stop()


def test_a_running_step_keeps_its_session():
    from flowrt.master import Master
    from flowrt.runtime import default_runtime
    from flowrt.worker import Worker

    rt = default_runtime()
    m = Master(rt, Worker(rt, "localhost", 0), session_gc_seconds=10.0)
    try:
        h = m.create_session(tf.Graph())
        s = m.session(h)
        s.running, s.last_used = 1, 0.0
        assert m.collect_idle_sessions(now=100.0) == [] and h in m._sessions
        s.running = 0
        assert m.collect_idle_sessions(now=5.0) == []  # used 5 s ago: not yet
        assert m.collect_idle_sessions(now=100.0) == [h] and s.closed
        with pytest.raises(errors.AbortedError, match="is not found"):
            m.session(h)
        with pytest.raises(ValueError, match="session_gc_seconds must be >= 0"):
            Master(rt, Worker(rt, "localhost", 0), session_gc_seconds=-1)
    finally:
        m.stop()
