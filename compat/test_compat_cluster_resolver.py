"""tf.distribute.cluster_resolver under TensorFlow and flowrt: the same environment gives
the same cluster, task and master (TF_CONFIG, Slurm, simple and union resolvers)."""
from __future__ import annotations

import json

import pytest

from compat_harness import run_custom

CLUSTER = {"ps": ["h0:1"], "worker": ["h1:2", "h2:3"]}


def _spec(resolver):
    return {k: v for k, v in sorted(resolver.cluster_spec().as_dict().items())}


@pytest.mark.parametrize("config", [
    {"cluster": CLUSTER, "task": {"type": "worker", "index": 1}, "rpc_layer": "grpc"},
    {"cluster": CLUSTER, "task": {"type": "ps", "index": 0}},
    {"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 0}},
    {"cluster": CLUSTER, "session_master": "grpc://m:5"},
    {},
])
def test_tf_config(monkeypatch, config):
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))

    def program(tf):
        r = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        out = [_spec(r), r.task_type, r.task_id, r.rpc_layer, r.environment]
        out.append(r.master() if r.task_type is not None or not config.get("cluster")
                   or "session_master" in config
                   or len(config["cluster"]) == 1 else None)
        if "ps" in config.get("cluster", {}):
            out.append(r.master("ps", 0, rpc_layer="grpc"))
        return out

    run_custom(program)


def test_simple_and_union():
    def program(tf):
        R = tf.distribute.cluster_resolver
        a = R.SimpleClusterResolver(tf.train.ClusterSpec({"worker": ["w0:1", "w1:1"]}),
                                    task_type="worker", task_id=0, rpc_layer="grpc",
                                    num_accelerators={"GPU": 2})
        b = R.SimpleClusterResolver(tf.train.ClusterSpec({"ps": ["p0:1"],
                                                          "worker": ["w2:1"]}))
        u = R.UnionResolver(a, b)
        sparse = R.SimpleClusterResolver(tf.train.ClusterSpec({"worker": {5: "w5:1"}}))
        return [a.master("worker", 1), dict(a.num_accelerators()), _spec(u),
                u.task_type, u.task_id, u.rpc_layer, u.master("ps", 0),
                {str(k): v for k, v in
                 R.UnionResolver(a, sparse).cluster_spec().as_dict()["worker"].items()}]

    run_custom(program)


def test_union_clash_and_bad_arguments():
    def clash(tf):
        R = tf.distribute.cluster_resolver
        a = R.SimpleClusterResolver(tf.train.ClusterSpec({"worker": ["w0:1", "w1:1"]}))
        b = R.SimpleClusterResolver(tf.train.ClusterSpec({"worker": {1: "x:1"}}))
        return _spec(R.UnionResolver(a, b))

    run_custom(clash)
    run_custom(lambda tf: tf.distribute.cluster_resolver.UnionResolver())
    run_custom(lambda tf: tf.distribute.cluster_resolver.SimpleClusterResolver(
        {"worker": ["w:1"]}))


def test_slurm(monkeypatch):
    """TF 2.21's resolver reads the step's node list itself, as flowrt's does."""
    for k, v in {"SLURM_PROCID": "2", "SLURM_STEP_NUM_TASKS": "4",
                 "SLURM_STEP_NODELIST": "node[01-02]",
                 "SLURM_STEP_TASKS_PER_NODE": "2(x2)"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("OMPI_COMM_WORLD_RANK", raising=False)

    def program(tf):
        r = tf.distribute.cluster_resolver.SlurmClusterResolver(
            {"worker": 3, "ps": 1}, port_base=9000, gpus_per_node=4, gpus_per_task=2,
            auto_set_gpu=False)
        return [_spec(r), r.task_type, r.task_id, r.master()]

    run_custom(program)
