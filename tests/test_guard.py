"""The start guard (train.guard_holdout): which photos it sets aside, which model it keeps, what it saves."""

from __future__ import annotations

import pytest
from torch import nn

from textdet.config import Config
from textdet.data.dataset import set_aside
from textdet.engine import build
from textdet.engine.guard import StartGuard
from textdet.engine.train_eval import TrainEvaluation
from textdet.errors import ConfigError


class ScoredEvaluator:
    """An Evaluator stand-in: each model's f-score from a table, and every call counted."""

    def __init__(self, scores: dict[nn.Module, float]) -> None:
        self.scores = scores
        self.calls: list[nn.Module] = []

    def run(self, model: nn.Module) -> dict[str, float]:
        self.calls.append(model)
        return {"recall": 0.0, "precision": 0.0, "f-score": self.scores[model]}


def test_every_nth_photo_is_set_aside_and_never_trained_on() -> None:
    records = [f"img_{i}.jpg" for i in range(1, 26)]
    aside = set_aside(records, 10, aside_only=True)
    rest = set_aside(records, 10, aside_only=False)
    assert aside == ["img_10.jpg", "img_20.jpg"]
    assert len(rest) == 23 and not set(aside) & set(rest)
    assert sorted(aside + rest) == sorted(records)


def test_guard_keeps_the_start_unless_the_trained_model_beats_it_by_the_margin() -> None:
    start, trained = nn.Linear(1, 1), nn.Linear(1, 1)
    aside = ScoredEvaluator({start: 0.50, trained: 0.505})
    guard = StartGuard(start, aside, 25, "f-score", margin=0.01)
    kept, record = guard.choose(trained)  # 0.505 < 0.50 + 0.01
    assert kept is start
    assert record == {"guard_trained": 0.505, "guard_start": 0.50, "kept": "start"}
    aside.scores[trained] = 0.51  # exactly the margin: kept
    kept, record = guard.choose(trained)
    assert kept is trained and record["kept"] == "trained"
    assert aside.calls == [start, trained, trained]  # the start is scored once


def test_an_evaluation_that_keeps_the_start_scores_it_once_on_the_eval_split() -> None:
    start, trained = nn.Linear(1, 1), nn.Linear(1, 1)
    guard = StartGuard(start, ScoredEvaluator({start: 0.9, trained: 0.8}), 25, "f-score", margin=0.0)
    evaluator = ScoredEvaluator({start: 0.94, trained: 0.93})
    evaluation = TrainEvaluation(Config(), evaluator, guard)
    for _ in range(2):
        perf, kept = evaluation.run(trained)
        assert kept is start
        assert perf["f-score"] == 0.94 and perf["kept"] == "start" and perf["guard_trained"] == 0.8
    assert evaluator.calls == [start]


@pytest.mark.parametrize("share, pretrained, validate, message", [
    (0.7, "m.ckpt", True, "not a share between 0 and 0.5"),
    (0.1, None, True, "model.pretrained names none"),
    (0.1, "m.ckpt", False, "system.val_while_train is false"),
])
def test_guard_settings_that_cannot_work_are_refused(share, pretrained, validate, message) -> None:
    cfg = Config()
    cfg.train.guard_holdout, cfg.model.pretrained, cfg.system.val_while_train = share, pretrained, validate
    with pytest.raises(ConfigError, match=message):
        build.guard_aside_every(cfg)


def test_guard_share_is_every_nth_photo() -> None:
    cfg = Config()
    cfg.model.pretrained, cfg.system.val_while_train = "m.ckpt", True
    assert build.guard_aside_every(cfg) == 0  # off by default
    cfg.train.guard_holdout = 0.1
    assert build.guard_aside_every(cfg) == 10
