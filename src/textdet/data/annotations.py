"""One text region as every label reader writes it: points as plain JSON numbers, ``###`` for a region to
ignore, and the count of what a conversion kept and skipped. Standard library only at import time."""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from textdet.errors import DataError

logger = logging.getLogger("textdet")
IGNORE = "###"  # what every reader writes for a region to ignore
IGNORE_TEXTS = ("###", "*")  # what training and scoring ignore (MindOCR's DetLabelEncode: both)
SHAPES = ("outline", "hull", "quad")  # how convert writes each region (label_shapes.reshape_points)
Record = tuple[str, list[dict]]


def text_region_count(annotations: list[dict]) -> int:
    """How many of one image's regions are text to find (not marked ``###`` or ``*``)."""
    return sum(a.get("transcription") not in IGNORE_TEXTS for a in annotations)


@dataclass
class Summary:
    """What a conversion kept and skipped (printed by ``textdet convert``)."""

    images: int = 0
    regions: int = 0
    ignored: int = 0  # regions marked ### or * (not text to find)
    split: int = 0  # text regions whose DB shrink falls apart into several pieces (label_shapes)
    skipped: Counter = field(default_factory=Counter)

    def skip(self, where: str, what: str) -> None:
        logger.warning("%s: %s; skipped", where, what)
        self.skipped[what] += 1

    def __str__(self) -> str:
        skipped = ("; skipped " + ", ".join(f"{n} x {w}" for w, n in self.skipped.items())
                   if self.skipped else "")
        ignored = f"{self.ignored} ignored: ### or *"
        return f"{self.images} images, {self.regions} text regions ({ignored}){skipped}"


def load_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8-sig") as f:
            return json.load(f)
    except OSError as e:
        raise DataError(f"{path}: cannot read: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: not valid JSON ({e})") from None


def require_keys(obj: Any, keys: tuple[str, ...], where: str, what: str) -> None:
    missing = [k for k in keys if not isinstance(obj, dict) or k not in obj]
    if missing:
        raise DataError(f"{where}: not {what}: missing {', '.join(map(repr, missing))}")


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def parse_points(value: Any, where: str) -> list[list[float]]:
    """``[[x, y], ...]`` or flat ``[x1, y1, x2, y2, ...]`` -> ``[[x, y], ...]`` floats; DataError
    otherwise."""
    flat = isinstance(value, list) and all(map(is_number, value))
    pairs = [value[i : i + 2] for i in range(0, len(value), 2)] if flat else value
    if not isinstance(pairs, list) or not all(isinstance(p, (list, tuple)) and len(p) == 2
                                              and all(map(is_number, p)) for p in pairs):
        raise DataError(f"{where}: expected points [[x, y], ...] or [x1, y1, ...], got "
                        f"{json.dumps(value)[:80]}")
    return [[float(x), float(y)] for x, y in pairs]


def plain_points(points: Any) -> list[list[int | float]]:
    """Points as JSON numbers: integers stay integers, others are rounded to 0.01 px."""
    return [[_json_number(float(c)) for c in p] for p in points]


def _json_number(value: float) -> int | float:
    """``value`` rounded to 0.01, as an int when that is whole (181.999 -> 182, not 182.0)."""
    rounded = round(value, 2)
    return int(rounded) if rounded.is_integer() else rounded


def add_region(anns: list[dict], points: list, text: Any, ignore: bool, where: str, summary: Summary) -> bool:
    """Append a text region (True), or count a polygon that cannot be one as skipped (False)."""
    from textdet.geometry import polygon_area

    if len(points) < 3 or polygon_area(points) <= 0:
        summary.skip(where, "polygon with fewer than 3 points or zero area")
        return False
    text = IGNORE if ignore or text == IGNORE else ("" if text is None else str(text))
    anns.append({"transcription": text, "points": plain_points(points)})
    summary.regions += 1
    summary.ignored += text in IGNORE_TEXTS  # "*" too: training ignores both
    return True
