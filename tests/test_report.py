"""``textdet eval --report``: the page's figures equal ``textdet eval --json``'s, the error kinds and the
gallery order on hand-made boxes, a compare page, and the pages opened in headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import cv2
import numpy as np
import pytest

from conftest import RECIPE, box, tiny_overrides
from textdet.cli import main
from textdet.config import load_config
from textdet.metrics import DetMetric
from textdet.report import ModelRun, score_photos, write_report

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def cli_args(cmd: str, opts: list[str], *extra: str) -> list[str]:
    out = [cmd, "-c", RECIPE]
    for option in opts:
        out += ["-o", option]
    return out + list(extra)


def cell(page: str, row: str) -> list[str]:
    """The cells after the first of the table row whose first cell is ``row``."""
    match = re.search(rf"<tr><td>{re.escape(row)}</td>(.*?)</tr>", page)
    assert match, f"no row {row!r}"
    return re.findall(r"<td[^>]*>(.*?)</td>", match.group(1))


@pytest.fixture(scope="module")
def trained(synth_root, tmp_path_factory):
    """A 2-epoch tiny run on the 4-photo synthetic val set (best.ckpt, e1.ckpt and e2.ckpt)."""
    run = str(tmp_path_factory.mktemp("report") / "run")
    opts = tiny_overrides(synth_root, run)
    assert main(cli_args("train", opts, "--no-progress")) == 0
    return opts, run


def test_report_figures_equal_eval_json(trained, tmp_path, capsys):
    """The page's recall, precision and f-score are `textdet eval --json`'s (4 decimals); its word total is the
    words of the label file that count (not ###), as is the JSON's error-kind tally; one gallery entry per
    photo."""
    opts, _ = trained
    assert main(cli_args("eval", opts, "--json")) == 0
    plain = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    out = tmp_path / "report"
    assert main(cli_args("eval", opts, "--json", "--report", str(out))) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {k: result[k] for k in ("recall", "precision", "f-score")} == {
        k: plain[k] for k in ("recall", "precision", "f-score")}
    assert result["report"]["photos"] == 4 and result["report"]["path"] == str(out / "index.html")
    page = (out / "index.html").read_text(encoding="utf-8")
    for key in ("recall", "precision", "f-score"):
        assert cell(page, key) == [f"{plain[key]:.4f}"]
    post = load_config(RECIPE, opts).postprocess
    assert cell(page, "binary_thresh") == [f"{post['binary_thresh']:g} (from the config)"]
    synth = next(o.split("=", 1)[1] for o in opts if o.startswith("eval.dataset.dataset_root="))
    with open(os.path.join(synth, "test_gt.txt"), encoding="utf-8") as f:
        words = [w for line in f for w in json.loads(line.split("\t")[1]) if w["transcription"] != "###"]
    assert cell(page, "all words that count") == [str(len(words))]
    kinds = result["error_kinds"]  # the page's tally, in the JSON line too
    assert kinds["images"] == 4
    assert sum(kinds["words"].values()) == len(words)  # each word that counts has one kind, ### none
    assert sum(row["words"] for row in kinds["recall_by_height"].values()) == len(words)
    assert page.count('<figure class="photo') == 4
    assert len(os.listdir(out / "photos")) == len(os.listdir(out / "thumbs")) == 4
    assert (out / "recall_by_height.png").is_file() and (out / "threshold_grid.png").is_file()
    assert "chosen on the evaluation split (oracle)" in page


def test_compare_two_checkpoints(trained, tmp_path, capsys):
    """best.ckpt against e1.ckpt of the same run: both figures on the page, the photos drawn side by side."""
    opts, run = trained
    out = tmp_path / "compare"
    args = cli_args("eval", opts, "--json", "--report", str(out), "--compare", os.path.join(run, "e1.ckpt"))
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["compare"]["checkpoint"] == os.path.join(run, "e1.ckpt")
    page = (out / "index.html").read_text(encoding="utf-8")
    assert cell(page, "f-score") == [f"{result['f-score']:.4f}", f"{result['compare']['f-score']:.4f}"]
    assert page.count('<figure class="photo') == 4 and "What changed" in page
    thumb = cv2.imread(str(next((out / "thumbs").iterdir())))
    assert thumb.shape[1] > 2 * thumb.shape[0]  # two panels of a 4:3 photo side by side


def test_compare_with_an_onnx_model(trained, tmp_path, capsys):
    """best.ckpt against its own ONNX export: the ONNX model scores as the checkpoint, draws as many boxes of
    each kind, and no photo changes."""
    opts, run = trained
    onnx = str(tmp_path / "best.onnx")
    assert main(cli_args("export", opts, "--ckpt", os.path.join(run, "best.ckpt"), "--out", onnx)) == 0
    capsys.readouterr()
    out = tmp_path / "compare"
    assert main(cli_args("eval", opts, "--json", "--report", str(out), "--compare", onnx)) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["compare"]["checkpoint"] == onnx
    assert result["compare"]["f-score"] == pytest.approx(result["f-score"], abs=1e-9)
    page = (out / "index.html").read_text(encoding="utf-8")
    assert cell(page, "photos with the same f-score") == ["4"]
    for kind in ("matched", "merged", "loose", "fragment", "on nothing", "all detections"):
        ours, exported = cell(page, kind)
        assert ours == exported, kind  # the same boxes, kind by kind
    assert int(cell(page, "all detections")[0]) > 0


def test_bad_inputs_name_the_flag(trained, tmp_path, capsys, monkeypatch):
    opts, _ = trained
    assert main(cli_args("eval", opts, "--report", str(tmp_path / "r"), "--compare", str(tmp_path / "no.onnx"))) == 2
    err = capsys.readouterr().err
    assert err.startswith("textdet eval: error: --compare") and "no.onnx" in err and "file not found" in err
    assert main(cli_args("eval", opts, "--compare", str(tmp_path / "no.onnx"))) == 2
    assert "add --report DIR" in capsys.readouterr().err
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)  # as if not installed
    assert main(cli_args("eval", opts, "--report", str(tmp_path / "r"))) == 2
    assert 'pip install -e ".[plot]"' in capsys.readouterr().err
    assert not (tmp_path / "r" / "index.html").exists()


# Two hand-made photos (128 x 96). Photo a: words W0 and W1, a ### region; the model matches W0 and draws a box
# on nothing (recall 1/2, precision 1/2, f-score 0.5; 2 errors). Photo b: one word, matched (f-score 1).
W0, W1, DONT_CARE, WB = box(10, 10, 40, 30), box(50, 10, 80, 30), box(90, 10, 120, 30), box(10, 10, 60, 40)
LABELS = {"a": ([W0, W1, DONT_CARE], [False, False, True]), "b": ([WB], [False])}
MAIN = {"a": [W0, box(60, 50, 100, 80)], "b": [WB]}
# The other model finds W1 instead of W0 (f-score 2/3) and nothing on photo b (f-score 0).
OTHER = {"a": [W1], "b": []}


def hand_made_run(folder, detections: dict, label: str) -> ModelRun:
    records = []
    for name, (gts, tags) in LABELS.items():
        path = str(folder / f"{name}.png")
        if not os.path.exists(path):
            cv2.imwrite(path, np.full((96, 128, 3), 200, np.uint8))
        records.append({"img_path": path, "polys": [np.float32(p) for p in detections[name]],
                        "gts": [np.float64(p) for p in gts], "ignore_tags": np.array(tags)})
    photos = score_photos(records, DetMetric())
    metric = DetMetric()
    metric.set_counts(sum(photo.counts for photo in photos))
    thresholds = {"binary_thresh": 0.3, "box_thresh": 0.6}
    source = dict.fromkeys(thresholds, "from the config")
    return ModelRun(label, {**metric.compute(), "checkpoint": label}, photos, thresholds, source)


INFO = {"protocol": "icdar15", "data": "hand-made"}


def test_hand_made_report_counts_and_order(tmp_path):
    run = hand_made_run(tmp_path, MAIN, "main")
    assert [round(photo.fscore, 4) for photo in run.photos] == [0.5, 1.0]
    assert [photo.n_errors for photo in run.photos] == [2, 0]
    report = write_report(str(tmp_path / "r"), [run], INFO)
    page = open(report["path"], encoding="utf-8").read()
    assert cell(page, "f-score") == [f"{2 * (2 / 3) * (2 / 3) / (4 / 3):.4f}"]  # recall 2/3, precision 2/3
    assert cell(page, "found") == ["2 (66.7%)"] and cell(page, "missed") == ["1 (33.3%)"]
    assert cell(page, "matched") == ["2 (66.7%)"] and cell(page, "on nothing") == ["1 (33.3%)"]
    assert re.findall(r'<figure class="photo" id="(\w+)"', page) == ["0000_a", "0001_b"]  # worst first
    assert "1 words not found, 1 wrong boxes" in page
    drawn = cv2.imread(str(tmp_path / "r" / "photos" / "0000_a.jpg"))
    assert drawn.shape == (96, 128, 3)
    # the box on nothing (60..100, 50..80) is outlined orange (BGR 0, 150, 255); W1 (missed) is filled red
    assert np.abs(drawn[50, 80].astype(int) - (0, 150, 255)).max() < 40
    assert drawn[20, 65, 2] > drawn[20, 65, 1] + 30


def test_hand_made_compare_lists_photos_by_change(tmp_path):
    """Photo a drops from 2/3 to 0.5 (the largest drop first), photo b gains 1; the main model alone finds
    W0 and photo b's word, the other alone W1."""
    runs = [hand_made_run(tmp_path, MAIN, "main"), hand_made_run(tmp_path, OTHER, "other")]
    page = open(write_report(str(tmp_path / "c"), runs, INFO)["path"], encoding="utf-8").read()
    assert re.findall(r'<figure class="photo[^"]*" id="(\w+)"', page) == ["0000_a", "0001_b"]
    assert "change -0.17" in page and "change +1.00" in page
    assert cell(page, "words only main finds") == ["2"] and cell(page, "words only other finds") == ["1"]
    assert cell(page, "photos where main scores lower") == ["1"]


def rendered(page: str, tmp_path) -> str:
    """The page's DOM after load, from headless Chromium (the page's script marks every image)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"chromium not found at {CHROMIUM} (Debian package chromium): the page is not opened")
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}",
               "--dump-dom", f"file://{page}"]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout


@pytest.mark.parametrize("compare", [False, True])
def test_pages_load_every_image_in_chromium(tmp_path, compare):
    """One gallery entry per photo and every image (thumbnails, figures) decoded, in a real browser."""
    runs = [hand_made_run(tmp_path, MAIN, "main")]
    if compare:
        runs.append(hand_made_run(tmp_path, OTHER, "other"))
    report = write_report(str(tmp_path / "r"), runs, INFO)
    dom = rendered(report["path"], tmp_path)
    assert len(re.findall(r'<figure class="photo', dom)) == 2
    images = re.findall(r"<img [^>]*>", dom)
    assert len(images) == 3  # two thumbnails and the recall-by-height figure (no threshold grid: no sweep)
    assert all('data-loaded="1"' in img for img in images)
    assert 'data-images="3/3"' in dom
    links = re.findall(r'<a href="(photos/[^"]+)"', dom)
    assert len(links) == 2 and all(os.path.isfile(os.path.join(tmp_path, "r", link)) for link in links)
