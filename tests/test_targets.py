"""Known-answer and property tests for the DB targets (ShrinkBinaryMap, BorderMap).

Most tests use one rectangle whose targets can be worked out by hand::

        x=20                x=120
    y=30 +-------------------+        image 200 x 100 (W x H)
         |   100 x 40 text   |        A = 4000, L = 280, r = 0.4
    y=70 +-------------------+        D = A (1 - r^2) / L = 4000 * 0.84 / 280 = 12

Shrunk by 12 it is x 32..108, y 42..58; padded by 12 (round joins) it is x 8..132, y 18..82
with quarter circles of radius 12 around the four corners.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from textdet.data.targets import BorderMap, ShrinkBinaryMap
from textdet.errors import SampleError
from textdet.geometry import offset_polygon, polygon_area, polygon_areas, shrink_distance

RECT = np.array([[20, 30], [120, 30], [120, 70], [20, 70]], dtype=np.float32)


def make_sample(polys, ignore=None, h=100, w=200) -> dict:
    polys = [np.asarray(p, dtype=np.float32) for p in polys]
    tags = np.zeros(len(polys), dtype=bool) if ignore is None else np.asarray(ignore, dtype=bool)
    return {"image": np.zeros((h, w, 3), np.uint8), "polys": polys, "ignore_tags": tags}


def targets(sample: dict, min_text_size: float = 8) -> dict:
    sample = ShrinkBinaryMap(min_text_size=min_text_size)(sample, np.random.default_rng(0))
    return BorderMap()(sample, np.random.default_rng(0))


# --- the plain reference of BorderMap's definition: one pixel, one edge at a time ---------------


def point_segment_distance(px: float, py: float, a, b) -> float:
    """Distance from (px, py) to segment ab: project onto the segment's line, clamp to [0, 1]."""
    (ax, ay), (bx, by) = a, b
    dx, dy = bx - ax, by - ay
    len2 = dx * dx + dy * dy
    t = 0.0 if len2 == 0 else min(max(((px - ax) * dx + (py - ay) * dy) / len2, 0.0), 1.0)
    return math.hypot(ax + t * dx - px, ay + t * dy - py)


def reference_thresh_map(polys, ignore_tags, h, w, r=0.4, tmin=0.3, tmax=0.7) -> np.ndarray:
    """BorderMap's thresh_map by the definition, pixel by pixel, in float64."""
    value = np.zeros((h, w))
    for poly, ignored in zip(polys, ignore_tags, strict=True):
        poly = np.asarray(poly, dtype=np.float64)
        if ignored or polygon_area(poly) <= 0:
            continue
        d = shrink_distance(poly, r)
        paths = offset_polygon(poly, d)
        if not paths:
            continue
        padded = max(paths, key=polygon_area)
        (xmin, ymin), (xmax, ymax) = padded.min(axis=0), padded.max(axis=0)
        edges = list(zip(poly, np.roll(poly, -1, axis=0), strict=True))
        for y in range(max(int(ymin), 0), min(int(ymax), h - 1) + 1):
            for x in range(max(int(xmin), 0), min(int(xmax), w - 1) + 1):
                dist = min(point_segment_distance(x, y, a, b) for a, b in edges)
                value[y, x] = max(value[y, x], 1.0 - min(dist / d, 1.0))
    return tmin + (tmax - tmin) * value


# --- ShrinkBinaryMap ---------------------------------------------------------------------------


def test_shrink_rectangle_is_the_inner_rectangle():
    """D = 12, so the shrunk outline is x 32..108, y 42..58 (76 x 16 in continuous coordinates).

    cv2.fillPoly with integer vertices fills every pixel whose centre is on or inside the outline,
    boundary rows and columns included: columns 32..108 (77) and rows 42..58 (17), 1309 pixels.
    """
    out = ShrinkBinaryMap()(make_sample([RECT]), np.random.default_rng(0))
    expected = np.zeros((100, 200), np.float32)
    expected[42:59, 32:109] = 1
    assert out["binary_map"].shape == (1, 100, 200) and out["binary_map"].dtype == np.uint8
    np.testing.assert_array_equal(out["binary_map"][0], expected)
    assert out["binary_map"].sum() == 77 * 17
    assert out["mask"].shape == (100, 200) and out["mask"].dtype == np.uint8
    assert (out["mask"] == 1).all()
    assert out["ignore_tags"].tolist() == [False]


def test_shrink_ignored_and_too_small_polygons_are_masked():
    """Three polygons: '###' at x 10..50 y 10..40, a valid one at x 100..180 y 10..50 and one
    only 5 px tall (< min_text_size 8) at x 100..180 y 70..75. The first and last get mask 0 on
    every pixel fillPoly covers (boundary included), nothing on the binary map, and are tagged."""
    ignored = [[10, 10], [50, 10], [50, 40], [10, 40]]
    valid = [[100, 10], [180, 10], [180, 50], [100, 50]]
    small = [[100, 70], [180, 70], [180, 75], [100, 75]]
    tags_in = np.array([True, False, False])
    out = ShrinkBinaryMap()(make_sample([ignored, valid, small], tags_in), np.random.default_rng(0))
    expected_mask = np.ones((100, 200), np.float32)
    expected_mask[10:41, 10:51] = 0
    expected_mask[70:76, 100:181] = 0
    np.testing.assert_array_equal(out["mask"], expected_mask)
    binary = out["binary_map"][0]
    assert binary[10:41, 10:51].sum() == 0 and binary[60:, :].sum() == 0
    assert binary[30, 140] == 1
    assert out["ignore_tags"].tolist() == [True, False, True]
    assert tags_in.tolist() == [True, False, False]  # the caller's array is not modified


def test_shrink_that_vanishes_is_ignored():
    """A 100 x 2 strip with min_text_size 0: D = 200 * 0.84 / 204 = 0.82 eats it whole."""
    strip = [[10, 10], [110, 10], [110, 12], [10, 12]]
    out = ShrinkBinaryMap(min_text_size=0)(make_sample([strip]), np.random.default_rng(0))
    assert out["ignore_tags"].tolist() == [True]
    assert out["binary_map"].sum() == 0
    assert out["mask"][10:13, 10:111].sum() == 0 and out["mask"].sum() == 200 * 100 - 3 * 101


# --- BorderMap known values --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "y", "expected", "why"),
    [
        (70, 30, 0.7, "on the top edge: dist 0 -> thresh_max"),
        (70, 24, 0.5, "6 px above the top edge: 0.3 + 0.4 * (1 - 6/12)"),
        (26, 50, 0.5, "6 px inside the left edge"),
        (70, 39, 0.4, "9 px inside the top edge: 0.3 + 0.4 * (1 - 9/12)"),
        (70, 50, 0.3, "centre: 20 px from the nearest edge >= D"),
        (14, 22, 0.3 + 0.4 / 6, "corner: (-6, -8) from vertex (20, 30), dist 10 to the POINT (lines: 6, 8)"),
        (11, 21, 0.3, "corner: (-9, -9) from the vertex, dist 12.7 > D, although 9 from both lines"),
        (70, 10, 0.3, "above the padded box (y < 18)"),
        (140, 50, 0.3, "right of the padded box (x > 132)"),
    ],
)
def test_border_rectangle_values(x, y, expected, why):
    out = BorderMap()(make_sample([RECT]), np.random.default_rng(0))
    assert out["thresh_map"].shape == (100, 200) and out["thresh_map"].dtype == np.float32
    assert out["thresh_map"][y, x] == pytest.approx(expected, abs=1e-6), why


def test_border_rectangle_thresh_mask_is_the_padded_outline():
    """thresh_mask is 1 on the padded outline's pixels (x 8..132, y 18..82) and 0 just outside;
    at a corner it follows the round join: (9, 19) is 15.6 from the vertex (20, 30), outside
    the quarter circle of radius 12 although inside the padded box; (13, 23) at 9.9 is inside."""
    m = BorderMap()(make_sample([RECT]), np.random.default_rng(0))["thresh_mask"]
    assert m.dtype == np.uint8 and set(np.unique(m)) == {0, 1}
    for x, y in [(70, 18), (70, 82), (8, 50), (132, 50), (70, 50), (13, 23)]:
        assert m[y, x] == 1, (x, y)
    for x, y in [(70, 17), (70, 83), (7, 50), (133, 50), (9, 19), (11, 21), (131, 81)]:
        assert m[y, x] == 0, (x, y)
    assert m[:, :8].sum() == 0 and m[:, 133:].sum() == 0 and m[:18].sum() == 0 and m[83:].sum() == 0


def test_border_far_from_text_is_exactly_thresh_min():
    out = BorderMap(thresh_min=0.25, thresh_max=0.75)(make_sample([RECT]), np.random.default_rng(0))
    assert (out["thresh_map"][:, 140:] == np.float32(0.25)).all()
    assert out["thresh_map"][30, 70] == pytest.approx(0.75, abs=1e-6)


def test_border_merges_overlapping_polygons_with_max():
    """Two 40 x 30 boxes, A at x 20..60 and B at x 50..90, both y 20..50: D = 1200*0.84/140 = 7.2.

    Pixel (57, 35) is 3 px from A's right edge (value 1 - 3/7.2 = 0.5833) and 7 px from B's left
    edge (1 - 7/7.2 = 0.0278): max gives 0.3 + 0.4 * 0.5833 = 0.5333 whatever the order (a sum
    would give 0.5444, last-wins 0.3111 for order A, B). (53, 35) is the mirror case.
    """
    a = [[20, 20], [60, 20], [60, 50], [20, 50]]
    b = [[50, 20], [90, 20], [90, 50], [50, 50]]
    ab = BorderMap()(make_sample([a, b], h=80, w=120), np.random.default_rng(0))
    ba = BorderMap()(make_sample([b, a], h=80, w=120), np.random.default_rng(0))
    expected = 0.3 + 0.4 * (1 - 3 / 7.2)
    assert ab["thresh_map"][35, 57] == pytest.approx(expected, abs=1e-6)
    assert ab["thresh_map"][35, 53] == pytest.approx(expected, abs=1e-6)
    np.testing.assert_array_equal(ab["thresh_map"], ba["thresh_map"])
    np.testing.assert_array_equal(ab["thresh_mask"], ba["thresh_mask"])


def test_border_skips_ignored_polygons():
    out = BorderMap()(make_sample([RECT], [True]), np.random.default_rng(0))
    assert (out["thresh_map"] == np.float32(0.3)).all() and out["thresh_mask"].sum() == 0


def test_repeated_vertex_changes_nothing():
    """MindOCR pads polygons by repeating the last point; a zero-length edge must not matter."""
    padded = np.concatenate([RECT, RECT[-1:], RECT[-1:]])
    plain, repeated = targets(make_sample([RECT])), targets(make_sample([padded]))
    for key in ("binary_map", "mask", "thresh_map", "thresh_mask"):
        np.testing.assert_array_equal(plain[key], repeated[key])


# --- fast == reference -------------------------------------------------------------------------


def curved_polygon() -> np.ndarray:
    """A CTW1500-style 14-point text line: 7 points on an outer arc, 7 back on an inner arc."""
    theta = np.linspace(np.pi * 1.1, np.pi * 1.9, 7)
    outer = np.stack([np.cos(theta), np.sin(theta)], 1) * 40 + (48, 60)
    inner = np.stack([np.cos(theta), np.sin(theta)], 1) * 26 + (48, 60)
    return np.concatenate([outer, inner[::-1]]).astype(np.float32)


def test_fast_equals_reference_on_random_quads_and_a_curve():
    rng = np.random.default_rng(7)
    polys = [curved_polygon()]
    for _ in range(4):
        centre, size, angle = rng.uniform(0, 64, 2), rng.uniform([8, 6], [40, 16]), rng.uniform(-np.pi, np.pi)
        corners = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * size / 2
        rot = np.array([[np.cos(angle), np.sin(angle)], [-np.sin(angle), np.cos(angle)]])
        polys.append(corners @ rot + centre + rng.normal(0, 1.5, (4, 2)))  # slightly irregular quads
    out = targets(make_sample(polys, h=64, w=72))
    assert not out["ignore_tags"].any()
    expected = reference_thresh_map(out["polys"], out["ignore_tags"], 64, 72)
    np.testing.assert_allclose(out["thresh_map"], expected, rtol=0, atol=1e-5)
    assert (out["thresh_map"] > 0.3 + 1e-3).sum() > 500  # the comparison covers real ramps


def test_long_thin_polygon_keeps_full_precision():
    """A needle (0, 0) -> (300, 300) -> (0, 1): A = 150, L = 849.5, D = 0.148, edges ~2900 D long.
    Integer pixels such as (7, 7) lie exactly on its long edge (value 1, thresh 0.7). Float32
    offsets of ~200 px are off by ~1e-5 px, i.e. ~1e-4 of D (measured: 2e-5 in thresh_map),
    so such edges are computed in float64."""
    needle = np.array([[0, 0], [300, 300], [0, 1]])
    out = BorderMap()(make_sample([needle], h=304, w=304), np.random.default_rng(0))
    expected = reference_thresh_map([needle], [False], 304, 304)
    assert expected[7, 7] == pytest.approx(0.7) and expected[150, 150] == pytest.approx(0.7)
    np.testing.assert_allclose(out["thresh_map"], expected, rtol=0, atol=1e-6)


# --- degenerate input --------------------------------------------------------------------------

# Vertices on a quarter-pixel grid reach degenerate cases (collinear, repeated points, slivers)
# without areas so small that D is float noise, where no two implementations could agree.
coords = st.integers(-64, 192).map(lambda v: v / 4)
polygons = st.lists(st.tuples(coords, coords), min_size=3, max_size=7)


@settings(max_examples=60, deadline=None)
@given(
    polys=st.lists(polygons, max_size=4),
    data=st.data(),
    h=st.integers(1, 32),
    w=st.integers(1, 32),
    min_text_size=st.sampled_from([0, 8]),
)
def test_degenerate_input_never_crashes_and_matches_reference(polys, data, h, w, min_text_size):
    ignore = data.draw(st.lists(st.booleans(), min_size=len(polys), max_size=len(polys)))
    out = targets(make_sample(polys, ignore, h=h, w=w), min_text_size=min_text_size)
    assert out["binary_map"].shape == (1, h, w) and out["mask"].shape == (h, w)
    assert out["thresh_map"].shape == (h, w) and out["thresh_mask"].shape == (h, w)
    for key in ("binary_map", "mask", "thresh_mask"):
        assert out[key].dtype == np.uint8 and set(np.unique(out[key])) <= {0, 1}
    tags = out["ignore_tags"]
    assert tags.dtype == bool and tags.shape == (len(polys),) and (tags >= np.asarray(ignore, bool)).all()
    for poly, tag in zip(out["polys"], tags, strict=True):
        if min(np.ptp(poly, axis=0)) < min_text_size or polygon_area(poly) == 0:
            assert tag
    expected = reference_thresh_map(out["polys"], tags, h, w)
    np.testing.assert_allclose(out["thresh_map"], expected, rtol=0, atol=1e-5)


def test_empty_sample():
    out = targets(make_sample([], h=16, w=24))
    assert out["binary_map"].sum() == 0 and (out["mask"] == 1).all()
    assert (out["thresh_map"] == np.float32(0.3)).all() and out["thresh_mask"].sum() == 0
    assert out["ignore_tags"].shape == (0,)


def test_polygon_partly_and_wholly_outside_the_image():
    inside_out = [[-30, -10], [40, -10], [40, 30], [-30, 30]]
    far_away = [[300, 300], [340, 300], [340, 330], [300, 330]]
    out = targets(make_sample([inside_out, far_away], h=40, w=50))
    # D = 2800 * 0.84 / 220 = 10.7: shrunk to x -19..29, y 1..19; padded to x -41..51, y -21..41
    assert out["binary_map"][0, 10, 0] == 1 and out["binary_map"][0, 0, 0] == 0
    assert out["thresh_mask"][0, 0] == 1 and out["thresh_mask"][20, 49] == 1 and out["thresh_mask"][39, 49] == 0
    assert out["ignore_tags"].tolist() == [False, False]
    expected = reference_thresh_map(out["polys"], out["ignore_tags"], 40, 50)
    np.testing.assert_allclose(out["thresh_map"], expected, rtol=0, atol=1e-5)


# --- constructor and sample checks -------------------------------------------------------------


def test_reprs():
    assert repr(ShrinkBinaryMap()) == "ShrinkBinaryMap(min_text_size=8, shrink_ratio=0.4)"
    assert repr(BorderMap()) == "BorderMap(shrink_ratio=0.4, thresh_min=0.3, thresh_max=0.7)"


@pytest.mark.parametrize(
    "make",
    [
        lambda: ShrinkBinaryMap(min_text_size=-1),
        lambda: ShrinkBinaryMap(min_text_size=float("nan")),
        lambda: ShrinkBinaryMap(shrink_ratio=1.0),
        lambda: ShrinkBinaryMap(shrink_ratio="0.4"),
        lambda: BorderMap(shrink_ratio=-0.1),
        lambda: BorderMap(thresh_min=0.8, thresh_max=0.7),
        lambda: BorderMap(thresh_max=1.5),
        lambda: BorderMap(thresh_min=True),
    ],
)
def test_bad_parameters_raise(make):
    with pytest.raises(ValueError):
        make()


@pytest.mark.parametrize("transform", [ShrinkBinaryMap(), BorderMap()])
def test_bad_samples_raise_sample_error(transform):
    with pytest.raises(SampleError, match="ignore_tags"):
        transform(make_sample([RECT], [False, True]), np.random.default_rng(0))
    with pytest.raises(SampleError, match="image"):
        transform({"polys": [RECT], "ignore_tags": np.array([False])}, np.random.default_rng(0))


def test_uint8_maps_give_the_same_loss_as_float32():
    """Workers ship binary_map / mask / thresh_mask as uint8 (4x fewer bytes); DBLoss casts them, so the loss
    is bit-identical to the one on float32 copies of the same maps."""
    import torch

    from textdet.loss import DBLoss

    out = targets(make_sample([RECT, RECT + [40, 10]]))
    batch = {k: torch.from_numpy(np.stack([out[k]] * 2)) for k in ("binary_map", "mask", "thresh_map", "thresh_mask")}
    assert all(batch[k].dtype == torch.uint8 for k in ("binary_map", "mask", "thresh_mask"))
    assert batch["binary_map"].sum() > 0 and batch["thresh_mask"].sum() > 0 and (batch["mask"] == 0).sum() == 0
    gen = torch.Generator().manual_seed(0)
    preds = {k: torch.rand(2, 1, 100, 200, generator=gen) for k in ("binary", "thresh", "thresh_binary")}
    loss = DBLoss()
    as_uint8 = loss(preds, **batch)
    as_float = loss(preds, **{k: v.float() for k, v in batch.items()})
    assert all(torch.equal(as_uint8[k], as_float[k]) for k in as_float) and as_uint8["loss_thresh"].item() > 0


def test_polygon_area_is_polygon_areas_exactly():
    """polygon_area is polygon_areas of a batch of one: the same float, bit for bit, alone or in a batch of
    any size, on awkward polygons (tiny and huge, far from the origin, slivers, self-crossing, many vertices,
    float32)."""
    rng = np.random.default_rng(11)
    for n_vertices in (3, 4, 5, 7, 8, 9, 16, 33):
        size = rng.choice([1e-6, 1.0, 1e4], (40, 1, 1))
        offset = rng.choice([0.0, 1e6, -3e7], (40, 1, 2))
        polys = rng.normal(0, 1, (40, n_vertices, 2)) * size + offset
        polys[::7, :, 1] = polys[::7, :, 0] * 3 + 1e-9  # slivers: (nearly) on one line
        for batch in (polys, polys.astype(np.float32)):
            areas = polygon_areas(batch)
            assert [polygon_area(p) for p in batch] == areas.tolist()
            assert polygon_areas(batch[5:6]).tolist() == areas[5:6].tolist()
            assert polygon_areas(batch[::3]).tolist() == areas[::3].tolist()
    assert polygon_area([[0, 0], [4, 0], [4, 3], [0, 3]]) == 12.0  # a known answer
