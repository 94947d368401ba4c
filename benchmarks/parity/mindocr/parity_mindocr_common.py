"""What the MindOCR parity scripts share: textdet weights into a MindSpore network, and the user's network.

``parity_mindocr.py`` (the forward parity), ``parity_mindocr_train.py`` (training step by step) and
``parity_mindocr_eval.py`` (evaluation) all import from here, and not from each other, so that no script needs
another one to load first. Run in the MindOCR environment only (MindSpore and MindOCR installed; never in CI).
"""

from __future__ import annotations

import mindspore as ms
import torch
from mindocr.models.backbones.mindcv_models.resnet import BasicBlock, Bottleneck
from mindocr.models.heads.det_db_head import DBHead as MsDBHead
from mindocr.models.necks.fpn import DBFPN as MsDBFPN
from mindspore import nn
from ms_det_resnet import NarrowDetResNet  # this folder: MindOCR's DetResNet, narrow

from textdet.models.ms_ckpt import mindspore_to_torch_names

USER_CONFIG = "configs/mindocr_db_r50_user.yaml"
LAYERS = (3, 4, 6, 3)  # ResNet-50
RESNETS = {"det_resnet50": (Bottleneck, LAYERS), "det_resnet18": (BasicBlock, (2, 2, 2, 2))}


def load_into_mindspore(net: ms.nn.Cell, state: dict[str, torch.Tensor]) -> None:
    """Set every MindSpore parameter from textdet's state through ms_ckpt's mapping; strict both ways."""
    left = {k for k in state if not k.endswith("num_batches_tracked")}
    for name, p in net.parameters_and_names():
        (key,), _ = mindspore_to_torch_names({name: None})
        if key not in state or tuple(state[key].shape) != tuple(p.shape):
            raise KeyError(f"MindOCR parameter {name} -> {key}: not in textdet's state or shape differs")
        p.set_data(ms.Tensor(state[key].detach().float().numpy()))
        left.discard(key)
    if left:
        raise KeyError(f"textdet tensors with no MindOCR parameter: {sorted(left)}")


class MsDBNet(nn.Cell):
    """MindOCR's BaseModel layout: backbone -> DBFPN -> DBHead (the user's neck and head settings)."""

    def __init__(self, width: int, neck: int, backbone: str = "det_resnet50") -> None:
        super().__init__()
        block, layers = RESNETS[backbone]
        self.backbone = NarrowDetResNet(width, block, layers)
        self.neck = MsDBFPN(self.backbone.out_channels, neck, bias=False)
        self.head = MsDBHead(neck, k=50, bias=False, adaptive=True)

    def construct(self, x):
        return self.head(self.neck(self.backbone(x)))
