"""build_transforms / Compose / FusedGeometry: config errors, fusion rules, and that the fused
geometry gives the same samples as the sequential reference transforms."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

pytest.importorskip("textdet.data.targets")  # pipeline.py imports ShrinkBinaryMap/BorderMap from it

from conftest import USER_CFG, coverage  # noqa: E402
from textdet.data.colour import RandomColorAdjust  # noqa: E402
from textdet.data.geometric import (  # noqa: E402
    RandomCropWithBBox,
    RandomHorizontalFlip,
    RandomRotate,
    RandomScale,
    RandomTextCrop,
)
from textdet.data.pipeline import (  # noqa: E402
    TRANSFORMS,
    Compose,
    FusedGeometry,
    build_transforms,
    fuse_geometry,
)
from textdet.errors import ConfigError  # noqa: E402

USER_YAML = Path(USER_CFG)

# The user's geometric augmentation (mindocr_db_r50_user.yaml), with a small crop for speed.
GEOMETRY = [
    {"RandomColorAdjust": {"brightness": 0.1255, "saturation": 0.5}},
    {"RandomHorizontalFlip": {"p": 0.5}},
    {"RandomRotate": {"degrees": [-10, 10], "expand_canvas": False, "p": 1.0}},
    {"RandomScale": {"scale_range": [0.5, 3.0], "p": 1.0}},
    {"RandomCropWithBBox": {"max_tries": 10, "min_crop_ratio": 0.1, "crop_size": [96, 96], "p": 1.0}},
    "ValidatePolygons",
]
BOXES = [
    np.array([[10, 12], [60, 8], [62, 30], [11, 33]], np.float32) + 0.3,
    np.array([[80, 60], [150, 64], [148, 90], [79, 86]], np.float32) + 0.3,
    np.array([[20, 80], [50, 80], [50, 110], [20, 110]], np.float32) + 0.3,  # ignored ("###")
]


def make_sample() -> dict:
    """A 120x160 RGB image whose red channel is the polygons' coverage and green a smooth ramp."""
    cov = coverage(BOXES, (120, 160))
    image = np.zeros((120, 160, 3), np.uint8)
    image[..., 0] = np.round(cov * 255)
    image[..., 1] = np.linspace(20, 220, 160, dtype=np.float32)[None, :].astype(np.uint8)
    return {"image": image, "polys": [p.copy() for p in BOXES], "texts": ["a", "b", "###"],
            "ignore_tags": np.array([False, False, True])}


def iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(1, (a | b).sum()))


def polygon_mask(sample: dict) -> np.ndarray:
    """The sample's polygons rendered again, limited to the un-padded area (polygons left outside
    the crop may lie over the zero padding until ValidatePolygons drops them)."""
    mask = coverage(sample["polys"], sample["image"].shape[:2]) > 0.5
    h, w = sample.get("actual_size", mask.shape)
    mask[h:], mask[:, w:] = False, False
    return mask


# ----------------------------------------------------------------------------- building
def test_user_pipelines_build_and_fuse():
    cfg = yaml.safe_load(USER_YAML.read_text())
    train = cfg["train"]["dataset"]["transform_pipeline"]
    fused = build_transforms(train)
    assert [type(t).__name__ for t in fused.transforms] == [
        "DecodeImage", "DetLabelEncode", "FusedGeometry", "ValidatePolygons", "ShrinkBinaryMap", "BorderMap",
        "FusedNormalize"]
    geometry = fused.transforms[2]
    assert isinstance(geometry.color, RandomColorAdjust)
    assert [type(t).__name__ for t in geometry.steps] == [
        "RandomHorizontalFlip", "RandomRotate", "RandomScale", "RandomCropWithBBox"]
    assert len(build_transforms(train, fuse=False)) == len(train)
    evaluation = build_transforms(cfg["eval"]["dataset"]["transform_pipeline"])
    assert "DetResize(target_size=(736, 1280), keep_ratio=False" in repr(evaluation)


def test_user_train_pipeline_runs_end_to_end(tmp_path):
    cfg = yaml.safe_load(USER_YAML.read_text())
    path = tmp_path / "img_1.jpg"
    cv2.imwrite(str(path), make_sample()["image"])
    label = '[{"transcription": "a", "points": [[10, 12], [60, 8], [62, 30], [11, 33]]}]'
    pipeline = build_transforms(cfg["train"]["dataset"]["transform_pipeline"])
    out = pipeline({"img_path": str(path), "label": label, "label_file": "gt.txt", "line_no": 1},
                   np.random.default_rng(0))
    assert out["image"].shape == (3, 640, 640) and out["image"].dtype == np.float32
    assert out["binary_map"].shape == (1, 640, 640) and out["thresh_map"].shape == (640, 640)
    assert out["raw_img_shape"] == (120, 160)


def test_unknown_transform_lists_valid_names_and_closest():
    with pytest.raises(ConfigError) as err:
        build_transforms(["DecodeImage", {"RandomCropWithBox": {"p": 1.0}}])
    msg = str(err.value)
    assert "transform_pipeline[1]" in msg and "'RandomCropWithBox'" in msg
    assert "did you mean 'RandomCropWithBBox'?" in msg
    assert all(name in msg for name in TRANSFORMS)


@pytest.mark.parametrize(
    "entry, words",
    [
        ({"RandomScale": {"scale_rang": [1, 2]}}, ["RandomScale", "'scale_rang'", "did you mean 'scale_range'"]),
        ({"RandomRotate": {"degrees": 10}}, ["RandomRotate", "degrees"]),
        ({"NormalizeImage": {"mean": "coco"}}, ["NormalizeImage", "mean"]),
        ({"ToCHWImage": None, "DecodeImage": None}, ["transform_pipeline[0]"]),
        ({"DetResize": [736, 1280]}, ["DetResize", "mapping"]),
    ],
)
def test_bad_parameters_raise_config_errors(entry, words):
    with pytest.raises(ConfigError) as err:
        build_transforms([entry])
    assert all(w in str(err.value) for w in words), str(err.value)


def test_bare_names_and_null_params():
    pipeline = build_transforms(["DetLabelEncode", {"ToCHWImage": None}])
    assert [type(t).__name__ for t in pipeline.transforms] == ["DetLabelEncode", "ToCHWImage"]


@pytest.mark.parametrize(
    "names, expected",
    [
        (["flip", "rotate", "scale", "crop"], ["FusedGeometry"]),
        (["color", "flip", "scale"], ["FusedGeometry"]),  # pixel-wise colour moves into the warp
        (["contrast", "flip", "scale"], ["RandomColorAdjust", "FusedGeometry"]),  # contrast uses the mean
        (["flip", "rotate_expand", "scale"], ["RandomHorizontalFlip", "RandomRotate", "RandomScale"]),
        (["flip"], ["RandomHorizontalFlip"]),
        (["scale", "crop", "flip", "scale"], ["FusedGeometry", "FusedGeometry"]),  # a crop ends a run
        (["flip", "text_crop", "flip"], ["FusedGeometry", "RandomHorizontalFlip"]),
    ],
)
def test_fusion_rules(names, expected):
    make = {
        "flip": RandomHorizontalFlip, "scale": RandomScale, "crop": RandomCropWithBBox, "text_crop": RandomTextCrop,
        "rotate": lambda: RandomRotate(expand_canvas=False), "rotate_expand": lambda: RandomRotate(expand_canvas=True),
        "color": RandomColorAdjust, "contrast": lambda: RandomColorAdjust(contrast=0.3),
    }
    assert [type(t).__name__ for t in fuse_geometry([make[n]() for n in names])] == expected


# ----------------------------------------------------------------------------- fused == sequential
TEXT_CROP = GEOMETRY[:4] + [{"RandomTextCrop": {"crop_size": [96, 96]}}, "ValidatePolygons"]


@pytest.mark.parametrize("geometry", [GEOMETRY, TEXT_CROP], ids=["RandomCropWithBBox", "RandomTextCrop"])
def test_fused_matches_sequential_sample_for_sample(geometry):
    """Same seed -> identical crop, polygons, tags and actual_size; pixels agree up to interpolation."""
    seq, fused = build_transforms(geometry, fuse=False), build_transforms(geometry, fuse=True)
    assert isinstance(fused.transforms[0], FusedGeometry)
    for seed in range(40):
        a, b = seq(make_sample(), np.random.default_rng(seed)), fused(make_sample(), np.random.default_rng(seed))
        assert a["actual_size"] == b["actual_size"]
        assert a["texts"] == b["texts"]
        np.testing.assert_array_equal(a["ignore_tags"], b["ignore_tags"])
        for p, q in zip(a["polys"], b["polys"], strict=True):
            np.testing.assert_allclose(p, q, atol=1e-3)
        assert a["image"].shape == b["image"].shape == (96, 96, 3)
        h, w = a["actual_size"]
        assert not b["image"][h:].any() and not b["image"][:, w:].any()
        assert iou(a["image"][..., 0] > 127, b["image"][..., 0] > 127) > 0.95
        diff = np.abs(a["image"][1:h - 1, 1:w - 1].astype(int) - b["image"][1:h - 1, 1:w - 1])
        assert diff.mean() < 3.0


def test_fused_pixels_follow_polygons():
    fused = build_transforms(GEOMETRY[1:5])
    for seed in range(10):
        out = fused(make_sample(), np.random.default_rng(seed))
        assert iou(out["image"][..., 0] > 127, polygon_mask(out)) > 0.98


def _text_fraction(pipeline: Compose, seeds: range) -> tuple[float, float]:
    with_text, area = 0, 0.0
    for seed in seeds:
        out = pipeline(make_sample(), np.random.default_rng(seed))
        with_text += bool((~out["ignore_tags"]).any())
        area += np.prod(out["actual_size"]) / 96**2
    return with_text / len(seeds), area / len(seeds)


def test_fused_and_sequential_have_the_same_statistics():
    """Independent seeds: crops contain a non-ignored polygon equally often; same mean content area."""
    frac_seq, area_seq = _text_fraction(build_transforms(GEOMETRY, fuse=False), range(200))
    frac_fused, area_fused = _text_fraction(build_transforms(GEOMETRY, fuse=True), range(1000, 1200))
    assert abs(frac_seq - frac_fused) < 0.06
    assert abs(area_seq - area_fused) < 0.06


def test_fused_without_crop_keeps_the_scaled_canvas():
    fused = FusedGeometry([RandomHorizontalFlip(p=1.0), RandomScale(scale_range=(2.0, 2.0), p=1.0)])
    out = fused(make_sample(), np.random.default_rng(0))
    assert out["image"].shape == (240, 320, 3) and "actual_size" not in out
    assert iou(out["image"][..., 0] > 127, polygon_mask(out)) > 0.98


@pytest.mark.parametrize("hw, rotate", [((90, 160), True), ((160, 90), True), ((48, 96), False)])
def test_fused_writes_warp_and_colour_straight_into_the_padded_canvas(hw, rotate):
    """Rows padded (a contiguous view), columns padded (a strided view) and an identity warp: the
    canvas holds exactly the warp (then the colour) of the image, and zeros elsewhere."""
    image = cv2.GaussianBlur(np.random.default_rng(5).integers(0, 256, (*hw, 3), dtype=np.uint8), (3, 3), 0)
    crop = RandomCropWithBBox(crop_size=(96, 96), p=0.0)
    steps = [RandomHorizontalFlip(p=1.0), RandomRotate(degrees=(5, 5), expand_canvas=False, p=1.0),
             RandomScale(scale_range=(1.5, 1.5), p=1.0), crop] if rotate else [crop]
    for color in (None, RandomColorAdjust(brightness=0.2, saturation=0.5)):
        out = FusedGeometry(steps, color=color)({"image": image.copy()}, np.random.default_rng(0))
        rng = np.random.default_rng(0)
        factors = color.draw(rng) if color is not None else None
        size, total = hw, np.eye(3)
        for t in steps:
            step = t.plan(size, [], None, rng)
            total, size = step.matrix @ total, step.size
        ref = cv2.warpAffine(image, total[:2], (size[1], size[0]), flags=cv2.INTER_LINEAR)
        if color is not None:
            ref = color.apply(ref, factors)
        expected = np.zeros((96, 96, 3), np.uint8)
        expected[:size[0], :size[1]] = ref
        assert out["actual_size"] == size and out["image"].flags.c_contiguous
        assert size[0] < 96 or size[1] < 96
        np.testing.assert_array_equal(out["image"], expected)
        if not rotate:
            assert np.array_equal(total, np.eye(3))


def test_fused_rejects_bad_steps():
    with pytest.raises(ValueError, match="last"):
        FusedGeometry([RandomCropWithBBox(), RandomHorizontalFlip()])
    with pytest.raises(ValueError, match="steps"):
        FusedGeometry([RandomRotate(expand_canvas=True)])


# ----------------------------------------------------------------------------- compose timing
def test_compose_timing_records_seconds_and_counts():
    pipeline = build_transforms(GEOMETRY + ["NormalizeImage", "ToCHWImage"])
    assert Compose.timing is False
    pipeline(make_sample(), np.random.default_rng(0))
    assert pipeline.stats == {}
    pipeline.timing = True
    for seed in range(3):
        pipeline(make_sample(), np.random.default_rng(seed))
    assert list(pipeline.stats) == ["FusedGeometry", "ValidatePolygons", "FusedNormalize"]
    assert all(v["count"] == 3 and v["seconds"] > 0 for v in pipeline.stats.values())
    pipeline.reset_stats()
    assert pipeline.stats == {}
    assert "FusedGeometry(steps=[RandomHorizontalFlip(p=0.5)" in repr(pipeline)


def test_fused_normalize_equals_normalize_then_chw():
    """Per-channel float32 tables give the two reference steps' CHW output bit for bit, with and without a swap."""
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
    for params in ({}, {"bgr_to_rgb": True}, {"mean": [10.0, 20.0, 30.0], "std": [2.0, 4.0, 8.0]}):
        fused = build_transforms([{"NormalizeImage": params}, "ToCHWImage"])
        reference = build_transforms([{"NormalizeImage": params}, "ToCHWImage"], fuse=False)
        assert type(fused.transforms[0]).__name__ == "FusedNormalize"
        got = fused({"image": img.copy()}, rng)["image"]
        want = reference({"image": img.copy()}, rng)["image"]
        assert got.shape == (3, 37, 53) and got.dtype == np.float32 and got.flags.c_contiguous
        np.testing.assert_array_equal(got, want)
    floats = fused({"image": img.astype(np.float32)}, rng)["image"]  # not uint8: the reference path
    np.testing.assert_allclose(floats, want, atol=1e-5)
