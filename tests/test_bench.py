"""``textdet bench``: each part's --json output (stable keys, sane values) on a tiny config, and the
--maps input. Behaviour only: no timing is asserted beyond "positive and finite"."""

from __future__ import annotations

import argparse
import json
import math
import os

import numpy as np
import pytest

from conftest import RECIPE, save_tiny_model, tiny_overrides
from textdet import cli
from textdet.commands import bench, bench_infer
from textdet.errors import TextdetError


def bench_args(part: str, opts: list[str], *extra: str) -> argparse.Namespace:
    argv = ["bench", part, "-c", RECIPE]
    for o in opts:
        argv += ["-o", o]
    return cli.build_parser().parse_args(argv + list(extra))


def run_json(capsys, part: str, opts: list[str], *extra: str) -> dict:
    assert bench.run(bench_args(part, opts, "--json", *extra)) == 0
    return json.loads(capsys.readouterr().out)  # the whole of stdout is one JSON object


def positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


@pytest.fixture()
def opts(synth_root, tmp_path) -> list[str]:
    return tiny_overrides(synth_root, str(tmp_path / "run"))


@pytest.mark.parametrize("cache", [True, False])
def test_data_keys(capsys, synth_root, tmp_path, cache):
    """One process and one real worker; per-transform ms in pipeline order; on a CPU the workers normalise."""
    opts = tiny_overrides(synth_root, str(tmp_path / "run"), **{"train.loader.num_workers": 1,
                                                                 "train.dataset.cache_images": cache})
    r = run_json(capsys, "data", opts, "--n", "4")
    assert positive(r["samples_per_s"]) and positive(r["samples_per_s_first_epoch"])
    assert positive(r["samples_per_s_workers"]) and positive(r["samples_per_s_workers_targets_on_device"])
    assert positive(r["targets_on_device_ms_per_batch"])
    assert r["num_workers"] == 1 and r["num_workers_config"] == 1 and r["n"] == 4 and r["skipped"] == 0
    names = list(r["ms_per_transform"])
    assert names[:3] == ["DecodeImage", "DetLabelEncode", "FusedGeometry"] and "BorderMap" in names
    assert all(v >= 0 for v in r["ms_per_transform"].values())
    assert r["image_cache"] is cache and r["device_normalize"] is False
    # 64x64 crop: float32 CHW image 49152 B, uint8 binary_map / mask / thresh_mask 3 x 4096, float32 thresh_map 16384
    assert r["mb_per_sample_shipped"] == pytest.approx(0.0778, abs=1e-4)


def test_model_keys(capsys, opts):
    """Batch and input size come from the config (loader batch 2, 64x64 RandomCropWithBBox)."""
    r = run_json(capsys, "model", opts, "--n", "1", "--warmup", "0")
    assert positive(r["fwd_img_per_s"]) and positive(r["fwd_bwd_img_per_s"])
    assert r["batch_size"] == 2 and r["input_hw"] == [64, 64]
    assert r["device"] == "cpu" and r["amp_level"] == "O0"


def test_model_amp_level(capsys, opts):
    r = run_json(capsys, "model", opts + ["system.amp_level=O2"], "--n", "1", "--warmup", "0")
    assert r["amp_level"] == "O2 (bfloat16)"


def test_train_keys_and_no_run_folder(capsys, opts, tmp_path):
    """Runs the real Trainer's steps but writes nothing into train.ckpt_save_dir."""
    r = run_json(capsys, "train", opts, "--n", "2", "--warmup", "0")
    assert positive(r["img_per_s"]) and positive(r["step_ms"])
    assert 0.0 <= r["data_wait_share"] <= 1.0
    assert r["steps"] == 2 and r["batch_size"] == 2 and isinstance(r["image_cache"], bool)
    assert not os.path.exists(tmp_path / "run")


def test_train_with_the_start_guard_on(capsys, synth_root, tmp_path):
    """A YAML written by ``convert ppocr`` turns the start guard on, which needs evaluations; bench train
    evaluates nothing and times the same steps with the guard off instead of refusing the YAML."""
    run = tmp_path / "run"
    run.mkdir()
    opts, _, _, ckpt = save_tiny_model(synth_root, str(run))
    guard = [f"model.pretrained={ckpt}", "train.guard_holdout=0.5", "train.guard_thresholds=true"]
    r = run_json(capsys, "train", opts + guard, "--n", "1", "--warmup", "0")
    assert r["steps"] == 1 and positive(r["step_ms"])
    assert os.listdir(run) == ["model.ckpt"]  # no run files beside the checkpoint it started from


def test_postprocess_keys_from_eval_gt(capsys, opts):
    """Maps drawn from the eval GT at the eval size (DetResize target 96x128) yield boxes."""
    r = run_json(capsys, "postprocess", opts, "--n", "2")
    assert positive(r["ms_per_map"]) and r["boxes_per_map"] > 0
    assert r["maps"] == 2 and r["map_hw"] == [96, 128] and r["source"] == "eval GT"


def test_eval_keys(capsys, opts):
    r = run_json(capsys, "eval", opts, "--n", "2", "--warmup", "0")
    assert positive(r["img_per_s"]) and r["images"] == 2
    assert all(0.0 <= r[k] <= 1.0 for k in ("recall", "precision", "f-score"))
    assert r["checkpoint"] is None
    parts = {"data", "forward", "postprocess", "metric"}
    if r["runtime"] == "onnxruntime":  # the model is traced for ONNX Runtime first: its own part
        parts.add("trace")
    assert set(r["ms_per_image"]) == parts and r["ms_per_image"]["forward"] > 0


def test_predict_keys(capsys, opts):
    r = run_json(capsys, "predict", opts, "--n", "3", "--warmup", "0")
    assert positive(r["img_per_s"]) and r["images"] == 3 and r["boxes"] >= 0 and r["checkpoint"] is None


def test_eval_missing_ckpt_is_clear(opts):
    with pytest.raises(TextdetError, match="checkpoint not found: /nope.ckpt"):
        bench.run(bench_args("eval", opts, "--ckpt", "/nope.ckpt"))


def write_maps(folder) -> None:
    """Two 64x96 maps with one 20x40 text block of P = 0.95: one (1,1,H,W), one (H,W)."""
    prob = np.zeros((64, 96), np.float32)
    prob[20:40, 30:70] = 0.95
    np.save(folder / "a.npy", prob[None, None])
    np.save(folder / "b.npy", prob)
    (folder / "shapes.json").write_text(json.dumps({"a": [128, 192]}))


def test_load_maps_shapes(tmp_path):
    """shapes.json gives a's original size (2x the map: scale 0.5); b, without an entry, stays in map pixels."""
    write_maps(tmp_path)
    maps = bench_infer.load_maps(str(tmp_path))
    assert [m[0] for m in maps] == ["a", "b"]
    assert all(m[1].shape == (64, 96) and m[1].dtype == np.float32 for m in maps)
    np.testing.assert_allclose(maps[0][2], [128, 192, 0.5, 0.5])
    assert maps[1][2] is None


def test_postprocess_reads_maps(capsys, opts, tmp_path):
    write_maps(tmp_path)
    r = run_json(capsys, "postprocess", opts, "--maps", str(tmp_path))
    assert r["maps"] == 2 and r["boxes_per_map"] == 1.0 and r["map_hw"] == [64, 96]
    assert r["source"] == str(tmp_path)


def test_human_table(capsys, opts, tmp_path):
    write_maps(tmp_path)
    assert bench.run(bench_args("postprocess", opts, "--maps", str(tmp_path))) == 0
    out = capsys.readouterr().out
    assert out.startswith("textdet bench postprocess") and "ms_per_map" in out


@pytest.mark.parametrize("setup, message", [
    (None, "no such folder"),
    ("empty", "no .npy files"),
    ("bad_shape", r"shape \(2, 64, 96\); expected"),
    ("bad_json", "shapes.json: 'a' must be \\[h, w\\]"),
])
def test_bad_maps_are_clear_errors(opts, tmp_path, setup, message):
    folder = tmp_path / "maps"
    if setup is not None:
        folder.mkdir()
    if setup == "bad_shape":
        np.save(folder / "a.npy", np.zeros((2, 64, 96), np.float32))
    if setup == "bad_json":
        np.save(folder / "a.npy", np.zeros((64, 96), np.float32))
        (folder / "shapes.json").write_text(json.dumps({"a": [128]}))
    with pytest.raises(TextdetError, match="--maps") as err:
        bench.run(bench_args("postprocess", opts, "--maps", str(folder)))
    assert str(folder) in str(err.value)
    assert err.match(message)


def test_flags_for_other_parts_are_rejected(opts, tmp_path):
    with pytest.raises(TextdetError, match="--maps is for `textdet bench postprocess`"):
        bench.run(bench_args("model", opts, "--maps", str(tmp_path)))
    with pytest.raises(TextdetError, match="--n must be >= 1"):
        bench.run(bench_args("data", opts, "--n", "0"))
