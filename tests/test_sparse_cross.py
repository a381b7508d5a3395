"""tf.sparse.cross and tf.sparse.cross_hashed (SparseCross in
plugins/kernels/standard/sparse_ops.py): string crosses, TF's exact FingerprintCat64
hashes (values recorded from TensorFlow), ordering, dense inputs and errors."""
from __future__ import annotations

import numpy as np
import pytest

import flowrt as tf
from flowrt import errors


def _inputs():
    a = tf.SparseTensor([[0, 0], [1, 0], [1, 1]], ["a", "b", "c"], [2, 2])
    b = tf.SparseTensor([[0, 0], [1, 0]], tf.constant([3, 4], tf.int64), [2, 1])
    d = tf.constant([["f"], ["g"]])
    return a, b, d


def run(x):
    with tf.Session() as s:
        return s.run(x)


def test_string_cross_sparse_first_then_dense():
    with tf.Graph().as_default():
        a, b, d = _inputs()
        c = tf.sparse.cross([a, d, b])
        assert c.values.dtype == tf.string and c.indices.op.type == "SparseCross"
        v = run(c)
    assert v.indices.tolist() == [[0, 0], [1, 0], [1, 1]]
    assert v.values.tolist() == [b"a_X_3_X_f", b"b_X_4_X_g", b"c_X_4_X_g"]
    assert v.dense_shape.tolist() == [2, 2]


def test_hashed_cross_matches_tensorflow():
    with tf.Graph().as_default():
        a, b, d = _inputs()
        full = run(tf.sparse.cross_hashed([a, b, d]))
        bucketed = run(tf.sparse.cross_hashed([a, b], num_buckets=100, hash_key=7))
    # recorded from TensorFlow 2.21 (compat.v1) on the same inputs
    assert full.values.tolist() == [7086239296816731720, 6797039759717763089,
                                    2293546756148430518]
    assert bucketed.values.tolist() == [79, 71, 62]
    assert full.values.dtype == np.int64


def test_product_order_and_empty_rows():
    with tf.Graph().as_default():
        x = tf.SparseTensor([[0, 0], [0, 1], [2, 0]], tf.constant([1, 2, 3], tf.int32), [3, 2])
        y = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], ["p", "q", "r"], [3, 2])
        v = run(tf.sparse.cross([x, y]))
    assert v.values.tolist() == [b"1_X_p", b"1_X_q", b"2_X_p", b"2_X_q"]
    assert v.indices.tolist() == [[0, 0], [0, 1], [0, 2], [0, 3]]
    assert v.dense_shape.tolist() == [3, 4]


def test_errors():
    with tf.Graph().as_default():
        a, _, _ = _inputs()
        with pytest.raises(TypeError, match="must be a list"):
            tf.sparse.cross((a,))
        with pytest.raises(TypeError, match="SparseTensors"):
            tf.sparse.cross([a, [1, 2]])
        other = tf.SparseTensor([[0, 0]], ["z"], [3, 1])
        with pytest.raises(errors.InvalidArgumentError, match="batch size"):
            run(tf.sparse.cross([a, other]))
        with pytest.raises(errors.InvalidArgumentError, match="matrix"):
            run(tf.sparse.cross([a, tf.constant(["x", "y"])]))
