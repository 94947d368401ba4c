"""PP-OCR import parity: the original ONNX model against textdet's converted model, same data and settings.

Run: ``python benchmarks/parity/ppocr/ppocr_parity.py MODEL.onnx DATA_ROOT [--out DIR]``

``DATA_ROOT`` is an ICDAR2015-layout folder as ``textdet synth`` writes (``val/images``, ``test_gt.txt``).
The script runs ``textdet convert ppocr``, then on every eval image (the written YAML's pipeline:
DetResize 960 'max' with nearest rounding, ImageNet mean/std on BGR pixels) compares the probability
maps of onnxruntime and of the converted PyTorch model, and scores both with ``textdet eval`` logic
(``--onnx`` for the original). Prints one JSON object. A script, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import numpy as np
import torch

from textdet.build import parts
from textdet.build.parts import evaluate_checkpoint, evaluate_onnx_model
from textdet.commands.ppocr import convert_ppocr
from textdet.config import load_config
from textdet.runtime.onnx_model import OnnxModel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("data_root")
    parser.add_argument("--out", help="where to write the converted model (default: a temporary folder)")
    args = parser.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="ppocr_")
    summary = convert_ppocr(args.model, out)
    cfg = load_config(summary["config"], [f"eval.dataset.dataset_root={args.data_root}"])
    model = parts.build_model_from_config(cfg, pretrained_backbone=False).eval()
    onnx_model = OnnxModel(args.model)
    dataset = parts.build_dataset(cfg, "eval", parts.build_pipeline(cfg, "eval"))
    diffs = []
    for i in range(len(dataset)):
        image = np.ascontiguousarray(dataset[i]["image"][None], dtype=np.float32)
        with torch.no_grad():
            ours = model(torch.from_numpy(image))["binary"].numpy()
        diffs.append(float(np.abs(ours - onnx_model.run(image)).max()))
    keys = ("recall", "precision", "f-score")
    reference = evaluate_onnx_model(cfg, args.model)
    converted = evaluate_checkpoint(cfg)
    print(json.dumps({
        "model": os.path.basename(args.model), "images": len(dataset), "map_max_abs_diff": max(diffs),
        "onnx": {k: reference[k] for k in keys}, "converted": {k: converted[k] for k in keys},
    }, indent=2))


if __name__ == "__main__":
    main()
