"""A photo drawn with its labels and a model's detections in one picture (labels filled, detections
outlined, coloured by error kind), two models side by side, and the JPEG files of the report's gallery."""

from __future__ import annotations

import os
import re

import cv2
import numpy as np

from textdet.errors import TextdetError
from textdet.report.photos import Photo

# BGR. Labels are filled (found: green, not found: red, ###: grey); detections are outlined (matched:
# green, wrong: orange, in a ### region: grey). The page's legend repeats these (html.LEGEND).
GREEN = (60, 170, 40)
RED = (40, 40, 230)
ORANGE = (0, 150, 255)
GREY = (150, 150, 150)
DETECTION_COLOURS = {"matched": GREEN, "merged": ORANGE, "loose": ORANGE, "fragment": ORANGE,
                     "background": ORANGE, "ignored": GREY}
FILL_ALPHA = 0.35
FULL_MAX_SIDE = 1024  # the full-size picture's longer side at most: a 500-photo report stays under 60 MB
THUMB_MAX_SIDE = 280
FULL_QUALITY = 80
THUMB_QUALITY = 70


def read_photo(path: str) -> np.ndarray:
    image = cv2.imread(path, cv2.IMREAD_COLOR)
    if image is None:
        raise TextdetError(f"{path}: cannot be read as an image (the report draws every evaluated photo)")
    return image


def fit(image: np.ndarray, max_side: int) -> tuple[np.ndarray, float]:
    """``image`` shrunk so that its longer side is at most ``max_side`` (never enlarged), and the scale."""
    scale = min(1.0, max_side / max(image.shape[:2]))
    if scale == 1.0:
        return image, 1.0
    size = (max(1, round(image.shape[1] * scale)), max(1, round(image.shape[0] * scale)))
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA), scale


def _points(poly: np.ndarray, scale: float) -> np.ndarray:
    """Polygon (P, 2) float -> cv2's int32 points, 4 fractional bits (sub-pixel corners)."""
    return np.round(np.asarray(poly, dtype=np.float64).reshape(-1, 1, 2) * scale * 16).astype(np.int32)


def label_colour(kind: str | None) -> tuple[int, int, int]:
    """A label's colour from its word kind (None: a ### region)."""
    if kind is None:
        return GREY
    return GREEN if kind == "found" else RED


def draw_photo(image: np.ndarray, photo: Photo, scale: float) -> np.ndarray:
    """``image`` (BGR, the photo at ``scale``) with the labels filled and the detections outlined."""
    fill = image.copy()
    outline = max(1, round(max(image.shape[:2]) / 400))
    for poly, kind in zip(photo.gts, photo.errors.words, strict=True):
        if len(poly) < 3:
            continue
        cv2.fillPoly(fill, [_points(poly, scale)], label_colour(kind), cv2.LINE_AA, shift=4)
    out = cv2.addWeighted(fill, FILL_ALPHA, image, 1 - FILL_ALPHA, 0)
    for poly, kind in zip(photo.gts, photo.errors.words, strict=True):  # thin label edges: words that touch
        cv2.polylines(out, [_points(poly, scale)], True, label_colour(kind), 1, cv2.LINE_AA, shift=4)
    for poly, kind in zip(photo.polys, photo.errors.detections, strict=True):
        colour = DETECTION_COLOURS.get(kind, ORANGE)
        cv2.polylines(out, [_points(poly, scale)], True, colour, outline + 1, cv2.LINE_AA, shift=4)
    return out


def side_by_side(left: np.ndarray, right: np.ndarray, titles: tuple[str, str]) -> np.ndarray:
    """Two drawn pictures of one photo next to each other, each under a title strip, 8 px apart."""
    height = max(left.shape[0], right.shape[0])
    font = max(0.4, height / 900)
    strip = max(18, round(28 * font))
    panels = []
    for picture, title in zip((left, right), titles, strict=True):
        panel = np.full((height + strip, picture.shape[1], 3), 255, np.uint8)
        panel[strip : strip + picture.shape[0]] = picture
        thickness = max(1, round(font * 1.5))
        text_width = cv2.getTextSize(title, cv2.FONT_HERSHEY_SIMPLEX, font, thickness)[0][0]
        fitted = font * min(1.0, (picture.shape[1] - 8) / max(text_width, 1))  # a long name fits the panel
        origin = (4, strip - round(7 * font))
        dark_grey = (20, 20, 20)
        cv2.putText(panel, title, origin, cv2.FONT_HERSHEY_SIMPLEX, fitted, dark_grey, thickness, cv2.LINE_AA)
        panels.append(panel)
    gap = np.full((height + strip, 8, 3), 255, np.uint8)
    return np.hstack([panels[0], gap, panels[1]])


def file_stem(index: int, path: str) -> str:
    """A safe, unique file name for the photo at ``index`` of the evaluation (names may repeat in
    subfolders)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", os.path.splitext(os.path.basename(path))[0])[:60]
    return f"{index:04d}_{stem}"


def write_jpeg(path: str, image: np.ndarray, quality: int) -> tuple[int, int]:
    """Write ``image`` as JPEG; returns its (width, height)."""
    if not cv2.imwrite(path, image, [cv2.IMWRITE_JPEG_QUALITY, quality]):
        raise TextdetError(f"cannot write {path}: check that the --report folder is writable")
    return image.shape[1], image.shape[0]


def write_pictures(out_dir: str, stem: str, photos: list[Photo], titles: tuple[str, str] | None = None
                   ) -> tuple[int, int]:
    """``photos/STEM.jpg`` (full size) and ``thumbs/STEM.jpg`` of one photo: drawn for one model, or for two
    side by side (``titles``); returns the thumbnail's (width, height) for the page's img tag."""
    image = read_photo(photos[0].path)
    sizes = {}
    # two panels: the full-size ones smaller (the report's size), the thumbnails as large as one photo's
    full_side = FULL_MAX_SIDE if titles is None else FULL_MAX_SIDE * 2 // 3
    sizes_and_qualities = (("photos", full_side, FULL_QUALITY), ("thumbs", THUMB_MAX_SIDE, THUMB_QUALITY))
    for folder, max_side, quality in sizes_and_qualities:
        small, scale = fit(image, max_side)
        drawn = [draw_photo(small, photo, scale) for photo in photos]
        picture = drawn[0] if titles is None else side_by_side(drawn[0], drawn[1], titles)
        sizes[folder] = write_jpeg(os.path.join(out_dir, folder, stem + ".jpg"), picture, quality)
    return sizes["thumbs"]
