"""Known-answer and property tests for the MindOCR-compatible detection transforms.

Geometry tests render a filled polygon into an image, transform image and polygon together, and
compare the transformed pixels with the transformed polygon rendered again. Rendering is
area coverage in pixel-centre coordinates (pixel j covers [j - 0.5, j + 0.5]), 16x supersampled,
so a correct transform agrees up to interpolation noise on the outline.
"""

from __future__ import annotations

import json
import warnings

import cv2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import coverage
from textdet.data.colour import RandomColorAdjust
from textdet.data.decode import DecodeImage, DetLabelEncode
from textdet.data.geometric import (
    RandomCropWithBBox,
    RandomHorizontalFlip,
    RandomRotate,
    RandomScale,
    RandomTextCrop,
    ValidatePolygons,
    clip_polygon_to_box,
    occupied,
)
from textdet.data.resize import DetResize, NormalizeImage, ToCHWImage
from textdet.errors import SampleError
from textdet.geometry import polygon_area

QUAD = np.array([[30, 40], [90, 35], [95, 80], [28, 85]], dtype=np.float32)  # clockwise in image coords


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(1, (a | b).sum()))


def rendered_sample(polys: list[np.ndarray], shape: tuple[int, int] = (120, 128), ignore=None) -> dict:
    cov = coverage(polys, shape)
    image = np.repeat((cov * 255).round().astype(np.uint8)[..., None], 3, axis=2)
    tags = np.zeros(len(polys), bool) if ignore is None else np.asarray(ignore, bool)
    return {"image": image, "polys": [p.copy() for p in polys], "texts": ["t"] * len(polys), "ignore_tags": tags}


def assert_aligned(sample: dict, min_iou: float = 0.98) -> None:
    """The transformed image's mask matches the transformed polygons rendered again."""
    shape = sample["image"].shape[:2]
    expected = coverage(sample["polys"], shape) > 0.5
    h, w = sample.get("actual_size", shape)  # polygons left outside a crop may lie over the padding
    expected[h:], expected[:, w:] = False, False
    got = sample["image"][..., 0] > 127
    assert mask_iou(got, expected) > min_iou


def signed_area(p: np.ndarray) -> float:
    x, y = p[:, 0].astype(np.float64), p[:, 1].astype(np.float64)
    return float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2


# ----------------------------------------------------------------------------- flip
def test_flip_twice_is_identity():
    rng = np.random.default_rng(0)
    sample = rendered_sample([QUAD])
    image0, poly0 = sample["image"].copy(), sample["polys"][0].copy()
    flip = RandomHorizontalFlip(p=1.0)
    once = flip(sample, rng)
    assert not np.array_equal(once["image"], image0)
    twice = flip(once, rng)
    np.testing.assert_array_equal(twice["image"], image0)
    np.testing.assert_array_equal(twice["polys"][0], poly0)


def test_flip_integer_fillpoly_stays_aligned_and_clockwise():
    """x' = W - 1 - x: cv2.fillPoly of the flipped box equals the flipped fillPoly, pixel for pixel.

    (W - x, the continuous-coordinate mirror, would shift the box one column right.)
    """
    w = 101
    box = np.array([[20, 30], [60, 30], [60, 70], [20, 70]], np.float32)
    mask = np.zeros((90, w, 3), np.uint8)
    cv2.fillPoly(mask, [box.astype(np.int32)], (255, 255, 255))
    out = RandomHorizontalFlip(p=1.0)({"image": mask, "polys": [box.copy()]}, np.random.default_rng(0))
    again = np.zeros_like(mask)
    cv2.fillPoly(again, [np.round(out["polys"][0]).astype(np.int32)], (255, 255, 255))
    np.testing.assert_array_equal(out["image"], again)
    np.testing.assert_allclose(out["polys"][0][-1], [w - 1 - 20, 30])  # first vertex now last
    assert np.sign(signed_area(out["polys"][0])) == np.sign(signed_area(box))
    flipped = RandomHorizontalFlip(p=1.0)(rendered_sample([QUAD]), np.random.default_rng(0))
    assert_aligned(flipped, min_iou=0.99)


def test_flip_probability_zero_leaves_sample():
    sample = rendered_sample([QUAD])
    image = sample["image"].copy()
    out = RandomHorizontalFlip(p=0.0)(sample, np.random.default_rng(0))
    np.testing.assert_array_equal(out["image"], image)


# ----------------------------------------------------------------------------- rotate / scale
@pytest.mark.parametrize("expand", [False, True])
def test_rotate_pixels_follow_polygons(expand):
    for seed in range(3):
        sample = rendered_sample([QUAD])
        out = RandomRotate(degrees=(-30, 30), expand_canvas=expand, p=1.0)(sample, np.random.default_rng(seed))
        assert_aligned(out)
        if not expand:
            assert out["image"].shape == (120, 128, 3)


def test_rotate_angle_is_a_float_in_range():
    rot = RandomRotate(degrees=(-10, 10), expand_canvas=False)
    angles = []
    for seed in range(20):
        step = rot.plan((100, 100), [], None, np.random.default_rng(seed))
        angles.append(np.degrees(np.arctan2(step.matrix[0, 1], step.matrix[0, 0])))  # cv2: +angle = counter-cw
    angles = np.array(angles)
    assert (np.abs(angles) <= 10 + 1e-9).all()
    assert not np.allclose(angles, np.round(angles))


def test_rotate_expand_canvas_size():
    step = RandomRotate(degrees=(90, 90), expand_canvas=True).plan((60, 100), [], None, np.random.default_rng(0))
    assert step.size == (100, 60)


@pytest.mark.parametrize("scale", [0.5, 1.7, 3.0])
def test_scale_pixels_follow_polygons(scale):
    sample = rendered_sample([QUAD])
    out = RandomScale(scale_range=(scale, scale), p=1.0)(sample, np.random.default_rng(0))
    assert out["image"].shape[:2] == (round(120 * scale), round(128 * scale))
    assert_aligned(out)


def test_scale_size_limits_narrow_the_range():
    scaler = RandomScale(scale_range=(0.1, 10.0), size_limits=(50, 200), p=1.0)
    for seed in range(20):
        out = scaler({"image": np.zeros((100, 80, 3), np.uint8)}, np.random.default_rng(seed))
        h, w = out["image"].shape[:2]
        assert 50 <= min(h, w) and max(h, w) <= 200


# ----------------------------------------------------------------------------- crop
# Edges off pixel centres (x.3), so no pixel is exactly half covered and a 0.5 threshold is stable.
TWO_BOXES = [
    np.array([[10, 10], [50, 10], [50, 40], [10, 40]], np.float32) + 0.3,
    np.array([[90, 70], [140, 70], [140, 100], [90, 100]], np.float32) + 0.3,
]


def test_crop_pixels_follow_polygons_and_pad_is_zero():
    crop = RandomCropWithBBox(max_tries=10, min_crop_ratio=0.1, crop_size=(96, 80), p=1.0)
    for seed in range(10):
        out = crop(rendered_sample(TWO_BOXES, (120, 160)), np.random.default_rng(seed))
        ah, aw = out["actual_size"]
        assert out["image"].shape == (96, 80, 3)
        assert (ah == 96 and aw <= 80) or (aw == 80 and ah <= 96)
        assert not out["image"][ah:].any() and not out["image"][:, aw:].any()
        assert_aligned(out)


def test_crop_whole_image_when_p_zero():
    """A 120x160 image scaled by min(64/120, 64/160) = 0.4 -> 48x64, padded to 64x64."""
    out = RandomCropWithBBox(crop_size=(64, 64), p=0.0)(rendered_sample(TWO_BOXES, (120, 160)),
                                                         np.random.default_rng(0))
    assert out["actual_size"] == (48, 64)
    assert out["image"].shape == (64, 64, 3)
    np.testing.assert_allclose(out["polys"][0][0], (np.array([10.3, 10.3]) + 0.5) * 0.4 - 0.5, atol=1e-5)


def _cut(poly: np.ndarray, h: int, w: int) -> bool:
    """Whether the polygon straddles the border of an (h, w) image, [-0.5, w - 0.5] x [-0.5, h - 0.5]."""
    lo, hi = poly.min(axis=0) + 0.5, poly.max(axis=0) + 0.5
    inside = lo[0] >= -1e-4 and lo[1] >= -1e-4 and hi[0] <= w + 1e-4 and hi[1] <= h + 1e-4
    outside = hi[0] < 0 or hi[1] < 0 or lo[0] > w or lo[1] > h
    return not (inside or outside)


def test_crop_never_cuts_a_non_ignored_box():
    polys = TWO_BOXES + [np.array([[60, 50], [120, 50], [120, 60], [60, 60]], np.float32)]
    crop = RandomCropWithBBox(crop_size=(64, 64), p=1.0)
    cropped = 0
    for seed in range(100):
        out = crop(rendered_sample(polys, (120, 160), ignore=[False, False, True]), np.random.default_rng(seed))
        h, w = out["actual_size"]
        cropped += (h, w) != (48, 64)
        assert not any(_cut(p, h, w) for p, ig in zip(out["polys"], out["ignore_tags"], strict=True) if not ig)
    assert cropped > 50  # crops actually happen


def test_text_crop_keeps_the_scale_and_holds_a_word():
    """A 64x64 window of a 120x160 image: pixels copied at scale 1 (a shift), and one of the two words whole."""
    crop = RandomTextCrop(crop_size=(64, 64))
    seen = set()
    for seed in range(40):
        sample = rendered_sample(TWO_BOXES, (120, 160))
        original = sample["image"].copy()
        out = crop(sample, np.random.default_rng(seed))
        assert out["image"].shape == (64, 64, 3) and out["actual_size"] == (64, 64)
        shift = out["polys"][0][0] - TWO_BOXES[0][0]  # (-x0, -y0)
        x0, y0 = int(round(-shift[0])), int(round(-shift[1]))
        np.testing.assert_allclose(shift, [-x0, -y0], atol=1e-5)
        np.testing.assert_array_equal(out["image"], original[y0 : y0 + 64, x0 : x0 + 64])
        whole = [k for k, p in enumerate(out["polys"]) if (p >= 0).all() and (p <= 63).all()]
        assert whole  # the word it aimed at is inside, uncut
        seen.update(whole)
    assert seen == {0, 1}  # both words get picked


def test_text_crop_starts_where_no_word_is_cut():
    """Rows 0..119, a 30-row window. Aimed at the word over rows 40-60, it starts at 31..40, but 31..34 cut the
    word over rows 25-34: 35..40. Aimed at that one, it starts at 5..25, but from 11 on its end cuts the first:
    5..10 (starting on a word's first row, or ending on its last, cuts nothing)."""
    word = np.array([[10, 40], [50, 40], [50, 60], [10, 60]], np.float32)
    above = np.array([[100, 25], [140, 25], [140, 34], [100, 34]], np.float32)
    crop = RandomTextCrop(crop_size=(30, 160))
    starts = set()
    for seed in range(60):
        sample = {"image": np.zeros((120, 160, 3), np.uint8), "polys": [word, above], "texts": ["a", "b"],
                  "ignore_tags": np.zeros(2, bool)}
        out = crop(sample, np.random.default_rng(seed))
        starts.add(int(round(word[0, 1] - out["polys"][0][0, 1])))
    assert starts == set(range(5, 11)) | set(range(35, 41))


def test_text_crop_pads_a_smaller_image_and_aims_anywhere_without_text():
    sample = {"image": np.full((20, 30, 3), 7, np.uint8), "polys": [], "texts": [], "ignore_tags": np.zeros(0, bool)}
    out = RandomTextCrop(crop_size=(32, 32))(sample, np.random.default_rng(0))
    assert out["image"].shape == (32, 32, 3) and out["actual_size"] == (20, 30)
    assert (out["image"][:20, :30] == 7).all() and not out["image"][20:].any() and not out["image"][:, 30:].any()
    # a 10x10 window of a 12x40 image without words: every start, 0..2 down and 0..30 across
    crop = RandomTextCrop(crop_size=(10, 10))
    starts = [crop.choose_box((12, 40), [], None, np.random.default_rng(seed))[::2] for seed in range(400)]
    assert {y for y, _ in starts} == set(range(3)) and {x for _, x in starts} == set(range(31))


def test_occupancy_is_the_union_of_rounded_intervals():
    got = occupied(np.array([1.4, 7.6, -5, 20]), np.array([2.6, 8.0, -1, 30]), 12)
    want = np.zeros(12, bool)
    want[1:4] = True
    want[8:9] = True
    np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    boxes=st.lists(st.tuples(st.integers(0, 150), st.integers(0, 110), st.integers(1, 60), st.integers(1, 40)),
                   min_size=1, max_size=5),
    seed=st.integers(0, 2**31),
)
def test_property_crops_keep_kept_points_inside(boxes, seed):
    """Boxes inside the 160x120 image (pixel centres 0..159, 0..119) are never cut by the crop."""
    polys = [np.array([[x, y], [x + w, y], [x + w, y + h], [x, y + h]], np.float32) for x, y, w, h in boxes]
    polys = [np.minimum(p, [159, 119]) for p in polys]
    sample = {"image": np.zeros((120, 160, 3), np.uint8), "polys": polys, "texts": ["a"] * len(polys),
              "ignore_tags": np.zeros(len(polys), bool)}
    out = RandomCropWithBBox(crop_size=(64, 48), p=1.0)(sample, np.random.default_rng(seed))
    h, w = out["actual_size"]
    assert h <= 64 and w <= 48
    for p in out["polys"]:
        assert not _cut(p, h, w)
    out = ValidatePolygons()(out, np.random.default_rng(0))
    for p in out["polys"]:
        assert (p >= -0.5 - 1e-4).all() and (p[:, 0] <= w - 0.5 + 1e-4).all() and (p[:, 1] <= h - 0.5 + 1e-4).all()


# ----------------------------------------------------------------------------- property: flips
@settings(max_examples=50, deadline=None)
@given(
    pts=st.lists(st.tuples(st.floats(-50, 250, allow_nan=False), st.floats(-50, 250, allow_nan=False)),
                 min_size=3, max_size=12),
    w=st.integers(1, 160),
)
def test_property_flip_twice_identity(pts, w):
    poly = np.array(pts, np.float32)
    image = np.random.default_rng(0).integers(0, 255, (7, w, 3), dtype=np.uint8)
    sample = {"image": image.copy(), "polys": [poly.copy()]}
    flip = RandomHorizontalFlip(p=1.0)
    out = flip(flip(sample, np.random.default_rng(0)), np.random.default_rng(0))
    np.testing.assert_array_equal(out["image"], image)
    np.testing.assert_allclose(out["polys"][0], poly, atol=1e-4)


# ----------------------------------------------------------------------------- validate
def test_validate_drops_outside_ignores_small_and_clips():
    polys = [
        np.array([[10, 10], [30, 10], [30, 20], [10, 20]], np.float32),  # inside
        np.array([[70, 10], [90, 10], [90, 20], [70, 20]], np.float32),  # outside actual_size (w = 64)
        np.array([[-10, 30], [10, 30], [10, 40], [-10, 40]], np.float32),  # half visible -> clipped
        np.array([[63, 50], [70, 50], [70, 51], [63, 51]], np.float32),  # visible: x in [63, 63.5], area 0.5 < 1
    ]
    sample = {"image": np.zeros((80, 80, 3), np.uint8), "actual_size": (64, 64), "polys": polys,
              "texts": ["a", "b", "c", "d"], "ignore_tags": np.array([False, False, False, False])}
    out = ValidatePolygons(clip_to_visible_area=True)(sample, np.random.default_rng(0))
    assert out["texts"] == ["a", "c", "d"]
    np.testing.assert_array_equal(out["ignore_tags"], [False, False, True])
    assert polygon_area(out["polys"][1]) == pytest.approx(10.5 * 10)  # x in [-0.5, 10]: the image edge
    assert out["polys"][1][:, 0].min() == -0.5


def test_clip_polygon_known_answers():
    tri = np.array([[-10, 0], [10, 0], [10, 20]], float)
    assert polygon_area(clip_polygon_to_box(tri, 100, 100)) == pytest.approx(200 - 50)  # 0.5*20*20 - cut
    assert len(clip_polygon_to_box(tri + 500, 100, 100)) == 0


# ----------------------------------------------------------------------------- DetResize
@pytest.mark.parametrize(
    "kwargs, hw, out_hw, shape_list",
    [
        # IC15 eval: target 736x1280, no ratio kept -> straight resize.
        (dict(target_size=(736, 1280), keep_ratio=False, limit_type="none"), (720, 1280), (736, 1280),
         [720, 1280, 736 / 720, 1.0]),
        # min: short side 500 < 736 -> s = 1.472; 736x1178 (ceil 1177.6) -> ceil32 -> 736x1184.
        (dict(limit_type="min", limit_side_len=736), (500, 800), (736, 1184), [500, 800, 736 / 500, 1184 / 800]),
        # max: long side 2000 > 960 -> s = 0.48; 480x960 already divisible.
        (dict(limit_type="max", limit_side_len=960), (1000, 2000), (480, 960), [1000, 2000, 0.48, 0.48]),
        # max, nothing to do but ceil to 32: 100x50 -> 128x64.
        (dict(limit_type="max", limit_side_len=960), (100, 50), (128, 64), [100, 50, 1.28, 1.28]),
        # none + keep_ratio + padding: s = min(640/480, 640/320) = 4/3 -> 640x427, padded to 640x640.
        (dict(target_size=(640, 640), keep_ratio=True, padding=True), (480, 320), (640, 640),
         [480, 320, 640 / 480, 427 / 320]),
    ],
)
def test_det_resize_shape_list(kwargs, hw, out_hw, shape_list):
    sample = {"image": np.full(hw + (3,), 7, np.uint8), "polys": [np.array([[10, 20], [30, 20], [30, 40]], np.float32)]}
    out = DetResize(**kwargs)(sample, np.random.default_rng(0))
    assert out["image"].shape[:2] == out_hw
    np.testing.assert_allclose(out["shape_list"], shape_list, rtol=1e-6)
    np.testing.assert_allclose(out["polys"][0][1], [30 * shape_list[3], 20 * shape_list[2]], rtol=1e-5)


def test_det_resize_pads_with_zeros_and_composes_shape_list():
    sample = {"image": np.full((480, 320, 3), 7, np.uint8), "shape_list": np.array([960, 640, 0.5, 0.25], np.float32)}
    out = DetResize(target_size=(640, 640), keep_ratio=True, padding=True)(sample, np.random.default_rng(0))
    assert (out["image"][:, 427:] == 0).all() and (out["image"][:, :427] == 7).all()
    # MindOCR multiplied index 3 by scale_h (4/3); the fix multiplies it by scale_w = 427/320.
    np.testing.assert_allclose(out["shape_list"], [960, 640, 0.5 * 640 / 480, 0.25 * 427 / 320], rtol=1e-6)


# ----------------------------------------------------------------------------- normalise / CHW / colour
def test_normalize_imagenet_values_at_a_pixel():
    image = np.zeros((2, 3, 3), np.uint8)
    image[1, 2] = (255, 128, 0)
    out = NormalizeImage(mean="imagenet", std="imagenet")({"image": image}, np.random.default_rng(0))["image"]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[1, 2], [(255 - 123.675) / 58.395, (128 - 116.28) / 57.12, -103.53 / 57.375],
                               rtol=1e-5)
    swapped = NormalizeImage(bgr_to_rgb=True)({"image": image}, np.random.default_rng(0))["image"]
    np.testing.assert_allclose(swapped[1, 2, 0], -123.675 / 58.395, rtol=1e-5)
    chw = ToCHWImage()({"image": out}, np.random.default_rng(0))["image"]
    assert chw.shape == (3, 2, 3) and chw.flags.c_contiguous


def test_color_adjust_known_factors():
    image = np.array([[[200, 100, 50]]], np.uint8)
    half = RandomColorAdjust(brightness=(0.5, 0.5), saturation=(1, 1))({"image": image}, np.random.default_rng(0))
    np.testing.assert_array_equal(half["image"], [[[100, 50, 25]]])
    gray = RandomColorAdjust(brightness=0, saturation=(0, 0))({"image": image}, np.random.default_rng(0))["image"]
    assert gray[0, 0, 0] == gray[0, 0, 1] == gray[0, 0, 2]
    hue = RandomColorAdjust(brightness=0, saturation=0, hue=(0.5, 0.5))({"image": image}, np.random.default_rng(0))
    assert hue["image"][0, 0, 2] > hue["image"][0, 0, 0]  # orange turns blue-ish


def _reference_color(image: np.ndarray, factors: tuple) -> np.ndarray:
    """The three-op colour path (LUT, LUT, gray + GRAY2RGB + addWeighted, HSV LUT) as it was first written."""
    b, c, s, h = factors
    ramp = np.arange(256, dtype=np.float64)

    def lut(v):
        return np.clip(np.round(v), 0, 255).astype(np.uint8)

    if b != 1.0:
        image = cv2.LUT(image, lut(ramp * b))
    if c != 1.0:
        mean = float(cv2.cvtColor(image, cv2.COLOR_RGB2GRAY).mean())
        image = cv2.LUT(image, lut(ramp * c + mean * (1.0 - c)))
    if s != 1.0:
        gray = cv2.cvtColor(cv2.cvtColor(image, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB)
        image = cv2.addWeighted(image, s, gray, 1.0 - s, 0.0)
    if h != 0.0:
        hsv = cv2.cvtColor(image, cv2.COLOR_RGB2HSV)
        hsv[..., 0] = ((np.arange(256) + int(round(h * 180))) % 180).astype(np.uint8)[hsv[..., 0]]
        image = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)
    return image


@pytest.mark.parametrize("contrast", [(1.0, 1.0), (0.6, 1.4)])
def test_color_matrix_path_within_one_level_of_the_three_op_path(contrast):
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (64, 80, 3), dtype=np.uint8)
    image[:8] = 255  # saturated rows: brightness clips before saturation, as in the reference
    adjust = RandomColorAdjust(brightness=0.3, contrast=contrast, saturation=(0.0, 2.0))
    worst = 0
    for _ in range(60):
        factors = adjust.draw(rng)
        ref = _reference_color(image, factors)
        out = adjust.apply(image, factors)
        inplace = image.copy()
        assert adjust.apply(inplace, factors, out=inplace) is inplace
        np.testing.assert_array_equal(inplace, out)
        worst = max(worst, int(np.abs(out.astype(int) - ref).max()))
    assert worst <= 1


def test_color_brightness_is_exact_including_float32_ties():
    image = np.arange(256, dtype=np.uint8).reshape(16, 16, 1).repeat(3, axis=2)
    for b in (1.07, 0.5, 1.1255, 0.93):  # 1.07 * 50 = 53.5: a tie that float32 rounds down
        out = RandomColorAdjust().apply(image, (b, 1.0, 1.0, 0.0))
        np.testing.assert_array_equal(out, _reference_color(image, (b, 1.0, 1.0, 0.0)))


def test_color_out_of_range_saturation_and_hue_keep_the_reference_ops():
    image = np.random.default_rng(1).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    for factors in ((1.05, 1.0, 3.0, 0.0), (0.9, 1.0, 1.2, 0.25), (1.0, 1.0, 1.0, 0.0)):
        out = RandomColorAdjust(hue=0.3).apply(image, factors)
        np.testing.assert_array_equal(out, _reference_color(image, factors))
    with pytest.raises(ValueError, match="out"):
        RandomColorAdjust().apply(image, (1.1, 1.0, 1.0, 0.0), out=np.zeros((2, 2, 3), np.uint8))


# ----------------------------------------------------------------------------- decode / labels
def test_decode_image_non_ascii_path_and_errors(tmp_path):
    bgr = np.zeros((5, 7, 3), np.uint8)
    bgr[..., 0] = 255  # blue
    path = tmp_path / "bild_ü_图.png"
    ok, buf = cv2.imencode(".png", bgr)
    buf.tofile(str(path))
    out = DecodeImage(img_mode="RGB")({"img_path": str(path)}, np.random.default_rng(0))
    assert out["raw_img_shape"] == (5, 7)
    assert tuple(out["image"][0, 0]) == (0, 0, 255)
    (tmp_path / "bad.jpg").write_bytes(b"not an image")
    for name in ("bad.jpg", "missing.jpg"):
        with pytest.raises(SampleError, match=name):
            DecodeImage()({"img_path": str(tmp_path / name)}, np.random.default_rng(0))


def test_label_encode_ignore_tags_and_bad_polygons():
    label = [
        {"transcription": "hello", "points": [[0, 0], [10, 0], [10, 5], [0, 5]]},
        {"transcription": "###", "points": [[0, 0], [10, 0], [10, 5]]},
        {"transcription": "*", "points": [[1, 1], [2, 1], [2, 2], [1, 2], [1, 1.5]]},
        {"transcription": "two", "points": [[0, 0], [1, 1]]},
        {"transcription": "flat", "points": [[0, 0], [5, 0], [10, 0]]},
        {"transcription": "nan", "points": [[0, 0], [float("nan"), 0], [1, 1]]},
        {"transcription": "ragged", "points": [[0, 0], [1], [1, 1]]},
    ]
    sample = {"label": json.dumps(label), "label_file": "train_gt.txt", "line_no": 7}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = DetLabelEncode()(sample, np.random.default_rng(0))
    assert out["texts"] == ["hello", "###", "*"]
    np.testing.assert_array_equal(out["ignore_tags"], [False, True, True])
    assert [len(p) for p in out["polys"]] == [4, 3, 5] and out["polys"][0].dtype == np.float32
    assert len(caught) == 4 and all("train_gt.txt:7" in str(w.message) for w in caught)


def test_decode_rgb_matches_bgr_plus_cvtcolor(tmp_path):
    image = np.random.default_rng(2).integers(0, 256, (37, 53, 3), dtype=np.uint8)
    path = tmp_path / "x.jpg"
    cv2.imencode(".jpg", cv2.GaussianBlur(image, (5, 5), 0))[1].tofile(str(path))
    out = DecodeImage(img_mode="RGB")({"img_path": str(path)}, np.random.default_rng(0))["image"]
    ref = cv2.cvtColor(cv2.imdecode(np.fromfile(str(path), np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    np.testing.assert_array_equal(out, ref)
    bgr = DecodeImage(img_mode="BGR")({"img_path": str(path)}, np.random.default_rng(0))["image"]
    np.testing.assert_array_equal(bgr, ref[..., ::-1])


def _label_slow(label: list) -> dict:
    """DetLabelEncode's per-entry path (the fast path switched off)."""
    enc = DetLabelEncode()
    enc._parse_all = lambda entries: None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return enc({"label": label}, np.random.default_rng(0))


def test_label_encode_vectorised_quads_equal_the_per_entry_path():
    rng = np.random.default_rng(3)
    label = [{"transcription": t, "points": (rng.uniform(0, 1280, (4, 2))).tolist()}
             for t in ("a", "###", "b", "*", "c")]
    label.append({"transcription": 7, "points": [["1", "2"], [9, 2.5], [9, 8], [1, 8]]})  # str numbers, int text
    label.append({"points": [[1e30, 0], [1e30, 5], [0, 5], [0, 0]]})  # no transcription; fine in float32
    fast = DetLabelEncode()({"label": json.dumps(label)}, np.random.default_rng(0))
    slow = _label_slow(label)
    assert fast["texts"] == slow["texts"] == ["a", "###", "b", "*", "c", "7", ""]
    np.testing.assert_array_equal(fast["ignore_tags"], [False, True, False, True, False, False, False])
    np.testing.assert_array_equal(fast["ignore_tags"], slow["ignore_tags"])
    for p, q in zip(fast["polys"], slow["polys"], strict=True):
        assert p.dtype == q.dtype == np.float32 and p.shape == (4, 2)
        np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize("bad", [
    [[0, 0], [5, 0], [10, 0], [3, 0]],  # zero area
    [[0, 0], [1e39, 0], [1, 1], [0, 1]],  # overflows float32
    [[0, 0], [5, 0], [5, 5]],  # a triangle among quads: ragged
])
def test_label_encode_falls_back_and_warns_like_the_per_entry_path(bad):
    label = [{"transcription": "ok", "points": [[0, 0], [10, 0], [10, 5], [0, 5]]},
             {"transcription": "bad", "points": bad}]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = DetLabelEncode()({"label": label}, np.random.default_rng(0))
    expected = _label_slow(label)
    assert out["texts"] == expected["texts"]
    assert len(caught) == (0 if len(bad) == 3 else 1)
    for p, q in zip(out["polys"], expected["polys"], strict=True):
        np.testing.assert_array_equal(p, q)


def test_validate_fast_path_equals_the_per_polygon_check():
    rng = np.random.default_rng(4)
    h, w = 60, 80
    polys = [np.array([[x, y], [x + dx, y], [x + dx, y + dy], [x, y + dy]], np.float32)
             for x, y, dx, dy in zip(rng.uniform(-30, 90, 300), rng.uniform(-30, 70, 300),
                                     rng.uniform(0.2, 25, 300), rng.uniform(0.2, 6, 300), strict=True)]
    polys.append(np.array([[0, 0], [1, 0], [1, 1], [0, 1]], np.float32))  # area exactly min_area 1.0
    polys.append(np.array([[-0.5, -0.5], [79.5, -0.5], [79.5, 59.5], [-0.5, 59.5]], np.float32))  # the frame
    for clip in (False, True):
        v = ValidatePolygons(min_area=1.0, clip_to_visible_area=clip)
        sample = {"polys": list(polys), "texts": [str(i) for i in range(len(polys))],
                  "ignore_tags": rng.random(len(polys)) < 0.2, "image": np.zeros((h, w, 3), np.uint8)}
        ref_polys, ref_texts, ref_tags = [], [], []
        for p, t, ig in zip(polys, sample["texts"], sample["ignore_tags"], strict=True):
            kept, newly = v._check(p, w, h)
            if kept is not None:
                ref_polys.append(kept)
                ref_texts.append(t)
                ref_tags.append(bool(ig) or newly)
        out = v(sample, rng)
        assert out["texts"] == ref_texts and 0 < len(ref_texts) < len(polys)
        np.testing.assert_array_equal(out["ignore_tags"], ref_tags)
        for p, q in zip(out["polys"], ref_polys, strict=True):
            np.testing.assert_array_equal(p, q)
    assert out["texts"][-2:] == [str(len(polys) - 2), str(len(polys) - 1)]
    assert not out["ignore_tags"][-2]  # area 1.0 is not < min_area


def test_label_encode_accepts_parsed_lists_and_rejects_bad_json():
    out = DetLabelEncode()({"label": []}, np.random.default_rng(0))
    assert out["polys"] == [] and out["ignore_tags"].shape == (0,)
    with pytest.raises(SampleError, match="gt.txt:3"):
        DetLabelEncode()({"label": "[{oops", "label_file": "gt.txt", "line_no": 3}, np.random.default_rng(0))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5)),
                                   st.integers(-5, 5)), max_size=5), max_size=4),
       st.integers(0, 2**31))
def test_property_degenerate_polygons_never_crash(points, seed):
    label = [{"transcription": "x", "points": p} for p in points]
    sample = {"label": label, "image": np.zeros((32, 40, 3), np.uint8)}
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sample = DetLabelEncode()(sample, rng)
    for t in (RandomHorizontalFlip(p=1.0), RandomRotate(expand_canvas=False), RandomScale((0.5, 2.0), p=1.0),
              RandomCropWithBBox(crop_size=(32, 32), p=1.0), ValidatePolygons(clip_to_visible_area=True)):
        sample = t(sample, rng)
    assert sample["image"].shape == (32, 32, 3)
    assert len(sample["polys"]) == len(sample["texts"]) == len(sample["ignore_tags"])


# ----------------------------------------------------------------------------- constructor checks
@pytest.mark.parametrize(
    "make, param",
    [
        (lambda: RandomHorizontalFlip(p=1.5), "p"),
        (lambda: RandomRotate(degrees=(10, -10)), "degrees"),
        (lambda: RandomScale(scale_range=(0, 2)), "scale_range"),
        (lambda: RandomCropWithBBox(crop_size=(640,)), "crop_size"),
        (lambda: RandomCropWithBBox(min_crop_ratio=0), "min_crop_ratio"),
        (lambda: RandomColorAdjust(hue=0.7), "hue"),
        (lambda: NormalizeImage(mean="coco"), "mean"),
        (lambda: NormalizeImage(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]), "std .* 0-1 scale"),
        (lambda: DetResize(limit_type="middle"), "limit_type"),
        (lambda: DecodeImage(img_mode="HSV"), "img_mode"),
        (lambda: ValidatePolygons(min_vertices=2), "min_vertices"),
    ],
)
def test_bad_constructor_values_name_the_parameter(make, param):
    with pytest.raises(ValueError, match=param):
        make()
