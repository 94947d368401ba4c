"""MindOCR/PaddleOCR label files (``path<TAB>[{"transcription", "points"}, ...]``, or one space before the list),
read without stopping at a bad line (each is a :class:`Problem` naming file and line); the ICDAR2015 converter."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from textdet.errors import DataError
from textdet.geometry import polygon_area
from textdet.icdar import parse_gt

# Polygons whose area is below this (in square pixels) are treated as zero-area: collinear
# points written as floats rarely give an exact 0.
_MIN_AREA = 1e-6


@dataclass
class LabelRecord:
    """One usable label line: ``rel_path``, validated ``annotations``, and ``label_file``:``line_no`` for messages."""

    rel_path: str
    annotations: list[dict] = field(default_factory=list)
    label_file: str = ""
    line_no: int = 0


@dataclass
class Problem:
    """Something wrong in a label file: ``severity`` "error" (line skipped) or "warning" (one annotation dropped
    or repaired, the rest of the line kept)."""

    file: str
    line_no: int
    message: str
    severity: str
    repaired: bool = False  # a "warning" whose annotation was mended and kept, not dropped

    def __str__(self) -> str:
        return f"{self.file}:{self.line_no}: {self.severity}: {self.message}"


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_annotation(ann: object) -> tuple[dict | None, str | None, str | None]:
    """Validate one annotation; return (clean annotation or None, drop reason, repair note)."""
    if not isinstance(ann, dict):
        return None, f"expected an object with 'transcription' and 'points', got {type(ann).__name__}", None
    missing = [k for k in ("transcription", "points") if k not in ann]
    if missing:
        return None, f"missing key(s) {', '.join(repr(k) for k in missing)}", None
    text, repair = ann["transcription"], None
    if not isinstance(text, str):
        repair = f"transcription {text!r} is not a string; converted with str()"
        text = "" if text is None else str(text)
    pts = ann["points"]
    if not isinstance(pts, list) or not all(isinstance(p, list) and len(p) == 2 for p in pts):
        return None, f"'points' must be a list of [x, y] pairs, got {json.dumps(pts)[:80]}", None
    if len(pts) < 3:
        return None, f"a polygon needs at least 3 points, got {len(pts)}", None
    if not all(_is_number(v) for p in pts for v in p):
        return None, f"non-numeric coordinate in {json.dumps(pts)[:80]}", None
    if not all(math.isfinite(v) for p in pts for v in p):
        return None, "NaN or infinite coordinate", None
    unique = [p for i, p in enumerate(pts) if p != pts[i - 1]] or pts[:1]  # consecutive repeats (cyclic)
    if len(unique) < len(pts):
        repair = f"{len(pts) - len(unique)} repeated point(s) removed"
        if len(unique) < 3:
            return None, f"a polygon needs at least 3 distinct points, got {len(unique)}", None
        pts = unique
    crossing = " (self-intersecting)" if _self_intersects(np.asarray(pts, dtype=np.float64)) else ""
    if polygon_area(np.asarray(pts, dtype=np.float64)) < _MIN_AREA:
        return None, f"zero-area{crossing} polygon {json.dumps(pts)[:80]}", None
    if crossing:  # MindOCR trains on these (some ICDAR quads are drawn in a crossed order): kept
        repair = f"self-intersecting polygon {json.dumps(pts)[:80]} kept as written"
    return {"transcription": text, "points": [[p[0], p[1]] for p in pts]}, None, repair


# Up to this many points a loop over the edge pairs beats numpy's fixed cost (a quad: 14 against 90 us).
_FEW_POINTS = 5


def _self_intersects(p: np.ndarray) -> bool:
    """Do two non-adjacent edges of the closed polygon ``p`` (N, 2) properly cross?

    Quads take the loop; outlines take the matrix of every edge pair: a handwritten line's outline from
    eScriptorium has about 70 points, ~2,400 pairs, which the loop took 20 ms to test.
    """
    return _crossing_by_loop(p) if len(p) <= _FEW_POINTS else _crossing_by_matrix(p)


def _crossing_by_loop(p: np.ndarray) -> bool:
    n = len(p)

    def side(a, b, c) -> float:
        return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])

    edges = ((p[i], p[(i + 1) % n], p[j], p[(j + 1) % n]) for i in range(n) for j in range(i + 2, n - (i == 0)))
    return any(side(a, b, c) * side(a, b, d) < 0 and side(c, d, a) * side(c, d, b) < 0 for a, b, c, d in edges)


def _crossing_by_matrix(p: np.ndarray) -> bool:
    """The same test as ``_crossing_by_loop``, on all edge pairs at once (the same arithmetic, so the same
    answers)."""
    n = len(p)
    ends = np.concatenate((p[1:], p[:1]))
    step_x = (ends[:, 0] - p[:, 0])[:, None]
    step_y = (ends[:, 1] - p[:, 1])[:, None]
    start_x = p[:, 0, None]
    start_y = p[:, 1, None]
    # [i, j]: the signed side of edge i on which the start (end) of edge j lies
    start_side = step_x * (p[:, 1] - start_y) - step_y * (p[:, 0] - start_x)
    end_side = step_x * (ends[:, 1] - start_y) - step_y * (ends[:, 0] - start_x)
    ends_apart = start_side * end_side < 0
    crossing = np.triu(ends_apart & ends_apart.T, 2)  # each pair once, neighbouring edges left out
    crossing[0, n - 1] = False  # the last edge touches the first
    return bool(crossing.any())


def _split_line(line: str) -> tuple[str, object] | str:
    """Split a label line into (path, parsed JSON), or return an error message."""
    if "\t" in line:
        path, _, annot = line.partition("\t")
        try:
            return path.strip(), json.loads(annot)
        except json.JSONDecodeError as e:
            return f"annotation text is not valid JSON ({e.msg} at column {e.colno + len(path) + 1})"
    # No tab: the separator is a space right before the JSON list. Paths may contain spaces (and
    # even " ["), so try each candidate split from the left until the rest parses.
    for m in re.finditer(r" +(?=\[)", line):
        try:
            return line[: m.start()].strip(), json.loads(line[m.end() :])
        except json.JSONDecodeError:
            continue
    return "expected 'image_path<TAB>[json annotations]' (or a single space before the JSON list)"


def parse_label_line(line: str, label_file: str, line_no: int) -> tuple[LabelRecord | None, list[Problem]]:
    """Parse one label line -> ``(record, problems)``; record None for a blank line or an unusable one (an "error").
    Dropped or repaired annotations give "warning" problems naming the index (an empty list is a valid image)."""
    line = line.rstrip("\r\n")
    if not line.strip():
        return None, []
    split = _split_line(line)
    path, anns = split if not isinstance(split, str) else ("", None)
    error = (split if isinstance(split, str) else "empty image path" if not path
             else f"image path {path!r} leaves the data folder; write it relative to data_dir"
             if os.path.isabs(path) or os.path.normpath(path).split(os.sep)[0] == ".."
             else f"annotations must be a JSON list of objects, got {type(anns).__name__}"
             if not isinstance(anns, list) else None)
    if error:
        return None, [Problem(label_file, line_no, error, "error")]
    clean, problems = [], []
    for i, ann in enumerate(anns):
        good, reason, repair = _check_annotation(ann)
        if good is None:
            problems.append(Problem(label_file, line_no, f"annotation {i}: {reason}; dropped", "warning"))
            continue
        if repair:
            mended = Problem(label_file, line_no, f"annotation {i}: {repair}", "warning", repaired=True)
            problems.append(mended)
        clean.append(good)
    return LabelRecord(path, clean, label_file, line_no), problems


def _read_one(path: str) -> tuple[list[LabelRecord], list[Problem]]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise DataError(f"label file not found: {path}") from None
    except OSError as e:
        raise DataError(f"cannot read label file {path}: {e.strerror or e}") from None
    records, problems = [], []
    # Split on b"\n" only: str.splitlines() also splits on \x1c, \x85, U+2028, which may stand in a transcription.
    for line_no, raw in enumerate(data.removeprefix(b"\xef\xbb\xbf").split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            problems.append(Problem(path, line_no, f"not valid UTF-8 (byte {e.start})", "error"))
            continue
        rec, probs = parse_label_line(line, path, line_no)
        problems.extend(probs)
        if rec is not None:
            records.append(rec)
    return records, problems


def _sample(records: list[LabelRecord], ratio: float, rng: np.random.Generator) -> list[LabelRecord]:
    """MindOCR's ``sample_ratio``: keep ``round(n * ratio)`` records; above 1, whole copies plus a subset."""
    n = len(records)
    target = round(n * ratio)
    if n == 0 or target == n:
        return list(records)
    full, rest = divmod(target, n)
    # File order is kept (indices sorted) so a subsample reads like the file; the loader shuffles.
    picked = np.sort(rng.choice(n, size=rest, replace=False)) if rest else np.empty(0, dtype=np.int64)
    return records * full + [records[int(i)] for i in picked]


def check_dataset_paths(dataset_root: str, data_dir: str, label_file: str | list[str] | None,
                        prefix: str = "dataset") -> tuple[str, list[str]]:
    """The image folder and label files of a data set, or a DataError naming the config keys to fix (torch-free)."""
    def missing(what: str, path: str, key: str, value: str) -> DataError:
        return DataError(f"{what} not found: {path} (from {prefix}.dataset_root={dataset_root!r} and "
                         f"{prefix}.{key}={value!r}); fix the path, e.g. -o {prefix}.dataset_root=DIR")

    image_dir = os.path.join(dataset_root, data_dir)
    if not os.path.isdir(image_dir):
        raise missing("image folder", image_dir, "data_dir", data_dir)
    if not label_file:
        raise DataError(f"{prefix}.label_file is empty: name the label file(s) of this data set")
    files = [label_file] if isinstance(label_file, str) else list(label_file)
    for f in files:
        if not os.path.isfile(os.path.join(dataset_root, f)):
            raise missing("label file", os.path.join(dataset_root, f), "label_file", f)
    return image_dir, files


def read_label_files(
    label_files: str | Sequence[str], dataset_root: str = "", sample_ratio: float | Sequence[float] = 1.0,
    rng_seed: int = 0,
) -> tuple[list[LabelRecord], list[Problem]]:
    """``(records, problems)`` of label files (relative to ``dataset_root``); ``sample_ratio`` (one, or one per file)
    keeps ``round(n * ratio)`` records (see ``_sample``)."""
    files = [label_files] if isinstance(label_files, (str, os.PathLike)) else list(label_files)
    ratios = [sample_ratio] * len(files) if _is_number(sample_ratio) else list(sample_ratio)
    if len(ratios) != len(files):
        raise ValueError(f"sample_ratio: expected 1 or {len(files)} values (one per label file), got {len(ratios)}")
    for r in ratios:
        if not _is_number(r) or not r > 0 or not math.isfinite(r):
            raise ValueError(f"sample_ratio: expected a positive number, got {r!r}")
    rng = np.random.default_rng(rng_seed)
    records, problems = [], []
    for name, ratio in zip(files, ratios):  # noqa: B905 (lengths checked above; strict= needs 3.10)
        recs, probs = _read_one(os.path.join(dataset_root, os.fspath(name)))
        records.extend(_sample(recs, float(ratio), rng))
        problems.extend(probs)
    return records, problems


def _plain_number(v: object) -> int | float:
    """numpy scalars -> Python numbers, so json.dumps accepts them."""
    if isinstance(v, (bool, np.bool_)):
        raise ValueError(f"expected a number, got {v!r}")
    return int(v) if isinstance(v, (int, np.integer)) else float(v)


def format_label_line(rel_path: str, annotations: Sequence[dict]) -> str:
    """One label line (no newline), ``rel_path<TAB>[...]``, non-ASCII kept, numpy numbers as Python numbers."""
    if not rel_path or any(c in rel_path for c in "\t\r\n"):
        raise ValueError(f"image path must be non-empty and free of tabs/newlines, got {rel_path!r}")
    anns = [{"transcription": str(a["transcription"]),
             "points": [[_plain_number(x), _plain_number(y)] for x, y in a["points"]]} for a in annotations]
    return f"{rel_path}\t{json.dumps(anns, ensure_ascii=False)}"


_GT_NAME = re.compile(r"^gt_img_(\d+)\.txt$")


def convert_icdar15(gt_dir: str, out_file: str, image_prefix: str = "", image_ext: str = ".jpg") -> int:
    """Convert raw ICDAR2015 ``gt_img_N.txt`` files (BOM fine) into one MindOCR label file; returns the image count.
    Lines are ``{image_prefix}img_N{image_ext}<TAB>[...]``, sorted by N; a prefix without trailing ``/`` is a folder."""
    if not os.path.isdir(gt_dir):
        raise DataError(f"ICDAR2015 ground-truth folder not found: {gt_dir}")
    numbered = []  # (N, file name) of every gt_img_N.txt
    for name in os.listdir(gt_dir):
        match = _GT_NAME.match(name)
        if match:
            numbered.append((int(match.group(1)), name))
    numbered.sort()
    if not numbered:
        raise DataError(f"no gt_img_N.txt files in {gt_dir}")
    prefix = image_prefix if not image_prefix or image_prefix.endswith("/") else image_prefix + "/"
    lines = []
    for n, name in numbered:
        with open(os.path.join(gt_dir, name), encoding="utf-8-sig") as f:
            rows = parse_gt(f.read(), os.path.join(gt_dir, name))
        anns = [{"transcription": text, "points": points} for points, text in rows]
        lines.append(format_label_line(f"{prefix}img_{n}{image_ext}", anns))
    os.makedirs(os.path.dirname(os.path.abspath(out_file)), exist_ok=True)
    with open(out_file, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    return len(lines)
