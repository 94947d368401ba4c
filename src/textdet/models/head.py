"""DBHead: the probability map P, the threshold map T and the differentiable binarization B."""

from __future__ import annotations

import torch
from torch import nn

from textdet.models.fpn import db_init_


def _branch(in_channels: int, bias: bool) -> nn.Sequential:
    """Conv3x3 + BN + ReLU + ConvT2x2/2 + BN + ReLU + ConvT2x2/2: logits, stride 4 -> input resolution."""
    mid = in_channels // 4
    return nn.Sequential(nn.Conv2d(in_channels, mid, 3, padding=1, bias=bias), nn.BatchNorm2d(mid), nn.ReLU(True),
                         nn.ConvTranspose2d(mid, mid, 2, 2), nn.BatchNorm2d(mid), nn.ReLU(True),
                         nn.ConvTranspose2d(mid, 1, 2, 2))


class DBHead(nn.Module):
    """DBNet's head (MindOCR ``DBHead``): branches ``segm`` (P) and ``thresh`` (T); B = sigmoid(k (P - T)).

    Sigmoids and B run in float32 (half precision saturates P and breaks BCE/OHEM). ``step="mindocr"``: MindOCR's
    B = sigmoid(k * P - T), to train as MindOCR does. ``adaptive=False``: P only. Why fp32:
    docs/decisions/fp32-loss-head.md; init: docs/decisions/network-layouts.md.
    Shapes: (N, in_channels, H/4, W/4) -> training {"binary", "binary_logits", "thresh", "thresh_binary"}
    (T, B when adaptive), each (N, 1, H, W); eval {"binary"}. P, T, B float32; logits in the compute dtype.
    """

    def __init__(self, in_channels: int, k: float = 50, bias: bool = False, adaptive: bool = True,
                 step: str = "paper") -> None:
        super().__init__()
        if in_channels % 4:
            raise ValueError(f"DBHead in_channels must be a multiple of 4, got {in_channels}")
        if step not in ("paper", "mindocr"):
            raise ValueError(f"DBHead step must be one of paper, mindocr, got {step!r}")
        self.k = float(k)
        self.adaptive = adaptive
        self.step = step
        self.segm = _branch(in_channels, bias)  # this order: same init draws
        self.thresh = _branch(in_channels, bias)
        db_init_(self)

    def forward(self, features: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.segm(features)
        t_logits = self.thresh(features) if self.training and self.adaptive else None
        with torch.autocast(device_type=logits.device.type, enabled=False):
            binary = torch.sigmoid(logits.to(torch.promote_types(logits.dtype, torch.float32)))  # float64 stays
            if not self.training:
                return {"binary": binary}
            out = {"binary": binary, "binary_logits": logits}
            if t_logits is not None:
                out["thresh"] = torch.sigmoid(t_logits.to(binary.dtype))
                if self.step == "mindocr":
                    out["thresh_binary"] = torch.sigmoid(self.k * binary - out["thresh"])
                else:
                    out["thresh_binary"] = torch.sigmoid(self.k * (binary - out["thresh"]))
        return out
