"""DBHead: the probability map P, the threshold map T and the differentiable binarization B."""

from __future__ import annotations

import torch
from torch import nn

from textdet.models.fpn import db_init_


def _branch(in_channels: int, bias: bool) -> nn.Sequential:
    """Conv3x3 + BN + ReLU + ConvT2x2/2 + BN + ReLU + ConvT2x2/2: logits, stride 4 -> input resolution."""
    mid = in_channels // 4
    return nn.Sequential(
        nn.Conv2d(in_channels, mid, 3, padding=1, bias=bias),
        nn.BatchNorm2d(mid),
        nn.ReLU(inplace=True),
        nn.ConvTranspose2d(mid, mid, 2, 2),
        nn.BatchNorm2d(mid),
        nn.ReLU(inplace=True),
        nn.ConvTranspose2d(mid, 1, 2, 2),
    )


class DBHead(nn.Module):
    """DBNet's head (MindOCR ``DBHead``): two identical branches, ``segm`` (P) and ``thresh`` (T).

    B follows the paper, ``B = 1 / (1 + exp(-k (P - T)))``. The sigmoids and B run in float32 with
    autocast disabled: a half-precision sigmoid rounds P to exactly 1 above a logit of ~8 (fp16) or ~6
    (bf16), which gives BCE a NaN or zero gradient on the hard negatives OHEM picks, and k = 50 turns
    half rounding of P - T into large errors in B. Training also hands the loss P's logits. MindOCR's DBHead computes
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
        (N, in_channels, H/4, W/4) -> training: {"binary": P, "binary_logits": logit(P), "thresh": T,
        "thresh_binary": B} (T and B when adaptive), each (N, 1, H, W); eval: {"binary": P} (the thresh
        branch is not run). P, T and B are float32; the logits have the compute dtype.
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
        logits = self.segm(features)
        t_logits = self.thresh(features) if self.training and self.adaptive else None
        with torch.autocast(device_type=logits.device.type, enabled=False):
            binary = torch.sigmoid(logits.float())
            if not self.training:
                return {"binary": binary}
            out = {"binary": binary, "binary_logits": logits}
            if t_logits is not None:
                out["thresh"] = torch.sigmoid(t_logits.float())
                out["thresh_binary"] = torch.sigmoid(self.k * (binary - out["thresh"]))
        return out
