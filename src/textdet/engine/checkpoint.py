"""Checkpoint files: one dict per file, written to a temp file and renamed, so a crash never leaves half a
file; read without running code; model weights loaded strictly; and which file a command reads.
MindOCR's names: ``train_resume.ckpt`` (all to resume), ``best.ckpt`` (best main indicator), ``e{N}.ckpt``
(kept per ``ckpt_max_keep`` and ``ckpt_save_policy``: engine.retention)."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import torch
from torch import nn

from textdet.config import Config
from textdet.config.loader import get_key
from textdet.errors import ConfigError, TextdetError
from textdet.hub import download, is_url
from textdet.models import read_state_dict, strip_wrappers
from textdet.unpickling import safe_load


def atomic_save(obj: Any, path: str) -> None:
    """``torch.save`` to a temp file, fsync, rename over ``path``; a failed write leaves the old file and says so."""
    folder = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp_", suffix=".ckpt", dir=folder)
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if tmp and os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(e, OSError):
            kept = "the previous one is intact" if os.path.exists(path) else "there was none before"
            raise TextdetError(f"could not write checkpoint {path}: {e.strerror or e}; {kept}. Free space or make "
                               "the folder writable, then resume (-o model.resume=True)") from None
        raise


def load_checkpoint(path: str, what: str) -> dict:
    """Load a checkpoint dict on CPU (``weights_only=True``); errors name the file and the config key it came from."""
    if not os.path.isfile(path):
        raise TextdetError(f"{what}: checkpoint not found: {path}")
    obj = safe_load(path, what)
    if not isinstance(obj, dict):
        raise TextdetError(f"{what}: {path} is not a textdet/PyTorch checkpoint dict")
    return obj


def model_state(obj: dict) -> dict:
    """The model weights of a checkpoint: our ``{"model": ...}`` files or a bare state_dict."""
    return strip_wrappers(obj.get("model", obj))


def load_weights(model: nn.Module, path: str, what: str) -> None:
    """Load a checkpoint's model weights strictly (ours or MindOCR's .ckpt); a mismatch names the keys and the
    config it came from. MindSpore files carry no BatchNorm ``num_batches_tracked``: not a mismatch."""
    missing, unexpected = model.load_state_dict(read_state_dict(path, what), strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise TextdetError(
            f"{what}: {path} does not fit the config's model ({len(missing)} missing keys, e.g. {missing[:3]}; "
            f"{len(unexpected)} unexpected, e.g. {unexpected[:3]}); is it from a run with another backbone/neck/head?")


def resolve_ckpt(cfg: Config, ckpt: str | None, keys: tuple[str, ...] = ("eval.ckpt_load_path",)) -> tuple[str, str]:
    """(path, source) of ``ckpt`` (--ckpt), else of the first set config key of ``keys``; a URL is downloaded."""
    for what in ("--ckpt", *keys):
        path = ckpt if what == "--ckpt" else get_key(cfg, what)
        if not path:
            continue
        if is_url(path):
            return str(download(path, what, "give a local checkpoint path instead")), what
        if not os.path.isfile(path):
            raise TextdetError(f"checkpoint not found: {path} (from {_source(cfg, what)}); train first or "
                               "point it at a .ckpt file")
        return path, what
    raise ConfigError(f"no checkpoint: pass --ckpt PATH or set {' / '.join(keys)}")


def _source(cfg: Config, what: str) -> str:
    """``what`` (--ckpt or a config key), with the YAML line a config key was set at when known."""
    meta = getattr(cfg, "meta", None)
    if meta is None or what == "--ckpt":
        return what
    return f"{what} at {meta.where(what)}"
