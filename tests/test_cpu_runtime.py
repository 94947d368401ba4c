"""``system.infer_runtime``: on a CPU in fp32, evaluation and prediction run the model traced into ONNX Runtime
(``auto``), with PyTorch's boxes; everything else stays in PyTorch; a bad value or a model that will not
trace says what to do."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from conftest import RECIPE, save_tiny_model
from textdet.build import parts
from textdet.build.sections import validate
from textdet.config import load_config
from textdet.errors import ConfigError, TextdetError
from textdet.runtime.amp import amp_settings

pytest.importorskip("onnxruntime")
from textdet.runtime.onnx_model import OnnxModel  # noqa: E402

FP32 = amp_settings("O0", "cpu")
BF16 = amp_settings("O2", "cpu", "bf16")
# low thresholds, so that the random tiny model's maps give boxes to compare
LOW_THRESHOLDS = ["postprocess.binary_thresh=0.5", "postprocess.box_thresh=0.3"]


def test_auto_runs_onnxruntime_on_a_cpu_in_fp32_only(synth_root, tmp_path, monkeypatch):
    opts, _, _, _ = save_tiny_model(synth_root, str(tmp_path))
    cfg = load_config(RECIPE, opts)
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert cfg.system.infer_runtime == "auto"
    assert parts.inference_runtime(cfg, cpu, FP32) == "onnxruntime"
    assert parts.inference_runtime(cfg, cpu, BF16) == "torch"
    assert parts.inference_runtime(cfg, cuda, FP32) == "torch"
    cfg_torch = load_config(RECIPE, [*opts, "system.infer_runtime=torch"])
    assert parts.inference_runtime(cfg_torch, cpu, FP32) == "torch"
    monkeypatch.setattr(parts, "onnxruntime_installed", lambda: False)
    assert parts.inference_runtime(cfg, cpu, FP32) == "torch"


def test_eval_in_onnxruntime_gives_pytorchs_boxes_and_scores(synth_root, tmp_path):
    opts, _, _, ckpt = save_tiny_model(synth_root, str(tmp_path))
    results = {}
    for runtime in ("torch", "auto"):
        cfg = load_config(RECIPE, [*opts, *LOW_THRESHOLDS, f"system.infer_runtime={runtime}"])
        results[runtime] = parts.evaluate_checkpoint(cfg, ckpt=ckpt, device="cpu", per_image=True)
    torch_run, ort_run = results["torch"], results["auto"]
    assert (torch_run["runtime"], ort_run["runtime"]) == ("torch", "onnxruntime")
    boxes = 0
    for mine, theirs in zip(ort_run["per_image"], torch_run["per_image"], strict=True):
        assert len(mine["polys"]) == len(theirs["polys"])
        for a, b in zip(mine["polys"], theirs["polys"], strict=True):
            np.testing.assert_allclose(a, b, atol=1)  # the same boxes, to a pixel of fp32 rounding
            boxes += 1
    assert boxes > 0
    for key in ("recall", "precision", "f-score"):
        assert ort_run[key] == torch_run[key]


def test_the_traced_model_gives_pytorchs_map_at_any_size(synth_root, tmp_path):
    _, _, model, _ = save_tiny_model(synth_root, str(tmp_path))
    traced = OnnxModel.from_torch(model)
    for height, width in ((96, 128), (160, 64)):
        images = torch.randn(2, 3, height, width, generator=torch.Generator().manual_seed(height))
        with torch.no_grad():
            expected = model(images)["binary"]
        got = traced(images)["binary"]
        assert got.shape == expected.shape == (2, 1, height, width)
        assert torch.allclose(got, expected, atol=1e-4)


def test_an_unknown_runtime_names_the_key(synth_root, tmp_path):
    opts, _, _, _ = save_tiny_model(synth_root, str(tmp_path))
    cfg = load_config(RECIPE, [*opts, "system.infer_runtime=tensorrt"])
    expected = r"system\.infer_runtime must be one of auto, torch, onnxruntime, got 'tensorrt'"
    with pytest.raises(ConfigError, match=expected):
        validate(cfg)


class Untraceable(nn.Module):
    def forward(self, x: torch.Tensor) -> dict:
        return {"binary": torch.special.bessel_j0(x[:, :1])}  # an operator ONNX has no equivalent for


def test_a_model_that_will_not_trace_says_how_to_run_it_in_pytorch():
    with pytest.raises(TextdetError, match="bessel_j0.*set system.infer_runtime: torch") as error:
        OnnxModel.from_torch(Untraceable())
    assert "\n" not in str(error.value)  # one line, not the exporter's graph dump
