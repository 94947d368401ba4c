"""Config sections -> objects: one ``build_*`` per stage, errors prefixed with the key's YAML line. The only
place that knows both the config layout and the constructors, so every other module works without the config
system."""

from __future__ import annotations

import logging
import os
from concurrent.futures import Future

import torch
from torch import nn

from textdet.config import Config
from textdet.config.components import check_kwargs, lookup
from textdet.config.loader import located
from textdet.data.dataset import DetDataset, build_loader, collate
from textdet.data.device_targets import device_columns
from textdet.data.pipeline import Compose, FusedNormalize
from textdet.data.resize import NormalizeImage, ToCHWImage
from textdet.engine.amp import LossScaler
from textdet.engine.buckets import EvalBatching, eval_batching
from textdet.engine.checkpoint import adopt_thresholds, load_weights, resolve_ckpt
from textdet.engine.optim import build_optimizer_in_background, checked_lr_mult
from textdet.engine.presets import MODEL_PRESETS as MODEL_PRESETS  # build.MODEL_PRESETS: what it builds
from textdet.engine.presets import model_specs, preset_of
from textdet.engine.schedule import LRSchedule
from textdet.engine.sections import build_pipeline as build_pipeline  # build.* for the commands
from textdet.engine.sections import build_section
from textdet.engine.sections import train_shrink as train_shrink  # build.* for the commands
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
    name = preset_of(specs)
    if name not in MINDOCR_ZOO:
        with located(cfg, "model.pretrained"):
            raise ConfigError(f"model.pretrained: true, but this network is none of MindOCR's model-zoo models "
                              f"({', '.join(MINDOCR_ZOO)}); give a checkpoint path or URL, or false")
    return MINDOCR_ZOO[name]


def load_model(cfg: Config, ckpt: str | None, keys: tuple[str, ...] = ("eval.ckpt_load_path",)
               ) -> tuple[nn.Module, str | None, dict[str, float]]:
    """The DBNet of ``cfg`` with ``resolve_ckpt``'s weights (random for ``keys=()`` and no ``ckpt``), the
    path, and the thresholds taken from the checkpoint into ``cfg.postprocess`` (``adopt_thresholds``)."""
    path = None
    if ckpt or keys:
        path, what = resolve_ckpt(cfg, ckpt, keys)  # before building: a missing file fails first
    model = build_model_from_config(cfg, pretrained_backbone=False)
    adopted: dict[str, float] = {}
    if path is not None:
        held = load_weights(model, path, what)
        adopted = adopt_thresholds(cfg, held, path)
    return model, path, adopted


def build_loss_from_config(cfg: Config) -> nn.Module:
    return build_section(cfg, "loss", LOSSES)


def build_postprocess_from_config(cfg: Config):
    return build_section(cfg, "postprocess", POSTPROCESSES)


def build_metric_from_config(cfg: Config):
    return build_section(cfg, "metric", METRICS)


def main_indicator(cfg: Config) -> str:
    return str(cfg.metric.get("main_indicator", "f-score"))


def build_schedule(cfg: Config, steps_per_epoch: int, accumulation: int) -> LRSchedule:
    """The learning rate per optimizer step, from ``scheduler`` (``steps_per_epoch``: micro-batches)."""
    scheduler = cfg.scheduler
    return LRSchedule(scheduler.scheduler, scheduler.lr, steps_per_epoch, scheduler.num_epochs,
                      warmup_epochs=scheduler.warmup_epochs, warmup_factor=scheduler.warmup_factor,
                      min_lr=scheduler.min_lr, decay_epochs=scheduler.decay_epochs,
                      decay_rate=scheduler.decay_rate, milestones=scheduler.milestones,
                      num_cycles=scheduler.num_cycles, cycle_decay=scheduler.cycle_decay,
                      lr_epoch_stair=scheduler.lr_epoch_stair, accumulation=accumulation,
                      accumulation_lr=cfg.train.accumulation_lr)


def build_optimizer_from_config(cfg: Config, model: nn.Module) -> Future:
    """The ``optimizer`` section's optimizer over ``model``, built in a thread (torch.optim imports take
    seconds): a Future whose ``result()`` is the optimizer."""
    optimizer = cfg.optimizer
    with located(cfg, "optimizer.lr_mult"):
        checked_lr_mult(model, optimizer.lr_mult)
    return build_optimizer_in_background(
        model, optimizer.opt, cfg.scheduler.lr, weight_decay=optimizer.weight_decay,
        momentum=optimizer.momentum, nesterov=optimizer.nesterov,
        filter_bias_and_bn=optimizer.filter_bias_and_bn, beta1=optimizer.beta1, beta2=optimizer.beta2,
        eps=optimizer.eps, no_weight_decay_params=optimizer.no_weight_decay_params,
        lr_mult=optimizer.lr_mult)


def build_loss_scaler(cfg: Config, needs_scaling: bool) -> LossScaler:
    """The ``loss_scaler`` section; ``needs_scaling`` (fp16 autocast) switches it on."""
    scaler = cfg.loss_scaler
    return LossScaler(needs_scaling, scaler.type == "dynamic", scaler.loss_scale, scaler.scale_factor,
                      scaler.scale_window)


def split_device_normalize(pipeline: Compose, enabled: bool = True) -> tuple[Compose, dict | None]:
    """(pipeline less a trailing NormalizeImage + ToCHWImage, their parameters) if ``enabled``, else (it, None)."""
    transforms = list(pipeline.transforms)
    norm = None
    if transforms and isinstance(transforms[-1], FusedNormalize):
        norm = transforms[-1].normalize
        rest = transforms[:-1]
    elif (len(transforms) >= 2 and isinstance(transforms[-1], ToCHWImage)
          and isinstance(transforms[-2], NormalizeImage)):
        norm = transforms[-2]
        rest = transforms[:-2]
    if not enabled or norm is None or not norm.is_hwc:
        return pipeline, None
    parameters = {"mean": norm.mean.reshape(-1).tolist(), "std": norm.std.reshape(-1).tolist(),
                  "swap_rb": bool(norm.bgr_to_rgb or norm.rgb_to_bgr)}
    return Compose(rest), parameters


def build_dataset(cfg: Config, split: str, pipeline: Compose, device_targets: bool = False,
                  aside_every: int = 0) -> DetDataset:
    """``device_targets``: the workers ship polygon arrays instead of the four DB maps (split_device_targets);
    ``aside_every``: the train split less the photos the start guard sets aside (``guard_aside_every``)."""
    dataset = getattr(cfg, split).dataset
    if dataset.type not in ("DetDataset",):
        raise ConfigError(f"{split}.dataset.type: unknown dataset '{dataset.type}' (valid: DetDataset)")
    columns = dataset.output_columns
    min_samples = dataset.min_epoch_samples if split == "train" else 0  # an evaluation scores each photo once
    if device_targets:
        columns = device_columns(columns)
    return DetDataset(dataset.dataset_root, dataset.data_dir, dataset.label_file, pipeline, columns,
                      sample_ratio=dataset.sample_ratio, seed=cfg.system.seed,
                      config_prefix=f"{split}.dataset", cache_images=dataset.cache_images,
                      aside_every=aside_every, min_samples=min_samples)


def build_guard_dataset(cfg: Config, eval_pipeline: Compose, aside_every: int) -> DetDataset:
    """The training photos the start guard sets aside, read as the eval split reads its photos (the eval
    pipeline and columns, no augmentation)."""
    train = cfg.train.dataset
    return DetDataset(train.dataset_root, train.data_dir, train.label_file, eval_pipeline,
                      cfg.eval.dataset.output_columns, sample_ratio=train.sample_ratio, seed=cfg.system.seed,
                      config_prefix="train.dataset", aside_every=aside_every, aside_only=True)


def build_start_model(cfg: Config, device: torch.device) -> nn.Module:
    """The model ``model.pretrained`` names, for inference only: the start guard's comparison."""
    model = build_model_from_config(cfg).requires_grad_(False).eval()
    model.to(device)
    return model.to(memory_format=torch.channels_last)


def guard_aside_every(cfg: Config) -> int:
    """``train.guard_holdout`` as "every n-th training photo" (0: the guard is off), checked."""
    share = cfg.train.guard_holdout
    if not share:
        if cfg.train.guard_thresholds:
            raise ConfigError("train.guard_thresholds: the thresholds are re-chosen on the photos the start "
                              "guard sets aside, but train.guard_holdout is 0; set it (0.1 sets every 10th "
                              "photo aside) or train.guard_thresholds: false")
        return 0
    if not 0 < share <= 0.5:
        raise ConfigError(f"train.guard_holdout: {share} is not a share between 0 and 0.5 of the training "
                          "photos (0.1 sets every 10th aside; 0 turns the start guard off)")
    if not cfg.model.pretrained:
        raise ConfigError("train.guard_holdout: the start guard compares the trained model with the one it "
                          "started from, but model.pretrained names none; set model.pretrained or "
                          "train.guard_holdout: 0")
    if not cfg.system.val_while_train:
        raise ConfigError("train.guard_holdout: the start guard acts at each evaluation, but "
                          "system.val_while_train is false; turn it on or set train.guard_holdout: 0")
    return round(1 / share)


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
    """The ``{split}.loader`` DataLoader over ``dataset``: the train split shuffles, drops the remainder as
    set and pads its shards; eval batches by input shape (``eval_batching``)."""
    loader_cfg = getattr(cfg, split).loader
    train = split == "train"
    workers = worker_count(loader_cfg.num_workers, world_size, f"{split}.loader.num_workers")
    if train:
        batching = EvalBatching(collate)  # no shape buckets in training
        drop_remainder = loader_cfg.drop_remainder
    else:
        batching = eval_batching(cfg, dataset, loader_cfg.batch_size)
        drop_remainder = False
    return build_loader(dataset, batch_size=loader_cfg.batch_size, shuffle=loader_cfg.shuffle and train,
                        drop_remainder=drop_remainder, num_workers=workers, seed=cfg.system.seed, rank=rank,
                        world_size=world_size, pin_memory=device.type != "cpu",
                        prefetch_factor=loader_cfg.prefetch_factor,
                        persistent_workers=loader_cfg.persistent_workers, pad_shards=train,
                        collate_fn=batching.collate_fn, batches=batching.batches)
