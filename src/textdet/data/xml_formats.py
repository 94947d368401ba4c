"""Labels from XML layout formats (ALTO, PAGE): each text line's polygon and transcription, in image pixels.
Standard library only at import time."""

from __future__ import annotations

import os
import posixpath
from xml.etree import ElementTree

from textdet.data.annotations import Record, Summary, add_region, parse_points
from textdet.errors import DataError


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
    return parse_points(numbers, where)


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
            add_region(anns, _alto_line_points(line, where), text, False, where, summary)
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
            add_region(anns, _xml_points(coords[0].get("points"), where), texts[0] if texts else "", False,
                       where, summary)
        records.append((name, anns))
    return records
