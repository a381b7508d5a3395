"""The cost model (estimates, transfers, measurements) and the cost-model placer."""
from __future__ import annotations


import numpy as np
import pytest

import flowrt as tf
from flowrt import errors
from flowrt.cost_model import CostModel, DeviceProfile, LinkProfile, simulate
from flowrt.executor import NodeStat
from flowrt.ir import extract_step_graph
from flowrt.placement import place, placer_from_config
from flowrt.plugins.devices.cpu import CPUDevice

N = 256  # "heavy": a 256^3 matmul is ~34 MFLOP, far above any transfer estimate


def _cpus(n: int, task: int = 0) -> list[CPUDevice]:
    return [CPUDevice(i, "localhost", task) for i in range(n)]


def _ir(g: tf.Graph, fetches: list, feeds: list = ()):  # type: ignore[assignment]
    return extract_step_graph(g, list(feeds), [t for t in fetches], [])


def _place(g: tf.Graph, fetches: list, devices: list, **kw):  # type: ignore[no-untyped-def]
    ir = _ir(g, fetches)
    kw.setdefault("placer", "cost_model")
    placed = place(ir, devices, g._runtime, **kw)
    return {n: d.name for n, d in placed.items()}, ir


def _short(name: str) -> str:
    return name.rsplit("/", 1)[-1].replace("device:", "")


def _branches(k: int, depth: int = 2, size: int = N, pin: dict | None = None):
    """``k`` independent chains of matmuls, summed; returns (graph, outputs, total)."""
    g = tf.Graph()
    pin = pin or {}
    with g.as_default():
        outs = []
        for b in range(k):
            with tf.device(pin.get(b, "")):
                h = tf.constant(np.ones((size, size), np.float32), name=f"x{b}")
                w = tf.constant(np.eye(size, dtype=np.float32), name=f"w{b}")
                for i in range(depth):
                    h = tf.matmul(h, w, name=f"b{b}_mm{i}")
            outs.append(h)
        total = tf.add_n(outs, name="total")
    return g, outs, total


def _node(g: tf.Graph, name: str):  # type: ignore[no-untyped-def]
    op = g.get_operation_by_name(name)
    return _ir(g, [op.outputs[0]]).nodes[name]


# -- estimates -----------------------------------------------------------------------
def test_matmul_flops_and_cost_exceed_elementwise():
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder(tf.float32, [N, 64], name="a")
        b = tf.placeholder(tf.float32, [64, 32], name="b")
        tf.matmul(a, b, name="mm")
        tf.matmul(b, a, transpose_a=True, transpose_b=True, name="mm_t")
        c = tf.placeholder(tf.float32, [N, N], name="c")
        tf.add(c, c, name="add")
        tf.exp(c, name="exp")
        tf.reduce_sum(c, name="sum")
        tf.matmul(c, c, name="mm_sq")
    cm = CostModel()
    flops, _ = cm.work(_node(g, "mm"))
    assert flops == 2 * N * 64 * 32
    assert cm.work(_node(g, "mm_t"))[0] == 2 * 32 * N * 64
    add, exp, red, sq = (_node(g, n) for n in ("add", "exp", "sum", "mm_sq"))
    assert cm.work(add) == (0.0, float(2 * N * N))  # both inputs are read
    assert cm.work(red)[1] == pytest.approx(N * N, abs=8)  # input-sized
    assert cm.work(exp)[1] > cm.work(add)[1]  # transcendental weight
    assert cm.estimate(sq, "CPU") > 10 * cm.estimate(add, "CPU")
    assert cm.estimate(add, "CPU") > cm.profile("CPU").op_overhead
    # a faster device type runs the same node in less time
    assert cm.estimate(sq, "GPU") < cm.estimate(sq, "CPU")


def test_unknown_dims_use_the_default_size():
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder(tf.float32, [None, 128], name="a")
        w = tf.placeholder(tf.float32, [128, 10], name="w")
        tf.matmul(a, w, name="mm")
        u = tf.placeholder(tf.float32, None, name="u")
        tf.negative(u, name="neg")
    mm = _node(g, "mm")
    assert CostModel().work(mm)[0] == 2 * 64 * 10 * 128
    assert CostModel(default_dim=1000).work(mm)[0] == 2 * 1000 * 10 * 128
    assert CostModel(default_dim=8).num_elements(_node(g, "neg").out_shapes[0]) == 64
    assert CostModel().output_bytes(mm, 0) == 64 * 10 * 4


def test_conv_pool_einsum_and_free_ops():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2, 16, 16, 3], name="x")
        f = tf.placeholder(tf.float32, [3, 3, 3, 8], name="f")
        y = tf.nn.conv2d(x, f, strides=[1, 1, 1, 1], padding="SAME", name="conv")
        tf.nn.max_pool(y, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID",
                       name="pool")
        tf.einsum("ij,jk->ik", tf.placeholder(tf.float32, [5, 6]),
                  tf.placeholder(tf.float32, [6, 7]), name="ein")
        tf.reshape(x, [-1], name="flat")
        tf.identity(x, name="ident")
    cm = CostModel()
    assert cm.work(_node(g, "conv"))[0] == 2 * (2 * 16 * 16 * 8) * 3 * 3 * 3
    assert cm.work(_node(g, "pool"))[0] == (2 * 8 * 8 * 8) * 4
    assert cm.work(_node(g, "ein/Einsum"))[0] == 2 * 5 * 6 * 7  # (in its scope, as TF 1.15)
    for name in ("flat", "ident", "x"):
        assert cm.work(_node(g, name)) == (0.0, 0.0)
        assert cm.estimate(_node(g, name), "CPU") == cm.profile("CPU").op_overhead


def test_transfer_costs():
    cm = CostModel()
    c0, c1 = _cpus(2)
    remote = CPUDevice(0, "worker", 1)
    assert cm.transfer_cost(10 ** 6, c0, c0) == 0.0
    local = cm.transfer_cost(10 ** 6, c0, c1)
    assert 0.0 < local < 1e-3
    assert cm.transfer_cost(10 ** 7, c0, c1) > local  # grows with the bytes
    assert cm.transfer_cost(10 ** 6, c0, remote) > local  # another task: the network
    assert cm.transfer_cost(0, c0.name, c1.name) == cm.local_link.latency
    slow = CostModel(local_link=LinkProfile(latency=1.0, bandwidth=1.0))
    assert slow.transfer_cost(2, c0, c1) == 3.0


def test_device_type_profile_hook():
    class _DT:
        cost_profile = DeviceProfile(flops=1.0, elements=1.0, op_overhead=0.5)

    class _RT:
        device_types = {"CPU": _DT()}

    assert CostModel().profile("CPU", _RT()).op_overhead == 0.5
    assert CostModel().profile("CPU").flops == 5e10
    assert CostModel().profile("TPU").flops == CostModel().profile("CPU").flops  # unknown


# -- greedy placement ----------------------------------------------------------------
def test_independent_heavy_branches_go_to_different_devices():
    g, outs, total = _branches(2)
    placed, _ = _place(g, [total], _cpus(2))
    d0 = {placed[f"b0_mm{i}"] for i in range(2)} | {placed["x0"], placed["w0"]}
    d1 = {placed[f"b1_mm{i}"] for i in range(2)} | {placed["x1"], placed["w1"]}
    assert len(d0) == 1 and len(d1) == 1 and d0 != d1  # each branch whole, apart
    assert _short(placed["b0_mm0"]) == "CPU:0"  # first branch on the preferred device


def test_four_branches_balance_over_two_and_four_devices():
    g, outs, total = _branches(4)
    placed, _ = _place(g, [total], _cpus(2))
    count: dict[str, int] = {}
    for b in range(4):
        count[placed[f"b{b}_mm0"]] = count.get(placed[f"b{b}_mm0"], 0) + 1
    assert sorted(count.values()) == [2, 2]
    placed4, _ = _place(g, [total], _cpus(4))
    assert len({placed4[f"b{b}_mm1"] for b in range(4)}) == 4


def test_simple_placer_puts_everything_on_device_zero():
    g, outs, total = _branches(2)
    for kw in ({"placer": "simple"}, {"placer": None}, {"placer": ""}):
        placed, _ = _place(g, [total], _cpus(2), **kw)
        assert {_short(d) for d in placed.values()} == {"CPU:0"}


def test_a_chain_stays_on_one_device():
    g = tf.Graph()
    with g.as_default():
        h = tf.constant(np.ones((N, N), np.float32))
        w = tf.constant(np.ones((N, N), np.float32))
        for i in range(6):
            h = tf.matmul(h, w, name=f"mm{i}")
        y = tf.nn.relu(h)
    placed, ir = _place(g, [y], _cpus(4))
    assert {_short(d) for d in placed.values()} == {"CPU:0"}


def test_cheap_independent_ops_are_not_scattered():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(np.ones(16, np.float32))
        ys = [tf.sin(x * float(i)) for i in range(300)]
        y = tf.add_n(ys)
    placed, _ = _place(g, [y], _cpus(4))
    assert {_short(d) for d in placed.values()} == {"CPU:0"}


def test_expensive_transfers_keep_branches_together():
    g, outs, total = _branches(2)
    cm = CostModel(local_link=LinkProfile(latency=10.0, bandwidth=1e9))
    placed, _ = _place(g, [total], _cpus(2), cost_model=cm)
    assert {_short(d) for d in placed.values()} == {"CPU:0"}


def test_full_constraints_stay_and_others_avoid_the_busy_device():
    g, outs, total = _branches(2, pin={0: "/device:CPU:1"})
    placed, _ = _place(g, [total], _cpus(2))
    assert all(_short(placed[f"b0_mm{i}"]) == "CPU:1" for i in range(2))
    assert _short(placed["x0"]) == "CPU:1"
    assert all(_short(placed[f"b1_mm{i}"]) == "CPU:0" for i in range(2))


def test_partial_constraints_restrict_the_candidates():
    devices = _cpus(2, task=0) + _cpus(2, task=1)
    g, outs, total = _branches(3, pin={0: "/task:1", 1: "/task:1"})
    placed, _ = _place(g, [total], devices)
    task1 = {placed["b0_mm0"], placed["b1_mm0"]}
    assert all("/task:1/" in d for d in task1) and len(task1) == 2
    # the unconstrained branch and the sum stay with the preferred task
    assert "/task:0/" in placed["total"]


def test_colocation_groups_are_placed_as_a_unit():
    g = tf.Graph()
    with g.as_default():
        a = tf.matmul(tf.constant(np.ones((N, N), np.float32)),
                      tf.constant(np.ones((N, N), np.float32)), name="a")
        with tf.colocate_with(a):
            b = tf.matmul(tf.constant(np.ones((N, N), np.float32)),
                          tf.constant(np.ones((N, N), np.float32)), name="b")
        c = tf.matmul(tf.constant(np.ones((N, N), np.float32)),
                      tf.constant(np.ones((N, N), np.float32)), name="c")
        y = tf.add_n([a, b, c])
    placed, _ = _place(g, [y], _cpus(2))
    assert placed["a"] == placed["b"]
    assert placed["c"] != placed["a"]


def test_variables_and_their_ref_consumers_stay_together():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.ones((N, N), np.float32), name="v")
        u = tf.Variable(np.ones((N, N), np.float32), name="u")
        inc_v = tf.assign_add(v, tf.matmul(v, v), name="inc_v")
        inc_u = tf.assign_add(u, tf.matmul(u, u), name="inc_u")
    ir = extract_step_graph(g, [], [], [inc_v.op, inc_u.op])
    placed = {n: d.name for n, d in place(ir, _cpus(2), g._runtime,
                                           placer="cost_model").items()}
    assert placed["v"] == placed["inc_v"]
    assert placed["u"] == placed["inc_u"]
    assert placed["inc_u"] != placed["inc_v"]  # two heavy updates run side by side


def _towers():
    rng = np.random.default_rng(1)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [N, N], name="x")
        w1 = tf.Variable((rng.standard_normal((N, N)) / N).astype(np.float32), name="w1")
        w2 = tf.Variable((rng.standard_normal((N, N)) / N).astype(np.float32), name="w2")
        loss = tf.reduce_sum(tf.square(tf.matmul(x, w1, name="tower1"))) + \
            tf.reduce_sum(tf.square(tf.matmul(x, w2, name="tower2")))
        # ungated: TF's default gating (GATE_OP) colocates the gradient identities of
        # the final add with the loss's seed, and the cost placer then keeps both
        # towers' gradient chains on one device; these tests are about pins across steps
        step = tf.train.GradientDescentOptimizer(1e-3).minimize(
            loss, gate_gradients=tf.train.Optimizer.GATE_NONE)
        init = tf.global_variables_initializer()
    return g, x, w1, w2, loss, step, init


def test_stateful_nodes_keep_their_device_across_steps():
    g, x, w1, w2, loss, step, init = _towers()
    cm = CostModel()
    devs = _cpus(2)
    first = place(extract_step_graph(g, [], [], [init]), devs, g._runtime,
                  placer="cost_model", cost_model=cm)
    # the whole graph was placed once: each variable sits with the tower using it,
    # not wherever its (cheap) initializer happened to go
    assert first["w1"].name != first["w2"].name
    assert cm.pins["w1"] == first["w1"].name and cm.pins["w2"] == first["w2"].name
    train = place(extract_step_graph(g, [x], [], [step]), devs, g._runtime,
                  placer="cost_model", cost_model=cm)
    for v in ("w1", "w2"):
        assert train[v].name == first[v].name
        upd = f"GradientDescent/update_{v}/ApplyGradientDescent"
        assert train[upd].name == first[v].name  # ref consumers stay with the variable
    assert train["tower1"].name == first["w1"].name
    assert train["tower2"].name == first["w2"].name
    read = place(extract_step_graph(g, [], [w2.value()], []), devs, g._runtime,
                 placer="cost_model", cost_model=cm)
    assert read["w2"].name == first["w2"].name
    # without a cost model of its own the placer keeps one per graph and device set
    a = place(extract_step_graph(g, [], [w2.value()], []), devs, g._runtime,
              placer="cost_model")
    b = place(extract_step_graph(g, [x], [], [step]), devs, g._runtime,
              placer="cost_model")
    assert a["w2"].name == b["w2"].name


def test_an_unplaceable_op_elsewhere_in_the_graph_does_not_matter():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.ones((N, N), np.float32), name="v")
        with tf.device("/device:CPU:9"):
            tf.identity(v, name="elsewhere")  # not part of the step below
        y = tf.matmul(v, v, name="y")
    cm = CostModel()
    placed = place(extract_step_graph(g, [], [y], []), _cpus(2), g._runtime,
                   placer="cost_model", cost_model=cm)
    assert placed["v"].name == placed["y"].name == cm.pins["v"]


def test_resource_consumers_stay_with_the_resource():
    g = tf.Graph()
    with g.as_default():
        q = tf.queue.FIFOQueue(4, [tf.float32], shapes=[[N, N]], name="q")
        big = tf.matmul(tf.constant(np.ones((N, N), np.float32)),
                        tf.constant(np.ones((N, N), np.float32)), name="big")
        other = tf.matmul(tf.constant(np.ones((N, N), np.float32)),
                          tf.constant(np.ones((N, N), np.float32)), name="other")
        enq = q.enqueue([big + other], name="enq")
    ir = extract_step_graph(g, [], [], [enq])
    placed = {n: d.name for n, d in place(ir, _cpus(2), g._runtime,
                                           placer="cost_model").items()}
    assert placed["enq"] == placed["q"]
    assert placed["big"] != placed["other"]


def test_errors_and_soft_placement_with_the_cost_placer():
    g, outs, total = _branches(2, pin={0: "/device:CPU:7"})
    with pytest.raises(errors.InvalidArgumentError, match="Cannot assign a device for "
                       "operation .*CPU:7.*allow_soft_placement"):
        _place(g, [total], _cpus(2))
    placed, _ = _place(g, [total], _cpus(2), allow_soft=True)
    # the impossible request falls back; the greedy still separates the branches
    assert placed["b0_mm0"] != placed["b1_mm0"]
    assert {_short(placed["b0_mm0"]), _short(placed["b1_mm0"])} == {"CPU:0", "CPU:1"}


def test_simulated_makespan_improves():
    g, outs, total = _branches(4, depth=3)
    cm = CostModel()
    devs = _cpus(2)
    placed = place(_ir(g, [total]), devs, g._runtime, placer="cost_model", cost_model=cm)
    ir = _ir(g, [total])
    naive = simulate(ir, {n: devs[0] for n in ir.nodes}, cm).makespan
    greedy = simulate(ir, placed, cm).makespan
    mm = cm.estimate(ir.nodes["b0_mm0"], "CPU")
    assert naive == pytest.approx(12 * mm, rel=0.05)
    assert greedy < 0.6 * naive


# -- measured costs ------------------------------------------------------------------
def _two_cheap_branches():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [64], name="x")
        a = tf.sin(tf.sin(x, name="a0"), name="a1")
        b = tf.cos(tf.cos(x, name="b0"), name="b1")
        y = tf.add(a, b, name="y")
    return g, y


def test_measured_times_override_the_estimates():
    g, y = _two_cheap_branches()
    cm = CostModel()
    placed, ir = _place(g, [y], _cpus(2), cost_model=cm)
    assert {_short(d) for d in placed.values()} == {"CPU:0"}  # cheap: no reason to split
    dev = _cpus(1)[0].name
    stats = [NodeStat(n, "Sin" if n[0] == "a" else "Cos", dev, 1.0, 1.01, 0)
             for n in ("a0", "a1", "b0", "b1")]
    stats.append(NodeStat("_arg_x_0", "_Arg", dev, 0.0, 5.0, 0))  # ignored: not work
    assert cm.record_step_stats(stats, ir) == 4
    assert cm.measured(ir.nodes["a0"], "CPU") == pytest.approx(0.01)
    assert cm.compute_cost(ir.nodes["a0"], "CPU") == pytest.approx(0.01)
    v = cm.version
    placed, _ = _place(g, [y], _cpus(2), cost_model=cm)
    assert placed["a0"] == placed["a1"] and placed["b0"] == placed["b1"]
    assert placed["a0"] != placed["b0"]
    # median of the history; another device type scales by the estimates' ratio
    cm.record("a0", CostModel.shape_key(ir.nodes["a0"]), "CPU", 0.03)
    cm.record("a0", CostModel.shape_key(ir.nodes["a0"]), "CPU", 0.02)
    assert cm.version == v + 2
    assert cm.measured(ir.nodes["a0"], "CPU") == pytest.approx(0.02)
    ratio = cm.estimate(ir.nodes["a0"], "GPU") / cm.estimate(ir.nodes["a0"], "CPU")
    assert cm.compute_cost(ir.nodes["a0"], "GPU") == pytest.approx(0.02 * ratio)
    cm.clear_measurements()
    assert cm.measured(ir.nodes["a0"], "CPU") is None


def test_measurements_are_keyed_by_shape():
    cm = CostModel()
    g1, y1 = _two_cheap_branches()
    n1 = _ir(g1, [y1]).nodes["a0"]
    cm.record_step_stats([NodeStat("a0", "Sin", "/device:CPU:0", 0.0, 0.5, 0)],
                         {"a0": n1})
    g2 = tf.Graph()
    with g2.as_default():
        tf.sin(tf.constant(np.ones(128, np.float32)), name="a0")
    n2 = _node(g2, "a0")
    assert cm.measured(n1, "CPU") == 0.5
    assert cm.measured(n2, "CPU") is None  # other shapes: the estimate again
    cm.record_step_stats([NodeStat("a0", "Sin", "/device:CPU:0", 0.0, 0.25, 0)])
    assert cm.measured(n2, "CPU") == 0.25  # recorded without shapes: matches any


def test_record_from_run_metadata_of_a_traced_run():
    g, y = _two_cheap_branches()
    md = tf.RunMetadata()
    x = g.get_tensor_by_name("x:0")
    no_passes = tf.ConfigProto(graph_options=tf.GraphOptions(
        optimizer_options=tf.OptimizerOptions(opt_level=tf.OptimizerOptions.L0)))
    with tf.Session(graph=g, config=no_passes) as s:
        s.run(y, {x: np.ones(64, np.float32)},
              options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
              run_metadata=md)
    cm = CostModel()
    ir = _ir(g, [y], [x])
    assert cm.record_step_stats(md, ir) == 5  # the _Arg is not counted
    for name in ("a0", "a1", "b0", "b1", "y"):
        t = cm.measured(ir.nodes[name], "CPU")
        assert t is not None and 0.0 <= t < 1.0


# -- configuration -------------------------------------------------------------------
def test_placer_from_config():
    assert placer_from_config(None) == "simple"
    assert placer_from_config(tf.ConfigProto()) == "simple"
    cfg = tf.ConfigProto()
    cfg.experimental.placer = "cost_model"
    assert placer_from_config(cfg) == "cost_model"
    again = tf.ConfigProto.FromString(cfg.SerializeToString())
    assert again.experimental.placer == "cost_model"
    field = tf.ConfigProto.Experimental.DESCRIPTOR.fields_by_name["placer"]
    assert field.number == 1001
    cfg.experimental.placer = "fastest"
    with pytest.raises(errors.InvalidArgumentError, match="Unknown placer 'fastest'"):
        placer_from_config(cfg)


def test_place_reads_the_placer_from_the_config():
    g, outs, total = _branches(2)
    cfg = tf.ConfigProto()
    cfg.experimental.placer = "cost_model"
    placed, _ = _place(g, [total], _cpus(2), placer=None, config=cfg)
    assert placed["b0_mm0"] != placed["b1_mm0"]
    cfg.experimental.placer = "simple"
    placed, _ = _place(g, [total], _cpus(2), placer=None, config=cfg)
    assert placed["b0_mm0"] == placed["b1_mm0"]
    with pytest.raises(errors.InvalidArgumentError, match="Unknown placer"):
        _place(g, [total], _cpus(2), placer="greedy")


def test_session_with_the_cost_placer_spreads_and_computes_correctly():
    rng = np.random.default_rng(0)
    ws = [(rng.standard_normal((N, N)) / 16).astype(np.float32) for _ in range(6)]
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [N, N], name="x")
        outs = []
        for b in range(3):
            h = x
            for i in range(2):
                h = tf.matmul(h, tf.constant(ws[2 * b + i]), name=f"b{b}_mm{i}")
            outs.append(tf.tanh(h))
        y = tf.add_n(outs, name="y")
    cfg = tf.ConfigProto(device_count={"CPU": 3, "EXAMPLE": 0})  # CPUs only
    cfg.experimental.placer = "cost_model"
    feed = rng.standard_normal((N, N)).astype(np.float32)
    expect = sum(np.tanh(feed @ ws[2 * b] @ ws[2 * b + 1]) for b in range(3))
    with tf.Session(graph=g, config=cfg) as s:
        placed = s.placement(y, [x])
        assert len({placed[f"b{b}_mm0"] for b in range(3)}) == 3
        assert len(set(placed.values())) == 3
        for _ in range(3):
            np.testing.assert_allclose(s.run(y, {x: feed}), expect, rtol=1e-4, atol=1e-4)
    cfg.experimental.placer = "nonsense"
    with tf.Session(graph=g, config=cfg) as s:
        with pytest.raises(errors.InvalidArgumentError, match="Unknown placer"):
            s.run(y, {x: feed})


def test_session_cost_placer_with_variables_and_training_step():
    rng = np.random.default_rng(1)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [N, N], name="x")
        w1 = tf.Variable((rng.standard_normal((N, N)) / N).astype(np.float32), name="w1")
        w2 = tf.Variable((rng.standard_normal((N, N)) / N).astype(np.float32), name="w2")
        loss = tf.reduce_sum(tf.square(tf.matmul(x, w1))) + \
            tf.reduce_sum(tf.square(tf.matmul(x, w2)))
        step = tf.train.GradientDescentOptimizer(1e-3).minimize(loss)
        init = tf.global_variables_initializer()
    cfg = tf.ConfigProto(device_count={"CPU": 2, "EXAMPLE": 0})
    cfg.experimental.placer = "cost_model"
    feed = rng.standard_normal((N, N)).astype(np.float32)
    with tf.Session(graph=g, config=cfg) as s, tf.Session(graph=g) as ref:
        s.run(init)
        ref.run(init)
        placed = s.placement(step, [x])
        assert len(set(placed.values())) == 2  # the heavy work runs side by side:
        # the matmuls (forward, and the weight gradient of each; the gradients for the
        # fed x, which only GATE_OP's gate waits for, are dropped as TF's grappler drops
        # them) are spread over the two devices
        mm = [d for n, d in placed.items() if n.split("/")[-1].startswith("MatMul")]
        assert len(mm) == 4 and len(set(mm)) == 2
        for _ in range(3):
            s.run(step, {x: feed})
            ref.run(step, {x: feed})
        np.testing.assert_allclose(s.run(loss, {x: feed}), ref.run(loss, {x: feed}),
                                   rtol=1e-5)
        np.testing.assert_allclose(s.run(w1), ref.run(w1), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(s.run(w2), ref.run(w2), rtol=1e-5, atol=1e-7)
