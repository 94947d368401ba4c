"""Finding and loading weights: ImageNet backbones from the torch hub cache, whole-model checkpoints.

Nothing here downloads. ``pretrained=True`` means "the torchvision file is already in the torch hub
cache" (``torch.hub.get_dir()/checkpoints``, which honours ``$TORCH_HOME``); a string is a path.
"""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from textdet.errors import ConfigError

logger = logging.getLogger(__name__)

_ESCAPE = "-o model.backbone.pretrained=false"
# Prefixes that wrappers add to parameter names: DistributedDataParallel and torch.compile.
_WRAPPER_PREFIXES = ("module.", "_orig_mod.")


def hub_checkpoint_dir() -> Path:
    """The folder torchvision downloads into: ``torch.hub.get_dir()/checkpoints`` (follows $TORCH_HOME)."""
    return Path(torch.hub.get_dir()) / "checkpoints"


def resolve_backbone_weights(
    pretrained: bool | str | os.PathLike | None, arch: str, filenames: Sequence[str], pattern: str | None = None
) -> Path | None:
    """Turn a backbone's ``pretrained`` argument into a file path, or None for random init.

    Args:
        pretrained: False/None (no weights), True (look in the torch hub cache) or a path.
        arch: backbone name, for messages (e.g. ``det_resnet50``).
        filenames: torchvision file names accepted in the hub cache, in order of preference.
        pattern: a glob accepted as a fallback in the hub cache (e.g. ``resnet50-*.pth``).

    Raises:
        ConfigError: the file is not there; the message names the file(s), the folder and the way out.
    """
    if pretrained is None or pretrained is False:
        return None
    if pretrained is True:
        folder = hub_checkpoint_dir()
        for name in filenames:
            if (folder / name).is_file():
                return folder / name
        matches = sorted(folder.glob(pattern)) if pattern else []
        if matches:
            return matches[0]
        if not filenames:
            raise ConfigError(
                f"{arch}: pretrained=True has no known ImageNet file; give the weights as a path "
                f"(-o model.backbone.pretrained=/path/to/weights.pth) or train from scratch with {_ESCAPE}"
            )
        wanted = " or ".join(filenames) + (f" (or any {pattern})" if pattern else "")
        raise ConfigError(
            f"{arch}: pretrained=True needs the torchvision ImageNet weights {wanted} in {folder} "
            f"(torch.hub.get_dir()/checkpoints; set $TORCH_HOME to move it). textdet never downloads: copy the "
            f"file there, give a path with -o model.backbone.pretrained=/path/to/file.pth, or train from scratch "
            f"with {_ESCAPE}"
        )
    if isinstance(pretrained, str) and pretrained.startswith(("http://", "https://")):
        raise ConfigError(
            f"{arch}: pretrained is a URL ({pretrained}); textdet never downloads. Fetch a PyTorch state_dict "
            f"yourself (MindSpore .ckpt files need converting) and give its path, or train from scratch with {_ESCAPE}"
        )
    if isinstance(pretrained, (str, os.PathLike)):
        path = Path(pretrained).expanduser()
        if not path.is_file():
            raise ConfigError(
                f"{arch}: pretrained weights file {str(path)!r} does not exist; fix the path or train from "
                f"scratch with {_ESCAPE}"
            )
        return path
    raise ConfigError(f"{arch}: pretrained must be true, false or a file path, got {pretrained!r}")


def read_state_dict(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """Read a state_dict from a plain state_dict file or a checkpoint dict with a "model" / "state_dict" key.

    Wrapper prefixes (``module.`` from DDP, ``_orig_mod.`` from torch.compile) are stripped.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"weights file {str(path)!r} does not exist")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        # Our own training checkpoints may carry non-tensor objects (config, RNG states) that the safe
        # unpickler rejects; the user pointed at this file, so fall back to the full unpickler, loudly.
        logger.warning("%s holds more than tensors; loading it with weights_only=False (trusting the file)", path)
        obj = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # a truncated or foreign file: say which one
        raise ConfigError(f"cannot read weights file {str(path)!r}: {exc}") from exc
    if isinstance(obj, Mapping):
        for key in ("model", "state_dict"):
            if isinstance(obj.get(key), Mapping):
                obj = obj[key]
                break
    if not isinstance(obj, Mapping) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ConfigError(
            f"weights file {str(path)!r} is not a state_dict (nor a dict with a 'model' state_dict); "
            f"got {type(obj).__name__}"
        )
    return {_strip_prefixes(k): v for k, v in obj.items()}


def _strip_prefixes(key: str) -> str:
    stripped = True
    while stripped:
        stripped = False
        for prefix in _WRAPPER_PREFIXES:
            if key.startswith(prefix):
                key, stripped = key[len(prefix) :], True
    return key


def load_backbone_weights(
    module: nn.Module, path: str | os.PathLike, arch: str, ignore_prefixes: tuple[str, ...] = ("fc.",)
) -> None:
    """Load ImageNet weights into a backbone; every backbone tensor must be in the file with its shape.

    Keys under ``ignore_prefixes`` (the classifier) are skipped; other extra keys are logged.

    Raises:
        ConfigError: a shape differs (naming the key) or backbone tensors are missing from the file.
    """
    state = {k: v for k, v in read_state_dict(path).items() if not k.startswith(ignore_prefixes)}
    own = module.state_dict()
    for key, value in state.items():
        if key in own and own[key].shape != value.shape:
            raise ConfigError(
                f"{arch}: {path}: '{key}' has shape {tuple(value.shape)} in the file but "
                f"{tuple(own[key].shape)} in the model (a different architecture or width?)"
            )
    # Old torchvision files predate BatchNorm's num_batches_tracked buffer; it does not matter.
    missing = [k for k in own if k not in state and not k.endswith("num_batches_tracked")]
    if missing:
        raise ConfigError(
            f"{arch}: {path} lacks {len(missing)} of the backbone's tensors (e.g. {', '.join(missing[:4])}); "
            f"is it a torchvision {arch.removeprefix('det_')} checkpoint? Train from scratch with {_ESCAPE}"
        )
    unexpected = [k for k in state if k not in own]
    if unexpected:
        logger.warning("%s: ignoring %d unknown keys in %s, e.g. %s", arch, len(unexpected), path, unexpected[:4])
    module.load_state_dict(state, strict=False)
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


def load_model_weights(model: nn.Module, path: str | os.PathLike) -> LoadReport:
    """Non-strict load of a whole-model checkpoint (MindOCR's ``model.pretrained``).

    Accepts a plain state_dict or ``{"model": state_dict, ...}``; strips ``module.``. Tensors whose
    shape differs from the model's are dropped with a warning; the report lists missing and
    unexpected keys.
    """
    state = read_state_dict(path)
    own = model.state_dict()
    report = LoadReport(path=str(path))
    usable = {}
    for key, value in state.items():
        if key not in own:
            report.unexpected.append(key)
        elif own[key].shape != value.shape:
            report.mismatched.append((key, tuple(value.shape), tuple(own[key].shape)))
            logger.warning("%s: dropping '%s': shape %s in the file, %s in the model",
                           path, key, tuple(value.shape), tuple(own[key].shape))
        else:
            usable[key] = value
    model.load_state_dict(usable, strict=False)
    report.loaded = list(usable)
    report.missing = [k for k in own if k not in state and not k.endswith("num_batches_tracked")]
    return report
