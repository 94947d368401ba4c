"""ICDAR2015 text files, shared by the label converter (``data.labels``) and the scorer (``metrics.icdar_io``):
``gt_img_N.txt`` lines ``x1,y1,...,x4,y4,transcription`` (commas allowed in it, ``###`` don't-care) and
``res_img_N.txt`` lines ``x1,...,y4[,confidence]``. BOM, CRLF and blank lines are fine; a bad line is a DataError
naming ``where:line``."""

from __future__ import annotations

import math

from textdet.errors import DataError


def _lines(text: str, where: str):
    # Split on "\n" only: str.splitlines() also splits on \x1c, \x85, U+2028, which may stand in a transcription.
    for line_no, line in enumerate(text.removeprefix("\ufeff").split("\n"), 1):
        if line.strip():
            yield f"{where}:{line_no}", line.strip()


def _quad(fields: list[str], where: str) -> list[list[int | float]]:
    """Eight coordinates -> four [x, y] points; integers stay ints (label files keep them as written)."""
    try:
        values = [float(f) for f in fields]
    except ValueError:
        raise DataError(f"{where}: expected 8 numbers x1,y1,...,x4,y4, got {','.join(fields)!r}") from None
    if not all(math.isfinite(v) for v in values):
        raise DataError(f"{where}: NaN or infinite coordinate in {','.join(fields)!r}")
    nums = [int(v) if f.strip().lstrip("+-").isdigit() else v for v, f in zip(values, fields, strict=True)]
    return [nums[i : i + 2] for i in range(0, 8, 2)]


def parse_gt(text: str, where: str) -> list[tuple[list[list[int | float]], str]]:
    """A ``gt_img_N.txt`` body -> [(four [x, y] points, transcription)]."""
    out = []
    for at, line in _lines(text, where):
        fields = line.split(",", 8)
        if len(fields) < 9:
            raise DataError(f"{at}: expected x1,y1,...,x4,y4,transcription, got {line!r}")
        out.append((_quad(fields[:8], at), fields[8]))
    return out


def parse_result(text: str, where: str) -> list[tuple[list[list[int | float]], float]]:
    """A ``res_img_N.txt`` body -> [(four [x, y] points, confidence; NaN where absent)]."""
    out = []
    for at, line in _lines(text, where):
        fields = line.split(",")
        if len(fields) not in (8, 9):
            raise DataError(f"{at}: expected 8 coordinates and an optional confidence, got {line!r}")
        try:
            score = float(fields[8]) if len(fields) == 9 else float("nan")
        except ValueError:
            raise DataError(f"{at}: confidence {fields[8]!r} is not a number") from None
        out.append((_quad(fields[:8], at), score))
    return out
