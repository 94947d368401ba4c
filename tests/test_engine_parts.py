"""Engine building blocks with hand-computed answers: LR schedules, param groups, EMA, scaler, checkpoints."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch
from torch import nn

from textdet.data.dataset import EpochSampler, collate
from textdet.engine.ema import ModelEMA
from textdet.engine.finetune import freeze_parts, keep_frozen_in_eval_mode
from textdet.engine.optim import build_optimizer, build_optimizer_in_background, load_optimizer_state, param_groups
from textdet.engine.retention import EpochCheckpoints
from textdet.engine.schedule import LRSchedule
from textdet.engine.train_eval import TrainEvaluation
from textdet.errors import ConfigError, TextdetError
from textdet.runtime.amp import LossScaler, amp_settings
from textdet.runtime.checkpoint import atomic_save, load_checkpoint


def test_polynomial_with_warmup_matches_hand_values():
    # 10 steps/epoch, 10 epochs, warmup 2: linear 0 -> lr over steps 0..19, then (1 - t/8)^0.9 decay
    s = LRSchedule("polynomial_decay", 0.01, 10, 10, warmup_epochs=2, min_lr=0.0, decay_rate=0.9)
    assert s(0) == 0.0
    assert s(5) == pytest.approx(0.01 * 5 / 20)
    assert s(20) == pytest.approx(0.01)
    assert s(60) == pytest.approx(0.01 * (1 - 4 / 8) ** 0.9)
    assert s(100) == pytest.approx(0.0)


def test_cosine_and_step_schedules():
    c = LRSchedule("cosine_decay", 1.0, 1, 20, warmup_epochs=0, min_lr=0.0, decay_epochs=10)
    assert c(0) == pytest.approx(1.0) and c(5) == pytest.approx(0.5) and c(10) == 0.0 and c(15) == 0.0
    st = LRSchedule("step_decay", 1.0, 2, 10, warmup_epochs=0, decay_epochs=3, decay_rate=0.5)
    assert st(5) == 1.0 and st(6) == 0.5 and st(12) == 0.25
    ms = LRSchedule("multi_step_decay", 1.0, 1, 10, warmup_epochs=0, milestones=[2, 5], decay_rate=0.1)
    assert ms(1) == 1.0 and ms(2) == pytest.approx(0.1) and ms(6) == pytest.approx(0.01)
    stair = LRSchedule("polynomial_decay", 1.0, 4, 4, warmup_epochs=0, min_lr=0.0, decay_rate=1.0,
                       lr_epoch_stair=True)
    assert stair(5) == stair(4) == pytest.approx(0.75)


def test_warmup_longer_than_run_is_reported():
    s = LRSchedule("polynomial_decay", 0.007, 100, 1, warmup_epochs=3)
    (msg,) = s.warnings()
    assert "whole run is warm-up" in msg


def test_unknown_schedule_lists_valid():
    with pytest.raises(ConfigError, match="valid: constant"):
        LRSchedule("cosine", 0.1, 1, 1)


def test_filter_bias_and_bn():
    m = nn.Sequential(nn.Conv2d(3, 4, 3, bias=True), nn.BatchNorm2d(4))
    decay, no_decay = param_groups(m, 1e-4, filter_bias_and_bn=True)
    assert [p.shape for p in decay["params"]] == [torch.Size([4, 3, 3, 3])]
    assert len(no_decay["params"]) == 3 and no_decay["weight_decay"] == 0.0
    (only,) = param_groups(m, 1e-4, filter_bias_and_bn=False)
    assert len(only["params"]) == 4
    opt = build_optimizer(m, "SGD", 0.1, weight_decay=1e-4, momentum=0.9)
    assert isinstance(opt, torch.optim.SGD) and opt.defaults["momentum"] == 0.9


class _TwoParts(nn.Module):
    """A backbone and a head, as DBNet's top-level parts are named."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 4, 3, bias=True), nn.BatchNorm2d(4))
        self.head = nn.Conv2d(4, 1, 1, bias=True)


def test_lr_mult_splits_groups_by_part_and_keeps_the_old_order_without_it():
    m = _TwoParts()
    plain = param_groups(m, 1e-4, filter_bias_and_bn=True)
    summary = [(len(g["params"]), g["weight_decay"], g["lr_mult"]) for g in plain]
    assert summary == [(2, 1e-4, 1.0), (4, 0.0, 1.0)]
    groups = param_groups(m, 1e-4, filter_bias_and_bn=True, lr_mult={"backbone": 0.1})
    # decayed: head conv weight (x1), backbone conv weight (x0.1); then the 1-D ones: head bias, backbone's 3
    assert [(len(g["params"]), g["weight_decay"], g["lr_mult"]) for g in groups] == [
        (1, 1e-4, 1.0), (1, 1e-4, 0.1), (1, 0.0, 1.0), (3, 0.0, 0.1)]
    assert groups[1]["params"][0] is m.backbone[0].weight


def test_lr_mult_names_the_parts_when_one_is_unknown_or_its_factor_is_negative():
    with pytest.raises(ConfigError, match="'backbon' is not a part of the model; parts: backbone, head"):
        param_groups(_TwoParts(), 0.0, True, lr_mult={"backbon": 0.1})
    with pytest.raises(ConfigError, match="optimizer.lr_mult.head: expected a factor >= 0, got -1"):
        param_groups(_TwoParts(), 0.0, True, lr_mult={"head": -1})


def test_freeze_takes_a_dotted_path_to_the_first_stages_only():
    """train.freeze: [backbone.0] freezes the backbone's conv and keeps it in eval mode after model.train();
    the backbone's BatchNorm and the head still learn; an unknown name lists the parts at its level."""
    m = _TwoParts()
    freeze_parts(m, ["backbone.0"])
    assert not any(p.requires_grad for p in m.backbone[0].parameters())
    assert all(p.requires_grad for p in m.backbone[1].parameters())
    assert all(p.requires_grad for p in m.head.parameters())
    m.train()
    keep_frozen_in_eval_mode(m, freeze_bn=False, parts=["backbone.0"])
    assert not m.backbone[0].training and m.backbone[1].training
    with pytest.raises(ConfigError, match=r"'backbone.2': backbone has no part '2'; its parts: 0, 1$"):
        freeze_parts(m, ["backbone.2"])
    with pytest.raises(ConfigError, match=r"'head.0': head has no part '0'; its parts: none$"):
        freeze_parts(m, ["head.0"])


def test_resumed_optimizer_keeps_the_configs_lr_mult_and_refuses_other_groups():
    """torch's load_state_dict brings back the saved hyper-parameters: a factor changed in the config since
    must win, and groups of other sizes (lr_mult added) are an error naming the file, not torch's
    ValueError."""
    m = _TwoParts()
    saved = build_optimizer(m, "adam", 1e-3, lr_mult={"backbone": 0.9}).state_dict()
    now = build_optimizer(m, "adam", 1e-3, lr_mult={"backbone": 0.5})
    load_optimizer_state(now, saved, "run/train_resume.ckpt")
    assert [g["lr_mult"] for g in now.param_groups] == [1.0, 0.5, 1.0, 0.5]
    plain = build_optimizer(m, "adam", 1e-3)
    with pytest.raises(ConfigError, match=r"run/train_resume.ckpt: its optimizer holds parameter groups of "
                                          r"\[1, 1, 1, 3\] tensors, this config makes \[2, 4\]"):
        load_optimizer_state(plain, saved, "run/train_resume.ckpt")


def test_optimizer_built_in_background_checks_its_name_at_once():
    """The thread builds the same optimizer; a misspelt name fails in the caller, before any thread starts."""
    m = nn.Sequential(nn.Conv2d(3, 4, 3, bias=True), nn.BatchNorm2d(4))
    opt = build_optimizer_in_background(m, "adamw", 0.01, weight_decay=1e-4).result(timeout=60)
    assert isinstance(opt, torch.optim.AdamW) and [g["weight_decay"] for g in opt.param_groups] == [1e-4, 0.0]
    assert sum(len(g["params"]) for g in opt.param_groups) == 4
    with pytest.raises(ConfigError, match="adamw"):
        build_optimizer_in_background(m, "adamx", 0.01)


def test_ema_ramp_and_state():
    m = nn.Linear(2, 1, bias=False)
    ema = ModelEMA(m, decay=0.9999, ramp=2000)
    with torch.no_grad():
        m.weight.fill_(1.0)
        ema.module.weight.fill_(0.0)
    ema.update(m)
    d = 0.9999 * (1 - math.exp(-1 / 2000))
    assert ema.module.weight[0, 0].item() == pytest.approx(1 - d)
    other = ModelEMA(m)
    other.load_state_dict(ema.state_dict())
    assert other.updates == 1 and torch.equal(other.module.weight, ema.module.weight)


def test_dynamic_loss_scaler():
    s = LossScaler(enabled=True, dynamic=True, scale=512, factor=2, window=2)
    p = torch.zeros(2, requires_grad=True)
    p.grad = torch.tensor([512.0, float("inf")])
    assert s.unscale_and_check([p], check=False) is True
    s.update(True)
    assert s.scale == 256
    s.update(False)
    s.update(False)
    assert s.scale == 512
    off = LossScaler(enabled=False, dynamic=True, scale=512)
    assert off.scale == 1.0 and off.scale_loss(torch.tensor(2.0)) == 2.0
    p.grad = torch.tensor([1.0, float("nan")])
    assert off.unscale_and_check([p], check=True) is True and off.unscale_and_check([p], check=False) is False


def test_amp_settings():
    assert amp_settings("O0", "cpu").dtype is None
    assert amp_settings("O2", "cpu").dtype == torch.bfloat16
    assert amp_settings("O1", "cuda").dtype == torch.float16 and amp_settings("O1", "cuda").needs_scaling


def test_atomic_save_leaves_no_partial_file(tmp_path, monkeypatch):
    path = str(tmp_path / "best.ckpt")
    atomic_save({"a": 1}, path)

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(TextdetError, match="could not write checkpoint .*: disk full; the previous one is intact"):
        atomic_save({"a": 2}, path)
    assert load_checkpoint(path, "x") == {"a": 1}
    assert sorted(os.listdir(tmp_path)) == ["best.ckpt"]


def test_epoch_checkpoints_top_k_and_latest_k(tmp_path):
    top = EpochCheckpoints(str(tmp_path / "top"), 2, "top_k")
    for epoch, metric in [(1, 0.5), (2, 0.9), (3, 0.1), (4, 0.7)]:
        top.save({"epoch": epoch}, epoch, metric)
    assert sorted(os.listdir(tmp_path / "top")) == ["e2.ckpt", "e4.ckpt"]
    latest = EpochCheckpoints(str(tmp_path / "latest"), 2, "latest_k")
    for epoch in range(1, 5):
        latest.save({"epoch": epoch}, epoch, 0.0)
    assert sorted(os.listdir(tmp_path / "latest")) == ["e3.ckpt", "e4.ckpt"]
    none = EpochCheckpoints(str(tmp_path / "none"), 0, "top_k")
    assert none.save({}, 1, 1.0) is None and not (tmp_path / "none").exists()


def test_sampler_shards_and_reshuffles():
    shards = [list(EpochSampler(10, True, seed=1, rank=r, world_size=3)) for r in range(3)]
    assert all(len(s) == 4 for s in shards)  # ceil(10/3), padded by wrapping
    indices = [i for s in shards for _, i in s]
    assert set(indices) == set(range(10))
    s = EpochSampler(10, True, seed=1)
    first = [i for _, i in s]
    s.set_epoch(1)
    second = list(s)
    assert second[0][0] == 1 and [i for _, i in second] != first
    evals = [list(EpochSampler(10, False, 0, rank=r, world_size=3, pad=False)) for r in range(3)]
    assert sorted(i for s in evals for _, i in s) == list(range(10))


def test_collate_stacks_maps_and_keeps_polygons_ragged():
    a = {"image": np.zeros((4, 4, 3), np.uint8), "polys": [np.zeros((4, 2))], "ignore_tags": np.array([False]),
         "shape_list": np.array([8, 8, 0.5, 0.5], np.float32), "_skipped": 1}
    b = {"image": np.ones((4, 4, 3), np.uint8), "polys": [], "ignore_tags": np.array([], bool),
         "shape_list": np.array([4, 4, 1, 1], np.float32), "_skipped": 0}
    batch = collate([a, b])
    assert batch["image"].shape == (2, 4, 4, 3) and batch["image"].dtype == torch.uint8
    assert isinstance(batch["polys"], list) and len(batch["polys"][0]) == 1 and batch["polys"][1] == []
    assert batch["shape_list"].shape == (2, 4) and batch["_skipped"] == 1


@pytest.mark.parametrize("device_type,compiled", [("cuda", True), ("npu", False), ("mps", False), ("xpu", False),
                                                  ("cpu", False)])
def test_compile_auto_means_cuda_only(device_type, compiled):
    """--compile auto as its help says: CUDA; the other accelerators stay eager unless --compile on."""
    from textdet.device import compiles_by_default
    from textdet.engine.step import want_compile

    auto_on = compiles_by_default(device_type)
    assert want_compile("auto", 0, device_type, auto_on) is compiled
    assert want_compile("on", 0, device_type, auto_on) is True
    assert want_compile("auto", 1, device_type, auto_on) is False


def test_system_deterministic_turns_on_deterministic_kernels(monkeypatch):
    from textdet.config import load_config
    from textdet.device import set_deterministic

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    cfg = load_config(None, ["system.deterministic=true"])
    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic,
              torch.backends.cudnn.benchmark)
    try:
        set_deterministic(cfg.system.deterministic)
        assert torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.deterministic
        assert not torch.backends.cudnn.benchmark and os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    finally:
        torch.use_deterministic_algorithms(before[0])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[1], before[2]


@pytest.mark.parametrize("start, interval, epochs, due", [
    (2, 2, 10, [2, 4, 6, 8, 10]),  # the written PP-OCR YAML
    (2, 2, 5, [2, 4, 5]),  # the last epoch always ends with a score
    (1, 1, 3, [1, 2, 3]),  # every epoch (the built-in recipe)
    (3, 5, 4, [3, 4]),
    (6, 1, 4, [4]),  # a start after the run: the last epoch still evaluates
])
def test_evaluations_follow_mindocr_and_always_the_last_epoch(start, interval, epochs, due):
    evaluation = TrainEvaluation(evaluator=None, num_epochs=epochs, val_start_epoch=start, val_interval=interval)
    assert [epoch for epoch in range(1, epochs + 1) if evaluation.due(epoch)] == due
