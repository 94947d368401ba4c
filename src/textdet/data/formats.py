"""Labels from annotation tools -> MindOCR/PaddleOCR label files, and any of them -> labelme JSON for review.
``FORMATS``: name -> reader of ``[(image name, [{"transcription", "points"}])]``; every "ignore" becomes ``###``.
Standard library only at import time: ``textdet --help`` lists these formats."""

from __future__ import annotations

import json
import logging
import math
import os
import posixpath
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from textdet.data.annotations import (
    Record,
    Summary,
    add_region,
    load_json,
    parse_points,
    plain_points,
    require_keys,
)
from textdet.data.xml_formats import read_alto, read_page
from textdet.errors import DataError

logger = logging.getLogger("textdet")


def read_labelme(src: str, summary: Summary, image_dir: str | None = None) -> list[Record]:
    """a folder of labelme JSON files (polygon/rectangle shapes, label = transcription)"""
    files = sorted(os.path.join(d, n) for d, _, names in os.walk(src) for n in names if n.endswith(".json"))
    if not files:
        raise DataError(f"{src}: expected a folder of labelme .json files, found none")
    records = []
    for path in files:
        doc = load_json(path)
        if not isinstance(doc, dict) or "shapes" not in doc:  # e.g. predict's predictions.json beside them
            summary.skip(path, "JSON file that is not a labelme file (no 'shapes')")
            continue
        require_keys(doc, ("imagePath",), path, "a labelme file")
        image = os.path.join(os.path.dirname(path), str(doc["imagePath"]).replace("\\", "/"))
        name = os.path.relpath(image, image_dir or src).replace(os.sep, "/")
        anns: list[dict] = []
        for i, shape in enumerate(doc["shapes"]):
            where = f"{path}: shapes[{i}]"
            require_keys(shape, ("label", "points"), where, "a labelme shape")
            kind, pts = shape.get("shape_type") or "polygon", parse_points(shape["points"], where)
            if kind == "rectangle" and len(pts) == 2:
                (x0, x1), (y0, y1) = sorted(p[0] for p in pts), sorted(p[1] for p in pts)
                pts = [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]
            elif kind != "polygon":
                summary.skip(where, f"labelme {kind} shape (only polygon and rectangle are text regions)")
                continue
            add_region(anns, pts, shape["label"], False, where, summary)
        records.append((name, anns))
    return records


def read_cocotext(src: str, summary: Summary, split: str | None = None) -> list[Record]:
    """COCO-Text v2 JSON (anns with mask, utf8_string, legibility); --split train|val when it holds both"""
    doc = load_json(src)
    require_keys(doc, ("anns", "imgs", "imgToAnns"), src, "a COCO-Text v2 file")
    sets = sorted({str(img.get("set")) for img in doc["imgs"].values()})
    if split is None and len(sets) > 1:
        raise DataError(f"{src}: holds {' and '.join(sets)} images; pick one with --split {'|'.join(sets)}")
    records = []
    for img_id, img in sorted(doc["imgs"].items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else kv[0]):
        if split is not None and img.get("set") != split:
            continue
        require_keys(img, ("file_name",), f"{src}: imgs[{img_id}]", "a COCO-Text image")
        anns: list[dict] = []
        for ann_id in doc["imgToAnns"].get(str(img_id), []):
            where = f"{src}: anns[{ann_id}]"
            ann = doc["anns"].get(str(ann_id))
            if ann is None:
                raise DataError(f"{src}: imgToAnns[{img_id}] names annotation {ann_id}, which is not in anns")
            add_region(anns, parse_points(ann.get("mask"), where), ann.get("utf8_string", ""),
                 ann.get("legibility") == "illegible", where, summary)
        records.append((img["file_name"], anns))
    return records


def _ls_image_name(data: dict, where: str) -> str:
    """A Label Studio task's image name: the ``?d=`` path, else the URL's last part without the upload prefix."""
    value = data.get("ocr") or data.get("image") or next((v for v in data.values() if isinstance(v, str)), None)
    if not isinstance(value, str):
        raise DataError(f"{where}: no image URL in 'data' (expected data.ocr or data.image)")
    url = urlparse(value)
    name = posixpath.basename(unquote(parse_qs(url.query).get("d", [url.path])[0]))
    return re.sub(r"^[0-9a-f]{8}-", "", name) if "/data/upload/" in url.path else name


def _ls_geometry(value: dict, result: dict, where: str) -> list[list[float]]:
    """Percent of the image -> pixels; a rectangle turns by ``rotation`` degrees clockwise about its top-left."""
    require_keys(result, ("original_width", "original_height"), where, "a Label Studio region")
    sx, sy = result["original_width"] / 100.0, result["original_height"] / 100.0
    if "points" in value:
        return [[x * sx, y * sy] for x, y in parse_points(value["points"], where)]
    require_keys(value, ("x", "y", "width", "height"), where, "a Label Studio rectangle")
    x, y, w, h = value["x"] * sx, value["y"] * sy, value["width"] * sx, value["height"] * sy
    c, s = math.cos(math.radians(value.get("rotation", 0))), math.sin(math.radians(value.get("rotation", 0)))
    return [[x + dx * c - dy * s, y + dx * s + dy * c] for dx, dy in ((0, 0), (w, 0), (w, h), (0, h))]


def read_labelstudio(src: str, summary: Summary) -> list[Record]:
    """Label Studio JSON export of an OCR project (polygon/rectangle regions, textarea transcriptions)"""
    tasks = load_json(src)
    if not isinstance(tasks, list):
        raise DataError(f"{src}: expected Label Studio's JSON export (a list of tasks); JSON-MIN/CSV lack regions")
    records = []
    for t, task in enumerate(tasks):
        where = f"{src}: task {task.get('id', t) if isinstance(task, dict) else t}"
        require_keys(task, ("data",), where, "a Label Studio task")
        done = [a for a in task.get("annotations") or [] if not a.get("was_cancelled")]
        if not done:
            summary.skip(where, "task without a completed annotation")
            continue
        shapes, texts = {}, {}
        for r, result in enumerate(done[0].get("result", [])):
            kind, value, rid = result.get("type", ""), result.get("value", {}), result.get("id", r)
            if kind == "textarea":
                texts[rid] = " ".join(map(str, value.get("text", [])))
            if kind in ("textarea", "labels", "rectangle", "rectanglelabels", "polygon", "polygonlabels"):
                if rid not in shapes and ("points" in value or "x" in value):
                    shapes[rid] = _ls_geometry(value, result, f"{where} result {rid}")
            else:
                summary.skip(f"{where} result {rid}", f"Label Studio {kind} result")
        anns: list[dict] = []
        for rid, pts in shapes.items():
            add_region(anns, pts, texts.get(rid, ""), False, f"{where} region {rid}", summary)
        records.append((_ls_image_name(task["data"], where), anns))
    return records


def read_mmocr(src: str, summary: Summary) -> list[Record]:
    """MMOCR 1.x TextDetDataset JSON (data_list of instances: polygon, ignore, text)"""
    doc = load_json(src)
    require_keys(doc, ("data_list",), src, "an MMOCR 1.x annotation file")
    records = []
    for i, item in enumerate(doc["data_list"]):
        require_keys(item, ("img_path",), f"{src}: data_list[{i}]", "an MMOCR data entry")
        anns: list[dict] = []
        for j, inst in enumerate(item.get("instances", [])):
            where = f"{src}: data_list[{i}].instances[{j}]"
            require_keys(inst, ("polygon",), where, "an MMOCR text instance")
            points = parse_points(inst["polygon"], where)
            add_region(anns, points, inst.get("text", ""), bool(inst.get("ignore")), where, summary)
        records.append((item["img_path"], anns))
    return records


def read_labels(src: str, summary: Summary) -> list[Record]:
    """MindOCR/PaddleOCR label file, or textdet predict's predictions.json (for --to labelme)"""
    if src.endswith(".json"):
        doc = load_json(src)
        if not isinstance(doc, dict) or not all(isinstance(v, list) for v in doc.values()):
            raise DataError(f"{src}: expected predict's predictions.json: {{image: [{{points, score}}, ...]}}")
        rows = [(name, items, f"{src}: {name!r}") for name, items in doc.items()]
    else:
        from textdet.data.labels import read_label_files

        records, problems = read_label_files(src)
        for p in problems:
            if p.repaired:
                logger.warning("%s; kept", p)
            else:
                summary.skip(str(p), "bad label line or annotation")
        rows = [(r.rel_path, r.annotations, f"{r.label_file} line {r.line_no}") for r in records]
    out = []
    for name, items, where in rows:
        anns: list[dict] = []
        for k, item in enumerate(items):
            require_keys(item, ("points",), f"{where} entry {k}", "a polygon")
            pts = parse_points(item["points"], f"{where} entry {k}")
            added = add_region(anns, pts, item.get("transcription"), False, f"{where} entry {k}", summary)
            if added and "score" in item:
                anns[-1]["score"] = item["score"]
        out.append((name, anns))
    return out


FORMATS: dict[str, Callable[..., list[Record]]] = {
    "labelme": read_labelme, "cocotext": read_cocotext, "labelstudio": read_labelstudio, "mmocr": read_mmocr,
    "alto": read_alto, "page": read_page, "labels": read_labels}


def write_labelme(records: list[Record], out_dir: str, image_dir: str) -> None:
    """``out_dir/<name without extension>.json`` per image: one polygon shape per annotation (label = transcription,
    description = score if any); imagePath relative to that file and the image's size, as labelme wants."""
    from PIL import Image

    for name, anns in records:
        image = os.path.join(image_dir, name)
        try:
            with Image.open(image) as im:  # labelme shows (and checks the size of) the EXIF-rotated image
                width, height = im.size[:: -1 if im.getexif().get(0x0112) in (5, 6, 7, 8) else 1]
        except OSError:
            raise DataError(f"image {image} (of {name!r}) cannot be read; --image-dir names the folder the image "
                            f"names are relative to") from None
        rel = os.path.normpath(name)  # predictions.json names may be absolute: keep the output inside out_dir
        rel = os.path.basename(rel) if os.path.isabs(rel) or rel.startswith("..") else rel
        path = os.path.join(out_dir, os.path.splitext(rel)[0] + ".json")
        shapes = [{"label": a["transcription"], "points": plain_points(a["points"]), "group_id": None, "flags": {},
                   "description": f"score {a['score']:.3f}" if "score" in a else "", "shape_type": "polygon"}
                  for a in anns]
        doc = {"version": "5.5.0", "flags": {}, "shapes": shapes, "imageData": None, "imageHeight": height,
               "imagePath": os.path.relpath(image, os.path.dirname(path)).replace(os.sep, "/"), "imageWidth": width}
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=2)


def write_label_file(records: list[Record], out: str) -> None:
    from textdet.data.labels import format_label_line

    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(format_label_line(name, anns) + "\n" for name, anns in records)


def read_records(fmt: str, src: str, summary: Summary, image_dir: str | None = None,
                 **options: Any) -> list[Record]:
    """Read ``src`` in format ``fmt`` (a FORMATS key), counting what is kept and skipped in ``summary``."""
    records = FORMATS[fmt](src, summary, **({"image_dir": image_dir} if fmt == "labelme" else {}), **options)
    summary.images = len(records)
    return records


def write_records(records: list[Record], out: str, to: str = "label", image_dir: str | None = None) -> None:
    """A label file or, ``to="labelme"``, one labelme JSON per image (images in ``image_dir``)."""
    write_labelme(records, out, image_dir or ".") if to == "labelme" else write_label_file(records, out)
