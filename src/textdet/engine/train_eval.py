"""Evaluation while training: which epochs end with one (``system.val_start_epoch``,
``system.val_interval``), and running it on the eval set at the precision ``textdet eval`` uses."""

from __future__ import annotations

import logging
import time

import torch
from torch import nn

from textdet.config import Config
from textdet.data.dataset import DetDataset
from textdet.engine import build
from textdet.engine.amp import amp_settings
from textdet.engine.evaluator import Evaluator
from textdet.engine.feed import DeviceInput

logger = logging.getLogger("textdet")


class TrainEvaluation:
    """The eval-set ``Evaluator`` of a training run and its schedule; ``run`` logs and times each one."""

    def __init__(self, cfg: Config, evaluator: Evaluator) -> None:
        self.system = cfg.system
        self.evaluator = evaluator

    def due(self, epoch: int) -> bool:
        """Whether (1-based) ``epoch`` ends with an evaluation."""
        if epoch < self.system.val_start_epoch:
            return False
        return (epoch - self.system.val_start_epoch) % self.system.val_interval == 0

    def run(self, model: nn.Module) -> dict:
        """The metric's results for ``model``, and ``eval_time`` in seconds."""
        t0 = time.perf_counter()
        perf = self.evaluator.run(model)
        seconds = time.perf_counter() - t0
        logger.info("Performance: %s, eval time: %.3f s", {k: round(v, 4) for k, v in perf.items()}, seconds)
        return {**perf, "eval_time": seconds}


def build_train_evaluation(cfg: Config, eval_set: DetDataset, normalize: dict | None, postprocess, metric,
                           device: torch.device, rank: int, world_size: int,
                           progress: bool) -> TrainEvaluation:
    """The eval loader (sharded over the ranks) and an Evaluator with ``system.amp_level_infer``, as
    `textdet eval`; ``normalize``: what the device normalises (``build.split_device_normalize``)."""
    loader = build.build_split_loader(cfg, "eval", eval_set, rank, world_size, device)
    amp = amp_settings(cfg.system.amp_level_infer, device.type, cfg.system.amp_dtype)
    evaluator = Evaluator(loader, postprocess, metric, DeviceInput(device, normalize), amp, progress)
    return TrainEvaluation(cfg, evaluator)
