"""``textdet check-data``: every problem of the train and eval sets, each sample run through its real pipeline;
``--dump`` writes the first training samples as ``.npz`` plus a PNG with polygons and maps overlaid;
``--ceiling`` scores the eval labels as a model that learned its training targets exactly would."""

from __future__ import annotations

import os
import warnings
from collections import Counter

import cv2
import numpy as np

from textdet.build import parts, training
from textdet.data.annotations import IGNORE_TEXTS, text_region_count
from textdet.data.label_shapes import reshape_points, split_advice, split_count
from textdet.data.targets import ShrinkBinaryMap
from textdet.engine.guard import least_win
from textdet.errors import DataError, SampleError


def run_samples(dataset, seed: int) -> list[tuple[str, int, str, str]]:
    """Load every sample once; return (file, line, severity, message) for each failure or warning."""
    found = []
    for index, r in enumerate(dataset.records):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                dataset.load(index, np.random.default_rng([seed, 0, index, 0]))
            except SampleError as e:
                found.append((r.label_file, r.line_no, "error", f"{r.rel_path}: {e}"))
        found += [(r.label_file, r.line_no, "warning", f"{r.rel_path}: {w.message}") for w in caught]
    return found


def split_regions(cfg, dataset) -> tuple[list[tuple[str, int, str, str]], str]:
    """Training label lines with regions whose DB shrink falls apart (data/label_shapes.py), as warnings, and
    the advice for all of them ("" when none). The shrink is the training pipeline's ShrinkBinaryMap."""
    shrink = parts.train_shrink(cfg)
    if shrink is None:
        return [], ""
    found = []
    n_split = 0
    n_regions = 0
    for r in dataset.records:
        split = split_count(r.annotations, shrink.min_text_size, shrink.shrink_ratio)
        n_split += split
        n_regions += text_region_count(r.annotations)
        if split:
            message = f"{r.rel_path}: {split} text region(s) split into several pieces when shrunk for the " \
                      "probability map"
            found.append((r.label_file, r.line_no, "warning", message))
    return found, (split_advice(n_split, n_regions, shrink.shrink_ratio) if n_split else "")


def overlay(sample: dict) -> np.ndarray:
    """A 2x2 panel: image + polygons (green text, red ignored), binary map, threshold map, masks."""
    img = np.ascontiguousarray(sample["image"]).astype(np.uint8)
    h, w = img.shape[:2]
    vis = cv2.cvtColor(img, cv2.COLOR_RGB2BGR)
    tags = np.asarray(sample.get("ignore_tags", np.zeros(len(sample.get("polys", [])), bool)))
    for poly, ignored in zip(sample.get("polys", []), tags, strict=False):
        colour = (0, 0, 255) if ignored else (0, 200, 0)
        cv2.polylines(vis, [np.round(poly).astype(np.int32)], True, colour, 1, cv2.LINE_AA)

    def heat(m: np.ndarray, alpha: float = 0.6) -> np.ndarray:
        m = np.clip(np.asarray(m, np.float32).reshape(h, w), 0, 1)
        colour = cv2.applyColorMap((m * 255).astype(np.uint8), cv2.COLORMAP_JET)
        return cv2.addWeighted(cv2.cvtColor(img, cv2.COLOR_RGB2BGR), 1 - alpha, colour, alpha, 0)

    blank = np.zeros_like(vis)
    binary = heat(sample["binary_map"]) if "binary_map" in sample else blank
    thresh = heat(sample["thresh_map"]) if "thresh_map" in sample else blank
    masks = blank.copy()
    if "mask" in sample:
        masks[..., 2] = (1 - np.asarray(sample["mask"]).reshape(h, w)) * 255
    if "thresh_mask" in sample:
        masks[..., 1] = np.asarray(sample["thresh_mask"]).reshape(h, w) * 255
    labels = ("image + polygons", "binary_map", "thresh_map", "red: mask=0, green: thresh_mask")
    panels = [vis, binary, thresh, masks]
    for p, text in zip(panels, labels, strict=True):
        cv2.putText(p, text, (5, 15), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (255, 255, 255), 1, cv2.LINE_AA)
    return np.vstack([np.hstack(panels[:2]), np.hstack(panels[2:])])


def dump_samples(cfg, dump_dir: str, n: int) -> list[str]:
    """Write the first ``n`` processed training samples as ``.npz`` (output columns) and ``.png``."""
    os.makedirs(dump_dir, exist_ok=True)
    full = parts.build_dataset(cfg, "train", parts.build_pipeline(cfg, "train"))
    shown_pipe, _ = parts.split_device_normalize(parts.build_pipeline(cfg, "train"))
    columns = list(dict.fromkeys([*full.output_columns, "polys", "ignore_tags"]))
    shown = parts.build_dataset(cfg, "train", shown_pipe)
    shown.output_columns = columns
    written = []
    for index in range(min(n, len(full))):
        key = (0, index)
        out = full[key]
        vis_sample = shown[key]  # same seed, epoch and index: the same augmentation, before normalisation
        stem = os.path.join(dump_dir, f"sample_{index:03d}")
        np.savez_compressed(stem + ".npz", **{c: np.asarray(out[c]) for c in full.output_columns})
        cv2.imwrite(stem + ".png", overlay(vis_sample))
        written += [stem + ".npz", stem + ".png"]
    return written


def print_guard_photos(cfg) -> None:
    """The training photos the start guard sets aside (``train.guard_holdout``), picked as training picks
    them, so that a user sees which photos the model will never learn from."""
    every = training.guard_aside_every(cfg)
    if not every:
        return
    aside = training.build_guard_dataset(cfg, parts.build_pipeline(cfg, "eval"), every)
    for record in aside.records:
        print(f"{record.label_file}:{record.line_no}: set aside by the start guard: {record.rel_path}")
    print(f"start guard: {len(aside)} training photos set aside (every {every}th labelled photo), never "
          "trained on; -o train.guard_holdout=0 trains on them too")
    regions = sum(text_region_count(r.annotations) for r in aside.records)
    if not regions:
        print("start guard: warning: their labels hold no text regions to find: both models would score 0 "
              "there and the guard could not tell them apart; set aside more photos (train.guard_holdout) or "
              "turn the guard off (train.guard_holdout: 0)")
        return
    least = least_win(cfg.train.guard_margin, cfg.train.guard_regions, regions)
    print(f"start guard: their labels hold {regions} text regions; the trained model is kept when it scores "
          f"{least:.5f} above the start there (the larger of train.guard_margin {cfg.train.guard_margin:g} "
          f"and train.guard_regions {cfg.train.guard_regions} / {regions})")


def label_ceiling(cfg, dataset, shape: str) -> dict[str, float]:
    """What a model that learned its training targets exactly would score on ``dataset`` (the eval set):
    recall, precision and f-score. Each image's DB probability target (the training pipeline's
    ShrinkBinaryMap, its min_text_size and shrink_ratio) is drawn from its labels redrawn as ``shape``
    (data/label_shapes.py), taken as the model's probability map, turned into boxes by the config's
    post-processing and scored by the config's metric against the labels as written. Labels whose targets
    fall apart score low here whatever the model."""
    shrink = parts.train_shrink(cfg) or ShrinkBinaryMap()  # DB's defaults when the pipeline draws no target
    postprocess = parts.build_postprocess_from_config(cfg)
    metric = parts.build_metric_from_config(cfg)
    for record in dataset.records:
        path = os.path.join(dataset.image_dir, record.rel_path)
        image = cv2.imread(path)  # only its size is used: the target has the image's shape
        if image is None:
            raise DataError(f"{record.label_file}:{record.line_no}: cannot read {path}")
        polys = [np.asarray(a["points"], np.float32) for a in record.annotations]
        ignore = np.array([a["transcription"] in IGNORE_TEXTS for a in record.annotations], dtype=bool)
        drawn = [reshape_points(p, shape).astype(np.float32) for p in polys]
        target = shrink({"image": image, "polys": drawn, "ignore_tags": ignore.copy()})["binary_map"]
        boxes = postprocess(target.astype(np.float32)[None], None)  # (1, 1, H, W): one image, map pixels
        metric.update(boxes, [polys], [ignore])
    return metric.compute()


def check_data(cfg, dump_dir: str | None = None, n_dump: int = 8, ceiling: str | None = None) -> bool:
    """Print every problem of the train and eval sets and a summary; True when no sample is unusable.
    ``ceiling``: a label shape (outline, hull, quad); also print the eval set's ``label_ceiling``."""
    ok = True
    for split in ("train", "eval"):
        if not getattr(cfg, split).dataset.transform_pipeline:
            continue
        dataset = parts.build_dataset(cfg, split, parts.build_pipeline(cfg, split))
        found = [(p.file, p.line_no, p.severity, p.message) for p in dataset.problems]
        found += run_samples(dataset, cfg.system.seed)
        counts = Counter(s for _, _, s, _ in found)
        shapes, advice = split_regions(cfg, dataset) if split == "train" else ([], "")
        for file, line, severity, message in found + shapes:
            print(f"{file}:{line}: {severity}: {message}")
        errors = counts.get("error", 0)
        ok = ok and errors == 0
        usable = len(dataset.records)  # photos, not an epoch's samples (train.dataset.min_epoch_samples)
        print(f"{split}: {usable} usable samples in {dataset.image_dir}; {errors} error(s) (sample skipped), "
              f"{counts.get('warning', 0)} warning(s) (annotation dropped or repaired)")
        if advice:
            print(f"{split}: warning: {advice}")
        if split == "train":
            print_guard_photos(cfg)
        if split == "eval" and ceiling:
            result = label_ceiling(cfg, dataset, ceiling)
            print(f"eval: label ceiling, targets drawn as {ceiling}: recall {result['recall']:.4f}, "
                  f"precision {result['precision']:.4f}, f-score {result['f-score']:.4f} (what a model that "
                  "learned its training targets exactly would score against these labels)")
    if dump_dir:
        files = dump_samples(cfg, dump_dir, n_dump)
        print(f"dumped {len(files) // 2} training samples to {dump_dir} (.npz with the output columns, .png overlays)")
    return ok
