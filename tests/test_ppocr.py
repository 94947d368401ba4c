"""PP-OCR detectors: PPLCNetV3 + RSEFPN, the ONNX importer (``textdet convert ppocr``), DetResize rounding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from textdet.cli import main
from textdet.commands.ppocr import PPOCR_V4_DET, load_onnx_layers, read_onnx_layers
from textdet.config import load_config
from textdet.data.resize import DetResize
from textdet.engine.build import build_model_from_config
from textdet.errors import TextdetError
from textdet.export import export_onnx
from textdet.models import build_model
from textdet.models.fpn import RSELayer
from textdet.models.lcnetv3 import LearnableAffine, PPLCNetV3

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def test_pplcnetv3_widths_and_strides() -> None:
    """Scale 0.75 as PP-OCRv4 mobile det: projections int(c * 0.75) of (16, 24, 56, 480) at strides 4..32."""
    net = PPLCNetV3(scale=0.75).eval()
    feats = net(torch.zeros(1, 3, 64, 96))
    assert net.out_channels == [12, 18, 42, 360]
    assert [tuple(f.shape[1:]) for f in feats] == [(12, 16, 24), (18, 8, 12), (42, 4, 6), (360, 2, 3)]


def test_rse_gate_is_paddle_hardsigmoid_slope_0_2() -> None:
    """Zero SE convs but conv2's bias 1: gate = clamp(0.2 * 1 + 0.5) = 0.7 (slope 1/6 would give 0.667)."""
    layer = RSELayer(4, 4, 1)
    with torch.no_grad():
        layer.in_conv.weight.copy_(torch.eye(4).view(4, 4, 1, 1))
        for conv in (layer.conv1, layer.conv2):
            conv.weight.zero_()
            conv.bias.zero_()
        layer.conv2.bias.fill_(1.0)
    x = torch.arange(32, dtype=torch.float32).view(1, 4, 2, 4)
    torch.testing.assert_close(layer(x), x * 1.7)


def test_detresize_nearest_rounding_as_paddleocr() -> None:
    """limit 960 'max': 700x1000 -> scale 0.96 -> 672x960; 100x150 (no scaling) -> 96x160 (up: 128x160)."""
    nearest = DetResize(limit_type="max", limit_side_len=960, rounding="nearest")
    up = DetResize(limit_type="max", limit_side_len=960)
    assert nearest.output_size(700, 1000)[:2] == (672, 960)
    assert nearest.output_size(100, 150)[:2] == (96, 160)
    assert up.output_size(100, 150)[:2] == (128, 160)
    with pytest.raises(ValueError, match="rounding"):
        DetResize(rounding="down")


@pytest.mark.slow
def test_convert_ppocr_roundtrip(tmp_path) -> None:
    """A random PP-OCRv4-shaped model exported to ONNX (BatchNorms folded by the exporter) and imported back
    through ``textdet convert ppocr``: the written YAML + checkpoint give onnxruntime's map to 1e-5."""
    torch.manual_seed(0)
    src = build_model(**PPOCR_V4_DET).eval()
    with torch.no_grad():  # non-trivial BatchNorm statistics and affines, so that a wrong match would show
        for m in src.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
            elif isinstance(m, LearnableAffine):
                m.scale.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    onnx_path = export_onnx(src, str(tmp_path / "det.onnx"), height=64, width=64)
    assert main(["convert", "ppocr", onnx_path, "--out", str(tmp_path / "out"), "--name", "v4"]) == 0

    cfg = load_config(str(tmp_path / "out" / "v4.yaml"))
    assert cfg.model.backbone["name"] == "PPLCNetV3" and cfg.model.neck["name"] == "RSEFPN"
    assert cfg.model.pretrained == cfg.eval.ckpt_load_path == str(tmp_path / "out" / "model.ckpt")
    model = build_model_from_config(cfg).eval()  # loads model.pretrained
    x = np.random.default_rng(0).normal(size=(1, 3, 96, 128)).astype(np.float32)
    ref = ort.InferenceSession(onnx_path).run(None, {"x": x})[0]
    with torch.no_grad():
        got = model(torch.from_numpy(x))["binary"].numpy()
    np.testing.assert_allclose(got, ref, atol=1e-5)
    # the missing threshold branch starts as a copy of the probability branch
    torch.testing.assert_close(model.head.thresh[0].weight, model.head.segm[0].weight)

    other = build_model({"name": "PPLCNetV3", "scale": 0.5}, {"name": "RSEFPN", "out_channels": 96},
                        {"name": "DBHead"})
    with pytest.raises(TextdetError, match=r"layer \d+ .* does not fit textdet's backbone\.blocks2"):
        load_onnx_layers(other, read_onnx_layers(onnx_path), onnx_path)
