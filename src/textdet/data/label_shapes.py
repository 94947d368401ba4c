"""Label outlines that DB can learn: the shrink-split check and the hull / quad relabelling.

DB's probability target is each text polygon shrunk inwards by D = A (1 - r^2) / L. An outline that hugs
the ink (eScriptorium's and Kraken's line masks, ALTO or PAGE) pinches between words, and its shrink falls
apart into several pieces there: a model that learns that target draws several boxes where the label has
one, and is charged a miss and false alarms for each. Its convex hull or its minimum-area rectangle shrinks
to one piece; relabelling is the user's choice (docs/decisions/label-shapes.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from textdet.data.annotations import IGNORE_TEXTS, SHAPES, Record, plain_points
from textdet.data.targets import shrink_polygon
from textdet.geometry import quad_corners


def reshape_points(points: Sequence[Sequence[float]], shape: str) -> np.ndarray:
    """``points`` as ``shape``: "outline" (unchanged), "hull" (convex hull) or "quad" (minimum-area
    rectangle, corners TL, TR, BR, BL); float64 (P, 2)."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {list(SHAPES)}, got {shape!r}")
    poly = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    if shape == "hull":
        return cv2.convexHull(poly.astype(np.float32)).reshape(-1, 2).astype(np.float64)
    if shape == "quad":
        (cx, cy), (w, h), angle = cv2.minAreaRect(poly.astype(np.float32))
        return quad_corners(np.array([[cx, cy, w, h, angle]]))[0]
    return poly


def shrink_pieces(points: Sequence[Sequence[float]], min_text_size: float = 8,
                  shrink_ratio: float = 0.4) -> int:
    """How many pieces DB's shrink (ShrinkBinaryMap's rule) makes of one polygon.

    0 when it is masked out (thinner than ``min_text_size``, or its shrink vanishes), 1 for a learnable
    target, more when it splits.
    """
    _, _, pieces = shrink_polygon(points, False, min_text_size, shrink_ratio)
    return len(pieces)


def split_count(annotations: list[dict], min_text_size: float = 8, shrink_ratio: float = 0.4) -> int:
    """How many of one image's text regions (``###`` ones left out) split into several pieces when shrunk."""
    return sum(shrink_pieces(a["points"], min_text_size, shrink_ratio) > 1
               for a in annotations if a.get("transcription") not in IGNORE_TEXTS)


def split_advice(n_split: int, n_regions: int, shrink_ratio: float = 0.4) -> str:
    """One sentence for ``convert`` and ``check-data``: what the split regions do to training, and the fix."""
    return (f"{n_split} of {n_regions} text regions split into several pieces when shrunk for DB's "
            f"probability map (shrink_ratio {shrink_ratio:g}): a detector trained on them learns to draw "
            "several boxes where the label has one. Outlines that hug the ink do this (line masks from "
            "eScriptorium or Kraken); "
            "relabel with `textdet convert labels LABEL_FILE --shape quad --out NEW_FILE` (--shape hull for "
            "curved lines), or convert the source again with --shape quad")


def relabel(records: list[Record], shape: str) -> int:
    """Every region's points as ``shape`` (``reshape_points``), in place, written to the hundredth as
    ``convert`` writes them; returns how many text regions still split when shrunk."""
    split = 0
    for _, regions in records:
        for region in regions:
            region["points"] = plain_points(reshape_points(region["points"], shape))
        split += split_count(regions)
    return split
