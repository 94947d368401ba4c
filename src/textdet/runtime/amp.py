"""MindOCR's ``amp_level`` and ``loss_scaler`` in PyTorch terms: O0 fp32; O1/O2 autocast in
``system.amp_dtype`` (bf16 where the device supports it, else fp16) with BN and the DB losses in fp32; O3 runs
as O2; loss scaling only for fp16. textdet's ``auto`` (the built-in recipe's): O2 where half precision is
native, O0 on a CPU that would emulate bf16. Why: docs/decisions/automatic-bf16.md,
docs/decisions/fp32-loss-head.md and docs/decisions/mindocr-behaviours.md."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from textdet import device as devices
from textdet.device import half_dtype

logger = logging.getLogger("textdet")


@dataclass
class AmpSettings:
    level: str
    device_type: str
    dtype: torch.dtype | None  # None: fp32
    chosen_by: str = ""  # why ``system.amp_level: auto`` picked this level ("" when the config named it)

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
        text = self.level if self.dtype is None else f"{self.level} ({str(self.dtype).replace('torch.', '')})"
        return f"{text}, {self.chosen_by}" if self.chosen_by else text


EMULATED_BF16 = ("no AVX512-BF16 or AMX was found on this CPU, so bf16 math is likely emulated: the built-in "
                 "recipe's training step took 8x as long as in fp32 on such a CPU (docs/BENCHMARKS.md, "
                 "'bf16 on a CPU without native bf16')")


def amp_settings(level: str, device_type: str, amp_dtype: str | None = None,
                 key: str = "system.amp_level") -> AmpSettings:
    """``amp_dtype``: ``system.amp_dtype`` ("bf16", "fp16", None = the device's default, see
    ``half_dtype``). ``level`` ``auto``: O0 on a CPU without native bf16, O2 elsewhere. ``key``: the config
    key ``level`` came from, for the log."""
    chosen_by = ""
    if level == "auto":
        level, chosen_by = auto_level(device_type, amp_dtype)
    if level == "O0":
        return AmpSettings(level, device_type, None, chosen_by)
    if level == "O3":
        logger.info("amp_level O3 runs as O2 (autocast, fp32 master weights): pure half weights lose small updates")
    dtype = half_dtype(device_type, amp_dtype)
    if device_type == "cpu" and dtype == torch.bfloat16 and not devices.cpu_bf16_fast():
        logger.warning("%s %s: %s; -o %s=O0 computes in fp32", key, level, EMULATED_BF16, key)
    return AmpSettings(level, device_type, dtype, chosen_by)


def auto_level(device_type: str, amp_dtype: str | None = None) -> tuple[str, str]:
    """``system.amp_level: auto``: the level, and why (for the banner): half precision only where it is
    native, because emulated bf16 is several times slower than fp32."""
    if device_type != "cpu":
        return "O2", "amp_level auto: an accelerator"
    if amp_dtype == "fp16":
        return "O0", "amp_level auto: fp32, as system.amp_dtype asks for fp16 (on a CPU auto takes bf16 only)"
    if devices.cpu_bf16_fast():
        return "O2", "amp_level auto: this CPU has native bf16 (AVX512-BF16 or AMX)"
    return "O0", "amp_level auto: fp32, as this CPU shows no AVX512-BF16 or AMX (emulated bf16 is slow)"


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

    def backing_off(self) -> bool:
        """Dynamic fp16 scaling can still lower the scale: non-finite steps may be overflows it cures."""
        return self.enabled and self.dynamic and self.scale > 1

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
