"""CPU inference: `textdet eval` of a checkpoint through PyTorch and through ONNX Runtime (the model traced in
memory, what ``system.infer_runtime: auto`` picks on a CPU), against `textdet eval --onnx` of the same
checkpoint's exported file, back to back in one process, on the same photos: once on a split as it is, once on
the same photos cropped to five aspect ratios (five input shapes after the resize, as a folder of mixed photos
gives). Each arm runs ``--rounds`` times, interleaved; the best round of each is compared (contention only ever
adds time). Figures: img/s of the whole evaluation (decode, resize, model, post-processing, metric; tracing
included for the in-memory arm), the f-score of each arm, and each arm's ratio to ``eval --onnx``. First, the
model alone at one input shape (``--shape``, IC15's 1280x720 photos as the written PP-OCR YAML reads them):
PyTorch as evaluation runs it, PyTorch in channels-last memory, and ONNX Runtime, the median of ``--repeats``
forwards each, interleaved; that says where the whole evaluation's difference comes from.

Run (from the repository root; IC15 laid out as on the Results page, "ICDAR2015 halves"; a PP-OCR model
converted with `textdet convert ppocr MODEL.onnx --out ppocr_v4 --name ppocr_v4_mobile`):
``python benchmarks/speed/bench_cpu_inference.py -c ppocr_v4/ppocr_v4_mobile.yaml --data IC15 [--rounds 2]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import cv2
import numpy as np
import torch

from textdet.build.parts import evaluate_checkpoint, evaluate_onnx_model, load_model, resolve_ckpt
from textdet.config import load_config
from textdet.export import export_onnx
from textdet.runtime.onnx_model import OnnxModel

ASPECTS = (16 / 9, 4 / 3, 1.0, 3 / 4, 9 / 16)  # width / height of the crops of the mixed set


def crop_to_aspect(image, labels: list[dict], aspect: float) -> tuple:
    """The centred crop of ``image`` with width / height ``aspect`` (as wide or as tall as the photo allows);
    a region that leaves the crop, even in part, becomes ``###`` (it can neither be found nor missed)."""
    height, width = image.shape[:2]
    crop_w, crop_h = min(width, round(height * aspect)), min(height, round(width / aspect))
    left, top = (width - crop_w) // 2, (height - crop_h) // 2
    cropped = []
    for label in labels:
        points = [[x - left, y - top] for x, y in label["points"]]
        inside = all(0 <= x <= crop_w and 0 <= y <= crop_h for x, y in points)
        clipped = [[min(max(x, 0), crop_w), min(max(y, 0), crop_h)] for x, y in points]
        cropped.append({"transcription": label["transcription"] if inside else "###", "points": clipped})
    return image[top : top + crop_h, left : left + crop_w], cropped


def mixed_set(root: str, out: str) -> str:
    """``root``'s val photos (test_gt.txt) cropped to the five ASPECTS in turn, in MindOCR's layout."""
    os.makedirs(os.path.join(out, "val", "images"), exist_ok=True)
    lines = []
    with open(os.path.join(root, "test_gt.txt"), encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t", 1) for line in f if line.strip()]
    for index, (name, labels) in enumerate(rows):
        image = cv2.imread(os.path.join(root, "val", "images", name))
        cropped, kept = crop_to_aspect(image, json.loads(labels), ASPECTS[index % len(ASPECTS)])
        cv2.imwrite(os.path.join(out, "val", "images", name), cropped, [cv2.IMWRITE_JPEG_QUALITY, 95])
        lines.append(f"{name}\t{json.dumps(kept, ensure_ascii=False)}\n")
    with open(os.path.join(out, "test_gt.txt"), "w", encoding="utf-8") as f:
        f.writelines(lines)
    return out


def arms(config: str, root: str, onnx_path: str) -> dict:
    """The three ways to evaluate the same weights on ``root``'s val split."""
    base = [f"eval.dataset.dataset_root={root}", "eval.dataset.data_dir=val/images",
            "eval.dataset.label_file=test_gt.txt"]
    return {
        "eval (PyTorch)": lambda: evaluate_checkpoint(load_config(config, [*base, "system.infer_runtime=torch"])),
        "eval (auto: ONNX Runtime, traced in memory)": lambda: evaluate_checkpoint(load_config(config, base)),
        "eval --onnx (the exported file)": lambda: evaluate_onnx_model(load_config(config, base), onnx_path),
    }


def measure(config: str, root: str, onnx_path: str, rounds: int) -> dict:
    best: dict[str, dict] = {}
    for _ in range(rounds):
        for name, run in arms(config, root, onnx_path).items():
            result = run()
            if name not in best or result["img_per_s"] > best[name]["img_per_s"]:
                best[name] = result
    reference = best["eval --onnx (the exported file)"]["img_per_s"]
    return {name: {"img_per_s": round(r["img_per_s"], 3), "f-score": round(r["f-score"], 4),
                   "runtime": r["runtime"], "input_shapes": r["input_shapes"],
                   "over_eval_onnx": round(r["img_per_s"] / reference, 3)} for name, r in best.items()}


def model_alone(model: torch.nn.Module, onnx_path: str, height: int, width: int, repeats: int) -> dict:
    """Median milliseconds of one forward of a (1, 3, height, width) input in each runtime, interleaved."""
    model.eval()
    onnx_model = OnnxModel(onnx_path)
    image = np.random.default_rng(0).standard_normal((1, 3, height, width)).astype(np.float32)
    tensor = torch.from_numpy(image)
    forwards = {
        "PyTorch": lambda: model(tensor.contiguous()),
        "PyTorch, channels-last": lambda: model(tensor.contiguous(memory_format=torch.channels_last)),
        "ONNX Runtime": lambda: onnx_model.run(image),
    }
    times: dict[str, list[float]] = {name: [] for name in forwards}
    with torch.inference_mode():
        for round_index in range(repeats + 1):  # the first round warms up and is not counted
            for name, forward in forwards.items():
                # the weights in the layout of the input (the module is converted in place)
                layout = torch.channels_last if name == "PyTorch, channels-last" else torch.contiguous_format
                model.to(memory_format=layout)
                start = time.perf_counter()
                forward()
                if round_index:
                    times[name].append((time.perf_counter() - start) * 1000)
    model.to(memory_format=torch.contiguous_format)
    reference = statistics.median(times["ONNX Runtime"])
    return {name: {"ms": round(statistics.median(values), 1),
                   "over_onnxruntime": round(statistics.median(values) / reference, 2)}
            for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", required=True, help="a textdet YAML with its checkpoint "
                        "(eval.ckpt_load_path), e.g. the one `textdet convert ppocr` writes")
    parser.add_argument("--data", required=True, help="a data set in MindOCR's layout (val/images + test_gt.txt)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--shape", default="864x1536", metavar="HxW", help="the model-alone input (default 864x1536)")
    parser.add_argument("--repeats", type=int, default=5, help="model alone: timed forwards per runtime")
    args = parser.parse_args()
    cfg = load_config(args.config)
    with tempfile.TemporaryDirectory() as tmp:
        model, _, _ = load_model(cfg, None)
        print(f"checkpoint: {resolve_ckpt(cfg, None)[0]}", flush=True)
        onnx_path = export_onnx(model, os.path.join(tmp, "model.onnx"))
        height, width = (int(side) for side in args.shape.lower().split("x"))
        report = {f"model alone, {height}x{width}": model_alone(model, onnx_path, height, width, args.repeats)}
        print(json.dumps(report, indent=2), flush=True)
        report["as it is"] = measure(args.config, args.data, onnx_path, args.rounds)
        mixed = mixed_set(args.data, os.path.join(tmp, "mixed"))
        report["five aspect ratios"] = measure(args.config, mixed, onnx_path, args.rounds)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
