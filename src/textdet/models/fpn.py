"""DBFPN: DBNet's feature pyramid (as MindOCR ``necks/fpn.py``), with DBNet++'s Adaptive Scale Fusion option.

Lateral 1x1 convs, top-down nearest-upsample sums, 3x3 convs to out/4 resized to stride 4, then concat or
ASF. The formulas are in docs/decisions/network-layouts.md.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def db_init_(module: nn.Module) -> None:
    """The original DB code's init: kaiming-normal conv weights, BatchNorm weight 1 / bias 1e-4, default conv biases."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.kaiming_normal_(m.weight)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.constant_(m.bias, 1e-4)


def _resize_to(x: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    return F.interpolate(x, size=ref.shape[-2:], mode="nearest")


class AdaptiveScaleFusion(nn.Module):
    """DBNet++ ASF, residual-add style as MindOCR/MMOCR/PaddleOCR (docs/decisions/network-layouts.md).

    ``channels``: of the concatenated input (= output); ``num_levels``: input maps (4); ``channel_attention``:
    add the channel-attention branch.
    """

    def __init__(self, channels: int, num_levels: int = 4, channel_attention: bool = True) -> None:
        super().__init__()
        inner = channels // 4
        self.conv = nn.Conv2d(channels, inner, 3, padding=1, bias=True)
        self.chan_att = nn.Sequential(nn.Conv2d(inner, inner // 4, 1, bias=False), nn.ReLU(),
                                      nn.Conv2d(inner // 4, inner, 1, bias=False),
                                      nn.Sigmoid()) if channel_attention else None
        self.spat_att = nn.Sequential(nn.Conv2d(1, 1, 3, padding=1, bias=False), nn.ReLU(),
                                      nn.Conv2d(1, 1, 1, bias=False), nn.Sigmoid())
        self.scale_att = nn.Sequential(nn.Conv2d(inner, num_levels, 1, bias=False), nn.Sigmoid())

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        """list of n (N, C/n, H, W) -> (N, C, H, W)."""
        reduced = self.conv(torch.cat(features, dim=1))
        if self.chan_att is not None:
            reduced = reduced + self.chan_att(reduced.mean(dim=(2, 3), keepdim=True))
        spatial = self.spat_att(reduced.mean(dim=1, keepdim=True)) + reduced
        weights = self.scale_att(spatial)
        return torch.cat([weights[:, i : i + 1] * f for i, f in enumerate(features)], dim=1)


class DBFPN(nn.Module):
    """DBNet's neck (MindOCR ``DBFPN``): (N, in_channels[i], H/s_i, W/s_i) list -> (N, out_channels, H/4, W/4).

    ``in_channels``: backbone channels at strides 4/8/16/32; ``out_channels``: lateral width (4 levels x out/4
    after fusion); ``bias``: in the lateral and output convs; ``use_asf`` / ``channel_attention``: DBNet++'s ASF.
    """

    def __init__(self, in_channels: list[int], out_channels: int = 256, bias: bool = False, use_asf: bool = False,
                 channel_attention: bool = True) -> None:
        super().__init__()
        in_channels = [int(c) for c in in_channels]
        if len(in_channels) != 4:
            raise ValueError(f"DBFPN expects 4 backbone levels (strides 4/8/16/32), got in_channels={in_channels}")
        if out_channels % 4 or (use_asf and out_channels % 16):
            raise ValueError(f"DBFPN out_channels must be a multiple of {16 if use_asf else 4}, got {out_channels}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.unify_channels = nn.ModuleList([nn.Conv2d(c, out_channels, 1, bias=bias) for c in in_channels])
        self.out = nn.ModuleList([nn.Conv2d(out_channels, out_channels // 4, 3, padding=1, bias=bias)
                                  for _ in in_channels])
        self.asf = AdaptiveScaleFusion(out_channels, len(in_channels), channel_attention) if use_asf else None
        db_init_(self)

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        laterals = [conv(f) for conv, f in zip(self.unify_channels, features, strict=True)]
        for i in range(len(laterals) - 2, -1, -1):  # top-down: P4 += up(P5), P3 += up(P4), P2 += up(P3)
            laterals[i] = laterals[i] + _resize_to(laterals[i + 1], laterals[i])
        outs = [conv(p) for conv, p in zip(self.out, laterals, strict=True)]
        outs = [outs[0]] + [_resize_to(o, outs[0]) for o in outs[1:]]  # all to stride 4
        outs = outs[::-1]  # [O5, O4, O3, O2]: the original DB code's order, kept for checkpoint compatibility
        return self.asf(outs) if self.asf is not None else torch.cat(outs, dim=1)


class RSELayer(nn.Module):
    """conv(k) -> y + SE(y) (PaddleOCR ``RSELayer``, shortcut); SE gate is Paddle's hard-sigmoid with slope 0.2."""

    def __init__(self, in_channels: int, out_channels: int, kernel: int) -> None:
        super().__init__()
        self.in_conv = nn.Conv2d(in_channels, out_channels, kernel, padding=kernel // 2, bias=False)
        self.conv1 = nn.Conv2d(out_channels, out_channels // 4, 1)
        self.conv2 = nn.Conv2d(out_channels // 4, out_channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.in_conv(x)
        gate = self.conv2(F.relu(self.conv1(y.mean(dim=(2, 3), keepdim=True))))
        return y + y * torch.clamp(gate * 0.2 + 0.5, 0.0, 1.0)


class RSEFPN(nn.Module):
    """PP-OCRv3/v4's neck (PaddleOCR ``RSEFPN``, shortcut=True): DBFPN's data flow with SE-gated convs."""

    def __init__(self, in_channels: list[int], out_channels: int = 96) -> None:
        super().__init__()
        if len(in_channels) != 4 or out_channels % 16:
            raise ValueError(f"RSEFPN needs 4 levels and out_channels % 16 == 0, got {in_channels}, {out_channels}")
        self.out_channels = out_channels
        self.ins_conv = nn.ModuleList([RSELayer(int(c), out_channels, 1) for c in in_channels])
        self.inp_conv = nn.ModuleList([RSELayer(out_channels, out_channels // 4, 3) for _ in in_channels])

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        return rse_fpn_forward(self.ins_conv, self.inp_conv, features)


def rse_fpn_forward(ins_conv: nn.ModuleList, inp_conv: nn.ModuleList, features: list[torch.Tensor]) -> torch.Tensor:
    """PaddleOCR's RSEFPN data flow (also RepLKFPN's): laterals, top-down sums, per-level convs, concat at stride 4.

    Levels run in Paddle's order (top level first) so that an imported graph's layers come in the same sequence.
    """
    laterals = [ins_conv[i](features[i]) for i in (3, 2, 1, 0)][::-1]
    for i in (2, 1, 0):
        laterals[i] = laterals[i] + _resize_to(laterals[i + 1], laterals[i])
    outs = [inp_conv[i](laterals[i]) for i in (3, 2, 1, 0)]  # [O5, O4, O3, O2]
    return torch.cat([_resize_to(o, outs[-1]) for o in outs[:-1]] + [outs[-1]], dim=1)
