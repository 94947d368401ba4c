"""Evaluation batching: ``eval.shape_buckets`` and ``eval.loader.batch_size`` > 1 turned into the loader's
collate and batch sampler (data/buckets.py), and the padding masked out of the probability map before
post-processing."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils.data import Sampler

from textdet.data import buckets as bucketing
from textdet.data.dataset import DetDataset, collate
from textdet.data.resize import DetResize

logger = logging.getLogger("textdet")


@dataclass
class EvalBatching:
    """What ``build_loader`` takes: the collate function and, with buckets, a batch sampler factory."""

    collate_fn: Callable
    batches: Callable[[Sampler, int], Sampler] | None = None
    buckets: list[tuple[int, int]] | None = None


def _pipeline_resize(dataset: DetDataset) -> DetResize | None:
    steps = getattr(dataset.transform, "transforms", [])
    return next((step for step in steps if isinstance(step, DetResize)), None)


def dataset_sizes(dataset: DetDataset) -> list[tuple[int, int]]:
    """Each record's (h, w) after the eval pipeline's DetResize, from the image headers."""
    resize = _pipeline_resize(dataset)
    paths = [os.path.join(dataset.image_dir, record.rel_path) for record in dataset.records]
    return [bucketing.resized_size(bucketing.stored_size(path), resize) for path in paths]


def eval_batching(setting: str | list[tuple[int, int]] | None, dataset: DetDataset,
                  batch_size: int) -> EvalBatching:
    """``setting``: ``eval.shape_buckets`` as ``config.loader.parse_buckets`` returns it. No buckets and
    batch 1: each image at its own size. Batch > 1 without buckets: each batch padded to its largest image.
    Buckets (``auto`` or [H, W] pairs): every batch holds images of one bucket, padded to it."""
    if setting is None:
        return EvalBatching(collate if batch_size == 1 else bucketing.PadCollate())
    sizes = dataset_sizes(dataset)
    buckets = bucketing.choose_buckets(sizes) if setting == "auto" else setting
    bucket_of = [bucketing.bucket_for(size, buckets) for size in sizes]
    used = [list(buckets[i]) for i in sorted(set(bucket_of))]
    source = "chosen from the data set" if setting == "auto" else "as given"
    logger.info(
        "eval.shape_buckets: %d shape(s) %s for %d images (%s), batch %d",
        len(used),
        used,
        len(sizes),
        source,
        batch_size,
    )

    def batches(sampler: Sampler, size: int) -> Sampler:
        return bucketing.BucketBatchSampler(sampler, bucket_of, size)

    return EvalBatching(bucketing.PadCollate(buckets), batches, buckets)


def mask_padding(prob: torch.Tensor, valid_hw: torch.Tensor) -> torch.Tensor:
    """``prob`` (N, 1, H, W) with zeros outside each image's real ``valid_hw`` (N, 2) region (top-left): no
    box can start in the padding, and a box at the real edge ends there as it would in the unpadded image."""
    height, width = prob.shape[-2:]
    valid_hw = valid_hw.to(prob.device)
    rows = torch.arange(height, device=prob.device).view(1, height, 1) < valid_hw[:, 0].view(-1, 1, 1)
    cols = torch.arange(width, device=prob.device).view(1, 1, width) < valid_hw[:, 1].view(-1, 1, 1)
    return prob * (rows & cols).unsqueeze(1).to(prob.dtype)
