"""Evaluation while training: which epochs end with one (``system.val_start_epoch``,
``system.val_interval``, and the last), and running it on the eval set at the precision ``textdet eval``
uses."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from textdet.config import Config
from textdet.data.dataset import DetDataset
from textdet.data.pipeline import Compose
from textdet.engine import build
from textdet.engine.amp import inference_amp_settings
from textdet.engine.evaluator import Evaluator, ThresholdSweep
from textdet.engine.feed import DeviceInput
from textdet.engine.guard import StartGuard

logger = logging.getLogger("textdet")


class TrainEvaluation:
    """The eval-set ``Evaluator`` of a training run and its schedule; ``run`` logs and times each one.
    ``guard``: the start guard (``train.guard_holdout``), which may evaluate the start's weights instead."""

    def __init__(self, cfg: Config, evaluator: Evaluator, guard: StartGuard | None = None) -> None:
        self.system = cfg.system
        self.num_epochs = cfg.scheduler.num_epochs
        self.evaluator = evaluator
        self.guard = guard
        self.start_perf: dict | None = None  # the start's eval-split scores: computed once, when first kept

    def due(self, epoch: int) -> bool:
        """Whether (1-based) ``epoch`` ends with an evaluation: MindOCR's rule, and the last epoch always (as
        MMEngine's loop does), so that a run with a sparse cadence still ends with its score."""
        if epoch == self.num_epochs:
            return True
        if epoch < self.system.val_start_epoch:
            return False
        return (epoch - self.system.val_start_epoch) % self.system.val_interval == 0

    def run(self, model: nn.Module) -> tuple[dict, nn.Module, dict | None]:
        """The metric's results and ``eval_time`` in seconds (and the guard's record), the model they
        are for (``model``, or the start's when the guard keeps it) and the thresholds they were scored
        with when the guard re-chose them (None: the config's)."""
        t0 = time.perf_counter()
        chosen, record, thresholds = model, {}, None
        if self.guard is not None:
            chosen, record, thresholds = self.guard.choose(model)
        if chosen is not model:
            if self.start_perf is None:
                self.start_perf = self.evaluator.run(chosen)
            perf = self.start_perf
        elif thresholds is None:
            perf = self.evaluator.run(model)
        else:
            with thresholds_set(self.evaluator.postprocess, thresholds):
                perf = self.evaluator.run(model)
            record.update(thresholds)
        seconds = time.perf_counter() - t0
        logger.info("Performance: %s, eval time: %.3f s", {k: round(v, 4) for k, v in perf.items()}, seconds)
        return {**perf, **record, "eval_time": seconds}, chosen, thresholds


@contextmanager
def thresholds_set(postprocess, thresholds: dict) -> Iterator[None]:
    """``postprocess`` with ``thresholds`` (binary_thresh, box_thresh) for the block, its own after."""
    own = {name: getattr(postprocess, name) for name in thresholds}
    for name, value in thresholds.items():
        setattr(postprocess, name, value)
    try:
        yield
    finally:
        for name, value in own.items():
            setattr(postprocess, name, value)


def build_train_evaluation(cfg: Config, eval_set: DetDataset, normalize: dict | None, postprocess, metric,
                           device: torch.device, rank: int, world_size: int, progress: bool,
                           eval_pipeline: Compose, indicator: str) -> TrainEvaluation:
    """The eval loader (sharded over the ranks) and an Evaluator with ``system.amp_level_infer``, as
    `textdet eval`; ``normalize``: what the device normalises (``build.split_device_normalize``). With
    ``train.guard_holdout``, the start guard too: the set-aside training photos, read with ``eval_pipeline``,
    and the model ``model.pretrained`` names (also after a resume); with ``train.guard_thresholds``, a
    threshold grid scored there."""
    amp = inference_amp_settings(cfg, device.type)

    def evaluator_over(dataset: DetDataset, post, scorer) -> Evaluator:
        loader = build.build_split_loader(cfg, "eval", dataset, rank, world_size, device)
        return Evaluator(loader, post, scorer, DeviceInput(device, normalize), amp, progress)

    guard = None
    aside_every = build.guard_aside_every(cfg)
    if aside_every:
        aside_set = build.build_guard_dataset(cfg, eval_pipeline, aside_every)
        also = ""
        if cfg.train.guard_thresholds:
            also = "; the thresholds for the trained model are re-chosen there (train.guard_thresholds)"
        logger.info("start guard (train.guard_holdout %g): %d training photos set aside (every %dth), "
                    "not trained on%s", cfg.train.guard_holdout, len(aside_set), aside_every, also)
        aside_post = build.build_postprocess_from_config(cfg)
        aside_metric = build.build_metric_from_config(cfg)
        aside = evaluator_over(aside_set, aside_post, aside_metric)
        if cfg.train.guard_thresholds:
            aside.sweep = ThresholdSweep(aside_post, aside_metric)
        start_model = build.build_start_model(cfg, device)
        guard = StartGuard(start_model, aside, len(aside_set), indicator, cfg.train.guard_margin,
                           cfg.train.guard_regions)
    return TrainEvaluation(cfg, evaluator_over(eval_set, postprocess, metric), guard)
