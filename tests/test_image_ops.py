"""tf.image (plugins/kernels/standard/image_*.py): resize kernels against numpy references
under every corner rule, crops/pads/flips, colour conversions and adjustments, NMS and
crop_and_resize against references, codecs (PNG round trips exact, JPEG within tolerance,
Pillow missing), error classes, and numeric gradient checks."""
from __future__ import annotations

import builtins
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors

RNG = np.random.default_rng(11)


def run(t, feed=None):
    with tf.Session() as s:
        return s.run(t, feed)


@pytest.fixture(autouse=True)
def _graph():
    with tf.Graph().as_default():
        yield


# =======================================================================================
# numpy references (written from TF 1.15's kernel definitions, in float64)
# =======================================================================================
def ref_scale(i, o, align):
    return (i - 1) / (o - 1) if align and o > 1 else i / o


def ref_bilinear(img, oh, ow, align=False, half=False):
    b, h, w, c = img.shape
    out = np.zeros((b, oh, ow, c))
    hs, ws = ref_scale(h, oh, align), ref_scale(w, ow, align)
    for y in range(oh):
        sy = (y + 0.5) * hs - 0.5 if half else y * hs
        y0, y1 = max(int(np.floor(sy)), 0), min(int(np.ceil(sy)), h - 1)
        ly = sy - np.floor(sy)
        for x in range(ow):
            sx = (x + 0.5) * ws - 0.5 if half else x * ws
            x0, x1 = max(int(np.floor(sx)), 0), min(int(np.ceil(sx)), w - 1)
            lx = sx - np.floor(sx)
            top = img[:, y0, x0] * (1 - lx) + img[:, y0, x1] * lx
            bot = img[:, y1, x0] * (1 - lx) + img[:, y1, x1] * lx
            out[:, y, x] = top * (1 - ly) + bot * ly
    return out


def ref_nearest(img, oh, ow, align=False, half=False):
    b, h, w, c = img.shape
    hs, ws = ref_scale(h, oh, align), ref_scale(w, ow, align)

    def idx(o, s, n):
        v = (o + 0.5) * s if half else o * s
        i = int(np.floor(v + 0.5)) if align else int(np.floor(v))
        return max(min(i, n - 1), 0)

    ys = [idx(y, hs, h) for y in range(oh)]
    xs = [idx(x, ws, w) for x in range(ow)]
    return img[:, ys][:, :, xs]


def keys(t, a):
    t = abs(t)
    if t <= 1:
        return ((a + 2) * t - (a + 3)) * t * t + 1
    if t < 2:
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return 0.0


def ref_bicubic(img, oh, ow, align=False, half=False):
    a = -0.5 if half else -0.75
    b, h, w, c = img.shape

    def taps(o, s, n):
        v = (o + 0.5) * s - 0.5 if half else o * s
        base = int(np.floor(v))
        d = v - base
        ws, ids = [], []
        for k in range(-1, 3):
            i = base + k
            wt = keys(d - k, a)
            if half and not 0 <= i < n:
                wt = 0.0
            ws.append(wt)
            ids.append(min(max(i, 0), n - 1))
        ws = np.array(ws)
        if half:
            ws = ws / ws.sum()
        return ids, ws

    hs, wsc = ref_scale(h, oh, align), ref_scale(w, ow, align)
    out = np.zeros((b, oh, ow, c))
    for y in range(oh):
        yi, yw = taps(y, hs, h)
        for x in range(ow):
            xi, xw = taps(x, wsc, w)
            patch = img[:, yi][:, :, xi]
            out[:, y, x] = np.einsum("i,j,bijc->bc", yw, xw, patch)
    return out


def ref_area(img, oh, ow, align=False):
    b, h, w, c = img.shape
    hs, ws = ref_scale(h, oh, align), ref_scale(w, ow, align)

    def weights(n_out, n_in, s):
        m = np.zeros((n_out, n_in))
        for o in range(n_out):
            lo, hi = o * s, (o + 1) * s
            for i in range(int(np.floor(lo)), int(np.ceil(hi))):
                m[o, min(max(i, 0), n_in - 1)] += min(i + 1, hi) - max(i, lo)
        return m

    my, mx = weights(oh, h, hs), weights(ow, w, ws)
    return np.einsum("oh,bhwc,pw->bopc", my, img, mx) / (hs * ws)


# =======================================================================================
# resize
# =======================================================================================
RULES = [(False, False), (True, False), (False, True)]
SIZES = [(3, 4), (7, 9), (1, 1), (2, 11), (5, 5)]


@pytest.mark.parametrize("align,half", RULES)
@pytest.mark.parametrize("size", SIZES)
def test_resize_bilinear_matches_reference(align, half, size):
    img = RNG.uniform(-5, 5, (2, 4, 6, 2)).astype(np.float32)
    got = run(tf.image.resize_bilinear(img, size, align_corners=align,
                                       half_pixel_centers=half))
    assert got.dtype == np.float32 and got.shape == (2,) + size + (2,)
    np.testing.assert_allclose(got, ref_bilinear(img.astype(np.float64), *size, align, half),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("align,half", RULES)
@pytest.mark.parametrize("size", SIZES)
def test_resize_nearest_matches_reference(align, half, size):
    img = RNG.integers(0, 100, (1, 5, 3, 2)).astype(np.int32)
    got = run(tf.image.resize_nearest_neighbor(img, size, align_corners=align,
                                               half_pixel_centers=half))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, ref_nearest(img, *size, align, half))


@pytest.mark.parametrize("align,half", RULES)
@pytest.mark.parametrize("size", SIZES)
def test_resize_bicubic_matches_reference(align, half, size):
    img = RNG.uniform(0, 1, (1, 5, 4, 3)).astype(np.float32)
    got = run(tf.image.resize_bicubic(img, size, align_corners=align, half_pixel_centers=half))
    # TF samples the cubic kernel from a 1024-entry table: 1e-3 of the value range
    np.testing.assert_allclose(got, ref_bicubic(img.astype(np.float64), *size, align, half),
                               atol=2e-3)


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", SIZES)
def test_resize_area_matches_reference(align, size):
    img = RNG.uniform(0, 10, (2, 5, 7, 1)).astype(np.float32)
    got = run(tf.image.resize_area(img, size, align_corners=align))
    np.testing.assert_allclose(got, ref_area(img.astype(np.float64), *size, align), rtol=1e-5,
                               atol=1e-4)


@settings(max_examples=25, deadline=None)
@given(h=st.integers(1, 6), w=st.integers(1, 6), oh=st.integers(1, 9), ow=st.integers(1, 9),
       rule=st.sampled_from(RULES))
def test_resize_bilinear_property(h, w, oh, ow, rule):
    img = np.random.default_rng(h * 100 + w).uniform(0, 1, (1, h, w, 1)).astype(np.float32)
    with tf.Graph().as_default():
        got = run(tf.image.resize_bilinear(img, [oh, ow], align_corners=rule[0],
                                           half_pixel_centers=rule[1]))
    np.testing.assert_allclose(got, ref_bilinear(img.astype(np.float64), oh, ow, *rule),
                               atol=1e-5)
    assert got.min() >= img.min() - 1e-6 and got.max() <= img.max() + 1e-6


def test_resize_images_front_end():
    img = RNG.uniform(0, 1, (4, 6, 3)).astype(np.float32)
    r = tf.image.resize_images(img, [8, 3])
    assert r.shape.as_list() == [8, 3, 3] and r.dtype == tf.float32
    np.testing.assert_allclose(run(r), ref_bilinear(img[None].astype(np.float64), 8, 3)[0],
                               atol=1e-5)
    same = tf.image.resize_images(img, [4, 6])
    assert same.op.type != "ResizeBilinear"
    nn = tf.image.resize_images(img, [2, 2], method=tf.image.ResizeMethod.NEAREST_NEIGHBOR)
    assert nn.dtype == tf.float32 and nn.op.inputs[0].op.type == "ResizeNearestNeighbor"
    ar = run(tf.image.resize_images(img, [8, 8], preserve_aspect_ratio=True))
    assert ar.shape == (5, 8, 3)
    with pytest.raises(ValueError, match="Resize method is not implemented"):
        tf.image.resize_images(img, [2, 2], method=9)
    with pytest.raises(ValueError, match="3 or 4 dimensions"):
        tf.image.resize_images(np.zeros((2, 2), np.float32), [2, 2])
    with pytest.raises(ValueError, match="2 elements"):
        tf.image.resize_images(img, [2, 2, 2])


def test_resize_errors():
    with pytest.raises(ValueError, match="rank 4"):
        tf.image.resize_bilinear(np.zeros((2, 2, 1), np.float32), [3, 3])
    x = tf.placeholder(tf.int32, [2])
    r = tf.image.resize_bilinear(np.zeros((1, 2, 2, 1), np.float32), x)
    with pytest.raises(errors.InvalidArgumentError, match="output dimensions must be positive"):
        run(r, {x: [0, 3]})
    r = tf.image.resize_bilinear(np.zeros((1, 2, 2, 1), np.float32), [3, 3],
                                 align_corners=True, half_pixel_centers=True)
    with pytest.raises(errors.InvalidArgumentError, match="half_pixel_centers"):
        run(r)


def test_resize_with_crop_or_pad_and_pad():
    img = np.arange(4 * 6, dtype=np.float32).reshape(4, 6, 1)
    out = run(tf.image.resize_image_with_crop_or_pad(img, 6, 4))
    assert out.shape == (6, 4, 1)
    np.testing.assert_array_equal(out[1:5, :, 0], img[:, 1:5, 0])
    assert (out[0] == 0).all() and (out[5] == 0).all()
    padded = run(tf.image.resize_image_with_pad(img, 8, 8))
    assert padded.shape == (8, 8, 1)


# =======================================================================================
# geometry
# =======================================================================================
def test_flips_rot90_transpose():
    img = RNG.uniform(0, 1, (2, 3, 4, 2)).astype(np.float32)
    np.testing.assert_array_equal(run(tf.image.flip_left_right(img)), img[:, :, ::-1])
    np.testing.assert_array_equal(run(tf.image.flip_up_down(img[0])), img[0, ::-1])
    for k in range(-2, 6):
        np.testing.assert_array_equal(run(tf.image.rot90(img, k)),
                                      np.rot90(img, k, axes=(1, 2)))
        np.testing.assert_array_equal(run(tf.image.rot90(img[0], k)), np.rot90(img[0], k))
    np.testing.assert_array_equal(run(tf.image.transpose_image(img)),
                                  img.transpose(0, 2, 1, 3))
    x = tf.placeholder(tf.float32)
    np.testing.assert_array_equal(run(tf.image.flip_left_right(x), {x: img[0]}),
                                  img[0, :, ::-1])
    with pytest.raises(ValueError):
        tf.image.flip_left_right(np.zeros((2, 2), np.float32))


def test_random_flips_and_crop():
    img = RNG.uniform(0, 1, (3, 4, 2)).astype(np.float32)
    f = tf.image.random_flip_left_right(img, seed=5)
    seen = set()
    with tf.Session() as s:
        for _ in range(12):
            v = s.run(f)
            assert np.array_equal(v, img) or np.array_equal(v, img[:, ::-1])
            seen.add(np.array_equal(v, img))
    assert seen == {True, False}
    batch = run(tf.image.random_flip_up_down(np.stack([img] * 6), seed=1))
    for v in batch:
        assert np.array_equal(v, img) or np.array_equal(v, img[::-1])
    c = run(tf.random_crop(img, [2, 2, 2], seed=3))
    assert c.shape == (2, 2, 2)
    assert any(np.array_equal(c, img[i:i + 2, j:j + 2]) for i in range(2) for j in range(3))
    with pytest.raises(errors.InvalidArgumentError):
        run(tf.image.random_crop(img, [5, 1, 1]))


def test_crops_and_pads():
    img = RNG.uniform(0, 1, (5, 6, 3)).astype(np.float32)
    np.testing.assert_array_equal(run(tf.image.crop_to_bounding_box(img, 1, 2, 3, 4)),
                                  img[1:4, 2:6])
    p = run(tf.image.pad_to_bounding_box(img, 1, 2, 8, 9))
    np.testing.assert_array_equal(p[1:6, 2:8], img)
    assert p.sum() == pytest.approx(img.sum(), rel=1e-6)
    np.testing.assert_array_equal(run(tf.image.central_crop(img, 0.5)), img[1:4, 1:5])
    with pytest.raises(ValueError, match="width must be >= target"):
        tf.image.crop_to_bounding_box(img, 0, 3, 2, 4)
    with pytest.raises(ValueError, match="central_fraction"):
        tf.image.central_crop(img, 0.0)
    x = tf.placeholder(tf.float32, [None, None, 3])
    with pytest.raises(errors.InvalidArgumentError):
        run(tf.image.crop_to_bounding_box(x, 0, 3, 2, 4), {x: img})


# =======================================================================================
# colour
# =======================================================================================
def test_hsv_round_trip_and_reference():
    rgb = RNG.uniform(0, 1, (3, 4, 3)).astype(np.float32)
    rgb[0, 0] = [0.3, 0.3, 0.3]
    hsv = run(tf.image.rgb_to_hsv(rgb))
    import colorsys
    ref = np.array([colorsys.rgb_to_hsv(*p) for p in rgb.reshape(-1, 3).astype(np.float64)])
    np.testing.assert_allclose(hsv.reshape(-1, 3), ref, atol=1e-5)
    np.testing.assert_allclose(run(tf.image.hsv_to_rgb(hsv)), rgb, atol=1e-5)


@pytest.mark.parametrize("fwd,back", [("rgb_to_yiq", "yiq_to_rgb"),
                                      ("rgb_to_yuv", "yuv_to_rgb")])
def test_yiq_yuv_round_trip(fwd, back):
    rgb = RNG.uniform(0, 1, (2, 3, 3))
    out = run(getattr(tf.image, back)(getattr(tf.image, fwd)(rgb)))
    np.testing.assert_allclose(out, rgb, atol=1e-4)  # TF's matrices are 8-digit inverses


def test_grayscale():
    rgb = RNG.uniform(0, 1, (2, 3, 3)).astype(np.float32)
    g = run(tf.image.rgb_to_grayscale(rgb))
    np.testing.assert_allclose(g[..., 0], rgb @ [0.2989, 0.587, 0.114], rtol=1e-5)
    back = run(tf.image.grayscale_to_rgb(g))
    assert back.shape == (2, 3, 3) and (back == g).all()
    with pytest.raises(ValueError, match="size 1"):
        tf.image.grayscale_to_rgb(rgb)


@pytest.mark.parametrize("src,dst,vals,want", [
    ("uint8", "float32", [0, 255, 51], [0.0, 1.0, 0.2]),
    ("float32", "uint8", [0.0, 1.0, 0.5], [0, 255, 127]),  # x * 255.5, truncated
    ("uint8", "int32", [0, 255, 1], [0, 255 * 2 ** 23, 2 ** 23]),
    ("int32", "uint8", [0, 2 ** 31 - 1, 2 ** 24], [0, 255, 2]),
    ("uint16", "uint8", [65535, 256, 255], [255, 1, 0]),
])
def test_convert_image_dtype(src, dst, vals, want):
    out = run(tf.image.convert_image_dtype(np.array(vals, src), getattr(tf, dst)))
    assert out.dtype == np.dtype(dst)
    np.testing.assert_allclose(out, np.array(want, dst), rtol=1e-6)


def test_convert_image_dtype_saturate_and_errors():
    out = run(tf.image.convert_image_dtype(np.array([1.5, -0.5], np.float32), tf.uint8,
                                           saturate=True))
    np.testing.assert_array_equal(out, [255, 0])
    with pytest.raises(AttributeError):
        tf.image.convert_image_dtype(np.array([1.0], np.float32), tf.string)


def ref_adjust_hue(rgb, delta):
    import colorsys
    flat = rgb.reshape(-1, 3).astype(np.float64)
    out = []
    for p in flat:
        h, s, v = colorsys.rgb_to_hsv(*p)
        out.append(colorsys.hsv_to_rgb((h + delta) % 1.0, s, v))
    return np.array(out).reshape(rgb.shape)


def ref_adjust_saturation(rgb, f):
    import colorsys
    out = []
    for p in rgb.reshape(-1, 3).astype(np.float64):
        h, s, v = colorsys.rgb_to_hsv(*p)
        out.append(colorsys.hsv_to_rgb(h, min(max(s * f, 0), 1), v))
    return np.array(out).reshape(rgb.shape)


def test_color_adjustments():
    rgb = RNG.uniform(0, 1, (2, 3, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(run(tf.image.adjust_hue(rgb, 0.3)), ref_adjust_hue(rgb, 0.3),
                               atol=1e-5)
    np.testing.assert_allclose(run(tf.image.adjust_hue(rgb, -0.7)),
                               ref_adjust_hue(rgb, -0.7), atol=1e-5)
    np.testing.assert_allclose(run(tf.image.adjust_saturation(rgb, 0.4)),
                               ref_adjust_saturation(rgb, 0.4), atol=1e-5)
    mean = rgb.mean(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(run(tf.image.adjust_contrast(rgb, 1.8)),
                               (rgb - mean) * 1.8 + mean, atol=1e-5)
    np.testing.assert_allclose(run(tf.image.adjust_brightness(rgb, 0.25)), rgb + 0.25,
                               atol=1e-6)
    np.testing.assert_allclose(run(tf.image.adjust_gamma(rgb, 2.0, 0.5)), 0.5 * rgb ** 2,
                               rtol=1e-5)
    u8 = (rgb * 255).astype(np.uint8)
    b = run(tf.image.adjust_brightness(u8, 0.5))
    assert b.dtype == np.uint8 and b.max() == 255
    with pytest.raises(ValueError, match="Gamma"):
        tf.image.adjust_gamma(rgb, -1.0)
    for fn, args in ((tf.image.random_brightness, (0.1,)), (tf.image.random_contrast, (0.5, 1.5)),
                     (tf.image.random_hue, (0.1,)), (tf.image.random_saturation, (0.5, 1.5))):
        assert run(fn(rgb, *args, seed=4)).shape == rgb.shape
    with pytest.raises(ValueError):
        tf.image.random_hue(rgb, 0.7)
    with pytest.raises(ValueError):
        tf.image.random_contrast(rgb, 1.0, 0.5)


def test_statistics():
    img = RNG.uniform(0, 1, (2, 12, 13, 3)).astype(np.float32)
    std = run(tf.image.per_image_standardization(img))
    np.testing.assert_allclose(std.mean(axis=(1, 2, 3)), 0, atol=1e-5)
    np.testing.assert_allclose(std.std(axis=(1, 2, 3)), 1, atol=1e-3)
    tv = run(tf.image.total_variation(img))
    ref = (np.abs(np.diff(img, axis=1)).sum(axis=(1, 2, 3))
           + np.abs(np.diff(img, axis=2)).sum(axis=(1, 2, 3)))
    np.testing.assert_allclose(tv, ref, rtol=1e-5)
    dy, dx = run(tf.image.image_gradients(img))
    np.testing.assert_allclose(dy[:, :-1], np.diff(img, axis=1), atol=1e-6)
    assert (dx[:, :, -1] == 0).all()
    sob = run(tf.image.sobel_edges(img))
    assert sob.shape == img.shape + (2,)
    pad = np.pad(img, ((0, 0), (1, 1), (1, 1), (0, 0)), mode="reflect").astype(np.float64)
    ky = np.array([[-1, -2, -1], [0, 0, 0], [1, 2, 1]])
    ref_y = sum(ky[i, j] * pad[:, i:i + 12, j:j + 13] for i in range(3) for j in range(3))
    np.testing.assert_allclose(sob[..., 0], ref_y, atol=1e-5)
    p = run(tf.image.psnr(img, img * 0.5, 1.0))
    mse = ((img - img * 0.5) ** 2).mean(axis=(1, 2, 3))
    np.testing.assert_allclose(p, -10 * np.log10(mse), rtol=1e-5)
    s = run(tf.image.ssim(img, img, 1.0))
    np.testing.assert_allclose(s, 1.0, atol=1e-6)
    assert run(tf.image.ssim(img, 1 - img, 1.0)).max() < 0.5


# =======================================================================================
# boxes
# =======================================================================================
def ref_nms(boxes, scores, k, thr, score_thr=-np.inf):
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    sel = []

    def iou(a, b):
        ya0, ya1 = sorted([a[0], a[2]])
        xa0, xa1 = sorted([a[1], a[3]])
        yb0, yb1 = sorted([b[0], b[2]])
        xb0, xb1 = sorted([b[1], b[3]])
        aa, ab = (ya1 - ya0) * (xa1 - xa0), (yb1 - yb0) * (xb1 - xb0)
        if aa <= 0 or ab <= 0:
            return 0.0
        inter = max(min(ya1, yb1) - max(ya0, yb0), 0) * max(min(xa1, xb1) - max(xa0, xb0), 0)
        return inter / (aa + ab - inter)

    for i in order:
        if len(sel) >= k or scores[i] <= score_thr:
            continue
        if all(iou(boxes[i], boxes[j]) <= thr for j in sel):
            sel.append(i)
    return sel


@settings(max_examples=20, deadline=None)
@given(n=st.integers(0, 12), k=st.integers(0, 8), thr=st.sampled_from([0.0, 0.3, 0.5, 0.9]),
       seed=st.integers(0, 1000))
def test_nms_matches_reference(n, k, thr, seed):
    r = np.random.default_rng(seed)
    boxes = r.uniform(0, 1, (n, 4)).astype(np.float32)
    scores = r.permutation(n).astype(np.float32) / max(n, 1)
    with tf.Graph().as_default():
        got = run(tf.image.non_max_suppression(boxes, scores, k, thr))
        padded, valid = run(tf.image.non_max_suppression_padded(
            boxes, scores, k, thr, pad_to_max_output_size=True))
    want = ref_nms(boxes.astype(np.float64), scores, k, thr)
    assert got.dtype == np.int32 and got.tolist() == want
    assert valid == len(want) and padded.tolist() == want + [0] * (k - len(want))


def test_nms_variants():
    boxes = np.array([[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 10, 1, 11]], np.float32)
    scores = np.array([0.9, 0.8, 0.7], np.float32)
    assert run(tf.image.non_max_suppression(boxes, scores, 3, 0.5, 0.75)).tolist() == [0]
    idx, sc = run(tf.image.non_max_suppression_with_scores(boxes, scores, 3, 1.0,
                                                           soft_nms_sigma=0.5))
    iou = 0.9 / 1.1
    assert idx.tolist() == [0, 2, 1]
    np.testing.assert_allclose(sc, [0.9, 0.7, 0.8 * np.exp(-iou ** 2 / (2 * 0.5))], rtol=1e-5)
    ov = np.array([[1, 0.8, 0], [0.8, 1, 0], [0, 0, 1]], np.float32)
    assert run(tf.image.non_max_suppression_overlaps(ov, scores, 3, 0.5)).tolist() == [0, 2]
    with pytest.raises(errors.InvalidArgumentError, match="iou_threshold"):
        run(tf.image.non_max_suppression(boxes, scores, 3, 1.5))
    with pytest.raises(ValueError):
        tf.image.non_max_suppression(boxes[:, :3], scores, 3)


def test_combined_nms():
    boxes = np.array([[[[0, 0, 0.5, 0.5]], [[0, 0, 0.5, 0.6]], [[0.5, 0.5, 1, 1.2]]]],
                     np.float32)
    scores = np.array([[[0.9, 0.1], [0.8, 0.7], [0.3, 0.95]]], np.float32)
    res = run(tf.image.combined_non_max_suppression(boxes, scores, 2, 4, 0.5))
    np.testing.assert_allclose(res.nmsed_scores, [[0.95, 0.9, 0.7, 0.3]])
    np.testing.assert_allclose(res.nmsed_classes, [[1, 0, 1, 0]])
    np.testing.assert_allclose(res.nmsed_boxes[0, 0], [0.5, 0.5, 1, 1])  # clipped
    assert res.valid_detections.tolist() == [4]


def ref_crop_and_resize(img, boxes, ind, ch, cw, extrap=0.0):
    b, h, w, c = img.shape
    out = np.zeros((len(boxes), ch, cw, c))
    for n, (y1, x1, y2, x2) in enumerate(boxes):
        for y in range(ch):
            sy = y1 * (h - 1) + y * (y2 - y1) * (h - 1) / (ch - 1) if ch > 1 else \
                0.5 * (y1 + y2) * (h - 1)
            for x in range(cw):
                sx = x1 * (w - 1) + x * (x2 - x1) * (w - 1) / (cw - 1) if cw > 1 else \
                    0.5 * (x1 + x2) * (w - 1)
                if not (0 <= sy <= h - 1 and 0 <= sx <= w - 1):
                    out[n, y, x] = extrap
                    continue
                y0, x0 = int(np.floor(sy)), int(np.floor(sx))
                y1_, x1_ = int(np.ceil(sy)), int(np.ceil(sx))
                ly, lx = sy - y0, sx - x0
                im = img[ind[n]]
                top = im[y0, x0] * (1 - lx) + im[y0, x1_] * lx
                bot = im[y1_, x0] * (1 - lx) + im[y1_, x1_] * lx
                out[n, y, x] = top * (1 - ly) + bot * ly
    return out


def test_crop_and_resize_matches_reference():
    img = RNG.uniform(0, 1, (2, 5, 6, 2)).astype(np.float32)
    boxes = np.array([[0, 0, 1, 1], [0.1, 0.2, 0.8, 0.7], [-0.3, 0.4, 1.2, 0.9],
                      [0.9, 0.8, 0.2, 0.1]], np.float32)
    ind = [0, 1, 1, 0]
    for size in [(3, 4), (1, 1), (6, 2)]:
        got = run(tf.image.crop_and_resize(img, boxes, ind, size, extrapolation_value=-1))
        np.testing.assert_allclose(got, ref_crop_and_resize(img.astype(np.float64), boxes,
                                                            ind, *size, -1.0), atol=1e-5)
    with pytest.raises(errors.OutOfRangeError):
        run(tf.image.crop_and_resize(img, boxes[:1], [5], [2, 2]))


def test_draw_boxes_and_sample_bbox():
    out = run(tf.image.draw_bounding_boxes(np.zeros((1, 5, 5, 3), np.float32),
                                           [[[0.0, 0.0, 1.0, 0.5]]]))
    assert (out[0, 0, :3] == [1, 1, 0]).all() and (out[0, 2, 1] == 0).all()
    begin, size, bbox = run(tf.image.sample_distorted_bounding_box(
        [40, 60, 3], [[[0.2, 0.2, 0.8, 0.8]]], seed=1, seed2=2, min_object_covered=0.5))
    assert begin[2] == 0 and size[2] == -1
    assert begin[0] + size[0] <= 40 and begin[1] + size[1] <= 60
    np.testing.assert_allclose(bbox[0, 0], [begin[0] / 40, begin[1] / 60,
                                            (begin[0] + size[0]) / 40,
                                            (begin[1] + size[1]) / 60], rtol=1e-6)
    with tf.Graph().as_default():
        again = run(tf.image.sample_distorted_bounding_box(
            [40, 60, 3], [[[0.2, 0.2, 0.8, 0.8]]], seed=1, seed2=2, min_object_covered=0.5))
    assert again[0].tolist() == begin.tolist()


def test_extract_patches_and_glimpse():
    img = np.arange(1 * 4 * 5 * 2, dtype=np.float32).reshape(1, 4, 5, 2)
    p = run(tf.extract_image_patches(img, [1, 2, 2, 1], [1, 2, 2, 1], [1, 1, 1, 1], "VALID"))
    assert p.shape == (1, 2, 2, 8)
    np.testing.assert_array_equal(p[0, 1, 1], img[0, 2:4, 2:4].reshape(-1))
    g = run(tf.image.extract_glimpse(img, [2, 3], [[1.0, 1.0]], centered=False,
                                     normalized=False))
    np.testing.assert_array_equal(g[0], img[0, 0:2, 0:3])


# =======================================================================================
# codecs
# =======================================================================================
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", ["uint8", "uint16"])
def test_png_round_trip_exact(channels, dtype):
    hi = 256 if dtype == "uint8" else 65536
    img = RNG.integers(0, hi, (7, 5, channels)).astype(dtype)
    data = tf.image.encode_png(img, compression=9)
    out = run(tf.image.decode_png(data, dtype=getattr(tf, dtype)))
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, img)
    assert run(tf.image.decode_image(data, dtype=getattr(tf, dtype))).shape == img.shape


def test_png_channel_conversion():
    img = RNG.integers(0, 256, (3, 4, 3)).astype(np.uint8)
    data = tf.image.encode_png(img)
    rgba = run(tf.image.decode_png(data, channels=4))
    np.testing.assert_array_equal(rgba[..., :3], img)
    assert (rgba[..., 3] == 255).all()
    gray = run(tf.image.decode_png(data, channels=1))
    np.testing.assert_allclose(gray[..., 0], img @ [0.299, 0.587, 0.114], atol=1.01)


def test_jpeg_round_trip_within_tolerance():
    smooth = np.clip(np.add.outer(np.arange(16) * 12, np.arange(16) * 5)[..., None]
                     + np.array([0, 40, 80]), 0, 255).astype(np.uint8)
    data = tf.image.encode_jpeg(smooth, quality=95)
    out = run(tf.image.decode_jpeg(data))
    assert out.dtype == np.uint8 and out.shape == smooth.shape
    assert np.abs(out.astype(int) - smooth).max() <= 16  # chroma subsampling
    assert run(tf.image.is_jpeg(data)) if hasattr(tf.strings, "substr") else True
    assert run(tf.image.extract_jpeg_shape(data)).tolist() == [16, 16, 3]
    crop = run(tf.image.decode_and_crop_jpeg(data, [2, 3, 4, 5]))
    np.testing.assert_array_equal(crop, out[2:6, 3:8])
    half = run(tf.image.decode_jpeg(data, ratio=2))
    assert half.shape == (8, 8, 3)
    q = run(tf.image.adjust_jpeg_quality(smooth.astype(np.float32) / 255, 50))
    assert q.dtype == np.float32 and np.abs(q - smooth / 255).max() < 0.1


def test_gif_and_bmp():
    from PIL import Image
    import io
    frames = [Image.new("RGB", (4, 3), c) for c in ((255, 0, 0), (0, 255, 0))]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:])
    gif = run(tf.image.decode_gif(buf.getvalue()))
    assert gif.shape == (2, 3, 4, 3) and gif[1, 0, 0].tolist() == [0, 255, 0]
    assert run(tf.image.decode_image(buf.getvalue(), expand_animations=False)).shape == (3, 4, 3)
    img = RNG.integers(0, 256, (3, 4, 3)).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="BMP")
    np.testing.assert_array_equal(run(tf.image.decode_bmp(buf.getvalue())), img)


def test_bad_bytes_name_the_op():
    for fn in (tf.image.decode_png, tf.image.decode_jpeg, tf.image.decode_gif,
               tf.image.decode_bmp, tf.image.decode_image):
        with pytest.raises(errors.InvalidArgumentError) as e:
            run(fn(b"definitely not an image", name="bad_decode"))
        assert "bad_decode" in str(e.value)


def test_codec_without_pillow(monkeypatch):
    real = builtins.__import__

    def fake(name, *a, **k):
        if name == "PIL" or name.startswith("PIL."):
            raise ImportError("No module named 'PIL'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    monkeypatch.delitem(sys.modules, "PIL", raising=False)
    monkeypatch.delitem(sys.modules, "PIL.Image", raising=False)
    jpeg = b"\xff\xd8\xff\xe0" + b"\x00" * 20
    with pytest.raises(errors.UnimplementedError, match=r"decode_jpeg needs Pillow: pip "
                                                        r"install 'flowrt\[image\]'"):
        run(tf.image.decode_jpeg(jpeg))
    # PNG encoding is zlib only and still works
    assert run(tf.image.encode_png(np.zeros((2, 2, 1), np.uint8))).startswith(b"\x89PNG")


# =======================================================================================
# gradients
# =======================================================================================
def grad_err(build, x, y_dtype_cast=True):
    xt = tf.placeholder(tf.float64, x.shape)
    y = build(xt)
    if y_dtype_cast:
        y = tf.cast(y, tf.float64)
    with tf.Session():
        ys = run(tf.shape(y), {xt: x})
        return tf.test.compute_gradient_error(xt, list(x.shape), y, list(ys), x_init_value=x)


@pytest.mark.parametrize("align,half", RULES)
def test_resize_gradients(align, half):
    x = RNG.uniform(0, 1, (1, 3, 4, 2))
    for fn, tol in ((tf.image.resize_bilinear, 1e-3), (tf.image.resize_bicubic, 1e-3),
                    (tf.image.resize_nearest_neighbor, 1e-6)):
        err = grad_err(lambda t: fn(t, [5, 3], align_corners=align, half_pixel_centers=half), x)
        assert err < tol, (fn.__name__, err)


def test_crop_and_resize_gradients():
    img = RNG.uniform(0, 1, (2, 4, 5, 1))
    boxes = np.array([[0.1, 0.15, 0.8, 0.9], [0.05, 0.2, 0.7, 0.6]])
    err = grad_err(lambda t: tf.image.crop_and_resize(t, boxes.astype(np.float32), [0, 1],
                                                      [3, 3]), img)
    assert err < 1e-3
    b = tf.placeholder(tf.float32, [2, 4])
    y = tf.image.crop_and_resize(img.astype(np.float32), b, [0, 1], [3, 3])
    with tf.Session():
        err = tf.test.compute_gradient_error(b, [2, 4], y, [2, 3, 3, 1],
                                             x_init_value=boxes.astype(np.float32), delta=1e-3)
    assert err < 5e-2


def test_composite_gradients():
    x = RNG.uniform(0.1, 0.9, (1, 3, 3, 3))
    checks = {
        "patches": (lambda t: tf.image.extract_image_patches(t, [1, 2, 2, 1], [1, 1, 2, 1],
                                                             [1, 1, 1, 1], "SAME"), 1e-6),
        "contrast": (lambda t: tf.image.adjust_contrast(tf.cast(t, tf.float32), 1.5), 2e-3),
        "brightness": (lambda t: tf.image.adjust_brightness(t, 0.1), 1e-3),  # via float32
        "gamma": (lambda t: tf.image.adjust_gamma(t, 2.0), 1e-3),
        "flip_rot": (lambda t: tf.image.rot90(tf.image.flip_left_right(t), 1), 1e-6),
        "crop_pad": (lambda t: tf.image.pad_to_bounding_box(
            tf.image.crop_to_bounding_box(t, 1, 1, 2, 2), 0, 1, 3, 4), 1e-6),
        "yiq": (tf.image.rgb_to_yiq, 1e-6),
        "tv": (tf.image.total_variation, 1e-4),
        "standardize": (tf.image.per_image_standardization, 1e-2),
    }
    for name, (fn, tol) in checks.items():
        err = grad_err(fn, x)
        assert err < tol, (name, err)
