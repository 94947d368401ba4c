"""DB targets built per batch on the device (data/device_targets.py) against known answers and targets.py.

The known-answer rectangle is test_targets.py's::

        x=20                x=120
    y=30 +-------------------+        image 200 x 100 (W x H), D = 4000 * 0.84 / 280 = 12
         |   100 x 40 text   |        shrunk by 12: x 32..108, y 42..58
    y=70 +-------------------+        padded by 12: x 8..132, y 18..82 (round corners)
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import RECIPE, tiny_overrides
from textdet.build import parts
from textdet.config import load_config
from textdet.data.device_targets import (
    COLUMNS,
    DeviceTargets,
    PackPolygons,
    device_columns,
    split_device_targets,
    wants_device_targets,
)
from textdet.data.pipeline import Compose
from textdet.data.targets import BorderMap, ShrinkBinaryMap
from textdet.errors import ConfigError, SampleError
from textdet.loss import DBLoss
from textdet.runtime.feed import DeviceInput

RECT = np.array([[20, 30], [120, 30], [120, 70], [20, 70]], dtype=np.float32)
CPU = torch.device("cpu")


def sample(polys, ignore=None, h=100, w=200) -> dict:
    tags = np.zeros(len(polys), bool) if ignore is None else np.asarray(ignore, bool)
    return {"image": np.zeros((h, w, 3), np.uint8), "polys": [np.asarray(p, np.float32) for p in polys],
            "ignore_tags": tags}


def both(samples: list[dict], min_text_size: float = 8) -> tuple[dict, dict]:
    """(CPU maps stacked as numpy, device maps as numpy) for the same samples."""
    shrink, border = ShrinkBinaryMap(min_text_size=min_text_size), BorderMap()
    cpu = [border(shrink(dict(s))) for s in samples]
    packed = [PackPolygons(shrink, border)(dict(s)) for s in samples]
    batch = {c: torch.from_numpy(np.stack([p[c] for p in packed])) for c in COLUMNS}
    h, w = samples[0]["image"].shape[:2]
    dev = DeviceTargets()(batch, (h, w), CPU)
    ref = {"binary_map": np.stack([c["binary_map"] for c in cpu]), "mask": np.stack([c["mask"] for c in cpu]),
           "thresh_map": np.stack([c["thresh_map"] for c in cpu]),
           "thresh_mask": np.stack([c["thresh_mask"] for c in cpu])}
    return ref, {k: v.numpy() for k, v in dev.items()}


def iou(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(bool), b.astype(bool)
    return float((a & b).sum() / max((a | b).sum(), 1))


def test_rectangle_known_answer():
    _, dev = both([sample([RECT])])
    binary = np.zeros((100, 200), np.float32)
    binary[42:59, 32:109] = 1  # shrunk by D = 12, both ends inclusive (cv2.fillPoly)
    np.testing.assert_array_equal(dev["binary_map"][0, 0], binary)
    assert dev["mask"].min() == 1.0  # nothing ignored
    t, tm = dev["thresh_map"][0], dev["thresh_mask"][0]
    # 1 - dist / 12 scaled to [0.3, 0.7]: on the outline 0.7, 6 px off it 0.5, >= 12 px off 0.3.
    assert t[50, 20] == pytest.approx(0.7) and t[50, 26] == pytest.approx(0.5) and t[50, 14] == pytest.approx(0.5)
    assert t[50, 70] == pytest.approx(0.3) and t[50, 8] == pytest.approx(0.3)
    # the mask is the polygon padded by 12: x 8..132 on the middle row; the corner (8, 18) is 17 px from (20, 30)
    assert tm[50, 8] == 1 and tm[50, 132] == 1 and tm[50, 7] == 0 and tm[50, 133] == 0 and tm[18, 8] == 0


def test_ignored_and_small_polygons_mask_out_like_the_cpu():
    tiny = [[150, 10], [156, 10], [156, 40], [150, 40]]  # 6 px wide < min_text_size 8
    ref, dev = both([sample([RECT, tiny, [[130, 60], [190, 60], [190, 90], [130, 90]]], ignore=[False, False, True])])
    np.testing.assert_array_equal(dev["mask"], ref["mask"])  # both fill the rounded polygon, outline included
    assert dev["mask"][0, 20:40, 150:157].max() == 0 and dev["mask"][0, 60:91, 130:191].max() == 0
    np.testing.assert_array_equal(dev["binary_map"], ref["binary_map"])
    assert dev["thresh_mask"][0, :, 145:].max() == 0  # masked-out polygons get no border
    out = PackPolygons(ShrinkBinaryMap(), BorderMap())(sample([RECT, tiny]))
    assert out["ignore_tags"].tolist() == [False, True]


def random_polys(rng: np.random.Generator, size: int) -> list[np.ndarray]:
    """Rotated boxes of 10-40 px height and CTW-style 14-point arcs, all inside the image."""
    polys = []
    for _ in range(6):
        hgt = rng.uniform(10, 40)
        wid, a = hgt * rng.uniform(1.5, 5), np.radians(rng.uniform(-40, 40))
        rot = np.array([[np.cos(a), np.sin(a)], [-np.sin(a), np.cos(a)]])
        polys.append(np.array([[-wid, -hgt], [wid, -hgt], [wid, hgt], [-wid, hgt]]) / 2 @ rot)
    for _ in range(2):
        theta = np.linspace(0, rng.uniform(0.5, 1.2), 7)
        r, hgt = rng.uniform(60, 120), rng.uniform(15, 30)
        arc = np.stack([np.cos(theta), np.sin(theta)], 1)
        polys.append(np.concatenate([arc * r, arc[::-1] * (r - hgt)]))
    out = []
    for p in polys:
        p = p - p.min(0)
        out.append(p + rng.uniform(0, 1, 2) * np.maximum(size - 2 - p.max(0), 0))
    return out


def test_equal_to_cpu_targets_on_synthetic_samples():
    rng = np.random.default_rng(0)
    samples = [sample(random_polys(rng, 256), rng.random(8) < 0.15, 256, 256) for _ in range(4)]
    ref, dev = both(samples)
    assert iou(ref["binary_map"], dev["binary_map"]) >= 0.99
    assert iou(1 - ref["mask"], 1 - dev["mask"]) >= 0.99
    assert iou(ref["thresh_mask"], dev["thresh_mask"]) >= 0.99
    assert np.abs(ref["thresh_map"] - dev["thresh_map"]).mean() < 0.005
    # polygons inside the image: OpenCV's own fill rule, reproduced pixel for pixel
    np.testing.assert_array_equal(ref["binary_map"], dev["binary_map"])


def test_chunks_do_not_change_the_maps():
    rng = np.random.default_rng(1)
    samples = [sample(random_polys(rng, 128), None, 128, 128) for _ in range(2)]
    packed = [PackPolygons(ShrinkBinaryMap(), BorderMap())(dict(s)) for s in samples]
    batch = {c: torch.from_numpy(np.stack([p[c] for p in packed])) for c in COLUMNS}
    whole, chunked = DeviceTargets()(batch, (128, 128), CPU), DeviceTargets(chunk=2_000_000)(batch, (128, 128), CPU)
    for k in whole:
        torch.testing.assert_close(whole[k], chunked[k], rtol=0, atol=0)


def test_no_polygons_and_off_image_polygons():
    ref, dev = both([sample([]), sample([RECT + 500])])
    for k in ref:
        np.testing.assert_allclose(dev[k].reshape(ref[k].shape), ref[k])


def test_pack_rejects_more_polygons_than_slots():
    with pytest.raises(SampleError, match="targets_on_device: false"):
        PackPolygons(ShrinkBinaryMap(), BorderMap(), max_polys=1)(sample([RECT]))  # outline + its shrink: 2 slots


def test_option_values_and_columns():
    assert wants_device_targets("auto", torch.device("cuda")) and not wants_device_targets("auto", CPU)
    assert wants_device_targets(True, CPU) and not wants_device_targets(False, torch.device("cuda"))
    with pytest.raises(ConfigError, match="train.targets_on_device must be auto, true or false"):
        wants_device_targets("yes", CPU)
    cols = ["image", "binary_map", "mask", "thresh_map", "thresh_mask", "polys"]
    assert device_columns(cols) == ["image", *COLUMNS, "polys"]


def test_split_needs_both_target_transforms():
    with pytest.raises(ConfigError, match="one ShrinkBinaryMap followed by one BorderMap"):
        split_device_targets(Compose([ShrinkBinaryMap()]), True, CPU)
    pipe = Compose([ShrinkBinaryMap()])
    assert split_device_targets(pipe, "auto", torch.device("cuda")) == (pipe, None)
    rest, targets = split_device_targets(Compose([ShrinkBinaryMap(), BorderMap(thresh_min=0.2)]), True, CPU)
    assert [type(t).__name__ for t in rest.transforms] == ["PackPolygons"] and targets.thresh_min == 0.2


def test_feed_builds_the_maps_of_the_cpu_pipeline_and_the_same_loss(synth_root, tmp_path):
    """Same sample, same random draws: the full worker pipeline and (workers + DeviceInput) give the same loss."""
    cfg = load_config(RECIPE, tiny_overrides(synth_root, str(tmp_path / "run"), **{"train.targets_on_device": True}))
    pipe = parts.build_pipeline(cfg, "train")
    split, targets = split_device_targets(parts.build_pipeline(cfg, "train"), True, CPU)
    full, packed = parts.build_dataset(cfg, "train", pipe), parts.build_dataset(cfg, "train", split, True)
    ref = {k: torch.from_numpy(np.stack([full[i][k] for i in range(4)])) for k in full[0] if k != "_skipped"}
    raw = {k: torch.from_numpy(np.stack([packed[i][k] for i in range(4)])) for k in packed[0] if k != "_skipped"}
    dev = DeviceInput(CPU, targets=targets)(raw)
    assert not set(COLUMNS) & set(dev)
    gen = torch.Generator().manual_seed(0)
    shape = (4, 1, *ref["image"].shape[-2:])
    preds = {k: torch.rand(shape, generator=gen) for k in ("binary", "thresh", "thresh_binary")}
    loss = DBLoss()
    maps = ("binary_map", "mask", "thresh_map", "thresh_mask")
    expected = loss(preds, **{k: ref[k] for k in maps})["loss"]
    got = loss(preds, **{k: dev[k] for k in maps})["loss"]
    assert iou(ref["binary_map"].numpy(), dev["binary_map"].numpy()) >= 0.99
    assert float(got) == pytest.approx(float(expected), rel=0.02)
