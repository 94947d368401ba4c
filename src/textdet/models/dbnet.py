"""DBNet = backbone -> DBFPN -> DBHead, and ``build_model`` from MindOCR's ``model:`` section."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from textdet.config.components import build_component
from textdet.errors import ConfigError
from textdet.models.fpn import DBFPN, RSEFPN
from textdet.models.head import DBHead
from textdet.models.lcnetv3 import PPLCNetV3
from textdet.models.lcnetv4 import PPLCNetV4
from textdet.models.mobilenetv3 import det_mobilenet_v3
from textdet.models.replkfpn import RepLKFPN
from textdet.models.resnet import det_resnet18, det_resnet34, det_resnet50
from textdet.models.weights import check_coverage, load_model_weights

BACKBONES: dict[str, Callable[..., nn.Module]] = {
    "det_resnet18": det_resnet18,
    "det_resnet34": det_resnet34,
    "det_resnet50": det_resnet50,
    "det_mobilenet_v3": det_mobilenet_v3,
    "PPLCNetV3": PPLCNetV3,
    "PPLCNetV4": PPLCNetV4,
}
NECKS: dict[str, Callable[..., nn.Module]] = {"DBFPN": DBFPN, "RSEFPN": RSEFPN, "RepLKFPN": RepLKFPN}
HEADS: dict[str, Callable[..., nn.Module]] = {"DBHead": DBHead}

INPUT_DIVISOR = 32  # the backbone's last stride: the FPN's top-down sums need exact halvings


def _tracing() -> bool:
    """True under torch.jit tracing (ONNX export), torch.compile and torch.export."""
    if torch.jit.is_tracing():
        return True
    compiler = getattr(torch, "compiler", None)
    if compiler is None:
        return False
    compiling = getattr(compiler, "is_compiling", lambda: False)()
    exporting = getattr(compiler, "is_exporting", lambda: False)()  # torch >= 2.7
    return bool(compiling or exporting)


def check_images(images: torch.Tensor) -> None:
    """Raise ValueError unless ``images`` is (N, C, H, W) with H and W multiples of 32."""
    shape = tuple(images.shape)
    if len(shape) != 4:
        raise ValueError(f"DBNet expects images of shape (N, 3, H, W), got {shape}")
    h, w = shape[2], shape[3]
    if h % INPUT_DIVISOR or w % INPUT_DIVISOR:
        raise ValueError(f"DBNet needs H and W divisible by {INPUT_DIVISOR}, got images of shape {shape} (H={h}, "
                         f"W={w}); resize or pad the input, e.g. DetResize with divisor {INPUT_DIVISOR} (limit_type/"
                         f"target_size multiples of {INPUT_DIVISOR}) in the eval pipeline, or a crop size that is a "
                         f"multiple of {INPUT_DIVISOR}")


class DBNet(nn.Module):
    """Differentiable Binarization text detector: backbone (4 maps, strides 4..32) -> neck (one H/4 map) -> head.

    Shapes: images (N, 3, H, W) float, H and W multiples of 32 -> training: {"binary": P, "binary_logits",
    "thresh": T, "thresh_binary": B}, each (N, 1, H, W); eval: {"binary": P}.
    """

    def __init__(self, backbone: nn.Module, neck: nn.Module, head: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone
        self.neck = neck
        self.head = head

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        # A plain Python check on static shapes; skipped while tracing/compiling so that exported
        # graphs and compiled code carry no shape guard from it.
        if not _tracing():
            check_images(images)
        return self.head(self.neck(self.backbone(images)))


def _build_component(kind: str, table: Mapping[str, Callable[..., nn.Module]], spec: Any, **injected: Any) -> nn.Module:
    """``table[spec["name"]](**injected, **rest_of_spec)`` with ConfigErrors naming ``model.<kind>``."""
    if not isinstance(spec, Mapping) or "name" not in spec:
        raise ConfigError(f"model.{kind}: needs a 'name' (one of: {', '.join(table)}), got {spec!r}")
    kwargs = {k: v for k, v in spec.items() if k != "name"}
    return build_component(table, spec["name"], kwargs, f"model.{kind}", kind, **injected)


def build_model(
    backbone: Mapping[str, Any], neck: Mapping[str, Any], head: Mapping[str, Any],
    pretrained: str | os.PathLike | bool | None = None,
) -> DBNet:
    """Build a DBNet from MindOCR's ``model.backbone/neck/head`` dicts (``name`` + constructor kwargs).

    The neck's ``in_channels`` comes from ``backbone.out_channels``, the head's from ``neck.out_channels``.
    ``pretrained`` (MindOCR's ``model.pretrained``): a whole-model checkpoint path or URL (state_dict, ours, or a
    MindOCR ``.ckpt``) loaded non-strictly after the backbone's weights, the key report logged. Raises ConfigError
    on unknown names (listing the valid ones), bad parameters and missing weight files.
    """
    bb = _build_component("backbone", BACKBONES, backbone)
    nk = _build_component("neck", NECKS, neck, in_channels=list(bb.out_channels))
    hd = _build_component("head", HEADS, head, in_channels=nk.out_channels)
    model = DBNet(bb, nk, hd)
    if pretrained is True:
        raise ConfigError("model.pretrained: true names no file; give a checkpoint path or URL (MindOCR's model-zoo "
                          ".ckpt URLs work: -o model.pretrained=https://...) or false")
    if pretrained not in (None, False, ""):
        check_coverage(load_model_weights(model, pretrained), model)
    return model


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    """Number of parameter elements (only those with ``requires_grad`` unless ``trainable_only=False``)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
