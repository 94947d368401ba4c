"""Read ICDAR2015 GT / result files (folder or zip; lines in ``textdet.icdar``) or MindOCR label files (GT dicts,
``###``/``*`` don't-care, or point lists for predictions), and score them; images pair by stem (``img_12``)."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from textdet.errors import DataError
from textdet.icdar import parse_gt, parse_result
from textdet.metrics.det_metric import DetMetric

ICDAR_IGNORE = ("###",)
LABEL_IGNORE = ("###", "*")

# id -> (polys, ignore tags); id -> (polys, where the detections came from, for messages)
GtTable = dict[str, tuple[list[np.ndarray], np.ndarray]]
PredTable = dict[str, tuple[list[np.ndarray], str]]


def _image_id(name: str, prefix: str) -> str:
    stem = Path(name).stem
    return stem[len(prefix) :] if stem.startswith(prefix) else stem


def _text_files(path: Path, prefix: str) -> Iterator[tuple[str, str]]:
    """(display name, text) of every ``{prefix}*.txt`` in a folder or zip archive, sorted by name."""
    if path.is_dir():
        entries = sorted(p for p in path.iterdir() if p.name.startswith(prefix) and p.suffix == ".txt")
        for p in entries:
            yield str(p), _decode(p.read_bytes(), str(p))
        return
    with zipfile.ZipFile(path) as zf:
        names = sorted(n for n in zf.namelist() if Path(n).name.startswith(prefix) and n.endswith(".txt"))
        for n in names:
            yield f"{path}:{n}", _decode(zf.read(n), f"{path}:{n}")


def _decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataError(f"{where}: not UTF-8 text ({e})") from e


def parse_icdar_gt(text: str, where: str) -> tuple[list[np.ndarray], np.ndarray, list[str]]:
    """Parse a ``gt_img_N.txt`` body -> (polys (4, 2) float32, ignore tags bool, transcriptions)."""
    rows = parse_gt(text, where)
    texts = [t for _, t in rows]
    return [np.asarray(q, np.float32) for q, _ in rows], np.array([t in ICDAR_IGNORE for t in texts], bool), texts


def parse_icdar_result(text: str, where: str) -> tuple[list[np.ndarray], list[float]]:
    """Parse a ``res_img_N.txt`` body -> (polys (4, 2) float32, confidences; NaN where absent)."""
    rows = parse_result(text, where)
    return [np.asarray(q, np.float32) for q, _ in rows], [s for _, s in rows]


def _label_entries(path: Path) -> Iterator[tuple[str, Any, str]]:
    """(image id, parsed json, 'file line N') of every line of a MindOCR label file."""
    text = _decode(path.read_bytes(), str(path))
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{line_no}"
        name, sep, payload = line.partition("\t")
        if not sep:
            raise DataError(f"{where}: expected 'image_path<TAB>json', found no tab")
        try:
            items = json.loads(payload)
        except json.JSONDecodeError as e:
            raise DataError(f"{where}: invalid JSON ({e.msg} at column {e.colno})") from e
        yield _image_id(name.strip(), ""), items, where


def _points(value: Any, where: str) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float32) if isinstance(value, list) else np.zeros(0)
    if arr.ndim != 2 or arr.shape[1] != 2 or arr.shape[0] < 3:
        raise DataError(f"{where}: expected points [[x, y], ...] with at least 3 points, got {value!r}")
    return arr


def _load(path: str | Path, what: str, prefix: str, from_label: Callable, from_text: Callable) -> dict:
    """Per image id: ``from_label`` of each label-file line, or ``from_text`` of each ``{prefix}*.txt`` (folder/zip)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such {what} file or folder")
    if path.is_file() and not zipfile.is_zipfile(path):
        rows = ((key, from_label(items, where), where) for key, items, where in _label_entries(path))
    else:
        rows = ((_image_id(where.rsplit(":", 1)[-1], prefix), from_text(text, where), where)
                for where, text in _text_files(path, prefix))
    table: dict = {}
    for key, value, where in rows:
        if key in table:
            raise DataError(f"{where}: image id {key!r} appears twice")
        table[key] = value
    return table


def _gt_items(items: Any, where: str) -> tuple[list[np.ndarray], np.ndarray]:
    if not isinstance(items, list) or not all(isinstance(i, dict) and "points" in i for i in items):
        raise DataError(f"{where}: expected a list of {{'transcription', 'points'}} objects")
    ignore = np.array([i.get("transcription", "") in LABEL_IGNORE for i in items], dtype=bool)
    return [_points(i["points"], where) for i in items], ignore


def _pred_items(items: Any, where: str) -> tuple[list[np.ndarray], str]:
    if not isinstance(items, list):
        raise DataError(f"{where}: expected a list of polygons")
    return [_points(i.get("points") if isinstance(i, dict) else i, where) for i in items], where


def load_gt(path: str | Path) -> GtTable:
    """GT per image id from a folder / zip of ``gt_*.txt`` files, or from a MindOCR label file."""
    return _load(path, "GT", "gt_", _gt_items, _gt_file_entry)


def _gt_file_entry(text: str, where: str) -> tuple[list[np.ndarray], np.ndarray]:
    """A ``gt_*.txt`` file's (polygons, ignore tags)."""
    polys, ignore = parse_icdar_gt(text, where)[:2]
    return polys, ignore


def load_preds(path: str | Path) -> PredTable:
    """Detections per image id from a folder / zip of ``res_*.txt`` files, or a MindOCR-style result file."""
    return _load(path, "result", "res_", _pred_items, _result_file_entry)


def _result_file_entry(text: str, where: str) -> tuple[list[np.ndarray], str]:
    """A ``res_*.txt`` file's (polygons, where it came from)."""
    polys = parse_icdar_result(text, where)[0]
    return polys, where


def evaluate_files(gt: str | Path, pred: str | Path, iou_thresh: float = 0.5, area_precision_constraint: float = 0.5,
                   protocol: str = "icdar15") -> dict[str, Any]:
    """Score detections against GT with :class:`DetMetric` (``protocol``: icdar15, deteval or tiou): its scores plus
    care counts ``tp`` (recall credit), ``n_gt``, ``n_det``, ``images``; detections of an image without GT fail."""
    gts, preds = load_gt(gt), load_preds(pred)
    orphans = sorted(set(preds) - set(gts))
    if orphans:
        raise DataError(f"{preds[orphans[0]][1]}: detections for image {orphans[0]!r} which has no GT in {gt}")
    metric = DetMetric(iou_thresh=iou_thresh, area_precision_constraint=area_precision_constraint, protocol=protocol)
    for key in sorted(gts):
        polys, ignore = gts[key]
        metric.update([preds.get(key, ([], ""))[0]], [polys], [ignore])
    tp, _, n_det, n_gt = (float(c) for c in metric.counts())
    return {**metric.compute(), "tp": int(tp) if tp.is_integer() else round(tp, 4), "n_gt": int(n_gt),
            "n_det": int(n_det), "images": len(gts), "protocol": protocol}
