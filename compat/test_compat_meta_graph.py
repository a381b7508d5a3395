"""Meta graphs and frozen graphs against TensorFlow: flowrt exports, TF imports and
computes the same outputs and loop gradients; TF exports (with a checkpoint), flowrt
imports, restores and trains on with the same losses; flowrt's frozen graph runs in TF."""
from __future__ import annotations

import os

import numpy as np

from compat_harness import flowrt_module, tf_module

X = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)
Y = np.array([[1.0], [0.0]], np.float32)


def _build(tf, through_loop=True):
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    y = tf.placeholder(tf.float32, [None, 1], name="y")
    w = tf.get_variable("w", initializer=tf.constant([[0.3], [-0.2]]))
    k = tf.get_variable("k", initializer=tf.constant(0.9))
    _, h = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, tf.tanh(a) * k),
                         [tf.constant(0), x], name="loop")
    pred = tf.identity(tf.matmul(h, w), name="pred")
    loss = tf.reduce_mean(tf.square(pred - y), name="loss")
    gs = tf.train.get_or_create_global_step()
    train = tf.train.AdamOptimizer(0.1).minimize(
        loss, global_step=gs, var_list=None if through_loop else [w])
    tf.add_to_collection("train_op", train)
    return pred, loss, train


def test_flowrt_exports_tf_imports_runs_and_differentiates_the_loop(tmp_path):
    ft = flowrt_module()
    path = str(tmp_path / "ft.meta")
    with ft.Graph().as_default():
        # no gradient through the loop before the export: flowrt gives StackV2 handles a
        # [2] static shape that TF's importer rejects (docs/api/interop.md)
        pred, loss, _ = _build(ft, through_loop=False)
        ft.train.export_meta_graph(path)
        k = [v for v in ft.global_variables() if v.op.name == "k"][0]
        (gk,) = ft.gradients(loss, [k])
        with ft.Session() as s:
            s.run(ft.global_variables_initializer())
            want_pred, want_gk = s.run([pred, gk], {"x:0": X, "y:0": Y})
    tf = tf_module()
    with tf.Graph().as_default() as g:
        tf.train.import_meta_graph(path)
        assert sorted(v.op.name for v in tf.trainable_variables()) == ["k", "w"]
        k = [v for v in tf.trainable_variables() if v.op.name == "k"][0]
        (gk,) = tf.gradients(g.get_tensor_by_name("loss:0"), [k])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got_pred, got_gk = s.run(["pred:0", gk], {"x:0": X, "y:0": Y})
    np.testing.assert_allclose(got_pred, want_pred, rtol=1e-5)
    np.testing.assert_allclose(got_gk, want_gk, rtol=1e-4)


def test_tf_exports_flowrt_imports_restores_and_trains_on(tmp_path):
    tf = tf_module()
    with tf.Graph().as_default():
        _, loss, train = _build(tf)
        saver = tf.train.Saver()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for _ in range(2):
                s.run(train, {"x:0": X, "y:0": Y})
            prefix = saver.save(s, os.path.join(str(tmp_path), "tf.ckpt"), global_step=2)
            want = [s.run([loss, train], {"x:0": X, "y:0": Y})[0] for _ in range(3)]
    ft = flowrt_module()
    with ft.Graph().as_default() as g:
        saver = ft.train.import_meta_graph(prefix + ".meta", clear_devices=True)
        loss = g.get_tensor_by_name("loss:0")
        train = g.get_collection("train_op")[0]
        with ft.Session() as s:
            saver.restore(s, prefix)
            got = [s.run([loss, train], {"x:0": X, "y:0": Y})[0] for _ in range(3)]
            assert s.run(ft.train.get_global_step()) == 5
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_flowrt_frozen_graph_runs_in_tf():
    ft = flowrt_module()
    with ft.Graph().as_default() as g:
        pred, _, _ = _build(ft)
        with ft.Session() as s:
            s.run(ft.global_variables_initializer())
            frozen = ft.graph_util.convert_variables_to_constants(s, g.as_graph_def(),
                                                                  ["pred"])
            want = s.run(pred, {"x:0": X})
    tf = tf_module()
    gd = tf.GraphDef.FromString(frozen.SerializeToString())
    assert not {n.op for n in gd.node} & {"VariableV2", "Assign"}
    with tf.Graph().as_default():
        (out,) = tf.import_graph_def(gd, return_elements=["pred:0"], name="")
        with tf.Session() as s:
            np.testing.assert_allclose(s.run(out, {"x:0": X}), want, rtol=1e-5)


def test_tf_frozen_graph_with_partitioned_lookup_runs_in_flowrt():
    tf = tf_module()
    ids = np.array([0, 4, 7, 2], np.int64)
    with tf.Graph().as_default() as g:
        t_ids = tf.placeholder(tf.int64, [None], name="ids")
        emb = tf.get_variable("emb", [8, 2], partitioner=tf.fixed_size_partitioner(3),
                              initializer=tf.random_uniform_initializer(seed=3))
        tf.identity(tf.nn.embedding_lookup(emb, t_ids), name="out")
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            frozen = tf.graph_util.convert_variables_to_constants(s, g.as_graph_def(),
                                                                  ["out"])
            want = s.run("out:0", {t_ids: ids})
    ft = flowrt_module()
    gd = ft.GraphDef.FromString(frozen.SerializeToString())
    with ft.Graph().as_default():
        ft.import_graph_def(gd, name="")
        with ft.Session() as s:
            np.testing.assert_allclose(s.run("out:0", {"ids:0": ids}), want, rtol=1e-6)
