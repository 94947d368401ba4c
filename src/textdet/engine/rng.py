"""Random number generators: seeding at start-up, and the states a resume checkpoint saves and puts back so a
resumed run draws the numbers the uninterrupted one would have."""

from __future__ import annotations

import random

import numpy as np
import torch

from textdet import device


def seed_everything(seed: int, rank: int) -> None:
    """Python, numpy and torch seeded with ``seed + rank``: each process draws its own augmentations."""
    random.seed(seed + rank)
    np.random.seed(seed + rank)
    torch.manual_seed(seed + rank)


def rng_state() -> dict:
    """Python, numpy, torch and the current accelerator's RNG states as tensors, lists and numbers only: a
    resume checkpoint then loads with a plain ``torch.load(path, weights_only=True)``, no allow-list."""
    version, mt_words, gauss = random.getstate()
    name, keys, pos, has_gauss, cached_gauss = np.random.get_state()
    keys_tensor = torch.from_numpy(keys.astype(np.int64))
    numpy_state = [str(name), keys_tensor, int(pos), int(has_gauss), float(cached_gauss)]
    return {"python": [version, list(mt_words), gauss], "numpy": numpy_state,
            "torch": torch.get_rng_state(), "device": device.rng_state()}


def set_rng_state(state: dict) -> None:
    """Restore ``rng_state()`` (older checkpoints' numpy tuple and python tuple are read too)."""
    version, mt_words, gauss = state["python"]
    random.setstate((version, tuple(mt_words), gauss))
    name, keys, pos, has_gauss, cached_gauss = state["numpy"]
    if isinstance(keys, torch.Tensor):
        keys = keys.numpy()
    else:
        keys = np.asarray(keys)
    np.random.set_state((name, keys.astype(np.uint32), pos, has_gauss, cached_gauss))
    torch.set_rng_state(state["torch"])
    device.set_rng_state(state.get("device", {}))
