"""MobileNetV3-Large backbone for DBNet, laid out as mindcv's (MindOCR's ``det_mobilenet_v3``).

``features`` is mindcv's flat 21-entry list; MindOCR takes entries [5, 8, 14, 20] (strides 4/8/16/32).
Names and arithmetic follow mindcv so a MindSpore checkpoint maps by renaming
(docs/decisions/network-layouts.md).
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from textdet.models.weights import load_backbone_weights, resolve_backbone_weights

# k, expansion, out channels, squeeze-excite, activation, stride (Searching for MobileNetV3, table 1)
LARGE_SETTING: tuple[tuple[int, int, int, bool, str, int], ...] = (
    (3, 16, 16, False, "relu", 1),
    (3, 64, 24, False, "relu", 2),
    (3, 72, 24, False, "relu", 1),
    (5, 72, 40, True, "relu", 2),
    (5, 120, 40, True, "relu", 1),
    (5, 120, 40, True, "relu", 1),
    (3, 240, 80, False, "hswish", 2),
    (3, 200, 80, False, "hswish", 1),
    (3, 184, 80, False, "hswish", 1),
    (3, 184, 80, False, "hswish", 1),
    (3, 480, 112, True, "hswish", 1),
    (3, 672, 112, True, "hswish", 1),
    (5, 672, 160, True, "hswish", 2),
    (5, 960, 160, True, "hswish", 1),
    (5, 960, 160, True, "hswish", 1),
)


def make_divisible(v: float, divisor: int = 8, min_value: int | None = None) -> int:
    """Round a channel count to a multiple of ``divisor`` without going 10% below ``v`` (mindcv/TF rule)."""
    min_value = divisor if min_value is None else min_value
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def _act(name: str) -> nn.Module:
    return nn.Hardswish() if name == "hswish" else nn.ReLU()


class SqueezeExcite(nn.Module):
    """x * gate(expand(relu(reduce(mean_hw(x))))), as mindcv; ``version="SqueezeExcite"``: 1x1 convs to ``reduced``
    (default channels / 4 to a multiple of 8), hard-sigmoid gate (PaddleOCR's SELayer with reduced=channels // 4);
    ``"SqueezeExciteV2"`` (MindOCR's mobilenet config): dense layers to channels // 4, sigmoid gate.
    """

    def __init__(self, channels: int, version: str = "SqueezeExcite", reduced: int | None = None) -> None:
        super().__init__()
        self.dense = version == "SqueezeExciteV2"
        reduced = reduced or (channels // 4 if self.dense else make_divisible(channels / 4, 8))
        layer = nn.Linear if self.dense else partial(nn.Conv2d, kernel_size=1)
        self.conv_reduce = layer(channels, reduced)
        self.act = nn.ReLU()
        self.conv_expand = layer(reduced, channels)
        self.gate = nn.Sigmoid() if self.dense else nn.Hardsigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.gate(self.conv_expand(self.act(self.conv_reduce(x.mean(dim=(2, 3), keepdim=not self.dense)))))
        return x * (s[:, :, None, None] if self.dense else s)


class SameConv2d(nn.Conv2d):
    """MindSpore's ``pad_mode="same"`` for sizes divisible by the stride: k - s pixels, the odd one bottom/right."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, padding=0, **kwargs)
        total = self.kernel_size[0] - self.stride[0]
        self.same = (total // 2, total - total // 2) * 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.pad(x, self.same))


class InvertedResidual(nn.Module):
    """[1x1 expand + BN + act] -> kxk depthwise (stride) + BN + act -> [SE] -> 1x1 project + BN (+ input)."""

    def __init__(self, in_ch: int, mid_ch: int, out_ch: int, kernel: int, stride: int, act: str, se: bool,
                 se_version: str = "SqueezeExcite", always_expand: bool = False) -> None:
        super().__init__()
        self.use_residual = stride == 1 and in_ch == out_ch
        layers: list[nn.Module] = []
        if in_ch != mid_ch or always_expand:  # mindcv skips an expansion that keeps the width, unless told
            layers += [nn.Conv2d(in_ch, mid_ch, 1, bias=False), nn.BatchNorm2d(mid_ch), _act(act)]
        layers += [SameConv2d(mid_ch, mid_ch, kernel, stride, groups=mid_ch, bias=False), nn.BatchNorm2d(mid_ch),
                   _act(act)]
        if se:
            layers.append(SqueezeExcite(mid_ch, se_version))
        layers += [nn.Conv2d(mid_ch, out_ch, 1, bias=False), nn.BatchNorm2d(out_ch)]
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.layers(x) if self.use_residual else self.layers(x)


class DetMobileNetV3(nn.Module):
    """MobileNetV3-Large feature extractor.

    ``scale``: width multiplier (MindOCR's ``alpha``); ``out_stages``: indices into ``features`` (mindcv
    numbering); ``se_version``: see ``SqueezeExcite``; ``always_expand``: keep the first block's 1x1 expansion.
    ``out_channels``: [16, 24, 56, 480] at scale 0.5; ``strides``: [4, 8, 16, 32] for the default stages.
    """

    def __init__(self, scale: float = 0.5, out_stages: tuple[int, ...] = (5, 8, 14, 20), in_channels: int = 3,
                 se_version: str = "SqueezeExcite", always_expand: bool = False) -> None:
        super().__init__()
        if scale <= 0:
            raise ValueError(f"scale must be positive, got {scale}")
        if se_version not in ("SqueezeExcite", "SqueezeExciteV2"):
            raise ValueError(f"se_version must be 'SqueezeExcite' or 'SqueezeExciteV2', got {se_version!r}")
        channels = make_divisible(16 * scale)
        features: list[nn.Module] = [nn.Conv2d(in_channels, channels, 3, 2, 1, bias=False), nn.BatchNorm2d(channels),
                                     nn.Hardswish()]
        stage_channels, stage_strides = [channels] * 3, [2] * 3
        for k, e, c, se, act, s in LARGE_SETTING:
            mid, out = make_divisible(scale * e), make_divisible(scale * c)
            features.append(InvertedResidual(channels, mid, out, k, s, act, se, se_version, always_expand))
            channels = out
            stage_channels.append(channels)
            stage_strides.append(stage_strides[-1] * s)
        last = channels * 6
        features += [nn.Conv2d(channels, last, 1, bias=False), nn.BatchNorm2d(last), nn.Hardswish()]
        stage_channels += [last] * 3
        stage_strides += [stage_strides[-1]] * 3
        self.features = nn.ModuleList(features)

        out_stages = tuple(int(i) for i in out_stages)
        bad = [i for i in out_stages if not 0 <= i < len(features)]
        if bad or list(out_stages) != sorted(set(out_stages)):
            raise ValueError(f"out_stages must be increasing indices in [0, {len(features) - 1}], "
                             f"got {list(out_stages)}")
        self.out_stages = out_stages
        self.out_channels = [stage_channels[i] for i in out_stages]
        self.strides = [stage_strides[i] for i in out_stages]
        self._init_weights()

    def _init_weights(self) -> None:
        # mindcv's init: normal(0, sqrt(2 / (k*k*out))) for convs, normal(0, 0.01) for dense, zero bias; BN 1/0.
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.01)
                nn.init.zeros_(m.bias)
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                nn.init.normal_(m.weight, 0.0, math.sqrt(2.0 / n))
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """(N, C, H, W) -> list of maps at ``self.strides`` with ``self.out_channels``."""
        outputs = []
        for i, layer in enumerate(self.features):
            x = layer(x)
            if i in self.out_stages:
                outputs.append(x)
        return outputs


def det_mobilenet_v3(
    pretrained: bool | str | None = None, scale: float | None = None, alpha: float | None = None,
    architecture: str = "large", out_stages: list[int] | tuple[int, ...] = (5, 8, 14, 20), in_channels: int = 3,
    bottleneck_params: dict | None = None,
) -> DetMobileNetV3:
    """MobileNetV3-Large backbone (MindOCR ``det_mobilenet_v3``); ``alpha`` is MindOCR's name for ``scale``.

    ``pretrained``: None/False random; a path/URL to a ``features.*`` state_dict or mindcv ``.ckpt``; True is an
    error as in MindOCR (no standard file at this width). ``bottleneck_params``: ``se_version`` and
    ``always_expand`` (MindOCR's db_mobilenetv3 config: SqueezeExciteV2 + always_expand).
    """
    params = dict(bottleneck_params or {})
    unknown = sorted(set(params) - {"se_version", "always_expand"})
    if unknown:
        raise ValueError(f"det_mobilenet_v3: unknown bottleneck_params {unknown} (valid: se_version, always_expand)")
    if architecture != "large":
        raise ValueError(f"det_mobilenet_v3: only architecture 'large' is implemented, got {architecture!r}")
    if scale is not None and alpha is not None and scale != alpha:
        raise ValueError(f"det_mobilenet_v3: scale={scale} and alpha={alpha} disagree; give one of them")
    width = 0.5  # when neither is given
    if scale is not None:
        width = scale
    elif alpha is not None:
        width = alpha
    path = resolve_backbone_weights(pretrained, "det_mobilenet_v3", url=None)
    model = DetMobileNetV3(scale=width, out_stages=tuple(out_stages), in_channels=in_channels, **params)
    if path is not None:
        load_backbone_weights(model, path, "det_mobilenet_v3", ignore_prefixes=("classifier.",))
    return model
