"""Decoding and labels: ``DecodeImage`` and ``DetLabelEncode`` (MindOCR's names and parameters). Every transform is
``t(sample: dict, rng: np.random.Generator) -> dict``, random only through ``rng`` (keys: docs/ARCHITECTURE.md)."""

from __future__ import annotations

import json
import warnings
from typing import Any

import cv2
import numpy as np

from textdet.config.components import component_repr
from textdet.data.annotations import IGNORE_TEXTS
from textdet.errors import SampleError
from textdet.geometry import poly_bounds, polygon_area, polygon_areas

Sample = dict[str, Any]


class DecodeImage:
    """Decode ``sample["img_path"]`` (non-ASCII paths work) into ``image`` and ``raw_img_shape``, like MindOCR's."""

    def __init__(self, img_mode: str = "BGR", channel_first: bool = False, to_float32: bool = False,
                 ignore_orientation: bool = False, keep_ori: bool = False) -> None:
        if img_mode not in ("BGR", "RGB"):
            raise ValueError(f"img_mode must be 'BGR' or 'RGB', got {img_mode!r}")
        self.img_mode = img_mode
        self.channel_first = bool(channel_first)
        self.to_float32 = bool(to_float32)
        self.ignore_orientation = bool(ignore_orientation)
        self.keep_ori = bool(keep_ori)
        # OpenCV >= 4.10 decodes straight to RGB: bit-identical to BGR + cvtColor, one full-frame pass less.
        self._decode_rgb = img_mode == "RGB" and hasattr(cv2, "IMREAD_COLOR_RGB")
        colour = cv2.IMREAD_COLOR_RGB if self._decode_rgb else cv2.IMREAD_COLOR
        self._flag = colour | (cv2.IMREAD_IGNORE_ORIENTATION if ignore_orientation else 0)

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        path = sample["img_path"]
        try:
            buf = np.fromfile(path, dtype=np.uint8)
            img = cv2.imdecode(buf, self._flag) if buf.size else None
        except (OSError, cv2.error) as err:
            raise SampleError(f"cannot read image {path}: {err}") from err
        if img is None:
            raise SampleError(f"cannot decode image {path} (empty or corrupt file)")
        if self.img_mode == "RGB" and not self._decode_rgb:
            img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        sample["raw_img_shape"] = tuple(int(s) for s in img.shape[:2])
        if self.channel_first:
            img = np.ascontiguousarray(img.transpose(2, 0, 1))
        if self.to_float32:
            img = img.astype(np.float32)
        sample["image"] = img
        if self.keep_ori:
            sample["image_ori"] = img.copy()
        return sample

    __repr__ = component_repr


def _parse_polygon(points: Any) -> tuple[np.ndarray | None, str]:
    """Return (float32 (P, 2) polygon, "") or (None, reason it is unusable)."""
    try:
        poly = np.asarray(points, dtype=np.float64)
    except (TypeError, ValueError):
        return None, "points are not a list of [x, y] pairs"
    if poly.ndim != 2 or poly.shape[1] != 2:
        return None, f"points must have shape (P, 2), got {poly.shape}"
    if len(poly) < 3:
        return None, f"{len(poly)} points (need at least 3)"
    with np.errstate(over="ignore", invalid="ignore"):
        poly = poly.astype(np.float32)  # huge values overflow to inf here, so check after the cast
    if not np.isfinite(poly).all():
        return None, "non-finite coordinates"
    return (None, "zero area") if polygon_area(poly) <= 0 else (poly, "")


class DetLabelEncode:
    """``sample["label"]`` (JSON text or list of ``{"transcription", "points"}``) -> ``polys``, ``texts``,
    ``ignore_tags`` (``###``/``*``). Bad polygons are dropped with a warning, bad JSON raises ``SampleError``."""

    @staticmethod
    def _where(sample: Sample) -> str:
        return f"{sample.get('label_file')}:{sample.get('line_no')} ({sample.get('img_path')})"

    def _entries(self, sample: Sample) -> list:
        label = sample["label"]
        if isinstance(label, (str, bytes)):
            try:
                label = json.loads(label)
            except ValueError as err:
                raise SampleError(f"{self._where(sample)}: malformed label JSON: {err}") from err
        if not isinstance(label, list) or not all(isinstance(e, dict) and "points" in e for e in label):
            raise SampleError(f"{self._where(sample)}: label must be a list of {{'transcription', 'points'}} "
                              f"objects, got {str(label)[:80]!r}")
        return label

    @staticmethod
    def _parse_all(entries: list) -> list[np.ndarray] | None:
        """All polygons as float32 in one numpy pass when they share a vertex count and are valid, else None."""
        try:
            arr = np.array([e["points"] for e in entries], dtype=np.float64)
        except (TypeError, ValueError):  # ragged, or not numbers
            return None
        if arr.ndim != 3 or arr.shape[1] < 3 or arr.shape[2] != 2:
            return None
        with np.errstate(over="ignore", invalid="ignore"):
            arr = arr.astype(np.float32)
            if not np.isfinite(arr).all():
                return None
            areas = polygon_areas(arr)  # the very values _parse_polygon's polygon_area gives
        return list(arr) if (areas > 0).all() else None

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        entries = self._entries(sample)
        texts = [str(e.get("transcription", "")) for e in entries]
        polys = self._parse_all(entries) if entries else []
        if polys is None:  # the per-entry path: drops bad polygons with a warning
            polys, kept = [], []
            for i, (entry, text) in enumerate(zip(entries, texts, strict=True)):
                poly, reason = _parse_polygon(entry["points"])
                if poly is None:
                    warnings.warn(f"{self._where(sample)}: polygon {i} ({text!r}) dropped: {reason}", stacklevel=2)
                    continue
                polys.append(poly)
                kept.append(text)
            texts = kept
        sample["polys"], sample["texts"] = polys, texts
        sample["ignore_tags"] = np.array([t in IGNORE_TEXTS for t in texts], dtype=bool)
        return self._warn_outside(sample)

    def _warn_outside(self, sample: Sample) -> Sample:
        """A polygon entirely off the decoded image is a labelling mistake (kept: later steps drop it)."""
        polys = sample["polys"]
        if not len(polys):
            return sample
        h, w = sample["image"].shape[:2] if "image" in sample else (float("inf"), float("inf"))
        lo, hi = poly_bounds(polys)
        for i in np.flatnonzero((lo[:, 0] >= w) | (lo[:, 1] >= h) | (hi[:, 0] < 0) | (hi[:, 1] < 0)):
            warnings.warn(f"{self._where(sample)}: polygon {i} lies entirely outside the {w}x{h} image", stacklevel=2)
        return sample

    __repr__ = component_repr


TRANSFORMS: dict[str, type] = {"DecodeImage": DecodeImage, "DetLabelEncode": DetLabelEncode}
