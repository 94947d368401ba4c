"""benchmarks/error_kinds.py: detections and words sorted into kinds, on hand-made boxes."""

from __future__ import annotations

import json

import pytest

from conftest import box, load_benchmark
from textdet.metrics.det_metric import to_polygon


@pytest.fixture(scope="module")
def error_kinds():
    return load_benchmark("error_kinds")


# Two words that count, 10 px high, 4 px apart, and a ### region.
WORDS = [box(0, 0, 10, 10), box(14, 0, 24, 10), box(40, 0, 50, 10)]
COUNTS = [True, True, False]

# detection -> (kind, words it touches): IoUs worked by hand on the 10x10 words.
CASES = [
    (box(0, 0, 10, 10), ("matched", [0])),  # IoU 1
    (box(0, 0, 24, 10), ("merged", [0, 1])),  # IoU 100/240 with each word, covers both whole
    (box(41, 1, 49, 9), ("ignored", [])),  # inside the ### region
    (box(0, 0, 10, 25), ("loose", [0])),  # IoU 100/250 = 0.4
    (box(0, 0, 2, 10), ("fragment", [])),  # IoU 20/100 = 0.2, not above it; all of it inside word 0
    (box(60, 0, 70, 10), ("background", [])),
]


@pytest.mark.parametrize("points, expected", CASES)
def test_detection_kind(error_kinds, points, expected):
    words = [to_polygon(w) for w in WORDS]
    assert error_kinds.detection_kind(to_polygon(points), words, COUNTS) == expected


class FixedDetector:
    """Stands in for textdet's Detector: the same boxes for every image."""

    def __init__(self, polys: list) -> None:
        self.polys = polys

    def __call__(self, path: str) -> dict:
        return {"polys": self.polys, "scores": [1.0] * len(self.polys)}


def test_sort_errors_counts_words_and_recall_by_height(error_kinds, tmp_path):
    """Word 0 found, word 1 only inside a merged box, a 30 px high word missed; ### is not a word."""
    tall = box(100, 0, 140, 30)
    labels = [{"transcription": "a", "points": WORDS[0]}, {"transcription": "b", "points": WORDS[1]},
              {"transcription": "###", "points": WORDS[2]}, {"transcription": "c", "points": tall}]
    (tmp_path / "gt.txt").write_text("img_1.jpg\t" + json.dumps(labels) + "\n", encoding="utf-8")
    detector = FixedDetector([box(0, 0, 10, 10), box(0, 0, 24, 10), box(60, 0, 70, 10)])
    report = error_kinds.sort_errors(detector, str(tmp_path), "images", "gt.txt")
    assert report["detections"] == {"matched": 1, "merged": 1, "background": 1}
    assert report["words"] == {"found": 1, "in a merged box": 1, "missed": 1}
    assert report["recall_by_height"] == {"8-12 px": "1/2", "24-32 px": "0/1"}
