"""The small CLI tools on real files: synth, convert, metric, plot, doctor."""

from __future__ import annotations

import json

import cv2

from textdet.cli import main


def test_synth_writes_icdar_layout(tmp_path, capsys):
    assert main(["synth", str(tmp_path / "d"), "--train", "3", "--val", "2", "--size", "160x96", "--seed", "3"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["train"]["images"] == 3 and summary["val"]["images"] == 2
    img = cv2.imread(str(tmp_path / "d" / "train" / "images" / "img_1.jpg"))
    assert img.shape == (96, 160, 3)
    assert len(open(tmp_path / "d" / "test_gt.txt").read().splitlines()) == 2


def test_convert_then_metric_scores_exact_match_as_one(tmp_path, capsys):
    """GT converted from ICDAR files, and a result folder with the same boxes plus one false positive:
    recall 1, precision 2/3."""
    gt = tmp_path / "gt"
    res = tmp_path / "res"
    gt.mkdir()
    res.mkdir()
    (gt / "gt_img_1.txt").write_text("\ufeff10,10,50,10,50,30,10,30,hello, world\n60,60,90,60,90,80,60,80,###\n",
                                     encoding="utf-8")
    (gt / "gt_img_2.txt").write_text("5,5,40,5,40,20,5,20,abc\n", encoding="utf-8")
    (res / "res_img_1.txt").write_text("10,10,50,10,50,30,10,30\n200,200,240,200,240,220,200,220\n")
    (res / "res_img_2.txt").write_text("5,5,40,5,40,20,5,20\n")
    assert main(["convert", "icdar15", str(gt), "--out", str(tmp_path / "gt.txt")]) == 0
    lines = open(tmp_path / "gt.txt", encoding="utf-8").read().splitlines()
    assert lines[0].startswith("img_1.jpg\t") and "hello, world" in lines[0] and "###" in lines[0]
    capsys.readouterr()
    assert main(["metric", "--gt", str(gt), "--pred", str(res), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["recall"] == 1.0 and abs(result["precision"] - 2 / 3) < 1e-9 and result["tp"] == 2


def test_metric_error_is_one_line(tmp_path, capsys):
    assert main(["metric", "--gt", str(tmp_path / "nope"), "--pred", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("textdet metric: error:") and "nope" in err


def test_plot_draws_curves(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with open(run / "metrics.jsonl", "w") as f:
        for e in range(1, 4):
            f.write(json.dumps({"epoch": e, "loss": 3.0 / e, "lr": 0.01, "img_per_s": 10.0, "f-score": 0.2 * e,
                                "recall": 0.1 * e, "precision": 0.3 * e}) + "\n")
    assert main(["plot", str(run)]) == 0
    img = cv2.imread(str(run / "curves.png"))
    assert img.shape == (600, 960, 3) and img.std() > 10


def test_doctor_reports_environment(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "torch" in out and "pyclipper" in out and "doctor: all required pieces present" in out
