"""What kind of error a detector makes: each detection and each word of a photo sorted into one kind, and
recall by word height. It says whether a model draws one box per line where the labels have words, misses
small words, or draws boxes on nothing; ``textdet eval --report`` tallies it over a split.

Detections, in this order of tests (IoU as ICDAR 2015 computes it, on integer-truncated corners): matched
(IoU > 0.5 with a word that counts), ignored (over half of it inside a ``###`` region), merged (covers over
half of two or more words), loose (best IoU 0.2 to 0.5), fragment (over 20% of it inside a word), background
(the rest). Words that count (not ``###``): found, in a merged box, partial (only a loose box), missed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import shapely
from shapely.geometry import Polygon

from textdet.metrics.det_metric import to_polygon

DETECTION_KINDS = ("matched", "merged", "loose", "fragment", "background", "ignored")
WORD_KINDS = ("found", "in a merged box", "partial", "missed")
# What a detection of a kind makes of the words it touches.
WORD_STATE = {"matched": "found", "merged": "in a merged box", "loose": "partial"}
HEIGHT_BINS = (0, 8, 12, 16, 24, 32, 10_000)  # short side of the word's rotated box, original pixels


def detection_kind(det: Polygon, words: Sequence[Polygon], counts: Sequence[bool]) -> tuple[str, list[int]]:
    """(kind, indices of the words it touches in that kind) for one detection polygon (non-empty);
    ``counts[i]``: word i is a word that counts (False: a ``###`` region)."""
    if not len(words):
        return "background", []
    word_array = np.empty(len(words), dtype=object)
    word_array[:] = list(words)
    overlaps = shapely.area(shapely.intersection(det, word_array))
    word_areas = shapely.area(word_array)
    ious = overlaps / np.maximum(det.area + word_areas - overlaps, 1e-9)
    best = int(np.argmax(ious))
    if ious[best] > 0.5 and counts[best]:
        return "matched", [best]
    inside_ignored = [o / det.area for o, c in zip(overlaps, counts, strict=True) if not c]
    if inside_ignored and max(inside_ignored) > 0.5:
        return "ignored", []
    covered = [i for i in range(len(words)) if counts[i] and overlaps[i] / word_areas[i] > 0.5]
    if len(covered) >= 2:
        return "merged", covered
    if ious[best] > 0.2 and counts[best]:
        return "loose", [best]
    if overlaps.max() / det.area > 0.2:
        return "fragment", []
    return "background", []


def word_height(points: Any) -> float:
    """The short side of the minimum-area rectangle around ``points`` (P, 2); 0 for a degenerate word."""
    rect = shapely.minimum_rotated_rectangle(Polygon(np.asarray(points, dtype=np.float64).reshape(-1, 2)))
    corners = np.asarray(rect.exterior.coords if isinstance(rect, Polygon) else [], dtype=np.float64)
    if len(corners) < 4:
        return 0.0
    sides = np.hypot(*(corners[1:3] - corners[0:2]).T)
    return float(sides.min())


def height_bin(height: float) -> int:
    return int(np.searchsorted(HEIGHT_BINS, height, side="right")) - 1


def height_label(index: int) -> str:
    return f"{HEIGHT_BINS[index]}-{HEIGHT_BINS[index + 1]} px" if index + 2 < len(HEIGHT_BINS) else \
        f"{HEIGHT_BINS[index]}+ px"


class ImageErrors(NamedTuple):
    """One photo sorted: ``detections[j]``: the kind of detection j (None: a degenerate polygon, not
    counted); ``words[i]``: the kind of word i (None: a ``###`` region); ``heights[i]``: word i's height in
    pixels."""

    detections: list[str | None]
    words: list[str | None]
    heights: list[float]


def image_errors(dets: Sequence[Any], gts: Sequence[Any], ignore_tags: Sequence[bool]) -> ImageErrors:
    """Sort one photo's detections (polygons (P, 2)) and labelled words (``ignore_tags``: True for ``###``).
    A word with a degenerate polygon counts and is missed (the metric counts it too); no detection matches
    it."""
    words = [to_polygon(points) for points in gts]
    cares = [not bool(tag) for tag in ignore_tags]
    matchable = [care and not word.is_empty and word.area > 0
                 for care, word in zip(cares, words, strict=True)]
    state: list[str | None] = ["missed" if care else None for care in cares]
    det_kinds: list[str | None] = []
    for points in dets:
        det = to_polygon(points)
        if det.is_empty or det.area <= 0:
            det_kinds.append(None)
            continue
        kind, touched = detection_kind(det, words, matchable)
        det_kinds.append(kind)
        word_state = WORD_STATE.get(kind)
        for i in touched:  # a word keeps its best state: found beats a merged or loose box
            if state[i] == "missed" or word_state == "found":
                state[i] = word_state
    heights = [word_height(points) for points in gts]
    return ImageErrors(det_kinds, state, heights)


class ErrorTally:
    """Detection and word kinds, and found / all words per height bin, summed over photos."""

    def __init__(self) -> None:
        self.images = 0
        self.detections: Counter = Counter()
        self.words: Counter = Counter()
        self.found_by_height: Counter = Counter()
        self.words_by_height: Counter = Counter()

    def add(self, errors: ImageErrors) -> None:
        self.images += 1
        self.detections.update(kind for kind in errors.detections if kind is not None)
        for kind, height in zip(errors.words, errors.heights, strict=True):
            if kind is None:
                continue
            self.words[kind] += 1
            self.words_by_height[height_bin(height)] += 1
            self.found_by_height[height_bin(height)] += kind == "found"

    def recall_by_height(self) -> dict[str, dict[str, int]]:
        """``{"8-12 px": {"found": n, "words": m}, ...}`` for the bins that hold words, smallest first."""
        return {height_label(b): {"found": self.found_by_height[b], "words": self.words_by_height[b]}
                for b in sorted(self.words_by_height)}

    def summary(self) -> dict:
        return {"images": self.images, "detections": dict(self.detections), "words": dict(self.words),
                "recall_by_height": self.recall_by_height()}
