"""What kind of error a detector makes on a labelled split: each detection and each word sorted into one kind,
and recall by word height. It says whether a fine-tune still draws one box per line where the labels have
words, misses small words, or draws boxes on nothing (docs/DESIGN_NOTES.md, "Fine-tuning an imported
detector").

    python benchmarks/error_kinds.py -c CONFIG --ckpt CKPT --root IC15 \
        --images val/images --labels test_gt.txt

Detections, in this order of tests (IoU as ICDAR 2015 computes it, on integer-truncated corners):
matched (IoU > 0.5 with a word that counts), ignored (over half of it inside a ``###`` region), merged
(covers over half of two or more words), loose (best IoU 0.2 to 0.5), fragment (over 20% of it inside a
word), background (the rest). Words that count: found, in a merged box, partial (only a loose box), missed.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter

import cv2
import numpy as np

from textdet.config import load_config
from textdet.data.labels import read_label_files
from textdet.metrics.det_metric import to_polygon
from textdet.predict import Detector

HEIGHT_BINS = (0, 8, 12, 16, 24, 32, 10_000)  # short side of the word's rotated box, original pixels


def overlap(a, b) -> float:
    return a.intersection(b).area if a.intersects(b) else 0.0


def detection_kind(det, words: list, counts: list[bool]) -> tuple[str, list[int]]:
    """(kind, indices of the words it touches in that kind) for one detection polygon."""
    overlaps = [overlap(det, w) for w in words]
    ious = [o / max(det.area + w.area - o, 1e-9) for o, w in zip(overlaps, words, strict=True)]
    best = int(np.argmax(ious)) if words else -1
    if best >= 0 and ious[best] > 0.5 and counts[best]:
        return "matched", [best]
    inside_ignored = [o / det.area for o, c in zip(overlaps, counts, strict=True) if not c]
    if inside_ignored and max(inside_ignored) > 0.5:
        return "ignored", []
    covered = [i for i, (o, w) in enumerate(zip(overlaps, words, strict=True))
               if counts[i] and o / w.area > 0.5]
    if len(covered) >= 2:
        return "merged", covered
    if best >= 0 and ious[best] > 0.2 and counts[best]:
        return "loose", [best]
    if words and max(overlaps) / det.area > 0.2:
        return "fragment", []
    return "background", []


def word_height(points: np.ndarray) -> float:
    return float(min(cv2.minAreaRect(points.astype(np.float32))[1]))


def sort_errors(detector: Detector, root: str, images: str, labels: str) -> dict:
    """Kinds of detections and of words, and recall by word height, over the split."""
    records, problems = read_label_files(labels, dataset_root=root)
    errors = [p for p in problems if p.severity == "error"]  # warnings: an annotation repaired, as eval does
    if errors:
        first = errors[0]
        raise SystemExit(f"{len(errors)} bad label lines (`textdet check-data` lists them); first: {first}")
    detections, word_kinds = Counter(), Counter()
    found_by_height, words_by_height = Counter(), Counter()
    for record in records:
        annotations = record.annotations
        words = [to_polygon(a["points"]) for a in annotations]
        counts = [a["transcription"] != "###" and not w.is_empty
                  for a, w in zip(annotations, words, strict=True)]
        state = ["missed" if c else None for c in counts]
        result = detector(os.path.join(root, images, record.rel_path))
        for points in result["polys"]:
            det = to_polygon(points)
            if det.is_empty or det.area <= 0:
                continue
            kind, touched = detection_kind(det, words, counts)
            detections[kind] += 1
            word_state = {"matched": "found", "merged": "in a merged box", "loose": "partial"}.get(kind)
            for i in touched:
                if state[i] == "missed" or word_state == "found":
                    state[i] = word_state
        for a, c, s in zip(annotations, counts, state, strict=True):
            if not c:
                continue
            word_kinds[s] += 1
            height = word_height(np.asarray(a["points"]))
            height_bin = int(np.searchsorted(HEIGHT_BINS, height, side="right")) - 1
            words_by_height[height_bin] += 1
            found_by_height[height_bin] += s == "found"
    recall_by_height = {}
    for b in sorted(words_by_height):
        label = f"{HEIGHT_BINS[b]}-{HEIGHT_BINS[b + 1]} px"
        recall_by_height[label] = f"{found_by_height[b]}/{words_by_height[b]}"
    return {"images": len(records), "detections": dict(detections), "words": dict(word_kinds),
            "recall_by_height": recall_by_height}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--config", required=True, help="the YAML the checkpoint was trained with")
    parser.add_argument("--ckpt", default=None, help="default: the config's eval.ckpt_load_path")
    parser.add_argument("--root", required=True, help="dataset root (MindOCR layout)")
    parser.add_argument("--images", default="val/images", help="image folder under --root")
    parser.add_argument("--labels", default="test_gt.txt", help="label file under --root")
    args = parser.parse_args()
    detector = Detector.from_config(load_config(args.config), args.ckpt, device="cpu", batch_size=1)
    print(json.dumps(sort_errors(detector, args.root, args.images, args.labels), indent=1))


if __name__ == "__main__":
    main()
