"""``textdet convert sroie`` and ``textdet convert copiste`` (data/public_sets.py): public data sets laid
out as MindOCR's detection data, on hand-made clones of their repositories (the "other real photos" of
docs/RESULTS.md)."""

from __future__ import annotations

import json
import os

import cv2
import numpy as np
import pytest

from textdet.cli import main
from textdet.data.public_sets import evenly_spaced

ALTO = """<?xml version="1.0" encoding="UTF-8"?>
<alto xmlns="http://www.loc.gov/standards/alto/ns-v4#">
  <Description><MeasurementUnit>pixel</MeasurementUnit>
    <sourceImageInformation><fileName>{name}</fileName></sourceImageInformation></Description>
  <Layout><Page><PrintSpace><TextBlock>
    <TextLine ID="l1"><Shape><Polygon POINTS="100 200 1000 210 990 400 110 390"/></Shape>
      <String CONTENT="Le Mauroux"/></TextLine>
  </TextBlock></PrintSpace></Page></Layout>
</alto>
"""


def read_layout(out: str) -> tuple[list[list[str]], list[str]]:
    """The train split's (name, labels JSON) rows and the val split's names."""
    with open(os.path.join(out, "train_gt.txt"), encoding="utf-8") as f:
        train = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    with open(os.path.join(out, "test_gt.txt"), encoding="utf-8") as f:
        val = [line.split("\t")[0] for line in f if line.strip()]
    return train, val


def sroie_clone(root: str) -> None:
    """Four receipts as the repository stores them: data/img/NNN.jpg and data/box/NNN.csv."""
    os.makedirs(os.path.join(root, "data", "img"))
    os.makedirs(os.path.join(root, "data", "box"))
    for n, (h, w) in enumerate([(100, 60), (3200, 800), (100, 60), (100, 60)]):
        cv2.imwrite(os.path.join(root, "data", "img", f"{n:03d}.jpg"), np.full((h, w, 3), 255, np.uint8))
        rows = ["40,50,10,50,10,20,40,20,TOTAL : 9.00", "1,2,5,2,5,8,1,8,"]  # from the bottom-right; no text
        with open(os.path.join(root, "data", "box", f"{n:03d}.csv"), "w", encoding="utf-8") as f:
            f.write("\ufeff" + "\n".join(rows) + "\n")


def copiste_clone(root: str) -> None:
    """Three handwritten pages and one with the printed notice, as the repository stores them."""
    os.makedirs(os.path.join(root, "jpg"))
    os.makedirs(os.path.join(root, "alto"))
    for name in ("wikitexte_0001.jpg", "wikitexte_0002.jpg", "wikitexte_0003.jpg", "imp_wikitexte_0004.jpg"):
        cv2.imwrite(os.path.join(root, "jpg", name), np.full((2200, 1700, 3), 255, np.uint8))
        with open(os.path.join(root, "alto", name.replace(".jpg", ".xml")), "w", encoding="utf-8") as f:
            f.write(ALTO.format(name=name))


def test_sroie_alternates_splits_orders_points_and_shrinks_large_receipts(tmp_path, capsys):
    src, out = str(tmp_path / "sroie"), str(tmp_path / "DOC")
    sroie_clone(src)
    assert main(["convert", "sroie", src, "--out", out, "--max-side", "1600"]) == 0
    assert "train: 2 receipts, 4 boxes" in capsys.readouterr().out
    train, val = read_layout(out)
    assert [name for name, _ in train] == ["000.jpg", "002.jpg"] and val == ["001.jpg", "003.jpg"]
    labels = json.loads(train[0][1])
    # clockwise on screen from the top-left corner; the empty transcript is "do not care"
    assert labels == [{"transcription": "TOTAL : 9.00", "points": [[10, 20], [40, 20], [40, 50], [10, 50]]},
                      {"transcription": "###", "points": [[1, 2], [5, 2], [5, 8], [1, 8]]}]
    shrunk = cv2.imread(os.path.join(out, "val", "images", "001.jpg"))
    assert shrunk.shape[:2] == (1600, 400)  # 3200x800 at half size
    first = json.loads(open(os.path.join(out, "test_gt.txt"), encoding="utf-8").readline().split("\t")[1])[0]
    assert first["points"] == [[5, 10], [20, 10], [20, 25], [5, 25]]


def test_copiste_takes_handwritten_pages_alternately_and_shrinks_them_with_their_lines(tmp_path):
    src, out = str(tmp_path / "copiste"), str(tmp_path / "HW")
    copiste_clone(src)
    assert main(["convert", "copiste", src, "--out", out, "--max-side", "1100"]) == 0
    train, val = read_layout(out)
    assert [name for name, _ in train] == ["wikitexte_0001.jpg", "wikitexte_0003.jpg"]
    assert val == ["wikitexte_0002.jpg"]  # the imp_ page, with its unlabelled printed notice, is left out
    # 2200 x 1700 at half size: every coordinate halves
    assert cv2.imread(os.path.join(out, "val", "images", "wikitexte_0002.jpg")).shape[:2] == (1100, 850)
    assert json.loads(train[0][1]) == [{"transcription": "Le Mauroux",
                                        "points": [[50, 100], [500, 105], [495, 200], [55, 195]]}]


def test_a_folder_that_is_not_a_clone_is_named(tmp_path, capsys):
    assert main(["convert", "sroie", str(tmp_path), "--out", str(tmp_path / "DOC")]) == 2
    assert "data/img: not found; give a clone of zzzDavid/ICDAR-2019-SROIE" in capsys.readouterr().err


ALL = ["a", "b", "c", "d"]


@pytest.mark.parametrize("num, expected", [(2, ["a", "c"]), (4, ALL), (9, ALL)])
def test_evenly_spaced_takes_every_other_name_or_all_of_them(num, expected):
    assert evenly_spaced(ALL, num) == expected
