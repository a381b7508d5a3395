"""``tf.metrics``: TF 1.15's streaming metrics, and ``tf.confusion_matrix``.

Each metric returns ``(value, update_op)``. Its accumulators are local variables
(``tf.GraphKeys.LOCAL_VARIABLES`` and ``METRIC_VARIABLES``, zero-initialised by
``tf.local_variables_initializer()``) under a variable scope named after the metric
(``accuracy/total:0``, ``auc/true_positives:0``); ``update_op`` adds one batch to them
and returns the metric over everything seen so far; ``value`` reads the metric without
updating. ``metrics_collections`` / ``updates_collections`` receive the value / the
update op.

The ``*_at_k`` metrics treat each row of labels and predicted class ids as sets, as
TF's ``tf.sets`` ops do; labels may be a dense ``int64`` tensor or a sparse tensor
(anything with ``indices``, ``values`` and ``dense_shape``).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from ..base import dtypes as _dt
from ..framework.graph import (GraphKeys, Tensor, add_to_collections, api_function,
                               control_dependencies, convert_to_tensor, name_scope)
from ..plugin.runtime import require_api
from ..training.variable_scope import variable_scope
from ..training.variables import Variable
from .losses import broadcast_weights, assert_broadcastable, remove_squeezable_dimensions

__all__ = ["accuracy", "auc", "average_precision_at_k", "false_negatives",
           "false_negatives_at_thresholds", "false_positives",
           "false_positives_at_thresholds", "mean", "mean_absolute_error",
           "mean_cosine_distance", "mean_iou", "mean_per_class_accuracy",
           "mean_relative_error", "mean_squared_error", "mean_tensor", "percentage_below",
           "precision", "precision_at_k", "precision_at_thresholds", "precision_at_top_k",
           "recall", "recall_at_k", "recall_at_thresholds", "recall_at_top_k",
           "root_mean_squared_error", "sensitivity_at_specificity",
           "sparse_average_precision_at_k", "sparse_precision_at_k",
           "specificity_at_sensitivity", "true_negatives", "true_negatives_at_thresholds",
           "true_positives", "true_positives_at_thresholds", "confusion_matrix",
           "metric_variable"]

REQUIRED_API_NAMES = frozenset({
    "zeros", "ones", "cast", "size", "shape", "rank", "reshape", "squeeze", "expand_dims",
    "cond", "equal", "not_equal", "greater", "less", "logical_and",
    "logical_not", "logical_or", "multiply", "divide", "div_no_nan", "maximum",
    "minimum", "abs", "sqrt", "log", "subtract", "add", "squared_difference",
    "reduce_sum", "reduce_mean", "reduce_min", "reduce_max", "reduce_any", "argmin",
    "argmax", "cumsum", "where", "ones_like", "zeros_like", "fill", "range", "stack",
    "constant", "identity", "assign_add", "scatter_add", "scatter_nd", "diag_part",
    "Assert", "assert_greater_equal", "assert_less_equal", "assert_non_negative",
    "assert_less", "nn.top_k",
})
require_api(REQUIRED_API_NAMES)

Collections = Sequence[str] | None
_log = logging.getLogger("flowrt.metrics")


def _op(name: str) -> Any:
    return api_function(name)


def metric_variable(shape: Any, dtype: Any, validate_shape: bool = True,
                    name: str | None = None) -> Variable:
    """A zero-initialised, non-trainable variable in ``LOCAL_VARIABLES`` and
    ``METRIC_VARIABLES``: the accumulator of a metric."""
    return Variable(lambda: _op("zeros")(shape, dtype), trainable=False,
                    collections=[GraphKeys.LOCAL_VARIABLES, GraphKeys.METRIC_VARIABLES],
                    validate_shape=validate_shape, name=name)


def _collect(collections: Collections, value: Any) -> Any:
    if collections:
        add_to_collections(collections, value)
    return value


def _squeeze_weights(predictions: Any, labels: Any, weights: Any
                     ) -> tuple[Tensor, Any, Any]:
    """Predictions and labels squeezed as :func:`remove_squeezable_dimensions`, and
    weights one rank above (below) the predictions squeezed (expanded) to match."""
    predictions = convert_to_tensor(predictions)
    if labels is not None:
        labels, predictions = remove_squeezable_dimensions(labels, predictions)
        predictions.get_shape().assert_is_compatible_with(labels.get_shape())
    if weights is None:
        return predictions, labels, None
    weights = convert_to_tensor(weights)
    w_shape, w_rank = weights.get_shape(), weights.get_shape().ndims
    if w_rank == 0:
        return predictions, labels, weights
    p_rank = predictions.get_shape().ndims
    if p_rank is not None and w_rank is not None:
        if w_rank - p_rank == 1:
            weights = _op("squeeze")(weights, [-1])
        elif p_rank - w_rank == 1:
            weights = _op("expand_dims")(weights, [-1])
        return predictions, labels, weights
    w = weights
    w_rank_t = _op("rank")(w)
    rank_diff = w_rank_t - _op("rank")(predictions)
    squeeze_ok = w_rank is None or w_shape.dims[-1].is_compatible_with(1)

    def adjust() -> Tensor:
        return _op("cond")(
            _op("equal")(rank_diff, 1),
            (lambda: _op("squeeze")(w, [-1])) if squeeze_ok else (lambda: w),
            lambda: _op("cond")(_op("equal")(rank_diff, -1),
                                lambda: _op("expand_dims")(w, [-1]), lambda: w))

    weights = _op("cond")(_op("equal")(w_rank_t, 0), lambda: w, adjust)
    return predictions, labels, weights


# -- means ------------------------------------------------------------------------------
def mean(values: Any, weights: Any = None, metrics_collections: Collections = None,
         updates_collections: Collections = None, name: str | None = None
         ) -> tuple[Tensor, Tensor]:
    """The (weighted) mean of all ``values`` seen: local variables ``total`` and
    ``count`` (float32) under ``mean/``.

    :raises ValueError: if ``weights`` cannot broadcast to ``values``
    """
    with variable_scope(name, "mean", (values, weights)):
        values = _op("cast")(values, _dt.float32)
        total = metric_variable([], _dt.float32, name="total")
        count = metric_variable([], _dt.float32, name="count")
        if weights is None:
            num_values = _op("cast")(_op("size")(values), _dt.float32)
        else:
            values, _, weights = _squeeze_weights(values, None, weights)
            weights = broadcast_weights(_op("cast")(weights, _dt.float32), values)
            values = _op("multiply")(values, weights)
            num_values = _op("reduce_sum")(weights)
        update_total = _op("assign_add")(total, _op("reduce_sum")(values))
        with control_dependencies([values]):
            update_count = _op("assign_add")(count, num_values)
        value = _collect(metrics_collections, _op("div_no_nan")(
            total, _op("maximum")(count, 0), name="value"))
        update_op = _op("div_no_nan")(update_total, _op("maximum")(update_count, 0),
                                      name="update_op")
        return value, _collect(updates_collections, update_op)


def mean_tensor(values: Any, weights: Any = None, metrics_collections: Collections = None,
                updates_collections: Collections = None, name: str | None = None
                ) -> tuple[Tensor, Tensor]:
    """The element-wise (weighted) mean of all ``values`` seen (all batches of one
    shape): local variables ``total_tensor`` and ``count_tensor`` under ``mean/``."""
    with variable_scope(name, "mean", (values, weights)):
        values = _op("cast")(values, _dt.float32)
        total = metric_variable(values.get_shape(), _dt.float32, name="total_tensor")
        count = metric_variable(values.get_shape(), _dt.float32, name="count_tensor")
        num_values = _op("ones_like")(values)
        if weights is not None:
            values, _, weights = _squeeze_weights(values, None, weights)
            weights = broadcast_weights(_op("cast")(weights, _dt.float32), values)
            values = _op("multiply")(values, weights)
            num_values = _op("multiply")(num_values, weights)
        update_total = _op("assign_add")(total, values)
        with control_dependencies([values]):
            update_count = _op("assign_add")(count, num_values)
        value = _collect(metrics_collections, _op("div_no_nan")(
            total, _op("maximum")(count, 0), name="value"))
        update_op = _op("div_no_nan")(update_total, _op("maximum")(update_count, 0),
                                      name="update_op")
        return value, _collect(updates_collections, update_op)


def accuracy(labels: Any, predictions: Any, weights: Any = None,
             metrics_collections: Collections = None,
             updates_collections: Collections = None, name: str | None = None
             ) -> tuple[Tensor, Tensor]:
    """How often ``predictions`` equal ``labels`` (weighted): a :func:`mean` of the
    matches under ``accuracy/``.

    :raises ValueError: for incompatible shapes or weights
    """
    predictions, labels, weights = _squeeze_weights(predictions, labels, weights)
    predictions.get_shape().assert_is_compatible_with(labels.get_shape())
    if labels.dtype != predictions.dtype:
        predictions = _op("cast")(predictions, labels.dtype)
    is_correct = _op("cast")(_op("equal")(predictions, labels), _dt.float32)
    return mean(is_correct, weights, metrics_collections, updates_collections,
                name or "accuracy")


def mean_absolute_error(labels: Any, predictions: Any, weights: Any = None,
                        metrics_collections: Collections = None,
                        updates_collections: Collections = None, name: str | None = None
                        ) -> tuple[Tensor, Tensor]:
    """The (weighted) mean of ``|predictions - labels|``."""
    predictions, labels, weights = _squeeze_weights(predictions, labels, weights)
    errors = _op("abs")(predictions - labels)
    return mean(errors, weights, metrics_collections, updates_collections,
                name or "mean_absolute_error")


def mean_squared_error(labels: Any, predictions: Any, weights: Any = None,
                       metrics_collections: Collections = None,
                       updates_collections: Collections = None, name: str | None = None
                       ) -> tuple[Tensor, Tensor]:
    """The (weighted) mean of ``(labels - predictions)**2``."""
    predictions, labels, weights = _squeeze_weights(predictions, labels, weights)
    errors = _op("squared_difference")(labels, predictions)
    return mean(errors, weights, metrics_collections, updates_collections,
                name or "mean_squared_error")


def root_mean_squared_error(labels: Any, predictions: Any, weights: Any = None,
                            metrics_collections: Collections = None,
                            updates_collections: Collections = None,
                            name: str | None = None) -> tuple[Tensor, Tensor]:
    """The square root of :func:`mean_squared_error` (scope
    ``root_mean_squared_error/``)."""
    predictions, labels, weights = _squeeze_weights(predictions, labels, weights)
    mse, update_mse = mean_squared_error(labels, predictions, weights, None, None,
                                         name or "root_mean_squared_error")
    value = _collect(metrics_collections, _op("sqrt")(mse))
    return value, _collect(updates_collections, _op("sqrt")(update_mse))


def mean_relative_error(labels: Any, predictions: Any, normalizer: Any, weights: Any = None,
                        metrics_collections: Collections = None,
                        updates_collections: Collections = None, name: str | None = None
                        ) -> tuple[Tensor, Tensor]:
    """The (weighted) mean of ``|labels - predictions| / normalizer`` (0 where the
    normalizer is 0)."""
    predictions, labels, weights = _squeeze_weights(predictions, labels, weights)
    predictions, normalizer = remove_squeezable_dimensions(predictions, normalizer)
    predictions.get_shape().assert_is_compatible_with(normalizer.get_shape())
    relative = _op("where")(_op("equal")(normalizer, 0.0), _op("zeros_like")(labels),
                            _op("divide")(_op("abs")(labels - predictions), normalizer))
    return mean(relative, weights, metrics_collections, updates_collections,
                name or "mean_relative_error")


def mean_cosine_distance(labels: Any, predictions: Any, dim: int, weights: Any = None,
                         metrics_collections: Collections = None,
                         updates_collections: Collections = None, name: str | None = None
                         ) -> tuple[Tensor, Tensor]:
    """``1 -`` the (weighted) mean over all rows of ``sum(predictions * labels, dim)``
    (unit-normalised inputs)."""
    predictions, labels, weights = _squeeze_weights(predictions, labels, weights)
    radial = _op("reduce_sum")(_op("multiply")(predictions, labels), axis=[dim],
                               keepdims=True)
    dist, update_op = mean(radial, weights, None, None, name or "mean_cosine_distance")
    dist = _collect(metrics_collections, _op("subtract")(1.0, dist))
    return dist, _collect(updates_collections, _op("subtract")(1.0, update_op))


def percentage_below(values: Any, threshold: float, weights: Any = None,
                     metrics_collections: Collections = None,
                     updates_collections: Collections = None, name: str | None = None
                     ) -> tuple[Tensor, Tensor]:
    """The (weighted) fraction of ``values`` below ``threshold`` (scope
    ``percentage_below_threshold/``)."""
    below = _op("cast")(_op("less")(values, threshold), _dt.float32)
    return mean(below, weights, metrics_collections, updates_collections,
                name or "percentage_below_threshold")


# -- per-class metrics and the confusion matrix -------------------------------------------
def _flat(t: Any) -> Tensor:
    t = convert_to_tensor(t)
    rank = t.get_shape().ndims
    return _op("reshape")(t, [-1]) if rank is None or rank > 1 else t


def mean_per_class_accuracy(labels: Any, predictions: Any, num_classes: int,
                            weights: Any = None, metrics_collections: Collections = None,
                            updates_collections: Collections = None,
                            name: str | None = None) -> tuple[Tensor, Tensor]:
    """The mean over classes of each class's (weighted) accuracy: local variables
    ``total`` (examples per label class) and ``count`` (correct ones), both
    ``[num_classes]`` float32, under ``mean_accuracy/``."""
    with variable_scope(name, "mean_accuracy", (predictions, labels, weights)):
        labels = _flat(_op("cast")(labels, _dt.int64))
        predictions = _flat(predictions)
        predictions.get_shape().assert_is_compatible_with(labels.get_shape())
        total = metric_variable([num_classes], _dt.float32, name="total")
        count = metric_variable([num_classes], _dt.float32, name="count")
        ones = _op("ones")([_op("size")(labels)], _dt.float32)
        if labels.dtype != predictions.dtype:
            predictions = _op("cast")(predictions, labels.dtype)
        is_correct = _op("cast")(_op("equal")(predictions, labels), _dt.float32)
        if weights is not None:
            weights = _op("cast")(_flat(weights), _dt.float32)
            is_correct *= weights
            ones *= weights
        update_total = _op("scatter_add")(total, labels, ones)
        update_count = _op("scatter_add")(count, labels, is_correct)
        per_class = _op("div_no_nan")(count, _op("maximum")(total, 0))
        value = _collect(metrics_collections,
                         _op("reduce_mean")(per_class, name="mean_accuracy"))
        update_op = _op("div_no_nan")(update_count, _op("maximum")(update_total, 0),
                                      name="update_op")
        return value, _collect(updates_collections, update_op)


def confusion_matrix(labels: Any, predictions: Any, num_classes: Any = None,
                     dtype: Any = _dt.int32, name: str | None = None,
                     weights: Any = None) -> Tensor:
    """The ``[num_classes, num_classes]`` matrix counting (or summing ``weights`` of)
    examples by (label, prediction) (``tf.confusion_matrix``). ``num_classes``
    defaults to one more than the largest label or prediction.

    :raises InvalidArgumentError: at run time for negative or out-of-range ids
    :raises ValueError: if ``weights`` does not match the predictions' shape
    """
    with name_scope(name, "confusion_matrix",
                    (predictions, labels, num_classes, weights)) as name:
        labels, predictions = remove_squeezable_dimensions(
            convert_to_tensor(labels, name="labels"),
            convert_to_tensor(predictions, name="predictions"))
        predictions = _op("cast")(predictions, _dt.int64)
        labels = _op("cast")(labels, _dt.int64)
        labels = _with_deps(labels, _op("assert_non_negative")(
            labels, message="`labels` contains negative values"))
        predictions = _with_deps(predictions, _op("assert_non_negative")(
            predictions, message="`predictions` contains negative values"))
        if num_classes is None:
            num_classes = _op("maximum")(_op("reduce_max")(predictions),
                                         _op("reduce_max")(labels)) + 1
        else:
            n = _op("cast")(num_classes, _dt.int64)
            labels = _with_deps(labels, _op("assert_less")(
                labels, n, message="`labels` out of bound"))
            predictions = _with_deps(predictions, _op("assert_less")(
                predictions, n, message="`predictions` out of bound"))
        if weights is not None:
            weights = convert_to_tensor(weights, name="weights")
            predictions.get_shape().assert_is_compatible_with(weights.get_shape())
            weights = _op("cast")(weights, dtype)
        shape = _op("stack")([num_classes, num_classes])
        indices = _op("stack")([labels, predictions], axis=1)
        values = _op("ones_like")(predictions, dtype) if weights is None else weights
        return _op("scatter_nd")(indices=indices, updates=values,
                                 shape=_op("cast")(shape, _dt.int64))


def _with_deps(t: Tensor, dep: Any) -> Tensor:
    with control_dependencies([dep]):
        return _op("identity")(t)


def mean_iou(labels: Any, predictions: Any, num_classes: int, weights: Any = None,
             metrics_collections: Collections = None,
             updates_collections: Collections = None, name: str | None = None
             ) -> tuple[Tensor, Tensor]:
    """The mean over classes (that occur) of intersection over union, from a streaming
    confusion matrix: local variable ``total_confusion_matrix`` (float64) under
    ``mean_iou/``. ``update_op`` returns the updated matrix, as in TF."""
    with variable_scope(name, "mean_iou", (predictions, labels, weights)):
        predictions, labels = convert_to_tensor(predictions), convert_to_tensor(labels)
        predictions.get_shape().assert_is_compatible_with(labels.get_shape())
        total_cm = metric_variable([num_classes, num_classes], _dt.float64,
                                   name="total_confusion_matrix")
        cm = confusion_matrix(_flat(labels), _flat(predictions), num_classes,
                              weights=None if weights is None else _flat(weights),
                              dtype=_dt.float64)
        update_op = _op("assign_add")(total_cm, cm)
        rows = _op("cast")(_op("reduce_sum")(total_cm, 0), _dt.float32)
        cols = _op("cast")(_op("reduce_sum")(total_cm, 1), _dt.float32)
        diag = _op("cast")(_op("diag_part")(total_cm), _dt.float32)
        denominator = rows + cols - diag
        num_valid = _op("reduce_sum")(_op("cast")(_op("not_equal")(denominator, 0),
                                                  _dt.float32))
        denominator = _op("where")(_op("greater")(denominator, 0), denominator,
                                   _op("ones_like")(denominator))
        iou = _op("divide")(diag, denominator)
        value = _op("where")(_op("greater")(num_valid, 0),
                             _op("reduce_sum")(iou, name="mean_iou") / num_valid, 0)
        _collect(metrics_collections, value)
        return value, _collect(updates_collections, update_op)


# -- counts -------------------------------------------------------------------------------
def _count_condition(values: Tensor, weights: Any, metrics_collections: Collections,
                     updates_collections: Collections) -> tuple[Tensor, Tensor]:
    """Sum of the (weighted) true ``values`` into local variable ``count``."""
    count = metric_variable([], _dt.float32, name="count")
    values = _op("cast")(values, _dt.float32)
    if weights is not None:
        weights = convert_to_tensor(weights)
        w_rank, v_rank = weights.get_shape().ndims, values.get_shape().ndims
        if w_rank is not None and v_rank is not None:
            if w_rank not in (0, v_rank):
                raise ValueError(f"weights {weights.name} must have rank in "
                                 f"(0, {v_rank}), but has rank {w_rank}.")
            dep = None
        else:
            rank = _op("rank")(weights)
            ok = _op("logical_or")(_op("equal")(rank, 0),
                                   _op("equal")(rank, _op("rank")(values)))
            dep = _op("Assert")(ok, ["weights must have rank 0 or the rank of values: ",
                                     rank])
        with control_dependencies([dep] if dep is not None else []):
            values = _op("multiply")(values, _op("cast")(weights, _dt.float32))
    value = _collect(metrics_collections, _op("identity")(count))
    update_op = _op("assign_add")(count, _op("reduce_sum")(values))
    return value, _collect(updates_collections, update_op)


def _count(kind: str, labels: Any, predictions: Any, weights: Any,
           metrics_collections: Collections, updates_collections: Collections,
           name: str | None) -> tuple[Tensor, Tensor]:
    """The (weighted) count of true/false positives/negatives of boolean predictions."""
    with variable_scope(name, kind, (predictions, labels, weights)):
        predictions, labels, weights = _squeeze_weights(
            _op("cast")(predictions, _dt.bool), _op("cast")(labels, _dt.bool), weights)
        want_label = kind in ("true_positives", "false_negatives")
        want_pred = kind in ("true_positives", "false_positives")
        hit = _op("logical_and")(_op("equal")(labels, want_label),
                                 _op("equal")(predictions, want_pred))
        return _count_condition(hit, weights, metrics_collections, updates_collections)


def true_positives(labels: Any, predictions: Any, weights: Any = None,
                   metrics_collections: Collections = None,
                   updates_collections: Collections = None, name: str | None = None
                   ) -> tuple[Tensor, Tensor]:
    """The (weighted) number of true labels predicted true (both cast to bool): local
    variable ``true_positives/count``."""
    return _count("true_positives", labels, predictions, weights, metrics_collections,
                  updates_collections, name)


def false_positives(labels: Any, predictions: Any, weights: Any = None,
                    metrics_collections: Collections = None,
                    updates_collections: Collections = None, name: str | None = None
                    ) -> tuple[Tensor, Tensor]:
    """The (weighted) number of false labels predicted true: local variable
    ``false_positives/count``."""
    return _count("false_positives", labels, predictions, weights, metrics_collections,
                  updates_collections, name)


def true_negatives(labels: Any, predictions: Any, weights: Any = None,
                   metrics_collections: Collections = None,
                   updates_collections: Collections = None, name: str | None = None
                   ) -> tuple[Tensor, Tensor]:
    """The (weighted) number of false labels predicted false: local variable
    ``true_negatives/count``."""
    return _count("true_negatives", labels, predictions, weights, metrics_collections,
                  updates_collections, name)


def false_negatives(labels: Any, predictions: Any, weights: Any = None,
                    metrics_collections: Collections = None,
                    updates_collections: Collections = None, name: str | None = None
                    ) -> tuple[Tensor, Tensor]:
    """The (weighted) number of true labels predicted false: local variable
    ``false_negatives/count``."""
    return _count("false_negatives", labels, predictions, weights, metrics_collections,
                  updates_collections, name)


def _ratio(num: Any, den: Any, name: str) -> Tensor:
    """``num / den`` where ``den > 0``, else 0."""
    return _op("where")(_op("greater")(den, 0), _op("divide")(num, den), 0, name)


def precision(labels: Any, predictions: Any, weights: Any = None,
              metrics_collections: Collections = None,
              updates_collections: Collections = None, name: str | None = None
              ) -> tuple[Tensor, Tensor]:
    """``tp / (tp + fp)`` of boolean predictions (0 with no positive prediction):
    ``precision/true_positives/count`` and ``precision/false_positives/count``."""
    with variable_scope(name, "precision", (predictions, labels, weights)):
        predictions, labels, weights = _squeeze_weights(
            _op("cast")(predictions, _dt.bool), _op("cast")(labels, _dt.bool), weights)
        tp, tp_up = true_positives(labels, predictions, weights)
        fp, fp_up = false_positives(labels, predictions, weights)
        value = _collect(metrics_collections, _ratio(tp, tp + fp, "value"))
        return value, _collect(updates_collections, _ratio(tp_up, tp_up + fp_up,
                                                           "update_op"))


def recall(labels: Any, predictions: Any, weights: Any = None,
           metrics_collections: Collections = None,
           updates_collections: Collections = None, name: str | None = None
           ) -> tuple[Tensor, Tensor]:
    """``tp / (tp + fn)`` of boolean predictions (0 with no true label):
    ``recall/true_positives/count`` and ``recall/false_negatives/count``."""
    with variable_scope(name, "recall", (predictions, labels, weights)):
        predictions, labels, weights = _squeeze_weights(
            _op("cast")(predictions, _dt.bool), _op("cast")(labels, _dt.bool), weights)
        tp, tp_up = true_positives(labels, predictions, weights)
        fn, fn_up = false_negatives(labels, predictions, weights)
        value = _collect(metrics_collections, _ratio(tp, tp + fn, "value"))
        return value, _collect(updates_collections, _ratio(tp_up, tp_up + fn_up,
                                                           "update_op"))


# -- thresholded counts, AUC --------------------------------------------------------------
_KINDS = {"tp": "true_positives", "fn": "false_negatives", "tn": "true_negatives",
          "fp": "false_positives"}


def _confusion_at_thresholds(labels: Any, predictions: Any, thresholds: Sequence[float],
                             weights: Any = None, includes: Sequence[str] | None = None
                             ) -> tuple[dict[str, Variable], dict[str, Tensor]]:
    """Local variables ``true_positives``, ``false_negatives``, ``true_negatives``,
    ``false_positives`` (those in ``includes``), each ``[len(thresholds)]`` float32:
    the (weighted) counts of predictions above / at most each threshold, by label.
    Returns the variables and their update ops by key (``"tp"`` ...).

    :raises InvalidArgumentError: at run time for predictions outside [0, 1]
    """
    includes = tuple(_KINDS) if includes is None else tuple(includes)
    for key in includes:
        if key not in _KINDS:
            raise ValueError(f"Invalid key: {key}.")
    predictions = convert_to_tensor(predictions)
    with control_dependencies([
            _op("assert_greater_equal")(predictions, _op("cast")(0.0, predictions.dtype),
                                        message="predictions must be in [0, 1]"),
            _op("assert_less_equal")(predictions, _op("cast")(1.0, predictions.dtype),
                                     message="predictions must be in [0, 1]")]):
        predictions, labels, weights = _squeeze_weights(
            _op("cast")(predictions, _dt.float32), _op("cast")(labels, _dt.bool), weights)
    n = len(thresholds)
    pred_row = _op("reshape")(predictions, [1, -1])
    label_is_pos = _op("reshape")(labels, [1, -1])
    thresh = _op("reshape")(_op("constant")([float(t) for t in thresholds], _dt.float32),
                            [n, 1])
    pred_is_pos = _op("greater")(pred_row, thresh)                      # [n, N]
    weight_row = None
    if weights is not None:
        weight_row = _op("reshape")(
            broadcast_weights(_op("cast")(weights, _dt.float32), predictions), [1, -1])
    values: dict[str, Variable] = {}
    updates: dict[str, Tensor] = {}
    for key in _KINDS:
        if key not in includes:
            continue
        var = metric_variable([n], _dt.float32, name=_KINDS[key])
        lab = label_is_pos if key in ("tp", "fn") else _op("logical_not")(label_is_pos)
        pred = pred_is_pos if key in ("tp", "fp") else _op("logical_not")(pred_is_pos)
        hit = _op("cast")(_op("logical_and")(lab, pred), _dt.float32)
        if weight_row is not None:
            hit = hit * weight_row
        updates[key] = _op("assign_add")(var, _op("reduce_sum")(hit, 1))
        values[key] = var
    return values, updates


def _count_at_thresholds(key: str, labels: Any, predictions: Any,
                         thresholds: Sequence[float], weights: Any,
                         metrics_collections: Collections, updates_collections: Collections,
                         name: str | None) -> tuple[Tensor, Tensor]:
    with variable_scope(name, _KINDS[key], (predictions, labels, weights)):
        values, updates = _confusion_at_thresholds(labels, predictions, thresholds,
                                                   weights, includes=(key,))
        value = _collect(metrics_collections, _op("identity")(values[key]))
        return value, _collect(updates_collections, updates[key])


def true_positives_at_thresholds(labels: Any, predictions: Any, thresholds: Sequence[float],
                                 weights: Any = None, metrics_collections: Collections = None,
                                 updates_collections: Collections = None,
                                 name: str | None = None) -> tuple[Tensor, Tensor]:
    """Per threshold, the (weighted) number of true labels whose prediction (in [0, 1])
    is above it: ``true_positives/true_positives`` of shape ``[len(thresholds)]``."""
    return _count_at_thresholds("tp", labels, predictions, thresholds, weights,
                                metrics_collections, updates_collections, name)


def false_positives_at_thresholds(labels: Any, predictions: Any,
                                  thresholds: Sequence[float], weights: Any = None,
                                  metrics_collections: Collections = None,
                                  updates_collections: Collections = None,
                                  name: str | None = None) -> tuple[Tensor, Tensor]:
    """Per threshold, the (weighted) number of false labels predicted above it."""
    return _count_at_thresholds("fp", labels, predictions, thresholds, weights,
                                metrics_collections, updates_collections, name)


def true_negatives_at_thresholds(labels: Any, predictions: Any, thresholds: Sequence[float],
                                 weights: Any = None, metrics_collections: Collections = None,
                                 updates_collections: Collections = None,
                                 name: str | None = None) -> tuple[Tensor, Tensor]:
    """Per threshold, the (weighted) number of false labels predicted at most it."""
    return _count_at_thresholds("tn", labels, predictions, thresholds, weights,
                                metrics_collections, updates_collections, name)


def false_negatives_at_thresholds(labels: Any, predictions: Any,
                                  thresholds: Sequence[float], weights: Any = None,
                                  metrics_collections: Collections = None,
                                  updates_collections: Collections = None,
                                  name: str | None = None) -> tuple[Tensor, Tensor]:
    """Per threshold, the (weighted) number of true labels predicted at most it."""
    return _count_at_thresholds("fn", labels, predictions, thresholds, weights,
                                metrics_collections, updates_collections, name)


def precision_at_thresholds(labels: Any, predictions: Any, thresholds: Sequence[float],
                            weights: Any = None, metrics_collections: Collections = None,
                            updates_collections: Collections = None,
                            name: str | None = None) -> tuple[Tensor, Tensor]:
    """Per threshold, ``tp / (tp + fp + 1e-7)`` of the predictions above it."""
    with variable_scope(name, "precision_at_thresholds", (predictions, labels, weights)):
        v, u = _confusion_at_thresholds(labels, predictions, thresholds, weights,
                                        includes=("tp", "fp"))
        value = _op("divide")(v["tp"], 1e-7 + v["tp"] + v["fp"], name="precision_value")
        update = _op("divide")(u["tp"], 1e-7 + u["tp"] + u["fp"],
                               name="precision_update_op")
        return _collect(metrics_collections, value), _collect(updates_collections, update)


def recall_at_thresholds(labels: Any, predictions: Any, thresholds: Sequence[float],
                         weights: Any = None, metrics_collections: Collections = None,
                         updates_collections: Collections = None,
                         name: str | None = None) -> tuple[Tensor, Tensor]:
    """Per threshold, ``tp / (tp + fn + 1e-7)`` of the predictions above it."""
    with variable_scope(name, "recall_at_thresholds", (predictions, labels, weights)):
        v, u = _confusion_at_thresholds(labels, predictions, thresholds, weights,
                                        includes=("tp", "fn"))
        value = _op("divide")(v["tp"], 1e-7 + v["tp"] + v["fn"], name="recall_value")
        update = _op("divide")(u["tp"], 1e-7 + u["tp"] + u["fn"], name="recall_update_op")
        return _collect(metrics_collections, value), _collect(updates_collections, update)


def _evenly_spaced(num_thresholds: int, last: float) -> list[float]:
    """TF's threshold placement: ``-1e-7``, ``i / (num_thresholds - 1)`` for the inner
    ones, then ``last``."""
    inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    return [0.0 - 1e-7] + inner + [last]


def _interpolate_pr_auc(tp: Any, fp: Any, fn: Any, n: int) -> Tensor:
    """PR-AUC by interpolating precision between thresholds (Davis & Goadrich 2006),
    as TF's ``careful_interpolation``."""
    dtp = tp[:n - 1] - tp[1:]
    p = tp + fp
    slope = _op("div_no_nan")(dtp, _op("maximum")(p[:n - 1] - p[1:], 0), name="prec_slope")
    intercept = tp[1:] - _op("multiply")(slope, p[1:])
    safe_ratio = _op("where")(
        _op("logical_and")(p[:n - 1] > 0, p[1:] > 0),
        _op("div_no_nan")(p[:n - 1], _op("maximum")(p[1:], 0),
                          name="recall_relative_ratio"),
        _op("ones_like")(p[1:]))
    return _op("reduce_sum")(
        _op("div_no_nan")(slope * (dtp + intercept * _op("log")(safe_ratio)),
                          _op("maximum")(tp[1:] + fn[1:], 0), name="pr_auc_increment"),
        name="interpolate_pr_auc")


def _auc_from(tp: Any, fn: Any, tn: Any, fp: Any, n: int, curve: str, method: str,
              name: str) -> Tensor:
    """The area under the ROC or PR curve through the ``n`` threshold points, summed
    as ``method`` says (trapezoids, lower or upper Riemann sums)."""
    if curve == "PR" and method == "careful_interpolation":
        return _interpolate_pr_auc(tp, fp, fn, n)
    if curve == "PR" and method == "trapezoidal":
        _log.warning("Trapezoidal rule is known to produce incorrect PR-AUCs; please "
                     "switch to \"careful_interpolation\" instead.")
    eps = 1.0e-6
    rec = _op("divide")(tp + eps, tp + fn + eps)
    if curve == "ROC":
        x, y = _op("divide")(fp, fp + tn + eps), rec
    else:
        x, y = rec, _op("divide")(tp + eps, tp + fp + eps)
    dx = x[:n - 1] - x[1:]
    if method in ("trapezoidal", "careful_interpolation"):
        height = (y[:n - 1] + y[1:]) / 2.
    elif method == "minoring":
        height = _op("minimum")(y[:n - 1], y[1:])
    elif method == "majoring":
        height = _op("maximum")(y[:n - 1], y[1:])
    else:
        raise ValueError(f"Invalid summation_method: {method} summation_method should be "
                         "'trapezoidal', 'careful_interpolation', 'minoring', or "
                         "'majoring'.")
    return _op("reduce_sum")(_op("multiply")(dx, height), name=name)


def auc(labels: Any, predictions: Any, weights: Any = None, num_thresholds: int = 200,
        metrics_collections: Collections = None, updates_collections: Collections = None,
        curve: str = "ROC", name: str | None = None,
        summation_method: str = "trapezoidal",
        thresholds: Sequence[float] | None = None) -> tuple[Tensor, Tensor]:
    """The area under the ROC (``curve="ROC"``) or precision-recall (``"PR"``) curve,
    approximated on ``num_thresholds`` thresholds placed as TF does (``-1e-7``,
    ``i / (num_thresholds - 1)``, ``1 + 1e-7``; or the sorted ``thresholds`` between
    those ends). Local variables ``auc/true_positives`` ... ``auc/false_positives``.

    :param summation_method: ``trapezoidal``, ``careful_interpolation`` (PR only;
        trapezoidal for ROC), ``minoring`` or ``majoring``
    :raises ValueError: for an unknown curve or summation method
    """
    with variable_scope(name, "auc", (labels, predictions, weights)):
        if curve not in ("ROC", "PR"):
            raise ValueError(f"curve must be either ROC or PR, {curve} unknown")
        if thresholds is not None:
            ts = [0.0 - 1e-7] + sorted(thresholds) + [1.0 + 1e-7]
        else:
            ts = _evenly_spaced(num_thresholds, 1.0 + 1e-7)
        n = len(ts)
        v, u = _confusion_at_thresholds(labels, predictions, ts, weights)
        value = _auc_from(v["tp"], v["fn"], v["tn"], v["fp"], n, curve, summation_method,
                          "value")
        update = _auc_from(u["tp"], u["fn"], u["tn"], u["fp"], n, curve, summation_method,
                           "update_op")
        return _collect(metrics_collections, value), _collect(updates_collections, update)


def sensitivity_at_specificity(labels: Any, predictions: Any, specificity: float,
                               weights: Any = None, num_thresholds: int = 200,
                               metrics_collections: Collections = None,
                               updates_collections: Collections = None,
                               name: str | None = None) -> tuple[Tensor, Tensor]:
    """The sensitivity (recall) at the threshold whose specificity is closest to
    ``specificity`` (the first such threshold).

    :raises ValueError: if ``specificity`` is outside [0, 1]
    """
    if specificity < 0 or specificity > 1:
        raise ValueError("`specificity` must be in the range [0, 1].")
    with variable_scope(name, "sensitivity_at_specificity", (predictions, labels, weights)):
        ts = _evenly_spaced(num_thresholds, 1.0 + 1e-7)
        v, u = _confusion_at_thresholds(labels, predictions, ts, weights)

        def compute(tp: Any, tn: Any, fp: Any, fn: Any, nm: str) -> Tensor:
            specs = _op("divide")(tn, tn + fp + 1e-7)
            i = _op("cast")(_op("argmin")(_op("abs")(specs - specificity), 0), _dt.int32)
            return _op("divide")(tp[i], tp[i] + fn[i] + 1e-7, nm)

        value = compute(v["tp"], v["tn"], v["fp"], v["fn"], "value")
        update = compute(u["tp"], u["tn"], u["fp"], u["fn"], "update_op")
        return _collect(metrics_collections, value), _collect(updates_collections, update)


def specificity_at_sensitivity(labels: Any, predictions: Any, sensitivity: float,
                               weights: Any = None, num_thresholds: int = 200,
                               metrics_collections: Collections = None,
                               updates_collections: Collections = None,
                               name: str | None = None) -> tuple[Tensor, Tensor]:
    """The specificity at the threshold whose sensitivity is closest to
    ``sensitivity`` (the last such threshold; TF places the top threshold at
    ``1 - 1e-7``).

    :raises ValueError: if ``sensitivity`` is outside [0, 1]
    """
    if sensitivity < 0 or sensitivity > 1:
        raise ValueError("`sensitivity` must be in the range [0, 1].")
    with variable_scope(name, "specificity_at_sensitivity", (predictions, labels, weights)):
        ts = _evenly_spaced(num_thresholds, 1.0 - 1e-7)
        v, u = _confusion_at_thresholds(labels, predictions, ts, weights)

        def compute(tp: Any, tn: Any, fp: Any, fn: Any, nm: str) -> Tensor:
            gap = _op("abs")(_op("divide")(tp, tp + fn + 1e-7) - sensitivity)
            at_min = _op("cast")(_op("equal")(gap, _op("reduce_min")(gap)), _dt.int64)
            i = _op("cast")(_op("argmax")(_op("cumsum")(at_min), 0), _dt.int32)
            return _op("divide")(tn[i], tn[i] + fp[i] + 1e-7, nm)

        value = compute(v["tp"], v["tn"], v["fp"], v["fn"], "value")
        update = compute(u["tp"], u["tn"], u["fp"], u["fn"], "update_op")
        return _collect(metrics_collections, value), _collect(updates_collections, update)


# -- top-k metrics: rows of labels and predicted ids as sets -------------------------------
def _at_k_name(name: str, k: int | None = None, class_id: int | None = None) -> str:
    name = f"{name}_at_{k}" if k is not None else f"{name}_at_k"
    return f"{name}_class{class_id}" if class_id is not None else name


def _is_sparse(x: Any) -> bool:
    return all(hasattr(x, a) for a in ("indices", "values", "dense_shape"))


def _label_sets(labels: Any, predictions_idx: Tensor) -> tuple[Tensor, Tensor]:
    """Labels as ``(ids, valid)``, both ``[D1, ... DN, num_labels]``, matching the rank
    of ``predictions_idx``: a dense tensor as is (every entry valid), a sparse one
    scattered into a dense one with ``valid`` marking its entries. Labels one rank
    below the predictions get a last dimension of 1.

    :raises TypeError: unless the labels are int64, as the predicted ids
    :raises ValueError: for labels whose rank fits neither way
    """
    with name_scope(None, "expand_labels", (predictions_idx,)):
        if _is_sparse(labels):
            indices = _op("cast")(labels.indices, _dt.int64)
            vals = convert_to_tensor(labels.values)
            dense_shape = _op("cast")(labels.dense_shape, _dt.int64)
            ids = _op("scatter_nd")(indices, vals, dense_shape)
            valid = _op("greater")(_op("scatter_nd")(
                indices, _op("ones_like")(vals, _dt.int32), dense_shape), 0)
        else:
            ids = convert_to_tensor(labels)
            valid = None
        if ids.dtype.base_dtype != predictions_idx.dtype.base_dtype:
            raise TypeError(f"Types don't match, {predictions_idx.dtype.name} vs "
                            f"{ids.dtype.name}: labels must be int64.")
        l_rank, p_rank = ids.get_shape().ndims, predictions_idx.get_shape().ndims
        if l_rank is not None and p_rank is not None:
            if p_rank == l_rank + 1:
                ids = _op("expand_dims")(ids, -1)
                valid = None if valid is None else _op("expand_dims")(valid, -1)
            elif p_rank != l_rank:
                raise ValueError(
                    f"Unexpected labels shape {ids.get_shape()} for predictions shape "
                    f"{predictions_idx.get_shape()}. Predictions rank should be the "
                    "same rank as labels rank or labels rank plus one .")
        else:
            expand = _op("equal")(_op("rank")(predictions_idx), _op("rank")(ids) + 1)
            i, v = ids, valid
            ids = _op("cond")(expand, lambda: _op("expand_dims")(i, -1), lambda: i)
            if v is not None:
                valid = _op("cond")(expand, lambda: _op("expand_dims")(v, -1), lambda: v)
        if valid is None:
            valid = _op("ones_like")(ids, _dt.bool)
        return ids, valid


def _first_of_each(ids: Tensor, valid: Tensor) -> Tensor:
    """Marks the first valid occurrence of each distinct id in each row (set
    semantics: duplicates count once)."""
    pos = _op("range")(_op("shape")(ids)[-1])
    earlier = _op("less")(_op("expand_dims")(pos, 0), _op("expand_dims")(pos, 1))
    same = _op("equal")(_op("expand_dims")(ids, -1), _op("expand_dims")(ids, -2))
    dup = _op("reduce_any")(_op("logical_and")(
        _op("logical_and")(same, earlier), _op("expand_dims")(valid, -2)), -1)
    return _op("logical_and")(valid, _op("logical_not")(dup))


def _set_counts(pred: Tensor, pred_valid: Tensor, ids: Tensor, ids_valid: Tensor
                ) -> dict[str, Tensor]:
    """Per row, as float64: ``tp`` = |P & L|, ``fp`` = |P - L|, ``fn`` = |L - P|."""
    match = _op("logical_and")(
        _op("equal")(_op("expand_dims")(pred, -1), _op("expand_dims")(ids, -2)),
        _op("logical_and")(_op("expand_dims")(pred_valid, -1),
                           _op("expand_dims")(ids_valid, -2)))
    p_in_l = _op("reduce_any")(match, -1)
    l_in_p = _op("reduce_any")(match, -2)
    p_first, l_first = _first_of_each(pred, pred_valid), _first_of_each(ids, ids_valid)

    def size(mask: Tensor) -> Tensor:
        return _op("cast")(_op("reduce_sum")(_op("cast")(mask, _dt.int32), -1), _dt.float64)

    return {"tp": size(_op("logical_and")(p_first, p_in_l)),
            "fp": size(_op("logical_and")(p_first, _op("logical_not")(p_in_l))),
            "fn": size(_op("logical_and")(l_first, _op("logical_not")(l_in_p)))}


def _streaming_at_k(key: str, counts: dict[str, Tensor], k: int | None,
                    class_id: int | None, weights: Any) -> tuple[Variable, Tensor]:
    """Local float64 variable ``<true_positive|false_positive|false_negative>_at_<k>``
    summing the (weighted) per-row counts."""
    title = {"tp": "true_positive", "fp": "false_positive", "fn": "false_negative"}[key]
    with name_scope(None, _at_k_name(title, k, class_id)) as scope:
        c = counts[key]
        if weights is not None:
            with control_dependencies((assert_broadcastable(weights, c),)):
                c = _op("multiply")(c, _op("cast")(weights, _dt.float64))
        batch_total = _op("cast")(_op("reduce_sum")(c), _dt.float64)
        var = metric_variable([], _dt.float64, name=scope)
        return var, _op("assign_add")(var, batch_total, name="update")


def _top_k_ratio(other: str, labels: Any, predictions_idx: Any, k: int | None,
                 class_id: int | None, weights: Any, metrics_collections: Collections,
                 updates_collections: Collections, scope: str) -> tuple[Tensor, Tensor]:
    """``tp / (tp + other)`` (other: ``fp`` for precision, ``fn`` for recall)."""
    pred = _op("cast")(predictions_idx, _dt.int64)
    ids, valid = _label_sets(labels, pred)
    pred_valid = _op("ones_like")(pred, _dt.bool)
    if class_id is not None:
        pred_valid = _op("equal")(pred, _op("cast")(class_id, _dt.int64))
        valid = _op("logical_and")(valid, _op("equal")(ids, _op("cast")(class_id, _dt.int64)))
    counts = _set_counts(pred, pred_valid, ids, valid)
    tp, tp_up = _streaming_at_k("tp", counts, k, class_id, weights)
    ot, ot_up = _streaming_at_k(other, counts, k, class_id, weights)
    value = _op("divide")(tp, _op("add")(tp, ot), name=scope)
    update = _op("divide")(tp_up, _op("add")(tp_up, ot_up), name="update")
    return _collect(metrics_collections, value), _collect(updates_collections, update)


def precision_at_top_k(labels: Any, predictions_idx: Any, k: int | None = None,
                       class_id: int | None = None, weights: Any = None,
                       metrics_collections: Collections = None,
                       updates_collections: Collections = None,
                       name: str | None = None) -> tuple[Tensor, Tensor]:
    """Precision of the predicted class ids ``predictions_idx`` (``[D1, ... DN, k]``)
    against the label ids (int64): ``tp / (tp + fp)`` with rows as sets, restricted to
    ``class_id`` if given. Local float64 variables ``precision_at_<k>/
    true_positive_at_<k>`` and ``.../false_positive_at_<k>``. NaN before any
    prediction, as TF."""
    with name_scope(name, _at_k_name("precision", k, class_id),
                    (predictions_idx, labels, weights)) as scope:
        return _top_k_ratio("fp", labels, predictions_idx, k, class_id, weights,
                            metrics_collections, updates_collections, scope)


def recall_at_top_k(labels: Any, predictions_idx: Any, k: int | None = None,
                    class_id: int | None = None, weights: Any = None,
                    metrics_collections: Collections = None,
                    updates_collections: Collections = None,
                    name: str | None = None) -> tuple[Tensor, Tensor]:
    """Recall of the predicted class ids ``predictions_idx`` against the label ids
    (int64): ``tp / (tp + fn)`` with rows as sets, restricted to ``class_id`` if given.
    Local float64 variables ``recall_at_<k>/true_positive_at_<k>`` and
    ``.../false_negative_at_<k>``."""
    with name_scope(name, _at_k_name("recall", k, class_id),
                    (predictions_idx, labels, weights)) as scope:
        return _top_k_ratio("fn", labels, predictions_idx, k, class_id, weights,
                            metrics_collections, updates_collections, scope)


def precision_at_k(labels: Any, predictions: Any, k: int, class_id: int | None = None,
                   weights: Any = None, metrics_collections: Collections = None,
                   updates_collections: Collections = None, name: str | None = None
                   ) -> tuple[Tensor, Tensor]:
    """:func:`precision_at_top_k` of the ``k`` highest-scoring classes of the logits
    ``predictions`` (``[D1, ... DN, num_classes]``)."""
    with name_scope(name, _at_k_name("precision", k, class_id),
                    (predictions, labels, weights)) as scope:
        _, top_k_idx = _op("nn.top_k")(predictions, k)
        return precision_at_top_k(labels, top_k_idx, k, class_id, weights,
                                  metrics_collections, updates_collections, scope)


def recall_at_k(labels: Any, predictions: Any, k: int, class_id: int | None = None,
                weights: Any = None, metrics_collections: Collections = None,
                updates_collections: Collections = None, name: str | None = None
                ) -> tuple[Tensor, Tensor]:
    """:func:`recall_at_top_k` of the ``k`` highest-scoring classes of ``predictions``."""
    with name_scope(name, _at_k_name("recall", k, class_id),
                    (predictions, labels, weights)) as scope:
        _, top_k_idx = _op("nn.top_k")(predictions, k)
        return recall_at_top_k(labels, top_k_idx, k, class_id, weights,
                               metrics_collections, updates_collections, scope)


def sparse_precision_at_k(labels: Any, predictions: Any, k: int,
                          class_id: int | None = None, weights: Any = None,
                          metrics_collections: Collections = None,
                          updates_collections: Collections = None,
                          name: str | None = None) -> tuple[Tensor, Tensor]:
    """The deprecated name of :func:`precision_at_k`."""
    return precision_at_k(labels, predictions, k, class_id, weights, metrics_collections,
                          updates_collections, name)


def _average_precision(labels: Any, predictions_idx: Tensor) -> Tensor:
    """Per row, the average precision at ``k`` (the last dimension of
    ``predictions_idx``): the sum of the precisions at each rank where a relevant id
    was retrieved, over ``min(k, number of labels)`` (TF 1.15: the labels' last
    dimension for dense labels, the row's distinct ids for sparse ones)."""
    with name_scope(None, "average_precision", (predictions_idx,)) as scope:
        pred = _op("cast")(predictions_idx, _dt.int64, name="predictions_idx")
        if pred.get_shape().ndims == 0:
            raise ValueError("The rank of predictions_idx must be at least 1.")
        k = pred.get_shape().as_list()[-1] if pred.get_shape().ndims else None
        if k is None:
            raise ValueError("The last dimension of predictions_idx must be set.")
        sparse = _is_sparse(labels)
        ids, valid = _label_sets(labels, pred)
        relevant = _op("cast")(_op("reduce_any")(_op("logical_and")(
            _op("equal")(_op("expand_dims")(pred, -1), _op("expand_dims")(ids, -2)),
            _op("expand_dims")(valid, -2)), -1), _dt.float64)          # [..., k]
        tp_per_k = _op("cumsum")(relevant, axis=-1, name="tp_per_k")
        retrieved = _op("cumsum")(_op("ones_like")(relevant), axis=-1,
                                  name="retrieved_per_k")
        precision_per_k = _op("divide")(tp_per_k, retrieved, name="precision_per_k")
        precision_sum = _op("reduce_sum")(
            _op("multiply")(precision_per_k, relevant, name="relevant_precision_per_k"),
            axis=(-1,), name="precision_sum")
        with name_scope(None, "num_relevant"):
            if sparse:
                first = _first_of_each(ids, valid)
                num = _op("reduce_sum")(_op("cast")(first, _dt.int32), -1)
                num = _op("minimum")(num, k)
            else:
                shape = _op("shape")(ids)
                num = _op("fill")(shape[:-1], _op("minimum")(shape[-1], k))
        return _op("divide")(precision_sum, _op("cast")(num, _dt.float64), name=scope)


def average_precision_at_k(labels: Any, predictions: Any, k: int, weights: Any = None,
                           metrics_collections: Collections = None,
                           updates_collections: Collections = None,
                           name: str | None = None) -> tuple[Tensor, Tensor]:
    """The (weighted) mean over rows of the average precision at ``k`` of the ``k``
    highest-scoring classes of ``predictions`` against the int64 label ids: local
    float64 variables ``average_precision_at_<k>/max`` (the weight seen) and
    ``.../total`` (the weighted sum).

    :raises ValueError: if ``k < 1``
    """
    if k < 1:
        raise ValueError(f"Invalid k={k}.")
    with name_scope(name, _at_k_name("average_precision", k),
                    (predictions, labels, weights)) as scope:
        _, predictions_idx = _op("nn.top_k")(predictions, k)
        ap = _average_precision(labels, predictions_idx)
        if weights is not None:
            weights = broadcast_weights(_op("cast")(weights, _dt.float64), ap)
            ap = _op("multiply")(ap, weights)
        with name_scope(None, "max", (ap,)) as max_scope:
            max_var = metric_variable([], _dt.float64, name=max_scope)
            if weights is None:
                batch_max = _op("cast")(_op("size")(ap, name="batch_max"), _dt.float64)
            else:
                batch_max = _op("reduce_sum")(weights, name="batch_max")
            max_update = _op("assign_add")(max_var, batch_max, name="update")
        with name_scope(None, "total", (ap,)) as total_scope:
            total_var = metric_variable([], _dt.float64, name=total_scope)
            batch_total = _op("reduce_sum")(ap, name="batch_total")
            total_update = _op("assign_add")(total_var, batch_total, name="update")
        value = _op("div_no_nan")(total_var, max_var, name="mean")
        update = _op("div_no_nan")(total_update, max_update, name=scope)
        return _collect(metrics_collections, value), _collect(updates_collections, update)


def sparse_average_precision_at_k(labels: Any, predictions: Any, k: int,
                                  weights: Any = None,
                                  metrics_collections: Collections = None,
                                  updates_collections: Collections = None,
                                  name: str | None = None) -> tuple[Tensor, Tensor]:
    """The deprecated name of :func:`average_precision_at_k`."""
    return average_precision_at_k(labels, predictions, k, weights, metrics_collections,
                                  updates_collections, name)


_METRICS: tuple[Callable[..., Any], ...] = (
    accuracy, auc, average_precision_at_k, false_negatives, false_negatives_at_thresholds,
    false_positives, false_positives_at_thresholds, mean, mean_absolute_error,
    mean_cosine_distance, mean_iou, mean_per_class_accuracy, mean_relative_error,
    mean_squared_error, mean_tensor, percentage_below, precision, precision_at_k,
    precision_at_thresholds, precision_at_top_k, recall, recall_at_k,
    recall_at_thresholds, recall_at_top_k, root_mean_squared_error,
    sensitivity_at_specificity, sparse_average_precision_at_k, sparse_precision_at_k,
    specificity_at_sensitivity, true_negatives, true_negatives_at_thresholds,
    true_positives, true_positives_at_thresholds)

API: dict[str, Any] = {f"metrics.{fn.__name__}": fn for fn in _METRICS}
API.update({"confusion_matrix": confusion_matrix, "math.confusion_matrix": confusion_matrix})
