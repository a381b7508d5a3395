"""tf.image resampling ops: ResizeBilinear / ResizeNearestNeighbor / ResizeBicubic /
ResizeArea with their gradients, CropAndResize (+ gradients w.r.t. image and boxes),
ExtractGlimpse and ExtractImagePatches.

The kernels reproduce TF 1.15's CPU kernels: the scale is ``in / out`` (or
``(in - 1) / (out - 1)`` with ``align_corners`` and ``out > 1``), computed in float32;
``half_pixel_centers`` samples at ``(x + 0.5) * scale - 0.5`` (nearest neighbour at
``(x + 0.5) * scale``, floored); bilinear uses TF's ``top + (bottom - top) * lerp``
order, bicubic TF's 1024-entry Keys table (a = -0.75 legacy, a = -0.5 with
half_pixel_centers, out-of-image taps dropped and the weights renormalised).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.graph import Tensor, apply_op, convert_to_tensor
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import ks
from .image_common import (alias, const_int_vector, host, invalid, merge_dim, shape_error,
                           tf_mod, to_device, with_rank)

_RESIZE_T = "T: {int8, uint8, int16, uint16, int32, int64, bfloat16, half, float, double}"
_RESIZE_ATTRS = [_RESIZE_T, "align_corners: bool = false", "half_pixel_centers: bool = false"]


# =======================================================================================
# shape functions
# =======================================================================================
def _resize_shape(op: Any) -> list[TensorShape]:
    d = with_rank(op, 0, 4)
    h, w = const_int_vector(op, 1, 2)
    return [TensorShape([d[0], h, w, d[3]])]


def _resize_grad_shape(op: Any) -> list[TensorShape]:
    with_rank(op, 0, 4)
    return [op.inputs[1].shape.merge_with(unknown_shape(4))
            if op.inputs[1].shape.ndims is None else op.inputs[1].shape]


def _nn_grad_shape(op: Any) -> list[TensorShape]:
    d = with_rank(op, 0, 4)
    h, w = const_int_vector(op, 1, 2)
    return [TensorShape([d[0], h, w, d[3]])]


def _crop_and_resize_shape(op: Any) -> list[TensorShape]:
    img = with_rank(op, 0, 4)
    boxes = with_rank(op, 1, 2)
    ind = with_rank(op, 2, 1)
    if boxes[1] is not None and boxes[1] != 4:
        raise shape_error(op, f"Dimension must be 4 but is {boxes[1]}")
    n = merge_dim(op, boxes[0], ind[0])
    ch, cw = const_int_vector(op, 3, 2)
    for v in (ch, cw):
        if v is not None and v <= 0:
            raise shape_error(op, "crop_size must be positive")
    return [TensorShape([n, ch, cw, img[3]])]


def _crop_grad_image_shape(op: Any) -> list[TensorShape]:
    with_rank(op, 0, 4)
    vals = const_int_vector(op, 3, 4)
    return [TensorShape(vals)]


def _crop_grad_boxes_shape(op: Any) -> list[TensorShape]:
    with_rank(op, 0, 4)
    with_rank(op, 1, 4)
    b = with_rank(op, 2, 2)
    return [TensorShape([b[0], 4])]


def _glimpse_shape(op: Any) -> list[TensorShape]:
    d = with_rank(op, 0, 4)
    h, w = const_int_vector(op, 1, 2)
    off = with_rank(op, 2, 2)
    if off[1] is not None and off[1] != 2:
        raise shape_error(op, f"Dimension must be 2 but is {off[1]}")
    return [TensorShape([merge_dim(op, d[0], off[0]), h, w, d[3]])]


def _windowed(op: Any, size: int | None, k: int, s: int, r: int, padding: str) -> int | None:
    if size is None:
        return None
    k_eff = k + (k - 1) * (r - 1)
    if padding == "SAME":
        return (size + s - 1) // s
    out = (size - k_eff + s) // s
    if out < 0 or size < k_eff:
        if size - k_eff < 0:
            raise shape_error(op, f"Negative dimension size caused by subtracting {k_eff} "
                                  f"from {size}")
    return out


def _patches_shape(op: Any) -> list[TensorShape]:
    d = with_rank(op, 0, 4)
    ks_ = list(op.node_attrs["ksizes"])
    st = list(op.node_attrs["strides"])
    rt = list(op.node_attrs["rates"])
    for nm, v in (("ksizes", ks_), ("strides", st), ("rates", rt)):
        if len(v) != 4:
            raise shape_error(op, f"ExtractImagePatches requires the {nm} attribute to "
                                  f"contain 4 values, but got: {len(v)}")
        if v[0] != 1 or v[3] != 1:
            raise shape_error(op, f"ExtractImagePatches is only supported in the rows and "
                                  f"columns dimensions ({nm}: {v})")
    pad = op.node_attrs["padding"]
    if isinstance(pad, bytes):
        pad = pad.decode()
    oh = _windowed(op, d[1], ks_[1], st[1], rt[1], pad)
    ow = _windowed(op, d[2], ks_[2], st[2], rt[2], pad)
    depth = None if d[3] is None else d[3] * ks_[1] * ks_[2]
    return [TensorShape([d[0], oh, ow, depth])]


ks.op(
    OpDef("ResizeBilinear", inputs=["images: T", "size: int32"],
          outputs=["resized_images: float"], attrs=_RESIZE_ATTRS, shape_fn=_resize_shape,
          doc="Resizes images to size with bilinear interpolation."),
    OpDef("ResizeBilinearGrad", inputs=["grads: float", "original_image: T"],
          outputs=["output: T"],
          attrs=["T: {float, bfloat16, half, double}", "align_corners: bool = false",
                 "half_pixel_centers: bool = false"],
          shape_fn=_resize_grad_shape, doc="The gradient of ResizeBilinear."),
    OpDef("ResizeNearestNeighbor", inputs=["images: T", "size: int32"],
          outputs=["resized_images: T"], attrs=_RESIZE_ATTRS, shape_fn=_resize_shape,
          doc="Resizes images to size with nearest-neighbour interpolation."),
    OpDef("ResizeNearestNeighborGrad", inputs=["grads: T", "size: int32"],
          outputs=["output: T"],
          attrs=["T: {uint8, int8, int32, half, float, double, bfloat16}",
                 "align_corners: bool = false", "half_pixel_centers: bool = false"],
          shape_fn=_nn_grad_shape, doc="The gradient of ResizeNearestNeighbor."),
    OpDef("ResizeBicubic", inputs=["images: T", "size: int32"],
          outputs=["resized_images: float"], attrs=_RESIZE_ATTRS, shape_fn=_resize_shape,
          doc="Resizes images to size with bicubic interpolation."),
    OpDef("ResizeBicubicGrad", inputs=["grads: float", "original_image: T"],
          outputs=["output: T"],
          attrs=["T: {float, double}", "align_corners: bool = false",
                 "half_pixel_centers: bool = false"],
          shape_fn=_resize_grad_shape, doc="The gradient of ResizeBicubic."),
    OpDef("ResizeArea", inputs=["images: T", "size: int32"],
          outputs=["resized_images: float"],
          attrs=[_RESIZE_T, "align_corners: bool = false"], shape_fn=_resize_shape,
          doc="Resizes images to size by area averaging."),
    OpDef("CropAndResize",
          inputs=["image: T", "boxes: float", "box_ind: int32", "crop_size: int32"],
          outputs=["crops: float"],
          attrs=["T: {uint8, uint16, int8, int16, int32, int64, half, float, double}",
                 "method: {'bilinear', 'nearest'} = 'bilinear'",
                 "extrapolation_value: float = 0"],
          shape_fn=_crop_and_resize_shape,
          doc="Crops boxes out of images and resizes them to crop_size."),
    OpDef("CropAndResizeGradImage",
          inputs=["grads: float", "boxes: float", "box_ind: int32", "image_size: int32"],
          outputs=["output: T"],
          attrs=["T: {float, half, double}", "method: {'bilinear', 'nearest'} = 'bilinear'"],
          shape_fn=_crop_grad_image_shape,
          doc="The gradient of CropAndResize w.r.t. the image."),
    OpDef("CropAndResizeGradBoxes",
          inputs=["grads: float", "image: T", "boxes: float", "box_ind: int32"],
          outputs=["output: float"],
          attrs=["T: {uint8, uint16, int8, int16, int32, int64, half, float, double}",
                 "method: {'bilinear'} = 'bilinear'"],
          shape_fn=_crop_grad_boxes_shape,
          doc="The gradient of CropAndResize w.r.t. the boxes."),
    OpDef("ExtractGlimpse", inputs=["input: float", "size: int32", "offsets: float"],
          outputs=["glimpse: float"],
          attrs=["centered: bool = true", "normalized: bool = true",
                 "uniform_noise: bool = true", "noise: string = 'uniform'"],
          shape_fn=_glimpse_shape, is_stateful=True,
          doc="Extracts glimpses (windows) from images; outside pixels are noise."),
    OpDef("ExtractImagePatches", inputs=["images: T"], outputs=["patches: T"],
          attrs=["ksizes: list(int) >= 4", "strides: list(int) >= 4",
                 "rates: list(int) >= 4", "T: realnumbertype",
                 "padding: {'SAME', 'VALID'}"],
          shape_fn=_patches_shape,
          doc="Extracts image patches into the depth dimension."),
)


# =======================================================================================
# shared kernel pieces
# =======================================================================================
def _scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    """TF 1.15's CalculateResizeScale, in float32."""
    if align_corners and out_size > 1:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    return np.float32(in_size) / np.float32(out_size)


def _source(out_size: int, scale: np.float32, half_pixel: bool, nn: bool = False) -> np.ndarray:
    """The float32 source coordinate of each output index (TF's scalers)."""
    x = np.arange(out_size, dtype=np.float32)
    if half_pixel:
        v = (x + np.float32(0.5)) * scale
        return v if nn else v - np.float32(0.5)
    return x * scale


def _resize_args(ctx: Any, images: Any, size: Any, op_name: str,
                 check_half: bool = True) -> tuple[int, int, int, int, int, int]:
    """Validates a resize op's inputs as TF's ImageResizerState: (batch, in_h, in_w,
    channels, out_h, out_w)."""
    if check_half and ctx.attrs.get("half_pixel_centers") and ctx.attrs.get("align_corners"):
        raise invalid("If half_pixel_centers is True, align_corners must be False.")
    if images.ndim != 4:
        raise invalid(f"input must be 4-dimensional{list(images.shape)}")
    s = host(ctx, size)
    if s.ndim != 1:
        raise invalid(f"shape_t must be 1-dimensional{list(s.shape)}")
    if s.size != 2:
        raise invalid(f"shape_t must have two elements{list(s.shape)}")
    b, ih, iw, c = (int(x) for x in images.shape)
    if ih <= 0 or iw <= 0:
        raise invalid("input image must be of non-zero size")
    oh, ow = int(s[0]), int(s[1])
    if oh <= 0 or ow <= 0:
        raise invalid("output dimensions must be positive")
    return b, ih, iw, c, oh, ow


def _bilinear_taps(in_size: int, out_size: int, align: bool,
                   half: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower, upper, lerp) per output index (TF's compute_interpolation_weights)."""
    src = _source(out_size, _scale(in_size, out_size, align), half)
    fl = np.floor(src)
    lower = np.maximum(fl.astype(np.int64), 0)
    upper = np.minimum(np.ceil(src).astype(np.int64), in_size - 1)
    return lower, upper, (src - fl).astype(np.float32)


def _roundf(v: np.ndarray) -> np.ndarray:
    """C's roundf (halves away from zero) of float32 values."""
    fl = np.floor(v)
    up = (v - fl) >= np.float32(0.5)
    return np.where(v >= 0, np.where(up, fl + 1, fl), -np.floor(-v + np.float32(0.5)))


def _nn_index(in_size: int, out_size: int, align: bool, half: bool) -> np.ndarray:
    src = _source(out_size, _scale(in_size, out_size, align), half, nn=True)
    idx = _roundf(src) if align else np.floor(src)
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    if half:
        idx = np.maximum(idx, 0)
    return idx


_TABLE_SIZE = 1024


def _coeffs_table(a: float) -> np.ndarray:
    """TF's bicubic coefficients table: float32 [(1024 + 1), 2]."""
    i = np.arange(_TABLE_SIZE + 1)
    x = (i * 1.0 / _TABLE_SIZE).astype(np.float32).astype(np.float64)
    t0 = ((a + 2) * x - (a + 3)) * x * x + 1
    x1 = (x.astype(np.float32) + np.float32(1.0)).astype(np.float64)
    t1 = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a
    return np.stack([t0, t1], axis=1).astype(np.float32)


_TABLES: dict[bool, np.ndarray] = {}


def _bicubic_taps(in_size: int, out_size: int, align: bool,
                  half: bool) -> tuple[np.ndarray, np.ndarray]:
    """(indices [out, 4], float32 weights [out, 4]) of TF's GetWeightsAndIndices."""
    if half not in _TABLES:
        _TABLES[half] = _coeffs_table(-0.5 if half else -0.75)
    tab = _TABLES[half]
    src = _source(out_size, _scale(in_size, out_size, align), half)
    in_loc = np.floor(src).astype(np.int64)
    delta = (src - in_loc.astype(np.float32)).astype(np.float32)
    off = np.rint(delta * np.float32(_TABLE_SIZE)).astype(np.int64)
    w = np.stack([tab[off, 1], tab[off, 0], tab[_TABLE_SIZE - off, 0],
                  tab[_TABLE_SIZE - off, 1]], axis=1).astype(np.float32)
    raw = in_loc[:, None] + np.arange(-1, 3)[None, :]
    idx = np.clip(raw, 0, in_size - 1)
    if half:
        w = np.where(idx == raw, w, np.float32(0))
        tot = w[:, 0] + w[:, 1] + w[:, 2] + w[:, 3]
        ok = np.abs(tot) >= np.float32(1000.0) * np.finfo(np.float32).tiny
        inv = np.where(ok, np.float32(1.0) / np.where(ok, tot, 1), np.float32(1))
        w = np.where(ok[:, None], w * inv[:, None].astype(np.float32), w).astype(np.float32)
    return idx, w


def _dot4(vals: list[Any], w: Any) -> Any:
    """``v0*w0 + v1*w1 + v2*w2 + v3*w3`` in TF's order (float32)."""
    return vals[0] * w[0] + vals[1] * w[1] + vals[2] * w[2] + vals[3] * w[3]


def _area_matrix(in_size: int, out_size: int, scale: np.float32) -> np.ndarray:
    """[out, in] float32 overlap lengths of ResizeArea (indices clamped to the image)."""
    m = np.zeros((out_size, in_size), np.float64)
    for o in range(out_size):
        lo = np.float32(o) * scale
        hi = np.float32(o + 1) * scale
        for i in range(int(np.floor(lo)), int(np.ceil(hi))):
            wgt = min(np.float32(i + 1), hi) - max(np.float32(i), lo)
            m[o, min(max(i, 0), in_size - 1)] += float(np.float32(wgt))
    return m.astype(np.float32)


# =======================================================================================
# resize kernels
# =======================================================================================
@ks.kernel("ResizeBilinear", host_memory=("size",))
def _resize_bilinear_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    align = bool(ctx.attrs.get("align_corners", False))
    half = bool(ctx.attrs.get("half_pixel_centers", False))

    def compute(images: Any, size: Any) -> Any:
        b, ih, iw, c, oh, ow = _resize_args(ctx, images, size, "ResizeBilinear")
        ylo, yhi, yl = (xp.asarray(a) for a in _bilinear_taps(ih, oh, align, half))
        xlo, xhi, xl = (xp.asarray(a) for a in _bilinear_taps(iw, ow, align, half))
        img = images.astype(xp.float32)
        top, bot = img[:, ylo], img[:, yhi]
        tl, tr, bl, br = top[:, :, xlo], top[:, :, xhi], bot[:, :, xlo], bot[:, :, xhi]
        xw = xl[None, None, :, None]
        t = tl + (tr - tl) * xw
        bo = bl + (br - bl) * xw
        return (t + (bo - t) * yl[None, :, None, None]).astype(xp.float32)

    return compute


@ks.kernel("ResizeNearestNeighbor", host_memory=("size",))
def _resize_nn_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    align = bool(ctx.attrs.get("align_corners", False))
    half = bool(ctx.attrs.get("half_pixel_centers", False))

    def compute(images: Any, size: Any) -> Any:
        b, ih, iw, c, oh, ow = _resize_args(ctx, images, size, "ResizeNearestNeighbor")
        yi = xp.asarray(_nn_index(ih, oh, align, half))
        xi = xp.asarray(_nn_index(iw, ow, align, half))
        return images[:, yi][:, :, xi]

    return compute


@ks.kernel("ResizeBicubic", host_memory=("size",))
def _resize_bicubic_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    align = bool(ctx.attrs.get("align_corners", False))
    half = bool(ctx.attrs.get("half_pixel_centers", False))

    def compute(images: Any, size: Any) -> Any:
        b, ih, iw, c, oh, ow = _resize_args(ctx, images, size, "ResizeBicubic")
        yi, yw = _bicubic_taps(ih, oh, align, half)
        xi, xw = _bicubic_taps(iw, ow, align, half)
        img = images.astype(xp.float32)
        # columns first (over y), then rows, as TF's cached interpolation
        cols = _dot4([img[:, xp.asarray(yi[:, k])] for k in range(4)],
                     [xp.asarray(yw[:, k])[None, :, None, None] for k in range(4)])
        out = _dot4([cols[:, :, xp.asarray(xi[:, k])] for k in range(4)],
                    [xp.asarray(xw[:, k])[None, None, :, None] for k in range(4)])
        return out.astype(xp.float32)

    return compute


@ks.kernel("ResizeArea", host_memory=("size",))
def _resize_area_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    align = bool(ctx.attrs.get("align_corners", False))

    def compute(images: Any, size: Any) -> Any:
        b, ih, iw, c, oh, ow = _resize_args(ctx, images, size, "ResizeArea", False)
        hs, ws = _scale(ih, oh, align), _scale(iw, ow, align)
        my = xp.asarray(_area_matrix(ih, oh, hs))
        mx = xp.asarray(_area_matrix(iw, ow, ws))
        img = images.astype(xp.float32)
        t = xp.einsum("oh,bhwc->bowc", my, img)
        out = xp.einsum("pw,bowc->bopc", mx, t)
        return (out * (np.float32(1.0) / (hs * ws))).astype(xp.float32)

    return compute


def _grad_geometry(ctx: Any, grads: Any, orig_shape: tuple[int, ...]) -> tuple[int, ...]:
    if ctx.attrs.get("half_pixel_centers") and ctx.attrs.get("align_corners"):
        raise invalid("If half_pixel_centers is True, align_corners must be False.")
    if grads.ndim != 4:
        raise invalid(f"input_grad must be 4-dimensional{list(grads.shape)}")
    if len(orig_shape) != 4:
        raise invalid(f"original_image must be 4-dimensional{list(orig_shape)}")
    b, rh, rw, c = (int(x) for x in grads.shape)
    if rh <= 0 or rw <= 0:
        raise invalid("resized dimensions must be positive")
    oh, ow = int(orig_shape[1]), int(orig_shape[2])
    if oh <= 0 or ow <= 0:
        raise invalid("original dimensions must be positive")
    return b, rh, rw, c, oh, ow


@ks.kernel("ResizeBilinearGrad")
def _resize_bilinear_grad_kernel(ctx: Any) -> Any:
    align = bool(ctx.attrs.get("align_corners", False))
    half = bool(ctx.attrs.get("half_pixel_centers", False))
    out_np = ctx.output_dtypes[0].np

    def compute(grads: Any, original: Any) -> Any:
        g = host(ctx, grads).astype(np.float32)
        b, rh, rw, c, oh, ow = _grad_geometry(ctx, g, tuple(original.shape))
        ylo, yhi, yl = _bilinear_taps(oh, rh, align, half)
        xlo, xhi, xl = _bilinear_taps(ow, rw, align, half)
        out = np.zeros((b, oh, ow, c), np.float32)
        iy, ix = (1 - yl)[:, None], (1 - xl)[None, :]
        yy, xx = yl[:, None], xl[None, :]
        for ys, wy in ((ylo, iy), (yhi, yy)):
            for xs, wx in ((xlo, ix), (xhi, xx)):
                w = (wy * wx).astype(np.float32)
                np.add.at(out, (slice(None), ys[:, None], xs[None, :]), g * w[None, :, :, None])
        return to_device(ctx, out.astype(out_np))

    return compute


@ks.kernel("ResizeBicubicGrad")
def _resize_bicubic_grad_kernel(ctx: Any) -> Any:
    align = bool(ctx.attrs.get("align_corners", False))
    half = bool(ctx.attrs.get("half_pixel_centers", False))
    out_np = ctx.output_dtypes[0].np

    def compute(grads: Any, original: Any) -> Any:
        g = host(ctx, grads).astype(np.float64)
        b, rh, rw, c, oh, ow = _grad_geometry(ctx, g, tuple(original.shape))
        yi, yw = _bicubic_taps(oh, rh, align, half)
        xi, xw = _bicubic_taps(ow, rw, align, half)
        my = np.zeros((rh, oh))
        mx = np.zeros((rw, ow))
        for k in range(4):
            np.add.at(my, (np.arange(rh), yi[:, k]), yw[:, k])
            np.add.at(mx, (np.arange(rw), xi[:, k]), xw[:, k])
        out = np.einsum("ro,brwc,wp->bopc", my, g, mx)
        return to_device(ctx, out.astype(out_np))

    return compute


@ks.kernel("ResizeNearestNeighborGrad", host_memory=("size",))
def _resize_nn_grad_kernel(ctx: Any) -> Any:
    align = bool(ctx.attrs.get("align_corners", False))
    half = bool(ctx.attrs.get("half_pixel_centers", False))

    def compute(grads: Any, size: Any) -> Any:
        g = host(ctx, grads)
        if half and align:
            raise invalid("If half_pixel_centers is True, align_corners must be False.")
        if g.ndim != 4:
            raise invalid(f"input must be 4-dimensional{list(g.shape)}")
        s = host(ctx, size)
        if s.ndim != 1 or s.size != 2:
            raise invalid(f"shape_t must be 1-dimensional and have two elements{list(s.shape)}")
        oh, ow = int(s[0]), int(s[1])
        if oh <= 0 or ow <= 0:
            raise invalid("output dimensions must be positive")
        b, rh, rw, c = g.shape
        yi = _nn_index(oh, rh, align, half)
        xi = _nn_index(ow, rw, align, half)
        out = np.zeros((b, oh, ow, c), g.dtype)
        np.add.at(out, (slice(None), yi[:, None], xi[None, :]), g)
        return to_device(ctx, out)

    return compute


# =======================================================================================
# crop_and_resize
# =======================================================================================
def _box_coords(v1: np.float32, v2: np.float32, size: int, crop: int) -> np.ndarray:
    """The float32 source coordinates of a crop axis (TF's CropAndResize)."""
    if crop > 1:
        scale = np.float32((v2 - v1) * np.float32(size - 1) / np.float32(crop - 1))
        return (v1 * np.float32(size - 1) + np.arange(crop, dtype=np.float32) * scale
                ).astype(np.float32)
    return np.array([np.float32(0.5) * (v1 + v2) * np.float32(size - 1)], np.float32)


def _check_boxes(boxes: np.ndarray, ind: np.ndarray, batch: int) -> None:
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise invalid(f"boxes must be 2-D [num_boxes, 4]: {list(boxes.shape)}")
    if ind.ndim != 1:
        raise invalid(f"box_index must be 1-D {list(ind.shape)}")
    if ind.shape[0] != boxes.shape[0]:
        raise invalid(f"box_index has incompatible shape {list(ind.shape)}")
    bad = (ind < 0) | (ind >= batch)
    if bad.any():
        raise errors.OutOfRangeError(None, None, "box_index has values outside "
                                                 "[0, batch_size)")


def _crop_one(img: np.ndarray, ys: np.ndarray, xs: np.ndarray, method: str,
              extrap: float) -> np.ndarray:
    h, w, c = img.shape
    out = np.full((len(ys), len(xs), c), np.float32(extrap), np.float32)
    yok = (ys >= 0) & (ys <= h - 1)
    xok = (xs >= 0) & (xs <= w - 1)
    if not yok.any() or not xok.any():
        return out
    yv, xv = ys[yok], xs[xok]
    if method == "nearest":
        yi = _roundf(yv).astype(np.int64)
        xi = _roundf(xv).astype(np.int64)
        vals = img[yi][:, xi].astype(np.float32)
    else:
        t, bt = np.floor(yv).astype(np.int64), np.ceil(yv).astype(np.int64)
        le, ri = np.floor(xv).astype(np.int64), np.ceil(xv).astype(np.int64)
        yl = (yv - t.astype(np.float32)).astype(np.float32)[:, None, None]
        xl = (xv - le.astype(np.float32)).astype(np.float32)[None, :, None]
        f = img.astype(np.float32)
        tl, tr, bl, br = f[t][:, le], f[t][:, ri], f[bt][:, le], f[bt][:, ri]
        top = tl + (tr - tl) * xl
        bot = bl + (br - bl) * xl
        vals = top + (bot - top) * yl
    out[np.ix_(yok, xok)] = vals
    return out


@ks.kernel("CropAndResize", host_memory=("crop_size",))
def _crop_and_resize_kernel(ctx: Any) -> Any:
    method = ctx.attrs.get("method", "bilinear")
    method = method.decode() if isinstance(method, bytes) else method
    extrap = float(ctx.attrs.get("extrapolation_value", 0.0))

    def compute(image: Any, boxes: Any, box_ind: Any, crop_size: Any) -> Any:
        img = host(ctx, image)
        bx = host(ctx, boxes).astype(np.float32)
        ind = host(ctx, box_ind)
        cs = host(ctx, crop_size)
        if img.ndim != 4:
            raise invalid(f"input image must be 4-D{list(img.shape)}")
        b, h, w, c = img.shape
        if h <= 0 or w <= 0:
            raise invalid("image dimensions must be positive")
        _check_boxes(bx, ind, b)
        if cs.ndim != 1 or cs.size != 2:
            raise invalid(f"crop_size must be a 1-D tensor of length 2, got {list(cs.shape)}")
        ch, cw = int(cs[0]), int(cs[1])
        if ch <= 0 or cw <= 0:
            raise invalid("crop dimensions must be positive")
        out = np.zeros((bx.shape[0], ch, cw, c), np.float32)
        for n in range(bx.shape[0]):
            y1, x1, y2, x2 = bx[n]
            out[n] = _crop_one(img[ind[n]], _box_coords(y1, y2, h, ch),
                               _box_coords(x1, x2, w, cw), method, extrap)
        return to_device(ctx, out)

    return compute


@ks.kernel("CropAndResizeGradImage", host_memory=("image_size",))
def _crop_grad_image_kernel(ctx: Any) -> Any:
    method = ctx.attrs.get("method", "bilinear")
    method = method.decode() if isinstance(method, bytes) else method
    out_np = ctx.output_dtypes[0].np

    def compute(grads: Any, boxes: Any, box_ind: Any, image_size: Any) -> Any:
        g = host(ctx, grads).astype(np.float32)
        bx = host(ctx, boxes).astype(np.float32)
        ind = host(ctx, box_ind)
        size = host(ctx, image_size)
        if size.ndim != 1 or size.size != 4:
            raise invalid(f"image_size must be a 1-D tensor with 4 elements, got "
                          f"{list(size.shape)}")
        b, h, w, c = (int(v) for v in size)
        if h <= 0 or w <= 0:
            raise invalid("image dimensions must be positive")
        if g.ndim != 4:
            raise invalid(f"grads image must be 4-D{list(g.shape)}")
        if g.shape[3] != c:
            raise invalid("image_size and grads are incompatible")
        _check_boxes(bx, ind, b)
        out = np.zeros((b, h, w, c), np.float32)
        ch, cw = g.shape[1], g.shape[2]
        for n in range(bx.shape[0]):
            y1, x1, y2, x2 = bx[n]
            ys, xs = _box_coords(y1, y2, h, ch), _box_coords(x1, x2, w, cw)
            for y, iy in enumerate(ys):
                if iy < 0 or iy > h - 1:
                    continue
                for x, ix in enumerate(xs):
                    if ix < 0 or ix > w - 1:
                        continue
                    gv = g[n, y, x]
                    if method == "nearest":
                        out[ind[n], int(_roundf(np.float32(iy))),
                            int(_roundf(np.float32(ix)))] += gv
                        continue
                    t, bt = int(np.floor(iy)), int(np.ceil(iy))
                    le, ri = int(np.floor(ix)), int(np.ceil(ix))
                    yl, xl = np.float32(iy - t), np.float32(ix - le)
                    dtop = (np.float32(1) - yl) * gv
                    dbot = yl * gv
                    out[ind[n], t, le] += (np.float32(1) - xl) * dtop
                    out[ind[n], t, ri] += xl * dtop
                    out[ind[n], bt, le] += (np.float32(1) - xl) * dbot
                    out[ind[n], bt, ri] += xl * dbot
        return to_device(ctx, out.astype(out_np))

    return compute


@ks.kernel("CropAndResizeGradBoxes")
def _crop_grad_boxes_kernel(ctx: Any) -> Any:
    def compute(grads: Any, image: Any, boxes: Any, box_ind: Any) -> Any:
        g = host(ctx, grads).astype(np.float32)
        img = host(ctx, image).astype(np.float32)
        bx = host(ctx, boxes).astype(np.float32)
        ind = host(ctx, box_ind)
        if img.ndim != 4:
            raise invalid(f"input image must be 4-D{list(img.shape)}")
        b, h, w, c = img.shape
        _check_boxes(bx, ind, b)
        if g.ndim != 4 or g.shape[0] != bx.shape[0] or g.shape[3] != c:
            raise invalid("grads and image/boxes are incompatible")
        ch, cw = g.shape[1], g.shape[2]
        out = np.zeros((bx.shape[0], 4), np.float32)
        hr = np.float32(h - 1) / np.float32(ch - 1) if ch > 1 else np.float32(0)
        wr = np.float32(w - 1) / np.float32(cw - 1) if cw > 1 else np.float32(0)
        for n in range(bx.shape[0]):
            y1, x1, y2, x2 = bx[n]
            ys, xs = _box_coords(y1, y2, h, ch), _box_coords(x1, x2, w, cw)
            im = img[ind[n]]
            for y, iy in enumerate(ys):
                if iy < 0 or iy > h - 1:
                    continue
                t, bt = int(np.floor(iy)), int(np.ceil(iy))
                yl = np.float32(iy - t)
                for x, ix in enumerate(xs):
                    if ix < 0 or ix > w - 1:
                        continue
                    le, ri = int(np.floor(ix)), int(np.ceil(ix))
                    xl = np.float32(ix - le)
                    tl, tr, bl, br = im[t, le], im[t, ri], im[bt, le], im[bt, ri]
                    gy = (1 - xl) * (bl - tl) + xl * (br - tr)
                    gx = (1 - yl) * (tr - tl) + yl * (br - bl)
                    top = g[n, y, x]
                    sy, sx = np.sum(top * gy), np.sum(top * gx)
                    if ch > 1:
                        out[n, 0] += sy * (np.float32(h - 1) - y * hr)
                        out[n, 2] += sy * (y * hr)
                    else:
                        out[n, 0] += sy * np.float32(0.5) * (h - 1)
                        out[n, 2] += sy * np.float32(0.5) * (h - 1)
                    if cw > 1:
                        out[n, 1] += sx * (np.float32(w - 1) - x * wr)
                        out[n, 3] += sx * (x * wr)
                    else:
                        out[n, 1] += sx * np.float32(0.5) * (w - 1)
                        out[n, 3] += sx * np.float32(0.5) * (w - 1)
        return to_device(ctx, out)

    return compute


# =======================================================================================
# extract_glimpse, extract_image_patches
# =======================================================================================
@ks.kernel("ExtractGlimpse", host_memory=("size",))
def _extract_glimpse_kernel(ctx: Any) -> Any:
    centered = bool(ctx.attrs.get("centered", True))
    normalized = bool(ctx.attrs.get("normalized", True))
    uniform = bool(ctx.attrs.get("uniform_noise", True))
    noise = ctx.attrs.get("noise", "uniform")
    noise = noise.decode() if isinstance(noise, bytes) else noise
    rng = np.random.default_rng()

    def compute(inp: Any, size: Any, offsets: Any) -> Any:
        x = host(ctx, inp).astype(np.float32)
        s = host(ctx, size)
        off = host(ctx, offsets).astype(np.float32)
        if x.ndim != 4:
            raise invalid(f"input must be a 4-D tensor{list(x.shape)}")
        if s.ndim != 1 or s.size != 2:
            raise invalid(f"input must be a vector of size 2 (height, width){list(s.shape)}")
        if off.ndim != 2 or off.shape[0] != x.shape[0] or off.shape[1] != 2:
            raise invalid(f"input must be a matrix of shape [batch_size, 2]: offsets "
                          f"{list(off.shape)}")
        if uniform and noise not in ("", "uniform"):
            raise invalid("The uniform_noise and noise should not be specified at the same "
                          "time")
        kind = noise or ("uniform" if uniform else "gaussian")
        b, h, w, c = x.shape
        gh, gw = int(s[0]), int(s[1])
        out = np.zeros((b, gh, gw, c), np.float32)
        for i in range(b):
            oy, ox = float(off[i, 0]), float(off[i, 1])
            if normalized:
                oy, ox = oy * h, ox * w
                if centered:
                    oy, ox = oy / 2.0 + h / 2.0, ox / 2.0 + w / 2.0
            elif centered:
                oy, ox = oy + h / 2.0, ox + w / 2.0
            oy, ox = int(np.float32(oy - gh / 2.0)), int(np.float32(ox - gw / 2.0))
            img = x[i]
            if kind == "uniform":
                lo, hi = img.min(), img.max()
                fill = lo + rng.random((gh, gw, c), dtype=np.float32) * (hi - lo)
            elif kind == "gaussian":
                mu = img.mean(axis=(0, 1))
                sd = img.std(axis=(0, 1))
                fill = (mu + rng.standard_normal((gh, gw, c)) * sd).astype(np.float32)
            else:
                fill = np.zeros((gh, gw, c), np.float32)
            ys = np.arange(gh) + oy
            xs = np.arange(gw) + ox
            yok, xok = (ys >= 0) & (ys < h), (xs >= 0) & (xs < w)
            fill[np.ix_(yok, xok)] = img[ys[yok]][:, xs[xok]]
            out[i] = fill
        return to_device(ctx, out)

    return compute


def _same_pads(size: int, k_eff: int, s: int) -> tuple[int, int]:
    out = (size + s - 1) // s
    need = max(0, (out - 1) * s + k_eff - size)
    return need // 2, need - need // 2


@ks.kernel("ExtractImagePatches")
def _extract_patches_kernel(ctx: Any) -> Any:
    xp = ctx.xp
    _, kr, kc, _ = (int(v) for v in ctx.attrs["ksizes"])
    _, sr, sc, _ = (int(v) for v in ctx.attrs["strides"])
    _, rr, rc, _ = (int(v) for v in ctx.attrs["rates"])
    pad = ctx.attrs["padding"]
    pad = pad.decode() if isinstance(pad, bytes) else pad

    def compute(images: Any) -> Any:
        if images.ndim != 4:
            raise invalid(f"input must be 4-dimensional{list(images.shape)}")
        b, h, w, c = images.shape
        ke_r, ke_c = kr + (kr - 1) * (rr - 1), kc + (kc - 1) * (rc - 1)
        if pad == "SAME":
            (pt, pb), (pl, pr) = _same_pads(h, ke_r, sr), _same_pads(w, ke_c, sc)
            oh, ow = (h + sr - 1) // sr, (w + sc - 1) // sc
        else:
            pt = pb = pl = pr = 0
            oh, ow = max(0, (h - ke_r + sr) // sr), max(0, (w - ke_c + sc) // sc)
        x = xp.pad(images, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
        rows = (xp.arange(oh) * sr)[:, None] + xp.arange(kr)[None, :] * rr  # [oh, kr]
        cols = (xp.arange(ow) * sc)[:, None] + xp.arange(kc)[None, :] * rc  # [ow, kc]
        p = x[:, rows[:, None, :, None], cols[None, :, None, :]]  # [b, oh, ow, kr, kc, c]
        return xp.ascontiguousarray(p.reshape(b, oh, ow, kr * kc * c))

    return compute


# =======================================================================================
# gradients
# =======================================================================================
@ks.gradient("ResizeBilinear")
def _resize_bilinear_grad(op: Any, grad: Tensor) -> list[Any]:
    return [apply_op("ResizeBilinearGrad", grads=grad, original_image=op.inputs[0],
                     align_corners=op.node_attrs.get("align_corners", False),
                     half_pixel_centers=op.node_attrs.get("half_pixel_centers", False)),
            None]


@ks.gradient("ResizeNearestNeighbor")
def _resize_nn_grad(op: Any, grad: Tensor) -> list[Any]:
    image = op.inputs[0]
    s = image.shape
    if s.ndims is not None and s[1:3].is_fully_defined():
        size: Any = convert_to_tensor(np.array(s.as_list()[1:3], np.int32))
    else:
        size = tf_mod().shape(image)[1:3]
    return [apply_op("ResizeNearestNeighborGrad", grads=grad, size=size,
                     align_corners=op.node_attrs.get("align_corners", False),
                     half_pixel_centers=op.node_attrs.get("half_pixel_centers", False)),
            None]


@ks.gradient("ResizeBicubic")
def _resize_bicubic_grad(op: Any, grad: Tensor) -> list[Any]:
    if op.inputs[0].dtype.base_dtype not in (_dt.float32, _dt.float64):
        return [None, None]
    return [apply_op("ResizeBicubicGrad", grads=grad, original_image=op.inputs[0],
                     align_corners=op.node_attrs.get("align_corners", False),
                     half_pixel_centers=op.node_attrs.get("half_pixel_centers", False)),
            None]


@ks.gradient("CropAndResize")
def _crop_and_resize_grad(op: Any, grad: Tensor) -> list[Any]:
    image = op.inputs[0]
    if image.shape.is_fully_defined():
        image_shape: Any = convert_to_tensor(np.array(image.shape.as_list(), np.int32))
    else:
        image_shape = tf_mod().shape(image)
    grad0 = None
    if image.dtype.base_dtype in (_dt.float16, _dt.float32, _dt.float64):
        grad0 = apply_op("CropAndResizeGradImage", grads=grad, boxes=op.inputs[1],
                         box_ind=op.inputs[2], image_size=image_shape,
                         T=image.dtype.base_dtype,
                         method=op.node_attrs.get("method", "bilinear"))
    grad1 = apply_op("CropAndResizeGradBoxes", grads=grad, image=op.inputs[0],
                     boxes=op.inputs[1], box_ind=op.inputs[2])
    return [grad0, grad1, None, None]


@ks.gradient("ExtractImagePatches")
def _extract_patches_grad(op: Any, grad: Tensor) -> list[Any]:
    """Each input pixel's gradient is the sum of the patch entries it was copied to: the
    patches of an image of pixel numbers say which (0 marks padding)."""
    tf = tf_mod()
    x = op.inputs[0]
    shp = tf.shape(x)
    h, w, c = shp[1], shp[2], shp[3]
    n = h * w
    ids = tf.reshape(tf.range(1, tf.cast(n, _dt.int64) + 1, dtype=_dt.int64),
                     tf.stack([1, h, w, 1]))
    pid = apply_op("ExtractImagePatches", images=ids, ksizes=op.node_attrs["ksizes"],
                   strides=op.node_attrs["strides"], rates=op.node_attrs["rates"],
                   padding=op.node_attrs["padding"])
    pid = tf.reshape(pid, [-1])
    g = tf.reshape(grad, tf.stack([shp[0], -1, c]))  # [b, oh*ow*kr*kc, c]
    g = tf.transpose(g, [1, 0, 2])
    summed = tf.math.unsorted_segment_sum(g, tf.cast(pid, _dt.int32), tf.cast(n, _dt.int32)
                                          + 1)
    summed = tf.transpose(summed[1:], [1, 0, 2])
    return [tf.reshape(summed, shp)]


ks.not_differentiable("ResizeBilinearGrad", "ResizeBicubicGrad", "ResizeNearestNeighborGrad",
                      "ResizeArea", "ExtractGlimpse", "CropAndResizeGradImage",
                      "CropAndResizeGradBoxes")


# =======================================================================================
# API
# =======================================================================================
@ks.api("image.resize_bilinear")
def resize_bilinear(images: Any, size: Any, align_corners: bool = False,
                    name: str | None = None, half_pixel_centers: bool = False) -> Tensor:
    """Bilinear resize of 4-D ``images`` to ``size`` (the ResizeBilinear op; float32)."""
    return apply_op("ResizeBilinear", name=name, images=images, size=size,
                    align_corners=align_corners, half_pixel_centers=half_pixel_centers)


@ks.api("image.resize_nearest_neighbor")
def resize_nearest_neighbor(images: Any, size: Any, align_corners: bool = False,
                            name: str | None = None,
                            half_pixel_centers: bool = False) -> Tensor:
    """Nearest-neighbour resize (the ResizeNearestNeighbor op; keeps the dtype)."""
    return apply_op("ResizeNearestNeighbor", name=name, images=images, size=size,
                    align_corners=align_corners, half_pixel_centers=half_pixel_centers)


@ks.api("image.resize_bicubic")
def resize_bicubic(images: Any, size: Any, align_corners: bool = False,
                   name: str | None = None, half_pixel_centers: bool = False) -> Tensor:
    """Bicubic resize (the ResizeBicubic op; float32)."""
    return apply_op("ResizeBicubic", name=name, images=images, size=size,
                    align_corners=align_corners, half_pixel_centers=half_pixel_centers)


@ks.api("image.resize_area")
def resize_area(images: Any, size: Any, align_corners: bool = False,
                name: str | None = None) -> Tensor:
    """Area-averaging resize (the ResizeArea op; float32)."""
    return apply_op("ResizeArea", name=name, images=images, size=size,
                    align_corners=align_corners)


@ks.api("image.crop_and_resize")
def crop_and_resize(image: Any, boxes: Any, box_ind: Any = None, crop_size: Any = None,
                    method: str = "bilinear", extrapolation_value: float = 0,
                    name: str | None = None, box_indices: Any = None) -> Tensor:
    """Crops normalised ``boxes`` ([y1, x1, y2, x2]) out of ``image[box_ind]`` and resizes
    each to ``crop_size`` (the CropAndResize op; float32).

    :raises ValueError: when both ``box_ind`` and ``box_indices`` are given
    """
    if box_indices is not None:
        if box_ind is not None:
            raise ValueError("Cannot specify both 'box_indices' and 'box_ind'")
        box_ind = box_indices
    return apply_op("CropAndResize", name=name, image=image, boxes=boxes, box_ind=box_ind,
                    crop_size=crop_size, method=method,
                    extrapolation_value=float(extrapolation_value))


@ks.api("image.extract_glimpse")
def extract_glimpse(input: Any, size: Any, offsets: Any, centered: bool = True,  # noqa: A002
                    normalized: bool = True, uniform_noise: bool = True,
                    name: str | None = None) -> Tensor:
    """Windows of ``size`` at ``offsets`` ([y, x] per image); outside pixels are noise
    (the ExtractGlimpse op)."""
    return apply_op("ExtractGlimpse", name=name, input=input, size=size, offsets=offsets,
                    centered=centered, normalized=normalized, uniform_noise=uniform_noise)


def extract_image_patches(images: Any, ksizes: Any = None, strides: Any = None,
                          rates: Any = None, padding: Any = None, name: str | None = None,
                          sizes: Any = None) -> Tensor:
    """Patches of ``ksizes`` taken every ``strides`` (dilated by ``rates``), flattened into
    the depth dimension (the ExtractImagePatches op).

    :raises ValueError: when both ``ksizes`` and ``sizes`` are given
    """
    if sizes is not None:
        if ksizes is not None:
            raise ValueError("Cannot specify both 'sizes' and 'ksizes'")
        ksizes = sizes
    return apply_op("ExtractImagePatches", name=name, images=images, ksizes=list(ksizes),
                    strides=list(strides), rates=list(rates), padding=padding)


def extract_patches(images: Any, sizes: Any, strides: Any, rates: Any, padding: Any,
                    name: str | None = None) -> Tensor:
    """``tf.image.extract_patches``: :func:`extract_image_patches` with ``sizes``."""
    return apply_op("ExtractImagePatches", name=name, images=images, ksizes=list(sizes),
                    strides=list(strides), rates=list(rates), padding=padding)


alias(extract_image_patches, "image.extract_image_patches", "extract_image_patches")
alias(extract_patches, "image.extract_patches")

__all__ = ["resize_bilinear", "resize_nearest_neighbor", "resize_bicubic", "resize_area",
           "crop_and_resize", "extract_glimpse", "extract_image_patches", "extract_patches"]
