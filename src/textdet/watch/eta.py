"""Elapsed and remaining time for the epoch and the whole run (PaddleOCR and MMOCR print one; MindOCR users asked).
The step time is the mean of the recent steps; each evaluation and checkpoint still to come costs what the last
one did, so the run's ETA includes them once one has run."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable


def clock(seconds: float) -> str:
    """``H:MM:SS`` (``1 day, H:MM:SS`` past 24 h), as PaddleOCR and MMOCR print it."""
    seconds = max(int(round(seconds)), 0)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{days} day{'s' if days > 1 else ''}, {text}" if days else text


class Eta:
    """``step_done()`` after every micro-step; ``remaining(epoch, step)`` for the epoch (0-based) after ``step``
    of its ``steps_per_epoch`` micro-steps. ``eval_due(epoch_number)`` says whether that (1-based) epoch ends with
    an evaluation."""

    def __init__(self, steps_per_epoch: int, num_epochs: int, eval_due: Callable[[int], bool], window: int = 50):
        self.steps_per_epoch = steps_per_epoch
        self.num_epochs = num_epochs
        self.eval_due = eval_due
        self.start = time.perf_counter()
        self.epoch_start = self.start
        self.ticks: deque[float] = deque(maxlen=window + 1)
        self.last_eval_s = 0.0
        self.last_ckpt_s = 0.0

    def epoch_begins(self) -> None:
        self.epoch_start = time.perf_counter()
        self.ticks.clear()  # the loader restarts: its first batch is not a typical step
        self.ticks.append(self.epoch_start)

    def step_done(self) -> None:
        self.ticks.append(time.perf_counter())

    def step_seconds(self) -> float | None:
        if len(self.ticks) < 2:
            return None
        return (self.ticks[-1] - self.ticks[0]) / (len(self.ticks) - 1)

    def remaining(self, epoch: int, step: int) -> tuple[float, float] | None:
        """(epoch seconds left, run seconds left) after micro-step ``step`` of ``epoch``; None before a step."""
        per_step = self.step_seconds()
        if per_step is None:
            return None
        epoch_left = (self.steps_per_epoch - step) * per_step
        later_epochs = self.num_epochs - epoch - 1
        run_left = epoch_left + later_epochs * self.steps_per_epoch * per_step
        evals_left = sum(self.eval_due(e) for e in range(epoch + 1, self.num_epochs + 1))
        run_left += evals_left * self.last_eval_s + (later_epochs + 1) * self.last_ckpt_s
        return epoch_left, run_left

    def text(self, epoch: int, step: int) -> str:
        """``elapsed: 0:01:02 (epoch 0:00:12), eta: epoch 0:00:30, run 0:04:31`` for the step line."""
        now = time.perf_counter()
        elapsed = f"elapsed: {clock(now - self.start)} (epoch {clock(now - self.epoch_start)})"
        left = self.remaining(epoch, step)
        if left is None:
            return f"{elapsed}, eta: unknown yet"
        return f"{elapsed}, eta: epoch {clock(left[0])}, run {clock(left[1])}"
