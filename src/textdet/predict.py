"""Inference: the ``Detector`` Python API and the ``textdet predict`` command.

A Detector is preprocessing, a model (PyTorch DBNet or ONNX) and DBPostprocess (boxes in original-image pixels)::

    det = Detector.from_config(load_config("db_r50.yaml"), "runs/best.ckpt")
    det = Detector.from_onnx("ppocr_det.onnx")                    # any DB-style ONNX model
    result = det("img.jpg")        # {"polys": [np.ndarray (P, 2) float32], "scores": [float]}
    results = det([rgb_array, "other.png"])                       # one such dict per image
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from textdet.config import Config
from textdet.config.components import build_component
from textdet.config.loader import located, parse_buckets
from textdet.data import buckets as bucketing
from textdet.data.decode import DecodeImage
from textdet.data.pipeline import build_transforms
from textdet.data.resize import DetResize, NormalizeImage
from textdet.device import pick_device
from textdet.engine import build
from textdet.engine.amp import AmpSettings, inference_amp_settings
from textdet.engine.buckets import mask_padding
from textdet.engine.checkpoint import thresholds_note
from textdet.errors import ConfigError, DataError, TextdetError
from textdet.export import OnnxModel
from textdet.postprocess import POSTPROCESSES, DBPostprocess

logger = logging.getLogger("textdet")

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp")
# MindOCR's det inference default (tools/infer/text: det_limit_type max, det_limit_side_len 960)
INFER_RESIZE = {"limit_type": "max", "limit_side_len": 960, "keep_ratio": True, "divisor": 32}
PREDICT_CKPT_KEYS = ("predict.ckpt_load_path", "eval.ckpt_load_path")  # where predict and export look, in order

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


def _hwc_normalize(norm: NormalizeImage) -> NormalizeImage:
    """The same normalisation for HWC images, whatever layout the pipeline used it in."""
    return NormalizeImage(mean=norm.mean.tolist(), std=norm.std.tolist(), is_hwc=True,
                          bgr_to_rgb=norm.bgr_to_rgb, rgb_to_bgr=norm.rgb_to_bgr)


def preprocess_from_config(cfg: Config | None) -> Preprocess:
    """DecodeImage mode, DetResize and NormalizeImage of ``predict``'s (else ``eval``'s)
    ``transform_pipeline``; what is missing gets MindOCR's inference defaults (DetResize max 960, divisor 32;
    ImageNet normalisation of RGB)."""
    pipeline, key = None, None
    if cfg is not None:
        pipeline, key = cfg.predict.dataset.get("transform_pipeline"), "predict.dataset.transform_pipeline"
        if not pipeline:
            pipeline, key = cfg.eval.dataset.transform_pipeline, "eval.dataset.transform_pipeline"
    found: dict[type, Any] = {}
    if pipeline:
        with located(cfg, key):
            for t in build_transforms(pipeline, fuse=False).transforms:
                found.setdefault(type(t), t)
    decode, norm = found.get(DecodeImage), found.get(NormalizeImage)
    return Preprocess(resize=found.get(DetResize) or DetResize(**INFER_RESIZE),
                      normalize=_hwc_normalize(norm) if norm else NormalizeImage(),
                      img_mode=decode.img_mode if decode else "RGB")


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
    shapes for a graph compiler. ``input_shapes`` counts the batches run at each (H, W)."""

    def __init__(self, model: Callable[[np.ndarray], np.ndarray], preprocess: Preprocess,
                 postprocess: DBPostprocess, batch_size: int = 8,
                 shape_buckets: str | list | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.preprocess = preprocess
        self.postprocess = postprocess
        self.batch_size = batch_size
        self.shape_buckets = parse_buckets(shape_buckets, "Detector shape_buckets")
        self.input_shapes: Counter = Counter()
        self.thresholds_note = ""  # from_config: the thresholds its checkpoint brought, said in one line

    @classmethod
    def from_config(cls, cfg: Config, ckpt: str | None = None, device: str | None = None,
                    batch_size: int = 8, shape_buckets: str | list | None = None) -> Detector:
        """DBNet of ``cfg.model`` with weights from ``ckpt`` (default: predict/eval ``ckpt_load_path``) on
        ``device`` (default: the accelerator if any), autocast per ``system.amp_level_infer``;
        pre/post-processing of ``cfg``; ``shape_buckets`` default: the config's ``eval.shape_buckets``."""
        model, _, adopted = build.load_model(cfg, ckpt, PREDICT_CKPT_KEYS)
        postprocess, preprocess = build.build_postprocess_from_config(cfg), preprocess_from_config(cfg)
        dev = pick_device(device)
        amp = inference_amp_settings(cfg, dev.type)
        if shape_buckets is None:
            shape_buckets = cfg.eval.shape_buckets
        detector = cls(TorchRunner(model, dev, amp), preprocess, postprocess, batch_size, shape_buckets)
        detector.thresholds_note = thresholds_note(adopted)
        return detector

    @classmethod
    def from_onnx(cls, path: str, cfg: Config | None = None, postprocess: DBPostprocess | dict | None = None,
                  resize: DetResize | dict | None = None, normalize: NormalizeImage | dict | None = None,
                  img_mode: str | None = None, device: str | None = None, batch_size: int = 8,
                  shape_buckets: str | list | None = None) -> Detector:
        """An ONNX model, ours or an external DB-style one. Pre/post-processing from ``cfg``, else MindOCR's
        inference defaults (a fixed-size model is resized straight to it);
        ``postprocess``/``resize``/``normalize`` (objects or kwargs dicts) override; ``shape_buckets``
        default: ``cfg``'s ``eval.shape_buckets``."""
        onnx = OnnxModel(path, device=device)
        pre = preprocess_from_config(cfg)
        if resize is None and (cfg is None or not _has_resize(cfg)) and onnx.fixed_hw is not None:
            resize = DetResize(target_size=onnx.fixed_hw, keep_ratio=False, limit_type="none")
        if resize is not None:
            pre.resize = resize if isinstance(resize, DetResize) else _built(DetResize, resize, "resize")
        if normalize is not None:
            pre.normalize = _hwc_normalize(normalize if isinstance(normalize, NormalizeImage)
                                           else _built(NormalizeImage, normalize, "normalize"))
        if img_mode is not None:
            pre.img_mode = DecodeImage(img_mode=img_mode).img_mode
        if isinstance(postprocess, dict):
            spec = {k: v for k, v in postprocess.items() if k != "name"}
            postprocess = build_component(POSTPROCESSES, postprocess.get("name", "DBPostprocess"), spec,
                                          "postprocess", "postprocess")
        elif postprocess is None:
            postprocess = build.build_postprocess_from_config(cfg) if cfg is not None else DBPostprocess()
        batch_size = 1 if onnx.fixed_batch == 1 else batch_size  # a model exported for one image at a time
        if shape_buckets is None and cfg is not None:
            shape_buckets = cfg.eval.shape_buckets
        if shape_buckets is not None and onnx.fixed_hw is not None:
            height, width = onnx.fixed_hw
            raise ConfigError(f"{path} takes one input size, {height}x{width}: shape buckets do not apply to "
                              "it (leave them out)")
        return cls(onnx.run, pre, postprocess, batch_size, shape_buckets)

    def __call__(self, images: ImageInput | Sequence[ImageInput]) -> dict | list[dict]:
        """One path/array -> one ``{"polys": [(P, 2) float32], "scores": [float]}``; a list -> a list of them."""
        if isinstance(images, (str, os.PathLike, np.ndarray)):
            return self.predict([_as_rgb(images)])[0]
        return self.predict([_as_rgb(im) for im in images])

    def predict(self, images: Sequence[np.ndarray]) -> list[dict]:
        """RGB uint8 arrays -> results; images of one input shape are batched together."""
        input_shape_of = self._input_shapes([self.preprocess.output_size(image) for image in images])
        groups: dict[tuple[int, int], list[int]] = {}
        for index, shape in enumerate(input_shape_of):
            groups.setdefault(shape, []).append(index)
        results: list[dict | None] = [None] * len(images)
        for shape, indices in groups.items():
            for start in range(0, len(indices), self.batch_size):
                chunk = indices[start : start + self.batch_size]
                for index, result in zip(chunk, self._run(shape, [images[i] for i in chunk]), strict=True):
                    results[index] = result
        return results

    def _input_shapes(self, sizes: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """The (H, W) each image runs at: its resized size, or the bucket that holds it."""
        if self.shape_buckets is None:
            return sizes
        buckets = self.shape_buckets
        if buckets == "auto":
            buckets = bucketing.choose_buckets(sizes)
        return [tuple(buckets[bucketing.bucket_for(size, buckets)]) for size in sizes]

    def _run(self, shape: tuple[int, int], images: list[np.ndarray]) -> list[dict]:
        """Preprocess ``images``, pad them to ``shape``, run the model, zero the padding, post-process."""
        inputs, shape_lists = zip(*(self.preprocess(image) for image in images), strict=True)
        valid_hw = np.array([image.shape[1:] for image in inputs], dtype=np.int64)
        batch = np.stack([bucketing.pad_channels_first(image, shape) for image in inputs])
        self.input_shapes[tuple(shape)] += 1
        prob = self.model(batch)
        if (valid_hw != np.array(shape)).any():
            prob = mask_padding(torch.from_numpy(prob), torch.from_numpy(valid_hw)).numpy()
        return self.postprocess(prob, np.stack(shape_lists))


def _has_resize(cfg: Config) -> bool:
    pipes = (cfg.predict.dataset.get("transform_pipeline") or [], cfg.eval.dataset.transform_pipeline or [])
    return any("DetResize" in (e if isinstance(e, dict) else {e: None}) for p in pipes for e in p)


def _built(cls: type, kwargs: dict, what: str) -> Any:
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"Detector.from_onnx {what}={kwargs!r}: {e}") from None
