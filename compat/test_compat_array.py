"""Array programs: shape manipulation, slicing and indexing, gathers, constructors."""
from __future__ import annotations

import numpy as np
import pytest

from compat_harness import Run, module, run_both

X234 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
X34 = np.arange(12, dtype=np.int32).reshape(3, 4)


def _progs(d: dict) -> list:
    return [pytest.param(v, id=k) for k, v in sorted(d.items())]


# -- reshape / transpose / squeeze / expand_dims ------------------------------------------------
def _reshape_fed(tf, shape_spec):
    x = tf.placeholder(tf.float32, [None, 3, 4])
    return Run(tf.reshape(x, shape_spec), {x: X234})


SHAPE_PROGRAMS = {
    "reshape": lambda tf: tf.reshape(tf.constant(X234), [4, 6]),
    "reshape_minus1": lambda tf: tf.reshape(tf.constant(X234), [-1, 4]),
    "reshape_scalar": lambda tf: tf.reshape(tf.constant([7]), []),
    "reshape_to_vector": lambda tf: tf.reshape(tf.constant(X234), [-1]),
    "reshape_tuple_shape": lambda tf: tf.reshape(tf.constant(X234), (6, 4)),
    "reshape_tensor_shape": lambda tf: tf.reshape(tf.constant(X234), tf.constant([3, 8])),
    "reshape_bad_size": lambda tf: tf.reshape(tf.constant(X234), [5, 5]),
    "reshape_two_minus1": lambda tf: tf.reshape(tf.constant(X234), [-1, -1]),
    "reshape_fed_unknown": lambda tf: _reshape_fed(tf, [-1, 12]),
    "reshape_fed_keep_batch": lambda tf: (lambda x: Run(tf.reshape(x, [tf.shape(x)[0], -1]),
                                                        {x: X234}))(
        tf.placeholder(tf.float32, [None, 3, 4])),
    "reshape_fed_bad_size": lambda tf: (lambda x: Run(tf.reshape(x, [5, -1]), {x: X234}))(
        tf.placeholder(tf.float32, [None, 3, 4])),
    "reshape_empty": lambda tf: tf.reshape(tf.zeros([0, 4]), [-1, 2]),
    "reshape_empty_minus1_zero": lambda tf: tf.reshape(tf.zeros([0, 4]), [0, -1]),
    "transpose_default": lambda tf: tf.transpose(tf.constant(X234)),
    "transpose_perm": lambda tf: tf.transpose(tf.constant(X234), [1, 0, 2]),
    "transpose_perm_tensor": lambda tf: tf.transpose(tf.constant(X234), tf.constant([2, 0, 1])),
    "transpose_bad_perm": lambda tf: tf.transpose(tf.constant(X234), [0, 0, 1]),
    "transpose_conjugate": lambda tf: tf.transpose(tf.constant([[1 + 2j, 3j]]), conjugate=True),
    "transpose_unknown": lambda tf: (lambda x: Run(tf.transpose(x), {x: X234}))(
        tf.placeholder(tf.float32, [None, 3, None])),
    "matrix_transpose": lambda tf: tf.matrix_transpose(tf.constant(X234)),
    "squeeze_all": lambda tf: tf.squeeze(tf.ones([1, 2, 1, 3, 1])),
    "squeeze_axis": lambda tf: tf.squeeze(tf.ones([1, 2, 1, 3, 1]), axis=[0, -1]),
    "squeeze_int_axis": lambda tf: tf.squeeze(tf.ones([1, 2, 1]), 2),
    "squeeze_dim_kwarg": lambda tf: tf.squeeze(tf.ones([1, 2, 1]), squeeze_dims=[0]),
    "squeeze_non_one": lambda tf: tf.squeeze(tf.ones([1, 2, 1]), axis=[1]),
    "squeeze_unknown": lambda tf: (lambda x: Run(tf.squeeze(x), {x: np.ones((1, 3, 1))}))(
        tf.placeholder(tf.float32, [None, 3, None])),
    "expand_dims": lambda tf: [tf.expand_dims(tf.constant([1, 2]), 0),
                               tf.expand_dims(tf.constant([1, 2]), -1),
                               tf.expand_dims(tf.constant([1, 2]), 1),
                               tf.expand_dims(tf.constant(5), 0)],
    "expand_dims_dim_kwarg": lambda tf: tf.expand_dims(tf.constant([1, 2]), dim=0),
    "expand_dims_out_of_range": lambda tf: tf.expand_dims(tf.constant([1, 2]), 3),
    "expand_dims_neg_edge": lambda tf: tf.expand_dims(tf.constant([[1, 2]]), -3),
    "shape_size_rank": lambda tf: [tf.shape(tf.constant(X234)), tf.size(tf.constant(X234)),
                                   tf.rank(tf.constant(X234)),
                                   tf.shape(tf.constant(X234), out_type=tf.int64),
                                   tf.size(tf.constant(X234), out_type=tf.int64)],
    "shape_of_fed": lambda tf: (lambda x: Run([tf.shape(x), tf.size(x), tf.rank(x)],
                                              {x: X234}))(
        tf.placeholder(tf.float32, [None, 3, None])),
    "shape_unknown_rank": lambda tf: (lambda x: Run([tf.shape(x), tf.rank(x), tf.size(x)],
                                                    {x: X234}))(tf.placeholder(tf.float32)),
    "shape_n": lambda tf: tf.shape_n([tf.ones([2, 3]), tf.ones([4])]),
    "broadcast_to": lambda tf: tf.broadcast_to(tf.constant([1, 2, 3]), [2, 3]),
    "broadcast_to_bad": lambda tf: tf.broadcast_to(tf.constant([1, 2, 3]), [2, 4]),
    "broadcast_dynamic_shape": lambda tf: tf.broadcast_dynamic_shape(
        tf.constant([2, 1, 3]), tf.constant([4, 1])),
    "identity_n": lambda tf: tf.identity_n([tf.constant(1), tf.constant([2.0])]),
}


_SHAPE_TF115 = {
    # TF 1.15's Reshape kernel refused to infer -1 for an empty tensor when another
    # requested size is 0; TF 2.x infers it
    "reshape_empty_minus1_zero": dict(
        was=None, error_class="InvalidArgumentError", error_phase="run#0",
        reason="TF 1.15 reshape_op.h: 'Reshape cannot infer the missing input size for "
               "an empty tensor unless all specified input sizes are non-zero'"),
}


@pytest.mark.parametrize("name", sorted(SHAPE_PROGRAMS))
def test_shape_programs(name):
    run_both(SHAPE_PROGRAMS[name], tf115=_SHAPE_TF115.get(name))


# -- concat / stack / unstack / split / tile / pad ---------------------------------------------
CONCAT_PROGRAMS = {
    "concat_axis0": lambda tf: tf.concat([tf.constant(X34), tf.constant(X34)], 0),
    "concat_axis1": lambda tf: tf.concat([tf.constant(X34), tf.constant(X34[:, :1])], 1),
    "concat_neg_axis": lambda tf: tf.concat([tf.constant(X234), tf.constant(X234)], -1),
    "concat_single": lambda tf: tf.concat([tf.constant(X34)], 0),
    "concat_tensor_axis": lambda tf: tf.concat([tf.constant(X34), tf.constant(X34)],
                                               tf.constant(1)),
    "concat_rank_mismatch": lambda tf: tf.concat([tf.ones([2, 3]), tf.ones([3])], 0),
    "concat_dim_mismatch": lambda tf: tf.concat([tf.ones([2, 3]), tf.ones([2, 4])], 0),
    "concat_dtype_mismatch": lambda tf: tf.concat([tf.ones([2]), tf.ones([2], tf.int32)], 0),
    "concat_axis_out_of_range": lambda tf: tf.concat([tf.ones([2]), tf.ones([2])], 1),
    "concat_python_lists": lambda tf: tf.concat([[1, 2], [3]], 0),
    "concat_unknown": lambda tf: (lambda x: Run(tf.concat([x, x], 1), {x: X234}))(
        tf.placeholder(tf.float32, [None, 3, 4])),
    "concat_strings": lambda tf: tf.concat([tf.constant(["a"]), tf.constant(["b", "c"])], 0),
    "concat_empty": lambda tf: tf.concat([tf.zeros([0, 2]), tf.ones([1, 2])], 0),
    "stack": lambda tf: tf.stack([tf.constant([1, 2]), tf.constant([3, 4])]),
    "stack_axis1": lambda tf: tf.stack([tf.constant([1, 2]), tf.constant([3, 4])], axis=1),
    "stack_neg_axis": lambda tf: tf.stack([tf.constant(X34), tf.constant(X34)], axis=-1),
    "stack_python": lambda tf: tf.stack([1.0, 2.0, tf.constant(3.0)]),
    "stack_shape_mismatch": lambda tf: tf.stack([tf.ones([2]), tf.ones([3])]),
    "stack_scalars": lambda tf: tf.stack([tf.constant(1), tf.constant(2)]),
    "parallel_stack": lambda tf: tf.parallel_stack([tf.constant([1, 2]), tf.constant([3, 4])]),
    "unstack": lambda tf: tf.unstack(tf.constant(X34)),
    "unstack_axis1": lambda tf: tf.unstack(tf.constant(X34), axis=1),
    "unstack_neg_axis": lambda tf: tf.unstack(tf.constant(X234), axis=-1),
    "unstack_num": lambda tf: tf.unstack(tf.constant(X34), num=3),
    "unstack_unknown_num": lambda tf: tf.unstack(tf.placeholder(tf.float32, [None, 2])),
    "split_even": lambda tf: tf.split(tf.constant(X34), 2, axis=1),
    "split_sizes": lambda tf: tf.split(tf.constant(X34), [1, 3], 1),
    "split_sizes_minus1": lambda tf: tf.split(tf.constant(X34), [1, -1], 1),
    "split_default_axis": lambda tf: tf.split(tf.constant(X34), 3),
    "split_uneven": lambda tf: tf.split(tf.constant(X34), 3, axis=1),
    "split_bad_sizes": lambda tf: tf.split(tf.constant(X34), [1, 2], 1),
    "split_neg_axis": lambda tf: tf.split(tf.constant(X234), 2, axis=-1),
    "split_num": lambda tf: tf.split(tf.constant(X34), [2, 2], axis=1, num=2),
    "split_fed": lambda tf: (lambda x: Run(tf.split(x, 2, axis=1), {x: X34}))(
        tf.placeholder(tf.int32, [None, 4])),
    "tile": lambda tf: tf.tile(tf.constant([[1, 2]]), [2, 3]),
    "tile_tensor_multiples": lambda tf: tf.tile(tf.constant([1, 2]), tf.constant([3])),
    "tile_bad_len": lambda tf: tf.tile(tf.constant([[1, 2]]), [2]),
    "tile_zero": lambda tf: tf.tile(tf.constant([[1, 2]]), [0, 2]),
    "tile_unknown": lambda tf: (lambda x: Run(tf.tile(x, [2, 1]), {x: X34}))(
        tf.placeholder(tf.int32, [None, 4])),
}


@pytest.mark.parametrize("program", _progs(CONCAT_PROGRAMS))
def test_concat_stack_split_tile(program):
    run_both(program)


PADS = {
    "pad_2d": [[1, 2], [2, 1]],
    "pad_zero": [[0, 0], [0, 0]],
    "pad_one_side": [[0, 1], [2, 0]],
    "pad_max_reflect": [[2, 2], [3, 3]],
    "pad_too_big_for_reflect": [[3, 0], [0, 0]],
    "pad_too_big_for_symmetric": [[4, 0], [0, 0]],
    "pad_negative": [[-1, 0], [0, 0]],
}


@pytest.mark.parametrize("mode", ["CONSTANT", "REFLECT", "SYMMETRIC", "reflect", "constant",
                                  "WRAP"])
@pytest.mark.parametrize("pads", sorted(PADS))
def test_pad_modes(pads, mode):
    def program(tf):
        return tf.pad(tf.constant(X34), PADS[pads], mode=mode)

    run_both(program)


PAD_PROGRAMS = {
    "constant_values": lambda tf: tf.pad(tf.constant([[1.0, 2.0]]), [[1, 1], [0, 1]],
                                         constant_values=-1.5),
    "constant_values_int": lambda tf: tf.pad(tf.constant([1, 2]), [[2, 0]], constant_values=9),
    "pad_tensor_paddings": lambda tf: tf.pad(tf.constant([1, 2]), tf.constant([[1, 1]])),
    "pad_bad_paddings_shape": lambda tf: tf.pad(tf.constant([[1, 2]]), [[1, 1]]),
    "pad_string": lambda tf: tf.pad(tf.constant(["a", "b"]), [[1, 0]]),
    "pad_3d_symmetric": lambda tf: tf.pad(tf.constant(X234), [[1, 0], [1, 1], [0, 2]],
                                          "SYMMETRIC"),
    "pad_unknown": lambda tf: (lambda x: Run(tf.pad(x, [[1, 1], [0, 2]]), {x: X34}))(
        tf.placeholder(tf.int32, [None, 4])),
    "pad_fed_paddings": lambda tf: (lambda p: Run(tf.pad(tf.constant(X34), p),
                                                  {p: [[0, 1], [2, 0]]}))(
        tf.placeholder(tf.int32, [2, 2])),
}


@pytest.mark.parametrize("program", _progs(PAD_PROGRAMS))
def test_pad_programs(program):
    run_both(program)


# -- slicing, strided_slice and __getitem__ ------------------------------------------------------
GETITEM_KEYS = {
    "int": lambda tf: 1,
    "neg_int": lambda tf: -1,
    "slice": lambda tf: slice(0, 1),
    "slice_neg": lambda tf: slice(-2, None),
    "slice_step": lambda tf: slice(None, None, 2),
    "reverse": lambda tf: slice(None, None, -1),
    "reverse_step2": lambda tf: slice(None, None, -2),
    "slice_out_of_bounds": lambda tf: slice(1, 100),
    "slice_empty": lambda tf: slice(2, 1),
    "int_then_slice": lambda tf: (1, slice(1, None)),
    "slice_then_int": lambda tf: (slice(None), 2),
    "ellipsis_first": lambda tf: (Ellipsis, 0),
    "ellipsis_last": lambda tf: (0, Ellipsis),
    "ellipsis_middle": lambda tf: (0, Ellipsis, 1),
    "newaxis_first": lambda tf: (tf.newaxis, Ellipsis),
    "none_key": lambda tf: None,
    "newaxis_middle": lambda tf: (slice(None), tf.newaxis, 1),
    "all_ints": lambda tf: (1, 2, 3),
    "mixed": lambda tf: (1, slice(None, None, -2), tf.newaxis),
    "neg_step_bounds": lambda tf: (slice(None), slice(-1, 0, -1)),
    "tensor_index": lambda tf: tf.constant(1),
    "tensor_slice_bounds": lambda tf: slice(tf.constant(0), tf.constant(2)),
    "int_out_of_range": lambda tf: 5,
    "neg_int_out_of_range": lambda tf: -3,
    "too_many_indices": lambda tf: (0, 0, 0, 0),
    "float_index": lambda tf: 1.0,
    "list_index": lambda tf: [0, 1],
    "two_ellipsis": lambda tf: (Ellipsis, Ellipsis),
    "zero_step": lambda tf: slice(None, None, 0),
    "np_int": lambda tf: np.int64(1),
    "bool_scalar_key": lambda tf: True,
}


@pytest.mark.parametrize("key", sorted(GETITEM_KEYS))
def test_getitem_static(key):
    def program(tf):
        return tf.constant(X234)[GETITEM_KEYS[key](tf)]

    run_both(program)


@pytest.mark.parametrize("key", sorted(GETITEM_KEYS))
def test_getitem_unknown_shape(key):
    def program(tf):
        x = tf.placeholder(tf.float32, [None, None, 4])
        return Run(x[GETITEM_KEYS[key](tf)], {x: X234})

    run_both(program)


STRIDED = {
    "basic": ([0, 1, 0], [2, 3, 4], [1, 1, 2], {}),
    "begin_end_mask": ([1, 1, 1], [2, 2, 2], [1, 1, 1], {"begin_mask": 5, "end_mask": 2}),
    "ellipsis_mask": ([0, 1], [1, 3], [1, 1], {"ellipsis_mask": 1}),
    "new_axis_mask": ([0, 0, 0], [1, 1, 1], [1, 1, 1], {"new_axis_mask": 2}),
    "shrink_axis_mask": ([1, 0, 2], [2, 3, 3], [1, 1, 1], {"shrink_axis_mask": 5}),
    "negative_stride": ([-1, -1, -1], [-3, -4, -5], [-1, -1, -1], {}),
    "neg_stride_masks": ([0, 0, 0], [0, 0, 0], [-1, -1, -1],
                         {"begin_mask": 7, "end_mask": 7}),
    "clamped": ([-10, 0, 0], [10, 10, 10], [1, 2, 3], {}),
    "all_masks": ([0, 0, 0, 0], [0, 0, 1, 0], [1, 1, 1, 1],
                  {"ellipsis_mask": 1, "new_axis_mask": 2, "shrink_axis_mask": 4}),
    "shrink_out_of_range": ([5, 0, 0], [6, 1, 1], [1, 1, 1], {"shrink_axis_mask": 1}),
    "zero_stride": ([0, 0, 0], [1, 1, 1], [0, 1, 1], {}),
}


@pytest.mark.parametrize("name", sorted(STRIDED))
def test_strided_slice(name):
    b, e, s, kw = STRIDED[name]

    def program(tf):
        return tf.strided_slice(tf.constant(X234), b, e, s, **kw)

    run_both(program)


SLICE_PROGRAMS = {
    "slice": lambda tf: tf.slice(tf.constant(X234), [0, 1, 1], [2, 2, 2]),
    "slice_minus1": lambda tf: tf.slice(tf.constant(X234), [1, 0, 2], [-1, -1, -1]),
    "slice_out_of_bounds": lambda tf: tf.slice(tf.constant(X234), [1, 0, 0], [2, 1, 1]),
    "slice_bad_rank": lambda tf: tf.slice(tf.constant(X234), [0, 0], [1, 1]),
    "slice_fed": lambda tf: (lambda x: Run(tf.slice(x, [0, 1, 1], [-1, 2, 2]), {x: X234}))(
        tf.placeholder(tf.float32, [None, 3, 4])),
    "slice_fed_begin": lambda tf: (lambda b: Run(tf.slice(tf.constant(X234), b, [1, 1, 1]),
                                                 {b: [1, 2, 3]}))(
        tf.placeholder(tf.int32, [3])),
    "slice_fed_out_of_bounds": lambda tf: (lambda b: Run(tf.slice(tf.constant(X234), b,
                                                                  [1, 1, 1]),
                                                         {b: [1, 2, 4]}))(
        tf.placeholder(tf.int32, [3])),
}


@pytest.mark.parametrize("program", _progs(SLICE_PROGRAMS))
def test_slice_programs(program):
    run_both(program)


# -- gathers, scatters, one_hot, where, boolean_mask ---------------------------------------------
PARAMS = np.arange(20, dtype=np.float32).reshape(4, 5)

GATHER_PROGRAMS = {
    "gather": lambda tf: tf.gather(tf.constant(PARAMS), [3, 0, 0]),
    "gather_axis1": lambda tf: tf.gather(tf.constant(PARAMS), [4, 1], axis=1),
    "gather_neg_axis": lambda tf: tf.gather(tf.constant(X234), [[0, 1], [2, 2]], axis=-1),
    "gather_2d_indices": lambda tf: tf.gather(tf.constant(PARAMS), [[0, 1], [2, 3]]),
    "gather_scalar_index": lambda tf: tf.gather(tf.constant(PARAMS), 2),
    "gather_int64_indices": lambda tf: tf.gather(tf.constant(PARAMS),
                                                 tf.constant([1, 2], tf.int64)),
    "gather_out_of_range": lambda tf: tf.gather(tf.constant(PARAMS), [4]),
    "gather_negative_index": lambda tf: tf.gather(tf.constant(PARAMS), [-1]),
    "gather_float_indices": lambda tf: tf.gather(tf.constant(PARAMS), tf.constant([1.0])),
    "gather_batch_dims": lambda tf: tf.gather(tf.constant(X234), [[0, 2], [1, 1]],
                                              axis=2, batch_dims=1),
    "gather_strings": lambda tf: tf.gather(tf.constant(["a", "b", "c"]), [2, 0]),
    "gather_empty_indices": lambda tf: tf.gather(tf.constant(PARAMS), tf.zeros([0], tf.int32)),
    "gather_unknown": lambda tf: (lambda i: Run(tf.gather(tf.constant(PARAMS), i),
                                                {i: [[1], [2]]}))(
        tf.placeholder(tf.int32, [None, 1])),
    "gather_nd_elements": lambda tf: tf.gather_nd(tf.constant(PARAMS), [[0, 0], [3, 4]]),
    "gather_nd_rows": lambda tf: tf.gather_nd(tf.constant(PARAMS), [[1], [0]]),
    "gather_nd_batched": lambda tf: tf.gather_nd(tf.constant(X234), [[[0, 1]], [[1, 2]]]),
    "gather_nd_scalar_result": lambda tf: tf.gather_nd(tf.constant(PARAMS), [2, 3]),
    "gather_nd_out_of_range": lambda tf: tf.gather_nd(tf.constant(PARAMS), [[4, 0]]),
    "gather_nd_too_deep": lambda tf: tf.gather_nd(tf.constant(PARAMS), [[1, 2, 3]]),
    "gather_nd_batch_dims": lambda tf: tf.gather_nd(tf.constant(X234), [[1], [2]],
                                                    batch_dims=1),
    "scatter_nd": lambda tf: tf.scatter_nd([[1], [3], [1]], [1.0, 2.0, 3.0], [5]),
    "scatter_nd_rows": lambda tf: tf.scatter_nd([[0], [2]], [[1, 2], [3, 4]], [3, 2]),
    "tensor_scatter_update": lambda tf: tf.tensor_scatter_nd_update(
        tf.zeros([4]), [[1], [2]], [5.0, 6.0]),
    "tensor_scatter_add": lambda tf: tf.tensor_scatter_nd_add(
        tf.ones([4]), [[1], [1]], [5.0, 6.0]),
    "one_hot": lambda tf: tf.one_hot([0, 2, -1, 3], 3),
    "one_hot_values": lambda tf: tf.one_hot([1, 0], 3, on_value=5, off_value=-1),
    "one_hot_axis0": lambda tf: tf.one_hot([[0, 2], [1, 1]], 3, axis=0),
    "one_hot_axis1": lambda tf: tf.one_hot([[0, 2], [1, 1]], 3, axis=1),
    "one_hot_dtype": lambda tf: tf.one_hot([1, 0], 2, dtype=tf.int64),
    "one_hot_bool_values": lambda tf: tf.one_hot([1, 0], 2, on_value=True, off_value=False),
    "one_hot_int64_indices": lambda tf: tf.one_hot(tf.constant([1, 0], tf.int64), 2),
    "one_hot_uint8_indices": lambda tf: tf.one_hot(tf.constant([1, 0], tf.uint8), 2),
    "one_hot_mismatched_values": lambda tf: tf.one_hot([1, 0], 2, on_value=1.0, off_value=0),
    "one_hot_fed_depth": lambda tf: (lambda d: Run(tf.one_hot([1, 0], d), {d: 4}))(
        tf.placeholder(tf.int32, [])),
    "where_1arg": lambda tf: tf.where([[True, False], [False, True], [True, True]]),
    "where_1arg_numeric": lambda tf: tf.where(tf.constant([0, 3, 0, -1])),
    "where_1arg_empty": lambda tf: tf.where(tf.constant([False, False])),
    "where_3arg": lambda tf: tf.where([True, False, True], [1, 2, 3], [4, 5, 6]),
    "where_3arg_rows": lambda tf: tf.where([True, False], tf.constant(X34[:2]),
                                           tf.constant(-X34[:2])),
    "where_3arg_bad_shape": lambda tf: tf.where([True, False], [1, 2, 3], [4, 5, 6]),
    "where_3arg_broadcast_scalar": lambda tf: tf.where([True, False], [1, 2], 0),
    "where_v2_broadcast": lambda tf: tf.where_v2([[True], [False]], [1, 2, 3], 0),
    "where_3arg_dtype_mismatch": lambda tf: tf.where([True], [1], [1.0]),
    "where_1arg_unknown": lambda tf: (lambda c: Run(tf.where(c), {c: [[True, False]]}))(
        tf.placeholder(tf.bool, [None, 2])),
    "boolean_mask": lambda tf: tf.boolean_mask(tf.constant(PARAMS), [True, False, True, False]),
    "boolean_mask_2d": lambda tf: tf.boolean_mask(tf.constant(X34), X34 % 3 == 0),
    "boolean_mask_axis": lambda tf: tf.boolean_mask(tf.constant(X234), [True, False, True],
                                                    axis=1),
    "boolean_mask_bad_shape": lambda tf: tf.boolean_mask(tf.constant(PARAMS), [True, False]),
    "boolean_mask_fed": lambda tf: (lambda m: Run(tf.boolean_mask(tf.constant(PARAMS), m),
                                                  {m: [False, True, True, False]}))(
        tf.placeholder(tf.bool, [None])),
    "unique": lambda tf: tf.unique(tf.constant([3, 1, 3, 2, 1])),
    "unique_with_counts": lambda tf: tf.unique_with_counts(tf.constant([3, 1, 3])),
    "setdiff1d": lambda tf: tf.setdiff1d(tf.constant([1, 2, 3, 4]), tf.constant([2, 4])),
    "dynamic_partition": lambda tf: tf.dynamic_partition(tf.constant([1, 2, 3, 4]),
                                                         tf.constant([1, 0, 1, 0]), 2),
    "dynamic_stitch": lambda tf: tf.dynamic_stitch([[0, 2], [1]], [[1.0, 3.0], [2.0]]),
    "sequence_mask": lambda tf: tf.sequence_mask([1, 3, 0], 4),
    "sequence_mask_no_maxlen": lambda tf: tf.sequence_mask(tf.constant([1, 3])),
    "searchsorted": lambda tf: tf.searchsorted(tf.constant([[1.0, 3.0, 5.0]]),
                                               tf.constant([[2.0, 5.0]])),
    "argsort_descending": lambda tf: tf.argsort(tf.constant([3.0, 1.0, 2.0]),
                                                direction="DESCENDING"),
    "sort_float": lambda tf: tf.sort(tf.constant([3.0, 1.0, 2.0])),
}


@pytest.mark.parametrize("program", _progs(GATHER_PROGRAMS))
def test_gather_where_mask(program):
    run_both(program)


def test_sort_integers_tf115():
    # TF 1.15's ascending sort is -top_k(-x) for every dtype (sort_ops._ascending_sort), so
    # an integer sort ends in sort/Neg_1; TF 2.x sorts integers as top_k(max - x) and ends
    # in sort/sub_1. Values, dtype and shape are compared with TF; the name with TF 1.15.
    out = run_both(lambda tf: tf.sort(tf.constant([3, 1, 2])),
                   static_keys=("kind", "dtype", "shape"))
    assert [i.get("name") for _, i in out.static] == ["sort/sub_1:0"]
    tf = module("flowrt")
    with tf.Graph().as_default():
        r = tf.sort(tf.constant([3, 1, 2]))
        assert (r.name, r.op.type) == ("sort/Neg_1:0", "Neg")


# -- constructors ------------------------------------------------------------------------------
CTOR_PROGRAMS = {
    "fill": lambda tf: tf.fill([2, 3], 7),
    "fill_float": lambda tf: tf.fill([2], 1.5),
    "fill_string": lambda tf: tf.fill([2], "s"),
    "fill_tensor_dims": lambda tf: tf.fill(tf.constant([3]), tf.constant(2, tf.int64)),
    "fill_negative_dims": lambda tf: tf.fill([-1, 2], 0),
    "fill_fed_dims": lambda tf: (lambda d: Run(tf.fill(d, 1.0), {d: [2, 2]}))(
        tf.placeholder(tf.int32, [2])),
    "zeros": lambda tf: [tf.zeros([2, 3]), tf.zeros([2], tf.int32), tf.zeros([], tf.bool),
                         tf.zeros((1, 2), tf.string), tf.zeros(tf.constant([2]))],
    "ones": lambda tf: [tf.ones([2, 3]), tf.ones([2], tf.int64), tf.ones([1], tf.bool),
                        tf.ones([2], tf.complex64)],
    "zeros_like_ones_like": lambda tf: [tf.zeros_like(tf.constant(X34)),
                                        tf.ones_like(tf.constant([True, False])),
                                        tf.zeros_like(tf.constant(["a"])),
                                        tf.ones_like(tf.constant(X34), dtype=tf.float64),
                                        tf.zeros_like(tf.constant([1.0]), dtype=tf.int32)],
    "zeros_like_unknown": lambda tf: (lambda x: Run([tf.zeros_like(x), tf.ones_like(x)],
                                                    {x: X234}))(
        tf.placeholder(tf.float32, [None, 3, 4])),
    "range_limit": lambda tf: tf.range(5),
    "range_start_limit": lambda tf: tf.range(2, 9, 3),
    "range_negative_delta": lambda tf: tf.range(5, 0, -2),
    "range_float": lambda tf: tf.range(0.5, 2.0, 0.5),
    "range_mixed": lambda tf: tf.range(1, 2.5),
    "range_dtype": lambda tf: tf.range(3, dtype=tf.int64),
    "range_float_dtype": lambda tf: tf.range(3, dtype=tf.float64),
    "range_empty": lambda tf: tf.range(0),
    "range_wrong_direction": lambda tf: tf.range(5, 0, 1),
    "range_zero_delta": lambda tf: tf.range(0, 5, 0),
    "range_tensor_limit": lambda tf: tf.range(tf.constant(4)),
    "range_fed": lambda tf: (lambda n: Run(tf.range(n), {n: 3}))(tf.placeholder(tf.int32, [])),
    "range_fed_wrong_direction": lambda tf: (lambda n: Run(tf.range(n, 0, 1), {n: 3}))(
        tf.placeholder(tf.int32, [])),
    "linspace": lambda tf: tf.linspace(0.0, 1.0, 5),
    "linspace_one": lambda tf: tf.linspace(2.0, 3.0, 1),
    "linspace_float64": lambda tf: tf.lin_space(tf.constant(0.0, tf.float64),
                                                tf.constant(-1.0, tf.float64), 4),
    "linspace_int_start": lambda tf: tf.linspace(0, 1, 3),
    "linspace_zero": lambda tf: tf.linspace(0.0, 1.0, 0),
    "eye": lambda tf: tf.eye(3),
    "eye_rect": lambda tf: tf.eye(2, 4, dtype=tf.int32),
    "eye_batch": lambda tf: tf.eye(2, batch_shape=[3]),
    "eye_tensor_rows": lambda tf: tf.eye(tf.constant(2)),
    "reverse": lambda tf: tf.reverse(tf.constant(X234), [1]),
    "reverse_multi": lambda tf: tf.reverse(tf.constant(X234), [0, -1]),
    "reverse_empty_axis": lambda tf: tf.reverse(tf.constant(X34), []),
    "reverse_v2": lambda tf: tf.reverse_v2(tf.constant(X34), [1]),
    "reverse_sequence": lambda tf: tf.reverse_sequence(tf.constant(X34), [1, 2, 4], seq_axis=1,
                                                       batch_axis=0),
    "reverse_bad_axis": lambda tf: tf.reverse(tf.constant(X34), [2]),
    "constant_shape_broadcast": lambda tf: tf.constant(5, shape=[2, 2]),
    "constant_shape_pad_last": lambda tf: tf.constant([1, 2], shape=[2, 2]),
    "constant_shape_reshape": lambda tf: tf.constant([1, 2, 3, 4], shape=[2, 2]),
    "constant_shape_too_small": lambda tf: tf.constant([1, 2, 3], shape=[2]),
    "constant_verify_shape": lambda tf: tf.constant([1, 2], shape=[2, 2], verify_shape=True),
    "constant_dtype_convert": lambda tf: tf.constant([1, 2], dtype=tf.float32),
    "constant_float_to_int": lambda tf: tf.constant([1.5], dtype=tf.int32),
    "constant_out_of_range": lambda tf: tf.constant(300, dtype=tf.int8),
    "constant_ragged": lambda tf: tf.constant([[1, 2], [3]]),
    "constant_numpy": lambda tf: [tf.constant(np.float64(1.5)), tf.constant(np.arange(3)),
                                  tf.constant(np.array([1, 2], np.uint16)),
                                  tf.constant(np.array(["a", "bc"]))],
    "constant_python_types": lambda tf: [tf.constant(1), tf.constant(1.5), tf.constant(True),
                                         tf.constant("s"), tf.constant(2 ** 40),
                                         tf.constant([1, 2.5]), tf.constant(b"x"),
                                         tf.constant(1 + 2j), tf.constant([])],
    "constant_unicode": lambda tf: tf.constant(["héllo", "x"]),
    "constant_of_tensor": lambda tf: tf.constant(tf.constant(1)),
    "convert_to_tensor": lambda tf: [tf.convert_to_tensor([1, 2]),
                                     tf.convert_to_tensor(1.5, dtype=tf.float64),
                                     tf.convert_to_tensor(np.float32(2)),
                                     tf.convert_to_tensor([[1.0], [2.0]], name="conv")],
    "convert_to_tensor_bad_dtype": lambda tf: tf.convert_to_tensor(1.5, dtype=tf.int32),
    "convert_tensor_dtype_mismatch": lambda tf: tf.convert_to_tensor(tf.constant(1),
                                                                     dtype=tf.float32),
    "convert_preferred_dtype": lambda tf: tf.convert_to_tensor(
        1, preferred_dtype=tf.int64),
    "bitcast": lambda tf: tf.bitcast(tf.constant([1.0, -2.0]), tf.int32),
    "diag_part_eye": lambda tf: tf.diag_part(tf.eye(3)),
    "meshgrid": lambda tf: tf.meshgrid(tf.constant([1, 2]), tf.constant([3, 4, 5])),
    "meshgrid_ij": lambda tf: tf.meshgrid(tf.constant([1, 2]), tf.constant([3, 4, 5]),
                                          indexing="ij"),
    "check_numerics": lambda tf: tf.check_numerics(tf.constant([1.0, np.nan]), "bad"),
    "check_numerics_ok": lambda tf: tf.check_numerics(tf.constant([1.0, 2.0]), "ok"),
    "ensure_shape": lambda tf: (lambda x: Run(tf.ensure_shape(x, [None, 3]),
                                              {x: np.ones((2, 4))}))(tf.placeholder(tf.float32)),
}


_CTOR_TF115 = {
    # TF 1.15's tf.linspace was the raw LinSpace op: T in {bfloat16, float, double}, and
    # its shape function rejects num <= 0; TF 2.x builds linspace in Python
    "linspace_int_start": dict(was=None, error_class="TypeError", error_phase="build",
                               reason="LinSpace has no integer kernel in TF 1.15"),
    "linspace_zero": dict(was=None, error_class="ValueError", error_phase="build",
                          reason="LinSpace shape function: 'Requires num > 0'"),
}


@pytest.mark.parametrize("name", sorted(CTOR_PROGRAMS))
def test_constructors(name):
    run_both(CTOR_PROGRAMS[name], tf115=_CTOR_TF115.get(name))


# -- array ops over dtypes ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int64", "float16", "bfloat16", "float64",
                                   "complex128", "bool", "string"])
def test_array_ops_dtypes(dtype):
    base = np.arange(6).reshape(2, 3)
    vals = {"bool": (base % 2 == 0).tolist(),
            "string": [[str(v).encode() for v in row] for row in base.tolist()]
            }.get(dtype, base.tolist())

    def program(tf):
        x = tf.constant(vals, getattr(tf, dtype))
        return {
            "reshape": tf.reshape(x, [3, 2]), "transpose": tf.transpose(x),
            "concat": tf.concat([x, x], 1), "stack": tf.stack([x, x]),
            "unstack": tf.unstack(x), "split": tf.split(x, 3, 1),
            "tile": tf.tile(x, [2, 1]), "pad": tf.pad(x, [[1, 0], [0, 1]]),
            "reverse": tf.reverse(x, [1]), "slice": x[:, 1:], "gather": tf.gather(x, [1, 0]),
            "gather_nd": tf.gather_nd(x, [[1, 2]]), "where": tf.where(tf.ones_like(
                x, dtype=tf.bool), x, x), "expand": tf.expand_dims(x, 1),
            "squeeze": tf.squeeze(tf.expand_dims(x, 0)), "identity": tf.identity(x),
            "boolean_mask": tf.boolean_mask(x, [True, False]), "fill": tf.fill([2], x[0, 0]),
            "zeros_like": tf.zeros_like(x), "broadcast_to": tf.broadcast_to(x[:1], [2, 3]),
        }

    run_both(program)
