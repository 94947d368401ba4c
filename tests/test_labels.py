"""MindOCR/PaddleOCR label files and the ICDAR2015 converter."""

from __future__ import annotations

import json

import numpy as np
import pytest

from textdet.data import labels
from textdet.data.labels import (
    LabelRecord,
    Problem,
    convert_icdar15,
    format_label_line,
    parse_label_line,
    read_label_files,
)
from textdet.errors import DataError

QUAD = [[10, 10], [50, 10], [50, 30], [10, 30]]


def _line(path: str, anns: list[dict], sep: str = "\t") -> str:
    return f"{path}{sep}{json.dumps(anns)}"


def _ann(text: str = "word", points: list | None = None) -> dict:
    return {"transcription": text, "points": QUAD if points is None else points}


def test_tab_separator() -> None:
    rec, probs = parse_label_line(_line("imgs/a.jpg", [_ann("hi"), _ann("###")]) + "\n", "gt.txt", 3)
    assert probs == []
    assert rec == LabelRecord("imgs/a.jpg", [_ann("hi"), _ann("###")], "gt.txt", 3)


def test_single_space_separator_and_path_with_spaces() -> None:
    rec, probs = parse_label_line(_line("img_1.jpg", [_ann()], sep=" "), "gt.txt", 1)
    assert probs == [] and rec.rel_path == "img_1.jpg" and rec.annotations == [_ann()]
    # Spaces (and even " [") inside the path: the split is made before the JSON list.
    rec, probs = parse_label_line(_line("my photos/shot [2] 1.jpg", [_ann()], sep=" "), "gt.txt", 2)
    assert probs == [] and rec.rel_path == "my photos/shot [2] 1.jpg"
    rec, _ = parse_label_line(_line("my photos/a b.jpg", [_ann()]), "gt.txt", 3)
    assert rec.rel_path == "my photos/a b.jpg"


def test_blank_line_is_skipped_silently() -> None:
    assert parse_label_line("   \r\n", "gt.txt", 4) == (None, [])


def test_ignore_transcriptions_are_kept() -> None:
    rec, probs = parse_label_line(_line("a.jpg", [_ann("###"), _ann("*")]), "gt.txt", 1)
    assert probs == [] and [a["transcription"] for a in rec.annotations] == ["###", "*"]


def test_multi_point_polygon_is_kept() -> None:
    poly = [[0, 0], [10, 0], [20, 5], [30, 0], [40, 0], [40, 10], [0, 10]]
    rec, probs = parse_label_line(_line("a.jpg", [_ann(points=poly)]), "gt.txt", 1)
    assert probs == [] and rec.annotations[0]["points"] == poly


@pytest.mark.parametrize(
    "points, reason",
    [
        ([[0, 0], [5, 5]], "at least 3 points"),
        ([[0, 0], [10, 0], [10, float("nan")], [0, 10]], "NaN"),
        ([[0, 0], [10, 0], [float("inf"), 10], [0, 10]], "infinite"),
        ([[0, 0], [10, 10], [20, 20], [30, 30]], "zero-area"),
        ([[0, 0], [10, 0], ["10", 10], [0, 10]], "non-numeric"),
        ([[0, 0], [10, 0, 3], [0, 10]], "[x, y] pairs"),
    ],
)
def test_bad_polygon_dropped_with_warning_naming_line_and_index(points: list, reason: str) -> None:
    """Annotation 1 is bad; annotations 0 and 2 survive; the line is kept."""
    rec, probs = parse_label_line(_line("a.jpg", [_ann("a"), _ann("b", points), _ann("c")]), "gt.txt", 7)
    assert [a["transcription"] for a in rec.annotations] == ["a", "c"]
    assert len(probs) == 1
    p = probs[0]
    assert (p.file, p.line_no, p.severity) == ("gt.txt", 7, "warning")
    assert "annotation 1" in p.message and reason in p.message
    assert str(p).startswith("gt.txt:7: warning: annotation 1")


def test_missing_keys_dropped() -> None:
    line = _line("a.jpg", [{"points": QUAD}, {"transcription": "x"}, _ann("ok"), "junk"])
    rec, probs = parse_label_line(line, "gt.txt", 2)
    assert [a["transcription"] for a in rec.annotations] == ["ok"]
    assert [p.message.split(":")[0] for p in probs] == ["annotation 0", "annotation 1", "annotation 3"]
    assert "'transcription'" in probs[0].message and "'points'" in probs[1].message


@pytest.mark.parametrize(
    "line",
    ["a.jpg\t[{'transcription': 'x'}]", "a.jpg\tnot json", "just_a_path.jpg", 'a.jpg\t{"points": []}', "\t[]"],
)
def test_unusable_line_is_an_error_naming_file_and_line(line: str) -> None:
    rec, probs = parse_label_line(line, "data/gt.txt", 12)
    assert rec is None
    assert len(probs) == 1 and probs[0].severity == "error"
    assert str(probs[0]).startswith("data/gt.txt:12: error:")


def test_empty_annotation_list_is_a_valid_image_without_text() -> None:
    rec, probs = parse_label_line("a.jpg\t[]", "gt.txt", 1)
    assert probs == [] and rec.annotations == []


def test_read_bom_crlf_and_several_files(tmp_path) -> None:
    (tmp_path / "a.txt").write_bytes(
        b"\xef\xbb\xbf" + (_line("img_1.jpg", [_ann("caf\u00e9")]) + "\r\n\r\n").encode() + b"broken\r\n"
    )
    (tmp_path / "b.txt").write_text(_line("img_2.jpg", [_ann()]) + "\n" + _line("img 3.jpg", [], " ") + "\n")
    records, problems = read_label_files(["a.txt", "b.txt"], dataset_root=str(tmp_path))
    assert [r.rel_path for r in records] == ["img_1.jpg", "img_2.jpg", "img 3.jpg"]
    assert records[0].annotations[0]["transcription"] == "caf\u00e9"
    assert records[0].label_file == str(tmp_path / "a.txt") and records[2].line_no == 2
    assert problems == [Problem(str(tmp_path / "a.txt"), 3, problems[0].message, "error")]
    one, _ = read_label_files(str(tmp_path / "b.txt"))  # a single absolute path
    assert len(one) == 2


def test_missing_label_file_raises_naming_path(tmp_path) -> None:
    with pytest.raises(DataError, match="nope_gt.txt"):
        read_label_files("nope_gt.txt", dataset_root=str(tmp_path))


def test_sample_ratio(tmp_path) -> None:
    (tmp_path / "gt.txt").write_text("".join(_line(f"img_{i}.jpg", [_ann()]) + "\n" for i in range(10)))
    half, _ = read_label_files("gt.txt", str(tmp_path), sample_ratio=0.5, rng_seed=1)
    again, _ = read_label_files("gt.txt", str(tmp_path), sample_ratio=0.5, rng_seed=1)
    assert len(half) == 5 and [r.rel_path for r in half] == [r.rel_path for r in again]
    assert len({r.rel_path for r in half}) == 5
    double, _ = read_label_files("gt.txt", str(tmp_path), sample_ratio=2.0)
    assert len(double) == 20 and len({r.rel_path for r in double}) == 10
    more, _ = read_label_files("gt.txt", str(tmp_path), sample_ratio=1.5)
    assert len(more) == 15
    with pytest.raises(ValueError, match="sample_ratio"):
        read_label_files("gt.txt", str(tmp_path), sample_ratio=0)


def test_format_label_line_round_trip() -> None:
    anns = [{"transcription": "\u4e2d\u6587", "points": [[1, 2], [3.5, 2], [3.5, 4], [1, 4]]}]
    line = format_label_line("x/img_1.jpg", anns)
    assert "\u4e2d\u6587" in line and "\t" in line
    rec, probs = parse_label_line(line, "gt.txt", 1)
    assert probs == [] and rec.annotations == anns and rec.rel_path == "x/img_1.jpg"
    with pytest.raises(ValueError):
        format_label_line("bad\tpath.jpg", anns)


def _write_gt(folder, n: int, text: str) -> None:
    (folder / f"gt_img_{n}.txt").write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))


def test_convert_icdar15(tmp_path) -> None:
    gt = tmp_path / "gt"
    gt.mkdir()
    _write_gt(gt, 10, "1,2,30,2,30,20,1,20,Hello, world\r\n377,117,463,117,465,130,378,130,###\r\n")
    _write_gt(gt, 2, "5,5,9,5,9,9,5,9,a,b,c\n")
    _write_gt(gt, 1, "")
    (gt / "notes.txt").write_text("ignored")
    out = tmp_path / "out" / "train_gt.txt"
    assert convert_icdar15(str(gt), str(out)) == 3
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [ln.split("\t")[0] for ln in lines] == ["img_1.jpg", "img_2.jpg", "img_10.jpg"]
    records, problems = read_label_files(str(out))
    assert problems == []
    assert records[0].annotations == []
    assert records[1].annotations == [{"transcription": "a,b,c", "points": [[5, 5], [9, 5], [9, 9], [5, 9]]}]
    assert records[2].annotations[0] == {
        "transcription": "Hello, world",
        "points": [[1, 2], [30, 2], [30, 20], [1, 20]],
    }
    assert records[2].annotations[1]["transcription"] == "###"
    convert_icdar15(str(gt), str(out), image_prefix="train/images", image_ext=".png")
    assert out.read_text().splitlines()[0].startswith("train/images/img_1.png\t")


@pytest.mark.parametrize("bad", ["1,2,3,4,5,6,7,8", "1,2,3,x,5,6,7,8,word"])
def test_convert_icdar15_malformed_line_names_file_and_line(tmp_path, bad: str) -> None:
    _write_gt(tmp_path, 4, "1,2,30,2,30,20,1,20,ok\n" + bad + "\n")
    with pytest.raises(DataError, match=r"gt_img_4\.txt:2"):
        convert_icdar15(str(tmp_path), str(tmp_path / "gt.txt"))


def test_convert_icdar15_empty_or_missing_folder(tmp_path) -> None:
    with pytest.raises(DataError, match="no gt_img_N.txt"):
        convert_icdar15(str(tmp_path), str(tmp_path / "gt.txt"))
    with pytest.raises(DataError, match="missing_dir"):
        convert_icdar15(str(tmp_path / "missing_dir"), str(tmp_path / "gt.txt"))


@pytest.mark.parametrize("points, crossing", [
    ([[10, 10], [50, 30], [50, 10], [10, 30]], True),  # a bow tie: edges 0 and 2 cross
    ([[0, 0], [10, 0], [10, 10], [0, 10]], False),
    ([[0, 0], [25, 0], [25, 8], [35, 8], [35, 0], [60, 0], [60, 20], [35, 20], [35, 12], [25, 12], [25, 20],
      [0, 20]], False),  # concave, pinched, not crossing
    ([[50, 0], [79, 90], [2, 35], [98, 35], [21, 90]], True),  # a pentagram drawn point to point
    ([[0, 0], [10, 0], [10, 10], [5, 0.0], [0, 10]], False),  # touches an edge at a vertex: not a proper crossing
])
def test_self_intersection_is_a_proper_crossing_of_non_adjacent_edges(points, crossing):
    """The loop (quads) and the matrix (outlines) give the same answer at every size."""
    p = np.asarray(points, dtype=np.float64)
    assert labels._self_intersects(p) is crossing
    assert labels._crossing_by_loop(p) is crossing
    assert labels._crossing_by_matrix(p) is crossing
