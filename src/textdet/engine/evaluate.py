"""``textdet eval``: score a checkpoint on the config's eval set."""

from __future__ import annotations

import logging
import os

import torch

from textdet.config import Config
from textdet.device import is_accelerator, pick_device
from textdet.engine import build
from textdet.engine.amp import amp_settings
from textdet.engine.evaluator import Evaluator, ThresholdSweep, timed_run
from textdet.engine.feed import DeviceInput
from textdet.errors import ConfigError, TextdetError
from textdet.hub import download, is_url
from textdet.models import read_state_dict

logger = logging.getLogger("textdet")


def load_weights(model: torch.nn.Module, path: str, what: str) -> None:
    """Load a checkpoint's model weights strictly (ours or MindOCR's .ckpt); a mismatch names the keys and the
    config it came from. MindSpore files carry no BatchNorm ``num_batches_tracked``: not a mismatch."""
    missing, unexpected = model.load_state_dict(read_state_dict(path, what), strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise TextdetError(
            f"{what}: {path} does not fit the config's model ({len(missing)} missing keys, e.g. {missing[:3]}; "
            f"{len(unexpected)} unexpected, e.g. {unexpected[:3]}); is it from a run with another backbone/neck/head?")


def resolve_ckpt(cfg: Config, ckpt: str | None) -> str:
    path = ckpt or cfg.eval.ckpt_load_path
    if not path:
        raise ConfigError("no checkpoint to evaluate: pass --ckpt PATH or set eval.ckpt_load_path")
    if is_url(path):
        what = "--ckpt" if ckpt else "eval.ckpt_load_path"
        return str(download(path, what, "give a local checkpoint path instead"))
    if not os.path.isfile(path):
        meta = getattr(cfg, "meta", None)
        src = "--ckpt" if ckpt else f"eval.ckpt_load_path at {meta.where('eval.ckpt_load_path') if meta else '?'}"
        raise TextdetError(f"checkpoint not found: {path} (from {src}); train first or point it at a .ckpt file")
    return path


def evaluate_checkpoint(cfg: Config, ckpt: str | None = None, device: str | None = None,
                        progress: bool = False, sweep: bool = False) -> dict:
    """Recall, precision and f-score of a checkpoint, plus images, seconds and images/s (and a threshold sweep)."""
    build.validate(cfg, ("eval",))
    path = resolve_ckpt(cfg, ckpt)
    dev = pick_device(device)
    pipe, normalize = build.split_device_normalize(build.build_pipeline(cfg, "eval"), is_accelerator(dev))
    dataset = build.build_dataset(cfg, "eval", pipe)
    loader = build.build_split_loader(cfg, "eval", dataset, 0, 1, dev)
    model = build.build_model_from_config(cfg, pretrained_backbone=False)
    load_weights(model, path, "--ckpt" if ckpt else "eval.ckpt_load_path")
    model.to(dev).eval()
    post, metric = build.build_postprocess_from_config(cfg), build.build_metric_from_config(cfg)
    evaluator = Evaluator(loader, post, metric, DeviceInput(dev, normalize),
                          amp_settings(cfg.system.amp_level_infer, dev.type), progress,
                          ThresholdSweep(post, metric) if sweep else None)
    return timed_run(evaluator, model, path)
