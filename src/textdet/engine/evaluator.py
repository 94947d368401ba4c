"""Evaluation: forward, post-process and score the eval set; counts summed over ranks."""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import nn

from textdet.engine import distributed
from textdet.engine.amp import AmpSettings
from textdet.engine.feed import DeviceInput


def progress_bar(show: bool, total: int, desc: str):
    """A tqdm bar when ``show`` (the CLI decides: a TTY and no --no-progress), else None."""
    if not show:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, leave=False, dynamic_ncols=True)


def ground_truth(batch: dict) -> tuple[list, list]:
    """GT polygons in original-image pixels and their ignore tags, per image of the batch.

    DetResize scales the GT polygons with the image (x * scale_w, y * scale_h); detections are
    mapped back to the original image through ``shape_list``, so the GT goes back the same way.
    Rounding to 1e-3 px restores integer ICDAR coordinates exactly before the metric truncates them.
    """
    shapes = batch["shape_list"].numpy() if "shape_list" in batch else None
    polys = []
    for i, ps in enumerate(batch["polys"]):
        scale = np.array([shapes[i][3], shapes[i][2]], dtype=np.float64) if shapes is not None else np.ones(2)
        polys.append([np.round(np.asarray(p, dtype=np.float64) / scale, 3) for p in ps])
    tags = [np.asarray(t, dtype=bool) for t in batch["ignore_tags"]]
    return polys, tags


class Evaluator:
    """Runs a model over an eval loader and returns ``metric.compute()`` (recall, precision, f-score)."""

    def __init__(self, loader, postprocess, metric, feed: DeviceInput, amp: AmpSettings, progress: bool = False):
        self.loader, self.postprocess, self.metric = loader, postprocess, metric
        self.feed, self.amp, self.progress = feed, amp, progress
        self.last_seconds = 0.0
        self.images = 0

    def _host_maps(self, preds: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Only the probability map goes to the host; on a GPU the bitmap is thresholded there too
        (the CPU threshold is a third of post-processing; a uint8 bitmap copies 4x less than floats)."""
        name = getattr(self.postprocess, "pred_name", "binary")
        prob = preds[name]
        out = {name: prob.float().cpu()}
        thresh = getattr(self.postprocess, "binary_thresh", None)
        if prob.is_cuda and thresh is not None:
            out["bitmap"] = (prob >= thresh).cpu()
        return out

    @torch.no_grad()
    def run(self, model: nn.Module) -> dict[str, float]:
        was_training = model.training
        model.eval()
        self.metric.reset()
        t0, self.images = time.perf_counter(), 0
        bar = progress_bar(self.progress and distributed.is_main(), len(self.loader), "eval")
        for batch in self.loader:
            images = self.feed.images(batch["image"])
            with self.amp.context():
                preds = model(images)
            shape_list = batch["shape_list"].numpy() if "shape_list" in batch else None
            dets = self.postprocess(self._host_maps(preds), shape_list)
            gts, tags = ground_truth(batch)
            self.metric.update([d["polys"] for d in dets], gts, tags)
            self.images += len(gts)
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
        if distributed.info().enabled:  # NCCL reduces device tensors only
            counts = torch.as_tensor(np.asarray(self.metric.counts()), dtype=torch.int64, device=self.feed.device)
            self.metric.set_counts(distributed.all_reduce_sum(counts).cpu().numpy())
        model.train(was_training)
        self.last_seconds = time.perf_counter() - t0
        return {k: float(v) for k, v in self.metric.compute().items()}
