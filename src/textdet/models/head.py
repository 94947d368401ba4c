"""DBHead: the probability map P, the threshold map T and the differentiable binarization B."""

from __future__ import annotations

import torch
from torch import nn

from textdet.models.fpn import db_init_


def _branch(in_channels: int, bias: bool) -> nn.Sequential:
    """Conv3x3 + BN + ReLU + ConvT2x2/2 + BN + ReLU + ConvT2x2/2 + Sigmoid: stride 4 -> input resolution."""
    mid = in_channels // 4
    return nn.Sequential(
        nn.Conv2d(in_channels, mid, 3, padding=1, bias=bias),
        nn.BatchNorm2d(mid),
        nn.ReLU(inplace=True),
        nn.ConvTranspose2d(mid, mid, 2, 2),
        nn.BatchNorm2d(mid),
        nn.ReLU(inplace=True),
        nn.ConvTranspose2d(mid, 1, 2, 2),
        nn.Sigmoid(),
    )


class DBHead(nn.Module):
    """DBNet's head (MindOCR ``DBHead``): two identical branches, ``segm`` (P) and ``thresh`` (T).

    B follows the paper, ``B = 1 / (1 + exp(-k (P - T)))``, computed in float32 with autocast disabled
    (k = 50 turns bf16/fp16 rounding of P - T into large errors in B). MindOCR's DBHead computes
    ``sigmoid(k * P - T)``, a known deviation from the paper that we deliberately do not copy, so
    MindOCR-trained thresh branches are not interchangeable with ours at the binarization step.

    Init as the original DB code: kaiming-normal conv weights, BatchNorm weight 1 / bias 1e-4
    (transposed-conv biases keep PyTorch's default). MindOCR uses HeUniform everywhere instead;
    both are He-scaled, we keep the reference implementation's choice.

    Args:
        in_channels: neck channels (``neck.out_channels``, 256); the branches use in_channels // 4.
        k: amplification factor of the binarization.
        bias: bias in the first 3x3 conv of each branch (the transposed convs always have one).
        adaptive: compute T and B in training; if False the head only ever returns P.

    Shapes:
        (N, in_channels, H/4, W/4) -> training (and adaptive): {"binary": P, "thresh": T,
        "thresh_binary": B}, each (N, 1, H, W); eval: {"binary": P} (the thresh branch is not run).
        P and T have the compute dtype (bf16/fp16 under autocast); B is always float32.
    """

    def __init__(self, in_channels: int, k: float = 50, bias: bool = False, adaptive: bool = True) -> None:
        super().__init__()
        if in_channels % 4:
            raise ValueError(f"DBHead in_channels must be a multiple of 4, got {in_channels}")
        self.k = float(k)
        self.adaptive = adaptive
        self.segm = _branch(in_channels, bias)
        self.thresh = _branch(in_channels, bias)
        db_init_(self)

    def forward(self, features: torch.Tensor) -> dict[str, torch.Tensor]:
        binary = self.segm(features)
        if not (self.training and self.adaptive):
            return {"binary": binary}
        thresh = self.thresh(features)
        with torch.autocast(device_type=binary.device.type, enabled=False):
            thresh_binary = torch.sigmoid(self.k * (binary.float() - thresh.float()))
        return {"binary": binary, "thresh": thresh, "thresh_binary": thresh_binary}
