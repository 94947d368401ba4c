"""How well a detector that learned its training targets exactly would score: the ceiling a label set and a
config's post-processing allow (docs/RESULTS.md, "Other real photos: handwriting").

Each image's DB probability target (ShrinkBinaryMap, with the config's min_text_size and shrink_ratio) is
drawn from its labels, redrawn as ``--shape`` first (data/label_shapes.py), and used as the model's
probability map: the config's DBPostprocess turns it into boxes, scored with ICDAR2015's rule against the
labels as written. A label set whose targets fall apart scores low here whatever the model.

    python benchmarks/label_ceiling.py -c DIR/NAME.yaml --labels HW/test_gt.txt --images HW/val/images
    python benchmarks/label_ceiling.py -c DIR/NAME.yaml --labels HW/test_gt.txt --images HW/val/images --shape quad
"""

from __future__ import annotations

import argparse
import os

import cv2
import numpy as np

from textdet.config import load_config
from textdet.data.decode import IGNORE_TEXTS
from textdet.data.formats import SHAPES
from textdet.data.label_shapes import reshape_points
from textdet.data.labels import read_label_files
from textdet.data.targets import ShrinkBinaryMap
from textdet.engine.build import build_postprocess_from_config, train_shrink
from textdet.metrics.det_metric import DetMetric


def ceiling(cfg, labels: str, images: str, shape: str, limit: int | None = None) -> dict[str, float]:
    shrink = train_shrink(cfg) or ShrinkBinaryMap()  # DB's defaults when the pipeline draws no target
    postprocess = build_postprocess_from_config(cfg)
    metric = DetMetric()
    records, _ = read_label_files(labels)
    for record in records[:limit]:
        image = cv2.imread(os.path.join(images, record.rel_path))
        if image is None:
            raise SystemExit(f"{labels}:{record.line_no}: cannot read {os.path.join(images, record.rel_path)}")
        polys = [np.asarray(a["points"], np.float32) for a in record.annotations]
        ignore = np.array([a["transcription"] in IGNORE_TEXTS for a in record.annotations], dtype=bool)
        drawn = [reshape_points(p, shape).astype(np.float32) for p in polys]
        target = shrink({"image": image, "polys": drawn, "ignore_tags": ignore.copy()})["binary_map"]
        boxes = postprocess(target.astype(np.float32)[None], None)
        metric.update(boxes, [polys], [ignore])
    return metric.compute()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", required=True, help="the YAML whose pipeline and post-processing apply")
    parser.add_argument("--labels", required=True, help="label file: the targets' source and the scoring truth")
    parser.add_argument("--images", required=True, help="the folder its image names are relative to")
    parser.add_argument("--shape", choices=SHAPES, default="outline", help="redraw each region before its target")
    parser.add_argument("--n", type=int, help="only the first N images")
    args = parser.parse_args()
    cfg = load_config(args.config, ["model.pretrained=false"])
    result = ceiling(cfg, args.labels, args.images, args.shape, args.n)
    print(f"{args.labels} (targets drawn as {args.shape}): "
          + ", ".join(f"{key} {value:.4f}" for key, value in result.items()))


if __name__ == "__main__":
    main()
