"""system.amp_dtype: bf16 where the device supports it, fp16 otherwise; loss scaling only with fp16. The device's
capability is torch's ``is_bf16_supported``, replaced here by a fake answer (no GPU on the test machine)."""

from __future__ import annotations

import pytest
import torch

from textdet import device
from textdet.config import load_config
from textdet.engine.amp import LossScaler, amp_settings
from textdet.errors import ConfigError


@pytest.fixture()
def cuda_bf16(monkeypatch):
    """Set what ``torch.cuda.is_bf16_supported()`` answers (A100/H100: True, V100/T4: False)."""
    def set_answer(answer: bool) -> None:
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: answer)

    return set_answer


def _scaler(level: str, kind: str, amp_dtype: str | None = None) -> LossScaler:
    """The trainer's scaler: enabled exactly when the settings need scaling (``Trainer._build_optimisation``)."""
    amp = amp_settings(level, kind, amp_dtype)
    return LossScaler(amp.needs_scaling, dynamic=True, scale=512)


def test_the_default_is_bf16_where_the_device_has_it_and_then_no_loss_scaling(cuda_bf16):
    cuda_bf16(True)
    assert amp_settings("O2", "cuda").dtype == torch.bfloat16
    assert not _scaler("O2", "cuda").enabled
    assert _scaler("O2", "cuda").scale == 1.0
    cuda_bf16(False)
    assert amp_settings("O2", "cuda").dtype == torch.float16
    assert _scaler("O2", "cuda").enabled
    assert _scaler("O2", "cuda").scale == 512.0
    assert amp_settings("O1", "cpu").dtype == torch.bfloat16  # the CPU always has bf16 (emulated or native)
    assert amp_settings("O0", "cpu").dtype is None


def test_a_chosen_half_type_wins_and_bf16_without_support_is_an_error(cuda_bf16):
    cuda_bf16(True)
    assert amp_settings("O2", "cuda", "fp16").dtype == torch.float16
    assert _scaler("O2", "cuda", "fp16").enabled
    assert amp_settings("O2", "cpu", "fp16").needs_scaling
    assert amp_settings("O0", "cuda", "fp16").dtype is None  # O0 stays fp32 whatever the half type
    cuda_bf16(False)
    with pytest.raises(ConfigError, match="system.amp_dtype: bf16, but this cuda device has no bf16 support.*fp16"):
        amp_settings("O2", "cuda", "bf16")


def test_devices_without_a_bf16_query_default_to_fp16():
    """torch.mps has no ``is_bf16_supported``; a CPU-only torch answers False for CUDA."""
    assert not device.supports_bf16("mps")
    assert not device.supports_bf16("cuda")
    assert amp_settings("O2", "mps").dtype == torch.float16


def test_the_config_key_takes_bf16_or_fp16_only():
    assert load_config(None, ["system.amp_dtype=fp16"]).system.amp_dtype == "fp16"
    assert load_config(None).system.amp_dtype is None
    with pytest.raises(ConfigError, match=r"'system.amp_dtype' must be one of \['bf16', 'fp16', None\], got 'fp32'"):
        load_config(None, ["system.amp_dtype=fp32"])
