"""Lay out real scanned receipts (ICDAR 2019 SROIE) as MindOCR's detection data: the "other real photos" check
of fine-tuning (docs/RESULTS.md, "Other real photos: receipts").

Source: a clone of https://github.com/zzzDavid/ICDAR-2019-SROIE (MIT; the images and labels are the ICDAR 2019
SROIE challenge's, https://rrc.cvc.uab.es/?ch=13, for research use): ``data/img/NNN.jpg`` and
``data/box/NNN.csv``, one printed text line a row, ``x1,y1,...,x4,y4,transcript``. Handwritten notes and
stamps carry no box there, so a detector that finds them is charged false positives.

    git clone https://github.com/zzzDavid/ICDAR-2019-SROIE
    python benchmarks/layout_sroie.py --src ICDAR-2019-SROIE --out DOC

Writes OUT/train/images + OUT/train_gt.txt and OUT/val/images + OUT/test_gt.txt: ``--num`` receipts
evenly spaced over the sorted names, alternately to train and to val; a receipt whose long side exceeds
``--max-side`` is shrunk (INTER_AREA) with its boxes.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import cv2
import numpy as np

from textdet.data.formats import Record, write_label_file
from textdet.geometry import order_quads


def read_boxes(path: str) -> list[tuple[str, np.ndarray]]:
    """(transcript, (4, 2) points) per row of an SROIE box file; an empty transcript becomes ``###``."""
    with open(path, encoding="utf-8-sig") as f:
        rows = [line.strip() for line in f if line.strip()]
    boxes = []
    for row in rows:
        fields = row.split(",", 8)
        points = np.array([float(v) for v in fields[:8]]).reshape(4, 2)
        text = fields[8].strip() if len(fields) > 8 else ""
        boxes.append((text or "###", points))
    return boxes


def pick_names(src: str, num: int) -> list[str]:
    """``num`` receipt names evenly spaced over the sorted ones that have a box file."""
    names = sorted(n for n in os.listdir(os.path.join(src, "data", "img"))
                   if n.lower().endswith(".jpg") and os.path.isfile(box_path(src, n)))
    if not names:
        raise SystemExit(f"{src}/data/img: no receipts with a box file in data/box; is --src a clone of "
                         "zzzDavid/ICDAR-2019-SROIE?")
    return evenly_spaced(names, num)


def evenly_spaced(names: list[str], num: int) -> list[str]:
    """``num`` of the sorted ``names``, evenly spaced (all of them when there are fewer)."""
    count = min(num, len(names))
    return sorted({names[min(len(names) - 1, round(i * len(names) / count))] for i in range(count)})


def shrink(image: np.ndarray, max_side: int) -> tuple[np.ndarray, float]:
    """The image with its long side at most ``max_side`` (INTER_AREA), and the scale applied."""
    h, w = image.shape[:2]
    scale = min(1.0, max_side / max(h, w))
    if scale < 1.0:
        image = cv2.resize(image, (round(w * scale), round(h * scale)), interpolation=cv2.INTER_AREA)
    return image, scale


def box_path(src: str, name: str) -> str:
    return os.path.join(src, "data", "box", os.path.splitext(name)[0] + ".csv")


def receipt_record(src: str, name: str, out_dir: str, max_side: int) -> Record:
    """Write the (shrunk) receipt into ``out_dir``; return its name and labels, corners TL, TR, BR, BL."""
    image = cv2.imread(os.path.join(src, "data", "img", name), cv2.IMREAD_COLOR)
    if image is None:
        raise SystemExit(f"{src}/data/img/{name}: not a readable image")
    image, scale = shrink(image, max_side)
    h, w = image.shape[:2]
    labels = []
    for text, points in read_boxes(box_path(src, name)):
        points = np.rint(order_quads(points[None] * scale)[0])
        points = np.clip(points, 0, [w - 1, h - 1])
        labels.append({"transcription": text, "points": points.astype(int).tolist()})
    cv2.imwrite(os.path.join(out_dir, name), image, [cv2.IMWRITE_JPEG_QUALITY, 95])
    return name, labels


def lay_out(names: list[str], out: str, what: str, write_record: Callable[[str, str], Record]) -> None:
    """``names`` alternately to OUT/train and OUT/val: ``write_record(name, image folder)`` writes the image
    and returns its labels; then OUT/train_gt.txt and OUT/test_gt.txt."""
    splits = {"train": "train_gt.txt", "val": "test_gt.txt"}
    records: dict[str, list[Record]] = {split: [] for split in splits}
    for split in splits:
        os.makedirs(os.path.join(out, split, "images"), exist_ok=True)
    for position, name in enumerate(names):
        split = "train" if position % 2 == 0 else "val"
        records[split].append(write_record(name, os.path.join(out, split, "images")))
    for split, label_file in splits.items():
        write_label_file(records[split], os.path.join(out, label_file))
        boxes = sum(len(labels) for _, labels in records[split])
        print(f"{split}: {len(records[split])} {what}, {boxes} boxes -> {out}/{label_file}")


def layout_arguments(description: str, repository: str, example_out: str, what: str,
                     max_side: int) -> argparse.Namespace:
    """--src (a clone of ``repository``), --out, --num (60 + 60 by default) and --max-side."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=description, formatter_class=formatter)
    parser.add_argument("--src", required=True, help=f"clone of {repository}")
    parser.add_argument("--out", required=True, help=f"output folder, e.g. {example_out}")
    parser.add_argument("--num", type=int, default=120, help=f"{what} to take (default 120: 60 + 60)")
    parser.add_argument("--max-side", type=int, default=max_side,
                        help=f"longest side in pixels (default {max_side})")
    return parser.parse_args()


def main() -> None:
    args = layout_arguments(__doc__, "zzzDavid/ICDAR-2019-SROIE", "DOC", "receipts", max_side=1600)
    lay_out(pick_names(args.src, args.num), args.out, "receipts",
            lambda name, out_dir: receipt_record(args.src, name, out_dir, args.max_side))


if __name__ == "__main__":
    main()
