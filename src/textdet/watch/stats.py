"""Sums over an epoch or a log window of training steps: loss terms, images, seconds waiting for data. The
loop keeps the epoch's (its mean loss ranks checkpoints when nothing is evaluated), the watch a window's."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch


@dataclass
class EpochStats:
    """Sums over an epoch (or a log window); loss terms stay on the device until read."""

    steps: int = 0
    bad: int = 0  # micro-batches of skipped (non-finite) optimizer steps: not in the loss means
    skipped_samples: int = 0  # samples the loader could not use and replaced
    images: int = 0
    wait: float = 0.0
    start: float = field(default_factory=time.perf_counter)
    terms: dict[str, torch.Tensor] = field(default_factory=dict)

    def add(self, losses: dict[str, torch.Tensor], n_images: int, wait: float, bad: bool = False) -> None:
        self.steps += 1
        self.bad += bad
        self.images += n_images
        self.wait += wait
        for k, v in losses.items() if not bad else ():
            v = v.detach()
            self.terms[k] = self.terms[k] + v if k in self.terms else v.clone()

    def summary(self) -> dict[str, float]:
        elapsed = time.perf_counter() - self.start
        out = {k: float(v) / max(self.steps - self.bad, 1) for k, v in self.terms.items()}
        out.update(time=elapsed, step_ms=1000 * elapsed / max(self.steps, 1),
                   img_per_s=self.images / max(elapsed, 1e-9), data_wait_s=self.wait,
                   data_wait_share=self.wait / max(elapsed, 1e-9),
                   compute_s=max(elapsed - self.wait, 0.0))
        return out
