"""Lay out real handwritten pages (BAnQ's "Copiste d'un jour") as MindOCR's detection data: the handwriting
part of the "other real photos" check of fine-tuning (docs/RESULTS.md, "Other real photos: handwriting").

Source: a clone of https://github.com/banq-dcn/Copiste-d-un-jour (CC BY 4.0, Bibliothèque et Archives
nationales du Québec): 2024 scans (300 dpi, 2550 x 3300) of volunteers copying a short Wikipedia text by
hand, ``jpg/NAME.jpg`` with ``alto/NAME.xml``, one polygon per handwritten line (eScriptorium's ALTO, read
with ``textdet convert alto``'s reader). Only the ``wikitexte_*`` pages are taken: the ``imp_*`` ones carry a
printed consent notice that no line labels, so a detector that finds it would be charged false positives.

    git clone https://github.com/banq-dcn/Copiste-d-un-jour
    python benchmarks/layout_copiste.py --src Copiste-d-un-jour --out HW

Writes OUT/train/images + OUT/train_gt.txt and OUT/val/images + OUT/test_gt.txt: ``--num`` pages evenly
spaced over the sorted names, alternately to train and to val, shrunk (INTER_AREA) to ``--max-side`` with
their polygons. PP-OCR's resize ("min" side 736) does not shrink larger images, so full-size scans would
cost a CPU about ten times an ICDAR2015 photo per step.

The polygons are the outlines as eScriptorium drew them, which fall apart under DB's shrink: to train on
them, relabel the training lines as rectangles (``textdet convert labels OUT/train_gt.txt --shape quad``,
docs/RESULTS.md, "Other real photos: handwriting"); score against the outlines.
"""

from __future__ import annotations

import os

import cv2
import numpy as np
from layout_sroie import evenly_spaced, lay_out, layout_arguments, shrink

from textdet.data.formats import Record, Summary, plain_points, read_alto


def read_pages(src: str) -> dict[str, list[dict]]:
    """Image name -> its lines, for the ``wikitexte_*`` pages whose image is in ``src/jpg``."""
    alto_dir = os.path.join(src, "alto")
    if not os.path.isdir(alto_dir):
        raise SystemExit(f"{alto_dir}: not found; is --src a clone of banq-dcn/Copiste-d-un-jour?")
    pages = {name: lines for name, lines in read_alto(alto_dir, Summary())
             if name.startswith("wikitexte_") and os.path.isfile(os.path.join(src, "jpg", name))}
    if not pages:
        raise SystemExit(f"{alto_dir}: no wikitexte_* page with its image in {src}/jpg")
    return pages


def page_record(src: str, name: str, lines: list[dict], out_dir: str, max_side: int) -> Record:
    """Write the shrunk page into ``out_dir``; return its name and its lines at the new scale."""
    image = cv2.imread(os.path.join(src, "jpg", name), cv2.IMREAD_COLOR)
    if image is None:
        raise SystemExit(f"{src}/jpg/{name}: not a readable image")
    image, scale = shrink(image, max_side)
    h, w = image.shape[:2]
    labels = []
    for line in lines:
        points = np.clip(np.array(line["points"], float) * scale, 0, [w - 1, h - 1])
        labels.append({"transcription": line["transcription"], "points": plain_points(points)})
    cv2.imwrite(os.path.join(out_dir, name), image, [cv2.IMWRITE_JPEG_QUALITY, 95])
    return name, labels


def main() -> None:
    args = layout_arguments(__doc__, "banq-dcn/Copiste-d-un-jour", "HW", "pages", max_side=1100)
    pages = read_pages(args.src)
    lay_out(evenly_spaced(sorted(pages), args.num), args.out, "pages",
            lambda name, out_dir: page_record(args.src, name, pages[name], out_dir, args.max_side))


if __name__ == "__main__":
    main()
