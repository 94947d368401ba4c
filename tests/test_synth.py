"""The synthetic ICDAR2015-layout data generator."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest

from textdet.data.labels import read_label_files
from textdet.data.synth import generate_dataset, generate_image
from textdet.geometry import polygon_area

SIZE = (256, 192)  # (W, H)


def _files(root: str) -> dict[str, bytes]:
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = f.read()
    return out


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> tuple[str, dict]:
    root = str(tmp_path_factory.mktemp("synth") / "data")
    return root, generate_dataset(root, n_train=6, n_val=3, seed=7, size=SIZE, progress=False)


def test_layout_summary_and_label_round_trip(dataset) -> None:
    root, summary = dataset
    assert summary["train"]["images"] == 6 and summary["val"]["images"] == 3
    for split, label, n in (("train", "train_gt.txt", 6), ("val", "test_gt.txt", 3)):
        records, problems = read_label_files(label, dataset_root=root)
        assert problems == []
        assert [r.rel_path for r in records] == [f"img_{i}.jpg" for i in range(1, n + 1)]
        assert sum(len(r.annotations) for r in records) == summary[split]["words"]
        for r in records:
            img = cv2.imread(os.path.join(root, split, "images", r.rel_path))
            assert img.shape == (SIZE[1], SIZE[0], 3)
    assert summary["train"]["label_file"] == os.path.join(root, "train_gt.txt")
    assert summary["val"]["image_dir"] == os.path.join(root, "val", "images")


def test_same_seed_same_bytes_other_seed_differs(dataset, tmp_path) -> None:
    root, _ = dataset
    generate_dataset(str(tmp_path / "again"), n_train=6, n_val=3, seed=7, size=SIZE, progress=False)
    assert _files(str(tmp_path / "again")) == _files(root)
    generate_dataset(str(tmp_path / "other"), n_train=6, n_val=3, seed=8, size=SIZE, progress=False)
    other = _files(str(tmp_path / "other"))
    assert other.keys() == _files(root).keys()
    assert other["train_gt.txt"] != _files(root)["train_gt.txt"]


def test_val_split_does_not_depend_on_n_train(dataset, tmp_path) -> None:
    root, _ = dataset
    generate_dataset(str(tmp_path / "d"), n_train=2, n_val=3, seed=7, size=SIZE, progress=False)
    with open(os.path.join(root, "test_gt.txt"), "rb") as a, open(tmp_path / "d" / "test_gt.txt", "rb") as b:
        assert a.read() == b.read()


def _images(n: int, size: tuple[int, int] = (320, 240), seed: int = 3):
    rng = np.random.default_rng(seed)
    return [generate_image(rng, size) for _ in range(n)]


def test_size_is_honoured_and_polygons_are_valid_quads_inside_the_image() -> None:
    for size in ((320, 240), (200, 300)):
        for img, anns in _images(5, size):
            assert img.shape == (size[1], size[0], 3) and img.dtype == np.uint8
            for a in anns:
                p = np.asarray(a["points"], np.float64)
                assert p.shape == (4, 2)
                assert p.min() >= 0 and p[:, 0].max() <= size[0] - 1 and p[:, 1].max() <= size[1] - 1
                assert polygon_area(p) > 0
                # Text order TL, TR, BR, BL is clockwise on screen: positive shoelace sum with y down.
                x, y = p[:, 0], p[:, 1]
                assert np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)) > 0


def test_words_do_not_overlap() -> None:
    for img, anns in _images(10):
        counts = np.zeros(img.shape[:2], np.uint8)
        for a in anns:
            m = np.zeros(img.shape[:2], np.uint8)
            cv2.fillPoly(m, [np.round(a["points"]).astype(np.int32)], 1)
            counts += m
        assert (counts > 1).sum() <= 0.01 * max(1, (counts > 0).sum())


def test_text_is_really_inside_the_labelled_polygons() -> None:
    """Ink makes a word's polygon much busier than the background ring just around it.

    For each non-ignored word: grey-level std inside its quad vs. std in a ring (half the quad's
    short side wide) around it, other words excluded. Clutter can make a ring busy, so the
    check is statistical.
    """
    inside, ring = [], []
    for img, anns in _images(30):
        gray = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
        words = np.zeros(gray.shape, np.uint8)
        for a in anns:
            cv2.fillPoly(words, [np.round(a["points"]).astype(np.int32)], 1)
        for a in anns:
            if a["transcription"] == "###":
                continue
            p = np.asarray(a["points"], np.float32)
            m = np.zeros(gray.shape, np.uint8)
            cv2.fillPoly(m, [np.round(p).astype(np.int32)], 1)
            k = max(3, int(0.5 * min(np.linalg.norm(p[1] - p[0]), np.linalg.norm(p[3] - p[0]))))
            around = cv2.dilate(m, np.ones((k, k), np.uint8)) & (1 - words)
            inside.append(gray[m > 0].std())
            ring.append(gray[around > 0].std() if around.sum() > 10 else 0.0)
    inside, ring = np.array(inside), np.array(ring)
    assert len(inside) > 100
    assert (inside > 12).mean() > 0.95
    assert (inside > ring).mean() > 0.85
    assert np.median(inside) > 2 * np.median(ring)


def test_some_words_are_dont_care_and_most_are_not() -> None:
    texts = [a["transcription"] for _, anns in _images(30) for a in anns]
    ignored = sum(t == "###" for t in texts)
    assert 0 < ignored < 0.4 * len(texts)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="size"):
        generate_image(np.random.default_rng(0), (16, 16))
    with pytest.raises(ValueError, match="n_train"):
        generate_dataset("unused", n_train=-1)


def test_heldout_split_is_rendered_differently(dataset, tmp_path) -> None:
    """Held-out: own size and generator (train/val bytes unchanged by adding it), Hershey fonts."""
    root, _ = dataset
    out = str(tmp_path / "h")
    s = generate_dataset(out, n_train=6, n_val=3, seed=7, size=SIZE, progress=False, n_heldout=2,
                         heldout_size=(160, 120))
    files = _files(out)
    assert {k: v for k, v in files.items() if not k.startswith("heldout")} == _files(root)
    assert s["heldout"]["images"] == 2 and s["heldout"]["label_file"] == os.path.join(out, "heldout_gt.txt")
    records, problems = read_label_files("heldout_gt.txt", dataset_root=out)
    assert problems == [] and sum(len(r.annotations) for r in records) == s["heldout"]["words"] > 0
    assert cv2.imread(os.path.join(out, "heldout", "images", "img_1.jpg")).shape == (120, 160, 3)
    # a Hershey face renders a word with other ink than Pillow's font at the same size
    from textdet.data.synth import _render

    pil, _, pil_boxes = _render(["Street"], 24, 0)
    her, _, her_boxes = _render(["Street"], 24, 0, cv2.FONT_HERSHEY_COMPLEX)
    assert len(pil_boxes) == len(her_boxes) == 1 and pil.shape != her.shape
