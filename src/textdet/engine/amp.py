"""MindOCR's ``amp_level`` and ``loss_scaler`` in PyTorch terms: O0 fp32; O1/O2 autocast in
``system.amp_dtype`` (bf16 where the device supports it, else fp16) with BN and the DB losses in fp32; O3 runs
as O2; loss scaling only for fp16. Why: docs/DESIGN_NOTES.md ("engine and cli")."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from textdet.device import half_dtype

logger = logging.getLogger("textdet")


@dataclass
class AmpSettings:
    level: str
    device_type: str
    dtype: torch.dtype | None  # None: fp32

    @property
    def autocast(self) -> bool:
        return self.dtype is not None

    @property
    def needs_scaling(self) -> bool:
        return self.dtype == torch.float16

    def context(self):
        """The autocast context for forward passes (a disabled one in fp32)."""
        return torch.autocast(self.device_type, dtype=self.dtype or torch.float32, enabled=self.autocast)

    def describe(self) -> str:
        return self.level if self.dtype is None else f"{self.level} ({str(self.dtype).replace('torch.', '')})"


def amp_settings(level: str, device_type: str, amp_dtype: str | None = None) -> AmpSettings:
    """``amp_dtype``: ``system.amp_dtype`` ("bf16", "fp16", None = the device's default, see
    ``half_dtype``)."""
    if level == "O0":
        return AmpSettings(level, device_type, None)
    if level == "O3":
        logger.info("amp_level O3 runs as O2 (autocast, fp32 master weights): pure half weights lose small updates")
    return AmpSettings(level, device_type, half_dtype(device_type, amp_dtype))


class LossScaler:
    """MindOCR's loss scaling (dynamic: / ``factor`` on overflow, x ``factor`` after ``window`` clean steps)."""

    def __init__(self, enabled: bool, dynamic: bool, scale: float = 1.0, factor: float = 2.0, window: int = 2000):
        self.enabled = enabled
        self.dynamic = dynamic
        self.scale = float(scale) if enabled else 1.0
        self.factor = float(factor)
        self.window = int(window)
        self.good_steps = 0

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self.scale if self.enabled else loss

    @torch.no_grad()
    def unscale_and_check(self, params: list[torch.Tensor], check: bool) -> bool:
        """Divide gradients by the scale; return True when a gradient is not finite (one host sync)."""
        grads = [p.grad for p in params if p.grad is not None]
        if self.enabled and self.scale != 1.0:
            torch._foreach_mul_(grads, 1.0 / self.scale)
        if not (self.enabled or check) or not grads:
            return False
        norms = torch.stack([torch.linalg.vector_norm(g.float()) for g in grads])
        return not bool(torch.isfinite(norms).all())

    def update(self, overflow: bool) -> None:
        if not (self.enabled and self.dynamic):
            return
        if overflow:
            self.scale = max(self.scale / self.factor, 1.0)
            self.good_steps = 0
        else:
            self.good_steps += 1
            if self.good_steps >= self.window:
                self.scale *= self.factor
                self.good_steps = 0

    def state_dict(self) -> dict:
        return {"scale": self.scale, "good_steps": self.good_steps}

    def load_state_dict(self, state: dict) -> None:
        self.scale = float(state["scale"])
        self.good_steps = int(state["good_steps"])
