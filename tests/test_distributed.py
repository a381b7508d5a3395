"""The distributed runtime over every transport: the conformance suite of
``flowrt.testing`` against a ps + 2 worker cluster per protocol (in-process servers for
inproc, ``flowrt server`` processes for grpc and zmq), plus the Server API and the
master's compile-once, one-RunGraph-per-task step pipeline."""
from __future__ import annotations

import numpy as np
import pytest

import flowrt as tf
import flowrt.testing as ft
from flowrt.server import Server
from flowrt.worker import Worker

PROTOCOLS = ["inproc", "grpc", "zmq"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_conformance(protocol):
    """Every check against one ps + 2 worker cluster: in-process servers for inproc,
    ``flowrt server`` processes for grpc and zmq. One test per protocol, so that each
    cluster starts once whichever pytest-xdist worker runs it; a failure names the
    check."""
    cluster = ft.cluster_addresses(protocol)
    if protocol == "inproc":
        servers = [Server(cluster, job, i, protocol="inproc")
                   for job, addrs in cluster.items() for i in range(len(addrs))]
        stops = [s.stop for s in servers]
    else:
        stops = [p.stop for p in ft.start_server_processes(cluster, protocol)]
    try:
        conf = ft.ClusterConformance(protocol, cluster, op_timeout_ms=30000)
        report = conf.run_all()
        assert len(report.checked) == len(ft.ClusterConformance.CHECKS)
        if protocol == "inproc":  # checks may run again, in any order, on one cluster
            for check in reversed(ft.ClusterConformance.CHECKS):
                assert getattr(conf, check)()
    finally:
        for stop in stops:
            stop()


def test_check_cluster_starts_and_stops_its_own_cluster():
    report = ft.check_cluster("grpc", checks=["cross_task_step", "dtypes"])
    assert report.subject == "cluster over 'grpc'" and len(report.checked) == 2


def test_check_cluster_reports_a_failing_check_by_name(monkeypatch):
    def broken(self):
        self._same("cross-task step", np.float32(1), np.float32(2))

    monkeypatch.setattr(ft.ClusterConformance, "cross_task_step", broken)
    with pytest.raises(AssertionError, match="cluster over 'inproc'.*cross-task step"):
        ft.check_cluster("inproc", checks=["cross_task_step"])


# -- the Server API -------------------------------------------------------------------
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_server_target_join_stop(protocol):
    cluster = ft.cluster_addresses(protocol, {"local": 1})
    s = Server(tf.train.ClusterSpec(cluster), "local", 0, protocol=protocol)
    try:
        assert s.target == f"{protocol}://{cluster['local'][0]}"
        assert s.join(timeout=0.05) is False
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder(tf.int64, [2])
            y = x * 3
        with tf.Session(s.target, graph=g) as sess:
            np.testing.assert_array_equal(sess.run(y, {x: [1, 2]}), [3, 6])
            names = [d.name for d in sess.list_devices()]
        assert "/job:local/replica:0/task:0/device:CPU:0" in names
    finally:
        s.stop()
    assert s.join(timeout=1.0) is True


def test_server_defaults_and_start_false():
    cluster = ft.cluster_addresses("grpc", {"w": 1})
    s = Server(cluster, start=False)  # one job with one task: both are implied
    assert (s.job_name, s.task_index, s.protocol) == ("w", 0, "grpc")
    s.start()
    s.start()  # idempotent
    s.stop()
    s.stop()
    with pytest.raises(tf.errors.FailedPreconditionError):
        s.start()
    with pytest.raises(ValueError, match="job_name"):
        Server(ft.cluster_addresses("grpc", {"a": 1, "b": 1}), start=False)
    with pytest.raises(ValueError, match="not in the cluster"):
        Server(cluster, "nope", 0, start=False)


def test_create_local_server_binds_a_free_port():
    s = Server.create_local_server()
    try:
        assert s.target.startswith("grpc://127.0.0.1:") and not s.target.endswith(":0")
        with tf.Session(s.target, graph=tf.Graph()) as sess:
            with sess.graph.as_default():
                c = tf.constant(4.0) + 1.0
            assert sess.run(c) == 5.0
    finally:
        s.stop()


def test_shutdown_cluster_in_process_stops_every_server():
    cluster = ft.cluster_addresses("zmq", {"ps": 1, "worker": 1})
    ps = Server(cluster, "ps", 0, protocol="zmq")
    w = Server(cluster, "worker", 0, protocol="zmq")
    try:
        g = tf.Graph()
        with g.as_default(), tf.device("/job:ps/task:0"):
            c = tf.constant(1.0) + 1.0
        with tf.Session(w.target, graph=g) as sess:
            assert sess.run(c) == 2.0
        tf.train.shutdown_cluster(w.target, reason="done")
        assert ps.join(timeout=5.0) and w.join(timeout=5.0)
        assert ps.shutdown_reason == "done"
    finally:
        ps.stop()
        w.stop()


def test_shutdown_cluster_needs_a_server_target():
    with pytest.raises(ValueError, match="server target"):
        tf.train.shutdown_cluster("")


# -- the master's step pipeline -------------------------------------------------------
def test_each_step_registers_once_and_runs_once_per_task(monkeypatch):
    calls = {"register": 0, "run": 0}
    reg, run = Worker.register_partitions, Worker.run_graph

    def counting_register(self, *a, **k):
        calls["register"] += 1
        return reg(self, *a, **k)

    def counting_run(self, *a, **k):
        calls["run"] += 1
        return run(self, *a, **k)

    monkeypatch.setattr(Worker, "register_partitions", counting_register)
    monkeypatch.setattr(Worker, "run_graph", counting_run)
    cluster = ft.cluster_addresses("inproc", {"ps": 1, "worker": 2})
    servers = [Server(cluster, j, i, protocol="inproc") for j in cluster
               for i in range(len(cluster[j]))]
    try:
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder(tf.float32, [2])
            with tf.device("/job:ps/task:0"):
                a = x + 1.0
            with tf.device("/job:worker/task:1"):
                b = a * 2.0
            with tf.device("/job:worker/task:0"):
                c = b - x
        with tf.Session(servers[1].target, graph=g) as sess:
            for k in range(5):
                xv = np.float32([k, -k])
                np.testing.assert_allclose(sess.run(c, {x: xv}), (xv + 1) * 2 - xv)
            assert calls == {"register": 3, "run": 15}
            sess.run(b, {x: [0, 0]})  # a new signature: two more partitions
            assert calls == {"register": 5, "run": 17}
    finally:
        for s in servers:
            s.stop()


def test_session_on_unknown_inproc_name_runs_privately():
    g = tf.Graph()
    with g.as_default():
        c = tf.constant([1, 2]) * 2
    with tf.Session(f"inproc://{ft.cluster_addresses('inproc', {'x': 1})['x'][0]}",
                    graph=g) as sess:
        np.testing.assert_array_equal(sess.run(c), [2, 4])


def test_list_devices_follows_device_filters():
    spec = tf.train.ClusterSpec({"ps": ["ldf-ps"], "worker": ["ldf-w0", "ldf-w1"]})
    servers = [Server(spec, "ps", 0, protocol="inproc"),
               Server(spec, "worker", 0, protocol="inproc"),
               Server(spec, "worker", 1, protocol="inproc")]
    try:
        g = tf.Graph()
        with g.as_default():
            tf.constant(1)
        cfg = tf.ConfigProto(device_filters=["/job:ps", "/job:worker/task:0"])
        with tf.Session(servers[1].target, graph=g, config=cfg) as sess:
            tasks = {d.name.split("/device:")[0] for d in sess.list_devices()}
        assert tasks == {"/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"}
        with tf.Session(servers[1].target, graph=g) as sess:
            assert len({d.name.split("/device:")[0] for d in sess.list_devices()}) == 3
    finally:
        for s in servers:
            s.stop()


def test_a_huge_feed_index_from_the_network_is_refused():
    """RunGraph's feed indices come from the network: one that would size a huge list
    is an InvalidArgumentError reply, not an allocation."""
    import numpy as np

    from flowrt import errors
    from flowrt.proto import service_pb2 as pb
    from flowrt.rpc import ServiceHandler, pack, unpack
    from flowrt.runtime import default_runtime
    from flowrt.worker import Worker

    handler = ServiceHandler(None, Worker(default_runtime()))
    req = pb.RunGraphRequest(graph_handle="g1", step_id=1)
    req.arg_index.append(1 << 30)
    header, buffers = pack(req, [np.float32(1.0)])
    reply, rbuf = handler("Worker/RunGraph", header, buffers)
    with pytest.raises(errors.InvalidArgumentError, match="out of range"):
        unpack(reply, rbuf, pb.RunGraphResponse)
