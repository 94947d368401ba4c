"""DBNet model: parameter counts, output contract, binarization formula, weights loading, AMP and export.

Everything runs on narrow variants (ResNet width 8, FPN 32 channels) and 64-128 px inputs except the
parameter counts, which only build the real-width models.
"""

from __future__ import annotations

import logging
import math

import pytest
import torch

from textdet.errors import ConfigError
from textdet.models import (
    BACKBONES,
    DBFPN,
    DBHead,
    build_model,
    count_parameters,
    det_mobilenet_v3,
    det_resnet18,
    det_resnet50,
    load_model_weights,
)

USER_BACKBONE = {"name": "det_resnet50", "pretrained": False}  # the fixture says True; no weights in CI
USER_NECK = {"name": "DBFPN", "out_channels": 256, "bias": False}
USER_HEAD = {"name": "DBHead", "k": 50, "bias": False, "adaptive": True}


def tiny_model(backbone: str = "det_resnet18", **neck_kwargs) -> torch.nn.Module:
    spec = {"name": backbone, "width": 8} if backbone.startswith("det_resnet") else {"name": backbone}
    torch.manual_seed(0)
    return build_model(spec, {"name": "DBFPN", "out_channels": 32, **neck_kwargs}, {"name": "DBHead", "k": 50})


# ---------------------------------------------------------------------------------------------- sizes
def test_user_config_has_mindocr_parameter_count():
    """MindOCR prints 25,409,730 trainable parameters for db_r50 (ResNet-50 23,508,032 without fc,
    DBFPN 983,040 + 589,824, DBHead 2 x 164,417)."""
    model = build_model(USER_BACKBONE, USER_NECK, USER_HEAD)
    assert count_parameters(model) == 25_409_730
    assert count_parameters(model.backbone) == 23_508_032
    assert count_parameters(model.neck) == 1_572_864
    assert count_parameters(model.head) == 328_834


def test_resnet18_dbnet_parameter_count():
    model = build_model({"name": "det_resnet18"}, USER_NECK, USER_HEAD)
    assert count_parameters(model) == 12_340_930
    assert count_parameters(model.backbone) == 11_689_512 - 513_000  # torchvision resnet18 minus fc


def test_count_parameters_trainable_only():
    model = tiny_model()
    total = count_parameters(model)
    model.backbone.conv1.weight.requires_grad_(False)
    frozen = model.backbone.conv1.weight.numel()
    assert count_parameters(model) == total - frozen
    assert count_parameters(model, trainable_only=False) == total


def test_backbones_declare_channels_and_strides():
    x = torch.randn(1, 3, 64, 64)
    for backbone in (det_resnet18(width=8), det_resnet50(width=4), det_mobilenet_v3()):
        feats = backbone.eval()(x)
        assert backbone.strides == [4, 8, 16, 32]
        assert [f.shape[1] for f in feats] == backbone.out_channels
        assert [f.shape[-1] for f in feats] == [64 // s for s in backbone.strides]
    assert det_resnet50(width=4).out_channels == [16, 32, 64, 128]
    assert det_mobilenet_v3().out_channels == [16, 24, 56, 480]  # MindOCR's scale 0.5 channels


# ---------------------------------------------------------------------------------------------- outputs
@pytest.mark.parametrize("backbone", ["det_resnet18", "det_mobilenet_v3"])
@pytest.mark.parametrize("hw", [(64, 64), (96, 128)])
def test_output_keys_and_shapes(backbone, hw):
    model = tiny_model(backbone)
    x = torch.rand(2, 3, *hw)
    train_out = model.train()(x)
    assert set(train_out) == {"binary", "binary_logits", "thresh", "thresh_binary"}
    for value in train_out.values():
        assert value.shape == (2, 1, *hw) and value.dtype == torch.float32
    with torch.no_grad():
        eval_out = model.eval()(x)
    assert set(eval_out) == {"binary"}
    assert eval_out["binary"].shape == (2, 1, *hw)
    assert 0 <= eval_out["binary"].min() and eval_out["binary"].max() <= 1


def test_eval_does_not_run_the_threshold_branch():
    model = tiny_model().eval()
    calls = []
    model.head.thresh.register_forward_hook(lambda *args: calls.append(1))
    with torch.no_grad():
        model(torch.rand(1, 3, 64, 64))
    assert calls == []


def test_asf_neck_keeps_the_contract():
    neck = DBFPN([8, 16, 32, 64], out_channels=32, use_asf=True)
    feats = [torch.randn(1, c, 64 // s, 64 // s) for c, s in zip([8, 16, 32, 64], [4, 8, 16, 32], strict=True)]
    assert neck(feats).shape == (1, 32, 16, 16) and neck.out_channels == 32
    model = tiny_model(use_asf=True).train()
    assert model(torch.rand(1, 3, 64, 64))["thresh_binary"].shape == (1, 1, 64, 64)


def test_input_not_divisible_by_32_is_a_clear_error():
    model = tiny_model().eval()
    with pytest.raises(ValueError, match=r"\(1, 3, 65, 64\)") as info:
        model(torch.rand(1, 3, 65, 64))
    assert "divisible by 32" in str(info.value) and "DetResize" in str(info.value)


def test_binarization_is_the_paper_formula_in_fp32():
    """B = 1 / (1 + exp(-k (P - T))) with k = 50, not MindOCR's sigmoid(k P - T)."""
    model = tiny_model().train()
    out = model(torch.rand(2, 3, 64, 64))
    p, t, b = (out[k].detach().double() for k in ("binary", "thresh", "thresh_binary"))
    assert out["thresh_binary"].dtype == torch.float32
    expected = 1.0 / (1.0 + torch.exp(-50.0 * (p - t)))
    torch.testing.assert_close(b, expected, atol=1e-6, rtol=0)
    mindocr = torch.sigmoid(50.0 * p - t)
    assert (b - mindocr).abs().max() > 0.1


def test_head_k_and_adaptive_flags():
    head = DBHead(32, k=10, adaptive=False).train()
    assert set(head(torch.randn(1, 32, 8, 8))) == {"binary", "binary_logits"}
    head = DBHead(32, k=10).train()
    out = head(torch.randn(1, 32, 8, 8))
    torch.testing.assert_close(out["thresh_binary"], torch.sigmoid(10 * (out["binary"] - out["thresh"])))


def test_head_step_mindocr_is_sigmoid_of_kp_minus_t():
    """``model.head.step: mindocr``: B = sigmoid(k P - T) as MindOCR's DBHead. With the segm logits 0 and the
    thresh logits 0, P = T = 0.5: the paper's B is sigmoid(0) = 0.5, MindOCR's sigmoid(25 - 0.5) = 1 - 2.3e-11."""
    paper = DBHead(32, k=50).train()
    mindocr = DBHead(32, k=50, step="mindocr").train()
    for head in (paper, mindocr):
        for branch in (head.segm, head.thresh):
            torch.nn.init.zeros_(branch[-1].weight)
            torch.nn.init.zeros_(branch[-1].bias)
    features = torch.randn(1, 32, 4, 4)
    assert torch.all(paper(features)["thresh_binary"] == 0.5)
    expected = torch.full((1, 1, 16, 16), 1 / (1 + math.exp(-24.5)))
    torch.testing.assert_close(mindocr(features)["thresh_binary"], expected)
    with pytest.raises(ConfigError, match=r"model\.head \(DBHead\).*step must be one of paper, mindocr"):
        build_model({"name": "det_resnet18", "width": 8}, USER_NECK, {**USER_HEAD, "step": "MindOCR"})


def test_db_init():
    head = DBHead(32)
    bn = head.segm[1]
    assert torch.all(bn.weight == 1) and torch.all(bn.bias == 1e-4)


def test_bf16_autocast_forward_keeps_binarization_fp32():
    model = tiny_model().train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(torch.rand(2, 3, 64, 64))
    assert out["binary_logits"].dtype == torch.bfloat16  # the network runs in bf16 ...
    assert out["binary"].dtype == out["thresh_binary"].dtype == torch.float32  # ... sigmoids and k = 50 step do not
    p, t = out["binary"].double(), out["thresh"].double()
    torch.testing.assert_close(out["thresh_binary"].double(), torch.sigmoid(50 * (p - t)), atol=1e-6, rtol=0)


# ---------------------------------------------------------------------------------------------- weights
RESNET18_LAYER1_0 = [
    "layer1.0.conv1.weight",
    "layer1.0.bn1.weight", "layer1.0.bn1.bias", "layer1.0.bn1.running_mean", "layer1.0.bn1.running_var",
    "layer1.0.bn1.num_batches_tracked",
    "layer1.0.conv2.weight",
    "layer1.0.bn2.weight", "layer1.0.bn2.bias", "layer1.0.bn2.running_mean", "layer1.0.bn2.running_var",
    "layer1.0.bn2.num_batches_tracked",
]
RESNET18_DOWNSAMPLE = [
    "layer2.0.downsample.0.weight",
    "layer2.0.downsample.1.weight", "layer2.0.downsample.1.bias", "layer2.0.downsample.1.running_mean",
    "layer2.0.downsample.1.running_var", "layer2.0.downsample.1.num_batches_tracked",
]


def test_resnet_keys_match_torchvision():
    keys = list(det_resnet18().state_dict())
    assert keys[:6] == ["conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var",
                        "bn1.num_batches_tracked"]
    assert [k for k in keys if k.startswith("layer1.0.")] == RESNET18_LAYER1_0
    assert [k for k in keys if k.startswith("layer2.0.downsample")] == RESNET18_DOWNSAMPLE
    assert not any(k.startswith(("layer1.0.downsample", "fc.")) for k in keys)
    assert len(keys) == 120  # torchvision resnet18: 122 entries, minus fc.weight and fc.bias
    r50 = det_resnet50(width=4)
    assert len(r50.state_dict()) == 318  # torchvision resnet50: 320 entries, minus fc
    assert "layer1.0.downsample.0.weight" in r50.state_dict() and "layer1.0.conv3.weight" in r50.state_dict()
    # v1.5: the stride is on the 3x3 conv
    assert r50.layer2[0].conv1.stride == (1, 1) and r50.layer2[0].conv2.stride == (2, 2)


def _fake_hub(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    folder = tmp_path / "torch" / "hub" / "checkpoints"
    folder.mkdir(parents=True)
    return folder


def test_pretrained_true_loads_from_torch_hub_cache(tmp_path, monkeypatch):
    folder = _fake_hub(tmp_path, monkeypatch)
    torch.manual_seed(1)
    source = det_resnet18(width=8).state_dict()
    torch.save({**source, "fc.weight": torch.zeros(10, 64), "fc.bias": torch.zeros(10)},
               folder / "resnet18-f37072fd.pth")
    torch.manual_seed(2)
    loaded = det_resnet18(pretrained=True, width=8).state_dict()
    for key, value in source.items():
        assert torch.equal(loaded[key], value), key
    model = build_model({"name": "det_resnet18", "width": 8, "pretrained": True}, {"name": "DBFPN", "out_channels": 32},
                        {"name": "DBHead"})
    assert torch.equal(model.backbone.layer4[1].bn2.running_var, source["layer4.1.bn2.running_var"])


def test_pretrained_resnet50_accepts_any_resnet50_file(tmp_path, monkeypatch):
    folder = _fake_hub(tmp_path, monkeypatch)
    source = det_resnet50(width=4).state_dict()
    torch.save(source, folder / "resnet50-deadbeef.pth")
    loaded = det_resnet50(pretrained=True, width=4).state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in source.items())


def test_pretrained_missing_file_names_file_folder_and_escape(tmp_path, monkeypatch):
    folder = _fake_hub(tmp_path, monkeypatch)
    with pytest.raises(ConfigError) as info:
        build_model({"name": "det_resnet50", "pretrained": True}, USER_NECK, USER_HEAD)
    message = str(info.value)
    for text in ("resnet50-0676ba61.pth", str(folder), "curl -L", "-o model.backbone.pretrained=false"):
        assert text in message
    with pytest.raises(ConfigError, match="resnet18-f37072fd.pth"):
        det_resnet18(pretrained=True)
    with pytest.raises(ConfigError, match="nowhere.pth"):
        det_resnet18(pretrained=str(tmp_path / "nowhere.pth"))


def test_mobilenet_takes_mindocr_config_and_stays_offline():
    """MindOCR's db_mobilenetv3 backbone section builds; with TEXTDET_OFFLINE=1 (conftest) its URL is not fetched."""
    spec = {"name": "det_mobilenet_v3", "architecture": "large", "alpha": 0.5, "out_stages": [5, 8, 14, 20],
            "bottleneck_params": {"se_version": "SqueezeExciteV2", "always_expand": True}}
    model = build_model(spec, {"name": "DBFPN", "out_channels": 32}, {"name": "DBHead"})
    assert model.backbone.out_channels == [16, 24, 56, 480]
    assert "features.3.layers.0.weight" in model.backbone.state_dict()  # the always_expand 1x1 conv
    url = "https://download.mindspore.cn/toolkits/mindcv/mobilenet/mobilenetv3/x.ckpt"
    with pytest.raises(ConfigError, match="x.ckpt is not in .* TEXTDET_OFFLINE is set"):
        build_model({**spec, "pretrained": url}, {"name": "DBFPN", "out_channels": 32}, {"name": "DBHead"})
    with pytest.raises(ConfigError, match="model.backbone.pretrained=false"):
        det_mobilenet_v3(pretrained=True)


def test_pretrained_shape_mismatch_names_the_key(tmp_path):
    path = tmp_path / "narrow.pth"
    torch.save(det_resnet18(width=8).state_dict(), path)
    with pytest.raises(ConfigError, match="conv1.weight"):
        det_resnet18(pretrained=str(path), width=16)


def test_whole_model_pretrained_is_non_strict_with_a_report(tmp_path, caplog):
    source = tiny_model().state_dict()
    state = {f"module.{k}": v.clone() for k, v in source.items()}  # as saved from a DDP model
    del state["module.head.thresh.0.weight"]
    state["module.extra.weight"] = torch.zeros(3)
    state["module.head.segm.0.weight"] = torch.zeros(1, 2, 3, 3)
    path = tmp_path / "ckpt.pth"
    torch.save({"model": state, "epoch": 3}, path)

    torch.manual_seed(5)
    target = tiny_model()
    before = {k: v.clone() for k, v in target.state_dict().items()}
    report = load_model_weights(target, path)
    assert report.missing == ["head.thresh.0.weight"]
    assert report.unexpected == ["extra.weight"]
    assert report.mismatched == [("head.segm.0.weight", (1, 2, 3, 3), (8, 32, 3, 3))]
    after = target.state_dict()
    assert len(report.loaded) == len(source) - 2
    assert all(torch.equal(after[k], source[k]) for k in report.loaded)
    for kept in ("head.thresh.0.weight", "head.segm.0.weight"):  # missing or dropped: left as initialised
        assert torch.equal(after[kept], before[kept])

    with caplog.at_level(logging.INFO, logger="textdet.models"):
        build_model({"name": "det_resnet18", "width": 8}, {"name": "DBFPN", "out_channels": 32}, {"name": "DBHead"},
                    pretrained=str(path))
    assert "extra.weight" in caplog.text and "head.segm.0.weight" in caplog.text


def test_plain_state_dict_checkpoint_loads_fully(tmp_path):
    source = tiny_model()
    path = tmp_path / "plain.pth"
    torch.save(source.state_dict(), path)
    target = build_model({"name": "det_resnet18", "width": 8}, {"name": "DBFPN", "out_channels": 32},
                         {"name": "DBHead"}, pretrained=str(path))
    assert all(torch.equal(target.state_dict()[k], v) for k, v in source.state_dict().items())


# ---------------------------------------------------------------------------------------------- config errors
def test_unknown_name_lists_valid_names_and_closest():
    with pytest.raises(ConfigError) as info:
        build_model({"name": "det_resnet5"}, USER_NECK, USER_HEAD)
    message = str(info.value)
    assert "model.backbone" in message and "did you mean 'det_resnet50'" in message
    assert all(name in message for name in BACKBONES)
    with pytest.raises(ConfigError, match="DBHead"):
        build_model({"name": "det_resnet18", "width": 8}, USER_NECK, {"name": "DBHed"})


def test_bad_kwargs_name_component_and_parameter():
    with pytest.raises(ConfigError, match=r"model\.neck \(DBFPN\): unknown parameter 'out_channel'.*'out_channels'"):
        build_model({"name": "det_resnet18", "width": 8}, {"name": "DBFPN", "out_channel": 32}, USER_HEAD)
    with pytest.raises(ConfigError, match=r"model\.neck .*in_channels"):
        build_model({"name": "det_resnet18", "width": 8}, {"name": "DBFPN", "in_channels": [1, 2, 3, 4]}, USER_HEAD)
    with pytest.raises(ConfigError, match=r"model\.neck \(DBFPN\).*multiple of 4"):
        build_model({"name": "det_resnet18", "width": 8}, {"name": "DBFPN", "out_channels": 30}, USER_HEAD)
    with pytest.raises(ConfigError, match="model.pretrained"):
        build_model({"name": "det_resnet18", "width": 8}, {"name": "DBFPN", "out_channels": 32}, USER_HEAD,
                    pretrained=True)


# ---------------------------------------------------------------------------------------------- export
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_onnx_export_of_eval_model(tmp_path):
    pytest.importorskip("onnx")
    model = tiny_model().eval()
    x = torch.rand(1, 3, 64, 64)
    path = tmp_path / "dbnet.onnx"
    # The TorchScript exporter: the dynamo one needs onnxscript, which is not a dependency.
    torch.onnx.export(model, (x,), str(path), dynamo=False, input_names=["images"], output_names=["binary"],
                      dynamic_axes={"images": {0: "n", 2: "h", 3: "w"}}, opset_version=17)
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x2 = torch.rand(2, 3, 96, 128)
    (binary,) = session.run(None, {"images": x2.numpy()})
    with torch.no_grad():
        expected = model(x2)["binary"].numpy()
    assert binary.shape == (2, 1, 96, 128)
    assert abs(binary - expected).max() < 1e-4


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_confident_wrong_pixel_keeps_its_gradient_under_autocast(dtype):
    """Logit 12 on a negative pixel: a half sigmoid rounds P to 1.0 (BCE then gives NaN or 0 gradient);
    the fp32 loss from logits gives d loss / d logit = sigmoid(12) / n_pixels, finite and non-zero."""
    from textdet.loss import DBLoss

    torch.manual_seed(0)
    head = DBHead(8).train()
    last = head.segm[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.fill_(12.0)  # every pixel's P logit is exactly 12
    gt = torch.zeros(1, 1, 8, 8)  # all negative: OHEM keeps the min_negatives hardest
    with torch.autocast("cpu", dtype=dtype):
        preds = head(torch.randn(1, 8, 2, 2))
    assert preds["binary_logits"].dtype == dtype and float(preds["binary_logits"].detach().min()) == 12.0
    loss = DBLoss(bce_scale=1, l1_scale=0, negative_ratio=3, min_negatives=10)(
        {"binary": preds["binary"], "binary_logits": preds["binary_logits"]}, gt, torch.ones(1, 8, 8))["loss"]
    loss.backward()
    assert float(loss.detach()) == pytest.approx(12 + math.log1p(math.exp(-12)), rel=1e-6)  # BCE(logit 12, label 0)
    # d loss / d bias = sum over the 10 kept pixels of sigmoid(12) / 10 = sigmoid(12)
    assert torch.isfinite(last.bias.grad).all()
    assert float(last.bias.grad) == pytest.approx(1 / (1 + math.exp(-12)), rel=1e-2)
