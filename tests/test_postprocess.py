"""DBPostprocess: filled rectangles in, hand-computed unclipped boxes and scores out."""

from __future__ import annotations

import cv2
import numpy as np
import pyclipper
import pytest
import torch

from textdet.config.components import build_component
from textdet.errors import ConfigError
from textdet.geometry import offset_polygon, order_quads, quad_corners, shrink_distance
from textdet.metrics import DetMetric
from textdet.postprocess import POSTPROCESSES, DBPostprocess
from textdet.postprocess import db_postprocess as dbp


def _fill(prob: np.ndarray, x0: int, y0: int, x1: int, y1: int, value: float) -> None:
    """Pixels x0..x1, y0..y1 inclusive: the contour runs through their centres, a (x1-x0) x (y1-y0) box."""
    prob[y0 : y1 + 1, x0 : x1 + 1] = value


def _two_boxes() -> np.ndarray:
    """64 x 128 map::

    A: x 10..50, y 10..20 (40 x 10, P 0.9)  D = 40*10*1.5 / (2*50)  = 6  -> x 4..56,  y 4..26
    B: x 70..110, y 30..50 (40 x 20, P 0.8) D = 40*20*1.5 / (2*60) = 10 -> x 60..120, y 20..60
    """
    prob = np.zeros((64, 128), np.float32)
    _fill(prob, 10, 10, 50, 20, 0.9)
    _fill(prob, 70, 30, 110, 50, 0.8)
    return prob


def _by_x(result: dict) -> tuple[list[np.ndarray], list[float]]:
    order = np.argsort([p[:, 0].min() for p in result["polys"]])
    return [result["polys"][i] for i in order], [result["scores"][i] for i in order]


def _rect(x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32)  # TL, TR, BR, BL


def test_two_rectangles_unclipped_and_rescaled():
    """With shape_list [128, 64, 0.5, 2.0] a map point (x, y) goes to (x / 2, y / 0.5)."""
    prob = _two_boxes()
    (res,) = DBPostprocess()(prob[None, None])
    polys, scores = _by_x(res)
    assert len(polys) == 2
    np.testing.assert_array_equal(polys[0], _rect(4, 4, 56, 26))
    np.testing.assert_array_equal(polys[1], _rect(60, 20, 120, 60))
    assert scores == pytest.approx([0.9, 0.8], abs=1e-6)
    assert all(p.dtype == np.float32 and p.shape == (4, 2) for p in polys)

    (res,) = DBPostprocess()(prob[None, None], shape_list=np.array([[128, 64, 0.5, 2.0]]))
    polys, _ = _by_x(res)
    np.testing.assert_array_equal(polys[0], _rect(2, 8, 28, 52))
    np.testing.assert_array_equal(polys[1], _rect(30, 40, 60, 120))


def test_rescale_rounds_after_dividing_and_clips():
    """A: x 4..56 / 3 -> 1.33..18.67 -> 1..19; B reaches x 120 / 3 = 40 > W - 1 = 39 -> clipped."""
    (res,) = DBPostprocess()(_two_boxes()[None], shape_list=[[64, 40, 1.0, 3.0]])
    polys, _ = _by_x(res)
    np.testing.assert_array_equal(polys[0][:, 0], [1, 19, 19, 1])
    assert polys[1][:, 0].max() == 39


def test_box_thresh_filters_a_low_score_blob():
    """A blob at P = 0.5 passes binary_thresh 0.3 but scores below box_thresh 0.7."""
    prob = _two_boxes()
    _fill(prob, 10, 40, 40, 55, 0.5)
    assert len(DBPostprocess()(prob[None])[0]["polys"]) == 2
    assert len(DBPostprocess(box_thresh=0.45)(prob[None])[0]["polys"]) == 3


def test_small_blobs_are_dropped():
    """A 2-pixel-high strip (contour box 20 x 1) has a short side < 3."""
    prob = np.zeros((32, 32), np.float32)
    _fill(prob, 5, 5, 25, 6, 0.9)
    assert DBPostprocess()(prob[None])[0]["polys"] == []


def test_max_candidates():
    prob = _two_boxes()
    _fill(prob, 10, 40, 40, 55, 0.9)
    assert len(DBPostprocess()(prob[None])[0]["polys"]) == 3
    assert len(DBPostprocess(max_candidates=2)(prob[None])[0]["polys"]) == 2
    assert DBPostprocess(max_candidates=0)(prob[None])[0]["polys"] == []


def test_poly_mode_follows_an_l_shaped_blob():
    """L-shaped blob; poly mode keeps the notch empty, quad mode covers it (and scores lower)::

    x 10..30, y 10..50  (vertical bar)
    x 10..60, y 40..50  (foot)
    notch centre (45, 20) is outside the L
    """
    prob = np.zeros((64, 80), np.float32)
    _fill(prob, 10, 10, 30, 50, 0.9)
    _fill(prob, 10, 40, 60, 50, 0.9)
    (res,) = DBPostprocess(box_type="poly")(prob[None])
    (poly,) = res["polys"]
    assert poly.shape[0] > 4 and poly.dtype == np.float32
    contour = poly.reshape(-1, 1, 2)
    assert cv2.pointPolygonTest(contour, (45.0, 20.0), False) < 0  # the notch stays out
    for inside in [(20.0, 12.0), (58.0, 45.0), (20.0, 45.0)]:
        assert cv2.pointPolygonTest(contour, inside, False) > 0
    # the "fast" score of quad mode is the mean over the L's bounding rectangle, 43% empty:
    # 0.9 * 1191 / 2091 ~ 0.51 < 0.7; the default "bitmap" score counts the L's pixels only (0.9)
    assert DBPostprocess(box_type="quad", score_mode="fast")(prob[None])[0]["polys"] == []
    assert DBPostprocess(box_type="quad")(prob[None])[0]["scores"] == [pytest.approx(0.9)]
    (quad,) = DBPostprocess(box_type="quad", box_thresh=0.5, score_mode="fast")(prob[None])[0]["polys"]
    assert quad.shape == (4, 2) and cv2.pointPolygonTest(quad.reshape(-1, 1, 2), (45.0, 20.0), False) > 0


def test_batch_of_two_from_tensor_dict_and_numpy():
    """Image 0 has the two boxes, image 1 only box B; every input form gives the same answer."""
    maps = np.stack([_two_boxes(), _two_boxes()])
    maps[1, :, :60] = 0.0
    pp = DBPostprocess()
    expected = pp(maps)
    assert [len(r["polys"]) for r in expected] == [2, 1]
    for pred in (maps[:, None], torch.from_numpy(maps[:, None]), {"binary": torch.from_numpy(maps[:, None])}):
        got = pp(pred)
        assert [r["scores"] for r in got] == [r["scores"] for r in expected]
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(np.stack(a["polys"]), np.stack(b["polys"]))


def test_slow_score_and_dilation():
    """Two blobs one column apart (x 10..20 and x 22..32) merge under 2x2 dilation; slow == fast on a box."""
    prob = np.zeros((40, 48), np.float32)
    _fill(prob, 10, 10, 20, 25, 0.9)
    _fill(prob, 22, 10, 32, 25, 0.9)
    assert len(DBPostprocess()(prob[None])[0]["polys"]) == 2
    merged = DBPostprocess(use_dilation=True, box_thresh=0.5)(prob[None])[0]
    assert len(merged["polys"]) == 1
    fast = DBPostprocess(score_mode="fast")(_two_boxes()[None])[0]["scores"]
    slow = DBPostprocess(score_mode="slow")(_two_boxes()[None])[0]["scores"]
    bitmap = DBPostprocess(score_mode="bitmap")(_two_boxes()[None])[0]["scores"]
    assert fast == pytest.approx(slow, abs=1e-6) and bitmap == pytest.approx(slow, abs=1e-6)


def test_perfect_shrunk_maps_give_f_score_one():
    """Shrink three GT boxes by DB's D = A (1 - 0.4^2) / L, draw them, post-process: every GT is found."""
    gts = [_rect(8, 8, 88, 28), _rect(20, 50, 120, 90), _rect(100, 10, 150, 40)]
    prob = np.zeros((100, 160), np.float32)
    for g in gts:
        (shrunk,) = offset_polygon(g, -shrink_distance(g, 0.4))
        cv2.fillPoly(prob, [np.round(shrunk).astype(np.int32).reshape(-1, 1, 2)], 1.0)
    (res,) = DBPostprocess()(prob[None])
    metric = DetMetric()
    metric.update([res["polys"]], [gts], [np.zeros(3, bool)])
    assert metric.compute() == {"recall": 1.0, "precision": 1.0, "f-score": 1.0}


def test_bad_arguments():
    with pytest.raises(ValueError, match="box_type"):
        DBPostprocess(box_type="polygon")
    with pytest.raises(ValueError, match=r"\(N,1,H,W\)"):
        DBPostprocess()(np.zeros((2, 3, 8, 8)))
    with pytest.raises(ValueError, match="shape_list"):
        DBPostprocess()(np.zeros((2, 8, 8)), shape_list=[[8, 8, 1, 1]])
    with pytest.raises(KeyError, match="thresh"):
        DBPostprocess(pred_name="thresh")({"binary": np.zeros((1, 8, 8))})
    assert POSTPROCESSES == {"DBPostprocess": DBPostprocess}
    spec = {"box_type": "poly", "rescale_fields": ["polys"]}
    pp = build_component(POSTPROCESSES, "DBPostprocess", spec, "postprocess", "postprocess")
    assert pp.box_type == "poly"
    with pytest.raises(ConfigError, match="DBPostprocess"):
        build_component(POSTPROCESSES, "EASTPostprocess", {}, "postprocess", "postprocess")
    with pytest.raises(ConfigError, match="unclip_ratio"):
        build_component(POSTPROCESSES, "DBPostprocess", {"unclip_ratio": 2.0}, "postprocess", "postprocess")


def _l_and_square() -> np.ndarray:
    """64 x 80 map: an L (P 0.9, 700 pixels) with a separate square S (P 0.5) in its notch::

    L bar:  x 10..19, y 10..49   (400 px)     L's contour bbox and min-area box: x 10..49, y 10..49 (1600 px)
    L foot: x 20..49, y 40..49   (300 px)     notch x 20..49, y 10..39: zeros, except
    S:      x 30..39, y 20..29   (100 px, P 0.5)
    """
    prob = np.zeros((64, 80), np.float32)
    _fill(prob, 10, 10, 19, 49, 0.9)
    _fill(prob, 20, 40, 49, 49, 0.9)
    _fill(prob, 30, 20, 39, 29, 0.5)
    return prob


@pytest.mark.parametrize(
    ("mode", "l_score"),
    [
        ("bitmap", (700 * 0.9 + 100 * 0.5) / 800),  # foreground pixels in L's bbox: L and S = 0.85
        ("fast", (700 * 0.9 + 100 * 0.5) / 1600),  # every pixel of L's min-area box: 0.425
        ("slow", 0.9),  # the pixels inside L's contour: L only
    ],
)
def test_score_modes_known_answers(mode, l_score):
    """The three score modes on one map, by hand; S scores 0.5 in every mode (its bbox is all foreground)."""
    polys, scores = DBPostprocess(score_mode=mode, box_thresh=0.0).extract(_l_and_square())
    by_size = sorted(zip(polys, scores, strict=True), key=lambda ps: np.ptp(ps[0][:, 0]))
    assert [s for _, s in by_size] == pytest.approx([0.5, l_score], abs=1e-6)
    # box_thresh 0.6 keeps L in "bitmap" (MindOCR's score) and "slow", but drops it in "fast"
    kept = DBPostprocess(score_mode=mode, box_thresh=0.6)(_l_and_square()[None])[0]["scores"]
    assert kept == ([] if mode == "fast" else [pytest.approx(l_score, abs=1e-6)])
    # poly mode uses the same scores (its "fast" polygon is the contour approximation: the L itself)
    poly_scores = DBPostprocess(box_type="poly", score_mode=mode, box_thresh=0.0).extract(_l_and_square())[1]
    assert sorted(poly_scores) == pytest.approx(sorted([0.5, 0.9 if mode == "fast" else l_score]), abs=1e-6)


def test_default_score_is_mindocrs():
    """Default ``score_mode="bitmap"``: MindOCR's ``cv2.mean(P[bbox], mask=bitmap[bbox])``, computed here directly."""
    assert DBPostprocess().score_mode == "bitmap"
    rng = np.random.default_rng(3)
    prob = cv2.GaussianBlur((rng.random((96, 128)) > 0.97).astype(np.float32), (9, 9), 2.0) * 8
    prob = np.clip(prob, 0, 1).astype(np.float32)
    bitmap = (prob >= 0.3).astype(np.uint8)
    contours, _ = cv2.findContours(bitmap, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    expected = []
    for c in contours:
        x, y, w, h = cv2.boundingRect(c)
        if min(cv2.minAreaRect(c)[1]) >= 3:
            expected.append(cv2.mean(prob[y : y + h, x : x + w], bitmap[y : y + h, x : x + w])[0])
    assert len(expected) > 5
    got = DBPostprocess(box_thresh=0.0).extract(prob)[1]
    assert sorted(got) == pytest.approx(sorted(expected), abs=1e-12)
    with pytest.raises(ValueError, match="score_mode"):
        DBPostprocess(score_mode="mean")


def _random_rects(n: int, seed: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    centres = rng.uniform(150, 650, (n, 2)).tolist()
    sizes = np.column_stack([rng.uniform(3, 300, n), rng.uniform(3, 60, n)]).tolist()
    return [(tuple(c), tuple(s), a) for c, s, a in zip(centres, sizes, rng.uniform(-90, 90, n).tolist(), strict=True)]


def test_unclip_quad_is_mindocrs_pyclipper_route():
    """MindOCR's unclip: pyclipper (corners truncated, output rounded) by D = area * r / length, then
    minAreaRect. unclip_quad gives the same corners on nearly every box, all within 1 px (hand-checked route:
    pyclipper truncates float input, e.g. -0.9 -> 0 and 10.7 -> 10)."""
    same, diffs = 0, []
    for rect in _random_rects(300, 0):
        w, h = rect[1]
        pts = cv2.boxPoints(rect)
        offset = pyclipper.PyclipperOffset()
        offset.AddPath(list(pts), pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
        (expanded,) = offset.Execute(w * h * 1.5 / (2 * (w + h)))
        expected = order_quads(cv2.boxPoints(cv2.minAreaRect(np.array(expanded, np.float32)))[None])[0]
        got = order_quads(cv2.boxPoints(dbp.unclip_quads([rect], 1.5)[0])[None])[0]
        diffs.append(np.abs(got - expected).max())
        same += bool(np.allclose(got, expected, atol=1e-3))
    assert max(diffs) <= 1.0 and same >= 270  # 281 of 300 identical


def test_quad_corners_are_cv2_box_points_in_the_one_order():
    """quad_corners (the one routine from rectangles to corners) = cv2.boxPoints + order_quads; known
    answers."""
    rects = _random_rects(200, 1) + [((50.0, 50.0), (20.0, 10.0), a) for a in (0.0, 45.0, 90.0, -90.0)]
    flat = np.array([[cx, cy, w, h, a] for (cx, cy), (w, h), a in rects])
    corners = quad_corners(flat)
    for rect, got in zip(rects, corners, strict=True):
        np.testing.assert_allclose(order_quads(cv2.boxPoints(rect)[None])[0], got, atol=1e-3)
    # TL, TR, BR, BL: a 20 x 10 box at (50, 50), upright and turned by 90 degrees
    np.testing.assert_allclose(corners[-4], [[40, 45], [60, 45], [60, 55], [40, 55]], atol=1e-9)
    np.testing.assert_allclose(corners[-2], [[45, 40], [55, 40], [55, 60], [45, 60]], atol=1e-9)


def _many_blobs(n: int) -> np.ndarray:
    """n rotated blobs on a grid, 64 px apart, P 0.9 blurred."""
    rng = np.random.default_rng(5)
    cols = 12
    prob = np.zeros((64 * ((n + cols - 1) // cols), 64 * cols), np.float32)
    for i in range(n):
        centre = (64 * (i % cols) + 32, 64 * (i // cols) + 32)
        box = cv2.boxPoints((centre, (rng.uniform(10, 40), rng.uniform(6, 20)), rng.uniform(-60, 60)))
        cv2.fillPoly(prob, [np.round(box).astype(np.int32)], 0.9)
    return cv2.GaussianBlur(prob, (5, 5), 1.0)


def test_quads_match_the_old_pyclipper_route():
    """The previous implementation (contour -> minAreaRect -> pyclipper on the lattice -> minAreaRect) per blob:
    same candidates, corners within the lattice error."""
    prob = _many_blobs(30)
    polys, scores = DBPostprocess(box_thresh=0.6, score_mode="fast").extract(prob)
    contours, _ = cv2.findContours((prob >= 0.3).astype(np.uint8), cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    old = []
    for c in contours:
        rect = cv2.minAreaRect(c)
        pts = cv2.boxPoints(rect)
        if min(rect[1]) < 3 or dbp._mean_inside(prob, pts) < 0.6:
            continue
        (expanded,) = offset_polygon(pts, rect[1][0] * rect[1][1] * 1.5 / (2 * sum(rect[1])))
        old.append(order_quads(cv2.boxPoints(cv2.minAreaRect(expanded.astype(np.float32)))[None])[0])
    assert len(old) == len(polys) == 30
    key = lambda p: tuple(np.round(p.mean(axis=0) / 8))  # noqa: E731
    for a, b in zip(sorted(old, key=key), sorted(polys, key=key), strict=True):
        assert np.linalg.norm(a[:, None] - b[None], axis=2).min(axis=1).max() < 2.5  # any corner order


def test_bbox_prefilter_never_drops_a_kept_candidate():
    """(bw - 1)(bh - 1) < 9 implies minAreaRect's short side < 3, for any point set in the box."""
    rng = np.random.default_rng(7)
    for _ in range(3000):
        bw, bh = rng.integers(1, 12, 2)
        pts = rng.integers(0, [bw, bh], (int(rng.integers(1, 12)), 2)).astype(np.int32)
        x, y, w, h = cv2.boundingRect(pts)
        if (w - 1) * (h - 1) < 9:
            assert min(cv2.minAreaRect(pts)[1]) < 3


def test_given_bitmap_skips_the_threshold():
    """pred["bitmap"] (bool / uint8, tensor / array, (N,1,H,W) / (N,H,W)) gives the same output; it is used as given."""
    maps = np.stack([_two_boxes(), np.pad(_l_and_square(), ((0, 0), (0, 48)))])
    pp = DBPostprocess(box_thresh=0.5)
    expected = pp(maps[:, None])
    assert [len(r["polys"]) for r in expected] == [2, 2]
    bitmap = maps >= pp.binary_thresh
    for given in (bitmap, bitmap[:, None].astype(np.uint8) * 255, torch.from_numpy(bitmap[:, None])):
        got = pp({"binary": torch.from_numpy(maps[:, None]), "bitmap": given})
        assert [r["scores"] for r in got] == [r["scores"] for r in expected]
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(np.stack(a["polys"]), np.stack(b["polys"]))
    # the bitmap is what is searched: an empty one finds nothing
    assert pp({"binary": maps, "bitmap": np.zeros_like(bitmap)})[0]["polys"] == []
    with pytest.raises(ValueError, match="bitmap"):
        pp({"binary": maps, "bitmap": bitmap[:, :10]})
    with pytest.raises(ValueError, match="bitmap"):
        pp({"binary": maps, "bitmap": bitmap.astype(np.float32)})


def test_threshold_is_inclusive_and_buffer_reuse_is_safe():
    """P == binary_thresh is text (MindOCR's >=); results of one call survive the next call's threshold."""
    prob = np.zeros((32, 32), np.float32)
    _fill(prob, 5, 5, 25, 15, 0.3)
    np.testing.assert_array_equal(dbp.threshold_map(prob, 0.3), (prob >= 0.3).astype(np.uint8))
    pp = DBPostprocess(box_thresh=0.2)
    first = pp(prob[None])[0]
    assert len(first["polys"]) == 1
    kept = first["polys"][0].copy()
    assert pp(np.zeros((1, 32, 32), np.float32))[0]["polys"] == []
    np.testing.assert_array_equal(first["polys"][0], kept)


def test_shape_list_must_be_positive():
    with pytest.raises(ValueError, match="> 0"):
        DBPostprocess()(_two_boxes()[None], shape_list=[[64, 128, 0.0, 1.0]])


def test_rescale_turns_negative_zero_into_zero():
    """A corner just left of the image rounds to -0.0 before the clip; the output is +0.0 (copy or not). numpy's
    maximum already returns +0.0 on x86 builds; the + 0.0 in _rescale covers builds where it keeps -0.0."""
    for copy in (True, False):
        polys = np.array([[[-0.3, 5.2], [9.6, -0.4]]])
        out = dbp._rescale(polys, (10, 10), [10.0, 10.0, 1.0, 1.0], copy=copy)
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out, [[[0.0, 5.0], [9.0, 0.0]]])
        assert not np.signbit(out).any()


def test_a_nan_score_keeps_its_box():
    """A NaN score passes box_thresh, as in MindOCR (``box_thresh > score`` is False for NaN): the box of a
    map with a NaN pixel inside a given bitmap stays, with score NaN; quads and polygons alike."""
    prob = _two_boxes()
    bitmap = prob >= 0.3
    prob[15, 30] = np.nan  # inside box A, where the bitmap says text
    for box_type in ("quad", "poly"):
        (res,) = DBPostprocess(box_type=box_type)({"binary": prob[None], "bitmap": bitmap[None]})
        polys, scores = _by_x(res)
        assert len(polys) == 2
        assert np.isnan(scores[0]) and scores[1] == pytest.approx(0.8, abs=1e-6)
    (res,) = DBPostprocess()({"binary": prob[None], "bitmap": bitmap[None]})
    np.testing.assert_array_equal(_by_x(res)[0][0], _rect(4, 4, 56, 26))
