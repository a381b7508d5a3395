"""tf.image: resizing, crops, flips, colour adjustments and conversions, box ops, PNG/JPEG
codecs (Pillow, optional).

This module holds the geometric composites (flips, rotations, crops, pads, the
``resize_images`` front end); the ops live in ``image_resize`` (resampling, crops, patches),
``image_color`` (colour spaces and adjustments, quality metrics), ``image_boxes`` (NMS,
bounding boxes) and ``image_codecs`` (PNG/JPEG/GIF/BMP through Pillow). The composites
follow TF 1.15's ``image_ops_impl.py``: the same checks (ValueError at build time for
static shapes, Assert ops for dynamic ones), ops and name scopes.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowrt import dtypes as _dt
from flowrt.graph import Tensor, control_dependencies, convert_to_tensor, name_scope

from ._common import constant_value, ks
from .image_common import alias, is_tensor, tf_mod
from . import image_resize  # noqa: F401,E402
from . import image_color  # noqa: F401,E402
from . import image_boxes  # noqa: F401,E402
from . import image_codecs  # noqa: F401,E402
from .image_color import convert_image_dtype  # noqa: F401


# =======================================================================================
# checks (TF's _Check3DImage / _CheckAtLeast3DImage / _assert)
# =======================================================================================
def _assert(cond: Any, ex_type: type, msg: str) -> list[Any]:
    """An Assert op for a tensor condition; raise at once for a false Python one."""
    if is_tensor(cond):
        return [tf_mod().Assert(cond, [msg])]
    if not cond:
        raise ex_type(msg)
    return []


def with_dependencies(deps: list[Any], output: Tensor, name: str | None = None) -> Tensor:
    """``output`` through an Identity that runs after ``deps`` (TF's
    ``control_flow_ops.with_dependencies``, which always adds the Identity)."""
    tf = tf_mod()
    with name_scope(name, "control_dependency", list(deps) + [output]) as scope:
        with control_dependencies(deps):
            return tf.identity(output, name=scope)


def _check_at_least_3d(image: Tensor, require_static: bool = True) -> list[Any]:
    tf = tf_mod()
    s = image.shape
    try:
        shape = s.with_rank(3) if s.ndims is None else s.with_rank_at_least(3)
    except ValueError:
        raise ValueError(f"'image' (shape {s}) must be at least three-dimensional.") from None
    if require_static and not shape.is_fully_defined():
        raise ValueError("'image' must be fully defined.")
    inner = shape[-3:]
    if any(d == 0 for d in inner.as_list()):
        raise ValueError(f"inner 3 dims of 'image.shape' must be > 0: {shape}")
    if not inner.is_fully_defined():
        return [tf.assert_positive(tf.shape(image)[-3:],
                                   ["inner 3 dims of 'image.shape' must be > 0."]),
                tf.assert_greater_equal(tf.rank(image), 3,
                                        message="'image' must be at least three-dimensional.")]
    return []


def _assert_at_least_3d(image: Tensor) -> Tensor:
    return with_dependencies(_check_at_least_3d(image, require_static=False), image)


def _image_dimensions(image: Tensor, rank: int) -> list[Any]:
    """Static dims where known, scalar tensors of ``tf.shape`` elsewhere."""
    tf = tf_mod()
    if image.shape.is_fully_defined():
        return image.shape.as_list()
    static = image.shape.with_rank(rank).as_list()
    dynamic = tf.unstack(tf.shape(image), rank)
    return [s if s is not None else d for s, d in zip(static, dynamic)]


def _batched(image: Tensor) -> tuple[Tensor, bool]:
    """``image`` as a batch of images (rank 4) and whether it already was one."""
    tf = tf_mod()
    nd = image.shape.ndims
    if nd == 3:
        return tf.expand_dims(image, 0), False
    if nd is None:
        image = tf.expand_dims(image, 0)
        image.set_shape([None] * 4)
        return image, False
    if nd != 4:
        raise ValueError(f"'image' (shape {image.shape}) must have either 3 or 4 dimensions.")
    return image, True


def _fix_flip_shape(image: Tensor, result: Tensor) -> Tensor:
    s = image.shape
    result.set_shape([None, None, None] if s.ndims is None else s)
    return result


def _by_rank(image: Tensor, f3: Callable[[], Any], f4: Callable[[], Any],
             message: str) -> Any:
    tf = tf_mod()
    nd = image.shape.ndims
    if nd is None:
        return tf.cond(tf.equal(tf.rank(image), 3), f3, f4)
    if nd == 3:
        return f3()
    if nd == 4:
        return f4()
    raise ValueError(message % (image.shape,))


# =======================================================================================
# flips, rotations, transpose
# =======================================================================================
def _flip(image: Any, axis: int, scope_name: str) -> Tensor:
    tf = tf_mod()
    with name_scope(None, scope_name, [image]):
        image = convert_to_tensor(image, name="image")
        image = _assert_at_least_3d(image)
        return _by_rank(image, lambda: _fix_flip_shape(image, tf.reverse(image, [axis])),
                        lambda: tf.reverse(image, [axis + 1]),
                        "'image' (shape %s)must have either 3 or 4 dimensions.")


@ks.api("image.flip_left_right")
def flip_left_right(image: Any) -> Tensor:
    """Mirrors images horizontally (3-D or 4-D)."""
    return _flip(image, 1, "flip_left_right")


@ks.api("image.flip_up_down")
def flip_up_down(image: Any) -> Tensor:
    """Mirrors images vertically (3-D or 4-D)."""
    return _flip(image, 0, "flip_up_down")


def _random_flip(image: Any, axis: int, seed: int | None, scope_name: str) -> Tensor:
    tf = tf_mod()
    with name_scope(None, scope_name, [image]) as scope:
        image = convert_to_tensor(image, name="image")
        image = _assert_at_least_3d(image)

        def f3() -> Tensor:
            u = tf.random_uniform([], 0, 1.0, seed=seed)
            res = tf.cond(tf.less(u, 0.5), lambda: tf.reverse(image, [axis]),
                          lambda: image, name=scope)
            return _fix_flip_shape(image, res)

        def f4() -> Tensor:
            n = tf.shape(image)[0]
            u = tf.random_uniform(tf.stack([n]), 0, 1.0, seed=seed)
            flips = tf.cast(tf.round(tf.reshape(u, tf.stack([n, 1, 1, 1]))), image.dtype)
            return flips * tf.reverse(image, [axis + 1]) + (1 - flips) * image

        return _by_rank(image, f3, f4, "'image' (shape %s) must have either 3 or 4 "
                                       "dimensions.")


@ks.api("image.random_flip_left_right")
def random_flip_left_right(image: Any, seed: int | None = None) -> Tensor:
    """Mirrors each image horizontally with probability 1/2."""
    return _random_flip(image, 1, seed, "random_flip_left_right")


@ks.api("image.random_flip_up_down")
def random_flip_up_down(image: Any, seed: int | None = None) -> Tensor:
    """Mirrors each image vertically with probability 1/2."""
    return _random_flip(image, 0, seed, "random_flip_up_down")


@ks.api("image.rot90")
def rot90(image: Any, k: Any = 1, name: str | None = None) -> Tensor:
    """Rotates images counter-clockwise by ``k`` quarter turns (``k`` may be a tensor)."""
    tf = tf_mod()
    with name_scope(name, "rot90", [image, k]) as scope:
        image = convert_to_tensor(image, name="image")
        image = _assert_at_least_3d(image)
        k = convert_to_tensor(k, dtype=_dt.int32, name="k")
        k.shape.assert_has_rank(0)
        k = tf.mod(k, 4)

        def rotate(perm: list[int], hw: list[int]) -> Tensor:
            def r90() -> Tensor:
                return tf.transpose(tf.reverse(image, [hw[1]]), perm)

            def r180() -> Tensor:
                return tf.reverse(image, hw)

            def r270() -> Tensor:
                return tf.reverse(tf.transpose(image, perm), [hw[1]])

            cases = [(tf.equal(k, 1), r90), (tf.equal(k, 2), r180), (tf.equal(k, 3), r270)]
            res = tf.case(cases, default=lambda: image, exclusive=True, name=scope)
            s = res.shape if len(perm) == 4 else None
            if len(perm) == 3:
                res.set_shape([None, None, image.shape[2]])
            else:
                res.set_shape([s[0] if s.ndims else None, None, None,
                               s[3] if s.ndims else None])
            return res

        return _by_rank(image, lambda: rotate([1, 0, 2], [0, 1]),
                        lambda: rotate([0, 2, 1, 3], [1, 2]),
                        "'image' (shape %s) must have either 3 or 4 dimensions.")


@ks.api("image.transpose", "image.transpose_image")
def transpose(image: Any, name: str | None = None) -> Tensor:
    """Swaps the height and width dimensions of images."""
    tf = tf_mod()
    with name_scope(name, "transpose", [image]):
        image = convert_to_tensor(image, name="image")
        image = _assert_at_least_3d(image)
        return _by_rank(image, lambda: tf.transpose(image, [1, 0, 2], name=name),
                        lambda: tf.transpose(image, [0, 2, 1, 3], name=name),
                        "'image' (shape %s) must have either 3 or 4 dimensions.")


# =======================================================================================
# crops and pads
# =======================================================================================
@ks.api("image.central_crop")
def central_crop(image: Any, central_fraction: Any) -> Tensor:
    """The central ``central_fraction`` of each image (height and width).

    :raises ValueError: for a static fraction outside (0, 1] or an image not of rank 3/4
    """
    tf = tf_mod()
    with name_scope(None, "central_crop", [image]):
        image = convert_to_tensor(image, name="image")
        frac = constant_value(central_fraction)
        if frac is not None:
            frac = float(frac)
            if frac <= 0.0 or frac > 1.0:
                raise ValueError("central_fraction must be within (0, 1]")
            if frac == 1.0:
                return image
        else:
            deps = _assert(tf.logical_or(central_fraction > 0.0, central_fraction <= 1.0),
                           ValueError, "central_fraction must be within (0, 1]")
            image = with_dependencies(deps, image)
        _assert_at_least_3d(image)
        rank = image.shape.ndims
        if rank != 3 and rank != 4:
            raise ValueError("`image` should either be a Tensor with rank = 3 or rank = 4. "
                             f"Had rank = {rank}.")

        def dim(i: int) -> tuple[Any, bool]:
            v = image.shape.as_list()[i]
            return (v, False) if v is not None else (tf.shape(image)[i], True)

        o = 0 if rank == 3 else 1
        h, dyn_h = dim(o)
        w, dyn_w = dim(o + 1)
        d = image.shape[o + 2]
        dyn_h = dyn_h or frac is None
        dyn_w = dyn_w or frac is None

        def start(size: Any, dyn: bool) -> Any:
            if dyn:
                s = tf.cast(size, _dt.float64)
                return tf.cast((s - s * tf.cast(central_fraction, _dt.float64)) / 2, _dt.int32)
            return int((float(size) - float(size) * frac) / 2)

        hs, ws = start(h, dyn_h), start(w, dyn_w)
        hsz, wsz = h - hs * 2, w - ws * 2
        if rank == 3:
            begin, size = tf.stack([hs, ws, 0]), tf.stack([hsz, wsz, -1])
        else:
            begin, size = tf.stack([0, hs, ws, 0]), tf.stack([-1, hsz, wsz, -1])
        image2 = tf.slice(image, begin, size)
        hw = [None if dyn_h else hsz, None if dyn_w else wsz, d]
        image2.set_shape(hw if rank == 3 else [image.shape[0]] + hw)
        return image2


def _pad_to_bounding_box(image: Any, offset_height: Any, offset_width: Any,
                         target_height: Any, target_width: Any, check_dims: bool) -> Tensor:
    tf = tf_mod()
    with name_scope(None, "pad_to_bounding_box", [image]):
        image = convert_to_tensor(image, name="image")
        image, is_batch = _batched(image)
        batch, height, width, depth = _image_dimensions(image, 4)
        after_w = target_width - offset_width - width
        after_h = target_height - offset_height - height
        if check_dims:
            deps = _check_at_least_3d(image, require_static=False)
            deps += _assert(offset_height >= 0, ValueError, "offset_height must be >= 0")
            deps += _assert(offset_width >= 0, ValueError, "offset_width must be >= 0")
            deps += _assert(after_w >= 0, ValueError, "width must be <= target - offset")
            deps += _assert(after_h >= 0, ValueError, "height must be <= target - offset")
            image = with_dependencies(deps, image)
        paddings = tf.reshape(tf.stack([0, 0, offset_height, after_h, offset_width, after_w,
                                        0, 0]), [4, 2])
        padded = tf.pad(image, paddings)
        padded.set_shape([None if is_tensor(i) else i
                          for i in (batch, target_height, target_width, depth)])
        if not is_batch:
            padded = tf.squeeze(padded, axis=[0])
        return padded


@ks.api("image.pad_to_bounding_box")
def pad_to_bounding_box(image: Any, offset_height: Any, offset_width: Any,
                        target_height: Any, target_width: Any) -> Tensor:
    """Zero-pads images to ``target_height x target_width`` with the image at the offset.

    :raises ValueError: for static arguments that do not fit
    """
    return _pad_to_bounding_box(image, offset_height, offset_width, target_height,
                                target_width, True)


@ks.api("image.crop_to_bounding_box")
def crop_to_bounding_box(image: Any, offset_height: Any, offset_width: Any,
                         target_height: Any, target_width: Any) -> Tensor:
    """The ``target_height x target_width`` window of images at the offset.

    :raises ValueError: for static arguments that do not fit
    """
    tf = tf_mod()
    with name_scope(None, "crop_to_bounding_box", [image]):
        image = convert_to_tensor(image, name="image")
        image, is_batch = _batched(image)
        deps = _check_at_least_3d(image, require_static=False)
        batch, height, width, depth = _image_dimensions(image, 4)
        deps += _assert(offset_width >= 0, ValueError, "offset_width must be >= 0.")
        deps += _assert(offset_height >= 0, ValueError, "offset_height must be >= 0.")
        deps += _assert(target_width > 0, ValueError, "target_width must be > 0.")
        deps += _assert(target_height > 0, ValueError, "target_height must be > 0.")
        deps += _assert(width >= target_width + offset_width, ValueError,
                        "width must be >= target + offset.")
        deps += _assert(height >= target_height + offset_height, ValueError,
                        "height must be >= target + offset.")
        image = with_dependencies(deps, image)
        shp = tf.shape(image)
        cropped = tf.slice(image, tf.stack([0, offset_height, offset_width, 0]),
                           tf.stack([shp[0], target_height, target_width, shp[3]]))
        cropped.set_shape([None if is_tensor(i) else i
                           for i in (batch, target_height, target_width, depth)])
        if not is_batch:
            cropped = tf.squeeze(cropped, axis=[0])
        return cropped


def _max(x: Any, y: Any) -> Any:
    return tf_mod().maximum(x, y) if is_tensor(x) or is_tensor(y) else max(x, y)


def _min(x: Any, y: Any) -> Any:
    return tf_mod().minimum(x, y) if is_tensor(x) or is_tensor(y) else min(x, y)


def _equal(x: Any, y: Any) -> Any:
    return tf_mod().equal(x, y) if is_tensor(x) or is_tensor(y) else x == y


@ks.api("image.resize_image_with_crop_or_pad", "image.resize_with_crop_or_pad")
def resize_image_with_crop_or_pad(image: Any, target_height: Any, target_width: Any) -> Tensor:
    """Centrally crops or zero-pads images to ``target_height x target_width``."""
    with name_scope(None, "resize_image_with_crop_or_pad", [image]):
        image = convert_to_tensor(image, name="image")
        image, is_batch = _batched(image)
        deps = _check_at_least_3d(image, require_static=False)
        deps += _assert(target_width > 0, ValueError, "target_width must be > 0.")
        deps += _assert(target_height > 0, ValueError, "target_height must be > 0.")
        image = with_dependencies(deps, image)
        if is_tensor(target_height):
            target_height = with_dependencies(deps, target_height)
        if is_tensor(target_width):
            target_width = with_dependencies(deps, target_width)
        _, height, width, _ = _image_dimensions(image, 4)
        wd = target_width - width
        hd = target_height - height
        cropped = crop_to_bounding_box(image, _max(-hd // 2, 0), _max(-wd // 2, 0),
                                       _min(target_height, height), _min(target_width, width))
        resized = pad_to_bounding_box(cropped, _max(hd // 2, 0), _max(wd // 2, 0),
                                      target_height, target_width)
        if resized.shape.ndims is None:
            raise ValueError("resized contains no shape.")
        _, rh, rw, _ = _image_dimensions(resized, 4)
        deps = _assert(_equal(rh, target_height), ValueError, "resized height is not correct.")
        deps += _assert(_equal(rw, target_width), ValueError, "resized width is not correct.")
        resized = with_dependencies(deps, resized)
        if not is_batch:
            resized = tf_mod().squeeze(resized, axis=[0])
        return resized


# =======================================================================================
# resize_images
# =======================================================================================
class ResizeMethod:
    """The ``method`` values of ``tf.image.resize_images`` (TF 1.x: integers)."""

    BILINEAR = 0
    NEAREST_NEIGHBOR = 1
    BICUBIC = 2
    AREA = 3


ks.export("image.ResizeMethod", ResizeMethod)
_METHOD_NAMES = {"bilinear": 0, "nearest": 1, "bicubic": 2, "area": 3}


def _resize_common(images: Any, resizer: Callable[[Tensor, Tensor], Tensor], size: Any,
                   preserve_aspect_ratio: bool, name: str | None,
                   skip_if_same: bool) -> Tensor:
    """TF's ``_resize_images_common``: batching, size checks, aspect ratio, static shape."""
    tf = tf_mod()
    with name_scope(name, "resize", [images, size]):
        images = convert_to_tensor(images, name="images")
        if images.shape.ndims is None:
            raise ValueError("'images' contains no shape.")
        is_batch = True
        if images.shape.ndims == 3:
            is_batch = False
            images = tf.expand_dims(images, 0)
        elif images.shape.ndims != 4:
            raise ValueError("'images' must have either 3 or 4 dimensions.")
        _, height, width, _ = images.shape.as_list()
        try:
            size = convert_to_tensor(size, _dt.int32, name="size")
        except (TypeError, ValueError):
            raise ValueError("'size' must be a 1-D int32 Tensor") from None
        if not size.shape.is_compatible_with([2]):
            raise ValueError("'size' must be a 1-D Tensor of 2 elements: "
                             "new_height, new_width")
        if preserve_aspect_ratio:
            _, ch, cw, _ = _image_dimensions(images, 4)
            f32 = _dt.float32
            sf = tf.minimum(tf.cast(size[0], f32) / tf.cast(ch, f32),
                            tf.cast(size[1], f32) / tf.cast(cw, f32))
            sh = tf.cast(tf.round(sf * tf.cast(ch, f32)), _dt.int32)
            sw = tf.cast(tf.round(sf * tf.cast(cw, f32)), _dt.int32)
            size = tf.stack([sh, sw], name="size")
        known = _static_size(size)
        nh, nw = known
        if (skip_if_same and None not in (nh, nw, height, width) and width == nw
                and height == nh):
            if not is_batch:
                images = tf.squeeze(images, axis=[0])
            return images
        images = resizer(images, size)
        images.set_shape([None, nh, nw, None])
        if not is_batch:
            images = tf.squeeze(images, axis=[0])
        return images


def _static_size(size: Tensor) -> tuple[int | None, int | None]:
    v = constant_value(size)
    if v is not None:
        v = np.asarray(v).reshape(-1)
        return int(v[0]), int(v[1])
    if size.op.type == "Pack":
        vals = [constant_value(e) for e in size.op.inputs]
        return tuple(None if x is None else int(x) for x in vals)  # type: ignore[return-value]
    return None, None


def _method_code(method: Any) -> int:
    if isinstance(method, str) and method in _METHOD_NAMES:
        return _METHOD_NAMES[method]
    if isinstance(method, (int, np.integer)) and not isinstance(method, bool) and \
            0 <= int(method) <= 3:
        return int(method)
    raise ValueError(f"Resize method is not implemented: {method}")


@ks.api("image.resize_images", "image.resize")
def resize_images(images: Any, size: Any, method: Any = ResizeMethod.BILINEAR,
                  align_corners: bool = False, preserve_aspect_ratio: bool = False,
                  name: str | None = None) -> Tensor:
    """Resizes 3-D or 4-D images to ``size`` with ``method`` (a :class:`ResizeMethod`),
    TF 1.x corner rules (``align_corners``; no half-pixel centres).

    :raises ValueError: for an unknown method, a bad ``size`` or an image of another rank
    """
    def resizer(images_t: Tensor, new_size: Tensor) -> Tensor:
        code = _method_code(method)
        fn = (image_resize.resize_bilinear, image_resize.resize_nearest_neighbor,
              image_resize.resize_bicubic, image_resize.resize_area)[code]
        return fn(images_t, new_size, align_corners=align_corners)

    return _resize_common(images, resizer, size, preserve_aspect_ratio, name, True)


@ks.api("image.resize_image_with_pad")
def resize_image_with_pad(image: Any, target_height: Any, target_width: Any,
                          method: Any = ResizeMethod.BILINEAR,
                          align_corners: bool = False) -> Tensor:
    """Resizes keeping the aspect ratio, then zero-pads to the target size."""
    tf = tf_mod()
    with name_scope(None, "resize_image_with_pad", [image]):
        image = convert_to_tensor(image, name="image")
        image, is_batch = _batched(image)
        deps = _check_at_least_3d(image, require_static=False)
        deps += _assert(target_width > 0, ValueError, "target_width must be > 0.")
        deps += _assert(target_height > 0, ValueError, "target_height must be > 0.")
        image = with_dependencies(deps, image)
        _, height, width, _ = _image_dimensions(image, 4)
        f32 = _dt.float32
        fh, fw = tf.cast(height, f32), tf.cast(width, f32)
        fth, ftw = tf.cast(target_height, f32), tf.cast(target_width, f32)
        ratio = _max(fw / ftw, fh / fth)
        rhf, rwf = fh / ratio, fw / ratio
        rh = tf.cast(tf.floor(rhf), _dt.int32)
        rw = tf.cast(tf.floor(rwf), _dt.int32)
        ph = _max(0, tf.cast(tf.floor((fth - rhf) / 2), _dt.int32))
        pw = _max(0, tf.cast(tf.floor((ftw - rwf) / 2), _dt.int32))
        resized = resize_images(image, [rh, rw], method, align_corners=align_corners)
        padded = pad_to_bounding_box(resized, ph, pw, target_height, target_width)
        if padded.shape.ndims is None:
            raise ValueError("padded contains no shape.")
        _image_dimensions(padded, 4)
        if not is_batch:
            padded = tf.squeeze(padded, axis=[0])
        return padded


# =======================================================================================
# random_crop
# =======================================================================================
def random_crop(value: Any, size: Any, seed: int | None = None,
                name: str | None = None) -> Tensor:
    """A uniformly placed ``size`` window of ``value`` (every dimension may be cropped)."""
    tf = tf_mod()
    with name_scope(name, "random_crop", [value, size]) as name:
        value = convert_to_tensor(value, name="value")
        size = convert_to_tensor(size, dtype=_dt.int32, name="size")
        shape = tf.shape(value)
        check = tf.Assert(tf.reduce_all(shape >= size),
                          ["Need value.shape >= size, got ", shape, size], summarize=1000)
        shape = with_dependencies([check], shape)
        limit = shape - size + 1
        offset = tf.random_uniform(tf.shape(shape), dtype=size.dtype, maxval=size.dtype.max,
                                   seed=seed) % limit
        return tf.slice(value, offset, size, name=name)


alias(random_crop, "image.random_crop", "random_crop")

__all__ = ["flip_left_right", "flip_up_down", "random_flip_left_right", "random_flip_up_down",
           "rot90", "transpose", "central_crop", "pad_to_bounding_box", "crop_to_bounding_box",
           "resize_image_with_crop_or_pad", "ResizeMethod", "resize_images",
           "resize_image_with_pad", "random_crop", "with_dependencies"]

