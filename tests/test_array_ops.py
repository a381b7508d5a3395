"""array_ops of the standard kernel set, end to end through a session: values against
numpy, dtypes, static shape inference (unknown dims and ranks), the nodes the API builds
(as TF 1.15 builds them), build-time TypeError/ValueError and run-time
InvalidArgumentError with TF's messages."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors


def run(build, feeds=None):
    """Build ``build()`` in a fresh graph and run it; ``build`` may return
    ``(fetches, feed_dict)``."""
    g = tf.Graph()
    with g.as_default():
        out = build()
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict):
        out, feeds = out
    with tf.Session(graph=g) as s:
        return s.run(out, feeds)


def build(fn):
    """Build ``fn()`` in a fresh graph; returns (graph, result)."""
    g = tf.Graph()
    with g.as_default():
        return g, fn()


def shape_of(t):
    return None if t.shape.ndims is None else t.shape.as_list()


def op_types(g):
    return [o.type for o in g.get_operations()]


A = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


# ======================================================================================
# Reshape
# ======================================================================================
def test_reshape_values_and_minus_one():
    def b():
        x = tf.placeholder(tf.float32, [None, 3, 4])
        return [tf.reshape(x, [-1]), tf.reshape(x, [4, -1]), tf.reshape(x, [2, 12]),
                tf.reshape(x, [-1, 3, 2, 2])], {x: A}
    out = run(b)
    for got, want in zip(out, [A.reshape(-1), A.reshape(4, -1), A.reshape(2, 12),
                               A.reshape(-1, 3, 2, 2)]):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)


def test_reshape_static_shapes():
    def b():
        x = tf.placeholder(tf.float32, [None, 3, 4])
        u = tf.placeholder(tf.float32)
        n = tf.placeholder(tf.int32, [])
        return (tf.reshape(x, [-1, 12]), tf.reshape(x, [-1]), tf.reshape(tf.zeros([4, 6]), [3, -1]),
                tf.reshape(u, [2, -1]), tf.reshape(x, [n, 3, -1]),
                tf.reshape(x, tf.placeholder(tf.int32, [3])), tf.reshape(x, tf.placeholder(tf.int32)),
                tf.reshape(x, tf.shape(u)), tf.reshape(tf.zeros([4, 6]), [-1, tf.shape(x)[1]]),
                tf.reshape(x, tf.shape(x)[1:]))
    _, ts = build(b)
    assert [shape_of(t) for t in ts] == [
        [None, 12], [None], [3, 8], [2, None], [None, 3, None], [None, None, None], None,
        None, [8, 3], [3, 4]]


def test_reshape_build_time_value_errors():
    with pytest.raises(ValueError, match=r"Cannot reshape a tensor with 6 elements to shape "
                                         r"\[4\] \(4 elements\) for 'Reshape' \(op: 'Reshape'\)"):
        build(lambda: tf.reshape(tf.zeros([2, 3]), [4]))
    with pytest.raises(ValueError, match="evenly divisible by 4 but is 6"):
        build(lambda: tf.reshape(tf.zeros([2, 3]), [4, -1]))
    with pytest.raises(ValueError, match="must be rank 1"):
        build(lambda: tf.reshape(tf.zeros([2, 3]), [[6]]))
    with pytest.raises(TypeError, match="not in list of allowed values: int32, int64"):
        build(lambda: tf.reshape(tf.zeros([2]), [2.0]))


def test_reshape_run_time_errors():
    def b(shape):
        def f():
            x = tf.placeholder(tf.float32)
            s = tf.placeholder(tf.int32)
            return tf.reshape(x, s), {x: np.zeros([2, 3]), s: shape}
        return f
    with pytest.raises(errors.InvalidArgumentError,
                       match="Input to reshape is a tensor with 6 values, but the requested shape "
                             "has 4"):
        run(b([4]))
    with pytest.raises(errors.InvalidArgumentError,
                       match="requested shape requires a multiple of 4"):
        run(b([-1, 4]))
    with pytest.raises(errors.InvalidArgumentError, match="Only one input size may be -1"):
        run(b([-1, -1]))
    with pytest.raises(errors.InvalidArgumentError, match="Size 0 must be non-negative, not -2"):
        run(b([-2, 3]))


def test_reshape_graph_matches_tf():
    g, y = build(lambda: tf.reshape(tf.placeholder(tf.float32, [None, 3]),
                                    [tf.shape(tf.placeholder(tf.float32, [None, 3]))[0], -1]))
    assert y.op.type == "Reshape" and y.op.name == "Reshape"
    assert set(y.op.node_attrs) >= {"T", "Tshape"}
    packed = y.op.inputs[1]
    assert packed.op.type == "Pack" and packed.op.name == "Reshape/shape"
    assert packed.op.inputs[1].op.name == "Reshape/shape/1"
    g, y = build(lambda: tf.reshape(tf.zeros([6]), [2, 3]))
    assert y.op.inputs[1].op.name == "Reshape/shape"
    assert y.op.node_attrs["Tshape"] == tf.int32


# ======================================================================================
# Transpose
# ======================================================================================
def test_transpose_values():
    c = np.array([[1 + 2j, 3 - 1j]], np.complex64)

    def b():
        x = tf.placeholder(tf.float32, [None, 3, 4])
        u = tf.placeholder(tf.float32)
        z = tf.constant(c)
        return [tf.transpose(x), tf.transpose(x, [0, 2, 1]), tf.transpose(u),
                tf.transpose(z, conjugate=True), tf.transpose(z), tf.linalg.transpose(x),
                tf.transpose(x, perm=tf.constant([1, 0, 2], tf.int64))], {x: A, u: A}
    out = run(b)
    np.testing.assert_array_equal(out[0], A.T)
    np.testing.assert_array_equal(out[1], A.transpose(0, 2, 1))
    np.testing.assert_array_equal(out[2], A.T)
    np.testing.assert_array_equal(out[3], c.T.conj())
    assert out[3].dtype == np.complex64
    np.testing.assert_array_equal(out[4], c.T)
    np.testing.assert_array_equal(out[5], A.transpose(0, 2, 1))
    np.testing.assert_array_equal(out[6], A.transpose(1, 0, 2))


def test_transpose_static_shapes_and_ops():
    def b():
        x = tf.placeholder(tf.float32, [None, 3, 4])
        u = tf.placeholder(tf.float32)
        v = tf.placeholder(tf.int32, [3])
        return tf.transpose(x), tf.transpose(x, v), tf.transpose(u, [1, 0]), tf.transpose(u, v), \
            tf.transpose(tf.constant([[1 + 1j]]), conjugate=True)
    g, ts = build(b)
    assert [shape_of(t) for t in ts] == [[4, 3, None], [None, None, None], [None, None],
                                         [None, None, None], [1, 1]]
    assert ts[0].op.type == "Transpose" and ts[0].op.inputs[1].op.name == "transpose/perm"
    assert ts[4].op.type == "ConjugateTranspose"


def test_transpose_errors():
    with pytest.raises(ValueError, match="Dimension must be 2 but is 3 for 'transpose'"):
        build(lambda: tf.transpose(tf.zeros([2, 3]), [0, 1, 2]))

    def b(perm):
        def f():
            x = tf.placeholder(tf.float32)
            return tf.transpose(x, perm), {x: np.zeros([2, 3])}
        return f
    with pytest.raises(errors.InvalidArgumentError, match="1 is missing from {0,0}"):
        run(b([0, 0]))
    with pytest.raises(errors.InvalidArgumentError,
                       match="transpose expects a vector of size 2. But input.1. is a vector of "
                             "size 3"):
        run(b([0, 1, 2]))
    with pytest.raises(ValueError, match="perm dim 5 is out of range of input rank 2"):
        build(lambda: tf.transpose(tf.placeholder(tf.float32), [5, 0]))

    def c():
        x = tf.placeholder(tf.float32)
        p = tf.placeholder(tf.int32)
        return tf.transpose(x, p), {x: np.zeros([2, 3]), p: [5, 0]}
    with pytest.raises(errors.InvalidArgumentError, match=r"5 is out of range \[0 .. 2\)"):
        run(c)


# ======================================================================================
# ConcatV2
# ======================================================================================
def test_concat_values_and_single_value():
    def b():
        x = tf.placeholder(tf.float32, [None, 3, 4])
        return [tf.concat([x, x], 0), tf.concat([x, x + 1], -1), tf.concat([x], 1),
                tf.concat([x, [[[0] * 4] * 3]], 0), tf.concat((x, x), tf.constant(1, tf.int64))], \
            {x: A}
    out = run(b)
    np.testing.assert_array_equal(out[0], np.concatenate([A, A], 0))
    np.testing.assert_array_equal(out[1], np.concatenate([A, A + 1], -1))
    np.testing.assert_array_equal(out[2], A)
    np.testing.assert_array_equal(out[3], np.concatenate([A, np.zeros([1, 3, 4])], 0))
    np.testing.assert_array_equal(out[4], np.concatenate([A, A], 1))
    g, t = build(lambda: tf.concat([tf.zeros([2])], 0))
    # TF 1.15: identity(values[0], name=name) inside name_scope(name) (checked against
    # TensorFlow by compat/test_compat_array.py::concat_single)
    assert t.op.type == "Identity" and t.op.name == "concat/concat"


def test_concat_static_shapes():
    def b():
        x = tf.placeholder(tf.float32, [None, 3, None])
        u = tf.placeholder(tf.float32)
        i = tf.placeholder(tf.int32, [])
        return (tf.concat([x, x], 1), tf.concat([x, tf.zeros([2, 3, 4])], 2),
                tf.concat([x, tf.zeros([2, 3, 4])], 0), tf.concat([x, u], 1),
                tf.concat([u, u], 0), tf.concat([x, x], i))
    _, ts = build(b)
    assert [shape_of(t) for t in ts] == [[None, 6, None], [2, 3, None], [None, 3, 4],
                                         [None, None, None], None, [None, None, None]]


def test_concat_errors():
    with pytest.raises(ValueError, match="Dimension 0 in both shapes must be equal, but are 3 "
                                         "and 4. Shapes are \\[3\\] and \\[4\\]. for 'concat'"):
        build(lambda: tf.concat([tf.zeros([2, 3]), tf.zeros([2, 4])], 0))
    with pytest.raises(ValueError, match="Shape must be rank 2 but is rank 1"):
        build(lambda: tf.concat([tf.zeros([2, 3]), tf.zeros([3])], 0))
    with pytest.raises(ValueError, match="Can't concatenate scalars"):
        build(lambda: tf.concat([tf.constant(1), tf.constant(2)], tf.placeholder(tf.int32)))
    with pytest.raises(TypeError, match="have types \\[float32, int32\\] that don't all match"):
        build(lambda: tf.concat([tf.zeros([2]), tf.zeros([2], tf.int32)], 0))

    def b(yv, axis=0):
        def f():
            x = tf.placeholder(tf.float32)
            y = tf.placeholder(tf.float32)
            return tf.concat([x, y], axis), {x: np.zeros([2, 3], np.float32), y: yv}
        return f
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"ConcatOp : Dimensions of inputs should match: shape\[0\] = \[2,3\] "
                             r"vs. shape\[1\] = \[2,4\]"):
        run(b(np.zeros([2, 4], np.float32)))
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"Expected concatenating dimensions in the range \[-2, 2\), but got 5"):
        run(b(np.zeros([2, 3], np.float32), 5))
    with pytest.raises(errors.InvalidArgumentError, match="Ranks of all input tensors"):
        run(b(np.zeros([3], np.float32)))


# ======================================================================================
# Pack / Unpack
# ======================================================================================
def test_stack_unstack_values():
    x2 = A[0]

    def b():
        x = tf.placeholder(tf.float32, [None, 4])
        return [tf.stack([x, x + 1], 1), tf.stack([x, x], -1), tf.stack([1, 2, 3]),
                tf.unstack(x, axis=1)[2], tf.stack([x[0, 0], 2.0]), tf.unstack(x, num=3)[1],
                tf.unstack(x, axis=-1)[0]], {x: x2}
    out = run(b)
    np.testing.assert_array_equal(out[0], np.stack([x2, x2 + 1], 1))
    np.testing.assert_array_equal(out[1], np.stack([x2, x2], -1))
    np.testing.assert_array_equal(out[2], [1, 2, 3])
    assert out[2].dtype == np.int32
    np.testing.assert_array_equal(out[3], x2[:, 2])
    np.testing.assert_array_equal(out[4], [0.0, 2.0])
    np.testing.assert_array_equal(out[5], x2[1])
    np.testing.assert_array_equal(out[6], x2[:, 0])


def test_stack_graph_and_shapes():
    g, (a, b_, c) = build(lambda: (tf.stack([1, 2]), tf.stack([tf.placeholder(tf.float32, [None, 2]),
                                                                tf.placeholder(tf.float32)], 1),
                                   tf.stack([tf.placeholder(tf.float32, []), 1.0])))
    assert a.op.type == "Const"  # a constant list folds to a Const, as TF does
    assert b_.op.type == "Pack" and shape_of(b_) == [None, 2, 2]
    assert c.op.type == "Pack" and c.op.name == "stack_2" and shape_of(c) == [2]
    assert c.op.inputs[1].op.name == "stack_2/1"  # auto-packing names elements by index
    _, us = build(lambda: tf.unstack(tf.placeholder(tf.float32, [2, None, 3]), axis=1, num=4))
    assert len(us) == 4 and all(shape_of(u) == [2, 3] for u in us)


def test_stack_unstack_errors():
    with pytest.raises(ValueError, match="Dimension 0 in both shapes must be equal"):
        build(lambda: tf.stack([tf.zeros([2]), tf.zeros([3])]))
    with pytest.raises(ValueError, match=r"axis = 3 not in \[-2, 2\)"):
        build(lambda: tf.stack([tf.zeros([2]), tf.zeros([2])], axis=3))
    with pytest.raises(ValueError, match=r"Cannot infer num from shape \(\?, 2\)"):
        build(lambda: tf.unstack(tf.placeholder(tf.float32, [None, 2])))
    with pytest.raises(ValueError, match="Dimension must be 4 but is 3"):
        build(lambda: tf.unstack(tf.zeros([3]), num=4))

    def b():
        x = tf.placeholder(tf.float32, [None, 4])
        return tf.unstack(x, num=2)[0], {x: np.zeros([3, 4])}
    with pytest.raises(errors.InvalidArgumentError, match=r"Input shape axis 0 must equal 2, got "
                                                          r"shape \[3,4\]"):
        run(b)
    with pytest.raises(errors.InvalidArgumentError, match="Shapes of all inputs must match"):
        run(lambda: (tf.stack([tf.placeholder(tf.float32, name="p"), tf.zeros([3])]),
                     {"p:0": np.zeros([2], np.float32)}))


# ======================================================================================
# Split / SplitV
# ======================================================================================
def test_split_values_ops_and_shapes():
    def b():
        x = tf.placeholder(tf.float32, [None, 3, 4])
        return tf.split(x, 2, axis=2), tf.split(x, [1, -1, 1], axis=-1), tf.split(x, 3, 1)
    g, (a, s, c) = build(b)
    assert a[0].op.type == "Split" and s[0].op.type == "SplitV"
    assert [shape_of(t) for t in a] == [[None, 3, 2]] * 2
    assert [shape_of(t) for t in s] == [[None, 3, 1], [None, 3, 2], [None, 3, 1]]
    assert [shape_of(t) for t in c] == [[None, 1, 4]] * 3
    with tf.Session(graph=g) as sess:
        x = g.get_tensor_by_name("Placeholder:0")
        out = sess.run([a, s, c], {x: A})
    for got, want in zip(out, [np.split(A, 2, 2), np.split(A, [1, 3], -1), np.split(A, 3, 1)]):
        assert len(got) == len(want)
        for gg, ww in zip(got, want):
            np.testing.assert_array_equal(gg, ww)


def test_split_errors():
    with pytest.raises(ValueError, match="evenly divisible by 2 but is 5"):
        build(lambda: tf.split(tf.zeros([5, 2]), 2))
    with pytest.raises(ValueError, match=r"can't split axis of size 5 into pieces of size \[1,2\]"):
        build(lambda: tf.split(tf.zeros([5, 2]), [1, 2]))
    with pytest.raises(ValueError, match="Rank-0 tensors are not supported"):
        build(lambda: tf.split(tf.zeros([4]), tf.constant(2)))

    def b():
        x = tf.placeholder(tf.float32)
        return tf.split(x, 2)[0], {x: np.zeros([5])}
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"split_dim 0 \(size = 5\) and num_split 2"):
        run(b)

    def c():
        x = tf.placeholder(tf.float32)
        s = tf.placeholder(tf.int32, [2])
        return tf.split(x, s)[0], {x: np.zeros([5]), s: [1, 2]}
    with pytest.raises(errors.InvalidArgumentError, match="Determined shape must either match"):
        run(c)


# ======================================================================================
# Squeeze / ExpandDims
# ======================================================================================
def test_squeeze_expand_dims():
    v = A.reshape(1, 6, 1, 4)

    def b():
        x = tf.placeholder(tf.float32, [1, None, 1, 4])
        return [tf.squeeze(x), tf.squeeze(x, [0]), tf.squeeze(x, axis=-2),
                tf.squeeze(x, squeeze_dims=[2]), tf.expand_dims(x, 0), tf.expand_dims(x, -1),
                tf.expand_dims(x, dim=2)], {x: v}
    g, (fetches, feed) = build(b)
    assert [shape_of(t) for t in fetches] == [
        None, [None, 1, 4], [1, None, 4], [1, None, 4], [1, 1, None, 1, 4], [1, None, 1, 4, 1],
        [1, None, 1, 1, 4]]
    with tf.Session(graph=g) as s:
        out = s.run(fetches, feed)
    for got, want in zip(out, [v.squeeze(), v.squeeze(0), v.squeeze(-2), v.squeeze(2),
                               v[None], v[..., None], v[:, :, None]]):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    _, t = build(lambda: tf.squeeze(tf.zeros([1, 2, 1])))
    assert shape_of(t) == [2]


def test_squeeze_expand_dims_errors():
    with pytest.raises(ValueError, match=r"Can not squeeze dim\[1\], expected a dimension of 1, "
                                         "got 3"):
        build(lambda: tf.squeeze(tf.zeros([2, 3]), [1]))
    with pytest.raises(ValueError, match="Cannot specify both 'axis' and 'squeeze_dims'"):
        build(lambda: tf.squeeze(tf.zeros([1]), axis=[0], squeeze_dims=[0]))
    with pytest.raises(ValueError, match=r"dim 4 not in the interval \[-3, 2\]"):
        build(lambda: tf.expand_dims(tf.zeros([2, 3]), 4))
    with pytest.raises(ValueError, match="Must specify an axis"):
        build(lambda: tf.expand_dims(tf.zeros([2, 3])))

    def sq():
        x = tf.placeholder(tf.float32)
        return tf.squeeze(x, [1]), {x: np.zeros([2, 3])}
    with pytest.raises(errors.InvalidArgumentError, match=r"Can not squeeze dim\[1\]"):
        run(sq)

    def ex():
        x = tf.placeholder(tf.float32)
        return tf.expand_dims(x, 4), {x: np.zeros([2, 3])}
    with pytest.raises(errors.InvalidArgumentError,
                       match="Tried to expand dim index 4 for tensor with 2 dimensions"):
        run(ex)


# ======================================================================================
# Tile
# ======================================================================================
def test_tile():
    v = np.arange(6, dtype=np.int32).reshape(2, 3)

    def b():
        x = tf.placeholder(tf.int32, [None, 3])
        return [tf.tile(x, [2, 3]), tf.tile(x, tf.constant([1, 2], tf.int64)), tf.tile(x, [0, 1])], \
            {x: v}
    g, (fetches, feed) = build(b)
    assert [shape_of(t) for t in fetches] == [[None, 9], [None, 6], [0, 3]]
    with tf.Session(graph=g) as s:
        out = s.run(fetches, feed)
    for got, want in zip(out, [np.tile(v, [2, 3]), np.tile(v, [1, 2]), np.tile(v, [0, 1])]):
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want)
    _, t = build(lambda: tf.tile(tf.placeholder(tf.float32), tf.placeholder(tf.int32, [3])))
    assert shape_of(t) == [None, None, None]
    with pytest.raises(ValueError, match="Shape must be rank 2 but is rank 1"):
        build(lambda: tf.tile(tf.zeros([2, 3]), [2]))

    def bad():
        x = tf.placeholder(tf.float32)
        return tf.tile(x, [2]), {x: np.zeros([2, 3])}
    with pytest.raises(errors.InvalidArgumentError,
                       match="Expected multiples argument to be a vector of length 2 but got "
                             "length 1"):
        run(bad)


# ======================================================================================
# Pad / PadV2 / MirrorPad
# ======================================================================================
def test_pad_modes():
    v = np.arange(6, dtype=np.int32).reshape(2, 3)

    def b():
        x = tf.placeholder(tf.int32, [None, 3])
        return [tf.pad(x, [[1, 2], [0, 1]]), tf.pad(x, [[1, 1], [2, 2]], "REFLECT"),
                tf.pad(x, [[2, 2], [3, 3]], mode="symmetric"), tf.pad(x, [[1, 1], [1, 1]],
                                                                      constant_values=7),
                tf.pad(x, [[1, 0], [0, 1]], mode="Reflect")], {x: v}
    g, (fetches, feed) = build(b)
    assert [t.op.type for t in fetches] == ["Pad", "MirrorPad", "MirrorPad", "PadV2", "MirrorPad"]
    assert fetches[2].op.node_attrs["mode"] == "SYMMETRIC"
    assert [shape_of(t) for t in fetches] == [[None, 4], [None, 7], [None, 9], [None, 5],
                                              [None, 4]]
    with tf.Session(graph=g) as s:
        out = s.run(fetches, feed)
    want = [np.pad(v, [[1, 2], [0, 1]]), np.pad(v, [[1, 1], [2, 2]], "reflect"),
            np.pad(v, [[2, 2], [3, 3]], "symmetric"), np.pad(v, 1, constant_values=7),
            np.pad(v, [[1, 0], [0, 1]], "reflect")]
    for got, w in zip(out, want):
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, w)


def test_pad_strings_and_partial_shapes():
    s = np.array([[b"a", b"b"]], dtype=object)

    def b():
        x = tf.placeholder(tf.string, [1, 2])
        i = tf.placeholder(tf.int32, [])
        return [tf.pad(x, [[1, 0], [0, 1]]), tf.pad(x, [[0, 0], [1, 0]], constant_values="z"),
                tf.pad(x, [[i, 1], [0, 2]])], {x: s, i: 1}
    g, (fetches, feed) = build(b)
    assert shape_of(fetches[0]) == [2, 3]
    assert shape_of(fetches[2]) == [None, 4]  # padded size known where paddings are
    with tf.Session(graph=g) as sess:
        out = sess.run(fetches, feed)
    assert out[0].tolist() == [[b"", b"", b""], [b"a", b"b", b""]]
    assert out[1].tolist() == [[b"z", b"a", b"b"]]
    assert out[2].shape == (3, 4)


def test_pad_errors():
    with pytest.raises(ValueError, match="Unknown padding mode: FOO"):
        build(lambda: tf.pad(tf.zeros([2]), [[1, 1]], "FOO"))
    with pytest.raises(ValueError, match="Paddings must be non-negative"):
        build(lambda: tf.pad(tf.zeros([2]), [[1, -1]]))

    def b(p, mode="CONSTANT"):
        def f():
            x = tf.placeholder(tf.float32)
            return tf.pad(x, p, mode), {x: np.zeros([3, 3])}
        return f
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"The first dimension of paddings must be the rank of inputs\[1,2\] "
                             r"\[3,3\]"):
        run(b([[1, 1]]))
    with pytest.raises(errors.InvalidArgumentError,
                       match="paddings must be less than the dimension size: 3, 0 not less than 3"):
        run(b([[3, 0], [0, 0]], "REFLECT"))
    with pytest.raises(errors.InvalidArgumentError,
                       match="paddings must be no greater than the dimension size: 4, 0 greater "
                             "than 3"):
        run(b([[4, 0], [0, 0]], "SYMMETRIC"))


# ======================================================================================
# Slice
# ======================================================================================
def test_slice():
    def b():
        x = tf.placeholder(tf.float32, [None, 3, 4])
        return [tf.slice(x, [0, 1, 0], [-1, 2, 3]), tf.slice(x, [1, 0, 0], [1, -1, -1]),
                tf.slice(x, tf.constant([0, 0, 1], tf.int64), tf.constant([2, 3, 3], tf.int64))], \
            {x: A}
    g, (fetches, feed) = build(b)
    assert [shape_of(t) for t in fetches] == [[None, 2, 3], [1, 3, 4], [2, 3, 3]]
    with tf.Session(graph=g) as s:
        out = s.run(fetches, feed)
    np.testing.assert_array_equal(out[0], A[:, 1:3, 0:3])
    np.testing.assert_array_equal(out[1], A[1:2])
    np.testing.assert_array_equal(out[2], A[:, :, 1:])
    with pytest.raises(ValueError, match="Negative dimension size caused by subtracting 3 from 2"):
        build(lambda: tf.slice(tf.zeros([2, 3]), [3, 0], [-1, 3]))

    def bad(begin, size):
        def f():
            x = tf.placeholder(tf.float32)
            return tf.slice(x, begin, size), {x: np.zeros([2, 3])}
        return f
    with pytest.raises(errors.InvalidArgumentError, match=r"Expected size\[0\] in \[0, 1\], but "
                                                          r"got 2"):
        run(bad([1, 0], [2, 3]))
    with pytest.raises(errors.InvalidArgumentError, match=r"Expected begin\[0\] in \[0, 2\], but "
                                                          r"got 3"):
        run(bad([3, 0], [-1, 3]))
    with pytest.raises(errors.InvalidArgumentError, match="Expected begin and size arguments to "
                                                          "be 1-D tensors of size 2"):
        run(bad([0], [1]))


# ======================================================================================
# StridedSlice and __getitem__
# ======================================================================================
def test_getitem_values():
    def b():
        x = tf.placeholder(tf.float32, [None, 3, 4])
        i = tf.placeholder(tf.int32, [])
        return [x[0], x[:, 1], x[..., 1], x[::-1, ::2, 1:-1], x[-1, None, :, 3], x[1:100, -100:2],
                x[:, :, ::-2], x[i], x[:, tf.constant(0):tf.constant(2)], x[...], x[None],
                x[0, 0, 0], x[:, 5:1:-1], x[1, ..., tf.newaxis], x[:, -1:0:-1]], {x: A, i: 1}
    out = run(b)
    want = [A[0], A[:, 1], A[..., 1], A[::-1, ::2, 1:-1], A[-1, None, :, 3], A[1:100, -100:2],
            A[:, :, ::-2], A[1], A[:, 0:2], A[...], A[None], A[0, 0, 0], A[:, 5:1:-1],
            A[1, ..., None], A[:, -1:0:-1]]
    for got, w in zip(out, want):
        assert got.dtype == np.float32
        assert got.shape == w.shape
        np.testing.assert_array_equal(got, w)


def test_getitem_builds_one_strided_slice_with_tf_masks():
    g, y = build(lambda: tf.placeholder(tf.float32, [None, 3, 4])[1:, None, ..., -1])
    assert op_types(g) == ["Placeholder", "Const", "Const", "Const", "StridedSlice"]
    assert [o.name for o in g.get_operations()][1:] == [
        "strided_slice/stack", "strided_slice/stack_1", "strided_slice/stack_2", "strided_slice"]
    a = y.op.node_attrs
    assert (a["begin_mask"], a["end_mask"], a["ellipsis_mask"], a["new_axis_mask"],
            a["shrink_axis_mask"]) == (0, 1, 4, 2, 8)
    assert y.op.inputs[1].op.node_attrs["value"].tolist() == [1, 0, 0, -1]
    assert y.op.inputs[2].op.node_attrs["value"].tolist() == [0, 0, 0, 0]
    assert y.op.inputs[3].op.node_attrs["value"].tolist() == [1, 1, 1, 1]
    assert shape_of(y) == [None, 1, 3]
    g, y = build(lambda: tf.zeros([5, 6])[::-2, :3])
    a = y.op.node_attrs
    assert (a["begin_mask"], a["end_mask"]) == (3, 1)
    assert shape_of(y) == [3, 3]


def test_strided_slice_static_shapes():
    def b():
        x = tf.placeholder(tf.float32, [None, 3, None])
        u = tf.placeholder(tf.float32)
        i = tf.placeholder(tf.int32, [])
        v3 = tf.placeholder(tf.int32, [3])
        return (x[1:, :2, ::-1], x[i], x[:, i], x[..., i:], x[None, ..., None], x[:, 5:],
                x[:, -1:0:-1], u[0], tf.strided_slice(x, v3, v3, [1, 1, 1]), x[:, ::2],
                x[:, 1::-1], tf.strided_slice(x, [0, 0, 0], [1, 2, 3]))
    _, ts = build(b)
    assert [shape_of(t) for t in ts] == [
        [None, 2, None], [3, None], [None, None], [None, 3, None], [1, None, 3, None, 1],
        [None, 0, None], [None, 2, None], None, [None, None, None], [None, 2, None],
        [None, 2, None], [None, 2, None]]


def test_strided_slice_masks_direct():
    def b():
        x = tf.placeholder(tf.float32, [None, 3, 4])
        return [tf.strided_slice(x, [0, 1], [0, 3], [1, 1], begin_mask=1, end_mask=1),
                tf.strided_slice(x, [1, 0], [2, 0], [1, 1], shrink_axis_mask=1, ellipsis_mask=2),
                tf.strided_slice(x, [0, 0, 2], [0, 0, 0], [1, 1, -1], new_axis_mask=1,
                                 end_mask=6, begin_mask=2),
                tf.strided_slice(x, [0, 0, 2], [0, 0, 0], [1, 1, -1], new_axis_mask=1,
                                 end_mask=4, begin_mask=2),
                tf.strided_slice(x, [-1], [-4], [-1])], {x: A}
    out = run(b)
    np.testing.assert_array_equal(out[0], A[:, 1:3])
    np.testing.assert_array_equal(out[1], A[1, ...])
    np.testing.assert_array_equal(out[2], A[None, :, 2::-1])
    np.testing.assert_array_equal(out[3], A[None, :0, 2::-1])
    assert out[3].shape == (1, 0, 3, 4)
    np.testing.assert_array_equal(out[4], A[-1:-4:-1])


def test_strided_slice_errors():
    def bad(key):
        def f():
            x = tf.placeholder(tf.float32)
            return x[key], {x: np.zeros([5], np.float32)}
        return f
    with pytest.raises(errors.InvalidArgumentError,
                       match="slice index 5 of dimension 0 out of bounds."):
        run(bad(5))
    with pytest.raises(errors.InvalidArgumentError,
                       match="slice index -5 of dimension 0 out of bounds."):
        run(bad(-10))
    with pytest.raises(ValueError, match="slice index 5 of dimension 0 out of bounds. for "
                                         "'strided_slice' \\(op: 'StridedSlice'\\)"):
        build(lambda: tf.zeros([5])[5])
    with pytest.raises(ValueError, match=r"strides\[0\] must be non-zero"):
        build(lambda: tf.zeros([5])[::0])
    with pytest.raises(ValueError, match="Index out of range using input dim 1; input has only 1 "
                                         "dims"):
        build(lambda: tf.zeros([5])[1, 2])
    with pytest.raises(ValueError, match="Multiple ellipses"):
        build(lambda: tf.zeros([5])[..., ...])
    with pytest.raises(TypeError, match="Only integers, slices"):
        build(lambda: tf.zeros([5])[1.5])
    with pytest.raises(TypeError, match="Only integers, slices"):
        build(lambda: tf.zeros([5])[tf.constant([1, 2])])
    with pytest.raises(TypeError, match="Only integers, slices"):
        build(lambda: tf.zeros([5])[tf.constant(1.0)])


def test_getitem_int64_tensor_and_bool_mask():
    def b():
        x = tf.placeholder(tf.float32, [None, 3])
        return [x[tf.constant(1, tf.int64)], x[x > 2.0], x[np.array([True, False])]], \
            {x: np.arange(6, dtype=np.float32).reshape(2, 3)}
    g, (fetches, feed) = build(b)
    assert fetches[0].op.inputs[1].dtype == tf.int64  # int64 index: all of begin/end/strides
    assert fetches[0].op.inputs[3].dtype == tf.int64
    with tf.Session(graph=g) as s:
        out = s.run(fetches, feed)
    np.testing.assert_array_equal(out[0], [3, 4, 5])
    np.testing.assert_array_equal(out[1], [3, 4, 5])
    np.testing.assert_array_equal(out[2], [[0, 1, 2]])


# ======================================================================================
# Gather / GatherV2 / GatherNd
# ======================================================================================
def test_gather_values_and_shapes():
    def b():
        x = tf.placeholder(tf.float32, [None, 3, 4])
        i = tf.placeholder(tf.int64, [None])
        return [tf.gather(x, [1, 0, 1]), tf.gather(x, [[0, 2], [1, 1]], axis=1),
                tf.gather(x, i, axis=-1), tf.gather(x, 1), tf.gather_nd(x, [[0, 1], [1, 2]]),
                tf.gather_nd(x, [[[1]]]), tf.gather(x, [[0, 1], [2, 0]], axis=2, batch_dims=1),
                tf.batch_gather(x, [[[0], [1], [2]], [[3], [3], [3]]])], \
            {x: A, i: np.array([3, 0])}
    g, (fetches, feed) = build(b)
    assert [shape_of(t) for t in fetches] == [
        [3, 3, 4], [None, 2, 2, 4], [None, 3, None], [3, 4], [2, 4], [1, 1, 3, 4],
        [None, 3, 2], [None, 3, 1]]
    assert fetches[0].op.type == "GatherV2" and fetches[0].op.node_attrs["batch_dims"] == 0
    with tf.Session(graph=g) as s:
        out = s.run(fetches, feed)
    np.testing.assert_array_equal(out[0], A[[1, 0, 1]])
    np.testing.assert_array_equal(out[1], A[:, [[0, 2], [1, 1]]])
    np.testing.assert_array_equal(out[2], A[..., [3, 0]])
    np.testing.assert_array_equal(out[3], A[1])
    np.testing.assert_array_equal(out[4], A[[0, 1], [1, 2]])
    np.testing.assert_array_equal(out[5], A[[[1]]])
    want = np.stack([A[b_][:, [[0, 1], [2, 0]][b_]] for b_ in range(2)])
    np.testing.assert_array_equal(out[6], want)
    np.testing.assert_array_equal(out[7], np.take_along_axis(
        A, np.array([[[0], [1], [2]], [[3], [3], [3]]]), axis=2))


def test_gather_errors():
    def b(idx):
        def f():
            x = tf.placeholder(tf.float32)
            i = tf.placeholder(tf.int32)
            return tf.gather(x, i), {x: np.zeros([5]), i: idx}
        return f
    with pytest.raises(errors.InvalidArgumentError, match=r"indices\[1\] = 7 is not in \[0, 5\)"):
        run(b([0, 7]))
    with pytest.raises(errors.InvalidArgumentError, match=r"indices\[1,0\] = -1 is not in \[0, 5\)"):
        run(b([[0, 1], [-1, 2]]))
    with pytest.raises(errors.InvalidArgumentError, match=r"indices = 5 is not in \[0, 5\)"):
        run(b(5))

    def nd():
        x = tf.placeholder(tf.float32)
        return tf.gather_nd(x, [[0, 1], [5, 0]]), {x: np.zeros([3, 3])}
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"indices\[1\] = \[5, 0\] does not index into param shape \[3,3\]"):
        run(nd)
    with pytest.raises(TypeError, match="not in list of allowed values: int32, int64"):
        build(lambda: tf.gather(tf.zeros([2]), [0.0]))
    with pytest.raises(ValueError, match="must be at least rank 3"):
        build(lambda: tf.gather(tf.zeros([2, 2]), [0], axis=2))
    with pytest.raises(ValueError, match="indices.shape\\[-1\\] must be <= params.rank"):
        build(lambda: tf.gather_nd(tf.zeros([2, 2]), [[0, 0, 0]]))


# ======================================================================================
# OneHot
# ======================================================================================
def test_one_hot():
    idx = np.array([0, 2, -1, 7], np.int32)

    def b():
        i = tf.placeholder(tf.int32, [None])
        return [tf.one_hot(i, 4), tf.one_hot(i, 3, axis=0), tf.one_hot(i, 3, on_value=5, off_value=-1),
                tf.one_hot(i, 3, dtype=tf.int64), tf.one_hot([[1, 2]], 3, on_value=True,
                                                              off_value=False),
                tf.one_hot(i, 2, off_value=0.5)], {i: idx}
    g, (fetches, feed) = build(b)
    assert [f.dtype for f in fetches] == [tf.float32, tf.float32, tf.int32, tf.int64, tf.bool,
                                          tf.float32]
    assert [shape_of(f) for f in fetches] == [[None, 4], [3, None], [None, 3], [None, 3],
                                              [1, 2, 3], [None, 2]]
    with tf.Session(graph=g) as s:
        out = s.run(fetches, feed)
    eye4 = (idx[:, None] == np.arange(4)).astype(np.float32)
    np.testing.assert_array_equal(out[0], eye4)
    np.testing.assert_array_equal(out[1], (idx[None] == np.arange(3)[:, None]).astype(np.float32))
    np.testing.assert_array_equal(out[2], np.where(idx[:, None] == np.arange(3), 5, -1))
    assert out[3].dtype == np.int64 and out[4].dtype == np.bool_
    np.testing.assert_array_equal(out[4], [[[False, True, False], [False, False, True]]])
    np.testing.assert_array_equal(out[5], np.where(idx[:, None] == np.arange(2), 1.0, 0.5))
    with pytest.raises(TypeError, match="of on_value does not match dtype"):
        build(lambda: tf.one_hot([1], 3, on_value=1.0, off_value=0))
    with pytest.raises(TypeError, match="does not match dtype parameter"):
        build(lambda: tf.one_hot([1], 3, on_value=1.0, dtype=tf.int32))

    def neg():
        d = tf.placeholder(tf.int32)
        return tf.one_hot([1], d), {d: -1}
    with pytest.raises(errors.InvalidArgumentError, match="depth must be non-negative, got: -1"):
        run(neg)


# ======================================================================================
# Fill / zeros / ones / *_like / eye
# ======================================================================================
def test_fill_zeros_ones_values_and_nodes():
    def b():
        x = tf.placeholder(tf.float32, [None, 3])
        n = tf.placeholder(tf.int32, [])
        return [tf.fill([2, 3], 7), tf.fill([n, 2], 1.5), tf.zeros([2, 3]), tf.ones([2, 2], tf.int32),
                tf.zeros([n, 2]), tf.ones((n,), tf.bool), tf.zeros_like(x), tf.ones_like(x),
                tf.zeros_like(x, dtype=tf.int32), tf.ones_like(x, tf.int64), tf.zeros([40, 40]),
                tf.zeros(tf.shape(x)), tf.zeros([2], tf.string), tf.zeros(tf.TensorShape([2, 1])),
                tf.ones(n)], {x: np.ones([2, 3], np.float32), n: 3}
    g, (fetches, feed) = build(b)
    types = [f.op.type for f in fetches]
    assert types == ["Fill", "Fill", "Const", "Const", "Fill", "Fill", "ZerosLike", "Fill", "Fill",
                     "Fill", "Fill", "Fill", "Const", "Const", "Fill"]
    assert [shape_of(f) for f in fetches] == [
        [2, 3], [None, 2], [2, 3], [2, 2], [None, 2], [None], [None, 3], [None, 3], [None, 3],
        [None, 3], [40, 40], [None, 3], [2], [2, 1], [None]]
    with tf.Session(graph=g) as s:
        out = s.run(fetches, feed)
    want = [np.full([2, 3], 7, np.int32), np.full([3, 2], 1.5, np.float32),
            np.zeros([2, 3], np.float32), np.ones([2, 2], np.int32), np.zeros([3, 2], np.float32),
            np.ones([3], bool), np.zeros([2, 3], np.float32), np.ones([2, 3], np.float32),
            np.zeros([2, 3], np.int32), np.ones([2, 3], np.int64), np.zeros([40, 40], np.float32),
            np.zeros([2, 3], np.float32), np.array([b"", b""], dtype=object),
            np.zeros([2, 1], np.float32), np.ones([3], np.float32)]
    for got, w in zip(out, want):
        assert got.dtype == w.dtype and got.shape == w.shape
        np.testing.assert_array_equal(got, w)


def test_zeros_like_known_shape_is_const_and_dtypes():
    g, (a, b_) = build(lambda: (tf.zeros_like(tf.constant([[1, 2]], tf.int8)),
                                tf.ones_like(tf.constant([True]))))
    assert a.op.type == "Const" and a.dtype == tf.int8
    out = run(lambda: [tf.zeros_like(tf.constant([[1, 2]], tf.int8)),
                       tf.ones_like(tf.constant([True, False])),
                       tf.zeros_like(tf.placeholder_with_default(np.array([b"a"], object), [None]))])
    assert out[0].dtype == np.int8 and out[0].tolist() == [[0, 0]]
    assert out[1].dtype == np.bool_ and out[1].tolist() == [True, True]
    assert out[2].tolist() == [b""]


def test_fill_errors():
    with pytest.raises(ValueError, match="Fill dimensions must be >= 0"):
        build(lambda: tf.fill([2, -1], 1.0))
    with pytest.raises(ValueError, match="must be rank 0"):
        build(lambda: tf.fill([2], [1.0, 2.0]))

    def b():
        d = tf.placeholder(tf.int32)
        return tf.fill(d, 1.0), {d: [2, -1]}
    with pytest.raises(errors.InvalidArgumentError, match="Dimension -1 must be >= 0"):
        run(b)
    with pytest.raises(TypeError, match="Expected string"):
        build(lambda: tf.ones([2], tf.string))


def test_eye():
    out = run(lambda: [tf.eye(3), tf.eye(2, 3), tf.eye(2, batch_shape=[2]),
                       tf.eye(3, 2, dtype=tf.int32), tf.linalg.eye(1)])
    np.testing.assert_array_equal(out[0], np.eye(3, dtype=np.float32))
    np.testing.assert_array_equal(out[1], np.eye(2, 3, dtype=np.float32))
    np.testing.assert_array_equal(out[2], np.stack([np.eye(2)] * 2))
    assert out[3].dtype == np.int32
    np.testing.assert_array_equal(out[3], np.eye(3, 2))
    g, e = build(lambda: tf.eye(3))
    assert e.op.type == "MatrixDiag" and e.op.name == "eye/diag"


# ======================================================================================
# Range / LinSpace
# ======================================================================================
def test_range_values_and_dtype_inference():
    def b():
        n = tf.placeholder(tf.int32, [])
        return [tf.range(5), tf.range(1, 10, 3), tf.range(10, 1, -2), tf.range(0., 1., 0.1),
                tf.range(n), tf.range(3, dtype=tf.float32), tf.range(0, 5.0, 1),
                tf.range(0, 1, 0.3, dtype=tf.float64), tf.range(tf.constant(2, tf.int64), 6)], \
            {n: 4}
    g, (fetches, feed) = build(b)
    assert [f.dtype for f in fetches] == [tf.int32, tf.int32, tf.int32, tf.float32, tf.int32,
                                          tf.float32, tf.float32, tf.float64, tf.int64]
    assert [shape_of(f) for f in fetches] == [[5], [3], [5], [10], [None], [3], [5], [4], [4]]
    assert fetches[0].op.name == "range" and fetches[0].op.inputs[1].op.name == "range/limit"
    with tf.Session(graph=g) as s:
        out = s.run(fetches, feed)
    np.testing.assert_array_equal(out[0], np.arange(5))
    np.testing.assert_array_equal(out[1], [1, 4, 7])
    np.testing.assert_array_equal(out[2], [10, 8, 6, 4, 2])
    # TF accumulates val += delta in the dtype, so float sequences drift like a cumsum
    acc = np.cumsum(np.array([0.0] + [0.1] * 9, np.float32), dtype=np.float32)
    np.testing.assert_array_equal(out[3], acc)
    np.testing.assert_array_equal(out[4], np.arange(4))
    np.testing.assert_array_equal(out[6], np.arange(5, dtype=np.float32))
    np.testing.assert_allclose(out[7], [0, 0.3, 0.6, 0.9])
    np.testing.assert_array_equal(out[8], [2, 3, 4, 5])


def test_range_errors_and_linspace():
    with pytest.raises(ValueError, match="Requires start <= limit when delta > 0: 5/1"):
        build(lambda: tf.range(5, 1, 1))

    def b():
        d = tf.placeholder(tf.int32)
        return tf.range(0, 5, d), {d: 0}
    with pytest.raises(errors.InvalidArgumentError, match="Requires delta != 0"):
        run(b)

    def ls():
        n = tf.placeholder(tf.int32, [])
        return [tf.lin_space(0., 1., 5), tf.linspace(-1.0, 1.0, n),
                tf.lin_space(tf.constant(2.0, tf.float64), 3.0, 1)], {n: 3}
    g, (fetches, feed) = build(ls)
    assert [shape_of(f) for f in fetches] == [[5], [None], [1]]
    with tf.Session(graph=g) as s:
        out = s.run(fetches, feed)
    np.testing.assert_allclose(out[0], np.linspace(0, 1, 5))
    assert out[0].dtype == np.float32 and out[0][-1] == 1.0
    np.testing.assert_allclose(out[1], [-1, 0, 1])
    assert out[2].dtype == np.float64 and out[2].tolist() == [2.0]
    with pytest.raises(TypeError):
        build(lambda: tf.linspace(0, 10, 3))
    with pytest.raises(ValueError, match="Requires num > 0: 0"):
        build(lambda: tf.lin_space(0., 1., 0))


# ======================================================================================
# ReverseV2
# ======================================================================================
def test_reverse():
    out = run(lambda: [tf.reverse(tf.reshape(tf.range(6), [2, 3]), [0, -1]),
                       tf.reverse(tf.constant([[1, 2]]), tf.constant([1], tf.int64)),
                       tf.reverse_v2(tf.constant([b"a", b"b"]), [0]),
                       tf.reverse(tf.constant([1.0, 2.0]), [])])
    np.testing.assert_array_equal(out[0], np.arange(6).reshape(2, 3)[::-1, ::-1])
    np.testing.assert_array_equal(out[1], [[2, 1]])
    assert out[2].tolist() == [b"b", b"a"]
    np.testing.assert_array_equal(out[3], [1.0, 2.0])
    with pytest.raises(ValueError, match="axis 0 specified more than once"):
        build(lambda: tf.reverse(tf.zeros([2, 3]), [0, 0]))

    def b():
        x = tf.placeholder(tf.float32)
        return tf.reverse(x, [2]), {x: np.zeros([2, 3])}
    with pytest.raises(errors.InvalidArgumentError, match=r"'axis'\[0\] = 2 is out of valid range"):
        run(b)


# ======================================================================================
# Shape / ShapeN / Size / Rank
# ======================================================================================
def test_shape_size_rank():
    def b():
        x = tf.placeholder(tf.float32, [None, 3])
        y = tf.placeholder(tf.float32)
        return [tf.shape(x), tf.shape(x, out_type=tf.int64), tf.size(x), tf.rank(x), tf.rank(y),
                tf.size(y), tf.shape_n([x, y])[1], tf.size(tf.zeros([2, 0])),
                tf.shape(tf.zeros([4, 5])), tf.size(x, out_type=tf.int64)], \
            {x: np.ones([2, 3]), y: np.ones([1, 2, 3])}
    g, (fetches, feed) = build(b)
    assert [f.op.type for f in fetches] == ["Shape", "Shape", "Size", "Const", "Rank", "Size",
                                            "ShapeN", "Const", "Const", "Size"]
    assert [f.dtype for f in fetches] == [tf.int32, tf.int64, tf.int32, tf.int32, tf.int32,
                                          tf.int32, tf.int32, tf.int32, tf.int32, tf.int64]
    assert [shape_of(f) for f in fetches] == [[2], [2], [], [], [], [], [None], [], [2], []]
    with tf.Session(graph=g) as s:
        out = s.run(fetches, feed)
    assert out[0].tolist() == [2, 3] and out[0].dtype == np.int32
    assert out[1].dtype == np.int64
    assert [int(v) for v in out[2:6]] == [6, 2, 3, 6]
    assert out[6].tolist() == [1, 2, 3]
    assert int(out[7]) == 0 and out[8].tolist() == [4, 5]
    assert np.asarray(out[9]).dtype == np.int64


# ======================================================================================
# Where / Select / SelectV2
# ======================================================================================
def test_where_and_select():
    cv = np.array([[True, False, True], [False, False, True]])
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)

    def b():
        c = tf.placeholder(tf.bool, [None, 3])
        x = tf.placeholder(tf.float32, [None, 3])
        v = tf.placeholder(tf.bool, [None])
        return [tf.where(c), tf.where(c, x, -x), tf.where(v, x, -x), tf.where_v2(c, x, 0.0),
                tf.where_v2(v[:, None], x, -x), tf.where(tf.constant(True), 1.0, 2.0),
                tf.where([[1, 0], [0, 2]])], {c: cv, x: xv, v: np.array([True, False])}
    g, (fetches, feed) = build(b)
    assert [f.op.type for f in fetches] == ["Where", "Select", "Select", "SelectV2", "SelectV2",
                                            "Select", "Where"]
    assert [shape_of(f) for f in fetches] == [[None, 2], [None, 3], [None, 3], [None, 3],
                                              [None, 3], [], [None, 2]]
    with tf.Session(graph=g) as s:
        out = s.run(fetches, feed)
    assert out[0].dtype == np.int64
    np.testing.assert_array_equal(out[0], np.argwhere(cv))
    np.testing.assert_array_equal(out[1], np.where(cv, xv, -xv))
    np.testing.assert_array_equal(out[2], np.stack([xv[0], -xv[1]]))
    np.testing.assert_array_equal(out[3], np.where(cv, xv, 0))
    np.testing.assert_array_equal(out[4], np.stack([xv[0], -xv[1]]))
    assert float(out[5]) == 1.0
    np.testing.assert_array_equal(out[6], [[0, 0], [1, 1]])


def test_where_errors():
    with pytest.raises(ValueError, match="x and y must both be non-None or both be None"):
        build(lambda: tf.where(tf.constant([True]), tf.zeros([1])))
    with pytest.raises(ValueError, match="Dimension 0 in both shapes must be equal"):
        build(lambda: tf.where(tf.zeros([3]) > 0, tf.zeros([2, 3]), tf.zeros([2, 3])))
    with pytest.raises(ValueError, match="Dimensions must be equal"):
        build(lambda: tf.where_v2(tf.zeros([3]) > 0, tf.zeros([2]), 1.0))

    def b():
        c = tf.placeholder(tf.bool)
        x = tf.placeholder(tf.float32)
        return tf.where(c, x, x), {c: [True, False, True], x: np.zeros([2, 3])}
    with pytest.raises(errors.InvalidArgumentError,
                       match="Number of batches of 'then' must match size of 'cond', but saw: 2 "
                             "vs. 3"):
        run(b)


# ======================================================================================
# IdentityN / StopGradient / Unique / InvertPermutation
# ======================================================================================
def test_identity_n_stop_gradient_unique_invperm():
    def b():
        x = tf.placeholder(tf.int32, [None])
        u = tf.unique(x)
        w = tf.unique_with_counts(x, out_idx=tf.int64)
        return [u.y, u.idx, w.y, w.idx, w.count, tf.invert_permutation([2, 0, 1]),
                tf.stop_gradient(x), tf.identity_n([x, tf.constant(1.5)])[1],
                tf.unique(tf.constant([b"b", b"a", b"b"])).y], \
            {x: np.array([3, 1, 3, 2, 1], np.int32)}
    g, (fetches, feed) = build(b)
    assert fetches[0].op.type == "Unique" and shape_of(fetches[0]) == [None]
    assert fetches[6].op.type == "StopGradient" and fetches[7].op.type == "IdentityN"
    with tf.Session(graph=g) as s:
        out = s.run(fetches, feed)
    assert out[0].tolist() == [3, 1, 2] and out[1].tolist() == [0, 1, 0, 2, 1]
    assert out[1].dtype == np.int32 and out[3].dtype == np.int64 and out[4].dtype == np.int64
    assert out[4].tolist() == [2, 2, 1]
    assert out[5].tolist() == [1, 2, 0] and out[5].dtype == np.int32
    assert out[6].tolist() == [3, 1, 3, 2, 1]
    assert float(out[7]) == 1.5
    assert out[8].tolist() == [b"b", b"a"]
    with pytest.raises(ValueError, match="Shape must be rank 1 but is rank 2"):
        build(lambda: tf.unique(tf.zeros([2, 2])))

    def bad(p):
        def f():
            a = tf.placeholder(tf.int32)
            return tf.invert_permutation(a), {a: p}
        return f
    with pytest.raises(errors.InvalidArgumentError, match="0 is duplicated in the input"):
        run(bad([0, 0, 1]))
    with pytest.raises(errors.InvalidArgumentError, match="3 is not between 0 and 3"):
        run(bad([0, 3, 1]))


# ======================================================================================
# Broadcasting
# ======================================================================================
def test_broadcast_ops():
    def b():
        x = tf.placeholder(tf.int32, [None])
        return [tf.broadcast_to(x[:1], [2, 3]), tf.broadcast_to([1, 2, 3], [2, 3]),
                tf.broadcast_dynamic_shape([2, 1], [4]), tf.broadcast_to(x, [2, 5])], \
            {x: np.arange(5, dtype=np.int32)}
    g, (fetches, feed) = build(b)
    assert [shape_of(f) for f in fetches] == [[2, 3], [2, 3], [2], [2, 5]]
    with tf.Session(graph=g) as s:
        out = s.run(fetches, feed)
    np.testing.assert_array_equal(out[0], np.zeros([2, 3]))
    np.testing.assert_array_equal(out[1], [[1, 2, 3]] * 2)
    np.testing.assert_array_equal(out[2], [2, 4])
    np.testing.assert_array_equal(out[3], [np.arange(5)] * 2)
    assert tf.broadcast_static_shape(tf.TensorShape([None, 1, 3]), tf.TensorShape([4, 1])) \
        .as_list() == [None, 4, 3]
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        tf.broadcast_static_shape(tf.TensorShape([2, 3]), tf.TensorShape([4]))
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 2 and 3"):
        build(lambda: tf.broadcast_to(tf.zeros([2]), [2, 3]))

    def bad(shape):
        def f():
            a = tf.placeholder(tf.float32)
            return tf.broadcast_to(a, shape), {a: np.zeros([2])}
        return f
    with pytest.raises(errors.InvalidArgumentError, match=r"Incompatible shapes: \[2\] vs. \[2,3\]"):
        run(bad([2, 3]))
    with pytest.raises(errors.InvalidArgumentError, match="Unable to broadcast tensor of shape"):
        run(bad([1]))

    def args():
        a = tf.placeholder(tf.int32)
        return tf.broadcast_dynamic_shape(a, [4]), {a: [2, 3]}
    with pytest.raises(errors.InvalidArgumentError, match=r"Incompatible shapes: \[2,3\] vs. \[4\]"):
        run(args)


# ======================================================================================
# Matrix diagonals and bands
# ======================================================================================
def test_matrix_ops():
    m = np.arange(18, dtype=np.float32).reshape(2, 3, 3)

    def b():
        x = tf.placeholder(tf.float32, [None, 3, 3])
        return [tf.matrix_diag(x[0]), tf.matrix_diag_part(x), tf.matrix_band_part(x, 1, 0),
                tf.matrix_band_part(x, -1, 1), tf.matrix_set_diag(x, tf.ones([2, 3])),
                tf.diag([1, 2]), tf.diag_part(tf.reshape(tf.range(16), [4, 4])),
                tf.linalg.band_part(x, 0, -1)], {x: m}
    g, (fetches, feed) = build(b)
    assert [shape_of(f) for f in fetches] == [[3, 3, 3], [None, 3], [None, 3, 3], [None, 3, 3],
                                              [2, 3, 3], [2, 2], [4], [None, 3, 3]]
    assert fetches[2].op.inputs[1].dtype == tf.int64  # Tindex defaults to int64
    with tf.Session(graph=g) as s:
        out = s.run(fetches, feed)
    np.testing.assert_array_equal(out[0], np.stack([np.diag(r) for r in m[0]]))
    np.testing.assert_array_equal(out[1], np.stack([np.diag(a) for a in m]))
    np.testing.assert_array_equal(out[2], m * np.tril(np.triu(np.ones([3, 3]), -1)))
    np.testing.assert_array_equal(out[3], m * np.tril(np.ones([3, 3]), 1))
    want = m.copy()
    want[:, [0, 1, 2], [0, 1, 2]] = 1
    np.testing.assert_array_equal(out[4], want)
    np.testing.assert_array_equal(out[5], [[1, 0], [0, 2]])
    np.testing.assert_array_equal(out[6], [0, 5, 10, 15])
    np.testing.assert_array_equal(out[7], m * np.triu(np.ones([3, 3])))


# ======================================================================================
# ScatterNd / DynamicPartition / DynamicStitch / UnravelIndex / searchsorted
# ======================================================================================
def test_scatter_partition_stitch_unravel_searchsorted():
    out = run(lambda: [
        tf.scatter_nd([[1], [3], [1]], [10, 20, 30], [5]),
        tf.scatter_nd([[0, 1], [1, 0]], [[1., 2.], [3., 4.]], [2, 2, 2]),
        tf.dynamic_partition([10, 20, 30, 40], [1, 0, 1, 2], 3),
        tf.dynamic_stitch([[0, 2], [1, 3]], [[1, 2], [3, 4]]),
        tf.unravel_index([5, 7], [3, 4]), tf.unravel_index(5, [3, 4]),
        tf.searchsorted([[1, 3, 5], [2, 4, 6]], [[2, 5], [1, 6]]),
        tf.searchsorted([1., 3., 5.], [3.], side="right")])
    np.testing.assert_array_equal(out[0], [0, 40, 0, 20, 0])  # duplicates are summed
    np.testing.assert_array_equal(out[1], [[[0, 0], [1, 2]], [[3, 4], [0, 0]]])
    assert [p.tolist() for p in out[2]] == [[20], [10, 30], [40]]
    np.testing.assert_array_equal(out[3], [1, 3, 2, 4])
    np.testing.assert_array_equal(out[4], [[1, 1], [1, 3]])
    np.testing.assert_array_equal(out[5], [1, 1])
    np.testing.assert_array_equal(out[6], [[1, 2], [0, 2]])
    np.testing.assert_array_equal(out[7], [2])
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"indices\[0\] = \[5\] does not index into shape \[4\]"):
        run(lambda: tf.scatter_nd([[5]], [1.0], [4]))


# ======================================================================================
# Composites: boolean_mask, meshgrid, sequence_mask
# ======================================================================================
def test_boolean_mask_meshgrid_sequence_mask():
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)

    def b():
        x = tf.placeholder(tf.float32, [None, 3])
        m = tf.placeholder(tf.bool, [None])
        l_ = tf.placeholder(tf.int32, [None])
        g1 = tf.meshgrid([1, 2, 3], [4, 5])
        g2 = tf.meshgrid([1, 2], [3, 4, 5], indexing="ij")
        return [tf.boolean_mask(x, m), tf.boolean_mask(x, x > 2.0),
                tf.boolean_mask(x, [True, False, True], axis=1), g1[0], g1[1], g2[1],
                tf.sequence_mask(l_), tf.sequence_mask(l_, 5, dtype=tf.float32)], \
            {x: xv, m: np.array([False, True]), l_: np.array([1, 3, 0], np.int32)}
    g, (fetches, feed) = build(b)
    assert shape_of(fetches[0]) == [None, 3] and shape_of(fetches[2]) == [None, None]
    assert shape_of(fetches[7]) == [None, 5]
    with tf.Session(graph=g) as s:
        out = s.run(fetches, feed)
    np.testing.assert_array_equal(out[0], xv[[False, True]])
    np.testing.assert_array_equal(out[1], xv[xv > 2])
    np.testing.assert_array_equal(out[2], xv[:, [True, False, True]])
    gx, gy = np.meshgrid([1, 2, 3], [4, 5])
    np.testing.assert_array_equal(out[3], gx)
    np.testing.assert_array_equal(out[4], gy)
    np.testing.assert_array_equal(out[5], np.meshgrid([1, 2], [3, 4, 5], indexing="ij")[1])
    sm = np.arange(3)[None, :] < np.array([1, 3, 0])[:, None]
    np.testing.assert_array_equal(out[6], sm)
    assert out[7].dtype == np.float32
    np.testing.assert_array_equal(out[7], (np.arange(5)[None] < np.array([1, 3, 0])[:, None]))
    with pytest.raises(ValueError, match="mask cannot be scalar"):
        build(lambda: tf.boolean_mask(tf.zeros([2]), True))
    with pytest.raises(ValueError, match="Number of mask dimensions must be specified"):
        build(lambda: tf.boolean_mask(tf.zeros([2]), tf.placeholder(tf.bool)))


# ======================================================================================
# Op definitions interchangeable with TF's
# ======================================================================================
@pytest.mark.parametrize("op, inputs, attrs", [
    ("Reshape", ["tensor", "shape"], {"T", "Tshape"}),
    ("ConcatV2", ["values", "axis"], {"N", "T", "Tidx"}),
    ("Split", ["split_dim", "value"], {"num_split", "T"}),
    ("SplitV", ["value", "size_splits", "split_dim"], {"num_split", "T", "Tlen"}),
    ("StridedSlice", ["input", "begin", "end", "strides"],
     {"T", "Index", "begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
      "shrink_axis_mask"}),
    ("GatherV2", ["params", "indices", "axis"], {"batch_dims", "Tparams", "Tindices", "Taxis"}),
    ("OneHot", ["indices", "depth", "on_value", "off_value"], {"axis", "T", "TI"}),
    ("Fill", ["dims", "value"], {"T", "index_type"}),
    ("Range", ["start", "limit", "delta"], {"Tidx"}),
    ("MirrorPad", ["input", "paddings"], {"T", "Tpaddings", "mode"}),
    ("Select", ["condition", "t", "e"], {"T"}),
])
def test_op_defs_match_tf(op, inputs, attrs):
    d = tf.default_runtime().op_def(op)
    assert [a.name for a in d.inputs] == inputs
    assert set(d.attrs) == attrs


# ======================================================================================
# Integration: one-element list outputs, TensorShape arguments, variables
# ======================================================================================
def test_list_outputs_of_length_one():
    def b():
        x = tf.placeholder(tf.float32, [None, 2])
        return [tf.split(x, 1)[0], tf.split(x, [-1], 1)[0], tf.unstack(x[:1], num=1)[0],
                tf.shape_n([x])[0], tf.identity_n([x])[0],
                tf.dynamic_partition(x, [0, 0], 1)[0]], {x: np.ones([2, 2], np.float32)}
    out = run(b)
    for o in out[:2] + out[4:]:
        np.testing.assert_array_equal(o, np.ones([2, 2]))
    np.testing.assert_array_equal(out[2], [1, 1])
    assert out[3].tolist() == [2, 2]


def test_tensor_shape_and_dimension_arguments():
    def b():
        x = tf.placeholder(tf.float32, [None, 2])
        y = tf.zeros([2, 3])
        return [tf.reshape(x, y.shape[::-1]), tf.zeros(y.shape), tf.fill(y.shape, 2.0),
                tf.ones([y.shape[1], y.shape[0]]), tf.range(y.shape[1])], \
            {x: np.ones([3, 2], np.float32)}
    g, (fetches, feed) = build(b)
    assert [shape_of(f) for f in fetches] == [[3, 2], [2, 3], [2, 3], [3, 2], [3]]
    with tf.Session(graph=g) as s:
        out = s.run(fetches, feed)
    assert out[0].shape == (3, 2) and out[2].tolist() == [[2.0] * 3] * 2
    assert out[3].shape == (3, 2) and out[4].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="Cannot convert a partially known TensorShape"):
        build(lambda: tf.reshape(tf.zeros([2]), tf.placeholder(tf.float32, [None]).shape))


def test_ops_on_variables():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
        outs = [v[0], v[:, ::-1], tf.gather(v, [1]), tf.reshape(v, [-1]), tf.shape(v),
                tf.concat([v, v], 1), tf.transpose(v), tf.tile(v, tf.shape(v))]
        init = tf.global_variables_initializer()
    with tf.Session(graph=g) as s:
        s.run(init)
        got = s.run(outs)
    m = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    for o, w in zip(got, [m[0], m[:, ::-1], m[[1]], m.reshape(-1), [2, 2],
                          np.concatenate([m, m], 1), m.T, np.tile(m, [2, 2])]):
        np.testing.assert_array_equal(o, w)


def test_shape_inference_folds_constant_subgraphs():
    def b():
        x = tf.placeholder(tf.float32, [None, 3])
        return (tf.reshape(tf.zeros([4, 6]), [-1, tf.shape(x)[1]]),
                tf.zeros([tf.shape(x)[1] * 2]), tf.fill(tf.concat([[2], tf.shape(x)[1:]], 0), 0.0),
                tf.reshape(x, [-1, tf.size(tf.zeros([3]))]))
    _, ts = build(b)
    assert [shape_of(t) for t in ts] == [[8, 3], [6], [2, 3], [None, 3]]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(-4, 4), max_size=12), st.lists(st.integers(-4, 4), max_size=6))
def test_setdiff1d_keeps_x_order_and_duplicates(xs, ys):
    x = tf.constant(np.array(xs, np.int64), dtype=tf.int64)
    y = tf.constant(np.array(ys, np.int64), dtype=tf.int64)
    out, idx = tf.setdiff1d(x, y, index_dtype=tf.int64)
    assert out.dtype == tf.int64 and idx.dtype == tf.int64
    with tf.Session() as s:
        o, i = s.run([out, idx])
    keep = [k for k, v in enumerate(xs) if v not in ys]
    assert o.tolist() == [xs[k] for k in keep] and i.tolist() == keep


def test_setdiff1d_rejects_matrices_naming_the_op():
    x = tf.placeholder(tf.int32)
    out, _ = tf.setdiff1d(x, [1])
    with tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="x should be a 1D vector"):
            s.run(out, {x: [[1, 2]]})


def test_constant_with_more_values_than_its_shape_holds_is_a_value_error():
    # TF 1.15's make_tensor_proto: ValueError with this message
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="Too many elements provided. Needed at most 2, "
                                             "but received 3"):
            tf.constant([1, 2, 3], shape=[2])
