"""benchmarks/layout_copiste.py: handwritten pages (ALTO lines) into MindOCR's layout (the handwriting part of
the "other real photos" check)."""

from __future__ import annotations

import json
import os

import cv2
import numpy as np

from conftest import run_layout

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


def _clone(root: str) -> None:
    """Three handwritten pages and one with the printed notice, as the repository stores them."""
    os.makedirs(os.path.join(root, "jpg"))
    os.makedirs(os.path.join(root, "alto"))
    for name in ("wikitexte_0001.jpg", "wikitexte_0002.jpg", "wikitexte_0003.jpg", "imp_wikitexte_0004.jpg"):
        cv2.imwrite(os.path.join(root, "jpg", name), np.full((2200, 1700, 3), 255, np.uint8))
        with open(os.path.join(root, "alto", name.replace(".jpg", ".xml")), "w", encoding="utf-8") as f:
            f.write(ALTO.format(name=name))


def test_layout_takes_handwritten_pages_alternately_and_shrinks_them_with_their_lines(tmp_path):
    src, out = str(tmp_path / "copiste"), str(tmp_path / "HW")
    _clone(src)
    train, val = run_layout("layout_copiste", src, out, max_side=1100)
    assert [name for name, _ in train] == ["wikitexte_0001.jpg", "wikitexte_0003.jpg"]
    assert val == ["wikitexte_0002.jpg"]  # the imp_ page, with its unlabelled printed notice, is left out
    # 2200 x 1700 at half size: every coordinate halves
    assert cv2.imread(os.path.join(out, "val", "images", "wikitexte_0002.jpg")).shape[:2] == (1100, 850)
    assert json.loads(train[0][1]) == [{"transcription": "Le Mauroux",
                                        "points": [[50, 100], [500, 105], [495, 200], [55, 195]]}]
