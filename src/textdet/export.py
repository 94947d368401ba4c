"""ONNX: export a DBNet, run ONNX models with ONNX Runtime, evaluate an ONNX file like a checkpoint.
The graph is the eval-mode model's probability map: input ``x`` float32 (N, 3, H, W) normalised as the config's
pipeline does, output ``binary`` (N, 1, H, W), batch/H/W dynamic (multiples of 32): PP-OCR's det interface too."""

from __future__ import annotations

import inspect
import os
import warnings
from collections.abc import Callable

import cv2
import numpy as np
import torch
from torch import nn

from textdet.config import Config
from textdet.device import ort_providers
from textdet.engine.amp import amp_settings
from textdet.engine.evaluator import build_evaluator, timed_run
from textdet.engine.validate import validate
from textdet.errors import TextdetError
from textdet.export_defaults import DEFAULT_EXPORT_HW, DEFAULT_OPSET
from textdet.models.dbnet import INPUT_DIVISOR

INPUT_NAME, OUTPUT_NAME = "x", "binary"
MAX_ABS_DIFF = 1e-3  # ONNX Runtime vs PyTorch probability maps, fp32
BOX_TOLERANCE_PX = 1.0  # a pixel exactly at binary_thresh may flip and move a rounded corner by 1 px


class OnnxModel:
    """An ONNX DB-style model (one (N, 3, H, W) input, one probability map output) under ONNX Runtime on ``device``;
    ``run`` takes numpy, a call takes a tensor and returns ``{"binary": P}`` like DBNet, for the Evaluator."""

    training = False

    def __init__(self, path: str, device: str | None = None) -> None:
        if not os.path.isfile(path):
            raise TextdetError(f"ONNX model not found: {path}")
        try:
            import onnxruntime as ort
        except ImportError:
            raise TextdetError("onnxruntime is not installed: pip install onnxruntime (or onnxruntime-gpu)") from None
        self.path = path
        try:
            self.session = ort.InferenceSession(path, providers=ort_providers(device, ort.get_available_providers()))
        except Exception as e:  # onnxruntime raises its own exception types for bad files
            raise TextdetError(f"cannot load ONNX model {path}: {e}") from None
        inputs, outputs = self.session.get_inputs(), self.session.get_outputs()
        if len(inputs) != 1:
            raise TextdetError(f"{path}: expected one image input, found {len(inputs)}: {[i.name for i in inputs]}")
        inp = inputs[0]
        if len(inp.shape) != 4 or (isinstance(inp.shape[1], int) and inp.shape[1] != 3):
            raise TextdetError(f"{path}: input {inp.name!r} has shape {inp.shape}; a DB-style detector takes images "
                               "(N, 3, H, W)")
        if inp.type not in ("tensor(float)", "tensor(float16)"):
            raise TextdetError(f"{path}: input {inp.name!r} is {inp.type}; expected float images")
        out = next((o for o in outputs if o.name == OUTPUT_NAME), outputs[0])
        channels = out.shape[1] if len(out.shape) == 4 else 1
        if len(out.shape) not in (3, 4) or (isinstance(channels, int) and channels != 1):
            raise TextdetError(f"{path}: output {out.name!r} has shape {out.shape}; expected a probability map "
                               "(N, 1, H, W) or (N, H, W)")
        self.input_name, self.output_name = inp.name, out.name
        self.input_dtype = np.float16 if inp.type == "tensor(float16)" else np.float32
        self.fixed_batch = inp.shape[0] if isinstance(inp.shape[0], int) and inp.shape[0] > 0 else None
        h, w = inp.shape[2], inp.shape[3]
        self.fixed_hw = (h, w) if isinstance(h, int) and isinstance(w, int) and h > 0 and w > 0 else None
        self.providers = self.session.get_providers()

    def run(self, images: np.ndarray) -> np.ndarray:
        """float32 (N, 3, H, W) -> float32 (N, 1, H, W) probabilities."""
        if self.fixed_hw is not None and tuple(images.shape[2:]) != self.fixed_hw:
            raise TextdetError(f"{self.path} takes {self.fixed_hw[0]}x{self.fixed_hw[1]} (HxW) inputs only, got "
                               f"{images.shape[2]}x{images.shape[3]}; resize to that size (DetResize target_size)")
        if self.fixed_batch == 1 and images.shape[0] > 1:
            return np.concatenate([self.run(images[i : i + 1]) for i in range(images.shape[0])])
        if self.fixed_batch is not None and images.shape[0] != self.fixed_batch:
            raise TextdetError(f"{self.path} takes batches of exactly {self.fixed_batch} images, got {images.shape[0]}")
        x = np.ascontiguousarray(images, dtype=self.input_dtype)
        try:
            out = self.session.run([self.output_name], {self.input_name: x})[0]
        except Exception as e:  # onnxruntime's own exception types: name the model and the input
            raise TextdetError(f"{self.path}: onnxruntime failed on an input of shape {x.shape}: {e}") from None
        prob = np.asarray(out, dtype=np.float32)
        return prob[:, None] if prob.ndim == 3 else prob

    def __call__(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"binary": torch.from_numpy(self.run(images.detach().float().cpu().numpy()))}

    def eval(self) -> OnnxModel:
        return self

    def train(self, mode: bool = True) -> OnnxModel:
        return self

    def __repr__(self) -> str:
        return f"OnnxModel({self.path!r}, input={self.input_name!r}, output={self.output_name!r}, {self.providers})"


def evaluate_onnx(cfg: Config, onnx_path: str, device: str | None = None, progress: bool = False,
                  sweep: bool = False, per_image: bool = False) -> dict:
    """``textdet eval --onnx``: ``evaluate_checkpoint``'s keys plus "onnx"; needs no ``model`` section."""
    pipeline = validate(cfg, ("eval",), model=False)["eval"]
    model, cpu = OnnxModel(onnx_path, device=device), torch.device("cpu")
    fp32 = amp_settings("O0", "cpu")
    evaluator = build_evaluator(cfg, pipeline, cpu, False, fp32, progress, sweep, per_image)
    result = timed_run(evaluator, model, onnx_path)
    return {**result, "onnx": result["checkpoint"]}


def export_onnx(model: nn.Module, path: str, height: int = DEFAULT_EXPORT_HW[0], width: int = DEFAULT_EXPORT_HW[1],
                opset: int = DEFAULT_OPSET) -> str:
    """Trace ``model`` (eval mode) on a (1, 3, H, W) input into ``path``; batch, H, W dynamic, output ``binary``."""
    for name, v in (("height", height), ("width", width)):
        if v < INPUT_DIVISOR or v % INPUT_DIVISOR:
            raise TextdetError(f"--{name} {v}: must be a positive multiple of {INPUT_DIVISOR}")
    was_training = model.training
    model.eval()  # the exporter restores the mode it found, so the model must already be in eval mode
    kwargs = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    dynamic = {0: "batch", 2: "height", 3: "width"}
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".tmp_{os.path.basename(path)}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter's notice
            torch.onnx.export(model, (torch.zeros(1, 3, height, width),), tmp, input_names=[INPUT_NAME],
                              output_names=[OUTPUT_NAME], dynamic_axes={INPUT_NAME: dynamic, OUTPUT_NAME: dynamic},
                              opset_version=opset, do_constant_folding=True, **kwargs)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
        model.train(was_training)
    return path


def synthetic_image(height: int, width: int) -> np.ndarray:
    """A deterministic RGB uint8 test card: dark text lines on a light background."""
    img = np.full((height, width, 3), 235, np.uint8)
    scale = max(height, width) / 640
    for i, text in enumerate(("TEXTDET 2024", "onnx check", "DBNet export")):
        y = int(height * (0.25 + 0.25 * i))
        cv2.putText(img, text, (int(width * 0.08), y), cv2.FONT_HERSHEY_SIMPLEX, 1.6 * scale, (20, 20, 20),
                    max(int(4 * scale), 1), cv2.LINE_AA)
    return img


def same_boxes(a: dict, b: dict, tol: float = BOX_TOLERANCE_PX) -> bool:
    """Two post-processed results hold the same boxes (any order), corners within ``tol`` px."""
    if len(a["polys"]) != len(b["polys"]):
        return False
    key = lambda p: (float(p[:, 1].min()), float(p[:, 0].min()))
    pairs = zip(sorted(a["polys"], key=key), sorted(b["polys"], key=key), strict=True)
    return all(p.shape == q.shape and np.abs(p - q).max() <= tol for p, q in pairs)


def compare_onnx(model: nn.Module, onnx_path: str, preprocess: Callable[[np.ndarray], tuple], postprocess,
                 image: np.ndarray) -> dict:
    """PyTorch vs ONNX Runtime on one RGB image: max |P diff| and the post-processed boxes of both."""
    x, shape = preprocess(image)
    model.eval()
    with torch.no_grad():
        p_torch = model(torch.from_numpy(x[None]))["binary"].float().numpy()
    p_onnx = OnnxModel(onnx_path, device="cpu").run(x[None])
    (det_torch,), (det_onnx,) = postprocess(p_torch, shape[None]), postprocess(p_onnx, shape[None])
    exact = len(det_torch["polys"]) == len(det_onnx["polys"]) and same_boxes(det_torch, det_onnx, tol=0.0)
    return {"max_abs_diff": float(np.abs(p_torch - p_onnx).max()), "torch": det_torch, "onnx": det_onnx,
            "same_boxes": same_boxes(det_torch, det_onnx), "identical_boxes": exact}
