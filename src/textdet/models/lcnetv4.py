"""PPLCNetV4, PP-OCRv6's detection backbone, in its deployed (re-parameterised) form.

PaddleOCR trains every conv as conv + BatchNorm (the stride-1 depthwise convs as a 3x3 + 1x1 + identity sum)
and folds each into one conv with a bias for inference; the released models hold only the folded convs. Here
every conv *is* that folded conv (no BatchNorm), so an imported model loads one tensor per tensor and
fine-tunes as it is. Layout and names follow PaddleOCR's ``rec_lcnetv4.py`` with det=True
(docs/decisions/network-layouts.md).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from textdet.models.mobilenetv3 import SqueezeExcite
from textdet.models.weights import load_backbone_weights, resolve_backbone_weights

# PaddleOCR's NET_CONFIG_DET: the stem's (mid, out) widths and the blocks of the 4 stages (strides 4..32),
# each block (kernel, in, out, stride, squeeze-excite).
NET_CONFIG_DET: dict[str, dict[str, tuple]] = {
    "tiny": {
        "stem": (16, 32),
        "stages": (
            ((3, 32, 32, 1, True), (3, 32, 32, 1, False)),
            ((3, 32, 48, 2, False), (3, 48, 48, 1, True), (3, 48, 48, 1, False)),
            ((3, 48, 64, 2, False),) + ((3, 64, 64, 1, True), (3, 64, 64, 1, False)) * 2,
            ((3, 64, 160, 2, False), (3, 160, 160, 1, True), (3, 160, 160, 1, False)),
        ),
    },
    "small": {
        "stem": (24, 48),
        "stages": (
            ((3, 48, 48, 1, True), (3, 48, 48, 1, False)),
            ((3, 48, 96, 2, False), (3, 96, 96, 1, True), (3, 96, 96, 1, False)),
            ((3, 96, 192, 2, False),) + ((3, 192, 192, 1, True), (3, 192, 192, 1, False)) * 2,
            ((3, 192, 384, 2, False), (3, 384, 384, 1, True), (3, 384, 384, 1, False)),
        ),
    },
    "medium": {
        "stem": (64, 128),
        "stages": (
            ((3, 128, 128, 1, True), (3, 128, 128, 1, False)),
            ((3, 128, 256, 2, False), (3, 256, 256, 1, True), (3, 256, 256, 1, False)),
            ((3, 256, 512, 2, False),) + ((3, 512, 512, 1, True), (3, 512, 512, 1, False)) * 2,
            ((3, 512, 896, 2, False), (3, 896, 896, 1, True), (3, 896, 896, 1, False)),
        ),
    },
}


def pad_bottom_right(x: torch.Tensor) -> torch.Tensor:
    """Paddle's 'SAME' padding for a 2x2 kernel at stride 1: one zero row below, one zero column right."""
    return F.pad(x, (0, 1, 0, 1))


class ConvReLU(nn.Module):
    """Folded ``ConvBNAct``: conv with a bias, then ReLU."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int = 1, padding: int = 0) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, kernel, stride, padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv(x))


class StemBlock(nn.Module):
    """Stride-4 stem: stem1 (3x3/2) -> concat[2x2 max-pool, stem2a -> stem2b (2x2 convs)] -> stem3 (3x3/2) -> stem4."""

    def __init__(self, mid: int, out: int) -> None:
        super().__init__()
        self.stem1 = ConvReLU(3, mid, 3, 2, 1)
        self.stem2a = ConvReLU(mid, mid // 2, 2)
        self.stem2b = ConvReLU(mid // 2, mid, 2)
        self.stem3 = ConvReLU(mid * 2, mid, 3, 2, 1)
        self.stem4 = ConvReLU(mid, out, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem1(x)
        branch = self.stem2b(pad_bottom_right(self.stem2a(pad_bottom_right(x))))
        # x >= 0 after ReLU, so zero padding gives the max-pool what Paddle's -inf padding gives
        pooled = F.max_pool2d(pad_bottom_right(x), kernel_size=2, stride=1)
        return self.stem4(self.stem3(torch.cat([pooled, branch], dim=1)))


class LCNetV4Block(nn.Module):
    """Token mixer (depthwise conv [-> SE]) -> channel mixer (1x1 expand x2 -> GELU -> 1x1 compress).

    The channel mixer's output is added to the token mixer's when the block keeps stride and width.
    """

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int, se: bool) -> None:
        super().__init__()
        self.residual = stride == 1 and in_ch == out_ch
        self.dw_conv = nn.Conv2d(in_ch, in_ch, kernel, stride, (kernel - 1) // 2, groups=in_ch)
        self.se = SqueezeExcite(in_ch, reduced=in_ch // 4) if se else nn.Identity()  # Paddle's SELayer
        self.expand = nn.Conv2d(in_ch, in_ch * 2, 1)
        self.act = nn.GELU()  # the exact (erf) form, as the exported graphs compute it
        self.compress = nn.Conv2d(in_ch * 2, out_ch, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mixed = self.se(self.dw_conv(x))
        out = self.compress(self.act(self.expand(mixed)))
        return mixed + out if self.residual else out


class PPLCNetV4(nn.Module):
    """PP-LCNetV4 detection backbone: a stride-4 stem and 4 stages whose last block outputs are the features.

    ``model_size``: tiny / small / medium (PP-OCRv6 det); ``det`` must be True; ``pretrained``: False or a
    backbone weights path (no ImageNet file is known: use a converted PP-OCR model via ``model.pretrained``).
    Shapes: (N, 3, H, W) -> 4 maps at strides 4/8/16/32; ``out_channels`` [48, 96, 192, 384] for small.
    """

    def __init__(self, model_size: str = "small", det: bool = True,
                 pretrained: bool | str | None = False) -> None:
        super().__init__()
        if not det:
            raise ValueError("PPLCNetV4: only the detection variant (det: true) is provided")
        if model_size not in NET_CONFIG_DET:
            sizes = ", ".join(NET_CONFIG_DET)
            raise ValueError(f"PPLCNetV4: model_size must be one of {sizes}, got {model_size!r}")
        config = NET_CONFIG_DET[model_size]
        self.stem = StemBlock(*config["stem"])
        stages = [nn.Sequential(*[LCNetV4Block(i, o, k, s, se) for k, i, o, s, se in blocks])
                  for blocks in config["stages"]]
        self.blocks_s1, self.blocks_s2, self.blocks_s3, self.blocks_s4 = stages
        self.out_channels = [blocks[-1][2] for blocks in config["stages"]]
        path = resolve_backbone_weights(pretrained, "PPLCNetV4", url=None)
        if path is not None:
            load_backbone_weights(self, path, "PPLCNetV4")

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.stem(x)
        outs = []
        for stage in (self.blocks_s1, self.blocks_s2, self.blocks_s3, self.blocks_s4):
            x = stage(x)
            outs.append(x)
        return outs
