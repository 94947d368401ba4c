"""eval.shape_buckets and batched evaluation: padding to a few shapes, the padding masked out of post-processing.
The "model" here sees white pixels as text and, to make a leak visible, the zero padding too: any box in the
padding would come from a map that was not masked."""

from __future__ import annotations

import json
import os

import cv2
import numpy as np
import pytest
import torch
from torch import nn

from conftest import RECIPE
from textdet.build.parts import build_evaluator
from textdet.build.sections import validate
from textdet.config import load_config
from textdet.config.loader import parse_buckets
from textdet.data.buckets import BucketBatchSampler, PadCollate, bucket_for, choose_buckets, resized_size
from textdet.data.resize import DetResize
from textdet.errors import ConfigError, DataError
from textdet.runtime.amp import amp_settings
from textdet.runtime.buckets import eval_batching, mask_padding


def test_auto_merges_the_two_groups_that_add_the_fewest_padded_pixels():
    """Four 32x64, one 32x96, two 64x32 images, two buckets. Merging 32x64 into 32x96 pads 4 images by 32x32 =
    4,096 px; 32x64 with 64x32 -> 64x64 pads 12,288 px; 32x96 with 64x32 -> 64x96 pads 11,264 px."""
    sizes = [(32, 64)] * 4 + [(32, 96)] + [(64, 32)] * 2
    assert choose_buckets(sizes, max_buckets=2) == [(64, 32), (32, 96)]
    assert choose_buckets(sizes, max_buckets=3) == [(32, 64), (64, 32), (32, 96)]
    assert choose_buckets(sizes, max_buckets=1) == [(64, 96)]


def test_auto_on_icdar2015_photos_is_one_shape():
    """ICDAR2015's photos are all 1280x720: PP-OCR's DetResize (min side 736, nearest multiple of 32) gives
    736 x int(1280 x 736 / 720) = 736 x 1308 -> 736 x 1312, one bucket for the whole set."""
    resize = DetResize(limit_type="min", limit_side_len=736, divisor=32, rounding="nearest")
    size = resized_size((720, 1280), resize)
    assert size == (736, 1312)
    assert choose_buckets([size] * 500) == [(736, 1312)]


def test_an_image_goes_to_the_smallest_bucket_that_holds_it():
    buckets = [(64, 32), (32, 96), (96, 96)]
    assert bucket_for((32, 32), buckets) == 0
    assert bucket_for((32, 64), buckets) == 1
    assert bucket_for((64, 64), buckets) == 2
    with pytest.raises(DataError, match=r"eval.shape_buckets: an image resized to 128x32 fits none"):
        bucket_for((128, 32), buckets)


def test_padding_goes_bottom_right_and_records_the_real_region():
    first = np.full((3, 32, 64), 2.0, np.float32)
    second = np.full((3, 64, 32), 3.0, np.float32)
    batch = PadCollate()([{"image": first}, {"image": second}])
    assert tuple(batch["image"].shape) == (2, 3, 64, 64)
    assert batch["valid_hw"].tolist() == [[32, 64], [64, 32]]
    assert float(batch["image"][0].sum()) == 3 * 32 * 64 * 2.0  # the rows below 32 are zeros
    assert float(batch["image"][1].sum()) == 3 * 64 * 32 * 3.0
    hwc = PadCollate([(64, 96)])([{"image": np.ones((32, 64, 3), np.uint8)}])
    assert tuple(hwc["image"].shape) == (1, 64, 96, 3)
    assert int(hwc["image"].sum()) == 32 * 64 * 3
    same = PadCollate()([{"image": first}, {"image": first}])
    assert "valid_hw" not in same  # nothing padded: the plain batch, nothing to mask


def test_batches_hold_one_bucket_each_in_sampler_order():
    sampler = list(range(5))
    batches = BucketBatchSampler(sampler, bucket_of=[0, 1, 0, 1, 0], batch_size=2)
    assert list(batches) == [[0, 2], [1, 3], [4]]
    assert len(batches) == 3


def test_mask_padding_zeroes_outside_each_real_region():
    prob = torch.ones(2, 1, 4, 5)
    masked = mask_padding(prob, torch.tensor([[2, 3], [4, 5]]))
    assert masked[0].sum().item() == 6.0
    assert masked[1].sum().item() == 20.0
    assert masked[0, 0, :2, :3].min().item() == 1.0


def test_the_config_key_is_auto_or_pairs():
    assert load_config(RECIPE, ["eval.shape_buckets=auto"]).eval.shape_buckets == "auto"
    assert load_config(RECIPE, ["eval.shape_buckets=[[32, 64]]"]).eval.shape_buckets == [[32, 64]]
    assert load_config(RECIPE).eval.shape_buckets is None
    with pytest.raises(ConfigError, match=r"-o eval.shape_buckets: eval.shape_buckets must be auto or a list of"):
        load_config(RECIPE, ["eval.shape_buckets=[[32]]"])


class WhiteIsText(nn.Module):
    """P = 1 on white pixels (normalised red > 0) and on exact zeros (what padding holds), 0 elsewhere."""

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        text = images[:, :1] > 0
        padding = images.abs().sum(dim=1, keepdim=True) == 0
        return {"binary": (text | padding).float()}


# (height, width) of each photo and its white rectangle (x0, y0, x1, y1), away from the right/bottom edges
PHOTOS = {"a.png": ((64, 96), (8, 8, 60, 28)), "b.png": ((96, 64), (10, 40, 50, 70)),
          "c.png": ((64, 64), (6, 30, 40, 50)), "d.png": ((96, 64), (20, 10, 44, 80))}


@pytest.fixture()
def photo_root(tmp_path) -> str:
    """Four black photos of three sizes, one white rectangle each, labelled."""
    images = tmp_path / "val" / "images"
    images.mkdir(parents=True)
    lines = []
    for name, ((height, width), (x0, y0, x1, y1)) in PHOTOS.items():
        photo = np.zeros((height, width, 3), np.uint8)
        photo[y0:y1, x0:x1] = 255
        cv2.imwrite(str(images / name), photo)
        box = [[x0, y0], [x1 - 1, y0], [x1 - 1, y1 - 1], [x0, y1 - 1]]
        lines.append(f"{name}\t{json.dumps([{'transcription': 'w', 'points': box}])}")
    (tmp_path / "test_gt.txt").write_text("\n".join(lines) + "\n")
    return str(tmp_path)


def _evaluate(root: str, *opts: str) -> tuple[dict, list, object]:
    """(metric, detections per image path in order, evaluator) of WhiteIsText on the photos."""
    resize = "eval.dataset.transform_pipeline.DetResize"
    cfg = load_config(RECIPE, [f"eval.dataset.dataset_root={root}", "eval.dataset.data_dir=val/images",
                               "eval.dataset.label_file=test_gt.txt", "eval.loader.num_workers=0",
                               "eval.dataset.output_columns=[image, polys, ignore_tags, shape_list, img_path]",
                               f"{resize}.target_size=null", f"{resize}.limit_type=none", "postprocess.box_thresh=0.5",
                               "postprocess.expand_ratio=0.1",
                               *opts])
    evaluator = build_evaluator(cfg, validate(cfg, ("eval",))["eval"], torch.device("cpu"), False,
                                amp_settings("O0", "cpu"))
    found = {}
    postprocess, original_score = evaluator.postprocess, evaluator._score

    def score(host, batch):  # the evaluator's scoring, recording each image's boxes on the way
        dets = postprocess(host, batch["shape_list"].numpy())
        for path, det in zip(batch["img_path"], dets, strict=True):
            found[os.path.basename(path)] = [p.tolist() for p in det["polys"]]
        original_score(host, batch)

    evaluator._score = score
    metric = evaluator.run(WhiteIsText())
    return metric, found, evaluator


def test_bucketed_batches_find_the_same_boxes_as_one_image_at_a_time(photo_root):
    """Batch 1 at each photo's own size vs batch 2 in one 96x96 bucket: the same boxes, the padding (which the model
    calls text) never a box, and one input shape instead of three."""
    plain, plain_boxes, plain_eval = _evaluate(photo_root, "eval.loader.batch_size=1")
    bucketed, bucketed_boxes, bucketed_eval = _evaluate(photo_root, "eval.loader.batch_size=2",
                                                        "eval.shape_buckets=[[96, 96]]")
    assert plain["f-score"] == 1.0
    assert bucketed == plain
    assert bucketed_boxes == plain_boxes
    assert sorted(plain_eval.shapes) == [(64, 64), (64, 96), (96, 64)]
    assert list(bucketed_eval.shapes) == [(96, 96)]
    for name, boxes in bucketed_boxes.items():
        height, width = PHOTOS[name][0]
        assert len(boxes) == 1
        assert max(x for x, _ in boxes[0]) < width and max(y for _, y in boxes[0]) < height


def test_auto_buckets_and_batching_without_buckets(photo_root):
    """auto: the three sizes stay three buckets (at most 4); batch 2 without buckets pads each batch to its own
    largest height and width: (64, 96) + (96, 64) -> 96x96, then (64, 64) + (96, 64) -> 96x64."""
    auto, _, auto_eval = _evaluate(photo_root, "eval.loader.batch_size=2", "eval.shape_buckets=auto")
    assert auto["f-score"] == 1.0
    assert sorted(auto_eval.shapes) == [(64, 64), (64, 96), (96, 64)]
    padded, _, padded_eval = _evaluate(photo_root, "eval.loader.batch_size=2")
    assert padded["f-score"] == 1.0
    assert sorted(padded_eval.shapes) == [(96, 64), (96, 96)]
    cfg = load_config(RECIPE, ["eval.loader.batch_size=1"])
    # absent buckets, batch 1: today's loader
    assert eval_batching(parse_buckets(cfg.eval.shape_buckets), None, 1).batches is None
