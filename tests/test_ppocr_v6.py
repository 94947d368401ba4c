"""PP-OCRv6 small det: PPLCNetV4 + RepLKFPN in deployed form, and the ONNX importer's v5/v6 graph patterns."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from textdet.commands.ppocr import (
    PPOCR_V4_DET,
    PPOCR_V6_SMALL_DET,
    Layer,
    identify,
    load_onnx_layers,
    read_onnx_layers,
)
from textdet.errors import TextdetError
from textdet.export import export_onnx
from textdet.models import build_model
from textdet.models.lcnetv4 import LCNetV4Block, PPLCNetV4, pad_bottom_right
from textdet.models.replkfpn import RepLKFPN

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def test_pplcnetv4_widths_and_strides() -> None:
    """small: stem to stride 4 with 48 channels, stages 48/96/192/384 at strides 4/8/16/32; tiny 32..160."""
    net = PPLCNetV4(model_size="small").eval()
    with torch.no_grad():
        feats = net(torch.zeros(1, 3, 64, 96))
    assert net.out_channels == [48, 96, 192, 384]
    assert [tuple(f.shape[1:]) for f in feats] == [(48, 16, 24), (96, 8, 12), (192, 4, 6), (384, 2, 3)]
    assert PPLCNetV4(model_size="tiny").out_channels == [32, 48, 64, 160]
    # the stem's 2x2 convs, then the stride-1 depthwise convs of blocks_s1 (3x3, 48 groups)
    assert tuple(net.stem.stem2a.conv.weight.shape) == (12, 24, 2, 2)
    assert net.blocks_s1[0].dw_conv.groups == 48 and net.blocks_s1[0].expand.out_channels == 96
    with pytest.raises(ValueError, match="model_size must be one of tiny, small, medium"):
        PPLCNetV4(model_size="large")


def test_replkfpn_shapes() -> None:
    """4 levels -> 96 channels at stride 4: each level a 7x7 depthwise conv, then 96 -> 24 (1x1) with SE."""
    neck = RepLKFPN([48, 96, 192, 384], out_channels=96, dilated_kernel_size=7).eval()
    feats = [torch.zeros(1, c, 16 // 2**i, 24 // 2**i) for i, c in enumerate([48, 96, 192, 384])]
    with torch.no_grad():
        assert tuple(neck(feats).shape) == (1, 96, 16, 24)
    layer = neck.inp_conv[0]
    assert tuple(layer.dw_conv.weight.shape) == (96, 1, 7, 7) and layer.dw_conv.padding == (3, 3)
    assert tuple(layer.pw_se.in_conv.weight.shape) == (24, 96, 1, 1) and layer.pw_se.in_conv.bias is None
    assert tuple(neck.ins_conv[3].in_conv.weight.shape) == (96, 384, 1, 1)


def test_same_padding_of_the_stem_is_bottom_right() -> None:
    """Paddle's 'SAME' for a 2x2 kernel at stride 1 adds one zero row at the bottom and one column at the right."""
    x = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    expected = torch.tensor([[[[1.0, 2.0, 0.0], [3.0, 4.0, 0.0], [0.0, 0.0, 0.0]]]])
    torch.testing.assert_close(pad_bottom_right(x), expected)


def test_lcnetv4_block_residual_only_when_shape_kept() -> None:
    """Identity depthwise conv, zero compress: a stride-1 same-width block returns its input (the residual),
    a stride-2 block returns zeros (no residual)."""
    x = torch.arange(2 * 4 * 4, dtype=torch.float32).view(1, 2, 4, 4)
    for stride, expected in ((1, x), (2, torch.zeros(1, 2, 2, 2))):
        block = LCNetV4Block(2, 2, 3, stride, se=False)
        with torch.no_grad():
            block.dw_conv.weight.zero_()
            block.dw_conv.weight[:, 0, 1, 1] = 1.0
            block.dw_conv.bias.zero_()
            block.compress.weight.zero_()
            block.compress.bias.zero_()
            torch.testing.assert_close(block(x), expected)


def _graph_layers(tmp_path, nodes: list, initializers: list, name: str) -> list[Layer]:
    """read_onnx_layers on a one-path graph x (1, 2, 4, 4) -> y."""
    graph = onnx.helper.make_graph(
        nodes, "g", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, 4, 4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], initializers)
    path = tmp_path / f"{name}.onnx"
    onnx.save(onnx.helper.make_model(graph), str(path))
    return read_onnx_layers(path)


def test_read_onnx_layers_finds_biases_behind_reshape_and_identity(tmp_path) -> None:
    """PP-OCRv5 adds a conv's bias as Reshape(b, [1, -1, 1, 1]); PP-OCRv6's export puts an Identity between a
    transposed conv and its bias Add. Both biases belong to their layer: [w, b] with b = (5, 7)."""
    weight = onnx.numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), "w")
    bias = onnx.numpy_helper.from_array(np.array([5.0, 7.0], np.float32), "b")
    shape = onnx.numpy_helper.from_array(np.array([1, -1, 1, 1], np.int64), "shape")
    reshape_nodes = [onnx.helper.make_node("Conv", ["x", "w"], ["c"]),
                     onnx.helper.make_node("Reshape", ["b", "shape"], ["b4"]),
                     onnx.helper.make_node("Add", ["c", "b4"], ["y"])]
    identity_nodes = [onnx.helper.make_node("ConvTranspose", ["x", "w"], ["c"]),
                      onnx.helper.make_node("Identity", ["c"], ["renamed"]),
                      onnx.helper.make_node("Add", ["renamed", "b4"], ["y"]),
                      onnx.helper.make_node("Reshape", ["b", "shape"], ["b4"])]
    identity_nodes = identity_nodes[-1:] + identity_nodes[:-1]  # graph order: the Reshape first
    for nodes, kind in ((reshape_nodes, "conv"), (identity_nodes, "convT")):
        layers = _graph_layers(tmp_path, nodes, [weight, bias, shape], kind)
        assert [layer.kind for layer in layers] == [kind]
        np.testing.assert_array_equal(layers[0].tensors[1], [5.0, 7.0])


def test_batchnorm_folded_into_a_biased_transposed_conv_becomes_identity() -> None:
    """ConvT(+bias) then BN in textdet, the BN folded away in the export: the BN gets weight 1, bias 0,
    mean 0 and var 1 - eps, so it passes the transposed conv's output through unchanged."""
    model = nn.Sequential(nn.ConvTranspose2d(3, 2, 2, 2), nn.BatchNorm2d(2))
    weight, bias = np.full((3, 2, 2, 2), 0.5, np.float32), np.array([1.0, -1.0], np.float32)
    state = load_onnx_layers(model, [Layer("convT", "t", [weight, bias])], "test.onnx")
    torch.testing.assert_close(state["0.bias"], torch.tensor([1.0, -1.0]))
    torch.testing.assert_close(state["1.weight"], torch.ones(2))
    torch.testing.assert_close(state["1.bias"], torch.zeros(2))
    torch.testing.assert_close(state["1.running_var"], torch.full((2,), 1 - 1e-5))
    model.load_state_dict(state)
    x = torch.rand(1, 3, 4, 4)
    with torch.no_grad():
        torch.testing.assert_close(model.eval()(x), model[0](x), atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_pp_ocrv6_roundtrip_and_training(tmp_path) -> None:
    """A random PP-OCRv6-small-shaped model exported to ONNX (BatchNorms folded by the exporter), imported back
    by ``identify`` (as ``convert ppocr``): onnxruntime's map equals textdet's to 1e-5; the v4 spec refuses the
    file, naming
    the first layer that does not fit; the imported model trains (every parameter gets a finite gradient)."""
    torch.manual_seed(0)
    src = build_model(**PPOCR_V6_SMALL_DET).eval()
    with torch.no_grad():  # non-trivial BatchNorm statistics in the head, so that a wrong match would show
        for m in src.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    onnx_path = export_onnx(src, str(tmp_path / "v6.onnx"), height=64, width=64)
    layers = read_onnx_layers(onnx_path)
    architecture, state, release = identify(layers, onnx_path)
    assert architecture.network == PPOCR_V6_SMALL_DET
    assert release.startswith("unknown weights of PP-OCRv6 small det")
    model = build_model(**PPOCR_V6_SMALL_DET)
    model.load_state_dict(state)
    x = np.random.default_rng(0).normal(size=(1, 3, 64, 96)).astype(np.float32)
    reference = ort.InferenceSession(onnx_path).run(None, {"x": x})[0]
    with torch.no_grad():
        got = model.eval()(torch.from_numpy(x))["binary"].numpy()
    np.testing.assert_allclose(got, reference, atol=1e-5)

    with pytest.raises(TextdetError, match=r"layer 0 .* does not fit textdet's backbone\.conv1\.0"):
        load_onnx_layers(build_model(**PPOCR_V4_DET), layers, onnx_path)

    out = model.train()(torch.from_numpy(x[:, :, :32, :32]))
    (out["binary"].mean() + out["thresh"].mean() + out["thresh_binary"].mean()).backward()
    for name, param in model.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
