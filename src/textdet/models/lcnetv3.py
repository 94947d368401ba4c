"""PPLCNetV3, PP-OCRv4's mobile detection backbone, in its deployed (re-parameterised) form.

Each rep layer *is* the folded conv of PaddleOCR's inference models, so an imported model loads one tensor
per tensor (docs/decisions/network-layouts.md). Layout and names follow PaddleOCR's ``rec_lcnetv3.py``
with det=True.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from textdet.models.mobilenetv3 import SqueezeExcite, make_divisible
from textdet.models.weights import load_backbone_weights, resolve_backbone_weights

# kernel, in, out, stride, squeeze-excite per block (PaddleOCR NET_CONFIG_det), before scaling
NET_CONFIG_DET: tuple[tuple[tuple[int, int, int, int, bool], ...], ...] = (
    ((3, 16, 32, 1, False),), ((3, 32, 64, 2, False), (3, 64, 64, 1, False)),
    ((3, 64, 128, 2, False), (3, 128, 128, 1, False)), ((3, 128, 256, 2, False),) + ((5, 256, 256, 1, False),) * 4,
    ((5, 256, 512, 2, True), (5, 512, 512, 1, True), (5, 512, 512, 1, False), (5, 512, 512, 1, False)),
)
DET_OUT_CHANNELS = (16, 24, 56, 480)  # the 1x1 projections PaddleOCR puts on the 4 levels (x scale)


class LearnableAffine(nn.Module):
    """``scale * x + bias`` with two learnable scalars (PaddleOCR ``LearnableAffineBlock``)."""

    def __init__(self, scale: float = 1.0, bias: float = 0.0) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor([scale]))
        self.bias = nn.Parameter(torch.tensor([bias]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x + self.bias


class RepLayer(nn.Module):
    """Folded ``LearnableRepLayer``: conv (with bias) -> affine -> [hard-swish -> affine] (no act at stride 2)."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int = 1, groups: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, kernel, stride, (kernel - 1) // 2, groups=groups)
        self.lab = LearnableAffine()
        self.act_lab = LearnableAffine() if stride != 2 else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.lab(self.conv(x))
        return x if self.act_lab is None else self.act_lab(F.hardswish(x))


class LCNetV3Block(nn.Module):
    """Depthwise rep layer -> [SE] -> pointwise rep layer."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int, se: bool) -> None:
        super().__init__()
        self.dw_conv = RepLayer(in_ch, in_ch, kernel, stride, groups=in_ch)
        self.se = SqueezeExcite(in_ch, reduced=in_ch // 4) if se else nn.Identity()  # Paddle's SELayer
        self.pw_conv = RepLayer(in_ch, out_ch, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pw_conv(self.se(self.dw_conv(x)))


class PPLCNetV3(nn.Module):
    """PP-LCNetV3 detection backbone: stem conv+BN, 5 stages, 1x1 projections of the last 4.

    ``det`` must be True; ``pretrained``: False or a backbone weights path (no ImageNet file is known: use a
    converted PP-OCR model via ``model.pretrained``). Shapes: (N, 3, H, W) -> 4 maps at strides 4/8/16/32,
    ``out_channels`` = int(c * scale) for c in (16, 24, 56, 480), i.e. [12, 18, 42, 360] at scale 0.75.
    """

    def __init__(self, scale: float = 0.75, det: bool = True, pretrained: bool | str | None = False) -> None:
        super().__init__()
        if not det:
            raise ValueError("PPLCNetV3: only the detection variant (det: true) is provided")

        def width(c: int) -> int:  # PaddleOCR rounds scaled widths to multiples of 16
            return make_divisible(c * scale, 16)

        self.conv1 = nn.Sequential(nn.Conv2d(3, width(16), 3, 2, 1, bias=False), nn.BatchNorm2d(width(16)))
        stages = [nn.Sequential(*[LCNetV3Block(width(i), width(o), k, s, se) for k, i, o, s, se in blocks])
                  for blocks in NET_CONFIG_DET]
        self.blocks2, self.blocks3, self.blocks4, self.blocks5, self.blocks6 = stages
        widths = [width(blocks[-1][2]) for blocks in NET_CONFIG_DET[1:]]
        self.out_channels = [int(c * scale) for c in DET_OUT_CHANNELS]
        self.layer_list = nn.ModuleList([nn.Conv2d(i, o, 1) for i, o in zip(widths, self.out_channels, strict=True)])
        weights = resolve_backbone_weights(pretrained, "PPLCNetV3", url=None)
        if weights is not None:
            load_backbone_weights(self, weights, "PPLCNetV3")

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.blocks2(self.conv1(x))
        outs = []
        for stage in (self.blocks3, self.blocks4, self.blocks5, self.blocks6):
            x = stage(x)
            outs.append(x)
        return [proj(o) for proj, o in zip(self.layer_list, outs, strict=True)]
