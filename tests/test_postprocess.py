"""DBPostprocess: filled rectangles in, hand-computed unclipped boxes out."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from textdet.errors import ConfigError
from textdet.geometry import offset_polygon, shrink_distance
from textdet.metrics import DetMetric
from textdet.postprocess import POSTPROCESSES, DBPostprocess, build_postprocess


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
    # quad mode scores the L's bounding rectangle, 43% empty: mean 0.9 * 1191 / 2091 ~ 0.51 < 0.7
    assert DBPostprocess(box_type="quad")(prob[None])[0]["polys"] == []
    (quad,) = DBPostprocess(box_type="quad", box_thresh=0.5)(prob[None])[0]["polys"]
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
    assert fast == pytest.approx(slow, abs=1e-6)


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
    pp = build_postprocess("DBPostprocess", box_type="poly", rescale_fields=["polys"])
    assert pp.box_type == "poly"
    with pytest.raises(ConfigError, match="DBPostprocess"):
        build_postprocess("EASTPostprocess")
    with pytest.raises(ConfigError, match="unclip_ratio"):
        build_postprocess("DBPostprocess", unclip_ratio=2.0)
