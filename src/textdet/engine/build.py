"""Config sections -> objects: one ``build_*`` per stage, errors prefixed with the key's YAML line. The only place
that knows both the config layout and the constructors, so every other module works without the config system."""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from textdet.config import Config
from textdet.config.components import check_kwargs, lookup
from textdet.config.loader import located
from textdet.data.dataset import DetDataset, build_loader
from textdet.data.pipeline import Compose, FusedNormalize, build_transforms
from textdet.data.resize import NormalizeImage, ToCHWImage
from textdet.errors import ConfigError
from textdet.loss import build_loss
from textdet.metrics import build_metric
from textdet.models import BACKBONES, HEADS, NECKS, build_model
from textdet.models.weights import MINDOCR_ZOO
from textdet.postprocess import build_postprocess

logger = logging.getLogger("textdet")

# MindOCR's named model presets (models/det_dbnet.py), used when `model.name` is set.
_FPN = {"name": "DBFPN", "out_channels": 256, "bias": False}
_HEAD = {"name": "DBHead", "k": 50, "bias": False, "adaptive": True}
MODEL_PRESETS: dict[str, dict[str, dict]] = {
    "dbnet_resnet18": {"backbone": {"name": "det_resnet18", "pretrained": True}, "neck": _FPN, "head": _HEAD},
    "dbnet_resnet50": {"backbone": {"name": "det_resnet50", "pretrained": True}, "neck": _FPN, "head": _HEAD},
    "dbnetpp_resnet50": {
        "backbone": {"name": "det_resnet50", "pretrained": True},
        "neck": {**_FPN, "use_asf": True, "channel_attention": True},
        "head": _HEAD,
    },
    "dbnet_mobilenetv3": {
        "backbone": {"name": "det_mobilenet_v3", "architecture": "large", "alpha": 0.5, "out_stages": [5, 8, 14, 20],
                     "bottleneck_params": {"se_version": "SqueezeExciteV2", "always_expand": True},
                     "pretrained": "https://download.mindspore.cn/toolkits/mindcv/mobilenet/mobilenetv3/"
                                   "mobilenet_v3_large_050_no_scale_se_v2_expand-3c4047ac.ckpt"},
        "neck": _FPN,
        "head": _HEAD,
    },
}

# Loss inputs, by output column name (MindOCR passes them by position through label_column_index).
LOSS_COLUMNS = ("binary_map", "mask", "thresh_map", "thresh_mask")


def model_specs(cfg: Config) -> dict[str, dict]:
    """backbone/neck/head specs, from `model.name` presets overlaid by explicit sections."""
    specs = {"backbone": {}, "neck": {}, "head": {}}
    if cfg.model.name:
        with located(cfg, "model.name"):
            preset = lookup(MODEL_PRESETS, cfg.model.name, "model.name", "model preset")
        specs = copy.deepcopy(preset)
    for part in specs:
        specs[part].update(getattr(cfg.model, part) or {})
        if not specs[part]:
            raise ConfigError(f"model.{part} is missing: give it a name (or set model.name to a preset: "
                              f"{', '.join(MODEL_PRESETS)})")
    return specs


def check_model_specs(cfg: Config) -> dict[str, dict]:
    """Names and keyword arguments of backbone/neck/head, checked without building anything."""
    specs = model_specs(cfg)
    for part, table in (("backbone", BACKBONES), ("neck", NECKS), ("head", HEADS)):
        with located(cfg, f"model.{part}"):
            name = specs[part].get("name")
            kwargs = {k: v for k, v in specs[part].items() if k != "name"}
            check_kwargs(lookup(table, name, f"model.{part}.name", part), kwargs, f"model.{part} ({name})",
                         injected=("in_channels",) if part != "backbone" else ())
    return specs


def validate(cfg: Config, splits: tuple[str, ...] = ("train", "eval")) -> None:
    """Every cheap check first, so a typo anywhere fails in about a second, before data or model work."""
    check_columns(cfg, splits)
    check_model_specs(cfg)
    build_loss_from_config(cfg)
    build_postprocess_from_config(cfg)
    build_metric_from_config(cfg)
    for split in splits:
        if getattr(cfg, split).dataset.transform_pipeline:
            build_pipeline(cfg, split)


def build_model_from_config(cfg: Config, pretrained_backbone: bool | None = None) -> nn.Module:
    """The DBNet of ``cfg.model``; ``pretrained_backbone=False`` skips ImageNet weights (eval, resume)."""
    specs = check_model_specs(cfg)
    if pretrained_backbone is False:
        specs["backbone"]["pretrained"] = False
    pretrained = zoo_checkpoint(cfg, specs) if cfg.model.pretrained is True else cfg.model.pretrained or None
    with located(cfg, "model"):
        return build_model(specs["backbone"], specs["neck"], specs["head"], pretrained=pretrained)


def zoo_checkpoint(cfg: Config, specs: dict[str, dict]) -> str:
    """``model.pretrained: true``: the MindOCR model-zoo URL of the preset whose network ``specs`` is (the backbone's
    own ``pretrained`` aside), so a YAML spelling out ``dbnet_resnet50`` gets that file as ``model.name`` would."""
    def network(spec: dict[str, dict]) -> dict:
        return {**spec, "backbone": {k: v for k, v in spec["backbone"].items() if k != "pretrained"}}

    name = next((n for n, preset in MODEL_PRESETS.items() if network(preset) == network(specs)), None)
    if name not in MINDOCR_ZOO:
        with located(cfg, "model.pretrained"):
            raise ConfigError(f"model.pretrained: true, but this network is none of MindOCR's model-zoo models "
                              f"({', '.join(MINDOCR_ZOO)}); give a checkpoint path or URL, or false")
    return MINDOCR_ZOO[name]


def _section(cfg: Config, key: str, build: Callable[..., Any]) -> Any:
    """Build a ``{name: ..., **kwargs}`` section with errors located at its YAML line."""
    spec = dict(getattr(cfg, key))
    with located(cfg, key):
        return build(spec.pop("name", None), **spec)


def build_loss_from_config(cfg: Config) -> nn.Module:
    return _section(cfg, "loss", build_loss)


def build_postprocess_from_config(cfg: Config):
    return _section(cfg, "postprocess", build_postprocess)


def build_metric_from_config(cfg: Config):
    return _section(cfg, "metric", build_metric)


def main_indicator(cfg: Config) -> str:
    return str(cfg.metric.get("main_indicator", "f-score"))


def build_pipeline(cfg: Config, split: str, fuse: bool = True) -> Compose:
    key = f"{split}.dataset.transform_pipeline"
    pipeline = getattr(cfg, split).dataset.transform_pipeline
    if not pipeline:
        raise ConfigError(f"{key} is empty: list the transforms (see the MindOCR det configs)")
    with located(cfg, key):
        return build_transforms(pipeline, fuse=fuse)


def split_device_normalize(pipeline: Compose, enabled: bool = True) -> tuple[Compose, dict | None]:
    """Move a trailing NormalizeImage + ToCHWImage onto the device (when ``enabled``: on CUDA), so workers ship
    uint8 HWC (640x640: 1.2 MB instead of 4.9 MB); on a CPU the workers keep it. Returns the (shortened)
    pipeline and the normalisation parameters, or the pipeline unchanged and None."""
    ts = list(pipeline.transforms)
    norm = None
    if ts and isinstance(ts[-1], FusedNormalize):
        norm, rest = ts[-1].normalize, ts[:-1]
    elif len(ts) >= 2 and isinstance(ts[-1], ToCHWImage) and isinstance(ts[-2], NormalizeImage):
        norm, rest = ts[-2], ts[:-2]
    if not enabled or norm is None or not norm.is_hwc:
        return pipeline, None
    return Compose(rest), {"mean": norm.mean.reshape(-1).tolist(), "std": norm.std.reshape(-1).tolist(),
                           "swap_rb": bool(norm.bgr_to_rgb or norm.rgb_to_bgr)}


def build_dataset(cfg: Config, split: str, pipeline: Compose) -> DetDataset:
    ds = getattr(cfg, split).dataset
    if ds.type not in ("DetDataset",):
        raise ConfigError(f"{split}.dataset.type: unknown dataset '{ds.type}' (valid: DetDataset)")
    return DetDataset(ds.dataset_root, ds.data_dir, ds.label_file, pipeline, ds.output_columns,
                      sample_ratio=ds.sample_ratio, seed=cfg.system.seed, config_prefix=f"{split}.dataset",
                      cache_images=ds.cache_images)


def worker_count(requested: int, world_size: int, key: str) -> int:
    """``requested`` capped at the cores each process gets, as MindOCR caps it (more only thrash)."""
    cores = max((os.cpu_count() or 1) // max(world_size, 1), 1)
    if requested > cores:
        logger.info("%s=%d but %d CPU core(s) per process are available: using %d worker(s)", key, requested,
                    cores, cores)
        return cores
    return requested


def build_split_loader(cfg: Config, split: str, dataset: DetDataset, rank: int, world_size: int,
                       device: torch.device) -> torch.utils.data.DataLoader:
    lc = getattr(cfg, split).loader
    train = split == "train"
    workers = worker_count(lc.num_workers, world_size, f"{split}.loader.num_workers")
    return build_loader(dataset, batch_size=lc.batch_size, shuffle=lc.shuffle and train,
                        drop_remainder=lc.drop_remainder if train else False, num_workers=workers,
                        seed=cfg.system.seed, rank=rank, world_size=world_size, pin_memory=device.type != "cpu",
                        prefetch_factor=lc.prefetch_factor, persistent_workers=lc.persistent_workers,
                        pad_shards=train)


def check_columns(cfg: Config, splits: tuple[str, ...] = ("train", "eval")) -> None:
    """The train set must feed the model an image and the loss its four maps; eval needs polygons."""
    if "train" in splits:
        _check_train_columns(cfg)
    ecols = cfg.eval.dataset.output_columns
    if "eval" in splits and ecols:
        missing = [c for c in ("image", "polys", "ignore_tags") if c not in ecols]
        if missing:
            raise ConfigError(f"eval.dataset.output_columns {ecols} lacks {missing}, which evaluation needs")


def _check_train_columns(cfg: Config) -> None:
    cols = cfg.train.dataset.output_columns
    idx = cfg.train.dataset.net_input_column_index or [0]
    if not cols or idx[0] >= len(cols) or cols[idx[0]] != "image":
        raise ConfigError(f"train.dataset.output_columns {cols} with net_input_column_index {idx}: the network "
                          "input must be the 'image' column")
    labels = [cols[i] for i in cfg.train.dataset.label_column_index if i < len(cols)]
    unknown = [c for c in labels if c not in LOSS_COLUMNS]
    if unknown:
        raise ConfigError(f"train.dataset.label_column_index selects {unknown}; DBLoss takes {list(LOSS_COLUMNS)}")
