"""Colour: ``RandomColorAdjust`` (MindOCR's brightness/contrast/saturation/hue jitter) on uint8 RGB."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from textdet.checks import require_uint8_hwc, sorted_pair
from textdet.config.components import component_repr
from textdet.data.decode import Sample


def _factor_range(value: Any, name: str) -> tuple[float, float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{name} must be >= 0 or a (min, max) pair, got {value!r}")
        return max(0.0, 1.0 - value), 1.0 + value
    lo, hi = sorted_pair(value, name)
    if lo < 0:
        raise ValueError(f"{name} factors must be >= 0, got {value!r}")
    return lo, hi


def _hue_range(value: Any) -> tuple[float, float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = (-value, value)
    lo, hi = sorted_pair(value, "hue")
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
    """``clip(round(image * factor))`` on uint8 via ``cv2.convertScaleAbs`` (one SIMD pass), checked on all 256 levels
    against the exact ``_lut`` table; ``cv2.LUT`` on the rare factor where a float32 tie rounds the other way."""
    table = _lut(_RAMP * factor)
    if np.array_equal(cv2.convertScaleAbs(_RAMP_U8, alpha=factor)[0, :, 0], table):
        return cv2.convertScaleAbs(image, dst=out, alpha=factor)
    return cv2.LUT(image, table, dst=out)


def saturation_matrix(s: float) -> np.ndarray:
    """3x3 float32 matrix of ``s * rgb + (1 - s) * gray(rgb)`` per pixel (gray as cv2's RGB2GRAY)."""
    return (s * np.eye(3) + (1.0 - s) * np.tile(_GRAY_RGB, (3, 1))).astype(np.float32)


class RandomColorAdjust:
    """Random brightness, contrast, saturation and hue of an RGB image, like MindSpore's RandomColorAdjust: a number v
    gives factors ~ U[max(0, 1 - v), 1 + v], a pair U[min, max]; hue shifts by a fraction of a turn in [-0.5, 0.5]."""

    def __init__(self, brightness: float | tuple = 32.0 / 255, contrast: float | tuple = (1.0, 1.0),
                 saturation: float | tuple = 0.5, hue: float | tuple = (0.0, 0.0)) -> None:
        self.brightness = _factor_range(brightness, "brightness")
        self.contrast = _factor_range(contrast, "contrast")
        self.saturation = _factor_range(saturation, "saturation")
        self.hue = _hue_range(hue)

    @property
    def is_pixelwise(self) -> bool:
        """Whether each output pixel depends on its input pixel only (contrast off): commutes with warps and crops."""
        return self.contrast == (1.0, 1.0)

    def draw(self, rng: np.random.Generator) -> tuple[float, float, float, float]:
        """Draw (brightness, contrast, saturation, hue) factors, always four draws."""
        return tuple(float(rng.uniform(*r)) for r in (self.brightness, self.contrast, self.saturation, self.hue))

    def apply(self, image: np.ndarray, factors: tuple[float, float, float, float],
              out: np.ndarray | None = None) -> np.ndarray:
        """The uint8 (H, W, 3) image adjusted by drawn ``factors``, into ``out`` (may be ``image``) or a new array."""
        require_uint8_hwc(image, "RandomColorAdjust")
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
        if out is not None and image is not out:  # nothing applied, or cv2 could not write into the view
            out[...] = image
        return image if out is None else out

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        sample["image"] = self.apply(sample["image"], self.draw(rng))
        return sample

    __repr__ = component_repr


TRANSFORMS: dict[str, type] = {"RandomColorAdjust": RandomColorAdjust}
