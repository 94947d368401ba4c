"""benchmarks/layout_sroie.py: SROIE receipts into MindOCR's layout (the "other real photos" check)."""

from __future__ import annotations

import json
import os

import cv2
import numpy as np

from conftest import run_layout


def _clone(root: str) -> None:
    """Four receipts as the repository stores them: data/img/NNN.jpg and data/box/NNN.csv."""
    os.makedirs(os.path.join(root, "data", "img"))
    os.makedirs(os.path.join(root, "data", "box"))
    for n, (h, w) in enumerate([(100, 60), (3200, 800), (100, 60), (100, 60)]):
        cv2.imwrite(os.path.join(root, "data", "img", f"{n:03d}.jpg"), np.full((h, w, 3), 255, np.uint8))
        rows = ["40,50,10,50,10,20,40,20,TOTAL : 9.00", "1,2,5,2,5,8,1,8,"]  # from the bottom-right; no text
        with open(os.path.join(root, "data", "box", f"{n:03d}.csv"), "w", encoding="utf-8") as f:
            f.write("\ufeff" + "\n".join(rows) + "\n")


def test_layout_alternates_splits_orders_points_and_shrinks_large_receipts(tmp_path):
    src, out = str(tmp_path / "sroie"), str(tmp_path / "DOC")
    _clone(src)
    train, val = run_layout("layout_sroie", src, out, max_side=1600)
    assert [name for name, _ in train] == ["000.jpg", "002.jpg"] and val == ["001.jpg", "003.jpg"]
    labels = json.loads(train[0][1])
    # clockwise on screen from the top-left corner; the empty transcript is "do not care"
    assert labels == [{"transcription": "TOTAL : 9.00", "points": [[10, 20], [40, 20], [40, 50], [10, 50]]},
                      {"transcription": "###", "points": [[1, 2], [5, 2], [5, 8], [1, 8]]}]
    shrunk = cv2.imread(os.path.join(out, "val", "images", "001.jpg"))
    assert shrunk.shape[:2] == (1600, 400)  # 3200x800 at half size
    first = json.loads(open(os.path.join(out, "test_gt.txt"), encoding="utf-8").readline().split("\t")[1])[0]
    assert first["points"] == [[5, 10], [20, 10], [20, 25], [5, 25]]
