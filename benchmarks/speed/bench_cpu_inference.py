"""CPU inference: `textdet eval` of a checkpoint through PyTorch and through ONNX Runtime (the model traced in
memory, what ``system.infer_runtime: auto`` picks on a CPU), against `textdet eval --onnx` of the same
checkpoint's exported file, back to back in one process, on the same photos: once on a split as it is, once on
the same photos cropped to five aspect ratios (five input shapes after the resize, as a folder of mixed photos
gives). Each arm runs ``--rounds`` times, interleaved; the best round of each is compared (contention only ever
adds time). Figures: img/s of the whole evaluation (decode, resize, model, post-processing, metric; tracing
included for the in-memory arm), the f-score of each arm, and each arm's ratio to ``eval --onnx``.

Run (from the repository root; IC15 laid out as on the Results page, "ICDAR2015 halves"; a PP-OCR model
converted with `textdet convert ppocr MODEL.onnx --out ppocr_v4 --name ppocr_v4_mobile`):
``python benchmarks/speed/bench_cpu_inference.py -c ppocr_v4/ppocr_v4_mobile.yaml --data IC15 [--rounds 2]``
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import cv2

from textdet.build.parts import evaluate_checkpoint, evaluate_onnx_model, load_model, resolve_ckpt
from textdet.config import load_config
from textdet.export import export_onnx

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", required=True, help="a textdet YAML with its checkpoint "
                        "(eval.ckpt_load_path), e.g. the one `textdet convert ppocr` writes")
    parser.add_argument("--data", required=True, help="a data set in MindOCR's layout (val/images + test_gt.txt)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    cfg = load_config(args.config)
    with tempfile.TemporaryDirectory() as tmp:
        model, _, _ = load_model(cfg, None)
        print(f"checkpoint: {resolve_ckpt(cfg, None)[0]}", flush=True)
        onnx_path = export_onnx(model, os.path.join(tmp, "model.onnx"))
        report = {"as it is": measure(args.config, args.data, onnx_path, args.rounds)}
        mixed = mixed_set(args.data, os.path.join(tmp, "mixed"))
        report["five aspect ratios"] = measure(args.config, mixed, onnx_path, args.rounds)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
