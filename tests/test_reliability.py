"""Reliability: kills at any moment resume to the same weights, one run per folder, failed writes keep
the previous checkpoint, label paths stay inside the data root."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch

from conftest import RECIPE, tiny_overrides
from textdet.cli import main
from textdet.config import load_config
from textdet.config.components import MODEL_PART_NAMES
from textdet.config.loader import log_level
from textdet.data.dataset import DetDataset
from textdet.data.labels import parse_label_line
from textdet.data.pipeline import build_transforms
from textdet.data.resize import DetResize
from textdet.engine.resume import resume_due
from textdet.engine.rundir import prepare_run_dir, trim_metrics
from textdet.errors import ConfigError, TextdetError
from textdet.models.dbnet import BACKBONES, HEADS, NECKS
from textdet.runtime import checkpoint

KILL_AT = os.path.join(os.path.dirname(__file__), "kill_at.py")


def train_args(opts: list[str]) -> list[str]:
    return ["-c", RECIPE, *[a for o in opts for a in ("-o", o)], "--no-progress", "--device", "cpu"]


@pytest.mark.slow
def test_killed_anywhere_resumes_to_identical_weights(synth_root, tmp_path):
    """2 epochs x 6 optimizer steps, train_resume.ckpt every 2 steps. The killed run dies during step 5,
    during the first evaluation, and while writing its 4th checkpoint file (the mid-epoch train_resume.ckpt
    of step 8); each time it resumes. Its final weights equal a straight run's."""
    straight, killed = str(tmp_path / "straight"), str(tmp_path / "killed")
    extra = {"train.ckpt_interval_steps": 2}
    assert main(["train", *train_args(tiny_overrides(synth_root, straight, **extra))]) == 0
    opts = tiny_overrides(synth_root, killed, **extra)
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    # (epochs done, micro-steps into the next, optimizer steps) held by train_resume.ckpt after each run
    positions = [(0, 4, 4), (0, 4, 4), (1, 0, 6), (2, 0, 12)]
    for point, n in (("step", 5), ("eval", 1), ("save", 4), (None, 0)):
        cmd = [sys.executable, KILL_AT, point, str(n)] if point else [sys.executable, "-m", "textdet", "train"]
        resume = ["model.resume=True"] if point != "step" or n != 5 else []
        proc = subprocess.run(cmd + train_args(opts + resume), env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == (-signal.SIGKILL if point else 0), (point, proc.stderr[-2000:])
        ck = torch.load(os.path.join(killed, "train_resume.ckpt"), weights_only=False)
        assert (ck["epoch"], ck["step_in_epoch"], ck["step"]) == positions.pop(0)
    a = torch.load(os.path.join(straight, "train_resume.ckpt"), weights_only=False)
    b = torch.load(os.path.join(killed, "train_resume.ckpt"), weights_only=False)
    assert a["step"] == b["step"] == 12 and b["epoch"] == 2 and b["step_in_epoch"] == 0
    assert max((a["model"][k].double() - b["model"][k].double()).abs().max().item() for k in a["model"]) <= 1e-6
    records = [json.loads(line) for line in open(os.path.join(killed, "metrics.jsonl"))]
    assert [r["epoch"] for r in records] == [1, 2]  # redone epochs are not logged twice
    assert not [f for f in os.listdir(killed) if f.startswith(".tmp_")]  # the cut write was cleared on resume


def _touch(folder, *names):
    os.makedirs(folder, exist_ok=True)
    for n in names:
        open(os.path.join(folder, n), "w").write('{"epoch": 1}\n')


def test_fresh_run_into_used_folder_refuses_with_three_fixes(synth_root, tmp_path, capsys):
    run = str(tmp_path / "run")
    _touch(run, "metrics.jsonl", "e1.ckpt", "train.log")
    assert main(["train", *train_args(tiny_overrides(synth_root, run))]) == 2
    err = capsys.readouterr().err
    assert "holds another run (e1.ckpt, metrics.jsonl)" in err
    assert "model.resume=True" in err and "train.ckpt_save_dir=NEW" in err and "--overwrite" in err
    assert sorted(os.listdir(run)) == ["e1.ckpt", "metrics.jsonl", "train.log"]  # nothing touched


def test_overwrite_and_start_up_traces(tmp_path):
    run = str(tmp_path / "run")
    _touch(run, "metrics.jsonl", "best.ckpt", "e3.ckpt", "train.log", "notes.txt")
    prepare_run_dir(run, resuming=True)  # resuming keeps everything
    assert len(os.listdir(run)) == 5
    prepare_run_dir(run, resuming=False, overwrite=True)
    assert os.listdir(run) == ["notes.txt"]  # only textdet's own files go
    _touch(run, "train.log", "startup.json")  # a run killed before its first checkpoint
    prepare_run_dir(run, resuming=False)
    assert os.listdir(run) == ["notes.txt"]


def test_resume_trims_metrics_of_redone_epochs(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"epoch": 1}\n{"epoch": 2}\n{"epoch": 3}\n{"epo')
    trim_metrics(str(tmp_path), 2)
    assert path.read_text() == '{"epoch": 1}\n{"epoch": 2}\n'


def test_interval_setting():
    assert resume_due(2, 4, 0.0) and not resume_due(2, 5, 0.0)
    assert not resume_due(0, 4, 1e9) and not resume_due(False, 4, 1e9)
    assert resume_due("auto", 1, 600.0) and not resume_due("auto", 1, 599.0)
    with pytest.raises(ConfigError, match="ckpt_interval_steps' must be a step count >= 0, 'auto'"):
        load_config(RECIPE, ["train.ckpt_interval_steps=-1"])


@pytest.mark.parametrize("failure", ["full disk", "read-only folder"])
def test_failed_write_keeps_previous_checkpoint(tmp_path, monkeypatch, failure):
    path = str(tmp_path / "train_resume.ckpt")
    checkpoint.atomic_save({"step": 1}, path)
    if failure == "full disk":
        def no_space(obj, f, *a, **k):
            f.write(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(checkpoint.torch, "save", no_space)
    else:
        real_mkstemp = checkpoint.tempfile.mkstemp

        def read_only(*a, **k):
            raise OSError(errno.EROFS, "Read-only file system")

        monkeypatch.setattr(checkpoint.tempfile, "mkstemp", read_only)
        assert real_mkstemp
    with pytest.raises(TextdetError, match=r"could not write checkpoint .*train_resume.ckpt: .*; the previous one "
                                           r"is intact\. Free space or make the folder writable, then resume"):
        checkpoint.atomic_save({"step": 2}, path)
    monkeypatch.undo()
    assert torch.load(path, weights_only=False) == {"step": 1}
    assert os.listdir(tmp_path) == ["train_resume.ckpt"]  # no temp file left behind


@pytest.mark.parametrize("path", ["../secret.jpg", "a/../../b.jpg", "/etc/passwd"])
def test_label_paths_stay_inside_the_data_root(path):
    rec, problems = parse_label_line(f'{path}\t[]', "gt.txt", 7)
    assert rec is None and len(problems) == 1
    assert problems[0].line_no == 7 and "leaves the data folder" in problems[0].message
    rec, problems = parse_label_line('sub/../img.jpg\t[]', "gt.txt", 8)
    assert rec is not None and not problems


def test_huge_eval_image_is_downscaled_with_a_warning():
    resize = DetResize(limit_type="none", keep_ratio=True, divisor=32)  # MindOCR would keep 12000x9000
    assert resize.output_size(640, 480)[:2] == (640, 480)
    with pytest.warns(UserWarning, match="a 9000x12000 image would be resized to 9000x12000; downscaled to fit "
                                         "max_side_limit=4000"):
        assert resize.output_size(9000, 12000)[:2] == (3008, 4000)  # 3000x4000, rounded up to 32
    sample = {"image": np.zeros((90, 120, 3), np.uint8), "polys": [np.array([[12, 9], [60, 9], [60, 45]], float)]}
    with pytest.warns(UserWarning):
        out = DetResize(limit_type="none", divisor=4, max_side_limit=60)(sample, None)
    assert out["image"].shape == (48, 60, 3)  # 45x60, rounded up to 4
    np.testing.assert_allclose(out["polys"][0][1], [60 * 60 / 120, 9 * 48 / 90], rtol=1e-6)


def test_bad_backbone_fails_before_torch_naming_the_line(tmp_path):
    """The name tables readable without torch match the real ones, and a typo fails before `import torch`."""
    assert MODEL_PART_NAMES == {"backbone": tuple(BACKBONES), "neck": tuple(NECKS), "head": tuple(HEADS)}
    user = open(os.path.join(os.path.dirname(__file__), "..", "configs", "mindocr_db_r50_user.yaml")).read()
    bad = tmp_path / "bad.yaml"
    bad.write_text(user.replace("name: det_resnet50", "name: det_resnet5O"))
    line = 1 + user[: user.index("name: det_resnet50")].count("\n")
    code = ("import sys; from textdet.cli import main; rc = main(['train', '-c', sys.argv[1]]); "
            "print('torch imported' if 'torch' in sys.modules else 'torch not imported'); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, str(bad)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout.strip() == "torch not imported"
    assert f"bad.yaml:{line}: model.backbone.name: unknown backbone 'det_resnet5O'; did you mean 'det_resnet50'?" \
        in proc.stderr


def test_mindocr_keys_used_or_listed():
    cfg = load_config(RECIPE, ["system.log_level=logging.WARNING", "eval.dataset_sink_mode=True",
                               "predict.output_save_dir=out", "predict.loader.batch_size=4"])
    assert log_level(cfg.system.log_level) == 30 and log_level("INFO") == 20 and log_level("LOUD") is None
    assert [k for k, _ in cfg.meta.ignored] == ["eval.dataset_sink_mode", "predict.output_save_dir",
                                                "predict.loader"]
    with pytest.raises(ConfigError, match="'system.log_level' must be a logging level"):
        load_config(RECIPE, ["system.log_level=logging.LOUD"])


def _bad_corpus(root) -> dict[str, int]:
    """Odd images and label lines under ``root``; returns {what: label line number}."""
    PIL = pytest.importorskip("PIL.Image")
    img_dir = os.path.join(root, "imgs")
    os.makedirs(img_dir)
    rgb = np.zeros((64, 96, 3), np.uint8)
    rgb[:, :48] = 255  # left half white: shows which way an image was turned
    cv2.imwrite(os.path.join(img_dir, "gray.png"), rgb[..., 0])
    cv2.imwrite(os.path.join(img_dir, "rgba.png"), np.dstack([rgb, np.full((64, 96), 128, np.uint8)]))
    cv2.imwrite(os.path.join(img_dir, "deep.png"), rgb.astype(np.uint16) * 257)
    cv2.imwrite(os.path.join(img_dir, "tiny.png"), rgb[:1, :1])
    cv2.imwrite(os.path.join(img_dir, "good.jpg"), rgb)
    PIL.fromarray(rgb).convert("CMYK").save(os.path.join(img_dir, "cmyk.jpg"))
    exif = PIL.Exif()
    exif[0x0112] = 6  # orientation: rotate 90 degrees clockwise to display
    PIL.fromarray(rgb).save(os.path.join(img_dir, "exif.jpg"), exif=exif)
    open(os.path.join(img_dir, "zero.jpg"), "wb").close()
    open(os.path.join(img_dir, "text.jpg"), "w").write("not an image")
    sq = [[10, 10], [50, 10], [50, 30], [10, 30]]
    lines = {name: f"{name}\t" + json.dumps([{"transcription": "a", "points": sq}])
             for name in ("gray.png", "rgba.png", "deep.png", "tiny.png", "cmyk.jpg", "exif.jpg", "zero.jpg",
                          "text.jpg")}
    bad = {"not a list": '{"points": [[1, 2]]}', "non-numeric": [[0, 0], ["a", 0], [5, 5]],
           "< 3 points": [[0, 0], [5, 5]], "NaN": [[0, 0], [float("nan"), 0], [5, 5]],
           "far outside": [[1e6, 1e6], [1e6 + 10, 1e6], [1e6 + 10, 1e6 + 10], [1e6, 1e6 + 10]],
           "self-intersecting": [[10, 10], [50, 30], [50, 10], [10, 30]],
           "repeated points": [[10, 10], [10, 10], [50, 10], [50, 30], [10, 30], [10, 30]]}
    for what, pts in bad.items():
        ann = pts if isinstance(pts, str) else json.dumps([{"transcription": "a", "points": pts}])
        lines[what] = f"good.jpg\t{ann}"
    rows = list(lines.values())
    text = "\ufeff" + "\r\n".join(rows[:1] + [""] + rows[1:]) + "\r\n"  # BOM, CRLF, a blank line 2
    open(os.path.join(root, "gt.txt"), "w", newline="").write(text)
    return {what: i + 1 + (i > 0) for i, what in enumerate(lines)}


def test_bad_input_corpus_each_problem_once_with_file_and_line(synth_root, tmp_path, capsys):
    root = str(tmp_path / "corpus")
    line_of = _bad_corpus(root)
    opts = tiny_overrides(synth_root, str(tmp_path / "run"), **{"train.dataset.dataset_root": root,
                                                                "train.dataset.data_dir": "imgs",
                                                                "train.dataset.label_file": "gt.txt"})
    assert main(["check-data", "-c", RECIPE, *[a for o in opts for a in ("-o", o)]]) != 0
    out = capsys.readouterr().out
    gt = os.path.join(root, "gt.txt")
    expected = {"not a list": "error: annotations must be a JSON list", "non-numeric": "non-numeric coordinate",
                "< 3 points": "at least 3 points, got 2", "NaN": "NaN or infinite", "far outside":
                "lies entirely outside the 96x64 image", "self-intersecting": "zero-area (self-intersecting)",
                "repeated points": "2 repeated point(s) removed", "zero.jpg": "error: zero.jpg: cannot decode",
                "text.jpg": "error: text.jpg: cannot decode", "tiny.png": "outside the 1x1 image"}
    for what, message in expected.items():
        hits = [ln for ln in out.splitlines() if ln.startswith(f"{gt}:{line_of[what]}: ")]
        assert len(hits) == 1 and message in hits[0], (what, hits)
    assert sum(ln.startswith(gt) for ln in out.splitlines()) == len(expected)  # odd but fine images: silent
    assert "3 error(s) (sample skipped), 7 warning(s)" in out
    cfg = load_config(RECIPE, opts)
    for orient, exif_shape in ((False, (96, 64, 3)), (True, (64, 96, 3))):
        pipe = build_transforms([{"DecodeImage": {"img_mode": "RGB", "ignore_orientation": orient}}])
        ds = DetDataset(root, "imgs", "gt.txt", pipe, ["image"], seed=cfg.system.seed)
        shapes = {r.rel_path: ds.load(i, None)["image"].shape for i, r in enumerate(ds.records)
                  if r.rel_path in ("gray.png", "rgba.png", "deep.png", "cmyk.jpg", "exif.jpg")}
        assert shapes == {**dict.fromkeys(["gray.png", "rgba.png", "deep.png", "cmyk.jpg"], (64, 96, 3)),
                          "exif.jpg": exif_shape}
    exif = ds.load([r.rel_path for r in ds.records].index("exif.jpg"), None)["image"]
    assert exif[:, :40].mean() > 200 and exif[:, 56:].mean() < 50  # as stored: white left half
