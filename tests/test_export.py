"""``textdet export`` and the ONNX Runtime wrapper: a tiny DBNet exported, then run at two input sizes
with the same probability maps (1e-4) and boxes as PyTorch; evaluation through ONNX equals the checkpoint's."""

from __future__ import annotations

import argparse
import glob
import os
import warnings

import numpy as np
import pytest
import torch

from conftest import RECIPE, save_tiny_model, tiny_overrides
from textdet.build import parts
from textdet.build.parts import build_detector, evaluate_checkpoint, preprocess_from_config
from textdet.config import load_config
from textdet.data.resize import DetResize
from textdet.errors import TextdetError
from textdet.predict import Preprocess, read_image

pytest.importorskip("onnxruntime")
from textdet import cli  # noqa: E402
from textdet.build.parts import evaluate_onnx_model  # noqa: E402
from textdet.commands.deploy import run_export  # noqa: E402
from textdet.export import compare_onnx  # noqa: E402
from textdet.runtime.onnx_model import OnnxModel  # noqa: E402


@pytest.fixture(scope="module")
def exported(synth_root, tmp_path_factory):
    """Width-8 DBNet (neck 32 channels), random init with seed 1, saved as ``{"model": state_dict}`` and
    exported with ``textdet export`` (traced at the eval pipeline's 96x128)."""
    run = tmp_path_factory.mktemp("export")
    opts, cfg, model, ckpt = save_tiny_model(synth_root, str(run))
    argv = ["export", "-c", RECIPE, *[a for o in opts for a in ("-o", o)], "--ckpt", ckpt,
            "--out", str(run / "model.onnx")]
    assert run_export(cli.build_parser().parse_args(argv)) == 0
    return cfg, model, ckpt, str(run / "model.onnx")


def test_export_prints_path_size_and_check(synth_root, tmp_path, capsys):
    cfg = load_config(RECIPE, tiny_overrides(synth_root, str(tmp_path)))
    torch.manual_seed(1)
    model = parts.build_model_from_config(cfg, pretrained_backbone=False)
    ckpt = str(tmp_path / "m.ckpt")
    torch.save({"model": model.state_dict()}, ckpt)
    args = argparse.Namespace(config=RECIPE, opt=tiny_overrides(synth_root, str(tmp_path)), ckpt=ckpt,
                              out=str(tmp_path / "m.onnx"), height=64, width=96, opset=17, precision="fp32")
    assert run_export(args) == 0
    out = capsys.readouterr().out
    assert str(tmp_path / "m.onnx") in out and " MB" in out
    assert "64x96 synthetic image" in out and "max |P_onnx - P_torch| = " in out and "boxes identical" in out
    assert not os.path.exists(tmp_path / ".tmp_m.onnx")
    with pytest.raises(TextdetError, match="multiple of 32"):
        run_export(argparse.Namespace(**{**vars(args), "height": 100}))
    with pytest.raises(TextdetError, match="checkpoint not found"):
        run_export(argparse.Namespace(**{**vars(args), "ckpt": str(tmp_path / "none.ckpt")}))


def test_onnx_interface_is_x_to_binary_with_dynamic_axes(exported):
    _, _, _, onnx = exported
    m = OnnxModel(onnx, device="cpu")
    assert (m.input_name, m.output_name) == ("x", "binary")
    assert m.fixed_batch is None and m.fixed_hw is None
    assert m.providers == ["CPUExecutionProvider"]


@pytest.mark.parametrize("hw", [(96, 128), (160, 64)])
def test_onnx_runtime_equals_pytorch_at_two_sizes(exported, synth_root, hw):
    """Same image resized to 96x128 (the traced size) and 160x64: P within 1e-4, boxes identical."""
    cfg, model, _, onnx = exported
    pre = preprocess_from_config(cfg)
    pre = Preprocess(DetResize(target_size=hw, keep_ratio=False, limit_type="none"), pre.normalize, pre.img_mode)
    post = parts.build_postprocess_from_config(cfg)
    image = read_image(sorted(glob.glob(os.path.join(synth_root, "val", "images", "*")))[0])
    check = compare_onnx(model, onnx, pre, post, image)
    assert check["max_abs_diff"] < 1e-4
    assert len(check["torch"]["polys"]) > 0  # random weights, but there are boxes to compare
    assert len(check["torch"]["polys"]) == len(check["onnx"]["polys"])
    for p, q in zip(check["torch"]["polys"], check["onnx"]["polys"], strict=True):
        np.testing.assert_array_equal(p, q)


def test_onnx_batch_of_two_equals_single_runs(exported):
    _, model, _, onnx = exported
    x = torch.randn(2, 3, 64, 96, generator=torch.Generator().manual_seed(0))
    m = OnnxModel(onnx, device="cpu")
    both = m(x)["binary"]
    assert both.shape == (2, 1, 64, 96)
    torch.testing.assert_close(both[1:], m(x[1:])["binary"], atol=1e-5, rtol=0)
    with torch.no_grad():
        torch.testing.assert_close(both, model(x)["binary"], atol=1e-4, rtol=0)


def test_eval_through_onnx_equals_checkpoint(exported):
    cfg, _, ckpt, onnx = exported
    ref = evaluate_checkpoint(cfg, ckpt=ckpt, device="cpu")
    got = evaluate_onnx_model(cfg, onnx, device="cpu", sweep=True)
    assert set(ref) <= set(got) and got["onnx"] == os.path.abspath(onnx)
    fixed = next(r for r in got["sweep"]["grid"] if (r["binary_thresh"], r["box_thresh"]) == (0.3, 0.4))
    assert fixed["f-score"] == got["f-score"]  # the sweep saw the same maps as the fixed-threshold run
    assert got["images"] == ref["images"] == 4
    for k in ("recall", "precision", "f-score"):
        assert got[k] == pytest.approx(ref[k])


def test_onnx_errors_name_the_problem(tmp_path):
    with pytest.raises(TextdetError, match="not found"):
        OnnxModel(str(tmp_path / "none.onnx"))
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    with pytest.raises(TextdetError, match="cannot load ONNX model"):
        OnnxModel(str(junk))

    class Flat(torch.nn.Module):
        def forward(self, x):
            return torch.sigmoid(x)

    rank3 = str(tmp_path / "rank3.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Flat(), (torch.zeros(1, 32, 32),), rank3, input_names=["x"], dynamo=False)
    with pytest.raises(TextdetError, match=r"\(N, 3, H, W\)"):
        OnnxModel(rank3)
    with pytest.raises(TextdetError, match="cuda"):
        OnnxModel(rank3, device="tpu")


def test_thresholds_a_checkpoint_carries_reach_predict_and_export(synth_root, tmp_path, capsys):
    """A checkpoint with the pair its run chose (0.55 / 0.65) gives it to the Detector and to export's
    advice; -o sets one of them back; a pair that is not a probability is refused, naming the file."""
    opts, _, model, plain = save_tiny_model(synth_root, str(tmp_path))
    ckpt = str(tmp_path / "chosen.ckpt")
    chosen = {"binary_thresh": 0.55, "box_thresh": 0.65}
    torch.save({"model": model.state_dict(), "postprocess": chosen}, ckpt)
    detector = build_detector(load_config(RECIPE, opts), ckpt)
    assert (detector.postprocess.binary_thresh, detector.postprocess.box_thresh) == (0.55, 0.65)
    assert "binary_thresh 0.55, box_thresh 0.65" in detector.thresholds_note
    overridden = build_detector(load_config(RECIPE, [*opts, "postprocess.box_thresh=0.8"]), ckpt)
    assert (overridden.postprocess.binary_thresh, overridden.postprocess.box_thresh) == (0.55, 0.8)
    assert build_detector(load_config(RECIPE, opts), plain).thresholds_note == ""
    args = argparse.Namespace(config=RECIPE, opt=opts, ckpt=ckpt, out=str(tmp_path / "m.onnx"), height=64,
                              width=96, opset=17, precision="fp32")
    assert run_export(args) == 0
    assert ("the ONNX file holds no thresholds: run predict --onnx and eval --onnx with "
            "-o postprocess.binary_thresh=0.55 -o postprocess.box_thresh=0.65") in capsys.readouterr().out
    torch.save({"model": model.state_dict(), "postprocess": {"binary_thresh": 6}}, ckpt)
    with pytest.raises(TextdetError, match=r"chosen.ckpt: its postprocess.binary_thresh is 6, not a number"):
        build_detector(load_config(RECIPE, opts), ckpt)
