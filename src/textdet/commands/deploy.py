"""``textdet predict`` and ``textdet export``: the command-line glue around ``predict.Detector`` and ``export``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Sequence

import cv2
import numpy as np

from textdet import export
from textdet.build import parts
from textdet.config import Config, load_config
from textdet.data import buckets as bucketing
from textdet.data.annotations import plain_points
from textdet.data.formats import write_labelme
from textdet.data.resize import DetResize
from textdet.data.tiling import TileSpec, parse_tile
from textdet.device import cpu_int8_fast
from textdet.errors import DataError, TextdetError
from textdet.export_defaults import DEFAULT_EXPORT_HW
from textdet.predict import Detector, Preprocess, find_images, read_image
from textdet.quantize import CalibrationPhotos, quantize_int8
from textdet.runtime.checkpoint import thresholds_note
from textdet.runtime.onnx_model import INPUT_NAME, OUTPUT_NAME

logger = logging.getLogger("textdet")
DRAW_COLOR_BGR = (0, 255, 0)


def draw_polys(image_rgb: np.ndarray, polys: Sequence[np.ndarray], path: str) -> None:
    """Write ``image_rgb`` with ``polys`` outlined (green, 2 px) to ``path``."""
    canvas = np.ascontiguousarray(image_rgb[..., ::-1])
    pts = [np.round(np.asarray(p)).astype(np.int32).reshape(-1, 1, 2) for p in polys]
    cv2.polylines(canvas, pts, True, DRAW_COLOR_BGR, 2)
    if not cv2.imwrite(path, canvas):
        raise TextdetError(f"cannot write {path}")


def write_results(out_dir: str, results: dict[str, dict]) -> tuple[str, str]:
    """``predictions.json`` ({path: [{"points", "score"}]}) and MindOCR's ``det_results.txt``."""
    preds = {path: [{"points": plain_points(p), "score": round(float(s), 4)}
                    for p, s in zip(r["polys"], r["scores"], strict=True)] for path, r in results.items()}
    json_path = os.path.join(out_dir, "predictions.json")
    with open(json_path, "w", encoding="utf-8") as f:  # one image per line: readable and diff-able
        f.write("{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in preds.items()) + "\n}\n")
    txt_path = os.path.join(out_dir, "det_results.txt")
    with open(txt_path, "w", encoding="utf-8") as f:
        for path, r in results.items():
            f.write(f"{os.path.basename(path)}\t{json.dumps([plain_points(p) for p in r['polys']])}\n")
    return json_path, txt_path


def predict_config(args: argparse.Namespace) -> Config | None:
    """The config ``textdet predict`` options name: ``-c`` with ``-o``, or ``-o`` on the built-in defaults, or
    None (an ONNX model with MindOCR's inference defaults); usage errors as TextdetError."""
    if args.batch_size < 1:
        raise TextdetError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.onnx and args.ckpt:
        raise TextdetError("give either --ckpt (with -c) or --onnx, not both")
    if not args.onnx and not args.config:
        raise TextdetError("give -c CONFIG --ckpt PATH (a PyTorch checkpoint) or --onnx PATH")
    if args.config:
        return load_config(args.config, args.opt)
    # -o on the built-in defaults; an override replaces a section, so keep the post-processor's name
    if args.opt:
        return load_config(None, ["postprocess.name=DBPostprocess", *args.opt])
    return None


def build_detector(args: argparse.Namespace, cfg: Config | None) -> Detector:
    """The Detector that ``textdet predict`` options describe."""
    buckets = parse_shape_buckets(getattr(args, "shape_buckets", None))
    tile = tile_spec(args, cfg)
    if args.onnx:
        return parts.build_onnx_detector(args.onnx, cfg, device=args.device, batch_size=args.batch_size,
                                         shape_buckets=buckets, tile=tile)
    return parts.build_detector(cfg, args.ckpt, device=args.device, batch_size=args.batch_size,
                                shape_buckets=buckets, tile=tile)


def tile_spec(args: argparse.Namespace, cfg: Config | None) -> TileSpec | None:
    """``--tile HxW`` with ``--overlap`` (default: the config's eval.tile_overlap, else a fifth of the
    tile); None without --tile."""
    if not getattr(args, "tile", None):
        return None
    overlap = args.overlap
    if overlap is None and cfg is not None:
        overlap = cfg.eval.tile_overlap
    return parse_tile(args.tile, overlap)


def parse_shape_buckets(text: str | None) -> str | list | None:
    """``--shape-buckets``: ``auto`` or ``HxW[,HxW...]`` (e.g. ``736x1280,1280x736``) as
    ``eval.shape_buckets`` takes it; None when not given."""
    if text is None or text == "auto":
        return text
    shapes = []
    for part in text.split(","):
        height, _, width = part.strip().partition("x")
        if not (height.isdigit() and width.isdigit() and int(height) > 0 and int(width) > 0):
            raise TextdetError("--shape-buckets: expected auto or HxW[,HxW...] such as 736x1280,1280x736, "
                               f"got {text!r}")
        shapes.append([int(height), int(width)])
    return shapes


def buckets_for_files(detector: Detector, paths: Sequence[str]) -> None:
    """``auto`` buckets chosen once from every input's resized size (read from the file headers), so that
    the whole folder runs through the same few shapes; unreadable files are left to the prediction loop."""
    sizes = []
    for path in paths:
        try:
            sizes.append(bucketing.resized_size(bucketing.stored_size(path), detector.preprocess.resize))
        except DataError:
            continue
    if sizes:
        detector.shape_buckets = bucketing.choose_buckets(sizes)


def run_predict(args: argparse.Namespace) -> int:
    """``textdet predict``: detect, write predictions.json + det_results.txt (+ drawn images), summarise."""
    paths = find_images(args.inputs)
    labelme = getattr(args, "format", "json") == "labelme"
    if labelme and any(os.path.splitext(os.path.basename(p))[0] == "predictions" for p in paths):
        raise TextdetError("an image named predictions.* would overwrite predictions.json; rename it")
    cfg = predict_config(args)
    detector = build_detector(args, cfg)
    if detector.shape_buckets == "auto":
        buckets_for_files(detector, paths)
    os.makedirs(args.out, exist_ok=True)
    results: dict[str, dict] = {}
    t0, skipped = time.perf_counter(), 0
    step = max(detector.batch_size, 1) * 4  # bounded memory on big folders, still full batches
    for start in range(0, len(paths), step):
        batch, images = [], []
        for path in paths[start : start + step]:
            try:
                images.append(read_image(path))
                batch.append(path)
            except DataError as e:
                logger.warning("predict: skipped %s: %s", path, e)
                skipped += 1
        for path, image, res in zip(batch, images, detector.predict(images) if images else [], strict=True):
            results[path] = res
            stem = os.path.join(args.out, os.path.splitext(os.path.basename(path))[0])
            if args.draw:
                draw_polys(image, res["polys"], f"{stem}_det.jpg")
            if labelme:  # no transcription yet: the reviewer types it as the label
                anns = [{"transcription": "", "points": p, "score": s} for p, s in zip(res["polys"], res["scores"],
                                                                                       strict=True)]
                write_labelme([(os.path.basename(path), anns)], args.out, os.path.dirname(path))
    seconds = time.perf_counter() - t0
    if not results:
        raise TextdetError(f"none of the {len(paths)} input images could be read (see the warnings above)")
    json_path, txt_path = write_results(args.out, results)
    boxes = sum(len(r["polys"]) for r in results.values())
    extra = f", {skipped} unreadable skipped" if skipped else ""
    shapes = len(detector.input_shapes)
    print(f"predict: {len(results)} images, {boxes} boxes, {len(results) / max(seconds, 1e-9):.1f} img/s "
          f"({detector.runtime or 'torch'}), "
          f"{shapes} input shape{'s' if shapes != 1 else ''}{extra}; "
          f"wrote {json_path}, {txt_path}" + (f" and {len(results)} drawn images" if args.draw else "")
          + (f", {len(results)} labelme files" if labelme else ""))
    if detector.thresholds_note:
        print(f"predict: {detector.thresholds_note}")
    if detector.shrunk:
        print(f"predict: {shrink_note(detector, cfg)}")
    return 0


def shrink_note(detector: Detector, cfg: Config | None) -> str:
    """What to do about pages resized below the scale the detector was trained at: read them in tiles."""
    _, tile = parts.tile_advice(cfg)
    return (f"{len(detector.shrunk)} page(s) were resized to as little as {min(detector.shrunk):.2f}x, below "
            f"{detector.shrink_limit:.2f}x (half the smallest scale this detector trained at): their words "
            "may be too small to find. Read them at their own pixels in tiles: "
            f"--tile {tile.height}x{tile.width} --overlap {tile.overlap}")


def run_export(args: argparse.Namespace) -> int:
    """``textdet export``: checkpoint -> ONNX, checked against PyTorch on a synthetic image; with
    ``--precision int8`` that fp32 model is quantized, both are scored on the eval split, and the int8 one is
    written only when it keeps its f-score within ``--max-drop``."""
    cfg = load_config(args.config, args.opt)
    if args.precision == "int8":
        with tempfile.TemporaryDirectory(prefix="textdet_int8_") as tmp:
            fp32_path = export_checked(cfg, args, os.path.join(tmp, "fp32.onnx"))
            return export_int8(cfg, args, fp32_path, tmp)
    export_checked(cfg, args, args.out)
    return 0


def export_checked(cfg: Config, args: argparse.Namespace, path: str) -> str:
    """The checkpoint exported to ``path`` and checked: ONNX Runtime's map and boxes against PyTorch's."""
    model, _, adopted = parts.load_model(cfg, args.ckpt, parts.PREDICT_CKPT_KEYS)
    postprocess, preprocess = parts.build_postprocess_from_config(cfg), parts.preprocess_from_config(cfg)
    model.eval()
    default = tuple(preprocess.resize.target_size or DEFAULT_EXPORT_HW)
    h, w = args.height or default[0], args.width or default[1]
    export.export_onnx(model, path, h, w, args.opset)
    print(f"export: wrote {os.path.abspath(path)} ({os.path.getsize(path) / 1e6:.1f} MB, opset {args.opset}, "
          f"input {INPUT_NAME!r} (N, 3, H, W) dynamic, output {OUTPUT_NAME!r})")
    check_pre = Preprocess(DetResize(target_size=(h, w), keep_ratio=False, limit_type="none"),
                           preprocess.normalize, preprocess.img_mode)
    check = export.compare_onnx(model, path, check_pre, postprocess, export.synthetic_image(h, w))
    boxes = "identical" if check["identical_boxes"] else f"same within {export.BOX_TOLERANCE_PX:g} px"
    n = len(check["torch"]["polys"])
    if check["max_abs_diff"] > export.MAX_ABS_DIFF:
        raise TextdetError(f"ONNX Runtime disagrees with PyTorch on a {h}x{w} synthetic image: max |P diff| = "
                           f"{check['max_abs_diff']:.2e} > {export.MAX_ABS_DIFF:g} ({path} was written; do "
                           "not use it)")
    if not check["same_boxes"]:
        raise TextdetError(f"ONNX Runtime boxes differ from PyTorch's on a {h}x{w} synthetic image "
                           f"({len(check['onnx']['polys'])} vs {n}; max |P diff| {check['max_abs_diff']:.2e})")
    print(f"export: onnxruntime check on a {h}x{w} synthetic image: max |P_onnx - P_torch| = "
          f"{check['max_abs_diff']:.2e}, boxes {boxes} ({n})")
    if adopted:  # an ONNX file holds no post-processing: say what to pass with it
        overrides = " ".join(f"-o postprocess.{key}={value:g}" for key, value in adopted.items())
        print(f"export: {thresholds_note(adopted)}; the ONNX file holds no thresholds: run predict --onnx "
              f"and eval --onnx with {overrides}")
    return path


def export_int8(cfg: Config, args: argparse.Namespace, fp32_path: str, tmp: str) -> int:
    """Quantize ``fp32_path``, score both models on the eval split, write the int8 one to ``args.out`` only
    when its f-score is within ``args.max_drop`` of fp32's (else an error, and nothing at ``args.out``)."""
    photos, source = parts.calibration_photos(cfg, args.calib, args.calib_photos)
    print(f"export: calibrating int8 on {source}", flush=True)
    int8_path = os.path.join(tmp, "int8.onnx")
    quantize_int8(fp32_path, int8_path, CalibrationPhotos(photos, parts.preprocess_from_config(cfg)))
    print("export: scoring the fp32 and the int8 model on the eval split", flush=True)
    scores = {"fp32": parts.evaluate_onnx_model(cfg, fp32_path),
              "int8": parts.evaluate_onnx_model(cfg, int8_path)}
    sizes = {"fp32": os.path.getsize(fp32_path), "int8": os.path.getsize(int8_path)}
    for name, result in scores.items():
        print(f"export: {name}: recall {result['recall']:.4f}, precision {result['precision']:.4f}, f-score "
              f"{result['f-score']:.4f}, {result['img_per_s']:.2f} img/s ({result['images']} images), "
              f"{sizes[name] / 1e6:.2f} MB")
    drop = scores["fp32"]["f-score"] - scores["int8"]["f-score"]
    if drop > args.max_drop:
        raise TextdetError(f"the int8 model scores {scores['int8']['f-score']:.4f} on the eval split against "
                           f"fp32's {scores['fp32']['f-score']:.4f}, a drop of {drop:.4f} > --max-drop "
                           f"{args.max_drop:g}: not written to {args.out}. Calibrate on photos like the "
                           "ones you will read (--calib), or deploy the fp32 export")
    folder = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(folder, exist_ok=True)
    partial = os.path.join(folder, f".tmp_{os.path.basename(args.out)}")  # renamed whole: never half a file
    shutil.copyfile(int8_path, partial)
    os.replace(partial, args.out)
    speed = scores["int8"]["img_per_s"] / max(scores["fp32"]["img_per_s"], 1e-9)
    print(f"export: wrote {os.path.abspath(args.out)} (int8, {sizes['int8'] / sizes['fp32']:.2f} of fp32's "
          f"size, {speed:.2f}x its img/s here, f-score {-drop:+.4f})")
    if not cpu_int8_fast():
        print("export: this CPU has no int8 dot-product instructions (VNNI or AMX): ONNX Runtime's int8 "
              "kernels run no faster than fp32 here; the file is smaller, and faster where the CPU has "
              "them")
    return 0
