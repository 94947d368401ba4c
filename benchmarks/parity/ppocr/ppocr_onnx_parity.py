"""PP-OCR det import parity on real photos: an ONNX detector against textdet's import of it, image by image.

Run: ``PYTHONPATH=src python benchmarks/parity/ppocr/ppocr_onnx_parity.py {v4,v5,v6} MODEL.onnx IMAGES_DIR
[-n 20]
[--labels GT.txt] [--mean-std imagenet|half]``

Each image goes through the model's own preprocessing (BGR pixels, PaddleOCR's ImageNet mean/std, the resize
rule of the PaddleOCR release that ships the model; ``--mean-std half`` is RapidOCR's 0.5/0.5 instead), then
through onnxruntime and through textdet's import of it (``convert ppocr``'s recognition); prints
max |P_onnx - P_textdet| per image
(goal < 1e-4). With ``--labels`` (a PaddleOCR/MindOCR label file) both maps are also post-processed
(PaddleOCR's det_db defaults: thresh 0.3, box_thresh 0.6, unclip 1.5, 'fast' scores) and scored (ICDAR15
protocol). ``--exact`` also runs textdet's model in float64 and prints both float32 maps' distance from it:
on PP-OCRv6 most of the ONNX-textdet difference is onnxruntime's own float32 ReduceMean over a whole
stride-4 map (4.7e-5 off the exact mean on a 704x1280 input, torch 2.6e-7). A script, not a test.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import numpy as np
import torch

from textdet.commands.ppocr import identify, read_onnx_layers
from textdet.data.decode import DecodeImage
from textdet.data.resize import DetResize, NormalizeImage, ToCHWImage
from textdet.metrics.det_metric import DetMetric
from textdet.models import build_model
from textdet.postprocess.db_postprocess import DBPostprocess

# The inference resize rule of the release: PaddleOCR 2.x's predict_det for v4 (960 'max'), PaddleOCR 3.x's
# text detection default for v5 and v6 (64 'min': only tiny images grow; sides round to the nearest 32).
RESIZE = {
    "v4": {"limit_type": "max", "limit_side_len": 960},
    "v5": {"limit_type": "min", "limit_side_len": 64},
    "v6": {"limit_type": "min", "limit_side_len": 64},
}
MEAN_STD = {"imagenet": ("imagenet", "imagenet"), "half": ([127.5] * 3, [127.5] * 3)}


def read_labels(path: Path) -> dict[str, tuple[list[np.ndarray], np.ndarray]]:
    """Image file name -> (polygons, ignore tags) from a ``name<TAB>[{"transcription", "points"}]`` file."""
    labels = {}
    for line in path.read_text(encoding="utf-8-sig").splitlines():
        if not line.strip():
            continue
        name, annotation = line.split("\t", 1)
        boxes = json.loads(annotation)
        polys = [np.asarray(box["points"], dtype=np.float32) for box in boxes]
        ignore = np.array([box["transcription"] in ("###", "*") for box in boxes], dtype=bool)
        labels[Path(name).name] = (polys, ignore)
    return labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", choices=sorted(RESIZE))
    parser.add_argument("model", help="the ONNX detector")
    parser.add_argument("images", help="a folder of .jpg/.png photos")
    parser.add_argument("-n", type=int, default=20, help="how many images (sorted by name; 0: all)")
    parser.add_argument("--labels", type=Path, help="label file: also score both maps")
    parser.add_argument("--mean-std", choices=sorted(MEAN_STD), default="imagenet")
    parser.add_argument("--exact", action="store_true", help="also compare with a float64 run of textdet's model")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import onnxruntime as ort

    torch.set_num_threads(args.threads)
    resize = RESIZE[args.version]
    architecture, state, release = identify(read_onnx_layers(args.model), args.model)
    print(f"{args.model}: {release}")
    model = build_model(**architecture.network)
    model.load_state_dict(state)
    model.eval()
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    mean, std = MEAN_STD[args.mean_std]
    steps = [DecodeImage(img_mode="BGR"), DetResize(**resize, rounding="nearest"),
             NormalizeImage(mean=mean, std=std), ToCHWImage()]
    paths = sorted(p for p in Path(args.images).iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
    paths = paths[: args.n] if args.n else paths
    labels = read_labels(args.labels) if args.labels else None
    post = DBPostprocess(binary_thresh=0.3, box_thresh=0.6, expand_ratio=1.5, score_mode="fast")
    metrics = {"onnx": DetMetric(), "textdet": DetMetric()}
    exact_model = copy.deepcopy(model).double() if args.exact else None
    diffs, exact_diffs, rng, start = [], [], np.random.default_rng(0), time.perf_counter()
    for path in paths:
        sample = {"img_path": str(path)}
        sample = steps[0](sample, rng)
        sample["shape_list"] = [*sample["raw_img_shape"], 1.0, 1.0]
        for step in steps[1:]:
            sample = step(sample, rng)
        image = sample["image"][None]
        reference = session.run(None, {input_name: image})[0]
        with torch.no_grad():
            ours = model(torch.from_numpy(image))["binary"].numpy()
        diffs.append(float(np.abs(reference - ours).max()))
        line = f"{path.name}: input {image.shape[2]}x{image.shape[3]}, max |diff| {diffs[-1]:.2e}"
        if exact_model is not None:
            with torch.no_grad():
                exact = exact_model(torch.from_numpy(image).double())["binary"].numpy()
            exact_diffs.append((float(np.abs(reference - exact).max()), float(np.abs(ours - exact).max())))
            line += f"; from float64: onnx {exact_diffs[-1][0]:.2e}, textdet {exact_diffs[-1][1]:.2e}"
        print(line, flush=True)
        if labels is not None:
            polys, ignore = labels[path.name]
            shape = np.asarray([sample["shape_list"]], dtype=np.float32)
            for key, prob in (("onnx", reference), ("textdet", ours)):
                metrics[key].update([post(prob, shape)[0]["polys"]], [polys], [ignore])
    summary = {"model": Path(args.model).name, "version": args.version, "mean_std": args.mean_std,
               "resize": resize, "images": len(paths), "max_abs_diff": max(diffs),
               "median_abs_diff": float(np.median(diffs)), "seconds": round(time.perf_counter() - start, 1)}
    if exact_diffs:
        summary["max_abs_diff_from_float64"] = {"onnx": max(d[0] for d in exact_diffs),
                                                "textdet": max(d[1] for d in exact_diffs)}
    if labels is not None:
        summary["f-score"] = {key: round(m.compute()["f-score"], 4) for key, m in metrics.items()}
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
