"""tf.image box ops: NonMaxSuppression (V1-V5, soft-NMS in V5), NonMaxSuppressionWithOverlaps,
CombinedNonMaxSuppression, DrawBoundingBoxes (V1/V2) and SampleDistortedBoundingBox (V1/V2),
with TF 1.15's algorithms (host kernels; the random crop sampler is seeded like the random
ops, not with TF's Philox stream)."""
from __future__ import annotations

import heapq
from collections import namedtuple
from typing import Any

import numpy as np

from flowrt import dtypes as _dt
from flowrt.graph import Tensor, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape

from ._common import constant_value, ks
from .image_common import host, invalid, merge_dim, shape_error, to_device, with_rank

_MASK64 = (1 << 64) - 1

# the result tuples of the multi-output ops, named as TF's generated wrappers name them
NonMaxSuppressionV4 = namedtuple("NonMaxSuppressionV4", ["selected_indices", "valid_outputs"])
CombinedNonMaxSuppression = namedtuple(
    "CombinedNonMaxSuppression",
    ["nmsed_boxes", "nmsed_scores", "nmsed_classes", "valid_detections"])
SampleDistortedBoundingBoxV2 = namedtuple("SampleDistortedBoundingBoxV2",
                                          ["begin", "size", "bboxes"])


# =======================================================================================
# shape functions
# =======================================================================================
def _nms_check(op: Any, boxes_i: int = 0, scores_i: int = 1) -> int | None:
    b = with_rank(op, boxes_i, 2)
    s = with_rank(op, scores_i, 1)
    if b[1] is not None and b[1] != 4:
        raise shape_error(op, f"Dimension must be 4 but is {b[1]}")
    n = merge_dim(op, b[0], s[0])
    for i in range(2, len(op.inputs)):
        with_rank(op, i, 0)
    return n


def _nms_shape(op: Any) -> list[TensorShape]:
    _nms_check(op)
    return [TensorShape([None])]


def _padded_len(op: Any) -> int | None:
    if not op.node_attrs.get("pad_to_max_output_size", False):
        return None
    v = constant_value(op.inputs[2])
    return None if v is None else int(v)


def _nms_v4_shape(op: Any) -> list[TensorShape]:
    _nms_check(op)
    return [TensorShape([_padded_len(op)]), TensorShape([])]


def _nms_v5_shape(op: Any) -> list[TensorShape]:
    _nms_check(op)
    n = _padded_len(op)
    return [TensorShape([n]), TensorShape([n]), TensorShape([])]


def _nms_overlaps_shape(op: Any) -> list[TensorShape]:
    o = with_rank(op, 0, 2)
    s = with_rank(op, 1, 1)
    merge_dim(op, o[0], o[1])
    merge_dim(op, o[0], s[0])
    for i in range(2, 5):
        with_rank(op, i, 0)
    return [TensorShape([None])]


def _combined_shape(op: Any) -> list[TensorShape]:
    b = with_rank(op, 0, 4)
    s = with_rank(op, 1, 3)
    for i in range(2, 6):
        with_rank(op, i, 0)
    if b[3] is not None and b[3] != 4:
        raise shape_error(op, f"Dimension must be 4 but is {b[3]}")
    batch = merge_dim(op, b[0], s[0])
    merge_dim(op, b[1], s[1])
    if b[2] is not None and s[2] is not None and b[2] != 1 and b[2] != s[2]:
        raise shape_error(op, "third dimension of boxes must be either 1 or equal to the "
                              "third dimension of scores")
    total = constant_value(op.inputs[3])
    per_class = constant_value(op.inputs[2])
    n: int | None = None
    if total is not None:
        n = int(total)
        if n <= 0:
            raise shape_error(op, "max_total_size should be > 0")
        if op.node_attrs.get("pad_per_class", False):
            n = None if per_class is None or s[2] is None else min(n, int(per_class) * s[2])
    return [TensorShape([batch, n, 4]), TensorShape([batch, n]), TensorShape([batch, n]),
            TensorShape([batch])]


def _draw_shape(op: Any) -> list[TensorShape]:
    with_rank(op, 0, 4)
    return [op.inputs[0].shape]


def _sample_bbox_shape(op: Any) -> list[TensorShape]:
    with_rank(op, 0, 1)
    b = with_rank(op, 1, 3)
    if b[2] is not None and b[2] != 4:
        raise shape_error(op, f"Dimension must be 4 but is {b[2]}")
    return [TensorShape([3]), TensorShape([3]), TensorShape([1, 1, 4])]


_HF = "T: {half, float} = DT_FLOAT"
_HF_THRESH = "T_threshold: {half, float} = DT_FLOAT"
_SEED_ATTRS = ["seed: int = 0", "seed2: int = 0"]
_SAMPLE_ATTRS = ["T: {uint8, int8, int16, int32, int64}",
                 "aspect_ratio_range: list(float) = [0.75, 1.33]",
                 "area_range: list(float) = [0.05, 1.0]", "max_attempts: int = 100",
                 "use_image_if_no_bounding_boxes: bool = false"]
ks.op(
    OpDef("NonMaxSuppression",
          inputs=["boxes: float", "scores: float", "max_output_size: int32"],
          outputs=["selected_indices: int32"], attrs=["iou_threshold: float = 0.5"],
          shape_fn=_nms_shape, doc="Greedy non-maximum suppression by IOU."),
    OpDef("NonMaxSuppressionV2",
          inputs=["boxes: T", "scores: T", "max_output_size: int32",
                  "iou_threshold: T_threshold"],
          outputs=["selected_indices: int32"], attrs=[_HF, _HF_THRESH],
          shape_fn=_nms_shape, doc="Greedy non-maximum suppression by IOU."),
    OpDef("NonMaxSuppressionV3",
          inputs=["boxes: T", "scores: T", "max_output_size: int32",
                  "iou_threshold: T_threshold", "score_threshold: T_threshold"],
          outputs=["selected_indices: int32"], attrs=[_HF, _HF_THRESH],
          shape_fn=_nms_shape, doc="Greedy non-maximum suppression above a score."),
    OpDef("NonMaxSuppressionV4",
          inputs=["boxes: T", "scores: T", "max_output_size: int32",
                  "iou_threshold: T_threshold", "score_threshold: T_threshold"],
          outputs=["selected_indices: int32", "valid_outputs: int32"],
          attrs=[_HF, _HF_THRESH, "pad_to_max_output_size: bool = false"],
          shape_fn=_nms_v4_shape, doc="NonMaxSuppressionV3, optionally zero-padded."),
    OpDef("NonMaxSuppressionV5",
          inputs=["boxes: T", "scores: T", "max_output_size: int32", "iou_threshold: T",
                  "score_threshold: T", "soft_nms_sigma: T"],
          outputs=["selected_indices: int32", "selected_scores: T", "valid_outputs: int32"],
          attrs=[_HF, "pad_to_max_output_size: bool = false"],
          shape_fn=_nms_v5_shape, doc="Non-maximum suppression with soft-NMS (Gaussian)."),
    OpDef("NonMaxSuppressionWithOverlaps",
          inputs=["overlaps: float", "scores: float", "max_output_size: int32",
                  "overlap_threshold: float", "score_threshold: float"],
          outputs=["selected_indices: int32"], shape_fn=_nms_overlaps_shape,
          doc="Greedy non-maximum suppression by a given overlap matrix."),
    OpDef("CombinedNonMaxSuppression",
          inputs=["boxes: float", "scores: float", "max_output_size_per_class: int32",
                  "max_total_size: int32", "iou_threshold: float", "score_threshold: float"],
          outputs=["nmsed_boxes: float", "nmsed_scores: float", "nmsed_classes: float",
                   "valid_detections: int32"],
          attrs=["pad_per_class: bool = false", "clip_boxes: bool = true"],
          shape_fn=_combined_shape, doc="Per-class NMS over a batch, merged by score."),
    OpDef("DrawBoundingBoxes", inputs=["images: T", "boxes: float"], outputs=["output: T"],
          attrs=[_HF], shape_fn=_draw_shape, doc="Draws box outlines on images."),
    OpDef("DrawBoundingBoxesV2", inputs=["images: T", "boxes: float", "colors: float"],
          outputs=["output: T"], attrs=[_HF], shape_fn=_draw_shape,
          doc="Draws box outlines on images in the given colours."),
    OpDef("SampleDistortedBoundingBox", inputs=["image_size: T", "bounding_boxes: float"],
          outputs=["begin: T", "size: T", "bboxes: float"],
          attrs=_SAMPLE_ATTRS + _SEED_ATTRS + ["min_object_covered: float = 0.1"],
          shape_fn=_sample_bbox_shape, is_stateful=True,
          doc="Samples a random crop covering part of the given boxes."),
    OpDef("SampleDistortedBoundingBoxV2",
          inputs=["image_size: T", "bounding_boxes: float", "min_object_covered: float"],
          outputs=["begin: T", "size: T", "bboxes: float"],
          attrs=_SAMPLE_ATTRS + _SEED_ATTRS, shape_fn=_sample_bbox_shape, is_stateful=True,
          doc="Samples a random crop covering part of the given boxes."),
)
ks.not_differentiable("NonMaxSuppression", "NonMaxSuppressionV2", "NonMaxSuppressionV3",
                      "NonMaxSuppressionV4", "NonMaxSuppressionV5",
                      "NonMaxSuppressionWithOverlaps", "CombinedNonMaxSuppression",
                      "DrawBoundingBoxes", "DrawBoundingBoxesV2",
                      "SampleDistortedBoundingBox", "SampleDistortedBoundingBoxV2")


# =======================================================================================
# NMS
# =======================================================================================
def _iou_matrix(boxes: np.ndarray) -> np.ndarray:
    """TF's IOU of every pair (corners in any order; 0 when either box is empty), in the
    boxes' float type."""
    b = boxes
    ymin, ymax = np.minimum(b[:, 0], b[:, 2]), np.maximum(b[:, 0], b[:, 2])
    xmin, xmax = np.minimum(b[:, 1], b[:, 3]), np.maximum(b[:, 1], b[:, 3])
    area = (ymax - ymin) * (xmax - xmin)
    ih = np.maximum(np.minimum(ymax[:, None], ymax[None]) - np.maximum(ymin[:, None],
                                                                      ymin[None]), 0)
    iw = np.maximum(np.minimum(xmax[:, None], xmax[None]) - np.maximum(xmin[:, None],
                                                                      xmin[None]), 0)
    inter = ih * iw
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / (area[:, None] + area[None] - inter)
    bad = (area[:, None] <= 0) | (area[None] <= 0)
    return np.where(bad, 0, iou).astype(boxes.dtype)


def _nms(sim: np.ndarray, scores: np.ndarray, max_out: int, thresh: float,
         score_thresh: float, sigma: float = 0.0) -> tuple[list[int], list[float]]:
    """TF's greedy (soft-)NMS over a similarity matrix: candidates by descending score
    (lower index first on ties); a candidate is compared once with each selection."""
    dt = scores.dtype.type
    thresh_t, score_t = dt(thresh), dt(score_thresh)
    soft = sigma > 0
    scale = dt(-0.5) / dt(sigma) if soft else dt(0)
    heap: list[tuple[float, int, float, int]] = []
    for i in range(len(scores)):
        if scores[i] > score_t:
            heapq.heappush(heap, (-float(scores[i]), i, float(scores[i]), 0))
    sel: list[int] = []
    sel_scores: list[float] = []
    while len(sel) < max_out and heap:
        _, idx, score, begin = heapq.heappop(heap)
        score = dt(score)
        orig = score
        hard = False
        for j in range(len(sel) - 1, begin - 1, -1):
            s = sim[idx, sel[j]]
            w = dt(np.exp(scale * s * s))
            score = dt(score * (w if (soft or s <= thresh_t) else dt(0)))
            if not soft and s > thresh_t:
                hard = True
                break
            if score <= score_t:
                break
        begin = len(sel)
        if hard:
            continue
        if score == orig:
            sel.append(idx)
            sel_scores.append(float(score))
        elif score > score_t:
            heapq.heappush(heap, (-float(score), idx, float(score), begin))
    return sel, sel_scores


def _nms_inputs(ctx: Any, boxes: Any, scores: Any, max_out: Any,
                iou: Any) -> tuple[np.ndarray, np.ndarray, int, float]:
    b = host(ctx, boxes)
    s = host(ctx, scores)
    m = host(ctx, max_out)
    t = host(ctx, iou)
    if b.ndim != 2:
        raise invalid(f"boxes must be 2-D{list(b.shape)}")
    if b.shape[1] != 4:
        raise invalid(f"boxes must have 4 columns{list(b.shape)}")
    if s.ndim != 1:
        raise invalid(f"scores must be 1-D{list(s.shape)}")
    if s.shape[0] != b.shape[0]:
        raise invalid(f"scores has incompatible shape{list(s.shape)}")
    if m.ndim != 0:
        raise invalid(f"max_output_size must be 0-D, got shape {list(m.shape)}")
    if t.ndim != 0:
        raise invalid(f"iou_threshold must be 0-D, got shape {list(t.shape)}")
    tv = float(t)
    if not 0 <= tv <= 1:
        raise invalid("iou_threshold must be in [0, 1]")
    return b, s, int(m), tv


def _score_threshold(ctx: Any, v: Any) -> float:
    a = host(ctx, v)
    if a.ndim != 0:
        raise invalid(f"score_threshold must be 0-D, got shape {list(a.shape)}")
    return float(a)


def _nms_factory(ctx: Any, version: int) -> Any:
    pad = bool(ctx.attrs.get("pad_to_max_output_size", False))

    def compute(boxes: Any, scores: Any, max_out: Any, *rest: Any) -> Any:
        if version == 1:
            iou = np.float32(ctx.attrs.get("iou_threshold", 0.5))
        else:
            iou = rest[0]
        b, s, m, t = _nms_inputs(ctx, boxes, scores, max_out, iou)
        st = _score_threshold(ctx, rest[1]) if version >= 3 else float("-inf")
        sigma = 0.0
        if version == 5:
            sg = host(ctx, rest[2])
            if sg.ndim != 0:
                raise invalid(f"soft_nms_sigma must be 0-D, got shape {list(sg.shape)}")
            sigma = float(sg)
            if sigma < 0:
                raise invalid("soft_nms_sigma must be non-negative")
        wide = np.float32
        sel, sc = _nms(_iou_matrix(b.astype(wide)), s.astype(wide), m, t, st, sigma)
        n = len(sel)
        idx = np.array(sel, np.int32)
        scv = np.array(sc, np.float32).astype(ctx.input_dtypes[1].np)
        if pad and n < m:
            idx = np.concatenate([idx, np.zeros(m - n, np.int32)])
            scv = np.concatenate([scv, np.zeros(m - n, scv.dtype)])
        if version <= 3:
            return to_device(ctx, idx)
        if version == 4:
            return to_device(ctx, idx), to_device(ctx, np.array(n, np.int32))
        return (to_device(ctx, idx), to_device(ctx, scv), to_device(ctx, np.array(n, np.int32)))

    return compute


for _v, _name in ((1, "NonMaxSuppression"), (2, "NonMaxSuppressionV2"),
                  (3, "NonMaxSuppressionV3"), (4, "NonMaxSuppressionV4"),
                  (5, "NonMaxSuppressionV5")):
    ks.kernel(_name)(lambda ctx, _v=_v: _nms_factory(ctx, _v))


@ks.kernel("NonMaxSuppressionWithOverlaps")
def _nms_overlaps_kernel(ctx: Any) -> Any:
    def compute(overlaps: Any, scores: Any, max_out: Any, thresh: Any, score_t: Any) -> Any:
        o = host(ctx, overlaps).astype(np.float32)
        s = host(ctx, scores).astype(np.float32)
        m = host(ctx, max_out)
        if o.ndim != 2 or o.shape[0] != o.shape[1]:
            raise invalid(f"overlaps must be 2-D and square{list(o.shape)}")
        if s.ndim != 1 or s.shape[0] != o.shape[0]:
            raise invalid(f"scores has incompatible shape{list(s.shape)}")
        if m.ndim != 0:
            raise invalid(f"max_output_size must be 0-D, got shape {list(m.shape)}")
        t = host(ctx, thresh)
        if t.ndim != 0:
            raise invalid(f"overlap_threshold must be 0-D, got shape {list(t.shape)}")
        sel, _ = _nms(o, s, int(m), float(t), _score_threshold(ctx, score_t))
        return to_device(ctx, np.array(sel, np.int32))

    return compute


@ks.kernel("CombinedNonMaxSuppression")
def _combined_nms_kernel(ctx: Any) -> Any:
    pad_per_class = bool(ctx.attrs.get("pad_per_class", False))
    clip = bool(ctx.attrs.get("clip_boxes", True))

    def compute(boxes: Any, scores: Any, per_class: Any, total: Any, iou: Any,
                score_t: Any) -> Any:
        b = host(ctx, boxes).astype(np.float32)
        s = host(ctx, scores).astype(np.float32)
        if b.ndim != 4 or b.shape[3] != 4:
            raise invalid(f"boxes must be 4-D [batch, num_boxes, q, 4]{list(b.shape)}")
        if s.ndim != 3 or s.shape[:2] != b.shape[:2]:
            raise invalid(f"scores has incompatible shape{list(s.shape)}")
        q, nc = b.shape[2], s.shape[2]
        if q != 1 and q != nc:
            raise invalid("third dimension of boxes must be either 1 or num classes")
        pc, tot = int(host(ctx, per_class)), int(host(ctx, total))
        if pc <= 0:
            raise invalid("max_size_per_class must be > 0")
        if tot <= 0:
            raise invalid("max_total_size must be > 0")
        t = float(host(ctx, iou))
        if not 0 <= t <= 1:
            raise invalid("iou_threshold must be in [0, 1]")
        st = float(host(ctx, score_t))
        per_batch = min(tot, pc * nc) if pad_per_class else tot
        nb = b.shape[0]
        ob = np.zeros((nb, per_batch, 4), np.float32)
        os_ = np.zeros((nb, per_batch), np.float32)
        oc = np.zeros((nb, per_batch), np.float32)
        ov = np.zeros((nb,), np.int32)
        for i in range(nb):
            cands: list[tuple[float, int, int, int]] = []
            for c in range(nc):
                bx = b[i, :, c if q > 1 else 0]
                sel, sc = _nms(_iou_matrix(bx), s[i, :, c], pc, t, st)
                cands.extend((-sc_, c, k, idx) for k, (idx, sc_) in enumerate(zip(sel, sc)))
            cands.sort()
            n = min(len(cands), per_batch)
            ov[i] = n
            for k in range(n):
                sc_, c, _, idx = cands[k]
                box = b[i, idx, c if q > 1 else 0]
                ob[i, k] = np.clip(box, 0, 1) if clip else box
                os_[i, k] = -sc_
                oc[i, k] = c
        return (to_device(ctx, ob), to_device(ctx, os_), to_device(ctx, oc), to_device(ctx, ov))

    return compute


# =======================================================================================
# draw_bounding_boxes
# =======================================================================================
_COLOR_TABLE = [[1, 1, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 1], [0.5, 0, 0.5, 1],
                [0.5, 0.5, 0, 1], [0.5, 0, 0, 1], [0, 0, 0.5, 1], [0, 1, 1, 1], [1, 0, 1, 1]]


def _draw(ctx: Any, images: Any, boxes: Any, colors: Any = None) -> Any:
    img = host(ctx, images).copy()
    bx = host(ctx, boxes).astype(np.float32)
    if img.ndim != 4:
        raise invalid(f"The rank of the images should be 4{list(img.shape)}")
    if bx.ndim != 3 or bx.shape[2] != 4:
        raise invalid(f"boxes must be 3-D [batch, num_boxes, 4]{list(bx.shape)}")
    nb, h, w, depth = img.shape
    if bx.shape[0] != nb:
        raise invalid("The batch sizes of images and boxes should be the same")
    if depth not in (1, 3, 4):
        raise invalid("Channel depth should be either 1 (GRY), 3 (RGB), or 4 (RGBA)")
    table = [list(c) for c in _COLOR_TABLE]
    if colors is not None:
        col = host(ctx, colors).astype(np.float32)
        if col.size:
            if col.ndim != 2:
                raise invalid(f"colors must be a 2-D matrix{list(col.shape)}")
            if col.shape[1] < depth:
                raise invalid("Channel depth is greater than the number of channels in "
                              "colors")
            table = [list(r) + [1.0] * (4 - len(r)) for r in col.tolist()]
    if depth == 1:
        for r in table:
            r[0] = 1
    for i in range(nb):
        for k in range(bx.shape[1]):
            color = np.array(table[k % len(table)][:depth], np.float32).astype(img.dtype)
            y0 = int(np.float32(bx[i, k, 0]) * np.float32(h - 1))
            y1 = int(np.float32(bx[i, k, 2]) * np.float32(h - 1))
            x0 = int(np.float32(bx[i, k, 1]) * np.float32(w - 1))
            x1 = int(np.float32(bx[i, k, 3]) * np.float32(w - 1))
            if y0 > y1 or x0 > x1:
                continue
            if y0 >= h or y1 < 0 or x0 >= w or x1 < 0:
                continue
            y0c, y1c, x0c, x1c = max(y0, 0), min(y1, h - 1), max(x0, 0), min(x1, w - 1)
            if y0 >= 0:
                img[i, y0, x0c:x1c + 1] = color
            if y1 < h:
                img[i, y1, x0c:x1c + 1] = color
            if x0 >= 0:
                img[i, y0c:y1c + 1, x0] = color
            if x1 < w:
                img[i, y0c:y1c + 1, x1] = color
    return to_device(ctx, img)


@ks.kernel("DrawBoundingBoxes")
def _draw_kernel(ctx: Any) -> Any:
    return lambda images, boxes: _draw(ctx, images, boxes)


@ks.kernel("DrawBoundingBoxesV2")
def _draw_v2_kernel(ctx: Any) -> Any:
    return lambda images, boxes, colors: _draw(ctx, images, boxes, colors)


# =======================================================================================
# sample_distorted_bounding_box
# =======================================================================================
def _area(r: tuple[int, int, int, int]) -> int:
    return (r[2] - r[0]) * (r[3] - r[1])


def _intersect(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    if x0 > x1 or y0 > y1:
        return (0, 0, 0, 0)
    return (x0, y0, x1, y1)


def _lrint(v: float) -> int:
    return int(np.rint(np.float32(v)))


def _random_crop(rng: np.random.Generator, ow: int, oh: int, min_rel: float, max_rel: float,
                 aspect: float) -> tuple[int, int, int, int] | None:
    """TF's GenerateRandomCrop: a crop of relative area in [min_rel, max_rel] and the given
    aspect ratio, as (min_x, min_y, max_x, max_y), or None."""
    if max_rel <= 0 or aspect <= 0 or ow <= 0 or oh <= 0 or min_rel > max_rel:
        return None
    f32 = np.float32
    min_area = f32(min_rel) * f32(ow) * f32(oh)
    max_area = f32(max_rel) * f32(ow) * f32(oh)
    height = _lrint(np.sqrt(f32(min_area / f32(aspect))))
    max_height = _lrint(np.sqrt(f32(max_area / f32(aspect))))
    if _lrint(max_height * f32(aspect)) > ow:
        max_height = int((ow + 0.5 - 0.0000001) / aspect)
    max_height = min(max_height, oh)
    if height >= max_height:
        height = max_height
    if height < max_height:
        height += int(rng.integers(max_height - height + 1))
    width = _lrint(height * f32(aspect))
    area = f32(width * height)
    if area < min_area:
        height += 1
        width = _lrint(height * f32(aspect))
        area = f32(width * height)
    if area > max_area:
        height -= 1
        width = _lrint(height * f32(aspect))
        area = f32(width * height)
    if area < min_area or area > max_area or width > ow or height > oh or width <= 0 or \
            height <= 0:
        return None
    y = int(rng.integers(oh - height)) if height < oh else 0
    x = int(rng.integers(ow - width)) if width < ow else 0
    return (x, y, x + width, y + height)


def _covers(crop: tuple[int, int, int, int], min_covered: float,
            boxes: list[tuple[int, int, int, int]]) -> bool:
    if _area(crop) < 1:
        return False
    for bb in boxes:
        a = _area(bb)
        if a < 1:
            continue
        if np.float32(_area(_intersect(crop, bb))) / np.float32(a) >= np.float32(min_covered):
            return True
    return False


def _sample_factory(ctx: Any, v2: bool) -> Any:
    seed = int(ctx.attrs.get("seed", 0) or 0)
    seed2 = int(ctx.attrs.get("seed2", 0) or 0)
    rng = (np.random.default_rng() if seed == 0 and seed2 == 0
           else np.random.default_rng([seed & _MASK64, seed2 & _MASK64]))
    ar = [float(v) for v in ctx.attrs.get("aspect_ratio_range", [0.75, 1.33])]
    area = [float(v) for v in ctx.attrs.get("area_range", [0.05, 1.0])]
    attempts = int(ctx.attrs.get("max_attempts", 100))
    use_image = bool(ctx.attrs.get("use_image_if_no_bounding_boxes", False))
    out_np = ctx.output_dtypes[0].np

    def compute(image_size: Any, bounding_boxes: Any, *rest: Any) -> Any:
        size = host(ctx, image_size)
        bb = host(ctx, bounding_boxes).astype(np.float32)
        if v2:
            mc = host(ctx, rest[0])
            if mc.ndim != 0:
                raise invalid(f"min_object_covered must be 0-D, got shape {list(mc.shape)}")
            min_cov = float(mc)
        else:
            min_cov = float(ctx.attrs.get("min_object_covered", 0.1))
        if size.ndim != 1 or size.size != 3:
            raise invalid(f"image_size must be 1-dimensional with 3 elements, got "
                          f"{list(size.shape)}")
        if bb.ndim != 3 or bb.shape[2] != 4:
            raise invalid(f"input boxes must be 3-dimensional [batch, num_boxes, coords]: "
                          f"{list(bb.shape)}")
        if min_cov < 0:
            raise invalid(f"min_object_covered must be non-negative: {min_cov}")
        if len(ar) != 2 or ar[0] <= 0 or ar[1] <= 0:
            raise invalid(f"aspect_ratio_range must contain 2 positive values: {ar}")
        if len(area) != 2 or not all(0 < a <= 1 for a in area):
            raise invalid(f"area_range must contain 2 values in (0, 1]: {area}")
        if attempts <= 0:
            raise invalid(f"max_attempts must be positive: {attempts}")
        h, w = int(size[0]), int(size[1])
        if h <= 0 or w <= 0:
            raise invalid(f"image height and width must be positive: {h}x{w}")
        boxes = []
        for row in bb.reshape(-1, 4):
            if ((row < 0) | (row > 1)).any():
                raise invalid("All bounding box coordinates must be in [0.0, 1.0]: "
                              f"{row.tolist()}")
            boxes.append((int(row[1] * np.float32(w)), int(row[0] * np.float32(h)),
                          int(row[3] * np.float32(w)), int(row[2] * np.float32(h))))
        image_rect = (0, 0, w, h)
        if not boxes:
            if not use_image:
                raise invalid("No bounding boxes provided as input. One must enable "
                              "use_image_if_no_bounding_boxes if you wish to not provide "
                              "any bounding boxes.")
            boxes.append(image_rect)
        crop = None
        for _ in range(attempts):
            aspect = float(np.float32(rng.random(dtype=np.float32) * np.float32(ar[1] - ar[0])
                                      + np.float32(ar[0])))
            c = _random_crop(rng, w, h, area[0], area[1], aspect)
            if c is not None and _covers(c, min_cov, boxes):
                crop = c
                break
        if crop is None:
            crop = image_rect
        tw, th = crop[2] - crop[0], crop[3] - crop[1]
        begin = np.array([crop[1], crop[0], 0], out_np)
        sz = np.array([th, tw, -1], out_np)
        box = np.array([[[crop[1] / h, crop[0] / w, crop[3] / h, crop[2] / w]]], np.float32)
        return to_device(ctx, begin), to_device(ctx, sz), to_device(ctx, box)

    return compute


@ks.kernel("SampleDistortedBoundingBox")
def _sample_v1_kernel(ctx: Any) -> Any:
    return _sample_factory(ctx, False)


@ks.kernel("SampleDistortedBoundingBoxV2")
def _sample_v2_kernel(ctx: Any) -> Any:
    return _sample_factory(ctx, True)


# =======================================================================================
# API
# =======================================================================================
@ks.api("image.non_max_suppression")
def non_max_suppression(boxes: Any, scores: Any, max_output_size: Any,
                        iou_threshold: Any = 0.5, score_threshold: Any = float("-inf"),
                        name: str | None = None) -> Tensor:
    """Indices of greedily selected boxes in descending score order (NonMaxSuppressionV3)."""
    with name_scope(name, "non_max_suppression"):
        iou = convert_to_tensor(iou_threshold, name="iou_threshold")
        st = convert_to_tensor(score_threshold, name="score_threshold")
        return apply_op("NonMaxSuppressionV3", boxes=boxes, scores=scores,
                        max_output_size=max_output_size, iou_threshold=iou,
                        score_threshold=st)


@ks.api("image.non_max_suppression_with_scores")
def non_max_suppression_with_scores(boxes: Any, scores: Any, max_output_size: Any,
                                    iou_threshold: Any = 0.5,
                                    score_threshold: Any = float("-inf"),
                                    soft_nms_sigma: Any = 0.0,
                                    name: str | None = None) -> tuple[Tensor, Tensor]:
    """(indices, scores) of selected boxes; ``soft_nms_sigma > 0`` decays overlapping
    scores by ``exp(-iou^2 / (2 sigma))`` instead of dropping them (NonMaxSuppressionV5)."""
    with name_scope(name, "non_max_suppression_with_scores"):
        iou = convert_to_tensor(iou_threshold, name="iou_threshold")
        st = convert_to_tensor(score_threshold, name="score_threshold")
        sig = convert_to_tensor(soft_nms_sigma, name="soft_nms_sigma")
        idx, sc, _ = apply_op("NonMaxSuppressionV5", boxes=boxes, scores=scores,
                              max_output_size=max_output_size, iou_threshold=iou,
                              score_threshold=st, soft_nms_sigma=sig,
                              pad_to_max_output_size=False)
        return idx, sc


@ks.api("image.non_max_suppression_overlaps")
def non_max_suppression_overlaps(overlaps: Any, scores: Any, max_output_size: Any,
                                 overlap_threshold: Any = 0.5,
                                 score_threshold: Any = float("-inf"),
                                 name: str | None = None) -> Tensor:
    """NMS with a precomputed [n, n] overlap matrix (NonMaxSuppressionWithOverlaps)."""
    with name_scope(name, "non_max_suppression_overlaps"):
        ot = convert_to_tensor(overlap_threshold, name="overlap_threshold")
        return apply_op("NonMaxSuppressionWithOverlaps", overlaps=overlaps, scores=scores,
                        max_output_size=max_output_size, overlap_threshold=ot,
                        score_threshold=score_threshold)


@ks.api("image.non_max_suppression_padded")
def non_max_suppression_padded(boxes: Any, scores: Any, max_output_size: Any,
                               iou_threshold: Any = 0.5,
                               score_threshold: Any = float("-inf"),
                               pad_to_max_output_size: bool = False,
                               name: str | None = None) -> tuple[Tensor, Tensor]:
    """(indices, number valid): NMS whose indices are zero-padded to ``max_output_size``
    when ``pad_to_max_output_size`` (TF 1.15: NonMaxSuppressionV4)."""
    with name_scope(name, "non_max_suppression_padded"):
        iou = convert_to_tensor(iou_threshold, name="iou_threshold")
        st = convert_to_tensor(score_threshold, name="score_threshold")
        return NonMaxSuppressionV4(*apply_op(
            "NonMaxSuppressionV4", boxes=boxes, scores=scores,
            max_output_size=max_output_size, iou_threshold=iou, score_threshold=st,
            pad_to_max_output_size=pad_to_max_output_size))


@ks.api("image.combined_non_max_suppression")
def combined_non_max_suppression(boxes: Any, scores: Any, max_output_size_per_class: Any,
                                 max_total_size: Any, iou_threshold: Any = 0.5,
                                 score_threshold: Any = float("-inf"),
                                 pad_per_class: bool = False, clip_boxes: bool = True,
                                 name: str | None = None) -> tuple[Tensor, ...]:
    """Per-class NMS of a batch, merged by score: (nmsed_boxes, nmsed_scores,
    nmsed_classes, valid_detections), zero-padded."""
    with name_scope(name, "combined_non_max_suppression"):
        iou = convert_to_tensor(iou_threshold, dtype=_dt.float32, name="iou_threshold")
        st = convert_to_tensor(score_threshold, dtype=_dt.float32, name="score_threshold")
        total = convert_to_tensor(max_total_size)
        return CombinedNonMaxSuppression(*apply_op(
            "CombinedNonMaxSuppression", boxes=boxes, scores=scores,
            max_output_size_per_class=max_output_size_per_class, max_total_size=total,
            iou_threshold=iou, score_threshold=st, pad_per_class=pad_per_class,
            clip_boxes=clip_boxes))


@ks.api("image.draw_bounding_boxes")
def draw_bounding_boxes(images: Any, boxes: Any, name: str | None = None,
                        colors: Any = None) -> Tensor:
    """Draws the outlines of normalised ``boxes`` ([batch, n, 4]) on float images, cycling
    through TF's colour table or ``colors``."""
    if colors is None:
        return apply_op("DrawBoundingBoxes", name=name, images=images, boxes=boxes)
    return apply_op("DrawBoundingBoxesV2", name=name, images=images, boxes=boxes,
                    colors=colors)


@ks.api("image.sample_distorted_bounding_box")
def sample_distorted_bounding_box(image_size: Any, bounding_boxes: Any,
                                  seed: int | None = None, seed2: int | None = None,
                                  min_object_covered: Any = 0.1,
                                  aspect_ratio_range: Any = None, area_range: Any = None,
                                  max_attempts: int | None = None,
                                  use_image_if_no_bounding_boxes: bool | None = None,
                                  name: str | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """(begin, size, bboxes) of a random crop covering at least ``min_object_covered`` of
    one of ``bounding_boxes``, for ``tf.slice`` (SampleDistortedBoundingBoxV2)."""
    attrs: dict[str, Any] = {}
    if aspect_ratio_range is not None:
        attrs["aspect_ratio_range"] = [float(v) for v in aspect_ratio_range]
    if area_range is not None:
        attrs["area_range"] = [float(v) for v in area_range]
    if max_attempts is not None:
        attrs["max_attempts"] = int(max_attempts)
    if use_image_if_no_bounding_boxes is not None:
        attrs["use_image_if_no_bounding_boxes"] = bool(use_image_if_no_bounding_boxes)
    # TF 1.15 passes seed and seed2 to the op as they are (no graph-level seed)
    s1, s2 = seed or 0, seed2 or 0
    with name_scope(name, "sample_distorted_bounding_box"):
        return SampleDistortedBoundingBoxV2(*apply_op(
            "SampleDistortedBoundingBoxV2", name=name, image_size=image_size,
            bounding_boxes=bounding_boxes,
            min_object_covered=convert_to_tensor(min_object_covered, dtype=_dt.float32),
            seed=s1, seed2=s2, **attrs))


__all__ = ["non_max_suppression", "non_max_suppression_with_scores",
           "non_max_suppression_overlaps", "non_max_suppression_padded",
           "combined_non_max_suppression", "draw_bounding_boxes",
           "sample_distorted_bounding_box"]
