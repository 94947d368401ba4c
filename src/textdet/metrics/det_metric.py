"""Text-detection metric: the ICDAR2015 (Challenge 4, task 1) protocol, pooled over a data set.

Per image, as the official ``script.py``:

- coordinates are truncated to integers (toward zero, like ``int()``); polygons are shapely
  polygons; an invalid (self-intersecting) polygon is repaired with ``buffer(0)`` as in mmocr, and
  one with fewer than 3 points or a non-finite coordinate is an empty (zero-area) polygon. Such a
  GT still counts as a care GT that nothing can match (MindOCR silently drops it);
- GT tagged ignore (``###``) is don't-care; a detection is don't-care when
  ``area(det & G) / area(det) > area_precision_constraint`` for a single don't-care GT ``G``;
- greedy one-to-one matching, GT in order then detections in order: a pair matches when neither
  is matched yet, neither is don't-care, and ``IoU > iou_thresh`` (strictly). A second detection on
  a matched GT is a false positive (MindOCR's first-match loop counts it as nothing).

Counts are pooled over images: ``recall = TP / #care GT``, ``precision = TP / #care detections``,
``f-score = 2PR / (P + R)``, each 0 when its denominator is 0 (the official script's global rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import shapely
from shapely.geometry import Polygon


def to_polygon(points: Any) -> Polygon:
    """Truncate ``points`` (P, 2) to integers and return a valid shapely polygon (empty if degenerate)."""
    p = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    if p.shape[0] < 3 or not np.isfinite(p).all():
        return Polygon()
    poly = Polygon(np.trunc(p))
    if not poly.is_valid:
        poly = poly.buffer(0)
    return poly


def _polygon_array(polys: Sequence[Any]) -> np.ndarray:
    """1-D object array of :func:`to_polygon` results (shapely's vectorised functions take these)."""
    out = np.empty(len(polys), dtype=object)
    out[:] = [to_polygon(p) for p in polys]
    return out


def _overlap_areas(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Intersection areas (len(a), len(b)) of two object arrays of polygons; bounding boxes prune pairs."""
    out = np.zeros((len(a), len(b)), dtype=np.float64)
    if len(a) == 0 or len(b) == 0:
        return out
    ba, bb = shapely.bounds(a), shapely.bounds(b)  # (xmin, ymin, xmax, ymax), NaN for empty
    with np.errstate(invalid="ignore"):
        touch = (
            (ba[:, None, 0] < bb[None, :, 2])
            & (bb[None, :, 0] < ba[:, None, 2])
            & (ba[:, None, 1] < bb[None, :, 3])
            & (bb[None, :, 1] < ba[:, None, 3])
        )
    ia, ib = np.nonzero(touch)
    if len(ia):
        out[ia, ib] = shapely.area(shapely.intersection(a[ia], b[ib]))
    return out


def evaluate_image(
    dets: Sequence[Any],
    gts: Sequence[Any],
    ignore_tags: Any = None,
    iou_thresh: float = 0.5,
    area_precision_constraint: float = 0.5,
) -> tuple[int, int, int]:
    """ICDAR2015 counts for one image.

    Args:
        dets: detected polygons, each (P, 2) x then y.
        gts: ground-truth polygons, each (P, 2).
        ignore_tags: (len(gts),) bool, True for don't-care GT; None means none.

    Returns:
        ``(tp, n_care_det, n_care_gt)``.
    """
    ignore = np.zeros(len(gts), dtype=bool) if ignore_tags is None else np.asarray(ignore_tags, dtype=bool).reshape(-1)
    if ignore.shape[0] != len(gts):
        raise ValueError(f"DetMetric: {len(gts)} GT polygons but {ignore.shape[0]} ignore tags")
    gt_polys, det_polys = _polygon_array(gts), _polygon_array(dets)
    inter = _overlap_areas(gt_polys, det_polys)
    gt_area, det_area = shapely.area(gt_polys).astype(np.float64), shapely.area(det_polys).astype(np.float64)

    det_dontcare = np.zeros(len(dets), dtype=bool)
    if ignore.any() and len(dets):
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(det_area[None, :] > 0, inter[ignore] / det_area[None, :], 0.0)
        det_dontcare = (frac > area_precision_constraint).any(axis=0)

    union = gt_area[:, None] + det_area[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = np.where(union > 0, inter / union, 0.0)
    det_matched = det_dontcare.copy()  # a don't-care detection can never match
    tp = 0
    for g in np.flatnonzero(~ignore):
        free = np.flatnonzero(~det_matched & (iou[g] > iou_thresh))
        if len(free):
            det_matched[free[0]] = True
            tp += 1
    return tp, int(len(dets) - det_dontcare.sum()), int((~ignore).sum())


class DetMetric:
    """Pooled ICDAR2015 recall / precision / f-score over every image passed to :meth:`update`.

    Args:
        main_indicator: the key the engine uses to pick the best checkpoint.
        iou_thresh: a detection matches a GT when IoU is strictly greater than this.
        area_precision_constraint: a detection is don't-care when more than this fraction of its
            area lies in one don't-care GT.
    """

    def __init__(
        self, main_indicator: str = "f-score", iou_thresh: float = 0.5, area_precision_constraint: float = 0.5
    ) -> None:
        if main_indicator not in ("recall", "precision", "f-score"):
            raise ValueError(
                f"DetMetric: main_indicator must be 'recall', 'precision' or 'f-score', got {main_indicator!r}"
            )
        self.main_indicator = main_indicator
        self.iou_thresh = float(iou_thresh)
        self.area_precision_constraint = float(area_precision_constraint)
        self._counts = np.zeros(3, dtype=np.int64)

    def __repr__(self) -> str:
        return (
            f"DetMetric(main_indicator={self.main_indicator!r}, iou_thresh={self.iou_thresh}, "
            f"area_precision_constraint={self.area_precision_constraint})"
        )

    def reset(self) -> None:
        self._counts = np.zeros(3, dtype=np.int64)

    def update(self, preds: Sequence[Any], gts: Sequence[Sequence[Any]], ignore_tags: Sequence[Any]) -> None:
        """Add a batch.

        Args:
            preds: per image, a list of detected polygons (P, 2), or a post-process result dict with "polys".
            gts: per image, a list of GT polygons (P, 2).
            ignore_tags: per image, (len(gts[i]),) bool (True = ``###``), or None for no don't-care GT.
        """
        if not (len(preds) == len(gts) == len(ignore_tags)):
            raise ValueError(
                f"DetMetric.update: batch sizes differ: {len(preds)} preds, {len(gts)} gts, "
                f"{len(ignore_tags)} ignore_tags"
            )
        for dets, gt, ignore in zip(preds, gts, ignore_tags, strict=True):
            if isinstance(dets, Mapping):
                dets = dets["polys"]
            self._counts += np.array(
                evaluate_image(dets, gt, ignore, self.iou_thresh, self.area_precision_constraint), dtype=np.int64
            )

    def counts(self) -> np.ndarray:
        """``[tp, n_care_det, n_care_gt]`` int64 (a copy), to be summed across ranks."""
        return self._counts.copy()

    def set_counts(self, counts: Any) -> None:
        """Replace the pooled counts, e.g. with their all-reduced sum."""
        arr = np.asarray(counts).reshape(-1)
        if arr.shape != (3,):
            raise ValueError(f"DetMetric.set_counts: expected [tp, n_care_det, n_care_gt], got shape {arr.shape}")
        self._counts = np.rint(arr).astype(np.int64)

    def compute(self) -> dict[str, float]:
        """``{"recall", "precision", "f-score"}`` floats in [0, 1] from the pooled counts."""
        tp, n_det, n_gt = (int(c) for c in self._counts)
        recall = tp / n_gt if n_gt else 0.0
        precision = tp / n_det if n_det else 0.0
        f = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {"recall": recall, "precision": precision, "f-score": f}
