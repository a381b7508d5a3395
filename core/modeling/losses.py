"""``tf.losses``: TF 1.15's loss functions, their reductions and the loss collections.

Every loss builds its ops under a name scope of its own (``mean_squared_error/``),
computes the element-wise losses in float32, weights them (``weights`` must broadcast
to the losses: scalar, or the same rank with each dimension 1 or equal), reduces them
as ``reduction`` says (:class:`Reduction`), casts back to the input dtype and adds the
result to ``loss_collection`` (``tf.GraphKeys.LOSSES`` by default).

The weight helpers (:func:`remove_squeezable_dimensions`, :func:`assert_broadcastable`,
:func:`broadcast_weights`) are shared with :mod:`flowrt.modeling.metrics`.
"""
from __future__ import annotations

from typing import Any

from ..base import dtypes as _dt
from ..framework.graph import (GraphKeys, Tensor, add_to_collection, api_function,
                               control_dependencies, convert_to_tensor, get_collection,
                               name_scope)
from ..plugin.runtime import require_api

__all__ = ["Reduction", "compute_weighted_loss", "absolute_difference", "cosine_distance",
           "hinge_loss", "huber_loss", "log_loss", "mean_pairwise_squared_error",
           "mean_squared_error", "sigmoid_cross_entropy", "softmax_cross_entropy",
           "sparse_softmax_cross_entropy", "add_loss", "get_losses",
           "get_regularization_loss", "get_regularization_losses", "get_total_loss"]

REQUIRED_API_NAMES = frozenset({
    "cast", "multiply", "subtract", "add", "abs", "square", "squared_difference",
    "minimum", "maximum", "log", "reduce_sum", "reduce_all", "div_no_nan", "where",
    "equal", "logical_or", "zeros_like", "ones_like", "size", "shape", "rank", "range",
    "squeeze", "cond", "Assert", "no_op", "add_n", "constant", "stop_gradient",
    "nn.relu", "nn.sigmoid_cross_entropy_with_logits",
    "nn.softmax_cross_entropy_with_logits_v2",
    "nn.sparse_softmax_cross_entropy_with_logits",
})
require_api(REQUIRED_API_NAMES)


def _op(name: str) -> Any:
    return api_function(name)


class Reduction:
    """How a loss reduces its weighted element losses (``tf.losses.Reduction``).

    * ``NONE``: the weighted losses, same shape as the input;
    * ``SUM``: their sum;
    * ``MEAN``: ``SUM`` divided by the sum of the (broadcast) weights;
    * ``SUM_OVER_BATCH_SIZE``: ``SUM`` divided by the number of elements;
    * ``SUM_OVER_NONZERO_WEIGHTS`` (= ``SUM_BY_NONZERO_WEIGHTS``, the default): ``SUM``
      divided by the number of non-zero weights.
    """

    NONE = "none"
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    MEAN = "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls) -> tuple[str, ...]:
        """Every reduction key."""
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE,
                cls.SUM_OVER_NONZERO_WEIGHTS, cls.SUM_BY_NONZERO_WEIGHTS)

    @classmethod
    def validate(cls, key: str) -> None:
        """:raises ValueError: if ``key`` is not a reduction key"""
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key {key}.")


# -- shared weight helpers ----------------------------------------------------------------
def remove_squeezable_dimensions(labels: Any, predictions: Any, expected_rank_diff: int = 0,
                                 name: str | None = None) -> tuple[Tensor, Tensor]:
    """Squeeze the last dimension of ``predictions`` (or ``labels``) when it is 1 and the
    ranks differ by one more (or less) than ``expected_rank_diff`` (TF's
    ``confusion_matrix.remove_squeezable_dimensions``), statically when the ranks are
    known, else with a ``cond``."""
    with name_scope(name, "remove_squeezable_dimensions", [labels, predictions]):
        predictions = convert_to_tensor(predictions)
        labels = convert_to_tensor(labels)
        p_shape, l_shape = predictions.get_shape(), labels.get_shape()
        p_rank, l_rank = p_shape.ndims, l_shape.ndims
        if p_rank is not None and l_rank is not None:
            diff = p_rank - l_rank
            if diff == expected_rank_diff + 1 and p_shape.dims[-1].is_compatible_with(1):
                predictions = _op("squeeze")(predictions, [-1])
            elif diff == expected_rank_diff - 1 and l_shape.dims[-1].is_compatible_with(1):
                labels = _op("squeeze")(labels, [-1])
            return labels, predictions
        rank_diff = _op("rank")(predictions) - _op("rank")(labels)
        if p_rank is None or p_shape.dims[-1].is_compatible_with(1):
            p = predictions
            predictions = _op("cond")(_op("equal")(expected_rank_diff + 1, rank_diff),
                                      lambda: _op("squeeze")(p, [-1]), lambda: p)
        if l_rank is None or l_shape.dims[-1].is_compatible_with(1):
            lab = labels
            labels = _op("cond")(_op("equal")(expected_rank_diff - 1, rank_diff),
                                 lambda: _op("squeeze")(lab, [-1]), lambda: lab)
        return labels, predictions


_BROADCAST_ERROR = "weights can not be broadcast to values."


def assert_broadcastable(weights: Any, values: Any) -> Any:
    """An op checking that ``weights`` broadcast to ``values``: a scalar, or the same
    rank with every dimension 1 or equal to the values' (TF's
    ``weights_broadcast_ops.assert_broadcastable``). Checked now when the static shapes
    allow (a ``no_op`` is returned), else at run time (an ``Assert``).

    :raises ValueError: when the static shapes cannot broadcast
    """
    with name_scope(None, "assert_broadcastable", (weights, values)) as scope:
        weights = convert_to_tensor(weights, name="weights")
        values = convert_to_tensor(values, name="values")
        w_shape, v_shape = weights.get_shape(), values.get_shape()
        if w_shape.ndims is not None and v_shape.ndims is not None:
            if w_shape.ndims == 0:
                return _op("no_op")(name="static_scalar_check_success")
            if w_shape.ndims != v_shape.ndims:
                raise ValueError(f"{_BROADCAST_ERROR} values.rank={v_shape.ndims}. "
                                 f"weights.rank={w_shape.ndims}. values.shape={v_shape}. "
                                 f"weights.shape={w_shape}.")
            if w_shape.is_fully_defined() and v_shape.is_fully_defined():
                for i, (w, v) in enumerate(zip(w_shape.as_list(), v_shape.as_list())):
                    if w not in (1, v):
                        raise ValueError(f"{_BROADCAST_ERROR} Mismatch at dim {i}. "
                                         f"values.shape={v_shape.as_list()}, "
                                         f"weights.shape={w_shape.as_list()}.")
                return _op("no_op")(name="static_dims_check_success")
        w_dims, v_dims = _op("shape")(weights), _op("shape")(values)
        w_rank, v_rank = _op("rank")(weights), _op("rank")(values)
        is_scalar = _op("equal")(0, w_rank, name="is_scalar")

        def valid_dims() -> Tensor:
            ok = _op("logical_or")(_op("equal")(w_dims, 1), _op("equal")(w_dims, v_dims))
            return _op("reduce_all")(ok)

        def nonscalar() -> Tensor:
            same = _op("equal")(v_rank, w_rank, name="is_same_rank")
            return _op("cond")(same, valid_dims, lambda: same)

        is_valid = _op("cond")(is_scalar, lambda: is_scalar, nonscalar,
                               name="is_valid_shape")
        data = [_BROADCAST_ERROR, "weights.shape=", weights.name, w_dims,
                "values.shape=", values.name, v_dims, "is_scalar=", is_scalar]
        return _op("Assert")(is_valid, data, name=scope)


def broadcast_weights(weights: Any, values: Any) -> Tensor:
    """``weights`` broadcast to the shape of ``values`` (checked by
    :func:`assert_broadcastable`); returned as is when both static shapes are fully
    defined and equal."""
    with name_scope(None, "broadcast_weights", (weights, values)) as scope:
        values = convert_to_tensor(values, name="values")
        weights = convert_to_tensor(weights, dtype=values.dtype.base_dtype, name="weights")
        w_shape, v_shape = weights.get_shape(), values.get_shape()
        if w_shape.is_fully_defined() and v_shape.is_fully_defined() and \
                w_shape.is_compatible_with(v_shape):
            return weights
        with control_dependencies((assert_broadcastable(weights, values),)):
            return _op("multiply")(weights, _op("ones_like")(values), name=scope)


# -- reductions ---------------------------------------------------------------------------
def _safe_mean(losses: Tensor, num_present: Any) -> Tensor:
    return _op("div_no_nan")(_op("reduce_sum")(losses), num_present, name="value")


def _num_elements(losses: Tensor) -> Tensor:
    with name_scope(None, "num_elements", values=[losses]) as scope:
        return _op("cast")(_op("size")(losses, name=scope), losses.dtype)


def _num_present(losses: Tensor, weights: Any, per_batch: bool = False) -> Tensor:
    """How many elements of ``losses`` have a non-zero weight (``weights`` broadcast to
    ``losses``), in all or (``per_batch``) per row of the first dimension."""
    if isinstance(weights, float) and weights != 0.0:
        return _num_elements(losses)
    with name_scope(None, "num_present", (losses, weights)) as scope:
        weights = _op("cast")(weights, _dt.float32)
        present = _op("where")(_op("equal")(weights, 0.0), _op("zeros_like")(weights),
                               _op("ones_like")(weights))
        present = broadcast_weights(present, losses)
        if per_batch:
            axis = _op("range")(1, _op("rank")(present))
            return _op("reduce_sum")(present, axis=axis, keepdims=True, name=scope)
        return _op("reduce_sum")(present, name=scope)


def add_loss(loss: Any, loss_collection: str | None = GraphKeys.LOSSES) -> None:
    """Add ``loss`` to ``loss_collection`` (nothing when it is None or empty)."""
    if loss_collection:
        add_to_collection(loss_collection, loss)


def compute_weighted_loss(losses: Any, weights: Any = 1.0, scope: str | None = None,
                          loss_collection: str | None = GraphKeys.LOSSES,
                          reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """``losses * weights`` reduced as ``reduction`` says, computed in float32 and cast
    back to the dtype of ``losses``, and added to ``loss_collection``.

    :param weights: scalar or of the rank of ``losses``, each dimension 1 or equal
    :raises ValueError: for an unknown reduction or weights that cannot broadcast
    """
    Reduction.validate(reduction)
    with name_scope(scope, "weighted_loss", (losses, weights)):
        with control_dependencies((assert_broadcastable(weights, losses),)):
            losses = convert_to_tensor(losses)
            input_dtype = losses.dtype
            losses = _op("cast")(losses, _dt.float32)
            weights = _op("cast")(weights, _dt.float32)
            weighted = _op("multiply")(losses, weights)
            if reduction == Reduction.NONE:
                loss = weighted
            else:
                loss = _op("reduce_sum")(weighted)
                if reduction == Reduction.MEAN:
                    loss = _safe_mean(loss, _op("reduce_sum")(
                        _op("ones_like")(losses) * weights))
                elif reduction == Reduction.SUM_BY_NONZERO_WEIGHTS:
                    loss = _safe_mean(loss, _num_present(losses, weights))
                elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
                    loss = _safe_mean(loss, _num_elements(losses))
            loss = _op("cast")(loss, input_dtype)
            add_loss(loss, loss_collection)
            return loss


# -- the losses ---------------------------------------------------------------------------
def _check_args(**args: Any) -> None:
    for name, value in args.items():
        if value is None:
            raise ValueError(f"{name} must not be None.")


def _float_pair(labels: Any, predictions: Any) -> tuple[Tensor, Tensor]:
    """Both cast to float32, their static shapes checked compatible (ValueError)."""
    predictions = _op("cast")(predictions, _dt.float32)
    labels = _op("cast")(labels, _dt.float32)
    predictions.get_shape().assert_is_compatible_with(labels.get_shape())
    return labels, predictions


def absolute_difference(labels: Any, predictions: Any, weights: Any = 1.0,
                        scope: str | None = None,
                        loss_collection: str | None = GraphKeys.LOSSES,
                        reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """The weighted ``|predictions - labels|`` (float32).

    :raises ValueError: for incompatible shapes or a None argument
    """
    _check_args(labels=labels, predictions=predictions)
    with name_scope(scope, "absolute_difference", (predictions, labels, weights)) as scope:
        labels, predictions = _float_pair(labels, predictions)
        losses = _op("abs")(_op("subtract")(predictions, labels))
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def cosine_distance(labels: Any, predictions: Any, axis: int | None = None,
                    weights: Any = 1.0, scope: str | None = None,
                    loss_collection: str | None = GraphKeys.LOSSES,
                    reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS,
                    dim: int | None = None) -> Tensor:
    """The weighted ``1 - sum(predictions * labels, axis)`` (keeping ``axis``), for
    unit-normalised inputs. ``dim`` is the old name of ``axis``.

    :raises ValueError: without ``axis``, for incompatible shapes or a None argument
    """
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    axis = dim if axis is None else axis
    if axis is None:
        raise ValueError("You must specify 'axis'.")
    _check_args(labels=labels, predictions=predictions)
    with name_scope(scope, "cosine_distance_loss", (predictions, labels, weights)) as scope:
        labels, predictions = _float_pair(labels, predictions)
        radial = _op("multiply")(predictions, labels)
        losses = 1 - _op("reduce_sum")(radial, axis=(axis,), keepdims=True)
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def hinge_loss(labels: Any, logits: Any, weights: Any = 1.0, scope: str | None = None,
               loss_collection: str | None = GraphKeys.LOSSES,
               reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """The weighted ``relu(1 - (2 * labels - 1) * logits)`` for labels in {0, 1}.

    :raises ValueError: for incompatible shapes or a None argument
    """
    _check_args(labels=labels, logits=logits)
    with name_scope(scope, "hinge_loss", (logits, labels, weights)) as scope:
        labels, logits = _float_pair(labels, logits)
        all_ones = _op("ones_like")(labels)
        labels = _op("subtract")(2 * labels, all_ones)
        losses = _op("nn.relu")(_op("subtract")(all_ones, _op("multiply")(labels, logits)))
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def huber_loss(labels: Any, predictions: Any, weights: Any = 1.0, delta: float = 1.0,
               scope: str | None = None, loss_collection: str | None = GraphKeys.LOSSES,
               reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """The weighted Huber loss of ``predictions - labels``: ``0.5 * x**2`` where
    ``|x| <= delta``, ``0.5 * delta**2 + delta * (|x| - delta)`` beyond.

    :raises ValueError: for incompatible shapes or a None argument
    """
    _check_args(labels=labels, predictions=predictions)
    with name_scope(scope, "huber_loss", (predictions, labels, weights)) as scope:
        labels, predictions = _float_pair(labels, predictions)
        abs_error = _op("abs")(_op("subtract")(predictions, labels))
        quadratic = _op("minimum")(abs_error, delta)
        linear = _op("subtract")(abs_error, quadratic)
        half = convert_to_tensor(0.5, dtype=quadratic.dtype)
        losses = _op("add")(_op("multiply")(half, _op("multiply")(quadratic, quadratic)),
                            _op("multiply")(delta, linear))
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def log_loss(labels: Any, predictions: Any, weights: Any = 1.0, epsilon: float = 1e-7,
             scope: str | None = None, loss_collection: str | None = GraphKeys.LOSSES,
             reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """The weighted ``-labels * log(p + eps) - (1 - labels) * log(1 - p + eps)``.

    :raises ValueError: for incompatible shapes or a None argument
    """
    _check_args(labels=labels, predictions=predictions)
    with name_scope(scope, "log_loss", (predictions, labels, weights)) as scope:
        labels, predictions = _float_pair(labels, predictions)
        losses = -_op("multiply")(labels, _op("log")(predictions + epsilon)) - \
            _op("multiply")((1 - labels), _op("log")(1 - predictions + epsilon))
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def mean_pairwise_squared_error(labels: Any, predictions: Any, weights: Any = 1.0,
                                scope: str | None = None,
                                loss_collection: str | None = GraphKeys.LOSSES) -> Tensor:
    """The weighted mean, over the pairs of elements within each sample (first
    dimension), of ``((p_i - p_j) - (l_i - l_j))**2``, summed over the batch as TF does:
    ``2 * sum(d**2) / (n - 1) - 2 * sum(d)**2 / (n * (n - 1))`` per sample, with ``d``
    the differences and ``n`` the elements with non-zero weight. No ``reduction``.

    :raises ValueError: for incompatible shapes, weights that cannot broadcast, or a
        None argument
    """
    _check_args(labels=labels, predictions=predictions)
    with name_scope(scope, "mean_pairwise_squared_error", (predictions, labels, weights)):
        weights = _op("cast")(weights, _dt.float32)
        labels = _op("cast")(labels, _dt.float32)
        with control_dependencies((assert_broadcastable(weights, labels),)):
            predictions = _op("cast")(predictions, _dt.float32)
            predictions.get_shape().assert_is_compatible_with(labels.get_shape())
            diffs = _op("subtract")(predictions, labels)
            axis = _op("range")(1, _op("rank")(diffs))
            sum_sq = _op("reduce_sum")(_op("square")(diffs), axis=axis, keepdims=True)
            n = _num_present(diffs, weights, per_batch=True)
            term1 = 2.0 * _op("div_no_nan")(sum_sq, _op("maximum")(n - 1, 0), name="value")
            sum_diff = _op("reduce_sum")(diffs, axis=axis, keepdims=True)
            term2 = 2.0 * _op("div_no_nan")(
                _op("square")(sum_diff),
                _op("maximum")(_op("multiply")(n, n - 1), 0), name="value")
            loss = _op("reduce_sum")(_op("multiply")(term1 - term2, weights))
            mean_loss = _op("where")(_op("reduce_sum")(n) > 0, loss,
                                     _op("zeros_like")(loss), name="value")
            add_loss(mean_loss, loss_collection)
            return mean_loss


def mean_squared_error(labels: Any, predictions: Any, weights: Any = 1.0,
                       scope: str | None = None,
                       loss_collection: str | None = GraphKeys.LOSSES,
                       reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """The weighted ``(predictions - labels)**2``.

    :raises ValueError: for incompatible shapes or a None argument
    """
    _check_args(labels=labels, predictions=predictions)
    with name_scope(scope, "mean_squared_error", (predictions, labels, weights)) as scope:
        labels, predictions = _float_pair(labels, predictions)
        losses = _op("squared_difference")(predictions, labels)
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def sigmoid_cross_entropy(multi_class_labels: Any, logits: Any, weights: Any = 1.0,
                          label_smoothing: float = 0, scope: str | None = None,
                          loss_collection: str | None = GraphKeys.LOSSES,
                          reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """The weighted ``sigmoid_cross_entropy_with_logits``; with ``label_smoothing`` the
    labels become ``labels * (1 - s) + 0.5 * s``. Keeps the dtype of ``logits``.

    :raises ValueError: for incompatible shapes or a None argument
    """
    _check_args(multi_class_labels=multi_class_labels, logits=logits)
    with name_scope(scope, "sigmoid_cross_entropy_loss",
                    (logits, multi_class_labels, weights)) as scope:
        logits = convert_to_tensor(logits)
        labels = _op("cast")(multi_class_labels, logits.dtype)
        logits.get_shape().assert_is_compatible_with(labels.get_shape())
        if label_smoothing > 0:
            labels = labels * (1 - label_smoothing) + 0.5 * label_smoothing
        losses = _op("nn.sigmoid_cross_entropy_with_logits")(
            labels=labels, logits=logits, name="xentropy")
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def softmax_cross_entropy(onehot_labels: Any, logits: Any, weights: Any = 1.0,
                          label_smoothing: float = 0, scope: str | None = None,
                          loss_collection: str | None = GraphKeys.LOSSES,
                          reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """The weighted ``softmax_cross_entropy_with_logits_v2`` over the last axis, no
    gradient to the labels; with ``label_smoothing`` the labels become
    ``labels * (1 - s) + s / num_classes``. Keeps the dtype of ``logits``.

    :raises ValueError: for incompatible shapes or a None argument
    """
    _check_args(onehot_labels=onehot_labels, logits=logits)
    with name_scope(scope, "softmax_cross_entropy_loss",
                    (logits, onehot_labels, weights)) as scope:
        logits = convert_to_tensor(logits)
        labels = _op("cast")(onehot_labels, logits.dtype)
        logits.get_shape().assert_is_compatible_with(labels.get_shape())
        if label_smoothing > 0:
            num_classes = _op("cast")(_op("shape")(labels)[-1], logits.dtype)
            labels = labels * (1.0 - label_smoothing) + label_smoothing / num_classes
        labels = _op("stop_gradient")(labels, name="labels_stop_gradient")
        losses = _op("nn.softmax_cross_entropy_with_logits_v2")(
            labels=labels, logits=logits, name="xentropy")
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def _squeeze_for_sparse(labels: Any, logits: Any, weights: Any
                        ) -> tuple[Tensor, Tensor, Any]:
    """Labels of shape ``[batch, 1]`` lose their last dimension (and so do weights one
    rank above the labels), as TF's losses ``_remove_squeezable_dimensions``."""
    labels, logits = remove_squeezable_dimensions(labels, logits, expected_rank_diff=1)
    weights = convert_to_tensor(weights)
    l_rank, w_shape = labels.get_shape().ndims, weights.get_shape()
    if l_rank is not None and w_shape.ndims is not None:
        if w_shape.ndims - l_rank == 1:
            weights = _op("squeeze")(weights, [-1])
        return labels, logits, weights
    if w_shape.ndims is None or (w_shape.ndims > 0 and
                                 w_shape.dims[-1].is_compatible_with(1)):
        rank_diff = _op("rank")(weights) - _op("rank")(labels)
        w = weights
        weights = _op("cond")(_op("equal")(1, rank_diff),
                              lambda: _op("squeeze")(w, [-1]), lambda: w)
    return labels, logits, weights


def sparse_softmax_cross_entropy(labels: Any, logits: Any, weights: Any = 1.0,
                                 scope: str | None = None,
                                 loss_collection: str | None = GraphKeys.LOSSES,
                                 reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS
                                 ) -> Tensor:
    """The weighted ``sparse_softmax_cross_entropy_with_logits`` (labels: class ids of
    shape ``[batch]`` or ``[batch, 1]``). Keeps the dtype of ``logits``.

    :raises ValueError: for incompatible shapes or a None argument
    """
    _check_args(labels=labels, logits=logits)
    with name_scope(scope, "sparse_softmax_cross_entropy_loss",
                    (logits, labels, weights)) as scope:
        labels, logits, weights = _squeeze_for_sparse(labels, logits, weights)
        losses = _op("nn.sparse_softmax_cross_entropy_with_logits")(
            labels=labels, logits=logits, name="xentropy")
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


# -- the collections ----------------------------------------------------------------------
def get_losses(scope: str | None = None,
               loss_collection: str = GraphKeys.LOSSES) -> list[Any]:
    """The losses in ``loss_collection`` (names matching ``scope``, if given)."""
    return get_collection(loss_collection, scope)


def get_regularization_losses(scope: str | None = None) -> list[Any]:
    """The tensors in ``tf.GraphKeys.REGULARIZATION_LOSSES`` (filtered by ``scope``)."""
    return get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope: str | None = None,
                            name: str = "total_regularization_loss") -> Tensor:
    """The sum of the regularization losses, or a constant 0.0 when there are none."""
    losses = get_regularization_losses(scope)
    if losses:
        return _op("add_n")(losses, name=name)
    return _op("constant")(0.0)


def get_total_loss(add_regularization_losses: bool = True, name: str = "total_loss",
                   scope: str | None = None) -> Tensor:
    """The sum of the losses in ``tf.GraphKeys.LOSSES`` and (by default) the
    regularization losses, both filtered by ``scope``.

    :raises ValueError: when there is no loss at all (as ``tf.add_n`` of nothing)
    """
    losses = get_losses(scope=scope)
    if add_regularization_losses:
        losses += get_regularization_losses(scope=scope)
    return _op("add_n")(losses, name=name)


API = {f"losses.{fn.__name__}": fn for fn in (
    Reduction, compute_weighted_loss, absolute_difference, cosine_distance, hinge_loss,
    huber_loss, log_loss, mean_pairwise_squared_error, mean_squared_error,
    sigmoid_cross_entropy, softmax_cross_entropy, sparse_softmax_cross_entropy, add_loss,
    get_losses, get_regularization_loss, get_regularization_losses, get_total_loss)}
