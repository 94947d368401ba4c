"""Evaluation while training: which epochs end with one (``system.val_start_epoch``,
``system.val_interval``, and the last), and running it on the eval set at the precision ``textdet eval``
uses."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

from textdet.engine.guard import StartGuard
from textdet.runtime.evaluator import Evaluator

logger = logging.getLogger("textdet")


class TrainEvaluation:
    """The eval-set ``Evaluator`` of a training run and its schedule; ``run`` logs and times each one.
    ``guard``: the start guard (``train.guard_holdout``), which may evaluate the start's weights instead."""

    def __init__(self, evaluator: Evaluator, num_epochs: int, val_start_epoch: int = 1, val_interval: int = 1,
                 guard: StartGuard | None = None) -> None:
        self.num_epochs = num_epochs
        self.val_start_epoch = val_start_epoch  # system.val_start_epoch
        self.val_interval = val_interval  # system.val_interval
        self.evaluator = evaluator
        self.guard = guard
        self.start_perf: dict | None = None  # the start's eval-split scores: computed once, when first kept

    def due(self, epoch: int) -> bool:
        """Whether (1-based) ``epoch`` ends with an evaluation: MindOCR's rule, and the last epoch always (as
        MMEngine's loop does), so that a run with a sparse cadence still ends with its score."""
        if epoch == self.num_epochs:
            return True
        if epoch < self.val_start_epoch:
            return False
        return (epoch - self.val_start_epoch) % self.val_interval == 0

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
