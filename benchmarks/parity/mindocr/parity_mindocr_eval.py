"""Evaluation parity with MindOCR: one MindSpore-written checkpoint through MindOCR's eval and ``textdet eval``.

A trained textdet checkpoint (``--ckpt``; a model that finds text, so that post-processing and the metric see real
boxes) goes into MindOCR's network (the config's DBNet-ResNet at its width) and MindSpore writes it as a ``.ckpt``:
the one file both sides then read. MindOCR's side is its ``tools/eval.py`` wiring: ``build_dataset`` (the config's
eval pipeline, ``is_train=False``), ``build_postprocess``, ``build_metric`` and ``Evaluator``. textdet's side is the
command ``textdet eval -c CONFIG --ckpt THAT.ckpt --json`` in a subprocess. Same images: the first ``--images``
entries of the eval label file (0: all).

MindOCR's ``DetMetric`` counts a second detection of an already matched GT word as nothing (neither a true nor a
false positive), where ICDAR 2015's one-to-one rule (textdet) counts it as a false positive. Reported: both sides'
recall / precision / f-score, the count of such duplicates, and MindOCR's own detections scored by textdet's metric
(equal to ``textdet eval`` when the maps and the post-processing agree box for box).

Run in the MindOCR environment (venv in benchmarks/parity/mindocr/parity_mindocr.py; never in CI), from the
repository root:

    OMP_NUM_THREADS=1 PYTHONPATH=src ~/venvs/mindocr/bin/python benchmarks/parity/mindocr/parity_mindocr.py \\
        --eval \\
        --ckpt best.ckpt --data IC15 [-o model.backbone.name=det_resnet18 ...] [--images 100] [--json-file F]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import addict
import mindspore as ms
import numpy as np
import torch
import yaml
from mindocr.data import build_dataset as ms_build_dataset
from mindocr.metrics import build_metric
from mindocr.postprocess import build_postprocess
from mindocr.utils.evaluator import Evaluator
from parity_mindocr_common import USER_CONFIG, MsDBNet, load_into_mindspore  # this folder's parity helpers
from shapely.geometry import Polygon

from textdet.build.parts import build_model_from_config
from textdet.config import load_config
from textdet.metrics import DetMetric
from textdet.runtime.checkpoint import load_weights

IOU = 0.5  # MindOCR's DetectionIoUEvaluator: min_iou, min_intersect


class Recorder:
    """A metric for MindOCR's Evaluator that keeps what it is handed (detections, GT, ignore tags per image)."""

    def __init__(self) -> None:
        self.metric_names: list[str] = []
        self.images: list[tuple[list[np.ndarray], np.ndarray, np.ndarray]] = []

    def clear(self) -> None:
        self.images = []

    def update(self, preds: dict, gts: list) -> None:
        polys, ignores = gts[0].asnumpy(), gts[1].asnumpy()
        for index, dets in enumerate(preds["polys"]):
            self.images.append(([np.asarray(d, np.float64) for d in dets], polys[index], ignores[index]))

    def eval(self) -> dict:
        return {}


def subset_root(data: str, label_file: str, data_dir: str, images: int, root: str) -> str:
    """A dataset root with the first ``images`` lines of the label file and a link to the image folder."""
    with open(os.path.join(data, label_file)) as f:
        lines = [line for line in f if line.strip()]
    with open(os.path.join(root, "labels.txt"), "w") as f:
        f.writelines(lines[:images] if images else lines)
    os.symlink(os.path.abspath(os.path.join(data, data_dir)), os.path.join(root, "images"))
    return root


def count_duplicates(dets: list[np.ndarray], gt_polys: np.ndarray, ignores: np.ndarray) -> int:
    """Detections that MindOCR's DetMetric gives to a GT word another detection already took (its loop: a
    detection inside a don't-care word is dropped; each other one takes the first GT with IoU > 0.5)."""
    gts = [Polygon(p) for p, ignore in zip(gt_polys, ignores, strict=True) if not ignore]
    gts = [g for g in gts if g.is_valid]
    cares = [Polygon(p) for p, ignore in zip(gt_polys, ignores, strict=True) if ignore]
    cares = [g for g in cares if g.is_valid]
    taken, duplicates = set(), 0
    for det in (Polygon(d) for d in dets):
        if not det.is_valid:
            continue
        if det.area > 0 and any(det.intersection(c).area / det.area > IOU for c in cares):
            continue
        for index, gt in enumerate(gts):
            union = det.union(gt).area
            if union > 0 and det.intersection(gt).area / union > IOU:
                duplicates += index in taken
                taken.add(index)
                break
    return duplicates


def mindocr_side(raw: dict, ckpt: str, width: int, neck: int, backbone: str) -> tuple[dict, Recorder]:
    """MindOCR's tools/eval.py: its loader, network (from the .ckpt), post-processing, metric and Evaluator."""
    cfg = addict.Dict(raw)
    loader = ms_build_dataset(cfg.eval.dataset.to_dict(), cfg.eval.loader.to_dict(), num_shards=None, shard_id=None,
                              is_train=False)
    net = MsDBNet(width, neck, backbone)
    ms.load_param_into_net(net, ms.load_checkpoint(ckpt), strict_load=True)
    net.set_train(False)
    recorder = Recorder()
    evaluator = Evaluator(net, loader, None, build_postprocess(cfg.postprocess.to_dict()),
                          [build_metric(cfg.metric.to_dict(), device_num=1), recorder],
                          loader_output_columns=cfg.eval.dataset.output_columns,
                          input_indices=cfg.eval.dataset.net_input_column_index,
                          label_indices=cfg.eval.dataset.label_column_index, num_epochs=1)
    return evaluator.eval(), recorder


def textdet_side(config: str, overrides: list[str], ckpt: str) -> dict:
    """``textdet eval --json`` in a subprocess: the command a user runs."""
    command = [sys.executable, "-m", "textdet", "eval", "-c", config, "--ckpt", ckpt, "--json", "--no-progress"]
    for item in overrides:
        command += ["-o", item]
    result = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def textdet_metric(images: list) -> dict:
    """MindOCR's own detections scored by textdet's DetMetric (ICDAR 2015, one-to-one)."""
    metric = DetMetric()
    for dets, gt_polys, ignores in images:
        metric.update([dets], [list(gt_polys.astype(np.float64))], [np.asarray(ignores, bool)])
    return {key: float(value) for key, value in metric.compute().items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", required=True, help="a trained textdet checkpoint of the config's network")
    parser.add_argument("--data", required=True, help="dataset root in MindOCR's layout (eval data_dir, label_file)")
    parser.add_argument("-c", "--config", default=USER_CONFIG)
    parser.add_argument("-o", "--opt", action="append", default=[], help="config override, both sides")
    parser.add_argument("--images", type=int, default=0, help="the first N images of the label file (0: all)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads of each framework")
    parser.add_argument("--json-file", help="write the result here too")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    ms.device_context.cpu.op_tuning.threads_num(args.threads)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    base = load_config(args.config, [*args.opt, "model.backbone.pretrained=false"])
    with tempfile.TemporaryDirectory() as tmp:
        root = subset_root(args.data, base.eval.dataset.label_file, base.eval.dataset.data_dir, args.images, tmp)
        data_opts = [f"eval.dataset.dataset_root={root}", "eval.dataset.data_dir=images",
                     "eval.dataset.label_file=labels.txt", "eval.loader.num_workers=1"]
        cfg = load_config(args.config, [*args.opt, "model.backbone.pretrained=false", *data_opts])
        model = build_model_from_config(cfg, pretrained_backbone=False)
        load_weights(model, args.ckpt, "--ckpt")
        backbone, neck = cfg.model.backbone, cfg.model.neck["out_channels"]
        width, name = backbone.get("width", 64), backbone["name"]
        net = MsDBNet(width, neck, name)
        load_into_mindspore(net, model.state_dict())
        ms_ckpt = os.path.join(tmp, "mindocr.ckpt")
        ms.save_checkpoint(net, ms_ckpt)  # the one checkpoint: both sides read this file
        raw = yaml.safe_load(open(args.config))
        raw["eval"]["dataset"].update(dataset_root=root, data_dir="images", label_file="labels.txt")
        raw["eval"]["loader"]["num_workers"] = 1
        for item in args.opt:  # the post-processing keys the caller set, on MindOCR's side too
            key, value = item.split("=", 1)
            if key.startswith("postprocess."):
                raw["postprocess"][key.split(".", 1)[1]] = yaml.safe_load(value)
        start = time.perf_counter()
        ms_metrics, recorder = mindocr_side(raw, ms_ckpt, width, neck, name)
        ms_seconds = time.perf_counter() - start
        td_metrics = textdet_side(args.config, [*args.opt, "model.backbone.pretrained=false", *data_opts], ms_ckpt)
        td_seconds = time.perf_counter() - start - ms_seconds
    images = recorder.images
    result = {
        "images": len(images), "gt_words": int(sum((~np.asarray(ig, bool)).sum() for _, _, ig in images)),
        "detections": sum(len(d) for d, _, _ in images),
        "mindocr": {k: float(ms_metrics[k]) for k in ("recall", "precision", "f-score")},
        "textdet": {k: float(td_metrics[k]) for k in ("recall", "precision", "f-score")},
        "mindocr_detections_textdet_metric": textdet_metric(images),
        "mindocr_duplicates": sum(count_duplicates(*image) for image in images),
        "wall_s": {"mindocr": round(ms_seconds, 1), "textdet": round(td_seconds, 1)},
    }
    print(json.dumps(result, indent=1))
    if args.json_file:
        with open(args.json_file, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
