"""Parts (a) and (b) of ``bench_vs_mindocr.py``: the training input pipeline, textdet's against MindOCR's.

(a) The user's training ``transform_pipeline`` is built by MindOCR's own ``create_transforms`` (as its
``DetDataset`` does) and by textdet as a loader worker runs it: ``split_device_normalize(build_transforms(
pipeline, fuse=True))``, which leaves the trailing NormalizeImage + ToCHWImage to the device. Both run on the
same images in the same order with seeded RNGs, in interleaved rounds; a sample's time includes handing its
output columns over as C-contiguous arrays, as a loader must. For information, textdet's full pipeline
(normalisation in the worker), its sequential reference (``fuse=False``) and both with the decoded-image
cache run in the same rounds, and the device normalisation is timed on its own on a CPU batch.

(b) Where the time goes: ms per transform on both sides, and a few "what-if" micro-benchmarks of cheaper ways
to do textdet's dominant steps (no textdet code is changed).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import cv2
import numpy as np
from vs_mindocr_common import best_ms, fail, interleaved, loadavg, log, summarize

# the textdet sides of (a), in the order they are timed after MindOCR's
TEXTDET_SIDES = ("textdet", "textdet-full", "textdet-sequential", "textdet-cached", "textdet-full-cached")
# ratio key in the result -> the textdet side it compares with MindOCR
RATIO_KEYS = {
    "ratio_textdet_over_mindocr": "textdet",
    "ratio_full_over_mindocr": "textdet-full",
    "ratio_sequential_over_mindocr": "textdet-sequential",
    "ratio_cached_over_mindocr": "textdet-cached",
    "ratio_full_cached_over_mindocr": "textdet-full-cached",
}
MINDOCR_GLOBAL_CONFIG = {"is_train": True, "use_minddata": False}  # what MindOCR's DetDataset passes


def contiguous_handoff(sample: dict, columns: list[str]) -> tuple:
    """What a loader ships: the output columns, each as a C-contiguous array."""
    return tuple(np.ascontiguousarray(sample[c]) for c in columns)


def device_normalize_ms(norm: dict | None, batch: int = 8, size: tuple[int, int] = (640, 640),
                        reps: int = 30) -> dict:
    """ms per sample of ``DeviceInput.images`` (uint8 NHWC -> normalised float NCHW) on a CPU batch.

    This is the work that ``split_device_normalize`` moves out of the loader workers; on a GPU it runs
    on the device, here it is timed on the CPU (one core when pinned) as an upper bound.
    """
    import torch

    from textdet.runtime.feed import DeviceInput

    if norm is None:
        return {"error": "the pipeline does not end with NormalizeImage + ToCHWImage; nothing moved"}
    if len(os.sched_getaffinity(0)) == 1:
        torch.set_num_threads(1)  # pinned: one core, like the rest of (a)
    feed = DeviceInput(torch.device("cpu"), norm)
    x = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (batch, *size, 3), dtype=np.uint8))
    ms = best_ms(lambda: feed.images(x), reps)
    return {"batch": batch, "size": list(size), "torch_threads": torch.get_num_threads(),
            "ms_per_batch": ms, "ms_per_sample": ms / batch}


def textdet_composes(pipeline: list, samples: list[dict]) -> tuple[dict[str, Any], dict | None]:
    """textdet's five (a) sides as built pipelines, by side name, and the normalisation moved to the device.

    The decoded-image cache (train.dataset.cache_images): from the second epoch on, a worker copies the decoded
    image out of shared memory instead of decoding the JPEG. The warm-up pass fills it, so the timed rounds
    measure that steady state (epochs 2..N of a run).
    """
    from textdet.data.cache import CachedDecode, ImageCache, image_sizes
    from textdet.data.pipeline import build_transforms
    from textdet.runtime.feed import split_device_normalize

    worker, norm = split_device_normalize(build_transforms(copy.deepcopy(pipeline), fuse=True))
    full = build_transforms(copy.deepcopy(pipeline), fuse=True)
    sequential = build_transforms(copy.deepcopy(pipeline), fuse=False)
    paths = [s["img_path"] for s in samples]
    worker_cached, _ = split_device_normalize(build_transforms(copy.deepcopy(pipeline), fuse=True))
    full_cached = build_transforms(copy.deepcopy(pipeline), fuse=True)
    for compose in (worker_cached, full_cached):
        compose.transforms[0] = CachedDecode(compose.transforms[0], ImageCache(paths, image_sizes(paths)))
    composes = {
        "textdet": worker,
        "textdet-full": full,
        "textdet-sequential": sequential,
        "textdet-cached": worker_cached,
        "textdet-full-cached": full_cached,
    }
    return composes, norm


def bench_pipeline(args: argparse.Namespace, mo: dict | None, cfg: dict, samples: list[dict]) -> dict:
    """(a): MindOCR's pipeline vs textdet's *training worker* pipeline, i.e. what a loader worker runs:
    ``split_device_normalize(build_transforms(pipeline, fuse=True))`` (a trailing NormalizeImage +
    ToCHWImage moves to the device, where ``DeviceInput`` normalises whole uint8 batches). That device
    step is timed separately on a CPU batch (``device_normalize``), and the full textdet pipeline with
    NormalizeImage + ToCHWImage in the worker ("textdet-full", the figure reported before 2026-12-02)
    and the sequential reference ("textdet-sequential") are timed in the same interleaved rounds."""
    pipeline = cfg["train"]["dataset"]["transform_pipeline"]
    columns = list(cfg["train"]["dataset"].get("output_columns") or ["image"])
    res: dict[str, Any] = {
        "transforms": [next(iter(e)) if isinstance(e, dict) else e for e in pipeline],
        "output_columns": columns,
        "images": len(samples),
        "passes_per_round": args.passes,
    }
    errors: dict[str, int] = {}

    composes, norm = textdet_composes(pipeline, samples)
    res["device_normalize_params"] = norm
    rngs = {name: np.random.default_rng(args.seed) for name in TEXTDET_SIDES}

    def run_side(name: str, fn: Callable[[dict], dict]) -> None:
        """``args.passes`` passes of ``fn`` over the samples, each output handed off; failures counted."""
        for _ in range(args.passes):
            for s in samples:
                try:
                    contiguous_handoff(fn(dict(s)), columns)
                except Exception as err:  # both loaders skip a failing sample; count it
                    errors[name] = errors.get(name, 0) + 1
                    if errors[name] == 1:
                        log(f"   {name}: a sample failed ({type(err).__name__}: {err}); counting and going on")

    def textdet_side(name: str) -> Callable[[], None]:
        """One round of textdet side ``name``: its pipeline with its own RNG."""
        compose = composes[name]
        rng = rngs[name]
        return lambda: run_side(name, lambda s: compose(s, rng))

    sides: dict[str, Any] = {name: textdet_side(name) for name in TEXTDET_SIDES}
    if mo is not None:
        # MindOCR: exactly DetDataset's construction (create_transforms with its global_config)
        ms_transforms = mo["create_transforms"](copy.deepcopy(pipeline), dict(MINDOCR_GLOBAL_CONFIG))
        np.random.seed(args.seed)
        mo["ms"].dataset.config.set_seed(args.seed)
        run_transforms = mo["run_transforms"]
        sides["mindocr"] = lambda: run_side("mindocr", lambda s: run_transforms(s, ms_transforms))
        res["mindocr_transforms"] = [type(t).__name__ for t in ms_transforms]
    res["textdet_transforms"] = [type(t).__name__ for t in composes["textdet"].transforms]
    res["textdet_full_transforms"] = [type(t).__name__ for t in composes["textdet-full"].transforms]
    order = [n for n in ("mindocr", *TEXTDET_SIDES) if n in sides]

    # warm-up: every side sees every image once (file cache, lazy imports, allocator)
    saved = args.passes
    args.passes = 1
    for n in order:
        sides[n]()
    args.passes = saved
    errors.clear()

    res["loadavg_before"] = loadavg()
    times = interleaved({n: sides[n] for n in order}, args.rounds)
    res["loadavg_after"] = loadavg()
    n_per_round = len(samples) * args.passes
    for n in order:
        sps = [n_per_round / t for t in times[n]]
        res[n] = {
            "samples_per_s": summarize(sps),
            "ms_per_sample": 1000.0 / statistics.median(sps),
            "failed_samples": errors.get(n, 0),
        }
    try:
        res["device_normalize"] = device_normalize_ms(norm)
    except Exception as err:
        res["device_normalize"] = fail("a (device normalise)", err)
    if "mindocr" in times:
        for key, side in RATIO_KEYS.items():
            res[key] = summarize([tm / tt for tm, tt in zip(times["mindocr"], times[side], strict=True)])
        dn = res["device_normalize"].get("ms_per_sample")
        if dn is not None:  # worker path + the device step run on this same CPU core: a pessimistic total
            normalize_seconds = dn * n_per_round / 1000.0
            res["ratio_worker_plus_cpu_normalize_over_mindocr"] = summarize(
                [tm / (tt + normalize_seconds) for tm, tt in zip(times["mindocr"], times["textdet"], strict=True)])

    # (b) per-transform ms
    try:
        res["per_transform_ms"] = per_transform(args, mo, pipeline, samples)
    except Exception as err:
        res["per_transform_ms"] = fail("b (per-transform)", err)
    return res


def mindocr_per_transform(mo: dict, pipeline: list, samples: list[dict], reps: int, seed: int) -> dict[str, float]:
    """(b), MindOCR's side: ms per sample in each transform (a timer around each), over ``reps`` passes."""
    ms_transforms = mo["create_transforms"](copy.deepcopy(pipeline), dict(MINDOCR_GLOBAL_CONFIG))
    np.random.seed(seed)
    acc: dict[str, float] = {}
    n = 0
    for _ in range(reps):
        for s in samples:
            data = dict(s)
            try:
                for t in ms_transforms:
                    t0 = time.perf_counter()
                    data = t(data)
                    acc[type(t).__name__] = acc.get(type(t).__name__, 0.0) + time.perf_counter() - t0
                n += 1
            except Exception:
                continue
    return {k: 1000.0 * v / n for k, v in acc.items()}


def per_transform(args: argparse.Namespace, mo: dict | None, pipeline: list, samples: list[dict]) -> dict:
    """(b): ms per sample in each transform, MindOCR's and textdet's (``Compose.timing``), plus the what-ifs."""
    from textdet.data.pipeline import build_transforms
    from textdet.runtime.feed import split_device_normalize

    reps = max(1, args.profile_passes)
    out: dict[str, Any] = {"samples": reps * len(samples), "loadavg_before": loadavg()}
    if mo is not None:
        out["mindocr"] = mindocr_per_transform(mo, pipeline, samples, reps, args.seed + 1)

    for label, fuse in (("textdet", True), ("textdet-full", True), ("textdet-sequential", False)):
        compose = build_transforms(copy.deepcopy(pipeline), fuse=fuse)
        if label == "textdet":  # the training worker path (NormalizeImage + ToCHWImage on the device)
            compose = split_device_normalize(compose)[0]
        compose.timing = True
        rng = np.random.default_rng(args.seed + 1)
        for _ in range(reps):
            for s in samples:
                try:
                    compose(dict(s), rng)
                except Exception:
                    continue
        out[label] = {k: 1000.0 * v["seconds"] / max(1, v["count"]) for k, v in compose.stats.items()}
    out["loadavg_after"] = loadavg()
    try:
        out["what_if"] = what_if(samples)
    except Exception as err:
        out["what_if"] = fail("b (what-if)", err)
    return out


def what_if(samples: list[dict]) -> dict:
    """Micro-benchmarks of cheaper ways to do textdet's dominant steps (no textdet code is changed)."""
    from textdet.data.colour import RandomColorAdjust
    from textdet.data.resize import NormalizeImage, ToCHWImage

    buf = np.fromfile(samples[0]["img_path"], dtype=np.uint8)
    full = cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    crop = np.ascontiguousarray(cv2.resize(full, (640, 360)))
    crop = cv2.copyMakeBorder(crop, 0, 280, 0, 0, cv2.BORDER_CONSTANT, value=0)  # 640x640, like a padded crop
    out: dict[str, float] = {}
    out["decode_full_cv2_imdecode+RGB"] = best_ms(
        lambda: cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    )
    if hasattr(cv2, "IMREAD_COLOR_RGB"):
        out["decode_full_IMREAD_COLOR_RGB"] = best_ms(lambda: cv2.imdecode(buf, cv2.IMREAD_COLOR_RGB))
    out["decode_reduced_2_IMREAD_REDUCED_COLOR_2"] = best_ms(lambda: cv2.imdecode(buf, cv2.IMREAD_REDUCED_COLOR_2))
    norm = NormalizeImage(mean="imagenet", std="imagenet", is_hwc=True)
    chw = ToCHWImage()
    rng = np.random.default_rng(0)
    out["textdet_NormalizeImage+ToCHWImage_640"] = best_ms(lambda: chw(norm({"image": crop}, rng), rng))
    mean = np.array([123.675, 116.28, 103.53])
    std = np.array([58.395, 57.12, 57.375])
    if hasattr(cv2.dnn, "Image2BlobParams"):
        params = cv2.dnn.Image2BlobParams()
        params.scalefactor = tuple((1.0 / std).tolist())
        params.mean = tuple(mean.tolist())
        params.size = (640, 640)
        params.ddepth = cv2.CV_32F
        params.datalayout = cv2.dnn.DNN_LAYOUT_NCHW
        ref = chw(norm({"image": crop}, rng), rng)["image"]
        blob = cv2.dnn.blobFromImageWithParams(crop, params)[0]
        out["cv2.dnn.blobFromImageWithParams_640 (fused normalize+CHW)"] = best_ms(
            lambda: cv2.dnn.blobFromImageWithParams(crop, params)[0]
        )
        out["  max_abs_diff_vs_textdet"] = float(np.abs(blob - ref).max())
    out["uint8_CHW_copy_only_640 (normalize on the device)"] = best_ms(
        lambda: np.ascontiguousarray(crop.transpose(2, 0, 1))
    )
    out["uint8_HWC_no_copy (normalize+CHW on the device)"] = 0.0
    mat = cv2.getRotationMatrix2D((640.0, 360.0), 7.0, 1.3)
    out["warpAffine_1280x720_to_640x640_linear"] = best_ms(
        lambda: cv2.warpAffine(full, mat, (640, 640), flags=cv2.INTER_LINEAR)
    )
    color = RandomColorAdjust(brightness=32.0 / 255, saturation=0.5)
    out["textdet_color_adjust_on_640"] = best_ms(lambda: color.apply(crop, (1.05, 1.0, 1.3, 0.0)))
    # brightness then saturation as ONE 3x3 colour matrix (uint8 in/out, one clip at the end)
    brightness, saturation = 1.05, 1.3
    gray = np.array([0.299, 0.587, 0.114])
    cmat = (brightness * (saturation * np.eye(3) + (1 - saturation) * np.tile(gray, (3, 1)))).astype(np.float32)
    out["color_as_one_cv2.transform_640"] = best_ms(lambda: cv2.transform(crop, cmat))
    as_one_matrix = cv2.transform(crop, cmat).astype(np.int16)
    textdet_colour = color.apply(crop, (brightness, 1.0, saturation, 0.0)).astype(np.int16)
    out["  max_abs_diff_vs_textdet (uint8 levels)"] = float(np.abs(as_one_matrix - textdet_colour).max())
    return out
