"""An ONNX DB-style detector under ONNX Runtime: one (N, 3, H, W) image input, one probability map output.
``textdet eval --onnx``, ``textdet predict --onnx`` and ``Detector.from_onnx`` run models through it, ours
(``textdet export``) or external ones (PP-OCR's det models)."""

from __future__ import annotations

import os

import numpy as np
import torch

from textdet.device import ort_providers
from textdet.errors import TextdetError

OUTPUT_NAME = "binary"  # the probability map's name in textdet's exports; other models' first output is used


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
