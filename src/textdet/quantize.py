"""int8 ONNX models: ONNX Runtime's static quantization of an exported DBNet, calibrated on photos read as the
model reads them. QDQ format with per-channel int8 weights and uint8 activations, so the model keeps its
float32 input and output, PP-OCR's det interface. Two choices keep the f-score
(docs/decisions/int8-export.md): a transposed convolution's output channels are its weights' axis 1, not 0 as
a convolution's (quantized along axis 0, the head's upsampling layers blurred the map); and each activation's
range is the mean of its range on each photo, not the widest of all (one photo's outliers coarsened every
step). The command scores the result before it keeps it (``commands/deploy.py``)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence

import numpy as np

from textdet.data.decode import DecodeImage
from textdet.errors import TextdetError
from textdet.runtime.onnx_model import INPUT_NAME, onnxruntime

QUANTIZED_OPSET = 13  # per-channel DequantizeLinear needs opset 13
# Each op type's output-channel axis in its weights, for per-channel scales (Conv's is 0, the default).
CHANNEL_AXIS = {"ConvTranspose": 1}


class CalibrationPhotos:
    """Photos for ONNX Runtime's calibrator, one at a time: ``preprocess`` turns an RGB uint8 photo into the
    model's (3, H, W) float32 input (the config's evaluation preprocessing)."""

    def __init__(self, paths: Sequence[str], preprocess: Callable[[np.ndarray], tuple]) -> None:
        self.paths = list(paths)
        self.preprocess = preprocess
        self.decode = DecodeImage(img_mode="RGB")
        self.position = 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self.position >= len(self.paths):
            return None
        rgb = self.decode({"img_path": self.paths[self.position]}, None)["image"]
        image, _ = self.preprocess(rgb)
        self.position += 1
        return {INPUT_NAME: np.ascontiguousarray(image[None], dtype=np.float32)}

    def rewind(self) -> None:
        self.position = 0


def quantize_int8(fp32_path: str, out_path: str, photos: CalibrationPhotos) -> None:
    """Write the int8 version of ``fp32_path`` (a DB-style ONNX model) to ``out_path``, calibrated on
    ``photos``."""
    onnxruntime()  # a clear error when it is not installed
    try:
        import onnx
    except ImportError:
        raise TextdetError("int8 export needs the onnx package: pip install onnx") from None
    from onnx import version_converter
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quant_pre_process,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def get_next(self) -> dict | None:
            return photos.get_next()

    if len(photos.paths) < 1:
        raise TextdetError("int8 calibration needs photos: none were found")
    with tempfile.TemporaryDirectory() as tmp:
        converted = os.path.join(tmp, "opset.onnx")
        prepared = os.path.join(tmp, "prepared.onnx")
        model = onnx.load(fp32_path)
        opset = max((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")),
                    default=0)
        if opset < QUANTIZED_OPSET:
            model = version_converter.convert_version(model, QUANTIZED_OPSET)
        onnx.save(model, converted)
        # shape inference and ONNX Runtime's graph optimisation (BatchNorm folded into its convolution)
        quant_pre_process(converted, prepared, skip_symbolic_shape=True)
        quantized = os.path.join(tmp, "quantized.onnx")
        photos.rewind()
        # CalibMovingAverage: each range is the mean of the photos' ranges (all in one batch: no running
        # average)
        quantize_static(prepared, quantized, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        extra_options={"CalibMovingAverage": True,
                                       "QDQOpTypePerChannelSupportToAxis": CHANNEL_AXIS})
        onnx.save(short_names(onnx.load(quantized)), out_path)


def short_names(model):
    """``model`` with its inner tensors and nodes named t0, t1, ... (the input and output keep theirs): the
    quantizer's long generated names were a fifth of the file."""
    graph = model.graph
    kept = {value.name for value in graph.input} | {value.name for value in graph.output}
    renamed: dict[str, str] = {}

    def short(name: str) -> str:
        if not name or name in kept:
            return name
        if name not in renamed:
            renamed[name] = f"t{len(renamed)}"
        return renamed[name]

    for tensor in graph.initializer:
        tensor.name = short(tensor.name)
    for node in graph.node:
        node.input[:] = [short(name) for name in node.input]
        node.output[:] = [short(name) for name in node.output]
        node.name = ""
    del graph.value_info[:]  # shapes ONNX Runtime infers again
    return model
