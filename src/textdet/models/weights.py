"""Finding and loading weights: ImageNet backbones, whole-model checkpoints, MindSpore ``.ckpt`` files.

``pretrained=True`` uses torchvision's ImageNet file in the torch hub cache (downloaded there if needed);
a URL downloads via ``textdet.hub``; a string is a path. MindSpore checkpoints are read and renamed.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from textdet.errors import ConfigError
from textdet.hub import download, hub_checkpoint_dir, is_url
from textdet.models.ms_ckpt import is_ms_checkpoint, mindspore_to_torch_names, read_ms_checkpoint
from textdet.unpickling import safe_load

logger = logging.getLogger(__name__)

_ESCAPE = "-o model.backbone.pretrained=false"
# Prefixes that wrappers add to parameter names: DistributedDataParallel and torch.compile.
_WRAPPERS = re.compile(r"^((module|_orig_mod)\.)+")


# MindOCR 0.5's model-zoo checkpoints (mindocr/models/det_dbnet.py ``default_cfgs``), by MindOCR model name:
# what ``model.pretrained: true`` loads for that network. The hash in each file name is checked on download.
MINDOCR_ZOO: dict[str, str] = {
    "dbnet_resnet18": "https://download.mindspore.cn/toolkits/mindocr/dbnet/dbnet_resnet18-0c0c4cfa.ckpt",
    "dbnet_resnet50": "https://download.mindspore.cn/toolkits/mindocr/dbnet/dbnet_resnet50-c3a4aa24.ckpt",
    "dbnetpp_resnet50": "https://download-mindspore.osinfra.cn/toolkits/mindocr/dbnet/dbnetpp_resnet50-068166c2.ckpt",
    "dbnet_mobilenetv3": "https://download.mindspore.cn/toolkits/mindocr/dbnet/dbnet_mobilenetv3-62c44539.ckpt",
}


def weights_file(value: str | os.PathLike, what: str, escape: str) -> Path:
    """A local weights file from a path or an http(s) URL (downloaded into the hub cache)."""
    if is_url(value):
        return download(str(value), what, escape)
    path = Path(value).expanduser()
    if not path.is_file():
        raise ConfigError(f"{what}: weights file {str(path)!r} does not exist; fix the path or use {escape}")
    return path


def resolve_backbone_weights(
    pretrained: bool | str | os.PathLike | None, arch: str, url: str | None, pattern: str | None = None
) -> Path | None:
    """A backbone's ``pretrained`` (False/None, True, a path or a URL) as a file path, or None for random init.

    True: ``url`` from the hub cache, else a file matching ``pattern`` there, else downloaded; errors name the way out.
    """
    if pretrained is None or pretrained is False:
        return None
    what = f"model.backbone.pretrained ({arch})"
    if pretrained is True:
        if url is None:
            raise ConfigError(f"{what}: pretrained=True has no known ImageNet file; give the weights as a path or URL "
                              f"(-o model.backbone.pretrained=...) or train from scratch with {_ESCAPE}")
        matches = sorted(hub_checkpoint_dir().glob(pattern)) if pattern else []
        if not (hub_checkpoint_dir() / os.path.basename(url)).is_file() and matches:
            return matches[0]
        return download(url, what, _ESCAPE)
    if isinstance(pretrained, (str, os.PathLike)):
        return weights_file(pretrained, what, _ESCAPE)
    raise ConfigError(f"{what}: pretrained must be true, false, a file path or a URL, got {pretrained!r}")


def read_state_dict(path: str | os.PathLike, what: str = "weights") -> dict[str, torch.Tensor]:
    """Tensors by our parameter names (``weights_only=True``) from a state_dict, a ``{"model"/"state_dict": ...}``
    checkpoint or a renamed MindSpore ``.ckpt``; ``module.``/``_orig_mod.`` wrapper prefixes stripped.
    """
    return state_dict_in(read_weights_file(path, what), path, what)


def read_weights_file(path: str | os.PathLike, what: str = "weights") -> Any:
    """What a weights file holds, unpickled without running code (a MindSpore ``.ckpt`` as a state_dict by
    our names): a checkpoint's other entries stay readable next to its weights."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{what}: weights file {str(path)!r} does not exist")
    if not is_ms_checkpoint(path):
        return safe_load(path, what)
    obj, training = mindspore_to_torch_names(read_ms_checkpoint(path)[0])
    if training:
        logger.info("%s: %s: left out %d optimizer/training entries (e.g. %s)", what, path, len(training),
                    training[:3])
    return obj


def state_dict_in(obj: Any, path: str | os.PathLike, what: str = "weights") -> dict[str, torch.Tensor]:
    """The state_dict ``read_weights_file`` found in ``path``: the file itself or its "model"/"state_dict"."""
    if isinstance(obj, Mapping):
        for key in ("model", "state_dict"):
            if isinstance(obj.get(key), Mapping):
                obj = obj[key]
                break
    if not isinstance(obj, Mapping) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ConfigError(f"{what}: {str(path)!r} is not a state_dict (nor a dict with a 'model' state_dict); "
                          f"got {type(obj).__name__}")
    return strip_wrappers(obj)


def strip_wrappers(state: Mapping) -> dict:
    """Drop the ``module.``/``_orig_mod.`` prefixes DDP and torch.compile put on parameter names."""
    return {_WRAPPERS.sub("", k): v for k, v in state.items()}


def load_backbone_weights(
    module: nn.Module, path: str | os.PathLike, arch: str, ignore_prefixes: tuple[str, ...] = ("fc.", "classifier.")
) -> None:
    """Load ImageNet weights into a backbone; every backbone tensor must be in the file with its shape.

    Keys under ``ignore_prefixes`` (the classifier) are skipped, other extras logged. Raises ConfigError naming
    a key whose shape differs, or the missing backbone tensors.
    """
    state = {k: v for k, v in read_state_dict(path, f"{arch} weights").items() if not k.startswith(ignore_prefixes)}
    usable, unexpected, mismatched, missing = match_state(state, module.state_dict())
    if mismatched:
        key, got, want = mismatched[0]
        raise ConfigError(f"{arch}: {path}: '{key}' has shape {got} in the file but {want} in the model (a different "
                          "architecture or width?)")
    if missing:
        raise ConfigError(f"{arch}: {path} lacks {len(missing)} of the backbone's tensors (e.g. "
                          f"{', '.join(missing[:4])}); is it a torchvision/mindcv {arch.removeprefix('det_')} "
                          f"checkpoint? Train from scratch with {_ESCAPE}")
    if unexpected:
        logger.warning("%s: ignoring %d unknown keys in %s, e.g. %s", arch, len(unexpected), path, unexpected[:4])
    module.load_state_dict(usable, strict=False)
    logger.info("%s: loaded ImageNet weights from %s", arch, path)


@dataclass
class LoadReport:
    """What a non-strict whole-model load did. Keys are model state_dict names."""

    path: str
    loaded: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    mismatched: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"loaded {len(self.loaded)} tensors from {self.path}"]
        if self.missing:
            lines.append(f"missing in the file (left as initialised): {len(self.missing)}: {self.missing[:8]}")
        if self.unexpected:
            lines.append(f"unexpected (ignored): {len(self.unexpected)}: {self.unexpected[:8]}")
        for key, got, want in self.mismatched:
            lines.append(f"shape mismatch (dropped): {key}: file {got}, model {want}")
        return "\n".join(lines)


def load_model_weights(model: nn.Module, path: str | os.PathLike, what: str = "model.pretrained") -> LoadReport:
    """Non-strict load of a whole-model checkpoint (MindOCR's ``model.pretrained``) from a path or URL.

    Tensors whose shape differs from the model's are dropped with a warning; the report lists missing, unexpected keys.
    """
    path = weights_file(path, what, f"-o {what}=false")
    usable, unexpected, mismatched, missing = match_state(read_state_dict(path, what), model.state_dict())
    for key, got, want in mismatched:
        logger.warning("%s: dropping '%s': shape %s in the file, %s in the model", path, key, got, want)
    model.load_state_dict(usable, strict=False)
    return LoadReport(str(path), list(usable), missing, unexpected, mismatched)


def check_coverage(report: LoadReport, model: nn.Module, what: str = "model.pretrained") -> None:
    """Under half of the model's tensors loaded: a wrong file, refused (ConfigError with the counts and a few names);
    some missing: a WARNING with the counts; all: INFO. BatchNorm's num_batches_tracked is not counted."""
    total = len([k for k in model.state_dict() if not k.endswith("num_batches_tracked")])
    loaded = len([k for k in report.loaded if not k.endswith("num_batches_tracked")])
    counts = (f"{loaded} of the model's {total} tensors found in {report.path} ({len(report.missing)} missing, "
              f"{len(report.unexpected)} unknown names, {len(report.mismatched)} shape mismatches)")
    if 2 * loaded < total:
        mismatched = [key for key, _, _ in report.mismatched]
        raise ConfigError(f"{what}: only {counts}: a checkpoint of another network? e.g. missing {report.missing[:3]}, "
                          f"unknown {report.unexpected[:3]}, mismatched {mismatched[:3]}; give this model's "
                          f"checkpoint, or -o {what}=false")
    if loaded < total:
        logger.warning("%s: partial load, %s; the rest keeps its initialisation", what, counts)
    logger.info("%s: %s", what, report)


def match_state(state: Mapping[str, torch.Tensor], own: Mapping[str, torch.Tensor]) -> tuple[dict, list, list, list]:
    """(tensors that fit, unexpected keys, (key, file shape, model shape) mismatches, missing keys) of a file's state
    against a model's; BatchNorm's num_batches_tracked is never missing (old torchvision files predate it)."""
    fits = {k: v for k, v in state.items() if k in own and own[k].shape == v.shape}
    mismatched = [(k, tuple(v.shape), tuple(own[k].shape)) for k, v in state.items() if k in own and k not in fits]
    missing = [k for k in own if k not in state and not k.endswith("num_batches_tracked")]
    return fits, [k for k in state if k not in own], mismatched, missing
