"""textdet.metrics.error_kinds: detections and words sorted into kinds, on hand-made boxes (``textdet eval
--report DIR --json`` prints the tally over an eval set: tests/test_report.py)."""

from __future__ import annotations

import pytest

from conftest import box
from textdet.metrics.det_metric import to_polygon
from textdet.metrics.error_kinds import ErrorTally, detection_kind, image_errors, word_height

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
def test_detection_kind(points, expected):
    words = [to_polygon(w) for w in WORDS]
    assert detection_kind(to_polygon(points), words, COUNTS) == expected


def test_word_height_is_the_short_side_of_the_rotated_box():
    """A 40 x 10 box turned 45 degrees is still 10 high; a line has no height."""
    turned = [[0, 0], [40 / 2**0.5, 40 / 2**0.5], [40 / 2**0.5 - 10 / 2**0.5, 40 / 2**0.5 + 10 / 2**0.5],
              [-10 / 2**0.5, 10 / 2**0.5]]
    assert word_height(turned) == pytest.approx(10.0)
    assert word_height([[0, 0], [5, 0], [10, 0]]) == 0.0


# Word 0 found, word 1 only inside a merged box, a 30 px high word missed; ### is not a word.
TALL = box(100, 0, 140, 30)
GTS = [WORDS[0], WORDS[1], WORDS[2], TALL]
TAGS = [False, False, True, False]
DETS = [box(0, 0, 10, 10), box(0, 0, 24, 10), box(60, 0, 70, 10)]


def test_image_errors_sorts_every_detection_and_word():
    """The merged box covers word 0 too, but word 0 keeps "found" (its matched box); a degenerate detection
    has no kind."""
    errors = image_errors([*DETS, [[5, 5], [6, 5], [7, 5]]], GTS, TAGS)
    assert errors.detections == ["matched", "merged", "background", None]
    assert errors.words == ["found", "in a merged box", None, "missed"]
    assert errors.heights == [10.0, 10.0, 10.0, 30.0]


def test_tally_counts_words_and_recall_by_height():
    tally = ErrorTally()
    tally.add(image_errors(DETS, GTS, TAGS))
    tally.add(image_errors([], [box(0, 0, 50, 5)], [False]))  # a 5 px word, missed
    assert tally.summary() == {
        "images": 2, "detections": {"matched": 1, "merged": 1, "background": 1},
        "words": {"found": 1, "in a merged box": 1, "missed": 2},
        "recall_by_height": {"0-8 px": {"found": 0, "words": 1}, "8-12 px": {"found": 1, "words": 2},
                             "24-32 px": {"found": 0, "words": 1}}}

