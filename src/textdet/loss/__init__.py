"""DB training loss and its name -> class table."""

from __future__ import annotations

from textdet.loss.db_loss import DBLoss, dice_loss, masked_l1_loss, topk_mask

LOSSES = {"DBLoss": DBLoss}

__all__ = ["LOSSES", "DBLoss", "dice_loss", "masked_l1_loss", "topk_mask"]
