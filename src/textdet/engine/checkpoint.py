"""Checkpoints: one dict per file, written to a temp file and renamed, so a crash never leaves half a file.
MindOCR's names: ``train_resume.ckpt`` (all to resume), ``best.ckpt`` (best main indicator), ``e{N}.ckpt``
(kept per ``ckpt_max_keep`` and ``ckpt_save_policy``)."""

from __future__ import annotations

import os
import random
import tempfile
from typing import Any

import numpy as np
import torch
from torch import nn

from textdet import device
from textdet.config import Config
from textdet.config.loader import get_key
from textdet.errors import ConfigError, TextdetError
from textdet.hub import download, is_url, safe_load
from textdet.models import read_state_dict, strip_wrappers


def atomic_save(obj: Any, path: str) -> None:
    """``torch.save`` to a temp file, fsync, rename over ``path``; a failed write leaves the old file and says so."""
    folder, tmp = os.path.dirname(os.path.abspath(path)), None
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


def resume_due(interval: int | str, step: int, since_save_s: float) -> bool:
    """Mid-epoch ``train_resume.ckpt`` due? Every N optimizer steps, never (0/off), or every 10 minutes (auto)."""
    if interval == "auto":
        return since_save_s >= AUTO_INTERVAL_S
    return interval not in (0, "off", False, None) and step % int(interval) == 0


AUTO_INTERVAL_S = 600.0


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


def seed_everything(seed: int, rank: int) -> None:
    random.seed(seed + rank)
    np.random.seed(seed + rank)
    torch.manual_seed(seed + rank)


def find_resume(resume: bool | str | None, run_dir: str) -> str | None:
    """``model.resume``: True -> ``run_dir/train_resume.ckpt`` (None when absent: a first run starts fresh), a path ->
    itself, which must exist; None when off."""
    if resume is False or resume is None or resume == "":
        return None
    if resume is True:
        path = os.path.join(run_dir, "train_resume.ckpt")
        return path if os.path.isfile(path) else None
    path = os.path.expanduser(str(resume))
    if not os.path.isfile(path):
        raise ConfigError(f"model.resume: {resume} does not exist; fix the path, or -o model.resume=True for the run "
                          "folder's train_resume.ckpt")
    return path


def rng_state() -> dict:
    """Python, numpy, torch and the current accelerator's RNG states as tensors, lists and numbers only: a resume
    checkpoint then loads with a plain ``torch.load(path, weights_only=True)``, no allow-list."""
    version, mt_words, gauss = random.getstate()
    name, keys, pos, has_gauss, cached_gauss = np.random.get_state()
    return {"python": [version, list(mt_words), gauss],
            "numpy": [str(name), torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss),
                      float(cached_gauss)],
            "torch": torch.get_rng_state(), "device": device.rng_state()}


def set_rng_state(state: dict) -> None:
    """Restore ``rng_state()`` (older checkpoints' numpy tuple and python tuple are read too)."""
    version, mt_words, gauss = state["python"]
    random.setstate((version, tuple(mt_words), gauss))
    name, keys, pos, has_gauss, cached_gauss = state["numpy"]
    keys = keys.numpy() if isinstance(keys, torch.Tensor) else np.asarray(keys)
    np.random.set_state((name, keys.astype(np.uint32), pos, has_gauss, cached_gauss))
    torch.set_rng_state(state["torch"])
    device.set_rng_state(state.get("device", {}))


class EpochCheckpoints:
    """Keeps at most ``max_keep`` ``e{N}.ckpt`` files: the best by metric (top_k) or the newest (latest_k)."""

    def __init__(self, folder: str, max_keep: int, policy: str | None):
        self.folder, self.max_keep, self.policy = folder, max_keep, policy or "latest_k"
        self.kept: list[tuple[float, int]] = []  # (metric, epoch)

    def save(self, obj: dict, epoch: int, metric: float) -> str | None:
        if self.max_keep <= 0:
            return None
        self.kept.append((metric, epoch))
        self.kept.sort(key=None if self.policy == "top_k" else (lambda x: x[1]), reverse=True)  # (metric, epoch)
        self.kept, drop = self.kept[: self.max_keep], self.kept[self.max_keep :]
        path = os.path.join(self.folder, f"e{epoch}.ckpt") if any(e == epoch for _, e in self.kept) else None
        if path:
            atomic_save(obj, path)
        for _, e in drop:
            old = os.path.join(self.folder, f"e{e}.ckpt")
            if os.path.exists(old):
                os.remove(old)
        return path

    def state_dict(self) -> dict:
        return {"kept": list(self.kept)}

    def load_state_dict(self, state: dict) -> None:
        self.kept = [tuple(x) for x in state.get("kept", [])]


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
    for path, what in ((ckpt, "--ckpt"), *((get_key(cfg, k), k) for k in keys)):
        if not path:
            continue
        if is_url(path):
            return str(download(path, what, "give a local checkpoint path instead")), what
        if not os.path.isfile(path):
            meta = getattr(cfg, "meta", None)
            src = f"{what} at {meta.where(what)}" if meta is not None and what != "--ckpt" else what
            raise TextdetError(f"checkpoint not found: {path} (from {src}); train first or point it at a .ckpt file")
        return path, what
    raise ConfigError(f"no checkpoint: pass --ckpt PATH or set {' / '.join(keys)}")
