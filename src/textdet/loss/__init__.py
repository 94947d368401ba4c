"""DB training loss and its name -> class table."""

from __future__ import annotations

import inspect
from typing import Any

from textdet.errors import ConfigError
from textdet.loss.db_loss import DBLoss, dice_loss, masked_l1_loss, topk_mask

LOSSES = {"DBLoss": DBLoss}


def build_loss(name: str, **kwargs: Any) -> DBLoss:
    """Build the loss called ``name`` (a key of ``LOSSES``) from plain keyword arguments.

    Raises:
        ConfigError: unknown name (lists the valid ones) or a keyword the class does not take.
    """
    if name not in LOSSES:
        raise ConfigError(f"loss.name: unknown loss {name!r}; valid names: {sorted(LOSSES)}")
    cls = LOSSES[name]
    params = inspect.signature(cls.__init__).parameters
    unknown = sorted(k for k in kwargs if k not in params or k == "self")
    if unknown:
        valid = sorted(k for k in params if k != "self")
        raise ConfigError(f"loss: {name} does not take {unknown}; valid keys: {valid}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"loss: {name}: {e}") from e


__all__ = ["LOSSES", "DBLoss", "build_loss", "dice_loss", "masked_l1_loss", "topk_mask"]
