"""Part (c) of ``bench_vs_mindocr.py``: post-processing, MindOCR's ``DBPostprocess`` against textdet's.

Both are built from the config's ``postprocess`` section and run on the same probability maps, batch 1
(MindOCR's eval batch size), in interleaved rounds. The map sets: "gt", the eval GT rasterised as perfect
predictions (each polygon shrunk as in training, filled with P ~ U[0.85, 0.99], blurred); "blobs", 30 rotated
text lines per map on a noisy background; and any maps saved with ``--maps``. Besides ms per map and the
ratio, it checks that both find the same boxes (count per map, and how far apart their corners are).

For information, the same rounds also time textdet's other ways in: PaddleOCR's box-mean score
(``score_mode="fast"``), the bitmap thresholded before the hand-over (the engine's accelerator path), and maps
fresh in the caches, as an eval loop hands them over.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

import cv2
import numpy as np
import pyclipper
from vs_mindocr_common import fresh_map_seconds, interleaved, loadavg, log, summarize
from vs_mindocr_setup import image_hw, parse_gt

SHRINK_RATIO = 0.4  # the training shrink of a text polygon (ShrinkBinaryMap, shrink_ratio 0.4)


def mindocr_side(side: str) -> str:
    """The MindOCR timing a textdet side is compared with: the fresh-map one for a fresh-map side."""
    return "mindocr-fresh-map" if side.endswith("fresh-map") else "mindocr"


def same_results(a: list[dict], b: list[dict]) -> bool:
    """Two lists of post-processing results (one per map): the same scores and the same boxes, bit for bit."""
    return len(a) == len(b) and all(
        x["scores"] == y["scores"]
        and len(x["polys"]) == len(y["polys"])
        and all(np.array_equal(p, q) for p, q in zip(x["polys"], y["polys"], strict=True))
        for x, y in zip(a, b, strict=True)
    )


# ----------------------------------------------------------------------------- the maps
def gt_maps(val: list[dict], h: int, w: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Perfect-prediction maps (N, h, w) from the eval GT, and shape_list (N, 4) [src_h, src_w, sh, sw]."""
    rng = np.random.default_rng(seed)
    maps, shapes = [], []
    for s in val:
        img_h, img_w = image_hw(s["img_path"])
        sx, sy = w / img_w, h / img_h
        prob = np.zeros((h, w), np.float32)
        for poly in parse_gt(s)[0]:
            p = poly.astype(np.float64) * [sx, sy]
            area = abs(cv2.contourArea(p.astype(np.float32)))
            length = cv2.arcLength(p.astype(np.float32), True)
            if area < 1 or length <= 0:
                continue
            dist = area * (1 - SHRINK_RATIO**2) / length
            pc = pyclipper.PyclipperOffset()
            pc.AddPath(np.round(p).astype(np.int64).tolist(), pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
            shrunk = pc.Execute(-dist)
            if shrunk:
                cv2.fillPoly(prob, [np.array(shrunk[0], np.int32)], float(rng.uniform(0.85, 0.99)))
        maps.append(cv2.GaussianBlur(prob, (5, 5), 1.0))
        shapes.append([img_h, img_w, h / img_h, w / img_w])
    return np.stack(maps), np.array(shapes, dtype=np.float32)


def blob_map(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """30 blurred rotated text lines (P ~ 0.9-0.99), one per cell of a 6 x 5 grid so that they do not
    merge, on a faint noisy background. The generator of benchmarks/speed/bench_postprocess.py's
    ``synthetic_map``, written out here because a script imports only its own folder: the same seed gives
    the same maps there."""
    prob = (rng.random((h, w)) * 0.1).astype(np.float32)
    cell_w, cell_h = w / 6, h / 5
    for i in range(30):
        cx, cy = (i % 6 + 0.5) * cell_w, (i // 6 + 0.5) * cell_h
        size = (rng.uniform(30, 0.8 * cell_w), rng.uniform(8, 30))
        pts = cv2.boxPoints(((cx, cy), size, rng.uniform(-20, 20))).astype(np.int32)
        cv2.fillPoly(prob, [pts], float(rng.uniform(0.9, 0.99)))
    return cv2.GaussianBlur(prob, (3, 3), 0)


def blob_maps(n: int, h: int, w: int, seed: int) -> np.ndarray:
    """``n`` maps of ``blob_map``, (n, h, w) float32."""
    rng = np.random.default_rng(seed)
    return np.stack([blob_map(rng, h, w) for _ in range(n)])


def map_sets(args: argparse.Namespace, val: list[dict], h: int, w: int) -> dict[str, tuple]:
    """The map sets to run, by name: (maps (N, H, W), shape_list rows or None); saves "gt" with --save-maps."""
    sets: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    maps, shapes = gt_maps(val, h, w, args.seed)
    sets["gt"] = (maps, shapes)
    if args.save_maps:
        np.save(args.save_maps, maps)
        np.save(os.path.splitext(args.save_maps)[0] + "_shape_list.npy", shapes)
        log(f"   saved the 'gt' maps to {args.save_maps} (+ _shape_list.npy)")
    sets["blobs"] = (blob_maps(len(val), h, w, args.seed + 7), None)
    if args.maps:
        saved = np.load(args.maps).astype(np.float32)
        if saved.ndim == 4:
            saved = saved[:, 0]
        shape_list_path = os.path.splitext(args.maps)[0] + "_shape_list.npy"
        saved_shapes = np.load(shape_list_path).astype(np.float32) if os.path.exists(shape_list_path) else None
        sets[f"saved:{os.path.basename(args.maps)}"] = (saved, saved_shapes)
    return sets


# ----------------------------------------------------------------------------- comparing the boxes
def compare_boxes(a: list, b: list) -> dict:
    """Pair boxes of two lists by nearest centre (<= 10 px); the worst symmetric vertex distance over the pairs
    (each vertex to the nearest vertex of the other box, so the vertex order does not matter), and that
    distance per pair (``pair_diffs_px``)."""
    a = [np.asarray(p, np.float64).reshape(-1, 2) for p in a]
    b = [np.asarray(p, np.float64).reshape(-1, 2) for p in b]
    if not a or not b:
        return {"matched": 0, "max_vertex_diff_px": None, "pair_diffs_px": []}
    ca = np.array([p.mean(0) for p in a])
    cb = np.array([p.mean(0) for p in b])
    d = np.linalg.norm(ca[:, None] - cb[None], axis=2)
    pair_diffs = []
    for i in range(len(a)):
        j = int(np.argmin(d[i]))
        if d[i, j] > 10:
            continue
        vd = np.linalg.norm(a[i][:, None] - b[j][None], axis=2)
        pair_diffs.append(max(float(vd.min(axis=1).max()), float(vd.min(axis=0).max())))
    return {"matched": len(pair_diffs), "max_vertex_diff_px": max(pair_diffs, default=0.0), "pair_diffs_px": pair_diffs}


def vertex_diff_stats(diffs: list[dict]) -> dict:
    """Per matched pair worst vertex distance (px), over all maps: median, 95th percentile, max, share <= 1 px."""
    v = np.array([x for d in diffs for x in d["pair_diffs_px"]], np.float64)
    if not len(v):
        return {}
    return {"median": float(np.median(v)), "p95": float(np.percentile(v, 95)), "max": float(v.max()),
            "share_le_1px": float((v <= 1.0).mean())}


def box_count(results: list) -> int:
    """Boxes in a list of per-map polygon lists."""
    return int(sum(len(polys) for polys in results))


# ----------------------------------------------------------------------------- the part
def bench_postprocess(args: argparse.Namespace, mo: dict | None, cfg: dict, val: list[dict]) -> dict:
    """(c): ms per map of textdet's and MindOCR's DBPostprocess on every map set, and whether their boxes agree.

    The "gt" set's boxes are kept (``_gt_predictions_*``) as the predictions part (d) scores.
    """
    from textdet.postprocess import DBPostprocess

    pp_cfg = {k: v for k, v in (cfg.get("postprocess") or {}).items() if k != "name"}
    ours = DBPostprocess(**pp_cfg)  # score_mode="bitmap": MindOCR's score
    ours_fast = DBPostprocess(**{**pp_cfg, "score_mode": "fast"})  # PaddleOCR's box mean (textdet's old default)
    mine = mo["DBPostprocess"](**pp_cfg) if mo is not None else None
    h, w = args.map_size
    sets = map_sets(args, val, h, w)

    res: dict[str, Any] = {"config": pp_cfg, "map_size": [h, w], "sets": {}}
    for name, (m, sl) in sets.items():
        entry: dict[str, Any] = {"maps": int(len(m))}
        batches = [m[i : i + 1, None] for i in range(len(m))]  # (1, 1, H, W), MindOCR eval batch size 1
        shape_rows = []
        for i in range(len(m)):
            if sl is None:  # no shape_list: the map is the whole image, unscaled
                shape_rows.append(np.array([[m.shape[1], m.shape[2], 1.0, 1.0]], np.float32))
            else:
                shape_rows.append(sl[i : i + 1])
        pairs = list(zip(batches, shape_rows, strict=True))
        out_ours = [ours(b, s)[0]["polys"] for b, s in pairs]
        entry["boxes_textdet"] = box_count(out_ours)
        funcs = {"textdet": lambda pairs=pairs: [ours(b, s) for b, s in pairs]}
        # information: score_mode="fast" (PaddleOCR's mean inside the min-area box, textdet's default before)
        out_fast = [ours_fast(b, s)[0]["polys"] for b, s in pairs]
        entry["boxes_textdet_fast_score"] = box_count(out_fast)
        funcs["textdet-fast-score"] = lambda pairs=pairs: [ours_fast(b, s) for b, s in pairs]
        # information: the engine path, the bitmap P >= binary_thresh made on the device and handed over with P
        # (pred["bitmap"]); it is made here, before timing, so the CPU threshold is not counted
        given = [({"binary": b, "bitmap": b >= ours.binary_thresh}, s) for b, s in pairs]
        out_given = [ours(g, s)[0] for g, s in given]
        entry["boxes_textdet_given_bitmap"] = box_count([r["polys"] for r in out_given])
        entry["given_bitmap_same_output"] = same_results(out_given, [ours(b, s)[0] for b, s in pairs])
        funcs["textdet-given-bitmap"] = lambda given=given: [ours(g, s) for g, s in given]
        # information: maps warm in the caches, as an eval loop hands them over; above, every map is cold in DRAM
        # (the whole set, 3.7 MB a map, passes between two calls on the same map), on both sides
        funcs["textdet-fresh-map"] = lambda pairs=pairs: fresh_map_seconds(ours, pairs)
        if mine is not None:
            funcs["mindocr-fresh-map"] = lambda pairs=pairs: fresh_map_seconds(mine, pairs)
            out_mine = [list(mine(b, s)["polys"][0]) for b, s in pairs]
            entry["boxes_mindocr"] = box_count(out_mine)
            entry["same_box_count_per_map"] = all(len(a) == len(b) for a, b in zip(out_mine, out_ours, strict=True))
            diffs = [compare_boxes(a, b) for a, b in zip(out_mine, out_ours, strict=True)]
            entry["boxes_matched_by_centre"] = int(sum(d["matched"] for d in diffs))
            max_diffs = [d["max_vertex_diff_px"] for d in diffs if d["max_vertex_diff_px"] is not None]
            entry["max_vertex_diff_px"] = max(max_diffs) if max_diffs else None
            entry["vertex_diff_px"] = vertex_diff_stats(diffs)
            funcs["mindocr"] = lambda pairs=pairs: [mine(b, s) for b, s in pairs]
            if name == "gt":
                res["_gt_predictions_mindocr"] = out_mine
        if name == "gt":
            res["_gt_predictions_textdet"] = out_ours
        time_sides(funcs, args.pp_rounds, len(m), entry)
        res["sets"][name] = entry
    return res


def time_sides(funcs: dict[str, Callable[[], Any]], rounds: int, map_count: int, entry: dict) -> None:
    """Warm every side up, time them in ``rounds`` interleaved rounds; ms per map and ratios into ``entry``."""
    for f in funcs.values():  # warm-up
        f()
    entry["loadavg_before"] = loadavg()
    times = interleaved(funcs, rounds)
    entry["loadavg_after"] = loadavg()
    for side, ts in times.items():
        entry[f"ms_per_map_{side}"] = summarize([1000.0 * t / map_count for t in ts])
    if "mindocr" in times:
        for side in times:
            if not side.startswith("mindocr"):
                base = times[mindocr_side(side)]
                key = "ratio_textdet_over_mindocr" if side == "textdet" else f"ratio_{side}_over_mindocr"
                entry[key] = summarize([a / b for a, b in zip(base, times[side], strict=True)])
