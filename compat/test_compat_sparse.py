"""SparseTensor and tf.sparse programs: feeds and fetches of sparse tensors, every sparse
op (values, dtypes, static shapes, op types), run-time errors, and gradients."""
from __future__ import annotations

import numpy as np
import pytest

from compat_harness import Run, Steps, run_both

IND = [[0, 0], [0, 2], [1, 1], [2, 0]]
VALS = np.array([0.5, -1.0, 2.0, 3.0], np.float32)


def _progs(d: dict) -> list:
    return [pytest.param(v, id=k) for k, v in sorted(d.items())]


def sp(tf, ind=IND, vals=VALS, shape=(3, 3)):
    return tf.SparseTensor(ind, vals, list(shape))


def _placeholder_feed(tf):
    x = tf.sparse_placeholder(tf.float32)
    y = tf.sparse.reduce_sum(x)
    v = (np.array([[3, 2, 0], [4, 5, 1]], np.int64), np.array([1.0, 2.0], np.float32),
         np.array([7, 9, 2], np.int64))
    return Steps(Run(y, {x: tf.SparseTensorValue(*v)}), Run(y, {x: v}), Run(x, {x: v}),
                 Run([x, tf.sparse.to_dense(x)], {x: tf.SparseTensorValue(*v)}))


def _placeholder_shaped(tf):
    x = tf.sparse.placeholder(tf.float32, shape=[None, 3], name="p")
    d = tf.sparse.to_dense(x)
    return Run([x.indices, x.values, x.dense_shape, d], {x: ([[0, 1]], [5.0], [2, 3])})


def _fed_components(tf):
    i = tf.placeholder(tf.int64)
    v = tf.placeholder(tf.float32)
    s = tf.placeholder(tf.int64)
    t = tf.SparseTensor(i, v, s)
    return Run([t, tf.sparse.to_dense(t)], {t: ([[1]], [4.0], [3])})


def _nested_fetch(tf):
    t = sp(tf)
    return {"a": [t, (t.values, t)], "b": t.dense_shape}


FEED_FETCH = {
    "fetch_sparse": lambda tf: sp(tf),
    "fetch_nested": _nested_fetch,
    "placeholder_feeds": _placeholder_feed,
    "placeholder_shaped": _placeholder_shaped,
    "fed_components": _fed_components,
    "sparse_tensor_value_input": lambda tf: tf.sparse.to_dense(
        tf.SparseTensorValue([[0, 1]], [2.0], [2, 2])),
    "placeholder_unfed": lambda tf: tf.sparse.reduce_sum(tf.sparse_placeholder(tf.float32)),
}


@pytest.mark.parametrize("program", _progs(FEED_FETCH))
def test_feed_fetch(program):
    run_both(program)


OPS = {
    "to_dense": lambda tf: tf.sparse.to_dense(sp(tf)),
    "to_dense_default": lambda tf: tf.sparse_tensor_to_dense(sp(tf), default_value=7.0),
    "to_dense_unordered": lambda tf: tf.sparse.to_dense(sp(tf, IND[::-1])),
    "to_dense_unordered_ok": lambda tf: tf.sparse.to_dense(sp(tf, IND[::-1]),
                                                           validate_indices=False),
    "to_dense_repeated": lambda tf: tf.sparse.to_dense(sp(tf, [[0, 0], [0, 0]], [1.0, 2.0])),
    "to_dense_oob": lambda tf: tf.sparse.to_dense(sp(tf, [[0, 0], [5, 0]], [1.0, 2.0])),
    "sparse_to_dense_scalar": lambda tf: tf.sparse_to_dense(2, [4], 7),
    "sparse_to_dense_vector": lambda tf: tf.sparse_to_dense([0, 3], [5], [1, 2], -1),
    "sparse_to_dense_matrix": lambda tf: tf.sparse_to_dense([[0, 1], [2, 0]], [3, 2], 1.5),
    "sparse_to_dense_bad_values": lambda tf: tf.sparse_to_dense([[0, 0], [1, 1]], [2, 2],
                                                                [1.0, 2.0, 3.0]),
    "from_dense": lambda tf: tf.sparse.from_dense(np.array([[0, 3], [4, 0]], np.int32)),
    "reorder": lambda tf: tf.sparse.reorder(sp(tf, IND[::-1])),
    "reorder_unknown_shape": lambda tf: (lambda s: Run(tf.sparse_reorder(
        tf.SparseTensor(IND[::-1], VALS, s)), {s: [3, 3]}))(tf.placeholder(tf.int64, [2])),
    "add": lambda tf: tf.sparse.add(sp(tf), sp(tf, [[0, 0], [2, 2]], [1.0, 2.0])),
    "add_thresh": lambda tf: tf.sparse.add(sp(tf), sp(tf, [[0, 0], [0, 2]], [-0.4, 1.2]),
                                           threshold=0.3),
    "add_thresh_v1": lambda tf: tf.sparse_add(sp(tf), sp(tf, [[0, 0]], [-0.4]), thresh=0.2),
    "add_dense": lambda tf: tf.sparse.add(sp(tf), np.ones((3, 3), np.float32)),
    "add_dense_first": lambda tf: tf.sparse.add(np.ones((3, 3), np.float32), sp(tf)),
    "add_shape_mismatch": lambda tf: tf.sparse.add(
        sp(tf), tf.SparseTensor([[0, 0]], [1.0], tf.placeholder_with_default(
            np.int64([3, 4]), [2]))),
    "maximum": lambda tf: tf.sparse.maximum(sp(tf), sp(tf, [[0, 0], [2, 2]], [1.0, -2.0])),
    "minimum": lambda tf: tf.sparse_minimum(sp(tf), sp(tf, [[0, 0], [2, 2]], [1.0, -2.0])),
    "reduce_sum_all": lambda tf: tf.sparse.reduce_sum(sp(tf)),
    "reduce_sum_axis": lambda tf: [tf.sparse.reduce_sum(sp(tf), 1),
                                   tf.sparse_reduce_sum(sp(tf), -2, keepdims=True),
                                   tf.sparse.reduce_sum(sp(tf), [0, 1], keep_dims=True)],
    "reduce_max": lambda tf: [tf.sparse.reduce_max(sp(tf)), tf.sparse.reduce_max(sp(tf), 1),
                              tf.sparse_reduce_max(sp(tf, [[0, 1], [1, 1]], [-1.0, -2.0]), 0)],
    "reduce_sparse": lambda tf: [tf.sparse.reduce_sum_sparse(sp(tf), 0),
                                 tf.sparse_reduce_max_sparse(sp(tf), 1, keepdims=True)],
    "reduce_bad_axis": lambda tf: tf.sparse.reduce_sum(sp(tf), 3),
    "matmul": lambda tf: tf.sparse.sparse_dense_matmul(sp(tf), np.arange(6.0, dtype=np.float32)
                                                       .reshape(3, 2)),
    "matmul_adjoint": lambda tf: [
        tf.sparse.matmul(sp(tf), np.ones((2, 3), np.float32), adjoint_b=True),
        tf.sparse_tensor_dense_matmul(sp(tf), np.ones((3, 2), np.float32), adjoint_a=True)],
    "matmul_dense_sparse": lambda tf: tf.sparse.matmul(np.ones((2, 3), np.float32), sp(tf)),
    "matmul_oob": lambda tf: tf.sparse.matmul(sp(tf, [[0, 7]], [1.0]),
                                              np.ones((3, 2), np.float32)),
    "matmul_static_mismatch": lambda tf: tf.sparse.matmul(sp(tf), tf.ones([4, 2])),
    "concat": lambda tf: tf.sparse.concat(1, [sp(tf), sp(tf, [[1, 0]], [9.0], (3, 2))]),
    "concat_axis0": lambda tf: tf.sparse_concat(0, [sp(tf), sp(tf)]),
    "concat_expand": lambda tf: tf.sparse.concat(1, [sp(tf), sp(tf, [[3, 0]], [9.0], (4, 1))],
                                                 expand_nonconcat_dim=True),
    "concat_mismatch": lambda tf: tf.sparse.concat(0, [sp(tf), sp(tf, [[0, 0]], [1.0],
                                                                      (3, 4))]),
    "concat_strings": lambda tf: tf.sparse.concat(1, [
        tf.SparseTensor([[0, 2], [1, 0], [1, 1]], ["a", "b", "c"], [2, 3]),
        tf.SparseTensor([[0, 1], [0, 2]], ["d", "e"], [2, 4])]),
    "reshape": lambda tf: tf.sparse.reshape(sp(tf), [9]),
    "reshape_infer": lambda tf: tf.sparse_reshape(sp(tf), [-1, 1, 3]),
    "reshape_bad_static": lambda tf: tf.sparse.reshape(sp(tf), [4, 2]),
    "reshape_bad_fed": lambda tf: (lambda p: Run(tf.sparse.reshape(sp(tf), p), {p: [4, 2]}))(
        tf.placeholder(tf.int64, [2])),
    "slice": lambda tf: tf.sparse.slice(sp(tf), [0, 1], [2, 5]),
    "split": lambda tf: tf.sparse.split(sp_input=sp(tf), num_split=2, axis=1),
    "split_v1_names": lambda tf: tf.sparse_split(sp_input=sp(tf), num_split=3, split_dim=0),
    "split_too_many": lambda tf: tf.sparse.split(sp_input=sp(tf), num_split=4, axis=1),
    "transpose": lambda tf: tf.sparse.transpose(sp(tf)),
    "transpose_perm": lambda tf: tf.sparse_transpose(tf.SparseTensor(
        [[0, 1, 2], [1, 0, 0]], [1, 2], [2, 3, 4]), [2, 0, 1]),
    "fill_empty_rows": lambda tf: tf.sparse.fill_empty_rows(sp(tf, [[1, 0], [3, 1]], [5.0, 7.0],
                                                               (5, 2)), -1.0),
    "retain": lambda tf: tf.sparse.retain(sp(tf), [True, False, True, False]),
    "reset_shape": lambda tf: [tf.sparse.reset_shape(sp(tf)),
                               tf.sparse_reset_shape(sp(tf), [5, 6])],
    "reset_shape_too_small": lambda tf: tf.sparse.reset_shape(sp(tf), [2, 2]),
    "softmax": lambda tf: tf.sparse.softmax(sp(tf)),
    "expand_dims": lambda tf: [tf.sparse.expand_dims(sp(tf), 0),
                               tf.sparse.expand_dims(sp(tf), -1)],
    "eye": lambda tf: [tf.sparse.eye(3), tf.sparse.eye(2, 4, dtype=tf.int32)],
    "merge": lambda tf: tf.sparse.merge(
        tf.SparseTensor([[0, 0], [0, 1], [1, 0]], tf.constant([3, 1, 2], tf.int64), [2, 2]),
        tf.SparseTensor([[0, 0], [0, 1], [1, 0]], [0.5, 0.25, 1.0], [2, 2]), 4),
    "to_indicator": lambda tf: tf.sparse.to_indicator(
        tf.SparseTensor([[0, 0], [0, 1], [1, 0]], tf.constant([3, 1, 2], tf.int64), [2, 2]), 4),
    "mul_dense": lambda tf: sp(tf) * tf.constant([1.0, 2.0, 3.0]),
    "div_dense": lambda tf: [sp(tf) / 2.0, sp(tf).__div__(tf.constant(4.0))],
    "mul_bad_broadcast": lambda tf: sp(tf) * tf.ones([4]),
    "serialize_round_trip": lambda tf: [
        tf.deserialize_many_sparse(tf.serialize_many_sparse(sp(tf)), tf.float32),
        tf.io.deserialize_many_sparse(tf.stack([tf.serialize_sparse(sp(tf)),
                                                tf.io.serialize_sparse(sp(tf, [[1, 1]], [2.0],
                                                                          (2, 5)))]),
                                      tf.float32, rank=3)],
    "serialize_shapes": lambda tf: [tf.shape(tf.serialize_sparse(sp(tf))),
                                    tf.shape(tf.serialize_many_sparse(sp(tf)))],
    "deserialize_wrong_dtype": lambda tf: tf.deserialize_many_sparse(
        tf.serialize_many_sparse(sp(tf)), tf.int32),
    "sparse_matmul": lambda tf: [
        tf.sparse_matmul(np.eye(2, 3, dtype=np.float32), np.ones((3, 4), np.float32)),
        tf.sparse_matmul(np.ones((3, 2), np.float32), np.ones((4, 3), np.float32),
                         transpose_a=True, transpose_b=True, a_is_sparse=True)],
}


@pytest.mark.parametrize("program", _progs(OPS))
def test_sparse_ops(program):
    run_both(program)


def _grad(fn, tf):
    v = tf.constant(VALS.astype(np.float64))
    y = fn(tf, tf.SparseTensor(IND, v, [3, 3]))
    return tf.gradients(y, v)


GRADS = {
    "to_dense": lambda tf: _grad(lambda tf, s: tf.reduce_sum(
        tf.sparse.to_dense(s) * np.arange(9.0).reshape(3, 3)), tf),
    "reduce_sum": lambda tf: _grad(lambda tf, s: tf.sparse.reduce_sum(s, 1) * [1.0, 2.0, 3.0],
                                   tf),
    "softmax": lambda tf: _grad(lambda tf, s: tf.sparse.softmax(s).values * [1.0, 2, 3, 4], tf),
    "matmul": lambda tf: _grad(lambda tf, s: tf.sparse.matmul(
        s, np.arange(6.0).reshape(3, 2)), tf),
    "add": lambda tf: _grad(lambda tf, s: tf.sparse.add(s, tf.SparseTensor(
        [[0, 0], [2, 2]], tf.constant([1.0, 2.0], tf.float64), [3, 3])).values * [1.0, 2, 3,
                                                                                  4, 5], tf),
    "reorder": lambda tf: _grad(lambda tf, s: tf.sparse.reorder(
        tf.SparseTensor(IND[::-1], s.values, [3, 3])).values * [1.0, 2, 3, 4], tf),
    "slice": lambda tf: _grad(lambda tf, s: tf.sparse.slice(s, [0, 1], [3, 2]).values * 3.0,
                              tf),
    "fill_empty": lambda tf: _grad(lambda tf, s: tf.sparse.fill_empty_rows(
        tf.SparseTensor(IND, s.values, [4, 3]), tf.constant(0.0, tf.float64))[0].values
        * [1.0, 2, 3, 4, 5], tf),
    "mul_dense": lambda tf: _grad(lambda tf, s: (s * tf.constant([1.0, 2.0, 3.0],
                                                                 tf.float64)).values, tf),
    "sparse_matmul": lambda tf: (lambda a, b: tf.gradients(
        tf.sparse_matmul(a, b, transpose_b=True) * np.arange(6.0).reshape(2, 3), [a, b]))(
        tf.constant(np.arange(8.0, dtype=np.float32).reshape(2, 4)),
        tf.constant(np.arange(12.0, dtype=np.float32).reshape(3, 4))),
    "matmul_wrt_dense": lambda tf: (lambda b: tf.gradients(
        tf.sparse.matmul(sp(tf, vals=VALS.astype(np.float64)), b), b))(
        tf.constant(np.arange(6.0).reshape(3, 2))),
}


@pytest.mark.parametrize("program", _progs(GRADS))
def test_sparse_gradients(program):
    run_both(program, static=False)
