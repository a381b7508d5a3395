"""Summary ops of the standard kernel set and ``tf.summary``'s op functions.

Each op outputs a scalar string: a serialized ``Summary`` proto (flowrt.proto.summary_pb2,
wire-compatible with TF's). ``ScalarSummary`` writes ``simple_value``s;
``HistogramSummary`` a ``HistogramProto`` over TF's default buckets (limits growing by
10% from 1e-12 to 1e20, mirrored below zero, empty runs collapsed); ``ImageSummary``
PNG images (float images rescaled per image as TF does); ``AudioSummaryV2`` 16-bit PCM
WAV clips; ``TensorSummaryV2`` a ``TensorProto`` with its ``SummaryMetadata``;
``MergeSummary`` the union of its inputs' values (a tag twice is an error).

The Python functions (``tf.summary.scalar`` ...) build the tag from the name scope as
TF's ``summary_scope`` does (``family`` first) and add the op to ``collections``
(default ``[GraphKeys.SUMMARIES]``), which ``tf.summary.merge_all`` merges.
"""
from __future__ import annotations

import contextlib
import logging
import re
import struct
import sys
import threading
from typing import Any, Iterator, Sequence

import numpy as np
from google.protobuf import json_format
from google.protobuf.message import DecodeError

from flowrt import dtypes as _dt
from flowrt.graph import (GraphKeys, Tensor, add_to_collection, apply_op, convert_to_tensor,
                          get_collection, name_scope)
from flowrt.op_registry import OpDef
from flowrt.session import get_default_session
from flowrt.proto import summary_pb2

from ._common import ks, scalar_shape
from .image_codecs import encode_png_bytes
from .image_common import host, invalid

__all__ = ["scalar", "histogram", "image", "audio", "text", "tensor_summary", "merge",
           "merge_all", "get_summary_description", "histogram_proto", "default_bucket_limits",
           "encode_wav"]

_log = logging.getLogger("flowrt")

_IMAGE_TYPES = "uint8, float, half, float64"

ks.op(
    OpDef("ScalarSummary", inputs=["tags: string", "values: T"], outputs=["summary: string"],
          attrs=["T: realnumbertype"], shape_fn=scalar_shape,
          doc="A Summary of scalar values, one per tag."),
    OpDef("HistogramSummary", inputs=["tag: string", "values: T"],
          outputs=["summary: string"], attrs=["T: realnumbertype = DT_FLOAT"],
          shape_fn=scalar_shape, doc="A Summary with a histogram of the values."),
    OpDef("ImageSummary", inputs=["tag: string", "tensor: T"], outputs=["summary: string"],
          attrs=["max_images: int >= 1 = 3", f"T: {{{_IMAGE_TYPES}}} = DT_FLOAT",
                 "bad_color: tensor = [255, 0, 0, 255]"],
          shape_fn=scalar_shape, doc="A Summary of PNG images from a 4-D batch."),
    OpDef("AudioSummaryV2", inputs=["tag: string", "tensor: float", "sample_rate: float"],
          outputs=["summary: string"], attrs=["max_outputs: int >= 1 = 3"],
          shape_fn=scalar_shape, doc="A Summary of WAV clips from a batch of audio."),
    OpDef("AudioSummary", inputs=["tag: string", "tensor: float"],
          outputs=["summary: string"], attrs=["sample_rate: float",
                                              "max_outputs: int >= 1 = 3"],
          shape_fn=scalar_shape, doc="AudioSummaryV2 with the sample rate as an attr."),
    OpDef("TensorSummaryV2", inputs=["tag: string", "tensor: T",
                                     "serialized_summary_metadata: string"],
          outputs=["summary: string"], attrs=["T: type"], shape_fn=scalar_shape,
          doc="A Summary holding a tensor and its SummaryMetadata."),
    OpDef("TensorSummary", inputs=["tensor: T"], outputs=["summary: string"],
          attrs=["T: type", "description: string = ''", "labels: list(string) = []",
                 "display_name: string = ''"], shape_fn=scalar_shape,
          doc="A Summary holding a tensor, named by the node (deprecated)."),
    OpDef("MergeSummary", inputs=["inputs: N * string"], outputs=["summary: string"],
          attrs=["N: int >= 1"], shape_fn=scalar_shape,
          doc="The union of the values of serialized Summary protos."),
)
ks.not_differentiable("ScalarSummary", "HistogramSummary", "ImageSummary", "AudioSummaryV2",
                      "AudioSummary", "TensorSummaryV2", "TensorSummary", "MergeSummary")


# -- encoders -----------------------------------------------------------------------------
def _default_bucket_limits() -> np.ndarray:
    """TF's default histogram bucket limits (core/lib/histogram): 1e-12 growing by 10%
    while below 1e20, then DBL_MAX; the same negated below zero; and 0."""
    pos = []
    v = 1.0e-12
    while v < 1.0e20:
        pos.append(v)
        v *= 1.1
    pos.append(sys.float_info.max)
    return np.array([-x for x in reversed(pos)] + [0.0] + pos, dtype=np.float64)


_LIMITS = _default_bucket_limits()


def _bucket_table(bits: int) -> tuple[np.ndarray, np.ndarray]:
    """A lookup table on the sign, exponent and top 4 mantissa bits of a float of
    ``bits`` bits (64 or 32): for each such range, the bucket of its smallest value
    (``base``) and the one limit the range may hold (``threshold``; values from it up
    go in the next bucket). A range spans under 6.25% of its values and the limits are
    10% apart, so it holds at most one limit. For float32 the threshold is the limit
    rounded up to float32, so float32 values compare with it exactly."""
    uint, flt, shift = (np.uint64, np.float64, 48) if bits == 64 else \
        (np.uint32, np.float32, 19)
    n = 1 << (bits - shift)
    keys = np.arange(n, dtype=uint)
    lo_bits = keys << uint(shift)
    hi_bits = lo_bits | uint((1 << shift) - 1)
    # bits grow with the magnitude: the smallest value is the low end for a positive
    # sign, the high end for a negative one
    with np.errstate(invalid="ignore"):  # the NaN ranges: never looked up
        smallest = np.where(keys < n // 2, lo_bits, hi_bits).view(flt).astype(np.float64)
        base = np.searchsorted(_LIMITS, smallest, side="right")
    base = np.minimum(base, len(_LIMITS) - 1)
    threshold = _LIMITS[base]
    if bits == 32:
        with np.errstate(over="ignore"):
            t32 = threshold.astype(np.float32)
        low = t32.astype(np.float64) < threshold
        t32[low] = np.nextafter(t32[low], np.float32(np.inf))
        return base.astype(np.intp), t32
    return base.astype(np.intp), threshold


_BASE, _THRESHOLD = _bucket_table(64)
_BASE32, _THRESHOLD32 = _bucket_table(32)
#: up to this many values, sums are added in order in double as TF does (the same
#: rounding); beyond, numpy's pairwise sum, as exact or more, is several times faster
_IN_ORDER_MAX = 1 << 14
#: tensors up to this many elements reuse per-thread scratch buffers: allocating large
#: temporaries each step costs more (page faults) than the arithmetic on them
_SCRATCH_MAX = 1 << 18
#: up to this many values, each value's bucket is found by binary search (one call);
#: beyond, the table lookup of _bucket_counts is faster
_SEARCH_MAX = 128
_scratch = threading.local()


def _buffers(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Two float64, one intp and one bool buffer of ``n`` elements for this thread."""
    if n > _SCRATCH_MAX:
        return (np.empty(n), np.empty(n), np.empty(n, np.intp), np.empty(n, bool))
    bufs = getattr(_scratch, "bufs", None)
    if bufs is None or len(bufs[0]) < n:
        size = max(n, 1024)
        bufs = (np.empty(size), np.empty(size), np.empty(size, np.intp),
                np.empty(size, bool))
        _scratch.bufs = bufs
    return tuple(b[:n] for b in bufs)  # type: ignore[return-value]


def _bucket_counts(v: np.ndarray, tmp: np.ndarray, idx: np.ndarray,
                   flag: np.ndarray) -> np.ndarray:
    """The count of each bucket for the finite float64 or float32 values ``v`` (TF's
    ``upper_bound`` over the limits: the first limit above the value; DBL_MAX itself in
    the last bucket), by table lookup and one comparison: a binary search over the 1549
    limits costs several times more. ``tmp``, ``idx``, ``flag`` are scratch space."""
    key = idx.view(np.int64)
    if v.dtype == np.float32:
        k32 = np.right_shift(v.view(np.uint32), np.uint32(19)).astype(np.intp)
        np.greater_equal(v, np.take(_THRESHOLD32, k32, mode="clip"), out=flag)
        np.take(_BASE32, k32, out=idx, mode="clip")
    else:
        np.right_shift(v.view(np.uint64), np.uint64(48), out=key.view(np.uint64))
        np.take(_THRESHOLD, key, out=tmp, mode="clip")
        np.greater_equal(v, tmp, out=flag)
        np.take(_BASE, key, out=idx, mode="clip")
    np.add(idx, flag, out=idx)
    np.minimum(idx, len(_LIMITS) - 1, out=idx)
    return np.bincount(idx, minlength=len(_LIMITS))


def bucket_indices(v: np.ndarray) -> np.ndarray:
    """The bucket of each finite value (see :func:`_bucket_counts`)."""
    v = np.ascontiguousarray(v, dtype=np.float64).reshape(-1)
    key = (v.view(np.uint64) >> np.uint64(48)).view(np.int64)
    out = np.take(_BASE, key) + (v >= np.take(_THRESHOLD, key))
    return np.minimum(out, len(_LIMITS) - 1)


def default_bucket_limits() -> np.ndarray:
    """A copy of the bucket limits every histogram summary uses."""
    return _LIMITS.copy()


def histogram_proto(values: Any) -> summary_pb2.HistogramProto:
    """The ``HistogramProto`` TF's HistogramSummary makes of ``values`` (any shape, all
    finite): value v counts in the first bucket whose limit is above v; min, max, num,
    sum and sum of squares (in double; in order as TF adds them up to 16384 values,
    pairwise beyond); each run of empty buckets collapsed into one entry at the run's
    last limit."""
    x = np.asarray(values).reshape(-1)
    h = summary_pb2.HistogramProto()
    if 0 < x.size <= _SEARCH_MAX:
        _small_histogram(h, x)
        return h
    wide, tmp, idx, flag = _buffers(x.size)
    if x.dtype in (np.float32, np.float16):  # exact in float32: the small table
        v = np.ascontiguousarray(x, dtype=np.float32)
    else:
        v = wide
        np.copyto(v, x, casting="unsafe")
    counts = _bucket_counts(v, tmp, idx, flag)
    keep = counts > 0
    keep[:-1] |= keep[1:].copy()
    keep[-1] = True
    if v.size:
        h.min, h.max = float(v.min()), float(v.max())
        with np.errstate(over="ignore", invalid="ignore"):  # sums may overflow, as TF's
            np.multiply(v, v, dtype=np.float64, out=tmp)
            if v.size <= _IN_ORDER_MAX:
                h.sum = float(np.add.accumulate(v, dtype=np.float64, out=wide)[-1])
                h.sum_squares = float(np.add.accumulate(tmp, out=tmp)[-1])
            else:
                h.sum = float(np.sum(v, dtype=np.float64))
                h.sum_squares = float(np.sum(tmp))
    else:
        h.min, h.max = float(_LIMITS[-1]), -float(_LIMITS[-1])
    h.num = float(v.size)
    h.bucket_limit.extend(_LIMITS[keep].tolist())
    h.bucket.extend(counts[keep].astype(np.float64).tolist())
    return h


_LIMIT_LIST = _LIMITS.tolist()


def _small_histogram(h: summary_pb2.HistogramProto, x: np.ndarray) -> None:
    """:func:`histogram_proto` of a few finite values, mostly in Python: a binary
    search gives each value's bucket, and the sums are added in order in double (Python
    floats) exactly as TF adds them; a dozen numpy calls over the 1549 buckets would
    cost more than the values themselves."""
    last = len(_LIMIT_LIST) - 1
    values = x.tolist()
    found = np.searchsorted(_LIMITS, x, side="right").tolist()
    counts: dict[int, int] = {}
    for b in found:
        b = last if b > last else b
        counts[b] = counts.get(b, 0) + 1
    kept = set(counts)
    kept.update(b - 1 for b in counts if b > 0)
    kept.add(last)
    total = squares = 0.0
    for v in values:
        total += v
        squares += v * v
    h.min, h.max = float(min(values)), float(max(values))
    h.num = float(len(values))
    h.sum, h.sum_squares = total, squares
    order = sorted(kept)
    h.bucket_limit.extend([_LIMIT_LIST[b] for b in order])
    h.bucket.extend([float(counts.get(b, 0)) for b in order])


def encode_wav(samples: np.ndarray, sample_rate: int) -> bytes:
    """A 16-bit PCM WAV file of float ``samples`` [frames, channels] in [-1, 1], as TF's
    ``wav::EncodeAudioAsS16LEWav`` writes it (rounded half away from zero, clipped)."""
    frames, channels = samples.shape
    x = np.asarray(samples, dtype=np.float32).astype(np.float64) * 32768.0
    x = np.nan_to_num(np.sign(x) * np.floor(np.abs(x) + 0.5), nan=0.0)
    pcm = np.clip(x, -32768, 32767).astype("<i2").tobytes()
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(pcm), b"WAVE", b"fmt ", 16, 1,
                         channels, sample_rate, sample_rate * channels * 2, channels * 2, 16,
                         b"data", len(pcm))
    return header + pcm


def _normalize_image(img: np.ndarray, bad_color: np.ndarray) -> np.ndarray:
    """TF's ``NormalizeFloatImage``: a float [h*w, depth] image to uint8. Non-finite pixels
    take ``bad_color``; with a negative value the image is scaled by 127/max|v| and
    shifted by 128, else scaled by 255/max (values of the input's dtype, truncated)."""
    finite = np.isfinite(img).all(axis=1)
    good = img[finite].astype(np.float32)
    lo = float(good.min()) if good.size else np.inf
    hi = float(good.max()) if good.size else -np.inf
    if lo < 0:
        m = max(abs(lo), abs(hi))
        scale, offset = (np.float32(0.0) if m < 1e-6 else np.float32(127.0) / np.float32(m)), 128.0
    else:
        scale, offset = (np.float32(0.0) if hi < 1e-6 else np.float32(255.0) / np.float32(hi)), 0.0
    t = img.dtype.type
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = img * t(scale) + t(offset)
        out = np.where(finite[:, None], scaled, 0).astype(np.float64)
    out = np.clip(np.trunc(out), 0, 255).astype(np.uint8)
    out[~finite] = bad_color[:img.shape[1]]
    return out


# -- kernels ------------------------------------------------------------------------------
def _out(s: summary_pb2.Summary | bytes) -> np.ndarray:
    return np.array(s if isinstance(s, bytes) else s.SerializeToString(), dtype=object)


def _text(x: Any) -> str:
    return x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x)


def _scalar_tag(ctx: Any, tag: Any, what: str = "Tags") -> str:
    t = host(ctx, tag)
    if t.ndim != 0:
        raise invalid(f"{what} must be a scalar")
    return _text(t.item())


def _shape_str(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


@ks.kernel("ScalarSummary", device_type="CPU")
def _scalar_summary_kernel(ctx: Any) -> Any:
    def compute(tags: Any, values: Any) -> Any:
        t, v = host(ctx, tags), host(ctx, values)
        if t.shape != v.shape:
            single = f" (tag '{_text(t.item())}')" if t.ndim == 0 else ""
            raise invalid(f"tags and values not the same shape: {_shape_str(t.shape)} != "
                          f"{_shape_str(v.shape)}{single}")
        s = summary_pb2.Summary()
        for tag, x in zip(t.reshape(-1).tolist(), v.reshape(-1).tolist()):
            s.value.add(tag=_text(tag), simple_value=float(x))
        return _out(s)

    return compute


@ks.kernel("HistogramSummary", device_type="CPU")
def _histogram_summary_kernel(ctx: Any) -> Any:
    def compute(tag: Any, values: Any) -> Any:
        name = _scalar_tag(ctx, tag, "tags")
        v = host(ctx, values).reshape(-1)
        # min and max are finite only when every value is (NaN propagates): no mask
        if v.size and v.dtype.kind == "f" and not np.isfinite(v.min() + v.max()):
            with np.errstate(invalid="ignore"):
                first = v[np.argmax(~np.isfinite(v))]
            what = "Nan" if np.isnan(first) else "Infinity"
            raise invalid(f"{what} in summary histogram for: {ctx.node_name}")
        s = summary_pb2.Summary()
        s.value.add(tag=name).histo.CopyFrom(histogram_proto(v))
        return _out(s)

    return compute


@ks.kernel("ImageSummary", device_type="CPU")
def _image_summary_kernel(ctx: Any) -> Any:
    max_images = int(ctx.attrs.get("max_images", 3))
    bad_color = np.asarray(ctx.attrs.get("bad_color", [255, 0, 0, 255])).astype(np.uint8)
    bad_color = bad_color.reshape(-1)

    def compute(tag: Any, tensor: Any) -> Any:
        base = _scalar_tag(ctx, tag, "Tags")
        x = host(ctx, tensor)
        if x.ndim != 4 or x.shape[3] not in (1, 3, 4):
            raise invalid(f"Tensor must be 4-D with last dim 1, 3, or 4, not "
                          f"{_shape_str(x.shape)}")
        batch, h, w, depth = x.shape
        if x.dtype != np.uint8 and bad_color.size < depth:
            raise invalid(f"expected depth <= bad_color.size, got depth = {depth}, "
                          f"bad_color.size = {bad_color.size}")
        s = summary_pb2.Summary()
        for i in range(min(max_images, batch)):
            img = x[i]
            if img.dtype != np.uint8 and img.size:
                img = _normalize_image(img.reshape(h * w, depth), bad_color).reshape(h, w, depth)
            v = s.value.add(tag=f"{base}/image/{i}" if max_images > 1 else f"{base}/image")
            v.image.height, v.image.width, v.image.colorspace = h, w, depth
            v.image.encoded_image_string = encode_png_bytes(np.asarray(img, np.uint8))
        return _out(s)

    return compute


def _audio_summary(base: str, x: np.ndarray, rate: float, max_outputs: int) -> np.ndarray:
    """The Summary of AudioSummary(V2): a WAV clip per batch element, at most
    ``max_outputs``, tagged ``<tag>/audio[/i]``."""
    if not 2 <= x.ndim <= 3:
        raise invalid(f"Tensor must be 3-D or 2-D, got: {_shape_str(x.shape)}")
    if not rate > 0.0:
        raise invalid("sample_rate must be > 0")
    batch, frames = x.shape[0], x.shape[1]
    channels = 1 if x.ndim == 2 else x.shape[2]
    x = x.reshape(batch, frames, channels)
    rounded = max(1, int(round(rate)))
    s = summary_pb2.Summary()
    for i in range(min(max_outputs, batch)):
        v = s.value.add(tag=f"{base}/audio/{i}" if max_outputs > 1 else f"{base}/audio")
        a = v.audio
        a.sample_rate, a.num_channels, a.length_frames = rate, channels, frames
        a.content_type = "audio/wav"
        a.encoded_audio_string = encode_wav(x[i], rounded)
    return _out(s)


@ks.kernel("AudioSummaryV2", device_type="CPU")
def _audio_summary_v2_kernel(ctx: Any) -> Any:
    max_outputs = int(ctx.attrs.get("max_outputs", 3))

    def compute(tag: Any, tensor: Any, sample_rate: Any) -> Any:
        base = _scalar_tag(ctx, tag, "Tag")
        r = host(ctx, sample_rate)
        if r.size != 1:
            raise invalid("sample_rate must be rank-0 or contain a single value")
        return _audio_summary(base, host(ctx, tensor), float(r.reshape(())), max_outputs)

    return compute


@ks.kernel("AudioSummary", device_type="CPU")
def _audio_summary_kernel(ctx: Any) -> Any:
    max_outputs = int(ctx.attrs.get("max_outputs", 3))
    rate = float(ctx.attrs["sample_rate"])

    def compute(tag: Any, tensor: Any) -> Any:
        return _audio_summary(_scalar_tag(ctx, tag, "Tag"), host(ctx, tensor), rate,
                              max_outputs)

    return compute


def _tensor_into(proto: Any, x: np.ndarray, dtype: _dt.DType) -> None:
    """TF's ``AsProtoTensorContent`` (``AsProtoField`` for strings)."""
    proto.dtype = dtype.as_datatype_enum
    proto.tensor_shape.SetInParent()
    for d in x.shape:
        proto.tensor_shape.dim.add(size=d)
    if dtype is _dt.string:
        proto.string_val.extend(b if isinstance(b, bytes) else str(b).encode()
                                for b in x.reshape(-1).tolist())
    else:
        proto.tensor_content = np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("<")) \
            .tobytes()


@ks.kernel("TensorSummaryV2", device_type="CPU")
def _tensor_summary_v2_kernel(ctx: Any) -> Any:
    dtype = ctx.input_dtypes[1]

    def compute(tag: Any, tensor: Any, metadata: Any) -> Any:
        s = summary_pb2.Summary()
        v = s.value.add(tag=_scalar_tag(ctx, tag, "tag"))
        _tensor_into(v.tensor, host(ctx, tensor), dtype)
        m = host(ctx, metadata).reshape(-1)
        try:
            v.metadata.ParseFromString(m[0] if m.size else b"")
        except DecodeError:
            raise invalid("Could not parse serialized_summary_metadata") from None
        return _out(s)

    return compute


@ks.kernel("TensorSummary", device_type="CPU")
def _tensor_summary_kernel(ctx: Any) -> Any:
    dtype = ctx.input_dtypes[0]

    def compute(tensor: Any) -> Any:
        s = summary_pb2.Summary()
        v = s.value.add(node_name=ctx.node_name)
        _tensor_into(v.tensor, host(ctx, tensor), dtype)
        return _out(s)

    return compute


@ks.kernel("MergeSummary", device_type="CPU")
def _merge_summary_kernel(ctx: Any) -> Any:
    def compute(*inputs: Any) -> Any:
        parts: list[bytes] = []
        tags: set[str] = set()
        for x in inputs:
            for b in host(ctx, x).reshape(-1).tolist():
                b = b if isinstance(b, bytes) else str(b).encode()
                try:
                    s = summary_pb2.Summary.FromString(b)
                except DecodeError:
                    raise invalid("Could not parse one of the summary inputs") from None
                for v in s.value:
                    if v.tag and v.tag in tags:
                        raise invalid(f"Duplicate tag {v.tag} found in summary inputs")
                    tags.add(v.tag)
                parts.append(b)
        # Summary has one repeated field: serialized Summaries concatenate into their union
        return _out(b"".join(parts))

    return compute


# -- tf.summary ---------------------------------------------------------------------------
_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w\.]")


def _clean_tag(name: str | None) -> str | None:
    """TF's ``clean_tag``: characters other than ``[-/\\w.]`` become ``_``, leading
    slashes go."""
    if name is not None:
        new = _INVALID_TAG_CHARACTERS.sub("_", name).lstrip("/")
        if new != name:
            _log.info("Summary name %s is illegal; using %s instead.", name, new)
        name = new
    return name


@contextlib.contextmanager
def _summary_scope(name: str, family: str | None = None, default_name: str | None = None,
                   values: Any = None) -> Iterator[tuple[str, str]]:
    """TF's ``summary_scope``: enter a name scope of ``[family/]name`` and yield
    ``(tag, scope)``; the tag is the scope without its slash, with ``family/`` first."""
    name = _clean_tag(name)
    family = _clean_tag(family)
    base = name if family is None else f"{family}/{name}"
    with name_scope(base, default_name, values) as scope:
        tag = scope.rstrip("/") if family is None else f"{family}/{scope.rstrip('/')}"
        yield tag, scope


def _collect(val: Tensor, collections: Sequence[str] | None,
             default: Sequence[str]) -> None:
    for key in (default if collections is None else collections):
        add_to_collection(key, val)


@ks.api("summary.scalar")
def scalar(name: str, tensor: Any, collections: Sequence[str] | None = None,
           family: str | None = None) -> Tensor:
    """A summary of one real scalar (``tf.summary.scalar``): a string tensor holding a
    serialized ``Summary`` with ``simple_value``, tagged by the name scope."""
    with _summary_scope(name, family, values=[tensor]) as (tag, scope):
        val = apply_op("ScalarSummary", tags=tag, values=tensor, name=scope)
        _collect(val, collections, [GraphKeys.SUMMARIES])
    return val


@ks.api("summary.histogram")
def histogram(name: str, values: Any, collections: Sequence[str] | None = None,
              family: str | None = None) -> Tensor:
    """A histogram summary of ``values`` (any shape; ``InvalidArgumentError`` at run time
    for a NaN or infinity)."""
    with _summary_scope(name, family, values=[values],
                        default_name="HistogramSummary") as (tag, scope):
        val = apply_op("HistogramSummary", tag=tag, values=values, name=scope)
        _collect(val, collections, [GraphKeys.SUMMARIES])
    return val


@ks.api("summary.image")
def image(name: str, tensor: Any, max_outputs: int = 3,
          collections: Sequence[str] | None = None, family: str | None = None) -> Tensor:
    """An image summary of a [batch, height, width, 1|3|4] uint8 or float tensor: up to
    ``max_outputs`` PNGs tagged ``<tag>/image/<i>`` (``<tag>/image`` when
    ``max_outputs`` is 1); float images are rescaled to [0, 255] one by one."""
    with _summary_scope(name, family, values=[tensor]) as (tag, scope):
        val = apply_op("ImageSummary", tag=tag, tensor=tensor, max_images=max_outputs,
                       bad_color=np.array([255, 0, 0, 255], dtype=np.uint8), name=scope)
        _collect(val, collections, [GraphKeys.SUMMARIES])
    return val


@ks.api("summary.audio")
def audio(name: str, tensor: Any, sample_rate: Any, max_outputs: int = 3,
          collections: Sequence[str] | None = None, family: str | None = None) -> Tensor:
    """An audio summary of a [batch, frames] or [batch, frames, channels] float tensor in
    [-1, 1]: up to ``max_outputs`` WAV clips tagged ``<tag>/audio[/<i>]``."""
    with _summary_scope(name, family=family, values=[tensor]) as (tag, scope):
        sample_rate = convert_to_tensor(sample_rate, dtype=_dt.float32, name="sample_rate")
        val = apply_op("AudioSummaryV2", tag=tag, tensor=tensor, max_outputs=max_outputs,
                       sample_rate=sample_rate, name=scope)
        _collect(val, collections, [GraphKeys.SUMMARIES])
    return val


@ks.api("summary.tensor_summary")
def tensor_summary(name: str, tensor: Any, summary_description: str | None = None,
                   collections: Sequence[str] | None = None, summary_metadata: Any = None,
                   family: str | None = None, display_name: str | None = None) -> Tensor:
    """A summary holding ``tensor`` itself with a ``SummaryMetadata`` (which plugin reads
    it, a display name, a description)."""
    metadata = summary_pb2.SummaryMetadata()
    if summary_metadata is not None:
        metadata.ParseFromString(summary_metadata.SerializeToString())
    if summary_description is not None:
        metadata.summary_description = summary_description
    if display_name is not None:
        metadata.display_name = display_name
    with _summary_scope(name, family, values=[tensor]) as (tag, scope):
        val = apply_op("TensorSummaryV2", tensor=tensor, tag=tag, name=scope,
                       serialized_summary_metadata=metadata.SerializeToString())
        _collect(val, collections, [GraphKeys.SUMMARIES])
    return val


@ks.api("summary.text")
def text(name: str, tensor: Any, collections: Sequence[str] | None = None) -> Tensor:
    """A summary of a string tensor for TensorBoard's text plugin.

    :raises ValueError: if ``tensor`` is not a string tensor
    """
    tensor = convert_to_tensor(tensor)
    if tensor.dtype.base_dtype != _dt.string:
        raise ValueError(f"Expected tensor {tensor.name} to have dtype string, got "
                         f"{tensor.dtype}")
    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
    return tensor_summary(name=name, tensor=tensor, summary_metadata=metadata,
                          collections=collections)


@ks.api("summary.merge")
def merge(inputs: Sequence[Any], collections: Sequence[str] | None = None,
          name: str | None = None) -> Tensor:
    """One ``Summary`` with the values of every input summary (``InvalidArgumentError``
    at run time when two share a tag); added to ``collections`` (default none)."""
    name = _clean_tag(name)
    with name_scope(name, "Merge", inputs):
        val = apply_op("MergeSummary", inputs=list(inputs), name=name)
        _collect(val, collections, [])
    return val


@ks.api("summary.merge_all")
def merge_all(key: str = GraphKeys.SUMMARIES, scope: str | None = None,
              name: str | None = None) -> Tensor | None:
    """:func:`merge` of the summaries in collection ``key`` of the default graph (those
    whose name matches ``scope``, with ``re.match``); None when there are none."""
    summary_ops = get_collection(key, scope=scope)
    if not summary_ops:
        return None
    return merge(summary_ops, name=name)


#: the collections TF's v2 summary ops and summary-writer initializers go into (no op of
#: flowrt's puts anything there: TF 2's writers are out of scope)
_SUMMARY_V2 = "_SUMMARY_V2"
_WRITER_INITS = "_SUMMARY_WRITER_V2"


@ks.api("summary.all_v2_summary_ops")
def all_v2_summary_ops() -> list[Any]:
    """The graph's TF 2 summary ops (``tf.compat.v1.summary.all_v2_summary_ops``): the
    ``_SUMMARY_V2`` collection, empty in flowrt."""
    return get_collection(_SUMMARY_V2)


@ks.api("summary.initialize")
def initialize(graph: Any = None, session: Any = None) -> None:
    """Run the TF 2 summary writers' initializers (``tf.compat.v1.summary.initialize``):
    none exist in flowrt, so this only checks for a session as TF does.

    :raises ValueError: without ``session`` and without a default session
    """
    if session is None:
        session = get_default_session()
        if session is None:
            raise ValueError("session must be passed if no default session exists")
    inits = get_collection(_WRITER_INITS)
    if inits:
        session.run(inits)


@ks.api("summary.get_summary_description")
def get_summary_description(node_def: Any) -> summary_pb2.SummaryDescription:
    """The ``SummaryDescription`` a ``TensorSummary`` node's ``description`` attr holds
    (JSON).

    :raises ValueError: if the node is not a TensorSummary
    """
    if node_def.op != "TensorSummary":
        raise ValueError(f"Can't get_summary_description on {node_def.op}")
    desc = node_def.attr["description"].s
    out = summary_pb2.SummaryDescription()
    json_format.Parse(desc.decode() if isinstance(desc, bytes) else desc, out)
    return out
