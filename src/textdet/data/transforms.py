"""MindOCR's detection transforms, with MindOCR's names and keyword parameters, on one sample dict.

Every transform is ``t(sample: dict, rng: np.random.Generator) -> dict`` (see docs/ARCHITECTURE.md
for the keys). Randomness comes only from ``rng`` so a seeded loader worker is reproducible.

Coordinates. Polygons are (P, 2) float32 (x, y) arrays in *pixel-centre* coordinates: pixel
(row i, column j) has its centre at x = j, y = i. This is what cv2.fillPoly, cv2.warpAffine and
cv2.resize assume, so each geometric transform below is one affine map applied identically to the
pixels and to the polygons: a polygon rendered before a transform covers the same pixels as the
transformed polygon rendered after it. (MindOCR scales polygons by ``x * s`` while cv2.resize maps
``x -> (x + 0.5) * s - 0.5``; the difference, (s - 1) / 2 px, is about one pixel at s = 3.)

The four geometric training transforms (flip, rotate, scale, crop) also expose ``plan(size, polys,
ignore_tags, rng) -> AffineStep | None``, which draws the random parameters and returns the affine
map without touching pixels. ``pipeline.FusedGeometry`` chains those plans and warps the image once.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
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


@dataclass(frozen=True)
class AffineStep:
    """One geometric step, as an affine map on pixel-centre coordinates.

    Attributes:
        matrix: (3, 3) float64 map from the step's input to its output coordinates.
        size: (h, w) of the image content the step produces.
        pad_to: (h, w) canvas after zero padding bottom/right, or None (no padding).
        flip: True when the map mirrors, so vertex order is reversed to stay clockwise.
        src_box: (y0, y1, x0, x1) region of the input that the step reads (crops).
    """

    matrix: np.ndarray
    size: tuple[int, int]
    pad_to: tuple[int, int] | None = None
    flip: bool = False
    src_box: tuple[int, int, int, int] | None = None


def apply_step_to_polys(polys: list[np.ndarray], step: AffineStep) -> list[np.ndarray]:
    """Map polygons through ``step``, reversing vertex order for mirroring steps."""
    out = map_polys(polys, step.matrix)
    return [p[::-1].copy() for p in out] if step.flip else out


def _scale_matrix(sx: float, sy: float, x0: float = 0.0, y0: float = 0.0) -> np.ndarray:
    """Pixel-centre map of ``cv2.resize`` applied to the region starting at (x0, y0).

    cv2.resize sends output pixel centre u to input (u + 0.5) / s - 0.5, so input x goes to
    (x - x0 + 0.5) * s - 0.5.
    """
    return np.array([[sx, 0.0, (0.5 - x0) * sx - 0.5], [0.0, sy, (0.5 - y0) * sy - 0.5], [0, 0, 1.0]])


def _update_polys(sample: Sample, step: AffineStep) -> None:
    if "polys" in sample:
        sample["polys"] = apply_step_to_polys(list(sample["polys"]), step)


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
            return sample
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


# ----------------------------------------------------------------------------- geometric (training)
class RandomHorizontalFlip:
    """Mirror the image left-right with probability ``p``; polygons follow.

    In pixel-centre coordinates column j goes to W - 1 - j, so x' = W - 1 - x (as MindOCR): a
    polygon filled with cv2.fillPoly then flipped covers exactly the pixels of the flipped polygon.
    Vertex order is reversed so clockwise polygons stay clockwise.
    """

    def __init__(self, p: float = 0.5) -> None:
        self.p = _check_prob(p)

    def plan(self, size: tuple[int, int], polys: list, ignore_tags: Any, rng: np.random.Generator) -> AffineStep | None:
        """Draw whether to flip an image of ``size`` (h, w); None means no change."""
        if rng.random() >= self.p:
            return None
        h, w = size
        return AffineStep(np.array([[-1.0, 0, w - 1], [0, 1, 0], [0, 0, 1]]), (h, w), flip=True)

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        step = self.plan(sample["image"].shape[:2], sample.get("polys", []), sample.get("ignore_tags"), rng)
        if step is not None:
            sample["image"] = cv2.flip(sample["image"], 1)
            _update_polys(sample, step)
        return sample

    def __repr__(self) -> str:
        return _repr(self, p=self.p)


class RandomRotate:
    """Rotate by an angle ~ U[degrees[0], degrees[1]] about (w // 2, h // 2) with probability ``p``.

    Fix of a MindOCR bug: the angle is a *float* drawn uniformly from the closed range; MindOCR
    uses ``randint`` and so only ever rotates by whole degrees. With ``expand_canvas`` the canvas
    grows to hold the whole rotated image (MindOCR's formula); without it the size stays and the
    corners are cut (ValidatePolygons deals with polygons pushed out). Uncovered pixels are 0.
    """

    def __init__(self, degrees: tuple[float, float] = (-10, 10), expand_canvas: bool = True, p: float = 1.0) -> None:
        self.degrees = _sorted_pair(degrees, "degrees")
        self.expand_canvas = bool(expand_canvas)
        self.p = _check_prob(p)

    def plan(self, size: tuple[int, int], polys: list, ignore_tags: Any, rng: np.random.Generator) -> AffineStep | None:
        """Draw the rotation for an image of ``size`` (h, w); None means no change."""
        if rng.random() >= self.p:
            return None
        angle = rng.uniform(*self.degrees)
        h, w = size
        center = (w // 2, h // 2)
        mat = cv2.getRotationMatrix2D(center, angle, 1.0)
        if self.expand_canvas:
            cos, sin = abs(mat[0, 0]), abs(mat[0, 1])
            w, h = int(h * sin + w * cos), int(h * cos + w * sin)
            mat[0, 2] += w / 2 - center[0]
            mat[1, 2] += h / 2 - center[1]
        return AffineStep(np.vstack([mat, [0.0, 0.0, 1.0]]), (h, w))

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        step = self.plan(sample["image"].shape[:2], sample.get("polys", []), sample.get("ignore_tags"), rng)
        if step is not None:
            h, w = step.size
            sample["image"] = cv2.warpAffine(sample["image"], step.matrix[:2], (w, h), flags=cv2.INTER_LINEAR,
                                             borderMode=cv2.BORDER_CONSTANT, borderValue=0)
            _update_polys(sample, step)
        return sample

    def __repr__(self) -> str:
        return _repr(self, degrees=self.degrees, expand_canvas=self.expand_canvas, p=self.p)


class RandomScale:
    """Resize by s ~ U[scale_range] with probability ``p``, as MindOCR.

    With ``size_limits`` (min_side, max_side) the range is narrowed so both sides stay within the
    limits (when impossible, the max limit wins). The output size is round(side * s) and polygons
    use the exact per-axis factor round(side * s) / side with the pixel-centre map of cv2.resize.
    """

    def __init__(self, scale_range: tuple[float, float] = (1.0, 1.0), size_limits: tuple[int, int] | None = None,
                 p: float = 0.5) -> None:
        self.scale_range = tuple(sorted(_check_pair(scale_range, "scale_range", positive=True)))
        self.size_limits = None if size_limits is None else tuple(
            sorted(_check_pair(size_limits, "size_limits", positive=True)))
        self.p = _check_prob(p)

    def _draw(self, size: tuple[int, int], rng: np.random.Generator) -> float:
        lo, hi = self.scale_range
        if self.size_limits is not None:
            (smin, smax), (h, w) = self.size_limits, size
            lo = max(smin / h, smin / w, lo)
            hi = min(smax / h, smax / w, hi)
            lo = min(lo, hi)
        return float(rng.uniform(lo, hi))

    def plan(self, size: tuple[int, int], polys: list, ignore_tags: Any, rng: np.random.Generator) -> AffineStep | None:
        """Draw the scale for an image of ``size`` (h, w); None means no change."""
        if rng.random() >= self.p:
            return None
        s = self._draw(size, rng)
        h, w = size
        oh, ow = max(1, round(h * s)), max(1, round(w * s))
        return AffineStep(_scale_matrix(ow / w, oh / h), (oh, ow))

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        step = self.plan(sample["image"].shape[:2], sample.get("polys", []), sample.get("ignore_tags"), rng)
        if step is not None:
            h, w = step.size
            sample["image"] = cv2.resize(sample["image"], (w, h), interpolation=cv2.INTER_LINEAR)
            _update_polys(sample, step)
        return sample

    def __repr__(self) -> str:
        return _repr(self, scale_range=self.scale_range, size_limits=self.size_limits, p=self.p)


def _poly_bounds(polys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-polygon (N, 2) min and max corners (x, y), computed with one reduceat each."""
    pts = np.concatenate([np.asarray(p, dtype=np.float64).reshape(-1, 2) for p in polys])
    starts = np.concatenate([[0], np.cumsum([len(p) for p in polys])[:-1]])
    return np.minimum.reduceat(pts, starts, axis=0), np.maximum.reduceat(pts, starts, axis=0)


def occupied(lo: np.ndarray, hi: np.ndarray, n: int) -> np.ndarray:
    """Mark the indices 0..n-1 covered by any closed interval [round(lo_k), round(hi_k)].

    A difference array makes this O(n + K) with no Python loop. Intervals are clipped to the
    image, so a polygon entirely outside it marks nothing (MindOCR would mark index 0).

    Args:
        lo, hi: (K,) interval ends in pixel units.
        n: length of the axis.

    Returns:
        (n,) bool array.
    """
    a = np.clip(np.round(lo), 0, n).astype(np.int64)
    b = np.clip(np.round(hi) + 1, 0, n).astype(np.int64)
    keep = a < b
    diff = np.zeros(n + 1, dtype=np.int64)
    np.add.at(diff, a[keep], 1)
    np.add.at(diff, b[keep], -1)
    return np.cumsum(diff[:-1]) > 0


class RandomCropWithBBox:
    """MindOCR's text-preserving random crop, then keep-ratio resize and zero-pad to ``crop_size``.

    With probability ``p``: crop edges are drawn among rows/columns that no non-ignored polygon's
    (rounded) extent covers, so a crop never cuts such a polygon; a crop is accepted when both
    sides are >= ceil(side * min_crop_ratio) and at least one non-ignored polygon's bbox overlaps
    it, trying ``max_tries`` times; else (and when 1 - p) the whole image is used. The region is
    then scaled by min(crop_size / region_size) (rounded output size, exact per-axis factors),
    padded with zeros at the bottom/right to exactly ``crop_size`` and ``actual_size`` (h, w) is
    the un-padded area. The occupancy marking is vectorised (MindOCR loops in Python).
    """

    def __init__(self, max_tries: int = 10, min_crop_ratio: float = 0.1, crop_size: tuple[int, int] = (640, 640),
                 p: float = 0.5) -> None:
        if not isinstance(max_tries, int) or isinstance(max_tries, bool) or max_tries < 0:
            raise ValueError(f"max_tries must be an integer >= 0, got {max_tries!r}")
        if not isinstance(min_crop_ratio, (int, float)) or not 0.0 < min_crop_ratio <= 1.0:
            raise ValueError(f"min_crop_ratio must be in (0, 1], got {min_crop_ratio!r}")
        self.max_tries = max_tries
        self.min_crop_ratio = float(min_crop_ratio)
        self.crop_size = _check_pair(crop_size, "crop_size", positive=True, integer=True)
        self.p = _check_prob(p)

    def choose_box(self, size: tuple[int, int], polys: list, ignore_tags: Any,
                   rng: np.random.Generator) -> tuple[int, int, int, int]:
        """Draw the crop region (y0, y1, x0, x1), end-exclusive, of an image of ``size`` (h, w)."""
        h, w = size
        full = (0, h, 0, w)
        if rng.random() >= self.p:
            return full
        ignore = np.zeros(len(polys), bool) if ignore_tags is None else np.asarray(ignore_tags, bool)
        keep = [p for p, ig in zip(polys, ignore, strict=True) if not ig and len(p)]
        if not keep:
            return full
        lo, hi = _poly_bounds(keep)
        rows, cols = occupied(lo[:, 1], hi[:, 1], h), occupied(lo[:, 0], hi[:, 0], w)
        if rows.all() or cols.all():
            return full
        free_rows, free_cols = np.flatnonzero(~rows), np.flatnonzero(~cols)
        min_h, min_w = (max(1, math.ceil(s * self.min_crop_ratio)) for s in size)
        for _ in range(self.max_tries):
            y0, y1 = np.sort(rng.choice(free_rows, size=2))
            x0, x1 = np.sort(rng.choice(free_cols, size=2))
            if y1 - y0 < min_h or x1 - x0 < min_w:
                continue
            if ((hi[:, 0] > x0) & (hi[:, 1] > y0) & (lo[:, 0] < x1) & (lo[:, 1] < y1)).any():
                return int(y0), int(y1), int(x0), int(x1)
        return full

    def plan(self, size: tuple[int, int], polys: list, ignore_tags: Any, rng: np.random.Generator) -> AffineStep:
        """Draw the crop and return its affine map (the region's resize into ``crop_size``)."""
        y0, y1, x0, x1 = self.choose_box(size, polys, ignore_tags, rng)
        ch, cw = self.crop_size
        scale = min(ch / (y1 - y0), cw / (x1 - x0))
        oh = min(ch, max(1, round((y1 - y0) * scale)))
        ow = min(cw, max(1, round((x1 - x0) * scale)))
        matrix = _scale_matrix(ow / (x1 - x0), oh / (y1 - y0), x0, y0)
        return AffineStep(matrix, (oh, ow), pad_to=self.crop_size, src_box=(y0, y1, x0, x1))

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        step = self.plan(sample["image"].shape[:2], sample.get("polys", []), sample.get("ignore_tags"), rng)
        y0, y1, x0, x1 = step.src_box
        oh, ow = step.size
        region = cv2.resize(sample["image"][y0:y1, x0:x1], (ow, oh), interpolation=cv2.INTER_LINEAR)
        sample["image"] = pad_bottom_right(region, step.pad_to)
        sample["actual_size"] = (oh, ow)
        _update_polys(sample, step)
        return sample

    def __repr__(self) -> str:
        return _repr(self, max_tries=self.max_tries, min_crop_ratio=self.min_crop_ratio,
                     crop_size=self.crop_size, p=self.p)


def pad_bottom_right(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Zero-pad an (h, w[, C]) image at the bottom/right to ``size`` (H, W) >= (h, w)."""
    h, w = image.shape[:2]
    if (h, w) == tuple(size):
        return image
    out = np.zeros((size[0], size[1]) + image.shape[2:], dtype=image.dtype)
    out[:h, :w] = image
    return out


# ----------------------------------------------------------------------------- polygon validation
def _clip_half_plane(pts: np.ndarray, axis: int, bound: float, keep_below: bool) -> np.ndarray:
    """One Sutherland-Hodgman pass: keep the part of a closed polygon on one side of x|y = bound."""
    if len(pts) == 0:
        return pts
    d = bound - pts[:, axis] if keep_below else pts[:, axis] - bound
    nxt, dn = np.roll(pts, -1, axis=0), np.roll(d, -1)
    inside = d >= 0
    cross = inside != (dn >= 0)
    t = d / np.where(cross, d - dn, 1.0)
    cand = np.stack([pts, pts + t[:, None] * (nxt - pts)], axis=1)  # (P, 2 candidates, 2)
    return cand[np.stack([inside, cross], axis=1)]


def clip_polygon_to_box(poly: np.ndarray, w: float, h: float) -> np.ndarray:
    """Clip a polygon to the box [0, w] x [0, h] (Sutherland-Hodgman, vectorised per side).

    Args:
        poly: (P, 2) polygon.
        w, h: box size.

    Returns:
        (Q, 2) float64 clipped polygon with consecutive duplicates removed; Q = 0 when the polygon
        lies outside the box.
    """
    pts = np.asarray(poly, dtype=np.float64).reshape(-1, 2)
    for axis, bound, below in ((0, 0.0, False), (0, float(w), True), (1, 0.0, False), (1, float(h), True)):
        pts = _clip_half_plane(pts, axis, bound, below)
    if len(pts) > 1:
        pts = pts[np.any(pts != np.roll(pts, -1, axis=0), axis=1)]
    return pts


class ValidatePolygons:
    """Drop polygons outside the visible area and mark barely visible ones as ignored (MindOCR).

    The visible area is the (h, w) of ``actual_size`` (the un-padded crop) or of the image, i.e.
    [-0.5, w - 0.5] x [-0.5, h - 0.5] in pixel-centre coordinates (MindOCR's box(0, 0, w, h) is
    the same area in its pixel-corner view; see the module docstring). A polygon not intersecting
    it is dropped with its text and tag; one whose visible area is < ``min_area`` becomes ignored.
    With ``clip_to_visible_area`` the polygon is replaced by its visible part and ignored when that
    has fewer than ``min_vertices`` vertices. Polygons whose bbox lies inside the area skip
    clipping (the common case after a text-preserving crop), and the clip is a vectorised
    Sutherland-Hodgman instead of one shapely intersection per polygon.
    """

    def __init__(self, min_area: float = 1.0, clip_to_visible_area: bool = False, min_vertices: int = 4) -> None:
        if not isinstance(min_area, (int, float)) or min_area < 0:
            raise ValueError(f"min_area must be a number >= 0, got {min_area!r}")
        if not isinstance(min_vertices, int) or min_vertices < 3:
            raise ValueError(f"min_vertices must be an integer >= 3, got {min_vertices!r}")
        self.min_area = float(min_area)
        self.clip_to_visible_area = bool(clip_to_visible_area)
        self.min_vertices = min_vertices

    def _check(self, poly: np.ndarray, w: float, h: float) -> tuple[np.ndarray | None, bool]:
        """Return (polygon to keep or None to drop, whether it must become ignored)."""
        corner = poly + 0.5  # pixel-centre -> pixel-corner coordinates: the image is [0, w] x [0, h]
        lo, hi = corner.min(axis=0), corner.max(axis=0)
        if hi[0] < 0 or hi[1] < 0 or lo[0] > w or lo[1] > h:
            return None, False
        inside = lo[0] >= 0 and lo[1] >= 0 and hi[0] <= w and hi[1] <= h
        visible = corner if inside else clip_polygon_to_box(corner, w, h)
        if len(visible) < 3:
            return None, False
        ignore = polygon_area(visible) < self.min_area
        if self.clip_to_visible_area and not inside:
            poly = (visible - 0.5).astype(np.float32)
            ignore = ignore or len(poly) < self.min_vertices
        return poly, ignore

    def _inside_areas(self, polys: list, w: float, h: float) -> tuple[np.ndarray, np.ndarray] | None:
        """Bbox fast path for equal-vertex-count polygons (quads): which lie wholly inside the visible
        area, and their areas (corner coordinates, as ``_check``). None when the counts differ."""
        if len({len(p) for p in polys}) != 1 or len(polys[0]) < 3:
            return None
        corner = np.stack(polys).astype(np.float32) + np.float32(0.5)  # as _check: float32 poly + 0.5
        lo, hi = corner.min(axis=1), corner.max(axis=1)
        inside = (lo >= 0).all(axis=1) & (hi[:, 0] <= w) & (hi[:, 1] <= h)
        p = corner.astype(np.float64)
        x, y = p[..., 0], p[..., 1]
        area = np.abs((x * np.roll(y, -1, axis=1)).sum(1) - (y * np.roll(x, -1, axis=1)).sum(1)) / 2.0
        return inside, area

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        h, w = (int(v) for v in sample.get("actual_size", sample["image"].shape[:2]))
        polys, texts, tags = [], [], []
        raw = [np.asarray(p, dtype=np.float32) for p in sample["polys"]]
        fast = self._inside_areas(raw, w, h) if raw else None
        for k, (poly, text, ignore) in enumerate(zip(raw, sample["texts"], sample["ignore_tags"], strict=True)):
            if fast is not None and fast[0][k]:
                area = fast[1][k]
                if abs(area - self.min_area) <= 1e-9 * (area + 1.0):  # summation order could matter: be exact
                    area = polygon_area(poly + np.float32(0.5))
                polys.append(poly)
                texts.append(text)
                tags.append(bool(ignore) or area < self.min_area)
                continue
            kept, newly_ignored = self._check(poly, w, h)
            if kept is not None:
                polys.append(kept)
                texts.append(text)
                tags.append(bool(ignore) or newly_ignored)
        sample["polys"], sample["texts"] = polys, texts
        sample["ignore_tags"] = np.array(tags, dtype=bool)
        return sample

    def __repr__(self) -> str:
        return _repr(self, min_area=self.min_area, clip_to_visible_area=self.clip_to_visible_area,
                     min_vertices=self.min_vertices)


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
    ``force_divisable`` (unless padded). Scales are resized / source size, un-padded.

    Differences from MindOCR: fix of the bug that multiplied both ``shape_list`` scales by scale_h
    when a ``shape_list`` already existed; polygons (if present) are always rescaled by
    (scale_w, scale_h) (x * s, so dividing by ``shape_list`` scales maps back) -- MindOCR only
    does this in training; padding keeps the image dtype (MindOCR forces uint8).
    """

    def __init__(self, target_size: tuple[int, int] | None = None, keep_ratio: bool = True, padding: bool = False,
                 limit_type: str | None = "min", limit_side_len: int = 736, force_divisable: bool = True,
                 divisor: int = 32, interpolation: int = cv2.INTER_LINEAR) -> None:
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
        self.interpolation = interpolation

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
        pad = allow_pad and self.padding
        if self.force_divisable and not pad:
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
                     force_divisable=self.force_divisable, divisor=self.divisor, interpolation=self.interpolation)
