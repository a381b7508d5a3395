"""tf.SparseConditionalAccumulator (TF 1.15): per-index means and sums, TF's ordered
merge of index lists, stale-gradient dropping, global steps, blocking takes, shape
checks and the graph it builds."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import flowrt as tf


@pytest.fixture
def g():
    graph = tf.Graph()
    with graph.as_default():
        yield graph


def test_exports_and_graph(g):
    assert tf.sparse.SparseConditionalAccumulator is tf.SparseConditionalAccumulator
    assert issubclass(tf.SparseConditionalAccumulator, tf.ConditionalAccumulatorBase)
    acc = tf.SparseConditionalAccumulator(tf.float32, shape=[5, 2], name="acc")
    assert acc.name == "acc" and acc.dtype == tf.float32
    ref = acc.accumulator_ref
    assert ref.op.type == "SparseConditionalAccumulator" and ref.dtype == tf.string._as_ref
    assert ref.shape.as_list() == [2]
    t = acc.take_grad(1)
    assert t._fields == ("indices", "values", "shape")
    assert [x.dtype for x in t] == [tf.int64, tf.float32, tf.int64]
    assert t.indices.op.type == "SparseAccumulatorTakeGradient"
    assert acc.num_accumulated().op.name == "acc_NumAccumulated"
    s = acc.take_indexed_slices_grad(1)
    assert isinstance(s, tf.IndexedSlices)


def test_mean_is_per_index(g):
    acc = tf.SparseConditionalAccumulator(tf.float32, shape=[5, 2])
    a1 = acc.apply_grad([0, 3], [[1., 2.], [3., 4.]], grad_shape=[5, 2])
    a2 = acc.apply_indexed_slices_grad(tf.IndexedSlices(
        tf.constant([[10., 20.], [5., 5.]]), tf.constant([1, 3]), tf.constant([5, 2])))
    t = acc.take_indexed_slices_grad(2)
    with tf.Session() as s:
        s.run(a1)
        s.run(a2)
        assert s.run(acc.num_accumulated()) == 2
        r = s.run(t)
        assert s.run(acc.num_accumulated()) == 0
    np.testing.assert_array_equal(r.indices, [0, 1, 3])
    # index 3 came in both gradients: (3 + 5) / 2 and (4 + 5) / 2; the others once
    np.testing.assert_allclose(r.values, [[1, 2], [10, 20], [4, 4.5]])
    assert r.values.dtype == np.float32
    np.testing.assert_array_equal(r.dense_shape, [5, 2])


def test_sum_and_unknown_first_dim(g):
    acc = tf.SparseConditionalAccumulator(tf.float64, reduction_type="SUM")
    ops = [acc.apply_grad([2], [[1.0, 1.0]]), acc.apply_grad([0, 2], [[1., 0.], [2., 3.]])]
    t = acc.take_grad(2)
    with tf.Session() as s:
        s.run(ops)
        idx, vals, shape = s.run(t)
    np.testing.assert_array_equal(idx, [0, 2])
    np.testing.assert_array_equal(vals, [[1, 0], [3, 4]])
    np.testing.assert_array_equal(shape, [-1, 2])  # first dim: the shape attr's, unknown


def test_merge_keeps_tf_order_for_unsorted_indices(g):
    # TF walks both index lists as if sorted: unsorted input keeps its order
    acc = tf.SparseConditionalAccumulator(tf.float32, reduction_type="SUM")
    ops = [acc.apply_grad([3, 1], [[1.0], [2.0]]), acc.apply_grad([2], [[5.0]])]
    t = acc.take_grad(2)
    with tf.Session() as s:
        s.run(ops[0])
        s.run(ops[1])
        idx, vals, _ = s.run(t)
    np.testing.assert_array_equal(idx, [2, 3, 1])
    np.testing.assert_array_equal(vals[:, 0], [5, 1, 2])


def test_stale_gradients_dropped_and_global_step(g):
    acc = tf.SparseConditionalAccumulator(tf.float32, shape=[4])
    step = tf.placeholder(tf.int64, [])
    apply = acc.apply_grad([1], [7.0], local_step=step)
    n = acc.num_accumulated()
    t = acc.take_grad(1)
    with tf.Session() as s:
        s.run(apply, {step: 0})
        s.run(t)  # global step is now 1
        s.run(apply, {step: 0})
        assert s.run(n) == 0
        s.run(apply, {step: 1})
        assert s.run(n) == 1
        s.run(acc.set_global_step(5))
        s.run(apply, {step: 4})
        assert s.run(n) == 1
        s.run(apply, {step: 5})
        assert s.run(n) == 2


def test_take_blocks_until_enough(g):
    acc = tf.SparseConditionalAccumulator(tf.float32, shape=[3])
    apply = acc.apply_grad([0], [1.0])
    t = acc.take_grad(2)
    with tf.Session() as s:
        s.run(apply)
        out = []
        th = threading.Thread(target=lambda: out.append(s.run(t)))
        th.start()
        time.sleep(0.2)
        assert not out
        s.run(apply)
        th.join(10)
    np.testing.assert_array_equal(out[0].values, [1.0])


@pytest.mark.parametrize("build, msg", [
    (lambda acc: acc.apply_grad([7], [[1.0, 1.0]]), "index of slice 0 exceeded limits"),
    (lambda acc: acc.apply_grad([0], [[1.0, 1.0, 1.0]]), "expected values dim 1 to be 2"),
    (lambda acc: acc.apply_grad([0], [[1.0, 1.0]], grad_shape=[4, 2]),
     "expected shape dim 0 to be 5, got 4"),
    (lambda acc: acc.apply_grad([0, 1], [[1.0, 1.0]]), "Expected 2 non-empty input values"),
    (lambda acc: acc.take_grad(0), "num_required must be positive"),
])
def test_run_time_errors(g, build, msg):
    acc = tf.SparseConditionalAccumulator(tf.float32, shape=[5, 2])
    op = build(acc)
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match=msg):
            s.run(op)


def test_values_rank_must_match_accumulated(g):
    acc = tf.SparseConditionalAccumulator(tf.float32)
    a = acc.apply_grad([0], [[1.0, 2.0]])
    b = acc.apply_grad([0], [1.0])
    with tf.Session() as s:
        s.run(a)
        with pytest.raises(tf.errors.InvalidArgumentError, match="expected values rank 2"):
            s.run(b)


def test_dtype_mismatch_is_an_error(g):
    acc = tf.SparseConditionalAccumulator(tf.float32)
    with pytest.raises((TypeError, ValueError)):
        acc.apply_grad([0], tf.constant([1], tf.int32))
