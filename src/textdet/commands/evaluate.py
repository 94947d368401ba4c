"""``textdet eval``: a checkpoint or an ONNX model evaluated on the config's eval set, and with ``--report
DIR`` the report page of that evaluation (``--compare``: of two models on the same photos)."""

from __future__ import annotations

import copy
import os
import time
from datetime import datetime, timezone

from textdet.build.parts import (
    build_metric_from_config,
    evaluate_checkpoint,
    evaluate_onnx_model,
    overridden_keys,
)
from textdet.config import Config
from textdet.errors import TextdetError
from textdet.postprocess.db_postprocess import THRESHOLD_KEYS
from textdet.report import ModelRun, score_photos, write_report
from textdet.report.figures import pyplot
from textdet.runtime.checkpoint import thresholds_note
from textdet.runtime.evaluator import sweep_report


def evaluate_model(cfg: Config, ckpt: str | None, onnx: str | None, device: str | None, progress: bool,
                   sweep: bool, per_image: bool = False) -> dict:
    """``evaluate_onnx_model`` for an ONNX model, else ``evaluate_checkpoint`` (``ckpt``, or the config's)."""
    if onnx:
        return evaluate_onnx_model(cfg, onnx, device=device, progress=progress, sweep=sweep,
                                   per_image=per_image)
    return evaluate_checkpoint(cfg, ckpt=ckpt, device=device, progress=progress, sweep=sweep,
                               per_image=per_image)


def threshold_sources(cfg: Config, adopted: dict[str, float]) -> dict[str, str]:
    """Where each post-processing threshold came from: the checkpoint's training run, an -o override, the
    YAML."""
    overridden = overridden_keys(cfg)
    sources = {}
    for key in THRESHOLD_KEYS:
        if key in adopted:
            sources[key] = "from the checkpoint: its training run chose it on training photos set aside"
        elif f"postprocess.{key}" in overridden:
            sources[key] = "from -o"
        else:
            sources[key] = "from the config"
    return sources


def model_run(cfg: Config, result: dict) -> ModelRun:
    """``result`` (an evaluation with ``per_image``) as the report's ModelRun; ``cfg``: the config it ran
    with (its postprocess section holds the thresholds used, the checkpoint's when adopted)."""
    path = result["checkpoint"]
    label = os.path.join(os.path.basename(os.path.dirname(path)), os.path.basename(path))
    photos = score_photos(result.pop("per_image"), build_metric_from_config(cfg))
    thresholds = {key: float(cfg.postprocess[key]) for key in THRESHOLD_KEYS}
    source = threshold_sources(cfg, result.get("thresholds_from_checkpoint", {}))
    return ModelRun(label, result, photos, thresholds, source)


def compare_args(path: str) -> dict:
    """``--compare PATH`` as evaluate_model's ckpt/onnx arguments; a missing file fails before any
    evaluation."""
    if not os.path.isfile(path):
        raise TextdetError(f"--compare {path}: file not found; give a textdet checkpoint (.ckpt) or an ONNX "
                           "model (.onnx) to compare with")
    if path.lower().endswith(".onnx"):
        return {"ckpt": None, "onnx": path}
    return {"ckpt": path, "onnx": None}


def run_report(cfg: Config, config_path: str, ckpt: str | None, onnx: str | None, device: str | None,
               progress: bool, report_dir: str, compare: str | None = None) -> dict:
    """Evaluate (with the threshold grid), write ``report_dir/index.html`` and return the main model's result
    with "report" (the page's path, seconds, megabytes), "error_kinds" (the page's tally of detection and word
    kinds, ``ErrorTally.summary()``) and, with ``compare``, "compare" (its figures)."""
    pyplot()  # a missing matplotlib fails before the evaluation, not after it
    other = compare_args(compare) if compare else None
    if "img_path" not in cfg.eval.dataset.output_columns:  # the report draws each photo: the loader names it
        cfg.eval.dataset.output_columns = [*cfg.eval.dataset.output_columns, "img_path"]
    other_cfg = copy.deepcopy(cfg)  # before the main model adopts its checkpoint's thresholds into cfg
    result = evaluate_model(cfg, ckpt, onnx, device, progress, sweep=True, per_image=True)
    if other is not None:
        other_result = evaluate_model(other_cfg, **other, device=device, progress=progress, sweep=True,
                                      per_image=True)
    start = time.perf_counter()  # the report's own time: scoring each photo, drawing, writing
    runs = [model_run(cfg, result)]
    if other is not None:
        runs.append(model_run(other_cfg, other_result))
        if runs[0].label == runs[1].label:
            runs[1].label += " (compared)"
        keys = ("recall", "precision", "f-score", "checkpoint")
        result["compare"] = {key: other_result[key] for key in keys}
    dataset = cfg.eval.dataset
    labels = dataset.label_file if isinstance(dataset.label_file, str) else ", ".join(dataset.label_file)
    info = {"protocol": str(cfg.metric.get("protocol", "icdar15")), "config": os.path.abspath(config_path),
            "data": f"{os.path.abspath(os.path.join(dataset.dataset_root, dataset.data_dir))} ({labels})",
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    note = thresholds_note(result.get("thresholds_from_checkpoint", {}))
    if note:
        info["thresholds"] = note
    result["report"] = write_report(report_dir, runs, info)
    result["error_kinds"] = runs[0].tally().summary()
    result["report"]["seconds"] = time.perf_counter() - start
    return result


def result_text(result: dict, sweep: bool = False) -> str:
    """``textdet eval``'s summary: the scores and where they came from (+ the thresholds taken from the
    checkpoint, the compared model, the report page; with ``sweep`` the threshold grid)."""
    line = (f"Performance ({result['protocol']}): recall {result['recall']:.4f}, precision "
            f"{result['precision']:.4f}, f-score {result['f-score']:.4f} ({result['images']} images, "
            f"{result['eval_time']:.2f} s, {result['input_shapes']} input shape(s), runtime "
            f"{result['runtime']}, checkpoint {result['checkpoint']})")
    if "thresholds_from_checkpoint" in result:
        line += "\n" + thresholds_note(result["thresholds_from_checkpoint"])
    if "compare" in result:
        other = result["compare"]
        line += (f"\ncompared with {other['checkpoint']}: recall {other['recall']:.4f}, precision "
                 f"{other['precision']:.4f}, f-score {other['f-score']:.4f}")
    if "report" in result:
        report = result["report"]
        line += (f"\nreport: {report['path']} ({report['photos']} photos, {report['seconds']:.1f} s, "
                 f"{report['megabytes']:.1f} MB)")
    if sweep:
        line += "\n" + sweep_report(result["sweep"])
    return line
