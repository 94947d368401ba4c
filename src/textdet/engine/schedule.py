"""Learning-rate schedules with MindOCR's names and parameters, as a pure function of the step, so resuming
restores the position exactly: only the step is saved (PaddleOCR #18108 and MMOCR #292 lost the position because
their schedulers kept hidden state). Each formula is MindOCR 0.5's ``create_scheduler`` term for term (the same
float operations in the same order), pinned by tests/fixtures/mindocr_schedules.json."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence

from textdet.config.components import lookup


def _epoch(step: int, steps_per_epoch: int, stair: bool) -> float:
    """Epochs done at ``step``: whole epochs with ``lr_epoch_stair``, fractional (MindOCR's "refined") without."""
    return math.floor(step / steps_per_epoch) if stair else step / steps_per_epoch


def _constant(step: int, steps_per_epoch: int, stair: bool, lr: float, **_) -> float:
    return lr


def _polynomial(step: int, steps_per_epoch: int, stair: bool, lr: float, main_epochs: float, decay_rate: float,
                **_) -> float:
    # MindOCR's polynomial decays to 0: min_lr is not used (as its polynomial_lr / polynomial_refined_lr)
    if main_epochs <= 0:
        return 0.0
    epoch = _epoch(step, steps_per_epoch, stair)
    return lr * (1 - min(epoch, main_epochs) / main_epochs) ** decay_rate


def _cosine(step: int, steps_per_epoch: int, stair: bool, lr: float, decay_epochs: float, min_lr: float,
            num_cycles: int, cycle_decay: float, **_) -> float:
    cycle_steps = steps_per_epoch * decay_epochs
    if cycle_steps <= 0:
        return min_lr
    cycle = math.floor(step / cycle_steps)
    if cycle >= num_cycles:
        return min_lr
    peak = lr * (cycle_decay**cycle)
    delta = 0.5 * (peak - min_lr)
    epoch = min(_epoch(step - cycle * cycle_steps, steps_per_epoch, stair), decay_epochs)
    return min_lr + delta * (1.0 + math.cos(math.pi * epoch / decay_epochs))


def _step(step: int, steps_per_epoch: int, stair: bool, lr: float, decay_epochs: float, decay_rate: float,
          **_) -> float:
    # whole epochs always, with or without lr_epoch_stair (MindOCR's step_lr)
    epoch = math.floor(step / steps_per_epoch)
    return lr * decay_rate ** math.floor(epoch / decay_epochs)


def _multi_step(step: int, steps_per_epoch: int, stair: bool, lr: float, milestones: Sequence[float],
                decay_rate: float, **_) -> float:
    # milestones count epochs after the warm-up, whole epochs always (MindOCR's multi_step_lr)
    epoch = math.floor(step / steps_per_epoch)
    return lr * decay_rate ** bisect_right(sorted(milestones), epoch)


def _exponential(step: int, steps_per_epoch: int, stair: bool, lr: float, decay_rate: float, **_) -> float:
    # one factor decay_rate per epoch; decay_epochs is not used (MindOCR's exponential_lr)
    return lr * decay_rate ** _epoch(step, steps_per_epoch, stair)


SCHEDULES = {"constant": _constant, "polynomial_decay": _polynomial, "cosine_decay": _cosine,
             "warmup_cosine_decay": _cosine, "step_decay": _step, "multi_step_decay": _multi_step,
             "exponential_decay": _exponential}


class LRSchedule:
    """``schedule(update) -> lr``: linear warm-up, then the named decay (MindOCR's keys).

    As in MindOCR the schedule runs over micro-batches (``steps_per_epoch`` is the loader's length): with
    gradient accumulation, an optimizer update takes the LR of its window's last micro-batch.
    """

    def __init__(self, scheduler: str, lr: float, steps_per_epoch: int, num_epochs: int, warmup_epochs: float = 0,
                 warmup_factor: float = 0.0, min_lr: float = 1e-6, decay_epochs: float = 10, decay_rate: float = 0.9,
                 milestones: Sequence[float] = (), num_cycles: int = 1, cycle_decay: float = 1.0,
                 lr_epoch_stair: bool = False, accumulation: int = 1):
        self.fn = lookup(SCHEDULES, scheduler, "scheduler.scheduler", "scheduler")
        self.name = scheduler
        self.lr = float(lr)
        self.steps_per_epoch = max(int(steps_per_epoch), 1)
        self.accumulation = max(int(accumulation), 1)
        self.num_epochs = num_epochs
        self.warmup_epochs = float(warmup_epochs)
        self.warmup_factor = warmup_factor
        self.warmup_steps = math.ceil(self.steps_per_epoch * self.warmup_epochs)
        self.stair = lr_epoch_stair
        self.kw = dict(min_lr=min_lr, decay_epochs=decay_epochs, decay_rate=decay_rate, milestones=list(milestones),
                       num_cycles=num_cycles, cycle_decay=cycle_decay, main_epochs=num_epochs - self.warmup_epochs)

    def __call__(self, update: int) -> float:
        return self.at_micro_step(self.micro_step(update))

    def micro_step(self, update: int) -> int:
        """The micro-batch whose LR optimizer update ``update`` takes: the last of its accumulation window."""
        updates_per_epoch = max(self.steps_per_epoch // self.accumulation, 1)
        epoch, index = divmod(update, updates_per_epoch)
        return epoch * self.steps_per_epoch + (index + 1) * self.accumulation - 1

    def at_micro_step(self, step: int) -> float:
        """MindOCR's list ``create_scheduler(...)[step]``."""
        if step < self.warmup_steps:
            start_lr = self.lr * self.warmup_factor
            end_lr = self.lr * 1.0
            multiplier = min(_epoch(step, self.steps_per_epoch, self.stair), self.warmup_epochs) / self.warmup_epochs
            return start_lr + multiplier * (end_lr - start_lr)
        return self.fn(step - self.warmup_steps, self.steps_per_epoch, self.stair, self.lr, **self.kw)

    def warnings(self) -> list[str]:
        """Settings that are legal but probably not what the user meant."""
        out = []
        if self.warmup_epochs >= self.num_epochs and self.warmup_epochs > 0:
            peak = self.at_micro_step(self.num_epochs * self.steps_per_epoch - 1)
            out.append(f"scheduler.warmup_epochs ({self.warmup_epochs:g}) >= num_epochs ({self.num_epochs}): the whole "
                       f"run is warm-up and the LR peaks at {peak:.3g}, below scheduler.lr ({self.lr:g})")
        return out
