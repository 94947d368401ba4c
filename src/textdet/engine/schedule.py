"""Learning-rate schedules with MindOCR's names and parameters, as a pure function of the step, so resuming
restores the position exactly (PaddleOCR #18108 and MMOCR #292 lost it: their schedulers kept hidden state).
Each formula is MindOCR 0.5's ``create_scheduler`` term for term, pinned by
tests/fixtures/mindocr_schedules.json."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence

from textdet.config.components import lookup
from textdet.errors import ConfigError


def _epochs(step: int, per_epoch: int, stair: bool) -> float:  # whole with lr_epoch_stair, else fractional
    return math.floor(step / per_epoch) if stair else step / per_epoch


def _polynomial(step, per_epoch, stair, lr, main_epochs, decay_rate, **_) -> float:  # to 0: min_lr not used
    done = min(_epochs(step, per_epoch, stair), main_epochs)
    return lr * (1 - done / main_epochs) ** decay_rate if main_epochs > 0 else 0.0


def _cosine(step, per_epoch, stair, lr, decay_epochs, min_lr, num_cycles, cycle_decay, **_) -> float:
    cycle_steps = per_epoch * decay_epochs
    cycle = math.floor(step / cycle_steps) if cycle_steps > 0 else num_cycles
    if cycle >= num_cycles:
        return min_lr
    delta = 0.5 * (lr * (cycle_decay**cycle) - min_lr)
    done = min(_epochs(step - cycle * cycle_steps, per_epoch, stair), decay_epochs)
    return min_lr + delta * (1.0 + math.cos(math.pi * done / decay_epochs))


def _step(step, per_epoch, stair, lr, decay_epochs, decay_rate, **_) -> float:
    return lr * decay_rate ** math.floor(math.floor(step / per_epoch) / decay_epochs)  # whole epochs always


def _multi_step(step, per_epoch, stair, lr, milestones, decay_rate, **_) -> float:  # epochs after warm-up
    return lr * decay_rate ** bisect_right(sorted(milestones), math.floor(step / per_epoch))


def _exponential(step, per_epoch, stair, lr, decay_rate, **_) -> float:
    return lr * decay_rate ** _epochs(step, per_epoch, stair)  # per epoch: MindOCR ignores decay_epochs here


SCHEDULES = {"constant": lambda step, per_epoch, stair, lr, **_: lr, "polynomial_decay": _polynomial,
             "cosine_decay": _cosine, "warmup_cosine_decay": _cosine, "step_decay": _step,
             "multi_step_decay": _multi_step, "exponential_decay": _exponential}
ACCUMULATION_LR = ("window_end", "mindocr")  # train.accumulation_lr: which list entry an update takes


class LRSchedule:
    """``schedule(update) -> lr``: linear warm-up, then the named decay (MindOCR's keys). As in MindOCR it
    runs over micro-batches (``steps_per_epoch``: the loader's length); an update takes its accumulation
    window's last LR (``accumulation_lr: window_end``, the intent of MindOCR's TrainOneStepWrapper) or, with
    ``mindocr``, entry ``update`` of the list: what MindOCR 0.5 does on MindSpore 2.x, whose ``get_lr()`` no
    longer advances ``global_step``, so the schedule runs ``accumulation`` times slower."""

    def __init__(self, scheduler: str, lr: float, steps_per_epoch: int, num_epochs: int, warmup_epochs: float = 0,
                 warmup_factor: float = 0.0, min_lr: float = 1e-6, decay_epochs: float = 10, decay_rate: float = 0.9,
                 milestones: Sequence[float] = (), num_cycles: int = 1, cycle_decay: float = 1.0,
                 lr_epoch_stair: bool = False, accumulation: int = 1, accumulation_lr: str = "window_end"):
        self.fn = lookup(SCHEDULES, scheduler, "scheduler.scheduler", "scheduler")
        if scheduler == "step_decay" and decay_epochs <= 0:
            raise ConfigError(f"scheduler.decay_epochs must be > 0 for step_decay (epochs between decays), "
                              f"got {decay_epochs}")
        self.name = scheduler
        self.lr = float(lr)
        self.num_epochs = num_epochs
        self.steps_per_epoch = max(int(steps_per_epoch), 1)
        self.accumulation = max(int(accumulation), 1)
        if accumulation_lr not in ACCUMULATION_LR:
            raise ConfigError(f"train.accumulation_lr must be one of {', '.join(ACCUMULATION_LR)}, "
                              f"got {accumulation_lr!r}")
        self.accumulation_lr = accumulation_lr
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
        if self.accumulation_lr == "mindocr":
            return update
        epoch, index = divmod(update, max(self.steps_per_epoch // self.accumulation, 1))
        return epoch * self.steps_per_epoch + (index + 1) * self.accumulation - 1

    def at_micro_step(self, step: int) -> float:
        """MindOCR's list ``create_scheduler(...)[step]``."""
        if step >= self.warmup_steps:
            return self.fn(step - self.warmup_steps, self.steps_per_epoch, self.stair, self.lr, **self.kw)
        start_lr, end_lr = self.lr * self.warmup_factor, self.lr * 1.0
        multiplier = min(_epochs(step, self.steps_per_epoch, self.stair), self.warmup_epochs) / self.warmup_epochs
        return start_lr + multiplier * (end_lr - start_lr)

    def warnings(self) -> list[str]:
        """Settings that are legal but probably not what the user meant."""
        if self.warmup_epochs == 0 or self.warmup_epochs < self.num_epochs:
            return []
        updates = self.num_epochs * max(self.steps_per_epoch // self.accumulation, 1)
        peak = self.at_micro_step(self.micro_step(updates - 1))
        return [f"scheduler.warmup_epochs ({self.warmup_epochs:g}) >= num_epochs ({self.num_epochs}): the whole run "
                f"is warm-up and the LR peaks at {peak:.3g}, below scheduler.lr ({self.lr:g})"]
