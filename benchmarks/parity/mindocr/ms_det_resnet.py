"""MindOCR's detection ResNet in MindSpore at a chosen width and depth, for the MindOCR-side scripts.

MindOCR's ``DetResNet`` is mindcv's ResNet (stem, "same" max-pool, BasicBlock or Bottleneck stages) whose
``construct`` returns the four stage outputs. The parity and fixture scripts need it narrower than MindOCR
builds it (a few channels, sometimes one block a stage) so that they run in seconds on a CPU, with the same
cells, parameter names and creation order as MindOCR's, so that MindSpore's seeded initialisation and its
checkpoints line up. ``parity_mindocr_train.py`` and ``make_mindspore_fixture.py`` (this folder) both
build theirs here.

Needs MindSpore and MindOCR (the MindOCR venv; never CI); it does not import textdet.
"""

from __future__ import annotations

from collections.abc import Sequence

from mindspore import nn


class NarrowDetResNet(nn.Cell):
    """MindOCR's DetResNet with ``width`` stem channels (64: MindOCR's own) and ``layers`` blocks per stage.

    ``block`` is mindcv's ``BasicBlock`` or ``Bottleneck``; a stage's first block down-samples (a 1x1
    convolution + BatchNorm) when its stride or channel count changes, as in mindcv.
    """

    def __init__(self, width: int, block: type, layers: Sequence[int]) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, pad_mode="pad", padding=3)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()
        self.max_pool = nn.MaxPool2d(kernel_size=3, stride=2, pad_mode="same")
        in_channels = width
        stages = []
        for stage_index, (multiplier, block_count) in enumerate(zip((1, 2, 4, 8), layers, strict=True)):
            channels = width * multiplier
            out_channels = channels * block.expansion
            stage_stride = 1 if stage_index == 0 else 2
            cells = []
            for block_index in range(block_count):
                stride = stage_stride if block_index == 0 else 1
                down_sample = None
                if block_index == 0 and (stride != 1 or in_channels != out_channels):
                    down_sample = nn.SequentialCell([
                        nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=stride),
                        nn.BatchNorm2d(out_channels),
                    ])
                cells.append(block(in_channels, channels, stride=stride, down_sample=down_sample))
                in_channels = out_channels
            stages.append(nn.SequentialCell(cells))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.out_channels = [width * multiplier * block.expansion for multiplier in (1, 2, 4, 8)]

    def construct(self, x):
        """The four stage outputs (strides 4, 8, 16, 32), as MindOCR's DetResNet returns them."""
        x = self.max_pool(self.relu(self.bn1(self.conv1(x))))
        x1 = self.layer1(x)
        x2 = self.layer2(x1)
        x3 = self.layer3(x2)
        return [x1, x2, x3, self.layer4(x3)]
