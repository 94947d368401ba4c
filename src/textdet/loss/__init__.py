"""DB training loss and its name -> class table."""

from __future__ import annotations

from typing import Any

from textdet.config.components import build_component
from textdet.loss.db_loss import DBLoss, dice_loss, masked_l1_loss, topk_mask

LOSSES = {"DBLoss": DBLoss}


def build_loss(name: str, **kwargs: Any) -> DBLoss:
    """``LOSSES[name](**kwargs)``; ConfigError names a bad name (listing the valid ones), keyword or value."""
    return build_component(LOSSES, name, kwargs, "loss", "loss")


__all__ = ["LOSSES", "DBLoss", "build_loss", "dice_loss", "masked_l1_loss", "topk_mask"]
