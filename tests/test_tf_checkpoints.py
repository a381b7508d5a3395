"""Checkpoints TensorFlow wrote (tests/data/tf_ckpt, made by
compat/make_tf_checkpoint_fixtures.py) restored without TensorFlow: several dtypes, a
string variable, a partitioned embedding, Adam slots and a global step, then training
on with TF's losses; a V1 checkpoint; init_from_checkpoint and warm_start; renames,
reshape and the errors of a dtype or shape mismatch."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import flowrt as tf
from flowrt import errors

DATA = Path(__file__).resolve().parent / "data" / "tf_ckpt"
MODEL = json.loads((DATA / "model.json").read_text())
V1 = json.loads((DATA / "v1.json").read_text())


def _expected(name):
    d = MODEL["values"][name]
    if d["dtype"] == "string":
        return np.array([bytes.fromhex(x) for x in d["hex"]], dtype=object).reshape(d["shape"])
    return np.array(d["value"], dtype=tf.as_dtype(d["dtype"]).np).reshape(d["shape"])


def _build():
    """The model of make_tf_checkpoint_fixtures.py."""
    x = np.array(MODEL["x"], np.float32)
    ids = np.array(MODEL["ids"], np.int64)
    y = np.array(MODEL["y"], np.float32)
    gs = tf.train.get_or_create_global_step()
    emb = tf.get_variable("emb", [12, 4], partitioner=tf.fixed_size_partitioner(3))
    w = tf.get_variable("dense/w", [4, 1])
    b = tf.get_variable("dense/b", [1], initializer=tf.zeros_initializer())
    tf.get_variable("counter", [], tf.int32, trainable=False)
    tf.get_variable("scale64", [2], tf.float64, trainable=False)
    tf.get_variable("flags", [3], tf.bool, trainable=False)
    tf.get_variable("vocab", [3], tf.string, trainable=False,
                    initializer=tf.constant_initializer(["", "", ""]))
    h = tf.nn.embedding_lookup(emb, tf.constant(ids)) * tf.constant(x)
    loss = tf.reduce_mean(tf.square(tf.matmul(h, w) + b - tf.constant(y)))
    train = tf.train.AdamOptimizer(0.05).minimize(loss, global_step=gs)
    return loss, train, gs


def test_reader_sees_tfs_values():
    prefix = str(DATA / "model" / "model.ckpt-3")
    r = tf.train.NewCheckpointReader(prefix)
    assert sorted(r.get_variable_to_shape_map()) == sorted(MODEL["values"])
    for name in MODEL["values"]:
        got = r.get_tensor(name)
        want = _expected(name)
        assert np.array_equal(np.asarray(got), want), name
        assert r.get_variable_to_dtype_map()[name] == tf.as_dtype(MODEL["values"][name]["dtype"])
    assert r.debug_string() == bytes.fromhex(MODEL["debug_string_hex"])
    assert tf.train.latest_checkpoint(str(DATA / "model")) == prefix
    assert dict(tf.train.list_variables(str(DATA / "model")))["emb"] == [12, 4]
    assert tf.train.load_variable(str(DATA / "model"), "global_step") == 3


def test_restore_and_train_on_with_tfs_losses():
    with tf.Graph().as_default():
        loss, train, gs = _build()
        saver = tf.train.Saver()
        with tf.Session() as s:
            saver.restore(s, str(DATA / "model" / "model.ckpt-3"))
            assert s.run(gs) == 3
            assert s.run(tf.get_default_graph().get_tensor_by_name("vocab:0")).tolist() == \
                [b"a", b"bb", b""]
            losses = [float(s.run([loss, train])[0]) for _ in range(3)]
    np.testing.assert_allclose(losses, MODEL["losses_after"], rtol=1e-5)


def test_v1_checkpoint_restores():
    path = str(DATA / "v1" / "model.ckpt")
    assert tf.train.checkpoint_exists(path)
    assert [list(x) for x in tf.train.list_variables(path)] == \
        [list(x) for x in sorted(V1["shapes"])]
    with tf.Graph().as_default():
        emb = tf.get_variable("emb", [6, 2], partitioner=tf.fixed_size_partitioner(3))
        w = tf.get_variable("w", [3])
        n = tf.get_variable("n", [], tf.int64)
        sv = tf.get_variable("s", [2], tf.string, initializer=tf.constant_initializer(["", ""]))
        with tf.Session() as s:
            tf.train.Saver().restore(s, path)
            np.testing.assert_allclose(s.run(emb.as_tensor()), V1["emb"], rtol=1e-6)
            assert s.run(w).tolist() == V1["w"] and s.run(n) == 7
            assert s.run(sv).tolist() == [b"x", b"yz"]


def test_v1_save_and_restore_ops(tmp_path):
    path = str(tmp_path / "v1.ckpt")
    with tf.Graph().as_default():
        v = tf.get_variable("v", initializer=tf.constant([[1.0, 2.0], [3.0, 4.0]]))
        saver = tf.train.Saver(write_version=tf.train.SaverDef.V1)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            saver.save(s, path, write_meta_graph=False)
            s.run(v.assign(tf.zeros([2, 2])))
            saver.restore(s, path)
            assert s.run(v).tolist() == [[1.0, 2.0], [3.0, 4.0]]
            ops = {op.type for op in tf.get_default_graph().get_operations()}
            assert "SaveSlices" in ops
    r = tf.train.NewCheckpointReader(path)
    assert r.get_tensor("v").tolist() == [[1.0, 2.0], [3.0, 4.0]]
    with tf.Graph().as_default():
        t = tf.raw_ops.RestoreSlice(file_pattern=path, tensor_name="v",
                                    shape_and_slice="2 2 1,1:-", dt=tf.float32) \
            if hasattr(tf, "raw_ops") else None
        if t is not None:
            with tf.Session() as s:
                assert s.run(t).tolist() == [[3.0, 4.0]]


def test_init_from_checkpoint_map_forms():
    ckpt = str(DATA / "model")
    with tf.Graph().as_default():
        with tf.variable_scope("new"):
            emb = tf.get_variable("emb", [12, 4], partitioner=tf.fixed_size_partitioner(2))
            w = tf.get_variable("dense/w", [4, 1])
            b = tf.get_variable("dense/b", [1])
        other = tf.get_variable("other", [2], tf.float64)
        tf.train.init_from_checkpoint(ckpt, {"dense/": "new/dense/", "emb": emb,
                                             "scale64": "other"})
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            np.testing.assert_array_equal(s.run(emb.as_tensor()), _expected("emb"))
            np.testing.assert_array_equal(s.run(w), _expected("dense/w"))
            np.testing.assert_array_equal(s.run(b), _expected("dense/b"))
            assert s.run(other).tolist() == [0.5, 1.5]
    with tf.Graph().as_default():
        with tf.variable_scope("root"):
            tf.get_variable("dense/w", [4, 1])
            tf.get_variable("counter", [], tf.int32)
        tf.train.init_from_checkpoint(ckpt, {"/": "root/"})
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            assert s.run("root/counter:0") == 5
    with tf.Graph().as_default():
        tf.get_variable("dense/w", [4, 2])
        with pytest.raises(ValueError, match="Shape of variable dense/w"):
            tf.train.init_from_checkpoint(ckpt, {"dense/w": "dense/w"})
        with pytest.raises(ValueError, match="Tensor nope is not found"):
            tf.train.init_from_checkpoint(ckpt, {"nope": "dense/w"})


def test_warm_start_with_rename(tmp_path):
    ckpt = str(DATA / "model")
    with tf.Graph().as_default():
        w2 = tf.get_variable("w2", [4, 1])
        tf.get_variable("dense/b", [1])
        tf.train.warm_start(ckpt, ["w2", "dense/b"], var_name_to_prev_var_name={"w2": "dense/w"})
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            np.testing.assert_array_equal(s.run(w2), _expected("dense/w"))
    old_vocab, new_vocab = tmp_path / "old.txt", tmp_path / "new.txt"
    old_vocab.write_text("\n".join(f"w{i}" for i in range(12)) + "\n")
    new_vocab.write_text("w3\nzz\nw0\n")
    with tf.Graph().as_default():
        e = tf.get_variable("e", [3, 4])
        tf.train.warm_start(ckpt, ["e"], var_name_to_vocab_info={
            "e": tf.train.VocabInfo(str(new_vocab), 3, 0, str(old_vocab))},
            var_name_to_prev_var_name={"e": "emb"})
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got = s.run(e)
    full = _expected("emb")
    np.testing.assert_array_equal(got, np.stack([full[3], np.zeros(4, np.float32), full[0]]))


def test_var_list_dict_rename_and_reshape(tmp_path):
    path = str(DATA / "model" / "model.ckpt-3")
    with tf.Graph().as_default():
        a = tf.get_variable("a", [4, 1])
        flat = tf.get_variable("flat", [4])
        with tf.Session() as s:
            tf.train.Saver({"dense/w": a}).restore(s, path)
            np.testing.assert_array_equal(s.run(a), _expected("dense/w"))
            tf.train.Saver({"dense/w": flat}, reshape=True).restore(s, path)
            np.testing.assert_array_equal(s.run(flat), _expected("dense/w").reshape(-1))


def test_dtype_and_shape_mismatch_name_variable_and_file():
    path = str(DATA / "model" / "model.ckpt-3")
    with tf.Graph().as_default():
        wrong = tf.get_variable("counter", [], tf.float32)
        with tf.Session() as s:
            with pytest.raises(errors.InvalidArgumentError, match="counter.*expected dtype "
                               "float32 does not equal restored dtype int32"):
                tf.train.Saver([wrong]).restore(s, path)
    with tf.Graph().as_default():
        tf.get_variable("dense/w", [3, 1])
        with tf.Session() as s:
            with pytest.raises(errors.InvalidArgumentError,
                               match=re.escape(path) + ".*dense/w.*shapes"):
                tf.train.Saver().restore(s, path)
