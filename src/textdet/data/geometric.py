"""MindOCR's geometric training transforms (flip, rotate, scale, crop, validate): each is one affine map on
pixel-centre coordinates, applied alike to pixels and polygons; ``plan()`` returns it for ``pipeline.FusedGeometry``
(coordinates: docs/decisions/fused-pipeline.md; MindOCR differences:
docs/decisions/mindocr-behaviours.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from textdet.checks import check_pair, check_prob, sorted_pair
from textdet.config.components import component_repr
from textdet.data.decode import Sample
from textdet.data.resize import pad_bottom_right
from textdet.geometry import map_polys, next_vertices, poly_bounds, polygon_area, polygon_areas


# ----------------------------------------------------------------------------- affine steps
@dataclass(frozen=True)
class AffineStep:
    """One geometric step, as an affine map on pixel-centre coordinates."""

    matrix: np.ndarray  # (3, 3) float64, the step's input -> output coordinates
    size: tuple[int, int]  # (h, w) of the image content the step produces
    pad_to: tuple[int, int] | None = None  # (h, w) canvas after zero padding bottom/right
    flip: bool = False  # the map mirrors: vertex order is reversed to stay clockwise
    src_box: tuple[int, int, int, int] | None = None  # (y0, y1, x0, x1) input region the step reads (crops)


def apply_step_to_polys(polys: list[np.ndarray], step: AffineStep) -> list[np.ndarray]:
    """Map polygons through ``step``, reversing vertex order for mirroring steps."""
    out = map_polys(polys, step.matrix)
    return [p[::-1].copy() for p in out] if step.flip else out


def _scale_matrix(sx: float, sy: float, x0: float = 0.0, y0: float = 0.0) -> np.ndarray:
    """Pixel-centre map of ``cv2.resize`` of the region starting at (x0, y0): x -> (x - x0 + 0.5) * s - 0.5."""
    return np.array([[sx, 0.0, (0.5 - x0) * sx - 0.5], [0.0, sy, (0.5 - y0) * sy - 0.5], [0, 0, 1.0]])


def _apply(t: Any, sample: Sample, rng: np.random.Generator, warp: Any) -> Sample:
    """Draw ``t.plan`` for the sample, then move the image (``warp(image, step)``) and the polygons alike."""
    step = t.plan(sample["image"].shape[:2], sample.get("polys", []), sample.get("ignore_tags"), rng)
    if step is not None:
        sample["image"] = warp(sample["image"], step)
        if "polys" in sample:
            sample["polys"] = apply_step_to_polys(list(sample["polys"]), step)
    return sample


# ----------------------------------------------------------------------------- geometric (training)
class RandomHorizontalFlip:
    """Mirror left-right with probability ``p`` (x' = W - 1 - x, as MindOCR), vertex order reversed (clockwise)."""

    def __init__(self, p: float = 0.5) -> None:
        self.p = check_prob(p)

    def plan(self, size: tuple[int, int], polys: list, ignore_tags: Any, rng: np.random.Generator) -> AffineStep | None:
        """Draw whether to flip an image of ``size`` (h, w); None means no change."""
        if rng.random() >= self.p:
            return None
        h, w = size
        return AffineStep(np.array([[-1.0, 0, w - 1], [0, 1, 0], [0, 0, 1]]), (h, w), flip=True)

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        return _apply(self, sample, rng, lambda image, step: cv2.flip(image, 1))

    __repr__ = component_repr


class RandomRotate:
    """Rotate by a float angle ~ U[degrees] (MindOCR: whole degrees only) about (w // 2, h // 2) with probability
    ``p``; ``expand_canvas`` grows the canvas to hold the whole image (MindOCR's formula), else corners are cut."""

    def __init__(self, degrees: tuple[float, float] = (-10, 10), expand_canvas: bool = True, p: float = 1.0) -> None:
        self.degrees = sorted_pair(degrees, "degrees")
        self.expand_canvas = bool(expand_canvas)
        self.p = check_prob(p)

    def plan(self, size: tuple[int, int], polys: list, ignore_tags: Any, rng: np.random.Generator) -> AffineStep | None:
        """Draw the rotation for an image of ``size`` (h, w); None means no change."""
        if rng.random() >= self.p:
            return None
        angle = rng.uniform(*self.degrees)
        h, w = size
        center = (w // 2, h // 2)
        mat = cv2.getRotationMatrix2D(center, angle, 1.0)
        if self.expand_canvas:
            cos, sin = abs(mat[0, 0]), abs(mat[0, 1])
            w, h = int(h * sin + w * cos), int(h * cos + w * sin)
            mat[0, 2] += w / 2 - center[0]
            mat[1, 2] += h / 2 - center[1]
        return AffineStep(np.vstack([mat, [0.0, 0.0, 1.0]]), (h, w))

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        return _apply(self, sample, rng, lambda image, step: cv2.warpAffine(
            image, step.matrix[:2], step.size[::-1], flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT))

    __repr__ = component_repr


class RandomScale:
    """Resize by s ~ U[scale_range] with probability ``p`` (MindOCR); ``size_limits`` bounds both sides."""

    def __init__(self, scale_range: tuple[float, float] = (1.0, 1.0), size_limits: tuple[int, int] | None = None,
                 p: float = 0.5) -> None:
        self.scale_range = tuple(sorted(check_pair(scale_range, "scale_range", positive=True)))
        self.size_limits = None if size_limits is None else tuple(
            sorted(check_pair(size_limits, "size_limits", positive=True)))
        self.p = check_prob(p)

    def _draw(self, size: tuple[int, int], rng: np.random.Generator) -> float:
        lo, hi = self.scale_range
        if self.size_limits is not None:
            (smin, smax), (h, w) = self.size_limits, size
            lo, hi = max(smin / h, smin / w, lo), min(smax / h, smax / w, hi)
            lo = min(lo, hi)
        return float(rng.uniform(lo, hi))

    def plan(self, size: tuple[int, int], polys: list, ignore_tags: Any, rng: np.random.Generator) -> AffineStep | None:
        """Draw the scale for an image of ``size`` (h, w); None means no change."""
        if rng.random() >= self.p:
            return None
        s = self._draw(size, rng)
        h, w = size
        oh, ow = max(1, round(h * s)), max(1, round(w * s))
        return AffineStep(_scale_matrix(ow / w, oh / h), (oh, ow))

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        return _apply(self, sample, rng, lambda image, step: cv2.resize(image, step.size[::-1]))

    __repr__ = component_repr


def occupied(lo: np.ndarray, hi: np.ndarray, n: int) -> np.ndarray:
    """(n,) bool: the indices 0..n-1 covered by any interval [round(lo_k), round(hi_k)] (``lo``, ``hi``: (K,)),
    by a difference array; an interval outside 0..n-1 marks nothing (MindOCR would mark index 0)."""
    a = np.clip(np.round(lo), 0, n).astype(np.int64)
    b = np.clip(np.round(hi) + 1, 0, n).astype(np.int64)
    keep = a < b
    diff = np.bincount(a[keep], minlength=n + 1) - np.bincount(b[keep], minlength=n + 1)
    return np.cumsum(diff[:-1]) > 0


class RandomCropWithBBox:
    """MindOCR's text-preserving random crop, keep-ratio resized and zero-padded to ``crop_size`` (``actual_size``)."""

    def __init__(self, max_tries: int = 10, min_crop_ratio: float = 0.1, crop_size: tuple[int, int] = (640, 640),
                 p: float = 0.5) -> None:
        if not isinstance(max_tries, int) or isinstance(max_tries, bool) or max_tries < 0:
            raise ValueError(f"max_tries must be an integer >= 0, got {max_tries!r}")
        if not isinstance(min_crop_ratio, (int, float)) or not 0.0 < min_crop_ratio <= 1.0:
            raise ValueError(f"min_crop_ratio must be in (0, 1], got {min_crop_ratio!r}")
        self.max_tries = max_tries
        self.min_crop_ratio = float(min_crop_ratio)
        self.crop_size = check_pair(crop_size, "crop_size", positive=True, integer=True)
        self.p = check_prob(p)

    def choose_box(self, size: tuple[int, int], polys: list, ignore_tags: Any,
                   rng: np.random.Generator) -> tuple[int, int, int, int]:
        """Draw the crop region (y0, y1, x0, x1), end-exclusive, of an image of ``size`` (h, w)."""
        h, w = size
        full = (0, h, 0, w)
        if rng.random() >= self.p:
            return full
        ignore = np.zeros(len(polys), bool) if ignore_tags is None else np.asarray(ignore_tags, bool)
        keep = [p for p, ig in zip(polys, ignore, strict=True) if not ig and len(p)]
        if not keep:
            return full
        lo, hi = poly_bounds(keep)
        rows, cols = occupied(lo[:, 1], hi[:, 1], h), occupied(lo[:, 0], hi[:, 0], w)
        if rows.all() or cols.all():
            return full
        free_rows, free_cols = np.flatnonzero(~rows), np.flatnonzero(~cols)
        min_h, min_w = (max(1, math.ceil(s * self.min_crop_ratio)) for s in size)
        for _ in range(self.max_tries):
            # free[rng.integers(...)]: rng.choice(free, size=2)'s very draws at half its cost
            y0, y1 = np.sort(free_rows[rng.integers(0, len(free_rows), size=2)])
            x0, x1 = np.sort(free_cols[rng.integers(0, len(free_cols), size=2)])
            if y1 - y0 < min_h or x1 - x0 < min_w:
                continue
            if ((hi[:, 0] > x0) & (hi[:, 1] > y0) & (lo[:, 0] < x1) & (lo[:, 1] < y1)).any():
                return int(y0), int(y1), int(x0), int(x1)
        return full

    def plan(self, size: tuple[int, int], polys: list, ignore_tags: Any, rng: np.random.Generator) -> AffineStep:
        """Draw the crop and return its affine map (the region's resize into ``crop_size``)."""
        y0, y1, x0, x1 = self.choose_box(size, polys, ignore_tags, rng)
        ch, cw = self.crop_size
        scale = min(ch / (y1 - y0), cw / (x1 - x0))
        oh = min(ch, max(1, round((y1 - y0) * scale)))
        ow = min(cw, max(1, round((x1 - x0) * scale)))
        matrix = _scale_matrix(ow / (x1 - x0), oh / (y1 - y0), x0, y0)
        return AffineStep(matrix, (oh, ow), pad_to=self.crop_size, src_box=(y0, y1, x0, x1))

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        return _crop_and_pad(self, sample, rng)

    __repr__ = component_repr


def _crop_and_pad(t: Any, sample: Sample, rng: np.random.Generator) -> Sample:
    """Apply a crop transform ``t`` sequentially: its region, resized to the step's size,
    zero-padded to ``pad_to``."""
    def warp(image: np.ndarray, step: AffineStep) -> np.ndarray:
        (y0, y1, x0, x1), sample["actual_size"] = step.src_box, step.size
        region = image[y0:y1, x0:x1]
        if region.shape[:2] != step.size:
            region = cv2.resize(region, step.size[::-1])
        return pad_bottom_right(region, step.pad_to)

    return _apply(t, sample, rng, warp)


def _window_start(lo: float, hi: float, length: int, window: int, free: np.ndarray,
                  rng: np.random.Generator) -> int:
    """Start of a ``window``-long span of 0..length-1 that holds [lo, hi] where it can (else its centre),
    preferring spans whose edges cut no text: a free index (``free``) at or just outside each edge."""
    last_start = max(0, length - window)
    first, last = math.ceil(hi) - window + 1, math.floor(lo)
    if first > last:  # the text is longer than the window: keep its centre in view
        centre = (lo + hi) / 2
        first, last = math.ceil(centre) - window + 1, math.floor(centre)
    first, last = min(max(first, 0), last_start), min(max(last, 0), last_start)
    starts = np.arange(first, last + 1)
    ends = np.minimum(starts + window, length) - 1
    outside = np.concatenate([[True], free, [True]])  # outside[i + 1] == free[i]; the image's edges are free
    clean_start = outside[starts + 1] | outside[starts]
    clean_end = outside[ends + 1] | outside[ends + 2]
    clean = starts[clean_start & clean_end]
    pool = clean if len(clean) else starts
    return int(pool[rng.integers(0, len(pool))])


class RandomTextCrop:
    """A ``crop_size`` window at the image's own scale around a random text instance, zero-padded where the
    image is smaller (MMOCR's ``TextDetRandomCrop``, PaddleOCR's ``RandomCropImgMask``). Unlike
    RandomCropWithBBox nothing is rescaled, so words keep the size evaluation sees: put it after DetResize."""

    def __init__(self, crop_size: tuple[int, int] = (640, 640)) -> None:
        self.crop_size = check_pair(crop_size, "crop_size", positive=True, integer=True)

    def choose_box(self, size: tuple[int, int], polys: list, ignore_tags: Any,
                   rng: np.random.Generator) -> tuple[int, int, int, int]:
        """Draw the window (y0, y1, x0, x1), end-exclusive and inside the image,
        of an image of ``size`` (h, w)."""
        h, w = size
        ch, cw = self.crop_size
        ignore = np.zeros(len(polys), bool) if ignore_tags is None else np.asarray(ignore_tags, bool)
        keep = [p for p, ig in zip(polys, ignore, strict=True) if not ig and len(p)]
        if keep:
            lo, hi = poly_bounds(keep)
            k = int(rng.integers(0, len(keep)))  # the word to hold
            free_rows = ~occupied(lo[:, 1], hi[:, 1], h)
            free_cols = ~occupied(lo[:, 0], hi[:, 0], w)
            y0 = _window_start(lo[k, 1], hi[k, 1], h, ch, free_rows, rng)
            x0 = _window_start(lo[k, 0], hi[k, 0], w, cw, free_cols, rng)
        else:  # no text to aim at: any window
            y0 = int(rng.integers(0, max(0, h - ch) + 1))
            x0 = int(rng.integers(0, max(0, w - cw) + 1))
        return y0, min(h, y0 + ch), x0, min(w, x0 + cw)

    def plan(self, size: tuple[int, int], polys: list, ignore_tags: Any,
             rng: np.random.Generator) -> AffineStep:
        """Draw the window and return its affine map (a shift) and the padding to ``crop_size``."""
        y0, y1, x0, x1 = self.choose_box(size, polys, ignore_tags, rng)
        matrix = _scale_matrix(1.0, 1.0, x0, y0)
        return AffineStep(matrix, (y1 - y0, x1 - x0), pad_to=self.crop_size, src_box=(y0, y1, x0, x1))

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        return _crop_and_pad(self, sample, rng)

    __repr__ = component_repr


# ----------------------------------------------------------------------------- polygon validation
def _clip_half_plane(pts: np.ndarray, axis: int, bound: float, keep_below: bool) -> np.ndarray:
    """One Sutherland-Hodgman pass: keep the part of a closed polygon on one side of x|y = bound."""
    if len(pts) == 0:
        return pts
    d = bound - pts[:, axis] if keep_below else pts[:, axis] - bound
    nxt, dn = next_vertices(pts), next_vertices(d)
    inside = d >= 0
    cross = inside != (dn >= 0)
    t = d / np.where(cross, d - dn, 1.0)
    cand = np.stack([pts, pts + t[:, None] * (nxt - pts)], axis=1)  # (P, 2 candidates, 2)
    return cand[np.stack([inside, cross], axis=1)]


def clip_polygon_to_box(poly: np.ndarray, w: float, h: float) -> np.ndarray:
    """Clip a (P, 2) polygon to [0, w] x [0, h] (vectorised Sutherland-Hodgman) -> (Q, 2) float64, Q = 0 outside."""
    pts = np.asarray(poly, dtype=np.float64).reshape(-1, 2)
    for axis, bound, below in ((0, 0.0, False), (0, float(w), True), (1, 0.0, False), (1, float(h), True)):
        pts = _clip_half_plane(pts, axis, bound, below)
    if len(pts) > 1:
        pts = pts[np.any(pts != next_vertices(pts), axis=1)]
    return pts


class ValidatePolygons:
    """Drop polygons outside the visible area (``actual_size`` or the image) and ignore those with less than
    ``min_area`` visible (MindOCR); ``clip_to_visible_area`` keeps the visible part (ignored below ``min_vertices``)."""

    def __init__(self, min_area: float = 1.0, clip_to_visible_area: bool = False, min_vertices: int = 4) -> None:
        if not isinstance(min_area, (int, float)) or min_area < 0:
            raise ValueError(f"min_area must be a number >= 0, got {min_area!r}")
        if not isinstance(min_vertices, int) or min_vertices < 3:
            raise ValueError(f"min_vertices must be an integer >= 3, got {min_vertices!r}")
        self.min_area = float(min_area)
        self.min_vertices = min_vertices
        self.clip_to_visible_area = bool(clip_to_visible_area)

    def _check(self, poly: np.ndarray, w: float, h: float) -> tuple[np.ndarray | None, bool]:
        """Return (polygon to keep or None to drop, whether it must become ignored)."""
        corner = poly + 0.5  # pixel-centre -> pixel-corner coordinates: the image is [0, w] x [0, h]
        lo, hi = corner.min(axis=0), corner.max(axis=0)
        if hi[0] < 0 or hi[1] < 0 or lo[0] > w or lo[1] > h:
            return None, False
        inside = lo[0] >= 0 and lo[1] >= 0 and hi[0] <= w and hi[1] <= h
        visible = corner if inside else clip_polygon_to_box(corner, w, h)
        if len(visible) < 3:
            return None, False
        ignore = polygon_area(visible) < self.min_area
        if self.clip_to_visible_area and not inside:
            poly = (visible - 0.5).astype(np.float32)
            ignore = ignore or len(poly) < self.min_vertices
        return poly, ignore

    def _inside_areas(self, polys: list, w: float, h: float) -> tuple[np.ndarray, np.ndarray] | None:
        """For quads (one vertex count): which lie wholly inside the visible area, and their areas; else None."""
        if len({len(p) for p in polys}) != 1 or len(polys[0]) < 3:
            return None
        corner = np.stack(polys).astype(np.float32) + np.float32(0.5)  # as _check: float32 poly + 0.5
        lo, hi = corner.min(axis=1), corner.max(axis=1)
        inside = (lo >= 0).all(axis=1) & (hi[:, 0] <= w) & (hi[:, 1] <= h)
        return inside, polygon_areas(corner)

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        h, w = (int(v) for v in sample.get("actual_size", sample["image"].shape[:2]))
        polys, texts, tags = [], [], []
        raw = [np.asarray(p, dtype=np.float32) for p in sample["polys"]]
        batched = self._inside_areas(raw, w, h) if raw else None
        inside, areas = batched if batched is not None else (None, None)
        for k, (poly, text, ignore) in enumerate(zip(raw, sample["texts"], sample["ignore_tags"], strict=True)):
            if inside is not None and inside[k]:
                kept = poly
                newly_ignored = areas[k] < self.min_area  # the very area _check's polygon_area gives
            else:
                kept, newly_ignored = self._check(poly, w, h)
            if kept is not None:
                polys.append(kept)
                texts.append(text)
                tags.append(bool(ignore) or newly_ignored)
        sample["polys"] = polys
        sample["texts"] = texts
        sample["ignore_tags"] = np.array(tags, dtype=bool)
        return sample

    __repr__ = component_repr


TRANSFORMS: dict[str, type] = {"RandomHorizontalFlip": RandomHorizontalFlip, "RandomRotate": RandomRotate,
                               "RandomScale": RandomScale, "RandomCropWithBBox": RandomCropWithBBox,
                               "RandomTextCrop": RandomTextCrop, "ValidatePolygons": ValidatePolygons}
