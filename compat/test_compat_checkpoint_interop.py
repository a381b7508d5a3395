"""Checkpoints between flowrt and TensorFlow, live, both ways: flowrt saves (sharded or
not, strings, partitioned variables) and TF restores and computes the same outputs; TF
saves a trained model and flowrt restores it and trains on with the same losses; the
same tensors written by both give the same bytes; a big index (many table blocks)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from compat_harness import flowrt_module, tf_module

X = np.random.RandomState(0).randn(8, 4).astype(np.float32)
Y = np.random.RandomState(1).randn(8, 1).astype(np.float32)


def _model(tf):
    gs = tf.train.get_or_create_global_step()
    emb = tf.get_variable("emb", [4, 3], partitioner=tf.fixed_size_partitioner(2),
                          initializer=tf.constant_initializer(0.1))
    w = tf.get_variable("w", [3, 1], initializer=tf.constant_initializer(0.2))
    tf.get_variable("names", [2], tf.string, initializer=tf.constant_initializer(["a", "bc"]),
                    trainable=False)
    pred = tf.matmul(tf.matmul(tf.constant(X), tf.concat(list(emb), 0)), w)
    loss = tf.reduce_mean(tf.square(pred - tf.constant(Y)))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    return loss, train


def _train_save(tf, path, steps, sharded=False):
    with tf.Graph().as_default():
        loss, train = _model(tf)
        saver = tf.train.Saver(sharded=sharded)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for _ in range(steps):
                s.run(train)
            saver.save(s, path, write_meta_graph=False)
            return [float(s.run([loss, train])[0]) for _ in range(3)]


def _restore_train(tf, path):
    with tf.Graph().as_default():
        loss, train = _model(tf)
        saver = tf.train.Saver()
        with tf.Session() as s:
            saver.restore(s, path)
            assert list(s.run(tf.get_default_graph().get_tensor_by_name("names:0"))) == \
                [b"a", b"bc"]
            return [float(s.run([loss, train])[0]) for _ in range(3)]


@pytest.mark.parametrize("sharded", [False, True])
def test_flowrt_saves_tf_restores(tmp_path, sharded):
    ft, tf = flowrt_module(), tf_module()
    path = os.path.join(str(tmp_path), "ft.ckpt")
    want = _train_save(ft, path, 2, sharded)
    got = _restore_train(tf, path)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_tf_saves_flowrt_restores_and_trains_on(tmp_path):
    ft, tf = flowrt_module(), tf_module()
    path = os.path.join(str(tmp_path), "tf.ckpt")
    want = _train_save(tf, path, 2)
    got = _restore_train(ft, path)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_same_tensors_same_bytes(tmp_path):
    ft, tf = flowrt_module(), tf_module()
    names = ["b", "a", "s", "e", "e"]
    specs = ["", "", "", "4 2 0,1:-", "4 2 1,3:-"]
    vals = [np.arange(6, dtype=np.int32).reshape(2, 3), np.float64(1.5),
            np.array([b"x", b"", b"yz"], dtype=object),
            np.ones((1, 2), np.float32), np.zeros((3, 2), np.float32)]
    files = {}
    for name, mod in (("tf", tf), ("ft", ft)):
        with mod.Graph().as_default():
            p = os.path.join(str(tmp_path), name, "c")
            ts = [mod.constant(v) for v in vals]
            if mod is tf:
                op = tf.raw_ops.SaveV2(prefix=p, tensor_names=names, shape_and_slices=specs,
                                       tensors=ts)
            else:
                from flowrt.framework.graph import apply_op  # flowrt has no tf.raw_ops

                op = apply_op("SaveV2", prefix=p, tensor_names=names,
                              shape_and_slices=specs, tensors=ts)
            with mod.Session() as s:
                s.run(op)
        files[name] = [open(p + sfx, "rb").read()
                       for sfx in (".index", ".data-00000-of-00001")]
    assert files["tf"] == files["ft"]


def test_big_index_both_ways(tmp_path):
    ft, tf = flowrt_module(), tf_module()
    n = 1500  # names of ~200 bytes: an index of two data blocks
    for writer, reader in ((ft, tf), (tf, ft)):
        p = os.path.join(str(tmp_path), f"{id(writer)}", "big")
        with writer.Graph().as_default():
            vs = [writer.Variable(np.float32(i), name="s" * 180 + f"/v{i:05d}")
                  for i in range(n)]
            saver = writer.train.Saver(vs)
            with writer.Session() as s:
                s.run(writer.global_variables_initializer())
                saver.save(s, p, write_meta_graph=False)
        r = reader.train.NewCheckpointReader(p)
        assert len(r.get_variable_to_shape_map()) == n
        assert float(r.get_tensor("s" * 180 + "/v01499")) == 1499.0
