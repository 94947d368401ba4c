"""``textdet bench postprocess|eval|predict``: the inference-side parts of ``textdet bench`` (see bench.py)."""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import math
import os
import statistics
import time
from collections.abc import Iterator
from typing import Any

import cv2
import numpy as np

from textdet.build import parts
from textdet.data.targets import ShrinkBinaryMap
from textdet.device import is_accelerator, pick_device
from textdet.errors import TextdetError
from textdet.predict import find_images
from textdet.runtime.feed import split_device_normalize

POSTPROCESS_REPEATS = 3  # each map is timed this many times and its fastest run kept (shared machines)


# ------------------------------------------------------------------------------------------------ postprocess
def bench_postprocess(cfg, args: argparse.Namespace, n: int, warmup: int) -> dict:
    """ms per map of the config's DBPostprocess, on saved maps (--maps) or maps drawn from eval GT."""
    post = parts.build_postprocess_from_config(cfg)
    maps = load_maps(args.maps) if args.maps else gt_maps(cfg, n)
    maps = maps[:n] if args.n is not None else maps  # --maps: every file unless --n is given
    for _, prob, shape in maps[:warmup]:
        post(prob[None], None if shape is None else shape[None])
    per_map, boxes = [], []
    for _, prob, shape in maps:
        best = math.inf
        for _ in range(POSTPROCESS_REPEATS):
            start = time.perf_counter()
            out = post(prob[None], None if shape is None else shape[None])
            best = min(best, time.perf_counter() - start)
        per_map.append(best)
        boxes.append(len(out[0]["polys"]))
    return {"ms_per_map": 1000 * statistics.fmean(per_map), "boxes_per_map": statistics.fmean(boxes),
            "maps": len(maps), "map_hw": list(maps[0][1].shape), "source": args.maps or "eval GT"}


def load_maps(folder: str) -> list[tuple[str, Any, Any]]:
    """``folder/*.npy`` -> [(stem, prob (H, W) float32, shape_list [h, w, H/h, W/w] or None)]; the optional
    ``folder/shapes.json`` maps a stem to the original [h, w] (without one the map stays in map pixels)."""
    if not os.path.isdir(folder):
        raise TextdetError(f"--maps {folder}: no such folder; expected a folder of .npy probability maps "
                           "(shape (1,1,H,W) or (H,W), float32) and an optional shapes.json")
    files = sorted(glob.glob(os.path.join(folder, "*.npy")))
    if not files:
        raise TextdetError(f"--maps {folder}: no .npy files in it; save each map with numpy.save(DIR/NAME.npy, P)")
    shapes = _read_shapes(os.path.join(folder, "shapes.json"))
    out = []
    for path in files:
        stem = os.path.splitext(os.path.basename(path))[0]
        try:
            arr = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise TextdetError(f"--maps: cannot read {path}: {e}") from None
        if arr.ndim == 4 and arr.shape[:2] == (1, 1):
            arr = arr[0, 0]
        if arr.ndim != 2 or not np.issubdtype(arr.dtype, np.floating):
            raise TextdetError(f"--maps: {path} is {arr.dtype} of shape {arr.shape}; expected float probabilities "
                               "of shape (1, 1, H, W) or (H, W)")
        shape = None
        if stem in shapes:
            h, w = shapes[stem]
            shape = np.array([h, w, arr.shape[0] / h, arr.shape[1] / w], dtype=np.float64)
        out.append((stem, np.ascontiguousarray(arr, dtype=np.float32), shape))
    return out


def _read_shapes(path: str) -> dict[str, tuple[float, float]]:
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise TextdetError(f"--maps: cannot read {path}: {e}") from None
    if not isinstance(data, dict):
        raise TextdetError(f"--maps: {path} must map each map's name to [h, w], got a {type(data).__name__}")
    for stem, hw in data.items():
        if (not isinstance(hw, (list, tuple)) or len(hw) != 2
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in hw)):
            raise TextdetError(f"--maps: {path}: {stem!r} must be [h, w] (two positive numbers), got {hw!r}")
    return {k: (float(v[0]), float(v[1])) for k, v in data.items()}


def gt_maps(cfg, count: int) -> list[tuple[str, Any, Any]]:
    """Probability maps like a trained DBNet's: eval GT shrunk (ShrinkBinaryMap), filled, faint noise, blurred."""
    pipe, _ = split_device_normalize(parts.validate(cfg, ("eval",))["eval"])  # only the geometry is needed
    dataset = parts.build_dataset(cfg, "eval", pipe)
    shrink = ShrinkBinaryMap(min_text_size=1, shrink_ratio=0.4)
    out = []
    for i in range(min(count, len(dataset))):
        rng = np.random.default_rng([cfg.system.seed, 0, i, 0])
        s = dataset.load(i, rng)
        image = s["image"]
        hw = image.shape[:2] if image.ndim == 2 or image.shape[-1] in (1, 3, 4) else image.shape[1:]  # HWC or CHW
        drawn = shrink({"image": np.empty(hw, np.uint8), "polys": s["polys"], "ignore_tags": s["ignore_tags"]})
        prob = np.maximum(drawn["binary_map"][0] * rng.uniform(0.9, 0.99), rng.random(hw, np.float32) * 0.1)
        shape = np.asarray(s["shape_list"], np.float64) if "shape_list" in s else None
        out.append((os.path.basename(s["img_path"]), cv2.GaussianBlur(prob, (3, 3), 0), shape))
    return out


# ------------------------------------------------------------------------------------------------ eval
class _Limited:
    """The first ``batches`` batches of a loader (the Evaluator iterates and sizes it)."""

    def __init__(self, loader, batches: int):
        self.loader = loader
        self.batches = batches

    def __iter__(self) -> Iterator:
        return itertools.islice(iter(self.loader), self.batches)

    def __len__(self) -> int:
        return min(len(self.loader), self.batches)


def bench_eval(cfg, args: argparse.Namespace, n: int, warmup: int) -> dict:
    """Images/s through the real Evaluator on the first ``n`` eval images, ``ms_per_image`` per (overlapping) part."""
    device = pick_device(args.device)
    model, ckpt, _ = parts.load_model(cfg, args.ckpt, keys=())
    model.to(device).eval()
    amp = parts.inference_amp(cfg, device.type)
    pipeline = parts.validate(cfg, ("eval",))["eval"]
    evaluator = parts.build_evaluator(cfg, pipeline, device, is_accelerator(device), amp)
    loader = evaluator.loader
    evaluator.loader = _Limited(loader, warmup)
    if warmup:
        evaluator.run(model)
    evaluator.loader = _Limited(loader, math.ceil(n / loader.batch_size))
    start = time.perf_counter()
    perf = evaluator.run(model)
    elapsed = time.perf_counter() - start
    return {"img_per_s": evaluator.images / max(elapsed, 1e-9), "images": evaluator.images, **perf,
            "ms_per_image": {k: 1000 * v / max(evaluator.images, 1) for k, v in evaluator.parts.items()},
            "eval_s": elapsed, "batch_size": loader.batch_size, "device": str(device), "amp_level": amp.describe(),
            "runtime": evaluator.runtime,
            "checkpoint": os.path.abspath(ckpt) if ckpt else None}


def bench_predict(cfg, args: argparse.Namespace, n: int, warmup: int) -> dict:
    """Images/s of the ``Detector`` API (decode, resize, normalise, forward, post-process) on eval images."""
    device = pick_device(args.device)
    parts.validate(cfg, ("eval",))
    ds = cfg.eval.dataset
    images = find_images([os.path.join(ds.dataset_root, ds.data_dir)])[: max(n, 1)]
    model, ckpt, _ = parts.load_model(cfg, args.ckpt, keys=())
    amp = parts.inference_amp(cfg, device.type)
    detector = parts.detector_for(cfg, model, args.device, cfg.eval.loader.batch_size)
    if warmup:
        detector(images[:warmup])
    start = time.perf_counter()
    results = detector(images)
    elapsed = time.perf_counter() - start
    return {"img_per_s": len(images) / max(elapsed, 1e-9), "images": len(images),
            "boxes": sum(len(r["polys"]) for r in results), "batch_size": detector.batch_size,
            "device": str(device), "amp_level": amp.describe(), "runtime": detector.runtime,
            "checkpoint": os.path.abspath(ckpt) if ckpt else None}
