"""Config loading: the user's MindOCR file as is, overrides, and errors that name key, line and fix."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conftest import USER_CFG
from textdet.config import dump_yaml, load_config
from textdet.config.components import check_kwargs, lookup
from textdet.errors import ConfigError


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "cfg.yaml"
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_user_config_loads_unchanged():
    cfg = load_config(str(USER_CFG))
    assert cfg.system.mode == 0 and cfg.system.amp_level == "O0" and cfg.system.ckpt_max_keep == 0
    # anchors resolved: common.lr -> scheduler.lr, common.batch_size -> train.loader.batch_size
    assert cfg.scheduler.lr == 0.007 and cfg.scheduler.num_epochs == 1
    assert cfg.train.loader.batch_size == 1 and cfg.train.loader.num_workers == 8
    assert cfg.train.ckpt_save_dir == "./tmp_det" and cfg.eval.ckpt_load_path == "tmp_det/best.ckpt"
    assert cfg.model.backbone == {"name": "det_resnet50", "pretrained": True}
    assert cfg.loss["eps"] == 1e-6 and cfg.loss_scaler.type == "dynamic" and cfg.loss_scaler.scale_window == 1000
    names = [next(iter(t)) if isinstance(t, dict) else t for t in cfg.train.dataset.transform_pipeline]
    assert names[0] == "DecodeImage" and names[-1] == "ToCHWImage" and len(names) == 12
    assert cfg.eval.dataset.output_columns == ["image", "polys", "ignore_tags", "shape_list"]
    assert cfg.meta.where("loss.bce_scale").endswith("mindocr_db_r50_user.yaml:60")


def test_overrides_are_yaml_and_repeatable():
    cfg = load_config(str(USER_CFG), ["train.loader.batch_size=4", "model.backbone.pretrained=false",
                                      "train.dataset.dataset_root=/data/x", "scheduler.lr=1e-3"])
    assert cfg.train.loader.batch_size == 4
    assert cfg.model.backbone["pretrained"] is False
    assert cfg.train.dataset.dataset_root == "/data/x"
    assert cfg.scheduler.lr == pytest.approx(1e-3)
    assert cfg.meta.where("train.loader.batch_size") == "-o train.loader.batch_size"


def test_override_into_transform_list():
    cfg = load_config(str(USER_CFG), ["train.dataset.transform_pipeline.6.RandomCropWithBBox.crop_size=[320, 320]"])
    assert cfg.train.dataset.transform_pipeline[6]["RandomCropWithBBox"]["crop_size"] == [320, 320]


def test_unknown_key_names_line_and_closest(tmp_path):
    path = write(tmp_path, """\
        system:
          seed: 1
        train:
          loader:
            batch_sise: 4
        """)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert "cfg.yaml:5" in msg and "train.loader.batch_sise" in msg and "did you mean 'train.loader.batch_size'" in msg


def test_unknown_section(tmp_path):
    with pytest.raises(ConfigError, match="unknown key 'sytem'.*did you mean 'system'"):
        load_config(write(tmp_path, "sytem:\n  seed: 1\n"))


def test_wrong_type_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match=r"cfg.yaml:2.*'system.seed'.*expected int.*'abc'"):
        load_config(write(tmp_path, "system:\n  seed: abc\n"))
    with pytest.raises(ConfigError, match="expected bool"):
        load_config(write(tmp_path, "system:\n  val_while_train: 3\n"))


def test_float_written_without_dot_is_accepted(tmp_path):
    # PyYAML reads `1e-6` (no dot) as a string; MindOCR users write it that way.
    cfg = load_config(write(tmp_path, "scheduler:\n  lr: 1e-3\n  min_lr: 0\n"))
    assert cfg.scheduler.lr == pytest.approx(1e-3) and cfg.scheduler.min_lr == 0.0


def test_choices_checked(tmp_path):
    with pytest.raises(ConfigError, match="amp_level.*one of"):
        load_config(write(tmp_path, "system:\n  amp_level: O4\n"))


def test_ignored_keys_reported_once(tmp_path):
    cfg = load_config(write(tmp_path, """\
        system:
          device_id: 3
        train:
          max_call_depth: 1200
          dataset:
            use_minddata: True
          loader:
            max_rowsize: 32
        """))
    keys = [k for k, _ in cfg.meta.ignored]
    assert keys == ["system.device_id", "train.max_call_depth", "train.dataset.use_minddata",
                    "train.loader.max_rowsize"]
    assert all(reason for _, reason in cfg.meta.ignored)


def test_bad_override_syntax():
    with pytest.raises(ConfigError, match="expected key.path=value"):
        load_config(str(USER_CFG), ["train.loader.batch_size"])


def test_invalid_yaml_names_line(tmp_path):
    with pytest.raises(ConfigError, match=r"cfg.yaml:3.*not valid YAML"):
        load_config(write(tmp_path, "system:\n  seed: 1\n  mode: [1\n"))


def test_missing_file():
    with pytest.raises(ConfigError, match="config file not found"):
        load_config("/nonexistent/cfg.yaml")


def test_resolved_config_round_trips(tmp_path):
    cfg = load_config(str(USER_CFG), ["train.loader.batch_size=3"])
    out = tmp_path / "train_config.yaml"
    dump_yaml(cfg, str(out))
    again = load_config(str(out))
    assert again.train.loader.batch_size == 3
    assert again.train.dataset.transform_pipeline == cfg.train.dataset.transform_pipeline


def test_component_kwargs_checked_against_constructor():
    class Thing:
        def __init__(self, box_thresh: float = 0.7, max_candidates: int = 1000, use_dilation: bool = False):
            pass

    check_kwargs(Thing, {"box_thresh": 1, "max_candidates": 5}, "postprocess")
    with pytest.raises(ConfigError, match="unknown parameter 'box_tresh'; did you mean 'box_thresh'"):
        check_kwargs(Thing, {"box_tresh": 0.5}, "postprocess")
    with pytest.raises(ConfigError, match="'use_dilation' expects bool"):
        check_kwargs(Thing, {"use_dilation": "yes"}, "postprocess")
    with pytest.raises(ConfigError, match="valid: A, B"):
        lookup({"A": 1, "B": 2}, "C", "loss.name", "loss")


def test_min_epoch_samples_is_for_training_only():
    """An evaluation scores each photo once: the repetition key is refused on the eval split, naming it."""
    assert load_config(None, ["train.dataset.min_epoch_samples=450"]).train.dataset.min_epoch_samples == 450
    with pytest.raises(ConfigError, match=r"eval\.dataset\.min_epoch_samples.*scores each photo once"):
        load_config(None, ["eval.dataset.min_epoch_samples=450"])
    with pytest.raises(ConfigError, match=r"train\.dataset\.min_epoch_samples' must be >= 0"):
        load_config(None, ["train.dataset.min_epoch_samples=-1"])
