"""tf.image programs: resize ops under every corner rule, crops and pads, flips, colour
conversions and adjustments, box ops (NMS, crop_and_resize), quality metrics, codecs.

Tolerances: the resize, crop and colour kernels compute in float32 in TF's order, so most
results agree to float32 rounding (rtol 1e-5); sums over many pixels (area resize,
ssim, psnr, per-image standardisation) may round differently (rtol 1e-4); JPEG decoding
goes through a different libjpeg build than TF's, so decoded pixels may differ by a few
levels (atol 3 on uint8, see docs/api/image.md).
"""
from __future__ import annotations

import numpy as np
import pytest

from compat_harness import Run, run_both

RNG = np.random.default_rng(1234)
IMG = RNG.uniform(0, 255, (2, 5, 7, 3)).astype(np.float32)
IMG_U8 = RNG.integers(0, 256, (2, 5, 7, 3)).astype(np.uint8)
SMALL = np.arange(1 * 3 * 4 * 1, dtype=np.float32).reshape(1, 3, 4, 1) * 10


def _progs(d: dict) -> list:
    return [pytest.param(v, id=k) for k, v in sorted(d.items())]


# -- resize ops with every corner rule --------------------------------------------------------
RESIZE_OPS = ["resize_bilinear", "resize_nearest_neighbor", "resize_bicubic"]
SIZES = [(3, 4), (5, 9), (2, 3), (1, 1), (10, 14), (7, 2), (1, 5)]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("rule", ["legacy", "align_corners", "half_pixel"])
@pytest.mark.parametrize("fn", RESIZE_OPS)
def test_resize_rules(fn, rule, size):
    kw = {"align_corners": rule == "align_corners", "half_pixel_centers": rule == "half_pixel"}

    def program(tf):
        return getattr(tf.image, fn)(tf.constant(IMG), size, **kw)

    run_both(program, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("align", [False, True])
def test_resize_area(size, align):
    run_both(lambda tf: tf.image.resize_area(tf.constant(IMG), size, align_corners=align),
             rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", ["uint8", "int32", "float64", "float16"])
@pytest.mark.parametrize("fn", RESIZE_OPS + ["resize_area"])
def test_resize_dtypes(fn, dtype):
    def program(tf):
        return getattr(tf.image, fn)(tf.constant(IMG_U8.astype(dtype)), [4, 9])

    run_both(program, rtol=1e-5, atol=1e-3)


# -- resize_images front end, crops, pads, flips ------------------------------------------------
def _ph(tf, shape, dtype="float32"):
    return tf.placeholder(getattr(tf, dtype), shape)


GEOMETRY = {
    "resize_images_bilinear": lambda tf: tf.image.resize_images(tf.constant(IMG), [4, 9]),
    "resize_images_nn_3d": lambda tf: tf.image.resize_images(tf.constant(IMG[0]), [4, 9],
                                                             method=1),
    "resize_images_bicubic_ac": lambda tf: tf.image.resize_images(
        tf.constant(IMG), [8, 3], method=tf.image.ResizeMethod.BICUBIC, align_corners=True),
    "resize_images_area": lambda tf: tf.image.resize_images(tf.constant(IMG), [2, 3], method=3),
    "resize_images_same": lambda tf: tf.image.resize_images(tf.constant(IMG), [5, 7]),
    "resize_images_bad_method": lambda tf: tf.image.resize_images(tf.constant(IMG), [2, 2],
                                                                  method=7),
    "resize_images_bad_rank": lambda tf: tf.image.resize_images(tf.constant([1.0, 2.0]),
                                                                [2, 2]),
    "resize_images_bad_size": lambda tf: tf.image.resize_images(tf.constant(IMG), [2, 2, 2]),
    "resize_images_dynamic": lambda tf: (lambda x: Run(tf.image.resize_images(x, [3, 3]),
                                                       {x: IMG}))(_ph(tf, [None, None, None, 3])),
    "resize_alias": lambda tf: tf.image.resize(tf.constant(IMG), [3, 3]),
    "flip_lr": lambda tf: tf.image.flip_left_right(tf.constant(IMG)),
    "flip_ud_3d": lambda tf: tf.image.flip_up_down(tf.constant(IMG[0])),
    "flip_bad_rank": lambda tf: tf.image.flip_up_down(tf.constant(IMG[0, 0])),
    "flip_unknown_rank": lambda tf: (lambda x: Run(tf.image.flip_left_right(x), {x: IMG[0]}))(
        _ph(tf, None)),
    "rot90_k1": lambda tf: tf.image.rot90(tf.constant(IMG[0])),
    "rot90_k2_4d": lambda tf: tf.image.rot90(tf.constant(IMG), k=2),
    "rot90_k3": lambda tf: tf.image.rot90(tf.constant(IMG), k=3),
    "rot90_k_neg": lambda tf: tf.image.rot90(tf.constant(IMG[0]), k=-1),
    "transpose": lambda tf: tf.image.transpose(tf.constant(IMG)),
    "transpose_image": lambda tf: tf.image.transpose_image(tf.constant(IMG[0])),
    "central_crop": lambda tf: tf.image.central_crop(tf.constant(IMG), 0.5),
    "central_crop_3d": lambda tf: tf.image.central_crop(tf.constant(IMG[0]), 0.7),
    "central_crop_one": lambda tf: tf.image.central_crop(tf.constant(IMG[0]), 1.0),
    "central_crop_bad": lambda tf: tf.image.central_crop(tf.constant(IMG[0]), 1.5),
    "pad_to_bb": lambda tf: tf.image.pad_to_bounding_box(tf.constant(IMG), 1, 2, 8, 10),
    "pad_to_bb_3d": lambda tf: tf.image.pad_to_bounding_box(tf.constant(IMG[0]), 0, 0, 5, 8),
    "pad_to_bb_bad": lambda tf: tf.image.pad_to_bounding_box(tf.constant(IMG[0]), 1, 2, 5, 8),
    "pad_to_bb_dynamic": lambda tf: (lambda x: Run(tf.image.pad_to_bounding_box(x, 1, 1, 7, 9),
                                                   {x: IMG[0]}))(_ph(tf, [None, None, 3])),
    "crop_to_bb": lambda tf: tf.image.crop_to_bounding_box(tf.constant(IMG), 1, 2, 3, 4),
    "crop_to_bb_3d": lambda tf: tf.image.crop_to_bounding_box(tf.constant(IMG[0]), 0, 3, 5, 4),
    "crop_to_bb_bad": lambda tf: tf.image.crop_to_bounding_box(tf.constant(IMG[0]), 3, 3, 5, 4),
    "crop_to_bb_dynamic_bad": lambda tf: (lambda x: Run(
        tf.image.crop_to_bounding_box(x, 3, 3, 5, 4), {x: IMG[0]}))(_ph(tf, [None, None, 3])),
    "crop_or_pad_bigger": lambda tf: tf.image.resize_image_with_crop_or_pad(
        tf.constant(IMG), 8, 10),
    "crop_or_pad_smaller": lambda tf: tf.image.resize_image_with_crop_or_pad(
        tf.constant(IMG[0]), 2, 3),
    "crop_or_pad_mixed": lambda tf: tf.image.resize_with_crop_or_pad(tf.constant(IMG), 9, 4),
    "resize_with_pad": lambda tf: tf.image.resize_image_with_pad(tf.constant(IMG), 9, 9),
    "resize_with_pad_nn": lambda tf: tf.image.resize_image_with_pad(tf.constant(IMG[0]), 4, 12,
                                                                    method=1),
}


@pytest.mark.parametrize("program", _progs(GEOMETRY))
def test_geometry(program):
    run_both(program, rtol=1e-5, atol=1e-3)


def test_resize_preserve_aspect_ratio():
    # TF 2.x's constant_value evaluates the size computation at build time (static shape
    # [2, 7, 10, 3]); TF 1.15's did not (static [2, ?, ?, 3], as flowrt): values only.
    run_both(lambda tf: tf.image.resize_images(tf.constant(IMG), [10, 10],
                                               preserve_aspect_ratio=True),
             rtol=1e-5, atol=1e-3, static_keys=("kind", "dtype", "name", "op_type"))


# -- colour -------------------------------------------------------------------------------
RGB01 = RNG.uniform(0, 1, (2, 4, 5, 3)).astype(np.float32)
RGB01[0, 0, 0] = [0.5, 0.5, 0.5]          # grey: hue 0
RGB01[0, 0, 1] = [0.0, 0.0, 0.0]          # black
RGB01[0, 0, 2] = [1.0, 0.2, 0.2]          # red max
RGB01[0, 0, 3] = [0.2, 0.9, 0.9]          # green == blue max
HSV01 = RNG.uniform(0, 1, (3, 4, 3)).astype(np.float32)

COLOR = {
    "rgb_to_hsv": lambda tf: tf.image.rgb_to_hsv(tf.constant(RGB01)),
    "rgb_to_hsv_f64": lambda tf: tf.image.rgb_to_hsv(tf.constant(RGB01.astype(np.float64))),
    "hsv_to_rgb": lambda tf: tf.image.hsv_to_rgb(tf.constant(HSV01)),
    "hsv_bad_channels": lambda tf: tf.image.hsv_to_rgb(tf.constant(HSV01[..., :2])),
    "grayscale": lambda tf: tf.image.rgb_to_grayscale(tf.constant(RGB01)),
    "grayscale_u8": lambda tf: tf.image.rgb_to_grayscale(tf.constant(IMG_U8)),
    "gray_to_rgb": lambda tf: tf.image.grayscale_to_rgb(tf.constant(RGB01[..., :1])),
    "gray_to_rgb_bad": lambda tf: tf.image.grayscale_to_rgb(tf.constant(RGB01)),
    "yiq": lambda tf: tf.image.rgb_to_yiq(tf.constant(RGB01)),
    "yiq_back": lambda tf: tf.image.yiq_to_rgb(tf.image.rgb_to_yiq(tf.constant(RGB01))),
    "yuv": lambda tf: tf.image.rgb_to_yuv(tf.constant(RGB01)),
    "yuv_back": lambda tf: tf.image.yuv_to_rgb(tf.constant(RGB01)),
    "brightness": lambda tf: tf.image.adjust_brightness(tf.constant(RGB01), 0.3),
    "brightness_u8": lambda tf: tf.image.adjust_brightness(tf.constant(IMG_U8), 0.3),
    "contrast": lambda tf: tf.image.adjust_contrast(tf.constant(RGB01), 1.7),
    "contrast_u8": lambda tf: tf.image.adjust_contrast(tf.constant(IMG_U8), 0.6),
    "contrast_3d": lambda tf: tf.image.adjust_contrast(tf.constant(RGB01[0]), 2.0),
    "gamma": lambda tf: tf.image.adjust_gamma(tf.constant(RGB01), 2.2, 0.9),
    "gamma_u8": lambda tf: tf.image.adjust_gamma(tf.constant(IMG_U8), 0.5),
    "gamma_negative": lambda tf: tf.image.adjust_gamma(tf.constant(RGB01), -1.0),
    "hue": lambda tf: tf.image.adjust_hue(tf.constant(RGB01), 0.2),
    "hue_negative": lambda tf: tf.image.adjust_hue(tf.constant(RGB01), -0.45),
    "hue_u8": lambda tf: tf.image.adjust_hue(tf.constant(IMG_U8), 0.1),
    "saturation": lambda tf: tf.image.adjust_saturation(tf.constant(RGB01), 0.4),
    "saturation_up": lambda tf: tf.image.adjust_saturation(tf.constant(RGB01), 3.0),
    "saturation_u8": lambda tf: tf.image.adjust_saturation(tf.constant(IMG_U8), 1.5),
    "standardization": lambda tf: tf.image.per_image_standardization(tf.constant(IMG)),
    "standardization_u8": lambda tf: tf.image.per_image_standardization(tf.constant(IMG_U8[0])),
    "standardization_const": lambda tf: tf.image.per_image_standardization(tf.ones([2, 2, 1])),
    "total_variation": lambda tf: tf.image.total_variation(tf.constant(IMG)),
    "total_variation_3d": lambda tf: tf.image.total_variation(tf.constant(IMG[0])),
    "image_gradients": lambda tf: tf.image.image_gradients(tf.constant(IMG)),
    "sobel": lambda tf: tf.image.sobel_edges(tf.constant(IMG)),
    "psnr": lambda tf: tf.image.psnr(tf.constant(RGB01), tf.constant(RGB01 * 0.9), 1.0),
    "psnr_u8": lambda tf: tf.image.psnr(tf.constant(IMG_U8), tf.constant(IMG_U8 // 2), 255),
    "ssim": lambda tf: tf.image.ssim(tf.constant(np.tile(RGB01, (1, 4, 3, 1))),
                                     tf.constant(np.tile(RGB01 ** 2, (1, 4, 3, 1))), 1.0),
    "ssim_small_filter": lambda tf: tf.image.ssim(tf.constant(RGB01), tf.constant(RGB01 * 0.5),
                                                  1.0, filter_size=3),
}


@pytest.mark.parametrize("program", _progs(COLOR))
def test_color(program):
    run_both(program, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("src", ["uint8", "uint16", "int8", "int32", "float16", "float32",
                                 "float64"])
@pytest.mark.parametrize("dst", ["uint8", "uint16", "int16", "int32", "float32", "float64"])
@pytest.mark.parametrize("saturate", [False, True])
def test_convert_image_dtype(src, dst, saturate):
    with np.errstate(over="ignore"):
        inexact = (src.startswith("float") and not dst.startswith("float")
                   and float(np.array(np.iinfo(dst).max).astype(src)) != np.iinfo(dst).max)
    if saturate and inexact:
        # TF 2.x's saturate_cast clamps to the largest value of the source type that the
        # cast keeps in range; TF 1.15's (and flowrt's tf.saturate_cast) clamps to
        # dtype.max rounded into the source type, which may overflow the cast.
        pytest.skip("saturate_cast bound differs between TF 1.15 and TF 2.x")
    if src.startswith("float"):
        vals = np.array([0.0, 0.25, 0.5, 0.999, 1.0, 1.2, -0.1], src)
    else:
        info = np.iinfo(src)
        vals = np.array([0, 1, 7, info.max // 2, info.max, max(info.min, 0)], src)

    def program(tf):
        return tf.image.convert_image_dtype(tf.constant(vals), getattr(tf, dst),
                                            saturate=saturate)

    run_both(program, rtol=1e-3 if "float16" in (src, dst) else 1e-6)


def test_ssim_multiscale():
    a = RNG.uniform(0, 1, (1, 176, 176, 1)).astype(np.float32)
    b = np.clip(a + RNG.normal(0, 0.1, a.shape), 0, 1).astype(np.float32)
    run_both(lambda tf: tf.image.ssim_multiscale(tf.constant(a), tf.constant(b), 1.0),
             rtol=1e-3, atol=1e-5)


# -- boxes: NMS, crop_and_resize, draw, glimpse, patches ------------------------------------
BOXES = np.array([[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11],
                  [0, 10.1, 1, 11.1], [0, 100, 1, 101], [1, 1, 0, 0], [0, 0, 0, 0]],
                 np.float32)
SCORES = np.array([0.9, 0.75, 0.6, 0.95, 0.5, 0.3, 0.8, 0.85], np.float32)
CB = RNG.uniform(0, 1, (2, 6, 1, 4)).astype(np.float32)
CB = np.concatenate([np.minimum(CB[..., :2], CB[..., 2:]), np.maximum(CB[..., :2],
                                                                      CB[..., 2:])], -1)
CS = RNG.uniform(0, 1, (2, 6, 3)).astype(np.float32)
CROP_BOXES = np.array([[0, 0, 1, 1], [0.1, 0.2, 0.7, 0.9], [-0.2, 0.5, 1.3, 1.1],
                       [0.5, 0.5, 0.5, 0.5], [0.9, 0.8, 0.1, 0.3]], np.float32)

BOX_PROGRAMS = {
    "nms": lambda tf: tf.image.non_max_suppression(BOXES, SCORES, 5, 0.5),
    "nms_score_threshold": lambda tf: tf.image.non_max_suppression(BOXES, SCORES, 8, 0.5, 0.7),
    "nms_max0": lambda tf: tf.image.non_max_suppression(BOXES, SCORES, 0),
    "nms_iou1": lambda tf: tf.image.non_max_suppression(BOXES, SCORES, 8, 1.0),
    "nms_bad_iou": lambda tf: tf.image.non_max_suppression(BOXES, SCORES, 3, 1.5),
    "nms_bad_boxes": lambda tf: tf.image.non_max_suppression(BOXES[:, :3], SCORES, 3),
    "nms_with_scores": lambda tf: tf.image.non_max_suppression_with_scores(
        BOXES, SCORES, 8, 0.5),
    "nms_soft": lambda tf: tf.image.non_max_suppression_with_scores(
        BOXES, SCORES, 8, 1.0, 0.1, soft_nms_sigma=0.5),
    "nms_overlaps": lambda tf: tf.image.non_max_suppression_overlaps(
        tf.constant(np.abs(np.subtract.outer(SCORES, SCORES)).astype(np.float32)), SCORES, 4,
        0.1),
    "combined_nms": lambda tf: tf.image.combined_non_max_suppression(CB, CS, 3, 5, 0.3),
    "combined_nms_pad": lambda tf: tf.image.combined_non_max_suppression(
        CB, CS, 2, 10, 0.5, 0.2, pad_per_class=True),
    "combined_nms_noclip": lambda tf: tf.image.combined_non_max_suppression(
        CB * 2 - 0.5, CS, 4, 4, 0.5, clip_boxes=False),
    "crop_and_resize": lambda tf: tf.image.crop_and_resize(
        tf.constant(IMG), CROP_BOXES, [0, 1, 0, 1, 1], [3, 4]),
    "crop_and_resize_1x1": lambda tf: tf.image.crop_and_resize(
        tf.constant(IMG), CROP_BOXES, [0, 1, 0, 1, 1], [1, 1]),
    "crop_and_resize_nearest": lambda tf: tf.image.crop_and_resize(
        tf.constant(IMG_U8), CROP_BOXES, [1, 1, 0, 0, 1], [4, 3], method="nearest",
        extrapolation_value=-1.0),
    "crop_and_resize_bad_index": lambda tf: tf.image.crop_and_resize(
        tf.constant(IMG), CROP_BOXES[:1], [2], [3, 4]),
    "draw_boxes": lambda tf: tf.image.draw_bounding_boxes(
        tf.zeros([2, 6, 7, 3]), [[[0.1, 0.1, 0.8, 0.9], [-0.5, 0.5, 0.5, 1.5]],
                                 [[0.0, 0.0, 1.0, 1.0], [0.6, 0.6, 0.2, 0.2]]]),
    "draw_boxes_gray": lambda tf: tf.image.draw_bounding_boxes(
        tf.zeros([1, 5, 5, 1]), [[[0.2, 0.2, 0.6, 0.9]]]),
    "draw_boxes_colors": lambda tf: tf.image.draw_bounding_boxes(
        tf.zeros([1, 5, 5, 4]), [[[0.2, 0.2, 0.6, 0.9], [0, 0, 1, 1]]],
        colors=[[0.1, 0.2, 0.3, 0.4], [1, 1, 1, 1]]),
    "glimpse_inside": lambda tf: tf.image.extract_glimpse(
        tf.constant(IMG), [2, 3], [[0.0, 0.0], [-0.2, 0.3]]),
    "glimpse_pixels": lambda tf: tf.image.extract_glimpse(
        tf.constant(IMG), [3, 3], [[1.0, 2.0], [2.0, 3.0]], centered=False, normalized=False),
    "patches_valid": lambda tf: tf.image.extract_image_patches(
        tf.constant(IMG), [1, 2, 3, 1], [1, 2, 1, 1], [1, 1, 1, 1], "VALID"),
    "patches_same_rates": lambda tf: tf.image.extract_patches(
        tf.constant(IMG), [1, 2, 2, 1], [1, 3, 2, 1], [1, 2, 2, 1], "SAME"),
    "patches_toplevel": lambda tf: tf.extract_image_patches(
        tf.constant(IMG_U8), [1, 3, 3, 1], [1, 1, 1, 1], [1, 1, 1, 1], "SAME"),
}


@pytest.mark.parametrize("program", _progs(BOX_PROGRAMS))
def test_boxes(program):
    run_both(program, rtol=1e-5, atol=1e-4)


def test_nms_padded():
    # TF 2.x reimplemented non_max_suppression_padded (tiled, ending in a Reshape) and it
    # treats degenerate boxes differently; TF 1.15's was the NonMaxSuppressionV4 op, which
    # flowrt keeps: compare values on ordinary boxes, not names.
    run_both(lambda tf: tf.image.non_max_suppression_padded(
        BOXES[:6], SCORES[:6], 10, 0.5, pad_to_max_output_size=True)[0],
        static_keys=("kind", "dtype", "shape"))


# -- random image ops: dtypes, shapes, names and properties -------------------------------------
def _in_range(lo, hi):
    def check(tf, results):
        v = np.asarray(results[0])
        assert v.min() >= lo - 1e-6 and v.max() <= hi + 1e-6, (v.min(), v.max())
    return check


RANDOM = {
    "random_flip_lr": lambda tf: tf.image.random_flip_left_right(tf.constant(IMG[0]), seed=3),
    "random_flip_ud_4d": lambda tf: tf.image.random_flip_up_down(tf.constant(IMG), seed=3),
    "random_crop": lambda tf: tf.image.random_crop(tf.constant(IMG), [1, 3, 3, 3], seed=1),
    "random_crop_top": lambda tf: tf.random_crop(tf.constant(IMG[0]), [2, 2, 3]),
    "random_brightness": lambda tf: tf.image.random_brightness(tf.constant(RGB01), 0.2),
    "random_contrast": lambda tf: tf.image.random_contrast(tf.constant(RGB01), 0.2, 0.5),
    "random_hue": lambda tf: tf.image.random_hue(tf.constant(RGB01), 0.2),
    "random_saturation": lambda tf: tf.image.random_saturation(tf.constant(RGB01), 0.2, 0.5),
    "sample_bbox": lambda tf: tf.image.sample_distorted_bounding_box(
        [20, 30, 3], [[[0.1, 0.1, 0.6, 0.7]]], seed=2, seed2=3, min_object_covered=0.3),
    "sample_bbox_no_boxes": lambda tf: tf.image.sample_distorted_bounding_box(
        [20, 30, 3], tf.zeros([1, 0, 4]), seed=2, use_image_if_no_bounding_boxes=True),
    "sample_bbox_no_boxes_error": lambda tf: tf.image.sample_distorted_bounding_box(
        [20, 30, 3], tf.zeros([1, 0, 4]), seed=2),
}
RANDOM_CHECKS = {"random_brightness": _in_range(-0.2, 1.2), "random_hue": _in_range(0, 1),
                 "random_saturation": _in_range(0, 1)}


@pytest.mark.parametrize("name", sorted(RANDOM))
def test_random_image_ops(name):
    run_both(RANDOM[name], values=False, check=RANDOM_CHECKS.get(name))


def test_random_flip_is_a_flip_or_identity(tf1):
    import compat_harness as h
    for impl in h.IMPLS:
        tf = h.module(impl)
        with tf.Graph().as_default():
            y = tf.image.random_flip_left_right(tf.constant(IMG[0]))
            with tf.Session() as s:
                for _ in range(4):
                    v = s.run(y)
                    assert np.array_equal(v, IMG[0]) or np.array_equal(v, IMG[0][:, ::-1])


# -- codecs ---------------------------------------------------------------------------------
PNG_SRC = RNG.integers(0, 256, (5, 6, 3)).astype(np.uint8)


def _tf_bytes(fn):
    import compat_harness as h
    tf = h.tf_module()
    with tf.Graph().as_default(), tf.Session() as s:
        return s.run(fn(tf))


@pytest.mark.parametrize("channels", [0, 1, 3, 4])
@pytest.mark.parametrize("src_c", [1, 3, 4])
def test_decode_png_of_tf_bytes(channels, src_c):
    data = _tf_bytes(lambda tf: tf.image.encode_png(tf.constant(
        np.concatenate([PNG_SRC, PNG_SRC[..., :1]], -1)[..., :src_c])))
    run_both(lambda tf: tf.image.decode_png(data, channels=channels), atol=1)


def test_decode_png16_of_tf_bytes():
    src = (PNG_SRC.astype(np.uint16) * 251)
    data = _tf_bytes(lambda tf: tf.image.encode_png(tf.constant(src)))
    run_both(lambda tf: [tf.image.decode_png(data, dtype=tf.uint16), tf.image.decode_png(data)])


def test_png_round_trip_both():
    run_both(lambda tf: tf.image.decode_png(tf.image.encode_png(tf.constant(PNG_SRC))))


SMOOTH = np.clip(np.add.outer(np.arange(16) * 12, np.arange(16) * 5)[..., None]
                 + np.array([0, 40, 80]), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("channels", [0, 1, 3])
def test_decode_jpeg_of_tf_bytes(channels):
    data = _tf_bytes(lambda tf: tf.image.encode_jpeg(tf.constant(SMOOTH), quality=90))
    # Pillow's libjpeg uses the accurate integer DCT, TF the fast one: pixels may differ by
    # a few levels (TF's own INTEGER_ACCURATE differs from its default by as much), so
    # values are compared as floats within 3 levels; dtypes and shapes separately.
    run_both(lambda tf: [tf.image.decode_jpeg(data, channels=channels),
                         tf.image.extract_jpeg_shape(data),
                         tf.image.decode_and_crop_jpeg(data, [2, 3, 5, 6],
                                                       channels=channels)], values=False)
    run_both(lambda tf: [tf.cast(tf.image.decode_jpeg(data, channels=channels), tf.float32),
                         tf.image.extract_jpeg_shape(data),
                         tf.cast(tf.image.decode_and_crop_jpeg(data, [2, 3, 5, 6],
                                                               channels=channels),
                                 tf.float32)], rtol=0, atol=3.01)


def test_decode_image_dispatch():
    png = _tf_bytes(lambda tf: tf.image.encode_png(tf.constant(PNG_SRC)))
    jpg = _tf_bytes(lambda tf: tf.image.encode_jpeg(tf.constant(SMOOTH), quality=90))
    # TF 1.15's decode_image was a tf.cond over the decoders (unknown static shape);
    # TF 2.x and flowrt use one DecodeImage op: values and dtypes are compared.
    run_both(lambda tf: [tf.image.decode_image(png),
                         tf.image.decode_image(png, dtype=tf.float32),
                         tf.cast(tf.image.decode_image(jpg, channels=3), tf.float32)],
             rtol=0, atol=3.01, static=False)


CODEC_ERRORS = {
    "decode_png_bad": lambda tf: tf.image.decode_png(b"not a png"),
    "decode_jpeg_bad": lambda tf: tf.image.decode_jpeg(b"\xff\xd8\xffgarbage"),
    "decode_gif_bad": lambda tf: tf.image.decode_gif(b"GIF89a..."),
    "decode_image_bad": lambda tf: tf.image.decode_image(b"nothing known"),
    "encode_png_bad_rank": lambda tf: tf.image.encode_png(tf.zeros([2, 2], tf.uint8)),
    "decode_png_bad_rank": lambda tf: tf.image.decode_png([b"a"]),
}


@pytest.mark.parametrize("program", _progs(CODEC_ERRORS))
def test_codec_errors(program):
    run_both(program, static=False)
