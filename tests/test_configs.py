"""The shipped configs/ load unchanged and build MindOCR's networks: the parameter counts are the ones
MindOCR 0.5's own ``build_model`` reports for the same ``model:`` sections (counted once in its venv)."""

from __future__ import annotations

import glob
import os

import pytest
import yaml

from conftest import USER_CFG
from textdet.cli import main
from textdet.commands.ppocr import ARCHITECTURES, ppocr_config
from textdet.config import load_config

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "configs")
# sum(p.size for p in net.trainable_params()) of mindocr.models.build_model(cfg["model"]), MindOCR 0.5.0.
MINDOCR_PARAMS = {
    "db_r18_icdar15.yaml": 12_340_930,
    "db_r50_icdar15.yaml": 25_409_730,
    "dbpp_r50_icdar15.yaml": 25_559_564,
    "db_mobilenetv3_icdar15.yaml": 1_844_136,
    "mindocr_db_r50_user.yaml": 25_409_730,
}


FINE_TUNE_RECIPE = "ppocr_v4_finetune_cpu.yaml"  # no MindOCR counterpart: a converted PP-OCR detector


def test_every_shipped_config_is_covered():
    shipped = sorted(os.path.basename(p) for p in glob.glob(os.path.join(CONFIGS, "*.yaml")))
    assert shipped == sorted([*MINDOCR_PARAMS, FINE_TUNE_RECIPE])
    assert os.path.samefile(USER_CFG, os.path.join(CONFIGS, "mindocr_db_r50_user.yaml"))


@pytest.mark.parametrize("name", sorted(MINDOCR_PARAMS))
def test_config_dry_run_builds_mindocr_network(name, synth_root, tmp_path, capsys, monkeypatch):
    """Each config as shipped, with only the data location, batch size and offline weights overridden."""
    monkeypatch.chdir(tmp_path)
    path = os.path.join(CONFIGS, name)
    overrides = {
        "train.dataset.dataset_root": synth_root, "eval.dataset.dataset_root": synth_root,
        "train.dataset.data_dir": "train/images", "train.dataset.label_file": "train_gt.txt",
        "eval.dataset.data_dir": "val/images", "eval.dataset.label_file": "test_gt.txt",
        "train.loader.batch_size": 2, "train.loader.num_workers": 0, "eval.loader.num_workers": 0,
        "model.backbone.pretrained": "false", "model.pretrained": "false",
    }
    args = ["train", "-c", path, "--dry-run"]
    for key, value in overrides.items():
        args += ["-o", f"{key}={value}"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"Total number of trainable parameters: {MINDOCR_PARAMS[name]}" in out
    assert "dry run: config, data and model are valid" in out


def test_ic15_configs_name_the_ic15_layout():
    """The IC15 recipes read the layout their header comment tells users to build."""
    for name in ("db_r18_icdar15.yaml", "db_r50_icdar15.yaml", "dbpp_r50_icdar15.yaml", "db_mobilenetv3_icdar15.yaml"):
        cfg = load_config(os.path.join(CONFIGS, name))
        assert (cfg.train.dataset.data_dir, cfg.train.dataset.label_file) == ("train/images", "train_det_gt.txt")
        assert (cfg.eval.dataset.data_dir, cfg.eval.dataset.label_file) == ("test/images", "test_det_gt.txt")
        assert cfg.eval.ckpt_load_path == os.path.join(cfg.train.ckpt_save_dir, "best.ckpt")


def test_fine_tune_recipe_is_what_convert_writes(synth_root, tmp_path, monkeypatch, capsys):
    """configs/ppocr_v4_finetune_cpu.yaml is the YAML `textdet convert ppocr` writes for PP-OCRv4 mobile det,
    with paths relative to the working folder, so the figures measured with the written YAML are its own; and
    it names the converted checkpoint it needs."""
    with open(os.path.join(CONFIGS, FINE_TUNE_RECIPE), encoding="utf-8") as f:
        shipped = yaml.safe_load(f)
    v4_v5_network = ARCHITECTURES[0]
    written = ppocr_config("./ppocr_v4/model.ckpt", "ppocr_v4_mobile", v4_v5_network, "PP-OCRv4 mobile det")
    assert shipped == written
    monkeypatch.chdir(tmp_path)  # no ppocr_v4/model.ckpt here: the run must stop, naming it
    args = ["train", "-c", os.path.join(CONFIGS, FINE_TUNE_RECIPE), "--dry-run",
            "-o", f"train.dataset.dataset_root={synth_root}", "-o", f"eval.dataset.dataset_root={synth_root}"]
    assert main(args) != 0
    assert "model.pretrained: ./ppocr_v4/model.ckpt does not exist" in capsys.readouterr().err
