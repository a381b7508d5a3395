"""MatMul, BatchMatMulV2, Einsum and tensordot of the standard kernel set."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

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


def const(a):
    a = np.asarray(a)
    return tf.constant(a, dtype=tf.as_dtype(a.dtype))


name = lambda d: np.dtype(d).name  # noqa: E731
MM_TYPES = [np.float16, np.float32, np.float64, np.int32, np.int64, np.complex64,
            np.complex128]


def _mat(shape, dt, seed=0):
    rng = np.random.default_rng(seed)
    m = rng.integers(-4, 5, size=shape)
    if np.dtype(dt).kind == "c":
        m = m + 1j * rng.integers(-4, 5, size=shape)
    return m.astype(dt)


# --------------------------------------------------------------------------------------
# MatMul
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", MM_TYPES, ids=name)
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_transposes(dt, ta, tb):
    a = _mat((3, 2) if ta else (2, 3), dt, 1)
    b = _mat((4, 3) if tb else (3, 4), dt, 2)
    g = tf.Graph()
    with g.as_default():
        y = tf.matmul(const(a), const(b), transpose_a=ta, transpose_b=tb)
    assert y.op.type == "MatMul" and y.shape.as_list() == [2, 4]
    assert y.op.get_attr("transpose_a") is ta and y.op.get_attr("transpose_b") is tb
    with tf.Session(graph=g) as s:
        got = s.run(y)
    assert got.dtype == dt
    want = (a.T if ta else a) @ (b.T if tb else b)
    np.testing.assert_allclose(got, want, rtol=1e-3 if dt == np.float16 else 1e-12)


@pytest.mark.parametrize("dt", [np.complex64, np.float32], ids=name)
def test_matmul_adjoint(dt):
    a, b = _mat((3, 2), dt, 3), _mat((4, 3), dt, 4)
    got = run(lambda: tf.matmul(const(a), const(b), adjoint_a=True, adjoint_b=True))
    np.testing.assert_allclose(got, a.conj().T @ b.conj().T, rtol=1e-6)
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(ValueError, match="Only one of transpose_a and adjoint_a"):
            tf.matmul(const(a), const(b), transpose_a=True, adjoint_a=True)
        y = tf.matmul(const(a.T), const(b.T), a_is_sparse=True, b_is_sparse=True)
        # TF 1.15: the hints take SparseMatMul for float32 (and bfloat16) only
        assert y.op.type == ("SparseMatMul" if np.dtype(dt) == np.float32 else "MatMul")


def test_matmul_operator_and_linalg_alias():
    a, b = _mat((2, 3), np.float64), _mat((3, 2), np.float64, 1)
    got = run(lambda: const(a) @ const(b))
    np.testing.assert_array_equal(got, a @ b)
    assert tf.linalg.matmul is tf.matmul


def test_matmul_static_shape_errors():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(np.ones((2, 3), np.float32))
        b = tf.constant(np.ones((4, 5), np.float32))
        with pytest.raises(ValueError) as e:
            tf.matmul(a, b)
        assert str(e.value) == ("Dimensions must be equal, but are 3 and 4 for 'MatMul' "
                                "(op: 'MatMul') with input shapes: [2,3], [4,5].")
        with pytest.raises(ValueError, match="but are 2 and 4"):
            tf.matmul(a, b, transpose_a=True)
        with pytest.raises(TypeError):
            tf.matmul(a, tf.constant(np.ones((3, 2)), tf.float64))
        with pytest.raises(TypeError):
            tf.matmul(tf.constant([[1]], tf.int8), tf.constant([[1]], tf.int8))


def test_matmul_unknown_dims_and_runtime_mismatch():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        w = tf.placeholder(tf.float32, [None, 7])
        y = tf.matmul(x, w)
        assert y.shape.as_list() == [None, 7] and y.op.type == "MatMul"
        assert tf.matmul(x, w, transpose_a=True, transpose_b=True).shape.as_list() == \
            [3, None]
    with tf.Session(graph=g) as s:
        got = s.run(y, {x: np.ones((2, 3), np.float32), w: np.ones((3, 7), np.float32)})
        np.testing.assert_array_equal(got, np.full((2, 7), 3.0))
        with pytest.raises(errors.InvalidArgumentError, match="Matrix size-incompatible"):
            s.run(y, {x: np.ones((2, 3), np.float32), w: np.ones((4, 7), np.float32)})


# --------------------------------------------------------------------------------------
# BatchMatMulV2
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", MM_TYPES, ids=name)
def test_batch_matmul_broadcasts_batch_dims(dt):
    a = _mat((2, 1, 3, 4), dt, 5)
    b = _mat((5, 4, 2), dt, 6)
    g = tf.Graph()
    with g.as_default():
        y = tf.matmul(const(a), const(b))
    assert y.op.type == "BatchMatMulV2" and y.shape.as_list() == [2, 5, 3, 2]
    with tf.Session(graph=g) as s:
        got = s.run(y)
    assert got.dtype == dt
    np.testing.assert_allclose(got, np.matmul(a, b), rtol=1e-3 if dt == np.float16 else 1e-12)


@pytest.mark.parametrize("dt", [np.float64, np.complex128], ids=name)
def test_batch_matmul_transpose_becomes_adjoint(dt):
    a, b = _mat((3, 4, 2), dt, 7), _mat((3, 5, 4), dt, 8)
    g = tf.Graph()
    with g.as_default():
        y = tf.matmul(const(a), const(b), transpose_a=True, transpose_b=True)
        z = tf.matmul(const(a), const(b), adjoint_a=True, adjoint_b=True)
    assert y.op.get_attr("adj_x") is True and y.op.get_attr("adj_y") is True
    if dt == np.complex128:
        assert y.op.inputs[0].op.type == "Conj"
    assert y.shape.as_list() == [3, 2, 5]
    with tf.Session(graph=g) as s:
        gy, gz = s.run([y, z])
    np.testing.assert_allclose(gy, np.swapaxes(a, -1, -2) @ np.swapaxes(b, -1, -2))
    np.testing.assert_allclose(gz, np.conj(np.swapaxes(a, -1, -2)) @
                               np.conj(np.swapaxes(b, -1, -2)))


def test_batch_matmul_shapes():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 2, 3])
        assert tf.matmul(x, tf.placeholder(tf.float32, [3, 5])).shape.as_list() == [None, 2, 5]
        u = tf.matmul(tf.placeholder(tf.float32), tf.placeholder(tf.float32, [3, 5]))
        assert u.op.type == "BatchMatMulV2" and u.shape.ndims is None
        with pytest.raises(ValueError, match="Dimensions must be equal, but are 3 and 4"):
            tf.matmul(x, tf.placeholder(tf.float32, [None, 4, 5]))
        with pytest.raises(ValueError):
            tf.matmul(tf.placeholder(tf.float32, [2, 2, 3]), tf.placeholder(tf.float32, [3, 3, 5]))


# --------------------------------------------------------------------------------------
# Einsum
# --------------------------------------------------------------------------------------
EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]),
    ("ij->ji", [(2, 3)]),
    ("ii->i", [(3, 3)]),
    ("ij->", [(2, 3)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 4)]),
    ("ab, bc -> ac", [(2, 3), (3, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[e[0] for e in EINSUM])
@pytest.mark.parametrize("dt", [np.float32, np.int64], ids=name)
def test_einsum(eq, shapes, dt):
    xs = [_mat(s, dt, i) for i, s in enumerate(shapes)]
    want = np.einsum(eq.replace(" ", ""), *xs)
    g = tf.Graph()
    with g.as_default():
        y = tf.einsum(eq, *[const(x) for x in xs])
    assert y.op.type == "Einsum" and y.op.get_attr("equation") == eq.encode()
    assert y.op.get_attr("N") == len(xs)
    assert tuple(y.shape.as_list()) == want.shape
    with tf.Session(graph=g) as s:
        got = s.run(y)
    assert np.asarray(got).dtype == dt
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_einsum_static_shapes_and_errors():
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder(tf.float32, [None, 3])
        b = tf.placeholder(tf.float32, [3, 7])
        assert tf.einsum("ij,jk->ik", a, b).shape.as_list() == [None, 7]
        assert tf.linalg.einsum("ij->j", a).shape.as_list() == [3]
        c = tf.placeholder(tf.float32, [4, None, 2, 3])
        assert tf.einsum("...ij->...ji", c).shape.as_list() == [4, None, 3, 2]
        with pytest.raises(ValueError):
            tf.einsum("ij,jk->ik", a, tf.placeholder(tf.float32, [4, 2]))
        with pytest.raises(ValueError):
            tf.einsum("ij,jk->ik", a)
        with pytest.raises(ValueError):
            tf.einsum("ij->iz", a)
        with pytest.raises(TypeError):
            tf.einsum("ij,jk->ik", a, b, bogus=1)


# --------------------------------------------------------------------------------------
# tensordot
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("axes", [1, 2, 0, [[1], [0]], ([2, 1], [1, 0]), [[-1], [-3]], [1, 0]],
                         ids=str)
def test_tensordot_static(axes):
    a, b = _mat((2, 3, 4), np.float64, 1), _mat((3, 4, 5), np.float64, 2)
    if axes == 1:
        b = _mat((4, 3, 5), np.float64, 2)
    if axes == [[-1], [-3]]:
        b = _mat((4, 5, 6), np.float64, 2)
    np_axes = axes if isinstance(axes, int) else (list(np.atleast_1d(axes[0])),
                                                  list(np.atleast_1d(axes[1])))
    want = np.tensordot(a, b, np_axes)
    g = tf.Graph()
    with g.as_default():
        y = tf.tensordot(const(a), const(b), axes)
    assert tuple(y.shape.as_list()) == want.shape
    with tf.Session(graph=g) as s:
        np.testing.assert_allclose(s.run(y), want)
    assert tf.linalg.tensordot is tf.tensordot


def test_tensordot_with_unknown_dims():
    def build():
        a = tf.placeholder(tf.float32, [None, 3])
        b = tf.constant(np.ones((3, 2), np.float32))
        y = tf.tensordot(a, b, 1)
        assert y.shape.as_list() == [None, 2]
        return y, {a: np.arange(6, dtype=np.float32).reshape(2, 3)}

    got = run(build)
    np.testing.assert_array_equal(got, np.arange(6, dtype=np.float32).reshape(2, 3) @
                                  np.ones((3, 2)))


def test_tensordot_axes_errors():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(np.ones((2, 3)))
        with pytest.raises(ValueError, match="at least 0"):
            tf.tensordot(a, a, -1)
        with pytest.raises(ValueError, match="larger than"):
            tf.tensordot(a, a, 3)
        with pytest.raises(ValueError, match="Different number"):
            tf.tensordot(a, a, [[0, 1], [0]])


# --------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(dims=st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 5)),
       batch=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3),
       dt=st.sampled_from([np.float64, np.int32]), data=st.data())
def test_matmul_property(dims, batch, dt, data):
    m, k, n = dims
    (ba, bb), _ = batch
    el = st.integers(-5, 5)
    a = data.draw(hnp.arrays(np.int64, ba + (m, k), elements=el)).astype(dt)
    b = data.draw(hnp.arrays(np.int64, bb + (k, n), elements=el)).astype(dt)
    got = run(lambda: tf.matmul(const(a), const(b)))
    want = np.matmul(a, b)
    assert got.dtype == dt and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
