"""ResNet backbones for DBNet, with torchvision's module names so its ImageNet checkpoints load as is.

ResNet v1.5 (the stride sits on the 3x3 conv of the bottleneck), as torchvision and mindcv. No
classifier and no global pool: the forward returns [C2, C3, C4, C5] at strides 4/8/16/32.
"""

from __future__ import annotations

import torch
from torch import nn

from textdet.models.weights import load_backbone_weights, resolve_backbone_weights


class BasicBlock(nn.Module):
    """Two 3x3 convs (ResNet-18/34). Output channels = ``planes``."""

    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 -> 3x3 (stride here: v1.5) -> 1x1 (ResNet-50). Output channels = ``4 * planes``."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class DetResNet(nn.Module):
    """ResNet feature extractor returning four maps.

    ``block``: BasicBlock or Bottleneck; ``layers``: blocks per stage ((3, 4, 6, 3) = ResNet-50); ``width``:
    stem/first-stage channels (64 real, tests 8). ``out_channels`` e.g. [256, 512, 1024, 2048]; ``strides``
    [4, 8, 16, 32]. Shapes: (N, in_channels, H, W) -> 4 tensors (N, out_channels[i], H/strides[i], W/strides[i]).
    """

    def __init__(self, block: type[BasicBlock] | type[Bottleneck], layers: tuple[int, int, int, int], width: int = 64,
                 in_channels: int = 3) -> None:
        super().__init__()
        if width < 1:
            raise ValueError(f"width must be a positive number of channels, got {width}")
        self.inplanes = width
        self.conv1 = nn.Conv2d(in_channels, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        # MindSpore's pad_mode="same" (as mindcv/MindOCR): for even sizes one pixel at the bottom/right only
        # (torchvision pads one on every side). Zero padding equals -inf here: the input is post-ReLU.
        self.maxpool = nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.MaxPool2d(3, 2))
        self.layer1 = self._make_layer(block, width, layers[0], 1)
        self.layer2 = self._make_layer(block, width * 2, layers[1], 2)
        self.layer3 = self._make_layer(block, width * 4, layers[2], 2)
        self.layer4 = self._make_layer(block, width * 8, layers[3], 2)
        self.out_channels = [width * m * block.expansion for m in (1, 2, 4, 8)]
        self.strides = [4, 8, 16, 32]
        for m in self.modules():  # torchvision's init
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def _make_layer(self, block: type[BasicBlock] | type[Bottleneck], planes: int, blocks: int,
                    stride: int) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        c2 = self.layer1(x)
        c3 = self.layer2(c2)
        c4 = self.layer3(c3)
        c5 = self.layer4(c4)
        return [c2, c3, c4, c5]


# torchvision's ImageNet files for pretrained=True (the sha256 prefix in the name is checked on download),
# and a glob also accepted from the hub cache (ResNet-50's V2 weights, resnet50-11ad3fa6.pth).
TORCHVISION_URLS: dict[str, tuple[str, str | None]] = {
    "det_resnet18": ("https://download.pytorch.org/models/resnet18-f37072fd.pth", None),
    "det_resnet34": ("https://download.pytorch.org/models/resnet34-b627a593.pth", None),
    "det_resnet50": ("https://download.pytorch.org/models/resnet50-0676ba61.pth", "resnet50-*.pth"),
}


def _build(arch: str, block: type, layers: tuple[int, int, int, int], pretrained: bool | str | None, width: int,
           in_channels: int) -> DetResNet:
    # Resolve the file first so that a missing file fails before the network is built.
    path = resolve_backbone_weights(pretrained, arch, *TORCHVISION_URLS[arch])
    model = DetResNet(block, layers, width=width, in_channels=in_channels)
    if path is not None:
        load_backbone_weights(model, path, arch)
    return model


def det_resnet18(pretrained: bool | str | None = None, width: int = 64, in_channels: int = 3) -> DetResNet:
    """ResNet-18 backbone, out_channels ``[w, 2w, 4w, 8w]`` (w = width, 64 by default).

    ``pretrained``: None/False random; True torchvision's ``resnet18-f37072fd.pth`` from the torch hub cache
    (downloaded if missing); a string: path or URL to a torchvision-layout state_dict or a mindcv ``.ckpt``.
    """
    return _build("det_resnet18", BasicBlock, (2, 2, 2, 2), pretrained, width, in_channels)


def det_resnet34(pretrained: bool | str | None = None, width: int = 64, in_channels: int = 3) -> DetResNet:
    """ResNet-34 backbone, out_channels ``[w, 2w, 4w, 8w]``; ``pretrained`` as ``det_resnet18``
    (``resnet34-b627a593.pth``)."""
    return _build("det_resnet34", BasicBlock, (3, 4, 6, 3), pretrained, width, in_channels)


def det_resnet50(pretrained: bool | str | None = None, width: int = 64, in_channels: int = 3) -> DetResNet:
    """ResNet-50 (v1.5) backbone, out_channels [256, 512, 1024, 2048] at width 64; ``pretrained=True`` takes
    torchvision's V1 ``resnet50-0676ba61.pth`` from the hub cache, else any ``resnet50-*.pth`` there, else downloads V1.
    """
    return _build("det_resnet50", Bottleneck, (3, 4, 6, 3), pretrained, width, in_channels)
