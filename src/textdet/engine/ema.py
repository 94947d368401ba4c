"""Exponential moving average of the weights, with MindOCR's warm-up ramp, saved and restored."""

from __future__ import annotations

import copy
import math

import torch
from torch import nn


class ModelEMA:
    """EMA of every parameter and buffer (BN statistics too): ``d = decay * (1 - exp(-updates / 2000))``.

    The ramp keeps the average from clinging to the random initial weights early in training.
    Evaluation and ``best.ckpt`` use ``ema.module``; the state (weights and update count) goes into
    ``train_resume.ckpt``, unlike MindOCR, which rebuilds the EMA from scratch on resume.
    """

    def __init__(self, model: nn.Module, decay: float = 0.9999, ramp: float = 2000.0):
        self.module = copy.deepcopy(model).eval()
        for p in self.module.parameters():
            p.requires_grad_(False)
        self.decay, self.ramp, self.updates = decay, ramp, 0

    def current_decay(self) -> float:
        return self.decay * (1.0 - math.exp(-self.updates / self.ramp))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        self.updates += 1
        d = self.current_decay()
        src = model.state_dict()
        for name, v in self.module.state_dict().items():
            s = src[name].detach()
            if v.dtype.is_floating_point:
                v.mul_(d).add_(s.to(v.dtype), alpha=1.0 - d)
            else:
                v.copy_(s)

    def state_dict(self) -> dict:
        return {"module": self.module.state_dict(), "updates": self.updates, "decay": self.decay}

    def load_state_dict(self, state: dict) -> None:
        self.module.load_state_dict(state["module"])
        self.updates = int(state["updates"])
