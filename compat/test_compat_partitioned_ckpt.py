"""Partitioned variables in checkpoints against TensorFlow: TF saves a partitioned
variable (slices of one full tensor); flowrt lists, loads and restores it into other
partitionings, and both build the same save specs and part names."""
from __future__ import annotations

import os

import numpy as np
import pytest

from compat_harness import flowrt_module, tf_module

FULL = np.arange(40, dtype=np.float32).reshape(10, 4)


def _tf_save(tmp_path, parts):
    tf = tf_module()
    with tf.Graph().as_default():
        emb = tf.get_variable("emb", [10, 4], partitioner=tf.fixed_size_partitioner(parts))
        tf.get_variable("w", initializer=tf.constant([1.0, 2.0]))
        assign = emb.assign(tf.constant(FULL))
        saver = tf.train.Saver()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(assign)
            return saver.save(s, os.path.join(str(tmp_path), "tf.ckpt"),
                              write_meta_graph=False)


@pytest.mark.parametrize("saved,restored", [(3, 2), (2, 4), (4, 1)])
def test_flowrt_restores_tf_partitioned(tmp_path, saved, restored):
    path = _tf_save(tmp_path, saved)
    ft = flowrt_module()
    tf = tf_module()
    assert ft.train.list_variables(path) == tf.train.list_variables(path)
    np.testing.assert_array_equal(ft.train.load_variable(path, "emb"),
                                  tf.train.load_variable(path, "emb"))
    with ft.Graph().as_default():
        emb = ft.get_variable("emb", [10, 4], partitioner=ft.fixed_size_partitioner(restored))
        w = ft.get_variable("w", [2])
        saver = ft.train.Saver()
        with ft.Session() as s:
            saver.restore(s, path)
            np.testing.assert_array_equal(s.run(emb.as_tensor()), FULL)
            np.testing.assert_array_equal(s.run(w), [1.0, 2.0])


def test_same_part_names_and_specs():
    out = []
    for m in (tf_module(), flowrt_module()):
        with m.Graph().as_default():
            emb = m.get_variable("emb", [10, 4], partitioner=m.fixed_size_partitioner(3))
            out.append([(v.name, v.shape.as_list(), v._get_save_slice_info().spec)
                        for v in emb])
    assert out[0] == out[1]


def test_restore_shape_mismatch_is_invalid_argument(tmp_path):
    path = _tf_save(tmp_path, 2)
    for m in (tf_module(), flowrt_module()):
        with m.Graph().as_default():
            m.get_variable("emb", [12, 4], partitioner=m.fixed_size_partitioner(2))
            saver = m.train.Saver(m.global_variables()[:2])
            with m.Session() as s:
                with pytest.raises(m.errors.InvalidArgumentError):
                    saver.restore(s, path)
