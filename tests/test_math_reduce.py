"""Reductions, arg-reductions, scans, add_n, clip_by_value and count_nonzero of the
standard kernel set, against numpy and TensorFlow's semantics (dtype kept, integer
mean truncates, empty reductions give the identity, duplicate axes rejected)."""
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


FLOATS = [np.float16, np.float32, np.float64]
COMPLEX = [np.complex64, np.complex128]
SINTS = [np.int8, np.int16, np.int32, np.int64]
UINTS = [np.uint8, np.uint16, np.uint32, np.uint64]
name = lambda d: np.dtype(d).name  # noqa: E731

X = np.arange(24).reshape(2, 3, 4)
REDUCE = [("reduce_sum", np.sum), ("reduce_prod", np.prod), ("reduce_max", np.max),
          ("reduce_min", np.min)]


# --------------------------------------------------------------------------------------
# values, dtypes and axes
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("api,ref", REDUCE, ids=[r[0] for r in REDUCE])
@pytest.mark.parametrize("dt", SINTS + UINTS + FLOATS, ids=name)
@pytest.mark.parametrize("axis", [None, 0, 1, -1, [0, 2], [-1, 0], [], (1, 2)], ids=str)
def test_reductions_keep_dtype(api, ref, dt, axis):
    x = (X % 5 + 1).astype(dt)
    got = run(lambda: getattr(tf, api)(const(x), axis=axis))
    npaxis = tuple(axis) if isinstance(axis, (list, tuple)) else axis
    with np.errstate(over="ignore"):
        want = ref(x, axis=npaxis).astype(dt)
    assert np.asarray(got).dtype == dt
    assert np.shape(got) == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-2 if dt == np.float16 else 1e-6)


@pytest.mark.parametrize("dt", COMPLEX, ids=name)
def test_complex_sum_prod_mean(dt):
    x = np.array([[1 + 1j, 2 - 1j], [0.5j, 3]], dt)
    s, p, m = run(lambda: [tf.reduce_sum(const(x), 0), tf.reduce_prod(const(x), 1),
                           tf.reduce_mean(const(x))])
    assert s.dtype == dt and p.dtype == dt and m.dtype == dt
    np.testing.assert_allclose(s, x.sum(0), rtol=1e-6)
    np.testing.assert_allclose(p, x.prod(1), rtol=1e-6)
    np.testing.assert_allclose(m, x.mean(), rtol=1e-6)


def test_max_min_reject_complex_and_sum_rejects_bool():
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(TypeError):
            tf.reduce_max(tf.constant([1j]))
        with pytest.raises(TypeError):
            tf.reduce_sum(tf.constant([True]))
        with pytest.raises(TypeError):
            tf.reduce_all(tf.constant([1]))


@pytest.mark.parametrize("dt", FLOATS, ids=name)
def test_mean_of_floats(dt):
    x = (X / 7).astype(dt)
    got = run(lambda: [tf.reduce_mean(const(x)), tf.reduce_mean(const(x), axis=[0, 1])])
    np.testing.assert_allclose(got[0], x.astype(np.float64).mean(), rtol=2e-3)
    np.testing.assert_allclose(got[1], x.astype(np.float64).mean(axis=(0, 1)), rtol=2e-3)
    assert got[0].dtype == dt and got[1].dtype == dt


@pytest.mark.parametrize("dt", SINTS, ids=name)
def test_mean_of_ints_is_truncated_integer_division(dt):
    x = np.array([[-1, -2], [3, 4], [1, 1]], dt)
    got = run(lambda: [tf.reduce_mean(const(x), axis=1), tf.reduce_mean(const(x))])
    assert got[0].dtype == dt and got[1].dtype == dt
    np.testing.assert_array_equal(got[0], [-1, 3, 1])  # -3 / 2 truncates to -1
    assert got[1] == 1  # 6 / 6


def test_mean_of_int8_does_not_overflow_and_sum_wraps():
    x = np.array([100, 100, 100], np.int8)
    mean, total = run(lambda: [tf.reduce_mean(const(x)), tf.reduce_sum(const(x))])
    assert mean == 100 and mean.dtype == np.int8
    assert total == np.int8(300 - 256) and total.dtype == np.int8


def test_mean_of_unsigned():
    got = run(lambda: tf.reduce_mean(tf.constant([250, 251, 252], tf.uint8)))
    assert got == 251 and got.dtype == np.uint8


def test_all_any():
    x = np.array([[True, False, True], [True, True, True]])
    a, b, c, d = run(lambda: [tf.reduce_all(const(x)), tf.reduce_all(const(x), axis=1),
                              tf.reduce_any(const(~x)), tf.reduce_any(const(~x), axis=0)])
    assert not a
    np.testing.assert_array_equal(b, [False, True])
    assert c
    np.testing.assert_array_equal(d, [False, True, False])


def test_keepdims_and_tf1_aliases():
    x = X.astype(np.float32)
    a, b, c = run(lambda: [tf.reduce_sum(const(x), axis=1, keepdims=True),
                           tf.reduce_sum(const(x), reduction_indices=[1], keep_dims=True),
                           tf.math.reduce_max(const(x), [0, 2], True)])
    assert a.shape == (2, 1, 4)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(c, x.max(axis=(0, 2), keepdims=True))
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(ValueError, match="both"):
            tf.reduce_sum(tf.constant([1.0]), axis=0, reduction_indices=0)
        with pytest.raises(ValueError, match="both"):
            tf.reduce_sum(tf.constant([1.0]), keepdims=True, keep_dims=True)


def test_reduce_python_list_input():
    assert run(lambda: tf.reduce_sum([1, 2, 3])) == 6
    assert run(lambda: tf.reduce_prod([[1.5, 2.0]], axis=1))[0] == 3.0


def test_axis_none_builds_a_constant_range_of_all_axes():
    g = tf.Graph()
    with g.as_default():
        s = tf.reduce_sum(tf.constant(np.ones((2, 3))))
    idx = s.op.inputs[1]
    assert s.op.type == "Sum" and idx.op.type == "Const"
    np.testing.assert_array_equal(idx.op.node_attrs["value"], [0, 1])
    assert s.op.get_attr("keep_dims") is False
    assert s.op.get_attr("Tidx") == tf.int32


# --------------------------------------------------------------------------------------
# empty tensors
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", [np.int32, np.uint8, np.float32, np.float64], ids=name)
def test_empty_reductions_give_identities(dt):
    x = np.zeros((0, 3), dt)
    s, p, mx, mn, m0 = run(lambda: [tf.reduce_sum(const(x)), tf.reduce_prod(const(x)),
                                    tf.reduce_max(const(x)), tf.reduce_min(const(x)),
                                    tf.reduce_max(const(x), axis=0)])
    assert s == 0 and p == 1
    for v in (s, p, mx, mn, m0):
        assert np.asarray(v).dtype == dt
    if np.dtype(dt).kind == "f":
        assert mx == -np.inf and mn == np.inf
    else:
        assert mx == np.iinfo(dt).min and mn == np.iinfo(dt).max
    assert m0.shape == (3,) and np.all(m0 == mx)
    e = run(lambda: tf.reduce_max(const(x), axis=1))
    assert e.shape == (0,)


def test_mean_of_empty():
    f, i = run(lambda: [tf.reduce_mean(const(np.zeros((0,), np.float32))),
                        tf.reduce_mean(const(np.zeros((2, 0), np.int32)), axis=1)])
    assert np.isnan(f) and f.dtype == np.float32
    np.testing.assert_array_equal(i, [0, 0])


def test_empty_all_any():
    a, b = run(lambda: [tf.reduce_all(const(np.zeros(0, bool))),
                        tf.reduce_any(const(np.zeros(0, bool)))])
    assert a and not b


# --------------------------------------------------------------------------------------
# static shapes and errors
# --------------------------------------------------------------------------------------
def test_static_shape_inference():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3, 5])
        assert tf.reduce_sum(x, axis=1).shape.as_list() == [None, 5]
        assert tf.reduce_sum(x, axis=-1, keepdims=True).shape.as_list() == [None, 3, 1]
        assert tf.reduce_mean(x).shape.as_list() == []
        assert tf.reduce_max(x, axis=[0, 0]).shape.as_list() == [3, 5]
        ax = tf.placeholder(tf.int32, [None])
        assert tf.reduce_sum(x, axis=ax).shape.ndims is None
        assert tf.reduce_sum(x, axis=ax, keepdims=True).shape.as_list() == [None, None, None]
        u = tf.placeholder(tf.float32)
        assert tf.reduce_sum(u, axis=0).shape.ndims is None
        with pytest.raises(ValueError, match="Invalid reduction dimension 3"):
            tf.reduce_sum(x, axis=3)
        with pytest.raises(ValueError, match="Invalid reduction dimension -4"):
            tf.reduce_min(x, axis=[-4])
        with pytest.raises(ValueError, match="at most rank 1"):
            tf.reduce_sum(x, axis=[[0]])


def test_runtime_axis_errors():
    def bad_axis():
        x = tf.constant(np.ones((2, 3)))
        a = tf.placeholder(tf.int32, [None])
        return tf.reduce_sum(x, axis=a), {a: np.array([2], np.int32)}

    with pytest.raises(errors.InvalidArgumentError, match="Invalid reduction dimension"):
        run(bad_axis)

    with pytest.raises(errors.InvalidArgumentError, match="duplicate dimension: 0"):
        run(lambda: tf.reduce_sum(tf.constant(np.ones((2, 3))), axis=[0, -2]))


def test_axes_from_placeholder():
    def build():
        x = tf.placeholder(tf.float64, [None, 4])
        a = tf.placeholder(tf.int64, [None])
        return tf.reduce_sum(x, axis=a, keepdims=True), {x: X[0].astype(np.float64),
                                                          a: np.array([-1], np.int64)}

    got = run(build)
    np.testing.assert_array_equal(got, X[0].sum(axis=-1, keepdims=True))


def test_axis_none_on_unknown_rank_needs_range_and_rank():
    def build():
        x = tf.placeholder(tf.float32)
        return tf.reduce_sum(x), {x: np.ones((2, 3), np.float32)}

    g = tf.Graph()
    with g.as_default():
        s = tf.reduce_sum(tf.placeholder(tf.float32))
    assert s.shape.as_list() == []
    assert run(build) == 6


# --------------------------------------------------------------------------------------
# composite reductions
# --------------------------------------------------------------------------------------
def test_reduce_logsumexp_is_stable():
    x = np.array([[1000.0, 1000.0], [-np.inf, 0.0], [1.0, 2.0]])
    a, b, c = run(lambda: [tf.reduce_logsumexp(const(x), axis=1),
                           tf.reduce_logsumexp(const(x), axis=1, keepdims=True),
                           tf.reduce_logsumexp(const(np.array([1.0, 2.0, 3.0], np.float32)))])
    np.testing.assert_allclose(a, [1000 + np.log(2), 0.0, np.log(np.e + np.e ** 2)])
    assert b.shape == (3, 1)
    np.testing.assert_allclose(c, np.log(np.exp([1, 2, 3]).sum()), rtol=1e-6)
    assert c.dtype == np.float32


def test_reduce_variance_and_std():
    x = np.array([[1.0, 2.0, 4.0], [3.0, 3.0, 9.0]])
    v, s = run(lambda: [tf.math.reduce_variance(const(x), axis=1),
                        tf.math.reduce_std(const(x))])
    np.testing.assert_allclose(v, x.var(axis=1))
    np.testing.assert_allclose(s, x.std())


def test_count_nonzero():
    x = np.array([[0, 1, 2], [0, 0, 3]], np.int32)
    a, b, c, d = run(lambda: [tf.count_nonzero(const(x)), tf.count_nonzero(const(x), axis=1),
                              tf.math.count_nonzero(const(x), axis=0, keepdims=True,
                                                    dtype=tf.int32),
                              tf.count_nonzero(tf.constant(["", "a", "bc"]))])
    assert a == 3 and a.dtype == np.int64
    np.testing.assert_array_equal(b, [2, 1])
    assert c.dtype == np.int32 and c.shape == (1, 3)
    np.testing.assert_array_equal(c, [[0, 1, 2]])
    assert d == 2


# --------------------------------------------------------------------------------------
# ArgMax / ArgMin
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", SINTS + UINTS + FLOATS + [np.bool_], ids=name)
def test_argmax_argmin(dt):
    x = (np.array([[3, 9, 1, 9], [7, 2, 8, 0], [5, 5, 5, 5]]) % (2 if dt == np.bool_ else 10)
         ).astype(dt)
    a0, a1, n0, n1 = run(lambda: [tf.argmax(const(x)), tf.argmax(const(x), axis=1),
                                  tf.argmin(const(x), 0), tf.math.argmin(const(x), axis=-1)])
    for v in (a0, a1, n0, n1):
        assert v.dtype == np.int64
    np.testing.assert_array_equal(a0, np.argmax(x, 0))
    np.testing.assert_array_equal(a1, np.argmax(x, 1))  # first of ties
    np.testing.assert_array_equal(n0, np.argmin(x, 0))
    np.testing.assert_array_equal(n1, np.argmin(x, -1))


def test_argmax_output_type_dimension_alias_and_shapes():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 4, 5])
        a = tf.argmax(x, dimension=1, output_type=tf.int32)
        assert a.dtype == tf.int32 and a.shape.as_list() == [None, 5]
        assert a.op.get_attr("output_type") == tf.int32
        assert tf.argmin(x, axis=-1).shape.as_list() == [None, 4]
        assert tf.argmax(tf.placeholder(tf.float32, [7])).shape.as_list() == []
        assert tf.argmax(x, axis=tf.placeholder(tf.int32, [])).shape.as_list() == [None, None]
        with pytest.raises(ValueError, match="must be in the range"):
            tf.argmax(x, axis=3)
        with pytest.raises(ValueError, match="both"):
            tf.argmax(x, axis=1, dimension=1)
        with pytest.raises(TypeError):
            tf.argmax(tf.constant([1j]))


def test_argmax_runtime_errors():
    with pytest.raises(errors.InvalidArgumentError, match="empty"):
        run(lambda: tf.argmax(const(np.zeros((0, 3), np.float32)), axis=0))

    def build():
        d = tf.placeholder(tf.int32, [])
        return tf.argmax(tf.constant(np.ones((2, 2))), axis=d), {d: 2}

    with pytest.raises(errors.InvalidArgumentError, match="range"):
        run(build)


# --------------------------------------------------------------------------------------
# Cumsum / Cumprod
# --------------------------------------------------------------------------------------
def _ref_scan(x, axis, exclusive, reverse, prod):
    fn = np.cumprod if prod else np.cumsum
    if reverse:
        x = np.flip(x, axis)
    out = fn(x, axis=axis, dtype=x.dtype)
    if exclusive:
        ident = np.ones_like if prod else np.zeros_like
        first = ident(np.take(out, [0], axis=axis))
        out = np.concatenate([first, np.take(out, range(out.shape[axis] - 1), axis=axis)],
                             axis=axis)
    if reverse:
        out = np.flip(out, axis)
    return out


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("api", ["cumsum", "cumprod"])
def test_scans(api, exclusive, reverse):
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    for axis in (0, 1, -1):
        got = run(lambda: getattr(tf, api)(const(x), axis=axis, exclusive=exclusive,
                                           reverse=reverse))
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, _ref_scan(x, axis, exclusive, reverse,
                                                     api == "cumprod"))


def test_scan_known_values_and_dtypes():
    a, b = run(lambda: [tf.cumsum(tf.constant([1, 2, 3]), exclusive=True, reverse=True),
                        tf.math.cumprod(tf.constant([1.5, 2.0, 3.0], tf.float64),
                                        exclusive=True)])
    np.testing.assert_array_equal(a, [5, 3, 0])
    np.testing.assert_array_equal(b, [1.0, 1.5, 3.0])
    assert b.dtype == np.float64
    got = run(lambda: tf.cumsum(tf.constant([100, 100], tf.int8)))
    assert got.dtype == np.int8 and got[1] == np.int8(-56)  # wraps, like TF


def test_scan_shapes_and_axis_errors():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        c = tf.cumsum(x, axis=1)
        assert c.shape.as_list() == [None, 3] and c.op.type == "Cumsum"
        assert c.op.get_attr("exclusive") is False and c.op.get_attr("reverse") is False
    with pytest.raises(errors.InvalidArgumentError, match="scan axis"):
        run(lambda: tf.cumsum(tf.constant([1, 2, 3]), axis=1))


# --------------------------------------------------------------------------------------
# add_n, clip_by_value
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", [np.int32, np.int64, np.float32, np.float64, np.complex64],
                         ids=name)
def test_add_n(dt):
    xs = [np.arange(6).reshape(2, 3).astype(dt) * (i + 1) for i in range(4)]
    got = run(lambda: tf.add_n([const(x) for x in xs]))
    assert got.dtype == dt
    np.testing.assert_array_equal(got, sum(xs))


def test_add_n_single_input_and_errors():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, 2.0])
        assert tf.add_n([x]) is x
        y = tf.add_n([x], name="total")
        assert y.op.type == "Identity" and y.op.name == "total"
        z = tf.add_n([x, x, [3.0, 4.0]])
        assert z.op.type == "AddN" and z.op.get_attr("N") == 3
        with pytest.raises(ValueError):
            tf.add_n([])
        with pytest.raises(ValueError):
            tf.add_n([x, tf.constant([1.0, 2.0, 3.0])])
        with pytest.raises(TypeError):
            tf.add_n([x, tf.constant([1, 2])])
        u = tf.add_n([tf.placeholder(tf.float32, [None, 3]),
                      tf.placeholder(tf.float32, [2, None])])
        assert u.shape.as_list() == [2, 3]
    with tf.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(z), [5.0, 8.0])


def test_add_n_runtime_shape_mismatch():
    def build():
        a = tf.placeholder(tf.float32, [None])
        b = tf.placeholder(tf.float32, [None])
        return tf.add_n([a, b]), {a: np.ones(2, np.float32), b: np.ones(3, np.float32)}

    with pytest.raises(errors.InvalidArgumentError, match="same size and shape"):
        run(build)


def test_clip_by_value():
    x = np.array([[-3.0, 0.5, 7.0], [1.0, 2.0, 9.0]], np.float32)
    a, b = run(lambda: [tf.clip_by_value(const(x), -1.0, 2.0),
                        tf.clip_by_value(const(x), const(np.full((2, 3), 0.0, np.float32)),
                                         3.0)])
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a, np.clip(x, -1, 2))
    np.testing.assert_array_equal(b, np.clip(x, 0, 3))
    got = run(lambda: tf.clip_by_value(tf.constant([-5, 5, 50]), 0, 10))
    np.testing.assert_array_equal(got, [0, 5, 10])
    g = tf.Graph()
    with g.as_default():
        c = tf.clip_by_value(tf.constant(x), 0.0, 1.0, name="clipped")
        assert c.op.type == "Maximum" and c.op.name == "clipped"
        with pytest.raises(ValueError):
            tf.clip_by_value(tf.constant([1.0, 2.0]), tf.constant(np.zeros((3, 2), np.float32)),
                             1.0)


# --------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------
@st.composite
def array_and_axes(draw):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
    rank = len(shape)
    axes = draw(st.lists(st.integers(0, max(rank - 1, 0)), unique=True, max_size=rank)
                if rank else st.just([]))
    axes = [a - rank if draw(st.booleans()) else a for a in axes]
    dt = draw(st.sampled_from([np.int32, np.int64, np.float32, np.float64]))
    x = draw(hnp.arrays(np.int64, shape, elements=st.integers(-9, 9))).astype(dt)
    return x, axes, draw(st.booleans())


@settings(max_examples=30, deadline=None)
@given(case=array_and_axes(),
       fn=st.sampled_from([("reduce_sum", np.sum), ("reduce_max", np.max),
                           ("reduce_min", np.min), ("reduce_prod", np.prod)]))
def test_reduction_property(case, fn):
    x, axes, keep = case
    api, ref = fn
    got = run(lambda: getattr(tf, api)(const(x), axis=axes, keepdims=keep))
    ax = tuple(axes)
    if x.size == 0 and api in ("reduce_max", "reduce_min"):
        fill = {np.dtype(np.int32): np.iinfo(np.int32), np.dtype(np.int64): np.iinfo(np.int64)}
        lim = fill.get(x.dtype)
        init = (lim.min if lim else -np.inf) if api == "reduce_max" else \
            (lim.max if lim else np.inf)
        want = ref(x, axis=ax, keepdims=keep, initial=init)
    else:
        want = ref(x, axis=ax, keepdims=keep, dtype=x.dtype) if api in (
            "reduce_sum", "reduce_prod") else ref(x, axis=ax, keepdims=keep)
    assert np.asarray(got).dtype == x.dtype
    assert np.shape(got) == np.shape(want)
    np.testing.assert_array_equal(got, want)


@settings(max_examples=30, deadline=None)
@given(case=array_and_axes())
def test_mean_property(case):
    x, axes, keep = case
    got = run(lambda: tf.reduce_mean(const(x), axis=axes, keepdims=keep))
    ax = tuple(axes)
    n = int(np.prod([x.shape[a] for a in ax])) if ax else 1
    s = np.sum(x.astype(np.float64 if x.dtype.kind == "f" else np.int64), axis=ax,
               keepdims=keep)
    assert np.asarray(got).dtype == x.dtype and np.shape(got) == np.shape(s)
    if x.dtype.kind == "f":
        with np.errstate(invalid="ignore", divide="ignore"):
            np.testing.assert_allclose(got, s / n, rtol=1e-6)
    elif n:
        np.testing.assert_array_equal(got, np.trunc(s / n).astype(x.dtype))


@settings(max_examples=30, deadline=None)
@given(x=hnp.arrays(np.int64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                    elements=st.integers(-5, 5)),
       data=st.data(), exclusive=st.booleans(), reverse=st.booleans())
def test_scan_property(x, data, exclusive, reverse):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    got = run(lambda: tf.cumsum(const(x), axis=axis, exclusive=exclusive, reverse=reverse))
    np.testing.assert_array_equal(got, _ref_scan(x, axis % x.ndim, exclusive, reverse, False))


def test_reduce_euclidean_norm_values_dtypes_and_gradient():
    x = np.array([[3.0, 4.0], [5.0, 12.0]])
    got = run(lambda: [tf.math.reduce_euclidean_norm(const(x), axis=1),
                       tf.math.reduce_euclidean_norm(const(x.astype(np.int32))),
                       tf.math.reduce_euclidean_norm(const(x), axis=0, keepdims=True)])
    np.testing.assert_allclose(got[0], [5.0, 13.0])
    assert got[1] == int(np.sqrt((x ** 2).sum())) and got[1].dtype == np.int32
    np.testing.assert_allclose(got[2], np.sqrt((x ** 2).sum(0, keepdims=True)))
    g = tf.Graph()
    with g.as_default():
        xt = tf.constant(x)
        y = tf.math.reduce_euclidean_norm(xt, axis=1)
        with tf.Session():
            err = tf.test.compute_gradient_error(xt, [2, 2], y, [2], x_init_value=x)
    assert err < 1e-6


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axis,keepdims", [
    ((64, 28, 28, 32), [0, 1, 2], False), ((300, 1024), 0, True), ((4096, 2, 3), [1, 0], False),
    ((2, 5000, 4), [0, 1], True)])
def test_sums_over_leading_axes_are_column_sums(dtype, shape, axis, keepdims, monkeypatch):
    # large float sums over leading axes (a bias gradient) take one matrix-vector product:
    # values within float rounding of float64 sums, NaN and infinities in their own
    # columns, keepdims shapes, and the plain path for a non-contiguous input
    from flowrt.plugins.kernels.standard import math_ops
    calls = []
    real = math_ops.column_sums
    monkeypatch.setattr(math_ops, "column_sums",
                        lambda *a: calls.append(a[1].shape) or real(*a))
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(dtype)
    x.reshape(-1)[0] = np.nan
    if shape[-1] > 2:
        x.reshape(-1, shape[-1])[5, 2] = np.inf
    axes = tuple(sorted(np.atleast_1d(axis) % len(shape)))
    want = x.astype(np.float64).sum(axis=axes, keepdims=keepdims)
    g = tf.Graph()
    with g.as_default():
        t = tf.constant(x)
        outs = [tf.reduce_sum(t, axis=axis, keepdims=keepdims),
                tf.reduce_sum(tf.transpose(tf.transpose(t))[::-1], axis=axis,
                              keepdims=keepdims)]
        with tf.Session() as s:
            got, flipped = s.run(outs)
    tol = dict(rtol=1e-5, atol=1e-2) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-9)
    assert got.dtype == dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, **tol)
    np.testing.assert_allclose(flipped, want, **tol)  # (reversed rows: the same sums)
    assert np.isnan(got.reshape(-1)[0]) and (shape[-1] <= 2 or got.reshape(-1)[2] == np.inf)
    rows = int(np.prod([shape[a] for a in axes]))
    assert (rows, x.size // rows) in calls
