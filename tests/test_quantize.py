"""int8 export (quantize.py, `textdet export --precision int8`): the transposed convolutions quantized along
their output channels, calibration photos chosen from the split, and the accuracy gate that refuses a model
whose f-score falls more than --max-drop below fp32's, leaving nothing at --out."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest
import torch
from torch import nn

from conftest import RECIPE, save_tiny_model
from textdet.build.parts import calibration_photos
from textdet.cli import main
from textdet.config import load_config

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from textdet.export import export_onnx  # noqa: E402
from textdet.quantize import CalibrationPhotos, quantize_int8  # noqa: E402


class Upsampler(nn.Module):
    """A DB head's shape: a convolution, then a transposed convolution whose output channels have weights of
    very different sizes (channel 0 about 100 times channel 1), then the sigmoid."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.up = nn.ConvTranspose2d(4, 2, 2, stride=2)
        with torch.no_grad():
            self.up.weight[:, 1] *= 0.01

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"binary": torch.sigmoid(self.up(torch.relu(self.conv(x))))}


def test_transposed_convolutions_are_quantized_along_their_output_channels(tmp_path):
    """Per-channel scales along axis 0 of a ConvTranspose's weights are per INPUT channel: the small output
    channel 1 would share a scale with the large channel 0 and round to almost nothing. Along axis 1 each
    output channel has its own scale, so channel 1's map stays within a few hundredths of fp32's."""
    fp32 = str(tmp_path / "fp32.onnx")
    export_onnx(Upsampler(), fp32, 32, 32)
    rng = np.random.default_rng(0)
    paths = []
    for index in range(9):
        paths.append(str(tmp_path / f"photo{index}.png"))
        cv2.imwrite(paths[-1], rng.integers(0, 256, (32, 32, 3), dtype=np.uint8))

    def to_input(rgb: np.ndarray) -> tuple[np.ndarray, None]:
        return np.ascontiguousarray(rgb.transpose(2, 0, 1), dtype=np.float32) / 255, None

    int8 = str(tmp_path / "int8.onnx")
    quantize_int8(fp32, int8, CalibrationPhotos(paths, to_input))
    x = to_input(cv2.imread(paths[0])[..., ::-1])[0][None]
    maps = [ort.InferenceSession(path).run(None, {"x": x})[0] for path in (int8, fp32)]
    error = np.abs(maps[0] - maps[1])
    assert error[:, 1].max() < 0.03
    axes = [node for node in onnx.load(int8).graph.node if node.op_type == "DequantizeLinear"
            and any(a.name == "axis" and a.i == 1 for a in node.attribute)]
    assert axes, "the ConvTranspose weights' DequantizeLinear should carry axis 1"


def test_calibration_photos_are_evenly_spaced_over_the_split(synth_root):
    """12 training images, 5 asked for: every 12 / 5 = 2.4th: images 0, 2, 4, 7 and 9 of the label file."""
    cfg = load_config(RECIPE, [f"train.dataset.dataset_root={synth_root}"])
    paths, source = calibration_photos(cfg, None, limit=5)
    with open(os.path.join(synth_root, "train_gt.txt"), encoding="utf-8") as f:
        names = [line.split("\t")[0] for line in f if line.strip()]
    assert [os.path.basename(p) for p in paths] == [os.path.basename(names[i]) for i in (0, 2, 4, 7, 9)]
    assert source == "5 of the 12 in the training split"
    folder, source = calibration_photos(cfg, os.path.join(synth_root, "val", "images"), limit=64)
    assert len(folder) == 4 and "val" in source


def test_int8_export_keeps_a_model_within_the_drop_and_refuses_one_beyond(synth_root, tmp_path, capsys):
    """A tiny random model: with --max-drop 1 the int8 file is written, smaller than fp32's, and eval --onnx
    takes it; with a negative --max-drop (no model can pass) it is refused with exit 2 and --out stays absent."""
    opts, _, _, ckpt = save_tiny_model(synth_root, str(tmp_path))
    base = ["export", "-c", RECIPE, *sum((["-o", o] for o in opts), []), "--ckpt", ckpt, "--precision", "int8",
            "--calib-photos", "6"]
    kept = tmp_path / "kept.onnx"
    assert main([*base, "--out", str(kept), "--max-drop", "1"]) == 0
    out = capsys.readouterr().out
    assert "calibrating int8 on 6 of the 12 in the training split" in out
    assert "export: fp32: recall" in out and "export: int8: recall" in out and "of fp32's size" in out
    assert kept.is_file() and onnx.load(str(kept)).graph.node[0].op_type in ("QuantizeLinear", "DequantizeLinear")
    assert main(["eval", "-c", RECIPE, *sum((["-o", o] for o in opts), []), "--onnx", str(kept)]) == 0
    refused = tmp_path / "refused.onnx"
    assert main([*base, "--out", str(refused), "--max-drop", "-1"]) == 2
    err = capsys.readouterr().err
    assert "> --max-drop -1: not written to" in err and not refused.exists()
