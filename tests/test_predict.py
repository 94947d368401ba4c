"""Detector and ``textdet predict``: a known-answer ONNX "model" that sees white rectangles as text,
and a tiny DBNet whose checkpoint and ONNX export must give the same boxes."""

from __future__ import annotations

import argparse
import glob
import json
import logging
import math
import os
import warnings

import cv2
import numpy as np
import pytest
import torch
from torch import nn

from conftest import RECIPE, save_tiny_model, tiny_overrides
from textdet import cli
from textdet.build.parts import build_detector, build_onnx_detector, preprocess_from_config
from textdet.commands.deploy import run_predict
from textdet.config import load_config
from textdet.data.resize import IMAGENET_MEAN, IMAGENET_STD, DetResize, NormalizeImage
from textdet.errors import TextdetError
from textdet.predict import Detector, Preprocess, find_images

pytest.importorskip("onnxruntime")

H, W = 120, 200
# Hand-computed in test_known_boxes_mapped_back_to_original_pixels: (x0, y0, x1, y1) before rounding
def _grown(x0: int, y0: int, x1: int, y1: int) -> tuple[float, float, float, float]:
    """A map-pixel box grown by D = w h 1.5 / (2 (w + h)) on each side and rounded to integers (MindOCR's pyclipper
    lattice), mapped back (/1.12 in x, *15/16 in y)."""
    w, h = x1 - x0, y1 - y0
    d = w * h * 1.5 / (2 * (w + h))
    x0, y0, x1, y1 = (math.floor(v + 0.5) for v in (x0 - d, y0 - d, x1 + d, y1 + d))
    return x0 / 1.12, y0 * 15 / 16, x1 / 1.12, y1 * 15 / 16


EXPECTED = {"A": _grown(22, 21, 111, 42), "B": _grown(67, 75, 201, 99)}


class Brightness(nn.Module):
    """An "external DB-style model": P = sigmoid(20 (b - 0.5)), b = 0.6 R + 0.3 G + 0.1 B in [0, 1] after undoing
    the ImageNet normalisation.

    White gives P = 0.99995, black 0.00005; P >= 0.3 where b >= 0.5 + ln(3/7) / 20 = 0.4576. Yellow
    (255, 255, 0) is text (b = 0.9) only if the channels arrive in RGB order (as BGR, b = 0.4).
    """

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN, dtype=torch.float32).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor(IMAGENET_STD, dtype=torch.float32).view(1, 3, 1, 1))
        self.register_buffer("weight", torch.tensor([0.6, 0.3, 0.1]).view(1, 3, 1, 1) / 255)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = ((x * self.std + self.mean) * self.weight).sum(1, keepdim=True)
        return torch.sigmoid(20 * (b - 0.5))


def export_external(module: nn.Module, path: str, example: torch.Tensor, output: str = "sigmoid_0.tmp_0") -> str:
    """Export like a PP-OCR det model: input ``x``, a Paddle-style output name, dynamic N/H/W."""
    axes = {0: "n", 2: "h", 3: "w"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), (example,), path, input_names=["x"], output_names=[output],
                          dynamic_axes={"x": axes, output: axes}, opset_version=17, dynamo=False)
    return path


@pytest.fixture(scope="module")
def bright_onnx(tmp_path_factory) -> str:
    return export_external(Brightness(), str(tmp_path_factory.mktemp("onnx") / "bright.onnx"),
                           torch.zeros(1, 3, 64, 64))


def two_rectangles() -> np.ndarray:
    """200 x 120 black RGB image, white A: x 20..99, y 20..39 and B: x 60..179, y 70..93 (inclusive)."""
    img = np.zeros((H, W, 3), np.uint8)
    img[20:40, 20:100] = 255
    img[70:94, 60:180] = 255
    return img


def boxes_by_x(result: dict) -> list[np.ndarray]:
    return sorted(result["polys"], key=lambda p: float(p[:, 0].min()))


def assert_rect(poly, expected: tuple[float, float, float, float], tol: float = 0.5 + 1e-3) -> None:
    """A TL, TR, BR, BL axis-aligned quad within ``tol`` px of (x0, y0, x1, y1) (rounding only)."""
    x0, y0, x1, y1 = expected
    want = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
    got = np.asarray(poly, dtype=np.float64)
    assert got.shape == (4, 2)
    np.testing.assert_allclose(got, want, atol=tol)


def test_known_boxes_mapped_back_to_original_pixels(bright_onnx):
    """No config: MindOCR's infer DetResize (max side 960, keep ratio, divisor 32) makes 200x120 -> 224x128:
    scale_w = 1.12, scale_h = 128/120 = 16/15 (unequal). Map column j samples source u = (j + 0.5) / s - 0.5,
    linearly interpolated, so b >= 0.4576 (P >= 0.3) for x0 - 0.542 <= u <= x1 + 0.542, that is
    s (x0 - 0.042) - 0.5 <= j <= s (x1 + 1.042) - 0.5:

        A: x 1.12 * 19.958 - 0.5 = 21.85 .. 1.12 * 100.042 - 0.5 = 111.55 -> j 22..111; y 20.79..42.21 -> 21..42
           box 89 x 21, D = 89 * 21 * 1.5 / (2 * 110) = 12.74 -> map x 9.26..123.74, y 8.26..54.74 (the
           round-join offset of a rectangle has the rectangle grown by D as its min-area box)
           -> original x 9.26 / 1.12 = 8.27 .. 123.74 / 1.12 = 110.48, y 8.26 * 15/16 = 7.74 .. 51.32
        B: x 66.65..201.15 -> 67..201, y 74.12..99.81 -> 75..99: box 134 x 24, D = 134 * 24 * 1.5 / (2 * 158)
           = 15.27 -> map x 51.73..216.27, y 59.73..114.27 -> original x 46.19 .. 193.1, y 56.0 .. 107.13

    DBPostprocess rounds after dividing, so each corner is within 0.5 px of these values. The boxes grow
    by D / scale_w in x but D / scale_h in y (11.4 and 11.9 px for A): the scales are applied per axis.
    """
    det = Detector.from_onnx(bright_onnx)
    assert det.preprocess.output_size(two_rectangles()) == (128, 224)
    result = det(two_rectangles())
    a, b = boxes_by_x(result)
    assert_rect(a, EXPECTED["A"])
    assert_rect(b, EXPECTED["B"])
    assert all(s > 0.99 for s in result["scores"])
    assert all(p.dtype == np.float32 for p in result["polys"])


def test_inputs_path_array_and_batched_list_agree(bright_onnx, tmp_path):
    """A path (BGR file decoded to RGB), the array and a batch of two give the same boxes."""
    img = two_rectangles()
    img[5:10, 150:190] = (255, 255, 0)  # yellow: text in RGB order only
    path = str(tmp_path / "img.png")
    cv2.imwrite(path, img[..., ::-1])
    det = Detector.from_onnx(bright_onnx, batch_size=2)
    one = det(img)
    assert len(one["polys"]) == 3
    for res in (det(path), *det([img, path])):
        for p, q in zip(boxes_by_x(one), boxes_by_x(res), strict=True):
            np.testing.assert_array_equal(p, q)
    with pytest.raises(TextdetError, match="RGB uint8"):
        det(img.astype(np.float32))


def test_onnx_model_with_fixed_size_is_fed_that_size(tmp_path):
    """An export with a static (1, 3, 64, 96) input: the default resize becomes 64x96 and batches are single."""
    path = str(tmp_path / "static.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Brightness().eval(), (torch.zeros(1, 3, 64, 96),), path, input_names=["x"],
                          output_names=["p"], opset_version=17, dynamo=False)
    det = Detector.from_onnx(path)
    assert det.preprocess.output_size(two_rectangles()) == (64, 96)
    results = det([two_rectangles()] * 3)
    assert [len(r["polys"]) for r in results] == [2, 2, 2]


def test_preprocessing_comes_from_predict_then_eval_pipeline_then_infer_default(synth_root, tmp_path):
    """predict.dataset's BGR decode + bgr_to_rgb normalisation feeds the model exactly what RGB + no swap does."""
    opts = tiny_overrides(synth_root, str(tmp_path))
    eval_pre = preprocess_from_config(load_config(RECIPE, opts))
    assert eval_pre.resize.target_size == (96, 128) and eval_pre.img_mode == "RGB"
    predict_pipe = ("predict.dataset.transform_pipeline=[{DecodeImage: {img_mode: BGR}}, {DetResize: "
                    "{target_size: [64, 96], keep_ratio: false, limit_type: none}}, "
                    "{NormalizeImage: {bgr_to_rgb: true}}, ToCHWImage]")
    pre = preprocess_from_config(load_config(RECIPE, [*opts, predict_pipe]))
    assert pre.img_mode == "BGR" and pre.resize.target_size == (64, 96)
    rgb = Preprocess(DetResize(target_size=(64, 96), keep_ratio=False, limit_type="none"), NormalizeImage())
    img = np.random.default_rng(0).integers(0, 256, (50, 70, 3), dtype=np.uint8)
    (x, shape), (x_rgb, _) = pre(img), rgb(img)
    np.testing.assert_array_equal(x, x_rgb)
    np.testing.assert_allclose(shape, [50, 70, 64 / 50, 96 / 70], rtol=1e-6)
    default = preprocess_from_config(None).resize
    assert (default.limit_type, default.limit_side_len, default.divisor, default.keep_ratio) == ("max", 960, 32, True)


def predict_cli(*argv: str) -> int:
    """``textdet predict ...`` through the real CLI."""
    return cli.main(["predict", *argv])


def test_predict_command_writes_json_txt_and_drawings(bright_onnx, tmp_path, capsys, caplog):
    """Folder in: rects.png (the known answer), broken.jpg (skipped with a warning), notes.txt (ignored)."""
    src = tmp_path / "images"
    src.mkdir()
    cv2.imwrite(str(src / "rects.png"), two_rectangles())
    (src / "broken.jpg").write_bytes(b"not a jpeg")
    (src / "notes.txt").write_text("x")
    out = tmp_path / "out"
    with caplog.at_level(logging.WARNING, logger="textdet"):
        assert predict_cli(str(src), "--onnx", bright_onnx, "--out", str(out), "--draw") == 0
    assert any("broken.jpg" in r.getMessage() for r in caplog.records)
    summary = capsys.readouterr().out
    assert "1 images, 2 boxes" in summary and "img/s" in summary

    preds = json.loads((out / "predictions.json").read_text())
    assert list(preds) == [str(src / "rects.png")]
    entries = sorted(preds[str(src / "rects.png")], key=lambda e: e["points"][0][0])
    assert_rect(entries[0]["points"], EXPECTED["A"])
    assert_rect(entries[1]["points"], EXPECTED["B"])
    assert all(e["score"] > 0.99 for e in entries)

    name, boxes = (out / "det_results.txt").read_text().strip().split("\t")
    assert name == "rects.png"
    boxes = json.loads(boxes)
    assert len(boxes) == 2 and all(isinstance(v, int) for b in boxes for pt in b for v in pt)
    drawn = cv2.imread(str(out / "rects_det.jpg"))
    assert drawn.shape == (H, W, 3)
    x0, y0 = (int(round(v)) for v in entries[1]["points"][0])
    assert drawn[y0, x0 + 20, 1] > 150 and drawn[y0, x0 + 20, 2] < 100  # green outline on black


def test_predict_input_errors(tmp_path, bright_onnx):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TextdetError, match="no images"):
        find_images([str(empty)])
    with pytest.raises(TextdetError, match="input not found"):
        find_images([str(tmp_path / "missing.jpg")])
    with pytest.raises(TextdetError, match="ONNX model not found"):
        Detector.from_onnx(str(tmp_path / "missing.onnx"))
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\x00")
    args = argparse.Namespace(inputs=[str(bad)], onnx=bright_onnx, config=None, opt=[], ckpt=None,
                              out=str(tmp_path / "o"), draw=False, device=None, batch_size=8)
    with pytest.raises(TextdetError, match="could be read"):
        run_predict(args)


# ----------------------------------------------------------------------------- tiny DBNet: checkpoint vs ONNX
@pytest.fixture(scope="module")
def tiny_ckpt_and_onnx(synth_root, tmp_path_factory):
    """Width-8 DBNet, seed 1, eval pipeline resizing to 96x128: a ``{"model": ...}`` checkpoint and its export."""
    from textdet.export import export_onnx

    run = tmp_path_factory.mktemp("tiny")
    opts, _, model, ckpt = save_tiny_model(synth_root, str(run))
    onnx = export_onnx(model, str(run / "model.onnx"), 96, 128)
    return opts, ckpt, onnx


def assert_same_boxes(a_polys, b_polys, a_scores, b_scores) -> None:
    """Same boxes up to ONNX Runtime's ~1e-5 float differences: a random model's map sits near the 0.3
    threshold in places, where such a difference can move a contour by one map pixel."""
    assert len(a_polys) == len(b_polys)
    for p, q in zip(a_polys, b_polys, strict=True):
        np.testing.assert_allclose(np.asarray(p, np.float64), np.asarray(q, np.float64), atol=2.0)
    np.testing.assert_allclose(a_scores, b_scores, atol=2e-3)


def test_checkpoint_and_onnx_detectors_give_the_same_boxes(synth_root, tiny_ckpt_and_onnx, tmp_path):
    opts, ckpt, onnx = tiny_ckpt_and_onnx
    cfg = load_config(RECIPE, opts)
    images = sorted(glob.glob(os.path.join(synth_root, "val", "images", "*")))
    torch_res = build_detector(cfg, ckpt, device="cpu")(images)
    onnx_res = build_onnx_detector(onnx, cfg)(images)
    assert sum(len(r["polys"]) for r in torch_res) > 0  # a random model, but it does draw boxes
    for a, b in zip(torch_res, onnx_res, strict=True):
        assert_same_boxes(a["polys"], b["polys"], a["scores"], b["scores"])

    base = [a for o in opts for a in ("-o", o)]
    val = os.path.join(synth_root, "val", "images")
    assert predict_cli(val, "-c", RECIPE, *base, "--ckpt", ckpt, "--out", str(tmp_path / "t")) == 0
    assert predict_cli(val, "-c", RECIPE, *base, "--onnx", onnx, "--out", str(tmp_path / "o")) == 0
    t = json.loads((tmp_path / "t" / "predictions.json").read_text())
    o = json.loads((tmp_path / "o" / "predictions.json").read_text())
    assert sorted(t) == sorted(o)
    for name in t:
        assert_same_boxes([e["points"] for e in t[name]], [e["points"] for e in o[name]],
                          [e["score"] for e in t[name]], [e["score"] for e in o[name]])
    with pytest.raises(TextdetError, match="checkpoint not found"):
        build_detector(cfg, str(tmp_path / "nope.ckpt"))


def test_predict_labelme_output_round_trips_through_convert(bright_onnx, tmp_path, capsys):
    """The pre-labelling loop: predict --format labelme writes out/rects.json (imagePath relative to it, the
    image size, one unlabelled polygon per box, its score as the description); convert labelme on that folder
    (predictions.json beside it is skipped) gives the predicted boxes under the image's name."""
    from textdet import cli

    src, out = tmp_path / "images", tmp_path / "out"
    src.mkdir()
    cv2.imwrite(str(src / "rects.png"), two_rectangles())
    assert predict_cli(str(src), "--onnx", bright_onnx, "--out", str(out), "--format", "labelme") == 0
    assert "1 labelme files" in capsys.readouterr().out
    doc = json.loads((out / "rects.json").read_text())
    assert (doc["imagePath"], doc["imageHeight"], doc["imageWidth"]) == ("../images/rects.png", H, W)
    predicted = json.loads((out / "predictions.json").read_text())[str(src / "rects.png")]
    assert [(s["label"], s["shape_type"], s["description"]) for s in doc["shapes"]] == [
        ("", "polygon", f"score {e['score']:.3f}") for e in predicted]

    assert cli.main(["convert", "labelme", str(out), "--image-dir", str(src), "--out", str(tmp_path / "l.txt")]) == 0
    name, payload = (tmp_path / "l.txt").read_text().strip().split("\t")
    assert name == "rects.png"
    assert [a["points"] for a in json.loads(payload)] == [e["points"] for e in predicted]
    assert all(a["transcription"] == "" for a in json.loads(payload))


# ----------------------------------------------------------------------------- shape buckets
def test_buckets_give_the_same_boxes_with_the_padding_masked(bright_onnx):
    """200x120 -> 224x128 and its left 140 columns -> 160x128 (max 960, divisor 32), one bucket 256x256: both
    run in one batch of that shape. Normalised zeros (the padding) are the ImageNet mean colour, which the
    Brightness model reads as text: b = 0.6 * 0.485 + 0.3 * 0.456 + 0.1 * 0.406 = 0.4684, P = sigmoid(20 *
    (0.4684 - 0.5)) = 0.347 >= 0.3. Only the masking keeps that padding out of the boxes."""
    images = [two_rectangles(), np.ascontiguousarray(two_rectangles()[:, :140])]
    plain = Detector.from_onnx(bright_onnx, batch_size=2)
    bucketed = Detector.from_onnx(bright_onnx, batch_size=2, shape_buckets=[[256, 256]])
    assert [plain.preprocess.output_size(im) for im in images] == [(128, 224), (128, 160)]
    plain_results, bucketed_results = plain(images), bucketed(images)
    assert dict(plain.input_shapes) == {(128, 224): 1, (128, 160): 1}
    assert dict(bucketed.input_shapes) == {(256, 256): 1}
    for a, b in zip(plain_results, bucketed_results, strict=True):
        assert len(a["polys"]) == len(b["polys"]) == 2
        for p, q in zip(boxes_by_x(a), boxes_by_x(b), strict=True):
            np.testing.assert_array_equal(p, q)
        np.testing.assert_allclose(sorted(a["scores"]), sorted(b["scores"]), rtol=1e-6)

    padded = np.zeros((1, 3, 256, 256), np.float32)
    padded[0, :, :128, :224] = plain.preprocess(images[0])[0]
    unmasked = bucketed.model(padded)
    assert unmasked[0, 0, 200, 200] == pytest.approx(1 / (1 + math.exp(-20 * (0.46842 - 0.5))), abs=1e-3)


def test_predict_command_auto_buckets_cover_five_sizes_with_four_shapes(bright_onnx, tmp_path, capsys):
    """Five widths -> five resized sizes; --shape-buckets auto merges them into 4 shapes (chosen once for the
    folder) and finds the boxes that the plain run finds; a fixed list and a malformed one."""
    src = tmp_path / "images"
    src.mkdir()
    for width in (200, 168, 136, 104, 72):
        cv2.imwrite(str(src / f"w{width}.png"), np.ascontiguousarray(two_rectangles()[:, :width]))
    assert predict_cli(str(src), "--onnx", bright_onnx, "--out", str(tmp_path / "plain")) == 0
    assert "5 images" in capsys.readouterr().out
    assert predict_cli(str(src), "--onnx", bright_onnx, "--out", str(tmp_path / "auto"), "--shape-buckets",
                       "auto") == 0
    assert ", 4 input shapes" in capsys.readouterr().out
    assert predict_cli(str(src), "--onnx", bright_onnx, "--out", str(tmp_path / "one"), "--shape-buckets",
                       "128x256") == 0
    assert ", 1 input shape;" in capsys.readouterr().out
    plain = json.loads((tmp_path / "plain" / "predictions.json").read_text())
    for name in ("auto", "one"):
        assert json.loads((tmp_path / name / "predictions.json").read_text()) == plain
    assert predict_cli(str(src), "--onnx", bright_onnx, "--out", str(tmp_path / "bad"), "--shape-buckets",
                       "128,256") != 0
    assert "--shape-buckets: expected auto or HxW[,HxW...] such as 736x1280" in capsys.readouterr().err


def test_buckets_too_small_or_on_a_fixed_size_model_are_refused(bright_onnx, tmp_path):
    from textdet.errors import ConfigError, DataError

    with pytest.raises(DataError, match=r"resized to 128x224 fits none of the buckets \[\[64, 64\]\]"):
        Detector.from_onnx(bright_onnx, shape_buckets=[[64, 64]])(two_rectangles())
    with pytest.raises(ConfigError, match=r"Detector shape_buckets: .*must be auto or a list"):
        Detector.from_onnx(bright_onnx, shape_buckets=[[64]])
    path = str(tmp_path / "static.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Brightness().eval(), (torch.zeros(1, 3, 64, 96),), path, input_names=["x"],
                          output_names=["p"], opset_version=17, dynamo=False)
    with pytest.raises(ConfigError, match="takes one input size, 64x96: shape buckets do not apply"):
        Detector.from_onnx(path, shape_buckets="auto")
