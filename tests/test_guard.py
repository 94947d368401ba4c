"""The start guard (train.guard_holdout): which photos it sets aside, which model it keeps, what it saves."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from torch import nn

from textdet.build import training
from textdet.config import Config
from textdet.config.loader import load_config
from textdet.data.dataset import set_aside
from textdet.engine.guard import StartGuard
from textdet.engine.train_eval import TrainEvaluation
from textdet.errors import ConfigError
from textdet.metrics.det_metric import DetMetric
from textdet.runtime.evaluator import best_row


class ScoredEvaluator:
    """An Evaluator stand-in: each model's f-score from a table, and every call counted. Its metric counts
    ``regions`` text regions once a model has run (DetMetric.counts: recall sum, precision sum, detections,
    regions), as the real one does."""

    def __init__(self, scores: dict[nn.Module, float], regions: int = 100) -> None:
        self.scores = scores
        self.calls: list[nn.Module] = []
        self.sweep = None
        self.regions = regions
        self.counts = [0.0, 0.0, 0.0, 0.0]
        self.metric = SimpleNamespace(counts=lambda: list(self.counts))

    def run(self, model: nn.Module) -> dict[str, float]:
        self.calls.append(model)
        self.counts = [0.0, 0.0, float(self.regions), float(self.regions)]
        return {"recall": 0.0, "precision": 0.0, "f-score": self.scores[model]}


class GridSweep:
    """A ThresholdSweep stand-in: the grid of the model last run, from a table of f-scores by pair."""

    def __init__(self, grids: dict[nn.Module, dict[tuple[float, float], float]]) -> None:
        self.grids = grids
        self.model: nn.Module | None = None

    def results(self) -> dict:
        grid = self.grids[self.model]
        return {"grid": [{"binary_thresh": b, "box_thresh": t, "f-score": f} for (b, t), f in grid.items()],
                "fixed": {"binary_thresh": 0.3, "box_thresh": 0.6}}


class SweptEvaluator(ScoredEvaluator):
    """An Evaluator stand-in whose sweep scores a threshold grid for each model."""

    def __init__(self, grids: dict[nn.Module, dict[tuple[float, float], float]]) -> None:
        super().__init__({model: grid[(0.3, 0.6)] for model, grid in grids.items()})
        self.sweep = GridSweep(grids)

    def run(self, model: nn.Module) -> dict[str, float]:
        self.sweep.model = model
        return super().run(model)


class PairRecorder(ScoredEvaluator):
    """An eval-split Evaluator stand-in that notes the thresholds its post-processing holds at each run."""

    def __init__(self, scores: dict[nn.Module, float]) -> None:
        super().__init__(scores)
        self.postprocess = SimpleNamespace(binary_thresh=0.3, box_thresh=0.6)
        self.pairs: list[tuple[float, float]] = []

    def run(self, model: nn.Module) -> dict[str, float]:
        self.pairs.append((self.postprocess.binary_thresh, self.postprocess.box_thresh))
        return super().run(model)


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
    kept, record, thresholds = guard.choose(trained)  # 0.505 < 0.50 + 0.01
    assert kept is start and thresholds is None
    assert record == {"guard_trained": 0.505, "guard_start": 0.50, "guard_least_win": 0.01, "kept": "start"}
    aside.scores[trained] = 0.51  # exactly the margin: kept
    kept, record, thresholds = guard.choose(trained)
    assert kept is trained and record["kept"] == "trained" and thresholds is None
    assert aside.calls == [start, trained, trained]  # the start is scored once


@pytest.mark.parametrize("regions_aside, trained_score, kept_model", [
    (89, 0.97, "start"),     # 0.02 above 0.95: less than 2 of 89 regions (0.0225)
    (89, 0.975, "trained"),  # 0.025 above: more than two regions' worth
    (400, 0.955, "start"),   # 2 of 400 regions is 0.005: guard_margin's 0.01 is the larger and decides
    (400, 0.961, "trained"),
])
def test_on_few_regions_the_win_must_be_worth_guard_regions_of_them(regions_aside, trained_score,
                                                                      kept_model) -> None:
    """Six handwritten pages hold 89 lines, so 0.01 f-score is one line found, noise there: the trained
    model must win by 2/89. On 400 regions the 0.01 margin is the larger."""
    start, trained = nn.Linear(1, 1), nn.Linear(1, 1)
    aside = ScoredEvaluator({start: 0.95, trained: trained_score}, regions_aside)
    guard = StartGuard(start, aside, 6, "f-score", margin=0.01, regions=2)
    _, record, _ = guard.choose(trained)
    assert record["kept"] == kept_model
    assert record["guard_least_win"] == pytest.approx(max(0.01, 2 / regions_aside))


def f_score(found: int, regions: int = 89) -> float:
    """DetMetric's f-score when ``found`` of ``regions`` regions are found with as many detections."""
    metric = DetMetric()
    metric.set_counts([found, found, regions, regions])
    return metric.compute()["f-score"]


def test_a_win_of_exactly_guard_regions_regions_is_kept() -> None:
    """82 then 84 of 89 lines found: the f-scores differ by 2/89 less a rounding error (0.0224719101123594
    against 0.0224719101123595); two lines won are two lines, so the trained model is kept."""
    start, trained = nn.Linear(1, 1), nn.Linear(1, 1)
    assert f_score(84) - f_score(82) < 2 / 89  # the rounding the guard must not trip on
    guard = StartGuard(start, ScoredEvaluator({start: f_score(82), trained: f_score(84)}, 89), 6, "f-score",
                       margin=0.01, regions=2)
    assert guard.choose(trained)[1]["kept"] == "trained"
    guard.aside.scores[trained] = f_score(83)  # one line
    assert guard.choose(trained)[1]["kept"] == "start"


def test_guard_regions_0_leaves_the_margin_alone() -> None:
    start, trained = nn.Linear(1, 1), nn.Linear(1, 1)
    guard = StartGuard(start, ScoredEvaluator({start: 0.9888, trained: 1.0}, 89), 6, "f-score", margin=0.01,
                       regions=0)
    _, record, _ = guard.choose(trained)  # one line of 89 found: enough without guard_regions
    assert record["kept"] == "trained" and record["guard_least_win"] == 0.01


def test_set_aside_photos_without_text_are_reported(caplog) -> None:
    start, trained = nn.Linear(1, 1), nn.Linear(1, 1)
    guard = StartGuard(start, ScoredEvaluator({start: 0.0, trained: 0.0}, 0), 6, "f-score", margin=0.01,
                       regions=2)
    with caplog.at_level("WARNING", logger="textdet"):
        _, record, _ = guard.choose(trained)
    assert record["kept"] == "start" and record["guard_least_win"] == 0.01
    assert "hold no text regions to find" in caplog.text and "train.guard_holdout" in caplog.text


def test_an_evaluation_that_keeps_the_start_scores_it_once_on_the_eval_split() -> None:
    start, trained = nn.Linear(1, 1), nn.Linear(1, 1)
    guard = StartGuard(start, ScoredEvaluator({start: 0.9, trained: 0.8}), 25, "f-score", margin=0.0)
    evaluator = ScoredEvaluator({start: 0.94, trained: 0.93})
    evaluation = TrainEvaluation(evaluator, num_epochs=1, guard=guard)
    for _ in range(2):
        perf, kept, thresholds = evaluation.run(trained)
        assert kept is start and thresholds is None
        assert perf["f-score"] == 0.94 and perf["kept"] == "start" and perf["guard_trained"] == 0.8
    assert evaluator.calls == [start]


def test_with_thresholds_re_chosen_each_model_is_compared_at_its_best_pair() -> None:
    """The start's best pair scores 0.55 (0.50 at its own 0.3/0.6): the trained model's best, 0.555 at
    0.6/0.6, is not 0.01 above that, although it is 0.055 above the start's own pair; at 0.565 it is kept
    with 0.6/0.6."""
    start, trained = nn.Linear(1, 1), nn.Linear(1, 1)
    grids = {start: {(0.3, 0.6): 0.50, (0.5, 0.6): 0.55, (0.6, 0.6): 0.52},
             trained: {(0.3, 0.6): 0.40, (0.5, 0.6): 0.50, (0.6, 0.6): 0.555}}
    guard = StartGuard(start, SweptEvaluator(grids), 25, "f-score", margin=0.01)
    kept, record, thresholds = guard.choose(trained)
    assert kept is start and thresholds is None
    assert record == {"guard_trained": 0.555, "guard_start": 0.55, "guard_least_win": 0.01, "kept": "start"}
    grids[trained][(0.6, 0.6)] = 0.565
    kept, record, thresholds = guard.choose(trained)
    assert kept is trained and record["guard_trained"] == 0.565
    assert thresholds == {"binary_thresh": 0.6, "box_thresh": 0.6}


def test_among_equally_good_pairs_the_one_nearest_the_configs_is_chosen() -> None:
    """Six set-aside pages score every box_thresh alike at binary_thresh 0.2 (as PP-OCRv5's did on
    handwriting): the guard picks 0.2/0.6, next to the config's 0.3/0.6, not the grid's first row 0.2/0.3."""
    start, trained = nn.Linear(1, 1), nn.Linear(1, 1)
    grids = {start: {(0.3, 0.6): 0.9888},
             trained: {(0.2, 0.3): 1.0, (0.2, 0.6): 1.0, (0.2, 0.8): 1.0, (0.3, 0.6): 0.978, (0.4, 0.8): 0.989}}
    guard = StartGuard(start, SweptEvaluator(grids), 6, "f-score", margin=0.01)
    kept, _, thresholds = guard.choose(trained)
    assert kept is trained and thresholds == {"binary_thresh": 0.2, "box_thresh": 0.6}


def test_best_row_breaks_ties_by_the_distance_to_the_configs_pair() -> None:
    fixed = {"binary_thresh": 0.3, "box_thresh": 0.6}
    grid = [{"binary_thresh": b, "box_thresh": t, "f-score": f}
            for b, t, f in [(0.2, 0.3, 0.9), (0.5, 0.5, 0.9), (0.3, 0.8, 0.9), (0.3, 0.6, 0.8), (0.7, 0.3, 0.95)]]
    assert best_row(grid, "f-score", fixed)["binary_thresh"] == 0.7  # one best: no tie to break
    grid[-1]["f-score"] = 0.9
    # distances to 0.3/0.6: 0.2/0.3 is 0.4, 0.5/0.5 is 0.3, 0.3/0.8 is 0.2, 0.7/0.3 is 0.7
    assert (best_row(grid, "f-score", fixed)["binary_thresh"], best_row(grid, "f-score", fixed)["box_thresh"]) == (
        0.3, 0.8)


def test_the_kept_trained_model_is_scored_with_its_pair_and_the_start_with_the_configs() -> None:
    """The eval split scores the trained model at the pair the guard chose for it (and metrics.jsonl gets
    the pair), the start at the config's 0.3/0.6; the post-processing is left with the config's pair."""
    start, trained = nn.Linear(1, 1), nn.Linear(1, 1)
    grids = {start: {(0.3, 0.6): 0.50}, trained: {(0.3, 0.6): 0.40, (0.6, 0.7): 0.70}}
    guard = StartGuard(start, SweptEvaluator(grids), 25, "f-score", margin=0.01)
    evaluator = PairRecorder({start: 0.45, trained: 0.65})
    evaluation = TrainEvaluation(evaluator, num_epochs=1, guard=guard)
    perf, kept, thresholds = evaluation.run(trained)
    assert kept is trained and thresholds == {"binary_thresh": 0.6, "box_thresh": 0.7}
    assert perf["f-score"] == 0.65 and perf["binary_thresh"] == 0.6 and perf["box_thresh"] == 0.7
    grids[trained][(0.6, 0.7)] = 0.45  # a later epoch: the start is kept
    perf, kept, thresholds = evaluation.run(trained)
    assert kept is start and thresholds is None and "binary_thresh" not in perf
    assert evaluator.pairs == [(0.6, 0.7), (0.3, 0.6)]
    assert (evaluator.postprocess.binary_thresh, evaluator.postprocess.box_thresh) == (0.3, 0.6)


@pytest.mark.parametrize("share, pretrained, validate, message", [
    (0.7, "m.ckpt", True, "not a share between 0 and 0.5"),
    (0.1, None, True, "model.pretrained names none"),
    (0.1, "m.ckpt", False, "system.val_while_train is false"),
    (0.0, "m.ckpt", True, "train.guard_thresholds: the thresholds are re-chosen on the photos"),
])
def test_guard_settings_that_cannot_work_are_refused(share, pretrained, validate, message) -> None:
    cfg = Config()
    cfg.train.guard_holdout, cfg.model.pretrained, cfg.system.val_while_train = share, pretrained, validate
    cfg.train.guard_thresholds = True
    with pytest.raises(ConfigError, match=message):
        training.guard_aside_every(cfg)


def test_negative_guard_regions_are_refused_with_where_they_were_set() -> None:
    with pytest.raises(ConfigError, match="-o train.guard_regions: 'train.guard_regions' must be >= 0, got -1"):
        load_config(None, ["train.guard_regions=-1"])


def test_guard_share_is_every_nth_photo() -> None:
    cfg = Config()
    cfg.model.pretrained, cfg.system.val_while_train = "m.ckpt", True
    assert training.guard_aside_every(cfg) == 0  # off by default
    cfg.train.guard_holdout = 0.1
    assert training.guard_aside_every(cfg) == 10
