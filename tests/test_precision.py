"""Mixed precision and devices: O3's master weights, non-finite steps skipped and bounded, device
selection with the accelerator's availability patched."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os

import pytest
import torch

from conftest import RECIPE, tiny_overrides
from textdet import device
from textdet.build.training import build_trainer
from textdet.config import load_config
from textdet.engine.trainer import Trainer
from textdet.errors import TextdetError, TrainingDiverged
from textdet.runtime.amp import amp_settings


def _trainer(synth_root: str, run_dir: str, **overrides) -> Trainer:
    cfg = load_config(RECIPE, tiny_overrides(synth_root, run_dir, **overrides))
    return build_trainer(cfg, device="cpu", progress=False)


# ------------------------------------------------------------------------------------------- O3
def test_o3_keeps_fp32_master_weights_so_a_1e4_update_survives(caplog):
    """bf16 rounds 1 + 1e-4 back to 1 (its step is 2^-7); O3 runs as O2, so weights stay fp32 and the
    update lands (SGD, lr 1e-4, gradient = the weight: w -> w (1 - 1e-4))."""
    with caplog.at_level(logging.INFO, logger="textdet"):
        amp = amp_settings("O3", "cpu")
    assert amp.dtype == torch.bfloat16 and "O3 runs as O2" in caplog.text
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 4)
    w0 = layer.weight.detach().clone()
    opt = torch.optim.SGD(layer.parameters(), lr=1e-4)
    with amp.context():
        out = layer(torch.zeros(1, 4))
    assert out.dtype == torch.bfloat16  # the forward is half precision ...
    layer.weight.grad = layer.weight.detach().clone()
    opt.step()
    assert layer.weight.dtype == torch.float32  # ... the weights are not
    torch.testing.assert_close(layer.weight.detach(), w0 * (1 - 1e-4), rtol=1e-6, atol=0)
    assert torch.equal((w0.bfloat16() * (1 - 1e-4)).bfloat16(), w0.bfloat16())  # what half weights would keep


# ----------------------------------------------------------------------------------- non-finite steps
def _nan_at(steps: set[int]):
    real = Trainer.train_step

    def train_step(self, batch, sync):
        if self.global_step in steps:
            batch = {**batch, "image": batch["image"] * float("nan")}
        return real(self, batch, sync)

    return train_step


def _all_finite(state: dict) -> bool:
    return all(torch.isfinite(v).all() for v in state.values() if torch.is_tensor(v) and v.is_floating_point())


@pytest.mark.slow
def test_nan_batch_is_skipped_counted_and_logged(synth_root, tmp_path, monkeypatch):
    run = str(tmp_path / "nan")
    monkeypatch.setattr(Trainer, "train_step", _nan_at({2}))
    t = _trainer(synth_root, run, **{"scheduler.num_epochs": 1, "system.val_while_train": False})
    before = {k: v.clone() for k, v in t.model.state_dict().items()}
    record = t.fit()
    assert record["skipped_steps"] == 1 and t.global_step == 6 and t.bad_run == 0
    assert record["loss"] == record["loss"]  # the NaN step is not in the epoch mean
    state = t.model.state_dict()
    assert _all_finite(state)  # weights and BatchNorm statistics
    assert any(not torch.equal(before[k], state[k]) for k in state)  # the 5 good steps trained
    log = open(os.path.join(run, "train.log")).read()
    assert "epoch 1 step 3: non-finite loss or gradients, step skipped (1 in a row)" in log
    assert "skipped steps (non-finite): 1" in log
    assert json.loads(open(os.path.join(run, "metrics.jsonl")).readline())["skipped_steps"] == 1


@pytest.mark.slow
def test_consecutive_bad_steps_stop_with_last_good_checkpoint_intact(synth_root, tmp_path, monkeypatch):
    run = str(tmp_path / "diverged")
    monkeypatch.setattr(Trainer, "train_step", _nan_at(set(range(6, 100))))  # all of epoch 2
    t = _trainer(synth_root, run, **{"scheduler.num_epochs": 2, "train.max_bad_steps": 3,
                                     "system.val_while_train": False})
    real_save = Trainer.save
    digests = []

    def save_and_hash(self, *args):
        real_save(self, *args)
        digests.append(hashlib.sha256(open(os.path.join(run, "train_resume.ckpt"), "rb").read()).hexdigest())

    monkeypatch.setattr(Trainer, "save", save_and_hash)
    with pytest.raises(TrainingDiverged) as err:
        t.fit()
    msg = str(err.value)
    assert "epoch 2 step 3: 3 optimizer steps in a row had a non-finite loss" in msg
    assert "train.max_bad_steps=3" in msg and "the last good checkpoint is " in msg and "clip_grad" in msg
    assert len(digests) == 1  # epoch 1 saved, nothing after
    data = open(os.path.join(run, "train_resume.ckpt"), "rb").read()
    assert hashlib.sha256(data).hexdigest() == digests[0]
    ck = torch.load(os.path.join(run, "train_resume.ckpt"), weights_only=False)
    assert ck["epoch"] == 1 and _all_finite(ck["model"]) and _all_finite(t.model.state_dict())


# ----------------------------------------------------------------------------------------- devices
@pytest.fixture()
def fake_accelerator(monkeypatch):
    """Pretend torch sees ``count`` devices of ``kind``."""

    def install(kind: str, count: int = 2):
        monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
        monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a, **k: torch.device(kind))
        monkeypatch.setattr(torch.accelerator, "device_count", lambda: count)

    return install


def test_default_device_is_the_local_ranks_accelerator(fake_accelerator, monkeypatch):
    assert device.pick_device(None) == torch.device("cpu")  # nothing patched: this machine
    for kind in ("cuda", "xpu", "mps"):  # "npu" is a torch device type only once torch_npu is imported
        fake_accelerator(kind)
        monkeypatch.setenv("LOCAL_RANK", "1")
        assert device.pick_device(None) == torch.device(kind, 1)
        assert device.pick_device(f"{kind}:0") == torch.device(kind, 0)
        assert device.is_accelerator(torch.device(kind)) and not device.is_accelerator(torch.device("cpu"))


def test_bad_device_names_say_what_to_do(fake_accelerator):
    with pytest.raises(TextdetError, match="no cuda device is available here .*use --device cpu"):
        device.pick_device("cuda:0")
    with pytest.raises(TextdetError, match="expected cpu, cuda"):
        device.pick_device("gpu7")
    if importlib.util.find_spec("torch_npu") is None:
        with pytest.raises(TextdetError, match="needs the torch_npu package .*pip install torch-npu"):
            device.pick_device("npu:0")
    fake_accelerator("cuda", count=2)
    with pytest.raises(TextdetError, match="only 2 cuda device"):
        device.pick_device("cuda:2")


def test_half_dtype_and_distributed_backend_follow_the_device(monkeypatch):
    assert amp_settings("O2", "cpu").dtype == torch.bfloat16
    monkeypatch.setattr(device, "supports_bf16", lambda kind: kind == "cpu")  # accelerators without bf16: fp16
    for kind in ("cuda", "npu", "xpu", "mps"):
        assert amp_settings("O1", kind).dtype == torch.float16 and amp_settings("O2", kind).needs_scaling
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: True)
    assert [device.dist_backend(k) for k in ("cuda", "npu", "xpu", "cpu", "mps")] == [
        "nccl", "hccl", "xccl", "gloo", "gloo"]
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: False)
    assert device.dist_backend("cuda") == "gloo"


def test_onnx_runtime_providers_per_device():
    cpu_only, with_cuda = ["CPUExecutionProvider"], ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert device.ort_providers(None, cpu_only) == ["CPUExecutionProvider"]
    assert device.ort_providers(None, with_cuda) == with_cuda
    assert device.ort_providers("cuda:1", with_cuda) == [("CUDAExecutionProvider", {"device_id": 1}),
                                                         "CPUExecutionProvider"]
    assert device.ort_providers("cpu", with_cuda) == ["CPUExecutionProvider"]
    with pytest.raises(TextdetError, match="no CANNExecutionProvider"):
        device.ort_providers("npu", with_cuda)
    with pytest.raises(TextdetError, match="expected cpu, cuda or cuda:N, npu or npu:N"):
        device.ort_providers("mps", with_cuda)


def test_no_vendor_names_outside_the_device_module():
    src = os.path.join(os.path.dirname(__file__), "..", "src", "textdet")
    offenders = []
    for folder, _, files in os.walk(src):
        for name in files:
            path = os.path.join(folder, name)
            if name.endswith(".py") and name not in ("device.py", "__init__.py"):
                text = open(path).read()
                if "torch.cuda" in text or '"cuda"' in text or ".is_cuda" in text:
                    offenders.append(os.path.relpath(path, src))
    assert offenders == []

