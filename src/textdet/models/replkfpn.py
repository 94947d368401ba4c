"""RepLKFPN, PP-OCRv6's neck (deployed form): RSEFPN with a large-kernel depthwise conv per output level.

PaddleOCR (``UniRepLKFPN`` in its configs) trains each output's depthwise conv as UniRepLKNet's dilated
re-param block (a kxk conv plus dilated smaller ones, each with a BatchNorm) and merges them into one kxk
depthwise conv with a bias for inference; that merged conv is what this module holds
(docs/decisions/network-layouts.md).
"""

from __future__ import annotations

import torch
from torch import nn

from textdet.models.fpn import RSELayer, rse_fpn_forward


class RepLKLayer(nn.Module):
    """kxk depthwise conv (the merged re-param block) -> 1x1 conv to out/4 -> y + SE(y).

    The 1x1 conv and its residual SE are exactly an ``RSELayer`` with kernel 1 (Paddle: ``inp_conv_pw`` +
    ``inp_conv_se``, hard-sigmoid slope 0.2).
    """

    def __init__(self, channels: int, kernel: int) -> None:
        super().__init__()
        self.dw_conv = nn.Conv2d(channels, channels, kernel, padding=kernel // 2, groups=channels)
        self.pw_se = RSELayer(channels, channels // 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pw_se(self.dw_conv(x))


class RepLKFPN(nn.Module):
    """PP-OCRv6's neck: (N, in_channels[i], H/s_i, W/s_i) list, s_i = 4..32 -> (N, out_channels, H/4, W/4).

    ``out_channels``: lateral width (4 levels x out/4 after the concat), a multiple of 16;
    ``dilated_kernel_size``: the depthwise kernel (PP-OCRv6: 5 tiny, 7 small).
    """

    def __init__(self, in_channels: list[int], out_channels: int = 96, dilated_kernel_size: int = 7) -> None:
        super().__init__()
        if len(in_channels) != 4 or out_channels % 16:
            raise ValueError(f"RepLKFPN needs 4 levels and out_channels % 16 == 0, "
                             f"got {in_channels}, {out_channels}")
        if dilated_kernel_size % 2 == 0:
            raise ValueError(f"RepLKFPN dilated_kernel_size must be odd, got {dilated_kernel_size}")
        self.out_channels = out_channels
        self.ins_conv = nn.ModuleList([RSELayer(int(c), out_channels, 1) for c in in_channels])
        self.inp_conv = nn.ModuleList([RepLKLayer(out_channels, dilated_kernel_size) for _ in in_channels])

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        return rse_fpn_forward(self.ins_conv, self.inp_conv, features)
