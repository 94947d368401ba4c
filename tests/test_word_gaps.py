"""benchmarks/word_gaps.py: the gaps between neighbouring words on a line, on hand-made boxes."""

from __future__ import annotations

from conftest import box, load_benchmark


def test_gaps_count_neighbours_on_a_line_only() -> None:
    word_gaps = load_benchmark("word_gaps")
    words = [
        box(0, 0, 10, 10),  # a 10 px high word
        box(14, 2, 24, 12),  # 4 px to its right, overlapping 8 of 10 px vertically: neighbours
        box(24, 0, 30, 10),  # touching the second: a gap of 0
        box(50, 0, 60, 10),  # 20 px from the third: more than a word height, not a neighbour
        box(0, 30, 10, 40),  # below the first: no vertical overlap
    ]
    assert sorted(word_gaps.neighbour_gaps(words)) == [0.0, 4.0]
    assert sorted(word_gaps.neighbour_gaps(words, scale=2.0)) == [0.0, 8.0]
