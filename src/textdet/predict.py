"""Inference: the ``Detector`` Python API that ``textdet predict`` runs.

A Detector is preprocessing, a model (PyTorch DBNet or ONNX) and DBPostprocess (boxes in original-image pixels)::

    det = build_detector(load_config("db_r50.yaml"), "runs/best.ckpt")  # textdet.build.parts: from a config
    det = Detector.from_onnx("ppocr_det.onnx")                    # any DB-style ONNX model
    result = det("img.jpg")        # {"polys": [np.ndarray (P, 2) float32], "scores": [float]}
    results = det([rgb_array, "other.png"])                       # one such dict per image
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from textdet.config.components import build_component
from textdet.config.loader import parse_buckets
from textdet.data import buckets as bucketing
from textdet.data.decode import DecodeImage
from textdet.data.resize import DetResize, NormalizeImage
from textdet.data.tiling import TileSpec
from textdet.errors import ConfigError, DataError, TextdetError
from textdet.postprocess import POSTPROCESSES, DBPostprocess
from textdet.runtime.amp import AmpSettings
from textdet.runtime.buckets import mask_padding
from textdet.runtime.onnx_model import OnnxModel
from textdet.runtime.tiles import run_tiled

logger = logging.getLogger("textdet")

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp")
# MindOCR's det inference default (tools/infer/text: det_limit_type max, det_limit_side_len 960)
INFER_RESIZE = {"limit_type": "max", "limit_side_len": 960, "keep_ratio": True, "divisor": 32}

ImageInput = "str | os.PathLike | np.ndarray"


# ----------------------------------------------------------------------------- preprocessing
@dataclass
class Preprocess:
    """RGB uint8 (H, W, 3) -> model input (3, H', W') float32 and ``shape_list`` [h, w, scale_h, scale_w];
    ``img_mode``: the channel order the model was trained on, applied before NormalizeImage (as in the
    pipeline)."""

    resize: DetResize
    normalize: NormalizeImage
    img_mode: str = "RGB"

    def __call__(self, image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        img = image if self.img_mode == "RGB" else np.ascontiguousarray(image[..., ::-1])
        sample = {"image": img, "raw_img_shape": tuple(img.shape[:2])}
        sample = self.normalize(self.resize(sample, None), None)
        return np.ascontiguousarray(sample["image"].transpose(2, 0, 1)), sample["shape_list"]

    def output_size(self, image: np.ndarray) -> tuple[int, int]:
        """The (H', W') that ``image`` will be resized to (padded size when DetResize pads)."""
        h, w, pad = self.resize.output_size(*image.shape[:2])
        return tuple(self.resize.target_size) if pad else (h, w)


def hwc_normalize(norm: NormalizeImage) -> NormalizeImage:
    """The same normalisation for HWC images, whatever layout the pipeline used it in."""
    return NormalizeImage(mean=norm.mean.tolist(), std=norm.std.tolist(), is_hwc=True,
                          bgr_to_rgb=norm.bgr_to_rgb, rgb_to_bgr=norm.rgb_to_bgr)


# ----------------------------------------------------------------------------- images
def read_image(path: str | os.PathLike) -> np.ndarray:
    """Decode an image file to RGB uint8 (H, W, 3); DataError naming the file when it cannot be read."""
    return DecodeImage(img_mode="RGB")({"img_path": os.fspath(path)}, None)["image"]


def _as_rgb(image: ImageInput) -> np.ndarray:
    if isinstance(image, (str, os.PathLike)):
        return read_image(image)
    if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        got = f"{type(image).__name__} {getattr(image, 'shape', '')} {getattr(image, 'dtype', '')}".strip()
        raise DataError(f"Detector: expected an image path or an RGB uint8 array (H, W, 3), got {got}")
    return image


def find_images(inputs: Sequence[str]) -> list[str]:
    """Files as given, folders as their images (extensions in IMAGE_EXTENSIONS, sorted, not recursive)."""
    paths = []
    for item in inputs:
        if os.path.isdir(item):
            names = sorted(n for n in os.listdir(item) if n.lower().endswith(IMAGE_EXTENSIONS))
            paths += [os.path.join(item, n) for n in names if os.path.isfile(os.path.join(item, n))]
        elif os.path.isfile(item):
            paths.append(item)
        else:
            raise TextdetError(f"input not found: {item} (give image files or folders)")
    if not paths:
        raise TextdetError(f"no images in {' '.join(inputs)} (looked for {', '.join(IMAGE_EXTENSIONS)} files)")
    return paths


# ----------------------------------------------------------------------------- detector
class TorchRunner:
    """A PyTorch model as ``float32 (N, 3, H, W) numpy -> (N, 1, H, W) numpy`` on ``device``."""

    def __init__(self, model: torch.nn.Module, device: torch.device, amp: AmpSettings | None = None) -> None:
        self.model, self.device, self.amp = model.to(device).eval(), device, amp

    def __call__(self, images: np.ndarray) -> np.ndarray:
        with torch.no_grad(), self.amp.context() if self.amp is not None else contextlib.nullcontext():
            prob = self.model(torch.from_numpy(images).to(self.device))["binary"]
        return prob.float().cpu().numpy()


class Detector:
    """Images in, text polygons and scores out (in original-image pixels). ``model``: float32 (N, 3, H, W) numpy
    -> probabilities (N, 1, H, W) numpy; ``batch_size``: images run together (one input shape a batch).

    ``shape_buckets`` (as ``eval.shape_buckets``): None runs each image at its resized size, batching equal
    sizes; ``"auto"`` picks up to 4 shapes from the resized sizes of the images of each ``predict`` call;
    [[H, W], ...] sets them. With buckets, each resized image is padded bottom/right to the smallest shape
    that holds it and the padding is zeroed in the probability map: the same boxes, a handful of input
    shapes for a graph compiler. ``input_shapes`` counts the batches run at each (H, W).

    ``tile``: a page larger than it is read at its own pixels in overlapping tiles of that size
    (``runtime/tiles.py``: one stitched map, each word out once); a page that fits in one tile is read as
    without it. ``shrink_limit``: a page resized below this scale is counted in ``shrunk`` (its words may be
    too small for the model: ``textdet predict`` suggests tiles)."""

    def __init__(self, model: Callable[[np.ndarray], np.ndarray], preprocess: Preprocess,
                 postprocess: DBPostprocess, batch_size: int = 8,
                 shape_buckets: str | list | None = None, tile: TileSpec | None = None,
                 shrink_limit: float | None = None, runtime: str = "") -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.preprocess = preprocess
        if tile is not None:  # a page larger than a tile is resized as one tile would be, then read in tiles
            tiled_resize = copy.copy(preprocess.resize)
            tiled_resize.tile = (tile.height, tile.width)
            self.preprocess = dataclasses.replace(preprocess, resize=tiled_resize)
            tile = tile.at_scale(tiled_resize.tile_scale())
        self.postprocess = postprocess
        self.batch_size = batch_size
        self.shape_buckets = parse_buckets(shape_buckets, "Detector shape_buckets")
        self.tile = tile
        self.shrink_limit = shrink_limit
        self.shrunk: list[float] = []  # the scales of the pages read below shrink_limit
        self.input_shapes: Counter = Counter()
        self.thresholds_note = ""  # build_detector: the thresholds its checkpoint brought, said in one line
        self.runtime = runtime  # what runs the model ("torch", "onnxruntime"), for the summary

    @classmethod
    def from_onnx(cls, path: str, postprocess: DBPostprocess | dict | None = None,
                  resize: DetResize | dict | None = None, normalize: NormalizeImage | dict | None = None,
                  img_mode: str | None = None, device: str | None = None, batch_size: int = 8,
                  shape_buckets: str | list | None = None, tile: TileSpec | None = None,
                  shrink_limit: float | None = None) -> Detector:
        """An ONNX model, ours or an external DB-style one, with MindOCR's inference pre/post-processing
        (a fixed-size model is resized straight to its size); ``postprocess``/``resize``/``normalize``
        (objects or kwargs dicts) and ``img_mode`` replace them (``build.parts.build_onnx_detector`` passes a
        config's)."""
        onnx = OnnxModel(path, device=device)
        pre = Preprocess(resize=DetResize(**INFER_RESIZE), normalize=NormalizeImage())
        if resize is None and onnx.fixed_hw is not None:
            resize = DetResize(target_size=onnx.fixed_hw, keep_ratio=False, limit_type="none")
        if resize is not None:
            pre.resize = resize if isinstance(resize, DetResize) else _built(DetResize, resize, "resize")
        if normalize is not None:
            pre.normalize = hwc_normalize(normalize if isinstance(normalize, NormalizeImage)
                                          else _built(NormalizeImage, normalize, "normalize"))
        if img_mode is not None:
            pre.img_mode = DecodeImage(img_mode=img_mode).img_mode
        if isinstance(postprocess, dict):
            spec = {k: v for k, v in postprocess.items() if k != "name"}
            postprocess = build_component(POSTPROCESSES, postprocess.get("name", "DBPostprocess"), spec,
                                          "postprocess", "postprocess")
        elif postprocess is None:
            postprocess = DBPostprocess()
        batch_size = 1 if onnx.fixed_batch == 1 else batch_size  # a model exported for one image at a time
        if shape_buckets is not None and onnx.fixed_hw is not None:
            height, width = onnx.fixed_hw
            raise ConfigError(f"{path} takes one input size, {height}x{width}: shape buckets do not apply to "
                              "it (leave them out)")
        if tile is not None and onnx.fixed_hw is not None and (tile.height, tile.width) != onnx.fixed_hw:
            height, width = onnx.fixed_hw
            raise ConfigError(f"{path} takes one input size, {height}x{width}: read pages in tiles of that "
                              f"size (--tile {height}x{width})")
        return cls(onnx.run, pre, postprocess, batch_size, shape_buckets, tile, shrink_limit, "onnxruntime")

    def __call__(self, images: ImageInput | Sequence[ImageInput]) -> dict | list[dict]:
        """One path/array -> one ``{"polys": [(P, 2) float32], "scores": [float]}``; a list -> a list of them."""
        if isinstance(images, (str, os.PathLike, np.ndarray)):
            return self.predict([_as_rgb(images)])[0]
        return self.predict([_as_rgb(im) for im in images])

    def predict(self, images: Sequence[np.ndarray]) -> list[dict]:
        """RGB uint8 arrays -> results; images of one input shape are batched together (a page read in
        tiles runs alone, its tiles batched)."""
        tiled = [self.tile is not None and not self.tile.holds(*image.shape[:2]) for image in images]
        untiled = [index for index, is_tiled in enumerate(tiled) if not is_tiled]
        sizes = [self.preprocess.output_size(images[index]) for index in untiled]
        groups: dict[tuple[tuple[int, int], bool], list[int]] = {}
        for index, shape in zip(untiled, self._input_shapes(sizes), strict=True):
            groups.setdefault((shape, False), []).append(index)
        for index, is_tiled in enumerate(tiled):
            if is_tiled:
                groups.setdefault((self.preprocess.output_size(images[index]), True), []).append(index)
        results: list[dict | None] = [None] * len(images)
        for (shape, is_tiled), indices in groups.items():
            pages_at_once = 1 if is_tiled else self.batch_size
            for start in range(0, len(indices), pages_at_once):
                chunk = indices[start : start + pages_at_once]
                chunk_results = self._run(shape, [images[i] for i in chunk], is_tiled)
                for index, result in zip(chunk, chunk_results, strict=True):
                    results[index] = result
        return results

    def _input_shapes(self, sizes: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """The (H, W) each image runs at: its resized size, or the bucket that holds it."""
        if self.shape_buckets is None or not sizes:
            return sizes
        buckets = self.shape_buckets
        if buckets == "auto":
            buckets = bucketing.choose_buckets(sizes)
        return [tuple(buckets[bucketing.bucket_for(size, buckets)]) for size in sizes]

    def _run(self, shape: tuple[int, int], images: list[np.ndarray], tiled: bool = False) -> list[dict]:
        """Preprocess ``images``, pad them to ``shape``, run the model (in tiles on a page larger than one),
        zero the padding, post-process."""
        inputs, shape_lists = zip(*(self.preprocess(image) for image in images), strict=True)
        valid_hw = np.array([image.shape[1:] for image in inputs], dtype=np.int64)
        batch = np.stack([bucketing.pad_channels_first(image, shape) for image in inputs])
        if not tiled:
            self.input_shapes[tuple(shape)] += 1
            prob = self.model(batch)
        else:
            model_h, model_w = self.tile.model_size()
            self.input_shapes[(min(model_h, shape[0]), min(model_w, shape[1]))] += 1
            prob = np.stack([run_tiled(self.model, image, self.tile, self.batch_size) for image in batch])
        if self.shrink_limit is not None:
            for shape_list in shape_lists:
                scale = float(min(shape_list[2], shape_list[3]))
                if scale < self.shrink_limit:
                    self.shrunk.append(scale)
        if (valid_hw != np.array(shape)).any():
            prob = mask_padding(torch.from_numpy(prob), torch.from_numpy(valid_hw)).numpy()
        return self.postprocess(prob, np.stack(shape_lists))


def _built(cls: type, kwargs: dict, what: str) -> Any:
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"Detector.from_onnx {what}={kwargs!r}: {e}") from None
