"""MindSpore ``.ckpt`` files (MindOCR, mindcv) read without MindSpore, and their names mapped to ours.

The file is consecutive protobuf ``Checkpoint`` messages (+ optional 17-byte crc trailer; format in
docs/decisions/mindspore-checkpoints.md). The reader is bounded: every declared length is checked against the
bytes left before slicing, and data are views, so a malformed file fails fast with the offset.
"""

from __future__ import annotations

import math
import os
import re

import numpy as np
import torch

from textdet.errors import ConfigError

MS_DTYPES = {"Float16": np.float16, "Float32": np.float32, "Float64": np.float64, "Int8": np.int8, "UInt8": np.uint8,
             "Int16": np.int16, "UInt16": np.uint16, "Int32": np.int32, "UInt32": np.uint32, "Int64": np.int64,
             "UInt64": np.uint64, "Bool": np.bool_}
_BN = {"gamma": "weight", "beta": "bias", "moving_mean": "running_mean", "moving_variance": "running_var"}
# MindOCR module names that differ from ours; BatchNorm parameters are renamed through _BN.
_RENAMES = ((re.compile(r"\.down_sample\."), ".downsample."), (re.compile(r"^neck\.fuse\."), "neck.asf."))
# Training state that MindSpore optimizers and MindOCR's callbacks store beside the weights.
_TRAINING_STATE = re.compile(
    r"^(moments|accum|adam_[mv]|moment[12]|ema|scale_sense|global_step|learning_rate|beta[12]_power|epoch_num|"
    r"step_num|cur_step|cur_epoch|loss_scale|momentum|weight_decay|current_iterator_step|last_overflow_iterator_step)"
    r"(\.|$)"
)
_TRAILER = 17  # b"crc_num" + 10-byte big-endian crc32


class MsCheckpointError(ConfigError):
    """A file that is not a readable MindSpore checkpoint; the message names the file and the offset."""


def is_ms_checkpoint(path: str | os.PathLike) -> bool:
    """True for a protobuf-looking file (field 1, length-delimited); False for torch zip / pickle files."""
    with open(path, "rb") as f:
        return f.read(1) == b"\x0a"


def _varint(buf: memoryview, pos: int, end: int, path: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise MsCheckpointError(f"{path}: truncated or malformed varint at byte {pos}; not a MindSpore .ckpt?")
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        shift += 7
        if byte < 0x80:
            return value, pos


def _fields(buf: memoryview, pos: int, end: int, path: str):
    """Yield (field number, wire type, value) over [pos, end); value is an int or a (start, stop) span."""
    while pos < end:
        key, pos = _varint(buf, pos, end, path)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos, end, path)
        elif wire == 2:
            size, pos = _varint(buf, pos, end, path)
            if size > end - pos:
                raise MsCheckpointError(
                    f"{path}: field at byte {pos} declares {size} bytes but only {end - pos} remain (truncated file?)")
            value, pos = (pos, pos + size), pos + size
        else:  # checkpoint.proto has only varints and length-delimited fields
            raise MsCheckpointError(f"{path}: wire type {wire} at byte {pos} is not valid here; not a MindSpore .ckpt?")
        yield number, wire, value


def _tensor(buf: memoryview, span: tuple[int, int], path: str, tag: str) -> tuple[list[int], str, memoryview]:
    dims: list[int] = []
    dtype, content = "", buf[0:0]
    for number, wire, value in _fields(buf, *span, path):
        if number == 1 and wire == 0:  # proto2 repeated int64: one field per dim
            dims.append(value)
        elif number == 2 and wire == 2:
            dtype = bytes(buf[value[0] : value[1]]).decode("utf-8", "replace")
        elif number == 3 and wire == 2:
            content = buf[value[0] : value[1]]
    return dims, dtype, content


def read_ms_checkpoint(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], list[str]]:
    """All tensors of a MindSpore checkpoint, by tag, and the tags that are not tensors (strings, map tensors).

    Raises MsCheckpointError (truncated/malformed data, unknown dtype, dims mismatch) naming file, tag or offset.
    """
    path = str(path)
    with open(path, "rb") as f:
        data = f.read()
    end = len(data) - _TRAILER if data[-_TRAILER:-10] == b"crc_num" else len(data)
    buf = memoryview(data)
    parts: dict[str, list] = {}
    skipped: list[str] = []
    for number, wire, span in _fields(buf, 0, end, path):
        if number != 1 or wire != 2:
            raise MsCheckpointError(f"{path}: unexpected field {number} at top level; not a MindSpore .ckpt?")
        tag, tensor = None, None
        for n, w, v in _fields(buf, *span, path):
            if n == 1 and w == 2:
                tag = bytes(buf[v[0] : v[1]]).decode("utf-8", "replace")
            elif n == 2 and w == 2:
                tensor = v
        if tag is None:
            raise MsCheckpointError(f"{path}: a value at byte {span[0]} has no name; not a MindSpore .ckpt?")
        if tensor is None:
            skipped.append(tag)
            continue
        dims, dtype, content = _tensor(buf, tensor, path, tag)
        if dtype == "str":
            skipped.append(tag)
            continue
        if dtype not in MS_DTYPES:
            raise MsCheckpointError(f"{path}: '{tag}' has tensor type {dtype!r}; known: {', '.join(MS_DTYPES)}")
        parts.setdefault(tag, [dims, dtype, []])[2].append(content)
    if not parts and not skipped:
        raise MsCheckpointError(f"{path}: no tensors found; not a MindSpore .ckpt?")
    tensors = {}
    for tag, (dims, dtype, chunks) in parts.items():
        raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if len(raw) % np.dtype(MS_DTYPES[dtype]).itemsize:
            raise MsCheckpointError(f"{path}: '{tag}': {len(raw)} bytes is not a whole number of {dtype} values")
        array = np.frombuffer(raw, dtype=MS_DTYPES[dtype])
        shape = () if dims in ([], [0]) and array.size == 1 else tuple(dims)
        if math.prod(shape) != array.size:
            raise MsCheckpointError(f"{path}: '{tag}' declares shape {list(dims)} but holds {array.size} values")
        tensors[tag] = torch.from_numpy(array.reshape(shape).copy())
    return tensors, skipped


def mindspore_to_torch_names(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Rename MindOCR/mindcv parameters to textdet's; returns (weights, training-state tags left out).

    BatchNorm gamma/beta/moving_* -> weight/bias/running_*; ``down_sample`` -> ``downsample``; ``neck.fuse``
    -> ``neck.asf``; a ``network.`` prefix is dropped. Optimizer/EMA/step tags are returned separately.
    """
    weights, training = {}, []
    for tag, value in state.items():
        key = tag.removeprefix("network.")
        if _TRAINING_STATE.match(key):
            training.append(tag)
            continue
        stem, _, leaf = key.rpartition(".")
        key = f"{stem}.{_BN.get(leaf, leaf)}" if stem else key
        for pattern, repl in _RENAMES:
            key = pattern.sub(repl, key)
        weights[key] = value
    return weights, training
