"""flowrt's own meta graphs: export / import round trips, scopes, unbound inputs, the
stripped op list, plain collections; the missing-op error of import_graph_def; the ops
TF-written graphs need (ParallelDynamicStitch, ConcatOffset, ControlTrigger)."""
from __future__ import annotations

import numpy as np
import pytest
from google.protobuf import text_format
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors
from flowrt.graph import apply_op
from flowrt.proto import graph_def_pb2, meta_graph_pb2


def _model() -> tuple:
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    w = tf.get_variable("w", initializer=tf.constant([[1.0], [2.0]]))
    _, h = tf.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, a * 0.5), [0, x])
    y = tf.identity(tf.matmul(h, w), name="y")
    loss = tf.reduce_sum(tf.square(y), name="loss")
    gs = tf.train.get_or_create_global_step()
    train = tf.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=gs)
    tf.add_to_collection("train_op", train)
    tf.add_to_collection("ints", 7)
    tf.add_to_collection("floats", 0.25)
    tf.add_to_collection("strs", "s")
    return x, w, y, loss, train


def test_round_trip_trains_on(tmp_path) -> None:
    feed = np.array([[1.0, 1.0]], np.float32)
    with tf.Graph().as_default():
        x, w, y, loss, train = _model()
        saver = tf.train.Saver()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(train, {x: feed})
            path = saver.save(s, str(tmp_path / "m"), global_step=1)
            expect = [s.run([loss, train], {x: feed})[0] for _ in range(2)]
    mg = meta_graph_pb2.MetaGraphDef.FromString((tmp_path / "m-1.meta").read_bytes())
    assert mg.meta_info_def.tensorflow_version == "1.15.0"
    assert mg.meta_info_def.tensorflow_git_version.startswith("flowrt")
    ops = [o.name for o in mg.meta_info_def.stripped_op_list.op]
    assert ops == sorted(ops) and {"MatMul", "Enter", "VariableV2"} <= set(ops)
    assert mg.collection_def["ints"].int64_list.value == [7]
    assert mg.collection_def["floats"].float_list.value == [0.25]
    assert mg.collection_def["strs"].bytes_list.value == [b"s"]
    assert mg.collection_def["train_op"].node_list.value[0].startswith("GradientDescent")
    assert len(mg.collection_def["while_context"].bytes_list.value) == 1
    wd = meta_graph_pb2.WhileContextDef.FromString(
        mg.collection_def["while_context"].bytes_list.value[0])
    assert wd.pivot_name.endswith("LoopCond:0") and len(wd.loop_exit_names) == 2
    vd = meta_graph_pb2.VariableDef.FromString(
        mg.collection_def["trainable_variables"].bytes_list.value[0])
    assert (vd.variable_name, vd.snapshot_name, vd.trainable) == ("w:0", "w/read:0", True)
    with tf.Graph().as_default() as g:
        saver = tf.train.import_meta_graph(path + ".meta")
        loss = g.get_tensor_by_name("loss:0")
        train = g.get_collection("train_op")[0]
        with tf.Session() as s:
            saver.restore(s, path)
            got = [s.run([loss, train], {"x:0": feed})[0] for _ in range(2)]
            assert s.run(tf.train.get_global_step()) == 3
        np.testing.assert_allclose(got, expect, rtol=1e-6)
        # a new optimizer on the rebuilt trainable variables, through the loop
        (w,) = tf.trainable_variables()
        (gw,) = tf.gradients(loss, [w])
        with tf.Session() as s:
            saver.restore(s, path)
            h = feed * 0.25
            wv = s.run(w)
            np.testing.assert_allclose(s.run(gw, {"x:0": feed}), 2 * h.T @ (h @ wv),
                                       rtol=1e-5)


def test_text_format_clear_devices_and_strip_default_attrs(tmp_path) -> None:
    with tf.Graph().as_default():
        with tf.device("/cpu:0"):
            _model()
        mg = tf.train.export_meta_graph(str(tmp_path / "m.meta"), as_text=True,
                                        clear_devices=True, strip_default_attrs=True)
    assert all(n.device == "" for n in mg.graph_def.node)
    assert mg.meta_info_def.stripped_default_attrs
    matmul = [n for n in mg.graph_def.node if n.op == "MatMul"][0]
    assert "transpose_a" not in matmul.attr
    text = (tmp_path / "m.meta").read_text()
    assert text_format.Parse(text, meta_graph_pb2.MetaGraphDef()) == mg
    with tf.Graph().as_default() as g:
        tf.train.import_meta_graph(str(tmp_path / "m.meta"))
        assert g.get_operation_by_name("MatMul").get_attr("transpose_a") is False


def test_export_scope_and_unbound_inputs() -> None:
    with tf.Graph().as_default() as g:
        outside = tf.placeholder(tf.float32, [2], name="outside")
        with tf.variable_scope("net"):
            v = tf.get_variable("v", initializer=tf.constant([1.0, 2.0]))
            out = tf.add(v, outside, name="out")
        mg, var_list = tf.train.export_meta_graph(export_scope="net"), None
        del var_list
    names = {n.name for n in mg.graph_def.node}
    assert "out" in names and "outside" not in names
    add = [n for n in mg.graph_def.node if n.name == "out"][0]
    assert list(add.input) == ["v/read", "$unbound_inputs_outside"]
    assert mg.collection_def["unbound_inputs"].bytes_list.value == \
        [b"$unbound_inputs_outside"]
    assert g.get_collection("unbound_inputs") == ["$unbound_inputs_outside"]
    with tf.Graph().as_default() as g2:
        with pytest.raises(ValueError, match="unbound inputs"):
            tf.train.import_meta_graph(mg)
    with tf.Graph().as_default() as g2:
        feed = tf.constant([10.0, 20.0])
        tf.train.import_meta_graph(mg, import_scope="copy",
                                   input_map={"$unbound_inputs_outside": feed})
        assert [v.name for v in tf.global_variables()] == ["copy/v:0"]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            np.testing.assert_array_equal(s.run("copy/out:0"), [11.0, 22.0])
    del out, g2


def test_import_scope_twice_makes_unique_scopes() -> None:
    with tf.Graph().as_default():
        _model()
        mg = tf.train.export_meta_graph()
    with tf.Graph().as_default() as g:
        tf.train.import_meta_graph(mg, import_scope="a")
        s2 = tf.train.import_meta_graph(mg, import_scope="a")
        names = sorted(v.name for v in tf.trainable_variables())
        assert names == ["a/w:0", "a_1/w:0"]
        assert s2 is not None  # no SaverDef exported: a new Saver() of the variables
        assert len(g.get_collection(tf.GraphKeys.WHILE_CONTEXT)) == 2


def test_no_variables_gives_no_saver_and_return_elements() -> None:
    with tf.Graph().as_default():
        tf.identity(tf.constant(1.0), name="c")
        mg = tf.train.export_meta_graph()
    with tf.Graph().as_default():
        saver, (c,) = tf.train.import_meta_graph(mg, return_elements=["c:0"])
        assert saver is None and c.name == "c:0"


def test_read_errors(tmp_path) -> None:
    with pytest.raises(IOError, match="does not exist"):
        tf.train.import_meta_graph(str(tmp_path / "nope.meta"))
    (tmp_path / "bad.meta").write_bytes(b"\xff\xfe not a proto {")
    with pytest.raises(IOError, match="Cannot parse file"):
        tf.train.import_meta_graph(str(tmp_path / "bad.meta"))


def test_import_graph_def_names_every_missing_op() -> None:
    gd = graph_def_pb2.GraphDef()
    text_format.Parse('node { name: "b2" op: "NoSuchOpB" } node { name: "a" op: "NoSuchOpA" }'
                      ' node { name: "b1" op: "NoSuchOpB" } node { name: "ok" op: "NoOp" }', gd)
    with tf.Graph().as_default() as g:
        with pytest.raises(errors.NotFoundError) as info:
            tf.import_graph_def(gd)
        assert g.get_operations() == []
    msg = str(info.value)
    assert "2 op type(s)" in msg and "NoSuchOpA, NoSuchOpB" in msg
    assert msg.index("Node 'a' (op 'NoSuchOpA')") < msg.index("Node 'b2' (op 'NoSuchOpB')")
    assert isinstance(info.value, ValueError)  # what flowrt raised before


def test_newer_tf_hint_attrs_are_dropped() -> None:
    gd = graph_def_pb2.GraphDef()
    text_format.Parse(
        'node { name: "a" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } '
        'attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 1 }'
        ' dim { size: 1 } } float_val: 3 } } } } '
        'node { name: "m" op: "MatMul" input: "a" input: "a" attr { key: "T" value { type: '
        'DT_FLOAT } } attr { key: "grad_a" value { b: true } } }', gd)
    with tf.Graph().as_default():
        (m,) = tf.import_graph_def(gd, return_elements=["m:0"])
        with tf.Session() as s:
            assert s.run(m)[0, 0] == 9.0


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=10, unique=True), st.integers(1, 3))
def test_parallel_dynamic_stitch_matches_dynamic_stitch(pos, parts) -> None:
    rng = np.random.RandomState(len(pos))
    order = rng.permutation(pos)
    idx = np.array_split(order.astype(np.int32), parts)
    data = [rng.rand(len(i), 2).astype(np.float32) for i in idx]
    with tf.Graph().as_default():
        a = apply_op("ParallelDynamicStitch", indices=[tf.constant(i) for i in idx],
                     data=[tf.constant(d) for d in data])
        b = tf.dynamic_stitch([tf.constant(i) for i in idx], [tf.constant(d) for d in data])
        with tf.Session() as s:
            va, vb = s.run([a, b])
    np.testing.assert_array_equal(va, vb)


def test_parallel_dynamic_stitch_gradient() -> None:
    with tf.Graph().as_default():
        d0, d1 = tf.constant([[1.0], [2.0]]), tf.constant([[3.0]])
        out = apply_op("ParallelDynamicStitch", indices=[tf.constant([2, 0]),
                                                         tf.constant([1])], data=[d0, d1])
        g0, g1 = tf.gradients(out * tf.constant([[10.0], [20.0], [30.0]]), [d0, d1])
        with tf.Session() as s:
            np.testing.assert_array_equal(s.run(g0), [[30.0], [10.0]])
            np.testing.assert_array_equal(s.run(g1), [[20.0]])


def test_concat_offset_and_control_trigger() -> None:
    with tf.Graph().as_default():
        offs = apply_op("ConcatOffset", concat_dim=tf.constant(-1),
                        shape=[tf.constant([2, 3]), tf.constant([2, 5]), tf.constant([2, 1])])
        bad = apply_op("ConcatOffset", concat_dim=tf.constant(1),
                       shape=[tf.constant([2, 3]), tf.constant([4, 5])])
        trig = apply_op("ControlTrigger")
        with tf.Session() as s:
            assert [list(o) for o in s.run(offs)] == [[0, 0], [0, 3], [0, 8]]
            assert s.run(trig) is None
            with pytest.raises(errors.InvalidArgumentError,
                               match="All dimensions except 1 must match. Input 1"):
                s.run(bad)


def test_control_trigger_is_never_dead():
    """As TF's executor: a ControlTrigger runs (and is live) even when its control inputs
    are on the untaken side of a conditional, so what waits on it still runs."""
    from google.protobuf import text_format

    from flowrt.proto import graph_def_pb2

    gd = text_format.Parse("""
      node { name: "p" op: "Placeholder" attr { key: "dtype" value { type: DT_BOOL } } }
      node { name: "v" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
             attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {}
                                                  float_val: 1.0 } } } }
      node { name: "sw" op: "Switch" input: "v" input: "p"
             attr { key: "T" value { type: DT_FLOAT } } }
      node { name: "a" op: "Identity" input: "sw:1" attr { key: "T" value { type: DT_FLOAT } } }
      node { name: "t" op: "ControlTrigger" input: "^a" }
      node { name: "out" op: "Const" input: "^t" attr { key: "dtype" value { type: DT_FLOAT } }
             attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {}
                                                  float_val: 5.0 } } } }
    """, graph_def_pb2.GraphDef())
    with tf.Graph().as_default():
        tf.import_graph_def(gd, name="")
        with tf.Session() as s:
            assert s.run("out:0", {"p:0": True}) == 5.0
            assert s.run("out:0", {"p:0": False}) == 5.0  # TF gives 5.0 too
