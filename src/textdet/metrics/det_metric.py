"""Text-detection metric pooled over a data set: ICDAR2015 (the official ``script.py``'s rules, the default), DetEval
or TIoU matching on integer-truncated polygons with ``###`` don't-care (rules and MindOCR differences:
docs/decisions/detection-metric.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import shapely
from shapely.geometry import Polygon

from textdet.config.components import component_repr


def to_polygon(points: Any) -> Polygon:
    """Truncate ``points`` (P, 2) to integers and return a valid shapely polygon (empty if degenerate)."""
    p = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    if p.shape[0] < 3 or not np.isfinite(p).all():
        return Polygon()
    poly = Polygon(np.trunc(p))
    return poly if poly.is_valid else poly.buffer(0)


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
    bounds_a = shapely.bounds(a)  # (xmin, ymin, xmax, ymax), NaN for empty
    bounds_b = shapely.bounds(b)
    with np.errstate(invalid="ignore"):
        a_before_b_ends = bounds_a[:, None, :2] < bounds_b[None, :, 2:]  # per axis: min of a < max of b
        b_before_a_ends = bounds_b[None, :, :2] < bounds_a[:, None, 2:]
        touch = (a_before_b_ends & b_before_a_ends).all(axis=2)
    rows, cols = np.nonzero(touch)
    if len(rows):
        out[rows, cols] = shapely.area(shapely.intersection(a[rows], b[cols]))
    return out


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / den, 0.0)


class _ImageGeometry(NamedTuple):
    """What every protocol needs of one image's GT and detections."""

    gt_polys: np.ndarray  # object array of shapely polygons
    det_polys: np.ndarray
    overlap: np.ndarray  # (n_gt, n_det) intersection areas
    gt_areas: np.ndarray
    det_areas: np.ndarray
    ignore: np.ndarray  # (n_gt,) bool: don't-care GT
    dontcare: np.ndarray  # (n_det,) bool: detections inside a don't-care GT, never matched


def _geometry(dets: Sequence[Any], gts: Sequence[Any], ignore_tags: Any,
              dontcare_precision: float) -> _ImageGeometry:
    """Polygons, areas, GT x det intersections, ignore tags and don't-care detections (> ``dontcare_precision``
    of the area in one don't-care GT)."""
    if ignore_tags is None:
        ignore = np.zeros(len(gts), dtype=bool)
    else:
        ignore = np.asarray(ignore_tags, dtype=bool).reshape(-1)
    if ignore.shape[0] != len(gts):
        raise ValueError(f"DetMetric: {len(gts)} GT polygons but {ignore.shape[0]} ignore tags")
    gt_polys = _polygon_array(gts)
    det_polys = _polygon_array(dets)
    overlap = _overlap_areas(gt_polys, det_polys)
    gt_areas = shapely.area(gt_polys).astype(np.float64)
    det_areas = shapely.area(det_polys).astype(np.float64)
    dontcare = (_ratio(overlap[ignore], det_areas[None, :]) > dontcare_precision).any(axis=0)
    return _ImageGeometry(gt_polys, det_polys, overlap, gt_areas, det_areas, ignore, dontcare)


def _iou_pairs(geo: _ImageGeometry, iou_thresh: float) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """IoU matrix and the greedy one-to-one matches: GT in order, each takes its first free detection."""
    union = geo.gt_areas[:, None] + geo.det_areas[None, :] - geo.overlap
    iou = _ratio(geo.overlap, union)
    taken = geo.dontcare.copy()  # a don't-care detection can never match
    pairs = []
    for i in np.flatnonzero(~geo.ignore):
        free = np.flatnonzero(~taken & (iou[i] > iou_thresh))
        if len(free):
            taken[free[0]] = True
            pairs.append((int(i), int(free[0])))
    return iou, pairs


def _care_counts(dets: Sequence[Any], geo: _ImageGeometry) -> tuple[int, int]:
    """(detections that are not don't-care, GT that are not don't-care)."""
    return int(len(dets) - geo.dontcare.sum()), int((~geo.ignore).sum())


def evaluate_image(
    dets: Sequence[Any], gts: Sequence[Any], ignore_tags: Any = None, iou_thresh: float = 0.5,
    area_precision_constraint: float = 0.5,
) -> tuple[int, int, int]:
    """ICDAR2015 counts ``(tp, n_care_det, n_care_gt)`` of one image; ``ignore_tags``: don't-care ``gts``, or None."""
    geo = _geometry(dets, gts, ignore_tags, area_precision_constraint)
    pairs = _iou_pairs(geo, iou_thresh)[1]
    return len(pairs), *_care_counts(dets, geo)


def _tightness(lost: float) -> float:
    """TIoU's f(x): the share kept; a loss of 1% or less counts as none."""
    return 1.0 if lost <= 0.01 else 1.0 - lost


def tiou_image(dets: Sequence[Any], gts: Sequence[Any], ignore_tags: Any = None, iou_thresh: float = 0.5,
               area_precision_constraint: float = 0.5) -> tuple[float, float, int, int]:
    """TIoU (Liu et al., CVPR 2019) for one image: ``(recall sum, precision sum, n_care_det, n_care_gt)``.
    ICDAR2015 matching; a match (G, D) adds ``IoU * f(Ct / |G|)`` to recall (Ct: the part of G that D misses) and
    ``IoU * f(Ot / |D|)`` to precision (Ot: D's cover of every other GT it touches, as the public TIoU script)."""
    geo = _geometry(dets, gts, ignore_tags, area_precision_constraint)
    iou, pairs = _iou_pairs(geo, iou_thresh)
    recall = precision = 0.0
    for i, j in pairs:
        missed = (geo.gt_areas[i] - geo.overlap[i, j]) / geo.gt_areas[i]
        recall += float(iou[i, j] * _tightness(missed))
        others = [k for k in np.flatnonzero(geo.overlap[:, j] > 0) if k != i]
        on_others = shapely.intersection(geo.det_polys[j], shapely.union_all(geo.gt_polys[others]))
        outlier = shapely.area(shapely.difference(on_others, geo.gt_polys[i]))
        outlier = outlier if outlier > 1e-10 else 0.0  # shapely's rounding dust counts as none
        precision += float(iou[i, j] * _tightness(outlier / geo.det_areas[j]))
    return recall, precision, *_care_counts(dets, geo)


def deteval_image(dets: Sequence[Any], gts: Sequence[Any], ignore_tags: Any = None, area_recall: float = 0.8,
                  area_precision: float = 0.4, split_weight: float = 0.8, merge_weight: float = 1.0,
                  center_diff: float = 1.0) -> tuple[float, float, int, int]:
    """DetEval (Wolf & Jolion 2006) as the ICDAR 2013 script, on polygons: ``(recall sum, precision sum, n_care_det,
    n_care_gt)`` for one image. One-to-one, split and merge rules (r >= 0.8, p >= 0.4):
    docs/decisions/detection-metric.md."""
    geo = _geometry(dets, gts, ignore_tags, area_precision)
    gt_cover = _ratio(geo.overlap, geo.gt_areas[:, None])  # share of each GT a detection covers
    det_cover = _ratio(geo.overlap, geo.det_areas[None, :])  # share of each detection inside a GT
    fits = (gt_cover >= area_recall) & (det_cover >= area_precision)
    points = [np.trunc(np.asarray(q, dtype=np.float64).reshape(-1, 2)) for q in (*gts, *dets)]
    centres = [q.mean(axis=0) if len(q) else np.zeros(2) for q in points]
    diagonals = [float(np.hypot(*np.ptp(q, axis=0))) if len(q) else 0.0 for q in points]
    gt_done = geo.ignore.copy()  # matched, or never matchable
    det_done = geo.dontcare.copy()
    recall = precision = 0.0
    for i, j in zip(*np.nonzero(fits), strict=True):  # one-to-one
        k = len(gts) + j  # the detection's index in points
        if gt_done[i] or det_done[j] or fits[i].sum() != 1 or fits[:, j].sum() != 1:
            continue
        if 2 * np.linalg.norm(centres[i] - centres[k]) < center_diff * (diagonals[i] + diagonals[k]):
            gt_done[i] = True
            det_done[j] = True
            recall += 1
            precision += 1
    for i in np.flatnonzero(~gt_done):  # one GT split over several detections
        js = np.flatnonzero(~det_done & (det_cover[i] >= area_precision))
        covered = round(float(gt_cover[i, js].sum()), 4)  # the GT's share the detections cover together
        if len(js) and covered >= area_recall:
            gt_done[i] = True
            det_done[js] = True
            recall += 1 if len(js) == 1 else split_weight
            precision += 1 if len(js) == 1 else split_weight * len(js)
    for j in np.flatnonzero(~det_done):  # several GT merged into one detection
        gs = np.flatnonzero(~gt_done & (gt_cover[:, j] >= area_recall))
        inside = round(float(det_cover[gs, j].sum()), 4)  # the detection's share inside those GTs together
        if len(gs) and inside >= area_precision:
            det_done[j] = True
            gt_done[gs] = True
            recall += 1 if len(gs) == 1 else merge_weight * len(gs)
            precision += 1 if len(gs) == 1 else merge_weight
    return recall, precision, *_care_counts(dets, geo)


# protocol -> per-image counts: icdar15 (tp, care detections, care GT), the others (recall sum, precision sum,
# care detections, care GT); all but deteval (its own constraints) take iou_thresh and area_precision_constraint.
PROTOCOLS = {"icdar15": evaluate_image, "deteval": deteval_image, "tiou": tiou_image}


class DetMetric:
    """Pooled recall / precision / f-score over every image passed to :meth:`update`.
    ``main_indicator``: the key that picks the best checkpoint; ``iou_thresh``: a match needs IoU strictly above
    it; ``area_precision_constraint``: a detection is don't-care above this fraction inside one don't-care GT
    (DetEval uses its own 0.4); ``protocol``: a key of PROTOCOLS ("icdar15", "deteval", "tiou")."""

    def __init__(self, main_indicator: str = "f-score", iou_thresh: float = 0.5,
                 area_precision_constraint: float = 0.5, protocol: str = "icdar15") -> None:
        if main_indicator not in ("recall", "precision", "f-score"):
            raise ValueError(f"DetMetric: main_indicator must be 'recall', 'precision' or 'f-score', got "
                             f"{main_indicator!r}")
        if protocol not in PROTOCOLS:
            raise ValueError(f"DetMetric: protocol must be one of {list(PROTOCOLS)}, got {protocol!r}")
        self.main_indicator = main_indicator
        self.protocol = protocol
        self.iou_thresh = float(iou_thresh)
        self.area_precision_constraint = float(area_precision_constraint)
        self._counts = np.zeros(4)

    __repr__ = component_repr

    def reset(self) -> None:
        self._counts = np.zeros(4)

    def update(self, preds: Sequence[Any], gts: Sequence[Sequence[Any]], ignore_tags: Sequence[Any]) -> None:
        """Add a batch: per image, ``preds`` (polygons (P, 2) or a post-process dict with "polys"), ``gts``
        (polygons (P, 2)) and ``ignore_tags`` ((len(gts[i]),) bool, True = ``###``; None: no don't-care GT)."""
        if not (len(preds) == len(gts) == len(ignore_tags)):
            raise ValueError(f"DetMetric.update: batch sizes differ: {len(preds)} preds, {len(gts)} gts, "
                             f"{len(ignore_tags)} ignore_tags")
        kwargs = {} if self.protocol == "deteval" else {
            "iou_thresh": self.iou_thresh, "area_precision_constraint": self.area_precision_constraint}
        for dets, gt, ignore in zip(preds, gts, ignore_tags, strict=True):
            if isinstance(dets, Mapping):
                dets = dets["polys"]
            counts = PROTOCOLS[self.protocol](dets, gt, ignore, **kwargs)
            if self.protocol == "icdar15":
                # evaluate_image gives (tp, n_care_det, n_care_gt): a true positive is one hit for recall and
                # one for precision
                true_positives, n_care_det, n_care_gt = counts
                counts = (true_positives, true_positives, n_care_det, n_care_gt)
            self._counts += np.array(counts, dtype=np.float64)

    def counts(self) -> np.ndarray:
        """``[recall sum, precision sum, n_care_det, n_care_gt]`` float64 copy, summed across ranks."""
        return self._counts.copy()

    def set_counts(self, counts: Any) -> None:
        """Replace the pooled counts, e.g. with their all-reduced sum."""
        arr = np.asarray(counts, dtype=np.float64).reshape(-1)
        if arr.shape != (4,):
            raise ValueError(f"DetMetric.set_counts: expected [recall sum, precision sum, n_care_det, n_care_gt], "
                             f"got shape {arr.shape}")
        self._counts = arr.copy()

    def compute(self) -> dict[str, float]:
        """``{"recall", "precision", "f-score"}`` floats in [0, 1] from the pooled counts."""
        recall_sum, precision_sum, n_det, n_gt = (float(c) for c in self._counts)
        recall = recall_sum / n_gt if n_gt else 0.0
        precision = precision_sum / n_det if n_det else 0.0
        f = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {"recall": recall, "precision": precision, "f-score": f}
