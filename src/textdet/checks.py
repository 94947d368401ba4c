"""Argument checks shared by the config-built components: one wording for every constructor."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def check_prob(p: float, name: str = "p") -> float:
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {p!r}")
    return float(p)


def check_pair(value: Any, name: str, *, positive: bool = False, integer: bool = False) -> tuple:
    """Validate a (lo, hi) pair of numbers (lo <= hi not required here)."""
    ok = isinstance(value, (list, tuple)) and len(value) == 2
    ok = ok and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
    ok = ok and (not integer or all(float(v).is_integer() for v in value)) and (not positive or min(value) > 0)
    if not ok:
        kind = ("positive " if positive else "") + ("integers" if integer else "numbers")
        raise ValueError(f"{name} must be a pair of {kind}, got {value!r}")
    return (int(value[0]), int(value[1])) if integer else (float(value[0]), float(value[1]))


def sorted_pair(value: Any, name: str, **kwargs: bool) -> tuple[float, float]:
    lo, hi = check_pair(value, name, **kwargs)
    if lo > hi:
        raise ValueError(f"{name} must be (min, max) with min <= max, got {value!r}")
    return lo, hi


def require_uint8_hwc(image: np.ndarray, who: str) -> None:
    if not (isinstance(image, np.ndarray) and image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3):
        got = getattr(image, "shape", type(image).__name__), getattr(image, "dtype", None)
        raise ValueError(f"{who} expects a uint8 HxWx3 image (before NormalizeImage/ToCHWImage), got {got}")
