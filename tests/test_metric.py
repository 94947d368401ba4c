"""DetMetric (ICDAR2015 protocol) and the ICDAR file reader; each docstring draws its geometry."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from textdet.config.components import build_component
from textdet.errors import ConfigError, DataError
from textdet.metrics import METRICS, DetMetric, evaluate_files, evaluate_image, load_gt
from textdet.metrics.icdar_io import parse_icdar_gt, parse_icdar_result


def box(x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32)


def scores(dets: list, gts: list, ignore: list | None = None) -> dict[str, float]:
    metric = DetMetric()
    metric.update([dets], [gts], [np.zeros(len(gts), bool) if ignore is None else np.array(ignore)])
    return metric.compute()


def test_exact_match():
    """::

    +------+   GT 0..10 x 0..10
    | GT=D |   detection identical -> P = R = F = 1
    +------+
    """
    assert scores([box(0, 0, 10, 10)], [box(0, 0, 10, 10)]) == {"recall": 1.0, "precision": 1.0, "f-score": 1.0}


def test_miss():
    """::

    +----+          +----+
    | GT |          | D  |   no overlap: TP 0, one FN, one FP
    +----+          +----+
    0..10           20..30
    """
    assert evaluate_image([box(20, 0, 30, 10)], [box(0, 0, 10, 10)], [False]) == (0, 1, 1)
    assert scores([box(20, 0, 30, 10)], [box(0, 0, 10, 10)]) == {"recall": 0.0, "precision": 0.0, "f-score": 0.0}


def test_split_detections_both_fail_iou():
    """::

    +---------+---------+   GT 0..20 x 0..10
    |   D1    |   D2    |   D1 0..10, D2 10..20: IoU = 100 / 200 = 0.5 each, not > 0.5
    +---------+---------+
    """
    assert evaluate_image([box(0, 0, 10, 10), box(10, 0, 20, 10)], [box(0, 0, 20, 10)], [False]) == (0, 2, 1)


def test_merged_detection_matches_at_most_one_gt():
    """::

    +---GT1---+ +---GT2---+    GT1 0..10, GT2 11..21 (x), 0..10 (y)
    +-------- D ----------+    D 0..21: IoU(GT1) = 100/210 < 0.5 -> nothing matches

    +--GT1--+ +GT2+            GT1 0..16, GT2 17..21; D 0..21: IoU(GT1) = 160/210 > 0.5
    +------- D -------+        -> TP 1 (GT1); GT2 is missed, D cannot match twice
    """
    assert evaluate_image([box(0, 0, 21, 10)], [box(0, 0, 10, 10), box(11, 0, 21, 10)], [False, False]) == (0, 1, 2)
    assert evaluate_image([box(0, 0, 21, 10)], [box(0, 0, 16, 10), box(17, 0, 21, 10)], [False, False]) == (1, 1, 2)


def test_duplicate_detection_is_a_false_positive():
    """::

    +--------+   GT 0..10 x 0..10
    | D1 D2  |   two identical detections: one TP, one FP -> precision 0.5, recall 1
    +--------+   (MindOCR's first-match loop would report precision 1.0)
    """
    got = scores([box(0, 0, 10, 10), box(0, 0, 10, 10)], [box(0, 0, 10, 10)])
    assert got["precision"] == 0.5 and got["recall"] == 1.0 and got["f-score"] == pytest.approx(2 / 3)


def test_detection_on_dont_care_gt_is_not_counted():
    """::

    +------+ +-----+    GT1 '###' 0..10;  D1 1..9 lies inside it -> don't care
    | ###  | | GT2 |    GT2 20..30 matched by D2 -> P = R = 1
    | [D1] | | D2  |    D3 5..15 is 50% inside ### (not > 0.5): a care false positive
    +------+ +-----+
    """
    dets = [box(1, 1, 9, 9), box(20, 0, 30, 10)]
    gts, ignore = [box(0, 0, 10, 10), box(20, 0, 30, 10)], [True, False]
    assert evaluate_image(dets, gts, ignore) == (1, 1, 1)
    assert scores(dets, gts, ignore) == {"recall": 1.0, "precision": 1.0, "f-score": 1.0}
    assert evaluate_image([*dets, box(5, 0, 15, 10)], gts, ignore) == (1, 2, 1)


def test_iou_exactly_half_is_not_a_match():
    """::

    y=0  +------+          GT 0..4 x 0..3 (area 12)
    y=1  |+----+|          D  0..4 x 1..4 (area 12)
    y=3  +|----|+          intersection 0..4 x 1..3 = 8, union 16, IoU = 0.5 exactly
    y=4   +----+           -> no match (the protocol needs IoU > 0.5)
    """
    assert evaluate_image([box(0, 1, 4, 4)], [box(0, 0, 4, 3)], [False]) == (0, 1, 1)
    assert evaluate_image([box(0.5, 1.7, 4.9, 4.2)], [box(0, 0, 4, 3)], [False])[0] == 0  # truncates to the same


def test_coordinates_are_truncated():
    """GT 0..10; D 0.9..10.9 truncates to 0..10 -> IoU 1. D 5.9..15.9 truncates to 5..15 -> IoU 1/3."""
    assert evaluate_image([box(0.9, 0.9, 10.9, 10.9)], [box(0, 0, 10, 10)], [False]) == (1, 1, 1)
    assert evaluate_image([box(0, 0, 10, 10)], [box(0.99, 0.99, 10.99, 10.99)], [False]) == (1, 1, 1)
    assert evaluate_image([box(0, 4.9, 10, 15)], [box(0, 0, 10, 10)], [False]) == (0, 1, 1)  # y 4..15: 60/150


def test_invalid_and_degenerate_polygons():
    """A bow-tie detection is repaired (buffer(0)), a 2-point one is empty: both are care false positives."""
    bowtie = np.array([[0, 0], [10, 10], [10, 0], [0, 10]], np.float32)
    assert evaluate_image([bowtie, np.zeros((2, 2))], [box(0, 0, 10, 10)], [False]) == (0, 2, 1)


def test_empty_data_set_and_pooling():
    """No GT and no detections: every ratio 0 (official global rule); pooling is over images."""
    assert DetMetric().compute() == {"recall": 0.0, "precision": 0.0, "f-score": 0.0}
    metric = DetMetric()
    metric.update([[box(0, 0, 10, 10)], []], [[box(0, 0, 10, 10)], [box(0, 0, 5, 5), box(9, 9, 20, 20)]], [None, None])
    assert metric.counts().tolist() == [1, 1, 1, 3]
    assert metric.compute()["recall"] == pytest.approx(1 / 3)
    metric.update(
        [{"polys": [box(0, 0, 5, 5)], "scores": [0.9]}], [[box(0, 0, 5, 5)]], [[False]]
    )  # a post-process dict
    assert metric.counts().tolist() == [2, 2, 2, 4]


def test_counts_round_trip_and_merge():
    """Two metrics on two halves, summed through counts()/set_counts(), equal one pass over everything."""
    rng = np.random.default_rng(0)
    images = []
    for _ in range(6):
        gts = [box(x, y, x + 20, y + 10) for x, y in rng.integers(0, 100, (4, 2))]
        dets = [g + rng.normal(0, 3, g.shape).astype(np.float32) for g in gts[:3]]
        images.append((dets, gts, rng.random(4) < 0.2))
    whole, first, second = DetMetric(), DetMetric(), DetMetric()
    for m, part in ((whole, images), (first, images[:3]), (second, images[3:])):
        m.update([d for d, _, _ in part], [g for _, g, _ in part], [i for _, _, i in part])
    merged = DetMetric()
    merged.set_counts(first.counts() + second.counts())
    assert merged.counts().tolist() == whole.counts().tolist()
    assert merged.compute() == whole.compute()
    whole.reset()
    assert whole.counts().tolist() == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="set_counts"):
        whole.set_counts([1, 2])


def test_bad_inputs_and_build_metric():
    with pytest.raises(ValueError, match="batch sizes"):
        DetMetric().update([[]], [[], []], [None, None])
    with pytest.raises(ValueError, match="ignore tags"):
        evaluate_image([], [box(0, 0, 1, 1)], [False, True])
    assert METRICS == {"DetMetric": DetMetric}
    metric = build_component(METRICS, "DetMetric", {"main_indicator": "f-score"}, "metric", "metric")
    assert metric.main_indicator == "f-score"
    with pytest.raises(ConfigError, match="DetMetric"):
        build_component(METRICS, "HmeanIOU", {}, "metric", "metric")
    with pytest.raises(ConfigError, match="device_num"):
        build_component(METRICS, "DetMetric", {"device_num": 8}, "metric", "metric")


# ---------------------------------------------------------------- ICDAR files


def test_gt_with_bom_and_commas_in_transcriptions():
    text = "\ufeff377,117,463,117,465,130,378,130,Genaxis Theatre\r\n374,155,409,155,409,170,374,170,###\r\n" + (
        "1,2,3,4,5,6,7,8,a,b,,c\r\n\r\n"
    )
    polys, ignore, texts = parse_icdar_gt(text, "gt_img_1.txt")
    assert texts == ["Genaxis Theatre", "###", "a,b,,c"]
    assert ignore.tolist() == [False, True, False]
    np.testing.assert_array_equal(polys[0], [[377, 117], [463, 117], [465, 130], [378, 130]])
    with pytest.raises(DataError, match="gt_img_1.txt:1"):
        parse_icdar_gt("1,2,3,x,5,6,7,8,t", "gt_img_1.txt")
    polys, conf = parse_icdar_result("0,0,10,0,10,10,0,10,0.93\n1,1,2,1,2,2,1,2\n", "res_img_1.txt")
    assert len(polys) == 2 and conf[0] == pytest.approx(0.93) and np.isnan(conf[1])
    with pytest.raises(DataError, match="res_img_1.txt:2"):
        parse_icdar_result("0,0,10,0,10,10,0,10\n0,0,10,0,10\n", "res_img_1.txt")


def _write(folder: Path, name: str, text: str, bom: bool = False) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(text.encode("utf-8-sig" if bom else "utf-8"))


def test_evaluate_files_on_a_small_folder(tmp_path: Path):
    """img_1: one GT matched + one '###' with a detection inside it; img_2: one GT, no result file.

    TP 1, care GT 2, care detections 1 -> recall 0.5, precision 1.
    """
    gt, res = tmp_path / "gt", tmp_path / "res"
    _write(gt, "gt_img_1.txt", "0,0,10,0,10,10,0,10,Hello, world\n20,0,30,0,30,10,20,10,###\n", bom=True)
    _write(gt, "gt_img_2.txt", "0,0,10,0,10,10,0,10,x\n")
    _write(res, "res_img_1.txt", "0,0,10,0,10,10,0,10,0.9\n21,1,29,1,29,9,21,9\n")
    expected = {
        "recall": 0.5,
        "precision": 1.0,
        "f-score": pytest.approx(2 / 3),
        "tp": 1,
        "n_gt": 2,
        "n_det": 1,
        "images": 2,
        "protocol": "icdar15",
    }
    assert evaluate_files(str(gt), str(res)) == expected

    with zipfile.ZipFile(tmp_path / "res.zip", "w") as zf:  # a zipped submission reads the same
        zf.write(res / "res_img_1.txt", "res_img_1.txt")
    assert evaluate_files(str(gt), str(tmp_path / "res.zip")) == expected

    _write(res, "res_img_9.txt", "0,0,10,0,10,10,0,10\n")
    with pytest.raises(DataError, match="res_img_9.txt"):
        evaluate_files(str(gt), str(res))


def test_evaluate_mindocr_label_files(tmp_path: Path):
    """MindOCR label file for GT ('*' is don't-care too) and a det_results.txt-style prediction file."""
    (tmp_path / "gt.txt").write_text(
        'imgs/img_1.jpg\t[{"transcription": "a", "points": [[0,0],[10,0],[10,10],[0,10]]},'
        ' {"transcription": "*", "points": [[20,0],[30,0],[30,10],[20,10]]}]\n'
        'imgs/img_2.jpg\t[{"transcription": "b", "points": [[0,0],[10,0],[10,10],[0,10]]}]\n',
        encoding="utf-8",
    )
    (tmp_path / "pred.txt").write_text(
        "img_1.jpg\t[[[0,0],[10,0],[10,10],[0,10]], [[21,1],[29,1],[29,9],[21,9]]]\n"
        "img_2.jpg\t[[[50,50],[60,50],[60,60],[50,60]]]\n",
        encoding="utf-8",
    )
    got = evaluate_files(tmp_path / "gt.txt", tmp_path / "pred.txt")
    assert (got["tp"], got["n_gt"], got["n_det"], got["images"]) == (1, 2, 2, 2)
    assert load_gt(tmp_path / "gt.txt")["img_1"][1].tolist() == [False, True]
    (tmp_path / "bad.txt").write_text("img_1.jpg\t[{]\n", encoding="utf-8")
    with pytest.raises(DataError, match="bad.txt:1"):
        load_gt(tmp_path / "bad.txt")
