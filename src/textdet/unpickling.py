"""Reading torch files without running code: ``torch.load(weights_only=True)`` plus a short allow-list of
numpy types, so checkpoints from any source load as tensors and plain data only."""

from __future__ import annotations

import os
import pickle
from typing import Any

import numpy as np
import torch

from textdet.errors import ConfigError

try:
    from numpy._core.multiarray import _reconstruct
except ImportError:  # numpy < 2
    from numpy.core.multiarray import _reconstruct

# Numpy arrays (the numpy RNG state that older textdet resume checkpoints hold; new ones store it as a
# tensor) rebuilt without running arbitrary code.
_NUMPY_GLOBALS = [np.ndarray, np.dtype, type(np.dtype(np.uint32)), _reconstruct]


def safe_load(path: str | os.PathLike, what: str) -> Any:
    """``torch.load(weights_only=True)``: tensors, containers, numbers and numpy arrays, never code.
    Raises ConfigError naming the file and ``what`` when it needs arbitrary pickled objects or cannot be
    read."""
    try:
        with torch.serialization.safe_globals(_NUMPY_GLOBALS):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first_line = str(exc).splitlines()[0]
        raise ConfigError(
            f"{what}: {path} holds pickled Python objects beyond tensors and plain data ({first_line}). "
            "textdet loads weights with torch.load(weights_only=True) because unpickling other objects can "
            "run code from the file. If you trust it, re-save only its state_dict: "
            "torch.save(torch.load(PATH, weights_only=False)['model'], 'clean.pth')") from None
    except Exception as exc:  # truncated or foreign file
        raise ConfigError(f"{what}: cannot read {path}: {exc}") from None
