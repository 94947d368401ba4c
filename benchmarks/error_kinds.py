"""What kind of error a detector makes on a labelled split, as JSON: the package's error kinds
(``textdet.metrics.error_kinds``, where they are defined) over a label file, with a model run photo by photo.
``textdet eval --report DIR`` draws the same tally as a page, with every photo (docs/evaluation-report.md).

    python benchmarks/error_kinds.py -c CONFIG --ckpt CKPT --root IC15 \
        --images val/images --labels test_gt.txt
"""

from __future__ import annotations

import argparse
import json
import os

from textdet.config import load_config
from textdet.data.labels import read_label_files
from textdet.metrics.error_kinds import ErrorTally, image_errors
from textdet.predict import Detector


def sort_errors(detector, root: str, images: str, labels: str) -> dict:
    """Kinds of detections and of words, and recall by word height, over the split."""
    records, problems = read_label_files(labels, dataset_root=root)
    errors = [p for p in problems if p.severity == "error"]  # warnings: an annotation repaired, as eval does
    if errors:
        first = errors[0]
        raise SystemExit(f"{len(errors)} bad label lines (`textdet check-data` lists them); first: {first}")
    tally = ErrorTally()
    for record in records:
        gts = [a["points"] for a in record.annotations]
        tags = [a["transcription"] == "###" for a in record.annotations]
        result = detector(os.path.join(root, images, record.rel_path))
        tally.add(image_errors(result["polys"], gts, tags))
    return tally.summary()


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
