"""``curves.png`` from ``metrics.jsonl``, drawn with OpenCV so no plotting library is required."""

from __future__ import annotations

import json
import os

import cv2
import numpy as np

from textdet.errors import TextdetError

_PANELS = (("loss", "train loss"), ("f-score", "eval f-score / recall / precision"), ("lr", "learning rate"),
           ("img_per_s", "train img/s"))
_EXTRA = {"f-score": ("recall", "precision")}
_COLOURS = ((200, 80, 20), (30, 150, 30), (20, 20, 200))


def read_metrics(run_dir: str) -> list[dict]:
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        raise TextdetError(f"{path} not found: plot needs a run folder written by `textdet train`")
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _panel(records: list[dict], keys: tuple[str, ...], title: str, w: int = 480, h: int = 300) -> np.ndarray:
    img = np.full((h, w, 3), 255, np.uint8)
    cv2.putText(img, title, (10, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (0, 0, 0), 1, cv2.LINE_AA)
    series = [[(r["epoch"], r[k]) for r in records if isinstance(r.get(k), (int, float))] for k in keys]
    pts = [p for s in series for p in s]
    x0, y0, x1, y1 = 50, 35, w - 15, h - 30
    cv2.rectangle(img, (x0, y0), (x1, y1), (180, 180, 180), 1)
    if not pts:
        cv2.putText(img, "no data", (x0 + 10, y0 + 30), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (120, 120, 120), 1)
        return img
    ex, ey = zip(*pts, strict=True)
    lo_x, hi_x = min(ex), max(max(ex), min(ex) + 1)
    lo_y, hi_y = min(ey), max(ey)
    if hi_y - lo_y < 1e-12:
        lo_y, hi_y = lo_y - 0.5, hi_y + 0.5
    for text, yv in ((f"{hi_y:.3g}", y0 + 5), (f"{lo_y:.3g}", y1)):
        cv2.putText(img, text, (2, yv), cv2.FONT_HERSHEY_SIMPLEX, 0.35, (80, 80, 80), 1, cv2.LINE_AA)
    cv2.putText(img, f"epoch {lo_x}..{hi_x}", (x0, h - 10), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (80, 80, 80), 1)
    for s, key, colour in zip(series, keys, _COLOURS, strict=False):
        if not s:
            continue
        poly = np.array([[x0 + (x - lo_x) / (hi_x - lo_x) * (x1 - x0), y1 - (y - lo_y) / (hi_y - lo_y) * (y1 - y0)]
                         for x, y in s], np.int32)
        cv2.polylines(img, [poly], False, colour, 2, cv2.LINE_AA)
        for p in poly:
            cv2.circle(img, tuple(int(v) for v in p), 3, colour, -1)
        if len(keys) > 1:
            cv2.putText(img, key, (x1 - 90, y0 + 15 + 15 * keys.index(key)), cv2.FONT_HERSHEY_SIMPLEX, 0.4, colour, 1)
    return img


def plot_run(run_dir: str) -> str:
    """Write ``run_dir/curves.png`` (loss, f-score/recall/precision, LR, throughput per epoch)."""
    records = read_metrics(run_dir)
    panels = [_panel(records, (k, *_EXTRA.get(k, ())), title) for k, title in _PANELS]
    grid = np.vstack([np.hstack(panels[:2]), np.hstack(panels[2:])])
    path = os.path.join(run_dir, "curves.png")
    cv2.imwrite(path, grid)
    return path
