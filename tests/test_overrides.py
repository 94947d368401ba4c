"""-o overrides into a transform pipeline: by name (stays right when a YAML inserts a transform) or by
position (refused when the entry holds another transform, never set inside it in silence)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conftest import USER_CFG
from textdet.config import load_config
from textdet.data.pipeline import build_transform
from textdet.errors import ConfigError

# NormalizeImage inserted before DetResize: DetResize is entry 3, not 2 as in MindOCR's eval pipelines.
INSERTED = """\
    eval:
      dataset:
        transform_pipeline:
          - DecodeImage:
              img_mode: RGB
          - DetLabelEncode:
          - NormalizeImage:
              mean: imagenet
          - DetResize:
              target_size: [640, 640]
              keep_ratio: False
          - ToCHWImage:
    """
PIPELINE = "eval.dataset.transform_pipeline"
PRESENT = "0 DecodeImage, 1 DetLabelEncode, 2 NormalizeImage, 3 DetResize, 4 ToCHWImage"


@pytest.fixture
def inserted(tmp_path: Path) -> str:
    path = tmp_path / "inserted.yaml"
    path.write_text(textwrap.dedent(INSERTED))
    return str(path)


def test_name_finds_the_transform_after_an_inserted_one(inserted):
    """DetResize by name is entry 3 here: it gets 320 x 320, NormalizeImage (entry 2) is left as written."""
    cfg = load_config(inserted, ["eval.dataset.transform_pipeline.DetResize.target_size=[320,320]"])
    pipeline = cfg.eval.dataset.transform_pipeline
    assert pipeline[3] == {"DetResize": {"target_size": [320, 320], "keep_ratio": False}}
    assert pipeline[2] == {"NormalizeImage": {"mean": "imagenet"}}
    assert build_transform(pipeline[3], 3).target_size == (320, 320)


def test_position_holding_another_transform_is_refused(inserted):
    """Entry 2 is NormalizeImage: the value meant for DetResize is not set inside it."""
    key = "eval.dataset.transform_pipeline.2.DetResize.target_size"
    with pytest.raises(ConfigError) as e:
        load_config(inserted, [f"{key}=[320,320]"])
    msg = str(e.value)
    assert msg.startswith(f"-o {key}: entry 2 of {PIPELINE} is NormalizeImage, not DetResize")
    assert PRESENT in msg
    assert "address it by name: -o eval.dataset.transform_pipeline.DetResize.target_size=" in msg


def test_position_on_the_right_transform_still_works(inserted):
    cfg = load_config(inserted, ["eval.dataset.transform_pipeline.3.DetResize.target_size=[320,320]"])
    assert cfg.eval.dataset.transform_pipeline[3]["DetResize"]["target_size"] == [320, 320]


def test_unknown_name_lists_the_transforms_there(inserted):
    key = "eval.dataset.transform_pipeline.DetResise.target_size"
    with pytest.raises(ConfigError) as e:
        load_config(inserted, [f"{key}=[320,320]"])
    msg = str(e.value)
    assert msg.startswith(f"-o {key}: no transform named 'DetResise' in eval.dataset.transform_pipeline")
    assert "did you mean 'DetResize'?" in msg
    assert f"(transforms there: {PRESENT})" in msg


def test_position_out_of_range_lists_the_transforms_there(inserted):
    key = "eval.dataset.transform_pipeline.7.DetResize.target_size"
    with pytest.raises(ConfigError) as e:
        load_config(inserted, [f"{key}=[320,320]"])
    msg = str(e.value)
    assert msg.startswith(f"-o {key}: {PIPELINE} has no entry 7 (transforms there: {PRESENT})")
    assert "address it by name" in msg


def test_absent_pipeline_has_no_transform_to_set():
    """The built-in defaults have no eval pipeline: a name there is refused, not made into a mapping."""
    with pytest.raises(ConfigError, match=r"no transform named 'DetResize'.*\(transforms there: none\)"):
        load_config(None, ["eval.dataset.transform_pipeline.DetResize.target_size=[320,320]"])


def test_name_sets_the_first_of_two():
    """Two RandomRotate entries (positions 1 and 2): the name reaches position 1, position 2 its own."""
    pipeline = "[DecodeImage, {RandomRotate: {degrees: 5}}, {RandomRotate: {degrees: 5}}]"
    cfg = load_config(None, [f"train.dataset.transform_pipeline={pipeline}",
                             "train.dataset.transform_pipeline.RandomRotate.degrees=10",
                             "train.dataset.transform_pipeline.2.RandomRotate.degrees=20"])
    degrees = [entry["RandomRotate"]["degrees"] for entry in cfg.train.dataset.transform_pipeline[1:]]
    assert degrees == [10, 20]


def test_name_reaches_a_transform_written_without_parameters():
    """``- ToCHWImage`` (a bare name) becomes ``{ToCHWImage: {...}}`` when a parameter is set by name."""
    cfg = load_config(None, ["predict.dataset.transform_pipeline=[DecodeImage, ToCHWImage]",
                             "predict.dataset.transform_pipeline.ToCHWImage.x=1"])
    assert cfg.predict.dataset["transform_pipeline"] == ["DecodeImage", {"ToCHWImage": {"x": 1}}]


def test_where_names_the_override_as_written():
    """Error messages locate a named override by either spelling; other keys keep their YAML line."""
    named = "eval.dataset.transform_pipeline.DetResize.target_size"
    cfg = load_config(str(USER_CFG), [f"{named}=[320,320]"])
    assert cfg.eval.dataset.transform_pipeline[2]["DetResize"]["target_size"] == [320, 320]
    assert cfg.meta.where(named) == f"-o {named}"
    assert cfg.meta.where("eval.dataset.transform_pipeline.2.DetResize.target_size") == f"-o {named}"
    # DetResize's limit_type is on line 158 of the user's file, entry 2 of its eval pipeline
    assert cfg.meta.where(f"{PIPELINE}.DetResize.limit_type").endswith("_user.yaml:158")
    assert cfg.meta.where(f"{PIPELINE}.2.DetResize.limit_type").endswith("_user.yaml:158")


def test_where_finds_a_positional_override_by_name():
    positional = "eval.dataset.transform_pipeline.2.DetResize.target_size"
    cfg = load_config(str(USER_CFG), [f"{positional}=[320,320]"])
    assert cfg.meta.where("eval.dataset.transform_pipeline.DetResize.target_size") == f"-o {positional}"


def test_list_that_is_not_a_pipeline_takes_positions_only(tmp_path):
    path = tmp_path / "labels.yaml"
    path.write_text("train:\n  dataset:\n    label_file: [a.txt, b.txt]\n")
    cfg = load_config(str(path), ["train.dataset.label_file.1=c.txt"])
    assert cfg.train.dataset.label_file == ["a.txt", "c.txt"]
    with pytest.raises(ConfigError, match=r"label_file is a list: address its items by position \(0 to 1\)"):
        load_config(str(path), ["train.dataset.label_file.first=c.txt"])
    with pytest.raises(ConfigError, match=r"label_file has no item 2 \(positions: 0 to 1\)"):
        load_config(str(path), ["train.dataset.label_file.2=c.txt"])
