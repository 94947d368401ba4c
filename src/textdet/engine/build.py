"""Config sections -> objects: one ``build_*`` per stage, errors prefixed with the key's YAML line. The only
place that knows both the config layout and the constructors, so every other module works without the config
system."""

from __future__ import annotations

import logging
import os

import torch
from torch import nn

from textdet.config import Config
from textdet.config.components import check_kwargs, lookup
from textdet.config.loader import located
from textdet.data.dataset import DetDataset, build_loader, collate
from textdet.data.device_targets import device_columns
from textdet.data.pipeline import Compose, FusedNormalize
from textdet.data.resize import NormalizeImage, ToCHWImage
from textdet.engine.buckets import EvalBatching, eval_batching
from textdet.engine.checkpoint import load_weights, resolve_ckpt
from textdet.engine.validate import MODEL_PRESETS, build_section, model_specs
from textdet.engine.validate import build_pipeline as build_pipeline  # build.* for the commands
from textdet.engine.validate import validate as validate
from textdet.errors import ConfigError
from textdet.loss import LOSSES
from textdet.metrics import METRICS
from textdet.models import BACKBONES, HEADS, NECKS, build_model
from textdet.models.weights import MINDOCR_ZOO
from textdet.postprocess import POSTPROCESSES

logger = logging.getLogger("textdet")

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


def build_model_from_config(cfg: Config, pretrained_backbone: bool | None = None) -> nn.Module:
    """The DBNet of ``cfg.model``. ``pretrained_backbone=False`` skips the ImageNet weights and
    ``model.pretrained`` (nothing downloaded or read): eval and resume load a checkpoint that replaces
    them."""
    specs = check_model_specs(cfg)
    pretrained = None
    if pretrained_backbone is False:
        specs["backbone"]["pretrained"] = False
    elif cfg.model.pretrained is True:
        pretrained = zoo_checkpoint(cfg, specs)
    elif cfg.model.pretrained:
        pretrained = cfg.model.pretrained
    with located(cfg, "model"):
        return build_model(specs["backbone"], specs["neck"], specs["head"], pretrained=pretrained)


def zoo_checkpoint(cfg: Config, specs: dict[str, dict]) -> str:
    """``model.pretrained: true``: the MindOCR model-zoo URL of the preset whose network ``specs`` is (the
    backbone's own ``pretrained`` aside), so a YAML spelling out ``dbnet_resnet50`` gets that file as
    ``model.name`` would."""
    def network(spec: dict[str, dict]) -> dict:
        return {**spec, "backbone": {k: v for k, v in spec["backbone"].items() if k != "pretrained"}}

    name = next((n for n, preset in MODEL_PRESETS.items() if network(preset) == network(specs)), None)
    if name not in MINDOCR_ZOO:
        with located(cfg, "model.pretrained"):
            raise ConfigError(f"model.pretrained: true, but this network is none of MindOCR's model-zoo models "
                              f"({', '.join(MINDOCR_ZOO)}); give a checkpoint path or URL, or false")
    return MINDOCR_ZOO[name]


def load_model(cfg: Config, ckpt: str | None,
               keys: tuple[str, ...] = ("eval.ckpt_load_path",)) -> tuple[nn.Module, str | None]:
    """The DBNet of ``cfg`` with ``resolve_ckpt``'s weights (random for ``keys=()`` and no ``ckpt``), and the path."""
    path, what = resolve_ckpt(cfg, ckpt, keys) if ckpt or keys else (None, None)
    model = build_model_from_config(cfg, pretrained_backbone=False)
    if path is not None:
        load_weights(model, path, what)
    return model, path


def build_loss_from_config(cfg: Config) -> nn.Module:
    return build_section(cfg, "loss", LOSSES)


def build_postprocess_from_config(cfg: Config):
    return build_section(cfg, "postprocess", POSTPROCESSES)


def build_metric_from_config(cfg: Config):
    return build_section(cfg, "metric", METRICS)


def main_indicator(cfg: Config) -> str:
    return str(cfg.metric.get("main_indicator", "f-score"))


def split_device_normalize(pipeline: Compose, enabled: bool = True) -> tuple[Compose, dict | None]:
    """(pipeline less a trailing NormalizeImage + ToCHWImage, their parameters) if ``enabled``, else (it, None)."""
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


def build_dataset(cfg: Config, split: str, pipeline: Compose, device_targets: bool = False) -> DetDataset:
    """``device_targets``: the workers ship polygon arrays instead of the four DB maps (split_device_targets)."""
    ds = getattr(cfg, split).dataset
    if ds.type not in ("DetDataset",):
        raise ConfigError(f"{split}.dataset.type: unknown dataset '{ds.type}' (valid: DetDataset)")
    columns = device_columns(ds.output_columns) if device_targets else ds.output_columns
    return DetDataset(ds.dataset_root, ds.data_dir, ds.label_file, pipeline, columns,
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
    batching = EvalBatching(collate) if train else eval_batching(cfg, dataset, lc.batch_size)
    return build_loader(dataset, batch_size=lc.batch_size, shuffle=lc.shuffle and train,
                        drop_remainder=lc.drop_remainder if train else False, num_workers=workers,
                        seed=cfg.system.seed, rank=rank, world_size=world_size, pin_memory=device.type != "cpu",
                        prefetch_factor=lc.prefetch_factor, persistent_workers=lc.persistent_workers,
                        pad_shards=train, collate_fn=batching.collate_fn, batches=batching.batches)
