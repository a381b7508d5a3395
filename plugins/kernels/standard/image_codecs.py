"""tf.image codecs: DecodePng / EncodePng, DecodeJpeg / EncodeJpeg /
EncodeJpegVariableQuality / DecodeAndCropJpeg / ExtractJpegShape, DecodeGif, DecodeBmp,
DecodeImage, and the composites is_jpeg, decode_image, adjust_jpeg_quality and
random_jpeg_quality.

Decoding (and JPEG encoding) goes through Pillow, an optional extra
(``pip install 'flowrt[image]'``); Pillow is imported inside the kernels only, so
``import flowrt`` never needs it, and a graph that runs a codec without it fails with
UnimplementedError naming the extra. PNG encoding is plain zlib (exact for uint8 and
uint16 with 1-4 channels, which Pillow cannot write for 16-bit colour), and 16-bit PNGs
are decoded here too (Pillow reduces 16-bit colour to 8 bits).
"""
from __future__ import annotations

import io
import struct
import zlib
from typing import Any

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.graph import Tensor, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import constant_value, ks
from .image_common import alias, host, invalid, shape_error, tf_mod, to_device, with_rank


# =======================================================================================
# ops
# =======================================================================================
def _scalar_contents(op: Any) -> None:
    d = op.inputs[0].shape.as_tuple()
    if d is not None and len(d) != 0:
        raise shape_error(op, f"Shape must be rank 0 but is rank {len(d)}")


def _decode_shape(op: Any) -> list[TensorShape]:
    _scalar_contents(op)
    c = int(op.node_attrs.get("channels", 0) or 0)
    return [TensorShape([None, None, c if c else None])]


def _crop_decode_shape(op: Any) -> list[TensorShape]:
    _scalar_contents(op)
    with_rank(op, 1, 1)
    c = int(op.node_attrs.get("channels", 0) or 0)
    win = constant_value(op.inputs[1])
    h = w = None
    if win is not None and np.asarray(win).size == 4:
        h, w = int(np.asarray(win)[2]), int(np.asarray(win)[3])
    return [TensorShape([h, w, c if c else None])]


def _gif_shape(op: Any) -> list[TensorShape]:
    _scalar_contents(op)
    return [TensorShape([None, None, None, 3])]


def _decode_image_shape(op: Any) -> list[TensorShape]:
    _scalar_contents(op)
    if op.node_attrs.get("expand_animations", True):
        return [unknown_shape()]
    c = int(op.node_attrs.get("channels", 0) or 0)
    return [TensorShape([None, None, c if c else None])]


def _encode_shape(op: Any) -> list[TensorShape]:
    with_rank(op, 0, 3)
    return [TensorShape([])]


def _encode_vq_shape(op: Any) -> list[TensorShape]:
    with_rank(op, 0, 3)
    with_rank(op, 1, 0)
    return [TensorShape([])]


def _jpeg_shape_shape(op: Any) -> list[TensorShape]:
    _scalar_contents(op)
    return [TensorShape([3])]


def _scalar_string(op: Any) -> list[TensorShape]:
    _scalar_contents(op)
    return [TensorShape([])]


_JPEG_DECODE_ATTRS = ["channels: int = 0", "ratio: int = 1", "fancy_upscaling: bool = true",
                      "try_recover_truncated: bool = false",
                      "acceptable_fraction: float = 1.0", "dct_method: string = ''"]
ks.op(
    OpDef("DecodePng", inputs=["contents: string"], outputs=["image: dtype"],
          attrs=["channels: int = 0", "dtype: {uint8, uint16} = DT_UINT8"],
          shape_fn=_decode_shape, doc="Decodes a PNG image."),
    OpDef("EncodePng", inputs=["image: T"], outputs=["contents: string"],
          attrs=["compression: int = -1", "T: {uint8, uint16} = DT_UINT8"],
          shape_fn=_encode_shape, doc="Encodes an image as PNG."),
    OpDef("DecodeJpeg", inputs=["contents: string"], outputs=["image: uint8"],
          attrs=_JPEG_DECODE_ATTRS, shape_fn=_decode_shape, doc="Decodes a JPEG image."),
    OpDef("DecodeAndCropJpeg", inputs=["contents: string", "crop_window: int32"],
          outputs=["image: uint8"], attrs=_JPEG_DECODE_ATTRS, shape_fn=_crop_decode_shape,
          doc="Decodes the crop window [y, x, height, width] of a JPEG image."),
    OpDef("EncodeJpeg", inputs=["image: uint8"], outputs=["contents: string"],
          attrs=["format: {'', 'grayscale', 'rgb'} = ''", "quality: int = 95",
                 "progressive: bool = false", "optimize_size: bool = false",
                 "chroma_downsampling: bool = true", "density_unit: {'in', 'cm'} = 'in'",
                 "x_density: int = 300", "y_density: int = 300",
                 "xmp_metadata: string = ''"],
          shape_fn=_encode_shape, doc="Encodes an image as JPEG."),
    OpDef("EncodeJpegVariableQuality", inputs=["images: uint8", "quality: int32"],
          outputs=["contents: string"], shape_fn=_encode_vq_shape,
          doc="Encodes an image as JPEG with a run-time quality."),
    OpDef("ExtractJpegShape", inputs=["contents: string"], outputs=["image_shape: output_type"],
          attrs=["output_type: {int32, int64} = DT_INT32"], shape_fn=_jpeg_shape_shape,
          doc="[height, width, channels] of a JPEG image, from its header."),
    OpDef("DecodeGif", inputs=["contents: string"], outputs=["image: uint8"],
          shape_fn=_gif_shape, doc="Decodes every frame of a GIF image."),
    OpDef("DecodeBmp", inputs=["contents: string"], outputs=["image: uint8"],
          attrs=["channels: int = 0"], shape_fn=_decode_shape, doc="Decodes a BMP image."),
    OpDef("DecodeImage", inputs=["contents: string"], outputs=["image: dtype"],
          attrs=["channels: int = 0", "dtype: {uint8, uint16, float} = DT_UINT8",
                 "expand_animations: bool = true"],
          shape_fn=_decode_image_shape, doc="Decodes a PNG, JPEG, GIF or BMP image."),
)
ks.not_differentiable("DecodePng", "EncodePng", "DecodeJpeg", "DecodeAndCropJpeg",
                      "EncodeJpeg", "EncodeJpegVariableQuality", "ExtractJpegShape",
                      "DecodeGif", "DecodeBmp", "DecodeImage")


# =======================================================================================
# Pillow and the byte-level helpers
# =======================================================================================
def _pil(api_name: str) -> Any:
    """``PIL.Image``, or UnimplementedError naming the extra that provides it."""
    try:
        # Pillow is an optional dependency (the ``image`` extra): imported only here, when
        # a codec kernel runs.
        from PIL import Image
    except ImportError:
        raise errors.UnimplementedError(
            None, None, f"{api_name} needs Pillow: pip install 'flowrt[image]'") from None
    return Image


def _contents(ctx: Any, contents: Any) -> bytes:
    c = host(ctx, contents)
    if c.ndim != 0:
        raise invalid(f"contents must be scalar, got shape {list(c.shape)}")
    v = c.item() if hasattr(c, "item") else c
    return v if isinstance(v, bytes) else bytes(str(v), "utf-8")


def _attr_str(ctx: Any, name: str, default: str = "") -> str:
    v = ctx.attrs.get(name, default)
    return v.decode() if isinstance(v, bytes) else str(v)


def _open(Image: Any, data: bytes, what: str) -> Any:
    try:
        im = Image.open(io.BytesIO(data))
        im.load()
        return im
    except Exception:  # noqa: BLE001 - any decoder failure is bad data
        raise invalid(f"Invalid {what} data, size {len(data)}") from None


def _native(im: Any) -> np.ndarray:
    """A Pillow image as uint8 [h, w, c] in its own channel count (palettes expanded)."""
    mode = im.mode
    if mode in ("L", "1"):
        target = "L"
    elif mode in ("LA", "La"):
        target = "LA"
    elif mode in ("RGBA", "RGBa", "PA") or (mode == "P" and "transparency" in im.info):
        target = "RGBA"
    else:
        target = "RGB"
    if mode.startswith("I"):
        im = im.point(lambda v: v / 256)
    arr = np.asarray(im.convert(target))
    return arr[:, :, None] if arr.ndim == 2 else arr


def _gray(rgb: np.ndarray) -> np.ndarray:
    """libpng's rgb_to_gray as TF sets it up (0.299, 0.587 in 15-bit fixed point,
    truncated)."""
    r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
    return ((9797 * r + 19234 * g + 3737 * b) >> 15).astype(rgb.dtype)


def convert_channels(img: np.ndarray, channels: int) -> np.ndarray:
    """[h, w, c] (c in 1..4) to ``channels`` as TF's decoders do: grey replicated to RGB,
    alpha dropped or set opaque, colour to grey by libpng's weights."""
    c = img.shape[2]
    if channels in (0, c):
        return np.ascontiguousarray(img)
    opaque = np.iinfo(img.dtype).max
    alpha = img[:, :, c - 1:c] if c in (2, 4) else np.full(img.shape[:2] + (1,), opaque,
                                                          img.dtype)
    if channels in (1, 2):
        g = img[:, :, :1] if c <= 2 else _gray(img[:, :, :3])[:, :, None]
        out = g if channels == 1 else np.concatenate([g, alpha], axis=2)
    else:
        color = img[:, :, :3] if c >= 3 else np.repeat(img[:, :, :1], 3, axis=2)
        out = color if channels == 3 else np.concatenate([color, alpha], axis=2)
    return np.ascontiguousarray(out)


def _check_channels(channels: int) -> None:
    if channels not in (0, 1, 2, 3, 4):
        raise invalid(f"channels must be 0, 1, 2, 3 or 4, got {channels}")


# -- PNG ---------------------------------------------------------------------------------
_PNG_SIG = b"\x89PNG\r\n\x1a\n"
_PNG_COLOR = {1: 0, 2: 4, 3: 2, 4: 6}  # channels -> colour type


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def encode_png_bytes(image: np.ndarray, compression: int = -1) -> bytes:
    """A PNG of a uint8 or uint16 [h, w, c] array, c in 1..4 (filter 0, zlib)."""
    h, w, c = image.shape
    depth = 16 if image.dtype == np.uint16 else 8
    raw = image.astype(">u2" if depth == 16 else np.uint8).reshape(h, w * c)
    rows = np.concatenate([np.zeros((h, 1), np.uint8), raw.view(np.uint8).reshape(h, -1)],
                          axis=1)
    level = compression if 0 <= compression <= 9 else -1
    ihdr = struct.pack(">IIBBBBB", w, h, depth, _PNG_COLOR[c], 0, 0, 0)
    return (_PNG_SIG + _png_chunk(b"IHDR", ihdr)
            + _png_chunk(b"IDAT", zlib.compress(rows.tobytes(), level))
            + _png_chunk(b"IEND", b""))


def _png_header(data: bytes) -> tuple[int, int, int, int, int] | None:
    """(width, height, bit depth, colour type, interlace) of a PNG, or None."""
    if not data.startswith(_PNG_SIG) or len(data) < 33 or data[12:16] != b"IHDR":
        return None
    w, h, depth, ctype, _, _, inter = struct.unpack(">IIBBBBB", data[16:29])
    return w, h, depth, ctype, inter


def _decode_png16(data: bytes) -> np.ndarray:
    """A non-interlaced 16-bit PNG as uint16 [h, w, c] (Pillow keeps 8 bits of colour)."""
    w, h, _, ctype, _ = _png_header(data)  # type: ignore[misc]
    c = {0: 1, 4: 2, 2: 3, 6: 4}[ctype]
    pos, idat = 8, b""
    while pos + 8 <= len(data):
        n = struct.unpack(">I", data[pos:pos + 4])[0]
        kind = data[pos + 4:pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + n]
        pos += 12 + n
    raw = np.frombuffer(zlib.decompress(idat), np.uint8)
    bpp, stride = 2 * c, 2 * c * w
    rows = raw.reshape(h, stride + 1)
    out = np.zeros((h, stride), np.int32)
    prev = np.zeros(stride, np.int32)
    for y in range(h):
        f, line = rows[y, 0], rows[y, 1:].astype(np.int32)
        cur = np.zeros(stride, np.int32)
        for i in range(stride):
            a = cur[i - bpp] if i >= bpp else 0
            b = prev[i]
            cc = prev[i - bpp] if i >= bpp else 0
            if f == 0:
                p = 0
            elif f == 1:
                p = a
            elif f == 2:
                p = b
            elif f == 3:
                p = (a + b) // 2
            else:
                pa, pb, pc = abs(b - cc), abs(a - cc), abs(a + b - 2 * cc)
                p = a if pa <= pb and pa <= pc else (b if pb <= pc else cc)
            cur[i] = (line[i] + p) & 0xFF
        out[y] = cur
        prev = cur
    return out.astype(np.uint8).view(">u2").reshape(h, w, c).astype(np.uint16)


def _decode_png(data: bytes, channels: int, dtype: Any, api: str) -> np.ndarray:
    hdr = _png_header(data)
    if hdr is None:
        raise invalid(f"Invalid PNG data, size {len(data)}")
    if hdr[2] == 16 and hdr[4] == 0:
        try:
            img16 = _decode_png16(data)
        except Exception:  # noqa: BLE001
            raise invalid(f"Invalid PNG data, size {len(data)}") from None
        img16 = convert_channels(img16, channels)
        return img16 if dtype == np.uint16 else (img16 >> 8).astype(np.uint8)
    Image = _pil(api)
    im = _open(Image, data, "PNG")
    if hdr[2] == 16 and im.mode.startswith("I"):
        arr = np.asarray(im).astype(np.uint16)[:, :, None]
        arr = convert_channels(arr, channels)
        return arr if dtype == np.uint16 else (arr >> 8).astype(np.uint8)
    arr = convert_channels(_native(im), channels)
    if dtype == np.uint16:
        return arr.astype(np.uint16) * 257
    return arr


# -- JPEG --------------------------------------------------------------------------------
def _decode_jpeg(ctx: Any, data: bytes, api: str) -> np.ndarray:
    Image = _pil(api)
    if not data.startswith(b"\xff\xd8\xff"):
        raise invalid(f"Invalid JPEG data or crop window, data size {len(data)}")
    channels = int(ctx.attrs.get("channels", 0) or 0)
    if channels not in (0, 1, 3):
        raise invalid(f"channels must be 0, 1, or 3 for JPEG, got {channels}")
    ratio = int(ctx.attrs.get("ratio", 1) or 1)
    if ratio not in (1, 2, 4, 8):
        raise invalid(f"ratio must be 1, 2, 4, or 8, got {ratio}")
    try:
        im = Image.open(io.BytesIO(data))
        size = ((im.size[0] + ratio - 1) // ratio, (im.size[1] + ratio - 1) // ratio)
        # libjpeg does the grey conversion (its Y channel) and the 1/ratio DCT scaling
        im.draft("L" if channels == 1 else im.mode, size)
        im.load()
    except Exception:  # noqa: BLE001
        raise invalid(f"Invalid JPEG data or crop window, data size {len(data)}") from None
    if im.mode == "CMYK" and channels == 0:
        return np.ascontiguousarray(np.asarray(im))
    arr = np.asarray(im.convert("L" if channels == 1 or (channels == 0 and im.mode == "L")
                                else "RGB"))
    return np.ascontiguousarray(arr[:, :, None] if arr.ndim == 2 else arr)


def _encode_jpeg(image: np.ndarray, fmt: str, quality: int, progressive: bool,
                 optimize: bool, chroma: bool, unit: str, xd: int, yd: int,
                 api: str) -> bytes:
    Image = _pil(api)
    if image.ndim != 3:
        raise invalid(f"image must be 3-dimensional{list(image.shape)}")
    c = image.shape[2]
    if fmt == "":
        if c not in (1, 3):
            raise invalid(f"image must have 1 or 3 channels, got {list(image.shape)}")
        fmt = "grayscale" if c == 1 else "rgb"
    want = 1 if fmt == "grayscale" else 3
    if c != want:
        raise invalid(f"image must have {want} channels for format {fmt}, got "
                      f"{list(image.shape)}")
    if not 0 <= quality <= 100:
        raise invalid(f"quality must be in [0,100], got {quality}")
    if image.shape[0] == 0 or image.shape[1] == 0:
        raise invalid(f"Invalid image dimensions {list(image.shape)}")
    im = Image.fromarray(np.ascontiguousarray(image[:, :, 0] if c == 1 else image),
                         "L" if c == 1 else "RGB")
    dpi = (xd, yd) if unit == "in" else (xd * 2.54, yd * 2.54)
    buf = io.BytesIO()
    opts: dict[str, Any] = dict(format="JPEG", quality=max(quality, 1),
                                progressive=progressive, optimize=optimize, dpi=dpi)
    if c == 3:
        opts["subsampling"] = 2 if chroma else 0
    im.save(buf, **opts)
    return buf.getvalue()


# =======================================================================================
# kernels
# =======================================================================================
def _bytes_out(ctx: Any, b: bytes) -> Any:
    return np.array(b, dtype=object)


@ks.kernel("DecodePng")
def _decode_png_kernel(ctx: Any) -> Any:
    channels = int(ctx.attrs.get("channels", 0) or 0)
    out = ctx.output_dtypes[0].np

    def compute(contents: Any) -> Any:
        _check_channels(channels)
        return to_device(ctx, _decode_png(_contents(ctx, contents), channels, out,
                                          "decode_png"))

    return compute


@ks.kernel("EncodePng")
def _encode_png_kernel(ctx: Any) -> Any:
    level = int(ctx.attrs.get("compression", -1))

    def compute(image: Any) -> Any:
        img = host(ctx, image)
        if img.ndim != 3:
            raise invalid(f"image must be 3-dimensional{list(img.shape)}")
        if img.shape[2] not in (1, 2, 3, 4):
            raise invalid(f"image must have 1, 2, 3, or 4 channels, got {img.shape[2]}")
        if not -1 <= level <= 9:
            raise invalid(f"compression should be in [-1,9], got {level}")
        return _bytes_out(ctx, encode_png_bytes(img, level))

    return compute


@ks.kernel("DecodeJpeg")
def _decode_jpeg_kernel(ctx: Any) -> Any:
    return lambda contents: to_device(ctx, _decode_jpeg(ctx, _contents(ctx, contents),
                                                        "decode_jpeg"))


@ks.kernel("DecodeAndCropJpeg", host_memory=("crop_window",))
def _decode_crop_jpeg_kernel(ctx: Any) -> Any:
    def compute(contents: Any, window: Any) -> Any:
        data = _contents(ctx, contents)
        w = host(ctx, window)
        if w.ndim != 1 or w.size != 4:
            raise invalid(f"crop_window must be shape [4] or [?] but got {list(w.shape)}")
        img = _decode_jpeg(ctx, data, "decode_and_crop_jpeg")
        y, x, ch, cw = (int(v) for v in w)
        if y < 0 or x < 0 or ch <= 0 or cw <= 0 or y + ch > img.shape[0] or \
                x + cw > img.shape[1]:
            raise invalid(f"Invalid JPEG data or crop window, data size {len(data)}")
        return to_device(ctx, np.ascontiguousarray(img[y:y + ch, x:x + cw]))

    return compute


@ks.kernel("EncodeJpeg")
def _encode_jpeg_kernel(ctx: Any) -> Any:
    args = (_attr_str(ctx, "format"), int(ctx.attrs.get("quality", 95)),
            bool(ctx.attrs.get("progressive", False)),
            bool(ctx.attrs.get("optimize_size", False)),
            bool(ctx.attrs.get("chroma_downsampling", True)),
            _attr_str(ctx, "density_unit", "in"), int(ctx.attrs.get("x_density", 300)),
            int(ctx.attrs.get("y_density", 300)))

    def compute(image: Any) -> Any:
        return _bytes_out(ctx, _encode_jpeg(host(ctx, image), *args, api="encode_jpeg"))

    return compute


@ks.kernel("EncodeJpegVariableQuality")
def _encode_jpeg_vq_kernel(ctx: Any) -> Any:
    def compute(images: Any, quality: Any) -> Any:
        q = host(ctx, quality)
        if q.ndim != 0:
            raise invalid(f"quality must be scalar: {list(q.shape)}")
        return _bytes_out(ctx, _encode_jpeg(host(ctx, images), "", int(q), False, False,
                                            True, "in", 300, 300, api="adjust_jpeg_quality"))

    return compute


@ks.kernel("ExtractJpegShape")
def _extract_jpeg_shape_kernel(ctx: Any) -> Any:
    out = ctx.output_dtypes[0].np

    def compute(contents: Any) -> Any:
        data = _contents(ctx, contents)
        Image = _pil("extract_jpeg_shape")
        if not data.startswith(b"\xff\xd8\xff"):
            raise invalid(f"Invalid JPEG data, size {len(data)}")
        try:
            im = Image.open(io.BytesIO(data))
            w, h = im.size
            c = {"L": 1, "1": 1, "CMYK": 4}.get(im.mode, 3)
        except Exception:  # noqa: BLE001
            raise invalid(f"Invalid JPEG data, size {len(data)}") from None
        return to_device(ctx, np.array([h, w, c], out))

    return compute


def _decode_gif(data: bytes, api: str) -> np.ndarray:
    Image = _pil(api)
    if not data.startswith(b"GIF"):
        raise invalid(f"Invalid GIF data (size {len(data)})")
    im = _open(Image, data, "GIF")
    frames = []
    try:
        for i in range(getattr(im, "n_frames", 1)):
            im.seek(i)
            frames.append(np.asarray(im.convert("RGB"), np.uint8))
    except Exception:  # noqa: BLE001
        raise invalid(f"Invalid GIF data (size {len(data)})") from None
    return np.stack(frames)


@ks.kernel("DecodeGif")
def _decode_gif_kernel(ctx: Any) -> Any:
    return lambda contents: to_device(ctx, _decode_gif(_contents(ctx, contents),
                                                       "decode_gif"))


def _decode_bmp(data: bytes, channels: int, api: str) -> np.ndarray:
    Image = _pil(api)
    if channels not in (0, 1, 3, 4):
        raise invalid(f"channels must be 0, 1, 3 or 4, got {channels}")
    if not data.startswith(b"BM"):
        raise invalid(f"Invalid BMP data, size {len(data)}")
    im = _open(Image, data, "BMP")
    return convert_channels(_native(im), channels)


@ks.kernel("DecodeBmp")
def _decode_bmp_kernel(ctx: Any) -> Any:
    channels = int(ctx.attrs.get("channels", 0) or 0)
    return lambda contents: to_device(ctx, _decode_bmp(_contents(ctx, contents), channels,
                                                       "decode_bmp"))


@ks.kernel("DecodeImage")
def _decode_image_kernel(ctx: Any) -> Any:
    channels = int(ctx.attrs.get("channels", 0) or 0)
    expand = bool(ctx.attrs.get("expand_animations", True))
    out_dt = ctx.output_dtypes[0]

    def compute(contents: Any) -> Any:
        data = _contents(ctx, contents)
        if data.startswith(b"\xff\xd8\xff"):
            if channels not in (0, 1, 3):
                raise invalid(f"channels must be 0, 1, or 3 for JPEG, got {channels}")
            img = _decode_jpeg(ctx, data, "decode_image")
        elif data.startswith(b"\x89PN"):
            img = _decode_png(data, channels, np.uint16 if out_dt != _dt.uint8 else np.uint8,
                              "decode_image")
        elif data.startswith(b"GIF"):
            if channels not in (0, 3):
                raise invalid("channels must be 0 or 3 for GIF, got " + str(channels))
            img = _decode_gif(data, "decode_image")
            if not expand:
                img = img[0]
        elif data.startswith(b"BM"):
            img = _decode_bmp(data, channels, "decode_image")
        else:
            raise invalid("Unknown image file format. One of JPEG, PNG, GIF, BMP required.")
        if out_dt == _dt.uint16 and img.dtype == np.uint8:
            img = img.astype(np.uint16) * 257
        elif out_dt == _dt.float32:
            mx = np.float32(65535 if img.dtype == np.uint16 else 255)
            img = img.astype(np.float32) * (np.float32(1.0) / mx)
        return to_device(ctx, np.ascontiguousarray(img))

    return compute


# =======================================================================================
# API
# =======================================================================================
def decode_png(contents: Any, channels: int = 0, dtype: Any = _dt.uint8,
               name: str | None = None) -> Tensor:
    """Decodes a PNG string to a uint8/uint16 [h, w, channels] image."""
    return apply_op("DecodePng", name=name, contents=contents, channels=channels, dtype=dtype)


def encode_png(image: Any, compression: int = -1, name: str | None = None) -> Tensor:
    """PNG-encodes a uint8/uint16 [h, w, c] image (c in 1..4)."""
    return apply_op("EncodePng", name=name, image=convert_to_tensor(image),
                    compression=compression)


def decode_jpeg(contents: Any, channels: int = 0, ratio: int = 1,
                fancy_upscaling: bool = True, try_recover_truncated: bool = False,
                acceptable_fraction: float = 1, dct_method: str = "",
                name: str | None = None) -> Tensor:
    """Decodes a JPEG string to a uint8 [h / ratio, w / ratio, channels] image."""
    return apply_op("DecodeJpeg", name=name, contents=contents, channels=channels,
                    ratio=ratio, fancy_upscaling=fancy_upscaling,
                    try_recover_truncated=try_recover_truncated,
                    acceptable_fraction=float(acceptable_fraction), dct_method=dct_method)


def decode_and_crop_jpeg(contents: Any, crop_window: Any, channels: int = 0, ratio: int = 1,
                         fancy_upscaling: bool = True, try_recover_truncated: bool = False,
                         acceptable_fraction: float = 1, dct_method: str = "",
                         name: str | None = None) -> Tensor:
    """Decodes the ``crop_window`` [y, x, height, width] of a JPEG string."""
    return apply_op("DecodeAndCropJpeg", name=name, contents=contents,
                    crop_window=crop_window, channels=channels, ratio=ratio,
                    fancy_upscaling=fancy_upscaling,
                    try_recover_truncated=try_recover_truncated,
                    acceptable_fraction=float(acceptable_fraction), dct_method=dct_method)


def encode_jpeg(image: Any, format: str = "", quality: int = 95,  # noqa: A002
                progressive: bool = False, optimize_size: bool = False,
                chroma_downsampling: bool = True, density_unit: str = "in",
                x_density: int = 300, y_density: int = 300, xmp_metadata: str = "",
                name: str | None = None) -> Tensor:
    """JPEG-encodes a uint8 [h, w, 1 or 3] image."""
    return apply_op("EncodeJpeg", name=name, image=image, format=format, quality=quality,
                    progressive=progressive, optimize_size=optimize_size,
                    chroma_downsampling=chroma_downsampling, density_unit=density_unit,
                    x_density=x_density, y_density=y_density, xmp_metadata=xmp_metadata)


def extract_jpeg_shape(contents: Any, output_type: Any = _dt.int32,
                       name: str | None = None) -> Tensor:
    """[height, width, channels] of a JPEG string, read from its header."""
    return apply_op("ExtractJpegShape", name=name, contents=contents, output_type=output_type)


def decode_gif(contents: Any, name: str | None = None) -> Tensor:
    """Decodes every frame of a GIF string: uint8 [frames, h, w, 3]."""
    return apply_op("DecodeGif", name=name, contents=contents)


def decode_bmp(contents: Any, channels: int = 0, name: str | None = None) -> Tensor:
    """Decodes a BMP string to a uint8 [h, w, channels] image."""
    return apply_op("DecodeBmp", name=name, contents=contents, channels=channels)


def decode_image(contents: Any, channels: int | None = None, dtype: Any = _dt.uint8,
                 name: str | None = None, expand_animations: bool = True) -> Tensor:
    """Decodes a JPEG, PNG, GIF or BMP string, detected from its first bytes; GIFs give
    4-D frames unless ``expand_animations`` is False. Float results are in [0, 1].

    :raises ValueError: for ``channels`` not in (None, 0, 1, 3, 4)
    """
    if channels not in (None, 0, 1, 3, 4):
        raise ValueError("channels must be in (None, 0, 1, 3, 4)")
    dtype = _dt.as_dtype(dtype)
    with name_scope(name, "decode_image"):
        c = 0 if channels is None else channels
        decode_dt = dtype if dtype in (_dt.float32, _dt.uint8, _dt.uint16) else _dt.uint16
        image = apply_op("DecodeImage", contents=contents, channels=c, dtype=decode_dt,
                         expand_animations=expand_animations)
        if decode_dt != dtype:
            from .image_color import convert_image_dtype
            image = convert_image_dtype(image, dtype)
        return image


def is_jpeg(contents: Any, name: str | None = None) -> Tensor:
    """True when ``contents`` starts with the JPEG signature \\xff\\xd8\\xff."""
    tf = tf_mod()
    with name_scope(name, "is_jpeg"):
        sub = tf.strings.substr(contents, 0, 3)
        return tf.equal(sub, b"\xff\xd8\xff", name=name)


def adjust_jpeg_quality(image: Any, jpeg_quality: Any, name: str | None = None) -> Tensor:
    """Re-encodes an image as JPEG with ``jpeg_quality`` (int or tensor) and decodes it,
    in the image's dtype."""
    from .image_color import convert_image_dtype
    from .image_common import is_tensor
    with name_scope(name, "adjust_jpeg_quality", [image]):
        image = convert_to_tensor(image, name="image")
        channels = image.shape.as_list()[-1] if image.shape.ndims else 0
        orig = image.dtype.base_dtype
        image = convert_image_dtype(image, _dt.uint8, saturate=True)
        if not is_tensor(jpeg_quality):
            jpeg_quality = convert_to_tensor(jpeg_quality, dtype=_dt.int32)
        image = apply_op("EncodeJpegVariableQuality", images=image, quality=jpeg_quality)
        image = apply_op("DecodeJpeg", contents=image, channels=channels or 0)
        return convert_image_dtype(image, orig, saturate=True)


def random_jpeg_quality(image: Any, min_jpeg_quality: int, max_jpeg_quality: int,
                        seed: int | None = None) -> Tensor:
    """:func:`adjust_jpeg_quality` with a quality uniform in [min, max).

    :raises ValueError: for a range outside [0, 100] or min >= max
    """
    if (min_jpeg_quality < 0 or max_jpeg_quality < 0 or min_jpeg_quality > 100
            or max_jpeg_quality > 100):
        raise ValueError("jpeg encoding range must be between 0 and 100.")
    if min_jpeg_quality >= max_jpeg_quality:
        raise ValueError("`min_jpeg_quality` must be less than `max_jpeg_quality`.")
    q = tf_mod().random_uniform([], min_jpeg_quality, max_jpeg_quality, seed=seed,
                                dtype=_dt.int32)
    return adjust_jpeg_quality(image, q)


for _fn, _names in (
        (decode_png, ("image.decode_png", "io.decode_png")),
        (encode_png, ("image.encode_png", "io.encode_png")),
        (decode_jpeg, ("image.decode_jpeg", "io.decode_jpeg")),
        (decode_and_crop_jpeg, ("image.decode_and_crop_jpeg", "io.decode_and_crop_jpeg")),
        (encode_jpeg, ("image.encode_jpeg", "io.encode_jpeg")),
        (extract_jpeg_shape, ("image.extract_jpeg_shape", "io.extract_jpeg_shape")),
        (decode_gif, ("image.decode_gif", "io.decode_gif")),
        (decode_bmp, ("image.decode_bmp", "io.decode_bmp")),
        (decode_image, ("image.decode_image", "io.decode_image")),
        (is_jpeg, ("image.is_jpeg", "io.is_jpeg")),
        (adjust_jpeg_quality, ("image.adjust_jpeg_quality",)),
        (random_jpeg_quality, ("image.random_jpeg_quality",))):
    alias(_fn, *_names)

__all__ = ["decode_png", "encode_png", "decode_jpeg", "decode_and_crop_jpeg", "encode_jpeg",
           "extract_jpeg_shape", "decode_gif", "decode_bmp", "decode_image", "is_jpeg",
           "adjust_jpeg_quality", "random_jpeg_quality", "encode_png_bytes"]


# =======================================================================================
# WebP (tf.io.decode_webp, TF 2.x's DecodeWebP; Pillow must have been built with WebP)
# =======================================================================================
def _webp_shape(op: Any) -> list[TensorShape]:
    _scalar_contents(op)
    c = int(op.node_attrs.get("channels", 0) or 0)
    return [TensorShape([None, None, None, c if c else None])]


ks.op(OpDef("DecodeWebP", inputs=["contents: string"], outputs=["image: dtype"],
            attrs=["channels: int = 0", "dtype: {uint8} = DT_UINT8"], shape_fn=_webp_shape,
            doc="Decodes a WebP image to uint8 [frames, height, width, channels]."))
ks.not_differentiable("DecodeWebP")


def _decode_webp(data: bytes, channels: int, api: str) -> np.ndarray:
    """``[frames, h, w, c]`` uint8 of a WebP file (c: 3, or 4 with alpha; an animation's
    frames as RGBA), as TF's decoder: ``channels`` 0 or the file's own count."""
    Image = _pil(api)
    if channels not in (0, 3, 4):
        raise invalid("WebP only supports 3 or 4 channels")
    if not (data[:4] == b"RIFF" and data[8:12] == b"WEBP"):
        raise invalid("Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, "
                      "WebP required.")
    im = _open(Image, data, "WebP")
    n = getattr(im, "n_frames", 1)
    mode = "RGBA" if n > 1 or "A" in im.mode else "RGB"
    if channels and channels != len(mode):
        raise invalid("Number of channels requested does not match input")
    frames = []
    for i in range(n):
        im.seek(i)
        frames.append(np.asarray(im.convert(mode), np.uint8))
    return np.stack(frames)


@ks.kernel("DecodeWebP")
def _decode_webp_kernel(ctx: Any) -> Any:
    channels = int(ctx.attrs.get("channels", 0) or 0)
    return lambda contents: to_device(ctx, _decode_webp(_contents(ctx, contents), channels,
                                                        "decode_webp"))


def decode_webp(contents: Any, channels: int = 0, dtype: Any = _dt.uint8,
                name: str | None = None) -> Tensor:
    """Decodes a WebP string to a uint8 ``[frames, height, width, channels]`` image (one
    frame for a still image); ``channels`` 0 keeps the file's (3, or 4 with alpha), else
    it must be the file's."""
    return apply_op("DecodeWebP", name=name, contents=contents, channels=channels,
                    dtype=dtype)


alias(decode_webp, "image.decode_webp", "io.decode_webp")
__all__ += ["decode_webp"]
