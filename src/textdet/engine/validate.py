"""The one start-up validation path, torch-free, so a typo fails in well under 2 s; pipelines built once."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from typing import Any

from textdet.config import Config
from textdet.config.components import MODEL_PART_NAMES, build_component, lookup
from textdet.config.loader import get_key, located
from textdet.data.labels import check_dataset_paths
from textdet.data.pipeline import Compose, build_transforms
from textdet.errors import ConfigError
from textdet.metrics import METRICS
from textdet.postprocess import POSTPROCESSES

# MindOCR's named model presets (models/det_dbnet.py), used when `model.name` is set.
_FPN = {"name": "DBFPN", "out_channels": 256, "bias": False}
_HEAD = {"name": "DBHead", "k": 50, "bias": False, "adaptive": True}
MODEL_PRESETS: dict[str, dict[str, dict]] = {
    "dbnet_resnet18": {"backbone": {"name": "det_resnet18", "pretrained": True}, "neck": _FPN, "head": _HEAD},
    "dbnet_resnet50": {"backbone": {"name": "det_resnet50", "pretrained": True}, "neck": _FPN, "head": _HEAD},
    "dbnetpp_resnet50": {"backbone": {"name": "det_resnet50", "pretrained": True},
                         "neck": {**_FPN, "use_asf": True, "channel_attention": True}, "head": _HEAD},
    "dbnet_mobilenetv3": {
        "backbone": {"name": "det_mobilenet_v3", "architecture": "large", "alpha": 0.5, "out_stages": [5, 8, 14, 20],
                     "bottleneck_params": {"se_version": "SqueezeExciteV2", "always_expand": True},
                     "pretrained": "https://download.mindspore.cn/toolkits/mindcv/mobilenet/mobilenetv3/"
                                   "mobilenet_v3_large_050_no_scale_se_v2_expand-3c4047ac.ckpt"},
        "neck": _FPN, "head": _HEAD},
}

# Loss inputs, by output column name (MindOCR passes them by position through label_column_index).
LOSS_COLUMNS = ("binary_map", "mask", "thresh_map", "thresh_mask")


def validate(cfg: Config, splits: tuple[str, ...] = ("train", "eval"), model: bool = True) -> dict[str, Compose]:
    """Check ``cfg`` for ``splits`` (``model=False``: no model section) -> ``{split: its built pipeline}``: columns,
    model part names, pipelines, post-processing and metric first, then the file system (data paths)."""
    check_columns(cfg, splits)
    option = cfg.train.targets_on_device
    if "train" in splits and option != "auto" and not isinstance(option, bool):
        with located(cfg, "train.targets_on_device"):
            raise ConfigError(f"train.targets_on_device must be auto, true or false, got {option!r}")
    if model:
        for part, spec in model_specs(cfg).items():
            with located(cfg, f"model.{part}.name"):
                lookup(dict.fromkeys(MODEL_PART_NAMES[part]), spec.get("name"), f"model.{part}.name", part)
    pipelines = {split: build_pipeline(cfg, split) for split in splits}
    build_section(cfg, "postprocess", POSTPROCESSES)
    build_section(cfg, "metric", METRICS)
    for split in splits:
        ds = getattr(cfg, split).dataset
        check_dataset_paths(ds.dataset_root, ds.data_dir, ds.label_file, f"{split}.dataset")
    return pipelines


_ESCAPES = {"model.resume": "-o model.resume=True for the run folder's train_resume.ckpt",
            "eval.ckpt_load_path": "pass --ckpt PATH"}


def check_weight_paths(cfg: Config, keys: tuple[str, ...]) -> None:
    """Each of ``keys`` set to a file path (not True/False, not a URL) must exist: a typo is an error naming the key
    and the path before ``import torch``, never a silent fresh start."""
    for key in keys:
        value = get_key(cfg, key)
        if not isinstance(value, str) or not value or value.startswith(("http://", "https://")):
            continue
        if not os.path.isfile(os.path.expanduser(value)):
            escape = _ESCAPES.get(key, f"-o {key}=false")
            meta = getattr(cfg, "meta", None)
            where = f" (set at {meta.where(key)})" if meta is not None else ""
            raise ConfigError(f"{key}: {value} does not exist{where}; fix the path, or {escape}")


def train_weight_keys(cfg: Config) -> tuple[str, ...]:
    """The weight-file keys training reads: model.resume, and model.pretrained unless a resume file replaces it."""
    resume = cfg.model.resume
    resuming = resume is True and os.path.isfile(os.path.join(cfg.train.ckpt_save_dir, "train_resume.ckpt"))
    resuming = resuming or (isinstance(resume, str) and bool(resume))
    return ("model.resume",) if resuming else ("model.resume", "model.pretrained")


def train_splits(cfg: Config) -> tuple[str, ...]:
    """The splits ``textdet train`` reads: train, and eval when it evaluates while training."""
    evaluates = cfg.system.val_while_train and bool(cfg.eval.dataset.transform_pipeline)
    return ("train", "eval") if evaluates else ("train",)


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


def build_section(cfg: Config, key: str, table: Mapping[str, Callable[..., Any]]) -> Any:
    """Build a ``{name: ..., **kwargs}`` section from its name -> class table, errors located at its YAML line."""
    spec = dict(getattr(cfg, key))
    with located(cfg, key):
        return build_component(table, spec.pop("name", None), spec, key, key)


def build_pipeline(cfg: Config, split: str, fuse: bool = True) -> Compose:
    key = f"{split}.dataset.transform_pipeline"
    pipeline = getattr(cfg, split).dataset.transform_pipeline
    if not pipeline:
        raise ConfigError(f"{key} is empty: list the transforms (see the MindOCR det configs)")
    with located(cfg, key):
        return build_transforms(pipeline, fuse=fuse)


def check_columns(cfg: Config, splits: tuple[str, ...] = ("train", "eval")) -> None:
    """The train set must feed the model an image and the loss its four maps; eval needs polygons."""
    if "train" in splits:
        cols = cfg.train.dataset.output_columns
        idx = cfg.train.dataset.net_input_column_index or [0]
        if not cols or idx[0] >= len(cols) or cols[idx[0]] != "image":
            raise ConfigError(f"train.dataset.output_columns {cols} with net_input_column_index {idx}: the network "
                              "input must be the 'image' column")
        labels = [cols[i] for i in cfg.train.dataset.label_column_index if i < len(cols)]
        unknown = [c for c in labels if c not in LOSS_COLUMNS]
        if unknown:
            raise ConfigError(f"train.dataset.label_column_index selects {unknown}; DBLoss takes {list(LOSS_COLUMNS)}")
    ecols = cfg.eval.dataset.output_columns
    if "eval" in splits and ecols:
        missing = [c for c in ("image", "polys", "ignore_tags") if c not in ecols]
        if missing:
            raise ConfigError(f"eval.dataset.output_columns {ecols} lacks {missing}, which evaluation needs")
