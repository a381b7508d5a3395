"""Numerical gradient checks (TF1's ``tf.test.compute_gradient``).

The theoretical Jacobian comes from the gradient graph that :func:`flowrt.gradients`
builds, run once per element of ``y`` with a one-hot ``grad_ys``; the numerical one from
central differences ``(y(x + delta) - y(x - delta)) / (2 * delta)``, one element of ``x``
at a time. Both run in the default session. Complex tensors count as vectors of twice as
many reals (real and imaginary parts interleaved), as in TF. Use float64 in tests: in
float32 the differences lose about half of the significant digits.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..base import dtypes as _dt
from ..framework.graph import Tensor, api_function, convert_to_tensor
from ..framework.session import get_default_session
from ..framework.gradients import gradients

__all__ = ["compute_gradient", "compute_gradient_error"]

_ALLOWED = (_dt.float16, _dt.bfloat16, _dt.float32, _dt.float64, _dt.complex64,
            _dt.complex128)


def _product(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _feeds(extra: dict[Any, Any] | None, feeds: dict[Any, Any]) -> dict[Any, Any]:
    if not extra:
        return feeds
    out = dict(extra)
    out.update(feeds)
    return out


def _default_session() -> Any:

    sess = get_default_session()
    if sess is None:
        raise ValueError("compute_gradient needs a default session: call it inside "
                         "`with tf.Session() as sess:` (or `with sess.as_default():`)")
    return sess


def _dtype_of(x: Any) -> _dt.DType:
    return _dt.as_dtype(x.dtype).base_dtype


def _compute_dx_and_dy(x: Any, y: Tensor, y_shape: Sequence[int]) -> tuple[Any, Tensor]:
    """The gradient of ``y`` with respect to ``x`` and the fed tensor standing for dy.

    dy is a constant passed through an Identity: the constant is what gets fed, so the
    fed tensor is never also a fetched one (for Add the gradient *is* dy).
    """

    with y.graph.as_default():
        dy_orig = convert_to_tensor(np.ones(tuple(y_shape), dtype=_dtype_of(y).np),
                                    name="Const")
        dy = api_function("identity")(dy_orig)
    grads = gradients(y, x, dy)
    assert len(grads) == 1
    return grads[0], dy_orig


def _theoretical_jacobian(x: Any, x_shape: Sequence[int], x_data: np.ndarray, dy: Tensor,
                          dy_shape: Sequence[int], dx: Any,
                          extra_feed_dict: dict[Any, Any] | None) -> np.ndarray:
    """The Jacobian of ``y`` with respect to ``x`` from the symbolic gradient ``dx``.

    Column ``j`` is ``dx`` evaluated with ``dy`` fed a one-hot vector at ``j`` (complex
    values count as two real components). ``dx`` of None gives a zero Jacobian.

    :returns: an array of shape ``(x size, y size)`` in ``x``'s real dtype
    :raises ValueError: if the gradient's shape differs from ``x``'s, or the gradient of
        an empty ``y`` is nonzero
    """
    xd = _dtype_of(x)
    if xd.is_complex:
        x_shape = tuple(x_shape) + (2,)
    dyd = _dtype_of(dy)
    dy_factor = 2 if dyd.is_complex else 1
    x_size = _product(x_shape)
    dy_size = _product(dy_shape) * dy_factor
    jacobian = np.zeros((x_size, dy_size), dtype=xd.real_dtype.np)
    if dx is None:  # x does not reach y: its gradient is zero everywhere
        return jacobian
    dy_data = np.zeros(tuple(dy_shape), dtype=dyd.np)
    dy_flat = dy_data.reshape(-1).view(dyd.real_dtype.np)
    sess = _default_session()
    for col in range(dy_size):
        dy_flat[col] = 1
        backprop = np.asarray(sess.run(dx, feed_dict=_feeds(extra_feed_dict,
                                                            {x: x_data, dy: dy_data})))
        if backprop.shape != np.shape(x_data):
            raise ValueError(f"The gradient has shape {backprop.shape}, but x has shape "
                             f"{np.shape(x_data)}")
        jacobian[:, col] = np.ascontiguousarray(backprop, dtype=xd.np).reshape(-1).view(
            jacobian.dtype)
        dy_flat[col] = 0
    if not dy_size:  # empty y: the gradient must still have x's shape and be zero
        backprop = np.asarray(sess.run(dx, feed_dict=_feeds(extra_feed_dict,
                                                            {x: x_data, dy: dy_data})))
        if backprop.shape != np.shape(x_data):
            raise ValueError(f"Empty gradient has wrong shape: expected "
                             f"{np.shape(x_data)}, got {backprop.shape}")
        if np.any(backprop):
            raise ValueError("Empty tensor with nonzero gradients")
    return jacobian


def _numeric_jacobian(x: Any, x_shape: Sequence[int], x_data: np.ndarray, y: Tensor,
                      y_shape: Sequence[int], delta: float,
                      extra_feed_dict: dict[Any, Any] | None) -> np.ndarray:
    """The Jacobian of ``y`` with respect to ``x`` by central differences of step ``delta``.

    Row ``i`` is ``(y(x + delta e_i) - y(x - delta e_i)) / (2 delta)``, each component of
    a complex value taken separately; a bfloat16 ``y`` is differenced in float32.

    :returns: an array of shape ``(x size, y size)`` in ``x``'s real dtype
    """
    xd, yd = _dtype_of(x), _dtype_of(y)
    if yd is _dt.bfloat16:  # too few bits for delta: difference in float32
        y = api_function("cast")(y, _dt.float32)
        yd = _dt.float32
    x_size = _product(x_shape) * (2 if xd.is_complex else 1)
    y_size = _product(y_shape) * (2 if yd.is_complex else 1)
    x_real = xd.real_dtype.np
    y_real = yd.real_dtype.np
    x_data = np.asarray(x_data, dtype=xd.np)
    scale = np.asarray(2 * delta, dtype=y_real)[()]
    jacobian = np.zeros((x_size, y_size), dtype=x_real)
    sess = _default_session()
    for row in range(x_size):
        x_pos = x_data.copy()
        x_neg = x_data.copy()
        x_pos.reshape(-1).view(x_real)[row] += delta
        y_pos = np.asarray(sess.run(y, feed_dict=_feeds(extra_feed_dict, {x: x_pos})))
        x_neg.reshape(-1).view(x_real)[row] -= delta
        y_neg = np.asarray(sess.run(y, feed_dict=_feeds(extra_feed_dict, {x: x_neg})))
        diff = (y_pos - y_neg) / scale
        jacobian[row, :] = np.ascontiguousarray(diff, dtype=yd.np).reshape(-1).view(y_real)
    return jacobian


def _compute_gradient(x: Any, x_shape: Sequence[int], dx: Any, y: Tensor,
                      y_shape: Sequence[int], dy: Tensor, x_init_value: Any = None,
                      delta: float = 1e-3, extra_feed_dict: dict[Any, Any] | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The theoretical and numeric Jacobians of ``y`` with respect to ``x``.

    ``x`` takes ``x_init_value``, else random values of its dtype.

    :returns: ``(theoretical, numeric)``
    :raises AssertionError: if ``x`` or ``y`` has an unsupported dtype, or
        ``x_init_value`` does not have shape ``x_shape`` (as TF asserts)
    """
    t = _dtype_of(x)
    if t not in _ALLOWED:  # TF asserts these
        raise AssertionError(f"Don't support type {t.name} for x")
    t2 = _dtype_of(y)
    if t2 not in _ALLOWED:
        raise AssertionError(f"Don't support type {t2.name} for y")
    if x_init_value is not None:
        x_data = np.asarray(x_init_value)
        if list(x_data.shape) != [int(d) for d in x_shape]:
            raise AssertionError(f"x_shape = {list(x_shape)}, init_data shape = "
                             f"{list(x_data.shape)}")
    else:
        x_data = np.random.random_sample(tuple(x_shape)).astype(t.np)
        if t.is_complex:
            x_data.imag = np.random.random_sample(tuple(x_shape))
    x_data = np.asarray(x_data, dtype=t.np)
    jacob_t = _theoretical_jacobian(x, x_shape, x_data, dy, y_shape, dx, extra_feed_dict)
    jacob_n = _numeric_jacobian(x, x_shape, x_data, y, y_shape, delta, extra_feed_dict)
    return jacob_t, jacob_n


def _run_init(init_targets: Any) -> None:
    if init_targets is None:
        return
    if not isinstance(init_targets, (list, tuple)):
        raise TypeError("init_targets must be a list or tuple of ops")
    sess = _default_session()
    for init in init_targets:
        sess.run(init)


def compute_gradient(x: Any, x_shape: Any, y: Tensor, y_shape: Sequence[int],
                     x_init_value: Any = None, delta: float = 1e-3, init_targets: Any = None,
                     extra_feed_dict: dict[Any, Any] | None = None) -> Any:
    """The theoretical and numerical Jacobians of ``y`` with respect to ``x``.

    :param x: a tensor (or variable), or a list of them
    :param x_shape: the shape of ``x`` (a list of shapes when ``x`` is a list)
    :param y: the tensor to differentiate
    :param y_shape: the shape of ``y``
    :param x_init_value: the value of ``x`` (random in [0, 1) when None); a list for a
        list ``x``
    :param delta: the central-difference step
    :param init_targets: ops run once first (variable initialisers)
    :param extra_feed_dict: further feeds for every run
    :returns: ``(theoretical, numerical)``, two arrays of shape ``[x_size, y_size]``
        (sizes doubled for complex tensors); a list of such pairs for a list ``x``
    """
    if extra_feed_dict is None:
        extra_feed_dict = {}
    if isinstance(x, list):
        pairs = [_compute_dx_and_dy(xi, y, y_shape) for xi in x]
        _run_init(init_targets)
        inits = x_init_value if x_init_value is not None else [None] * len(x)
        return [_compute_gradient(xi, si, dxi, y, y_shape, dyi, vi, delta, extra_feed_dict)
                for xi, si, (dxi, dyi), vi in zip(x, x_shape, pairs, inits)]
    _run_init(init_targets)
    dx, dy = _compute_dx_and_dy(x, y, y_shape)
    return _compute_gradient(x, x_shape, dx, y, y_shape, dy, x_init_value, delta,
                             extra_feed_dict)


def _compute_error(grad: Any) -> float:
    if isinstance(grad, tuple):
        grad = [grad]
    error = 0.0
    for j_t, j_n in grad:
        if j_t.size or j_n.size:  # zero-size Jacobians contribute nothing
            error = np.maximum(error, np.fabs(j_t - j_n).max())
    return error


def compute_gradient_error(x: Any, x_shape: Any, y: Tensor, y_shape: Sequence[int],
                           x_init_value: Any = None, delta: float = 1e-3,
                           init_targets: Any = None,
                           extra_feed_dict: dict[Any, Any] | None = None) -> float:
    """The largest absolute difference between the theoretical and the numerical
    Jacobian (over every x when ``x`` is a list); arguments as :func:`compute_gradient`."""
    grad = compute_gradient(x, x_shape, y, y_shape, x_init_value, delta, init_targets,
                            extra_feed_dict=extra_feed_dict)
    return _compute_error(grad)
