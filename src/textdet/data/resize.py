"""Resize and normalise: ``NormalizeImage``, ``ToCHWImage`` and the eval/infer ``DetResize``."""

from __future__ import annotations

import math
import warnings
from typing import Any

import cv2
import numpy as np

from textdet.checks import check_pair
from textdet.config.components import component_repr
from textdet.data.decode import Sample
from textdet.geometry import map_polys

IMAGENET_MEAN = (123.675, 116.28, 103.53)  # RGB, 0-255 scale, as MindOCR
IMAGENET_STD = (58.395, 57.12, 57.375)


def pad_bottom_right(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Zero-pad an (h, w[, C]) image at the bottom/right to ``size`` (H, W) >= (h, w)."""
    h, w = image.shape[:2]
    if (h, w) == tuple(size):
        return image
    out = np.zeros((size[0], size[1]) + image.shape[2:], dtype=image.dtype)
    out[:h, :w] = image
    return out


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
    if name == "std" and (arr <= 1).all():  # a 0-1 std on 0-255 pixels blows every value up ~200x
        raise ValueError(f"std {value!r} is on a 0-1 scale; NormalizeImage (as MindOCR's) normalises 0-255 "
                         "pixels: give mean and std times 255 (PaddleOCR's configs write 0-1 values with "
                         "scale: 1./255)")
    return arr


class NormalizeImage:
    """``(image - mean) / std`` in float32, channels swapped first if asked; "imagenet": MindOCR's RGB 0-255 values."""

    def __init__(self, mean: str | list[float] = "imagenet", std: str | list[float] = "imagenet", is_hwc: bool = True,
                 bgr_to_rgb: bool = False, rgb_to_bgr: bool = False) -> None:
        self.mean = _mean_std(mean, "mean", IMAGENET_MEAN)  # (3,) float64, output channel order
        self.std = _mean_std(std, "std", IMAGENET_STD)
        self.is_hwc = bool(is_hwc)
        self.bgr_to_rgb = bool(bgr_to_rgb)
        self.rgb_to_bgr = bool(rgb_to_bgr)
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
        return component_repr(self, mean=self.mean.tolist(), std=self.std.tolist())


class ToCHWImage:
    """(H, W, C) -> contiguous (C, H, W), the layout the model takes."""

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        sample["image"] = np.ascontiguousarray(sample["image"].transpose(2, 0, 1))
        return sample

    __repr__ = component_repr


def _round_up(value: int, divisor: int) -> int:
    return max(math.ceil(value / divisor) * divisor, divisor)


class DetResize:
    """Resize for evaluation/inference and record ``shape_list = [src_h, src_w, scale_h, scale_w]``, with MindOCR's
    ``limit_type`` / ``target_size`` / ``divisor`` semantics (and differences:
    docs/decisions/mindocr-behaviours.md)."""

    def __init__(self, target_size: tuple[int, int] | None = None, keep_ratio: bool = True, padding: bool = False,
                 limit_type: str | None = "min", limit_side_len: int = 736, force_divisable: bool = True,
                 divisor: int = 32, interpolation: int = cv2.INTER_LINEAR, rounding: str = "up",
                 max_side_limit: int = 4000, tile: tuple[int, int] | None = None) -> None:
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
            th, tw = check_pair(target_size, "target_size", positive=True, integer=True)
            if force_divisable and (th % divisor or tw % divisor):
                th, tw = (max(round(x / divisor) * divisor, divisor) for x in (th, tw))
            self.target_size = (th, tw)
        if self.limit_type is None and self.target_size is None and not force_divisable:
            raise ValueError("limit_type none needs target_size or force_divisable=True")
        self.keep_ratio = bool(keep_ratio)
        self.padding = bool(padding)
        self.limit_side_len = limit_side_len
        self.force_divisable = bool(force_divisable)
        self.divisor = divisor
        self.interpolation = interpolation
        self.max_side_limit = max_side_limit
        # A page larger than this (H, W) is read in tiles of that size (runtime/tiles.py): resized as a tile
        # would be, not shrunk whole. None: every page is resized as above.
        self.tile = None if tile is None else check_pair(tile, "tile", positive=True, integer=True)

    def tile_scale(self) -> float:
        """The scale this resize reads an image of one tile's size at: a tiled page is read at it. A fixed
        target size stretches the two sides apart: their mean then."""
        tile_h, tile_w = self.tile
        if self.limit_type is not None or (self.target_size and self.keep_ratio):
            return self._limit_scale(tile_h, tile_w)
        resized_h, resized_w, _ = self._untiled_size(tile_h, tile_w)
        return (resized_h / tile_h + resized_w / tile_w) / 2

    def _limit_scale(self, h: int, w: int) -> float:
        """The one scale of both sides, before rounding, under ``limit_type`` or a kept-ratio target size."""
        if self.limit_type == "min" and min(h, w) < self.limit_side_len:
            return self.limit_side_len / min(h, w)
        if self.limit_type == "max" and max(h, w) > self.limit_side_len:
            return self.limit_side_len / max(h, w)
        if self.limit_type is None and self.keep_ratio and self.target_size:
            return min(self.target_size[0] / h, self.target_size[1] / w)
        return 1.0

    def output_size(self, h: int, w: int) -> tuple[int, int, bool]:
        """Return (resize_h, resize_w, pad_to_target) for an (h, w) image."""
        if self.tile is not None and (h > self.tile[0] or w > self.tile[1]):
            scale = self.tile_scale()
            tiled_h = _round_up(math.ceil(h * scale), self.divisor)
            tiled_w = _round_up(math.ceil(w * scale), self.divisor)
            return tiled_h, tiled_w, False
        return self._untiled_size(h, w)

    def _untiled_size(self, h: int, w: int) -> tuple[int, int, bool]:
        scale = self._limit_scale(h, w)
        allow_pad = self.limit_type is None and self.keep_ratio and bool(self.target_size)
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

    __repr__ = component_repr


TRANSFORMS: dict[str, type] = {"NormalizeImage": NormalizeImage, "ToCHWImage": ToCHWImage, "DetResize": DetResize}
