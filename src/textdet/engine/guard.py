"""The start guard (``train.guard_holdout``): fine-tuning hands back the model it started from unless
training beat it on training photos set aside for that.

Fine-tuning an imported detector on photos it already fits (scanned receipts labelled as PP-OCR draws) moves
it off its optimum: every epoch scored a little below the imported model (docs/DESIGN_NOTES.md, "Eleventh
round"). Users of PaddleOCR report the same (a fine-tuned hmean below the model they started from). So
each evaluation first scores the trained model on training photos set aside for it (never trained on,
never the eval split) and keeps it only when it beats the start there by ``train.guard_margin``; otherwise
that epoch's evaluation and checkpoints hold the start's weights. Training itself goes on from the trained
weights either way: a later epoch can still win.
"""

from __future__ import annotations

import logging

from torch import nn

from textdet.engine.evaluator import Evaluator

logger = logging.getLogger("textdet")


class StartGuard:
    """Picks, at each evaluation, the trained model or ``start_model`` by the ``indicator`` on the photos
    ``aside`` scores."""

    def __init__(self, start_model: nn.Module, aside: Evaluator, photos: int, indicator: str,
                 margin: float) -> None:
        self.start_model = start_model
        self.aside = aside
        self.photos = photos  # how many photos are set aside (over all ranks)
        self.indicator = indicator
        self.margin = margin
        self.start_score: float | None = None  # the start's score on the set-aside photos, computed once

    def choose(self, trained: nn.Module) -> tuple[nn.Module, dict]:
        """The model to evaluate and save, and what the choice was made on (for metrics.jsonl)."""
        if self.start_score is None:
            self.start_score = self.aside.run(self.start_model)[self.indicator]
        trained_score = self.aside.run(trained)[self.indicator]
        keep_trained = trained_score >= self.start_score + self.margin
        if keep_trained:
            logger.info("start guard: the trained model scores %s %.4f on the %d set-aside training photos, "
                        "the start %.4f: kept", self.indicator, trained_score, self.photos, self.start_score)
        else:
            logger.info("start guard: the trained model scores %s %.4f on the %d set-aside training photos, "
                        "not %.4f above the start's %.4f: this evaluation and this epoch's checkpoints hold "
                        "the start's weights (training goes on from the trained ones)", self.indicator,
                        trained_score, self.photos, self.margin, self.start_score)
        record = {"guard_trained": trained_score, "guard_start": self.start_score,
                  "kept": "trained" if keep_trained else "start"}
        return (trained if keep_trained else self.start_model), record
