"""MindOCR's detection transforms that are not geometric, with MindOCR's names and keyword parameters.

Every transform is ``t(sample: dict, rng: np.random.Generator) -> dict`` (see docs/ARCHITECTURE.md
for the keys). Randomness comes only from ``rng`` so a seeded loader worker is reproducible.

This module holds decoding and labels (DecodeImage, DetLabelEncode), colour (RandomColorAdjust),
NormalizeImage, ToCHWImage, the eval/infer DetResize, the constants and ``Sample`` alias, and the
small helpers shared with ``geometric.py`` (argument checks, ``_repr``, ``map_polys``,
``pad_bottom_right``). The training geometry (flip, rotate, scale, crop, ValidatePolygons) and its
affine machinery live in ``geometric.py``, which imports from here (never the other way round).
Polygons are (P, 2) float32 (x, y) arrays in pixel-centre coordinates; ``geometric.py``'s
docstring explains the convention.
"""

from __future__ import annotations

import json
import math
import warnings
from typing import Any

import cv2
import numpy as np

from textdet.errors import SampleError
from textdet.geometry import polygon_area

Sample = dict[str, Any]
IMAGENET_MEAN = (123.675, 116.28, 103.53)  # RGB, 0-255 scale, as MindOCR
IMAGENET_STD = (58.395, 57.12, 57.375)
IGNORE_TEXTS = ("###", "*")


# ----------------------------------------------------------------------------- small helpers
def _repr(obj: object, **fields: Any) -> str:
    return f"{type(obj).__name__}(" + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")"


def _check_prob(p: float, name: str = "p") -> float:
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {p!r}")
    return float(p)


def _check_pair(value: Any, name: str, *, positive: bool = False, integer: bool = False) -> tuple:
    """Validate a (lo, hi) pair of numbers (lo <= hi not required here)."""
    ok = isinstance(value, (list, tuple)) and len(value) == 2
    ok = ok and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
    if ok and integer:
        ok = all(float(v).is_integer() for v in value)
    if ok and positive:
        ok = all(v > 0 for v in value)
    if not ok:
        kind = "positive " if positive else ""
        kind += "integers" if integer else "numbers"
        raise ValueError(f"{name} must be a pair of {kind}, got {value!r}")
    return (int(value[0]), int(value[1])) if integer else (float(value[0]), float(value[1]))


def _sorted_pair(value: Any, name: str, **kwargs: bool) -> tuple[float, float]:
    lo, hi = _check_pair(value, name, **kwargs)
    if lo > hi:
        raise ValueError(f"{name} must be (min, max) with min <= max, got {value!r}")
    return lo, hi


def map_polys(polys: list[np.ndarray], matrix: np.ndarray) -> list[np.ndarray]:
    """Apply a 3x3 (or 2x3) affine ``matrix`` to every polygon in one vectorised product.

    Args:
        polys: list of (P_i, 2) arrays (x, y).
        matrix: (3, 3) or (2, 3) affine matrix on column vectors (x, y, 1).

    Returns:
        list of (P_i, 2) float32 arrays.
    """
    if len(polys) == 0:
        return []
    lengths = [len(p) for p in polys]
    pts = np.concatenate([np.asarray(p, dtype=np.float64).reshape(-1, 2) for p in polys])
    out = pts @ matrix[:2, :2].T + matrix[:2, 2]
    return [a.astype(np.float32) for a in np.split(out, np.cumsum(lengths)[:-1])]


def pad_bottom_right(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Zero-pad an (h, w[, C]) image at the bottom/right to ``size`` (H, W) >= (h, w)."""
    h, w = image.shape[:2]
    if (h, w) == tuple(size):
        return image
    out = np.zeros((size[0], size[1]) + image.shape[2:], dtype=image.dtype)
    out[:h, :w] = image
    return out


def _require_uint8_hwc(image: np.ndarray, who: str) -> None:
    if not (isinstance(image, np.ndarray) and image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3):
        got = getattr(image, "shape", type(image).__name__), getattr(image, "dtype", None)
        raise ValueError(f"{who} expects a uint8 HxWx3 image (before NormalizeImage/ToCHWImage), got {got}")


# ----------------------------------------------------------------------------- decoding and labels
class DecodeImage:
    """Read ``sample["img_path"]`` and decode it (cv2), like MindOCR's DecodeImage.

    Bytes are read with ``np.fromfile`` and decoded with ``cv2.imdecode`` so non-ASCII paths work
    on every OS. Missing, unreadable or corrupt files raise ``SampleError`` naming the file, so the
    dataset can skip the sample. Sets ``image``, ``raw_img_shape`` (h, w) and, with keep_ori,
    ``image_ori``.
    """

    def __init__(self, img_mode: str = "BGR", channel_first: bool = False, to_float32: bool = False,
                 ignore_orientation: bool = False, keep_ori: bool = False) -> None:
        if img_mode not in ("BGR", "RGB"):
            raise ValueError(f"img_mode must be 'BGR' or 'RGB', got {img_mode!r}")
        self.img_mode = img_mode
        self.channel_first = bool(channel_first)
        self.to_float32 = bool(to_float32)
        self.ignore_orientation = bool(ignore_orientation)
        self.keep_ori = bool(keep_ori)
        self._flag = cv2.IMREAD_COLOR | (cv2.IMREAD_IGNORE_ORIENTATION if ignore_orientation else 0)
        # OpenCV >= 4.10 decodes straight to RGB (libjpeg/libpng write RGB): bit-identical to
        # BGR + cvtColor, one full-frame pass less.
        self._rgb_flag = getattr(cv2, "IMREAD_COLOR_RGB", None)
        self._decode_rgb = img_mode == "RGB" and self._rgb_flag is not None
        if self._decode_rgb:
            self._flag = self._rgb_flag | (cv2.IMREAD_IGNORE_ORIENTATION if ignore_orientation else 0)

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

    def __repr__(self) -> str:
        return _repr(self, img_mode=self.img_mode, channel_first=self.channel_first, to_float32=self.to_float32,
                     ignore_orientation=self.ignore_orientation, keep_ori=self.keep_ori)


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
    if polygon_area(poly) <= 0:
        return None, "zero area"
    return poly, ""


class DetLabelEncode:
    """Parse the JSON annotation into ``polys``, ``texts`` and ``ignore_tags``.

    ``sample["label"]`` is the raw JSON text or an already parsed list of
    ``{"transcription": str, "points": [[x, y], ...]}``. Transcriptions ``###`` and ``*`` are
    ignored (don't-care). Differences from MindOCR, on purpose:

    * polygons keep their own vertex counts (a list), instead of being padded to a common count by
      repeating the last point;
    * a polygon with < 3 points, non-finite coordinates or zero area is dropped with a warning
      naming the label file and line, instead of crashing a loader worker later;
    * an empty annotation list gives empty outputs (a text-free image) instead of ``None``.

    Malformed JSON (or entries without ``points``) raise ``SampleError`` naming file and line.
    """

    def __init__(self) -> None:
        pass

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
        """Vectorised parse for the common case: every polygon has the same vertex count (quads) and
        all are valid. Returns the float32 polygons, or None to fall back to the per-entry path
        (which also issues the warnings). Same values as ``_parse_polygon`` entry by entry."""
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
            p = arr.astype(np.float64)
            x, y = p[..., 0], p[..., 1]
            area = np.abs((x * np.roll(y, -1, axis=1)).sum(1) - (y * np.roll(x, -1, axis=1)).sum(1)) / 2.0
        # polygon_area sums in another order; only a (near-)zero area could compare differently
        scale = np.abs(p).max(axis=(1, 2)) ** 2 + 1.0
        if not (area > 1e-9 * scale).all():
            return None
        return list(arr)

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        entries = self._entries(sample)
        fast = self._parse_all(entries) if entries else None
        if fast is not None:
            texts = [str(e.get("transcription", "")) for e in entries]
            sample["polys"] = fast
            sample["texts"] = texts
            sample["ignore_tags"] = np.array([t in IGNORE_TEXTS for t in texts], dtype=bool)
            return self._warn_outside(sample)
        polys, texts, tags = [], [], []
        for i, entry in enumerate(entries):
            text = str(entry.get("transcription", ""))
            poly, reason = _parse_polygon(entry["points"])
            if poly is None:
                warnings.warn(f"{self._where(sample)}: polygon {i} ({text!r}) dropped: {reason}", stacklevel=2)
                continue
            polys.append(poly)
            texts.append(text)
            tags.append(text in IGNORE_TEXTS)
        sample["polys"] = polys
        sample["texts"] = texts
        sample["ignore_tags"] = np.array(tags, dtype=bool)
        return self._warn_outside(sample)

    def _warn_outside(self, sample: Sample) -> Sample:
        """A polygon entirely off the decoded image is a labelling mistake (kept: later steps drop it)."""
        h, w = sample["image"].shape[:2] if "image" in sample else (math.inf, math.inf)
        for i, p in enumerate(sample["polys"]):
            if p[:, 0].min() >= w or p[:, 1].min() >= h or p[:, 0].max() < 0 or p[:, 1].max() < 0:
                warnings.warn(f"{self._where(sample)}: polygon {i} lies entirely outside the {w}x{h} image",
                              stacklevel=2)
        return sample

    def __repr__(self) -> str:
        return "DetLabelEncode()"


# ----------------------------------------------------------------------------- photometric
def _factor_range(value: Any, name: str) -> tuple[float, float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{name} must be >= 0 or a (min, max) pair, got {value!r}")
        return max(0.0, 1.0 - value), 1.0 + value
    lo, hi = _sorted_pair(value, name)
    if lo < 0:
        raise ValueError(f"{name} factors must be >= 0, got {value!r}")
    return lo, hi


def _hue_range(value: Any) -> tuple[float, float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = (-value, value)
    lo, hi = _sorted_pair(value, "hue")
    if lo < -0.5 or hi > 0.5:
        raise ValueError(f"hue must lie in [-0.5, 0.5], got {value!r}")
    return lo, hi


def _lut(values: np.ndarray) -> np.ndarray:
    return np.clip(np.round(values), 0, 255).astype(np.uint8)


_RAMP = np.arange(256, dtype=np.float64)
_RAMP_U8 = np.arange(256, dtype=np.uint8).reshape(1, 256, 1).repeat(3, axis=2)  # every level, 3 channels
# cv2.cvtColor(RGB2GRAY)'s fixed-point weights (R, G, B) / 2**14, so the matrix below uses its exact gray
_GRAY_RGB = np.array([4899, 9617, 1868], dtype=np.float64) / 16384.0


def _scale_u8(image: np.ndarray, factor: float, out: np.ndarray | None) -> np.ndarray:
    """``clip(round(image * factor))`` on uint8, bit-identical to the lookup table ``_lut(ramp * factor)``.

    ``cv2.convertScaleAbs`` does it in one SIMD pass, several times faster than ``cv2.LUT`` on 3
    channels; it computes in float32, so it is first checked on all 256 levels against the exact
    table and ``cv2.LUT`` is used on the rare factor where a float32 tie rounds the other way.
    """
    table = _lut(_RAMP * factor)
    if np.array_equal(cv2.convertScaleAbs(_RAMP_U8, alpha=factor)[0, :, 0], table):
        return cv2.convertScaleAbs(image, dst=out, alpha=factor)
    return cv2.LUT(image, table, dst=out)


def saturation_matrix(s: float) -> np.ndarray:
    """3x3 float32 matrix of ``s * rgb + (1 - s) * gray(rgb)`` per pixel (gray as cv2's RGB2GRAY)."""
    return (s * np.eye(3) + (1.0 - s) * np.tile(_GRAY_RGB, (3, 1))).astype(np.float32)


class RandomColorAdjust:
    """Random brightness, contrast, saturation and hue, like MindSpore's RandomColorAdjust.

    A number v gives factors ~ U[max(0, 1 - v), 1 + v]; a pair gives U[min, max]; hue is a shift in
    [-0.5, 0.5] of a full turn. Defaults are MindOCR's (brightness 32/255, saturation 0.5, contrast
    and hue off). Ops run in a fixed order (brightness, contrast, saturation, hue) on uint8 with
    lookup tables and cv2, so it is cheap. The image is assumed RGB (MindOCR's DBNet configs use
    ``img_mode: RGB``); on BGR only the gray weights of saturation/contrast and the hue direction
    differ slightly.
    """

    def __init__(self, brightness: float | tuple = 32.0 / 255, contrast: float | tuple = (1.0, 1.0),
                 saturation: float | tuple = 0.5, hue: float | tuple = (0.0, 0.0)) -> None:
        self.brightness = _factor_range(brightness, "brightness")
        self.contrast = _factor_range(contrast, "contrast")
        self.saturation = _factor_range(saturation, "saturation")
        self.hue = _hue_range(hue)

    @property
    def is_pixelwise(self) -> bool:
        """True when the output pixel depends only on the input pixel (contrast, which uses the
        image mean, is off), so the op commutes with geometric warps and crops."""
        return self.contrast == (1.0, 1.0)

    def draw(self, rng: np.random.Generator) -> tuple[float, float, float, float]:
        """Draw (brightness, contrast, saturation, hue) factors, always four draws."""
        return tuple(float(rng.uniform(*r)) for r in (self.brightness, self.contrast, self.saturation, self.hue))

    def apply(self, image: np.ndarray, factors: tuple[float, float, float, float],
              out: np.ndarray | None = None) -> np.ndarray:
        """Return a colour-adjusted uint8 (H, W, 3) image for drawn ``factors``.

        ``out``: an array of the image's shape and dtype to write the result into (it may be
        ``image`` itself, for in-place); by default a new array (``image`` is never modified then).

        Brightness (and contrast) are exact lookup tables; saturation is one ``cv2.transform`` with a
        3x3 colour matrix instead of gray + GRAY2RGB + addWeighted. That skips the rounding of the
        gray image to uint8, so for factors s in [0, 2] a pixel differs from the three-op reference
        by at most 1 level (|1 - s| * 0.5 before rounding); other s, and any hue shift, keep the
        reference ops (gray, GRAY2RGB, addWeighted).
        """
        _require_uint8_hwc(image, "RandomColorAdjust")
        if out is not None and (out.shape != image.shape or out.dtype != np.uint8):
            raise ValueError(f"out must be uint8 {image.shape}, got {out.dtype} {out.shape}")
        b, c, s, h = factors
        if b != 1.0:
            image = _scale_u8(image, b, out)
        if c != 1.0:
            mean = float(cv2.cvtColor(image, cv2.COLOR_RGB2GRAY).mean())
            image = cv2.LUT(image, _lut(_RAMP * c + mean * (1.0 - c)), dst=out)
        if s != 1.0:
            if 0.0 <= s <= 2.0 and h == 0.0:  # (HSV's hue quantisation would amplify a 1-level difference)
                image = cv2.transform(image, saturation_matrix(s), dst=out)
            else:
                gray = cv2.cvtColor(cv2.cvtColor(image, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB)
                image = cv2.addWeighted(image, s, gray, 1.0 - s, 0.0, dst=out)
        if h != 0.0:
            hsv = cv2.cvtColor(image, cv2.COLOR_RGB2HSV)  # uint8 hue in [0, 180)
            shift = (np.arange(256) + int(round(h * 180))) % 180
            hsv[..., 0] = shift.astype(np.uint8)[hsv[..., 0]]
            image = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB, dst=out)
        if out is not None:
            if image is not out:  # nothing applied, or cv2 could not write into the view
                out[...] = image
            return out
        return image

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        sample["image"] = self.apply(sample["image"], self.draw(rng))
        return sample

    def __repr__(self) -> str:
        return _repr(self, brightness=self.brightness, contrast=self.contrast, saturation=self.saturation,
                     hue=self.hue)


# ----------------------------------------------------------------------------- normalisation
def _mean_std(value: Any, name: str, default: tuple[float, ...]) -> np.ndarray:
    if isinstance(value, str):
        if value.lower() != "imagenet":
            raise ValueError(f"{name} must be 'imagenet' or a list of 3 numbers, got {value!r}")
        value = default
    arr = np.asarray(value, dtype=np.float64) if isinstance(value, (list, tuple)) else None
    if arr is None or arr.shape != (3,) or not np.isfinite(arr).all():
        raise ValueError(f"{name} must be 'imagenet' or a list of 3 numbers, got {value!r}")
    if name == "std" and (arr <= 0).any():
        raise ValueError(f"std values must be > 0, got {value!r}")
    return arr


class NormalizeImage:
    """``(image - mean) / std`` in float32, channels swapped first when either swap flag is set.

    ``"imagenet"`` means MindOCR's RGB 0-255 values. Mean and std are in the output channel order.
    """

    def __init__(self, mean: str | list[float] = "imagenet", std: str | list[float] = "imagenet", is_hwc: bool = True,
                 bgr_to_rgb: bool = False, rgb_to_bgr: bool = False) -> None:
        self.mean = _mean_std(mean, "mean", IMAGENET_MEAN)  # (3,) float64, output channel order
        self.std = _mean_std(std, "std", IMAGENET_STD)
        self.is_hwc = bool(is_hwc)
        self.bgr_to_rgb, self.rgb_to_bgr = bool(bgr_to_rgb), bool(rgb_to_bgr)
        self.swap = self.bgr_to_rgb or self.rgb_to_bgr
        shape = (1, 1, 3) if self.is_hwc else (3, 1, 1)
        self._mean = self.mean.reshape(shape).astype(np.float32)
        self._inv_std = (1.0 / self.std).reshape(shape).astype(np.float32)

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        img = sample["image"]
        if self.swap:
            img = img[..., ::-1] if self.is_hwc else img[::-1]
        out = img.astype(np.float32)  # a fresh array, so the in-place ops below are safe
        out -= self._mean
        out *= self._inv_std
        sample["image"] = out
        return sample

    def __repr__(self) -> str:
        return _repr(self, mean=self.mean.tolist(), std=self.std.tolist(), is_hwc=self.is_hwc,
                     bgr_to_rgb=self.bgr_to_rgb, rgb_to_bgr=self.rgb_to_bgr)


class ToCHWImage:
    """(H, W, C) -> contiguous (C, H, W), the layout the model takes."""

    def __init__(self) -> None:
        pass

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        sample["image"] = np.ascontiguousarray(sample["image"].transpose(2, 0, 1))
        return sample

    def __repr__(self) -> str:
        return "ToCHWImage()"


# ----------------------------------------------------------------------------- eval/infer resize
def _round_up(value: int, divisor: int) -> int:
    return max(math.ceil(value / divisor) * divisor, divisor)


class DetResize:
    """Resize for evaluation/inference and record ``shape_list = [src_h, src_w, scale_h, scale_w]``.

    MindOCR semantics: ``target_size`` forces ``limit_type`` none. ``min`` upscales when the short
    side < limit_side_len, ``max`` downscales when the long side > limit_side_len (both keep the
    ratio); none + keep_ratio + target scales to fit the target (and may pad top-left into zeros);
    none without keep_ratio resizes straight to the target. Sizes are ceil'd to ``divisor`` when
    ``force_divisable`` (unless padded); ``rounding: nearest`` truncates and rounds to the nearest
    multiple instead, as PaddleOCR's DetResizeForTest. Scales are resized / source size, un-padded.

    Differences from MindOCR: fix of the bug that multiplied both ``shape_list`` scales by scale_h
    when a ``shape_list`` already existed; polygons (if present) are always rescaled by
    (scale_w, scale_h) (x * s, so dividing by ``shape_list`` scales maps back) -- MindOCR only
    does this in training; padding keeps the image dtype (MindOCR forces uint8).
    """

    def __init__(self, target_size: tuple[int, int] | None = None, keep_ratio: bool = True, padding: bool = False,
                 limit_type: str | None = "min", limit_side_len: int = 736, force_divisable: bool = True,
                 divisor: int = 32, interpolation: int = cv2.INTER_LINEAR, rounding: str = "up",
                 max_side_limit: int = 4000) -> None:
        if rounding not in ("up", "nearest"):
            raise ValueError(f"rounding must be 'up' or 'nearest', got {rounding!r}")
        self.rounding = rounding
        if limit_type not in ("min", "max", "none", None):
            raise ValueError(f"limit_type must be 'min', 'max' or 'none', got {limit_type!r}")
        if not isinstance(divisor, int) or divisor < 1:
            raise ValueError(f"divisor must be a positive integer, got {divisor!r}")
        if not isinstance(limit_side_len, (int, float)) or limit_side_len <= 0:
            raise ValueError(f"limit_side_len must be > 0, got {limit_side_len!r}")
        self.limit_type = None if target_size is not None or limit_type == "none" else limit_type
        self.target_size = None
        if target_size is not None:
            th, tw = _check_pair(target_size, "target_size", positive=True, integer=True)
            if force_divisable and (th % divisor or tw % divisor):
                th, tw = (max(round(x / divisor) * divisor, divisor) for x in (th, tw))
            self.target_size = (th, tw)
        if self.limit_type is None and self.target_size is None and not force_divisable:
            raise ValueError("limit_type none needs target_size or force_divisable=True")
        self.keep_ratio, self.padding = bool(keep_ratio), bool(padding)
        self.limit_side_len, self.force_divisable, self.divisor = limit_side_len, bool(force_divisable), divisor
        self.interpolation, self.max_side_limit = interpolation, max_side_limit

    def output_size(self, h: int, w: int) -> tuple[int, int, bool]:
        """Return (resize_h, resize_w, pad_to_target) for an (h, w) image."""
        scale, allow_pad = 1.0, False
        if self.limit_type == "min" and min(h, w) < self.limit_side_len:
            scale = self.limit_side_len / min(h, w)
        elif self.limit_type == "max" and max(h, w) > self.limit_side_len:
            scale = self.limit_side_len / max(h, w)
        elif self.limit_type is None and self.keep_ratio and self.target_size:
            scale, allow_pad = min(self.target_size[0] / h, self.target_size[1] / w), True
        if self.limit_type is not None or (self.target_size and self.keep_ratio):
            rh, rw = math.ceil(h * scale), math.ceil(w * scale)
            if self.target_size:
                rh, rw = min(rh, self.target_size[0]), min(rw, self.target_size[1])
        elif self.target_size:
            rh, rw = self.target_size
        else:
            rh, rw = h, w
        if max(rh, rw) > self.max_side_limit:  # textdet: a 12000x9000 photo with limit_type none never OOMs
            warnings.warn(f"DetResize: a {h}x{w} image would be resized to {rh}x{rw}; downscaled to fit "
                          f"max_side_limit={self.max_side_limit} (set limit_type max to choose the size)", stacklevel=2)
            f = self.max_side_limit / max(rh, rw)
            rh, rw, scale = max(int(rh * f), 1), max(int(rw * f), 1), scale * f
        pad = allow_pad and self.padding
        if self.force_divisable and not pad and self.rounding == "nearest":  # PaddleOCR: int(), then round
            d = self.divisor
            rh, rw = (max(round(int(x * scale) / d) * d, d) for x in (h, w))
        elif self.force_divisable and not pad:
            rh, rw = _round_up(rh, self.divisor), _round_up(rw, self.divisor)
        return rh, rw, pad

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        img = sample["image"]
        h, w = img.shape[:2]
        rh, rw, pad = self.output_size(h, w)
        out = cv2.resize(img, (rw, rh), interpolation=self.interpolation)
        if pad and self.target_size[0] >= rh and self.target_size[1] >= rw:
            out = pad_bottom_right(out, self.target_size)
        sample["image"] = out
        scale_h, scale_w = rh / h, rw / w
        if "polys" in sample:
            sample["polys"] = map_polys(list(sample["polys"]), np.array([[scale_w, 0, 0], [0, scale_h, 0.0]]))
        if "shape_list" in sample:
            shape_list = np.array(sample["shape_list"], dtype=np.float32)
            shape_list[2] *= scale_h
            shape_list[3] *= scale_w
        else:
            src_h, src_w = sample.get("raw_img_shape", (h, w))
            shape_list = np.array([src_h, src_w, scale_h, scale_w], dtype=np.float32)
        sample["shape_list"] = shape_list
        return sample

    def __repr__(self) -> str:
        return _repr(self, target_size=self.target_size, keep_ratio=self.keep_ratio, padding=self.padding,
                     limit_type=self.limit_type, limit_side_len=self.limit_side_len,
                     force_divisable=self.force_divisable, divisor=self.divisor, interpolation=self.interpolation,
                     rounding=self.rounding, max_side_limit=self.max_side_limit)
