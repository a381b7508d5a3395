"""TensorFlow-written meta graphs and frozen graphs (tests/data/tf_meta, made by
compat/make_tf_meta_graph_fixtures.py) import, restore, run and train on without TF, with
the values TF recorded."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import flowrt as tf
from flowrt import errors
from flowrt.proto import graph_def_pb2

DATA = pathlib.Path(__file__).parent / "data" / "tf_meta"
META = str(DATA / "model.ckpt-3.meta")
CKPT = str(DATA / "model.ckpt-3")
E = np.load(DATA / "expected.npz")
FEED = {"ids:0": E["ids"], "x:0": E["x"], "y:0": E["y"]}


def test_import_restores_and_computes_tfs_values() -> None:
    with tf.Graph().as_default() as g:
        saver = tf.train.import_meta_graph(META)
        assert sorted(v.op.name for v in tf.trainable_variables()) == [
            "dense/bias", "dense/kernel", "emb/part_0", "emb/part_1", "w_loop"]
        assert tf.train.get_global_step().op.name == "global_step"
        assert g.get_collection("my_ints") == [3, 4]
        assert g.get_collection("my_floats") == [1.5]
        assert g.get_collection("my_strs") == [b"hello"]
        assert g.get_collection("my_nodes")[0].name == "pred:0"
        emb0 = [v for v in tf.global_variables() if v.op.name == "emb/part_1"][0]
        info = emb0._get_save_slice_info()
        assert (info.full_name, info.full_shape, info.var_offset) == ("emb", [10, 3], [5, 0])
        loss = g.get_collection(tf.GraphKeys.LOSSES)[0]
        train_op = g.get_collection("train_op")[0]
        with tf.Session() as s:
            saver.restore(s, CKPT)
            assert s.run(tf.train.get_global_step()) == 3
            pred, lv = s.run(["pred:0", loss], FEED)
            np.testing.assert_allclose(pred, E["pred"], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(lv, E["loss"], rtol=1e-5)
            more = [s.run([loss, train_op], FEED)[0] for _ in range(3)]
            np.testing.assert_allclose(more, E["more_losses"], rtol=1e-4)
            assert s.run(tf.train.get_global_step()) == 6


def test_new_gradients_of_the_imported_loop_and_a_new_optimizer() -> None:
    with tf.Graph().as_default() as g:
        saver = tf.train.import_meta_graph(META)
        (ctx,) = g.get_collection(tf.GraphKeys.WHILE_CONTEXT)
        assert ctx.name == "loop/while_context"
        w = [v for v in tf.trainable_variables() if v.op.name == "w_loop"][0]
        gw = tf.gradients(tf.reduce_sum(g.get_tensor_by_name("loop/Exit_1:0")), w)[0]
        loss = g.get_collection(tf.GraphKeys.LOSSES)[0]
        sgd = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        with tf.Session() as s:
            saver.restore(s, CKPT)
            np.testing.assert_allclose(s.run(gw, FEED), E["grad_w_loop"], rtol=1e-5)
            losses = [s.run([loss, sgd], FEED)[0] for _ in range(3)]
        assert losses[0] == pytest.approx(float(E["loss"]), rel=1e-5)
        assert losses[2] < losses[0]


def test_queue_runner_is_rebuilt_and_runs() -> None:
    with tf.Graph().as_default() as g:
        tf.train.import_meta_graph(META)
        (qr,) = g.get_collection(tf.GraphKeys.QUEUE_RUNNERS)
        assert [op.name for op in qr.enqueue_ops] == ["fifo_enqueue"]
        assert qr.queue_closed_exception_types == (errors.OutOfRangeError,)
        with tf.Session() as s:
            coord = tf.train.Coordinator()
            threads = qr.create_threads(s, coord=coord, start=True)
            np.testing.assert_array_equal(s.run("dequeued:0"), [1.0, 2.0])
            coord.request_stop()
            s.run(qr.cancel_op)
            coord.join(threads)


def test_clear_devices_and_import_scope() -> None:
    with tf.Graph().as_default() as g:
        saver = tf.train.import_meta_graph(META, clear_devices=True, import_scope="m")
        assert all(op.device == "" for op in g.get_operations())
        assert "m/w_loop:0" in [v.name for v in tf.trainable_variables()]
        assert g.get_collection(tf.GraphKeys.WHILE_CONTEXT)[0].name == "m/loop/while_context"
        feed = {"m/" + k: v for k, v in FEED.items()}
        with tf.Session() as s:
            saver.restore(s, CKPT)
            np.testing.assert_allclose(s.run("m/pred:0", feed), E["pred"], rtol=1e-5,
                                       atol=1e-6)


def test_input_map_replaces_a_placeholder() -> None:
    with tf.Graph().as_default() as g:
        x = tf.constant(E["x"])
        saver = tf.train.import_meta_graph(META, input_map={"x:0": x})
        with tf.Session() as s:
            saver.restore(s, CKPT)
            out = s.run("pred:0", {"ids:0": E["ids"]})
        np.testing.assert_allclose(out, E["pred"], rtol=1e-5, atol=1e-6)


def test_frozen_graph_runs() -> None:
    gd = graph_def_pb2.GraphDef.FromString((DATA / "frozen.pb").read_bytes())
    assert "ParallelDynamicStitch" in {n.op for n in gd.node}
    with tf.Graph().as_default():
        tf.import_graph_def(gd, name="")
        with tf.Session() as s:
            out = s.run("pred:0", {"ids:0": E["ids"], "x:0": E["x"]})
    np.testing.assert_allclose(out, E["frozen_pred"], rtol=1e-5, atol=1e-6)


def test_every_op_type_of_tfs_common_graphs_is_known_but_tf_data_functions() -> None:
    known = set(tf.Graph()._runtime.op_defs)
    found = json.loads((DATA / "op_types.json").read_text())
    for model, types in found.items():
        missing = set(types) - known
        if model == "tf_data":  # function-valued dataset ops (see docs/api/interop.md)
            continue
        assert not missing, (model, sorted(missing))


def test_reexport_of_an_imported_tf_meta_graph_keeps_its_collections(tmp_path) -> None:
    with tf.Graph().as_default():
        tf.train.import_meta_graph(META)
        mg = tf.train.export_meta_graph(str(tmp_path / "again.meta"))
    assert {"variables", "trainable_variables", "global_step", "queue_runners",
            "while_context", "train_op", "losses", "summaries"} <= set(mg.collection_def)
    with tf.Graph().as_default():
        saver = tf.train.import_meta_graph(str(tmp_path / "again.meta"))
        with tf.Session() as s:
            saver.restore(s, CKPT)
            np.testing.assert_allclose(s.run("pred:0", FEED), E["pred"], rtol=1e-5,
                                       atol=1e-6)
