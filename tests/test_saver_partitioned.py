"""Partitioned variables in checkpoints: each part saved as a slice of the full tensor
(TF's slice specs), restored into any partitioning, read whole by the checkpoint API."""
from __future__ import annotations

import os

import numpy as np
import pytest

import flowrt as tf
from flowrt import checkpoint as ckpt
from flowrt.training import saver as sv


def _save(tmp_path, parts, shape=(6, 2), sharded=False):
    g = tf.Graph()
    with g.as_default():
        emb = tf.get_variable("emb", list(shape), partitioner=tf.fixed_size_partitioner(parts))
        w = tf.get_variable("w", [3], initializer=tf.ones_initializer())
        saver = tf.train.Saver(sharded=sharded)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            full = sess.run(emb.as_tensor())
            path = saver.save(sess, os.path.join(str(tmp_path), "m"))
    return path, full


@pytest.mark.parametrize("sharded", [False, True])
def test_saved_under_full_name(tmp_path, sharded):
    path, full = _save(tmp_path, 3, sharded=sharded)
    assert tf.train.list_variables(path) == [("emb", [6, 2]), ("w", [3])]
    np.testing.assert_array_equal(tf.train.load_variable(path, "emb"), full)
    r = tf.train.NewCheckpointReader(path)
    assert r.has_tensor("emb") and not r.has_tensor("emb/part_0")
    assert r.get_variable_to_dtype_map()["emb"] == tf.float32
    # TF's DebugString: a line per row (slices under their binary keys), no header
    lines = r.debug_string().splitlines()
    assert lines[-1] == b"w (DT_FLOAT) [3]" and len(lines) == 4
    assert all(ln.startswith(b"\x00emb\x00") and ln.endswith(b" (DT_FLOAT) [2,2]")
               for ln in lines[:3])


@pytest.mark.parametrize("parts", [1, 2, 4])
def test_restore_into_other_partitioning(tmp_path, parts):
    path, full = _save(tmp_path, 3)
    g = tf.Graph()
    with g.as_default():
        emb = tf.get_variable("emb", [6, 2], partitioner=tf.fixed_size_partitioner(parts))
        tf.get_variable("w", [3])
        saver = tf.train.Saver()
        with tf.Session() as sess:
            saver.restore(sess, path)
            np.testing.assert_array_equal(sess.run(emb.as_tensor()), full)


def test_restore_whole_variable_from_slices_and_back(tmp_path):
    path, full = _save(tmp_path, 2)
    g = tf.Graph()
    with g.as_default():
        emb = tf.get_variable("emb", [6, 2])
        saver = tf.train.Saver([emb])
        with tf.Session() as sess:
            saver.restore(sess, path)
            np.testing.assert_array_equal(sess.run(emb), full)
            p2 = saver.save(sess, os.path.join(str(tmp_path), "whole"))
    g = tf.Graph()
    with g.as_default():
        emb = tf.get_variable("emb", [6, 2], partitioner=tf.fixed_size_partitioner(3))
        saver = tf.train.Saver()
        with tf.Session() as sess:
            saver.restore(sess, p2)  # slices of a tensor saved whole
            np.testing.assert_array_equal(sess.run(emb.as_tensor()), full)


def test_var_list_forms(tmp_path):
    g = tf.Graph()
    with g.as_default():
        emb = tf.get_variable("emb", [4, 2], partitioner=tf.fixed_size_partitioner(2))
        assert list(sv.op_list_to_dict([emb])) == ["emb"]
        assert list(sv.op_list_to_dict(list(emb))) == ["emb"]
        specs = [s.specs[0].slice_spec for s in sv.saveable_objects_for_op(emb, "emb")]
        assert specs == ["4 2 0,2:0,2", "4 2 2,2:0,2"]
        tf.train.Saver({"other": emb})
        with pytest.raises(ValueError, match="Mixing slices and non-slices"):
            sv.op_list_to_dict([tf.get_variable("emb2", [1]), _slice_named(emb, "emb2")])
        with pytest.raises(ValueError, match="Slices must all be slices"):
            sv.saveable_objects_for_op([tf.get_variable("x", [1])], "x")


def _slice_named(pv, name):
    v = list(pv)[0]
    info = v._get_save_slice_info()
    w = tf.get_variable(name + "_part", [2, 2])
    w._set_save_slice_info(type(info)(name, info.full_shape, info.var_offset, info.var_shape))
    return w


def test_slice_errors(tmp_path):
    p = os.path.join(str(tmp_path), "c")
    a = np.ones((2, 2), np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="does not match its slice"):
        ckpt.write_checkpoint(p, ["v"], [a], [tf.float32], ["4 2 0,3:-"])
    with pytest.raises(tf.errors.InvalidArgumentError, match="Overlapping"):
        ckpt.write_checkpoint(p, ["v", "v"], [a, a], [tf.float32] * 2,
                              ["4 2 0,2:-", "4 2 1,2:-"])
    with pytest.raises(tf.errors.InvalidArgumentError, match="outside"):
        ckpt.write_checkpoint(p, ["v"], [a], [tf.float32], ["4 2 3,2:-"])
    ckpt.write_checkpoint(p, ["v"], [a], [tf.float32], ["4 2 0,2:-"])
    r = ckpt.CheckpointReader(p)
    assert r.shape("v") == (4, 2)
    np.testing.assert_array_equal(r.read(["v"], ["4 2 0,1:0,1"])[0], [[1.0]])
    with pytest.raises(tf.errors.NotFoundError, match="not covered"):
        r.read(["v"])
    with pytest.raises(tf.errors.InvalidArgumentError, match="does not match the shape"):
        r.read(["v"], ["5 2 0,1:-"])


def test_restore_shape_mismatch(tmp_path):
    path, _ = _save(tmp_path, 2)
    g = tf.Graph()
    with g.as_default():
        tf.get_variable("emb", [8, 2], partitioner=tf.fixed_size_partitioner(2))
        saver = tf.train.Saver()
        with tf.Session() as sess:
            with pytest.raises(tf.errors.InvalidArgumentError, match="does not match the shape"):
                saver.restore(sess, path)


def test_slice_of_two_dims(tmp_path):
    full = np.arange(24, dtype=np.float64).reshape(4, 6)
    p = os.path.join(str(tmp_path), "d")
    specs = ["4 6 0,2:0,3", "4 6 0,2:3,3", "4 6 2,2:-"]
    vals = [full[:2, :3], full[:2, 3:], full[2:]]
    ckpt.write_checkpoint(p, ["t"] * 3, vals, [tf.float64] * 3, specs)
    r = ckpt.CheckpointReader(p)
    np.testing.assert_array_equal(r.get_tensor("t"), full)
    np.testing.assert_array_equal(r.read(["t"], ["4 6 1,2:2,3"])[0], full[1:3, 2:5])


def test_tf_fixture_restore():
    """A checkpoint written by TensorFlow 1.x (emb partitioned in 3, w whole)."""
    base = os.path.join(os.path.dirname(__file__), "data", "tf_partitioned", "model.ckpt")
    want = np.arange(12, dtype=np.float32).reshape(6, 2)
    assert dict(tf.train.list_variables(base)) == {"emb": [6, 2], "w": [3]}
    np.testing.assert_array_equal(tf.train.load_variable(base, "emb"), want)
    g = tf.Graph()
    with g.as_default():
        emb = tf.get_variable("emb", [6, 2], partitioner=tf.fixed_size_partitioner(2))
        w = tf.get_variable("w", [3])
        saver = tf.train.Saver()
        with tf.Session() as sess:
            saver.restore(sess, base)
            np.testing.assert_array_equal(sess.run(emb.as_tensor()), want)
            np.testing.assert_array_equal(sess.run(w), [1, 2, 3])


def test_slots_of_a_partitioned_variable_are_slices_of_one_slot_variable(tmp_path):
    """As TF's slot_creator: the Adam slots of a partitioned variable are saved as slices
    of ``<full name>/Adam`` and ``/Adam_1`` (the names a TF checkpoint holds), not as
    variables of their own per partition."""
    with tf.Graph().as_default():
        emb = tf.get_variable("emb", [10, 4], initializer=tf.ones_initializer(),
                              partitioner=tf.fixed_size_partitioner(2))
        loss = tf.reduce_sum(tf.nn.embedding_lookup(emb, [1, 7]))
        tf.train.AdamOptimizer(0.1).minimize(loss)
        infos = {v.op.name: v._get_save_slice_info() for v in tf.global_variables()}
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            path = tf.train.Saver().save(sess, str(tmp_path / "m"))
    adam = infos["emb/part_1/Adam"]
    assert (adam.full_name, adam.full_shape, adam.var_offset, adam.var_shape) == \
        ("emb/Adam", [10, 4], [5, 0], [5, 4])
    assert infos["emb/part_0/Adam_1"].full_name == "emb/Adam_1"
    saved = dict(tf.train.list_variables(path))
    assert saved["emb/Adam"] == [10, 4] and saved["emb/Adam_1"] == [10, 4]
    assert not any("part_" in name for name in saved)
