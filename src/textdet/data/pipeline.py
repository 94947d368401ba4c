"""Config transform lists -> transform objects: the TRANSFORMS table, Compose and ``build_transforms``, which fuses
flip / rotate / scale / crop into one ``FusedGeometry`` warp (the sequential classes stay the reference)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import cv2
import numpy as np

from textdet.config.components import build_component
from textdet.data import colour, decode, geometric, resize
from textdet.data.colour import RandomColorAdjust
from textdet.data.decode import Sample
from textdet.data.resize import NormalizeImage, ToCHWImage
from textdet.data.targets import BorderMap, ShrinkBinaryMap
from textdet.errors import ConfigError

Transform = Callable[[Sample, np.random.Generator], Sample]

# Each module owns its transforms' table; merged in pipeline order (the "valid: ..." error lists them so).
TRANSFORMS: dict[str, type] = {**decode.TRANSFORMS, **colour.TRANSFORMS, **geometric.TRANSFORMS,
                               "ShrinkBinaryMap": ShrinkBinaryMap, "BorderMap": BorderMap, **resize.TRANSFORMS}


# ----------------------------------------------------------------------------- fused geometry
# The crops: their zero padding ends a fused warp.
CROPS = (geometric.RandomCropWithBBox, geometric.RandomTextCrop)


def is_fusable(transform: object) -> bool:
    """Whether ``transform`` is a pure affine step that FusedGeometry can chain."""
    if isinstance(transform, geometric.RandomRotate):
        return not transform.expand_canvas
    return isinstance(transform, (geometric.RandomHorizontalFlip, geometric.RandomScale) + CROPS)


class FusedGeometry:
    """Flip / rotate / scale / crop as one affine warp of the original image: same crop and polygons as the sequential
    pipeline, pixels interpolated once; ``color``: a RandomColorAdjust moved onto the crop
    (docs/decisions/fused-pipeline.md)."""

    def __init__(self, steps: list[Transform], color: RandomColorAdjust | None = None) -> None:
        if not steps or not all(is_fusable(t) for t in steps):
            raise ValueError(f"steps must be flip/rotate(expand_canvas=False)/scale/crop transforms, got {steps!r}")
        if any(isinstance(t, CROPS) for t in steps[:-1]):
            raise ValueError("a crop can only be the last fused step (its padding ends the warp)")
        if color is not None and not color.is_pixelwise:
            raise ValueError("color must be a pixel-wise RandomColorAdjust (contrast off) to be moved after the warp")
        self.steps = list(steps)
        self.color = color

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        factors = self.color.draw(rng) if self.color is not None else None  # drawn first, as sequentially
        image = sample["image"]
        size = tuple(image.shape[:2])
        polys = list(sample.get("polys", []))
        ignore = sample.get("ignore_tags")
        total, pad_to = np.eye(3), None
        for transform in self.steps:
            step = transform.plan(size, polys, ignore, rng)
            if step is None:
                continue
            polys = geometric.apply_step_to_polys(polys, step)
            total = step.matrix @ total
            size, pad_to = step.size, step.pad_to
        identity = np.array_equal(total, np.eye(3)) and size == tuple(image.shape[:2])
        h, w = size
        if pad_to is not None and (h, w) != tuple(pad_to):
            # Write the warp (and the colour, in place) straight into the zero-padded canvas: no
            # separate pad copy. A row slice of the canvas is contiguous; a column slice is a strided
            # view, which cv2 also writes into (checked below, copied otherwise).
            canvas = np.zeros((pad_to[0], pad_to[1]) + image.shape[2:], dtype=image.dtype)
            view = canvas[:h, :w]
            if identity:
                view[...] = image
            else:
                warped = cv2.warpAffine(image, total[:2], (w, h), dst=view, flags=cv2.INTER_LINEAR,
                                        borderMode=cv2.BORDER_CONSTANT, borderValue=0)
                if warped is not view:
                    view[...] = warped
            if factors is not None:
                self.color.apply(view, factors, out=view)
            image = canvas
        else:
            if not identity:
                image = cv2.warpAffine(image, total[:2], (w, h), flags=cv2.INTER_LINEAR,
                                       borderMode=cv2.BORDER_CONSTANT, borderValue=0)
                if factors is not None:
                    self.color.apply(image, factors, out=image)  # the warp's own output: in place
            elif factors is not None:
                image = self.color.apply(image, factors)
        if pad_to is not None:
            sample["actual_size"] = (int(h), int(w))
        sample["image"] = image
        if "polys" in sample:
            sample["polys"] = polys
        return sample

    def __repr__(self) -> str:
        return f"FusedGeometry(steps={self.steps!r}, color={self.color!r})"


def fuse_geometry(transforms: list[Transform]) -> list[Transform]:
    """Replace each run of >= 2 consecutive fusable transforms by one FusedGeometry; a run ends after a crop (padding
    is not affine) and a pixel-wise RandomColorAdjust right before a run moves into it (after the warp)."""
    out: list[Transform] = []
    i = 0
    while i < len(transforms):
        j = i
        while j < len(transforms) and is_fusable(transforms[j]):
            j += 1
            if isinstance(transforms[j - 1], CROPS):
                break
        if j - i < 2:
            out.append(transforms[i])
            i += 1
            continue
        pixelwise = out and isinstance(out[-1], RandomColorAdjust) and out[-1].is_pixelwise
        color = out.pop() if pixelwise else None
        out.append(FusedGeometry(transforms[i:j], color=color))
        i = j
    return out


class FusedNormalize:
    """NormalizeImage (HWC) + ToCHWImage as a float32 look-up table per channel written into the CHW output:
    bit-identical (an entry is the reference's float32 arithmetic on one level); 0.5 to 0.8 ms at 640x640, where the two
    steps take 4 to 6 and cv2.dnn's blobFromImage 0.8 to 4.5 by OpenCV build. Not 3-channel uint8: the reference."""

    def __init__(self, normalize: NormalizeImage, to_chw: ToCHWImage) -> None:
        self.normalize = normalize
        self.to_chw = to_chw
        # (256, 1, 3): every uint8 level through NormalizeImage's float32 ops, in its order
        table = (np.arange(256, dtype=np.float32).reshape(256, 1, 1) - normalize._mean) * normalize._inv_std
        self.tables = [np.ascontiguousarray(table[:, 0, c]).reshape(1, 256) for c in range(3)]
        self.sources = (2, 1, 0) if normalize.swap else (0, 1, 2)  # input plane of each output channel

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        img = sample["image"]
        if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
            return self.to_chw(self.normalize(sample, rng), rng)
        planes = cv2.split(img)
        out = np.empty((3,) + img.shape[:2], dtype=np.float32)
        for c, src in enumerate(self.sources):
            cv2.LUT(planes[src], self.tables[c], dst=out[c])  # out[c] is contiguous: cv2 writes into it
        sample["image"] = out
        return sample

    def __repr__(self) -> str:
        return f"FusedNormalize({self.normalize!r} + {self.to_chw!r})"


def fuse_normalize(transforms: list[Transform]) -> list[Transform]:
    """Replace NormalizeImage(is_hwc) directly followed by ToCHWImage with one FusedNormalize."""
    out: list[Transform] = []
    for t in transforms:
        if isinstance(t, ToCHWImage) and out and isinstance(out[-1], NormalizeImage) and out[-1].is_hwc:
            out.append(FusedNormalize(out.pop(), t))
        else:
            out.append(t)
    return out


# ----------------------------------------------------------------------------- compose and build
class Compose:
    """Run transforms in order; with ``timing`` (``textdet bench data``) ``stats`` holds seconds per transform."""

    timing: bool = False

    def __init__(self, transforms: list[Transform]) -> None:
        self.transforms = list(transforms)
        self.names = _unique_names(self.transforms)
        self.stats: dict[str, dict[str, float]] = {}

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        if not self.timing:
            for transform in self.transforms:
                sample = transform(sample, rng)
            return sample
        for name, transform in zip(self.names, self.transforms, strict=True):
            start = time.perf_counter()
            sample = transform(sample, rng)
            entry = self.stats.setdefault(name, {"seconds": 0.0, "count": 0})
            entry["seconds"] += time.perf_counter() - start
            entry["count"] += 1
        return sample

    def reset_stats(self) -> None:
        """Forget the recorded timings."""
        self.stats = {}

    def __len__(self) -> int:
        return len(self.transforms)

    def __repr__(self) -> str:
        return "Compose([\n" + "".join(f"  {t!r},\n" for t in self.transforms) + "])"


def _unique_names(transforms: list[Transform]) -> list[str]:
    names, seen = [], {}
    for t in transforms:
        base = type(t).__name__
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}#{seen[base]}")
    return names


def _split_entry(entry: Any, index: int) -> tuple[str, dict]:
    """``{Name: params | None}`` or ``"Name"`` -> (name, params)."""
    if isinstance(entry, str):
        return entry, {}
    if not isinstance(entry, dict) or len(entry) != 1:
        raise ConfigError(f"transform_pipeline[{index}]: expected {{Name: {{params}}}} or a name, got {entry!r}")
    (name, params), = entry.items()
    params = {} if params is None else params
    if not isinstance(name, str) or not isinstance(params, dict):
        raise ConfigError(f"transform_pipeline[{index}] {name}: parameters must be a mapping, got {params!r}")
    return name, params


def build_transform(entry: dict | str, index: int = 0) -> Transform:
    """Build one transform from a config entry; errors name the entry, transform and parameter."""
    name, params = _split_entry(entry, index)
    return build_component(TRANSFORMS, name, params, f"transform_pipeline[{index}]", "transform")


def build_transforms(pipeline: list[dict | str], fuse: bool = True) -> Compose:
    """MindOCR ``transform_pipeline`` -> Compose; ``fuse=False`` keeps the sequential reference transforms."""
    if not isinstance(pipeline, (list, tuple)):
        raise ConfigError(f"transform_pipeline must be a list, got {type(pipeline).__name__}")
    transforms = [build_transform(entry, i) for i, entry in enumerate(pipeline)]
    return Compose(fuse_normalize(fuse_geometry(transforms)) if fuse else transforms)
