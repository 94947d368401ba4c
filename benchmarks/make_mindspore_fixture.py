"""Write tests/fixtures/mindocr_tiny_dbnetpp.ckpt with MindSpore itself, plus the MindSpore forward pass.

Run in a MindOCR environment (mindspore 2.7, mindocr 0.5; never in CI), from the repository root:

    python benchmarks/make_mindspore_fixture.py

The network is MindOCR's DBNet++ layout shrunk for a test: mindcv's ResNet cells (stem, "same" max-pool,
BasicBlocks) at width 2 with one block per stage, MindOCR's ``DBFPN(use_asf=True)`` and ``DBHead`` at
16 channels. Weights are random and the BatchNorm statistics are randomised so they matter. The
checkpoint also holds a Momentum optimizer's entries (``moments.*``, ``learning_rate``, ``momentum``,
``global_step``), as MindOCR's resume files do. ``mindocr_tiny_dbnetpp_io.npz`` keeps an input image and
MindSpore's backbone levels, neck output and probability map for it, so the test suite checks
numerical parity without MindSpore.
"""

from __future__ import annotations

import os

import mindspore as ms
import numpy as np
from mindocr.models.backbones.mindcv_models.resnet import BasicBlock
from mindocr.models.heads.det_db_head import DBHead
from mindocr.models.necks.fpn import DBFPN
from mindspore import nn

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")
WIDTH, NECK = 2, 16


class TinyDetResNet(nn.Cell):
    """mindcv's ResNet (and MindOCR's DetResNet.construct) at width 2, one BasicBlock per stage."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, WIDTH, kernel_size=7, stride=2, pad_mode="pad", padding=3)
        self.bn1 = nn.BatchNorm2d(WIDTH)
        self.relu = nn.ReLU()
        self.max_pool = nn.MaxPool2d(kernel_size=3, stride=2, pad_mode="same")
        chans, layers = WIDTH, []
        for i, mult in enumerate((1, 2, 4, 8)):
            out, stride = WIDTH * mult, 1 if i == 0 else 2
            down = None
            if stride != 1 or chans != out:
                down = nn.SequentialCell([nn.Conv2d(chans, out, kernel_size=1, stride=stride), nn.BatchNorm2d(out)])
            layers.append(nn.SequentialCell([BasicBlock(chans, out, stride=stride, down_sample=down)]))
            chans = out
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.out_channels = [WIDTH * m for m in (1, 2, 4, 8)]

    def construct(self, x):
        x = self.max_pool(self.relu(self.bn1(self.conv1(x))))
        x1 = self.layer1(x)
        x2 = self.layer2(x1)
        x3 = self.layer3(x2)
        return [x1, x2, x3, self.layer4(x3)]


class TinyDBNetPP(nn.Cell):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = TinyDetResNet()
        self.neck = DBFPN(self.backbone.out_channels, NECK, use_asf=True, channel_attention=True)
        self.head = DBHead(NECK, k=50, adaptive=True)


def randomise_bn(net: nn.Cell, rng: np.random.Generator) -> None:
    for name, p in net.parameters_and_names():
        leaf = name.rsplit(".", 1)[-1]
        if leaf in ("moving_mean", "beta"):
            p.set_data(ms.Tensor(rng.normal(0, 0.1, p.shape).astype(np.float32)))
        elif leaf in ("moving_variance", "gamma"):
            p.set_data(ms.Tensor(rng.uniform(0.5, 1.5, p.shape).astype(np.float32)))


def main() -> None:
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_seed(0)
    rng = np.random.default_rng(0)
    net = TinyDBNetPP()
    randomise_bn(net, rng)
    net.set_train(False)
    opt = nn.Momentum(net.head.trainable_params(), learning_rate=0.007, momentum=0.9)
    entries = [{"name": p.name, "data": p} for p in net.get_parameters()]
    names = {e["name"] for e in entries}
    entries += [{"name": p.name, "data": p} for _, p in opt.parameters_and_names() if p.name not in names]
    os.makedirs(OUT, exist_ok=True)
    ckpt = os.path.join(OUT, "mindocr_tiny_dbnetpp.ckpt")
    ms.save_checkpoint(entries, ckpt)
    os.chmod(ckpt, 0o644)  # MindSpore writes it read-only

    image = rng.normal(0, 1, (1, 3, 32, 64)).astype(np.float32)
    levels = net.backbone(ms.Tensor(image))
    neck = net.neck(list(levels))
    binary = net.head(neck)
    np.savez_compressed(os.path.join(OUT, "mindocr_tiny_dbnetpp_io.npz"), image=image,
                        **{f"level{i}": t.asnumpy() for i, t in enumerate(levels)},
                        neck=neck.asnumpy(), binary=binary.asnumpy())
    print(f"wrote {ckpt} ({os.path.getsize(ckpt)} bytes), {len(entries)} entries")


if __name__ == "__main__":
    main()
