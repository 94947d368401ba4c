"""DetEval and TIoU on hand-computed cases (each docstring draws the geometry), ``--protocol`` on
``textdet metric``/``eval``, and ``textdet eval --sweep`` (one model run, many post-processings)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import RECIPE, save_tiny_model
from textdet import cli
from textdet.metrics import DetMetric, evaluate_image
from textdet.metrics.det_metric import deteval_image, tiou_image
from textdet.postprocess import DBPostprocess
from textdet.runtime.amp import amp_settings
from textdet.runtime.evaluator import ORACLE, Evaluator, ThresholdSweep, timed_run
from textdet.runtime.feed import DeviceInput


def box(x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32)


def pooled(protocol: str, dets: list, gts: list, ignore: list | None = None) -> dict[str, float]:
    metric = DetMetric(protocol=protocol)
    metric.update([dets], [gts], [ignore])
    return metric.compute()


# ----------------------------------------------------------------------------- DetEval
def test_deteval_one_to_one_accepts_a_loose_box_that_iou_rejects():
    """::

    +----GT----+---------+    GT 0..10 x 0..10 (100); D 0..20 x 0..10 (200)
    |          |         |    area recall 100/100 = 1 >= 0.8, area precision 100/200 = 0.5 >= 0.4,
    +----------+---------+    centres (5,5), (10,5): 2 * 5 = 10 < diag 14.1 + 22.4 -> one-to-one: R = P = 1
    +-----------D--------+    ICDAR2015: IoU 100/200 = 0.5, not > 0.5 -> no match
    """
    assert deteval_image([box(0, 0, 20, 10)], [box(0, 0, 10, 10)], [False]) == (1, 1, 1, 1)
    assert evaluate_image([box(0, 0, 20, 10)], [box(0, 0, 10, 10)], [False]) == (0, 1, 1)


def test_deteval_split_is_penalised():
    """::

    +---------GT---------+    GT 0..20 x 0..10 (200)
    +---D1---+----D2-----+    D1 0..10, D2 10..20: area recall 0.5 each (< 0.8: no one-to-one),
                              area precision 1 each; recalls sum to 1.0 >= 0.8 -> one-to-many (split):
                              recall credit 0.8, precision credit 0.8 per detection = 1.6 over 2 detections
    -> recall 0.8 / 1 GT = 0.8, precision 1.6 / 2 = 0.8
    """
    assert deteval_image([box(0, 0, 10, 10), box(10, 0, 20, 10)], [box(0, 0, 20, 10)], [False]) == (0.8, 1.6, 2, 1)
    got = pooled("deteval", [box(0, 0, 10, 10), box(10, 0, 20, 10)], [box(0, 0, 20, 10)])
    assert got["recall"] == pytest.approx(0.8) and got["precision"] == pytest.approx(0.8)


def test_deteval_merge_of_three_is_not_penalised():
    """::

    +-G1-+ +-G2-+ +-G3-+      G1 0..10, G2 11..21, G3 22..32 (x), 0..10 (y): 100 each
    +---------D--------+      D 0..32 (320): area recall 1 for each GT, area precision 100/320 = 0.31 < 0.4
                              -> no one-to-one, no one-to-many; many-to-one: precisions sum to 0.94 >= 0.4
                              -> recall credit 1 per GT (3), precision credit 1 -> R = P = 1
    """
    gts = [box(0, 0, 10, 10), box(11, 0, 21, 10), box(22, 0, 32, 10)]
    assert deteval_image([box(0, 0, 32, 10)], gts, [False] * 3) == (3, 1, 1, 3)
    assert pooled("deteval", [box(0, 0, 32, 10)], gts) == {"recall": 1.0, "precision": 1.0, "f-score": 1.0}


def test_deteval_merge_of_two_is_found_first_as_a_one_to_one_of_the_first_gt():
    """::

    +-G1-+ +-G2-+             G1 0..10, G2 11..21; D 0..21 (210): area precision 100/210 = 0.48 >= 0.4 for each
    +-------D---+             one-to-one fails (D's column has two candidates); the one-to-many pass runs before
                              many-to-one and G1 takes D alone (recall 1 >= 0.8, one detection: credit 1, 1);
                              G2 is left unmatched, as in the ICDAR 2013 script -> recall 1/2, precision 1/1
    """
    assert deteval_image([box(0, 0, 21, 10)], [box(0, 0, 10, 10), box(11, 0, 21, 10)], [False, False]) == (1, 1, 1, 2)


def test_deteval_dont_care():
    """::

    +------+ +-----+    GT1 '###' 0..10: D1 1..9 has all its area in it (> 0.4) -> don't care, not counted
    | ###  | | GT2 |    GT2 20..30 x 0..10, D2 identical -> one-to-one
    | [D1] | | D2  |    -> 1 care GT, 1 care detection, R = P = 1
    +------+ +-----+
    """
    dets, gts = [box(1, 1, 9, 9), box(20, 0, 30, 10)], [box(0, 0, 10, 10), box(20, 0, 30, 10)]
    assert deteval_image(dets, gts, [True, False]) == (1, 1, 1, 1)


# ----------------------------------------------------------------------------- TIoU
def test_tiou_penalises_a_cut_gt():
    """::

    +----GT----+   GT 0..10 x 0..10 (100); D 0..10 x 0..8 (80), inside GT
    |    D     |   IoU 80/100 = 0.8 -> matched (> 0.5)
    +----------+   Ct = 100 - 80 = 20 uncovered: recall credit 0.8 * (1 - 20/100) = 0.64
    |  (cut)   |   Ot = 0 (no other text in D): precision credit 0.8 * 1 = 0.8
    +----------+   ICDAR2015 would give 1 and 1
    """
    r, p, n_det, n_gt = tiou_image([box(0, 0, 10, 8)], [box(0, 0, 10, 10)], [False])
    assert (r, p, n_det, n_gt) == (pytest.approx(0.64), pytest.approx(0.8), 1, 1)


def test_tiou_penalises_a_detection_covering_other_text():
    """::

    +---G1---+---G2---+     G1 0..10, G2 10..20 (x), 0..10 (y); D 0..12 (120)
    +-----D-----+           IoU(G1, D) = 100/120 = 0.833 -> matched; IoU(G2, D) = 20/200 = 0.1
                            Ct = 0: recall credit 0.833
                            Ot = D & G2 outside G1 = 10..12 x 0..10 = 20: precision credit
                            0.833 * (1 - 20/120) = 0.694. Without G2 the extra 20 px are background
                            and cost nothing beyond the IoU: precision credit 0.833
    """
    dets = [box(0, 0, 12, 10)]
    r, p, n_det, n_gt = tiou_image(dets, [box(0, 0, 10, 10), box(10, 0, 20, 10)], [False, False])
    assert (r, p, n_det, n_gt) == (pytest.approx(5 / 6), pytest.approx(25 / 36), 1, 2)
    assert tiou_image(dets, [box(0, 0, 10, 10)], [False])[1] == pytest.approx(5 / 6)
    got = pooled("tiou", dets, [box(0, 0, 10, 10), box(10, 0, 20, 10)])
    assert got["recall"] == pytest.approx(5 / 12) and got["precision"] == pytest.approx(25 / 36)


def test_tiou_ignores_a_loss_of_one_percent():
    """GT 0..100 x 0..10 (1000), D 1..100 (990): Ct / |G| = 0.01 <= 0.01 counts as no loss -> credit = IoU 0.99."""
    assert tiou_image([box(1, 0, 100, 10)], [box(0, 0, 100, 10)], [False])[:2] == (pytest.approx(0.99),) * 2


def test_protocol_names():
    with pytest.raises(ValueError, match="protocol must be one of"):
        DetMetric(protocol="iou")
    assert "protocol='tiou'" in repr(DetMetric(protocol="tiou"))


def test_metric_command_protocols(tmp_path: Path, capsys):
    """The split of test_deteval_split_is_penalised as ICDAR2015 files: icdar15 0/0, deteval 0.8/0.8."""
    (tmp_path / "gt").mkdir()
    (tmp_path / "res").mkdir()
    (tmp_path / "gt" / "gt_img_1.txt").write_text("0,0,20,0,20,10,0,10,word\n", encoding="utf-8")
    (tmp_path / "res" / "res_img_1.txt").write_text("0,0,10,0,10,10,0,10\n10,0,20,0,20,10,10,10\n")
    scores = {}
    for protocol in ("icdar15", "deteval", "tiou"):
        assert cli.main(["metric", "--gt", str(tmp_path / "gt"), "--pred", str(tmp_path / "res"), "--json",
                         "--protocol", protocol]) == 0
        scores[protocol] = json.loads(capsys.readouterr().out)
    assert scores["icdar15"]["f-score"] == 0 and scores["tiou"]["f-score"] == 0 and scores["icdar15"]["tp"] == 0
    assert (scores["deteval"]["recall"], scores["deteval"]["precision"]) == (pytest.approx(0.8), pytest.approx(0.8))
    assert scores["deteval"]["tp"] == 0.8 and scores["deteval"]["protocol"] == "deteval"


# ----------------------------------------------------------------------------- threshold sweep
def two_blocks() -> np.ndarray:
    """(1, 1, 64, 64) map: block A (x 8..27, y 8..19) at P = 0.95, block B (x 36..55, y 36..51) at P = 0.45."""
    prob = np.zeros((1, 1, 64, 64), np.float32)
    prob[0, 0, 8:20, 8:28] = 0.95
    prob[0, 0, 36:52, 36:56] = 0.45
    return prob


def expected_f(binary: float, box_t: float) -> float:
    """B is found when it is foreground (0.45 >= binary_thresh) and scores enough (0.45 >= box_thresh); A always.
    The GT is both blocks as DBPostprocess finds them: both -> F 1; A only -> R 1/2, P 1, F 2/3."""
    return 1.0 if 0.45 >= binary and 0.45 >= box_t else 2 / 3


def test_sweep_scores_each_pair_like_a_run_with_those_thresholds():
    prob = two_blocks()
    gts = DBPostprocess(binary_thresh=0.3, box_thresh=0.3)(prob)[0]["polys"]
    assert len(gts) == 2
    sweep = ThresholdSweep(DBPostprocess(binary_thresh=0.3, box_thresh=0.6), DetMetric())
    sweep.update(prob, None, [gts], [None])
    result = sweep.results()
    assert len(result["grid"]) == 9 * 9 and result["fixed"] == {"binary_thresh": 0.3, "box_thresh": 0.6}
    for row in result["grid"]:
        b, t = row["binary_thresh"], row["box_thresh"]
        assert row["f-score"] == pytest.approx(expected_f(b, t)), (b, t)
        alone = DetMetric()
        alone.update([DBPostprocess(binary_thresh=b, box_thresh=t)(prob)[0]["polys"]], [gts], [None])
        assert {k: row[k] for k in ("recall", "precision", "f-score")} == alone.compute()
    # F = 1 at binary 0.1 to 0.4 with box 0.3 or 0.4: the nearest of them to the config's 0.3/0.6
    assert (result["best"]["binary_thresh"], result["best"]["box_thresh"]) == (0.3, 0.4)
    assert result["best"]["note"] == ORACLE == "tuned on the evaluation split (oracle)"


class MapModel(torch.nn.Module):
    """Returns the two-block map whatever the image: the evaluator's forward, without a network."""

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"binary": torch.from_numpy(two_blocks()).expand(x.shape[0], -1, -1, -1)}


def test_evaluator_runs_the_model_once_and_reports_fixed_and_sweep():
    """Two batches of one image: the fixed thresholds (0.3, 0.6) miss B (F 2/3); the sweep's best finds it."""
    gts = DBPostprocess(binary_thresh=0.3, box_thresh=0.3)(two_blocks())[0]["polys"]
    batch = {"image": torch.zeros(1, 3, 64, 64), "polys": [gts], "ignore_tags": [np.zeros(2, bool)]}
    post, metric = DBPostprocess(binary_thresh=0.3, box_thresh=0.6), DetMetric()
    calls = []
    model = MapModel()
    model.register_forward_hook(lambda *a: calls.append(1))
    evaluator = Evaluator([batch, batch], post, metric, DeviceInput(torch.device("cpu")), amp_settings("O0", "cpu"),
                          sweep=ThresholdSweep(post, metric))
    result = timed_run(evaluator, model, "model.ckpt")
    assert len(calls) == 2 and result["images"] == 2
    assert result["f-score"] == pytest.approx(2 / 3)
    fixed = next(r for r in result["sweep"]["grid"] if (r["binary_thresh"], r["box_thresh"]) == (0.3, 0.6))
    assert fixed["f-score"] == result["f-score"] and result["sweep"]["best"]["f-score"] == 1.0
    assert math.isclose(result["sweep"]["best"]["recall"], 1.0)


def test_eval_command_protocol_and_sweep(synth_root, tmp_path, capsys):
    """Through the CLI on a tiny random model: the grid point at the config's thresholds (0.6, 0.7) is the
    fixed-threshold result, the best pair is the grid's maximum and is labelled as an oracle."""
    opts, _, _, ckpt = save_tiny_model(synth_root, str(tmp_path))
    argv = ["eval", "-c", RECIPE, *[a for o in opts for a in ("-o", o)], "--ckpt", ckpt, "--sweep"]
    assert cli.main([*argv, "--json", "--protocol", "deteval"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["protocol"] == "deteval"
    grid = result["sweep"]["grid"]
    fixed = next(r for r in grid if (r["binary_thresh"], r["box_thresh"]) == (0.6, 0.7))
    assert fixed["f-score"] == result["f-score"] and fixed["recall"] == result["recall"]
    assert result["sweep"]["best"]["f-score"] == max(r["f-score"] for r in grid)
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert text.startswith("Performance (icdar15): recall") and "tuned on the evaluation split (oracle)" in text
    assert "report the fixed-threshold result (binary_thresh 0.6, box_thresh 0.7) as the score" in text
