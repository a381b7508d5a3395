"""tf.graph_util: freezing variables, extracting subgraphs, removing training nodes, and
tf.train.write_graph / import_graph_def of text and binary GraphDefs."""
from __future__ import annotations

import numpy as np
import pytest
from google.protobuf import text_format

import flowrt as tf
from flowrt.proto import graph_def_pb2


def _graph() -> tuple:
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        w = tf.get_variable("w", initializer=tf.constant([[1.0], [2.0]]))
        b = tf.get_variable("b", initializer=tf.constant([0.5]))
        mm = tf.matmul(x, w)
        with tf.control_dependencies([tf.check_numerics(mm, "bad", name="checked")]):
            y = tf.identity(mm + b, name="y")
        tf.identity(y * 2.0, name="unused")
    return g, x, w, b, y


def test_convert_variables_to_constants_runs_without_variables() -> None:
    g, x, w, b, y = _graph()
    with tf.Session(graph=g) as s:
        s.run(tf.variables_initializer([w, b]))
        s.run(w.assign([[3.0], [4.0]]))
        frozen = tf.graph_util.convert_variables_to_constants(s, g.as_graph_def(), ["y"])
        partial = tf.graph_util.convert_variables_to_constants(
            s, g.as_graph_def(), ["y"], variable_names_blacklist=["b"])
        only_w = tf.graph_util.convert_variables_to_constants(
            s, g.as_graph_def(), ["y"], variable_names_whitelist=["w"])
    ops = {n.name: n.op for n in frozen.node}
    assert ops["w"] == "Const" and ops["b"] == "Const" and "unused" not in ops
    assert {n.name: n.op for n in partial.node}["b"] == "VariableV2"
    assert {n.name: n.op for n in only_w.node}["b"] == "VariableV2"
    with tf.Graph().as_default():
        (out,) = tf.graph_util.import_graph_def(frozen, return_elements=["y:0"])
        with tf.Session() as s:
            np.testing.assert_allclose(s.run(out, {"import/x:0": [[1.0, 1.0]]}), [[7.5]])


def test_extract_sub_graph_and_errors() -> None:
    g, *_ = _graph()
    gd = g.as_graph_def()
    sub = tf.graph_util.extract_sub_graph(gd, ["y"])
    names = [n.name for n in sub.node]
    assert "unused" not in names and "x" in names and "w" in names
    assert names == [n.name for n in gd.node if n.name in set(names)]  # order kept
    with pytest.raises(TypeError, match="dest_nodes must be a list"):
        tf.graph_util.extract_sub_graph(gd, "y")
    with pytest.raises(AssertionError, match="nope is not in graph"):
        tf.graph_util.extract_sub_graph(gd, ["nope"])


def test_remove_training_nodes() -> None:
    g, *_ = _graph()
    gd = g.as_graph_def()
    out = tf.graph_util.remove_training_nodes(gd)
    ops = {n.name: n for n in out.node}
    assert "checked" not in ops and "y" not in ops and "w/read" not in ops
    assert list(ops["mul"].input) == ["add", "mul/y"]  # read y's input, "add"
    assert list(ops["MatMul"].input) == ["x", "w"]
    kept = tf.graph_util.remove_training_nodes(gd, protected_nodes=["y"])
    assert "y" in {n.name for n in kept.node} and "checked" not in \
        {n.name for n in kept.node}
    frozen = tf.graph_util.remove_training_nodes(tf.graph_util.extract_sub_graph(gd, ["y"]),
                                                 protected_nodes=["y"])
    with tf.Graph().as_default():
        tf.import_graph_def(frozen, name="")


def test_must_run_on_cpu_and_shape_from_name() -> None:
    with tf.Graph().as_default() as g:
        c = tf.constant(1, name="i")
        f = tf.constant(1.0, name="f")
        v = tf.Variable(1.0, name="v")
        p = tf.placeholder(tf.float32, [3, None], name="p")
    assert tf.graph_util.must_run_on_cpu(c.op)
    assert not tf.graph_util.must_run_on_cpu(f.op)
    assert tf.graph_util.must_run_on_cpu(v.op.node_def, pin_variables_on_cpu=True)
    assert not tf.graph_util.must_run_on_cpu(v.op)
    assert tf.graph_util.tensor_shape_from_node_def_name(g, "p").as_list() == [3, None]


@pytest.mark.parametrize("as_text", [True, False])
def test_write_graph_then_import(tmp_path, as_text: bool) -> None:
    g, *_ = _graph()
    path = tf.train.write_graph(g.as_graph_def(), str(tmp_path), "g.pb", as_text=as_text)
    data = open(path, "rb").read()
    gd = graph_def_pb2.GraphDef()
    if as_text:
        text_format.Parse(data.decode(), gd)
    else:
        gd.ParseFromString(data)
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(gd, name="")
        assert g2.get_operation_by_name("y").type == "Identity"
