"""DB training targets: the shrunk probability map (ShrinkBinaryMap) and the border/threshold map (BorderMap).

Sample-dict transforms run in loader workers on the HWC image, after geometric augmentation, before
NormalizeImage (docs/decisions/where-targets-are-made.md). MindOCR's ``det_transforms.py`` semantics with
three deliberate differences: docs/decisions/mindocr-behaviours.md.
"""

from __future__ import annotations

import math
from typing import Any

import cv2
import numpy as np

from textdet.config.components import component_repr
from textdet.errors import SampleError
from textdet.geometry import offset_polygon, polygon_area, shrink_distance

__all__ = ["BorderMap", "ShrinkBinaryMap", "shrink_polygon"]

# Longest edge, in units of D, whose distances are computed in float32 (see _min_sq_dist_to_segment).
_FLOAT32_MAX_LENGTH = 64.0


# The DB targets, by output column name: what DBLoss takes (MindOCR passes them by position through
# label_column_index).
LOSS_COLUMNS = ("binary_map", "mask", "thresh_map", "thresh_mask")


def _check_ratio(shrink_ratio: float) -> float:
    if isinstance(shrink_ratio, bool) or not isinstance(shrink_ratio, (int, float)) or not 0 <= shrink_ratio < 1:
        raise ValueError(f"shrink_ratio must be a number in [0, 1), got {shrink_ratio!r}")
    return float(shrink_ratio)


def _image_hw(sample: dict[str, Any]) -> tuple[int, int]:
    image = sample.get("image")
    if not isinstance(image, np.ndarray) or image.ndim not in (2, 3):
        got = type(image).__name__ if not isinstance(image, np.ndarray) else f"array of shape {image.shape}"
        raise SampleError(f"targets need sample['image'] as an HxW or HxWxC array, got {got}")
    return int(image.shape[0]), int(image.shape[1])


def polys_and_tags(sample: dict[str, Any]) -> tuple[list[Any], np.ndarray]:
    polys = list(sample.get("polys", []))
    tags = sample.get("ignore_tags")
    tags = np.zeros(len(polys), dtype=bool) if tags is None else np.asarray(tags, dtype=bool).reshape(-1).copy()
    if len(tags) != len(polys):
        raise SampleError(f"sample has {len(polys)} polygons but {len(tags)} ignore_tags")
    return polys, tags


def _as_polygon(poly: Any) -> np.ndarray | None:
    """(P, 2) float64 copy of ``poly``, or None when it cannot be drawn (non-finite, < 3 points, bad shape)."""
    p = np.asarray(poly, dtype=np.float64)
    return None if p.ndim != 2 or p.shape[0] < 3 or p.shape[1] != 2 or not np.isfinite(p).all() else p


def _fill(canvas: np.ndarray, poly: np.ndarray, value: float) -> None:
    cv2.fillPoly(canvas, [np.round(poly).astype(np.int32)], value)


def shrink_polygon(raw: Any, ignored: bool, min_text_size: float,
                   shrink_ratio: float) -> tuple[np.ndarray | None, float, list[np.ndarray]]:
    """ShrinkBinaryMap's rule for one polygon (shared with the device targets): ``(poly, D, pieces)``.

    ``poly`` is None when it cannot be drawn; ``pieces`` (the shrink by D) is [] when the polygon is ignored,
    thinner than ``min_text_size`` or its shrink vanishes: it is then masked out and tagged ignored.
    """
    poly = _as_polygon(raw)
    if poly is None:
        return None, 0.0, []
    extent = poly.max(axis=0) - poly.min(axis=0)
    if ignored or min(extent) < min_text_size:
        return poly, 0.0, []
    distance = shrink_distance(poly, shrink_ratio)
    # A zero-area polygon has D = 0; offsetting it by 0 would draw a line, not a shrink.
    return poly, distance, (offset_polygon(poly, -distance) if polygon_area(poly) > 0 else [])


class ShrinkBinaryMap:
    """Draw DB's probability target: each text polygon shrunk inwards by ``D = A (1 - r^2) / L``.

    Reads ``image`` (H, W only), ``polys``, ``ignore_tags``; writes ``binary_map`` (1, H, W) uint8 {0, 1},
    ``mask`` (H, W) uint8 {0, 1} and a new ``ignore_tags`` (N,) bool. ``mask`` is 0 inside polygons that are
    ignored, thinner than ``min_text_size`` pixels, or whose shrink vanishes; those are tagged ignored (BorderMap
    skips them) and draw nothing. ``shrink_ratio``: r, in [0, 1).
    """

    def __init__(self, min_text_size: float = 8, shrink_ratio: float = 0.4) -> None:
        m = min_text_size
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0 <= m < math.inf:
            raise ValueError(f"min_text_size must be a finite number >= 0, got {min_text_size!r}")
        self.min_text_size = min_text_size
        self.shrink_ratio = _check_ratio(shrink_ratio)

    __repr__ = component_repr

    def __call__(self, sample: dict[str, Any], rng: np.random.Generator | None = None) -> dict[str, Any]:
        h, w = _image_hw(sample)
        polys, tags = polys_and_tags(sample)
        gt = np.zeros((h, w), dtype=np.uint8)  # 0/1 maps ship as uint8: 4x less inter-process traffic
        mask = np.ones((h, w), dtype=np.uint8)
        for i, raw in enumerate(polys):
            poly, _, shrunk = shrink_polygon(raw, tags[i], self.min_text_size, self.shrink_ratio)
            if poly is None:
                tags[i] = True
                continue
            if shrunk:
                cv2.fillPoly(gt, [s.astype(np.int32) for s in shrunk], 1)
            else:
                _fill(mask, poly, 0.0)
                tags[i] = True
        sample["binary_map"], sample["mask"], sample["ignore_tags"] = gt[None], mask, tags
        return sample


def _min_sq_dist_to_segment(out: np.ndarray, ax: float, ay: float, bx: float, by: float, scale: float) -> None:
    """``out = min(out, (scale * distance from pixel (x, y) to segment ab)^2)`` in place, exact (clamped projection).

    ``out`` is (h, w) float32 over pixels x = 0..w-1, y = 0..h-1 (the caller shifts the segment into that frame).
    """
    dx, dy = bx - ax, by - ay
    length = math.hypot(dx, dy)
    if length == 0.0:  # its point is an endpoint of a neighbouring, non-degenerate edge
        return
    nx, ny = dx / length * scale, dy / length * scale
    # q cancels terms of size ~L/2, so float32 loses ~1e-7 * L/2 pixels; in units of D that stays
    # below 1e-5 while L <= 64 D, which covers all but unusually long, thin (or degenerate) text.
    dtype = np.float32 if length * scale <= _FLOAT32_MAX_LENGTH else np.float64
    h, w = out.shape
    u = np.arange(w, dtype=np.float64) - (ax + bx) / 2.0
    v = np.arange(h, dtype=np.float64) - (ay + by) / 2.0
    s = np.add.outer((v * ny).astype(dtype), (u * nx).astype(dtype))
    q = np.subtract.outer((v * nx).astype(dtype), (u * ny).astype(dtype))
    np.abs(s, out=s)
    s -= length / 2.0 * scale
    np.maximum(s, 0.0, out=s)
    s *= s
    q *= q
    s += q
    np.minimum(out, s, out=out)


def _update_border(canvas: np.ndarray, poly: np.ndarray, distance: float, box: tuple[int, int, int, int]) -> None:
    """``canvas = min(canvas, (dist / D)^2)`` on the inclusive pixel ``box``, in place; ``poly`` (P, 2) x, y pixels.

    Each edge is evaluated only within D of its bounding box: elsewhere dist > D and the canvas keeps its clamp 1.
    """
    x0, y0, x1, y1 = box
    pts = poly.tolist()
    for (ax, ay), (bx, by) in zip(pts, pts[1:] + pts[:1], strict=True):
        # Pixels outside [min - D, max + D] on either axis are farther than D from the edge.
        cx0 = max(math.ceil(min(ax, bx) - distance), x0)
        cx1 = min(math.floor(max(ax, bx) + distance), x1)
        cy0 = max(math.ceil(min(ay, by) - distance), y0)
        cy1 = min(math.floor(max(ay, by) + distance), y1)
        if cx0 <= cx1 and cy0 <= cy1:
            view = canvas[cy0 : cy1 + 1, cx0 : cx1 + 1]
            _min_sq_dist_to_segment(view, ax - cx0, ay - cy0, bx - cx0, by - cy0, 1.0 / distance)


def _outer(paths: list[np.ndarray]) -> np.ndarray:
    """The outline of an outward offset: pyclipper may also return holes, which are smaller."""
    return max(paths, key=polygon_area)


class BorderMap:
    """Draw DB's threshold target: a ramp that peaks on each text outline and fades over ``D`` pixels.

    For each polygon not tagged ignored (run ShrinkBinaryMap first): ``thresh_mask`` is 1 inside the polygon
    offset outwards by D; inside that box every pixel gets ``1 - min(dist / D, 1)`` (exact distance to the nearest
    edge), polygons merge with max, elsewhere 0; ``thresh_map = thresh_min + (thresh_max - thresh_min) * value``,
    (H, W) float32, ``thresh_mask`` uint8. ``fast`` (MindOCR PR #569) is accepted and ignored: the exact map is faster.
    """

    def __init__(self, shrink_ratio: float = 0.4, thresh_min: float = 0.3, thresh_max: float = 0.7,
                 fast: bool = False) -> None:
        self.shrink_ratio = _check_ratio(shrink_ratio)
        for name, value in (("thresh_min", thresh_min), ("thresh_max", thresh_max)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
        if thresh_min > thresh_max:
            raise ValueError(f"thresh_min must be <= thresh_max, got {thresh_min!r} > {thresh_max!r}")
        self.thresh_min = float(thresh_min)
        self.thresh_max = float(thresh_max)

    __repr__ = component_repr

    def __call__(self, sample: dict[str, Any], rng: np.random.Generator | None = None) -> dict[str, Any]:
        h, w = _image_hw(sample)
        polys, tags = polys_and_tags(sample)
        # max over polygons of 1 - min(d_i / D_i, 1) is 1 - min(min_i d_i / D_i, 1): keep one canvas of
        # normalised squared distances, so no per-polygon full-box pass is needed.
        norm_sq = np.ones((h, w), dtype=np.float32)
        tmask = np.zeros((h, w), dtype=np.uint8)
        boxes = []
        for raw, ignored in zip(polys, tags, strict=True):
            poly = None if ignored else _as_polygon(raw)
            distance = 0.0 if poly is None else shrink_distance(poly, self.shrink_ratio)
            paths = offset_polygon(poly, distance) if distance > 0 else []  # D = 0 iff zero area
            if not paths:
                continue
            padded = paths[0] if len(paths) == 1 else _outer(paths)
            cv2.fillPoly(tmask, [padded.astype(np.int32)], 1)
            lo, hi = padded.min(axis=0), padded.max(axis=0)
            box = (max(int(lo[0]), 0), max(int(lo[1]), 0), min(int(hi[0]), w - 1), min(int(hi[1]), h - 1))
            if box[0] <= box[2] and box[1] <= box[3]:
                _update_border(norm_sq, poly, distance, box)
                boxes.append(box)
        # 1 - min(d / D, 1) is exactly 0 outside every box: thresh_min there, the ramp computed only inside boxes
        value = np.full((h, w), self.thresh_min, dtype=np.float32)
        low, spread = np.float32(self.thresh_min), np.float32(self.thresh_max - self.thresh_min)
        for x0, y0, x1, y1 in boxes:
            region = np.s_[y0 : y1 + 1, x0 : x1 + 1]
            value[region] = (np.float32(1.0) - np.sqrt(norm_sq[region])) * spread + low
        sample["thresh_map"], sample["thresh_mask"] = value, tmask
        return sample
