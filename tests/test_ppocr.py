"""PP-OCR detectors: PPLCNetV3 + RSEFPN, the ONNX importer (``textdet convert ppocr``), DetResize rounding."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from textdet.build import parts
from textdet.build.parts import build_model_from_config
from textdet.cli import main
from textdet.commands.ppocr import ARCHITECTURES, PPOCR_V4_DET, load_onnx_layers, ppocr_config, read_onnx_layers
from textdet.config import load_config
from textdet.data.resize import DetResize
from textdet.engine.finetune import freeze_batchnorm
from textdet.engine.trainer import Trainer
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


@pytest.fixture(scope="module")
def v4_shaped_onnx(tmp_path_factory) -> str:
    """A random PP-OCRv4-shaped model exported to ONNX (BatchNorms folded by the exporter)."""
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
    return export_onnx(src, str(tmp_path_factory.mktemp("v4") / "det.onnx"), height=64, width=64)


@pytest.mark.slow
def test_convert_ppocr_roundtrip(v4_shaped_onnx, tmp_path) -> None:
    """The random PP-OCRv4-shaped export imported back through ``textdet convert ppocr``: the written YAML +
    checkpoint give onnxruntime's map to 1e-5."""
    onnx_path = v4_shaped_onnx
    assert main(["convert", "ppocr", onnx_path, "--out", str(tmp_path / "out"), "--name", "v4"]) == 0

    header = (tmp_path / "out" / "v4.yaml").read_text().splitlines()[0]
    assert "unknown weights of PP-OCRv4/v5 mobile det (PPLCNetV3 x0.75 + RSEFPN)" in header  # not a release
    cfg = load_config(str(tmp_path / "out" / "v4.yaml"))
    assert cfg.model.backbone["name"] == "PPLCNetV3" and cfg.model.neck["name"] == "RSEFPN"
    assert cfg.model.pretrained == cfg.eval.ckpt_load_path == str(tmp_path / "out" / "model.ckpt")
    model = build_model_from_config(cfg).eval()  # loads model.pretrained
    x = np.random.default_rng(0).normal(size=(1, 3, 96, 128)).astype(np.float32)
    ref = ort.InferenceSession(onnx_path).run(None, {"x": x})[0]
    with torch.no_grad():
        got = model(torch.from_numpy(x))["binary"].numpy()
    np.testing.assert_allclose(got, ref, atol=1e-5)
    # the missing threshold branch: the probability branch's layers, the last one giving T = 0.3 everywhere
    # (the YAML trains without it; `-o model.head.adaptive=true` starts from this)
    torch.testing.assert_close(model.head.thresh[0].weight, model.head.segm[0].weight)
    model.head.adaptive = True
    freeze_batchnorm(model.train())
    with torch.no_grad():
        out = model(torch.from_numpy(x))
    torch.testing.assert_close(out["thresh"], torch.full_like(out["thresh"], 0.3))
    binary = torch.from_numpy(got)
    torch.testing.assert_close(out["thresh_binary"], torch.sigmoid(50 * (binary - 0.3)), atol=1e-5, rtol=0)

    other = build_model({"name": "PPLCNetV3", "scale": 0.5}, {"name": "RSEFPN", "out_channels": 96},
                        {"name": "DBHead"})
    with pytest.raises(TextdetError, match=r"layer \d+ .* does not fit textdet's backbone\.blocks2"):
        load_onnx_layers(other, read_onnx_layers(onnx_path), onnx_path)


def test_fine_tuning_defaults_follow_the_release() -> None:
    """The written YAML: the whole network learns on its imported BatchNorm statistics, without the threshold
    branch, with the gap penalty; the learning rate is the release's (PP-OCRv5's weights collapse at v4's
    1e-3), PP-OCRv4's backbone at a tenth of it; every release the same schedule: 10 epochs of at least 450
    windows of 640 x 640 cut at a 736 px short side, an evaluation at the fifth epoch and at the last, bf16
    where the CPU has it natively."""
    v4_v5_network, v6_network = ARCHITECTURES
    written = {
        "v4": ppocr_config("m.ckpt", "v4", v4_v5_network, "PP-OCRv4 mobile det"),
        "v5": ppocr_config("m.ckpt", "v5", v4_v5_network, "PP-OCRv5 mobile det"),
        "v6": ppocr_config("m.ckpt", "v6", v6_network, "PP-OCRv6 small det"),
        "other": ppocr_config("m.ckpt", "other", v4_v5_network, "unknown weights of PP-OCRv4/v5 mobile det"),
    }
    assert {name: cfg["scheduler"]["lr"] for name, cfg in written.items()} == {
        "v4": 1e-3, "v5": 3e-4, "v6": 3e-4, "other": 3e-4}
    assert {name: cfg["scheduler"]["num_epochs"] for name, cfg in written.items()} == dict.fromkeys(written, 10)
    assert {name: cfg["optimizer"].get("lr_mult") for name, cfg in written.items()} == {
        "v4": {"backbone": 0.1}, "v5": None, "v6": None, "other": None}
    for cfg in written.values():
        assert cfg["train"]["freeze_bn"] is True
        assert cfg["train"]["guard_holdout"] == 0.1  # the start guard: every 10th training photo set aside
        assert cfg["train"]["guard_thresholds"] is True  # which also re-choose the thresholds
        assert cfg["system"]["ckpt_save_policy"] == "latest_k"  # the last epoch's checkpoint is kept
        assert not cfg["train"].get("freeze")  # nothing frozen: the backbone and neck learn too
        assert cfg["scheduler"]["warmup_epochs"] == 0.5
        assert cfg["model"]["head"]["adaptive"] is False  # P alone: no threshold map to make or learn
        # BorderMap's thresh_mask feeds the gap penalty (P pushed to 0 around each word): no threshold branch
        train = cfg["train"]["dataset"]
        assert train["output_columns"] == ["image", "binary_map", "mask", "thresh_map", "thresh_mask"]
        assert train["label_column_index"] == [1, 2, 3, 4]
        assert "BorderMap" in [next(iter(step)) for step in train["transform_pipeline"]]
        assert "BorderMap" not in [next(iter(step)) for step in cfg["eval"]["dataset"]["transform_pipeline"]]
        assert cfg["loss"]["gap_weight"] == 0.1 and cfg["loss"]["bce_replace"] == "diceloss"
        assert train["min_epoch_samples"] == 450  # 225 photos: each twice an epoch; 900: once
        assert (cfg["system"]["val_start_epoch"], cfg["system"]["val_interval"]) == (5, 5)
        assert cfg["system"]["amp_level"] == "auto"


@pytest.mark.slow
def test_written_yaml_runs_on_mindocr_layout(v4_shaped_onnx, synth_root, tmp_path) -> None:
    """The YAML `convert ppocr` writes reads MindOCR's layout (train/images + train_gt.txt, val/images +
    test_gt.txt): the two dataset_root overrides are all the data it needs to train an epoch and evaluate."""
    out = tmp_path / "out"
    assert main(["convert", "ppocr", v4_shaped_onnx, "--out", str(out), "--name", "v4"]) == 0
    run_dir = tmp_path / "run"
    data = [f"train.dataset.dataset_root={synth_root}", f"eval.dataset.dataset_root={synth_root}"]
    speed = [f"train.ckpt_save_dir={run_dir}", "scheduler.num_epochs=1", "train.gradient_accumulation_steps=1",
             "train.loader.num_workers=0", "eval.loader.num_workers=0", *TINY_PHOTOS]
    args = ["train", "-c", str(out / "v4.yaml")]
    for override in data + speed:
        args += ["-o", override]
    assert main(args) == 0
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1]
    assert {"recall", "precision", "f-score"} <= set(records[0])
    cfg = load_config(str(out / "v4.yaml"))
    assert (cfg.train.dataset.data_dir, cfg.train.dataset.label_file) == ("train/images", "train_gt.txt")
    assert (cfg.eval.dataset.data_dir, cfg.eval.dataset.label_file) == ("val/images", "test_gt.txt")
    # photos resized for training to PaddleOCR's evaluation size, a 736 px short side (no rescaled crops),
    # then a 640 x 640 window at that scale, one window a step; evaluation at a 864 px short side
    train_ops = [next(iter(step)) for step in cfg.train.dataset.transform_pipeline]
    assert not {"RandomCropWithBBox", "RandomScale"} & set(train_ops)
    resize_at = train_ops.index("DetResize")
    train_resize = cfg.train.dataset.transform_pipeline[resize_at]["DetResize"]
    eval_resize = cfg.eval.dataset.transform_pipeline[2]["DetResize"]
    same = {"limit_type": "min", "divisor": 32, "rounding": "nearest"}
    assert train_resize == {**same, "limit_side_len": 736} and eval_resize == {**same, "limit_side_len": 864}
    assert cfg.train.dataset.transform_pipeline[resize_at + 1] == {"RandomTextCrop": {"crop_size": [640, 640]}}
    assert cfg.train.loader.batch_size == 1
    # PaddleOCR's preprocessing: BGR pixels, ImageNet mean/std on 0-255 values, B first
    pipeline = parts.build_pipeline(cfg, "eval")
    normalize = pipeline.transforms[-1]  # NormalizeImage + ToCHWImage, fused
    pixel = np.array([[[255, 0, 128]]], dtype=np.uint8)  # B, G, R
    got = normalize({"image": pixel}, np.random.default_rng(0))["image"].reshape(3)
    expected = [(255 - 123.675) / 58.395, (0 - 116.28) / 57.12, (128 - 103.53) / 57.375]
    np.testing.assert_allclose(got, expected, rtol=1e-6)


# The tests' 96 px photos: resized to 96, a 96 x 96 window, one pass an epoch (not 450 windows).
TINY_PHOTOS = ["train.dataset.transform_pipeline.DetResize.limit_side_len=96",
               "train.dataset.transform_pipeline.RandomTextCrop.crop_size=[96,96]",
               "train.dataset.min_epoch_samples=0",
               "eval.dataset.transform_pipeline.DetResize.limit_side_len=96"]


def regions_in_line(label_file: Path, line_no: int) -> int:
    """The text regions (not ### or *) of one line of a label file."""
    regions = json.loads(label_file.read_text(encoding="utf-8").splitlines()[line_no - 1].split("\t", 1)[1])
    return sum(region["transcription"] not in ("###", "*") for region in regions)


def guarded_train_args(yaml_path, synth_root, run_dir, margin: float, epochs: int, regions: int = 0) -> list[str]:
    """``textdet train`` on the written YAML with tiny photos, one worker-less process, one step per photo,
    an evaluation (so a guard's choice) after every epoch; with ``regions`` 0 (train.guard_regions)
    ``margin`` alone decides what the guard keeps: -2 the trained model, 2 the start."""
    overrides = [f"train.dataset.dataset_root={synth_root}", f"eval.dataset.dataset_root={synth_root}",
                 f"train.ckpt_save_dir={run_dir}", f"scheduler.num_epochs={epochs}",
                 "train.gradient_accumulation_steps=1", "train.loader.num_workers=0",
                 "eval.loader.num_workers=0", f"train.guard_margin={margin}", f"train.guard_regions={regions}",
                 "system.val_start_epoch=1", "system.val_interval=1", *TINY_PHOTOS]
    args = ["train", "-c", str(yaml_path)]
    for override in overrides:
        args += ["-o", override]
    return args


@pytest.mark.slow
@pytest.mark.parametrize("margin, regions, kept", [(2.0, 2, "start"), (-2.0, 0, "trained")])
def test_written_yaml_saves_the_model_the_guard_keeps(v4_shaped_onnx, synth_root, tmp_path, margin,
                                                      regions, kept) -> None:
    """An f-score cannot beat the start by 2, and always beats it by -2: the epoch's checkpoint holds the
    imported weights exactly in the first case, trained ones in the second."""
    out = tmp_path / "out"
    assert main(["convert", "ppocr", v4_shaped_onnx, "--out", str(out), "--name", "v4"]) == 0
    run_dir = tmp_path / "run"
    assert main(guarded_train_args(out / "v4.yaml", synth_root, run_dir, margin, epochs=1, regions=regions)) == 0
    record = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])
    assert record["kept"] == kept
    # 12 training photos: the 10th is set aside, 11 are trained on (one optimizer step each)
    log = (run_dir / "train.log").read_text()
    assert "1 training photos set aside (every 10th), not trained on" in log
    assert "Train samples: 11\n" in log
    if regions:  # the margin used: the larger of 2.0 and 2 / the regions the 10th photo holds
        held = regions_in_line(Path(synth_root) / "train_gt.txt", 10)
        assert f"the 1 set-aside photos hold {held} text regions; the trained model is kept when it " \
               f"scores 2.00000 above the start (the larger of train.guard_margin 2 and train.guard_regions " \
               f"2 / {held})" in log
    saved = torch.load(run_dir / "e1.ckpt", weights_only=False)["model"]
    imported = torch.load(out / "model.ckpt", weights_only=False)["model"]
    same = all(torch.equal(saved[key], imported[key]) for key in imported)
    assert same == (kept == "start")


@pytest.mark.slow
def test_thresholds_the_guard_chose_travel_with_the_checkpoint(v4_shaped_onnx, synth_root, tmp_path,
                                                               capsys) -> None:
    """The written YAML re-chooses the thresholds on the set-aside photo: the kept model's pair is saved in
    its checkpoint; eval takes it from there (the run's own f-score again), and -o overrides one of them."""
    out = tmp_path / "out"
    assert main(["convert", "ppocr", v4_shaped_onnx, "--out", str(out), "--name", "v4"]) == 0
    run_dir = tmp_path / "run"
    assert main(guarded_train_args(out / "v4.yaml", synth_root, run_dir, margin=-2.0, epochs=1)) == 0
    record = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])
    chosen = {"binary_thresh": record["binary_thresh"], "box_thresh": record["box_thresh"]}
    assert record["kept"] == "trained"
    assert torch.load(run_dir / "e1.ckpt", weights_only=False)["postprocess"] == chosen
    eval_args = ["eval", "-c", str(out / "v4.yaml"), "--ckpt", str(run_dir / "e1.ckpt"), "--json",
                 "-o", f"eval.dataset.dataset_root={synth_root}",
                 "-o", "eval.dataset.transform_pipeline.DetResize.limit_side_len=96"]
    capsys.readouterr()
    assert main(eval_args) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])  # after the log lines of train's handler
    assert result["thresholds_from_checkpoint"] == chosen
    assert result["f-score"] == pytest.approx(record["f-score"])
    assert main([*eval_args, "-o", "postprocess.binary_thresh=0.45"]) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["thresholds_from_checkpoint"] == {"box_thresh": chosen["box_thresh"]}


def test_check_data_lists_the_photos_the_guard_sets_aside(v4_shaped_onnx, synth_root, tmp_path, capsys) -> None:
    """The written YAML sets every 10th training photo aside: of the 12 tiny ones, line 10 (img_10.jpg)."""
    out = tmp_path / "out"
    assert main(["convert", "ppocr", v4_shaped_onnx, "--out", str(out), "--name", "v4"]) == 0
    capsys.readouterr()
    assert main(["check-data", "-c", str(out / "v4.yaml"), "-o", f"train.dataset.dataset_root={synth_root}",
                 "-o", f"eval.dataset.dataset_root={synth_root}"]) == 0
    guard_lines = [line for line in capsys.readouterr().out.splitlines() if "guard" in line]
    held = regions_in_line(Path(synth_root) / "train_gt.txt", 10)
    assert guard_lines == [
        f"{synth_root}/train_gt.txt:10: set aside by the start guard: img_10.jpg",
        "start guard: 1 training photos set aside (every 10th labelled photo), never trained on; "
        "-o train.guard_holdout=0 trains on them too",
        f"start guard: their labels hold {held} text regions; the trained model is kept when it scores "
        f"{max(0.01, 2 / held):.5f} above the start there (the larger of train.guard_margin 0.01 and "
        f"train.guard_regions 2 / {held})"]


@pytest.mark.slow
def test_guarded_run_killed_and_resumed_trains_on_from_its_own_weights(v4_shaped_onnx, synth_root,
                                                                        tmp_path) -> None:
    """With the start kept at epoch 1, e1.ckpt holds the imported weights but training goes on from the trained
    ones: a run killed in epoch 2 and resumed ends with the same weights and guard scores as a straight run."""
    out = tmp_path / "out"
    assert main(["convert", "ppocr", v4_shaped_onnx, "--out", str(out), "--name", "v4"]) == 0
    resumed, straight = tmp_path / "resumed", tmp_path / "straight"
    real_epoch = Trainer.train_one_epoch

    def killed_in_second_epoch(self, epoch):
        if epoch == 1:
            raise KeyboardInterrupt
        return real_epoch(self, epoch)

    resumed_args = guarded_train_args(out / "v4.yaml", synth_root, resumed, margin=2.0, epochs=2)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Trainer, "train_one_epoch", killed_in_second_epoch)
        assert main(resumed_args) == 130
    assert main(resumed_args + ["-o", "model.resume=True"]) == 0
    assert main(guarded_train_args(out / "v4.yaml", synth_root, straight, margin=2.0, epochs=2)) == 0

    def guard_records(run_dir):
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
        return [{key: json.loads(line)[key] for key in ("guard_trained", "guard_start", "kept")}
                for line in lines]

    assert guard_records(resumed) == guard_records(straight)
    assert [record["kept"] for record in guard_records(straight)] == ["start", "start"]
    imported = torch.load(out / "model.ckpt", weights_only=False)["model"]
    resumed_weights = torch.load(resumed / "train_resume.ckpt", weights_only=False)["model"]
    straight_weights = torch.load(straight / "train_resume.ckpt", weights_only=False)["model"]
    assert all(torch.equal(resumed_weights[key], straight_weights[key]) for key in straight_weights)
    assert not all(torch.equal(resumed_weights[key], imported[key]) for key in imported)


def test_unknown_onnx_is_refused_naming_what_it_holds(tmp_path, capsys) -> None:
    """An ONNX detector of another architecture: the error names the file's first layer and the supported
    detectors, and no output folder is left behind."""
    other = build_model({"name": "det_resnet18", "width": 8}, {"name": "DBFPN", "out_channels": 32},
                        {"name": "DBHead"}).eval()
    onnx_path = export_onnx(other, str(tmp_path / "r18.onnx"), height=64, width=64)
    assert main(["convert", "ppocr", onnx_path, "--out", str(tmp_path / "out")]) != 0
    message = capsys.readouterr().err
    assert "is not a PP-OCR detector textdet can import" in message
    assert "the first conv" in message and "(8, 3, 7, 7)" in message
    assert "Supported: PP-OCRv4/v5 mobile det" in message
    assert not (tmp_path / "out").exists()
