"""tf.nn convolutions, pooling, normalisation and space ops (helper D's area): the same
programs under TensorFlow and flowrt -- values, dtypes, static shapes, op names and
types, error classes, and gradients.

Channels-first convolutions and pooling do not run on TF's CPU kernels; those are
compared with ``run_pair`` against the channels-last program wrapped in transposes.
"""
from __future__ import annotations

import numpy as np
import pytest

from compat_data import arr
from compat_harness import Run, run_both, run_pair


def _progs(d: dict) -> list:
    return [pytest.param(v, id=k) for k, v in sorted(d.items())]


X1 = arr((2, 9, 3), seed=1)            # NWC
X2 = arr((2, 8, 7, 3), seed=2)         # NHWC
X3 = arr((2, 5, 6, 4, 3), seed=3)      # NDHWC
W1 = arr((3, 3, 4), seed=4)
W2 = arr((3, 2, 3, 4), seed=5)
W3 = arr((2, 3, 2, 3, 4), seed=6)
DW = arr((3, 3, 3, 2), seed=7)         # depthwise: multiplier 2
PW = arr((1, 1, 6, 5), seed=8)


def c(tf, v, dtype=None):
    return tf.constant(v, dtype or tf.float32)


# -- convolutions ---------------------------------------------------------------------------
CONV = {
    "conv1d_valid": lambda tf: tf.nn.conv1d(c(tf, X1), c(tf, W1), 1, "VALID"),
    "conv1d_same_s2": lambda tf: tf.nn.conv1d(c(tf, X1), c(tf, W1), 2, "SAME"),
    "conv1d_dilated": lambda tf: tf.nn.conv1d(c(tf, X1), c(tf, W1), 1, "SAME", dilations=2),
    "conv1d_input_kw": lambda tf: tf.nn.conv1d(input=c(tf, X1), filters=c(tf, W1), stride=[1],
                                               padding="VALID", name="c1"),
    "conv1d_bad_format": lambda tf: tf.nn.conv1d(c(tf, X1), c(tf, W1), 1, "VALID",
                                                 data_format="NDHWC"),
    "conv1d_transpose": lambda tf: tf.nn.conv1d_transpose(
        c(tf, arr((2, 5, 4))), c(tf, W1), [2, 10, 3], 2, "SAME"),
    "conv1d_transpose_valid": lambda tf: tf.nn.conv1d_transpose(
        c(tf, arr((2, 5, 4))), c(tf, W1), tf.constant([2, 11, 3]), [2], "VALID"),
    "conv3d_same": lambda tf: tf.nn.conv3d(c(tf, X3), c(tf, W3), [1, 1, 1, 1, 1], "SAME"),
    "conv3d_valid_strided": lambda tf: tf.nn.conv3d(c(tf, X3), c(tf, W3), [1, 2, 1, 2, 1],
                                                    "VALID"),
    "conv3d_float64": lambda tf: tf.nn.conv3d(c(tf, X3, tf.float64), c(tf, W3, tf.float64),
                                              [1, 2, 2, 2, 1], "SAME"),
    "conv3d_filters_kw": lambda tf: tf.nn.conv3d(c(tf, X3), filters=c(tf, W3),
                                                 strides=[1] * 5, padding="VALID"),
    "conv3d_channel_mismatch": lambda tf: tf.nn.conv3d(c(tf, X3), tf.ones([2, 2, 2, 4, 1]),
                                                       [1] * 5, "SAME"),
    "conv3d_bad_rank": lambda tf: tf.nn.conv3d(c(tf, X2), c(tf, W3), [1] * 5, "SAME"),
    "conv3d_bad_strides_len": lambda tf: tf.nn.conv3d(c(tf, X3), c(tf, W3), [1] * 4, "SAME"),
    "conv3d_too_big": lambda tf: tf.nn.conv3d(c(tf, X3), tf.ones([6, 1, 1, 3, 1]), [1] * 5,
                                              "VALID"),
    "conv3d_unknown_batch": lambda tf: (lambda x: Run(
        tf.nn.conv3d(x, c(tf, W3), [1, 1, 2, 1, 1], "SAME"), {x: X3}))(
        tf.placeholder(tf.float32, [None, 5, 6, 4, 3])),
    "conv3d_transpose": lambda tf: tf.nn.conv3d_transpose(
        c(tf, arr((2, 3, 3, 2, 4))), c(tf, W3), [2, 5, 6, 4, 3], [1, 2, 2, 2, 1], "SAME"),
    "conv3d_transpose_valid": lambda tf: tf.nn.conv3d_transpose(
        c(tf, arr((1, 4, 4, 3, 4))), c(tf, W3), [1, 5, 6, 4, 3], [1, 1, 1, 1, 1], "VALID"),
    "conv3d_transpose_channel_mismatch": lambda tf: tf.nn.conv3d_transpose(
        c(tf, arr((1, 4, 4, 3, 2))), c(tf, W3), [1, 5, 6, 4, 3], [1] * 5, "VALID"),
    "conv3d_transpose_bad_sizes": lambda tf: tf.nn.conv3d_transpose(
        c(tf, arr((1, 4, 4, 3, 4))), c(tf, W3), [1, 9, 6, 4, 3], [1] * 5, "VALID"),
    "conv3d_backprop_filter_v2": lambda tf: tf.nn.conv3d_backprop_filter_v2(
        c(tf, X3), [2, 3, 2, 3, 4], c(tf, arr((2, 4, 4, 3, 4))), [1] * 5, "VALID"),
    "conv3d_backprop_filter": lambda tf: tf.nn.conv3d_backprop_filter(
        c(tf, X3), [2, 3, 2, 3, 4], c(tf, arr((2, 3, 3, 2, 4))), [1, 2, 2, 2, 1], "SAME"),
    "conv_transpose_1d": lambda tf: tf.nn.conv_transpose(
        c(tf, arr((2, 5, 4))), c(tf, W1), [2, 10, 3], 2),
    "conv_transpose_2d": lambda tf: tf.nn.conv_transpose(
        c(tf, arr((2, 4, 4, 4))), c(tf, W2), [2, 8, 7, 3], [2, 2], padding="SAME"),
    "conv_transpose_3d": lambda tf: tf.nn.conv_transpose(
        c(tf, arr((2, 3, 3, 2, 4))), c(tf, W3), [2, 5, 6, 4, 3], 2),
    "convolution_1d": lambda tf: tf.nn.convolution(c(tf, X1), c(tf, W1), "SAME", strides=[2]),
    "convolution_2d": lambda tf: tf.nn.convolution(c(tf, X2), c(tf, W2), "VALID"),
    "convolution_3d": lambda tf: tf.nn.convolution(c(tf, X3), c(tf, W3), "SAME"),
    "convolution_1d_dilated": lambda tf: tf.nn.convolution(c(tf, X1), c(tf, W1), "SAME",
                                                           dilation_rate=[2]),
    "convolution_2d_dilated_valid": lambda tf: tf.nn.convolution(
        c(tf, X2), c(tf, W2), "VALID", dilation_rate=[2, 3]),
    "convolution_2d_dilated_same": lambda tf: tf.nn.convolution(
        c(tf, X2), c(tf, W2), "SAME", dilation_rate=[2, 2], name="dconv"),
    "convolution_3d_dilated": lambda tf: tf.nn.convolution(
        c(tf, X3), c(tf, W3), "SAME", dilation_rate=[1, 2, 2]),
    "convolution_dilations_kw": lambda tf: tf.nn.convolution(
        c(tf, X2), filters=c(tf, W2), padding="SAME", dilations=[2, 1]),
    "convolution_stride_and_dilation": lambda tf: tf.nn.convolution(
        c(tf, X2), c(tf, W2), "SAME", strides=[2, 2], dilation_rate=[2, 2]),
    "convolution_bad_rank": lambda tf: tf.nn.convolution(c(tf, arr((2, 3))), c(tf, W2),
                                                         "SAME"),
    "convolution_unknown_spatial_dilated": lambda tf: (lambda x: Run(
        tf.nn.convolution(x, c(tf, W2), "SAME", dilation_rate=[2, 2]), {x: X2}))(
        tf.placeholder(tf.float32, [None, None, None, 3])),
    "atrous_conv2d_same": lambda tf: tf.nn.atrous_conv2d(c(tf, X2), c(tf, W2), 2, "SAME"),
    "atrous_conv2d_valid": lambda tf: tf.nn.atrous_conv2d(c(tf, X2), c(tf, W2), 2, "VALID"),
    "atrous_conv2d_rate1": lambda tf: tf.nn.atrous_conv2d(c(tf, X2), c(tf, W2), 1, "SAME"),
    "atrous_conv2d_transpose": lambda tf: tf.nn.atrous_conv2d_transpose(
        c(tf, arr((2, 8, 7, 4))), c(tf, W2), [2, 8, 7, 3], 2, "SAME"),
    "atrous_conv2d_transpose_valid": lambda tf: tf.nn.atrous_conv2d_transpose(
        c(tf, arr((2, 4, 5, 4))), c(tf, W2), [2, 8, 7, 3], 2, "VALID"),
    "atrous_conv2d_transpose_rate1": lambda tf: tf.nn.atrous_conv2d_transpose(
        c(tf, arr((2, 8, 7, 4))), c(tf, W2), [2, 8, 7, 3], 1, "SAME"),
    "depthwise_conv2d": lambda tf: tf.nn.depthwise_conv2d(c(tf, X2), c(tf, DW), [1, 1, 1, 1],
                                                          "SAME"),
    "depthwise_conv2d_strided": lambda tf: tf.nn.depthwise_conv2d(
        c(tf, X2), c(tf, DW), [1, 2, 2, 1], "VALID"),
    "depthwise_conv2d_rate": lambda tf: tf.nn.depthwise_conv2d(
        c(tf, X2), c(tf, DW), [1, 1, 1, 1], "SAME", rate=[2, 2]),
    "depthwise_conv2d_rate_valid": lambda tf: tf.nn.depthwise_conv2d(
        c(tf, X2), c(tf, DW), [1, 1, 1, 1], "VALID", rate=[2, 1], name="dw"),
    "depthwise_conv2d_float64": lambda tf: tf.nn.depthwise_conv2d(
        c(tf, X2, tf.float64), c(tf, DW, tf.float64), [1, 1, 1, 1], "SAME"),
    "depthwise_conv2d_mismatch": lambda tf: tf.nn.depthwise_conv2d(
        c(tf, X2), tf.ones([3, 3, 2, 2]), [1, 1, 1, 1], "SAME"),
    "depthwise_conv2d_native": lambda tf: tf.nn.depthwise_conv2d_native(
        c(tf, X2), c(tf, DW), [1, 2, 1, 1], "SAME"),
    "depthwise_native_backprop_input": lambda tf: tf.nn.depthwise_conv2d_native_backprop_input(
        [2, 8, 7, 3], c(tf, DW), c(tf, arr((2, 4, 7, 6))), [1, 2, 1, 1], "SAME"),
    "depthwise_backprop_input": lambda tf: tf.nn.depthwise_conv2d_backprop_input(
        [2, 8, 7, 3], c(tf, DW), c(tf, arr((2, 6, 5, 6))), [1, 1, 1, 1], "VALID"),
    "depthwise_native_backprop_filter": lambda tf:
        tf.nn.depthwise_conv2d_native_backprop_filter(
            c(tf, X2), [3, 3, 3, 2], c(tf, arr((2, 4, 7, 6))), [1, 2, 1, 1], "SAME"),
    "depthwise_backprop_filter": lambda tf: tf.nn.depthwise_conv2d_backprop_filter(
        c(tf, X2), [3, 3, 3, 2], c(tf, arr((2, 6, 5, 6))), [1, 1, 1, 1], "VALID"),
    "separable_conv2d": lambda tf: tf.nn.separable_conv2d(c(tf, X2), c(tf, DW), c(tf, PW),
                                                          [1, 1, 1, 1], "SAME"),
    "separable_conv2d_rate": lambda tf: tf.nn.separable_conv2d(
        c(tf, X2), c(tf, DW), c(tf, PW), [1, 1, 1, 1], "VALID", rate=[2, 2]),
    "separable_conv2d_strided": lambda tf: tf.nn.separable_conv2d(
        c(tf, X2), c(tf, DW), c(tf, PW), [1, 2, 2, 1], "SAME", name="sep"),
    "separable_bad_pointwise": lambda tf: tf.nn.separable_conv2d(
        c(tf, X2), c(tf, DW), tf.ones([2, 1, 6, 5]), [1, 1, 1, 1], "SAME"),
    "with_space_to_batch": lambda tf: tf.nn.with_space_to_batch(
        c(tf, X2), [2, 2], "SAME",
        lambda inp, n, pad: tf.nn.max_pool(inp, [1, 2, 2, 1], [1, 1, 1, 1], pad),
        filter_shape=[2, 2]),
    "with_space_to_batch_valid": lambda tf: tf.nn.with_space_to_batch(
        c(tf, X2), [3, 2], "VALID",
        lambda inp, n, pad: tf.nn.conv2d(inp, c(tf, W2), [1, 1, 1, 1], pad)),
}


#: where TF 1.15 differs from the installed TF 2.x
CONV_TF115 = {
    # TF 1.15's conv3d_transpose checked the channels in Python (as conv2d_transpose does)
    "conv3d_transpose_channel_mismatch": dict(
        was="InvalidArgumentError", error_class="ValueError", error_phase="build",
        reason="TF 1.15 conv3d_transpose: input channels does not match filter's"),
}


@pytest.mark.parametrize("name", sorted(CONV))
def test_conv(name):
    run_both(CONV[name], rtol=1e-4, atol=1e-4, tf115=CONV_TF115.get(name))


def _nchw_pair(build_nhwc, build_nchw, rank):
    last_to_first = [0, rank - 1] + list(range(1, rank - 1))
    first_to_last = [0] + list(range(2, rank)) + [1]

    def tf_program(tf):
        return build_nhwc(tf)

    def flowrt_program(tf):
        return tf.transpose(build_nchw(tf, first_to_last), first_to_last)

    return tf_program, flowrt_program, last_to_first


CF = {
    "conv3d_ncdhw": (
        lambda tf: tf.nn.conv3d(c(tf, X3), c(tf, W3), [1, 2, 1, 1, 1], "SAME"),
        lambda tf, _: tf.nn.conv3d(tf.transpose(c(tf, X3), [0, 4, 1, 2, 3]), c(tf, W3),
                                   [1, 1, 2, 1, 1], "SAME", data_format="NCDHW")),
    "conv1d_ncw": (
        lambda tf: tf.nn.conv1d(c(tf, X1), c(tf, W1), 2, "SAME"),
        lambda tf, _: tf.nn.conv1d(tf.transpose(c(tf, X1), [0, 2, 1]), c(tf, W1), 2, "SAME",
                                   data_format="NCW")),
    "depthwise_nchw": (
        lambda tf: tf.nn.depthwise_conv2d_native(c(tf, X2), c(tf, DW), [1, 1, 2, 1], "SAME"),
        lambda tf, _: tf.nn.depthwise_conv2d_native(
            tf.transpose(c(tf, X2), [0, 3, 1, 2]), c(tf, DW), [1, 1, 1, 2], "SAME",
            data_format="NCHW")),
    "max_pool3d_ncdhw": (
        lambda tf: tf.nn.max_pool3d(c(tf, X3), 2, 2, "SAME"),
        lambda tf, _: tf.nn.max_pool3d(tf.transpose(c(tf, X3), [0, 4, 1, 2, 3]), 2, 2, "SAME",
                                       data_format="NCDHW")),
    "avg_pool3d_ncdhw": (
        lambda tf: tf.nn.avg_pool3d(c(tf, X3), [1, 2, 3, 2, 1], [1, 1, 2, 1, 1], "SAME"),
        lambda tf, _: tf.nn.avg_pool3d(tf.transpose(c(tf, X3), [0, 4, 1, 2, 3]),
                                       [1, 1, 2, 3, 2], [1, 1, 1, 2, 1], "SAME",
                                       data_format="NCDHW")),
    "fused_batch_norm_nchw": (
        lambda tf: tf.nn.fused_batch_norm(c(tf, X2), tf.constant([1.0, 2.0, 0.5]),
                                          tf.constant([0.0, 1.0, -1.0]))[0],
        lambda tf, _: tf.nn.fused_batch_norm(tf.transpose(c(tf, X2), [0, 3, 1, 2]),
                                             tf.constant([1.0, 2.0, 0.5]),
                                             tf.constant([0.0, 1.0, -1.0]),
                                             data_format="NCHW")[0]),
    "space_to_depth_nchw": (
        lambda tf: tf.space_to_depth(c(tf, arr((2, 4, 6, 3))), 2),
        lambda tf, _: tf.space_to_depth(tf.transpose(c(tf, arr((2, 4, 6, 3))), [0, 3, 1, 2]),
                                        2, data_format="NCHW")),
    "depth_to_space_nchw": (
        lambda tf: tf.depth_to_space(c(tf, arr((2, 2, 3, 8))), 2),
        lambda tf, _: tf.depth_to_space(tf.transpose(c(tf, arr((2, 2, 3, 8))), [0, 3, 1, 2]),
                                        2, data_format="NCHW")),
}


@pytest.mark.parametrize("name", sorted(CF))
def test_channels_first(name):
    nhwc, nchw = CF[name]

    def flowrt_program(tf):
        y = nchw(tf, None)
        rank = y.shape.ndims
        return tf.transpose(y, [0] + list(range(2, rank)) + [1])

    run_pair(nhwc, flowrt_program, rtol=1e-4, atol=1e-4)


# -- pooling ---------------------------------------------------------------------------------
POOL = {
    "max_pool1d": lambda tf: tf.nn.max_pool1d(c(tf, X1), 2, 2, "SAME"),
    "avg_pool1d": lambda tf: tf.nn.avg_pool1d(c(tf, X1), [3], [2], "SAME"),
    "avg_pool1d_valid": lambda tf: tf.nn.avg_pool1d(c(tf, X1), 3, 1, "VALID", name="ap"),
    "max_pool3d": lambda tf: tf.nn.max_pool3d(c(tf, X3), [1, 2, 2, 2, 1], [1, 2, 2, 2, 1],
                                              "VALID"),
    "max_pool3d_same": lambda tf: tf.nn.max_pool3d(c(tf, X3), 3, [1, 2, 1, 2, 1], "SAME"),
    "avg_pool3d": lambda tf: tf.nn.avg_pool3d(c(tf, X3), 2, 2, "SAME"),
    "avg_pool3d_float64": lambda tf: tf.nn.avg_pool3d(c(tf, X3, tf.float64), 3, 1, "VALID"),
    "max_pool3d_float64": lambda tf: tf.nn.max_pool3d(c(tf, X3, tf.float64), 3, 1, "VALID"),
    "max_pool3d_too_big": lambda tf: tf.nn.max_pool3d(c(tf, X3), 6, 1, "VALID"),
    "max_pool3d_bad_rank": lambda tf: tf.nn.max_pool3d(c(tf, X2), 2, 1, "VALID"),
    "avg_pool3d_depth": lambda tf: tf.nn.avg_pool3d(c(tf, X3), [1, 1, 1, 1, 2],
                                                    [1, 1, 1, 1, 2], "VALID"),
    "max_pool_v2_1d": lambda tf: tf.nn.max_pool_v2(c(tf, X1), 2, 1, "VALID"),
    "max_pool_v2_2d": lambda tf: tf.nn.max_pool_v2(c(tf, X2), [2, 3], [1, 2], "SAME"),
    "max_pool_v2_3d": lambda tf: tf.nn.max_pool_v2(c(tf, X3), 2, 2, "SAME"),
    "avg_pool_v2_1d": lambda tf: tf.nn.avg_pool_v2(c(tf, X1), 3, 2, "SAME"),
    "avg_pool_v2_2d": lambda tf: tf.nn.avg_pool_v2(c(tf, X2), 2, 2, "VALID"),
    "avg_pool_v2_3d": lambda tf: tf.nn.avg_pool_v2(c(tf, X3), [2, 1, 2], 1, "SAME"),
    "pool_max_1d": lambda tf: tf.nn.pool(c(tf, X1), [2], "MAX", "SAME", strides=[2]),
    "pool_avg_2d": lambda tf: tf.nn.pool(c(tf, X2), [2, 2], "AVG", "VALID"),
    "pool_max_2d_dilated": lambda tf: tf.nn.pool(c(tf, X2), [2, 2], "MAX", "VALID",
                                                 dilation_rate=[2, 2]),
    "pool_avg_1d_dilated": lambda tf: tf.nn.pool(c(tf, X1), [2], "AVG", "VALID",
                                                 dilation_rate=[3]),
    "pool_max_3d": lambda tf: tf.nn.pool(c(tf, X3), [2, 2, 2], "MAX", "SAME",
                                         strides=[2, 2, 2]),
    "pool_avg_3d_dilated": lambda tf: tf.nn.pool(c(tf, X3), [2, 2, 1], "AVG", "VALID",
                                                 dilation_rate=[2, 1, 1], name="p3"),
    "pool_same_dilated": lambda tf: tf.nn.pool(c(tf, X2), [2, 2], "MAX", "SAME",
                                               dilation_rate=[2, 2]),
    "pool_strides_gt_window": lambda tf: tf.nn.pool(c(tf, X2), [2, 2], "MAX", "VALID",
                                                    strides=[3, 3]),
    "pool_bad_type": lambda tf: tf.nn.pool(c(tf, X2), [2, 2], "MIN", "VALID"),
    "max_pool_with_argmax": lambda tf: tf.nn.max_pool_with_argmax(
        c(tf, X2), [1, 2, 2, 1], [1, 2, 2, 1], "SAME"),
    "max_pool_with_argmax_batch": lambda tf: tf.nn.max_pool_with_argmax(
        c(tf, X2), [1, 3, 3, 1], [1, 2, 1, 1], "VALID", include_batch_in_index=True),
    "max_pool_with_argmax_int32": lambda tf: tf.nn.max_pool_with_argmax(
        c(tf, X2), [1, 2, 2, 1], [1, 1, 1, 1], "SAME", Targmax=tf.int32).argmax,
    "max_pool_with_argmax_nchw": lambda tf: tf.nn.max_pool_with_argmax(
        c(tf, X2), [1, 2, 2, 1], [1, 1, 1, 1], "SAME", data_format="NCHW"),
    "dilation2d_same": lambda tf: tf.nn.dilation2d(c(tf, X2), c(tf, arr((2, 3, 3), seed=9)),
                                                   [1, 1, 1, 1], [1, 1, 1, 1], "SAME"),
    "dilation2d_valid_rates": lambda tf: tf.nn.dilation2d(
        c(tf, X2), c(tf, arr((2, 2, 3), seed=9)), [1, 2, 1, 1], [1, 2, 2, 1], "VALID"),
    "erosion2d": lambda tf: tf.nn.erosion2d(c(tf, X2), c(tf, arr((2, 3, 3), seed=9)),
                                            [1, 1, 1, 1], [1, 1, 1, 1], "SAME"),
    "erosion2d_valid": lambda tf: tf.nn.erosion2d(c(tf, X2), c(tf, arr((2, 2, 3), seed=9)),
                                                  [1, 1, 2, 1], [1, 2, 1, 1], "VALID",
                                                  name="ero"),
    "dilation2d_mismatch": lambda tf: tf.nn.dilation2d(c(tf, X2), tf.ones([2, 2, 2]),
                                                       [1, 1, 1, 1], [1, 1, 1, 1], "SAME"),
}


@pytest.mark.parametrize("program", _progs(POOL))
def test_pool(program):
    run_both(program, rtol=1e-5, atol=1e-5)


# -- normalisation ---------------------------------------------------------------------------
SCALE = [1.0, 2.0, 0.5]
OFFSET = [0.0, 1.0, -1.0]
MEAN = [0.1, -0.2, 0.3]
VAR = [1.0, 0.5, 2.0]

NORM = {
    "fused_bn_train": lambda tf: tf.nn.fused_batch_norm(c(tf, X2), c(tf, SCALE),
                                                        c(tf, OFFSET)),
    "fused_bn_train_eps": lambda tf: tf.nn.fused_batch_norm(
        c(tf, X2), c(tf, SCALE), c(tf, OFFSET), epsilon=0.1, name="bn"),
    # fed: TF 2.x's constant folding of an inference FusedBatchNormV3 fails (OutOfRange)
    "fused_bn_infer": lambda tf: (lambda x, m, v: Run(tf.nn.fused_batch_norm(
        x, c(tf, SCALE), c(tf, OFFSET), m, v, is_training=False),
        {x: X2, m: MEAN, v: VAR}))(tf.placeholder(tf.float32, [2, 8, 7, 3]),
                                   tf.placeholder(tf.float32, [3]),
                                   tf.placeholder(tf.float32, [3])),
    "fused_bn_infer_no_mean": lambda tf: tf.nn.fused_batch_norm(
        c(tf, X2), c(tf, SCALE), c(tf, OFFSET), is_training=False),
    "fused_bn_half": lambda tf: tf.nn.fused_batch_norm(
        c(tf, X2, tf.float16), c(tf, SCALE), c(tf, OFFSET)),
    "fused_bn_5d": lambda tf: tf.nn.fused_batch_norm(
        c(tf, X3), c(tf, SCALE), c(tf, OFFSET), data_format="NDHWC"),
    "fused_bn_bad_rank": lambda tf: tf.nn.fused_batch_norm(c(tf, X1), c(tf, SCALE),
                                                           c(tf, OFFSET)),
    "fused_bn_bad_scale": lambda tf: tf.nn.fused_batch_norm(c(tf, X2), c(tf, [1.0, 2.0]),
                                                            c(tf, OFFSET)),
    "fused_bn_float64": lambda tf: tf.nn.fused_batch_norm(c(tf, X2, tf.float64),
                                                          c(tf, SCALE), c(tf, OFFSET)),
    "fused_bn_unknown": lambda tf: (lambda x: Run(tf.nn.fused_batch_norm(
        x, c(tf, SCALE), c(tf, OFFSET)), {x: X2}))(tf.placeholder(tf.float32,
                                                                  [None, None, None, 3])),
    "bn_global_scaled": lambda tf: tf.nn.batch_norm_with_global_normalization(
        c(tf, X2), c(tf, MEAN), c(tf, VAR), c(tf, OFFSET), c(tf, SCALE), 0.001, True),
    "bn_global_unscaled": lambda tf: tf.nn.batch_norm_with_global_normalization(
        t=c(tf, X2), m=c(tf, MEAN), v=c(tf, VAR), beta=c(tf, OFFSET), gamma=c(tf, SCALE),
        variance_epsilon=0.01, scale_after_normalization=False, name="bng"),
    "lrn_default": lambda tf: tf.nn.lrn(c(tf, arr((2, 3, 3, 12)))),
    "lrn_params": lambda tf: tf.nn.local_response_normalization(
        c(tf, arr((2, 3, 3, 7))), depth_radius=2, bias=2.0, alpha=0.5, beta=0.75),
    "lrn_half": lambda tf: tf.nn.lrn(c(tf, arr((1, 2, 2, 5)), tf.float16), 1),
    "lrn_bad_rank": lambda tf: tf.nn.lrn(c(tf, arr((2, 3, 5))), 1),
    "lrn_float64": lambda tf: tf.nn.lrn(c(tf, arr((2, 3, 5, 2)), tf.float64), 1),
    "sufficient_statistics": lambda tf: tf.nn.sufficient_statistics(c(tf, X2), [0, 1, 2])[:3],
    "sufficient_statistics_shift": lambda tf: tf.nn.sufficient_statistics(
        c(tf, X2), [1, 2], shift=c(tf, 0.5), keep_dims=True),
    "sufficient_statistics_unknown": lambda tf: (lambda x: Run(
        tf.nn.sufficient_statistics(x, [0, 1])[:3], {x: X2[0]}))(
        tf.placeholder(tf.float32, [None, None, 3])),
    "normalize_moments": lambda tf: tf.nn.normalize_moments(
        *tf.nn.sufficient_statistics(c(tf, X2), [0, 1, 2])),
    "normalize_moments_shift": lambda tf: tf.nn.normalize_moments(
        *tf.nn.sufficient_statistics(c(tf, X2), [0, 1, 2], shift=c(tf, [0.1, 0.2, 0.3]))),
    "weighted_moments": lambda tf: tf.nn.weighted_moments(
        c(tf, X2), [0, 1, 2], c(tf, arr((2, 8, 7, 1), lo=0.0, hi=1.0))),
    "weighted_moments_keep": lambda tf: tf.nn.weighted_moments(
        c(tf, X2), [1], c(tf, 2.0), keep_dims=True, name="wm"),
    "weighted_moments_half": lambda tf: tf.nn.weighted_moments(
        c(tf, X2, tf.float16), [0, 1, 2], c(tf, 1.0)),
}


@pytest.mark.parametrize("program", _progs(NORM))
def test_norm(program):
    run_both(program, rtol=2e-3, atol=2e-3)


def test_fused_batch_norm_min_epsilon():
    """TF 1.15 raises epsilon to 1.001e-5 in Python (TF 2.x no longer does): compare
    flowrt with epsilon=1e-8 against TF given 1.001e-5."""
    def prog(eps):
        return lambda tf: tf.nn.fused_batch_norm(c(tf, X2 * 1e-3), c(tf, SCALE),
                                                 c(tf, OFFSET), epsilon=eps)
    run_pair(prog(1.001e-5), prog(1e-8), rtol=1e-5, atol=1e-5)


# -- space ops -------------------------------------------------------------------------------
SPACE = {
    "space_to_depth": lambda tf: tf.space_to_depth(c(tf, arr((2, 4, 6, 3))), 2),
    "nn_space_to_depth": lambda tf: tf.nn.space_to_depth(c(tf, arr((1, 6, 6, 2))), 3),
    "space_to_depth_int": lambda tf: tf.space_to_depth(tf.constant(np.arange(32).reshape(
        1, 4, 4, 2), tf.int32), 2),
    "space_to_depth_indivisible": lambda tf: tf.space_to_depth(c(tf, arr((2, 5, 6, 3))), 2),
    "space_to_depth_bad_block": lambda tf: tf.space_to_depth(c(tf, arr((2, 4, 6, 3))), 1),
    "depth_to_space": lambda tf: tf.depth_to_space(c(tf, arr((2, 2, 3, 8))), 2),
    "nn_depth_to_space": lambda tf: tf.nn.depth_to_space(c(tf, arr((1, 2, 2, 18))), 3,
                                                         name="d2s"),
    "depth_to_space_indivisible": lambda tf: tf.depth_to_space(c(tf, arr((2, 2, 3, 6))), 2),
    "space_to_batch": lambda tf: tf.space_to_batch(c(tf, arr((2, 4, 5, 3))), [[0, 0], [1, 0]],
                                                   2),
    "nn_space_to_batch": lambda tf: tf.nn.space_to_batch(c(tf, arr((1, 4, 4, 1))),
                                                         [[1, 1], [1, 1]], block_size=3),
    "space_to_batch_block_shape_kw": lambda tf: tf.space_to_batch(
        c(tf, arr((1, 4, 4, 1))), [[0, 0], [0, 0]], block_shape=2),
    "batch_to_space": lambda tf: tf.batch_to_space(c(tf, arr((8, 2, 3, 3))), [[0, 1], [1, 0]],
                                                   2),
    "space_to_batch_nd_1d": lambda tf: tf.space_to_batch_nd(c(tf, arr((2, 6, 3))), [3],
                                                            [[1, 2]]),
    "space_to_batch_nd_rest": lambda tf: tf.space_to_batch_nd(c(tf, arr((2, 4, 6, 2, 3))),
                                                              [2, 3], [[0, 2], [0, 0]]),
    "space_to_batch_nd_int64": lambda tf: tf.space_to_batch_nd(
        c(tf, arr((1, 4, 4, 1))), tf.constant([2, 2], tf.int64),
        tf.constant([[0, 0], [0, 0]], tf.int64)),
    "space_to_batch_nd_bad": lambda tf: tf.space_to_batch_nd(c(tf, arr((2, 5, 3))), [2],
                                                             [[0, 0]]),
    "space_to_batch_nd_fed": lambda tf: (lambda b, p: Run(tf.space_to_batch_nd(
        c(tf, arr((2, 4, 6, 3))), b, p), {b: [2, 3], p: [[1, 1], [0, 0]]}))(
        tf.placeholder(tf.int32, [2]), tf.placeholder(tf.int32, [2, 2])),
    "space_to_batch_nd_fed_bad": lambda tf: (lambda b, p: Run(tf.space_to_batch_nd(
        c(tf, arr((2, 4, 6, 3))), b, p), {b: [2, 5], p: [[1, 1], [0, 0]]}))(
        tf.placeholder(tf.int32, [2]), tf.placeholder(tf.int32, [2, 2])),
    "batch_to_space_nd": lambda tf: tf.batch_to_space_nd(c(tf, arr((12, 2, 3, 2))), [2, 3],
                                                         [[0, 1], [2, 0]]),
    "batch_to_space_nd_bad_batch": lambda tf: tf.batch_to_space_nd(
        c(tf, arr((5, 2, 3, 2))), [2, 2], [[0, 0], [0, 0]]),
    "required_paddings": lambda tf: tf.required_space_to_batch_paddings([5, 7], [2, 3]),
    "required_paddings_base": lambda tf: tf.required_space_to_batch_paddings(
        [5, 7], [2, 3], base_paddings=[[1, 1], [0, 2]]),
    "required_paddings_fed": lambda tf: (lambda s: Run(tf.required_space_to_batch_paddings(
        s, [2, 3], base_paddings=[[1, 0], [0, 1]]), {s: [5, 7]}))(
        tf.placeholder(tf.int32, [2])),
}


@pytest.mark.parametrize("program", _progs(SPACE))
def test_space(program):
    run_both(program)


# -- small composites ------------------------------------------------------------------------
MISC = {
    "silu": lambda tf: tf.nn.silu(c(tf, [-2.0, 0.0, 1.5])),
    "compute_average_loss": lambda tf: tf.nn.compute_average_loss(c(tf, [1.0, 2.0, 3.0])),
    "compute_average_loss_gbs": lambda tf: tf.nn.compute_average_loss(
        c(tf, [[1.0, 2.0], [3.0, 4.0]]), global_batch_size=8),
    "compute_average_loss_weights": lambda tf: tf.nn.compute_average_loss(
        c(tf, [1.0, 2.0, 3.0]), sample_weight=c(tf, [1.0, 0.0, 2.0])),
    "scale_regularization_loss": lambda tf: tf.nn.scale_regularization_loss(
        c(tf, [0.5, 1.5])),
}


@pytest.mark.parametrize("program", _progs(MISC))
def test_misc(program):
    run_both(program, static=False)


# -- gradients -------------------------------------------------------------------------------
def _grads(build, *vals, dtype="float32"):
    """d(sum(build(xs) * weights))/dxs for constant inputs ``vals``."""
    def program(tf):
        xs = [tf.constant(v, getattr(tf, dtype)) for v in vals]
        y = build(tf, *xs)
        w = tf.constant(arr(tuple(y.shape.as_list()), seed=11), y.dtype)
        return tf.gradients(tf.reduce_sum(y * w), xs)
    return program


GRADS = {
    "conv3d": _grads(lambda tf, x, w: tf.nn.conv3d(x, w, [1, 2, 1, 1, 1], "SAME"), X3, W3),
    "conv3d_transpose": _grads(lambda tf, x, w: tf.nn.conv3d_transpose(
        x, w, [2, 5, 6, 4, 3], [1, 2, 2, 2, 1], "SAME"), arr((2, 3, 3, 2, 4)), W3),
    "conv1d": _grads(lambda tf, x, w: tf.nn.conv1d(x, w, 2, "VALID"), X1, W1),
    "depthwise": _grads(lambda tf, x, w: tf.nn.depthwise_conv2d(x, w, [1, 2, 2, 1], "SAME"),
                        X2, DW),
    "depthwise_rate": _grads(lambda tf, x, w: tf.nn.depthwise_conv2d(
        x, w, [1, 1, 1, 1], "SAME", rate=[2, 2]), X2, DW),
    "separable": _grads(lambda tf, x, d, p: tf.nn.separable_conv2d(
        x, d, p, [1, 1, 1, 1], "VALID"), X2, DW, PW),
    "atrous": _grads(lambda tf, x, w: tf.nn.atrous_conv2d(x, w, 2, "SAME"), X2, W2),
    "max_pool3d": _grads(lambda tf, x: tf.nn.max_pool3d(x, 2, 2, "SAME"), X3),
    "avg_pool3d": _grads(lambda tf, x: tf.nn.avg_pool3d(x, 2, 1, "SAME"), X3),
    "avg_pool3d_float64": _grads(lambda tf, x: tf.nn.avg_pool3d(x, [1, 2, 3, 1, 1], 1,
                                                                "VALID"), X3, dtype="float64"),
    "max_pool_with_argmax": _grads(lambda tf, x: tf.nn.max_pool_with_argmax(
        x, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")[0], X2),
    "dilation2d": _grads(lambda tf, x, w: tf.nn.dilation2d(
        x, w, [1, 1, 1, 1], [1, 2, 1, 1], "SAME"), X2, arr((2, 2, 3), seed=9)),
    "erosion2d": _grads(lambda tf, x, w: tf.nn.erosion2d(
        x, w, [1, 1, 1, 1], [1, 1, 1, 1], "VALID"), X2, arr((2, 2, 3), seed=9)),
    "fused_bn_train": _grads(lambda tf, x, s, o: tf.nn.fused_batch_norm(x, s, o)[0],
                             X2, SCALE, OFFSET),
    "fused_bn_infer": _grads(lambda tf, x, s, o: tf.nn.fused_batch_norm(
        x, s, o, tf.constant(MEAN), tf.constant(VAR), is_training=False)[0],
        X2, SCALE, OFFSET),
    "lrn": _grads(lambda tf, x: tf.nn.lrn(x, 2, 1.5, 0.3, 0.6), arr((2, 3, 3, 6))),
    "space_to_depth": _grads(lambda tf, x: tf.space_to_depth(x, 2), arr((2, 4, 6, 3))),
    "depth_to_space": _grads(lambda tf, x: tf.depth_to_space(x, 2), arr((2, 2, 3, 8))),
    "space_to_batch_nd": _grads(lambda tf, x: tf.space_to_batch_nd(
        x, [2, 3], [[1, 1], [0, 0]]), arr((2, 4, 6, 3))),
    "batch_to_space": _grads(lambda tf, x: tf.batch_to_space(
        x, [[0, 1], [1, 0]], 2), arr((8, 2, 3, 3))),
}


@pytest.mark.parametrize("program", _progs(GRADS))
def test_gradients(program):
    run_both(program, rtol=1e-3, atol=1e-3, static_keys=("kind", "dtype", "shape"))


# -- fractional pooling: random sequences differ (TF's Philox vs numpy), so compare
# -- dtypes and shapes, and check each implementation's output against its own sequences
def _frac_check(mode, overlapping):
    def check(tf, results):
        out, rows, cols = results[0]
        x = X2.astype(np.float64)
        assert rows[0] == 0 and rows[-1] == x.shape[1] and cols[-1] == x.shape[2]
        assert set(np.diff(rows)) <= {1, 2} and set(np.diff(cols)) <= {1, 2}
        extra = 1 if overlapping else 0
        for i in range(len(rows) - 1):
            for j in range(len(cols) - 1):
                win = x[:, rows[i]:rows[i + 1] + extra, cols[j]:cols[j + 1] + extra]
                want = win.max((1, 2)) if mode == "max" else win.mean((1, 2))
                np.testing.assert_allclose(out[:, i, j], want, rtol=1e-5, atol=1e-5)
    return check


@pytest.mark.parametrize("overlapping", [False, True])
@pytest.mark.parametrize("pseudo_random", [False, True])
@pytest.mark.parametrize("mode", ["max", "avg"])
def test_fractional_pool(mode, pseudo_random, overlapping):
    def program(tf):
        fn = tf.nn.fractional_max_pool if mode == "max" else tf.nn.fractional_avg_pool
        return fn(c(tf, X2), [1.0, 1.44, 1.73, 1.0], pseudo_random, overlapping,
                  deterministic=True, seed=1, seed2=2)

    run_both(program, values=False, check=_frac_check(mode, overlapping))


def test_fractional_pool_gradient_shapes():
    def program(tf):
        x = c(tf, X2)
        o = tf.nn.fractional_max_pool(x, [1.0, 2.0, 2.0, 1.0])[0]
        a = tf.nn.fractional_avg_pool(x, [1.0, 1.5, 1.5, 1.0], overlapping=True)[0]
        return tf.gradients(tf.reduce_sum(o) + tf.reduce_sum(a), x)[0]

    # the gradient's sum is the number of outputs, whatever the sequences
    run_both(program, values=False, static_keys=("kind", "dtype", "shape"),
             check=lambda tf, r: np.testing.assert_allclose(r[0].sum(), 2 * 4 * 3 * 3 +
                                                            2 * 5 * 4 * 3, rtol=1e-5))
