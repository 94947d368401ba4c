"""Time BorderMap (and ShrinkBinaryMap) on realistic 640x640 training crops against a plain reference.

Run: ``python benchmarks/speed/bench_targets.py [--samples 20] [--repeats 5] [--seed 0]``

The reference implements the same definition the straightforward way (MindOCR's structure, with
the exact clamped projection instead of the law of cosines): for every polygon, float64 grids over
the whole padded bounding box, one (h, w) distance array per edge, stacked, then the minimum.
All figures come from the same run, so the ratio is meaningful even on a noisy machine.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from textdet.data.targets import BorderMap, ShrinkBinaryMap
from textdet.geometry import offset_polygon, polygon_area, shrink_distance

SIZE = 640


def reference_border_map(polys, ignore_tags, h, w, shrink_ratio=0.4, thresh_min=0.3, thresh_max=0.7):
    """Straightforward float64 version of BorderMap's thresh_map (no thresh_mask)."""
    canvas = np.zeros((h, w), dtype=np.float64)
    for poly, ignored in zip(polys, ignore_tags, strict=True):
        poly = np.asarray(poly, dtype=np.float64)
        if ignored or polygon_area(poly) <= 0:
            continue
        d = shrink_distance(poly, shrink_ratio)
        paths = offset_polygon(poly, d)
        if not paths:
            continue
        padded = max(paths, key=polygon_area)
        (xmin, ymin), (xmax, ymax) = padded.min(axis=0).astype(int), padded.max(axis=0).astype(int)
        ys, xs = np.mgrid[ymin : ymax + 1, xmin : xmax + 1].astype(np.float64)
        dists = []
        for a, b in zip(poly, np.roll(poly, -1, axis=0), strict=True):
            ab = b - a
            t = np.clip(((xs - a[0]) * ab[0] + (ys - a[1]) * ab[1]) / max(ab @ ab, 1e-12), 0.0, 1.0)
            dists.append(np.hypot(a[0] + t * ab[0] - xs, a[1] + t * ab[1] - ys))
        value = 1.0 - np.clip(np.min(np.stack(dists), axis=0) / d, 0.0, 1.0)
        x0, y0, x1, y1 = max(xmin, 0), max(ymin, 0), min(xmax, w - 1), min(ymax, h - 1)
        if x0 > x1 or y0 > y1:
            continue
        sub = value[y0 - ymin : y1 - ymin + 1, x0 - xmin : x1 - xmin + 1]
        canvas[y0 : y1 + 1, x0 : x1 + 1] = np.fmax(canvas[y0 : y1 + 1, x0 : x1 + 1], sub)
    return (thresh_min + (thresh_max - thresh_min) * canvas).astype(np.float32)


def random_quads(rng: np.random.Generator) -> list[np.ndarray]:
    """10-30 word boxes as after RandomScale (up to 3x) + crop: mostly near-horizontal, some steep."""
    polys = []
    for _ in range(int(rng.integers(10, 31))):
        height = rng.uniform(10, 40) * rng.choice([1.0, 1.5, 3.0])
        width = height * rng.uniform(1.5, 8)
        angle = rng.normal(0, 8) if rng.random() < 0.8 else rng.uniform(-60, 60)
        c, s = np.cos(np.radians(angle)), np.sin(np.radians(angle))
        corners = np.array([[-width, -height], [width, -height], [width, height], [-width, height]]) / 2
        centre = rng.uniform(0, SIZE, size=2)
        polys.append((corners @ np.array([[c, s], [-s, c]]) + centre).astype(np.float32))
    return polys


def random_curves(rng: np.random.Generator) -> list[np.ndarray]:
    """5-15 CTW1500-style 14-point text lines (7 points along each side of an arc)."""
    polys = []
    for _ in range(int(rng.integers(5, 16))):
        radius, height = rng.uniform(150, 500), rng.uniform(15, 60)
        span, start = rng.uniform(0.3, 1.0), rng.uniform(0, 2 * np.pi)
        theta = start + np.linspace(0, span, 7)
        centre = rng.uniform(0, SIZE, size=2)
        outer = np.stack([np.cos(theta), np.sin(theta)], 1) * radius
        inner = np.stack([np.cos(theta), np.sin(theta)], 1) * (radius - height)
        poly = np.concatenate([outer, inner[::-1]]) + centre - radius * np.array([np.cos(start), np.sin(start)])
        polys.append(poly.astype(np.float32))
    return polys


def best_ms(fn, samples, repeats: int) -> float:
    """Mean over ``samples`` of each sample's fastest of ``repeats`` runs, in ms.

    Taking the minimum per sample (not per pass) keeps bursts of load from other processes on a
    shared machine out of the figure.
    """
    total = 0.0
    for s in samples:
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            fn(s)
            best = min(best, time.perf_counter() - start)
        total += best
    return total / len(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    shrink, border = ShrinkBinaryMap(), BorderMap()
    image = np.zeros((SIZE, SIZE, 3), np.uint8)
    for name, make in (("quads", random_quads), ("14-pt curves", random_curves)):
        samples = []
        for _ in range(args.samples):
            polys = make(rng)
            s = shrink({"image": image, "polys": polys, "ignore_tags": np.zeros(len(polys), bool)}, rng)
            samples.append(s)
        err = max(
            float(
                np.abs(
                    border(dict(s))["thresh_map"] - reference_border_map(s["polys"], s["ignore_tags"], SIZE, SIZE)
                ).max()
            )
            for s in samples[:5]
        )
        n_polys = np.mean([len(s["polys"]) for s in samples])
        ref = best_ms(lambda s: reference_border_map(s["polys"], s["ignore_tags"], SIZE, SIZE), samples, args.repeats)
        fast = best_ms(lambda s: border(dict(s)), samples, args.repeats)
        shr = best_ms(lambda s: shrink(dict(s)), samples, args.repeats)
        print(
            f"{name:>12}: {n_polys:.1f} polys/sample | BorderMap {fast:.2f} ms | "
            f"reference {ref:.2f} ms | speed-up x{ref / fast:.1f} | max |fast-ref| {err:.1e} | "
            f"ShrinkBinaryMap {shr:.2f} ms"
        )


if __name__ == "__main__":
    main()
