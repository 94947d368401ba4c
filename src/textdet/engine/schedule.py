"""Learning-rate schedules with MindOCR's names and parameters, as a pure function of the optimizer step,
so resuming restores the position exactly: only the step is saved (PaddleOCR #18108 and MMOCR #292 lost the
position because their schedulers kept hidden state)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from textdet.config.components import lookup


def _constant(t: float, lr: float, **_) -> float:
    return lr


def _polynomial(t: float, lr: float, total: float, decay_rate: float, min_lr: float, **_) -> float:
    frac = min(t / total, 1.0) if total > 0 else 1.0
    return (lr - min_lr) * (1.0 - frac) ** decay_rate + min_lr


def _cosine(t: float, lr: float, decay_epochs: float, min_lr: float, num_cycles: int, cycle_decay: float, **_) -> float:
    if decay_epochs <= 0:
        return lr
    cycle = int(t // decay_epochs)
    if cycle >= num_cycles:
        return min_lr
    peak = lr * cycle_decay**cycle
    frac = (t - cycle * decay_epochs) / decay_epochs
    return min_lr + 0.5 * (peak - min_lr) * (1.0 + math.cos(math.pi * frac))


def _step(t: float, lr: float, decay_epochs: float, decay_rate: float, **_) -> float:
    return lr * decay_rate ** math.floor(t / decay_epochs) if decay_epochs > 0 else lr


def _multi_step(t: float, lr: float, milestones: Sequence[float], decay_rate: float, warmup: float, **_) -> float:
    # milestones are absolute epochs, as in MindOCR
    return lr * decay_rate ** sum(1 for m in milestones if t + warmup >= m)


def _exponential(t: float, lr: float, decay_epochs: float, decay_rate: float, **_) -> float:
    return lr * decay_rate ** (t / decay_epochs) if decay_epochs > 0 else lr


SCHEDULES = {
    "constant": _constant,
    "polynomial_decay": _polynomial,
    "cosine_decay": _cosine,
    "warmup_cosine_decay": _cosine,
    "step_decay": _step,
    "multi_step_decay": _multi_step,
    "exponential_decay": _exponential,
}


class LRSchedule:
    """``schedule(step) -> lr`` per optimizer step: linear warm-up, then the named decay (MindOCR's keys)."""

    def __init__(self, scheduler: str, lr: float, steps_per_epoch: int, num_epochs: int, warmup_epochs: float = 0,
                 warmup_factor: float = 0.0, min_lr: float = 1e-6, decay_epochs: float = 10, decay_rate: float = 0.9,
                 milestones: Sequence[float] = (), num_cycles: int = 1, cycle_decay: float = 1.0,
                 lr_epoch_stair: bool = False):
        self.fn = lookup(SCHEDULES, scheduler, "scheduler.scheduler", "scheduler")
        self.name, self.lr, self.steps_per_epoch = scheduler, float(lr), max(int(steps_per_epoch), 1)
        self.num_epochs, self.warmup_epochs, self.warmup_factor = num_epochs, float(warmup_epochs), warmup_factor
        self.stair = lr_epoch_stair
        self.kw = dict(min_lr=min_lr, decay_epochs=decay_epochs, decay_rate=decay_rate, milestones=list(milestones),
                       num_cycles=num_cycles, cycle_decay=cycle_decay, total=num_epochs - self.warmup_epochs,
                       warmup=self.warmup_epochs)

    def __call__(self, step: int) -> float:
        epochs = math.floor(step / self.steps_per_epoch) if self.stair else step / self.steps_per_epoch
        if epochs < self.warmup_epochs:
            frac = epochs / self.warmup_epochs
            return self.lr * (self.warmup_factor + (1.0 - self.warmup_factor) * frac)
        return self.fn(epochs - self.warmup_epochs, self.lr, **self.kw)

    def warnings(self) -> list[str]:
        """Settings that are legal but probably not what the user meant."""
        out = []
        if self.warmup_epochs >= self.num_epochs and self.warmup_epochs > 0:
            out.append(f"scheduler.warmup_epochs ({self.warmup_epochs:g}) >= num_epochs ({self.num_epochs}): the whole "
                       f"run is warm-up and the LR peaks at {self(self.num_epochs * self.steps_per_epoch - 1):.3g}, "
                       f"below scheduler.lr ({self.lr:g})")
        return out
