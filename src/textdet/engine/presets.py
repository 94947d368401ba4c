"""Which network a config describes: MindOCR's named model presets overlaid by the explicit
``model.backbone``, ``model.neck`` and ``model.head`` sections. Torch-free, so start-up validation reads it
before ``import torch``; ``engine.build`` turns the specs into the model."""

from __future__ import annotations

import copy

from textdet.config import Config
from textdet.config.components import lookup
from textdet.config.loader import located
from textdet.errors import ConfigError

# MindOCR's named model presets (models/det_dbnet.py), used when `model.name` is set.
_FPN = {"name": "DBFPN", "out_channels": 256, "bias": False}
_HEAD = {"name": "DBHead", "k": 50, "bias": False, "adaptive": True}
_MOBILENET_V3 = {"name": "det_mobilenet_v3", "architecture": "large", "alpha": 0.5,
                 "out_stages": [5, 8, 14, 20],
                 "bottleneck_params": {"se_version": "SqueezeExciteV2", "always_expand": True},
                 "pretrained": "https://download.mindspore.cn/toolkits/mindcv/mobilenet/mobilenetv3/"
                               "mobilenet_v3_large_050_no_scale_se_v2_expand-3c4047ac.ckpt"}
MODEL_PRESETS: dict[str, dict[str, dict]] = {
    "dbnet_resnet18": {"backbone": {"name": "det_resnet18", "pretrained": True},
                       "neck": _FPN, "head": _HEAD},
    "dbnet_resnet50": {"backbone": {"name": "det_resnet50", "pretrained": True},
                       "neck": _FPN, "head": _HEAD},
    "dbnetpp_resnet50": {"backbone": {"name": "det_resnet50", "pretrained": True},
                         "neck": {**_FPN, "use_asf": True, "channel_attention": True}, "head": _HEAD},
    "dbnet_mobilenetv3": {"backbone": _MOBILENET_V3, "neck": _FPN, "head": _HEAD},
}


def model_specs(cfg: Config) -> dict[str, dict]:
    """backbone/neck/head specs, from `model.name` presets overlaid by explicit sections."""
    specs = {"backbone": {}, "neck": {}, "head": {}}
    if cfg.model.name:
        with located(cfg, "model.name"):
            preset = lookup(MODEL_PRESETS, cfg.model.name, "model.name", "model preset")
        specs = copy.deepcopy(preset)
    for part in specs:
        section = getattr(cfg.model, part)
        if section:
            specs[part].update(section)
        if not specs[part]:
            raise ConfigError(f"model.{part} is missing: give it a name (or set model.name to a preset: "
                              f"{', '.join(MODEL_PRESETS)})")
    return specs


def _network(specs: dict[str, dict]) -> dict:
    """``specs`` less the backbone's own ``pretrained`` setting: what two specs share if one network."""
    backbone = {key: value for key, value in specs["backbone"].items() if key != "pretrained"}
    return {**specs, "backbone": backbone}


def preset_of(specs: dict[str, dict]) -> str | None:
    """The preset whose network ``specs`` is, so a YAML that spells a preset out is recognised."""
    for name, preset in MODEL_PRESETS.items():
        if _network(preset) == _network(specs):
            return name
    return None
