"""tf.image colour ops: RGBToHSV / HSVToRGB, AdjustContrastv2 / AdjustHue /
AdjustSaturation (TF 1.15's CPU kernels, float32), and the composites built on them and
on ordinary ops: convert_image_dtype (TF's scaling and saturation rules), grayscale, YIQ,
YUV, brightness/contrast/gamma/hue/saturation adjustments and their random versions,
per_image_standardization, total_variation, image_gradients, sobel_edges, psnr, ssim and
ssim_multiscale."""
from __future__ import annotations

from typing import Any

import numpy as np

from flowrt import dtypes as _dt
from flowrt.graph import Tensor, apply_op, control_dependencies, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape

from ._common import ks
from .image_common import host, invalid, shape_error, tf_mod, to_device


# =======================================================================================
# ops
# =======================================================================================
def _rgb_shape(op: Any) -> list[TensorShape]:
    d = op.inputs[0].shape.as_tuple()
    if d is not None:
        if len(d) < 1:
            raise shape_error(op, f"Shape must be at least rank 1 but is rank {len(d)}")
        if d[-1] is not None and d[-1] != 3:
            raise shape_error(op, f"Dimension must be 3 but is {d[-1]}")
    return [op.inputs[0].shape]


def _adjust_shape(op: Any) -> list[TensorShape]:
    d = op.inputs[0].shape.as_tuple()
    if d is not None and len(d) < 3:
        raise shape_error(op, f"Shape must be at least rank 3 but is rank {len(d)}")
    s = op.inputs[1].shape.as_tuple()
    if s is not None and len(s) != 0:
        raise shape_error(op, f"Shape must be rank 0 but is rank {len(s)}")
    return [op.inputs[0].shape]


_FLOAT_T = "T: {half, bfloat16, float, double} = DT_FLOAT"
ks.op(
    OpDef("RGBToHSV", inputs=["images: T"], outputs=["output: T"], attrs=[_FLOAT_T],
          shape_fn=_rgb_shape, doc="Converts RGB in [0, 1] to HSV in [0, 1]."),
    OpDef("HSVToRGB", inputs=["images: T"], outputs=["output: T"], attrs=[_FLOAT_T],
          shape_fn=_rgb_shape, doc="Converts HSV in [0, 1] to RGB."),
    OpDef("AdjustContrastv2", inputs=["images: T", "contrast_factor: float"],
          outputs=["output: T"], attrs=["T: {half, float} = DT_FLOAT"],
          shape_fn=_adjust_shape,
          doc="(x - mean) * contrast_factor + mean, per image and channel."),
    OpDef("AdjustHue", inputs=["images: T", "delta: float"], outputs=["output: T"],
          attrs=["T: {half, float} = DT_FLOAT"], shape_fn=_adjust_shape,
          doc="Rotates the hue of RGB images by delta (a fraction of the circle)."),
    OpDef("AdjustSaturation", inputs=["images: T", "scale: float"], outputs=["output: T"],
          attrs=["T: {half, float} = DT_FLOAT"], shape_fn=_adjust_shape,
          doc="Multiplies the saturation of RGB images by scale."),
)


def _check_rgb(x: np.ndarray, what: str = "input") -> None:
    if x.ndim < 1 or x.shape[-1] != 3:
        got = x.shape[-1] if x.ndim else 0
        raise invalid(f"{what} must have 3 channels but input only has {got} channels.")


@ks.kernel("RGBToHSV")
def _rgb_to_hsv_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    out_dt = ctx.output_dtypes[0].np

    def compute(images: Any) -> Any:
        _check_rgb(images)
        wide = xp.float64 if images.dtype == np.float64 else xp.float32
        x = images.astype(wide)
        r, g, b = x[..., 0], x[..., 1], x[..., 2]
        v = xp.maximum(xp.maximum(r, g), b)
        rng = v - xp.minimum(xp.minimum(r, g), b)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = xp.where(v > 0, rng / v, 0).astype(wide)
            norm = (1 / rng) * wide(1.0 / 6.0) if wide is np.float64 else \
                (wide(1) / rng) * (wide(1) / wide(6))
            h = xp.where(r == v, norm * (g - b),
                         xp.where(g == v, norm * (b - r) + wide(2) / wide(6),
                                  norm * (r - g) + wide(4) / wide(6)))
        h = xp.where(rng > 0, h, 0).astype(wide)
        h = xp.where(h < 0, h + 1, h)
        return xp.stack([h, s, v], axis=-1).astype(out_dt)

    return compute


@ks.kernel("HSVToRGB")
def _hsv_to_rgb_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    out_dt = ctx.output_dtypes[0].np

    def compute(images: Any) -> Any:
        _check_rgb(images)
        wide = xp.float64 if images.dtype == np.float64 else xp.float32
        x = images.astype(wide)
        h, s, v = x[..., 0], x[..., 1], x[..., 2]
        dh = h * wide(6)
        dr = xp.clip(xp.abs(dh - 3) - 1, 0, 1)
        dg = xp.clip(-xp.abs(dh - 2) + 2, 0, 1)
        db = xp.clip(-xp.abs(dh - 4) + 2, 0, 1)
        one_s = -s + 1
        return xp.stack([(one_s + s * dr) * v, (one_s + s * dg) * v, (one_s + s * db) * v],
                        axis=-1).astype(out_dt)

    return compute


def _adjust_args(ctx: Any, images: Any, factor: Any, fname: str) -> tuple[np.ndarray, float]:
    x = host(ctx, images)
    f = host(ctx, factor)
    if x.ndim < 3:
        raise invalid(f"input must be at least 3-D, got shape{list(x.shape)}")
    if f.ndim != 0:
        raise invalid(f"{fname} must be scalar: {list(f.shape)}")
    return x, float(f)


@ks.kernel("AdjustContrastv2")
def _adjust_contrast_kernel(ctx: Any) -> Any:
    def compute(images: Any, factor: Any) -> Any:
        x, f = _adjust_args(ctx, images, factor, "contrast_factor")
        h, w = x.shape[-3], x.shape[-2]
        mean = (x.astype(np.float32).sum(axis=(-3, -2), keepdims=True, dtype=np.float32)
                / np.float32(h * w)).astype(x.dtype)
        adj = ((x - mean).astype(np.float32) * np.float32(f)).astype(x.dtype)
        return to_device(ctx, (mean + adj).astype(x.dtype))

    return compute


def _rgb_to_hv_range(r: np.ndarray, g: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """TF's internal rgb_to_hv_range: hue in [0, 6) and the value range, elementwise."""
    rg = r < g
    cat = np.where(rg, np.where(b < r, 1, np.where(b > g, 3, 2)),
                   np.where(b < g, 0, np.where(b > r, 4, 5)))
    vmax = np.select([cat == 0, cat == 1, cat == 2, cat == 3, cat == 4], [r, g, g, b, b], r)
    vmid = np.select([cat == 0, cat == 1, cat == 2, cat == 3, cat == 4], [g, r, b, g, r], b)
    vmin = np.select([cat == 0, cat == 1, cat == 2, cat == 3, cat == 4], [b, b, r, r, g], g)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = ((vmid - vmin) / (vmax - vmin)).astype(np.float32)
    inc = (cat & 1) == 0
    h = (cat.astype(np.float32) + np.where(inc, ratio, np.float32(1) - ratio)).astype(np.float32)
    h = np.where(vmax == vmin, np.float32(0), h)
    return h, vmin, vmax


def _hv_range_to_rgb(h: np.ndarray, vmin: np.ndarray, vmax: np.ndarray) -> np.ndarray:
    cat = h.astype(np.int64)
    ratio = (h - cat.astype(np.float32)).astype(np.float32)
    ratio = np.where((cat & 1) == 0, ratio, np.float32(1) - ratio)
    vmid = (vmin + ratio * (vmax - vmin)).astype(np.float32)
    conds = [cat == 0, cat == 1, cat == 2, cat == 3, cat == 4]
    r = np.select(conds, [vmax, vmid, vmin, vmin, vmid], vmax)
    g = np.select(conds, [vmid, vmax, vmax, vmid, vmin], vmin)
    b = np.select(conds, [vmin, vmin, vmid, vmax, vmax], vmid)
    return np.stack([r, g, b], axis=-1)


@ks.kernel("AdjustHue")
def _adjust_hue_kernel(ctx: Any) -> Any:
    def compute(images: Any, delta: Any) -> Any:
        x, d = _adjust_args(ctx, images, delta, "delta")
        _check_rgb(x)
        f = x.astype(np.float32)
        h, vmin, vmax = _rgb_to_hv_range(f[..., 0], f[..., 1], f[..., 2])
        h = (h + np.float32(d) * np.float32(6)).astype(np.float32)
        # TF's add/subtract loops, one step at a time (no fmod rounding)
        while (h < 0).any():
            h = np.where(h < 0, h + np.float32(6), h).astype(np.float32)
        while (h >= 6).any():
            h = np.where(h >= 6, h - np.float32(6), h).astype(np.float32)
        return to_device(ctx, _hv_range_to_rgb(h, vmin, vmax).astype(x.dtype))

    return compute


@ks.kernel("AdjustSaturation")
def _adjust_saturation_kernel(ctx: Any) -> Any:
    def compute(images: Any, scale: Any) -> Any:
        x, sc = _adjust_args(ctx, images, scale, "scale")
        _check_rgb(x)
        f = x.astype(np.float32)
        r, g, b = f[..., 0], f[..., 1], f[..., 2]
        v = np.maximum(r, np.maximum(g, b))
        rng = v - np.minimum(r, np.minimum(g, b))
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.where(v > 0, rng / v, np.float32(0)).astype(np.float32)
            norm = (np.float32(1) / (np.float32(6) * rng)).astype(np.float32)
            h = np.where(r == v, norm * (g - b),
                         np.where(g == v, (norm * (b - r)).astype(np.float64) + 2.0 / 6.0,
                                  (norm * (r - g)).astype(np.float64) + 4.0 / 6.0)
                         ).astype(np.float32)
        h = np.where(rng <= 0, np.float32(0), h)
        h = np.where(h < 0, h + np.float32(1), h).astype(np.float32)
        s = np.clip(s * np.float32(sc), np.float32(0), np.float32(1)).astype(np.float32)
        c = s * v
        m = v - c
        dh = (h * np.float32(6)).astype(np.float32)
        cat = dh.astype(np.int64)
        fm = dh.copy()
        while (fm <= 0).any():
            fm = np.where(fm <= 0, fm + np.float32(2), fm).astype(np.float32)
        while (fm >= 2).any():
            fm = np.where(fm >= 2, fm - np.float32(2), fm).astype(np.float32)
        xx = (c * (np.float32(1) - np.abs(fm - np.float32(1)))).astype(np.float32)
        z = np.zeros_like(c)
        conds = [cat == 0, cat == 1, cat == 2, cat == 3, cat == 4, cat == 5]
        rr = np.select(conds, [c, xx, z, z, xx, c], z)
        gg = np.select(conds, [xx, c, c, xx, z, z], z)
        bb = np.select(conds, [z, z, xx, c, c, xx], z)
        out = np.stack([rr + m, gg + m, bb + m], axis=-1)
        return to_device(ctx, out.astype(x.dtype))

    return compute


@ks.gradient("AdjustContrastv2")
def _adjust_contrast_grad(op: Any, grad: Tensor) -> list[Any]:
    """out = mean + f * (x - mean) per image and channel, so dout/dx = f + (1 - f) / N
    spread over the image, and dout/df = x - mean. TF 1.15 registers no gradient for
    AdjustContrastv2; flowrt's follows from the formula."""
    tf = tf_mod()
    x, f = op.inputs[0], op.inputs[1]
    mean = tf.reduce_mean(x, axis=[-3, -2], keepdims=True)
    fc = tf.cast(f, grad.dtype)
    gx = grad * fc + (1 - fc) * tf.reduce_mean(grad, axis=[-3, -2], keepdims=True)
    gf = tf.reduce_sum(tf.cast(grad * (x - mean), _dt.float32))
    return [gx, gf]


ks.not_differentiable("RGBToHSV", "HSVToRGB", "AdjustHue", "AdjustSaturation")


@ks.api("image.rgb_to_hsv")
def rgb_to_hsv(images: Any, name: str | None = None) -> Tensor:
    """RGB in [0, 1] (last dimension of 3) to HSV in [0, 1] (the RGBToHSV op)."""
    return apply_op("RGBToHSV", name=name, images=images)


@ks.api("image.hsv_to_rgb")
def hsv_to_rgb(images: Any, name: str | None = None) -> Tensor:
    """HSV in [0, 1] (last dimension of 3) to RGB (the HSVToRGB op)."""
    return apply_op("HSVToRGB", name=name, images=images)


# =======================================================================================
# convert_image_dtype and the grayscale / YIQ / YUV conversions
# =======================================================================================
@ks.api("image.convert_image_dtype")
def convert_image_dtype(image: Any, dtype: Any, saturate: bool = False,
                        name: str | None = None) -> Tensor:
    """Converts pixel values between dtypes, rescaling: floats span [0, 1), integers
    [0, MAX]. Integer to integer shifts by the ratio of the ranges; float to integer
    multiplies by ``MAX + 0.5`` then casts (clamping first if ``saturate``).

    :raises AttributeError: for a dtype (or image dtype) neither floating nor integer
    """
    tf = tf_mod()
    image = convert_to_tensor(image, name="image")
    dtype = _dt.as_dtype(dtype)
    if not dtype.is_floating and not dtype.is_integer:
        raise AttributeError("dtype must be either floating point or integer")
    idt = image.dtype.base_dtype
    if not idt.is_floating and not idt.is_integer:
        raise AttributeError("image dtype must be either floating point or integer")
    if dtype == idt:
        return tf.identity(image, name=name)
    with name_scope(name, "convert_image", [image]) as name:
        if idt.is_integer and dtype.is_integer:
            sin, sout = int(idt.max), int(dtype.max)
            if sin > sout:
                scaled = tf.floordiv(image, (sin + 1) // (sout + 1))
                if saturate:
                    return tf.saturate_cast(scaled, dtype, name=name)
                return tf.cast(scaled, dtype, name=name)
            cast = tf.saturate_cast(image, dtype) if saturate else tf.cast(image, dtype)
            return tf.multiply(cast, (sout + 1) // (sin + 1), name=name)
        if idt.is_floating and dtype.is_floating:
            return tf.cast(image, dtype, name=name)
        if idt.is_integer:
            cast = tf.cast(image, dtype)
            return tf.multiply(cast, 1.0 / idt.max, name=name)
        scaled = tf.multiply(image, float(dtype.max) + 0.5)
        if saturate:
            return tf.saturate_cast(scaled, dtype, name=name)
        return tf.cast(scaled, dtype, name=name)


@ks.api("image.rgb_to_grayscale")
def rgb_to_grayscale(images: Any, name: str | None = None) -> Tensor:
    """Weighted sum 0.2989 R + 0.587 G + 0.114 B, keeping a last dimension of 1."""
    tf = tf_mod()
    with name_scope(name, "rgb_to_grayscale", [images]) as name:
        images = convert_to_tensor(images, name="images")
        orig = images.dtype.base_dtype
        flt = convert_image_dtype(images, _dt.float32)
        gray = tf.tensordot(flt, [0.2989, 0.587, 0.114], [-1, -1])
        gray = tf.expand_dims(gray, -1)
        return convert_image_dtype(gray, orig, name=name)


@ks.api("image.grayscale_to_rgb")
def grayscale_to_rgb(images: Any, name: str | None = None) -> Tensor:
    """Repeats the single channel of grayscale images three times.

    :raises ValueError: for a static last dimension other than 1, or rank < 2
    """
    tf = tf_mod()
    from .image_ops import with_dependencies
    with name_scope(name, "grayscale_to_rgb", [images]) as name:
        images = convert_to_tensor(images, name="images")
        s = images.shape
        try:
            shape = s.with_rank(2) if s.ndims is None else s.with_rank_at_least(2)
        except ValueError:
            raise ValueError(f"A grayscale image (shape {s}) must be at least "
                             "two-dimensional.") from None
        deps: list[Any] = []
        if shape.is_fully_defined():
            if shape.as_list()[-1] != 1:
                raise ValueError("Last dimension of a grayscale image should be size 1.")
        else:
            deps = [tf.assert_equal(tf.shape(images)[-1], 1,
                                    message="Last dimension of a grayscale image should be "
                                            "size 1."),
                    tf.assert_greater_equal(tf.rank(images), 3,
                                            message="A grayscale image must be at least "
                                                    "two-dimensional.")]
        images = with_dependencies(deps, images)
        rank_1 = tf.expand_dims(tf.rank(images) - 1, 0)
        multiples = tf.concat([tf.ones(rank_1, dtype=_dt.int32), tf.expand_dims(3, 0)], 0)
        rgb = tf.tile(images, multiples, name=name)
        if images.shape.ndims is not None:
            rgb.set_shape(images.shape[:-1].concatenate([3]))
        return rgb


_RGB_TO_YIQ = [[0.299, 0.59590059, 0.2115], [0.587, -0.27455667, -0.52273617],
               [0.114, -0.32134392, 0.31119955]]
_YIQ_TO_RGB = [[1, 1, 1], [0.95598634, -0.27201283, -1.10674021],
               [0.6208248, -0.64720424, 1.70423049]]
_RGB_TO_YUV = [[0.299, -0.14714119, 0.61497538], [0.587, -0.28886916, -0.51496512],
               [0.114, 0.43601035, -0.10001026]]
_YUV_TO_RGB = [[1, 1, 1], [0, -0.394642334, 2.03206185], [1.13988303, -0.58062185, 0]]


def _color_matrix(images: Any, kernel: list[list[float]]) -> Tensor:
    tf = tf_mod()
    images = convert_to_tensor(images, name="images")
    k = convert_to_tensor(kernel, dtype=images.dtype.base_dtype, name="kernel")
    nd = images.shape.ndims
    return tf.tensordot(images, k, axes=[[nd - 1], [0]])


@ks.api("image.rgb_to_yiq")
def rgb_to_yiq(images: Any) -> Tensor:
    """RGB to YIQ (a 3x3 matrix on the last dimension)."""
    return _color_matrix(images, _RGB_TO_YIQ)


@ks.api("image.yiq_to_rgb")
def yiq_to_rgb(images: Any) -> Tensor:
    """YIQ to RGB (a 3x3 matrix on the last dimension)."""
    return _color_matrix(images, _YIQ_TO_RGB)


@ks.api("image.rgb_to_yuv")
def rgb_to_yuv(images: Any) -> Tensor:
    """RGB to YUV (a 3x3 matrix on the last dimension)."""
    return _color_matrix(images, _RGB_TO_YUV)


@ks.api("image.yuv_to_rgb")
def yuv_to_rgb(images: Any) -> Tensor:
    """YUV to RGB (a 3x3 matrix on the last dimension)."""
    return _color_matrix(images, _YUV_TO_RGB)


# =======================================================================================
# adjustments
# =======================================================================================
def _to_float(image: Tensor) -> Tensor:
    if image.dtype.base_dtype in (_dt.float16, _dt.float32):
        return image
    return convert_image_dtype(image, _dt.float32)


@ks.api("image.adjust_brightness")
def adjust_brightness(image: Any, delta: Any) -> Tensor:
    """Adds ``delta`` to every pixel (in the float domain for integer images)."""
    tf = tf_mod()
    with name_scope(None, "adjust_brightness", [image, delta]) as name:
        image = convert_to_tensor(image, name="image")
        orig = image.dtype.base_dtype
        flt = _to_float(image)
        adjusted = tf.add(flt, tf.cast(delta, flt.dtype), name=name)
        return convert_image_dtype(adjusted, orig, saturate=True)


@ks.api("image.adjust_contrast")
def adjust_contrast(images: Any, contrast_factor: Any) -> Tensor:
    """``(x - mean) * contrast_factor + mean`` per image and channel (AdjustContrastv2)."""
    with name_scope(None, "adjust_contrast", [images, contrast_factor]) as name:
        images = convert_to_tensor(images, name="images")
        orig = images.dtype.base_dtype
        flt = _to_float(images)
        adjusted = apply_op("AdjustContrastv2", name=name, images=flt,
                            contrast_factor=contrast_factor)
        return convert_image_dtype(adjusted, orig, saturate=True)


@ks.api("image.adjust_gamma")
def adjust_gamma(image: Any, gamma: Any = 1, gain: Any = 1) -> Tensor:
    """``gain * image ** gamma`` (in the float domain for integer images).

    :raises ValueError: for a negative Python ``gamma``
    """
    from .image_ops import _assert, with_dependencies
    with name_scope(None, "adjust_gamma", [image, gamma, gain]):
        image = convert_to_tensor(image, name="image")
        orig = image.dtype.base_dtype
        flt = _to_float(image)
        deps = _assert(gamma >= 0, ValueError, "Gamma should be a non-negative real number.")
        if deps:
            gamma = with_dependencies(deps, gamma)
        adjusted = gain * flt ** gamma
        return convert_image_dtype(adjusted, orig, saturate=True)


@ks.api("image.adjust_hue")
def adjust_hue(image: Any, delta: Any, name: str | None = None) -> Tensor:
    """Rotates the hue of RGB images by ``delta`` (a fraction of the colour circle)."""
    with name_scope(name, "adjust_hue", [image]):
        image = convert_to_tensor(image, name="image")
        orig = image.dtype.base_dtype
        flt = _to_float(image)
        rgb = apply_op("AdjustHue", images=flt, delta=delta)
        return convert_image_dtype(rgb, orig)


@ks.api("image.adjust_saturation")
def adjust_saturation(image: Any, saturation_factor: Any, name: str | None = None) -> Tensor:
    """Multiplies the saturation of RGB images by ``saturation_factor`` (clamped to 1)."""
    with name_scope(name, "adjust_saturation", [image]):
        image = convert_to_tensor(image, name="image")
        orig = image.dtype.base_dtype
        flt = _to_float(image)
        adjusted = apply_op("AdjustSaturation", images=flt, scale=saturation_factor)
        return convert_image_dtype(adjusted, orig)


@ks.api("image.random_brightness")
def random_brightness(image: Any, max_delta: float, seed: int | None = None) -> Tensor:
    """:func:`adjust_brightness` by a delta uniform in [-max_delta, max_delta).

    :raises ValueError: for a negative ``max_delta``
    """
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    delta = tf_mod().random_uniform([], -max_delta, max_delta, seed=seed)
    return adjust_brightness(image, delta)


@ks.api("image.random_contrast")
def random_contrast(image: Any, lower: float, upper: float, seed: int | None = None) -> Tensor:
    """:func:`adjust_contrast` by a factor uniform in [lower, upper).

    :raises ValueError: unless 0 <= lower < upper
    """
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    factor = tf_mod().random_uniform([], lower, upper, seed=seed)
    return adjust_contrast(image, factor)


@ks.api("image.random_hue")
def random_hue(image: Any, max_delta: float, seed: int | None = None) -> Tensor:
    """:func:`adjust_hue` by a delta uniform in [-max_delta, max_delta).

    :raises ValueError: unless 0 <= max_delta <= 0.5
    """
    if max_delta > 0.5:
        raise ValueError("max_delta must be <= 0.5.")
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    delta = tf_mod().random_uniform([], -max_delta, max_delta, seed=seed)
    return adjust_hue(image, delta)


@ks.api("image.random_saturation")
def random_saturation(image: Any, lower: float, upper: float,
                      seed: int | None = None) -> Tensor:
    """:func:`adjust_saturation` by a factor uniform in [lower, upper).

    :raises ValueError: unless 0 <= lower < upper
    """
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    factor = tf_mod().random_uniform([], lower, upper, seed=seed)
    return adjust_saturation(image, factor)


@ks.api("image.per_image_standardization")
def per_image_standardization(image: Any) -> Tensor:
    """``(x - mean) / max(stddev, 1 / sqrt(N))`` over each image's N values (float32;
    TF 1.15's variance as ``E[x^2] - E[x]^2``)."""
    tf = tf_mod()
    from .image_ops import _assert_at_least_3d
    with name_scope(None, "per_image_standardization", [image]) as scope:
        image = convert_to_tensor(image, name="image")
        image = _assert_at_least_3d(image)
        num_pixels = tf.reduce_prod(tf.shape(image)[-3:])
        image = tf.cast(image, dtype=_dt.float32)
        mean = tf.reduce_mean(image, axis=[-1, -2, -3], keepdims=True)
        variance = (tf.reduce_mean(tf.square(image), axis=[-1, -2, -3], keepdims=True)
                    - tf.square(mean))
        variance = tf.nn.relu(variance)
        stddev = tf.sqrt(variance)
        min_stddev = tf.rsqrt(tf.cast(num_pixels, _dt.float32))
        scale = tf.maximum(stddev, min_stddev)
        image = tf.subtract(image, mean)
        return tf.div(image, scale, name=scope)


# =======================================================================================
# image statistics: total variation, gradients, Sobel, PSNR, SSIM
# =======================================================================================
@ks.api("image.total_variation")
def total_variation(images: Any, name: str | None = None) -> Tensor:
    """Sum of absolute differences of neighbouring pixels (per image for 4-D input).

    :raises ValueError: for input not of rank 3 or 4
    """
    tf = tf_mod()
    with name_scope(name, "total_variation"):
        images = convert_to_tensor(images)
        nd = images.shape.ndims
        if nd == 3:
            d1 = images[1:, :, :] - images[:-1, :, :]
            d2 = images[:, 1:, :] - images[:, :-1, :]
            axis = None
        elif nd == 4:
            d1 = images[:, 1:, :, :] - images[:, :-1, :, :]
            d2 = images[:, :, 1:, :] - images[:, :, :-1, :]
            axis = [1, 2, 3]
        else:
            raise ValueError("'images' must be either 3 or 4-dimensional.")
        return (tf.reduce_sum(tf.abs(d1), axis=axis) + tf.reduce_sum(tf.abs(d2), axis=axis))


@ks.api("image.image_gradients")
def image_gradients(image: Any) -> tuple[Tensor, Tensor]:
    """(dy, dx): forward differences of 4-D images, zero in the last row / column.

    :raises ValueError: for input not of rank 4
    """
    tf = tf_mod()
    image = convert_to_tensor(image)
    if image.shape.ndims != 4:
        raise ValueError("image_gradients expects a 4D tensor [batch_size, h, w, d], not "
                         f"{image.shape}.")
    shp = tf.shape(image)
    b, h, w, d = tf.unstack(shp)
    dy = image[:, 1:, :, :] - image[:, :-1, :, :]
    dx = image[:, :, 1:, :] - image[:, :, :-1, :]
    dy = tf.concat([dy, tf.zeros(tf.stack([b, 1, w, d]), image.dtype)], 1)
    dy = tf.reshape(dy, shp)
    dx = tf.concat([dx, tf.zeros(tf.stack([b, h, 1, d]), image.dtype)], 2)
    dx = tf.reshape(dx, shp)
    return dy, dx


def _depthwise_valid(x: Tensor, kernel: Tensor) -> Tensor:
    return tf_mod().nn.depthwise_conv2d(x, kernel, [1, 1, 1, 1], "VALID")


@ks.api("image.sobel_edges")
def sobel_edges(image: Any) -> Tensor:
    """Sobel responses [..., 2] (dy then dx) of 4-D images, reflect-padded."""
    tf = tf_mod()
    image = convert_to_tensor(image)
    static = image.shape
    shp = tf.shape(image)
    kernels = np.array([[[-1, -2, -1], [0, 0, 0], [1, 2, 1]],
                        [[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]]])
    kernels = np.expand_dims(np.transpose(kernels, (1, 2, 0)), -2)
    k = tf.constant(kernels, dtype=image.dtype.base_dtype)
    k = tf.tile(k, tf.stack([1, 1, shp[-1], 1]), name="sobel_filters")
    padded = tf.pad(image, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT")
    out = _depthwise_valid(padded, k)
    out = tf.reshape(out, tf.concat([shp, [2]], 0))
    if static.ndims is not None:
        out.set_shape(static.concatenate([2]))
    return out


def _verify_compatible(img1: Tensor, img2: Tensor) -> tuple[Tensor, Tensor, list[Any]]:
    tf = tf_mod()
    s1 = img1.shape.with_rank_at_least(3)
    s2 = img2.shape.with_rank_at_least(3)
    s1[-3:].assert_is_compatible_with(s2[-3:])
    if s1.ndims is not None and s2.ndims is not None:
        for d1, d2 in zip(reversed(s1.as_list()[:-3]), reversed(s2.as_list()[:-3])):
            if not (d1 == 1 or d2 == 1 or d1 is None or d2 is None or d1 == d2):
                raise ValueError(f"Two images are not compatible: {s1} and {s2}")
    sh1, sh2 = tf.shape_n([img1, img2])
    checks = [tf.Assert(tf.greater_equal(tf.size(sh1), 3), [sh1, sh2], summarize=10),
              tf.Assert(tf.reduce_all(tf.equal(sh1[-3:], sh2[-3:])), [sh1, sh2],
                        summarize=10)]
    return sh1, sh2, checks


@ks.api("image.psnr")
def psnr(a: Any, b: Any, max_val: Any, name: str | None = None) -> Tensor:
    """Peak signal-to-noise ratio of two batches of images, per image (float32)."""
    tf = tf_mod()
    with name_scope(name, "PSNR", [a, b]):
        a = convert_to_tensor(a)
        b = convert_to_tensor(b)
        max_val = tf.cast(max_val, a.dtype)
        max_val = convert_image_dtype(max_val, _dt.float32)
        a = convert_image_dtype(a, _dt.float32)
        b = convert_image_dtype(b, _dt.float32)
        mse = tf.reduce_mean(tf.squared_difference(a, b), [-3, -2, -1])
        val = tf.subtract(20 * tf.log(max_val) / tf.log(10.0),
                          np.float32(10 / np.log(10)) * tf.log(mse), name="psnr")
        _, _, checks = _verify_compatible(a, b)
        with control_dependencies(checks):
            return tf.identity(val)


def _ssim_helper(x: Tensor, y: Tensor, reducer: Any, max_val: Any, compensation: float = 1.0,
                 k1: float = 0.01, k2: float = 0.03) -> tuple[Tensor, Tensor]:
    tf = tf_mod()
    c1 = (k1 * max_val) ** 2
    c2 = (k2 * max_val) ** 2
    mean0 = reducer(x)
    mean1 = reducer(y)
    num0 = mean0 * mean1 * 2.0
    den0 = tf.square(mean0) + tf.square(mean1)
    luminance = (num0 + c1) / (den0 + c1)
    num1 = reducer(x * y) * 2.0
    den1 = reducer(tf.square(x) + tf.square(y))
    c2 *= compensation
    cs = (num1 - num0 + c2) / (den1 - den0 + c2)
    return luminance, cs


def _fspecial_gauss(size: Tensor, sigma: Tensor) -> Tensor:
    tf = tf_mod()
    coords = tf.cast(tf.range(size), sigma.dtype)
    coords -= tf.cast(size - 1, sigma.dtype) / 2.0
    g = tf.square(coords)
    g *= -0.5 / tf.square(sigma)
    g = tf.reshape(g, [1, -1]) + tf.reshape(g, [-1, 1])
    g = tf.reshape(g, [1, -1])
    g = tf.nn.softmax(g)
    return tf.reshape(g, tf.stack([size, size, 1, 1]))


def _ssim_per_channel(img1: Tensor, img2: Tensor, max_val: Any = 1.0, filter_size: int = 11,
                      filter_sigma: float = 1.5, k1: float = 0.01,
                      k2: float = 0.03) -> tuple[Tensor, Tensor]:
    tf = tf_mod()
    fs = tf.constant(filter_size, dtype=_dt.int32)
    sigma = tf.constant(filter_sigma, dtype=img1.dtype.base_dtype)
    sh1, sh2 = tf.shape_n([img1, img2])
    checks = [tf.Assert(tf.reduce_all(tf.greater_equal(sh1[-3:-1], fs)), [sh1, fs],
                        summarize=8),
              tf.Assert(tf.reduce_all(tf.greater_equal(sh2[-3:-1], fs)), [sh2, fs],
                        summarize=8)]
    with control_dependencies(checks):
        img1 = tf.identity(img1)
    kernel = _fspecial_gauss(fs, sigma)
    kernel = tf.tile(kernel, tf.stack([1, 1, sh1[-1], 1]))

    def reducer(x: Tensor) -> Tensor:
        shape = tf.shape(x)
        x = tf.reshape(x, tf.concat([[-1], shape[-3:]], 0))
        y = _depthwise_valid(x, kernel)
        return tf.reshape(y, tf.concat([shape[:-3], tf.shape(y)[1:]], 0))

    luminance, cs = _ssim_helper(img1, img2, reducer, max_val, 1.0, k1, k2)
    axes = tf.constant([-3, -2], dtype=_dt.int32)
    return tf.reduce_mean(luminance * cs, axes), tf.reduce_mean(cs, axes)


@ks.api("image.ssim")
def ssim(img1: Any, img2: Any, max_val: Any, filter_size: int = 11, filter_sigma: float = 1.5,
         k1: float = 0.01, k2: float = 0.03) -> Tensor:
    """Structural similarity of two batches of images (Gaussian window), per image."""
    tf = tf_mod()
    with name_scope(None, "SSIM", [img1, img2]):
        img1 = convert_to_tensor(img1, name="img1")
        img2 = convert_to_tensor(img2, name="img2")
        _, _, checks = _verify_compatible(img1, img2)
        with control_dependencies(checks):
            img1 = tf.identity(img1)
        max_val = convert_image_dtype(tf.cast(max_val, img1.dtype), _dt.float32)
        img1 = convert_image_dtype(img1, _dt.float32)
        img2 = convert_image_dtype(img2, _dt.float32)
        per_channel, _ = _ssim_per_channel(img1, img2, max_val, filter_size, filter_sigma,
                                           k1, k2)
        return tf.reduce_mean(per_channel, [-1])


_MSSSIM_WEIGHTS = (0.0448, 0.2856, 0.3001, 0.2363, 0.1333)


@ks.api("image.ssim_multiscale")
def ssim_multiscale(img1: Any, img2: Any, max_val: Any, power_factors: Any = _MSSSIM_WEIGHTS,
                    filter_size: int = 11, filter_sigma: float = 1.5, k1: float = 0.01,
                    k2: float = 0.03) -> Tensor:
    """Multi-scale SSIM: SSIM at the finest scale times contrast-structure terms of
    2x average-pooled copies, weighted by ``power_factors``."""
    tf = tf_mod()
    with name_scope(None, "MS-SSIM", [img1, img2]):
        img1 = convert_to_tensor(img1, name="img1")
        img2 = convert_to_tensor(img2, name="img2")
        sh1, sh2, checks = _verify_compatible(img1, img2)
        with control_dependencies(checks):
            img1 = tf.identity(img1)
        max_val = convert_image_dtype(tf.cast(max_val, img1.dtype), _dt.float32)
        img1 = convert_image_dtype(img1, _dt.float32)
        img2 = convert_image_dtype(img2, _dt.float32)
        imgs = [img1, img2]
        heads = [s[:-3] for s in (sh1, sh2)]
        tails = [s[-3:] for s in (sh1, sh2)]
        divisor = [1, 2, 2, 1]
        divisor_t = tf.constant(divisor[1:], dtype=_dt.int32)

        def do_pad(images: list[Tensor], remainder: Tensor) -> list[Tensor]:
            padding = tf.expand_dims(remainder, -1)
            padding = tf.pad(padding, [[1, 0], [1, 0]])
            return [tf.pad(x, padding, mode="SYMMETRIC") for x in images]

        mcs = []
        per_channel = None
        for k in range(len(power_factors)):
            with name_scope(None, f"Scale{k}", imgs):
                if k > 0:
                    flat = [tf.reshape(x, tf.concat([[-1], t], 0)) for x, t in zip(imgs, tails)]
                    remainder = tails[0] % divisor_t
                    need = tf.reduce_any(tf.not_equal(remainder, 0))
                    padded = tf.cond(need, lambda: do_pad(flat, remainder), lambda: flat)
                    down = [tf.nn.avg_pool(x, ksize=divisor, strides=divisor, padding="VALID")
                            for x in padded]
                    tails = [x[1:] for x in tf.shape_n(down)]
                    imgs = [tf.reshape(x, tf.concat([h, t], 0))
                            for x, h, t in zip(down, heads, tails)]
                per_channel, cs = _ssim_per_channel(*imgs, max_val=max_val,
                                                    filter_size=filter_size,
                                                    filter_sigma=filter_sigma, k1=k1, k2=k2)
                mcs.append(tf.nn.relu(cs))
        mcs.pop()
        stacked = tf.stack(mcs + [tf.nn.relu(per_channel)], axis=-1)
        ms = tf.reduce_prod(tf.pow(stacked, tf.constant(list(power_factors), stacked.dtype)),
                            [-1])
        return tf.reduce_mean(ms, [-1])


__all__ = ["rgb_to_hsv", "hsv_to_rgb", "convert_image_dtype", "rgb_to_grayscale",
           "grayscale_to_rgb", "rgb_to_yiq", "yiq_to_rgb", "rgb_to_yuv", "yuv_to_rgb",
           "adjust_brightness", "adjust_contrast", "adjust_gamma", "adjust_hue",
           "adjust_saturation", "random_brightness", "random_contrast", "random_hue",
           "random_saturation", "per_image_standardization", "total_variation",
           "image_gradients", "sobel_edges", "psnr", "ssim", "ssim_multiscale"]

