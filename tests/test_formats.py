"""``textdet convert labelme|cocotext|labelstudio|mmocr|alto|page|labels``: fixtures written as each tool
writes them (from the formats' public specifications), converted through the real CLI, compared with the
polygons they were made from.

One 200 x 100 image holds (pixels)::

    A "Hello"  quad    (10,10) (90,12) (88,40) (12,38)
    B "World"  box     x 100..180, y 50..80
    C  ignore  box     x 20..60,   y 60..90          (labelme '###', COCO-Text illegible, MMOCR ignore: true)
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import cv2
import numpy as np
import pytest

from textdet import cli
from textdet.errors import DataError

A = [[10, 10], [90, 12], [88, 40], [12, 38]]
B = [[100, 50], [180, 50], [180, 80], [100, 80]]
C = [[20, 60], [60, 60], [60, 90], [20, 90]]
EXPECTED = [("Hello", A), ("World", B), ("###", C)]


def flat(points: list) -> list:
    return [v for p in points for v in p]


def run(*argv: str, capsys=None) -> str:
    assert cli.main(["convert", *map(str, argv)]) == 0
    return capsys.readouterr().out if capsys else ""


def read_labels(path: Path) -> dict[str, list[tuple[str, list]]]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        name, payload = line.split("\t")
        out[name] = [(a["transcription"], a["points"]) for a in json.loads(payload)]
    return out


def assert_regions(got: list[tuple[str, list]], want: list[tuple[str, list]], tol: float = 0.0) -> None:
    assert [t for t, _ in got] == [t for t, _ in want]
    for (_, p), (_, q) in zip(got, want, strict=True):
        np.testing.assert_allclose(np.array(p, float), np.array(q, float), atol=tol + 1e-9)


def write_image(path: Path, w: int = 200, h: int = 100) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.zeros((h, w, 3), np.uint8))


def labelme_file(path: Path, image_path: str, shapes: list[dict]) -> None:
    """As labelme 5.x saves: every shape has label, points, group_id, description, shape_type, flags, mask."""
    full = [{"group_id": None, "description": "", "flags": {}, "mask": None, **s} for s in shapes]
    doc = {"version": "5.4.1", "flags": {}, "shapes": full, "imagePath": image_path, "imageData": None,
           "imageHeight": 100, "imageWidth": 200}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")


@pytest.fixture()
def labelme_dir(tmp_path: Path) -> Path:
    """ann/img_1.json (images in a sibling folder) and ann/sub/img_2.json (Windows separators in imagePath)."""
    write_image(tmp_path / "images" / "img_1.jpg")
    write_image(tmp_path / "images" / "sub" / "img_2.jpg")
    labelme_file(tmp_path / "ann" / "img_1.json", "../images/img_1.jpg", [
        {"label": "Hello", "points": A, "shape_type": "polygon"},
        {"label": "World", "points": [[180, 80], [100, 50]], "shape_type": "rectangle"},  # dragged BR -> TL
        {"label": "###", "points": C, "shape_type": "polygon"},
        {"label": "dot", "points": [[5, 5]], "shape_type": "point"},
    ])
    labelme_file(tmp_path / "ann" / "sub" / "img_2.json", "..\\..\\images\\sub\\img_2.jpg",
                 [{"label": "x", "points": [[0, 0], [5, 5], [9, 9]], "shape_type": "polygon"}])  # collinear
    return tmp_path


def test_labelme_folder_to_label_file_and_back(labelme_dir: Path, capsys):
    """Names relative to --image-dir; the rectangle becomes TL, TR, BR, BL; a point shape and a zero-area
    polygon are skipped and counted. Label file -> labelme (--to labelme) -> label file is the identity."""
    out = labelme_dir / "train.txt"
    summary = run("labelme", labelme_dir / "ann", "--image-dir", labelme_dir / "images", "--out", out,
                  capsys=capsys)
    assert "2 images, 3 text regions (1 ignored: ### or *)" in summary
    assert "1 x labelme point shape" in summary and "1 x polygon with fewer than 3 points or zero area" in summary
    got = read_labels(out)
    assert list(got) == ["img_1.jpg", "sub/img_2.jpg"]
    assert_regions(got["img_1.jpg"], EXPECTED)
    assert got["sub/img_2.jpg"] == []

    review = labelme_dir / "review"
    run("labels", out, "--to", "labelme", "--image-dir", labelme_dir / "images", "--out", review)
    doc = json.loads((review / "img_1.json").read_text(encoding="utf-8"))
    assert (doc["imagePath"], doc["imageHeight"], doc["imageWidth"]) == ("../images/img_1.jpg", 100, 200)
    assert [(s["label"], s["shape_type"], s["points"]) for s in doc["shapes"]] == [
        (t, "polygon", p) for t, p in EXPECTED]
    assert json.loads((review / "sub" / "img_2.json").read_text())["imagePath"] == "../../images/sub/img_2.jpg"
    again = labelme_dir / "again.txt"
    run("labelme", review, "--image-dir", labelme_dir / "images", "--out", again)
    assert again.read_text(encoding="utf-8") == out.read_text(encoding="utf-8")


def test_labelme_without_image_dir_names_are_relative_to_the_input_folder(tmp_path: Path):
    """The usual layout: JSON files next to their images."""
    labelme_file(tmp_path / "data" / "a.json", "a.jpg", [{"label": "Hi", "points": A, "shape_type": "polygon"}])
    run("labelme", tmp_path / "data", "--out", tmp_path / "l.txt")
    assert list(read_labels(tmp_path / "l.txt")) == ["a.jpg"]


def cocotext_doc() -> dict:
    """COCO-Text v2: string ids as keys, flat ``mask`` polygons, ``legibility``, ``imgToAnns`` lists of ids."""
    img = {"width": 200, "height": 100}
    ann = {"class": "machine printed", "language": "english", "area": 0.0}
    return {
        "cats": {}, "info": {"version": "2.0"},
        "imgs": {"7": {**img, "id": 7, "set": "train", "file_name": "COCO_train2014_000000000007.jpg"},
                 "12": {**img, "id": 12, "set": "val", "file_name": "COCO_train2014_000000000012.jpg"},
                 "9": {**img, "id": 9, "set": "train", "file_name": "COCO_train2014_000000000009.jpg"}},
        "anns": {"1": {**ann, "id": 1, "image_id": 7, "mask": flat(A), "bbox": [10, 10, 80, 30],
                       "utf8_string": "Hello", "legibility": "legible"},
                 "2": {**ann, "id": 2, "image_id": 7, "mask": flat(B), "bbox": [100, 50, 80, 30],
                       "utf8_string": "World", "legibility": "legible"},
                 "3": {**ann, "id": 3, "image_id": 7, "mask": flat(C), "bbox": [20, 60, 40, 30],
                       "legibility": "illegible"},
                 "4": {**ann, "id": 4, "image_id": 12, "mask": flat(B), "bbox": [100, 50, 80, 30],
                       "utf8_string": "val", "legibility": "legible"}},
        "imgToAnns": {"7": [1, 2, 3], "12": [4], "9": []},
    }


def test_cocotext_split_illegible_and_images_without_text(tmp_path: Path, capsys):
    """Illegible -> ###; image 9 has no text (kept: an empty list); ids sort numerically (7 before 9)."""
    src = tmp_path / "cocotext.v2.json"
    src.write_text(json.dumps(cocotext_doc()), encoding="utf-8")
    with pytest.raises(DataError, match="holds train and val images; pick one with --split"):
        from textdet.commands.convert import convert_labels

        convert_labels("cocotext", str(src), str(tmp_path / "x.txt"))
    assert "2 images, 3 text regions (1 ignored: ### or *)" in run(
        "cocotext", src, "--split", "train", "--out", tmp_path / "train.txt", capsys=capsys)
    got = read_labels(tmp_path / "train.txt")
    assert list(got) == ["COCO_train2014_000000000007.jpg", "COCO_train2014_000000000009.jpg"]
    assert_regions(got["COCO_train2014_000000000007.jpg"], EXPECTED)
    assert got["COCO_train2014_000000000009.jpg"] == []
    run("cocotext", src, "--split", "val", "--out", tmp_path / "val.txt")
    assert_regions(read_labels(tmp_path / "val.txt")["COCO_train2014_000000000012.jpg"], [("val", B)])


def ls_result(rid: str, kind: str, value: dict) -> dict:
    return {"original_width": 200, "original_height": 100, "image_rotation": 0, "value": value, "id": rid,
            "from_name": {"textarea": "transcription", "labels": "label"}.get(kind, kind), "to_name": "image",
            "type": kind, "origin": "manual"}


def ls_region(rid: str, geometry: dict, text: str, kind: str) -> list[dict]:
    """One OCR-template region as exported: the shape, its Labels choice and its per-region TextArea, all with
    the same id and geometry."""
    return [ls_result(rid, kind, geometry), ls_result(rid, "labels", {**geometry, "labels": ["Text"]}),
            ls_result(rid, "textarea", {**geometry, "text": [text]})]


def pct(points: list) -> list:
    return [[x / 2, y] for x, y in points]  # 200 x 100 image: x% = x / 2, y% = y


def test_labelstudio_ocr_export(tmp_path: Path, capsys):
    """Label Studio's JSON export of the OCR template. Coordinates are percent of original_width/height; a
    rectangle's (x, y) is its top-left before rotation, turned clockwise about it by ``rotation`` degrees:

    - B: x 50%, y 50%, 40% x 30% -> x 100..180, y 50..80;
    - C: the top-left (20 px, 60 px), w 20 px (10%), h 10 px (10%), rotation 90: the top edge points down,
      corners (20,60) (20,80) (10,80) (10,60); the transcription ### marks it ignore;
    - task 2: (100 px, 10 px), 40 x 10 px, rotation 30 (cos 0.8660, sin 0.5): (100,10) (134.64,30)
      (129.64,38.66) (95,18.66).
    Upload names lose Label Studio's 8-hex-digit prefix; local-files URLs give the ?d= file name; a task with
    only a cancelled annotation is skipped and counted.
    """
    region_a = ls_region("a1", {"points": pct(A), "closed": True}, "Hello", "polygon")
    region_b = ls_region("b1", {"x": 50, "y": 50, "width": 40, "height": 30, "rotation": 0}, "World", "rectangle")
    region_c = ls_region("c1", {"x": 10, "y": 60, "width": 10, "height": 10, "rotation": 90}, "###", "rectangle")
    tilted = ls_region("t1", {"x": 50, "y": 10, "width": 20, "height": 10, "rotation": 30}, "tilt", "rectangle")
    tasks = [
        {"id": 1, "data": {"ocr": "/data/upload/3/0a1b2c3d-img_1.jpg"}, "predictions": [],
         "annotations": [{"id": 11, "result": region_a + region_b + region_c, "was_cancelled": False}]},
        {"id": 2, "data": {"ocr": "/data/local-files/?d=scans/img_2.jpg"},
         "annotations": [{"id": 12, "result": tilted, "was_cancelled": False}]},
        {"id": 3, "data": {"ocr": "/data/upload/3/ffffffff-img_3.jpg"},
         "annotations": [{"id": 13, "result": [], "was_cancelled": True}]},
    ]
    src = tmp_path / "project-1.json"
    src.write_text(json.dumps(tasks), encoding="utf-8")
    summary = run("labelstudio", src, "--out", tmp_path / "l.txt", capsys=capsys)
    assert "2 images, 4 text regions (1 ignored: ### or *); skipped 1 x task without a completed annotation" in summary
    got = read_labels(tmp_path / "l.txt")
    assert list(got) == ["img_1.jpg", "img_2.jpg"]
    assert_regions(got["img_1.jpg"], [("Hello", A), ("World", B), ("###", [[20, 60], [20, 80], [10, 80], [10, 60]])],
                   tol=0.005)
    c, s = math.cos(math.pi / 6), 0.5
    tilt = [[100, 10], [100 + 40 * c, 10 + 40 * s], [100 + 40 * c - 10 * s, 10 + 40 * s + 10 * c],
            [100 - 10 * s, 10 + 10 * c]]
    assert_regions(got["img_2.jpg"], [("tilt", tilt)], tol=0.005)


def test_mmocr_textdet_json(tmp_path: Path, capsys):
    """MMOCR 1.x TextDetDataset: img_path kept as written (relative to data_root), ignore: true -> ###,
    a 2-point polygon skipped and counted."""
    doc = {"metainfo": {"dataset_type": "TextDetDataset", "task_name": "textdet",
                        "category": [{"id": 0, "name": "text"}]},
           "data_list": [{"img_path": "textdet_imgs/train/img_1.jpg", "height": 100, "width": 200, "instances": [
               {"polygon": flat(A), "bbox": [10, 10, 90, 40], "bbox_label": 0, "ignore": False, "text": "Hello"},
               {"polygon": flat(B), "bbox": [100, 50, 180, 80], "bbox_label": 0, "ignore": False, "text": "World"},
               {"polygon": flat(C), "bbox": [20, 60, 60, 90], "bbox_label": 0, "ignore": True},
               {"polygon": [1, 1, 5, 5], "bbox": [1, 1, 5, 5], "bbox_label": 0, "ignore": False}]}]}
    src = tmp_path / "textdet_train.json"
    src.write_text(json.dumps(doc), encoding="utf-8")
    assert "1 images, 3 text regions (1 ignored: ### or *); skipped 1 x polygon" in run(
        "mmocr", src, "--out", tmp_path / "l.txt", capsys=capsys)
    assert_regions(read_labels(tmp_path / "l.txt")["textdet_imgs/train/img_1.jpg"], EXPECTED)


@pytest.mark.parametrize("fmt, content, match", [
    ("mmocr", '{"data_list": [{"img_path": "a.jpg", "instances": [{"polygon": [1, "x", 3, 4, 5, 6]}]}]}',
     r"m\.json: data_list\[0\]\.instances\[0\]: expected points"),
    ("mmocr", '{"data_list": [{"instances": []}]}', r"data_list\[0\]: not an MMOCR data entry: missing 'img_path'"),
    ("cocotext", '{"anns": {}, "imgs": {}}', r"m\.json: not a COCO-Text v2 file: missing 'imgToAnns'"),
    ("cocotext", '{"anns": {}, "imgs": {"1": {"file_name": "a.jpg"}}, "imgToAnns": {"1": [5]}}',
     r"imgToAnns\[1\] names annotation 5, which is not in anns"),
    ("labelstudio", '{"id": 1}', "expected Label Studio's JSON export"),
    ("labelstudio", '[{"data": {"image": "a.jpg"}, "annotations": [{"result": [{"type": "rectangle", "id": "r",'
     ' "value": {"x": 1, "y": 1, "width": 1, "height": 1}}]}]}]', r"task 0 result r: not a Label Studio region"),
    ("mmocr", '{"data_list": [', "m.json: not valid JSON"),
])
def test_bad_files_name_the_file_and_the_entry(tmp_path: Path, fmt: str, content: str, match: str):
    (tmp_path / "m.json").write_text(content, encoding="utf-8")
    from textdet.commands.convert import convert_labels

    with pytest.raises(DataError, match=match):
        convert_labels(fmt, str(tmp_path / "m.json"), str(tmp_path / "out.txt"))
    assert cli.main(["convert", fmt, str(tmp_path / "m.json"), "--out", str(tmp_path / "o.txt")]) == 2


def test_bad_labelme_shape_and_missing_image(labelme_dir: Path):
    labelme_file(labelme_dir / "ann" / "img_1.json", "../images/img_1.jpg",
                 [{"label": "a", "points": A, "shape_type": "polygon"},
                  {"label": "b", "points": [[1, 2], [3]], "shape_type": "polygon"}])
    from textdet.commands.convert import convert_labels

    with pytest.raises(DataError, match=r"img_1\.json: shapes\[1\]: expected points"):
        convert_labels("labelme", str(labelme_dir / "ann"), str(labelme_dir / "o.txt"))
    (labelme_dir / "l.txt").write_text("missing.jpg\t[]\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"missing\.jpg.*cannot be read; --image-dir"):
        convert_labels("labels", str(labelme_dir / "l.txt"), str(labelme_dir / "rev"), to="labelme")


def test_labelme_itself_reads_ours_and_we_read_its_files(tmp_path: Path):
    """With labelme installed (checked with labelme 6.3.1): its reader loads our review files (image size and
    relative imagePath checked), and a file written by its writer converts to the same regions."""
    lf = pytest.importorskip("labelme._label_file")
    write_image(tmp_path / "images" / "img_1.jpg")
    anns = [{"transcription": t, "points": p} for t, p in EXPECTED]
    (tmp_path / "l.txt").write_text("img_1.jpg\t" + json.dumps(anns))
    run("labels", tmp_path / "l.txt", "--to", "labelme", "--image-dir", tmp_path / "images", "--out", tmp_path / "rev")
    loaded = lf.read_label_file(str(tmp_path / "rev" / "img_1.json"))
    assert [(s["label"], s["points"]) for s in loaded.shapes] == [(t, p) for t, p in EXPECTED]
    shapes = [{"label": t, "points": [[float(x), float(y)] for x, y in p], "group_id": None, "description": "",
               "shape_type": "polygon", "flags": {}, "mask": None} for t, p in EXPECTED]
    (tmp_path / "theirs").mkdir()
    lf.write_label_file(str(tmp_path / "theirs" / "img_1.json"), shapes=shapes, image_path="../images/img_1.jpg",
                        image_height=100, image_width=200)
    run("labelme", tmp_path / "theirs", "--image-dir", tmp_path / "images", "--out", tmp_path / "back.txt")
    assert_regions(read_labels(tmp_path / "back.txt")["img_1.jpg"], EXPECTED)


def test_predictions_json_to_labelme_for_review(tmp_path: Path, capsys):
    """predict's predictions.json (keys: image paths as given, here absolute) -> one labelme file per image in
    --out (never beside the image), no label yet, the score as the description; a zero-area box is skipped."""
    write_image(tmp_path / "images" / "img_1.jpg")
    image = str((tmp_path / "images" / "img_1.jpg").resolve())
    preds = {image: [{"points": A, "score": 0.87}, {"points": [[0, 0], [5, 5], [9, 9], [2, 2]], "score": 0.5}]}
    (tmp_path / "predictions.json").write_text(json.dumps(preds), encoding="utf-8")
    assert "1 images, 1 text regions (0 ignored: ### or *); skipped 1 x polygon" in run(
        "labels", tmp_path / "predictions.json", "--to", "labelme", "--out", tmp_path / "rev", capsys=capsys)
    doc = json.loads((tmp_path / "rev" / "img_1.json").read_text(encoding="utf-8"))
    assert doc["imagePath"] == "../images/img_1.jpg"
    assert [(s["label"], s["points"], s["description"]) for s in doc["shapes"]] == [("", A, "score 0.870")]
    (tmp_path / "bad.json").write_text('{"a.jpg": {"points": []}}', encoding="utf-8")
    with pytest.raises(DataError, match="bad.json: expected predict's predictions.json"):
        from textdet.commands.convert import convert_labels

        convert_labels("labels", str(tmp_path / "bad.json"), str(tmp_path / "r"), to="labelme")


ALTO_V4 = """<?xml version="1.0" encoding="UTF-8"?>
<alto xmlns="http://www.loc.gov/standards/alto/ns-v4#">
  <Description>
    <MeasurementUnit>pixel</MeasurementUnit>
    <sourceImageInformation><fileName>C:\\scans\\img_1.jpg</fileName></sourceImageInformation>
  </Description>
  <Layout><Page WIDTH="200" HEIGHT="100"><PrintSpace><TextBlock>
    <TextLine ID="line_a" HPOS="0" VPOS="0" WIDTH="1" HEIGHT="1">
      <Shape><Polygon POINTS="10 10 90 12 88 40 12 38"/></Shape>
      <String CONTENT="Hello"/><SP/><String CONTENT="there"/>
    </TextLine>
    <TextLine ID="line_b" HPOS="100" VPOS="50" WIDTH="80" HEIGHT="30">
      <String CONTENT="World"><Shape><Polygon POINTS="0 0 5 0 5 5 0 5"/></Shape></String>
    </TextLine>
    <TextLine ID="line_c" HPOS="5" VPOS="5" WIDTH="0" HEIGHT="9"/>
  </TextBlock></PrintSpace></Page></Layout>
</alto>
"""

PAGE_2019 = """<?xml version="1.0" encoding="UTF-8"?>
<PcGts xmlns="http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15">
  <Page imageFilename="img_2.jpg" imageWidth="200" imageHeight="100">
    <TextRegion id="r1"><Coords points="0,0 200,0 200,100 0,100"/>
      <TextLine id="l1"><Coords points="10,10 90,12 88,40 12,38"/>
        <TextEquiv><Unicode>Hello</Unicode></TextEquiv>
      </TextLine>
      <TextLine id="l2"><TextEquiv><Unicode>no outline</Unicode></TextEquiv></TextLine>
      <TextLine id="l3"><Coords points="100,50 180,50 180,80 100,80"/>
        <Word id="w1"><Coords points="100,50 120,50 120,60 100,60"/>
          <TextEquiv><Unicode>Wor</Unicode></TextEquiv></Word>
        <TextEquiv><Unicode>World</Unicode></TextEquiv>
      </TextLine>
    </TextRegion>
  </Page>
</PcGts>
"""


def test_alto_and_page_lines_become_text_regions(tmp_path: Path, capsys):
    """ALTO: the line's own polygon (not its String's), else its HPOS/VPOS/WIDTH/HEIGHT box, the Strings
    joined by spaces; a zero-width line is skipped. PAGE: each TextLine's Coords and its own TextEquiv (not a
    Word's); a line without Coords is skipped. Image names lose the folders the export wrote; other XML is
    skipped."""
    (tmp_path / "alto").mkdir()
    (tmp_path / "alto" / "img_1.xml").write_text(ALTO_V4, encoding="utf-8")
    (tmp_path / "alto" / "mets.xml").write_text("<mets/>", encoding="utf-8")
    summary = run("alto", tmp_path / "alto", "--out", tmp_path / "alto.txt", capsys=capsys)
    assert "1 images, 2 text regions (0 ignored: ### or *)" in summary
    assert "1 x polygon with fewer than 3 points or zero area" in summary
    assert "1 x XML file that is not ALTO" in summary
    assert_regions(read_labels(tmp_path / "alto.txt")["img_1.jpg"], [("Hello there", A), ("World", B)])

    (tmp_path / "page").mkdir()
    (tmp_path / "page" / "img_2.xml").write_text(PAGE_2019, encoding="utf-8")
    summary = run("page", tmp_path / "page", "--out", tmp_path / "page.txt", capsys=capsys)
    assert "1 images, 2 text regions (0 ignored: ### or *); skipped 1 x TextLine without Coords" in summary
    assert_regions(read_labels(tmp_path / "page.txt")["img_2.jpg"], [("Hello", A), ("World", B)])


@pytest.mark.parametrize("fmt, content, match", [
    ("alto", ALTO_V4.replace(">pixel<", ">mm10<"), r"a\.xml: MeasurementUnit 'mm10': only pixel coordinates"),
    ("alto", ALTO_V4.replace("88 40 12 38", "88 40 12"), r"a\.xml: TextLine line_a: expected points"),
    ("alto", ALTO_V4.replace("<fileName>C:\\scans\\img_1.jpg</fileName>", ""),
     r"a\.xml: no image file name in <sourceImageInformation><fileName>"),
    ("page", PAGE_2019.replace(' imageFilename="img_2.jpg"', ""), r"a\.xml: no image file name in <Page"),
    ("page", PAGE_2019.replace("</PcGts>", ""), r"a\.xml: not valid XML"),
])
def test_bad_alto_and_page_files_name_the_file_and_the_line(tmp_path: Path, fmt: str, content: str,
                                                           match: str):
    (tmp_path / "xml").mkdir()
    (tmp_path / "xml" / "a.xml").write_text(content, encoding="utf-8")
    from textdet.commands.convert import convert_labels

    with pytest.raises(DataError, match=match):
        convert_labels(fmt, str(tmp_path / "xml"), str(tmp_path / "out.txt"))


def test_a_folder_without_xml_is_refused(tmp_path: Path):
    from textdet.commands.convert import convert_labels

    with pytest.raises(DataError, match="expected a folder of PAGE .xml files, found none"):
        convert_labels("page", str(tmp_path), str(tmp_path / "out.txt"))


def test_points_are_written_to_the_hundredth_and_whole_ones_as_integers():
    """181.999 and 0.004 round to whole numbers and are written as integers (182, not 182.0); others keep two
    decimals."""
    from textdet.data.annotations import plain_points

    written = plain_points([[181.999, 3.14159], [7.0, 0.004]])
    assert json.dumps(written) == "[[182, 3.14], [7, 0]]"


def test_labels_mended_on_reading_are_converted_not_counted_as_skipped(tmp_path: Path, capsys):
    """A repeated point is removed and the region kept; a two-point region is dropped: only it is skipped."""
    repeated = [A[0], A[0], *A[1:]]
    payload = [{"transcription": "Hello", "points": repeated}, {"transcription": "x", "points": [[0, 0], [5, 5]]}]
    (tmp_path / "gt.txt").write_text(f"img_1.jpg\t{json.dumps(payload)}\n", encoding="utf-8")
    summary = run("labels", tmp_path / "gt.txt", "--out", tmp_path / "out.txt", capsys=capsys)
    assert "1 images, 1 text regions (0 ignored: ### or *); skipped 1 x bad label line or annotation" in summary
    assert_regions(read_labels(tmp_path / "out.txt")["img_1.jpg"], [("Hello", A)])
