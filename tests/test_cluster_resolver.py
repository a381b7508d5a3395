"""tf.distribute.cluster_resolver: TF_CONFIG, Slurm, Kubernetes, simple and union
resolvers (TF 1.15's semantics), and a server started from a resolver."""
from __future__ import annotations

import json
import types

import numpy as np
import pytest

import flowrt as tf
from flowrt.modeling import cluster_resolver as cr
from flowrt.tools.testing import free_ports

R = tf.distribute.cluster_resolver


def test_expand_hostlist_forms():
    assert cr.expand_hostlist("node01") == ["node01"]
    assert cr.expand_hostlist("n[01-03,07],gpu-a[1-2]x") == \
        ["n01", "n02", "n03", "n07", "gpu-a1x", "gpu-a2x"]
    assert cr.expand_hostlist("r[1-2]c[08-09]") == ["r1c08", "r1c09", "r2c08", "r2c09"]
    assert cr.expand_hostlist("a,b[9-10]") == ["a", "b9", "b10"]
    for bad in ("n[01-", "n[a-b]", "n]1["):
        with pytest.raises(ValueError, match="Malformed"):
            cr.expand_hostlist(bad)


def test_expand_tasks_per_node():
    assert cr.expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert cr.expand_tasks_per_node("4") == [4]
    with pytest.raises(ValueError, match="Malformed"):
        cr.expand_tasks_per_node("2(3)")


def _slurm_env(monkeypatch, rank: int, tasks: int, nodes: str, per_node: str) -> None:
    for k in ("OMPI_COMM_WORLD_RANK", "SLURM_NTASKS", "SLURM_NODELIST",
              "SLURM_TASKS_PER_NODE", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("SLURM_PROCID", str(rank))
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", str(tasks))
    monkeypatch.setenv("SLURM_STEP_NODELIST", nodes)
    monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", per_node)


def test_slurm_cluster_tasks_ports_and_gpus(monkeypatch):
    _slurm_env(monkeypatch, 2, 4, "node[01-02]", "2(x2)")
    r = R.SlurmClusterResolver({"worker": 3, "ps": 1}, port_base=9000, gpus_per_node=4)
    spec = r.cluster_spec()
    # jobs take ranks in name order: ps first
    assert spec.as_dict() == {"ps": ["node01:9000"],
                              "worker": ["node01:9001", "node02:9000", "node02:9001"]}
    assert (r.task_type, r.task_id) == ("worker", 1) == r.get_task_info()
    assert r.master() == "grpc://node02:9000"
    assert r.master("ps", 0, rpc_layer="zmq") == "zmq://node01:9000"
    # two tasks a node share its 4 GPUs: rank 2 is the first task on node02
    assert tf.distribute.cluster_resolver.SlurmClusterResolver is cr.SlurmClusterResolver
    import os
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert r.num_accelerators() == {"GPU": 2}
    _slurm_env(monkeypatch, 1, 4, "node[01-02]", "2(x2)")
    R.SlurmClusterResolver({"worker": 3, "ps": 1}, gpus_per_node=4).cluster_spec()
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_slurm_defaults_and_errors(monkeypatch):
    _slurm_env(monkeypatch, 0, 3, "a,b,c", "1(x3)")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    r = R.SlurmClusterResolver()  # every task a worker
    assert r.cluster_spec().as_dict() == {"worker": ["a:8888", "b:8888", "c:8888"]}
    assert (r.task_type, r.task_id) == ("worker", 0) and r.num_accelerators() == {}
    with pytest.raises(RuntimeError, match="Requested 4 tasks"):
        R.SlurmClusterResolver({"worker": 4})
    with pytest.raises(RuntimeError, match="GPUs on a node"):
        R.SlurmClusterResolver({"worker": 3}, gpus_per_node=1, gpus_per_task=2)
    monkeypatch.delenv("SLURM_PROCID")
    with pytest.raises(RuntimeError, match="SLURM_PROCID is not set"):
        R.SlurmClusterResolver()


def test_tf_config_resolver(monkeypatch):
    cluster = {"ps": ["h0:1"], "worker": ["h1:2", "h2:3"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": 1}, "rpc_layer": "grpc"}))
    r = R.TFConfigClusterResolver()
    assert r.cluster_spec().as_dict() == cluster
    assert (r.task_type, r.task_id, r.rpc_layer) == ("worker", 1, "grpc")
    assert r.master() == "grpc://h2:3"
    assert r.master("ps", 0, rpc_layer="zmq") == "zmq://h0:1"
    over = R.TFConfigClusterResolver(task_type="ps", task_id=0, rpc_layer="zmq")
    assert over.master() == "zmq://h0:1"
    over.task_id = 0
    assert over.task_id == 0
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["h:1"]},
                                                "task": {"type": "worker", "index": 0}}))
    assert r.master() == ""  # a cluster of one task
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster,
                                                "session_master": "grpc://m:5"}))
    assert r.master() == "grpc://m:5" and r.task_type is None
    monkeypatch.delenv("TF_CONFIG")
    assert r.cluster_spec().as_dict() == {} and r.master() == ""
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
        r.cluster_spec()


def test_simple_and_union():
    a = tf.train.ClusterSpec({"worker": ["w0:1", "w1:1"]})
    b = tf.train.ClusterSpec({"ps": ["p0:1"], "worker": ["w2:1"]})
    ra = R.SimpleClusterResolver(a, master="grpc://w0:1", task_type="worker", task_id=0,
                                 num_accelerators={"GPU": 2}, rpc_layer="grpc")
    rb = R.SimpleClusterResolver(b, task_type="ps", task_id=0)
    assert ra.master() == "grpc://w0:1" and ra.master("worker", 1) == "grpc://w1:1"
    assert ra.num_accelerators() == {"GPU": 2} and rb.num_accelerators() == {}
    u = R.UnionResolver(ra, rb)
    assert u.cluster_spec().as_dict() == {"worker": ["w0:1", "w1:1", "w2:1"],
                                          "ps": ["p0:1"]}
    assert (u.task_type, u.task_id, u.rpc_layer) == ("worker", 0, "grpc")
    # a named task takes only the union's own rpc layer (none here), as in TF
    assert u.master() == "grpc://w0:1" and u.master("ps", 0) == "p0:1"
    sparse = R.SimpleClusterResolver(tf.train.ClusterSpec({"worker": {5: "w5:1"}}))
    assert u.__class__(ra, sparse).cluster_spec().as_dict()["worker"] == \
        {0: "w0:1", 1: "w1:1", 5: "w5:1"}
    clash = R.SimpleClusterResolver(tf.train.ClusterSpec({"worker": {1: "x:1"}}))
    with pytest.raises(KeyError, match="Duplicate keys"):
        R.UnionResolver(ra, clash).cluster_spec()
    with pytest.raises(ValueError, match="At least one"):
        R.UnionResolver()
    with pytest.raises(TypeError, match="sub-class"):
        R.UnionResolver(ra, "x")
    with pytest.raises(ValueError, match="Unexpected kwargs"):
        R.UnionResolver(ra, colour="red")
    with pytest.raises(TypeError, match="cluster_spec must be"):
        R.SimpleClusterResolver({"worker": ["w:1"]})


class _FakeK8s:
    def __init__(self, pods: dict[str, list[tuple[str, str, str]]]):
        self.pods, self.asked = pods, []

    def list_pod_for_all_namespaces(self, label_selector: str) -> types.SimpleNamespace:
        self.asked.append(label_selector)
        return types.SimpleNamespace(items=[
            types.SimpleNamespace(metadata=types.SimpleNamespace(name=n),
                                  status=types.SimpleNamespace(pod_ip=ip, phase=ph))
            for n, ip, ph in self.pods[label_selector]])


def test_kubernetes_api_mode():
    client = _FakeK8s({"job-name=worker": [("w-1", "10.0.0.2", "Running"),
                                           ("w-0", "10.0.0.1", "Running")],
                       "job-name=ps": [("p-0", "10.0.1.1", "Running")]})
    r = R.KubernetesClusterResolver({"worker": ["job-name=worker"], "ps": ["job-name=ps"]},
                                    override_client=client)
    assert r.cluster_spec().as_dict() == {"worker": ["10.0.0.1:8470", "10.0.0.2:8470"],
                                          "ps": ["10.0.1.1:8470"]}
    assert r.master("worker", 1) == "grpc://10.0.0.2:8470" and r.master() == ""
    client.pods["job-name=ps"] = [("p-0", "", "Pending")]
    with pytest.raises(RuntimeError, match='Pod "p-0" is not running; phase: "Pending"'):
        r.cluster_spec()
    with pytest.raises(ValueError, match="not both"):
        R.KubernetesClusterResolver({"worker": ["a=b"]}, job_to_service={"w": ("w", 1)})


def test_kubernetes_headless_services(monkeypatch):
    monkeypatch.setenv("POD_NAMESPACE", "ml")
    r = R.KubernetesClusterResolver(
        job_to_service={"worker": ("trainer-worker", 2), "ps": ("trainer-ps", 1)},
        tf_server_port=2222, rpc_layer="zmq", hostname="trainer-worker-1")
    assert r.cluster_spec().as_dict() == {
        "worker": ["trainer-worker-0.trainer-worker.ml.svc.cluster.local:2222",
                   "trainer-worker-1.trainer-worker.ml.svc.cluster.local:2222"],
        "ps": ["trainer-ps-0.trainer-ps.ml.svc.cluster.local:2222"]}
    assert (r.task_type, r.task_id) == ("worker", 1)
    assert r.master() == "zmq://trainer-worker-1.trainer-worker.ml.svc.cluster.local:2222"
    other = R.KubernetesClusterResolver(job_to_service={"worker": ("trainer-worker", 2)},
                                        hostname="trainer-worker-7")
    assert (other.task_type, other.task_id) == (None, None) and other.master() == ""
    monkeypatch.setenv("FLOWRT_K8S_SERVICES", json.dumps({"ps": ["trainer-ps", 1]}))
    by_name = cr.resolver_by_name("kubernetes", hostname="trainer-ps-0")
    assert (by_name.task_type, by_name.task_id) == ("ps", 0)
    with pytest.raises(ValueError, match="unknown cluster resolver 'nope'"):
        cr.resolver_by_name("nope")


def test_a_cluster_started_from_tf_config(monkeypatch):
    """Two in-process servers started from what TFConfigClusterResolver reads; a step
    reads a variable on the ps through the worker's master."""
    ps_port, w_port = free_ports(2)
    cluster = {"ps": [f"127.0.0.1:{ps_port}"], "worker": [f"127.0.0.1:{w_port}"]}
    servers = []
    try:
        for job in ("ps", "worker"):
            monkeypatch.setenv("TF_CONFIG", json.dumps(
                {"cluster": cluster, "task": {"type": job, "index": 0}, "rpc_layer": "grpc"}))
            r = R.TFConfigClusterResolver()
            servers.append(tf.train.Server(r.cluster_spec(), job_name=r.task_type,
                                           task_index=r.task_id, protocol=r.rpc_layer))
        target = R.TFConfigClusterResolver().master()
        assert target == f"grpc://127.0.0.1:{w_port}"
        with tf.Graph().as_default():
            with tf.device("/job:ps/task:0"):
                v = tf.Variable(np.float32(3.0))
            with tf.device("/job:worker/task:0"):
                y = v * 2.0
            with tf.Session(target) as sess:
                sess.run(v.initializer)
                assert float(sess.run(y)) == 6.0
    finally:
        for s in servers:
            s.stop()
