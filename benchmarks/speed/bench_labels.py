"""Reading label files at start-up: the self-crossing check as shipped (a loop for quads, a matrix of edge
pairs for longer outlines) against the loop alone, in the same run (docs/BENCHMARKS.md, "Label reading").

Two label files are written first: ICDAR2015-like quads (250 images x 20 words) and handwriting-like line
outlines (60 pages x 18 lines of 70 points that follow a wavy ink contour, never crossing).

    python benchmarks/speed/bench_labels.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import numpy as np

from textdet.data import labels


def write_quads(path: str, rng: np.random.Generator) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for image in range(250):
            regions = []
            for _ in range(20):
                x, y = rng.uniform(0, 1200), rng.uniform(0, 700)
                w, h = rng.uniform(20, 120), rng.uniform(10, 30)
                points = [[x, y], [x + w, y + 2], [x + w - 1, y + h], [x - 1, y + h - 2]]
                regions.append({"transcription": "word", "points": np.round(points, 2).tolist()})
            f.write(f"img_{image}.jpg\t{json.dumps(regions)}\n")


def write_outlines(path: str, rng: np.random.Generator) -> None:
    """Each line: 35 points along a wavy top edge left to right, 35 along the bottom edge back."""
    xs = np.linspace(50, 800, 35)
    with open(path, "w", encoding="utf-8") as f:
        for page in range(60):
            regions = []
            for line in range(18):
                base = 60 + 55 * line
                top = base - 15 - rng.uniform(0, 10, len(xs))
                bottom = base + 15 + rng.uniform(0, 10, len(xs))
                points = [[x, y] for x, y in zip(xs, top, strict=True)]
                points += [[x, y] for x, y in zip(xs[::-1], bottom[::-1], strict=True)]
                regions.append({"transcription": "line", "points": np.round(points, 2).tolist()})
            f.write(f"page_{page}.jpg\t{json.dumps(regions)}\n")


def seconds_to_read(path: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        labels.read_label_files(path)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    shipped = labels._self_intersects
    with tempfile.TemporaryDirectory() as folder:
        files = {"quads (250 x 20)": os.path.join(folder, "quads.txt"),
                 "outlines (60 x 18, 70 points)": os.path.join(folder, "outlines.txt")}
        write_quads(files["quads (250 x 20)"], rng)
        write_outlines(files["outlines (60 x 18, 70 points)"], rng)
        for name, path in files.items():
            now = seconds_to_read(path, args.runs)
            labels._self_intersects = labels._crossing_by_loop  # the baseline: the loop for every polygon
            try:
                loop = seconds_to_read(path, args.runs)
            finally:
                labels._self_intersects = shipped
            print(f"{name}: {now:.3f} s as shipped, {loop:.3f} s with the loop alone: x{loop / now:.1f}")


if __name__ == "__main__":
    main()
