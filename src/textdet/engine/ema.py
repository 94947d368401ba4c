"""Exponential moving average of the weights, with MindOCR's warm-up ramp, saved and restored."""

from __future__ import annotations

import copy
import math

import torch
from torch import nn


class ModelEMA:
    """EMA of parameters and buffers, decay ``decay * (1 - exp(-updates / 2000))``, kept in the resume checkpoint."""

    def __init__(self, model: nn.Module, decay: float = 0.9999, ramp: float = 2000.0):
        self.module = copy.deepcopy(model).eval()
        for p in self.module.parameters():
            p.requires_grad_(False)
        self.decay = decay
        self.ramp = ramp
        self.updates = 0

    def current_decay(self) -> float:
        return self.decay * (1.0 - math.exp(-self.updates / self.ramp))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """One EMA step; the tensor pairs are collected once, then updated with fused foreach ops."""
        if getattr(self, "_pairs", None) is None or self._source is not model:
            src, dst = model.state_dict(), self.module.state_dict()
            floats = [(dst[k], src[k]) for k in dst if dst[k].dtype.is_floating_point]
            self._pairs = ([d for d, _ in floats], [s for _, s in floats])
            self._others = [(dst[k], src[k]) for k in dst if not dst[k].dtype.is_floating_point]
            self._source = model
        self.updates += 1
        d = self.current_decay()
        ema_t, model_t = self._pairs
        torch._foreach_lerp_(ema_t, model_t, 1.0 - d)  # ema = d * ema + (1 - d) * model
        for dst, src in self._others:  # e.g. BN's num_batches_tracked
            dst.copy_(src)

    def state_dict(self) -> dict:
        return {"module": self.module.state_dict(), "updates": self.updates, "decay": self.decay}

    def load_state_dict(self, state: dict) -> None:
        self.module.load_state_dict(state["module"])
        self.updates = int(state["updates"])
