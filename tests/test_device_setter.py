"""tf.train.replica_device_setter and the ps strategies.

The expected ``op.device`` strings of the graph tests were produced by running the same
graph-building code with TensorFlow's ``tf.compat.v1`` (graph mode, ref variables) and
are kept here as literals.
"""
from __future__ import annotations

import logging

import numpy as np
import pytest

import flowrt as tf
from flowrt.cluster import ClusterSpec
from flowrt.device_setter import (STANDARD_PS_OPS, GreedyLoadBalancingStrategy,
                                  _RoundRobinStrategy, byte_size_load_fn,
                                  replica_device_setter)
from flowrt.proto import node_def_pb2

CLUSTER = {"ps": ["ps0:1", "ps1:1", "ps2:1"], "worker": ["w0:1", "w1:1"]}


@pytest.fixture
def g():
    graph = tf.Graph()
    with graph.as_default():
        yield graph


def devices(graph: tf.Graph, skip: str | None = None) -> dict[str, str]:
    return {op.name: op.device for op in graph.get_operations()
            if skip is None or not op.name.startswith(skip)}


def test_exports():
    assert tf.train.replica_device_setter is replica_device_setter
    assert tf.train.GreedyLoadBalancingStrategy is GreedyLoadBalancingStrategy
    assert tf.train.byte_size_load_fn is byte_size_load_fn
    assert {"Variable", "VariableV2", "VarHandleOp", "MutableHashTableV2"} <= set(
        STANDARD_PS_OPS)


# -- placements checked against TensorFlow ------------------------------------------------
def test_round_robin_over_cluster(g):
    with tf.device(tf.train.replica_device_setter(cluster=CLUSTER,
                                                  worker_device="/job:worker/task:1")):
        a = tf.Variable(tf.zeros([2, 3]), name="a")
        b = tf.Variable(3.0, name="b")
        tf.Variable([1, 2, 3], name="c")
        tf.Variable(1.0, name="d")
        tf.matmul(tf.ones([1, 2]), a) * b
    w, p0, p1, p2 = "/job:worker/task:1", "/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:2"
    assert devices(g) == {
        "MatMul": w, "a": p0, "a/Assign": p0, "a/read": p0, "b": p1, "b/Assign": p1,
        "b/initial_value": w, "b/read": p1, "c": p2, "c/Assign": p2, "c/initial_value": w,
        "c/read": p2, "d": p0, "d/Assign": p0, "d/initial_value": w, "d/read": p0,
        "mul": w, "ones": w, "zeros": w}


def test_nested_device_scopes_fill_unset_fields(g):
    with tf.device(tf.train.replica_device_setter(ps_tasks=2)):
        with tf.device("/device:GPU:1"):
            a = tf.Variable(1.0, name="a")
            tf.add(a, 1.0, name="x")
        b = tf.Variable(2.0, name="b")
        with tf.device("/cpu:0"):
            tf.multiply(b, 2.0, name="y")
    assert devices(g) == {
        "a": "/job:ps/task:0/device:GPU:1", "a/Assign": "/job:ps/task:0/device:GPU:1",
        "a/initial_value": "/job:worker/device:GPU:1",
        "a/read": "/job:ps/task:0/device:GPU:1", "b": "/job:ps/task:1",
        "b/Assign": "/job:ps/task:1", "b/initial_value": "/job:worker",
        "b/read": "/job:ps/task:1", "x": "/job:worker/device:GPU:1",
        "x/y": "/job:worker/device:GPU:1", "y": "/job:worker/device:CPU:0",
        "y/y": "/job:worker/device:CPU:0"}


def test_setter_inside_an_outer_device_string(g):
    with tf.device("/job:worker/task:7/device:GPU:0"):
        with tf.device(tf.train.replica_device_setter(ps_tasks=2,
                                                      worker_device="/job:worker/task:3")):
            a = tf.Variable(1.0, name="a")
            tf.add(a, 1.0, name="x")
            tf.Variable(1.0, name="b")
    wg = "/job:worker/task:3/device:GPU:0"
    assert devices(g) == {
        "a": "/job:ps/task:0/device:GPU:0", "a/Assign": "/job:ps/task:0/device:GPU:0",
        "a/initial_value": wg, "a/read": "/job:ps/task:0/device:GPU:0",
        "b": "/job:ps/task:1/device:GPU:0", "b/Assign": "/job:ps/task:1/device:GPU:0",
        "b/initial_value": wg, "b/read": "/job:ps/task:1/device:GPU:0", "x": wg, "x/y": wg}


def test_explicit_devices_on_ops(g):
    with tf.device(tf.train.replica_device_setter(ps_tasks=3)):
        tf.Variable(1.0, name="a")
        with tf.device("/job:ps/task:2"):
            tf.Variable(1.0, name="b")     # keeps task 2, the strategy still advances
        tf.Variable(1.0, name="c")
        with tf.device("/job:other"):
            d = tf.Variable(1.0, name="d")  # another job: no ps task is chosen
            tf.identity(d, name="z")
        tf.Variable(1.0, name="e")
        with tf.device("/task:5"):
            tf.Variable(1.0, name="f")
        with tf.device(None):
            tf.Variable(1.0, name="g")
            tf.constant(1.0, name="w")
    assert devices(g) == {
        "a": "/job:ps/task:0", "a/Assign": "/job:ps/task:0", "a/initial_value": "/job:worker",
        "a/read": "/job:ps/task:0", "b": "/job:ps/task:2", "b/Assign": "/job:ps/task:2",
        "b/initial_value": "/job:ps/task:2", "b/read": "/job:ps/task:2",
        "c": "/job:ps/task:2", "c/Assign": "/job:ps/task:2", "c/initial_value": "/job:worker",
        "c/read": "/job:ps/task:2", "d": "/job:other", "d/Assign": "/job:other",
        "d/initial_value": "/job:other", "d/read": "/job:other", "e": "/job:ps/task:0",
        "e/Assign": "/job:ps/task:0", "e/initial_value": "/job:worker",
        "e/read": "/job:ps/task:0", "f": "/job:ps/task:5", "f/Assign": "/job:ps/task:5",
        "f/initial_value": "/job:worker/task:5", "f/read": "/job:ps/task:5", "g": "",
        "g/Assign": "", "g/initial_value": "", "g/read": "", "w": "", "z": "/job:other"}


def test_merge_devices_false_keeps_existing_devices(g, caplog):
    with caplog.at_level(logging.WARNING, logger="flowrt.device_setter"):
        setter = tf.train.replica_device_setter(ps_tasks=2, merge_devices=False)
    assert "merge_devices=False" in caplog.text
    with tf.device(setter):
        tf.Variable(1.0, name="a")
        with tf.device("/device:GPU:0"):
            b = tf.Variable(1.0, name="b")
            tf.add(b, 1.0, name="x")
        tf.Variable(1.0, name="c")
    gpu = "/device:GPU:0"
    assert devices(g) == {
        "a": "/job:ps/task:0", "a/Assign": "/job:ps/task:0", "a/initial_value": "/job:worker",
        "a/read": "/job:ps/task:0", "b": gpu, "b/Assign": gpu, "b/initial_value": gpu,
        "b/read": gpu, "c": "/job:ps/task:1", "c/Assign": "/job:ps/task:1",
        "c/initial_value": "/job:worker", "c/read": "/job:ps/task:1", "x": gpu, "x/y": gpu}


def test_colocation_wins_over_the_setter(g):
    with tf.device(tf.train.replica_device_setter(ps_tasks=2)):
        a = tf.Variable(1.0, name="a")
        b = tf.Variable(1.0, name="b")
        with tf.colocate_with(b):
            x = tf.add(b, 1.0, name="x")
            tf.Variable(1.0, name="c")
        tf.add(a, b, name="y")
    p0, p1, w = "/job:ps/task:0", "/job:ps/task:1", "/job:worker"
    assert devices(g) == {
        "a": p0, "a/Assign": p0, "a/initial_value": w, "a/read": p0, "b": p1,
        "b/Assign": p1, "b/initial_value": w, "b/read": p1, "c": p1, "c/Assign": p1,
        "c/initial_value": p1, "c/read": p1, "x": p1, "x/y": p1, "y": w}
    assert x.op.colocation_groups() == [b"loc:@b"]


def test_custom_ps_ops_and_device_fields(g):
    with tf.device(tf.train.replica_device_setter(
            ps_tasks=2, ps_device="/job:ps/device:CPU:0",
            worker_device="/job:worker/task:0/device:GPU:0", ps_ops=["VariableV2", "Const"])):
        a = tf.Variable(tf.zeros([3]), name="a")
        tf.multiply(a, tf.constant(2.0, name="k"), name="y")
    assert devices(g) == {
        "a": "/job:ps/task:1/device:CPU:0", "a/Assign": "/job:ps/task:1/device:CPU:0",
        "a/read": "/job:ps/task:1/device:CPU:0", "k": "/job:ps/task:0/device:CPU:0",
        "y": "/job:worker/task:0/device:GPU:0", "zeros": "/job:ps/task:0/device:CPU:0"}


def test_ps_device_without_job_sets_no_task(g):
    calls = []

    def strategy(op):
        calls.append(op.name)
        return 1

    with tf.device(tf.train.replica_device_setter(ps_tasks=2, ps_device="/device:CPU:0",
                                                  worker_device="", ps_strategy=strategy)):
        a = tf.Variable(1.0, name="a")
        tf.identity(a, name="y")
    assert devices(g) == {"a": "/device:CPU:0", "a/Assign": "/device:CPU:0",
                          "a/initial_value": "", "a/read": "/device:CPU:0", "y": ""}
    assert calls == []


def test_get_variable_and_caching_device(g):
    with tf.device(tf.train.replica_device_setter(ps_tasks=2)):
        with tf.variable_scope("layer"):
            tf.get_variable("w", [4, 4], initializer=tf.zeros_initializer())
            tf.get_variable("b", [4], initializer=tf.ones_initializer())
        tf.Variable(1.0, name="cached", caching_device="/job:worker/task:0")
    assert devices(g) == {
        "cached": "/job:ps/task:0", "cached/Assign": "/job:ps/task:0",
        "cached/initial_value": "/job:worker", "cached/read": "/job:worker/task:0",
        "layer/b": "/job:ps/task:1", "layer/b/Assign": "/job:ps/task:1",
        "layer/b/Initializer/ones": "", "layer/b/read": "/job:ps/task:1",
        "layer/w": "/job:ps/task:0", "layer/w/Assign": "/job:ps/task:0",
        "layer/w/Initializer/zeros": "", "layer/w/read": "/job:ps/task:0"}


def test_custom_strategy_sees_the_op(g):
    with tf.device(tf.train.replica_device_setter(
            ps_tasks=4, ps_strategy=lambda op: len(op.name) % 4)):
        tf.Variable(1.0, name="a")
        tf.Variable(1.0, name="bbb")
        tf.Variable(1.0, name="cc")
    d = devices(g)
    assert (d["a"], d["bbb"], d["cc"]) == ("/job:ps/task:1", "/job:ps/task:3",
                                           "/job:ps/task:2")
    assert d["bbb/initial_value"] == "/job:worker"


def test_optimizer_update_ops_follow_their_variables(g):
    with tf.device(tf.train.replica_device_setter(ps_tasks=2)):
        w = tf.Variable(tf.ones([3]), name="w")
        b = tf.Variable(0.0, name="b")
        loss = tf.reduce_sum(w * 2.0 + b, name="loss")
        gs = tf.train.get_or_create_global_step()
        tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs, name="train")
    p0, p1, wk = "/job:ps/task:0", "/job:ps/task:1", "/job:worker"
    # TF 1.15's gradient subgraph differs in structure; the rest matches TensorFlow
    assert devices(g, skip="gradients/") == {
        "Const": wk, "add": wk, "b": p1, "b/Assign": p1, "b/initial_value": wk,
        "b/read": p1, "global_step": p0, "global_step/Assign": p0,
        "global_step/Initializer/zeros": "", "global_step/read": p0, "loss": wk, "mul": wk,
        "mul/y": wk, "ones": wk, "train": p0, "train/learning_rate": wk,
        "train/update": wk, "train/update/NoOp": p0, "train/update/NoOp_1": p1,
        "train/update_b/ApplyGradientDescent": p1,
        "train/update_w/ApplyGradientDescent": p0, "train/value": p0, "w": p0,
        "w/Assign": p0, "w/read": p0}
    assert all(op.device == wk for op in g.get_operations()
               if op.name.startswith("gradients/") and op.device)


# -- arguments ------------------------------------------------------------------------------
def test_no_ps_tasks_gives_none():
    assert tf.train.replica_device_setter() is None
    assert tf.train.replica_device_setter(ps_tasks=0) is None
    assert tf.train.replica_device_setter(cluster={"worker": ["w:1"]}) is None
    assert tf.train.replica_device_setter(ps_tasks=3, cluster={"worker": ["w:1"]}) is None
    assert tf.train.replica_device_setter(cluster=CLUSTER, ps_device="/job:param") is None


@pytest.mark.parametrize("cluster", [
    CLUSTER, ClusterSpec(CLUSTER), ClusterSpec(CLUSTER).as_cluster_def(),
    {"ps": {0: "a", 1: "b", 2: "c"}}])
def test_cluster_forms_set_ps_tasks(g, cluster):
    # ps_tasks is ignored when a cluster is given: three ps tasks either way
    with tf.device(tf.train.replica_device_setter(ps_tasks=7, cluster=cluster)):
        vs = [tf.Variable(float(i), name=f"v{i}") for i in range(5)]
    assert [v.op.device for v in vs] == [f"/job:ps/task:{i % 3}" for i in range(5)]


def test_ps_job_named_by_ps_device(g):
    cluster = {"param": ["a:1", "b:1"], "worker": ["w:1"]}
    with tf.device(tf.train.replica_device_setter(cluster=cluster, ps_device="/job:param",
                                                  worker_device="/job:worker/task:0")):
        vs = [tf.Variable(1.0, name=f"v{i}") for i in range(3)]
        y = tf.add_n([v.value() for v in vs])
    assert [v.op.device for v in vs] == ["/job:param/task:0", "/job:param/task:1",
                                         "/job:param/task:0"]
    assert y.op.device == "/job:worker/task:0"


def test_argument_errors():
    with pytest.raises(TypeError, match="^ps_strategy must be callable$"):
        tf.train.replica_device_setter(ps_tasks=2, ps_strategy=3)
    with pytest.raises(TypeError, match="`cluster` must be a dictionary"):
        tf.train.replica_device_setter(cluster=["ps:1"])


def test_device_function_accepts_node_defs():
    fn = tf.train.replica_device_setter(ps_tasks=2)
    var = node_def_pb2.NodeDef(name="v", op="VariableV2")
    other = node_def_pb2.NodeDef(name="m", op="MatMul", device="/device:GPU:0")
    assert [fn(var), fn(var), fn(var)] == ["/job:ps/task:0", "/job:ps/task:1",
                                           "/job:ps/task:0"]
    assert fn(other) == "/job:worker/device:GPU:0"


def test_round_robin_strategy_wraps():
    s = _RoundRobinStrategy(3)
    assert [s(None) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


# -- load balancing -------------------------------------------------------------------------
def test_greedy_strategy_picks_least_loaded():
    loads = iter([5, 1, 1, 1, 10, 1])
    s = GreedyLoadBalancingStrategy(3, lambda op: next(loads))
    picks = [s(None) for _ in range(6)]
    # loads after each pick: [5,0,0] [5,1,0] [5,1,1] [5,2,1] [5,2,11] [5,3,11]
    assert picks == [0, 1, 2, 1, 2, 1]
    assert all(isinstance(p, int) for p in picks)
    assert s.loads == [5.0, 3.0, 11.0]


def test_byte_size_load_fn(g):
    a = tf.Variable(tf.zeros([10, 10]), name="a")
    b = tf.Variable(np.zeros(3, np.int64), name="b")
    c = tf.Variable(np.float64(1.0), name="c")
    assert [byte_size_load_fn(v.op) for v in (a, b, c)] == [400, 24, 8]
    assert byte_size_load_fn(tf.constant(np.zeros((2, 5), np.int16)).op) == 20


def test_byte_size_load_fn_uses_the_shape_attr_while_placing(g):
    seen = {}

    def load(op):
        seen[op.name] = byte_size_load_fn(op)
        return seen[op.name]

    with tf.device(tf.train.replica_device_setter(
            ps_tasks=2, ps_strategy=GreedyLoadBalancingStrategy(2, load))):
        tf.Variable(tf.zeros([4, 4]), name="a")
        tf.Variable(2.0, name="s")
    assert seen == {"a": 64, "s": 4}


def test_byte_size_load_fn_falls_back_to_the_shape_attr():
    class Output:
        dtype = tf.float64

        def get_shape(self):
            return tf.TensorShape(None)

    class VariableOp:
        outputs = [Output()]

        def get_attr(self, name):
            assert name == "shape"
            return tf.TensorShape([2, 3])

    assert byte_size_load_fn(VariableOp()) == 48


def test_byte_size_load_fn_errors(g):
    y, idx = tf.unique(tf.constant([1, 2, 1]))
    with pytest.raises(ValueError, match=r"must have a single output"):
        byte_size_load_fn(y.op)
    p = tf.placeholder(tf.float32, [None, 3], name="p")
    with pytest.raises(ValueError, match=r"Shape \(\?, 3\) is not fully defined"):
        byte_size_load_fn(p.op)


def _ps_bytes(graph: tf.Graph, num_ps: int) -> list[int]:
    out = [0] * num_ps
    for op in graph.get_operations():
        if op.type == "VariableV2":
            task = tf.DeviceSpec.from_string(op.device).task
            out[task] += byte_size_load_fn(op)
    return out


def _build_model(strategy, num_ps: int) -> tf.Graph:
    """A model whose big and small variables alternate: round robin stacks the big ones
    on the even ps tasks."""
    graph = tf.Graph()
    with graph.as_default():
        with tf.device(tf.train.replica_device_setter(ps_tasks=num_ps,
                                                      ps_strategy=strategy)):
            x = tf.placeholder(tf.float32, [None, 512])
            for i in range(4):
                w = tf.get_variable(f"w{i}", [512, 512],
                                    initializer=tf.zeros_initializer())
                b = tf.get_variable(f"b{i}", [512], initializer=tf.zeros_initializer())
                x = tf.nn.relu(tf.matmul(x, w) + b)
    return graph


def test_greedy_byte_size_balances_where_round_robin_does_not():
    rr = _ps_bytes(_build_model(None, 2), 2)
    greedy = _ps_bytes(_build_model(GreedyLoadBalancingStrategy(2, byte_size_load_fn), 2),
                       2)
    total = 4 * (512 * 512 + 512) * 4
    assert sum(rr) == sum(greedy) == total
    # round robin: all four weight matrices on ps 0, only the biases on ps 1
    assert rr == [4 * 512 * 512 * 4, 4 * 512 * 4]
    assert max(rr) / total > 0.99
    # greedy: two matrices each
    assert greedy == [total // 2, total // 2]
