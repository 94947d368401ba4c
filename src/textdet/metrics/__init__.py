"""Detection metric (ICDAR2015 protocol), ICDAR result-folder reader, and the name -> class table."""

from __future__ import annotations

import inspect
from typing import Any

from textdet.errors import ConfigError
from textdet.metrics.det_metric import DetMetric, evaluate_image, to_polygon
from textdet.metrics.icdar_io import evaluate_files, load_gt, load_preds

METRICS = {"DetMetric": DetMetric}


def build_metric(name: str, **kwargs: Any) -> DetMetric:
    """Build the metric called ``name`` (a key of ``METRICS``) from plain keyword arguments.

    Raises:
        ConfigError: unknown name (lists the valid ones), a keyword the class does not take, or a bad value.
    """
    if name not in METRICS:
        raise ConfigError(f"metric.name: unknown metric {name!r}; valid names: {sorted(METRICS)}")
    cls = METRICS[name]
    params = [k for k in inspect.signature(cls.__init__).parameters if k != "self"]
    unknown = sorted(k for k in kwargs if k not in params)
    if unknown:
        raise ConfigError(f"metric: {name} does not take {unknown}; valid keys: {sorted(params)}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"metric: {name}: {e}") from e


__all__ = [
    "METRICS",
    "DetMetric",
    "build_metric",
    "evaluate_files",
    "evaluate_image",
    "load_gt",
    "load_preds",
    "to_polygon",
]
