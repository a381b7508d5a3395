"""The standard graph passes: constant folding, CSE, pruning, elementwise fusion."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors
from flowrt import testing as ft
from flowrt.ir import GraphIR, extract_step_graph
from flowrt.passes import GraphPass
from flowrt.plugins.kernels.standard import passes as P
from flowrt.proto.rewriter_config_pb2 import RewriterConfig
from flowrt.runtime import Runtime, default_runtime

PASS_NAMES = ["constant_folding", "common_subgraph_elimination", "dependency_optimization",
              "model_pruning", "remapping", "elementwise_fusion"]


# -- helpers ---------------------------------------------------------------------------
def step_ir(fetches: list[Any], feeds: list[Any] = (), targets: list[Any] = ()) -> GraphIR:
    return extract_step_graph(tf.get_default_graph(), list(feeds), list(fetches),
                              list(targets))


def ctx_for(ir: GraphIR, config: Any = None, runtime: Any = None) -> SimpleNamespace:
    return SimpleNamespace(runtime=runtime or default_runtime(), config=config,
                           fetches=list(ir.fetches), feeds=list(ir.feeds),
                           targets=list(ir.targets), device_types=frozenset({"CPU"}))


def run_pass(fn: Callable[[Any, Any], None], ir: GraphIR, config: Any = None) -> GraphIR:
    fn(ir, ctx_for(ir, config))
    return ir


def all_passes(ir: GraphIR, config: Any = None) -> GraphIR:
    for p in sorted(P.graph_passes(), key=lambda p: p.order):
        p.run(ir, ctx_for(ir, config))
    return ir


def dangling(ir: GraphIR) -> list[str]:
    return [f"{n.name}<-{s}" for n in ir.nodes.values()
            for s in [x for x, _ in n.inputs] + n.control_inputs if s not in ir.nodes]


def bits(v: Any) -> tuple[str, tuple[int, ...], bytes]:
    a = np.asarray(v)
    if a.dtype.kind == "O":
        return a.dtype.str, a.shape, repr(a.tolist()).encode()
    return a.dtype.str, a.shape, np.ascontiguousarray(a).tobytes()


@pytest.fixture(autouse=True)
def _passes_on(monkeypatch):
    """These tests decide themselves which passes run."""
    monkeypatch.delenv("FLOWRT_DISABLE_PASSES", raising=False)


@pytest.fixture()
def g():
    graph = tf.Graph()
    with graph.as_default():
        yield graph


def rewrite_config(**fields: Any) -> Any:
    cfg = tf.ConfigProto()
    for k, v in fields.items():
        setattr(cfg.graph_options.rewrite_options, k, v)
    return cfg


# -- registration ------------------------------------------------------------------------
def test_passes_are_registered_in_order_by_the_standard_plugin():
    rt = default_runtime()
    ours = [p for p in rt.graph_passes if p.plugin == "standard"]
    assert [p.name for p in ours] == PASS_NAMES
    assert [p.order for p in ours] == [10, 20, 30, 150, 190, 200]
    assert all(p.enabled_by_default for p in ours)
    # each field of RewriterConfig named like a pass is a Toggle, OFF switches it off
    rc = RewriterConfig()
    for name in ("constant_folding", "common_subgraph_elimination", "dependency_optimization",
                 "elementwise_fusion"):
        assert getattr(rc, name) == RewriterConfig.DEFAULT
    assert RewriterConfig.DESCRIPTOR.fields_by_name["elementwise_fusion"].number == 1000
    assert RewriterConfig.DESCRIPTOR.fields_by_name["constant_folding"].number == 3


@pytest.mark.parametrize("name", PASS_NAMES)
def test_each_pass_passes_the_conformance_check(name):
    p = next(p for p in default_runtime().graph_passes if p.name == name)
    report = ft.check_graph_pass(p)
    assert any("computes the same values" in c for c in report.checked)


# -- constant folding ------------------------------------------------------------------------
def test_folding_replaces_constant_subgraphs_in_place(g):
    x = tf.placeholder(tf.float32, [2], name="x")
    c = tf.constant([1.0, 2.0], name="c")
    m = tf.multiply(c, 3.0, name="m")
    s = tf.sin(m, name="s")
    y = tf.add(x, s, name="y")
    ir = run_pass(P.constant_folding, step_ir([y], [x]))
    assert ir.nodes["m"].type == "Const" and ir.nodes["s"].type == "Const"
    assert ir.nodes["s"].inputs == [] and ir.nodes["s"].out_dtypes == [tf.float32]
    want = np.sin(np.multiply(np.array([1.0, 2.0], np.float32), np.float32(3.0)))
    assert bits(ir.nodes["s"].node_attrs["value"]) == bits(want)
    assert ir.nodes["y"].type == "AddV2" or ir.nodes["y"].type == "Add"
    assert ir.nodes["y"].inputs == [("_arg_x_0", 0), ("s", 0)]
    run_pass(P.model_pruning, ir)
    assert sorted(ir.nodes) == ["_arg_x_0", "s", "y"]


def test_fetched_and_target_nodes_are_preserved(g):
    """As TF's grappler (its nodes to preserve): a fetched node stays the node the user
    named; what feeds it is folded."""
    c = tf.constant(2.0, name="c")
    a = tf.square(c, name="a")
    b = tf.exp(a, name="b")
    ir = all_passes(step_ir([b], targets=[a.op]))
    assert ir.nodes["b"].type == "Exp" and ir.nodes["a"].type == "Square"
    with tf.Session() as s:
        assert bits(s.run(b)) == bits(np.exp(np.square(np.float32(2.0))))


def test_folding_propagates_control_inputs(g):
    v = tf.Variable(1.0, name="v")
    inc = tf.assign_add(v, 1.0, name="inc")
    with tf.control_dependencies([inc]):
        c = tf.constant(5.0, name="c")
    d = tf.multiply(c, 2.0, name="d")
    out = tf.add(d, 0.0, name="out")
    ir = run_pass(P.model_pruning, run_pass(P.constant_folding, step_ir([out])))
    assert ir.nodes["d"].type == "Const" and "inc" in ir.nodes["d"].control_inputs
    assert "inc" in ir.nodes
    with tf.Session() as s:
        s.run(v.initializer)
        assert s.run(out) == 10.0
        assert s.run(out) == 10.0
        assert s.run(v) == 3.0  # the side effect still runs on every step


def test_folding_multi_output_nodes_rewires_each_used_output(g):
    x = tf.placeholder(tf.int32, [], name="x")
    parts = tf.unstack(tf.constant([[1, 2], [3, 4], [5, 6]]), name="un")
    y = tf.add(parts[0], x, name="y")
    z = tf.multiply(parts[2], x, name="z")
    ir = run_pass(P.model_pruning, run_pass(P.constant_folding, step_ir([y, z], [x])))
    assert "un" not in ir.nodes and not dangling(ir)
    (src_y, _), (src_z, _) = ir.nodes["y"].inputs[0], ir.nodes["z"].inputs[0]
    assert ir.nodes[src_y].type == "Const" and ir.nodes[src_z].type == "Const"
    assert ir.nodes[src_y].node_attrs["value"].tolist() == [1, 2]
    assert ir.nodes[src_z].node_attrs["value"].tolist() == [5, 6]
    with tf.Session() as s:
        a, b = s.run([y, z], {x: 10})
    assert a.tolist() == [11, 12] and b.tolist() == [50, 60]


def test_folding_respects_the_size_limit(g):
    big = tf.fill([64, 64], 1.5, name="big")  # 16 KiB of float32
    y = tf.add(tf.placeholder(tf.float32, [64, 64], name="x"), big, name="y")
    cfg = tf.ConfigProto()
    cfg.graph_options.optimizer_options.max_folded_constant_in_bytes = 1000
    ir = run_pass(P.constant_folding, step_ir([y], [g.get_tensor_by_name("x:0")]), cfg)
    assert ir.nodes["big"].type == "Fill"
    ir = run_pass(P.constant_folding, step_ir([y], [g.get_tensor_by_name("x:0")]))
    assert ir.nodes["big"].type == "Const"
    assert ir.nodes["big"].node_attrs["value"].shape == (64, 64)


def test_folding_errors_are_deferred_to_run_time(g):
    q = tf.floordiv(tf.constant([4, 5]), tf.constant([2, 0]), name="q")
    out = tf.add(q, 1, name="out")
    ir = run_pass(P.constant_folding, step_ir([out]))
    assert ir.nodes["q"].type == "FloorDiv"
    with tf.Session() as s:
        with pytest.raises(errors.InvalidArgumentError, match=r"division by zero[\s\S]*node q "):
            s.run(out)


def test_stateful_ops_are_never_folded_or_merged(g):
    shape = tf.constant([3], name="shape")
    r1 = tf.random_uniform(shape, seed=1, name="r1")
    r2 = tf.random_uniform(shape, seed=1, name="r2")
    y = tf.add(tf.multiply(r1, 2.0), tf.multiply(r2, 2.0), name="y")
    v = tf.Variable(0.0, name="v")
    inc1 = tf.assign_add(v, 1.0, name="inc1")
    inc2 = tf.assign_add(v, 1.0, name="inc2")
    ir = all_passes(step_ir([y], targets=[inc1.op, inc2.op]))
    kinds = {n: node.type for n, node in ir.nodes.items()}
    assert sorted(n for n, t in kinds.items() if t == "RandomUniform") == [
        "r1/RandomUniform", "r2/RandomUniform"]
    assert kinds["inc1"] == kinds["inc2"] == "AssignAdd"
    with tf.Session() as s:
        s.run(v.initializer)
        a = s.run(y)
        b = s.run(y)
        assert not np.array_equal(a, b)  # the random ops keep their state
        s.run([inc1, inc2])
        assert s.run(v) == 2.0


def test_variable_reads_are_not_folded_or_merged(g):
    v = tf.Variable([1.0, 2.0], name="v")
    r1 = tf.multiply(v, 2.0, name="r1")
    r2 = tf.multiply(v, 2.0, name="r2")
    with tf.control_dependencies([r1]):
        upd = tf.assign(v, [5.0, 5.0], name="upd")
    ir = all_passes(step_ir([r1, r2]))
    assert {"r1", "r2"} <= set(ir.nodes)
    with tf.Session() as s:
        s.run(v.initializer)
        s.run(upd)
        a, b = s.run([r1, r2])
    assert a.tolist() == b.tolist() == [10.0, 10.0]


def test_feeding_an_intermediate_tensor_cuts_the_folded_graph(g):
    c = tf.constant(3.0, name="c")
    m = tf.multiply(c, c, name="m")
    out = tf.add(m, 1.0, name="out")
    with tf.Session() as s:
        assert s.run(out) == 10.0
        assert s.run(out, {m: 100.0}) == 101.0
        assert s.run(out, {c: 2.0}) == 5.0
        assert s.run([m, out], {m: 7.0}) == [7.0, 8.0]


# -- CSE -------------------------------------------------------------------------------
def test_cse_merges_identical_nodes_and_rewires_consumers(g):
    x = tf.placeholder(tf.float32, [3], name="x")
    a = tf.sin(x, name="a")
    b = tf.sin(x, name="b")
    c1 = tf.constant(2.0, name="c1")
    c2 = tf.constant(2.0, name="c2")
    ma = tf.multiply(a, c1, name="ma")
    mb = tf.multiply(b, c2, name="mb")  # identical once a~b and c1~c2 are merged
    out = tf.add(ma, mb, name="out")
    ir = run_pass(P.common_subgraph_elimination, step_ir([out], [x]))
    assert {"b", "c2", "mb"}.isdisjoint(ir.nodes) and not dangling(ir)
    assert ir.nodes["out"].inputs == [("ma", 0), ("ma", 0)]
    assert ir.replaced == {"b": "a", "c2": "c1", "mb": "ma"}


@pytest.mark.parametrize("variant", ["attr", "const_bits", "const_dtype", "control",
                                     "device", "input"])
def test_cse_keeps_nodes_that_differ(g, variant):
    x = tf.placeholder(tf.float32, [2, 3], name="x")
    z = tf.placeholder(tf.float32, [2, 3], name="z")
    if variant == "attr":
        a = tf.reduce_sum(x, 1, keepdims=True, name="a")
        b = tf.reduce_sum(x, 1, keepdims=False, name="b")
        out = tf.add(a, tf.expand_dims(b, 1))
    elif variant == "const_bits":  # 0.0 == -0.0 as floats, but not as bits
        a = tf.constant(0.0, name="a")
        b = tf.constant(-0.0, name="b")
        out = tf.add(x * a, x * b)
    elif variant == "const_dtype":
        a = tf.constant(1, tf.int32, name="a")
        b = tf.constant(1, tf.int64, name="b")
        out = tf.add(x * tf.cast(a, tf.float32), x * tf.cast(b, tf.float32))
    elif variant == "control":
        a = tf.sin(x, name="a")
        with tf.control_dependencies([z.op]):
            b = tf.sin(x, name="b")
        out = tf.add(a, b)
    elif variant == "device":
        a = tf.sin(x, name="a")
        with tf.device("/cpu:0"):
            b = tf.sin(x, name="b")
        out = tf.add(a, b)
    else:
        a = tf.sin(x, name="a")
        b = tf.sin(z, name="b")
        out = tf.add(a, b)
    ir = run_pass(P.common_subgraph_elimination, step_ir([out], [x, z]))
    assert {"a", "b"} <= set(ir.nodes)


def test_cse_keeps_fetched_nodes_and_merges_into_them(g):
    x = tf.placeholder(tf.float32, [2], name="x")
    a = tf.cos(x, name="a")
    b = tf.cos(x, name="b")
    c = tf.cos(x, name="c")
    out = tf.add(a, c, name="out")
    ir = run_pass(P.common_subgraph_elimination, step_ir([b, out], [x]))
    assert "b" in ir.nodes and {"a", "c"}.isdisjoint(ir.nodes)
    assert ir.nodes["out"].inputs == [("b", 0), ("b", 0)]
    assert ir.fetches == [("b", 0), ("out", 0)]
    # two fetched duplicates both stay: no step returns one array for two fetches
    ir = run_pass(P.common_subgraph_elimination, step_ir([a, b], [x]))
    assert {"a", "b"} <= set(ir.nodes)
    with tf.Session() as s:
        va, vb, vo = s.run([a, b, out], {x: [0.0, 1.0]})
        assert va is not vb and bits(va) == bits(vb)
        va[0] = 42.0
        assert vb[0] == 1.0
        assert bits(vo) == bits(np.cos(np.float32([0.0, 1.0])) * 2)


# -- pruning -----------------------------------------------------------------------------
def test_pruning_keeps_feeds_fetches_and_targets(g):
    x = tf.placeholder(tf.float32, [], name="x")
    unused = tf.placeholder(tf.float32, [], name="unused")
    c = tf.constant(1.0, name="c")
    y = tf.add(tf.multiply(c, 2.0, name="m"), x, name="y")
    t = tf.no_op(name="t")
    ir = run_pass(P.constant_folding, step_ir([y], [x, unused], [t]))
    assert "c" in ir.nodes
    run_pass(P.model_pruning, ir)
    assert "c" not in ir.nodes
    assert {"_arg_x_0", "_arg_unused_0", "y", "m", "t"} <= set(ir.nodes)
    ir = run_pass(P.constant_folding, step_ir([y], [x, unused], [t]))
    run_pass(P.model_pruning, ir, rewrite_config(disable_model_pruning=True))
    assert "c" in ir.nodes


# -- fusion ----------------------------------------------------------------------------
def test_fusion_replaces_a_chain_by_one_node_named_like_its_end(g):
    x = tf.placeholder(tf.float32, [3], name="x")
    y = tf.abs(tf.exp(tf.sin(x, name="s"), name="e"), name="a")
    out = tf.reduce_sum(y, name="out")
    ir = run_pass(P.elementwise_fusion, step_ir([out], [x]))
    node = ir.nodes["a"]
    assert node.type == "_FusedElementwise" and {"s", "e"}.isdisjoint(ir.nodes)
    assert [m.node.name for m in node.node_attrs["ops"]] == ["s", "e", "a"]
    assert [m.args for m in node.node_attrs["ops"]] == [(("in", 0),), (("tmp", 0),),
                                                        (("tmp", 1),)]
    assert node.inputs == [("_arg_x_0", 0)] and node.node_attrs["Tin"] == [tf.float32]
    assert ir.nodes["out"].inputs[0] == ("a", 0)
    assert ir.replaced == {"s": "a", "e": "a"}


def test_fusion_of_a_diamond_with_shared_and_external_inputs(g):
    x = tf.placeholder(tf.float32, [4], name="x")
    w = tf.placeholder(tf.float32, [4], name="w")
    s = tf.sin(x, name="s")
    m = tf.multiply(s, s, name="m")
    c = tf.cos(s, name="c")
    out = tf.add(tf.add(m, c, name="mc"), w, name="out")
    ir = run_pass(P.elementwise_fusion, step_ir([out], [x, w]))
    assert [n for n in ir.nodes if not n.startswith("_arg")] == ["out"]
    ops = ir.nodes["out"].node_attrs["ops"]
    # members run in the order the unfused step would run them
    order = [n.name for n in step_ir([out], [x, w]).topo_sort()]
    assert [m.node.name for m in ops] == [n for n in order if n in "s m c mc out".split()]
    assert ir.nodes["out"].inputs == [("_arg_x_0", 0), ("_arg_w_0", 0)]
    xs, ws = np.float32([0.5, -1.0, 2.0, 3.0]), np.float32([1, 2, 3, 4])
    with tf.Session() as sess:
        got = sess.run(out, {x: xs, w: ws})
    sx = np.sin(xs)
    assert bits(got) == bits(np.add(np.add(np.multiply(sx, sx), np.cos(sx)), ws))


def test_fusion_stops_at_fetches_shared_values_devices_and_other_ops(g):
    x = tf.placeholder(tf.float32, [3], name="x")
    a = tf.sin(x, name="a")
    b = tf.exp(a, name="b")          # fetched: ends a region
    c = tf.square(b, name="c")
    d = tf.negative(c, name="d")     # c also feeds `other`: c ends a region
    other = tf.reduce_sum(c, name="other")
    with tf.device("/cpu:0"):
        e = tf.abs(d, name="e")      # another requested device
    f = tf.tanh(e, name="f")
    out = tf.add(f, other, name="out")
    ir = run_pass(P.elementwise_fusion, step_ir([b, out], [x]))
    groups = {n: [m.node.name for m in node.node_attrs["ops"]]
              for n, node in ir.nodes.items() if node.type == "_FusedElementwise"}
    assert groups == {"b": ["a", "b"], "out": ["f", "out"]}
    assert "c" in ir.nodes and ir.nodes["c"].type == "Square"
    assert ir.nodes["d"].type == "Neg" and ir.nodes["e"].type == "Abs"


def test_colocation_targets_keep_their_names(g):
    x = tf.placeholder(tf.float32, [3], name="x")
    a = tf.sin(x, name="a")
    b = tf.exp(a, name="b")
    with tf.colocate_with(a):
        d = tf.cos(x, name="d")
    a2 = tf.sin(x, name="a2")  # a duplicate of a: merges into it, a stays
    out = tf.add(tf.add(b, d, name="bd"), a2, name="out")
    ir = all_passes(step_ir([out], [x]))
    assert ir.nodes["a"].type == "Sin" and ir.nodes["d"].type == "Cos"
    assert "a2" not in ir.nodes and "b" not in ir.nodes  # merged; fused into "out"
    assert [m.node.name for m in ir.nodes["out"].node_attrs["ops"]] == ["b", "bd", "out"]
    with tf.Session() as s:
        xs = np.float32([0.0, 0.5, 1.0])
        got = s.run(out, {x: xs})
        where = s.placement(out, [x])
    assert where["a"] == where["d"]
    assert bits(got) == bits(np.add(np.add(np.exp(np.sin(xs)), np.cos(xs)), np.sin(xs)))


def test_fused_kernel_errors_name_the_member_node(g):
    x = tf.placeholder(tf.int32, [2], name="x")
    z = tf.placeholder(tf.int32, [2], name="z")
    q = tf.floordiv(tf.add(x, 1, name="inc"), z, name="q")
    out = tf.negative(tf.abs(q, name="ab"), name="out")
    with tf.Session() as s:
        assert "q" not in s.placement(out, [x, z])  # fused into "out"
        assert s.run(out, {x: [3, 5], z: [2, 3]}).tolist() == [-2, -2]
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"Integer division by zero[\s\S]*\[\[node q \(op FloorDiv\)"):
            s.run(out, {x: [3, 5], z: [2, 0]})
        opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        with pytest.raises(errors.InvalidArgumentError, match=r"\[\[node q \(op FloorDiv\)"):
            s.run(out, {x: [3, 5], z: [0, 1]}, options=opts)


def test_fused_results_identical_with_traced_dataflow_steps(g):
    x = tf.placeholder(tf.float64, [5], name="x")
    y = x
    for i in range(30):
        y = tf.sigmoid(tf.multiply(y, 1.5 + i)) if i % 2 else tf.tanh(y - 0.25)
    xs = np.linspace(-2, 2, 5)
    opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    with tf.Session() as s:
        fused = s.run(y, {x: xs})
        traced = s.run(y, {x: xs}, options=opts)
        n_nodes = len(s.placement(y, [x]))
    cfg = rewrite_config(elementwise_fusion=RewriterConfig.OFF)
    with tf.Session(config=cfg) as s:
        plain = s.run(y, {x: xs})
        assert len(s.placement(y, [x])) > n_nodes
    assert bits(fused) == bits(plain) == bits(traced)


# -- switches ------------------------------------------------------------------------------
def _switch_graph() -> tuple[Any, Any]:
    """A graph where each pass leaves a visible mark on the placed node names."""
    x = tf.placeholder(tf.float32, [3], name="x")
    c = tf.constant([1.0, 2.0, 3.0], name="c")
    k = tf.multiply(c, 2.0, name="k")                   # folded; then c is dead
    dep = tf.negative(x, name="dep")                    # only waited on: dropped
    with tf.control_dependencies([dep]):
        kx = tf.concat([k, x], 0, name="kx")
    a = tf.reduce_sum(x, name="a")
    b = tf.reduce_sum(x, name="b")                      # merged into a
    y = tf.exp(tf.add(tf.add(a, b, name="ab"), kx, name="abk"), name="y")  # fused
    return x, y


def _placed_names(x: Any, y: Any, config: Any = None) -> set[str]:
    with tf.Session(config=config) as s:
        xs = np.float32([0.1, 0.2, 0.3])
        out = s.run(y, {x: xs})
        r = np.sum(xs)
        want = np.exp(np.add(np.add(r, r), np.concatenate([np.float32([2, 4, 6]), xs])))
        assert bits(out) == bits(want)
        return set(s.placement(y, [x]))


@pytest.mark.parametrize("name", [n for n in PASS_NAMES if n != "remapping"])  # (below)
def test_each_pass_can_be_switched_off_by_env_and_config(g, name, monkeypatch):
    x, y = _switch_graph()
    on = _placed_names(x, y)
    assert {"a", "k", "y"} <= on and {"b", "c", "ab", "abk"}.isdisjoint(on)
    monkeypatch.setenv("FLOWRT_DISABLE_PASSES", name)
    by_env = _placed_names(x, y)
    monkeypatch.delenv("FLOWRT_DISABLE_PASSES")
    field = {"model_pruning": ("disable_model_pruning", True)}.get(
        name, (name, RewriterConfig.OFF))
    by_config = _placed_names(x, y, rewrite_config(**{field[0]: field[1]}))
    assert by_env == by_config != on
    expect_back = {"constant_folding": {"c"}, "common_subgraph_elimination": {"b"},
                   "model_pruning": {"c"}, "elementwise_fusion": {"ab", "abk"},
                   "dependency_optimization": {"dep"}}[name]
    assert expect_back <= by_env


def test_global_switches_turn_every_pass_off(g, monkeypatch):
    x, y = _switch_graph()
    names = []
    cfg = tf.ConfigProto()
    cfg.graph_options.optimizer_options.opt_level = tf.OptimizerOptions.L0
    names.append(_placed_names(x, y, cfg))
    names.append(_placed_names(x, y, rewrite_config(disable_meta_optimizer=True)))
    monkeypatch.setenv("FLOWRT_DISABLE_PASSES", "all")
    names.append(_placed_names(x, y))
    assert names[0] == names[1] == names[2]
    assert {"c", "k", "a", "b", "ab", "abk", "y", "dep"} <= names[0]
    monkeypatch.setenv("FLOWRT_DISABLE_PASSES", "constant_folding, elementwise_fusion")
    partial = _placed_names(x, y)
    assert {"c", "k", "a", "ab", "abk", "y"} <= partial and "b" not in partial


def test_remapping_off_also_switches_fusion_off(g):
    x, y = _switch_graph()
    assert {"ab", "abk"} <= _placed_names(x, y, rewrite_config(remapping=RewriterConfig.OFF))


# -- dependency optimization -------------------------------------------------------------
def test_unread_stateless_nodes_behind_control_edges_become_noops_and_are_bypassed(g):
    """GATE_OP's tuple makes the filter gradient wait on the input gradient of the
    first layer, whose value nobody reads: like TF's grappler, the pass turns it into a
    NoOp (its inputs become control inputs) and bypasses that NoOp."""
    x = tf.placeholder(tf.float32, [2, 4, 4, 1], name="x")
    w = tf.constant(np.ones((3, 3, 1, 2), np.float32), name="w")
    y = tf.nn.conv2d(x, w, [1, 1, 1, 1], "SAME", name="conv")
    dx, dw = tf.gradients(tf.reduce_sum(y), [x, w], gate_gradients=True)
    loss_dw = tf.reduce_sum(dw, name="out")
    ir = run_pass(P.dependency_optimization, step_ir([loss_dw], [x]))
    types = {n.type for n in ir.nodes.values()}
    assert "Conv2DBackpropInput" not in types and "Conv2DBackpropFilter" in types
    assert not dangling(ir)
    # the values are the same with the pass on and off
    xs = np.arange(32, dtype=np.float32).reshape(2, 4, 4, 1)
    outs = []
    for cfg in (None, rewrite_config(dependency_optimization=RewriterConfig.OFF)):
        with tf.Session(config=cfg) as s:
            outs.append(s.run(loss_dw, {x: xs}))
    assert bits(outs[0]) == bits(outs[1])


def test_dependency_optimization_keeps_effects_fetches_and_stateful_nodes(g):
    x = tf.placeholder(tf.float32, [3], name="x")
    chk = tf.debugging.check_numerics(x, "bad", name="chk")       # a check: kept
    rnd = tf.random_uniform([3], name="rnd")                       # stateful: kept
    sq = tf.square(x, name="sq")                                   # fetched: kept
    neg = tf.negative(x, name="neg")                               # dropped
    with tf.control_dependencies([chk, rnd, neg]):
        out = tf.identity(x, name="out")
    ir = run_pass(P.dependency_optimization, step_ir([out, sq], [x]))
    assert ir.nodes["chk"].type == "CheckNumerics"
    # the draw stays (stateful); the scaling after it, unread, goes
    assert ir.nodes["rnd/RandomUniform"].type == "RandomUniform"
    assert "rnd" not in ir.nodes and "neg" not in ir.nodes
    assert ir.nodes["sq"].type == "Square"
    assert {"chk", "rnd/RandomUniform"} <= set(ir.nodes["out"].control_inputs)
    with tf.Session() as s:
        with pytest.raises(errors.InvalidArgumentError, match="bad"):
            s.run(out, {x: np.float32([1, np.nan, 2])})


# -- third-party passes ----------------------------------------------------------------
def test_third_party_pass_runs_in_order_with_the_standard_ones():
    seen: dict[str, list[str]] = {}

    def recorder(tag: str) -> Callable[[Any, Any], None]:
        def run(ir: Any, ctx: Any) -> None:
            seen[tag] = sorted(f"{n}:{node.type}" for n, node in ir.nodes.items())
        return run

    plugin = SimpleNamespace(flowrt_graph_passes=tf.hookimpl(lambda: [
        GraphPass("early_probe", recorder("early"), order=5),
        GraphPass("middle_probe", recorder("middle")),
        GraphPass("late_probe", recorder("late"), order=500)]))
    rt = Runtime(autoload=False, plugins={"probe": plugin})
    assert [p.name for p in rt.graph_passes] == [
        "early_probe", "constant_folding", "common_subgraph_elimination",
        "dependency_optimization", "middle_probe",
        "model_pruning", "remapping", "elementwise_fusion", "late_probe"]
    graph = tf.Graph(runtime=rt)
    with graph.as_default():
        x = tf.placeholder(tf.float32, [2], name="x")
        k = tf.multiply(tf.constant(2.0, name="c"), 3.0, name="k")
        y = tf.exp(tf.sin(x, name="s") + k, name="y")
    with tf.Session(graph=graph) as s:
        assert bits(s.run(y, {x: [0.0, 1.0]})) == bits(
            np.exp(np.sin(np.float32([0.0, 1.0])) + np.float32(6.0)))
    assert "k:Mul" in seen["early"] and "c:Const" in seen["early"]
    assert "k:Const" in seen["middle"] and "s:Sin" in seen["middle"]
    assert "y:_FusedElementwise" in seen["late"] and "c:Const" not in seen["late"]


# -- random graphs: identical results with and without the passes ------------------------
_UNARY = ["sin", "exp", "abs", "negative", "square", "tanh", "sigmoid", "sqrt", "log",
          "floor", "cos"]
_BINARY = ["add", "subtract", "multiply", "maximum", "minimum", "truediv"]
_INT_UNARY = ["abs", "negative", "square"]
_INT_BINARY = ["add", "subtract", "multiply", "maximum", "floordiv", "floormod"]


@st.composite
def programs(draw: Any) -> dict[str, Any]:
    integer = draw(st.booleans())
    steps = []
    shapes: list[tuple[int, int]] = [(4, 4), (4, 4), (4, 4), (1, 4)]  # x, y, c0, c1
    n = draw(st.integers(3, 16))
    for _ in range(n):
        kinds = ["unary", "binary", "const", "reduce", "reshape", "dup"]
        if not integer:
            kinds.append("matmul")
        kind = draw(st.sampled_from(kinds))
        i = draw(st.integers(0, len(shapes) - 1))
        j = draw(st.integers(0, len(shapes) - 1))
        if kind == "dup" and steps:
            steps.append(steps[draw(st.integers(0, len(steps) - 1))])
            shapes.append(shapes[-1] if steps[-1][0] == "dup" else
                          _shape_of(steps[-1], shapes))
            continue
        if kind == "dup":
            kind = "unary"
        if kind == "unary":
            op = draw(st.sampled_from(_INT_UNARY if integer else _UNARY))
            step: tuple = ("unary", op, i)
        elif kind == "binary":
            op = draw(st.sampled_from(_INT_BINARY if integer else _BINARY))
            step = ("binary", op, i, j)
        elif kind == "const":
            shape = draw(st.sampled_from([(4, 4), (1, 4), (4, 1), (1, 1)]))
            seed = draw(st.integers(0, 3))  # few seeds: equal constants for CSE
            step = ("const", shape, seed)
        elif kind == "reduce":
            step = ("reduce", draw(st.sampled_from(["reduce_sum", "reduce_max"])), i,
                    draw(st.integers(0, 1)))
        elif kind == "reshape":
            step = ("reshape", i)
        else:
            step = ("matmul", i)
        steps.append(step)
        shapes.append(_shape_of(step, shapes))
    total = 4 + len(steps)
    fetch = sorted(set(draw(st.lists(st.integers(0, total - 1), min_size=1, max_size=3))
                       + [total - 1]))
    feed_mid = draw(st.one_of(st.none(), st.integers(4, total - 1)))
    seed = draw(st.integers(0, 2**16))
    return {"integer": integer, "steps": steps, "fetch": fetch, "feed_mid": feed_mid,
            "seed": seed}


def _shape_of(step: tuple, shapes: list[tuple[int, int]]) -> tuple[int, int]:
    kind = step[0]
    if kind == "unary":
        return shapes[step[2]]
    if kind == "binary":
        a, b = shapes[step[2]], shapes[step[3]]
        return (max(a[0], b[0]), max(a[1], b[1]))
    if kind == "const":
        return step[1]
    if kind == "reduce":
        s = list(shapes[step[2]])
        s[step[3]] = 1
        return (s[0], s[1])
    if kind == "reshape":
        a = shapes[step[1]]
        return (a[1], a[0])
    return (shapes[step[1]][0], 4)  # matmul by a [k, 4] constant


def _build(prog: dict[str, Any]) -> tuple[list[Any], dict[Any, Any]]:
    rng = np.random.default_rng(prog["seed"])
    dt = tf.int32 if prog["integer"] else tf.float32
    npdt = np.int32 if prog["integer"] else np.float32

    def const(shape: tuple[int, int], seed: int) -> Any:
        r = np.random.default_rng(seed)
        v = r.integers(-3, 4, shape) if prog["integer"] else r.uniform(-2, 2, shape)
        return tf.constant(v.astype(npdt))

    x = tf.placeholder(dt, [4, 4], name="x")
    y = tf.placeholder(dt, [4, 4], name="y")
    pool = [x, y, const((4, 4), 0), const((1, 4), 1)]
    for step in prog["steps"]:
        kind = step[0]
        if kind == "unary":
            t = getattr(tf, step[1])(pool[step[2]])
        elif kind == "binary":
            t = getattr(tf, step[1])(pool[step[2]], pool[step[3]])
        elif kind == "const":
            t = const(step[1], step[2])
        elif kind == "reduce":
            t = getattr(tf, step[1])(pool[step[2]], axis=step[3], keepdims=True)
        elif kind == "reshape":
            s = pool[step[1]].shape.as_list()
            t = tf.reshape(pool[step[1]], [s[1], s[0]])
        else:
            a = pool[step[1]]
            w = np.random.default_rng(7).uniform(-1, 1, (a.shape.as_list()[1], 4))
            t = tf.matmul(a, tf.constant(w.astype(npdt)))
        pool.append(t)

    def value(shape: list[int]) -> np.ndarray:
        if prog["integer"]:
            return rng.integers(-4, 5, shape).astype(npdt)
        return rng.uniform(-2, 2, shape).astype(npdt)

    feeds = {x: value([4, 4]), y: value([4, 4])}
    if prog["feed_mid"] is not None:
        t = pool[prog["feed_mid"]]
        feeds[t] = value(t.shape.as_list())
    return [pool[i] for i in prog["fetch"]], feeds


def _outcome(prog: dict[str, Any]) -> tuple[Any, int]:
    graph = tf.Graph()
    with graph.as_default():
        fetches, feeds = _build(prog)
        with tf.Session(graph=graph) as s:
            n_nodes = len(s.placement(fetches, list(feeds)))
            try:
                got = s.run(fetches, feeds)
                got2 = s.run(fetches, feeds)  # the compiled step again
            except errors.OpError as e:
                return ("error", type(e).__name__), n_nodes
    assert [bits(v) for v in got] == [bits(v) for v in got2]
    return [bits(v) for v in got], n_nodes


@settings(max_examples=80, deadline=None)
@given(programs())
def test_random_graphs_give_identical_results_with_and_without_passes(prog):
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv("FLOWRT_DISABLE_PASSES", "all")
        plain, n_plain = _outcome(prog)
        mp.delenv("FLOWRT_DISABLE_PASSES")
        optimized, n_opt = _outcome(prog)
    finally:
        mp.undo()
    assert optimized == plain
    assert n_opt <= n_plain


def test_random_graph_strategy_exercises_every_pass():
    """The strategy above is not vacuous: a fixed program hits each pass."""
    prog = {"integer": False, "seed": 3, "feed_mid": None, "fetch": [9],
            "steps": [("unary", "sin", 0), ("unary", "sin", 0),     # CSE: 4 and 5
                      ("binary", "add", 4, 5),                      # 6, fused
                      ("unary", "exp", 2),                          # 7: folded
                      ("binary", "multiply", 6, 7),                 # 8
                      ("unary", "tanh", 8)]}                        # 9: fetched
    graph = tf.Graph()
    with graph.as_default():
        fetches, feeds = _build(prog)
        ir = all_passes(extract_step_graph(graph, list(feeds), fetches, []))
    types = sorted(n.type for n in ir.nodes.values())
    assert types == ["_Arg", "_Arg", "_FusedElementwise"], types
    ops = ir.nodes[fetches[0].op.name].node_attrs["ops"]
    assert sorted(m.node.type for m in ops) == ["Add", "Const", "Mul", "Sin", "Tanh"]
    plain = {**prog}
    assert _outcome(plain)[0] == _outcome(prog)[0]


# -- remapping: Conv2D + BiasAdd (+ Relu / Relu6) -> _FusedConv2D -----------------------------
def _conv_chain(act, dtype, c, padding="SAME", strides=(1, 1)):
    """A conv layer's chain and its gradients: (x, [outputs], feed)."""
    rng = np.random.default_rng(c)
    npdt = dtype.np
    xs = rng.standard_normal((3, 9, 8, c)).astype(npdt)
    x = tf.placeholder(dtype, [None, 9, 8, c], name="x")
    w = tf.constant(rng.standard_normal((5, 3, c, 6)).astype(npdt), name="w")
    b = tf.constant(rng.standard_normal(6).astype(npdt), name="b")
    h = tf.nn.conv2d(x, w, [1, *strides, 1], padding, name="cv")
    h = tf.nn.bias_add(h, b, name="cb")
    if act is not None:
        h = act(h, name="ca")
    loss = tf.reduce_sum(h * h)
    return x, [h, *tf.gradients(loss, [x, w, b])], {x: xs}


@pytest.mark.parametrize("act", [None, tf.nn.relu, tf.nn.relu6])
@pytest.mark.parametrize("dtype,c,padding,strides", [
    (tf.float32, 1, "SAME", (1, 1)),     # tap-major path
    (tf.float32, 8, "VALID", (2, 1)),    # im2col path
    (tf.float32, 32, "SAME", (1, 2)),    # width-row path
    (tf.float64, 32, "VALID", (1, 1))])
def test_remapping_fuses_the_conv_chain_bit_for_bit(g, act, dtype, c, padding, strides):
    x, outs, feed = _conv_chain(act, dtype, c, padding, strides)
    root = outs[0].op.name
    ir = all_passes(step_ir(outs, [x]))
    fused = ir.nodes[root]
    assert fused.type == "_FusedConv2D"
    assert "cv" not in ir.nodes and (root == "cb" or "cb" not in ir.nodes)
    assert list(fused.node_attrs["fused_ops"]) == ["BiasAdd"] + (
        [] if act is None else [outs[0].op.type])
    assert fused.node_attrs["strides"] == [1, *strides, 1]
    assert fused.node_attrs["padding"] == padding and fused.node_attrs["num_args"] == 1
    assert [s for s, _ in fused.inputs] == ["_arg_x_0", "w", "b"]
    with tf.Session() as s:
        on = s.run(outs, feed)
        assert "cv" not in s.placement(outs, [x])
    with tf.Session(config=rewrite_config(remapping=RewriterConfig.OFF)) as s:
        off = s.run(outs, feed)
        assert "cv" in s.placement(outs, [x])
    for a, b_ in zip(on, off):
        assert a.dtype == dtype.np and bits(a) == bits(b_)


def test_remapping_keeps_chains_it_must_not_fuse(g):
    rng = np.random.default_rng(0)
    x = tf.placeholder(tf.float32, [2, 6, 6, 3], name="x")
    w = tf.constant(rng.standard_normal((3, 3, 3, 4)).astype(np.float32))
    b = tf.constant(rng.standard_normal(4).astype(np.float32))

    def chain(tag):
        # (a filter of its own, so that CSE merges no two chains)
        wt = tf.constant(rng.standard_normal((3, 3, 3, 4)).astype(np.float32))
        return tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, wt, [1, 1, 1, 1], "SAME",
                                                      name=f"{tag}_cv"), b, name=f"{tag}_cb"),
                          name=f"{tag}_ca")

    fetched = chain("fetched")          # the conv output is fetched too
    shared = chain("shared")            # the bias output has a second reader
    other = tf.sigmoid(tf.get_default_graph().get_tensor_by_name("shared_cb:0"))
    gated = chain("gated")              # a control edge waits on the bias output
    with tf.control_dependencies([tf.get_default_graph().get_operation_by_name("gated_cb")]):
        after = tf.identity(x)
    half = tf.nn.bias_add(tf.nn.conv2d(tf.cast(x, tf.float16), tf.cast(w, tf.float16),
                                       [1, 1, 1, 1], "SAME", name="half_cv"),
                          tf.cast(b, tf.float16), name="half_cb")
    cv_out = tf.get_default_graph().get_tensor_by_name("fetched_cv:0")
    outs = [fetched, cv_out, shared, other, gated, after, half]
    ir = all_passes(step_ir(outs, [x]))
    for tag in ("fetched", "half"):
        assert ir.nodes[f"{tag}_cv"].type == "Conv2D", tag
    # the activation stays out where the bias output has another reader or a control
    # edge waits on it (the fused node keeps the bias's name)
    for tag in ("shared", "gated"):
        assert ir.nodes[f"{tag}_cb"].type == "_FusedConv2D" and f"{tag}_cv" not in ir.nodes
        assert list(ir.nodes[f"{tag}_cb"].node_attrs["fused_ops"]) == ["BiasAdd"]
        assert ir.nodes[f"{tag}_ca"].type == "Relu"
    xs = rng.standard_normal((2, 6, 6, 3)).astype(np.float32)
    with tf.Session() as s:
        got = s.run(outs, {x: xs})
    with tf.Session(config=rewrite_config(remapping=RewriterConfig.OFF)) as s:
        want = s.run(outs, {x: xs})
    assert all(bits(a) == bits(w_) for a, w_ in zip(got, want))


def test_remapping_is_switched_off_by_env_and_config(g, monkeypatch):
    x, outs, feed = _conv_chain(tf.nn.relu, tf.float32, 4)

    def placed(config=None):
        with tf.Session(config=config) as s:
            s.run(outs, feed)
            return set(s.placement(outs, [x]))

    assert {"cv", "cb"}.isdisjoint(placed())
    assert {"cv", "cb"} <= placed(rewrite_config(remapping=RewriterConfig.OFF))
    monkeypatch.setenv("FLOWRT_DISABLE_PASSES", "remapping")
    assert {"cv", "cb"} <= placed()


def test_fused_conv2d_kernel_errors(g):
    from flowrt.graph import apply_op
    x = tf.zeros([1, 4, 4, 2])
    w = tf.zeros([3, 3, 2, 5])
    conv = dict(strides=[1, 1, 1, 1], padding="SAME")
    bad_bias = apply_op("_FusedConv2D", name="fc", input=x, filter=w, args=[tf.zeros([4])],
                        fused_ops=["BiasAdd"], **conv)
    bad_ops = apply_op("_FusedConv2D", name="fc", input=x, filter=w, args=[tf.zeros([5])],
                       fused_ops=["BiasAdd", "Elu"], **conv)
    ok = apply_op("_FusedConv2D", name="fc", input=x, filter=w, args=[tf.ones([5])],
                  fused_ops=["BiasAdd", "Relu6"], **conv)
    assert ok.shape.as_list() == [1, 4, 4, 5]
    with tf.Session() as s:
        np.testing.assert_array_equal(s.run(ok), np.ones((1, 4, 4, 5), np.float32))
        with pytest.raises(errors.InvalidArgumentError, match="as many biases"):
            s.run(bad_bias)
        with pytest.raises(errors.UnimplementedError, match="Elu"):
            s.run(bad_ops)
