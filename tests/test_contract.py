"""The DB contract end to end on known geometry: ground-truth polygons -> ShrinkBinaryMap -> the maps
used as a perfect prediction -> DBPostprocess (unclip) -> DetMetric gives f-score 1.0."""

from __future__ import annotations

import numpy as np
import pytest

from textdet.data.targets import ShrinkBinaryMap
from textdet.metrics import DetMetric
from textdet.postprocess import DBPostprocess


def _quad(x0, y0, x1, y1):
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32)


@pytest.mark.parametrize("box_type", ["quad", "poly"])
def test_shrunk_gt_as_prediction_round_trips_to_f_one(box_type):
    """Four well-separated words on a 240x320 image (one rotated): shrunk by r = 0.4, then unclipped by
    expand_ratio 1.5, each comes back over its GT with IoU > 0.5; a `###` word is don't-care."""
    polys = [_quad(20, 20, 140, 60), _quad(180, 30, 300, 70), _quad(30, 150, 110, 190)]
    angle = np.deg2rad(20)
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    polys.append(((_quad(-50, -15, 50, 15) @ rot.T) + [230, 170]).astype(np.float32))
    ignored = _quad(150, 210, 170, 225)
    sample = {"image": np.zeros((240, 320, 3), np.uint8), "polys": polys + [ignored],
              "ignore_tags": np.array([False] * 4 + [True])}
    sample = ShrinkBinaryMap(min_text_size=8, shrink_ratio=0.4)(sample, np.random.default_rng(0))
    prob = sample["binary_map"][None]  # (1, 1, H, W): a perfect probability map
    shape_list = np.array([[240, 320, 1.0, 1.0]], np.float32)
    (det,) = DBPostprocess(box_type=box_type, box_thresh=0.6, expand_ratio=1.5)(prob, shape_list)
    assert len(det["polys"]) == 4 and all(s == pytest.approx(1.0) for s in det["scores"])
    metric = DetMetric()
    metric.update([det["polys"]], [sample["polys"]], [sample["ignore_tags"]])
    assert metric.compute() == {"recall": 1.0, "precision": 1.0, "f-score": 1.0}
