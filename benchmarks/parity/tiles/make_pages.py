"""Big pages made from real photos, for checking tiled reading: every ROWS x COLS photos of a split laid side
by side on one page, their labels moved with them, in MindOCR's layout (DIR/val/images + DIR/test_gt.txt).

A page of 3 x 3 ICDAR2015 photos is 2160 x 3840 pixels: the evaluation's resize (shorter side 864) shrinks it
2.5 times, where the photos were read at their own scale one by one. Scoring the pages with `textdet eval
--tile` against the photos scored one by one shows what tiles give back.

Run (from the repository root; IC15 laid out as on the Results page, "ICDAR2015 halves"):
``python benchmarks/parity/tiles/make_pages.py IC15 --out IC15PAGES --grid 3x3``, then
``textdet eval -c DIR/NAME.yaml -o eval.dataset.dataset_root=IC15PAGES --tile 864x864`` (and without
``--tile``, and ``-o eval.dataset.dataset_root=IC15`` for the photos one by one).
"""

from __future__ import annotations

import argparse
import json
import os

import cv2
import numpy as np


def read_labels(path: str) -> list[tuple[str, list[dict]]]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                name, labels = line.rstrip("\n").split("\t", 1)
                rows.append((name, json.loads(labels)))
    return rows


def make_pages(root: str, out: str, rows: int, cols: int, data_dir: str = "val/images",
               label_file: str = "test_gt.txt") -> int:
    """Lay the split's photos out ``rows`` x ``cols`` to a page (in label-file order; a last page that is not
    full holds what is left, the rest black); returns the number of pages written."""
    photos = read_labels(os.path.join(root, label_file))
    os.makedirs(os.path.join(out, "val", "images"), exist_ok=True)
    lines = []
    per_page = rows * cols
    for page_index in range(0, len(photos), per_page):
        group = photos[page_index : page_index + per_page]
        images = [cv2.imread(os.path.join(root, data_dir, name)) for name, _ in group]
        cell_h = max(image.shape[0] for image in images)
        cell_w = max(image.shape[1] for image in images)
        page = np.zeros((rows * cell_h, cols * cell_w, 3), np.uint8)
        labels = []
        for slot, ((_, regions), image) in enumerate(zip(group, images, strict=True)):
            top, left = (slot // cols) * cell_h, (slot % cols) * cell_w
            page[top : top + image.shape[0], left : left + image.shape[1]] = image
            for annotation in regions:
                points = [[x + left, y + top] for x, y in annotation["points"]]
                labels.append({"transcription": annotation["transcription"], "points": points})
        name = f"page_{page_index // per_page + 1}.png"  # lossless: the pixels are the photos' own
        cv2.imwrite(os.path.join(out, "val", "images", name), page)
        lines.append(f"{name}\t{json.dumps(labels, ensure_ascii=False)}\n")
    with open(os.path.join(out, "test_gt.txt"), "w", encoding="utf-8") as f:
        f.writelines(lines)
    return len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", help="a data set in MindOCR's layout (val/images + test_gt.txt)")
    parser.add_argument("--out", required=True, help="folder to write the pages to")
    parser.add_argument("--grid", default="3x3", help="photos per page, ROWSxCOLS")
    args = parser.parse_args()
    rows, cols = (int(v) for v in args.grid.lower().split("x"))
    count = make_pages(args.root, args.out, rows, cols)
    print(f"wrote {count} pages of {rows} x {cols} photos to {args.out}/val/images and {args.out}/test_gt.txt")


if __name__ == "__main__":
    main()
