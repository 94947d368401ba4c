"""An ONNX DB-style detector under ONNX Runtime: one (N, 3, H, W) image input, one probability map output.
``textdet eval --onnx``, ``textdet predict --onnx`` and ``Detector.from_onnx`` run models through it, ours
(``textdet export``) or external ones (PP-OCR's det models); on a CPU, ``eval`` and ``predict`` run a PyTorch
model through it too (``OnnxModel.from_torch``), as ONNX Runtime's fused kernels are faster there. The graph
is the eval-mode model's probability map: input ``x`` float32 (N, 3, H, W), output ``binary`` (N, 1, H, W),
batch, height and width dynamic (multiples of 32): PP-OCR's det interface too."""

from __future__ import annotations

import inspect
import io
import os
import warnings
from typing import IO

import numpy as np
import torch
from torch import nn

from textdet.device import ort_providers
from textdet.errors import TextdetError
from textdet.export_defaults import DEFAULT_OPSET

INPUT_NAME = "x"
OUTPUT_NAME = "binary"  # the probability map's name in textdet's exports; other models' first output is used
TRACE_HW = (128, 128)  # the input a model is traced on to run it in ONNX Runtime: every size works after


def trace_to_onnx(model: nn.Module, file: str | IO[bytes], height: int, width: int,
                  opset: int = DEFAULT_OPSET) -> None:
    """Trace ``model`` in eval mode on a (1, 3, ``height``, ``width``) input into ``file`` (a path or a
    binary buffer); batch, height and width dynamic, output ``binary``. The model's mode is put back."""
    was_training = model.training
    model.eval()  # the exporter restores the mode it found, so the model must already be in eval mode
    kwargs = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    dynamic = {0: "batch", 2: "height", 3: "width"}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript exporter's notices: nothing a user can act on
            torch.onnx.export(model, (torch.zeros(1, 3, height, width),), file, input_names=[INPUT_NAME],
                              output_names=[OUTPUT_NAME],
                              dynamic_axes={INPUT_NAME: dynamic, OUTPUT_NAME: dynamic},
                              opset_version=opset, do_constant_folding=True, **kwargs)
    finally:
        model.train(was_training)


class OnnxModel:
    """An ONNX DB-style model (one (N, 3, H, W) input, one probability map output) under ONNX Runtime on
    ``device``; ``run`` takes numpy, a call takes a tensor and returns ``{"binary": P}`` like DBNet, for the
    Evaluator."""

    training = False

    def __init__(self, path: str, device: str | None = None, model_bytes: bytes | None = None,
                 threads: int | None = None) -> None:
        """``model_bytes``: the model itself (``from_torch``), ``path`` then only names it in messages;
        ``threads``: ONNX Runtime's intra-op threads (None: its default, one per core)."""
        if model_bytes is None and not os.path.isfile(path):
            raise TextdetError(f"ONNX model not found: {path}")
        ort = onnxruntime()
        self.path = path
        options = ort.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
        providers = ort_providers(device, ort.get_available_providers())
        try:
            self.session = ort.InferenceSession(model_bytes or path, options, providers=providers)
        except Exception as e:  # onnxruntime raises its own exception types for bad files
            raise TextdetError(f"cannot load ONNX model {path}: {e}") from None
        inputs, outputs = self.session.get_inputs(), self.session.get_outputs()
        if len(inputs) != 1:
            raise TextdetError(f"{path}: expected one image input, found {len(inputs)}: "
                               f"{[i.name for i in inputs]}")
        inp = inputs[0]
        if len(inp.shape) != 4 or (isinstance(inp.shape[1], int) and inp.shape[1] != 3):
            raise TextdetError(f"{path}: input {inp.name!r} has shape {inp.shape}; a DB-style detector takes "
                               "images (N, 3, H, W)")
        if inp.type not in ("tensor(float)", "tensor(float16)"):
            raise TextdetError(f"{path}: input {inp.name!r} is {inp.type}; expected float images")
        out = next((o for o in outputs if o.name == OUTPUT_NAME), outputs[0])
        channels = out.shape[1] if len(out.shape) == 4 else 1
        if len(out.shape) not in (3, 4) or (isinstance(channels, int) and channels != 1):
            raise TextdetError(f"{path}: output {out.name!r} has shape {out.shape}; expected a probability "
                               "map (N, 1, H, W) or (N, H, W)")
        self.input_name, self.output_name = inp.name, out.name
        self.input_dtype = np.float16 if inp.type == "tensor(float16)" else np.float32
        self.fixed_batch = inp.shape[0] if isinstance(inp.shape[0], int) and inp.shape[0] > 0 else None
        h, w = inp.shape[2], inp.shape[3]
        self.fixed_hw = (h, w) if isinstance(h, int) and isinstance(w, int) and h > 0 and w > 0 else None
        self.providers = self.session.get_providers()

    def run(self, images: np.ndarray) -> np.ndarray:
        """float32 (N, 3, H, W) -> float32 (N, 1, H, W) probabilities."""
        if self.fixed_hw is not None and tuple(images.shape[2:]) != self.fixed_hw:
            raise TextdetError(f"{self.path} takes {self.fixed_hw[0]}x{self.fixed_hw[1]} (HxW) inputs only, "
                               f"got {images.shape[2]}x{images.shape[3]}; resize to that size "
                               "(DetResize target_size)")
        if self.fixed_batch == 1 and images.shape[0] > 1:
            return np.concatenate([self.run(images[i : i + 1]) for i in range(images.shape[0])])
        if self.fixed_batch is not None and images.shape[0] != self.fixed_batch:
            raise TextdetError(f"{self.path} takes batches of exactly {self.fixed_batch} images, got "
                               f"{images.shape[0]}")
        x = np.ascontiguousarray(images, dtype=self.input_dtype)
        try:
            out = self.session.run([self.output_name], {self.input_name: x})[0]
        except Exception as e:  # onnxruntime's own exception types: name the model and the input
            raise TextdetError(f"{self.path}: onnxruntime failed on an input of shape "
                               f"{x.shape}: {e}") from None
        prob = np.asarray(out, dtype=np.float32)
        return prob[:, None] if prob.ndim == 3 else prob

    @classmethod
    def from_torch(cls, model: nn.Module, name: str = "the model, run by ONNX Runtime") -> OnnxModel:
        """``model`` (a DBNet) traced in memory and run on the CPU with as many threads as torch uses."""
        buffer = io.BytesIO()
        try:
            trace_to_onnx(model, buffer, *TRACE_HW)
        except Exception as e:  # the exporter raises many types; the user's way out is the same for all
            first_line = (str(e).strip().splitlines() or [""])[0]  # the exporter may append the whole graph
            raise TextdetError(f"could not trace the model to run it in ONNX Runtime ({type(e).__name__}: "
                               f"{first_line}); set system.infer_runtime: torch to run it in PyTorch") from e
        return cls(name, device="cpu", model_bytes=buffer.getvalue(), threads=torch.get_num_threads())

    def __call__(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"binary": torch.from_numpy(self.run(images.detach().float().cpu().numpy()))}

    def eval(self) -> OnnxModel:
        return self

    def train(self, mode: bool = True) -> OnnxModel:
        return self

    def __repr__(self) -> str:
        return (f"OnnxModel({self.path!r}, input={self.input_name!r}, output={self.output_name!r}, "
                f"{self.providers})")


def onnxruntime():
    """The onnxruntime module, or an error saying how to install it."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise TextdetError("onnxruntime is not installed: pip install onnxruntime "
                           "(or onnxruntime-gpu)") from None
    return ort


def onnxruntime_installed() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True
