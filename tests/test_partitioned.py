"""Partitioned variables: the three partitioners, tf.get_variable(partitioner=...) (part
names, shapes, save-slice specs, initial values, reuse and its errors), PartitionedVariable
(iteration, conversion, assign), embedding_lookup over the parts, training through them,
and tf.create_partitioned_variables."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf


@pytest.fixture
def g():
    graph = tf.Graph()
    with graph.as_default():
        yield graph


# -- partitioners -----------------------------------------------------------------------
def test_fixed_size_partitioner():
    p = tf.fixed_size_partitioner(3)
    assert p(tf.TensorShape([10, 4]), dtype=tf.float32) == [3, 1]
    assert p(tf.TensorShape([2, 4])) == [2, 1]
    assert tf.fixed_size_partitioner(2, axis=1)(shape=tf.TensorShape([10, 4]),
                                                dtype=tf.float32) == [1, 2]
    with pytest.raises(TypeError):  # as in TF, only the shape is positional
        p(tf.TensorShape([10, 4]), tf.float32)


def test_variable_axis_size_partitioner():
    p = tf.variable_axis_size_partitioner(max_shard_bytes=64)
    # 10 rows of 4 float32 = 16 bytes a row: 4 rows a shard -> 3 shards
    assert p(tf.TensorShape([10, 4]), tf.float32) == [3, 1]
    assert tf.variable_axis_size_partitioner(64, max_shards=2)(
        tf.TensorShape([10, 4]), tf.float32) == [2, 1]
    assert tf.variable_axis_size_partitioner(1)(tf.TensorShape([3, 4]), tf.float64) == [3, 1]
    assert tf.variable_axis_size_partitioner(100, bytes_per_string_element=10)(
        tf.TensorShape([10, 1]), tf.string) == [1, 1]
    with pytest.raises(ValueError, match="must be positive"):
        tf.variable_axis_size_partitioner(0)
    with pytest.raises(ValueError, match="max_shards must be positive"):
        tf.variable_axis_size_partitioner(10, max_shards=-1)
    with pytest.raises(ValueError, match="not fully defined"):
        p(tf.TensorShape([None, 4]), tf.float32)
    with pytest.raises(ValueError, match="not a TensorShape"):
        p([10, 4], tf.float32)
    with pytest.raises(ValueError, match="not a DType"):
        p(tf.TensorShape([10, 4]), "float32")


def test_min_max_variable_partitioner():
    p = tf.min_max_variable_partitioner(max_partitions=4, min_slice_size=64)
    assert p(tf.TensorShape([10, 4]), tf.float32) == [3, 1]  # 160 bytes / 64 -> 3
    assert p(tf.TensorShape([100, 4]), tf.float32) == [4, 1]  # capped
    assert p(tf.TensorShape([2, 100]), tf.float32) == [2, 1]  # capped by the axis
    assert tf.min_max_variable_partitioner()(tf.TensorShape([5]), tf.float32) == [1]


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 40), cols=st.integers(1, 6), shard=st.integers(1, 200),
       maxp=st.integers(1, 8))
def test_partitioners_cover_the_axis(rows, cols, shard, maxp):
    shape = tf.TensorShape([rows, cols])
    for p in (tf.variable_axis_size_partitioner(shard),
              tf.min_max_variable_partitioner(maxp, min_slice_size=shard),
              tf.fixed_size_partitioner(maxp)):
        parts = p(shape=shape, dtype=tf.float32)
        assert parts[1] == 1 and 1 <= parts[0] <= rows


# -- get_variable with a partitioner -----------------------------------------------------
def test_parts_names_shapes_and_slice_specs(g):
    init = np.arange(21, dtype=np.float32).reshape(7, 3)
    with tf.variable_scope("emb"):
        pv = tf.get_variable("w", initializer=tf.constant(init),
                             partitioner=tf.fixed_size_partitioner(3))
    parts = list(pv)
    assert [v.name for v in parts] == ["emb/w/part_0:0", "emb/w/part_1:0", "emb/w/part_2:0"]
    assert [v.shape.as_list() for v in parts] == [[3, 3], [2, 3], [2, 3]]
    infos = [v._get_save_slice_info() for v in parts]
    assert [i.spec for i in infos] == ["7 3 0,3:0,3", "7 3 3,2:0,3", "7 3 5,2:0,3"]
    assert all(i.full_name == "emb/w" for i in infos)
    assert pv.name == "emb/w" and pv.shape.as_list() == [7, 3] and pv.dtype == tf.float32
    assert len(pv) == 3 and pv._get_partitions() == [3, 1]
    assert tf.global_variables() == parts and tf.trainable_variables() == parts
    full = tf.convert_to_tensor(pv)
    assert full.name == "emb/w:0" and full.shape.as_list() == [7, 3]
    assert any(o.name.startswith("emb/w/ConcatPartitions/") for o in g.get_operations())
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(full), init)
        np.testing.assert_array_equal(sess.run(parts[1]), init[3:5])
        np.testing.assert_array_equal(sess.run(pv.as_tensor() * 2.0), init * 2)


def test_initializers_see_partition_info(g):
    seen = []

    def init(shape, dtype=None, partition_info=None):
        seen.append((list(shape), list(partition_info.full_shape),
                     list(partition_info.var_offset),
                     partition_info.single_offset(shape), partition_info.single_slice_dim(shape)))
        return tf.fill(shape, float(partition_info.var_offset[1]))

    pv = tf.get_variable("v", [2, 5], initializer=init,
                         partitioner=tf.fixed_size_partitioner(2, axis=1))
    assert seen == [([2, 3], [2, 5], [0, 0], 0, 1), ([2, 2], [2, 5], [0, 3], 3, 1)]
    assert [v.name for v in pv] == ["v/part_0:0", "v/part_1:0"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(tf.convert_to_tensor(pv)),
                                      [[0, 0, 0, 3, 3]] * 2)
    ops = [o.name for o in g.get_operations()]
    assert any(n.startswith("v/part_0/PartitionedInitializer") for n in ops) or \
        any(n.startswith("v/part_0/Initializer") for n in ops)


def test_scope_partitioner_default_initializer_and_scalars(g):
    with tf.variable_scope("s", partitioner=tf.fixed_size_partitioner(2)):
        pv = tf.get_variable("w", [4, 2])
        s = tf.get_variable("scalar", [])
    assert isinstance(s, tf.Variable) and [v.name for v in pv] == ["s/w/part_0:0",
                                                                   "s/w/part_1:0"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        full = sess.run(tf.convert_to_tensor(pv))
    bound = np.sqrt(6.0 / (4 + 2))  # glorot over the full shape
    assert full.shape == (4, 2) and np.all(np.abs(full) <= bound)


def test_reuse(g):
    p = tf.fixed_size_partitioner(2)
    with tf.variable_scope("r"):
        pv = tf.get_variable("w", [4, 2], partitioner=p)
    with tf.variable_scope("r", reuse=True):
        assert tf.get_variable("w", [4, 2], partitioner=p) is pv
        assert tf.get_variable("w") is pv  # no partitioner needed to reuse
        with pytest.raises(ValueError, match="specified partitions"):
            tf.get_variable("w", [4, 2], partitioner=tf.fixed_size_partitioner(4))
        with pytest.raises(ValueError, match="specified shape"):
            tf.get_variable("w", [5, 2], partitioner=p)
        with pytest.raises(ValueError, match="specified dtype"):
            tf.get_variable("w", [4, 2], dtype=tf.int32, partitioner=p)
        with pytest.raises(ValueError, match="does not exist"):
            tf.get_variable("nope", [4, 2], partitioner=p)
    with tf.variable_scope("r", reuse=tf.AUTO_REUSE):
        assert tf.get_variable("w", [4, 2], partitioner=p) is pv
    with tf.variable_scope("r"):
        with pytest.raises(ValueError, match="already exists"):
            tf.get_variable("w", [4, 2], partitioner=p)
        with pytest.raises(ValueError, match="partitioned version of the variable"):
            tf.get_variable("w", [4, 2])
        tf.get_variable("plain", [4, 2])
        with pytest.raises(ValueError, match="unpartitioned version"):
            tf.get_variable("plain", [4, 2], partitioner=p)


def test_partitioner_errors(g):
    with pytest.raises(ValueError, match="Partitioner must be callable"):
        tf.get_variable("a", [4], partitioner=3)
    with pytest.raises(ValueError, match="must be fully defined"):
        tf.get_variable("b", [None, 2], partitioner=tf.fixed_size_partitioner(2))
    with pytest.raises(ValueError, match="does not match the Variable's rank"):
        tf.get_variable("c", [4, 2], partitioner=lambda shape, dtype: [2])
    with pytest.raises(ValueError, match="zero partitions"):
        tf.get_variable("d", [4, 2], partitioner=lambda shape, dtype: [0, 1])
    with pytest.raises(ValueError, match="along one dimension"):
        tf.get_variable("e", [4, 2], partitioner=lambda shape, dtype: [2, 2])
    with pytest.raises(ValueError, match="must return a sequence"):
        tf.get_variable("f", [4, 2], partitioner=lambda shape, dtype: 2)


def test_assign_and_conversion_errors(g):
    pv = tf.get_variable("a", [5, 2], initializer=tf.zeros_initializer(),
                         partitioner=tf.fixed_size_partitioner(2))
    value = np.arange(10, dtype=np.float32).reshape(5, 2)
    ops = pv.assign(value)
    assert len(ops) == 2
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(ops)
        np.testing.assert_array_equal(sess.run(tf.convert_to_tensor(pv)), value)
        sess.run(pv.assign_add(value))
        sess.run(pv.assign_sub([np.ones((3, 2), np.float32), np.ones((2, 2), np.float32)]))
        np.testing.assert_array_equal(sess.run(tf.convert_to_tensor(pv)), value * 2 - 1)
    with pytest.raises(ValueError, match="Incompatible type conversion"):
        tf.convert_to_tensor(pv, dtype=tf.int32)
    with pytest.raises(NotImplementedError, match="reference"):
        tf.convert_to_tensor(pv, as_ref=True)
    from flowrt.training.partitioned import PartitionedVariable
    with pytest.raises(ValueError, match="may not be empty"):
        PartitionedVariable("x", [1], tf.float32, [], [1])
    with pytest.raises(TypeError, match="not a list or tuple"):
        PartitionedVariable("x", [1], tf.float32, list(pv), 1)


def test_embedding_lookup_and_training_over_parts(g):
    init = np.arange(12, dtype=np.float32).reshape(6, 2)
    pv = tf.get_variable("emb", initializer=tf.constant(init),
                         partitioner=tf.fixed_size_partitioner(3))
    ids = [[5, 0], [3, 3]]
    div = tf.nn.embedding_lookup(list(pv), ids, partition_strategy="div")
    loss = tf.reduce_sum(div)
    grads = tf.gradients(loss, list(pv))
    assert all(isinstance(x, tf.IndexedSlices) for x in grads)
    train = tf.train.GradientDescentOptimizer(1.0).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(div), init[ids])
        sess.run(train)
        want = init.copy()
        np.subtract.at(want, np.array(ids).ravel(), 1.0)
        np.testing.assert_array_equal(sess.run(tf.convert_to_tensor(pv)), want)


def test_create_partitioned_variables(g):
    parts = tf.create_partitioned_variables([6, 2], [3, 1], tf.ones_initializer(),
                                            name="cpv")
    assert [v.name for v in parts] == ["cpv/part_0:0", "cpv/part_1:0", "cpv/part_2:0"]
    parts2 = tf.create_partitioned_variables([4], [2], np.arange(4, dtype=np.float32))
    assert [v.name for v in parts2] == ["PartitionedVariable/part_0:0",
                                        "PartitionedVariable/part_1:0"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(parts2[1]), [2, 3])
    with pytest.raises(ValueError, match="must have the length"):
        tf.create_partitioned_variables([4, 2], [2], tf.ones_initializer())
    with pytest.raises(ValueError, match="rank at least 1"):
        tf.create_partitioned_variables([], [], tf.ones_initializer())
