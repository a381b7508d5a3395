"""Partitions on the wire: GraphIR -> GraphDef -> bytes -> GraphIR, node by node, and
executors built from the round-tripped IR computing bit-identical values."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import dtypes as dt
from flowrt import errors
from flowrt.executor import Executor, StepContext
from flowrt.ir import ARG_OP, GraphIR, Node
from flowrt.ir_wire import RESERVED_PREFIX, graph_def_from_bytes, ir_from_graph_def, \
    ir_to_graph_def
from flowrt.partition import Partition
from flowrt.tensor_shape import TensorShape

CPU = "/job:localhost/replica:0/task:0/device:CPU:{}"
FIELDS = ("name", "type", "inputs", "control_inputs", "device", "assigned_device",
          "out_dtypes", "out_shapes", "in_dtypes", "in_shapes")


@pytest.fixture(autouse=True)
def _no_fusion(monkeypatch):
    # _FusedElementwise nodes hold Python objects: they never go on the wire
    monkeypatch.setenv("FLOWRT_DISABLE_PASSES", "elementwise_fusion")


# -- helpers ---------------------------------------------------------------------------
def same(a: Any, b: Any) -> bool:
    """Exact equality, types included (arrays by dtype, shape and bytes)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        return a.tolist() == b.tolist() if a.dtype == object else a.tobytes() == b.tobytes()
    if isinstance(a, TensorShape) or isinstance(b, TensorShape):
        return (isinstance(a, TensorShape) and isinstance(b, TensorShape)
                and a.as_tuple() == b.as_tuple())
    if isinstance(a, (list, tuple)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(same(x, y) for x, y in zip(a, b)))
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a):
        return np.isnan(b)
    return type(a) is type(b) and a == b


def round_trip(ir: GraphIR, runtime: Any) -> GraphIR:
    data = ir_to_graph_def(ir).SerializeToString()
    return ir_from_graph_def(graph_def_from_bytes(data), runtime)


def assert_same_ir(a: GraphIR, b: GraphIR) -> None:
    assert list(a.nodes) == list(b.nodes)
    for n1, n2 in zip(a.nodes.values(), b.nodes.values()):
        for f in FIELDS:
            assert same(getattr(n1, f), getattr(n2, f)), (n1.name, f, getattr(n1, f),
                                                         getattr(n2, f))
        assert n2.op_def is n1.op_def
        assert n2.source_op is None
        assert set(n1.node_attrs) == set(n2.node_attrs), n1.name
        for k, v in n1.node_attrs.items():
            assert same(v, n2.node_attrs[k]), (n1.name, k, v, n2.node_attrs[k])
        assert [x.is_ref for x in n1.input_args()] == [x.is_ref for x in n2.input_args()]
    assert a.feeds == b.feeds and a.fetches == b.fetches and a.targets == b.targets


def check_all_callables(sess: tf.Session) -> int:
    """Round-trip every partition of every compiled step of ``sess``; returns how many."""
    rt = sess._msession.master.runtime
    n = 0
    for cs in sess._msession._callables.values():
        for p in cs.partitions:
            assert_same_ir(p.ir, round_trip(p.ir, rt))
            n += 1
    return n


def wire_session(graph: tf.Graph, config: Any = None) -> tf.Session:
    """A session whose worker runs partitions decoded from serialized GraphDefs only."""
    sess = tf.Session(graph=graph, config=config)
    ms = sess._msession
    rt = ms.master.runtime
    compile_ = ms._compile

    def compile_over_wire(cs: Any) -> None:
        compile_(cs)
        assert len(cs.parts) == 1  # one in-process worker
        worker, handle, *rest = cs.parts[0]
        worker.deregister_graph(handle)
        devices = {d.name: d for d in worker.devices}
        parts = []
        for p in cs.partitions:
            ir2 = round_trip(p.ir, rt)
            assert all(n.source_op is None for n in ir2.nodes.values())
            q = Partition(devices[p.device.name], ir2)
            q.fetches = list(ir2.fetches)
            q.fetch_positions = list(p.fetch_positions)
            parts.append(q)
        h = worker.register_partitions(ms.handle, parts, len(cs.ir.fetches))
        cs.parts = [cs.parts[0]._replace(handle=h)]

    ms._compile = compile_over_wire
    return sess


def run_both(graph: tf.Graph, steps: list[tuple[Any, dict | None]],
             config: Any = None) -> list[Any]:
    """Run ``steps`` in a plain session and in a wire session; assert every fetched
    value is bit-identical; returns the plain values."""
    out = []
    with tf.Session(graph=graph, config=config) as s1, wire_session(graph, config) as s2:
        for fetches, feed in steps:
            v1 = s1.run(fetches, feed)
            v2 = s2.run(fetches, feed)
            assert same_values(v1, v2), (fetches, v1, v2)
            out.append(v1)
        assert check_all_callables(s1) >= 1
    return out


def same_values(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_values(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_values(a[k], b[k]) for k in a)
    if a is None:
        return b is None
    x, y = np.asarray(a), np.asarray(b)
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    return x.tolist() == y.tolist() if x.dtype == object else x.tobytes() == y.tobytes()


def needs_source_op_free_kernels() -> None:
    """Every kernel must build on a worker, where nodes have no source Operation (the
    Mean/Sum and StridedSlice kernels used to read the graph through ctx.op)."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2, 3])
        y = [tf.reduce_sum(x, 1), x[:, 1:]]
    with tf.Session(graph=g) as s:
        s.run(y, {x: np.zeros((2, 3), np.float32)})
        cs = next(iter(s._msession._callables.values()))
        ir = round_trip(cs.ir, s._msession.master.runtime)
        dev = s._msession.master.local_worker.devices[0]
        Executor(ir, ir.fetches, lambda n: dev, s._msession.master.runtime)


# -- graphs ------------------------------------------------------------------------------
def mlp(opt: str, loss_kind: str = "l2") -> tuple[tf.Graph, Any, Any, Any, Any, list[Any]]:
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(7)
        x = tf.placeholder(tf.float32, [None, 5], name="x")
        y = tf.placeholder(tf.float32, [None, 3], name="y")
        w1 = tf.Variable(tf.random_normal([5, 8], seed=1), name="w1")
        b1 = tf.Variable(tf.zeros([8]), name="b1")
        w2 = tf.Variable(tf.truncated_normal([8, 3], stddev=0.3, seed=2), name="w2")
        b2 = tf.Variable(tf.constant(0.1, shape=[3]), name="b2")
        h = tf.nn.relu(tf.matmul(x, w1) + b1)
        out = tf.matmul(h, w2) + b2
        if loss_kind == "l2":
            loss = tf.nn.l2_loss(out - y)
        else:
            loss = tf.reduce_mean(tf.square(out - y))
        o = tf.train.GradientDescentOptimizer(0.005) if opt == "sgd" else \
            tf.train.AdamOptimizer(0.01)
        train = o.minimize(loss)
        init = tf.global_variables_initializer()
    return g, x, y, loss, train, [init, w1, b1, w2, b2]


def _batches(n: int = 3) -> list[tuple[np.ndarray, np.ndarray]]:
    r = np.random.RandomState(0)
    return [(r.randn(4, 5).astype(np.float32), r.randn(4, 3).astype(np.float32))
            for _ in range(n)]


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_mlp_training_step_round_trips_and_trains_identically(opt):
    g, x, y, loss, train, (init, *vs) = mlp(opt)
    steps: list[tuple[Any, Any]] = [(init, None)]
    for bx, by in _batches():
        steps.append(([loss, train], {x: bx, y: by}))
    steps.append((vs, None))
    vals = run_both(g, steps)
    losses = [v[0] for v in vals[1:-1]]
    assert losses[-1] < losses[0]  # it trained


def test_mlp_with_reductions_round_trips():
    g, x, y, loss, train, (init, *vs) = mlp("adam", "mean")
    with tf.Session(graph=g) as s:
        s.run(init)
        bx, by = _batches(1)[0]
        s.run([loss, train], {x: bx, y: by})
        assert check_all_callables(s) == 2
        types = {n.type for cs in s._msession._callables.values()
                 for n in cs.ir.nodes.values()}
        assert {"Mean", "ApplyAdam", ARG_OP, "VariableV2", "Assign"} <= types


def test_mlp_with_reductions_trains_identically_over_the_wire():
    needs_source_op_free_kernels()
    g, x, y, loss, train, (init, *vs) = mlp("adam", "mean")
    steps: list[tuple[Any, Any]] = [(init, None)]
    steps += [([loss, train], {x: bx, y: by}) for bx, by in _batches()]
    run_both(g, steps + [(vs, None)])


def test_cond_both_branches():
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder(tf.bool, [], name="p")
        a = tf.placeholder(tf.float64, [None], name="a")
        r = tf.cond(p, lambda: a * 2.0 + 1.0, lambda: tf.negative(a) - 3.0)
    av = np.array([1.5, -2.0, 7.25])
    vals = run_both(g, [(r, {p: True, a: av}), (r, {p: False, a: av})])
    np.testing.assert_array_equal(vals[0], av * 2 + 1)
    np.testing.assert_array_equal(vals[1], -av - 3)


def test_queues():
    g = tf.Graph()
    with g.as_default():
        q = tf.FIFOQueue(10, [tf.int32, tf.string], shapes=[[2], []], name="q")
        xi = tf.placeholder(tf.int32, [2])
        xs = tf.placeholder(tf.string, [])
        enq = q.enqueue([xi, xs])
        deq = q.dequeue()
        size = q.size()
    steps: list[tuple[Any, Any]] = [
        (enq, {xi: np.array([1, 2], np.int32), xs: b"one"}),
        (enq, {xi: np.array([3, 4], np.int32), xs: "tw\u00f6".encode()}),
        (size, None), (deq, None), (deq, None), (size, None)]
    vals = run_both(g, steps)
    assert vals[2] == 2 and vals[5] == 0
    np.testing.assert_array_equal(vals[3][0], [1, 2])
    assert vals[4][1] == "tw\u00f6".encode()


def test_random_ops_with_seeds():
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(123)
        outs = [tf.random_uniform([3, 4], seed=5), tf.random_normal([6], seed=6, dtype=tf.float64),
                tf.truncated_normal([2, 2], seed=7),
                tf.random_uniform([5], maxval=10, dtype=tf.int64, seed=8),
                tf.random_shuffle(tf.range(10), seed=9)]
    vals = run_both(g, [(outs, None), (outs, None)])
    assert not np.array_equal(vals[0][0], vals[1][0])  # the sequence advances


def test_strings():
    g = tf.Graph()
    with g.as_default():
        c = tf.constant([b"a", b"\xff\x00bin", "\u00fcml".encode()], name="c")
        s = tf.placeholder(tf.string, [None], name="s")
        j = tf.add(c, s)
        ident = tf.identity(tf.constant("scalar"))
    fed = np.array([b"1", b"2", b"3"], dtype=object)
    vals = run_both(g, [([j, ident], {s: fed})])
    assert vals[0][0].tolist() == [b"a1", b"\xff\x00bin2", "\u00fcml3".encode()]
    assert vals[0][1] == b"scalar"


def _has_numpy(d: dt.DType) -> bool:
    try:
        return d.np is not None
    except TypeError:  # bfloat16 without ml_dtypes
        return False


ALL_DTYPES = [d for d in [tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int8, tf.int16, tf.int32,
              tf.int64, tf.uint8, tf.uint16, tf.uint32, tf.uint64, tf.complex64,
              tf.complex128, tf.bool, tf.string] if _has_numpy(d)]


def _value_of(d: dt.DType, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    if d is tf.string:
        return np.array([f"s{i}".encode() for i in range(n)], dtype=object).reshape(shape)
    if d is tf.bool:
        return (np.arange(n) % 2 == 0).reshape(shape)
    base = np.arange(n) - n // 2
    if d.is_complex:
        return (base + 0.5j * base).astype(d.np).reshape(shape)
    if d.is_unsigned:
        base = np.arange(n) * 3
    return base.astype(d.np).reshape(shape)


@pytest.mark.parametrize("d", ALL_DTYPES, ids=lambda d: d.name)
def test_every_dtype(d):
    g = tf.Graph()
    with g.as_default():
        c = tf.constant(_value_of(d, (2, 3)), dtype=d, name="c")
        sc = tf.constant(_value_of(d, (1,)).reshape(()), dtype=d, name="sc")
        ph = tf.placeholder(d, [None, 3], name="ph")
        outs = [tf.identity(c), tf.identity(sc), tf.identity(ph), tf.stack([c, ph])]
    vals = run_both(g, [(outs, {ph: _value_of(d, (2, 3))})])
    assert vals[0][0].shape == (2, 3)
    assert vals[0][3].shape == (2, 2, 3)


def test_quantized_const_keeps_its_dtype():
    g = tf.Graph()
    with g.as_default():
        q = tf.constant([1, -2, 3], dtype=tf.qint8, name="q")
    with tf.Session(graph=g) as s:
        s.run(q)
        cs = next(iter(s._msession._callables.values()))
        gd = ir_to_graph_def(cs.ir)
        assert gd.node[0].attr["value"].tensor.dtype == tf.qint8.as_datatype_enum
        ir2 = round_trip(cs.ir, s._msession.master.runtime)
        assert ir2.nodes["q"].node_attrs["dtype"] is tf.qint8
        assert ir2.nodes["q"].out_dtypes == [tf.qint8]
        np.testing.assert_array_equal(ir2.nodes["q"].node_attrs["value"], [1, -2, 3])


def test_two_device_partitioned_step():
    config = tf.ConfigProto(device_count={"CPU": 2})
    g = tf.Graph()
    with g.as_default():
        with tf.device("/cpu:0"):
            x = tf.placeholder(tf.float32, [None, 3], name="x")
            v = tf.Variable(tf.ones([3, 2]), name="v")
            a = tf.matmul(x, v)
        with tf.device("/cpu:1"):
            with tf.control_dependencies([a.op]):
                b = tf.square(a) + tf.constant(1.0)
            c = tf.cast(tf.argmax(b, 1), tf.float32)
        with tf.device("/cpu:0"):
            upd = tf.assign_add(v, tf.fill([3, 2], 0.5))
            d = tf.identity(c) * 2.0
        init = tf.global_variables_initializer()
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    steps = [(init, None), ([b, d], {x: xv}), (upd, None), ([a, b, d], {x: xv})]
    vals = run_both(g, steps, config)
    np.testing.assert_array_equal(vals[1][0], np.square(xv @ np.ones((3, 2))) + 1)
    with tf.Session(graph=g, config=config) as s:
        s.run(init)
        s.run([b, d], {x: xv})
        cid = max(s._msession._callables)
        cs = s._msession._callables[cid]
        assert {p.device.name for p in cs.partitions} == {CPU.format(0), CPU.format(1)}
        types = {n.type for p in cs.partitions for n in p.ir.nodes.values()}
        assert {"_Send", "_Recv", ARG_OP} <= types
        assert any(n.name.endswith("_ctrl_to_localhost_0_CPU_1") or "_ctrl_to_" in n.name
                   for p in cs.partitions for n in p.ir.nodes.values())
        for p in cs.partitions:
            gd = ir_to_graph_def(p.ir)
            assert all(nd.device == p.device.name for nd in gd.node)
            ir2 = ir_from_graph_def(gd, s._msession.master.runtime)
            assert_same_ir(p.ir, ir2)
            for n in ir2.nodes.values():
                if n.type == "_Recv":
                    assert isinstance(n.node_attrs["send_device_incarnation"], int)
                    assert n.node_attrs["tensor_type"] is n.out_dtypes[0]


def test_ref_dtypes_and_requested_devices_are_carried():
    g = tf.Graph()
    with g.as_default():
        with tf.device("/cpu:0"):
            v = tf.Variable([1.0, 2.0], name="v")
        r = tf.assign(v, [3.0, 4.0])
    with tf.Session(graph=g) as s:
        s.run(r)
        cs = next(iter(s._msession._callables.values()))
        ir2 = round_trip(cs.ir, s._msession.master.runtime)
        assert ir2.nodes["v"].out_dtypes == [dt.float32_ref]
        assert ir2.nodes["Assign"].in_dtypes[0] is dt.float32_ref
        assert ir2.nodes["v"].device == cs.ir.nodes["v"].device == "/device:CPU:0"
        assert ir2.nodes["v"].assigned_device == CPU.format(0)


def test_fused_elementwise_is_refused(monkeypatch):
    monkeypatch.delenv("FLOWRT_DISABLE_PASSES")
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [4])
        y = tf.sqrt(tf.abs(tf.sin(x) * 2.0 + 1.0))
    with tf.Session(graph=g) as s:
        s.run(y, {x: np.ones(4, np.float32)})
        cs = next(iter(s._msession._callables.values()))
        fused = [n for n in cs.ir.nodes.values() if n.type == "_FusedElementwise"]
        assert fused
        with pytest.raises(errors.UnimplementedError, match=f"node {fused[0].name} "
                           r"\(op _FusedElementwise\): attr '(ops|_runtime)'"):
            ir_to_graph_def(cs.ir)


def test_graph_def_without_reserved_attrs_is_typed_from_op_defs():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable([1, 2], name="v")
        a = tf.placeholder(tf.int32, [2], name="a")
        z = tf.add(tf.identity(v), a, name="z")
    ir = ir_from_graph_def(g.as_graph_def(), g._runtime)
    assert ir.nodes["v"].out_dtypes == [dt.int32_ref]
    assert ir.nodes["z"].in_dtypes == [tf.int32, tf.int32]
    assert ir.nodes["z"].out_shapes[0].as_tuple() is None
    assert ir.nodes["z"].inputs == [("Identity", 0), ("a", 0)]
    assert ir.feeds == [] and ir.fetches == [] and ir.targets == []


def test_executor_from_decoded_ir_runs():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.int64, [None], name="x")
        y = tf.cumsum(x * 3) if hasattr(tf, "cumsum") else x * 3
    with tf.Session(graph=g) as s:
        want = s.run(y, {x: np.array([1, 2, 3])})
        cs = next(iter(s._msession._callables.values()))
        ir2 = round_trip(cs.ir, s._msession.master.runtime)
        dev = s._msession.master.local_worker.devices[0]
        ex = Executor(ir2, ir2.fetches, lambda n: dev, s._msession.master.runtime)
        got = ex.run([np.array([1, 2, 3])], StepContext(1, None, ex.session_state,
                                                         s._msession.master.runtime))
    np.testing.assert_array_equal(got[0], want)


# -- property test over attr values, dtypes and shapes ----------------------------------
dims = st.one_of(st.none(), st.integers(0, 5))
shapes = st.one_of(st.none(), st.lists(dims, max_size=4))


@settings(max_examples=40, deadline=None)
@given(d=st.sampled_from(ALL_DTYPES), shape=shapes,
       vshape=st.lists(st.integers(0, 3), max_size=3), index=st.integers(0, 2 ** 31 - 1),
       ref=st.booleans(), text=st.text(max_size=8))
def test_property_attrs_dtypes_shapes(d, shape, vshape, index, ref, text):
    rt = tf.get_default_graph()._runtime
    sh = TensorShape(shape)
    value = _value_of(d, tuple(vshape))
    ir = GraphIR()
    arg = Node("arg", ARG_OP, [], [], "", {"index": index, "T": d}, None, [d], [sh], [], [])
    const = Node("c", "Const", [], ["arg"], "/cpu:0", {"value": value, "dtype": d},
                 rt.op_def("Const"), [d], [TensorShape(vshape)], [], [])
    ph = Node("p", "Placeholder", [], [], "", {"dtype": d, "shape": sh},
              rt.op_def("Placeholder"), [d._as_ref if ref else d], [sh], [], [])
    ident = Node("i", "Identity", [("c", 0)], ["p"], text, {"T": d, "_class": [f"loc:@{text}"]},
                 rt.op_def("Identity"), [d], [TensorShape(vshape)], [d], [sh])
    for n in (arg, const, ph, ident):
        n.assigned_device = CPU.format(0) if n.name != "arg" else None
        ir.add(n)
    ir.feeds = [("feed:0", "arg")]
    ir.fetches = [("i", 0), ("arg", 0)]
    ir.targets = ["p"]
    gd = ir_to_graph_def(ir, default_device=CPU.format(1))
    ir2 = ir_from_graph_def(gd.SerializeToString(), rt)
    assert ir2.nodes["arg"].assigned_device == CPU.format(1)
    ir.nodes["arg"].assigned_device = CPU.format(1)
    assert_same_ir(ir, ir2)


# -- malformed GraphDefs ----------------------------------------------------------------
def _good_graph_def() -> tuple[Any, Any]:
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2], name="x")
        tf.add(x, tf.constant([1.0, 2.0], name="k"), name="sum")
    ir = ir_from_graph_def(g.as_graph_def(), g._runtime)
    for n in ir.nodes.values():
        n.assigned_device = CPU.format(0)
    ir.fetches = [("sum", 0)]
    return ir_to_graph_def(ir), g._runtime


def _bad(gd: Any, rt: Any, *pieces: str) -> str:
    with pytest.raises(errors.InvalidArgumentError) as ei:
        ir_from_graph_def(gd, rt)
    msg = str(ei.value)
    for p in pieces:
        assert p in msg, msg
    return msg


def test_good_graph_def_parses():
    gd, rt = _good_graph_def()
    ir = ir_from_graph_def(gd, rt)
    assert list(ir.nodes) == ["x", "k", "sum"] and ir.fetches == [("sum", 0)]


def test_unknown_op():
    gd, rt = _good_graph_def()
    gd.node[2].op = "NoSuchOp"
    _bad(gd, rt, "node sum (op NoSuchOp)", "unknown op 'NoSuchOp'")


@pytest.mark.parametrize("text,piece", [
    ("nowhere", "'nowhere', which is not in the graph"),
    ("x:one", "malformed input 'x:one'"),
    ("x:-1", "malformed input 'x:-1'"),
    (":0", "malformed input ':0'"),
    ("^", "malformed control input"),
    ("x:7", "node 'x' has only 1 outputs"),
])
def test_bad_input_reference(text, piece):
    gd, rt = _good_graph_def()
    gd.node[2].input[1] = text
    _bad(gd, rt, "node sum (op Add)", piece)


def test_wrong_number_of_inputs():
    gd, rt = _good_graph_def()
    del gd.node[2].input[1]
    _bad(gd, rt, "node sum (op Add)", "takes 2 inputs", "has 1")


def test_control_input_before_data_input():
    gd, rt = _good_graph_def()
    gd.node[2].input[0] = "^k"
    _bad(gd, rt, "node sum (op Add)", "comes after a control input")


def test_wrong_attr_type():
    gd, rt = _good_graph_def()
    gd.node[2].attr["T"].Clear()
    gd.node[2].attr["T"].i = 3
    _bad(gd, rt, "node sum (op Add)", "attr 'T'", "'type' expected")


def test_disallowed_attr_value_and_missing_attr():
    gd, rt = _good_graph_def()
    gd.node[2].attr["T"].type = tf.bool.as_datatype_enum
    _bad(gd, rt, "node sum (op Add)", "attr 'T'", "not in the list of allowed values")
    gd, rt = _good_graph_def()
    del gd.node[1].attr["value"]
    _bad(gd, rt, "node k (op Const)", "missing attr 'value'")


def test_unknown_and_bad_reserved_attrs():
    gd, rt = _good_graph_def()
    gd.node[0].attr[RESERVED_PREFIX + "nonsense"].b = True
    _bad(gd, rt, "node x (op Placeholder)", "unknown reserved attr")
    gd, rt = _good_graph_def()
    gd.node[2].attr[RESERVED_PREFIX + "out_dtypes"].list.type.append(1)
    _bad(gd, rt, "node sum (op Add)", "lists 2 entries; the node has 1")
    gd, rt = _good_graph_def()
    gd.node[2].attr[RESERVED_PREFIX + "out_dtypes"].list.type[0] = tf.int32.as_datatype_enum
    _bad(gd, rt, "node sum (op Add)", "says int32")
    gd, rt = _good_graph_def()
    gd.node[2].attr[RESERVED_PREFIX + "fetch"].list.i[:] = [0, 5]
    _bad(gd, rt, "node sum (op Add)", "bad fetch")
    gd, rt = _good_graph_def()
    gd.node[1].attr["not_an_attr"].i = 4
    _bad(gd, rt, "node k (op Const)", "attr 'not_an_attr' not in the op definition")


def test_bad_tensor_and_arg_nodes():
    gd, rt = _good_graph_def()
    gd.node[1].attr["value"].tensor.tensor_content = b"\x00\x01\x02"
    _bad(gd, rt, "node k (op Const)", "attr 'value'")
    gd, rt = _good_graph_def()
    arg = gd.node.add(name="a0", op=ARG_OP)
    arg.attr["index"].i = -4
    arg.attr["T"].type = 1
    _bad(gd, rt, f"node a0 (op {ARG_OP})", "'index' must be >= 0")
    gd, rt = _good_graph_def()
    gd.node.add(name="a1", op=ARG_OP).attr["index"].i = 0
    _bad(gd, rt, f"node a1 (op {ARG_OP})", "missing attr 'T'")


def test_duplicate_and_nameless_nodes():
    gd, rt = _good_graph_def()
    gd.node.add().CopyFrom(gd.node[1])
    _bad(gd, rt, "node k (op Const)", "duplicate node name")
    gd, rt = _good_graph_def()
    gd.node[0].name = ""
    _bad(gd, rt, "node #0 (op Placeholder)", "no name")


def test_truncated_bytes():
    gd, rt = _good_graph_def()
    data = gd.SerializeToString()
    seen = 0
    for cut in range(1, len(data) - 1, 7):
        try:
            ir_from_graph_def(data[:cut], rt)
        except errors.InvalidArgumentError as e:
            seen += 1
            assert "node" in str(e) or "GraphDef" in str(e)
    assert seen > 0
    # cut inside the last node: the message names it
    start = data.rindex(b"sum") - 2
    msg = _bad(data[:start + 12], rt)
    assert "sum" in msg
    with pytest.raises(errors.InvalidArgumentError, match="cut short|not a valid GraphDef"):
        graph_def_from_bytes(b"\x0a\xff\xff\xff\xff\x0f")


def test_not_a_graph_def():
    with pytest.raises(errors.InvalidArgumentError, match="expected a GraphDef"):
        ir_from_graph_def({"node": []}, tf.get_default_graph()._runtime)  # type: ignore[arg-type]


def test_reserved_attr_names_are_refused_on_send():
    rt = tf.get_default_graph()._runtime
    ir = GraphIR()
    ir.add(Node("n", "NoOp", [], [], "", {RESERVED_PREFIX + "x": 1}, rt.op_def("NoOp"),
                [], [], [], []))
    with pytest.raises(errors.InvalidArgumentError, match="node n .*reserved"):
        ir_to_graph_def(ir)
