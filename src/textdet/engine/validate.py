"""Start-up validation: the one path that checks a config before training or evaluation, torch-free, so a
typo fails in well under 2 s. Checking a pipeline means building it, so ``validate`` hands the built
pipelines on (built once)."""

from __future__ import annotations

import os

from textdet.config import Config
from textdet.config.components import MODEL_PART_NAMES, lookup
from textdet.config.loader import get_key, located
from textdet.data.labels import check_dataset_paths
from textdet.data.pipeline import Compose
from textdet.engine.presets import model_specs
from textdet.engine.sections import build_pipeline, build_section
from textdet.errors import ConfigError
from textdet.metrics import METRICS
from textdet.postprocess import POSTPROCESSES

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
        dataset = getattr(cfg, split).dataset
        check_dataset_paths(dataset.dataset_root, dataset.data_dir, dataset.label_file, f"{split}.dataset")
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
            where = ""
            if meta is not None:
                where = f" (set at {meta.where(key)})"
            raise ConfigError(f"{key}: {value} does not exist{where}; fix the path, or {escape}")


def train_weight_keys(cfg: Config) -> tuple[str, ...]:
    """The weight-file keys training reads: model.resume, and model.pretrained unless a resume file replaces it."""
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
