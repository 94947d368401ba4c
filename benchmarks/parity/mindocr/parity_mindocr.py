"""Numerical parity with MindOCR: the same checkpoint through MindOCR's network and textdet's, stage by stage.

For each config, MindOCR 0.5 builds its network from the ``model:`` section (backbone download off) and
textdet builds the model of the same YAML. The weights (``--weights``):

- ``trained`` (default): textdet trains its model briefly on the built-in synthetic data (the built-in
  recipe's pipeline and DBLoss, Adam ``--lr``, ``--steps`` steps of ``--batch`` 160x160 crops), as a user's
  checkpoint is trained; DBNet++ fine-tunes the trained DBNet as MindOCR's recipe does (``trained_state``).
  Cached by model section under ``$TEXTDET_HOME/parity`` (configs with the same network share it). The
  weights go into MindOCR's network through the inverse of ``ms_ckpt``'s name mapping (every parameter and
  BN statistic set, none left over).
- ``random``: MindOCR's random init, every BatchNorm's gamma/beta randomised and its statistics calibrated
  on a noise image (the old check; random ResNet-50s are badly conditioned and amplify rounding).
- ``init``: MindOCR's own initialisation as built (BatchNorm at identity).

MindSpore then saves its network as a ``.ckpt`` and a fresh textdet model loads that file strictly
(``eval.ckpt_load_path`` path), so the file MindOCR wrote is the only source of textdet's weights. Both
run one image in fp32, eval mode: ``--input synth`` (default) a held-out image of the built-in synthetic
set through the recipe's eval pipeline (DetResize to ``--size``, ImageNet normalisation), ``noise`` N(0, 1).

Reported per stage (C2..C5, neck, P): max |MindOCR - textdet| in fp32, and in brackets that stage's fp32
floor, max |textdet fp32 - textdet fp64| (MindSpore's BatchNorm has no fp64 mode, so fp64 is textdet's).
A difference at the floor is rounding (the frameworks sum in different orders); a convention difference
(padding, resize, eps) shows as 1e-2 and more at the stage where it enters. ``MS vs fp64``: max |P MindOCR
fp32 - P textdet fp64|, MindOCR's own distance from the exact result of the network textdet implements.
``logits``: the segm branch before its sigmoid (P's difference is at most a quarter of it); ``P > 0.3``: the
share of pixels at the post-processor's binary threshold, to show P is not all background; ``max abs neck``: the
neck's scale (absolute differences grow with it; 0 would be a dead network).

Run in a MindOCR environment outside the repository (never in CI), from the repository root:

    python -m venv ~/venvs/mindocr && ~/venvs/mindocr/bin/pip install mindspore==2.7.0 mindocr==0.5.0 \
        torch==2.13.0 "huggingface_hub<1.0" opencv-python-headless pyclipper tqdm pyyaml
    ~/venvs/mindocr/bin/pip install "shapely>=2" "pillow>=10.1"    # a second step, as pip requires
    OMP_NUM_THREADS=1 PYTHONPATH=src ~/venvs/mindocr/bin/python benchmarks/parity/mindocr/parity_mindocr.py
    # the table

Training, step by step against MindOCR's own training step (parity_mindocr_train.py, this folder: the cases
``sgd``, ``accum2``, ``ema``, ``adam_cosine``; its options follow ``--train``):

    OMP_NUM_THREADS=2 PYTHONPATH=src ~/venvs/mindocr/bin/python benchmarks/parity/mindocr/parity_mindocr.py \\
        --train [--json]

Evaluation, MindOCR's eval against ``textdet eval`` on one MindSpore-written checkpoint
(benchmarks/parity/mindocr/parity_mindocr_eval.py; its options follow ``--eval``):

    OMP_NUM_THREADS=1 PYTHONPATH=src ~/venvs/mindocr/bin/python benchmarks/parity/mindocr/parity_mindocr.py \\
        --eval --ckpt C --data D

Other runs (same interpreter): trained weights on N(0, 1) noise; random weights on noise (the old check);
another config with the old padding:

    PYTHONPATH=src python benchmarks/parity/mindocr/parity_mindocr.py --input noise
    PYTHONPATH=src python benchmarks/parity/mindocr/parity_mindocr.py --weights random --input noise
    PYTHONPATH=src python benchmarks/parity/mindocr/parity_mindocr.py configs/db_r18_icdar15.yaml \\
        --old-padding
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import sys
import tempfile
import time

import mindspore as ms
import numpy as np
import torch
import yaml
from mindocr.models import build_model as ms_build_model
from parity_mindocr_common import load_into_mindspore  # this folder: shared with training and eval parity

from textdet import textdet_home
from textdet.build.parts import build_dataset, build_model_from_config, build_pipeline
from textdet.build.training import build_loss_from_config
from textdet.commands.recipe import RECIPE, builtin_data_root, ensure_builtin_data
from textdet.config import load_config
from textdet.data.dataset import collate
from textdet.data.targets import LOSS_COLUMNS
from textdet.models import build_model
from textdet.models.mobilenetv3 import SameConv2d
from textdet.runtime.checkpoint import load_weights

CONFIGS = ["configs/db_r18_icdar15.yaml", "configs/db_r50_icdar15.yaml", "configs/dbpp_r50_icdar15.yaml",
           "configs/db_mobilenetv3_icdar15.yaml", "configs/mindocr_db_r50_user.yaml"]
STAGES = ("C2", "C3", "C4", "C5", "neck", "logits", "P")
TOLERANCE = 1e-4  # max |diff| allowed on P
CROP = 160  # training crop: small, so that a ResNet-50 trains at a few seconds a step on a CPU core
NO_DOWNLOAD = ["model.pretrained=false", "model.backbone.pretrained=false"]


def model_section(cfg_path: str) -> dict:
    """The network part of a config's ``model:`` (weights sources dropped: they do not change the network)."""
    section = copy.deepcopy(yaml.safe_load(open(cfg_path))["model"])
    section["backbone"]["pretrained"] = False
    for key in ("pretrained", "resume"):
        section.pop(key, None)
    return section


def textdet_model(cfg_path: str) -> torch.nn.Module:
    cfg = load_config(cfg_path, NO_DOWNLOAD)
    return build_model_from_config(cfg, pretrained_backbone=False)


def recipe(overrides: list[str]):
    """The built-in synthetic recipe, data set generated on first use (as ``textdet train`` without -c)."""
    ensure_builtin_data()
    root = builtin_data_root()
    return load_config(RECIPE, [f"train.dataset.dataset_root={root}", f"eval.dataset.dataset_root={root}",
                                *overrides])


def train_briefly(model: torch.nn.Module, steps: int, batch: int, lr: float, seed: int) -> list[float]:
    """``steps`` Adam steps on the built-in synthetic data, the recipe's pipeline and DBLoss; returns the losses."""
    cfg = recipe([f"train.loader.batch_size={batch}"])
    torch.manual_seed(seed)
    crop = next(t for t in cfg.train.dataset.transform_pipeline if "RandomCropWithBBox" in t)
    crop["RandomCropWithBBox"]["crop_size"] = [CROP, CROP]
    dataset = build_dataset(cfg, "train", build_pipeline(cfg, "train"))
    loss_fn = build_loss_from_config(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    order = np.random.default_rng(seed).permutation(steps * batch) % len(dataset)
    model.train()
    losses = []
    for step in range(steps):
        data = collate([dataset[(step, int(i))] for i in order[step * batch:(step + 1) * batch]])
        loss = loss_fn(model(data["image"]), **{k: data[k] for k in LOSS_COLUMNS})["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


def without_asf(section: dict) -> dict:
    """The DBNet a DBNet++ section starts from (MindOCR's DBNet++ recipe fine-tunes a DBNet checkpoint)."""
    base = copy.deepcopy(section)
    base["neck"].pop("use_asf", None)
    base["neck"].pop("channel_attention", None)
    return base


def trained_state(section: dict, steps: int, batch: int, lr: float, seed: int) -> dict[str, torch.Tensor]:
    """textdet's model of a ``model:`` section after ``train_briefly``, cached by network, steps, batch, lr, seed.

    DBNet++ starts from the trained DBNet of the same backbone, ASF newly initialised, as MindOCR's DBNet++
    config does (``model.pretrained`` = a DBNet checkpoint). From scratch, its ASF scale gates saturate at once
    (the un-normalised FPN outputs reach hundreds) and die within 150 steps: the neck outputs 0.
    """
    key = json.dumps([section, steps, batch, lr, seed], sort_keys=True)
    path = os.path.join(textdet_home(), "parity", hashlib.sha256(key.encode()).hexdigest()[:16] + ".pt")
    if os.path.isfile(path):
        return torch.load(path, weights_only=True)
    torch.manual_seed(seed)
    model = build_model(section["backbone"], section["neck"], section["head"])
    start_from = ""
    if without_asf(section) != section:
        model.load_state_dict(trained_state(without_asf(section), steps, batch, lr, seed), strict=False)
        start_from = " from the trained DBNet"
    start = time.time()
    losses = train_briefly(model, steps, batch, lr, seed)
    print(f"  trained {section['backbone']['name']} + {section['neck']}{start_from}: {steps} steps in "
          f"{time.time() - start:.0f} s, loss {np.mean(losses[:5]):.2f} (first 5) -> {np.mean(losses[-5:]):.2f} "
          "(last 5)", flush=True)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save(model.state_dict(), path + ".tmp")
    os.replace(path + ".tmp", path)
    return model.state_dict()


def randomise_bn(net: ms.nn.Cell, rng: np.random.Generator, calibration_passes: int = 30) -> None:
    """Random BN affine, statistics calibrated on noise (30 training passes, momentum 0.9): a wrong BN mapping shows."""
    for name, p in net.parameters_and_names():
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "beta":
            p.set_data(ms.Tensor(rng.normal(0, 0.1, p.shape).astype(np.float32)))
        elif leaf == "gamma":
            p.set_data(ms.Tensor(rng.uniform(0.5, 1.5, p.shape).astype(np.float32)))
    calibration = ms.Tensor(rng.normal(0, 1, (2, 3, 160, 160)).astype(np.float32))
    net.set_train(True)
    for _ in range(calibration_passes):
        net(calibration)


def input_image(kind: str, size: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """(1, 3, H, W) float32: a held-out synthetic image through the recipe's eval pipeline, or N(0, 1) noise."""
    if kind == "noise":
        return rng.normal(0, 1, (1, 3, *size)).astype(np.float32)
    cfg = recipe([])
    resize = next(t for t in cfg.eval.dataset.transform_pipeline if "DetResize" in t)
    resize["DetResize"]["target_size"] = list(size)
    sample = build_dataset(cfg, "eval", build_pipeline(cfg, "eval"))[0]
    return np.ascontiguousarray(sample["image"][None], dtype=np.float32)


def torchvision_padding(model: torch.nn.Module) -> None:
    """Put back the paddings textdet had before matching MindSpore (to show what parity catches)."""
    if hasattr(model.backbone, "maxpool"):
        model.backbone.maxpool = torch.nn.MaxPool2d(3, 2, 1)
    for m in model.modules():
        if isinstance(m, SameConv2d):
            m.same = (m.kernel_size[0] // 2,) * 4


def torch_stages(model: torch.nn.Module, image: np.ndarray, dtype: torch.dtype) -> list[np.ndarray]:
    with torch.no_grad():
        model.to(dtype)
        levels = model.backbone(torch.from_numpy(image).to(dtype))
        neck = model.neck(levels)
        logits = model.head.segm(neck)  # P = sigmoid(logits); the head's own sigmoid runs in fp32 always
        return [t.double().numpy() for t in (*levels, neck, logits, torch.sigmoid(logits))]


def mindspore_stages(net: ms.nn.Cell, image: np.ndarray) -> list[np.ndarray]:
    levels = net.backbone(ms.Tensor(image))
    neck = net.neck(list(levels))  # DBFPN rewrites its input list
    logits = neck
    for cell in list(net.head.segm.cell_list)[:-1]:  # MindOCR's segm branch ends in its Sigmoid
        logits = cell(logits)
    return [t.asnumpy().astype(np.float64) for t in (*levels, neck, logits, net.head(neck))]


def compare(cfg_path: str, args: argparse.Namespace) -> dict:
    rng = np.random.default_rng(args.seed)
    net = ms_build_model(model_section(cfg_path))
    if args.weights == "trained":
        load_into_mindspore(net, trained_state(model_section(cfg_path), args.steps, args.batch, args.lr, args.seed))
    elif args.weights == "random":
        randomise_bn(net, rng)
    net.set_train(False)
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "mindocr.ckpt")
        ms.save_checkpoint(net, ckpt)
        model = textdet_model(cfg_path)
        load_weights(model, ckpt, "parity")  # strict: every tensor of the model comes from MindOCR's file
    if args.old_padding:
        torchvision_padding(model)
    model.eval()
    image = input_image(args.input, args.size, rng)
    ms_out = mindspore_stages(net, image)
    t32 = torch_stages(model, image, torch.float32)
    t64 = torch_stages(model, image, torch.float64)
    r = {"config": os.path.basename(cfg_path)}
    for stage, m, a, b in zip(STAGES, ms_out, t32, t64, strict=True):
        r[stage] = float(np.abs(m - a).max())
        r[stage + " floor"] = float(np.abs(a - b).max())
    r["MS vs fp64"] = float(np.abs(ms_out[-1] - t64[-1]).max())
    r["neck max"] = float(np.abs(t64[STAGES.index("neck")]).max())  # 0: a dead network, not a comparison
    r["text"] = float((t64[-1] > 0.3).mean())  # share of pixels the post-processor would call text
    return r


def main() -> int:
    if "--train" in sys.argv[1:]:  # the training comparison: its own options (parity_mindocr_train.py)
        import parity_mindocr_train

        return parity_mindocr_train.main([arg for arg in sys.argv[1:] if arg != "--train"])
    if "--eval" in sys.argv[1:]:  # evaluation through MindOCR's eval and textdet eval (parity_mindocr_eval.py)
        import parity_mindocr_eval

        return parity_mindocr_eval.main([arg for arg in sys.argv[1:] if arg != "--eval"])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", default=CONFIGS)
    parser.add_argument("--weights", choices=("trained", "random", "init"), default="trained")
    parser.add_argument("--input", choices=("synth", "noise"), default="synth")
    parser.add_argument("--size", default="320x480", help="HxW of the image (multiples of 32)")
    parser.add_argument("--steps", type=int, default=150, help="training steps for --weights trained")
    parser.add_argument("--batch", type=int, default=4, help="batch size for --weights trained")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate for --weights trained")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--old-padding", action="store_true",
                        help="torchvision-style max-pool/depthwise padding, as textdet had before (shows the gap)")
    args = parser.parse_args()
    args.size = tuple(int(v) for v in args.size.split("x"))
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_seed(args.seed)
    trained = f" ({args.steps} steps x {args.batch}, lr {args.lr:g})" if args.weights == "trained" else ""
    print(f"max |MindOCR - textdet| in fp32, --weights {args.weights}{trained}, --input {args.input} "
          f"{args.size[0]}x{args.size[1]}; (floor) = max |textdet fp32 - textdet fp64| at that stage", flush=True)
    rows, worst = [], 0.0
    for cfg_path in args.configs:
        r = compare(cfg_path, args)
        worst = max(worst, r["P"])
        cells = " | ".join(f"{r[s]:.1e} ({r[s + ' floor']:.1e})" for s in STAGES)
        rows.append(f"| {r['config']} | {cells} | {r['MS vs fp64']:.1e} | {r['neck max']:.0f} | "
                    f"{100 * r['text']:.1f}% |")
    print("| config | " + " | ".join(STAGES) + " | P: MS vs fp64 | max abs neck | P > 0.3 |")
    print("|---" * (len(STAGES) + 4) + "|")
    print("\n".join(rows))
    print(f"worst P max|diff| {worst:.2e} ({'within' if worst < TOLERANCE else 'OVER'} {TOLERANCE:g})")
    return 0 if worst < TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
