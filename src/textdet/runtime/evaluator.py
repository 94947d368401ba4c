"""Evaluation: forward, post-process and score the eval set; counts summed over ranks."""

from __future__ import annotations

import copy
import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from textdet.data.tiling import TileSpec
from textdet.runtime import ranks
from textdet.runtime.amp import AmpSettings
from textdet.runtime.buckets import mask_padding
from textdet.runtime.feed import DeviceInput
from textdet.runtime.onnx_model import OnnxModel
from textdet.runtime.tiles import tiled_forward


def progress_bar(show: bool, total: int, desc: str):
    """A tqdm bar, a no-op one unless ``show`` (the CLI decides: a TTY and no --no-progress)."""
    return tqdm(total=total, desc=desc, leave=False, dynamic_ncols=True, disable=not show)


def ground_truth(batch: dict) -> tuple[list, list]:
    """GT polygons mapped back to original-image pixels through ``shape_list`` (as detections are), and ignore
    tags, per image. Rounding to 1e-3 px restores integer ICDAR coordinates before the metric truncates
    them."""
    shapes = batch["shape_list"].numpy() if "shape_list" in batch else None
    polys = []
    for i, image_polys in enumerate(batch["polys"]):
        scale = np.array([shapes[i][3], shapes[i][2]], dtype=np.float64) if shapes is not None else np.ones(2)
        polys.append([np.round(np.asarray(p, dtype=np.float64) / scale, 3) for p in image_polys])
    tags = [np.asarray(t, dtype=bool) for t in batch["ignore_tags"]]
    return polys, tags


ORACLE = "tuned on the evaluation split (oracle)"


# The grid of ``textdet eval --sweep`` and of the start guard's re-choice. Fine-tuned detectors' best pairs
# sit low in binary_thresh and high in box_thresh, past the corner of a 0.2-0.7 x 0.3-0.8 grid
# (docs/decisions/thresholds-while-fine-tuning.md).
SWEEP_BINARY_THRESH = (0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7)
SWEEP_BOX_THRESH = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.93)


class ThresholdSweep:
    """Score every (binary_thresh, box_thresh) pair of a grid on the same probability maps (one model run).
    Each binary_thresh post-processes a map once, at the lowest box_thresh, and each box_thresh keeps the
    candidates scoring at least that much: DBPostprocess drops a candidate only for ``score < box_thresh``, so
    every pair scores exactly as a run with those two thresholds."""

    def __init__(self, postprocess, metric, binary_thresh=SWEEP_BINARY_THRESH,
                 box_thresh=SWEEP_BOX_THRESH) -> None:
        self.fixed = {"binary_thresh": postprocess.binary_thresh, "box_thresh": postprocess.box_thresh}
        self.box = sorted(box_thresh)
        self.posts = {}
        for b in binary_thresh:
            self.posts[b] = copy.copy(postprocess)
            self.posts[b].binary_thresh, self.posts[b].box_thresh = b, self.box[0]
        self.metrics = {(b, t): copy.deepcopy(metric) for b in binary_thresh for t in self.box}

    def reset(self) -> None:
        for m in self.metrics.values():
            m.reset()

    def update(self, prob, shape_list, gts: list, tags: list) -> None:
        for b, post in self.posts.items():
            dets = post(prob, shape_list)
            for t in self.box:
                kept = [[p for p, s in zip(d["polys"], d["scores"], strict=True) if s >= t] for d in dets]
                self.metrics[(b, t)].update(kept, gts, tags)

    def results(self) -> dict:
        """``{"fixed": the config's thresholds, "grid": [...], "best": the grid's best pair, labelled oracle}``."""
        grid = [{"binary_thresh": b, "box_thresh": t, **m.compute()} for (b, t), m in self.metrics.items()]
        key = next(iter(self.metrics.values())).main_indicator
        best = best_row(grid, key, self.fixed)
        return {"fixed": self.fixed, "grid": grid, "best": {**best, "note": ORACLE}}


def best_row(grid: list[dict], key: str, fixed: dict) -> dict:
    """The grid's row with the highest ``key``; among equal ones, the pair nearest the config's (``fixed``).
    A few photos often score several pairs alike (6 handwritten pages: every box_thresh at binary_thresh 0.2),
    and the pair the model was published with is the safer guess among them than the grid's first."""
    top = max(row[key] for row in grid)
    tied = [row for row in grid if row[key] == top]
    return min(tied, key=lambda row: abs(row["binary_thresh"] - fixed["binary_thresh"])
               + abs(row["box_thresh"] - fixed["box_thresh"]))


def sweep_report(sweep: dict) -> str:
    """The grid as a table of f-scores (rows binary_thresh, columns box_thresh) and the labelled best pair."""
    boxes, best, fixed = sorted({r["box_thresh"] for r in sweep["grid"]}), sweep["best"], sweep["fixed"]
    lines = ["f-score by binary_thresh (rows) and box_thresh (columns):", " " * 6 + "".join(f"{t:7.2f}" for t in boxes)]
    for i in range(0, len(sweep["grid"]), len(boxes)):  # the grid is row-major
        row = sweep["grid"][i : i + len(boxes)]
        lines.append(f"{row[0]['binary_thresh']:6.2f}" + "".join(f"{r['f-score']:7.4f}" for r in row))
    return "\n".join([*lines, f"best pair, {ORACLE}: binary_thresh {best['binary_thresh']}, box_thresh "
                      f"{best['box_thresh']}: recall {best['recall']:.4f}, precision {best['precision']:.4f}, f-score "
                      f"{best['f-score']:.4f}; report the fixed-threshold result (binary_thresh "
                      f"{fixed['binary_thresh']}, box_thresh {fixed['box_thresh']}) as the score"])


class Evaluator:
    """A model over an eval loader -> ``metric.compute()``; post-processing overlaps the next forward (a thread)."""

    def __init__(self, loader, postprocess, metric, feed: DeviceInput, amp: AmpSettings, progress: bool = False,
                 sweep: ThresholdSweep | None = None, per_image: bool = False, tile: TileSpec | None = None,
                 runtime: str = "torch"):
        self.loader, self.postprocess, self.metric, self.sweep = loader, postprocess, metric, sweep
        self.feed, self.amp, self.progress = feed, amp, progress
        # "onnxruntime": each run traces the model and runs it in ONNX Runtime (CPU inference, fp32)
        self.runtime = runtime
        # pages larger than this are read in tiles (the loader kept them at their own pixels)
        self.tile = tile
        # per_image: keep each photo's detections and labels (the eval report draws them); None: keep nothing
        self.per_image: list[dict] | None = [] if per_image else None
        self.images = 0
        self.shapes: Counter = Counter()
        self.parts: dict[str, float] = {}

    def _host_maps(
        self, preds: dict[str, torch.Tensor], valid_hw: torch.Tensor | None
    ) -> dict[str, torch.Tensor]:
        """The probability map to the host (on an accelerator also the bitmap, thresholded there: 4x fewer
        bytes), zero outside each image's real region when the batch was padded (``valid_hw``)."""
        name = getattr(self.postprocess, "pred_name", "binary")
        prob = preds[name] if valid_hw is None else mask_padding(preds[name], valid_hw)
        out = {name: prob.float().cpu()}
        thresh = getattr(self.postprocess, "binary_thresh", None)
        if prob.device.type != "cpu" and thresh is not None:
            out["bitmap"] = (prob >= thresh).cpu()
        return out

    def _forward(self, model: nn.Module, images: torch.Tensor, batch: dict) -> dict[str, torch.Tensor]:
        """The model's maps; with ``tile``, pages larger than a tile (kept at their own pixels) read in
        tiles."""
        if self.tile is None or "shape_list" not in batch:
            return model(images)
        page_sizes = [(int(h), int(w)) for h, w in batch["shape_list"][:, :2].tolist()]
        return tiled_forward(model, images, page_sizes, self.tile)

    def _score(self, host: dict, batch: dict) -> None:
        """Post-process one batch and update the metric (and the sweep); runs in the worker thread."""
        start = time.perf_counter()
        shape_list = batch["shape_list"].numpy() if "shape_list" in batch else None
        dets = self.postprocess(host, shape_list)
        middle = time.perf_counter()
        gts, tags = ground_truth(batch)
        self.metric.update([d["polys"] for d in dets], gts, tags)
        if self.per_image is not None:
            paths = batch.get("img_path", [None] * len(dets))  # in the batch when output_columns has img_path
            for det, gt, tag, path in zip(dets, gts, tags, paths, strict=True):
                self.per_image.append({"img_path": path, "polys": det["polys"], "scores": det["scores"],
                                       "gts": gt, "ignore_tags": tag})
        if self.sweep is not None:  # the probabilities only: "bitmap" holds the config's binary_thresh
            self.sweep.update(host[getattr(self.postprocess, "pred_name", "binary")], shape_list, gts, tags)
        self.parts["postprocess"] += middle - start
        self.parts["metric"] += time.perf_counter() - middle

    @torch.no_grad()
    def run(self, model: nn.Module) -> dict[str, float]:
        was_training = model.training
        model.eval()
        self.metric.reset()
        if self.sweep is not None:
            self.sweep.reset()
        if self.per_image is not None:
            self.per_image = []
        self.images = 0
        self.shapes = Counter()  # input shapes (H, W) -> batches: a graph compiler builds one graph each
        self.parts = dict.fromkeys(("data", "forward", "postprocess", "metric"), 0.0)
        forward_model = model
        if self.runtime == "onnxruntime" and isinstance(model, nn.Module):  # an ONNX model runs as it is
            start = time.perf_counter()
            forward_model = OnnxModel.from_torch(model)
            self.parts["trace"] = time.perf_counter() - start
        bar = progress_bar(self.progress and ranks.is_main(), len(self.loader), "eval")
        pending, tick = None, time.perf_counter()
        with ThreadPoolExecutor(1, thread_name_prefix="eval-score") as pool:
            for batch in self.loader:
                start = time.perf_counter()
                self.parts["data"] += start - tick
                images = self.feed.images(batch["image"])
                self.shapes[tuple(images.shape[-2:])] += 1
                with self.amp.context():
                    host = self._host_maps(self._forward(forward_model, images, batch), batch.get("valid_hw"))
                self.parts["forward"] += time.perf_counter() - start
                if pending is not None:  # at most one batch scored while the next one runs the model
                    pending.result()
                pending = pool.submit(self._score, host, batch)
                self.images += len(batch["polys"])
                bar.update(1)
                tick = time.perf_counter()
            if pending is not None:
                pending.result()
        bar.close()
        if ranks.info().enabled:
            self._sum_over_ranks()
        model.train(was_training)
        return {k: float(v) for k, v in self.metric.compute().items()}


    def _sum_over_ranks(self) -> None:
        """Every rank's counts summed (the sweep's too: ranks must agree on the thresholds it picks), in
        one all-reduce; NCCL reduces device tensors only."""
        scorers = [self.metric]
        if self.sweep is not None:
            scorers.extend(self.sweep.metrics.values())
        counts = np.stack([np.asarray(scorer.counts(), dtype=np.float64) for scorer in scorers])
        summed = ranks.all_reduce_sum(torch.as_tensor(counts, device=self.feed.device)).cpu().numpy()
        for scorer, scorer_counts in zip(scorers, summed, strict=True):
            scorer.set_counts(scorer_counts)


def timed_run(evaluator: Evaluator, model, checkpoint: str) -> dict:
    """``textdet eval``'s result: the metric, images, seconds (tracing for ONNX Runtime included), images/s,
    the runtime, the checkpoint path (and the sweep)."""
    t0 = time.perf_counter()
    perf = evaluator.run(model)
    dt = time.perf_counter() - t0
    out = {
        **perf,
        "images": evaluator.images,
        "eval_time": dt,
        "img_per_s": evaluator.images / max(dt, 1e-9),
        "input_shapes": len(evaluator.shapes),
        "runtime": "onnxruntime" if isinstance(model, OnnxModel) else evaluator.runtime,
        "checkpoint": os.path.abspath(checkpoint),
    }
    if evaluator.sweep is not None:
        out["sweep"] = evaluator.sweep.results()
    if evaluator.per_image is not None:
        out["per_image"] = evaluator.per_image
    return out


def evaluate_onnx(evaluator: Evaluator, onnx_path: str, device: str | None = None) -> dict:
    """``textdet eval --onnx``: ``timed_run``'s keys plus "onnx", the model run by ONNX Runtime on ``device``
    (``evaluator``'s input stays on the CPU: ONNX Runtime takes numpy)."""
    model = OnnxModel(onnx_path, device=device)
    result = timed_run(evaluator, model, onnx_path)
    return {**result, "onnx": result["checkpoint"]}
