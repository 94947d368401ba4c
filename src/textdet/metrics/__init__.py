"""Detection metric (ICDAR2015, DetEval, TIoU), ICDAR result-folder reader, and the name -> class table."""

from __future__ import annotations

from typing import Any

from textdet.config.components import build_component
from textdet.metrics.det_metric import DetMetric, evaluate_image, to_polygon
from textdet.metrics.icdar_io import evaluate_files, load_gt, load_preds

METRICS = {"DetMetric": DetMetric}


def build_metric(name: str, **kwargs: Any) -> DetMetric:
    """``METRICS[name](**kwargs)``; ConfigError names a bad name (listing the valid ones), keyword or value."""
    return build_component(METRICS, name, kwargs, "metric", "metric")


__all__ = [
    "METRICS", "DetMetric", "build_metric", "evaluate_files", "evaluate_image", "load_gt", "load_preds", "to_polygon",
]
