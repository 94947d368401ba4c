"""Which ``e{N}.ckpt`` files a run folder keeps: at most ``system.ckpt_max_keep``, the best by metric
(``top_k``) or the newest (``latest_k``), as MindOCR's ``ckpt_save_policy``."""

from __future__ import annotations

import math
import os

from textdet.runtime.checkpoint import atomic_save


def ranking_score(metric: float | None, loss: float | None) -> float:
    """What best.ckpt and top_k rank an epoch by: the main indicator; without evaluation, as in MindOCR, the
    lowest training loss (its negative)."""
    if metric is not None:
        return metric
    if loss is not None:
        return -loss
    return -math.inf


class EpochCheckpoints:
    """Keeps at most ``max_keep`` ``e{N}.ckpt`` files: the best by metric (top_k) or the newest
    (latest_k)."""

    def __init__(self, folder: str, max_keep: int, policy: str | None):
        self.folder = folder
        self.max_keep = max_keep
        self.policy = policy if policy else "latest_k"
        self.kept: list[tuple[float, int]] = []  # (metric, epoch)

    def save(self, obj: dict, epoch: int, metric: float) -> str | None:
        """Write ``e{epoch}.ckpt`` if it ranks among the kept, and delete the files that dropped out."""
        if self.max_keep <= 0:
            return None
        self.kept.append((metric, epoch))
        if self.policy == "top_k":
            self.kept.sort(reverse=True)  # best metric first (the later epoch on a tie)
        else:
            self.kept.sort(key=lambda kept: kept[1], reverse=True)  # newest epoch first
        dropped = self.kept[self.max_keep :]
        self.kept = self.kept[: self.max_keep]
        path = None
        if any(kept_epoch == epoch for _, kept_epoch in self.kept):
            path = os.path.join(self.folder, f"e{epoch}.ckpt")
            atomic_save(obj, path)
        for _, old_epoch in dropped:
            old = os.path.join(self.folder, f"e{old_epoch}.ckpt")
            if os.path.exists(old):
                os.remove(old)
        return path

    def state_dict(self) -> dict:
        return {"kept": list(self.kept)}

    def load_state_dict(self, state: dict) -> None:
        self.kept = [tuple(x) for x in state.get("kept", [])]
