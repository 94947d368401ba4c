"""Check textdet's link-runs quad candidates against ``cv2.findContours`` on this OpenCV, and time both tracers.

Run: ``python benchmarks/check_link_runs.py [--bitmaps 20000] [--seed 0] [--maps MAPS.npy]``

On random bitmaps (noise, blocky shapes with holes and islands, filled polygons with specks; 2 to 59 px a side,
foreground on the borders) ``postprocess.db_postprocess.quad_candidates`` must give findContours' candidates
(the contours that pass the bounding-box filter) in its order with its bounding boxes, and return None only
when a hole's findContours contour could pass that filter. It counts how each ``minAreaRect`` compares with
findContours': bit for bit, the same box written another way, another box of the same area (a tie broken from
another start of the hull), or other (must be 0). It also checks the hole rule on every link-runs contour: a
contour starts below its top row or heads left along it exactly when it does not start at its first point in
raster order. ``--maps`` (N, H, W) float maps: how many maps go to findContours, and the median microseconds of
findContours, findContoursLinkRuns and ``quad_candidates`` on each map's bitmap ``P >= 0.3``. A script, not a
test: exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

import cv2
import numpy as np

from textdet.postprocess import db_postprocess as dbp


def random_bitmap(rng: np.random.Generator, i: int) -> np.ndarray:
    h, w = (int(v) for v in rng.integers(2, 60, 2))
    if i % 3 == 0:
        return (rng.random((h, w)) < rng.uniform(0.1, 0.95)).astype(np.uint8)
    if i % 3 == 1:
        small = (rng.random((max(h // 4, 1), max(w // 4, 1))) < 0.6).astype(np.uint8)
        return cv2.resize(small, (w, h), interpolation=cv2.INTER_NEAREST)
    bitmap = np.zeros((h, w), np.uint8)
    for _ in range(int(rng.integers(1, 6))):
        cv2.fillPoly(bitmap, [rng.integers(-5, max(h, w) + 5, (int(rng.integers(3, 7)), 2)).astype(np.int32)], 1)
    bitmap[rng.random((h, w)) < 0.03] ^= 1
    return bitmap


def may_hold_box(contour: np.ndarray) -> bool:
    return dbp.may_hold_box(*cv2.boundingRect(contour)[2:])


def compare_rects(a: tuple, b: tuple) -> str:
    if a == b:
        return "minAreaRect bit for bit"
    corners = [sorted(map(tuple, np.round(cv2.boxPoints(r), 3).tolist())) for r in (a, b)]
    if corners[0] == corners[1]:
        return "minAreaRect: the same box written another way"
    area_a, area_b = a[1][0] * a[1][1], b[1][0] * b[1][1]
    if abs(area_a - area_b) <= 1e-5 * max(area_a, 1.0):
        return "minAreaRect: another box of the same area (a tie)"
    return "FAIL minAreaRect: another box"


def check(n: int, seed: int) -> Counter:
    rng, counts = np.random.default_rng(seed), Counter()
    for i in range(n):
        bitmap = random_bitmap(rng, i)
        for c in cv2.findContoursLinkRuns(bitmap)[0]:  # the hole rule, on every link-runs contour
            order = c[:, 0, 1].astype(np.int64) * bitmap.shape[1] + c[:, 0, 0]
            rule = dbp.is_link_runs_hole(c, cv2.boundingRect(c)[1])
            counts["hole rule right" if rule == (order.min() != order[0]) else "FAIL hole rule"] += 1
        got = dbp.quad_candidates(bitmap, 1000)
        if got is None:
            contours, links = cv2.findContours(bitmap, cv2.RETR_CCOMP, cv2.CHAIN_APPROX_SIMPLE)
            needed = any(may_hold_box(c) for c, link in zip(contours, links[0], strict=True) if link[3] >= 0)
            counts["bitmaps sent to findContours (a hole that may hold a box)" if needed else "FAIL fallback"] += 1
            continue
        counts["bitmaps from link runs"] += 1
        legacy = [c for c in cv2.findContours(bitmap, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)[0] if may_hold_box(c)]
        if [box for _, box in got] != [cv2.boundingRect(c) for c in legacy]:
            counts["FAIL candidates, order or bounding boxes"] += 1
            continue
        for (c, _), old in zip(got, legacy, strict=True):
            counts[compare_rects(cv2.minAreaRect(c), cv2.minAreaRect(old))] += 1
    return counts


def median_us(fn, bitmaps: list[np.ndarray], rounds: int = 30) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for b in bitmaps:
            fn(b)
        times.append((time.perf_counter() - start) / len(bitmaps) * 1e6)
    return float(np.median(times))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bitmaps", type=int, default=20000, help="random bitmaps to check (default 20000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--maps", help="(N, H, W) or (N, 1, H, W) float maps .npy to time the tracers on")
    args = ap.parse_args()
    if dbp._LINK_RUNS is None:
        print(f"OpenCV {cv2.__version__} has no findContoursLinkRuns: textdet uses findContours alone")
        return 0
    counts = check(args.bitmaps, args.seed)
    print(f"OpenCV {cv2.__version__}, numpy {np.__version__}, {args.bitmaps} random bitmaps, seed {args.seed}")
    for key, value in sorted(counts.items()):
        print(f"  {key}: {value}")
    if args.maps:
        maps = np.load(args.maps).astype(np.float32)
        maps = maps[:, 0] if maps.ndim == 4 else maps
        bitmaps = [(m >= 0.3).astype(np.uint8) for m in maps]
        cv2.setNumThreads(1)
        tracers = {
            "findContours": lambda b: cv2.findContours(b, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE),
            "findContoursLinkRuns": cv2.findContoursLinkRuns,
            "quad_candidates": lambda b: dbp.quad_candidates(b, 1000),
        }
        fallbacks = sum(dbp.quad_candidates(b, 1000) is None for b in bitmaps)
        print(f"{len(maps)} maps {maps.shape[1]}x{maps.shape[2]}: {fallbacks} sent to findContours (a hole that may "
              "hold a box); median us a map over 30 rounds:")
        print("  " + ", ".join(f"{name} {median_us(fn, bitmaps):.0f}" for name, fn in tracers.items()))
    return 1 if any(key.startswith("FAIL") for key in counts) else 0


if __name__ == "__main__":
    sys.exit(main())
