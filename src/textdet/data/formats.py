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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse
from xml.etree import ElementTree

from textdet.errors import DataError

logger = logging.getLogger("textdet")
IGNORE = "###"  # what every reader writes for a region to ignore
IGNORE_TEXTS = ("###", "*")  # what training and scoring ignore (MindOCR's DetLabelEncode: both)
SHAPES = ("outline", "hull", "quad")  # how convert writes each region (label_shapes.reshape_points)
Record = tuple[str, list[dict]]


def text_region_count(annotations: list[dict]) -> int:
    """How many of one image's regions are text to find (not marked ``###`` or ``*``)."""
    return sum(a.get("transcription") not in IGNORE_TEXTS for a in annotations)


@dataclass
class Summary:
    """What a conversion kept and skipped (printed by ``textdet convert``)."""

    images: int = 0
    regions: int = 0
    ignored: int = 0  # regions marked ### or * (not text to find)
    split: int = 0  # text regions whose DB shrink falls apart into several pieces (label_shapes)
    skipped: Counter = field(default_factory=Counter)

    def skip(self, where: str, what: str) -> None:
        logger.warning("%s: %s; skipped", where, what)
        self.skipped[what] += 1

    def __str__(self) -> str:
        skipped = "; skipped " + ", ".join(f"{n} x {w}" for w, n in self.skipped.items()) if self.skipped else ""
        ignored = f"{self.ignored} ignored: ### or *"
        return f"{self.images} images, {self.regions} text regions ({ignored}){skipped}"


def _load_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8-sig") as f:
            return json.load(f)
    except OSError as e:
        raise DataError(f"{path}: cannot read: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: not valid JSON ({e})") from None


def _need(obj: Any, keys: tuple[str, ...], where: str, what: str) -> None:
    missing = [k for k in keys if not isinstance(obj, dict) or k not in obj]
    if missing:
        raise DataError(f"{where}: not {what}: missing {', '.join(map(repr, missing))}")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _points(value: Any, where: str) -> list[list[float]]:
    """``[[x, y], ...]`` or flat ``[x1, y1, x2, y2, ...]`` -> ``[[x, y], ...]`` floats; DataError otherwise."""
    flat = isinstance(value, list) and all(map(_number, value))
    pairs = [value[i : i + 2] for i in range(0, len(value), 2)] if flat else value
    if not isinstance(pairs, list) or not all(isinstance(p, (list, tuple)) and len(p) == 2 and all(map(_number, p))
                                              for p in pairs):
        raise DataError(f"{where}: expected points [[x, y], ...] or [x1, y1, ...], got {json.dumps(value)[:80]}")
    return [[float(x), float(y)] for x, y in pairs]


def plain_points(points: Any) -> list[list[int | float]]:
    """Points as JSON numbers: integers stay integers, others are rounded to 0.01 px."""
    return [[_json_number(float(c)) for c in p] for p in points]


def _json_number(value: float) -> int | float:
    """``value`` rounded to 0.01, as an int when that is whole (181.999 -> 182, not 182.0)."""
    rounded = round(value, 2)
    return int(rounded) if rounded.is_integer() else rounded


def _add(anns: list[dict], points: list, text: Any, ignore: bool, where: str, summary: Summary) -> bool:
    """Append a text region (True), or count a polygon that cannot be one as skipped (False)."""
    from textdet.geometry import polygon_area

    if len(points) < 3 or polygon_area(points) <= 0:
        summary.skip(where, "polygon with fewer than 3 points or zero area")
        return False
    text = IGNORE if ignore or text == IGNORE else ("" if text is None else str(text))
    anns.append({"transcription": text, "points": plain_points(points)})
    summary.regions += 1
    summary.ignored += text in IGNORE_TEXTS  # "*" too: training ignores both
    return True


def read_labelme(src: str, summary: Summary, image_dir: str | None = None) -> list[Record]:
    """a folder of labelme JSON files (polygon/rectangle shapes, label = transcription)"""
    files = sorted(os.path.join(d, n) for d, _, names in os.walk(src) for n in names if n.endswith(".json"))
    if not files:
        raise DataError(f"{src}: expected a folder of labelme .json files, found none")
    records = []
    for path in files:
        doc = _load_json(path)
        if not isinstance(doc, dict) or "shapes" not in doc:  # e.g. predict's predictions.json beside them
            summary.skip(path, "JSON file that is not a labelme file (no 'shapes')")
            continue
        _need(doc, ("imagePath",), path, "a labelme file")
        image = os.path.join(os.path.dirname(path), str(doc["imagePath"]).replace("\\", "/"))
        name = os.path.relpath(image, image_dir or src).replace(os.sep, "/")
        anns: list[dict] = []
        for i, shape in enumerate(doc["shapes"]):
            where = f"{path}: shapes[{i}]"
            _need(shape, ("label", "points"), where, "a labelme shape")
            kind, pts = shape.get("shape_type") or "polygon", _points(shape["points"], where)
            if kind == "rectangle" and len(pts) == 2:
                (x0, x1), (y0, y1) = sorted(p[0] for p in pts), sorted(p[1] for p in pts)
                pts = [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]
            elif kind != "polygon":
                summary.skip(where, f"labelme {kind} shape (only polygon and rectangle are text regions)")
                continue
            _add(anns, pts, shape["label"], False, where, summary)
        records.append((name, anns))
    return records


def read_cocotext(src: str, summary: Summary, split: str | None = None) -> list[Record]:
    """COCO-Text v2 JSON (anns with mask, utf8_string, legibility); --split train|val when it holds both"""
    doc = _load_json(src)
    _need(doc, ("anns", "imgs", "imgToAnns"), src, "a COCO-Text v2 file")
    sets = sorted({str(img.get("set")) for img in doc["imgs"].values()})
    if split is None and len(sets) > 1:
        raise DataError(f"{src}: holds {' and '.join(sets)} images; pick one with --split {'|'.join(sets)}")
    records = []
    for img_id, img in sorted(doc["imgs"].items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else kv[0]):
        if split is not None and img.get("set") != split:
            continue
        _need(img, ("file_name",), f"{src}: imgs[{img_id}]", "a COCO-Text image")
        anns: list[dict] = []
        for ann_id in doc["imgToAnns"].get(str(img_id), []):
            where = f"{src}: anns[{ann_id}]"
            ann = doc["anns"].get(str(ann_id))
            if ann is None:
                raise DataError(f"{src}: imgToAnns[{img_id}] names annotation {ann_id}, which is not in anns")
            _add(anns, _points(ann.get("mask"), where), ann.get("utf8_string", ""),
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
    _need(result, ("original_width", "original_height"), where, "a Label Studio region")
    sx, sy = result["original_width"] / 100.0, result["original_height"] / 100.0
    if "points" in value:
        return [[x * sx, y * sy] for x, y in _points(value["points"], where)]
    _need(value, ("x", "y", "width", "height"), where, "a Label Studio rectangle")
    x, y, w, h = value["x"] * sx, value["y"] * sy, value["width"] * sx, value["height"] * sy
    c, s = math.cos(math.radians(value.get("rotation", 0))), math.sin(math.radians(value.get("rotation", 0)))
    return [[x + dx * c - dy * s, y + dx * s + dy * c] for dx, dy in ((0, 0), (w, 0), (w, h), (0, h))]


def read_labelstudio(src: str, summary: Summary) -> list[Record]:
    """Label Studio JSON export of an OCR project (polygon/rectangle regions, textarea transcriptions)"""
    tasks = _load_json(src)
    if not isinstance(tasks, list):
        raise DataError(f"{src}: expected Label Studio's JSON export (a list of tasks); JSON-MIN/CSV lack regions")
    records = []
    for t, task in enumerate(tasks):
        where = f"{src}: task {task.get('id', t) if isinstance(task, dict) else t}"
        _need(task, ("data",), where, "a Label Studio task")
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
            _add(anns, pts, texts.get(rid, ""), False, f"{where} region {rid}", summary)
        records.append((_ls_image_name(task["data"], where), anns))
    return records


def read_mmocr(src: str, summary: Summary) -> list[Record]:
    """MMOCR 1.x TextDetDataset JSON (data_list of instances: polygon, ignore, text)"""
    doc = _load_json(src)
    _need(doc, ("data_list",), src, "an MMOCR 1.x annotation file")
    records = []
    for i, item in enumerate(doc["data_list"]):
        _need(item, ("img_path",), f"{src}: data_list[{i}]", "an MMOCR data entry")
        anns: list[dict] = []
        for j, inst in enumerate(item.get("instances", [])):
            where = f"{src}: data_list[{i}].instances[{j}]"
            _need(inst, ("polygon",), where, "an MMOCR text instance")
            _add(anns, _points(inst["polygon"], where), inst.get("text", ""), bool(inst.get("ignore")), where, summary)
        records.append((item["img_path"], anns))
    return records


def read_labels(src: str, summary: Summary) -> list[Record]:
    """MindOCR/PaddleOCR label file, or textdet predict's predictions.json (for --to labelme)"""
    if src.endswith(".json"):
        doc = _load_json(src)
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
            _need(item, ("points",), f"{where} entry {k}", "a polygon")
            pts = _points(item["points"], f"{where} entry {k}")
            if _add(anns, pts, item.get("transcription"), False, f"{where} entry {k}", summary) and "score" in item:
                anns[-1]["score"] = item["score"]
        out.append((name, anns))
    return out


def _xml_files(src: str, what: str) -> list[str]:
    files = sorted(os.path.join(folder, name) for folder, _, names in os.walk(src)
                   for name in names if name.lower().endswith(".xml"))
    if not files:
        raise DataError(f"{src}: expected a folder of {what} .xml files, found none")
    return files


def _xml_root(path: str) -> ElementTree.Element:
    try:
        return ElementTree.parse(path).getroot()
    except OSError as e:
        raise DataError(f"{path}: cannot read: {e.strerror or e}") from None
    except ElementTree.ParseError as e:
        raise DataError(f"{path}: not valid XML ({e})") from None


def _tag(element: ElementTree.Element) -> str:
    """The element's name without its namespace: ALTO and PAGE each have several versions' namespaces."""
    return element.tag.rsplit("}", 1)[-1]


def _descendants(element: ElementTree.Element, name: str) -> list[ElementTree.Element]:
    return [e for e in element.iter() if _tag(e) == name]


def _children(element: ElementTree.Element, name: str) -> list[ElementTree.Element]:
    return [e for e in element if _tag(e) == name]


def _xml_points(value: str | None, where: str) -> list[list[float]]:
    """``"x y x y ..."`` (ALTO 4) or ``"x,y x,y ..."`` (PAGE, older ALTO) -> ``[[x, y], ...]``."""
    try:
        numbers = [float(v) for v in (value or "").replace(",", " ").split()]
    except ValueError:
        raise DataError(f"{where}: points must be numbers, got {value[:80]!r}") from None
    return _points(numbers, where)


def _xml_image_name(value: str | None, path: str, element: str) -> str:
    """The image's file name without folders: exports often store the path on the machine that made them."""
    name = posixpath.basename((value or "").strip().replace("\\", "/"))
    if not name:
        raise DataError(f"{path}: no image file name in {element}: the image these lines label is unknown")
    return name


def _alto_line_points(line: ElementTree.Element, where: str) -> list[list[float]]:
    """The TextLine's own Shape polygon, else its HPOS/VPOS/WIDTH/HEIGHT box."""
    for shape in _children(line, "Shape"):
        for polygon in _children(shape, "Polygon"):
            return _xml_points(polygon.get("POINTS"), where)
    try:
        x, y, w, h = (float(line.get(key, "")) for key in ("HPOS", "VPOS", "WIDTH", "HEIGHT"))
    except ValueError:
        raise DataError(f"{where}: no Shape polygon and no numeric HPOS, VPOS, WIDTH, HEIGHT") from None
    return [[x, y], [x + w, y], [x + w, y + h], [x, y + h]]


def read_alto(src: str, summary: Summary) -> list[Record]:
    """a folder of ALTO XML files (eScriptorium, Kraken): one text region per TextLine"""
    records = []
    for path in _xml_files(src, "ALTO"):
        root = _xml_root(path)
        if _tag(root) != "alto":
            summary.skip(path, "XML file that is not ALTO (no <alto> root)")
            continue
        for unit in _descendants(root, "MeasurementUnit"):
            unit_name = (unit.text or "").strip()
            if unit_name not in ("", "pixel"):
                raise DataError(f"{path}: MeasurementUnit {unit_name!r}: only pixel coordinates can be "
                                "converted; export the ALTO with pixel units")
        names = _descendants(root, "fileName")
        name = _xml_image_name(names[0].text if names else None, path, "<sourceImageInformation><fileName>")
        anns: list[dict] = []
        for i, line in enumerate(_descendants(root, "TextLine")):
            where = f"{path}: TextLine {line.get('ID', i)}"
            text = " ".join(s.get("CONTENT", "") for s in _children(line, "String"))
            _add(anns, _alto_line_points(line, where), text, False, where, summary)
        records.append((name, anns))
    return records


def read_page(src: str, summary: Summary) -> list[Record]:
    """a folder of PAGE XML files (Transkribus, eScriptorium, OCR-D): one text region per TextLine"""
    records = []
    for path in _xml_files(src, "PAGE"):
        root = _xml_root(path)
        pages = _descendants(root, "Page")
        if _tag(root) != "PcGts" or not pages:
            summary.skip(path, "XML file that is not PAGE (no <PcGts> root with a <Page>)")
            continue
        name = _xml_image_name(pages[0].get("imageFilename"), path, "<Page imageFilename>")
        anns: list[dict] = []
        for i, line in enumerate(_descendants(root, "TextLine")):
            where = f"{path}: TextLine {line.get('id', i)}"
            coords = _children(line, "Coords")
            if not coords:
                summary.skip(where, "TextLine without Coords")
                continue
            texts = [unicode.text or "" for equiv in _children(line, "TextEquiv")
                     for unicode in _children(equiv, "Unicode")]
            _add(anns, _xml_points(coords[0].get("points"), where), texts[0] if texts else "", False, where,
                 summary)
        records.append((name, anns))
    return records


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
