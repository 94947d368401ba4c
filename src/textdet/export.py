"""ONNX export of a DBNet, and the check that ONNX Runtime gives PyTorch's boxes.
The graph is the eval-mode model's probability map: input ``x`` float32 (N, 3, H, W) normalised as the config's
pipeline does, output ``binary`` (N, 1, H, W), batch/H/W dynamic (multiples of 32): PP-OCR's det interface too."""

from __future__ import annotations

import os
from collections.abc import Callable

import cv2
import numpy as np
import torch
from torch import nn

from textdet.errors import TextdetError
from textdet.export_defaults import DEFAULT_EXPORT_HW, DEFAULT_OPSET
from textdet.models.dbnet import INPUT_DIVISOR
from textdet.runtime.onnx_model import OnnxModel, trace_to_onnx

MAX_ABS_DIFF = 1e-3  # ONNX Runtime vs PyTorch probability maps, fp32
BOX_TOLERANCE_PX = 1.0  # a pixel exactly at binary_thresh may flip and move a rounded corner by 1 px


def export_onnx(model: nn.Module, path: str, height: int = DEFAULT_EXPORT_HW[0], width: int = DEFAULT_EXPORT_HW[1],
                opset: int = DEFAULT_OPSET) -> str:
    """Trace ``model`` (eval mode) on a (1, 3, H, W) input into ``path``, written to a temp file and renamed;
    batch, H, W dynamic, output ``binary``."""
    for name, v in (("height", height), ("width", width)):
        if v < INPUT_DIVISOR or v % INPUT_DIVISOR:
            raise TextdetError(f"--{name} {v}: must be a positive multiple of {INPUT_DIVISOR}")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".tmp_{os.path.basename(path)}")
    try:
        trace_to_onnx(model, tmp, height, width, opset)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
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
