"""DBNet post-processing: probability map -> scored text boxes or polygons, in original-image pixels.
Follows MindOCR's ``DBPostprocess`` (PaddleOCR's) step by step in numpy/cv2: threshold, contours, box/polygon,
score, unclip, rescale (steps and MindOCR differences: docs/decisions/post-processing.md). Quads come out TL,
TR, BR, BL."""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import cv2
import numpy as np

from textdet.config.components import component_repr
from textdet.geometry import offset_polygon, quad_corners, unclip_distance

# The two thresholds a fine-tuned model is re-chosen at (the start guard, `eval --sweep`) and carries in
# its checkpoints.
THRESHOLD_KEYS = ("binary_thresh", "box_thresh")

_BOX_TYPES = ("quad", "poly")
_SCORE_MODES = ("bitmap", "fast", "slow")
_MIN_SIDE = 3  # short side (map pixels) below which a candidate is noise; +2 after the unclip (PaddleOCR)
_POLY_EPSILON = 0.005  # approxPolyDP tolerance as a fraction of the contour length (MindOCR)
_DILATION_KERNEL = np.ones((2, 2), dtype=np.uint8)
_BUFFERS = threading.local()  # per-thread reusable threshold output (a fresh 1 MB array costs page faults)


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
    if bitmap.dtype not in (np.bool_, np.uint8):
        bitmap = bitmap != 0  # any other integer: non-zero is text
    return bitmap.view(np.uint8)  # bool and uint8 share their bytes: no copy


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


def unclip_quads(rects: list[tuple], expand_ratio: float) -> list[tuple]:
    """MindOCR's quad unclip of ``minAreaRect`` results -> the unclipped ``minAreaRect`` results.
    Computed directly from the truncated corners pyclipper would offset (docs/decisions/post-processing.md),
    at a fraction of pyclipper + shapely's cost; 99.5% of benchmark corners identical to MindOCR's. Points are
    complex numbers: fewer numpy calls, which is what this costs for a map's few boxes."""
    # pyclipper's input: the corners truncated to integers, (N, 4, 2)
    quads = np.array([cv2.boxPoints(rect) for rect in rects], dtype=np.int32).astype(np.float64)
    # D = area * r / perimeter of each rectangle
    distances = [w * h * expand_ratio / (2.0 * (w + h)) for _, (w, h), _ in rects]
    # boxPoints' corner order turns positively, so -i times an edge points outwards
    outward = -1j * np.array(distances)
    starts = quads.view(np.complex128)[..., 0]  # (N, 4) corners as x + iy
    ends = starts[:, [1, 2, 3, 0]]
    edges = ends - starts
    normals = edges * (outward[:, None] / np.maximum(np.abs(edges), 1.0))
    moved = np.concatenate([starts + normals, ends + normals], axis=1)  # each edge moved out by D: 8 points
    points = moved.view(np.float64).reshape(-1, 8, 2)
    points = np.trunc(points + np.copysign(0.5, points)).astype(np.float32)  # Clipper's Round (half away from 0)
    return [cv2.minAreaRect(p) for p in points]


def _clamp(value: int, largest: int) -> int:
    """``value`` clipped to ``[0, largest]``."""
    return min(max(value, 0), largest)


def _mean_inside(prob: np.ndarray, poly: np.ndarray) -> float:
    """Mean of ``prob`` over the pixels of ``poly`` (P, 2) rasterised within its (clipped) bounding box."""
    h, w = prob.shape
    low = poly.min(axis=0)
    high = poly.max(axis=0)
    # plain Python ints: np.clip on scalars costs more than the rest of this function
    x0 = _clamp(math.floor(low[0]), w - 1)
    y0 = _clamp(math.floor(low[1]), h - 1)
    x1 = _clamp(math.ceil(high[0]), w - 1)
    y1 = _clamp(math.ceil(high[1]), h - 1)
    mask = np.zeros((y1 - y0 + 1, x1 - x0 + 1), dtype=np.uint8)
    shifted = (poly - np.array([x0, y0], dtype=poly.dtype)).astype(np.int32).reshape(-1, 1, 2)
    cv2.fillPoly(mask, [shifted], 1)
    return float(cv2.mean(prob[y0 : y1 + 1, x0 : x1 + 1], mask)[0])


def _shape_rows(shape_list: Any, n_maps: int) -> list[list[float]]:
    """``shape_list`` (tensor or array-like, (N, 4)) -> N checked rows
    ``[src_h, src_w, scale_h, scale_w]``."""
    if hasattr(shape_list, "detach"):
        shape_list = shape_list.detach().cpu().numpy()
    shapes = []
    if np.size(shape_list):
        shapes = np.asarray(shape_list, dtype=np.float64).reshape(-1, 4).tolist()
    if len(shapes) != n_maps:
        raise ValueError(f"DBPostprocess: shape_list must be (N, 4) with N = {n_maps}, got "
                         f"{np.shape(shape_list)}")
    if not all(v > 0 for row in shapes for v in row):  # plain Python: a few values, no numpy call
        raise ValueError(f"DBPostprocess: shape_list values must be > 0, got {shapes}")
    return shapes


class DBPostprocess:
    """Text boxes (``box_type="quad"``, TL, TR, BR, BL) or polygons (``"poly"``) from DBNet's probability map.

    Args:
        binary_thresh: pixels with ``P >= binary_thresh`` are text; box_thresh: lower-scoring candidates are dropped.
        max_candidates: contours examined per image; expand_ratio: unclip ratio r in ``D = area * r / perimeter``.
        score_mode: "bitmap" (MindOCR's, what its ``box_thresh`` values are calibrated for), "fast" or "slow"
            (PaddleOCR's); see docs/decisions/post-processing.md.
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
        self.box_type = box_type
        self.score_mode = score_mode
        self.pred_name = pred_name
        self.binary_thresh = float(binary_thresh)
        self.box_thresh = float(box_thresh)
        self.expand_ratio = float(expand_ratio)
        self.max_candidates = int(max_candidates)
        self.use_dilation = bool(use_dilation)
        self.rescale_fields = list(rescale_fields) if rescale_fields is not None else ["polys"]

    __repr__ = component_repr

    def __call__(self, pred: Any, shape_list: Any = None) -> list[dict[str, list]]:
        """``pred``: output dict (``pred_name``; optional ``"bitmap"``, the precomputed ``P >= binary_thresh``, bool or
        uint8) or a tensor/array (N,1,H,W)/(N,H,W); ``shape_list``: (N, 4) ``[src_h, src_w, scale_h, scale_w]`` or
        None (map pixels). Returns per image ``{"polys": list of float32 (P, 2), "scores": list of float}``."""
        maps = _to_numpy_maps(pred, self.pred_name)
        given = isinstance(pred, Mapping) and pred.get("bitmap") is not None
        bitmaps = _to_numpy_bitmaps(pred["bitmap"], maps.shape) if given else None
        shapes = None if shape_list is None else _shape_rows(shape_list, maps.shape[0])
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
            return list(quad_corners(rects).astype(np.float32)), scores
        bitmap, searched = self._bitmaps(prob, bitmap)
        polys, scores = [], []
        for contour in self._contours(searched):
            found = self._poly_candidate(prob, bitmap, contour)
            if found is not None:
                polys.append(found[0])
                scores.append(found[1])
        return polys, scores

    def _contours(self, searched: np.ndarray) -> Sequence[np.ndarray]:
        """findContours' first ``max_candidates`` contours of the bitmap to search."""
        return cv2.findContours(searched, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)[0][: self.max_candidates]

    def _bitmaps(self, prob: np.ndarray, bitmap: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """The foreground bitmap (uint8) and the one to search for contours (dilated with ``use_dilation``)."""
        if bitmap is None:
            bitmap = threshold_map(prob, self.binary_thresh)
        searched = cv2.dilate(bitmap, _DILATION_KERNEL) if self.use_dilation else bitmap
        return bitmap, searched

    def _score(self, prob: np.ndarray, bitmap: np.ndarray, contour: np.ndarray, points: np.ndarray | None) -> float:
        """The candidate's score per ``score_mode``; ``points``: its box / approximated polygon (for "fast")."""
        if self.score_mode == "bitmap":
            x, y, w, h = cv2.boundingRect(contour)
            return cv2.mean(prob[y : y + h, x : x + w], bitmap[y : y + h, x : x + w])[0]
        if self.score_mode == "fast":
            return _mean_inside(prob, points)
        return _mean_inside(prob, contour.reshape(-1, 2).astype(np.float32))

    def _keeps(self, score: float) -> bool:
        """Whether a candidate with this score is kept. A NaN score is kept, as in MindOCR, which drops a
        box only when ``box_thresh > score`` (False for NaN): a broken map shows its boxes."""
        return math.isnan(score) or score >= self.box_thresh

    def _quad_rects(self, prob: np.ndarray, bitmap: np.ndarray | None) -> tuple[list[tuple], list[float]]:
        """Quad candidates of one map: unclipped rectangles ``(cx, cy, w, h, angle)`` in map pixels, and
        scores.

        One pass per C function, filtering between them: each function's code stays in the CPU's caches
        (2-3%).
        """
        bitmap, searched = self._bitmaps(prob, bitmap)
        candidates = []  # (contour, bounding box) of the contours whose bounding box may hold a box
        for contour in self._contours(searched):
            bounds = cv2.boundingRect(contour)
            if may_hold_box(bounds[2], bounds[3]):
                candidates.append((contour, bounds))
        found = []  # (minAreaRect, contour, bounding box) of those whose rectangle is wide enough
        for contour, bounds in candidates:
            rect = cv2.minAreaRect(contour)
            if min(rect[1]) >= _MIN_SIDE:
                found.append((rect, contour, bounds))
        scores = []
        if self.score_mode == "bitmap":  # the common path: one C call per candidate, inline
            for _, _, (x, y, w, h) in found:
                scores.append(cv2.mean(prob[y : y + h, x : x + w], bitmap[y : y + h, x : x + w])[0])
        else:
            for rect, contour, _ in found:
                box = cv2.boxPoints(rect) if self.score_mode == "fast" else None
                scores.append(self._score(prob, bitmap, contour, box))
        kept_rects, kept_scores = [], []
        for (rect, _, _), score in zip(found, scores, strict=True):
            if self._keeps(score):
                kept_rects.append(rect)
                kept_scores.append(score)
        if not kept_rects:
            return [], []
        rects, rect_scores = [], []
        for grown, score in zip(unclip_quads(kept_rects, self.expand_ratio), kept_scores, strict=True):
            (cx, cy), (w, h), angle = grown
            if min(w, h) >= _MIN_SIDE + 2:
                rects.append((cx, cy, w, h, angle))
                rect_scores.append(score)
        return rects, rect_scores

    def _poly_candidate(self, prob: np.ndarray, bitmap: np.ndarray,
                        contour: np.ndarray) -> tuple[np.ndarray, float] | None:
        """One contour -> (polygon float32 (P, 2), score), or None when it is filtered out."""
        epsilon = _POLY_EPSILON * cv2.arcLength(contour, True)
        points = cv2.approxPolyDP(contour, epsilon, True).reshape(-1, 2).astype(np.float32)
        if points.shape[0] < 4:
            return None
        score = self._score(prob, bitmap, contour, points)
        if not self._keeps(score):
            return None
        expanded = offset_polygon(points, unclip_distance(points, self.expand_ratio))
        if len(expanded) != 1:  # vanished, or split into pieces (only a concave polygon can split)
            return None
        polygon = expanded[0]
        sides = cv2.minAreaRect(polygon.reshape(-1, 1, 2).astype(np.float32))[1]
        if min(sides) < _MIN_SIDE + 2:
            return None
        return polygon.astype(np.float32), score


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
    """Unclipped rectangles -> float32 (4, 2) corners TL, TR, BR, BL, rescaled and clipped."""
    if not rects:
        return []
    return list(_rescale(quad_corners(rects), map_hw, shape, copy=False))
