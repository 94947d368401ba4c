"""``textdet plot RUN_DIR``: curves.png drawn with matplotlib, report.html linking the run folder's evaluation
reports (the newest marked so), and a clear message when matplotlib is missing."""

from __future__ import annotations

import json
import os
import sys

import cv2

from textdet.cli import main
from textdet.report.html import GENERATOR


def make_run(folder) -> None:
    folder.mkdir()
    with open(folder / "metrics.jsonl", "w") as f:
        for epoch in range(1, 4):
            f.write(json.dumps({"epoch": epoch, "loss": 3.0 / epoch, "lr": 0.01, "img_per_s": 10.0,
                                "f-score": 0.2 * epoch, "recall": 0.1 * epoch, "precision": 0.3 * epoch}) + "\n")


def fake_report(folder, mtime: int) -> None:
    folder.mkdir()
    (folder / "index.html").write_text(f"<!doctype html><html><head>{GENERATOR}</head></html>", encoding="utf-8")
    os.utime(folder / "index.html", (mtime, mtime))


def test_plot_draws_curves_and_links_the_newest_report(tmp_path, capsys):
    run = tmp_path / "run"
    make_run(run)
    fake_report(run / "eval_old", 1_000_000)
    fake_report(run / "eval_new", 2_000_000)
    (run / "other").mkdir()
    (run / "other" / "index.html").write_text("<html>not a textdet report</html>", encoding="utf-8")
    assert main(["plot", str(run)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {run / 'curves.png'} and {run / 'report.html'}"
    curves = cv2.imread(str(run / "curves.png"))
    assert curves.shape == (600, 960, 3) and curves.std() > 10
    page = (run / "report.html").read_text(encoding="utf-8")
    assert '<img src="curves.png"' in page
    links = page.split("<li>")[1:]
    assert links[0].startswith('<a href="eval_new/index.html">eval_new</a> (the newest report)')
    assert links[1].startswith('<a href="eval_old/index.html">eval_old</a></li>')
    assert "other/index.html" not in page
    assert "3 epochs; last: loss 1, recall 0.3, precision 0.9, f-score 0.6" in page


def test_plot_without_reports_says_how_to_make_one(tmp_path):
    run = tmp_path / "run"
    make_run(run)
    assert main(["plot", str(run)]) == 0
    assert "--report RUN/eval_report" in (run / "report.html").read_text(encoding="utf-8")


def test_plot_without_matplotlib_names_the_extra(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    make_run(run)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    assert main(["plot", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("textdet plot: error: matplotlib is not installed") and 'pip install -e ".[plot]"' in err
    assert not (run / "curves.png").exists()
