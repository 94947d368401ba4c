"""Detection metric (ICDAR2015, DetEval, TIoU), ICDAR result-folder reader, and the name -> class table."""

from __future__ import annotations

from textdet.metrics.det_metric import DetMetric, evaluate_image, to_polygon
from textdet.metrics.icdar_io import evaluate_files, load_gt, load_preds

METRICS = {"DetMetric": DetMetric}

__all__ = ["METRICS", "DetMetric", "evaluate_files", "evaluate_image", "load_gt", "load_preds", "to_polygon"]
