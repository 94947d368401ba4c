"""DBNet post-processing: probability map -> scored text boxes or polygons, in original-image pixels.

Follows MindOCR's ``DBPostprocess`` (which follows PaddleOCR) step by step, in numpy/cv2 only:

1. ``bitmap = P >= binary_thresh`` (MindOCR's ``>=``; PaddleOCR uses ``>``, the two differ only on
   pixels exactly at the threshold), optionally dilated with a 2x2 kernel (PaddleOCR's ``use_dilation``).
2. ``cv2.findContours(RETR_LIST, CHAIN_APPROX_SIMPLE)``, the first ``max_candidates`` contours.
3. quad: ``minAreaRect`` of the contour, skip when its short side < 3; poly: ``approxPolyDP`` with
   epsilon ``0.005 * arcLength``, skip when fewer than 4 points.
4. score: ``"fast"`` = mean of P inside that box / polygon rasterised in its bounding box
   (PaddleOCR's ``box_score_fast``), ``"slow"`` = mean of P inside the contour itself; skip < box_thresh.
5. unclip by ``D = area * expand_ratio / perimeter`` (pyclipper, round joins); a result that
   splits into several polygons is skipped; ``minAreaRect`` of the result, skip when its short side < 5.
6. rescale with ``shape_list = [src_h, src_w, scale_h, scale_w]``: ``x / scale_w``, ``y / scale_h``,
   rounded only after the rescale, clipped to ``[0, src_w - 1] x [0, src_h - 1]``. Without a
   ``shape_list`` the points stay unrounded in map pixels, clipped to the map.

MindOCR scores with the mean over every foreground pixel of the contour's axis-aligned bounding box;
that counts neighbouring blobs inside the box, so we use PaddleOCR's box/polygon mean instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import cv2
import numpy as np

from textdet.geometry import offset_polygon, order_points_clockwise, unclip_distance

_BOX_TYPES = ("quad", "poly")
_SCORE_MODES = ("fast", "slow")
_MIN_SIDE = 3  # short side (map pixels) below which a candidate is noise; +2 after the unclip (PaddleOCR)
_POLY_EPSILON = 0.005  # approxPolyDP tolerance as a fraction of the contour length (MindOCR)
_DILATION_KERNEL = np.ones((2, 2), dtype=np.uint8)


def _to_numpy_maps(pred: Any, pred_name: str) -> np.ndarray:
    """Model output dict / tensor / array, (N,1,H,W) or (N,H,W) -> float32 numpy (N, H, W)."""
    if isinstance(pred, Mapping):
        if pred_name not in pred:
            raise KeyError(f"DBPostprocess: prediction has no {pred_name!r} map; keys: {sorted(pred)}")
        pred = pred[pred_name]
    if hasattr(pred, "detach"):  # torch.Tensor, without importing torch here
        pred = pred.detach().float().cpu().numpy()
    maps = np.asarray(pred, dtype=np.float32)
    if maps.ndim == 4 and maps.shape[1] == 1:
        maps = maps[:, 0]
    if maps.ndim != 3:
        raise ValueError(f"DBPostprocess: expected a map of shape (N,1,H,W) or (N,H,W), got {maps.shape}")
    return maps


def _short_side(points: np.ndarray) -> tuple[tuple, float]:
    """``cv2.minAreaRect`` of ``points`` and the rectangle's short side."""
    rect = cv2.minAreaRect(points.reshape(-1, 1, 2).astype(np.float32, copy=False))
    return rect, float(min(rect[1]))


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
    """Extract text boxes (``box_type="quad"``) or polygons (``"poly"``) from DBNet's probability map.

    Args:
        box_type: "quad" (4 points TL, TR, BR, BL) or "poly" (the unclipped contour approximation).
        binary_thresh: pixels with ``P >= binary_thresh`` are text.
        box_thresh: candidates whose mean score is below this are dropped.
        max_candidates: at most this many contours are examined per image.
        expand_ratio: unclip ratio r in ``D = area * r / perimeter``.
        score_mode: "fast" (box / approximated polygon) or "slow" (exact contour).
        use_dilation: dilate the bitmap with a 2x2 kernel before finding contours.
        pred_name: which map of a model output dict to use.
        rescale_fields: accepted for MindOCR configs (``["polys"]``); the polygons are always rescaled.
    """

    def __init__(
        self,
        box_type: str = "quad",
        binary_thresh: float = 0.3,
        box_thresh: float = 0.7,
        max_candidates: int = 1000,
        expand_ratio: float = 1.5,
        score_mode: str = "fast",
        use_dilation: bool = False,
        pred_name: str = "binary",
        rescale_fields: Sequence[str] | None = None,
    ) -> None:
        if box_type not in _BOX_TYPES:
            raise ValueError(f"DBPostprocess: box_type must be one of {list(_BOX_TYPES)}, got {box_type!r}")
        if score_mode not in _SCORE_MODES:
            raise ValueError(f"DBPostprocess: score_mode must be one of {list(_SCORE_MODES)}, got {score_mode!r}")
        if int(max_candidates) < 0:
            raise ValueError(f"DBPostprocess: max_candidates must be >= 0, got {max_candidates}")
        if rescale_fields is not None and not all(isinstance(f, str) for f in rescale_fields):
            raise ValueError(f"DBPostprocess: rescale_fields must be a list of names, got {rescale_fields!r}")
        self.box_type = box_type
        self.binary_thresh = float(binary_thresh)
        self.box_thresh = float(box_thresh)
        self.max_candidates = int(max_candidates)
        self.expand_ratio = float(expand_ratio)
        self.score_mode = score_mode
        self.use_dilation = bool(use_dilation)
        self.pred_name = pred_name
        self.rescale_fields = list(rescale_fields) if rescale_fields is not None else ["polys"]

    def __repr__(self) -> str:
        return (
            f"DBPostprocess(box_type={self.box_type!r}, binary_thresh={self.binary_thresh}, "
            f"box_thresh={self.box_thresh}, max_candidates={self.max_candidates}, expand_ratio={self.expand_ratio}, "
            f"score_mode={self.score_mode!r}, use_dilation={self.use_dilation}, pred_name={self.pred_name!r})"
        )

    def __call__(self, pred: Any, shape_list: Any = None) -> list[dict[str, list]]:
        """Post-process a batch.

        Args:
            pred: model output dict (uses ``pred_name``), or a tensor / array (N,1,H,W) or (N,H,W) of
                probabilities.
            shape_list: (N, 4) ``[src_h, src_w, scale_h, scale_w]`` per image, or None to keep map pixels.

        Returns:
            One dict per image: ``{"polys": list of float32 (P, 2) arrays, "scores": list of float}``.
        """
        maps = _to_numpy_maps(pred, self.pred_name)
        shapes = None
        if shape_list is not None:
            if hasattr(shape_list, "detach"):
                shape_list = shape_list.detach().cpu().numpy()
            shapes = np.asarray(shape_list, dtype=np.float64).reshape(-1, 4) if np.size(shape_list) else None
            if shapes is None or shapes.shape[0] != maps.shape[0]:
                raise ValueError(
                    f"DBPostprocess: shape_list must be (N, 4) with N = {maps.shape[0]}, got {np.shape(shape_list)}"
                )
        results = []
        for i, prob in enumerate(maps):
            polys, scores = self.extract(prob)
            polys = [self._rescale(p, prob.shape, None if shapes is None else shapes[i]) for p in polys]
            results.append({"polys": polys, "scores": scores})
        return results

    def extract(self, prob: np.ndarray) -> tuple[list[np.ndarray], list[float]]:
        """Candidates of one (H, W) float32 probability map, in (unrounded) map pixels."""
        bitmap = (prob >= self.binary_thresh).view(np.uint8)  # bool -> uint8 without a copy
        if self.use_dilation:
            bitmap = cv2.dilate(bitmap, _DILATION_KERNEL)
        contours, _ = cv2.findContours(bitmap, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
        polys, scores = [], []
        for contour in contours[: self.max_candidates]:
            found = self._candidate(prob, contour)
            if found is not None:
                polys.append(found[0])
                scores.append(found[1])
        return polys, scores

    def _candidate(self, prob: np.ndarray, contour: np.ndarray) -> tuple[np.ndarray, float] | None:
        """One contour -> (points float32 (P, 2), score), or None when it is filtered out."""
        if self.box_type == "quad":
            rect, short_side = _short_side(contour)
            if short_side < _MIN_SIDE:
                return None
            points = cv2.boxPoints(rect)
            # geometry.unclip_distance on this rectangle, without its numpy overhead per contour
            (rw, rh), perimeter = rect[1], 2.0 * (rect[1][0] + rect[1][1])
            distance = rw * rh * self.expand_ratio / perimeter
        else:
            epsilon = _POLY_EPSILON * cv2.arcLength(contour, True)
            points = cv2.approxPolyDP(contour, epsilon, True).reshape(-1, 2).astype(np.float32)
            if points.shape[0] < 4:
                return None
            distance = unclip_distance(points, self.expand_ratio)
        if self.score_mode == "fast":
            score = _mean_inside(prob, points)
        else:
            score = _mean_inside(prob, contour.reshape(-1, 2).astype(np.float32))
        if score < self.box_thresh:
            return None
        expanded = offset_polygon(points, distance)
        if len(expanded) != 1:  # vanished, or split into pieces (only a concave polygon can split)
            return None
        rect, short_side = _short_side(expanded[0])
        if short_side < _MIN_SIDE + 2:
            return None
        if self.box_type == "quad":
            return order_points_clockwise(cv2.boxPoints(rect)), score
        return expanded[0].astype(np.float32), score

    @staticmethod
    def _rescale(poly: np.ndarray, map_hw: tuple[int, int], shape: np.ndarray | None) -> np.ndarray:
        """Map pixels -> original-image pixels (rounded after the division), clipped to the image."""
        poly = poly.astype(np.float64)
        if shape is None:
            h, w = map_hw
        else:
            h, w, scale_h, scale_w = shape
            poly = np.round(poly / np.array([scale_w, scale_h]))
        poly[:, 0] = np.clip(poly[:, 0], 0, w - 1)
        poly[:, 1] = np.clip(poly[:, 1], 0, h - 1)
        return (poly + 0.0).astype(np.float32)  # + 0.0 turns a rounded -0.0 into 0.0
