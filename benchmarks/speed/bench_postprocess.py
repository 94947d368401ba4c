"""Time DBPostprocess against a straightforward MindOCR-style loop, and DetMetric throughput.

Run: ``python benchmarks/speed/bench_postprocess.py [--repeats 20] [--images 200]`` (pin it for stable
numbers: ``taskset -c 1 python ...``). Prints ms per map at 736x1280 with ~30 text blobs for: textdet's default
(``score_mode="bitmap"``, MindOCR's score), ``score_mode="fast"`` (PaddleOCR's), textdet given a
precomputed bitmap (``pred["bitmap"]``, the engine's device-threshold path), and the MindOCR-style
loop; rounds interleaved, the ratio is the median of per-round ratios; whether they find the same boxes.
Then images/s for the metric (ours vs a per-pair shapely loop as in the official ICDAR script).
A script, not a test; ``benchmarks/parity/mindocr/bench_vs_mindocr.py`` runs MindOCR's own code.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import cv2
import numpy as np
import pyclipper
from shapely.geometry import Polygon

from textdet.metrics import DetMetric
from textdet.postprocess import DBPostprocess


def synthetic_map(rng: np.random.Generator, h: int = 736, w: int = 1280) -> np.ndarray:
    """30 blurred rotated text lines (P ~ 0.9-0.99, like a trained DBNet), one per cell of a 6 x 5 grid
    so that they do not merge, on a faint noisy background."""
    prob = (rng.random((h, w)) * 0.1).astype(np.float32)
    cw, ch = w / 6, h / 5
    for i in range(30):
        cx, cy = (i % 6 + 0.5) * cw, (i // 6 + 0.5) * ch
        size = (rng.uniform(30, 0.8 * cw), rng.uniform(8, 30))
        pts = cv2.boxPoints(((cx, cy), size, rng.uniform(-20, 20))).astype(np.int32)
        cv2.fillPoly(prob, [pts], float(rng.uniform(0.9, 0.99)))
    return cv2.GaussianBlur(prob, (3, 3), 0)


def mindocr_style(prob: np.ndarray, binary_thresh: float = 0.3, box_thresh: float = 0.7, ratio: float = 1.5) -> list:
    """Quad mode as MindOCR writes it: bbox-mean score, shapely area/length, pyclipper per contour
    (float points: pyclipper truncates them to its integer lattice)."""
    bitmap = prob >= binary_thresh
    contours, _ = cv2.findContours(bitmap.astype(np.uint8), cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    out = []
    for contour in contours[:1000]:
        contour = contour.squeeze(1)
        lo = np.clip(np.floor(contour.min(0)), 0, np.array(prob.shape[::-1]) - 1).astype(np.int32)
        hi = np.clip(np.ceil(contour.max(0)), 0, np.array(prob.shape[::-1]) - 1).astype(np.int32)
        score = cv2.mean(
            prob[lo[1] : hi[1] + 1, lo[0] : hi[0] + 1], bitmap[lo[1] : hi[1] + 1, lo[0] : hi[0] + 1].astype(np.uint8)
        )[0]
        if score < box_thresh:
            continue
        rect = cv2.minAreaRect(contour)
        if min(rect[1]) < 3:
            continue
        points = cv2.boxPoints(rect)
        poly = Polygon(points)
        offset = pyclipper.PyclipperOffset()
        offset.AddPath(points.tolist(), pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
        expanded = np.array(offset.Execute(poly.area * ratio / poly.length)).reshape(-1, 2)
        rect = cv2.minAreaRect(expanded.astype(np.float32))
        if min(rect[1]) < 5:
            continue
        out.append(sorted(cv2.boxPoints(rect).tolist(), key=lambda p: p[0]))
    return out


def official_style_image(dets: list, gts: list, ignore: np.ndarray) -> tuple[int, int, int]:
    """The ICDAR2015 script's loops: one shapely intersection per (GT, detection) pair."""
    g = [Polygon(np.trunc(p)).buffer(0) for p in gts]
    d = [Polygon(np.trunc(p)).buffer(0) for p in dets]
    dont = [
        j
        for j, dp in enumerate(d)
        for i in np.flatnonzero(ignore)
        if dp.area and g[i].intersection(dp).area / dp.area > 0.5
    ]
    g_used, d_used, tp = set(), set(dont), 0
    for i, gp in enumerate(g):
        if ignore[i]:
            continue
        for j, dp in enumerate(d):
            if i in g_used or j in d_used:
                continue
            inter = gp.intersection(dp).area
            union = gp.area + dp.area - inter
            if union > 0 and inter / union > 0.5:
                g_used.add(i)
                d_used.add(j)
                tp += 1
    return tp, len(d) - len(set(dont)), int((~ignore).sum())


def timed(fn, repeats: int) -> float:
    fn()  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def max_vertex_diff(a: list, b: list) -> float:
    """Worst distance from a vertex of a box in ``a`` to the nearest vertex of the box in ``b`` with the nearest
    centre (vertex order does not matter); inf when the counts differ."""
    if len(a) != len(b):
        return float("inf")
    a = [np.asarray(p, np.float64).reshape(-1, 2) for p in a]
    b = [np.asarray(p, np.float64).reshape(-1, 2) for p in b]
    worst = 0.0
    cb = np.array([q.mean(0) for q in b]).reshape(-1, 2)
    for p in a:
        q = b[int(np.argmin(np.linalg.norm(cb - p.mean(0), axis=1)))]
        worst = max(worst, float(np.linalg.norm(p[:, None] - q[None], axis=2).min(axis=1).max()))
    return worst


def interleaved_ms(funcs: dict, n_maps: int, repeats: int) -> dict[str, list[float]]:
    """ms per map per round for every function, rounds interleaved (A, B, C, C, B, A, ...)."""
    for fn in funcs.values():
        fn()  # warm-up
    times: dict[str, list[float]] = {k: [] for k in funcs}
    for r in range(repeats):
        for name in list(funcs) if r % 2 == 0 else list(funcs)[::-1]:
            start = time.perf_counter()
            funcs[name]()
            times[name].append(1e3 * (time.perf_counter() - start) / n_maps)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="interleaved timing rounds over the maps")
    parser.add_argument("--maps", type=int, default=8, help="synthetic maps per round")
    parser.add_argument("--images", type=int, default=200)
    args = parser.parse_args()
    cv2.setNumThreads(1)
    rng = np.random.default_rng(0)
    maps = [synthetic_map(rng) for _ in range(args.maps)]
    pp, pp_fast = DBPostprocess(), DBPostprocess(score_mode="fast")
    given = [{"binary": m[None], "bitmap": (m >= pp.binary_thresh)[None]} for m in maps]  # made before timing
    ours = [pp(m[None])[0]["polys"] for m in maps]
    ref = [mindocr_style(m) for m in maps]
    same_given = all(
        all(np.array_equal(p, q) for p, q in zip(pp(g)[0]["polys"], o, strict=True))
        for g, o in zip(given, ours, strict=True)
    )
    worst = max(max_vertex_diff(o, r) for o, r in zip(ours, ref, strict=True))
    print(f"postprocess 736x1280, {args.maps} maps, load average {os.getloadavg()[0]:.2f}")
    print(f"  boxes per map: textdet {[len(p) for p in ours]} / MindOCR-style {[len(p) for p in ref]}")
    print(f"  fast score boxes per map: {[len(pp_fast(m[None])[0]['polys']) for m in maps]}")
    print(f"  max vertex diff textdet vs MindOCR-style: {worst:.2f} px (MindOCR's pyclipper lattice); "
          f"given-bitmap output identical: {same_given}")
    times = interleaved_ms(
        {
            "MindOCR-style": lambda: [mindocr_style(m) for m in maps],
            "textdet": lambda: [pp(m[None]) for m in maps],
            "textdet fast score": lambda: [pp_fast(m[None]) for m in maps],
            "textdet given bitmap": lambda: [pp(g) for g in given],
        },
        len(maps),
        args.repeats,
    )
    for name, ts in times.items():
        ratio = statistics.median(a / b for a, b in zip(times["MindOCR-style"], ts, strict=True))
        print(f"  {name:<21} {statistics.median(ts):8.2f} ms/map   MindOCR-style / this {ratio:5.2f}x")
    print(f"  load average after: {os.getloadavg()[0]:.2f}")

    images = []
    for _ in range(args.images):
        gts = [
            cv2.boxPoints(((x, y), (rng.uniform(30, 200), rng.uniform(10, 30)), rng.uniform(-20, 20)))
            for x, y in rng.uniform([50, 20], [1230, 700], (20, 2))
        ]
        dets = [g + rng.normal(0, 4, g.shape) for g in gts[:17]] + [g + 300 for g in gts[:3]]
        images.append((dets, gts, rng.random(20) < 0.1))
    metric = DetMetric()

    def ours_metric() -> None:
        metric.reset()
        metric.update([d for d, _, _ in images], [g for _, g, _ in images], [i for _, _, i in images])

    t_metric = timed(ours_metric, 1)
    t_official = timed(lambda: [official_style_image(*im) for im in images], 1)
    official = np.sum([official_style_image(*im) for im in images], axis=0)
    print(
        f"metric, 20 GT / 20 detections per image, counts ours {metric.counts().tolist()} "
        f"official-style {official.tolist()}"
    )
    print(f"  ours           {len(images) / t_metric:8.0f} images/s")
    print(f"  official-style {len(images) / t_official:8.0f} images/s")


if __name__ == "__main__":
    main()
