"""The start guard (``train.guard_holdout``): fine-tuning hands back the model it started from unless
training beat it on training photos set aside for that.

Fine-tuning an imported detector on photos it already fits moves it off its optimum, so each evaluation
first scores the trained model on training photos set aside for it (never trained on, never the eval split)
and keeps it only when it beats the start there by the least win: the larger of ``train.guard_margin`` and
``train.guard_regions`` / N, with N the text regions set aside (finding one more of them raises the f-score
by about 1/N), so that one region found or lost on a few photos does not decide. Otherwise that epoch's
evaluation and checkpoints hold the start's weights; training goes on from the trained weights either way,
so a later epoch can still win. Why and the evidence: docs/decisions/start-guard.md.

With ``train.guard_thresholds`` the set-aside photos also re-choose the post-processing thresholds for the
trained model, whose calibration fine-tuning moves. Both models are compared at their best pair of the same
grid, so the trained one gains nothing from having more pairs to pick from; the start keeps the config's
thresholds, the ones it was published with (docs/decisions/thresholds-while-fine-tuning.md).
"""

from __future__ import annotations

import logging

from torch import nn

from textdet.runtime.evaluator import Evaluator, best_row

logger = logging.getLogger("textdet")


# a win of exactly the least win passes: 2/N computed in floats can land a hair above the f-score difference
ROUNDING = 1e-9


def least_win(margin: float, regions: int, regions_aside: int) -> float:
    """How much higher the trained model must score than the start on the set-aside photos: the larger of
    ``margin`` and ``regions`` of the ``regions_aside`` text regions they hold (each about 1/N of f-score)."""
    if not regions or not regions_aside:
        return margin
    return max(margin, regions / regions_aside)


class StartGuard:
    """Picks, at each evaluation, the trained model or ``start_model`` by the ``indicator`` on the photos
    ``aside`` scores; when ``aside`` sweeps thresholds, by each model's best pair, and the trained model
    comes with its pair."""

    def __init__(self, start_model: nn.Module, aside: Evaluator, photos: int, indicator: str,
                 margin: float, regions: int = 0) -> None:
        self.start_model = start_model
        self.aside = aside
        self.photos = photos  # how many photos are set aside (over all ranks)
        self.indicator = indicator
        self.margin = margin  # the least win, in the indicator's units (train.guard_margin)
        self.regions = regions  # the least win, in text regions of the set-aside photos (train.guard_regions)
        self.start_score: float | None = None  # the start's score on the set-aside photos, computed once
        self.least_win = margin  # the larger of the two, once the start's run has counted the regions

    def _least_win_from_counts(self) -> float:
        """The larger of ``margin`` and ``regions`` / the text regions the set-aside photos hold (the
        metric's count of regions that are not ignored, from the start's run)."""
        regions_aside = int(self.aside.metric.counts()[3])
        if not regions_aside:
            logger.warning("start guard: the %d set-aside photos hold no text regions to find: both models "
                           "score 0 there and the guard cannot tell them apart; set aside more photos "
                           "(train.guard_holdout) or turn the guard off (train.guard_holdout: 0)",
                           self.photos)
        required = least_win(self.margin, self.regions, regions_aside)
        logger.info("start guard: the %d set-aside photos hold %d text regions; the trained model is kept "
                    "when it scores %.5f above the start (the larger of train.guard_margin %g and "
                    "train.guard_regions %d / %d)", self.photos, regions_aside, required, self.margin,
                    self.regions, regions_aside)
        return required

    def _score(self, model: nn.Module) -> tuple[float, dict | None]:
        """``model``'s score on the set-aside photos, and the thresholds it is at its best with (None when
        the thresholds are not re-chosen: the config's)."""
        perf = self.aside.run(model)
        if self.aside.sweep is None:
            return perf[self.indicator], None
        sweep = self.aside.sweep.results()
        best = best_row(sweep["grid"], self.indicator, sweep["fixed"])
        pair = {"binary_thresh": best["binary_thresh"], "box_thresh": best["box_thresh"]}
        return best[self.indicator], pair

    def choose(self, trained: nn.Module) -> tuple[nn.Module, dict, dict | None]:
        """The model to evaluate and save, what the choice was made on (for metrics.jsonl), and the
        thresholds chosen for it (None: the config's)."""
        if self.start_score is None:
            self.start_score, _ = self._score(self.start_model)
            self.least_win = self._least_win_from_counts()
        trained_score, trained_thresholds = self._score(trained)
        gain = trained_score - self.start_score
        keep_trained = gain >= self.least_win - ROUNDING
        at_pair, start_at = "", ""
        if trained_thresholds is not None:
            at_pair = (f" (at its best thresholds: binary_thresh {trained_thresholds['binary_thresh']:g}, "
                       f"box_thresh {trained_thresholds['box_thresh']:g})")
            start_at = " at its best thresholds"
        scored = ("start guard: the trained model scores %s %.4f%s on the %d set-aside training photos, "
                  "%+.5f against the start's %.4f%s")
        values = (self.indicator, trained_score, at_pair, self.photos, gain, self.start_score, start_at)
        if keep_trained:
            logger.info(scored + " (%.5f asked): kept", *values, self.least_win)
        else:
            logger.info(scored + ", not the %.5f asked: this evaluation and this epoch's checkpoints hold "
                        "the start's weights (training goes on from the trained ones)", *values,
                        self.least_win)
        record = {"guard_trained": trained_score, "guard_start": self.start_score,
                  "guard_least_win": self.least_win, "kept": "trained" if keep_trained else "start"}
        if keep_trained:
            return trained, record, trained_thresholds
        return self.start_model, record, None
