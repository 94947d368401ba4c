"""Public data sets laid out as MindOCR's detection data: ICDAR 2019 SROIE's scanned receipts
(``textdet convert sroie``) and BAnQ's "Copiste d'un jour" handwritten pages (``textdet convert
copiste``), the "other real photos" of docs/RESULTS.md.

A layout is ``OUT/train/images`` + ``OUT/train_gt.txt`` and ``OUT/val/images`` + ``OUT/test_gt.txt``:
``num`` images evenly spaced over the sorted names, alternately to train and to val, each shrunk
(INTER_AREA) to at most ``max_side`` pixels on its long side, with its polygons. PP-OCR's resize ("min"
side 736) does not shrink larger images, so a full-size 300-dpi scan would cost a CPU about ten times an
ICDAR2015 photo per training step.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import cv2
import numpy as np

from textdet.data.annotations import Record, Summary, plain_points
from textdet.data.formats import write_label_file
from textdet.data.xml_formats import read_alto
from textdet.errors import DataError
from textdet.geometry import order_quads

SPLITS = {"train": "train_gt.txt", "val": "test_gt.txt"}  # split folder -> its label file (MindOCR's names)
SROIE_REPOSITORY = "zzzDavid/ICDAR-2019-SROIE"
COPISTE_REPOSITORY = "banq-dcn/Copiste-d-un-jour"
JPEG_QUALITY = 95


def evenly_spaced(names: list[str], num: int) -> list[str]:
    """``num`` of the sorted ``names``, evenly spaced (all of them when there are fewer)."""
    count = min(num, len(names))
    return sorted({names[min(len(names) - 1, round(i * len(names) / count))] for i in range(count)})


def shrink(image: np.ndarray, max_side: int) -> tuple[np.ndarray, float]:
    """The image (H, W, 3) uint8 with its long side at most ``max_side`` (INTER_AREA), and the scale applied
    (1.0 when it was small enough)."""
    h, w = image.shape[:2]
    scale = min(1.0, max_side / max(h, w))
    if scale < 1.0:
        image = cv2.resize(image, (round(w * scale), round(h * scale)), interpolation=cv2.INTER_AREA)
    return image, scale


def read_image(path: str) -> np.ndarray:
    """The image at ``path`` as (H, W, 3) uint8 BGR; DataError when it cannot be read."""
    image = cv2.imread(path, cv2.IMREAD_COLOR)
    if image is None:
        raise DataError(f"{path}: not a readable image")
    return image


def write_image(path: str, image: np.ndarray) -> None:
    if not cv2.imwrite(path, image, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY]):
        raise DataError(f"{path}: could not write the image")


def lay_out(names: list[str], out: str,
            write_record: Callable[[str, str], Record]) -> dict[str, tuple[int, int]]:
    """``names`` alternately to OUT/train and OUT/val: ``write_record(name, image folder)`` writes the
    image and returns its labels; then OUT/train_gt.txt and OUT/test_gt.txt. Returns split -> (images,
    boxes)."""
    records: dict[str, list[Record]] = {split: [] for split in SPLITS}
    for split in SPLITS:
        os.makedirs(os.path.join(out, split, "images"), exist_ok=True)
    for position, name in enumerate(names):
        split = "train" if position % 2 == 0 else "val"
        records[split].append(write_record(name, os.path.join(out, split, "images")))
    counts = {}
    for split, label_file in SPLITS.items():
        write_label_file(records[split], os.path.join(out, label_file))
        counts[split] = (len(records[split]), sum(len(labels) for _, labels in records[split]))
    return counts


# ---- SROIE: data/img/NNN.jpg + data/box/NNN.csv, one printed text line a row --------------------------

def read_sroie_boxes(path: str) -> list[tuple[str, np.ndarray]]:
    """(transcript, (4, 2) float points) per row ``x1,y1,...,x4,y4,transcript`` of an SROIE box file; an empty
    transcript (a region without text) becomes ``###``."""
    boxes = []
    with open(path, encoding="utf-8-sig") as f:
        for line_no, line in enumerate(f, 1):
            row = line.strip()
            if not row:
                continue
            fields = row.split(",", 8)
            try:
                points = np.array([float(v) for v in fields[:8]]).reshape(4, 2)
            except ValueError:
                message = f"{path}:{line_no}: expected x1,y1,...,x4,y4,transcript, found {row!r}"
                raise DataError(message) from None
            text = fields[8].strip() if len(fields) > 8 else ""
            boxes.append((text or "###", points))
    return boxes


def sroie_box_path(src: str, name: str) -> str:
    return os.path.join(src, "data", "box", os.path.splitext(name)[0] + ".csv")


def sroie_names(src: str) -> list[str]:
    """The sorted receipt names of ``src/data/img`` that have a box file in ``src/data/box``."""
    image_dir = os.path.join(src, "data", "img")
    if not os.path.isdir(image_dir):
        raise DataError(f"{image_dir}: not found; give a clone of {SROIE_REPOSITORY}")
    names = sorted(n for n in os.listdir(image_dir)
                   if n.lower().endswith(".jpg") and os.path.isfile(sroie_box_path(src, n)))
    if not names:
        raise DataError(f"{image_dir}: no receipt with a box file in data/box; give a clone of "
                        f"{SROIE_REPOSITORY}")
    return names


def sroie_record(src: str, name: str, out_dir: str, max_side: int) -> Record:
    """Write the (shrunk) receipt into ``out_dir``; return its name and its boxes at the new scale, corners
    TL, TR, BR, BL in integer pixels."""
    image, scale = shrink(read_image(os.path.join(src, "data", "img", name)), max_side)
    h, w = image.shape[:2]
    labels = []
    for text, points in read_sroie_boxes(sroie_box_path(src, name)):
        points = np.rint(order_quads(points[None] * scale)[0])
        points = np.clip(points, 0, [w - 1, h - 1])
        labels.append({"transcription": text, "points": points.astype(int).tolist()})
    write_image(os.path.join(out_dir, name), image)
    return name, labels


def lay_out_sroie(src: str, out: str, num: int, max_side: int) -> dict[str, tuple[int, int]]:
    """``num`` SROIE receipts of a clone of zzzDavid/ICDAR-2019-SROIE (MIT; the images and labels are the
    ICDAR 2019 SROIE challenge's, for research use) into OUT, split -> (images, boxes). Handwritten notes
    and stamps carry no box there, so a detector that finds them is charged false positives."""
    names = evenly_spaced(sroie_names(src), num)
    return lay_out(names, out, lambda name, out_dir: sroie_record(src, name, out_dir, max_side))


# ---- Copiste d'un jour: jpg/NAME.jpg + alto/NAME.xml, one polygon per handwritten line ----------------

def copiste_pages(src: str) -> dict[str, list[dict]]:
    """Image name -> its lines (eScriptorium's ALTO, read by ``textdet convert alto``'s reader), for the
    ``wikitexte_*`` pages whose image is in ``src/jpg``. The ``imp_*`` pages carry a printed consent notice
    that no line labels, so a detector that finds it would be charged false positives: they are left out."""
    alto_dir = os.path.join(src, "alto")
    if not os.path.isdir(alto_dir):
        raise DataError(f"{alto_dir}: not found; give a clone of {COPISTE_REPOSITORY}")
    pages = {name: lines for name, lines in read_alto(alto_dir, Summary())
             if name.startswith("wikitexte_") and os.path.isfile(os.path.join(src, "jpg", name))}
    if not pages:
        raise DataError(f"{alto_dir}: no wikitexte_* page with its image in {os.path.join(src, 'jpg')}")
    return pages


def copiste_record(src: str, name: str, lines: list[dict], out_dir: str, max_side: int) -> Record:
    """Write the shrunk page into ``out_dir``; return its name and its line outlines at the new scale."""
    image, scale = shrink(read_image(os.path.join(src, "jpg", name)), max_side)
    h, w = image.shape[:2]
    labels = []
    for line in lines:
        points = np.clip(np.array(line["points"], float) * scale, 0, [w - 1, h - 1])
        labels.append({"transcription": line["transcription"], "points": plain_points(points)})
    write_image(os.path.join(out_dir, name), image)
    return name, labels


def lay_out_copiste(src: str, out: str, num: int, max_side: int) -> dict[str, tuple[int, int]]:
    """``num`` handwritten pages of a clone of banq-dcn/Copiste-d-un-jour (CC BY 4.0, Bibliothèque et
    Archives nationales du Québec) into OUT, split -> (images, boxes). The outlines are kept as eScriptorium
    drew them, which fall apart under DB's shrink: relabel the training lines (``textdet convert labels ...
    --shape quad``) before training on them; score against the outlines."""
    pages = copiste_pages(src)
    names = evenly_spaced(sorted(pages), num)
    return lay_out(names, out,
                   lambda name, out_dir: copiste_record(src, name, pages[name], out_dir, max_side))
