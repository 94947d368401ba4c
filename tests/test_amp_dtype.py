"""system.amp_dtype: bf16 where the device supports it, fp16 otherwise; loss scaling only with fp16. The device's
capability is torch's ``is_bf16_supported``, replaced here by a fake answer (no GPU on the test machine)."""

from __future__ import annotations

import pytest
import torch

from textdet import device
from textdet.build.parts import inference_amp
from textdet.config import load_config
from textdet.errors import ConfigError
from textdet.runtime.amp import LossScaler, amp_settings


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


@pytest.fixture()
def cpu_bf16(monkeypatch):
    """Set what ``device.cpu_bf16_fast()`` answers (True: AVX512-BF16 or AMX in /proc/cpuinfo)."""
    def set_answer(answer: bool) -> None:
        monkeypatch.setattr(device, "cpu_bf16_fast", lambda: answer)

    return set_answer


def test_auto_is_fp32_on_a_cpu_that_would_emulate_bf16_and_o2_where_half_is_native(cpu_bf16, cuda_bf16):
    cpu_bf16(False)
    amp = amp_settings("auto", "cpu")
    assert (amp.level, amp.dtype) == ("O0", None)
    assert amp.describe().startswith("O0, amp_level auto: fp32, as this CPU shows no AVX512-BF16 or AMX")
    cpu_bf16(True)
    amp = amp_settings("auto", "cpu")
    assert (amp.level, amp.dtype) == ("O2", torch.bfloat16)
    assert amp.describe() == "O2 (bfloat16), amp_level auto: this CPU has native bf16 (AVX512-BF16 or AMX)"
    amp = amp_settings("auto", "cpu", "fp16")  # a half type CPUs emulate: fp32 even where bf16 is native
    assert (amp.level, amp.dtype) == ("O0", None)
    cuda_bf16(False)
    amp = amp_settings("auto", "cuda")
    assert (amp.level, amp.dtype, amp.needs_scaling) == ("O2", torch.float16, True)


def test_bf16_autocast_on_a_cpu_without_native_bf16_is_named_in_a_warning(cpu_bf16, caplog):
    """An explicit O1-O3 is kept (it is the config's choice), with the way to fp32 in the log."""
    cpu_bf16(False)
    with caplog.at_level("WARNING", logger="textdet"):
        assert amp_settings("O2", "cpu").dtype == torch.bfloat16
    assert "system.amp_level O2: no AVX512-BF16 or AMX was found on this CPU" in caplog.text
    assert "-o system.amp_level=O0 computes in fp32" in caplog.text
    caplog.clear()
    cfg = load_config(None, ["system.amp_level=auto", "system.amp_level_infer=O1"])
    with caplog.at_level("WARNING", logger="textdet"):
        assert inference_amp(cfg, "cpu").dtype == torch.bfloat16
    assert "system.amp_level_infer O1: no AVX512-BF16" in caplog.text  # the key that asked for it
    assert "-o system.amp_level_infer=O0 computes in fp32" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="textdet"):
        amp_settings("O2", "cpu", "fp16")  # fp16 is what was asked for: no bf16 to warn about
        cpu_bf16(True)
        amp_settings("O2", "cpu")
    assert caplog.text == ""


def test_auto_is_a_training_level_only():
    assert load_config(None, ["system.amp_level=auto"]).system.amp_level == "auto"
    choices = r"'system.amp_level_infer' must be one of \['O0', 'O1', 'O2', 'O3'\]"
    with pytest.raises(ConfigError, match=choices):
        load_config(None, ["system.amp_level_infer=auto"])


def test_the_built_in_recipe_trains_in_fp32_on_a_cpu_without_native_bf16(cpu_bf16, synth_root, tmp_path):
    """`textdet train` with no -c: its amp_level auto resolves in the Trainer, on the device it runs on."""
    from conftest import RECIPE, tiny_overrides
    from textdet.build.training import build_trainer

    opts = [o for o in tiny_overrides(synth_root, str(tmp_path / "run")) if not o.startswith("system.amp_level=")]
    for fast, level in ((False, "O0"), (True, "O2")):
        cpu_bf16(fast)
        trainer = build_trainer(load_config(RECIPE, opts), device="cpu", progress=False, dry_run=True)
        assert trainer.amp.level == level
        assert trainer.amp.describe().startswith(f"{level}")
        assert "amp_level auto" in trainer.amp.describe()  # the recipe's own value, not an override
