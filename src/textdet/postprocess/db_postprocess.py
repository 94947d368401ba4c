"""DBNet post-processing: probability map -> scored text boxes or polygons, in original-image pixels.
Follows MindOCR's ``DBPostprocess`` (PaddleOCR's) step by step in numpy/cv2: threshold, contours, box/polygon,
score, unclip, rescale (steps and MindOCR differences: docs/DESIGN_NOTES.md). Quads come out TL, TR, BR, BL."""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import cv2
import numpy as np

from textdet.config.components import component_repr
from textdet.geometry import box_points, offset_polygon, order_quads, quad_corners, unclip_distance

_BOX_TYPES = ("quad", "poly")
_SCORE_MODES = ("bitmap", "fast", "slow")
_MIN_SIDE = 3  # short side (map pixels) below which a candidate is noise; +2 after the unclip (PaddleOCR)
_POLY_EPSILON = 0.005  # approxPolyDP tolerance as a fraction of the contour length (MindOCR)
_DILATION_KERNEL = np.ones((2, 2), dtype=np.uint8)
_VECTORISE_FROM = 40  # boxes per map from which numpy beats pure Python (see _finish_quads)
_BUFFERS = threading.local()  # per-thread reusable threshold output (a fresh 1 MB array costs page faults)
_LINK_RUNS = getattr(cv2, "findContoursLinkRuns", None)  # OpenCV >= 4.10


def _nhw(x: Any, floats: bool) -> np.ndarray:
    """A tensor or array, (N,1,H,W) or (N,H,W) -> numpy (N, H, W) (float32 when ``floats``), no copy if possible."""
    if hasattr(x, "detach"):  # torch.Tensor, without importing torch here
        x = x.detach().float().cpu().numpy() if floats else x.detach().cpu().numpy()
    x = np.asarray(x, dtype=np.float32 if floats else None)
    return x[:, 0] if x.ndim == 4 and x.shape[1] == 1 else x


def _to_numpy_maps(pred: Any, pred_name: str) -> np.ndarray:
    """Model output dict / tensor / array, (N,1,H,W) or (N,H,W) -> float32 numpy (N, H, W)."""
    if isinstance(pred, Mapping):
        if pred_name not in pred:
            raise KeyError(f"DBPostprocess: prediction has no {pred_name!r} map; keys: {sorted(pred)}")
        pred = pred[pred_name]
    maps = _nhw(pred, floats=True)
    if maps.ndim != 3:
        raise ValueError(f"DBPostprocess: expected a map of shape (N,1,H,W) or (N,H,W), got {maps.shape}")
    return maps


def _to_numpy_bitmaps(bitmap: Any, shape: tuple[int, ...]) -> np.ndarray:
    """A given bitmap (bool / uint8 / any integer; tensor or array; (N,1,H,W) or (N,H,W)) -> uint8 (N, H, W)."""
    bitmap = _nhw(bitmap, floats=False)
    if bitmap.shape != tuple(shape):
        raise ValueError(f"DBPostprocess: 'bitmap' must have the map's shape {tuple(shape)}, got {bitmap.shape}")
    if bitmap.dtype != np.bool_ and not np.issubdtype(bitmap.dtype, np.integer):
        raise ValueError(f"DBPostprocess: 'bitmap' must be bool or integer (uint8), got {bitmap.dtype}")
    return (bitmap if bitmap.dtype in (np.bool_, np.uint8) else bitmap != 0).view(np.uint8)


def threshold_map(prob: np.ndarray, thresh: float, out: np.ndarray | None = None) -> np.ndarray:
    """``prob >= thresh`` as uint8 (H, W) into ``out``, else a per-thread buffer (overwritten by the next call)."""
    if out is None:
        out = getattr(_BUFFERS, "bitmap", None)
        if out is None or out.shape != prob.shape:
            out = _BUFFERS.bitmap = np.empty(prob.shape, np.uint8)
    np.greater_equal(prob, thresh, out=out.view(np.bool_))
    return out


def may_hold_box(w: int, h: int) -> bool:
    """Bounding-box filter: a contour's points span (w - 1) x (h - 1) of its w x h box, so minAreaRect's s * l >= s^2
    is at most (w - 1)(h - 1); below 9 its short side s < 3 and step 3 drops it. Most specks go for a boundingRect."""
    return (w - 1) * (h - 1) >= _MIN_SIDE * _MIN_SIDE


def is_link_runs_hole(contour: np.ndarray, top: int) -> bool:
    """Whether a link-runs contour (top row ``top``) traces a hole: it starts below its top row or heads left along
    it; an outer contour starts at its first pixel in raster order and does neither (benchmarks/check_link_runs.py)."""
    y0 = contour.item(1)
    return y0 > top or (contour.size > 2 and contour.item(3) == y0 and contour.item(2) < contour.item(0))


def quad_candidates(bitmap: np.ndarray, max_candidates: int) -> list[tuple[np.ndarray, tuple]] | None:
    """(contour, bounding box) of findContours' contours past ``may_hold_box``, from OpenCV's link-runs tracer
    (faster): same order, starts, directions, boxes, hulls (docs/DESIGN_NOTES.md). None where findContours is needed: a
    hole that may hold a box (link runs traces holes otherwise), over ``max_candidates`` contours, OpenCV < 4.10."""
    if _LINK_RUNS is None:
        return None
    contours = _LINK_RUNS(bitmap)[0]
    if len(contours) > max_candidates:
        return None
    found = []
    for c in reversed(contours):  # findContours' order
        _, y, w, h = box = cv2.boundingRect(c)
        if is_link_runs_hole(c, y):
            if may_hold_box(w, h + 2):  # findContours' contour of a hole spans a row more above and below
                return None
        elif may_hold_box(w, h):
            found.append((c.take(_backwards(len(c)), axis=0), box))
    return found


@functools.lru_cache(maxsize=256)
def _backwards(n: int) -> np.ndarray:
    """Indices 0, n-1, ..., 1: a link-runs contour's points in findContours' direction (read-only: shared)."""
    index = np.r_[0, n - 1 : 0 : -1]
    index.flags.writeable = False
    return index


def unclip_quads(rects: list[tuple], expand_ratio: float) -> list[tuple]:
    """MindOCR's quad unclip of ``minAreaRect`` results -> the unclipped ``minAreaRect`` results.
    Computed directly from the truncated corners pyclipper would offset (docs/DESIGN_NOTES.md), at a fraction of
    pyclipper + shapely's cost; 99.5% of benchmark corners identical to MindOCR's. Points are complex numbers:
    fewer numpy calls, which is what this costs for a map's few boxes."""
    quads = np.array([cv2.boxPoints(rect) for rect in rects], dtype=np.int32).astype(np.float64)  # (N, 4, 2)
    # -i * D: boxPoints' corner order turns positively, so -i * edge points outwards
    dist = np.array([-1j * (w * h * expand_ratio / (2.0 * (w + h))) for _, (w, h), _ in rects])
    starts = quads.view(np.complex128)[..., 0]  # (N, 4) x + iy
    ends = starts[:, [1, 2, 3, 0]]
    edges = ends - starts
    normals = edges * (dist[:, None] / np.maximum(np.abs(edges), 1.0))
    points = np.concatenate([starts + normals, ends + normals], axis=1).view(np.float64).reshape(-1, 8, 2)
    points = np.trunc(points + np.copysign(0.5, points)).astype(np.float32)  # Clipper's Round (half away from 0)
    return [cv2.minAreaRect(p) for p in points]


def _mean_inside(prob: np.ndarray, poly: np.ndarray) -> float:
    """Mean of ``prob`` over the pixels of ``poly`` (P, 2) rasterised within its (clipped) bounding box."""
    h, w = prob.shape
    lo, hi = poly.min(axis=0), poly.max(axis=0)
    # plain Python ints: np.clip on scalars costs more than the rest of this function
    x0, y0 = min(max(math.floor(lo[0]), 0), w - 1), min(max(math.floor(lo[1]), 0), h - 1)
    x1, y1 = min(max(math.ceil(hi[0]), 0), w - 1), min(max(math.ceil(hi[1]), 0), h - 1)
    mask = np.zeros((y1 - y0 + 1, x1 - x0 + 1), dtype=np.uint8)
    shifted = (poly - np.array([x0, y0], dtype=poly.dtype)).astype(np.int32).reshape(-1, 1, 2)
    cv2.fillPoly(mask, [shifted], 1)
    return float(cv2.mean(prob[y0 : y1 + 1, x0 : x1 + 1], mask)[0])


class DBPostprocess:
    """Text boxes (``box_type="quad"``, TL, TR, BR, BL) or polygons (``"poly"``) from DBNet's probability map.

    Args:
        binary_thresh: pixels with ``P >= binary_thresh`` are text; box_thresh: lower-scoring candidates are dropped.
        max_candidates: contours examined per image; expand_ratio: unclip ratio r in ``D = area * r / perimeter``.
        score_mode: "bitmap" (MindOCR's, what its ``box_thresh`` values are calibrated for), "fast" or "slow"
            (PaddleOCR's); see docs/DESIGN_NOTES.md.
        use_dilation: dilate the bitmap (2x2) before finding contours ("bitmap" scores use the undilated one).
        pred_name: the map of a model output dict; rescale_fields: accepted for MindOCR configs, always rescaled.
    """

    def __init__(self, box_type: str = "quad", binary_thresh: float = 0.3, box_thresh: float = 0.7,
                 max_candidates: int = 1000, expand_ratio: float = 1.5, score_mode: str = "bitmap",
                 use_dilation: bool = False, pred_name: str = "binary",
                 rescale_fields: Sequence[str] | None = None) -> None:
        if box_type not in _BOX_TYPES:
            raise ValueError(f"DBPostprocess: box_type must be one of {list(_BOX_TYPES)}, got {box_type!r}")
        if score_mode not in _SCORE_MODES:
            raise ValueError(f"DBPostprocess: score_mode must be one of {list(_SCORE_MODES)}, got {score_mode!r}")
        if int(max_candidates) < 0:
            raise ValueError(f"DBPostprocess: max_candidates must be >= 0, got {max_candidates}")
        if rescale_fields is not None and not all(isinstance(f, str) for f in rescale_fields):
            raise ValueError(f"DBPostprocess: rescale_fields must be a list of names, got {rescale_fields!r}")
        self.box_type, self.score_mode, self.pred_name = box_type, score_mode, pred_name
        self.binary_thresh, self.box_thresh, self.expand_ratio = map(float, (binary_thresh, box_thresh, expand_ratio))
        self.max_candidates, self.use_dilation = int(max_candidates), bool(use_dilation)
        self.rescale_fields = list(rescale_fields) if rescale_fields is not None else ["polys"]

    __repr__ = component_repr

    def __call__(self, pred: Any, shape_list: Any = None) -> list[dict[str, list]]:
        """``pred``: output dict (``pred_name``; optional ``"bitmap"``, the precomputed ``P >= binary_thresh``, bool or
        uint8) or a tensor/array (N,1,H,W)/(N,H,W); ``shape_list``: (N, 4) ``[src_h, src_w, scale_h, scale_w]`` or
        None (map pixels). Returns per image ``{"polys": list of float32 (P, 2), "scores": list of float}``."""
        maps = _to_numpy_maps(pred, self.pred_name)
        given = isinstance(pred, Mapping) and pred.get("bitmap") is not None
        bitmaps = _to_numpy_bitmaps(pred["bitmap"], maps.shape) if given else None
        shapes = None
        if shape_list is not None:
            if hasattr(shape_list, "detach"):
                shape_list = shape_list.detach().cpu().numpy()
            shapes = np.asarray(shape_list, dtype=np.float64).reshape(-1, 4).tolist() if np.size(shape_list) else []
            if len(shapes) != maps.shape[0]:
                raise ValueError(f"DBPostprocess: shape_list must be (N, 4) with N = {maps.shape[0]}, got "
                                 f"{np.shape(shape_list)}")
            if not all(v > 0 for row in shapes for v in row):  # plain Python: a few values, no numpy call
                raise ValueError(f"DBPostprocess: shape_list values must be > 0, got {shapes}")
        results = []
        for i, prob in enumerate(maps):
            bitmap = None if bitmaps is None else bitmaps[i]
            shape = None if shapes is None else shapes[i]
            if self.box_type == "quad":
                rects, scores = self._quad_rects(prob, bitmap)
                polys = _finish_quads(rects, prob.shape, shape)
            else:
                polys, scores = self.extract(prob, bitmap)
                polys = [_rescale(p[None], prob.shape, shape)[0] for p in polys]
            results.append({"polys": polys, "scores": scores})
        return results

    def extract(self, prob: np.ndarray, bitmap: np.ndarray | None = None) -> tuple[list[np.ndarray], list[float]]:
        """Candidates of one (H, W) float32 map in (unrounded, unclipped) map pixels; ``bitmap``: precomputed uint8
        ``P >= binary_thresh`` or None."""
        if self.box_type == "quad":
            rects, scores = self._quad_rects(prob, bitmap)
            boxes = order_quads(box_points(np.array(rects, dtype=np.float64).reshape(-1, 5)))
            return list(boxes.astype(np.float32)), scores
        bitmap, source = self._bitmaps(prob, bitmap)
        polys, scores = [], []
        for contour in self._contours(source):
            found = self._poly_candidate(prob, bitmap, contour)
            if found is not None:
                polys.append(found[0])
                scores.append(found[1])
        return polys, scores

    def _contours(self, source: np.ndarray) -> Sequence[np.ndarray]:
        """findContours' first ``max_candidates`` contours of the bitmap to search."""
        return cv2.findContours(source, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)[0][: self.max_candidates]

    def _bitmaps(self, prob: np.ndarray, bitmap: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """The foreground bitmap (uint8) and the one to search for contours (dilated with ``use_dilation``)."""
        bitmap = threshold_map(prob, self.binary_thresh) if bitmap is None else bitmap
        return bitmap, (cv2.dilate(bitmap, _DILATION_KERNEL) if self.use_dilation else bitmap)

    def _score(self, prob: np.ndarray, bitmap: np.ndarray, contour: np.ndarray, points: np.ndarray | None) -> float:
        """The candidate's score per ``score_mode``; ``points``: its box / approximated polygon (for "fast")."""
        if self.score_mode == "bitmap":
            x, y, w, h = cv2.boundingRect(contour)
            return cv2.mean(prob[y : y + h, x : x + w], bitmap[y : y + h, x : x + w])[0]
        if self.score_mode == "fast":
            return _mean_inside(prob, points)
        return _mean_inside(prob, contour.reshape(-1, 2).astype(np.float32))

    def _quad_rects(self, prob: np.ndarray, bitmap: np.ndarray | None) -> tuple[list[tuple], list[float]]:
        """Quad candidates of one map: unclipped rectangles ``(cx, cy, w, h, angle)`` in map pixels, and scores."""
        bitmap, source = self._bitmaps(prob, bitmap)
        # "slow" scores rasterise the contour's own points, which must then be findContours'
        candidates = quad_candidates(source, self.max_candidates) if self.score_mode != "slow" else None
        if candidates is None:
            boxes = ((c, cv2.boundingRect(c)) for c in self._contours(source))
            candidates = [(c, r) for c, r in boxes if may_hold_box(r[2], r[3])]
        # One pass per C function, filtering between them: each function's code stays in the CPU's caches (2-3%)
        found = [(rect, c, box) for c, box in candidates if min((rect := cv2.minAreaRect(c))[1]) >= _MIN_SIDE]
        if self.score_mode == "bitmap":  # the common path: one C call per candidate, inline
            mean = cv2.mean
            scores = [mean(prob[y : y + h, x : x + w], bitmap[y : y + h, x : x + w])[0] for _, _, (x, y, w, h) in found]
        else:
            fast = self.score_mode == "fast"
            scores = [self._score(prob, bitmap, c, cv2.boxPoints(r) if fast else None) for r, c, _ in found]
        kept = [(r, s) for (r, _, _), s in zip(found, scores, strict=True) if not s < self.box_thresh]  # keeps NaN
        if not kept:
            return [], []
        grown = zip(unclip_quads([k[0] for k in kept], self.expand_ratio), [k[1] for k in kept], strict=True)
        kept = [((cx, cy, w, h, a), s) for ((cx, cy), (w, h), a), s in grown if min(w, h) >= _MIN_SIDE + 2]
        return [k[0] for k in kept], [k[1] for k in kept]

    def _poly_candidate(self, prob: np.ndarray, bitmap: np.ndarray,
                        contour: np.ndarray) -> tuple[np.ndarray, float] | None:
        """One contour -> (polygon float32 (P, 2), score), or None when it is filtered out."""
        epsilon = _POLY_EPSILON * cv2.arcLength(contour, True)
        points = cv2.approxPolyDP(contour, epsilon, True).reshape(-1, 2).astype(np.float32)
        if points.shape[0] < 4:
            return None
        score = self._score(prob, bitmap, contour, points)
        if score < self.box_thresh:
            return None
        expanded = offset_polygon(points, unclip_distance(points, self.expand_ratio))
        if len(expanded) != 1:  # vanished, or split into pieces (only a concave polygon can split)
            return None
        sides = cv2.minAreaRect(expanded[0].reshape(-1, 1, 2).astype(np.float32))[1]
        return None if min(sides) < _MIN_SIDE + 2 else (expanded[0].astype(np.float32), score)


def _rescale(polys: np.ndarray, map_hw: tuple[int, int], shape: Sequence[float] | None,
             copy: bool = True) -> np.ndarray:
    """(K, P, 2) map pixels -> float32 image pixels (rounded after the division), clipped; ``copy=False``: ``polys``
    is a float64 array and is overwritten."""
    polys = np.array(polys, dtype=np.float64) if copy else polys  # worked on in place
    if shape is None:
        h, w = map_hw
    else:
        h, w, scale_h, scale_w = shape
        polys /= (scale_w, scale_h)
        np.rint(polys, out=polys)  # np.round's half to even, without its Python wrapper
    np.maximum(polys, 0.0, out=polys)
    np.minimum(polys, (w - 1, h - 1), out=polys)
    return np.add(polys, 0.0, dtype=np.float32)  # the cast; + 0.0 also turns a -0.0 max() kept into 0.0


def _finish_quads(rects: list[tuple], map_hw: tuple[int, int], shape: Sequence[float] | None) -> list[np.ndarray]:
    """Unclipped rectangles -> float32 (4, 2) corners TL, TR, BR, BL, rescaled and clipped. Pure Python per box below
    ``_VECTORISE_FROM`` boxes (a numpy call costs about a box), numpy above."""
    if not rects:
        return []
    boxes = (order_quads(box_points(np.array(rects, dtype=np.float64))) if len(rects) >= _VECTORISE_FROM
             else np.array([quad_corners(*rect) for rect in rects], dtype=np.float64).reshape(-1, 4, 2))
    return list(_rescale(boxes, map_hw, shape, copy=False))
