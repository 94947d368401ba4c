"""Checkpoint files: one dict per file, written to a temp file and renamed, so a crash never leaves half a
file; read without running code; model weights loaded strictly; the thresholds a run chose for its weights.
MindOCR's names: ``train_resume.ckpt`` (all to resume), ``best.ckpt`` (best main indicator), ``e{N}.ckpt``
(kept per ``ckpt_max_keep`` and ``ckpt_save_policy``: engine.retention)."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import torch
from torch import nn

from textdet.errors import TextdetError
from textdet.models import strip_wrappers
from textdet.models.weights import read_weights_file, state_dict_in
from textdet.postprocess.db_postprocess import THRESHOLD_KEYS
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


def load_weights(model: nn.Module, path: str, what: str) -> Any:
    """Load a checkpoint's model weights strictly (ours or MindOCR's .ckpt); a mismatch names the keys and the
    config it came from. MindSpore files carry no BatchNorm ``num_batches_tracked``: not a mismatch.
    Returns what the file holds (the weights and, in ours, the run's other entries)."""
    held = read_weights_file(path, what)
    missing, unexpected = model.load_state_dict(state_dict_in(held, path, what), strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise TextdetError(
            f"{what}: {path} does not fit the config's model ({len(missing)} missing keys, e.g. {missing[:3]}; "
            f"{len(unexpected)} unexpected, e.g. {unexpected[:3]}); is it from a run with another backbone/neck/head?")
    return held


def chosen_thresholds(held: Any, path: str, overridden: set[str]) -> dict[str, float]:
    """The post-processing thresholds a training run chose for the checkpoint ``held`` (its "postprocess"
    entry: the start guard's, ``train.guard_thresholds``), each unless ``overridden`` holds its
    ``postprocess.KEY`` (an ``-o`` override): the weights and the thresholds that scored them belong together,
    and the YAML's pair was chosen for other weights."""
    chosen = held.get("postprocess") if isinstance(held, dict) else None
    if not isinstance(chosen, dict):
        return {}
    adopted = {}
    for key in THRESHOLD_KEYS:
        if key in chosen and f"postprocess.{key}" not in overridden:
            value = chosen[key]
            if not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise TextdetError(f"{path}: its postprocess.{key} is {value!r}, not a number between 0 "
                                   f"and 1; set one with -o postprocess.{key}=VALUE")
            adopted[key] = float(value)
    return adopted


def thresholds_note(adopted: dict[str, float]) -> str:
    """One line for the commands that print what they used: the thresholds taken from the checkpoint."""
    if not adopted:
        return ""
    pairs = ", ".join(f"{key} {value:g}" for key, value in adopted.items())
    return (f"post-processing thresholds from the checkpoint ({pairs}: chosen by its training run on "
            "training photos set aside for it; -o postprocess.binary_thresh=... overrides)")
