"""Numerical parity with MindOCR: the same checkpoint through MindOCR's network and textdet's, stage by stage.

For each config, MindOCR 0.5 builds its network from the ``model:`` section (backbone weights off: no
download), random-initialises it, randomises every BatchNorm's affine parameters, calibrates the BatchNorm
statistics on another random image (30 training-mode passes, as a trained network's BN keeps activations
near unit scale; with random statistics a ResNet-50's activations reach thousands and fp32 rounding alone
moves P by 1e-3), and saves a MindSpore checkpoint. textdet builds the model of the same YAML,
loads that ``.ckpt`` strictly (``eval.ckpt_load_path`` path) and both run one random image in fp32,
eval mode. Reported: max |diff| of each backbone level, the neck output and the probability map P, and
the fp32 noise floor: max |diff| of P between textdet in fp32 and the same textdet model in fp64. A
MindOCR-vs-textdet difference at the noise floor is fp32 rounding (MindSpore's and PyTorch's kernels sum
in different orders), not a mapping or padding difference; those show as 1e-2 and more.

Run in a MindOCR environment (``pip install mindspore==2.7.0 mindocr==0.5.0`` plus textdet's
requirements; never in CI), from the repository root:

    PYTHONPATH=src python benchmarks/parity_mindocr.py            # all five configs
    PYTHONPATH=src python benchmarks/parity_mindocr.py --bn mindocr  # MindOCR's own init, BN at identity
    PYTHONPATH=src python benchmarks/parity_mindocr.py configs/db_r18_icdar15.yaml --size 320x480
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile

import mindspore as ms
import numpy as np
import torch
import yaml
from mindocr.models import build_model as ms_build_model

from textdet.config import load_config
from textdet.engine.build import build_model_from_config
from textdet.engine.checkpoint import load_weights
from textdet.models.mobilenetv3 import SameConv2d

CONFIGS = ["configs/db_r18_icdar15.yaml", "configs/db_r50_icdar15.yaml", "configs/dbpp_r50_icdar15.yaml",
           "configs/db_mobilenetv3_icdar15.yaml", "configs/mindocr_db_r50_user.yaml"]
TOLERANCE = 1e-4  # max |diff| allowed on P


def mindocr_network(cfg_path: str, rng: np.random.Generator, randomise_bn: bool = True,
                    calibration_passes: int = 30) -> ms.nn.Cell:
    model_cfg = copy.deepcopy(yaml.safe_load(open(cfg_path))["model"])
    model_cfg["backbone"]["pretrained"] = False
    model_cfg.pop("pretrained", None)
    net = ms_build_model(model_cfg)
    if not randomise_bn:  # MindOCR's own initialisation, BatchNorm at identity
        net.set_train(False)
        return net
    for name, p in net.parameters_and_names():
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "beta":
            p.set_data(ms.Tensor(rng.normal(0, 0.1, p.shape).astype(np.float32)))
        elif leaf == "gamma":
            p.set_data(ms.Tensor(rng.uniform(0.5, 1.5, p.shape).astype(np.float32)))
    calibration = ms.Tensor(rng.normal(0, 1, (2, 3, 160, 160)).astype(np.float32))
    net.set_train(True)
    for _ in range(calibration_passes):  # moving statistics follow the batch's (momentum 0.9)
        net(calibration)
    net.set_train(False)
    return net


def torchvision_padding(model: torch.nn.Module) -> None:
    """Put back the paddings textdet had before matching MindSpore (to show what parity catches)."""
    if hasattr(model.backbone, "maxpool"):
        model.backbone.maxpool = torch.nn.MaxPool2d(3, 2, 1)
    for m in model.modules():
        if isinstance(m, SameConv2d):
            m.same = (m.kernel_size[0] // 2,) * 4


def compare(cfg_path: str, size: tuple[int, int], seed: int, randomise_bn: bool, old_padding: bool = False) -> dict:
    rng = np.random.default_rng(seed)
    net = mindocr_network(cfg_path, rng, randomise_bn)
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "mindocr.ckpt")
        ms.save_checkpoint(net, ckpt)
        cfg = load_config(cfg_path, ["model.pretrained=false", "model.backbone.pretrained=false"])
        model = build_model_from_config(cfg, pretrained_backbone=False)
        load_weights(model, ckpt, "parity")  # strict: every tensor of the model comes from MindOCR's file
    if old_padding:
        torchvision_padding(model)
    model.eval()
    image = rng.normal(0, 1, (1, 3, *size)).astype(np.float32)
    ms_levels = net.backbone(ms.Tensor(image))
    ms_neck = net.neck(list(ms_levels))  # DBFPN rewrites its input list
    ms_binary = net.head(ms_neck)
    with torch.no_grad():
        levels = model.backbone(torch.from_numpy(image))
        neck = model.neck(levels)
        binary = model.head(neck)["binary"]
    diff = {f"C{i + 2}": float(np.abs(t.numpy() - m.asnumpy()).max()) for i, (t, m) in
            enumerate(zip(levels, ms_levels, strict=True))}
    diff["neck"] = float(np.abs(neck.numpy() - ms_neck.asnumpy()).max())
    diff["P"] = float(np.abs(binary.numpy() - ms_binary.asnumpy()).max())
    with torch.no_grad():
        binary64 = model.double()(torch.from_numpy(image).double())["binary"]
    diff["floor"] = float(np.abs(binary.double().numpy() - binary64.numpy()).max())
    return {"config": cfg_path, **diff}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", default=CONFIGS)
    parser.add_argument("--size", default="320x480", help="HxW of the random image (multiples of 32)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bn", choices=("random", "mindocr"), default="random",
                        help="random: random BN affine + calibrated statistics (default); mindocr: MindOCR's own "
                             "initialisation as built (BN at identity)")
    parser.add_argument("--old-padding", action="store_true",
                        help="torchvision-style max-pool/depthwise padding, as textdet had before (shows the gap)")
    args = parser.parse_args()
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_seed(args.seed)
    size = tuple(int(v) for v in args.size.split("x"))
    print(f"max |MindOCR - textdet| in fp32 on a {size[0]}x{size[1]} image, --bn {args.bn}; "
          f"floor: max |P fp32 - P fp64| in textdet")
    print("| config | C2 | C3 | C4 | C5 | neck | P | P floor |")
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for cfg_path in args.configs:
        r = compare(cfg_path, size, args.seed, args.bn == "random", args.old_padding)
        worst = max(worst, r["P"])
        cells = " | ".join(f"{r[k]:.1e}" for k in ("C2", "C3", "C4", "C5", "neck", "P", "floor"))
        print(f"| {os.path.basename(cfg_path)} | {cells} |", flush=True)
    print(f"worst P max|diff| {worst:.2e} ({'within' if worst < TOLERANCE else 'OVER'} {TOLERANCE:g})")
    return 0 if worst < TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
