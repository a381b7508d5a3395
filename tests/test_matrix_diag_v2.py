"""tf.linalg.diag / diag_part / set_diag with a band ``k``, num_rows, num_cols,
padding_value and align (MatrixDiagV2/V3, MatrixDiagPartV2/V3, MatrixSetDiagV2/V3 in
plugins/kernels/standard/array_ops.py): values against a numpy reference, static
shapes, errors and numeric gradients."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors

RNG = np.random.default_rng(5)
ALIGNS = [None, "LEFT_LEFT", "RIGHT_LEFT", "LEFT_RIGHT", "RIGHT_RIGHT"]


def np_diag_part(x, lo, hi, pad, align):
    align = align or "LEFT_LEFT"
    rows, cols = x.shape[-2:]
    max_len = min(rows + min(0, hi), cols - max(0, lo))
    out = np.full(x.shape[:-2] + (hi - lo + 1, max_len), pad, x.dtype)
    for d in range(lo, hi + 1):
        vals = np.diagonal(x, d, -2, -1)
        n = vals.shape[-1]
        right = (d >= 0 and align.startswith("RIGHT")) or (d <= 0 and align.endswith("RIGHT"))
        off = max_len - n if right else 0
        out[..., hi - d, off:off + n] = vals
    return out[..., 0, :] if lo == hi else out


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.integers(-4, 4), st.integers(0, 3),
       st.sampled_from(ALIGNS))
def test_diag_part_diag_and_set_diag_match_reference(rows, cols, lo, width, align):
    lo = max(lo, -rows + 1)
    hi = min(lo + width, cols - 1)
    lo = min(lo, hi)
    x = RNG.standard_normal((2, rows, cols)).astype(np.float32)
    k = (lo, hi) if lo != hi else lo
    want = np_diag_part(x, lo, hi, 9.0, align)
    band = np.zeros_like(x)
    r, c = np.indices((rows, cols))
    inband = ((c - r) >= lo) & ((c - r) <= hi)
    with tf.Graph().as_default():
        part = tf.linalg.diag_part(x, k=k, padding_value=9.0, align=align)
        part0 = tf.linalg.diag_part(x, k=k, align=align)
        back = tf.linalg.diag(part0, k=k, num_rows=rows, num_cols=cols, align=align)
        setd = tf.linalg.set_diag(x, part0 * 0 + 1, k=k, align=align)
        assert part.shape.as_list() == list(want.shape)
        assert back.shape.as_list() == [2, rows, cols]
        with tf.Session() as s:
            pv, bv, sv = s.run([part, back, setd])
    np.testing.assert_array_equal(pv, want)
    band[:, inband] = x[:, inband]
    np.testing.assert_array_equal(bv, band)
    exp = x.copy()
    exp[:, inband] = 1
    np.testing.assert_array_equal(sv, exp)


def test_diag_infers_square_size_and_pads():
    with tf.Graph().as_default():
        a = tf.linalg.diag([1, 2], k=1)
        b = tf.linalg.diag([1.0, 2.0], k=-1, num_cols=4, padding_value=-1.0)
        c = tf.matrix_diag([[1, 2], [3, 4]], k=(0, 1), align="RIGHT_LEFT")
        d = tf.linalg.diag([True], k=1)
        assert a.shape.as_list() == [3, 3] and b.shape.as_list() == [3, 4]
        assert a.op.type == "MatrixDiagV2" and c.op.type == "MatrixDiagV3"
        with tf.Session() as s:
            av, bv, cv, dv = s.run([a, b, c, d])
    np.testing.assert_array_equal(av, [[0, 1, 0], [0, 0, 2], [0, 0, 0]])
    np.testing.assert_array_equal(bv, [[-1, -1, -1, -1], [1, -1, -1, -1], [-1, 2, -1, -1]])
    np.testing.assert_array_equal(cv, [[3, 2], [0, 4]])
    assert dv.tolist() == [[False, True], [False, False]]


def test_k0_defaults_keep_the_v1_ops():
    with tf.Graph().as_default():
        assert tf.linalg.diag([1.0, 2.0]).op.type == "MatrixDiag"
        assert tf.linalg.diag_part(tf.zeros([2, 2])).op.type == "MatrixDiagPart"
        assert tf.linalg.set_diag(tf.zeros([2, 2]), [1.0, 1.0]).op.type == "MatrixSetDiag"


def test_errors():
    with tf.Graph().as_default():
        x = tf.zeros([3, 3])
        with pytest.raises(ValueError, match="lower_diag_index must not be larger"):
            tf.linalg.diag_part(x, k=(2, 1))
        with pytest.raises(ValueError, match="out of bound"):
            tf.linalg.diag_part(x, k=3)
        with pytest.raises(ValueError, match="align"):
            tf.linalg.diag_part(x, k=1, align="MIDDLE")
        k = tf.placeholder(tf.int32)
        p = tf.linalg.diag_part(x, k=k)
        dg = tf.linalg.diag(tf.zeros([3, 2]), k=k)
        sd = tf.linalg.set_diag(x, tf.zeros([4]), k=k)
        with tf.Session() as s:
            with pytest.raises(errors.InvalidArgumentError, match="at most 2 elements"):
                s.run(p, {k: [0, 1, 2]})
            with pytest.raises(errors.InvalidArgumentError, match="upper_diag_index is out"):
                s.run(p, {k: [0, 5]})
            with pytest.raises(errors.InvalidArgumentError, match="number of diagonals"):
                s.run(dg, {k: [0, 5]})
            with pytest.raises(errors.InvalidArgumentError, match="diagonal must have shape"):
                s.run(sd, {k: 0})


def grad_error(build, x):
    with tf.Graph().as_default():
        p = tf.placeholder(tf.float64, x.shape)
        y = build(p)
        with tf.Session():
            return tf.test.compute_gradient_error(p, list(x.shape), y, y.shape.as_list(),
                                                  x_init_value=x)


@pytest.mark.parametrize("align", [None, "RIGHT_LEFT"])
def test_gradients(align):
    x = RNG.standard_normal((2, 3, 4))
    assert grad_error(lambda p: tf.linalg.diag_part(p, k=(-1, 2), align=align), x) < 1e-8
    d = RNG.standard_normal((2, 2, 3))
    assert grad_error(lambda p: tf.linalg.diag(p, k=(0, 1), num_rows=3, num_cols=4,
                                               align=align), d) < 1e-8
    assert grad_error(lambda p: tf.linalg.set_diag(p, tf.ones([2, 2, 3], tf.float64),
                                                   k=(0, 1), align=align), x) < 1e-8
    assert grad_error(lambda p: tf.linalg.set_diag(tf.ones([2, 3, 4], tf.float64), p,
                                                   k=(0, 1), align=align), d) < 1e-8
