"""How far apart neighbouring words on a line are, in a MindOCR label file: the pixels a penalty on the gaps
between words has to work with (docs/DESIGN_NOTES.md, "Eleventh round").

Two labelled words are neighbours on a line when their vertical extents overlap by more than half the smaller
height and they are closer than that height; their gap is the polygons' distance, scaled by ``--scale`` (the
training resize: 736 / 720 for ICDAR2015's 1280x720 photos at shorter side 736).

    python benchmarks/word_gaps.py IC15/train_gt.txt --scale 1.0222
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np
from shapely.geometry import Polygon

from textdet.data.labels import read_label_files

THRESHOLDS_PX = (0, 1, 2, 4, 8)


def neighbour_gaps(words: list[list[list[float]]], scale: float = 1.0) -> list[float]:
    """The gap in pixels (times ``scale``) of every pair of neighbouring words on a line."""
    gaps = []
    for a, b in itertools.combinations([Polygon(points) for points in words], 2):
        a_top, a_bottom, b_top, b_bottom = a.bounds[1], a.bounds[3], b.bounds[1], b.bounds[3]
        height = min(a_bottom - a_top, b_bottom - b_top)
        overlap = min(a_bottom, b_bottom) - max(a_top, b_top)
        if height <= 0 or overlap < 0.5 * height:
            continue
        distance = a.distance(b)
        if distance < height:
            gaps.append(distance * scale)
    return gaps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("label_file", help="MindOCR label file: image path, tab, JSON list of boxes")
    parser.add_argument("--scale", type=float, default=1.0, help="training resize factor (default 1)")
    args = parser.parse_args()
    records, _ = read_label_files([args.label_file])
    gaps = []
    for record in records:
        words = [box["points"] for box in record.annotations if box["transcription"] != "###"]
        gaps += neighbour_gaps(words, args.scale)
    gaps = np.asarray(gaps)
    print(f"{len(gaps)} pairs of neighbouring words; median gap {np.median(gaps):.1f} px")
    for px in THRESHOLDS_PX:
        print(f"  gap <= {px} px: {np.mean(gaps <= px):.2f}")


if __name__ == "__main__":
    main()
