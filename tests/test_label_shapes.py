"""Outlines that DB cannot learn (data/label_shapes.py): an outline pinched between two words falls apart
under DB's shrink; `convert --shape hull|quad` relabels it, `convert` and `check-data` report it, and
`check-data --ceiling` scores what a model that learned those targets exactly would.

The pinched outline, hand-computed: two 25 x 20 blocks joined by a 10 x 4 neck (at x 2..62, y 2..22).
Area 2 x 500 + 40 = 1040, perimeter 192, so DB's shrink (ratio 0.4) moves each edge in by
D = 1040 x 0.84 / 192 = 4.55 px: the 4-px neck vanishes and each block keeps a 15.9 x 10.9 kernel, two
pieces. Its convex hull and its minimum-area rectangle are both the 60 x 20 box, which shrinks to one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from conftest import RECIPE, tiny_overrides
from textdet import cli
from textdet.data.label_shapes import reshape_points, shrink_pieces, split_count

PINCHED = (np.array([[0, 0], [25, 0], [25, 8], [35, 8], [35, 0], [60, 0], [60, 20], [35, 20], [35, 12],
                     [25, 12], [25, 20], [0, 20]], float) + 2).tolist()
BOX = [[2, 2], [62, 2], [62, 22], [2, 22]]
WORD = [[70, 40], [110, 40], [110, 60], [70, 60]]


def test_a_pinched_outline_splits_and_its_hull_and_quad_do_not():
    assert shrink_pieces(PINCHED) == 2
    assert shrink_pieces(BOX) == 1
    hull = reshape_points(PINCHED, "hull")
    assert sorted(map(tuple, hull.tolist())) == sorted(map(tuple, BOX))
    np.testing.assert_allclose(reshape_points(PINCHED, "quad"), BOX, atol=1e-9)  # TL, TR, BR, BL
    assert shrink_pieces(hull) == 1
    np.testing.assert_array_equal(reshape_points(PINCHED, "outline"), PINCHED)


def test_quad_is_the_rotated_rectangle_in_corner_order():
    """A rectangle tilted by atan(3/4), drawn with an extra point on each long edge."""
    corners = np.array([[10, 10], [50, 40], [44, 48], [4, 18]], float)  # 50 x 10, TL TR BR BL
    outline = [corners[0], (corners[0] + corners[1]) / 2, corners[1], corners[2], (corners[2] + corners[3]) / 2,
               corners[3]]
    np.testing.assert_allclose(reshape_points(outline, "quad"), corners, atol=1e-4)
    with pytest.raises(ValueError, match="shape must be one of"):
        reshape_points(outline, "circle")


def test_regions_to_ignore_are_not_counted():
    regions = [{"transcription": "a", "points": PINCHED}, {"transcription": "###", "points": PINCHED},
               {"transcription": "b", "points": WORD}]
    assert split_count(regions) == 1


def write_labels(path: Path, regions: list[tuple[str, list]]) -> None:
    payload = [{"transcription": text, "points": points} for text, points in regions]
    path.write_text(f"img_0.jpg\t{json.dumps(payload)}\n", encoding="utf-8")


def converted(path: Path) -> list:
    return [a["points"] for a in json.loads(path.read_text(encoding="utf-8").split("\t")[1])]


def test_convert_reports_split_outlines_and_relabels_them(tmp_path: Path, capsys):
    labels = tmp_path / "gt.txt"
    write_labels(labels, [("pinched", PINCHED), ("word", WORD), ("###", PINCHED), ("*", WORD)])

    assert cli.main(["convert", "labels", str(labels), "--out", str(tmp_path / "outline.txt")]) == 0
    out = capsys.readouterr().out
    assert "1 images, 4 text regions (2 ignored: ### or *)" in out  # "*" is ignored in training too
    assert "warning: 1 of 2 text regions split into several pieces when shrunk" in out
    assert "--shape quad" in out
    assert converted(tmp_path / "outline.txt") == [PINCHED, WORD, PINCHED, WORD]

    assert cli.main(["convert", "labels", str(labels), "--out", str(tmp_path / "quad.txt"), "--shape", "quad"]) == 0
    assert "warning" not in capsys.readouterr().out
    assert converted(tmp_path / "quad.txt") == [BOX, WORD, BOX, WORD]  # written to the hundredth: exact

    assert cli.main(["convert", "labels", str(labels), "--out", str(tmp_path / "hull.txt"), "--shape", "hull"]) == 0
    assert [sorted(map(tuple, p)) for p in converted(tmp_path / "hull.txt")] == [
        sorted(map(tuple, BOX)), sorted(map(tuple, WORD)), sorted(map(tuple, BOX)), sorted(map(tuple, WORD))]


def test_check_data_names_the_training_lines_that_split(synth_root, tmp_path, capsys):
    """The 13th training line holds a pinched outline: check-data names that line and gives the fix; the
    synthetic labels (boxes) split nowhere."""
    root = tmp_path / "data"
    shutil.copytree(synth_root, root)
    with open(root / "train_gt.txt", "a", encoding="utf-8") as f:
        f.write(f"img_1.jpg\t{json.dumps([{'transcription': 'x', 'points': PINCHED}])}\n")
    args = ["check-data", "-c", RECIPE]
    for option in tiny_overrides(str(root), str(tmp_path / "run")):
        args += ["-o", option]
    assert cli.main(args) == 0  # a warning, not an error: the sample still trains
    out = capsys.readouterr().out
    assert "train_gt.txt:13: warning: img_1.jpg: 1 text region(s) split into several pieces" in out
    split_lines = [line for line in out.splitlines() if "split into several pieces when shrunk" in line]
    assert len(split_lines) == 2  # the line above, and the advice
    assert "train: warning: 1 of " in split_lines[1] and "--shape quad" in split_lines[1]


def ceiling_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("eval: label ceiling"))


def test_check_data_ceiling_scores_targets_drawn_from_the_labels(tmp_path, capsys):
    """One 128 x 96 photo labelled with the pinched outline and a 40 x 20 word, in train and eval. Drawn as
    labelled, the outline's target is two 15.9 x 10.9 kernels: unclipped (ratio 1.5: 4.85 px) each becomes a
    box of about 25.7 x 20.7, whose IoU with the 1040 px outline is about 500 / 1075 = 0.47, under ICDAR2015's
    0.5: the word is found, the outline is not, and its two boxes are false positives (R 1/2, P 1/3). Drawn as
    its rectangle (quad), the outline's target is one piece, whose box holds all of the outline (IoU about
    1040 / 1200): both found."""
    root = tmp_path / "data"
    regions = [{"transcription": "a", "points": PINCHED}, {"transcription": "b", "points": WORD}]
    labels = f"img_0.jpg\t{json.dumps(regions)}\n"
    for split, label_file in (("train", "train_gt.txt"), ("val", "test_gt.txt")):
        (root / split / "images").mkdir(parents=True)
        cv2.imwrite(str(root / split / "images" / "img_0.jpg"), np.full((96, 128, 3), 255, np.uint8))
        (root / label_file).write_text(labels, encoding="utf-8")
    args = ["check-data", "-c", RECIPE]
    for option in tiny_overrides(str(root), str(tmp_path / "run")):
        args += ["-o", option]

    assert cli.main([*args, "--ceiling"]) == 0
    assert ceiling_line(capsys.readouterr().out).startswith(
        "eval: label ceiling, targets drawn as outline: recall 0.5000, precision 0.3333, f-score 0.4000")
    assert cli.main([*args, "--ceiling", "quad"]) == 0
    assert ceiling_line(capsys.readouterr().out).startswith(
        "eval: label ceiling, targets drawn as quad: recall 1.0000, precision 1.0000, f-score 1.0000")
    assert cli.main(args) == 0
    assert "label ceiling" not in capsys.readouterr().out
