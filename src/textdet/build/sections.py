"""The config's torch-free sections, built and checked at start-up: which network the model sections describe
(MindOCR's named presets overlaid by explicit ``model.backbone/neck/head``), the data pipelines, the
post-processing and the metric, then ``validate``, the one path that checks a config before training or
evaluation. Torch-free, so a typo fails in well under 2 s, before ``import torch``; errors name the key's
YAML line. Checking a pipeline means building it, so ``validate`` hands the built pipelines on."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from typing import Any

from textdet.config import Config
from textdet.config.components import MODEL_PART_NAMES, build_component, lookup
from textdet.config.loader import get_key, located
from textdet.data.geometric import RandomScale
from textdet.data.labels import check_dataset_paths
from textdet.data.pipeline import CROPS, Compose, build_transforms
from textdet.data.targets import LOSS_COLUMNS, ShrinkBinaryMap
from textdet.data.tiling import TILE_DIVISOR, TileSpec, default_overlap, parse_tile
from textdet.errors import ConfigError
from textdet.metrics import METRICS
from textdet.postprocess import POSTPROCESSES

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


def build_section(cfg: Config, key: str, table: Mapping[str, Callable[..., Any]]) -> Any:
    """Build a ``{name: ..., **kwargs}`` section from its name -> class table, errors located at its YAML
    line."""
    spec = dict(getattr(cfg, key))
    with located(cfg, key):
        return build_component(table, spec.pop("name", None), spec, key, key)


def build_pipeline(cfg: Config, split: str, fuse: bool = True) -> Compose:
    """The transform pipeline of ``split`` (train or eval); ``fuse=False`` keeps the sequential reference
    transforms (benchmarks compare the two)."""
    key = f"{split}.dataset.transform_pipeline"
    pipeline = getattr(cfg, split).dataset.transform_pipeline
    if not pipeline:
        raise ConfigError(f"{key} is empty: list the transforms (see the MindOCR det configs)")
    if split == "eval" and eval_tile(cfg) is not None:
        pipeline = with_tile(pipeline, eval_tile(cfg))
    with located(cfg, key):
        return build_transforms(pipeline, fuse=fuse)


def eval_tile(cfg: Config) -> TileSpec | None:
    """``eval.tile`` and ``eval.tile_overlap``, checked: pages larger than the tile are read in tiles."""
    with located(cfg, "eval.tile"):
        return parse_tile(cfg.eval.tile, cfg.eval.tile_overlap, "eval.tile")


def with_tile(pipeline: list, spec: TileSpec) -> list:
    """``pipeline`` with every DetResize told to keep pages larger than ``spec`` at their own pixels."""
    tiled = []
    for entry in pipeline:
        if isinstance(entry, dict) and "DetResize" in entry:
            entry = {**entry, "DetResize": {**(entry["DetResize"] or {}), "tile": [spec.height, spec.width]}}
        elif entry == "DetResize":
            entry = {"DetResize": {"tile": [spec.height, spec.width]}}
        tiled.append(entry)
    return tiled


INFER_RUNTIMES = ("auto", "torch", "onnxruntime")  # what runs a model in evaluation and prediction
# a page read below half the smallest scale the model trained at is worth reading in tiles
SHRINK_MARGIN = 0.5
DEFAULT_TILE = (640, 640)  # the tile suggested when the training pipeline names no window size


def tile_advice(cfg: Config | None) -> tuple[float, TileSpec]:
    """The scale below which a resized page's words are likely too small for the model, and the tiles to
    read such pages in: half the smallest scale the training pipeline reads photos at (RandomScale's lower
    bound, else 1), and tiles of its training window (crop_size, else 640 x 640) overlapping by a fifth."""
    smallest_scale, window = 1.0, DEFAULT_TILE
    if cfg is not None and cfg.train.dataset.transform_pipeline:
        for transform in build_pipeline(cfg, "train", fuse=False).transforms:
            if isinstance(transform, RandomScale):
                smallest_scale = min(transform.scale_range)
            if isinstance(transform, CROPS):
                window = tuple(int(side) for side in transform.crop_size)
    height, width = (max(round(side / TILE_DIVISOR) * TILE_DIVISOR, TILE_DIVISOR) for side in window)
    return SHRINK_MARGIN * smallest_scale, TileSpec(height, width, default_overlap(height, width))


def train_shrink(cfg: Config) -> ShrinkBinaryMap | None:
    """The training pipeline's ShrinkBinaryMap, whose min_text_size and shrink_ratio decide which labels
    split (data/label_shapes.py); None when the pipeline draws no DB target."""
    transforms = build_pipeline(cfg, "train", fuse=False).transforms
    return next((t for t in transforms if isinstance(t, ShrinkBinaryMap)), None)


def validate(cfg: Config, splits: tuple[str, ...] = ("train", "eval"), model: bool = True
             ) -> dict[str, Compose]:
    """Check ``cfg`` for ``splits`` (``model=False``: no model section) -> ``{split: its built pipeline}``:
    columns, model part names, pipelines, post-processing and metric first, then the file system (data
    paths)."""
    check_columns(cfg, splits)
    if cfg.system.infer_runtime not in INFER_RUNTIMES:
        with located(cfg, "system.infer_runtime"):
            raise ConfigError(f"system.infer_runtime must be one of {', '.join(INFER_RUNTIMES)}, got "
                              f"{cfg.system.infer_runtime!r}")
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
        dataset = getattr(cfg, split).dataset
        check_dataset_paths(dataset.dataset_root, dataset.data_dir, dataset.label_file, f"{split}.dataset")
    return pipelines


_ESCAPES = {"model.resume": "-o model.resume=True for the run folder's train_resume.ckpt",
            "eval.ckpt_load_path": "pass --ckpt PATH"}


def check_weight_paths(cfg: Config, keys: tuple[str, ...]) -> None:
    """Each of ``keys`` set to a file path (not True/False, not a URL) must exist: a typo is an error naming
    the key and the path before ``import torch``, never a silent fresh start."""
    for key in keys:
        value = get_key(cfg, key)
        if not isinstance(value, str) or not value or value.startswith(("http://", "https://")):
            continue
        if not os.path.isfile(os.path.expanduser(value)):
            escape = _ESCAPES.get(key, f"-o {key}=false")
            meta = getattr(cfg, "meta", None)
            where = ""
            if meta is not None:
                where = f" (set at {meta.where(key)})"
            raise ConfigError(f"{key}: {value} does not exist{where}; fix the path, or {escape}")


def train_weight_keys(cfg: Config) -> tuple[str, ...]:
    """The weight-file keys training reads: model.resume, and model.pretrained unless a resume file replaces
    it."""
    resume = cfg.model.resume
    if resume is True:
        resuming = os.path.isfile(os.path.join(cfg.train.ckpt_save_dir, "train_resume.ckpt"))
    else:
        resuming = isinstance(resume, str) and bool(resume)
    if resuming:
        return ("model.resume",)
    return ("model.resume", "model.pretrained")


def train_splits(cfg: Config) -> tuple[str, ...]:
    """The splits ``textdet train`` reads: train, and eval when it evaluates while training."""
    evaluates = cfg.system.val_while_train and bool(cfg.eval.dataset.transform_pipeline)
    return ("train", "eval") if evaluates else ("train",)


def check_columns(cfg: Config, splits: tuple[str, ...] = ("train", "eval")) -> None:
    """The train set must feed the model an image and the loss its four maps; eval needs polygons."""
    if "train" in splits:
        _check_train_columns(cfg)
    eval_columns = cfg.eval.dataset.output_columns
    if "eval" in splits and eval_columns:
        missing = [c for c in ("image", "polys", "ignore_tags") if c not in eval_columns]
        if missing:
            raise ConfigError(f"eval.dataset.output_columns {eval_columns} lacks {missing}, which "
                              "evaluation needs")


def _check_train_columns(cfg: Config) -> None:
    """The network input column must be 'image', and every label column one the loss takes."""
    columns = cfg.train.dataset.output_columns
    input_index = cfg.train.dataset.net_input_column_index
    if not input_index:
        input_index = [0]
    first = input_index[0]
    if not columns or first >= len(columns) or columns[first] != "image":
        raise ConfigError(f"train.dataset.output_columns {columns} with net_input_column_index "
                          f"{input_index}: the network input must be the 'image' column")
    labels = [columns[i] for i in cfg.train.dataset.label_column_index if i < len(columns)]
    unknown = [c for c in labels if c not in LOSS_COLUMNS]
    if unknown:
        raise ConfigError(f"train.dataset.label_column_index selects {unknown}; DBLoss takes "
                          f"{list(LOSS_COLUMNS)}")
    lacking = [c for c in ("thresh_map", "thresh_mask") if c not in columns]
    if cfg.model.head.get("adaptive", True) and lacking:
        raise ConfigError(f"model.head.adaptive is true (the threshold branch trains) but "
                          f"train.dataset.output_columns {columns} has no {lacking}: add a BorderMap step to "
                          "train.dataset.transform_pipeline and thresh_map, thresh_mask to output_columns "
                          "(and label_column_index), or set model.head.adaptive: false")
    gap_weight = cfg.loss.get("gap_weight", 0)
    if isinstance(gap_weight, (int, float)) and gap_weight > 0 and "thresh_mask" not in labels:
        raise ConfigError(f"loss.gap_weight is {gap_weight} (P is pushed to 0 around each word) but "
                          f"train.dataset.label_column_index selects {labels}, no thresh_mask: add a "
                          "BorderMap step to train.dataset.transform_pipeline, thresh_map and thresh_mask "
                          "to output_columns and their indices to label_column_index, or set "
                          "loss.gap_weight: 0")
