"""Write tests/fixtures/mindocr_tiny_dbnetpp.ckpt with MindSpore itself, plus the MindSpore forward pass.

Run in a MindOCR environment (mindspore 2.7, mindocr 0.5; never in CI), from the repository root:

    python benchmarks/parity/mindocr/make_mindspore_fixture.py

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
from ms_det_resnet import NarrowDetResNet  # this folder: MindOCR's DetResNet, narrow

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "fixtures")
WIDTH, NECK = 2, 16


class TinyDBNetPP(nn.Cell):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = NarrowDetResNet(WIDTH, BasicBlock, (1, 1, 1, 1))  # one BasicBlock per stage
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
