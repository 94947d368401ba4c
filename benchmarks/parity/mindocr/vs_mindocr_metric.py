"""Part (d) of ``bench_vs_mindocr.py``: the detection metric, MindOCR's ``DetMetric`` against textdet's.

Both score the same predictions against the same eval GT: "near-perfect" (the boxes part (c) found on the
"gt" maps, or the GT itself when (c) has none), "noisy" (those jittered, some dropped, some false positives
added) and "noisy+10%-duplicates". Their precision, recall and F-score are set side by side. Two constructed
cases show where they must differ, both documented: a GT word detected twice (MindOCR counts the second
detection as nothing; the ICDAR protocol and textdet count it as a false positive), and a self-intersecting
detection (MindOCR drops it silently; textdet repairs it as mmocr does and counts it). Last, images/s of
both on the noisy case, one image per update as in both evaluation loops.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from vs_mindocr_common import interleaved, loadavg, summarize
from vs_mindocr_setup import image_hw, parse_gt


class _AsNumpy:
    """Stands in for a MindSpore Tensor in MindOCR's DetMetric.update (it calls ``.asnumpy()``)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def asnumpy(self) -> np.ndarray:
        return self.array


def _pad_gt(polys: list[np.ndarray]) -> np.ndarray:
    """MindOCR's padded GT layout [num_boxes, P, 2] (repeat the last point), as its DetLabelEncode does."""
    if not polys:
        return np.zeros((0, 4, 2), np.float32)
    p = max(len(x) for x in polys)
    return np.stack([np.concatenate([x, np.repeat(x[-1:], p - len(x), 0)]) for x in polys]).astype(np.float32)


def _mindocr_prediction(polys: list) -> dict:
    """One image's detections in the layout MindOCR's DetMetric.update takes (batch 1, every score 1)."""
    return {"polys": [[np.asarray(x, np.float32) for x in polys]], "scores": [np.ones(len(polys), np.float32)]}


def run_metric_mindocr(
    mo: dict, preds: list[list], gts: list[list], ignores: list[np.ndarray], tensors: bool = True
) -> tuple[dict, Any]:
    """MindOCR's DetMetric over the images, one update per image; (its results as floats, the metric)."""
    metric = mo["DetMetric"]()
    wrap = mo["ms"].Tensor if tensors else _AsNumpy
    for p, g, ig in zip(preds, gts, ignores, strict=True):
        gt_t = (wrap(_pad_gt(g)[None]), wrap(np.asarray(ig, bool)[None]))
        metric.update(_mindocr_prediction(p), gt_t)
    return {k: float(v) for k, v in metric.eval().items()}, metric


def run_metric_ours(preds: list[list], gts: list[list], ignores: list[np.ndarray]) -> dict:
    """textdet's DetMetric over the images, one update per image; its results as floats."""
    from textdet.metrics import DetMetric

    metric = DetMetric()
    for p, g, ig in zip(preds, gts, ignores, strict=True):
        metric.update([p], [g], [ig])
    return {k: float(v) for k, v in metric.compute().items()}


def _similar_box(box: np.ndarray, rng: np.random.Generator, shift: float, scale: tuple[float, float]) -> np.ndarray:
    """``box`` moved by N(0, shift) px and scaled about its centre by U(scale): still a valid (simple) polygon."""
    b = np.asarray(box, np.float64)
    c = b.mean(axis=0)
    return ((b - c) * rng.uniform(*scale) + c + rng.normal(0, shift, size=2)).round().astype(np.float32)


def noisy_predictions(preds: list[list], val_hw: list[tuple[int, int]], seed: int) -> list[list]:
    """Each box moved (sigma 3 px) and rescaled (x0.75-1.25), 15 % dropped, 1-3 random false positives per image.

    Every box stays a simple polygon, as a post-processor's output is (see the "self-intersecting" case)."""
    rng = np.random.default_rng(seed)
    out = []
    for p, (h, w) in zip(preds, val_hw, strict=True):
        boxes = [_similar_box(box, rng, 3.0, (0.75, 1.25)) for box in p if rng.random() >= 0.15]
        for _ in range(int(rng.integers(1, 4))):
            cx, cy = rng.uniform(50, w - 150), rng.uniform(30, h - 60)
            bw, bh = rng.uniform(40, 140), rng.uniform(15, 40)
            boxes.append(np.array([[cx, cy], [cx + bw, cy], [cx + bw, cy + bh], [cx, cy + bh]], np.float32).round())
        out.append(boxes)
    return out


def base_predictions(pp_res: dict | None, gts: list[list], ignores: list[np.ndarray]) -> tuple[list[list], str]:
    """The near-perfect predictions and where they come from: part (c)'s boxes on the "gt" maps (MindOCR's
    when it ran), else the GT boxes that are not "don't care"."""
    if pp_res and "_gt_predictions_mindocr" in pp_res:
        base, source = pp_res["_gt_predictions_mindocr"], "MindOCR DBPostprocess on the 'gt' maps"
    elif pp_res and "_gt_predictions_textdet" in pp_res:
        base, source = pp_res["_gt_predictions_textdet"], "textdet DBPostprocess on the 'gt' maps"
    else:
        kept = []
        for image_gts, image_ignores in zip(gts, ignores, strict=True):
            kept.append([q.copy() for q, ignored in zip(image_gts, image_ignores, strict=True) if not ignored])
        base, source = kept, "GT"
    return [[np.asarray(b, np.float32) for b in p] for p in base], source


def compare_on(mo: dict | None, preds: list[list], gts: list[list], ignores: list[np.ndarray]) -> dict:
    """Both metrics' results on the same predictions, and whether they are identical (to 1e-12)."""
    entry: dict[str, Any] = {"textdet": run_metric_ours(preds, gts, ignores)}
    if mo is not None:
        entry["mindocr"], _ = run_metric_mindocr(mo, preds, gts, ignores)
        entry["identical"] = all(abs(entry["mindocr"][k] - entry["textdet"][k]) < 1e-12 for k in entry["textdet"])
    return entry


def constructed_cases(mo: dict | None) -> dict[str, dict]:
    """The two documented differences, each on one GT word: detected twice, and a self-intersecting detection."""
    gt_box = np.array([[100, 100], [300, 100], [300, 150], [100, 150]], np.float32)
    one_gt = [[gt_box]]
    no_ignore = [np.zeros(1, bool)]

    # the duplicate-detection case: one GT word, detected twice
    twice = [gt_box.copy(), gt_box + np.float32(2)]
    comparison = compare_on(mo, [twice], one_gt, no_ignore)
    duplicate = {
        "gt": 1,
        "detections": 2,
        "textdet": comparison.pop("textdet"),
        "expected_icdar2015": {"recall": 1.0, "precision": 0.5, "f-score": 2 * 0.5 / 1.5},
        **comparison,  # MindOCR's results and "identical", when MindOCR ran
    }

    # a self-intersecting ("bow-tie") detection. MindOCR drops invalid polygons silently; textdet repairs them
    # with buffer(0) (as mmocr) and counts them, here as a false positive
    bow = np.array([[400, 100], [450, 100], [400, 130], [450, 130]], np.float32)
    self_intersecting = {"gt": 1, "detections": "the GT box + one bow-tie elsewhere"}
    self_intersecting.update(compare_on(mo, [[gt_box.copy(), bow]], one_gt, no_ignore))
    return {"duplicate_case": duplicate, "self_intersecting_case": self_intersecting}


def bench_metric(args: argparse.Namespace, mo: dict | None, val: list[dict], pp_res: dict | None) -> dict:
    """(d): both metrics' results on the near-perfect, noisy and duplicated predictions and the constructed
    cases, then images/s of both on the noisy case."""
    gts, ignores = zip(*[parse_gt(s) for s in val], strict=True)
    gts, ignores = list(gts), list(ignores)
    val_hw = [image_hw(s["img_path"]) for s in val]
    base, source = base_predictions(pp_res, gts, ignores)
    cases: dict[str, list[list]] = {"near-perfect": base, "noisy": noisy_predictions(base, val_hw, args.seed)}
    rng = np.random.default_rng(args.seed + 3)
    dup = []
    for p in cases["noisy"]:
        extra = [_similar_box(b, rng, 1.0, (0.97, 1.03)) for b in p if rng.random() < 0.1]
        dup.append(list(p) + extra)
    cases["noisy+10%-duplicates"] = dup
    res: dict[str, Any] = {"predictions_from": source, "images": len(val), "cases": {}}
    for name, preds in cases.items():
        res["cases"][name] = compare_on(mo, preds, gts, ignores)
    res.update(constructed_cases(mo))
    res.update(metric_speed(args.metric_rounds, mo, cases["noisy"], gts, ignores))
    return res


def metric_speed(rounds: int, mo: dict | None, preds: list[list], gts: list[list],
                 ignores: list[np.ndarray]) -> dict:
    """Images/s of both metrics over ``preds`` (the busiest matching: the noisy case), batch 1 per update as in
    both eval loops, in ``rounds`` interleaved rounds; the inputs are converted before timing."""
    from textdet.metrics import DetMetric

    funcs: dict[str, Any] = {}

    def ours_run() -> None:
        m = DetMetric()
        for p, gg, ig in zip(preds, gts, ignores, strict=True):
            m.update([p], [gg], [ig])
        m.compute()

    funcs["textdet"] = ours_run
    if mo is not None:
        ms = mo["ms"]
        ms_gts = [
            (ms.Tensor(_pad_gt(gg)[None]), ms.Tensor(np.asarray(ig, bool)[None]))
            for gg, ig in zip(gts, ignores, strict=True)
        ]
        ms_preds = [_mindocr_prediction(p) for p in preds]

        def mindocr_run() -> None:
            m = mo["DetMetric"]()
            for p, gt_t in zip(ms_preds, ms_gts, strict=True):
                m.update(p, gt_t)
            m.eval()

        funcs["mindocr"] = mindocr_run
    for f in funcs.values():
        f()
    res: dict[str, Any] = {"loadavg_before": loadavg()}
    times = interleaved(funcs, rounds)
    res["loadavg_after"] = loadavg()
    for side, ts in times.items():
        res[f"images_per_s_{side}"] = summarize([len(preds) / t for t in ts])
    if "mindocr" in times:
        res["ratio_textdet_over_mindocr"] = summarize(
            [a / b for a, b in zip(times["mindocr"], times["textdet"], strict=True)]
        )
    return res
